/*
 * test_e2e_stress.c - the library under stress (issue 4), with
 * e2e/stress_prog.c: many more threads than cores, created and exiting all
 * the time, calling traced functions as fast as they can; snapshots every
 * few ms by API and by SIGUSR2 at the same time; a 1 MiB ring per core
 * that wraps many times a second.  Every snapshot is validated (file CRCs
 * independently) and decoded, and every decoded call is checked:
 *
 *   - nothing invented: its function is one the program has;
 *   - nothing mis-attributed: all f/g/w calls of a thread belong to one
 *     family, the thread's name (w<i>) agrees, and the nesting is one the
 *     program makes (f_i in g_i or w_i, g_i in w_i);
 *   - no damaged block; exits lost mid-window only if a loss counter other
 *     than OVERWRITTEN_BLOCKS says events were lost.
 *
 * Hazards 3, 4, 5, 6, 7 and 9 (threads exiting at any time).  Prints the
 * figures (events/s, snapshots, threads).  KTRACE_STRESS_MS overrides the
 * duration (default 3000 ms).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kdec.h"
#include "ktest.h"
#include "ktrace.h"

#define PROG KTRACE_TEST_BINARY_DIR "/e2e_stress"

/* "f_12" -> kind 'f', family 12; other known functions -> kind 'o';
 * unknown -> 0. */
static int classify(const char *name, int *fam)
{
	static const char *const other[] = {"main", "snapper", "signaller", "spawn_one", NULL};
	char *end;

	*fam = -1;
	if ((name[0] == 'f' || name[0] == 'g' || name[0] == 'w') && name[1] == '_') {
		long v = strtol(name + 2, &end, 10);
		if (end != name + 2 && *end == 0 && v >= 0 && v < 16) {
			*fam = (int)v;
			return name[0];
		}
		return 0;
	}
	for (int i = 0; other[i]; i++)
		if (!strcmp(name, other[i]))
			return 'o';
	return 0;
}

struct totals {
	uint64_t files, calls, events, threads_seen, lost_exits, race, trunc;
	uint64_t api_files, sig_files;
	/* problems, by kind, with the first example of each */
	uint64_t holes, damaged, invented, misattributed, misnested, unexplained_lost;
	uint64_t nest_in_holed;   /* mis-nested calls in files that have a hole */
	char first[6][512];
	char fatal[4600];         /* a file that cannot be checked at all */
};

enum { P_HOLE, P_DAMAGED, P_INVENTED, P_MISATTR, P_NEST, P_LOST };

#define PROBLEM(tot, kind, counter, ...)                                        \
	do {                                                                    \
		if ((tot)->counter++ == 0)                                      \
			snprintf((tot)->first[kind], sizeof((tot)->first[kind]), __VA_ARGS__); \
	} while (0)

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Each core's blocks must be one unbroken run of S values. */
static void check_holes(const char *path, const struct kt_file *f, struct totals *tot)
{
	uint32_t cnt, ncpu = kt_file_info(f)->ncpus;
	uint64_t sz;
	const unsigned char *p = kt_file_section(f, KTRACE_SEC_BLOCKS, &cnt, &sz);
	uint32_t *s = malloc(sizeof(uint32_t) * (cnt + 1)), n;

	for (uint32_t c = 0; c < ncpu; c++) {
		const unsigned char *q = p;
		n = 0;
		for (uint32_t i = 0; i < cnt; i++) {
			const struct ktrace_block_rec *r = (const void *)q;
			if (r->cpu == c)
				s[n++] = r->start;
			q += sizeof(*r) + (size_t)r->nwords * 4;
		}
		qsort(s, n, sizeof(*s), cmp_u32);
		for (uint32_t i = 1; i < n; i++)
			if (s[i] != s[i - 1] + KTRACE_BLOCK_WORDS)
				PROBLEM(tot, P_HOLE, holes,
				        "%s: cpu %u: %u blocks missing between S=%u and S=%u, in the "
				        "middle of the window (NOT_COPIED_OVERWRITTEN counter %llu)", path, c,
				        (s[i] - s[i - 1]) / KTRACE_BLOCK_WORDS - 1, s[i - 1], s[i],
				        (unsigned long long)kt_file_loss(f)->count[KTRACE_LOSS_NOT_COPIED_OVERWRITTEN]);
	}
	free(s);
}

/* Runs in a checker process (check_files): a file that cannot be checked
 * at all is reported in tot->fatal, for the test's process to fail on. */
