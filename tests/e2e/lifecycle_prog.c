/*
 * lifecycle_prog.c - a traced program for the process-lifecycle tests
 * (test_e2e_lifecycle.c, DESIGN hazards 7 and 9).  Built against the shared
 * library (e2e_life) and the static one (e2e_life_static).  Modes (argv[1]):
 *
 *   fork N        a background thread calls bg_fn non-stop; main calls
 *                 parent_fn 5 times, then forks N children one after the
 *                 other (each: child_fn x7, ktrace_snapshot, prints
 *                 "child <pid> <rc> <path>", exit); then parent_fn x3 and
 *                 a snapshot: "parent <rc> <path>".
 *   forkphdr N    a thread takes snapshots non-stop while main forks N
 *                 children, 3 ms apart; each calls dl_iterate_phdr (the
 *                 ktrace writer, a dlopen would) and child_fn x7, then
 *                 exits 0 (SIGALRM after 10 s: it hung).  Prints
 *                 "forkphdr <N> ok <children that exited 0>".  With
 *                 slow_phdr.c linked in and E2E_SLOW_PHDR set, the
 *                 writer's own dl_iterate_phdr calls are slow.
 *   forkinit      with E2E_FORKINIT=1 (below, ctor100): prints
 *                 "forkinit <children> ok <children that exited 0>".
 *   exec          exec_fn x3, snapshot ("before <rc> <path>"), then execs
 *                 itself in mode after-exec: after_exec_fn x4, snapshot
 *                 ("after <rc> <path>").
 *   dlopen PATH   dlopen an instrumented library, call plugin_entry 5
 *                 times, dlclose it, snapshot ("snapshot <rc> <path>").
 *   exit HOW US   fill the rings for ~100 ms, raise the snapshot signal,
 *                 wait US microseconds, then exit(0) / _exit(0) (HOW is
 *                 "exit", "_exit", or "api-exit": a thread is inside
 *                 ktrace_snapshot() when main calls exit()).
 *   sigown        prints "ready"; then loops in traced code, printing
 *                 "app-handler N" whenever its own SIGUSR2 handler ran;
 *                 exits at EOF on stdin.  The handler is installed at the
 *                 start of main, or, with E2E_SIGOWN_CTOR=1, by a
 *                 constructor of priority 100 that is not instrumented,
 *                 i.e. before libktrace's constructor (101) when both are
 *                 in the executable (static link).
 *   sigtraced MS  a traced SIGALRM handler (handler_fn -> handler_leaf)
 *                 fires every 500 us for MS ms while the main thread and a
 *                 second thread call traced functions; prints
 *                 "counts <main_leaf> <bg_leaf> <handler_fn>" and
 *                 "snapshot <rc> <path>".
 *   early         prints "snapshot <rc> <path>" after joining a thread
 *                 that a constructor (priority 102) started before main
 *                 (early_fn x10, named "early").  With E2E_PREINIT=1 a
 *                 priority-100 constructor also calls pre_init_work (which
 *                 calls early_leaf x3) before libktrace's constructor.
 */
#include <dlfcn.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

/* Per thread: the functions only need a side effect, not a data race. */
static __thread volatile unsigned long sink;
static _Atomic int stop_bg;

__attribute__((noinline)) void parent_fn(void) { sink++; }
__attribute__((noinline)) void child_fn(void) { sink += 2; }
__attribute__((noinline)) void bg_fn(void) { sink += 3; }
__attribute__((noinline)) void exec_fn(void) { sink += 4; }
__attribute__((noinline)) void after_exec_fn(void) { sink += 5; }
__attribute__((noinline)) void fill_fn(void) { sink += 6; }
__attribute__((noinline)) void loop_fn(void) { sink += 7; }
__attribute__((noinline)) void main_leaf(void) { sink += 8; }
__attribute__((noinline)) void bg_leaf(void) { sink += 9; }
__attribute__((noinline)) void handler_leaf(void) { sink += 10; }
__attribute__((noinline)) void early_fn(void) { sink += 11; }
__attribute__((noinline)) void early_leaf(void) { sink += 12; }

static void snap(const char *tag, const char *reason)
{
	char path[4352] = "";
	int r = ktrace_snapshot(reason);
	if (r == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("%s %d %s\n", tag, r, path);
	fflush(stdout);
}

static __attribute__((no_instrument_function)) int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- fork ----------------------------------------------------------------- */

static void *bg_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "bg");
	while (!stop_bg) {
		/* Busy around every fork, at a rate the ring holds. */
		struct timespec d = {0, 500 * 1000};
		for (int i = 0; i < 200; i++)
			bg_fn();
		nanosleep(&d, NULL);
	}
	return NULL;
}

