/*
 * test_decoder_timeline.c - stages 2 and 3: absolute time from 20-bit
 * timestamps, block order, thread attribution, stacks across cores,
 * truncation at the window's edges, spans, requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder.h"
#include "snapbuild.h"

static struct kd_dec *decode_opts(struct snapbuild *sb, int all)
{
	struct kd_dec_opts o = { .no_symbols = 1, .all = all };
	struct kd_dec_error err;
	struct kd_dec *d = snapbuild_decode(sb, &o, &err);

	if (d == NULL)
		fail_msg("decode failed: %s", err.msg);
	return d;
}

static struct kd_dec *decode(struct snapbuild *sb)
{
	return decode_opts(sb, 0);
}

/* Ticks of every event of one core, via the stage-2 iterator alone. */
static uint32_t core_ticks(struct kd_dec *d, uint32_t core, uint64_t *out, uint32_t max,
                           struct kd_dec_event *evs)
{
	struct kd_core_iter it;
	struct kd_dec_event ev;
	uint32_t n = 0;

	kd_iter_init(&it, &d->snap, core, NULL);
	while (kd_iter_record(&it, &ev)) {
		if (n < max) {
			out[n] = ev.tick;
			if (evs)
				evs[n] = ev;
		}
		n++;
	}
	return n;
}

static const struct kd_dec_call *find_call(const struct kd_dec *d, uint64_t addr,
                                               uint32_t nth)
{
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_func *f = &d->funcs[d->calls[i].func];

		if (f->kind == KD_FUNC_ADDR && f->addr == addr && nth-- == 0)
			return &d->calls[i];
	}
	return NULL;
}

static void test_timeline_forward_steps_wrap(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint64_t want[40], got[40];
	uint64_t t = 5000;

	(void)state;
	/* steps just under 2^18: no TSC record, ts20 wraps every ~4 records */
	for (int i = 0; i < 40; i++) {
		want[i] = t;
		snapbuild_word(sb, 0, 1, t, KTRACE_REC(t, KTRACE_EV_ENTER_BASE + (i % 2 ? 0x800 : 0)));
		t += KTRACE_TS_FORWARD_MAX - 1;
	}
	d = decode(sb);
	assert_int_equal(d->snap.nblocks, 1);
	assert_int_equal(d->snap.blocks[0].nwords, 5 + 40); /* no TSC records needed */
	assert_int_equal(core_ticks(d, 0, got, 40, NULL), 40);
	for (int i = 0; i < 40; i++)
		assert_int_equal(got[i], want[i]);
	kd_dec_free(d);
}

static void test_timeline_tsc_records_wrap(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint64_t want[30], got[30];
	uint64_t t = 77;

	(void)state;
	/* steps of 3.3 million ticks: several 2^20 wraps each, TSC records */
	for (int i = 0; i < 30; i++) {
		want[i] = t;
		snapbuild_enter(sb, 0, 1, t, 3);
		t += 3300001;
	}
	d = decode(sb);
	assert_int_equal(core_ticks(d, 0, got, 30, NULL), 30);
	for (int i = 0; i < 30; i++)
		assert_int_equal(got[i], want[i]);
	kd_dec_free(d);
}

static void test_timeline_late_store_is_backward(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint32_t w[16];
	uint64_t got[8], base = (1ull << 20) * 7 + 10; /* ts20 of base = 10 */
	uint32_t n = snapbuild_block_start_words(w, 1, 0, base);

	(void)state;
	w[n++] = KTRACE_REC(base + 100, KTRACE_EV_ENTER_BASE);
	w[n++] = KTRACE_REC(base + 90, KTRACE_EV_ENTER_BASE + 1);   /* late store */
	w[n++] = KTRACE_REC(base - 5, KTRACE_EV_EXIT_BASE + 1);     /* back across ts20 0 */
	w[n++] = KTRACE_REC(base + 200, KTRACE_EV_EXIT_BASE);
	snapbuild_block_raw(sb, 0, 0, w, n);
	d = decode(sb);
	assert_int_equal(core_ticks(d, 0, got, 8, NULL), 4);
	assert_int_equal(got[0], base + 100);
	assert_int_equal(got[1], base + 90);
	assert_int_equal(got[2], base - 5);
	assert_int_equal(got[3], base + 200);
	/* per thread, time is clamped monotonic: the inner call has 0 length,
	 * nests inside the outer one and nothing is truncated */
	assert_int_equal(d->ncalls, 2);
	assert_int_equal(d->calls[0].flags, 0);
	assert_int_equal(d->calls[1].flags, 0);
	assert_int_equal(d->calls[1].depth, 1);
	assert_int_equal(d->calls[0].end - d->calls[0].begin, 100);
	kd_dec_free(d);
}

