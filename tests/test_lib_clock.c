/*
 * test_lib_clock.c - the event clock, its frequency and the wall-clock
 * anchors (lib/clock.c), white box.  ctest runs it twice: with the default
 * clock (the invariant TSC here) and with KTRACE_CLOCK=monotonic (the
 * fallback: CLOCK_MONOTONIC ns, locked appends, tsc_hz = 1e9).
 *
 * Hazard 8: anchors and frequency live outside the ring and every snapshot
 * carries them; DESIGN "Time": anchors at least every 100 ms.
 */
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
#include "kunit.h"

static int want_monotonic(void)
{
	const char *s = getenv("KTRACE_CLOCK");
	return s && strcmp(s, "monotonic") == 0;
}

static int setup(void **state)
{
	(void)state;
	return ktrace_enabled() ? 0 : -1;
}

static uint64_t hz_cached(void)
{
	uint64_t hz;
	int64_t end = kt_now_ms() + 3000;
	/* The writer thread publishes its first estimate at start. */
	while ((hz = atomic_load(&ktrace__g.hz_cached)) == 0 && kt_now_ms() < end)
		kt_sleep_ms(5);
	return hz;
}

static double rel(double a, double b)
{
	double d = a > b ? a - b : b - a;
	return d / (b > 0 ? b : 1);
}

static void test_clock_source_and_shift(void **state)
{
	struct kt_globals *g = &ktrace__g;

	(void)state;
	if (want_monotonic()) {
		assert_int_equal(g->clock_source, KTRACE_CLOCK_MONOTONIC);
		/* rseq appends need the TSC (rdtsc in the critical section). */
		assert_int_equal(g->use_rseq, 0);
	} else {
#if defined(__aarch64__)
		/* The virtual counter, at cntfrq_el0 ticks per second, with the
		 * largest shift that keeps a tick at most 100 ns. */
		uint64_t f;
		__asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(f));
		assert_int_equal(g->clock_source, KTRACE_CLOCK_CNTVCT);
		assert_true(g->tsc_shift <= 8);
		assert_true((1e9 * (double)(1u << g->tsc_shift)) / (double)f <= 100.0);
		assert_true(g->tsc_shift == 8 ||
		            (1e9 * (double)(2u << g->tsc_shift)) / (double)f > 100.0);
		assert_int_equal(hz_cached(), f);
#else
		assert_true(g->clock_source == KTRACE_CLOCK_TSC ||
		            g->clock_source == KTRACE_CLOCK_MONOTONIC);
#endif
	}
	if (g->clock_source != KTRACE_CLOCK_CNTVCT)
		assert_int_equal(g->tsc_shift, g->clock_source == KTRACE_CLOCK_TSC ? 8 : 6);
	assert_int_equal(g->forward_max, (uint64_t)KTRACE_TS_FORWARD_MAX << g->tsc_shift);
	assert_true(g->start_tsc > 0 && g->start_tsc <= ktrace__now());
}

static void test_clock_hz_close_to_measurement(void **state)
{
	uint64_t hz = hz_cached(), c0, c1;
	int64_t m0, m1;

	(void)state;
	assert_true(hz != 0);
	if (ktrace__g.clock_source == KTRACE_CLOCK_MONOTONIC) {
		assert_int_equal(hz, 1000000000ull);
	} else {
		/* TSC: 0.1-10 GHz; aarch64's counter: 1 MHz-10 GHz. */
		assert_true(hz >= (ktrace__g.clock_source == KTRACE_CLOCK_CNTVCT ? 1000000ull
		                                                                 : 100000000ull) &&
		            hz <= 10000000000ull);
	}
	m0 = kt_now_ns();
	c0 = ktrace__now();
	kt_sleep_ms(200);
	c1 = ktrace__now();
	m1 = kt_now_ns();
	double meas = (double)(c1 - c0) * 1e9 / (double)(m1 - m0);
	print_message("tsc_hz %llu, measured %.0f\n", (unsigned long long)hz, meas);
	/* Within 1 %: the two estimates share no code. */
	assert_true(rel((double)hz, meas) < 0.01);
}

