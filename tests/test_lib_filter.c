/*
 * test_lib_filter.c - white-box tests of the window budget's muting
 * (lib/filter.c, lib/record.c): nesting stays exact when a function is
 * muted while calls of it are open (entered before the mute, exited
 * after), under recursion, with two functions muted at different
 * times, one inside the other, and muted while a skipped frame is open
 * (mute levels, filter.c); adopting a mute set keeps the function cache.
 * The hooks are called directly with
 * made-up addresses from a thread pinned to cpu 0; the core's ring is read
 * back with the snapshot's reader and walked with ktest's record walker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "ktest.h"
#include "kunit.h"

void __cyg_profile_func_enter(void *fn, void *site);
void __cyg_profile_func_exit(void *fn, void *site);

#define BW KTRACE_BLOCK_WORDS
/* Made-up code addresses: the hooks never dereference them. */
#define FAKE(n) ((uintptr_t)0x20000000u + (uintptr_t)(n) * 64u)

static void E(uintptr_t a) { __cyg_profile_func_enter((void *)a, NULL); }
static void X(uintptr_t a) { __cyg_profile_func_exit((void *)a, NULL); }

/* This thread's function events on cpu 0 from counter 'from' on, as
 * entry events (exit | 0x800), into ev[]; returns how many. */
static size_t events_since(uint32_t from, uint32_t *ev, size_t max)
{
	size_t cap = (size_t)ktrace__g.nblocks * (sizeof(struct ktrace_block_rec) + BW * 4), n = 0;
	unsigned char *buf = malloc(cap), *p;
	uint32_t nb = 0;
	uint64_t race = 0;
	struct kt_walk w;
	size_t bytes;

	assert_non_null(buf);
	bytes = ktrace__ring_copy(0, buf, &nb, &race);
	memset(&w, 0, sizeof(w));
	w.tsc_shift = ktrace__g.tsc_shift;
	/* the few hundred events of a test fit in the newest blocks, which
	 * come in counter order in a 1 MiB ring that has not wrapped */
	p = buf;
	for (uint32_t i = 0; i < nb; i++) {
		const struct ktrace_block_rec *r = (const void *)p;
		p += sizeof(*r) + (size_t)r->nwords * 4;
		if (r->start + r->nwords <= from)
			continue;
		if (kt_walk_block(&w, (const uint32_t *)(r + 1), r->nwords, r->start) != 0)
			fail_msg("%s", w.why);
	}
	assert_true(bytes <= cap);
	for (size_t i = 0; i < w.n; i++) {
		const struct kt_rec *r = &w.recs[i];
		if (r->counter < from || r->slot != kt_self()->slot)
			continue;
		if (KTRACE_EV_IS_ENTER(r->ev) || KTRACE_EV_IS_EXIT(r->ev)) {
			assert_true(n < max);
			ev[n++] = r->ev;
		}
	}
	kt_walk_free(&w);
	free(buf);
	return n;
}

static uint32_t pos0(void)
{
	return KT_STATE_POS(atomic_load(&ktrace__g.cores[0].state));
}

static uint32_t en(uintptr_t a) { return ktrace__func_event(a); }
static uint32_t ex(uintptr_t a) { return ktrace__func_event(a) | KTRACE_EV_EXIT_FLAG; }

static void expect(const uint32_t *got, size_t n, const uint32_t *want, size_t m)
{
	for (size_t i = 0; i < n && i < m; i++)
		if (got[i] != want[i])
			fail_msg("event %zu: got 0x%x, want 0x%x", i, got[i], want[i]);
	assert_int_equal(n, m);
}

/* Start from a clean slate: registered, one event recorded, no muted
 * frame open, every address given an id. */
static uint32_t start(const uintptr_t *fns, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ktrace__func_event(fns[i]);
	E(FAKE(0));
	X(FAKE(0));
	assert_int_equal(kt_self()->ment, kt_self()->mexit);
	return pos0();
}

/* f entered, muted, called recursively while muted, then its first call
 * exits: the recorded exit closes the recorded entry; the muted calls
 * leave nothing. */
static void test_lib_filter_entered_before_mute(void **state)
{
	uintptr_t F = FAKE(1), H = FAKE(2);
	uintptr_t fns[] = {F, H};
	uint32_t got[64], from = start(fns, 2);
	size_t n;

	(void)state;
	E(F);
	ktrace__filter_mute_now(F);
	E(H);           /* a cache miss: the slow path adopts the new mute set */
	X(H);
	E(F);           /* muted: skipped */
	E(F);           /* recursion, skipped */
	X(F);
	X(F);
	X(F);           /* entered before the mute: recorded */
	E(F);           /* muted from now on */
	X(F);
	n = events_since(from, got, 64);
	const uint32_t want[] = {en(F), en(H), ex(H), ex(F)};
	expect(got, n, want, 4);
	assert_int_equal(kt_self()->ment, kt_self()->mexit);
}

/* A then B entered; B muted (and adopted); inside a skipped B, A is muted
 * too and adopted at once (a mute level: one skipped frame open); A's
 * calls from then on are skipped, the skipped B closes, and both outer
 * calls close with recorded exits. */
