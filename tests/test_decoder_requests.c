/*
 * test_decoder_requests.c - format 2 on the decoder side: held runs placed
 * in their thread's program order, compact request records, the REQUESTS
 * section, all on synthetic snapshots (snapbuild).
 *
 * Functions are ids 0..9 at 0x1000 + 0x100 * id; a call is checked as
 * (id, depth, begin, end, held flag) in the collector's order (a thread's
 * calls in entry order).  Ticks are ns (tsc_hz 1 GHz, shift 0).
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

#define KIND_GET 1u

struct want {
	uint32_t id, depth;
	uint64_t begin, end;
	int held;
	uint32_t flags;          /* of KD_CALL_TRUNC_BEGIN, TRUNC_END, EXIT_LOST */
};

static struct snapbuild *new_sb(void)
{
	struct snapbuild *sb = snapbuild_new();

	snapbuild_thread_seq(sb, 1);
	snapbuild_thread(sb, 1, 101, "w1", 0);
	snapbuild_thread(sb, 2, 102, "w2", 0);
	for (uint32_t i = 0; i < 10; i++)
		snapbuild_func(sb, i, 0x1000 + 0x100 * (uint64_t)i);
	snapbuild_name(sb, KIND_GET, KTRACE_NAME_REQUEST, "get");
	return sb;
}

static struct kd_dec *decode(struct snapbuild *sb)
{
	struct kd_dec_opts o = { .no_symbols = 1 };
	struct kd_dec_error err;
	struct kd_dec *d = snapbuild_decode(sb, &o, &err);

	if (!d)
		fail_msg("decode failed: %s", err.msg);
	return d;
}

static uint32_t thread_index(const struct kd_dec *d, uint32_t slot)
{
	for (uint32_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].slot == slot)
			return i;
	fail_msg("no thread of slot %u", slot);
	return KD_NONE;
}

static void dump_calls(const struct kd_dec *d, uint32_t th)
{
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];

		if (c->thread == th)
			fprintf(stderr, "  f%llx depth %u [%llu, %llu] flags 0x%x\n",
			        (unsigned long long)(d->funcs[c->func].addr - 0x1000) / 0x100, c->depth,
			        (unsigned long long)c->begin, (unsigned long long)c->end, c->flags);
	}
}

/* The calls of thread slot, in recorded order, are exactly w[0..n). */
static void expect_calls(const struct kd_dec *d, uint32_t slot, const struct want *w, uint32_t n)
{
	uint32_t th = thread_index(d, slot), k = 0, pre = 0;
	const uint32_t mask = KD_CALL_TRUNC_BEGIN | KD_CALL_TRUNC_END | KD_CALL_EXIT_LOST;

	for (uint32_t i = 0; i < n; i++)
		pre += !!(w[i].flags & KD_CALL_TRUNC_BEGIN);
	if (getenv("KTRACE_TEST_DUMP"))
		dump_calls(d, th);

	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		uint64_t addr;

		if (c->thread != th)
			continue;
		if (k >= n)
			fail_msg("slot %u: more than %u calls", slot, n);
		addr = d->funcs[c->func].addr;
		if (addr != 0x1000 + 0x100 * (uint64_t)w[k].id || c->depth != w[k].depth ||
		    c->begin != w[k].begin || c->end != w[k].end ||
		    !!(c->flags & KD_CALL_HELD) != w[k].held || (c->flags & mask) != w[k].flags)
			fail_msg("slot %u call %u: got f%llx depth %u [%llu, %llu] flags 0x%x; want f%u "
			         "depth %u [%llu, %llu] held %d", slot, k,
			         (unsigned long long)(addr - 0x1000) / 0x100, c->depth,
			         (unsigned long long)c->begin, (unsigned long long)c->end, c->flags,
			         w[k].id, w[k].depth, (unsigned long long)w[k].begin,
			         (unsigned long long)w[k].end, w[k].held);
		k++;
	}
	assert_int_equal(k, n);
	assert_int_equal(d->unmatched_exits, pre);
	assert_int_equal(d->lost_exits, 0);
}

static const struct kd_dec_request *find_req(const struct kd_dec *d, const char *label)
{
	char buf[128];

	for (uint32_t i = 0; i < d->nreqs; i++)
		if (!strcmp(kd_names_req(d, &d->reqs[i], buf, sizeof(buf)), label))
			return &d->reqs[i];
	fail_msg("no request \"%s\"", label);
	return NULL;
}

/*
 * (a) A kept request in the middle of a thread's ring segment: A and B
 * before it (positions < P), C and A's exit after it (>= P), the held run
 * (the request, D and E) written after all of them in the same stream.
 * The ring piece is cut at P; the held calls are children of A.
 */
