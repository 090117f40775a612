/*
 * test_e2e_lean.c - the lean mode end to end (lib/lean.c, docs/lean.md):
 * programs compiled with -p -mfentry -minstrument-return=call run, take a
 * snapshot, and the decoder's calls are checked against what they did.
 *
 *   calls_*     PIE, non-PIE, static: exact counts and parents; the
 *               arguments and results the trampolines must keep (floats,
 *               varargs, a struct in memory) are checked by the program.
 *   pg_link     linked with the lean flags too (-p: gprof's gcrt1.o):
 *               no SIGPROF timer, no gmon.out, the same calls; compiled
 *               with -fomit-frame-pointer too (which -pg refuses).
 *   gprof_kept  a gprof build (-pg, mcount) with ktrace linked in keeps
 *               its profile (gmon.out).
 *   mixed       one file in the default mode, the rest lean: calls across
 *               the two, exact counts and parents (the default mode's
 *               hooks look for lean code at each new function).
 *   both        compiled with -finstrument-functions and the lean flags
 *               at once: every call recorded once (the lean hooks), also
 *               a function whose inlined copy calls the default mode's
 *               hooks before its own code ever ran.
 *   longjmp     50 frames left by longjmp are closed before the next call
 *               (after_jump under catcher, work under main): no exit lost.
 *   tail        sibling calls: GCC calls __return__ before the jump, so the
 *               callee runs as the caller's sibling; exact counts.
 *   dlopen      a lean shared library loaded at run time.
 *   cxx         C++ exceptions through three frames and a destructor.
 *   exclude     KTRACE_EXCLUDE=leaf: never recorded, its entry patched out.
 *   filter_off  KTRACE_FILTER=off: every call recorded, nothing patched.
 *   budget      default settings under load: the budget mutes, the muted
 *               function is patched out, the nesting stays exact.
 *   wx          writable code forbidden (MDWE or seccomp): nothing patched,
 *               the hook mutes instead, said once on stderr and in the
 *               snapshot.
 *   wxburst     wx, then burst: the hooks count the muted calls they skip.
 *   wxthreads   wxburst, then threads that skip to the end: counted at exit.
 *   tsync       a seccomp filter with TSYNC after start that kills on the
 *               calls ktrace makes for its own ends: the program lives.
 *   tsynclate   the same right after a patched burst: no code left writable.
 *   flip        8 threads run while every site is patched out and in 25
 *               times: no crash, no exit lost, exact counts after.
 *   storm       6 threads call lean functions while main signals them every
 *               ~5 us and the handler calls lean functions too: the
 *               hooks' restartable sequences (record.c) abort and restart
 *               under signals and preemption; exact counts and parents.
 *   cache_ways  (static build) two functions sharing a first cache slot:
 *               few slow entries, and learning exits through known sites
 *               on the fast path; a function's calls after its learning
 *               ones take the fast path; counts and parents exact.
 *   nested_exit (static build) a call whose exit comes to the slow path
 *               while the thread is in it (a signal handler interrupting
 *               the library): its frame still goes (the lean stack's depth
 *               after it is what it was before), its exit recorded; the
 *               calls after it under main, not under it.
 *   held        a function patched out while four recorded calls of it
 *               are open: its exits followed by a ret jump to a stub that
 *               calls __return__ only when a recorded frame may be there
 *               (lib/lean.c, STUBS); 300,000 calls through three exit
 *               sites (two followed by a ret, a sibling call's), exact
 *               results, the open calls' exits recorded when they
 *               happened, counts exact after the sites came back in.
 *   reload      a lean library unloaded and another loaded at its place
 *               while the first one's code is kept writable: no crash,
 *               both patched, exact counts.
 *   fork_reload a lean library unloaded while ktrace keeps its code
 *               writable, read+write memory mapped at its place, then a
 *               fork: the child can write that memory (the fork handler
 *               made every open range read+exec, whatever lay there now).
 *   fork_nofd   the same fork with no descriptor left for the child's
 *               handler to read /proc/self/maps: every open range goes
 *               back to read+exec as before (it stayed writable).
 *   lld         linked by lld (a code segment not at a page's start): the
 *               code read+exec again after the batch.
 *   late exits  excluded functions whose first calls took one return and
 *               later ones another (called directly, and through a
 *               pointer) stop calling __return__ there: the sampled
 *               frameless returns learned those sites.
 * Skipped where there is no lean mode (not x86-64, or under an emulator).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kd_time.h"
#include "kdec.h"
#include "ktest.h"

#define BIN KTRACE_TEST_BINARY_DIR "/"

static int no_lean(void)
{
#if defined(__x86_64__)
	return getenv("KTRACE_TEST_EMULATOR") != NULL || access(BIN "e2e_lean", X_OK) != 0;
#else
	return 1;
#endif
}

struct run {
	char dir_path[4096];
	char *dir;
	char path[4400];
	struct kt_proc p;
	struct kd_dec *d;
	uint32_t th;
};

/* Run prog mode with extra environment (NULL-terminated), in a new
 * directory r->dir (its KTRACE_DIR and working directory); decode its
 * snapshot into r->d (main thread r->th). */
static void run_va(struct run *r, char *const argv[], va_list ap)
{
	char envdir[300], line[4600], fmt[32];
	const char *env[16] = { envdir, NULL };
	const char *prog = argv[0], *mode = argv[1];
	struct kt_spawn_opts o = { 0 };
	int n = 1, rc;
	const char *e;

	memset(r, 0, sizeof(*r));
	r->dir = kt_mkdtemp("lean");
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", r->dir);
	while ((e = va_arg(ap, const char *)) != NULL && n < 15)
		env[n++] = e;
	env[n] = NULL;
	snprintf(fmt, sizeof(fmt), "snapshot %%d %%%zus", sizeof(r->path) - 1);
	o.cwd = r->dir;
	assert_int_equal(kt_spawn(&r->p, argv, env, &o), 0);
	if (kt_expect_line(&r->p, "snapshot ", line, sizeof(line), 60000) != 0) {
		kt_wait(&r->p, 5000);
		fail_msg("%s %s: no snapshot line (status %#x, signal %d); stdout:\n%s\nstderr:\n%s",
		         prog, mode, r->p.status, WIFSIGNALED(r->p.status) ? WTERMSIG(r->p.status) : 0,
		         r->p.out, r->p.err);
	}
	assert_int_equal(sscanf(line, fmt, &rc, r->path), 2);
	assert_int_equal(rc, 0);
	if (kt_wait(&r->p, 60000) != 0)
		fail_msg("%s %s: status %#x, stdout:\n%s\nstderr:\n%s", prog, mode, r->p.status,
		         r->p.out, r->p.err);
	r->d = kd_open(r->path);
	assert_non_null(r->d);
	r->th = kd_thread_tid(r->d, r->p.pid);
	assert_int_not_equal(r->th, KD_NONE);
}

static void run(struct run *r, const char *prog, const char *mode, ...)
{
	char *argv[] = { (char *)prog, (char *)mode, NULL };
	va_list ap;

	va_start(ap, mode);
	run_va(r, argv, ap);
	va_end(ap);
}

/* The same, started by e2e_launch under a seccomp filter (how: its
 * --seccomp argument); prog execs in the launcher's process. */
static void run_sandboxed(struct run *r, const char *how, const char *prog, const char *mode,
                          ...)
{
	char *argv[] = { BIN "e2e_launch", (char *)"--seccomp", (char *)how, (char *)prog,
		         (char *)mode, NULL };
	va_list ap;

	va_start(ap, mode);
	run_va(r, argv, ap);
	va_end(ap);
}

static void done(struct run *r)
{
	kd_dec_free(r->d);
	kt_proc_free(&r->p);
	kt_rmtree(r->dir);
	free(r->dir);
}

static const char *parent_name(const struct kd_dec *d, const struct kd_dec_call *c)
{
	return c->parent < d->ncalls ? kd_func(d, &d->calls[c->parent]) : "(none)";
}

/* Every call of func on thread th (KD_NONE: any) has a parent named one of
 * the '|'-separated names ("(none)": no parent). */
