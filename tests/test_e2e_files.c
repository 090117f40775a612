/*
 * test_e2e_files.c - snapshot files under faults (DESIGN hazard 11, issue
 * 4 "Files"): directory missing, a path through a regular file, not
 * writable (non-root only), disk full through RLIMIT_FSIZE, symlinks
 * planted where the file will go.  Each time: a clear message on stderr
 * exactly once, no partial or temporary file, no crash, and tracing goes
 * on: once the condition is fixed the next snapshot works and holds every
 * call made meanwhile.
 *
 * The program is e2e/traced_calls.c in "files" mode: for every "snap"
 * line on stdin it runs its 8 workers and calls ktrace_snapshot().
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"
#include "ktrace.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_calls"
#define LEAF_A_PER_ROUND 10800 /* sum over workers i of (i + 1) * 300 */

struct run {
	struct kt_proc p;
	char *top;        /* scratch directory, removed at the end */
	char dir[512];    /* KTRACE_DIR */
	int rounds;       /* "snap" lines sent */
};

static void start(struct run *r, const char *tag, const char *sub,
                  const struct kt_spawn_opts *o)
{
	char envdir[700], line[128];
	const char *env[] = {envdir, "KTRACE_QUIET=1", "KTRACE_BUFFER_MB=8", "KTRACE_ENABLE",
	                     "KTRACE_RSEQ", "KTRACE_CLOCK", NULL};
	char *argv[] = {(char *)PROG, (char *)"files", NULL};

	memset(r, 0, sizeof(*r));
	r->top = kt_mkdtemp(tag);
	assert_non_null(r->top);
	snprintf(r->dir, sizeof(r->dir), "%s%s", r->top, sub);
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", r->dir);
	assert_int_equal(kt_spawn(&r->p, argv, env, o), 0);
	assert_int_equal(kt_expect_line(&r->p, "pid ", line, sizeof(line), 30000), 0);
}

/* One round of work and a snapshot; returns its rc, path in path. */
static int snap(struct run *r, char *path, size_t len)
{
	char line[4600];
	int rc = -99;

	assert_int_equal(kt_send(&r->p, "snap\n"), 0);
	r->rounds++;
	if (kt_expect_line(&r->p, "snapshot ", line, sizeof(line), 60000) != 0)
		fail_msg("no answer (status %#x); stderr:\n%s", r->p.status, r->p.err);
	path[0] = 0;
	if (sscanf(line, "snapshot %d %4399s", &rc, path) < 1)
		fail_msg("bad line %s", line);
	(void)len;
	return rc;
}

static void finish(struct run *r)
{
	if (kt_wait(&r->p, 30000) != 0)
		fail_msg("program failed (status %#x); stderr:\n%s", r->p.status, r->p.err);
	kt_proc_free(&r->p);
	kt_rmtree(r->top);
	free(r->top);
}

/* The good snapshot after the fault: whole, 0600, every round's calls in
 * it, and the failed snapshots counted. */