static void test_requests_held_split_at_p(void **state)
{
	struct snapbuild *sb = new_sb();
	uint32_t p, seg;
	struct kd_dec *d;
	const struct kd_dec_request *q;
	static const struct want w[] = {
		{ 0, 0, 1000, 1120, 0, 0 }, { 1, 1, 1010, 1020, 0, 0 }, { 3, 1, 1040, 1070, 1, 0 },
		{ 4, 2, 1050, 1060, 1, 0 }, { 2, 1, 1100, 1110, 0, 0 },
	};

	(void)state;
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_enter(sb, 0, 1, 1010, 1);
	snapbuild_exit(sb, 0, 1, 1020, 1);
	p = snapbuild_pos(sb, 0);
	seg = snapbuild_seg(sb, 1);
	snapbuild_enter(sb, 0, 1, 1100, 2);
	snapbuild_exit(sb, 0, 1, 1110, 2);
	snapbuild_exit(sb, 0, 1, 1120, 0);
	snapbuild_held(sb, 0, 1, 1030, seg, p, 5, 0);
	snapbuild_req_open(sb, 0, 1, 1030, KIND_GET, 7);
	snapbuild_enter(sb, 0, 1, 1040, 3);
	snapbuild_enter(sb, 0, 1, 1050, 4);
	snapbuild_exit(sb, 0, 1, 1060, 4);
	snapbuild_exit(sb, 0, 1, 1070, 3);
	snapbuild_req_close(sb, 0, 1, 1080, KTRACE_REQ_SLOW);
	snapbuild_held_end(sb, 0);
	d = decode(sb);
	expect_calls(d, 1, w, 5);
	q = find_req(d, "get #7");
	assert_int_equal(q->begin, 1030);
	assert_int_equal(q->end, 1080);
	assert_int_equal(q->keep, KTRACE_REQ_SLOW);
	assert_int_equal(q->flags & (KD_REQ_TRUNC_BEGIN | KD_REQ_TRUNC_END), 0);
	{
		char *out = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&out, &n);

		kd_out_text(f, d, &(struct kd_out_opts){ 0 });
		fclose(f);
		assert_non_null(strstr(out, "0x1300  30 ns  [held]")); /* D: f3 */
		free(out);
	}
	/* the held run is not the core's occupancy: 6 ring records only */
	assert_int_equal(d->core_stats[0].events, 6);
	assert_int_equal(d->core_stats[0].held, 6);
	for (uint32_t i = 0; i < d->nruns; i++)
		assert_true(d->runs[i].end <= 1120 && d->runs[i].begin >= 1000);
	kd_dec_free(d);
}

/*
 * (b) A held run that starts with the exit of a call entered in the ring
 * before it (B) and ends with calls still open (C, D) that the ring closes
 * after it: nesting exact, nothing truncated, no exit lost or unmatched.
 */
static void test_requests_held_nesting_across(void **state)
{
	struct snapbuild *sb = new_sb();
	uint32_t p, seg;
	struct kd_dec *d;
	static const struct want w[] = {
		{ 0, 0, 1000, 1120, 0, 0 }, { 1, 1, 1010, 1020, 0, 0 },
		{ 2, 1, 1030, 1110, 1, 0 }, { 3, 2, 1040, 1100, 1, 0 },
	};

	(void)state;
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_enter(sb, 0, 1, 1010, 1);
	p = snapbuild_pos(sb, 0);
	seg = snapbuild_seg(sb, 1);
	snapbuild_exit(sb, 0, 1, 1100, 3);
	snapbuild_exit(sb, 0, 1, 1110, 2);
	snapbuild_exit(sb, 0, 1, 1120, 0);
	snapbuild_held(sb, 0, 1, 1020, seg, p, 1, 0);
	snapbuild_exit(sb, 0, 1, 1020, 1);
	snapbuild_req_open(sb, 0, 1, 1025, KIND_GET, 8);
	snapbuild_enter(sb, 0, 1, 1030, 2);
	snapbuild_enter(sb, 0, 1, 1040, 3);
	snapbuild_req_close(sb, 0, 1, 1050, KTRACE_REQ_SAMPLED);
	snapbuild_held_end(sb, 0);
	d = decode(sb);
	expect_calls(d, 1, w, 4);
	assert_int_equal(find_req(d, "get #8")->end, 1050);
	assert_int_equal(d->counts.trunc_begin, 0);
	assert_int_equal(d->counts.trunc_end, 0);
	kd_dec_free(d);
}

/*
 * A held run first in its thread's walk (P before every ring record of
 * the segment) that starts with the exit of a call entered before the
 * window (X), on another core than the ring records, which start with the
 * exit of another one (Y): the pre-pass walks the same merged order and
 * opens Y, then X, at the thread's start; D is Y's child, not X's; C
 * follows Y's exit at the outermost level.
 */
static void test_requests_held_first_before_window(void **state)
{
	struct snapbuild *sb = new_sb();
	uint32_t seg;
	struct kd_dec *d;
	static const struct want w[] = {
		{ 8, 0, 1020, 1100, 0, KD_CALL_TRUNC_BEGIN }, { 7, 1, 1020, 1020, 0, KD_CALL_TRUNC_BEGIN },
		{ 3, 1, 1030, 1040, 1, 0 }, { 2, 0, 1110, 1120, 0, 0 },
	};

	(void)state;
	snapbuild_exit(sb, 0, 1, 1100, 8);
	snapbuild_enter(sb, 0, 1, 1110, 2);
	snapbuild_exit(sb, 0, 1, 1120, 2);
	seg = snapbuild_seg(sb, 1);
	snapbuild_held(sb, 1, 1, 1020, seg, 0, 1, 0); /* P = the block's S: before it all */
	snapbuild_exit(sb, 1, 1, 1020, 7);
	snapbuild_enter(sb, 1, 1, 1030, 3);
	snapbuild_exit(sb, 1, 1, 1040, 3);
	snapbuild_held_end(sb, 1);
	d = decode(sb);
	assert_int_equal(d->window_start, 1020);
	expect_calls(d, 1, w, 4);
	kd_dec_free(d);
}

/*
 * (c) Two held runs with the same (seg, P), written in the stream in the
 * opposite order, ordered by h modulo 2^24 (0xFFFFFF before 0); and a run
 * split in 3 chunks, each in its own block, on two cores (chunk 1 on cpu 3,
 * chunks 0 and 2 on cpu 2, chunk 2 written first).
 */
