/*
 * test_e2e_sched.c - running or waiting (issue 10), with e2e/sched_prog.c:
 * the process's own context switches are recorded beside the rings, on
 * their clock, and the decoder splits time into on-CPU, blocked and
 * preempted.  A 5 ms sleep is exactly one off-CPU interval inside its
 * call; a request blocked on a mutex is explained as blocked, one sharing
 * its core with a cpu hog as preempted; KTRACE_SCHED=off and a refused
 * perf_event_open (seccomp: e2e/noperf.c) are said in the summary and
 * break nothing; threads from before and after start-up, threads that
 * exit, fork and exec all get their switches; no perf descriptor is held.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_sched"
#define NOPERF KTRACE_TEST_BINARY_DIR "/e2e_noperf"

struct run {
	struct kt_proc p;
	char *dir;
	char envdir[300];
	const char *env[16];
};

static void run_once(struct run *r, const char *mode, int noperf, const char *const *extra);
static void done(struct run *r);

/*
 * Run the program (through noperf if asked) to completion.  Modes with
 * requests print how long the fast ones and the planted one took: when
 * the machine's load made a fast request slower than the planted one (the
 * explanation would then rightly be about that one), run again, up to
 * three times.
 */
static void run(struct run *r, const char *mode, int noperf, const char *const *extra)
{
	for (int attempt = 0;; attempt++) {
		const char *q;
		long long fast = 0, slow = 1;

		run_once(r, mode, noperf, extra);
		q = strstr(r->p.out, "requests max_fast_us=");
		if (!q || sscanf(q, "requests max_fast_us=%lld slow_us=%lld", &fast, &slow) != 2 ||
		    fast < slow || attempt == 2)
			return;
		fprintf(stderr, "  (load: a fast request took %lld us, the planted one %lld us; "
		        "running again)\n", fast, slow);
		done(r);
	}
}

static void run_once(struct run *r, const char *mode, int noperf, const char *const *extra)
{
	char *argv[4];
	size_t n = 0, a = 0;

	memset(r, 0, sizeof(*r));
	r->dir = kt_mkdtemp("sched");
	assert_non_null(r->dir);
	snprintf(r->envdir, sizeof(r->envdir), "KTRACE_DIR=%s", r->dir);
	r->env[n++] = r->envdir;
	r->env[n++] = "KTRACE_QUIET=1";
	r->env[n++] = "KTRACE_ENABLE";
	r->env[n++] = "KTRACE_SCHED";
	r->env[n++] = "KTRACE_BUFFER_MB=8";
	for (size_t i = 0; extra && extra[i]; i++)
		r->env[n++] = extra[i];
	r->env[n] = NULL;
	if (noperf)
		argv[a++] = (char *)NOPERF;
	argv[a++] = (char *)PROG;
	argv[a++] = (char *)mode;
	argv[a] = NULL;
	if (kt_run(argv, r->env, &r->p, 60000) != 0)
		fail_msg("%s %s failed (%#x): %s", PROG, mode, r->p.status, r->p.err);
}

static void done(struct run *r)
{
	kt_rmtree(r->dir);
	free(r->dir);
	kt_proc_free(&r->p);
}

/* The path after "<tag> [<tid>] <rc> " on a line of the program's stdout. */
static const char *snapshot_path(const struct run *r, const char *tag, int with_tid, int *tid,
                                 char *buf, size_t len)
{
	char fmt[64];
	const char *p = r->p.out;
	size_t tl = strlen(tag);

	while (p && *p) {
		if (!strncmp(p, tag, tl) && p[tl] == ' ') {
			int rc = -1, t = 0;
			char path[4352];

			if (with_tid) {
				snprintf(fmt, sizeof(fmt), "%s %%d %%d %%4351s", tag);
				if (sscanf(p, fmt, &t, &rc, path) == 3 && rc == 0) {
					*tid = t;
					snprintf(buf, len, "%s", path);
					return buf;
				}
			} else {
				snprintf(fmt, sizeof(fmt), "%s %%d %%4351s", tag);
				if (sscanf(p, fmt, &rc, path) == 2 && rc == 0) {
					snprintf(buf, len, "%s", path);
					return buf;
				}
			}
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	fail_msg("no '%s' snapshot line in:\n%s\n%s", tag, r->p.out, r->p.err);
	return NULL;
}

/* "tid NAME TID" line -> TID. */
static int tid_of(const struct run *r, const char *name)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "tid %s ", name);
	p = strstr(r->p.out, key);
	if (!p)
		fail_msg("no '%s' line in:\n%s", key, r->p.out);
	return atoi(p + strlen(key));
}

