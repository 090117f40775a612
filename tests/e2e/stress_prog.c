/*
 * stress_prog.c - the stress test's traced program (test_e2e_stress.c).
 *
 *   e2e_stress DURATION_MS MAX_LIVE API_EVERY_MS SIG_EVERY_MS MAX_SNAPS
 *
 * Worker threads of 16 families are created and exit all the time (at most
 * MAX_LIVE alive, each running 2000-20000 iterations then exiting).  A
 * thread of family i is named "w<i>" and calls only w_i (its start
 * function), g_i and f_i (g_i calls f_i twice; each iteration is g_i then
 * f_i): a call of f_j on a thread of family i, or of any function the
 * program does not have, is a decoding or attribution error.  Meanwhile a
 * "snapper" thread calls ktrace_snapshot() every API_EVERY_MS and a
 * "signaller" thread sends SIGUSR2 to the process every SIG_EVERY_MS (up
 * to MAX_SNAPS each).  The first 16 workers are of distinct families, so
 * no two threads register one function at the same time.  Prints
 * "stats calls=N threads=T api_ok=A api_fail=F signals=S elapsed_ms=E".
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

#define NOINL __attribute__((noinline))

/* Per thread: the functions only need a side effect, not a data race. */
static __thread volatile unsigned long sink;
static atomic_ullong calls_done;
static atomic_int live;
static atomic_int stop_aux;

#define FAMILY(i)                                                              \
	NOINL void f_##i(void) { sink += i; }                                  \
	NOINL void g_##i(void)                                                 \
	{                                                                      \
		f_##i();                                                       \
		f_##i();                                                       \
	}                                                                      \
	NOINL void *w_##i(void *arg)                                           \
	{                                                                      \
		long n = (long)arg;                                            \
		pthread_setname_np(pthread_self(), "w" #i);                    \
		for (long k = 0; k < n; k++) {                                 \
			g_##i();                                               \
			f_##i();                                               \
		}                                                              \
		atomic_fetch_add(&calls_done, (unsigned long long)n * 4 + 1);  \
		atomic_fetch_sub(&live, 1);                                    \
		return NULL;                                                   \
	}

FAMILY(0) FAMILY(1) FAMILY(2) FAMILY(3) FAMILY(4) FAMILY(5) FAMILY(6) FAMILY(7)
FAMILY(8) FAMILY(9) FAMILY(10) FAMILY(11) FAMILY(12) FAMILY(13) FAMILY(14) FAMILY(15)

static void *(*const families[16])(void *) = {
	w_0, w_1, w_2, w_3, w_4, w_5, w_6, w_7, w_8, w_9, w_10, w_11, w_12, w_13, w_14, w_15};

static __attribute__((no_instrument_function)) long long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static __attribute__((no_instrument_function)) void nap_us(long us)
{
	struct timespec d = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&d, NULL);
}

static long api_every, sig_every, max_snaps;
static atomic_int api_ok, api_fail, signals;

NOINL void *snapper(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "snapper");
	for (int i = 0; i < max_snaps && !atomic_load(&stop_aux); i++) {
		if (ktrace_snapshot("stress-api") == 0)
			atomic_fetch_add(&api_ok, 1);
		else
			atomic_fetch_add(&api_fail, 1);
		nap_us(api_every * 1000);
	}
	return NULL;
}

NOINL void *signaller(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "signaller");
	for (int i = 0; i < max_snaps && !atomic_load(&stop_aux); i++) {
		kill(getpid(), SIGUSR2);
		atomic_fetch_add(&signals, 1);
		nap_us(sig_every * 1000);
	}
	return NULL;
}

NOINL int spawn_one(int fam, long iters)
{
	pthread_t th;
	pthread_attr_t at;
	int r;

	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	atomic_fetch_add(&live, 1);
	r = pthread_create(&th, &at, families[fam], (void *)iters);
	if (r != 0)
		atomic_fetch_sub(&live, 1);
	pthread_attr_destroy(&at);
	return r == 0;
}

int main(int argc, char **argv)
{
	long dur = argc > 1 ? atol(argv[1]) : 3000;
	int max_live = argc > 2 ? atoi(argv[2]) : 24;
	unsigned seed = 12345;
	pthread_t sn, sg;
	int threads = 0;
	long long t0, t1;

	api_every = argc > 3 ? atol(argv[3]) : 20;
	sig_every = argc > 4 ? atol(argv[4]) : 15;
	max_snaps = argc > 5 ? atol(argv[5]) : 60;
	setvbuf(stdout, NULL, _IOLBF, 0);
	t0 = now_ms();
	for (int f = 0; f < 16 && f < max_live; f++)
		threads += spawn_one(f, 2000 + rand_r(&seed) % 18000);
	pthread_create(&sn, NULL, snapper, NULL);
	pthread_create(&sg, NULL, signaller, NULL);
	while (now_ms() - t0 < dur) {
		if (atomic_load(&live) < max_live)
			threads += spawn_one(threads % 16, 2000 + rand_r(&seed) % 18000);
		else
			nap_us(200);
	}
	atomic_store(&stop_aux, 1);
	while (atomic_load(&live) > 0)
		nap_us(1000);
	pthread_join(sn, NULL);
	pthread_join(sg, NULL);
	t1 = now_ms();
	printf("stats calls=%llu threads=%d api_ok=%d api_fail=%d signals=%d elapsed_ms=%lld\n",
	       (unsigned long long)atomic_load(&calls_done), threads, atomic_load(&api_ok),
	       atomic_load(&api_fail), atomic_load(&signals), t1 - t0);
	/* Let the last signal snapshot finish before exiting. */
	nap_us(200000);
	return 0;
}
