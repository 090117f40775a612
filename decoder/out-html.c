/*
 * out-html.c - one self-contained HTML timeline (--format html).
 *
 * The page is the template decoder/html/timeline.{html,css,js}, carried by
 * the decoder as C arrays (html-embed.cmake generates them at build time),
 * with the decoded data put into it as one JSON object, in pieces of
 * <script type="application/json" class="ktrace-data"> elements (data()).  No network,
 * no external script or font: the file opens anywhere.
 *
 * The data is packed so a window of millions of calls stays small and
 * loads fast (the figures are in bench/html.sh):
 *
 *   - names once: "funcs" (function names, indexed by every call), "names"
 *     (request kinds and mark names);
 *   - per thread, its calls sorted by (begin, depth) as one base64 string of
 *     unsigned LEB128 varints, per call:
 *       head   zigzag(depth - previous depth) << 5 | core changed << 4 |
 *              flags (enum kd_dec_call_flags, 4 bits)
 *       core   core index, only if "core changed"
 *       begin  ticks since the previous call's begin (the first: since the
 *              thread's "b0", itself ticks since the window start)
 *       dur    end - begin, ticks
 *       func   index in "funcs"
 *     In this order a call's parent is the last call before it one level
 *     up, so parents, children and self time are rebuilt by the page.
 *     "lanes" counts the calls per depth.
 *   - per core, its runs (result.h struct kd_dec_run) sorted by begin:
 *     thread index, begin delta, duration, as varints in base64;
 *   - requests and marks as flat JSON arrays (they are few); a request is
 *     [row, begin, end, kind, "id", flags, core, end row].
 *
 * Every time is in ticks since the file's window start ("t0"); the page
 * turns ticks into ns with tsc_hz and tsc_shift exactly as
 * kd_time_ticks_ns() does, and into wall-clock time (UTC) from "wall0"
 * (the window start's wall clock) on the axis, and through the anchors
 * (as kd_time_snap_wall_ns() does) in a call's details.
 *
 *   - per file, "muted" (the window budget's muted and excluded functions:
 *     name, why, since) and "muted_calls" (calls not recorded since), and
 *     "sched_status" (the summary's scheduling line), for the header;
 *   - with context switches (d->sched): per thread "noff"/"off", its
 *     off-CPU intervals cut to the window (why, begin delta, duration), and
 *     per core "sched" (the ticks the switches cover), "non"/"on" (which of
 *     the page's threads ran there: row, begin delta, duration), as base64
 *     varints; a cpu with switches but no ring has no row on the page.
 *     Threads seen only in the switches get a row (no calls).
 *
 * A page holds at most KD_HTML_MAX_CALLS calls (or --limit N): beyond
 * that kd_out_html() writes nothing and says how to cut the window.
 */
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "kd_sched.h"
#include "kd_time.h"
#include "names.h"
#include "out-html.h"
#include "result.h"
#include "sink.h"
#include "snap.h"
#include "util.h"

/* Generated from decoder/html/ by html-embed.cmake. */
extern const unsigned char kd_html_page[], kd_html_css[], kd_html_js[];
extern const size_t kd_html_page_len, kd_html_css_len, kd_html_js_len;

/* ---- output helpers ------------------------------------------------------- */

/* A JSON string, safe inside <script>: '<' '>' '&' escaped too. */
static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f || *p == '<' || *p == '>' || *p == '&')
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f); /* UTF-8 passes through */
	}
	fputc('"', f);
}

/* Bytes appended to a growable buffer, then written as base64. */
struct vbuf {
	uint8_t *p;
	size_t n, cap;
	int oom;
};

static void vb_byte(struct vbuf *b, uint8_t c)
{
	if (kd_grow(&b->p, &b->cap, b->n, 1, "the html page")) {
		b->oom = 1;
		return;
	}
	b->p[b->n++] = c;
}

