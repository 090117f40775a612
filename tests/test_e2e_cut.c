/*
 * test_e2e_cut.c - exact cuts: --from/--to on a real traced program's
 * snapshot, cut at many points, in every format that draws calls.
 *
 * e2e_range (tests/e2e/range_prog.c: main > step > work/busy, 60 steps, a
 * trigger on step 30's request) runs once; its trigger and final snapshots
 * are decoded whole, then cut at points taken from the timeline itself:
 * exactly at calls' begin ticks (where a call ends and the next begins in
 * one tick: equal timestamps) and between them, with --from alone, --to
 * alone and both.  For every cut:
 *   - text: each thread's calls nest (tests/text/check_nesting.py) and the
 *     calls that begin in the range are the whole timeline's, in the same
 *     order, the ones across the start cut at its first tick
 *     (tests/text/check_cut.py);
 *   - chrome: every track's slices nest (tests/chrome/check_nesting.py);
 *   - perfetto: Perfetto's proto and the independent checker
 *     (tests/perfetto/check_pftrace.py: slices nest, times never go back).
 * And explain under a range names the trigger only if the trigger request
 * is wholly in it, with its whole duration; a range that clips it or
 * leaves it out names no other request "trigger".
 * Needs python3 and protoc (skipped without them, as the perfetto tests).
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

#include <cmocka.h>

#include "ktest.h"
#include "../perfetto/pfcheck.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_range"
#define NSTEPS 60
#define NPOINTS 5   /* x2 points: 8 took 46 s of the plain suite */

static struct fixture {
	char *dir;
	char trig[2100], final[2100];
	char full[2200];             /* the final file's whole text timeline */
	char pts[NPOINTS * 2][32];   /* cut points: HH:MM:SS.nnnnnnnnn */
	int npts;
	int tools;                   /* python3 and protoc found */
} fx;

