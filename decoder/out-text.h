/*
 * out-text.h - --format text (out-text.c).
 */
#ifndef KD_OUT_TEXT_H
#define KD_OUT_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"
#include "sink.h"

/* Per-core occupancy from the context switches (part of text). */
void kd_out_text_cores(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o);

/* The text timeline's pieces (out-text.c): its lines and their order. */
enum kd_text_type { KD_TEXT_CALL, KD_TEXT_MARK, KD_TEXT_REQ, KD_TEXT_OFF };
struct kd_text_item {
	uint64_t tick;            /* ticks: the line's time (a call's begin) */
	uint32_t thread;          /* thread index */
	uint32_t sub;             /* recorded order within the thread's tick */
	uint32_t type;            /* enum kd_text_type */
	uint32_t idx;             /* in d->calls/marks/reqs/offcpu (calls: any
	                             number rising in the thread's recorded order) */
};
/* The timeline's order: time, thread, recorded order, never depth. */
int kd_out_text_item_cmp(const void *a, const void *b);
int kd_out_text_want_thread(const struct kd_dec *d, uint32_t th, const struct kd_out_opts *o);
/* d's marks, requests, off-CPU intervals (and calls if `calls`) of the
 * wanted threads, sorted; *out malloc'ed.  Returns their number. */
size_t kd_out_text_items(const struct kd_dec *d, const struct kd_out_opts *o, int calls,
                     struct kd_text_item **out);
/* "\ntimeline (UTC, ...):" and the muted note. */
void kd_out_text_header(FILE *f, const struct kd_dec *d);
/* One line; c: the call of a KD_TEXT_CALL item. */
void kd_out_text_line(FILE *f, const struct kd_dec *d, const struct kd_text_item *x,
                  const struct kd_dec_call *c);

/*
 * The text timeline (out-text.c), from the event stream: memory
 * bounded by threads x stack depth + marks, requests, off-CPU intervals +
 * buffers, not by calls.  Each thread's calls go to a spool in begin order
 * (32 bytes a call, in memory up to 1 MiB, then in an unlinked temporary
 * file in $TMPDIR or /tmp), then a k-way merge over the threads prints the
 * lines in kd_out_text_item_cmp order.  --limit N spools at most N calls per
 * thread.  A collected file (not opened with opts.stream: the merge cut its
 * calls) is printed from d->calls in the same order.
 */
struct kd_text_stream;
/* Walk d into a spool (0), or -1 (a message on stderr: the walk or the
 * temporary file failed). */
int kd_out_text_stream_open(struct kd_text_stream **out, struct kd_dec *d,
                        const struct kd_out_opts *o);
/* The next timeline line printed to f: 1, or 0 when none is left. */
int kd_out_text_stream_next(struct kd_text_stream *t, FILE *f);
/* Lines not printed yet (calls counted even where --limit did not spool them). */
uint64_t kd_out_text_stream_left(const struct kd_text_stream *t);
void kd_out_text_stream_free(struct kd_text_stream *t);
/* The whole timeline of one file: 0 or -1. */
int kd_out_text(FILE *f, struct kd_dec *d, const struct kd_out_opts *o);
/* One text timeline of all files (out-text.c), lines tagged "[N]" by file:
 * files opened with opts.stream from their streams (bounded), the others
 * from their collected calls.  0, or -1 (a stream failed; said on stderr). */
int kd_out_text_merged(FILE *f, struct kd_dec *const *decs, uint32_t n,
                       const struct kd_out_opts *o);

#endif /* KD_OUT_TEXT_H */
