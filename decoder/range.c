/*
 * range.c - time-range selection: --from / --to / --around-trigger /
 * --min-dur, one cut for every format: a filter on the event stream
 * (kd_range_filter, below), in front of a streamed sink (kd_range_walk_cut)
 * or of the collector for the formats that need every call in memory
 * (kd_dec_collect with d->cut.range set: kd_range_collect).
 *
 * A range is held in CLOCK_REALTIME ns, so one range cuts every file of a
 * merged view at the same moment; each file converts it to its own ticks
 * (kd_range_ticks).  Offsets (+1.5s) count from the earliest window start
 * of all files (the origin of the chrome/perfetto time axis; with one file,
 * its window start).
 *
 * The cut, per file:
 *   - calls, requests, runs and off/on-CPU intervals wholly outside
 *     [from, to] go; those that straddle a cut are clamped to it and
 *     flagged TRUNC_BEGIN / TRUNC_END, as at the window's edges;
 *   - marks outside go;
 *   - the window becomes [from, to] (sinks draw and count from it); the
 *     snapshot's own window is kept in d->cut.full_* for the summary;
 *   - --min-dur drops calls shorter than the duration (measured before the
 *     cut); a dropped call's callees are shorter still and go with it, and
 *     its time stays in its caller's self time (self is recomputed from
 *     the callees that remain, exactly as the builder computes it).
 * Collected, requests' call positions (call_first, call_end, open_at_end)
 * are remapped to the kept calls; the trigger's request index follows its
 * request, and d->cut.trigger_clipped says when the range clips it (explain
 * then does not name it).  Everything but the calls is cut by cut_rest().
 */
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "build.h"
#include "collect.h"
#include "kd_time.h"
#include "range.h"
#include "result.h"
#include "sink.h"
#include "stream.h"
#include "util.h"

/*
 * A call cut by the range keeps no place within the edge's tick from its
 * original records (their order there would be meaningless: the cut moved
 * them): its begin comes first in the range's first tick (sub 0) and its
 * end last in the last one (a sub kd_time_event_ns caps just below the next
 * tick), so calls cut at one edge nest as their depths say, and a call
 * recorded at that tick nests inside them.
 */
#define CLAMPED_END_SUB 0xffffu

/* ---- parsing ------------------------------------------------------------ */

/* "1.5s", "200ms", "50us", "100ns" -> ns; -1 if not a duration. */
static int parse_dur(const char *s, uint64_t *ns)
{
	static const struct { const char *unit; uint64_t mul; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
	};
	uint64_t whole = 0, frac = 0, fdiv = 1;
	const char *p = s;
	int digits = 0;

	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		if (whole > UINT64_MAX / 10 - 1)
			return -1;
		whole = whole * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (fdiv < 1000000000000000000ull) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				fdiv *= 10;
			}
	}
	if (!digits)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(p, units[i].unit)) {
			unsigned __int128 v = (unsigned __int128)whole * units[i].mul +
			                      (unsigned __int128)frac * units[i].mul / fdiv;

			if (v > INT64_MAX)
				return -1;
			*ns = (uint64_t)v;
			return 0;
		}
	return -1;
}

int kd_range_parse_duration(const char *opt, const char *s, uint64_t *ns, char *msg, size_t len)
{
	if (parse_dur(s, ns) == 0)
		return 0;
	snprintf(msg, len, "%s needs a duration with a unit (ns, us, ms or s), such as 200us, "
	         "1.5ms or 2s; '%s' is not one", opt, s);
	return -1;
}

/* "HH:MM:SS[.frac]" -> ns since midnight; "YYYY-MM-DDTHH:MM:SS[.frac]" -> ns
 * since the epoch (*dated = 1).  -1 if neither. */
