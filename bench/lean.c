/*
 * lean.c - what one call of a small function costs, built five ways
 * (bench/lean.sh runs them, interleaved, and prints medians and ratios):
 *   bench_lean_none    -O2, no instrumentation
 *   bench_lean_nop     -O2 -pg -mfentry -mnop-mcount -minstrument-return=nop5
 *                      (non-PIE): 5-byte nops at entry and exit, never
 *                      patched, no library: what a patched-out call runs
 *   bench_lean_fi      -O2 -finstrument-functions + libktrace
 *   bench_lean_lean    -O2 + lean_cflags + libktrace (PIE)
 *   bench_lean_floor   -O2 + lean_cflags + floor_lean.c: rdtsc and a store
 *                      in __fentry__/__return__, the lean mode's floor
 * All five with -falign-functions=64 (CMakeLists.txt): the code differs in
 * the sites only, not in where the loop falls, which alone moved the
 * muted call by 0.3-0.4 ns.
 * Arg: calls per repetition.  Prints "ns/call <median of 7 reps>" (thread
 * CPU time) after a 300 ms warm-up in which the budget and the patcher act.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

static volatile int sink;

int small(int x);
long loop(long n);

__attribute__((noinline)) int small(int x)
{
	sink += x;
	return x + 1;
}

__attribute__((noinline)) long loop(long n)
{
	long s = 0;

	for (long i = 0; i < n; i++)
		s += small((int)i);
	return s;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	double v[7];
	uint64_t end = bench_now_ns() + 300000000ull;

	while (bench_now_ns() < end)
		loop(100000);
	for (int r = 0; r < 7; r++) {
		uint64_t t0 = bench_thread_cpu_ns();

		loop(n);
		v[r] = (double)(bench_thread_cpu_ns() - t0) / (double)n;
	}
	printf("ns/call %.3f\n", bench_median(v, 7));
	return 0;
}
