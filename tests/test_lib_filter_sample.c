/*
 * test_lib_filter_sample.c - the window budget's measure of a call
 * (lib/filter.c): the longest call it reports for a function is one that
 * happened.  Hand-made blocks of one core's stream go through the
 * filter's own sample walk.  Runs with KTRACE_ENABLE=0: no writer thread
 * samples the rings meanwhile (the walk's state is the writer's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "kunit.h"

#define BW KTRACE_BLOCK_WORDS
#define F_ID 7u                  /* the function measured */
#define NEVER_LONG (UINT64_MAX / 4) /* no call counts as long: no lookup of
                                    the thread's switches */

struct blk {
	uint32_t w[BW];
	uint32_t n;
	uint64_t base;           /* ticks at BLOCK_START */
};

static void put(struct blk *b, uint32_t word)
{
	assert_true(b->n < BW);
	b->w[b->n++] = word;
}

static void block_start(struct blk *b, uint32_t slot, uint32_t seq, uint64_t tick)
{
	uint64_t tsc = tick << ktrace__g.tsc_shift;

	memset(b, 0, sizeof(*b));
	b->base = tick;
	put(b, KTRACE_REC(tick, 4));
	put(b, KTRACE_EXT_WORD(KTRACE_EXT_BLOCK_START, slot));
	put(b, 0);
	put(b, (uint32_t)tsc);
	put(b, (uint32_t)(tsc >> 32));
	put(b, KTRACE_REC(tick, 2));
	put(b, KTRACE_EXT_WORD(KTRACE_EXT_THREAD, slot));
	put(b, seq);
}

/* slot writes on this core from tick on, as its segment seq */
static void segment(struct blk *b, uint32_t slot, uint32_t seq, uint64_t tick)
{
	put(b, KTRACE_REC(tick, 2));
	put(b, KTRACE_EXT_WORD(KTRACE_EXT_THREAD, slot));
	put(b, seq);
}

static void enter(struct blk *b, uint32_t id, uint64_t tick)
{
	put(b, KTRACE_REC(tick, KTRACE_EV_ENTER_BASE + id));
}

static void leave(struct blk *b, uint32_t id, uint64_t tick)
{
	put(b, KTRACE_REC(tick, KTRACE_EV_ENTER_BASE + id) | KTRACE_EV_EXIT_FLAG);
}

/* Ticks advance in steps under 2^19 so the 20-bit rule stays exact. */
static void sample(const struct blk *b, uint64_t *longest, uint64_t *calls)
{
	assert_int_equal(ktrace__filter_sample_test(b->w, 1, F_ID, NEVER_LONG, longest, calls), 0);
}

/* A thread that only yielded the core to another thread (its next
 * segment here is seq + 1) is still inside its call: measured whole. */
static void test_filter_sample_same_core(void **state)
{
	struct blk b;
	uint64_t longest, calls;

	(void)state;
	block_start(&b, 1, 10, 1000);
	enter(&b, F_ID, 1000);
	segment(&b, 2, 4, 1100);         /* another thread ran here */
	enter(&b, 3, 1100);
	leave(&b, 3, 1200);
	segment(&b, 1, 11, 1300);        /* back, it wrote nowhere else */
	leave(&b, F_ID, 5000);
	sample(&b, &longest, &calls);
	assert_int_equal(calls, 1);
	assert_int_equal(longest, 4000);
}

/*
 * The thread entered f here, migrated, finished that call and began
 * another on the other core, and came back here to finish the second
 * (its segment jumps from 10 to 12).  Matching this exit with this
 * entry measured 100,000 ticks, a call that never happened (the muted
 * list once said 595 ms where no call took more than 65 ms).  Neither
 * call is measured whole here; the short call before is.
 */
static void test_filter_sample_migrated_and_back(void **state)
{
	struct blk b;
	uint64_t longest, calls;

	(void)state;
	block_start(&b, 1, 10, 1000);
	enter(&b, F_ID, 1000);
	leave(&b, F_ID, 1010);           /* one short call: 10 ticks */
	enter(&b, F_ID, 2000);           /* exits on the other core */
	segment(&b, 2, 4, 2100);
	enter(&b, 3, 2100);
	leave(&b, 3, 2200);
	segment(&b, 1, 12, 102000);      /* wrote elsewhere meanwhile */
	leave(&b, F_ID, 102000);         /* the exit of a call entered elsewhere */
	enter(&b, 3, 102100);
	leave(&b, 3, 102110);
	sample(&b, &longest, &calls);
	assert_int_equal(calls, 1);
	assert_int_equal(longest, 10);
}

/* An entry still open at the sample's end counts up to the thread's last
 * record here, but not across a stay on another core. */
static void test_filter_sample_open_entry(void **state)
{
	struct blk b;
	uint64_t longest, calls;

	(void)state;
	block_start(&b, 1, 10, 1000);
	enter(&b, F_ID, 1000);           /* still running at the end ... */
	enter(&b, 3, 1500);
	leave(&b, 3, 1600);
	sample(&b, &longest, &calls);
	assert_int_equal(calls, 0);
	assert_int_equal(longest, 600);  /* ... so at least 600 ticks */

	block_start(&b, 1, 10, 1000);
	enter(&b, F_ID, 1000);           /* exits on the other core */
	segment(&b, 1, 12, 300000);
	enter(&b, 3, 300000);
	leave(&b, 3, 300010);
	sample(&b, &longest, &calls);
	assert_int_equal(calls, 0);
	assert_int_equal(longest, 0);    /* not 299,000 ticks */
}

int main(int argc, char **argv)
{
	const char *const env[] = {"KTRACE_ENABLE=0", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter_sample_same_core),
		cmocka_unit_test(test_filter_sample_migrated_and_back),
		cmocka_unit_test(test_filter_sample_open_entry),
	};
	int r;

	(void)argc;
	kunit_reexec(argv, env);
	r = cmocka_run_group_tests(tests, NULL, NULL);
	kunit_cleanup();
	return r;
}
