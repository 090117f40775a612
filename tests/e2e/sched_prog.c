/*
 * sched_prog.c - a traced program for the scheduling tests
 * (test_e2e_sched.c, issue 10).  Linked statically so a constructor can
 * start a thread before libktrace's own constructor runs.  Modes (argv[1]):
 *
 *   sleep5      sleep_5ms() sleeps 5 ms between two spins of ~1 ms;
 *               prints "tid <main tid>" and "snapshot <rc> <path>".
 *   blocked     8 fast "op" requests, then one that waits in
 *               wait_for_lock() ~30 ms for a mutex the "holder" thread
 *               holds while it sleeps (holder_sleep); prints "requests
 *               max_fast_us=N slow_us=M"; snapshot.
 *   preempt     the process is pinned to one cpu; 8 fast "op" requests,
 *               then a "hog" thread spins in hog_spin() while one request
 *               needs ~30 ms of cpu in compute() (measured with the
 *               thread's cpu clock); "requests ..." line; snapshot.
 *   threads     threads that exist before ktrace's start ("early", made by
 *               a priority-100 constructor), one made after ("late"), one
 *               that exits before the snapshot ("gone"), each sleeping
 *               10 ms in its own function (early_sleep, late_sleep,
 *               gone_sleep), main in main_sleep; prints "tid NAME TID"
 *               per thread, "perf_fds N" (perf event descriptors open),
 *               then "snapshot <rc> <path>".
 *   fork        parent_sleep (10 ms), then fork: the child runs
 *               child_sleep (10 ms) and snapshots ("child <tid> <rc>
 *               <path>"); the parent waits and snapshots ("parent <tid>
 *               <rc> <path>").
 *   exec        exec_sleep (10 ms), snapshot ("before <tid> <rc> <path>"),
 *               exec itself in mode after-exec: after_exec_sleep (10 ms),
 *               snapshot ("after <tid> <rc> <path>").
 */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

#define NOI __attribute__((no_instrument_function))

static __thread volatile unsigned long sink; /* per thread: no data race */

static NOI int tid(void)
{
	return (int)syscall(SYS_gettid);
}

static NOI void msleep(int ms)
{
	struct timespec d = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&d, &d) != 0) {
	}
}

static NOI int64_t clk_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spin until the calling thread has used ns of cpu. */
static NOI void burn_cpu(int64_t ns)
{
	int64_t end = clk_ns(CLOCK_THREAD_CPUTIME_ID) + ns;

	while (clk_ns(CLOCK_THREAD_CPUTIME_ID) < end)
		sink++;
}

static void snap(const char *tag)
{
	char path[4352] = "";
	int r = ktrace_snapshot(tag);

	if (r == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("%s %d %s\n", tag, r, path);
	fflush(stdout);
}

static void snap_tid(const char *tag)
{
	char path[4352] = "";
	int r = ktrace_snapshot(tag);

	if (r == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("%s %d %d %s\n", tag, tid(), r, path);
	fflush(stdout);
}

/* ---- sleep5 ---------------------------------------------------------------- */

__attribute__((noinline)) void sleep_5ms(void)
{
	burn_cpu(1000000);
	msleep(5);
	burn_cpu(1000000);
}

/* ---- blocked ---------------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ready_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cv = PTHREAD_COND_INITIALIZER;
static int ready;

__attribute__((noinline)) void holder_sleep(void) { msleep(30); }

static void *holder(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "holder");
	pthread_mutex_lock(&mu);
	pthread_mutex_lock(&ready_mu);
	ready = 1;
	pthread_cond_signal(&ready_cv);
	pthread_mutex_unlock(&ready_mu);
	holder_sleep();
	pthread_mutex_unlock(&mu);
	return NULL;
}

__attribute__((noinline)) void wait_for_lock(void)
{
	pthread_mutex_lock(&mu);
	pthread_mutex_unlock(&mu);
}

__attribute__((noinline)) void small_work(void) { burn_cpu(20000); }

/* Wall time of the fast requests (the slowest) and of the planted one:
 * "requests max_fast_us=N slow_us=M", so a test can tell when machine
 * load made a fast one the slowest. */
static int64_t max_fast_ns, slow_ns;

static NOI void note_request(int64_t t0, int slow)
{
	int64_t d = clk_ns(CLOCK_MONOTONIC) - t0;

	if (slow)
		slow_ns = d;
	else if (d > max_fast_ns)
		max_fast_ns = d;
}

static NOI void print_requests(void)
{
	printf("requests max_fast_us=%lld slow_us=%lld\n", (long long)(max_fast_ns / 1000),
	       (long long)(slow_ns / 1000));
}

__attribute__((noinline)) void handle_op(int slow)
{
	small_work();
	if (slow)
		wait_for_lock();
}

static void run_blocked(void)
{
	pthread_t t;

	for (int i = 0; i < 8; i++) {
		int64_t t0 = clk_ns(CLOCK_MONOTONIC);
		ktrace_request_t r = ktrace_request_begin("op");
		handle_op(0);
		ktrace_request_end(r);
		note_request(t0, 0);
	}
	pthread_create(&t, NULL, holder, NULL);
	pthread_mutex_lock(&ready_mu);
	while (!ready)
		pthread_cond_wait(&ready_cv, &ready_mu);
	pthread_mutex_unlock(&ready_mu);
	{
		int64_t t0 = clk_ns(CLOCK_MONOTONIC);
		ktrace_request_t r = ktrace_request_begin("op");
		handle_op(1);
		ktrace_request_end(r);
		note_request(t0, 1);
	}
	pthread_join(t, NULL);
	print_requests();
	snap("snapshot");
}

/* ---- preempt ------------------------------------------------------------------ */

static _Atomic int hog_stop, hog_started;

__attribute__((noinline)) void hog_spin(void)
{
	hog_started = 1;
	while (!hog_stop)
		sink++;
}

static void *hog(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "hog");
	hog_spin();
	return NULL;
}

__attribute__((noinline)) void compute(int64_t ns) { burn_cpu(ns); }

static void run_preempt(void)
{
	cpu_set_t set;
	pthread_t t;

	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	sched_setaffinity(0, sizeof(set), &set); /* this thread; the hog inherits it */
	for (int i = 0; i < 8; i++) {
		int64_t t0 = clk_ns(CLOCK_MONOTONIC);
		ktrace_request_t r = ktrace_request_begin("op");
		compute(30000);
		ktrace_request_end(r);
		note_request(t0, 0);
	}
	pthread_create(&t, NULL, hog, NULL);
	while (!hog_started)
		sched_yield();
	{
		int64_t t0 = clk_ns(CLOCK_MONOTONIC);
		ktrace_request_t r = ktrace_request_begin("op");
		compute(30000000);
		ktrace_request_end(r);
		note_request(t0, 1);
	}
	hog_stop = 1;
	pthread_join(t, NULL);
	print_requests();
	snap("snapshot");
}

/* ---- threads -------------------------------------------------------------------- */

static _Atomic int early_go, early_done;
static int early_tid;

__attribute__((noinline)) void early_sleep(void) { msleep(10); }
__attribute__((noinline)) void late_sleep(void) { msleep(10); }
__attribute__((noinline)) void gone_sleep(void) { msleep(10); }
__attribute__((noinline)) void main_sleep(void) { msleep(10); }

/* Runs untraced until main lets it go: it exists before libktrace starts. */
static NOI void *early(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "early");
	__atomic_store_n(&early_tid, tid(), __ATOMIC_RELEASE);
	while (!early_go)
		msleep(1);
	early_sleep();
	early_done = 1;
	return NULL;
}

