/*
 * out-explain.c - --format explain: why was the trigger request slow?
 *
 * The answer comes first (the first screen): the slow request, what a
 * typical one of its kind takes, the cause (the function with the most
 * extra self time) and its call path.  The evidence follows.
 *
 * 1. The request: the snapshot's TRIGGER, else the slowest request.  The
 *    typical request it is compared with: the median of the requests of
 *    its kind the library kept as typical samples (format 2: chosen at
 *    their begin, so unbiased), else of all complete ones in the window.
 *    With a REQUESTS section the kind's median duration is the
 *    histogram's (every request of the window, kept or not), said so.
 * 2. Its call tree on its thread within [begin, end], identical children
 *    collapsed per function (call counts), with inclusive and self time,
 *    next to the same tree paths in the median request of the same kind.
 * 3. "Where the extra time went": functions ranked by self time in the slow
 *    request minus self time in the median request.  The first line names
 *    the cause.
 * 4. "Meanwhile on other threads": for each other thread (busiest first),
 *    the functions with the most self time inside the slow request's
 *    interval (exact: children's overlap is taken off their parents').
 */
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "calltree.h"
#include "collect.h"
#include "kd_sched.h"
#include "kd_time.h"
#include "names.h"
#include "out-explain.h"
#include "requests.h"
#include "result.h"
#include "sink.h"
#include "stream.h"
#include "util.h"

static uint64_t rdur(const struct kd_dec_request *r)
{
	return r->end - r->begin;
}

static int complete(const struct kd_dec_request *r)
{
	return !(r->flags & (KD_REQ_TRUNC_BEGIN | KD_REQ_TRUNC_END));
}

struct ridx {
	uint64_t dur;
	uint32_t idx;
};

