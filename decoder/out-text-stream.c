/*
 * out-text-stream.c - --format text: the timeline, one line per call, mark,
 * request and off-CPU interval in time order, from the event stream, with
 * memory bounded by threads x stack depth + marks, requests, off-CPU
 * intervals + buffers, not by calls.  The line format and the order
 * (kd_text_line, kd_text_item_cmp) are out-text.c's, with the summary.
 *
 * The builder emits one thread after another; the timeline interleaves
 * them by time.  An external merge:
 *
 *   1. spool: the walk (through the range, kd_dec_walk_cut) writes each
 *      thread's calls, in begin (recorded) order, as fixed 32-byte records
 *      into one spool; a thread's records are contiguous.  A call's record
 *      is reserved at CALL_BEGIN and filled at CALL_END from the open-frame
 *      stack (which holds the record and its place): in the write buffer if
 *      it is still there, else by one pwrite() at its offset.  The spool
 *      lives in a 1 MiB buffer; past that, in an unlinked temporary file
 *      ($TMPDIR or /tmp).
 *   2. merge: a heap over the threads' cursors (each reading 128 records at
 *      a time) plus the sorted marks, requests and off-CPU intervals (kept
 *      by the builder and sched.c anyway: not per call) yields the lines in
 *      kd_text_item_cmp order.  A thread's begin order is that order
 *      already (ticks never go back within a thread, stream.h; `sub`
 *      numbers a tick's events), which the spool checks; were it ever not,
 *      the stream falls back to the collected calls for that file (same
 *      output, memory per call).
 * A file whose calls are collected already (the merge of overlapping
 * snapshots cut them, merge.c) is printed from them, sorted the same way.
 *
 * Why a spool and not a resumable walk (one cursor per thread in the
 * builder): the builder's per-thread walk (pre-pass, pieces across cores,
 * lost-exit repair) is build.c's, being reworked for bounded block reads;
 * a spool needs nothing from it but the stream every sink gets, costs one
 * sequential write and read of 32 bytes a call, and keeps the walk's
 * speed.  --limit N spools at most N calls per thread (the first N lines
 * cannot need more), so a limited timeline writes no file at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decoder.h"

/* One call in the spool. */
struct rec {
	uint64_t begin;           /* ticks */
	uint64_t end;             /* ticks (== begin until CALL_END) */
	uint32_t func;            /* function index */
	uint32_t depth;
	uint32_t core;            /* core index of the entry */
	uint16_t flags;           /* enum kd_dec_call_flags */
	uint16_t sub;             /* place in the begin's tick, capped (as d->calls) */
};
_Static_assert(sizeof(struct rec) == 32, "spool records are 32 bytes");

#define WBUF_RECS 32768u      /* 1 MiB write buffer */
#define RBUF_RECS 128u        /* 4 KiB read buffer per thread */
#define NOT_SPOOLED UINT64_MAX
#define OTHER UINT32_MAX      /* heap entry of the marks/requests/off-CPU list */

struct frame {
	uint64_t at;              /* record index, or NOT_SPOOLED (--limit) */
	struct rec r;
};

struct tthread {
	uint64_t first;           /* record index of its first call */
	uint64_t n;               /* records spooled */
	uint64_t total;           /* calls (spooled or not) */
	uint64_t next;            /* read side: next record index to read */
	struct rec *buf;          /* read buffer */
	uint32_t bn, bi;          /* records in buf, next one */
};

struct hent {
	uint32_t src;             /* thread index, or OTHER */
	struct kd_text_item key;
	struct rec r;             /* the call, for a thread's entry */
};

struct kd_text_stream {
	struct kd_dec *d;
	struct kd_out_opts o;
	/* spool */
	int fd;                   /* -1 until the write buffer first overflows */
	struct rec *w;            /* records wfirst .. wfirst + wn - 1 */
	uint32_t wn;
	uint64_t wfirst, nrec;
	struct frame *stack;      /* the current thread's open frames */
	size_t capstack;
	uint32_t depth;
	struct tthread *th;       /* [nth] */
	uint32_t nth, cur;
	uint64_t last_tick;       /* the current thread's last spooled begin ... */
	uint32_t last_sub;        /* ... and its sub */
	int unsorted;             /* a thread's begin order was not time order */
	int werr;                 /* errno of a failed write or read, 0 */
	/* merge */
	struct kd_text_item *other; /* marks, requests, off-CPU; all calls too
	                             when collected (the fallback) */
	size_t nother, oi;
	struct hent *heap;
	uint32_t nheap;
	uint64_t left;            /* lines not printed yet */
	int collected;            /* d->calls, items in `other`: a collected file
	                             (the merge cut it), or the fallback */
	int owns_calls;           /* the fallback collected them: freed with t */
};

