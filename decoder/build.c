/*
 * build.c - stage 3 of ktrace-decode: calls across cores and threads.
 *
 * Stage 3 (stacks): a thread's records must be taken in its program order,
 * which a merge by time cannot give: a migrating thread makes several calls
 * per tick, so its last records on one core and its first on the next can
 * share a tick, and cores' clocks differ a little.  So, two passes:
 *
 *   1. scan_cores(): each core's stream is cut into pieces, maximal runs of
 *      records of one (thread slot, segment) -- the segment is the seq of
 *      the THREAD record, which the writer bumps whenever the thread starts
 *      writing on a core.  Per-core statistics, window filtering and the
 *      core tracks (runs) are done here, in stream order.
 *   2. kd_dec_walk(): each thread's pieces, ordered by segment (exact), or
 *      by first tick for writers without segments, are re-read from their
 *      saved iterator state and fed to the stack builder, which emits the
 *      event stream (stream.h) to a sink.  Each thread is read twice: a
 *      pre-pass finds the frames entered before the window (exits with no
 *      entry at the outermost level), so that the main pass can open them
 *      first and every event carries its final depth: nothing per call is
 *      kept.  Requests are matched afterwards, in time order, so one may
 *      even end on another thread.
 *
 * Within one thread, ticks are clamped to be non-decreasing so that small
 * backward steps (clock skew at a migration, a late store) never make a
 * child start before its parent.
 *
 *   exit of the frame on top            -> pop it
 *   exit of a frame deeper in the stack -> the frames above it lost their
 *                                          exits: close them (EXIT_LOST,
 *                                          TRUNC_END), then pop it
 *   exit of a function not in the stack -> entered before the window:
 *                                          a TRUNC_BEGIN call starting at the
 *                                          thread's window start (found by the
 *                                          pre-pass and opened first); it is
 *                                          the parent of everything the thread
 *                                          did before at the outermost level
 *                                          (if frames are still open, its
 *                                          entry was lost inside the top one:
 *                                          a TRUNC_BEGIN child of it, from the
 *                                          thread's previous record)
 *   frames open at the end              -> TRUNC_END, end = window end
 *
 * The complete window: a core whose ring wrapped lost its older data, so
 * stacks are only complete from the latest first-record time among wrapped
 * cores; and each core's records are complete only up to its CORES
 * copy_tsc, so the window ends at the earliest one.  Records outside are
 * dropped (counted per core) unless --all.
 *
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "decoder.h"
#include "iter.h"

/* ---- stage 3: build ------------------------------------------------------- */

/* An open call. */
struct frame {
	uint64_t begin;      /* ticks */
	uint64_t child;      /* ticks: children's durations */
	uint32_t func;
	uint32_t core;
	uint32_t flags;
	uint32_t idx;        /* its CALL_BEGIN's place among the walk's (see ncalls) */
};

/* A frame entered before the window, found by the pre-pass. */
struct preframe {
	uint32_t func;
	uint32_t core;       /* of its exit */
	uint32_t flags;      /* KD_CALL_TRUNC_BEGIN | KD_CALL_SPAN? */
};

/* One thread while it is walked (reused for every thread). */
struct tstate {
	struct frame *stack;
	size_t cap;
	uint32_t depth;
	uint32_t base;       /* frames at the bottom opened from the pre-pass, still open */
	uint64_t last_tick;  /* ticks: clamp for per-thread monotonic time */
	uint64_t prev_tick;  /* ticks: the thread's record before the current one */
	uint64_t seq;        /* events emitted */
	uint64_t sub_tick;   /* ticks: of the last timed event emitted */
	uint32_t nsub;       /* events emitted at sub_tick */
	int seen;
	struct preframe *pre;    /* pre-pass: innermost first */
	uint32_t npre;
	size_t cappre;
	uint32_t *fstack;    /* pre-pass: open functions */
	size_t capf;
	uint32_t fdepth;
};

/*
 * The pre-pass (frames entered before the window) done during the cores'
 * scan (scan_cores): when the scan met a thread's pieces in the thread's
 * program order, the same matching on the same records gives the same
 * frames, without reading them again.  A thread whose pieces order
 * otherwise (clock skew between cores larger than a migration) gets the
 * real pre-pass in each walk (valid = 0).
 */
struct prescan {
	struct tstate s;     /* seen, fstack, fdepth, pre, npre: as the pre-pass's */
	int valid;           /* 1: s.pre is the thread's pre-pass result */
};

/*
 * A piece: a maximal run of consecutive records of one (thread slot,
 * segment) in one core's stream.  Pieces are where a thread's records are
 * re-ordered: inside a piece the core's stream order is the program order.
 */
struct piece {
	uint64_t first_tick;     /* ticks: its first record */
	uint64_t nrec;           /* records in it (before window filtering) */
	uint64_t ref_tick;       /* iterator state before its first record: */
	uint32_t ref_ts20;       /*   reference tick and ts20, */
	uint32_t blk;            /*   block index in snap->blocks, */
	uint32_t pos;            /*   word position in the block */
	uint32_t core;           /* core index */
	uint32_t slot, seg;      /* as named by BLOCK_START/THREAD */
	uint32_t thread;         /* thread index */
	uint32_t idx;            /* creation order */
	uint64_t key1, key2;     /* sort keys inside the thread, see order_pieces() */
};

/* A request begin or end, matched after all threads were walked. */
struct reqev {
	uint64_t tick;           /* ticks: per-thread clamped */
	uint64_t id;             /* request id */
	uint64_t seq;            /* walk order: ties keep a thread's program order */
	uint32_t kind;           /* name id */
	uint32_t thread, core;
	uint32_t end;            /* 1 for REQ_END */
	uint32_t sub;            /* kd_ev.sub of its event */
	uint32_t at_call;        /* recorded order: CALL_BEGINs emitted before it */
	uint32_t top;            /* idx of the innermost open frame then, or KD_NONE */
};

