/*
 * hotpath.c - the cost of one traced call.
 *
 * The same source is built into several executables (see CMakeLists.txt):
 *   bench_hotpath_none    no -finstrument-functions: the call alone
 *   bench_hotpath_empty   -finstrument-functions, glibc's empty hooks
 *   bench_hotpath_floor   -finstrument-functions + bench/floor.c (rdtsc+store)
 *   bench_hotpath_ktrace  -finstrument-functions + libktrace
 *
 * Usage: bench_hotpath_<variant> [threads [total_calls [nfuncs]]]
 *
 * Each thread runs a loop calling 16 distinct tiny functions (a chain through
 * their return values, so nothing runs ahead), first a warm-up (threads
 * registered, function ids cached, buffers faulted in), then, after a
 * barrier, the timed part.  With nfuncs (1..4096) the loop instead sweeps
 * that many distinct functions through a table of pointers: a program whose
 * hot set is larger than ktrace's per-thread cache of function ids (512
 * entries) or than the 12-bit event space (2016 compact ids).  One line is
 * printed:
 *
 *   variant=.. threads=N calls=C cpu_ns_per_call=.. wall_ns_per_call=..
 *
 * cpu_ns_per_call is the sum of the threads' CPU time (user + system, so
 * rseq aborts, migrations and page faults count) over the calls: the cost
 * of one call whatever the number of threads sharing a core.
 * wall_ns_per_call is the elapsed time over the calls (a throughput: with
 * more threads than cores it is about cpu / ncores).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

#ifndef BENCH_VARIANT
#define BENCH_VARIANT "unknown"
#endif
#ifdef BENCH_WITH_KTRACE
#include "ktrace.h"
#include "snapinfo.h"
#endif

#define NFN 16

/* noipa: the compiler must call each function and cannot see through it
 * (no inlining, cloning or constant propagation) in every variant. */
#define LEAF(i)                                                                \
	BENCH_NOIPA uint64_t leaf##i(uint64_t x);                  \
	BENCH_NOIPA uint64_t leaf##i(uint64_t x)                   \
	{                                                                      \
		return x * 0x9E3779B97F4A7C15ull + i;                          \
	}
LEAF(0) LEAF(1) LEAF(2) LEAF(3) LEAF(4) LEAF(5) LEAF(6) LEAF(7)
LEAF(8) LEAF(9) LEAF(10) LEAF(11) LEAF(12) LEAF(13) LEAF(14) LEAF(15)

/* NFN calls per round. */
BENCH_NOIPA uint64_t work(uint64_t rounds, uint64_t x);
BENCH_NOIPA uint64_t work(uint64_t rounds, uint64_t x)
{
	for (uint64_t r = 0; r < rounds; r++) {
		x = leaf0(x); x = leaf1(x); x = leaf2(x); x = leaf3(x);
		x = leaf4(x); x = leaf5(x); x = leaf6(x); x = leaf7(x);
		x = leaf8(x); x = leaf9(x); x = leaf10(x); x = leaf11(x);
		x = leaf12(x); x = leaf13(x); x = leaf14(x); x = leaf15(x);
	}
	return x;
}

/* 4096 more functions g000..gfff for the nfuncs sweep; __COUNTER__ makes
 * every body different so identical-code folding cannot merge them. */
#define GDEF(name)                                                             \
	BENCH_NOIPA uint64_t name(uint64_t x);                     \
	BENCH_NOIPA uint64_t name(uint64_t x)                      \
	{                                                                      \
		return x * 0x9E3779B97F4A7C15ull + __COUNTER__;                \
	}