static int cmp_ridx(const void *a, const void *b)
{
	const struct ridx *x = a, *y = b;

	if (x->dur != y->dur)
		return x->dur < y->dur ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

uint32_t kd_out_explain_pick(const struct kd_dec *d, uint32_t *median)
{
	uint32_t pick = d->cut.trigger_clipped ? KD_NONE : d->trigger_req, n = 0;
	struct ridx *v;

	*median = KD_NONE;
	if (pick == KD_NONE) {
		for (uint32_t i = 0; i < d->nreqs; i++)
			if (complete(&d->reqs[i]) &&
			    (pick == KD_NONE || rdur(&d->reqs[i]) > rdur(&d->reqs[pick])))
				pick = i;
	}
	if (pick == KD_NONE)
		return pick;
	v = kd_xmalloc(((size_t)d->nreqs + 1) * sizeof(*v), "explain");
	if (!v)
		return pick;
	/* The typical ones: the kind's sampled requests if it has any (kept
	 * whatever their duration, so their median is unbiased; slow ones are
	 * kept because slow), else every complete one of the kind. */
	for (int sampled = 1; sampled >= 0 && !n; sampled--)
		for (uint32_t i = 0; i < d->nreqs; i++)
			if (i != pick && complete(&d->reqs[i]) &&
			    d->reqs[i].kind == d->reqs[pick].kind &&
			    (!sampled || (d->reqs[i].keep & KTRACE_REQ_SAMPLED)))
				v[n++] = (struct ridx){ rdur(&d->reqs[i]), i };
	if (n) {
		qsort(v, n, sizeof(*v), cmp_ridx);
		*median = v[(n - 1) / 2].idx;
	}
	free(v);
	return pick;
}

/* ---- call trees -------------------------------------------------------------- */

/* Payload of a call-tree node (calltree.c): [0] slow request, [1] median. */
struct tnode {
	uint64_t incl[2];    /* ticks */
	uint64_t self[2];    /* ticks */
	uint64_t calls[2];
	uint64_t off[2][2];  /* ticks off the cpu, inclusive: [side][enum kd_dec_off_why] */
	uint64_t off_kids[2][2]; /* ... of which in children (self = off - off_kids) */
};

static struct tnode *tn(const struct kd_ctree *t, uint32_t node)
{
	return kd_ctree_data(t, node);
}

/*
 * Which calls belong to a request: on its thread, inside [begin, end] in
 * time, and, where the request's records are in the window, in recorded
 * order: entered after its begin record, entered before its end record and
 * not still open at it.  Time alone cannot tell the calls of the previous or
 * the next request that share a boundary tick.
 */
struct rsel {
	const struct kd_dec_request *r;
	uint8_t *open_at_end;    /* [ncalls]: 1 = entered inside, open at the end record */
};

static int in_request(const struct kd_dec *d, uint32_t i, void *arg)
{
	const struct rsel *s = arg;
	const struct kd_dec_request *r = s->r;
	const struct kd_dec_call *c = &d->calls[i];

	if (c->thread != r->thread || c->begin < r->begin || c->end > r->end)
		return 0;
	if (r->call_first != KD_NONE &&
	    (i < r->call_first ||
	     /* an outer frame entered before the window, added at its exit */
	     ((c->flags & KD_CALL_TRUNC_BEGIN) && c->parent == KD_NONE)))
		return 0;
	if (r->call_end != KD_NONE && (i >= r->call_end || s->open_at_end[i]))
		return 0;
	return 1;
}

/* Add the calls of request r to side s of the tree. */
static void add_request(struct kd_ctree *t, const struct kd_dec *d,
                        const struct kd_dec_request *r, int s, uint32_t *node_of)
{
	struct rsel sel = { r, NULL };
	uint32_t lo = 0, hi = d->ncalls;

	memset(node_of, 0xff, ((size_t)d->ncalls + 1) * sizeof(*node_of));
	if (r->call_first != KD_NONE && r->call_first < hi)
		lo = r->call_first;
	if (r->call_end != KD_NONE && r->call_end < hi)
		hi = r->call_end;
	if (r->call_end != KD_NONE) {
		sel.open_at_end = kd_xcalloc((size_t)d->ncalls + 1, 1, "explain");
		/* The open frames at the end record, innermost first (a caller
		 * has a smaller index, except an outer TRUNC_BEGIN frame). */
		for (uint32_t c = r->open_at_end; c < d->ncalls && c >= lo; c = d->calls[c].parent) {
			sel.open_at_end[c] = 1;
			if (d->calls[c].parent >= c)
				break;
		}
	}
	for (uint32_t i = lo; i < hi && !t->oom; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		uint32_t nd, pn;

		if (!in_request(d, i, &sel))
			continue;
		nd = kd_ctree_place(t, d, node_of, NULL, i, in_request, &sel);
		if (nd == KD_NONE)
			break;
		pn = t->n[nd].parent;
		tn(t, nd)->incl[s] += c->end - c->begin;
		tn(t, nd)->self[s] += c->self;
		tn(t, nd)->calls[s]++;
		if (d->sched) {
			uint64_t x[2];

			kd_sched_offcpu_in(d, c->thread, c->begin, c->end, x);
			tn(t, nd)->off[s][0] += x[0];
			tn(t, nd)->off[s][1] += x[1];
			if (pn != KD_NONE) {
				tn(t, pn)->off_kids[s][0] += x[0];
				tn(t, pn)->off_kids[s][1] += x[1];
			}
		}
	}
	free(sel.open_at_end);
}

/* Children by slow inclusive time, then median, then name. */
static int cmp_child(const struct kd_ctree *t, uint32_t a, uint32_t b, void *arg)
{
	const struct kd_dec *d = arg;
	const struct tnode *x = tn(t, a), *y = tn(t, b);

	if (x->incl[0] != y->incl[0])
		return x->incl[0] > y->incl[0] ? -1 : 1;
	if (x->incl[1] != y->incl[1])
		return x->incl[1] > y->incl[1] ? -1 : 1;
	return strcmp(kd_names_func(d, t->n[a].func), kd_names_func(d, t->n[b].func));
}

static void print_tree(FILE *f, const struct kd_dec *d, struct kd_ctree *t,
                       int have_median)
{
	uint32_t *roots = NULL, nroots = 0, sp = 0, shown = 0;
	uint32_t *stack = kd_xmalloc(((size_t)t->nn + 1) * sizeof(*stack), "explain");
	char a[32], b[32], c[32], e[32];

	kd_ctree_link(t, cmp_child, (void *)d, &roots, &nroots);
	for (uint32_t k = nroots; k-- > 0;)
		stack[sp++] = roots[k];
	fprintf(f, "  %12s %12s %7s", "incl", "self", "calls");
	if (have_median)
		fprintf(f, "  | %12s %12s %7s", "median incl", "median self", "calls");
	if (d->sched)
		fprintf(f, "  | %12s %12s %12s", "on-CPU", "blocked", "preempted");
	fprintf(f, "  function\n");
	while (sp) {
		uint32_t i = stack[--sp], k = 0, ch[4096];
		const struct tnode *x = tn(t, i);
		uint32_t depth = t->n[i].depth;

		if (++shown > 400) {
			fprintf(f, "  ... (tree cut at 400 lines)\n");
			break;
		}
		kd_time_fmt_dur(kd_time_ticks_ns(d, x->incl[0]), a, sizeof(a));
		kd_time_fmt_dur(kd_time_ticks_ns(d, x->self[0]), b, sizeof(b));
		fprintf(f, "  %12s %12s %7" PRIu64, x->calls[0] ? a : "-", x->calls[0] ? b : "-",
		        x->calls[0]);
		if (have_median) {
			kd_time_fmt_dur(kd_time_ticks_ns(d, x->incl[1]), c, sizeof(c));
			kd_time_fmt_dur(kd_time_ticks_ns(d, x->self[1]), e, sizeof(e));
			fprintf(f, "  | %12s %12s %7" PRIu64, x->calls[1] ? c : "-", x->calls[1] ? e : "-",
			        x->calls[1]);
		}
		if (d->sched) {
			uint64_t o = x->off[0][0] + x->off[0][1];

			kd_time_fmt_dur(kd_time_ticks_ns(d, x->incl[0] > o ? x->incl[0] - o : 0), a,
			                sizeof(a));
			kd_time_fmt_dur(kd_time_ticks_ns(d, x->off[0][0]), b, sizeof(b));
			kd_time_fmt_dur(kd_time_ticks_ns(d, x->off[0][1]), c, sizeof(c));
			fprintf(f, "  | %12s %12s %12s", x->calls[0] ? a : "-", x->calls[0] ? b : "-",
			        x->calls[0] ? c : "-");
		}
		fprintf(f, "  %*s%s\n", (int)(depth > 40 ? 80 : depth * 2), "",
		        kd_names_func(d, t->n[i].func));
		for (uint32_t c2 = t->n[i].first_child; c2 != KD_NONE && k < 4096;
		     c2 = t->n[c2].next_sibling)
			ch[k++] = c2;
		while (k--)
			stack[sp++] = ch[k];
	}
	free(roots);
	free(stack);
}

/* ---- ranking ------------------------------------------------------------------ */

struct fdelta {
	uint32_t func;
	int64_t delta;       /* ns: slow self - median self */
	uint64_t slow, med;  /* ns */
	uint64_t slow_ticks, slow_off[2]; /* ticks: slow self, and off the cpu in it */
};

static int cmp_fdelta(const void *a, const void *b)
{
	const struct fdelta *x = a, *y = b;

	if (x->delta != y->delta)
		return x->delta > y->delta ? -1 : 1;
	return x->func < y->func ? -1 : x->func > y->func;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static int64_t sat_i64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

struct tfunc {
	uint32_t thread, func;
	int64_t self;        /* ticks of self time inside the request's interval */
};

static int cmp_tfunc(const void *a, const void *b)
{
	const struct tfunc *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	return x->func < y->func ? -1 : x->func > y->func;
}

static int cmp_tfunc_total(const void *a, const void *b)
{
	const struct tfunc *x = a, *y = b;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	return x->thread < y->thread ? -1 : x->thread > y->thread;
}

static uint32_t tfunc_slot(struct kd_umap *map, struct tfunc **v, uint32_t *n, uint32_t *cap,
                           uint32_t thread, uint32_t func)
{
	uint64_t key = ((uint64_t)thread << 32) | func;
	uint32_t x = kd_umap_get(map, key);

	if (x != KD_NONE)
		return x;
	if (*n >= *cap) {
		uint32_t nc = *cap ? *cap * 2 : 64;
		struct tfunc *p = kd_xrealloc(*v, (size_t)nc * sizeof(*p), "explain");

		if (!p)
			return KD_NONE;
		*v = p;
		*cap = nc;
	}
	(*v)[*n] = (struct tfunc){ thread, func, 0 };
	if (kd_umap_put(map, key, *n))
		return KD_NONE;
	return (*n)++;
}

/* Up to 3 functions of thread's run of v from k0 (sorted by self time,
 * largest first) with positive self time, then the end of the line. */
static void top_funcs(FILE *f, const struct kd_dec *d, const struct tfunc *v, uint32_t n,
                      uint32_t k0, uint32_t thread, const char *first)
{
	char a[32];

	for (uint32_t k = k0, shown = 0; k < n && v[k].thread == thread && shown < 3; k++) {
		if (v[k].self <= 0)
			break;
		kd_time_fmt_dur(kd_time_ticks_ns(d, (uint64_t)v[k].self), a, sizeof(a));
		fprintf(f, "%s %s (%s)", shown ? "," : first, kd_names_func(d, v[k].func), a);
		shown++;
	}
	fprintf(f, "\n");
}

/*
 * Exact self time inside [r->begin, r->end) per (thread, function): a call's
 * overlap with the interval counts for its function and is taken off its
 * parent's (children nest inside their parents).
 */
static void meanwhile(FILE *f, const struct kd_dec *d, const struct kd_dec_request *r)
{
	struct kd_umap map = { 0 };
	struct tfunc *v = NULL, *tot = NULL;
	uint32_t n = 0, cap = 0, nt = 0;
	char a[32], lbl[64];

	fprintf(f, "\nmeanwhile on other threads (self time inside the request's interval):\n");
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		uint64_t lo, hi;
		uint32_t x;

		if (c->thread == r->thread || c->end <= r->begin || c->begin >= r->end)
			continue;
		lo = c->begin > r->begin ? c->begin : r->begin;
		hi = c->end < r->end ? c->end : r->end;
		x = tfunc_slot(&map, &v, &n, &cap, c->thread, c->func);
		if (x == KD_NONE)
			goto out;
		v[x].self = sat_add(v[x].self, sat_i64(hi - lo));
		if (c->parent < d->ncalls) {
			x = tfunc_slot(&map, &v, &n, &cap, c->thread, d->calls[c->parent].func);
			if (x == KD_NONE)
				goto out;
			v[x].self = sat_add(v[x].self, -sat_i64(hi - lo));
		}
	}
	if (!n) {
		fprintf(f, "  (no other thread ran traced code then)\n");
		goto out;
	}
	qsort(v, n, sizeof(*v), cmp_tfunc);
	tot = kd_xcalloc(n, sizeof(*tot), "explain");
	if (!tot)
		goto out;
	for (uint32_t i = 0; i < n;) {
		uint32_t e = i;

		tot[nt] = (struct tfunc){ v[i].thread, i, 0 }; /* func = first entry */
		for (; e < n && v[e].thread == v[i].thread; e++)
			if (v[e].self > 0)
				tot[nt].self = sat_add(tot[nt].self, v[e].self);
		nt++;
		i = e;
	}
	qsort(tot, nt, sizeof(*tot), cmp_tfunc_total);
	for (uint32_t t = 0; t < nt && t < 16; t++) {
		kd_time_fmt_dur(kd_time_ticks_ns(d, (uint64_t)tot[t].self), a, sizeof(a));
		fprintf(f, "  %-24s %12s in traced code; top:",
		        kd_names_thread(d, tot[t].thread, lbl, sizeof(lbl)), a);
		top_funcs(f, d, v, n, tot[t].func, tot[t].thread, "");
	}
	if (nt > 16)
		fprintf(f, "  ... %" PRIu32 " more threads\n", nt - 16);
out:
	free(v);
	free(tot);
	kd_umap_free(&map);
}

/* The request's time on and off the cpu (and the median's), or why that
 * is unknown. */
static void explain_split(FILE *f, const struct kd_dec *d, const struct kd_dec_request *r,
                          const struct kd_dec_request *m)
{
	char sp[160];
	uint64_t x[2];

	if (!d->sched) {
		kd_sched_status(d, sp, sizeof(sp));
		fprintf(f, "  on-CPU / off-CPU split unknown: %s\n", sp);
		return;
	}
	kd_sched_offcpu_in(d, r->thread, r->begin, r->end, x);
	kd_sched_fmt_split(d, rdur(r), x, sp, sizeof(sp));
	fprintf(f, "  the slow request:   %s\n", sp);
	if (r->begin < d->sched_from)
		fprintf(f, "  (it began before the switch records are complete: off-CPU time "
		           "before that is not counted)\n");
	if (m) {
		kd_sched_offcpu_in(d, m->thread, m->begin, m->end, x);
		kd_sched_fmt_split(d, rdur(m), x, sp, sizeof(sp));
		fprintf(f, "  the median request: %s\n", sp);
	}
}

/*
 * With context switches: each other thread's time actually on a cpu inside
 * the request's interval (exact, from its runs on the cores, untraced code
 * included), its time off the cpu, and the functions that ran the most
 * (self time on the cpu: a call's on-CPU overlap minus its children's).
 */
static void meanwhile_sched(FILE *f, const struct kd_dec *d, const struct kd_dec_request *r)
{
	struct kd_umap map = { 0 };
	struct tfunc *v = NULL;
	uint64_t *run = calloc((size_t)d->nthreads + 1, sizeof(*run));
	uint32_t *order = malloc(((size_t)d->nthreads + 1) * sizeof(*order));
	uint32_t n = 0, cap = 0, nt = 0;
	char a[32], sp[160], lbl[64];

	fprintf(f, "\nmeanwhile on other threads (time on a cpu inside the request's interval, "
	           "from context switches):\n");
	if (!run || !order)
		goto out;
	for (uint32_t i = 0; i < d->noncpu; i++) {
		const struct kd_dec_oncpu *q = &d->oncpu[i];
		uint64_t lo = q->begin > r->begin ? q->begin : r->begin;
		uint64_t hi = q->end < r->end ? q->end : r->end;

		if (q->thread != r->thread && q->thread < d->nthreads && hi > lo)
			run[q->thread] += hi - lo;
	}
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		uint64_t lo, hi, x[2], on;
		uint32_t k;

		if (c->thread == r->thread || c->end <= r->begin || c->begin >= r->end)
			continue;
		lo = c->begin > r->begin ? c->begin : r->begin;
		hi = c->end < r->end ? c->end : r->end;
		kd_sched_offcpu_in(d, c->thread, lo, hi, x);
		on = hi - lo > x[0] + x[1] ? hi - lo - x[0] - x[1] : 0;
		k = tfunc_slot(&map, &v, &n, &cap, c->thread, c->func);
		if (k == KD_NONE)
			goto out;
		v[k].self = sat_add(v[k].self, sat_i64(on));
		if (c->parent < d->ncalls) {
			k = tfunc_slot(&map, &v, &n, &cap, c->thread, d->calls[c->parent].func);
			if (k == KD_NONE)
				goto out;
			v[k].self = sat_add(v[k].self, -sat_i64(on));
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_tfunc);
	for (uint32_t t = 0; t < d->nthreads; t++) {
		uint64_t x[2];

		if (t == r->thread)
			continue;
		kd_sched_offcpu_in(d, t, r->begin, r->end, x);
		if (run[t] || x[0] || x[1])
			order[nt++] = t;
	}
	/* busiest first (insertion sort: a few threads) */
	for (uint32_t i = 1; i < nt; i++)
		for (uint32_t j = i; j > 0 && run[order[j]] > run[order[j - 1]]; j--) {
			uint32_t tmp = order[j];

			order[j] = order[j - 1];
			order[j - 1] = tmp;
		}
	if (!nt)
		fprintf(f, "  (no other thread of the process ran or waited then)\n");
	for (uint32_t i = 0; i < nt && i < 16; i++) {
		uint32_t t = order[i], k0 = 0;
		uint64_t x[2];

		kd_sched_offcpu_in(d, t, r->begin, r->end, x);
		kd_time_fmt_dur(kd_time_ticks_ns(d, run[t]), a, sizeof(a));
		kd_sched_fmt_split(d, run[t] + x[0] + x[1], x, sp, sizeof(sp));
		fprintf(f, "  %-24s %12s on a cpu (%s)",
		        kd_names_thread(d, t, lbl, sizeof(lbl)), a, sp);
		while (k0 < n && v[k0].thread < t)
			k0++;
		top_funcs(f, d, v, n, k0, t, "; top on-CPU:");
	}
	if (nt > 16)
		fprintf(f, "  ... %" PRIu32 " more threads\n", nt - 16);
out:
	free(v);
	free(run);
	free(order);
	kd_umap_free(&map);
}

/* The call path of the tree node of func with the most slow self time:
 * "main > handle > lock_wait" into buf. */
static void call_path(const struct kd_dec *d, const struct kd_ctree *t, uint32_t func, char *buf,
                      size_t len)
{
	uint32_t best = KD_NONE, chain[64], n = 0;
	size_t used = 0;

	buf[0] = 0;
	for (uint32_t i = 0; i < t->nn; i++)
		if (t->n[i].kind == KD_CTREE_FUNC && t->n[i].func == func &&
		    (best == KD_NONE || tn(t, i)->self[0] > tn(t, best)->self[0]))
			best = i;
	for (uint32_t x = best; x != KD_NONE && n < 64; x = t->n[x].parent)
		chain[n++] = x;
	if (n == 64)
		used += (size_t)snprintf(buf, len, "... > ");
	while (n-- > 0 && used < len)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
		                         kd_names_func(d, t->n[chain[n]].func), n ? " > " : "");
}

