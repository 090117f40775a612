/*
 * test_e2e_budget.c - the window budget (issue 7 "Proof"), with
 * e2e/budget_prog.c: under a steady call-heavy load the ring holds the
 * window target by muting the two tiny functions, while every medium and
 * slow call between two of the program's marks is there exactly; a burst
 * of a quarter of the ring mutes nothing (and one of half the ring does);
 * a function with long calls is never muted; KTRACE_EXCLUDE/INCLUDE work
 * on static and shared-library functions; KTRACE_FILTER=off records every
 * call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kd_sched.h"
#include "kd_time.h"
#include "kdec.h"
#include "ktest.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_budget"
#define DECODE KTRACE_TEST_BINARY_DIR "/../decoder/ktrace-decode"

struct run {
	struct kt_proc p;
	char *dir;
	char path[4096];
	struct kd_dec *d;
};

/* The program's run, and the last of the nsnap snapshots it wrote. */
static void run_n(struct run *r, const char *mode, const char *arg, const char *const *extra,
                  int nsnap)
{
	char envdir[300];
	const char *env[24];
	size_t n = 0;
	char **paths;
	char *argv[] = {(char *)PROG, (char *)mode, (char *)arg, NULL};

	memset(r, 0, sizeof(*r));
	r->dir = kt_mkdtemp("budget");
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", r->dir);
	env[n++] = envdir;
	env[n++] = "KTRACE_QUIET=1";
	env[n++] = "KTRACE_ENABLE";
	env[n++] = "KTRACE_SIGNAL";
	env[n++] = "KTRACE_WINDOW_S";
	env[n++] = "KTRACE_FILTER";
	env[n++] = "KTRACE_FILTER_MAX_US";
	env[n++] = "KTRACE_EXCLUDE";
	env[n++] = "KTRACE_INCLUDE";
	env[n++] = "KTRACE_BUFFER_MB=2";
	for (size_t i = 0; extra && extra[i]; i++)
		env[n++] = extra[i];
	env[n] = NULL;
	assert_int_equal(kt_spawn(&r->p, argv, env, NULL), 0);
	if (kt_wait(&r->p, 60000) != 0)
		fail_msg("program failed (%#x); stderr:\n%s", r->p.status, r->p.err);
	if (!strstr(r->p.out, "snapshot 0\n"))
		fail_msg("no snapshot; stdout:\n%s\nstderr:\n%s", r->p.out, r->p.err);
	assert_int_equal(kt_list_snapshots(r->dir, &paths), nsnap);
	snprintf(r->path, sizeof(r->path), "%s", paths[nsnap - 1]);   /* named in order */
	kt_free_list(paths);
	r->d = kd_open(r->path);
	assert_non_null(r->d);
	assert_int_equal(r->d->snap.damaged_blocks, 0);
}

static void run(struct run *r, const char *mode, const char *arg, const char *const *extra)
{
	run_n(r, mode, arg, extra, 1);
}

static void finish(struct run *r)
{
	kd_dec_free(r->d);
	kt_proc_free(&r->p);
	kt_rmtree(r->dir);
	free(r->dir);
}

/* The decoder's text output of FILE in the given format. */
static char *decode(const char *fmt, const char *path, char **err)
{
	struct kt_proc p;
	char *argv[] = {(char *)DECODE, (char *)"--format", (char *)fmt, (char *)path, NULL};
	char *out;

	assert_int_equal(kt_run(argv, NULL, &p, 60000), 0);
	out = strdup(p.out);
	if (err)
		*err = strdup(p.err);
	kt_proc_free(&p);
	return out;
}

/* Marks of name in the window, in time order: the first and the last. */
static int mark_range(const struct kd_dec *d, const char *name, const struct kd_dec_mark **a,
                      const struct kd_dec_mark **b)
{
	*a = *b = NULL;
	for (uint32_t i = 0; i < d->nmarks; i++) {
		const struct kd_dec_mark *m = &d->marks[i];
		if (strcmp(kd_name(d, m->name), name) != 0)
			continue;
		if (!*a || m->tick < (*a)->tick)
			*a = m;
		if (!*b || m->tick > (*b)->tick)
			*b = m;
	}
	return *a && *b && *a != *b;
}

