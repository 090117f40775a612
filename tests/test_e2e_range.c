/*
 * test_e2e_range.c - --from / --to / --around-trigger / --min-dur on a real
 * snapshot (issue 8).  e2e_range (tests/e2e/range_prog.c) runs 60 steps 2 ms
 * apart and prints the CLOCK_REALTIME interval of each; step 30 is slow and
 * fires a trigger (whose snapshot, 100 ms later, may miss the last steps on
 * a loaded machine: --around-trigger uses it, the rest the final snapshot
 * taken after all steps).  Cutting between steps must keep exactly the steps inside:
 * their "tick" marks, their requests and their calls, in every form of the
 * options, and in the formats that count (text, stats, chrome, folded).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"
#include "../perfetto/pfcheck.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_range"
#define NSTEPS 60
#define SLOW_STEP 30

static struct fixture {
	char *dir;
	char trig[4700], final[4700];
	long long t0[NSTEPS], t1[NSTEPS]; /* CLOCK_REALTIME ns of each step */
	int64_t win0;                     /* wall ns of the final file's window start */
} fx;

static int setup(void **state)
{
	char envdir[300], line[4600];
	const char *env[] = { envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", "KTRACE_SIGNAL",
		              "KTRACE_TRIGGER_US=30000", "KTRACE_TRIGGER_PCT",
		              "KTRACE_TRIGGER_DELAY_MS=100", "KTRACE_BUFFER_MB=4",
		              /* every step's request and marks in the window: this
		               * test is about cuts, not what is kept */
		              "KTRACE_KEEP=all", NULL };
	char *argv[] = { (char *)PROG, NULL };
	struct kt_proc p;
	char **files;
	int n;

	(void)state;
	fx.dir = kt_mkdtemp("range");
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", fx.dir);
	if (kt_spawn(&p, argv, env, NULL) != 0)
		return -1;
	for (int i = 0; i < NSTEPS; i++) {
		int k;

		if (kt_expect_line(&p, "step ", line, sizeof(line), 30000) != 0 ||
		    sscanf(line, "step %d %lld %lld", &k, &fx.t0[i], &fx.t1[i]) != 3 || k != i)
			return -1;
	}
	if (kt_expect_line(&p, "snapshot 0 ", line, sizeof(line), 30000) != 0)
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
	if (!fx.trig[0]) {
		fprintf(stderr, "no trigger snapshot in %s\n", fx.dir);
		return -1;
	}
	struct kd_dec *d = kd_open(fx.trig);
	if (!d || !d->snap.have_trigger)
		return -1;
	kd_dec_free(d);
	d = kd_open(fx.final);
	if (!d)
		return -1;
	fx.win0 = kd_time_wall_ns(d, d->window_start);
	kd_dec_free(d);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	kt_rmtree(fx.dir);
	free(fx.dir);
	return 0;
}

/* Run ktrace-decode with args (NULL-terminated, FILE appended by caller);
 * stdout/stderr in p; returns the exit status. */
static int decode(struct kt_proc *p, const char *const *args)
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

/* Midpoint of the gap before step i (wall ns). */
static long long gap_before(int i)
{
	return fx.t1[i - 1] + (fx.t0[i] - fx.t1[i - 1]) / 2;
}

static void fmt_clock(long long ns, int dated, char *buf, size_t len)
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;

	gmtime_r(&s, &tm);
	if (dated)
		snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%09lld", tm.tm_year + 1900,
		         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		         ns % 1000000000);
	else
		snprintf(buf, len, "%02d:%02d:%02d.%09lld", tm.tm_hour, tm.tm_min, tm.tm_sec,
		         ns % 1000000000);
}

/* Lines of the text timeline (they begin with the wall clock) holding s. */
static int timeline_count(const char *out, const char *s)
{
	int n = 0;

	for (const char *l = out; *l;) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l);

		if (*l >= '0' && *l <= '9' && len > 9 && l[2] == ':' && memmem(l, len, s, strlen(s)))
			n++;
		l += len + (e != NULL);
	}
	return n;
}

/* The text timeline holds exactly the steps [lo, hi): their tick marks,
 * their requests and 3 work() + 1 busy() calls each, nothing else. */
static void expect_steps(const char *out, int lo, int hi)
{
	int seen[NSTEPS] = { 0 }, n = 0;

	for (const char *p = out; (p = strstr(p, "* mark tick = ")); p++) {
		int v = atoi(p + strlen("* mark tick = "));

		if (v < 0 || v >= NSTEPS)
			fail_msg("bad mark %d", v);
		seen[v]++;
		n++;
	}
	for (int i = 0; i < NSTEPS; i++)
		if (seen[i] != (i >= lo && i < hi))
			fail_msg("step %d: %d tick marks, expected steps %d..%d only:\n%.4000s", i,
			         seen[i], lo, hi - 1, out);
	assert_int_equal(n, hi - lo);
	assert_int_equal(timeline_count(out, ">> request step #"), hi - lo);
	assert_int_equal(timeline_count(out, " work  "), 3 * (hi - lo));
	assert_int_equal(timeline_count(out, " busy  "), hi - lo);
}

