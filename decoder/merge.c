/*
 * merge.c - several snapshot files on one timeline (issue 8).
 *
 * Files line up on CLOCK_REALTIME: each file's ticks become wall-clock ns
 * through its own ANCHORS (kd_time_wall_ns), so processes of one host, and
 * of hosts whose clocks are in sync (NTP, PTP), share one time axis.  No
 * correction is applied between hosts (the offset used is 0; the summary
 * says so): a skew between hosts' clocks shows as a skew in the timeline.
 *
 * Process groups: files with the same host, pid, start_tsc and tsc_shift
 * are snapshots of one process (kd_merge_same_process; out-perfetto.c groups its
 * tracks with it).  Several snapshots of one process overlap; the rule,
 * applied to the decoded files so that every format (text, summary,
 * chrome, html, perfetto) shows each call once:
 * sorted by window end, each next file B is cut at the previous file A's
 * window end C (ticks of one counter), per thread (same slot and tid):
 *   - B's calls that ended at or before C go (A has them), as do B's marks
 *     up to C and its requests ended by C; its runs and off/on-CPU
 *     intervals start after C;
 *   - A's frames still open at its end and B's frames alive at C are
 *     matched innermost first, by function; a pair is one call: its begin
 *     from A, its end (and the rest) from B; A's copy goes.  A frame B
 *     entered at C's own tick may be one A never saw: it is skipped when
 *     that makes the stacks match.  Stacks that disagree otherwise are not
 *     merged (A's frames end at C, B's start afresh);
 *   - A's requests still open at C go; B's copy takes A's begin.
 * Files whose windows do not overlap are left as they are.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dec.h"
#include "kd_time.h"
#include "merge.h"
#include "names.h"
#include "range.h"
#include "result.h"
#include "util.h"

int kd_merge_same_process(const struct kd_dec *a, const struct kd_dec *b)
{
	return a->snap.info.pid == b->snap.info.pid &&
	       a->snap.info.start_tsc == b->snap.info.start_tsc &&
	       a->snap.info.tsc_shift == b->snap.info.tsc_shift &&
	       !strcmp(a->snap.info.hostname, b->snap.info.hostname);
}

/* ---- compaction of the call list ------------------------------------------ */

/* Keep the calls with keep[i] set: parents become the nearest kept caller,
 * requests' call positions are remapped (self times stay: a dropped call
 * here is one the other file holds, not time of its caller). */
/* New index of old call i: the first kept call at or after it (map[] holds
 * kept-before counts), or the nearest kept caller for a dropped call. */
static uint32_t remap_ge(const uint32_t *map, uint32_t ncalls, uint32_t i)
{
	return i == KD_NONE ? KD_NONE : map[i < ncalls ? i : ncalls];
}

static uint32_t remap_up(const struct kd_dec *d, const uint8_t *keep, const uint32_t *map,
                         uint32_t i)
{
	for (uint32_t k = 0; i < d->ncalls && k <= d->ncalls; k++) {
		if (keep[i])
			return map[i];
		i = d->calls[i].parent;
	}
	return KD_NONE;
}

static void calls_keep(struct kd_dec *d, const uint8_t *keep)
{
	uint32_t *map = kd_xmalloc(((size_t)d->ncalls + 1) * sizeof(*map), "the call list");
	uint32_t *parent = kd_xcalloc((size_t)d->ncalls + 1, sizeof(*parent), "the call list");
	uint32_t n = 0;

	for (uint32_t i = 0; i < d->ncalls; i++) {
		map[i] = n;
		n += keep[i] != 0;
	}
	map[d->ncalls] = n;
	/* Requests' recorded-order positions, on the old indices. */
	for (uint32_t i = 0; i < d->nreqs; i++) {
		struct kd_dec_request *q = &d->reqs[i];

		q->open_at_end = remap_up(d, keep, map, q->open_at_end);
		q->call_first = remap_ge(map, d->ncalls, q->call_first);
		q->call_end = remap_ge(map, d->ncalls, q->call_end);
	}
	/* New parents: the nearest kept caller (parent[] holds them for now). */
	for (uint32_t i = 0; i < d->ncalls; i++)
		if (keep[i])
			parent[i] = remap_up(d, keep, map, d->calls[i].parent);
	for (uint32_t i = 0, k = 0; i < d->ncalls; i++)
		if (keep[i]) {
			d->calls[k] = d->calls[i];
			d->calls[k++].parent = parent[i];
		}
	d->ncalls = n;
	free(map);
	free(parent);
}