static void check_file(const char *path, struct totals *tot)
{
	struct kt_file f;
	struct kd_dec *d;
	uint64_t losses = 0;

	if (kt_file_load(path, &f) != 0) {
		snprintf(tot->fatal, sizeof(tot->fatal), "%s: %s", path, f.why);
		return;
	}
	if (f.bad_blocks)
		PROBLEM(tot, P_DAMAGED, damaged, "%s: %u blocks fail their CRC", path, f.bad_blocks);
	uint64_t holes_before = tot->holes;
	check_holes(path, &f, tot);
	int holed = tot->holes != holes_before;
	kt_file_free(&f);
	d = kd_open(path);
	if (d == NULL) {
		snprintf(tot->fatal, sizeof(tot->fatal), "%s does not decode", path);
		return;
	}
	if (d->snap.damaged_blocks || d->snap.unreadable_blocks)
		PROBLEM(tot, P_DAMAGED, damaged, "%s: %u damaged, %u unreadable blocks", path,
		        d->snap.damaged_blocks, d->snap.unreadable_blocks);
	for (int i = 0; i < KTRACE_LOSS_COUNT; i++)
		if (i != KTRACE_LOSS_OVERWRITTEN_BLOCKS && i != KTRACE_LOSS_SNAPSHOTS_SUPPRESSED &&
		    i != KTRACE_LOSS_SNAPSHOTS_FAILED && i != KTRACE_LOSS_SNAPSHOT_RACE &&
		    i != KTRACE_LOSS_NOT_COPIED_OVERWRITTEN && i != KTRACE_LOSS_NOT_COPIED_NO_MEMORY)
			losses += d->snap.loss.count[i];

	int *fam_of = malloc(sizeof(int) * (d->nthreads + 1));
	for (uint32_t t = 0; t < d->nthreads; t++)
		fam_of[t] = -1;
	for (uint32_t k = 0; k < d->ncalls; k++) {
		const struct kd_dec_call *c = &d->calls[k];
		const char *name = kd_func(d, c);
		int fam, kind = classify(name, &fam);

		if (c->flags & KD_CALL_SPAN) {
			PROBLEM(tot, P_INVENTED, invented, "%s: a span (%s) the program never made",
			        path, name);
			continue;
		}
		if (kind == 0) {
			PROBLEM(tot, P_INVENTED, invented,
			        "%s: call of '%s', which the program does not have (thread %s)", path,
			        name, d->threads[c->thread].name);
			continue;
		}
		if (c->flags & (KD_CALL_TRUNC_BEGIN | KD_CALL_TRUNC_END))
			tot->trunc++;
		if (kind == 'o')
			continue;
		int *tf = &fam_of[c->thread];
		if (*tf < 0)
			*tf = fam;
		else if (*tf != fam)
			PROBLEM(tot, P_MISATTR, misattributed,
			        "%s: thread %d (%s) calls %s and functions of family %d", path,
			        d->threads[c->thread].tid, d->threads[c->thread].name, name, *tf);
		if (c->parent != KD_NONE) {
			const struct kd_dec_call *p = &d->calls[c->parent];
			int pf, pk = classify(kd_func(d, p), &pf);
			int ok = pf == fam && ((kind == 'f' && (pk == 'g' || pk == 'w')) ||
			                       (kind == 'g' && pk == 'w'));
			if (!ok || c->depth != p->depth + 1 || p->thread != c->thread) {
				/* A hole (counted above) explains these; others not. */
				if (holed)
					tot->nest_in_holed++;
				else
					PROBLEM(tot, P_NEST, misnested,
					        "%s: %s called from %s on thread %d", path, name,
					        kd_func(d, p), d->threads[c->thread].tid);
			}
		}
	}
	for (uint32_t t = 0; t < d->nthreads; t++) {
		const char *n = d->threads[t].name;
		if (fam_of[t] >= 0 && n[0] == 'w' && n[1] >= '0' && n[1] <= '9' &&
		    atoi(n + 1) != fam_of[t])
			PROBLEM(tot, P_MISATTR, misattributed, "%s: thread %d named %s runs family %d",
			        path, d->threads[t].tid, n, fam_of[t]);
		if (fam_of[t] >= 0)
			tot->threads_seen++;
	}
	free(fam_of);
	if (losses == 0 && (d->lost_exits != 0 || kd_count_flags(d, KD_CALL_EXIT_LOST) != 0))
		PROBLEM(tot, P_LOST, unexplained_lost,
		        "%s: %llu exits lost in the window with no event loss counted", path,
		        (unsigned long long)d->lost_exits);
	tot->lost_exits += d->lost_exits;
	tot->race += d->snap.loss.count[KTRACE_LOSS_NOT_COPIED_OVERWRITTEN];
	tot->files++;
	tot->calls += d->ncalls;
	tot->events += d->events;
	if (!strcmp(d->snap.info.reason, "stress-api"))
		tot->api_files++;
	else if (!strcmp(d->snap.info.reason, "signal SIGUSR2"))
		tot->sig_files++;
	else
		snprintf(tot->fatal, sizeof(tot->fatal), "%s: reason '%s'", path,
		         d->snap.info.reason);
	kd_dec_free(d);
}

