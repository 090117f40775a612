/*
 * test_e2e_merge.c - several snapshot files on one timeline (issue 8), in
 * text, chrome and summary (perfetto: test_e2e_perfetto.c).
 *
 *   pipe   two processes (e2e_calls pipe: parent and forked child) exchange
 *          messages over a pipe, each acknowledged before the next is sent;
 *          each marks every send and receive with its sequence number and
 *          snapshots.  The merged timeline puts every send before its
 *          receive, and that receive before the next send.
 *   files  two snapshots of one process (e2e_calls files, 8 MiB rings: the
 *          second window holds the first round too): every call shows once,
 *          main() (open across the first snapshot) as one call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "ktest.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_calls"
#define NMSG 200
#define NWORKERS 8

/* See test_e2e_perfetto.c: GCC 12's ASan runtime is not fork-safe in a
 * multithreaded process. */
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_FORK_UNDER_ASAN() skip()
#else
#define SKIP_FORK_UNDER_ASAN() do { } while (0)
#endif

/* Occurrences of needle in hay: a plain scan (kt_count_str's strstr loop
 * costs the rest of the text per match under TSan's interceptors, minutes
 * on these megabytes). */
static long count_sub(const char *hay, const char *needle)
{
	size_t nl = strlen(needle);
	long n = 0;

	if (!hay)
		return 0;
	for (const char *p = hay; *p; p++)
		if (*p == *needle && !strncmp(p, needle, nl)) {
			n++;
			p += nl - 1;
		}
	return n;
}

static void expect_snapshot(struct kt_proc *p, const char *prefix, char *path, size_t len)
{
	char line[4600], fmt[64];
	int rc;

	snprintf(fmt, sizeof(fmt), "%s%%d %%%zus", prefix, len - 1);
	assert_int_equal(kt_expect_line(p, prefix, line, sizeof(line), 30000), 0);
	assert_int_equal(sscanf(line, fmt, &rc, path), 2);
	assert_int_equal(rc, 0);
}

static int decode(struct kt_proc *p, const char *fmt, const char *a, const char *b)
{
	char *argv[] = { (char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)fmt, (char *)a,
		         (char *)b, NULL };

	kt_run(argv, NULL, p, 60000);
	return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
}

/* Every send i before receive i before send i + 1, in order of position
 * (pos) and of time (t). */
static void check_order(const char *what, const long long *spos, const long long *rpos,
                        const double *st, const double *rt)
{
	for (int i = 0; i < NMSG; i++) {
		if (spos[i] < 0 || rpos[i] < 0)
			fail_msg("%s: message %d: send or receive missing", what, i);
		if (spos[i] >= rpos[i] || st[i] >= rt[i])
			fail_msg("%s: message %d received (at %.3f) before it was sent (at %.3f)", what, i,
			         rt[i], st[i]);
		if (i + 1 < NMSG && (rpos[i] >= spos[i + 1] || rt[i] >= st[i + 1]))
			fail_msg("%s: message %d received after the next was sent", what, i);
	}
}

static double tod_s(const char *l)
{
	int h, m;
	double s;

	if (sscanf(l, "%d:%d:%lf", &h, &m, &s) != 3)
		return -1;
	return h * 3600.0 + m * 60.0 + s;
}

