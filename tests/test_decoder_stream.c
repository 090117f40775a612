/*
 * test_decoder_stream.c - the streaming decoder (issue 8): memory bounded
 * independently of the number of calls, text in recorded order, chrome
 * slices that nest exactly on zero-length calls, and one clock for text and
 * chrome.
 *
 * Every test runs the ktrace-decode program on a synthetic snapshot file
 * (tests/snapbuild.h), so it can be pointed at another build of the decoder
 * to see it fail there:
 *     KTRACE_TEST_DECODE=/path/to/old/ktrace-decode ./test_decoder_stream
 */
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "decoder.h"
#include "snapbuild.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1 /* they reserve terabytes of address space */
#else
#define UNDER_SANITIZER 0
#endif

static char tmpdir[64];

static const char *decoder(void)
{
	const char *p = getenv("KTRACE_TEST_DECODE");

	return p && *p ? p : KTRACE_DECODE_PATH;
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ktrace-stream-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void write_snap(struct snapbuild *sb, const char *name, char *path, size_t cap)
{
	uint8_t *buf;
	size_t len;

	assert_int_equal(snapbuild_finish(sb, &buf, &len), 0);
	snapbuild_free(sb);
	snprintf(path, cap, "%s/%s", tmpdir, name);
	assert_int_equal(snapbuild_write_file(path, buf, len), 0);
	free(buf);
}

/* Run the decoder (args after the program name, NULL-terminated) with
 * RLIMIT_AS = mb MiB (0: none); its stdout as a string (free it), the exit
 * status in *status. */
static char *run(unsigned mb, int *status, ...)
{
	char outp[128], *argv[16];
	const char *a;
	va_list ap;
	int n = 0, st = 0;
	pid_t pid;
	size_t len;
	char *out;

	argv[n++] = (char *)decoder();
	va_start(ap, status);
	while ((a = va_arg(ap, const char *)) != NULL && n < 15)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	snprintf(outp, sizeof(outp), "%s/stdout", tmpdir);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fo < 0 || dup2(fo, 1) < 0)
			_exit(120);
		if (mb) {
			struct rlimit rl = { (rlim_t)mb << 20, (rlim_t)mb << 20 };

			setrlimit(RLIMIT_AS, &rl);
		}
		execv(argv[0], argv);
		_exit(121);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	*status = WEXITSTATUS(st);
	out = (char *)snapbuild_read_file(outp, &len);
	assert_non_null(out);
	out = realloc(out, len + 1);
	assert_non_null(out);
	out[len] = '\0';
	return out;
}

/*
 * Memory bounded by threads x depth + functions + buffers, not by calls
 * and not by the file: 4 M calls (a 32 MiB file, a window of about 2 s)
 * decode to summary, folded, chrome, perfetto and text, and folded, chrome
 * and perfetto cut to a range (--from/--to, --min-dur; the summary's range
 * lines are checked by test_decoder_range), under an address-space limit
 * 4 MiB smaller than the file (program, libraries and stack included).
 * Holding the calls (56 bytes each, ~220 MiB), or the file, as the decoder
 * did before, and still does for the other formats, cannot fit.  Text
 * spools its calls to a temporary file (128 MiB here) and writes to
 * /dev/null (its 4 M lines would be 300 MB); test_stream_text_equals_collected
 * checks what it prints.
 */
