/*
 * out-perfetto.c - Perfetto's native trace format (--format perfetto), a
 * protobuf `Trace` (a sequence of `TracePacket`, field 1), hand-encoded and
 * written as a stream: each packet is built in one reusable buffer, then
 * written.  Field numbers are Perfetto's (protos/perfetto/trace/
 * trace_packet.proto, the track_event, interned_data and clock_snapshot protos);
 * tests/perfetto/perfetto_subset.proto holds the subset used here.
 *
 * Layout of the trace:
 *   - sequence 1: one ClockSnapshot naming CLOCK_REALTIME the trace clock;
 *     then every TrackDescriptor: per process group (one snapshot file, or
 *     several snapshots of one process) a process track "exe pid N @ host",
 *     a thread track per thread (pid, tid, name); under each thread's
 *     track, "requests" (its requests as slices, with their blocked and
 *     preempted ns when switches were recorded; a request overlapping an
 *     earlier one of the thread goes to "requests 2", ...; a request
 *     another thread ended is a flow to an instant on that thread's
 *     "requests") and "off-CPU"
 *     (slices "blocked" / "preempted" from the context switches, cut to
 *     the window); and child tracks of the process: "cpu N" per core
 *     (which thread ran there: from the context switches when recorded,
 *     else the decoded runs of records), and "ktrace" (a note instant
 *     with the files and the tick length, and the TRIGGER instant).
 *   - one sequence per thread, core and lane, each opened by a packet that
 *     clears incremental state, sets a ClockSnapshot of a sequence-scoped
 *     incremental clock (id 64, ns) against REALTIME, and TracePacketDefaults
 *     (timestamp_clock_id 64, the sequence's default track).  Every later
 *     packet carries only the ns since the previous packet of its sequence.
 *     Event names are interned per sequence (InternedData.event_names, sent
 *     with the first event that uses them).
 *
 * A call is a SLICE_BEGIN and a SLICE_END packet: 2 x (2 packet header +
 * 2..3 timestamp delta + 2..3 sequence id + 2 track_event header + 2 type)
 * + 2..3 name_iid = about 22-24 bytes (bench/timeline_size.sh measures it:
 * 22.0 bytes per call on bench_mksnap, against 93.7 for the Chrome JSON).
 *
 * Streamed.  A file alone in its process group (the usual case) is opened
 * for the stream: its thread sequences are written while the builder walks
 * it (kd_range_walk_cut, with a range cut on the walk), one thread after
 * another in recorded order, as the events come; memory is the open
 * sequence's name table and the builder's stack, nothing per call.
 * Requests, cores and the "ktrace" note follow from d->reqs and d->runs
 * (per request, per run).  Several snapshots of one process are written
 * from their collected calls, as merge.c cut them (below); the same events
 * come out of both ways (test_decoder_perfetto compares the bytes).
 *
 * Order and time.  A thread's slices are written in recorded order (the
 * stream, or a walk over its collected calls in entry order, parent before
 * child), so nesting never depends on time; marks are instants among them,
 * in recorded order too.  A slice's BEGIN carries truncated_begin, its END
 * truncated_end and exit_lost (what the stream knows only at the end).  Times are CLOCK_REALTIME ns from each snapshot's anchors
 * (kd_time_wall_ns), so files line up.  Events that share one tick (the
 * counter >> tsc_shift, ~100 ns) get distinct times 1 ns apart in recorded
 * order, never reaching the next tick's time (beyond that, equal times keep
 * the recorded order): times within a tick are interpolated, and the
 * "ktrace" note says so.
 *
 * Several snapshots of one process (same host, pid and start_tsc:
 * kd_merge_same_process) share one process group.  They are cut by merge.c
 * (kd_merge_files, the one rule every format uses, in its file comment):
 * each later snapshot B loses what the earlier one holds up to the cut C,
 * a frame open across C is one call of B with the earlier begin (a join,
 * d->merge.joins), and B's requests, marks, runs and off/on-CPU intervals
 * start after C.  What is left here is writing that as one event sequence
 * per thread (merge_file): B's events follow the earlier files', a joined
 * frame's BEGIN where its begin was recorded among theirs, B's frames the
 * earlier files never saw begin first, and the earlier files' frames still
 * open that B does not know end after B's.  Files whose windows do not
 * overlap are placed one after the other.  Every tick of a group is
 * converted with the newest file's anchors.
 */
#include <stdio.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dec.h"
#include "kd_sched.h"
#include "kd_time.h"
#include "merge.h"
#include "names.h"
#include "out-perfetto.h"
#include "result.h"
#include "sink.h"
#include "stream.h"
#include "util.h"

/* ---- protobuf writer -------------------------------------------------------- */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

struct pb {
	uint8_t *p;
	size_t n, cap;            /* bytes used, allocated */
	int oom;
};

static int pb_room(struct pb *b, size_t more)
{
	if (b->oom)
		return -1;
	if (more && kd_grow(&b->p, &b->cap, b->n + more - 1, 1, "the perfetto trace")) {
		b->oom = 1;
		return -1;
	}
	return 0;
}

static unsigned varint_len(uint64_t v)
{
	unsigned n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static void put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p = (uint8_t)v;
}

static void pb_varint(struct pb *b, uint64_t v)
{
	if (pb_room(b, 10))
		return;
	put_varint(b->p + b->n, v);
	b->n += varint_len(v);
}

static void pb_uint(struct pb *b, uint32_t field, uint64_t v)
{
	pb_varint(b, (uint64_t)field << 3 | WT_VARINT);
	pb_varint(b, v);
}

/* fixed64 fields: 8 bytes, little-endian. */
static void pb_fixed64(struct pb *b, uint32_t field, uint64_t v)
{
	pb_varint(b, (uint64_t)field << 3 | WT_I64);
	if (pb_room(b, 8))
		return;
	for (int i = 0; i < 8; i++)
		b->p[b->n++] = (uint8_t)(v >> (8 * i));
}

/* int32/int64 fields: two's complement as a 64-bit varint. */
static void pb_int(struct pb *b, uint32_t field, int64_t v)
{
	pb_uint(b, field, (uint64_t)v);
}

static void pb_str(struct pb *b, uint32_t field, const char *s)
{
	size_t len = strlen(s);

	pb_varint(b, (uint64_t)field << 3 | WT_LEN);
	pb_varint(b, len);
	if (pb_room(b, len))
		return;
	memcpy(b->p + b->n, s, len);
	b->n += len;
}

/* A nested message: tag, a 1-byte length placeholder; nest_end() writes the
 * length, moving the body when it needs more than one byte. */
static size_t nest_begin(struct pb *b, uint32_t field)
{
	pb_varint(b, (uint64_t)field << 3 | WT_LEN);
	if (pb_room(b, 1))
		return 0;
	b->n++;
	return b->n;
}

static void nest_end(struct pb *b, size_t start)
{
	size_t len, extra;

	if (b->oom || start == 0)
		return;
	len = b->n - start;
	extra = varint_len(len) - 1;
	if (extra) {
		if (pb_room(b, extra))
			return;
		memmove(b->p + start + extra, b->p + start, len);
		b->n += extra;
	}
	put_varint(b->p + start - 1, len);
}

/* ---- Perfetto field numbers ------------------------------------------------- */

