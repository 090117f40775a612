/*
 * kd_sched.h - scheduling (sched.c): the SCHED section's switches -> per-thread
 * off-CPU and per-core on-CPU intervals (struct kd_dec_offcpu/oncpu in
 * result.h), and what sinks ask of them.  Not "sched.h": the decoder's
 * directory is on the include path, and <sched.h> is the system's.
 */
#ifndef KD_KD_SCHED_H
#define KD_KD_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

/* Turn the SCHED section into offcpu/oncpu intervals (threads seen only
 * there are added to d->threads); 0 or KD_ENOMEM. */
int kd_sched_decode(struct kd_dec *d);
/* Off-CPU ticks of a thread inside [b, e): out[KD_OFF_BLOCKED],
 * out[KD_OFF_PREEMPTED]. */
void kd_sched_offcpu_in(const struct kd_dec *d, uint32_t thread, uint64_t b, uint64_t e,
                           uint64_t out[2]);
/* "scheduling: ..." line for the summary (status, switches, losses, why not). */
void kd_sched_status(const struct kd_dec *d, char *buf, size_t len);
/* "<d> on-CPU, <d> blocked, <d> preempted" for wall ticks and off[2] ticks. */
void kd_sched_fmt_split(const struct kd_dec *d, uint64_t wall, const uint64_t off[2],
                           char *buf, size_t len);

#endif /* KD_KD_SCHED_H */
