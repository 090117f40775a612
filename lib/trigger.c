/*
 * trigger.c - request kinds: numbers, thresholds, tail-latency triggers,
 * typical samples and the latency histograms every snapshot carries.
 * (request.c holds a request's records aside and calls in here.)
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
 * thread (trigq.c, writer.c), which applies the delay and the rate limit.
 *
 * Keep threshold: a request is slow (kept whole) when it is slower than
 * its kind's absolute trigger threshold, or than its trigger percentile,
 * or than the running KTRACE_KEEP_PCT percentile (default 99.9) once
 * KTRACE_KEEP_MIN_SAMPLES requests of the kind were seen.
 *
 * Typical samples are chosen when a request begins, never from its
 * duration, so they are an unbiased sample of the kind's requests: the
 * first request of a kind to begin after next_sample, which then moves
 * KTRACE_SAMPLE_MS * (0.5 .. 1.5) ahead (a random factor, so that a
 * periodic workload is not sampled in phase).
 *
 * Histograms for the snapshot: per kind, KT_SLICES slices of 2^KT_SLICE_SHIFT
 * counter ticks (about 14 s at 2.5 GHz), each a ring entry tagged with the
 * slice number it counts.  A request ending in slice e adds to entry
 * e % KT_SLICES when its tag is e; the writer thread tags and clears the
 * entry of slice e + 1 during slice e (ktrace__kinds_tick), so no
 * application thread ever clears one.  A request that finds a stale tag
 * (the writer did not run) is counted in 'unsliced' only.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KT_KINDS 256u                /* kinds with their own histogram */
#define KT_SUB_BITS 4u
#define KT_SUB (1u << KT_SUB_BITS)
#define KT_BUCKETS (64u * KT_SUB)
#define KT_RECALC 64u
#define KT_SLICES 16u
#define KT_SLICE_SHIFT 35u

/* One histogram slice: written by any thread ending a request (relaxed
 * adds), tagged and cleared by the writer thread only. */
struct kt_slice {
	_Atomic uint64_t tag;            /* slice number + 1 it counts, 0 = none */
	_Atomic uint64_t max_ticks;      /* 0: nothing counted yet */
	_Atomic uint32_t b[KT_BUCKETS];
};

struct kt_kind {
	_Atomic uint64_t count;          /* requests ended */
	_Atomic uint64_t pct_ticks;      /* cached percentile threshold, 0 = none */
	_Atomic uint64_t abs_ns;         /* absolute threshold, 0 = off */
	_Atomic uint64_t pct_x1000;      /* percentile * 1000, 0 = off */
	_Atomic uint64_t min_samples;    /* before the percentile arms */
	_Atomic int configured;          /* ktrace_trigger_set was called */
	_Atomic uint32_t number;         /* requests begun (numbers them) */
	_Atomic uint64_t keep_ticks;     /* cached KTRACE_KEEP_PCT threshold, 0 = none */
	_Atomic uint64_t next_sample;    /* counter: the next request to begin after
	                                    it is a typical sample */
	_Atomic uint64_t kept_slow, kept_sampled, kept_other, unsliced;
	struct kt_slice *_Atomic slices; /* KT_SLICES, mmapped at the first end */
	_Atomic uint64_t hist[KT_BUCKETS];
};

static struct kt_kind kinds[KT_KINDS];
static _Atomic uint32_t nkinds_used;   /* highest kind id seen + 1 */
static _Atomic uint64_t hold_failed;

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

static KT_NOINSTR struct kt_kind *kind_of(uint32_t id)
{
	uint32_t n;

	if (id == 0 || id >= KT_KINDS)
		return NULL;
	/* relaxed: a bound for the snapshot's loop, which reads each kind's
	 * counters with relaxed loads anyway. */
	n = kt_load(&nkinds_used, relaxed);
	while (n <= id && !kt_cas(&nkinds_used, &n, id + 1, relaxed))
		;
	return &kinds[id];
}

KT_NOINSTR uint32_t ktrace__kind_number(uint32_t id)
{
	struct kt_kind *k = kind_of(id);
	/* relaxed: a counter; each request gets a distinct number. */
	return k ? kt_add(&k->number, 1, relaxed) + 1 : 0;
}

/* xorshift64*, per thread: the sampling jitter needs no quality beyond
 * not being in phase with the workload. */
static __thread uint64_t rnd_state __attribute__((tls_model("initial-exec")));

static KT_NOINSTR uint64_t rnd(uint64_t now)
{
	uint64_t x = rnd_state ? rnd_state : (now | 1) * 0x9E3779B97F4A7C15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rnd_state = x;
	return x * 0x2545F4914F6CDD1Dull;
}