static int cmp_join(const void *x, const void *y)
{
	const struct kd_merge_join *a = x, *b = y;

	return a->call < b->call ? -1 : a->call > b->call;
}

/* d->merge.joins after calls_keep(d, keep): the kept calls' new indices
 * (one pass over keep[], the joins sorted by call). */
static void joins_keep(struct kd_dec *d, const uint8_t *keep)
{
	uint32_t k = 0, n = 0, i = 0;

	if (!d->merge.njoins)
		return;
	qsort(d->merge.joins, d->merge.njoins, sizeof(*d->merge.joins), cmp_join);
	for (uint32_t m = 0; m < d->merge.njoins; m++) {
		struct kd_merge_join j = d->merge.joins[m];

		if (j.call >= d->ncalls)
			continue;
		for (; i < j.call; i++)
			n += keep[i] != 0;
		if (!keep[j.call])
			continue;
		j.call = n;
		d->merge.joins[k++] = j;
	}
	d->merge.njoins = k;
}

static int is_open(const struct kd_dec_call *c)
{
	return (c->flags & KD_CALL_TRUNC_END) && !(c->flags & KD_CALL_EXIT_LOST);
}

/* Thread of b matching thread ta of a (same slot and tid), or KD_NONE. */
static uint32_t same_thread(const struct kd_dec *a, uint32_t ta, const struct kd_umap *b_threads)
{
	return kd_umap_get(b_threads,
	                   (uint64_t)a->threads[ta].slot << 32 | (uint32_t)a->threads[ta].tid);
}

/*
 * The frames of every thread at the cut, in one pass over the calls: a's
 * still open at its end (alive 0), or b's alive at the cut (alive 1).
 * Sorted by thread, then depth (a frame stack is a chain: depth orders it),
 * *first[t] .. first[t + 1] are thread t's.  Returns the array (free it).
 */
static const struct kd_dec *sort_d;

static int cmp_frame(const void *x, const void *y)
{
	const struct kd_dec_call *a = &sort_d->calls[*(const uint32_t *)x];
	const struct kd_dec_call *b = &sort_d->calls[*(const uint32_t *)y];

	if (a->thread != b->thread)
		return a->thread < b->thread ? -1 : 1;
	if (a->depth != b->depth)
		return a->depth < b->depth ? -1 : 1;
	return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

static uint32_t *stacks_at(const struct kd_dec *d, int alive, uint64_t cut, uint32_t **first)
{
	uint32_t *v = NULL, n = 0;
	size_t cap = 0;

	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];

		if (!(alive ? (c->begin <= cut && c->end > cut) : is_open(c)))
			continue;
		if (kd_grow(&v, &cap, n, sizeof(*v), "merging files"))
			kd_util_oom("merging files", SIZE_MAX);
		v[n++] = i;
	}
	sort_d = d;
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_frame);
	*first = kd_xcalloc((size_t)d->nthreads + 2, sizeof(**first), "merging files");
	for (uint32_t i = 0; i < n; i++)
		(*first)[d->calls[v[i]].thread + 1]++;
	for (uint32_t t = 0; t < d->nthreads; t++)
		(*first)[t + 1] += (*first)[t];
	return v;
}

/* Cut b at a's window end (see the file comment).  Counts what was left
 * out into b->merge.dropped. */
