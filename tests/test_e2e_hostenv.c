/*
 * test_e2e_hostenv.c - real traced programs (e2e/hostenv_prog.c) in the
 * environments production programs run in, each of which broke the
 * program or the trace before:
 *
 *   sandbox_kill   started under a seccomp filter that kills on
 *                  perf_event_open: runs, forks, snapshots in both; the
 *                  summary says scheduling was not tried and why.
 *   sandbox_self   sandboxes itself (TSYNC) after start-up, then forks:
 *                  the child lives (its fork handler no longer opens perf
 *                  events) and snapshots.
 *   sandbox_eperm  KTRACE_SCHED=on under an EPERM filter: the summary does
 *                  not advise a sysctl value the machine already has.
 *   small_stacks   threads of PTHREAD_STACK_MIN, 32 and 64 KiB, the larger
 *                  two using all but 10 KiB of their stacks in traced
 *                  frames: they start and run, traced and with
 *                  KTRACE_ENABLE=0 (static TLS no longer takes 16.8 KiB of
 *                  every stack).
 *   alt_stack      a traced SIGUSR1 handler on an 8 KiB alternate stack
 *                  (guard page below) calls into a library never called
 *                  before: on a new thread as its first traced code, and
 *                  on main; also with KTRACE_EXCLUDE (the ELF symbol
 *                  lookup).  The handler runs, every call is in the file.
 *   signal_taken   the program installs its own SIGUSR2 handler after
 *                  ktrace started (Redis does): after `kill -USR2` ktrace
 *                  says on stderr, once, that the signal was taken over and
 *                  what to do; the next snapshot carries it and the summary
 *                  says it.  The program's handler keeps working.
 *   no_writer      RLIMIT_NPROC reached (another uid, limit 1): the writer
 *                  thread cannot start.  One stderr line says so and why;
 *                  ktrace_snapshot returns KTRACE_ENOWRITER (not "disabled
 *                  (KTRACE_ENABLE=0)"); the rings and perf mappings are
 *                  given back (VmSize within 4 MiB of KTRACE_ENABLE=0).
 *                  Root only (the limit does not bind root).
 *   mlockall       mlockall(MCL_CURRENT | MCL_FUTURE) under an 8 MiB
 *                  RLIMIT_MEMLOCK succeeds as it does untraced: as another
 *                  uid, tracing is off and one stderr line says why and the
 *                  limit that would do; as root (CAP_IPC_LOCK), tracing
 *                  goes on and ktrace's buffers are not locked (VmLck
 *                  within 4 MiB of KTRACE_ENABLE=0).  Root only.
 *   vfork          1000 vfork children that run traced code before _exit,
 *                  while another thread records throughout: none of the
 *                  children's calls lands in the parent's timeline (they
 *                  did, as the parent thread's), each of their events is
 *                  counted as a vfork loss, no exit is lost, no block tail
 *                  cut.
 *   clock_step     the wall clock steps back one hour mid-run (through the
 *                  library's test offset: no test can step the machine's
 *                  clock, and a time namespace does not move
 *                  CLOCK_REALTIME): the summary says it stepped and by how
 *                  much, the window lasts what it lasted (0.5 s, not
 *                  -1 h), no Chrome slice has a negative duration.
 *   build_ids      the executable and a shared library are replaced by other
 *                  builds after the snapshot (a deploy): the decoder warns
 *                  per module and leaves their addresses numeric instead of
 *                  printing the new files' names; with --debug-dir holding
 *                  the old files as .build-id/xx/rest.debug, it finds them
 *                  by build-id and every name is right again.
 *   dir_4032       a KTRACE_DIR of exactly 4032 bytes (the documented
 *                  maximum) is used, not refused as "longer than 4032".
 *   text_escapes   a thread name and a mark name with terminal escapes (ESC,
 *                  BEL): the text, summary and stats outputs carry no
 *                  control byte but newline and tab; the decoder reads the
 *                  snapshot from standard input as "-", pipe or file.
 *   many_threads   2000 short threads, then enough calls on main (pinned to
 *                  one cpu, 1 MiB ring) that the window starts after they
 *                  all exited: they are left out of the file (counted in
 *                  INFO) and the summary lists a handful of threads, not
 *                  2000 lines of threads with no events.
 *   stalled_stderr stderr is a full pipe nobody reads (a hung log
 *                  collector): three ktrace_snapshot() calls return, each
 *                  with its file; the "wrote" lines that could not go are
 *                  counted in the next file's losses.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"
#include "ktrace.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_hostenv"
#define PROG_MLOCK KTRACE_TEST_BINARY_DIR "/e2e_hostenv_mlock"
#define PROG_STATIC KTRACE_TEST_BINARY_DIR "/e2e_hostenv_static"
#define LAUNCH KTRACE_TEST_BINARY_DIR "/e2e_launch"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1   /* their runtimes need more stack and memory */
#else
#define UNDER_SANITIZER 0
#endif
/* As in test_e2e_lifecycle.c: GCC 12's ASan runtime is not fork-safe in a
 * multithreaded process (the child can block on an allocator lock).  Under
 * TSan the child starts libktrace's writer thread after fork: tests/run.sh
 * sets TSAN_OPTIONS=...:die_after_fork=0 for that. */
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_FORK_UNDER_ASAN() skip()
#else
#define SKIP_FORK_UNDER_ASAN() do { } while (0)
#endif

