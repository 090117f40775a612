/*
 * out-text.c - --format text: the timeline, one line per call, mark,
 * request and off-CPU interval in time order, from the event stream, with
 * memory bounded by threads x stack depth + marks, requests, off-CPU
 * intervals + buffers, not by calls.   Its pieces (the line, the
 * order: kd_out_text_line, kd_out_text_item_cmp) first, then the spool, then the
 * timeline of several files (kd_out_text_merged).
 *
 * The builder emits one thread after another; the timeline interleaves
 * them by time.  An external merge:
 *
 *   1. spool: the walk (through the range, kd_range_walk_cut) writes each
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
 *      kd_out_text_item_cmp order.  A thread's begin order is that order
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
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "dec.h"
#include "kd_time.h"
#include "names.h"
#include "out-text.h"
#include "result.h"
#include "sink.h"
#include "stream.h"
#include "util.h"

/* ---- text timeline -------------------------------------------------------- */

/*
 * Time order; within one tick, each thread's lines in recorded order (sub:
 * the stream's place within the tick), never by depth, so a call's child
 * always follows it and a shallower later call never comes between.
 * Off-CPU intervals (no recorded place) come first in their tick.
 */
int kd_out_text_item_cmp(const void *a, const void *b)
{
	const struct kd_text_item *x = a, *y = b;

	if (x->tick != y->tick)
		return x->tick < y->tick ? -1 : 1;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->sub != y->sub)
		return x->sub < y->sub ? -1 : 1;
	if (x->type != y->type)
		return x->type > y->type ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int kd_out_text_want_thread(const struct kd_dec *d, uint32_t th, const struct kd_out_opts *o)
{
	return !o || !o->have_tid || (th < d->nthreads && d->threads[th].tid == o->tid);
}

size_t kd_out_text_items(const struct kd_dec *d, const struct kd_out_opts *o, int calls,
                     struct kd_text_item **out)
{
	size_t n = 0, cap = (calls ? (size_t)d->ncalls : 0) + d->nmarks + d->nreqs + d->noffcpu;
	struct kd_text_item *it = kd_xmalloc((cap ? cap : 1) * sizeof(*it), "the text timeline");

	for (uint32_t i = 0; calls && i < d->ncalls; i++)
		if (kd_out_text_want_thread(d, d->calls[i].thread, o))
			it[n++] = (struct kd_text_item){ d->calls[i].begin, d->calls[i].thread,
			                                 d->calls[i].begin_sub, KD_TEXT_CALL, i };
	for (uint32_t i = 0; i < d->nmarks; i++)
		if (kd_out_text_want_thread(d, d->marks[i].thread, o))
			it[n++] = (struct kd_text_item){ d->marks[i].tick, d->marks[i].thread,
			                                 d->marks[i].sub, KD_TEXT_MARK, i };
	for (uint32_t i = 0; i < d->nreqs; i++)
		if (kd_out_text_want_thread(d, d->reqs[i].thread, o))
			it[n++] = (struct kd_text_item){ d->reqs[i].begin, d->reqs[i].thread,
			                                 d->reqs[i].begin_sub, KD_TEXT_REQ, i };
	for (uint32_t i = 0; i < d->noffcpu; i++)
		if (kd_out_text_want_thread(d, d->offcpu[i].thread, o) &&
		    d->offcpu[i].end > d->window_start && d->offcpu[i].begin < d->window_end)
			it[n++] = (struct kd_text_item){ d->offcpu[i].begin, d->offcpu[i].thread, 0,
			                                 KD_TEXT_OFF, i };
	qsort(it, n, sizeof(*it), kd_out_text_item_cmp);
	*out = it;
	return n;
}

/*
 * kd_time_fmt_wall(ns, 0, ...) without gmtime_r and snprintf: "HH:MM:SS.nnnnnnnnn"
 * from the epoch's seconds (UTC has no leap seconds in time_t, as gmtime).
 * Times before 1970 or after 9999 go to kd_time_fmt_wall.  A timeline prints
 * millions of these: gmtime and the format were a tenth of text's time.
 */