/* Complete calls of func on the mark's thread between the two marks. */
static uint64_t calls_between(const struct kd_dec *d, const char *func,
                              const struct kd_dec_mark *a, const struct kd_dec_mark *b)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		if (c->thread == a->thread && kd_is(d, c, func) && c->begin >= a->tick &&
		    c->end <= b->tick && !(c->flags & (KD_CALL_TRUNC_BEGIN | KD_CALL_TRUNC_END)))
			n++;
	}
	return n;
}

/* The proof: 10 s target, 2 MiB ring, two tiny functions make
 * almost every call. */
static void test_e2e_budget_steady_window(void **state)
{
	const char *env[] = {"KTRACE_WINDOW_S=10", NULL};
	const struct kd_dec_mark *a, *b;
	struct run r;
	char *sum;

	(void)state;
	run(&r, "steady", "11", env);
	double window_s = (double)kd_time_ticks_ns(r.d, r.d->window_end - r.d->window_start) / 1e9;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* Under a sanitizer, once more when tiny_a or tiny_b was kept: their
	 * runtimes map and fault shadow memory on their own, and a tiny call
	 * caught waiting for the mapping lock looks blocked, which keeps a
	 * function for good (CI under ASan, beside another test: tiny_a kept
	 * with a 23 us call, the 2 MiB rings held 9 ms).  The plain build
	 * gets one run. */
	if (window_s < 9.5 && (!kd_muted(r.d, "tiny_a") || !kd_muted(r.d, "tiny_b"))) {
		print_message("  window %.3f s with %s kept: once more (sanitizer)\n", window_s,
		              kd_muted(r.d, "tiny_a") ? "tiny_b" : "tiny_a");
		finish(&r);
		run(&r, "steady", "11", env);
		window_s = (double)kd_time_ticks_ns(r.d, r.d->window_end - r.d->window_start) / 1e9;
	}
#endif
	const struct kd_dec *d = r.d;
	if (window_s < 9.5)
		fail_msg("window %.3f s < 9.5 s", window_s);
	assert_true(d->snap.have_budget);
	assert_int_equal(d->snap.budget.window_s, 10);
	assert_true(d->snap.info.flags & KTRACE_INFO_FILTER);
	const struct ktrace_muted_rec *ma = kd_muted(d, "tiny_a"), *mb = kd_muted(d, "tiny_b");
	assert_non_null(ma);
	assert_non_null(mb);
	assert_int_equal(ma->why, KTRACE_MUTE_HOT_SHORT);
	assert_null(kd_muted(d, "medium"));
	assert_null(kd_muted(d, "slow"));
	/* Every medium and slow call between two marks, exactly. */
	for (int t = 0; t < 2; t++) {
		const char *name = t ? "medium-1" : "medium-0";
		if (!mark_range(d, name, &a, &b))
			fail_msg("fewer than two %s marks in the window", name);
		assert_true(b->value - a->value >= 1000);
		assert_int_equal(calls_between(d, "medium", a, b), b->value - a->value);
	}
	assert_true(mark_range(d, "slow", &a, &b));
	assert_true(b->value - a->value >= 8);
	assert_int_equal(calls_between(d, "slow", a, b), b->value - a->value);
	/* The summary names them, with the window's figures. */
	sum = decode("summary", r.path, NULL);
	assert_non_null(strstr(sum, "window target 10 s"));
	assert_non_null(strstr(sum, "window held:"));
	assert_non_null(strstr(sum, "rate per core"));
	const char *m = strstr(sum, "muted:");
	assert_non_null(m);
	assert_non_null(strstr(m, "tiny_a"));
	assert_non_null(strstr(m, "tiny_b"));
	free(sum);
	/* Sinks with self time say so. */
	sum = decode("stats", r.path, NULL);
	assert_non_null(strstr(sum, "self time includes muted calls:"));
	free(sum);
	/* The exclusion flags name the muted functions, unless a call of
	 * theirs in the window was very long (a loaded VM can stall a 10 ns
	 * call for 0.5 ms): then the notes say why not. */
	char *err = NULL;
	sum = decode("exclude", r.path, &err);
	assert_non_null(strstr(sum, "-finstrument-functions-exclude-function-list="));
	assert_true(strstr(sum, "tiny_a") || strstr(err, "tiny_a: muted by the budget, but"));
	assert_true(strstr(sum, "tiny_b") || strstr(err, "tiny_b: muted by the budget, but"));
	assert_null(strstr(sum, "medium"));
	free(sum);
	free(err);
	finish(&r);
}