static const char *spool_dir(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/tmp";
}

static void flush_w(struct kd_text_stream *t)
{
	const char *p = (const char *)t->w;
	size_t len = (size_t)t->wn * sizeof(struct rec);
	uint64_t off = t->wfirst * sizeof(struct rec);

	if (!t->wn)
		return;
	if (t->fd < 0 && !t->werr) {
		size_t n = strlen(spool_dir()) + 40;
		char *path = kd_xmalloc(n, "the text timeline");

		snprintf(path, n, "%s/ktrace-decode-text-XXXXXX", spool_dir());
		t->fd = mkstemp(path);
		if (t->fd < 0) {
			t->werr = errno;
		} else {
			unlink(path); /* gone with the descriptor, whatever happens */
			fcntl(t->fd, F_SETFD, FD_CLOEXEC);
		}
		free(path);
	}
	while (len && !t->werr) {
		ssize_t k = pwrite(t->fd, p, len, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			t->werr = k < 0 ? errno : ENOSPC;
			break;
		}
		p += k;
		len -= (size_t)k;
		off += (uint64_t)k;
	}
	t->wfirst += t->wn;
	t->wn = 0;
}

/* Write a finished record back to its place. */
static void put_rec(struct kd_text_stream *t, uint64_t at, const struct rec *r)
{
	if (at >= t->wfirst) {
		t->w[at - t->wfirst] = *r;
		return;
	}
	for (;;) {
		ssize_t k = t->werr ? 0 : pwrite(t->fd, r, sizeof(*r), (off_t)(at * sizeof(*r)));

		if (k < 0 && errno == EINTR)
			continue;
		if (k != (ssize_t)sizeof(*r) && !t->werr)
			t->werr = k < 0 ? errno : ENOSPC;
		return;
	}
}

static void spool_ev(void *ctx, const struct kd_dec *d, const struct kd_ev *e)
{
	struct kd_text_stream *t = ctx;
	struct tthread *th;
	struct frame *fr;

	switch (e->kind) {
	case KD_EV_THREAD_BEGIN:
		t->cur = e->thread;
		t->depth = 0;
		t->last_tick = 0;
		t->last_sub = 0;
		if (t->cur < t->nth)
			t->th[t->cur].first = t->nrec;
		return;
	case KD_EV_CALL_BEGIN:
		if (e->thread >= t->nth || !kd_text_want_thread(d, e->thread, &t->o))
			return;
		th = &t->th[e->thread];
		if (t->depth >= t->capstack &&
		    kd_grow(&t->stack, &t->capstack, t->depth, sizeof(*t->stack), "the text timeline"))
			kd_dec_oom("the text timeline", SIZE_MAX);
		fr = &t->stack[t->depth++];
		fr->r = (struct rec){ e->tick, e->tick, e->func, e->depth, e->core,
		                      (uint16_t)e->flags,
		                      e->sub > UINT16_MAX ? UINT16_MAX : (uint16_t)e->sub };
		th->total++;
		if (t->o.limit && th->n >= t->o.limit) {
			fr->at = NOT_SPOOLED; /* the first N lines cannot reach it */
			return;
		}
		if (e->tick < t->last_tick || (e->tick == t->last_tick && fr->r.sub < t->last_sub))
			t->unsorted = 1;
		t->last_tick = e->tick;
		t->last_sub = fr->r.sub;
		if (t->wn == WBUF_RECS)
			flush_w(t);
		fr->at = t->nrec++;
		t->w[t->wn++] = fr->r;
		th->n++;
		return;
	case KD_EV_CALL_END:
		if (e->thread >= t->nth || !kd_text_want_thread(d, e->thread, &t->o) || !t->depth)
			return;
		fr = &t->stack[--t->depth];
		if (fr->at == NOT_SPOOLED)
			return;
		fr->r.end = e->tick;
		fr->r.flags = (uint16_t)e->flags;
		put_rec(t, fr->at, &fr->r);
		return;
	default:
		return;
	}
}

