/*
 * test_lib_config.c - KTRACE_* settings (lib/config.c), white box.
 *
 * The parse helpers accept exactly the documented forms; a bad value in
 * the environment is named once on stderr and the default is used, and the
 * program still runs (a tracer never stops the program it observes).  The
 * environment cases run this executable again as a child with
 * "--dump-config", which prints what the library's constructor parsed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "ktest.h"
#include "kunit.h"

static char self_path[4096];

/* ---- parse helpers ------------------------------------------------------ */

static void test_config_parse_u64(void **state)
{
	uint64_t v = 7;

	(void)state;
	assert_int_equal(ktrace__parse_u64("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(ktrace__parse_u64("42", 0, 100, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(ktrace__parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(ktrace__parse_u64("4096", 1, 4096, &v), 0);
	v = 7;
	static const char *const bad[] = {"", "-1", "+1", "12a", "1 ", "0x10", "1e3",
	                                  "18446744073709551616", "99999999999999999999999",
	                                  "abc", "1.5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ktrace__parse_u64(bad[i], 0, UINT64_MAX, &v) == 0)
			fail_msg("'%s' accepted", bad[i]);
	}
	assert_int_equal(v, 7); /* untouched on error */
	assert_int_equal(ktrace__parse_u64("0", 1, 10, &v), -1);
	assert_int_equal(ktrace__parse_u64("11", 1, 10, &v), -1);
	assert_int_equal(ktrace__parse_u64(NULL, 0, 10, &v), -1);
}

/* strtoull skips blanks, so " -1" passes the sign check and wraps to
 * UINT64_MAX.  Known library bug (see /tmp/ktrace-bugs.md). */
static void test_config_parse_u64_rejects_blank_then_sign(void **state)
{
	uint64_t v = 7;

	(void)state;
	assert_int_equal(ktrace__parse_u64(" -1", 0, UINT64_MAX, &v), -1);
	assert_int_equal(ktrace__parse_u64("\t+5", 0, UINT64_MAX, &v), -1);
	assert_int_equal(v, 7);
}

static void test_config_parse_bool(void **state)
{
	int v = 5;

	(void)state;
	static const char *const yes[] = {"1", "on", "yes", "true", "TRUE", "On", "YES"};
	static const char *const no[] = {"0", "off", "no", "false", "FALSE", "Off"};
	static const char *const bad[] = {"", "2", "y", "n", "yes ", "tru", "-1", "enable"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		v = 5;
		assert_int_equal(ktrace__parse_bool(yes[i], &v), 0);
		assert_int_equal(v, 1);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		v = 5;
		assert_int_equal(ktrace__parse_bool(no[i], &v), 0);
		assert_int_equal(v, 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 5;
		if (ktrace__parse_bool(bad[i], &v) == 0)
			fail_msg("'%s' accepted", bad[i]);
		assert_int_equal(v, 5);
	}
}

static void test_config_parse_signal(void **state)
{
	int s = -1;
	char buf[32];

	(void)state;
	assert_int_equal(ktrace__parse_signal("USR2", &s), 0);
	assert_int_equal(s, SIGUSR2);
	assert_int_equal(ktrace__parse_signal("SIGUSR1", &s), 0);
	assert_int_equal(s, SIGUSR1);
	assert_int_equal(ktrace__parse_signal("usr1", &s), 0);
	assert_int_equal(s, SIGUSR1);
	assert_int_equal(ktrace__parse_signal("none", &s), 0);
	assert_int_equal(s, 0);
	assert_int_equal(ktrace__parse_signal("0", &s), 0);
	assert_int_equal(s, 0);
	assert_int_equal(ktrace__parse_signal("RTMIN", &s), 0);
	assert_int_equal(s, SIGRTMIN);
	assert_int_equal(ktrace__parse_signal("RTMIN+3", &s), 0);
	assert_int_equal(s, SIGRTMIN + 3);
	snprintf(buf, sizeof(buf), "RTMIN+%d", SIGRTMAX - SIGRTMIN);
	assert_int_equal(ktrace__parse_signal(buf, &s), 0);
	assert_int_equal(s, SIGRTMAX);
	snprintf(buf, sizeof(buf), "%d", SIGUSR1);
	assert_int_equal(ktrace__parse_signal(buf, &s), 0);
	assert_int_equal(s, SIGUSR1);
	snprintf(buf, sizeof(buf), "%d", SIGRTMIN + 1);
	assert_int_equal(ktrace__parse_signal(buf, &s), 0);
	assert_int_equal(s, SIGRTMIN + 1);
	s = -1;
	/* Signals whose default action must not be taken over, and junk. */
	static const char *const bad[] = {"TERM", "SIGKILL", "9", "15", "2", "", "RTMIN+",
	                                  "RTMIN-1", "RTMIN+x", "USR3", "99", "-10", "+10"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ktrace__parse_signal(bad[i], &s) == 0)
			fail_msg("'%s' accepted as signal %d", bad[i], s);
	snprintf(buf, sizeof(buf), "RTMIN+%d", SIGRTMAX - SIGRTMIN + 1);
	assert_int_equal(ktrace__parse_signal(buf, &s), -1);
	assert_int_equal(s, -1);
}

/* ---- the environment, in a child ---------------------------------------------- */

static void dump_config(void)
{
	struct kt_config *c = &ktrace__cfg;
	int on = ktrace_enabled();

	printf("enabled=%d on=%d buffer_mb=%u signo=%d trigger_us=%llu pct=%g min=%u "
	       "delay=%u max=%u quiet=%d clock=%d no_rseq=%d snapshot=%d files=%u mb=%u\n",
	       c->enabled, on, c->buffer_mb, c->signo, (unsigned long long)c->trigger_us,
	       c->trigger_pct, c->trigger_min_samples, c->trigger_delay_ms, c->max_per_min,
	       c->quiet, c->force_clock, c->no_rseq, on ? 0 : ktrace_snapshot("x"),
	       c->max_files_per_min, c->max_mb_per_min);
	printf("dir=%s\n", c->dir);
	printf("window_s=%u filter=%d max_us=%u exclude=%s include=%s\n", c->window_s, c->filter,
	       c->filter_max_us, c->exclude, c->include);
	printf("sched=%d\n", c->sched);
	printf("trigger_on=%u\n", c->trigger_on);
}

/* Run the child with env; returns its stdout; stderr in *err (malloc'd). */
static char *child(const char *const *env, char **err)
{
	char *argv[] = {self_path, (char *)"--dump-config", NULL};
	struct kt_proc p;
	char *out;

	assert_int_equal(kt_run(argv, env, &p, 20000), 0);
	out = strdup(p.out);
	*err = strdup(p.err);
	kt_proc_free(&p);
	return out;
}

static const char *const clean_env[] = {
	"KTRACE_ENABLE", "KTRACE_DIR", "KTRACE_BUFFER_MB", "KTRACE_SIGNAL", "KTRACE_TRIGGER_US",
	"KTRACE_TRIGGER_PCT", "KTRACE_TRIGGER_MIN_SAMPLES", "KTRACE_TRIGGER_DELAY_MS",
	"KTRACE_MAX_SNAPSHOTS_PER_MIN", "KTRACE_QUIET", "KTRACE_CLOCK", "KTRACE_RSEQ",
	"KTRACE_WINDOW_S", "KTRACE_FILTER", "KTRACE_FILTER_MAX_US", "KTRACE_EXCLUDE",
	"KTRACE_INCLUDE", "KTRACE_SCHED", "KTRACE_TRIGGER_ON",
	"KTRACE_MAX_FILES_PER_MIN", "KTRACE_MAX_MB_PER_MIN", NULL};

/* "dir=<the current directory>\n": a relative KTRACE_DIR is made absolute. */
static const char *cwd_line(const char *sub)
{
	static char line[4200];
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(line, sizeof(line), "dir=%s%s%s\n", cwd, sub ? "/" : "", sub ? sub : "");
	return line;
}

/* clean_env followed by extra (a static buffer). */
static const char **env_with(const char *const *extra)
{
	static const char *v[64];
	size_t n = 0;
	for (size_t i = 0; clean_env[i]; i++)
		v[n++] = clean_env[i];
	for (size_t i = 0; extra && extra[i]; i++)
		v[n++] = extra[i];
	v[n] = NULL;
	return v;
}

static void test_config_defaults(void **state)
{
	char *err, *out;

	(void)state;
	out = child(env_with(NULL), &err);
	assert_non_null(strstr(out, "enabled=1 on=1 buffer_mb=8 "));
	assert_non_null(strstr(out, " signo=12 trigger_us=0 pct=0 min=1000 delay=200 max=6 "
	                             "quiet=0 clock=0 no_rseq=0"));
	assert_non_null(strstr(out, cwd_line(NULL)));
	assert_non_null(strstr(out, " files=10 mb=1024\n"));
	assert_string_equal(err, "");
	free(out);
	free(err);
}

static void test_config_valid_values_are_silent(void **state)
{
	static const char *const extra[] = {
		"KTRACE_ENABLE=yes", "KTRACE_DIR=/tmp", "KTRACE_BUFFER_MB=2", "KTRACE_SIGNAL=USR1",
		"KTRACE_TRIGGER_US=500", "KTRACE_TRIGGER_PCT=99.9", "KTRACE_TRIGGER_MIN_SAMPLES=50",
		"KTRACE_TRIGGER_DELAY_MS=10", "KTRACE_MAX_SNAPSHOTS_PER_MIN=3", "KTRACE_QUIET=1",
		"KTRACE_CLOCK=monotonic", "KTRACE_RSEQ=0", NULL};
	char *err, *out;

	(void)state;
	out = child(env_with(extra), &err);
	assert_non_null(strstr(out, "enabled=1 on=1 buffer_mb=2 signo=10 trigger_us=500 "
	                             "pct=99.9 min=50 delay=10 max=3 quiet=1 clock=2 no_rseq=1"));
	assert_non_null(strstr(out, "dir=/tmp\n"));
	assert_string_equal(err, "");
	free(out);
	free(err);
}

static void test_config_bad_values_warn_once_and_use_defaults(void **state)
{
	static const char *const extra[] = {
		"KTRACE_ENABLE=perhaps", "KTRACE_BUFFER_MB=abc", "KTRACE_SIGNAL=TERM",
		"KTRACE_TRIGGER_US=-5", "KTRACE_TRIGGER_PCT=100", "KTRACE_TRIGGER_MIN_SAMPLES=0",
		"KTRACE_TRIGGER_DELAY_MS=99999999", "KTRACE_MAX_SNAPSHOTS_PER_MIN=0",
		"KTRACE_QUIET=2", "KTRACE_CLOCK=hpet", "KTRACE_RSEQ=maybe", NULL};
	static const char *const vars[] = {
		"KTRACE_ENABLE", "KTRACE_BUFFER_MB", "KTRACE_SIGNAL", "KTRACE_TRIGGER_US",
		"KTRACE_TRIGGER_PCT", "KTRACE_TRIGGER_MIN_SAMPLES", "KTRACE_TRIGGER_DELAY_MS",
		"KTRACE_MAX_SNAPSHOTS_PER_MIN", "KTRACE_QUIET", "KTRACE_CLOCK", "KTRACE_RSEQ"};
	char *err, *out;

	(void)state;
	out = child(env_with(extra), &err);
	assert_non_null(strstr(out, "enabled=1 on=1 buffer_mb=8 signo=12 trigger_us=0 pct=0 "
	                             "min=1000 delay=200 max=6 quiet=0 clock=0 no_rseq=0"));
	/* One line per bad variable, naming it and the value. */
	assert_int_equal(kt_count_str(err, "ktrace: "), (int)(sizeof(vars) / sizeof(vars[0])));
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		char key[64];
		snprintf(key, sizeof(key), "%s=", vars[i]);
		if (kt_count_str(err, key) != 1)
			fail_msg("%s named %d times in:\n%s", vars[i], kt_count_str(err, key), err);
	}
	assert_non_null(strstr(err, "'abc'"));
	assert_non_null(strstr(err, "'hpet'"));
	free(out);
	free(err);
}

static void test_config_buffer_rounding_and_range(void **state)
{
	static const char *const three[] = {"KTRACE_BUFFER_MB=3", NULL};
	static const char *const huge[] = {"KTRACE_BUFFER_MB=5000", NULL};
	char *err, *out;

	(void)state;
	out = child(env_with(three), &err);
	assert_non_null(strstr(out, "buffer_mb=4 "));
	assert_int_equal(kt_count_str(err, "ktrace: "), 1);
	assert_non_null(strstr(err, "rounded up to 4"));
	free(out);
	free(err);
	out = child(env_with(huge), &err);
	assert_non_null(strstr(out, "buffer_mb=8 "));
	assert_int_equal(kt_count_str(err, "ktrace: "), 1);
	assert_non_null(strstr(err, "KTRACE_BUFFER_MB='5000'"));
	free(out);
	free(err);
}

static void test_config_disabled(void **state)
{
	static const char *const off[] = {"KTRACE_ENABLE=0", NULL};
	char *err, *out, want[64];

	(void)state;
	out = child(env_with(off), &err);
	snprintf(want, sizeof(want), "enabled=0 on=0 ");
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "snapshot=%d ", KTRACE_EDISABLED);
	assert_non_null(strstr(out, want));
	assert_string_equal(err, "");
	free(out);
	free(err);
}

/* The window budget's settings: defaults, valid values, bad values. */
static void test_config_budget_settings(void **state)
{
	static const char *const good[] = {"KTRACE_WINDOW_S=120", "KTRACE_FILTER=off",
	                                   "KTRACE_FILTER_MAX_US=50", "KTRACE_EXCLUDE=a_*,b",
	                                   "KTRACE_INCLUDE=keep", NULL};
	static const char *const bad[] = {"KTRACE_WINDOW_S=0", "KTRACE_FILTER=sometimes",
	                                  "KTRACE_FILTER_MAX_US=x", NULL};
	char *err, *out;

	(void)state;
	out = child(env_with(NULL), &err);
	assert_non_null(strstr(out, "window_s=30 filter=1 max_us=5 exclude= include=\n"));
	assert_string_equal(err, "");
	free(out);
	free(err);
	out = child(env_with(good), &err);
	assert_non_null(strstr(out, "window_s=120 filter=0 max_us=50 exclude=a_*,b include=keep\n"));
	assert_string_equal(err, "");
	free(out);
	free(err);
	out = child(env_with(bad), &err);
	assert_non_null(strstr(out, "window_s=30 filter=1 max_us=5 "));
	assert_int_equal(kt_count_str(err, "ktrace: "), 3);
	assert_non_null(strstr(err, "KTRACE_WINDOW_S='0'"));
	assert_non_null(strstr(err, "KTRACE_FILTER='sometimes' is not auto or off"));
	free(out);
	free(err);
}

/* KTRACE_SCHED: auto (default) / off / on; anything else warns, auto. */
static void test_config_sched(void **state)
{
	static const char *const cases[][2] = {
		{"KTRACE_SCHED", "sched=1\n"}, {"KTRACE_SCHED=auto", "sched=1\n"},
		{"KTRACE_SCHED=off", "sched=0\n"}, {"KTRACE_SCHED=0", "sched=0\n"},
		{"KTRACE_SCHED=on", "sched=2\n"},
		{"KTRACE_SCHED=sometimes", "sched=1\n"}};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *extra[] = {cases[i][0], NULL};
		char *err, *out = child(env_with(extra), &err);
		int bad = strstr(cases[i][0], "sometimes") != NULL;

		if (!strstr(out, cases[i][1]))
			fail_msg("%s: want %s in %s", cases[i][0], cases[i][1], out);
		assert_int_equal(kt_count_str(err, "ktrace: "), bad);
		if (bad)
			assert_non_null(strstr(err, "KTRACE_SCHED='sometimes' is not auto, on or off"));
		free(out);
		free(err);
	}
}

