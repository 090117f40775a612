/*
 * kd_time.h - stage 4, time.c: the one clock conversion (ticks -> ns, wall clock
 * through the ANCHORS) and time formatting, used by every format.  Not
 * "time.h": the decoder's directory is on the include path, and <time.h>
 * is the system's.
 */
#ifndef KD_KD_TIME_H
#define KD_KD_TIME_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

/* Ticks (a difference) -> ns, saturating. */
uint64_t kd_time_ticks_ns(const struct kd_dec *d, uint64_t ticks);
/* Absolute tick -> CLOCK_REALTIME ns since the epoch. */
int64_t kd_time_wall_ns(const struct kd_dec *d, uint64_t tick);
/*
 * The time of an event: its tick's wall clock plus sub ns, sub being the
 * event's place among its thread's events in that tick (kd_ev.sub), capped
 * below the next tick.  Times within a tick are interpolated so that
 * viewers that nest by time see the recorded order; every format that
 * prints an event's time uses this.
 */
int64_t kd_time_event_ns(const struct kd_dec *d, uint64_t tick, uint32_t sub);
/* Same on a snapshot alone, on a full (unshifted) counter value. */
/* Anchors: find wall-clock steps (time.c), after they are read. */
void kd_time_find_steps(struct kd_snap *snap);
int64_t kd_time_snap_wall_ns(const struct kd_snap *snap, uint64_t tsc);
/* "HH:MM:SS.nnnnnnnnn" (UTC) into buf[32]; "YYYY-MM-DD " prefixed if date. */
void kd_time_fmt_wall(int64_t ns, int date, char *buf, size_t len);
/* "12.345 ms" style, adaptive unit, into buf. */
void kd_time_fmt_dur(uint64_t ns, char *buf, size_t len);

#endif /* KD_KD_TIME_H */