/* A burst of a quarter of the ring mutes nothing; more than the ring does. */
static void test_e2e_budget_burst(void **state)
{
	struct run r;

	(void)state;
	/* 2 MiB = 524288 words; a quarter, less block headers: 60000 calls */
	run(&r, "burst", "60000", NULL);
	assert_true(r.d->snap.have_budget);
	assert_int_equal(r.d->snap.nmuted, 0);
	assert_int_equal(kd_count(r.d, KD_NONE, "tiny_a"), 60000);
	finish(&r);

	run(&r, "burst", "300000", NULL);   /* more than the ring, even split over two cores */
	assert_true(r.d->snap.have_budget);
	assert_non_null(kd_muted(r.d, "tiny_a"));
	finish(&r);
}

/* sometimes_long is as hot as tiny_a but every 64th call takes 150 us. */
static void test_e2e_budget_long_call_ineligible(void **state)
{
	const char *env[] = {"KTRACE_WINDOW_S=10", NULL};
	const struct kd_dec_mark *a, *b;
	struct run r;

	(void)state;
	run(&r, "long", "2", env);
	/* Under pressure (it writes far above the budget): tiny_a is muted,
	 * or, if preemptions made it look long too, the filter says it ran
	 * out of candidates.  Never sometimes_long, the hottest. */
	assert_true(kd_muted(r.d, "tiny_a") != NULL || (r.d->snap.budget.flags & KTRACE_BUDGET_SHORT));
	assert_null(kd_muted(r.d, "sometimes_long"));
	assert_true(mark_range(r.d, "long-calls", &a, &b));
	assert_int_equal(calls_between(r.d, "sometimes_long", a, b), b->value - a->value);
	finish(&r);
}

/* One call far longer than KTRACE_FILTER_MAX_US (a 1 ms sleep) keeps a
 * function from being muted even when such calls are rarer than 1 in 100
 * (the ratio that tolerates interruptions of short calls). */
static void test_e2e_budget_rare_long_call_ineligible(void **state)
{
	const char *env[] = {"KTRACE_WINDOW_S=10", NULL};
	struct run r;

	(void)state;
	run(&r, "rare", "2", env);
	assert_true(kd_muted(r.d, "tiny_a") != NULL || (r.d->snap.budget.flags & KTRACE_BUDGET_SHORT));
	assert_null(kd_muted(r.d, "rarely_long"));
	assert_true(kd_count(r.d, KD_NONE, "rarely_long") > 0);
	finish(&r);
}

/* The ns func's calls in d were blocked (the decoder's off-cpu split). */
static uint64_t blocked_ns(const struct kd_dec *d, const char *func)
{
	uint64_t ticks = 0, off[2];

	for (uint32_t i = 0; i < d->ncalls; i++)
		if (kd_is(d, &d->calls[i], func)) {
			kd_sched_offcpu_in(d, d->calls[i].thread, d->calls[i].begin, d->calls[i].end, off);
			ticks += off[KD_OFF_BLOCKED];
		}
	return kd_time_ticks_ns(d, ticks);
}

/* Whether the window budget was short of words at the end on some core
 * (its bucket empty): what mutes a function that runs above it.
 * budget_prog is a default-mode build: no CPU budget (KTRACE_CPU_PCT 0),
 * the bucket is the only pressure. */
static int pressed(const struct kd_dec *d)
{
	if (!d->snap.have_budget)
		return 1;   /* cannot tell: as if it was */
	for (uint32_t c = 0; c < d->snap.budget.ncores; c++)
		if (d->snap.budget_cores[c].tokens <= 0)
			return 1;
	return 0;
}

/* Whether one of d's mapper calls blocked 50 us or more (its thread off the
 * cpu, not preempted) and lies wholly outside [from, to] (wall ns): its
 * begin into *at, its blocked ns into *blk. */
static int blocked_outside(const struct kd_dec *d, int64_t from, int64_t to, int64_t *at,
                           uint64_t *blk)
{
	uint64_t off[2];

	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		int64_t b, e;

		if (!kd_is(d, c, "mapper"))
			continue;
		kd_sched_offcpu_in(d, c->thread, c->begin, c->end, off);
		if (kd_time_ticks_ns(d, off[KD_OFF_BLOCKED]) < 50000)
			continue;
		b = kd_time_wall_ns(d, c->begin);
		e = kd_time_wall_ns(d, c->end);
		if (e < from || b > to) {
			*at = b;
			*blk = kd_time_ticks_ns(d, off[KD_OFF_BLOCKED]);
			return 1;
		}
	}
	return 0;
}