/* KTRACE_TRIGGER_ON: wall (default) / run; anything else warns, wall. */
static void test_config_trigger_on(void **state)
{
	static const char *const cases[][2] = {
		{"KTRACE_TRIGGER_ON", "trigger_on=1\n"}, {"KTRACE_TRIGGER_ON=wall", "trigger_on=1\n"},
		{"KTRACE_TRIGGER_ON=run", "trigger_on=2\n"}, {"KTRACE_TRIGGER_ON=RUN", "trigger_on=2\n"},
		{"KTRACE_TRIGGER_ON=cpu", "trigger_on=1\n"}};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *extra[] = {cases[i][0], NULL};
		char *err, *out = child(env_with(extra), &err);
		int bad = strstr(cases[i][0], "cpu") != NULL;

		if (!strstr(out, cases[i][1]))
			fail_msg("%s: want %s in %s", cases[i][0], cases[i][1], out);
		assert_int_equal(kt_count_str(err, "ktrace: "), bad);
		if (bad)
			assert_non_null(strstr(err, "KTRACE_TRIGGER_ON='cpu' is not wall or run"));
		free(out);
		free(err);
	}
}

/* A relative KTRACE_DIR is resolved once, at start-up, against the
 * directory the program started in (issue 11, item 4). */
static void test_config_relative_dir_is_made_absolute(void **state)
{
	static const char *const extra[] = {"KTRACE_DIR=snaps/here", "KTRACE_MAX_FILES_PER_MIN=3",
	                                    "KTRACE_MAX_MB_PER_MIN=77", NULL};
	char *err, *out;

	(void)state;
	out = child(env_with(extra), &err);
	assert_non_null(strstr(out, cwd_line("snaps/here")));
	assert_non_null(strstr(out, " files=3 mb=77\n"));
	assert_string_equal(err, "");
	free(out);
	free(err);
}