/* Checks every file, in CHECKERS child processes that each take every
 * CHECKERS-th file and send back their totals: the same checks of the same
 * files, on all cores (on one, checking took three quarters of the test). */
#define CHECKERS 2
#define ADD(c) tot->c += t->c
static void add_totals(struct totals *tot, const struct totals *t)
{
	const uint64_t before[6] = {tot->holes, tot->damaged, tot->invented, tot->misattributed,
	                            tot->misnested, tot->unexplained_lost};
	const uint64_t mine[6] = {t->holes, t->damaged, t->invented, t->misattributed,
	                          t->misnested, t->unexplained_lost};
	ADD(files); ADD(calls); ADD(events); ADD(threads_seen); ADD(lost_exits); ADD(race);
	ADD(trunc); ADD(api_files); ADD(sig_files); ADD(holes); ADD(damaged); ADD(invented);
	ADD(misattributed); ADD(misnested); ADD(unexplained_lost); ADD(nest_in_holed);
	for (int i = 0; i < 6; i++)
		if (before[i] == 0 && mine[i] != 0)
			memcpy(tot->first[i], t->first[i], sizeof(tot->first[i]));
	if (!tot->fatal[0] && t->fatal[0])
		memcpy(tot->fatal, t->fatal, sizeof(tot->fatal));
}
#undef ADD