/* Environment for a run: KTRACE_DIR=dir, quiet, plus extra (NULL-ended). */
static const char *const *env_for(const char *dir, const char *const *extra)
{
	static char envdir[4500];
	static const char *env[16];
	size_t n = 0;

	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	env[n++] = envdir;
	env[n++] = "KTRACE_QUIET=1";
	env[n++] = "KTRACE_ENABLE";
	env[n++] = "KTRACE_SCHED";
	env[n++] = "KTRACE_SIGNAL";
	for (size_t i = 0; extra && extra[i] && n < 15; i++)
		env[n++] = extra[i];
	env[n] = NULL;
	return env;
}

/* "<prefix> <rc> <path>" from the output: the path, or fail. */
static void snapshot_of(const struct kt_proc *p, const char *prefix, char *path, size_t len)
{
	char key[64], fmt[32];
	const char *s;
	int rc = -1;

	snprintf(key, sizeof(key), "\n%s ", prefix);
	s = strncmp(p->out, key + 1, strlen(key + 1)) == 0 ? p->out - 1 : strstr(p->out, key);
	snprintf(fmt, sizeof(fmt), "%%d %%%zus", len - 1);
	if (!s || sscanf(s + strlen(key), fmt, &rc, path) != 2 || rc != 0)
		fail_msg("no '%s 0 PATH' line; stdout:\n%s\nstderr:\n%s", prefix, p->out, p->err);
}

/* ktrace-decode's summary of path (stdout, malloc'd). */
static char *summary(const char *path)
{
	char *argv[] = { (char *)KTRACE_DECODE_PATH, (char *)path, NULL };
	struct kt_proc p;
	char *out;

	if (kt_run(argv, NULL, &p, 60000) != 0)
		fail_msg("ktrace-decode %s failed (%#x): %s", path, p.status, p.err);
	out = strdup(p.out);
	kt_proc_free(&p);
	return out;
}

/* The snapshot decodes and shows n calls of func on the thread of tid
 * (0: on any thread). */
static void expect_calls(const char *path, int32_t tid, const char *func, uint64_t n)
{
	struct kd_dec *d = kd_open(path);
	uint32_t th = KD_NONE;

	assert_non_null(d);
	if (tid)
		th = kd_thread_tid(d, tid);
	if (tid && th == KD_NONE)
		fail_msg("%s: no thread %d", path, (int)tid);
	if (kd_count(d, th, func) != n)
		fail_msg("%s: %llu calls of %s on thread %d, not %llu", path,
		         (unsigned long long)kd_count(d, th, func), func, (int)tid,
		         (unsigned long long)n);
	kd_dec_free(d);
}

/* ---- sandboxes --------------------------------------------------------------- */

