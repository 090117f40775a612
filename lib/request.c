/*
 * request.c - requests, and their records held aside until they end.
 *
 * The unit a service cares about is the request, and whether one was slow
 * is known only when it ends.  So while a request runs, everything its
 * thread records goes to a per-thread hold buffer instead of the core's
 * ring (record.c's hold append, ring.c's ktrace__emit), and at its end:
 *
 *   - slow or sampled (trigger.c decides): the held run is copied into the
 *     ring whole (ring.c, ktrace__ring_write_held), behind HELD headers that
 *     place it in the thread's program order (ktrace_format.h);
 *   - otherwise: dropped.  Its calls are counted in the kind's histogram
 *     only.  Nesting stays exact: the calls that began before the request
 *     and end inside it, and those that begin inside it and end after it,
 *     are kept (with their exact times) as a small held run of their own.
 *
 * A run is one outermost request on its thread and everything nested in
 * it; it is kept if any request in it is.  Its place (seg, P): the thread's
 * segment and the position its core's stream had reached when the run
 * began, so that every ring record of the thread from before the run is
 * below P in a segment <= seg, and every one from after is at >= P or in a
 * later segment, whenever the run is copied.
 *
 * Hazards:
 *   - the buffer fills (a request with more records than KTRACE_HOLD_KB):
 *     the run is copied now (SPILLED) and the rest of the requests open on
 *     the thread are recorded straight into the ring;
 *   - a request ended on another thread: the ending thread writes
 *     REQ_CLOSE_ANY and posts to the beginning thread's mailbox
 *     (threads.c), which that thread reads at its next begin/end: its run
 *     then ends as if the request had ended there (kept if it was slow).
 *     A thread that keeps beginning requests it does not end (more than
 *     KT_HOLD_DEPTH open: an asynchronous server) stops holding: its run
 *     is copied (SPILLED) and its requests are recorded directly;
 *   - a snapshot asked for by a thread that holds a run: the run is copied
 *     first (SPILLED), so the caller's own request is in the file;
 *   - signals: the hot path's hold append is an rseq critical section; the
 *     slow paths here run under the thread's nesting guard with hold_lim 0,
 *     so a traced signal handler that interrupts them goes to the slow
 *     path, sees the guard and is counted as lost (as with the ring's lock);
 *   - fork: the child's thread drops what it held (the child starts clean);
 *   - thread exit with requests open: the run is kept (it never ended).
 */
#include "internal.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#define KT_OPEN_MAX 16u      /* requests open on one thread at once */
#define KT_HOLD_DEPTH 4u     /* ... of which held: past it, recorded directly */
/* A request with one of these is kept whole, and so is its run. */
#define KT_KEEP_WHOLE (KTRACE_REQ_SLOW | KTRACE_REQ_SAMPLED | KTRACE_REQ_TRIGGER | \
                       KTRACE_REQ_WARMUP | KTRACE_REQ_AFTER)
#define KT_PEND_MAX 256u     /* requests ended in a run before it resolves */
#define KT_FRAMES 256u       /* frames tracked when a run is dropped */
#define KT_KEEPS 128u        /* records a dropped run may have to keep */

struct kt_open {
	uint64_t begin_tsc;      /* counter at begin */
	uint32_t kind;           /* name id */
	uint32_t number;         /* the kind's request number */
	uint32_t seq;            /* this thread's request sequence */
	uint32_t keep;           /* enum ktrace_req_keep decided at begin */
	uint32_t direct;         /* 1: not held (recorded straight into the ring) */
};

struct kt_pend {
	uint32_t kind;           /* a request ended in the run, fate pending */
	uint32_t close_at;       /* word index of its REQ_CLOSE type word, or ~0 */
};

struct kt_frame {
	uint64_t key;            /* what was entered (event, address or span) */
	uint64_t tick;           /* when */
	uint32_t at;             /* word index of its record */
};

/* A dropped run kept in the buffer for a while (see "Meanwhile"). */
struct kt_ret {
	uint64_t t0, t1;         /* counter: the run's start and end */
	uint32_t off, len;       /* words in buf */
	uint32_t seg, P, h;      /* its place */
	uint32_t close_at;       /* its outermost REQ_CLOSE type word, or ~0u */
	uint32_t kind;           /* that request's kind */
	uint32_t pad;
};

#define KT_RET_MAX 512u      /* dropped runs retained per thread */

/* An entry a dropped run left open, not written yet (see drop_run). */
#define KT_DEFER 64u
#define KT_DEFER_CHUNK 128u  /* its HELD chunk number: after the run's own */
struct kt_defer {
	uint64_t key;            /* frame_key() */
	uint64_t tick;           /* when */
	uint32_t seg, P, h;      /* its run's place */
	uint32_t nw;             /* words */
	uint32_t w[4];           /* the record */
};

/* HELD chunk numbers of a dropped run's edges: the exits of cancelled
 * pairs written late (KT_LATE_CHUNK) sort before its other edges. */
#define KT_LATE_CHUNK 1u
#define KT_EDGE_CHUNK 2u

/* A deferred entry and the exit that cancelled it, kept for a while in
 * case a retained run inside that frame is written after all (see
 * check_overlap). */
#define KT_CANCELS 256u
struct kt_cancel {
	struct kt_defer in;      /* the entry, with its run's place */
	uint64_t tick_out;       /* the exit: when, */
	uint32_t seg_out, P_out, h_out;   /* its run's place, */
	uint32_t nw_out, w_out[4];        /* the record */
	uint32_t written;        /* bit 2: the entry is in the ring, bit 1: the exit */
};

#define KT_RLOG 1024u        /* runs in the request log (power of two) */

