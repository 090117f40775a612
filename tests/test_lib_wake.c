/*
 * test_lib_wake.c - the writer's futex word (lib/wake.h): a post is never
 * lost, whether the sleeper is awake (no system call is made then) or
 * asleep in FUTEX_WAIT.
 *
 * The sleeper here waits 30 s per sleep, so a lost post shows as a round
 * that takes seconds instead of microseconds: each round has 10 s.
 *
 * A lost wake-up lives in a window nanoseconds wide, which random rounds
 * do not hit (a waker that loaded `sleeping` before its add passed 30 of
 * 30 runs of test_wake_no_post_lost).  So wake.h has three seams, defined
 * here before it is included: one holds the waker between the two steps
 * of a post, one holds the sleeper between the two steps of a wait, and
 * one counts the FUTEX_WAKE calls a post really makes.  The gap tests
 * put the other thread through its whole step inside that window.
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
#include "ktest.h"

struct kt_wake;
static void (*_Atomic post_gap)(struct kt_wake *);
static void (*_Atomic wait_gap)(struct kt_wake *);
static _Atomic uint64_t wake_calls;   /* FUTEX_WAKEs made by kt_wake_post */

static void call_gap(void (*_Atomic *gap)(struct kt_wake *), struct kt_wake *w)
{
	void (*f)(struct kt_wake *) = atomic_load(gap);

	if (f)
		f(w);
}
#define KT_WAKE_POST_GAP(w) call_gap(&post_gap, (w))
#define KT_WAKE_WAIT_GAP(w) call_gap(&wait_gap, (w))
#define KT_WAKE_SYSCALL(w) atomic_fetch_add(&wake_calls, 1)
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
	for (volatile uint32_t k = 0; k < (uint32_t)(kt_xorshift(x) % max); k++)
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
	uint64_t x = 88172645463325252ull, calls0 = atomic_load(&wake_calls), calls;
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
	calls = atomic_load(&wake_calls) - calls0;
	kt_store(&p.stop, 1, relaxed);
	kt_wake_post(&p.w);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* Which branch each post took depends on the timing: under TSan
	 * every post found the sleeper asleep.  The other tests below take
	 * each branch on purpose. */
	print_message("%u rounds: sleeper slept %llu times; posts made %llu FUTEX_WAKEs\n",
	              ROUNDS, (unsigned long long)p.sleeps, (unsigned long long)calls);
}

/* Two threads stepping through one post and one wait, with one of them
 * held in its gap until the other has done its whole step. */
static struct {
	struct kt_wake w;
	uint32_t seq;                /* the sleeper's kt_wake_seq */
	_Atomic int loaded;          /* the sleeper loaded seq */
	_Atomic int go;              /* the sleeper may wait now */
	_Atomic int in_gap;          /* the held thread reached its gap */
	_Atomic int posted;          /* the waker's post returned */
	_Atomic int64_t returned_ns; /* when the sleeper's wait returned; 0: not yet */
} duo;

/* 0 if flag was not set within the limit.  The main thread fails the
 * test then; the other thread just goes on (cmocka's failure must not
 * unwind from it), and the main thread's own limits fail the test. */
static int wait_for(_Atomic int *flag)
{
	int64_t t0 = now_ns();

	while (!atomic_load(flag)) {
		if (now_ns() - t0 > ROUND_LIMIT_NS)
			return 0;
		sched_yield();
	}
	return 1;
}

static void wait_until(_Atomic int *flag, const char *what)
{
	if (!wait_for(flag))
		fail_msg("%s never happened", what);
}

/* The duo sleeper's sleep: long_sleep unless a test says otherwise (the
 * lazy posts' tests; NULL: no limit), and when it began. */
static const struct timespec *duo_sleep = &long_sleep;
static _Atomic int64_t duo_slept_ns;

static void *duo_sleeper(void *arg)
{
	(void)arg;
	duo.seq = kt_wake_seq(&duo.w);
	atomic_store(&duo.loaded, 1);
	(void)wait_for(&duo.go);
	atomic_store(&duo_slept_ns, now_ns());
	kt_wake_wait(&duo.w, duo.seq, duo_sleep);
	atomic_store(&duo.returned_ns, now_ns());
	return NULL;
}

static void duo_reset(void)
{
	memset(&duo, 0, sizeof(duo));
	atomic_store(&wake_calls, 0);
	duo_sleep = &long_sleep;   /* also after a test that failed mid-way */
}

/* Start the duo sleeper on a sleep of ts and let it go to its wait. */
static pthread_t duo_start(const struct timespec *ts)
{
	pthread_t t;

	duo_reset();
	duo_sleep = ts;
	assert_int_equal(pthread_create(&t, NULL, duo_sleeper, NULL), 0);
	wait_until(&duo.loaded, "the sleeper's load of seq");
	atomic_store(&duo.go, 1);
	return t;
}

