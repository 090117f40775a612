/*
 * test_e2e_html.c - the HTML timeline (ktrace-decode --format html) in a
 * real browser: real traced programs, real snapshots, the real decoder,
 * and headless Chromium showing the pages (tests/html/pagecheck.py drives
 * it over the DevTools protocol with real clicks and typed text).
 *
 * Two pages:
 *   calls    e2e_calls (tests/e2e/traced_calls.c): 8 named workers with
 *            known call counts, sleep_250ms on worker-1, spin_5ms on
 *            worker-0; no trigger.
 *   trigger  e2e_trigger abs (tests/e2e/trigger_prog.c): 20 us "get"
 *            requests and one of 10 ms that fires the trigger.
 *
 * Checked, as a person would see it: the pages load without console errors;
 * one thread row per thread of the snapshot, with its name and tid; typing
 * a function name counts exactly its calls ("N calls", then "1 of N");
 * clicking a known call shows its function, thread, and the start (UTC)
 * and duration the text output prints; "Go to the slow request" brings the trigger request
 * into view, wide, with its details; links (#search=NAME, #trigger) open
 * the page there (read back with chromium --dump-dom); the page loads
 * nothing from outside;
 * a window over the page's limit is refused with a clear message.
 *
 * Screenshots of every case: <build>/tests/html-shots/{calls,trigger}-*.png.
 * Needs chromium and python3 (installed as .ci/deps.sh --browser does when
 * run as root; otherwise the tests are skipped, saying what to install).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"

#define CALLS_PROG KTRACE_TEST_BINARY_DIR "/e2e_calls"
#define TRIGGER_PROG KTRACE_TEST_BINARY_DIR "/e2e_trigger"
#define PAGECHECK KTRACE_TEST_SOURCE_DIR "/html/pagecheck.py"
#define DEPS KTRACE_TEST_SOURCE_DIR "/../.ci/deps.sh"
#define SHOTS KTRACE_TEST_BINARY_DIR "/html-shots"
#define NWORKERS 8

struct page {
	char snap[4400];        /* snapshot file */
	char html[4400];        /* the page */
	char *seen;             /* pagecheck.py's observations */
	struct kd_dec *d;   /* the snapshot, decoded by the library */
};

struct fixture {
	char *dir;
	int have_browser;
	struct page calls, trig;
};

static struct fixture fx;

/* Line of out starting with prefix (tab-separated fields), or NULL. */
static const char *seen(const char *out, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *s = out; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
		if (!strncmp(s, prefix, n))
			return s + n;
	return NULL;
}

/* Field i (0-based) of a tab-separated line into buf. */
static const char *field(const char *line, int i, char *buf, size_t len)
{
	const char *s = line;

	for (; i > 0 && s; i--)
		s = strchr(s, '\t') ? strchr(s, '\t') + 1 : NULL;
	if (!s)
		return NULL;
	size_t n = strcspn(s, "\t\n");
	if (n >= len)
		n = len - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
	return buf;
}

static void decode_html(struct page *pg, const char *name)
{
	struct kt_proc p;
	char *argv[] = {(char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)"html", (char *)"-q",
	                (char *)"-o", pg->html, pg->snap, NULL};

	snprintf(pg->html, sizeof(pg->html), "%s/%s.html", fx.dir, name);
	if (kt_run(argv, NULL, &p, 60000) != 0)
		fail_msg("ktrace-decode --format html failed (%#x): %s", p.status, p.err);
	kt_proc_free(&p);
	pg->d = kd_open(pg->snap);
	assert_non_null(pg->d);
}

