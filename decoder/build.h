/*
 * build.h - stage 3, build.c: the builder.  kd_build_prepare cuts the cores'
 * records into pieces of one thread segment (window, threads, core runs);
 * kd_build_walk walks them and emits the event stream (stream.h).
 * Builder-internal: dec.c and range.c (the walk every sink goes through)
 * call it; sinks never do.
 */
#ifndef KD_BUILD_H
#define KD_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"
#include "stream.h"

/* Stage 3's first pass: window, pieces, threads, core runs (d->pass.build). */
int kd_build_prepare(struct kd_dec *d, struct kd_dec_error *err);
/* Walk every thread, emitting the stream (stream.h) to sink; fills
 * d->reqs, d->marks, d->counts, per-thread counts.  May run again. */
int kd_build_walk(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err);
void kd_build_free(struct kd_build *b);

#endif /* KD_BUILD_H */
