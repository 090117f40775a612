/*
 * test_e2e_requests.c - requests held aside (lib/request.c), checked on the
 * raw records of real snapshots with the independent walker (ktest.c), so
 * that what the library writes is proved apart from the decoder:
 *
 *   - planted slow requests are present whole: their held run has their
 *     REQ_OPEN, every call the program made in them (exact counts) and a
 *     REQ_CLOSE that says SLOW; typical ones leave no record, only counts;
 *   - the REQUESTS section counts every request, and its histogram holds
 *     them all, the longest within the stated 1/16 of the program's own;
 *   - calls that straddle a dropped request's edges keep every thread's
 *     nesting: each function's entries and exits balance over the window;
 *   - nested requests, a request ended on another thread, a request larger
 *     than the hold buffer (SPILLED, every call there), a thread that exits
 *     with a request open, signals while holding, fork while holding, and
 *     the meanwhile rule (OVERLAP: the lock holder's request is kept).
 *
 * Built twice: test_e2e_requests runs request_prog built with
 * -finstrument-functions, test_e2e_requests_lean (KT_REQUESTS_LEAN) the
 * same program built in the lean mode, where a holding thread's records
 * must leave the hooks' assembly for the C paths (lib/record.c).
 *
 * The decoder's view of the same snapshots (nesting, explain) is in the
 * decoder's tests and test_e2e_busy.c.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ktrace_format.h"
#include "kdec.h"
#include "ktest.h"

#if defined(KT_REQUESTS_LEAN)
/* test_e2e_requests_lean: the same program built in the lean mode */
#define PROG KTRACE_TEST_BINARY_DIR "/e2e_request_lean"
#else
#define PROG KTRACE_TEST_BINARY_DIR "/e2e_request"
#endif

struct run {
	struct kt_proc p;
	struct kt_file f;
	struct kt_walk w;
	char dir[4096];
	char snap[4096];
	uint64_t fn_addr[16];
	char fn_name[16][32];
	int nfn;
	uint32_t fn_id[16];        /* compact id + 1, 0 = none */
};

static const char *line_after(const char *out, const char *prefix)
{
	const char *s = out;
	size_t n = strlen(prefix);

	while (s && *s) {
		if (strncmp(s, prefix, n) == 0)
			return s + n;
		s = strchr(s, '\n');
		if (s)
			s++;
	}
	return NULL;
}

static int fn_index(const struct run *r, const char *name)
{
	for (int i = 0; i < r->nfn; i++)
		if (strcmp(r->fn_name[i], name) == 0)
			return i;
	fail_msg("no address for %s", name);
	return -1;
}

/* Run the program, load its snapshot (or the child's, with which = "child "). */
static void run_prog(struct run *r, const char *mode, const char *n, const char *which,
                     const char *const *extra_env)
{
	char *argv[] = {(char *)PROG, (char *)mode, (char *)n, NULL};
	const char *env[16];
	char dirv[4200];
	const char *s;
	int e = 0;
	uint32_t cnt;
	uint64_t size;
	const struct ktrace_func_rec *funcs;
	const struct ktrace_info_rec *info;

	memset(r, 0, sizeof(*r));
	{
		char *d = kt_mkdtemp("req");
		assert_non_null(d);
		snprintf(r->dir, sizeof(r->dir), "%s", d);
		free(d);
	}
	snprintf(dirv, sizeof(dirv), "KTRACE_DIR=%s", r->dir);
	env[e++] = dirv;
	env[e++] = "KTRACE_QUIET=1";
	env[e++] = "KTRACE_FILTER=off";
	for (int i = 0; extra_env && extra_env[i] && e < 15; i++)
		env[e++] = extra_env[i];
	env[e] = NULL;
	if (kt_run(argv, env, &r->p, 120000) != 0)
		fail_msg("%s %s failed (status %d): %s", mode, n, r->p.status, r->p.err);
	s = line_after(r->p.out, which);
	assert_non_null(s);
	sscanf(s, "%4095s", r->snap);
	for (s = r->p.out; (s = line_after(s, "fn ")) != NULL && r->nfn < 16; r->nfn++) {
		if (sscanf(s, "%31s %" SCNx64, r->fn_name[r->nfn], &r->fn_addr[r->nfn]) != 2)
			break;
	}
	if (kt_file_load(r->snap, &r->f) != 0)
		fail_msg("%s: %s", r->snap, r->f.why);
	assert_int_equal(r->f.hdr.version, KTRACE_FORMAT_VERSION);
	info = kt_file_info(&r->f);
	assert_non_null(info);
	r->w.tsc_shift = info->tsc_shift;
	funcs = kt_file_section(&r->f, KTRACE_SEC_FUNCS, &cnt, &size);
	for (uint32_t i = 0; funcs && i < cnt; i++)
		for (int j = 0; j < r->nfn; j++)
			if (funcs[i].addr == r->fn_addr[j] && funcs[i].id != KTRACE_FUNC_NO_ID)
				r->fn_id[j] = funcs[i].id + 1;
	{
		const unsigned char *p = kt_file_section(&r->f, KTRACE_SEC_BLOCKS, &cnt, &size);
		const unsigned char *end = p + size;
		assert_non_null(p);
		while (p < end) {
			const struct ktrace_block_rec *b = (const struct ktrace_block_rec *)p;
			if (kt_walk_block(&r->w, (const uint32_t *)(b + 1), b->nwords, b->start) != 0)
				fail_msg("%s: %s", r->snap, r->w.why);
			p += sizeof(*b) + (size_t)b->nwords * 4;
		}
	}
}