static void test_stream_bounded_memory(void **state)
{
	static const char *const cases[][7] = {
		{ "summary" }, { "folded" }, { "chrome" }, { "perfetto" }, { "text" },
		{ "folded", "--from", "+0.5s", "--to", "+1.5s" },
		{ "chrome", "--from", "+0.5s", "--to", "+1.5s" },
		{ "perfetto", "--from", "+0.5s", "--to", "+1.5s", "--min-dur", "1us" },
	};
	struct snapbuild *sb;
	char path[128];
	struct stat st;
	unsigned mb;

	(void)state;
	if (UNDER_SANITIZER)
		skip(); /* RLIMIT_AS cannot work under ASan/TSan's shadow memory */
	sb = snapbuild_new();
	snapbuild_scenario_big(sb, 2, 8000000); /* 4 M calls */
	write_snap(sb, "big.ktrace", path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	mb = (unsigned)(st.st_size >> 20) - 4;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *const *c = cases[i], *v[14] = { "--format", c[0], "-q" };
		int status, n = 3;
		int to_null = (c[1] && strcmp(c[0], "summary")) || !strcmp(c[0], "text");
		char *out;

		/* The range cases and text write to /dev/null: what is measured is
		 * memory (the outputs are checked by the cases above and other
		 * tests). */
		if (to_null) {
			v[n++] = "-o";
			v[n++] = "/dev/null";
		}
		for (int k = 1; k < 7 && c[k]; k++)
			v[n++] = c[k];
		v[n++] = path;
		out = run(mb, &status, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9],
		          v[10], v[11], v[12], (char *)NULL);
		if (status != 0)
			fail_msg("--format %s %s %s %s %s of 4 M calls under %u MiB: exit %d (memory "
			         "grows with the calls)", c[0], c[1] ? c[1] : "", c[2] ? c[2] : "",
			         c[3] ? c[3] : "", c[4] ? c[4] : "", mb, status);
		assert_true(to_null || strlen(out) > 100);
		if (!strcmp(c[0], "summary"))
			assert_non_null(strstr(out, "4000000 calls"));
		free(out);
	}
}

/*
 * The same under a range that begins late in a window whose outermost
 * frame spans all of it (a main loop): the frame stays undecided until the
 * range begins, and the 0.9 M calls before it must not wait behind it (the
 * range filter drops them at their end, it holds none).
 */
static void test_stream_bounded_memory_late_range(void **state)
{
	static const char *const fmts[] = { "folded", "perfetto" };
	struct snapbuild *sb;
	struct ktrace_info_rec *in;
	char path[128];
	struct stat st;
	unsigned mb;
	uint64_t t = 1000;

	(void)state;
	if (UNDER_SANITIZER)
		skip();
	sb = snapbuild_new();
	in = snapbuild_info(sb);
	in->tsc_hz = 2400000000ull;
	in->tsc_shift = 8; /* 106.7 ns a tick: 1.2 M calls 20 ticks apart, ~2.6 s */
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_func(sb, 0, 0x401000);
	snapbuild_func(sb, 1, 0x402000);
	snapbuild_enter(sb, 0, 1, t, 0); /* open to the end */
	for (uint32_t i = 0; i < 1200000; i++) {
		snapbuild_enter(sb, 0, 1, t += 10, 1);
		snapbuild_exit(sb, 0, 1, t += 10, 1);
	}
	write_snap(sb, "loop.ktrace", path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	mb = (unsigned)(st.st_size >> 20) + 48;
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		int status;
		int folded = !strcmp(fmts[i], "folded"); /* two stacks: checked */
		char *out = run(mb, &status, "--format", fmts[i], "-q", "--from", "+2s", "--min-dur",
		                "1us", path, folded ? (char *)NULL : "-o", "/dev/null", (char *)NULL);

		if (status != 0)
			fail_msg("--format %s --from +2s --min-dur 1us under %u MiB: exit %d (calls "
			         "before the range are held)", fmts[i], mb, status);
		if (folded)
			assert_non_null(strstr(out, "main/100;0x401000;0x402000 "));
		free(out);
	}
}

