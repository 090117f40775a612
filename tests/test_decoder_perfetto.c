/*
 * test_decoder_perfetto.c - stage 6, --format perfetto on synthetic
 * snapshots (tests/snapbuild.h): the output decodes with protoc against
 * Perfetto's field numbers and passes check_pftrace.py (nesting per track,
 * time never back per sequence, strictly increasing per track, interned
 * names); calls that share one tick keep their recorded nesting; marks,
 * request lanes and the trigger are there; hostile-looking names survive;
 * two snapshots of one process merge without repeating calls.
 */
#include <inttypes.h>
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
#include "perfetto/pfcheck.h"

#include "decode_or_fail.h"

/* Write decs as one perfetto trace and check it; returns checker output. */
static char *write_check(struct kd_dec **decs, uint32_t n, size_t *bytes)
{
	char path[] = "/tmp/ktrace-test-pf-XXXXXX";
	char why[256];
	int fd = mkstemp(path);
	FILE *f;
	char *out;

	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_int_equal(kd_out_perfetto(f, decs, n, NULL), 0);
	if (bytes)
		*bytes = (size_t)ftell(f);
	assert_int_equal(fclose(f), 0);
	out = pf_check(path, why, sizeof(why));
	unlink(path);
	if (!out)
		fail_msg("%s", why);
	return out;
}

static void has_line(const char *out, const char *line)
{
	if (!strstr(out, line))
		fail_msg("no line \"%s\" in:\n%s", line, out);
}

/* Scenario: f0 with two zero-length f1 children, all in one tick; a mark in
 * the same tick; two overlapping requests on two threads (one the trigger);
 * a call on the second thread. */
static struct snapbuild *scenario(void)
{
	struct snapbuild *sb = snapbuild_new();
	struct ktrace_info_rec *in = snapbuild_info(sb);
	struct ktrace_trigger_rec t = { 0 };

	in->tsc_shift = 8;
	in->tsc_hz = 2560000000u; /* 1 tick = 100 ns */
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_thread(sb, 2, 101, "we\"ird\\name\n", 0);
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	snapbuild_func(sb, 2, 0xC000);
	snapbuild_name(sb, 1, KTRACE_NAME_MARK, "checkpoint");
	snapbuild_name(sb, 2, KTRACE_NAME_REQUEST, "get");
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_enter(sb, 0, 1, 1000, 1);
	snapbuild_exit(sb, 0, 1, 1000, 1);
	snapbuild_enter(sb, 0, 1, 1000, 1);
	snapbuild_exit(sb, 0, 1, 1000, 1);
	snapbuild_exit(sb, 0, 1, 1000, 0);
	snapbuild_mark(sb, 0, 1, 1000, 1, 42);
	snapbuild_req(sb, 0, 1, 1001, 2, 7, 0);
	snapbuild_enter(sb, 0, 1, 1002, 2);
	snapbuild_req(sb, 1, 2, 1003, 2, 8, 0);
	snapbuild_enter(sb, 1, 2, 1003, 0);
	snapbuild_exit(sb, 0, 1, 1005, 2);
	snapbuild_req(sb, 0, 1, 1006, 2, 7, 1);
	snapbuild_exit(sb, 1, 2, 1009, 0);
	snapbuild_req(sb, 1, 2, 1010, 2, 8, 1);
	t.request_id = 8;
	t.begin_tsc = 1003ull << 8;
	t.end_tsc = 1010ull << 8;
	t.duration_ns = 700;
	t.threshold_ns = 500;
	t.kind_id = 2;
	t.thread_slot = 2;
	t.tid = 101;
	snprintf(t.kind, sizeof(t.kind), "get");
	snapbuild_trigger(sb, &t);
	return sb;
}