static void parents(const struct kd_dec *d, uint32_t th, const char *func, const char *names)
{
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		char want[256];
		const char *pn;
		int ok = 0;

		if ((th != KD_NONE && c->thread != th) || !kd_is(d, c, func))
			continue;
		pn = parent_name(d, c);
		snprintf(want, sizeof(want), "%s", names);
		for (char *t = strtok(want, "|"); t; t = strtok(NULL, "|"))
			ok |= strcmp(t, pn) == 0;
		if (!ok)
			fail_msg("%s called under %s, expected %s", func, pn, names);
	}
}

static uint32_t info_flags(const struct run *r)
{
	return r->d->snap.info.flags;
}

/* Is there a gmon.out (gprof's profile, written at exit) in r's directory? */
static int has_gmon(const struct run *r)
{
	char p[4200];

	snprintf(p, sizeof(p), "%s/gmon.out", r->dir);
	return access(p, F_OK) == 0;
}

static void check_calls(const char *prog)
{
	struct run r;

	if (no_lean())
		skip();
	run(&r, prog, "calls", "KTRACE_QUIET=1", NULL);
	assert_non_null(strstr(r.p.out, "calls s="));
	/* no gprof: not even when linked with -pg (e2e_lean_pglink) */
	assert_non_null(strstr(r.p.out, " prof=0"));
	assert_false(has_gmon(&r));
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "run"), 1);
	assert_int_equal(kd_count(r.d, r.th, "outer"), 20);
	assert_int_equal(kd_count(r.d, r.th, "inner"), 100);
	assert_int_equal(kd_count(r.d, r.th, "fp"), 1);
	assert_int_equal(kd_count(r.d, r.th, "vargs"), 1);
	assert_int_equal(kd_count(r.d, r.th, "big"), 1);
	assert_int_equal(kd_count(r.d, r.th, "rec"), 10);
	assert_int_equal(kd_count(r.d, r.th, "main"), 1);
	parents(r.d, r.th, "inner", "outer");
	parents(r.d, r.th, "outer", "run");
	parents(r.d, r.th, "run", "main");
	parents(r.d, r.th, "rec", "rec|main");
	parents(r.d, r.th, "fp", "main");
	assert_true(info_flags(&r) & KTRACE_INFO_LEAN);
	assert_false(info_flags(&r) & KTRACE_INFO_LEAN_NO_PATCH);
	/* the LEAN section: main, run, outer, inner, fp, vargs, big, rec
	 * seen at least; no function in both modes */
	assert_true(r.d->snap.have_lean);
	assert_true(r.d->snap.lean.funcs >= 8);
	assert_false(r.d->snap.lean.flags & KTRACE_LEAN_BOTH_MODES);
	done(&r);
}

static void test_e2e_lean_calls_pie(void **state) { (void)state; check_calls(BIN "e2e_lean"); }
static void test_e2e_lean_calls_nopie(void **state) { (void)state; check_calls(BIN "e2e_lean_nopie"); }
static void test_e2e_lean_calls_static(void **state) { (void)state; check_calls(BIN "e2e_lean_static"); }
/* Compiled and linked with the lean flags in one step: -p at the link
 * starts the program with gprof's gcrt1.o, whose SIGPROF timer and
 * gmon.out lib/gprof.c keeps away (check_calls: "prof=0", no gmon.out). */
static void test_e2e_lean_pg_link(void **state) { (void)state; check_calls(BIN "e2e_lean_pglink"); }

/* A gprof build (-pg without -mfentry: its code calls mcount) of the
 * same program in the default mode: ktrace linked in leaves gprof as it
 * was (its timer runs, gmon.out is written) and traces as ever. */
static void test_e2e_lean_gprof_kept(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_gprof", "calls", "KTRACE_QUIET=1", NULL);
	assert_non_null(strstr(r.p.out, " prof=1"));
	assert_true(has_gmon(&r));
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "outer"), 20);
	assert_int_equal(kd_count(r.d, r.th, "inner"), 100);
	assert_false(info_flags(&r) & KTRACE_INFO_LEAN);
	done(&r);
}

/* The "inl" mode: twice() inlined into via_inline (100 calls, which only
 * -finstrument-functions sees) and called out of line 7 times. */
static void check_inl(const char *prog, int twice_calls)
{
	struct run r;

	run(&r, prog, "inl", "KTRACE_QUIET=1", "KTRACE_FILTER=off", NULL);
	assert_non_null(strstr(r.p.out, "inl s="));
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "main"), 1);
	assert_int_equal(kd_count(r.d, r.th, "via_inline"), 100);
	assert_int_equal(kd_count(r.d, r.th, "twice"), twice_calls);
	parents(r.d, r.th, "via_inline", "do_inl|main");
	parents(r.d, r.th, "twice", twice_calls == 7 ? "do_inl|main" : "do_inl|main|via_inline");
	done(&r);
}

static void test_e2e_lean_mixed(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_mixed", "modes", "KTRACE_QUIET=1", "KTRACE_FILTER=off", NULL);
	assert_non_null(strstr(r.p.out, "modes s="));
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "mixed_outer"), 50);
	assert_int_equal(kd_count(r.d, r.th, "mixed_fi_run"), 50);
	assert_int_equal(kd_count(r.d, r.th, "mixed_leaf"), 500);
	assert_int_equal(kd_count(r.d, r.th, "lean_cb"), 500);
	parents(r.d, r.th, "mixed_fi_run", "mixed_outer");
	parents(r.d, r.th, "mixed_leaf", "mixed_fi_run");
	parents(r.d, r.th, "lean_cb", "mixed_fi_run");
	assert_true(r.d->snap.have_lean);
	assert_false(r.d->snap.lean.flags & KTRACE_LEAN_BOTH_MODES);
	done(&r);
}

static void test_e2e_lean_both(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	/* each mode alone, then both at once */
	check_inl(BIN "e2e_lean", 7);
	check_inl(BIN "e2e_lean_fi", 107);
	check_inl(BIN "e2e_lean_both", 7);
	/* as check_calls, but GCC inlines less with both: do_calls stays a
	 * function here (recorded once, by the lean hooks) */
	run(&r, BIN "e2e_lean_both", "calls", "KTRACE_QUIET=1", "KTRACE_FILTER=off", NULL);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "main"), 1);
	assert_true(kd_count(r.d, r.th, "do_calls") <= 1);
	assert_int_equal(kd_count(r.d, r.th, "run"), 1);
	assert_int_equal(kd_count(r.d, r.th, "outer"), 20);
	assert_int_equal(kd_count(r.d, r.th, "inner"), 100);
	assert_int_equal(kd_count(r.d, r.th, "rec"), 10);
	assert_int_equal(kd_count(r.d, r.th, "fp"), 1);
	parents(r.d, r.th, "inner", "outer");
	parents(r.d, r.th, "outer", "run");
	parents(r.d, r.th, "run", "do_calls|main");
	parents(r.d, r.th, "rec", "rec|do_calls|main");
	assert_true(info_flags(&r) & KTRACE_INFO_LEAN);
	assert_true(r.d->snap.have_lean);
	assert_true(r.d->snap.lean.flags & KTRACE_LEAN_BOTH_MODES);
	done(&r);
}

static void test_e2e_lean_longjmp(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "longjmp", "KTRACE_QUIET=1", NULL);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "dive"), 50);
	assert_int_equal(kd_count(r.d, r.th, "catcher"), 1);
	assert_int_equal(kd_count(r.d, r.th, "after_jump"), 1);
	assert_int_equal(kd_count(r.d, r.th, "work"), 10);
	assert_int_equal(kd_count_flags(r.d, KD_CALL_EXIT_LOST), 0);
	parents(r.d, r.th, "dive", "dive|catcher");
	parents(r.d, r.th, "after_jump", "catcher");
	parents(r.d, r.th, "work", "main");
	parents(r.d, r.th, "catcher", "main");
	done(&r);
}

static void test_e2e_lean_tail(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "tail", "KTRACE_QUIET=1", NULL);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "tail_a"), 7);
	assert_int_equal(kd_count(r.d, r.th, "tail_b"), 7);
	assert_int_equal(kd_count(r.d, r.th, "tail_c"), 7);
	parents(r.d, r.th, "tail_a", "main");
	/* (no sibling call in a TSan build: nested) */
	parents(r.d, r.th, "tail_b", "main|tail_a");
	parents(r.d, r.th, "tail_c", "main|tail_b");
	done(&r);
}