static void test_requests_held_order_and_chunks(void **state)
{
	struct snapbuild *sb = new_sb();
	uint32_t p, seg, p2, seg2;
	struct kd_dec *d;
	static const struct want w1[] = {
		{ 0, 0, 1000, 1200, 0, 0 }, { 6, 1, 1020, 1030, 1, 0 }, { 5, 1, 1100, 1110, 1, 0 },
	};
	static const struct want w2[] = {
		{ 0, 0, 2000, 2500, 0, 0 }, { 4, 1, 2010, 2060, 1, 0 }, { 5, 2, 2020, 2030, 1, 0 },
		{ 6, 2, 2040, 2050, 1, 0 },
	};

	(void)state;
	snapbuild_enter(sb, 0, 1, 1000, 0);
	p = snapbuild_pos(sb, 0);
	seg = snapbuild_seg(sb, 1);
	snapbuild_exit(sb, 0, 1, 1200, 0);
	snapbuild_held(sb, 0, 1, 1100, seg, p, 0, 0); /* the later hold: h wrapped to 0 */
	snapbuild_enter(sb, 0, 1, 1100, 5);
	snapbuild_exit(sb, 0, 1, 1110, 5);
	snapbuild_held_end(sb, 0);
	snapbuild_held(sb, 0, 1, 1020, seg, p, 0xFFFFFF, 0);
	snapbuild_enter(sb, 0, 1, 1020, 6);
	snapbuild_exit(sb, 0, 1, 1030, 6);
	snapbuild_held_end(sb, 0);

	snapbuild_enter(sb, 1, 2, 2000, 0);
	p2 = snapbuild_pos(sb, 1);
	seg2 = snapbuild_seg(sb, 2);
	snapbuild_exit(sb, 1, 2, 2500, 0);
	snapbuild_set_next_s(sb, 2, 1024); /* chunk 2's block first in S order */
	snapbuild_held(sb, 2, 2, 2050, seg2, p2, 3, 2);
	snapbuild_exit(sb, 2, 2, 2050, 6);
	snapbuild_exit(sb, 2, 2, 2060, 4);
	snapbuild_held_end(sb, 2);
	snapbuild_flush(sb, 2);
	snapbuild_held(sb, 3, 2, 2030, seg2, p2, 3, 1);
	snapbuild_exit(sb, 3, 2, 2030, 5);
	snapbuild_enter(sb, 3, 2, 2040, 6);
	snapbuild_held_end(sb, 3);
	snapbuild_set_next_s(sb, 2, 0);
	snapbuild_held(sb, 2, 2, 2010, seg2, p2, 3, 0);
	snapbuild_enter(sb, 2, 2, 2010, 4);
	snapbuild_enter(sb, 2, 2, 2020, 5);
	snapbuild_held_end(sb, 2);
	d = decode(sb);
	expect_calls(d, 1, w1, 3);
	expect_calls(d, 2, w2, 4);
	kd_dec_free(d);
}

/*
 * (d) Requests across threads, nested, with user ids, and the trigger:
 * thread 1 opens get #6 then get #5; thread 2 ends #5 (REQ_CLOSE_ANY, it
 * names slot 1); thread 1's next REQ_CLOSE then ends #6, its innermost
 * request still open.  Nested #10 > #11 end innermost first.  #7 carries
 * the program's id.  The trigger (format 2) names #5 by its number.
 */
static void test_requests_across_threads_and_nested(void **state)
{
	struct snapbuild *sb = new_sb();
	struct ktrace_trigger_rec tr;
	struct kd_dec *d;
	const struct kd_dec_request *q;
	uint32_t t1, t2;
	char buf[256], *out = NULL;
	size_t n = 0;
	FILE *f;

	(void)state;
	memset(&tr, 0, sizeof(tr));
	tr.request_id = 5;
	tr.kind_id = KIND_GET;
	tr.thread_slot = 1;
	tr.tid = 101;
	tr.begin_tsc = 110;
	tr.end_tsc = 130;
	tr.why = KTRACE_TRIGGER_ABSOLUTE;
	strcpy(tr.kind, "get");
	snapbuild_trigger(sb, &tr);
	snapbuild_enter(sb, 0, 1, 90, 0);
	snapbuild_req_open(sb, 0, 1, 100, KIND_GET, 6);
	snapbuild_req_open(sb, 0, 1, 110, KIND_GET, 5);
	snapbuild_enter(sb, 1, 2, 120, 1);
	snapbuild_req_close_any(sb, 1, 2, 130, KTRACE_REQ_DIRECT, KIND_GET, 5, 1);
	snapbuild_exit(sb, 1, 2, 135, 1);
	snapbuild_req_close(sb, 0, 1, 140, KTRACE_REQ_SLOW);
	snapbuild_req_open_id(sb, 0, 1, 200, KIND_GET, 7, 987654);
	snapbuild_req_close(sb, 0, 1, 210, KTRACE_REQ_SAMPLED);
	snapbuild_req_open(sb, 0, 1, 300, KIND_GET, 10);
	snapbuild_req_open(sb, 0, 1, 310, KIND_GET, 11);
	snapbuild_req_close(sb, 0, 1, 320, KTRACE_REQ_NESTED);
	snapbuild_req_close(sb, 0, 1, 330, KTRACE_REQ_SLOW);
	snapbuild_exit(sb, 0, 1, 400, 0);
	d = decode(sb);
	t1 = thread_index(d, 1);
	t2 = thread_index(d, 2);
	assert_int_equal(d->nreqs, 5);
	q = find_req(d, "get #5");
	assert_int_equal(q->begin, 110);
	assert_int_equal(q->end, 130);
	assert_int_equal(q->thread, t1);
	assert_int_equal(q->end_thread, t2);
	assert_int_equal(q->keep, KTRACE_REQ_DIRECT);
	assert_true(q->flags & KD_REQ_TRIGGER);
	assert_ptr_equal(q, &d->reqs[d->trigger_req]);
	q = find_req(d, "get #6");
	assert_int_equal(q->begin, 100);
	assert_int_equal(q->end, 140);
	assert_int_equal(q->end_thread, t1);
	assert_int_equal(q->keep, KTRACE_REQ_SLOW);
	q = find_req(d, "get id=987654");
	assert_int_equal(q->id, 7);
	assert_int_equal(q->end, 210);
	assert_int_equal(q->keep, KTRACE_REQ_SAMPLED);
	q = find_req(d, "get #11");
	assert_int_equal(q->end, 320);
	q = find_req(d, "get #10");
	assert_int_equal(q->end, 330);
	for (uint32_t i = 0; i < d->nreqs; i++)
		assert_int_equal(d->reqs[i].flags & (KD_REQ_TRUNC_BEGIN | KD_REQ_TRUNC_END), 0);
	/* never the raw 64-bit id: the text timeline and the summary say "get #5" */
	f = open_memstream(&out, &n);
	kd_out_summary(f, d);
	kd_out_text(f, d, &(struct kd_out_opts){ 0 });
	fclose(f);
	assert_non_null(strstr(out, "trigger:   slow \"get\" request #5 on tid 101"));
	assert_non_null(strstr(out, ">> request get #5  20 ns  kept: direct  ended on w2/102  <== TRIGGER"));
	assert_non_null(strstr(out, ">> request get id=987654"));
	free(out);
	(void)buf;
	kd_dec_free(d);
}