static void free_run(struct run *r)
{
	kt_walk_free(&r->w);
	kt_file_free(&r->f);
	kt_proc_free(&r->p);
	kt_rmtree(r->dir);
}

/* enter (1) / exit (2) of function index fi, or 0. */
static int is_call(const struct run *r, const struct kt_rec *x, int fi)
{
	uint32_t id = r->fn_id[fi];

	if (id == 0 || x->ext_type)
		return 0;
	if (x->ev == KTRACE_EV_ENTER_BASE + id - 1)
		return 1;
	if (x->ev == KTRACE_EV_EXIT_BASE + id - 1)
		return 2;
	return 0;
}

/* The REQUESTS section's kind record for a kind name. */
static const struct ktrace_req_kind_rec *kind_rec(const struct run *r, const char *kind,
                                                  uint64_t *hist_count, uint64_t *hist_max)
{
	uint32_t cnt, ncount;
	uint64_t size, nsize;
	const unsigned char *p = kt_file_section(&r->f, KTRACE_SEC_REQUESTS, &cnt, &size);
	const unsigned char *names = kt_file_section(&r->f, KTRACE_SEC_NAMES, &ncount, &nsize);
	const unsigned char *q = names;
	uint32_t id = 0;

	assert_non_null(p);
	assert_non_null(names);
	for (uint32_t i = 0; i < ncount; i++) {
		const struct ktrace_name_rec *nr = (const struct ktrace_name_rec *)q;
		if (nr->kind == KTRACE_NAME_REQUEST && nr->len == strlen(kind) &&
		    memcmp(nr + 1, kind, nr->len) == 0)
			id = nr->id;
		q += sizeof(*nr) + ((nr->len + 3u) & ~3u);
	}
	assert_int_not_equal(id, 0);
	{
		const struct ktrace_req_hdr *h = (const struct ktrace_req_hdr *)p;
		const unsigned char *x = p + sizeof(*h);
		assert_int_equal(h->sub_bits, 4);
		for (uint32_t k = 0; k < h->nkinds; k++) {
			const struct ktrace_req_kind_rec *kr = (const struct ktrace_req_kind_rec *)x;
			uint64_t c = 0, m = 0;
			x += sizeof(*kr);
			for (uint32_t s = 0; s < kr->nslices; s++) {
				const struct ktrace_req_slice_rec *sr = (const struct ktrace_req_slice_rec *)x;
				const struct ktrace_req_bucket *b = (const struct ktrace_req_bucket *)(sr + 1);
				uint64_t sc = 0;
				for (uint32_t j = 0; j < sr->nbuckets; j++)
					sc += b[j].count;
				assert_int_equal(sc, sr->count);
				c += sr->count;
				if (sr->max_ticks > m)
					m = sr->max_ticks;
				x = (const unsigned char *)(b + sr->nbuckets);
			}
			if (kr->kind_id == id) {
				*hist_count = c;
				*hist_max = m;
				return kr;
			}
		}
	}
	fail_msg("kind %s not in REQUESTS", kind);
	return NULL;
}

/* Index of the REQ_OPEN of request number num (any kind), or -1. */
static long find_open(const struct run *r, uint32_t num)
{
	for (size_t i = 0; i < r->w.n; i++) {
		const struct kt_rec *x = &r->w.recs[i];
		if ((x->ext_type == KTRACE_EXT_REQ_OPEN || x->ext_type == KTRACE_EXT_REQ_OPEN_ID) &&
		    x->payload[0] == num)
			return (long)i;
	}
	return -1;
}

