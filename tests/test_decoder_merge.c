/*
 * test_decoder_merge.c - merge.c: two overlapping snapshots of one process
 * show every call once.  A holds main() [100, still open at its end 1000]
 * and work() at 200 and 600; B (window from 500) holds work() at 600 again,
 * work() at 1200 and main()'s exit at 1800.  Merged: main() once, from 100
 * to 1800; work() three times.  The two files number their functions in a
 * different order (B meets work() first), so frames must be matched by
 * name, not by index.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder.h"
#include "snapbuild.h"
#include "decode_or_fail.h"

static uint32_t count(struct kd_dec *const *d, int n, const char *name, const struct kd_dec_call **last)
{
	uint32_t k = 0;

	for (int f = 0; f < n; f++)
		for (uint32_t i = 0; i < d[f]->ncalls; i++)
			if (!strcmp(kd_names_func(d[f], d[f]->calls[i].func), name)) {
				k++;
				if (last)
					*last = &d[f]->calls[i];
			}
	return k;
}

static void test_merge_two_snapshots_of_one_process(void **state)
{
	struct snapbuild *a = snapbuild_new(), *b = snapbuild_new();
	struct kd_dec *d[2];
	const struct kd_dec_call *m = NULL;

	(void)state;
	snapbuild_func(a, 0, 0xA000); /* main */
	snapbuild_func(a, 1, 0xB000); /* work */
	snapbuild_enter(a, 0, 1, 100, 0);
	snapbuild_enter(a, 0, 1, 200, 1);
	snapbuild_exit(a, 0, 1, 300, 1);
	snapbuild_enter(a, 0, 1, 600, 1);
	snapbuild_exit(a, 0, 1, 700, 1);
	snapbuild_mark(a, 0, 1, 1000, 7, 1);
	snapbuild_func(b, 0, 0xA000);
	snapbuild_func(b, 1, 0xB000);
	snapbuild_mark(b, 0, 1, 500, 7, 2);
	snapbuild_enter(b, 0, 1, 600, 1);
	snapbuild_exit(b, 0, 1, 700, 1);
	snapbuild_enter(b, 0, 1, 1200, 1);
	snapbuild_exit(b, 0, 1, 1300, 1);
	snapbuild_exit(b, 0, 1, 1800, 0);
	d[0] = decode(a);
	d[1] = decode(b);
	assert_true(kd_merge_same_process(d[0], d[1]));
	assert_int_equal(d[0]->window_end, 1000);
	assert_true(d[1]->window_start <= 1000);
	/* the indices differ between the files */
	assert_int_not_equal(d[0]->calls[0].func, d[1]->calls[0].func);
	assert_int_equal(count(d, 2, "0xa000", NULL), 2);
	assert_int_equal(count(d, 2, "0xb000", NULL), 4);

	kd_merge_files(d, 2);
	assert_int_equal(count(d, 2, "0xb000", NULL), 3);
	assert_int_equal(count(d, 2, "0xa000", &m), 1);
	assert_int_equal(m->begin, 100);
	assert_int_equal(m->end, 1800);
	assert_false(m->flags & (KD_CALL_TRUNC_BEGIN | KD_CALL_TRUNC_END));
	assert_int_equal(d[1]->merge.cut, 1000);
	assert_int_equal(d[1]->merge.joined, 1);
	assert_int_equal(d[1]->merge.dropped, 1);
	/* b's mark at 500 is a's business: b keeps none up to the cut */
	assert_int_equal(d[1]->nmarks, 0);
	kd_dec_free(d[0]);
	kd_dec_free(d[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_two_snapshots_of_one_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