static void test_e2e_lean_dlopen(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "dlopen", "KTRACE_QUIET=1", NULL);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "plugin_outer"), 100);
	assert_int_equal(kd_count(r.d, r.th, "plugin_inner"), 300);
	parents(r.d, r.th, "plugin_outer", "main");
	parents(r.d, r.th, "plugin_inner", "plugin_outer");
	done(&r);
}

static void test_e2e_lean_cxx(void **state)
{
	struct run r;

	(void)state;
	if (no_lean() || access(BIN "e2e_lean_cxx", X_OK) != 0)
		skip();
	run(&r, BIN "e2e_lean_cxx", "", "KTRACE_QUIET=1", NULL);
	assert_non_null(strstr(r.p.out, "caught 5"));
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count_flags(r.d, KD_CALL_EXIT_LOST), 0);
	assert_int_equal(kd_count(r.d, r.th, "thrower(int)"), 5);
	assert_int_equal(kd_count(r.d, r.th, "level1(int)"), 5);
	assert_int_equal(kd_count(r.d, r.th, "level2(int)"), 5);
	assert_int_equal(kd_count(r.d, r.th, "level3(int)"), 5);
	assert_int_equal(kd_count(r.d, r.th, "Guard::~Guard()"), 5);
	assert_int_equal(kd_count(r.d, r.th, "after_catch()"), 5);
	parents(r.d, r.th, "level3(int)", "level2(int)");
	parents(r.d, r.th, "level2(int)", "level1(int)");
	parents(r.d, r.th, "Guard::~Guard()", "level2(int)");
	parents(r.d, r.th, "thrower(int)", "main");
	parents(r.d, r.th, "after_catch()", "main");
	done(&r);
}

/* The first byte of leaf's entry site, as the program printed it. */
static unsigned leaf_site(const struct run *r)
{
	const char *s = strstr(r->p.out, "leaf-site ");
	unsigned b = 0;

	assert_non_null(s);
	assert_int_equal(sscanf(s, "leaf-site %x", &b), 1);
	return b;
}

static int is_call(unsigned b) { return b == 0xff || b == 0xe8 || b == 0x67; }

static void test_e2e_lean_exclude(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "count", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=leaf", NULL);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "mid"), 20000);
	assert_int_equal(kd_count(r.d, r.th, "leaf"), 0);
	assert_int_equal(kd_count(r.d, r.th, "marker"), 5);
	parents(r.d, r.th, "mid", "do_count");
	parents(r.d, r.th, "marker", "do_count");
	assert_false(is_call(leaf_site(&r)));   /* patched out */
	/* and the code read+exec again, 300 ms after the batch (LINGER) */
	assert_non_null(strstr(r.p.out, "writable-code 0\n"));
	done(&r);
}

/* The run's one batch took the excluded function's two sites out (its
 * entry and its one exit), as the static build printed them. */
static void expect_one_batch_of_two(const struct run *r)
{
	const char *s = strstr(r->p.out, "batches ");
	unsigned long long b = 0, nop = 0;

	assert_non_null(s);
	assert_int_equal(sscanf(s, "batches %llu nop %llu", &b, &nop), 2);
	assert_int_equal(nop, 2);
	assert_int_equal(b, 1);
}

/* An excluded function is never recorded, so its exits need not wait a
 * batch after its entry (lean.c, EXITS_AFTER, quiet()): leaf's entry and
 * its exit go out together, in the one batch of the run. */
static void test_e2e_lean_exclude_one_batch(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_static", "count", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=leaf", NULL);
	assert_int_equal(kd_count(r.d, r.th, "mid"), 20000);
	assert_int_equal(kd_count(r.d, r.th, "leaf"), 0);
	assert_false(is_call(leaf_site(&r)));
	expect_one_batch_of_two(&r);
	/* and the snapshot's LEAN section says the same */
	assert_true(r.d->snap.have_lean);
	assert_int_equal(r.d->snap.lean.nop_sites, 2);
	assert_int_equal(r.d->snap.lean.funcs_out, 1);
	assert_int_equal(r.d->snap.lean.site_writes, 2);
	assert_int_equal(r.d->snap.lean.batches, 1);
	assert_int_equal(r.d->snap.lean.site_failures, 0);
	assert_true(r.d->snap.lean.funcs >= 4);   /* main, do_count, mid, leaf */
	done(&r);
}

/* The same when the writer finds the last learning call of the excluded
 * function still open (each call sleeps 2 ms): its frames are never
 * recorded, so the exit still goes out with the entry. */
static void test_e2e_lean_exclude_open_learning(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_static", "slowleaf", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=slow_leaf", NULL);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "slow_leaf"), 0);
	assert_int_equal(kd_count(r.d, r.th, "marker"), 5);
	parents(r.d, r.th, "marker", "do_slowleaf");
	expect_one_batch_of_two(&r);
	done(&r);
}

static void test_e2e_lean_filter_off(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_nopie", "count", "KTRACE_QUIET=1", "KTRACE_FILTER=off", NULL);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "mid"), 20000);
	assert_int_equal(kd_count(r.d, r.th, "leaf"), 200000);
	parents(r.d, r.th, "leaf", "mid");
	assert_true(is_call(leaf_site(&r)));   /* nothing patched */
	assert_false(r.d->snap.info.flags & KTRACE_INFO_FILTER);
	assert_true(r.d->snap.have_lean);
	assert_int_equal(r.d->snap.lean.nop_sites, 0);
	assert_int_equal(r.d->snap.lean.funcs_out, 0);
	assert_int_equal(r.d->snap.lean.site_writes, 0);
	done(&r);
}

static void test_e2e_lean_budget(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "hot", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=1", NULL);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count_flags(r.d, KD_CALL_EXIT_LOST), 0);
	assert_int_equal(kd_count(r.d, r.th, "marker"), 5);
	parents(r.d, r.th, "marker", "main|(none)");   /* main's entry may be overwritten */
	parents(r.d, r.th, "leaf", "mid");
	parents(r.d, r.th, "mid", "hot_loop|(none)");
	assert_false(is_call(leaf_site(&r)));   /* muted, patched out */
	done(&r);
}

/* EARLY (lean.c): a mute that comes within a batch gap of the last batch
 * takes its functions' entries out at once, in a pass that takes no exit
 * out; the exits wait for a full pass a gap or more later.  16 hot phases
 * make ~16 mutes, some of them early; every call still nests exactly. */