static void fmt_tod(int64_t ns, char *buf, size_t len)
{
	int64_t sec = ns / 1000000000, frac = ns % 1000000000;
	uint32_t s;

	if (ns < 0 || sec > 253402300799ll || len < 19) {
		kd_time_fmt_wall(ns, 0, buf, len);
		return;
	}
	s = (uint32_t)(sec % 86400);
	buf[0] = (char)('0' + s / 36000);
	buf[1] = (char)('0' + s / 3600 % 10);
	buf[2] = ':';
	buf[3] = (char)('0' + s % 3600 / 600);
	buf[4] = (char)('0' + s % 3600 / 60 % 10);
	buf[5] = ':';
	buf[6] = (char)('0' + s % 60 / 10);
	buf[7] = (char)('0' + s % 10);
	buf[8] = '.';
	for (int i = 17; i >= 9; i--) {
		buf[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	buf[18] = '\0';
}

void kd_out_text_line(FILE *f, const struct kd_dec *d, const struct kd_text_item *x,
                  const struct kd_dec_call *c)
{
	char w[48], dur[32], lbl[64], nb[96], kb[64], eb[96];
	uint32_t th, core;

	/* The tick's time (time.c, as every format); chrome adds x->sub ns
	 * within the tick to make times distinct, text needs no such. */
	fmt_tod(kd_time_wall_ns(d, x->tick), w, sizeof(w));
	if (x->type == KD_TEXT_CALL) {
		uint32_t depth = c->depth > 60 ? 60 : c->depth;

		th = c->thread;
		core = c->core;
		kd_time_fmt_dur(kd_time_ticks_ns(d, c->end - c->begin), dur, sizeof(dur));
		fprintf(f, "%s  %-20s cpu%-3" PRIu32 " %*s%s%s  %s%s%s%s%s\n", w,
		        kd_names_thread(d, th, lbl, sizeof(lbl)),
		        core < d->snap.ncores ? d->snap.cores[core].cpu : 0, (int)(depth * 2), "",
		        (c->flags & KD_CALL_SPAN) ? "span " : "",
		        kd_names_func_short(d, c->func), dur,
		        (c->flags & KD_CALL_TRUNC_BEGIN) ? "  [entered before window]" : "",
		        (c->flags & KD_CALL_EXIT_LOST) ? "  [exit lost]" :
		        (c->flags & KD_CALL_TRUNC_END) ? "  [still running at window end]" : "",
		        c->depth > 60 ? "  [deep]" : "",
		        /* its cpu is the one the held run was written to */
		        (c->flags & KD_CALL_HELD) ? "  [held]" : "");
	} else if (x->type == KD_TEXT_OFF) {
		const struct kd_dec_offcpu *q = &d->offcpu[x->idx];

		kd_time_fmt_dur(kd_time_ticks_ns(d, q->end - q->begin), dur, sizeof(dur));
		fprintf(f, "%s  %-20s        ~~ off-CPU (%s) %s\n", w,
		        kd_names_thread(d, q->thread, lbl, sizeof(lbl)),
		        q->why == KD_OFF_PREEMPTED ? "preempted" : "blocked", dur);
	} else if (x->type == KD_TEXT_MARK) {
		const struct kd_dec_mark *m = &d->marks[x->idx];

		th = m->thread;
		core = m->core;
		fprintf(f, "%s  %-20s cpu%-3" PRIu32 " * mark %s = %" PRIu64 " (0x%" PRIx64 ")\n",
		        w, kd_names_thread(d, th, lbl, sizeof(lbl)),
		        core < d->snap.ncores ? d->snap.cores[core].cpu : 0,
		        kd_names_id(d, m->name, nb, sizeof(nb)), m->value, m->value);
	} else {
		const struct kd_dec_request *r = &d->reqs[x->idx];

		th = r->thread;
		core = r->core;
		kd_time_fmt_dur(kd_time_ticks_ns(d, r->end - r->begin), dur, sizeof(dur));
		/* format 2: a request ended on another thread says where */
		eb[0] = 0;
		if ((r->flags & (KD_REQ_NUMBERED | KD_REQ_USER_ID)) && r->end_thread != KD_NONE &&
		    r->end_thread != r->thread) {
			char el[64];

			snprintf(eb, sizeof(eb), "  ended on %s",
			         kd_names_thread(d, r->end_thread, el, sizeof(el)));
		}
		fprintf(f, "%s  %-20s cpu%-3" PRIu32 " >> request %s  %s%s%s%s%s%s%s\n", w,
		        kd_names_thread(d, th, lbl, sizeof(lbl)),
		        core < d->snap.ncores ? d->snap.cores[core].cpu : 0,
		        kd_names_req(d, r, nb, sizeof(nb)), dur,
		        r->keep ? "  kept: " : "", r->keep ? kd_names_req_keep(r->keep, kb, sizeof(kb)) : "",
		        eb,
		        (r->flags & KD_REQ_TRUNC_BEGIN) ? "  [began before window]" : "",
		        (r->flags & KD_REQ_TRUNC_END) ? "  [not finished in window]" : "",
		        (r->flags & KD_REQ_TRIGGER) ? "  <== TRIGGER" : "");
	}
}

void kd_out_text_header(FILE *f, const struct kd_dec *d)
{
	fprintf(f, "\ntimeline (UTC, one line per call at its entry):\n");
	kd_budget_note(f, d, "");
}

/* Per-core tracks from the context switches: which of the process's
 * threads ran on each core, and when the core ran something else. */
void kd_out_text_cores(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o)
{
	char w[48], dur[32], lbl[64];
	uint64_t lines = 0;

	if (!d->sched)
		return;
	fprintf(f, "\ncores (UTC, from context switches: the process's threads on each core; "
	           "\"other\" = another process or idle):\n");
	for (uint32_t i = 0; i < d->noncpu; i++) {
		const struct kd_dec_oncpu *r = &d->oncpu[i];
		uint64_t prev = i > 0 && d->oncpu[i - 1].cpu == r->cpu ? d->oncpu[i - 1].end
		                                                        : d->sched_from;

		if (r->end <= d->window_start || r->begin >= d->window_end)
			continue;
		if (o && o->limit && lines >= o->limit) {
			fprintf(f, "... more core intervals (--limit %" PRIu64 ")\n", o->limit);
			break;
		}
		if (r->begin > prev && prev >= d->window_start) {
			kd_time_fmt_wall(kd_time_wall_ns(d, prev), 0, w, sizeof(w));
			kd_time_fmt_dur(kd_time_ticks_ns(d, r->begin - prev), dur, sizeof(dur));
			fprintf(f, "%s  cpu%-3" PRIu32 " other  %s\n", w, r->cpu, dur);
			lines++;
		}
		if (!kd_out_text_want_thread(d, r->thread, o))
			continue;
		kd_time_fmt_wall(kd_time_wall_ns(d, r->begin), 0, w, sizeof(w));
		kd_time_fmt_dur(kd_time_ticks_ns(d, r->end - r->begin), dur, sizeof(dur));
		fprintf(f, "%s  cpu%-3" PRIu32 " %s  %s\n", w, r->cpu,
		        kd_names_thread(d, r->thread, lbl, sizeof(lbl)), dur);
		lines++;
	}
}

/* ---- the spool --------------------------------------------------------------- */

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
		if (e->thread >= t->nth || !kd_out_text_want_thread(d, e->thread, &t->o))
			return;
		th = &t->th[e->thread];
		if (t->depth >= t->capstack &&
		    kd_grow(&t->stack, &t->capstack, t->depth, sizeof(*t->stack), "the text timeline"))
			kd_util_oom("the text timeline", SIZE_MAX);
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
		if (e->thread >= t->nth || !kd_out_text_want_thread(d, e->thread, &t->o) || !t->depth)
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
	return kd_out_text_item_cmp(&a->key, &b->key) < 0;
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
		kd_util_error_format(&err, t->d->file, msg, sizeof(msg));
		fprintf(stderr, "%s\n", msg);
		return -1;
	}
	t->d->opts.stream = 1; /* its calls go with the stream (kd_out_text_stream_free) */
	t->owns_calls = 1;
	free(t->other);
	t->nother = kd_out_text_items(t->d, &t->o, 1, &t->other);
	t->left = t->nother;
	t->collected = 1;
	return 0;
}