static void test_perfetto_ties_marks_requests(void **state)
{
	struct kd_dec *d;
	char *out, line[256];
	const char *f0, *f1, *f2;

	(void)state;
	d = decode(scenario());
	f0 = kd_names_func(d, d->calls[0].func);
	f1 = kd_names_func(d, d->calls[1].func);
	f2 = NULL;
	for (uint32_t i = 0; i < d->ncalls; i++)
		if (d->funcs[d->calls[i].func].addr == 0xC000)
			f2 = kd_names_func(d, d->calls[i].func);
	assert_non_null(f2);
	out = write_check(&d, 1, NULL);
	/* Zero-length calls of one tick nest as recorded: f1 twice inside f0. */
	snprintf(line, sizeof(line), "nest %" PRIu32 " 100 - %s 1\n", d->snap.info.pid, f0);
	has_line(out, line);
	snprintf(line, sizeof(line), "nest %" PRIu32 " 100 %s %s 2\n", d->snap.info.pid, f0, f1);
	has_line(out, line);
	snprintf(line, sizeof(line), "nest %" PRIu32 " 100 - %s 1\n", d->snap.info.pid, f2);
	has_line(out, line);
	snprintf(line, sizeof(line), "nest %" PRIu32 " 101 - %s 1\n", d->snap.info.pid, f0);
	has_line(out, line);
	/* The mark with its value; the requests on two lanes; note + trigger. */
	snprintf(line, sizeof(line), "instant %" PRIu32 " 100 checkpoint 42 ", d->snap.info.pid);
	has_line(out, line);
	/* Each thread's request on a track under the thread's. */
	snprintf(line, sizeof(line), "track %" PRIu32 " tid=100 requests 1 0\n", d->snap.info.pid);
	has_line(out, line);
	snprintf(line, sizeof(line), "track %" PRIu32 " tid=101 requests 1 0\n", d->snap.info.pid);
	has_line(out, line);
	has_line(out, " ktrace 0 2\n");
	has_line(out, "\nok\n");
	free(out);
	kd_dec_free(d);
}

/* Context switches (issue 18): off-CPU slices named blocked / preempted on
 * an "off-CPU" track under the thread's, the slow request on main's own
 * "requests" track with its blocked / preempted time, cores from the
 * switches; a request one thread began and another ended as a flow
 * between them; all balanced (the checker fails on an END without a BEGIN,
 * a slice left open, a flow that never ends) and decoded with Perfetto's
 * own perfetto_trace.proto. */
static void test_perfetto_offcpu_and_requests_on_threads(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	struct kd_dec_error err;
	char *out, line[256];

	(void)state;
	snapbuild_scenario_viewer(sb);
	d = snapbuild_decode(sb, NULL, &err);
	if (!d)
		fail_msg("decode: %s", err.msg);
	out = write_check(&d, 1, NULL);
	/* main: blocked once, preempted once (inside long() of request 7) */
	snprintf(line, sizeof(line), "track %" PRIu32 " tid=100 off-CPU 2 0\n", d->snap.info.pid);
	has_line(out, line);
	/* worker: blocked before it ran hold() and after, cut at the window end */
	snprintf(line, sizeof(line), "track %" PRIu32 " tid=101 off-CPU 2 0\n", d->snap.info.pid);
	has_line(out, line);
	/* main's requests: 9 "get" and the "job" it handed over, then request 7
	 * (which overlaps the job) on the second lane; the job's end on
	 * worker's requests track, an instant ending the flow from main */
	snprintf(line, sizeof(line), "track %" PRIu32 " tid=100 requests 10 0\n", d->snap.info.pid);
	has_line(out, line);
	snprintf(line, sizeof(line), "track %" PRIu32 " tid=100 requests 2 1 0\n", d->snap.info.pid);
	has_line(out, line);
	snprintf(line, sizeof(line), "track %" PRIu32 " tid=101 requests 0 1\n", d->snap.info.pid);
	has_line(out, line);
	has_line(out, "\nflow 100 request:job -> 101 request:job ended here\n");
	/* cpu 0: main before, between and after its two off-CPU intervals;
	 * cpu 1: worker once */
	has_line(out, " cpu 0 3 0\n");
	has_line(out, " cpu 1 1 0\n");
	has_line(out, "\nok\n");
	free(out);
	kd_dec_free(d);
}

