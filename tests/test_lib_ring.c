/*
 * test_lib_ring.c - the per-core ring (lib/ring.c, lib/record.c), white box.
 *
 * The tests call the real hooks (__cyg_profile_func_enter/exit) with made-up
 * function addresses from threads pinned to known cpus, then read the
 * core's ring back with ktrace__ring_copy() (the snapshot's reader) and
 * walk every block with the independent walker in e2e/ktest.c.  Run with a
 * 1 MiB ring per core (256 blocks) so wrapping is cheap; ctest also runs
 * this executable with KTRACE_RSEQ=0 (the locked fallback path).
 *
 * Hazards (DESIGN.md): 1 timestamp wrap / idle core (TSC records),
 * 3 threads sharing a core (THREAD records, attribution), 4 migration,
 * 5 overwrite (loss counters), 6 snapshot while writing (copy races).
 */
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "ktest.h"
#include "kunit.h"

void __cyg_profile_func_enter(void *fn, void *site);
void __cyg_profile_func_exit(void *fn, void *site);

#define BW KTRACE_BLOCK_WORDS
/* Made-up code addresses: the hooks never dereference them. */
#define FAKE(n) ((uintptr_t)0x10000000u + (uintptr_t)(n) * 64u)

static void call(uintptr_t a)
{
	__cyg_profile_func_enter((void *)a, NULL);
	__cyg_profile_func_exit((void *)a, NULL);
}

static uint32_t pos_of(uint32_t c)
{
	return KT_STATE_POS(atomic_load(&ktrace__g.cores[c].state));
}

static uint32_t ev_of(uintptr_t a)
{
	uint32_t ev = ktrace__func_event(a);
	assert_true(ev >= KTRACE_EV_ENTER_BASE && ev < KTRACE_EV_ENTER_BASE + KTRACE_FUNC_ID_COUNT);
	return ev;
}

struct copy {
	unsigned char *buf;
	size_t bytes;
	uint32_t nblocks;
	uint64_t race;
	/* blocks sorted by S */
	const struct ktrace_block_rec **blk;
};

