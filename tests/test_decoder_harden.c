/*
 * test_decoder_harden.c - the decoder against the environment (issue 11,
 * items 8-12): paths in a snapshot that name a FIFO, a directory or a
 * device; files truncated while they are read; out of memory; folded output
 * of a very deep recursion; frames left by longjmp.
 *
 * A test that could hang on a regression (a blocking open) runs under an
 * alarm that fails it instead; decodes under a memory limit run the real
 * ktrace-decode in a child with RLIMIT_AS and a deadline.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "decoder.h"
#include "snapbuild.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1 /* they reserve terabytes of address space */
#else
#define UNDER_SANITIZER 0
#endif

#ifndef KD_FOLD_DEPTH
#define KD_FOLD_DEPTH 512u /* (for running this test on older decoders) */
#endif

static char tmpdir[64];
static const char *hang_what = "?";

static void on_alarm(int sig)
{
	static const char pre[] = "\ntest_decoder_harden: HUNG (no answer within the deadline): ";

	(void)sig;
	(void)!write(2, pre, sizeof(pre) - 1);
	(void)!write(2, hang_what, strlen(hang_what));
	(void)!write(2, "\n", 1);
	_exit(1);
}

/* A regression that blocks fails the test after s seconds, never hangs it. */
static void deadline(unsigned s, const char *what)
{
	hang_what = what;
	signal(SIGALRM, on_alarm);
	alarm(s);
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ktrace-harden-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	alarm(0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* One thread calling one function at addr (inside [0x400000, 0x500000) of
 * a module at path). */
static struct snapbuild *one_call(const char *module_path)
{
	struct snapbuild *sb = snapbuild_new();

	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_func(sb, 0, 0x401000);
	if (module_path)
		snapbuild_module(sb, 0x400000, 0x500000, 0, module_path);
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_exit(sb, 0, 1, 2000, 0);
	return sb;
}

static int has_warning(const struct kd_dec *d, const char *needle)
{
	for (uint32_t i = 0; i < d->snap.warn.n; i++)
		if (strstr(d->snap.warn.lines[i], needle))
			return 1;
	return 0;
}

/* ---- item 8: paths in the file ------------------------------------------------ */

static void test_decoder_harden_module_fifo(void **state)
{
	char fifo[128];
	struct kd_dec_opts o = { 0 }; /* symbols on: the module is opened */
	struct kd_dec_error err;
	struct kd_dec *d;

	(void)state;
	snprintf(fifo, sizeof(fifo), "%s/lib.so", tmpdir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	deadline(20, "decoding a snapshot whose module path is a FIFO with no writer");
	d = snapbuild_decode(one_call(fifo), &o, &err);
	alarm(0);
	assert_non_null(d);
	assert_int_equal(d->ncalls, 1);
	assert_string_equal(kd_names_func(d, d->calls[0].func), "0x401000(lib.so+0x1000)");
	assert_true(has_warning(d, "a FIFO"));
	kd_dec_free(d);
}

static void test_decoder_harden_module_special(void **state)
{
	static const char *const paths[] = { "/dev/zero", "/dev/stdin", "/dev/tty", "/",
		                              "/proc/self/fd/0" };
	struct kd_dec_opts o = { 0 };
	struct kd_dec_error err;

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct kd_dec *d;

		deadline(20, paths[i]);
		d = snapbuild_decode(one_call(paths[i]), &o, &err);
		alarm(0);
		assert_non_null(d);
		assert_int_equal(d->ncalls, 1);
		/* Never symbolized from a special file; a warning says why. */
		assert_non_null(strstr(kd_names_func(d, d->calls[0].func), "0x401000"));
		assert_true(d->snap.warn.n >= 1);
		kd_dec_free(d);
	}
}

/* The snapshot path itself: a FIFO without a writer, a directory. */
static void test_decoder_harden_snapshot_special(void **state)
{
	char fifo[128];
	struct kd_dec_error err;
	struct kd_dec *d;

	(void)state;
	snprintf(fifo, sizeof(fifo), "%s/snap.ktrace", tmpdir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	deadline(20, "kd_dec_open_file on a FIFO with no writer");
	assert_int_not_equal(kd_dec_open_file(fifo, NULL, &d, &err), 0);
	alarm(0);
	assert_null(d);
	assert_int_not_equal(kd_dec_open_file(tmpdir, NULL, &d, &err), 0);
	assert_non_null(strstr(err.msg, "a directory"));
}

/* ---- item 9: truncation while reading --------------------------------------------- */

static const char *trunc_path;
static off_t trunc_to;
static int trunc_done;

static void truncate_hook(const char *path, uint64_t done, uint64_t total)
{
	(void)done;
	(void)total;
	if (!trunc_done && trunc_path && strcmp(path, trunc_path) == 0) {
		trunc_done = 1;
		assert_int_equal(truncate(path, trunc_to), 0);
	}
}

static void test_decoder_harden_snapshot_truncated(void **state)
{
	char path[128];
	uint8_t *buf;
	size_t len;
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec_error err;
	struct kd_dec *d;

	(void)state;
	snapbuild_scenario_golden(sb);
	assert_int_equal(snapbuild_finish(sb, &buf, &len), 0);
	snapbuild_free(sb);
	snprintf(path, sizeof(path), "%s/t.ktrace", tmpdir);
	assert_int_equal(snapbuild_write_file(path, buf, len), 0);
	free(buf);

	trunc_path = path;
	trunc_to = 0; /* a mapped file would lose every page: SIGBUS at once */
	trunc_done = 0;
	kd_read_hook = truncate_hook;
	assert_int_not_equal(kd_dec_open_file(path, NULL, &d, &err), 0);
	kd_read_hook = NULL;
	assert_int_equal(trunc_done, 1);
	assert_null(d);
	assert_int_equal(err.code, KD_EIO);
	assert_non_null(strstr(err.msg, "truncated while it was read"));
}

static uint64_t nreads;
static void count_hook(const char *path, uint64_t done, uint64_t total)
{
	(void)path;
	(void)done;
	(void)total;
	nreads++;
}

/* A regular file is read again for each pass: truncated or rewritten after
 * it was checked, the walk skips what is gone (never a crash, never SIGBUS)
 * and kd_snap_changed() says the output may mix old and new data. */
static void test_decoder_harden_snapshot_changed_between_passes(void **state)
{
	char path[128];
	uint8_t *buf;
	size_t len;
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec_opts o = { .no_symbols = 1, .stream = 1 };
	struct kd_dec_error err;
	struct kd_dec *d;
	struct timespec later[2] = { { 0, UTIME_OMIT }, { 12345, 0 } };

	(void)state;
	snapbuild_scenario_big(sb, 2, 2000000); /* 8 MB: more than the windows hold */
	assert_int_equal(snapbuild_finish(sb, &buf, &len), 0);
	snapbuild_free(sb);
	snprintf(path, sizeof(path), "%s/changed.ktrace", tmpdir);
	assert_int_equal(snapbuild_write_file(path, buf, len), 0);
	free(buf);

	/* Unchanged: decodes whole, not "changed". */
	assert_int_equal(kd_dec_open_file(path, &o, &d, &err), 0);
	assert_int_equal(kd_build_walk(d, (struct kd_sink){ 0 }, &err), 0);
	assert_int_equal(d->counts.calls, 1000000);
	assert_false(kd_snap_changed(&d->snap));
	/* Only its time changes: still "changed" (its bytes may have). */
	assert_int_equal(utimensat(AT_FDCWD, path, later, 0), 0);
	assert_true(kd_snap_changed(&d->snap));
	kd_dec_free(d);

	/* Cut to a quarter after the reader checked it: the walk reads what is
	 * left, counts the rest as unreadable, and the file is "changed". */
	assert_int_equal(kd_dec_open_file(path, &o, &d, &err), 0);
	assert_int_equal(truncate(path, (off_t)(len / 4)), 0);
	nreads = 0;
	kd_read_hook = count_hook;
	assert_int_equal(kd_build_walk(d, (struct kd_sink){ 0 }, &err), 0);
	kd_read_hook = NULL;
	/* What is gone is found gone once per core, not read again for each
	 * block at each of a thread's pieces (9.9 M reads, 15 s, before). */
	if (nreads > 1000)
		fail_msg("%llu reads of an 8 MB file cut to 2 MB", (unsigned long long)nreads);
	assert_true(d->counts.calls < 1000000);
	assert_true(kd_snap_changed(&d->snap));
	kd_dec_free(d);
}

/* The executable named by MODULES is rebuilt (truncated) while its symbols
 * are read: a warning, numeric names, never SIGBUS. */
static void test_decoder_harden_elf_truncated(void **state)
{
	char copy[128], exe[4096], line[4096], cmd[4400];
	FILE *f = fopen("/proc/self/maps", "r");
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec_opts o = { 0 };
	struct kd_dec_error err;
	struct kd_dec *d;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	uint64_t addr = (uint64_t)(uintptr_t)&truncate_hook;
	int found = 0;

	(void)state;
	assert_true(n > 0);
	exe[n] = '\0';
	snprintf(copy, sizeof(copy), "%s/exe-copy", tmpdir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", exe, copy);
	assert_int_equal(system(cmd), 0);
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8];

		if (sscanf(line, "%llx-%llx %7s %llx", &start, &end, perms, &off) == 4 &&
		    perms[2] == 'x' && strstr(line, exe) && addr >= start && addr < end) {
			snapbuild_module(sb, start, end, off, copy);
			found = 1;
		}
	}
	fclose(f);
	assert_true(found);
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_func(sb, 0, addr);
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_exit(sb, 0, 1, 2000, 0);

	trunc_path = copy;
	trunc_to = 64; /* the ELF header survives, nothing after it */
	trunc_done = 0;
	kd_read_hook = truncate_hook;
	d = snapbuild_decode(sb, &o, &err);
	kd_read_hook = NULL;
	assert_non_null(d);
	assert_int_equal(trunc_done, 1);
	assert_true(has_warning(d, "truncated while it was read"));
	assert_non_null(strstr(kd_names_func(d, d->calls[0].func), "exe-copy+0x"));
	kd_dec_free(d);
}

/* ---- item 11: deep recursion, folded output ------------------------------------------ */

#define DEEP 5000u

static void test_decoder_harden_folded_deep(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec_opts o = { .no_symbols = 1 };
	struct kd_dec_error err;
	struct kd_dec *d;
	char *out = NULL, marker[64];
	size_t len = 0, lines = 0;
	uint64_t sum = 0;
	FILE *f;

	(void)state;
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_func(sb, 0, 0x401000);
	for (uint32_t i = 0; i < DEEP; i++)
		snapbuild_enter(sb, 0, 1, 1000 + i, 0);
	for (uint32_t i = 0; i < DEEP; i++)
		snapbuild_exit(sb, 0, 1, 1000 + DEEP + i, 0);
	d = snapbuild_decode(sb, &o, &err);
	assert_non_null(d);
	assert_int_equal(d->ncalls, DEEP);

	f = open_memstream(&out, &len);
	assert_non_null(f);
	assert_int_equal(kd_out_folded_stream(f, d, NULL), 0);
	fclose(f);
	/* Quadratic before: DEEP lines of up to DEEP frames (113 MB here);
	 * now at most DEPTH lines of at most DEPTH + 1 frames (1.2 MB). */
	assert_true(len < (size_t)(KD_FOLD_DEPTH + 2) * (KD_FOLD_DEPTH + 2) * 10);
	snprintf(marker, sizeof(marker), ";0x401000;[up_to_%u_frames_cut] ",
	         DEEP - KD_FOLD_DEPTH);
	assert_non_null(strstr(out, marker));
	assert_null(strstr(strstr(out, marker) + strlen(marker), "frames_cut"));
	for (char *p = out, *nl; *p; p = nl + 1) {
		const char *sp;

		nl = strchr(p, '\n');
		assert_non_null(nl);
		*nl = '\0';
		sp = strrchr(p, ' ');
		assert_non_null(sp);
		sum += strtoull(sp + 1, NULL, 10);
		lines++;
	}
	/* One line per depth up to the limit, then one for everything deeper. */
	assert_int_equal(lines, KD_FOLD_DEPTH + 1);
	/* No self time is lost by the cut: the lines add up to the outer call. */
	assert_int_equal(sum, kd_time_ticks_ns(d, d->calls[0].end - d->calls[0].begin));
	free(out);
	kd_dec_free(d);
}

/* ---- item 12: longjmp ---------------------------------------------------------------- */

/* main > catcher > dive x50 (left by longjmp) > after (called after the
 * jump), then catcher returns: its exit closes the 50 dive frames. */
static void test_decoder_harden_longjmp_summary(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec_opts o = { .no_symbols = 1 };
	struct kd_dec_error err;
	struct kd_dec *d;
	uint64_t t = 1000, lost = 0, at_end = 0;
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	for (uint32_t i = 0; i < 4; i++)
		snapbuild_func(sb, i, 0x401000 + 0x100 * i);
	snapbuild_enter(sb, 0, 1, t += 10, 3); /* main, still running at the end */
	snapbuild_enter(sb, 0, 1, t += 10, 0); /* catcher */
	for (int i = 0; i < 50; i++)
		snapbuild_enter(sb, 0, 1, t += 10, 1); /* dive */
	snapbuild_enter(sb, 0, 1, t += 10, 2);     /* after */
	snapbuild_exit(sb, 0, 1, t += 10, 2);
	snapbuild_exit(sb, 0, 1, t += 10, 0);      /* catcher returns */
	d = snapbuild_decode(sb, &o, &err);
	assert_non_null(d);
	assert_int_equal(d->lost_exits, 50);
	for (uint32_t i = 0; i < d->ncalls; i++) {
		lost += !!(d->calls[i].flags & KD_CALL_EXIT_LOST);
		at_end += (d->calls[i].flags & (KD_CALL_TRUNC_END | KD_CALL_EXIT_LOST)) ==
		          KD_CALL_TRUNC_END;
	}
	assert_int_equal(lost, 50);
	assert_int_equal(at_end, 1);
	f = open_memstream(&out, &len);
	kd_out_summary(f, d);
	fclose(f);
	if (!strstr(out, "0 truncated at the window start, 1 at the end, 50 exits lost"))
		fail_msg("summary does not count the 50 frames apart:\n%s", out);
	free(out);
	kd_dec_free(d);
}

/* ---- item 10: out of memory ------------------------------------------------------------ */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *slurp(const char *path)
{
	size_t len;
	uint8_t *b = snapbuild_read_file(path, &len);
	char *s = malloc(len + 1);

	assert_non_null(b);
	assert_non_null(s);
	memcpy(s, b, len);
	s[len] = '\0';
	free(b);
	return s;
}

/* Run ktrace-decode --format fmt file under RLIMIT_AS = mb MiB; 1 if it ran
 * out of memory (exit 1, one clear line), 0 if it decoded in full. */
static int decode_limited(const char *file, const char *fmt, unsigned mb)
{
	char outp[128], errp[128];
	int64_t t0 = now_ms();
	int status = 0;
	pid_t pid, w;
	char *out, *errs;
	int oom = -2;

	snprintf(outp, sizeof(outp), "%s/out", tmpdir);
	snprintf(errp, sizeof(errp), "%s/err", tmpdir);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { (rlim_t)mb << 20, (rlim_t)mb << 20 };
		int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
			_exit(120);
		setrlimit(RLIMIT_AS, &rl);
		execl(KTRACE_DECODE_PATH, KTRACE_DECODE_PATH, "--format", fmt, "-q", file,
		      (char *)NULL);
		_exit(121);
	}
	/* Prompt: a retry loop or a hang fails here instead of hanging ctest. */
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() - t0 < 60000)
		usleep(10000);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fail_msg("--format %s under %u MiB: no answer within 60 s", fmt, mb);
	}
	out = slurp(outp);
	errs = slurp(errp);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 121) /* the limit was too small to start at all */
		oom = -1;
	else if (WEXITSTATUS(status) == 0 && !strstr(errs, "out of memory") &&
	         !strstr(out, "out of memory"))
		oom = 0;
	else if (WEXITSTATUS(status) == 1 && !strncmp(errs, "ktrace-decode: ", 15) &&
	         strstr(errs, "out of memory") && strchr(errs, '\n') == errs + strlen(errs) - 1)
		oom = 1;
	else
		fail_msg("--format %s under %u MiB: exit %d, neither a full decode nor one clear "
		         "out-of-memory message;\nstderr: %s\nstdout ends: %s", fmt, mb,
		         WEXITSTATUS(status), errs,
		         strlen(out) > 200 ? out + strlen(out) - 200 : out);
	free(out);
	free(errs);
	return oom;
}