/* A run the test cannot judge: its files freed, the program waited for. */
static void skip_run(struct run *r, struct kd_dec *mid)
{
	kd_dec_free(mid);
	finish(r);
	skip();
}

/*
 * A wait for ktrace's own hold of the mapping lock is not the function's:
 * mapper takes the lock (an mprotect) while the writer maps and faults in
 * a snapshot's copy of a full 32 MiB ring ("mid"), and so blocks for
 * milliseconds; then it runs far above the budget for 4 s, the only
 * candidate.
 * Counted as its own block, that wait kept it from being muted for good
 * (7 runs in 8 before the fix; Lua's luaH_new, the same way, stayed
 * recorded all run).  Skipped where the wait did not happen (no
 * MADV_POPULATE_WRITE: the copy is faulted in outside the lock).
 */
static void test_e2e_budget_own_wait_not_blocking(void **state)
{
	/* KTRACE_FILTER_MAX_US=50: mapper's mprotect took 5 us or more in
	 * 1.0-1.4 % of all its calls on the CI's VM, with the library before
	 * the snapshot's touch (521cd44) as after it (the 1 in 100 rule then
	 * kept it, 1 run in 2 at times);
	 * with 50 us it was muted in every run.  The wait this test is about
	 * lasts milliseconds. */
	const char *env[] = {"KTRACE_BUFFER_MB=32", "KTRACE_INCLUDE=tiny_a", "KTRACE_WINDOW_S=10",
	                     "KTRACE_FILTER_MAX_US=50", NULL};
	char line[256], **paths;
	uint64_t waited = 0;
	long long asked = 0, done = 0;
	struct run r;

	(void)state;
#if defined(__SANITIZE_THREAD__)
	/* Under TSan the premise fails: mapper's mprotect waited 2-10 ms for
	 * the mapping lock (kernel stack: do_mprotect_pkey, state D) with no
	 * interval of ktrace's within 37 ms, in 1 run of 4 beside another
	 * test (ctest -j2 on 2 cores).  TSan's runtime maps and faults its
	 * shadow and sync memory on its own (the writer's 32 MiB copy is
	 * shadowed too); a holder preempted makes such a wait, the program's
	 * as far as the budget can know.  The plain build, 10 runs under the
	 * same load: no wait over 1 ms outside ktrace's intervals.  The plain
	 * and ASan builds run this test. */
	skip();
#endif
	run_n(&r, "mapwait", "4", env, 2);
	if (sscanf(r.p.out, "mid 0 %lld %lld", &asked, &done) != 2)
		fail_msg("the mid snapshot failed; stdout:\n%s", r.p.out);
	kd_sched_status(r.d, line, sizeof(line));
	if (strncmp(line, "scheduling: recorded", 20) != 0) {
		finish(&r);
		skip();   /* no switch records: no call counts as blocked */
	}
	/* the wait: in the mid snapshot, or (its call still open at that
	 * snapshot's end) in the last, if mapper's calls did not fill the
	 * ring since */
	assert_int_equal(kt_list_snapshots(r.dir, &paths), 2);
	struct kd_dec *mid = kd_open(paths[0]);
	kt_free_list(paths);
	assert_non_null(mid);
	waited = blocked_ns(mid, "mapper");
	if (blocked_ns(r.d, "mapper") > waited)
		waited = blocked_ns(r.d, "mapper");
	if (waited < 50000) {   /* KTRACE_FILTER_MAX_US */
		fprintf(stderr, "mapper did not wait for the snapshot's copy (%llu ns blocked): "
		                "skipped\n", (unsigned long long)waited);
		skip_run(&r, mid);
	}
	assert_null(kd_muted(r.d, "tiny_a"));   /* included */
	if (kd_muted(r.d, "mapper") == NULL && !pressed(r.d)) {
		/* Nothing to mute for: the window's bucket never ran dry
		 * (words left at the end > 0 on every core).  Beside two
		 * busy loops mapper runs at half speed: with 2 s at full
		 * speed it ended unmuted in 5 runs of 40 while eligible
		 * (1.15 M calls, 0.15 % of them over 50 us, none blocked
		 * outside ktrace's holds: an instrumented copy), the bucket
		 * dry too late for a decision; with 4 s, in none of 40. */
		fprintf(stderr, "the budget was never short (mapper fitted the window): skipped\n");
		skip_run(&r, mid);
	}
	if (kd_muted(r.d, "mapper") == NULL) {
		/* A block away from the snapshot is not one of the waits this
		 * test is about: on a loaded machine mapper's mprotect waited
		 * ~4 ms (a tick) with no hold of ktrace's within 20 ms before
		 * it, in 1 of 20-60 runs beside two busy loops, and the budget
		 * keeps a function that blocked for good (filter.c,
		 * candidate()).  The snapshot does not say which block kept
		 * mapper, and a wait on another hold of ktrace's (noted too)
		 * looks the same here: such a run is skipped, not judged.
		 * Asked: the wall clock before the snapshot was asked for;
		 * done: when it returned, plus OWN_CAP_NS (20 ms) and a
		 * margin: a wait that began in a hold counts as preempted up
		 * to 20 ms after it. */
		int64_t at = 0;
		uint64_t blk = 0;

		if (blocked_outside(mid, asked, done + 25000000, &at, &blk) ||
		    blocked_outside(r.d, asked, done + 25000000, &at, &blk)) {
			fprintf(stderr, "mapper blocked %llu ns %.3f ms %s the snapshot, not for "
			        "ktrace: skipped\n", (unsigned long long)blk,
			        (double)llabs(at < asked ? asked - at : at - done) / 1e6,
			        at < asked ? "before" : "after");
			skip_run(&r, mid);
		}
		kd_dec_free(mid);
		fail_msg("mapper was not muted: its %llu ns wait for the writer's snapshot counted "
		         "as blocking", (unsigned long long)waited);
	}
	kd_dec_free(mid);
	finish(&r);
}