static void test_timeline_idle_for_minutes(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint64_t got[4];
	const uint64_t minutes = 5ull * 60 * 1000000000ull; /* 1 tick = 1 ns */

	(void)state;
	snapbuild_func(sb, 0, 0x1000);
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_exit(sb, 0, 1, 1000 + minutes, 0);
	d = decode(sb);
	assert_int_equal(core_ticks(d, 0, got, 4, NULL), 2);
	assert_int_equal(got[1], 1000 + minutes);
	assert_int_equal(d->ncalls, 1);
	assert_int_equal(kd_time_ticks_ns(d, d->calls[0].end - d->calls[0].begin), minutes);
	kd_dec_free(d);
}

/* A THREAD record stamped after a long idle, before the TSC record that
 * resets the reference (an ambiguous ts20): the events keep exact times. */
static void test_timeline_thread_before_tsc(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint32_t w[24];
	uint64_t got[4], t0 = 1000000, t1 = t0 + 3 * (1u << 20) + (1u << 19) + 5;
	uint32_t n = snapbuild_block_start_words(w, 1, 0, t0);

	(void)state;
	w[n++] = KTRACE_REC(t0 + 10, KTRACE_EV_ENTER_BASE);
	w[n++] = KTRACE_REC(t1, 1);                        /* THREAD, idle gap */
	w[n++] = KTRACE_EXT_WORD(KTRACE_EXT_THREAD, 2);
	w[n++] = KTRACE_REC(t1, 3);                        /* TSC */
	w[n++] = KTRACE_EXT_WORD(KTRACE_EXT_TSC, 0);
	w[n++] = (uint32_t)t1;
	w[n++] = (uint32_t)(t1 >> 32);
	w[n++] = KTRACE_REC(t1 + 7, KTRACE_EV_ENTER_BASE + 1);
	snapbuild_block_raw(sb, 0, 0, w, n);
	d = decode(sb);
	assert_int_equal(core_ticks(d, 0, got, 4, NULL), 2);
	assert_int_equal(got[0], t0 + 10);
	assert_int_equal(got[1], t1 + 7);
	kd_dec_free(d);
}

static void fill_blocks(struct snapbuild *sb, uint32_t cpu, uint64_t *t, int nblocks)
{
	/* 1019 words of payload per block: enter/exit pairs */
	for (int b = 0; b < nblocks; b++) {
		for (int i = 0; i < 509; i++) {
			snapbuild_enter(sb, cpu, 1, (*t)++, 5);
			snapbuild_exit(sb, cpu, 1, (*t)++, 5);
		}
		snapbuild_flush(sb, cpu);
	}
}

static void test_timeline_blocks_sorted_by_s_with_wrap(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint64_t *got = calloc(4100, sizeof(*got));
	uint64_t t = 1000;
	uint32_t n;

	(void)state;
	/* S runs 0xFFFFF800, 0xFFFFFC00, 0x0, 0x400: across the u32 wrap */
	snapbuild_set_next_s(sb, 0, 0xFFFFF800u);
	fill_blocks(sb, 0, &t, 4);
	snapbuild_reverse_blocks(sb);
	d = decode(sb);
	assert_int_equal(d->snap.nblocks, 4);
	assert_int_equal(d->snap.blocks[0].start, 0xFFFFF800u);
	assert_int_equal(d->snap.blocks[3].start, 0x400u);
	n = core_ticks(d, 0, got, 4100, NULL);
	assert_int_equal(n, 4 * 1018);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(got[i], 1000 + i);
	assert_int_equal(d->ncalls, 4 * 509);
	assert_int_equal(d->unmatched_exits, 0);
	kd_dec_free(d);
	free(got);
}

