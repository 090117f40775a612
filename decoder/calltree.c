/*
 * calltree.c - the one call-tree builder, shared by --format folded
 * (out-stats.c) and --format explain (out-explain.c).
 *
 * A node is a path: (parent node, function).  Calls on the same path merge
 * into one node, so the tree grows with the number of distinct stacks, not
 * with the number of calls.  Each node carries a payload of the caller's
 * size (zeroed when created): folded keeps self time, explain keeps the
 * slow and the median request's times side by side.
 *
 * Two options shape the tree:
 *   thread_roots  calls without a parent in the tree hang under one root
 *                 node per thread (folded: the thread is the first frame);
 *                 otherwise they are roots themselves (explain).
 *   max_depth     a node this many frames below its root gets no function
 *                 children: one cut node (func KD_NONE) takes
 *                 everything deeper, and its `cut` says the most frames cut
 *                 there (folded: output stays linear in the calls).  0: no
 *                 limit.
 *
 * Streaming users call kd_ctree_child() per entry with the node of the
 * caller; whole-decode users call kd_ctree_place() per call, which
 * resolves the caller chain (a TRUNC_BEGIN parent may come after its
 * children in d->calls).
 */
#include <stdlib.h>
#include <string.h>

#include "calltree.h"
#include "result.h"
#include "util.h"

void kd_ctree_init(struct kd_ctree *t, size_t esize, int thread_roots,
                        uint32_t max_depth)
{
	memset(t, 0, sizeof(*t));
	t->esize = esize;
	t->thread_roots = thread_roots;
	t->max_depth = max_depth;
}

void kd_ctree_free(struct kd_ctree *t)
{
	kd_umap_free(&t->map);
	free(t->n);
	free(t->data);
	free(t->chain);
	memset(t, 0, sizeof(*t));
}

void *kd_ctree_data(const struct kd_ctree *t, uint32_t node)
{
	return t->data + (size_t)node * t->esize;
}

/* The node for key, created as (parent, func, kind) if new. */
static uint32_t get(struct kd_ctree *t, uint64_t key, uint32_t parent, uint32_t func,
                    uint32_t kind)
{
	uint32_t x = kd_umap_get(&t->map, key);
	struct kd_ctree_node *n;

	if (x != KD_NONE)
		return x;
	if (t->oom)
		return KD_NONE;
	if (t->nn >= t->cap) {
		uint32_t nc = t->cap ? t->cap * 2 : 256;

		t->n = kd_xrealloc(t->n, (size_t)nc * sizeof(*t->n), "the call tree");
		t->data = kd_xrealloc(t->data, (size_t)nc * (t->esize ? t->esize : 1),
		                           "the call tree");
		t->cap = nc;
	}
	n = &t->n[t->nn];
	n->parent = parent;
	n->func = func;
	n->kind = kind;
	n->depth = parent == KD_NONE ? 0 : t->n[parent].depth + 1;
	n->cut = 0;
	n->first_child = n->next_sibling = KD_NONE;
	memset(kd_ctree_data(t, t->nn), 0, t->esize);
	if (kd_umap_put(&t->map, key, t->nn)) {
		t->oom = 1;
		return KD_NONE;
	}
	return t->nn++;
}

uint32_t kd_ctree_root(struct kd_ctree *t, uint32_t thread)
{
	/* key space above every (parent, func) key: parent + 1 < 2^32 */
	return get(t, (1ull << 63) | thread, KD_NONE, thread, KD_CTREE_THREAD);
}

