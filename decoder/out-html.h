/*
 * out-html.h - --format html (out-html.c).
 */
#ifndef KD_OUT_HTML_H
#define KD_OUT_HTML_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"
#include "sink.h"

/* HTML timeline (out-html.c): one self-contained page for all files.  A page
 * holds at most KD_HTML_MAX_CALLS calls (o->limit lowers it); beyond,
 * nothing is written, stderr says how to cut the window, and -1 returns. */
#define KD_HTML_MAX_CALLS 20000000ull
int kd_out_html(FILE *f, struct kd_dec **decs, int n, const struct kd_out_opts *o);
/* Calls the page would hold (--thread applied). */
uint64_t kd_out_html_calls(struct kd_dec *const *decs, int n,
                            const struct kd_out_opts *o);

#endif /* KD_OUT_HTML_H */