/* Calls A { B {} } C {} all in one tick on one thread, then later ones. */
static char *one_tick_snap(const char *name, char *path, size_t cap)
{
	struct snapbuild *sb = snapbuild_new();

	snapbuild_info(sb)->tsc_shift = 8; /* 256 ns per tick */
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	for (uint32_t i = 0; i < 6; i++)
		snapbuild_func(sb, i, 0x401000 + 0x100 * (uint64_t)i);
	snapbuild_enter(sb, 0, 1, 1000, 0); /* A */
	snapbuild_enter(sb, 0, 1, 1000, 1); /*   B */
	snapbuild_exit(sb, 0, 1, 1000, 1);
	snapbuild_exit(sb, 0, 1, 1000, 0);
	snapbuild_enter(sb, 0, 1, 1000, 2); /* C */
	snapbuild_enter(sb, 0, 1, 1000, 3); /*   D */
	snapbuild_enter(sb, 0, 1, 1000, 4); /*     E */
	snapbuild_exit(sb, 0, 1, 1000, 4);
	snapbuild_exit(sb, 0, 1, 1000, 3);
	snapbuild_enter(sb, 0, 1, 1000, 5); /*   F */
	snapbuild_exit(sb, 0, 1, 1000, 5);
	snapbuild_exit(sb, 0, 1, 1001, 2);
	snapbuild_enter(sb, 0, 1, 1010, 0); /* A again, later */
	snapbuild_exit(sb, 0, 1, 1020, 0);
	write_snap(sb, name, path, cap);
	return path;
}

/* Text: a thread's calls that share a tick print in recorded order. */
static void test_stream_text_recorded_order(void **state)
{
	static const char *const order[] = { "0x401000", "0x401100", "0x401200", "0x401300",
		                             "0x401400", "0x401500" };
	char path[128], *out, *p;
	int status;

	(void)state;
	one_tick_snap("tick.ktrace", path, sizeof(path));
	out = run(0, &status, "--format", "text", "--no-demangle", path, (char *)NULL);
	assert_int_equal(status, 0);
	p = strstr(out, "timeline (UTC");
	assert_non_null(p);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		char *q = strstr(p, order[i]);

		if (!q)
			fail_msg("text: %s missing or out of recorded order:\n%s", order[i], out);
		p = q + 1;
	}
	free(out);
}

struct slice {
	char name[32];
	int64_t ts, dur;          /* ns */
};

/* "123.456" microseconds (3 decimals, as ktrace-decode writes) -> ns */
static int64_t us_ns(const char *s)
{
	int neg = *s == '-';
	int64_t v = 0;

	s += neg;
	for (; *s >= '0' && *s <= '9'; s++)
		v = v * 10 + (*s - '0');
	for (int k = 0; k < 3; k++) {
		int dig = 0;

		if (k == 0 && *s == '.')
			s++;
		if (*s >= '0' && *s <= '9')
			dig = *s++ - '0';
		v = v * 10 + dig;
	}
	return neg ? -v : v;
}

/* The "function" X events of a chrome trace. */
static uint32_t chrome_slices(const char *json, struct slice *v, uint32_t cap)
{
	uint32_t n = 0;

	for (const char *p = json; (p = strstr(p, "{\"ph\":\"X\",\"cat\":\"function\"")) && n < cap;
	     p++) {
		const char *nm = strstr(p, "\"name\":\""), *ts = strstr(p, "\"ts\":"),
		           *dur = strstr(p, "\"dur\":");
		size_t k = 0;

		assert_non_null(nm);
		assert_non_null(ts);
		assert_non_null(dur);
		for (nm += 8; *nm != '"' && k < sizeof(v[n].name) - 1; nm++)
			v[n].name[k++] = *nm;
		v[n].name[k] = '\0';
		v[n].ts = us_ns(ts + 5);
		v[n].dur = us_ns(dur + 6);
		n++;
	}
	return n;
}

static const struct slice *find_slice(const struct slice *v, uint32_t n, const char *name,
                                      int nth)
{
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name) && nth-- == 0)
			return &v[i];
	fail_msg("chrome: no slice %s", name);
	return NULL;
}

static void assert_inside(const struct slice *c, const struct slice *p)
{
	if (!(c->ts > p->ts && c->ts + c->dur < p->ts + p->dur))
		fail_msg("chrome: %s [%" PRId64 " +%" PRId64 "] not strictly inside %s [%" PRId64
		         " +%" PRId64 "]", c->name, c->ts, c->dur, p->name, p->ts, p->dur);
}

static void assert_before(const struct slice *a, const struct slice *b)
{
	if (!(a->ts + a->dur < b->ts))
		fail_msg("chrome: sibling %s [%" PRId64 " +%" PRId64 "] does not end before %s "
		         "begins [%" PRId64 "]", a->name, a->ts, a->dur, b->name, b->ts);
}

