/*
 * test_decoder_outputs.c - stage 6: chrome JSON is well-formed, stats are
 * exact, explain names the planted cause first, folded stacks add up, and
 * the ktrace-decode program's exit codes and -o behave as documented.
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

#include "decoder.h"
#include "snapbuild.h"

/* ---- a strict little JSON validator (RFC 8259 grammar) ------------------- */

struct jp {
	const char *p, *end;
	int depth;
};

static int j_value(struct jp *j);

static void j_ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
		j->p++;
}

static int j_lit(struct jp *j, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, s, n))
		return -1;
	j->p += n;
	return 0;
}

static int j_string(struct jp *j)
{
	if (j->p >= j->end || *j->p != '"')
		return -1;
	j->p++;
	while (j->p < j->end && *j->p != '"') {
		unsigned char c = (unsigned char)*j->p;

		if (c < 0x20)
			return -1;
		if (c == '\\') {
			j->p++;
			if (j->p >= j->end)
				return -1;
			if (*j->p == 'u') {
				for (int k = 1; k <= 4; k++)
					if (j->p + k >= j->end || !strchr("0123456789abcdefABCDEF", j->p[k]) ||
					    !j->p[k])
						return -1;
				j->p += 4;
			} else if (!strchr("\"\\/bfnrt", *j->p) || !*j->p) {
				return -1;
			}
		}
		j->p++;
	}
	if (j->p >= j->end)
		return -1;
	j->p++;
	return 0;
}

static int j_number(struct jp *j)
{
	const char *s = j->p;

	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p >= j->end || *j->p < '0' || *j->p > '9')
		return -1;
	if (*j->p == '0')
		j->p++;
	else
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return -1;
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	return j->p > s ? 0 : -1;
}

static int j_value(struct jp *j)
{
	j_ws(j);
	if (j->p >= j->end || ++j->depth > 64)
		return -1;
	switch (*j->p) {
	case '{':
		j->p++;
		j_ws(j);
		if (j->p < j->end && *j->p == '}') {
			j->p++;
			break;
		}
		for (;;) {
			j_ws(j);
			if (j_string(j))
				return -1;
			j_ws(j);
			if (j->p >= j->end || *j->p++ != ':')
				return -1;
			if (j_value(j))
				return -1;
			j_ws(j);
			if (j->p < j->end && *j->p == ',') {
				j->p++;
				continue;
			}
			if (j->p < j->end && *j->p == '}') {
				j->p++;
				break;
			}
			return -1;
		}
		break;
	case '[':
		j->p++;
		j_ws(j);
		if (j->p < j->end && *j->p == ']') {
			j->p++;
			break;
		}
		for (;;) {
			if (j_value(j))
				return -1;
			j_ws(j);
			if (j->p < j->end && *j->p == ',') {
				j->p++;
				continue;
			}
			if (j->p < j->end && *j->p == ']') {
				j->p++;
				break;
			}
			return -1;
		}
		break;
	case '"':
		if (j_string(j))
			return -1;
		break;
	case 't':
		if (j_lit(j, "true"))
			return -1;
		break;
	case 'f':
		if (j_lit(j, "false"))
			return -1;
		break;
	case 'n':
		if (j_lit(j, "null"))
			return -1;
		break;
	default:
		if (j_number(j))
			return -1;
	}
	j->depth--;
	return 0;
}

static int json_valid(const char *s, size_t n)
{
	struct jp j = { s, s + n, 0 };

	if (j_value(&j))
		return 0;
	j_ws(&j);
	return j.p == j.end;
}

/* ---- helpers ------------------------------------------------------------------ */

#include "decode_or_fail.h"

static struct kd_dec *golden(void)
{
	struct snapbuild *sb = snapbuild_new();

	snapbuild_scenario_golden(sb);
	return decode(sb);
}

struct mem {
	char *p;
	size_t n;
	FILE *f;
};