void kd_out_explain(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o)
{
	uint32_t med, pick = kd_out_explain_pick(d, &med);
	const struct kd_dec_request *r, *m = NULL;
	struct kd_ctree t;
	uint32_t *node_of = NULL, hk;
	struct fdelta *fd = NULL;
	uint32_t nfd = 0;
	char a[32], b[32], lbl[64], nb[96], w[48], kb[64], path[512];
	uint64_t covered[2] = { 0, 0 };
	struct kd_req_hist h;
	int have_hist = 0, sampled, is_trigger;

	(void)o;
	kd_ctree_init(&t, sizeof(struct tnode), 0, 0);
	fprintf(f, "\nexplain:\n");
	if (pick == KD_NONE) {
		if (d->snap.have_trigger && d->cut.state)
			fprintf(f, "  the trigger request is not wholly in the range, and no other "
			           "complete request is: nothing to explain\n");
		else
			fprintf(f, "  no trigger and no complete request in this snapshot: nothing "
			           "to explain\n");
		kd_budget_note_short(f, d, "  ", 10);
		return;
	}
	r = &d->reqs[pick];
	if (med != KD_NONE)
		m = &d->reqs[med];
	sampled = m && (m->keep & KTRACE_REQ_SAMPLED);
	hk = kd_requests_kind_index(d, r->kind);
	if (hk != KD_NONE && kd_requests_hist(d, hk, d->window_start, d->window_end, &h) == 0 && h.count)
		have_hist = 1;

	/* Everything is computed first: the answer (cause, path) leads. */
	node_of = kd_xmalloc(((size_t)d->ncalls + 1) * sizeof(*node_of), "explain");
	if (node_of) {
		add_request(&t, d, r, 0, node_of);
		if (m)
			add_request(&t, d, m, 1, node_of);
	}
	if (node_of && !t.oom) {
		struct kd_umap fm = { 0 };

		for (uint32_t i = 0; i < t.nn; i++)
			if (t.n[i].parent == KD_NONE) {
				covered[0] += tn(&t, i)->incl[0];
				covered[1] += tn(&t, i)->incl[1];
			}
		/* Where the extra time went: self time per function, slow - median. */
		fd = kd_xcalloc((size_t)t.nn + 1, sizeof(*fd), "explain");
		for (uint32_t i = 0; fd && i < t.nn; i++) {
			uint32_t x = kd_umap_get(&fm, t.n[i].func);

			if (x == KD_NONE) {
				x = nfd++;
				fd[x].func = t.n[i].func;
				if (kd_umap_put(&fm, t.n[i].func, x)) {
					free(fd);
					fd = NULL;
					nfd = 0;
					break;
				}
			}
			fd[x].slow += kd_time_ticks_ns(d, tn(&t, i)->self[0]);
			fd[x].med += kd_time_ticks_ns(d, tn(&t, i)->self[1]);
			fd[x].slow_ticks += tn(&t, i)->self[0];
			for (int k = 0; k < 2; k++)
				if (tn(&t, i)->off[0][k] > tn(&t, i)->off_kids[0][k])
					fd[x].slow_off[k] += tn(&t, i)->off[0][k] - tn(&t, i)->off_kids[0][k];
		}
		kd_umap_free(&fm);
		for (uint32_t i = 0; i < nfd; i++)
			fd[i].delta = sat_add(sat_i64(fd[i].slow), -sat_i64(fd[i].med));
		if (nfd)
			qsort(fd, nfd, sizeof(*fd), cmp_fdelta);
	}

	/* 1. The answer. */
	kd_time_fmt_dur(kd_time_ticks_ns(d, rdur(r)), a, sizeof(a));
	kd_time_fmt_wall(kd_time_wall_ns(d, r->begin), 0, w, sizeof(w));
	/* Under a range that clips the trigger request or leaves it out, the
	 * slowest complete request in the range is explained, never named the
	 * trigger (nor given the trigger's clipped duration). */
	is_trigger = d->snap.have_trigger && (pick == d->trigger_req || !d->cut.state);
	fprintf(f, "  %s \"%s\" request %s on %s at %s UTC took %s",
	        is_trigger ? "trigger:" : d->snap.have_trigger ?
	        "the trigger request is not wholly in the range; slowest request in it:" :
	        "no trigger; slowest request:",
	        kd_names_id(d, r->kind, nb, sizeof(nb)), kd_names_req_id(r, kb, sizeof(kb)),
	        kd_names_thread(d, r->thread, lbl, sizeof(lbl)), w, a);
	if (is_trigger) {
		kd_time_fmt_dur(d->snap.trigger.threshold_ns, b, sizeof(b));
		fprintf(f, " (threshold %s)", b);
	}
	if (r->keep)
		fprintf(f, " [kept: %s]", kd_names_req_keep(r->keep, kb, sizeof(kb)));
	fprintf(f, "\n");
	if (have_hist) {
		kd_time_fmt_dur(h.pct_ns[0], a, sizeof(a));
		kd_time_fmt_dur(h.pct_ns[2], b, sizeof(b));
		fprintf(f, "  typical \"%s\": median %s, p99 %s over the %" PRIu64 " requests of the "
		           "window (from the histogram: every request, kept or not; at most %.2f %% "
		           "above)\n", kd_names_id(d, r->kind, nb, sizeof(nb)), a, b, h.count,
		        h.err_pct);
	}
	if (m) {
		kd_time_fmt_dur(kd_time_ticks_ns(d, rdur(m)), b, sizeof(b));
		fprintf(f, "  median \"%s\" request in this window: %s on %s took %s%s\n",
		        kd_names_id(d, m->kind, nb, sizeof(nb)), kd_names_req_id(m, kb, sizeof(kb)),
		        kd_names_thread(d, m->thread, lbl, sizeof(lbl)), b,
		        sampled ? " (the median of the requests kept as typical samples: what a "
		                  "typical one does)" : "");
	} else {
		fprintf(f, "  no other complete request of this kind in the window to compare with\n");
	}
	if (nfd && fd[0].delta > 0) {
		char s1[32], s2[32], s3[32];

		kd_time_fmt_dur((uint64_t)fd[0].delta, s1, sizeof(s1));
		kd_time_fmt_dur(fd[0].slow, s2, sizeof(s2));
		kd_time_fmt_dur(fd[0].med, s3, sizeof(s3));
		fprintf(f, "  cause: %s, +%s of self time (%s here, %s in the %s one)\n",
		        kd_names_func(d, fd[0].func), s1, s2, m ? s3 : "n/a",
		        m ? "compared" : "no");
		call_path(d, &t, fd[0].func, path, sizeof(path));
		fprintf(f, "  call path: %s\n", path);
	}
	explain_split(f, d, r, m);
	if (!node_of || t.oom || !fd)
		goto out;

	/* 2. The evidence. */
	fprintf(f, "\nwhere the extra time went (self time, slow request minus median):\n");
	if (!nfd)
		fprintf(f, "  (no traced calls inside the request)\n");
	for (uint32_t i = 0; i < nfd && i < 10; i++) {
		char s1[32], s2[32], s3[32];

		kd_time_fmt_dur(fd[i].delta > 0 ? (uint64_t)fd[i].delta : 0 - (uint64_t)fd[i].delta, s1,
		                sizeof(s1));
		kd_time_fmt_dur(fd[i].slow, s2, sizeof(s2));
		kd_time_fmt_dur(fd[i].med, s3, sizeof(s3));
		fprintf(f, "  %c%-12s  %-40s (%s here, %s in the median)\n",
		        fd[i].delta >= 0 ? '+' : '-', s1, kd_names_func(d, fd[i].func), s2,
		        m ? s3 : "n/a");
		if (d->sched) {
			char sp[128];

			kd_sched_fmt_split(d, fd[i].slow_ticks, fd[i].slow_off, sp, sizeof(sp));
			fprintf(f, "  %13s  here: %s\n", "", sp);
		}
	}
	{
		uint64_t u0 = rdur(r) > covered[0] ? rdur(r) - covered[0] : 0;

		kd_time_fmt_dur(kd_time_ticks_ns(d, u0), a, sizeof(a));
		fprintf(f, "  (time in the request outside traced calls: %s", a);
		if (m) {
			uint64_t u1 = rdur(m) > covered[1] ? rdur(m) - covered[1] : 0;

			kd_time_fmt_dur(kd_time_ticks_ns(d, u1), b, sizeof(b));
			fprintf(f, "; median: %s", b);
		}
		fprintf(f, ")\n");
	}

	fprintf(f, "\ncall tree of the slow request (identical calls merged)%s:\n",
	        m ? ", next to the median request" : "");
	print_tree(f, d, &t, m != NULL);
	if (d->sched)
		meanwhile_sched(f, d, r);
	else
		meanwhile(f, d, r);
out:
	if (d->snap.nmuted) {
		fprintf(f, "\n");
		kd_budget_note_short(f, d, "  ", 10);
	}
	free(fd);
	free(node_of);
	kd_ctree_free(&t);
}