static void test_e2e_lean_early_pass(void **state)
{
	unsigned long long early = 0;

	(void)state;
	if (no_lean())
		skip();
	/* Whether a mute comes within a gap of the last batch is timing: a
	 * run has none about one time in eight (old and new paths alike,
	 * 16 runs each).  Up to three runs, each checked in full, until one
	 * has an early pass. */
	for (int run_i = 0; run_i < 3 && early == 0; run_i++) {
		struct run r;
		const char *e;

		run(&r, BIN "e2e_lean_static", "phases", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=1", NULL);
		assert_non_null(e = strstr(r.p.out, "early passes "));
		assert_int_equal(sscanf(e, "early passes %llu", &early), 1);
		print_message("early passes: %llu\n", early);
		assert_int_equal(r.d->lost_exits, 0);
		assert_int_equal(kd_count_flags(r.d, KD_CALL_EXIT_LOST), 0);
		assert_int_equal(kd_count(r.d, r.th, "marker"), 5);
		parents(r.d, r.th, "marker", "main|(none)");
		parents(r.d, r.th, "phase", "main|(none)");
		for (int k = 0; k < 16; k++) {
			char leaf[16], mid[16], want[32];

			snprintf(leaf, sizeof(leaf), "ph_leaf%d", k);
			snprintf(mid, sizeof(mid), "ph_mid%d", k);
			/* Muted in one decision, a mid and its leaf go out in
			 * one batch, whose sites are written one after
			 * another: a call of the mid that starts between its
			 * entry's write and the leaf's records its leaf calls
			 * under phase (exact for what is recorded; one mid
			 * call, ~2 us, seen under TSan in 3 of 15 runs of the
			 * program).  Never under another phase's mid. */
			snprintf(want, sizeof(want), "%s|phase", mid);
			parents(r.d, r.th, leaf, want);
			parents(r.d, r.th, mid, "phase|(none)");
		}
		done(&r);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
		/* (a sanitized library's writer decides and patches at its
		 * own pace: one run, no count asked) */
		early = early ? early : 1;
#endif
	}
	assert_true(early >= 1);
}

/* A burst run (lean_prog.c) nested exactly on its main thread: its five
 * markers, no exit lost, leaf always under mid. */
static void burst_nests(const struct run *r)
{
	assert_int_equal(kd_count(r->d, r->th, "marker"), 5);
	assert_int_equal(r->d->lost_exits, 0);
	assert_int_equal(kd_count_flags(r->d, KD_CALL_EXIT_LOST), 0);
	parents(r->d, r->th, "leaf", "mid");
}

/* The CPU side of the budget (filter.c, KTRACE_CPU_PCT): a burst of 1.1 M
 * calls (2.2 M words, tens of ms) fits a quarter of a 64 MiB ring, so the
 * window mutes nothing, but it takes far more than 2 % of the core: in the
 * lean mode the budget mutes its hot function within the burst (and the
 * nesting stays exact); with KTRACE_CPU_PCT=0 every call is there. */
static void test_e2e_lean_cpu_budget(void **state)
{
	struct run r, q;
	uint64_t n = 0;
	const char *b;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "burst", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=64", NULL);
	assert_non_null(b = strstr(r.p.out, "burst "));
	n = strtoull(b + 6, NULL, 10);
	assert_true(n > 0);
	assert_true(kd_muted(r.d, "leaf") != NULL);
	assert_true(kd_count(r.d, r.th, "leaf") < 10 * n);
	burst_nests(&r);
	done(&r);
	run(&q, BIN "e2e_lean", "burst", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=64", "KTRACE_CPU_PCT=0",
	    NULL);
	assert_non_null(b = strstr(q.p.out, "burst "));
	n = strtoull(b + 6, NULL, 10);
	assert_false(kd_muted(q.d, "leaf") != NULL);
	assert_false(kd_muted(q.d, "mid") != NULL);
	assert_int_equal(kd_count(q.d, q.th, "mid"), n);
	assert_int_equal(kd_count(q.d, q.th, "leaf"), 10 * n);
	assert_int_equal(q.d->lost_exits, 0);
	done(&q);
}

/* A hot function with a 10 us call 1 in 20 is never muted by the window's
 * rule, but the CPU budget mutes it (KTRACE_MUTE_HOT_CPU) in the lean mode;
 * not with KTRACE_CPU_PCT=0. */
static void test_e2e_lean_cpu_budget_long_calls(void **state)
{
	const struct ktrace_muted_rec *m;
	struct run r, q;

	(void)state;
	if (no_lean())
		skip();
	/* 1 %: the margin does not depend on how fast this machine reads
	 * its clock (what an event costs) or on other load on the core */
	run(&r, BIN "e2e_lean", "mixed", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=64", "KTRACE_CPU_PCT=1",
	    NULL);
	assert_non_null(strstr(r.p.out, "mixed 200000"));
	assert_non_null(m = kd_muted(r.d, "mixed"));
	assert_int_equal(m->why, KTRACE_MUTE_HOT_CPU);
	assert_int_equal(kd_count(r.d, r.th, "marker"), 5);
	assert_int_equal(r.d->lost_exits, 0);
	parents(r.d, r.th, "leaf", "mixed|main");   /* main once mixed is muted */
	done(&r);
	run(&q, BIN "e2e_lean", "mixed", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=64", "KTRACE_CPU_PCT=0",
	    NULL);
	assert_null(kd_muted(q.d, "mixed"));
	assert_int_equal(kd_count(q.d, q.th, "mixed"), 200000);
	done(&q);
}

/* Tracing off (KTRACE_ENABLE=0): the lean hooks return at once and the
 * program runs as it would untraced. */
static void test_e2e_lean_disabled(void **state)
{
	char *argv[] = { BIN "e2e_lean", "count", NULL };
	const char *env[] = { "KTRACE_ENABLE=0", NULL };
	struct kt_proc p;
	const char *s;
	unsigned b = 0;

	(void)state;
	if (no_lean())
		skip();
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	kt_wait(&p, 60000);   /* exit 1: ktrace_snapshot fails, tracing is off */
	assert_true(WIFEXITED(p.status));
	assert_non_null(strstr(p.out, "count 1800000"));
	assert_non_null(s = strstr(p.out, "leaf-site "));
	assert_int_equal(sscanf(s, "leaf-site %x", &b), 1);
	assert_true(is_call(b));   /* nothing patched */
	assert_non_null(strstr(p.out, "snapshot -"));
	kt_proc_free(&p);
}

static void test_e2e_lean_wx(void **state)
{
	struct run r, q;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "wx", "KTRACE_FILTER=off", "KTRACE_EXCLUDE=leaf", NULL);
	assert_true(strstr(r.p.out, "wx mdwe") || strstr(r.p.out, "wx seccomp"));
	assert_int_equal(kt_count_str(r.p.err, "cannot make code writable"), 1);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "mid"), 20000);
	assert_int_equal(kd_count(r.d, r.th, "leaf"), 0);   /* muted in the hook */
	assert_true(is_call(leaf_site(&r)));                /* not patched */
	assert_true(info_flags(&r) & KTRACE_INFO_LEAN_NO_PATCH);
	done(&r);
	/* KTRACE_QUIET: the snapshot says it, stderr does not. */
	run(&q, BIN "e2e_lean_nopie", "wx", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=leaf", NULL);
	assert_int_equal(kt_count_str(q.p.err, "cannot make code writable"), 0);
	assert_true(info_flags(&q) & KTRACE_INFO_LEAN_NO_PATCH);
	assert_int_equal(kd_count(q.d, q.th, "leaf"), 0);
	done(&q);
}

/* Every call of leaf and mid (n in all, on thread th or any: KD_NONE)
 * recorded or counted as skipped, but for the last ones a thread skipped
 * after its last look at the mute set and before its exit: none in the
 * programs here (within 1 %). */
static void all_counted(const struct run *r, uint32_t th, uint64_t n, const char *what)
{
	uint64_t rec = kd_count(r->d, th, "leaf") + kd_count(r->d, th, "mid");
	uint64_t skipped = r->d->snap.budget.muted_calls;

	if (rec + skipped < n - n / 100 || rec + skipped > n)
		fail_msg("%s: %" PRIu64 " calls, %" PRIu64 " recorded, %" PRIu64
		         " counted as skipped", what, n, rec, skipped);
}

/* W^X and the budget: the function it mutes keeps calling the hooks,
 * which skip it and count the calls skipped, as the default mode's hooks
 * do (the summary said "0 calls skipped since" while the hooks skipped
 * hundreds of thousands). */