/* The first estimate (the writer's, at its start) is measured from a pair
 * taken at init: no sleep when that pair is 250 us old or more (the
 * writer's first decision waited 250 us for it), a sleep for the rest
 * when it is younger; within 1 % either way. */
static void test_clock_quick_hz_from_inits_pair(void **state)
{
	int64_t slept, m0, m1;
	uint64_t c0, c1, old_pair, fresh;
	double meas;

	(void)state;
	if (ktrace__g.clock_source != KTRACE_CLOCK_TSC)
		skip();
	m0 = kt_now_ns();
	c0 = ktrace__now();
	old_pair = ktrace__clock_test_measure_hz(0, &slept);
	assert_int_equal(slept, 0);   /* init was long ago */
	fresh = ktrace__clock_test_measure_hz(1, &slept);
	print_message("from init's pair %llu, from a fresh one %llu (slept %lld ns)\n",
	              (unsigned long long)old_pair, (unsigned long long)fresh, (long long)slept);
	assert_true(slept >= 200 * 1000 && slept < 100 * 1000 * 1000);
	kt_sleep_ms(200);
	c1 = ktrace__now();
	m1 = kt_now_ns();
	meas = (double)(c1 - c0) * 1e9 / (double)(m1 - m0);
	assert_true(rel((double)old_pair, meas) < 0.01);
	assert_true(rel((double)fresh, meas) < 0.01);
}

static void test_clock_now_never_goes_back_on_one_cpu(void **state)
{
	uint64_t prev, now;

	(void)state;
	assert_int_equal(kunit_pin(0), 0);
	prev = ktrace__now();
	for (int i = 0; i < 200000; i++) {
		now = ktrace__now();
		assert_true(now >= prev);
		prev = now;
	}
	kunit_unpin();
}

static void test_clock_monotonic_fallback_is_clock_monotonic(void **state)
{
	(void)state;
	if (ktrace__g.clock_source != KTRACE_CLOCK_MONOTONIC)
		skip();
	int64_t a = kt_now_ns();
	uint64_t c = ktrace__now();
	int64_t b = kt_now_ns();
	assert_true((int64_t)c >= a && (int64_t)c <= b);
}

/* The snapshot file's UTC stamp (ktrace__utc_stamp, written without
 * gmtime_r's malloc) against gmtime_r: the epoch, both sides of it, leap
 * days (2000 is a leap year, 1900 and 2100 are not), the ends of years,
 * and a spread of times from 1600 to 2400. */
static void check_stamp(int64_t t)
{
	char got[32], want[32];
	time_t tt = (time_t)t;
	struct tm tm;

	assert_non_null(gmtime_r(&tt, &tm));
	strftime(want, sizeof(want), "%Y%m%dT%H%M%SZ", &tm);
	ktrace__utc_stamp(t, got, sizeof(got));
	if (strcmp(got, want) != 0)
		fail_msg("t=%lld: %s, gmtime_r says %s", (long long)t, got, want);
}

static void test_clock_utc_stamp(void **state)
{
	static const int64_t at[] = {
		0, -1, 1, 86399, 86400, -86400, -86401,
		951782400, 951868799, 951868800,      /* 2000-02-29, its last second, 03-01 */
		4107542399, 4107542400,               /* 2100-02-28 23:59:59, 2100-03-01 */
		-2203977600, -2203891201,             /* 1900-02-28, its last second */
		1798761599, 1798761600,               /* 2026-12-31 23:59:59, 2027-01-01 */
		-11676096000, 13569465599,            /* 1600-01-01, 2399-12-31 23:59:59 */
	};
	uint64_t x = 88172645463325252ull;

	(void)state;
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		check_stamp(at[i]);
	for (int i = 0; i < 200000; i++)   /* 1600..2400 */
		check_stamp(-11676096000ll + (int64_t)(kt_xorshift(&x) % 25245561600ull));
}

