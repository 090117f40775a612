/*
 * test_decoder_exclude.c - `--format exclude` (out-exclude.c) on synthetic
 * snapshots whose functions are this test binary's own (MODULES from
 * /proc/self/maps, names from its symbol table): what is listed, what
 * never is, what the notes say GCC's substring matching also takes, the
 * offer of hot functions with a rare very long call, and one flag for
 * several files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "decoder.h"
#include "snapbuild.h"

#define FLAG "-finstrument-functions-exclude-function-list="

/* The traced functions (never called: only their symbols matter). */
__attribute__((noinline, used)) int xt_hot(int x) { return x + 1; }
__attribute__((noinline, used)) int xt_hot_twin(int x) { return x + 2; }
__attribute__((noinline, used)) int xt_sl(int x) { return x + 3; }
__attribute__((noinline, used)) int xt_slow(int x) { return x + 4; }
__attribute__((noinline, used)) int xt_rare(int x) { return x + 5; }
__attribute__((noinline, used)) int xt_phase2(int x) { return x + 6; }

enum { F_HOT, F_SL, F_SLOW, F_RARE, F_PHASE2 };

/* n calls of func id, each ns long, from *t on (1 tick = 1 ns). */
static void calls(struct snapbuild *sb, uint32_t id, int n, uint64_t ns, uint64_t *t)
{
	for (int i = 0; i < n; i++) {
		snapbuild_enter(sb, 0, 1, *t, id);
		snapbuild_exit(sb, 0, 1, *t + ns, id);
		*t += ns + 20;
	}
}

/* phase 1: xt_hot, xt_sl hot and short, xt_slow 100 us a call, xt_rare
 * hot with one call of 1 ms; phase 2: xt_phase2 only; phase 3: xt_sl the
 * hottest, xt_hot a quarter of it, xt_slow, and a budget (from the ring's
 * size) that the two together exceed twice but xt_hot alone does not. */
static struct kd_dec *snap(int phase)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec_opts o = {0};
	struct kd_dec_error err;
	struct kd_dec *d;
	uint64_t t = 1000;

	assert_int_equal(snapbuild_self_modules(sb), 0);
	/* no budget table: the budget is ring_bytes_per_core / 4 / 30 */
	snapbuild_info(sb)->ring_bytes_per_core = phase == 3 ? 480ull << 20 : 8u << 20;
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_func(sb, F_HOT, (uint64_t)(uintptr_t)&xt_hot);
	snapbuild_func(sb, F_SL, (uint64_t)(uintptr_t)&xt_sl);
	snapbuild_func(sb, F_SLOW, (uint64_t)(uintptr_t)&xt_slow);
	snapbuild_func(sb, F_RARE, (uint64_t)(uintptr_t)&xt_rare);
	snapbuild_func(sb, F_PHASE2, (uint64_t)(uintptr_t)&xt_phase2);
	if (phase == 1) {
		calls(sb, F_HOT, 3000, 50, &t);
		calls(sb, F_SL, 2000, 50, &t);
		calls(sb, F_SLOW, 20, 100000, &t);
		calls(sb, F_RARE, 1000, 50, &t);
		calls(sb, F_RARE, 1, 1000000, &t);
	} else if (phase == 2) {
		calls(sb, F_PHASE2, 2500, 50, &t);
	} else {
		calls(sb, F_SL, 4000, 50, &t);
		calls(sb, F_HOT, 1000, 50, &t);
		calls(sb, F_SLOW, 20, 100000, &t);
	}
	d = snapbuild_decode(sb, &o, &err);
	if (!d)
		fail_msg("decode: %s", err.msg);
	return d;
}

/* The flag line (stdout) and the notes (stderr) of --format exclude. */
static void exclude(struct kd_dec *const *decs, int n, char **out, char **notes)
{
	size_t len = 0;
	FILE *f = open_memstream(out, &len), *e = tmpfile();
	int saved = dup(2);
	long sz;

	assert_non_null(f);
	assert_non_null(e);
	fflush(stderr);
	assert_true(dup2(fileno(e), 2) >= 0);
	kd_out_exclude(f, decs, n);
	fflush(stderr);
	assert_true(dup2(saved, 2) >= 0);
	close(saved);
	fclose(f);
	sz = ftell(e);
	*notes = calloc(1, (size_t)sz + 1);
	rewind(e);
	assert_int_equal(fread(*notes, 1, (size_t)sz, e), (size_t)sz);
	fclose(e);
}