/* The sleeper is let go and given time to be in FUTEX_WAIT (or back out
 * of it) while the waker is held between its two steps. */
static void hold_waker(struct kt_wake *w)
{
	int64_t t0 = now_ns();

	(void)w;
	atomic_store(&duo.in_gap, 1);
	atomic_store(&duo.go, 1);
	while (!kt_load(&duo.w.sleeping, seq_cst) && !atomic_load(&duo.returned_ns)) {
		if (now_ns() - t0 > ROUND_LIMIT_NS)
			fail_msg("the sleeper never reached its wait");
		sched_yield();
	}
	usleep(50000);   /* into the kernel's FUTEX_WAIT, if it sleeps */
}

static void finish_duo(pthread_t t, int64_t posted_ns)
{
	int64_t t0 = now_ns();

	while (!atomic_load(&duo.returned_ns)) {
		if (now_ns() - t0 > ROUND_LIMIT_NS)
			fail_msg("the post was lost: the sleeper still sleeps %lld s after it",
			         (long long)(ROUND_LIMIT_NS / 1000000000));
		usleep(1000);
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(atomic_load(&duo.returned_ns) - posted_ns < ROUND_LIMIT_NS);
	assert_int_equal(kt_load(&duo.w.sleeping, relaxed), 0);
}

/* The waker is held between its add and its load of `sleeping` while the
 * sleeper stores `sleeping` and calls FUTEX_WAIT with the seq it loaded
 * before.  The add came first, so the kernel's compare fails and the wait
 * returns at once.  A waker that loaded `sleeping` first (and so saw 0)
 * would add after the sleeper went to sleep, and make no system call:
 * the sleeper would sleep 30 s. */
static void sleeper_inside_the_posts_gap(int64_t slack_ns)
{
	pthread_t t;
	int64_t t0;

	duo_reset();
	assert_int_equal(pthread_create(&t, NULL, duo_sleeper, NULL), 0);
	wait_until(&duo.loaded, "the sleeper's load of seq");
	atomic_store(&post_gap, hold_waker);
	t0 = now_ns();
	kt_wake_post_lazy(&duo.w, slack_ns);
	atomic_store(&post_gap, NULL);
	assert_int_equal(atomic_load(&duo.in_gap), 1);
	finish_duo(t, t0);
	/* the sleeper came back out of FUTEX_WAIT on the compare, before the
	 * waker's gap ended: the post had nothing to wake */
	assert_true(atomic_load(&duo.returned_ns) - t0 < 50000000);
}

static void test_wake_sleeper_inside_the_posts_gap(void **state)
{
	(void)state;
	sleeper_inside_the_posts_gap(-1);
}

/* The same with a lazy post whose slack covers the whole sleep: its add
 * still comes before the sleeper's FUTEX_WAIT, which returns at once
 * (the slack only ever spares a FUTEX_WAKE to a sleep already under
 * way). */
static void test_wake_sleeper_inside_a_lazy_posts_gap(void **state)
{
	(void)state;
	sleeper_inside_the_posts_gap(60000000000LL);
}

/* The sleeper is held between its store of `sleeping` and FUTEX_WAIT while
 * the waker posts: the waker sees `sleeping` and makes exactly one
 * FUTEX_WAKE (which finds no one yet), and the wait returns at once on the
 * compare. */
static void hold_sleeper(struct kt_wake *w)
{
	(void)w;
	atomic_store(&duo.in_gap, 1);
	(void)wait_for(&duo.posted);
}

static void test_wake_post_inside_the_waits_gap(void **state)
{
	pthread_t t;
	int64_t t0;

	(void)state;
	atomic_store(&wait_gap, hold_sleeper);
	t = duo_start(&long_sleep);
	wait_until(&duo.in_gap, "the sleeper's gap");
	t0 = now_ns();
	kt_wake_post(&duo.w);
	atomic_store(&duo.posted, 1);
	finish_duo(t, t0);
	atomic_store(&wait_gap, NULL);
	assert_int_equal(atomic_load(&wake_calls), 1);
}

/* Start the duo sleeper on a sleep of ts and return once it is in
 * FUTEX_WAIT (or as good as: 20 ms after it said it sleeps). */
static pthread_t duo_asleep(const struct timespec *ts)
{
	pthread_t t = duo_start(ts);
	int64_t t0 = now_ns();

	while (!kt_load(&duo.w.sleeping, seq_cst)) {
		if (now_ns() - t0 > ROUND_LIMIT_NS)
			fail_msg("the sleeper never said it sleeps");
		sched_yield();
	}
	usleep(20000);
	assert_int_equal(atomic_load(&duo.returned_ns), 0);
	return t;
}

/* Posts to a sleeper that is not waiting make no system call; one post to
 * a sleeper in FUTEX_WAIT makes exactly one. */
static void test_wake_system_calls_only_for_a_sleeper(void **state)
{
	pthread_t t;
	int64_t t0;

	(void)state;
	duo_reset();
	for (int i = 0; i < 100; i++)
		kt_wake_post(&duo.w);
	assert_int_equal(atomic_load(&wake_calls), 0);
	t = duo_asleep(&long_sleep);
	t0 = now_ns();
	kt_wake_post(&duo.w);
	finish_duo(t, t0);
	assert_int_equal(atomic_load(&wake_calls), 1);
}

/* A lazy post to a sleeper whose timed sleep ends within the post's
 * slack makes no system call: the sleeper sleeps to its deadline, and
 * finds seq moved (the request seen at its next look). */
static void test_wake_lazy_post_leaves_a_sleep_that_ends_soon(void **state)
{
	static const struct timespec soon = {0, 400000000};   /* 0.4 s */
	pthread_t t;
	int64_t t0;

	(void)state;
	t = duo_asleep(&soon);
	t0 = now_ns();
	kt_wake_post_lazy(&duo.w, 5000000000LL);   /* may wait 5 s */
	finish_duo(t, t0);
	assert_int_equal(atomic_load(&wake_calls), 0);
	/* slept its whole 0.4 s: not woken by the post (20 ms of the sleep
	 * had passed when it came) */
	assert_true(atomic_load(&duo.returned_ns) - atomic_load(&duo_slept_ns) >= 390000000);
	/* and the request is not lost: a sleeper that loaded seq before the
	 * post does not sleep again on it (the writer's next look) */
	t0 = now_ns();
	kt_wake_wait(&duo.w, duo.seq, &long_sleep);
	assert_true(now_ns() - t0 < ROUND_LIMIT_NS);
}

/* A lazy post to a sleeper whose sleep ends after the slack wakes it at
 * once, as kt_wake_post does; so does one to a sleep with no limit. */
static void test_wake_lazy_post_wakes_a_longer_sleep(void **state)
{
	pthread_t t;
	int64_t t0;

	(void)state;
	t = duo_asleep(&long_sleep);   /* 30 s */
	t0 = now_ns();
	kt_wake_post_lazy(&duo.w, 2000000);   /* may wait 2 ms */
	finish_duo(t, t0);
	assert_int_equal(atomic_load(&wake_calls), 1);
	assert_true(atomic_load(&duo.returned_ns) - t0 < 5000000000LL);

	t = duo_asleep(NULL);
	t0 = now_ns();
	kt_wake_post_lazy(&duo.w, 5000000000LL);
	finish_duo(t, t0);
	assert_int_equal(atomic_load(&wake_calls), 1);
	assert_true(atomic_load(&duo.returned_ns) - t0 < 5000000000LL);
}

/* The sleeper is held between its store of `until` and its FUTEX_WAIT
 * for longer than its sleep: the kernel gets the same end as an absolute
 * deadline, so once let go the wait returns at once.  With a relative
 * timeout it slept its whole 0.3 s again from its late call, past the
 * end a lazy waker had read (that waker made no system call). */
static _Atomic int64_t let_go_ns;

static void hold_sleeper_long(struct kt_wake *w)
{
	(void)w;
	usleep(500000);
	atomic_store(&let_go_ns, now_ns());
}

static void test_wake_deadline_is_absolute(void **state)
{
	static const struct timespec short_sleep = {0, 300000000};   /* 0.3 s */
	pthread_t t;

	(void)state;
	atomic_store(&wait_gap, hold_sleeper_long);
	t = duo_start(&short_sleep);
	assert_int_equal(pthread_join(t, NULL), 0);
	atomic_store(&wait_gap, NULL);
	/* let go 0.5 s into a 0.3 s sleep: back well before another 0.3 s */
	assert_true(atomic_load(&duo.returned_ns) - atomic_load(&let_go_ns) < 150000000);
	assert_int_equal(atomic_load(&wake_calls), 0);
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
		cmocka_unit_test(test_wake_sleeper_inside_the_posts_gap),
		cmocka_unit_test(test_wake_sleeper_inside_a_lazy_posts_gap),
		cmocka_unit_test(test_wake_post_inside_the_waits_gap),
		cmocka_unit_test(test_wake_system_calls_only_for_a_sleeper),
		cmocka_unit_test(test_wake_lazy_post_leaves_a_sleep_that_ends_soon),
		cmocka_unit_test(test_wake_lazy_post_wakes_a_longer_sleep),
		cmocka_unit_test(test_wake_deadline_is_absolute),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