enum {
	TRACE_PACKET = 1,              /* Trace.packet */
	TP_CLOCK_SNAPSHOT = 6,         /* TracePacket */
	TP_TIMESTAMP = 8,
	TP_SEQ_ID = 10,                /* trusted_packet_sequence_id */
	TP_TRACK_EVENT = 11,
	TP_INTERNED_DATA = 12,
	TP_SEQUENCE_FLAGS = 13,
	TP_TIMESTAMP_CLOCK_ID = 58,
	TP_DEFAULTS = 59,              /* trace_packet_defaults */
	TP_TRACK_DESCRIPTOR = 60,
	SEQ_INCREMENTAL_STATE_CLEARED = 1,
	CS_CLOCKS = 1,                 /* ClockSnapshot */
	CS_PRIMARY_TRACE_CLOCK = 2,
	CLK_ID = 1,                    /* ClockSnapshot.Clock */
	CLK_TIMESTAMP = 2,
	CLK_INCREMENTAL = 3,
	CLOCK_REALTIME_ID = 1,         /* BuiltinClock */
	CLOCK_BOOTTIME_ID = 6,
	CLOCK_SEQ_INCR = 64,           /* our sequence-scoped incremental clock */
	TPD_CLOCK_ID = 58,             /* TracePacketDefaults */
	TPD_TRACK_EVENT_DEFAULTS = 11,
	TED_TRACK_UUID = 11,           /* TrackEventDefaults */
	TE_DEBUG_ANNOTATIONS = 4,      /* TrackEvent */
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK_UUID = 11,
	TE_NAME = 23,
	TE_FLOW_IDS = 47,              /* repeated fixed64 */
	TE_TERMINATING_FLOW_IDS = 48,  /* repeated fixed64 */
	TYPE_SLICE_BEGIN = 1,
	TYPE_SLICE_END = 2,
	TYPE_INSTANT = 3,
	DA_BOOL = 2,                   /* DebugAnnotation */
	DA_UINT = 3,
	DA_INT = 4,
	DA_STRING = 6,
	DA_NAME = 10,
	ID_EVENT_NAMES = 2,            /* InternedData */
	EN_IID = 1,                    /* EventName */
	EN_NAME = 2,
	TD_UUID = 1,                   /* TrackDescriptor */
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT_UUID = 5,
	PD_PID = 1,                    /* ProcessDescriptor */
	PD_NAME = 6,
	THD_PID = 1,                   /* ThreadDescriptor */
	THD_TID = 2,
	THD_NAME = 5,
};

/* ---- sequences -------------------------------------------------------------- */

struct pf {
	FILE *f;
	struct pb b;              /* the packet being built */
	size_t pkt;               /* nest_begin() of the packet */
	uint32_t next_seq;        /* next trusted_packet_sequence_id */
	uint64_t bytes;           /* written */
	int64_t t0;               /* ns since epoch: earliest window start */
	int oom;
	/* the open sequence */
	uint32_t seq;             /* its id, 0 = none */
	uint64_t track;           /* its default track uuid */
	int64_t last_ns;          /* ns since epoch of its last packet */
	struct kd_umap names; /* name hash -> index in nm */
	char **nm;                /* interned names (owned), iid = index + 1 */
	uint32_t nnm;
	size_t capnm;
};

static void packet_begin(struct pf *w)
{
	w->b.n = 0;
	w->pkt = nest_begin(&w->b, TRACE_PACKET);
}

static void packet_end(struct pf *w)
{
	nest_end(&w->b, w->pkt);
	if (w->b.oom) {
		w->oom = 1;
		return;
	}
	fwrite(w->b.p, 1, w->b.n, w->f);
	w->bytes += w->b.n;
}

static uint64_t clamp_ns(int64_t ns)
{
	return ns < 0 ? 0 : (uint64_t)ns;
}

/* A packet on sequence 1 (header, descriptors), all at the trace's start. */
static void packet_abs(struct pf *w, int64_t ns)
{
	(void)ns;
	ns = w->t0;
	packet_begin(w);
	pb_uint(&w->b, TP_SEQ_ID, 1);
	pb_uint(&w->b, TP_TIMESTAMP, clamp_ns(ns));
	pb_uint(&w->b, TP_TIMESTAMP_CLOCK_ID, CLOCK_REALTIME_ID);
}

/* Interned names are per sequence: forget them. */
static void names_reset(struct pf *w)
{
	for (uint32_t i = 0; i < w->nnm; i++)
		free(w->nm[i]);
	w->nnm = 0;
	kd_umap_free(&w->names);
}

