/*
 * busy_server.c - a busy request loop with planted slow requests, for
 * measuring what ktrace keeps on a service that runs tens of thousands of
 * requests per second per core (bench/busy.sh, test_e2e_busy).
 *
 * No network: each worker thread makes its own commands from a seeded
 * random stream and serves them at full speed from an in-memory table of
 * NKEYS keys: get (80 %), put (18 %), scan of 16 keys (2 %), each marked as
 * a request of its kind (ktrace_request_begin/end) around serve_one, a
 * short path of traced functions (make_command, parse_command, hash_key,
 * table_find, value_sum, handle_*, write_reply, render_reply): about
 * --work-us each.  The loop around requests is not traced, so every
 * traced call is inside a request: one that is not kept (format 2) leaves
 * nothing in the ring, and what the ring holds is the kept requests.
 *
 * Planted slow requests: every --plant-ms (default 1000) worker 0 makes its
 * next put a slow one: handle_put calls compact_segment(), which calls
 * compact_chunk() exactly PLANT_CHUNKS times (about PLANT_CHUNK_US of cpu
 * each) and, every other time, wait_flush() once (a PLANT_WAIT_US sleep:
 * off the cpu, blocked).  The program knows every planted request: its
 * number within its kind on its thread, its begin and end (CLOCK_REALTIME
 * ns), and the calls of its path.
 *
 * It also keeps its own latency histogram per kind (nanoseconds around
 * begin/end, log-linear with 2^7 sub-buckets per power of two: under 1 %
 * wide), to compare with the snapshot's REQUESTS section.
 *
 * At the end (after --seconds) the workers stop, the program takes a
 * snapshot (ktrace_snapshot("busy: end"), unless --no-snapshot) and prints
 * "busy: key=value" lines:
 *
 *   busy: threads=N seconds=S requests=N requests_per_s=N per_thread_per_s=N
 *   busy: cpu_s=S cpu_ns_per_request=N       (the workers' cpu time)
 *   busy: work_iters=N                       (render_reply's loop, calibrated)
 *   busy: kind=K count=N p10_ns=N p50_ns=N p90_ns=N p99_ns=N max_ns=N
 *   busy: planted=N chunks_per_plant=N
 *   busy: plant i=I kind=put thread=T number=N begin_ns=N end_ns=N dur_ns=N chunks=N waits=N
 *   busy: snapshot=PATH
 *
 * Usage: busy_server [--seconds S] [--threads N] [--plant-ms MS]
 *                    [--work-us US] [--no-snapshot]
 * --work-us (default 8): cpu each request spends in render_reply (a loop
 * calibrated at start), the bulk of its time, as a real reply's encoding.
 * Built three ways by CMake: ktrace-example-busy (-finstrument-functions,
 * libktrace), -empty (-finstrument-functions, empty hooks, no ktrace) and
 * -plain (neither), so bench/busy.sh can compare their cpu per request.
 */
#ifndef BUSY_NO_KTRACE
#include <ktrace.h>
#else
/* The plain and empty-hook builds: the API compiled out. */
typedef int ktrace_request_t;
#define ktrace_request_begin(kind) ((void)(kind), 0)
#define ktrace_request_end(r) ((void)(r))
#define ktrace_snapshot(r) ((void)(r), -1)
#define ktrace_last_snapshot(b, n) ((void)(b), (void)(n), -1)
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NKEYS 65536u             /* keys in the table, power of two */
#define VALUE_WORDS 16u          /* 64-byte values */
#define SCAN_KEYS 16u
#define PLANT_CHUNKS 40          /* compact_chunk calls per planted request */
#define PLANT_CHUNK_US 100       /* cpu per chunk */
#define PLANT_WAIT_US 2000       /* wait_flush's sleep */
#define MAX_THREADS 16
#define MAX_PLANTS 4096
#define HSUB 7u                  /* histogram: 2^7 sub-buckets per power of two */
#define HBUCKETS (64u << HSUB)

