/*
 * calltree.h - calltree.c: one builder of merged call trees (nodes keyed by
 * parent node and function), shared by folded and explain.
 */
#ifndef KD_CALLTREE_H
#define KD_CALLTREE_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"
#include "util.h"

enum kd_ctree_kind {
	KD_CTREE_FUNC = 0,    /* func: a function index */
	KD_CTREE_THREAD = 1,  /* a thread's root (thread_roots): func = thread index */
	KD_CTREE_CUT = 2,     /* everything below max_depth frames (func NONE) */
};

struct kd_ctree_node {
	uint32_t parent;          /* node index, KD_NONE for a root */
	uint32_t func;            /* see enum kd_ctree_kind */
	uint32_t kind;            /* enum kd_ctree_kind */
	uint32_t depth;           /* nodes above it (a root: 0) */
	uint32_t cut;             /* CUT node: the most frames cut below its parent */
	uint32_t first_child, next_sibling; /* set by kd_ctree_link */
};

struct kd_ctree {
	struct kd_ctree_node *n;
	uint32_t nn, cap;
	unsigned char *data;      /* nn payloads of esize bytes, zeroed when created */
	size_t esize;
	int thread_roots;         /* calls without a placed parent hang under their thread */
	uint32_t max_depth;       /* cut below this depth (0: never) */
	struct kd_umap map;   /* (parent node + 1, func) -> node */
	uint32_t *chain;          /* scratch for kd_ctree_place */
	uint32_t capchain;
	int oom;                  /* a map insertion failed: the tree is incomplete */
};

void kd_ctree_init(struct kd_ctree *t, size_t esize, int thread_roots,
                        uint32_t max_depth);
void kd_ctree_free(struct kd_ctree *t);
void *kd_ctree_data(const struct kd_ctree *t, uint32_t node);
/* A thread's root node (thread_roots trees). */
uint32_t kd_ctree_root(struct kd_ctree *t, uint32_t thread);
/* The node of func called from node parent (KD_NONE: a root), at
 * `frames` frames below the thread root (for the cut count).  NONE: oom. */
uint32_t kd_ctree_child(struct kd_ctree *t, uint32_t parent, uint32_t func,
                             uint32_t frames);
/* Place call i of d (and its callers that keep() accepts, NULL: all) in the
 * tree: node_of[] (d->ncalls entries, KD_NONE = not placed) and
 * optional frames[] (depth below the thread root) are filled for them.
 * Returns i's node, NONE if out of memory. */
uint32_t kd_ctree_place(struct kd_ctree *t, const struct kd_dec *d,
                             uint32_t *node_of, uint32_t *frames, uint32_t i,
                             int (*keep)(const struct kd_dec *d, uint32_t call, void *arg),
                             void *arg);
/* Link children in cmp order (NULL: creation order); *roots (malloc'ed, free
 * it) gets the roots in that order.  0. */
int kd_ctree_link(struct kd_ctree *t,
                       int (*cmp)(const struct kd_ctree *t, uint32_t a, uint32_t b, void *arg),
                       void *arg, uint32_t **roots, uint32_t *nroots);

#endif /* KD_CALLTREE_H */
