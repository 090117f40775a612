/*
 * test_e2e_cxx.c - a C++ program traced end to end (examples/shapes.cpp):
 * classes, templates, STL containers, exceptions and threads.
 *
 * The program counts its own calls ("count NAME N" lines); the decoded
 * snapshot must hold exactly those calls under their demangled names, with
 * every exception's frames nested as the program nests them
 * (Registry::validate -> check -> fail, each closed by the unwinding:
 * -finstrument-functions makes GCC run the exit hook as a cleanup), and
 * the text, stats and chrome outputs of ktrace-decode must show demangled
 * names (short in timelines, full in stats and chrome's args).
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

/* Calls of the function whose demangled name starts with prefix. */
static uint64_t count_prefix(const struct kd_dec *d, const char *prefix, uint32_t *func)
{
	uint64_t n = 0;

	*func = KD_NONE;
	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (d->funcs[i].name && strncmp(d->funcs[i].name, prefix, strlen(prefix)) == 0)
			*func = i;
	for (uint32_t i = 0; i < d->ncalls; i++)
		n += d->calls[i].func == *func;
	return n;
}

static const char *dec_output(const char *fmt, const char *path, const char *extra)
{
	static char *buf;
	char cmd[8192];
	const char *emu = getenv("KTRACE_TEST_EMULATOR");
	size_t cap = 1 << 24, n;
	FILE *p;

	free(buf);
	buf = malloc(cap);
	assert_non_null(buf);
	snprintf(cmd, sizeof(cmd), "%s '%s' --format %s %s '%s' 2>&1", emu ? emu : "",
	         KTRACE_DECODE_PATH, fmt, extra, path);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(buf, 1, cap - 1, p);
	buf[n] = 0;
	if (pclose(p) != 0)
		fail_msg("%s: %.2000s", cmd, buf);
	return buf;
}

static void test_e2e_cxx_counts_nesting_names(void **state)
{
	char *dir = kt_mkdtemp("cxx");
	char envdir[300], line[4600], path[4400];
	const char *env[] = {envdir, "KTRACE_QUIET=1", NULL};
	char *argv[] = {(char *)KTRACE_EXAMPLE_SHAPES_PATH, (char *)"24", NULL};
	static const char *const names[] = {
		"shapes::total_area<double>", "shapes::Box<double>::area",
		"shapes::Registry::validate", "shapes::check", "shapes::fail"};
	long want[5];
	struct kt_proc p;

	(void)state;
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	for (int i = 0; i < 5; i++) {
		char name[256];
		assert_int_equal(kt_expect_line(&p, "count ", line, sizeof(line), 60000), 0);
		assert_int_equal(sscanf(line, "count %255s %ld", name, &want[i]), 2);
		assert_string_equal(name, names[i]);
	}
	assert_int_equal(kt_expect_line(&p, "snapshot: ", line, sizeof(line), 60000), 0);
	assert_int_equal(sscanf(line, "snapshot: %4399s", path), 1);
	if (kt_wait(&p, 60000) != 0)
		fail_msg("status %#x, stderr:\n%s", p.status, p.err);

	struct kd_dec *d = kd_open(path);
	assert_non_null(d);
	assert_int_equal(d->snap.damaged_blocks, 0);
	/* Exact counts under demangled names ("shapes::check(int)", ...). */
	uint32_t fn[5];
	for (int i = 0; i < 5; i++) {
		char pre[300];
		/* total_area<double> is printed with its return type first. */
		snprintf(pre, sizeof(pre), "%s%s%s", i == 0 ? "double " : "", names[i],
		         i == 0 ? "(" : "(");
		uint64_t got = count_prefix(d, pre, &fn[i]);
		if (got != (uint64_t)want[i])
			fail_msg("%s: decoded %llu calls, the program made %ld", pre,
			         (unsigned long long)got, want[i]);
	}
	/* Every exception: fail's parent is check, check's is validate, and
	 * each of them ended (exit hooks ran while unwinding), no exit lost. */
	uint64_t fails = 0;
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		if (c->func != fn[4])
			continue;
		fails++;
		assert_false(c->flags & (KD_CALL_TRUNC_END | KD_CALL_EXIT_LOST));
		assert_int_not_equal(c->parent, KD_NONE);
		const struct kd_dec_call *ck = &d->calls[c->parent];
		assert_int_equal(ck->func, fn[3]);
		assert_int_not_equal(ck->parent, KD_NONE);
		const struct kd_dec_call *v = &d->calls[ck->parent];
		assert_int_equal(v->func, fn[2]);
		assert_false((ck->flags | v->flags) & (KD_CALL_TRUNC_END | KD_CALL_EXIT_LOST));
		assert_true(ck->end >= c->end && v->end >= ck->end);
		/* validate's caller is the worker, not a frame the throw left open */
		assert_int_not_equal(v->parent, KD_NONE);
		assert_non_null(strstr(kd_func(d, &d->calls[v->parent]), "shapes::worker("));
	}
	assert_int_equal(fails, (uint64_t)want[4]);
	for (uint32_t i = 0; i < d->ncalls; i++)
		assert_false(d->calls[i].flags & KD_CALL_EXIT_LOST);
	kd_dec_free(d);

	/* The real decoder: demangled everywhere, short in timelines. */
	const char *out = dec_output("stats", path, "");
	assert_non_null(strstr(out, "shapes::Registry::validate(int)"));
	assert_non_null(strstr(out, "double shapes::total_area<double>(std::vector<shapes::Box<double>,"));
	assert_null(strstr(out, "_ZN6shapes"));
	out = dec_output("text", path, "");
	assert_non_null(strstr(out, "shapes::check(int)"));
	assert_non_null(strstr(out, "std::vector<...>::"));
	assert_null(strstr(out, "_ZN6shapes"));
	out = dec_output("chrome", path, "");
	assert_non_null(strstr(out, "\"full_name\":\"double shapes::total_area<double>(std::vector<shapes::Box<double>,"));
	assert_null(strstr(out, "_ZN6shapes"));
	out = dec_output("stats", path, "--no-demangle");
	assert_non_null(strstr(out, "_ZN6shapes5checkEi"));
	assert_null(strstr(out, "shapes::check(int)"));
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_cxx_counts_nesting_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