static void test_timeline_thread_switch_mid_block(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	const struct kd_dec_call *a, *b;

	(void)state;
	snapbuild_thread(sb, 1, 500, "a", 0);
	snapbuild_thread(sb, 2, 501, "b", 0);
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	snapbuild_enter(sb, 0, 1, 100, 0);
	snapbuild_enter(sb, 0, 2, 110, 1);  /* preempted: b runs on the same core */
	snapbuild_exit(sb, 0, 2, 150, 1);
	snapbuild_exit(sb, 0, 1, 200, 0);
	d = decode(sb);
	assert_int_equal(d->snap.nblocks, 1);
	a = find_call(d, 0xA000, 0);
	b = find_call(d, 0xB000, 0);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(d->threads[a->thread].tid, 500);
	assert_int_equal(d->threads[b->thread].tid, 501);
	assert_int_equal(a->end - a->begin, 100);
	assert_int_equal(b->end - b->begin, 40);
	assert_int_equal(a->depth, 0);
	assert_int_equal(b->depth, 0);
	assert_int_equal(a->self, 100); /* another thread's call is not a child */
	assert_int_equal(d->nruns, 3); /* a, b, a on cpu 0 */
	kd_dec_free(d);
}

static void test_timeline_migration(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	const struct kd_dec_call *c;

	(void)state;
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_enter(sb, 0, 1, 1010, 1);
	snapbuild_exit(sb, 1, 1, 1500, 1);   /* migrated to cpu 1 */
	snapbuild_exit(sb, 1, 1, 1600, 0);
	d = decode(sb);
	assert_int_equal(d->ncalls, 2);
	c = find_call(d, 0xA000, 0);
	assert_int_equal(c->end - c->begin, 600);
	assert_int_equal(c->self, 600 - 490);
	assert_int_equal(c->flags, 0);
	c = find_call(d, 0xB000, 0);
	assert_int_equal(c->end - c->begin, 490);
	assert_int_equal(c->depth, 1);
	assert_int_equal(d->unmatched_exits, 0);
	kd_dec_free(d);
}

static void test_timeline_overwrite_edges(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	const struct kd_dec_call *c;

	(void)state;
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	snapbuild_func(sb, 2, 0xC000);
	snapbuild_enter(sb, 0, 1, 100, 1);   /* b() inside an a() entered earlier */
	snapbuild_exit(sb, 0, 1, 200, 1);
	snapbuild_exit(sb, 0, 1, 300, 0);    /* exit without entry */
	snapbuild_enter(sb, 0, 1, 400, 2);   /* entry without exit */
	snapbuild_info(sb)->snapshot_tsc = 1000;
	d = decode(sb);
	assert_int_equal(d->ncalls, 3);
	c = find_call(d, 0xA000, 0);
	assert_int_equal(c->flags, KD_CALL_TRUNC_BEGIN);
	assert_int_equal(c->begin, d->window_start);
	assert_int_equal(c->end, 300);
	assert_int_equal(c->depth, 0);
	assert_int_equal(c->self, 300 - 100 - 100);
	c = find_call(d, 0xB000, 0);
	assert_int_equal(c->depth, 1); /* under the truncated a() */
	assert_int_equal(c->parent, (uint32_t)(find_call(d, 0xA000, 0) - d->calls));
	c = find_call(d, 0xC000, 0);
	assert_int_equal(c->flags, KD_CALL_TRUNC_END);
	assert_int_equal(c->end, 1000); /* the snapshot moment */
	assert_int_equal(d->unmatched_exits, 1);
	kd_dec_free(d);
}

static void test_timeline_lost_exit(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	const struct kd_dec_call *c;

	(void)state;
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	snapbuild_enter(sb, 0, 1, 100, 0);
	snapbuild_enter(sb, 0, 1, 110, 1);
	snapbuild_exit(sb, 0, 1, 150, 0);    /* b's exit never recorded */
	d = decode(sb);
	c = find_call(d, 0xB000, 0);
	assert_int_equal(c->flags, KD_CALL_TRUNC_END | KD_CALL_EXIT_LOST);
	assert_int_equal(c->end, 150);
	c = find_call(d, 0xA000, 0);
	assert_int_equal(c->flags, 0);
	assert_int_equal(c->end - c->begin, 50);
	assert_int_equal(d->lost_exits, 1);
	kd_dec_free(d);
}