KT_NOINSTR int ktrace__kind_sample(uint32_t id, uint64_t now)
{
	struct kt_kind *k = kind_of(id);
	uint64_t hz = kt_load(&ktrace__g.hz_cached, relaxed), next, step;

	if (k == NULL || ktrace__cfg.sample_ms == 0)
		return 0;
	if (hz == 0)   /* the first ~10 ms: a step of about the right size */
		hz = 1000000000;
	/* relaxed: the CAS below decides which thread takes the sample. */
	next = kt_load(&k->next_sample, relaxed);
	if (now < next)
		return 0;
	step = (uint64_t)((unsigned __int128)hz * ktrace__cfg.sample_ms / 1000);
	step = step / 2 + (uint64_t)((unsigned __int128)step * (rnd(now) >> 32) >> 32);
	return kt_cas(&k->next_sample, &next, now + step, relaxed);
}

static KT_NOINSTR struct kt_slice *slices_of(struct kt_kind *k)
{
	/* acquire: pairs with the release CAS that installed them. */
	struct kt_slice *s = kt_load(&k->slices, acquire), *expect = NULL;
	size_t bytes = sizeof(*s) * KT_SLICES;

	if (s)
		return s;
	s = ktrace__map_own(bytes, 0);
	if (s == NULL)
		return NULL;
	/* The current slice is tagged here; the writer tags the next ones. */
	kt_store(&s[(ktrace__now() >> KT_SLICE_SHIFT) % KT_SLICES].tag,
	         (ktrace__now() >> KT_SLICE_SHIFT) + 1, relaxed);
	/* release: publishes the tags above with the pointer. */
	if (!kt_cas(&k->slices, &expect, s, release)) {
		ktrace__unmap_own(s, bytes);
		s = expect;
	}
	return s;
}

static KT_NOINSTR void slice_add(struct kt_kind *k, uint64_t end, uint64_t ticks)
{
	struct kt_slice *s = slices_of(k);
	uint64_t e = end >> KT_SLICE_SHIFT, m;

	if (s == NULL) {
		kt_add(&k->unsliced, 1, relaxed);
		return;
	}
	s += e % KT_SLICES;
	/* acquire: pairs with the writer's release store of the tag, after
	 * it cleared the slice. */
	if (kt_load(&s->tag, acquire) != e + 1) {
		kt_add(&k->unsliced, 1, relaxed);
		return;
	}
	/* relaxed: statistics, read by the snapshot as they are. */
	kt_add(&s->b[bucket_of(ticks)], 1, relaxed);   /* the count is their sum */
	m = kt_load(&s->max_ticks, relaxed);
	while (ticks > m && !kt_cas(&s->max_ticks, &m, ticks, relaxed))
		;
}

KT_NOINSTR void ktrace__kinds_tick(void)
{
	uint32_t n = kt_load(&nkinds_used, relaxed);
	uint64_t e = ktrace__now() >> KT_SLICE_SHIFT;

	for (uint32_t id = 1; id < n && id < KT_KINDS; id++) {
		struct kt_slice *s = kt_load(&kinds[id].slices, acquire), *x;
		if (s == NULL)
			continue;
		for (uint64_t f = e; f <= e + 1; f++) {
			x = &s[f % KT_SLICES];
			if (kt_load(&x->tag, relaxed) == f + 1)
				continue;
			kt_store(&x->tag, 0, relaxed);
			for (uint32_t b = 0; b < KT_BUCKETS; b++)
				kt_store(&x->b[b], 0, relaxed);
			kt_store(&x->max_ticks, 0, relaxed);
			/* release: the clearing above happens before any add
			 * that sees the new tag (acquire in slice_add). */
			kt_store(&x->tag, f + 1, release);
		}
	}
}

KT_NOINSTR void ktrace__kind_fate(uint32_t id, uint32_t keep)
{
	struct kt_kind *k = kind_of(id);

	if (k == NULL)
		return;
	/* relaxed: counters read by the snapshot as they are. */
	if (keep & (KTRACE_REQ_SLOW | KTRACE_REQ_TRIGGER))
		kt_add(&k->kept_slow, 1, relaxed);
	else if (keep & KTRACE_REQ_SAMPLED)
		kt_add(&k->kept_sampled, 1, relaxed);
	else if (keep)
		kt_add(&k->kept_other, 1, relaxed);
	/* dropped: the rest of count (no locked add on the common path) */
}

