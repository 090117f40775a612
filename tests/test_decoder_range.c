/*
 * test_decoder_range.c - range.c: the option parsers, the cut on the
 * collected calls (kd_range_apply) and the same cut as a stream filter
 * (kd_range_filter): on the golden scenario, for many ranges and minimum
 * durations, the filter feeding the collector gives exactly the calls
 * kd_range_apply leaves (times, flags, self, depth, parents); --min-dur
 * leaves a dropped call's time in its caller's self time.
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

#include "decode_or_fail.h"

static void test_range_parse(void **state)
{
	static const char *const good[] = { "12:34:56", "00:00:00.5", "23:59:59.123456789",
		                            "2026-01-02T03:04:05", "2026-01-02T03:04:05.25",
		                            "+1s", "+1.5s", "+200ms", "+0.5us", "+800ns" };
	static const char *const bad[] = { "", "12:34", "24:00:00", "12:60:00", "1:2:3",
		                           "12:34:56.", "12:34:56x", "2026-13-01T00:00:00",
		                           "+5", "+ms", "+1.5 s", "-1s", "tomorrow", "+1h" };
	struct kd_when w;
	uint64_t ns;
	char msg[400];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (kd_range_parse_when("--from", good[i], &w, msg, sizeof(msg)))
			fail_msg("'%s' refused: %s", good[i], msg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (!kd_range_parse_when("--to", bad[i], &w, msg, sizeof(msg)))
			fail_msg("'%s' accepted", bad[i]);
		assert_non_null(strstr(msg, "--to needs"));
		assert_non_null(strstr(msg, "such as +1.5s"));
	}
	assert_int_equal(kd_range_parse_when("--from", "01:02:03.5", &w, msg, sizeof(msg)), 0);
	assert_int_equal(w.kind, KD_WHEN_TIME_OF_DAY);
	assert_int_equal(w.ns, 3723500000000ll);
	assert_int_equal(kd_range_parse_when("--from", "1970-01-02T00:00:01.000000002", &w, msg,
	                               sizeof(msg)), 0);
	assert_int_equal(w.kind, KD_WHEN_WALL);
	assert_int_equal(w.ns, 86401000000002ll);
	assert_int_equal(kd_range_parse_when("--from", "+1.5ms", &w, msg, sizeof(msg)), 0);
	assert_int_equal(w.kind, KD_WHEN_OFFSET);
	assert_int_equal(w.ns, 1500000);
	assert_int_equal(kd_range_parse_duration("--min-dur", "2.5us", &ns, msg, sizeof(msg)), 0);
	assert_int_equal(ns, 2500);
	assert_int_equal(kd_range_parse_duration("--min-dur", "3s", &ns, msg, sizeof(msg)), 0);
	assert_int_equal(ns, 3000000000ull);
	assert_int_not_equal(kd_range_parse_duration("--min-dur", "10", &ns, msg, sizeof(msg)), 0);
	assert_non_null(strstr(msg, "such as 200us"));
	assert_int_not_equal(kd_range_parse_duration("--min-dur", "99999999999s", &ns, msg, sizeof(msg)),
	                     0);
}

/* The golden scenario's image (free it) and its window in wall-clock ns. */
static uint8_t *golden(size_t *len, int64_t *w0, int64_t *w1)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint8_t *buf;

	snapbuild_scenario_golden(sb);
	assert_int_equal(snapbuild_finish(sb, &buf, len), 0);
	snapbuild_free(sb);
	d = decode_image(buf, *len, 0);
	*w0 = kd_time_wall_ns(d, d->window_start);
	*w1 = kd_time_wall_ns(d, d->window_end);
	kd_dec_free(d);
	return buf;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Cut one image both ways and compare the calls. */
