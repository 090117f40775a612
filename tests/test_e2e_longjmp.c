/*
 * test_e2e_longjmp.c - a real traced program leaves 50 traced frames by
 * longjmp (issue 11, item 12).  The decoder closes them when the frame that
 * called setjmp returns: 50 calls flagged "exit lost", counted apart from
 * calls still running at the window end, and no phantom frame left open
 * with later calls nested under it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_longjmp"

static void test_e2e_longjmp_exits_lost(void **state)
{
	char *dir = kt_mkdtemp("longjmp");
	char envdir[300], line[4600], path[4400];
	const char *env[] = { envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", NULL };
	char *argv[] = { (char *)PROG, NULL };
	char *dargv[] = { (char *)KTRACE_DECODE_PATH, path, NULL };
	struct kt_proc p, dp;
	uint64_t dive = 0, lost = 0, at_end = 0;
	int rc;

	(void)state;
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	assert_int_equal(kt_expect_line(&p, "snapshot ", line, sizeof(line), 30000), 0);
	assert_int_equal(sscanf(line, "snapshot %d %4399s", &rc, path), 2);
	assert_int_equal(rc, 0);
	if (kt_wait(&p, 30000) != 0)
		fail_msg("status %#x, stderr:\n%s", p.status, p.err);

	struct ktrace_dec *d = kd_open(path);
	assert_non_null(d);
	uint32_t th = kd_thread_tid(d, p.pid);
	assert_int_not_equal(th, KTRACE_DEC_NONE);
	assert_int_equal(d->lost_exits, 50);
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct ktrace_dec_call *c = &d->calls[i];
		int is_lost = !!(c->flags & KTRACE_CALL_EXIT_LOST);

		if (c->thread != th)
			continue;
		lost += is_lost;
		if ((c->flags & KTRACE_CALL_TRUNC_END) && !is_lost) {
			/* Only main is still running at the snapshot. */
			at_end++;
			assert_true(kd_is(d, c, "main"));
		}
		if (kd_is(d, c, "dive")) {
			dive++;
			assert_true(is_lost);
			/* Closed by catcher's exit, inside it. */
			assert_true(c->parent < d->ncalls);
			assert_true(c->end <= d->calls[c->parent].end);
		} else {
			assert_false(is_lost);
		}
		if (kd_is(d, c, "work")) {
			/* After catcher returned: under main, not under a phantom. */
			assert_true(c->parent < d->ncalls);
			assert_true(kd_is(d, &d->calls[c->parent], "main"));
			assert_false(c->flags & KTRACE_CALL_TRUNC_END);
		}
	}
	assert_int_equal(dive, 50);
	assert_int_equal(lost, 50);
	assert_int_equal(at_end, 1);
	assert_int_equal(kd_count(d, th, "work"), 10);
	assert_int_equal(kd_count(d, th, "catcher"), 1);
	assert_int_equal(kd_count(d, th, "after_jump"), 1);
	ktrace__dec_free(d);

	/* The summary tells them apart from calls cut by the window's end. */
	assert_int_equal(kt_run(dargv, NULL, &dp, 30000), 0);
	if (!strstr(dp.out, "1 at the end, 50 exits lost"))
		fail_msg("summary:\n%s", dp.out);
	kt_proc_free(&dp);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_longjmp_exits_lost),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