static void test_config_dir_too_long(void **state)
{
	static char var[6000];
	const char *extra[] = {var, NULL};
	char *err, *out;

	(void)state;
	memcpy(var, "KTRACE_DIR=", 11);
	memset(var + 11, 'd', 5000);
	var[5011] = 0;
	out = child(env_with(extra), &err);
	assert_non_null(strstr(out, cwd_line(NULL)));
	assert_int_equal(kt_count_str(err, "ktrace: "), 1);
	assert_non_null(strstr(err, "KTRACE_DIR"));
	free(out);
	free(err);
}

/* ---- messages said once (ktrace__warn_once) --------------------------- */

/* The child: each key twice, from two threads at once, then once more;
 * errno-keyed messages whose errno equals a named key's number, or is
 * that number + 64 (EDQUOT, 122: the old "key & 63" made it key 58, the
 * lean mode's W^X message).  Prints nothing itself: stderr has the lines. */
static pthread_barrier_t warn_bar;

static void warn_all(void)
{
	ktrace__warn_once(KT_WARN_LEAN_WX, "w lean_wx");
	ktrace__warn_once(KT_WARN_LEAN_BOTH, "w lean_both");
	ktrace__warn_once(KT_WARN_MLOCK, "w mlock");
	ktrace__warn_once(KT_WARN_SIGNAL_TAKEN, "w signal_taken");
	ktrace__warn_once(KT_WARN_TRIGGER_RUN, "w trigger_run");
	ktrace__warn_once(KT_WARN_SECURE_NO_DIR, "w secure");
	ktrace__warn_once(KT_WARN_RATELIMIT, "w ratelimit");
	for (int e = 1; e < 200; e++)
		if (e == 28 || e == 58 || e == 60 || e == 63 || e == 122 || e == 124 || e == 150) {
			ktrace__warn_once(KT_WARN_ERRNO(KT_WARN_CREATE, e), "w create %d", e);
			ktrace__warn_once(KT_WARN_ERRNO(KT_WARN_WRITE, e), "w write %d", e);
			ktrace__warn_once(KT_WARN_ERRNO(KT_WARN_PUBLISH, e), "w publish %d", e);
		}
}