static int parse_clock(const char *s, int64_t *ns, int *dated)
{
	int y = 0, mo = 0, dd = 0, h, mi, sec, n = 0;
	uint64_t frac = 0, fdiv = 1;
	const char *p;

	*dated = 0;
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &dd, &h, &mi, &sec, &n) == 6 &&
	    n == 19) {
		*dated = 1;
	} else if (sscanf(s, "%2d:%2d:%2d%n", &h, &mi, &sec, &n) != 3 || n != 8) {
		return -1;
	}
	p = s + n;
	if (*p == '.') {
		if (!p[1])
			return -1;
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (fdiv < 1000000000) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				fdiv *= 10;
			}
	}
	if (*p || h > 23 || mi > 59 || sec > 60 || h < 0 || mi < 0 || sec < 0)
		return -1;
	frac = frac * (1000000000 / fdiv);
	if (*dated) {
		struct tm tm = { 0 };
		time_t t;

		if (mo < 1 || mo > 12 || dd < 1 || dd > 31 || y < 1970)
			return -1;
		tm.tm_year = y - 1900;
		tm.tm_mon = mo - 1;
		tm.tm_mday = dd;
		tm.tm_hour = h;
		tm.tm_min = mi;
		tm.tm_sec = sec;
		t = timegm(&tm);
		if (t == (time_t)-1)
			return -1;
		*ns = (int64_t)t * 1000000000 + (int64_t)frac;
	} else {
		*ns = ((int64_t)h * 3600 + mi * 60 + sec) * 1000000000 + (int64_t)frac;
	}
	return 0;
}

int kd_range_parse_when(const char *opt, const char *s, struct kd_when *w, char *msg, size_t len)
{
	memset(w, 0, sizeof(*w));
	w->text = s;
	if (*s == '+') {
		uint64_t ns;

		if (parse_dur(s + 1, &ns) == 0) {
			w->kind = KD_WHEN_OFFSET;
			w->ns = (int64_t)ns;
			return 0;
		}
	} else {
		int dated;

		if (parse_clock(s, &w->ns, &dated) == 0) {
			w->kind = dated ? KD_WHEN_WALL : KD_WHEN_TIME_OF_DAY;
			return 0;
		}
	}
	snprintf(msg, len, "%s needs a UTC time HH:MM:SS[.frac] (as the text timeline prints it), "
	         "a date and time YYYY-MM-DDTHH:MM:SS[.frac], or an offset into the window such "
	         "as +1.5s or +200ms; '%s' is none of these", opt, s);
	return -1;
}

/* ---- resolving ---------------------------------------------------------- */

#define DAY_NS 86400000000000ll

/* A time of day -> wall ns on the day that puts it nearest to t0. */
static int64_t on_day_of(int64_t tod, int64_t t0)
{
	int64_t day = t0 / DAY_NS * DAY_NS, w = day + tod;

	if (w - t0 > DAY_NS / 2)
		w -= DAY_NS;
	else if (t0 - w > DAY_NS / 2)
		w += DAY_NS;
	return w;
}

static int64_t when_ns(const struct kd_when *w, int64_t origin, int64_t t0)
{
	switch (w->kind) {
	case KD_WHEN_OFFSET: return origin + w->ns;
	case KD_WHEN_TIME_OF_DAY: return on_day_of(w->ns, t0);
	default: return w->ns;
	}
}