struct kt_hold {
	/* The request log: the spans of this thread's last KT_RLOG runs,
	 * oldest first from rlog_n - KT_RLOG.  Written by the thread (relaxed
	 * stores, then rlog_n with release), read by the writer thread's
	 * budget (ktrace__hold_request_ticks) without a lock: a torn view only
	 * changes a muting decision.  The state outlives its thread (pooled),
	 * so the reader never touches unmapped memory. */
	_Atomic uint64_t rlog_t0[KT_RLOG], rlog_t1[KT_RLOG];   /* counter */
	_Atomic uint64_t rlog_n;
	struct kt_hold *next_free;   /* the pool's list (under pool_mu) */
	uint32_t cap;            /* words in buf */
	uint32_t depth;          /* open[] entries */
	struct kt_open open[KT_OPEN_MAX];
	uint32_t npend;
	struct kt_pend pend[KT_PEND_MAX];
	uint64_t base_tsc;       /* counter at the run's start */
	uint32_t seg, P, h;      /* the run's place (file comment) and number */
	uint32_t keep;           /* some request of the run is to be kept */
	uint32_t seq;            /* requests begun on this thread */
	uint32_t run_off;        /* the current run's first word in buf */
	uint32_t next_off;       /* where the next run starts */
	uint32_t nret;           /* ret[] entries, oldest first */
	uint64_t seen_slow;      /* slow_seq last checked against ret[] */
	int64_t slow_tokens;     /* words: this thread's share for requests slow
	                            only by the percentile (trigger.c) */
	uint64_t slow_last;      /* counter when the share was last refilled */
	uint32_t last_close;     /* the run's outermost REQ_CLOSE type word */
	uint32_t last_kind;      /* and its kind */
	uint32_t gap;            /* the run is a gap (between requests) */
	uint32_t gap_sampled;    /* ... chosen at its start as a typical sample */
	uint64_t gap_ticks;      /* KTRACE_GAP_US in counter ticks (0: not yet) */
	uint64_t gap_next_sample;/* counter: the next gap sample from here */
	uint32_t ndefer;         /* defer[] entries, outermost first */
	uint32_t ncancel;        /* cancel[] entries written, oldest at
	                            ncancel % KT_CANCELS once it wrapped */
	uint32_t ncscratch;      /* cscratch[]: a drop_run's, until it commits */
	uint32_t evicted;        /* an unwritten pair left cancel[] ... */
	uint32_t evicted_h;      /* ... ending at most in this run (max h_out) */
	struct kt_cancel cancel[KT_CANCELS];
	struct kt_cancel cscratch[KT_DEFER];
	struct kt_defer defer[KT_DEFER];
	uint32_t dout[KT_DEFER * 8];         /* scratch: flush_defer's words */
	struct kt_ret ret[KT_RET_MAX];
	struct kt_frame frames[KT_FRAMES];   /* scratch for drop_run */
	uint32_t out[KT_KEEPS * 8];          /* scratch: the words drop_run keeps */
	uint32_t buf[];          /* the hold buffer */
};

/* ---- the held run --------------------------------------------------------- */

/* The current run's words. */
static inline KT_NOINSTR uint32_t *t_run(struct kt_hold *hs)
{
	return hs->buf + hs->run_off;
}

/* Hold states of exited threads, for the next threads: never unmapped
 * (the budget may still read a request log), so their number is bounded by
 * the most threads that ran requests at once. */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kt_hold *pool;

static KT_NOINSTR struct kt_hold *hold_state(struct kt_thread *t)
{
	size_t bytes;
	struct kt_hold *hs;

	if (t->hs)
		return t->hs;
	pthread_mutex_lock(&pool_mu);
	hs = pool;
	if (hs)
		pool = hs->next_free;
	pthread_mutex_unlock(&pool_mu);
	if (hs == NULL) {
		bytes = sizeof(*hs) + (size_t)ktrace__cfg.hold_kb * 1024;
		hs = ktrace__map_own(bytes, MAP_NORESERVE);
		if (hs == NULL) {
			ktrace__hold_failed();
			return NULL;
		}
		hs->cap = ktrace__cfg.hold_kb * 256;
	} else {
		uint32_t cap = hs->cap;
		/* a used one: everything but the log (the budget may be
		 * reading it; it stays in time order, the new thread's
		 * runs come later) and the buffer */
		memset(&hs->next_free, 0, offsetof(struct kt_hold, buf) -
		                              offsetof(struct kt_hold, next_free));
		hs->cap = cap;
	}
	t->hs = hs;
	ktrace__thread_set_hold(t->slot, hs);
	return hs;
}

/* The run [t0, t1] in the request log. */
static KT_NOINSTR void rlog_add(struct kt_hold *hs, uint64_t t0, uint64_t t1)
{
	/* relaxed: only this thread writes the log. */
	uint64_t n = kt_load(&hs->rlog_n, relaxed);

	kt_store(&hs->rlog_t0[n % KT_RLOG], t0, relaxed);
	kt_store(&hs->rlog_t1[n % KT_RLOG], t1, relaxed);
	/* release: the entry before the count that shows it (the reader's
	 * acquire load of rlog_n). */
	kt_store(&hs->rlog_n, n + 1, release);
}

/*
 * The budget (filter.c, writer thread): of thread hs's time in the counter
 * interval [b, e], how much its requests took (their runs: held aside,
 * kept or dropped).  -1 when the log does not reach back to b (unknown).
 */
KT_NOINSTR int64_t ktrace__hold_request_ticks(const void *h, uint64_t b, uint64_t e)
{
	const struct kt_hold *hs = h;
	/* acquire: pairs with rlog_add's release. */
	uint64_t n = kt_load(&hs->rlog_n, acquire), lo, hi, sum = 0;

	if (n == 0)
		return 0;
	lo = n > KT_RLOG ? n - KT_RLOG : 0;
	/* the log can be overwritten meanwhile: a few more entries than
	 * KT_RLOG / 2 back are not trusted */
	if (n - lo > KT_RLOG / 2)
		lo = n - KT_RLOG / 2;
	if (kt_load(&hs->rlog_t0[lo % KT_RLOG], relaxed) > b)
		return n >= KT_RLOG / 2 ? -1 : 0;
	/* the first run that ends after b (the log is in time order) */
	hi = n;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (kt_load(&hs->rlog_t1[mid % KT_RLOG], relaxed) <= b)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n; lo++) {
		uint64_t t0 = kt_load(&hs->rlog_t0[lo % KT_RLOG], relaxed);
		uint64_t t1 = kt_load(&hs->rlog_t1[lo % KT_RLOG], relaxed);
		if (t0 >= e)
			break;
		if (t0 < b)
			t0 = b;
		if (t1 > e)
			t1 = e;
		if (t1 > t0)
			sum += t1 - t0;
	}
	return (int64_t)sum;
}

static inline KT_NOINSTR uint32_t ts20_of(uint64_t c)
{
	return (uint32_t)(c >> ktrace__g.tsc_shift) & KTRACE_TS_MASK;
}