/* ktrace-decode --format FMT file -> its stdout (malloc'ed). */
static char *decode(const char *fmt, const char *file)
{
	char *argv[] = { (char *)KTRACE_DECODE_PATH, (char *)"--format", (char *)fmt, (char *)file,
		         NULL };
	struct kt_proc p;
	char *out;

	if (kt_run(argv, NULL, &p, 60000) != 0)
		fail_msg("ktrace-decode --format %s %s failed (%#x): %s", fmt, file, p.status, p.err);
	out = strdup(p.out);
	kt_proc_free(&p);
	return out;
}

/* "<value> <unit>" (kd_time_fmt_dur) just before " label" in line -> ns. */
static double dur_before(const char *line, const char *label)
{
	const char *e = strstr(line, label), *s;
	double v, mul = 1;
	char unit[8];

	if (!e)
		fail_msg("no '%s' in: %s", label, line);
	s = e;
	/* back over "<number> <unit>" */
	for (int spaces = 0; s > line; s--)
		if (s[-1] == ' ' && ++spaces == 2)
			break;
		else if (s[-1] == ',' || s[-1] == '(' || s[-1] == ':')
			break;
	if (sscanf(s, "%lf %7s", &v, unit) != 2)
		fail_msg("cannot read a duration before '%s' in: %s", label, line);
	if (!strcmp(unit, "us"))
		mul = 1e3;
	else if (!strcmp(unit, "ms"))
		mul = 1e6;
	else if (!strcmp(unit, "s"))
		mul = 1e9;
	return v * mul;
}

/* The line of text that starts with (after blanks) prefix, copied. */
static void line_of(const char *text, const char *prefix, char *buf, size_t len)
{
	const char *p = text;

	while (p && *p) {
		const char *q = p, *e = strchr(p, '\n');

		while (*q == ' ')
			q++;
		if (!strncmp(q, prefix, strlen(prefix))) {
			size_t n = e ? (size_t)(e - p) : strlen(p);

			if (n >= len)
				n = len - 1;
			memcpy(buf, p, n);
			buf[n] = 0;
			return;
		}
		p = e ? e + 1 : NULL;
	}
	fail_msg("no line starting with '%s' in:\n%s", prefix, text);
}

/* The first ranked line after "where the extra time went", and the next. */
static void first_ranked(const char *text, char *fn_line, char *split_line, size_t len)
{
	const char *p = strstr(text, "where the extra time went");
	const char *l1, *l2, *e;

	assert_non_null(p);
	l1 = strchr(p, '\n') + 1;
	l2 = strchr(l1, '\n') + 1;
	snprintf(fn_line, len, "%.*s", (int)(l2 - l1 - 1), l1);
	e = strchr(l2, '\n');
	snprintf(split_line, len, "%.*s", e ? (int)(e - l2) : (int)strlen(l2), l2);
}

/* The decoded call of func on thread th (exactly one), or fail. */
static const struct kd_dec_call *the_call(const struct kd_dec *d, uint32_t th,
                                              const char *func)
{
	const struct kd_dec_call *c = NULL;

	for (uint32_t i = 0; i < d->ncalls; i++)
		if (d->calls[i].thread == th && kd_is(d, &d->calls[i], func)) {
			if (c)
				fail_msg("%s called more than once", func);
			c = &d->calls[i];
		}
	if (!c)
		fail_msg("no call of %s on thread %u", func, th);
	return c;
}

/* Blocked intervals of thread th overlapping call c of at least min_ns:
 * count, and the longest one.  (Preempted ones are the machine's load.) */
static unsigned offcpu_in_call(const struct kd_dec *d, uint32_t th,
                               const struct kd_dec_call *c, uint64_t min_ns,
                               const struct kd_dec_offcpu **longest)
{
	unsigned n = 0;

	*longest = NULL;
	for (uint32_t i = 0; i < d->noffcpu; i++) {
		const struct kd_dec_offcpu *q = &d->offcpu[i];

		if (q->thread != th || q->end <= c->begin || q->begin >= c->end ||
		    q->why != KD_OFF_BLOCKED)
			continue;
		if (kd_time_ticks_ns(d, q->end - q->begin) < min_ns)
			continue;
		n++;
		if (!*longest || q->end - q->begin > (*longest)->end - (*longest)->begin)
			*longest = q;
	}
	return n;
}