/* Fill thread th's read buffer; 0, or -1 when it has no record left. */
static int fill(struct kd_text_stream *t, struct tthread *th)
{
	uint64_t end = th->first + th->n, k;
	uint32_t n;

	if (th->next >= end)
		return -1;
	if (!th->buf)
		th->buf = kd_xmalloc(RBUF_RECS * sizeof(*th->buf), "the text timeline");
	n = end - th->next < RBUF_RECS ? (uint32_t)(end - th->next) : RBUF_RECS;
	for (k = 0; k < n; ) {
		uint64_t at = th->next + k;

		if (at >= t->wfirst) {
			uint64_t m = n - k;

			memcpy(&th->buf[k], &t->w[at - t->wfirst], (size_t)m * sizeof(struct rec));
			k += m;
		} else {
			uint64_t m = t->wfirst - at < n - k ? t->wfirst - at : n - k;
			ssize_t got = t->werr ? -1 : pread(t->fd, &th->buf[k], (size_t)m * sizeof(struct rec),
			                                   (off_t)(at * sizeof(struct rec)));

			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0 || got % (ssize_t)sizeof(struct rec)) {
				if (!t->werr)
					t->werr = got < 0 ? errno : EIO;
				return -1;
			}
			k += (uint64_t)got / sizeof(struct rec);
		}
	}
	th->next += n;
	th->bn = n;
	th->bi = 0;
	return 0;
}

/* The next entry of source src into *h; 0, or -1 when it is exhausted. */
static int advance(struct kd_text_stream *t, uint32_t src, struct hent *h)
{
	struct tthread *th;

	h->src = src;
	if (src == OTHER) {
		if (t->oi >= t->nother)
			return -1;
		h->key = t->other[t->oi++];
		return 0;
	}
	th = &t->th[src];
	if (th->bi >= th->bn && fill(t, th))
		return -1;
	h->r = th->buf[th->bi++];
	h->key = (struct kd_text_item){ h->r.begin, src, h->r.sub, KD_TEXT_CALL,
	                                (uint32_t)(th->next - th->bn + th->bi - 1 - th->first) };
	return 0;
}

static int hless(const struct hent *a, const struct hent *b)
{
	return kd_text_item_cmp(&a->key, &b->key) < 0;
}

static void sift_down(struct kd_text_stream *t, uint32_t i)
{
	struct hent *h = t->heap;

	for (;;) {
		uint32_t l = 2 * i + 1, m = i;
		struct hent x;

		if (l < t->nheap && hless(&h[l], &h[m]))
			m = l;
		if (l + 1 < t->nheap && hless(&h[l + 1], &h[m]))
			m = l + 1;
		if (m == i)
			return;
		x = h[i];
		h[i] = h[m];
		h[m] = x;
		i = m;
	}
}

/* The fallback: the walk's begin order was not time order somewhere. */
static int collect_instead(struct kd_text_stream *t)
{
	struct kd_dec_error err;
	char msg[512];

	if (kd_dec_collect(t->d, &err)) {
		kd_dec_error_format(&err, t->d->file, msg, sizeof(msg));
		fprintf(stderr, "%s\n", msg);
		return -1;
	}
	t->d->opts.stream = 1; /* its calls go with the stream (kd_text_stream_free) */
	t->owns_calls = 1;
	free(t->other);
	t->nother = kd_text_items(t->d, &t->o, 1, &t->other);
	t->left = t->nother;
	t->collected = 1;
	return 0;
}