/* The builder: made by kd_dec_prepare, used by every kd_dec_walk. */
struct kd_build {
	struct kd_dec *d;
	struct tstate ts;
	struct kd_batch *batch;  /* the passes' decoded records (iter.h) */
	struct prescan *prescan; /* [b->capprescan]: by thread index */
	size_t capprescan;
	size_t capthreads, capreqs, capmarks, capruns, capfuncs;
	struct kd_umap thread_map;  /* slot -> thread index */
	struct kd_umap addr_map;    /* address -> func index */
	struct kd_umap span_map;    /* name id -> func index */
	struct kd_umap req_map;     /* mix(kind, id) -> open request index */
	uint32_t id_func[KTRACE_FUNC_ID_COUNT]; /* compact id -> func index */
	uint64_t run_gap;        /* ticks: a gap this long splits a core run */
	uint64_t end_limit;      /* ticks: records after it are dropped (UINT64_MAX: none) */
	struct piece *pieces;
	uint32_t npieces;
	size_t cappieces;
	uint32_t nthreads;       /* threads with records (more come from sched.c) */
	uint32_t *thread_piece;  /* [nthreads + 1]: thread t's pieces (sorted) */
	struct reqev *reqevs;
	uint32_t nreqevs;
	size_t capreqevs;
	struct kd_sink sink;     /* the current walk's */
	uint64_t done, total;    /* records walked (pre-pass and main), to walk */
	uint64_t nrec;           /* records of the walk's threads (each counted once) */
	int64_t shown_ns;        /* monotonic ns: last progress line, 0 = none yet */
	int64_t walk_ns;         /* monotonic ns: when this walk began */
	uint32_t ncalls;         /* CALL_BEGINs emitted in this walk: a call's index
	                            in d->calls when the collector is the sink, which
	                            is how requests find their calls (call_first...) */
	int oom;
};

static uint32_t new_func(struct kd_build *b, uint64_t addr, uint32_t id, uint32_t kind)
{
	struct kd_dec *d = b->d;

	if (kd_grow(&d->funcs, &b->capfuncs, d->nfuncs, sizeof(*d->funcs), "the functions")) {
		b->oom = 1;
		return KD_NONE;
	}
	d->funcs[d->nfuncs].addr = addr;
	d->funcs[d->nfuncs].id = id;
	d->funcs[d->nfuncs].kind = kind;
	d->funcs[d->nfuncs].name = NULL;
	return d->nfuncs++;
}

static uint32_t func_addr(struct kd_build *b, uint64_t addr)
{
	uint32_t f = kd_umap_get(&b->addr_map, addr);

	if (f != KD_NONE)
		return f;
	f = new_func(b, addr, 0, KD_FUNC_ADDR);
	if (f != KD_NONE && kd_umap_put(&b->addr_map, addr, f))
		b->oom = 1;
	return f;
}

static uint32_t func_id(struct kd_build *b, uint32_t id)
{
	uint32_t f = b->id_func[id];

	if (f != KD_NONE)
		return f;
	if (b->d->snap.func_known[id])
		f = func_addr(b, b->d->snap.func_addr[id]);
	else
		f = new_func(b, 0, id, KD_FUNC_UNKNOWN_ID);
	b->id_func[id] = f;
	return f;
}

static uint32_t func_span(struct kd_build *b, uint32_t name)
{
	uint32_t f = kd_umap_get(&b->span_map, name);

	if (f != KD_NONE)
		return f;
	f = new_func(b, 0, name, KD_FUNC_SPAN);
	if (f != KD_NONE && kd_umap_put(&b->span_map, name, f))
		b->oom = 1;
	return f;
}

/* The function of an enter/exit record, and KD_CALL_SPAN for spans.
 * Inline: the compact-id case (almost every record) is one table load. */
static inline __attribute__((always_inline)) uint32_t
func_of(struct kd_build *b, const struct kd_dec_event *ev, uint32_t *span)
{
	*span = 0;
	if (__builtin_expect(ev->kind == KD_DK_ENTER || ev->kind == KD_DK_EXIT, 1)) {
		uint32_t f = b->id_func[ev->id % KTRACE_FUNC_ID_COUNT];

		if (__builtin_expect(f != KD_NONE, 1))
			return f;
	}
	switch (ev->kind) {
	case KD_DK_ENTER:
	case KD_DK_EXIT:
		return func_id(b, ev->id % KTRACE_FUNC_ID_COUNT);
	case KD_DK_ENTER_ADDR:
	case KD_DK_EXIT_ADDR:
		return func_addr(b, ev->value);
	default:
		*span = KD_CALL_SPAN;
		return func_span(b, ev->id);
	}
}

static uint32_t new_thread(struct kd_build *b, uint32_t slot, const struct ktrace_thread_rec *r)
{
	struct kd_dec *d = b->d;
	struct kd_dec_thread *t;

	if (kd_grow(&d->threads, &b->capthreads, d->nthreads, sizeof(*d->threads), "the threads")) {
		b->oom = 1;
		return KD_NONE;
	}
	t = &d->threads[d->nthreads];
	memset(t, 0, sizeof(*t));
	t->slot = slot;
	if (r) {
		t->tid = r->tid;
		t->flags = r->flags;
		t->known = 1;
		snprintf(t->name, sizeof(t->name), "%s", r->name);
	} else {
		snprintf(t->name, sizeof(t->name), "slot%" PRIu32, slot);
	}
	if (kd_umap_put(&b->thread_map, slot, d->nthreads)) {
		b->oom = 1;
		return KD_NONE;
	}
	return d->nthreads++;
}

static uint32_t thread_of(struct kd_build *b, uint32_t slot)
{
	uint32_t t = kd_umap_get(&b->thread_map, slot);

	if (t != KD_NONE)
		return t;
	return new_thread(b, slot, NULL);
}

/* What emit() numbers, for an event nobody sees (a walk without a sink):
 * later events (marks) keep the places they have with a sink. */
static inline void emit_none(struct kd_build *b, uint64_t tick)
{
	struct tstate *s = &b->ts;

	s->seq++;
	if (tick != s->sub_tick) {
		s->sub_tick = tick;
		s->nsub = 0;
	}
	s->nsub++;
}

static inline __attribute__((always_inline)) void emit(struct kd_build *b, struct kd_ev *e)
{
	struct tstate *s = &b->ts;

	e->seq = s->seq++;
	if (e->kind != KD_EV_THREAD_BEGIN && e->kind != KD_EV_THREAD_END) {
		if (e->tick != s->sub_tick) {
			s->sub_tick = e->tick;
			s->nsub = 0;
		}
		e->sub = s->nsub++;
	}
	if (b->sink.ev)
		b->sink.ev(b->sink.ctx, b->d, e);
}