static void mem_open(struct mem *m)
{
	m->p = NULL;
	m->n = 0;
	m->f = open_memstream(&m->p, &m->n);
	assert_non_null(m->f);
}

static void mem_close(struct mem *m)
{
	fclose(m->f);
}

/* ---- tests ----------------------------------------------------------------------- */

static void test_outputs_json_validator_works(void **state)
{
	(void)state;
	static const char *const good[] = { "{\"a\":[1,2.5,-3,\"x\\n\\u00e9\"],\"b\":{},\"c\":true}",
		                            "[]", "0", "\"\"" };
	static const char *const bad[] = { "{\"a\":[1,2,]}", "{\"a\":\"\x01\"}", "{\"a\":1}}",
		                           "[01]", "{a:1}", "[\"\\x\"]", "", "[1.]", "{\"a\" 1}" };

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(json_valid(good[i], strlen(good[i])));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (json_valid(bad[i], strlen(bad[i])))
			fail_msg("accepted bad JSON %s", bad[i]);
}

static void test_outputs_chrome_well_formed(void **state)
{
	struct kd_dec *d = golden();
	struct kd_chrome ch;
	struct mem m;

	(void)state;
	mem_open(&m);
	kd_out_chrome_begin(&ch, m.f, kd_time_wall_ns(d, d->window_start));
	kd_out_chrome_file(&ch, d, d->snap.info.pid, NULL);
	kd_out_chrome_end(&ch);
	mem_close(&m);
	if (!json_valid(m.p, m.n))
		fail_msg("chrome output is not valid JSON");
	assert_non_null(strstr(m.p, "\"traceEvents\":["));
	assert_non_null(strstr(m.p, "\"displayTimeUnit\":\"ns\""));
	assert_non_null(strstr(m.p, "\"name\":\"TRIGGER: slow get request (5.361 ms > 1.000 ms)\""));
	assert_non_null(strstr(m.p, "\"s\":\"g\""));
	assert_non_null(strstr(m.p, "\"trigger\":true"));
	assert_non_null(strstr(m.p, "\"cat\":\"request\",\"name\":\"request:get\""));
	assert_non_null(strstr(m.p, "\"name\":\"CPU cores\""));
	assert_non_null(strstr(m.p, "\"name\":\"worker-1 (1002)\""));
	assert_non_null(strstr(m.p, "\"name\":\"kvserver (31337)\""));
	assert_non_null(strstr(m.p, "\"ts0_wall_clock_utc\":\"2025-11-21 04:40:00."));
	assert_non_null(strstr(m.p, "\"ph\":\"i\",\"s\":\"t\",\"cat\":\"mark\",\"name\":\"queue_depth\""));
	/* the first call of the window starts at ts 0.000 */
	assert_non_null(strstr(m.p, "\"ts\":0.000,"));
	free(m.p);
	kd_dec_free(d);
}

static void test_outputs_chrome_escapes(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	struct kd_chrome ch;
	struct mem m;

	(void)state;
	snapbuild_thread(sb, 1, 7, "q\"b\\s\x01\xff", 0);
	snapbuild_name(sb, 3, KTRACE_NAME_SPAN, "sp\"an\n\t\\");
	snapbuild_name(sb, 4, KTRACE_NAME_MARK, "</script>\"");
	strcpy(snapbuild_info(sb)->exe, "/bin/we\"ird\\exe");
	strcpy(snapbuild_info(sb)->reason, "re\"as\x02on");
	snapbuild_span(sb, 0, 1, 100, 3, 0);
	snapbuild_mark(sb, 0, 1, 110, 4, 1);
	snapbuild_span(sb, 0, 1, 120, 3, 1);
	d = decode(sb);
	mem_open(&m);
	kd_out_chrome_begin(&ch, m.f, 0);
	kd_out_chrome_file(&ch, d, 7, NULL);
	kd_out_chrome_end(&ch);
	mem_close(&m);
	if (!json_valid(m.p, m.n))
		fail_msg("chrome output with odd names is not valid JSON:\n%s", m.p);
	assert_non_null(strstr(m.p, "sp\\\"an\\u000a\\u0009\\\\"));
	free(m.p);
	kd_dec_free(d);
}

