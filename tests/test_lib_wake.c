/*
 * test_lib_wake.c - the writer's futex word (lib/wake.h): a post is never
 * lost, whether the sleeper is awake (no system call is made then) or
 * asleep in FUTEX_WAIT.
 *
 * The sleeper here waits 30 s per sleep, so a lost post shows as a round
 * that takes seconds instead of microseconds: each round has 10 s.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "wake.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ROUNDS 3000
#else
#define ROUNDS 30000
#endif
#define ROUND_LIMIT_NS 10000000000LL

static const struct timespec long_sleep = {30, 0};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct pingpong {
	struct kt_wake w;
	_Atomic uint32_t asked, served;
	_Atomic int stop;
	_Atomic uint64_t sleeps;
};

static void pause_a_little(uint64_t *x, uint32_t max)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	for (volatile uint32_t k = 0; k < (uint32_t)(*x % max); k++)
		;
}

/* The writer's loop, reduced: load seq, look at what was asked, serve it,
 * else do some work (a post may land meanwhile) and sleep. */
static void *sleeper(void *arg)
{
	struct pingpong *p = arg;
	uint64_t x = 0x2545F4914F6CDD1Dull;

	for (;;) {
		uint32_t seq = kt_wake_seq(&p->w);
		uint32_t a = kt_load(&p->asked, relaxed);

		if (kt_load(&p->stop, relaxed))
			break;
		if (a != kt_load(&p->served, relaxed)) {
			kt_store(&p->served, a, release);
			continue;
		}
		pause_a_little(&x, 2048);
		kt_add(&p->sleeps, 1, relaxed);
		kt_wake_wait(&p->w, seq, &long_sleep);
	}
	return NULL;
}

static void test_wake_no_post_lost(void **state)
{
	static struct pingpong p;
	uint64_t saw_sleeping = 0, saw_awake = 0, x = 88172645463325252ull;
	pthread_t t;

	(void)state;
	memset(&p, 0, sizeof(p));
	assert_int_equal(pthread_create(&t, NULL, sleeper, &p), 0);
	for (uint32_t i = 1; i <= ROUNDS; i++) {
		int64_t t0;

		/* A varying pause (none in half the rounds): the post lands
		 * while the sleeper is asleep, about to sleep, or still
		 * working after it loaded seq. */
		if (i & 1)
			pause_a_little(&x, 4096);
		if (kt_load(&p.w.sleeping, relaxed))
			saw_sleeping++;
		else
			saw_awake++;
		kt_store(&p.asked, i, relaxed);
		kt_wake_post(&p.w);
		t0 = now_ns();
		while (kt_load(&p.served, acquire) != i) {
			if (now_ns() - t0 > ROUND_LIMIT_NS)
				fail_msg("round %u: the post was lost (the sleeper still "
				         "sleeps %lld s later)", i, (long long)(ROUND_LIMIT_NS / 1000000000));
			sched_yield();
		}
	}
	kt_store(&p.stop, 1, relaxed);
	kt_wake_post(&p.w);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* both paths ran: posts to a sleeper (FUTEX_WAKE) and to an awake one */
	print_message("%u rounds: sleeper slept %llu times; posts saw it asleep %llu, awake %llu\n",
	              ROUNDS, (unsigned long long)p.sleeps, (unsigned long long)saw_sleeping,
	              (unsigned long long)saw_awake);
	assert_true(saw_sleeping > 0);
	assert_true(saw_awake > 0);
}

/* A post between the sleeper's load and its wait: the wait returns at once. */
static void test_wake_post_before_wait(void **state)
{
	struct kt_wake w;
	uint32_t seq;
	int64_t t0;

	(void)state;
	memset(&w, 0, sizeof(w));
	seq = kt_wake_seq(&w);
	kt_wake_post(&w);
	t0 = now_ns();
	kt_wake_wait(&w, seq, &long_sleep);
	assert_true(now_ns() - t0 < ROUND_LIMIT_NS);
	assert_int_equal(kt_load(&w.sleeping, relaxed), 0);
}

static struct kt_wake one;
static _Atomic int woke;

static void *sleep_once(void *arg)
{
	(void)arg;
	kt_wake_wait(&one, kt_wake_seq(&one), &long_sleep);
	kt_store(&woke, 1, release);
	return NULL;
}

/* A sleeper well inside FUTEX_WAIT is woken by a post. */
static void test_wake_wakes_a_sleeper(void **state)
{
	pthread_t t;
	int64_t t0;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, sleep_once, NULL), 0);
	t0 = now_ns();
	while (!kt_load(&one.sleeping, seq_cst)) {
		if (now_ns() - t0 > ROUND_LIMIT_NS)
			fail_msg("the sleeper never said it sleeps");
		sched_yield();
	}
	usleep(20000);   /* into FUTEX_WAIT */
	assert_int_equal(kt_load(&woke, acquire), 0);
	kt_wake_post(&one);
	t0 = now_ns();
	while (!kt_load(&woke, acquire)) {
		if (now_ns() - t0 > ROUND_LIMIT_NS)
			fail_msg("the sleeper was not woken by the post");
		sched_yield();
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(kt_load(&one.sleeping, relaxed), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wake_post_before_wait),
		cmocka_unit_test(test_wake_wakes_a_sleeper),
		cmocka_unit_test(test_wake_no_post_lost),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