static void test_e2e_lean_wx_budget_counts(void **state)
{
	struct run r;
	uint64_t n;
	const char *b;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "wxburst", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=64", NULL);
	assert_true(strstr(r.p.out, "wx mdwe") || strstr(r.p.out, "wx seccomp"));
	assert_true(info_flags(&r) & KTRACE_INFO_LEAN_NO_PATCH);
	assert_non_null(b = strstr(r.p.out, "burst "));
	n = strtoull(b + 6, NULL, 10);
	assert_true(kd_muted(r.d, "leaf") != NULL);
	assert_true(is_call(leaf_site(&r)));   /* not patched */
	all_counted(&r, r.th, 11 * n, "leaf and mid");
	assert_int_equal(r.d->lost_exits, 0);
	parents(r.d, r.th, "leaf", "mid");
	done(&r);
	/* threads that skip muted calls to the end and exit: counted at exit */
	run(&r, BIN "e2e_lean", "wxthreads", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=64", NULL);
	assert_non_null(b = strstr(r.p.out, "burst "));
	n = 11 * strtoull(b + 6, NULL, 10);
	assert_non_null(b = strstr(r.p.out, "wxthreads "));
	n += 11 * strtoull(b + 10, NULL, 10);
	all_counted(&r, KD_NONE, n, "wxthreads");
	done(&r);
}

/*
 * A program that puts a seccomp filter on all its threads (TSYNC) once
 * running, one that kills the process on the calls ktrace makes for its
 * own ends only (sandbox.c): it lives, in both modes.  The lean mode
 * patches nothing more, says so once and in the snapshot, and its hooks
 * skip the muted function; the nesting is exact.  (Before: SIGSYS, by the
 * writer's hand.)
 */
static void test_e2e_lean_tsync_sandbox(void **state)
{
	struct run r, q;
	uint64_t n;
	const char *b;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "tsync", "KTRACE_BUFFER_MB=64", NULL);
	assert_non_null(strstr(r.p.out, "tsync on"));
	assert_int_equal(kt_count_str(r.p.err, "put a seccomp filter on all its threads"), 1);
	assert_true(info_flags(&r) & KTRACE_INFO_LEAN_NO_PATCH);
	assert_non_null(b = strstr(r.p.out, "burst "));
	n = strtoull(b + 6, NULL, 10);
	assert_true(kd_muted(r.d, "leaf") != NULL);
	assert_true(is_call(leaf_site(&r)));   /* not patched */
	assert_true(kd_count(r.d, r.th, "leaf") < 10 * n);
	assert_true(r.d->snap.budget.muted_calls > 0);
	burst_nests(&r);
	done(&r);
	/* the same program built with -finstrument-functions */
	run(&q, BIN "e2e_lean_fi", "tsync", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=64", NULL);
	assert_non_null(strstr(q.p.out, "tsync on"));
	assert_int_equal(kd_count(q.d, q.th, "marker"), 5);
	assert_int_equal(q.d->lost_exits, 0);
	done(&q);
	/* the filter right after the writer patched (the code it keeps
	 * writable a while after a batch is closed first), a second burst */
	run(&r, BIN "e2e_lean", "tsynclate", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=64", NULL);
	assert_non_null(strstr(r.p.out, "tsync on"));
	assert_non_null(strstr(r.p.out, "after 0\n"));
	burst_nests(&r);
	done(&r);
}

/* The last "code-copied <private kB> <size kB>" line of out. */
static void code_copied(const char *out, long *anon, long *size)
{
	const char *s = NULL, *q = out;

	while ((q = strstr(q, "code-copied ")) != NULL)
		s = q++;
	assert_non_null(s);
	assert_int_equal(sscanf(s, "code-copied %ld %ld", anon, size), 2);
}

/* out says all of the executable's code was copied at start (what: the
 * program, for the message). */
static void all_copied(const char *out, const char *what)
{
	long anon, size;

	code_copied(out, &anon, &size);
	if (size <= 0 || anon != size)
		fail_msg("%s: %ld kB of %ld kB of code copied at start", what, anon, size);
}

/* out says none of it was. */
static void none_copied(const char *out)
{
	long anon, size;

	code_copied(out, &anon, &size);
	assert_true(size > 0);
	assert_int_equal(anon, 0);
}

/* PRECOPY (lean.c): a lean executable's code is copied at init, while it
 * has one thread (no copy-on-write interrupts later), whichever way main
 * calls __fentry__ (GOT slot, direct, PLT bound at load); not with the
 * filter off (nothing is patched out), not under a seccomp filter, not a
 * default build's. */
static void test_e2e_lean_precopy(void **state)
{
	const char *progs[] = {BIN "e2e_lean", BIN "e2e_lean_static", BIN "e2e_lean_lld",
	                       BIN "e2e_lean_nopie_now"};
	char *argv[] = {(char *)BIN "e2e_lean_fi", (char *)"count", NULL};
	const char *env[] = {"KTRACE_QUIET=1", "KTRACE_DIR=/nonexistent", NULL};
	struct kt_proc p;
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		if (access(progs[i], X_OK) != 0)
			continue;   /* no lld */
		run(&r, progs[i], "count", "KTRACE_QUIET=1", NULL);
		all_copied(r.p.out, progs[i]);
		assert_non_null(strstr(r.p.out, "count 1800000"));
		assert_non_null(strstr(r.p.out, "writable-code 0\n"));
		done(&r);
	}
	/* main calls __fentry__ through a PLT entry bound lazily: ktrace
	 * cannot tell at start-up (docs/lean.md) */
	run(&r, BIN "e2e_lean_nopie", "count", "KTRACE_QUIET=1", NULL);
	none_copied(r.p.out);
	done(&r);
	/* under a seccomp filter the copy is not tried */
	run(&r, BIN "e2e_lean_static", "seccompexec", "KTRACE_QUIET=1", NULL);
	none_copied(r.p.out);
	assert_non_null(strstr(r.p.out, "count 1800000"));
	done(&r);
	run(&r, BIN "e2e_lean", "count", "KTRACE_QUIET=1", "KTRACE_FILTER=off", NULL);
	none_copied(r.p.out);
	done(&r);
	/* the same program built with -finstrument-functions */
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	kt_wait(&p, 60000);
	none_copied(p.out);
	kt_proc_free(&p);
}

/* A segment both writable and executable (a section flagged "awx" makes
 * the data segment RWX) keeps its write access: neither the copy at
 * start-up nor a batch puts it back to read+exec (the program wrote its
 * data before it crashed that way); the read+exec code is copied and
 * patched as usual. */
static void test_e2e_lean_rwx_segment(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_rwx", "count", "KTRACE_QUIET=1", "KTRACE_EXCLUDE=leaf", NULL);
	assert_non_null(strstr(r.p.out, "wtext c3"));
	assert_non_null(strstr(r.p.out, "count 1800000"));
	all_copied(r.p.out, "e2e_lean_rwx");
	assert_int_equal(kd_count(r.d, r.th, "leaf"), 0);
	assert_false(is_call(leaf_site(&r)));   /* patched out */
	assert_int_equal(r.d->lost_exits, 0);
	done(&r);
}

/* Code that can never be made writable, from the start (the ban kept
 * across execve): the copy at init fails quietly, the first batch says
 * so once, and the excluded function is muted in the hook. */
static void test_e2e_lean_wx_from_start(void **state)
{
	struct run r;
	long anon, size;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "wxexec", "KTRACE_EXCLUDE=leaf", NULL);
	assert_true(strstr(r.p.out, "wx mdwe") || strstr(r.p.out, "wx seccomp"));
	code_copied(r.p.out, &anon, &size);
	assert_int_equal(anon, 0);
	assert_int_equal(kt_count_str(r.p.err, "cannot make code writable"), 1);
	assert_non_null(strstr(r.p.out, "count 1800000"));
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "leaf"), 0);
	assert_true(is_call(leaf_site(&r)));
	assert_true(info_flags(&r) & KTRACE_INFO_LEAN_NO_PATCH);
	done(&r);
}

static void test_e2e_lean_late_exits(void **state)
{
	struct run r;
	const char *l;
	int a = -2, b = -2;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_static", "late", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=late_a,late_b", NULL);
	assert_non_null(l = strstr(r.p.out, "late calls "));
	/* Without the learning, 1 and 1: the exit site each one's first
	 * calls never took still calls __return__. */
	if (sscanf(l, "late calls %d %d", &a, &b) != 2 || a != 0 || b != 0)
		fail_msg("exit sites still calling __return__: %d %d, want 0 0\n%s", a, b, r.p.out);
	assert_int_equal(kd_count(r.d, r.th, "late_a"), 0);
	assert_int_equal(kd_count(r.d, r.th, "late_b"), 0);
	assert_int_equal(kd_count(r.d, r.th, "late_loop"), 2);
	done(&r);
}

/* TWO_WAYS and LEARN_FAST (lib/lean.c): two recorded functions whose first
 * cache slots are one no longer send each other's calls to the slow path,
 * and a learning call's exit through a site already learned stays on the
 * fast path; counts and nesting exact either way. */