static void test_timeline_unknown_ext_and_addr_records(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	const struct kd_dec_call *c;
	uint32_t extra[5] = { 1, 2, 3, 4, 5 };

	(void)state;
	snapbuild_enter_addr(sb, 0, 1, 100, 0x7f0012345678ull);
	snapbuild_ext(sb, 0, 1, 120, 0xEE, 42, extra, 5);
	snapbuild_exit_addr(sb, 0, 1, 170, 0x7f0012345678ull);
	d = decode(sb);
	c = find_call(d, 0x7f0012345678ull, 0);
	assert_non_null(c);
	assert_int_equal(c->end - c->begin, 70);
	assert_int_equal(c->flags, 0);
	assert_string_equal(kd_names_func(d, c->func), "0x7f0012345678");
	assert_int_equal(d->snap.warn.total, 0);
	kd_dec_free(d);
}

static void test_timeline_damaged_tail(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint32_t w[16];
	uint32_t n = snapbuild_block_start_words(w, 1, 0, 1000);

	(void)state;
	w[n++] = KTRACE_REC(1010, KTRACE_EV_ENTER_BASE);
	w[n++] = KTRACE_REC(1020, KTRACE_EV_EXIT_BASE);
	w[n++] = KTRACE_REC(1030, 9); /* 9 payload words, only 1 left */
	w[n++] = KTRACE_EXT_WORD(KTRACE_EXT_MARK, 1);
	snapbuild_block_raw(sb, 0, 0, w, n);
	d = decode(sb);
	assert_int_equal(d->ncalls, 1);
	assert_int_equal(d->core_stats[0].damaged_tails, 1);
	assert_int_equal(d->snap.warn.total, 1);
	assert_non_null(strstr(d->snap.warn.lines[0], "runs past the block end"));
	kd_dec_free(d);
}

static void test_timeline_spans_nest_with_functions(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	const struct kd_dec_call *c;

	(void)state;
	snapbuild_name(sb, 9, KTRACE_NAME_SPAN, "commit");
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_enter(sb, 0, 1, 100, 0);
	snapbuild_span(sb, 0, 1, 110, 9, 0);
	snapbuild_enter_addr(sb, 0, 1, 120, 0xB000);
	snapbuild_exit_addr(sb, 0, 1, 130, 0xB000);
	snapbuild_span(sb, 0, 1, 140, 9, 1);
	snapbuild_exit(sb, 0, 1, 150, 0);
	d = decode(sb);
	assert_int_equal(d->ncalls, 3);
	c = &d->calls[1];
	assert_true(c->flags & KD_CALL_SPAN);
	assert_string_equal(kd_names_func(d, c->func), "commit");
	assert_int_equal(c->depth, 1);
	assert_int_equal(c->end - c->begin, 30);
	assert_int_equal(c->self, 20);
	assert_int_equal(find_call(d, 0xB000, 0)->depth, 2);
	kd_dec_free(d);
}

