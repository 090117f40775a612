/*
 * test_e2e_hostile.c - the library takes nothing from the program and keeps
 * what it promises, in the environments real programs create (issue 11,
 * items 1-7; DESIGN "Trust boundaries").  Each test runs
 * e2e/harden_prog.c in one mode and checks what the program saw and what
 * reached the disk:
 *
 *   1. descriptors: closefrom(3) then the program's own pipe; the writer
 *      never touches it and never spins;
 *   2. privilege: a setuid-root copy run by nobody takes no setting from
 *      the environment and writes only where the program chose;
 *   3. resources: under RLIMIT_AS the program's pthread_create works as
 *      without ktrace; a signal flood is bounded in files and bytes, the
 *      refusals counted in the next file and told once;
 *   4. working directory: daemon() / chdir("/") after start still write
 *      where the program started, under an absolute path;
 *   5. predictable names taken by someone else: the snapshot is written
 *      under another name;
 *   6. large rings: a full 64 MiB ring copied while two threads write at
 *      full speed keeps >= 90 % of it, and every block is accounted for;
 *   7. exit: a snapshot asked for just before exit() survives a signal
 *      flood that cuts every sleep of the exit wait short.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ktest.h"
#include "ktrace.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_hostile"
#define PROG_STATIC KTRACE_TEST_BINARY_DIR "/e2e_hostile_static"
#define NOBODY 65534

struct run {
	struct kt_proc p;
	char *dir;
	char envdir[400];
	const char *env[24];
};

/* KTRACE_DIR=<fresh dir> (or unset with dir_env 0), quiet, the rest of the
 * settings unset, then extra. */
static void start_opts(struct run *r, const char *prog, const char *a1, const char *a2,
                       const char *const *extra, int dir_env, const struct kt_spawn_opts *o)
{
	char *argv[] = {(char *)prog, (char *)a1, (char *)a2, NULL};
	static const char *const unset[] = {
		"KTRACE_ENABLE", "KTRACE_SIGNAL", "KTRACE_RSEQ", "KTRACE_BUFFER_MB",
		"KTRACE_MAX_FILES_PER_MIN", "KTRACE_MAX_MB_PER_MIN", "KTRACE_CLOCK",
		"E2E_AS_HEADROOM_MB", NULL};
	size_t n = 0;

	if (r->dir == NULL) {
		r->dir = kt_mkdtemp("harden");
		assert_non_null(r->dir);
	}
	snprintf(r->envdir, sizeof(r->envdir), "KTRACE_DIR=%s", r->dir);
	r->env[n++] = dir_env ? r->envdir : "KTRACE_DIR";
	r->env[n++] = "KTRACE_QUIET=1";
	for (size_t i = 0; unset[i]; i++)
		r->env[n++] = unset[i];
	for (size_t i = 0; extra && extra[i]; i++)
		r->env[n++] = extra[i];
	r->env[n] = NULL;
	assert_int_equal(kt_spawn(&r->p, argv, r->env, o), 0);
}

static void start(struct run *r, const char *a1, const char *a2, const char *const *extra)
{
	memset(r, 0, sizeof(*r));
	start_opts(r, PROG, a1, a2, extra, 1, NULL);
}

static void finish(struct run *r)
{
	if (kt_wait(&r->p, 60000) != 0)
		fail_msg("program failed (status %#x); stdout:\n%s\nstderr:\n%s", r->p.status,
		         r->p.out, r->p.err);
	kt_proc_free(&r->p);
	kt_rmtree(r->dir);
	free(r->dir);
	r->dir = NULL;
}

/* The rest of a "<tag> " line. */
static void expect(struct run *r, const char *tag, char *rest, size_t len)
{
	char line[4600], pre[64];

	snprintf(pre, sizeof(pre), "%s ", tag);
	if (kt_expect_line(&r->p, pre, line, sizeof(line), 60000) != 0)
		fail_msg("no '%s' line; stdout:\n%s\nstderr:\n%s", tag, r->p.out, r->p.err);
	snprintf(rest, len, "%s", line + strlen(pre));
}

static long expect_num(struct run *r, const char *tag)
{
	char rest[4600];

	expect(r, tag, rest, sizeof(rest));
	return strtol(rest, NULL, 10);
}

