/*
 * test_decoder_html.c - the HTML sink (decoder/out-html.c) without a
 * browser: the page is the template with every marker filled, the packed
 * calls and core runs decode back to exactly the decoder's calls and runs,
 * names cannot break out of the data's <script> element, and a window over
 * the limit writes nothing.  What the page shows is checked in Chromium by
 * test_e2e_html.
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

struct mem {
	char *p;
	size_t n;
	FILE *f;
};

#include "decode_or_fail.h"

static int page(struct kd_dec *d, const struct kd_out_opts *o, struct mem *m)
{
	int rc;

	m->p = NULL;
	m->n = 0;
	m->f = open_memstream(&m->p, &m->n);
	assert_non_null(m->f);
	rc = kd_out_html(m->f, &d, 1, o);
	fclose(m->f);
	return rc;
}

/* ---- a reader of the packed data (the layout in out-html.c) ---------------- */

static size_t unbase64(const char *s, size_t n, uint8_t *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	uint32_t v = 0;
	size_t k = 0;
	int bits = 0;

	for (size_t i = 0; i < n && s[i] != '='; i++) {
		const char *c = strchr(tab, s[i]);

		assert_non_null(c);
		v = v << 6 | (uint32_t)(c - tab);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[k++] = (uint8_t)(v >> bits);
		}
	}
	return k;
}

static uint64_t uv(const uint8_t *b, size_t *p)
{
	uint64_t v = 0;
	int sh = 0;

	do
		v |= (uint64_t)(b[*p] & 127) << sh, sh += 7;
	while (b[(*p)++] & 128);
	return v;
}

/* The JSON text: the page's ktrace-data pieces joined (malloc'd). */
static char *joined(const char *html)
{
	static const char open_tag[] = "<script type=\"application/json\" class=\"ktrace-data\">";
	size_t n = 0;
	char *out = malloc(strlen(html) + 1);
	int pieces = 0;

	assert_non_null(out);
	for (const char *s = html; (s = strstr(s, open_tag)) != NULL; pieces++) {
		const char *e;

		s += strlen(open_tag);
		e = strstr(s, "</script>");
		assert_non_null(e);
		memcpy(out + n, s, (size_t)(e - s));
		n += (size_t)(e - s);
		s = e;
	}
	out[n] = 0;
	assert_true(pieces >= 1);
	return out;
}

/* "key":<number> after from. */
static int64_t num_after(const char *from, const char *key)
{
	const char *s = strstr(from, key);

	assert_non_null(s);
	return strtoll(s + strlen(key), NULL, 10);
}

/* The base64 string of "key":"..." after from (malloc'd bytes, *len). */
static uint8_t *bytes_after(const char *from, const char *key, size_t *len)
{
	const char *s = strstr(from, key), *e;
	uint8_t *out;

	assert_non_null(s);
	s += strlen(key);
	assert_true(*s == '"');
	e = strchr(++s, '"');
	assert_non_null(e);
	out = malloc((size_t)(e - s) + 1);
	assert_non_null(out);
	*len = unbase64(s, (size_t)(e - s), out);
	return out;
}

static const struct kd_dec_call *cmp_calls;

static int by_begin_depth(const void *a, const void *b)
{
	const struct kd_dec_call *x = &cmp_calls[*(const uint32_t *)a];
	const struct kd_dec_call *y = &cmp_calls[*(const uint32_t *)b];

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->depth < y->depth ? -1 : x->depth > y->depth;
}