/* Entries of function fi from record i to the end of its held run. */
static uint32_t count_in_run(const struct run *r, size_t i, int fi, uint32_t *close_flags)
{
	uint32_t n = 0;

	*close_flags = 0;
	for (size_t j = i + 1; j < r->w.n; j++) {
		const struct kt_rec *x = &r->w.recs[j];
		if (x->ext_type == KTRACE_EXT_HELD || x->ext_type == KTRACE_EXT_THREAD)
			break;
		if (x->ext_type == KTRACE_EXT_REQ_CLOSE) {
			*close_flags = x->arg;
			break;
		}
		if (is_call(r, x, fi) == 1)
			n++;
	}
	return n;
}

static void test_requests_slow_ones_whole_typical_ones_counted(void **state)
{
	static const char *env[] = {"KTRACE_TRIGGER_US=10000", "KTRACE_SAMPLE_MS=0", NULL};
	struct run r;
	uint64_t hc, hm, opens = 0, after = 0;
	int leaf, slow_io;
	const struct ktrace_req_kind_rec *k;

	(void)state;
	run_prog(&r, "basic", "1000", "snapshot ", env);
	leaf = fn_index(&r, "leaf");
	slow_io = fn_index(&r, "slow_io");
	for (uint32_t num = 100; num <= 1000; num += 100) {
		long i = find_open(&r, num);
		uint32_t flags;
		if (i < 0)
			fail_msg("planted slow request #%u is not in the snapshot", num);
		assert_true(r.w.recs[i].held);
		assert_int_equal(count_in_run(&r, (size_t)i, leaf, &flags), num % 7 + 1);
		assert_int_equal(count_in_run(&r, (size_t)i, slow_io, &flags), 1);
		assert_true(flags & KTRACE_REQ_SLOW);
	}
	for (size_t i = 0; i < r.w.n; i++) {
		const struct kt_rec *x = &r.w.recs[i];
		if (x->ext_type == KTRACE_EXT_REQ_OPEN)
			opens++;
		/* kept only as a trigger's aftermath (the planted ones fire) */
		if (x->ext_type == KTRACE_EXT_REQ_CLOSE &&
		    (x->arg & (KTRACE_REQ_AFTER | KTRACE_REQ_SLOW)) == KTRACE_REQ_AFTER)
			after++;
	}
	k = kind_rec(&r, "get", &hc, &hm);
	assert_int_equal(k->ended, 1000);
	assert_int_equal(hc, 1000);
	assert_int_equal(k->kept_slow + k->kept_sampled + k->kept_other + k->dropped, 1000);
	assert_true(k->kept_slow >= 10);
	assert_int_equal(k->kept_sampled, 0);
	/* Only the kept ones left records: the planted ten, the few over
	 * the running p99.9 and those that followed a trigger until its window
	 * was copied. */
	assert_int_equal(opens, k->kept_slow + k->kept_other);
	assert_true(opens - after <= 10 + 5);
	/* The longest: one of the 30 ms sleeps (the histogram's max is exact). */
	assert_true(hm * 1000 / (kt_file_info(&r.f)->tsc_hz / 1000) >= 30000);
	free_run(&r);
}

/* Entries and exits of a function in the window. */
static void count_calls(const struct run *r, const char *name, uint32_t *en, uint32_t *ex)
{
	int fi = fn_index(r, name);

	*en = *ex = 0;
	for (size_t i = 0; i < r->w.n; i++) {
		int c = is_call(r, &r->w.recs[i], fi);
		*en += c == 1;
		*ex += c == 2;
	}
}

/* Every function's entries and exits balance over the window, but for the
 * ones open while the snapshot was taken (main and the mode's function). */
static void check_balanced(const struct run *r, const char *name, uint32_t want)
{
	uint32_t en, ex;

	count_calls(r, name, &en, &ex);
	if (en != want || ex != want)
		fail_msg("%s: %u entries, %u exits in the window, the program made %u calls", name,
		         en, ex, want);
}

/* Entries and exits balance, however many. */
static void check_pairs(const struct run *r, const char *name)
{
	uint32_t en, ex;

	count_calls(r, name, &en, &ex);
	if (en != ex)
		fail_msg("%s: %u entries, %u exits in the window", name, en, ex);
}

