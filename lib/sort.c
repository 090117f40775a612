/*
 * sort.c - an in-place sort for the writer thread.  qsort() mallocs a
 * buffer for an array of 1 KiB or more (glibc's merge sort), and the
 * writer thread never mallocs (snapfile.c): a malloc arena of its own
 * would reserve 64 MiB of the program's address space, and under a
 * replaced malloc it would run the program's allocator, traced code
 * perhaps, from inside the loader's lock (lean.c sorts a batch's pages
 * in dl_iterate_phdr's callback).  A heapsort: no memory, n log n in the
 * worst case; not stable, so every caller's order is total or does not
 * care about ties.
 */
#include "internal.h"

static KT_NOINSTR void swap_bytes(char *a, char *b, size_t size)
{
	while (size-- > 0) {
		char t = *a;

		*a++ = *b;
		*b++ = t;
	}
}

/* The heap rooted at root, of n elements: its root moved down to its
 * place. */
static KT_NOINSTR void sift_down(char *base, size_t root, size_t n, size_t size,
                                 int (*cmp)(const void *, const void *))
{
	for (;;) {
		size_t child = 2 * root + 1;

		if (child >= n)
			return;
		if (child + 1 < n && cmp(base + child * size, base + (child + 1) * size) < 0)
			child++;
		if (cmp(base + root * size, base + child * size) >= 0)
			return;
		swap_bytes(base + root * size, base + child * size, size);
		root = child;
	}
}

KT_NOINSTR void ktrace__sort(void *base, size_t n, size_t size,
                             int (*cmp)(const void *, const void *))
{
	char *b = base;

	if (n < 2)
		return;
	for (size_t i = n / 2; i-- > 0;)
		sift_down(b, i, n, size, cmp);
	for (size_t end = n - 1; end > 0; end--) {
		swap_bytes(b, b + end * size, size);
		sift_down(b, 0, end, size, cmp);
	}
}