/* Two snapshots of one process: the second repeats the first's window and
 * goes on.  Merged, every call appears once and the frame open at the first
 * file's end is one slice.  With entered = 0 the outer frame was entered
 * before both windows: only the later file sees it (at its exit), and it
 * still encloses the leaves of both. */
/* What every snapshot of the merge tests starts with: one process, its
 * main thread 100, outer (id 0) at 0xA000 and a leaf (id 1) at 0xB000. */
static struct snapbuild *merge_base(void)
{
	struct snapbuild *sb = snapbuild_new();

	snapbuild_info(sb)->start_tsc = 5;
	snapbuild_info(sb)->tsc_shift = 8;
	snapbuild_info(sb)->tsc_hz = 2560000000u;
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	return sb;
}

/* Snapshot k (0: the earlier, 1: the later) of merge_same_process. */
static struct snapbuild *merge_snap(int k, int entered)
{
	struct snapbuild *sb = merge_base();

	if (entered)
		snapbuild_enter(sb, 0, 1, 1000, 0); /* outer: open at a's end */
	for (uint64_t i = 0; i < 10; i++) {
		snapbuild_enter(sb, 0, 1, 1100 + i * 10, 1);
		snapbuild_exit(sb, 0, 1, 1105 + i * 10, 1);
	}
	if (k) { /* b goes on: ten more leaves, then outer returns */
		for (uint64_t i = 10; i < 20; i++) {
			snapbuild_enter(sb, 0, 1, 1100 + i * 10, 1);
			snapbuild_exit(sb, 0, 1, 1105 + i * 10, 1);
		}
		snapbuild_exit(sb, 0, 1, 1400, 0);
	}
	snapbuild_core_copy_tsc(sb, 0, (k ? 1500ull : 1200ull) << 8);
	return sb;
}

/* The merged trace of the n files d[] (the first holds both functions:
 * outer at 0xA000, a leaf) has one outer slice on thread 100 and leaves
 * leaf slices, all nested in it. */
static void check_one_outer(struct kd_dec **d, int n, int leaves)
{
	char *out, line[256];
	const char *outer = NULL, *leaf = NULL;

	for (uint32_t i = 0; i < d[0]->ncalls; i++) {
		const char *f = kd_names_func(d[0], d[0]->calls[i].func);

		if (d[0]->funcs[d[0]->calls[i].func].addr == 0xA000)
			outer = f;
		else
			leaf = f;
	}
	assert_non_null(outer);
	assert_non_null(leaf);
	out = write_check(d, n, NULL);
	snprintf(line, sizeof(line), "slices %" PRIu32 " 100 main %s 1\n", d[0]->snap.info.pid, outer);
	has_line(out, line);
	snprintf(line, sizeof(line), "slices %" PRIu32 " 100 main %s %d\n", d[0]->snap.info.pid, leaf,
	         leaves);
	has_line(out, line);
	snprintf(line, sizeof(line), "nest %" PRIu32 " 100 %s %s %d\n", d[0]->snap.info.pid, outer,
	         leaf, leaves);
	has_line(out, line);
	free(out);
}

static void merge_same_process(int entered)
{
	struct kd_dec *d[2];

	d[0] = decode(merge_snap(1, entered)); /* order given does not matter */
	d[1] = decode(merge_snap(0, entered));
	assert_true(d[1]->window_end < d[0]->window_end);
	check_one_outer(d, 2, 20);
	kd_dec_free(d[0]);
	kd_dec_free(d[1]);
}

static void test_perfetto_merge_same_process(void **state)
{
	(void)state;
	merge_same_process(1);
}

static void test_perfetto_merge_outer_frame_only_in_later_file(void **state)
{
	(void)state;
	merge_same_process(0);
}

/* Three snapshots of one process, each going on from the previous one, the
 * outer frame open at the end of the first two: cut twice (merge.c), it is
 * one slice (its begin from the first file, through two joins) around every
 * leaf, each leaf once. */
