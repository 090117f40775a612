/*
 * dec.h - the decoder's lifecycle (dec.c), composing the stages: open a
 * file or a buffer (read, order, prepare, symbols, scheduling, and the
 * collector unless opts.stream), collect again, free.
 */
#ifndef KD_DEC_H
#define KD_DEC_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

/* Run stages 1-5 on a file (a regular file read in bounded windows, a pipe
 * into memory) or a caller's buffer (not copied). */
int kd_dec_open_file(const char *path, const struct kd_dec_opts *opts,
                          struct kd_dec **out, struct kd_dec_error *err);
int kd_dec_open_buffer(const void *buf, size_t len, const char *name,
                            const struct kd_dec_opts *opts, struct kd_dec **out,
                            struct kd_dec_error *err);
void kd_dec_free(struct kd_dec *d);
/* Stage 3 on a read + ordered snapshot already in d->snap: prepare, then
 * walk with the collector (d->calls). */
int kd_dec_build(struct kd_dec *d, struct kd_dec_error *err);
/* Walk d (opened with opts.stream, or again) with the collector: d->calls
 * filled, opts.stream cleared; with d->cut.range set, through the range
 * filter (kd_range_collect, range.c).  0, or an error from kd_build_walk. */
struct kd_dec_error;
int kd_dec_collect(struct kd_dec *d, struct kd_dec_error *err);

#endif /* KD_DEC_H */
