/*
 * kdec.h - helpers over the decoder library (decoder/decoder.h) for the
 * end-to-end tests: open a snapshot, find threads and functions by name,
 * count calls.
 */
#ifndef KDEC_H
#define KDEC_H

#include <stdint.h>

#include "decoder.h"

/* Decode path (stages 1-5).  NULL on error, with the message on stderr. */
struct kd_dec *kd_open(const char *path);
/* Thread index by name (first match) or by tid; KD_NONE if absent. */
uint32_t kd_thread(const struct kd_dec *d, const char *name);
uint32_t kd_thread_tid(const struct kd_dec *d, int32_t tid);
/* Function name of a call (symbol without any ".clone" suffix matters). */
const char *kd_func(const struct kd_dec *d, const struct kd_dec_call *c);
/* 1 if the call's function is exactly name. */
int kd_is(const struct kd_dec *d, const struct kd_dec_call *c, const char *name);
/* Calls of func (exact name) on thread (KD_NONE = any). */
uint64_t kd_count(const struct kd_dec *d, uint32_t thread, const char *func);
/* Calls flagged with any of flags. */
uint64_t kd_count_flags(const struct kd_dec *d, uint32_t flags);
/* Duration of a call in ns. */
uint64_t kd_ns(const struct kd_dec *d, const struct kd_dec_call *c);
/* Name of a mark/request name id. */
const char *kd_name(const struct kd_dec *d, uint32_t id);
/* The BUDGET section's entry of function name (muted or excluded), or NULL. */
const struct ktrace_muted_rec *kd_muted(const struct kd_dec *d, const char *name);

#endif /* KDEC_H */