/* Anchors reach the snapshot file: ordered, dense, consistent with the
 * frequency; INFO describes the clock. */
static void test_clock_anchors_in_snapshot(void **state)
{
	char path[4352];
	struct kt_file f;
	uint32_t n;
	const struct ktrace_anchor_rec *a;
	const struct ktrace_info_rec *info;
	uint64_t hz = hz_cached();

	(void)state;
	kt_sleep_ms(350); /* a few 100 ms anchor periods */
	assert_int_equal(ktrace_snapshot("clock-test"), 0);
	assert_true(ktrace_last_snapshot(path, sizeof(path)) > 0);
	if (kt_file_load(path, &f) != 0)
		fail_msg("%s: %s", path, f.why);
	info = kt_file_info(&f);
	assert_non_null(info);
	assert_string_equal(info->reason, "clock-test");
	assert_int_equal(info->clock_source, (uint32_t)ktrace__g.clock_source);
	assert_int_equal(info->tsc_shift, ktrace__g.tsc_shift);
	assert_int_equal(info->pid, (uint32_t)getpid());
	assert_int_equal(!!(info->flags & KTRACE_INFO_RSEQ), !!ktrace__g.use_rseq);
	assert_true(rel((double)info->tsc_hz, (double)hz) < 0.01);

	a = kt_file_section(&f, KTRACE_SEC_ANCHORS, &n, NULL);
	assert_non_null(a);
	assert_true(n >= 4);
	assert_true(info->start_tsc <= a[0].tsc);
	int64_t max_gap = 0;
	for (uint32_t i = 1; i < n; i++) {
		assert_true(a[i].tsc > a[i - 1].tsc);
		assert_true(a[i].monotonic_ns > a[i - 1].monotonic_ns);
		assert_true(a[i].realtime_ns >= a[i - 1].realtime_ns);
		if (a[i].monotonic_ns - a[i - 1].monotonic_ns > max_gap)
			max_gap = a[i].monotonic_ns - a[i - 1].monotonic_ns;
	}
	/* "At least every 100 ms": generous bound for a loaded machine. */
	assert_true(max_gap < 1000000000ll);
	/* The counter advances at tsc_hz between anchors. */
	double dt = (double)(a[n - 1].tsc - a[0].tsc) / (double)info->tsc_hz * 1e9;
	double dm = (double)(a[n - 1].monotonic_ns - a[0].monotonic_ns);
	double dr = (double)(a[n - 1].realtime_ns - a[0].realtime_ns);
	assert_true(rel(dt, dm) < 0.01);
	assert_true(rel(dr, dm) < 0.01);
	/* The snapshot's wall time is now-ish. */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	int64_t now = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
	assert_true(now - info->snapshot_realtime_ns < 10ll * 1000000000);
	assert_true(now >= info->snapshot_realtime_ns);
	unlink(path);
	kt_file_free(&f);
}

int main(int argc, char **argv)
{
	static const char *const env[] = {"KTRACE_BUFFER_MB=1", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock_source_and_shift),
		cmocka_unit_test(test_clock_hz_close_to_measurement),
		cmocka_unit_test(test_clock_quick_hz_from_inits_pair),
		cmocka_unit_test(test_clock_now_never_goes_back_on_one_cpu),
		cmocka_unit_test(test_clock_monotonic_fallback_is_clock_monotonic),
		cmocka_unit_test(test_clock_anchors_in_snapshot),
		cmocka_unit_test(test_clock_utc_stamp),
	};
	int r;

	(void)argc;
	kunit_reexec(argv, env);
	r = cmocka_run_group_tests_name("clock", tests, setup, NULL);
	kunit_cleanup();
	return r;
}