static void test_outputs_stats_exact(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	struct kd_func_stats *st;
	uint32_t n;
	uint64_t t = 1000;
	static const uint64_t dur[4] = { 400, 100, 300, 200 };

	(void)state;
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	snapbuild_func(sb, 2, 0xC000);
	/* A: 100..400 ns, the first call containing B (50 ns) */
	for (int i = 0; i < 4; i++) {
		snapbuild_enter(sb, 0, 1, t, 0);
		if (i == 0) {
			snapbuild_enter(sb, 0, 1, t + 10, 1);
			snapbuild_exit(sb, 0, 1, t + 60, 1);
		}
		snapbuild_exit(sb, 0, 1, t + dur[i], 0);
		t += dur[i] + 7;
	}
	/* C recursive: C(100 { C(30) }) : total counts the outer only */
	snapbuild_enter(sb, 0, 1, t, 2);
	snapbuild_enter(sb, 0, 1, t + 10, 2);
	snapbuild_exit(sb, 0, 1, t + 40, 2);
	snapbuild_exit(sb, 0, 1, t + 100, 2);
	d = decode(sb);
	st = kd_out_stats_funcs(d, 0, 0, &n);
	assert_non_null(st);
	assert_int_equal(n, 3);
	/* sorted by self: A (950), C (100), B (50) */
	assert_int_equal(d->funcs[st[0].func].addr, 0xA000);
	assert_int_equal(st[0].calls, 4);
	assert_int_equal(st[0].total, 1000);
	assert_int_equal(st[0].self, 950);
	assert_int_equal(st[0].p50, 200);  /* nearest rank: ceil(0.5 * 4) = 2nd */
	assert_int_equal(st[0].p99, 400);
	assert_int_equal(st[0].max, 400);
	assert_true(st[0].mean == 250.0);
	assert_int_equal(d->funcs[st[1].func].addr, 0xC000);
	assert_int_equal(st[1].calls, 2);
	assert_int_equal(st[1].total, 100);
	assert_int_equal(st[1].self, 100);
	assert_int_equal(st[1].p50, 30);
	assert_int_equal(d->funcs[st[2].func].addr, 0xB000);
	assert_int_equal(st[2].self, 50);
	free(st);
	kd_dec_free(d);
}

static void test_outputs_explain_names_cause_first(void **state)
{
	struct kd_dec *d = golden();
	struct mem m;
	uint32_t med, pick;
	char *p;

	(void)state;
	pick = kd_out_explain_pick(d, &med);
	assert_int_not_equal(pick, KD_NONE);
	assert_int_equal(d->reqs[pick].id, SNAPBUILD_GOLDEN_SLOW_REQ);
	assert_true(d->reqs[pick].flags & KD_REQ_TRIGGER);
	assert_int_not_equal(med, KD_NONE);
	mem_open(&m);
	kd_out_explain(m.f, d, NULL);
	mem_close(&m);
	p = strstr(m.p, "where the extra time went");
	assert_non_null(p);
	p = strchr(p, '\n') + 1;
	/* slow_io (id 3, 0x401300) is the planted cause */
	if (strncmp(strchr(p, '0'), "0x401300 ", 9) != 0)
		fail_msg("first cause line is not slow_io:\n%s", m.p);
	assert_non_null(strstr(m.p, "meanwhile on other threads"));
	assert_non_null(strstr(m.p, "worker-2/1003"));
	free(m.p);
	kd_dec_free(d);
}