static KT_NOINSTR void flush_defer(struct kt_thread *t, struct kt_hold *hs);

static KT_NOINSTR void run_start(struct kt_thread *t, struct kt_hold *hs, uint64_t now)
{
	/* A thread that runs requests back to back may never reach the
	 * hooks' slow path (each run starts a new buffer, TSC deadline and
	 * all), where a new mute is adopted: adopt it here. */
	ktrace__filter_adopt(t);
	/* A deferred entry waits at most 2^22 runs: run numbers compare
	 * modulo 2^24 where the decoder places them. */
	if (hs->ndefer && ((hs->h - hs->defer[0].h) & 0xFFFFFFu) > (1u << 22))
		flush_defer(t, hs);
	hs->base_tsc = now;
	hs->seg = t->seg;
	hs->P = ktrace__ring_pos(t->last_cpu);
	hs->h++;
	hs->keep = 0;
	hs->npend = 0;
	/* Behind the retained runs while at least half the buffer is left;
	 * else from the start, forgetting them. */
	if (hs->cap - hs->next_off < hs->cap / 2 || hs->nret == KT_RET_MAX) {
		hs->next_off = 0;
		hs->nret = 0;
	}
	hs->run_off = hs->next_off;
	t->hold_pos = 0;
	t->hold_lim = hs->cap - hs->run_off;
	t->hold_deadline = now + ktrace__g.forward_max;
	/* Last: from here on the hooks append to the buffer.  The compiler
	 * barrier keeps the stores above before it (a signal handler on this
	 * thread is the only other reader). */
	__asm__ __volatile__("" ::: "memory");
	t->hold = hs->buf + hs->run_off;
}

static KT_NOINSTR void run_stop(struct kt_thread *t)
{
	t->hold = NULL;
	__asm__ __volatile__("" ::: "memory");
	t->hold_lim = 0;
	t->hold_pos = 0;
}

/* The fates of the requests that ended in the run, now that it resolved. */
static KT_NOINSTR void settle(struct kt_hold *hs, int kept)
{
	for (uint32_t i = 0; i < hs->npend; i++) {
		if (kept && hs->pend[i].close_at != ~0u)
			t_run(hs)[hs->pend[i].close_at] |= KTRACE_REQ_NESTED << 8;
		ktrace__kind_fate(hs->pend[i].kind, kept ? KTRACE_REQ_NESTED : 0);
	}
	hs->npend = 0;
}

/* Copy the run into the ring. */
static KT_NOINSTR void keep_run(struct kt_thread *t, struct kt_hold *hs)
{
	uint32_t n = t->hold_pos;

	t->hold_lim = 0;   /* a signal handler's events go to the slow path */
	settle(hs, 1);
	flush_defer(t, hs);   /* frames the run may exit */
	ktrace__ring_write_held(t, t_run(hs), n, hs->base_tsc, hs->seg, hs->P, hs->h);
	hs->next_off = hs->run_off;
	run_stop(t);
}

/* What a record opens or closes: 1 = enters key, 2 = exits key, 0 = other. */
static KT_NOINSTR int frame_key(const uint32_t *w, uint64_t *key)
{
	uint32_t ev = KTRACE_REC_EV(w[0]);

	if (KTRACE_EV_IS_ENTER(ev)) {
		*key = ev;
		return 1;
	}
	if (KTRACE_EV_IS_EXIT(ev)) {
		*key = ev & ~KTRACE_EV_EXIT_FLAG;
		return 2;
	}
	if (!KTRACE_EV_IS_EXT(ev))
		return 0;
	switch (KTRACE_EXT_TYPE(w[1])) {
	case KTRACE_EXT_FUNC_ENTER_ADDR:
	case KTRACE_EXT_FUNC_EXIT_ADDR:
		*key = (1ull << 63) | ((uint64_t)w[3] << 32) | w[2];
		return KTRACE_EXT_TYPE(w[1]) == KTRACE_EXT_FUNC_ENTER_ADDR ? 1 : 2;
	case KTRACE_EXT_SPAN_BEGIN:
	case KTRACE_EXT_SPAN_END:
		*key = (1ull << 62) | KTRACE_EXT_ARG(w[1]);
		return KTRACE_EXT_TYPE(w[1]) == KTRACE_EXT_SPAN_BEGIN ? 1 : 2;
	default:
		return 0;
	}
}

static inline KT_NOINSTR uint32_t words_of(uint32_t w)
{
	uint32_t ev = KTRACE_REC_EV(w);
	return KTRACE_EV_IS_EXT(ev) ? 1 + ev : 1;
}

/*
 * Drop the run, keeping only what the thread's nesting needs: exits of
 * frames entered before the run, and entries of frames still open at its
 * end.  The first kept record's time is the chunk's (HELD carries it); a
 * later one goes behind a TSC record of its own time only when more than
 * KTRACE_TS_FORWARD_MAX ticks passed since the one before it, so a kept
 * edge costs one word, not five.
 *
 * Entries still open are not written at once but deferred (defer[], with
 * their run's place): an event loop enters aeProcessEvents in one dropped
 * gap and leaves it in a later one, and when every run in between is
 * dropped too, neither record is needed.  An exit of a deferred frame in a
 * later dropped run cancels both; anything else that may show the frame
 * (a kept run, records written as they run, a snapshot on the thread,
 * thread exit) first writes the deferred entries, as HELD chunks of their
 * own run numbered from KT_DEFER_CHUNK, which sort after that run's own
 * chunk: every record still lands at its place in the thread's order.
 * A dropped run that touched no frame outside itself is retained (see
 * "Meanwhile"); a run too deep or with too many such records to track is
 * kept whole.
 */
/* The record at w into dst (at most 4 words); its words. */
static inline KT_NOINSTR uint32_t rec_copy(uint32_t *dst, const uint32_t *w)
{
	uint32_t n = words_of(w[0]);

	for (uint32_t y = 0; y < n; y++)
		dst[y] = w[y];
	return n;
}

static KT_NOINSTR uint32_t keep_rec(uint32_t *out, uint32_t no, const uint32_t *w,
                                    uint64_t tick, uint64_t *prev, uint32_t nk)
{
	uint32_t shift = ktrace__g.tsc_shift;

	if (nk > 1 && tick - *prev > KTRACE_TS_FORWARD_MAX) {
		out[no++] = KTRACE_REC((uint32_t)tick, 3);
		out[no++] = KTRACE_EXT_WORD(KTRACE_EXT_TSC, 0);
		out[no++] = (uint32_t)(tick << shift);
		out[no++] = (uint32_t)((tick << shift) >> 32);
	}
	*prev = tick;
	return no + rec_copy(out + no, w);   /* its ts20 is tick's */
}