static void check_page(struct page *pg, const char *name, char *const *args)
{
	char *argv[32];
	struct kt_proc p;
	int n = 0;

	argv[n++] = (char *)PAGECHECK; /* #!/usr/bin/env python3 */
	argv[n++] = pg->html;
	argv[n++] = (char *)SHOTS;
	argv[n++] = (char *)name;
	for (; *args; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	if (kt_run(argv, NULL, &p, 120000) != 0)
		fail_msg("pagecheck.py %s failed (%#x):\n%s\n%s", name, p.status, p.out, p.err);
	print_message("---- %s page (%s)\n%s", name, pg->html, p.out);
	pg->seen = strdup(p.out);
	kt_proc_free(&p);
}

static void make_calls_snapshot(void)
{
	char envdir[300], line[4600];
	const char *env[] = {envdir, "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=8", "KTRACE_RSEQ",
	                     "KTRACE_CLOCK", "KTRACE_SIGNAL", "KTRACE_ENABLE", NULL};
	char *argv[] = {(char *)CALLS_PROG, (char *)"calls", NULL};
	struct kt_proc p;
	int rc = -1;

	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", fx.dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	if (kt_expect_line(&p, "snapshot ", line, sizeof(line), 60000) != 0)
		fail_msg("e2e_calls: no snapshot line; stderr:\n%s", p.err);
	assert_int_equal(sscanf(line, "snapshot %d %4399s", &rc, fx.calls.snap), 2);
	assert_int_equal(rc, 0);
	kt_close_stdin(&p);
	if (kt_wait(&p, 30000) != 0)
		fail_msg("e2e_calls failed (%#x): %s", p.status, p.err);
	kt_proc_free(&p);
}

static void make_trigger_snapshot(void)
{
	char envdir[300], **files;
	char *tdir = kt_mkdtemp("html-trig");
	const char *env[] = {envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", "KTRACE_SIGNAL",
	                     "KTRACE_TRIGGER_PCT", "KTRACE_TRIGGER_MIN_SAMPLES",
	                     "KTRACE_MAX_SNAPSHOTS_PER_MIN", "KTRACE_BUFFER_MB=2",
	                     "KTRACE_TRIGGER_US=2000", "KTRACE_TRIGGER_DELAY_MS=100", NULL};
	char *argv[] = {(char *)TRIGGER_PROG, (char *)"abs", NULL};
	struct kt_proc p;

	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", tdir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	if (kt_expect_line(&p, "done", NULL, 0, 60000) != 0)
		fail_msg("e2e_trigger did not finish; stderr:\n%s", p.err);
	assert_true(kt_wait_snapshots(tdir, 1, 10000) >= 1);
	kt_close_stdin(&p);
	if (kt_wait(&p, 30000) != 0)
		fail_msg("e2e_trigger failed (%#x): %s", p.status, p.err);
	kt_proc_free(&p);
	assert_true(kt_list_snapshots(tdir, &files) >= 1);
	/* The first file is the slow request's (test_e2e_trigger says why). */
	snprintf(fx.trig.snap, sizeof(fx.trig.snap), "%s/trigger.ktrace", fx.dir);
	assert_int_equal(rename(files[0], fx.trig.snap), 0);
	kt_free_list(files);
	kt_rmtree(tdir);
	free(tdir);
}

static int setup(void **state)
{
	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	/* Under ASan the traced programs and the decoder that writes the
	 * pages run sanitized (the first test); Chromium's checks of the
	 * pages are the same in every build, and took 19 s of this test's
	 * 22 s: the plain build runs them. */
	fx.have_browser = 0;
	fprintf(stderr, "test_e2e_html: under ASan the pages are written, not opened "
	                "(the plain build opens them)\n");
#else
	struct kt_proc p;
	char *deps[] = {(char *)DEPS, (char *)"test_e2e_html", (char *)"--browser", NULL};

	/* Installs chromium and python3 when root; else says what to install. */
	fx.have_browser = kt_run(deps, NULL, &p, 600000) == 0;
	if (!fx.have_browser)
		fprintf(stderr, "test_e2e_html: no browser, skipping: %s\n", p.err);
	kt_proc_free(&p);
#endif
	fx.dir = kt_mkdtemp("html");
	mkdir(SHOTS, 0755);
	return fx.dir ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	if (fx.calls.d)
		kd_dec_free(fx.calls.d);
	if (fx.trig.d)
		kd_dec_free(fx.trig.d);
	free(fx.calls.seen);
	free(fx.trig.seen);
	kt_rmtree(fx.dir);
	free(fx.dir);
	return 0;
}

/* Runs first: both pages, every case, screenshots; the tests below judge. */
static void test_e2e_html_pages_open_in_chromium(void **state)
{
	static char *calls_args[] = {
		"--search", "leaf_a", "--search", "mid_b", "--search", "leaf_c", "--search",
		"worker_main", "--click", "sleep_250ms:0", "--click", "spin_5ms:0", "--trigger", NULL};
	static char *trig_args[] = {"--search", "handle_get", "--trigger", NULL};

	(void)state;
	make_calls_snapshot();
	make_trigger_snapshot();
	decode_html(&fx.calls, "calls");
	decode_html(&fx.trig, "trigger");
	if (!fx.have_browser)
		skip();
	check_page(&fx.calls, "calls", calls_args);
	check_page(&fx.trig, "trigger", trig_args);
}

static void need_pages(void)
{
	if (!fx.have_browser)
		skip();
	if (!fx.calls.seen || !fx.trig.seen)
		fail_msg("the pages were not checked (see the first test)");
}

static void test_e2e_html_loads_without_console_errors(void **state)
{
	struct page *pages[] = {&fx.calls, &fx.trig};
	char buf[64];

	(void)state;
	need_pages();
	for (int i = 0; i < 2; i++) {
		const char *err = seen(pages[i]->seen, "error\t"), *ready = seen(pages[i]->seen, "ready\t");

		if (err)
			fail_msg("%s: console error: %.300s", pages[i]->html, err);
		assert_non_null(ready);
		/* Every decoded call is on the page. */
		assert_int_equal(strtoull(field(ready, 1, buf, sizeof(buf)), NULL, 10),
		                 pages[i]->d->ncalls);
	}
}

static void test_e2e_html_thread_rows_match_snapshot(void **state)
{
	const struct kd_dec *d;
	uint32_t want = 0, rows = 0, cores = 0;
	char label[128], buf[160];

	(void)state;
	need_pages();
	d = fx.calls.d;
	for (const char *s = fx.calls.seen; (s = seen(s, "row\t")) != NULL; s = strchr(s, '\n')) {
		field(s, 0, buf, sizeof(buf));
		if (!strcmp(buf, "thread"))
			rows++;
		if (!strcmp(buf, "core"))
			cores++;
		if (!strchr(s, '\n'))
			break;
	}
	/* Every thread with data: main and the 8 workers, by name and tid. */
	for (uint32_t t = 0; t < d->nthreads; t++) {
		if (!d->threads[t].events)
			continue;
		want++;
		snprintf(label, sizeof(label), "row\tthread\t%s tid %d\n", d->threads[t].name,
		         d->threads[t].tid);
		if (!strstr(fx.calls.seen, label))
			fail_msg("no thread row \"%s tid %d\"", d->threads[t].name, d->threads[t].tid);
	}
	assert_int_equal(want, NWORKERS + 1);
	/* A thread with no events but context switches in the window (under
	 * TSan, its background thread) also gets a row: the page shows when
	 * it ran. */
	assert_true(rows >= want);
	for (int i = 0; i < NWORKERS; i++) {
		snprintf(label, sizeof(label), "row\tthread\tworker-%d tid ", i);
		assert_non_null(strstr(fx.calls.seen, label));
	}
	assert_int_equal(cores, d->snap.ncores);
}

static void check_search(const struct page *pg, const char *func, uint64_t n)
{
	char prefix[64], want[64], buf[64];
	const char *s;

	snprintf(prefix, sizeof(prefix), "search\t%s\t", func);
	s = seen(pg->seen, prefix);
	if (!s)
		fail_msg("no search result for %s", func);
	snprintf(want, sizeof(want), "%llu calls", (unsigned long long)n);
	if (strcmp(field(s, 0, buf, sizeof(buf)), want))
		fail_msg("typing %s shows \"%s\", expected \"%s\"", func, buf, want);
	snprintf(want, sizeof(want), "1 of %llu", (unsigned long long)n);
	if (strcmp(field(s, 1, buf, sizeof(buf)), want))
		fail_msg("next match of %s shows \"%s\", expected \"%s\"", func, buf, want);
}

static void test_e2e_html_search_counts_every_call(void **state)
{
	uint64_t leaf_a = 0, mid_b = 0;

	(void)state;
	need_pages();
	/* What traced_calls.c did: worker i calls leaf_a (i+1)*300 times and
	 * mid_b on every third (which calls leaf_c twice). */
	for (int i = 0; i < NWORKERS; i++) {
		leaf_a += (uint64_t)(i + 1) * 300;
		mid_b += ((uint64_t)(i + 1) * 300 + 2) / 3;
	}
	check_search(&fx.calls, "leaf_a", leaf_a);
	check_search(&fx.calls, "mid_b", mid_b);
	check_search(&fx.calls, "leaf_c", 2 * mid_b);
	check_search(&fx.calls, "worker_main", NWORKERS);
	check_search(&fx.trig, "handle_get", kd_count(fx.trig.d, KD_NONE, "handle_get"));
}

static void check_click(const char *func, const char *thread_name)
{
	const struct kd_dec *d = fx.calls.d;
	const struct kd_dec_call *c = NULL;
	char prefix[64], want[160], buf[1024];
	const char *s;

	for (uint32_t i = 0; i < d->ncalls && !c; i++)
		if (kd_is(d, &d->calls[i], func))
			c = &d->calls[i];
	assert_non_null(c);
	snprintf(prefix, sizeof(prefix), "click\t%s\t0\t", func);
	s = seen(fx.calls.seen, prefix);
	if (!s)
		fail_msg("no click result for %s", func);
	field(s, 1, buf, sizeof(buf));
	/* The details name the function, its thread and the duration exactly as
	 * the text output prints it. */
	if (strncmp(buf, func, strlen(func)))
		fail_msg("clicking %s shows: %s", func, buf);
	kd_time_fmt_dur(kd_ns(d, c), want, sizeof(want));
	if (!strstr(buf, want))
		fail_msg("clicking %s shows: %s; expected the duration %s", func, buf, want);
	/* The start in UTC wall-clock time, as the text output prints it. */
	kd_time_fmt_wall(kd_time_wall_ns(d, c->begin), 0, want, sizeof(want));
	if (!strstr(buf, want))
		fail_msg("clicking %s shows: %s; expected the start %s", func, buf, want);
	snprintf(want, sizeof(want), "%s (%d)", thread_name, d->threads[c->thread].tid);
	if (!strstr(buf, want))
		fail_msg("clicking %s shows: %s; expected the thread %s", func, buf, want);
	assert_true(kd_ns(d, c) > 0);
}

static void test_e2e_html_click_shows_call_duration(void **state)
{
	(void)state;
	need_pages();
	check_click("sleep_250ms", "worker-1");
	check_click("spin_5ms", "worker-0");
}

static void test_e2e_html_goto_slow_request(void **state)
{
	const struct kd_dec *d = fx.trig.d;
	const struct kd_dec_request *q;
	char buf[1024], want[128];
	const char *s;

	(void)state;
	need_pages();
	assert_true(d->snap.have_trigger);
	assert_int_not_equal(d->trigger_req, KD_NONE);
	q = &d->reqs[d->trigger_req];
	s = seen(fx.trig.seen, "trigger\t");
	assert_non_null(s);
	/* The slow request is in view and fills most of it. */
	if (strcmp(field(s, 0, buf, sizeof(buf)), "1"))
		fail_msg("after \"Go to the slow request\" the request is not in view: %s", s);
	if (atof(field(s, 1, buf, sizeof(buf))) < 0.5)
		fail_msg("the slow request takes only %s of the view", buf);
	field(s, 2, buf, sizeof(buf));
	{
		char ib[48];

		/* the id as every format prints it (format 1: slot.seq) */
		snprintf(want, sizeof(want), "request get %s (the slow request: trigger)",
		         kd_names_req_id(q, ib, sizeof(ib)));
	}
	if (!strstr(buf, want))
		fail_msg("details: %s; expected %s", buf, want);
	kd_time_fmt_dur(kd_time_ticks_ns(d, q->end - q->begin), want, sizeof(want));
	if (!strstr(buf, want))
		fail_msg("details: %s; expected the duration %s", buf, want);
	/* The header says what fired; a page without a trigger has no button. */
	s = seen(fx.trig.seen, "header\t");
	assert_non_null(s);
	assert_non_null(strstr(s, "trigger: slow \"get\" request"));
	assert_non_null(seen(fx.calls.seen, "trigger\t0\t0\tno \"Go to the slow request\" button"));
}

/* Chromium's --dump-dom of the page opened at url (malloc'd), or NULL. */
static char *dump_dom(const char *url)
{
	char *argv[] = {(char *)"/usr/bin/env", (char *)"chromium", (char *)"--headless=new",
	                (char *)"--no-sandbox", (char *)"--disable-gpu", (char *)"--dump-dom",
	                (char *)url, NULL};
	struct kt_proc p;
	char *out;

	if (kt_run(argv, NULL, &p, 120000) != 0) {
		kt_proc_free(&p);
		return NULL;
	}
	out = strdup(p.out);
	kt_proc_free(&p);
	return out;
}

/* Links into the page: #search=NAME and #trigger, read back from the DOM. */
static void test_e2e_html_links_search_and_trigger(void **state)
{
	char url[4600], want[128];
	char *dom;

	(void)state;
	need_pages();
	snprintf(url, sizeof(url), "file://%s#search=mid_b", fx.calls.html);
	dom = dump_dom(url);
	assert_non_null(dom);
	if (!strstr(dom, "<span id=\"search-count\" class=\"\">1 of 3600</span>"))
		fail_msg("#search=mid_b: no \"1 of 3600\" in the page");
	assert_non_null(strstr(dom, "<span class=\"name\">mid_b</span>"));
	free(dom);
	snprintf(url, sizeof(url), "file://%s#trigger", fx.trig.html);
	dom = dump_dom(url);
	assert_non_null(dom);
	{
		char ib[48];

		snprintf(want, sizeof(want), "get %s (the slow request: trigger)",
		         kd_names_req_id(&fx.trig.d->reqs[fx.trig.d->trigger_req], ib, sizeof(ib)));
	}
	if (!strstr(dom, want))
		fail_msg("#trigger: the details do not show %s", want);
	free(dom);
}

/* Nothing loaded from outside: one file, no network. */
static void test_e2e_html_page_is_self_contained(void **state)
{
	static const char *const bad[] = {"<script src", "<link", "http://", "https://", "@import",
	                                  "url(", "@font-face", "fetch(", "XMLHttpRequest"};
	FILE *f;
	char *text;
	long n;

	(void)state;
	if (!fx.calls.html[0])
		fail_msg("no page was written (see the first test)");
	f = fopen(fx.calls.html, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = malloc((size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
	text[n] = 0;
	fclose(f);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (strstr(text, bad[i]))
			fail_msg("the page contains \"%s\"", bad[i]);
	assert_non_null(strstr(text, "<script type=\"application/json\" class=\"ktrace-data\">"));
	/* Packed: well under 30 bytes per call, template included. */
	print_message("page: %ld bytes, %u calls, %.1f bytes/call\n", n, fx.calls.d->ncalls,
	              (double)n / fx.calls.d->ncalls);
	assert_true((double)n / fx.calls.d->ncalls < 30.0);
	free(text);
}

/* Over the page's limit: no page, and a message saying what to do. */
static void test_e2e_html_over_limit_is_refused(void **state)
{
	char out[4500];
	struct kt_proc p;
	struct stat st;
	char *argv[] = {(char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)"html",
	                (char *)"--limit", (char *)"1000", (char *)"-q", (char *)"-o", out,
	                fx.calls.snap, NULL};

	(void)state;
	if (!fx.calls.snap[0])
		fail_msg("no snapshot (see the first test)");
	snprintf(out, sizeof(out), "%s/over.html", fx.dir);
	assert_int_not_equal(kt_run(argv, NULL, &p, 60000), 0);
	assert_int_equal(WEXITSTATUS(p.status), 1);
	if (!strstr(p.err, "more than one HTML page holds (1000, --limit)") ||
	    !strstr(p.err, "--thread TID") || !strstr(p.err, "--format chrome"))
		fail_msg("unclear message: %s", p.err);
	assert_int_not_equal(stat(out, &st), 0);
	assert_int_equal(kt_count_entries(fx.dir), 4); /* 2 snapshots, 2 pages */
	kt_proc_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_html_pages_open_in_chromium),
		cmocka_unit_test(test_e2e_html_loads_without_console_errors),
		cmocka_unit_test(test_e2e_html_thread_rows_match_snapshot),
		cmocka_unit_test(test_e2e_html_search_counts_every_call),
		cmocka_unit_test(test_e2e_html_click_shows_call_duration),
		cmocka_unit_test(test_e2e_html_goto_slow_request),
		cmocka_unit_test(test_e2e_html_links_search_and_trigger),
		cmocka_unit_test(test_e2e_html_page_is_self_contained),
		cmocka_unit_test(test_e2e_html_over_limit_is_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