static void vb_uv(struct vbuf *b, uint64_t v)
{
	while (v >= 0x80) {
		vb_byte(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	vb_byte(b, (uint8_t)v);
}

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static void b64(FILE *f, const uint8_t *p, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char out[4];
	size_t i = 0;

	fputc('"', f);
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		out[0] = tab[v >> 18];
		out[1] = tab[(v >> 12) & 63];
		out[2] = tab[(v >> 6) & 63];
		out[3] = tab[v & 63];
		fwrite(out, 1, 4, f);
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);

		out[0] = tab[v >> 18];
		out[1] = tab[(v >> 12) & 63];
		out[2] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		out[3] = '=';
		fwrite(out, 1, 4, f);
	}
	fputc('"', f);
}

/* Signed ticks of t relative to the window start. */
static int64_t rel(const struct kd_dec *d, uint64_t t)
{
	return t >= d->window_start ? (int64_t)(t - d->window_start)
	                            : -(int64_t)(d->window_start - t);
}

static int wanted(const struct kd_dec *d, uint32_t thread, const struct kd_out_opts *o)
{
	return !(o && o->have_tid) || d->threads[thread].tid == o->tid;
}

/* ---- calls ------------------------------------------------------------------ */

static const struct kd_dec_call *sort_calls; /* qsort has no context argument */