static struct snapbuild *merge3_snap(int k)
{
	struct snapbuild *sb = merge_base();

	snapbuild_enter(sb, 0, 1, 1000, 0);
	for (uint64_t i = 0; i < 10 + 10 * (uint64_t)k; i++) {
		snapbuild_enter(sb, 0, 1, 1100 + i * 10, 1);
		snapbuild_exit(sb, 0, 1, 1105 + i * 10, 1);
	}
	if (k == 2)
		snapbuild_exit(sb, 0, 1, 1450, 0);
	snapbuild_core_copy_tsc(sb, 0, (1200ull + 100ull * (uint64_t)k + (k == 2 ? 100 : 0)) << 8);
	return sb;
}

static void test_perfetto_merge_three_snapshots(void **state)
{
	struct kd_dec *d[3];

	(void)state;
	d[0] = decode(merge3_snap(2));
	d[1] = decode(merge3_snap(0));
	d[2] = decode(merge3_snap(1));
	check_one_outer(d, 3, 30);
	for (int i = 0; i < 3; i++)
		kd_dec_free(d[i]);
}

/* Two processes with one pid (two hosts): two process groups, distinct pids. */
static void test_perfetto_two_hosts(void **state)
{
	struct snapbuild *a = scenario(), *b = scenario();
	struct kd_dec *d[2];
	char *out;

	(void)state;
	snprintf(snapbuild_info(b)->hostname, sizeof(snapbuild_info(b)->hostname), "otherhost");
	d[0] = decode(a);
	d[1] = decode(b);
	out = write_check(d, 2, NULL);
	assert_true(pf_count(out, "process") >= 0);
	assert_non_null(strstr(out, "@ otherhost\n"));
	/* 2 x (3 calls thread 100 ... ): every call of both files once. */
	assert_int_equal(strstr(out, "events ") != NULL, 1);
	{
		long ev = pf_count(out, "events");
		struct kd_dec *one = d[0];
		char *o1 = write_check(&one, 1, NULL);

		assert_int_equal(ev, 2 * pf_count(o1, "events"));
		free(o1);
	}
	free(out);
	kd_dec_free(d[0]);
	kd_dec_free(d[1]);
}

/* A snapbuild's image, to open twice. */
static uint8_t *image(struct snapbuild *sb, size_t *len)
{
	uint8_t *buf;

	assert_int_equal(snapbuild_finish(sb, &buf, len), 0);
	snapbuild_free(sb);
	return buf;
}

/* The trace of decs in memory (free it). */
static char *trace(struct kd_dec **decs, uint32_t n, size_t *len)
{
	char *p = NULL;
	FILE *f = open_memstream(&p, len);

	assert_non_null(f);
	assert_int_equal(kd_out_perfetto(f, decs, n, NULL), 0);
	assert_int_equal(fclose(f), 0);
	return p;
}

/*
 * The trace written while the builder walks (files opened for the stream,
 * the range a filter on the walk) is the trace of the collected calls cut
 * by kd_range_apply, byte for byte: one file, and two snapshots of one
 * process (which the writer collects itself), with and without a range.
 */
static void same_trace(uint8_t *const *img, const size_t *len, uint32_t n, int64_t from_ns,
                       int64_t to_ns, uint64_t min_ns)
{
	struct kd_dec *a[2], *b[2];
	struct kd_range r = { 0 };
	size_t la, lb;
	char *ta, *tb;

	r.active = from_ns != INT64_MIN || to_ns != INT64_MAX;
	r.from_ns = from_ns;
	r.to_ns = to_ns;
	r.min_dur_ns = min_ns;
	for (uint32_t i = 0; i < n; i++) {
		a[i] = decode_image(img[i], len[i], 0);
		b[i] = decode_image(img[i], len[i], 1);
		kd_range_apply(a[i], &r);
		b[i]->cut.range = &r;
	}
	ta = trace(a, n, &la);
	tb = trace(b, n, &lb);
	if (la != lb || memcmp(ta, tb, la))
		fail_msg("%u file(s), range %lld..%lld min %llu: streamed trace (%zu bytes) differs "
		         "from the collected one (%zu bytes)", n, (long long)from_ns, (long long)to_ns,
		         (unsigned long long)min_ns, lb, la);
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(b[i]->ncalls, n > 1 ? a[i]->ncalls : 0); /* one file: streamed */
		kd_dec_free(a[i]);
		kd_dec_free(b[i]);
	}
	free(ta);
	free(tb);
}

