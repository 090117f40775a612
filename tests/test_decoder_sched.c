/*
 * test_decoder_sched.c - the SCHED section (issue 10) in the decoder: read
 * and validated (damaged sections are dropped with a warning, the rest
 * decodes), switch records turned into off-CPU intervals (blocked,
 * preempted) per thread and on-CPU intervals per core, on the rings'
 * clock through the anchors; the status line for recorded, off, refused
 * and missing; and what every sink prints with and without it.
 */
#include <errno.h>
#include <inttypes.h>
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

/* shift 0, 1 GHz, anchors with monotonic == tsc: ticks are ns. */
static struct snapbuild *base(void)
{
	struct snapbuild *sb = snapbuild_new();

	assert_non_null(sb);
	snapbuild_anchor(sb, 100, 1763700000000000000ll);
	snapbuild_anchor(sb, 1000000, 1763700000000999900ll);
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_func(sb, 0, 0x401000);
	snapbuild_func(sb, 1, 0x402000);
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "op");
	/* request [1000, 5000]: f [1000, 5000] calls g [2000, 4000] */
	snapbuild_req(sb, 0, 1, 1000, 1, 7, 0);
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_enter(sb, 0, 1, 2000, 1);
	snapbuild_exit(sb, 0, 1, 4000, 1);
	snapbuild_exit(sb, 0, 1, 5000, 0);
	snapbuild_req(sb, 0, 1, 5000, 1, 7, 1);
	return sb;
}

struct sched_img {
	struct ktrace_sched_hdr h;
	struct ktrace_sched_core c[1];
	struct ktrace_sched_rec r[8];
	struct ktrace_sched_name n[1];
};

/* kernel.perf_event_paranoid the next add_sched records. */
static int32_t sched_paranoid = 3;