/* ---- explain on a streamed file -------------------------------------------- */

/*
 * A filter in front of the collector that keeps the calls overlapping one
 * of two intervals (the explained request and the median one): what
 * kd_out_explain reads (the requests' calls and their callers, and every
 * call inside the request's interval for "meanwhile").  A call [b, e]
 * overlaps interval i when b <= hi[i] and e >= lo[i]; at its BEGIN only b
 * is known, so it waits on the stack (pending, at most stack depth of
 * them) until its END, or until the thread's time reaches the smallest lo
 * it can still meet (then it surely ends there or later).  Callers of a
 * kept call overlap too: the kept set is closed upwards, so depths and
 * parents stay right.  The builder's call positions (requests' call_first,
 * call_end, open_at_end) are remapped to the kept calls afterwards.
 */
enum { XF_PENDING, XF_KEPT, XF_DROPPED };

struct xf_frame {
	struct kd_ev ev;          /* its CALL_BEGIN */
	uint64_t lmin;            /* ticks: kept once the thread's time reaches it */
	uint32_t pos;             /* the builder's call position */
	uint32_t state;
};

struct xfilter {
	struct kd_sink next;
	uint64_t lo[2], hi[2];    /* ticks */
	uint32_t nint;
	struct xf_frame *st;
	size_t cap;
	uint32_t depth, nkept_depth; /* frames [0, nkept_depth) are kept */
	uint32_t npos;            /* CALL_BEGINs seen */
	uint32_t *kept;           /* positions of the kept calls, rising */
	size_t capkept;
	uint32_t nkept;
};

