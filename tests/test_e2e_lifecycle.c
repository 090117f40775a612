/*
 * test_e2e_lifecycle.c - process lifecycle and signals (DESIGN hazards 7
 * and 9, issue 4 "Process lifecycle"), with e2e/lifecycle_prog.c:
 * fork (child traces into its own buffers and files, parent unaffected,
 * with a parent thread tracing through every fork), exec, dlopen/dlclose
 * of an instrumented library (symbolized by the real ktrace-decode),
 * exit()/_exit() while a snapshot is being written, a program with its
 * own SIGUSR2 handler (chained, or KTRACE_SIGNAL=USR1), traced signal
 * handlers, threads started by a constructor and hooks that run before
 * the library's constructor.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"
#include "ktrace.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_life"
#define PROG_STATIC KTRACE_TEST_BINARY_DIR "/e2e_life_static"
/* The same program in the lean mode (x86-64 with GCC: KT_LIFE_LEAN). */
#define PROG_LEAN KTRACE_TEST_BINARY_DIR "/e2e_life_lean"
#if defined(KT_LIFE_LEAN)
#define SKIP_NO_LEAN() do { } while (0)
#else
#define SKIP_NO_LEAN() skip()
#endif
#define PLUGIN KTRACE_TEST_BINARY_DIR "/libe2e_plugin.so"

struct run {
	struct kt_proc p;
	char *dir;
	char envdir[300];
	const char *env[16];
};

static void start(struct run *r, const char *prog, const char *a1, const char *a2,
                  const char *a3, const char *const *extra)
{
	char *argv[] = {(char *)prog, (char *)a1, (char *)a2, (char *)a3, NULL};
	size_t n = 0;

	memset(r, 0, sizeof(*r));
	r->dir = kt_mkdtemp("life");
	assert_non_null(r->dir);
	snprintf(r->envdir, sizeof(r->envdir), "KTRACE_DIR=%s", r->dir);
	r->env[n++] = r->envdir;
	r->env[n++] = "KTRACE_QUIET=1";
	r->env[n++] = "KTRACE_ENABLE";
	r->env[n++] = "KTRACE_SIGNAL";
	r->env[n++] = "KTRACE_RSEQ";
	r->env[n++] = "KTRACE_BUFFER_MB=8";
	for (size_t i = 0; extra && extra[i]; i++)
		r->env[n++] = extra[i];
	r->env[n] = NULL;
	assert_int_equal(kt_spawn(&r->p, argv, r->env, NULL), 0);
}

static void finish(struct run *r, int expect_ok)
{
	int ok = kt_wait(&r->p, 60000) == 0;
	if (expect_ok && !ok)
		fail_msg("program failed (status %#x); stdout:\n%s\nstderr:\n%s", r->p.status,
		         r->p.out, r->p.err);
	kt_proc_free(&r->p);
	kt_rmtree(r->dir);
	free(r->dir);
}

/* "<tag> <rc> <path>" -> path (rc must be 0). */
static void expect_snapshot(struct run *r, const char *tag, char *path)
{
	char line[4600], pre[64];
	int rc = -99;

	snprintf(pre, sizeof(pre), "%s ", tag);
	if (kt_expect_line(&r->p, pre, line, sizeof(line), 60000) != 0)
		fail_msg("no '%s' line; stdout:\n%s\nstderr:\n%s", tag, r->p.out, r->p.err);
	if (sscanf(line + strlen(pre), "%d %4399s", &rc, path) != 2 || rc != 0)
		fail_msg("bad line '%s'", line);
}

static struct kd_dec *open_clean(const char *path)
{
	struct kt_file f;
	if (kt_file_load(path, &f) != 0)
		fail_msg("%s: %s", path, f.why);
	assert_int_equal(f.bad_blocks, 0);
	kt_file_free(&f);
	struct kd_dec *d = kd_open(path);
	assert_non_null(d);
	assert_int_equal(d->snap.damaged_blocks, 0);
	assert_int_equal(d->snap.unreadable_blocks, 0);
	return d;
}

/* The snapshotting process's main thread (tid == pid). */
static uint32_t main_thread(const struct kd_dec *d)
{
	for (uint32_t t = 0; t < d->nthreads; t++)
		if ((d->threads[t].flags & KTRACE_THREAD_MAIN) &&
		    d->threads[t].tid == (int32_t)d->snap.info.pid)
			return t;
	fail_msg("no main thread");
	return KD_NONE;
}

/* ---- fork ------------------------------------------------------------------ */

/* GCC 12's ASan runtime is not fork-safe in a multithreaded process: a
 * child that creates a thread (libktrace's writer) can block forever on
 * an allocator lock another parent thread held at fork() (seen here about
 * once in five runs).  Fork is tested in the normal and TSan builds. */
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_FORK_UNDER_ASAN() skip()
#else
#define SKIP_FORK_UNDER_ASAN() do { } while (0)
#endif