static void test_requests_dropped_edges_keep_nesting(void **state)
{
	/* An absolute threshold nothing reaches: every request is judged, and
	 * none is slow. */
	static const char *env[] = {"KTRACE_SAMPLE_MS=0", "KTRACE_KEEP_PCT=0",
	                            "KTRACE_TRIGGER_US=10000000", NULL};
	static const char *env_nogap[] = {"KTRACE_SAMPLE_MS=0", "KTRACE_KEEP_PCT=0",
	                                  "KTRACE_TRIGGER_US=10000000", "KTRACE_GAP_US=0", NULL};
	struct run r;
	uint64_t hc, hm;

	(void)state;
	/* Gaps recorded as they run: opener() returns inside its request,
	 * closer() is entered inside one; both requests dropped, their edges
	 * kept, so every call is there. */
	run_prog(&r, "unbalanced", "300", "snapshot ", env_nogap);
	check_balanced(&r, "opener", 300);
	check_balanced(&r, "closer", 300);
	/* Only the leaf() after each "close" request ends runs in a gap;
	 * the others ran inside dropped requests, whose records went to the
	 * hold buffer while the thread owned its core's ring (the lean
	 * mode's assembly must leave a holding thread to the C paths). */
	check_balanced(&r, "leaf", 300);
	assert_int_equal(kind_rec(&r, "open", &hc, &hm)->dropped, 300);
	assert_int_equal(kind_rec(&r, "close", &hc, &hm)->dropped, 300);
	free_run(&r);
	/* Gaps held and dropped too: each call lies in dropped runs only, so
	 * its entry (deferred) and exit cancel; whatever is left balances. */
	run_prog(&r, "unbalanced", "300", "snapshot ", env);
	check_pairs(&r, "opener");
	check_pairs(&r, "closer");
	assert_int_equal(kind_rec(&r, "open", &hc, &hm)->dropped, 300);
	free_run(&r);
}

static void test_requests_nested_and_sampled(void **state)
{
	static const char *env[] = {"KTRACE_SAMPLE_MS=1", "KTRACE_KEEP_PCT=0",
	                            "KTRACE_TRIGGER_US=10000000", NULL};
	struct run r;
	uint64_t hc, hm;
	const struct ktrace_req_kind_rec *b, *it;

	(void)state;
	run_prog(&r, "nested", "20000", "snapshot ", env);
	b = kind_rec(&r, "batch", &hc, &hm);
	assert_int_equal(b->ended, 20000);
	assert_int_equal(hc, 20000);
	it = kind_rec(&r, "item", &hc, &hm);
	assert_int_equal(it->ended, 60000);
	assert_int_equal(hc, 60000);
	/* A sampled batch keeps its items (NESTED) and the reverse. */
	assert_true(b->kept_sampled + b->kept_other > 0);
	assert_true(it->kept_sampled + it->kept_other > 0);
	assert_int_equal(b->kept_slow + b->kept_sampled + b->kept_other + b->dropped, 20000);
	assert_int_equal(it->kept_slow + it->kept_sampled + it->kept_other + it->dropped, 60000);
	/* A kept run is a batch and its three items, each calling work(). */
	check_balanced(&r, "work", (uint32_t)(3 * (b->kept_sampled + b->kept_other +
	                                          b->kept_slow)));
	free_run(&r);
}

static void test_requests_ended_on_another_thread(void **state)
{
	static const char *env[] = {"KTRACE_TRIGGER_US=20000", NULL};
	struct run r;
	uint64_t hc, hm;

	(void)state;
	run_prog(&r, "cross", "400", "snapshot ", env);
	for (uint32_t num = 50; num <= 400; num += 50) {
		int found = 0;
		for (size_t i = 0; i < r.w.n; i++) {
			const struct kt_rec *x = &r.w.recs[i];
			if (x->ext_type == KTRACE_EXT_REQ_CLOSE_ANY && x->payload[1] == num) {
				assert_true(x->arg & KTRACE_REQ_SLOW);
				found = 1;
			}
		}
		if (!found)
			fail_msg("request #%u, ended on another thread, has no REQ_CLOSE_ANY", num);
		assert_true(find_open(&r, num) >= 0);
	}
	assert_int_equal(kind_rec(&r, "async", &hc, &hm)->ended, 400);
	free_run(&r);
}

static void test_requests_larger_than_the_hold_buffer(void **state)
{
	static const char *env[] = {"KTRACE_HOLD_KB=4", "KTRACE_TRIGGER_US=10000", NULL};
	struct run r;
	uint32_t en = 0;
	int leaf;
	long i;

	(void)state;
	run_prog(&r, "spill", "20000", "snapshot ", env);
	leaf = fn_index(&r, "leaf");
	i = find_open(&r, 1);
	assert_true(i >= 0);
	for (size_t j = 0; j < r.w.n; j++) {
		en += is_call(&r, &r.w.recs[j], leaf) == 1;
		if (r.w.recs[j].ext_type == KTRACE_EXT_REQ_CLOSE)
			assert_true(r.w.recs[j].arg & KTRACE_REQ_SPILLED);
	}
	assert_int_equal(en, 20000);
	free_run(&r);
}