static void compare_cut(const uint8_t *buf, size_t len, int64_t from_ns, int64_t to_ns,
                        uint64_t min_ns)
{
	struct kd_dec *a = decode_image(buf, len, 0), *b = decode_image(buf, len, 1);
	struct kd_range r = { 0 };
	struct kd_range_filter f;
	struct kd_collector c;
	struct kd_dec_error err;

	r.active = from_ns != INT64_MIN || to_ns != INT64_MAX;
	r.from_ns = from_ns;
	r.to_ns = to_ns;
	r.min_dur_ns = min_ns;
	kd_collector_init(&c, b);
	assert_int_equal(kd_build_walk(b, kd_range_filter(&f, &r, kd_collector_sink(&c)), &err), 0);
	kd_collector_free(&c);
	kd_range_filter_free(&f);
	kd_range_apply(a, &r);
	if (a->ncalls != b->ncalls)
		fail_msg("range %lld..%lld min %llu: %u calls cut on the collector, %u by the filter",
		         (long long)from_ns, (long long)to_ns, (unsigned long long)min_ns, a->ncalls,
		         b->ncalls);
	for (uint32_t i = 0; i < a->ncalls; i++) {
		const struct kd_dec_call *x = &a->calls[i], *y = &b->calls[i];

		if (x->begin != y->begin || x->end != y->end || x->self != y->self ||
		    x->func != y->func || x->thread != y->thread || x->depth != y->depth ||
		    x->flags != y->flags || x->parent != y->parent)
			fail_msg("call %u: collector %llu..%llu self %llu flags %#x parent %u depth %u, "
			         "filter %llu..%llu self %llu flags %#x parent %u depth %u",
			         i, (unsigned long long)x->begin, (unsigned long long)x->end,
			         (unsigned long long)x->self, x->flags, x->parent, x->depth,
			         (unsigned long long)y->begin, (unsigned long long)y->end,
			         (unsigned long long)y->self, y->flags, y->parent, y->depth);
	}
	kd_dec_free(a);
	kd_dec_free(b);
}

static void test_range_filter_matches_collector(void **state)
{
	size_t len;
	int64_t w0, w1;
	uint8_t *buf = golden(&len, &w0, &w1);
	int cuts = 0;

	(void)state;
	compare_cut(buf, len, INT64_MIN, INT64_MAX, 0);
	for (int i = 0; i <= 8; i++)
		for (int j = i; j <= 8; j++) {
			int64_t a = w0 + (w1 - w0) * i / 8, b = w0 + (w1 - w0) * j / 8 + j;

			compare_cut(buf, len, a, b, 0);
			compare_cut(buf, len, a, b, 3000);
			cuts += 2;
		}
	compare_cut(buf, len, INT64_MIN, INT64_MAX, 1000);
	compare_cut(buf, len, INT64_MIN, INT64_MAX, 20000);
	compare_cut(buf, len, INT64_MIN, w0 + (w1 - w0) / 3, 0);
	compare_cut(buf, len, w0 + (w1 - w0) / 3, INT64_MAX, 500);
	print_message("%d ranges compared\n", cuts + 4);
	free(buf);
}

/* outer [1000, 2000] with short() [1100, 1110] and long() [1200, 1700]:
 * --min-dur 50ns leaves short() out, its 10 ns in outer's self time. */
static void test_range_min_dur_self(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_range r = { 0 };
	struct kd_dec_opts o = { .no_symbols = 1 };
	struct kd_dec_error err;
	struct kd_dec *d;

	(void)state;
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	snapbuild_func(sb, 2, 0xC000);
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_enter(sb, 0, 1, 1100, 1);
	snapbuild_exit(sb, 0, 1, 1110, 1);
	snapbuild_enter(sb, 0, 1, 1200, 2);
	snapbuild_exit(sb, 0, 1, 1700, 2);
	snapbuild_exit(sb, 0, 1, 2000, 0);
	d = snapbuild_decode(sb, &o, &err);
	assert_non_null(d);
	assert_int_equal(d->ncalls, 3);
	assert_int_equal(d->calls[0].self, 490);
	r.min_dur_ns = 50;
	kd_range_apply(d, &r);
	assert_int_equal(d->ncalls, 2);
	assert_int_equal(d->cut.min_dur_dropped, 1);
	assert_int_equal(d->calls[0].self, 500);
	assert_int_equal(d->calls[1].end - d->calls[1].begin, 500);
	assert_int_equal(d->calls[1].parent, 0);
	kd_dec_free(d);
}

/* The lines a format writes, sorted (free it): the streamed formats write
 * calls at their end, the collected replay at their begin. */