static void test_timeline_requests_and_marks(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;

	(void)state;
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "get");
	snapbuild_name(sb, 2, KTRACE_NAME_REQUEST, "put");
	snapbuild_req(sb, 0, 1, 100, 1, 7, 0);
	snapbuild_req(sb, 0, 2, 110, 2, 7, 0);   /* same id, other kind */
	snapbuild_req(sb, 1, 2, 300, 2, 7, 1);
	snapbuild_req(sb, 0, 1, 400, 1, 7, 1);
	snapbuild_req(sb, 0, 1, 450, 1, 3, 1);   /* began before the window */
	snapbuild_mark(sb, 0, 1, 460, 5, 0xdeadbeefcafeull);
	snapbuild_req(sb, 0, 1, 500, 1, 8, 0);   /* not finished */
	d = decode(sb);
	assert_int_equal(d->nreqs, 4);
	for (uint32_t i = 0; i < d->nreqs; i++) {
		const struct kd_dec_request *r = &d->reqs[i];

		if (r->kind == 1 && r->id == 7)
			assert_true(r->begin == 100 && r->end == 400 && r->flags == 0);
		else if (r->kind == 2)
			assert_true(r->begin == 110 && r->end == 300 && r->flags == 0);
		else if (r->id == 3)
			assert_true(r->flags == KD_REQ_TRUNC_BEGIN && r->end == 450);
		else
			assert_true(r->id == 8 && r->flags == KD_REQ_TRUNC_END);
	}
	assert_int_equal(d->nmarks, 1);
	assert_int_equal(d->marks[0].value, 0xdeadbeefcafeull);
	assert_int_equal(d->marks[0].tick, 460);
	kd_dec_free(d);
}

static void test_timeline_complete_window(void **state)
{
	struct kd_dec *d;

	(void)state;
	for (int all = 0; all < 2; all++) {
		struct snapbuild *sb = snapbuild_new();

		snapbuild_func(sb, 0, 0xA000);
		snapbuild_enter(sb, 0, 1, 100, 0);   /* cpu 0: old data */
		snapbuild_exit(sb, 0, 1, 200, 0);
		snapbuild_enter(sb, 1, 2, 500, 0);   /* cpu 1 wrapped: data from 500 */
		snapbuild_exit(sb, 1, 2, 600, 0);
		snapbuild_enter(sb, 0, 1, 700, 0);
		snapbuild_exit(sb, 0, 1, 800, 0);
		snapbuild_core(sb, 1, 4, 9);
		d = decode_opts(sb, all);
		if (!all) {
			assert_int_equal(d->window_start, 500);
			assert_int_equal(d->dropped, 2);
			assert_int_equal(d->core_stats[0].dropped, 2);
			assert_int_equal(d->ncalls, 2);
		} else {
			assert_int_equal(d->window_start, 100);
			assert_int_equal(d->dropped, 0);
			assert_int_equal(d->ncalls, 3);
		}
		assert_true(d->snap.cores[1].wrapped);
		assert_false(d->snap.cores[0].wrapped);
		kd_dec_free(d);
	}
}

static void test_timeline_wall_clock(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;

	(void)state;
	snapbuild_info(sb)->tsc_hz = 2000000000ull; /* 2 GHz, shift 0: 0.5 ns ticks */
	snapbuild_anchor(sb, 1000000, 5000000000ll);
	snapbuild_anchor(sb, 3000000, 5001000010ll);  /* 10 ns of drift over 1 ms */
	snapbuild_enter(sb, 0, 1, 2000000, 0);
	d = decode(sb);
	assert_int_equal(kd_time_ticks_ns(d, 2000000), 1000000);
	assert_int_equal(kd_time_wall_ns(d, 1000000), 5000000000ll);
	assert_int_equal(kd_time_wall_ns(d, 2000000), 5000500005ll);  /* interpolated */
	assert_int_equal(kd_time_wall_ns(d, 5000000), 5002000010ll);  /* extrapolated */
	assert_int_equal(kd_time_wall_ns(d, 0), 4999500000ll);
	kd_dec_free(d);
}

static void test_timeline_ticks_ns_no_overflow(void **state)
{
	struct kd_dec d;

	(void)state;
	memset(&d, 0, sizeof(d));
	d.shift = 32;
	d.tsc_hz = 1000000;
	assert_int_equal(kd_time_ticks_ns(&d, 1), 4294967296000ull);
	assert_int_equal(kd_time_ticks_ns(&d, UINT64_MAX), UINT64_MAX); /* saturates */
	d.shift = 8;
	d.tsc_hz = 2560000000ull;
	assert_int_equal(kd_time_ticks_ns(&d, 1000000000000ull), 100000000000000ull);
}

/* A thread migrates within one tick, onto a core whose clock is behind:
 * THREAD segment numbers give its program order, timestamps could not. */
