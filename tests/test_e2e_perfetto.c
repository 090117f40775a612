/*
 * test_e2e_perfetto.c - ktrace-decode --format perfetto on real snapshots of
 * a traced program (e2e/traced_calls.c) that knows what it called.  The
 * trace is decoded by protoc against Perfetto's field numbers
 * (tests/perfetto/perfetto_subset.proto) and checked by
 * tests/perfetto/check_pftrace.py (slices nest on every track, times never
 * go back per sequence, interned names resolve); then every function's count
 * per thread is compared with what the program did, and the size per call
 * with the Chrome JSON of the same snapshot.
 *
 *   calls: one snapshot (8 workers, known counts).
 *   merge: two snapshots of one process ("files" mode, two rounds of work):
 *          merged, every call of both rounds appears exactly once, and the
 *          frames open at the first snapshot (main, snap) are one slice.
 *   pipe:  two processes (parent and forked child) exchange messages over a
 *          pipe, each acknowledged before the next is sent, each process
 *          snapshotted; in the trace of both files, lined up on their own
 *          wall-clock anchors, every send is before its receive and every
 *          receive before the next send.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"
#include "perfetto/pfcheck.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_calls"
#define NWORKERS 8

static char *decode_check(char *const *files, int n, const char *out, const char *fmt)
{
	char *argv[16] = {(char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)fmt,
	                  (char *)"-q", (char *)"-o", (char *)out};
	struct kt_proc p;
	char why[256];
	char *res;
	int a = 6;

	for (int i = 0; i < n && a < 15; i++)
		argv[a++] = files[i];
	argv[a] = NULL;
	if (kt_run(argv, NULL, &p, 120000) != 0)
		fail_msg("ktrace-decode --format %s failed: %s", fmt, p.err ? p.err : "");
	kt_proc_free(&p);
	if (strcmp(fmt, "perfetto") != 0)
		return NULL;
	res = pf_check(out, why, sizeof(why));
	if (!res)
		fail_msg("%s", why);
	return res;
}

/* Count on the checker line "slices <pid> <tid> <thread> <func>" summed
 * over threads whose name starts with thread (NULL: any). */
static long slices(const char *out, const char *thread, const char *func)
{
	long sum = 0;
	char th[128], fn[256];
	long c;

	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, "slices ", 7) != 0)
			continue;
		if (sscanf(l, "slices %*d %*d %127s %255s %ld", th, fn, &c) != 3)
			continue;
		if (strcmp(fn, func) != 0)
			continue;
		if (thread && strncmp(th, thread, strlen(thread)) != 0)
			continue;
		sum += c;
	}
	return sum;
}

static long nests(const char *out, const char *parent, const char *func)
{
	long sum = 0, c;
	char pa[256], fn[256];

	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, "nest ", 5) != 0)
			continue;
		if (sscanf(l, "nest %*d %*d %255s %255s %ld", pa, fn, &c) == 3 &&
		    !strcmp(pa, parent) && !strcmp(fn, func))
			sum += c;
	}
	return sum;
}

/* Wait for the program's "<prefix> <rc> <path>" line; rc must be 0. */
static void expect_snapshot(struct kt_proc *p, const char *prefix, char *path)
{
	char line[4500], fmt[32];
	int rc;

	if (kt_expect_line(p, prefix, line, sizeof(line), 60000) != 0)
		fail_msg("no \"%s\" line: %s", prefix, p->err);
	snprintf(fmt, sizeof(fmt), "%s%%d %%4399s", prefix);
	if (sscanf(line, fmt, &rc, path) != 2 || rc != 0)
		fail_msg("snapshot failed: %s", line);
}

static long file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (long)st.st_size;
}

