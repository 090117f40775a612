/*
 * bench_util.h - timing and reporting helpers shared by the benchmarks.
 *
 * Everything here is no_instrument_function and static: the benchmarks are
 * compiled with -finstrument-functions, and only the workload's own
 * functions may produce events (the harness must not add any to the timed
 * loops).  Results are printed as one "key=value ..." line per measurement
 * so bench/run_all.sh can take medians across processes; the programs never
 * judge a timing.
 */
#ifndef KTRACE_BENCH_UTIL_H
#define KTRACE_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NOINSTR __attribute__((no_instrument_function))
#define BENCH_UNUSED  __attribute__((unused))
/* A function the compiler must really call and cannot see through (no
 * inlining, cloning, constant propagation or folding with its twins).
 * clang has no noipa; noinline is the closest it offers. */
#if defined(__clang__)
#define BENCH_NOIPA __attribute__((noinline))
#else
#define BENCH_NOIPA __attribute__((noipa))
#endif

static inline BENCH_NOINSTR BENCH_UNUSED uint64_t bench_rdtsc(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* CLOCK_MONOTONIC, ns. */
static inline BENCH_NOINSTR BENCH_UNUSED uint64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread (user + system), ns. */
static inline BENCH_NOINSTR BENCH_UNUSED uint64_t bench_thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* TSC ticks per ns, measured against CLOCK_MONOTONIC over about 50 ms. */
static BENCH_NOINSTR BENCH_UNUSED double bench_tsc_per_ns(void)
{
	uint64_t t0 = bench_now_ns(), c0 = bench_rdtsc(), t1, c1;
	struct timespec d = {0, 50 * 1000 * 1000};

	nanosleep(&d, NULL);
	t1 = bench_now_ns();
	c1 = bench_rdtsc();
	return (double)(c1 - c0) / (double)(t1 - t0);
}

static BENCH_NOINSTR int bench_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static BENCH_NOINSTR int bench_cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Sorts v in place; returns the median. */
static BENCH_NOINSTR BENCH_UNUSED double bench_median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), bench_cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* q-quantile (0..1) of v, which must be sorted (nearest rank). */
static BENCH_NOINSTR BENCH_UNUSED uint64_t bench_quantile_u64(const uint64_t *v, size_t n,
                                                              double q)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)(q * (double)n);
	if (i >= n)
		i = n - 1;
	return v[i];
}

static BENCH_NOINSTR BENCH_UNUSED void bench_sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), bench_cmp_u64);
}

/* A positive integer from argv[i] or dflt. */
static BENCH_NOINSTR BENCH_UNUSED uint64_t bench_arg(int argc, char **argv, int i,
                                                     uint64_t dflt)
{
	if (i < argc) {
		char *end;
		unsigned long long v = strtoull(argv[i], &end, 10);
		if (*end == '\0' && v > 0)
			return v;
		fprintf(stderr, "bad argument '%s'\n", argv[i]);
		exit(2);
	}
	return dflt;
}

#endif /* KTRACE_BENCH_UTIL_H */