static void test_requests_thread_exit_signals_fork(void **state)
{
	static const char *env[] = {"KTRACE_SAMPLE_MS=0", "KTRACE_KEEP_PCT=0",
	                            "KTRACE_TRIGGER_US=10000000", NULL};
	struct run r;
	uint64_t hc, hm;
	const struct ktrace_req_kind_rec *k;

	(void)state;
	/* A thread that exits with a request open: its run is kept. */
	run_prog(&r, "exit", "1", "snapshot ", env);
	assert_true(find_open(&r, 1) >= 0);
	check_balanced(&r, "work", 1);
	free_run(&r);

	/* Signals while holding: the handler's calls are held with the
	 * request (and dropped with it); nothing is left half-written. */
	run_prog(&r, "signal", "3000", "snapshot ", env);
	k = kind_rec(&r, "sig", &hc, &hm);
	assert_int_equal(k->ended, 3000);
	assert_int_equal(k->dropped, 3000);
	check_pairs(&r, "on_alarm");
	check_pairs(&r, "leaf");
	free_run(&r);

	/* Fork in the middle of a request: the child starts clean, its own
	 * requests counted, the parent's request it ends is not its own.
	 * (Not under qemu-user: its plugin layer asserts in traced fork
	 * children.) */
	if (getenv("KTRACE_TEST_EMULATOR"))
		return;
	run_prog(&r, "fork", "200", "child ", env);
	k = kind_rec(&r, "child", &hc, &hm);
	assert_int_equal(k->ended, 200);
	assert_int_equal(hc, 200);
	free_run(&r);
}

/* Until a kind has a threshold to judge by, its requests are all kept
 * (WARMUP); from the KTRACE_KEEP_MIN_SAMPLES-th on, only the slow and the
 * sampled ones. */
static void test_requests_warmup_keeps_until_a_threshold(void **state)
{
	static const char *env[] = {"KTRACE_SAMPLE_MS=0", "KTRACE_KEEP_MIN_SAMPLES=100", NULL};
	struct run r;
	uint64_t hc, hm, warm = 0;
	const struct ktrace_req_kind_rec *k;

	(void)state;
	run_prog(&r, "basic", "1000", "snapshot ", env);
	for (size_t i = 0; i < r.w.n; i++)
		if (r.w.recs[i].ext_type == KTRACE_EXT_REQ_CLOSE &&
		    (r.w.recs[i].arg & KTRACE_REQ_WARMUP))
			warm++;
	k = kind_rec(&r, "get", &hc, &hm);
	assert_int_equal(k->ended, 1000);
	/* the first 99 (the threshold arms at the 100th) */
	assert_true(warm >= 99 && warm <= 100);
	assert_true(k->dropped >= 800);
	free_run(&r);
}

/* Why serve() may not have been muted, for the failure message: the
 * muted functions and the main thread's blocks (a block of 5 us or more
 * inside a call makes a function ineligible for good: filter.c). */
static void print_why_not_muted(const struct run *r)
{
	uint32_t cnt, sc;
	uint64_t size, ssize;
	const unsigned char *p = kt_file_section(&r->f, KTRACE_SEC_BUDGET, &cnt, &size);
	const unsigned char *sp = kt_file_section(&r->f, KTRACE_SEC_SCHED, &sc, &ssize);
	const struct ktrace_budget_rec *b = (const void *)p;
	const struct ktrace_muted_rec *m =
		(const void *)(p + sizeof(*b) + b->ncores * sizeof(struct ktrace_budget_core_rec));

	for (uint32_t i = 0; i < cnt; i++) {
		const char *name = "?";
		for (int j = 0; j < r->nfn; j++)
			if (r->fn_addr[j] == m[i].addr)
				name = r->fn_name[j];
		fprintf(stderr, "muted: %s why %u share %u ppm, %llu calls observed, longest %u ns\n",
		        name, m[i].why, m[i].share_ppm, (unsigned long long)m[i].calls_observed,
		        m[i].max_ns);
	}
	if (sp) {
		const struct ktrace_sched_hdr *h = (const void *)sp;
		const struct ktrace_sched_rec *x =
			(const void *)(sp + sizeof(*h) + h->ncores * sizeof(struct ktrace_sched_core));
		uint32_t blocks = 0, preempts = 0;
		int64_t longest = 0;

		for (uint32_t i = 0; i < sc; i++) {
			if (x[i].tid != r->p.pid)
				continue;
			preempts += x[i].what == KTRACE_SCHED_OUT_PREEMPT;
			if (x[i].what != KTRACE_SCHED_OUT_BLOCK)
				continue;
			blocks++;
			/* the records are stored core by core: the wake-up may be
			 * anywhere in the section */
			int64_t in = INT64_MAX;
			for (uint32_t j = 0; j < sc; j++)
				if (x[j].tid == x[i].tid && x[j].what == KTRACE_SCHED_IN &&
				    x[j].time_ns >= x[i].time_ns && x[j].time_ns < in)
					in = x[j].time_ns;
			if (in != INT64_MAX && in - x[i].time_ns > longest)
				longest = in - x[i].time_ns;
		}
		fprintf(stderr, "sched: status %u, %llu lost; main thread blocked %u times (longest "
		        "%lld ns), preempted %u times\n", h->status, (unsigned long long)h->lost,
		        blocks, (long long)longest, preempts);
	}
}