static void test_e2e_range_from_to_wall_clock(void **state)
{
	char from[64], to[64];
	const char *args[] = { "--format", "text", "--from", from, "--to", to, fx.final, NULL };
	struct kt_proc p;

	(void)state;
	fmt_clock(gap_before(20), 0, from, sizeof(from));
	fmt_clock(gap_before(40), 0, to, sizeof(to));
	if (decode(&p, args) != 0)
		fail_msg("status %#x: %s", p.status, p.err);
	expect_steps(p.out, 20, 40);
	assert_non_null(strstr(p.out, "range:     cut from the snapshot's window"));
	kt_proc_free(&p);
	/* The dated form, and only one end given. */
	fmt_clock(gap_before(50), 1, from, sizeof(from));
	const char *args2[] = { "--format", "text", "--from", from, fx.final, NULL };
	assert_int_equal(decode(&p, args2), 0);
	expect_steps(p.out, 50, NSTEPS);
	kt_proc_free(&p);
	const char *args3[] = { "--format", "text", "--to", to, fx.final, NULL };
	assert_int_equal(decode(&p, args3), 0);
	expect_steps(p.out, 0, 40);
	kt_proc_free(&p);
}

static void test_e2e_range_offsets(void **state)
{
	char from[64], to[64];
	const char *args[] = { "--format", "text", "--from", from, "--to", to, fx.final, NULL };
	struct kt_proc p;

	(void)state;
	snprintf(from, sizeof(from), "+%lldus", (gap_before(10) - fx.win0) / 1000);
	snprintf(to, sizeof(to), "+%lld.%06lldms", (gap_before(13) - fx.win0) / 1000000,
	         (gap_before(13) - fx.win0) % 1000000);
	assert_int_equal(decode(&p, args), 0);
	expect_steps(p.out, 10, 13);
	kt_proc_free(&p);
}

static void test_e2e_range_around_trigger(void **state)
{
	const char *args[] = { "--format", "text", "--around-trigger", "1ms", fx.trig, NULL };
	const char *noarg[] = { "--format", "text", "--around-trigger", "1ms", fx.final, NULL };
	struct kt_proc p;

	(void)state;
	assert_int_equal(decode(&p, args), 0);
	expect_steps(p.out, SLOW_STEP, SLOW_STEP + 1);
	assert_non_null(strstr(p.out, "<== TRIGGER"));
	kt_proc_free(&p);
	/* Without a trigger: a clear error, exit 2. */
	assert_int_equal(decode(&p, noarg), 2);
	if (!strstr(p.err, "--around-trigger: the file has no trigger"))
		fail_msg("stderr: %s", p.err);
	kt_proc_free(&p);
}

/* Sum of the self ns of folded stacks. */
static unsigned long long folded_total(const char *out)
{
	unsigned long long sum = 0;

	for (const char *l = out; *l;) {
		const char *e = strchr(l, '\n'), *sp;

		if (!e)
			break;
		for (sp = e; sp > l && sp[-1] != ' '; sp--)
			;
		sum += strtoull(sp, NULL, 10);
		l = e + 1;
	}
	return sum;
}

static void test_e2e_range_min_dur(void **state)
{
	const char *args[] = { "--format", "text", "--min-dur", "3ms", fx.final, NULL };
	const char *f0[] = { "-q", "--format", "folded", fx.final, NULL };
	const char *f1[] = { "-q", "--format", "folded", "--min-dur", "3ms", fx.final, NULL };
	struct kt_proc p;
	unsigned long long all, cut;
	int busy = 0, work = 0, reqs;

	(void)state;
	/* What should stay: the calls of 3 ms or more (the slow step's 60 ms
	 * busy(); under load a 200 us one may stretch too, so count them). */
	struct kd_dec *d = kd_open(fx.final);
	assert_non_null(d);
	for (uint32_t i = 0; i < d->ncalls; i++) {
		busy += kd_is(d, &d->calls[i], "busy") && kd_ns(d, &d->calls[i]) >= 3000000;
		work += kd_is(d, &d->calls[i], "work") && kd_ns(d, &d->calls[i]) >= 3000000;
	}
	reqs = (int)d->nreqs;
	kd_dec_free(d);
	assert_true(busy >= 1);
	assert_int_equal(decode(&p, args), 0);
	assert_int_equal(timeline_count(p.out, " work  "), work);
	assert_int_equal(timeline_count(p.out, " busy  "), busy);
	/* marks and requests are not calls: they stay */
	assert_int_equal(timeline_count(p.out, ">> request step #"), reqs);
	if (!strstr(p.out, "min-dur:   ") || !strstr(p.out, "calls shorter than 3.000 ms left out"))
		fail_msg("no min-dur line:\n%.3000s", p.out);
	kt_proc_free(&p);
	/* Their time stays in their callers': the self times add up the same. */
	assert_int_equal(decode(&p, f0), 0);
	all = folded_total(p.out);
	assert_non_null(strstr(p.out, ";work "));
	kt_proc_free(&p);
	assert_int_equal(decode(&p, f1), 0);
	cut = folded_total(p.out);
	/* work() stays only where a call of it took 3 ms or more, which a
	 * loaded machine can make happen: the bound is what the snapshot
	 * itself measured (work, above), never an assumption about load. */
	if (work == 0)
		assert_null(strstr(p.out, ";work "));
	kt_proc_free(&p);
	assert_true(all > 0);
	/* Each line is its node's ticks converted to ns (rounded down): the
	 * sums differ by less than 1 ns per line. */
	if (all > cut + 64 || cut > all + 64)
		fail_msg("folded self times add up to %llu ns, %llu with --min-dur", all, cut);
}