int kd_text_stream_open(struct kd_text_stream **out, struct kd_dec *d,
                        const struct kd_out_opts *o)
{
	struct kd_text_stream *t = kd_xcalloc(1, sizeof(*t), "the text timeline");
	struct kd_dec_error err;
	char msg[512];

	*out = NULL;
	t->d = d;
	if (o)
		t->o = *o;
	t->fd = -1;
	t->nth = d->nthreads;
	t->th = kd_xcalloc((size_t)t->nth + 1, sizeof(*t->th), "the text timeline");
	if (!d->opts.stream) {
		/* A collected file (the merge of overlapping snapshots cut its
		 * calls): its calls, sorted with the rest. */
		t->nother = kd_text_items(d, &t->o, 1, &t->other);
		t->left = t->nother;
		t->collected = 1;
		*out = t;
		return 0;
	}
	t->w = kd_xmalloc(WBUF_RECS * sizeof(*t->w), "the text timeline");
	if (kd_dec_walk_cut(d, (struct kd_sink){ spool_ev, t }, &err)) {
		kd_dec_error_format(&err, d->file, msg, sizeof(msg));
		fprintf(stderr, "%s\n", msg);
		kd_text_stream_free(t);
		return -1;
	}
	if (t->werr) {
		fprintf(stderr, "ktrace-decode: %s: the text timeline's temporary file in %s: %s "
		        "(it holds 32 bytes per call: set TMPDIR to a directory with room, or cut "
		        "the window with --from/--to, --thread or --limit)\n",
		        d->file, spool_dir(), strerror(t->werr));
		kd_text_stream_free(t);
		return -1;
	}
	free(t->stack);
	t->stack = NULL;
	t->capstack = 0;
	if (t->unsorted) {
		/* Never seen (stream.h: ticks never go back within a thread), but
		 * the output must be kd_out_text's whatever the stream does. */
		free(t->w);
		t->w = NULL;
		if (collect_instead(t)) {
			kd_text_stream_free(t);
			return -1;
		}
	} else {
		t->nother = kd_text_items(d, &t->o, 0, &t->other);
		t->left = t->nother;
		for (uint32_t i = 0; i < t->nth; i++)
			t->left += t->th[i].total;
		t->heap = kd_xcalloc((size_t)t->nth + 2, sizeof(*t->heap), "the text timeline");
		for (uint32_t i = 0; i < t->nth; i++)
			if (t->th[i].n) {
				t->th[i].next = t->th[i].first;
				if (!advance(t, i, &t->heap[t->nheap]))
					t->nheap++;
			}
		if (!advance(t, OTHER, &t->heap[t->nheap]))
			t->nheap++;
		for (uint32_t i = t->nheap / 2; i-- > 0;)
			sift_down(t, i);
	}
	*out = t;
	return 0;
}

int kd_text_stream_next(struct kd_text_stream *t, FILE *f)
{
	struct hent *h;

	if (t->collected) {
		const struct kd_text_item *x;

		if (t->oi >= t->nother)
			return 0;
		x = &t->other[t->oi++];
		kd_text_line(f, t->d, x, x->type == KD_TEXT_CALL ? &t->d->calls[x->idx] : NULL);
		t->left--;
		return 1;
	}
	if (!t->nheap)
		return 0;
	h = &t->heap[0];
	if (h->src == OTHER) {
		kd_text_line(f, t->d, &h->key, NULL);
	} else {
		struct kd_dec_call c = { .begin = h->r.begin, .end = h->r.end, .func = h->r.func,
			                 .thread = h->src, .parent = KD_NONE, .depth = h->r.depth,
			                 .core = h->r.core, .flags = h->r.flags,
			                 .begin_sub = h->r.sub };

		kd_text_line(f, t->d, &h->key, &c);
	}
	if (t->left)
		t->left--;
	if (advance(t, h->src, h))
		*h = t->heap[--t->nheap];
	sift_down(t, 0);
	return 1;
}

uint64_t kd_text_stream_left(const struct kd_text_stream *t)
{
	return t->left;
}

void kd_text_stream_free(struct kd_text_stream *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	for (uint32_t i = 0; t->th && i < t->nth; i++)
		free(t->th[i].buf);
	if (t->owns_calls) {
		free(t->d->calls);
		t->d->calls = NULL;
		t->d->ncalls = 0;
	}
	free(t->th);
	free(t->w);
	free(t->stack);
	free(t->other);
	free(t->heap);
	free(t);
}

int kd_out_text(FILE *f, struct kd_dec *d, const struct kd_out_opts *o)
{
	struct kd_text_stream *t;
	uint64_t lines = 0;
	int rc = 0;

	if (kd_text_stream_open(&t, d, o))
		return -1;
	kd_text_header(f, d);
	for (;;) {
		if (o && o->limit && lines >= o->limit && t->left) {
			fprintf(f, "... %" PRIu64 " more lines (--limit %" PRIu64 ")\n", t->left,
			        o->limit);
			break;
		}
		if (!kd_text_stream_next(t, f))
			break;
		lines++;
	}
	if (t->werr) {
		fprintf(stderr, "ktrace-decode: %s: reading the text timeline's temporary file: %s\n",
		        d->file, strerror(t->werr));
		rc = -1;
	}
	kd_out_text_cores(f, d, o);
	kd_text_stream_free(t);
	return rc;
}