/*
 * A REQ_CLOSE whose REQ_OPEN is not in the file (the request began before
 * the window) ends a request of unknown kind and number; when the trigger
 * names that thread and that end, it is the trigger's request (one
 * request, not two).  Without a trigger it stays "begun before the window".
 */
static void test_requests_close_without_open(void **state)
{
	struct ktrace_trigger_rec tr;
	struct kd_dec *d;
	const struct kd_dec_request *q;
	char buf[128];

	(void)state;
	for (int with_trigger = 0; with_trigger < 2; with_trigger++) {
		struct snapbuild *sb = new_sb();

		if (with_trigger) {
			memset(&tr, 0, sizeof(tr));
			tr.request_id = 4321;
			tr.kind_id = KIND_GET;
			tr.thread_slot = 1;
			tr.tid = 101;
			tr.begin_tsc = 500;
			tr.end_tsc = 1502;
			tr.why = KTRACE_TRIGGER_ABSOLUTE;
			strcpy(tr.kind, "get");
			snapbuild_trigger(sb, &tr);
		}
		snapbuild_enter(sb, 0, 1, 1000, 0);
		snapbuild_exit(sb, 0, 1, 1400, 0);
		snapbuild_req_close(sb, 0, 1, 1500, KTRACE_REQ_SLOW | KTRACE_REQ_TRIGGER);
		d = decode(sb);
		assert_int_equal(d->nreqs, 1);
		q = &d->reqs[0];
		assert_int_equal(q->end, 1500);
		assert_true(q->flags & KD_REQ_TRUNC_BEGIN);
		if (with_trigger) {
			assert_int_equal(d->trigger_req, 0);
			assert_string_equal(kd_names_req(d, q, buf, sizeof(buf)), "get #4321");
		} else {
			assert_int_equal(d->trigger_req, KD_NONE);
			assert_string_equal(kd_names_req(d, q, buf, sizeof(buf)),
			                    "request (begun before the window)");
		}
		kd_dec_free(d);
	}
}

/* Format 1 ids are the thread's slot and sequence: "get #3.17". */
static void test_requests_format1_label(void **state)
{
	struct snapbuild *sb = new_sb();
	struct kd_dec *d;
	const struct kd_dec_request *q;

	(void)state;
	snapbuild_version(sb, 1);
	snapbuild_enter(sb, 0, 1, 90, 0);
	snapbuild_req(sb, 0, 1, 100, KIND_GET, (3ull << 32) | 17, 0);
	snapbuild_req(sb, 0, 1, 150, KIND_GET, (3ull << 32) | 17, 1);
	snapbuild_exit(sb, 0, 1, 200, 0);
	d = decode(sb);
	assert_int_equal(d->snap.hdr.version, 1);
	q = find_req(d, "get #3.17");
	assert_int_equal(q->end, 150);
	kd_dec_free(d);
}

/*
 * Explain on format 2: the answer first (the slow request, the typical
 * duration from the histogram, the compared request, the cause and its
 * call path), before the evidence; the compared request is the median of
 * the sampled ones (the short NESTED ones do not count); the muted list is
 * condensed to 10 names and "and 4 more".
 */