/* 1 when serve() was muted as a hot short function (*muted: how many
 * functions were); fails the test when the window is short. */
static int serve_muted(struct run *r, uint32_t *muted_out)
{
	uint32_t cnt;
	uint64_t size;
	const unsigned char *p;
	const struct ktrace_budget_rec *b;
	const struct ktrace_muted_rec *m;
	int serve, muted = 0;

	serve = fn_index(r, "serve");
	p = kt_file_section(&r->f, KTRACE_SEC_BUDGET, &cnt, &size);
	assert_non_null(p);
	b = (const struct ktrace_budget_rec *)p;
	m = (const struct ktrace_muted_rec *)(p + sizeof(*b) +
	                                      b->ncores * sizeof(struct ktrace_budget_core_rec));
	for (uint32_t i = 0; i < cnt; i++)
		if (m[i].addr == r->fn_addr[serve] && m[i].why == KTRACE_MUTE_HOT_SHORT)
			muted = 1;
	*muted_out = cnt;
	if (muted && (b->flags & KTRACE_BUDGET_SHORT)) {
		const struct ktrace_budget_core_rec *c = (const void *)(p + sizeof(*b));

		for (uint32_t i = 0; i < b->ncores; i++)
			fprintf(stderr, "cpu%u: %llu words/s, holds %llu ms\n", c[i].cpu,
			        (unsigned long long)c[i].rate_wps, (unsigned long long)c[i].window_ms);
		fail_msg("the window is short of its %u s target (%llu decisions, %u muted)",
		         b->window_s, (unsigned long long)b->decisions, cnt);
	}
	return muted;
}

/* A function that encloses each request (Redis's call(), processCommand)
 * is long only because of the request inside: the budget counts a call's
 * time without its requests', so it mutes the loop like any hot short
 * function, and the window holds its target.  Before, such a function was
 * never muted: two events a request for the ring. */
static void test_requests_budget_mutes_the_serving_loop(void **state)
{
	/* Gaps recorded as they run (held, serve()'s records would not reach
	 * the ring at all: see the gaps test).  The window's budget alone
	 * (KTRACE_CPU_PCT=0, the default mode's default): in the lean mode the
	 * CPU budget (2 %) decides within the first milliseconds, when serve()
	 * has ~50 calls observed and one stall of the host's (ASan's) is 1 in
	 * 50, and then mutes it by the CPU rule (KTRACE_MUTE_HOT_CPU), which
	 * says nothing about its requests' time; the window's decision comes
	 * later, on thousands of calls.  (The lean ASan run missed the
	 * hot-short mute in 3 runs of 6 at 4c91fb9, in both of the CI's
	 * attempts once, every miss a HOT_CPU mute.) */
	static const char *env[] = {"KTRACE_TRIGGER_US=100000", "KTRACE_BUFFER_MB=1",
	                            "KTRACE_WINDOW_S=30", "KTRACE_FILTER=auto", "KTRACE_GAP_US=0",
	                            "KTRACE_CPU_PCT=0", NULL};
	struct run r;
	uint32_t cnt;

	(void)state;
	if (getenv("KTRACE_TEST_EMULATOR"))
		skip();   /* the budget's figures need native speed (test_e2e_budget too) */
#if defined(__SANITIZE_THREAD__)
	/* Nor under TSan: its runtime stalls a call now and then (shadow and
	 * sync memory mapped as it goes), and serve() then has long calls 1
	 * in 100 or more, the rule that keeps a function from being muted.
	 * 76592b6's library failed this 4 times in 8 under TSan, alone on
	 * the host; the plain and ASan builds run it. */
	skip();
#endif
	/* 2.5 s: the rate the window is judged by is the last second's,
	 * well after the decision even when the writer is slow to run
	 * (1.5 s failed once, the host running 4 busy processes on 2 cpus).
	 * A second run when serve() was not muted: the rules that keep a
	 * function from being muted cannot tell the host's stalls from the
	 * function's own long calls (filter.c, candidate()), and in the CI's
	 * plain build (other tests beside it) one run in many kept serve()
	 * ("4 muted"); a library that never mutes it fails both.  Each such
	 * run's muted functions and blocks are printed. */
	for (int attempt = 0;; attempt++) {
		run_prog(&r, "loop", "2500", "snapshot ", env);
		if (serve_muted(&r, &cnt))
			break;
		fprintf(stderr, "run %d: serve() was not muted (%u muted)\n", attempt + 1, cnt);
		print_why_not_muted(&r);
		if (attempt == 1)
			fail_msg("serve(), which only encloses requests, was not muted in two runs "
			         "(%u muted)", cnt);
		free_run(&r);
	}
	free_run(&r);
}

