/*
 * out-stats.c - per-function statistics (--format stats) and folded stacks
 * for flamegraph.pl (--format folded).
 *
 * Percentiles are exact, nearest-rank: p = sorted[ceil(q * n) - 1] of the
 * inclusive durations of the function's calls.  "total" is inclusive time
 * with recursion counted once (a call whose caller chain already holds the
 * same function adds nothing to total).  "self" is time in the function
 * minus time in its callees.
 */
#include <stdio.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "kd_sched.h"
#include "kd_time.h"
#include "names.h"
#include "out-stats.h"
#include "result.h"
#include "sink.h"
#include "util.h"

/*
 * Everything is summed and sorted in ticks and converted to ns once per
 * function (exact: ns(sum of ticks) has no per-call rounding).
 */

/* LSD radix sort of n u64 (8-bit digits; passes where every value has the
 * same digit are skipped).  tmp has room for n. */
static void radix_sort_u64(uint64_t *a, uint64_t *tmp, size_t n)
{
	uint64_t *src = a, *dst = tmp, *t;

	if (n < 32) {
		for (size_t i = 1; i < n; i++) {
			uint64_t v = a[i];
			size_t j = i;

			for (; j > 0 && a[j - 1] > v; j--)
				a[j] = a[j - 1];
			a[j] = v;
		}
		return;
	}
	for (unsigned shift = 0; shift < 64; shift += 8) {
		size_t count[256] = { 0 }, pos = 0;

		for (size_t i = 0; i < n; i++)
			count[(src[i] >> shift) & 0xFF]++;
		if (count[(src[0] >> shift) & 0xFF] == n)
			continue;
		for (unsigned k = 0; k < 256; k++) {
			size_t c = count[k];

			count[k] = pos;
			pos += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(src[i] >> shift) & 0xFF]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof(*a));
}

static int cmp_stats(const void *a, const void *b)
{
	const struct kd_func_stats *x = a, *y = b;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return x->func < y->func ? -1 : x->func > y->func;
}

/* Does a caller of call i (up to 256 levels) run the same function? */
static int recursive(const struct kd_dec *d, uint32_t i)
{
	uint32_t f = d->calls[i].func, p = d->calls[i].parent;

	for (int k = 0; k < 256 && p < d->ncalls; k++) {
		if (d->calls[p].func == f)
			return 1;
		p = d->calls[p].parent;
	}
	return 0;
}

static uint64_t rank(const uint64_t *v, uint64_t n, double q)
{
	uint64_t r = (uint64_t)ceil(q * (double)n);

	if (r < 1)
		r = 1;
	if (r > n)
		r = n;
	return v[r - 1];
}

struct kd_func_stats *kd_out_stats_funcs(const struct kd_dec *d, int32_t tid,
                                             int have_tid, uint32_t *nout)
{
	size_t nf = (size_t)d->nfuncs + 1;
	uint64_t *dur = kd_xmalloc(((size_t)d->ncalls + 1) * sizeof(*dur), "statistics");
	uint64_t *tmp = kd_xmalloc(((size_t)d->ncalls + 1) * sizeof(*tmp), "statistics");
	/* per func: start in dur[], fill cursor */
	uint64_t *off = kd_xcalloc(nf + 1, sizeof(*off), "statistics");
	uint64_t *cur = kd_xmalloc((nf + 1) * sizeof(*cur), "statistics");
	uint64_t *total = kd_xcalloc(nf, sizeof(*total), "statistics"); /* ticks */
	uint64_t *self = kd_xcalloc(nf, sizeof(*self), "statistics");   /* ticks */
	uint64_t *sum = kd_xcalloc(nf, sizeof(*sum), "statistics");     /* ticks */
	struct kd_func_stats *st = kd_xcalloc(nf, sizeof(*st), "statistics");
	uint32_t ns = 0;

	*nout = 0;
	if (!dur || !tmp || !off || !cur || !total || !self || !sum || !st)
		goto fail;
#define WANT(c) (!have_tid || ((c)->thread < d->nthreads && d->threads[(c)->thread].tid == tid))
	/* Counting sort by function, then each function's durations sorted. */
	for (uint32_t i = 0; i < d->ncalls; i++)
		if (WANT(&d->calls[i]))
			off[d->calls[i].func + 1]++;
	for (size_t f = 1; f <= nf; f++)
		off[f] += off[f - 1];
	memcpy(cur, off, nf * sizeof(*off));
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		uint64_t t = c->end - c->begin;

		if (!WANT(c))
			continue;
		dur[cur[c->func]++] = t;
		sum[c->func] += t;
		self[c->func] += c->self;
		if (!recursive(d, i))
			total[c->func] += t;
	}
#undef WANT
	for (uint32_t f = 0; f < d->nfuncs; f++) {
		uint64_t n = off[f + 1] - off[f];
		struct kd_func_stats *s;

		if (!n)
			continue;
		radix_sort_u64(dur + off[f], tmp, n);
		s = &st[ns++];
		s->func = f;
		s->calls = n;
		s->total = kd_time_ticks_ns(d, total[f]);
		s->self = kd_time_ticks_ns(d, self[f]);
		s->mean = (double)kd_time_ticks_ns(d, sum[f]) / (double)n;
		s->p50 = kd_time_ticks_ns(d, rank(dur + off[f], n, 0.50));
		s->p99 = kd_time_ticks_ns(d, rank(dur + off[f], n, 0.99));
		s->max = kd_time_ticks_ns(d, dur[off[f + 1] - 1]);
	}
	qsort(st, ns, sizeof(*st), cmp_stats);
	free(dur);
	free(tmp);
	free(off);
	free(cur);
	free(total);
	free(self);
	free(sum);
	*nout = ns;
	return st;