/* Chrome: zero-length calls of one tick nest exactly, siblings strictly
 * ordered, the output says times within a tick are interpolated. */
static void test_stream_chrome_nests_in_a_tick(void **state)
{
	struct slice v[16];
	const struct slice *a, *b, *c, *d, *e, *f, *a2;
	char path[128], *out;
	uint32_t n;
	int status;

	(void)state;
	one_tick_snap("nest.ktrace", path, sizeof(path));
	out = run(0, &status, "--format", "chrome", "-q", "--no-demangle", path, (char *)NULL);
	assert_int_equal(status, 0);
	n = chrome_slices(out, v, 16);
	assert_int_equal(n, 7);
	a = find_slice(v, n, "0x401000", 0);
	a2 = find_slice(v, n, "0x401000", 1);
	if (a->ts > a2->ts) {
		const struct slice *t = a;
		a = a2;
		a2 = t;
	}
	b = find_slice(v, n, "0x401100", 0);
	c = find_slice(v, n, "0x401200", 0);
	d = find_slice(v, n, "0x401300", 0);
	e = find_slice(v, n, "0x401400", 0);
	f = find_slice(v, n, "0x401500", 0);
	assert_inside(b, a);
	assert_inside(d, c);
	assert_inside(e, d);
	assert_inside(f, c);
	assert_before(a, c);
	assert_before(d, f);
	assert_before(c, a2);
	/* all within tick 1000 (256 ns) but C, which ends in tick 1001 */
	assert_true(a->dur < 256);
	assert_non_null(strstr(out, "\"time_within_tick\":\"interpolated"));
	free(out);
}

/* HH:MM:SS.nnnnnnnnn -> ns of the day */
static int64_t day_ns(const char *s)
{
	int h, m, sec;
	long long ns;

	if (sscanf(s, "%d:%d:%d.%lld", &h, &m, &sec, &ns) != 4)
		fail_msg("not a time: %.20s", s);
	return (((int64_t)h * 60 + m) * 60 + sec) * 1000000000ll + ns;
}

/*
 * One clock: with ANCHORS whose rate differs from tsc_hz (as a real
 * calibration does), text and chrome give each call the same time: text the
 * tick's, chrome the tick's plus its place within the tick (0 for a call
 * first in its tick).
 */
static void test_stream_text_chrome_one_clock(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct ktrace_info_rec *in = snapbuild_info(sb);
	struct slice v[64];
	char path[128], *text, *chrome, *p;
	int64_t t0;
	uint32_t n, found = 0;
	int status;

	(void)state;
	in->tsc_shift = 8;
	in->tsc_hz = 2000000000ull;
	/* the counter runs 1 % faster than tsc_hz says, and not evenly */
	snapbuild_anchor(sb, 0, in->snapshot_realtime_ns - 100000000);
	snapbuild_anchor(sb, 101000000ull, in->snapshot_realtime_ns - 50000000);
	snapbuild_anchor(sb, 202500000ull, in->snapshot_realtime_ns);
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	for (uint32_t i = 0; i < 40; i++)
		snapbuild_func(sb, i, 0x401000 + 0x100 * (uint64_t)i);
	for (uint32_t i = 0; i < 40; i++) {
		uint64_t t = 1000 + (uint64_t)i * 7919;

		snapbuild_enter(sb, 0, 1, t, i);
		snapbuild_exit(sb, 0, 1, t + 3 + i, i);
	}
	write_snap(sb, "clock.ktrace", path, sizeof(path));
	text = run(0, &status, "--format", "text", "--no-demangle", path, (char *)NULL);
	assert_int_equal(status, 0);
	chrome = run(0, &status, "--format", "chrome", "-q", "--no-demangle", path, (char *)NULL);
	assert_int_equal(status, 0);
	p = strstr(chrome, "\"ts0_realtime_ns\":");
	assert_non_null(p);
	t0 = strtoll(p + 18, NULL, 10) % 86400000000000ll;
	n = chrome_slices(chrome, v, 64);
	assert_int_equal(n, 40);
	for (p = strstr(text, "timeline (UTC"); p && (p = strchr(p, '\n')); ) {
		const char *name;
		int64_t tt;

		p++;
		if (strlen(p) < 20 || p[2] != ':')
			continue;
		tt = day_ns(p);
		name = strstr(p, "0x4");
		assert_non_null(name);
		for (uint32_t i = 0; i < n; i++)
			if (!strncmp(name, v[i].name, strlen(v[i].name)) && name[strlen(v[i].name)] == ' ') {
				if (t0 + v[i].ts != tt)
					fail_msg("%s: text says %" PRId64 " ns, chrome %" PRId64 " ns "
					         "(of the day): two clocks", v[i].name, tt, t0 + v[i].ts);
				found++;
			}
	}
	assert_int_equal(found, 40);
	free(text);
	free(chrome);
}