static void push(struct kd_build *b, uint32_t thread, uint32_t func, uint64_t tick,
                 uint32_t core, uint32_t flags)
{
	struct tstate *s = &b->ts;
	struct kd_ev e;

	if (func == KD_NONE)
		return;
	if (__builtin_expect(s->depth >= s->cap, 0) &&
	    kd_grow(&s->stack, &s->cap, s->depth, sizeof(*s->stack), "a call stack")) {
		b->oom = 1;
		return;
	}
	s->stack[s->depth] = (struct frame){ tick, 0, func, core, flags, b->ncalls++ };
	if (!b->sink.ev) {
		s->depth++; /* a walk without a sink (summary): no event to build */
		emit_none(b, tick);
		return;
	}
	/* every field set (no memset: this runs for every call) */
	e.kind = KD_EV_CALL_BEGIN;
	e.thread = thread;
	e.func = func;
	e.depth = s->depth;
	e.core = core;
	e.flags = flags;
	e.tick = tick;
	e.begin = 0;
	e.self = 0;
	e.value = 0;
	s->depth++;
	emit(b, &e);
}

static void close_top(struct kd_build *b, uint32_t thread, uint64_t tick, uint32_t flags)
{
	struct tstate *s = &b->ts;
	struct frame *f = &s->stack[--s->depth];
	struct kd_dec *d = b->d;
	struct kd_ev e;
	uint64_t end = tick > f->begin ? tick : f->begin, dur = end - f->begin;

	if (s->base > s->depth)
		s->base = s->depth;
	flags |= f->flags;
	if (s->depth)
		s->stack[s->depth - 1].child += dur;
	d->counts.calls++;
	d->counts.trunc_begin += !!(flags & KD_CALL_TRUNC_BEGIN);
	d->counts.trunc_end += (flags & (KD_CALL_TRUNC_END | KD_CALL_EXIT_LOST)) ==
	                       KD_CALL_TRUNC_END;
	d->counts.exit_lost += !!(flags & KD_CALL_EXIT_LOST);
	if (!b->sink.ev) {
		emit_none(b, end); /* a walk without a sink (summary) */
		return;
	}
	e.kind = KD_EV_CALL_END;
	e.thread = thread;
	e.func = f->func;
	e.depth = s->depth;
	e.core = f->core;
	e.flags = flags;
	e.tick = end;
	e.begin = f->begin;
	e.self = dur > f->child ? dur - f->child : 0;
	e.value = 0;
	emit(b, &e);
}

/* How deep an exit looks for its entry before calling it unmatched. */
#define MATCH_DEPTH 256u

static void pop(struct kd_build *b, uint32_t thread, uint32_t func, uint64_t tick,
                uint32_t core, uint32_t span)
{
	struct tstate *s = &b->ts;
	struct kd_dec *d = b->d;
	uint32_t lim = s->depth > MATCH_DEPTH ? s->depth - MATCH_DEPTH : 0;
	uint32_t i;

	if (func == KD_NONE)
		return;
	if (lim < s->base)
		lim = s->base; /* frames from before the window close only below */
	for (i = s->depth; i > lim; i--)
		if (s->stack[i - 1].func == func)
			break;
	if (i > lim) {
		while (s->depth > i) {
			close_top(b, thread, tick, KD_CALL_TRUNC_END | KD_CALL_EXIT_LOST);
			d->lost_exits++;
		}
		close_top(b, thread, tick, 0);
		return;
	}
	if (s->depth > s->base) {
		/* Not in the stack, yet frames are open: its entry was lost inside
		 * the current frame (not before the window, or it would enclose
		 * them).  It ran at most since the thread's previous record. */
		push(b, thread, func, s->prev_tick, core, KD_CALL_TRUNC_BEGIN | span);
		if (s->depth && s->stack[s->depth - 1].func == func)
			close_top(b, thread, tick, 0);
		d->unmatched_exits++;
		return;
	}
	/* Entered before the window: the pre-pass opened it, it is on top. */
	if (s->depth) {
		close_top(b, thread, tick, 0);
	} else if (!b->sink.ev) {
		/* A walk without a sink skips the pre-pass (nobody sees depths):
		 * count the call here, as its close would. */
		d->unmatched_exits++;
		d->counts.calls++;
		d->counts.trunc_begin++;
	}
}

/* Pre-pass: the same matching on functions alone; an exit that finds
 * nothing at the outermost level was entered before the window. */
static void pre_exit(struct kd_build *b, struct tstate *s, uint32_t func, uint32_t core,
                     uint32_t span)
{
	uint32_t lim = s->fdepth > MATCH_DEPTH ? s->fdepth - MATCH_DEPTH : 0, i;

	if (func == KD_NONE)
		return;
	for (i = s->fdepth; i > lim; i--)
		if (s->fstack[i - 1] == func)
			break;
	if (i > lim) {
		s->fdepth = i - 1;
		return;
	}
	if (s->fdepth)
		return; /* lost inside the top frame: no frame stays open */
	if (kd_grow(&s->pre, &s->cappre, s->npre, sizeof(*s->pre), "a call stack")) {
		b->oom = 1;
		return;
	}
	s->pre[s->npre++] = (struct preframe){ func, core, KD_CALL_TRUNC_BEGIN | span };
}

static inline __attribute__((always_inline)) void
pre_event(struct kd_build *b, struct tstate *s, const struct kd_dec_event *ev)
{
	uint32_t span, f;

	switch (ev->kind) {
	case KD_DK_ENTER:
	case KD_DK_ENTER_ADDR:
	case KD_DK_SPAN_BEGIN:
		f = func_of(b, ev, &span);
		if (f == KD_NONE)
			return;
		if (__builtin_expect(s->fdepth >= s->capf, 0) &&
		    kd_grow(&s->fstack, &s->capf, s->fdepth, sizeof(*s->fstack), "a call stack")) {
			b->oom = 1;
			return;
		}
		s->fstack[s->fdepth++] = f;
		return;
	case KD_DK_EXIT:
	case KD_DK_EXIT_ADDR:
	case KD_DK_SPAN_END:
		f = func_of(b, ev, &span);
		if (s->fdepth && s->fstack[s->fdepth - 1] == f && f != KD_NONE) {
			s->fdepth--; /* the common case: the innermost frame returns */
			return;
		}
		pre_exit(b, s, f, ev->core, span);
		return;
	default:
		return;
	}
}