static void run_fork(const char *prog, const char *const *extra)
{
	struct run r;
	char path[4400], line[4600], pre[64];

	SKIP_FORK_UNDER_ASAN();
	/* A ring that holds everything even when forks are slow (TSan). */
	static const char *const big[] = {"KTRACE_BUFFER_MB=64", NULL};
	const char *env[8];
	size_t n = 0;
	for (size_t i = 0; extra && extra[i]; i++)
		env[n++] = extra[i];
	env[n++] = big[0];
	env[n] = NULL;
	start(&r, prog, "fork", "4", NULL, env);
	assert_int_equal(kt_expect_line(&r.p, "pid ", line, sizeof(line), 30000), 0);
	int ppid = atoi(line + 4);
	for (int k = 0; k < 4; k++) {
		int cpid = 0, rc = -1;
		if (kt_expect_line(&r.p, "child ", line, sizeof(line), 60000) != 0)
			fail_msg("child %d: no line; stdout:\n%s\nstderr:\n%s", k, r.p.out, r.p.err);
		assert_int_equal(sscanf(line, "child %d %d %4399s", &cpid, &rc, path), 3);
		assert_int_equal(rc, 0);
		assert_int_not_equal(cpid, ppid);
		snprintf(pre, sizeof(pre), "/ktrace-%d-", cpid);
		assert_non_null(strstr(path, pre));
		struct kd_dec *d = open_clean(path);
		assert_int_equal(d->snap.info.pid, (uint32_t)cpid);
		assert_int_equal(d->snap.info.snapshot_seq, 1);
		uint32_t m = main_thread(d);
		assert_int_equal(d->threads[m].tid, cpid);
		/* The child starts clean: only its own calls. */
		assert_int_equal(kd_count(d, m, "child_fn"), 7);
		assert_int_equal(kd_count(d, KD_NONE, "child_fn"), 7);
		assert_int_equal(kd_count(d, KD_NONE, "parent_fn"), 0);
		assert_int_equal(kd_count(d, KD_NONE, "bg_fn"), 0);
		for (int i = 0; i < KTRACE_LOSS_COUNT; i++)
			assert_int_equal(d->snap.loss.count[i], 0);
		kd_dec_free(d);
	}
	expect_snapshot(&r, "parent", path);
	snprintf(pre, sizeof(pre), "/ktrace-%d-", ppid);
	assert_non_null(strstr(path, pre));
	struct kd_dec *d = open_clean(path);
	assert_int_equal(d->snap.info.pid, (uint32_t)ppid);
	assert_int_equal(d->snap.loss.count[KTRACE_LOSS_OVERWRITTEN_BLOCKS], 0);
	uint32_t m = main_thread(d), bg = kd_thread(d, "bg");
	assert_int_equal(d->threads[m].tid, ppid);
	assert_int_not_equal(bg, KD_NONE);
	assert_int_equal(kd_count(d, m, "parent_fn"), 8);
	assert_int_equal(kd_count(d, KD_NONE, "child_fn"), 0);
	assert_true(kd_count(d, bg, "bg_fn") > 0);
	assert_int_equal(kd_count(d, m, "bg_fn"), 0);
	kd_dec_free(d);
	char **files;
	assert_int_equal(kt_list_snapshots(r.dir, &files), 5);
	kt_free_list(files);
	assert_int_equal(kt_count_entries(r.dir), 5);
	finish(&r, 1);
}

static void test_e2e_lifecycle_fork(void **state)
{
	(void)state;
	run_fork(PROG, NULL);
}

static void test_e2e_lifecycle_fork_static(void **state)
{
	(void)state;
	run_fork(PROG_STATIC, NULL);
}

/* Locked appends: the parent's busy thread holds a core lock at any
 * moment, so forks often copy a held lock into the child. */
static void test_e2e_lifecycle_fork_locked(void **state)
{
	static const char *const env[] = {"KTRACE_RSEQ=0", NULL};
	(void)state;
	run_fork(PROG, env);
}

/* The lean mode: the busy thread's bg_fn is muted and its sites patched
 * out around the forks (the patch lock is held across fork(), and the
 * child puts the code it had made writable back to read+exec); each
 * child traces from patched code into its own buffers. */
static void test_e2e_lifecycle_fork_lean(void **state)
{
	(void)state;
	SKIP_NO_LEAN();
	run_fork(PROG_LEAN, NULL);
}

static void test_e2e_lifecycle_fork_lean_locked(void **state)
{
	static const char *const env[] = {"KTRACE_RSEQ=0", NULL};
	(void)state;
	SKIP_NO_LEAN();
	run_fork(PROG_LEAN, env);
}

