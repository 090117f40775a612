/*
 * out-explain.h - --format explain (out-explain.c).
 */
#ifndef KD_OUT_EXPLAIN_H
#define KD_OUT_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"
#include "sink.h"

/* explain of a file opened with opts.stream (out-explain.c), collecting
 * only the calls that overlap the explained request and the median one (a
 * walk of its own, through the range; the calls are freed after): 0 or -1
 * (message on stderr). */
int kd_out_explain_stream(FILE *f, struct kd_dec *d, const struct kd_out_opts *o);

void kd_out_explain(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o);

/* Explain: the chosen request (the trigger if it is wholly in the range,
 * else the slowest complete one) or KD_NONE. */
uint32_t kd_out_explain_pick(const struct kd_dec *d, uint32_t *median);

#endif /* KD_OUT_EXPLAIN_H */