static void on_request_ev(struct kd_build *b, const struct kd_dec_event *ev, uint32_t th,
                          uint64_t tick)
{
	struct kd_ev e = { 0 };

	if (kd_grow(&b->reqevs, &b->capreqevs, b->nreqevs, sizeof(*b->reqevs), "the requests")) {
		b->oom = 1;
		return;
	}
	e.kind = ev->kind == KD_DK_REQ_END ? KD_EV_REQ_END : KD_EV_REQ_BEGIN;
	e.thread = th;
	e.func = ev->id;
	e.core = ev->core;
	e.tick = tick;
	e.value = ev->value;
	emit(b, &e);
	b->reqevs[b->nreqevs] = (struct reqev){
		tick, ev->value, b->nreqevs, ev->id, th, ev->core, ev->kind == KD_DK_REQ_END, e.sub,
		b->ncalls, b->ts.depth ? b->ts.stack[b->ts.depth - 1].idx : KD_NONE
	};
	b->nreqevs++;
}

static uint16_t sub16(uint32_t sub)
{
	return sub > UINT16_MAX ? UINT16_MAX : (uint16_t)sub;
}

static void on_request(struct kd_build *b, const struct reqev *ev)
{
	struct kd_dec *d = b->d;
	uint64_t key = ev->id ^ kd_mix64((uint64_t)ev->kind + 0x9e3779b97f4a7c15ull);
	uint32_t r = kd_umap_get(&b->req_map, key);
	uint32_t thread = ev->thread;
	uint64_t tick = ev->tick;
	struct kd_dec_request *q;

	if (ev->end && r < d->nreqs && d->reqs[r].kind == ev->kind && d->reqs[r].id == ev->id) {
		q = &d->reqs[r];
		q->end = tick > q->begin ? tick : q->begin;
		q->end_sub = sub16(ev->sub);
		q->flags &= ~(uint32_t)KD_REQ_TRUNC_END;
		q->end_thread = thread;
		if (thread == q->thread) {
			q->call_end = ev->at_call;
			q->open_at_end = ev->top;
		}
		/* Closed: a tombstone value, so probe chains stay intact. */
		kd_umap_put(&b->req_map, key, KD_NONE - 1);
		return;
	}
	if (kd_grow(&d->reqs, &b->capreqs, d->nreqs, sizeof(*d->reqs), "the requests")) {
		b->oom = 1;
		return;
	}
	q = &d->reqs[d->nreqs];
	q->id = ev->id;
	q->kind = ev->kind;
	q->thread = thread;
	q->end_thread = thread;
	q->core = ev->core;
	q->call_first = q->call_end = q->open_at_end = KD_NONE;
	if (!ev->end) {
		q->call_first = ev->at_call;
		q->begin = tick;
		q->end = tick;
		q->begin_sub = sub16(ev->sub);
		q->end_sub = UINT16_MAX; /* at the window end: after the calls there */
		q->flags = KD_REQ_TRUNC_END; /* until its end is seen */
		if (kd_umap_put(&b->req_map, key, d->nreqs))
			b->oom = 1;
	} else {
		q->begin = d->threads[thread].start_tick < tick ? d->threads[thread].start_tick : tick;
		q->end = tick;
		q->begin_sub = 0;
		q->end_sub = sub16(ev->sub);
		q->flags = KD_REQ_TRUNC_BEGIN;
		q->call_end = ev->at_call;
		q->open_at_end = ev->top;
	}
	d->nreqs++;
}