/* glibc (2.36) does not reset the loader's dl_load_write_lock in a fork
 * child: a fork while ktrace's writer was inside dl_iterate_phdr (a
 * snapshot's build ids; the lean mode's look at the modules, every pass)
 * left the child's held for good, and its next dl_iterate_phdr (its own
 * writer's, a dlopen's) waited forever: 1 child of 20 here, and a lean
 * run that never ended, with the writer's calls made slow (slow_phdr.c).
 * fork() now waits for the writer's call to end (ktrace__phdr_iterate). */
/* Runs prog mode [arg] with env (a lifecycle_prog mode that forks): it
 * prints "<mode> <children> ok <children that exited 0>" within
 * timeout_ms; there must be want children, all exited 0 (what: the
 * failure's words). */
static void run_fork_count(const char *prog, const char *mode, const char *arg,
                           const char *const *env, int timeout_ms, int want, const char *what)
{
	struct run r;
	char line[256], fmt[64];
	int n = 0, ok = -1;

	SKIP_FORK_UNDER_ASAN();
	start(&r, prog, mode, arg, NULL, env);
	snprintf(fmt, sizeof(fmt), "%s ", mode);
	if (kt_expect_line(&r.p, fmt, line, sizeof(line), timeout_ms) != 0) {
		print_error("%s %s: no result (hung); stdout:\n%s\nstderr:\n%s", prog, mode,
		            r.p.out, r.p.err);
		finish(&r, 0);
		fail();
	}
	snprintf(fmt, sizeof(fmt), "%s %%d ok %%d", mode);
	assert_int_equal(sscanf(line, fmt, &n, &ok), 2);
	if (n != want || ok != n) {
		finish(&r, 0);
		fail_msg("%s: %d children of %d, %d exited 0", what, n, want, ok);
	}
	finish(&r, 1);
}

static void run_forkphdr(const char *prog)
{
	/* snapshots all along: the default 10 files a minute ran out in 1 s */
	static const char *const env[] = {"E2E_SLOW_PHDR=20000", "KTRACE_MAX_FILES_PER_MIN=600",
	                                  "KTRACE_MAX_MB_PER_MIN=100000", NULL};

	run_fork_count(prog, "forkphdr", "20", env, 180000, 20,
	               "fork children hung in dl_iterate_phdr");
}

/* A thread started by a constructor before libktrace's (static build)
 * forks while the library starts on the main thread: a child forked then
 * has no thread to finish the start, and its first traced call waited
 * for it for good (the first child hung, 3 runs of 3).  It runs untraced
 * now (init_fork_child). */
static void test_e2e_lifecycle_fork_during_init(void **state)
{
	static const char *const env[] = {"E2E_FORKINIT=1", NULL};

	(void)state;
	run_fork_count(PROG_STATIC, "forkinit", NULL, env, 120000, 200,
	               "forks while ktrace started (one hung)");
}

static void test_e2e_lifecycle_fork_during_writer_phdr(void **state)
{
	(void)state;
	run_forkphdr(PROG);
}

static void test_e2e_lifecycle_fork_during_writer_phdr_lean(void **state)
{
	(void)state;
	SKIP_NO_LEAN();
	run_forkphdr(PROG_LEAN);
}

/*
 * "The child starts clean": its snapshot must not present the parent's
 * threads (which do not exist in the child) as its own live threads, nor
 * a second main thread.  Known library bug (see /tmp/ktrace-bugs.md).
 */
static void test_e2e_lifecycle_fork_child_lists_only_its_threads(void **state)
{
	struct run r;
	char path[4400], line[4600];
	int cpid = 0, rc = -1;

	(void)state;
	SKIP_FORK_UNDER_ASAN();
	start(&r, PROG, "fork", "1", NULL, NULL);
	assert_int_equal(kt_expect_line(&r.p, "child ", line, sizeof(line), 60000), 0);
	assert_int_equal(sscanf(line, "child %d %d %4399s", &cpid, &rc, path), 3);
	struct kd_dec *d = open_clean(path);
	int mains = 0, foreign_alive = 0;
	for (uint32_t t = 0; t < d->nthreads; t++) {
		const struct kd_dec_thread *th = &d->threads[t];
		if (th->flags & KTRACE_THREAD_MAIN)
			mains++;
		if (th->tid != cpid && !(th->flags & KTRACE_THREAD_EXITED)) {
			print_error("child %d's snapshot lists thread %d (%s) as alive%s\n", cpid,
			            th->tid, th->name, th->flags & KTRACE_THREAD_MAIN ? ", main" : "");
			foreign_alive++;
		}
	}
	kd_dec_free(d);
	finish(&r, 1);
	assert_int_equal(mains, 1);
	assert_int_equal(foreign_alive, 0);
}

