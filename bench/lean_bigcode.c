/*
 * lean_bigcode.c - what patching costs a program with a large code
 * segment (bench/lean_bigcode.sh).  Built in the lean mode with PAD_MB MiB
 * of code beside its own (int3s, never run, but read once at the start,
 * as a long-running program has run most of its code: a hypervisor that
 * shadows page tables then holds an entry for each page, which a change
 * of the pages' protection must update), it calls PHASES groups of 4
 * small functions, each group for PHASE_MS, so that the budget mutes a
 * new group in every phase and a batch patches it out; meanwhile a
 * second thread maps, touches and unmaps 64 KiB every 200 us and times
 * each round (an mmap waits for whatever holds the mapping lock).
 * Prints "rounds <n> median <us> p99 <us> max <us>".  A figure, never a
 * test.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef PAD_MB
#define PAD_MB 32
#endif
#define STR2(x) #x
#define STR(x) STR2(x)
__asm__(".pushsection .text.kt_bigpad,\"ax\",@progbits\n"
        ".globl kt_bigpad\n.hidden kt_bigpad\nkt_bigpad:\n.skip " STR(PAD_MB) " * 1048576, 0xcc\n"
        ".popsection");
extern const unsigned char kt_bigpad[];

#define PHASES 16
#define PHASE_MS 100
static volatile uint64_t sink;

#define F(n) __attribute__((noinline)) static uint64_t f##n(uint64_t x) { sink += x; return x * 3 + n; }
#define F8(a) F(a##0) F(a##1) F(a##2) F(a##3) F(a##4) F(a##5) F(a##6) F(a##7)
F8(1) F8(2) F8(3) F8(4) F8(5) F8(6) F8(7) F8(8)
#define R(n) f##n,
#define R8(a) R(a##0) R(a##1) R(a##2) R(a##3) R(a##4) R(a##5) R(a##6) R(a##7)
static uint64_t (*const fns[64])(uint64_t) = {R8(1) R8(2) R8(3) R8(4) R8(5) R8(6) R8(7) R8(8)};

static volatile int stop;
static double lat[100000];
static int nlat;

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void *mapper(void *arg)
{
	(void)arg;
	while (!stop && nlat < 100000) {
		double t0 = now_us();
		char *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			break;
		p[0] = 1;
		munmap(p, 65536);
		lat[nlat++] = now_us() - t0;
		usleep(200);
	}
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	pthread_t t;
	uint64_t x = 1;

	for (size_t i = 0; i < (size_t)PAD_MB << 20; i += 4096)
		x += ((const volatile unsigned char *)kt_bigpad)[i];
	if (pthread_create(&t, NULL, mapper, NULL) != 0)
		return 1;
	for (int p = 0; p < PHASES; p++) {
		double end = now_us() + PHASE_MS * 1000.0;

		while (now_us() < end)
			for (int i = 0; i < 1000; i++)
				x = fns[(p * 4 + i % 4) % 64](x);
	}
	stop = 1;
	pthread_join(t, NULL);
	if (nlat == 0)
		return 1;
	qsort(lat, (size_t)nlat, sizeof(lat[0]), cmp_d);
	printf("rounds %d median %.1f p99 %.1f max %.1f (%llu)\n", nlat, lat[nlat / 2],
	       lat[nlat * 99 / 100], lat[nlat - 1], (unsigned long long)(x & 1));
	return 0;
}