int kd_range_resolve(struct kd_range *r, struct kd_dec *const *decs, uint32_t n, char *msg,
                     size_t len)
{
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	const struct kd_dec *trig = NULL;
	char a[48], b[48], c[48];

	r->active = r->from.kind || r->to.kind || r->around_set;
	if (!r->active)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		int64_t s, e;

		if (!decs[i])
			continue;
		s = kd_time_wall_ns(decs[i], decs[i]->window_start);
		e = kd_time_wall_ns(decs[i], decs[i]->window_end);
		if (s < lo)
			lo = s;
		if (e > hi)
			hi = e;
		if (!trig && (decs[i]->trigger_req != KD_NONE || decs[i]->snap.have_trigger))
			trig = decs[i];
	}
	if (lo > hi)
		return 0; /* nothing decoded */
	r->from_ns = INT64_MIN;
	r->to_ns = INT64_MAX;
	if (r->around_set) {
		const struct kd_dec_request *q;

		if (!trig) {
			snprintf(msg, len, "--around-trigger: %s no trigger (the snapshot was taken by "
			         "SIGUSR2 or ktrace_snapshot(), not by a slow request); use --from/--to "
			         "to choose a range", n > 1 ? "none of the files has" : "the file has");
			return -1;
		}
		if (trig->trigger_req != KD_NONE) {
			q = &trig->reqs[trig->trigger_req];
			r->from_ns = kd_time_wall_ns(trig, q->begin) - (int64_t)r->around_ns;
			r->to_ns = kd_time_wall_ns(trig, q->end) + (int64_t)r->around_ns;
		} else if (trig->trigger_at.known) { /* not walked yet: the prepare's scan's */
			r->from_ns = kd_time_wall_ns(trig, trig->trigger_at.begin) - (int64_t)r->around_ns;
			r->to_ns = kd_time_wall_ns(trig, trig->trigger_at.end) + (int64_t)r->around_ns;
		} else { /* not walked yet (a streamed sink): the TRIGGER record, in
		          * ticks as the walk would give the request */
			r->from_ns = kd_time_wall_ns(trig, trig->snap.trigger.begin_tsc >> trig->shift) -
			             (int64_t)r->around_ns;
			r->to_ns = kd_time_wall_ns(trig, trig->snap.trigger.end_tsc >> trig->shift) +
			           (int64_t)r->around_ns;
		}
	}
	if (r->from.kind)
		r->from_ns = when_ns(&r->from, lo, lo);
	if (r->to.kind)
		r->to_ns = when_ns(&r->to, lo, r->from.kind ? r->from_ns : hi);
	kd_time_fmt_wall(lo, 0, a, sizeof(a));
	kd_time_fmt_wall(hi, 0, b, sizeof(b));
	if (r->from_ns > r->to_ns) {
		kd_time_fmt_wall(r->from_ns, 0, c, sizeof(c));
		snprintf(msg, len, "the range ends before it begins (from %s); give --to a later "
		         "time than --from (the window is %s .. %s UTC)", c, a, b);
		return -1;
	}
	if (r->from_ns > hi || r->to_ns < lo) {
		kd_time_fmt_wall(r->from_ns > hi ? r->from_ns : r->to_ns, 0, c, sizeof(c));
		snprintf(msg, len, "the range (%s %s) is outside the snapshot's window %s .. %s UTC; "
		         "choose times inside it", r->from_ns > hi ? "from" : "to", c, a, b);
		return -1;
	}
	return 0;
}

/* ---- cutting -------------------------------------------------------------- */