static int cmp_reqev(const void *a, const void *b)
{
	const struct reqev *x = a, *y = b;

	if (x->tick != y->tick)
		return x->tick < y->tick ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_req(const void *a, const void *b)
{
	const struct kd_dec_request *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->thread < y->thread ? -1 : x->thread > y->thread;
}

/* 0: in the window; 1: before it; 2: after it.  A block that starts in the
 * window is kept whole, so a late store just after a block switch (a small
 * backward step below the block's start) is not dropped. */
static int outside(const struct kd_build *b, uint64_t tick, uint64_t blk_tick)
{
	if (tick < b->d->window_start && blk_tick < b->d->window_start)
		return 1;
	return tick > b->end_limit ? 2 : 0;
}

/* The thread's first record in the window: where its calls may start. */
static void thread_start(struct kd_build *b, uint32_t th, uint64_t tick, uint32_t core)
{
	struct kd_dec *d = b->d;
	struct kd_dec_thread *t = &d->threads[th];

	t->first_tick = tick;
	if (!d->opts.all)
		t->start_tick = d->window_start;
	else
		t->start_tick = d->core_stats[core].first_tick;
	if (t->known) {
		const struct ktrace_thread_rec *r = kd_snap_thread(&d->snap, t->slot);
		uint64_t ft = r ? r->first_tsc >> d->shift : 0;

		if (ft > t->start_tick && ft <= tick)
			t->start_tick = ft;
	}
	/* Records may step back below their block's start. */
	if (t->start_tick > tick)
		t->start_tick = tick;
}

/* One record of thread th in the window, to the pre-pass state s (the
 * walk's, or the scan's for the thread): its first one starts the thread. */
static inline __attribute__((always_inline)) void
pre_step(struct kd_build *b, struct tstate *s, uint32_t th, const struct kd_dec_event *ev)
{
	if (!s->seen) {
		s->seen = 1;
		thread_start(b, th, ev->tick, ev->core);
	}
	pre_event(b, s, ev);
}

/* Did the scan run thread th's pre-pass (struct prescan)? */
static int prescanned(const struct kd_build *b, uint32_t th)
{
	return th < b->capprescan && b->prescan[th].valid;
}

/* One record of thread th, in the thread's program order. */
static void on_event(struct kd_build *b, const struct kd_dec_event *ev, uint32_t th)
{
	struct kd_dec *d = b->d;
	struct kd_dec_thread *t = &d->threads[th];
	struct tstate *s = &b->ts;
	uint64_t tick;
	uint32_t span, f;

	d->events++;
	tick = ev->tick > s->last_tick ? ev->tick : s->last_tick;
	s->prev_tick = s->seen ? s->last_tick : tick;
	s->last_tick = tick;
	if (!s->seen) {
		s->seen = 1;
		if (!b->sink.ev)
			thread_start(b, th, tick, ev->core);
		/* Open the frames entered before the window, outermost first. */
		for (uint32_t i = s->npre; i > 0; i--)
			push(b, th, s->pre[i - 1].func, t->start_tick, s->pre[i - 1].core,
			     s->pre[i - 1].flags);
		s->base = s->depth;
		d->unmatched_exits += s->npre;
	}

	switch (ev->kind) {
	case KD_DK_ENTER:
	case KD_DK_ENTER_ADDR:
	case KD_DK_SPAN_BEGIN:
		f = func_of(b, ev, &span);
		push(b, th, f, tick, ev->core, span);
		break;
	case KD_DK_EXIT:
	case KD_DK_EXIT_ADDR:
	case KD_DK_SPAN_END:
		f = func_of(b, ev, &span);
		pop(b, th, f, tick, ev->core, span);
		break;
	case KD_DK_MARK: {
		struct kd_ev e = { 0 };

		if (kd_grow(&d->marks, &b->capmarks, d->nmarks, sizeof(*d->marks), "the marks")) {
			b->oom = 1;
			break;
		}
		e.kind = KD_EV_MARK;
		e.thread = th;
		e.func = ev->id;
		e.core = ev->core;
		e.tick = tick;
		e.value = ev->value;
		emit(b, &e);
		d->marks[d->nmarks].tick = tick;
		d->marks[d->nmarks].value = ev->value;
		d->marks[d->nmarks].name = ev->id;
		d->marks[d->nmarks].thread = th;
		d->marks[d->nmarks].core = ev->core;
		d->marks[d->nmarks].sub = e.sub;
		d->nmarks++;
		break;
	}
	case KD_DK_REQ_BEGIN:
	case KD_DK_REQ_END:
		on_request_ev(b, ev, th, tick);
		break;
	}
}

/* Thread th's pre-pass state (struct prescan), or NULL out of memory. */
static struct prescan *prescan_of(struct kd_build *b, uint32_t th)
{
	while (th >= b->capprescan) {
		size_t old = b->capprescan;

		if (kd_grow(&b->prescan, &b->capprescan, old, sizeof(*b->prescan), "the threads"))
			return NULL;
		for (size_t i = old; i < b->capprescan; i++) {
			memset(&b->prescan[i], 0, sizeof(b->prescan[i]));
			b->prescan[i].valid = 1;
		}
	}
	return &b->prescan[th];
}

/* One core's place in the scan. */
struct cscan {
	struct kd_core_iter it;
	struct kd_batch *bt;     /* its current batch (bt->n = 0: exhausted) */
	struct kd_dec_run run;   /* the run being built */
	uint32_t cur;            /* its current piece, KD_NONE before any */
	uint32_t cslot, cthread; /* slot -> thread of the last lookup */
};

/* One batch of core c: pieces, window counts, functions, runs, and the
 * pre-pass of the batch's thread (struct prescan). */
static void scan_batch(struct kd_build *b, struct cscan *cc, uint32_t c)
{
	struct kd_dec *d = b->d;
	struct kd_dec_core_stats *cs = &d->core_stats[c];
	const struct kd_batch *bt = cc->bt;
	struct kd_dec_run *run = &cc->run;
	struct kd_dec_event ev;
	struct prescan *ps;
	uint32_t th;
	uint64_t kept = 0, last = 0;

	ev.slot = bt->slot;
	ev.seg = bt->seg;
	ev.core = c;
	/* A new piece starts at a batch's first event (one slot and segment
	 * per batch): its start state is the batch's. */
	if (cc->cur == KD_NONE || b->pieces[cc->cur].slot != bt->slot ||
	    b->pieces[cc->cur].seg != bt->seg) {
		struct piece *p;

		if (cc->cthread == KD_NONE || cc->cslot != bt->slot) {
			cc->cthread = thread_of(b, bt->slot);
			cc->cslot = bt->slot;
		}
		if (cc->cthread == KD_NONE ||
		    kd_grow(&b->pieces, &b->cappieces, b->npieces, sizeof(*b->pieces),
		            "the timeline")) {
			b->oom = 1;
			return;
		}
		p = &b->pieces[b->npieces];
		p->first_tick = bt->tick[0];
		p->nrec = 0;
		p->ref_tick = bt->ref_tick;
		p->ref_ts20 = bt->ref_ts20;
		p->blk = bt->blk;
		p->pos = bt->pos;
		p->core = c;
		p->slot = bt->slot;
		p->seg = bt->seg;
		p->thread = cc->cthread;
		p->idx = b->npieces;   /* the scan's order: see struct prescan */
		cc->cur = b->npieces++;
	}
	b->pieces[cc->cur].nrec += bt->n;
	th = b->pieces[cc->cur].thread;
	if (!(ps = prescan_of(b, th))) {
		b->oom = 1;
		return;
	}
	for (uint32_t i = 0; i < bt->n; i++) {
		int w;

		ev.tick = bt->tick[i];
		ev.id = bt->id[i];
		ev.kind = bt->kind[i];
		ev.value = bt->value[i];
		w = outside(b, ev.tick, bt->blk_tick);
		if (w == 1) {
			cs->dropped++;
			d->dropped++;
			continue;
		}
		if (w == 2) {
			cs->dropped_after++;
			d->dropped_after++;
			continue;
		}
		kept++;
		if (ev.tick > last)
			last = ev.tick;
		/* Every function gets its index here, so names are known before
		 * any walk (streamed sinks print them as they go): the pre-pass
		 * looks up (and so indexes) the function of every enter, exit and
		 * span; without it, here. */
		if (ps->valid)
			pre_step(b, &ps->s, th, &ev);
		else if (ev.kind != KD_DK_MARK && ev.kind != KD_DK_REQ_BEGIN &&
		           ev.kind != KD_DK_REQ_END) {
			uint32_t span;

			func_of(b, &ev, &span);
		}
		if (run->events && (run->thread != th || ev.tick > run->end + b->run_gap)) {
			if (kd_grow(&d->runs, &b->capruns, d->nruns, sizeof(*d->runs),
			            "the core runs")) {
				b->oom = 1;
				return;
			}
			d->runs[d->nruns++] = *run;
			run->events = 0;
		}
		if (!run->events) {
			run->begin = ev.tick;
			run->end = ev.tick;
			run->core = c;
			run->thread = th;
		}
		if (ev.tick > run->end)
			run->end = ev.tick;
		run->events++;
	}
	cs->events += kept;
	d->threads[th].events += kept;
	if (last > cs->last_tick)
		cs->last_tick = last;
}

/*
 * Pass 1: cut the cores' streams into pieces, count what falls outside the
 * window, record which thread ran where (runs), and run the pre-pass of
 * every thread.  The cores are read together, a batch at a time, always the
 * batch that starts earliest: a thread that moved from one core to another
 * is then seen in its program order (its records on the first core all
 * precede the move, those on the second follow it), which the pieces'
 * order confirms thread by thread before the scan's pre-pass is trusted.
 */
static void scan_cores(struct kd_build *b)
{
	struct kd_dec *d = b->d;
	const struct kd_snap *snap = &d->snap;
	uint32_t nc = snap->ncores;
	struct cscan *cc = kd_xcalloc(nc ? nc : 1, sizeof(*cc), "the cores");

	for (uint32_t c = 0; c < nc; c++) {
		kd_core_iter_init(&cc[c].it, snap, c, &d->snap.warn);
		cc[c].bt = kd_xcalloc(1, sizeof(*cc[c].bt), "the cores");
		cc[c].cur = KD_NONE;
		cc[c].cthread = KD_NONE;
		kd_iter_batch(&cc[c].it, cc[c].bt, KD_BATCH);
	}
	while (!b->oom) {
		uint32_t best = KD_NONE;

		for (uint32_t c = 0; c < nc; c++)
			if (cc[c].bt->n && (best == KD_NONE ||
			                    cc[c].bt->tick[0] < cc[best].bt->tick[0]))
				best = c;
		if (best == KD_NONE)
			break;
		scan_batch(b, &cc[best], best);
		kd_iter_batch(&cc[best].it, cc[best].bt, KD_BATCH);
	}
	for (uint32_t c = 0; c < nc; c++) {
		if (cc[c].run.events && !b->oom) {
			if (kd_grow(&d->runs, &b->capruns, d->nruns, sizeof(*d->runs),
			            "the core runs"))
				b->oom = 1;
			else
				d->runs[d->nruns++] = cc[c].run;
		}
		d->core_stats[c].damaged_tails = cc[c].it.damaged_tails;
		free(cc[c].bt);
	}
	free(cc);
	/* Runs by core, as one core after another gave them (each core's in
	 * its stream order): a stable counting sort. */
	if (d->nruns && nc > 1) {
		struct kd_dec_run *by = kd_xmalloc((size_t)d->nruns * sizeof(*by), "the core runs");
		uint32_t *at = kd_xcalloc((size_t)nc + 1, sizeof(*at), "the core runs");

		for (uint32_t i = 0; i < d->nruns; i++)
			at[d->runs[i].core + 1]++;
		for (uint32_t c = 0; c < nc; c++)
			at[c + 1] += at[c];
		for (uint32_t i = 0; i < d->nruns; i++)
			by[at[d->runs[i].core]++] = d->runs[i];
		free(d->runs);
		d->runs = by;
		b->capruns = d->nruns;
		free(at);
	}
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->key1 != y->key1)
		return x->key1 < y->key1 ? -1 : 1;
	if (x->key2 != y->key2)
		return x->key2 < y->key2 ? -1 : 1;
	if (x->core != y->core)
		return x->core < y->core ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Order each thread's pieces.  With segment numbers (THREAD records of
 * N >= 2) the order is exact: by segment, then time.  A thread with any
 * piece lacking one (an older writer) is ordered by the pieces' first
 * ticks: a thread runs on one core at a time, so whole pieces do not
 * interleave in time except by clock skew.
 */