/* ---- exec ------------------------------------------------------------------ */

static void run_exec(const char *prog)
{
	struct run r;
	char before[4400], after[4400], line[128];

	start(&r, prog, "exec", NULL, NULL, NULL);
	assert_int_equal(kt_expect_line(&r.p, "pid ", line, sizeof(line), 30000), 0);
	int pid = atoi(line + 4);
	expect_snapshot(&r, "before", before);
	expect_snapshot(&r, "after", after);
	assert_string_not_equal(before, after);
	struct kd_dec *d = open_clean(before);
	assert_int_equal(d->snap.info.pid, (uint32_t)pid);
	assert_int_equal(kd_count(d, KD_NONE, "exec_fn"), 3);
	kd_dec_free(d);
	d = open_clean(after);
	assert_int_equal(d->snap.info.pid, (uint32_t)pid);
	assert_int_equal(d->snap.info.snapshot_seq, 1); /* a new image starts over */
	assert_int_equal(kd_count(d, KD_NONE, "after_exec_fn"), 4);
	assert_int_equal(kd_count(d, KD_NONE, "exec_fn"), 0);
	kd_dec_free(d);
	finish(&r, 1);
}

static void test_e2e_lifecycle_exec(void **state)
{
	(void)state;
	run_exec(PROG);
}

static void test_e2e_lifecycle_exec_lean(void **state)
{
	(void)state;
	SKIP_NO_LEAN();
	run_exec(PROG_LEAN);
}

/* ---- dlopen ------------------------------------------------------------------ */

/* "calls ... name" line of ktrace-decode --format stats -> calls. */
static long stats_calls(const char *out, const char *name)
{
	const char *s = out;
	size_t nl = strlen(name);

	while ((s = strstr(s, name)) != NULL) {
		const char *eol = s + nl;
		if ((*eol == '\n' || *eol == 0) && s > out && s[-1] == ' ') {
			const char *bol = s;
			while (bol > out && bol[-1] != '\n')
				bol--;
			return strtol(bol, NULL, 10);
		}
		s += nl;
	}
	return -1;
}

static void test_e2e_lifecycle_dlopen_dlclose(void **state)
{
	struct run r;
	char path[4400];
	struct kt_proc dec;

	(void)state;
	start(&r, PROG, "dlopen", PLUGIN, NULL, NULL);
	expect_snapshot(&r, "snapshot", path);
	struct kd_dec *d = open_clean(path);
	assert_int_equal(kd_count(d, KD_NONE, "plugin_entry"), 5);
	assert_int_equal(kd_count(d, KD_NONE, "plugin_inner"), 10);
	for (uint32_t i = 0; i < d->ncalls; i++)
		if (kd_is(d, &d->calls[i], "plugin_inner"))
			assert_true(kd_is(d, &d->calls[d->calls[i].parent], "plugin_entry"));
	kd_dec_free(d);
	/* The real decoder names them too (from the module map, after dlclose). */
	char *argv[] = {(char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)"stats", path, NULL};
	if (kt_run(argv, NULL, &dec, 60000) != 0)
		fail_msg("ktrace-decode failed: %s", dec.err);
	if (stats_calls(dec.out, "plugin_entry") != 5 || stats_calls(dec.out, "plugin_inner") != 10)
		fail_msg("ktrace-decode stats:\n%s", dec.out);
	kt_proc_free(&dec);
	finish(&r, 1);
}

/* ---- exit while a snapshot is being written ------------------------------------- */

/* Under TSan the snapshot's copy reads every word with an instrumented
 * atomic load, many times slower than the plain build's: a 2 MiB ring's
 * write still outlasts the plain build's 8 MiB one, so the delays below
 * land in the same phases of it, and the test decodes a third of the data
 * (decoding, sanitized, was three quarters of this test's time). */
#if defined(__SANITIZE_THREAD__)
static const char *const exit_env[] = {"KTRACE_BUFFER_MB=2", NULL};
#else
static const char *const *const exit_env = NULL;
#endif

/* One program run; its file (if any) is moved to keep/<n>.ktrace, for
 * check_exit_files. */
static void run_exit(const char *how, const char *us, int must_have_file, const char *keep,
                     int *kept)
{
	struct run r;
	char **files;
	int n;

	start(&r, PROG, "exit", how, us, exit_env);
	if (kt_wait(&r.p, 60000) != 0)
		fail_msg("%s after %s us: status %#x, stderr:\n%s", how, us, r.p.status, r.p.err);
	n = kt_list_snapshots(r.dir, &files);
	/* Only whole snapshot files: no temporary, no partial. */
	assert_int_equal(kt_count_entries(r.dir), n);
	if (must_have_file && n != 1)
		fail_msg("%s after %s us: %d files", how, us, n);
	assert_true(n <= 1);
	for (int i = 0; i < n; i++) {
		char to[4400];
		snprintf(to, sizeof(to), "%s/ktrace-%s-%sus-%d.ktrace", keep, how, us, (*kept)++);
		assert_int_equal(rename(files[i], to), 0);
	}
	kt_free_list(files);
	finish(&r, 1);
}