/* The first tick whose wall clock is >= ns (in [lo, hi]; hi if none). */
static uint64_t tick_at(const struct kd_dec *d, int64_t ns, uint64_t lo, uint64_t hi)
{
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (kd_time_wall_ns(d, mid) >= ns)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static int clamp_iv(uint64_t *b, uint64_t *e, uint64_t from, uint64_t to, int *cut_b, int *cut_e)
{
	*cut_b = *cut_e = 0;
	if (*e < from || *b > to)
		return 0;
	if (*b < from) {
		*b = from;
		*cut_b = 1;
	}
	if (*e > to) {
		*e = to;
		*cut_e = 1;
	}
	return 1;
}

void kd_range_cut_intervals(struct kd_dec *d, uint64_t from, uint64_t to)
{
	uint32_t k = 0;
	int cb, ce;

	for (uint32_t i = 0; i < d->nmarks; i++)
		if (d->marks[i].tick >= from && d->marks[i].tick <= to)
			d->marks[k++] = d->marks[i];
	d->nmarks = k;
	k = 0;
	for (uint32_t i = 0; i < d->nruns; i++) {
		struct kd_dec_run q = d->runs[i];

		if (clamp_iv(&q.begin, &q.end, from, to, &cb, &ce))
			d->runs[k++] = q;
	}
	d->nruns = k;
	k = 0;
	for (uint32_t i = 0; i < d->noffcpu; i++) {
		struct kd_dec_offcpu q = d->offcpu[i];

		if (clamp_iv(&q.begin, &q.end, from, to, &cb, &ce))
			d->offcpu[k++] = q;
	}
	d->noffcpu = k;
	if (d->offcpu_first) {
		memset(d->offcpu_first, 0, ((size_t)d->nthreads + 1) * sizeof(*d->offcpu_first));
		for (uint32_t i = 0; i < d->noffcpu; i++)
			d->offcpu_first[d->offcpu[i].thread + 1]++;
		for (uint32_t t = 0; t < d->nthreads; t++)
			d->offcpu_first[t + 1] += d->offcpu_first[t];
	}
	k = 0;
	for (uint32_t i = 0; i < d->noncpu; i++) {
		struct kd_dec_oncpu q = d->oncpu[i];

		if (clamp_iv(&q.begin, &q.end, from, to, &cb, &ce))
			d->oncpu[k++] = q;
	}
	d->noncpu = k;
}

int kd_range_ticks(const struct kd_dec *d, const struct kd_range *r, uint64_t *from,
                   uint64_t *to, uint64_t *min)
{
	*from = d->window_start;
	*to = d->window_end;
	*min = 0;
	if (r->active && (r->from_ns > kd_time_wall_ns(d, d->window_end) ||
	                  r->to_ns < kd_time_wall_ns(d, d->window_start))) {
		/* The range misses this file (another file's window holds it):
		 * nothing of it stays. */
		*from = UINT64_MAX;
		*to = 0;
		return 2;
	}
	if (r->active) {
		if (r->from_ns != INT64_MIN)
			*from = tick_at(d, r->from_ns, d->window_start, d->window_end);
		if (r->to_ns != INT64_MAX) {
			*to = tick_at(d, r->to_ns, d->window_start, d->window_end);
			/* the last tick at or before to_ns */
			if (*to > d->window_start && kd_time_wall_ns(d, *to) > r->to_ns)
				(*to)--;
		}
		if (*to < *from)
			*to = *from;
	}
	if (r->min_dur_ns)
		*min = (uint64_t)(((unsigned __int128)r->min_dur_ns * d->tsc_hz / 1000000000u) >>
		                  d->shift);
	return r->active;
}

/* Everything but the calls: requests (clamped and flagged), marks, runs,
 * off/on-CPU intervals, the scheduling span and the window. */
static void cut_rest(struct kd_dec *d, uint64_t from, uint64_t to)
{
	uint32_t k = 0, trig = KD_NONE;
	int cb, ce;

	d->cut.trigger_clipped = 0;
	for (uint32_t i = 0; i < d->nreqs; i++) {
		struct kd_dec_request q = d->reqs[i];

		if (!clamp_iv(&q.begin, &q.end, from, to, &cb, &ce))
			continue;
		if (cb) {
			q.flags |= KD_REQ_TRUNC_BEGIN;
			q.call_first = KD_NONE;
			q.begin_sub = 0; /* as a cut call's (CLAMPED_END_SUB) */
		}
		if (ce) {
			q.flags |= KD_REQ_TRUNC_END;
			q.call_end = q.open_at_end = KD_NONE;
			q.end_sub = CLAMPED_END_SUB;
		}
		if (i == d->trigger_req) {
			trig = k;
			/* explain names it only if it is wholly in the range */
			d->cut.trigger_clipped = cb || ce;
		}
		d->reqs[k++] = q;
	}
	d->nreqs = k;
	d->trigger_req = trig;
	kd_range_cut_intervals(d, from, to);
	if (d->sched) {
		if (d->sched_from < from)
			d->sched_from = from;
		if (d->sched_to > to)
			d->sched_to = to;
		if (d->sched_to < d->sched_from)
			d->sched_to = d->sched_from;
	}
	if (d->cut.state == 2) {
		d->window_start = d->window_end; /* empty */
		d->sched_from = d->sched_to = d->window_end;
	} else {
		d->window_start = from;
		d->window_end = to;
	}
}

/* The range's ticks and --min-dur for d, noted in d for the summary. */
static int range_begin(struct kd_dec *d, const struct kd_range *r, uint64_t *from,
                       uint64_t *to, uint64_t *min)
{
	d->cut.full_start = d->window_start;
	d->cut.full_end = d->window_end;
	d->cut.state = kd_range_ticks(d, r, from, to, min);
	if (r->min_dur_ns) {
		d->cut.min_dur_ns = r->min_dur_ns;
		d->cut.min_dur_ticks = *min;
	}
	return d->cut.state || *min;
}

void kd_range_note(FILE *f, const struct kd_dec *d)
{
	char a[48], b[48], c[32];

	if (d->cut.state) {
		kd_time_fmt_wall(kd_time_wall_ns(d, d->cut.full_start), 0, a, sizeof(a));
		kd_time_fmt_wall(kd_time_wall_ns(d, d->cut.full_end), 0, b, sizeof(b));
		if (d->cut.state == 2)
			fprintf(f, "range:     misses the snapshot's window %s .. %s UTC: all %" PRIu64
			           " calls left out\n", a, b, d->cut.calls_out);
		else
			fprintf(f, "range:     cut from the snapshot's window %s .. %s UTC: everything "
			           "below is inside the range; %" PRIu64 " calls outside it left out, "
			           "calls and requests across its edges cut there and flagged\n",
			        a, b, d->cut.calls_out);
	}
	if (d->cut.min_dur_ns) {
		kd_time_fmt_dur(d->cut.min_dur_ns, c, sizeof(c));
		fprintf(f, "min-dur:   %" PRIu64 " calls shorter than %s left out of the timeline; "
		           "their time stays in their callers' self time\n", d->cut.min_dur_dropped, c);
	}
}

/* ---- the same cut as a stream filter (stream.h) ------------------------- */

/*
 * For sinks that consume the event stream: the calls kd_range_apply would
 * keep, with the same clamped times, flags and self times, in the stream's
 * order.  A call is decided as soon as the stream shows enough:
 *   - at its BEGIN: dropped if it begins after the range; kept if it begins
 *     inside it and no --min-dur is given;
 *   - at any later event of tick t: kept once t >= from and t - begin >=
 *     min (it overlaps the range and is long enough whatever its end);
 *   - at its END otherwise: kept if it ends in or after the range and lasts
 *     at least min.
 * A kept call's callers are kept too (they enclose it and last longer), so
 * depths do not change.  While a call is undecided, the events after its
 * BEGIN wait in a queue (in order; the call's BEGIN is a placeholder), so
 * order is kept.  A dropped call's placeholder and its callees' leave the
 * queue's tail at once, so the queue holds the undecided calls' BEGINs (at
 * most the stack depth) and the marks and requests inside the range that
 * wait behind one (those of at most --min-dur of one thread): never the
 * calls before the range.  Marks and requests outside the range go;
 * THREAD_BEGIN/END pass.  Dropped calls are counted as kd_range_apply
 * counts them (calls_out, min_dropped).
 */
enum { RF_PENDING = 0, RF_KEPT = 1, RF_DROPPED = 2 };

struct rf_frame {
	struct kd_ev begin;       /* the input BEGIN */
	uint64_t kids;            /* ticks: kept children's clamped durations */
	uint32_t q;               /* queue index of its BEGIN placeholder, or KD_NONE */
	uint32_t state;
	uint32_t pos;             /* the builder's call position (with track) */
};

struct rf_item {
	struct kd_ev ev;
	uint32_t wait;            /* 1: a PENDING BEGIN placeholder; 2: void */
};

static void rf_out(struct kd_range_filter *f, const struct kd_dec *d, const struct kd_ev *e)
{
	if (f->next.ev)
		f->next.ev(f->next.ctx, d, e);
}

/* Send or queue e (behind an undecided call, it waits). */
static uint32_t rf_put(struct kd_range_filter *f, const struct kd_dec *d, const struct kd_ev *e,
                       uint32_t wait)
{
	struct rf_item *q;

	if (!wait && f->qn == f->qhead) {
		rf_out(f, d, e);
		return KD_NONE;
	}
	if (kd_grow(&f->q, &f->qcap, f->qn, sizeof(struct rf_item), "the range filter"))
		kd_util_oom("the range filter", SIZE_MAX);
	q = &((struct rf_item *)f->q)[f->qn];
	q->ev = *e;
	q->wait = wait;
	return f->qn++;
}

/* Forward the queue's head up to the first undecided placeholder. */
static void rf_flush(struct kd_range_filter *f, const struct kd_dec *d)
{
	struct rf_item *q = f->q;

	while (f->qhead < f->qn && q[f->qhead].wait != 1) {
		if (!q[f->qhead].wait)
			rf_out(f, d, &q[f->qhead].ev);
		f->qhead++;
	}
	if (f->qhead == f->qn)
		f->qhead = f->qn = 0;
}

static void rf_keep(struct kd_range_filter *f, struct rf_frame *fr)
{
	struct rf_item *q = f->q;

	fr->state = RF_KEPT;
	if (f->track)
		f->in_kept[fr->pos] = 1;
	if (fr->begin.tick < f->from) {
		fr->begin.tick = f->from;
		fr->begin.sub = 0; /* first in the range's first tick (above) */
		fr->begin.flags |= KD_CALL_TRUNC_BEGIN;
	}
	if (fr->q != KD_NONE) {
		q[fr->q].ev = fr->begin;
		q[fr->q].wait = 0;
	}
}

/* Calls the stream's time t decides: from the outermost pending one in. */
static void rf_decide(struct kd_range_filter *f, uint64_t t)
{
	struct rf_frame *st = f->stack;

	if (t < f->from)
		return;
	for (uint32_t i = f->undecided; i < f->depth; i++) {
		if (st[i].state != RF_PENDING)
			continue;
		if (t - st[i].begin.tick < f->min)
			break; /* inner ones began later still */
		rf_keep(f, &st[i]);
	}
	while (f->undecided < f->depth && st[f->undecided].state != RF_PENDING)
		f->undecided++;
}

static void rf_ev(void *ctx, const struct kd_dec *d, const struct kd_ev *e)
{
	struct kd_range_filter *f = ctx;
	struct rf_frame *fr;
	struct kd_ev o;

	if (d != f->d) {
		f->d = d;
		kd_range_ticks(d, f->r, &f->from, &f->to, &f->min);
	}
	switch (e->kind) {
	case KD_EV_THREAD_BEGIN:
	case KD_EV_THREAD_END:
		rf_flush(f, d);
		f->depth = f->undecided = 0;
		rf_out(f, d, e);
		return;
	case KD_EV_CALL_BEGIN:
		rf_decide(f, e->tick);
		if (kd_grow(&f->stack, &f->cap, f->depth, sizeof(*fr), "the range filter"))
			kd_util_oom("the range filter", SIZE_MAX);
		fr = &((struct rf_frame *)f->stack)[f->depth++];
		fr->begin = *e;
		fr->kids = 0;
		fr->q = KD_NONE;
		if (f->track) {
			if (kd_grow(&f->in_parent, &f->cap_parent, f->npos, sizeof(*f->in_parent),
			            "the range filter") ||
			    kd_grow(&f->in_kept, &f->cap_kept, f->npos, 1, "the range filter"))
				kd_util_oom("the range filter", SIZE_MAX);
			fr->pos = f->npos++;
			f->in_parent[fr->pos] = f->depth > 1 ? fr[-1].pos : KD_NONE;
			f->in_kept[fr->pos] = 0;
		}
		if (e->tick > f->to ||
		    (f->depth > 1 && fr[-1].state == RF_DROPPED)) {
			fr->state = RF_DROPPED;
		} else if (e->tick >= f->from && !f->min) {
			fr->state = RF_KEPT;
			if (f->track)
				f->in_kept[fr->pos] = 1;
			rf_flush(f, d); /* what rf_decide just released goes first */
			rf_put(f, d, e, 0);
		} else {
			fr->state = RF_PENDING;
			fr->q = rf_put(f, d, e, 1);
		}
		if (f->undecided == f->depth - 1 && fr->state != RF_PENDING)
			f->undecided = f->depth;
		return;
	case KD_EV_CALL_END: {
		uint64_t b, en, dur;

		if (!f->depth)
			return;
		/* Its end decides it (and keeps its pending callers with it). */
		rf_decide(f, e->tick);
		fr = &((struct rf_frame *)f->stack)[f->depth - 1];
		if (fr->state == RF_PENDING)
			fr->state = RF_DROPPED;
		if (fr->state == RF_DROPPED) {
			struct rf_item *q = f->q;

			/* Counted as kd_range_apply counts (duration before the cut). */
			if (f->min && e->tick - e->begin < f->min)
				f->min_dropped++;
			else
				f->calls_out++;
			if (fr->q != KD_NONE)
				q[fr->q].wait = 2;
			/* Its callees' placeholders are void too: trim them off the
			 * tail, so the queue never holds dropped calls (only marks and
			 * requests behind a call still undecided stay). */
			while (f->qn > f->qhead && q[f->qn - 1].wait == 2)
				f->qn--;
			f->depth--;
			if (f->undecided > f->depth)
				f->undecided = f->depth;
			rf_flush(f, d);
			return;
		}
		o = *e;
		b = fr->begin.tick; /* clamped by rf_keep / at BEGIN */
		en = e->tick > f->to ? f->to : e->tick;
		if (en < b)
			en = b;
		if (e->tick > f->to) {
			o.flags |= KD_CALL_TRUNC_END;
			o.sub = CLAMPED_END_SUB;
		}
		o.flags |= fr->begin.flags & KD_CALL_TRUNC_BEGIN;
		o.tick = en;
		o.begin = b;
		dur = en - b;
		o.self = dur > fr->kids ? dur - fr->kids : 0;
		f->depth--;
		if (f->depth)
			fr[-1].kids += dur;
		if (f->undecided > f->depth)
			f->undecided = f->depth;
		rf_put(f, d, &o, 0);
		rf_flush(f, d);
		return;
	}
	default: /* MARK, REQ_*: inside the range only */
		rf_decide(f, e->tick);
		if (e->tick >= f->from && e->tick <= f->to)
			rf_put(f, d, e, 0);
		rf_flush(f, d);
		return;
	}
}

struct kd_sink kd_range_filter(struct kd_range_filter *f, const struct kd_range *r,
                               struct kd_sink next)
{
	memset(f, 0, sizeof(*f));
	f->r = r;
	f->next = next;
	return (struct kd_sink){ rf_ev, f };
}

void kd_range_filter_free(struct kd_range_filter *f)
{
	free(f->stack);
	free(f->q);
	free(f->in_parent);
	free(f->in_kept);
	f->stack = f->q = NULL;
	f->in_parent = NULL;
	f->in_kept = NULL;
}

/* Requests' call positions (the builder's, counted before the filter) ->
 * positions among the kept calls, as the collector behind the filter
 * numbers them: call_first/call_end the first kept call at or after it,
 * open_at_end its nearest kept caller. */
static void rf_remap_reqs(struct kd_dec *d, const struct kd_range_filter *f)
{
	uint32_t n = f->npos, k = 0;
	uint32_t *map = kd_xmalloc(((size_t)n + 1) * sizeof(*map), "the range cut");

	for (uint32_t i = 0; i < n; i++) {
		map[i] = k;
		k += f->in_kept[i];
	}
	map[n] = k;
	for (uint32_t i = 0; i < d->nreqs; i++) {
		struct kd_dec_request *q = &d->reqs[i];
		uint32_t p = q->open_at_end;

		q->call_first = q->call_first == KD_NONE ? KD_NONE : map[q->call_first < n ? q->call_first : n];
		q->call_end = q->call_end == KD_NONE ? KD_NONE : map[q->call_end < n ? q->call_end : n];
		for (uint32_t s = 0; p < n && !f->in_kept[p] && s <= n; s++)
			p = f->in_parent[p];
		q->open_at_end = p < n ? map[p] : KD_NONE;
	}
	free(map);
}

uint64_t kd_range_start(const struct kd_dec *d)
{
	uint64_t from, to, min;

	if (!d->cut.range || d->cut.walked)
		return d->window_start;
	switch (kd_range_ticks(d, d->cut.range, &from, &to, &min)) {
	case 1: return from;
	case 2: return d->window_end;
	default: return d->window_start;
	}
}

/*
 * A walk with d->cut.range applied on the stream (main.c sets it for the
 * streamed formats): the filter above cuts the calls, then the rest is cut
 * as kd_range_apply cuts it (requests, marks, runs, intervals, window).
 * Requests' recorded-order positions (call_first ...) count the calls
 * before the filter, so they are cleared.  A second walk starts again from
 * the snapshot's window.
 */
static int walk_cut(struct kd_dec *d, struct kd_sink sink, int track, struct kd_dec_error *err)
{
	const struct kd_range *r = d->cut.range;
	struct kd_range_filter f;
	uint64_t from, to, min;
	int rc;

	if (!r || !(r->active || r->min_dur_ns))
		return kd_build_walk(d, sink, err);
	if (d->cut.walked) {
		d->window_start = d->cut.full_start;
		d->window_end = d->cut.full_end;
	}
	range_begin(d, r, &from, &to, &min);
	d->cut.calls_out = d->cut.min_dur_dropped = 0;
	sink = kd_range_filter(&f, r, sink);
	f.track = track;
	rc = kd_build_walk(d, sink, err);
	d->cut.calls_out = f.calls_out;
	d->cut.min_dur_dropped = f.min_dropped;
	if (!rc && track)
		rf_remap_reqs(d, &f);
	kd_range_filter_free(&f);
	if (rc)
		return rc;
	if (!track)
		for (uint32_t i = 0; i < d->nreqs; i++)
			d->reqs[i].call_first = d->reqs[i].call_end = d->reqs[i].open_at_end = KD_NONE;
	if (d->cut.state)
		cut_rest(d, from, to);
	d->cut.walked = 1;
	return 0;
}

int kd_range_walk_cut(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err)
{
	return walk_cut(d, sink, 0, err);
}

int kd_range_walk_cut_pos(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err)
{
	return walk_cut(d, sink, 1, err);
}

/*
 * The collector behind the range filter (kd_dec_collect when d->cut.range is
 * set): d->calls are the cut calls, requests' call positions remapped to
 * them.  d->cut.range stays: a later walk (a streamed sink on a collected
 * file) is cut the same way.
 */
int kd_range_collect(struct kd_dec *d, struct kd_collector *c, struct kd_dec_error *err)
{
	return walk_cut(d, kd_collector_sink(c), 1, err);
}

void kd_range_apply(struct kd_dec *d, const struct kd_range *r)
{
	struct kd_dec_error err;
	struct kd_collector c;
	int rc;

	d->cut.range = r;
	kd_collector_init(&c, d);
	rc = kd_range_collect(d, &c, &err);
	kd_collector_free(&c);
	if (!rc)
		d->opts.stream = 0;
	if (rc) {
		char msg[512];

		kd_util_error_format(&err, d->file, msg, sizeof(msg));
		fprintf(stderr, "%s\n", msg);
	}
}
