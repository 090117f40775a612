/*
 * clock.c - the event clock, its frequency, and wall-clock anchors.
 *
 * The event clock is the invariant TSC when the CPU has one (CPUID
 * 0x80000007 EDX bit 8): the hot path reads it with rdtsc.  Otherwise (or
 * with KTRACE_CLOCK=monotonic) it is CLOCK_MONOTONIC in ns, read under the
 * core lock by the slow path, and the snapshot says so.  On aarch64 it is
 * the virtual counter cntvct_el0 (constant rate, same on every core; the
 * rate is cntfrq_el0), read by the slow path (no rseq append there yet).
 *
 * Anchors are (counter, CLOCK_REALTIME, CLOCK_MONOTONIC) triples taken at
 * init and then every 100 ms by the writer thread, kept in a ring of
 * KT_ANCHORS entries outside the event rings (about 400 s of history).
 * Only the writer thread writes and reads them after init; init runs before
 * the writer thread exists (pthread_create orders the two).  The counter
 * frequency is the slope between the oldest and newest anchors, which
 * refines itself as the process runs; before 50 ms of anchors exist it is
 * measured once over 250 us (by the writer thread as it starts; +-30 ns
 * of clock reads in 250 us: 1.2e-4, enough for the budget and the
 * triggers; 2 ms before, which delayed the budget's first decision while
 * a program's start recorded every call).
 */
#include "internal.h"

#include <stdio.h>

#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#define KT_ANCHORS 4096

static struct ktrace_anchor_rec anchors[KT_ANCHORS]; /* writer thread */
static uint64_t anchor_count;                        /* ever taken */
static uint64_t quick_hz;                            /* 250 us calibration */
static struct ktrace_anchor_rec hz_from;             /* its start: a tight pair at init */

static KT_NOINSTR int64_t ts_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Added to every CLOCK_REALTIME read; 0 but in tests, which step the
 * wall clock through it (a test cannot step the machine's clock, and a
 * time namespace does not offset CLOCK_REALTIME): test_e2e_hostenv
 * sets it from a program linked with the static library. */
_Atomic int64_t ktrace__realtime_offset_ns;

KT_NOINSTR int64_t ktrace__realtime_ns(void)
{
	/* relaxed: a free-standing value. */
	return ts_ns(CLOCK_REALTIME) + kt_load(&ktrace__realtime_offset_ns, relaxed);
}
KT_NOINSTR int64_t ktrace__monotonic_ns(void) { return ts_ns(CLOCK_MONOTONIC); }

/* t (seconds since 1970, UTC) as YYYYMMDDTHHMMSSZ.  Not gmtime_r(): its
 * first call in a process loads the time zone (TZ, /etc/localtime) with
 * malloc and fopen, and the writer thread, which names the files, never
 * mallocs (snapfile.c).  Days to a civil date: H. Hinnant's algorithm
 * (proleptic Gregorian, eras of 400 years from 0000-03-01). */
KT_NOINSTR void ktrace__utc_stamp(int64_t t, char *out, size_t len)
{
	int64_t days = t / 86400, s = t % 86400;

	if (s < 0) {
		s += 86400;
		days--;
	}
	days += 719468;   /* 1970-01-01 - 0000-03-01 */
	int64_t era = (days >= 0 ? days : days - 146096) / 146097;
	int64_t doe = days - era * 146097;                                   /* [0, 146096] */
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* [0, 365] */
	int64_t mp = (5 * doy + 2) / 153;                                    /* March = 0 */
	int64_t d = doy - (153 * mp + 2) / 5 + 1;
	int64_t m = mp < 10 ? mp + 3 : mp - 9;
	int64_t y = yoe + era * 400 + (m <= 2);

	snprintf(out, len, "%04lld%02lld%02lldT%02lld%02lld%02lldZ", (long long)y, (long long)m,
	         (long long)d, (long long)(s / 3600), (long long)(s / 60 % 60), (long long)(s % 60));
}

static KT_NOINSTR __attribute__((unused)) int has_invariant_tsc(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;

	if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
		return 0;
	__get_cpuid(0x80000007u, &a, &b, &c, &d);
	return (d >> 8) & 1;
#else
	return 0;
#endif
}

#if defined(__aarch64__)
static KT_NOINSTR uint64_t cntvct(void)
{
	uint64_t v;
	/* isb: the read is not hoisted above earlier instructions. */
	__asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) :: "memory");
	return v;
}

static KT_NOINSTR uint64_t cntfrq(void)
{
	uint64_t v;
	__asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(v));
	return v;
}
#endif

