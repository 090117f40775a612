/*
 * out-stats.h - --format stats (out-stats.c).
 */
#ifndef KD_OUT_STATS_H
#define KD_OUT_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"
#include "sink.h"

void kd_out_stats(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o);

/* Statistics per function (shared by stats and explain). */
struct kd_func_stats {
	uint32_t func;
	uint64_t calls;
	uint64_t total;           /* ns, inclusive (calls nested in themselves counted once) */
	uint64_t self;            /* ns */
	uint64_t p50, p99, max;   /* ns, of inclusive durations */
	double mean;              /* ns */
};
/* Returns an array sorted by self time descending (caller frees), or NULL. */
struct kd_func_stats *kd_out_stats_funcs(const struct kd_dec *d, int32_t tid,
                                             int have_tid, uint32_t *n);

#endif /* KD_OUT_STATS_H */