KT_NOINSTR void ktrace__kind_refate(uint32_t id)
{
	struct kt_kind *k = kind_of(id);

	if (k == NULL)
		return;
	/* relaxed: counters, as in ktrace__kind_fate. */
	kt_add(&k->kept_other, 1, relaxed);
}

/*
 * The share of the ring that requests slow only by the running percentile
 * may take: half the window budget of a core (ring words / window_s), per
 * thread (a thread writes mostly to the core it runs on), as a token bucket
 * of a second's worth in the thread's hold state.  On a service of 100k
 * requests a second, p99.9 is 100 a second: kept whole they would outgrow
 * the ring, so past this share such requests count as slow but are not
 * kept (a request over a trigger threshold always is).
 */
static _Atomic uint64_t slow_refused;

KT_NOINSTR int ktrace__kind_slow_budget(int64_t *tokens, uint64_t *last, uint64_t words,
                                        uint64_t now)
{
	uint64_t hz = kt_load(&ktrace__g.hz_cached, relaxed);
	uint64_t rate = (uint64_t)ktrace__g.ring_words /
	                (ktrace__cfg.window_s ? ktrace__cfg.window_s : 1) / 2;
	int64_t tok = *tokens;

	if (hz == 0)
		return 1;
	if (*last == 0 || now < *last) {
		tok = (int64_t)rate;
	} else {
		tok += (int64_t)((unsigned __int128)(now - *last) * rate / hz);
		if (tok > (int64_t)rate)
			tok = (int64_t)rate;
	}
	*last = now;
	if (tok < (int64_t)words) {
		*tokens = tok;
		/* relaxed: a statistic for the snapshot */
		kt_add(&slow_refused, 1, relaxed);
		return 0;
	}
	*tokens = tok - (int64_t)words;
	return 1;
}

KT_NOINSTR void ktrace__hold_failed(void)
{
	kt_add(&hold_failed, 1, relaxed);
}

/*
 * The aftermath.  A trigger was accepted for a request that ended at end:
 * its window is copied KTRACE_TRIGGER_DELAY_MS later so that what followed
 * is in it, so requests that end meanwhile are kept (request.c), on every
 * thread, or the aftermath would hold only the calls outside requests.
 * Until: the writer lowers the mark to the counter when it takes the
 * trigger (writer.c), just before it copies the window; set here to
 * four times the delay and a second more, for a writer that never comes.
 * Bounded: at most an eighth of one
 * core's ring per trigger (after_words), so that a busy service's
 * aftermath cannot push the slow request itself, or the window before it,
 * out of the ring.
 */
static _Atomic uint64_t after_words;

static KT_NOINSTR void after_until(uint64_t end)
{
	uint64_t hz = kt_load(&ktrace__g.hz_cached, relaxed);
	uint64_t ms = ktrace__cfg.trigger_delay_ms, until, old;

	if (hz == 0)
		return;   /* no estimate yet (and no trigger fires without one) */
	until = end + (uint64_t)((long double)(4 * ms + 1000) * (long double)hz / 1e3L);
	kt_store(&after_words, 0, relaxed);
	old = kt_load(&ktrace__g.after_until, relaxed);
	while (old < until && !kt_cas(&ktrace__g.after_until, &old, until, relaxed)) {
	}
}

KT_NOINSTR int ktrace__after_keep(uint64_t end, uint64_t words)
{
	/* relaxed: a request that sees a new trigger late is one dropped at
	 * the aftermath's edge, never a wrong record. */
	if (end > kt_load(&ktrace__g.after_until, relaxed))
		return 0;
	return kt_add(&after_words, words, relaxed) + words <= ktrace__g.ring_words / 8;
}

