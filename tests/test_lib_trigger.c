/*
 * test_lib_trigger.c - request histograms and trigger settings
 * (lib/trigger.c), white box.  Firing, delay, rate limit and races with
 * signal snapshots are end-to-end tests (test_e2e_trigger.c).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "ktest.h"
#include "kunit.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next_rand(void)
{
	return kt_xorshift(&rng);
}

/* v lies in [top(b-1), top(b)) of its bucket b. */
static void check_value(uint64_t v)
{
	uint32_t b = ktrace__bucket_of(v);

	assert_true(b < 64 * 16);
	if (!(v < ktrace__bucket_top(b)))
		fail_msg("v=%llu in bucket %u whose top is %llu", (unsigned long long)v, b,
		         (unsigned long long)ktrace__bucket_top(b));
	if (b > 0 && !(v >= ktrace__bucket_top(b - 1)))
		fail_msg("v=%llu in bucket %u but below the previous top %llu",
		         (unsigned long long)v, b, (unsigned long long)ktrace__bucket_top(b - 1));
}

static void test_trigger_bucket_contains_value(void **state)
{
	(void)state;
	for (uint64_t v = 0; v < 5000; v++)
		check_value(v);
	for (int e = 4; e < 63; e++) {
		uint64_t p = 1ull << e;
		check_value(p - 1);
		check_value(p);
		check_value(p + 1);
		check_value(p + p / 2);
	}
	for (int i = 0; i < 100000; i++)
		check_value(next_rand() >> (next_rand() % 63 + 1));
	/* Up to 2^63 + a little: request durations in ticks never get near. */
	check_value(1ull << 63);
}

static void test_trigger_bucket_monotonic(void **state)
{
	uint64_t prev_v = 0;
	uint32_t prev_b = 0;

	(void)state;
	for (uint64_t v = 1; v < (1ull << 62); v += v / 7 + 1) {
		uint32_t b = ktrace__bucket_of(v);
		assert_true(b >= prev_b);
		assert_true(v > prev_v);
		prev_b = b;
		prev_v = v;
	}
	for (uint32_t b = 1; b < ktrace__bucket_of(UINT64_MAX); b++)
		assert_true(ktrace__bucket_top(b) > ktrace__bucket_top(b - 1));
}

/* Buckets are at most 1/16 (6.25 %) of their lower bound wide. */
static void test_trigger_bucket_width(void **state)
{
	(void)state;
	for (uint32_t b = 17; b < ktrace__bucket_of(UINT64_MAX); b++) {
		uint64_t lo = ktrace__bucket_top(b - 1), hi = ktrace__bucket_top(b);
		double w = (double)(hi - lo) / (double)lo;
		if (w > 1.0 / 16 + 1e-12)
			fail_msg("bucket %u: [%llu, %llu) is %.2f %% wide", b, (unsigned long long)lo,
			         (unsigned long long)hi, w * 100);
	}
}

/*
 * The last bucket (values from 31 * 2^59 up to UINT64_MAX) has a top of
 * 2^64, which does not fit: bucket_top() must saturate instead of
 * wrapping to 0 (a percentile landing there would read as "no threshold").
 * Known library bug, see /tmp/ktrace-bugs.md: fails until fixed.
 */
static void test_trigger_bucket_top_of_last_bucket(void **state)
{
	(void)state;
	check_value(UINT64_MAX - 1);
	check_value(31ull << 59);
	assert_true(ktrace__bucket_top(ktrace__bucket_of(UINT64_MAX)) == UINT64_MAX);
}

static void test_trigger_set_validates_arguments(void **state)
{
	(void)state;
	assert_int_equal(ktrace_trigger_set(NULL, 10, 0, 0), KTRACE_EINVAL);
	assert_int_equal(ktrace_trigger_set("get", 0, -1, 0), KTRACE_EINVAL);
	assert_int_equal(ktrace_trigger_set("get", 0, 100, 0), KTRACE_EINVAL);
	assert_int_equal(ktrace_trigger_set("get", 0, 100.5, 0), KTRACE_EINVAL);
	assert_int_equal(ktrace_trigger_set("get", 0, NAN, 0), KTRACE_EINVAL);
	assert_int_equal(ktrace_trigger_set("get", 0, INFINITY, 0), KTRACE_EINVAL);
	assert_int_equal(ktrace_trigger_set("get", UINT64_MAX, 0, 0), KTRACE_EINVAL);
	assert_int_equal(ktrace_trigger_set("get", UINT64_MAX / 1000 + 1, 0, 0), KTRACE_EINVAL);
	assert_int_equal(ktrace_trigger_set("get", UINT64_MAX / 1000, 0, 0), 0);
	assert_int_equal(ktrace_trigger_set("get", 0, 0, 0), 0);
	assert_int_equal(ktrace_trigger_set("get", 1000, 99.9, 100), 0);
	assert_int_equal(ktrace_trigger_set("put", 0, 0.0001, 1), 0);
	assert_int_equal(ktrace_trigger_set("put", 0, 99.999, 1000000), 0);
}

/* Kinds beyond the histogram table are refused with ERANGE, not ignored. */
static void test_trigger_set_too_many_kinds(void **state)
{
	static char kinds[300][12];
	int ok = 0, range = 0;

	(void)state;
	for (int i = 0; i < 300; i++) {
		snprintf(kinds[i], sizeof(kinds[i]), "kind%d", i);
		int r = ktrace_trigger_set(kinds[i], 100, 0, 0);
		if (r == 0) {
			assert_int_equal(range, 0); /* no success after the first refusal */
			ok++;
		} else {
			assert_int_equal(r, KTRACE_ERANGE);
			range++;
		}
	}
	assert_true(ok > 0 && range > 0);
	/* Requests of a kind without a histogram still work. */
	ktrace_request_t q = ktrace_request_begin(kinds[299]);
	ktrace_request_end(q);
}

static void test_trigger_strerror(void **state)
{
	(void)state;
	assert_string_equal(ktrace_strerror(0), "success");
	assert_string_equal(ktrace_strerror(KTRACE_ERANGE), "value out of range");
	assert_non_null(strstr(ktrace_strerror(KTRACE_EDISABLED), "KTRACE_ENABLE=0"));
	assert_string_equal(ktrace_strerror(12345), "unknown ktrace error");
}

int main(int argc, char **argv)
{
	static const char *const env[] = {"KTRACE_BUFFER_MB=1", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trigger_bucket_contains_value),
		cmocka_unit_test(test_trigger_bucket_monotonic),
		cmocka_unit_test(test_trigger_bucket_width),
		cmocka_unit_test(test_trigger_bucket_top_of_last_bucket),
		cmocka_unit_test(test_trigger_set_validates_arguments),
		cmocka_unit_test(test_trigger_set_too_many_kinds),
		cmocka_unit_test(test_trigger_strerror),
	};
	int r;

	(void)argc;
	kunit_reexec(argv, env);
	r = cmocka_run_group_tests_name("trigger", tests, NULL, NULL);
	kunit_cleanup();
	return r;
}
