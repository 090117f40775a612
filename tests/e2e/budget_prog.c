/*
 * budget_prog.c - a traced program for the window budget (issue 7), used
 * by test_e2e_budget.c.  Each mode ends with ktrace_snapshot("budget"),
 * prints "snapshot <rc>" and "done".
 *
 *   steady SECONDS  two threads ("load-0", "load-1"): tiny_a and tiny_b
 *                   make almost every call; medium (>= 60 us, busy) about
 *                   2000 times per second per thread; load-0 also calls
 *                   slow (10 ms) once a second.  After every 8th medium
 *                   call a thread marks its cumulative count
 *                   ("medium-0"/"medium-1"); after every slow call,
 *                   "slow".
 *   burst N         N calls of tiny_a at full speed, once, then 400 ms of
 *                   quiet.
 *   long SECONDS    one thread: tiny_a and sometimes_long (which busy-waits
 *                   150 us on every 64th call) equally hot; marks
 *                   "long-calls" with its cumulative count every 256 calls.
 *   rare SECONDS    one thread: tiny_a and rarely_long (which sleeps 1 ms on
 *                   every 512th call) equally hot.
 *   static          static_leaf, static_keep and lib_leaf (a shared
 *                   library's function) 1000 times each, main_fn once.
 *   flood N         N calls of tiny_a at full speed (for KTRACE_FILTER=off).
 *   mapwait SECONDS a thread ("filler") calls tiny_a at full speed for
 *                   0.3 s (the test keeps it recorded with KTRACE_INCLUDE:
 *                   the ring fills).  Then a thread ("mapper") calls
 *                   mapper, which takes the mapping lock for writing (a
 *                   no-op mprotect), once every 20 us while the main thread
 *                   takes a snapshot ("mid": the writer maps and faults in
 *                   its copy of the rings, holding the lock, and mapper
 *                   waits) and 0.2 s after, then at full speed for
 *                   SECONDS.  Nothing else maps or unmaps meanwhile.
 *                   Prints "mid RC ASKED DONE": the snapshot's result and
 *                   the wall clock (ns) before and after it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ktrace.h"

void lib_leaf(void);   /* budget_lib.c */

static __thread volatile unsigned long sink;

/* Not traced: the load's only hot functions are tiny_a and tiny_b. */
__attribute__((no_instrument_function)) static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

__attribute__((no_instrument_function)) static void spin_us(int us)
{
	int64_t end = now_ns() + (int64_t)us * 1000;
	while (now_ns() < end)
		sink++;
}

__attribute__((noinline)) void tiny_a(void) { sink++; }
__attribute__((noinline)) void tiny_b(void) { sink += 2; }
__attribute__((noinline)) void medium(void) { spin_us(62); }
__attribute__((noinline)) void slow(void) { spin_us(10000); }

/* Blocks 1 ms on every 512th call: rarer than 1 in 100, but far longer
 * than any interruption of a short call. */
__attribute__((noinline)) void rarely_long(unsigned long i)
{
	if ((i & 511) == 0) {
		struct timespec d = {0, 1000000};
		nanosleep(&d, NULL);
	}
	sink += 5;
}

__attribute__((noinline)) void sometimes_long(unsigned long i)
{
	if ((i & 63) == 0)
		spin_us(150);
	sink += 3;
}

/* Takes the mapping lock for writing: a PROT_READ page made PROT_READ
 * again (no change, no TLB flush: short, unless the lock is held). */
static void *map_page;
__attribute__((noinline)) void mapper(void)
{
	mprotect(map_page, 4096, PROT_READ);
	sink += 7;
}

__attribute__((noinline)) static void static_leaf(void) { sink += 5; }
__attribute__((noinline)) static void static_keep(void) { sink += 6; }
__attribute__((noinline)) void main_fn(void) { sink += 7; }

static double run_s;

static void *load(void *arg)
{
	int me = (int)(long)arg;
	char name[16];
	const char *mark = me ? "medium-1" : "medium-0";
	int64_t end = now_ns() + (int64_t)(run_s * 1e9), next_slow = now_ns() + 500000000;
	uint64_t mediums = 0, slows = 0;

	snprintf(name, sizeof(name), "load-%d", me);
	pthread_setname_np(pthread_self(), name);
	while (now_ns() < end) {
		/* ~440 us of tiny calls, then one medium call */
		int64_t until = now_ns() + 440000;
		while (now_ns() < until)
			for (int i = 0; i < 64; i++) {
				tiny_a();
				tiny_b();
			}
		medium();
		if (++mediums % 8 == 0)
			ktrace_mark(mark, mediums);
		if (me == 0 && now_ns() >= next_slow) {
			slow();
			ktrace_mark("slow", ++slows);
			next_slow += 1000000000;
		}
	}
	return NULL;
}