static char *sorted_lines(char *text)
{
	char **v = NULL, *out, *p = text;
	size_t n = 0, len = strlen(text);

	for (char *q; (q = strchr(p, '\n')); p = q + 1) {
		*q = '\0';
		if (q > p && q[-1] == ',')
			q[-1] = '\0'; /* chrome's separators */
		v = realloc(v, (n + 1) * sizeof(*v));
		assert_non_null(v);
		v[n++] = p;
	}
	qsort(v, n, sizeof(*v), cmp_str);
	out = malloc(len + 1);
	assert_non_null(out);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		strcat(out, v[i]);
		strcat(out, "\n");
	}
	free(v);
	free(text);
	return out;
}

/* chrome, folded and the summary of a range cut on the walk (d->cut.range) are
 * those of the collected calls cut by kd_range_apply (up to the order of
 * chrome's events and folded's lines), the process labels and the
 * summary's range lines included. */
static char *out_of(struct kd_dec *d, int fmt)
{
	struct kd_out_opts o = { .quiet = 1 };
	struct kd_chrome ch;
	char *p = NULL;
	size_t len;
	FILE *f = open_memstream(&p, &len);

	assert_non_null(f);
	if (fmt == 0) {
		kd_out_chrome_begin(&ch, f, 0);
		kd_out_chrome_file(&ch, d, 1, &o);
		kd_out_chrome_end(&ch);
	} else if (fmt == 1) {
		assert_int_equal(kd_out_folded_stream(f, d, &o), 0);
	} else {
		struct kd_dec_error err;

		if (d->opts.stream)
			assert_int_equal(kd_range_walk_cut(d, (struct kd_sink){ 0 }, &err), 0);
		kd_out_summary(f, d);
	}
	assert_int_equal(fclose(f), 0);
	return sorted_lines(p);
}

static void test_range_streamed_formats_match_collected(void **state)
{
	size_t len;
	int64_t w0, w1;
	uint8_t *buf = golden(&len, &w0, &w1);

	(void)state;
	for (int i = 0; i < 4; i++)
		for (int fmt = 0; fmt < 3; fmt++) {
			struct kd_range r = { 0 };
			struct kd_dec *a = decode_image(buf, len, 0), *b = decode_image(buf, len, 1);
			char *x, *y;

			r.active = i < 3;
			r.from_ns = i == 0 ? w0 + (w1 - w0) / 3 : i == 1 ? INT64_MIN : w0 + (w1 - w0) / 5;
			r.to_ns = i == 1 ? w0 + (w1 - w0) / 2 : INT64_MAX;
			r.min_dur_ns = i >= 2 ? 2000 : 0;
			kd_range_apply(a, &r);
			b->cut.range = &r;
			x = out_of(a, fmt);
			y = out_of(b, fmt);
			if (strcmp(x, y))
				fail_msg("format %d, range %d: cut on the walk:\n%s\ncut on the calls:\n%s",
				         fmt, i, y, x);
			free(x);
			free(y);
			kd_dec_free(a);
			kd_dec_free(b);
		}
	free(buf);
}

/* Calls cut by the range start nest as their depths say (issue 18): the
 * outer call was entered after a mark in its tick (sub 1), the inner one
 * first in a later tick (sub 0); both clamped to the range start must not
 * put the inner one first (speedscope called such a Chrome trace badly
 * nested).  Cut on the calls and on the walk alike. */