/*
 * A snapshot the streamed text must get exactly right: two threads on two
 * cores whose calls share ticks (with each other and within a thread), an
 * outer frame open across the whole window (its record is written long
 * before its end: > 1 MiB of spool, so it is patched in the file), marks,
 * requests, and a triggered slow request (explain).  48 k calls.
 */
static char *mixed_snap(const char *name, char *path, size_t cap)
{
	struct snapbuild *sb = snapbuild_new();
	struct ktrace_info_rec *in = snapbuild_info(sb);
	struct ktrace_trigger_rec tr = { 0 };

	in->tsc_shift = 8;
	in->ncpus = 2;
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "op");
	snapbuild_name(sb, 2, KTRACE_NAME_MARK, "depth");
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_thread(sb, 2, 200, "worker", 0);
	for (uint32_t i = 0; i < 16; i++)
		snapbuild_func(sb, i, 0x401000 + 0x100 * (uint64_t)i);
	for (uint32_t c = 0; c < 2; c++) {
		uint32_t slot = 1 + c;
		uint64_t t = 1000;

		snapbuild_enter(sb, c, slot, t, 0); /* open across the window */
		for (uint32_t i = 0; i < 12000; i++) {
			uint32_t f = 1 + (i * 7 + c) % 13;

			if (i % 500 == 0)
				snapbuild_req(sb, c, slot, t, 1, (uint64_t)c * 1000 + i / 500, 0);
			/* ties: several calls a tick, the other thread in the same ticks */
			t += (i % 3 == 0);
			snapbuild_enter(sb, c, slot, t, f);
			snapbuild_enter(sb, c, slot, t + (i % 5 == 0), 14);
			snapbuild_exit(sb, c, slot, t + (i % 5 == 0), 14);
			if (c == 0 && i == 6789)
				t += 5000; /* the slow request */
			snapbuild_exit(sb, c, slot, t += (i % 4 == 0), f);
			if (i % 97 == 0)
				snapbuild_mark(sb, c, slot, t, 2, i);
			if (i % 500 == 499)
				snapbuild_req(sb, c, slot, t, 1, (uint64_t)c * 1000 + i / 500, 1);
		}
		snapbuild_exit(sb, c, slot, t + 1, 0);
	}
	tr.request_id = 6789 / 500;
	tr.kind_id = 1;
	tr.thread_slot = 1;
	tr.tid = 100;
	tr.why = KTRACE_TRIGGER_ABSOLUTE;
	tr.duration_ns = 2000000;
	tr.threshold_ns = 1000000;
	snprintf(tr.kind, sizeof(tr.kind), "op");
	snapbuild_trigger(sb, &tr);
	write_snap(sb, name, path, cap);
	return path;
}

/* The first line where a and b differ, for a failure message. */
static void assert_same_text(const char *what, const char *a, const char *b)
{
	size_t i = 0, line = 1, ls = 0;

	for (; a[i] && a[i] == b[i]; i++)
		if (a[i] == '\n') {
			line++;
			ls = i + 1;
		}
	if (a[i] || b[i])
		fail_msg("%s: the streamed text differs from the collected one at line %zu:\n"
		         "collected: %.200s\nstreamed:  %.200s", what, line, a + ls, b + ls);
}