static void check_good(struct run *r, const char *path, uint64_t failed)
{
	struct stat st;
	struct kt_file f;

	assert_int_equal(strncmp(path, r->dir, strlen(r->dir)), 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	if (kt_file_load(path, &f) != 0)
		fail_msg("%s: %s", path, f.why);
	assert_int_equal(f.bad_blocks, 0);
	kt_file_free(&f);
	struct kd_dec *d = kd_open(path);
	assert_non_null(d);
	assert_int_equal(d->snap.damaged_blocks, 0);
	assert_int_equal(d->snap.loss.count[KTRACE_LOSS_SNAPSHOTS_FAILED], failed);
	assert_int_equal(d->snap.loss.count[KTRACE_LOSS_OVERWRITTEN_BLOCKS], 0);
	/* Tracing went on through the failures. */
	assert_int_equal(kd_count(d, KD_NONE, "leaf_a"),
	                 (uint64_t)r->rounds * LEAF_A_PER_ROUND);
	kd_dec_free(d);
}

static void expect_one_message(struct run *r, const char *what)
{
	if (kt_count_str(r->p.err, "ktrace: ") != 1 || kt_count_str(r->p.err, what) != 1)
		fail_msg("expected exactly one message with '%s', got:\n%s", what, r->p.err);
}

static void test_e2e_files_dir_missing(void **state)
{
	struct run r;
	char path[4400];

	(void)state;
	start(&r, "missing", "/not/yet", NULL);
	assert_int_equal(snap(&r, path, sizeof(path)), KTRACE_EIO);
	assert_int_equal(snap(&r, path, sizeof(path)), KTRACE_EIO);
	expect_one_message(&r, "cannot create a snapshot file");
	assert_non_null(strstr(r.p.err, r.dir));
	assert_non_null(strstr(r.p.err, "No such file or directory"));
	assert_int_equal(kt_count_entries(r.top), 0);
	/* Fix it: the next snapshot works. */
	char mid[600];
	snprintf(mid, sizeof(mid), "%s/not", r.top);
	assert_int_equal(mkdir(mid, 0700), 0);
	assert_int_equal(mkdir(r.dir, 0700), 0);
	assert_int_equal(snap(&r, path, sizeof(path)), 0);
	check_good(&r, path, 2);
	assert_int_equal(kt_count_entries(r.dir), 1);
	expect_one_message(&r, "cannot create a snapshot file");
	finish(&r);
}

static void test_e2e_files_path_through_regular_file(void **state)
{
	struct run r;
	char path[4400], file[600];

	(void)state;
	start(&r, "notdir", "/file/sub", NULL);
	snprintf(file, sizeof(file), "%s/file", r.top);
	int fd = open(file, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(snap(&r, path, sizeof(path)), KTRACE_EIO);
	assert_int_equal(snap(&r, path, sizeof(path)), KTRACE_EIO);
	expect_one_message(&r, "cannot create a snapshot file");
	assert_non_null(strstr(r.p.err, "Not a directory"));
	struct stat st;
	assert_int_equal(stat(file, &st), 0);
	assert_int_equal(st.st_size, 0); /* nothing written through it */
	assert_int_equal(unlink(file), 0);
	assert_int_equal(mkdir(file, 0700), 0);
	assert_int_equal(mkdir(r.dir, 0700), 0);
	assert_int_equal(snap(&r, path, sizeof(path)), 0);
	check_good(&r, path, 2);
	finish(&r);
}

/* A directory the process may not write to.  As root (which writes
 * anywhere) the program runs as nobody (uid 65534) instead. */
static void test_e2e_files_dir_not_writable(void **state)
{
	struct run r;
	struct kt_spawn_opts o = {0, NULL, 0, 0};
	char path[4400];
	int root = geteuid() == 0;

	(void)state;
	if (root)
		o.run_as_uid = 65534;
	start(&r, "ro", "/ro", &o);
	assert_int_equal(chmod(r.top, 0755), 0);
	assert_int_equal(mkdir(r.dir, root ? 0755 : 0500), 0);
	assert_int_equal(snap(&r, path, sizeof(path)), KTRACE_EIO);
	assert_int_equal(snap(&r, path, sizeof(path)), KTRACE_EIO);
	expect_one_message(&r, "cannot create a snapshot file");
	assert_non_null(strstr(r.p.err, "Permission denied"));
	assert_int_equal(kt_count_entries(r.dir), 0);
	if (root)
		assert_int_equal(chown(r.dir, 65534, 65534), 0);
	else
		assert_int_equal(chmod(r.dir, 0700), 0);
	assert_int_equal(snap(&r, path, sizeof(path)), 0);
	check_good(&r, path, 2);
	finish(&r);
}

/* Disk full: the writer thread gets EFBIG (SIGXFSZ is blocked there), the
 * program is not killed, nothing is left, and once the limit is raised the
 * next snapshot is whole. */
static void test_e2e_files_disk_full_rlimit_fsize(void **state)
{
	struct run r;
	struct kt_spawn_opts o = {16 * 1024, NULL, 0, 0};
	char path[4400];

	(void)state;
	start(&r, "fsize", "", &o);
	assert_int_equal(snap(&r, path, sizeof(path)), KTRACE_EIO);
	assert_int_equal(snap(&r, path, sizeof(path)), KTRACE_EIO);
	expect_one_message(&r, "cannot write a snapshot");
	assert_non_null(strstr(r.p.err, "File too large"));
	assert_int_equal(kt_count_entries(r.dir), 0); /* no partial, no temporary */
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	assert_int_equal(prlimit(r.p.pid, RLIMIT_FSIZE, &rl, NULL), 0);
	assert_int_equal(snap(&r, path, sizeof(path)), 0);
	check_good(&r, path, 2);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 16 * 1024);
	assert_int_equal(kt_count_entries(r.dir), 1);
	finish(&r);
}

/* Symlinks planted under every name the writer may try (final names for
 * the next minute, temporary names): none is followed, the victim outside
 * the directory is untouched, the snapshot lands under a fresh name. */
static void test_e2e_files_symlink_planted(void **state)
{
	struct run r;
	char path[4400], victim[600], absent[600], link_[700], buf[64];
	int pid, planted = 0;

	(void)state;
	start(&r, "symlink", "/out", NULL);
	pid = r.p.pid;
	assert_int_equal(mkdir(r.dir, 0700), 0);
	snprintf(victim, sizeof(victim), "%s/victim", r.top);
	snprintf(absent, sizeof(absent), "%s/absent", r.top);
	int fd = open(victim, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "precious", 8), 8);
	close(fd);
	time_t now = time(NULL);
	for (int dt = -2; dt <= 60; dt++) {
		time_t t = now + dt;
		struct tm tm;
		char stamp[32];
		gmtime_r(&t, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
		for (int seq = 1; seq <= 3; seq++) {
			snprintf(link_, sizeof(link_), "%s/ktrace-%d-%s-%d.ktrace", r.dir, pid, stamp, seq);
			assert_int_equal(symlink(seq == 2 ? absent : victim, link_), 0);
			planted++;
		}
	}
	for (int seq = 0; seq <= 3; seq++)
		for (int i = 0; i < 100; i++) {
			snprintf(link_, sizeof(link_), "%s/.ktrace-%d-%d-%d.tmp", r.dir, pid, seq, i);
			assert_int_equal(symlink(i % 2 ? absent : victim, link_), 0);
			planted++;
		}
	assert_int_equal(snap(&r, path, sizeof(path)), 0);
	check_good(&r, path, 0);
	/* The victim is intact and nothing appeared outside the directory. */
	fd = open(victim, O_RDONLY);
	assert_true(fd >= 0);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(read(fd, buf, sizeof(buf)), 8);
	close(fd);
	assert_string_equal(buf, "precious");
	assert_int_equal(access(absent, F_OK), -1);
	assert_int_equal(kt_count_entries(r.top), 2); /* out/ and victim */
	/* Every planted link is still a link; exactly one new entry. */
	assert_int_equal(kt_count_entries(r.dir), planted + 1);
	assert_string_equal(r.p.err, "");
	finish(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_files_dir_missing),
		cmocka_unit_test(test_e2e_files_path_through_regular_file),
		cmocka_unit_test(test_e2e_files_dir_not_writable),
		cmocka_unit_test(test_e2e_files_disk_full_rlimit_fsize),
		cmocka_unit_test(test_e2e_files_symlink_planted),
	};
	return cmocka_run_group_tests_name("e2e_files", tests, NULL, NULL);
}
