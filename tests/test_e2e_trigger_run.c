/*
 * test_e2e_trigger_run.c - KTRACE_TRIGGER_ON=run (DESIGN "Triggers",
 * "Scheduling"), with e2e/trigger_run_prog.c: a request over the threshold
 * in wall time only because another thread of the machine had its cpu
 * fires no trigger and is counted as mostly preemption; one slow on the
 * cpu that ends during the first one's trigger delay, and one slow because
 * it waited, do fire.  With the default (wall) the preempted one fires and
 * its pending trigger suppresses the slow one behind it; each trigger
 * record carries the preempted time.
 * Skipped where the kernel does not report context switches.
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

#include "ktest.h"
#include "ktrace.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_trigger_run"
#define THRESHOLD_NS 20000000ull

struct req {
	long long wall_us, cpu_us;
};

struct run {
	struct kt_proc p;
	char *dir;
	struct req preempted, oncpu, blocked;
	char final[4352];
};

static void parse_req(const char *out, const char *name, struct req *q)
{
	char key[64];
	const char *s;

	snprintf(key, sizeof(key), "req %s wall_us ", name);
	s = strstr(out, key);
	if (!s)
		fail_msg("no line '%s' in:\n%s", key, out);
	if (sscanf(s + strlen(key), "%lld cpu_us %lld", &q->wall_us, &q->cpu_us) != 2)
		fail_msg("bad line for %s", name);
}

static void run(struct run *r, const char *trigger_on)
{
	char envdir[300], on[64];
	const char *env[] = {envdir, "KTRACE_QUIET=1", "KTRACE_ENABLE", "KTRACE_SIGNAL",
	                     "KTRACE_TRIGGER_US=20000", "KTRACE_TRIGGER_PCT",
	                     "KTRACE_TRIGGER_DELAY_MS=1000", "KTRACE_MAX_SNAPSHOTS_PER_MIN",
	                     "KTRACE_MAX_FILES_PER_MIN", "KTRACE_SCHED", "KTRACE_BUFFER_MB=2",
	                     on, NULL};
	char *argv[] = {(char *)PROG, NULL};
	const char *s;

	memset(r, 0, sizeof(*r));
	r->dir = kt_mkdtemp("trigrun");
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", r->dir);
	snprintf(on, sizeof(on), "KTRACE_TRIGGER_ON=%s", trigger_on);
	assert_int_equal(kt_spawn(&r->p, argv, env, NULL), 0);
	if (kt_expect_line(&r->p, "done", NULL, 0, 60000) != 0)
		fail_msg("program did not finish; stderr:\n%s", r->p.err);
	parse_req(r->p.out, "preempted", &r->preempted);
	parse_req(r->p.out, "oncpu", &r->oncpu);
	parse_req(r->p.out, "blocked", &r->blocked);
	s = strstr(r->p.out, "snapshot 0 ");
	if (!s)
		fail_msg("final snapshot failed:\n%s", r->p.out);
	sscanf(s + 11, "%4351s", r->final);
	kt_close_stdin(&r->p);
	if (kt_wait(&r->p, 30000) != 0)
		fail_msg("program failed (%#x); stderr:\n%s", r->p.status, r->p.err);
}

static void finish(struct run *r)
{
	kt_proc_free(&r->p);
	kt_rmtree(r->dir);
	free(r->dir);
}

/* Skip unless the final file says context switches were recorded, and the
 * preempted request really was stretched by preemption (a machine whose
 * scheduler ignored nice would not test anything). */
static int usable(struct run *r, const struct kt_file *fin)
{
	uint32_t n;
	const struct ktrace_sched_hdr *h = kt_file_section(fin, KTRACE_SEC_SCHED, &n, NULL);

	if (!h || h->status != KTRACE_SCHED_RECORDED) {
		print_message("context switches not recorded here (status %u): skipped\n",
		              h ? h->status : 0);
		return 0;
	}
	if (r->preempted.wall_us * 1000 <= (long long)THRESHOLD_NS * 3 / 2 ||
	    r->preempted.cpu_us * 1000 >= (long long)THRESHOLD_NS / 4) {
		print_message("preempted request: wall %lld us, cpu %lld us: not stretched "
		              "enough to test: skipped\n", r->preempted.wall_us, r->preempted.cpu_us);
		return 0;
	}
	return 1;
}

