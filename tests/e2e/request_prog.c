/*
 * request_prog.c - a traced program that runs requests in the shapes the
 * per-request retention must handle (lib/request.c), and says what it did.
 *
 *   request_prog MODE N
 *
 * Modes:
 *   basic     N "get" requests; number k runs work(k % 7 + 1) (that many
 *             leaf() calls); every 100th is planted slow (slow_io sleeps
 *             30 ms).  Prints "planted <number>" for each slow one.
 *   unbalanced  N requests that begin inside opener() and end after it
 *             returned, and N that begin before closer() and end inside it
 *             (calls that straddle the request's edges: nesting must stay
 *             exact when the request is dropped).
 *   nested    N "batch" requests of 3 "item" requests each.
 *   cross     N requests begun on one thread and ended on another (the
 *             token passed through a pipe); every 50th planted slow.
 *   spill     one request with N leaf() calls (past a small KTRACE_HOLD_KB),
 *             planted slow.
 *   signal    N requests while a timer's SIGALRM handler calls traced
 *             on_alarm() (which calls leaf()).
 *   exit      a thread begins a request and exits without ending it.
 *   meanwhile a "hold" request on one thread holds a lock for 40 ms (not
 *             slow: under KTRACE_TRIGGER_US=60000); a "wait" request on
 *             another waits for it and is slow; the holder then runs N
 *             short requests.  The holder's request must be kept.
 *   loop      for N ms, a traced serve() that begins and ends one request
 *             around handle() (as Redis's call() does): serve()'s calls are
 *             long only because of the request inside.
 *   fork      N requests, a fork in the middle of one; the child runs N
 *             requests and takes its own snapshot (prints "child PATH").
 *   framed    meanwhile inside a frame: a thread enters outer() between
 *             two requests (a held gap), runs "quick" requests (quickwork())
 *             in it until another thread's slow "wait" request (30 ms)
 *             has ended, and returns from outer() in a later gap; its
 *             retained quick requests are written for that slow request
 *             (OVERLAP) and must be inside outer().
 *   gaps      N turns of an event loop: turn() calls between() (work(2))
 *             then a "get" request (work(3)); the time between requests is
 *             held too.  Every 100th between() (k % 100 == 50) also calls
 *             stall(), 3 ms on the cpu (a slow gap), and every 250th makes
 *             the mark "gapmark".  Prints "stalls S marks M either E" (E:
 *             gaps with a stall, a mark or both).
 *
 * Then it takes a snapshot (ktrace_snapshot) and prints "snapshot PATH".
 */
#include <ktrace.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static _Atomic int sink;          /* atomics: the program runs under TSan too */
static volatile sig_atomic_t alarms;

__attribute__((noinline)) void leaf(int i)
{
	atomic_fetch_add_explicit(&sink, i, memory_order_relaxed);
}
__attribute__((noinline)) void work(int n) { for (int i = 0; i < n; i++) leaf(i); }
__attribute__((noinline)) void slow_io(void)
{
	struct timespec ts = {0, 30 * 1000 * 1000};
	nanosleep(&ts, NULL);
}
__attribute__((noinline)) void handle(uint32_t k, int slow)
{
	work((int)(k % 7) + 1);
	if (slow)
		slow_io();
}

static void basic(int n)
{
	for (int i = 1; i <= n; i++) {
		ktrace_request_t r = ktrace_request_begin("get");
		handle((uint32_t)i, i % 100 == 0);
		ktrace_request_end(r);
		if (i % 100 == 0)
			printf("planted %d\n", i);
	}
}

__attribute__((no_instrument_function)) static long long mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
__attribute__((noinline)) void stall(void)
{
	long long end = mono_ns() + 3000000;
	while (mono_ns() < end)
		atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
}
__attribute__((noinline)) void slow_wait(const struct timespec *w) { nanosleep(w, NULL); }
__attribute__((noinline)) void between(int k)
{
	work(2);
	if (k % 100 == 50)
		stall();
	if (k % 250 == 0)
		ktrace_mark("gapmark", (uint64_t)k);
}
__attribute__((noinline)) void turn(int k)
{
	between(k);
	ktrace_request_t r = ktrace_request_begin("get");
	work(3);
	ktrace_request_end(r);
}
static void gaps(int n)
{
	int stalls = 0, marks = 0, either = 0;

	for (int k = 1; k <= n; k++) {
		turn(k);
		stalls += k % 100 == 50;
		marks += k % 250 == 0;
		either += k % 100 == 50 || k % 250 == 0;
	}
	printf("stalls %d marks %d either %d\n", stalls, marks, either);
}