/* Write the deferred entries (nest held), one group per run. */
static KT_NOINSTR void flush_defer(struct kt_thread *t, struct kt_hold *hs)
{
	uint32_t i = 0, shift = ktrace__g.tsc_shift;

	while (i < hs->ndefer) {
		const struct kt_defer *g = &hs->defer[i];
		uint32_t no = 0, nk = 0;
		uint64_t prev = 0;

		for (; i < hs->ndefer && hs->defer[i].h == g->h && hs->defer[i].seg == g->seg &&
		       hs->defer[i].P == g->P; i++)
			no = keep_rec(hs->dout, no, hs->defer[i].w, hs->defer[i].tick, &prev, ++nk);
		ktrace__ring_write_held_at(t, hs->dout, no, g->tick << shift, g->seg, g->P, g->h,
		                           KT_DEFER_CHUNK);
	}
	hs->ndefer = 0;
}

/* 24-bit run numbers, compared modulo 2^24 (a before b). */
static inline KT_NOINSTR int h_before(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) < 0;
}

/* The run dropped: its cancelled pairs into the log. */
static KT_NOINSTR void cancels_commit(struct kt_hold *hs)
{
	for (uint32_t i = 0; i < hs->ncscratch; i++) {
		struct kt_cancel *c = &hs->cancel[hs->ncancel++ % KT_CANCELS];
		if (hs->ncancel > KT_CANCELS && c->written != 3u) {
			/* forgotten unwritten: a retained run before its end can
			 * no longer be written (check_overlap) */
			if (!hs->evicted || h_before(hs->evicted_h, c->h_out))
				hs->evicted_h = c->h_out;
			hs->evicted = 1;
		}
		*c = hs->cscratch[i];
	}
	hs->ncscratch = 0;
}

/*
 * A retained run is about to be written (meanwhile): the frames around it
 * must be in the ring too.  The deferred entries are written (they can no
 * longer cancel), and so is every logged pair not written yet (entries as
 * deferred ones, in entry order per run; exits at KT_LATE_CHUNK of their
 * run, in exit order, before its other edges).  All of them at once:
 * pairs of one run written at different times could come out of order.
 * 0 when a pair that may have enclosed run h was forgotten: then the run
 * is not written.
 */
static KT_NOINSTR int frames_for(struct kt_thread *t, struct kt_hold *hs, uint32_t h)
{
	uint32_t n = hs->ncancel < KT_CANCELS ? hs->ncancel : KT_CANCELS;
	uint32_t lo = hs->ncancel - n, shift = ktrace__g.tsc_shift;

	if (hs->evicted && h_before(h, hs->evicted_h))
		return 0;
	flush_defer(t, hs);
	/* entries: per run, by time */
	for (uint32_t i = lo; i < hs->ncancel; i++) {
		struct kt_cancel *c = &hs->cancel[i % KT_CANCELS];
		uint32_t no = 0, nk = 0;
		uint64_t prev = 0, first = ~0ull;

		if (c->written & 2u)
			continue;
		/* this pair's run: its unwritten entries, earliest first */
		for (;;) {
			struct kt_cancel *m = NULL;
			for (uint32_t j = lo; j < hs->ncancel; j++) {
				struct kt_cancel *d = &hs->cancel[j % KT_CANCELS];
				if (!(d->written & 2u) && d->in.h == c->in.h && d->in.seg == c->in.seg &&
				    d->in.P == c->in.P && (m == NULL || d->in.tick < m->in.tick))
					m = d;
			}
			if (m == NULL || no + 4 + m->in.nw > KT_DEFER * 8)
				break;
			if (first == ~0ull)
				first = m->in.tick;
			no = keep_rec(hs->dout, no, m->in.w, m->in.tick, &prev, ++nk);
			m->written |= 2u;
		}
		if (no)
			ktrace__ring_write_held_at(t, hs->dout, no, first << shift, c->in.seg, c->in.P,
			                           c->in.h, KT_DEFER_CHUNK);
	}
	/* exits: per run, in the log's order (the order they were made) */
	for (uint32_t i = lo; i < hs->ncancel; i++) {
		struct kt_cancel *c = &hs->cancel[i % KT_CANCELS];
		uint32_t no = 0, nk = 0;
		uint64_t prev = 0, first = c->tick_out;

		if (c->written & 1u)
			continue;
		for (uint32_t j = i; j < hs->ncancel && no + 4 + 4 <= KT_DEFER * 8; j++) {
			struct kt_cancel *d = &hs->cancel[j % KT_CANCELS];
			if ((d->written & 1u) || d->h_out != c->h_out || d->seg_out != c->seg_out ||
			    d->P_out != c->P_out)
				continue;
			no = keep_rec(hs->dout, no, d->w_out, d->tick_out, &prev, ++nk);
			d->written |= 1u;
		}
		ktrace__ring_write_held_at(t, hs->dout, no, first << shift, c->seg_out, c->P_out,
		                           c->h_out, KT_LATE_CHUNK);
	}
	return 1;
}