static void order_pieces(struct kd_build *b)
{
	uint32_t nt = b->nthreads;
	uint8_t *by_time = kd_xcalloc((size_t)nt + 1, 1, "thread order");
	uint32_t *first = kd_xcalloc((size_t)nt + 2, sizeof(*first), "thread order");

	for (uint32_t i = 0; i < b->npieces; i++)
		if (b->pieces[i].seg == KD_NONE)
			by_time[b->pieces[i].thread] = 1;
	for (uint32_t i = 0; i < b->npieces; i++) {
		struct piece *p = &b->pieces[i];

		p->key1 = by_time[p->thread] ? p->first_tick : p->seg;
		p->key2 = by_time[p->thread] ? p->seg : p->first_tick;
		first[p->thread + 1]++;
	}
	free(by_time);
	/* Group by thread, keeping the scan's order (a counting sort: pieces
	 * are one per thread switch, there may be millions), then sort each
	 * thread's pieces by their keys unless the scan met them in order
	 * already, as it almost always does. */
	for (uint32_t t = 0; t < nt; t++)
		first[t + 1] += first[t];
	{
		/* Each piece's place, then the permutation applied in place by
		 * its cycles: 4 bytes a piece, not a second copy of them. */
		uint32_t *at = kd_xmalloc(((size_t)nt + 1) * sizeof(*at), "thread order");
		uint32_t *dest = kd_xmalloc(((size_t)b->npieces + 1) * sizeof(*dest), "thread order");

		memcpy(at, first, ((size_t)nt + 1) * sizeof(*at));
		for (uint32_t i = 0; i < b->npieces; i++)
			dest[i] = at[b->pieces[i].thread]++;
		for (uint32_t i = 0; i < b->npieces; i++)
			while (dest[i] != i) {
				uint32_t j = dest[i], tj;
				struct piece tp = b->pieces[j];

				b->pieces[j] = b->pieces[i];
				b->pieces[i] = tp;
				tj = dest[j];
				dest[j] = j;
				dest[i] = tj;
			}
		free(dest);
		free(at);
	}
	for (uint32_t t = 0; t < nt; t++) {
		uint32_t lo = first[t], hi = first[t + 1];

		for (uint32_t i = lo + 1; i < hi; i++)
			if (cmp_piece(&b->pieces[i - 1], &b->pieces[i]) > 0) {
				qsort(b->pieces + lo, hi - lo, sizeof(*b->pieces), cmp_piece);
				break;
			}
	}
	b->thread_piece = first; /* [nt + 1] used */
}
static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The progress line (opts.progress: stderr is a terminal and no -q): once
 * the decode has taken a second, percent, records/s and what is left, on
 * one line rewritten in place, at most 4 times a second; cleared at the end.
 */
static void progress(struct kd_build *b, int end)
{
	const struct kd_dec *d = b->d;
	int64_t now = mono_ns(), el = now - d->opts.progress_t0;
	double rate, left;

	if (end) {
		if (b->shown_ns)
			fputs("\r\033[K", stderr);
		b->shown_ns = 0;
		return;
	}
	if (el < 1000000000 || now - b->shown_ns < 250000000 || !b->total)
		return;
	b->shown_ns = now;
	rate = (double)b->done / ((double)(now - b->walk_ns) / 1e9);
	left = rate > 0 ? (double)(b->total - (b->done < b->total ? b->done : b->total)) / rate : 0;
	/* records of the file per second (a record read twice counts once) */
	rate *= (double)b->nrec / (double)b->total;
	fprintf(stderr, "\rktrace-decode: %s: %3.0f%%  %.1f M records/s  %.0f s left\033[K",
	        d->file, 100.0 * (double)b->done / (double)b->total, rate / 1e6, left);
}