/* A fork run (through argv) with both snapshots checked. */
static void check_fork_run(char *const argv[], const char *const *extra, const char *sched_line)
{
	char *dir, path[4400], cpath[4400];
	struct kt_proc p;
	char *sum;
	int st = -1;
	const char *s;

	SKIP_FORK_UNDER_ASAN();
	dir = kt_mkdtemp("sandbox");

	if (kt_run(argv, env_for(dir, extra), &p, 60000) != 0)
		fail_msg("status %#x (signal %d); stdout:\n%s\nstderr:\n%s", p.status,
		         WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0, p.out, p.err);
	s = strstr(p.out, "child_status ");
	assert_non_null(s);
	st = atoi(s + 13);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("the fork child died: status %#x (signal %d)", st,
		         WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	snapshot_of(&p, "child_snapshot", cpath, sizeof(cpath));
	snapshot_of(&p, "snapshot", path, sizeof(path));
	expect_calls(path, p.pid, "leaf_a", 10);
	sum = summary(path);
	if (!strstr(sum, sched_line))
		fail_msg("the summary does not say\n  %s\n%s", sched_line, sum);
	free(sum);
	expect_calls(cpath, 0, "leaf_a", 20);
	sum = summary(cpath);
	if (!strstr(sum, sched_line))
		fail_msg("the child's summary does not say\n  %s\n%s", sched_line, sum);
	free(sum);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

#define SECCOMP_LINE "scheduling: not recorded (a seccomp filter is active: perf_event_open " \
                     "was not tried, as a filter may kill the process on it; KTRACE_SCHED=on " \
                     "tries it)"

static void test_e2e_hostenv_sandbox_kill(void **state)
{
	char *argv[] = { (char *)LAUNCH, (char *)"--seccomp", (char *)"kill", (char *)PROG,
		         (char *)"fork", NULL };

	(void)state;
	check_fork_run(argv, NULL, SECCOMP_LINE);
}

static void test_e2e_hostenv_sandbox_self(void **state)
{
	char *argv[] = { (char *)PROG, (char *)"selfsandbox", NULL };
	char *dir;
	char cpath[4400];
	struct kt_proc p;
	const char *s;
	char *sum;
	int st;

	(void)state;
	SKIP_FORK_UNDER_ASAN();
	dir = kt_mkdtemp("selfsandbox");
	if (kt_run(argv, env_for(dir, NULL), &p, 60000) != 0)
		fail_msg("status %#x; stdout:\n%s\nstderr:\n%s", p.status, p.out, p.err);
	s = strstr(p.out, "child_status ");
	assert_non_null(s);
	st = atoi(s + 13);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("the fork child died: status %#x (signal %d)", st,
		         WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	snapshot_of(&p, "child_snapshot", cpath, sizeof(cpath));
	expect_calls(cpath, 0, "leaf_a", 20);
	sum = summary(cpath);
	if (!strstr(sum, SECCOMP_LINE))
		fail_msg("the child's summary does not say\n  %s\n%s", SECCOMP_LINE, sum);
	free(sum);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

static void test_e2e_hostenv_sandbox_eperm(void **state)
{
	static const char *const on[] = { "KTRACE_SCHED=on", NULL };
	char *argv[] = { (char *)LAUNCH, (char *)"--seccomp", (char *)"eperm", (char *)PROG,
		         (char *)"fork", NULL };
	char want[512], buf[32] = "";
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	int par;

	(void)state;
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	par = atoi(buf);
	if (par <= 2)
		snprintf(want, sizeof(want), "scheduling: not recorded (perf_event_open: EPERM, "
		         "kernel.perf_event_paranoid=%d, which allows it: a seccomp filter", par);
	else
		snprintf(want, sizeof(want), "scheduling: not recorded (perf_event_open: EPERM, "
		         "kernel.perf_event_paranoid=%d; allow with sysctl", par);
	check_fork_run(argv, on, want);
}

/* ---- small thread stacks ---------------------------------------------------- */

static void check_small_stacks(const char *const *extra, int traced)
{
	char *argv[] = { (char *)PROG, (char *)"smallstack", NULL };
	char *dir = kt_mkdtemp("smallstack");
	char path[4400];
	struct kt_proc p;
	size_t size, used;
	int rc, n = 0;
	const char *s;

	if (kt_run(argv, env_for(dir, extra), &p, 60000) != 0)
		fail_msg("status %#x (signal %d); stdout:\n%s\nstderr:\n%s", p.status,
		         WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0, p.out, p.err);
	for (s = p.out; (s = strstr(s, "thread ")) != NULL; s++) {
		assert_int_equal(sscanf(s, "thread %zu %d %zu", &size, &rc, &used), 3);
		if (rc != 0)
			fail_msg("a thread with a %zu-byte stack did not start: %s", size,
			         strerror(rc));
		n++;
	}
	assert_int_equal(n, 3);
	if (traced) {
		struct kd_dec *d;

		snapshot_of(&p, "snapshot", path, sizeof(path));
		d = kd_open(path);
		assert_non_null(d);
		/* main's 3, then 5 per thread */
		assert_int_equal(kd_count(d, KD_NONE, "leaf_a"), 18);
		assert_true(kd_count(d, KD_NONE, "deep") > 100);
		kd_dec_free(d);
	}
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

static void test_e2e_hostenv_small_stacks(void **state)
{
	static const char *const off[] = { "KTRACE_ENABLE=0", NULL };

	(void)state;
	check_small_stacks(NULL, 1);
	check_small_stacks(off, 0);
}

/* ---- signal alternate stacks --------------------------------------------------------- */

static void check_alt_stack(const char *const *extra)
{
	char *argv[] = { (char *)PROG, (char *)"altstack", (char *)KT_PLUGIN_PATH, NULL };
	char *dir = kt_mkdtemp("altstack");
	char path[4400];
	struct kt_proc p;
	struct kd_dec *d;
	const char *s;

	if (kt_run(argv, env_for(dir, extra), &p, 60000) != 0)
		fail_msg("status %#x (signal %d); stdout:\n%s\nstderr:\n%s", p.status,
		         WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0, p.out, p.err);
	/* The bytes of the 8 KiB stack used (kernel frame, handler, library):
	 * printed for the record, not asserted. */
	for (s = p.out; (s = strstr(s, "altstack ")) != NULL; s++)
		print_message("  %.*s\n", (int)strcspn(s, "\n"), s);
	snapshot_of(&p, "snapshot", path, sizeof(path));
	d = kd_open(path);
	assert_non_null(d);
	assert_int_equal(kd_count(d, KD_NONE, "on_usr1"), 2);
	assert_int_equal(kd_count(d, KD_NONE, "plugin_entry"), 2);
	assert_int_equal(kd_count(d, KD_NONE, "plugin_inner"), 4);
	kd_dec_free(d);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

static void test_e2e_hostenv_alt_stack(void **state)
{
	static const char *const excl[] = { "KTRACE_EXCLUDE=nothing_*,[xyz]*", NULL };

	(void)state;
	if (UNDER_SANITIZER) {
		/* their runtimes' own signal handling needs more than 8 KiB */
		print_message("  (skipped under a sanitizer)\n");
		skip();
	}
	check_alt_stack(NULL);
	check_alt_stack(excl);
}

/* ---- the snapshot signal taken over ------------------------------------------------ */

static void test_e2e_hostenv_signal_taken(void **state)
{
	char *argv[] = { (char *)PROG, (char *)"sigtake", NULL };
	char *dir = kt_mkdtemp("sigtake");
	char line[4600], path[4400];
	struct kt_proc p;
	struct kt_file f;
	int64_t end;
	char *sum, **files;
	const char *warn = "ktrace: the program installed its own handler for signal 12 (SIGUSR2)";

	(void)state;
	assert_int_equal(kt_spawn(&p, argv, env_for(dir, NULL), NULL), 0);
	assert_int_equal(kt_expect_line(&p, "ready", NULL, 0, 30000), 0);
	assert_int_equal(kill(p.pid, SIGUSR2), 0);
	/* The writer checks about once a second. */
	end = kt_now_ms() + 20000;
	while (!strstr(p.err, warn) && kt_now_ms() < end) {
		assert_int_equal(kt_send(&p, "count\n"), 0);
		assert_int_equal(kt_expect_line(&p, "usr2 ", line, sizeof(line), 30000), 0);
		kt_sleep_ms(100);
	}
	if (!strstr(p.err, warn))
		fail_msg("nothing said about the signal in 20 s; stderr:\n%s", p.err);
	assert_int_equal(kt_count_str(p.err, "ktrace: "), 1);
	assert_int_equal(kt_send(&p, "count\n"), 0);
	assert_int_equal(kt_expect_line(&p, "usr2 ", line, sizeof(line), 30000), 0);
	assert_string_equal(line, "usr2 1");   /* the program's handler ran */
	assert_int_equal(kt_send(&p, "snap\n"), 0);
	assert_int_equal(kt_expect_line(&p, "snapshot ", line, sizeof(line), 30000), 0);
	assert_int_equal(sscanf(line, "snapshot 0 %4399s", path), 1);
	kt_close_stdin(&p);
	if (kt_wait(&p, 30000) != 0)
		fail_msg("status %#x; stderr:\n%s", p.status, p.err);
	assert_int_equal(kt_count_str(p.err, "ktrace: "), 1);   /* once */
	/* SIGUSR2 wrote no file: the API's is the only one. */
	assert_int_equal(kt_list_snapshots(dir, &files), 1);
	kt_free_list(files);
	assert_int_equal(kt_file_load(path, &f), 0);
	assert_true(kt_file_info(&f)->flags & KTRACE_INFO_SIGNAL_TAKEN);
	assert_int_equal(kt_file_info(&f)->signo, SIGUSR2);
	kt_file_free(&f);
	sum = summary(path);
	if (!strstr(sum, "signal:    the program took over the snapshot signal (SIGUSR2, 12)"))
		fail_msg("the summary does not say it:\n%s", sum);
	free(sum);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

/* ---- RLIMIT_NPROC: no writer thread ------------------------------------------------ */

static long field(const char *out, const char *key)
{
	const char *s = strstr(out, key);

	if (s == NULL)
		fail_msg("no '%s' in:\n%s", key, out);
	return strtol(s + strlen(key), NULL, 10);
}

static void test_e2e_hostenv_no_writer(void **state)
{
	char *argv[] = { (char *)LAUNCH, (char *)"--uid", (char *)"65534", (char *)"--nproc",
		         (char *)"1", (char *)PROG, (char *)"nproc", NULL };
	/* LeakSanitizer needs a thread of its own at exit */
	static const char *const on[] = { "ASAN_OPTIONS=detect_leaks=0", NULL };
	static const char *const off[] = { "KTRACE_ENABLE=0", "ASAN_OPTIONS=detect_leaks=0", NULL };
	char *dir = kt_mkdtemp("nproc");
	struct kt_proc p, q;
	long vm, vm_off;

	(void)state;
	if (geteuid() != 0) {
		print_message("  (skipped: RLIMIT_NPROC needs another uid, so root)\n");
		kt_skip_rm(dir);
	}
	chmod(dir, 0777);
	if (kt_run(argv, env_for(dir, on), &p, 60000) != 0)
		fail_msg("status %#x; stdout:\n%s\nstderr:\n%s", p.status, p.out, p.err);
	assert_int_equal(field(p.out, "enabled "), 0);
	assert_int_equal(field(p.out, "snapshot "), KTRACE_ENOWRITER);
	assert_int_equal(kt_count_str(p.err, "ktrace: "), 1);
	if (!strstr(p.err, "cannot start the snapshot writer thread") ||
	    !strstr(p.err, "RLIMIT_NPROC") || !strstr(p.err, "tracing is off"))
		fail_msg("stderr:\n%s", p.err);
	vm = field(p.out, "vm_kb ");
	assert_int_equal(kt_run(argv, env_for(dir, off), &q, 60000), 0);
	vm_off = field(q.out, "vm_kb ");
	/* (not under a sanitizer: its runtime maps on its own account) */
	if (!UNDER_SANITIZER && vm > vm_off + 4096)   /* the rings alone are 8 MiB per cpu */
		fail_msg("VmSize %ld KiB with the writer refused, %ld KiB with KTRACE_ENABLE=0: "
		         "the buffers were kept", vm, vm_off);
	kt_proc_free(&p);
	kt_proc_free(&q);
	kt_rmtree(dir);
	free(dir);
}

/* ---- mlockall ------------------------------------------------------------------ */

static void test_e2e_hostenv_mlockall(void **state)
{
	char *user[] = { (char *)LAUNCH, (char *)"--uid", (char *)"65534", (char *)"--memlock",
		         (char *)"8388608", (char *)PROG_MLOCK, (char *)"mlock", NULL };
	char *root[] = { (char *)LAUNCH, (char *)"--memlock", (char *)"8388608",
		         (char *)PROG_MLOCK, (char *)"mlock", NULL };
	static const char *const off[] = { "KTRACE_ENABLE=0", NULL };
	char *dir = kt_mkdtemp("mlock");
	char path[4400];
	struct kt_proc p, q;
	long lck, lck_off;

	(void)state;
	if (UNDER_SANITIZER) {
		/* mlockall(MCL_CURRENT) would lock their shadow memory */
		print_message("  (skipped under a sanitizer)\n");
		kt_skip_rm(dir);
	}
	if (geteuid() != 0) {
		print_message("  (skipped: needs root, to run as another uid)\n");
		kt_skip_rm(dir);
	}
	chmod(dir, 0777);
	/* Another uid: the limit binds; tracing steps aside, said once. */
	if (kt_run(user, env_for(dir, NULL), &p, 60000) != 0)
		fail_msg("status %#x; stdout:\n%s\nstderr:\n%s", p.status, p.out, p.err);
	if (!strstr(p.out, "mlockall 0 0"))
		fail_msg("mlockall failed traced; stdout:\n%s\nstderr:\n%s", p.out, p.err);
	assert_int_equal(field(p.out, "enabled "), 0);
	assert_int_equal(field(p.out, "snapshot "), KTRACE_EMEMLOCK);
	assert_int_equal(kt_count_str(p.err, "ktrace: "), 1);
	if (!strstr(p.err, "calls mlockall() and RLIMIT_MEMLOCK is 8192 KiB"))
		fail_msg("stderr:\n%s", p.err);
	kt_proc_free(&p);
	/* Root: traced, the snapshot works, ktrace's buffers stay unlocked. */
	if (kt_run(root, env_for(dir, NULL), &p, 60000) != 0)
		fail_msg("status %#x; stdout:\n%s\nstderr:\n%s", p.status, p.out, p.err);
	assert_non_null(strstr(p.out, "mlockall 0 0"));
	assert_int_equal(field(p.out, "enabled "), 1);
	snapshot_of(&p, "snapshot", path, sizeof(path));
	expect_calls(path, p.pid, "leaf_a", 5);
	lck = field(p.out, "vm_lck_kb ");
	assert_int_equal(kt_run(root, env_for(dir, off), &q, 60000), 0);
	lck_off = field(q.out, "vm_lck_kb ");
	if (lck > lck_off + 4096)
		fail_msg("VmLck %ld KiB traced, %ld KiB with KTRACE_ENABLE=0", lck, lck_off);
	kt_proc_free(&p);
	kt_proc_free(&q);
	kt_rmtree(dir);
	free(dir);
}

/* ---- vfork ------------------------------------------------------------------------ */

static void test_e2e_hostenv_vfork(void **state)
{
#if defined(__SANITIZE_THREAD__)
	/* TSan's runtime turns each vfork into a fork of its large process
	 * (~45 ms each here, with the child's exit: 100 took 11.6 s): 20 of
	 * them, and no count is checked below.  test_e2e_lifecycle forks
	 * under TSan too. */
	char *argv[] = { (char *)PROG, (char *)"vfork", (char *)"20", NULL };
#else
	char *argv[] = { (char *)PROG, (char *)"vfork", (char *)"1000", NULL };
#endif
	static const char *const nofilter[] = { "KTRACE_FILTER=off", NULL };
	char *dir = kt_mkdtemp("vfork");
	char path[4400], want[64];
	struct kt_proc p;
	struct kd_dec *d;
	struct kt_file f;
	uint32_t tails = 0;

	(void)state;
	if (kt_run(argv, env_for(dir, nofilter), &p, 120000) != 0)
		fail_msg("status %#x; stdout:\n%s\nstderr:\n%s", p.status, p.out, p.err);
	snprintf(want, sizeof(want), "vforks %s 0", argv[2]);
	assert_non_null(strstr(p.out, want));
	snapshot_of(&p, "snapshot", path, sizeof(path));
	d = kd_open(path);
	assert_non_null(d);
	if (kd_count(d, KD_NONE, "vfork_child_work") != 0)
		fail_msg("%llu calls of the vfork children in the parent's timeline",
		         (unsigned long long)kd_count(d, KD_NONE, "vfork_child_work"));
	for (uint32_t i = 0; i < d->snap.ncores; i++)
		tails += d->core_stats[i].damaged_tails;
	assert_int_equal(d->lost_exits, 0);
	assert_int_equal(tails, 0);
	kd_dec_free(d);
	/* vfork_child_work, work and 3 x leaf_a: 10 events per child.  (Not
	 * under TSan: its runtime replaces vfork with fork.) */
	assert_int_equal(kt_file_load(path, &f), 0);
#if !defined(__SANITIZE_THREAD__)
	assert_int_equal(kt_file_loss(&f)->count[KTRACE_LOSS_VFORK], 10000);
#endif
	kt_file_free(&f);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

/* ---- wall-clock steps ------------------------------------------------------------- */

static void test_e2e_hostenv_clock_step(void **state)
{
	char *argv[] = { (char *)PROG_STATIC, (char *)"clockstep", NULL };
	char *dir = kt_mkdtemp("clockstep");
	char path[4400];
	struct kt_proc p, cp;
	char *sum, *chrome_argv[] = { (char *)KTRACE_DECODE_PATH, (char *)"--format",
		                      (char *)"chrome", path, NULL };
	const char *w, *s;
	double win = -1, dur, main_dur = -1;

	(void)state;
	if (kt_run(argv, env_for(dir, NULL), &p, 60000) != 0)
		fail_msg("status %#x; stdout:\n%s\nstderr:\n%s", p.status, p.out, p.err);
	snapshot_of(&p, "snapshot", path, sizeof(path));
	sum = summary(path);
	if (!strstr(sum, "wallclock: the wall clock stepped 1 time while recording (largest "
	            "-3600.000 s"))
		fail_msg("the summary does not say the clock stepped:\n%s", sum);
	w = strstr(sum, "\nwindow:");
	assert_non_null(w);
	w = strstr(w, "UTC (");
	assert_non_null(w);
	win = strtod(w + 5, NULL);
	if (win < 0.4 || win > 60)
		fail_msg("window of %.6f s:\n%s", win, sum);
	free(sum);
	assert_int_equal(kt_run(chrome_argv, NULL, &cp, 60000), 0);
	for (s = cp.out; (s = strstr(s, "\"dur\":")) != NULL; s++) {
		dur = strtod(s + 6, NULL);
		if (dur < 0)
			fail_msg("a slice of %.3f us: %.200s", dur, s - 120 > cp.out ? s - 120 : cp.out);
	}
	s = strstr(cp.out, "\"name\":\"step_span\"");
	assert_non_null(s);
	s = strstr(s, "\"dur\":");
	assert_non_null(s);
	main_dur = strtod(s + 6, NULL);
	if (main_dur < 400000 || main_dur > 60e6)
		fail_msg("step_span lasted %.3f us, not about 500 ms", main_dur);
	kt_proc_free(&cp);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

/* ---- build-ids ---------------------------------------------------------------------- */

static void copy_file(const char *from, const char *to)
{
	char cmd[18600];

	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'", to, from, to);
	assert_int_equal(system(cmd), 0);
}

static char *decode_stats(const char *path, const char *debug_dir, char **err)
{
	char *argv[] = { (char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)"stats",
		         (char *)path, NULL, NULL, NULL };
	struct kt_proc p;
	char *out;

	if (debug_dir) {
		argv[3] = (char *)"--debug-dir";
		argv[4] = (char *)debug_dir;
		argv[5] = (char *)path;
	}
	if (kt_run(argv, NULL, &p, 60000) != 0)
		fail_msg("ktrace-decode failed (%#x): %s", p.status, p.err);
	out = strdup(p.out);
	*err = strdup(p.err);
	kt_proc_free(&p);
	return out;
}

static void test_e2e_hostenv_build_ids(void **state)
{
	char *dir = kt_mkdtemp("buildid");
	char prog[4400], lib[4400], snapdir[4400], dbg[4400], path[4400], dst[9000], hex[65];
	char *argv[] = { prog, (char *)"altstack", lib, NULL };
	const struct ktrace_buildid_rec *b;
	const void *mods;
	struct kt_proc p;
	struct kt_file f;
	uint32_t n, nm, ids = 0;
	uint64_t msize;
	char *out, *err;

	(void)state;
	if (UNDER_SANITIZER) {
		print_message("  (skipped under a sanitizer: the altstack program)\n");
		kt_skip_rm(dir);
	}
	snprintf(prog, sizeof(prog), "%s/bin/prog", dir);
	snprintf(lib, sizeof(lib), "%s/bin/plugin.so", dir);
	snprintf(snapdir, sizeof(snapdir), "%s/snaps", dir);
	snprintf(dbg, sizeof(dbg), "%s/debug", dir);
	copy_file(PROG, prog);
	copy_file(KT_PLUGIN_PATH, lib);
	assert_int_equal(mkdir(snapdir, 0700), 0);
	if (kt_run(argv, env_for(snapdir, NULL), &p, 60000) != 0)
		fail_msg("status %#x; stdout:\n%s\nstderr:\n%s", p.status, p.out, p.err);
	snapshot_of(&p, "snapshot", path, sizeof(path));
	kt_proc_free(&p);

	/* As run: right names, no warning. */
	out = decode_stats(path, NULL, &err);
	assert_non_null(strstr(out, "on_usr1"));
	assert_non_null(strstr(out, "plugin_entry"));
	assert_null(strstr(err, "not the file that ran"));
	free(out);
	free(err);

	/* The old files by build-id, as gdb and debuginfod lay them out. */
	assert_int_equal(kt_file_load(path, &f), 0);
	b = kt_file_section(&f, KTRACE_SEC_BUILDIDS, &n, NULL);
	mods = kt_file_section(&f, KTRACE_SEC_MODULES, &nm, &msize);
	assert_non_null(b);
	assert_non_null(mods);
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *q = mods;
		const char *src = NULL;
		struct ktrace_module_rec r;

		/* MODULES record b[i].module: its path says which file it is */
		for (uint32_t k = 0; k <= b[i].module && k < nm; k++) {
			memcpy(&r, q, sizeof(r));
			if (k == b[i].module) {
				if (r.path_len >= 5 && !memcmp(q + sizeof(r) + r.path_len - 5, "/prog", 5))
					src = PROG;
				else if (r.path_len >= 10 &&
				         !memcmp(q + sizeof(r) + r.path_len - 10, "/plugin.so", 10))
					src = KT_PLUGIN_PATH;
			}
			q += sizeof(r) + ((r.path_len + 7) & ~7u);
		}
		if (!src || b[i].id_len != 20)
			continue;
		for (int k = 0; k < 20; k++)
			sprintf(hex + 2 * k, "%02x", b[i].id[k]);
		snprintf(dst, sizeof(dst), "%s/.build-id/%.2s/%s.debug", dbg, hex, hex + 2);
		copy_file(src, dst);
		ids++;
	}
	(void)msize;
	kt_file_free(&f);
	assert_int_equal(ids, 2);

	/* A deploy: other builds at the same paths. */
	copy_file(PROG_MLOCK, prog);
	copy_file(KT_OTHER_LIB_PATH, lib);
	out = decode_stats(path, NULL, &err);
	if (kt_count_str(err, "not the file that ran") != 2)
		fail_msg("want a warning for each replaced module; stderr:\n%s", err);
	/* No name from the wrong files: numeric instead. */
	assert_null(strstr(out, "on_usr1"));
	assert_null(strstr(out, "plugin_entry"));
	assert_null(strstr(out, "lib_leaf"));
	assert_null(strstr(out, "mode_mlock"));
	assert_non_null(strstr(out, "(prog+0x"));
	assert_non_null(strstr(out, "(plugin.so+0x"));
	free(out);
	free(err);

	out = decode_stats(path, dbg, &err);
	assert_non_null(strstr(out, "on_usr1"));
	assert_non_null(strstr(out, "plugin_entry"));
	assert_null(strstr(err, "not the file that ran"));
	free(out);
	free(err);
	kt_rmtree(dir);
	free(dir);
}

/* ---- KTRACE_DIR at its maximum ------------------------------------------------------ */

static void test_e2e_hostenv_dir_4032(void **state)
{
	char *dir = kt_mkdtemp("dir4032");
	char *argv[] = { (char *)PROG, (char *)"snaps", (char *)"1", NULL };
	static char big[4100], path[4400];
	const char *extra[] = { NULL, NULL };
	static char envdir[4200];
	struct kt_proc p;
	size_t n;

	(void)state;
	/* dir/aaa.../aaa... in components of at most 200 bytes, 4032 in all */
	n = (size_t)snprintf(big, sizeof(big), "%s", dir);
	while (n < 4032) {
		size_t k = 4032 - n - 1 < 200 ? 4032 - n - 1 : 200;
		big[n++] = '/';
		memset(big + n, 'a', k);
		n += k;
		big[n] = 0;
		if (k == 0) {   /* a trailing '/' would do nothing: one more 'a' */
			big[n - 1] = 'a';
			big[n] = 0;
		}
		assert_true(mkdir(big, 0700) == 0 || errno == EEXIST);
	}
	assert_int_equal(strlen(big), 4032);
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", big);
	extra[0] = envdir;
	{
		/* env_for puts its own KTRACE_DIR first; the later one wins */
		if (kt_run(argv, env_for(dir, extra), &p, 60000) != 0)
			fail_msg("status %#x; stderr:\n%s", p.status, p.err);
	}
	if (strstr(p.err, "longer than"))
		fail_msg("a 4032-byte KTRACE_DIR was refused: %s", p.err);
	snapshot_of(&p, "snapshot", path, sizeof(path));
	assert_int_equal(strncmp(path, big, 4032), 0);
	assert_int_equal(access(path, R_OK), 0);
	kt_proc_free(&p);
	{
		char cmd[4200];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		assert_int_equal(system(cmd), 0);
	}
	free(dir);
}

/* ---- text outputs and standard input ------------------------------------------------- */

/* 1 if s has a byte below 0x20 other than newline and tab, or DEL. */
static int has_control(const char *s)
{
	for (; *s; s++)
		if (((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t') || *s == 0x7f)
			return 1;
	return 0;
}

static void test_e2e_hostenv_text_escapes(void **state)
{
	char *argv[] = { (char *)PROG, (char *)"escnames", NULL };
	static const char *const fmts[] = { "text", "summary", "stats" };
	char *dir = kt_mkdtemp("escnames");
	char path[4400], cmd[18000];
	struct kt_proc p;

	(void)state;
	if (kt_run(argv, env_for(dir, NULL), &p, 60000) != 0)
		fail_msg("status %#x; stderr:\n%s", p.status, p.err);
	snapshot_of(&p, "snapshot", path, sizeof(path));
	kt_proc_free(&p);
	for (size_t i = 0; i < 3; i++) {
		char *dargv[] = { (char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)fmts[i],
			          path, NULL };
		struct kt_proc d;

		assert_int_equal(kt_run(dargv, NULL, &d, 60000), 0);
		if (has_control(d.out))
			fail_msg("--format %s wrote a control byte to the terminal", fmts[i]);
		kt_proc_free(&d);
	}
	/* The mark is there, made harmless: "?]0;pwn?". */
	{
		char *dargv[] = { (char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)"text",
			          path, NULL };
		struct kt_proc d;

		assert_int_equal(kt_run(dargv, NULL, &d, 60000), 0);
		assert_non_null(strstr(d.out, "?]0;pwn?"));
		kt_proc_free(&d);
	}
	/* "-": standard input, a pipe and a file. */
	snprintf(cmd, sizeof(cmd), "cat '%s' | '%s' - | grep -q '^file:      -$'", path,
	         KTRACE_DECODE_PATH);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "'%s' --format stats - < '%s' | grep -q leaf_a",
	         KTRACE_DECODE_PATH, path);
	assert_int_equal(system(cmd), 0);
	kt_rmtree(dir);
	free(dir);
}

/* ---- many threads over time --------------------------------------------------------- */

static void test_e2e_hostenv_many_threads(void **state)
{
	char *argv[] = { (char *)PROG, (char *)"manythreads", (char *)"2000", NULL };
	static const char *const small[] = { "KTRACE_BUFFER_MB=1", "KTRACE_FILTER=off", NULL };
	struct kt_spawn_opts o = { 0, NULL, 0, 1 };   /* all on cpu 0: one ring wraps */
	char *dir = kt_mkdtemp("manythreads");
	char path[4400], *sum;
	struct kt_proc p;
	struct kt_file f;
	uint32_t nthr = 0;

	(void)state;
	assert_int_equal(kt_spawn(&p, argv, env_for(dir, small), &o), 0);
	if (kt_wait(&p, 120000) != 0)
		fail_msg("status %#x; stderr:\n%s", p.status, p.err);
	snapshot_of(&p, "snapshot", path, sizeof(path));
	assert_int_equal(kt_file_load(path, &f), 0);
	assert_non_null(kt_file_section(&f, KTRACE_SEC_THREADS, &nthr, NULL));
	if (nthr > 100 || kt_file_info(&f)->threads_omitted < 1900)
		fail_msg("%u threads in the file, %u left out", nthr,
		         kt_file_info(&f)->threads_omitted);
	kt_file_free(&f);
	sum = summary(path);
	if (kt_count_str(sum, "\n") > 200 || !strstr(sum, "threads that exited before the window "
	                                                 "are not in the file)"))
		fail_msg("summary of %d lines:\n%.3000s", kt_count_str(sum, "\n"), sum);
	assert_null(strstr(sum, "not in THREADS"));
	free(sum);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

/* ---- a stalled stderr ------------------------------------------------------------ */

/* Run argv with stderr a full pipe nobody reads, stdout captured into out
 * (until EOF or timeout_ms: then the child is killed).  Wait status. */
static int run_stderr_full(char *const argv[], const char *const *env, char *out, size_t len,
                           int timeout_ms)
{
	int ep[2], op[2], st = -1, fl;
	size_t got = 0;
	int64_t end = kt_now_ms() + timeout_ms;
	pid_t pid;
	char junk[4096];

	memset(junk, 'x', sizeof(junk));
	assert_int_equal(pipe2(ep, O_NONBLOCK | O_CLOEXEC), 0);
	assert_int_equal(pipe2(op, O_CLOEXEC), 0);
	while (write(ep[1], junk, sizeof(junk)) > 0) {
	}
	while (write(ep[1], junk, 1) > 0) {
	}
	assert_int_equal(errno, EAGAIN);
	fl = fcntl(ep[1], F_GETFL);
	assert_int_equal(fcntl(ep[1], F_SETFL, fl & ~O_NONBLOCK), 0);  /* a blocking pipe */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(op[1], 1);
		dup2(ep[1], 2);
		for (size_t i = 0; env[i]; i++) {
			if (strchr(env[i], '=')) {
				putenv((char *)env[i]);
			} else {
				unsetenv(env[i]);
			}
		}
		execv(argv[0], argv);
		_exit(127);
	}
	close(op[1]);
	close(ep[1]);
	out[0] = 0;
	for (;;) {
		struct pollfd pfd = { op[0], POLLIN, 0 };
		int64_t left = end - kt_now_ms();
		ssize_t n;

		if (left <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		n = read(op[0], out + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		out[got] = 0;
		if (got == len - 1)
			break;
	}
	waitpid(pid, &st, 0);
	close(op[0]);
	close(ep[0]);   /* only now: nobody read it */
	return st;
}

static void test_e2e_hostenv_stalled_stderr(void **state)
{
	char *argv[] = { (char *)PROG, (char *)"snaps", (char *)"3", NULL };
	static const char *const loud[] = { "KTRACE_QUIET=0", NULL };
	char *dir = kt_mkdtemp("stderr");
	static char out[16384];
	char path[4400];
	struct kt_proc p;   /* only its out, for snapshot_of */
	struct kt_file f;
	const char *s;
	int st, n = 0;

	(void)state;
	st = run_stderr_full(argv, env_for(dir, loud), out, sizeof(out), 30000);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("status %#x (killed after 30 s if it hung); stdout:\n%s", st, out);
	for (s = out; (s = strstr(s, "snapshot 0 ")) != NULL; s++)
		n++;
	if (n != 3)
		fail_msg("%d of 3 snapshots; stdout:\n%s", n, out);
	/* The last file counts the lines the first two could not print. */
	memset(&p, 0, sizeof(p));
	p.out = out;
	while ((s = strstr(p.out + 1, "\nsnapshot ")) != NULL)
		p.out = (char *)s;
	snapshot_of(&p, "snapshot", path, sizeof(path));
	assert_int_equal(kt_file_load(path, &f), 0);
	if (kt_file_loss(&f)->count[KTRACE_LOSS_MESSAGES] < 2)
		fail_msg("%llu stderr lines counted as not printed, not 2 or more",
		         (unsigned long long)kt_file_loss(&f)->count[KTRACE_LOSS_MESSAGES]);
	kt_file_free(&f);
	kt_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_hostenv_sandbox_kill),
		cmocka_unit_test(test_e2e_hostenv_sandbox_self),
		cmocka_unit_test(test_e2e_hostenv_sandbox_eperm),
		cmocka_unit_test(test_e2e_hostenv_small_stacks),
		cmocka_unit_test(test_e2e_hostenv_stalled_stderr),
		cmocka_unit_test(test_e2e_hostenv_alt_stack),
		cmocka_unit_test(test_e2e_hostenv_signal_taken),
		cmocka_unit_test(test_e2e_hostenv_no_writer),
		cmocka_unit_test(test_e2e_hostenv_mlockall),
		cmocka_unit_test(test_e2e_hostenv_vfork),
		cmocka_unit_test(test_e2e_hostenv_clock_step),
		cmocka_unit_test(test_e2e_hostenv_build_ids),
		cmocka_unit_test(test_e2e_hostenv_dir_4032),
		cmocka_unit_test(test_e2e_hostenv_text_escapes),
		cmocka_unit_test(test_e2e_hostenv_many_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