static void xf_keep_until(struct xfilter *x, const struct kd_dec *d, uint64_t tick)
{
	while (x->nkept_depth < x->depth && x->st[x->nkept_depth].state == XF_PENDING &&
	       tick >= x->st[x->nkept_depth].lmin) {
		struct xf_frame *fr = &x->st[x->nkept_depth++];

		fr->state = XF_KEPT;
		if (x->nkept >= x->capkept &&
		    kd_grow(&x->kept, &x->capkept, x->nkept, sizeof(*x->kept), "explain"))
			kd_util_oom("explain", SIZE_MAX);
		x->kept[x->nkept++] = fr->pos;
		x->next.ev(x->next.ctx, d, &fr->ev);
	}
}

static void xf_ev(void *ctx, const struct kd_dec *d, const struct kd_ev *e)
{
	struct xfilter *x = ctx;
	struct xf_frame *fr;

	switch (e->kind) {
	case KD_EV_THREAD_BEGIN:
		x->depth = x->nkept_depth = 0;
		break;
	case KD_EV_CALL_BEGIN:
		if (x->depth >= x->cap && kd_grow(&x->st, &x->cap, x->depth, sizeof(*x->st), "explain"))
			kd_util_oom("explain", SIZE_MAX);
		fr = &x->st[x->depth];
		fr->ev = *e;
		fr->pos = x->npos++;
		fr->lmin = UINT64_MAX;
		for (uint32_t i = 0; i < x->nint; i++)
			if (e->tick <= x->hi[i] && x->lo[i] < fr->lmin)
				fr->lmin = x->lo[i];
		fr->state = fr->lmin == UINT64_MAX ||
		            (x->depth && x->st[x->depth - 1].state == XF_DROPPED) ? XF_DROPPED
		                                                                 : XF_PENDING;
		x->depth++;
		xf_keep_until(x, d, e->tick);
		return;
	case KD_EV_CALL_END:
		if (!x->depth)
			return;
		xf_keep_until(x, d, e->tick);
		fr = &x->st[--x->depth];
		if (fr->state == XF_KEPT) {
			x->nkept_depth--;
			break;
		}
		return; /* pending still: it ended before it met an interval */
	default:
		xf_keep_until(x, d, e->tick);
		break;
	}
	x->next.ev(x->next.ctx, d, e);
}