static int cmp_blk(const void *a, const void *b)
{
	const struct ktrace_block_rec *x = *(const struct ktrace_block_rec *const *)a;
	const struct ktrace_block_rec *y = *(const struct ktrace_block_rec *const *)b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static void copy_core(uint32_t c, struct copy *cp)
{
	size_t cap = (size_t)ktrace__g.nblocks * (sizeof(struct ktrace_block_rec) + BW * 4);
	unsigned char *p;

	memset(cp, 0, sizeof(*cp));
	cp->buf = malloc(cap);
	assert_non_null(cp->buf);
	cp->bytes = ktrace__ring_copy(c, cp->buf, &cp->nblocks, &cp->race);
	assert_true(cp->bytes <= cap);
	cp->blk = calloc(cp->nblocks + 1, sizeof(*cp->blk));
	p = cp->buf;
	for (uint32_t i = 0; i < cp->nblocks; i++) {
		const struct ktrace_block_rec *r = (const void *)p;
		assert_int_equal(r->cpu, c);
		assert_true(r->nwords >= 5 && r->nwords <= BW);
		cp->blk[i] = r;
		p += sizeof(*r) + (size_t)r->nwords * 4;
	}
	assert_ptr_equal(p, cp->buf + cp->bytes);
	qsort(cp->blk, cp->nblocks, sizeof(*cp->blk), cmp_blk);
}

static void free_copy(struct copy *cp)
{
	free(cp->buf);
	free(cp->blk);
}

/* Walk the blocks of the copy that hold counters from 'from' on (0: all),
 * in S order; every one must be well formed. */
static void walk_copy_from(const struct copy *cp, struct kt_walk *w, uint32_t from)
{
	memset(w, 0, sizeof(*w));
	w->tsc_shift = ktrace__g.tsc_shift;
	for (uint32_t i = 0; i < cp->nblocks; i++) {
		const struct ktrace_block_rec *r = cp->blk[i];
		if (from && r->start + r->nwords <= from)
			continue; /* an earlier test's data */
		if (kt_walk_block(w, (const uint32_t *)(r + 1), r->nwords, r->start) != 0)
			fail_msg("%s", w->why);
	}
}

static void walk_copy(const struct copy *cp, struct kt_walk *w)
{
	walk_copy_from(cp, w, 0);
}

/* ---- setup ------------------------------------------------------------------ */

static int setup(void **state)
{
	(void)state;
	if (!ktrace_enabled())
		return -1;
	/* A 1 MiB ring (kunit_reexec) keeps wrapping cheap. */
	if (ktrace__g.nblocks != 256)
		return -1;
	return kunit_pin(0);
}

static int teardown(void **state)
{
	(void)state;
	return kunit_unpin();
}

/* ---- single-thread tests ------------------------------------------------------ */

static void test_ring_blocks_are_well_formed(void **state)
{
	struct copy cp;
	struct kt_walk w;
	uint32_t ev;

	(void)state;
	for (int i = 0; i < 5000; i++)
		call(FAKE(1 + i % 7));
	ev = ev_of(FAKE(1));
	copy_core(0, &cp);
	assert_true(cp.nblocks >= 1);
	assert_int_equal(cp.race, 0);
	walk_copy(&cp, &w);
	/* Nothing but this thread ever wrote on cpu 0 in this process. */
	for (size_t i = 0; i < w.n; i++)
		assert_int_equal(w.recs[i].slot, kt_self()->slot);
	assert_int_equal(w.backward_steps, 0);
	/* The newest record is the last exit. */
	assert_int_equal(w.recs[w.n - 1].ev, (ev + (4999 % 7)) | KTRACE_EV_EXIT_FLAG);
	/* S values: consecutive blocks, the last one ends at pos. */
	for (uint32_t i = 1; i < cp.nblocks; i++)
		assert_int_equal(cp.blk[i]->start, cp.blk[i - 1]->start + BW);
	assert_int_equal(cp.blk[cp.nblocks - 1]->start + cp.blk[cp.nblocks - 1]->nwords, pos_of(0));
	kt_walk_free(&w);
	free_copy(&cp);
}

/* An extended record that does not fit in the block's tail: the tail is
 * PAD words and the record starts the next block (I1: never straddles). */
static void test_ring_record_never_straddles(void **state)
{
	static const char name[] = "ring-pad-test";
	struct copy cp;
	struct kt_walk w;
	uint32_t before, after, target;
	int tries = 0;

	(void)state;
	call(FAKE(20));
	/* Single-word events (one hook at a time, so every position is
	 * reachable) until exactly 2 words are left. */
	while ((pos_of(0) & (BW - 1)) != BW - 2) {
		if (tries & 1)
			__cyg_profile_func_exit((void *)FAKE(20), NULL);
		else
			__cyg_profile_func_enter((void *)FAKE(20), NULL);
		assert_true(++tries < 100000);
	}
	before = pos_of(0);
	ktrace_mark(name, 0x1122334455667788ull); /* 4 words: header, type, lo, hi */
	after = pos_of(0);
	target = (before + BW - 1) & ~(BW - 1);   /* next block's S */
	assert_int_equal(after, target + 5 + 3 + 4); /* BLOCK_START, THREAD, mark */
	copy_core(0, &cp);
	walk_copy(&cp, &w);
	/* The old block ends with 2 PAD words and the next starts with the mark. */
	int found_pad = 0, found_mark = 0;
	for (uint32_t i = 0; i < cp.nblocks; i++) {
		const struct ktrace_block_rec *r = cp.blk[i];
		const uint32_t *wd = (const uint32_t *)(r + 1);
		if (r->start == target - BW) {
			assert_int_equal(r->nwords, BW);
			assert_int_equal(wd[BW - 2], KTRACE_REC(0, KTRACE_EV_PAD));
			assert_int_equal(wd[BW - 1], KTRACE_REC(0, KTRACE_EV_PAD));
			found_pad = 1;
		}
		if (r->start == target) {
			/* BLOCK_START (5 words), THREAD (3: slot, segment), mark. */
			assert_int_equal(KTRACE_REC_EV(wd[5]), 2);
			assert_int_equal(KTRACE_EXT_TYPE(wd[6]), KTRACE_EXT_THREAD);
			assert_int_equal(KTRACE_REC_EV(wd[8]), 3);
			assert_int_equal(KTRACE_EXT_TYPE(wd[9]), KTRACE_EXT_MARK);
			assert_int_equal(wd[10], 0x55667788u);
			assert_int_equal(wd[11], 0x11223344u);
			found_mark = 1;
		}
	}
	assert_true(found_pad && found_mark);
	kt_walk_free(&w);
	free_copy(&cp);
}

/* Wrap the ring three times: the copy is exactly the newest nblocks blocks,
 * in sequence, and OVERWRITTEN_BLOCKS counts every reused block. */
static void test_ring_wrap_overwrite_and_loss_counter(void **state)
{
	struct kt_globals *g = &ktrace__g;
	struct copy cp;
	struct kt_walk w;
	uint32_t ev[3], n = 3 * g->nblocks * BW / 2 + 777;
	uint64_t expect = 0;

	(void)state;
	for (int k = 0; k < 3; k++)
		call(FAKE(30 + k));
	for (int k = 0; k < 3; k++)
		ev[k] = ev_of(FAKE(30 + k));
	for (uint32_t i = 0; i < n; i++)
		call(FAKE(30 + i % 3));
	for (uint32_t c = 0; c < g->ncpus; c++) {
		uint64_t used = atomic_load(&g->cores[c].blocks_used);
		if (used > g->nblocks)
			expect += used - g->nblocks;
	}
	assert_true(expect >= 2 * g->nblocks);
	assert_int_equal(atomic_load(&g->loss[KTRACE_LOSS_OVERWRITTEN_BLOCKS]), expect);

	copy_core(0, &cp);
	assert_int_equal(cp.race, 0);
	assert_int_equal(cp.nblocks, g->nblocks);
	for (uint32_t i = 0; i < cp.nblocks; i++) {
		if (i > 0)
			assert_int_equal(cp.blk[i]->start, cp.blk[i - 1]->start + BW);
		if (i + 1 < cp.nblocks)
			assert_int_equal(cp.blk[i]->nwords, BW);
	}
	/* The copy is oldest first (the order the writer reuses blocks in). */
	{
		const unsigned char *p = cp.buf;
		for (uint32_t b = 0; b < cp.nblocks; b++) {
			const struct ktrace_block_rec *r = (const void *)p;
			assert_ptr_equal(r, cp.blk[b]);
			p += sizeof(*r) + (size_t)r->nwords * 4;
		}
	}
	assert_int_equal(cp.blk[cp.nblocks - 1]->start + cp.blk[cp.nblocks - 1]->nwords, pos_of(0));
	walk_copy(&cp, &w);
	/* The surviving events are an unbroken enter/exit cycle A, B, C ending
	 * with the last exit. */
	size_t k = 0, nfunc = 0;
	uint32_t expect_ev = 0;
	for (size_t i = 0; i < w.n; i++) {
		const struct kt_rec *r = &w.recs[i];
		if (KTRACE_EV_IS_EXT(r->ev))
			continue;
		if (nfunc == 0) {
			/* find the phase of the first one */
			for (k = 0; k < 6; k++)
				if (r->ev == (ev[k / 2] | (k & 1 ? KTRACE_EV_EXIT_FLAG : 0)))
					break;
			assert_true(k < 6);
		}
		expect_ev = ev[(k % 6) / 2] | ((k & 1) ? KTRACE_EV_EXIT_FLAG : 0);
		if (r->ev != expect_ev)
			fail_msg("event %zu at counter %u: %03x, expected %03x", nfunc, r->counter,
			         r->ev, expect_ev);
		k++;
		nfunc++;
	}
	assert_int_equal(expect_ev, ev[(n - 1) % 3] | KTRACE_EV_EXIT_FLAG);
	/* Each block: BLOCK_START (5) + THREAD (3) words, and now and then a
	 * TSC record (4) or PAD tail. */
	assert_true(nfunc > (size_t)(g->nblocks - 1) * (BW - 16));
	kt_walk_free(&w);
	free_copy(&cp);
}

/* The record after a long idle gap is preceded by a TSC record, so no step
 * exceeds KTRACE_TS_FORWARD_MAX (the walker checks every step). */
static void test_ring_tsc_record_after_idle(void **state)
{
	struct copy cp;
	struct kt_walk w;
	uint64_t t0;
	uint32_t ev, before;

	(void)state;
	call(FAKE(40));
	ev = ev_of(FAKE(40));
	t0 = ktrace__now();
	before = pos_of(0);
	/* Idle for 1.25x the writer's bound (about 30-70 ms on real TSCs). */
	while (ktrace__now() - t0 < ktrace__g.forward_max + ktrace__g.forward_max / 4)
		kt_sleep_ms(5);
	call(FAKE(40));
	copy_core(0, &cp);
	walk_copy(&cp, &w);
	size_t i;
	for (i = 0; i < w.n; i++)
		if (w.recs[i].counter >= before && w.recs[i].ev == ev)
			break;
	assert_true(i < w.n);
	assert_true(w.recs[i].counter % BW == 5 ||
	            (i > 0 && w.recs[i - 1].ext_type == KTRACE_EXT_TSC));
	assert_true(w.tsc_recs >= 1);
	kt_walk_free(&w);
	free_copy(&cp);
}

/* A stale deadline (here forced to 0) costs one extra TSC record and
 * nothing else. */
static void test_ring_forced_deadline_writes_tsc(void **state)
{
	struct copy cp;
	struct kt_walk w;
	uint32_t ev, before;

	(void)state;
	call(FAKE(41));
	ev = ev_of(FAKE(41));
	before = pos_of(0);
	atomic_store(&ktrace__g.cores[0].deadline, 0);
	call(FAKE(41));
	copy_core(0, &cp);
	walk_copy(&cp, &w);
	size_t i;
	for (i = 0; i < w.n; i++)
		if (w.recs[i].counter >= before && w.recs[i].ev == ev)
			break;
	assert_true(i < w.n && i > 0);
	assert_true(w.recs[i].counter % BW == 5 || w.recs[i - 1].ext_type == KTRACE_EXT_TSC);
	/* And the exit after it went the fast way again: one word. */
	assert_int_equal(w.recs[i + 1].ev, ev | KTRACE_EV_EXIT_FLAG);
	assert_int_equal(w.recs[i + 1].counter, w.recs[i].counter + 1);
	kt_walk_free(&w);
	free_copy(&cp);
}

/* ---- threaded tests ---------------------------------------------------------- */

struct worker {
	pthread_t th;
	int cpu;             /* pin to this cpu, -1 = any */
	uintptr_t addr;      /* the only function this thread calls */
	uint32_t calls;
	int yield_every;
	sem_t go, done;      /* for the alternating test */
	int turns;
	uint32_t slot;       /* its ktrace slot, read after it ran */
};

static void *alternate_main(void *arg)
{
	struct worker *wk = arg;
	kunit_pin(wk->cpu);
	for (int t = 0; t < wk->turns; t++) {
		sem_wait(&wk->go);
		for (uint32_t i = 0; i < wk->calls; i++)
			call(wk->addr);
		wk->slot = kt_self()->slot;
		sem_post(&wk->done);
	}
	return NULL;
}

static void *free_main(void *arg)
{
	struct worker *wk = arg;
	if (wk->cpu >= 0)
		kunit_pin(wk->cpu);
	else
		kunit_unpin();
	for (uint32_t i = 0; i < wk->calls; i++) {
		call(wk->addr);
		if (wk->yield_every && i % wk->yield_every == 0)
			sched_yield();
	}
	wk->slot = kt_self()->slot;
	return NULL;
}

/*
 * Check every record written since start[c] on every core: each function
 * event belongs to the slot of the thread that calls that function, and
 * each thread's count is exact.
 */
static void check_attribution(struct worker *wk, int nw, const uint32_t *start,
                              uint32_t *thread_recs)
{
	uint64_t *count = calloc((size_t)nw, sizeof(*count));
	uint32_t *evs = calloc((size_t)nw, sizeof(*evs));

	for (int i = 0; i < nw; i++)
		evs[i] = ev_of(wk[i].addr);
	*thread_recs = 0;
	for (uint32_t c = 0; c < ktrace__g.ncpus; c++) {
		struct copy cp;
		struct kt_walk w;
		uint32_t end = pos_of(c);

		/* The window must still hold everything since start. */
		assert_true(end - start[c] < ktrace__g.ring_words - 2 * BW);
		copy_core(c, &cp);
		walk_copy_from(&cp, &w, start[c] ? start[c] : 1);
		for (size_t i = 0; i < w.n; i++) {
			const struct kt_rec *r = &w.recs[i];
			if (r->counter - start[c] >= end - start[c])
				continue; /* older than this test */
			if (r->ext_type == KTRACE_EXT_THREAD)
				(*thread_recs)++;
			if (KTRACE_EV_IS_EXT(r->ev))
				continue;
			int j;
			for (j = 0; j < nw; j++)
				if ((r->ev & ~KTRACE_EV_EXIT_FLAG) == evs[j])
					break;
			if (j == nw)
				continue; /* another test's function */
			if (r->slot != wk[j].slot)
				fail_msg("cpu %u counter %u: event of thread %d (slot %u) attributed "
				         "to slot %u", c, r->counter, j, wk[j].slot, r->slot);
			count[j]++;
		}
		/* Hazard 2: within one core's stream time only steps back by
		 * the few ticks two cores' clocks may differ (a lock holder
		 * that migrated before reading the clock), never by a late
		 * store (~1024 ticks is ~100 us). */
		if (w.max_backward > 1024) {
			for (size_t i = 1; i < w.n; i++)
				if (w.recs[i].counter == w.max_backward_at)
					for (size_t k = i > 8 ? i - 8 : 0; k < i + 4 && k < w.n; k++)
						print_error("  ctr %u ev %03x ext %u arg %u slot %u tick %llu\n",
						            w.recs[k].counter, w.recs[k].ev, w.recs[k].ext_type,
						            w.recs[k].arg, w.recs[k].slot,
						            (unsigned long long)w.recs[k].tick);
			for (size_t i = 1; i < w.n; i++)
				if (w.recs[i].counter == w.max_backward_at)
					print_error("cpu %u: record at %u: ev %03x ext %u slot %u tick %llu; "
					            "previous at %u: ev %03x ext %u slot %u tick %llu\n", c,
					            w.recs[i].counter, w.recs[i].ev, w.recs[i].ext_type,
					            w.recs[i].slot, (unsigned long long)w.recs[i].tick,
					            w.recs[i - 1].counter, w.recs[i - 1].ev,
					            w.recs[i - 1].ext_type, w.recs[i - 1].slot,
					            (unsigned long long)w.recs[i - 1].tick);
			fail_msg("cpu %u: a record %llu ticks before the previous one", c,
			         (unsigned long long)w.max_backward);
		}
		kt_walk_free(&w);
		free_copy(&cp);
	}
	for (int j = 0; j < nw; j++)
		if (count[j] != 2ull * wk[j].calls * (wk[j].turns ? (uint64_t)wk[j].turns : 1))
			fail_msg("thread %d: %llu events, expected %llu", j,
			         (unsigned long long)count[j],
			         2ull * wk[j].calls * (wk[j].turns ? (uint64_t)wk[j].turns : 1));
	free(count);
	free(evs);
}

static void start_positions(uint32_t *start)
{
	for (uint32_t c = 0; c < ktrace__g.ncpus; c++)
		start[c] = pos_of(c);
}

/* Two threads take turns on cpu 0: every switch writes a THREAD record and
 * every event stays with its thread. */
static void test_ring_thread_record_on_shared_core(void **state)
{
	struct worker wk[2];
	uint32_t start[64], threcs;

	(void)state;
	memset(wk, 0, sizeof(wk));
	for (int i = 0; i < 2; i++) {
		wk[i].cpu = 0;
		wk[i].addr = FAKE(50 + i);
		wk[i].calls = 50;
		wk[i].turns = 10;
		sem_init(&wk[i].go, 0, 0);
		sem_init(&wk[i].done, 0, 0);
	}
	/* Register the functions first so every event is a hot-path one. */
	ev_of(wk[0].addr);
	ev_of(wk[1].addr);
	start_positions(start);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&wk[i].th, NULL, alternate_main, &wk[i]), 0);
	for (int t = 0; t < 10; t++)
		for (int i = 0; i < 2; i++) {
			sem_post(&wk[i].go);
			sem_wait(&wk[i].done);
		}
	for (int i = 0; i < 2; i++)
		pthread_join(wk[i].th, NULL);
	assert_int_not_equal(wk[0].slot, wk[1].slot);
	check_attribution(wk, 2, start, &threcs);
	assert_true(threcs >= 19);
}

