/*
 * trigger_run_prog.c - KTRACE_TRIGGER_ON=run, end to end
 * (test_e2e_trigger_run.c).  Traced; three requests of kind "get", each
 * over the 20 ms threshold the test sets in wall time, in this order:
 *
 *   preempted  the request thread and a busy thread share one cpu; the
 *              request runs until it used 2 ms of cpu time, and after the
 *              first 0.5 ms wakes the busy thread, which runs 60 ms under
 *              SCHED_FIFO (so it preempts the request at once; where
 *              SCHED_FIFO is refused, the request runs at nice 19 against a
 *              busy thread at nice 0 for the whole request instead): its
 *              wall time is many times its cpu time, the rest preempted.
 *   oncpu      alone on its cpu, runs until it used 40 ms of cpu time.
 *   blocked    sleeps 40 ms (waiting is what the program did).
 *
 * oncpu follows preempted at once (during its trigger's delay); before
 * blocked it waits for the trigger's delay to pass, then after the
 * last one it takes ktrace_snapshot("final").  Prints per request
 * "req <name> wall_us <n> cpu_us <n>", then "tid <tid>", "done"; then
 * waits for stdin to close.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

static _Atomic unsigned long sink;   /* atomic: the program runs under TSan too */
static volatile int busy_stop;

static __attribute__((no_instrument_function)) long long clock_ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

__attribute__((noinline)) void spin_cpu_us(long us)
{
	long long end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + us * 1000LL;
	while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end)
		atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
}

__attribute__((noinline)) void wait_ms(long ms)
{
	struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&d, &d) != 0) {
	}
}

/* One request; prints its wall and cpu time as the program measured them. */
static void request(const char *name, long cpu_us, long sleep_ms)
{
	long long w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	ktrace_request_t q = ktrace_request_begin("get");
	if (cpu_us)
		spin_cpu_us(cpu_us);
	if (sleep_ms)
		wait_ms(sleep_ms);
	ktrace_request_end(q);
	printf("req %s wall_us %lld cpu_us %lld\n", name,
	       (clock_ns(CLOCK_MONOTONIC) - w0) / 1000,
	       (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / 1000);
	fflush(stdout);
}

static int pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s);
}

static int go[2];      /* pipe: a byte wakes the SCHED_FIFO busy thread */
static int busy_cpu;

static void *busy(void *arg)
{
	char c;

	pin(busy_cpu);
	if (arg) {          /* SCHED_FIFO: wait for the request, then 60 ms */
		if (read(go[0], &c, 1) == 1) {
			long long end = clock_ns(CLOCK_MONOTONIC) + 60000000LL;
			while (clock_ns(CLOCK_MONOTONIC) < end)
				atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
		}
		return NULL;
	}
	while (!busy_stop)
		atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
	return NULL;
}

/* The busy thread: SCHED_FIFO if allowed (1), else nice 0 against this
 * thread at nice 19 (0). */
static int start_busy(pthread_t *th, int tid)
{
	pthread_attr_t at;
	struct sched_param sp = {1};

	pthread_attr_init(&at);
	pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&at, SCHED_FIFO);
	pthread_attr_setschedparam(&at, &sp);
	if (pipe(go) == 0 && pthread_create(th, &at, busy, (void *)1) == 0) {
		pthread_attr_destroy(&at);
		return 1;
	}
	pthread_attr_destroy(&at);
	setpriority(PRIO_PROCESS, (id_t)tid, 19);
	pthread_create(th, NULL, busy, NULL);
	return 0;
}

__attribute__((noinline)) void preempted_work(int fifo)
{
	spin_cpu_us(500);
	if (fifo && write(go[1], "x", 1) != 1)
		perror("write");
	spin_cpu_us(1500);
}

int main(void)
{
	pthread_t th;
	char path[4352] = "", buf[64];
	int cpu = sched_getcpu() < 0 ? 0 : sched_getcpu();
	int tid = (int)syscall(SYS_gettid);

	if (pin(cpu) != 0)
		perror("sched_setaffinity");
	/* A short request first, so the library and its writer are up. */
	request("warm", 100, 0);

	busy_cpu = cpu;
	int fifo = start_busy(&th, tid);
	printf("fifo %d\n", fifo);
	wait_ms(20);
	{
		long long w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		ktrace_request_t q = ktrace_request_begin("get");
		preempted_work(fifo);
		ktrace_request_end(q);
		printf("req preempted wall_us %lld cpu_us %lld\n",
		       (clock_ns(CLOCK_MONOTONIC) - w0) / 1000,
		       (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / 1000);
	}
	busy_stop = 1;
	pthread_join(th, NULL);
	if (!fifo)
		setpriority(PRIO_PROCESS, (id_t)tid, 0);
	/* At once, inside the preempted one's trigger delay (1 s: the 40 ms
	 * of cpu took over 300 ms on a loaded machine): a
	 * trigger that turns out to be preemption must not hide it (run),
	 * while one pending trigger does (wall: it is suppressed). */
	request("oncpu", 40000, 0);
	wait_ms(1300);
	request("blocked", 0, 40);
	wait_ms(1300);

	int r = ktrace_snapshot("final");
	if (r == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("snapshot %d %s\n", r, path);
	printf("tid %d\n", tid);
	printf("done\n");
	fflush(stdout);
	while (fgets(buf, sizeof(buf), stdin) != NULL) {
	}
	return 0;
}