fail:
	free(dur);
	free(tmp);
	free(off);
	free(cur);
	free(total);
	free(self);
	free(sum);
	free(st);
	return NULL;
}

/* Per function: wall (inclusive, recursion counted once, like total) split
 * into on-CPU and off-CPU from the context switches. */
struct sched_row {
	uint32_t func;
	uint64_t calls, wall, off[2];   /* ticks */
};

static int cmp_sched_row(const void *a, const void *b)
{
	const struct sched_row *x = a, *y = b;

	if (x->wall != y->wall)
		return x->wall > y->wall ? -1 : 1;
	return x->func < y->func ? -1 : x->func > y->func;
}

static void stats_sched(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o)
{
	struct sched_row *row;
	uint32_t n = 0;
	char w[32], on[32], off[32], bl[32], pr[32];

	if (!d->sched)
		return;
	row = calloc((size_t)d->nfuncs + 1, sizeof(*row));
	if (!row) {
		fprintf(f, "(out of memory)\n");
		return;
	}
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		struct sched_row *r = &row[c->func];
		uint64_t x[2];

		if (o && o->have_tid &&
		    !(c->thread < d->nthreads && d->threads[c->thread].tid == o->tid))
			continue;
		r->calls++;
		if (recursive(d, i))
			continue;
		kd_sched_offcpu_in(d, c->thread, c->begin, c->end, x);
		r->wall += c->end - c->begin;
		r->off[0] += x[0];
		r->off[1] += x[1];
	}
	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (row[i].calls) {
			row[n] = row[i];
			row[n++].func = i;
		}
	qsort(row, n, sizeof(*row), cmp_sched_row);
	fprintf(f, "\nper function, on and off the cpu (from context switches; inclusive, "
	           "sorted by wall time):\n");
	fprintf(f, "%10s %12s %12s %12s %12s %12s  %s\n", "calls", "wall", "on-CPU", "off-CPU",
	        "blocked", "preempted", "function");
	for (uint32_t i = 0; i < n; i++) {
		uint64_t o2 = row[i].off[0] + row[i].off[1];

		if (o && o->limit && i >= o->limit) {
			fprintf(f, "... %" PRIu32 " more functions\n", n - i);
			break;
		}
		kd_time_fmt_dur(kd_time_ticks_ns(d, row[i].wall), w, sizeof(w));
		kd_time_fmt_dur(kd_time_ticks_ns(d, row[i].wall > o2 ? row[i].wall - o2 : 0), on,
		                sizeof(on));
		kd_time_fmt_dur(kd_time_ticks_ns(d, o2), off, sizeof(off));
		kd_time_fmt_dur(kd_time_ticks_ns(d, row[i].off[0]), bl, sizeof(bl));
		kd_time_fmt_dur(kd_time_ticks_ns(d, row[i].off[1]), pr, sizeof(pr));
		fprintf(f, "%10" PRIu64 " %12s %12s %12s %12s %12s  %s\n", row[i].calls, w, on, off, bl,
		        pr, kd_names_func(d, row[i].func));
	}
	free(row);
}

void kd_out_stats(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o)
{
	uint32_t n;
	struct kd_func_stats *st =
		kd_out_stats_funcs(d, o ? o->tid : 0, o ? o->have_tid : 0, &n);
	char t[32], s[32], m[32], p50[32], p99[32], mx[32];

	if (!st) {
		fprintf(f, "(out of memory)\n");
		return;
	}
	fprintf(f, "\nper function (sorted by self time; times inclusive unless \"self\"):\n");
	kd_budget_note(f, d, "");
	fprintf(f, "%10s %12s %12s %12s %12s %12s %12s  %s\n", "calls", "total", "self", "mean",
	        "p50", "p99", "max", "function");
	for (uint32_t i = 0; i < n; i++) {
		if (o && o->limit && i >= o->limit) {
			fprintf(f, "... %" PRIu32 " more functions\n", n - i);
			break;
		}
		kd_time_fmt_dur(st[i].total, t, sizeof(t));
		kd_time_fmt_dur(st[i].self, s, sizeof(s));
		kd_time_fmt_dur(st[i].mean < 1.8e19 ? (uint64_t)(st[i].mean + 0.5) : UINT64_MAX, m,
		                sizeof(m));
		kd_time_fmt_dur(st[i].p50, p50, sizeof(p50));
		kd_time_fmt_dur(st[i].p99, p99, sizeof(p99));
		kd_time_fmt_dur(st[i].max, mx, sizeof(mx));
		fprintf(f, "%10" PRIu64 " %12s %12s %12s %12s %12s %12s  %s%s\n", st[i].calls, t, s,
		        m, p50, p99, mx, kd_names_func(d, st[i].func),
		        kd_budget_muted(d, st[i].func) >= 0 ? "  [muted: calls before muting only]" : "");
	}
	free(st);
	stats_sched(f, d, o);
}