static void test_requests_explain_answer_first(void **state)
{
	struct snapbuild *sb = new_sb();
	struct ktrace_req_hdr h = { 0 };
	struct ktrace_req_kind_rec k = { 0 };
	uint64_t dur[1000], t = 1000;
	struct {
		struct ktrace_budget_rec b;
		struct ktrace_muted_rec m[14];
	} bud;
	struct kd_dec *d;
	char *out = NULL, *ans, *cause, *path, *evid, *muted;
	size_t n = 0;
	FILE *f;

	(void)state;
	for (uint32_t i = 0; i < 9; i++, t += 1000) { /* sampled: 100 + 10 i ticks */
		snapbuild_req_open(sb, 0, 1, t, KIND_GET, i + 1);
		snapbuild_enter(sb, 0, 1, t + 1, 0);
		snapbuild_enter(sb, 0, 1, t + 2, 1);
		snapbuild_exit(sb, 0, 1, t + 50, 1);
		snapbuild_exit(sb, 0, 1, t + 99 + 10 * i, 0);
		snapbuild_req_close(sb, 0, 1, t + 100 + 10 * i, KTRACE_REQ_SAMPLED);
	}
	for (uint32_t i = 0; i < 12; i++, t += 100) { /* short ones kept for another reason */
		snapbuild_req_open(sb, 0, 1, t, KIND_GET, 100 + i);
		snapbuild_req_close(sb, 0, 1, t + 5, KTRACE_REQ_NESTED);
	}
	snapbuild_req_open(sb, 0, 1, t, KIND_GET, 500);
	snapbuild_enter(sb, 0, 1, t + 1, 0);
	snapbuild_enter(sb, 0, 1, t + 2, 2);
	snapbuild_exit(sb, 0, 1, t + 9000, 2);
	snapbuild_exit(sb, 0, 1, t + 9100, 0);
	snapbuild_req_close(sb, 0, 1, t + 9101, KTRACE_REQ_SLOW);
	h.slice_ticks = 100000;
	h.slice_count = 8;
	h.sub_bits = 4;
	snapbuild_req_hdr(sb, &h);
	k.kind_id = KIND_GET;
	k.ended = 1000;
	k.kept_slow = 1;
	k.kept_sampled = 9;
	k.kept_other = 12;
	k.dropped = 978;
	snapbuild_req_kind(sb, &k);
	for (uint32_t i = 0; i < 1000; i++)
		dur[i] = i < 999 ? 100 : 9101;
	snapbuild_req_slice(sb, 0, 100000, dur, 1000);
	memset(&bud, 0, sizeof(bud));
	bud.b.window_s = 30;
	bud.b.flags = KTRACE_BUDGET_FILTER_ON;
	for (uint32_t i = 0; i < 14; i++) {
		bud.m[i].addr = 0x9000 + 0x10 * (uint64_t)i;
		bud.m[i].id = 20 + i;
		bud.m[i].why = KTRACE_MUTE_HOT_SHORT;
	}
	snapbuild_raw_section(sb, KTRACE_SEC_BUDGET, 14, &bud, sizeof(bud), 0);
	d = decode(sb);
	f = open_memstream(&out, &n);
	kd_out_explain(f, d, &(struct kd_out_opts){ 0 });
	fclose(f);
	ans = strstr(out, "no trigger; slowest request: \"get\" request #500 on w1/101");
	cause = strstr(out, "  cause: 0x1200, +8.998 us of self time");
	path = strstr(out, "  call path: 0x1000 > 0x1200\n");
	evid = strstr(out, "where the extra time went");
	muted = strstr(out, "self time includes muted calls of 14 functions: ");
	if (!ans || !cause || !path || !evid || !muted || ans > cause || cause > path ||
	    path > evid || evid > muted)
		fail_msg("explain does not answer first:\n%s", out);
	/* the typical duration from the histogram (100 ticks: bucket [100, 104)) */
	assert_non_null(strstr(out, "typical \"get\": median 104 ns, p99 104 ns over the 1000 "
	                            "requests of the window"));
	/* the compared request: the median of the 9 sampled ones (#5, 140 ticks) */
	assert_non_null(strstr(out, "median \"get\" request in this window: #5 on w1/101 took "
	                            "140 ns (the median of the requests kept as typical samples"));
	assert_non_null(strstr(muted, ", and 4 more ("));
	assert_null(strstr(muted, "0x90a0")); /* the 11th is not named */
	if (getenv("KTRACE_TEST_DUMP"))
		fputs(out, stderr);
	free(out);
	kd_dec_free(d);
}

/* ---- (e) the REQUESTS histogram ---------------------------------------------- */

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	return *x >> 33;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Six slices of about 1 ms around a window of [1.0, 5.0] ms: the first and
 * the last two lie outside (their durations are huge: counting them would show
 * in the max and the p99.9), the ones cut by the window's edges count
 * whole.  The percentiles the decoder reads off the summed buckets are
 * checked against the sorted durations: never below, at most 1/16 above.
 */