static void test_e2e_merge_pipe(void **state)
{
	char *dir;
	char envdir[700], snaps[2][4400], nmsg[16];
	const char *env[] = { envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", NULL };
	char *argv[] = { (char *)PROG, (char *)"pipe", nmsg, NULL };
	long long spos[NMSG], rpos[NMSG];
	double st[NMSG], rt[NMSG];
	struct kt_proc p;
	long long pos = 0;

	(void)state;
	SKIP_FORK_UNDER_ASAN();
	/* Under qemu-user the forked traced child loses the emulator's plugin
	 * layer (as test_e2e_perfetto's pipe case, disabled there). */
	if (getenv("KTRACE_TEST_EMULATOR") && *getenv("KTRACE_TEST_EMULATOR"))
		skip();
	dir = kt_mkdtemp("mergepipe");
	snprintf(nmsg, sizeof(nmsg), "%d", NMSG);
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	expect_snapshot(&p, "child ", snaps[0], sizeof(snaps[0]));
	expect_snapshot(&p, "snapshot ", snaps[1], sizeof(snaps[1]));
	kt_close_stdin(&p);
	assert_int_equal(kt_wait(&p, 30000), 0);
	kt_proc_free(&p);

	/* text: "[N] HH:MM:SS.nnnnnnnnn  thread  cpu  * mark send = i (0x..)" */
	for (int i = 0; i < NMSG; i++)
		spos[i] = rpos[i] = -1;
	assert_int_equal(decode(&p, "text", snaps[0], snaps[1]), 0);
	assert_non_null(strstr(p.out, "merged timeline of 2 files"));
	assert_int_equal(count_sub(p.out, "clock offset used +0 ns"), 2);
	for (const char *l = p.out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
		const char *m;
		int file, v;

		if (sscanf(l, "[%d] ", &file) != 1)
			continue;
		pos++;
		m = strstr(l, "* mark ");
		if (!m || m > strchr(l, '\n'))
			continue;
		if (sscanf(m, "* mark send = %d", &v) == 1 && v >= 0 && v < NMSG) {
			spos[v] = pos;
			st[v] = tod_s(strchr(l, ' ') + 1);
		} else if (sscanf(m, "* mark recv = %d", &v) == 1 && v >= 0 && v < NMSG) {
			rpos[v] = pos;
			rt[v] = tod_s(strchr(l, ' ') + 1);
		}
	}
	check_order("text", spos, rpos, st, rt);
	kt_proc_free(&p);

	/* chrome: {"ph":"i",...,"name":"send",...,"ts":N,"args":{"value":i}} */
	for (int i = 0; i < NMSG; i++)
		spos[i] = rpos[i] = -1;
	assert_int_equal(decode(&p, "chrome", snaps[1], snaps[0]), 0);
	for (const char *e = p.out; (e = strstr(e, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"mark\"")); e++) {
		const char *ts = strstr(e, "\"ts\":"), *val = strstr(e, "\"value\":");
		int send = !strncmp(strstr(e, "\"name\":") + 7, "\"send\"", 6);
		int recv = !strncmp(strstr(e, "\"name\":") + 7, "\"recv\"", 6);
		int v;

		if (!ts || !val || (!send && !recv))
			continue;
		v = atoi(val + 8);
		if (v < 0 || v >= NMSG)
			continue;
		/* chrome has no order but time: position = time */
		if (send) {
			st[v] = atof(ts + 5);
			spos[v] = (long long)(st[v] * 1000);
		} else {
			rt[v] = atof(ts + 5);
			rpos[v] = (long long)(rt[v] * 1000);
		}
	}
	check_order("chrome", spos, rpos, st, rt);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

static void test_e2e_merge_snapshots_of_one_process(void **state)
{
	char *dir = kt_mkdtemp("mergefiles");
	char envdir[700], line[4500], snaps[2][4400];
	const char *env[] = { envdir, "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=8", "KTRACE_ENABLE", NULL };
	char *argv[] = { (char *)PROG, (char *)"files", NULL };
	struct kt_proc p;
	long total = 0, n;

	(void)state;
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	assert_int_equal(kt_expect_line(&p, "pid ", line, sizeof(line), 30000), 0);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(kt_send(&p, "snap\n"), 0);
		expect_snapshot(&p, "snapshot ", snaps[k], sizeof(snaps[k]));
	}
	kt_close_stdin(&p);
	assert_int_equal(kt_wait(&p, 30000), 0);
	kt_proc_free(&p);
	for (int i = 0; i < NWORKERS; i++)
		total += 2 * (i + 1) * 300;

	/* text, newest file first: order must not matter */
	assert_int_equal(decode(&p, "text", snaps[1], snaps[0]), 0);
	n = count_sub(strstr(p.out, "==> all files <=="), " leaf_a  ");
	if (n != total)
		fail_msg("%ld leaf_a lines in the merged text, the program made %ld calls", n, total);
	assert_int_equal(count_sub(strstr(p.out, "==> all files <=="), " worker_main  "),
	                 2 * NWORKERS);
	assert_int_equal(count_sub(strstr(p.out, "==> all files <=="), " run_workers  "), 2);
	assert_int_equal(count_sub(strstr(p.out, "==> all files <=="), " main  "), 1);
	assert_non_null(strstr(p.out, "overlaps an earlier snapshot of process group 1"));
	kt_proc_free(&p);

	assert_int_equal(decode(&p, "chrome", snaps[0], snaps[1]), 0);
	n = count_sub(p.out, "\"name\":\"leaf_a\"");
	if (n != total)
		fail_msg("%ld leaf_a slices in the merged chrome trace, the program made %ld calls", n,
		         total);
	assert_int_equal(count_sub(p.out, "\"name\":\"main\""), 1);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_merge_pipe),
		cmocka_unit_test(test_e2e_merge_snapshots_of_one_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