/* What open_clean and the fill_fn count check, without cmocka (it runs in
 * a child): NULL if the file is whole and has fill_fn, else why not. */
static const char *exit_file_problem(const char *path, char *why, size_t len)
{
	struct kt_file f;
	struct kd_dec *d;

	if (kt_file_load(path, &f) != 0)
		snprintf(why, len, "%s: %s", path, f.why);
	else if (f.bad_blocks != 0)
		snprintf(why, len, "%s: %u blocks fail their CRC", path, f.bad_blocks);
	else
		why[0] = 0;
	kt_file_free(&f);
	if (why[0])
		return why;
	if ((d = kd_open(path)) == NULL) {
		snprintf(why, len, "%s does not decode", path);
		return why;
	}
	if (d->snap.damaged_blocks || d->snap.unreadable_blocks)
		snprintf(why, len, "%s: %u damaged, %u unreadable blocks", path,
		         d->snap.damaged_blocks, d->snap.unreadable_blocks);
	else if (kd_count(d, KD_NONE, "fill_fn") == 0)
		snprintf(why, len, "%s: no fill_fn call", path);
	kd_dec_free(d);
	return why[0] ? why : NULL;
}

/* Decodes the kept files in two child processes, each every other file
 * (decoding, sanitized, was most of the time of the runs' one-by-one
 * checks), then removes them. */
static void check_exit_files(const char *keep)
{
	char **files, why[4600];
	int n = kt_list_snapshots(keep, &files), fd[2];
	pid_t pid[2];

	fflush(stdout);
	fflush(stderr);
	for (int k = 0; k < 2; k++) {
		int pfd[2];
		assert_int_equal(pipe(pfd), 0);
		pid[k] = fork();
		assert_true(pid[k] >= 0);
		if (pid[k] == 0) {
			close(pfd[0]);
			for (int i = k; i < n; i += 2)
				if (exit_file_problem(files[i], why, sizeof(why))) {
					if (write(pfd[1], why, strlen(why)) < 0)
						_exit(2);
					_exit(1);
				}
			_exit(0);
		}
		close(pfd[1]);
		fd[k] = pfd[0];
	}
	for (int k = 0; k < 2; k++) {
		ssize_t got = read(fd[k], why, sizeof(why) - 1);
		int st = 0;
		why[got > 0 ? got : 0] = 0;
		close(fd[k]);
		assert_int_equal(waitpid(pid[k], &st, 0), pid[k]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("%s (checker status %#x)", why[0] ? why : "checker died", st);
	}
	kt_free_list(files);
	kt_rmtree(keep);
}

static void test_e2e_lifecycle_exit_during_snapshot(void **state)
{
	static const char *const delays[] = {"0", "0", "0", "0", "300", "3000", "20000"};
	char *keep = kt_mkdtemp("life-exit");
	int kept = 0;

	(void)state;
	assert_non_null(keep);
	for (size_t i = 0; i < sizeof(delays) / sizeof(delays[0]); i++) {
		/* exit(): the library's atexit handler waits for the writer.
		 * raise() has set the request before exit(); the API thread
		 * is inside ktrace_snapshot() but may not have queued its
		 * request yet at 0 us. */
		run_exit("exit", delays[i], 1, keep, &kept);
		run_exit("api-exit", delays[i], delays[i][0] != '0', keep, &kept);
	}
	check_exit_files(keep);
	free(keep);
}

static void test_e2e_lifecycle__exit_during_snapshot(void **state)
{
	static const char *const delays[] = {"0", "300", "3000", "20000"};
	char *keep = kt_mkdtemp("life-exit");
	int kept = 0;

	(void)state;
	assert_non_null(keep);
	/* _exit(): nothing waits; a file that exists is whole. */
	for (size_t i = 0; i < sizeof(delays) / sizeof(delays[0]); i++)
		run_exit("_exit", delays[i], 0, keep, &kept);
	check_exit_files(keep);
	free(keep);
}

/* ---- the program's own SIGUSR2 ------------------------------------------------------ */

static void wait_files(struct run *r, int n)
{
	if (kt_wait_snapshots(r->dir, n, 30000) < 0)
		fail_msg("expected %d snapshot files; stderr:\n%s", n, r->p.err);
}

/* Under TSan only, a SIGUSR2 sent the instant the program printed "ready"
 * ran no handler in about 1 run of 10 (neither the program's nor ktrace's:
 * no file either), while 40 plain and 20 ASan runs, and every TSan run
 * 300 ms later, ran them: TSan's deferred delivery during the program's
 * start-up (its thread creation), not what these tests are about.  Seen in
 * the chained case, then (once in a clean-clone CI run) in the USR1 one. */
static void tsan_settle(void)
{
#if defined(__SANITIZE_THREAD__)
	kt_sleep_ms(300);
#endif
}

/* Shared library: the program installs its handler in main (replacing the
 * library's); KTRACE_SIGNAL=USR1 moves snapshots out of its way. */
static void test_e2e_lifecycle_own_sigusr2_with_ktrace_signal_usr1(void **state)
{
	static const char *const env[] = {"KTRACE_SIGNAL=USR1", NULL};
	struct run r;
	char **files;

	(void)state;
	start(&r, PROG, "sigown", NULL, NULL, env);
	assert_int_equal(kt_expect_line(&r.p, "ready", NULL, 0, 30000), 0);
	tsan_settle();
	assert_int_equal(kill(r.p.pid, SIGUSR2), 0);
	assert_int_equal(kt_expect_line(&r.p, "app-handler 1", NULL, 0, 30000), 0);
	assert_int_equal(kill(r.p.pid, SIGUSR1), 0);
	wait_files(&r, 1);
	assert_int_equal(kill(r.p.pid, SIGUSR2), 0);
	assert_int_equal(kt_expect_line(&r.p, "app-handler 2", NULL, 0, 30000), 0);
	kt_close_stdin(&r.p);
	assert_int_equal(kt_wait(&r.p, 30000), 0);
	assert_int_equal(kt_list_snapshots(r.dir, &files), 1);
	struct kd_dec *d = open_clean(files[0]);
	assert_string_equal(d->snap.info.reason, "signal SIGUSR1");
	assert_true(kd_count(d, KD_NONE, "loop_fn") > 0);
	kd_dec_free(d);
	kt_free_list(files);
	finish(&r, 1);
}

/* Does pid catch sig (SigCgt in /proc/pid/status)?  -1 once it is gone. */
static int catches(pid_t pid, int sig)
{
	char path[64], line[256];
	FILE *f;
	int r = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "SigCgt:", 7)) {
			r = (int)((strtoull(line + 7, NULL, 16) >> (sig - 1)) & 1);
			break;
		}
	fclose(f);
	return r;
}