static void test_requests_histogram(void **state)
{
	struct snapbuild *sb = new_sb();
	struct ktrace_req_hdr h = { 0 };
	struct ktrace_req_kind_rec k = { 0 };
	static const uint64_t start[6] = { 0, 900000, 2000000, 3500000, 5100000, 6000000 };
	static const uint64_t end[6] = { 899999, 1900000, 3000000, 5050000, 6000000, 7000000 };
	static const int inside[6] = { 0, 1, 1, 1, 0, 0 };
	uint64_t *all = calloc(6 * 2000, sizeof(*all)), nall = 0, x = 42, truemax = 0;
	uint64_t dur[2000];
	static const uint32_t q1000[4] = { 500, 900, 990, 999 };
	struct kd_req_hist hist;
	struct kd_dec *d;
	char *out = NULL;
	size_t n = 0;
	FILE *f;

	(void)state;
	assert_non_null(all);
	snapbuild_enter(sb, 0, 1, 1000000, 0);
	snapbuild_exit(sb, 0, 1, 5000000, 0);
	h.slice_ticks = 1000000;
	h.slice_count = 64;
	h.sub_bits = 4;
	h.flags = KTRACE_REQS_HOLD;
	snapbuild_req_hdr(sb, &h);
	k.kind_id = KIND_GET;
	k.ended = 9000;
	k.kept_slow = 12;
	k.kept_sampled = 30;
	k.kept_other = 2;
	k.dropped = 9000 - 44;
	k.threshold_ns = 2000000;
	snapbuild_req_kind(sb, &k);
	for (int s = 0; s < 6; s++) {
		uint32_t cnt = 500 + 300 * (uint32_t)s;

		for (uint32_t i = 0; i < cnt; i++) {
			/* 1 tick .. ~4 ms, log-spread; outside slices: ~1 s */
			uint64_t v = inside[s] ? 1 + (lcg(&x) % (1u << (lcg(&x) % 22))) :
			                         1000000000ull + i;

			dur[i] = v;
			if (inside[s]) {
				all[nall++] = v;
				if (v > truemax)
					truemax = v;
			}
		}
		snapbuild_req_slice(sb, start[s], end[s], dur, cnt);
	}
	d = decode(sb);
	assert_int_equal(d->window_start, 1000000);
	assert_int_equal(d->window_end, 5000000);
	assert_int_equal(kd_requests_hist(d, 0, d->window_start, d->window_end, &hist), 0);
	assert_int_equal(hist.nslices, 3);
	assert_int_equal(hist.count, nall);
	assert_int_equal(hist.max_ticks, truemax);
	assert_int_equal(hist.first_tsc, 900000);
	assert_int_equal(hist.last_tsc, 5050000);
	qsort(all, nall, sizeof(*all), cmp_u64);
	for (int qi = 0; qi < 4; qi++) {
		uint64_t rank = (nall * q1000[qi] + 999) / 1000, v = all[rank - 1];
		uint64_t got = hist.pct_ticks[qi];

		if (got < v || got > v + v / 16)
			fail_msg("p%.1f: %llu, true %llu (allowed %llu..%llu)", q1000[qi] / 10.0,
			         (unsigned long long)got, (unsigned long long)v, (unsigned long long)v,
			         (unsigned long long)(v + v / 16));
	}
	assert_true(hist.err_pct > 6.24 && hist.err_pct < 6.26);
	f = open_memstream(&out, &n);
	kd_out_summary(f, d);
	fclose(f);
	assert_non_null(strstr(out, "  get: 9000 ended; kept 12 slow, 30 sampled, 2 other; "
	                            "8956 not kept (counted only)"));
	assert_non_null(strstr(out, "(3 slices: the window to within one slice)"));
	assert_non_null(strstr(out, "at most 6.25 % above the true value, never below"));
	free(out);
	free(all);
	kd_dec_free(d);
}

/* The bucket formula of ktrace_format.h against a direct computation. */
static void test_requests_bucket_bounds(void **state)
{
	(void)state;
	for (uint64_t v = 1; v < (1ull << 40); v = v * 3 + 1) {
		uint32_t b = snapbuild_req_bucket_of(v, 4);
		uint64_t hi = kd_requests_bucket_hi(b, 4);

		assert_true(hi > v);
		if (v >= 16)
			assert_true(hi - v <= v / 16 + 1);
		assert_int_equal(snapbuild_req_bucket_of(hi - 1, 4), b);
		if (hi != UINT64_MAX)
			assert_int_not_equal(snapbuild_req_bucket_of(hi, 4), b);
	}
	assert_int_equal(kd_requests_bucket_hi(snapbuild_req_bucket_of(UINT64_MAX, 4), 4), UINT64_MAX);
}

/* ---- (f) hostile REQUESTS sections ------------------------------------------- */

static int read_with(const void *sec, size_t size, uint32_t count, struct kd_dec_error *err)
{
	struct snapbuild *sb = new_sb();
	struct kd_snap snap;
	uint8_t *buf;
	size_t len;
	int rc;

	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_raw_section(sb, KTRACE_SEC_REQUESTS, count, sec, size, 0);
	snapbuild_finish(sb, &buf, &len);
	snapbuild_free(sb);
	memset(&snap, 0, sizeof(snap));
	rc = kd_snap_read(buf, len, &snap, err);
	if (rc == 0)
		kd_snap_free(&snap);
	free(buf);
	return rc;
}

struct secimg {
	struct ktrace_req_hdr h;
	struct ktrace_req_kind_rec k;
	struct ktrace_req_slice_rec s;
	struct ktrace_req_bucket b[2];
};

static struct secimg good_sec(void)
{
	struct secimg m;

	memset(&m, 0, sizeof(m));
	m.h.nkinds = 1;
	m.h.sub_bits = 4;
	m.h.slice_ticks = 1000;
	m.k.kind_id = KIND_GET;
	m.k.nslices = 1;
	m.k.ended = 3;
	m.s.start_tsc = 0;
	m.s.end_tsc = 1000;
	m.s.count = 3;
	m.s.nbuckets = 2;
	m.b[0] = (struct ktrace_req_bucket){ 5, 1 };
	m.b[1] = (struct ktrace_req_bucket){ 40, 2 };
	return m;
}

static void expect_bad(const struct secimg *m, size_t size, const char *text)
{
	struct kd_dec_error err;
	int rc = read_with(m, size, 1, &err);

	assert_int_equal(rc, KD_ECORRUPT);
	assert_true(err.has_offset);
	if (!strstr(err.msg, "REQUESTS") || !strstr(err.msg, text))
		fail_msg("error \"%s\" does not name REQUESTS and \"%s\"", err.msg, text);
}

