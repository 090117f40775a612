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
 *   2. kd_build_walk(): each thread's pieces, ordered by segment (exact), or
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
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "build.h"
#include "iter.h"
#include "result.h"
#include "snap.h"
#include "stream.h"
#include "util.h"

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
	uint32_t last;       /* piece the scan last fed to it (KD_NONE: none) */
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
	uint32_t ref_ts20 : 24;  /*   reference tick and ts20, */
	uint32_t held : 1;       /* 1: a HELD chunk (struct heldpiece has its place) */
	uint32_t left : 1;       /* the scan fed its thread's pre-pass another piece
	                            after this one (struct prescan) */
	uint32_t spare : 6;
	uint32_t blk;            /*   block index in snap->blocks, */
	uint32_t pos;            /*   word position in the block */
	uint32_t core;           /* core index */
	uint32_t slot, seg;      /* as named by BLOCK_START/THREAD */
	uint32_t thread;         /* thread index */
	uint32_t idx;            /* creation order */
	uint64_t key1, key2;     /* sort keys inside the thread, see order_pieces() */
};

/* A held piece's place (format 2): pieces are one per thread switch and
 * held ones rare, so this is kept apart, by the piece's idx (ascending). */
struct heldpiece {
	uint32_t idx;            /* the piece's */
	uint32_t p;              /* P: a stream position on segment seg's core */
	uint32_t hc;             /* (h << 8) | chunk */
	uint64_t tick;           /* ticks: the run's time base (window test) */
};

/* One step of a thread's walk: records of piece `piece` whose stream
 * position, as an offset from the piece's sp0, is in [lo, hi) (a ring piece
 * cut where a held piece goes; 0, UINT32_MAX: all of it). */
struct item {
	uint32_t piece;
	uint32_t lo, hi;
};

/* What a request record does (struct reqev). */
enum reqop {
	RQ_BEGIN = 0,            /* REQ_BEGIN (format 1), REQ_OPEN(_ID) (format 2) */
	RQ_END = 1,              /* REQ_END: by (kind, id) */
	RQ_CLOSE = 2,            /* REQ_CLOSE: the thread's innermost open request */
	RQ_CLOSE_ANY = 3,        /* REQ_CLOSE_ANY: by (kind, number), begun on begin_slot */
};

/* A request begin or end, matched after all threads were walked. */
struct reqev {
	uint64_t tick;           /* ticks: per-thread clamped */
	uint64_t id;             /* request id (format 1), the kind's number (format 2) */
	uint64_t seq;            /* walk order: ties keep a thread's program order */
	uint32_t kind;           /* name id */
	uint32_t thread, core;
	uint32_t end;            /* enum reqop */
	uint32_t sub;            /* kd_ev.sub of its event */
	uint32_t at_call;        /* recorded order: CALL_BEGINs emitted before it */
	uint32_t top;            /* idx of the innermost open frame then, or KD_NONE */
	uint32_t keep;           /* RQ_CLOSE*: enum ktrace_req_keep */
	uint32_t numbered;       /* format 2 record: id is the kind's number */
	uint32_t has_uid;        /* REQ_OPEN_ID */
	uint32_t begin_slot;     /* RQ_CLOSE_ANY */
	uint64_t uid;            /* REQ_OPEN_ID: the program's id */
};

/* The builder: made by kd_build_prepare, used by every kd_build_walk. */
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
	struct heldpiece *helds; /* the held pieces' places, by idx */
	uint32_t nhelds;
	size_t caphelds;
	struct item *items;      /* walks of threads with held pieces (thread_item) */
	uint32_t nitems;
	size_t capitems;
	uint32_t *thread_item;   /* [nthreads + 1]: thread t's items; KD_NONE: a
	                            thread without held pieces walks its pieces */
	uint32_t *req_below;     /* matching: per request, the one open below it on
	                            its thread (format 2), KD_NONE */
	size_t capbelow;
	uint32_t *req_top;       /* per thread: its innermost open request, KD_NONE */
	struct reqev *reqevs;
	uint32_t nreqevs;
	size_t capreqevs;
	struct kd_umap cross_map; /* with scan_reqs: thread slots of request records
	                            that end another thread's request, and of those
	                            threads (trigger_from_scan) */
	int scan_reqs;           /* d->trigger_at wanted (opts.find_trigger): 1 the
	                            scan collects request records too, 2 it stopped
	                            (a held run: a walk for the requests finds it) */
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

/* A request record of thread th at tick as a struct reqev (seq: its
 * order among the requests).  Shared by the walk (on_request_ev) and the
 * scan (scan_request). */