static KT_NOINSTR void drop_run(struct kt_thread *t, struct kt_hold *hs, uint64_t now)
{
	const uint32_t *w = t_run(hs);
	uint32_t n = t->hold_pos, nf = 0, nk = 0, no = 0, shift = ktrace__g.tsc_shift;
	uint32_t nd = hs->ndefer, edges = 0;
	uint64_t tick = hs->base_tsc >> shift, first = 0, prev = 0;

	t->hold_lim = 0;
	hs->ncscratch = 0;
	for (uint32_t x = 0; x < n; x += words_of(w[x])) {
		uint32_t ev = KTRACE_REC_EV(w[x]);
		uint64_t key;
		int what;

		if (ev == 3 && KTRACE_EXT_TYPE(w[x + 1]) == KTRACE_EXT_TSC) {
			tick = (((uint64_t)w[x + 3] << 32) | w[x + 2]) >> shift;
			continue;
		} else {
			uint32_t d = (KTRACE_REC_TS(w[x]) - (uint32_t)tick) & KTRACE_TS_MASK;
			tick = d < KTRACE_TS_HALF ? tick + d : tick - (KTRACE_TS_MASK + 1 - d);
		}
		what = frame_key(&w[x], &key);
		if (what == 1) {
			if (nf == KT_FRAMES)
				goto whole;
			hs->frames[nf].key = key;
			hs->frames[nf].tick = tick;
			hs->frames[nf++].at = x;
		} else if (what == 2) {
			uint32_t i = nf;
			while (i > 0 && hs->frames[i - 1].key != key)
				i--;
			if (i > 0) {
				nf = i - 1;   /* frames above it lost their exits: gone too */
				continue;
			}
			/* entered before the run */
			edges++;
			i = nd;
			while (i > 0 && hs->defer[i - 1].key != key)
				i--;
			if (i > 0) {
				/* entered in a dropped run: neither is written (but
				 * logged: check_overlap) */
				struct kt_cancel *c = &hs->cscratch[hs->ncscratch++];
				nd = i - 1;
				c->in = hs->defer[nd];
				c->tick_out = tick;
				c->seg_out = hs->seg;
				c->P_out = hs->P;
				c->h_out = hs->h;
				c->nw_out = rec_copy(c->w_out, &w[x]);
				c->written = 0;
				continue;
			}
			/* Entered before any deferred frame, which so lost its
			 * exit (longjmp): those are gone, and so are the frames
			 * of this run still open (entered after those). */
			nd = 0;
			nf = 0;
			if (nk == KT_KEEPS)
				goto whole;
			nk++;
			if (no + 4 + words_of(w[x]) > KT_KEEPS * 8)
				goto whole;
			if (nk == 1)
				first = tick;
			no = keep_rec(hs->out, no, &w[x], tick, &prev, nk);
		}
	}
	/* Entries still open: deferred, outermost first (an exit of an
	 * earlier frame can only come while no frame of the run is open).
	 * No room: the deferred ones are written, and these at once. */
	if (nd + nf > KT_DEFER) {
		for (uint32_t i = 0; i < nf; i++) {
			uint32_t x = hs->frames[i].at;
			if (nk == KT_KEEPS || no + 4 + words_of(w[x]) > KT_KEEPS * 8)
				goto whole;
			if (nk++ == 0)
				first = hs->frames[i].tick;
			no = keep_rec(hs->out, no, &w[x], hs->frames[i].tick, &prev, nk);
		}
		hs->ndefer = nd;   /* from here on the run is dropped */
		flush_defer(t, hs);
	} else {
		hs->ndefer = nd;
		for (uint32_t i = 0; i < nf; i++) {
			struct kt_defer *f = &hs->defer[hs->ndefer++];
			f->key = hs->frames[i].key;
			f->tick = hs->frames[i].tick;
			f->seg = hs->seg;
			f->P = hs->P;
			f->h = hs->h;
			f->nw = rec_copy(f->w, &w[hs->frames[i].at]);
		}
	}
	settle(hs, 0);
	cancels_commit(hs);
	if (no)
		ktrace__ring_write_held_at(t, hs->out, no, first << shift, hs->seg, hs->P, hs->h,
		                           KT_EDGE_CHUNK);
	if (no || edges || nf) {
		hs->next_off = hs->run_off;
	} else {
		/* Retained: another thread's slow request may yet want it. */
		struct kt_ret *r = &hs->ret[hs->nret++];
		r->t0 = hs->base_tsc;
		r->t1 = now;
		r->off = hs->run_off;
		r->len = n;
		r->seg = hs->seg;
		r->P = hs->P;
		r->h = hs->h;
		r->close_at = hs->last_close;
		r->kind = hs->last_kind;
		hs->next_off = hs->run_off + n;
	}
	run_stop(t);
	return;
whole:
	/* Too much to sort out: keep it all (the deferred entries first); its
	 * requests count as kept. */
	hs->ncscratch = 0;
	keep_run(t, hs);
}

/* The buffer is full: copy what it holds; the run's requests go on in the
 * ring (SPILLED). */
static KT_NOINSTR void spill(struct kt_thread *t, struct kt_hold *hs)
{
	keep_run(t, hs);
	for (uint32_t i = 0; i < hs->depth; i++) {
		hs->open[i].direct = 1;
		hs->open[i].keep |= KTRACE_REQ_SPILLED;
	}
}

/* Append a record to the hold (nest held); the index of its header word,
 * or ~0u when the buffer was full and the record went to the ring. */
static KT_NOINSTR uint32_t hold_put(struct kt_thread *t, uint32_t ev, const uint32_t *payload,
                                    uint32_t npayload, uint64_t now)
{
	struct kt_hold *hs = t->hs;
	uint32_t pos = t->hold_pos, at, need = 1 + npayload + (now >= t->hold_deadline ? 4 : 0);

	if (hs == NULL || pos + need > hs->cap - hs->run_off) {
		if (hs)
			spill(t, hs);
		else
			run_stop(t);
		ktrace__emit(t, ev, payload, npayload);   /* t->hold is NULL now */
		return ~0u;
	}
	t->hold_lim = 0;   /* a signal handler's hot path goes to the slow path */
	if (now >= t->hold_deadline) {
		t->hold[pos++] = KTRACE_REC(ts20_of(now), 3);
		t->hold[pos++] = KTRACE_EXT_WORD(KTRACE_EXT_TSC, 0);
		t->hold[pos++] = (uint32_t)now;
		t->hold[pos++] = (uint32_t)(now >> 32);
		t->hold_deadline = now + ktrace__g.forward_max;
	}
	at = pos;
	t->hold[pos++] = KTRACE_REC(ts20_of(now), ev);
	for (uint32_t i = 0; i < npayload; i++)
		t->hold[pos++] = payload[i];
	t->hold_pos = pos;
	t->hold_lim = hs->cap - hs->run_off;
	return at;
}

KT_NOINSTR void ktrace__hold_emit(struct kt_thread *t, uint32_t ev, const uint32_t *payload,
                                  uint32_t npayload)
{
	/* The program's own marks between requests are kept, as ever: the
	 * gap that has one is kept whole. */
	if (t->hs && t->hs->gap && KTRACE_EV_IS_EXT(ev) && npayload &&
	    KTRACE_EXT_TYPE(payload[0]) == KTRACE_EXT_MARK)
		t->hs->keep = 1;
	hold_put(t, ev, payload, npayload, ktrace__now());
}