KT_NOINSTR void ktrace__kind_end(uint32_t kid, uint32_t number, uint32_t begin_slot,
                                 uint64_t begin, uint64_t end, struct kt_req_end *out)
{
	struct kt_thread *t = kt_self();
	uint64_t ticks, hz, thr_ns = 0, dur_ns, abs_ns = 0, pct = 0, min = 1, n, kt;
	struct kt_kind *k = kind_of(kid);
	uint32_t why = 0;

	ticks = end > begin ? end - begin : 0;
	out->ticks = ticks;
	out->keep = 0;
	hz = kt_load(&ktrace__g.hz_cached, relaxed);
	if (k) {
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
	if (hz == 0) { /* no frequency estimate yet (first ~10 ms) */
		out->keep |= KTRACE_REQ_WARMUP;
		goto record;
	}
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
	if (why)
		out->keep |= KTRACE_REQ_SLOW;
	kt = k ? kt_load(&k->keep_ticks, relaxed) : 0;
	out->pct_only = 0;
	if (kt != 0 && ticks > kt && !why) {
		out->keep |= KTRACE_REQ_SLOW;
		out->pct_only = 1;
	}
	/* No threshold to judge by yet: keep it (a program with few requests
	 * keeps them all; a busy one, its first KTRACE_KEEP_MIN_SAMPLES). */
	if (abs_ns == 0 && kt == 0 && !(k && pct && kt_load(&k->pct_ticks, relaxed) &&
	                                kt_load(&k->count, relaxed) >= min))
		out->keep |= KTRACE_REQ_WARMUP;
	dur_ns = why ? ns_of(ticks, hz) : 0;
	/* A request that overlapped a snapshot write was slowed by it, at
	 * least in part: firing would make snapshots trigger snapshots. */
	if (why && (kt_load(&ktrace__snap_busy_since, relaxed) ||
	            kt_load(&ktrace__snap_last_end, relaxed) > begin)) {
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, 1);
		why = 0;
	}
	if (why) {
		struct ktrace_trigger_rec tr;
		const char *name = ktrace__name_text(kid);

		out->keep |= KTRACE_REQ_TRIGGER;
		memset(&tr, 0, sizeof(tr));
		tr.request_id = number;
		tr.begin_tsc = begin;
		tr.end_tsc = end;
		tr.threshold_ns = thr_ns;
		tr.duration_ns = dur_ns;
		tr.kind_id = kid;
		tr.thread_slot = begin_slot ? begin_slot : t->slot;
		tr.tid = begin_slot && begin_slot != t->slot ? ktrace__thread_tid(begin_slot)
		                                               : t->tid;
		tr.why = why;
		tr.percentile_x1000 = why == KTRACE_TRIGGER_PERCENTILE ? (uint32_t)pct : 0;
		tr.samples = k ? (uint32_t)kt_load(&k->count, relaxed) : 0;
		strncpy(tr.kind, name, sizeof(tr.kind) - 1);
		if (ktrace__snapshot_request_trigger(&tr, ktrace__cfg.trigger_delay_ms) == 0)
			after_until(end);
	}
record:
	if (k) {
		uint64_t kp = pct_x1000(ktrace__cfg.keep_pct);
		uint64_t kmin = ktrace__cfg.keep_min_samples;
		/* relaxed: statistics; the thresholds tolerate a few samples
		 * counted late. */
		kt_add(&k->hist[bucket_of(ticks)], 1, relaxed);
		slice_add(k, end, ticks);
		n = kt_add(&k->count, 1, relaxed) + 1;
		if (pct && (n % KT_RECALC == 0 || n == min))
			kt_store(&k->pct_ticks, percentile_ticks(k, pct, n), relaxed);
		if (kp && n >= kmin && (n % KT_RECALC == 0 || n == kmin))
			kt_store(&k->keep_ticks, percentile_ticks(k, kp, n), relaxed);
	}
}

/* ---- the REQUESTS section ------------------------------------------------ */