static void test_decoder_harden_out_of_memory(void **state)
{
	static const char *const fmts[] = { "stats", "folded" };
	char path[128];
	uint8_t *buf;
	size_t len;
	struct snapbuild *sb;
	int ran_out = 0, full = 0;

	(void)state;
	if (UNDER_SANITIZER)
		skip(); /* RLIMIT_AS cannot work under ASan/TSan's shadow memory */
	sb = snapbuild_new();
	snapbuild_scenario_big(sb, 2, 1000000); /* 4 MB file, 500 k calls */
	assert_int_equal(snapbuild_finish(sb, &buf, &len), 0);
	snapbuild_free(sb);
	snprintf(path, sizeof(path), "%s/big.ktrace", tmpdir);
	assert_int_equal(snapbuild_write_file(path, buf, len), 0);
	free(buf);
	/* From too little to decode at all to enough for everything: every run
	 * either decodes in full or says "out of memory" once and exits 1. */
	for (unsigned mb = 16; mb <= 128; mb += mb / 4)
		for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
			int r = decode_limited(path, fmts[k], mb);

			ran_out += r == 1;
			full += r == 0;
		}
	print_message("out of memory in %d runs, full decodes in %d\n", ran_out, full);
	assert_true(ran_out > 0);
	assert_true(full > 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decoder_harden_module_fifo),
		cmocka_unit_test(test_decoder_harden_module_special),
		cmocka_unit_test(test_decoder_harden_snapshot_special),
		cmocka_unit_test(test_decoder_harden_snapshot_truncated),
		cmocka_unit_test(test_decoder_harden_snapshot_changed_between_passes),
		cmocka_unit_test(test_decoder_harden_elf_truncated),
		cmocka_unit_test(test_decoder_harden_folded_deep),
		cmocka_unit_test(test_decoder_harden_longjmp_summary),
		cmocka_unit_test(test_decoder_harden_out_of_memory),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]); /* e.g. "*folded*" */
	return cmocka_run_group_tests(tests, setup, teardown);
}