enum { K_GET, K_PUT, K_SCAN, NKINDS };
static const char *const kind_name[NKINDS] = {"get", "put", "scan"};

struct entry {
	uint64_t key;
	uint32_t value[VALUE_WORDS];
};

struct plant {
	int thread;
	uint64_t number;             /* the request's number within its kind on its thread, from 1 */
	int64_t begin_ns, end_ns;    /* CLOCK_REALTIME */
	int chunks, waits;
};

struct worker {
	pthread_t th;
	int id;
	uint64_t rng;
	uint64_t count[NKINDS];
	uint64_t sink;
	int64_t cpu_ns;
	uint32_t *hist;              /* NKINDS x HBUCKETS, ns, around begin/end */
	uint32_t *ihist;             /* the same between begin's return and end's call */
	uint64_t max_ns[NKINDS];
	pthread_mutex_t *table_mu;
};

static struct entry *table;
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int stop;
static int plant_ms = 1000;
static struct plant plants[MAX_PLANTS];
static int nplants;              /* worker 0 only, read after join */
static volatile uint64_t global_sink;

static __attribute__((no_instrument_function)) int64_t ns_now(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static __attribute__((no_instrument_function)) uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static __attribute__((no_instrument_function)) uint32_t hbucket(uint64_t v)
{
	uint32_t e;

	if (v < (1u << HSUB))
		return (uint32_t)v;
	e = 63u - (uint32_t)__builtin_clzll(v);
	return (e - HSUB + 1) * (1u << HSUB) + (uint32_t)((v >> (e - HSUB)) & ((1u << HSUB) - 1));
}

/* Middle of bucket b's values. */
static __attribute__((no_instrument_function)) uint64_t hmid(uint32_t b)
{
	uint32_t e, s;

	if (b < (1u << HSUB))
		return b;
	e = b / (1u << HSUB) + HSUB - 1;
	s = b % (1u << HSUB);
	uint64_t lo = ((uint64_t)((1u << HSUB) + s)) << (e - HSUB);
	return lo + (1ull << (e - HSUB)) / 2;
}

/* ---- the request path (traced) ------------------------------------------- */

/* Named as written in the snapshot: no inlining, no specialised clones. */
#define TRACED static __attribute__((noinline, noclone))

struct command {
	int kind;
	uint64_t key;
	uint32_t value[VALUE_WORDS];
};

TRACED void make_command(struct worker *w, int kind, struct command *c)
{
	uint64_t r = rnd(&w->rng);

	c->kind = kind;
	c->key = rnd(&w->rng) % (NKEYS * 2);
	for (uint32_t i = 0; i < VALUE_WORDS; i++)
		c->value[i] = (uint32_t)(r >> (i % 32)) + i;
}

TRACED int parse_command(const struct command *c)
{
	return c->kind >= 0 && c->kind < NKINDS && c->key < NKEYS * 2;
}

TRACED uint64_t hash_key(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	return k ^ (k >> 33);
}

TRACED struct entry *table_find(uint64_t key)
{
	uint64_t h = hash_key(key);

	for (uint32_t i = 0; i < 8; i++) {
		struct entry *e = &table[(h + i) & (NKEYS - 1)];
		if (e->key == key + 1 || e->key == 0)
			return e;
	}
	return &table[h & (NKEYS - 1)];
}

TRACED uint64_t value_sum(const uint32_t *v)
{
	uint64_t s = 0;

	for (uint32_t i = 0; i < VALUE_WORDS; i++)
		s = s * 31 + v[i];
	return s;
}

static uint64_t work_iters = 1;   /* render_reply's loop per request (--work-us) */

/* The bulk of a request's cpu: about --work-us (calibrated at start). */
TRACED uint64_t render_reply(uint64_t v, uint64_t iters)
{
	for (uint64_t i = 0; i < iters; i++)
		v = v * 6364136223846793005ull + 1442695040888963407ull + (v >> 29);
	return v;
}

TRACED void write_reply(struct worker *w, uint64_t v)
{
	w->sink += render_reply(v, work_iters);
}

/* Planted: about PLANT_CHUNK_US of cpu. */
TRACED void compact_chunk(struct worker *w)
{
	int64_t end = ns_now(CLOCK_THREAD_CPUTIME_ID) + PLANT_CHUNK_US * 1000;

	while (ns_now(CLOCK_THREAD_CPUTIME_ID) < end)
		w->sink += rnd(&w->rng) & 1;
}

/* Planted: off the cpu, blocked. */
TRACED void wait_flush(void)
{
	struct timespec d = {0, PLANT_WAIT_US * 1000L};

	while (nanosleep(&d, &d) != 0) {
	}
}

TRACED void compact_segment(struct worker *w, struct plant *p)
{
	for (int i = 0; i < PLANT_CHUNKS; i++) {
		compact_chunk(w);
		p->chunks++;
	}
	if (nplants % 2) {
		wait_flush();
		p->waits++;
	}
}

TRACED void handle_get(struct worker *w, const struct command *c)
{
	struct entry *e;

	pthread_mutex_lock(w->table_mu);
	e = table_find(c->key);
	write_reply(w, e->key == c->key + 1 ? value_sum(e->value) : 0);
	pthread_mutex_unlock(w->table_mu);
}

TRACED void handle_put(struct worker *w, const struct command *c,
                                          struct plant *p)
{
	struct entry *e;

	pthread_mutex_lock(w->table_mu);
	e = table_find(c->key);
	e->key = c->key + 1;
	memcpy(e->value, c->value, sizeof(e->value));
	pthread_mutex_unlock(w->table_mu);
	if (p)
		compact_segment(w, p);
	write_reply(w, value_sum(c->value));
}

TRACED void handle_scan(struct worker *w, const struct command *c)
{
	uint64_t s = 0;

	pthread_mutex_lock(w->table_mu);
	for (uint32_t i = 0; i < SCAN_KEYS; i++) {
		struct entry *e = table_find(c->key + i);
		if (e->key == c->key + i + 1)
			s += value_sum(e->value);
	}
	pthread_mutex_unlock(w->table_mu);
	write_reply(w, s);
}

/* One request, every traced call of it inside it (the request is marked
 * around this call): a request that is not kept leaves nothing in the
 * ring. */
TRACED void serve_one(struct worker *w, int kind, struct plant *p)
{
	struct command c;

	make_command(w, kind, &c);
	if (!parse_command(&c))
		return;
	switch (c.kind) {
	case K_GET: handle_get(w, &c); break;
	case K_PUT: handle_put(w, &c, p); break;
	default: handle_scan(w, &c); break;
	}
}

/* Untraced: the kind is chosen before the request begins. */
static __attribute__((no_instrument_function)) int pick_kind(struct worker *w)
{
	uint32_t p = (uint32_t)(rnd(&w->rng) % 100);

	return p < 80 ? K_GET : p < 98 ? K_PUT : K_SCAN;
}

static __attribute__((no_instrument_function)) void request(struct worker *w, struct plant *p)
{
	int kind = p ? K_PUT : pick_kind(w);
	ktrace_request_t q;
	int64_t t0, t1, ti0, ti1;

	if (p)
		p->begin_ns = ns_now(CLOCK_REALTIME);
	t0 = ns_now(CLOCK_MONOTONIC);
	q = ktrace_request_begin(kind_name[kind]);
	ti0 = ns_now(CLOCK_MONOTONIC);
	serve_one(w, kind, p);
	ti1 = ns_now(CLOCK_MONOTONIC);
	ktrace_request_end(q);
	t1 = ns_now(CLOCK_MONOTONIC);
	/* The library's own measure lies between the two: it starts inside
	 * begin and ends inside end. */
	w->ihist[kind * HBUCKETS + hbucket((uint64_t)(ti1 - ti0))]++;
	if (p) {
		p->end_ns = ns_now(CLOCK_REALTIME);
		p->thread = w->id;
		p->number = w->count[kind] + 1;
	}
	w->count[kind]++;
	w->hist[kind * HBUCKETS + hbucket((uint64_t)(t1 - t0))]++;
	if ((uint64_t)(t1 - t0) > w->max_ns[kind])
		w->max_ns[kind] = (uint64_t)(t1 - t0);
}

/* Untraced, like request(): the worker's loop leaves no record between
 * requests. */
static __attribute__((no_instrument_function)) void *worker_main(void *arg)
{
	struct worker *w = arg;
	int64_t c0 = ns_now(CLOCK_THREAD_CPUTIME_ID);
	int64_t next_plant = ns_now(CLOCK_MONOTONIC) + (int64_t)plant_ms * 1000000 / 2;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int i = 0; i < 64; i++) {
			struct plant *p = NULL;

			if (w->id == 0 && plant_ms > 0 && nplants < MAX_PLANTS && i == 0 &&
			    ns_now(CLOCK_MONOTONIC) >= next_plant) {
				p = &plants[nplants];
				memset(p, 0, sizeof(*p));
				next_plant += (int64_t)plant_ms * 1000000;
			}
			request(w, p);
			if (p)
				nplants++;
		}
	}
	w->cpu_ns = ns_now(CLOCK_THREAD_CPUTIME_ID) - c0;
	global_sink += w->sink;
	return NULL;
}