static void test_outputs_explain_without_trigger(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	struct mem m;
	uint32_t med;

	(void)state;
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "op");
	snapbuild_func(sb, 0, 0xA000);
	snapbuild_func(sb, 1, 0xB000);
	for (uint64_t r = 0; r < 5; r++) {
		uint64_t t = 1000 + r * 20000;

		uint64_t extra = r == 3 ? 5000 : 0;

		snapbuild_req(sb, 0, 1, t, 1, r, 0);
		snapbuild_enter(sb, 0, 1, t + 1, 0);
		if (r == 3) {
			snapbuild_enter(sb, 0, 1, t + 2, 1);
			snapbuild_exit(sb, 0, 1, t + 5000, 1);
		}
		snapbuild_exit(sb, 0, 1, t + 5100 + r + extra, 0);
		snapbuild_req(sb, 0, 1, t + 5200 + r + extra, 1, r, 1);
	}
	d = decode(sb);
	assert_int_equal(d->reqs[kd_out_explain_pick(d, &med)].id, 3);
	assert_int_equal(d->reqs[med].id, 1); /* durations of 0,1,2,4 sorted: lower median */
	mem_open(&m);
	kd_out_explain(m.f, d, NULL);
	mem_close(&m);
	assert_non_null(strstr(m.p, "no trigger; slowest request"));
	assert_non_null(strstr(m.p, "+4.998 us      0xb000"));
	free(m.p);
	kd_dec_free(d);
	/* no requests at all */
	sb = snapbuild_new();
	snapbuild_enter(sb, 0, 1, 10, 0);
	d = decode(sb);
	mem_open(&m);
	kd_out_explain(m.f, d, NULL);
	mem_close(&m);
	assert_non_null(strstr(m.p, "nothing to explain"));
	free(m.p);
	kd_dec_free(d);
}

/* The calls counts (slow, median) on the explain tree line of function fn. */
static void tree_counts(const char *out, const char *fn, long *slow, long *med)
{
	char pat[64], line[512];
	const char *p, *e;
	char *bar;
	size_t n;

	snprintf(pat, sizeof(pat), "  %s\n", fn);
	p = strstr(out, "call tree of the slow request");
	assert_non_null(p);
	p = strstr(p, pat);
	if (!p)
		fail_msg("no tree line for %s:\n%s", fn, out);
	e = p;
	while (p > out && p[-1] != '\n')
		p--;
	n = (size_t)(e - p) < sizeof(line) - 1 ? (size_t)(e - p) : sizeof(line) - 1;
	memcpy(line, p, n);
	line[n] = 0;
	bar = strchr(line, '|');
	assert_non_null(bar);
	/* "incl self calls | incl self calls": calls end each half */
	for (n = (size_t)(bar - line); n > 0 && line[n - 1] == ' '; n--)
		;
	line[n] = 0;
	*slow = strtol(strrchr(line, ' ') + 1, NULL, 10);
	*med = strtol(strrchr(bar + 1, ' ') + 1, NULL, 10);
}

/*
 * Requests that share a boundary tick: #1 ends and #2 begins at tick 2000,
 * and each has a call in that very tick (early() before #1's end record,
 * late() after #2's begin record).  By time both calls lie in both
 * requests; by recorded order each belongs to its own.
 */