/* Thread tid's call func holds an off-CPU interval of >= min_ns, inside it. */
static void assert_sleep_attributed(const struct kd_dec *d, int tid, const char *func,
                                    uint64_t min_ns)
{
	uint32_t th = kd_thread_tid(d, tid);
	const struct kd_dec_call *c;
	const struct kd_dec_offcpu *q;

	if (th == KD_NONE)
		fail_msg("thread %d not in the snapshot", tid);
	c = the_call(d, th, func);
	if (offcpu_in_call(d, th, c, min_ns, &q) != 1)
		fail_msg("%s on tid %d: expected one off-CPU interval of >= %llu ns", func, tid,
		         (unsigned long long)min_ns);
	if (q->begin < c->begin || q->end > c->end)
		fail_msg("%s on tid %d: off-CPU [%+lld, %+lld] ticks from its entry, call %llu ticks",
		         func, tid, (long long)(q->begin - c->begin), (long long)(q->end - c->begin),
		         (unsigned long long)(c->end - c->begin));
}

/* ---- tests ------------------------------------------------------------------- */

/* A function that sleeps 5 ms contains exactly one off-CPU interval of
 * ~5 ms, inside the call: the switch records are on the rings' clock.
 * (Preempted intervals in its spins are the machine's load, and allowed.) */
static void test_sched_sleep_5ms_is_one_interval_inside_the_call(void **state)
{
	struct run r;
	char path[4352];
	struct kd_dec *d;
	const struct kd_dec_call *c;
	const struct kd_dec_offcpu *q;
	uint32_t th;
	uint64_t ns;

	(void)state;
	run(&r, "sleep5", 0, NULL);
	snapshot_path(&r, "snapshot", 0, NULL, path, sizeof(path));
	d = kd_open(path);
	assert_non_null(d);
	assert_true(d->sched);
	th = kd_thread_tid(d, atoi(strstr(r.p.out, "tid ") + 4));
	assert_int_not_equal(th, KD_NONE);
	c = the_call(d, th, "sleep_5ms");
	/* one blocked interval of more than 1 ms (a page fault or the
	 * library's first-call slow path may block for microseconds) */
	assert_int_equal(offcpu_in_call(d, th, c, 1000000, &q), 1);
	ns = kd_time_ticks_ns(d, q->end - q->begin);
	assert_true(ns >= 4900000);           /* nanosleep sleeps at least 5 ms */
	assert_true(ns <= 500000000);         /* and wakes (a loaded machine is slow) */
	assert_true(q->begin >= c->begin && q->end <= c->end);
	assert_int_equal(q->why, KD_OFF_BLOCKED);
	/* the call's blocked time is that interval, give or take microseconds */
	{
		uint64_t off[2];

		kd_sched_offcpu_in(d, th, c->begin, c->end, off);
		assert_true(kd_time_ticks_ns(d, off[KD_OFF_BLOCKED] - (q->end - q->begin)) <
		            1000000);
	}
	kd_dec_free(d);
	done(&r);
}

/* ~30 ms waiting for a mutex another thread holds while it sleeps:
 * explained as blocked, the waiting function first. */
static void test_sched_blocked_request_explained(void **state)
{
	struct run r;
	char path[4352], line[1024], fn[1024], split[1024];
	char *ex, *st;

	(void)state;
	run(&r, "blocked", 0, NULL);
	snapshot_path(&r, "snapshot", 0, NULL, path, sizeof(path));
	ex = decode("explain", path);
	line_of(ex, "the slow request:", line, sizeof(line));
	if (dur_before(line, " blocked") < 25e6)
		fail_msg("not explained as blocked: %s\n%s", line, ex);
	first_ranked(ex, fn, split, sizeof(split));
	if (!strstr(fn, "wait_for_lock"))
		fail_msg("wait_for_lock is not first:\n%s", ex);
	if (dur_before(split, " blocked") < 25e6)
		fail_msg("wait_for_lock's time is not blocked: %s", split);
	assert_non_null(strstr(ex, "holder/"));    /* meanwhile: the holder */
	line_of(ex, "holder/", line, sizeof(line));
	assert_non_null(strstr(line, "on a cpu"));
	if (dur_before(line, " blocked") < 15e6) /* its 30 ms sleep began before the request */
		fail_msg("the holder did not sleep: %s", line);
	st = decode("stats", path);
	assert_non_null(strstr(st, "per function, on and off the cpu"));
	line_of(st, "scheduling: recorded", line, sizeof(line));
	free(st);
	free(ex);
	done(&r);
}