static int count_objects(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(*(int *)arg)++;
	return 0;
}

static void *snap_loop(void *arg)
{
	(void)arg;
	while (!stop_bg) {
		ktrace_snapshot("loop");
		usleep(1000);
	}
	return NULL;
}

static int do_forkphdr(int n)
{
	pthread_t th;
	int ok = 0, m = 0;

	alarm(150);   /* ends the run if a child's wait hangs */
	dl_iterate_phdr(count_objects, &m);   /* (slow_phdr.c: resolved here) */
	pthread_create(&th, NULL, snap_loop, NULL);
	for (int k = 0; k < n; k++) {
		usleep(3000);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			int c = 0;

			alarm(10);
			dl_iterate_phdr(count_objects, &c);
			for (int i = 0; i < 7; i++)
				child_fn();
			_exit(c > 0 ? 0 : 1);
		}
		int st = 0;
		if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
	}
	stop_bg = 1;
	pthread_join(th, NULL);
	alarm(0);
	printf("forkphdr %d ok %d\n", n, ok);
	return ok == n ? 0 : 1;
}

static int do_fork(int n)
{
	pthread_t bg;

	pthread_create(&bg, NULL, bg_main, NULL);
	for (int i = 0; i < 5; i++)
		parent_fn();
	for (int k = 0; k < n; k++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			char tag[32];
			for (int i = 0; i < 7; i++)
				child_fn();
			snprintf(tag, sizeof(tag), "child %d", (int)getpid());
			snap(tag, "child");
			exit(0);
		}
		int st = 0;
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("child %d failed %#x\n", (int)pid, st);
			return 1;
		}
	}
	for (int i = 0; i < 3; i++)
		parent_fn();
	stop_bg = 1;
	pthread_join(bg, NULL);
	snap("parent", "parent");
	return 0;
}

/* ---- exit during a snapshot ------------------------------------------------- */

static _Atomic int api_entered;

static void *api_snap_main(void *arg)
{
	(void)arg;
	api_entered = 1;
	ktrace_snapshot("api-during-exit");
	return NULL;
}

static int do_exit(const char *how, long us)
{
	int64_t end = now_us() + 100000;
	pthread_t th;

	while (now_us() < end)
		for (int i = 0; i < 1000; i++)
			fill_fn();
	if (strcmp(how, "api-exit") == 0) {
		pthread_create(&th, NULL, api_snap_main, NULL);
		pthread_detach(th); /* still inside ktrace_snapshot() at exit */
		while (!api_entered)
			sched_yield();
	} else
		raise(SIGUSR2);
	end = now_us() + us;
	while (now_us() < end)
		fill_fn();
	printf("exiting\n");
	fflush(stdout);
	if (strcmp(how, "_exit") == 0)
		_exit(0);
	exit(0);
}

/* ---- own SIGUSR2 handler ------------------------------------------------------ */

static volatile sig_atomic_t app_count;

static __attribute__((no_instrument_function)) void app_handler(int sig)
{
	(void)sig;
	app_count++;
}

static __attribute__((no_instrument_function)) void install_app_handler(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = app_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);
}

static __attribute__((noinline)) void pre_init_work(void)
{
	for (int i = 0; i < 3; i++)
		early_leaf();
}

/* Before libktrace's constructor (101) when both are in one executable. */
/* E2E_FORKINIT=1: a thread started before libktrace's constructor (in
 * the static build) forks up to 200 children while the library starts
 * on the main thread; each child calls child_fn (its first traced call)
 * and exits 0, or is killed by SIGALRM after 5 s (hung).  The forks stop
 * at the first child that did not exit 0. */
static pthread_t forkinit_thread;
static int forkinit_started, forkinit_n, forkinit_ok;

__attribute__((no_instrument_function)) static void *forkinit_main(void *arg)
{
	(void)arg;
	for (int k = 0; k < 200; k++) {
		pid_t pid = fork();
		if (pid == 0) {
			alarm(5);
			child_fn();
			_exit(0);
		}
		int st = 0;
		forkinit_n++;
		if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			forkinit_ok++;
		else
			break;
	}
	return NULL;
}

__attribute__((constructor(100), no_instrument_function)) static void ctor100(void)
{
	const char *f = getenv("E2E_FORKINIT");
	if (f && strcmp(f, "1") == 0)
		forkinit_started = pthread_create(&forkinit_thread, NULL, forkinit_main, NULL) == 0;
	const char *s = getenv("E2E_SIGOWN_CTOR");
	if (s && strcmp(s, "1") == 0)
		install_app_handler();
	s = getenv("E2E_PREINIT");
	if (s && strcmp(s, "1") == 0)
		pre_init_work(); /* the first hook initialises the library */
}