/* The CPU's own counter: "tsc" on x86, cntvct_el0 on aarch64; 0 if none. */
static KT_NOINSTR int cpu_counter(void)
{
#if defined(__aarch64__)
	return cntfrq() ? KTRACE_CLOCK_CNTVCT : 0;
#else
	return has_invariant_tsc() ? KTRACE_CLOCK_TSC : 0;
#endif
}

KT_NOINSTR uint64_t ktrace__now(void)
{
#if defined(__x86_64__)
	if (KT_LIKELY(ktrace__g.clock_source == KTRACE_CLOCK_TSC))
		return __rdtsc();
#elif defined(__aarch64__)
	if (KT_LIKELY(ktrace__g.clock_source == KTRACE_CLOCK_CNTVCT))
		return cntvct();
#endif
	return (uint64_t)ts_ns(CLOCK_MONOTONIC);
}

/* cntfrq_el0 on aarch64: the counter's exact rate; 0 elsewhere. */
static KT_NOINSTR uint64_t counter_hz(void)
{
#if defined(__aarch64__)
	return cntfrq();
#else
	return 0;
#endif
}

static KT_NOINSTR void bracket(struct ktrace_anchor_rec *a, int tries, int64_t good_ns);

KT_NOINSTR int ktrace__clock_init(void)
{
	struct kt_globals *g = &ktrace__g;

	int counter = cpu_counter();

	/* KTRACE_CLOCK=tsc asks for the CPU's counter (cntvct on aarch64). */
	if (ktrace__cfg.force_clock == KTRACE_CLOCK_MONOTONIC)
		g->clock_source = KTRACE_CLOCK_MONOTONIC;
	else
		g->clock_source = counter ? counter : KTRACE_CLOCK_MONOTONIC;
	if (ktrace__cfg.force_clock == KTRACE_CLOCK_TSC && !counter)
		ktrace__say("KTRACE_CLOCK=tsc but this CPU has no invariant TSC; "
		            "using CLOCK_MONOTONIC");
	/* TSC: KT_TSC_SHIFT (the hot path's, ~100 ns ticks at 2.5 GHz).
	 * Monotonic ns: 6 (64 ns ticks).  cntvct: the largest shift that
	 * keeps a tick at most 100 ns (62.5 MHz: 2, 1 GHz: 6, 24 MHz: 1). */
	if (g->clock_source == KTRACE_CLOCK_TSC)
		g->tsc_shift = KT_TSC_SHIFT;
	else if (g->clock_source == KTRACE_CLOCK_MONOTONIC)
		g->tsc_shift = 6;
	else
		for (g->tsc_shift = 0; g->tsc_shift < KT_TSC_SHIFT &&
		     ((uint64_t)20000000 << g->tsc_shift) <= counter_hz(); g->tsc_shift++)
			;
	/* Counter units between full timestamps (I3 in ring.c). */
	g->forward_max = (uint64_t)KTRACE_TS_FORWARD_MAX << g->tsc_shift;
	g->start_tsc = ktrace__now();
	ktrace__anchor_take();
	bracket(&hz_from, 4, 0);
	return 0;
}

KT_NOINSTR void ktrace__clock_reset(void)
{
	anchor_count = 0;
	ktrace__anchor_take();
}

/*
 * A (counter, realtime, monotonic) triple into *a: the counter is read
 * between the two monotonic reads, the realtime read next to it.  Both
 * clocks are vDSO reads of ~30 ns, but a preemption or a hypervisor exit
 * between them would put the pair microseconds or milliseconds apart:
 * keep the tightest of up to tries, stopping early once one is within
 * good_ns.
 */
static KT_NOINSTR void bracket(struct ktrace_anchor_rec *a, int tries, int64_t good_ns)
{
	int64_t best = INT64_MAX;

	for (int i = 0; i < tries && best > good_ns; i++) {
		int64_t m0 = ktrace__monotonic_ns();
		uint64_t c = ktrace__now();
		int64_t r = ktrace__realtime_ns();
		int64_t m1 = ktrace__monotonic_ns();

		if (m1 - m0 < best) {
			best = m1 - m0;
			a->tsc = c;
			a->realtime_ns = r;
			a->monotonic_ns = m0 + (m1 - m0) / 2;
		}
	}
}

/* An anchor: the switch records of sched.c are mapped onto the counter
 * through these, so up to 8 tries, and 2 us is tight enough. */
KT_NOINSTR void ktrace__anchor_take(void)
{
	bracket(&anchors[anchor_count % KT_ANCHORS], 8, 2000);
	anchor_count++;
}

