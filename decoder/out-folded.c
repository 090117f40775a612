/*
 * out-folded.c - folded stacks (--format folded) from the event stream:
 * "thread;outer;...;inner <self ns>" per distinct stack, for flamegraph.pl.
 *
 * Memory: one node per distinct stack (a tree keyed by (parent node, func))
 * and, per thread, its open frames' nodes; nothing per call.  Stacks deeper
 * than KD_FOLD_DEPTH frames are cut: everything deeper goes into one marker
 * frame "[up_to_N_frames_cut]" under the last kept frame (N: the most
 * frames cut there), so self times still add up.  Lines come in the order
 * their stacks were first seen.
 */
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kd_time.h"
#include "names.h"
#include "out-folded.h"
#include "result.h"
#include "sink.h"
#include "stream.h"
#include "util.h"

struct fnode {
	uint32_t parent;          /* node index or KD_NONE (thread root) */
	uint32_t func;            /* func index, thread index for a root, KD_NONE
	                             for a cut marker */
	uint64_t self;            /* ticks */
	uint32_t depth;           /* frames below the thread root (root 0) */
	uint32_t cut;             /* cut marker: the most frames cut below its parent */
	uint32_t last_func;       /* the child looked up last (a one-entry cache in */
	uint32_t last_child;      /*   front of the map: calls repeat), or KD_NONE */
};

struct folded {
	const struct kd_out_opts *o;
	struct kd_umap map;       /* (parent node, func) -> node; roots: 1 << 63 | thread */
	struct fnode *nodes;
	uint32_t nn;
	size_t capn;
	uint32_t *stack;          /* the current thread's open frames' nodes */
	size_t caps;
	uint32_t depth;
	uint32_t root;            /* the current thread's root node, or KD_NONE */
	int skip;                 /* the current thread is not --thread's */
};

static uint32_t node_get(struct folded *t, uint64_t key, uint32_t parent, uint32_t func)
{
	uint32_t node = kd_umap_get(&t->map, key);

	if (node != KD_NONE)
		return node;
	if (kd_grow(&t->nodes, &t->capn, t->nn, sizeof(*t->nodes), "folded stacks"))
		kd_util_oom("folded stacks", SIZE_MAX);
	t->nodes[t->nn] = (struct fnode){ parent, func, 0, 0, 0, KD_NONE, KD_NONE };
	if (parent != KD_NONE)
		t->nodes[t->nn].depth = t->nodes[parent].depth + 1;
	if (kd_umap_put(&t->map, key, t->nn))
		kd_util_oom("folded stacks", SIZE_MAX);
	return t->nn++;
}

static void folded_ev(void *ctx, const struct kd_dec *d, const struct kd_ev *e)
{
	struct folded *t = ctx;
	uint32_t parent, node, frames;

	if (e->kind == KD_EV_THREAD_BEGIN) {
		t->depth = 0;
		t->root = KD_NONE;
		t->skip = t->o && t->o->have_tid && d->threads[e->thread].tid != t->o->tid;
		return;
	}
	if (t->skip)
		return; /* --thread: another thread's */
	switch (e->kind) {
	case KD_EV_CALL_BEGIN:
		if (t->root == KD_NONE)
			t->root = node_get(t, (1ull << 63) | e->thread, KD_NONE, e->thread);
		parent = t->depth ? t->stack[t->depth - 1] : t->root;
		frames = t->depth + 1; /* this call's frames below the thread root */
		if (t->nodes[parent].func == KD_NONE)
			node = parent; /* below a cut marker: the marker */
		else if (t->nodes[parent].depth >= KD_FOLD_DEPTH)
			node = node_get(t, ((uint64_t)parent << 32) | KD_NONE, parent, KD_NONE);
		else if (t->nodes[parent].last_func == e->func)
			node = t->nodes[parent].last_child;
		else {
			node = node_get(t, ((uint64_t)parent << 32) | e->func, parent, e->func);
			t->nodes[parent].last_func = e->func;
			t->nodes[parent].last_child = node;
		}
		if (t->nodes[node].func == KD_NONE && frames - KD_FOLD_DEPTH > t->nodes[node].cut)
			t->nodes[node].cut = frames - KD_FOLD_DEPTH;
		if (t->depth >= t->caps &&
		    kd_grow(&t->stack, &t->caps, t->depth, sizeof(*t->stack), "folded stacks"))
			kd_util_oom("folded stacks", SIZE_MAX);
		t->stack[t->depth++] = node;
		return;
	case KD_EV_CALL_END:
		if (t->depth)
			t->nodes[t->stack[--t->depth]].self += e->self;
		return;
	default:
		return;
	}
}

static void put_clean(FILE *f, const char *s)
{
	/* flamegraph.pl splits on ';' and the last ' ': keep names clean */
	for (; *s; s++)
		fputc(*s == ';' || *s == ' ' ? '_' : *s, f);
}

int kd_out_folded_stream(FILE *f, struct kd_dec *d, const struct kd_out_opts *o)
{
	struct folded t;
	struct kd_dec_error err;
	uint32_t *path = NULL;
	size_t capp = 0;
	char lbl[64];
	int rc;

	memset(&t, 0, sizeof(t));
	t.o = o;
	t.root = KD_NONE;
	rc = kd_range_walk_cut(d, (struct kd_sink){ folded_ev, &t }, &err);
	/* One line per node with self time: root first. */
	for (uint32_t i = 0; i < t.nn && !rc; i++) {
		uint32_t n = 0;

		if (t.nodes[i].parent == KD_NONE || !t.nodes[i].self)
			continue;
		for (uint32_t c = i; c != KD_NONE; c = t.nodes[c].parent) {
			if (kd_grow(&path, &capp, n, sizeof(*path), "folded stacks"))
				kd_util_oom("folded stacks", SIZE_MAX);
			path[n++] = c;
		}
		while (n--) {
			const struct fnode *x = &t.nodes[path[n]];

			if (x->parent == KD_NONE) {
				put_clean(f, kd_names_thread(d, x->func, lbl, sizeof(lbl)));
			} else if (x->func == KD_NONE) {
				fprintf(f, ";[up_to_%" PRIu32 "_frames_cut]", x->cut);
			} else {
				fputc(';', f);
				put_clean(f, kd_names_func(d, x->func));
			}
		}
		fprintf(f, " %" PRIu64 "\n", kd_time_ticks_ns(d, t.nodes[i].self));
	}
	kd_umap_free(&t.map);
	free(t.nodes);
	free(t.stack);
	free(path);
	return rc ? -1 : 0;
}