int kd_out_text_stream_open(struct kd_text_stream **out, struct kd_dec *d,
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
		t->nother = kd_out_text_items(d, &t->o, 1, &t->other);
		t->left = t->nother;
		t->collected = 1;
		*out = t;
		return 0;
	}
	t->w = kd_xmalloc(WBUF_RECS * sizeof(*t->w), "the text timeline");
	if (kd_range_walk_cut(d, (struct kd_sink){ spool_ev, t }, &err)) {
		kd_util_error_format(&err, d->file, msg, sizeof(msg));
		fprintf(stderr, "%s\n", msg);
		kd_out_text_stream_free(t);
		return -1;
	}
	if (t->werr) {
		fprintf(stderr, "ktrace-decode: %s: the text timeline's temporary file in %s: %s "
		        "(it holds 32 bytes per call: set TMPDIR to a directory with room, or cut "
		        "the window with --from/--to, --thread or --limit)\n",
		        d->file, spool_dir(), strerror(t->werr));
		kd_out_text_stream_free(t);
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
			kd_out_text_stream_free(t);
			return -1;
		}
	} else {
		t->nother = kd_out_text_items(d, &t->o, 0, &t->other);
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

int kd_out_text_stream_next(struct kd_text_stream *t, FILE *f)
{
	struct hent *h;

	if (t->collected) {
		const struct kd_text_item *x;

		if (t->oi >= t->nother)
			return 0;
		x = &t->other[t->oi++];
		kd_out_text_line(f, t->d, x, x->type == KD_TEXT_CALL ? &t->d->calls[x->idx] : NULL);
		t->left--;
		return 1;
	}
	if (!t->nheap)
		return 0;
	h = &t->heap[0];
	if (h->src == OTHER) {
		kd_out_text_line(f, t->d, &h->key, NULL);
	} else {
		struct kd_dec_call c = { .begin = h->r.begin, .end = h->r.end, .func = h->r.func,
			                 .thread = h->src, .parent = KD_NONE, .depth = h->r.depth,
			                 .core = h->r.core, .flags = h->r.flags,
			                 .begin_sub = h->r.sub };

		kd_out_text_line(f, t->d, &h->key, &c);
	}
	if (t->left)
		t->left--;
	if (advance(t, h->src, h))
		*h = t->heap[--t->nheap];
	sift_down(t, 0);
	return 1;
}

uint64_t kd_out_text_stream_left(const struct kd_text_stream *t)
{
	return t->left;
}

void kd_out_text_stream_free(struct kd_text_stream *t)
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

	if (kd_out_text_stream_open(&t, d, o))
		return -1;
	kd_out_text_header(f, d);
	for (;;) {
		if (o && o->limit && lines >= o->limit && t->left) {
			fprintf(f, "... %" PRIu64 " more lines (--limit %" PRIu64 ")\n", t->left,
			        o->limit);
			break;
		}
		if (!kd_out_text_stream_next(t, f))
			break;
		lines++;
	}
	if (t->werr) {
		fprintf(stderr, "ktrace-decode: %s: reading the text timeline's temporary file: %s\n",
		        d->file, strerror(t->werr));
		rc = -1;
	}
	kd_out_text_cores(f, d, o);
	kd_out_text_stream_free(t);
	return rc;
}