/* Marks between calls of one tick, and a frame open at the end. */
static struct snapbuild *marks_in_a_tick(void)
{
	struct snapbuild *sb = snapbuild_new();

	snapbuild_info(sb)->tsc_shift = 8;
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	snapbuild_name(sb, 1, KTRACE_NAME_MARK, "m");
	snapbuild_enter(sb, 0, 1, 2000, 0);
	snapbuild_mark(sb, 0, 1, 2000, 1, 1);
	snapbuild_enter(sb, 0, 1, 2000, 1);
	snapbuild_mark(sb, 0, 1, 2000, 1, 2);
	snapbuild_exit(sb, 0, 1, 2000, 1);
	snapbuild_mark(sb, 0, 1, 2000, 1, 3);
	snapbuild_exit(sb, 0, 1, 2000, 0);
	snapbuild_enter(sb, 0, 1, 2010, 1);
	snapbuild_mark(sb, 0, 1, 2020, 1, 4);
	return sb;
}

static void test_perfetto_streamed_equals_collected(void **state)
{
	struct snapbuild *g = snapbuild_new();
	uint8_t *img[3];
	size_t len[3];
	struct kd_dec *d;
	int64_t w0, w1;

	(void)state;
	snapbuild_scenario_golden(g);
	img[0] = image(g, &len[0]);
	img[1] = image(scenario(), &len[1]);
	img[2] = image(marks_in_a_tick(), &len[2]);
	for (uint32_t k = 0; k < 3; k++) {
		d = decode_image(img[k], len[k], 0);
		w0 = kd_time_wall_ns(d, d->window_start);
		w1 = kd_time_wall_ns(d, d->window_end);
		kd_dec_free(d);
		same_trace(&img[k], &len[k], 1, INT64_MIN, INT64_MAX, 0);
		for (int i = 0; i <= 4; i++)
			for (int j = i; j <= 4; j++) {
				same_trace(&img[k], &len[k], 1, w0 + (w1 - w0) * i / 4,
				           w0 + (w1 - w0) * j / 4 + j, 0);
				same_trace(&img[k], &len[k], 1, w0 + (w1 - w0) * i / 4,
				           w0 + (w1 - w0) * j / 4 + j, 300);
			}
		same_trace(&img[k], &len[k], 1, INT64_MIN, INT64_MAX, 1000);
		free(img[k]);
	}
}

static void test_perfetto_streamed_merge_equals_collected(void **state)
{
	uint8_t *img[2];
	size_t len[2];

	(void)state;
	for (int entered = 0; entered < 2; entered++) {
		for (int k = 0; k < 2; k++)
			img[k] = image(merge_snap(k, entered), &len[k]);
		same_trace(img, len, 2, INT64_MIN, INT64_MAX, 0);
		same_trace(img, len, 2, INT64_MIN, INT64_MAX, 1000);
		free(img[0]);
		free(img[1]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_perfetto_ties_marks_requests),
		cmocka_unit_test(test_perfetto_offcpu_and_requests_on_threads),
		cmocka_unit_test(test_perfetto_merge_same_process),
		cmocka_unit_test(test_perfetto_merge_outer_frame_only_in_later_file),
		cmocka_unit_test(test_perfetto_merge_three_snapshots),
		cmocka_unit_test(test_perfetto_two_hosts),
		cmocka_unit_test(test_perfetto_streamed_equals_collected),
		cmocka_unit_test(test_perfetto_streamed_merge_equals_collected),
	};
	return cmocka_run_group_tests_name("decoder_perfetto", tests, NULL, NULL);
}
