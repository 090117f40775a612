/*
 * out-summary.h - --format summary (out-summary.c).
 */
#ifndef KD_OUT_SUMMARY_H
#define KD_OUT_SUMMARY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"

void kd_out_summary(FILE *f, const struct kd_dec *d);
/* "merged timeline of N files" (out-summary.c): each file's process,
 * window, offset on the merged timeline and the clock offset used. */
void kd_out_summary_merged(FILE *f, struct kd_dec *const *decs, uint32_t n);

#endif /* KD_OUT_SUMMARY_H */