static void seq_open(struct pf *w, uint64_t track, int64_t t0)
{
	size_t cs, c, d, ted;

	w->seq = w->next_seq++;
	w->track = track;
	w->last_ns = t0 < 0 ? 0 : t0;
	names_reset(w);
	packet_begin(w);
	pb_uint(&w->b, TP_SEQ_ID, w->seq);
	pb_uint(&w->b, TP_TIMESTAMP, (uint64_t)w->last_ns);
	pb_uint(&w->b, TP_TIMESTAMP_CLOCK_ID, CLOCK_REALTIME_ID);
	pb_uint(&w->b, TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	cs = nest_begin(&w->b, TP_CLOCK_SNAPSHOT);
	c = nest_begin(&w->b, CS_CLOCKS);
	pb_uint(&w->b, CLK_ID, CLOCK_REALTIME_ID);
	pb_uint(&w->b, CLK_TIMESTAMP, (uint64_t)w->last_ns);
	nest_end(&w->b, c);
	c = nest_begin(&w->b, CS_CLOCKS);
	pb_uint(&w->b, CLK_ID, CLOCK_SEQ_INCR);
	pb_uint(&w->b, CLK_TIMESTAMP, (uint64_t)w->last_ns);
	pb_uint(&w->b, CLK_INCREMENTAL, 1);
	nest_end(&w->b, c);
	nest_end(&w->b, cs);
	d = nest_begin(&w->b, TP_DEFAULTS);
	pb_uint(&w->b, TPD_CLOCK_ID, CLOCK_SEQ_INCR);
	ted = nest_begin(&w->b, TPD_TRACK_EVENT_DEFAULTS);
	pb_uint(&w->b, TED_TRACK_UUID, track);
	nest_end(&w->b, ted);
	nest_end(&w->b, d);
	packet_end(w);
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

/*
 * Event packet header on the open sequence at ns (>= last_ns), and the name:
 * interned (iid; InternedData added to this packet on first use) or, if the
 * table cannot hold it, inline.  Returns the track_event nest start.
 */
static size_t event_begin(struct pf *w, int64_t ns, uint32_t type, const char *name,
                          uint64_t track)
{
	uint64_t h = 0;
	uint32_t iid = 0, k;
	int fresh = 0;
	size_t te;

	if (ns < w->last_ns)
		ns = w->last_ns;
	if (name) {
		h = hash_str(name);
		/* Probe h, h+1, ... until the name or a free key. */
		for (uint32_t probe = 0; probe < 8; probe++) {
			k = kd_umap_get(&w->names, h + probe);
			if (k == KD_NONE) {
				if (kd_grow(&w->nm, &w->capnm, w->nnm, sizeof(*w->nm),
						"the perfetto trace"))
					break;
				w->nm[w->nnm] = strdup(name);
				if (!w->nm[w->nnm] || kd_umap_put(&w->names, h + probe, w->nnm)) {
					free(w->nm[w->nnm]);
					break;
				}
				w->nnm++;
				iid = w->nnm;
				fresh = 1;
				break;
			}
			if (k < w->nnm && !strcmp(w->nm[k], name)) {
				iid = k + 1;
				break;
			}
		}
	}
	packet_begin(w);
	pb_uint(&w->b, TP_TIMESTAMP, (uint64_t)(ns - w->last_ns));
	w->last_ns = ns;
	pb_uint(&w->b, TP_SEQ_ID, w->seq);
	if (fresh) {
		size_t id = nest_begin(&w->b, TP_INTERNED_DATA);
		size_t en = nest_begin(&w->b, ID_EVENT_NAMES);

		pb_uint(&w->b, EN_IID, iid);
		pb_str(&w->b, EN_NAME, name);
		nest_end(&w->b, en);
		nest_end(&w->b, id);
	}
	te = nest_begin(&w->b, TP_TRACK_EVENT);
	pb_uint(&w->b, TE_TYPE, type);
	if (track != w->track)
		pb_uint(&w->b, TE_TRACK_UUID, track);
	if (iid)
		pb_uint(&w->b, TE_NAME_IID, iid);
	else if (name)
		pb_str(&w->b, TE_NAME, name);
	return te;
}

static void event_end(struct pf *w, size_t te)
{
	nest_end(&w->b, te);
	packet_end(w);
}

static void ann_uint(struct pf *w, const char *name, uint64_t v)
{
	size_t a = nest_begin(&w->b, TE_DEBUG_ANNOTATIONS);

	pb_str(&w->b, DA_NAME, name);
	pb_uint(&w->b, DA_UINT, v);
	nest_end(&w->b, a);
}

static void ann_int(struct pf *w, const char *name, int64_t v)
{
	size_t a = nest_begin(&w->b, TE_DEBUG_ANNOTATIONS);

	pb_str(&w->b, DA_NAME, name);
	pb_int(&w->b, DA_INT, v);
	nest_end(&w->b, a);
}

static void ann_bool(struct pf *w, const char *name)
{
	size_t a = nest_begin(&w->b, TE_DEBUG_ANNOTATIONS);

	pb_str(&w->b, DA_NAME, name);
	pb_uint(&w->b, DA_BOOL, 1);
	nest_end(&w->b, a);
}

static void ann_str(struct pf *w, const char *name, const char *v)
{
	size_t a = nest_begin(&w->b, TE_DEBUG_ANNOTATIONS);

	pb_str(&w->b, DA_NAME, name);
	pb_str(&w->b, DA_STRING, v);
	nest_end(&w->b, a);
}

/* ---- time: wall clock, ticks spread in recorded order ---------------------- */

struct clk {
	uint64_t tick;            /* ticks: last effective tick (same counter) */
	int64_t ns;               /* ns: last time given */
	int64_t raw, lim;         /* ns: wall time of tick and of tick + 1 */
	int started;
};

/*
 * ns for the next event of one track at tick of d, in recorded order: the
 * tick's wall time, or 1 ns after the previous event if that is later, but
 * never the next tick's time.  Ticks never go back (a late store joins the
 * previous event's tick).
 */
static int64_t clk_next(struct clk *c, const struct kd_dec *d, uint64_t tick)
{
	int64_t raw, lim, ns;

	if (c->started && tick < c->tick)
		tick = c->tick;
	if (c->started && tick == c->tick) {
		raw = c->raw;
		lim = c->lim;
	} else {
		raw = kd_time_wall_ns(d, tick);
		lim = kd_time_wall_ns(d, tick < UINT64_MAX ? tick + 1 : tick);
		c->raw = raw;
		c->lim = lim;
	}
	if (!c->started || raw > c->ns)
		ns = raw;
	else if (c->ns < INT64_MAX && c->ns + 1 < lim)
		ns = c->ns + 1;
	else
		ns = c->ns;
	c->tick = tick;
	c->ns = ns;
	c->started = 1;
	return ns;
}

/* ---- process groups --------------------------------------------------------- */

struct gfile {
	struct kd_dec *d;
	uint64_t cut;             /* ticks: merge.c's cut (an earlier snapshot of the
	                             process ends there), if overlap */
	int overlap;              /* merge.c cut this file (d->merge.cut) */
	uint32_t *order;          /* call indices grouped by thread, entry order */
	uint32_t *first;          /* [nthreads + 1]: start of each thread in order */
	uint32_t *local;          /* [ncalls]: position within its thread */
	uint32_t *morder;         /* mark indices grouped by thread, in order */
	uint32_t *mfirst;         /* [nthreads + 1]: start of each thread in morder */
};

struct gthread {
	uint32_t slot;
	int32_t tid;              /* as written (offset for pid collisions) */
	uint32_t *th;             /* per file: thread index or KD_NONE */
	const char *name;
	uint64_t uuid;
};

struct group {
	struct gfile *files;
	uint32_t nfiles;
	struct gthread *threads;
	uint32_t nthreads;
	int32_t pid;              /* as written */
	int64_t tid_off;          /* added to every tid (pid collisions) */
	uint64_t uuid;            /* process track */
	const struct kd_dec *clk; /* the newest file: its anchors convert every
	                                 tick of the group (one counter), so merged
	                                 files never disagree on a time */
	int streamed;             /* one file opened for the stream: its threads
	                             are written while it is walked */
};

/* One entry of a thread's merged slice sequence. */
struct sev {
	uint64_t tick;            /* ticks */
	uint32_t call;            /* call index in the file */
	uint16_t file;            /* file index in the group */
	uint8_t end;              /* 1: SLICE_END */
	uint8_t open;             /* END: of a frame still open at its file's end;
	                             BEGIN: of a frame merge.c joined (its begin is
	                             an earlier file's: struct kd_merge_join) */
};

struct vec {
	struct sev *v;
	size_t n, cap;
	int oom;
};

static void vpush(struct vec *a, struct sev e)
{
	if (kd_grow(&a->v, &a->cap, a->n, sizeof(*a->v), "the perfetto trace")) {
		a->oom = 1;
		return;
	}
	a->v[a->n++] = e;
}

/* Counting sort of n items by thread (thread_of(i) < nthreads, others
 * left out): order[] grouped by thread in index order, first[t] where
 * thread t starts, local[i] (if not NULL) the position within its thread. */
static int by_thread(uint32_t n, uint32_t nthreads, const void *items, size_t stride,
                     size_t thread_off, uint32_t **order, uint32_t **first, uint32_t **local)
{
	const uint8_t *it = items;
	uint32_t *cnt = calloc((size_t)nthreads + 1, sizeof(*cnt));

	*order = malloc(((size_t)n + 1) * sizeof(**order));
	*first = calloc((size_t)nthreads + 2, sizeof(**first));
	if (local)
		*local = malloc(((size_t)n + 1) * sizeof(**local));
	if (!cnt || !*order || !*first || (local && !*local)) {
		free(cnt);
		return -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t t;

		memcpy(&t, it + (size_t)i * stride + thread_off, sizeof(t));
		if (t < nthreads)
			(*first)[t + 1]++;
	}
	for (uint32_t t = 0; t < nthreads; t++)
		(*first)[t + 1] += (*first)[t];
	for (uint32_t i = 0; i < n; i++) {
		uint32_t t;

		memcpy(&t, it + (size_t)i * stride + thread_off, sizeof(t));
		if (t >= nthreads)
			continue;
		if (local)
			(*local)[i] = cnt[t];
		(*order)[(*first)[t] + cnt[t]++] = i;
	}
	free(cnt);
	return 0;
}

static int gfile_index(struct gfile *g)
{
	const struct kd_dec *d = g->d;

	if (by_thread(d->ncalls, d->nthreads, d->calls, sizeof(*d->calls),
	              offsetof(struct kd_dec_call, thread), &g->order, &g->first, &g->local))
		return -1;
	return by_thread(d->nmarks, d->nthreads, d->marks, sizeof(*d->marks),
	                 offsetof(struct kd_dec_mark, thread), &g->morder, &g->mfirst, NULL);
}

static int is_open(const struct kd_dec_call *c)
{
	return (c->flags & KD_CALL_TRUNC_END) && !(c->flags & KD_CALL_EXIT_LOST);
}

/*
 * Append to out the begin/end events of thread th of file fi in recorded
 * order (pre-order over parent links, children in entry order).
 */
static void walk_file(const struct group *g, uint32_t fi, uint32_t th, struct vec *out)
{
	const struct gfile *gf = &g->files[fi];
	const struct kd_dec *d = gf->d;
	uint32_t lo = gf->first[th], n = gf->first[th + 1] - lo;
	uint32_t *child, *sib, *stk, nroots = 0, root = KD_NONE, sp = 0;

	if (!n)
		return;
	child = malloc((size_t)n * sizeof(*child));
	sib = malloc((size_t)n * sizeof(*sib));
	stk = malloc((size_t)n * sizeof(*stk));
	if (!child || !sib || !stk) {
		out->oom = 1;
		goto out;
	}
	for (uint32_t j = 0; j < n; j++)
		child[j] = sib[j] = KD_NONE;
	/* Backwards, so that prepending leaves every list in entry order. */
	for (uint32_t j = n; j-- > 0;) {
		const struct kd_dec_call *c = &d->calls[gf->order[lo + j]];
		uint32_t p = c->parent;

		if (p < d->ncalls && d->calls[p].thread == th && gf->local[p] != j) {
			sib[j] = child[gf->local[p]];
			child[gf->local[p]] = j;
		} else {
			sib[j] = root;
			root = j;
			nroots++;
		}
	}
	/* Iterative pre-order: stk holds the path; child[] is consumed. */
	for (uint32_t r = root; r != KD_NONE; r = sib[r]) {
		const struct kd_dec_call *c = &d->calls[gf->order[lo + r]];

		vpush(out, (struct sev){ c->begin, gf->order[lo + r], (uint16_t)fi, 0, 0 });
		stk[sp++] = r;
		while (sp) {
			uint32_t top = stk[sp - 1], k = child[top];

			if (k != KD_NONE) {
				child[top] = sib[k];
				c = &d->calls[gf->order[lo + k]];
				vpush(out, (struct sev){ c->begin, gf->order[lo + k], (uint16_t)fi, 0, 0 });
				stk[sp++] = k;
				continue;
			}
			c = &d->calls[gf->order[lo + top]];
			vpush(out, (struct sev){ c->end, gf->order[lo + top], (uint16_t)fi, 1,
			                         (uint8_t)is_open(c) });
			sp--;
		}
	}
	(void)nroots;
out:
	free(child);
	free(sib);
	free(stk);
}

/* merge.c's join of call `call` of file fi, or NULL. */
static const struct kd_merge_join *join_of(const struct group *g, uint32_t fi, uint32_t call)
{
	const struct kd_dec *d = g->files[fi].d;

	for (uint32_t i = 0; i < d->merge.njoins; i++)
		if (d->merge.joins[i].call == call)
			return &d->merge.joins[i];
	return NULL;
}

/* Index in the group of file d, or KD_NONE. */
static uint32_t file_of(const struct group *g, const struct kd_dec *d)
{
	for (uint32_t i = 0; i < g->nfiles; i++)
		if (g->files[i].d == d)
			return i;
	return KD_NONE;
}

/* Where an event was recorded: its file and its place in its tick (a joined
 * frame's BEGIN: the earlier file's). */
static void sev_origin(const struct group *g, const struct sev *e, uint32_t *file, uint32_t *sub)
{
	const struct kd_dec_call *c = &g->files[e->file].d->calls[e->call];
	const struct kd_merge_join *j;

	*file = e->file;
	*sub = e->end ? c->end_sub : c->begin_sub;
	if (!e->end && e->open && (j = join_of(g, e->file, e->call)) &&
	    file_of(g, j->from) != KD_NONE) {
		*file = file_of(g, j->from);
		*sub = j->sub;
	}
}

/* Insert e into m at position p. */
static void vinsert(struct vec *m, size_t p, struct sev e)
{
	vpush(m, e);
	if (m->oom)
		return;
	memmove(&m->v[p + 1], &m->v[p], (m->n - 1 - p) * sizeof(*m->v));
	m->v[p] = e;
}

/*
 * Append file fi's events (thread th) to the merged sequence m, as merge.c
 * cut them (kd_merge_files: the calls the earlier file holds are gone, a
 * frame open across the cut is one call of this file, joined, with the
 * earlier begin).  In recorded order: a joined frame's BEGIN where its
 * begin was recorded among the earlier files' events; this file's frames
 * alive at the cut that the earlier files never saw begin first; the
 * earlier files' frames still open, that this file does not know, end
 * after it.  Stacks that disagree (merge.c joined nothing though both
 * have frames open at the cut): the earlier frames end at their end, this
 * file's start afresh.
 */
static void merge_file(const struct group *g, uint32_t fi, uint32_t th, struct vec *m)
{
	const struct gfile *gf = &g->files[fi];
	const struct kd_dec *d = gf->d;
	struct vec b = { 0 };
	struct sev *outer = NULL;
	size_t tail = 0, head = 0, hn, q = 0, nouter;

	if (!gf->overlap || !m->n) {
		walk_file(g, fi, th, m);
		return;
	}
	walk_file(g, fi, th, &b);
	if (b.oom) {
		m->oom = 1;
		free(b.v);
		return;
	}
	/* m's open tail: ends of frames still open at the cut, not joined. */
	while (tail < m->n && m->v[m->n - 1 - tail].end && m->v[m->n - 1 - tail].open)
		tail++;
	/* b's head: begins of its frames alive at the cut, outermost first:
	 * unknown to the earlier files, joined (the innermost of those alive
	 * before the cut's tick), then entered at the cut's tick. */
	while (head < b.n && !b.v[head].end && d->calls[b.v[head].call].begin <= gf->cut)
		head++;
	for (hn = head; hn > 0 && !join_of(g, fi, b.v[hn - 1].call) &&
	                d->calls[b.v[hn - 1].call].begin == gf->cut; hn--)
		;
	for (size_t i = 0; i < hn; i++)
		if (join_of(g, fi, b.v[i].call))
			q++;
	if (!q && tail && hn) {
		for (size_t i = 0; i < b.n; i++)
			vpush(m, b.v[i]);
		free(b.v);
		return;
	}
	nouter = tail;
	if (nouter) {
		outer = malloc(nouter * sizeof(*outer));
		if (!outer) {
			m->oom = 1;
			free(b.v);
			return;
		}
		memcpy(outer, &m->v[m->n - nouter], nouter * sizeof(*outer));
	}
	m->n -= nouter;
	/* The joined frames' BEGINs, outermost first, where they were recorded. */
	for (size_t i = hn - q; i < hn && !m->oom; i++) {
		struct sev e = b.v[i];
		uint32_t of, os, ef, es;
		uint64_t tick = d->calls[e.call].begin;
		size_t p, last = m->n;

		e.open = 1;
		sev_origin(g, &e, &of, &os);
		for (p = 0; p < m->n; p++) {
			sev_origin(g, &m->v[p], &ef, &es);
			if (ef != of)
				continue;
			last = p + 1;
			if (m->v[p].tick > tick || (m->v[p].tick == tick && es > os))
				break;
		}
		vinsert(m, p < m->n ? p : last, e);
	}
	if (hn > q && !m->oom) {
		/* b knows frames outer to all of m: they begin first. */
		size_t extra = hn - q;
		uint64_t t0 = m->n ? m->v[0].tick : 0;

		for (size_t i = 0; i < extra; i++)
			vpush(m, b.v[0]);
		if (!m->oom) {
			memmove(&m->v[extra], &m->v[0], (m->n - extra) * sizeof(*m->v));
			for (size_t i = 0; i < extra; i++) {
				m->v[i] = b.v[i];
				if (m->n > extra && m->v[i].tick > t0)
					m->v[i].tick = t0;
			}
		}
	}
	for (size_t i = hn; i < b.n; i++)
		vpush(m, b.v[i]);
	for (size_t i = 0; i < nouter; i++)
		vpush(m, outer[i]);
	free(outer);
	free(b.v);
}

/* ---- per-track writers ------------------------------------------------------ */

struct mk {
	uint64_t tick;
	uint32_t sub;             /* recorded order within the tick (kd_ev.sub) */
	uint32_t file, idx;
};

static int cmp_mk(const void *a, const void *b)
{
	const struct mk *x = a, *y = b;

	if (x->tick != y->tick)
		return x->tick < y->tick ? -1 : 1;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int want_thread(const struct kd_out_opts *o, int32_t tid)
{
	return !o || !o->have_tid || o->tid == tid;
}

/*
 * The events of a thread track, on its open sequence, whatever they come
 * from (the stream, or a merge of collected files): a call's SLICE_BEGIN
 * carries its name (and truncated_begin), its SLICE_END what is known only
 * at its end (truncated_end, exit_lost: Perfetto adds an END's annotations
 * to the slice's args); a mark is an instant with its value.  ck spreads
 * the events of one tick 1 ns apart in the order they come.
 */
static void th_begin(struct pf *w, struct clk *ck, const struct kd_dec *clk, uint64_t tick,
                     const char *name, uint32_t flags)
{
	size_t te = event_begin(w, clk_next(ck, clk, tick), TYPE_SLICE_BEGIN, name, w->track);

	if (flags & KD_CALL_TRUNC_BEGIN)
		ann_bool(w, "truncated_begin");
	if (flags & KD_CALL_HELD)
		ann_bool(w, "held"); /* a kept request's: on the cpu it was written to */
	event_end(w, te);
}

static void th_end(struct pf *w, struct clk *ck, const struct kd_dec *clk, uint64_t tick,
                   uint32_t flags)
{
	size_t te = event_begin(w, clk_next(ck, clk, tick), TYPE_SLICE_END, NULL, w->track);

	if (flags & KD_CALL_TRUNC_END)
		ann_bool(w, "truncated_end");
	if (flags & KD_CALL_EXIT_LOST)
		ann_bool(w, "exit_lost");
	event_end(w, te);
}

static void th_mark(struct pf *w, struct clk *ck, const struct kd_dec *clk,
                    const struct kd_dec *d, uint32_t name, uint64_t value, uint64_t tick)
{
	char nb[64];
	size_t te = event_begin(w, clk_next(ck, clk, tick), TYPE_INSTANT,
	                        kd_names_id(d, name, nb, sizeof(nb)), w->track);

	ann_uint(w, "value", value);
	event_end(w, te);
}

static void write_mark(struct pf *w, const struct group *g, struct clk *ck, const struct mk *k)
{
	const struct kd_dec *d = g->files[k->file].d;
	const struct kd_dec_mark *mk = &d->marks[k->idx];

	th_mark(w, ck, g->clk, d, mk->name, mk->value, mk->tick);
}

/* A thread's sequence starts at its first record (or the start of its
 * calls entered before the window, if earlier). */
static int64_t thread_t0(const struct group *g, const struct kd_dec_thread *t)
{
	return kd_time_wall_ns(g->clk, t->first_tick < t->start_tick ? t->first_tick : t->start_tick);
}

static void write_thread(struct pf *w, const struct group *g, const struct gthread *gt)
{
	struct vec m = { 0 };
	struct mk *mks = NULL;
	size_t nmk = 0, cmk = 0, mi = 0;
	struct clk ck = { 0 };
	int64_t t0 = INT64_MAX;

	for (uint32_t fi = 0; fi < g->nfiles; fi++) {
		const struct kd_dec *d = g->files[fi].d;
		uint32_t th = gt->th[fi];

		if (th == KD_NONE)
			continue;
		merge_file(g, fi, th, &m);
		for (uint32_t j = g->files[fi].mfirst[th]; j < g->files[fi].mfirst[th + 1]; j++) {
			uint32_t i = g->files[fi].morder[j];

			if (kd_grow(&mks, &cmk, nmk, sizeof(*mks), "the perfetto trace")) {
				m.oom = 1;
				break;
			}
			mks[nmk++] = (struct mk){ d->marks[i].tick, d->marks[i].sub, fi, i };
		}
		if (t0 == INT64_MAX)
			t0 = thread_t0(g, &d->threads[th]);
	}
	if (m.oom) {
		w->oom = 1;
		goto out;
	}
	if (nmk)
		qsort(mks, nmk, sizeof(*mks), cmp_mk);
	if (m.n) {
		int64_t first = kd_time_wall_ns(g->clk, m.v[0].tick);

		if (first < t0)
			t0 = first;
	}
	if (nmk) {
		int64_t first = kd_time_wall_ns(g->clk, mks[0].tick);

		if (first < t0)
			t0 = first;
	}
	if (t0 == INT64_MAX)
		t0 = 0;
	seq_open(w, gt->uuid, t0);
	for (size_t i = 0; i < m.n && !w->oom; i++) {
		const struct sev *e = &m.v[i];
		const struct kd_dec *d = g->files[e->file].d;
		const struct kd_dec_call *c = &d->calls[e->call];
		uint32_t file, sub;

		sev_origin(g, e, &file, &sub);
		/* Marks in recorded order among the slices (as the stream has them). */
		while (mi < nmk && (mks[mi].tick < e->tick || (mks[mi].tick == e->tick &&
		                                               mks[mi].file == file &&
		                                               mks[mi].sub < sub)))
			write_mark(w, g, &ck, &mks[mi++]);
		if (e->end)
			th_end(w, &ck, g->clk, e->tick, c->flags);
		else
			th_begin(w, &ck, g->clk, e->tick, kd_names_func(d, c->func), c->flags);
	}
	while (mi < nmk && !w->oom)
		write_mark(w, g, &ck, &mks[mi++]);
out:
	free(m.v);
	free(mks);
}

/*
 * A file alone in its group, opened for the stream (opts.stream): its
 * thread tracks are written while the builder walks it (kd_range_walk_cut,
 * which also applies a --from/--to/--min-dur range).  The stream brings
 * each thread's events in recorded order, one thread after another, so one
 * sequence is open at a time and memory is the stack and the name table.
 */
struct pf_stream {
	struct pf *w;
	const struct group *g;
	uint32_t *gth;            /* [thread]: index in g->threads, KD_NONE: not written */
	uint32_t nth;
	struct clk ck;            /* the open thread sequence's clock */
	int on;                   /* the current thread is written */
};

static void pf_stream_ev(void *ctx, const struct kd_dec *d, const struct kd_ev *e)
{
	struct pf_stream *s = ctx;
	struct pf *w = s->w;

	if (w->oom)
		return;
	switch (e->kind) {
	case KD_EV_THREAD_BEGIN:
		s->on = e->thread < s->nth && s->gth[e->thread] != KD_NONE;
		if (s->on) {
			memset(&s->ck, 0, sizeof(s->ck));
			seq_open(w, s->g->threads[s->gth[e->thread]].uuid,
			         thread_t0(s->g, &d->threads[e->thread]));
		}
		return;
	case KD_EV_CALL_BEGIN:
		if (s->on)
			th_begin(w, &s->ck, s->g->clk, e->tick, kd_names_func(d, e->func), e->flags);
		return;
	case KD_EV_CALL_END:
		if (s->on)
			th_end(w, &s->ck, s->g->clk, e->tick, e->flags);
		return;
	case KD_EV_MARK:
		if (s->on)
			th_mark(w, &s->ck, s->g->clk, d, e->func, e->value, e->tick);
		return;
	default: /* requests: from d->reqs, on their lanes */
		return;
	}
}

static int write_threads_streamed(struct pf *w, struct group *g, const struct kd_out_opts *o)
{
	struct kd_dec *d = g->files[0].d;
	struct pf_stream s = { w, g, NULL, d->nthreads, { 0 }, 0 };
	struct kd_dec_error err;
	int rc;

	s.gth = malloc(((size_t)d->nthreads + 1) * sizeof(*s.gth));
	if (!s.gth)
		return KD_ENOMEM;
	for (uint32_t t = 0; t < d->nthreads; t++)
		s.gth[t] = KD_NONE;
	for (uint32_t i = 0; i < g->nthreads; i++)
		if (want_thread(o, g->threads[i].tid - (int32_t)g->tid_off) &&
		    g->threads[i].th[0] < d->nthreads)
			s.gth[g->threads[i].th[0]] = i;
	rc = kd_range_walk_cut(d, (struct kd_sink){ pf_stream_ev, &s }, &err);
	free(s.gth);
	return rc ? KD_ENOMEM : 0;
}

/* A run or request on a per-core / per-lane sequence. */
struct span {
	uint64_t begin, end;      /* ticks */
	uint32_t file, idx;
	uint32_t lane;            /* request lane (after assignment), or cpu */
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->lane != y->lane)
		return x->lane < y->lane ? -1 : 1;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static uint64_t sub_uuid(const struct group *g, uint32_t kind, uint32_t n)
{
	return g->uuid | (uint64_t)kind << 24 | (n & 0xffffffu);
}

enum { UU_THREAD = 1, UU_CORE = 2, UU_LANE = 3, UU_NOTE = 4, UU_OFF = 5 };

/* A track under parent (the process's, or a thread's). */
static void sub_track(struct pf *w, uint64_t parent, uint64_t uuid, const char *name, int64_t ns)
{
	size_t td;

	packet_abs(w, ns);
	td = nest_begin(&w->b, TP_TRACK_DESCRIPTOR);
	pb_uint(&w->b, TD_UUID, uuid);
	pb_uint(&w->b, TD_PARENT_UUID, parent);
	pb_str(&w->b, TD_NAME, name);
	nest_end(&w->b, td);
	packet_end(w);
}

static void child_track(struct pf *w, const struct group *g, uint64_t uuid, const char *name,
                        int64_t ns)
{
	sub_track(w, g->uuid, uuid, name, ns);
}

static int64_t gtid(const struct group *g, const struct kd_dec_thread *t)
{
	int64_t tid = t->known ? t->tid : 1000000000ll + t->slot % 1000000000u;

	return (int32_t)(tid + g->tid_off);
}

/* ---- the whole trace --------------------------------------------------------- */

static int cmp_gfile(const void *a, const void *b)
{
	const struct gfile *x = a, *y = b;

	if (x->d->window_end != y->d->window_end)
		return x->d->window_end < y->d->window_end ? -1 : 1;
	return x->d->window_start < y->d->window_start ? -1 : x->d->window_start > y->d->window_start;
}

static void group_free(struct group *g)
{
	for (uint32_t i = 0; i < g->nfiles; i++) {
		free(g->files[i].order);
		free(g->files[i].first);
		free(g->files[i].local);
		free(g->files[i].morder);
		free(g->files[i].mfirst);
	}
	for (uint32_t i = 0; i < g->nthreads; i++)
		free(g->threads[i].th);
	free(g->files);
	free(g->threads);
}

/* Threads of the group's files: the same (slot, tid) in several files of
 * one process is one thread. */
static int group_threads(struct group *g)
{
	struct kd_umap seen = { 0 }; /* (slot, tid) -> gthread index */
	size_t cap = 0;
	int rc = -1;

	for (uint32_t fi = 0; fi < g->nfiles; fi++) {
		const struct kd_dec *d = g->files[fi].d;

		for (uint32_t t = 0; t < d->nthreads; t++) {
			const struct kd_dec_thread *dt = &d->threads[t];
			uint64_t key = (uint64_t)dt->slot << 32 | (uint32_t)gtid(g, dt);
			uint32_t k;

			if (!dt->events)
				continue;
			k = kd_umap_get(&seen, key);
			if (k >= g->nthreads || g->threads[k].th[fi] != KD_NONE) {
				k = g->nthreads;
				if (kd_grow(&g->threads, &cap, k, sizeof(*g->threads),
						"the perfetto trace"))
					goto out;
				g->threads[k].slot = dt->slot;
				g->threads[k].tid = (int32_t)gtid(g, dt);
				g->threads[k].name = dt->name;
				g->threads[k].uuid = sub_uuid(g, UU_THREAD, k);
				g->threads[k].th = malloc((size_t)g->nfiles * sizeof(uint32_t));
				if (!g->threads[k].th)
					goto out;
				for (uint32_t x = 0; x < g->nfiles; x++)
					g->threads[k].th[x] = KD_NONE;
				g->nthreads++;
				if (kd_umap_put(&seen, key, k))
					goto out;
			}
			g->threads[k].th[fi] = t;
		}
	}
	rc = 0;
out:
	kd_umap_free(&seen);
	return rc;
}

static void write_descriptors(struct pf *w, const struct group *g, const struct kd_out_opts *o)
{
	const struct kd_dec *d0 = g->files[0].d;
	const char *exe = strrchr(d0->snap.info.exe, '/');
	int64_t t0 = kd_time_wall_ns(d0, d0->window_start);
	char buf[512];
	size_t td, pd;

	exe = exe ? exe + 1 : (d0->snap.info.exe[0] ? d0->snap.info.exe : "process");
	if (g->nfiles > 1)
		snprintf(buf, sizeof(buf), "%s pid %" PRIu32 " @ %s (%" PRIu32 " snapshots)", exe,
		         d0->snap.info.pid, d0->snap.info.hostname, g->nfiles);
	else
		snprintf(buf, sizeof(buf), "%s pid %" PRIu32 " @ %s", exe, d0->snap.info.pid,
		         d0->snap.info.hostname);
	packet_abs(w, t0);
	td = nest_begin(&w->b, TP_TRACK_DESCRIPTOR);
	pb_uint(&w->b, TD_UUID, g->uuid);
	pd = nest_begin(&w->b, TD_PROCESS);
	pb_int(&w->b, PD_PID, g->pid);
	pb_str(&w->b, PD_NAME, buf);
	nest_end(&w->b, pd);
	nest_end(&w->b, td);
	packet_end(w);
	for (uint32_t i = 0; i < g->nthreads; i++) {
		const struct gthread *gt = &g->threads[i];

		if (!want_thread(o, gt->tid - (int32_t)g->tid_off))
			continue;
		packet_abs(w, t0);
		td = nest_begin(&w->b, TP_TRACK_DESCRIPTOR);
		pb_uint(&w->b, TD_UUID, gt->uuid);
		pd = nest_begin(&w->b, TD_THREAD);
		pb_int(&w->b, THD_PID, g->pid);
		pb_int(&w->b, THD_TID, gt->tid);
		pb_str(&w->b, THD_NAME, gt->name);
		nest_end(&w->b, pd);
		nest_end(&w->b, td);
		packet_end(w);
	}
}

/* Runs of every file, per cpu in time order, one sequence per cpu. */
static void write_cores(struct pf *w, const struct group *g, const struct kd_out_opts *o)
{
	struct span *sp = NULL;
	struct clk ck = { 0 };
	size_t n = 0, cap = 0;

	for (uint32_t fi = 0; fi < g->nfiles; fi++) {
		const struct kd_dec *d = g->files[fi].d;

		/* Context switches say exactly which thread ran: those instead
		 * of the runs of records, cut to the window. */
		for (uint32_t i = 0; d->sched && i < d->noncpu; i++) {
			const struct kd_dec_oncpu *r = &d->oncpu[i];
			uint64_t b = r->begin < d->window_start ? d->window_start : r->begin;
			uint64_t e = r->end > d->window_end ? d->window_end : r->end;

			if (e <= b || r->thread >= d->nthreads)
				continue;
			if (!want_thread(o, d->threads[r->thread].tid))
				continue;
			if (kd_grow(&sp, &cap, n, sizeof(*sp), "the perfetto trace")) {
				w->oom = 1;
				free(sp);
				return;
			}
			sp[n++] = (struct span){ b, e, fi, i, r->cpu };
		}
		for (uint32_t i = 0; !d->sched && i < d->nruns; i++) {
			const struct kd_dec_run *r = &d->runs[i];

			if (r->core >= d->snap.ncores || r->thread >= d->nthreads)
				continue;
			if (!want_thread(o, d->threads[r->thread].tid))
				continue;
			if (kd_grow(&sp, &cap, n, sizeof(*sp), "the perfetto trace")) {
				w->oom = 1;
				free(sp);
				return;
			}
			/* lane = cpu number, the first sort key */
			sp[n++] = (struct span){ r->begin, r->end, fi, i, d->snap.cores[r->core].cpu };
		}
	}
	if (n)
		qsort(sp, n, sizeof(*sp), cmp_span);
	for (size_t i = 0; i < n && !w->oom; i++) {
		const struct kd_dec *d = g->files[sp[i].file].d;
		uint32_t thread = d->sched ? d->oncpu[sp[i].idx].thread : d->runs[sp[i].idx].thread;
		char buf[128];
		size_t te;

		if (i == 0 || sp[i].lane != sp[i - 1].lane) {
			uint64_t uuid = sub_uuid(g, UU_CORE, sp[i].lane);

			snprintf(buf, sizeof(buf), "cpu %" PRIu32, sp[i].lane);
			child_track(w, g, uuid, buf, 0);
			seq_open(w, uuid, kd_time_wall_ns(g->clk, sp[i].begin));
			memset(&ck, 0, sizeof(ck));
		}
		snprintf(buf, sizeof(buf), "%s %" PRId64, d->threads[thread].name,
		         gtid(g, &d->threads[thread]));
		te = event_begin(w, clk_next(&ck, g->clk, sp[i].begin), TYPE_SLICE_BEGIN, buf, w->track);
		if (d->sched)
			ann_str(w, "source", "context switches");
		else
			ann_uint(w, "records", d->runs[sp[i].idx].events);
		event_end(w, te);
		te = event_begin(w, clk_next(&ck, g->clk, sp[i].end), TYPE_SLICE_END, NULL, w->track);
		event_end(w, te);
	}
	free(sp);
}

/* The group thread (index in g->threads) of file fi's thread t, or KD_NONE. */
static uint32_t gthread_of(const struct group *g, uint32_t fi, uint32_t t)
{
	for (uint32_t k = 0; k < g->nthreads; k++)
		if (g->threads[k].th[fi] == t)
			return k;
	return KD_NONE;
}

#define KD_PF_REQ_LANES 8 /* request lanes per thread (overlapping requests) */

/*
 * Requests as slices on their thread: a "requests" track under each
 * thread's track (Perfetto shows it with the thread's calls), the next
 * lane ("requests 2" ...) for a request that overlaps an earlier one of
 * the thread.  Requests of a thread without calls, on the process's
 * "requests" track.
 *
 * A request one thread began and another ended (handed over: the records
 * say so) is a flow: its slice on the first thread starts it, an instant
 * "request:KIND ended here" on the other thread's "requests" track, at the
 * end, terminates it, and Perfetto draws the arrow between them.
 */
#define KD_PF_HANDOFF 0x80000000u /* span.idx: the hand-off's end instant */

static uint64_t flow_id(const struct group *g, uint32_t fi, uint32_t idx)
{
	return g->uuid << 16 | (uint64_t)fi << 32 | (idx + 1u);
}

static int handed_off(const struct kd_dec_request *r)
{
	return r->end_thread != r->thread && !(r->flags & (KD_REQ_TRUNC_BEGIN | KD_REQ_TRUNC_END));
}

static void write_requests(struct pf *w, const struct group *g, const struct kd_out_opts *o)
{
	struct span *sp = NULL;
	size_t n = 0, cap = 0;
	uint64_t *lane_end = NULL;
	uint32_t nk = g->nthreads + 1, *nlanes = NULL;

	for (uint32_t fi = 0; fi < g->nfiles; fi++) {
		const struct kd_dec *d = g->files[fi].d;

		for (uint32_t i = 0; i < d->nreqs; i++) {
			const struct kd_dec_request *r = &d->reqs[i];
			uint32_t k;

			if (r->thread >= d->nthreads || !want_thread(o, d->threads[r->thread].tid))
				continue;
			if (kd_grow(&sp, &cap, n, sizeof(*sp), "the perfetto trace")) {
				w->oom = 1;
				free(sp);
				return;
			}
			k = gthread_of(g, fi, r->thread);
			/* lane: the thread (g->nthreads: none) until lanes are assigned */
			sp[n++] = (struct span){ r->begin, r->end, fi, i, k == KD_NONE ? g->nthreads : k };
			k = handed_off(r) ? gthread_of(g, fi, r->end_thread) : KD_NONE;
			if (k == KD_NONE)
				continue;
			if (kd_grow(&sp, &cap, n, sizeof(*sp), "the perfetto trace")) {
				w->oom = 1;
				free(sp);
				return;
			}
			sp[n++] = (struct span){ r->end, r->end, fi, i | KD_PF_HANDOFF, k };
		}
	}
	if (!n)
		return;
	qsort(sp, n, sizeof(*sp), cmp_span);
	struct clk ck = { 0 };

	lane_end = kd_xcalloc((size_t)nk * KD_PF_REQ_LANES, sizeof(*lane_end), "the perfetto trace");
	nlanes = kd_xcalloc(nk, sizeof(*nlanes), "the perfetto trace");
	if (!lane_end || !nlanes) {
		w->oom = 1;
		goto out;
	}
	/* Greedy lanes per thread: the first whose last request ended before
	 * this one begins.  lane = thread * KD_PF_REQ_LANES + lane. */
	for (size_t i = 0; i < n; i++) {
		uint32_t k = sp[i].lane, l;
		uint64_t *le = lane_end + (size_t)k * KD_PF_REQ_LANES;

		if (sp[i].idx & KD_PF_HANDOFF) { /* an instant: the thread's first lane */
			sp[i].lane = k * KD_PF_REQ_LANES;
			continue;
		}
		for (l = 0; l < nlanes[k] && le[l] >= sp[i].begin; l++)
			;
		if (l == nlanes[k]) {
			if (nlanes[k] == KD_PF_REQ_LANES)
				l = KD_PF_REQ_LANES - 1; /* more at once: the last lane overlaps */
			else
				nlanes[k]++;
		}
		le[l] = sp[i].end;
		sp[i].lane = k * KD_PF_REQ_LANES + l;
	}
	qsort(sp, n, sizeof(*sp), cmp_span);
	for (size_t i = 0; i < n && !w->oom; i++) {
		const struct kd_dec *d = g->files[sp[i].file].d;
		const struct kd_dec_request *r = &d->reqs[sp[i].idx & ~KD_PF_HANDOFF];
		char buf[160], nb[64];
		size_t te;

		if (i == 0 || sp[i].lane != sp[i - 1].lane) {
			uint32_t k = sp[i].lane / KD_PF_REQ_LANES, l = sp[i].lane % KD_PF_REQ_LANES;
			uint64_t uuid = sub_uuid(g, UU_LANE, sp[i].lane);

			if (l)
				snprintf(buf, sizeof(buf), "requests %" PRIu32, l + 1);
			else
				snprintf(buf, sizeof(buf), "requests");
			sub_track(w, k < g->nthreads ? g->threads[k].uuid : g->uuid, uuid, buf, 0);
			seq_open(w, uuid, kd_time_wall_ns(g->clk, r->begin));
			memset(&ck, 0, sizeof(ck));
		}
		if (sp[i].idx & KD_PF_HANDOFF) {
			snprintf(buf, sizeof(buf), "request:%s ended here",
			         kd_names_id(d, r->kind, nb, sizeof(nb)));
			te = event_begin(w, clk_next(&ck, g->clk, r->end), TYPE_INSTANT, buf, w->track);
			pb_fixed64(&w->b, TE_TERMINATING_FLOW_IDS,
			           flow_id(g, sp[i].file, sp[i].idx & ~KD_PF_HANDOFF));
			ann_uint(w, "id", r->id);
			ann_str(w, "began_on", kd_names_thread(d, r->thread, nb, sizeof(nb)));
			event_end(w, te);
			continue;
		}
		snprintf(buf, sizeof(buf), "request:%s%s", kd_names_id(d, r->kind, nb, sizeof(nb)),
		         (r->flags & KD_REQ_TRIGGER) ? " (TRIGGER)" : "");
		te = event_begin(w, clk_next(&ck, g->clk, r->begin), TYPE_SLICE_BEGIN, buf, w->track);
		if (handed_off(r) && gthread_of(g, sp[i].file, r->end_thread) != KD_NONE) {
			pb_fixed64(&w->b, TE_FLOW_IDS, flow_id(g, sp[i].file, sp[i].idx));
			ann_str(w, "ended_on", kd_names_thread(d, r->end_thread, nb, sizeof(nb)));
		}
		ann_uint(w, "id", r->id);
		if (r->flags & (KD_REQ_NUMBERED | KD_REQ_USER_ID)) {
			char lb[128];

			ann_str(w, "request", kd_names_req(d, r, lb, sizeof(lb)));
		}
		ann_str(w, "thread", kd_names_thread(d, r->thread, nb, sizeof(nb)));
		if (d->sched) {
			uint64_t off[2];

			kd_sched_offcpu_in(d, r->thread, r->begin, r->end, off);
			ann_uint(w, "blocked_ns", kd_time_ticks_ns(d, off[KD_OFF_BLOCKED]));
			ann_uint(w, "preempted_ns", kd_time_ticks_ns(d, off[KD_OFF_PREEMPTED]));
		}
		if (r->flags & KD_REQ_TRIGGER)
			ann_bool(w, "trigger");
		if (r->flags & KD_REQ_TRUNC_BEGIN)
			ann_bool(w, "truncated_begin");
		if (r->flags & KD_REQ_TRUNC_END)
			ann_bool(w, "truncated_end");
		event_end(w, te);
		te = event_begin(w, clk_next(&ck, g->clk, r->end), TYPE_SLICE_END, NULL, w->track);
		event_end(w, te);
	}
out:
	free(lane_end);
	free(nlanes);
	free(sp);
}

/*
 * Off-CPU intervals (context switches) as slices "blocked" / "preempted"
 * on an "off-CPU" track under each thread's track, cut to the window (and,
 * for a later snapshot of the process, to after the earlier one's end).
 */
static void write_offcpu(struct pf *w, const struct group *g, const struct kd_out_opts *o)
{
	for (uint32_t k = 0; k < g->nthreads && !w->oom; k++) {
		const struct gthread *gt = &g->threads[k];
		uint64_t uuid = sub_uuid(g, UU_OFF, k);
		struct clk ck = { 0 };
		int opened = 0;

		if (!want_thread(o, gt->tid - (int32_t)g->tid_off))
			continue;
		for (uint32_t fi = 0; fi < g->nfiles && !w->oom; fi++) {
			const struct kd_dec *d = g->files[fi].d;
			uint32_t t = gt->th[fi];
			uint64_t lo = d->window_start, prev_end = 0;

			if (t == KD_NONE || !d->sched || !d->offcpu_first)
				continue;
			for (uint32_t i = d->offcpu_first[t]; i < d->offcpu_first[t + 1] && !w->oom; i++) {
				const struct kd_dec_offcpu *q = &d->offcpu[i];
				uint64_t b = q->begin < lo ? lo : q->begin;
				uint64_t e = q->end > d->window_end ? d->window_end : q->end;
				size_t te;

				if (e <= b || b < prev_end)
					continue;
				if (!opened) {
					sub_track(w, gt->uuid, uuid, "off-CPU", 0);
					seq_open(w, uuid, kd_time_wall_ns(g->clk, b));
					opened = 1;
				}
				te = event_begin(w, clk_next(&ck, g->clk, b), TYPE_SLICE_BEGIN,
				                 q->why == KD_OFF_PREEMPTED ? "preempted" : "blocked",
				                 w->track);
				event_end(w, te);
				te = event_begin(w, clk_next(&ck, g->clk, e), TYPE_SLICE_END, NULL, w->track);
				event_end(w, te);
				prev_end = e;
			}
		}
	}
}

/* The "ktrace" track: a note with the files and how time is written, and
 * every file's TRIGGER. */
static void write_note(struct pf *w, const struct group *g)
{
	uint64_t uuid = sub_uuid(g, UU_NOTE, 0);
	const struct kd_dec *d0 = g->files[0].d;
	int64_t t0 = kd_time_wall_ns(g->clk, d0->window_start);
	struct clk ck = { 0 };
	char buf[512], a[32], b[32];
	size_t te;

	child_track(w, g, uuid, "ktrace", t0);
	seq_open(w, uuid, t0);
	kd_time_fmt_dur(kd_time_ticks_ns(d0, 1), a, sizeof(a));
	snprintf(buf, sizeof(buf), "ktrace-decode: times within one %s tick are interpolated "
	         "(1 ns steps in recorded order)", a);
	te = event_begin(w, clk_next(&ck, g->clk, d0->window_start), TYPE_INSTANT, buf, w->track);
	for (uint32_t fi = 0; fi < g->nfiles; fi++) {
		const struct kd_dec *d = g->files[fi].d;

		kd_time_fmt_wall(kd_time_wall_ns(d, d->window_start), 1, a, sizeof(a));
		kd_time_fmt_wall(kd_time_wall_ns(d, d->window_end), 1, b, sizeof(b));
		snprintf(buf, sizeof(buf), "%s: window %s .. %s UTC, reason %s%s", d->file, a, b,
		         d->snap.info.reason,
		         g->files[fi].overlap ? " (calls already in the previous file left out)" : "");
		ann_str(w, "file", buf);
	}
	ann_uint(w, "tick_ns", kd_time_ticks_ns(d0, 1));
	event_end(w, te);
	for (uint32_t fi = 0; fi < g->nfiles && !w->oom; fi++) {
		const struct kd_dec *d = g->files[fi].d;
		const struct ktrace_trigger_rec *t = &d->snap.trigger;
		uint64_t end_tick;

		if (!d->snap.have_trigger)
			continue;
		end_tick = d->trigger_req < d->nreqs ? d->reqs[d->trigger_req].end : t->end_tsc >> d->shift;
		kd_time_fmt_dur(t->duration_ns, a, sizeof(a));
		kd_time_fmt_dur(t->threshold_ns, b, sizeof(b));
		snprintf(buf, sizeof(buf), "TRIGGER: slow %s request (%s > %s)", t->kind, a, b);
		te = event_begin(w, clk_next(&ck, g->clk, end_tick), TYPE_INSTANT, buf, w->track);
		ann_uint(w, "request_id", t->request_id);
		ann_int(w, "tid", t->tid);
		event_end(w, te);
	}
}

int kd_out_perfetto(FILE *f, struct kd_dec *const *decs, uint32_t n,
                         const struct kd_out_opts *o)
{
	struct pf w = { .f = f, .next_seq = 2 };
	struct group *gs = calloc(n ? n : 1, sizeof(*gs));
	uint32_t ng = 0;
	int64_t t0 = INT64_MAX;
	size_t cs, c;
	int rc = 0;

	if (!gs)
		return KD_ENOMEM;
	/* Snapshots of one process that overlap: cut once by merge.c (as for
	 * summary, text, chrome and html), collected for it; once only. */
	if (n > 1) {
		int merged = 0;

		for (uint32_t i = 0; i < n; i++)
			merged |= decs[i] && decs[i]->merge.group;
		if (!merged)
			kd_merge_files(decs, n);
	}
	/* Group the files by process; within a group, by window end. */
	for (uint32_t i = 0; i < n; i++) {
		struct kd_dec *d = decs[i];
		uint32_t g;

		if (!d)
			continue;
		/* (a group's file index is 16 bits in struct sev) */
		for (g = 0; g < ng && (gs[g].nfiles >= 0xffff || !kd_merge_same_process(gs[g].files[0].d, d)); g++)
			;
		if (g == ng) {
			gs[g].files = calloc(n, sizeof(*gs[g].files));
			if (!gs[g].files) {
				rc = KD_ENOMEM;
				goto out;
			}
			ng++;
		}
		gs[g].files[gs[g].nfiles++].d = d;
	}
	for (uint32_t g = 0; g < ng; g++) {
		struct group *gr = &gs[g];

		/* Snapshots of one process are written from their collected calls
		 * (the range, if any, cut while collecting); a file alone streams. */
		gr->streamed = gr->nfiles == 1 && gr->files[0].d->opts.stream;
		for (uint32_t i = 0; i < gr->nfiles; i++) {
			struct kd_dec *d = gr->files[i].d;
			struct kd_dec_error err;
			int64_t ws;

			if (!gr->streamed && d->opts.stream && kd_dec_collect(d, &err)) {
				rc = KD_ENOMEM;
				goto out;
			}
			ws = kd_time_wall_ns(d, kd_range_start(d));
			if (ws < t0)
				t0 = ws;
		}
	}
	if (t0 == INT64_MAX)
		t0 = 0;
	w.t0 = t0;
	for (uint32_t g = 0; g < ng; g++) {
		struct group *gr = &gs[g];
		uint32_t same_pid = 0;

		qsort(gr->files, gr->nfiles, sizeof(*gr->files), cmp_gfile);
		for (uint32_t i = 0; i < gr->nfiles; i++) {
			if (!gr->streamed && gfile_index(&gr->files[i])) {
				rc = KD_ENOMEM;
				goto out;
			}
			gr->files[i].cut = gr->files[i].d->merge.cut;
			gr->files[i].overlap = i && gr->files[i].d->merge.cut != 0;
		}
		/* Distinct pids (and tids) for distinct processes with one pid. */
		for (uint32_t k = 0; k < g; k++)
			if (gs[k].files[0].d->snap.info.pid == gr->files[0].d->snap.info.pid)
				same_pid++;
		gr->tid_off = same_pid ? 10000000ll * (same_pid % 200) : 0;
		gr->pid = (int32_t)(gr->files[0].d->snap.info.pid + gr->tid_off);
		gr->uuid = (uint64_t)(g + 1) << 32;
		gr->clk = gr->files[gr->nfiles - 1].d;
		if (group_threads(gr)) {
			rc = KD_ENOMEM;
			goto out;
		}
	}

	/* The trace clock is CLOCK_REALTIME (BOOTTIME given the same value, so
	 * nothing else fails to convert). */
	packet_abs(&w, t0);
	cs = nest_begin(&w.b, TP_CLOCK_SNAPSHOT);
	pb_uint(&w.b, CS_PRIMARY_TRACE_CLOCK, CLOCK_REALTIME_ID);
	c = nest_begin(&w.b, CS_CLOCKS);
	pb_uint(&w.b, CLK_ID, CLOCK_REALTIME_ID);
	pb_uint(&w.b, CLK_TIMESTAMP, clamp_ns(t0));
	nest_end(&w.b, c);
	c = nest_begin(&w.b, CS_CLOCKS);
	pb_uint(&w.b, CLK_ID, CLOCK_BOOTTIME_ID);
	pb_uint(&w.b, CLK_TIMESTAMP, clamp_ns(t0));
	nest_end(&w.b, c);
	nest_end(&w.b, cs);
	packet_end(&w);

	for (uint32_t g = 0; g < ng && !w.oom; g++) {
		struct group *gr = &gs[g];

		write_descriptors(&w, gr, o);
		if (gr->streamed && write_threads_streamed(&w, gr, o))
			w.oom = 1;
		for (uint32_t i = 0; i < gr->nthreads && !w.oom && !gr->streamed; i++)
			if (want_thread(o, gr->threads[i].tid - (int32_t)gr->tid_off))
				write_thread(&w, gr, &gr->threads[i]);
		/* After the threads: a streamed file's requests, marks and trigger
		 * are known once it is walked. */
		write_note(&w, gr);
		write_requests(&w, gr, o);
		write_offcpu(&w, gr, o);
		write_cores(&w, gr, o);
	}
	if (w.oom)
		rc = KD_ENOMEM;
out:
	for (uint32_t g = 0; g < ng; g++)
		group_free(&gs[g]);
	free(gs);
	free(w.b.p);
	names_reset(&w);
	free(w.nm);
	return rc;
}