static void *warn_thread(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&warn_bar);
	warn_all();
	return NULL;
}

static void warn_child(void)
{
	pthread_t th;

	pthread_barrier_init(&warn_bar, NULL, 2);
	pthread_create(&th, NULL, warn_thread, NULL);
	pthread_barrier_wait(&warn_bar);
	warn_all();
	pthread_join(th, NULL);
	warn_all();
}

/* Each message once: none silences another (two of them shared key 60,
 * and an errno's key could be a named one's), none printed twice. */
static void test_config_warn_once_per_message(void **state)
{
	char *argv[] = {self_path, (char *)"--warn", NULL};
	static const char *const named[] = {"lean_wx", "lean_both", "mlock", "signal_taken",
	                                    "trigger_run", "secure", "ratelimit"};
	static const int errs[] = {28, 58, 60, 63, 122, 124};
	struct kt_proc p;
	char key[64];

	(void)state;
	assert_int_equal(kt_run(argv, env_with(NULL), &p, 20000), 0);
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		snprintf(key, sizeof(key), "ktrace: w %s\n", named[i]);
		if (kt_count_str(p.err, key) != 1)
			fail_msg("'%s' printed %d times:\n%s", named[i], kt_count_str(p.err, key), p.err);
	}
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		static const char *const kinds[] = {"create", "write", "publish"};
		for (int k = 0; k < 3; k++) {
			snprintf(key, sizeof(key), "ktrace: w %s %d\n", kinds[k], errs[i]);
			if (kt_count_str(p.err, key) != 1)
				fail_msg("'%s %d' printed %d times:\n%s", kinds[k], errs[i],
				         kt_count_str(p.err, key), p.err);
		}
	}
	/* errno 128 and above share one key per kind: 150 is said or not,
	 * but once at most */
	assert_true(kt_count_str(p.err, "ktrace: w create 150\n") <= 1);
	assert_int_equal(kt_count_str(p.err, "ktrace: "),
	                 7 + 3 * 6 + kt_count_str(p.err, " 150\n"));
	kt_proc_free(&p);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_parse_u64),
		cmocka_unit_test(test_config_parse_u64_rejects_blank_then_sign),
		cmocka_unit_test(test_config_parse_bool),
		cmocka_unit_test(test_config_parse_signal),
		cmocka_unit_test(test_config_defaults),
		cmocka_unit_test(test_config_valid_values_are_silent),
		cmocka_unit_test(test_config_bad_values_warn_once_and_use_defaults),
		cmocka_unit_test(test_config_buffer_rounding_and_range),
		cmocka_unit_test(test_config_disabled),
		cmocka_unit_test(test_config_dir_too_long),
		cmocka_unit_test(test_config_budget_settings),
		cmocka_unit_test(test_config_sched),
		cmocka_unit_test(test_config_trigger_on),
		cmocka_unit_test(test_config_relative_dir_is_made_absolute),
		cmocka_unit_test(test_config_warn_once_per_message),
	};
	ssize_t n;
	int r;

	if (argc > 1 && strcmp(argv[1], "--dump-config") == 0) {
		dump_config();
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "--warn") == 0) {
		warn_child();
		return 0;
	}
	kunit_reexec(argv, NULL);
	n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
	self_path[n > 0 ? n : 0] = 0;
	r = cmocka_run_group_tests_name("config", tests, NULL, NULL);
	kunit_cleanup();
	return r;
}
