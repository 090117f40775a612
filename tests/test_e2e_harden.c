/*
 * test_e2e_harden.c - the decoder on real snapshots in hostile situations
 * (issue 11):
 *
 *   longjmp      a real traced program leaves 50 traced frames by longjmp.
 *                The decoder closes them when the frame that called setjmp
 *                returns: 50 calls flagged "exit lost", counted apart from
 *                calls still running at the window end, and no phantom
 *                frame left open with later calls nested under it.
 *   module_fifo  the executable a real snapshot names is a FIFO now (via
 *                --sysroot): ktrace-decode answers promptly, with a warning
 *                and numeric names, instead of blocking in open().
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

/* Run e2e_longjmp in a fresh KTRACE_DIR; its snapshot path into path. */
static void take_snapshot(char *dir, char *path, size_t len, struct kt_proc *p)
{
	char envdir[300], line[4600];
	const char *env[] = { envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", NULL };
	char *argv[] = { (char *)PROG, NULL };
	char fmt[32];
	int rc;

	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	snprintf(fmt, sizeof(fmt), "snapshot %%d %%%zus", len - 1);
	assert_int_equal(kt_spawn(p, argv, env, NULL), 0);
	assert_int_equal(kt_expect_line(p, "snapshot ", line, sizeof(line), 30000), 0);
	assert_int_equal(sscanf(line, fmt, &rc, path), 2);
	assert_int_equal(rc, 0);
	if (kt_wait(p, 30000) != 0)
		fail_msg("status %#x, stderr:\n%s", p->status, p->err);
}

static void test_e2e_harden_longjmp_exits_lost(void **state)
{
	char *dir = kt_mkdtemp("longjmp");
	char path[4400];
	char *dargv[] = { (char *)KTRACE_DECODE_PATH, path, NULL };
	struct kt_proc p, dp;
	uint64_t dive = 0, lost = 0, at_end = 0;

	(void)state;
	take_snapshot(dir, path, sizeof(path), &p);

	struct kd_dec *d = kd_open(path);
	assert_non_null(d);
	uint32_t th = kd_thread_tid(d, p.pid);
	assert_int_not_equal(th, KD_NONE);
	assert_int_equal(d->lost_exits, 50);
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		int is_lost = !!(c->flags & KD_CALL_EXIT_LOST);

		if (c->thread != th)
			continue;
		lost += is_lost;
		if ((c->flags & KD_CALL_TRUNC_END) && !is_lost) {
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
			assert_false(c->flags & KD_CALL_TRUNC_END);
		}
	}
	assert_int_equal(dive, 50);
	assert_int_equal(lost, 50);
	assert_int_equal(at_end, 1);
	assert_int_equal(kd_count(d, th, "work"), 10);
	assert_int_equal(kd_count(d, th, "catcher"), 1);
	assert_int_equal(kd_count(d, th, "after_jump"), 1);
	kd_dec_free(d);

	/* The summary tells them apart from calls cut by the window's end. */
	assert_int_equal(kt_run(dargv, NULL, &dp, 30000), 0);
	if (!strstr(dp.out, "1 at the end, 50 exits lost"))
		fail_msg("summary:\n%s", dp.out);
	kt_proc_free(&dp);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

static void test_e2e_harden_module_fifo(void **state)
{
	char *dir = kt_mkdtemp("modfifo");
	char path[4400], sysroot[4400], fifo[9000], cmd[18100], exe[4096];
	char *dargv[] = { (char *)KTRACE_DECODE_PATH, "--sysroot", sysroot, "--format", "text",
		          path, NULL };
	struct kt_proc p, dp;
	int64_t t0;

	(void)state;
	take_snapshot(dir, path, sizeof(path), &p);
	/* The sysroot holds the executable's recorded path, as a FIFO. */
	assert_non_null(realpath(PROG, exe));
	snprintf(sysroot, sizeof(sysroot), "%s/root", dir);
	snprintf(fifo, sizeof(fifo), "%s%s", sysroot, exe);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && mkfifo '%s'", fifo, fifo);
	assert_int_equal(system(cmd), 0);

	t0 = kt_now_ms();
	if (kt_run(dargv, NULL, &dp, 30000) != 0)
		fail_msg("ktrace-decode status %#x after %lld ms (killed if it hung); stderr:\n%s",
		         dp.status, (long long)(kt_now_ms() - t0), dp.err);
	if (!strstr(dp.err, "a FIFO"))
		fail_msg("no warning about the FIFO; stderr:\n%s", dp.err);
	/* The program's own functions stay numeric; the timeline is whole. */
	assert_null(strstr(dp.out, " dive "));
	assert_non_null(strstr(dp.out, "(e2e_longjmp+0x"));
	assert_non_null(strstr(dp.out, "50 exits lost"));
	kt_proc_free(&dp);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_harden_longjmp_exits_lost),
		cmocka_unit_test(test_e2e_harden_module_fifo),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