/* "snapshot <rc> <path>": rc, path into path. */
static int expect_snapshot(struct run *r, char *path, size_t len)
{
	char rest[4600];
	int rc = -99;

	expect(r, "snapshot", rest, sizeof(rest));
	path[0] = 0;
	if (sscanf(rest, "%d %4399s", &rc, path) < 1)
		fail_msg("bad snapshot line: %s", rest);
	(void)len;
	return rc;
}

static void check_file(const char *path, struct kt_file *f)
{
	if (kt_file_load(path, f) != 0)
		fail_msg("%s: %s", path, f->why);
	assert_int_equal(f->bad_blocks, 0);
}

/* ---- 1. descriptors --------------------------------------------------------- */

static void test_e2e_hostile_closefrom_then_own_pipe(void **state)
{
	struct run r;
	char path[4400], rest[4600];
	struct kt_file f;
	long ticks;

	(void)state;
	start(&r, "fds", NULL, NULL);
	/* Every byte the program wrote to its own pipe came back. */
	assert_int_equal(expect_num(&r, "pipe"), 80);
	assert_int_equal(expect_snapshot(&r, path, sizeof(path)), 0);
	check_file(path, &f);
	kt_file_free(&f);
	/* With write-only files on the low numbers, the idle writer sleeps:
	 * at most 3 ticks (30 ms) in a second (a spinning one takes ~100). */
	ticks = expect_num(&r, "writer_ticks");
	assert_true(ticks >= 0);
	if (ticks > 3)
		fail_msg("the idle writer used %ld ticks of cpu in 1 s", ticks);
	/* The snapshot signal still works. */
	expect(&r, "signal_file", rest, sizeof(rest));
	if (strcmp(rest, "-") == 0)
		fail_msg("no file after the snapshot signal; stderr:\n%s", r.p.err);
	check_file(rest, &f);
	kt_file_free(&f);
	finish(&r);
}

/* The same class: descriptor 2 closed and reused for the program's own
 * file; ktrace's messages must not land in it. */
static void test_e2e_hostile_stderr_reused_by_program(void **state)
{
	static char envdir[700];
	struct run r;
	char path[4400], file[600];

	(void)state;
	memset(&r, 0, sizeof(r));
	r.dir = kt_mkdtemp("stderr");
	assert_non_null(r.dir);
	snprintf(file, sizeof(file), "%s/data", r.dir);
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s/missing", r.dir);
	const char *extra[] = {envdir, NULL};
	start_opts(&r, PROG, "stderr", file, extra, 0, NULL);
	assert_int_equal(expect_snapshot(&r, path, sizeof(path)), KTRACE_EIO);
	assert_int_equal(expect_num(&r, "stderr_file_bytes"), 0);
	finish(&r);
}

/* ---- 2. privilege ------------------------------------------------------------ */