/* ~30 ms of cpu while a hog shares the core: explained as preempted. */
static void test_sched_preempted_request_explained(void **state)
{
	struct run r;
	char path[4352], line[1024], fn[1024], split[1024];
	char *ex;
	double on, pre;

	(void)state;
	run(&r, "preempt", 0, NULL);
	snapshot_path(&r, "snapshot", 0, NULL, path, sizeof(path));
	ex = decode("explain", path);
	line_of(ex, "the slow request:", line, sizeof(line));
	on = dur_before(line, " on-CPU");
	pre = dur_before(line, " preempted");
	if (pre < 10e6 || pre < dur_before(line, " blocked"))
		fail_msg("not explained as preempted: %s\n%s", line, ex);
	if (on < 25e6 || on > 60e6) /* it needed 30 ms of cpu */
		fail_msg("on-CPU time is not the ~30 ms of cpu: %s", line);
	first_ranked(ex, fn, split, sizeof(split));
	if (!strstr(fn, "compute"))
		fail_msg("compute is not first:\n%s", ex);
	if (dur_before(split, " preempted") < 10e6)
		fail_msg("compute's time is not preempted: %s", split);
	free(ex);
	done(&r);
}

/* The same blocked request with scheduling off, or refused by the kernel:
 * the summary says why, start-up prints nothing, the rest still works. */
static void check_unrecorded(const struct run *r, const char *want)
{
	char path[4352], fn[1024], split[1024], line[1024];
	char *ex;
	struct kt_file kf;
	uint32_t count;

	snapshot_path(r, "snapshot", 0, NULL, path, sizeof(path));
	if (strstr(r->p.err, "ktrace:"))
		fail_msg("the library printed something: %s", r->p.err);
	ex = decode("explain", path);
	line_of(ex, "scheduling:", line, sizeof(line));
	if (strcmp(line, want))
		fail_msg("summary says\n  %s\nnot\n  %s", line, want);
	first_ranked(ex, fn, split, sizeof(split));
	if (!strstr(fn, "wait_for_lock"))
		fail_msg("wait_for_lock is not first:\n%s", ex);
	assert_non_null(strstr(ex, "on-CPU / off-CPU split unknown"));
	assert_int_equal(kt_file_load(path, &kf), 0);
	assert_int_equal(kt_file_info(&kf)->flags & KTRACE_INFO_SCHED, 0);
	assert_non_null(kt_file_section(&kf, KTRACE_SEC_SCHED, &count, NULL));
	assert_int_equal(count, 0);
	kt_file_free(&kf);
	free(ex);
}

static void test_sched_off_says_so(void **state)
{
	static const char *const env[] = { "KTRACE_SCHED=off", NULL };
	struct run r;

	(void)state;
	run(&r, "blocked", 0, env);
	check_unrecorded(&r, "scheduling: not recorded (KTRACE_SCHED=off)");
	done(&r);
}

static void test_sched_refused_says_why(void **state)
{
	static const char *const on[] = { "KTRACE_SCHED=on", NULL };
	struct run r;
	char want[512], buf[32] = "";
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	int par;

	(void)state;
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	par = atoi(buf);
	/* By default a seccomp filter means perf_event_open is not tried
	 * (the filter could kill the process on it: test_e2e_sandbox). */
	run(&r, "blocked", 1, NULL);
	check_unrecorded(&r, "scheduling: not recorded (a seccomp filter is active: "
	                 "perf_event_open was not tried, as a filter may kill the process "
	                 "on it; KTRACE_SCHED=on tries it)");
	done(&r);
	/* Asked for, it is tried, refused, and the reason given fits the
	 * machine's sysctl. */
	if (par <= 2)
		snprintf(want, sizeof(want), "scheduling: not recorded (perf_event_open: EACCES, "
		         "kernel.perf_event_paranoid=%d, which allows it: a seccomp filter or a "
		         "security module (container profile, SELinux, AppArmor) forbids the call "
		         "here)", par);
	else
		snprintf(want, sizeof(want), "scheduling: not recorded (perf_event_open: EACCES, "
		         "kernel.perf_event_paranoid=%d; allow with sysctl "
		         "kernel.perf_event_paranoid=2 or CAP_PERFMON)", par);
	run(&r, "blocked", 1, on);
	check_unrecorded(&r, want);
	done(&r);
}

