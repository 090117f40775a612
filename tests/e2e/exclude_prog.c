/*
 * exclude_prog.c - a traced program for `ktrace-decode --format exclude`
 * (issue 7's two-step way), used by test_e2e_exclude.c, which compiles it
 * itself: once with -finstrument-functions, then again with the flags the
 * decoder printed.
 *
 *   load MS   for MS ms: hot_leaf, hot_leaf2 and step make almost every
 *             call; mid_leaf ~60 000 times a second; slow_op (200 us) and
 *             step_long (2 ms) now and then; warm a few times.  Then
 *             ktrace_snapshot("exclude") and "snapshot <rc>".
 *   verify    every function (hot_leaf_unused too) called 100 times, the
 *             slow ones 3 times; then the snapshot.
 *
 * Entries GCC would match: "hot_leaf" also takes hot_leaf2 and
 * hot_leaf_unused (short, or never called in the load); "step" would take
 * step_long, whose calls are long, so step must stay instrumented.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ktrace.h"

static volatile unsigned long sink;

__attribute__((no_instrument_function)) static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000 + t.tv_nsec;
}

__attribute__((no_instrument_function)) static void spin_us(int us)
{
	long long end = now_ns() + (long long)us * 1000;
	while (now_ns() < end)
		sink++;
}

__attribute__((noinline)) void hot_leaf(void) { sink++; }
__attribute__((noinline)) void hot_leaf2(void) { sink += 2; }
__attribute__((noinline)) void hot_leaf_unused(void) { sink += 3; }
__attribute__((noinline)) void step(void) { sink += 4; }
__attribute__((noinline)) void mid_leaf(void) { sink += 5; }
__attribute__((noinline)) void warm(void) { sink += 6; }
__attribute__((noinline)) void slow_op(void) { spin_us(200); }
__attribute__((noinline)) void step_long(void) { spin_us(2000); }

static void load(int ms)
{
	long long start = now_ns(), end = start + (long long)ms * 1000000, t, next_mid = start;
	long long next_slow = start;
	unsigned long i = 0;

	warm();
	while ((t = now_ns()) < end) {
		for (int k = 0; k < 64; k++) {
			hot_leaf();
			hot_leaf2();
			step();
		}
		/* mid_leaf: one call per ~16 us */
		for (; next_mid < t; next_mid += 16667)
			mid_leaf();
		if (t >= next_slow) {
			slow_op();
			if (++i % 4 == 0)
				step_long();
			next_slow = t + 5000000;
		}
	}
	warm();
}

static void verify(void)
{
	for (int i = 0; i < 100; i++) {
		hot_leaf();
		hot_leaf2();
		hot_leaf_unused();
		step();
		mid_leaf();
		warm();
	}
	for (int i = 0; i < 3; i++) {
		slow_op();
		step_long();
	}
}

int main(int argc, char **argv)
{
	int rc;

	if (argc == 3 && strcmp(argv[1], "load") == 0)
		load(atoi(argv[2]));
	else if (argc == 2 && strcmp(argv[1], "verify") == 0)
		verify();
	else {
		fprintf(stderr, "usage: exclude_prog load MS | verify\n");
		return 2;
	}
	rc = ktrace_snapshot("exclude");
	printf("snapshot %d\n", rc);
	return rc != 0;
}