/* The first kept call at or after builder position p (KD_NONE stays). */
static uint32_t remap_pos(const struct xfilter *x, uint32_t p, int exact)
{
	uint32_t lo = 0, hi = x->nkept;

	if (p == KD_NONE)
		return KD_NONE;
	while (lo < hi) {
		uint32_t m = lo + (hi - lo) / 2;

		if (x->kept[m] < p)
			lo = m + 1;
		else
			hi = m;
	}
	if (exact && (lo >= x->nkept || x->kept[lo] != p))
		return KD_NONE;
	return lo;
}

int kd_out_explain_stream(FILE *f, struct kd_dec *d, const struct kd_out_opts *o)
{
	struct xfilter x = { 0 };
	struct kd_collector c;
	struct kd_dec_error err;
	uint32_t pick, med;
	char msg[512];
	int rc;

	/* The requests first (a walk without a sink is the cheap one), cut
	 * by the range like everything below. */
	rc = kd_range_walk_cut(d, (struct kd_sink){ 0 }, &err);
	if (!rc) {
		pick = kd_out_explain_pick(d, &med);
		if (pick != KD_NONE) {
			x.lo[x.nint] = d->reqs[pick].begin;
			x.hi[x.nint++] = d->reqs[pick].end;
		}
		if (med != KD_NONE) {
			x.lo[x.nint] = d->reqs[med].begin;
			x.hi[x.nint++] = d->reqs[med].end;
		}
		kd_collector_init(&c, d);
		x.next = kd_collector_sink(&c);
		/* through the range, its call positions remapped (then ours) */
		rc = kd_range_walk_cut_pos(d, (struct kd_sink){ xf_ev, &x }, &err);
		kd_collector_free(&c);
	}
	if (rc) {
		kd_util_error_format(&err, d->file, msg, sizeof(msg));
		fprintf(stderr, "%s\n", msg);
		free(x.st);
		free(x.kept);
		return -1;
	}
	for (uint32_t i = 0; i < d->nreqs; i++) {
		struct kd_dec_request *r = &d->reqs[i];

		r->call_first = remap_pos(&x, r->call_first, 0);
		r->call_end = remap_pos(&x, r->call_end, 0);
		r->open_at_end = remap_pos(&x, r->open_at_end, 1);
	}
	kd_out_explain(f, d, o);
	free(d->calls);
	d->calls = NULL;
	d->ncalls = 0;
	free(x.st);
	free(x.kept);
	return 0;
}