static void reqev_set(struct reqev *r, const struct kd_dec_event *ev, uint32_t th, uint64_t tick,
                      uint64_t seq)
{
	memset(r, 0, sizeof(*r));
	r->tick = tick;
	r->seq = seq;
	r->thread = th;
	r->core = ev->core;
	r->kind = ev->id;
	r->id = ev->value;
	switch (ev->kind) {
	case KD_DK_REQ_END:
		r->end = RQ_END;
		break;
	case KD_DK_REQ_OPEN:
		r->numbered = 1;
		r->has_uid = ev->aux;
		r->uid = ev->value2;
		break;
	case KD_DK_REQ_CLOSE:
		/* Which request ends is known only when the threads' records are
		 * matched in time order (another thread may end one of this
		 * thread's): the stream event carries no kind or number. */
		r->end = RQ_CLOSE;
		r->numbered = 1;
		r->keep = ev->id;
		r->kind = KD_NONE;
		r->id = 0;
		break;
	case KD_DK_REQ_CLOSE_ANY:
		r->end = RQ_CLOSE_ANY;
		r->numbered = 1;
		r->keep = ev->aux;
		r->begin_slot = (uint32_t)ev->value2;
		break;
	default:
		break;
	}
}

static void on_request_ev(struct kd_build *b, const struct kd_dec_event *ev, uint32_t th,
                          uint64_t tick)
{
	struct kd_ev e = { 0 };
	struct reqev *r;

	if (kd_grow(&b->reqevs, &b->capreqevs, b->nreqevs, sizeof(*b->reqevs), "the requests")) {
		b->oom = 1;
		return;
	}
	r = &b->reqevs[b->nreqevs];
	reqev_set(r, ev, th, tick, b->nreqevs);
	e.kind = r->end == RQ_BEGIN ? KD_EV_REQ_BEGIN : KD_EV_REQ_END;
	e.thread = th;
	e.func = r->kind;
	e.core = ev->core;
	e.tick = tick;
	e.value = r->id;
	emit(b, &e);
	r->sub = e.sub;
	r->at_call = b->ncalls;
	r->top = b->ts.depth ? b->ts.stack[b->ts.depth - 1].idx : KD_NONE;
	b->nreqevs++;
}

static uint16_t sub16(uint32_t sub)
{
	return sub > UINT16_MAX ? UINT16_MAX : (uint16_t)sub;
}

static uint64_t req_key(uint32_t kind, uint64_t id)
{
	return id ^ kd_mix64((uint64_t)kind + 0x9e3779b97f4a7c15ull);
}

/* Format 2: take request r off the stack of requests open on its thread
 * (wherever it is: REQ_CLOSE_ANY may end one that is not the innermost). */
static void req_unlink(struct kd_build *b, uint32_t r)
{
	struct kd_dec *d = b->d;
	uint32_t th = d->reqs[r].thread, *at = &b->req_top[th];

	for (uint32_t n = 0; *at != KD_NONE && n <= d->nreqs; n++) {
		if (*at == r) {
			*at = b->req_below[r];
			return;
		}
		at = &b->req_below[*at];
	}
}

static void req_close(struct kd_build *b, uint32_t r, const struct reqev *ev)
{
	struct kd_dec *d = b->d;
	struct kd_dec_request *q = &d->reqs[r];

	q->end = ev->tick > q->begin ? ev->tick : q->begin;
	q->end_sub = sub16(ev->sub);
	q->flags &= ~(uint32_t)KD_REQ_TRUNC_END;
	q->keep = ev->keep;
	q->end_thread = ev->thread;
	if (ev->thread == q->thread) {
		q->call_end = ev->at_call;
		q->open_at_end = ev->top;
	}
	if (q->flags & KD_REQ_NUMBERED)
		req_unlink(b, r);
	/* Closed: a tombstone value, so probe chains stay intact. */
	kd_umap_put(&b->req_map, req_key(q->kind, q->id), KD_NONE - 1);
}

