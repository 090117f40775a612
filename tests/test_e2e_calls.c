/*
 * test_e2e_calls.c - a traced multi-threaded program (e2e/traced_calls.c)
 * with more threads than cores, a snapshot by API and one by SIGUSR2, both
 * decoded with the decoder library; every count, nesting, duration and
 * thread name checked against what the program did.
 *
 * Variants: shared and static library, KTRACE_RSEQ=0 (locked appends),
 * KTRACE_CLOCK=monotonic, KTRACE_ENABLE=0.  Also the file's properties
 * (name, mode 0600, no temporary left).
 *
 * Hazards: 1 timestamp wrap (a 250 ms call), 2 late stores, 3 shared cores, 4 migration (8 threads on 2
 * cores yielding), 6 snapshot while writing (workers are done, but the
 * signal lands while the main thread runs traced code), 7 signals,
 * 8 metadata (names of exited threads), 11 files.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
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
#include "ktrace.h"
#include "ktest.h"

#define PROG_SHARED KTRACE_TEST_BINARY_DIR "/e2e_calls"
#define PROG_STATIC KTRACE_TEST_BINARY_DIR "/e2e_calls_static"
#define NWORKERS 8

/* The CPU counter and rseq appends per architecture (lib/clock.c, rseq.h). */
#if defined(__aarch64__)
#define KT_ARCH_COUNTER KTRACE_CLOCK_CNTVCT
#define KT_ARCH_RSEQ 0
#else
#define KT_ARCH_COUNTER KTRACE_CLOCK_TSC
#define KT_ARCH_RSEQ 1
#endif

struct expect {
	int rseq;        /* INFO says rseq appends (where the architecture has them) */
	uint32_t clock;  /* enum ktrace_clock_source */
};

static void check_file_props(const char *path, const char *dir, int pid)
{
	struct stat st;
	char prefix[64];
	const char *base = strrchr(path, '/');

	assert_non_null(base);
	base++;
	assert_int_equal(strncmp(path, dir, strlen(dir)), 0);
	snprintf(prefix, sizeof(prefix), "ktrace-%d-", pid);
	if (strncmp(base, prefix, strlen(prefix)) != 0)
		fail_msg("snapshot name %s does not start with %s", base, prefix);
	assert_string_equal(base + strlen(base) - 7, ".ktrace");
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	if ((st.st_mode & 07777) != 0600)
		fail_msg("%s has mode %o, expected 0600", path, st.st_mode & 07777);
}