static int early_started;

__attribute__((constructor(100))) static NOI void start_early(void)
{
	pthread_t t;
	const char *m = getenv("E2E_SCHED_EARLY");

	if (!m || !*m)
		return;
	if (pthread_create(&t, NULL, early, NULL) == 0) {
		pthread_detach(t);
		early_started = 1;
		while (!__atomic_load_n(&early_tid, __ATOMIC_ACQUIRE))
			msleep(1);
	}
}

/* Descriptors of perf events open in this process. */
static NOI int perf_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300], to[256];
	int n = 0;

	while (d && (e = readdir(d)) != NULL) {
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		k = readlink(path, to, sizeof(to) - 1);
		if (k > 0) {
			to[k] = 0;
			n += strstr(to, "perf_event") != NULL;
		}
	}
	if (d)
		closedir(d);
	return n;
}

static void *late(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "late");
	printf("tid late %d\n", tid());
	fflush(stdout);
	late_sleep();
	return NULL;
}

static void *gone(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "gone");
	printf("tid gone %d\n", tid());
	fflush(stdout);
	gone_sleep();
	return NULL;
}

static void run_threads(void)
{
	pthread_t a, b;

	printf("tid main %d\n", tid());
	if (early_started)
		printf("tid early %d\n", early_tid);
	fflush(stdout);
	pthread_create(&b, NULL, gone, NULL);
	pthread_join(b, NULL);
	msleep(20);
	early_go = 1;
	pthread_create(&a, NULL, late, NULL);
	main_sleep();
	pthread_join(a, NULL);
	while (early_started && !early_done)
		msleep(1);
	printf("perf_fds %d\n", perf_fds());
	snap("snapshot");
}

/* ---- fork, exec ----------------------------------------------------------------- */

__attribute__((noinline)) void parent_sleep(void) { msleep(10); }
__attribute__((noinline)) void child_sleep(void) { msleep(10); }
__attribute__((noinline)) void exec_sleep(void) { msleep(10); }
__attribute__((noinline)) void after_exec_sleep(void) { msleep(10); }

static void run_fork(void)
{
	pid_t p;
	int st;

	parent_sleep();
	fflush(stdout);
	p = fork();
	if (p == 0) {
		child_sleep();
		snap_tid("child");
		_exit(0);
	}
	waitpid(p, &st, 0);
	snap_tid("parent");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "sleep5")) {
		printf("tid %d\n", tid());
		sleep_5ms();
		snap("snapshot");
	} else if (!strcmp(mode, "blocked")) {
		run_blocked();
	} else if (!strcmp(mode, "preempt")) {
		run_preempt();
	} else if (!strcmp(mode, "threads")) {
		run_threads();
	} else if (!strcmp(mode, "fork")) {
		run_fork();
	} else if (!strcmp(mode, "exec")) {
		char *args[] = { argv[0], "after-exec", NULL };

		exec_sleep();
		snap_tid("before");
		execv(argv[0], args);
		return 1;
	} else if (!strcmp(mode, "after-exec")) {
		after_exec_sleep();
		snap_tid("after");
	} else {
		fprintf(stderr, "usage: %s sleep5|blocked|preempt|threads|fork|exec\n", argv[0]);
		return 2;
	}
	return 0;
}