static ktrace_request_t pending;
__attribute__((noinline)) void opener(void)
{
	pending = ktrace_request_begin("open");
	work(2);
}
__attribute__((noinline)) void closer(ktrace_request_t r)
{
	work(3);
	ktrace_request_end(r);
	work(1);
}

static void unbalanced(int n)
{
	for (int i = 0; i < n; i++) {
		opener();
		work(1);
		ktrace_request_end(pending);
	}
	for (int i = 0; i < n; i++) {
		ktrace_request_t r = ktrace_request_begin("close");
		work(1);
		closer(r);
	}
}

static void nested(int n)
{
	for (int i = 0; i < n; i++) {
		ktrace_request_t b = ktrace_request_begin("batch");
		for (int j = 0; j < 3; j++) {
			ktrace_request_t it = ktrace_request_begin("item");
			work(2);
			ktrace_request_end(it);
		}
		ktrace_request_end(b);
	}
}

static int pfd[2];
static void *ender(void *arg)
{
	ktrace_request_t r;
	int n = *(int *)arg;

	for (int i = 1; i <= n; i++) {
		if (read(pfd[0], &r, sizeof(r)) != (ssize_t)sizeof(r))
			break;
		work(2);
		if (i % 50 == 0)
			slow_io();
		ktrace_request_end(r);
	}
	return NULL;
}