/* Everything the program did, in one decoded snapshot. */
static void check_calls(const struct kd_dec *d, int pid)
{
	uint32_t mainth = KD_NONE;
	uint64_t total_leaf_a = 0;

	assert_int_equal(d->snap.damaged_blocks, 0);
	assert_int_equal(d->snap.unreadable_blocks, 0);
	assert_true(d->snap.have_loss);
	for (int i = 0; i < KTRACE_LOSS_COUNT; i++)
		if (d->snap.loss.count[i] != 0)
			fail_msg("loss counter %s = %llu", kd_read_loss_name((unsigned)i),
			         (unsigned long long)d->snap.loss.count[i]);
	assert_int_equal(d->snap.info.pid, (uint32_t)pid);
	assert_int_equal(d->lost_exits, 0);
	assert_int_equal(d->unmatched_exits, 0);

	for (uint32_t t = 0; t < d->nthreads; t++)
		if (d->threads[t].flags & KTRACE_THREAD_MAIN)
			mainth = t;
	assert_int_not_equal(mainth, KD_NONE);
	assert_int_equal(d->threads[mainth].tid, pid);
	assert_int_equal(kd_count(d, mainth, "main_only"), 7);
	assert_int_equal(kd_count(d, mainth, "run_workers"), 1);
	assert_int_equal(kd_count(d, mainth, "leaf_a"), 0);

	for (int i = 0; i < NWORKERS; i++) {
		char name[16];
		uint64_t n = (uint64_t)(i + 1) * 300, nb = (n + 2) / 3;
		snprintf(name, sizeof(name), "worker-%d", i);
		uint32_t t = kd_thread(d, name);
		if (t == KD_NONE)
			fail_msg("no thread named %s", name);
		assert_true(d->threads[t].known);
		assert_int_not_equal(d->threads[t].tid, pid);
		for (int j = 0; j < i; j++) {
			char other[16];
			snprintf(other, sizeof(other), "worker-%d", j);
			assert_int_not_equal(d->threads[kd_thread(d, other)].tid, d->threads[t].tid);
		}
		if (kd_count(d, t, "leaf_a") != n || kd_count(d, t, "mid_b") != nb ||
		    kd_count(d, t, "leaf_c") != 2 * nb || kd_count(d, t, "worker_main") != 1)
			fail_msg("%s: leaf_a %llu/%llu mid_b %llu/%llu leaf_c %llu/%llu worker_main %llu",
			         name, (unsigned long long)kd_count(d, t, "leaf_a"),
			         (unsigned long long)n, (unsigned long long)kd_count(d, t, "mid_b"),
			         (unsigned long long)nb, (unsigned long long)kd_count(d, t, "leaf_c"),
			         (unsigned long long)(2 * nb),
			         (unsigned long long)kd_count(d, t, "worker_main"));
		assert_int_equal(kd_count(d, t, "main_only"), 0);
		assert_int_equal(kd_count(d, t, "sleep_20ms"), i == 0 ? 1 : 0);
		assert_int_equal(kd_count(d, t, "spin_5ms"), i == 0 ? 1 : 0);
		assert_int_equal(kd_count(d, t, "sleep_250ms"), i == 1 ? 1 : 0);
		total_leaf_a += n;
	}
	assert_int_equal(kd_count(d, KD_NONE, "leaf_a"), total_leaf_a);

	/* Nesting, containment, flags, durations. */
	int open_main = 0;
	for (uint32_t k = 0; k < d->ncalls; k++) {
		const struct kd_dec_call *c = &d->calls[k];
		const struct kd_dec_call *p =
			c->parent == KD_NONE ? NULL : &d->calls[c->parent];
		const char *f = kd_func(d, c);

		if (c->flags & (KD_CALL_TRUNC_BEGIN | KD_CALL_EXIT_LOST | KD_CALL_SPAN))
			fail_msg("call %u of %s has flags %#x", k, f, c->flags);
		/* Hazard 9: the library never traces itself. */
		if (!strncmp(f, "ktrace", 6) || !strncmp(f, "__cyg", 5) || !strncmp(f, "0x", 2))
			fail_msg("call %u of %s: not a function of the program", k, f);
		if (c->flags & KD_CALL_TRUNC_END) {
			/* Only main's frames still open at the snapshot. */
			assert_int_equal(c->thread, mainth);
			open_main++;
		}
		if (p) {
			assert_int_equal(p->thread, c->thread);
			assert_int_equal(c->depth, p->depth + 1);
			assert_true(c->begin >= p->begin);
			if (!(p->flags & KD_CALL_TRUNC_END))
				assert_true(c->end <= p->end);
		} else {
			assert_int_equal(c->depth, 0);
		}
		if (!strcmp(f, "leaf_c"))
			assert_true(p && kd_is(d, p, "mid_b"));
		if (!strcmp(f, "leaf_a") || !strcmp(f, "mid_b") || !strcmp(f, "sleep_20ms") ||
		    !strcmp(f, "spin_5ms") || !strcmp(f, "sleep_250ms"))
			assert_true(p && kd_is(d, p, "worker_main"));
		if (!strcmp(f, "worker_main"))
			assert_null(p);
		if (!strcmp(f, "sleep_20ms")) {
			uint64_t ns = kd_ns(d, c);
			if (ns < 19500000 || ns > 2000000000ull)
				fail_msg("sleep_20ms took %llu ns", (unsigned long long)ns);
		}
		if (!strcmp(f, "sleep_250ms")) {
			/* Hazard 1: 20-bit timestamps wrapped ~2.5 times meanwhile. */
			uint64_t ns = kd_ns(d, c);
			if (ns < 249000000 || ns > 5000000000ull)
				fail_msg("sleep_250ms took %llu ns", (unsigned long long)ns);
		}
		if (!strcmp(f, "spin_5ms")) {
			uint64_t ns = kd_ns(d, c);
			if (ns < 4900000 || ns > 2000000000ull)
				fail_msg("spin_5ms took %llu ns", (unsigned long long)ns);
		}
	}
	assert_true(open_main >= 1 && open_main <= 4);

	/* How much sharing and migration this run saw (informational). */
	uint32_t cores_used = 0, migrated = 0;
	for (uint32_t c = 0; c < d->snap.ncores; c++)
		cores_used += d->core_stats[c].has_data ? 1 : 0;
	for (uint32_t t = 0; t < d->nthreads; t++) {
		uint32_t first = KD_NONE;
		for (uint32_t r = 0; r < d->nruns; r++)
			if (d->runs[r].thread == t) {
				if (first == KD_NONE)
					first = d->runs[r].core;
				else if (d->runs[r].core != first) {
					migrated++;
					break;
				}
			}
	}
	print_message("%u calls on %u cores; %u of %u threads ran on more than one core\n",
	              d->ncalls, cores_used, migrated, d->nthreads);
	/* The workers hop cpus in the middle of worker_main. */
	if (sysconf(_SC_NPROCESSORS_ONLN) >= 2)
		assert_true(migrated >= NWORKERS / 2);
}