/* One record, to the hold (at time now: the caller's clock reading) or the
 * ring (which reads its own under the core lock), from a request call
 * (nest held). */
static KT_NOINSTR uint32_t put_rec(struct kt_thread *t, uint32_t type, uint32_t arg,
                                   const uint32_t *more, uint32_t nmore, uint64_t now)
{
	uint32_t p[4], at = ~0u;

	p[0] = KTRACE_EXT_WORD(type, arg);
	for (uint32_t i = 0; i < nmore; i++)
		p[1 + i] = more[i];
	if (t->hold) {
		at = hold_put(t, 1 + nmore, p, 1 + nmore, now);
		if (at != ~0u)
			at++;   /* the type word, for a later NESTED mark */
	} else {
		ktrace__emit(t, 1 + nmore, p, 1 + nmore);
	}
	return at;
}

/*
 * Gaps.  On a busy service the calls between requests (the event loop:
 * poll, read and parse, write the reply) outnumber the requests' own, and
 * recorded as they run they fill the ring in seconds whatever is kept of
 * the requests.  So a thread that has run a request holds its time until
 * its next request begins the same way, as a run with no request open (a
 * gap).  When the next request begins, or a snapshot is taken on the
 * thread, the gap is
 *   - kept whole if it lasted KTRACE_GAP_US or more (a busy loop turn, a
 *     stall that delayed the requests waiting behind it; within the
 *     thread's share for slow keeps, trigger.c), if it was chosen at its
 *     start as a typical sample (one per thread about every
 *     KTRACE_SAMPLE_MS), or if it ended in a trigger's aftermath;
 *   - else dropped like a request's run: only the records the nesting
 *     needs are kept, and it is retained for a while in case another
 *     thread's slow request overlapped it (meanwhile).
 * A gap larger than the buffer is copied when the buffer fills and the
 * rest of it is recorded as it runs (a thread that has left requests
 * behind, e.g. a worker that made one at start-up, costs one buffer).
 * Gaps are not requests: they are not in the request log (the budget
 * counts their time as the functions'), nor in the REQUESTS counts but
 * for gaps_kept.
 */
static _Atomic uint64_t gaps_kept;

KT_NOINSTR uint64_t ktrace__hold_gaps_kept(void)
{
	return kt_load(&gaps_kept, relaxed);
}

static KT_NOINSTR void gap_start(struct kt_thread *t, struct kt_hold *hs, uint64_t now)
{
	uint64_t hz;

	if (ktrace__cfg.gap_us == 0 || ktrace__cfg.keep_all || t->hold != NULL || hs->depth)
		return;
	hz = kt_load(&ktrace__g.hz_cached, relaxed);
	if (hs->gap_ticks == 0 && hz != 0)
		hs->gap_ticks = (uint64_t)((unsigned __int128)hz * ktrace__cfg.gap_us / 1000000);
	hs->gap_sampled = 0;
	if (ktrace__cfg.sample_ms && hz && now >= hs->gap_next_sample) {
		/* the next one after half to one and a half the period, so that
		 * loops in step with it are not always sampled at one phase */
		uint64_t step = (uint64_t)((unsigned __int128)hz * ktrace__cfg.sample_ms / 1000);
		hs->gap_sampled = hs->gap_next_sample != 0;
		hs->gap_next_sample = now + step / 2 +
		                      ((now * 0x9e3779b97f4a7c15ull) >> 24) % (step + 1);
	}
	run_start(t, hs, now);
	hs->gap = 1;
	hs->last_close = ~0u;
	hs->last_kind = 0;
}

/* Records go to the ring as they run from here (no run held): the
 * deferred entries first. */
static inline KT_NOINSTR void unheld(struct kt_thread *t, struct kt_hold *hs)
{
	if (t->hold == NULL && hs->ndefer)
		flush_defer(t, hs);
}

/* The gap ends (nest held): keep it or drop it (above). */
static KT_NOINSTR void gap_end(struct kt_thread *t, struct kt_hold *hs, uint64_t now)
{
	uint64_t len;

	if (!hs->gap)
		return;
	hs->gap = 0;
	if (t->hold == NULL)
		return;   /* spilled: its records are in the ring */
	len = now > hs->base_tsc ? now - hs->base_tsc : 0;   /* a clock read before
	                                                       the gap began */
	if (hs->keep || hs->gap_sampled ||
	    ktrace__after_keep(now, (uint64_t)t->hold_pos + 8) ||
	    (hs->gap_ticks && len >= hs->gap_ticks &&
	     ktrace__kind_slow_budget(&hs->slow_tokens, &hs->slow_last,
	                              (uint64_t)t->hold_pos + 8, now))) {
		kt_add(&gaps_kept, 1, relaxed);   /* relaxed: a statistic */
		keep_run(t, hs);
	} else {
		drop_run(t, hs, now);
	}
}

/* End the run if no request of it is open any more; a gap follows. */
static KT_NOINSTR void maybe_resolve(struct kt_thread *t, struct kt_hold *hs, uint64_t now)
{
	if (hs->depth != 0)
		return;
	rlog_add(hs, hs->base_tsc, now);
	if (t->hold) {
		if (hs->keep)
			keep_run(t, hs);
		else
			drop_run(t, hs, now);
	}
	gap_start(t, hs, now);
	unheld(t, hs);
}

/* Requests of this thread that other threads ended (the mailbox). */
static KT_NOINSTR void take_mail(struct kt_thread *t, struct kt_hold *hs)
{
	uint64_t m = ktrace__thread_mail_take(t->slot);
	uint32_t upto = (uint32_t)m, j = 0;

	if (m == 0)
		return;
	if (m >> 63)
		hs->keep = 1;
	for (uint32_t i = 0; i < hs->depth; i++)
		if ((int32_t)(hs->open[i].seq - upto) > 0)
			hs->open[j++] = hs->open[i];
	hs->depth = j;
	maybe_resolve(t, hs, ktrace__now());
}