/* Every thread's packed calls are the decoder's, in (begin, depth) order. */
static void check_calls_round_trip(const struct kd_dec *d, const char *html)
{
	const char *s = strstr(html, "\"threads\":[");
	uint32_t checked = 0;

	assert_non_null(s);
	for (uint32_t t = 0; t < d->nthreads; t++) {
		uint32_t n = 0, *ix = malloc(((size_t)d->ncalls + 1) * sizeof(*ix));
		char key[64];
		size_t len, p = 0;
		uint8_t *b;
		int64_t begin, depth = 0;
		uint32_t core = 0;

		if (!d->threads[t].events) {
			free(ix);
			continue;
		}
		snprintf(key, sizeof(key), "\"tid\":%d,", d->threads[t].tid);
		s = strstr(s, key);
		assert_non_null(s);
		for (uint32_t i = 0; i < d->ncalls; i++)
			if (d->calls[i].thread == t)
				ix[n++] = i;
		cmp_calls = d->calls;
		qsort(ix, n, sizeof(*ix), by_begin_depth);
		assert_int_equal(num_after(s, "\"n\":"), n);
		begin = num_after(s, "\"b0\":") + (int64_t)d->window_start;
		b = bytes_after(s, "\"calls\":", &len);
		for (uint32_t i = 0; i < n; i++) {
			const struct kd_dec_call *c = &d->calls[ix[i]];
			uint64_t head = uv(b, &p), zz = head >> 5;

			depth += (zz & 1) ? -(int64_t)((zz + 1) / 2) : (int64_t)(zz / 2);
			if (head & 16)
				core = (uint32_t)uv(b, &p);
			begin += (int64_t)uv(b, &p);
			assert_int_equal(begin, c->begin);
			assert_int_equal(begin + (int64_t)uv(b, &p), c->end);
			assert_int_equal(uv(b, &p), c->func);
			assert_int_equal(depth, c->depth);
			assert_int_equal(core, c->core);
			assert_int_equal(head & 15, c->flags & 15);
			checked++;
		}
		assert_int_equal(p, len);
		free(b);
		/* "lanes": calls per depth. */
		if (n) {
			const char *l = strstr(s, "\"lanes\":[");
			int64_t maxdepth = num_after(s, "\"maxdepth\":");

			assert_non_null(l);
			l += strlen("\"lanes\":[");
			for (int64_t dep = 0; dep <= maxdepth; dep++) {
				uint64_t want = 0;
				char *e;

				for (uint32_t i = 0; i < n; i++)
					want += d->calls[ix[i]].depth == dep;
				assert_int_equal(strtoull(l, &e, 10), want);
				assert_true(*e == (dep == maxdepth ? ']' : ','));
				l = e + 1;
			}
		}
		free(ix);
	}
	assert_int_equal(checked, d->ncalls);
}

/* Each core's packed runs are the decoder's runs there. */
static void check_runs_round_trip(const struct kd_dec *d, const char *html)
{
	const char *s = strstr(html, "\"cores\":[");
	uint64_t total = 0;

	assert_non_null(s);
	for (uint32_t c = 0; c < d->snap.ncores; c++) {
		size_t len, p = 0;
		uint8_t *b;
		int64_t begin;
		char key[32];
		int64_t n;

		snprintf(key, sizeof(key), "{\"cpu\":%u,", d->snap.cores[c].cpu);
		s = strstr(s, key);
		assert_non_null(s);
		n = num_after(s, "\"n\":");
		begin = num_after(s, "\"b0\":") + (int64_t)d->window_start;
		b = bytes_after(s, "\"runs\":", &len);
		for (int64_t i = 0; i < n; i++) {
			uint64_t row = uv(b, &p), end;
			int found = 0;

			begin += (int64_t)uv(b, &p);
			end = (uint64_t)begin + uv(b, &p);
			for (uint32_t r = 0; r < d->nruns && !found; r++)
				found = d->runs[r].core == c && d->runs[r].begin == (uint64_t)begin &&
				        d->runs[r].end == end;
			if (!found)
				fail_msg("core %u: run [%lld, %llu] of row %llu is not a decoded run", c,
				         (long long)begin, (unsigned long long)end, (unsigned long long)row);
		}
		assert_int_equal(p, len);
		total += (uint64_t)n;
		free(b);
	}
	assert_int_equal(total, d->nruns);
}

