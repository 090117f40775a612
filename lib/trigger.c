/*
 * trigger.c - requests and tail-latency triggers.
 *
 * ktrace_request_begin/end write REQ_BEGIN/REQ_END records (kind name id and
 * a request id = slot << 32 | per-thread sequence, so no shared counter is
 * touched) and measure the request with the event clock.
 *
 * Each kind has a log-linear histogram of durations in counter ticks
 * (KT_SUB sub-buckets per power of two, about 6 % wide), updated with
 * relaxed atomic adds: no lock, no allocation.  The percentile threshold is
 * recomputed from the histogram by whichever thread ends every KT_RECALC-th
 * request of the kind (a scan of KT_BUCKETS counters, amortized), and read
 * by the others with one relaxed load.  A request fires when it is slower
 * than its kind's absolute threshold, or than the cached percentile once
 * min_samples requests were seen.  A slow request that overlapped a
 * snapshot write does not fire (the write competed with it for the cpu;
 * it is counted as suppressed).  Firing only hands a record to the writer
 * thread (snapshot.c), which applies the delay and the rate limit.
 */
#include "internal.h"

#include <string.h>
#include <unistd.h>

#define KT_KINDS 256u                /* kinds with their own histogram */
#define KT_SUB_BITS 4u
#define KT_SUB (1u << KT_SUB_BITS)
#define KT_BUCKETS (64u * KT_SUB)
#define KT_RECALC 64u

struct kt_kind {
	_Atomic uint64_t count;          /* requests ended */
	_Atomic uint64_t pct_ticks;      /* cached percentile threshold, 0 = none */
	_Atomic uint64_t abs_ns;         /* absolute threshold, 0 = off */
	_Atomic uint64_t pct_x1000;      /* percentile * 1000, 0 = off */
	_Atomic uint64_t min_samples;    /* before the percentile arms */
	_Atomic int configured;          /* ktrace_trigger_set was called */
	_Atomic uint64_t hist[KT_BUCKETS];
};

static struct kt_kind kinds[KT_KINDS];
static __thread uint32_t req_seq __attribute__((tls_model("initial-exec")));

KT_NOINSTR int ktrace__trigger_init(void)
{
	return 0;
}

static inline KT_NOINSTR uint32_t bucket_of(uint64_t v)
{
	uint32_t e;

	if (v < KT_SUB)
		return (uint32_t)v;
	e = 63u - (uint32_t)__builtin_clzll(v);         /* >= KT_SUB_BITS */
	return (e - KT_SUB_BITS + 1) * KT_SUB +
	       (uint32_t)((v >> (e - KT_SUB_BITS)) & (KT_SUB - 1));
}

/* Upper bound (exclusive) of the values in bucket b. */
static inline KT_NOINSTR uint64_t bucket_top(uint32_t b)
{
	uint32_t e, s;

	if (b < KT_SUB)
		return b + 1;
	e = b / KT_SUB + KT_SUB_BITS - 1;
	s = b % KT_SUB;
	if (e >= 63 && s == KT_SUB - 1)   /* the top would be 2^64 */
		return UINT64_MAX;
	return ((uint64_t)(KT_SUB + s + 1)) << (e - KT_SUB_BITS);
}

static KT_NOINSTR uint64_t percentile_ticks(struct kt_kind *k, uint64_t pct_x1000,
                                            uint64_t total)
{
	/* The smallest bucket top below which at least pct of samples lie. */
	uint64_t want = (total * pct_x1000 + 99999) / 100000, seen = 0;

	for (uint32_t b = 0; b < KT_BUCKETS; b++) {
		seen += kt_load(&k->hist[b], relaxed);
		if (seen >= want)
			return bucket_top(b);
	}
	return UINT64_MAX;
}

/* percentile (0..100) * 1000, rounded; no libm (the library needs only
 * libc and pthreads). */
static KT_NOINSTR uint64_t pct_x1000(double p)
{
	return (uint64_t)(p * 1000.0 + 0.5);
}

static KT_NOINSTR uint64_t ns_of(uint64_t ticks, uint64_t hz)
{
	return (uint64_t)((long double)ticks * 1e9L / (long double)hz);
}

__attribute__((visibility("default"))) KT_NOINSTR int
ktrace_trigger_set(const char *kind, uint64_t abs_us, double percentile, uint32_t min_samples)
{
	uint32_t id;
	struct kt_kind *k;

	if (kind == NULL || !(percentile >= 0 && percentile < 100) ||
	    abs_us > UINT64_MAX / 1000)
		return KTRACE_EINVAL;
	if (!ktrace__ensure_init())
		return ktrace__off_reason();
	id = ktrace__name_id(kind, KTRACE_NAME_REQUEST);
	if (id == 0 || id >= KT_KINDS)
		return KTRACE_ERANGE;
	k = &kinds[id];
	/* relaxed: independent settings; a request racing with the change may
	 * use the old or the new value of each, either being a valid choice. */
	kt_store(&k->abs_ns, abs_us * 1000, relaxed);
	kt_store(&k->pct_x1000, pct_x1000(percentile), relaxed);
	kt_store(&k->min_samples, min_samples ? min_samples : 1, relaxed);
	kt_store(&k->pct_ticks, 0, relaxed);
	kt_store(&k->configured, 1, relaxed);
	return 0;
}

