/*
 * out-chrome.h - --format chrome (out-chrome.c).
 */
#ifndef KD_OUT_CHROME_H
#define KD_OUT_CHROME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"
#include "sink.h"

/* Chrome JSON: begin, one call per decoded file (distinct pid_base each), end. */
struct kd_chrome {
	FILE *f;
	int first;                /* no event written yet */
	int64_t base_wall_ns;     /* ns since epoch: ts 0 of the trace */
	int have_base;
};
void kd_out_chrome_begin(struct kd_chrome *c, FILE *f, int64_t base_wall_ns);
/* Walks d's stream (kd_build_walk): d may be opened with opts.stream. */
void kd_out_chrome_file(struct kd_chrome *c, struct kd_dec *d,
                             int64_t pid, const struct kd_out_opts *o);
void kd_out_chrome_end(struct kd_chrome *c);

#endif /* KD_OUT_CHROME_H */