static void on_request(struct kd_build *b, const struct reqev *ev)
{
	struct kd_dec *d = b->d;
	uint32_t r = KD_NONE;
	uint32_t thread = ev->thread;
	uint64_t tick = ev->tick;
	struct kd_dec_request *q;

	if (ev->end == RQ_CLOSE) {
		r = b->req_top[thread];
	} else if (ev->end != RQ_BEGIN) {
		r = kd_umap_get(&b->req_map, req_key(ev->kind, ev->id));
		if (r < d->nreqs && (d->reqs[r].kind != ev->kind || d->reqs[r].id != ev->id))
			r = KD_NONE;
		/* REQ_CLOSE_ANY names the thread that began it: a request of the
		 * same kind and number begun elsewhere is not this one. */
		if (r < d->nreqs && ev->end == RQ_CLOSE_ANY &&
		    d->threads[d->reqs[r].thread].slot != ev->begin_slot)
			r = KD_NONE;
	}
	if (r < d->nreqs) {
		req_close(b, r, ev);
		return;
	}
	if (kd_grow(&d->reqs, &b->capreqs, d->nreqs, sizeof(*d->reqs), "the requests") ||
	    kd_grow(&b->req_below, &b->capbelow, d->nreqs, sizeof(*b->req_below), "the requests")) {
		b->oom = 1;
		return;
	}
	q = &d->reqs[d->nreqs];
	memset(q, 0, sizeof(*q));
	q->id = ev->id;
	q->kind = ev->kind;
	q->thread = thread;
	q->end_thread = KD_NONE;
	q->core = ev->core;
	q->call_first = q->call_end = q->open_at_end = KD_NONE;
	q->flags = ev->numbered ? KD_REQ_NUMBERED : 0;
	b->req_below[d->nreqs] = KD_NONE;
	if (ev->end == RQ_BEGIN) {
		if (ev->has_uid) {
			q->user_id = ev->uid;
			q->flags |= KD_REQ_USER_ID;
		}
		q->call_first = ev->at_call;
		q->begin = tick;
		q->end = tick;
		q->begin_sub = sub16(ev->sub);
		q->end_sub = UINT16_MAX; /* at the window end: after the calls there */
		q->flags |= KD_REQ_TRUNC_END; /* until its end is seen */
		if (kd_umap_put(&b->req_map, req_key(q->kind, q->id), d->nreqs))
			b->oom = 1;
		if (ev->numbered) {
			b->req_below[d->nreqs] = b->req_top[thread];
			b->req_top[thread] = d->nreqs;
		}
	} else {
		/* Begun before the window (a REQ_CLOSE: of unknown kind and
		 * number, its REQ_OPEN is not in the file). */
		if (ev->end == RQ_CLOSE_ANY) {
			uint32_t bt = kd_umap_get(&b->thread_map, ev->begin_slot);

			if (bt != KD_NONE) {
				q->thread = thread = bt;
				q->end_thread = ev->thread;
			}
		} else {
			q->end_thread = thread;
		}
		if (ev->end == RQ_CLOSE)
			q->flags |= KD_REQ_UNKNOWN;
		q->keep = ev->keep;
		q->begin = d->threads[thread].start_tick < tick ? d->threads[thread].start_tick : tick;
		q->end = tick;
		q->begin_sub = 0;
		q->end_sub = sub16(ev->sub);
		q->flags |= KD_REQ_TRUNC_BEGIN;
		if (ev->thread == q->thread) {
			q->call_end = ev->at_call;
			q->open_at_end = ev->top;
		}
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

/* One record of thread th, in the thread's program order; held:
 * KD_CALL_HELD if it comes from a held run, else 0. */
static void on_event(struct kd_build *b, const struct kd_dec_event *ev, uint32_t th,
                     uint32_t held)
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
		push(b, th, f, tick, ev->core, span | held);
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
	case KD_DK_REQ_OPEN:
	case KD_DK_REQ_CLOSE:
	case KD_DK_REQ_CLOSE_ANY:
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
			b->prescan[i].last = KD_NONE;
		}
	}
	return &b->prescan[th];
}

/* A request record met by the scan (b->scan_reqs), for d->trigger_at: as
 * on_request_ev makes it in a walk, at the tick the walk would give it
 * (tick: the thread's records' running maximum), without the walk's call
 * positions.  seq keeps the walk's order: thread by thread, then record
 * order (the scan's, for a thread whose pre-pass the scan ran). */
static void scan_request(struct kd_build *b, const struct kd_dec_event *ev, uint32_t th,
                         uint64_t tick)
{
	struct reqev *r;

	if (kd_grow(&b->reqevs, &b->capreqevs, b->nreqevs, sizeof(*b->reqevs), "the requests")) {
		b->oom = 1;
		return;
	}
	r = &b->reqevs[b->nreqevs];
	reqev_set(r, ev, th, tick, (uint64_t)th << 40 | b->nreqevs);
	r->at_call = KD_NONE;
	r->top = KD_NONE;
	b->nreqevs++;
}

/* A request record that ends another thread's request (format 1: a
 * REQ_END whose id names another slot; format 2: a REQ_CLOSE_ANY begun on
 * another slot): both slots go to b->cross_map. */