KT_NOINSTR void *ktrace__requests_serialize(size_t *len, uint32_t *count)
{
	uint32_t n = kt_load(&nkinds_used, relaxed), nk = 0;
	uint64_t now = ktrace__now(), e = now >> KT_SLICE_SHIFT, hz;
	size_t cap = sizeof(struct ktrace_req_hdr), off;
	struct ktrace_req_hdr *h;
	unsigned char *p;

	for (uint32_t id = 1; id < n && id < KT_KINDS; id++)
		if (kt_load(&kinds[id].count, relaxed) || kt_load(&kinds[id].number, relaxed))
			cap += sizeof(struct ktrace_req_kind_rec) +
			       KT_SLICES * (sizeof(struct ktrace_req_slice_rec) +
			                    KT_BUCKETS * sizeof(struct ktrace_req_bucket));
	p = ktrace__walloc(cap);   /* zeroed; the writer thread never mallocs */
	if (p == NULL)
		return NULL;
	h = (struct ktrace_req_hdr *)p;
	h->flags = ktrace__cfg.keep_all ? 0 : KTRACE_REQS_HOLD;
	h->slice_ticks = 1ull << KT_SLICE_SHIFT;
	h->slice_count = KT_SLICES;
	h->sub_bits = KT_SUB_BITS;
	h->hold_bytes = (uint64_t)ktrace__cfg.hold_kb * 1024;
	h->sample_ms = ktrace__cfg.sample_ms;
	h->keep_pct_x1000 = (uint32_t)pct_x1000(ktrace__cfg.keep_pct);
	h->keep_min_samples = ktrace__cfg.keep_min_samples;
	h->hold_failed = kt_load(&hold_failed, relaxed);
	h->slow_over_budget = kt_load(&slow_refused, relaxed);
	h->gap_us = ktrace__cfg.keep_all ? 0 : ktrace__cfg.gap_us;
	{
		uint64_t g = ktrace__hold_gaps_kept();
		h->gaps_kept = g > UINT32_MAX ? UINT32_MAX : (uint32_t)g;
	}
	off = sizeof(*h);
	hz = kt_load(&ktrace__g.hz_cached, relaxed);
	for (uint32_t id = 1; id < n && id < KT_KINDS; id++) {
		struct kt_kind *k = &kinds[id];
		struct ktrace_req_kind_rec *r;
		struct kt_slice *s;
		uint64_t kt, abs_ns, pt;

		if (!kt_load(&k->count, relaxed) && !kt_load(&k->number, relaxed))
			continue;
		r = (struct ktrace_req_kind_rec *)(p + off);
		off += sizeof(*r);
		nk++;
		r->kind_id = id;
		r->ended = kt_load(&k->count, relaxed);
		r->kept_slow = kt_load(&k->kept_slow, relaxed);
		r->kept_sampled = kt_load(&k->kept_sampled, relaxed);
		r->kept_other = kt_load(&k->kept_other, relaxed);
		/* Requests in flight between their count and their fate are
		 * counted here as dropped (a few at most). */
		{
			uint64_t kept = r->kept_slow + r->kept_sampled + r->kept_other;
			r->dropped = r->ended > kept ? r->ended - kept : 0;
		}
		if (kt_load(&k->configured, relaxed)) {
			abs_ns = kt_load(&k->abs_ns, relaxed);
			r->trig_pct_x1000 = (uint32_t)kt_load(&k->pct_x1000, relaxed);
		} else {
			abs_ns = ktrace__cfg.trigger_us * 1000;
			r->trig_pct_x1000 = (uint32_t)pct_x1000(ktrace__cfg.trigger_pct);
		}
		r->abs_ns = abs_ns;
		kt = kt_load(&k->keep_ticks, relaxed);
		pt = kt_load(&k->pct_ticks, relaxed);
		if (pt && (kt == 0 || pt < kt))
			kt = pt;
		r->threshold_ns = kt && hz ? ns_of(kt, hz) : 0;
		if (abs_ns && (r->threshold_ns == 0 || abs_ns < r->threshold_ns))
			r->threshold_ns = abs_ns;
		s = kt_load(&k->slices, acquire);
		if (s == NULL)
			continue;
		/* Oldest first: the slices of the last KT_SLICES slice numbers
		 * whose tag says they count that number. */
		for (uint64_t f = e >= KT_SLICES - 1 ? e - (KT_SLICES - 1) : 0; f <= e; f++) {
			struct kt_slice *x = &s[f % KT_SLICES];
			struct ktrace_req_slice_rec *sr;
			struct ktrace_req_bucket *bk;
			/* acquire: pairs with the writer's release of the tag. */
			if (kt_load(&x->tag, acquire) != f + 1)
				continue;
			sr = (struct ktrace_req_slice_rec *)(p + off);
			off += sizeof(*sr);
			r->nslices++;
			sr->start_tsc = f << KT_SLICE_SHIFT;
			sr->end_tsc = f == e ? now : (f + 1) << KT_SLICE_SHIFT;
			sr->max_ticks = kt_load(&x->max_ticks, relaxed);
			bk = (struct ktrace_req_bucket *)(p + off);
			for (uint32_t b = 0; b < KT_BUCKETS; b++) {
				uint32_t c = kt_load(&x->b[b], relaxed);
				if (c == 0)
					continue;
				bk[sr->nbuckets].bucket = b;
				bk[sr->nbuckets].count = c;
				sr->nbuckets++;
				sr->count += c;
			}
			off += sr->nbuckets * sizeof(*bk);
			if (sr->nbuckets == 0) {   /* nothing ended in it */
				off -= sizeof(*sr);
				r->nslices--;
				memset(sr, 0, sizeof(*sr));
			}
		}
	}
	h->nkinds = nk;
	*len = off;
	*count = nk;
	return p;
}

/* For tests: the histogram's bucket arithmetic. */
KT_NOINSTR uint32_t ktrace__bucket_of(uint64_t v) { return bucket_of(v); }
KT_NOINSTR uint64_t ktrace__bucket_top(uint32_t b) { return bucket_top(b); }