/*
 * Meanwhile.  What other threads did during a kept slow request matters as
 * much as the request itself (the lock holder it waited for).  Threads
 * outside requests are recorded as ever; a thread inside requests keeps
 * each dropped run in its buffer for a while (KT_RET_MAX runs, or until
 * the buffer is half used, whichever comes first), and every slow request
 * that is kept publishes its time span here.  At its next request call, a
 * thread copies into the ring each retained run that overlaps a published
 * span of another thread (OVERLAP).  Their places (seg, P) make a late copy
 * exact.  A thread that makes no further request call (idle, blocked) keeps
 * its retained runs to itself.
 */
#define KT_SLOW_WINS 16u

static struct {
	_Atomic uint64_t t0, t1;     /* counter: the slow request's span */
	_Atomic uint32_t slot;       /* thread that ran it (0 = none yet) */
} slow_win[KT_SLOW_WINS];
static _Atomic uint64_t slow_claim;  /* entries handed out */
static _Atomic uint64_t slow_seq;    /* entries written */

static KT_NOINSTR void publish_slow(uint32_t slot, uint64_t t0, uint64_t t1)
{
	/* relaxed: only a place; the entry is published by slow_seq. */
	uint64_t i = kt_add(&slow_claim, 1, relaxed) % KT_SLOW_WINS;

	kt_store(&slow_win[i].t0, t0, relaxed);
	kt_store(&slow_win[i].t1, t1, relaxed);
	kt_store(&slow_win[i].slot, slot, relaxed);
	/* release: the entry above before the count that tells readers to
	 * look (their acquire load in check_overlap).  Two publishers that
	 * share an entry may leave it mixed: a run is then kept or not by
	 * mistake, never corrupted. */
	kt_add(&slow_seq, 1, release);
}

static KT_NOINSTR void check_overlap(struct kt_thread *t, struct kt_hold *hs)
{
	uint64_t e = kt_load(&slow_seq, acquire);   /* pairs with publish_slow */

	if (e == hs->seen_slow)
		return;
	hs->seen_slow = e;
	for (uint32_t i = 0; i < hs->nret; i++) {
		struct kt_ret *r = &hs->ret[i];
		if (r->len == 0)
			continue;
		for (uint32_t j = 0; j < KT_SLOW_WINS; j++) {
			uint32_t slot = kt_load(&slow_win[j].slot, relaxed);
			uint64_t t0 = kt_load(&slow_win[j].t0, relaxed);
			uint64_t t1 = kt_load(&slow_win[j].t1, relaxed);
			if (slot == 0 || slot == t->slot || r->t0 >= t1 || t0 >= r->t1)
				continue;
			if (!frames_for(t, hs, r->h))
				break;   /* its frames may be gone: not written */
			if (r->close_at != ~0u)
				hs->buf[r->off + r->close_at] |= KTRACE_REQ_OVERLAP << 8;
			ktrace__ring_write_held(t, hs->buf + r->off, r->len, r->t0, r->seg, r->P,
			                        r->h);
			if (r->kind)
				ktrace__kind_refate(r->kind);
			r->len = 0;
			break;
		}
	}
}

/* ---- the API ---------------------------------------------------------------- */

static KT_NOINSTR ktrace_request_t begin(const char *kind, int has_id, uint64_t uid)
{
	ktrace_request_t r;
	struct kt_thread *t;
	struct kt_hold *hs;
	uint32_t id, more[3], keep;
	uint64_t now;

	memset(&r, 0, sizeof(r));
	if (kind == NULL || !ktrace__ensure_init() || (t = kt_self_alloc()) == NULL ||
	    t->in_vfork)   /* a vfork child: the parent's thread, not its own */
		return r;
	if (t->nest) {
		ktrace__count_loss(KTRACE_LOSS_NESTED, 1);
		return r;
	}
	t->nest++;
	if (ktrace__thread_ready(t) != 0)
		goto out;
	id = ktrace__name_id(kind, KTRACE_NAME_REQUEST);
	if (id == 0) {
		ktrace__count_loss(KTRACE_LOSS_NO_NAME, 1);
		goto out;
	}
	hs = hold_state(t);
	if (hs) {
		take_mail(t, hs);
		check_overlap(t, hs);
	}
	now = ktrace__now();
	if (hs && hs->depth == 0)
		gap_end(t, hs, now);   /* the time since the last request */
	keep = ktrace__kind_sample(id, now) ? KTRACE_REQ_SAMPLED : 0;
	r.kind_ = id;
	r.number_ = ktrace__kind_number(id);
	r.slot_ = t->slot;
	r.seq_ = hs ? ++hs->seq : 0;
	if (hs && t->hold && hs->depth >= KT_HOLD_DEPTH) {
		/* Deeper than requests nest on one thread: tokens passed to
		 * other threads (an asynchronous server).  Stop holding: the
		 * run is copied and its requests go on in the ring. */
		spill(t, hs);
	}
	if (hs && hs->depth < KT_OPEN_MAX) {
		struct kt_open *o = &hs->open[hs->depth++];
		o->begin_tsc = now;
		o->kind = id;
		o->number = r.number_;
		o->seq = r.seq_;
		o->keep = keep;
		o->direct = 1;
		if (!ktrace__cfg.keep_all && t->hold == NULL && hs->depth == 1) {
			run_start(t, hs, now);
			o->direct = 0;
		} else if (t->hold) {
			o->direct = 0;
		}
		if (keep)
			hs->keep = 1;
	}
	if (hs)
		unheld(t, hs);
	more[0] = r.number_;
	more[1] = (uint32_t)uid;
	more[2] = (uint32_t)(uid >> 32);
	/* The held record carries now itself, the measured start; a record
	 * that goes to the ring reads the clock later (under the core lock),
	 * so the start is read again after it. */
	put_rec(t, has_id ? KTRACE_EXT_REQ_OPEN_ID : KTRACE_EXT_REQ_OPEN, id, more,
	        has_id ? 3 : 1, now);
	r.begin_tsc_ = t->hold ? now : ktrace__now();
out:
	t->nest--;
	return r;
}

__attribute__((visibility("default"))) KT_NOINSTR ktrace_request_t
ktrace_request_begin(const char *kind)
{
	return begin(kind, 0, 0);
}

__attribute__((visibility("default"))) KT_NOINSTR ktrace_request_t
ktrace_request_begin_id(const char *kind, uint64_t id)
{
	return begin(kind, 1, id);
}