uint32_t kd_ctree_child(struct kd_ctree *t, uint32_t parent, uint32_t func,
                             uint32_t frames)
{
	uint32_t x;

	if (parent != KD_NONE && t->n[parent].kind == KD_CTREE_CUT)
		x = parent; /* below a cut node: the cut node */
	else if (parent != KD_NONE && t->max_depth && t->n[parent].depth >= t->max_depth)
		x = get(t, ((uint64_t)(parent + 1) << 32) | KD_NONE, parent, KD_NONE,
		        KD_CTREE_CUT);
	else
		return get(t, ((uint64_t)(parent + 1) << 32) | func, parent, func,
		           KD_CTREE_FUNC);
	if (x != KD_NONE && frames > t->max_depth && frames - t->max_depth > t->n[x].cut)
		t->n[x].cut = frames - t->max_depth;
	return x;
}

uint32_t kd_ctree_place(struct kd_ctree *t, const struct kd_dec *d,
                             uint32_t *node_of, uint32_t *frames, uint32_t i,
                             int (*keep)(const struct kd_dec *d, uint32_t call, void *arg),
                             void *arg)
{
	uint32_t n = 0;

	if (node_of[i] != KD_NONE)
		return node_of[i];
	/* The chain of kept callers not placed yet, innermost first. */
	for (uint32_t c = i; c < d->ncalls && node_of[c] == KD_NONE;
	     c = d->calls[c].parent) {
		if (c != i && keep && !keep(d, c, arg))
			break;
		if (n >= t->capchain) {
			uint32_t nc = t->capchain ? t->capchain * 2 : 64;

			t->chain = kd_xrealloc(t->chain, (size_t)nc * sizeof(*t->chain),
			                            "the call tree");
			t->capchain = nc;
		}
		t->chain[n++] = c;
		if (n > d->ncalls)
			break; /* cannot happen: parent chains are acyclic */
	}
	while (n--) {
		uint32_t c = t->chain[n], p = d->calls[c].parent, pn, fr;

		if (p < d->ncalls && node_of[p] != KD_NONE) {
			pn = node_of[p];
			fr = frames ? frames[p] + 1 : 0;
		} else {
			pn = t->thread_roots ? kd_ctree_root(t, d->calls[c].thread)
			                     : KD_NONE;
			fr = 1;
			if (t->thread_roots && pn == KD_NONE)
				break;
		}
		if (frames)
			frames[c] = fr;
		node_of[c] = kd_ctree_child(t, pn, d->calls[c].func, fr);
		if (node_of[c] == KD_NONE)
			break;
	}
	return node_of[i];
}

/* Sort state for kd_ctree_link (qsort has no context argument). */
static int (*link_cmp)(const struct kd_ctree *t, uint32_t a, uint32_t b, void *arg);
static const struct kd_ctree *link_t;
static void *link_arg;

static int cmp_link(const void *a, const void *b)
{
	return link_cmp(link_t, *(const uint32_t *)a, *(const uint32_t *)b, link_arg);
}

int kd_ctree_link(struct kd_ctree *t,
                       int (*cmp)(const struct kd_ctree *t, uint32_t a, uint32_t b, void *arg),
                       void *arg, uint32_t **roots, uint32_t *nroots)
{
	uint32_t *order = kd_xmalloc(((size_t)t->nn + 1) * sizeof(*order), "the call tree");
	uint32_t nr = 0;

	for (uint32_t i = 0; i < t->nn; i++) {
		order[i] = i;
		t->n[i].first_child = t->n[i].next_sibling = KD_NONE;
	}
	if (cmp && t->nn > 1) {
		link_cmp = cmp;
		link_t = t;
		link_arg = arg;
		qsort(order, t->nn, sizeof(*order), cmp_link);
	}
	/* Prepend in reverse order: every child list ends up in cmp order. */
	for (uint32_t k = t->nn; k-- > 0;) {
		struct kd_ctree_node *x = &t->n[order[k]];

		if (x->parent == KD_NONE)
			continue;
		x->next_sibling = t->n[x->parent].first_child;
		t->n[x->parent].first_child = order[k];
	}
	for (uint32_t k = 0; k < t->nn; k++)
		if (t->n[order[k]].parent == KD_NONE)
			order[nr++] = order[k];
	*roots = order;
	*nroots = nr;
	return 0;
}
