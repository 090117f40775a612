/*
 * request.c - the cost of a ktrace_request_begin/end pair next to the cost
 * of two traced calls, in the same process, interleaved.
 *
 * Usage: bench_request_ktrace [pairs_per_rep [reps]]
 *
 * Three kinds of request are timed:
 *   plain  no threshold (the default configuration: records + histogram)
 *   abs    an absolute threshold that never fires (1 s)
 *   pct    a p99.9 threshold, armed after 1000 samples (the percentile is
 *          recomputed every 64th request; it may fire, at most once a minute
 *          with KTRACE_MAX_SNAPSHOTS_PER_MIN=1, written in the background)
 * Prints one line per figure: name=.. ns=.. (median of the repetitions).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "ktrace.h"

BENCH_NOIPA uint64_t call_a(uint64_t x);
BENCH_NOIPA uint64_t call_a(uint64_t x)
{
	return x * 0x9E3779B97F4A7C15ull + 1;
}

BENCH_NOIPA uint64_t call_b(uint64_t x);
BENCH_NOIPA uint64_t call_b(uint64_t x)
{
	return x * 0x9E3779B97F4A7C15ull + 2;
}

static BENCH_NOINSTR double time_calls(uint64_t n, uint64_t *sink)
{
	uint64_t x = *sink, t0 = bench_now_ns();
	for (uint64_t i = 0; i < n; i++) {
		x = call_a(x);
		x = call_b(x);
	}
	*sink = x;
	return (double)(bench_now_ns() - t0) / (double)n;
}

static BENCH_NOINSTR double time_requests(const char *kind, uint64_t n)
{
	uint64_t t0 = bench_now_ns();
	for (uint64_t i = 0; i < n; i++) {
		ktrace_request_t r = ktrace_request_begin(kind);
		ktrace_request_end(r);
	}
	return (double)(bench_now_ns() - t0) / (double)n;
}

static BENCH_NOINSTR double time_loop(uint64_t n)
{
	uint64_t t0 = bench_now_ns();
	for (uint64_t i = 0; i < n; i++)
		__asm__ __volatile__("" ::: "memory");
	return (double)(bench_now_ns() - t0) / (double)n;
}

#define MAXREPS 64

BENCH_NOINSTR int main(int argc, char **argv)
{
	uint64_t n = bench_arg(argc, argv, 1, 2000000);
	uint64_t reps = bench_arg(argc, argv, 2, 7), sink = 1;
	double calls[MAXREPS], plain[MAXREPS], abs_[MAXREPS], pct[MAXREPS], loop[MAXREPS];

	if (reps > MAXREPS)
		reps = MAXREPS;
	if (ktrace_trigger_set("abs", 1000000, 0, 0) != 0 ||
	    ktrace_trigger_set("pct", 0, 99.9, 1000) != 0)
		fprintf(stderr, "bench_request: ktrace_trigger_set failed\n");
	/* warm-up: ids cached, kinds named, thread registered */
	time_calls(100000, &sink);
	time_requests("plain", 100000);
	time_requests("abs", 100000);
	time_requests("pct", 100000);
	for (uint64_t r = 0; r < reps; r++) {
		loop[r] = time_loop(n);
		calls[r] = time_calls(n, &sink);
		plain[r] = time_requests("plain", n);
		abs_[r] = time_requests("abs", n);
		pct[r] = time_requests("pct", n);
	}
	printf("name=empty_loop ns=%.3f\n", bench_median(loop, reps));
	printf("name=two_traced_calls ns=%.3f\n", bench_median(calls, reps));
	printf("name=request_pair_plain ns=%.3f\n", bench_median(plain, reps));
	printf("name=request_pair_abs ns=%.3f\n", bench_median(abs_, reps));
	printf("name=request_pair_pct ns=%.3f\n", bench_median(pct, reps));
	printf("name=sink ns=%llu\n", (unsigned long long)(sink & 1));
	return 0;
}