static void test_outputs_explain_boundary_tick(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	struct mem m;
	uint32_t med;
	long s, md;

	(void)state;
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "op");
	snapbuild_func(sb, 0, 0xA000); /* work */
	snapbuild_func(sb, 1, 0xB000); /* early: #1's last call */
	snapbuild_func(sb, 2, 0xC000); /* late: #2's first call */
	snapbuild_req(sb, 0, 1, 1000, 1, 1, 0);
	snapbuild_enter(sb, 0, 1, 1001, 0);
	snapbuild_exit(sb, 0, 1, 1800, 0);
	snapbuild_enter(sb, 0, 1, 2000, 1);
	snapbuild_exit(sb, 0, 1, 2000, 1);
	snapbuild_req(sb, 0, 1, 2000, 1, 1, 1);
	snapbuild_req(sb, 0, 1, 2000, 1, 2, 0);
	snapbuild_enter(sb, 0, 1, 2000, 2);
	snapbuild_exit(sb, 0, 1, 2000, 2);
	snapbuild_enter(sb, 0, 1, 2001, 0);
	snapbuild_exit(sb, 0, 1, 2090, 0);
	snapbuild_req(sb, 0, 1, 2100, 1, 2, 1);
	snapbuild_req(sb, 0, 1, 2100, 1, 3, 0);
	snapbuild_enter(sb, 0, 1, 2101, 0);
	snapbuild_exit(sb, 0, 1, 2190, 0);
	snapbuild_req(sb, 0, 1, 2200, 1, 3, 1);
	d = decode(sb);
	assert_int_equal(d->reqs[kd_out_explain_pick(d, &med)].id, 1);
	assert_int_equal(d->reqs[med].id, 2);
	mem_open(&m);
	kd_out_explain(m.f, d, NULL);
	mem_close(&m);
	tree_counts(m.p, "0xb000", &s, &md);
	if (s != 1 || md != 0)
		fail_msg("early() belongs to #1 only (slow %ld, median %ld):\n%s", s, md, m.p);
	tree_counts(m.p, "0xc000", &s, &md);
	if (s != 0 || md != 1)
		fail_msg("late() belongs to #2 only (slow %ld, median %ld):\n%s", s, md, m.p);
	tree_counts(m.p, "0xa000", &s, &md);
	assert_int_equal(s, 1);
	assert_int_equal(md, 1);
	free(m.p);
	kd_dec_free(d);
}

static void test_outputs_folded_adds_up(void **state)
{
	struct kd_dec *d = golden();
	struct mem m;
	uint64_t sum = 0, self = 0, lines = 0;
	char *line;

	(void)state;
	mem_open(&m);
	assert_int_equal(kd_out_folded_stream(m.f, d, NULL), 0);
	mem_close(&m);
	assert_non_null(strstr(m.p, "main/1001;commit;0x402000 2133\n"));
	for (line = m.p; line && *line;) {
		char *nl = strchr(line, '\n'), *sp;

		assert_non_null(nl);
		*nl = '\0';
		sp = strrchr(line, ' ');
		assert_non_null(sp);
		sum += strtoull(sp + 1, NULL, 10);
		lines++;
		line = nl + 1;
	}
	for (uint32_t i = 0; i < d->ncalls; i++)
		self += d->calls[i].self;
	/* each line is one stack's self ticks converted once: within a ns each */
	self = kd_time_ticks_ns(d, self);
	assert_true(sum <= self && self - sum <= lines);
	free(m.p);
	kd_dec_free(d);
}

static void test_outputs_text_filters(void **state)
{
	struct kd_dec *d = golden();
	struct kd_out_opts o = { .have_tid = 1, .tid = 1003 };
	struct mem m;

	(void)state;
	mem_open(&m);
	kd_out_text(m.f, d, &o);
	mem_close(&m);
	assert_non_null(strstr(m.p, "worker-2/1003"));
	assert_null(strstr(m.p, "worker-1/1002"));
	assert_non_null(strstr(m.p, "[still running at window end]"));
	free(m.p);
	o.have_tid = 0;
	o.limit = 3;
	mem_open(&m);
	kd_out_text(m.f, d, &o);
	mem_close(&m);
	assert_non_null(strstr(m.p, "more lines (--limit 3)"));
	free(m.p);
	kd_dec_free(d);
}

/* ---- the program --------------------------------------------------------------- */