/* ---- one text timeline for several files --------------------------------- */

/*
 * Each file's timeline lines, then its per-core lines, are merged by their
 * wall-clock time.  Every timeline line begins with "HH:MM:SS.nnnnnnnnn";
 * a line that does not (the header, notes) is left out.  Lines of one file
 * are in time order already; equal times keep file order.  Each line gets
 * "[N] " naming its file.  Each file gives its lines one at a time
 * (kd_text_stream: bounded memory for a streamed file; a collected one, cut
 * by the merge, from its calls).
 */
struct tl {
	char *buf;                /* the per-core lines still to merge */
	size_t len;
	char *p;                  /* next line in buf */
	struct kd_text_stream *ts; /* its timeline lines, until done */
	FILE *lf;                 /* the current line, rendered */
	char *lbuf;
	size_t llen;
	const char *cur;          /* the current line (NULL: none left) */
	size_t curlen;
	int64_t day;              /* ns: midnight of the current line's day */
	int64_t last;             /* ns: the previous line's time */
	int64_t key;              /* ns: time of the current line */
};

/* Time of day of a line, or -1. */
static int64_t line_tod(const char *l)
{
	int h, m, s, n = 0;
	long long frac;

	if (sscanf(l, "%2d:%2d:%2d.%9lld%n", &h, &m, &s, &frac, &n) != 4 || n != 18)
		return -1;
	return ((int64_t)h * 3600 + m * 60 + s) * 1000000000ll + frac;
}

