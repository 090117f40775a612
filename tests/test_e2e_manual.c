/*
 * test_e2e_manual.c - the manual API alone (DESIGN "Parts"; issue 4
 * lifecycle: a program built without -finstrument-functions): marks with
 * their 64-bit values, nested spans, requests, from two threads, decoded
 * back exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_manual"

static void test_e2e_manual_marks_spans_requests(void **state)
{
	char *dir = kt_mkdtemp("manual");
	char envdir[300], line[4600], path[4400];
	const char *env[] = {envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", NULL};
	char *argv[] = {(char *)PROG, NULL};
	struct kt_proc p;
	int rc;

	(void)state;
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	assert_int_equal(kt_expect_line(&p, "pid ", line, sizeof(line), 30000), 0);
	assert_non_null(strstr(line, "enabled 1"));
	assert_int_equal(kt_expect_line(&p, "snapshot ", line, sizeof(line), 30000), 0);
	assert_int_equal(sscanf(line, "snapshot %d %4399s", &rc, path), 2);
	assert_int_equal(rc, 0);
	if (kt_wait(&p, 30000) != 0)
		fail_msg("status %#x, stderr:\n%s", p.status, p.err);
	assert_string_equal(p.err, "");

	struct kd_dec *d = kd_open(path);
	assert_non_null(d);
	assert_int_equal(d->snap.damaged_blocks, 0);
	uint32_t mainth = kd_thread_tid(d, p.pid), t2 = kd_thread(d, "marker");
	assert_int_not_equal(mainth, KD_NONE);
	assert_int_not_equal(t2, KD_NONE);

	/* Spans are the only "calls": 5 outer, each with one inner. */
	assert_int_equal(d->ncalls, 10);
	int outer = 0, inner = 0;
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		assert_true(c->flags & KD_CALL_SPAN);
		assert_false(c->flags & (KD_CALL_TRUNC_BEGIN | KD_CALL_TRUNC_END |
		                         KD_CALL_EXIT_LOST));
		assert_int_equal(c->thread, mainth);
		if (kd_is(d, c, "outer")) {
			outer++;
			assert_int_equal(c->parent, KD_NONE);
		} else if (kd_is(d, c, "inner")) {
			inner++;
			assert_int_not_equal(c->parent, KD_NONE);
			assert_true(kd_is(d, &d->calls[c->parent], "outer"));
			assert_int_equal(c->depth, d->calls[c->parent].depth + 1);
		} else {
			fail_msg("unexpected span %s", kd_func(d, c));
		}
	}
	assert_int_equal(outer, 5);
	assert_int_equal(inner, 5);

	/* Marks: names, values, threads, order, and m2 inside an inner span. */
	int m1 = 0, m2 = 0, t2m = 0;
	for (uint32_t i = 0; i < d->nmarks; i++) {
		const struct kd_dec_mark *m = &d->marks[i];
		const char *n = kd_name(d, m->name);
		if (!strcmp(n, "m1")) {
			assert_int_equal(m->value, 1);
			assert_int_equal(m->thread, mainth);
			m1++;
		} else if (!strcmp(n, "m2")) {
			assert_true(m->value == 0xdeadbeefcafe1234ull);
			assert_int_equal(m->thread, mainth);
			int inside = 0;
			for (uint32_t k = 0; k < d->ncalls; k++)
				if (kd_is(d, &d->calls[k], "inner") && m->tick >= d->calls[k].begin &&
				    m->tick <= d->calls[k].end)
					inside = 1;
			assert_true(inside);
			m2++;
		} else if (!strcmp(n, "t2mark")) {
			assert_int_equal(m->thread, t2);
			t2m++;
		} else {
			fail_msg("unexpected mark %s", n);
		}
	}
	assert_int_equal(m1, 5);
	assert_int_equal(m2, 5);
	assert_int_equal(t2m, 10);
	/* t2mark values 0..9 each once, and in time order. */
	uint64_t tick_of[10];
	int seen[10] = {0};
	for (uint32_t i = 0; i < d->nmarks; i++) {
		const struct kd_dec_mark *m = &d->marks[i];
		if (m->thread != t2)
			continue;
		assert_true(m->value < 10);
		assert_false(seen[m->value]);
		seen[m->value] = 1;
		tick_of[m->value] = m->tick;
	}
	for (int v = 1; v < 10; v++)
		assert_true(tick_of[v] >= tick_of[v - 1]);

	/* Requests: three "get", each at least the 2 ms it slept. */
	assert_int_equal(d->nreqs, 3);
	for (uint32_t i = 0; i < d->nreqs; i++) {
		const struct kd_dec_request *q = &d->reqs[i];
		assert_string_equal(kd_name(d, q->kind), "get");
		assert_int_equal(q->thread, mainth);
		/* complete, not the trigger; numbered "get #N" (format 2) */
		assert_int_equal(q->flags & ~(uint32_t)KD_REQ_NUMBERED, 0);
		assert_true(kd_time_ticks_ns(d, q->end - q->begin) >= 1900000);
		for (uint32_t j = 0; j < i; j++)
			assert_true(d->reqs[j].id != q->id);
	}
	kd_dec_free(d);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_manual_marks_spans_requests),
	};
	return cmocka_run_group_tests_name("e2e_manual", tests, NULL, NULL);
}