static void test_e2e_perfetto_calls(void **state)
{
	char *dir = kt_mkdtemp("pfcalls");
	char envdir[700], snap[4400], out[800], json[800];
	const char *env[] = {envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", NULL};
	char *argv[] = {(char *)PROG, (char *)"calls", NULL};
	char *files[1] = {snap};
	struct kt_proc p;
	struct kd_dec *d;
	long total = 0, pf, js;
	char *res;

	(void)state;
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	expect_snapshot(&p, "snapshot ", snap);
	kt_close_stdin(&p);
	assert_int_equal(kt_wait(&p, 30000), 0);
	kt_proc_free(&p);

	snprintf(out, sizeof(out), "%s/t.pftrace", dir);
	res = decode_check(files, 1, out, "perfetto");
	d = kd_open(snap);
	assert_non_null(d);
	for (int i = 0; i < NWORKERS; i++) {
		char name[16];
		long n = (i + 1) * 300, nb = (n + 2) / 3;

		snprintf(name, sizeof(name), "worker-%d", i);
		if (slices(res, name, "leaf_a") != n || slices(res, name, "mid_b") != nb ||
		    slices(res, name, "leaf_c") != 2 * nb || slices(res, name, "worker_main") != 1)
			fail_msg("%s: leaf_a %ld/%ld mid_b %ld/%ld leaf_c %ld/%ld worker_main %ld", name,
			         slices(res, name, "leaf_a"), n, slices(res, name, "mid_b"), nb,
			         slices(res, name, "leaf_c"), 2 * nb, slices(res, name, "worker_main"));
		total += n;
	}
	assert_int_equal(slices(res, "e2e_calls", "main_only"), 7);
	assert_int_equal(slices(res, "e2e_calls", "run_workers"), 1);
	assert_int_equal(slices(res, NULL, "sleep_250ms"), 1);
	assert_int_equal(slices(res, NULL, "leaf_a"), total);
	/* Nesting as the program called: every leaf_c inside a mid_b, every
	 * leaf_a and mid_b inside worker_main, main_only inside main. */
	assert_int_equal(nests(res, "mid_b", "leaf_c"), slices(res, NULL, "leaf_c"));
	assert_int_equal(nests(res, "worker_main", "leaf_a"), total);
	assert_int_equal(nests(res, "worker_main", "mid_b"), slices(res, NULL, "mid_b"));
	assert_int_equal(nests(res, "main", "main_only"), 7);
	/* Every decoded call is one slice on a thread track. */
	{
		long sum = 0, c;

		for (const char *l = res; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
			if (sscanf(l, "slices %*d %*d %*s %*s %ld", &c) == 1)
				sum += c;
		assert_int_equal(sum, d->ncalls);
	}
	/* Cores: a cpu track per core that ran something. */
	assert_non_null(strstr(res, " cpu "));
	/* Size: at most a quarter of the Chrome JSON of the same snapshot. */
	snprintf(json, sizeof(json), "%s/t.json", dir);
	decode_check(files, 1, json, "chrome");
	pf = file_size(out);
	js = file_size(json);
	print_message("perfetto %ld bytes, chrome %ld bytes, %u calls: %.1f vs %.1f bytes/call\n",
	              pf, js, d->ncalls, (double)pf / d->ncalls, (double)js / d->ncalls);
	if (pf * 4 > js)
		fail_msg("perfetto %ld bytes is more than 1/4 of chrome's %ld", pf, js);
	free(res);
	kd_dec_free(d);
	kt_rmtree(dir);
	free(dir);
}

static void test_e2e_perfetto_merge(void **state)
{
	char *dir = kt_mkdtemp("pfmerge");
	char envdir[700], line[4500], snaps[2][4400], out[800];
	const char *env[] = {envdir, "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=8", "KTRACE_ENABLE", NULL};
	char *argv[] = {(char *)PROG, (char *)"files", NULL};
	char *files[2] = {snaps[1], snaps[0]}; /* newest first: order must not matter */
	struct kt_proc p;
	long total = 0;
	char *res;

	(void)state;
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	assert_int_equal(kt_expect_line(&p, "pid ", line, sizeof(line), 30000), 0);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(kt_send(&p, "snap\n"), 0);
		expect_snapshot(&p, "snapshot ", snaps[k]);
	}
	kt_close_stdin(&p);
	assert_int_equal(kt_wait(&p, 30000), 0);
	kt_proc_free(&p);

	/* The second window holds the first round too (8 MiB rings). */
	snprintf(out, sizeof(out), "%s/m.pftrace", dir);
	res = decode_check(files, 2, out, "perfetto");
	for (int i = 0; i < NWORKERS; i++)
		total += 2 * (i + 1) * 300;
	assert_int_equal(slices(res, NULL, "worker_main"), 2 * NWORKERS);
	assert_int_equal(slices(res, NULL, "leaf_a"), total);
	assert_int_equal(slices(res, NULL, "sleep_250ms"), 2);
	assert_int_equal(slices(res, "e2e_calls", "run_workers"), 2);
	/* Open at the first snapshot, one slice each across both files. */
	assert_int_equal(slices(res, "e2e_calls", "main"), 1);
	assert_int_equal(slices(res, "e2e_calls", "snap"), 2);
	assert_int_equal(nests(res, "main", "run_workers"), 2);
	assert_int_equal(nests(res, "main", "snap"), 2);
	assert_non_null(strstr(res, "(2 snapshots)"));
	free(res);
	kt_rmtree(dir);
	free(dir);
}

#define NMSG 200

/* As in test_e2e_lifecycle.c: GCC 12's ASan runtime is not fork-safe in a
 * multithreaded process (the child can block on an allocator lock).  Under
 * TSan the child starts libktrace's writer thread after fork: tests/run.sh
 * sets TSAN_OPTIONS=...:die_after_fork=0 for that. */
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_FORK_UNDER_ASAN() skip()
#else
#define SKIP_FORK_UNDER_ASAN() do { } while (0)
#endif

static void test_e2e_perfetto_pipe(void **state)
{
	char *dir;
	char envdir[700], snaps[2][4400], out[800], nmsg[16];
	const char *env[] = {envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", NULL};
	char *argv[] = {(char *)PROG, (char *)"pipe", nmsg, NULL};
	char *files[2] = {snaps[0], snaps[1]};
	long long send_ns[NMSG], recv_ns[NMSG];
	int nsend = 0, nrecv = 0;
	struct kt_proc p;
	char *res;

	(void)state;
	SKIP_FORK_UNDER_ASAN();
	dir = kt_mkdtemp("pfpipe");
	assert_non_null(dir);
	snprintf(nmsg, sizeof(nmsg), "%d", NMSG);
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	expect_snapshot(&p, "child ", snaps[0]);
	expect_snapshot(&p, "snapshot ", snaps[1]);
	kt_close_stdin(&p);
	assert_int_equal(kt_wait(&p, 30000), 0);
	kt_proc_free(&p);

	snprintf(out, sizeof(out), "%s/p.pftrace", dir);
	res = decode_check(files, 2, out, "perfetto");
	for (int i = 0; i < NMSG; i++)
		send_ns[i] = recv_ns[i] = -1;
	for (const char *l = res; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char name[32];
		long long v, t;

		if (sscanf(l, "instant %*d %*d %31s %lld %lld", name, &v, &t) != 3 || v < 0 || v >= NMSG)
			continue;
		if (!strcmp(name, "send")) {
			send_ns[v] = t;
			nsend++;
		} else if (!strcmp(name, "recv")) {
			recv_ns[v] = t;
			nrecv++;
		}
	}
	assert_int_equal(nsend, NMSG);
	assert_int_equal(nrecv, NMSG);
	assert_int_equal(pf_count(res, "process") >= 0, 1);
	{
		long long gap = -1;

		for (int i = 0; i < NMSG; i++) {
			if (send_ns[i] >= recv_ns[i])
				fail_msg("message %d: send at %lld ns, receive at %lld ns", i, send_ns[i],
				         recv_ns[i]);
			if (i + 1 < NMSG && recv_ns[i] >= send_ns[i + 1])
				fail_msg("message %d: received at %lld ns, after the next send at %lld ns", i,
				         recv_ns[i], send_ns[i + 1]);
			if (gap < 0 || recv_ns[i] - send_ns[i] < gap)
				gap = recv_ns[i] - send_ns[i];
		}
		print_message("%d messages, shortest send -> receive %lld ns\n", NMSG, gap);
	}
	free(res);
	kt_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_perfetto_calls),
		cmocka_unit_test(test_e2e_perfetto_merge),
		cmocka_unit_test(test_e2e_perfetto_pipe),
	};
	return cmocka_run_group_tests_name("e2e_perfetto", tests, NULL, NULL);
}