static void cross(int n)
{
	pthread_t th;

	if (pipe(pfd) != 0)
		exit(2);
	pthread_create(&th, NULL, ender, &n);
	for (int i = 1; i <= n; i++) {
		ktrace_request_t r = ktrace_request_begin("async");
		work(1);
		if (write(pfd[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			exit(2);
		work(1);   /* the beginning thread goes on with other work */
		if (i % 50 == 0)
			printf("planted %d\n", i);
	}
	pthread_join(th, NULL);
}

static void spill(int n)
{
	ktrace_request_t r = ktrace_request_begin("big");
	work(n);
	slow_io();
	ktrace_request_end(r);
}

__attribute__((noinline)) void on_alarm(int sig)
{
	(void)sig;
	leaf(1);
	alarms++;
}

static void signals(int n)
{
	struct itimerval it = {{0, 200}, {0, 200}};
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 1; i <= n; i++) {
		ktrace_request_t r = ktrace_request_begin("sig");
		handle((uint32_t)i, 0);
		work(20);
		ktrace_request_end(r);
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	printf("alarms %d\n", alarms);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int holding;

__attribute__((noinline)) void hold_lock(void)
{
	struct timespec ts = {0, 40 * 1000 * 1000};
	pthread_mutex_lock(&mu);
	holding = 1;
	nanosleep(&ts, NULL);
	pthread_mutex_unlock(&mu);
}

__attribute__((noinline)) void wait_lock(void)
{
	struct timespec ts = {0, 30 * 1000 * 1000};
	pthread_mutex_lock(&mu);
	pthread_mutex_unlock(&mu);
	nanosleep(&ts, NULL);   /* then 30 ms more: slow past 60 ms in all */
}

static _Atomic int waited;

static void *holder(void *arg)
{
	int n = *(int *)arg;
	struct timespec ts = {0, 1000 * 1000};
	ktrace_request_t r = ktrace_request_begin("hold");

	hold_lock();
	ktrace_request_end(r);
	/* n quick ones, and on until the waiter's slow request ended (its
	 * span is published then, and read at a request call of this thread:
	 * on a loaded machine n ms may not be enough) */
	for (int i = 0, last = 0; !last; i++) {
		last = i + 1 >= n && atomic_load(&waited);   /* this one sees it */
		ktrace_request_t q = ktrace_request_begin("quick");
		work(1);
		ktrace_request_end(q);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static _Atomic int framed_go, framed_done;
__attribute__((noinline)) void quickwork(void) { work(2); }
__attribute__((noinline)) void outer(void)
{
	struct timespec ts = {0, 300 * 1000};

	while (!atomic_load(&framed_done)) {
		ktrace_request_t q = ktrace_request_begin("quick");
		quickwork();
		ktrace_request_end(q);
		nanosleep(&ts, NULL);
	}
}
static void *framed_runner(void *arg)
{
	ktrace_request_t q = ktrace_request_begin("quick");

	(void)arg;
	work(1);
	ktrace_request_end(q);
	atomic_store(&framed_go, 1);
	outer();
	for (int i = 0; i < 2; i++) {
		q = ktrace_request_begin("quick");
		work(1);
		ktrace_request_end(q);
	}
	return NULL;
}
static void framed(void)
{
	struct timespec ts = {0, 5 * 1000 * 1000}, w = {0, 30 * 1000 * 1000};
	struct timespec after = {0, 400 * 1000 * 1000};
	pthread_t th;

	/* A slow request first: its trigger takes the test's one snapshot a
	 * minute, so the slow "wait" fires none, and no aftermath keeps the
	 * quick requests (they must be kept for meanwhile alone). */
	ktrace_request_t r0 = ktrace_request_begin("warm");
	slow_wait(&w);
	ktrace_request_end(r0);
	nanosleep(&after, NULL);
	pthread_create(&th, NULL, framed_runner, NULL);
	while (!atomic_load(&framed_go))
		nanosleep(&ts, NULL);
	nanosleep(&ts, NULL);
	ktrace_request_t r = ktrace_request_begin("wait");
	slow_wait(&w);
	ktrace_request_end(r);
	nanosleep(&ts, NULL);
	atomic_store(&framed_done, 1);
	pthread_join(th, NULL);
}

static void meanwhile(int n)
{
	pthread_t th;
	struct timespec ts = {0, 100 * 1000};

	pthread_create(&th, NULL, holder, &n);
	while (!holding)
		nanosleep(&ts, NULL);
	ktrace_request_t r = ktrace_request_begin("wait");
	wait_lock();
	ktrace_request_end(r);
	atomic_store(&waited, 1);
	pthread_join(th, NULL);
}

static void forked(int n)
{
	for (int i = 1; i <= n; i++) {
		ktrace_request_t r = ktrace_request_begin("get");
		handle((uint32_t)i, 0);
		if (i == n / 2) {
			pid_t pid = fork();
			if (pid == 0) {
				char path[4096];
				for (int j = 1; j <= n; j++) {
					ktrace_request_t q = ktrace_request_begin("child");
					handle((uint32_t)j, j == n);
					ktrace_request_end(q);
				}
				ktrace_request_end(r);   /* begun in the parent */
				if (ktrace_snapshot("child") != 0 ||
				    ktrace_last_snapshot(path, sizeof(path)) < 0)
					_exit(1);
				printf("child %s\n", path);
				_exit(0);
			}
			int st;
			waitpid(pid, &st, 0);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				exit(3);
		}
		ktrace_request_end(r);
	}
}

__attribute__((noinline)) void serve(uint32_t k)
{
	ktrace_request_t r = ktrace_request_begin("get");
	handle(k, 0);
	work(40);   /* a request of several microseconds */
	ktrace_request_end(r);
}

static void loop(int ms)
{
	struct timespec t0, t1;
	uint32_t k = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++)
			serve(++k);
		clock_gettime(CLOCK_MONOTONIC, &t1);
	} while ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	printf("served %u\n", k);
}

static void *exiter(void *arg)
{
	(void)arg;
	ktrace_request_begin("orphan");
	work(4);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "basic";
	int n = argc > 2 ? atoi(argv[2]) : 1000;
	char path[4096];

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* The library measures the counter's frequency in its first ~20 ms;
	 * until then no threshold can be applied and every request is kept
	 * (WARMUP).  The tests are about what comes after. */
	usleep(200 * 1000);   /* 60 ms was too short on a loaded machine */
	printf("fn leaf %p\nfn slow_io %p\nfn opener %p\nfn closer %p\nfn hold_lock %p\n"
	       "fn on_alarm %p\nfn work %p\nfn serve %p\nfn stall %p\nfn between %p\n"
	       "fn turn %p\n", (void *)leaf, (void *)slow_io,
	       (void *)opener, (void *)closer, (void *)hold_lock, (void *)on_alarm, (void *)work,
	       (void *)serve, (void *)stall, (void *)between, (void *)turn);
	if (strcmp(mode, "basic") == 0)
		basic(n);
	else if (strcmp(mode, "unbalanced") == 0)
		unbalanced(n);
	else if (strcmp(mode, "nested") == 0)
		nested(n);
	else if (strcmp(mode, "cross") == 0)
		cross(n);
	else if (strcmp(mode, "spill") == 0)
		spill(n);
	else if (strcmp(mode, "signal") == 0)
		signals(n);
	else if (strcmp(mode, "meanwhile") == 0)
		meanwhile(n);
	else if (strcmp(mode, "loop") == 0)
		loop(n);
	else if (strcmp(mode, "gaps") == 0)
		gaps(n);
	else if (strcmp(mode, "framed") == 0)
		framed();
	else if (strcmp(mode, "fork") == 0)
		forked(n);
	else if (strcmp(mode, "exit") == 0) {
		pthread_t th;
		pthread_create(&th, NULL, exiter, NULL);
		pthread_join(th, NULL);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	if (ktrace_snapshot(mode) != 0 || ktrace_last_snapshot(path, sizeof(path)) < 0)
		return 1;
	printf("snapshot %s\n", path);
	return 0;
}