/* Does GCC's rule take name: does it contain an entry of the flag? */
static int takes(const char *flag, const char *name)
{
	char *l = strdup(flag + strlen(FLAG)), *save = NULL;
	int hit = 0;

	l[strcspn(l, "\n")] = 0;
	for (char *e = strtok_r(l, ",", &save); e && !hit; e = strtok_r(NULL, ",", &save))
		hit = strstr(name, e) != NULL;
	free(l);
	return hit;
}

/* --format exclude on one snapshot: a flag line, or the test fails
 * (XT_SHOW=1 prints both). */
static void exclude_one(struct kd_dec *d, char **out, char **notes)
{
	exclude(&d, 1, out, notes);
	if (getenv("XT_SHOW"))
		fprintf(stderr, "%s%s", *out, *notes);
	if (strncmp(*out, FLAG, strlen(FLAG)) != 0)
		fail_msg("stdout: %s\nstderr:\n%s", *out, *notes);
}

static void test_exclude_one_file(void **state)
{
	struct kd_dec *d = snap(1);
	char *out, *notes;

	(void)state;
	exclude_one(d, &out, &notes);
	assert_true(takes(out, "xt_hot"));
	/* long calls: never, nor an entry that would take them along */
	assert_false(takes(out, "xt_slow"));
	assert_false(takes(out, "xt_rare"));
	assert_false(takes(out, "xt_phase2"));
	assert_non_null(strstr(notes, "xt_hot: also excludes xt_hot_twin (not called in this trace)"));
	assert_non_null(strstr(notes, "xt_sl: left out: its entry would also exclude xt_slow, "
	                              "which made 20 of 20 calls of 5 us or more"));
	/* the rare very long call: offered, with the longer flag */
	assert_non_null(strstr(notes, "hot, but each made a rare very long call"));
	const char *fur = strstr(notes, "  to go further: " FLAG);
	assert_non_null(fur);
	assert_true(takes(fur + strlen("  to go further: "), "xt_rare"));
	assert_true(takes(fur + strlen("  to go further: "), "xt_hot"));
	assert_false(takes(fur + strlen("  to go further: "), "xt_slow"));
	free(out);
	free(notes);
	kd_dec_free(d);
}

/* The hottest short function is left out (its entry would take xt_slow):
 * it stays instrumented, so the pick goes on and lists the next one.
 * (It used to count as listed, and the pick stopped before xt_hot.) */
static void test_exclude_left_out_does_not_count(void **state)
{
	struct kd_dec *d = snap(3);
	char *out, *notes;

	(void)state;
	exclude_one(d, &out, &notes);
	assert_true(takes(out, "xt_hot"));
	assert_false(takes(out, "xt_sl"));
	assert_false(takes(out, "xt_slow"));
	assert_non_null(strstr(notes, "xt_sl: left out: its entry would also exclude xt_slow"));
	free(out);
	free(notes);
	kd_dec_free(d);
}

static void test_exclude_files_together(void **state)
{
	struct kd_dec *d[3] = {snap(1), NULL, snap(2)};
	char *out, *notes;

	(void)state;
	exclude(d, 3, &out, &notes);
	assert_non_null(strchr(out, '\n'));
	assert_string_equal(strchr(out, '\n'), "\n"); /* one line */
	assert_true(takes(out, "xt_hot"));
	assert_true(takes(out, "xt_phase2"));
	assert_false(takes(out, "xt_slow"));
	assert_non_null(strstr(notes, "ktrace-decode: 2 files: "));
	free(out);
	free(notes);
	kd_dec_free(d[0]);
	kd_dec_free(d[2]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exclude_one_file),
		cmocka_unit_test(test_exclude_left_out_does_not_count),
		cmocka_unit_test(test_exclude_files_together),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