__attribute__((visibility("default"))) KT_NOINSTR void ktrace_request_end(ktrace_request_t r)
{
	struct kt_thread *t;
	struct kt_hold *hs;
	struct kt_req_end e;
	uint64_t end;
	uint32_t i, keep, more[3];

	if (r.kind_ == 0 || r.begin_tsc_ == 0 || (t = kt_self_alloc()) == NULL || t->in_vfork)
		return;
	end = ktrace__now();
	if (t->nest) {
		ktrace__count_loss(KTRACE_LOSS_NESTED, 1);
		return;
	}
	t->nest++;
	if (ktrace__thread_ready(t) != 0)
		goto out;
	hs = t->hs;
	if (hs) {
		take_mail(t, hs);
		check_overlap(t, hs);
		/* None open here: begun on another thread.  Its end record goes
		 * to the ring between two gaps (a dropped gap keeps no such
		 * record). */
		if (hs->depth == 0)
			gap_end(t, hs, end);
	}
	ktrace__kind_end(r.kind_, r.number_, r.slot_, r.begin_tsc_, end, &e);
	keep = e.keep;
	/* The aftermath of a trigger: until its window is copied, requests
	 * are kept, within a bound (trigger.c). */
	if (ktrace__after_keep(end, (t->hold && hs ? (uint64_t)t->hold_pos : 0) + 12))
		keep |= KTRACE_REQ_AFTER;
	/* Slow only by the running percentile: kept while such requests stay
	 * within their share of the ring (trigger.c), or when its run is kept
	 * anyway. */
	if (e.pct_only && t->hold && hs && !hs->keep &&
	    !ktrace__kind_slow_budget(&hs->slow_tokens, &hs->slow_last,
	                              (uint64_t)t->hold_pos + 12, end))
		keep &= ~(uint32_t)KTRACE_REQ_SLOW;
	if (keep & (KTRACE_REQ_SLOW | KTRACE_REQ_TRIGGER))
		publish_slow(r.slot_ ? r.slot_ : t->slot, r.begin_tsc_, end);
	i = hs && r.slot_ == t->slot ? hs->depth : 0;
	while (i > 0 && hs->open[i - 1].seq != r.seq_)
		i--;
	if (i == 0) {
		/* Begun on another thread (or not tracked): recorded here. */
		more[0] = r.kind_;
		more[1] = r.number_;
		more[2] = r.slot_;
		keep |= KTRACE_REQ_DIRECT;
		put_rec(t, KTRACE_EXT_REQ_CLOSE_ANY, keep, more, 3, end);
		if (r.slot_ != t->slot)
			ktrace__thread_mail_post(r.slot_, r.seq_,
			                         (e.keep & (KTRACE_REQ_SLOW | KTRACE_REQ_TRIGGER)) != 0);
		ktrace__kind_fate(r.kind_, keep);
		if (hs) {
			gap_start(t, hs, ktrace__now());
			unheld(t, hs);
		}
		goto out;
	}
	{
		struct kt_open o = hs->open[i - 1];
		uint32_t at;

		keep |= o.keep;
		if (o.direct && !(keep & KTRACE_REQ_SPILLED))
			keep |= KTRACE_REQ_DIRECT;
		if (i == hs->depth) {
			at = put_rec(t, KTRACE_EXT_REQ_CLOSE, keep, NULL, 0, end);
		} else {
			more[0] = r.kind_;
			more[1] = r.number_;
			more[2] = r.slot_;
			at = put_rec(t, KTRACE_EXT_REQ_CLOSE_ANY, keep, more, 3, end);
		}
		memmove(&hs->open[i - 1], &hs->open[i], (hs->depth - i) * sizeof(hs->open[0]));
		hs->depth--;
		if (hs->depth == 0) {
			hs->last_close = t->hold && at != ~0u ? at : ~0u;
			hs->last_kind = r.kind_;
		}
		if (keep & KT_KEEP_WHOLE)
			hs->keep = 1;
		if (t->hold == NULL || (keep & KT_KEEP_WHOLE)) {
			/* recorded (direct or spilled), or kept for itself */
			ktrace__kind_fate(r.kind_, keep);
		} else if (hs->npend < KT_PEND_MAX) {
			hs->pend[hs->npend].kind = r.kind_;
			hs->pend[hs->npend++].close_at = at;
		} else {
			/* no room to settle it later: keep the run */
			hs->keep = 1;
			ktrace__kind_fate(r.kind_, KTRACE_REQ_NESTED);
		}
		maybe_resolve(t, hs, end);
	}
out:
	t->nest--;
}

/* ---- lifecycle ------------------------------------------------------------ */

/* ktrace_snapshot() on this thread: copy its run first (see above). */
KT_NOINSTR void ktrace__hold_before_snapshot(void)
{
	struct kt_thread *t = kt_self();

	if (t->hs == NULL || t->nest)
		return;
	t->nest++;
	if (t->hold && t->hs->gap)
		kt_add(&gaps_kept, 1, relaxed);   /* kept so far: the snapshot's lead-up */
	if (t->hold)
		spill(t, t->hs);
	flush_defer(t, t->hs);
	t->nest--;
}

KT_NOINSTR void ktrace__hold_fork_child(struct kt_thread *t)
{
	/* The child starts clean: what the parent held is the parent's.  Its
	 * hold state is left behind (a new one, published under the child's
	 * thread slot, comes with the first request), and so is the pool: a
	 * parent thread may have held its lock at the fork. */
	run_stop(t);
	t->hs = NULL;
	pool = NULL;
	pthread_mutex_init(&pool_mu, NULL);
}

KT_NOINSTR void ktrace__hold_thread_exit(void)
{
	struct kt_thread *t = kt_self();
	struct kt_hold *hs = t->hs;

	if (hs == NULL || t->nest)
		return;
	t->nest++;
	if (t->hold && hs->gap)
		gap_end(t, hs, ktrace__now());   /* after its last request */
	else if (t->hold)
		keep_run(t, hs);   /* requests that never ended: keep them */
	flush_defer(t, hs);
	hs->depth = 0;
	t->hs = NULL;
	ktrace__thread_set_hold(t->slot, NULL);
	/* Its pages back to the system (the mapping lock held meanwhile:
	 * noted, filter.c); the state to the pool. */
	ktrace__madvise_own(hs->buf, (size_t)hs->cap * 4, MADV_DONTNEED);
	pthread_mutex_lock(&pool_mu);
	hs->next_free = pool;
	pool = hs;
	pthread_mutex_unlock(&pool_mu);
	t->nest--;
}
