/*
 * trigger_prog.c - tail-latency triggers, end to end (test_e2e_trigger.c).
 * Traced (-finstrument-functions); requests of kind "get" are handled by
 * handle_get(), which busy-waits a known time.  Modes (argv[1]):
 *
 *   abs         200 fast requests (20 us), one slow (10 ms), then the mark
 *               "after-trigger" and 400 ms of fast requests (under
 *               SCHED_FIFO when allowed).
 *   cascade     the same without SCHED_FIFO (the test pins the process to
 *               one cpu, so the snapshot writer shares it with requests).
 *   steady      2000 fast requests (20 us) and nothing else.
 *   pct         ktrace_trigger_set("get", 0, 99.0, 200); 400 steady
 *               requests (200 us) with a 10 ms one at #100 (before the
 *               percentile is armed), a pause, one 10 ms outlier, 50 more
 *               steady ones, then ktrace_snapshot("final").
 *   rate        40 slow requests (2 ms) 10 ms apart, then after 300 ms
 *               ktrace_snapshot("final").
 *   race        5 times: a slow request (2 ms) and at once raise(SIGUSR2).
 *
 * Prints "tid <tid>", "fifo <0|1>" (whether the request thread got
 * SCHED_FIFO, which keeps other tasks from stretching steady requests),
 * "done"; then waits for stdin to close.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

/* Per thread: the functions only need a side effect, not a data race. */
static __thread volatile unsigned long sink;

static __attribute__((no_instrument_function)) long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

__attribute__((noinline)) void busy_us(long us)
{
	long long end = now_ns() + us * 1000LL;
	while (now_ns() < end)
		sink++;
}

__attribute__((noinline)) void handle_get(long us)
{
	ktrace_request_t q = ktrace_request_begin("get");
	busy_us(us);
	ktrace_request_end(q);
}

static void sleep_ms(long ms)
{
	struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&d, &d) != 0) {
	}
}

static void snap(const char *reason)
{
	char path[4352] = "";
	int r = ktrace_snapshot(reason);
	if (r == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("snapshot %d %s\n", r, path);
}

static int try_fifo(void)
{
	struct sched_param sp = {1};
	return sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
}

static void no_fifo(void)
{
	struct sched_param sp = {0};
	sched_setscheduler(0, SCHED_OTHER, &sp);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	char buf[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("tid %ld\n", (long)syscall(SYS_gettid));
	/* The writer publishes its frequency estimate within ~20 ms. */
	sleep_ms(150);
	if (!strcmp(mode, "abs") || !strcmp(mode, "cascade")) {
		if (!strcmp(mode, "abs"))
			printf("fifo %d\n", try_fifo());
		for (int i = 0; i < 200; i++)
			handle_get(20);
		handle_get(10000);
		ktrace_mark("after-trigger", 42);
		long long end = now_ns() + 400000000LL;
		while (now_ns() < end)
			handle_get(20);
		no_fifo();
		sleep_ms(300);
	} else if (!strcmp(mode, "steady")) {
		printf("fifo %d\n", try_fifo());
		for (int i = 0; i < 2000; i++)
			handle_get(20);
		no_fifo();
		sleep_ms(300);
	} else if (!strcmp(mode, "pct")) {
		if (ktrace_trigger_set("get", 0, 99.0, 200) != 0)
			printf("trigger_set failed\n");
		printf("fifo %d\n", try_fifo());
		for (int i = 0; i < 400; i++)
			handle_get(i == 100 ? 10000 : 200);
		no_fifo();
		sleep_ms(300); /* any trigger so far is written, not pending */
		printf("outlier\n");
		handle_get(10000);
		ktrace_mark("after-outlier", 1);
		for (int i = 0; i < 50; i++)
			handle_get(200);
		sleep_ms(300);
		snap("final");
	} else if (!strcmp(mode, "rate")) {
		for (int i = 0; i < 40; i++) {
			handle_get(2000);
			sleep_ms(10);
		}
		sleep_ms(300);
		snap("final");
	} else if (!strcmp(mode, "race")) {
		const char *gap = getenv("RACE_GAP_MS"); /* the test's, for slow builds */

		for (int i = 0; i < 5; i++) {
			handle_get(2000);
			raise(SIGUSR2);
			sleep_ms(gap ? atoi(gap) : 150);
		}
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	printf("done\n");
	while (fgets(buf, sizeof(buf), stdin) != NULL) {
	}
	return 0;
}