/* The trigger files (every file but the final one), their records. */
static int triggers(struct run *r, struct ktrace_trigger_rec *out, int max)
{
	char **files;
	int n = kt_list_snapshots(r->dir, &files), k = 0;

	for (int i = 0; i < n; i++) {
		struct kt_file f;
		const struct ktrace_trigger_rec *t;

		if (strcmp(files[i], r->final) == 0)
			continue;
		if (kt_file_load(files[i], &f) != 0)
			fail_msg("%s: %s", files[i], f.why);
		t = kt_file_trigger(&f);
		assert_non_null(t);
		assert_int_equal(strncmp(kt_file_info(&f)->reason, "trigger", 7), 0);
		if (k < max)
			out[k] = *t;
		k++;
		kt_file_free(&f);
	}
	kt_free_list(files);
	return k;
}

static int by_end(const void *a, const void *b)
{
	uint64_t x = ((const struct ktrace_trigger_rec *)a)->end_tsc;
	uint64_t y = ((const struct ktrace_trigger_rec *)b)->end_tsc;

	return x < y ? -1 : x > y;
}

static void test_e2e_trigger_run_drops_preempted(void **state)
{
	struct run r;
	struct kt_file fin;
	struct ktrace_trigger_rec t[8];
	int n;

	(void)state;
	run(&r, "run");
	if (kt_file_load(r.final, &fin) != 0)
		fail_msg("%s: %s", r.final, fin.why);
	if (!usable(&r, &fin)) {
		kt_file_free(&fin);
		finish(&r);
		skip();
	}
	n = triggers(&r, t, 8);
	/* oncpu and blocked fired, in that order; preempted did not, and was
	 * counted. */
	if (n != 2)
		fail_msg("%d trigger files, want 2 (preempted: wall %lld us cpu %lld us)", n,
		         r.preempted.wall_us, r.preempted.cpu_us);
	assert_int_equal(kt_file_loss(&fin)->count[KTRACE_LOSS_TRIGGERS_PREEMPTED], 1);
	qsort(t, (size_t)n, sizeof(t[0]), by_end);
	const struct ktrace_trigger_rec *on = &t[0], *bl = &t[1];
	assert_true(on->duration_ns / 1000 + 1000 >= (uint64_t)r.oncpu.cpu_us);
	assert_true(on->duration_ns / 1000 <= (uint64_t)r.oncpu.wall_us + 1000);
	for (int i = 0; i < n; i++) {
		assert_int_equal(t[i].trigger_on, KTRACE_TRIGGER_ON_RUN);
		assert_true(t[i].flags & KTRACE_TRIGGER_SCHED_KNOWN);
		assert_false(t[i].flags & KTRACE_TRIGGER_RUN_FELL_BACK);
		assert_true(t[i].duration_ns - t[i].preempted_ns > THRESHOLD_NS);
	}
	/* The blocked one waited (nanosleep) for most of its time. */
	assert_true(bl->blocked_ns >= 30000000ull);
	kt_file_free(&fin);
	finish(&r);
}

static void test_e2e_trigger_wall_fires_all_with_preempted_time(void **state)
{
	struct run r;
	struct kt_file fin;
	struct ktrace_trigger_rec t[8];
	int n;

	(void)state;
	run(&r, "wall");
	if (kt_file_load(r.final, &fin) != 0)
		fail_msg("%s: %s", r.final, fin.why);
	if (!usable(&r, &fin)) {
		kt_file_free(&fin);
		finish(&r);
		skip();
	}
	n = triggers(&r, t, 8);
	/* preempted and blocked; oncpu came while preempted's was pending. */
	assert_int_equal(n, 2);
	assert_int_equal(kt_file_loss(&fin)->count[KTRACE_LOSS_TRIGGERS_PREEMPTED], 0);
	qsort(t, (size_t)n, sizeof(t[0]), by_end);
	const struct ktrace_trigger_rec *p = &t[0];
	assert_int_equal(p->suppressed, 1);
	assert_true(t[1].blocked_ns >= 30000000ull);
	assert_true(p->duration_ns / 1000 <= (uint64_t)r.preempted.wall_us + 1000);
	assert_int_equal(p->trigger_on, KTRACE_TRIGGER_ON_WALL);
	assert_true(p->flags & KTRACE_TRIGGER_SCHED_KNOWN);
	assert_true(p->npreempt >= 1);
	/* Its run time is about its cpu time: the rest was preemption. */
	if (p->duration_ns - p->preempted_ns > THRESHOLD_NS / 2)
		fail_msg("preempted request: %llu ns, %llu ns of it preempted, cpu %lld us",
		         (unsigned long long)p->duration_ns, (unsigned long long)p->preempted_ns,
		         r.preempted.cpu_us);
	kt_file_free(&fin);
	finish(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_trigger_run_drops_preempted),
		cmocka_unit_test(test_e2e_trigger_wall_fires_all_with_preempted_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