static void add_sched(struct snapbuild *sb, uint32_t status, int32_t err, int bad_what,
                      size_t size_delta)
{
	struct sched_img s;
	uint32_t nr = status == KTRACE_SCHED_RECORDED ? 8 : 0;

	memset(&s, 0, sizeof(s));
	s.h.status = status;
	s.h.err = err;
	s.h.paranoid = sched_paranoid;
	s.h.ncores = nr ? 1 : 0;
	s.h.nnames = nr ? 1 : 0;
	s.h.clockid = 1;
	s.h.start_ns = 500;
	s.h.end_ns = 9000;
	s.h.switches = 8;
	snprintf(s.h.what, sizeof(s.h.what), "%s",
	         status == KTRACE_SCHED_SECCOMP ? "seccomp" : "perf_event_open");
	s.c[0] = (struct ktrace_sched_core){ 0, 8, 500 };
	/* main: blocked [2500, 3500] inside g, preempted [4200, 4400] in f;
	 * tid 555 (not in THREADS) runs on cpu 0 while main is off it. */
	s.r[0] = (struct ktrace_sched_rec){ 2500, 100, 0, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.r[1] = (struct ktrace_sched_rec){ 2600, 555, 0, KTRACE_SCHED_IN, 0 };
	s.r[2] = (struct ktrace_sched_rec){ 3400, 555, 0, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.r[3] = (struct ktrace_sched_rec){ 3500, 100, 0, KTRACE_SCHED_IN, 0 };
	s.r[4] = (struct ktrace_sched_rec){ 4200, 100, 0, KTRACE_SCHED_OUT_PREEMPT, 0 };
	s.r[5] = (struct ktrace_sched_rec){ 4250, 555, 0, KTRACE_SCHED_IN, 0 };
	s.r[6] = (struct ktrace_sched_rec){ 4350, 555, 0,
	                                    bad_what ? 77 : KTRACE_SCHED_OUT_BLOCK, 0 };
	s.r[7] = (struct ktrace_sched_rec){ 4400, 100, 0, KTRACE_SCHED_IN, 0 };
	s.n[0].tid = 555;
	snprintf(s.n[0].name, sizeof(s.n[0].name), "sidecar");
	if (nr)
		snapbuild_raw_section(sb, KTRACE_SEC_SCHED, nr, &s, sizeof(s) - size_delta, 0);
	else
		snapbuild_raw_section(sb, KTRACE_SEC_SCHED, 0, &s.h, sizeof(s.h), 0);
}

static struct kd_dec *decode(struct snapbuild *sb)
{
	struct kd_dec_error err;
	struct kd_dec *d = snapbuild_decode(sb, NULL, &err);

	if (!d)
		fail_msg("decode failed: %s", err.msg);
	return d;
}

static char *run_sink(struct kd_dec *d, const char *what)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct kd_out_opts o;

	memset(&o, 0, sizeof(o));
	assert_non_null(f);
	if (!strcmp(what, "summary"))
		kd_out_summary(f, d);
	else if (!strcmp(what, "explain"))
		kd_out_explain(f, d, &o);
	else if (!strcmp(what, "stats"))
		kd_out_stats(f, d, &o);
	else if (!strcmp(what, "text"))
		kd_out_text(f, d, &o);
	else {
		struct kd_chrome c;

		kd_out_chrome_begin(&c, f, 0);
		kd_out_chrome_file(&c, d, 1, &o);
		kd_out_chrome_end(&c);
	}
	fclose(f);
	return buf;
}

static void test_decoder_sched_intervals(void **state)
{
	struct snapbuild *sb = base();
	struct kd_dec *d;
	uint64_t off[2];
	uint32_t side = KD_NONE;

	(void)state;
	add_sched(sb, KTRACE_SCHED_RECORDED, 0, 0, 0);
	d = decode(sb);
	assert_true(d->sched);
	assert_int_equal(d->snap.nsched_recs, 8);
	/* main: two intervals, blocked then preempted */
	kd_sched_offcpu_in(d, 0, 1000, 5000, off);
	assert_int_equal(off[KD_OFF_BLOCKED], 1000);
	assert_int_equal(off[KD_OFF_PREEMPTED], 200);
	kd_sched_offcpu_in(d, 0, 2000, 4000, off);  /* g holds the blocked one */
	assert_int_equal(off[KD_OFF_BLOCKED], 1000);
	assert_int_equal(off[KD_OFF_PREEMPTED], 0);
	kd_sched_offcpu_in(d, 0, 3000, 4300, off);  /* partial overlaps */
	assert_int_equal(off[KD_OFF_BLOCKED], 500);
	assert_int_equal(off[KD_OFF_PREEMPTED], 100);
	/* the tid THREADS does not know gets a thread, named from SCHED */
	for (uint32_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].tid == 555)
			side = i;
	assert_int_not_equal(side, KD_NONE);
	assert_string_equal(d->threads[side].name, "sidecar");
	/* cores: main until 2500, sidecar 2600..3400, main 3500..4200, ... */
	assert_true(d->noncpu >= 4);
	assert_int_equal(d->oncpu[0].thread, 0);
	assert_int_equal(d->oncpu[0].end, 2500);
	assert_int_equal(d->oncpu[1].thread, side);
	assert_int_equal(d->oncpu[1].begin, 2600);
	assert_int_equal(d->oncpu[1].end, 3400);
	assert_int_equal(d->oncpu[2].begin, 3500);
	assert_int_equal(d->oncpu[2].end, 4200);
	kd_dec_free(d);
}