/* Decoded: between() is called by turn(), stall() and work() by between()
 * or turn(), each within its caller's time, and nothing is damaged. */
static void check_nesting(const char *path)
{
	struct kd_dec *d = kd_open(path);
	uint32_t nbetween = 0;

	assert_non_null(d);
	assert_int_equal(d->snap.damaged_blocks, 0);
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i], *p;
		const char *want = kd_is(d, c, "between") ? "turn"
		                   : kd_is(d, c, "stall") ? "between" : NULL;
		if (!want)
			continue;
		nbetween += kd_is(d, c, "between");
		if (c->parent == KD_NONE)
			fail_msg("%s() at tick %" PRIu64 " has no caller; %s() expected",
			         kd_func(d, c), c->begin, want);
		p = &d->calls[c->parent];
		if (!kd_is(d, p, want) || c->begin < p->begin || c->end > p->end)
			fail_msg("%s() [%" PRIu64 ", %" PRIu64 "] in %s() [%" PRIu64 ", %" PRIu64 "]",
			         kd_func(d, c), c->begin, c->end, kd_func(d, p), p->begin, p->end);
	}
	assert_true(nbetween > 0);
	kd_dec_free(d);
}

/* Records of extended type type (MARK, ...) in the window. */
static uint32_t count_ext(const struct run *r, uint32_t type)
{
	uint32_t n = 0;

	for (size_t i = 0; i < r->w.n; i++)
		n += r->w.recs[i].ext_type == type;
	return n;
}

/*
 * Between requests (lib/request.c, "Gaps"): an event loop's time between
 * its requests is held like a request's and kept only when slow (a 3 ms
 * stall, over KTRACE_GAP_US=1000), marked, or sampled; the rest costs the
 * ring only the records the nesting needs, so turn(), which spans each
 * gap and request, still has every entry and exit.  With KTRACE_GAP_US=0
 * every gap is recorded as it runs.
 */
static void test_requests_gaps_between_requests_held(void **state)
{
	static const char *env[] = {"KTRACE_SAMPLE_MS=0", "KTRACE_KEEP_PCT=0",
	                            "KTRACE_TRIGGER_US=10000000", NULL};
	static const char *env_off[] = {"KTRACE_SAMPLE_MS=0", "KTRACE_KEEP_PCT=0",
	                                "KTRACE_TRIGGER_US=10000000", "KTRACE_GAP_US=0", NULL};
	struct run r;
	uint32_t en, ex, stalls_en, stalls_ex, bet_en, bet_ex, marks;
	int stalls = 0, nmarks = 0, either = 0, n = 2000;
	const struct ktrace_req_hdr *h;
	uint64_t size;
	const char *s;

	(void)state;
	run_prog(&r, "gaps", "2000", "snapshot ", env);
	s = strstr(r.p.out, "stalls ");
	assert_non_null(s);
	assert_int_equal(sscanf(s, "stalls %d marks %d either %d", &stalls, &nmarks, &either), 3);
	assert_int_equal(stalls, 20);
	/* every slow gap whole: its stall(), and the between() around it */
	count_calls(&r, "stall", &stalls_en, &stalls_ex);
	if (stalls_en != (uint32_t)stalls || stalls_ex != (uint32_t)stalls)
		fail_msg("stall(): %u entries, %u exits; the program stalled %d gaps", stalls_en,
		         stalls_ex, stalls);
	marks = count_ext(&r, KTRACE_EXT_MARK);
	assert_int_equal(marks, nmarks);
	/* ... and the other gaps dropped: between() only in the kept ones
	 * (plus any the machine stretched past 1 ms) */
	count_calls(&r, "between", &bet_en, &bet_ex);
	assert_int_equal(bet_en, bet_ex);
	if (bet_en < (uint32_t)either || bet_en > (uint32_t)(either + n / 20))
		fail_msg("between(): %u calls in the window; %d gaps were slow or marked of %d",
		         bet_en, either, n);
	/* turn() spans a gap and a request: where both are dropped, its entry
	 * and exit cancel; around a kept gap both are there. */
	check_pairs(&r, "turn");
	count_calls(&r, "turn", &en, &ex);
	assert_true(en >= (uint32_t)either);
	check_nesting(r.snap);
	h = kt_file_section(&r.f, KTRACE_SEC_REQUESTS, NULL, &size);
	assert_non_null(h);
	assert_int_equal(h->gap_us, 1000);
	assert_true(h->gaps_kept >= (uint32_t)either);
	assert_true(h->gaps_kept <= bet_en + 1);
	free_run(&r);

	/* Not held: every gap recorded as it ran. */
	run_prog(&r, "gaps", "2000", "snapshot ", env_off);
	count_calls(&r, "between", &en, &ex);
	assert_int_equal(en, (uint32_t)n);
	assert_int_equal(ex, (uint32_t)n);
	check_balanced(&r, "turn", (uint32_t)n);
	check_nesting(r.snap);
	h = kt_file_section(&r.f, KTRACE_SEC_REQUESTS, NULL, &size);
	assert_int_equal(h->gap_us, 0);
	free_run(&r);
}