/* The next timed line of t into cur and key (key INT64_MAX: none left). */
static void tl_next(struct tl *t)
{
	int64_t tod;

	t->cur = NULL;
	if (t->ts) {
		rewind(t->lf);
		if (kd_out_text_stream_next(t->ts, t->lf)) {
			if (fflush(t->lf) != 0 || !t->lbuf)
				kd_util_oom("the merged timeline", 0);
			t->cur = t->lbuf;
			t->curlen = (size_t)ftello(t->lf);
			if (t->curlen && t->cur[t->curlen - 1] == '\n')
				t->curlen--;
		} else {
			kd_out_text_stream_free(t->ts);
			t->ts = NULL;
		}
	}
	while (!t->cur && t->p && *t->p) {
		char *e = strchr(t->p, '\n');
		size_t n = e ? (size_t)(e - t->p) : strlen(t->p);

		if (line_tod(t->p) >= 0) {
			t->cur = t->p;
			t->curlen = n;
		}
		t->p += n + (e != NULL);
	}
	if (!t->cur) {
		t->key = INT64_MAX;
		return;
	}
	tod = line_tod(t->cur);
	if (t->day + tod < t->last - 43200000000000ll)
		t->day += 86400000000000ll; /* past midnight */
	t->key = t->day + tod;
	t->last = t->key;
}

int kd_out_text_merged(FILE *f, struct kd_dec *const *decs, uint32_t n,
                       const struct kd_out_opts *o)
{
	struct tl *t = kd_xcalloc((size_t)n + 1, sizeof(*t), "the merged timeline");
	struct kd_out_opts one = o ? *o : (struct kd_out_opts){ 0 };
	uint64_t lines = 0;
	int rc = 0;

	for (uint32_t i = 0; i < n; i++) {
		FILE *m;
		int64_t w;

		if (!decs[i])
			continue;
		/* A stream spools each thread's first --limit calls only: the
		 * merged first N lines take at most N of each file. */
		if (kd_out_text_stream_open(&t[i].ts, decs[i], &one)) {
			rc = -1; /* said on stderr; the other files still merge */
			continue;
		}
		t[i].lf = open_memstream(&t[i].lbuf, &t[i].llen);
		if (!t[i].lf)
			kd_util_oom("the merged timeline", 0);
		m = open_memstream(&t[i].buf, &t[i].len);
		if (!m)
			kd_util_oom("the merged timeline", 0);
		one.limit = 0;
		kd_out_text_cores(m, decs[i], &one);
		one.limit = o ? o->limit : 0;
		if (fclose(m) != 0 || !t[i].buf)
			kd_util_oom("the merged timeline", t[i].len);
		t[i].p = t[i].buf;
		w = kd_time_wall_ns(decs[i], decs[i]->window_start);
		t[i].day = w - ((w % 86400000000000ll) + 86400000000000ll) % 86400000000000ll;
		t[i].last = w;
		tl_next(&t[i]);
	}
	fprintf(f, "\ntimeline (UTC, one line per call at its entry; [N] is the file):\n");
	for (;;) {
		uint32_t best = KD_NONE;

		for (uint32_t i = 0; i < n; i++)
			if (t[i].key != INT64_MAX && t[i].cur &&
			    (best == KD_NONE || t[i].key < t[best].key))
				best = i;
		if (best == KD_NONE)
			break;
		if (o && o->limit && lines >= o->limit) {
			fprintf(f, "... more lines (--limit %" PRIu64 ")\n", o->limit);
			break;
		}
		fprintf(f, "[%" PRIu32 "] %.*s\n", best + 1, (int)t[best].curlen, t[best].cur);
		lines++;
		tl_next(&t[best]);
	}
	for (uint32_t i = 0; i < n; i++) {
		kd_out_text_stream_free(t[i].ts);
		if (t[i].lf)
			fclose(t[i].lf);
		free(t[i].lbuf);
		free(t[i].buf);
	}
	free(t);
	return rc;
}