__attribute__((visibility("default"))) KT_NOINSTR ktrace_request_t
ktrace_request_begin(const char *kind)
{
	ktrace_request_t r = {0, 0, 0};
	struct kt_thread *t = kt_self();
	uint32_t id, p[2];

	if (kind == NULL || !ktrace__ensure_init())
		return r;
	id = ktrace__name_id(kind, KTRACE_NAME_REQUEST);
	if (id == 0) {
		ktrace__count_loss(KTRACE_LOSS_NO_NAME, 1);
		return r;
	}
	r.kind_ = id;
	r.seq_ = ++req_seq;
	if (t->slot == 0) {
		/* Register under the nesting guard (see ktrace__slow_func). */
		int ok;
		if (t->nest)
			return r;
		t->nest++;
		ok = ktrace__thread_ready(t) == 0;
		t->nest--;
		if (!ok)
			return r;
	}
	p[0] = r.seq_;
	p[1] = t->slot;
	ktrace__emit_ext(KTRACE_EXT_REQ_BEGIN, id, p, 2);
	/* Read the clock after the record, so the begin record's time is
	 * never later than the measured start. */
	r.begin_tsc_ = ktrace__now();
	return r;
}

__attribute__((visibility("default"))) KT_NOINSTR void ktrace_request_end(ktrace_request_t r)
{
	struct kt_thread *t = kt_self();
	uint64_t end, ticks, hz, thr_ns = 0, dur_ns, abs_ns = 0, pct = 0, min = 1, n;
	struct kt_kind *k = NULL;
	uint32_t p[2], why = 0;

	if (r.kind_ == 0 || r.begin_tsc_ == 0)
		return;
	end = ktrace__now();
	p[0] = r.seq_;
	p[1] = t->slot;
	ktrace__emit_ext(KTRACE_EXT_REQ_END, r.kind_, p, 2);
	ticks = end > r.begin_tsc_ ? end - r.begin_tsc_ : 0;
	hz = kt_load(&ktrace__g.hz_cached, relaxed);

	if (r.kind_ < KT_KINDS) {
		k = &kinds[r.kind_];
		if (kt_load(&k->configured, relaxed)) {
			abs_ns = kt_load(&k->abs_ns, relaxed);
			pct = kt_load(&k->pct_x1000, relaxed);
			min = kt_load(&k->min_samples, relaxed);
		} else {
			abs_ns = ktrace__cfg.trigger_us * 1000;
			pct = pct_x1000(ktrace__cfg.trigger_pct);
			min = ktrace__cfg.trigger_min_samples;
		}
	} else {
		abs_ns = ktrace__cfg.trigger_us * 1000;
	}
	if (hz == 0) /* no frequency estimate yet (first ~10 ms) */
		goto record;
	/* Compare in ticks; ns only for a request that fires. */
	if (abs_ns && ticks > (uint64_t)((unsigned __int128)abs_ns * hz / 1000000000u)) {
		why = KTRACE_TRIGGER_ABSOLUTE;
		thr_ns = abs_ns;
	}
	if (!why && k && pct) {
		n = kt_load(&k->count, relaxed);
		uint64_t pt = kt_load(&k->pct_ticks, relaxed);
		if (n >= min && pt && ticks > pt) {
			why = KTRACE_TRIGGER_PERCENTILE;
			thr_ns = ns_of(pt, hz);
		}
	}
	dur_ns = why ? ns_of(ticks, hz) : 0;
	/* A request that overlapped a snapshot write was slowed by it, at
	 * least in part: firing would make snapshots trigger snapshots. */
	if (why && (kt_load(&ktrace__snap_busy_since, relaxed) ||
	            kt_load(&ktrace__snap_last_end, relaxed) > r.begin_tsc_)) {
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, 1);
		why = 0;
	}
	if (why) {
		struct ktrace_trigger_rec tr;
		const char *name = ktrace__name_text(r.kind_);

		memset(&tr, 0, sizeof(tr));
		tr.request_id = ((uint64_t)t->slot << 32) | r.seq_;
		tr.begin_tsc = r.begin_tsc_;
		tr.end_tsc = end;
		tr.threshold_ns = thr_ns;
		tr.duration_ns = dur_ns;
		tr.kind_id = r.kind_;
		tr.thread_slot = t->slot;
		tr.tid = t->tid;
		tr.why = why;
		tr.percentile_x1000 = why == KTRACE_TRIGGER_PERCENTILE ? (uint32_t)pct : 0;
		tr.samples = k ? (uint32_t)kt_load(&k->count, relaxed) : 0;
		strncpy(tr.kind, name, sizeof(tr.kind) - 1);
		ktrace__snapshot_request_trigger(&tr, ktrace__cfg.trigger_delay_ms);
	}
record:
	if (k) {
		/* relaxed: statistics; the threshold tolerates a few samples
		 * counted late. */
		kt_add(&k->hist[bucket_of(ticks)], 1, relaxed);
		n = kt_add(&k->count, 1, relaxed) + 1;
		if (pct && (n % KT_RECALC == 0 || n == min))
			kt_store(&k->pct_ticks, percentile_ticks(k, pct, n), relaxed);
	}
}

/* For tests: the histogram's bucket arithmetic. */
KT_NOINSTR uint32_t ktrace__bucket_of(uint64_t v) { return bucket_of(v); }
KT_NOINSTR uint64_t ktrace__bucket_top(uint32_t b) { return bucket_top(b); }