#define GX1(p, M) M(p##0) M(p##1) M(p##2) M(p##3) M(p##4) M(p##5) M(p##6) M(p##7) \
	M(p##8) M(p##9) M(p##a) M(p##b) M(p##c) M(p##d) M(p##e) M(p##f)
#define GD1(p) GX1(p, GDEF)
#define GD2(p) GD1(p##0) GD1(p##1) GD1(p##2) GD1(p##3) GD1(p##4) GD1(p##5) GD1(p##6) \
	GD1(p##7) GD1(p##8) GD1(p##9) GD1(p##a) GD1(p##b) GD1(p##c) GD1(p##d) GD1(p##e) GD1(p##f)
GD2(g0) GD2(g1) GD2(g2) GD2(g3) GD2(g4) GD2(g5) GD2(g6) GD2(g7)
GD2(g8) GD2(g9) GD2(ga) GD2(gb) GD2(gc) GD2(gd) GD2(ge) GD2(gf)

#define GREF(name) name,
#define GT1(p) GX1(p, GREF)
#define GT2(p) GT1(p##0) GT1(p##1) GT1(p##2) GT1(p##3) GT1(p##4) GT1(p##5) GT1(p##6) \
	GT1(p##7) GT1(p##8) GT1(p##9) GT1(p##a) GT1(p##b) GT1(p##c) GT1(p##d) GT1(p##e) GT1(p##f)
#define NMANY 4096
static uint64_t (*const many[NMANY])(uint64_t) = {
	GT2(g0) GT2(g1) GT2(g2) GT2(g3) GT2(g4) GT2(g5) GT2(g6) GT2(g7)
	GT2(g8) GT2(g9) GT2(ga) GT2(gb) GT2(gc) GT2(gd) GT2(ge) GT2(gf)
};

/* nfuncs calls per round, each to a different function. */
BENCH_NOIPA uint64_t sweep(uint64_t rounds, uint64_t nfuncs, uint64_t x);
BENCH_NOIPA uint64_t sweep(uint64_t rounds, uint64_t nfuncs, uint64_t x)
{
	for (uint64_t r = 0; r < rounds; r++)
		for (uint64_t i = 0; i < nfuncs; i++)
			x = many[i](x);
	return x;
}

static uint64_t nfuncs; /* 0: the 16-function loop */

static BENCH_NOINSTR uint64_t run(uint64_t calls, uint64_t x)
{
	return nfuncs ? sweep(calls / nfuncs, nfuncs, x) : work(calls / NFN, x);
}

struct worker {
	pthread_t th;
	uint64_t calls;
	uint64_t cpu_ns;
	uint64_t seed;
	uint64_t sink;
};

static pthread_barrier_t start_barrier;

static BENCH_NOINSTR void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t x = w->seed, c0;

	x = run(320000, x); /* warm-up */
	/* BENCH_WARMUP_MS: keep warming that long (bench/budget.sh: the
	 * window budget mutes the leaves within its first decisions). */
	if (getenv("BENCH_WARMUP_MS")) {
		uint64_t until = bench_now_ns() + strtoull(getenv("BENCH_WARMUP_MS"), NULL, 10) * 1000000;
		while (bench_now_ns() < until)
			x = run(100000, x);
	}
	pthread_barrier_wait(&start_barrier);
	c0 = bench_thread_cpu_ns();
	x = run(w->calls, x);
	w->cpu_ns = bench_thread_cpu_ns() - c0;
	w->sink = x;
	return NULL;
}

BENCH_NOINSTR int main(int argc, char **argv)
{
	uint64_t nthreads = bench_arg(argc, argv, 1, 1);
	uint64_t total = bench_arg(argc, argv, 2, 16000000);
	uint64_t per, calls, cpu = 0, sink = 0, t0, t1;
	struct worker *w = calloc(nthreads, sizeof(*w));

	nfuncs = argc > 3 ? bench_arg(argc, argv, 3, 0) : 0;
	if (nfuncs > NMANY) {
		fprintf(stderr, "nfuncs is at most %d\n", NMANY);
		return 2;
	}
	per = nfuncs ? total / nthreads / nfuncs * nfuncs : total / nthreads / NFN * NFN;
	if (w == NULL || per == 0)
		return 2;
	calls = per * nthreads;
	pthread_barrier_init(&start_barrier, NULL, (unsigned)nthreads + 1);
	for (uint64_t i = 0; i < nthreads; i++) {
		w[i].calls = per;
		w[i].seed = i + 1;
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0)
			return 2;
	}
	pthread_barrier_wait(&start_barrier);
	t0 = bench_now_ns();
	for (uint64_t i = 0; i < nthreads; i++)
		pthread_join(w[i].th, NULL);
	t1 = bench_now_ns();
	for (uint64_t i = 0; i < nthreads; i++) {
		cpu += w[i].cpu_ns;
		sink ^= w[i].sink;
	}
	printf("variant=%s threads=%llu nfuncs=%llu calls=%llu cpu_ns_per_call=%.3f wall_ns_per_call=%.3f"
	       " checksum=%llx",
	       BENCH_VARIANT, (unsigned long long)nthreads,
	       (unsigned long long)(nfuncs ? nfuncs : NFN), (unsigned long long)calls,
	       (double)cpu / (double)calls, (double)(t1 - t0) / (double)calls,
	       (unsigned long long)sink);
#ifdef BENCH_WITH_KTRACE
	/* BENCH_MODE=1: take a snapshot and say which append path ktrace used
	 * (rseq or the locked fallback), e.g. under valgrind. */
	if (getenv("BENCH_MODE") && *getenv("BENCH_MODE") == '1') {
		char path[4096];
		int r = ktrace_snapshot("bench mode probe");

		if (r == 0 && ktrace_last_snapshot(path, sizeof(path)) > 0) {
			printf(" ktrace_mode=%s", bench_snapshot_mode(path));
			remove(path);
		} else {
			printf(" ktrace_mode=unknown(%s)", ktrace_strerror(r));
		}
	}
#endif
	printf("\n");
	free(w);
	return 0;
}
