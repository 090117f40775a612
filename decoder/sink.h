/*
 * sink.h - what an output format (out-*.c) needs besides the stream (stream.h)
 * and the decoded result (result.h): its options, and the walk every
 * streamed sink makes, through the range (defined in range.c, the stage in
 * front of every walk).  A sink includes this, stream.h and the helper
 * headers it uses (names.h, kd_time.h, budget.h, kd_sched.h, requests.h,
 * calltree.h, merge.h); never another sink's header nor a reader or
 * builder one (read.h, iter.h, build.h): test_decoder_layers checks.
 */
#ifndef KD_SINK_H
#define KD_SINK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"
#include "stream.h"
#include "util.h"

struct kd_out_opts {
	int have_tid;             /* --thread given */
	int32_t tid;              /* --thread TID */
	uint64_t limit;           /* --limit N (0 = no limit) */
	int quiet;                /* -q */
	int verbose;              /* -v: the summary on stderr too, for formats
	                             whose output is not text (chrome, perfetto,
	                             html, folded) */
	int nfiles;               /* FILEs given (several: text leaves its
	                             timeline to the merged one) */
};

/* kd_build_walk with d->cut.range (if set) cut on the stream: the filter, then
 * requests, marks, runs, intervals and the window as kd_range_apply cuts
 * them; the summary's range lines count as on the collector.  Every
 * streamed sink walks through this. */
int kd_range_walk_cut(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err);
/* The same for a sink that collects calls and reads requests' call
 * positions (call_first ...): they are remapped to the calls the range
 * keeps, not cleared (5 bytes a call while walking). */
int kd_range_walk_cut_pos(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err);
/* Ticks: d's window start once kd_range_walk_cut has cut it (for a sink that
 * writes its time origin before the walk). */
uint64_t kd_range_start(const struct kd_dec *d);
/* The summary's "range:" / "min-dur:" lines, if a cut was made. */
void kd_range_note(FILE *f, const struct kd_dec *d);

#endif /* KD_SINK_H */