static void test_e2e_lean_cache_ways(void **state)
{
	struct run r;
	const char *l;
	unsigned long long in = 0, out = 0, lin = 0;
	int ok = 0;
	char name[8];

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_static", "ways", "KTRACE_QUIET=1", "KTRACE_FILTER=off", NULL);
	assert_non_null(l = strstr(r.p.out, "ways collide "));
	if (sscanf(l, "ways collide %llu learn %llu %llu ok %d", &in, &out, &lin, &ok) != 4 || !ok)
		fail_msg("bad output:\n%s", r.p.out);
	/* One slot: ~20,000 slow entries (every call of one of the two);
	 * two: their learning calls and a block switch every ~500 calls. */
	if (in > 2000)
		fail_msg("%llu slow entries while coll_a and coll_b alternated, want <= 2000", in);
	/* One per function (its first exit learns the site), not one per
	 * learning call (LEARN_CALLS, 2: 32, and learn_run's own first exit:
	 * 33), with room for a block switch. */
	if (out > 24)
		fail_msg("%llu slow exits in 16 functions' learning calls, want <= 24", out);
	/* LEARN_CALLS (2) each and learn_run's own, 33, with room for a block
	 * switch; 49 when the last learning call left LEARN in the thread's
	 * cache entry (the third call came to the slow path to learn nothing). */
	if (lin > 40)
		fail_msg("%llu slow entries in 16 functions' 8 calls each, want <= 40", lin);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count(r.d, r.th, "collide_run"), 1);
	assert_int_equal(kd_count(r.d, r.th, "coll_a"), 20000);
	assert_int_equal(kd_count(r.d, r.th, "coll_b"), 20000);
	parents(r.d, r.th, "coll_a", "collide_run");
	parents(r.d, r.th, "coll_b", "collide_run");
	for (int k = 0; k < 16; k++) {
		snprintf(name, sizeof(name), "wl%d", k);
		assert_int_equal(kd_count(r.d, r.th, name), 8);
		parents(r.d, r.th, name, "learn_run");
	}
	done(&r);
}

static void test_e2e_lean_nested_exit(void **state)
{
	struct run r;
	const char *l;
	unsigned d0 = 0, d1 = 0;
	int ok = 0;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_static", "nested", "KTRACE_QUIET=1", "KTRACE_FILTER=off", NULL);
	assert_non_null(l = strstr(r.p.out, "nested depth "));
	if (sscanf(l, "nested depth %u %u ok %d", &d0, &d1, &ok) != 3 || !ok)
		fail_msg("bad output:\n%s", r.p.out);
	/* Left on the lean stack, the frame was taken later for the frame of
	 * whatever the handler had interrupted (NESTED_EXIT, lib/lean.c). */
	if (d1 != d0)
		fail_msg("lean stack depth %u before nx_leaf, %u after: its frame stayed", d0, d1);
	assert_int_equal(kd_count(r.d, r.th, "nx_leaf"), 1);
	assert_int_equal(kd_count(r.d, r.th, "nx_after"), 3);
	parents(r.d, r.th, "nx_leaf", "main");
	parents(r.d, r.th, "nx_after", "main");
	/* recorded through the rseq append (a block with room), or counted */
	assert_true(kd_count_flags(r.d, KD_CALL_EXIT_LOST) <=
	            r.d->snap.loss.count[KTRACE_LOSS_NESTED]);
	done(&r);
}

static void test_e2e_lean_held(void **state)
{
	struct run r;
	unsigned long long stubs = 0;
	const char *l;
	uint32_t under_held = 0;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_static", "held", "KTRACE_QUIET=1", "KTRACE_FILTER=off", NULL);
	print_message("%s", r.p.out);
	assert_non_null(l = strstr(r.p.out, "held stubs "));
	assert_int_equal(sscanf(l, "held stubs %llu", &stubs), 1);
	/* exits were given a stub (those followed by a ret, written whole:
	 * how many depends on the build's code) */
	if (stubs < 1)
		fail_msg("held: no exit site given a stub\n%s", r.p.out);
	assert_int_equal(r.d->lost_exits, 0);
	assert_int_equal(kd_count_flags(r.d, KD_CALL_EXIT_LOST), 0);
	/* 48 before, held(3) > held(2) > held(1) > held(0), 3 after: none of
	 * the 400,000 made while patched out, and every exit in place */
	assert_int_equal(kd_count(r.d, r.th, "held"), 48 + 4 + 3);
	assert_int_equal(kd_count(r.d, r.th, "held_leaf"), 16);
	assert_int_equal(kd_count(r.d, r.th, "held_loop"), 1);
	parents(r.d, r.th, "held_loop", "held");
	parents(r.d, r.th, "held", "main|held");
	parents(r.d, r.th, "held_leaf", "main");
	const struct kd_dec_call *h3 = NULL;

	/* under held: held(0) x 16 before, then held(2), held(1), held(0) */
	for (uint32_t i = 0; i < r.d->ncalls; i++) {
		const struct kd_dec_call *c = &r.d->calls[i], *p, *pp;

		if (!kd_is(r.d, c, "held") || strcmp(parent_name(r.d, c), "held") != 0)
			continue;
		under_held++;
		p = &r.d->calls[c->parent];
		if (strcmp(parent_name(r.d, p), "held") == 0) {
			pp = &r.d->calls[p->parent];
			if (strcmp(parent_name(r.d, pp), "held") == 0)
				h3 = &r.d->calls[pp->parent];
		}
	}
	assert_int_equal(under_held, 16 + 3);
	assert_non_null(h3);
	assert_string_equal(parent_name(r.d, h3), "main");
	/* held(3)'s exit recorded when it returned: the 3 calls after it come
	 * 50 ms later (a stub that missed its frames would leave the three
	 * open, closed only by the next entry at their slot, then) */
	uint32_t after = 0;

	for (uint32_t i = 0; i < r.d->ncalls; i++) {
		const struct kd_dec_call *c = &r.d->calls[i];

		if (!kd_is(r.d, c, "held") || c->begin <= h3->end || c->parent != h3->parent)
			continue;
		after++;
		if (kd_time_ticks_ns(r.d, c->begin - h3->end) < 40000000)
			fail_msg("held(3) ended %.3f ms before the call after it, want 50 ms or more",
			         (double)kd_time_ticks_ns(r.d, c->begin - h3->end) / 1e6);
	}
	assert_int_equal(after, 3);
	done(&r);
}

/* A library unloaded and another loaded, likely at its place, while the
 * first one's code is kept writable (lib/lean.c, LINGER): the second's
 * sites are written only once its own code is writable (a write to its
 * read+exec page killed the process); the first sealed read+exec by the
 * program meanwhile (the same); the second's 600 functions, which have
 * the first's compact ids, patched out again though one batch cannot take
 * them all (RELOAD); exact counts. */