static void cross_request(struct kd_build *b, const struct kd_dec_event *ev, uint32_t slot)
{
	uint32_t begin;

	if (ev->kind == KD_DK_REQ_END && b->d->snap.hdr.version < 2)
		begin = (uint32_t)(ev->value >> 32);
	else if (ev->kind == KD_DK_REQ_CLOSE_ANY)
		begin = (uint32_t)ev->value2;
	else
		return;
	if (begin == slot)
		return;
	if (kd_umap_put(&b->cross_map, slot, 1) || kd_umap_put(&b->cross_map, begin, 1))
		b->oom = 1;
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
	const int is_held = !!bt->held; /* a local: the stores below may alias bt */
	int want_reqs;

	ev.slot = bt->slot;
	ev.seg = bt->seg;
	ev.core = c;
	/* A held run: its thread is walked in another order than the scan's,
	 * so the requests' ticks come from their own walk (trigger_from_scan):
	 * collect no more here. */
	if (is_held && b->scan_reqs == 1) {
		b->scan_reqs = 2;
		b->nreqevs = 0;
	}
	want_reqs = b->scan_reqs; /* a local: the loop's stores may alias b */
	/* A new piece starts at a batch's first event (one slot and segment
	 * per batch, one held run): its start state is the batch's. */
	if (cc->cur == KD_NONE || b->pieces[cc->cur].slot != bt->slot ||
	    b->pieces[cc->cur].seg != bt->seg || b->pieces[cc->cur].held != bt->held ||
	    (bt->held && (b->helds[b->nhelds - 1].p != bt->held_p ||
	                  b->helds[b->nhelds - 1].hc != bt->held_hc))) {
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
		p->held = !!bt->held;
		p->left = 0;
		p->spare = 0;
		if (bt->held) {
			if (kd_grow(&b->helds, &b->caphelds, b->nhelds, sizeof(*b->helds),
			            "the timeline")) {
				b->oom = 1;
				return;
			}
			b->helds[b->nhelds++] = (struct heldpiece){ b->npieces, bt->held_p,
			                                            bt->held_hc, bt->blk_tick };
		}
		cc->cur = b->npieces++;
	}
	b->pieces[cc->cur].nrec += bt->n;
	th = b->pieces[cc->cur].thread;
	if (!(ps = prescan_of(b, th))) {
		b->oom = 1;
		return;
	}
	/* The scan's pre-pass matches a thread's records in its walk order
	 * only if it gets each piece whole before the next: pieces of one
	 * thread on two cores that overlap in time (clock skew, a writer
	 * without segments, a forged file) come in interleaved batches. */
	if (ps->last != cc->cur) {
		if (ps->last != KD_NONE)
			b->pieces[ps->last].left = 1;
		if (b->pieces[cc->cur].left)
			ps->valid = 0;
		ps->last = cc->cur;
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
		else if (ev.kind != KD_DK_MARK && ev.kind < KD_DK_REQ_BEGIN) {
			uint32_t span;

			func_of(b, &ev, &span);
		}
		/* A held run ran on some core, not necessarily this one: it is
		 * not this core's occupancy (runs, per-core counts). */
		if (is_held)
			continue;
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
	d->threads[th].events += kept;
	/* The request records, for d->trigger_at (a loop of its own, so the one
	 * above is what it is without --around-trigger): each at the walk's
	 * tick, the thread's running maximum of the records in the window. */
	if (__builtin_expect(want_reqs, 0)) {
		uint64_t m = ps->s.last_tick;
		struct kd_dec_event rev = ev; /* not ev: its address would escape the loop above */

		rev.aux = bt->aux0;        /* as the walk sets them (only a batch's first */
		rev.value2 = bt->value2_0; /* record can be an extended one) */
		for (uint32_t i = 0; i < bt->n && !b->oom; i++) {
			if (outside(b, bt->tick[i], bt->blk_tick))
				continue;
			if (bt->tick[i] > m)
				m = bt->tick[i];
			if (bt->kind[i] < KD_DK_REQ_BEGIN)
				continue;
			rev.tick = bt->tick[i];
			rev.id = bt->id[i];
			rev.kind = bt->kind[i];
			rev.value = bt->value[i];
			cross_request(b, &rev, bt->slot);
			if (want_reqs == 1)
				scan_request(b, &rev, th, m);
		}
	}
	if (last > ps->s.last_tick)
		ps->s.last_tick = last; /* the thread's running maximum (scan_request) */
	if (is_held) {
		cs->held += kept;
		return;
	}
	cs->events += kept;
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
		kd_iter_init(&cc[c].it, snap, c, &d->snap.warn);
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

/* a - b for numbers that wrap (segments, stream positions): as signed */
static int32_t wrapdiff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}

/* The place of held piece p (its idx is in b->helds, which is by idx). */
static const struct heldpiece *held_of(const struct heldpiece *h, uint32_t n,
                                       const struct piece *p)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (h[mid].idx < p->idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return &h[lo < n ? lo : 0];
}

/* qsort has no context argument: the held places of the sort running */
static const struct heldpiece *sort_helds;
static uint32_t sort_nhelds;

/* Held pieces of one thread: by (seg, P, h modulo 2^24, chunk). */
static int cmp_held(const struct piece *x, const struct piece *y)
{
	const struct heldpiece *hx = held_of(sort_helds, sort_nhelds, x);
	const struct heldpiece *hy = held_of(sort_helds, sort_nhelds, y);
	int32_t dh;

	if (x->seg != y->seg)
		return wrapdiff(x->seg, y->seg) < 0 ? -1 : 1;
	if (hx->p != hy->p)
		return wrapdiff(hx->p, hy->p) < 0 ? -1 : 1;
	/* h: 24 bits compared modulo 2^24 (consecutive holds are close) */
	dh = (int32_t)(((hx->hc >> 8) - (hy->hc >> 8)) << 8) >> 8;
	if (dh)
		return dh < 0 ? -1 : 1;
	if ((hx->hc & 0xFFu) != (hy->hc & 0xFFu))
		return (hx->hc & 0xFFu) < (hy->hc & 0xFFu) ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	/* a thread's ring pieces first, its held pieces after (merged into
	 * the walk by thread_items()) */
	if (x->held != y->held)
		return x->held < y->held ? -1 : 1;
	if (x->held)
		return cmp_held(x, y);
	if (x->key1 != y->key1)
		return x->key1 < y->key1 ? -1 : 1;
	if (x->key2 != y->key2)
		return x->key2 < y->key2 ? -1 : 1;
	if (x->core != y->core)
		return x->core < y->core ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void add_item(struct kd_build *b, uint32_t piece, uint32_t lo, uint32_t hi)
{
	if (kd_grow(&b->items, &b->capitems, b->nitems, sizeof(*b->items), "thread order")) {
		b->oom = 1;
		return;
	}
	b->items[b->nitems++] = (struct item){ piece, lo, hi };
}

/*
 * The walk of each thread that has held pieces (b->items): its ring pieces
 * in order, with its held pieces merged in where the format puts them: a
 * held piece (seg, P) goes after the thread's ring records of earlier
 * segments and of segment seg at stream positions < P, before those at
 * positions >= P and those of later segments.  A ring piece of segment seg
 * that P falls in is cut there: the walk reads it as two items (the second
 * may turn out empty when P is past its end).  Held pieces with equal
 * (seg, P) keep cmp_held()'s order (h, then chunk).  A thread without held
 * pieces walks its pieces as they are (thread_item KD_NONE).
 */
static void thread_items(struct kd_build *b)
{
	const struct kd_snap *snap = &b->d->snap;
	uint32_t nt = b->nthreads;

	b->thread_item = kd_xcalloc((size_t)nt + 2, sizeof(*b->thread_item), "thread order");
	if (!b->thread_item) {
		b->oom = 1;
		return;
	}
	for (uint32_t t = 0; t < nt && !b->oom; t++) {
		uint32_t lo = b->thread_piece[t], hi = b->thread_piece[t + 1], j = lo, ring;

		b->thread_item[t] = KD_NONE;
		if (lo == hi || !b->pieces[hi - 1].held)
			continue; /* held pieces sort last: none */
		b->thread_item[t] = b->nitems;
		while (j < hi && !b->pieces[j].held)
			j++;
		ring = j;
		/* pieces [lo, ring) ring, [ring, hi) held; j: the next held one */
		for (uint32_t i = lo; i < ring && !b->oom; i++) {
			const struct piece *r = &b->pieces[i];
			uint32_t cur = 0, sp0 = snap->blocks[r->blk].start + r->pos;
			int next_same = i + 1 < ring && b->pieces[i + 1].seg == r->seg;
			uint32_t sp_next = next_same ? snap->blocks[b->pieces[i + 1].blk].start +
			                               b->pieces[i + 1].pos : 0;

			if (r->seg == KD_NONE) { /* an older writer: no held runs to place */
				add_item(b, i, 0, UINT32_MAX);
				continue;
			}
			while (j < hi && !b->oom) {
				const struct piece *h = &b->pieces[j];
				uint32_t p = held_of(b->helds, b->nhelds, h)->p;
				int32_t off;

				if (h->seg != r->seg) {
					if (wrapdiff(h->seg, r->seg) > 0)
						break;
					add_item(b, j++, 0, UINT32_MAX); /* an earlier segment's */
					continue;
				}
				if (next_same && wrapdiff(p, sp_next) >= 0)
					break; /* at or after the next piece of the segment */
				off = wrapdiff(p, sp0);
				if (off > 0 && (uint32_t)off > cur) {
					/* the records before P */
					add_item(b, i, cur, (uint32_t)off);
					cur = (uint32_t)off;
				}
				add_item(b, j++, 0, UINT32_MAX);
			}
			add_item(b, i, cur, UINT32_MAX);
		}
		while (j < hi && !b->oom)
			add_item(b, j++, 0, UINT32_MAX);
	}
	b->thread_item[nt] = b->nitems;
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
	sort_helds = b->helds;
	sort_nhelds = b->nhelds;
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

/* The events [*k0, *k1) of batch bt whose stream positions, as offsets
 * from sp0, are in [itm->lo, itm->hi) (they rise: the first event at
 * bt->pos, the rest one word each up to it->pos).  1 if the batch reached
 * hi (the piece's records after it are another item's). */
static __attribute__((noinline)) int cut_batch(const struct kd_snap *snap,
                                               const struct kd_batch *bt,
                                               const struct kd_core_iter *it,
                                               const struct item *itm, uint32_t sp0,
                                               uint32_t *k0, uint32_t *k1)
{
	uint32_t s0 = snap->blocks[bt->blk].start, n = bt->n;

	for (uint32_t k = 0; k < n; k++) {
		uint32_t off = s0 + (k ? it->pos - (n - k) : bt->pos) - sp0;

		if (off < itm->lo)
			*k0 = k + 1;
		if (off >= itm->hi) {
			*k1 = k;
			return 1;
		}
	}
	return 0;
}

static void scan_request(struct kd_build *b, const struct kd_dec_event *ev, uint32_t th,
                         uint64_t tick);

/* A record in a walk for the requests alone (trigger_at): the walk's clamp
 * and thread start, and the request records; calls are not rebuilt. */
static void req_step(struct kd_build *b, const struct kd_dec_event *ev, uint32_t th)
{
	struct tstate *s = &b->ts;
	uint64_t tick = ev->tick > s->last_tick ? ev->tick : s->last_tick;

	s->last_tick = tick;
	if (!s->seen) {
		s->seen = 1;
		thread_start(b, th, tick, ev->core);
	}
	if (ev->kind >= KD_DK_REQ_BEGIN)
		scan_request(b, ev, th, tick);
}

/* Record k of a batch to the pre-pass (pre 1) or the builder (0); the walk
 * for the requests (pre 2) has a loop of its own (walk_thread). */
static inline __attribute__((always_inline)) void
feed(struct kd_build *b, const struct kd_batch *bt, struct kd_dec_event *ev, size_t k,
     uint32_t th, int pre, uint32_t held)
{
	ev->tick = bt->tick[k];
	ev->id = bt->id[k];
	ev->kind = bt->kind[k];
	ev->value = bt->value[k];
	if (outside(b, ev->tick, bt->blk_tick))
		return;
	if (pre)
		pre_step(b, &b->ts, th, ev);
	else
		on_event(b, ev, th, held);
}

/* Feed thread th's records, in order, to the pre-pass (pre 1), the builder
 * (0) or the walk for the requests (2). */
static void walk_thread(struct kd_build *b, uint32_t th, int pre)
{
	const struct kd_snap *snap = &b->d->snap;
	struct kd_batch *bt = b->batch;
	struct kd_core_iter it;
	struct kd_dec_event ev;
	uint32_t x0, x1, held;
	int by_item = b->thread_item[th] != KD_NONE;

	memset(&ev, 0, sizeof(ev));
	if (by_item) {
		uint32_t t1 = th + 1;

		while (t1 < b->nthreads && b->thread_item[t1] == KD_NONE)
			t1++;
		x0 = b->thread_item[th];
		x1 = b->thread_item[t1] != KD_NONE ? b->thread_item[t1] : b->nitems;
	} else {
		x0 = b->thread_piece[th];
		x1 = b->thread_piece[th + 1];
	}
	for (uint32_t x = x0; x < x1 && !b->oom; x++) {
		struct item whole = { x, 0, UINT32_MAX };
		const struct item *itm = by_item ? &b->items[x] : &whole;
		const struct piece *p = &b->pieces[itm->piece];
		uint64_t left = p->nrec;
		int cut = itm->lo != 0 || itm->hi != UINT32_MAX;
		uint32_t sp0 = snap->blocks[p->blk].start + p->pos;

		kd_iter_init(&it, snap, p->core, NULL);
		kd_iter_seek(&it, p->blk, p->pos, p->ref_tick, p->ref_ts20, p->slot, p->seg);
		if (p->held) {
			const struct heldpiece *h = held_of(b->helds, b->nhelds, p);

			it.held = 1;
			it.held_p = h->p;
			it.held_hc = h->hc;
			it.held_tick = h->tick;
		}
		held = p->held ? KD_CALL_HELD : 0;
		ev.slot = p->slot;
		ev.seg = p->seg;
		ev.core = p->core;
		while (left && !b->oom) {
			uint32_t n = kd_iter_batch(&it, bt, left < KD_BATCH ? (uint32_t)left : KD_BATCH);
			uint32_t k0 = 0, k1 = n;

			if (!n)
				break;
			left -= n;
			b->done += n;
			if (__builtin_expect((b->done >> 20) != ((b->done - n) >> 20), 0) &&
			    b->d->opts.progress)
				progress(b, 0);
			/* Only a batch's first event can be an extended record, the
			 * only kind that reads aux and value2. */
			ev.aux = bt->aux0;
			ev.value2 = bt->value2_0;
			if (__builtin_expect(cut, 0) &&
			    cut_batch(snap, bt, &it, itm, sp0, &k0, &k1))
				left = 0; /* at hi: the rest of the piece is another item's */
			if (__builtin_expect(pre == 2, 0)) {
				for (size_t k = k0; k < k1 && !b->oom; k++) {
					ev.tick = bt->tick[k];
					ev.id = bt->id[k];
					ev.kind = bt->kind[k];
					ev.value = bt->value[k];
					if (!outside(b, ev.tick, bt->blk_tick))
						req_step(b, &ev, th);
				}
				continue;
			}
			for (size_t k = k0; k < k1 && !b->oom; k++)
				feed(b, bt, &ev, k, th, pre, held);
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
	/* Format 2: a REQ_CLOSE whose REQ_OPEN is not in the file (begun before
	 * the window) ended a request of unknown kind and number; if it is on
	 * the trigger's thread and ended when the trigger says (within 1 ms),
	 * it is the trigger's request. */
	th = kd_umap_get(&b->thread_map, tr->thread_slot);
	if (th != KD_NONE && tr->end_tsc >= tr->begin_tsc) {
		uint64_t end = tr->end_tsc >> d->shift, best = UINT64_MAX;
		uint64_t tol = (uint64_t)(((unsigned __int128)d->tsc_hz / 1000) >> d->shift);
		uint32_t pick = KD_NONE;

		for (uint32_t i = 0; i < d->nreqs; i++) {
			const struct kd_dec_request *u = &d->reqs[i];
			uint64_t dist = u->end > end ? u->end - end : end - u->end;

			if ((u->flags & KD_REQ_UNKNOWN) && u->thread == th && dist <= tol && dist < best) {
				best = dist;
				pick = i;
			}
		}
		if (pick != KD_NONE) {
			q = &d->reqs[pick];
			q->kind = tr->kind_id;
			q->id = tr->request_id;
			q->flags = (q->flags & ~(uint32_t)KD_REQ_UNKNOWN) | KD_REQ_TRIGGER;
			d->trigger_req = pick;
			return;
		}
	}
	/* Not in the decoded window: rebuild it from the trigger record. */
	if (tr->end_tsc < tr->begin_tsc)
		return;
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
	q->end_thread = KD_NONE;
	q->flags = KD_REQ_TRIGGER;
	if (d->snap.hdr.version >= 2)
		q->flags |= KD_REQ_NUMBERED; /* format 2: request_id is the kind's number */
	if (q->begin < d->window_start)
		q->flags |= KD_REQ_TRUNC_BEGIN;
	d->trigger_req = d->nreqs++;
}

static void match_requests(struct kd_build *b);

/*
 * d->trigger_at from the scan's request records, matched as a walk matches
 * them: the same records at the same ticks in the same order, when every
 * thread with request records was scanned in its walk order (its pre-pass
 * is the scan's; else only a walk knows, and trigger_at stays unknown).
 * What the matching made is then dropped: the walk makes it again.
 */
static void trigger_from_scan(struct kd_build *b)
{
	struct kd_dec *d = b->d;
	int ok = !b->oom && b->scan_reqs == 1;

	for (uint32_t i = 0; i < b->nreqevs && ok; i++)
		ok = prescanned(b, b->reqevs[i].thread);
	if (!ok && !b->oom) {
		/* A thread with requests met out of its walk order (held runs,
		 * clock skew): walk the threads that have request records, in
		 * order, for their requests alone (the clamp of every record, no
		 * calls); the others have none to give.  After a held run the
		 * scan stopped collecting: every thread then. */
		uint8_t *has = kd_xcalloc((size_t)b->nthreads + 1, 1, "the requests");
		uint32_t tt = kd_umap_get(&b->thread_map, d->snap.trigger.thread_slot);
		int progress = d->opts.progress;

		if (tt < b->nthreads) {
			/* The trigger's request begins and ends on the trigger's
			 * thread, or on threads that end another's request (and
			 * those others): only theirs can match it, so only they are
			 * walked (requests are numbered apart per kind, or per
			 * thread in format 1). */
			has[tt] = 1;
			for (uint32_t i = 0; i < b->cross_map.cap; i++) {
				uint32_t x;

				if (b->cross_map.vals[i] == KD_NONE)
					continue;
				x = kd_umap_get(&b->thread_map, (uint32_t)b->cross_map.keys[i]);
				if (x < b->nthreads)
					has[x] = 1;
			}
		} else {
			if (b->scan_reqs == 2)
				memset(has, 1, (size_t)b->nthreads);
			for (uint32_t i = 0; i < b->nreqevs; i++)
				if (b->reqevs[i].thread < b->nthreads)
					has[b->reqevs[i].thread] = 1;
		}

		b->nreqevs = 0;
		d->opts.progress = 0; /* not a walk the progress line counts */
		for (uint32_t th = 0; th < b->nthreads && !b->oom; th++) {
			if (!has[th])
				continue;
			b->ts.last_tick = 0;
			b->ts.seen = 0;
			walk_thread(b, th, 2);
		}
		d->opts.progress = progress;
		b->done = 0;
		free(has);
		ok = !b->oom;
	}
	if (ok) {
		d->nreqs = 0;
		kd_umap_free(&b->req_map);
		match_requests(b);
		if (!b->oom && d->trigger_req < d->nreqs) {
			d->trigger_at.known = 1;
			d->trigger_at.begin = d->reqs[d->trigger_req].begin;
			d->trigger_at.end = d->reqs[d->trigger_req].end;
		}
	}
	/* Nothing of it stays: the walk makes its own (allocated then, as
	 * without this). */
	d->nreqs = 0;
	d->trigger_req = KD_NONE;
	b->nreqevs = 0;
	kd_umap_free(&b->req_map);
	free(b->reqevs);
	b->reqevs = NULL;
	b->capreqevs = 0;
	free(d->reqs);
	d->reqs = NULL;
	b->capreqs = 0;
	free(b->req_below);
	b->req_below = NULL;
	b->capbelow = 0;
	free(b->req_top);
	b->req_top = NULL;
	kd_umap_free(&b->cross_map);
}

int kd_build_prepare(struct kd_dec *d, struct kd_dec_error *err)
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
	d->pass.build = b;
	memset(&d->trigger_at, 0, sizeof(d->trigger_at));
	b->scan_reqs = d->opts.stream && d->opts.find_trigger && snap->have_trigger;
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
		first = kd_iter_block_start_tick(snap, &snap->blocks[co->first_block]);
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
			return kd_util_fail(err, KD_ENOMEM, "out of memory");

	scan_cores(b);
	if (b->oom)
		return kd_util_fail(err, KD_ENOMEM, "out of memory building the timeline");
	/* The trigger's thread, if only the trigger names it. */
	if (snap->have_trigger && snap->trigger.end_tsc >= snap->trigger.begin_tsc &&
	    thread_of(b, snap->trigger.thread_slot) == KD_NONE)
		return kd_util_fail(err, KD_ENOMEM, "out of memory");
	b->nthreads = d->nthreads;
	order_pieces(b);
	thread_items(b);
	if (b->oom)
		return kd_util_fail(err, KD_ENOMEM, "out of memory building the timeline");
	/* The scan's pre-pass stands for a thread whose pieces the scan met in
	 * the order they are walked; free what the scan no longer needs. */
	for (uint32_t t = 0; t < b->capprescan && t < b->nthreads; t++) {
		struct prescan *ps = &b->prescan[t];

		for (uint32_t i = b->thread_piece[t] + 1; ps->valid && i < b->thread_piece[t + 1]; i++)
			if (b->pieces[i].idx < b->pieces[i - 1].idx)
				ps->valid = 0;
		/* Held pieces are merged into the walk out of the scan's (time)
		 * order: the walk runs the thread's pre-pass itself. */
		for (uint32_t i = b->thread_piece[t]; ps->valid && i < b->thread_piece[t + 1]; i++)
			if (b->pieces[i].held)
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
	if (b->scan_reqs)
		trigger_from_scan(b);
	return b->oom ? kd_util_fail(err, KD_ENOMEM, "out of memory building the timeline") : 0;
}


int kd_build_walk(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err)
{
	struct kd_build *b = d->pass.build;
	struct tstate *s;
	uint32_t nthreads;

	if (!b)
		return kd_util_fail(err, KD_EFORMAT, "no timeline prepared");
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
	match_requests(b);
	if (b->oom)
		return kd_util_fail(err, KD_ENOMEM, "out of memory building the timeline");
	b->sink = (struct kd_sink){ 0 };
	return 0;
}

/* The request records of a walk (or of the scan) matched in time order into
 * d->reqs, and the trigger's found. */
static void match_requests(struct kd_build *b)
{
	struct kd_dec *d = b->d;

	if (!b->oom && b->nreqevs) {
		free(b->req_top);
		b->req_top = kd_xmalloc(((size_t)d->nthreads + 1) * sizeof(*b->req_top),
		                        "the requests");
		if (!b->req_top)
			b->oom = 1;
		else
			memset(b->req_top, 0xff, ((size_t)d->nthreads + 1) * sizeof(*b->req_top));
		qsort(b->reqevs, b->nreqevs, sizeof(*b->reqevs), cmp_reqev);
		for (uint32_t i = 0; i < b->nreqevs && !b->oom; i++)
			on_request(b, &b->reqevs[i]);
	}
	if (b->oom)
		return;
	for (uint32_t i = 0; i < d->nreqs; i++)
		if (d->reqs[i].flags & KD_REQ_TRUNC_END)
			d->reqs[i].end = d->window_end > d->reqs[i].begin ? d->window_end : d->reqs[i].begin;
	if (d->nreqs)
		qsort(d->reqs, d->nreqs, sizeof(*d->reqs), cmp_req);
	find_trigger(d, b);
}

void kd_build_free(struct kd_build *b)
{
	if (!b)
		return;
	kd_umap_free(&b->cross_map);
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
	free(b->items);
	free(b->thread_item);
	free(b->helds);
	free(b->req_below);
	free(b->req_top);
	free(b->reqevs);
	kd_umap_free(&b->thread_map);
	kd_umap_free(&b->addr_map);
	kd_umap_free(&b->span_map);
	kd_umap_free(&b->req_map);
	free(b);
}