static void test_timeline_segments_order_migration(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	const struct kd_dec_call *f, *g;

	(void)state;
	snapbuild_thread_seq(sb, 1);
	snapbuild_func(sb, 0, 0xF000);
	snapbuild_func(sb, 1, 0x6000);
	snapbuild_enter(sb, 1, 2, 90, 1);    /* another thread on cpu 1 first */
	snapbuild_exit(sb, 1, 2, 91, 1);
	snapbuild_enter(sb, 0, 1, 100, 0);   /* thread 1 on cpu 0 */
	snapbuild_enter(sb, 0, 1, 101, 1);
	snapbuild_exit(sb, 1, 1, 97, 1);     /* migrated; cpu 1 reads 4 ticks behind */
	snapbuild_exit(sb, 1, 1, 98, 0);
	snapbuild_enter(sb, 0, 3, 102, 1);   /* another thread takes cpu 0 */
	snapbuild_exit(sb, 0, 3, 103, 1);
	d = decode(sb);
	assert_int_equal(d->ncalls, 4);
	assert_int_equal(d->unmatched_exits, 0);
	assert_int_equal(d->lost_exits, 0);
	f = find_call(d, 0xF000, 0);
	assert_non_null(f);
	assert_int_equal(f->flags, 0);
	assert_int_equal(f->depth, 0);
	for (uint32_t i = 0; i < d->ncalls; i++)
		if (d->calls[i].parent != KD_NONE) {
			g = &d->calls[i];
			assert_int_equal(d->calls[g->parent].func, f->func);
			assert_int_equal(g->depth, 1);
			assert_int_equal(g->flags, 0);
		}
	kd_dec_free(d);
}

/* Many calls per tick, a thread bouncing between cores every few calls. */
static void test_timeline_segments_same_tick_bounces(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;

	(void)state;
	snapbuild_thread_seq(sb, 1);
	for (uint32_t i = 0; i < 300; i++) {
		uint32_t cpu = (i / 3) % 2;          /* 3 records per core visit */
		uint64_t t = 1000 + i / 10;           /* 10 records per tick */

		if (i % 2 == 0)
			snapbuild_enter(sb, cpu, 1, t, (i / 2) % 7);
		else
			snapbuild_exit(sb, cpu, 1, t, (i / 2) % 7);
	}
	d = decode(sb);
	assert_int_equal(d->ncalls, 150);
	assert_int_equal(d->unmatched_exits, 0);
	assert_int_equal(d->lost_exits, 0);
	for (uint32_t i = 0; i < d->ncalls; i++) {
		assert_int_equal(d->calls[i].depth, 0);
		assert_int_equal(d->calls[i].flags, 0);
	}
	kd_dec_free(d);
}

/* Each core's records are complete up to its copy_tsc: the window ends at
 * the earliest one. */
static void test_timeline_copy_tsc_cut(void **state)
{
	for (int all = 0; all < 2; all++) {
		struct snapbuild *sb = snapbuild_new();
		struct kd_dec *d;
		const struct kd_dec_call *c;

		snapbuild_func(sb, 0, 0xA000);
		snapbuild_enter(sb, 0, 1, 100, 0);
		snapbuild_exit(sb, 0, 1, 200, 0);
		snapbuild_enter(sb, 0, 1, 300, 0);
		snapbuild_exit(sb, 0, 1, 600, 0);    /* after cpu 1's copy */
		snapbuild_enter(sb, 1, 2, 150, 0);
		snapbuild_core_copy_tsc(sb, 0, 700);
		snapbuild_core_copy_tsc(sb, 1, 500);
		d = decode_opts(sb, all);
		c = find_call(d, 0xA000, 1);
		assert_non_null(c);
		if (!all) {
			assert_int_equal(d->window_cut, 500);
			assert_int_equal(d->window_end, 500);
			assert_int_equal(d->dropped_after, 1);
			assert_int_equal(d->core_stats[0].dropped_after, 1);
			assert_int_equal(c->flags, KD_CALL_TRUNC_END);
			assert_int_equal(c->end, 500);
		} else {
			assert_int_equal(d->window_cut, UINT64_MAX);
			assert_int_equal(d->dropped_after, 0);
			assert_int_equal(c->flags, 0);
			assert_int_equal(c->end, 600);
		}
		kd_dec_free(d);
	}
	(void)state;
}

