/*
 * out-chrome.c - Chrome trace event JSON (--format chrome), for
 * ui.perfetto.dev and chrome://tracing.
 *
 * Per snapshot file: process pid = the snapshot's pid, one track per thread
 * (tid = kernel tid) with an "X" event per call, "i" events for marks,
 * "X" events with cat "request" for requests, and a global "i" event for
 * the trigger.  A second pseudo-process, pid + KD_CHROME_CORES_PID,
 * "CPU cores", has one track per core with the runs of each thread there.
 *
 * Calls come from the event stream (stream.h), so memory does not grow with
 * the number of calls: an "X" event is written at each call's end, with the
 * begin time kept on a per-thread stack.
 *
 * Times: the one conversion (time.c, ANCHORS) of every format, plus the
 * within-tick interpolation: a thread's events of one tick are spread 1 ns
 * apart in recorded order (kd_time_event_ns), so that a zero-length child
 * starts after its parent, ends before it, and siblings are strictly
 * ordered: the viewer nests exactly what was recorded.  otherData says so.
 * dur is end ts - begin ts (both rounded the same way), so a callee never
 * ends after its caller.
 *
 * ts and dur are microseconds with 3 decimals, relative to base_wall_ns (the
 * earliest window start of all files), so several snapshots line up by wall
 * clock; otherData and each process's labels carry the wall-clock origin.
 */
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "kd_time.h"
#include "names.h"
#include "out-chrome.h"
#include "result.h"
#include "sink.h"
#include "stream.h"
#include "util.h"

#define KD_CHROME_CORES_PID 1000000000ll

static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* Microseconds with 3 decimals from signed ns. */
static void jus(FILE *f, int64_t ns)
{
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;

	fprintf(f, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", a / 1000, (unsigned)(a % 1000));
}

static void sep(struct kd_chrome *c)
{
	if (!c->first)
		fputs(",\n", c->f);
	c->first = 0;
}

void kd_out_chrome_begin(struct kd_chrome *c, FILE *f, int64_t base_wall_ns)
{
	char w[64];

	c->f = f;
	c->first = 1;
	c->base_wall_ns = base_wall_ns;
	c->have_base = 1;
	kd_time_fmt_wall(base_wall_ns, 1, w, sizeof(w));
	fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"ktrace-decode\","
	           "\"ts0_wall_clock_utc\":\"%s\",\"ts0_realtime_ns\":%" PRId64 ","
	           "\"time_within_tick\":\"interpolated: a thread's events of one clock tick "
	           "are placed 1 ns apart in recorded order\"},\n"
	           "\"traceEvents\":[\n", w, base_wall_ns);
}

void kd_out_chrome_end(struct kd_chrome *c)
{
	fputs("\n]}\n", c->f);
}