static int run_decode(const char *const *args, struct kt_proc *p)
{
	char *argv[32];
	int n = 0;

	argv[n++] = (char *)KTRACE_DECODE_PATH;
	for (; *args && n < 30; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	kt_run(argv, NULL, p, 60000);
	return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
}

/* ktrace-decode args..., -o out: exit status 0 or the test fails. */
static void decode_to(const char *out, const char *const *args)
{
	const char *a[32];
	struct kt_proc p;
	int n = 0;

	for (; *args && n < 28; args++)
		a[n++] = *args;
	a[n++] = "-q";
	a[n++] = "-o";
	a[n++] = out;
	a[n] = NULL;
	if (run_decode(a, &p) != 0)
		fail_msg("ktrace-decode failed (%#x): %s", p.status, p.err);
	kt_proc_free(&p);
}

/* Under ASan the cuts are decoded (the decoder runs sanitized) and not
 * judged: the checkers read the same bytes in every build, and took most
 * of this test's 31 s there; the plain build judges them. */
#if defined(__SANITIZE_ADDRESS__)
#define JUDGE 0
#else
#define JUDGE 1
#endif

/* Run a checker script; its last lines go to the failure message. */
static void check(const char *what, const char *cmd)
{
	char buf[8192];
	size_t n;
	FILE *f;
	int st;

	if (!JUDGE)
		return;
	f = popen(cmd, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("%s: %s\n%s", what, cmd, buf);
}

/* A call's line of the text timeline (not a mark, request, off-CPU line). */
static int is_call_line(const char *line)
{
	return line[0] >= '0' && line[0] <= '9' && line[2] == ':' && strstr(line, " cpu") &&
	       !strstr(line, ">> request") && !strstr(line, "* mark");
}

/* Cut points of a text timeline: begin times of npts calls spread over it
 * (exact ticks, where one call often ends as the next begins), each also
 * 1 ns later (inside the tick or between ticks).  Returns how many. */
static int cut_points(const char *full, char (*pts)[32], int npts)
{
	char line[2048];
	long ncalls = 0;
	int n = 0;
	FILE *f = fopen(full, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && strncmp(line, "cores (UTC", 10))
		if (is_call_line(line))
			ncalls++;
	rewind(f);
	for (long k = 0; fgets(line, sizeof(line), f) && n < npts * 2;) {
		long long ns;

		if (!strncmp(line, "cores (UTC", 10))
			break;
		if (!is_call_line(line))
			continue;
		if (k++ % (ncalls / npts + 1) != ncalls / npts / 2)
			continue;
		ns = atoll(line + 9);
		snprintf(pts[n++], 32, "%.8s.%09lld", line, ns);
		snprintf(pts[n++], 32, "%.8s.%09lld", line, ns + 1);
	}
	fclose(f);
	return n;
}

static int setup(void **state)
{
	char envdir[300], line[2048];
	const char *env[] = { envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", "KTRACE_SIGNAL",
		              "KTRACE_TRIGGER_US=30000", "KTRACE_TRIGGER_PCT",
		              "KTRACE_TRIGGER_DELAY_MS=100", "KTRACE_BUFFER_MB=4",
		              "KTRACE_KEEP=all", NULL };
	char *argv[] = { (char *)PROG, NULL };
	const char *args[] = { "--format", "text", fx.final, NULL };
	struct kt_proc p;
	char **files;
	int n;

	(void)state;
	fx.tools = system("command -v protoc >/dev/null && command -v python3 >/dev/null") == 0;
	fx.dir = kt_mkdtemp("cut");
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", fx.dir);
	if (kt_spawn(&p, argv, env, NULL) != 0)
		return -1;
	if (kt_expect_line(&p, "snapshot 0 ", line, sizeof(line), 60000) != 0)
		return -1;
	snprintf(fx.final, sizeof(fx.final), "%s", line + strlen("snapshot 0 "));
	if (kt_wait(&p, 30000) != 0)
		return -1;
	kt_proc_free(&p);
	n = kt_list_snapshots(fx.dir, &files);
	for (int i = 0; i < n; i++)
		if (strcmp(files[i], fx.final) != 0)
			snprintf(fx.trig, sizeof(fx.trig), "%s", files[i]);
	kt_free_list(files);
	if (!fx.trig[0])
		return -1;
	snprintf(fx.full, sizeof(fx.full), "%s/full.txt", fx.dir);
	decode_to(fx.full, args);
	fx.npts = cut_points(fx.full, fx.pts, NPOINTS);
	return fx.npts >= 8 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	kt_rmtree(fx.dir);
	free(fx.dir);
	return 0;
}

/* text of file cut by range: nests, and is its whole timeline (full) cut
 * exactly. */
static void check_text(const char *file, const char *full, const char *const *range)
{
	const char *a[16];
	char out[2200], cmd[9000];
	int n = 0;

	snprintf(out, sizeof(out), "%s/cut.txt", fx.dir);
	a[n++] = "--format";
	a[n++] = "text";
	for (; *range; range++)
		a[n++] = *range;
	a[n++] = file;
	a[n] = NULL;
	decode_to(out, a);
	snprintf(cmd, sizeof(cmd), "python3 '%s/text/check_nesting.py' '%s' 2>&1 && "
	         "python3 '%s/text/check_cut.py' '%s' '%s' 2>&1", KTRACE_TEST_SOURCE_DIR, out,
	         KTRACE_TEST_SOURCE_DIR, full, out);
	check("text", cmd);
}

static void check_chrome_perfetto(const char *file, const char *const *range)
{
	const char *a[16];
	char out[1024], cmd[3000], why[256], *res;
	int n = 0;

	snprintf(out, sizeof(out), "%s/cut.json", fx.dir);
	a[n++] = "--format";
	a[n++] = "chrome";
	for (const char *const *r = range; *r; r++)
		a[n++] = *r;
	a[n++] = file;
	a[n] = NULL;
	decode_to(out, a);
	snprintf(cmd, sizeof(cmd), "python3 '%s/chrome/check_nesting.py' '%s' 2>&1",
	         KTRACE_TEST_SOURCE_DIR, out);
	check("chrome", cmd);

	snprintf(out, sizeof(out), "%s/cut.pftrace", fx.dir);
	a[1] = "perfetto";
	decode_to(out, a);
	if (!JUDGE)
		return;
	res = pf_check(out, why, sizeof(why));
	if (!res)
		fail_msg("perfetto: %s", why);
	free(res);
}

static void test_e2e_cut_from(void **state)
{
	(void)state;
	if (!fx.tools)
		skip();
	for (int i = 0; i < fx.npts; i++) {
		const char *r[] = { "--from", fx.pts[i], NULL };

		check_text(fx.final, fx.full, r);
		check_chrome_perfetto(fx.final, r);
	}
}

static void test_e2e_cut_to(void **state)
{
	(void)state;
	if (!fx.tools)
		skip();
	for (int i = 0; i < fx.npts; i++) {
		const char *r[] = { "--to", fx.pts[i], NULL };

		check_text(fx.final, fx.full, r);
		check_chrome_perfetto(fx.final, r);
	}
}

/* Both edges at points of the timeline, short and long ranges. */
static void test_e2e_cut_from_to(void **state)
{
	(void)state;
	if (!fx.tools)
		skip();
	for (int i = 0; i + 1 < fx.npts; i++) {
		int j = i % 2 ? i + 1 : (i + 5 < fx.npts ? i + 5 : fx.npts - 1);
		const char *r[] = { "--from", fx.pts[i], "--to", fx.pts[j], NULL };

		check_text(fx.final, fx.full, r);
		check_chrome_perfetto(fx.final, r);
	}
}

/* explain's first line: "  trigger: ..." or "  no trigger ..." */
static char *explain_line(const char *const *range, char *buf, size_t len)
{
	const char *a[16];
	struct kt_proc p;
	int n = 0;
	const char *s, *e;

	a[n++] = "--format";
	a[n++] = "explain";
	for (; *range; range++)
		a[n++] = *range;
	a[n++] = fx.trig;
	a[n] = NULL;
	if (run_decode(a, &p) != 0)
		fail_msg("explain failed (%#x): %s", p.status, p.err);
	s = strstr(p.out, "\nexplain:\n");
	assert_non_null(s);
	s += strlen("\nexplain:\n");
	e = strchr(s, '\n');
	snprintf(buf, len, "%.*s", e ? (int)(e - s) : (int)strlen(s), s);
	kt_proc_free(&p);
	return buf;
}

/* The trigger request's begin and end (text timeline of the trigger file). */
static void trigger_times(char *from, char *to, size_t len)
{
	const char *a[] = { "--format", "text", fx.trig, NULL };
	struct kt_proc p;
	const char *l;

	assert_int_equal(run_decode(a, &p), 0);
	l = strstr(p.out, "<== TRIGGER");
	assert_non_null(l);
	while (l > p.out && l[-1] != '\n')
		l--;
	snprintf(from, len, "%.18s", l);
	kt_proc_free(&p);
	/* +1 ms: inside the request (60 ms), after its begin */
	{
		int h, m, s;
		long long ns;

		assert_int_equal(sscanf(from, "%d:%d:%d.%lld", &h, &m, &s, &ns), 4);
		ns += 1000000;
		if (ns >= 1000000000) {
			ns -= 1000000000;
			s++;
		}
		snprintf(to, len, "%02d:%02d:%02d.%09lld", h, m, s, ns);
	}
}

static void test_e2e_cut_explain_trigger(void **state)
{
	char whole[512], got[512], begin[32], inside[32];
	const char *none[] = { NULL };
	const char *around[] = { "--around-trigger", "1ms", NULL };
	const char *clip[] = { "--from", inside, NULL };
	const char *clip_end[] = { "--to", inside, NULL };
	const char *before[] = { "--to", begin, NULL };
	(void)state;
	trigger_times(begin, inside, sizeof(begin));
	explain_line(none, whole, sizeof(whole));
	assert_non_null(strstr(whole, "  trigger: \"step\" request"));
	assert_non_null(strstr(whole, " took "));
	/* Wholly inside: named, with the same duration. */
	explain_line(around, got, sizeof(got));
	assert_string_equal(got, whole);
	/* Clipped at its start, at its end, or only its first tick in the
	 * range: never "trigger:", never a clipped duration. */
	explain_line(clip, got, sizeof(got));
	if (strstr(got, "trigger:"))
		fail_msg("--from %s clips the trigger request, yet: %s", inside, got);
	explain_line(clip_end, got, sizeof(got));
	if (strstr(got, "trigger:"))
		fail_msg("--to %s clips the trigger request, yet: %s", inside, got);
	explain_line(before, got, sizeof(got));
	if (strstr(got, "trigger:"))
		fail_msg("--to %s leaves the trigger request out, yet: %s", begin, got);
	assert_non_null(strstr(got, "not wholly in the range"));
}

#ifdef KTRACE_EXAMPLE_SERVER_PATH
/*
 * The demo server (examples/server.c: five threads, requests held aside,
 * handle_request > handle_put > log_append > compact_log, context
 * switches): its trigger snapshot cut at points of its own timeline, a
 * 300 us range after each, in text, chrome and perfetto.
 */
static void test_e2e_cut_demo_server(void **state)
{
	char dir[2300], full[2300], pts[6][32], line[2300], snap[2300] = "";
	const char *env[] = { dir, "KTRACE_QUIET=1", "KTRACE_ENABLE", "KTRACE_TRIGGER_US",
		              "KTRACE_TRIGGER_PCT", "KTRACE_TRIGGER_MIN_SAMPLES",
		              "KTRACE_TRIGGER_DELAY_MS", "KTRACE_MAX_SNAPSHOTS_PER_MIN",
		              "KTRACE_BUFFER_MB", NULL };
	char *argv[] = { (char *)KTRACE_EXAMPLE_SERVER_PATH, NULL };
	const char *a[] = { "--format", "text", snap, NULL };
	struct kt_proc p;
	char **files;
	int n, np;

	(void)state;
	if (!fx.tools)
		skip();
	snprintf(dir, sizeof(dir), "KTRACE_DIR=%s/demo", fx.dir);
	snprintf(line, sizeof(line), "%s/demo", fx.dir);
	assert_int_equal(mkdir(line, 0700), 0);
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	if (kt_wait(&p, 120000) != 0)
		fail_msg("the demo server failed (%#x): %s", p.status, p.err);
	kt_proc_free(&p);
	n = kt_list_snapshots(line, &files);
	if (n > 0)
		snprintf(snap, sizeof(snap), "%s", files[0]);
	kt_free_list(files);
	assert_true(n > 0);
	snprintf(full, sizeof(full), "%s/demo/full.txt", fx.dir);
	decode_to(full, a);
	np = cut_points(full, pts, 2);   /* 3 took 17-27 s, run alone */
	assert_true(np >= 4);
	for (int i = 0; i < np; i++) {
		int h, m, s;
		long long ns;
		char to[32];
		const char *r[] = { "--from", pts[i], "--to", to, NULL };

		assert_int_equal(sscanf(pts[i], "%d:%d:%d.%lld", &h, &m, &s, &ns), 4);
		ns += 300000;
		if (ns >= 1000000000) {
			ns -= 1000000000;
			s++;
		}
		snprintf(to, sizeof(to), "%02d:%02d:%02d.%09lld", h, m, s, ns);
		check_text(snap, full, r);
		check_chrome_perfetto(snap, r);
	}
}
#endif

#ifdef KTRACE_EXAMPLE_SERVER_PATH
/* test_e2e_cut_demo (`test_e2e_cut demo`): its own directory only. */
static int demo_setup(void **state)
{
	(void)state;
	fx.tools = system("command -v protoc >/dev/null && command -v python3 >/dev/null") == 0;
	fx.dir = kt_mkdtemp("cut");
	return 0;
}
#endif

/* Two ctest tests: test_e2e_cut (the range program: no timing, runs beside
 * others) and test_e2e_cut_demo, `test_e2e_cut demo` (the demo server,
 * whose trigger wants a quiet machine: run alone). */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_cut_from),
		cmocka_unit_test(test_e2e_cut_to),
		cmocka_unit_test(test_e2e_cut_from_to),
		cmocka_unit_test(test_e2e_cut_explain_trigger),
	};

	if (argc > 1 && strcmp(argv[1], "demo") == 0) {
#ifdef KTRACE_EXAMPLE_SERVER_PATH
		const struct CMUnitTest demo[] = {
			cmocka_unit_test(test_e2e_cut_demo_server),
		};
		return cmocka_run_group_tests(demo, demo_setup, teardown);
#else
		fprintf(stderr, "test_e2e_cut: built without the demo server\n");
		return 1;
#endif
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