/* work_iters for about us microseconds of render_reply (best of 5). */
static void calibrate(double us)
{
	const uint64_t n = 200000;
	int64_t best = INT64_MAX;

	for (int i = 0; i < 5; i++) {
		int64_t t = ns_now(CLOCK_THREAD_CPUTIME_ID);
		global_sink += render_reply((uint64_t)i, n);
		t = ns_now(CLOCK_THREAD_CPUTIME_ID) - t;
		if (t < best)
			best = t;
	}
	work_iters = (uint64_t)(us * 1000.0 * (double)n / (double)(best > 0 ? best : 1));
	if (work_iters == 0)
		work_iters = 1;
}

static uint64_t pct(const uint32_t *h, uint64_t n, double q)
{
	uint64_t want = (uint64_t)(q * (double)n), seen = 0;

	if (want >= n)
		want = n - 1;
	for (uint32_t b = 0; b < HBUCKETS; b++) {
		seen += h[b];
		if (seen > want)
			return hmid(b);
	}
	return 0;
}

int main(int argc, char **argv)
{
	double seconds = 10, work_us = 8;
	int nthreads = 1, snap = 1;
	struct worker w[MAX_THREADS];
	pthread_mutex_t mus[MAX_THREADS];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			nthreads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--plant-ms") == 0 && i + 1 < argc)
			plant_ms = atoi(argv[++i]);
		else if (strcmp(argv[i], "--work-us") == 0 && i + 1 < argc)
			work_us = atof(argv[++i]);
		else if (strcmp(argv[i], "--no-snapshot") == 0)
			snap = 0;
		else {
			fprintf(stderr, "usage: %s [--seconds S] [--threads N] [--plant-ms MS] "
			                "[--work-us US] [--no-snapshot]\n", argv[0]);
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > MAX_THREADS || seconds <= 0) {
		fprintf(stderr, "busy_server: --threads 1..%d, --seconds > 0\n", MAX_THREADS);
		return 2;
	}
	calibrate(work_us);
	table = calloc(NKEYS, sizeof(*table));
	if (!table)
		return 1;
	/* Workers share the table under one lock when several run; one lock
	 * per worker otherwise keeps a single worker uncontended. */
	for (int i = 0; i < nthreads; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].id = i;
		w[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
		w[i].hist = calloc((size_t)NKINDS * HBUCKETS, sizeof(uint32_t));
		w[i].ihist = calloc((size_t)NKINDS * HBUCKETS, sizeof(uint32_t));
		pthread_mutex_init(&mus[i], NULL);
		w[i].table_mu = nthreads > 1 ? &table_mu : &mus[i];
		if (!w[i].hist)
			return 1;
	}
	int64_t t0 = ns_now(CLOCK_MONOTONIC);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&w[i].th, NULL, worker_main, &w[i]);
	struct timespec d = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	while (nanosleep(&d, &d) != 0) {
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(w[i].th, NULL);
	double el = (double)(ns_now(CLOCK_MONOTONIC) - t0) / 1e9;

	uint64_t total = 0, cpu = 0;
	for (int i = 0; i < nthreads; i++) {
		cpu += (uint64_t)w[i].cpu_ns;
		for (int k = 0; k < NKINDS; k++)
			total += w[i].count[k];
	}
	printf("busy: threads=%d seconds=%.3f requests=%llu requests_per_s=%.0f "
	       "per_thread_per_s=%.0f\n", nthreads, el, (unsigned long long)total,
	       (double)total / el, (double)total / el / nthreads);
	printf("busy: cpu_s=%.3f cpu_ns_per_request=%.1f\n", (double)cpu / 1e9,
	       total ? (double)cpu / (double)total : 0.0);
	printf("busy: work_iters=%llu\n", (unsigned long long)work_iters);
	for (int k = 0; k < NKINDS; k++) {
		uint32_t *h = calloc(HBUCKETS, sizeof(uint32_t));
		uint32_t *ih = calloc(HBUCKETS, sizeof(uint32_t));
		uint64_t n = 0, mx = 0;

		for (int i = 0; i < nthreads; i++) {
			for (uint32_t b = 0; b < HBUCKETS; b++) {
				h[b] += w[i].hist[k * HBUCKETS + b];
				ih[b] += w[i].ihist[k * HBUCKETS + b];
			}
			n += w[i].count[k];
			if (w[i].max_ns[k] > mx)
				mx = w[i].max_ns[k];
		}
		if (n)
			printf("busy: kind=%s count=%llu p10_ns=%llu p50_ns=%llu p90_ns=%llu "
			       "p99_ns=%llu max_ns=%llu\n", kind_name[k], (unsigned long long)n,
			       (unsigned long long)pct(h, n, 0.10),
			       (unsigned long long)pct(h, n, 0.50), (unsigned long long)pct(h, n, 0.90),
			       (unsigned long long)pct(h, n, 0.99), (unsigned long long)mx);
		if (n)
			printf("busy: inner kind=%s p50_ns=%llu p99_ns=%llu\n", kind_name[k],
			       (unsigned long long)pct(ih, n, 0.50),
			       (unsigned long long)pct(ih, n, 0.99));
		free(h);
		free(ih);
	}
	printf("busy: planted=%d chunks_per_plant=%d\n", nplants, PLANT_CHUNKS);
	for (int i = 0; i < nplants; i++)
		printf("busy: plant i=%d kind=put thread=%d number=%llu begin_ns=%lld end_ns=%lld "
		       "dur_ns=%lld chunks=%d waits=%d\n", i, plants[i].thread,
		       (unsigned long long)plants[i].number, (long long)plants[i].begin_ns,
		       (long long)plants[i].end_ns, (long long)(plants[i].end_ns - plants[i].begin_ns),
		       plants[i].chunks, plants[i].waits);
	fflush(stdout);
	if (snap) {
		char path[4352];
		int r = ktrace_snapshot("busy: end");

		if (r == 0 && ktrace_last_snapshot(path, sizeof(path)) > 0)
			printf("busy: snapshot=%s\n", path);
		else
			printf("busy: snapshot_error=%d\n", r);
	}
	for (int i = 0; i < nthreads; i++) {
		free(w[i].hist);
		free(w[i].ihist);
	}
	free(table);
	return 0;
}