static int by_begin_depth(const void *a, const void *b)
{
	const struct kd_dec_call *x = &sort_calls[*(const uint32_t *)a];
	const struct kd_dec_call *y = &sort_calls[*(const uint32_t *)b];

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* One thread's calls ix[0..n) (indices in d->calls; reordered here). */
static int thread_calls(FILE *f, const struct kd_dec *d, uint32_t *ix, uint32_t n)
{
	struct vbuf b = { 0 };
	uint64_t prev_begin = 0;
	uint32_t prev_depth = 0, prev_core = UINT32_MAX, maxdepth = 0, *lanes;
	int sorted = 1;

	sort_calls = d->calls;
	for (uint32_t i = 1; i < n && sorted; i++)
		if (by_begin_depth(&ix[i - 1], &ix[i]) > 0)
			sorted = 0;
	if (!sorted) /* truncated-begin calls are added at their exit */
		qsort(ix, n, sizeof(*ix), by_begin_depth);
	if (n)
		prev_begin = d->calls[ix[0]].begin;
	fprintf(f, ",\"b0\":%" PRId64, n ? rel(d, prev_begin) : 0);
	for (uint32_t i = 0; i < n; i++) {
		const struct kd_dec_call *c = &d->calls[ix[i]];
		int changed = c->core != prev_core;

		vb_uv(&b, zigzag((int64_t)c->depth - (int64_t)prev_depth) << 5 |
		          (uint64_t)changed << 4 | (c->flags & 15u));
		if (changed)
			vb_uv(&b, c->core);
		vb_uv(&b, c->begin - prev_begin);
		vb_uv(&b, c->end >= c->begin ? c->end - c->begin : 0);
		vb_uv(&b, c->func);
		prev_begin = c->begin;
		prev_depth = c->depth;
		prev_core = c->core;
		if (c->depth > maxdepth)
			maxdepth = c->depth;
	}
	if (b.oom) {
		free(b.p);
		return -1;
	}
	fprintf(f, ",\"n\":%" PRIu32 ",\"maxdepth\":%" PRIu32 ",\"calls\":", n, maxdepth);
	b64(f, b.p, b.n);
	free(b.p);
	/* Calls per depth, so the page lays them out in one pass. */
	lanes = kd_xcalloc((size_t)maxdepth + 1, sizeof(*lanes), "the html page");
	if (!lanes)
		return -1;
	for (uint32_t i = 0; i < n; i++)
		lanes[d->calls[ix[i]].depth]++;
	fputs(",\"lanes\":[", f);
	for (uint32_t dep = 0; n && dep <= maxdepth; dep++)
		fprintf(f, "%s%" PRIu32, dep ? "," : "", lanes[dep]);
	free(lanes);
	fputc(']', f);
	return 0;
}

static const struct kd_dec_run *sort_runs;

static int by_run_begin(const void *a, const void *b)
{
	const struct kd_dec_run *x = &sort_runs[*(const uint32_t *)a];
	const struct kd_dec_run *y = &sort_runs[*(const uint32_t *)b];

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* ---- one file ----------------------------------------------------------------- */

/* ---- scheduling ------------------------------------------------------------- */

static int has_offcpu(const struct kd_dec *d, uint32_t t)
{
	return d->sched && d->offcpu_first && d->offcpu_first[t + 1] > d->offcpu_first[t];
}

/* Clamp [*b, *e) to the window; 0 if nothing is left. */
static int in_window(const struct kd_dec *d, uint64_t *b, uint64_t *e)
{
	if (*b < d->window_start)
		*b = d->window_start;
	if (*e > d->window_end)
		*e = d->window_end;
	return *e > *b;
}

/* A thread's off-CPU intervals in the window, as base64 varints: why
 * (enum kd_dec_off_why), begin delta (the first: since the window start),
 * duration. */
static int thread_offcpu(FILE *f, const struct kd_dec *d, uint32_t t)
{
	struct vbuf b = { 0 };
	uint64_t prev = d->window_start;
	uint32_t n = 0;

	if (!has_offcpu(d, t))
		return 0;
	for (uint32_t i = d->offcpu_first[t]; i < d->offcpu_first[t + 1]; i++) {
		uint64_t ob = d->offcpu[i].begin, oe = d->offcpu[i].end;

		if (!in_window(d, &ob, &oe) || ob < prev)
			continue;
		vb_uv(&b, d->offcpu[i].why);
		vb_uv(&b, ob - prev);
		vb_uv(&b, oe - ob);
		prev = ob;
		n++;
	}
	if (b.oom) {
		free(b.p);
		return -1;
	}
	fprintf(f, ",\"noff\":%" PRIu32 ",\"off\":", n);
	b64(f, b.p, b.n);
	free(b.p);
	return 0;
}

/* A core's runs of the process's threads from the context switches, as
 * base64 varints: row, begin delta, duration; between them (from "from"
 * to "to") the core ran another process or idled. */
static int core_oncpu(FILE *f, const struct kd_dec *d, uint32_t cpu, const uint32_t *row)
{
	struct vbuf b = { 0 };
	uint64_t prev = d->window_start, sb = d->sched_from, se = d->sched_to;
	uint32_t n = 0;

	for (uint32_t i = 0; i < d->noncpu; i++) {
		const struct kd_dec_oncpu *r = &d->oncpu[i];
		uint64_t ob = r->begin, oe = r->end;

		if (r->cpu != cpu || row[r->thread] == KD_NONE || !in_window(d, &ob, &oe) || ob < prev)
			continue;
		vb_uv(&b, row[r->thread]);
		vb_uv(&b, ob - prev);
		vb_uv(&b, oe - ob);
		prev = ob;
		n++;
	}
	if (b.oom) {
		free(b.p);
		return -1;
	}
	if (!in_window(d, &sb, &se))
		sb = se = d->window_start;
	fprintf(f, ",\"sched\":[%" PRId64 ",%" PRId64 "],\"non\":%" PRIu32 ",\"on\":",
	        rel(d, sb), rel(d, se), n);
	b64(f, b.p, b.n);
	free(b.p);
	return 0;
}

/* Thread index -> row index in the page (threads with data), or NONE. */
static uint32_t *thread_rows(const struct kd_dec *d, const struct kd_out_opts *o)
{
	uint32_t *row = kd_xmalloc(((size_t)d->nthreads + 1) * sizeof(*row),
			"the html page"), nrow = 0;

	if (!row)
		return NULL;
	for (uint32_t t = 0; t < d->nthreads; t++)
		row[t] = (d->threads[t].events || has_offcpu(d, t)) && wanted(d, t, o) ? nrow++
		                                                                        : KD_NONE;
	return row;
}

static void header(FILE *f, const struct kd_dec *d)
{
	const struct ktrace_info_rec *in = &d->snap.info;
	const struct kd_snap *s = &d->snap;
	uint64_t lo_tsc = d->window_start << d->shift, hi_tsc = d->window_end << d->shift;
	uint32_t a0 = 0, a1 = s->nanchors;
	char buf[256];
	int first = 1;

	fputs("{\"file\":", f);
	jstr(f, d->file);
	fputs(",\"exe\":", f);
	jstr(f, in->exe);
	fprintf(f, ",\"pid\":%" PRIu32 ",\"host\":", in->pid);
	jstr(f, in->hostname);
	fputs(",\"reason\":", f);
	jstr(f, in->reason);
	kd_time_fmt_wall(in->snapshot_realtime_ns, 1, buf, sizeof(buf));
	fputs(",\"snapshot\":", f);
	jstr(f, buf);
	fprintf(f, ",\"hz\":\"%" PRIu64 "\",\"shift\":%" PRIu32 ",\"t0\":\"%" PRIu64
	           "\",\"span\":%" PRIu64 ",\"wall0\":\"%" PRId64 "\",\"all\":%d",
	        d->tsc_hz, d->shift, d->window_start, d->window_end - d->window_start,
	        kd_time_wall_ns(d, d->window_start), d->opts.all ? 1 : 0);
	/* Anchors around the window only: the page interpolates like
	 * kd_time_snap_wall_ns() for a call's exact start time. */
	while (a0 + 1 < s->nanchors && s->anchors[a0 + 1].tsc <= lo_tsc)
		a0++;
	while (a1 > a0 + 1 && s->anchors[a1 - 2].tsc >= hi_tsc)
		a1--;
	fprintf(f, ",\"snap_tsc\":\"%" PRIu64 "\",\"snap_rt\":\"%" PRId64 "\",\"anchors\":[",
	        in->snapshot_tsc, in->snapshot_realtime_ns);
	for (uint32_t i = a0; i < a1; i++)
		fprintf(f, "%s[\"%" PRIu64 "\",\"%" PRId64 "\"]", i > a0 ? "," : "", s->anchors[i].tsc,
		        s->anchors[i].realtime_ns);
	fputs("],\"losses\":[", f);
	for (unsigned i = 0; s->have_loss && i < KTRACE_LOSS_COUNT; i++) {
		const char *name = kd_read_loss_name(i);

		if (!s->loss.count[i])
			continue;
		fputs(first ? "[" : ",[", f);
		first = 0;
		if (name) {
			jstr(f, name);
		} else {
			snprintf(buf, sizeof(buf), "loss cause %u", i);
			jstr(f, buf);
		}
		fprintf(f, ",%" PRIu64 "]", s->loss.count[i]);
	}
	fputs("],\"muted\":[", f);
	for (uint32_t i = 0; i < s->nmuted; i++) {
		const struct ktrace_muted_rec *m = &s->muted[i];

		fputs(i ? ",{\"name\":" : "{\"name\":", f);
		jstr(f, kd_budget_muted_name(d, i, buf, sizeof(buf)));
		fprintf(f, ",\"why\":\"%s\",\"since\":%" PRId64 ",\"calls_observed\":%" PRIu64 "}",
		        m->why == KTRACE_MUTE_EXCLUDE ? "excluded" : "muted",
		        rel(d, m->since_tsc >> d->shift), m->calls_observed);
	}
	fprintf(f, "],\"muted_calls\":%" PRIu64 ",\"sched_status\":",
	        s->have_budget ? s->budget.muted_calls : 0);
	kd_sched_status(d, buf, sizeof(buf));
	jstr(f, buf);
	fprintf(f, ",\"damaged\":%" PRIu32 ",\"warnings\":%" PRIu64 ",\"dropped\":%" PRIu64
	           ",\"dropped_after\":%" PRIu64 ",\"lost_exits\":%" PRIu64
	           ",\"unmatched_exits\":%" PRIu64,
	        s->damaged_blocks + s->unreadable_blocks, s->warn.total, d->dropped,
	        d->dropped_after, d->lost_exits, d->unmatched_exits);
}

static int file_json(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o)
{
	uint32_t *row = thread_rows(d, o), *start = NULL, *ix = NULL;
	int rc = -1, first;

	if (!row)
		return -1;
	start = kd_xcalloc((size_t)d->nthreads + 2, sizeof(*start), "the html page");
	/* ix: call indices bucketed by thread, then run indices of one core. */
	ix = kd_xmalloc(((size_t)(d->ncalls > d->nruns ? d->ncalls : d->nruns) + 1) * sizeof(*ix),
			"the html page");
	if (!start || !ix)
		goto out;
	header(f, d);

	/* Names: functions by index, and the kinds/marks that occur. */
	fputs(",\"funcs\":[", f);
	for (uint32_t i = 0; i < d->nfuncs; i++) {
		fputs(i ? "," : "", f);
		jstr(f, kd_names_func(d, i));
	}
	fputs("],\"names\":{", f);
	for (uint32_t i = 0; i < d->snap.nnames; i++) {
		fprintf(f, "%s\"%" PRIu32 "\":", i ? "," : "", d->snap.names[i].id);
		jstr(f, d->snap.names[i].str);
	}
	fputc('}', f);
	if (d->snap.have_trigger) {
		const struct ktrace_trigger_rec *t = &d->snap.trigger;
		uint32_t r = d->trigger_req;

		char ib[48];
		const char *id = NULL;

		if (r != KD_NONE)
			id = kd_names_req_id(&d->reqs[r], ib, sizeof(ib));
		else
			snprintf(ib, sizeof(ib), "%" PRIu64, t->request_id);
		fputs(",\"trigger\":{\"kind\":", f);
		jstr(f, t->kind);
		fputs(",\"id\":", f);
		jstr(f, !id ? ib : id[0] == '#' ? id + 1 : id);
		fprintf(f, ",\"duration_ns\":%" PRIu64 ",\"threshold_ns\":%" PRIu64
		           ",\"tid\":%" PRId32 ",\"suppressed\":%" PRIu64 ",\"end\":%" PRId64
		           ",\"req\":%" PRId64 "}",
		        t->duration_ns, t->threshold_ns, t->tid, t->suppressed,
		        rel(d, r != KD_NONE ? d->reqs[r].end : t->end_tsc >> d->shift),
		        r != KD_NONE && wanted(d, d->reqs[r].thread, o) ? (int64_t)r : -1);
	}

	/* Threads, their calls bucketed by thread (counting sort). */
	for (uint32_t i = 0; i < d->ncalls; i++)
		start[d->calls[i].thread + 1]++;
	for (uint32_t t = 0; t < d->nthreads; t++)
		start[t + 1] += start[t];
	{
		uint32_t *pos = kd_xcalloc((size_t)d->nthreads + 1, sizeof(*pos), "the html page");

		if (!pos)
			goto out;
		memcpy(pos, start, d->nthreads * sizeof(*pos));
		for (uint32_t i = 0; i < d->ncalls; i++)
			ix[pos[d->calls[i].thread]++] = i;
		free(pos);
	}
	fputs(",\"threads\":[", f);
	first = 1;
	for (uint32_t t = 0; t < d->nthreads; t++) {
		const struct kd_dec_thread *th = &d->threads[t];

		if (row[t] == KD_NONE)
			continue;
		fputs(first ? "{\"name\":" : ",\n{\"name\":", f);
		first = 0;
		jstr(f, th->name);
		fprintf(f, ",\"tid\":%" PRId32 ",\"known\":%d,\"main\":%d,\"exited\":%d", th->tid,
		        th->known, !!(th->flags & KTRACE_THREAD_MAIN),
		        !!(th->flags & KTRACE_THREAD_EXITED));
		if (thread_calls(f, d, ix + start[t], start[t + 1] - start[t]) != 0 ||
		    thread_offcpu(f, d, t) != 0)
			goto out;
		fputc('}', f);
	}

	/* Cores: runs of threads, sorted by begin per core. */
	fputs("],\n\"cores\":[", f);
	for (uint32_t c = 0; c < d->snap.ncores; c++) {
		struct vbuf b = { 0 };
		uint32_t n = 0;
		uint64_t prev = d->window_start;

		for (uint32_t i = 0; i < d->nruns; i++)
			if (d->runs[i].core == c && row[d->runs[i].thread] != KD_NONE)
				ix[n++] = i;
		sort_runs = d->runs;
		qsort(ix, n, sizeof(*ix), by_run_begin);
		if (n && d->runs[ix[0]].begin < prev)
			prev = d->runs[ix[0]].begin;
		fprintf(f, "%s{\"cpu\":%" PRIu32 ",\"n\":%" PRIu32 ",\"b0\":%" PRId64 ",\"runs\":",
		        c ? ",\n" : "", d->snap.cores[c].cpu, n, rel(d, prev));
		for (uint32_t i = 0; i < n; i++) {
			const struct kd_dec_run *r = &d->runs[ix[i]];

			vb_uv(&b, row[r->thread]);
			vb_uv(&b, r->begin - prev);
			vb_uv(&b, r->end >= r->begin ? r->end - r->begin : 0);
			prev = r->begin;
		}
		if (b.oom) {
			free(b.p);
			goto out;
		}
		b64(f, b.p, b.n);
		free(b.p);
		if (d->sched && core_oncpu(f, d, d->snap.cores[c].cpu, row) != 0)
			goto out;
		fputc('}', f);
	}

	/* Requests: [row, begin, end, kind, "id", flags, core, end row] per
	 * request (end row: the thread that ended it, -1 if not in the page);
	 * "trigger.req" above is an index in d->reqs, so keep them all and
	 * give filtered-out threads row -1. */
	fputs("],\n\"reqs\":[", f);
	for (uint32_t i = 0; i < d->nreqs; i++) {
		const struct kd_dec_request *r = &d->reqs[i];

		char ib[48];
		const char *id = kd_names_req_id(r, ib, sizeof(ib));

		/* [row, begin, end, kind, "id", flags, core, end row]: the page
		 * prints "kind #" + id: "1234", "3.17" (format 1), "id=987654" */
		fprintf(f, "%s[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRIu32 ",", i ? "," : "",
		        row[r->thread] == KD_NONE ? -1 : (int64_t)row[r->thread],
		        rel(d, r->begin), rel(d, r->end), r->kind);
		jstr(f, id[0] == '#' ? id + 1 : id);
		fprintf(f, ",%" PRIu32 ",%" PRIu32 ",%" PRId64 "]", r->flags, r->core,
		        r->end_thread >= d->nthreads || row[r->end_thread] == KD_NONE
		                ? -1 : (int64_t)row[r->end_thread]);
	}
	/* Marks: [row, tick, name, "value", core]. */
	fputs("],\n\"marks\":[", f);
	first = 1;
	for (uint32_t i = 0; i < d->nmarks; i++) {
		const struct kd_dec_mark *m = &d->marks[i];

		if (row[m->thread] == KD_NONE)
			continue;
		fprintf(f, "%s[%" PRIu32 ",%" PRId64 ",%" PRIu32 ",\"%" PRIu64 "\",%" PRIu32 "]",
		        first ? "" : ",", row[m->thread], rel(d, m->tick), m->name, m->value, m->core);
		first = 0;
	}
	fputs("]}", f);
	rc = 0;
out:
	free(row);
	free(start);
	free(ix);
	return rc;
}

/* ---- the page ------------------------------------------------------------------- */

/* Write tmpl[0..len) with "@@KEY@@" markers replaced by put(KEY). */
static void expand(FILE *f, const unsigned char *tmpl, size_t len,
                   void (*put)(FILE *f, const char *key, size_t klen, void *ctx), void *ctx)
{
	size_t i = 0;

	while (i < len) {
		const unsigned char *m = memchr(tmpl + i, '@', len - i);
		const unsigned char *e;

		if (!m) {
			fwrite(tmpl + i, 1, len - i, f);
			return;
		}
		fwrite(tmpl + i, 1, (size_t)(m - tmpl) - i, f);
		i = (size_t)(m - tmpl);
		e = i + 2 < len && m[1] == '@' ? memchr(m + 2, '@', len - i - 2) : NULL;
		if (e && (size_t)(e - tmpl) + 1 < len && e[1] == '@' && e - m - 2 < 32 && e > m + 2) {
			put(f, (const char *)m + 2, (size_t)(e - m - 2), ctx);
			i = (size_t)(e - tmpl) + 2;
		} else {
			fputc('@', f);
			i++;
		}
	}
}

struct page {
	struct kd_dec **decs;
	int n;
	const struct kd_out_opts *o;
	int rc;
};

/*
 * The JSON, as <script type="application/json" class="ktrace-data"> pieces
 * of about KD_HTML_PIECE bytes that the page joins: Chromium parses a
 * page of many small script elements about twice as fast as one huge one.
 * A piece never ends inside a UTF-8 sequence; the JSON
 * holds no '<' (jstr escapes it), so no piece can end its element early.
 */
#define KD_HTML_PIECE (1u << 20)

static void data(FILE *f, struct page *p)
{
	char *buf = NULL;
	size_t len = 0, at = 0;
	FILE *m = open_memstream(&buf, &len);
	int first = 1;

	if (!m) {
		p->rc = -1;
		return;
	}
	fputs("{\"version\":1,\"generator\":\"ktrace-decode\",\"files\":[\n", m);
	for (int i = 0; i < p->n; i++) {
		if (!p->decs[i])
			continue;
		if (!first)
			fputs(",\n", m);
		first = 0;
		if (file_json(m, p->decs[i], p->o) != 0)
			p->rc = -1;
	}
	fputs("]}", m);
	if (fclose(m) != 0 || !buf) {
		free(buf);
		p->rc = -1;
		return;
	}
	do {
		size_t n = len - at > KD_HTML_PIECE ? KD_HTML_PIECE : len - at;

		while (at + n < len && n > 1 && ((unsigned char)buf[at + n] & 0xc0) == 0x80)
			n--; /* not inside a UTF-8 sequence */
		fputs("<script type=\"application/json\" class=\"ktrace-data\">", f);
		fwrite(buf + at, 1, n, f);
		fputs("</script>\n", f);
		at += n;
	} while (at < len);
	free(buf);
}

static void put_key(FILE *f, const char *key, size_t klen, void *ctx)
{
	struct page *p = ctx;

	if (klen == 3 && !memcmp(key, "CSS", 3)) {
		fwrite(kd_html_css, 1, kd_html_css_len, f);
	} else if (klen == 2 && !memcmp(key, "JS", 2)) {
		fwrite(kd_html_js, 1, kd_html_js_len, f);
	} else if (klen == 5 && !memcmp(key, "TITLE", 5)) {
		const char *exe = "";
		for (int i = 0; i < p->n && !exe[0]; i++) {
			if (!p->decs[i])
				continue;
			exe = strrchr(p->decs[i]->snap.info.exe, '/');
			exe = exe ? exe + 1 : p->decs[i]->snap.info.exe;
		}
		for (const char *s = exe; *s; s++) {
			if (*s == '<')
				fputs("&lt;", f);
			else if (*s == '&')
				fputs("&amp;", f);
			else
				fputc(*s, f);
		}
	} else if (klen == 4 && !memcmp(key, "DATA", 4)) {
		data(f, p);
	} else {
		fprintf(f, "@@%.*s@@", (int)klen, key);
	}
}

uint64_t kd_out_html_calls(struct kd_dec *const *decs, int n, const struct kd_out_opts *o)
{
	uint64_t calls = 0;

	for (int i = 0; i < n; i++) {
		const struct kd_dec *d = decs[i];

		for (uint32_t k = 0; d && k < d->ncalls; k++)
			calls += wanted(d, d->calls[k].thread, o);
	}
	return calls;
}

int kd_out_html(FILE *f, struct kd_dec **decs, int n, const struct kd_out_opts *o)
{
	uint64_t max = o && o->limit && o->limit < KD_HTML_MAX_CALLS ? o->limit
	                                                                 : KD_HTML_MAX_CALLS;
	uint64_t calls = kd_out_html_calls(decs, n, o);
	struct page p = { decs, n, o, 0 };

	if (calls > max) {
		fprintf(stderr,
		        "ktrace-decode: %" PRIu64 " calls are more than one HTML page holds (%" PRIu64
		        "%s); nothing written.\n"
		        "  Cut the window: --thread TID keeps one thread, or decode fewer files;\n"
		        "  or open the whole window in Perfetto: --format chrome -o trace.json\n",
		        calls, max, max == KD_HTML_MAX_CALLS ? "" : ", --limit");
		return -1;
	}
	expand(f, kd_html_page, kd_html_page_len, put_key, &p);
	if (p.rc)
		fprintf(stderr, "ktrace-decode: out of memory writing the HTML page\n");
	return p.rc;
}