static void test_e2e_hostile_setuid_root_ignores_environment(void **state)
{
	struct run r;
	char copy[600], user[600], own[600], path[4400], rest[200], cmd[1400];
	struct kt_spawn_opts o = {0, NULL, NOBODY, 0};
	struct kt_file f;
	struct stat st;

	(void)state;
	if (geteuid() != 0) {
		print_message("skipped: needs root (to make a setuid-root program)\n");
		skip();
	}
	memset(&r, 0, sizeof(r));
	r.dir = kt_mkdtemp("setuid");
	assert_non_null(r.dir);
	assert_int_equal(chmod(r.dir, 0755), 0);
	/* The user's directory (nobody's, so the user could read what root
	 * wrote there) and the program's own (root only). */
	snprintf(user, sizeof(user), "%s/user", r.dir);
	snprintf(own, sizeof(own), "%s/own", r.dir);
	assert_int_equal(mkdir(user, 0700), 0);
	assert_int_equal(chown(user, NOBODY, NOBODY), 0);
	assert_int_equal(mkdir(own, 0700), 0);
	snprintf(copy, sizeof(copy), "%s/prog", r.dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", PROG_STATIC, copy);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(chown(copy, 0, 0), 0);
	assert_int_equal(chmod(copy, 04755), 0);

	/* The user runs it with settings of their choice. */
	static char envdir[700];
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", user);
	const char *extra[] = {envdir, "KTRACE_BUFFER_MB=1", "KTRACE_SIGNAL=USR1", NULL};
	start_opts(&r, copy, "secure", own, extra, 0, &o);
	assert_int_equal(expect_num(&r, "secure"), 1);
	/* No snapshot signal handler: the user cannot make root write files. */
	expect(&r, "sig", rest, sizeof(rest));
	assert_string_equal(rest, "0 0");
	/* No directory until the program chooses one. */
	assert_int_equal(expect_num(&r, "env_snapshot"), KTRACE_ENODIR);
	assert_int_equal(expect_num(&r, "setting"), 0);
	assert_int_equal(expect_snapshot(&r, path, sizeof(path)), 0);
	assert_int_equal(strncmp(path, own, strlen(own)), 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	check_file(path, &f);
	/* KTRACE_BUFFER_MB=1 was not taken: the default 8 MiB ring. */
	assert_int_equal(kt_file_info(&f)->ring_bytes_per_core, 8u << 20);
	assert_true(kt_file_info(&f)->flags & KTRACE_INFO_SECURE);
	kt_file_free(&f);
	if (kt_wait(&r.p, 60000) != 0)
		fail_msg("program failed (status %#x); stderr:\n%s", r.p.status, r.p.err);
	assert_int_equal(kt_count_entries(user), 0);
	/* One line tells the user why their settings did nothing. */
	assert_int_equal(kt_count_str(r.p.err, "KTRACE_* settings in the environment are "
	                                       "ignored"), 1);
	kt_proc_free(&r.p);
	unlink(copy);
	kt_rmtree(r.dir);
	free(r.dir);
}

/* ---- 3. resources ------------------------------------------------------------ */

/* RLIMIT_AS sized for the program: its thread's 8 MiB stack and a little,
 * plus what ktrace says it takes per core: the ring (KTRACE_BUFFER_MB), the
 * context-switch window (half the ring) and its perf buffer and the window
 * budget's sample (together under 1 MiB). */
static void test_e2e_hostile_rlimit_as_program_thread(void **state)
{
	static char headroom[64];
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	struct run r;
	char path[4400];

	(void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	print_message("skipped: a sanitizer's runtime reserves address space of its own\n");
	skip();
#endif
	snprintf(headroom, sizeof(headroom), "E2E_AS_HEADROOM_MB=%ld", 8 + 4 + ncpu * (2 + 1 + 1) + 2);
	const char *untraced[] = {headroom, "KTRACE_ENABLE=0", NULL};
	const char *traced[] = {headroom, "KTRACE_BUFFER_MB=2", NULL};
	memset(&r, 0, sizeof(r));
	start_opts(&r, PROG_STATIC, "rlimit", NULL, untraced, 1, NULL);
	assert_int_equal(expect_num(&r, "thread"), 0);
	finish(&r);
	memset(&r, 0, sizeof(r));
	start_opts(&r, PROG_STATIC, "rlimit", NULL, traced, 1, NULL);
	if (expect_num(&r, "thread") != 0)
		fail_msg("pthread_create failed under RLIMIT_AS with ktrace; stderr:\n%s", r.p.err);
	/* A snapshot under the limit: written, maybe not all of the ring. */
	assert_int_equal(expect_snapshot(&r, path, sizeof(path)), 0);
	finish(&r);
}

/* kill(pid, SIGUSR2) about every 200 us for ms ms. */
static void flood(pid_t pid, int ms)
{
	struct timespec d = {0, 200000};

	for (int64_t end = kt_now_ms() + ms; kt_now_ms() < end;) {
		kill(pid, SIGUSR2);
		nanosleep(&d, NULL);
	}
}

static uint64_t dir_bytes(const char *dir, int *n)
{
	char **paths;
	uint64_t sum = 0;

	*n = kt_list_snapshots(dir, &paths);
	for (int i = 0; i < *n; i++) {
		struct stat st;
		if (stat(paths[i], &st) == 0)
			sum += (uint64_t)st.st_size;
	}
	kt_free_list(paths);
	return sum;
}

static void test_e2e_hostile_signal_flood_files_per_minute(void **state)
{
	/* A sanitized build writes too few files in the flood to reach 20 (5 to
	 * 16 under TSan on a loaded machine): there the limit is 4 a minute,
	 * one file every 15 s after the first 4. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	static const char *const extra[] = {"KTRACE_BUFFER_MB=1", "KTRACE_MAX_FILES_PER_MIN=4",
	                                    NULL};
	const int limit = 4;
#else
	static const char *const extra[] = {"KTRACE_BUFFER_MB=1", "KTRACE_MAX_FILES_PER_MIN=20",
	                                    NULL};
	const int limit = 20;
#endif
	struct run r;
	char rest[64], **paths;
	int n, n2;

	(void)state;
	start(&r, "spin", NULL, extra);
	assert_int_equal(kt_expect_line(&r.p, "ready", rest, sizeof(rest), 30000), 0);
	flood(r.p.pid, 3000);
	kt_sleep_ms(300);
	dir_bytes(r.dir, &n);
	/* limit at once, then one every 60/limit s. */
	print_message("files after a 3 s flood: %d\n", n);
	assert_true(n >= 1);
	assert_true(n <= limit + 2);
	/* After a refill, the next file reports the refused ones. */
	kt_sleep_ms(60000 / limit + 200);
	kill(r.p.pid, SIGUSR2);
	assert_true(kt_wait_snapshots(r.dir, n + 1, 10000) >= n + 1);
	kt_sleep_ms(100);
	n2 = kt_list_snapshots(r.dir, &paths);
	assert_int_equal(n2, n + 1);
	struct kt_file f;
	uint64_t refused = 0;
	for (int i = 0; i < n2; i++) {
		check_file(paths[i], &f);
		if (kt_file_loss(&f)->count[KTRACE_LOSS_SNAPSHOTS_REFUSED] > refused)
			refused = kt_file_loss(&f)->count[KTRACE_LOSS_SNAPSHOTS_REFUSED];
		kt_file_free(&f);
	}
	kt_free_list(paths);
	print_message("refusals reported: %llu\n", (unsigned long long)refused);
	assert_true(refused > 0);
	kt_close_stdin(&r.p);
	if (kt_wait(&r.p, 60000) != 0)
		fail_msg("program failed (status %#x); stderr:\n%s", r.p.status, r.p.err);
	/* One line says so, once. */
	if (kt_count_str(r.p.err, "snapshot refused") != 1)
		fail_msg("expected one 'snapshot refused' line:\n%s", r.p.err);
	kt_proc_free(&r.p);
	kt_rmtree(r.dir);
	free(r.dir);
}

static void test_e2e_hostile_signal_flood_bytes_per_minute(void **state)
{
	static const char *const extra[] = {"KTRACE_BUFFER_MB=1", "KTRACE_MAX_MB_PER_MIN=3",
	                                    "KTRACE_MAX_FILES_PER_MIN=100000", NULL};
	struct run r;
	char rest[64];
	uint64_t bytes;
	int n;

	(void)state;
	start(&r, "spin", NULL, extra);
	assert_int_equal(kt_expect_line(&r.p, "ready", rest, sizeof(rest), 30000), 0);
	flood(r.p.pid, 2000);
	kt_sleep_ms(300);
	bytes = dir_bytes(r.dir, &n);
	print_message("after a 2 s flood: %d files, %llu bytes\n", n, (unsigned long long)bytes);
	assert_true(n >= 1);
	/* 3 MiB, plus what refills in ~3 s, plus one file that may start
	 * with a full bucket (at most 2 rings of 1 MiB and metadata). */
	assert_true(bytes <= (3u << 20) + (3u << 20) * 3 / 60 + (2u << 20) + (1u << 20));
	kt_close_stdin(&r.p);
	finish(&r);
}

/* ---- 4. working directory ------------------------------------------------------- */

static void run_cwd(const char *mode, const char *ktrace_dir, const char *sub)
{
	struct run r;
	char path[4400], want[600], envdir[300];
	struct kt_spawn_opts o = {0, NULL, 0, 0};
	struct kt_file f;

	memset(&r, 0, sizeof(r));
	r.dir = kt_mkdtemp("cwd");
	assert_non_null(r.dir);
	o.cwd = r.dir;
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", ktrace_dir ? ktrace_dir : "");
	const char *extra[] = {ktrace_dir ? envdir : "KTRACE_DIR", NULL};
	if (sub) {
		snprintf(want, sizeof(want), "%s/%s", r.dir, sub);
		assert_int_equal(mkdir(want, 0700), 0);
	} else {
		snprintf(want, sizeof(want), "%s", r.dir);
	}
	start_opts(&r, PROG, mode, NULL, extra, 0, &o);
	int rc = expect_snapshot(&r, path, sizeof(path));
	if (rc == 0 && path[0] != '/') {
		/* The old behaviour: the file went to the new directory, "/". */
		char stray[4500];
		snprintf(stray, sizeof(stray), "/%s", path);
		unlink(stray);
		fail_msg("%s: snapshot path '%s' is relative (written under /)", mode, path);
	}
	assert_int_equal(rc, 0);
	if (strncmp(path, want, strlen(want)) != 0 || strchr(path + strlen(want) + 1, '/'))
		fail_msg("%s: snapshot at '%s', not in '%s'", mode, path, want);
	check_file(path, &f);
	kt_file_free(&f);
	finish(&r);
}

static void test_e2e_hostile_daemon_writes_where_it_started(void **state)
{
	(void)state;
#if defined(__SANITIZE_THREAD__)
	/* daemon() forks a threaded process whose child starts a thread. */
	print_message("skipped: TSan does not start threads after a multi-threaded fork\n");
	skip();
#endif
#if defined(__SANITIZE_ADDRESS__)
	/* As the fork tests of test_e2e_lifecycle: GCC 12's ASan runtime
	 * deadlocks in some children of a multi-threaded fork (here 2 daemon
	 * children of 5 hung, in a run by hand). */
	print_message("skipped: ASan deadlocks in some children of a multi-threaded fork\n");
	skip();
#endif
	run_cwd("daemon", NULL, NULL);
}

static void test_e2e_hostile_relative_dir_after_chdir(void **state)
{
	(void)state;
	run_cwd("chdir", "snaps", "snaps");
}

/* The writer thread starts on a cpu the program's thread is not on (a new
 * thread waits for its parent's cpu otherwise), then takes the program's
 * cpu set back: it must have the same set as the program (until a wake
 * on its waker's cpu takes that cpu out: the next test). */
static void test_e2e_hostile_writer_keeps_program_cpus(void **state)
{
	struct run r;
	char rest[4600], mine[256], its[256];

	(void)state;
	start(&r, "affinity", NULL, NULL);
	expect(&r, "affinity", rest, sizeof(rest));
	if (sscanf(rest, "%255s %255s", mine, its) != 2)
		fail_msg("bad affinity line: %s", rest);
	if (strcmp(mine, its) != 0)
		fail_msg("the program may run on cpus %s, its writer thread on %s", mine, its);
	finish(&r);
}

/* A writer woken on the cpu of the thread that woke it leaves that cpu
 * (writer.c, move_off): a futex wake queues it there once the scheduler
 * sees no idle cpu elsewhere, and then every wake did the same, the
 * program's thread waiting for each of the writer's passes.  The program
 * keeps its other cpus busy and wakes its writer with snapshots; given
 * the waker's cpu alone (from outside), the writer stays there. */
static void test_e2e_hostile_writer_leaves_waker_cpu(void **state)
{
	struct run r;
	char rest[4600], its[256], alone[256], one[32];
	int c = -1;

	(void)state;
	start(&r, "moveoff", NULL, NULL);
	expect(&r, "moveoff", rest, sizeof(rest));
	finish(&r);
	if (!strncmp(rest, "skip", 4)) {
		print_message("skipped: under a seccomp filter, fewer than two cpus or more "
		              "than 16, or no writer thread\n");
		skip();
	}
	if (sscanf(rest, "%d %255s %255s", &c, its, alone) != 3)
		fail_msg("bad moveoff line: %s", rest);
	snprintf(one, sizeof(one), "%d", c);
	if (strcmp(alone, one) != 0)
		fail_msg("given cpu %d alone, the writer took %s", c, alone);
	if (strcmp(its, "?") == 0)
		fail_msg("the writer's cpus could not be read: %s", rest);
	for (char *p = its; *p;) {   /* "0-3,5": the waker's cpu may not be in it */
		char *end;
		long a = strtol(p, &end, 10), b = a;

		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		if (c >= a && c <= b)
			fail_msg("the writer may still run on its waker's cpu %d: %s", c, its);
		p = *end == ',' ? end + 1 : end;
		if (end == p && *p)
			fail_msg("bad cpu list: %s", its);
	}
}

/* The writer asks for a 100 us time slice (writer.c, short_slice): woken
 * on the cpu of a busy program thread, it then runs at once instead of
 * after that thread's slice.  Kernels before 6.12 report no slice for
 * SCHED_OTHER (0 for main too): nothing to check there. */
static void test_e2e_hostile_writer_short_slice(void **state)
{
	struct run r;
	char rest[256];
	unsigned mp = 0, wp = 0;
	unsigned long long mr = 0, wr = 0;

	(void)state;
	start(&r, "slice", NULL, NULL);
	expect(&r, "slice", rest, sizeof(rest));
	if (sscanf(rest, "%u %llu %u %llu", &mp, &mr, &wp, &wr) != 4)
		fail_msg("bad slice line: %s", rest);
	finish(&r);
	if (mp != 0 || mr == 0)
		skip();   /* not SCHED_OTHER, or a kernel that reports no slice */
	assert_int_equal(wp, 0);
	assert_int_equal(wr, 100000);
}

/* Run PROG mode under e2e_launch's seccomp filter flt; its stdout. */
static char *run_filtered(const char *flt, const char *mode)
{
	char *argv[] = {(char *)KTRACE_TEST_BINARY_DIR "/e2e_launch", (char *)"--seccomp",
	                (char *)flt, (char *)PROG, (char *)mode, NULL};
	char *dir = kt_mkdtemp("filtered"), envdir[4200], *out;
	const char *env[] = {envdir, "KTRACE_QUIET=1", NULL};
	struct kt_proc p;

	assert_non_null(dir);
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	if (kt_run(argv, env, &p, 60000) != 0)
		fail_msg("under --seccomp %s: status %#x (signal %d); stdout:\n%s\nstderr:\n%s", flt,
		         p.status, WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0, p.out, p.err);
	out = strdup(p.out);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
	return out;
}

/* The writer's start on another cpu (sched_setaffinity) and its slice
 * (sched_getattr, sched_setattr) are left out under a seccomp filter,
 * which may kill the process on calls it does not expect: with one that
 * kills on them, the program runs to its end. */
static void test_e2e_hostile_writer_under_killing_filter(void **state)
{
	char *out;

	(void)state;
	out = run_filtered("killsched", "affinity");
	if (strstr(out, "affinity ") == NULL)
		fail_msg("no affinity line: %s", out);
	free(out);
	out = run_filtered("killsched", "chdir");   /* the writer ran: it wrote the snapshot */
	if (strstr(out, "snapshot 0 ") == NULL)
		fail_msg("no snapshot: %s", out);
	free(out);
}

/* ... and under a filter that kills on none of them (it refuses
 * perf_event_open only), the writer's slice stays the program's all the
 * same. */
static void test_e2e_hostile_writer_slice_not_under_seccomp(void **state)
{
	char *out = run_filtered("eperm", "slice");
	unsigned mp = 0, wp = 0;
	unsigned long long mr = 0, wr = 0;
	const char *s = strstr(out, "slice ");

	(void)state;
	if (s == NULL || sscanf(s, "slice %u %llu %u %llu", &mp, &mr, &wp, &wr) != 4)
		fail_msg("no slice line: %s", out);
	free(out);
	assert_int_equal(wp, mp);
	assert_int_equal(wr, mr);
}

/* ---- 5. predictable names --------------------------------------------------------- */

static void test_e2e_hostile_names_taken_by_another_user(void **state)
{
	struct run r;
	char line[64], path[4400], name[700];
	int pid, made = 0;
	struct kt_file f;

	(void)state;
	start(&r, "wait", NULL, NULL);
	assert_int_equal(kt_expect_line(&r.p, "pid ", line, sizeof(line), 30000), 0);
	pid = atoi(line + 4);
	/* A shared sticky directory, as /tmp. */
	assert_int_equal(chmod(r.dir, 01777), 0);
	/* Every name the next seconds could get, taken by someone else. */
	time_t now = time(NULL);
	for (time_t t = now - 1; t <= now + 4; t++) {
		struct tm tm;
		char stamp[32];
		gmtime_r(&t, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
		for (int n = 1; n <= 1001; n++) {
			snprintf(name, sizeof(name), "%s/ktrace-%d-%s-%d.ktrace", r.dir, pid, stamp, n);
			int fd = open(name, O_CREAT | O_EXCL | O_WRONLY, 0644);
			if (fd >= 0) {
				if (geteuid() == 0 && fchown(fd, NOBODY, NOBODY) != 0)
					fail_msg("fchown: %s", strerror(errno));
				close(fd);
				made++;
			}
		}
	}
	assert_int_equal(made, 6 * 1001);
	assert_int_equal(kt_send(&r.p, "snap\n"), 0);
	assert_int_equal(expect_snapshot(&r, path, sizeof(path)), 0);
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_uid, geteuid());
	assert_true(st.st_size > 0);
	check_file(path, &f);
	kt_file_free(&f);
	kt_close_stdin(&r.p);
	finish(&r);
}

/* ---- 6. large rings ------------------------------------------------------------- */

/* Under TSan every word the copy reads is an instrumented atomic load,
 * while the writers' hot path is uninstrumented asm: the copy is then
 * many times slower than the writers and keeps only what such a copy can;
 * the accounting below is checked all the same.  ASan checks the copy's
 * loads too (about half of a wrapped ring kept). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define MIN_KEPT_PCT 0
#else
#define MIN_KEPT_PCT 90
#endif

/* KTRACE_FILTER=off: the window budget mutes the threads' functions
 * within a second, and then no ring fills (cpu 0: 12, cpu 1: 4828 of 16384
 * blocks in a plain build).  The plain build fills 64 MiB rings.
 * Sanitized threads are many times slower: they used up the program's
 * 20 s limit without wrapping a 64 MiB ring; there a 4 MiB ring and 1/16
 * of the calls (the same 1.4 rings per thread) wrap it in seconds. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define BIG_RING_ENV "KTRACE_BUFFER_MB=4", "KTRACE_FILTER=off"
#define BIG_RING_CALLS "750000"
#else
#define BIG_RING_ENV "KTRACE_BUFFER_MB=64", "KTRACE_FILTER=off"
#define BIG_RING_CALLS "12000000"
#endif

/* One run of bigring: the accounting must hold; returns the number of
 * wrapped cores of which less than MIN_KEPT_PCT is in the file. */
static int full_ring_attempt(int attempt)
{
	static const char *const extra[] = {BIG_RING_ENV, NULL};
	struct run r;
	char path[4400];
	struct kt_file f;
	uint32_t ncores = 0, nblk = 0;
	uint64_t size = 0, in_file = 0, exists = 0, slack = 0;
	int short_cores = 0;

	/* 12 M calls = 24 M words per thread: 1.4 rings of 64 MiB. */
	start(&r, "bigring", BIG_RING_CALLS, extra);
	assert_int_equal(expect_snapshot(&r, path, sizeof(path)), 0);
	check_file(path, &f);
	const struct ktrace_core_rec *cores = kt_file_section(&f, KTRACE_SEC_CORES, &ncores, &size);
	const unsigned char *p = kt_file_section(&f, KTRACE_SEC_BLOCKS, &nblk, &size);
	const struct ktrace_loss_rec *loss = kt_file_loss(&f);
	assert_non_null(cores);
	assert_non_null(p);
	uint64_t *per = calloc(ncores, sizeof(*per));
	for (uint32_t i = 0; i < nblk; i++) {
		const struct ktrace_block_rec *b = (const void *)p;
		assert_true(b->cpu < ncores);
		per[b->cpu]++;
		p += sizeof(*b) + (size_t)b->nwords * 4;
	}
	for (uint32_t c = 0; c < ncores; c++) {
		int wrapped = cores[c].blocks_used > cores[c].nblocks;
		print_message("attempt %d: cpu %u: %llu of %u blocks in the file (%s)\n", attempt, c,
		              (unsigned long long)per[c], cores[c].nblocks,
		              wrapped ? "wrapped" : "not wrapped");
		in_file += per[c];
		/* An unwrapped core held blocks_used blocks at the mark, or a
		 * few less (blocks_used is read just after it). */
		exists += wrapped ? cores[c].nblocks : cores[c].blocks_used;
		slack += wrapped ? 0 : 16;
		if (wrapped && per[c] * 100 < (uint64_t)cores[c].nblocks * MIN_KEPT_PCT) {
			print_message("attempt %d: cpu %u: only %llu of %u blocks of a full ring in the "
			              "file (overwritten during the copy %llu, no memory %llu)\n",
			              attempt, c, (unsigned long long)per[c], cores[c].nblocks,
			              (unsigned long long)loss->count[KTRACE_LOSS_NOT_COPIED_OVERWRITTEN],
			              (unsigned long long)loss->count[KTRACE_LOSS_NOT_COPIED_NO_MEMORY]);
			short_cores++;
		}
	}
	print_message("attempt %d: not copied: overwritten %llu, no memory %llu\n", attempt,
	              (unsigned long long)loss->count[KTRACE_LOSS_NOT_COPIED_OVERWRITTEN],
	              (unsigned long long)loss->count[KTRACE_LOSS_NOT_COPIED_NO_MEMORY]);
	/* Every block of every ring is in the file or counted: every time. */
	uint64_t seen = in_file + loss->count[KTRACE_LOSS_NOT_COPIED_OVERWRITTEN] +
	                loss->count[KTRACE_LOSS_NOT_COPIED_NO_MEMORY];
	if (seen > exists || seen + slack < exists)
		fail_msg("%llu blocks in the file or counted, the rings held %llu (-%llu)",
		         (unsigned long long)seen, (unsigned long long)exists,
		         (unsigned long long)slack);
	free(per);
	kt_file_free(&f);
	finish(&r);
	return short_cores;
}

/* The copy races two threads that fill 64 MiB rings flat out on a
 * 2-cpu machine: it wins by copying at memcpy speed, oldest blocks first
 * (ring.c, "Readers"), and keeps 99.6% of each ring.  On a shared VM the
 * host now and then stops the copying thread for tens of milliseconds
 * mid-copy (CI once kept 7197 of 16384; here 1 run in 42 kept 6994,
 * the library of 589dbac 0 in 10, and nothing in the copy changed); the
 * writers then overwrite what it had not reached yet, and the file counts
 * it, as it must.  So a short copy is retried, twice: a copy that is
 * slower than the writers fails all three. */
static void test_e2e_hostile_full_64mib_ring_under_load(void **state)
{
	(void)state;
	for (int attempt = 1;; attempt++) {
		int short_cores = full_ring_attempt(attempt);
		if (short_cores == 0)
			return;
		if (attempt == 3)
			fail_msg("less than %d%% of a full ring in the file in 3 runs of 3 "
			         "(above)", MIN_KEPT_PCT);
	}
}

/* ---- 7. exit -------------------------------------------------------------------- */

static void test_e2e_hostile_exit_wait_survives_signal_flood(void **state)
{
	static const char *const extra[] = {"KTRACE_BUFFER_MB=32", NULL};
	struct run r;
	char **paths;
	struct kt_file f;
	int n;

	(void)state;
	start(&r, "exitflood", NULL, extra);
	if (kt_wait(&r.p, 60000) != 0)
		fail_msg("program failed (status %#x); stderr:\n%s", r.p.status, r.p.err);
	n = kt_list_snapshots(r.dir, &paths);
	if (n != 1)
		fail_msg("%d files after exit() with a snapshot pending; stderr:\n%s", n, r.p.err);
	check_file(paths[0], &f);
	kt_file_free(&f);
	kt_free_list(paths);
	kt_proc_free(&r.p);
	kt_rmtree(r.dir);
	free(r.dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_hostile_closefrom_then_own_pipe),
		cmocka_unit_test(test_e2e_hostile_stderr_reused_by_program),
		cmocka_unit_test(test_e2e_hostile_setuid_root_ignores_environment),
		cmocka_unit_test(test_e2e_hostile_rlimit_as_program_thread),
		cmocka_unit_test(test_e2e_hostile_signal_flood_files_per_minute),
		cmocka_unit_test(test_e2e_hostile_signal_flood_bytes_per_minute),
		cmocka_unit_test(test_e2e_hostile_daemon_writes_where_it_started),
		cmocka_unit_test(test_e2e_hostile_relative_dir_after_chdir),
		cmocka_unit_test(test_e2e_hostile_writer_keeps_program_cpus),
		cmocka_unit_test(test_e2e_hostile_writer_leaves_waker_cpu),
		cmocka_unit_test(test_e2e_hostile_writer_short_slice),
		cmocka_unit_test(test_e2e_hostile_writer_slice_not_under_seccomp),
		cmocka_unit_test(test_e2e_hostile_writer_under_killing_filter),
		cmocka_unit_test(test_e2e_hostile_names_taken_by_another_user),
		cmocka_unit_test(test_e2e_hostile_full_64mib_ring_under_load),
		cmocka_unit_test(test_e2e_hostile_exit_wait_survives_signal_flood),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