/* The snapshot signal sent the moment the handler is there (the library
 * installs it first thing in its constructor, before the writer thread
 * exists): the program lives on, and the signal's snapshot is written. */
static void test_e2e_lifecycle_sigusr2_at_startup(void **state)
{
	struct run r;
	char **files;
	int n, c = 0, by_signal = 0;

	(void)state;
	start(&r, PROG, "early", NULL, NULL, NULL);
	for (int i = 0; i < 200000 && (c = catches(r.p.pid, SIGUSR2)) == 0; i++)
		usleep(50);
	if (c != 1)
		fail_msg("the program never caught SIGUSR2 (%d); stderr:\n%s", c, r.p.err);
	assert_int_equal(kill(r.p.pid, SIGUSR2), 0);
	assert_int_equal(kt_wait(&r.p, 60000), 0);   /* not killed by the signal */
	n = kt_list_snapshots(r.dir, &files);
	for (int i = 0; i < n; i++) {
		struct kd_dec *d = open_clean(files[i]);
		by_signal += !strcmp(d->snap.info.reason, "signal SIGUSR2");
		kd_dec_free(d);
	}
	kt_free_list(files);
	assert_int_equal(by_signal, 1);
	finish(&r, 1);
}

/* Static library: the program's handler is installed by a constructor that
 * runs before libktrace's (priority 100 < 101, not instrumented); the
 * library keeps it and chains to it: both run on every SIGUSR2. */
static void test_e2e_lifecycle_own_sigusr2_installed_first_is_chained(void **state)
{
	static const char *const env[] = {"E2E_SIGOWN_CTOR=1", NULL};
	struct run r;
	char **files;

	(void)state;
	start(&r, PROG_STATIC, "sigown", NULL, NULL, env);
	assert_int_equal(kt_expect_line(&r.p, "ready", NULL, 0, 30000), 0);
	tsan_settle();
	assert_int_equal(kill(r.p.pid, SIGUSR2), 0);
	assert_int_equal(kt_expect_line(&r.p, "app-handler 1", NULL, 0, 30000), 0);
	wait_files(&r, 1);
	assert_int_equal(kill(r.p.pid, SIGUSR2), 0);
	assert_int_equal(kt_expect_line(&r.p, "app-handler 2", NULL, 0, 30000), 0);
	wait_files(&r, 2);
	kt_close_stdin(&r.p);
	assert_int_equal(kt_wait(&r.p, 30000), 0);
	assert_int_equal(kt_list_snapshots(r.dir, &files), 2);
	for (int i = 0; i < 2; i++) {
		struct kd_dec *d = open_clean(files[i]);
		assert_string_equal(d->snap.info.reason, "signal SIGUSR2");
		kd_dec_free(d);
	}
	kt_free_list(files);
	finish(&r, 1);
}