static int run(const char *args, char *out, size_t outlen)
{
	char cmd[4096];
	FILE *p;
	size_t n;
	int st;

	/* A cross build runs the decoder through its emulator (ktest.c). */
	const char *emu = getenv("KTRACE_TEST_EMULATOR");

	snprintf(cmd, sizeof(cmd), "%s %s %s 2>&1", emu ? emu : "", KTRACE_DECODE_PATH, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, outlen - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The muted list is never cut inside a name: the note lists every name,
 * and a bounded list (chrome's process label) ends with "and N more". */
static void test_outputs_muted_list_whole(void **state)
{
	struct kd_dec *d = golden();
	struct ktrace_muted_rec *m = calloc(60, sizeof(*m));
	char buf[100], name[32];
	struct mem out;

	(void)state;
	assert_non_null(m);
	for (uint32_t i = 0; i < 60; i++) {
		m[i].addr = 0x7f0000001000ull + i * 0x100;   /* unnamed: 0x7f00000010.. */
		m[i].why = KTRACE_MUTE_HOT_SHORT;
	}
	free(d->snap.muted);
	d->snap.muted = m;
	d->snap.nmuted = 60;

	kd_budget_muted_list(d, buf, sizeof(buf));
	assert_true(strlen(buf) < sizeof(buf));
	assert_non_null(strstr(buf, " more"));
	/* every name before "and N more" is whole: 14 hex digits each */
	for (char *p = buf; *p && strncmp(p, " and ", 5); p++)
		if (p == buf || p[-1] == ' ') {
			assert_int_equal(strncmp(p, "0x7f", 4), 0);
			assert_true(strspn(p + 2, "0123456789abcdef") == 12);
		}

	mem_open(&out);
	kd_budget_note(out.f, d, "");
	mem_close(&out);
	for (uint32_t i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "0x%llx", 0x7f0000001000ull + i * 0x100);
		if (!strstr(out.p, name))
			fail_msg("%s missing from the note: %.300s", name, out.p);
	}
	free(out.p);
	kd_dec_free(d);
}

/* The summary reports the LEAN section: functions seen and patched out,
 * sites, writes, batches, the writer's time, a both-modes build; nothing
 * of it without the section. */
static void test_outputs_summary_lean(void **state)
{
	struct kd_dec *d = golden();
	struct mem out;

	(void)state;
	mem_open(&out);
	kd_out_summary(out.f, d);
	mem_close(&out);
	assert_null(strstr(out.p, "lean functions seen"));
	free(out.p);

	d->snap.have_lean = 1;
	d->snap.lean.funcs = 322;
	d->snap.lean.funcs_out = 126;
	d->snap.lean.nop_sites = 286;
	d->snap.lean.site_writes = 387;
	d->snap.lean.batches = 30;
	d->snap.lean.batch_ns = 649000;
	d->snap.lean.site_failures = 2;
	d->snap.lean.flags = KTRACE_LEAN_BOTH_MODES;
	mem_open(&out);
	kd_out_summary(out.f, d);
	mem_close(&out);
	if (!strstr(out.p, "322 lean functions seen, 126 of them patched out now (286 entry and "
	                   "exit sites nops); 387 site writes in 30 batches, 0.649 ms on the "
	                   "writer thread; 2 sites could not be written\n") ||
	    !strstr(out.p, "compiled with -finstrument-functions too: recorded once"))
		fail_msg("no lean line as expected in:\n%s", out.p);
	free(out.p);
	kd_dec_free(d);
}

/* Runs the decoder with args; its stderr alone in err (stdout dropped). */
static int run_err(const char *args, char *err, size_t errlen)
{
	char cmd[4096];
	const char *emu = getenv("KTRACE_TEST_EMULATOR");
	FILE *p;
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s %s 2>&1 >/dev/null", emu ? emu : "", KTRACE_DECODE_PATH,
	         args);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(err, 1, errlen - 1, p);
	err[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * What each format says on stderr: the formats whose output is not text
 * (chrome, perfetto, html, folded) print no summary there unless -v; with
 * -o, every format says in one line what it wrote; -q silences that line.
 */
static void test_outputs_stderr(void **state)
{
	static const char *const fmts[] = { "chrome", "perfetto", "html", "folded", "summary",
	                                    "text", "stats", "explain" };
	char dir[] = "/tmp/ktrace-dec-errXXXXXX", path[512], outp[600], args[2048], want[800];
	static char err[1 << 16];
	struct snapbuild *sb;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/g.ktrace", dir);
	sb = snapbuild_new();
	snapbuild_scenario_golden(sb);
	snapbuild_finish(sb, &buf, &len);
	snapbuild_free(sb);
	assert_int_equal(snapbuild_write_file(path, buf, len), 0);
	free(buf);

	for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
		/* to stdout: nothing on stderr */
		snprintf(args, sizeof(args), "--format %s %s", fmts[k], path);
		assert_int_equal(run_err(args, err, sizeof(err)), 0);
		if (err[0])
			fail_msg("--format %s: stderr not empty:\n%s", fmts[k], err);
		/* to a file: one line, "wrote OUT (FORMAT, SIZE)" */
		snprintf(outp, sizeof(outp), "%s/out.%s", dir, fmts[k]);
		snprintf(args, sizeof(args), "--format %s -o %s %s", fmts[k], outp, path);
		assert_int_equal(run_err(args, err, sizeof(err)), 0);
		snprintf(want, sizeof(want), "ktrace-decode: wrote %s (%s, ", outp, fmts[k]);
		if (strncmp(err, want, strlen(want)) != 0 || strchr(err, '\n') != err + strlen(err) - 1)
			fail_msg("--format %s -o: stderr is not one 'wrote' line:\n%s", fmts[k], err);
		/* -q: nothing */
		snprintf(args, sizeof(args), "--format %s -q -o %s %s", fmts[k], outp, path);
		assert_int_equal(run_err(args, err, sizeof(err)), 0);
		if (err[0])
			fail_msg("--format %s -q: stderr not empty:\n%s", fmts[k], err);
		/* -v: the summary too, for the formats that hold none */
		if (k < 4) {
			snprintf(args, sizeof(args), "--format %s -v -o %s %s", fmts[k], outp, path);
			assert_int_equal(run_err(args, err, sizeof(err)), 0);
			if (!strstr(err, "window:") || !strstr(err, "ktrace-decode: wrote "))
				fail_msg("--format %s -v: no summary on stderr:\n%s", fmts[k], err);
		}
		unlink(outp);
	}
	unlink(path);
	rmdir(dir);
}

static void test_outputs_cli(void **state)
{
	char dir[] = "/tmp/ktrace-dec-cliXXXXXX", path[512], path2[512], args[2048], json[600];
	static char out[1 << 20];
	struct snapbuild *sb;
	uint8_t *buf;
	size_t len;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/g.ktrace", dir);
	snprintf(path2, sizeof(path2), "%s/damaged.ktrace", dir);
	sb = snapbuild_new();
	snapbuild_scenario_golden(sb);
	snapbuild_finish(sb, &buf, &len);
	snapbuild_free(sb);
	assert_int_equal(snapbuild_write_file(path, buf, len), 0);
	free(buf);
	sb = snapbuild_new();
	snapbuild_scenario_golden(sb);
	snapbuild_block_bad_crc(sb, 1);
	snapbuild_finish(sb, &buf, &len);
	snapbuild_free(sb);
	assert_int_equal(snapbuild_write_file(path2, buf, len), 0);

	assert_int_equal(run("", out, sizeof(out)), 2);
	assert_non_null(strstr(out, "usage:"));
	assert_int_equal(run("--format nope x", out, sizeof(out)), 2);
	assert_int_equal(run("--limit -3 x", out, sizeof(out)), 2);
	assert_int_equal(run("--help", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "Exit status"));

	/* a foreign file: exit 1, file and offset named */
	snprintf(args, sizeof(args), "/proc/self/status");
	assert_int_equal(run(args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "ktrace-decode: /proc/self/status: offset 0x0: not a ktrace snapshot"));
	snprintf(args, sizeof(args), "%s/missing.ktrace", dir);
	assert_int_equal(run(args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "cannot open"));

	/* a damaged block: warn, decode the rest, exit 0 */
	snprintf(args, sizeof(args), "%s", path2);
	assert_int_equal(run(args, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "warning: offset 0x"));
	assert_non_null(strstr(out, "CRC mismatch; block skipped"));
	assert_non_null(strstr(out, "damage:    1 blocks skipped"));

	/* every format runs */
	for (int k = 0; k < 6; k++) {
		static const char *const fmts[] = { "summary", "text", "stats", "explain", "folded",
		                                    "chrome" };
		snprintf(args, sizeof(args), "--format %s -q %s", fmts[k], path);
		assert_int_equal(run(args, out, sizeof(out)), 0);
		assert_true(strlen(out) > 10);
	}

	/* -o: two files into one chrome trace, written atomically */
	snprintf(json, sizeof(json), "%s/out.json", dir);
	snprintf(args, sizeof(args), "--format chrome -q -o %s %s %s", json, path, path2);
	assert_int_equal(run(args, out, sizeof(out)), 0);
	f = fopen(json, "r");
	assert_non_null(f);
	len = fread(out, 1, sizeof(out) - 1, f);
	fclose(f);
	out[len] = '\0';
	assert_true(json_valid(out, len));
	assert_non_null(strstr(out, "\"pid\":31337,"));
	assert_non_null(strstr(out, "\"pid\":20031337,")); /* the second snapshot of the process */

	/* -o on something that is not a regular file (/dev/null, a FIFO) writes
	 * in place and never replaces it (tested on a FIFO, not on /dev/null) */
	{
		char fifo[600], got[600];
		struct stat st;

		snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
		snprintf(got, sizeof(got), "%s/fifo.out", dir);
		assert_int_equal(mkfifo(fifo, 0600), 0);
		snprintf(args, sizeof(args), "timeout 20 cat %s > %s &", fifo, got);
		assert_int_equal(system(args), 0);
		snprintf(args, sizeof(args), "--format summary -o %s %s", fifo, path);
		assert_int_equal(run(args, out, sizeof(out)), 0);
		assert_int_equal(stat(fifo, &st), 0);
		assert_true(S_ISFIFO(st.st_mode));
		for (int i = 0; i < 200 && (stat(got, &st) != 0 || st.st_size == 0); i++)
			usleep(10000);
		assert_true(st.st_size > 100);
	}

	/* nothing decoded: no output file appears */
	snprintf(json, sizeof(json), "%s/none.json", dir);
	snprintf(args, sizeof(args), "--format chrome -o %s /proc/self/status", json);
	assert_int_equal(run(args, out, sizeof(out)), 1);
	assert_int_equal(access(json, F_OK), -1);

	snprintf(args, sizeof(args), "rm -rf %s", dir);
	assert_int_equal(system(args), 0);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_outputs_json_validator_works),
		cmocka_unit_test(test_outputs_chrome_well_formed),
		cmocka_unit_test(test_outputs_chrome_escapes),
		cmocka_unit_test(test_outputs_stats_exact),
		cmocka_unit_test(test_outputs_explain_names_cause_first),
		cmocka_unit_test(test_outputs_explain_without_trigger),
		cmocka_unit_test(test_outputs_explain_boundary_tick),
		cmocka_unit_test(test_outputs_folded_adds_up),
		cmocka_unit_test(test_outputs_text_filters),
		cmocka_unit_test(test_outputs_cli),
		cmocka_unit_test(test_outputs_stderr),
		cmocka_unit_test(test_outputs_muted_list_whole),
		cmocka_unit_test(test_outputs_summary_lean),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