static void test_requests_hostile_section(void **state)
{
	struct secimg m = good_sec();
	struct kd_dec_error err;

	(void)state;
	assert_int_equal(read_with(&m, sizeof(m), 1, &err), 0);
	expect_bad(&m, sizeof(m.h) - 8, "smaller than its");
	expect_bad(&m, sizeof(m.h) + 8, "kinds do not fit");
	expect_bad(&m, sizeof(m) - 8, "buckets do not fit");
	m = good_sec();
	m.h.nkinds = UINT32_MAX;
	expect_bad(&m, sizeof(m), "kinds do not fit");
	m = good_sec();
	m.k.nslices = UINT32_MAX;
	expect_bad(&m, sizeof(m), "slices do not fit");
	m = good_sec();
	m.s.nbuckets = UINT32_MAX;
	expect_bad(&m, sizeof(m), "buckets do not fit");
	m = good_sec();
	m.b[1].bucket = 5;
	expect_bad(&m, sizeof(m), "indices must ascend");
	m = good_sec();
	m.b[1].bucket = UINT32_MAX;
	expect_bad(&m, sizeof(m), "indices must ascend");
	m = good_sec();
	m.h.sub_bits = 0;
	expect_bad(&m, sizeof(m), "sub_bits");
	m = good_sec();
	m.h.sub_bits = 40;
	expect_bad(&m, sizeof(m), "sub_bits");
	m = good_sec();
	m.s.end_tsc = 0;
	m.s.start_tsc = 5;
	expect_bad(&m, sizeof(m), "before it starts");
	/* Every truncation and every byte flip (CRC recomputed): an error or a
	 * section that reads, never a crash (the ASan build runs this). */
	for (size_t len = 0; len < sizeof(m); len++) {
		m = good_sec();
		(void)read_with(&m, len, 1, &err);
	}
	for (size_t i = 0; i < sizeof(m); i++)
		for (int bit = 0; bit < 8; bit += 3) {
			m = good_sec();
			((uint8_t *)&m)[i] ^= (uint8_t)(1u << bit);
			(void)read_with(&m, sizeof(m), 1, &err);
		}
}

/* A format-1 file with a REQUESTS section: not read (a warning). */
static void test_requests_section_in_format1(void **state)
{
	struct secimg m = good_sec();
	struct snapbuild *sb = new_sb();
	struct kd_dec *d;

	(void)state;
	snapbuild_version(sb, 1);
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_raw_section(sb, KTRACE_SEC_REQUESTS, 1, &m, sizeof(m), 0);
	d = decode(sb);
	assert_false(d->snap.have_reqs);
	assert_true(d->snap.warn.total >= 1);
	kd_dec_free(d);
}

/*
 * --around-trigger needs the trigger request as a walk decodes it; a file
 * opened for the stream gets it from kd_build_prepare's scan
 * (d->trigger_at), without a walk.  On each scenario it must be exactly
 * the collected decode's reqs[trigger_req] (begin and end ticks): a
 * REQ_CLOSE_ANY from another thread, a REQ_CLOSE of a request begun before
 * the window (matched to the trigger by its end), a trigger whose request
 * is not in the window (rebuilt from the TRIGGER record), records stepping
 * back in time (the walk's per-thread clamp), nested requests, format 1
 * (the golden scenario), a held run (its thread walked in another order
 * than the scan met it: the walk for the requests alone), that walk with
 * the trigger's request begun on another thread than the one ending it.
 * And the same after the streamed file is walked.
 */
static struct snapbuild *trigger_scenario(int v)
{
	struct snapbuild *sb;
	struct ktrace_trigger_rec tr;

	uint32_t p, seg;

	if (v == 4) {
		sb = snapbuild_new();
		snapbuild_scenario_golden(sb);
		return sb;
	}
	sb = new_sb();
	memset(&tr, 0, sizeof(tr));
	tr.kind_id = KIND_GET;
	tr.thread_slot = 1;
	tr.tid = 101;
	tr.why = KTRACE_TRIGGER_ABSOLUTE;
	strcpy(tr.kind, "get");
	switch (v) {
	case 0: /* ended on another thread; an outer request ended after it */
		tr.request_id = 5;
		tr.begin_tsc = 110;
		tr.end_tsc = 128;
		snapbuild_enter(sb, 0, 1, 90, 0);
		snapbuild_req_open(sb, 0, 1, 100, KIND_GET, 6);
		snapbuild_req_open(sb, 0, 1, 110, KIND_GET, 5);
		snapbuild_enter(sb, 1, 2, 120, 1);
		snapbuild_req_close_any(sb, 1, 2, 130, KTRACE_REQ_DIRECT, KIND_GET, 5, 1);
		snapbuild_exit(sb, 1, 2, 135, 1);
		snapbuild_req_close(sb, 0, 1, 140, KTRACE_REQ_SLOW);
		snapbuild_exit(sb, 0, 1, 400, 0);
		break;
	case 1: /* begun before the window: the REQ_CLOSE near the trigger's end */
		tr.request_id = 4321;
		tr.begin_tsc = 500;
		tr.end_tsc = 1502;
		snapbuild_enter(sb, 0, 1, 1000, 0);
		snapbuild_exit(sb, 0, 1, 1400, 0);
		snapbuild_req_close(sb, 0, 1, 1500, KTRACE_REQ_SLOW | KTRACE_REQ_TRIGGER);
		break;
	case 2: /* not in the window: from the TRIGGER record */
		tr.request_id = 99;
		tr.begin_tsc = 150;
		tr.end_tsc = 260;
		snapbuild_enter(sb, 0, 1, 200, 0);
		snapbuild_exit(sb, 0, 1, 300, 0);
		break;
	case 5: /* a held run (the thread walked in another order than the scan's),
	         * its REQ_OPEN stepping back below the ring record before it */
		tr.request_id = 7;
		tr.begin_tsc = 1015;
		tr.end_tsc = 1080;
		snapbuild_enter(sb, 0, 1, 1000, 0);
		snapbuild_enter(sb, 0, 1, 1010, 1);
		snapbuild_exit(sb, 0, 1, 1020, 1);
		p = snapbuild_pos(sb, 0);
		seg = snapbuild_seg(sb, 1);
		snapbuild_enter(sb, 0, 1, 1100, 2);
		snapbuild_exit(sb, 0, 1, 1110, 2);
		snapbuild_exit(sb, 0, 1, 1120, 0);
		snapbuild_held(sb, 0, 1, 1015, seg, p, 5, 0);
		snapbuild_req_open(sb, 0, 1, 1015, KIND_GET, 7);   /* clamped to 1020 */
		snapbuild_enter(sb, 0, 1, 1040, 3);
		snapbuild_exit(sb, 0, 1, 1070, 3);
		snapbuild_req_close(sb, 0, 1, 1080, KTRACE_REQ_SLOW);
		snapbuild_held_end(sb, 0);
		break;
	case 6: /* a held run (so the walk for the requests), and the trigger's
	         * request begun on thread 2 and ended on the trigger's thread 1
	         * (REQ_CLOSE_ANY): thread 2 is walked too */
		tr.request_id = 9;
		tr.begin_tsc = 1200;
		tr.end_tsc = 1300;
		snapbuild_enter(sb, 0, 1, 1000, 0);
		p = snapbuild_pos(sb, 0);
		seg = snapbuild_seg(sb, 1);
		snapbuild_exit(sb, 0, 1, 1100, 0);
		snapbuild_held(sb, 0, 1, 1010, seg, p, 5, 0);
		snapbuild_req_open(sb, 0, 1, 1010, KIND_GET, 7);
		snapbuild_req_close(sb, 0, 1, 1050, KTRACE_REQ_SLOW);
		snapbuild_held_end(sb, 0);
		snapbuild_enter(sb, 1, 2, 1150, 1);
		snapbuild_req_open(sb, 1, 2, 1200, KIND_GET, 9);
		snapbuild_exit(sb, 1, 2, 1250, 1);
		snapbuild_enter(sb, 0, 1, 1280, 2);
		snapbuild_req_close_any(sb, 0, 1, 1300, KTRACE_REQ_DIRECT, KIND_GET, 9, 2);
		snapbuild_exit(sb, 0, 1, 1310, 2);
		break;
	default: /* 3: records stepping back; nested requests closed innermost first */
		tr.request_id = 8;
		tr.begin_tsc = 300;
		tr.end_tsc = 350;
		snapbuild_enter(sb, 0, 1, 300, 0);
		snapbuild_req_open(sb, 0, 1, 295, KIND_GET, 8);   /* clamped to 300 */
		snapbuild_req_open(sb, 0, 1, 310, KIND_GET, 9);
		snapbuild_enter(sb, 0, 1, 330, 1);
		snapbuild_req_close(sb, 0, 1, 325, KTRACE_REQ_NESTED); /* #9, at 330 */
		snapbuild_exit(sb, 0, 1, 345, 1);
		snapbuild_req_close(sb, 0, 1, 340, KTRACE_REQ_SLOW);  /* #8, at 345 */
		snapbuild_exit(sb, 0, 1, 360, 0);
		break;
	}
	snapbuild_trigger(sb, &tr);
	return sb;
}