/* Feed thread th's records, in order, to the pre-pass (pre) or the builder. */
static void walk_thread(struct kd_build *b, uint32_t th, int pre)
{
	const struct kd_snap *snap = &b->d->snap;
	struct kd_batch *bt = b->batch;
	struct kd_core_iter it;
	struct kd_dec_event ev;

	for (uint32_t i = b->thread_piece[th]; i < b->thread_piece[th + 1] && !b->oom; i++) {
		const struct piece *p = &b->pieces[i];
		uint64_t left = p->nrec;

		kd_core_iter_init(&it, snap, p->core, NULL);
		kd_core_iter_seek(&it, p->blk, p->pos, p->ref_tick, p->ref_ts20, p->slot, p->seg);
		ev.slot = p->slot;
		ev.seg = p->seg;
		ev.core = p->core;
		while (left && !b->oom) {
			uint32_t n = kd_iter_batch(&it, bt, left < KD_BATCH ? (uint32_t)left : KD_BATCH);

			if (!n)
				break;
			left -= n;
			b->done += n;
			if (__builtin_expect((b->done >> 20) != ((b->done - n) >> 20), 0) &&
			    b->d->opts.progress)
				progress(b, 0);
			for (uint32_t k = 0; k < n && !b->oom; k++) {
				ev.tick = bt->tick[k];
				ev.id = bt->id[k];
				ev.kind = bt->kind[k];
				ev.value = bt->value[k];
				if (outside(b, ev.tick, bt->blk_tick))
					continue;
				if (pre)
					pre_step(b, &b->ts, th, &ev);
				else
					on_event(b, &ev, th);
			}
		}
	}
}

static void find_trigger(struct kd_dec *d, struct kd_build *b)
{
	const struct ktrace_trigger_rec *tr = &d->snap.trigger;
	struct kd_dec_request *q;
	uint32_t th;

	d->trigger_req = KD_NONE;
	if (!d->snap.have_trigger)
		return;
	for (uint32_t i = 0; i < d->nreqs; i++)
		if (d->reqs[i].id == tr->request_id && d->reqs[i].kind == tr->kind_id) {
			d->reqs[i].flags |= KD_REQ_TRIGGER;
			d->trigger_req = i;
			return;
		}
	/* Not in the decoded window: rebuild it from the trigger record. */
	if (tr->end_tsc < tr->begin_tsc)
		return;
	th = kd_umap_get(&b->thread_map, tr->thread_slot);
	if (th == KD_NONE ||
	    kd_grow(&d->reqs, &b->capreqs, d->nreqs, sizeof(*d->reqs), "the requests"))
		return;
	q = &d->reqs[d->nreqs];
	memset(q, 0, sizeof(*q));
	q->begin = tr->begin_tsc >> d->shift;
	q->end = tr->end_tsc >> d->shift;
	q->id = tr->request_id;
	q->kind = tr->kind_id;
	q->thread = th;
	q->call_first = q->call_end = q->open_at_end = KD_NONE;
	q->flags = KD_REQ_TRIGGER;
	if (q->begin < d->window_start)
		q->flags |= KD_REQ_TRUNC_BEGIN;
	d->trigger_req = d->nreqs++;
}

int kd_dec_prepare(struct kd_dec *d, struct kd_dec_error *err)
{
	struct kd_snap *snap = &d->snap;
	struct kd_build *b;
	uint32_t nc = snap->ncores;
	uint64_t snap_tick, ten_s;

	d->shift = snap->info.tsc_shift;
	d->tsc_hz = snap->info.tsc_hz;
	d->trigger_req = KD_NONE;
	b = kd_xcalloc(1, sizeof(*b), "the timeline");
	b->batch = kd_xcalloc(1, sizeof(*b->batch), "the timeline");
	d->build = b;
	d->core_stats = kd_xcalloc(nc ? nc : 1, sizeof(*d->core_stats), "core statistics");
	b->d = d;
	memset(b->id_func, 0xff, sizeof(b->id_func));
	/* Muted functions are named even when no call of theirs is left. */
	for (uint32_t i = 0; i < snap->nmuted; i++)
		func_addr(b, snap->muted[i].addr);
	/* 1 ms of ticks: a longer silence on a core splits its thread runs. */
	b->run_gap = (uint64_t)(((unsigned __int128)d->tsc_hz / 1000) >> d->shift);
	if (!b->run_gap)
		b->run_gap = 1;

	/* Window start: latest first-record time among cores whose ring wrapped. */
	d->data_start = UINT64_MAX;
	d->window_start = 0;
	for (uint32_t c = 0; c < nc; c++) {
		struct kd_snap_core *co = &snap->cores[c];
		uint64_t first;

		if (!co->nblocks)
			continue;
		first = kd_block_start_tick(snap, &snap->blocks[co->first_block]);
		d->core_stats[c].first_tick = first;
		d->core_stats[c].last_tick = first;
		d->core_stats[c].has_data = 1;
		if (first < d->data_start)
			d->data_start = first;
		if (co->wrapped && first > d->window_start)
			d->window_start = first;
	}
	if (d->data_start == UINT64_MAX)
		d->data_start = 0;
	if (d->opts.all || d->window_start < d->data_start)
		d->window_start = d->data_start;
	d->window_limited = d->window_start > d->data_start;
	/* Window end: every core's records before its copy_tsc are in the file,
	 * later ones may not be: the complete window ends at the earliest. */
	b->end_limit = UINT64_MAX;
	for (uint32_t c = 0; c < nc && !d->opts.all; c++)
		if (snap->cores[c].have_rec && snap->cores[c].rec.copy_tsc &&
		    (snap->cores[c].rec.copy_tsc >> d->shift) < b->end_limit)
			b->end_limit = snap->cores[c].rec.copy_tsc >> d->shift;
	if (b->end_limit < d->window_start)
		b->end_limit = d->window_start;
	d->window_cut = b->end_limit;

	/* Known threads first, in slot order, so indices are stable. */
	for (uint32_t i = 0; i < snap->nthreads; i++)
		if (new_thread(b, snap->threads[i].slot, &snap->threads[i]) == KD_NONE)
			return kd_dec_fail(err, KD_ENOMEM, "out of memory");

	scan_cores(b);
	if (b->oom)
		return kd_dec_fail(err, KD_ENOMEM, "out of memory building the timeline");
	/* The trigger's thread, if only the trigger names it. */
	if (snap->have_trigger && snap->trigger.end_tsc >= snap->trigger.begin_tsc &&
	    thread_of(b, snap->trigger.thread_slot) == KD_NONE)
		return kd_dec_fail(err, KD_ENOMEM, "out of memory");
	b->nthreads = d->nthreads;
	order_pieces(b);
	/* The scan's pre-pass stands for a thread whose pieces the scan met in
	 * the order they are walked; free what the scan no longer needs. */
	for (uint32_t t = 0; t < b->capprescan && t < b->nthreads; t++) {
		struct prescan *ps = &b->prescan[t];

		for (uint32_t i = b->thread_piece[t] + 1; ps->valid && i < b->thread_piece[t + 1]; i++)
			if (b->pieces[i].idx < b->pieces[i - 1].idx)
				ps->valid = 0;
		free(ps->s.fstack);
		ps->s.fstack = NULL;
		ps->s.capf = ps->s.fdepth = 0;
	}

	/* Window end: the earliest copy_tsc; without one, the newest record, or
	 * the snapshot moment if it is just after it (calls still running then
	 * end there). */
	d->window_end = d->window_start;
	for (uint32_t c = 0; c < nc; c++)
		if (d->core_stats[c].has_data && d->core_stats[c].last_tick > d->window_end)
			d->window_end = d->core_stats[c].last_tick;
	if (b->end_limit != UINT64_MAX) {
		d->window_end = b->end_limit;
	} else {
		snap_tick = snap->info.snapshot_tsc >> d->shift;
		ten_s = (uint64_t)(((unsigned __int128)d->tsc_hz * 10) >> d->shift);
		if (snap_tick > d->window_end && snap_tick - d->window_end <= ten_s)
			d->window_end = snap_tick;
	}
	return b->oom ? kd_dec_fail(err, KD_ENOMEM, "out of memory building the timeline") : 0;
}