static void check_files(char **files, int nf, struct totals *tot)
{
	int fd[CHECKERS];
	pid_t pid[CHECKERS];

	fflush(stdout);
	fflush(stderr);
	for (int k = 0; k < CHECKERS; k++) {
		int pfd[2];
		assert_int_equal(pipe(pfd), 0);
		pid[k] = fork();
		assert_true(pid[k] >= 0);
		if (pid[k] == 0) {
			static struct totals t;
			const char *b = (const char *)&t;
			close(pfd[0]);
			for (int i = k; i < nf && !t.fatal[0]; i += CHECKERS)
				check_file(files[i], &t);
			for (size_t off = 0; off < sizeof(t);) {
				ssize_t w = write(pfd[1], b + off, sizeof(t) - off);
				if (w <= 0)
					_exit(1);
				off += (size_t)w;
			}
			_exit(0);
		}
		close(pfd[1]);
		fd[k] = pfd[0];
	}
	for (int k = 0; k < CHECKERS; k++) {
		static struct totals t;
		char *b = (char *)&t;
		size_t off = 0;
		int st = 0;
		while (off < sizeof(t)) {
			ssize_t r = read(fd[k], b + off, sizeof(t) - off);
			if (r <= 0)
				break;
			off += (size_t)r;
		}
		close(fd[k]);
		assert_int_equal(waitpid(pid[k], &st, 0), pid[k]);
		if (off != sizeof(t) || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("checker %d of the snapshot files died (status %#x)", k, st);
		add_totals(tot, &t);
	}
	if (tot->fatal[0])
		fail_msg("%s", tot->fatal);
}

static void run_stress(const char *const *extra, const char *max_live)
{
	char *dir = kt_mkdtemp("stress");
	char envdir[300], line[512], dur[32];
	const char *env[20];
	size_t n = 0;
	struct kt_proc p;
	struct totals tot;
	unsigned long long calls = 0;
	int threads = 0, api_ok = 0, api_fail = 0, sigs = 0;
	long long elapsed = 0;
	char **files;

	snprintf(dur, sizeof(dur), "%s",
	         getenv("KTRACE_STRESS_MS") ? getenv("KTRACE_STRESS_MS") : "3000");
	snprintf(envdir, sizeof(envdir), "KTRACE_DIR=%s", dir);
	env[n++] = envdir;
	env[n++] = "KTRACE_QUIET=1";
	env[n++] = "KTRACE_BUFFER_MB=1";
	/* Snapshots every few ms: far above the default files/MiB limit. */
	env[n++] = "KTRACE_MAX_FILES_PER_MIN=100000";
	env[n++] = "KTRACE_MAX_MB_PER_MIN=100000000";
	env[n++] = "KTRACE_ENABLE";
	env[n++] = "KTRACE_SIGNAL";
	env[n++] = "KTRACE_RSEQ";
	for (size_t i = 0; extra && extra[i]; i++)
		env[n++] = extra[i];
	env[n] = NULL;
	char *argv[] = {(char *)PROG, dur, (char *)max_live, (char *)"20", (char *)"15",
	                (char *)"60", NULL};
	int64_t t0 = kt_now_ms();
	assert_int_equal(kt_spawn(&p, argv, env, NULL), 0);
	if (kt_wait(&p, 240000) != 0)
		fail_msg("stress program failed (status %#x); stderr:\n%s", p.status, p.err);
	const char *s = strstr(p.out, "stats ");
	assert_non_null(s);
	snprintf(line, sizeof(line), "%s", s);
	assert_int_equal(sscanf(line, "stats calls=%llu threads=%d api_ok=%d api_fail=%d signals=%d "
	                        "elapsed_ms=%lld", &calls, &threads, &api_ok, &api_fail, &sigs,
	                        &elapsed), 6);
	if (p.err_len)
		fail_msg("unexpected stderr:\n%s", p.err);
	int64_t t1 = kt_now_ms();

	memset(&tot, 0, sizeof(tot));
	int nf = kt_list_snapshots(dir, &files);
	assert_int_equal(kt_count_entries(dir), nf); /* nothing but whole snapshots */
	check_files(files, nf, &tot);
	kt_free_list(files);
	int64_t t2 = kt_now_ms();

	print_message("stress: %d threads created (max %s alive on %ld cpus), %llu calls in %lld ms "
	              "= %.1f M events/s; snapshots: %d API ok (%d failed), %d signals -> "
	              "%llu API + %llu signal files; decoded %llu calls (%llu records), "
	              "%llu cut at window edges, %llu lost exits, %llu blocks dropped as raced; "
	              "run %lld ms, check %lld ms\n",
	              threads, max_live, sysconf(_SC_NPROCESSORS_ONLN), calls, elapsed,
	              (double)calls * 2 / (double)elapsed / 1000.0, api_ok, api_fail, sigs,
	              (unsigned long long)tot.api_files, (unsigned long long)tot.sig_files,
	              (unsigned long long)tot.calls, (unsigned long long)tot.events,
	              (unsigned long long)tot.trunc, (unsigned long long)tot.lost_exits,
	              (unsigned long long)tot.race, (long long)(t1 - t0), (long long)(t2 - t1));
	static const char *const what[] = {"holes mid-window", "damaged blocks", "invented calls",
	                                   "mis-attributed calls", "mis-nested calls",
	                                   "unexplained lost exits"};
	const uint64_t counts[] = {tot.holes, tot.damaged, tot.invented, tot.misattributed,
	                           tot.misnested, tot.unexplained_lost};
	uint64_t problems = 0;
	if (tot.nest_in_holed)
		print_error("%llu mis-nested calls in files with a hole (a consequence of it)\n",
		            (unsigned long long)tot.nest_in_holed);
	for (int i = 0; i < 6; i++)
		if (counts[i]) {
			print_error("%llu %s; first: %s\n", (unsigned long long)counts[i], what[i],
			            tot.first[i]);
			problems += counts[i];
		}
	assert_int_equal(problems, 0);
	assert_int_equal(api_fail, 0);
	assert_int_equal(tot.api_files, (uint64_t)api_ok);
	assert_true(tot.sig_files >= 1);
	assert_true(threads > 16);
	kt_proc_free(&p);
	kt_rmtree(dir);
	free(dir);
}

static void test_e2e_stress_rseq(void **state)
{
	(void)state;
	run_stress(NULL, "24");
}

static void test_e2e_stress_locked(void **state)
{
	static const char *const env[] = {"KTRACE_RSEQ=0", NULL};
	(void)state;
	run_stress(env, "24");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e2e_stress_rseq),
		cmocka_unit_test(test_e2e_stress_locked),
	};
	return cmocka_run_group_tests_name("e2e_stress", tests, NULL, NULL);
}