/* Another thread starts writing on a core that was idle longer than the
 * forward bound: the THREAD record that opens its segment must not break
 * the timestamp rule either (a TSC record must come first).  The walker
 * rejects a step above KTRACE_TS_FORWARD_MAX; a step above 2^19 would even
 * read as going back.  Known library bug, see /tmp/ktrace-bugs.md. */
static void *idle_switch_main(void *arg)
{
	struct worker *wk = arg;
	kunit_pin(0);
	call(wk->addr);
	wk->slot = kt_self()->slot;
	return NULL;
}

static void test_ring_thread_switch_after_idle(void **state)
{
	struct worker wk;
	struct copy cp;
	struct kt_walk w;
	uint64_t t0;

	(void)state;
	memset(&wk, 0, sizeof(wk));
	wk.addr = FAKE(55);
	ev_of(wk.addr);
	call(FAKE(56));                 /* this thread owns cpu 0's stream */
	t0 = ktrace__now();
	while (ktrace__now() - t0 < ktrace__g.forward_max + ktrace__g.forward_max / 4)
		kt_sleep_ms(5);
	assert_int_equal(pthread_create(&wk.th, NULL, idle_switch_main, &wk), 0);
	pthread_join(wk.th, NULL);
	copy_core(0, &cp);
	walk_copy(&cp, &w);             /* fails on the step rule */
	assert_int_equal(w.recs[w.n - 1].slot, wk.slot);
	kt_walk_free(&w);
	free_copy(&cp);
}