static void test_range_cut_calls_nest(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_range r = { 0 };
	struct kd_dec *d, *b;
	uint8_t *img;
	size_t len;
	char *x, *y;
	uint32_t outer = KD_NONE, inner = KD_NONE;

	(void)state;
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	snapbuild_mark(sb, 0, 1, 100, 1, 7);
	snapbuild_enter(sb, 0, 1, 100, 0);
	snapbuild_enter(sb, 0, 1, 200, 1);
	snapbuild_exit(sb, 0, 1, 1000, 1);
	snapbuild_exit(sb, 0, 1, 2000, 0);
	snapbuild_mark(sb, 0, 1, 3000, 1, 8);
	assert_int_equal(snapbuild_finish(sb, &img, &len), 0);
	snapbuild_free(sb);
	d = decode_image(img, len, 0);
	for (uint32_t i = 0; i < d->ncalls; i++) {
		if (d->funcs[d->calls[i].func].addr == 0xA000)
			outer = i;
		if (d->funcs[d->calls[i].func].addr == 0xB000)
			inner = i;
	}
	assert_true(outer != KD_NONE && inner != KD_NONE);
	assert_true(d->calls[outer].begin_sub > d->calls[inner].begin_sub); /* as recorded */
	r.active = 1;
	r.from_ns = kd_time_wall_ns(d, 500);
	r.to_ns = INT64_MAX;
	kd_range_apply(d, &r);
	assert_int_equal(d->ncalls, 2);
	for (uint32_t i = 0; i < d->ncalls; i++)
		if (d->funcs[d->calls[i].func].addr == 0xA000)
			outer = i;
		else
			inner = i;
	assert_int_equal(d->calls[outer].begin, d->calls[inner].begin);
	assert_true(d->calls[outer].begin_sub <= d->calls[inner].begin_sub);
	/* the walk cuts the same: chrome's events are the same */
	b = decode_image(img, len, 1);
	b->cut.range = &r;
	x = out_of(d, 0);
	y = out_of(b, 0);
	if (strcmp(x, y))
		fail_msg("cut on the walk:\n%s\ncut on the calls:\n%s", y, x);
	free(x);
	free(y);
	kd_dec_free(d);
	kd_dec_free(b);
	free(img);
}

/* explain under a range: on the collected calls (cut by the filter in
 * front of the collector) and on a streamed file (kd_out_explain_stream:
 * the range, then its own request filter) the same text; and the trigger
 * is named only when its request is wholly in the range. */
static char *explain_of(struct kd_dec *d)
{
	struct kd_out_opts o = { .quiet = 1 };
	char *p = NULL;
	size_t len;
	FILE *f = open_memstream(&p, &len);

	assert_non_null(f);
	if (d->opts.stream)
		assert_int_equal(kd_out_explain_stream(f, d, &o), 0);
	else
		kd_out_explain(f, d, &o);
	assert_int_equal(fclose(f), 0);
	return p;
}

static void test_range_explain_trigger_whole_only(void **state)
{
	size_t len;
	int64_t w0, w1, tb, te;
	uint8_t *buf = golden(&len, &w0, &w1);
	struct kd_dec *d = decode_image(buf, len, 0);

	(void)state;
	assert_int_not_equal(d->trigger_req, KD_NONE);
	tb = kd_time_wall_ns(d, d->reqs[d->trigger_req].begin);
	te = kd_time_wall_ns(d, d->reqs[d->trigger_req].end);
	kd_dec_free(d);
	for (int i = 0; i < 4; i++) {
		struct kd_range r = { 0 };
		struct kd_dec *a = decode_image(buf, len, 0), *b = decode_image(buf, len, 1);
		char *x, *y;

		r.active = 1;
		/* 0: around it; 1: clips its start; 2: clips its end; 3: before it */
		r.from_ns = i == 0 ? tb - 1000 : i == 1 ? (tb + te) / 2 : w0;
		r.to_ns = i == 0 ? te + 1000 : i == 2 ? (tb + te) / 2 : i == 3 ? tb - 1000 : w1;
		kd_range_apply(a, &r);
		b->cut.range = &r;
		x = explain_of(a);
		y = explain_of(b);
		if (strcmp(x, y))
			fail_msg("range %d: streamed:\n%s\ncollected:\n%s", i, y, x);
		if (i == 0 && !strstr(x, "  trigger: \"get\" request"))
			fail_msg("the trigger wholly in the range is not named:\n%s", x);
		if (i > 0 && (strstr(x, "  trigger:") || !strstr(x, "not wholly in the range")))
			fail_msg("range %d clips or misses the trigger request:\n%s", i, x);
		free(x);
		free(y);
		kd_dec_free(a);
		kd_dec_free(b);
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range_parse),
		cmocka_unit_test(test_range_filter_matches_collector),
		cmocka_unit_test(test_range_min_dur_self),
		cmocka_unit_test(test_range_streamed_formats_match_collected),
		cmocka_unit_test(test_range_cut_calls_nest),
		cmocka_unit_test(test_range_explain_trigger_whole_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