static void test_requests_meanwhile_the_lock_holder_is_kept(void **state)
{
	static const char *env[] = {"KTRACE_TRIGGER_US=60000", "KTRACE_SAMPLE_MS=0",
	                            "KTRACE_KEEP_PCT=0", NULL};
	struct run r;
	uint64_t hc, hm;
	int hold;
	uint32_t flags = 0;
	long i;

	(void)state;
	run_prog(&r, "meanwhile", "50", "snapshot ", env);
	assert_int_equal(kind_rec(&r, "wait", &hc, &hm)->kept_slow, 1);
	assert_int_equal(kind_rec(&r, "hold", &hc, &hm)->kept_other, 1);
	hold = fn_index(&r, "hold_lock");
	/* "hold" is the first request of its kind: #1 of kind hold. */
	for (i = 0; i < (long)r.w.n; i++) {
		const struct kt_rec *x = &r.w.recs[i];
		if (x->ext_type == KTRACE_EXT_REQ_OPEN && count_in_run(&r, (size_t)i, hold, &flags))
			break;
	}
	if (i == (long)r.w.n)
		fail_msg("the lock holder's request is not in the snapshot");
	assert_true(flags & KTRACE_REQ_OVERLAP);
	free_run(&r);
}

/* A retained run written for another thread's slow request (meanwhile)
 * brings the frame it ran in, even when that frame's entry and exit were
 * both in dropped gaps (and so cancelled). */
static void test_requests_meanwhile_inside_a_dropped_frame(void **state)
{
	static const char *env[] = {"KTRACE_TRIGGER_US=20000", "KTRACE_SAMPLE_MS=0",
	                            "KTRACE_KEEP_PCT=0", "KTRACE_GAP_US=1000000",
	                            "KTRACE_MAX_SNAPSHOTS_PER_MIN=1", NULL};
	struct run r;
	struct kd_dec *d;
	uint32_t nquick = 0, nouter = 0;

	(void)state;
	run_prog(&r, "framed", "0", "snapshot ", env);
	d = kd_open(r.snap);
	assert_non_null(d);
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		nouter += kd_is(d, c, "outer");
		if (!kd_is(d, c, "quickwork"))
			continue;
		nquick++;
		if (c->parent == KD_NONE || !kd_is(d, &d->calls[c->parent], "outer"))
			fail_msg("quickwork() at tick %" PRIu64 " (kept for meanwhile) is not inside "
			         "outer()", c->begin);
	}
	if (nquick == 0)
		fail_msg("no quick request kept for the slow one (meanwhile)");
	assert_int_equal(nouter, 1);
	kd_dec_free(d);
	free_run(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_requests_slow_ones_whole_typical_ones_counted),
		cmocka_unit_test(test_requests_dropped_edges_keep_nesting),
		cmocka_unit_test(test_requests_nested_and_sampled),
		cmocka_unit_test(test_requests_ended_on_another_thread),
		cmocka_unit_test(test_requests_larger_than_the_hold_buffer),
		cmocka_unit_test(test_requests_thread_exit_signals_fork),
		cmocka_unit_test(test_requests_warmup_keeps_until_a_threshold),
		cmocka_unit_test(test_requests_budget_mutes_the_serving_loop),
		cmocka_unit_test(test_requests_meanwhile_the_lock_holder_is_kept),
		cmocka_unit_test(test_requests_gaps_between_requests_held),
		cmocka_unit_test(test_requests_meanwhile_inside_a_dropped_frame),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