/* Three threads on one cpu, preempting each other at any instruction. */
static void test_ring_threads_preempting_on_one_core(void **state)
{
	struct worker wk[3];
	uint32_t start[64], threcs;

	(void)state;
	memset(wk, 0, sizeof(wk));
	for (int i = 0; i < 3; i++) {
		wk[i].cpu = 0;
		wk[i].addr = FAKE(60 + i);
		wk[i].calls = 25000;
		wk[i].yield_every = 997;
		ev_of(wk[i].addr);
	}
	start_positions(start);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&wk[i].th, NULL, free_main, &wk[i]), 0);
	for (int i = 0; i < 3; i++)
		pthread_join(wk[i].th, NULL);
	check_attribution(wk, 3, start, &threcs);
	assert_true(threcs >= 1);
}

/* Threads free to migrate between all cpus. */
static void test_ring_migrating_threads(void **state)
{
	struct worker wk[4];
	uint32_t start[64], threcs;

	(void)state;
	memset(wk, 0, sizeof(wk));
	for (int i = 0; i < 4; i++) {
		wk[i].cpu = -1;
		wk[i].addr = FAKE(70 + i);
		wk[i].calls = 12000;
		wk[i].yield_every = 50;
		ev_of(wk[i].addr);
	}
	start_positions(start);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&wk[i].th, NULL, free_main, &wk[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(wk[i].th, NULL);
	check_attribution(wk, 4, start, &threcs);
}

/* The reader copies cpu 0's ring while a writer wraps it as fast as it
 * can: every block returned is whole and in range; reused ones are dropped
 * and counted, never returned; and what is returned has no hole (blocks
 * the writer reused before the reader reached them must not leave older,
 * already-copied blocks stranded before a gap).  Known library bug, see
 * /tmp/ktrace-bugs.md. */
static _Atomic int stop_writer;

static void *wrap_main(void *arg)
{
	(void)arg;
	kunit_pin(0);
	while (!atomic_load(&stop_writer))
		for (int i = 0; i < 1000; i++)
			call(FAKE(80 + i % 5));
	return NULL;
}

static void test_ring_copy_while_writing(void **state)
{
	pthread_t th;
	uint64_t races = 0, copies = 0, blocks = 0, holes = 0;
	int64_t end;

	(void)state;
	if (ktrace__g.ncpus < 2)
		skip();
	kunit_pin(1);
	atomic_store(&stop_writer, 0);
	assert_int_equal(pthread_create(&th, NULL, wrap_main, NULL), 0);
	end = kt_now_ms() + 1500;
	while (kt_now_ms() < end) {
		struct copy cp;
		struct kt_walk w;
		copy_core(0, &cp);
		walk_copy(&cp, &w);   /* fails the test on any torn block */
		races += cp.race;
		blocks += cp.nblocks;
		/* All blocks from one ring's worth of counters. */
		if (cp.nblocks > 1)
			assert_true(cp.blk[cp.nblocks - 1]->start - cp.blk[0]->start <
			            ktrace__g.ring_words);
		/* The copy is one unbroken run of blocks: a hole in the
		 * middle would make the decoder glue events across it. */
		for (uint32_t i = 1; i < cp.nblocks; i++)
			if (cp.blk[i]->start != cp.blk[i - 1]->start + BW)
				holes++;
		copies++;
		kt_walk_free(&w);
		free_copy(&cp);
	}
	atomic_store(&stop_writer, 1);
	pthread_join(th, NULL);
	kunit_pin(0);
	print_message("copies %llu, blocks %llu, dropped as raced %llu, holes %llu\n",
	              (unsigned long long)copies, (unsigned long long)blocks,
	              (unsigned long long)races, (unsigned long long)holes);
	assert_true(copies > 0);
	assert_int_equal(holes, 0);
}

/* ---- the reader (ktrace__ring_read_block) --------------------------------------- */

/*
 * A core of our own (not in ktrace__g.cores: no hook writes it), as big as
 * every core's ring, written by the test as claim_block writes a block:
 * gen = 0, release fence, the words, gen = S|1 (release).  Incarnation S
 * holds BLOCK_START naming S, then S + i at word i: a copy that mixes two
 * incarnations shows it.
 */
static struct kt_core *fake_core(void)
{
	struct kt_core *k = calloc(1, sizeof(*k));

	assert_non_null(k);
	k->ring = calloc(ktrace__g.ring_words, 4);
	k->gen = calloc(ktrace__g.nblocks, 4);
	assert_non_null(k->ring);
	assert_non_null((void *)k->gen);
	return k;
}

static void fake_core_free(struct kt_core *k)
{
	free(k->ring);
	free((void *)k->gen);
	free(k);
}

static void fake_block(struct kt_core *k, uint32_t S)
{
	uint32_t b = (S & ktrace__g.ring_mask) / BW, *r = &k->ring[S & ktrace__g.ring_mask];

	atomic_store_explicit(&k->gen[b], 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	__atomic_store_n(&r[0], KTRACE_REC(0, 4), __ATOMIC_RELAXED);
	__atomic_store_n(&r[1], KTRACE_EXT_WORD(KTRACE_EXT_BLOCK_START, 1), __ATOMIC_RELAXED);
	for (uint32_t i = 2; i < BW; i++)
		__atomic_store_n(&r[i], S + i - 2, __ATOMIC_RELAXED);
	atomic_store_explicit(&k->gen[b], S | 1u, memory_order_release);
}

/* 1 if dst is incarnation S whole (n words). */
static int block_is(const uint32_t *dst, uint32_t S, uint32_t n)
{
	for (uint32_t i = 2; i < n; i++)
		if (dst[i] != S + i - 2)
			return 0;
	return 1;
}

static void test_ring_reader_contract(void **state)
{
	struct kt_core *k = fake_core();
	uint32_t dst[BW], S = 3 * BW, b = 3;

	(void)state;
	fake_block(k, S);
	assert_int_equal(ktrace__ring_read_block(k, S, BW, dst), 1);
	assert_true(block_is(dst, S, BW));
	assert_int_equal(ktrace__ring_read_block(k, S, 5, dst), 1);   /* a current block */
	/* Not this incarnation: an older or a newer one in the same block. */
	assert_int_equal(ktrace__ring_read_block(k, S + ktrace__g.ring_words, BW, dst), 0);
	assert_int_equal(ktrace__ring_read_block(k, S - ktrace__g.ring_words, BW, dst), 0);
	/* Being reused (gen 0), never written, sizes out of 5..BW. */
	atomic_store(&k->gen[b], 0);
	assert_int_equal(ktrace__ring_read_block(k, S, BW, dst), 0);
	assert_int_equal(ktrace__ring_read_block(k, 4 * BW, BW, dst), 0);
	fake_block(k, S);
	assert_int_equal(ktrace__ring_read_block(k, S, 4, dst), 0);
	assert_int_equal(ktrace__ring_read_block(k, S, BW + 1, dst), 0);
	/* gen says S but the block does not start with S's BLOCK_START. */
	k->ring[S + 2] = S + 1;
	assert_int_equal(ktrace__ring_read_block(k, S, BW, dst), 0);
	fake_core_free(k);
}

static atomic_int stop_reuse;

/* Reuse block 0 of the fake core over and over, as fast as it can. */
static void *reuse_main(void *arg)
{
	struct kt_core *k = arg;

	kunit_pin(1);
	for (uint32_t S = 0; !atomic_load(&stop_reuse); S += ktrace__g.ring_words)
		fake_block(k, S);
	return NULL;
}

/* Hazard 6: a block reused while it is copied is refused, never returned
 * torn.  A reader that skipped the second look at gen would hand back
 * words of two incarnations here (each copy races a whole rewrite). */
static void test_ring_reader_never_torn(void **state)
{
	struct kt_core *k = fake_core();
	uint32_t dst[BW];
	uint64_t whole = 0, refused = 0;
	int64_t end;
	pthread_t th;

	(void)state;
	if (ktrace__g.ncpus < 2)
		skip();
	fake_block(k, 0);
	atomic_store(&stop_reuse, 0);
	assert_int_equal(pthread_create(&th, NULL, reuse_main, k), 0);
	end = kt_now_ms() + 500;
	while (kt_now_ms() < end) {
		uint32_t g = atomic_load(&k->gen[0]), S = g & ~1u;
		if (!(g & 1))
			continue;
		if (ktrace__ring_read_block(k, S, BW, dst)) {
			assert_true(block_is(dst, S, BW));
			whole++;
		} else {
			refused++;
		}
	}
	atomic_store(&stop_reuse, 1);
	pthread_join(th, NULL);
	print_message("copies whole %llu, refused as torn %llu\n", (unsigned long long)whole,
	              (unsigned long long)refused);
	assert_true(whole + refused > 0);
	fake_core_free(k);
}

/* Pages of [p, p + n * 4096) resident now, as a bit mask. */
static unsigned resident(const char *p, int n)
{
	unsigned char v[8];
	unsigned m = 0;

	assert_true(n <= 8);
	assert_int_equal(mincore((void *)p, (size_t)n * 4096, v), 0);
	for (int i = 0; i < n; i++)
		m |= (unsigned)(v[i] & 1) << i;
	return m;
}

/* ktrace__touch_pages (the writer's touch of the ring's pages and the
 * lean tables'): each page the range covers at least 4 bytes of is
 * written in place, the words keep their values, and nothing outside
 * the range is touched (a page it ends in within 3 bytes stays unmapped;
 * a guard page right after the range would fault). */
static void test_ring_touch_pages(void **state)
{
	char *m, *p;

	(void)state;
#if !defined(__x86_64__) && !defined(__aarch64__)
	skip();   /* ktrace__touch_pages touches nothing elsewhere */
#endif
	if (sysconf(_SC_PAGESIZE) != 4096)
		skip();   /* the layout below is in 4 KiB pages */
	m = mmap(NULL, 6 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(mprotect(m + 5 * 4096, 4096, PROT_NONE), 0);
	/* from 100 bytes into page 0 to 2 bytes into page 3 */
	assert_int_equal(resident(m, 5), 0u);
	ktrace__touch_pages(m + 100, 3 * 4096 - 100 + 2);
	assert_int_equal(resident(m, 5), 0x7u);
	/* to the guard page's first byte, values kept */
	for (int i = 0; i < 5 * 4096; i += 4)
		memcpy(m + i, &i, 4);
	ktrace__touch_pages(m + 4 * 4096 + 8, 4096 - 8);
	ktrace__touch_pages(m + 2, 5 * 4096 - 2);   /* start rounded up to 4 */
	for (int i = 0; i < 5 * 4096; i += 4)
		assert_memory_equal(m + i, &i, 4);
	/* an empty range and one under 4 bytes: nothing */
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	ktrace__touch_pages(p, 0);
	ktrace__touch_pages(p + 4, 3);
	assert_int_equal(resident(p, 1), 0u);
	munmap(p, 4096);
	munmap(m, 6 * 4096);
}

/* A thread that names itself, registers (a hook call), says its tid and
 * waits to be let go; one that never calls a hook. */
static _Atomic int32_t named_tid, plain_tid;
static sem_t name_go;

static void *named_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "kt-named", 0, 0, 0);
	call(FAKE(7));
	atomic_store(&named_tid, (int32_t)syscall(SYS_gettid));
	sem_wait(&name_go);
	return NULL;
}

static void *plain_main(void *arg)
{
	(void)arg;
	atomic_store(&plain_tid, (int32_t)syscall(SYS_gettid));
	sem_wait(&name_go);
	return NULL;
}

/* ktrace__thread_name_of (the writer names the threads its scheduling
 * records meet from ktrace's thread table before it opens /proc): a live
 * registered thread by the name it registered with, nothing for one
 * that exited, one that never registered, or an unknown tid. */
static void test_ring_thread_name_of(void **state)
{
	pthread_t a, b;
	char name[16], me[16] = "";
	int32_t ta, tb;

	(void)state;
	call(FAKE(6));   /* this thread is registered */
	prctl(PR_GET_NAME, me, 0, 0, 0);
	assert_int_equal(ktrace__thread_name_of((int32_t)syscall(SYS_gettid), name), 1);
	assert_string_equal(name, me);
	sem_init(&name_go, 0, 0);
	atomic_store(&named_tid, 0);
	atomic_store(&plain_tid, 0);
	assert_int_equal(pthread_create(&a, NULL, named_main, NULL), 0);
	assert_int_equal(pthread_create(&b, NULL, plain_main, NULL), 0);
	while ((ta = atomic_load(&named_tid)) == 0 || (tb = atomic_load(&plain_tid)) == 0)
		sched_yield();
	memset(name, 'x', sizeof(name));
	assert_int_equal(ktrace__thread_name_of(ta, name), 1);
	assert_string_equal(name, "kt-named");
	assert_int_equal(ktrace__thread_name_of(tb, name), 0);
	assert_int_equal(ktrace__thread_name_of(0x7ffffff0, name), 0);
	sem_post(&name_go);
	sem_post(&name_go);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	assert_int_equal(ktrace__thread_name_of(ta, name), 0);   /* exited */
	sem_destroy(&name_go);
}

int main(int argc, char **argv)
{
	static const char *const env[] = {"KTRACE_BUFFER_MB=1", "KTRACE_FILTER=off", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_blocks_are_well_formed),
		cmocka_unit_test(test_ring_record_never_straddles),
		cmocka_unit_test(test_ring_wrap_overwrite_and_loss_counter),
		cmocka_unit_test(test_ring_tsc_record_after_idle),
		cmocka_unit_test(test_ring_forced_deadline_writes_tsc),
		cmocka_unit_test(test_ring_reader_contract),
		cmocka_unit_test(test_ring_touch_pages),
	};
	const struct CMUnitTest threaded[] = {
		cmocka_unit_test(test_ring_thread_record_on_shared_core),
		cmocka_unit_test(test_ring_threads_preempting_on_one_core),
		cmocka_unit_test(test_ring_migrating_threads),
		cmocka_unit_test(test_ring_copy_while_writing),
		cmocka_unit_test(test_ring_reader_never_torn),
		cmocka_unit_test(test_ring_thread_name_of),
		/* Last: a failure leaves a bad block in cpu 0's ring. */
		cmocka_unit_test(test_ring_thread_switch_after_idle),
	};
	int r;

	(void)argc;
	kunit_reexec(argv, env);
	r = cmocka_run_group_tests_name("ring", tests, setup, teardown);
	r |= cmocka_run_group_tests_name("ring_threads", threaded, setup, teardown);
	kunit_cleanup();
	return r;
}