/* "calls ... name" line of ktrace-decode --format stats -> calls. */
static long stats_calls(const char *out, const char *name)
{
	size_t nl = strlen(name);

	for (const char *s = out; (s = strstr(s, name)) != NULL; s += nl) {
		if ((s[nl] == '\n' || s[nl] == 0) && s > out && s[-1] == ' ') {
			const char *bol = s;
			while (bol > out && bol[-1] != '\n')
				bol--;
			return strtol(bol, NULL, 10);
		}
	}
	return -1;
}

/* The real ktrace-decode agrees: stats counts, and chrome/text/summary
 * decode with status 0. */
static void check_with_decoder_binary(const char *path)
{
	static const char *const fmts[] = {"summary", "text", "chrome", "folded"};
	struct kt_proc p;
	char *argv[] = {(char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)"stats",
	                (char *)path, NULL};

	if (kt_run(argv, NULL, &p, 60000) != 0)
		fail_msg("ktrace-decode --format stats failed (%#x): %s", p.status, p.err);
	if (stats_calls(p.out, "leaf_a") != 10800 || stats_calls(p.out, "mid_b") != 3600 ||
	    stats_calls(p.out, "leaf_c") != 7200 || stats_calls(p.out, "main_only") != 7)
		fail_msg("ktrace-decode stats disagree:\n%s", p.out);
	kt_proc_free(&p);
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		argv[2] = (char *)fmts[i];
		if (kt_run(argv, NULL, &p, 60000) != 0 || p.out_len == 0)
			fail_msg("ktrace-decode --format %s failed (%#x): %s", fmts[i], p.status, p.err);
		if (!strcmp(fmts[i], "chrome"))
			assert_true(p.out[0] == '{' || p.out[0] == '[');
		kt_proc_free(&p);
	}
}