static void steady(double s)
{
	pthread_t t[2];

	run_s = s;
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, load, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

static void rare_mode(double s)
{
	int64_t end = now_ns() + (int64_t)(s * 1e9);
	unsigned long n = 0;

	while (now_ns() < end)
		for (int i = 0; i < 256; i++) {
			tiny_a();
			rarely_long(n++);
		}
	ktrace_mark("rare-calls", n);
}

static _Atomic int mid_done;
static double map_s;

static void *filler(void *arg)
{
	int64_t end = now_ns() + 300000000;

	(void)arg;
	while (now_ns() < end)
		for (int i = 0; i < 256; i++)
			tiny_a();
	return NULL;
}

static void *mapping(void *arg)
{
	int64_t end;

	(void)arg;
	/* slow: far below the budget, nothing to mute */
	while (!mid_done) {
		mapper();
		spin_us(20);
	}
	/* slow for 0.2 s more: the budget's next decisions sample the call
	 * that waited */
	end = now_ns() + 200000000;
	while (now_ns() < end) {
		mapper();
		spin_us(20);
	}
	/* fast: far above it; mapper is the only candidate */
	end = now_ns() + (int64_t)(map_s * 1e9);
	while (now_ns() < end)
		for (int i = 0; i < 64; i++)
			mapper();
	return NULL;
}

static void mapwait_mode(double s)
{
	struct timespec d = {0, 50 * 1000 * 1000}, t0, t1;
	pthread_t t;
	int rc;

	map_s = s;
	map_page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map_page == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	pthread_create(&t, NULL, filler, NULL);
	pthread_join(t, NULL);
	pthread_create(&t, NULL, mapping, NULL);
	nanosleep(&d, NULL);   /* mapper's slow calls are being recorded */
	clock_gettime(CLOCK_REALTIME, &t0);
	rc = ktrace_snapshot("mid");
	clock_gettime(CLOCK_REALTIME, &t1);
	mid_done = 1;
	pthread_join(t, NULL);
	/* when the snapshot was asked for and done: ktrace's holds of the
	 * mapping lock for it lie in between (the test) */
	printf("mid %d %lld %lld\n", rc, (long long)t0.tv_sec * 1000000000 + t0.tv_nsec,
	       (long long)t1.tv_sec * 1000000000 + t1.tv_nsec);
}

static void long_mode(double s)
{
	int64_t end = now_ns() + (int64_t)(s * 1e9);
	unsigned long n = 0;

	while (now_ns() < end)
		for (int i = 0; i < 256; i++) {
			tiny_a();
			sometimes_long(n++);
			if (n % 256 == 0) {
				/* a few ticks apart from the calls: the test
				 * orders calls and marks by time */
				spin_us(1);
				ktrace_mark("long-calls", n);
				spin_us(1);
			}
		}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	double arg = argc > 2 ? atof(argv[2]) : 0;
	struct timespec quiet = {0, 400 * 1000 * 1000};

	if (strcmp(mode, "steady") == 0) {
		steady(arg);
	} else if (strcmp(mode, "burst") == 0 || strcmp(mode, "flood") == 0) {
		nanosleep(&quiet, NULL);   /* the writer has measured once */
		for (long i = 0; i < (long)arg; i++)
			tiny_a();
		nanosleep(&quiet, NULL);   /* several decisions */
	} else if (strcmp(mode, "rare") == 0) {
		rare_mode(arg);
	} else if (strcmp(mode, "mapwait") == 0) {
		mapwait_mode(arg);
	} else if (strcmp(mode, "long") == 0) {
		long_mode(arg);
	} else if (strcmp(mode, "static") == 0) {
		main_fn();
		for (int i = 0; i < 1000; i++) {
			static_leaf();
			static_keep();
			lib_leaf();
		}
	} else {
		fprintf(stderr, "usage: %s steady|burst|long|rare|mapwait|static|flood N\n", argv[0]);
		return 2;
	}
	printf("snapshot %d\n", ktrace_snapshot("budget"));
	printf("done\n");
	fflush(stdout);
	return 0;
}
