/*
 * stream.h - the event stream every sink consumes.
 *
 * The builder (build.c, stage 3) walks each thread's records in the
 * thread's recorded order and emits, per thread, in that order:
 *
 *   THREAD_BEGIN                       once, before the thread's events
 *   CALL_BEGIN ... CALL_END            every call, properly nested: a call's
 *                                      END comes before its parent's END;
 *                                      calls entered before the window
 *                                      (TRUNC_BEGIN) begin first, at the
 *                                      thread's window start
 *   MARK, REQ_BEGIN, REQ_END           where their records are
 *   THREAD_END                         after the thread's last call ended
 *                                      (frames still open end at the window
 *                                      end, TRUNC_END)
 *
 * Threads come one after another (thread index order), not interleaved:
 * a sink that needs time order across threads sorts itself (or keeps its
 * arrays: the collector below).  `seq` numbers a thread's events 0, 1, ...
 * in recorded order: ties in time are broken by it, never by depth.  Ticks
 * are per-thread non-decreasing (stage 3 clamps small backward steps).
 *
 * Memory: the builder keeps per thread its open frames (stack depth) and,
 * per file, its functions, pieces and requests; nothing per call.
 *
 * Where stages plug in:
 *
 *   builder --> [filter] --> [filter] ... --> sink
 *
 * A filter is a kd_sink whose ctx holds the next kd_sink and forwards what
 * it keeps.  Rules for a filter (a time range, --min-dur ...): it keeps or
 * drops a call's BEGIN and END together (decided at BEGIN when it needs
 * only the begin, else by holding the thread's pending BEGINs: at most
 * stack depth of them), rewrites `depth` of what it keeps when it drops
 * ancestors, and passes THREAD_BEGIN/THREAD_END always.  A dropped call's
 * time stays in its parent: a filter that drops a call adds nothing to the
 * parent's `self` (self is "time in no kept child"), so it must add the
 * dropped call's duration to the parent's self when forwarding the parent's
 * END.  kd_filter_pass() is the identity filter to start from.
 * kd_range_filter (range.c) is the time range and --min-dur; every walk
 * goes through kd_range_walk_cut(), which puts it in front of the sink when
 * d->cut.range is set: a streamed sink's walk and the collector's alike.
 *
 * In-memory sinks (stats, explain, html, the tests' kd_dec_open_*) get
 * d->calls from kd_collector (collect.h), a sink that appends every call
 * (kd_dec_collect, dec.h: behind the range filter when d->cut.range is set).
 *
 * An output format includes this, sink.h (its options, the walk) and the
 * helpers it uses; the decoded result is result.h.
 */
#ifndef KD_STREAM_H
#define KD_STREAM_H

#include <stdint.h>

enum kd_ev_kind {
	KD_EV_THREAD_BEGIN = 0,
	KD_EV_CALL_BEGIN = 1,
	KD_EV_CALL_END = 2,
	KD_EV_MARK = 3,
	KD_EV_REQ_BEGIN = 4,
	KD_EV_REQ_END = 5,
	KD_EV_THREAD_END = 6,
};

struct kd_ev {
	uint32_t kind;            /* enum kd_ev_kind */
	uint32_t thread;          /* thread index (kd_dec.threads) */
	uint32_t func;            /* CALL_*: function index; MARK: name id;
	                             REQ_*: name id of the kind */
	uint32_t depth;           /* CALL_*: 0 = outermost known frame */
	uint32_t core;            /* core index: CALL_BEGIN and CALL_END the call's
	                             entry core (exit's if TRUNC_BEGIN); MARK/REQ_*
	                             the record's */
	uint32_t flags;           /* CALL_BEGIN: KD_CALL_TRUNC_BEGIN, KD_CALL_SPAN;
	                             CALL_END: all of the call's flags */
	uint64_t tick;            /* ticks: CALL_BEGIN the begin, CALL_END the end,
	                             MARK/REQ_* the record's */
	uint64_t begin;           /* CALL_END: the call's begin tick */
	uint64_t self;            /* CALL_END: ticks not spent in children */
	uint64_t value;           /* MARK: value; REQ_*: request id */
	uint64_t seq;             /* the thread's recorded order */
	uint32_t sub;             /* CALL_*, MARK, REQ_*: place among the thread's
	                             events of the same tick (0, 1, ...): the
	                             time is kd_time_event_ns(d, tick, sub) */
};

struct kd_dec;

struct kd_sink {
	/* One event; d is the file being decoded (names, clock, threads). */
	void (*ev)(void *ctx, const struct kd_dec *d, const struct kd_ev *e);
	void *ctx;
};


#endif /* KD_STREAM_H */