/* Threads from before start-up (a constructor's), after it, one that
 * exited, and main: each one's sleep is an off-CPU interval inside its
 * own call on its own thread; no perf descriptor stays open. */
static void test_sched_threads_attributed(void **state)
{
	static const char *const env[] = { "E2E_SCHED_EARLY=1", NULL };
	struct run r;
	char path[4352];
	struct kd_dec *d;

	(void)state;
	run(&r, "threads", 0, env);
	snapshot_path(&r, "snapshot", 0, NULL, path, sizeof(path));
	if (!strstr(r.p.out, "perf_fds 0"))
		fail_msg("perf descriptors held:\n%s", r.p.out);
	d = kd_open(path);
	assert_non_null(d);
	assert_true(d->sched);
	assert_sleep_attributed(d, tid_of(&r, "main"), "main_sleep", 9000000);
	assert_sleep_attributed(d, tid_of(&r, "early"), "early_sleep", 9000000);
	assert_sleep_attributed(d, tid_of(&r, "late"), "late_sleep", 9000000);
	assert_sleep_attributed(d, tid_of(&r, "gone"), "gone_sleep", 9000000);
	kd_dec_free(d);
	done(&r);
}

/* Records of a tid in a snapshot's SCHED section. */
static unsigned sched_records_of(const struct kd_dec *d, int tid)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < d->snap.nsched_recs; i++)
		n += d->snap.sched_recs[i].tid == tid;
	return n;
}

/* fork: the child records its own switches into its own file, the parent
 * none of the child's. */
static void test_sched_fork(void **state)
{
	struct run r;
	char cpath[4352], ppath[4352];
	int ctid = 0, ptid = 0;
	struct kd_dec *d;

	(void)state;
	run(&r, "fork", 0, NULL);
	snapshot_path(&r, "child", 1, &ctid, cpath, sizeof(cpath));
	snapshot_path(&r, "parent", 1, &ptid, ppath, sizeof(ppath));
	d = kd_open(cpath);
	assert_non_null(d);
	assert_true(d->sched);
	assert_sleep_attributed(d, ctid, "child_sleep", 9000000);
	assert_int_equal(sched_records_of(d, ptid), 0);
	kd_dec_free(d);
	d = kd_open(ppath);
	assert_non_null(d);
	assert_sleep_attributed(d, ptid, "parent_sleep", 9000000);
	assert_int_equal(sched_records_of(d, ctid), 0);
	kd_dec_free(d);
	done(&r);
}

/* exec: the new image records its own switches. */
static void test_sched_exec(void **state)
{
	struct run r;
	char bpath[4352], apath[4352];
	int btid = 0, atid = 0;
	struct kd_dec *d;

	(void)state;
	run(&r, "exec", 0, NULL);
	snapshot_path(&r, "before", 1, &btid, bpath, sizeof(bpath));
	snapshot_path(&r, "after", 1, &atid, apath, sizeof(apath));
	d = kd_open(bpath);
	assert_non_null(d);
	assert_sleep_attributed(d, btid, "exec_sleep", 9000000);
	kd_dec_free(d);
	d = kd_open(apath);
	assert_non_null(d);
	assert_true(d->sched);
	assert_sleep_attributed(d, atid, "after_exec_sleep", 9000000);
	kd_dec_free(d);
	done(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sched_sleep_5ms_is_one_interval_inside_the_call),
		cmocka_unit_test(test_sched_blocked_request_explained),
		cmocka_unit_test(test_sched_preempted_request_explained),
		cmocka_unit_test(test_sched_off_says_so),
		cmocka_unit_test(test_sched_refused_says_why),
		cmocka_unit_test(test_sched_threads_attributed),
		cmocka_unit_test(test_sched_fork),
		cmocka_unit_test(test_sched_exec),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