/* Invariants of the stacks on random traces: migrations, backward steps,
 * lost exits, exits without entries. */
static void test_timeline_random_invariants(void **state)
{
	uint64_t x = 88172645463325252ull;

	(void)state;
	for (int round = 0; round < 40; round++) {
		struct snapbuild *sb = snapbuild_new();
		struct kd_dec *d;
		uint32_t stack[4][64], depth[4] = { 0 };
		uint64_t t = 1000;

		snapbuild_thread_seq(sb, round % 2);

		for (int i = 0; i < 3000; i++) {
			uint32_t th, cpu, id;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			th = (uint32_t)(x % 4);
			cpu = (uint32_t)((x >> 8) % 3);
			t += (x >> 16) % 50;
			if ((x >> 30) % 16 == 0 && t > 20)
				t -= (x >> 40) % 20; /* late store / skew */
			if (depth[th] < 64 && ((x >> 24) % 3 != 0 || depth[th] == 0)) {
				id = (uint32_t)((x >> 32) % 20);
				if ((x >> 50) % 50 == 0)
					snapbuild_exit(sb, cpu, th + 1, t, id); /* exit without entry */
				else {
					snapbuild_enter(sb, cpu, th + 1, t, id);
					stack[th][depth[th]++] = id;
				}
			} else {
				depth[th]--;
				if ((x >> 50) % 40 != 0) /* sometimes the exit is lost */
					snapbuild_exit(sb, cpu, th + 1, t, stack[th][depth[th]]);
			}
		}
		d = decode(sb);
		for (uint32_t i = 0; i < d->ncalls; i++) {
			const struct kd_dec_call *c = &d->calls[i];

			assert_true(c->begin <= c->end);
			assert_true(c->self <= c->end - c->begin);
			if (c->parent != KD_NONE) {
				const struct kd_dec_call *p = &d->calls[c->parent];

				assert_true(c->parent < d->ncalls);
				assert_int_equal(p->thread, c->thread);
				assert_true(p->begin <= c->begin);
				assert_true(c->end <= p->end);
				assert_int_equal(c->depth, p->depth + 1);
			}
		}
		/* self + children = duration, for every call */
		{
			uint64_t *child = calloc(d->ncalls + 1, sizeof(*child));

			for (uint32_t i = 0; i < d->ncalls; i++)
				if (d->calls[i].parent != KD_NONE)
					child[d->calls[i].parent] += d->calls[i].end - d->calls[i].begin;
			for (uint32_t i = 0; i < d->ncalls; i++)
				assert_int_equal(d->calls[i].self + child[i],
				                 d->calls[i].end - d->calls[i].begin);
			free(child);
		}
		kd_dec_free(d);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timeline_forward_steps_wrap),
		cmocka_unit_test(test_timeline_tsc_records_wrap),
		cmocka_unit_test(test_timeline_late_store_is_backward),
		cmocka_unit_test(test_timeline_idle_for_minutes),
		cmocka_unit_test(test_timeline_thread_before_tsc),
		cmocka_unit_test(test_timeline_blocks_sorted_by_s_with_wrap),
		cmocka_unit_test(test_timeline_thread_switch_mid_block),
		cmocka_unit_test(test_timeline_migration),
		cmocka_unit_test(test_timeline_overwrite_edges),
		cmocka_unit_test(test_timeline_lost_exit),
		cmocka_unit_test(test_timeline_unknown_ext_and_addr_records),
		cmocka_unit_test(test_timeline_damaged_tail),
		cmocka_unit_test(test_timeline_spans_nest_with_functions),
		cmocka_unit_test(test_timeline_requests_and_marks),
		cmocka_unit_test(test_timeline_complete_window),
		cmocka_unit_test(test_timeline_wall_clock),
		cmocka_unit_test(test_timeline_ticks_ns_no_overflow),
		cmocka_unit_test(test_timeline_random_invariants),
		cmocka_unit_test(test_timeline_segments_order_migration),
		cmocka_unit_test(test_timeline_segments_same_tick_bounces),
		cmocka_unit_test(test_timeline_copy_tsc_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