static void run_variant(const char *prog, const char *const *extra, const struct expect *ex)
{
	char *dir = kt_mkdtemp("calls");
	char envdir[300], line[4600], api_path[4400] = "", **files;
	const char *env[16];
	size_t n = 0;
	struct kt_proc p;
	int rc = -99, pid;

	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	env[n++] = envdir;
	env[n++] = "KTRACE_QUIET=1";
	env[n++] = "KTRACE_BUFFER_MB=8";
	env[n++] = "KTRACE_RSEQ";
	env[n++] = "KTRACE_CLOCK";
	env[n++] = "KTRACE_SIGNAL";
	env[n++] = "KTRACE_ENABLE";
	for (size_t i = 0; extra && extra[i]; i++)
		env[n++] = extra[i];
	env[n] = NULL;

	char *argv[] = {(char *)prog, (char *)"calls", NULL};
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	assert_int_equal(kt_expect_line(&p, "pid ", line, sizeof(line), 30000), 0);
	pid = atoi(line + 4);
	assert_int_equal(pid, p.pid);
	if (kt_expect_line(&p, "snapshot ", line, sizeof(line), 60000) != 0)
		fail_msg("no snapshot line; stderr:\n%s", p.err);
	assert_int_equal(sscanf(line, "snapshot %d %4399s", &rc, api_path), 2);
	assert_int_equal(rc, 0);
	assert_int_equal(kt_expect_line(&p, "ready", NULL, 0, 30000), 0);
	/* Second snapshot by signal, while the program waits in traced code. */
	assert_int_equal(kill(p.pid, SIGUSR2), 0);
	if (kt_wait_snapshots(dir, 2, 30000) < 0)
		fail_msg("no signal snapshot; stderr:\n%s", p.err);
	if (kt_wait(&p, 30000) != 0)
		fail_msg("program failed (status %#x); stderr:\n%s", p.status, p.err);
	if (p.err_len)
		fail_msg("unexpected stderr:\n%s", p.err);

	assert_int_equal(kt_list_snapshots(dir, &files), 2);
	assert_int_equal(kt_count_entries(dir), 2); /* no temporary files */
	for (int i = 0; i < 2; i++) {
		struct kt_file f;
		int is_api = strcmp(files[i], api_path) == 0;

		check_file_props(files[i], dir, pid);
		if (kt_file_load(files[i], &f) != 0)
			fail_msg("%s: %s", files[i], f.why);
		assert_int_equal(f.bad_blocks, 0);
		kt_file_free(&f);

		struct kd_dec *d = kd_open(files[i]);
		assert_non_null(d);
		assert_string_equal(d->snap.info.reason, is_api ? "e2e-api" : "signal SIGUSR2");
		assert_int_equal(!!(d->snap.info.flags & KTRACE_INFO_RSEQ), ex->rseq && KT_ARCH_RSEQ);
		assert_int_equal(d->snap.info.clock_source,
		                 ex->clock == KTRACE_CLOCK_TSC ? KT_ARCH_COUNTER : ex->clock);
		assert_int_equal(d->snap.info.snapshot_seq, is_api ? 1 : 2);
		check_calls(d, pid);
		kd_dec_free(d);
		if (is_api)
			check_with_decoder_binary(files[i]);
	}
	/* Both names were distinct and both files are the program's. */
	assert_string_not_equal(files[0], files[1]);
	kt_free_list(files);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

static void test_e2e_calls_shared(void **state)
{
	const struct expect ex = {1, KTRACE_CLOCK_TSC};
	(void)state;
	run_variant(PROG_SHARED, NULL, &ex);
}

static void test_e2e_calls_static(void **state)
{
	const struct expect ex = {1, KTRACE_CLOCK_TSC};
	(void)state;
	run_variant(PROG_STATIC, NULL, &ex);
}

static void test_e2e_calls_locked_fallback(void **state)
{
	static const char *const env[] = {"KTRACE_RSEQ=0", NULL};
	const struct expect ex = {0, KTRACE_CLOCK_TSC};
	(void)state;
	run_variant(PROG_SHARED, env, &ex);
}

static void test_e2e_calls_monotonic_clock(void **state)
{
	static const char *const env[] = {"KTRACE_CLOCK=monotonic", NULL};
	const struct expect ex = {0, KTRACE_CLOCK_MONOTONIC};
	(void)state;
	run_variant(PROG_SHARED, env, &ex);
}

static void test_e2e_calls_locked_static(void **state)
{
	static const char *const env[] = {"KTRACE_RSEQ=0", NULL};
	const struct expect ex = {0, KTRACE_CLOCK_TSC};
	(void)state;
	run_variant(PROG_STATIC, env, &ex);
}

/* KTRACE_ENABLE=0: the program runs, the API says disabled, no file. */
static void test_e2e_calls_disabled(void **state)
{
	char *dir = kt_mkdtemp("off");
	char envdir[300], line[256];
	const char *env[] = {envdir, "KTRACE_ENABLE=0", NULL};
	struct kt_proc p;
	char *argv[] = {(char *)PROG_SHARED, (char *)"calls", NULL};
	char want[64];

	(void)state;
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	assert_int_equal(kt_expect_line(&p, "snapshot ", line, sizeof(line), 60000), 0);
	snprintf(want, sizeof(want), "snapshot %d ", KTRACE_EDISABLED);
	assert_string_equal(line, want);
	assert_int_equal(kt_expect_line(&p, "ready", NULL, 0, 30000), 0);
	assert_int_equal(kt_wait(&p, 30000), 0);
	assert_string_equal(p.err, "");
	assert_int_equal(kt_count_entries(dir), 0);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_calls_shared),
		cmocka_unit_test(test_e2e_calls_static),
		cmocka_unit_test(test_e2e_calls_locked_fallback),
		cmocka_unit_test(test_e2e_calls_locked_static),
		cmocka_unit_test(test_e2e_calls_monotonic_clock),
		cmocka_unit_test(test_e2e_calls_disabled),
	};
	return cmocka_run_group_tests_name("e2e_calls", tests, NULL, NULL);
}
