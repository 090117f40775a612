/*
 * test_lib_sort.c - the writer thread's sort (lib/sort.c), which stands in
 * for qsort() because qsort() mallocs above 1 KiB and the writer never
 * mallocs: the same order as qsort() gives, for every length from 0 to
 * 300 and a few large ones, in 8- and 16-byte elements (a batch's pages,
 * scheduling records), with runs of equal keys, sorted and reversed input.
 * Equal keys may come out in any order (not stable), so the 16-byte
 * records are compared by key only, and their payloads must still be a
 * permutation of the input's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "ktest.h"

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	return kt_xorshift(&rnd_state);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct rec {
	int64_t key;
	uint64_t payload;
};

static int cmp_rec(const void *a, const void *b)
{
	int64_t x = ((const struct rec *)a)->key, y = ((const struct rec *)b)->key;

	return x < y ? -1 : x > y;
}

static int cmp_payload(const void *a, const void *b)
{
	return cmp_u64(&((const struct rec *)a)->payload, &((const struct rec *)b)->payload);
}

/* shape 0: random keys; 1: few distinct keys; 2: sorted; 3: reversed */
static uint64_t key(size_t i, size_t n, int shape)
{
	switch (shape) {
	case 0: return rnd();
	case 1: return rnd() % 4;
	case 2: return i;
	default: return n - i;
	}
}

static void check_u64(size_t n, int shape)
{
	uint64_t *a = malloc((n + 1) * sizeof(*a)), *b = malloc((n + 1) * sizeof(*b));

	assert_non_null(a);
	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		a[i] = b[i] = key(i, n, shape);
	ktrace__sort(a, n, sizeof(a[0]), cmp_u64);
	qsort(b, n, sizeof(b[0]), cmp_u64);
	if (n > 0 && memcmp(a, b, n * sizeof(a[0])) != 0)
		fail_msg("n=%zu shape %d: not qsort's order", n, shape);
	free(a);
	free(b);
}

static void check_rec(size_t n, int shape)
{
	struct rec *a = malloc((n + 1) * sizeof(*a)), *b = malloc((n + 1) * sizeof(*b));

	assert_non_null(a);
	assert_non_null(b);
	for (size_t i = 0; i < n; i++) {
		a[i].key = (int64_t)key(i, n, shape) - (int64_t)(n / 2);
		a[i].payload = i;
		b[i] = a[i];
	}
	ktrace__sort(a, n, sizeof(a[0]), cmp_rec);
	qsort(b, n, sizeof(b[0]), cmp_rec);
	for (size_t i = 0; i < n; i++)
		if (a[i].key != b[i].key)
			fail_msg("n=%zu shape %d: key %zu out of order", n, shape, i);
	/* every record once: the payloads are 0..n-1 */
	qsort(a, n, sizeof(a[0]), cmp_payload);
	for (size_t i = 0; i < n; i++)
		if (a[i].payload != i)
			fail_msg("n=%zu shape %d: record %zu lost or doubled", n, shape, i);
	free(a);
	free(b);
}

static void test_sort_like_qsort(void **state)
{
	static const size_t big[] = {1024, 2016, 4097, 8192};

	(void)state;
	for (int shape = 0; shape < 4; shape++) {
		for (size_t n = 0; n <= 300; n++) {
			check_u64(n, shape);
			check_rec(n, shape);
		}
		for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
			check_u64(big[i], shape);
			check_rec(big[i], shape);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sort_like_qsort),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