/* The page's data decodes back to d's calls and runs. */
static void check_round_trip(const struct kd_dec *d, const char *html)
{
	char *data = joined(html);

	check_calls_round_trip(d, data);
	check_runs_round_trip(d, data);
	free(data);
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_html_template_filled(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	struct mem m;
	char *data;

	(void)state;
	snapbuild_scenario_golden(sb);
	d = decode(sb);
	assert_int_equal(page(d, NULL, &m), 0);
	assert_non_null(strstr(m.p, "<!DOCTYPE html>"));
	assert_non_null(strstr(m.p, "window.ktrace")); /* the script */
	assert_non_null(strstr(m.p, "#tracks"));       /* the style */
	assert_non_null(strstr(m.p, "<script type=\"application/json\" class=\"ktrace-data\">"
	                            "{\"version\":1,"));
	assert_null(strstr(m.p, "@@"));                /* every marker filled */
	data = joined(m.p);
	assert_non_null(strstr(data, "\"trigger\":{"));
	free(data);
	check_round_trip(d, m.p);
	free(m.p);
	kd_dec_free(d);
}

static void test_html_packs_many_calls(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	struct mem m;

	(void)state;
	snapbuild_thread_seq(sb, 1);
	snapbuild_scenario_big(sb, 2, 400000);
	d = decode(sb);
	assert_true(d->ncalls >= 190000);
	assert_int_equal(page(d, NULL, &m), 0);
	/* Over 1 MiB of data: several pieces, joined back exactly. */
	assert_non_null(strstr(strstr(m.p, "class=\"ktrace-data\">") + 1, "class=\"ktrace-data\">"));
	check_round_trip(d, m.p);
	/* Compact: well under the issue's 30 bytes per call, template included. */
	print_message("%zu bytes for %u calls: %.1f bytes/call\n", m.n, d->ncalls,
	              (double)m.n / d->ncalls);
	assert_true((double)m.n / d->ncalls < 12.0);
	free(m.p);
	kd_dec_free(d);
}

static void test_html_names_cannot_close_the_script(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	struct mem m;
	char *data;

	(void)state;
	snapbuild_thread(sb, 1, 7, "</script><b>\"&", 0);
	snapbuild_name(sb, 3, KTRACE_NAME_SPAN, "sp</script>an\n");
	snapbuild_name(sb, 4, KTRACE_NAME_MARK, "<!--");
	strcpy(snapbuild_info(sb)->exe, "/bin/<x>&amp;");
	snapbuild_span(sb, 0, 1, 100, 3, 0);
	snapbuild_mark(sb, 0, 1, 110, 4, 1);
	snapbuild_span(sb, 0, 1, 120, 3, 1);
	d = decode(sb);
	assert_int_equal(page(d, NULL, &m), 0);
	/* The data holds no '<' at all, so no name can end its element. */
	data = joined(m.p);
	assert_null(strchr(data, '<'));
	assert_non_null(strstr(data, "\\u003c/script\\u003e\\u003cb\\u003e\\\"\\u0026"));
	free(data);
	assert_non_null(strstr(m.p, "<title>ktrace timeline: &lt;x>&amp;amp;</title>"));
	free(m.p);
	kd_dec_free(d);
}

static void test_html_thread_filter(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_out_opts o = { .have_tid = 1, .tid = 101 };
	struct kd_dec *d;
	struct mem m;

	(void)state;
	snapbuild_thread(sb, 1, 100, "a", 0);
	snapbuild_thread(sb, 2, 101, "b", 0);
	snapbuild_func(sb, 0, 0x1000);
	snapbuild_enter(sb, 0, 1, 100, 0);
	snapbuild_exit(sb, 0, 1, 110, 0);
	snapbuild_enter(sb, 0, 2, 120, 0);
	snapbuild_exit(sb, 0, 2, 130, 0);
	d = decode(sb);
	assert_int_equal(kd_out_html_calls(&d, 1, &o), 1);
	assert_int_equal(page(d, &o, &m), 0);
	assert_null(strstr(m.p, "\"tid\":100,"));
	assert_non_null(strstr(m.p, "\"tid\":101,"));
	free(m.p);
	kd_dec_free(d);
}

/* Context switches and the budget (issue 18): each thread's packed off-CPU
 * intervals are the decoder's (cut to the window), each core's packed
 * on-CPU runs the decoder's, and the header carries what was muted and the
 * scheduling status. */
static void test_html_offcpu_oncpu_muted(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec_error err;
	struct kd_dec *d;
	struct mem m;
	char *data;
	const char *s;
	uint64_t noff = 0, non = 0;

	(void)state;
	snapbuild_scenario_viewer(sb);
	d = snapbuild_decode(sb, NULL, &err);
	if (!d)
		fail_msg("decode: %s", err.msg);
	assert_int_equal(page(d, NULL, &m), 0);
	data = joined(m.p);
	assert_non_null(strstr(data, "\"muted\":[{\"name\":\"0x405000\",\"why\":\"muted\""));
	assert_non_null(strstr(data, "\"muted_calls\":12345,"));
	assert_non_null(strstr(data, "\"sched_status\":\"scheduling: recorded, 7 switch records"));
	s = strstr(data, "\"threads\":[");
	for (uint32_t t = 0; t < d->nthreads; t++) {
		size_t len, p = 0;
		uint8_t *b;
		uint64_t at = d->window_start;
		int64_t n;

		s = strstr(s, "{\"name\":");
		assert_non_null(s);
		n = num_after(s, "\"noff\":");
		b = bytes_after(s, "\"off\":", &len);
		for (int64_t i = 0; i < n; i++) {
			uint32_t why = (uint32_t)uv(b, &p), k;
			uint64_t ob, oe;

			at += uv(b, &p);
			ob = at;
			oe = ob + uv(b, &p);
			k = d->offcpu_first[t] + (uint32_t)i;
			assert_true(k < d->offcpu_first[t + 1]);
			assert_int_equal(why, d->offcpu[k].why);
			assert_int_equal(ob, d->offcpu[k].begin < d->window_start ? d->window_start
			                                                           : d->offcpu[k].begin);
			assert_int_equal(oe, d->offcpu[k].end > d->window_end ? d->window_end
			                                                      : d->offcpu[k].end);
		}
		assert_int_equal(p, len);
		noff += (uint64_t)n;
		free(b);
		s++;
	}
	assert_int_equal(noff, d->noffcpu);
	s = strstr(data, "\"cores\":[");
	for (uint32_t c = 0; c < d->snap.ncores; c++) {
		size_t len, p = 0;
		uint8_t *b;
		uint64_t at = d->window_start;
		int64_t n;

		s = strstr(s, "\"sched\":");
		assert_non_null(s);
		n = num_after(s, "\"non\":");
		b = bytes_after(s, "\"on\":", &len);
		for (int64_t i = 0; i < n; i++) {
			uint64_t row = uv(b, &p), ob, oe;
			int found = 0;

			at += uv(b, &p);
			ob = at;
			oe = ob + uv(b, &p);
			for (uint32_t r = 0; r < d->noncpu && !found; r++)
				found = d->oncpu[r].cpu == d->snap.cores[c].cpu && d->oncpu[r].thread == row &&
				        (d->oncpu[r].begin < d->window_start ? d->window_start
				                                            : d->oncpu[r].begin) == ob;
			if (!found)
				fail_msg("cpu %u: on-CPU [%llu, %llu] of row %llu is not the decoder's",
				         d->snap.cores[c].cpu, (unsigned long long)ob, (unsigned long long)oe,
				         (unsigned long long)row);
		}
		assert_int_equal(p, len);
		non += (uint64_t)n;
		free(b);
		s++;
	}
	/* every run that overlaps the window (worker's [sched_from, 300] does not) */
	for (uint32_t r = 0; r < d->noncpu; r++)
		non -= d->oncpu[r].end > d->window_start && d->oncpu[r].begin < d->window_end;
	assert_int_equal(non, 0);
	free(data);
	free(m.p);
	kd_dec_free(d);
}

static void test_html_over_limit_writes_nothing(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_out_opts o = { .limit = 10 };
	struct kd_dec *d;
	struct mem m;

	(void)state;
	snapbuild_scenario_big(sb, 1, 800);
	d = decode(sb);
	assert_true(d->ncalls > 10);
	assert_int_equal(page(d, &o, &m), -1);
	assert_int_equal(m.n, 0);
	free(m.p);
	o.limit = d->ncalls;
	assert_int_equal(page(d, &o, &m), 0);
	assert_true(m.n > 0);
	free(m.p);
	kd_dec_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_html_template_filled),
		cmocka_unit_test(test_html_packs_many_calls),
		cmocka_unit_test(test_html_names_cannot_close_the_script),
		cmocka_unit_test(test_html_thread_filter),
		cmocka_unit_test(test_html_over_limit_writes_nothing),
		cmocka_unit_test(test_html_offcpu_oncpu_muted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