/* ---- traced signal handlers ------------------------------------------------------------ */

static void run_sigtraced(const char *prog, const char *const *extra)
{
	struct run r;
	char line[256], path[4400];
	unsigned long mains = 0, bgs = 0, handlers = 0;

	start(&r, prog, "sigtraced", "150", NULL, extra);
	assert_int_equal(kt_expect_line(&r.p, "counts ", line, sizeof(line), 60000), 0);
	assert_int_equal(sscanf(line, "counts %lu %lu %lu", &mains, &bgs, &handlers), 3);
	expect_snapshot(&r, "snapshot", path);
	struct kd_dec *d = open_clean(path);
	uint64_t nested = d->snap.loss.count[KTRACE_LOSS_NESTED];
	uint64_t hf = kd_count(d, KD_NONE, "handler_fn");
	uint64_t hl = kd_count(d, KD_NONE, "handler_leaf");
	print_message("main_leaf %lu, bg_leaf %lu, handlers %lu (decoded %llu, their leaf %llu), "
	              "nested losses %llu, lost exits %llu\n",
	              mains, bgs, handlers, (unsigned long long)hf, (unsigned long long)hl,
	              (unsigned long long)nested, (unsigned long long)d->lost_exits);
	if (d->snap.loss.count[KTRACE_LOSS_OVERWRITTEN_BLOCKS] != 0)
		fail_msg("ring wrapped: the counts below cannot be exact; raise KTRACE_BUFFER_MB");
	assert_true(handlers > 10);
	/* The interrupted code loses nothing. */
	assert_int_equal(kd_count(d, KD_NONE, "main_leaf"), mains);
	assert_int_equal(kd_count(d, KD_NONE, "bg_leaf"), bgs);
	/* The handler's own events are all there, or counted as NESTED, w
	 * per call missing from the decode and one per lost exit.  In the
	 * default mode a missing call lost both its events (w = 2: an exit
	 * recorded alone is decoded as a call cut at its start).  In the
	 * lean mode it lost its entry, and its exit then finds no frame and
	 * records nothing (w = 1): a handler whose handler_fn took the asm
	 * fast path while handler_leaf's entry met the interrupted slow path
	 * loses one event and one call (TSan, once, in a CI run with the
	 * aarch64 tests beside: 280 handlers, 216 handler_fn decoded, at
	 * most 215 leaves, 129 NESTED, which the check of 2 per missing
	 * call this replaced failed). */
	uint64_t w = strcmp(prog, PROG_LEAN) == 0 ? 1 : 2;

	assert_true(hf <= handlers && hl <= handlers);
	assert_true(w * ((handlers - hf) + (handlers - hl)) + d->lost_exits <= nested);
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		if (kd_is(d, c, "handler_leaf") && !(c->flags & KD_CALL_TRUNC_BEGIN) && nested == 0)
			assert_true(c->parent != KD_NONE &&
			            kd_is(d, &d->calls[c->parent], "handler_fn"));
		if (c->parent != KD_NONE) {
			assert_int_equal(d->calls[c->parent].thread, c->thread);
			assert_int_equal(c->depth, d->calls[c->parent].depth + 1);
		}
	}
	kd_dec_free(d);
	finish(&r, 1);
}

/* KTRACE_FILTER=off: exact counts need every call recorded; with the budget
 * on, a slow (sanitizer) or loaded run could drain the bucket and mute a
 * leaf before the end (seen once in ASan: 1 % of bg_leaf missing). */
static void test_e2e_lifecycle_traced_signal_handler(void **state)
{
	static const char *const env[] = {"KTRACE_BUFFER_MB=32", "KTRACE_FILTER=off", NULL};
	(void)state;
	run_sigtraced(PROG, env);
}

static void test_e2e_lifecycle_traced_signal_handler_locked(void **state)
{
	static const char *const env[] = {"KTRACE_BUFFER_MB=32", "KTRACE_RSEQ=0",
	                                  "KTRACE_FILTER=off", NULL};
	(void)state;
	run_sigtraced(PROG, env);
}

/* The lean mode: a handler's frames on the thread's lean stack above
 * those of the code it interrupted (the fast path in assembly, and the
 * locked slow path). */