static void test_e2e_lean_reload(void **state)
{
	struct run r;
	const char *l;
	unsigned a = 0, a2 = 0, b = 0;
	long na = 0, na2 = 0, nb = 0;
	int ma = -2, mb = -2;

	(void)state;
	if (no_lean())
		skip();
	/* Every call is counted below, so the rings must not wrap: under
	 * TSan beside another test the loops waiting for the patches ran
	 * long enough to overwrite 65-1434 blocks of the default 8 MiB
	 * (the count then short by as many calls, rightly). */
	run(&r, BIN "e2e_lean", "reload", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=a_leaf,a_leaf2,b_leaf,a_f*,b_f*", "KTRACE_BUFFER_MB=64", NULL);
	if (r.d->snap.loss.count[KTRACE_LOSS_OVERWRITTEN_BLOCKS])
		fail_msg("the rings wrapped (%llu blocks overwritten): the calls cannot be counted",
		         (unsigned long long)r.d->snap.loss.count[KTRACE_LOSS_OVERWRITTEN_BLOCKS]);
	assert_non_null(l = strstr(r.p.out, "reload a "));
	assert_int_equal(sscanf(l, "reload a %x %ld a2 %x %ld b %x %ld many %d %d", &a, &na, &a2, &na2,
	                        &b, &nb, &ma, &mb), 8);
	assert_false(is_call(a));   /* all patched out */
	assert_false(is_call(a2));
	assert_false(is_call(b));
	assert_int_equal(ma, 0);
	assert_int_equal(mb, 0);
	/* b at a's place has a's compact ids, and one name for both */
	assert_int_equal(kd_count(r.d, r.th, "a_run") + kd_count(r.d, r.th, "b_run"),
	                 (uint64_t)(na + nb));
	assert_int_equal(kd_count(r.d, r.th, "a_run2") + kd_count(r.d, r.th, "b_run2"), (uint64_t)na2);
	assert_int_equal(kd_count(r.d, r.th, "a_leaf") + kd_count(r.d, r.th, "b_leaf"), 0);
	assert_int_equal(kd_count(r.d, r.th, "a_leaf2") + kd_count(r.d, r.th, "b_leaf2"), 0);
	done(&r);
}

/* A library unloaded while its code is kept writable (lib/lean.c,
 * LINGER), data mapped where its code was, a fork: the child's fork
 * handler puts back read+exec only what is still a file's pages mapped
 * read+write+exec (atfork_child), so the child's write of the data
 * succeeds (a SIGSEGV before). */
static void test_e2e_lean_fork_reload(void **state)
{
	struct run r;
	const char *l;
	int found = -1, status = -2;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "forkreload", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=a_leaf", NULL);
	assert_non_null(l = strstr(r.p.out, "forkreload "));
	assert_int_equal(sscanf(l, "forkreload %d child %d", &found, &status), 2);
	if (found == 0) {
		print_message("the unloaded library's place was taken before the test could map it\n");
		done(&r);
		skip();
	}
	if (WIFSIGNALED(status))
		fail_msg("the fork child died of signal %d writing the data mapped where the "
		         "unloaded library's code was", WTERMSIG(status));
	assert_int_equal(status, 0);
	done(&r);
}

/* The fork child's handler cannot open /proc/self/maps (no descriptor
 * left): it puts every open range back to read+exec, as it did before it
 * read the file (the library's code stayed rwx in the child). */
static void test_e2e_lean_fork_nofd(void **state)
{
	struct run r;
	const char *l;
	unsigned a = 0x100;
	int status = -2;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "forknofd", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=a_leaf", NULL);
	assert_non_null(l = strstr(r.p.out, "forknofd "));
	assert_int_equal(sscanf(l, "forknofd %x child %d", &a, &status), 2);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
		fail_msg("the library's code was still read+write+exec in the fork child");
	assert_int_equal(status, 0);
	done(&r);
}

/* Linked by lld, whose code segment does not start at a page: the code is
 * read+exec again after the batch (lib/lean.c, LINGER). */
static void test_e2e_lean_lld(void **state)
{
	struct run r;

	(void)state;
	if (no_lean() || access(BIN "e2e_lean_lld", X_OK) != 0)
		skip();
	run(&r, BIN "e2e_lean_lld", "count", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=leaf", NULL);
	assert_int_equal(kd_count(r.d, r.th, "mid"), 20000);
	assert_int_equal(kd_count(r.d, r.th, "leaf"), 0);
	assert_false(is_call(leaf_site(&r)));
	assert_non_null(strstr(r.p.out, "writable-code 0\n"));
	done(&r);
}

/* A batch makes writable the runs of pages it writes, not the whole code
 * segment (lib/lean.c, orng_open): in a static build with 2 MiB more
 * code, the most of it seen writable at once while the excluded leaf is
 * patched out (the program reads its maps after every 100 calls, and
 * for 300 ms after) is a few pages, and nothing is writable at the end
 * (LINGER).  Opening the whole segment rewrote every page's entry, ~0.9
 * us a page on the 2-core VM, with the program's mmap and munmap
 * waiting. */
static void test_e2e_lean_spread(void **state)
{
	struct run r;
	long code = -1, most = -1, now = -1;
	const char *p;

	(void)state;
	if (no_lean() || access(BIN "e2e_lean_big", X_OK) != 0)
		skip();
	run(&r, BIN "e2e_lean_big", "spread", "KTRACE_QUIET=1", "KTRACE_FILTER=off",
	    "KTRACE_EXCLUDE=leaf", NULL);
	print_message("%s", r.p.out);
	p = strstr(r.p.out, "spread code-kb ");
	assert_non_null(p);
	assert_int_equal(sscanf(p, "spread code-kb %ld rwx-kb %ld now-kb %ld", &code, &most, &now), 3);
	assert_int_equal(kd_count(r.d, r.th, "mid"), 20000);
	assert_int_equal(kd_count(r.d, r.th, "leaf"), 0);
	assert_false(is_call(leaf_site(&r)));
	assert_true(code >= 2048);
	assert_true(most > 0);     /* the leaf's sites' pages, while open */
	assert_true(most <= 256);  /* the segment whole: code-kb */
	assert_int_equal(now, 0);
	done(&r);
}

static void test_e2e_lean_storm(void **state)
{
	struct run r;
	long sigs = -1, iters = -1;
	uint64_t nested, hf, hl;
	const char *p;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean", "storm", "KTRACE_QUIET=1", "KTRACE_FILTER=off", "KTRACE_BUFFER_MB=64",
	    NULL);
	print_message("%s", r.p.out);
	p = strstr(r.p.out, "storm signals ");
	assert_non_null(p);
	assert_int_equal(sscanf(p, "storm signals %ld iters %ld", &sigs, &iters), 2);
	assert_true(sigs > 0);
	nested = r.d->snap.loss.count[KTRACE_LOSS_NESTED];
	hf = kd_count(r.d, KD_NONE, "on_sig");
	hl = kd_count(r.d, KD_NONE, "sig_leaf");
	print_message("signals %ld: on_sig %llu, sig_leaf %llu decoded; nested losses %llu\n", sigs,
	              (unsigned long long)hf, (unsigned long long)hl, (unsigned long long)nested);
	if (r.d->snap.loss.count[KTRACE_LOSS_OVERWRITTEN_BLOCKS] != 0)
		fail_msg("ring wrapped: the counts below cannot be exact; raise KTRACE_BUFFER_MB");
	uint64_t lost_app = 0, lost_handler = 0;
	for (uint32_t i = 0; i < r.d->ncalls; i++)
		if (r.d->calls[i].flags & KD_CALL_EXIT_LOST) {
			const char *fn = kd_func(r.d, &r.d->calls[i]);

			print_message("exit lost: %s under %s\n", fn, parent_name(r.d, &r.d->calls[i]));
			if (strcmp(fn, "on_sig") == 0 || strcmp(fn, "sig_leaf") == 0)
				lost_handler++;
			else
				lost_app++;
		}
	/* The interrupted calls: exact.  A handler's exit that came to the
	 * slow path while the handler had interrupted it is lost when the
	 * block is full (NESTED_EXIT, lib/lean.c), and counted. */
	assert_int_equal(lost_app, 0);
	assert_true(lost_handler <= nested);
	assert_int_equal(kd_count(r.d, KD_NONE, "storm_worker"), 6);
	assert_int_equal(kd_count(r.d, KD_NONE, "outer"), 6 * iters);
	assert_int_equal(kd_count(r.d, KD_NONE, "inner"), 6 * iters * 4);
	parents(r.d, KD_NONE, "outer", "storm_worker");
	parents(r.d, KD_NONE, "inner", "outer");
	/* The handlers' calls: all there, but for a handler that ran inside
	 * the library's slow path, whose events are counted as NESTED. */
	assert_true(hf <= (uint64_t)sigs && hl <= 2 * (uint64_t)sigs);
	assert_true((uint64_t)sigs - hf <= nested);
	assert_true(2 * (uint64_t)sigs - hl <= nested);
	assert_true(r.d->lost_exits <= nested);
	if (nested == 0) {
		assert_int_equal(hf, sigs);
		assert_int_equal(hl, 2 * sigs);
		parents(r.d, KD_NONE, "sig_leaf", "on_sig");
	}
	done(&r);
}

/* A flip run (below) nested exactly, and whole once everything is back. */
static void check_flip(const struct run *r)
{
	uint64_t tw = 0, outer_tw = 0, inner_tw = 0, pads_tw = 0, pad_tw[17] = {0}, leaf_tw = 0;

	print_message("%s", r->p.out);
	assert_int_equal(r->d->lost_exits, 0);
	assert_int_equal(kd_count_flags(r->d, KD_CALL_EXIT_LOST), 0);
	parents(r->d, KD_NONE, "inner", "outer|worker|(none)");
	parents(r->d, KD_NONE, "outer", "worker|tail_worker|(none)");
	/* (millions of calls: each one's names looked up once) */
	for (uint32_t i = 0; i < r->d->ncalls; i++) {
		const struct kd_dec_call *c = &r->d->calls[i];
		const char *fn = kd_func(r->d, c), *pn = parent_name(r->d, c);
		int under_tw = c->parent < r->d->ncalls &&
		               strcmp(parent_name(r->d, &r->d->calls[c->parent]), "tail_worker") == 0;

		if (strcmp(fn, "tail_worker") == 0)
			tw++;
		else if (strcmp(fn, "outer") == 0 && strcmp(pn, "tail_worker") == 0)
			outer_tw++;
		else if (strcmp(fn, "inner") == 0 && strcmp(pn, "outer") == 0 && under_tw)
			inner_tw++;
		else if (strcmp(fn, "pads") == 0 && strcmp(pn, "tail_worker") == 0)
			pads_tw++;
		/* each pad tail-calls pad_leaf: a sibling under pads */
		else if (strcmp(fn, "pad_leaf") == 0 && strcmp(pn, "pads") == 0 && under_tw)
			leaf_tw++;
		else if (strncmp(fn, "pad", 3) == 0 && fn[3] >= '0' && fn[3] <= '9' &&
		         strcmp(pn, "pads") == 0 && under_tw) {
			int k = atoi(fn + 3);
			char name[8];

			snprintf(name, sizeof(name), "pad%d", k);
			if (k < 17 && strcmp(name, fn) == 0)
				pad_tw[k]++;
		}
	}
	/* After the flipping, everything patched back in: exact, the sites
	 * that went out whole, in jump form and by int3 too. */
	assert_int_equal(tw, 8);
	assert_int_equal(outer_tw, 80);
	assert_int_equal(inner_tw, 400);
	assert_int_equal(pads_tw, 80);
	for (int k = 0; k < 17; k++)
		assert_int_equal(pad_tw[k], 80);
	assert_int_equal(leaf_tw, 17 * 80);
}

static void test_e2e_lean_flip(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run(&r, BIN "e2e_lean_static", "flip", "KTRACE_QUIET=1", "KTRACE_FILTER=off", NULL);
	check_flip(&r);
	done(&r);
}

/*
 * Started in an allow-list sandbox that names neither perf_event_open nor
 * membarrier (the program calls neither): before, the lean mode's
 * membarrier registration at start-up killed it (SIGSYS).  Under a filter
 * it serialises the cores with mprotect's TLB flushes instead: the flip
 * run (every site out and in, int3 sequences included, 8 threads) nests
 * exactly, and the budget's mutes are still patched out.
 */
static void test_e2e_lean_sandbox_from_start(void **state)
{
	struct run r;

	(void)state;
	if (no_lean())
		skip();
	run_sandboxed(&r, "killlean", BIN "e2e_lean_static", "flip", "KTRACE_QUIET=1",
	              "KTRACE_FILTER=off", NULL);
	check_flip(&r);
	done(&r);
	run_sandboxed(&r, "killlean", BIN "e2e_lean", "burst", "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=64",
	              NULL);
	assert_true(kd_muted(r.d, "leaf") != NULL);
	assert_false(is_call(leaf_site(&r)));   /* patched out */
	assert_false(info_flags(&r) & KTRACE_INFO_LEAN_NO_PATCH);
	burst_nests(&r);
	done(&r);
}

/* Forks while the writer patches every function out and in, and walks
 * the modules at every pass.  Each child ran patched code to the end,
 * checked its results, and its snapshot nests consistently; what it
 * recorded depends on where its writer was.  Before the writer's
 * dl_iterate_phdr calls were kept out of forks (ktrace__phdr_iterate),
 * with lean.c's patch lock also not held across fork, 3 runs of 5 hung:
 * a child's writer waited for the loader's lock copied held.  (With only
 * the patch lock removed now, it passes: a child of a half-done batch
 * runs its int3 sites through the trap handler.) */
static void test_e2e_lean_fork_while_patching(void **state)
{
	struct run r;
	char line[4600], path[4400];
	int n = -1, ok = -1, nkids = 0;

	(void)state;
	if (no_lean())
		skip();
#if defined(__SANITIZE_ADDRESS__)
	/* GCC 12's ASan runtime is not fork-safe in a multithreaded process
	 * (test_e2e_lifecycle says how): fork is tested in the plain and TSan
	 * builds. */
	skip();
#endif
#if defined(__SANITIZE_THREAD__)
	/* Each fork of a TSan process with its child's snapshot took ~0.5 s
	 * (24: 12 s of the TSan step): 12, which still cross the flips'
	 * delays' patterns (i % 2, 3, 5) in many combinations. */
	const int want = 12;
	const char *kids = "FORKFLIP_KIDS=12";
#else
	const int want = 24;
	const char *kids = "FORKFLIP_KIDS=24";
#endif
	run(&r, BIN "e2e_lean_static", "forkflip", "KTRACE_QUIET=1", "KTRACE_FILTER=off", kids, NULL);
	const char *s = strstr(r.p.out, "forkflip children ");
	if (s == NULL || sscanf(s, "forkflip children %d ok %d", &n, &ok) != 2 || n != want ||
	    ok != want)
		fail_msg("children did not all exit 0:\n%s", r.p.out);
	assert_int_equal(r.d->lost_exits, 0);
	parents(r.d, KD_NONE, "inner", "outer|(none)");
	for (const char *c = r.p.out; (c = strstr(c, "child ")) != NULL; c++) {
		int pid = 0, rc = -1;

		if (c != r.p.out && c[-1] != '\n')
			continue;
		assert_int_equal(sscanf(c, "child %d %d %4399s", &pid, &rc, path), 3);
		assert_int_equal(rc, 0);
		snprintf(line, sizeof(line), "ktrace-%d-", pid);
		assert_non_null(strstr(path, line));
		struct kd_dec *d = kd_open(path);
		assert_non_null(d);
		assert_int_equal(d->snap.info.pid, (uint32_t)pid);
		assert_int_equal(d->lost_exits, 0);
		assert_int_equal(kd_count_flags(d, KD_CALL_EXIT_LOST), 0);
		assert_true(kd_count(d, KD_NONE, "outer") <= 10);
		assert_true(kd_count(d, KD_NONE, "pads") <= 10);
		parents(d, KD_NONE, "inner", "outer|forkflip_child|(none)");
		kd_dec_free(d);
		nkids++;
	}
	assert_int_equal(nkids, want);
	done(&r);
}

int main(void)
{
	/* KTRACE_TEST_FILTER="*storm*": run the matching tests only */
	if (getenv("KTRACE_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KTRACE_TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_lean_calls_pie),
		cmocka_unit_test(test_e2e_lean_calls_nopie),
		cmocka_unit_test(test_e2e_lean_calls_static),
		cmocka_unit_test(test_e2e_lean_pg_link),
		cmocka_unit_test(test_e2e_lean_gprof_kept),
		cmocka_unit_test(test_e2e_lean_mixed),
		cmocka_unit_test(test_e2e_lean_both),
		cmocka_unit_test(test_e2e_lean_longjmp),
		cmocka_unit_test(test_e2e_lean_tail),
		cmocka_unit_test(test_e2e_lean_dlopen),
		cmocka_unit_test(test_e2e_lean_cxx),
		cmocka_unit_test(test_e2e_lean_exclude),
		cmocka_unit_test(test_e2e_lean_exclude_one_batch),
		cmocka_unit_test(test_e2e_lean_exclude_open_learning),
		cmocka_unit_test(test_e2e_lean_filter_off),
		cmocka_unit_test(test_e2e_lean_budget),
		cmocka_unit_test(test_e2e_lean_early_pass),
		cmocka_unit_test(test_e2e_lean_cpu_budget),
		cmocka_unit_test(test_e2e_lean_cpu_budget_long_calls),
		cmocka_unit_test(test_e2e_lean_disabled),
		cmocka_unit_test(test_e2e_lean_wx),
		cmocka_unit_test(test_e2e_lean_wx_budget_counts),
		cmocka_unit_test(test_e2e_lean_tsync_sandbox),
		cmocka_unit_test(test_e2e_lean_sandbox_from_start),
		cmocka_unit_test(test_e2e_lean_wx_from_start),
		cmocka_unit_test(test_e2e_lean_precopy),
		cmocka_unit_test(test_e2e_lean_rwx_segment),
		cmocka_unit_test(test_e2e_lean_cache_ways),
		cmocka_unit_test(test_e2e_lean_nested_exit),
		cmocka_unit_test(test_e2e_lean_storm),
		cmocka_unit_test(test_e2e_lean_flip),
		cmocka_unit_test(test_e2e_lean_fork_while_patching),
		cmocka_unit_test(test_e2e_lean_late_exits),
		cmocka_unit_test(test_e2e_lean_held),
		cmocka_unit_test(test_e2e_lean_reload),
		cmocka_unit_test(test_e2e_lean_fork_reload),
		cmocka_unit_test(test_e2e_lean_fork_nofd),
		cmocka_unit_test(test_e2e_lean_lld),
		cmocka_unit_test(test_e2e_lean_spread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