static struct kd_dec *open_image(const uint8_t *buf, size_t len, int stream)
{
	struct kd_dec_opts o = { .no_symbols = 1, .stream = stream, .find_trigger = stream };
	struct kd_dec_error err;
	struct kd_dec *d;

	if (kd_dec_open_buffer(buf, len, "image", &o, &d, &err) != 0)
		fail_msg("decode failed: %s", err.msg);
	return d;
}

static void test_requests_trigger_before_walk(void **state)
{
	(void)state;
	for (int v = 0; v < 7; v++) {
		struct snapbuild *sb = trigger_scenario(v);
		struct kd_dec *c, *s;
		struct kd_dec_error err;
		const struct kd_dec_request *q;
		uint8_t *buf;
		size_t len;

		assert_int_equal(snapbuild_finish(sb, &buf, &len), 0);
		snapbuild_free(sb);
		c = open_image(buf, len, 0);
		s = open_image(buf, len, 1);
		if (c->trigger_req >= c->nreqs)
			fail_msg("scenario %d: no trigger request decoded", v);
		q = &c->reqs[c->trigger_req];
		if (!s->trigger_at.known || s->trigger_at.begin != q->begin ||
		    s->trigger_at.end != q->end)
			fail_msg("scenario %d: before the walk: known %d [%llu, %llu]; walked [%llu, %llu]",
			         v, s->trigger_at.known, (unsigned long long)s->trigger_at.begin,
			         (unsigned long long)s->trigger_at.end, (unsigned long long)q->begin,
			         (unsigned long long)q->end);
		assert_int_equal(s->trigger_req, KD_NONE); /* nothing else known yet */
		assert_int_equal(s->nreqs, 0);
		if (v == 3)
			assert_int_equal(q->begin, 300);
		if (v == 5)
			assert_int_equal(q->begin, 1020);
		if (v == 6)
			assert_int_equal(q->begin, 1200);
		assert_int_equal(kd_build_walk(s, (struct kd_sink){ 0 }, &err), 0);
		assert_int_equal(s->trigger_req, c->trigger_req);
		assert_int_equal(s->reqs[s->trigger_req].begin, q->begin);
		assert_int_equal(s->reqs[s->trigger_req].end, q->end);
		kd_dec_free(c);
		kd_dec_free(s);
		free(buf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_requests_held_split_at_p),
		cmocka_unit_test(test_requests_held_nesting_across),
		cmocka_unit_test(test_requests_held_first_before_window),
		cmocka_unit_test(test_requests_held_order_and_chunks),
		cmocka_unit_test(test_requests_across_threads_and_nested),
		cmocka_unit_test(test_requests_close_without_open),
		cmocka_unit_test(test_requests_trigger_before_walk),
		cmocka_unit_test(test_requests_format1_label),
		cmocka_unit_test(test_requests_explain_answer_first),
		cmocka_unit_test(test_requests_histogram),
		cmocka_unit_test(test_requests_bucket_bounds),
		cmocka_unit_test(test_requests_hostile_section),
		cmocka_unit_test(test_requests_section_in_format1),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