static void test_e2e_lifecycle_traced_signal_handler_lean(void **state)
{
	static const char *const env[] = {"KTRACE_BUFFER_MB=32", "KTRACE_FILTER=off", NULL};
	(void)state;
	SKIP_NO_LEAN();
	run_sigtraced(PROG_LEAN, env);
}

static void test_e2e_lifecycle_traced_signal_handler_lean_locked(void **state)
{
	static const char *const env[] = {"KTRACE_BUFFER_MB=32", "KTRACE_RSEQ=0",
	                                  "KTRACE_FILTER=off", NULL};
	(void)state;
	SKIP_NO_LEAN();
	run_sigtraced(PROG_LEAN, env);
}

/* ---- before main ------------------------------------------------------------------------- */

static void test_e2e_lifecycle_thread_started_before_main(void **state)
{
	static const char *const env[] = {"E2E_EARLY=1", NULL};
	struct run r;
	char path[4400];

	(void)state;
	start(&r, PROG, "early", NULL, NULL, env);
	assert_int_equal(kt_expect_line(&r.p, "early 1", NULL, 0, 30000), 0);
	expect_snapshot(&r, "snapshot", path);
	struct kd_dec *d = open_clean(path);
	uint32_t t = kd_thread(d, "early");
	assert_int_not_equal(t, KD_NONE);
	assert_int_equal(kd_count(d, t, "early_fn"), 10);
	assert_int_equal(kd_count(d, KD_NONE, "early_fn"), 10);
	kd_dec_free(d);
	finish(&r, 1);
}

/* Static link: a traced function runs in a constructor before libktrace's
 * own constructor; its hook initialises the library and nothing is lost. */
static void test_e2e_lifecycle_hooks_before_library_constructor(void **state)
{
	static const char *const env[] = {"E2E_EARLY=1", "E2E_PREINIT=1", NULL};
	struct run r;
	char path[4400];

	(void)state;
	start(&r, PROG_STATIC, "early", NULL, NULL, env);
	expect_snapshot(&r, "snapshot", path);
	struct kd_dec *d = open_clean(path);
	uint32_t m = main_thread(d);
	assert_int_equal(kd_count(d, m, "pre_init_work"), 1);
	assert_int_equal(kd_count(d, m, "early_leaf"), 3);
	assert_int_equal(kd_count(d, KD_NONE, "early_fn"), 10);
	for (int i = 0; i < KTRACE_LOSS_COUNT; i++)
		assert_int_equal(d->snap.loss.count[i], 0);
	kd_dec_free(d);
	finish(&r, 1);
}

int main(void)
{
	/* KTRACE_TEST_FILTER="*signal_handler*": run the matching tests only */
	if (getenv("KTRACE_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KTRACE_TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_lifecycle_fork),
		cmocka_unit_test(test_e2e_lifecycle_fork_static),
		cmocka_unit_test(test_e2e_lifecycle_fork_locked),
		cmocka_unit_test(test_e2e_lifecycle_fork_lean),
		cmocka_unit_test(test_e2e_lifecycle_fork_lean_locked),
		cmocka_unit_test(test_e2e_lifecycle_fork_during_init),
		cmocka_unit_test(test_e2e_lifecycle_fork_during_writer_phdr),
		cmocka_unit_test(test_e2e_lifecycle_fork_during_writer_phdr_lean),
		cmocka_unit_test(test_e2e_lifecycle_fork_child_lists_only_its_threads),
		cmocka_unit_test(test_e2e_lifecycle_exec),
		cmocka_unit_test(test_e2e_lifecycle_exec_lean),
		cmocka_unit_test(test_e2e_lifecycle_dlopen_dlclose),
		cmocka_unit_test(test_e2e_lifecycle_exit_during_snapshot),
		cmocka_unit_test(test_e2e_lifecycle__exit_during_snapshot),
		cmocka_unit_test(test_e2e_lifecycle_sigusr2_at_startup),
		cmocka_unit_test(test_e2e_lifecycle_own_sigusr2_with_ktrace_signal_usr1),
		cmocka_unit_test(test_e2e_lifecycle_own_sigusr2_installed_first_is_chained),
		cmocka_unit_test(test_e2e_lifecycle_traced_signal_handler),
		cmocka_unit_test(test_e2e_lifecycle_traced_signal_handler_locked),
		cmocka_unit_test(test_e2e_lifecycle_traced_signal_handler_lean),
		cmocka_unit_test(test_e2e_lifecycle_traced_signal_handler_lean_locked),
		cmocka_unit_test(test_e2e_lifecycle_thread_started_before_main),
		cmocka_unit_test(test_e2e_lifecycle_hooks_before_library_constructor),
	};
	return cmocka_run_group_tests_name("e2e_lifecycle", tests, NULL, NULL);
}