/* Counts in the other formats: stats and chrome. */
static void test_e2e_range_stats_chrome(void **state)
{
	char from[64], to[64];
	const char *st[] = { "--format", "stats", "--from", from, "--to", to, fx.final, NULL };
	const char *ch[] = { "-q", "--format", "chrome", "--from", from, "--to", to, fx.final, NULL };
	struct kt_proc p;
	const char *l;

	(void)state;
	fmt_clock(gap_before(5), 0, from, sizeof(from));
	fmt_clock(gap_before(25), 0, to, sizeof(to));
	assert_int_equal(decode(&p, st), 0);
	/* "calls ... function" rows: work 60 calls, busy 20, step 20 */
	l = strstr(p.out, "  work\n");
	assert_non_null(l);
	while (l > p.out && l[-1] != '\n')
		l--;
	assert_int_equal(atoi(l), 60);
	l = strstr(p.out, "  busy\n");
	assert_non_null(l);
	while (l > p.out && l[-1] != '\n')
		l--;
	assert_int_equal(atoi(l), 20);
	kt_proc_free(&p);
	assert_int_equal(decode(&p, ch), 0);
	assert_int_equal(kt_count_str(p.out, "\"name\":\"work\""), 60);
	assert_int_equal(kt_count_str(p.out, "\"name\":\"tick\""), 20);
	kt_proc_free(&p);
}

/* Sum of the checker's "slices <pid> <tid> <thread> <func> <count>" for func. */
static long pf_slices(const char *res, const char *func)
{
	long sum = 0, c;
	char fn[256];

	for (const char *l = res; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (sscanf(l, "slices %*d %*d %*s %255s %ld", fn, &c) == 2 && !strcmp(fn, func))
			sum += c;
	return sum;
}

/* perfetto, through protoc and the independent checker (tests/perfetto). */
static void test_e2e_range_perfetto(void **state)
{
	char from[64], to[64], out[800], why[256];
	const char *args[] = { "-q", "--format", "perfetto", "-o", out, "--from", from, "--to", to,
		               fx.final, NULL };
	struct kt_proc p;
	char *res;

	(void)state;
	snprintf(out, sizeof(out), "%s/r.pftrace", fx.dir);
	fmt_clock(gap_before(7), 0, from, sizeof(from));
	fmt_clock(gap_before(16), 0, to, sizeof(to));
	assert_int_equal(decode(&p, args), 0);
	kt_proc_free(&p);
	res = pf_check(out, why, sizeof(why));
	if (!res)
		fail_msg("%s", why);
	assert_int_equal(pf_slices(res, "work"), 3 * 9);
	assert_int_equal(pf_slices(res, "busy"), 9);
	assert_int_equal(kt_count_str(res, " tick "), 9);
	free(res);
}

static void test_e2e_range_bad_values(void **state)
{
	static const char *const bad[][2] = {
		{ "--from", "25:00:00" }, { "--to", "12:00" }, { "--from", "+5" },
		{ "--min-dur", "10" }, { "--around-trigger", "-1ms" }, { "--from", "tomorrow" },
	};
	struct kt_proc p;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[] = { bad[i][0], bad[i][1], fx.final, NULL };

		assert_int_equal(decode(&p, args), 2);
		if (!strstr(p.err, bad[i][0]) || !strstr(p.err, "such as"))
			fail_msg("%s %s: stderr: %s", bad[i][0], bad[i][1], p.err);
		kt_proc_free(&p);
	}
	/* Outside the window; the wrong way round. */
	char a[64], b[64];
	fmt_clock(fx.t1[NSTEPS - 1] + 3600000000000ll, 0, a, sizeof(a));
	const char *late[] = { "--from", a, fx.final, NULL };
	assert_int_equal(decode(&p, late), 2);
	assert_non_null(strstr(p.err, "outside the snapshot's window"));
	kt_proc_free(&p);
	fmt_clock(gap_before(30), 0, a, sizeof(a));
	fmt_clock(gap_before(20), 0, b, sizeof(b));
	const char *rev[] = { "--from", a, "--to", b, fx.final, NULL };
	assert_int_equal(decode(&p, rev), 2);
	assert_non_null(strstr(p.err, "ends before it begins"));
	kt_proc_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_range_from_to_wall_clock),
		cmocka_unit_test(test_e2e_range_offsets),
		cmocka_unit_test(test_e2e_range_around_trigger),
		cmocka_unit_test(test_e2e_range_min_dur),
		cmocka_unit_test(test_e2e_range_stats_chrome),
		cmocka_unit_test(test_e2e_range_perfetto),
		cmocka_unit_test(test_e2e_range_bad_values),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