static void cut_pair(struct kd_dec *a, struct kd_dec *b)
{
	uint64_t cut = a->window_end;
	uint8_t *keep_a = kd_xmalloc((size_t)a->ncalls + 1, "merging files");
	uint8_t *keep_b = kd_xmalloc((size_t)b->ncalls + 1, "merging files");
	struct kd_umap bt = { 0 }; /* b's (slot, tid) -> thread */
	uint32_t *fa, *fb;
	uint32_t *va = stacks_at(a, 0, cut, &fa), *vb = stacks_at(b, 1, cut, &fb);
	uint32_t k;
	size_t capj = b->merge.njoins;

	memset(keep_a, 1, (size_t)a->ncalls + 1);
	memset(keep_b, 1, (size_t)b->ncalls + 1);
	b->merge.cut = cut;
	for (uint32_t i = 0; i < b->ncalls; i++)
		if (b->calls[i].end <= cut) {
			keep_b[i] = 0;
			b->merge.dropped++;
		}
	for (uint32_t t = 0; t < b->nthreads; t++)
		if (kd_umap_put(&bt, (uint64_t)b->threads[t].slot << 32 | (uint32_t)b->threads[t].tid, t))
			kd_util_oom("merging files", 0);
	for (uint32_t ta = 0; ta < a->nthreads; ta++) {
		uint32_t tb = same_thread(a, ta, &bt), na, nb, q;
		const uint32_t *sa, *sb;

		if (tb == KD_NONE)
			continue;
		/* no frame open at the cut in a file: its list is NULL (and empty) */
		sa = va ? va + fa[ta] : NULL;
		na = fa[ta + 1] - fa[ta];
		sb = vb ? vb + fb[tb] : NULL;
		nb = fb[tb + 1] - fb[tb];
		for (;;) {
			q = 0;
			/* by name: function indices are each file's own */
			while (q < na && q < nb &&
			       !strcmp(kd_names_func(a, a->calls[sa[na - 1 - q]].func),
			               kd_names_func(b, b->calls[sb[nb - 1 - q]].func)))
				q++;
			if (q == nb || b->calls[sb[nb - 1]].begin != cut)
				break;
			nb--; /* entered at the cut's tick: maybe unseen by a */
		}
		if (na > q && nb > q)
			continue; /* the stacks disagree: not merged */
		/* each pair is one call (b's), recorded in b->merge.joins with
		 * where its begin was recorded (perfetto places its BEGIN there) */
		for (uint32_t i = 0; i < q; i++) {
			struct kd_dec_call *x = &a->calls[sa[na - 1 - i]];
			struct kd_dec_call *y = &b->calls[sb[nb - 1 - i]];
			struct kd_merge_join j = { sb[nb - 1 - i], x->begin_sub, a };

			/* x joined with a still earlier file's frame: its begin is there */
			for (uint32_t m = 0; m < a->merge.njoins; m++)
				if (a->merge.joins[m].call == sa[na - 1 - i]) {
					j.sub = a->merge.joins[m].sub;
					j.from = a->merge.joins[m].from;
					break;
				}
			if (kd_grow(&b->merge.joins, &capj, b->merge.njoins, sizeof(*b->merge.joins),
			            "merging files"))
				kd_util_oom("merging files", 0);
			b->merge.joins[b->merge.njoins++] = j;
			y->begin = x->begin;
			y->flags = (y->flags & ~(uint32_t)KD_CALL_TRUNC_BEGIN) |
			           (x->flags & KD_CALL_TRUNC_BEGIN);
			keep_a[sa[na - 1 - i]] = 0;
			b->merge.joined++;
		}
		/* a's unmatched outer frames stay open to b's end */
		for (uint32_t i = 0; i + q < na; i++)
			if (a->calls[sa[i]].end < b->window_end)
				a->calls[sa[i]].end = b->window_end;
	}
	/* The joins' call indices, to the calls kept (a's joined frames go). */
	joins_keep(a, keep_a);
	joins_keep(b, keep_b);
	calls_keep(a, keep_a);
	calls_keep(b, keep_b);

	/* Requests: b's ended by the cut go; a's still open there go, and b's
	 * copy takes a's begin. */
	k = 0;
	for (uint32_t i = 0; i < a->nreqs; i++) {
		struct kd_dec_request *r = &a->reqs[i];

		if (r->flags & KD_REQ_TRUNC_END) {
			for (uint32_t j = 0; j < b->nreqs; j++)
				if (b->reqs[j].id == r->id && b->reqs[j].kind == r->kind &&
				    b->reqs[j].begin <= cut) {
					b->reqs[j].begin = r->begin;
					b->reqs[j].flags = (b->reqs[j].flags & ~(uint32_t)KD_REQ_TRUNC_BEGIN) |
					                   (r->flags & KD_REQ_TRUNC_BEGIN);
					b->reqs[j].call_first = KD_NONE;
					break;
				}
			if (i == a->trigger_req)
				a->trigger_req = KD_NONE;
			continue;
		}
		if (i == a->trigger_req)
			a->trigger_req = k;
		a->reqs[k++] = *r;
	}
	a->nreqs = k;
	k = 0;
	for (uint32_t i = 0; i < b->nreqs; i++) {
		if (b->reqs[i].end <= cut && !(b->reqs[i].flags & KD_REQ_TRUNC_END)) {
			if (i == b->trigger_req)
				b->trigger_req = KD_NONE;
			continue;
		}
		if (i == b->trigger_req)
			b->trigger_req = k;
		b->reqs[k++] = b->reqs[i];
	}
	b->nreqs = k;
	/* b's marks up to the cut go; its runs and off/on-CPU intervals start
	 * after it (a holds them up to there) */
	kd_range_cut_intervals(b, cut + 1, UINT64_MAX);
	free(keep_a);
	free(keep_b);
	kd_umap_free(&bt);
	free(va);
	free(vb);
	free(fa);
	free(fb);
}