static void test_decoder_sched_sinks(void **state)
{
	struct snapbuild *sb = base();
	struct kd_dec *d;
	char *s;

	(void)state;
	add_sched(sb, KTRACE_SCHED_RECORDED, 0, 0, 0);
	d = decode(sb);
	s = run_sink(d, "summary");
	assert_non_null(strstr(s, "scheduling: recorded, 8 switch records in the file"));
	free(s);
	s = run_sink(d, "explain");
	assert_non_null(strstr(s, "the slow request:   2.800 us on-CPU, 1.000 us blocked, "
	                          "200 ns preempted"));
	/* g's self time is the blocked microsecond and one on the cpu */
	assert_non_null(strstr(s, "here: 1.000 us on-CPU, 1.000 us blocked, 0 ns preempted"));
	assert_non_null(strstr(s, "sidecar/555"));
	free(s);
	s = run_sink(d, "stats");
	assert_non_null(strstr(s, "per function, on and off the cpu"));
	free(s);
	s = run_sink(d, "text");
	assert_non_null(strstr(s, "~~ off-CPU (blocked) 1.000 us"));
	assert_non_null(strstr(s, "~~ off-CPU (preempted) 200 ns"));
	assert_non_null(strstr(s, "other"));
	free(s);
	s = run_sink(d, "chrome");
	assert_non_null(strstr(s, "\"off-CPU: blocked\""));
	assert_non_null(strstr(s, "\"off-CPU: preempted\""));
	assert_non_null(strstr(s, "\"context switches\""));
	free(s);
	kd_dec_free(d);
}

static void test_decoder_sched_status_lines(void **state)
{
	struct snapbuild *sb;
	struct kd_dec *d;
	char line[512];

	(void)state;
	sb = base();
	add_sched(sb, KTRACE_SCHED_REFUSED, EACCES, 0, 0);
	d = decode(sb);
	assert_false(d->sched);
	kd_sched_status(d, line, sizeof(line));
	assert_string_equal(line, "scheduling: not recorded (perf_event_open: EACCES, "
	                          "kernel.perf_event_paranoid=3; allow with sysctl "
	                          "kernel.perf_event_paranoid=2 or CAP_PERFMON)");
	kd_dec_free(d);

	/* Refused although the sysctl allows it: no advice to set it. */
	sb = base();
	sched_paranoid = 2;
	add_sched(sb, KTRACE_SCHED_REFUSED, EPERM, 0, 0);
	sched_paranoid = 3;
	d = decode(sb);
	kd_sched_status(d, line, sizeof(line));
	assert_string_equal(line, "scheduling: not recorded (perf_event_open: EPERM, "
	                          "kernel.perf_event_paranoid=2, which allows it: a seccomp "
	                          "filter or a security module (container profile, SELinux, "
	                          "AppArmor) forbids the call here)");
	kd_dec_free(d);

	/* Not tried under a seccomp filter. */
	sb = base();
	add_sched(sb, KTRACE_SCHED_SECCOMP, 0, 0, 0);
	d = decode(sb);
	kd_sched_status(d, line, sizeof(line));
	assert_string_equal(line, "scheduling: not recorded (a seccomp filter is active: "
	                          "perf_event_open was not tried, as a filter may kill the "
	                          "process on it; KTRACE_SCHED=on tries it)");
	kd_dec_free(d);

	sb = base();
	add_sched(sb, KTRACE_SCHED_OFF, 0, 0, 0);
	d = decode(sb);
	kd_sched_status(d, line, sizeof(line));
	assert_string_equal(line, "scheduling: not recorded (KTRACE_SCHED=off)");
	kd_dec_free(d);

	sb = base();  /* an older file: no section at all */
	d = decode(sb);
	assert_false(d->snap.have_sched);
	kd_sched_status(d, line, sizeof(line));
	assert_non_null(strstr(line, "scheduling: not recorded (no SCHED section"));
	kd_dec_free(d);
}

/* Damage: a size that does not add up drops the section with a warning;
 * records of unknown kind are skipped with a warning; the rest decodes. */
static void test_decoder_sched_damaged(void **state)
{
	struct snapbuild *sb;
	struct kd_dec *d;

	(void)state;
	sb = base();
	add_sched(sb, KTRACE_SCHED_RECORDED, 0, 0, 8);
	d = decode(sb);
	assert_false(d->snap.have_sched);
	assert_false(d->sched);
	assert_true(d->snap.warn.total >= 1);
	assert_non_null(strstr(d->snap.warn.lines[0], "SCHED"));
	assert_int_equal(d->nreqs, 1);
	kd_dec_free(d);

	sb = base();
	add_sched(sb, KTRACE_SCHED_RECORDED, 0, 1, 0);
	d = decode(sb);
	assert_true(d->sched);
	assert_int_equal(d->snap.nsched_recs, 7);
	assert_true(d->snap.warn.total >= 1);
	kd_dec_free(d);
}