/*
 * The counter's rate until the anchors span 50 ms: over at least 250 us,
 * from the pair clock_init took (the tightest of 4 at each end: the
 * rate's error is theirs).  The writer asks first, at its start, which
 * comes 0.3-1.5 ms after clock_init (the perf events, the code's copy and
 * the thread between): no sleep then.  It slept 250 us there, and the
 * budget's first decision waited for it while the program recorded every
 * call (a third of the calls recorded in SQLite's 0.1 s run came before
 * the first mute).  From the pair *from; *slept_ns (if not NULL): how
 * long it slept (tests).
 */
static KT_NOINSTR uint64_t measure_hz_from(const struct ktrace_anchor_rec *from, int64_t *slept_ns)
{
	struct ktrace_anchor_rec a0 = *from, a1;
	int64_t span;

	bracket(&a1, 4, 0);
	span = a1.monotonic_ns - a0.monotonic_ns;
	if (a0.monotonic_ns == 0 || span < 0) {
		a0 = a1;   /* no pair from init: measure */
		span = 0;
	}
	if (slept_ns)
		*slept_ns = 0;
	if (span < 250 * 1000) {
		struct timespec d = {0, (long)(250 * 1000 - span)};

		nanosleep(&d, NULL);
		bracket(&a1, 4, 0);
		if (slept_ns)
			*slept_ns = a1.monotonic_ns - a0.monotonic_ns - span;
	}
	if (a1.monotonic_ns <= a0.monotonic_ns)
		return 1000000000;
	return (uint64_t)((long double)(a1.tsc - a0.tsc) * 1e9L /
	                  (long double)(a1.monotonic_ns - a0.monotonic_ns));
}

static KT_NOINSTR uint64_t measure_hz(int64_t *slept_ns)
{
	return measure_hz_from(&hz_from, slept_ns);
}

/* Tests: measure_hz once more, from init's pair or (fresh) from one taken
 * now; *slept_ns: how long it slept. */
KT_NOINSTR uint64_t ktrace__clock_test_measure_hz(int fresh, int64_t *slept_ns)
{
	struct ktrace_anchor_rec from;

	if (!fresh)
		return measure_hz(slept_ns);
	bracket(&from, 4, 0);   /* a pair of its own: hz_from is init's, read by the writer */
	return measure_hz_from(&from, slept_ns);
}

KT_NOINSTR uint64_t ktrace__tsc_hz(void)
{
	const struct ktrace_anchor_rec *first, *last;
	uint64_t n = anchor_count;

	if (ktrace__g.clock_source == KTRACE_CLOCK_MONOTONIC)
		return 1000000000;
	if (ktrace__g.clock_source == KTRACE_CLOCK_CNTVCT)
		return counter_hz();   /* exact, from the architecture */
	if (n >= 2) {
		first = &anchors[(n > KT_ANCHORS ? n - KT_ANCHORS : 0) % KT_ANCHORS];
		last = &anchors[(n - 1) % KT_ANCHORS];
		if (last->monotonic_ns - first->monotonic_ns >= 50 * 1000 * 1000)
			return (uint64_t)((long double)(last->tsc - first->tsc) * 1e9L /
			                  (long double)(last->monotonic_ns - first->monotonic_ns));
	}
	if (!quick_hz)
		quick_hz = measure_hz(NULL);
	return quick_hz;
}

/* Counter value -> CLOCK_MONOTONIC ns, through the newest anchor and the
 * rate estimate (writer thread: the filter maps calls onto switch records). */
KT_NOINSTR int64_t ktrace__counter_to_mono_ns(uint64_t c)
{
	uint64_t n = anchor_count;
	const struct ktrace_anchor_rec *a;

	if (ktrace__g.clock_source != KTRACE_CLOCK_TSC)
		return (int64_t)c;   /* the counter is CLOCK_MONOTONIC ns */
	if (n == 0)
		return 0;
	a = &anchors[(n - 1) % KT_ANCHORS];
	return a->monotonic_ns +
	       (int64_t)((long double)((int64_t)(c - a->tsc)) * 1e9L / (long double)ktrace__tsc_hz());
}

KT_NOINSTR size_t ktrace__anchors_copy(struct ktrace_anchor_rec *dst, size_t max)
{
	uint64_t n = anchor_count, first = n > KT_ANCHORS ? n - KT_ANCHORS : 0;
	size_t k = 0;

	for (uint64_t i = first; i < n && k < max; i++)
		dst[k++] = anchors[i % KT_ANCHORS];
	return k;
}