int kd_dec_walk(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err)
{
	struct kd_build *b = d->build;
	struct tstate *s;
	uint32_t nthreads;

	if (!b)
		return kd_dec_fail(err, KD_EFORMAT, "no timeline prepared");
	s = &b->ts;
	b->sink = sink;
	/* Everything a walk counts starts again (a file may be walked twice). */
	d->events = 0;
	d->unmatched_exits = 0;
	d->lost_exits = 0;
	memset(&d->counts, 0, sizeof(d->counts));
	d->nmarks = 0;
	d->nreqs = 0;
	b->nreqevs = 0;
	b->ncalls = 0;
	kd_umap_free(&b->req_map);
	nthreads = b->nthreads; /* threads sched.c adds later have no records */
	b->done = 0;
	b->total = 0;
	b->nrec = 0;
	b->walk_ns = d->opts.progress ? mono_ns() : 0;
	for (uint32_t i = 0; i < b->npieces; i++) {
		uint32_t t = b->pieces[i].thread;
		int pre = sink.ev && !prescanned(b, t);

		b->total += (pre ? 2 : 1) * b->pieces[i].nrec;
		b->nrec += b->pieces[i].nrec;
	}
	for (uint32_t th = 0; th < nthreads && !b->oom; th++) {
		struct kd_dec_thread *t = &d->threads[th];
		struct kd_ev e = { 0 };
		uint64_t end;

		s->depth = s->base = 0;
		s->seq = 0;
		s->sub_tick = UINT64_MAX;
		s->nsub = 0;
		s->last_tick = s->prev_tick = 0;
		s->npre = 0;
		s->fdepth = 0;
		s->seen = 0;
		if (sink.ev && prescanned(b, th)) {
			/* the scan's pre-pass: the frames entered before the window */
			const struct tstate *p = &b->prescan[th].s;

			if (p->npre > s->cappre &&
			    kd_grow(&s->pre, &s->cappre, p->npre - 1, sizeof(*s->pre), "a call stack")) {
				b->oom = 1;
				break;
			}
			if (p->npre)
				memcpy(s->pre, p->pre, (size_t)p->npre * sizeof(*s->pre));
			s->npre = p->npre;
		} else if (sink.ev) {
			walk_thread(b, th, 1); /* the frames entered before the window */
		}
		s->seen = 0;
		e.kind = KD_EV_THREAD_BEGIN;
		e.thread = th;
		e.tick = t->start_tick;
		emit(b, &e);
		walk_thread(b, th, 0);
		if (s->seen)
			t->last_tick = s->last_tick; /* its last record's (clamped) tick */
		end = d->window_end > s->last_tick ? d->window_end : s->last_tick;
		while (s->depth && !b->oom)
			close_top(b, th, end, KD_CALL_TRUNC_END);
		e.kind = KD_EV_THREAD_END;
		e.tick = end;
		emit(b, &e);
	}
	if (d->opts.progress)
		progress(b, 1);
	if (!b->oom && b->nreqevs) {
		qsort(b->reqevs, b->nreqevs, sizeof(*b->reqevs), cmp_reqev);
		for (uint32_t i = 0; i < b->nreqevs && !b->oom; i++)
			on_request(b, &b->reqevs[i]);
	}
	if (b->oom)
		return kd_dec_fail(err, KD_ENOMEM, "out of memory building the timeline");
	for (uint32_t i = 0; i < d->nreqs; i++)
		if (d->reqs[i].flags & KD_REQ_TRUNC_END)
			d->reqs[i].end = d->window_end > d->reqs[i].begin ? d->window_end : d->reqs[i].begin;
	if (d->nreqs)
		qsort(d->reqs, d->nreqs, sizeof(*d->reqs), cmp_req);
	find_trigger(d, b);
	b->sink = (struct kd_sink){ 0 };
	return 0;
}

void kd_build_free(struct kd_build *b)
{
	if (!b)
		return;
	free(b->ts.stack);
	free(b->ts.pre);
	free(b->ts.fstack);
	for (size_t i = 0; i < b->capprescan; i++) {
		free(b->prescan[i].s.pre);
		free(b->prescan[i].s.fstack);
	}
	free(b->prescan);
	free(b->batch);
	free(b->pieces);
	free(b->thread_piece);
	free(b->reqevs);
	kd_umap_free(&b->thread_map);
	kd_umap_free(&b->addr_map);
	kd_umap_free(&b->span_map);
	kd_umap_free(&b->req_map);
	free(b);
}

int kd_dec_build(struct kd_dec *d, struct kd_dec_error *err)
{
	struct kd_collector c;
	int rc = kd_dec_prepare(d, err);

	if (rc)
		return rc;
	kd_collector_init(&c, d);
	rc = kd_dec_walk(d, kd_collector_sink(&c), err);
	kd_collector_free(&c);
	return rc;
}
