/*
 * range_prog.c - a traced program that knows when each of its steps ran,
 * for the time-range options (test_e2e_range.c).
 *
 * 60 steps, 2 ms apart (a nanosleep between them).  Step i: CLOCK_REALTIME
 * t0; request "step" #i begins; ktrace_mark("tick", i); work() 3 times
 * (~20 us each); busy() (200 us, 60 ms in step 30, which fires the
 * KTRACE_TRIGGER_US=30000 trigger: far above what load or qemu stretches
 * a 0.3 ms step to, as a 3 ms threshold was not); the request ends; t1.  Prints
 * "step <i> <t0 ns> <t1 ns>" per step, then after 500 ms (the trigger
 * snapshot written meanwhile) ktrace_snapshot("final"): "snapshot <rc>
 * <path>"; then "done".
 */
#include <stdio.h>
#include <time.h>

#include "ktrace.h"

#define NSTEPS 60
#define SLOW_STEP 30

static volatile unsigned long sink;

static __attribute__((no_instrument_function)) long long clock_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static __attribute__((no_instrument_function)) void spin_us(long us)
{
	long long end = clock_ns(CLOCK_MONOTONIC) + us * 1000LL;

	while (clock_ns(CLOCK_MONOTONIC) < end)
		sink++;
}

__attribute__((noinline)) void work(void)
{
	spin_us(20);
}

__attribute__((noinline)) void busy(long us)
{
	spin_us(us);
}

__attribute__((noinline)) void step(int i)
{
	ktrace_request_t r = ktrace_request_begin("step");

	ktrace_mark("tick", (uint64_t)i);
	for (int k = 0; k < 3; k++)
		work();
	busy(i == SLOW_STEP ? 60000 : 200);
	ktrace_request_end(r);
}

int main(void)
{
	static long long t0[NSTEPS], t1[NSTEPS];
	struct timespec gap = { 0, 2000000 }, settle = { 0, 500000000 };
	char path[4352] = "";
	int rc;

	for (int i = 0; i < NSTEPS; i++) {
		t0[i] = clock_ns(CLOCK_REALTIME);
		step(i);
		t1[i] = clock_ns(CLOCK_REALTIME);
		nanosleep(&gap, NULL);
	}
	for (int i = 0; i < NSTEPS; i++)
		printf("step %d %lld %lld\n", i, t0[i], t1[i]);
	fflush(stdout);
	nanosleep(&settle, NULL);
	rc = ktrace_snapshot("final");
	if (rc == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("snapshot %d %s\ndone\n", rc, path);
	fflush(stdout);
	return 0;
}