/* The "X" event of tid with name (a prefix of its JSON name) whose ts is
 * the latest: ts and ts + dur in ns; 0 if none. */
static int chrome_x(const char *json, const char *name, int tid, uint64_t *b, uint64_t *e)
{
	char key[128], tkey[32];
	int found = 0;

	snprintf(key, sizeof(key), "\"name\":\"%s", name);
	snprintf(tkey, sizeof(tkey), "\"tid\":%d,", tid);
	for (const char *s = json; (s = strstr(s, key)) != NULL; s++) {
		const char *eol = strchr(s, '\n'), *t = strstr(s, tkey), *ts = strstr(s, "\"ts\":");
		const char *dur = strstr(s, "\"dur\":");
		double a, d;

		if (!t || !ts || !dur || (eol && (t > eol || dur > eol)))
			continue;
		if (sscanf(ts + 5, "%lf", &a) != 1 || sscanf(dur + 6, "%lf", &d) != 1)
			continue;
		if (!found || (uint64_t)(a * 1000 + 0.5) > *b) {
			*b = (uint64_t)(a * 1000 + 0.5);
			*e = (uint64_t)((a + d) * 1000 + 0.5);
		}
		found = 1;
	}
	return found;
}

/* Chrome JSON (issue 18): a thread blocked at the window end inside a call
 * still running there: the off-CPU slice ends with the window, inside the
 * call (it ran past the window end and speedscope called the trace badly
 * nested), and one at the window start begins after the truncated calls. */
static void test_decoder_sched_chrome_nests_at_window_ends(void **state)
{
	struct snapbuild *sb = base();
	struct {
		struct ktrace_sched_hdr h;
		struct ktrace_sched_core c[1];
		struct ktrace_sched_rec r[1];
	} s;
	struct kd_dec *d;
	char *out;
	uint64_t ob = 0, oe = 0, cb = 0, ce = 0;

	(void)state;
	snapbuild_thread(sb, 2, 101, "other", 0);
	snapbuild_enter(sb, 0, 1, 5500, 1);      /* g, never left: still running */
	snapbuild_enter(sb, 0, 2, 6500, 0);
	snapbuild_exit(sb, 0, 2, 7000, 0);       /* the window ends here */
	memset(&s, 0, sizeof(s));
	s.h.status = KTRACE_SCHED_RECORDED;
	s.h.ncores = 1;
	s.h.clockid = 1;
	s.h.start_ns = 500;
	s.h.end_ns = 9000;                       /* switches known past the window */
	s.h.switches = 1;
	s.c[0] = (struct ktrace_sched_core){ 0, 1, 500 };
	s.r[0] = (struct ktrace_sched_rec){ 5600, 100, 0, KTRACE_SCHED_OUT_BLOCK, 0 };
	snapbuild_raw_section(sb, KTRACE_SEC_SCHED, 1, &s, sizeof(s), 0);
	d = decode(sb);
	assert_int_equal(d->noffcpu, 1);
	assert_true(d->offcpu[0].end > d->window_end);
	out = run_sink(d, "chrome");
	assert_true(chrome_x(out, "off-CPU: blocked", 100, &ob, &oe));
	assert_true(chrome_x(out, kd_names_func_short(d, 1), 100, &cb, &ce));
	if (!(cb <= ob && oe <= ce))
		fail_msg("off-CPU [%" PRIu64 ", %" PRIu64 "] is not inside the truncated call [%" PRIu64
		         ", %" PRIu64 "]:\n%s", ob, oe, cb, ce, out);
	free(out);
	kd_dec_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decoder_sched_intervals),
		cmocka_unit_test(test_decoder_sched_sinks),
		cmocka_unit_test(test_decoder_sched_status_lines),
		cmocka_unit_test(test_decoder_sched_damaged),
		cmocka_unit_test(test_decoder_sched_chrome_nests_at_window_ends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
