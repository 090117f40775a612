/*
 * test_decoder_golden.c - tests/fixtures/golden-v1.ktrace is a version-1
 * snapshot built by snapbuild_scenario_golden(); this test decodes it and
 * compares the summary, stats, explain and text outputs with
 * tests/fixtures/golden-v1.summary.txt, so that any change to the format
 * (a reader that no longer accepts old files) or to the outputs is seen.
 *
 * After an intended change, regenerate both files and review the diff:
 *     KTRACE_REGEN_GOLDEN=1 ./test_decoder_golden
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder.h"
#include "snapbuild.h"

#define FIXTURE KTRACE_TEST_SOURCE_DIR "/fixtures/golden-v1.ktrace"
#define EXPECTED KTRACE_TEST_SOURCE_DIR "/fixtures/golden-v1.summary.txt"

static int regen(void)
{
	const char *e = getenv("KTRACE_REGEN_GOLDEN");
	return e && *e && strcmp(e, "0") != 0;
}

static void test_golden_fixture_is_current(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	uint8_t *buf, *fix;
	size_t len, flen;

	(void)state;
	snapbuild_scenario_golden(sb);
	snapbuild_finish(sb, &buf, &len);
	snapbuild_free(sb);
	if (regen())
		assert_int_equal(snapbuild_write_file(FIXTURE, buf, len), 0);
	fix = snapbuild_read_file(FIXTURE, &flen);
	if (!fix)
		fail_msg("%s missing: run with KTRACE_REGEN_GOLDEN=1", FIXTURE);
	/* The builder still writes the same bytes: the v1 layout is unchanged. */
	assert_int_equal(flen, len);
	assert_memory_equal(fix, buf, len);
	free(fix);
	free(buf);
}

static void test_golden_decode(void **state)
{
	struct kd_dec_opts o = { .no_symbols = 1 };
	struct kd_out_opts oo = { .limit = 60 };
	struct kd_dec_error err;
	struct kd_dec *d;
	uint8_t *fix, *want;
	size_t flen, wlen, n = 0;
	char *got = NULL;
	FILE *f;

	(void)state;
	fix = snapbuild_read_file(FIXTURE, &flen);
	assert_non_null(fix);
	if (kd_dec_open_buffer(fix, flen, "golden-v1.ktrace", &o, &d, &err) != 0)
		fail_msg("golden fixture no longer decodes: %s", err.msg);
	f = open_memstream(&got, &n);
	assert_non_null(f);
	kd_out_summary(f, d);
	kd_out_stats(f, d, &oo);
	kd_out_explain(f, d, &oo);
	kd_out_text(f, d, &oo);
	fclose(f);
	if (regen()) {
		f = fopen(EXPECTED, "w");
		assert_non_null(f);
		fwrite(got, 1, n, f);
		fclose(f);
	}
	want = snapbuild_read_file(EXPECTED, &wlen);
	if (!want)
		fail_msg("%s missing: run with KTRACE_REGEN_GOLDEN=1", EXPECTED);
	if (wlen != n || memcmp(want, got, n) != 0) {
		f = fopen(KTRACE_TEST_BINARY_DIR "/golden-v1.actual.txt", "w");
		if (f) {
			fwrite(got, 1, n, f);
			fclose(f);
		}
		fail_msg("decoded output differs from %s; actual output in %s "
		         "(diff them; KTRACE_REGEN_GOLDEN=1 accepts it)", EXPECTED,
		         KTRACE_TEST_BINARY_DIR "/golden-v1.actual.txt");
	}
	free(want);
	free(got);
	kd_dec_free(d);
	free(fix);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_fixture_is_current),
		cmocka_unit_test(test_golden_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