static int do_sigown(void)
{
	const char *s = getenv("E2E_SIGOWN_CTOR");
	int seen = 0;

	if (!(s && strcmp(s, "1") == 0))
		install_app_handler();
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		struct pollfd p = {0, POLLIN, 0};
		char buf[64];
		loop_fn();
		if (app_count != seen) {
			seen = app_count;
			printf("app-handler %d\n", seen);
			fflush(stdout);
		}
		if (poll(&p, 1, 2) > 0 && read(0, buf, sizeof(buf)) <= 0)
			return 0;
	}
}

/* ---- traced signal handler ----------------------------------------------------- */

static volatile unsigned long handler_count;

__attribute__((noinline)) void handler_fn(int sig)
{
	(void)sig;
	handler_leaf();
	__atomic_add_fetch(&handler_count, 1, __ATOMIC_RELAXED);
}

static _Atomic unsigned long bg_leaf_count;

static void *bg_leaf_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "bgleaf");
	while (!stop_bg) {
		for (int i = 0; i < 100; i++) {
			bg_leaf();
			bg_leaf_count++;
		}
		int64_t until = now_us() + 10;
		while (now_us() < until) {
		}
	}
	return NULL;
}

static int do_sigtraced(long ms)
{
	struct sigaction sa;
	struct itimerval it = {{0, 500}, {0, 500}}, off = {{0, 0}, {0, 0}};
	unsigned long mains = 0;
	pthread_t th;
	int64_t end;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler_fn;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	pthread_create(&th, NULL, bg_leaf_main, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	end = now_us() + ms * 1000;
	while (now_us() < end) {
		for (int i = 0; i < 100; i++) {
			main_leaf();
			mains++;
		}
		/* At most ~20 M events/s: the 32 MiB ring holds the run. */
		int64_t until = now_us() + 10;
		while (now_us() < until) {
		}
	}
	setitimer(ITIMER_REAL, &off, NULL);
	stop_bg = 1;
	pthread_join(th, NULL);
	signal(SIGALRM, SIG_IGN);
	printf("counts %lu %lu %lu\n", mains, bg_leaf_count, handler_count);
	snap("snapshot", "sigtraced");
	return 0;
}

/* ---- threads before main ---------------------------------------------------------- */

static pthread_t early_thread;
static int early_started;

static void *early_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "early");
	for (int i = 0; i < 10; i++)
		early_fn();
	return NULL;
}

__attribute__((constructor(102))) static void start_early_thread(void)
{
	const char *m = getenv("E2E_EARLY");
	if (m && strcmp(m, "1") == 0)
		early_started = pthread_create(&early_thread, NULL, early_main, NULL) == 0;
}

/* ---- main ---------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("pid %d\n", (int)getpid());
	if (!strcmp(mode, "fork"))
		return do_fork(argc > 2 ? atoi(argv[2]) : 1);
	if (!strcmp(mode, "forkphdr"))
		return do_forkphdr(argc > 2 ? atoi(argv[2]) : 1);
	if (!strcmp(mode, "forkinit")) {
		if (forkinit_started)
			pthread_join(forkinit_thread, NULL);
		printf("forkinit %d ok %d\n", forkinit_n, forkinit_ok);
		return 0;
	}
	if (!strcmp(mode, "exec")) {
		for (int i = 0; i < 3; i++)
			exec_fn();
		snap("before", "before-exec");
		char *args[] = {argv[0], (char *)"after-exec", NULL};
		execv("/proc/self/exe", args);
		perror("execv");
		return 1;
	}
	if (!strcmp(mode, "after-exec")) {
		for (int i = 0; i < 4; i++)
			after_exec_fn();
		snap("after", "after-exec");
		return 0;
	}
	if (!strcmp(mode, "dlopen") && argc > 2) {
		void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
		if (h == NULL) {
			printf("dlopen failed: %s\n", dlerror());
			return 1;
		}
		int (*entry)(void) = (int (*)(void))dlsym(h, "plugin_entry");
		for (int i = 0; i < 5; i++)
			entry();
		dlclose(h);
		snap("snapshot", "dlopen");
		return 0;
	}
	if (!strcmp(mode, "exit") && argc > 3)
		return do_exit(argv[2], atol(argv[3]));
	if (!strcmp(mode, "sigown"))
		return do_sigown();
	if (!strcmp(mode, "sigtraced"))
		return do_sigtraced(argc > 2 ? atol(argv[2]) : 300);
	if (!strcmp(mode, "early")) {
		if (early_started)
			pthread_join(early_thread, NULL);
		printf("early %d\n", early_started);
		snap("snapshot", "early");
		return 0;
	}
	fprintf(stderr, "unknown mode %s\n", mode);
	return 2;
}