static void test_lib_filter_two_mutes_nested(void **state)
{
	uintptr_t A = FAKE(11), B = FAKE(12), H2 = FAKE(13), H3 = FAKE(14), H4 = FAKE(15);
	uintptr_t fns[] = {A, B, H2, H3, H4};
	uint32_t got[64], from = start(fns, 5);
	size_t n;

	(void)state;
	E(A);
	E(B);
	ktrace__filter_mute_now(B);
	E(H2);          /* adopts: B muted in this thread's view */
	X(H2);
	E(B);           /* skipped (a muted frame is open now) */
	ktrace__filter_mute_now(A);
	E(H3);          /* miss: adopts with the skipped frame open */
	assert_int_equal(kt_self()->nmlev, 1);
	E(A);           /* A muted in this thread's view: skipped */
	X(A);
	X(H3);
	X(B);           /* skipped: closes the skipped frame, the level ends */
	assert_int_equal(kt_self()->nmlev, 0);
	E(H4);
	X(H4);
	E(A);           /* skipped */
	X(A);
	X(B);           /* the outer B, entered before its mute: recorded */
	X(A);           /* the outer A: recorded */
	n = events_since(from, got, 64);
	const uint32_t want[] = {en(A), en(B), en(H2), ex(H2), en(H3), ex(H3), en(H4), ex(H4),
	                         ex(B), ex(A)};
	expect(got, n, want, 10);
	assert_int_equal(kt_self()->ment, kt_self()->mexit);
}

/* The case a plain count cannot tell: inside a skipped frame of B, a call
 * of C is recorded, then C is muted and adopted while both are open.  C's
 * recorded call must close with a recorded exit although a skipped frame
 * is open; C's later calls (recursive ones inside it too) are skipped; B's
 * skipped frame then closes, skipped. */
static void test_lib_filter_mute_inside_skipped_frame(void **state)
{
	uintptr_t B = FAKE(21), C = FAKE(22), H1 = FAKE(23), H2 = FAKE(24), H3 = FAKE(25);
	uintptr_t fns[] = {B, C, H1, H2, H3};
	uint32_t got[64], from = start(fns, 5);
	size_t n;

	(void)state;
	ktrace__filter_mute_now(B);
	E(H1);          /* adopts: B muted */
	E(B);           /* skipped */
	E(C);           /* recorded: C not muted yet */
	ktrace__filter_mute_now(C);
	E(H2);          /* adopts with one skipped frame open: a level */
	X(H2);
	E(C);           /* skipped: C muted now (recursion) */
	E(B);           /* skipped */
	X(B);
	X(C);
	X(C);           /* the recorded call: its exit recorded */
	E(H3);
	X(H3);
	E(C);           /* skipped */
	X(C);
	X(B);           /* the skipped B */
	assert_int_equal(kt_self()->nmlev, 0);
	X(H1);
	n = events_since(from, got, 64);
	const uint32_t want[] = {en(H1), en(C), en(H2), ex(H2), ex(C), en(H3), ex(H3), ex(H1)};
	expect(got, n, want, 8);
	assert_int_equal(kt_self()->ment, kt_self()->mexit);
}

/* A new mute set is adopted by setting the cached entries' flags, not by
 * emptying the cache (every function's next call then took the slow path
 * again): G's entry is as it was, F's says muted, and the calls after
 * the adoption are recorded or skipped accordingly. */
static void test_lib_filter_adopt_keeps_cache(void **state)
{
	uintptr_t F = FAKE(31), G = FAKE(32), H = FAKE(33);
	uintptr_t fns[] = {F, G, H};
	uint32_t got[64], from = start(fns, 3);
	uint64_t *cf = &kt_self()->fcache[KT_FC_SLOT(F)];
	uint64_t *cg = &kt_self()->fcache[KT_FC_SLOT(G)];
	size_t n;

	(void)state;
	E(F);
	X(F);
	E(G);
	X(G);
	assert_int_equal(*cf, ((uint64_t)F << 16) | en(F));
	assert_int_equal(*cg, ((uint64_t)G << 16) | en(G));
	ktrace__filter_mute_now(F);
	E(H);           /* a cache miss: the slow path adopts the new mute set */
	X(H);
	assert_int_equal(*cg, ((uint64_t)G << 16) | en(G));
	assert_int_equal(*cf, ((uint64_t)F << 16) | KT_FC_MUTED | en(F));
	E(F);           /* muted: skipped */
	X(F);
	E(G);
	X(G);
	n = events_since(from, got, 64);
	const uint32_t want[] = {en(F), ex(F), en(G), ex(G), en(H), ex(H), en(G), ex(G)};
	expect(got, n, want, 8);
	assert_int_equal(kt_self()->ment, kt_self()->mexit);
}

static int setup(void **state)
{
	(void)state;
	if (!ktrace_enabled() || ktrace__g.nblocks != 256)
		return -1;
	return kunit_pin(0);
}

static int teardown(void **state)
{
	(void)state;
	return kunit_unpin();
}

int main(int argc, char **argv)
{
	/* A 1 MiB ring; the automatic filter off, so only the test mutes. */
	const char *const env[] = {"KTRACE_BUFFER_MB=1", "KTRACE_FILTER=off", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lib_filter_entered_before_mute),
		cmocka_unit_test(test_lib_filter_two_mutes_nested),
		cmocka_unit_test(test_lib_filter_mute_inside_skipped_frame),
		cmocka_unit_test(test_lib_filter_adopt_keeps_cache),
	};
	int r;

	(void)argc;
	kunit_reexec(argv, env);
	r = cmocka_run_group_tests(tests, setup, teardown);
	kunit_cleanup();
	return r;
}