/* The cut works on collected calls: a file opened for the stream (text
 * of several files) is collected when it overlaps a snapshot of its
 * process, and only then. */
static void need_calls(struct kd_dec *d)
{
	struct kd_dec_error err;

	if (d->opts.stream && kd_dec_collect(d, &err))
		kd_util_oom("merging files", 0);
}

static struct kd_dec *const *sort_decs;

static int cmp_end(const void *x, const void *y)
{
	const struct kd_dec *a = sort_decs[*(const uint32_t *)x], *b = sort_decs[*(const uint32_t *)y];

	if (a->window_end != b->window_end)
		return a->window_end < b->window_end ? -1 : 1;
	return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

void kd_merge_files(struct kd_dec *const *decs, uint32_t n)
{
	uint32_t *order = kd_xmalloc(((size_t)n + 1) * sizeof(*order), "merging files");
	uint32_t *gid = kd_xmalloc(((size_t)n + 1) * sizeof(*gid), "merging files");
	uint32_t ng = 0;

	/* Process groups, numbered in file order. */
	for (uint32_t i = 0; i < n; i++) {
		gid[i] = KD_NONE;
		if (!decs[i])
			continue;
		for (uint32_t j = 0; j < i && gid[i] == KD_NONE; j++)
			if (decs[j] && kd_merge_same_process(decs[i], decs[j]))
				gid[i] = gid[j];
		if (gid[i] == KD_NONE)
			gid[i] = ng++;
		decs[i]->merge.group = gid[i] + 1;
	}
	for (uint32_t g = 0; g < ng; g++) {
		uint32_t m = 0;

		for (uint32_t i = 0; i < n; i++)
			if (decs[i] && gid[i] == g)
				order[m++] = i;
		sort_decs = decs;
		qsort(order, m, sizeof(*order), cmp_end);
		for (uint32_t k = 1; k < m; k++) {
			struct kd_dec *a = decs[order[k - 1]], *b = decs[order[k]];

			if (b->window_start <= a->window_end) {
				need_calls(a);
				need_calls(b);
				cut_pair(a, b);
			}
		}
	}
	free(order);
	free(gid);
}

int64_t kd_merge_origin(struct kd_dec *const *decs, uint32_t n)
{
	int64_t base = INT64_MAX;

	for (uint32_t i = 0; i < n; i++)
		if (decs[i] && decs[i]->cut.state != 2) { /* 2: nothing of it in the range */
			int64_t w = kd_time_wall_ns(decs[i], decs[i]->window_start);

			if (w < base)
				base = w;
		}
	return base == INT64_MAX ? 0 : base;
}