static char *render(int streamed, char *const *paths, uint32_t n, const struct kd_out_opts *o)
{
	struct kd_dec_opts dopts = { .stream = streamed };
	struct kd_dec *d[4] = { 0 };
	struct kd_dec_error err;
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	assert_non_null(m);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(kd_dec_open_file(paths[i], &dopts, &d[i], &err), 0);
	if (n == 1 && streamed) {
		assert_int_equal(kd_out_explain_stream(m, d[0], o), 0);
		assert_int_equal(kd_out_text(m, d[0], o), 0);
	} else if (n == 1) {
		kd_out_explain(m, d[0], o);
		kd_out_text(m, d[0], o);
	} else {
		kd_merge_files(d, n);
		assert_int_equal(kd_out_text_merged(m, d, n, o), 0);
	}
	assert_int_equal(fclose(m), 0);
	for (uint32_t i = 0; i < n; i++)
		kd_dec_free(d[i]);
	return buf;
}

/*
 * The streamed text (spool + merge, explain from the calls of two
 * requests) prints what the collected one prints, line for line: whole,
 * with --limit (which spools less), with --thread, and several files on
 * one timeline.
 */
static void test_stream_text_equals_collected(void **state)
{
	static const struct kd_out_opts opts[] = {
		{ 0 },
		{ .limit = 1 },
		{ .limit = 3000 },
		{ .have_tid = 1, .tid = 200 },
		{ .have_tid = 1, .tid = 100, .limit = 10 },
	};
	struct snapbuild *sb;
	char p1[128], p2[128], p3[128], *files[3] = { p1, p2, p3 };

	(void)state;
	mixed_snap("mixed.ktrace", p1, sizeof(p1));
	one_tick_snap("tick.ktrace", p2, sizeof(p2));
	sb = snapbuild_new();
	snapbuild_scenario_golden(sb);
	write_snap(sb, "golden.ktrace", p3, sizeof(p3));
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		for (uint32_t k = 0; k < 3; k++) {
			char *a = render(0, &files[k], 1, &opts[i]), *b = render(1, &files[k], 1, &opts[i]);

			assert_non_null(strstr(a, "timeline (UTC"));
			assert_same_text(files[k], a, b);
			free(a);
			free(b);
		}
		{
			char *a = render(0, files, 3, &opts[i]), *b = render(1, files, 3, &opts[i]);

			assert_same_text("three files merged", a, b);
			free(a);
			free(b);
		}
	}
	/* the slow request is explained, the trigger shown in the timeline */
	{
		char *b = render(1, files, 1, &opts[0]);

		assert_non_null(strstr(b, "trigger: \"op\" request #13"));
		assert_non_null(strstr(b, "<== TRIGGER"));
		free(b);
	}
}

/*
 * The spool's temporary file cannot be made: exit 1 (and a message naming
 * the directory, TMPDIR and the options that cut the window), never a
 * partial timeline taken for a whole one; --limit needs no file.
 */
static void test_stream_text_spool_dir_missing(void **state)
{
	char path[128], *out;
	int status;

	(void)state;
	mixed_snap("spool.ktrace", path, sizeof(path)); /* 1.5 MiB of spool */
	assert_int_equal(setenv("TMPDIR", "/nonexistent/ktrace-test", 1), 0);
	out = run(0, &status, "--format", "text", "-q", path, (char *)NULL);
	free(out);
	if (status != 1)
		fail_msg("text with TMPDIR missing: exit %d, not 1", status);
	out = run(0, &status, "--format", "text", "-q", "--limit", "5", path, (char *)NULL);
	assert_int_equal(status, 0);
	assert_non_null(strstr(out, "more lines (--limit 5)"));
	free(out);
	unsetenv("TMPDIR");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_bounded_memory),
		cmocka_unit_test(test_stream_bounded_memory_late_range),
		cmocka_unit_test(test_stream_text_recorded_order),
		cmocka_unit_test(test_stream_chrome_nests_in_a_tick),
		cmocka_unit_test(test_stream_text_chrome_one_clock),
		cmocka_unit_test(test_stream_text_equals_collected),
		cmocka_unit_test(test_stream_text_spool_dir_missing),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