static int64_t clamp64(__int128 v)
{
	return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

/* ns since the trace origin of an absolute tick of d (saturating): the one
 * conversion (time.c); origin is unused (kept for the call sites). */
static int64_t ts_ns(const struct kd_chrome *c, const struct kd_dec *d, int64_t origin,
                     uint64_t tick)
{
	(void)origin;
	return clamp64((__int128)kd_time_wall_ns(d, tick) - c->base_wall_ns);
}

/* ... of an event: the tick's time plus its place within the tick. */
static int64_t ev_ns(const struct kd_chrome *c, const struct kd_dec *d, uint64_t tick,
                     uint32_t sub)
{
	return clamp64((__int128)kd_time_event_ns(d, tick, sub) - c->base_wall_ns);
}

/* b - a, saturating */
static int64_t span_ns(int64_t a, int64_t b)
{
	return clamp64((__int128)b - a);
}

static void meta(struct kd_chrome *c, const char *what, int64_t pid, int64_t tid,
                 const char *name)
{
	sep(c);
	fprintf(c->f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%" PRId64 ",\"tid\":%" PRId64
	              ",\"args\":{\"name\":", what, pid, tid);
	jstr(c->f, name);
	fputs("}}", c->f);
}

static int64_t tid_of(const struct kd_dec *d, uint32_t th)
{
	const struct kd_dec_thread *t = &d->threads[th];

	/* Threads missing from THREADS get a tid no kernel uses. */
	return t->known ? t->tid : -(int64_t)t->slot - 1;
}

/* A "thread NAME (TID)" slice on core cpu's track, up to its args. */
static void core_slice(struct kd_chrome *c, const struct kd_dec *d, int64_t cpid,
                       int64_t origin, uint32_t cpu, uint32_t thread, uint64_t begin, uint64_t end)
{
	char buf[128];

	snprintf(buf, sizeof(buf), "thread %s (%" PRId64 ")", d->threads[thread].name,
	         tid_of(d, thread));
	sep(c);
	fputs("{\"ph\":\"X\",\"cat\":\"cpu\",\"name\":", c->f);
	jstr(c->f, buf);
	fprintf(c->f, ",\"pid\":%" PRId64 ",\"tid\":%" PRIu32 ",\"ts\":", cpid, cpu);
	jus(c->f, ts_ns(c, d, origin, begin));
	fputs(",\"dur\":", c->f);
	jus(c->f, span_ns(ts_ns(c, d, origin, begin), ts_ns(c, d, origin, end)));
}

/* Exact core occupancy from the context switches: a slice per run of one
 * of the process's threads, and "other" between them (another process or
 * idle).  Cores the snapshot has no ring for get their track here too. */
static void cores_from_switches(struct kd_chrome *c, const struct kd_dec *d, int64_t cpid,
                                int64_t origin, const struct kd_out_opts *o)
{
	FILE *f = c->f;
	char lbl[64];

	for (uint32_t i = 0; i < d->noncpu; i++) {
		const struct kd_dec_oncpu *r = &d->oncpu[i];
		uint64_t prev = i > 0 && d->oncpu[i - 1].cpu == r->cpu ? d->oncpu[i - 1].end
		                                                        : d->sched_from;

		if (r->begin > prev) {
			sep(c);
			fprintf(f, "{\"ph\":\"X\",\"cat\":\"cpu\",\"name\":\"other\",\"pid\":%" PRId64
			           ",\"tid\":%" PRIu32 ",\"ts\":", cpid, r->cpu);
			jus(f, ts_ns(c, d, origin, prev));
			fputs(",\"dur\":", f);
			jus(f, span_ns(ts_ns(c, d, origin, prev), ts_ns(c, d, origin, r->begin)));
			fputs(",\"args\":{\"what\":\"another process or idle\"}}", f);
		}
		if (o && o->have_tid && d->threads[r->thread].tid != o->tid)
			continue;
		core_slice(c, d, cpid, origin, r->cpu, r->thread, r->begin, r->end);
		fputs(",\"args\":{\"source\":\"context switches\",\"thread\":", f);
		jstr(f, kd_names_thread(d, r->thread, lbl, sizeof(lbl)));
		fputs("}}", f);
	}
}

/* A call or request boundary inside one of its thread's off-CPU intervals
 * (at the tick it went off or came back, mostly: the switch times are
 * mapped onto the rings' ticks, and events of one tick are spread 1 ns
 * apart). */
struct off_hit {
	uint32_t off;             /* index in d->offcpu (found again after the
	                             walk: a range cut may change them) */
	uint32_t thread;          /* thread index */
	uint64_t tick;            /* the event's tick */
	int64_t ns;               /* the event's ts (ns since the trace origin) */
};

/* The calls, from the stream: one "X" per call, written at its end. */
struct chrome_walk {
	struct kd_chrome *c;
	const struct kd_out_opts *o;
	int64_t pid;
	int64_t *begin;           /* ns: open calls' begin times */
	size_t cap;
	uint32_t depth;
	struct off_hit *hits;     /* boundaries inside off-CPU intervals */
	size_t nhits, caphits;
};

/* The off-CPU interval of thread th containing tick, or KD_NONE. */
static uint32_t off_at(const struct kd_dec *d, uint32_t th, uint64_t tick)
{
	uint32_t lo, hi;

	if (!d->sched || !d->offcpu_first || th >= d->nthreads)
		return KD_NONE;
	lo = d->offcpu_first[th];
	hi = d->offcpu_first[th + 1];
	while (lo < hi) { /* first with end >= tick */
		uint32_t mid = lo + (hi - lo) / 2;

		if (d->offcpu[mid].end < tick)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < d->offcpu_first[th + 1] && d->offcpu[lo].begin <= tick ? lo : KD_NONE;
}

static void off_hit(struct chrome_walk *w, const struct kd_dec *d, uint32_t th, uint64_t tick,
                    int64_t ns)
{
	uint32_t i = off_at(d, th, tick);

	if (i == KD_NONE)
		return;
	if (w->nhits >= w->caphits &&
	    kd_grow(&w->hits, &w->caphits, w->nhits, sizeof(*w->hits), "the chrome trace"))
		kd_util_oom("the chrome trace", SIZE_MAX);
	w->hits[w->nhits++] = (struct off_hit){ i, th, tick, ns };
}

static int cmp_hit(const void *a, const void *b)
{
	const struct off_hit *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->ns < y->ns ? -1 : x->ns > y->ns;
}

static void chrome_ev(void *ctx, const struct kd_dec *d, const struct kd_ev *e)
{
	struct chrome_walk *w = ctx;
	struct kd_chrome *c = w->c;
	FILE *f = c->f;
	int64_t b, t;

	if (w->o && w->o->have_tid && d->threads[e->thread].tid != w->o->tid)
		return;
	switch (e->kind) {
	case KD_EV_THREAD_BEGIN:
		w->depth = 0;
		return;
	case KD_EV_CALL_BEGIN:
		if (w->depth >= w->cap &&
		    kd_grow(&w->begin, &w->cap, w->depth, sizeof(*w->begin), "the chrome trace"))
			kd_util_oom("the chrome trace", SIZE_MAX);
		w->begin[w->depth++] = ev_ns(c, d, e->tick, e->sub);
		off_hit(w, d, e->thread, e->tick, w->begin[w->depth - 1]);
		return;
	case KD_EV_CALL_END:
		if (!w->depth)
			return;
		b = w->begin[--w->depth];
		t = ev_ns(c, d, e->tick, e->sub);
		off_hit(w, d, e->thread, e->tick, t);
		break;
	default:
		return;
	}
	sep(c);
	fputs("{\"ph\":\"X\",\"cat\":", f);
	fputs((e->flags & KD_CALL_SPAN) ? "\"span\"" : "\"function\"", f);
	fputs(",\"name\":", f);
	jstr(f, kd_names_func_short(d, e->func));
	fprintf(f, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", w->pid, tid_of(d, e->thread));
	jus(f, b);
	fputs(",\"dur\":", f);
	jus(f, span_ns(b, t));
	{
		/* args: the full name where the slice shows a short one. */
		const char *full = kd_names_func(d, e->func);
		int trunc = (e->flags & (KD_CALL_TRUNC_BEGIN | KD_CALL_TRUNC_END)) != 0;
		int longname = full != kd_names_func_short(d, e->func);
		int held = (e->flags & KD_CALL_HELD) != 0;

		if (trunc || longname || held)
			fputs(",\"args\":{", f);
		/* entered in a kept request's held run: the cpu it was written to */
		if (held)
			fprintf(f, "\"held\":true%s", trunc || longname ? "," : "");
		if (longname) {
			fputs("\"full_name\":", f);
			jstr(f, full);
		}
		if (trunc)
			fprintf(f, "%s\"truncated_begin\":%s,\"truncated_end\":%s,\"exit_lost\":%s",
			        longname ? "," : "",
			        (e->flags & KD_CALL_TRUNC_BEGIN) ? "true" : "false",
			        (e->flags & KD_CALL_TRUNC_END) ? "true" : "false",
			        (e->flags & KD_CALL_EXIT_LOST) ? "true" : "false");
		if (trunc || longname || held)
			fputc('}', f);
	}
	fputc('}', f);
}

/* An off-CPU slice [b, e] (ns since the trace origin). */
static void off_slice(struct kd_chrome *c, int64_t pid, int64_t tid, uint32_t why, int64_t b,
                      int64_t e)
{
	sep(c);
	fprintf(c->f, "{\"ph\":\"X\",\"cat\":\"sched\",\"name\":\"off-CPU: %s\"",
	        why == KD_OFF_PREEMPTED ? "preempted" : "blocked");
	fprintf(c->f, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid);
	jus(c->f, b);
	fputs(",\"dur\":", c->f);
	jus(c->f, span_ns(b, e));
	fputc('}', c->f);
}

void kd_out_chrome_file(struct kd_chrome *c, struct kd_dec *d, int64_t pid,
                        const struct kd_out_opts *o)
{
	FILE *f = c->f;
	int64_t origin = span_ns(c->base_wall_ns, kd_time_wall_ns(d, kd_range_start(d)));
	int64_t cpid = pid + KD_CHROME_CORES_PID;
	const char *exe = strrchr(d->snap.info.exe, '/');
	char buf[512], w[64], nb[64], lbl[64];
	struct chrome_walk hw = { 0 };

	exe = exe ? exe + 1 : (d->snap.info.exe[0] ? d->snap.info.exe : "process");
	snprintf(buf, sizeof(buf), "%s (%" PRIu32 ")", exe, d->snap.info.pid);
	meta(c, "process_name", pid, 0, buf);
	kd_time_fmt_wall(kd_time_wall_ns(d, kd_range_start(d)) /* cut by the walk below */, 1, w, sizeof(w));
	snprintf(buf, sizeof(buf), "host %s; %s; window start %s UTC; reason %s",
	         d->snap.info.hostname[0] ? d->snap.info.hostname : "?", d->file, w,
	         d->snap.info.reason);
	if (d->snap.nmuted) {   /* never silently: muted time is in callers' self time */
		size_t k = strlen(buf);
		snprintf(buf + k, sizeof(buf) - k, "; self time includes muted calls: ");
		k = strlen(buf);
		kd_budget_muted_list(d, buf + k, sizeof(buf) - k);
	}
	meta(c, "process_labels", pid, 0, buf);
	sep(c);
	fprintf(f, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%" PRId64
	           ",\"tid\":0,\"args\":{\"sort_index\":0}}", pid);
	for (uint32_t i = 0; i < d->nthreads; i++) {
		if (!d->threads[i].events &&
		    !(d->offcpu_first && d->offcpu_first[i + 1] > d->offcpu_first[i]))
			continue;
		snprintf(buf, sizeof(buf), "%s (%" PRId64 ")", d->threads[i].name, tid_of(d, i));
		meta(c, "thread_name", pid, tid_of(d, i), buf);
	}

	{
		struct chrome_walk cw = { c, o, pid, NULL, 0, 0, NULL, 0, 0 };
		struct kd_dec_error err;

		if (!d->opts.stream) {
			/* Opened with its calls (a range or several files cut them,
			 * range.c, merge.c): each call is one begin and one end. */
			for (uint32_t i = 0; i < d->ncalls; i++) {
				const struct kd_dec_call *k = &d->calls[i];
				struct kd_ev e = { 0 };

				e.kind = KD_EV_CALL_BEGIN;
				e.thread = k->thread;
				e.func = k->func;
				e.depth = k->depth;
				e.core = k->core;
				e.flags = k->flags;
				e.tick = k->begin;
				e.sub = k->begin_sub;
				chrome_ev(&cw, d, &e);
				e.kind = KD_EV_CALL_END;
				e.tick = k->end;
				e.begin = k->begin;
				e.self = k->self;
				e.sub = k->end_sub;
				chrome_ev(&cw, d, &e);
			}
		} else if (kd_range_walk_cut(d, (struct kd_sink){ chrome_ev, &cw }, &err)) {
			kd_util_oom("the chrome trace", 0);
		}
		free(cw.begin);
		hw = cw;
	}
	for (uint32_t i = 0; i < d->nmarks; i++) {
		const struct kd_dec_mark *m = &d->marks[i];

		if (o && o->have_tid && d->threads[m->thread].tid != o->tid)
			continue;
		sep(c);
		fputs("{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"mark\",\"name\":", f);
		jstr(f, kd_names_id(d, m->name, nb, sizeof(nb)));
		fprintf(f, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid_of(d, m->thread));
		jus(f, ev_ns(c, d, m->tick, m->sub));
		fprintf(f, ",\"args\":{\"value\":%" PRIu64 "}}", m->value);
	}
	for (uint32_t i = 0; i < d->nreqs; i++) {
		const struct kd_dec_request *r = &d->reqs[i];

		if (o && o->have_tid && d->threads[r->thread].tid != o->tid)
			continue;
		snprintf(buf, sizeof(buf), "request:%s", kd_names_id(d, r->kind, nb, sizeof(nb)));
		sep(c);
		fputs("{\"ph\":\"X\",\"cat\":\"request\",\"name\":", f);
		jstr(f, buf);
		fprintf(f, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid_of(d, r->thread));
		jus(f, ev_ns(c, d, r->begin, r->begin_sub));
		fputs(",\"dur\":", f);
		jus(f, span_ns(ev_ns(c, d, r->begin, r->begin_sub), ev_ns(c, d, r->end, r->end_sub)));
		fprintf(f, ",\"args\":{\"id\":%" PRIu64
		           ",\"truncated_begin\":%s,\"truncated_end\":%s%s",
		        r->id, (r->flags & KD_REQ_TRUNC_BEGIN) ? "true" : "false",
		        (r->flags & KD_REQ_TRUNC_END) ? "true" : "false",
		        (r->flags & KD_REQ_TRIGGER) ? ",\"trigger\":true" : "");
		if (r->flags & (KD_REQ_NUMBERED | KD_REQ_USER_ID)) {
			char lb[128];

			/* format 2: what a person calls it ("get #1234") */
			fputs(",\"request\":", f);
			jstr(f, kd_names_req(d, r, lb, sizeof(lb)));
		}
		fputs("}}", f);
	}
	if (d->snap.have_trigger) {
		const struct ktrace_trigger_rec *t = &d->snap.trigger;
		char a[32], b[32];
		uint64_t end_tick = d->trigger_req != KD_NONE ? d->reqs[d->trigger_req].end
		                                                      : t->end_tsc >> d->shift;
		int64_t tid = d->trigger_req != KD_NONE ?
		              tid_of(d, d->reqs[d->trigger_req].thread) : t->tid;

		kd_time_fmt_dur(t->duration_ns, a, sizeof(a));
		kd_time_fmt_dur(t->threshold_ns, b, sizeof(b));
		snprintf(buf, sizeof(buf), "TRIGGER: slow %s request (%s > %s)", t->kind, a, b);
		sep(c);
		fputs("{\"ph\":\"i\",\"s\":\"g\",\"cat\":\"trigger\",\"name\":", f);
		jstr(f, buf);
		fprintf(f, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid);
		jus(f, d->trigger_req != KD_NONE ?
		       ev_ns(c, d, end_tick, d->reqs[d->trigger_req].end_sub) :
		       ts_ns(c, d, origin, end_tick));
		fprintf(f, ",\"args\":{\"request_id\":%" PRIu64 "}}", t->request_id);
	}

	/* Off-CPU intervals on each thread's track: they nest inside the
	 * call that blocked, so they are cut to the window (calls still
	 * running at its end end there) and kept clear of every call and
	 * request boundary of their thread (hits): one at the tick the thread
	 * went off moves the begin after it, one at the tick it came back
	 * moves the end before it, one in between (the switch times are
	 * mapped onto the rings' clock) splits the interval there. */
	for (uint32_t i = 0; i < d->nreqs; i++) {
		const struct kd_dec_request *r = &d->reqs[i];

		off_hit(&hw, d, r->thread, r->begin, ev_ns(c, d, r->begin, r->begin_sub));
		off_hit(&hw, d, r->thread, r->end, ev_ns(c, d, r->end, r->end_sub));
	}
	for (size_t i = 0; i < hw.nhits; i++) /* the walk may have cut d->offcpu */
		hw.hits[i].off = off_at(d, hw.hits[i].thread, hw.hits[i].tick);
	if (hw.nhits)
		qsort(hw.hits, hw.nhits, sizeof(*hw.hits), cmp_hit);
	for (uint32_t i = 0, h = 0; i < d->noffcpu; i++) {
		const struct kd_dec_offcpu *q = &d->offcpu[i];
		uint64_t bt = q->begin < d->window_start ? d->window_start : q->begin;
		uint64_t et = q->end > d->window_end ? d->window_end : q->end;
		int64_t cur, end, bt1, et0;

		while (h < hw.nhits && hw.hits[h].off < i)
			h++;
		if (o && o->have_tid && d->threads[q->thread].tid != o->tid)
			continue;
		if (et <= bt)
			continue;
		cur = ts_ns(c, d, origin, bt);
		end = ts_ns(c, d, origin, et);
		bt1 = ts_ns(c, d, origin, bt + 1);
		et0 = end;
		for (; h < hw.nhits && hw.hits[h].off == i; h++) {
			int64_t x = hw.hits[h].ns;

			if (x < cur)
				continue;
			if (x >= et0) { /* at the tick it came back: end before it */
				if (x - 1 < end)
					end = x - 1;
				break;
			}
			if (x < bt1) { /* at the tick it went off: begin after it */
				cur = x + 1;
				continue;
			}
			if (x - 1 > cur) /* in between: the piece before it */
				off_slice(c, pid, tid_of(d, q->thread), q->why, cur, x - 1);
			cur = x + 1;
		}
		if (end > cur)
			off_slice(c, pid, tid_of(d, q->thread), q->why, cur, end);
	}
	free(hw.hits);

	/* CPU cores pseudo-process. */
	meta(c, "process_name", cpid, 0, "CPU cores");
	sep(c);
	fprintf(f, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%" PRId64
	           ",\"tid\":0,\"args\":{\"sort_index\":1}}", cpid);
	for (uint32_t i = 0; i < d->snap.ncores; i++) {
		snprintf(buf, sizeof(buf), "cpu %" PRIu32, d->snap.cores[i].cpu);
		meta(c, "thread_name", cpid, d->snap.cores[i].cpu, buf);
	}
	if (d->sched) {
		cores_from_switches(c, d, cpid, origin, o);
		return;
	}
	for (uint32_t i = 0; i < d->nruns; i++) {
		const struct kd_dec_run *r = &d->runs[i];

		if (o && o->have_tid && d->threads[r->thread].tid != o->tid)
			continue;
		core_slice(c, d, cpid, origin, d->snap.cores[r->core].cpu, r->thread, r->begin, r->end);
		fprintf(f, ",\"args\":{\"events\":%" PRIu64 ",\"thread\":", r->events);
		jstr(f, kd_names_thread(d, r->thread, lbl, sizeof(lbl)));
		fputs("}}", f);
	}
}
