/*
 * sched.c - what recording context switches costs (issue 10), and whether
 * getrusage(RUSAGE_THREAD) per request is affordable where the kernel
 * refuses them.
 *
 * Usage: bench_sched_ktrace [round_trips [reps]]
 *
 * Without arguments' "child" form the program is the driver: it runs
 * itself reps times with KTRACE_SCHED=auto and reps times with
 * KTRACE_SCHED=off, alternating, each child timing round_trips ping-pongs
 * of two threads pinned to one cpu through a pair of pipes (every round
 * trip is two blocking reads: two context switches, four switch records), and
 * prints the medians of the process's cpu time per switch (and of wall
 * time), their ratio and the added cpu time per switch:
 *
 *   pingpong sched=off  cpu_ns_per_switch=.. wall_ns_per_switch=..
 *   pingpong sched=auto cpu_ns_per_switch=.. wall_ns_per_switch=..
 *   pingpong added_cpu_ns_per_switch=.. ratio=..
 *
 * Then, in one process: the cost of getrusage(RUSAGE_THREAD) next to a
 * traced call (two events), interleaved, medians:
 *
 *   getrusage_thread ns=..  traced_call ns=..  ratio=..
 *
 * The figures are printed, never judged.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "ktrace.h"

BENCH_NOIPA uint64_t traced_call(uint64_t x);
BENCH_NOIPA uint64_t traced_call(uint64_t x)
{
	return x * 0x9E3779B97F4A7C15ull + 1;
}

static int ab[2], ba[2];

static BENCH_NOINSTR void *ponger(void *arg)
{
	uint64_t n = *(uint64_t *)arg;
	char c;

	for (uint64_t i = 0; i < n; i++) {
		if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
			break;
	}
	return NULL;
}

/* CPU time of the whole process (both threads, user + system), ns. */
static BENCH_NOINSTR uint64_t process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Child: one timed ping-pong run; prints cpu ns and wall ns per switch (2
 * per round trip).  CPU time is the figure: on a shared machine the wall
 * time of two threads pinned to one cpu mostly measures the other load. */
static BENCH_NOINSTR int child(uint64_t n)
{
	pthread_t t;
	char c = 'x';
	uint64_t t0, t1, c0, c1;

	cpu_set_t one;

	/* Both threads on one cpu: every round trip is two direct switches. */
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	sched_setaffinity(0, sizeof(one), &one);
	if (pipe(ab) || pipe(ba))
		return 1;
	pthread_create(&t, NULL, ponger, &n);
	/* warm up */
	for (int i = 0; i < 1000 && write(ab[1], &c, 1) == 1 && read(ba[0], &c, 1) == 1; i++) {
	}
	c0 = process_cpu_ns();
	t0 = bench_now_ns();
	for (uint64_t i = 1000; i < n; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 1;
	t1 = bench_now_ns();
	c1 = process_cpu_ns();
	pthread_join(t, NULL);
	printf("%.1f %.1f\n", (double)(c1 - c0) / (double)((n - 1000) * 2),
	       (double)(t1 - t0) / (double)((n - 1000) * 2));
	return 0;
}

static BENCH_NOINSTR int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static BENCH_NOINSTR double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Run self as a child with KTRACE_SCHED=mode; cpu ns per switch (and wall
 * in *wall) or -1. */
static BENCH_NOINSTR double run_child(const char *self, const char *mode, uint64_t n, double *wall)
{
	char cmd[4352];
	double v = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "KTRACE_SCHED=%s KTRACE_QUIET=1 KTRACE_SIGNAL=none '%s' child %llu",
	         mode, self, (unsigned long long)n);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (fscanf(p, "%lf %lf", &v, wall) != 2)
		v = -1;
	pclose(p);
	return v;
}

static BENCH_NOINSTR void rusage_vs_call(int reps)
{
	double ru[32], tc[32];
	uint64_t sink = 1;
	const uint64_t n = 200000;

	if (reps > 32)
		reps = 32;
	for (int r = 0; r < reps; r++) {
		struct rusage u;
		uint64_t t0 = bench_now_ns();

		for (uint64_t i = 0; i < n; i++) {
			getrusage(RUSAGE_THREAD, &u);
			sink += (uint64_t)u.ru_nvcsw;
		}
		ru[r] = (double)(bench_now_ns() - t0) / (double)n;
		t0 = bench_now_ns();
		for (uint64_t i = 0; i < n; i++)
			sink = traced_call(sink);
		tc[r] = (double)(bench_now_ns() - t0) / (double)n;
	}
	printf("getrusage_thread ns=%.1f  traced_call ns=%.1f  ratio=%.1f  (median of %d; sink %llu)\n",
	       median(ru, reps), median(tc, reps), median(ru, reps) / median(tc, reps), reps,
	       (unsigned long long)(sink & 1));
}

int main(int argc, char **argv)
{
	uint64_t n = 50000;
	int reps = 7;
	double on[32], off[32], won[32], woff[32], mon, moff;

	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(strtoull(argv[2], NULL, 10));
	if (argc > 1)
		n = strtoull(argv[1], NULL, 10);
	if (argc > 2)
		reps = atoi(argv[2]);
	if (n < 2000)
		n = 2000;
	if (reps < 1 || reps > 32)
		reps = 7;
	for (int r = 0; r < reps; r++) {
		off[r] = run_child(argv[0], "off", n, &woff[r]);
		on[r] = run_child(argv[0], "auto", n, &won[r]);
		if (off[r] < 0 || on[r] < 0) {
			fprintf(stderr, "bench_sched: a child run failed\n");
			return 1;
		}
	}
	moff = median(off, reps);
	mon = median(on, reps);
	printf("pingpong sched=off  cpu_ns_per_switch=%.1f wall_ns_per_switch=%.1f  (median of %d "
	       "runs of %llu round trips)\n", moff, median(woff, reps), reps, (unsigned long long)n);
	printf("pingpong sched=auto cpu_ns_per_switch=%.1f wall_ns_per_switch=%.1f\n", mon,
	       median(won, reps));
	printf("pingpong added_cpu_ns_per_switch=%.1f ratio=%.3f\n", mon - moff, mon / moff);
	rusage_vs_call(reps);
	return 0;
}