/* Globs on static functions and a shared library's; INCLUDE wins. */
static void test_e2e_budget_exclude_include(void **state)
{
	const char *env[] = {"KTRACE_FILTER=off", "KTRACE_EXCLUDE=static_*,lib_le?f",
	                     "KTRACE_INCLUDE=static_keep", NULL};
	struct run r;

	(void)state;
	run(&r, "static", "0", env);
	assert_int_equal(kd_count(r.d, KD_NONE, "static_leaf"), 0);
	assert_int_equal(kd_count(r.d, KD_NONE, "lib_leaf"), 0);
	assert_int_equal(kd_count(r.d, KD_NONE, "static_keep"), 1000);
	assert_int_equal(kd_count(r.d, KD_NONE, "main_fn"), 1);
	assert_non_null(kd_muted(r.d, "static_leaf"));
	assert_int_equal(kd_muted(r.d, "static_leaf")->why, KTRACE_MUTE_EXCLUDE);
	assert_non_null(kd_muted(r.d, "lib_leaf"));
	assert_null(kd_muted(r.d, "static_keep"));
	finish(&r);

	/* Without the settings, all of them are recorded. */
	run(&r, "static", "0", NULL);
	assert_int_equal(kd_count(r.d, KD_NONE, "static_leaf"), 1000);
	assert_int_equal(kd_count(r.d, KD_NONE, "lib_leaf"), 1000);
	finish(&r);
}

/* off: a flood far above the budget is recorded call for call, and the
 * snapshot says which ring would hold the target. */
static void test_e2e_budget_off_records_all(void **state)
{
	const char *env[] = {"KTRACE_FILTER=off", "KTRACE_WINDOW_S=3600", NULL};
	struct run r;

	(void)state;
	run(&r, "flood", "200000", env);
	assert_true(r.d->snap.have_budget);
	assert_false(r.d->snap.budget.flags & KTRACE_BUDGET_FILTER_ON);
	assert_false(r.d->snap.info.flags & KTRACE_INFO_FILTER);
	assert_int_equal(r.d->snap.nmuted, 0);
	assert_int_equal(kd_count(r.d, KD_NONE, "tiny_a"), 200000);
	finish(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_budget_steady_window),
		cmocka_unit_test(test_e2e_budget_burst),
		cmocka_unit_test(test_e2e_budget_long_call_ineligible),
		cmocka_unit_test(test_e2e_budget_rare_long_call_ineligible),
		cmocka_unit_test(test_e2e_budget_own_wait_not_blocking),
		cmocka_unit_test(test_e2e_budget_exclude_include),
		cmocka_unit_test(test_e2e_budget_off_records_all),
	};
	/* KTRACE_TEST_FILTER="*own_wait*": run the matching tests only */
	if (getenv("KTRACE_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KTRACE_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
