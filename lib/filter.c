/*
 * filter.c - the window budget: hold KTRACE_WINDOW_S seconds in the ring by
 * muting, at run time, the hottest functions whose calls are all short.
 *
 * Budget.  A core may write R = ring_words / window_s words per second on
 * average.  Each core has a token bucket of capacity ring_words / 4,
 * filled at R and drained by the words the core wrote (its pos, read
 * every decision).  A burst of up to a quarter of the ring drains a full
 * bucket at most to zero and mutes nothing; only a rate above R sustained
 * long enough to empty the bucket is pressure: then the window would end
 * up shorter than its target.
 *
 * CPU.  A core may also spend at most KTRACE_CPU_PCT % of its time
 * recording (cpu_wps(): default 2 in the lean mode, 0 = off otherwise):
 * a core writing faster is under pressure at once, whatever its bucket
 * holds, and claim_block (ring.c) wakes the writer for a decision when a
 * block filled that fast (ktrace__filter_hint), so a program's start or
 * a new hot phase is muted within milliseconds.
 *
 * Decisions (ktrace__filter_tick, on the writer thread, every ~100 ms;
 * every 10 ms (lean: 2 ms) for the first 200 ms and after a mute, unless
 * the last decision found nothing left to mute):
 *   1. per core: words written since the last decision, bucket, rate over
 *      the last second, window held (the span of the last ring_words
 *      words, from a history of positions) or projected (ring not yet
 *      wrapped: ring_words / rate);
 *   2. per core: a sample of the blocks written since the last decision (at
 *      most the newest SAMPLE_BLOCKS), copied with
 *      the snapshot reader's seqlock protocol (ring.c), walked record by
 *      record: events per function, and per thread a stack of entries, so
 *      complete calls give durations.  A function with a call of
 *      KTRACE_FILTER_MAX_US or more, or an entry open that long while its
 *      thread kept recording, counts as long (time the thread spent
 *      preempted, from sched.c's records where recorded, does not); a
 *      long call in which the thread blocked (for max_us or more) makes a
 *      function ineligible for good, and long calls at least 1 in 100 of the observed ones
 *      (very long ones, 100 times that, 1 in 100,000) keep it from being
 *      a candidate (candidate() says why a ratio).  A thread's stack
 *      restarts where it comes back from writing on another core
 *      (on_segment), so no measured call spans two calls;
 *   3. when a core is under pressure and still above R, mute the hottest
 *      eligible functions of its sample, by share of events, until the
 *      projected rate is under 0.7 R (room for the bucket to refill; under
 *      CPU pressure alone, 0.7 of the CPU rate); then wait COOLDOWN
 *      decisions for the threads to adopt it.  If the
 *      candidates run out first, the window is short and the BUDGET
 *      section says which ring size would hold it.
 *
 * Muting.  fmute[id] = E, then the global epoch = E (release).  A thread
 * adopts a new epoch in its slow path (a cache miss, a block switch, the
 * 27 ms timestamp deadline) and only when none of its muted frames is open
 * (ment == mexit), by setting its function cache's skip flags as of the
 * new epoch (and a miss fills an entry with KT_FC_MUTED from fmute[id] <=
 * its epoch), so a thread's view changes only at adoption.  record.c says
 * why the nesting then stays exact.  (Emptying the cache instead, as
 * before, sent every function's next call to the slow path, which also
 * looked for a newer epoch each time; now a thread whose calls all hit
 * its cache adopts at its next block switch or the deadline.)
 * A mute is also recorded in the ring (KTRACE_EXT_MUTE) and every snapshot
 * lists all of them (section BUDGET).
 *
 * Static control.  KTRACE_EXCLUDE / KTRACE_INCLUDE globs are matched once
 * per function, when it gets its compact id (funcs.c), against its name in
 * its module's symbol tables (elfsym.c).  EXCLUDE: never recorded.
 * INCLUDE: always recorded, never muted, and wins over EXCLUDE.
 */
#include "internal.h"

#include <sys/mman.h>
#include "snapshot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NF KTRACE_FUNC_ID_COUNT
#define BW KTRACE_BLOCK_WORDS
#define SAMPLE_BLOCKS 128u        /* most blocks sampled per core per decision */
#define HIST 4096u                /* decisions of position history per core */
#define INTERVAL_NS 100000000LL   /* between decisions */
#define EARLY_NS 10000000LL       /* between the first EARLY_TICKS decisions: a
                                     call-heavy program is muted within ~30 ms */
#define EARLY_TICKS 20
#define LEAN_EARLY_NS 2000000LL   /* the same in the lean mode, where a muted
                                     function costs a nop: over the same 200 ms */
#define LEAN_EARLY_TICKS 100
#define HINT_MIN_NS 1000000LL     /* between decisions a hint asks for */
#define LEAN_HINT_MIN_NS 250000LL /* the same in the lean mode: a new hot
                                     phase records at 40-80 M events/s until
                                     its decision, and a decision costs the
                                     writer's core ~0.1 ms */
#define LONG_RATIO 100           /* see candidate() */
#define VERY_LONG 100            /* see candidate() */
#define VERY_RATIO 100000        /* see candidate() */
#define PREEMPT_SLACK_NS 100000LL /* per preemption inside a call: kernel time
                                     around the switch that its records do not
                                     cover (interrupt, scheduler, switch back;
                                     36 us measured at load 10 on the VM) */
#define COOLDOWN 2                /* decisions after a mute before the next */
#define FAST_AFTER_MUTE 20        /* decisions at EARLY_NS after one that muted */
#define RATE_NS 1000000000LL      /* the rate a window is projected from: over
                                     the last second ... */
#define RATE_MIN_NS 200000000LL   /* ... or since the last mute was adopted,
                                     if that is at least this long */
#define JUMP 1.5                  /* rate_jump(): this many times the rate */
#define ADOPT_NS 30000000LL       /* time allowed for threads to adopt a mute */
#define MIN_SHARE 20              /* decide(): 5 % of the budget */
#define MIN_CALLS 8               /* complete calls seen before a function can be muted */
#define STK_THREADS 32            /* threads followed per core sample */
#define STK_DEPTH 64

enum { ST_EXCLUDE = 1, ST_INCLUDE = 2 };

_Atomic uint32_t ktrace__mute_epoch;
/* Written before the id is published (funcs.c's release store of the id);
 * read by the slow path after it has the id. */
static _Atomic uint8_t fstatic[NF];     /* ST_* */
static _Atomic uint64_t faddr[NF];      /* function address */
static _Atomic uint64_t fexcl_tsc[NF];  /* counter at first call, EXCLUDE */
/* Epoch in which the function was muted, 0 = not muted; writer thread
 * writes, before publishing the epoch. */
static _Atomic uint32_t fmute[NF];
/* Muted calls reported by threads' slow paths. */
static _Atomic uint64_t muted_calls;

/* ---- writer thread only ------------------------------------------------- */

struct fobs {
	uint64_t calls;           /* complete calls observed */
	uint64_t long_calls;      /* of them (or open entries) >= max_ticks */
	uint64_t very_long;       /* of them >= VERY_LONG x max_ticks */
	uint64_t blocked_long;    /* of them, calls in which the thread blocked
	                             (>= max_us): ineligible for good */
	uint64_t max_ticks;       /* longest observed (complete or open), ticks */
	uint64_t sampled;         /* events in samples */
	double est_events;        /* events written, estimated from samples */
	uint32_t count;           /* events in this decision's sample of one core */
	uint32_t why;             /* enum ktrace_mute_why, 0 = not muted */
	uint64_t since_tsc;       /* counter at muting */
	uint64_t events_before;   /* est_events at muting */
	uint64_t sampled_before;  /* sampled at muting */
	uint32_t share_ppm;       /* share of the core's sample at muting */
};

struct cst {
	int have;
	uint32_t last_pos;        /* pos at the last decision */
	uint64_t pos64;           /* words ever written (pos, without wrap) */
	uint64_t last_tsc;        /* counter at the last decision */
	double tokens;            /* words */
	double int_wps;           /* words/s over the last interval */
	uint64_t rate_wps;        /* words/s over the last ~1 s */
	uint64_t window_ms;
	int projected;
	uint32_t hn, hhead;       /* history: hn entries ending before hhead */
	uint64_t *htsc, *hpos;
};

struct tstk {
	uint32_t slot, depth;
	uint32_t seq;             /* its last THREAD record's segment number */
	int have_seq;
	uint64_t last_tick;
	uint16_t id[STK_DEPTH];
	uint64_t tick[STK_DEPTH];
};

static struct {
	int ready;
	int64_t last_ns;
	int light;                /* the last decision sampled less than a block */
	struct fobs *obs;         /* NF */
	struct cst *cs;           /* ncpus */
	uint32_t *sample;         /* SAMPLE_BLOCKS * BW words */
	struct tstk *stk;         /* STK_THREADS */
	uint32_t *ids;            /* NF: decide()'s candidates */
	uint32_t nstk;
	int cooldown;
	int short_window;         /* candidates ran out with the window short */
	int none_left;            /* the last decision found no candidate */
	uint64_t ring_needed;     /* bytes */
	uint64_t decisions;
	uint64_t fast_until;      /* decisions at EARLY_NS until this many */
	uint64_t mute_tsc;        /* counter at the last mute, 0 = none */
	uint64_t max_ticks;       /* KTRACE_FILTER_MAX_US in ticks */
	double event_ns;          /* what recording one event costs, about */
	uint32_t nids;            /* compact ids below this this sample (ktrace__funcs_ids) */
} F;

/*
 * The CPU side of the budget (KTRACE_CPU_PCT).  A core that writes more
 * than cpu_pct % of a second's worth of recorded events (event_ns each:
 * the clock read measured at setup, plus the store) is under pressure at
 * once, whatever its bucket holds: its threads spend more than that share
 * of their time recording.  Default: 2 % in the lean mode, where a muted
 * function costs a nop (a program starts fast, not 30 ms late); none in
 * the default mode, where a muted call still costs both hooks and a burst
 * of up to a quarter of the ring mutes nothing.  0 = window only.
 */
static KT_NOINSTR int cpu_pct(void)
{
	int pct = ktrace__cfg.cpu_pct;

	return pct >= 0 ? pct : ktrace__lean_active() ? 2 : 0;
}

static KT_NOINSTR double cpu_wps(void)
{
	int pct = cpu_pct();

	if (pct == 0 || F.event_ns <= 0)
		return 0;
	return pct / 100.0 * 1e9 / F.event_ns;
}

static KT_NOINSTR int64_t early_ns(void)
{
	return ktrace__lean_active() ? LEAN_EARLY_NS : EARLY_NS;
}

KT_NOINSTR int ktrace__filter_on(void)
{
	return ktrace__cfg.filter;
}

/* ---- application threads: slow path --------------------------------------- */

/* The muted calls t skipped since it last said so, into the snapshot's
 * count: at each adoption, and at the thread's exit (record.c). */
KT_NOINSTR void ktrace__filter_report(struct kt_thread *t)
{
	if (t->ment != t->ment_reported) {
		/* relaxed: a statistic, read by the snapshot. */
		kt_add(&muted_calls, t->ment - t->ment_reported, relaxed);
		t->ment_reported = t->ment;
	}
	if (t->lskip != t->lskip_reported) {
		kt_add(&muted_calls, t->lskip - t->lskip_reported, relaxed);
		t->lskip_reported = t->lskip;
	}
}

KT_NOINSTR void ktrace__filter_adopt(struct kt_thread *t)
{
	uint64_t c;
	/* acquire: pairs with the writer's release store of the epoch, so
	 * the fmute[] entries of that epoch are visible. */
	uint32_t e = kt_load(&ktrace__mute_epoch, acquire);

	ktrace__filter_report(t);
	if (KT_LIKELY(e == t->mute_epoch))
		return;
	c = t->ment - t->mexit;
	if (c == 0) {
		t->nmlev = 0;   /* no frame from before is open: levels end */
	} else if (t->nmlev > 0 && t->mlev[t->nmlev - 1].lw == c) {
		t->mlev[t->nmlev - 1].next = e;   /* same mark: one level */
	} else if (t->nmlev < KT_MUTE_LEVELS) {
		t->mlev[t->nmlev].prev = t->mute_epoch;
		t->mlev[t->nmlev].next = e;
		t->mlev[t->nmlev].lw = c;
		t->nmlev++;
	} else {
		return;   /* no room: adopt when a level ends */
	}
	t->mlw = c;
	/* Each cached function's skip flags as of epoch e, the rest of the
	 * entry kept: emptying the cache instead sent every function's next
	 * call back to the slow path for its event and flags, a probe of the
	 * compact-id table (4 MiB) and, in the lean mode, of the entry sites
	 * (SQLite's short run adopts dozens of mute sets in its first
	 * milliseconds: most of its ~14 k slow entries).  Word stores, so that
	 * a traced signal handler's hook never reads a half-written entry; an
	 * entry without a compact id (the marker, event 0) has no flags. */
	for (uint32_t i = 0; i < KT_FCACHE_SIZE; i++) {
		uint64_t v = t->fcache[i];
		uint32_t ev = (uint32_t)v & KTRACE_EVENT_MASK;

		if (ev != 0)
			__atomic_store_n(&t->fcache[i], (v & ~(uint64_t)KT_FC_SKIP) |
			                 ktrace__filter_flags(ev, e), __ATOMIC_RELAXED);
	}
	t->mute_epoch = e;
}

/*
 * Mute levels.  A thread adopts a new mute set in its slow path whether or
 * not frames of muted calls are open; when c = ment - mexit > 0 skipped
 * frames are open, the adoption starts a level: (prev, next) = the epochs
 * adopted before and by it, lw = the fewest skipped frames open at any
 * moment since (c then).  Levels are kept oldest first; lw never decreases
 * from one to the next.
 *
 * Why an exit is then decided exactly.  Mute sets only grow, so the entry
 * of a call of F was skipped iff it happened after the thread adopted the
 * first view containing F, at level a (fmute[F] in (prev_a, next_a]; at
 * no level, or before the first one: an adoption with c = 0, lw 0).  At
 * F's exit, F's frame is the innermost: every frame opened after it has
 * closed, every frame open is older.  If F's entry came after adoption a
 * and was skipped, F's own frame is an open skipped frame opened after a,
 * so c > lw_a.  If F's entry came before a, no frame opened after a is
 * open, and lw_a counts exactly the skipped frames open: c = lw_a, and F
 * was not muted at its entry, so it was recorded.  So: skipped iff
 * c > lw_a.  The hot path checks against the newest level's mark, mlw >=
 * lw_a: c > mlw means skipped for any F; only c = mlw comes here.
 *
 * Lows.  A skipped exit makes c one less; every level's lw becomes at
 * most c (a suffix of them, since lw grows along the levels); a level at
 * lw 0 has no frame left from before it and is dropped (a prefix), and
 * two neighbours with the same lw answer alike forever, so they merge.
 * A longjmp out of skipped frames leaves c too high for good (docs/security-and-limits.md,
 * limits): levels then keep marks above it and merging bounds their
 * number; with KT_MUTE_LEVELS of them a thread adopts at the next c = 0.
 */
KT_NOINSTR int ktrace__filter_skip_exit(struct kt_thread *t, uint32_t ev)
{
	uint32_t id = ev - KTRACE_EV_ENTER_BASE, m, n = t->nmlev, i, k;
	uint64_t c = t->ment - t->mexit, lw = 0;

	if (c == 0 || id >= NF)
		return 0;
	/* relaxed: muted in this thread's view, so published with the epoch
	 * it adopted (acquire in adopt). */
	m = kt_load(&fmute[id], relaxed);
	for (i = 0; i < n; i++)
		if (m <= t->mlev[i].next) {
			lw = i == 0 && m <= t->mlev[0].prev ? 0 : t->mlev[i].lw;
			break;
		}
	if (c <= lw)
		return 0;   /* entered before the mute: record the exit */
	/* one instruction, like the hook's (a traced signal handler's hook
	 * may update the counters around it, never inside) */
	__atomic_fetch_add(&t->mexit, 1, __ATOMIC_RELAXED);
	c--;
	for (i = 0; i < n; i++)
		if (t->mlev[i].lw > c)
			t->mlev[i].lw = c;
	for (i = 0, k = 0; i < n; i++) {
		if (t->mlev[i].lw == 0)
			continue;
		if (k > 0 && t->mlev[k - 1].lw == t->mlev[i].lw) {
			t->mlev[k - 1].next = t->mlev[i].next;
			continue;
		}
		t->mlev[k++] = t->mlev[i];
	}
	t->nmlev = k;
	t->mlw = k ? t->mlev[k - 1].lw : 0;
	return 1;
}

KT_NOINSTR uint32_t ktrace__filter_flags(uint32_t ev, uint32_t epoch)
{
	uint32_t id = ev - KTRACE_EV_ENTER_BASE, m;

	if (id >= NF)
		return 0;
	/* relaxed: published with the id (funcs.c's release/acquire). */
	if (kt_load(&fstatic[id], relaxed) == ST_EXCLUDE)
		return KT_FC_EXCLUDED;
	/* relaxed: ordered by the acquire load of the epoch in adopt (a
	 * value newer than our epoch is ignored below, whatever we see). */
	m = kt_load(&fmute[id], relaxed);
	return m != 0 && m <= epoch ? KT_FC_MUTED : 0;
}

/*
 * One glob character class at p ("[...]", p past the '['): 1 if c is in
 * it; *end = the char after the ']'.  fnmatch's rules: '!' or '^' first
 * negates, a ']' first is literal, "a-z" is a range.  -1 when unclosed
 * (the '[' is then literal).
 */
static KT_NOINSTR int glob_class(const char *p, unsigned char c, const char **end)
{
	int neg = 0, in = 0;
	const char *q = p;

	if (*q == '!' || *q == '^') {
		neg = 1;
		q++;
	}
	for (int first = 1; *q && (first || *q != ']'); first = 0) {
		unsigned char lo = (unsigned char)*q++, hi = lo;
		if (*q == '-' && q[1] && q[1] != ']') {
			hi = (unsigned char)q[1];
			q += 2;
		}
		if (c >= lo && c <= hi)
			in = 1;
	}
	if (*q != ']')
		return -1;
	*end = q + 1;
	return in != neg;
}

/*
 * fnmatch(pat, name, 0) for '*', '?', "[...]" and '\' escapes, in a
 * fixed, small amount of stack: it runs in the slow path (the first call
 * of a function), on the application's stack, which can be an 8 KiB
 * signal alternate stack (glibc's fnmatch takes 2.3 KiB).  Iterative: a
 * '*' remembers where to resume, and a mismatch lets it take one more
 * character.
 */
static KT_NOINSTR int glob_match(const char *p, const char *n)
{
	const char *star_p = NULL, *star_n = NULL;

	for (;;) {
		const char *next = p + 1;
		int ok;

		if (*p == '*') {
			while (*p == '*')
				p++;
			star_p = p;
			star_n = n;
			continue;
		}
		if (*n == 0) {
			if (*p == 0)
				return 1;
			ok = 0;
		} else if (*p == '?') {
			ok = 1;
		} else if (*p == '[' && (ok = glob_class(p + 1, (unsigned char)*n, &next)) >= 0) {
			/* ok set by the class */
		} else if (*p == '\\' && p[1]) {
			ok = p[1] == *n;
			next = p + 2;
		} else {
			ok = *p != 0 && *p == *n;
		}
		if (ok) {
			p = next;
			n++;
			continue;
		}
		if (star_p == NULL || *star_n == 0)
			return 0;
		p = star_p;
		n = ++star_n;
	}
}

/* name matches one of list's comma-separated globs. */
static KT_NOINSTR int matches(const char *list, const char *name)
{
	char pat[256];
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, ",");
		if (n > 0 && n < sizeof(pat)) {
			memcpy(pat, p, n);
			pat[n] = 0;
			if (glob_match(pat, name))
				return 1;
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

KT_NOINSTR void ktrace__filter_new_func(uint32_t id, uintptr_t addr)
{
	const struct kt_config *c = &ktrace__cfg;
	char name[256];
	uint8_t st = 0;

	if (id >= NF)
		return;
	/* relaxed: published by the release store of the id in funcs.c. */
	kt_store(&faddr[id], addr, relaxed);
	if ((c->exclude[0] == 0 && c->include[0] == 0) ||
	    ktrace__sym_name(addr, name, sizeof(name)) != 0)
		return;
	if (c->include[0] && matches(c->include, name))
		st = ST_INCLUDE;
	else if (c->exclude[0] && matches(c->exclude, name))
		st = ST_EXCLUDE;
	if (st == ST_EXCLUDE)
		kt_store(&fexcl_tsc[id], ktrace__now(), relaxed);
	kt_store(&fstatic[id], st, relaxed);
}

/* Mute fn from now on, as a decision would (white-box tests). */
KT_NOINSTR void ktrace__filter_mute_now(uintptr_t fn)
{
	uint32_t ev = ktrace__func_event(fn), epoch;

	if (ev == 0)
		return;
	epoch = kt_load(&ktrace__mute_epoch, relaxed) + 1;
	kt_store(&fmute[ev - KTRACE_EV_ENTER_BASE], epoch, relaxed);
	/* release: as in decide(). */
	kt_store(&ktrace__mute_epoch, epoch, release);
}

/* Set by ktrace__filter_hint, cleared by the writer's next decision. */
static _Atomic uint32_t hint;

KT_NOINSTR void ktrace__filter_hint(void)
{
	uint32_t zero = 0;

	/* relaxed: the wake's add (seq_cst, so release too) publishes it. */
	if (kt_load(&hint, relaxed) == 0 && kt_cas(&hint, &zero, 1, relaxed))
		ktrace__writer_wake();
}

/* ---- writer thread: measure ------------------------------------------------- */

static KT_NOINSTR int setup(void)
{
	uint32_t n = ktrace__g.ncpus;
	uint64_t *hist;
	/* ktrace__walloc, not calloc: the writer thread never mallocs
	 * (snapfile.c says why).  One mapping for all of it: the first
	 * decision comes at the program's start, when its own faults and brk
	 * hold the mapping lock, and nine mmaps there took the writer
	 * 0.2-0.3 ms while every call was recorded (SQLite's short run). */
	size_t sz[6] = {NF * sizeof(*F.obs), n * sizeof(*F.cs), (size_t)SAMPLE_BLOCKS * BW * 4,
	                STK_THREADS * sizeof(*F.stk), NF * sizeof(*F.ids),
	                (size_t)n * 2 * HIST * sizeof(uint64_t)};
	void **dst[6] = {(void **)&F.obs, (void **)&F.cs, (void **)&F.sample,
	                 (void **)&F.stk, (void **)&F.ids, (void **)&hist};

	if (ktrace__walloc_parts(6, sz, dst) == NULL)
		return -1;
	for (uint32_t c = 0; c < n; c++) {
		F.cs[c].htsc = hist + (size_t)c * 2 * HIST;
		F.cs[c].hpos = F.cs[c].htsc + HIST;
	}
	/* The clock read, the bulk of an event's cost: the fastest of 8
	 * rounds (a preemption inside one would make the CPU budget far too
	 * strict for the process's life), bounded to [2, 200] ns. */
	F.event_ns = 200.0;
	for (int r = 0; r < 8; r++) {
		int64_t t0 = ktrace__monotonic_ns(), t1;
		uint64_t x = 0;

		for (int i = 0; i < 512; i++)
			x += ktrace__now();
		t1 = ktrace__monotonic_ns();
		__asm__ volatile("" : : "r"(x));
		if ((double)(t1 - t0) / 512.0 + 1.0 < F.event_ns)
			F.event_ns = (double)(t1 - t0) / 512.0 + 1.0;
	}
	if (F.event_ns < 2.0)
		F.event_ns = 2.0;
	F.ready = 1;
	return 0;
}

static KT_NOINSTR struct tstk *stk_of(uint32_t slot)
{
	for (uint32_t i = 0; i < F.nstk; i++)
		if (F.stk[i].slot == slot)
			return &F.stk[i];
	if (F.nstk == STK_THREADS)
		return NULL;
	F.stk[F.nstk].slot = slot;
	F.stk[F.nstk].depth = 0;
	F.stk[F.nstk].have_seq = 0;
	return &F.stk[F.nstk++];
}

/*
 * A THREAD record: slot writes on this core from here, as its segment seq.
 * seq grows by one each time the thread starts writing on a core; a jump
 * of more than one since its last segment here means it wrote on another
 * core meanwhile (it migrated and came back).  Its open entries here may
 * then have exited over there, and an exit here may close an entry made
 * over there: matching them would measure from one call's entry to
 * another call's exit, longer than any call that happened.  So its stack
 * restarts, as at the start of a sample.
 */
static KT_NOINSTR void on_segment(uint32_t slot, uint32_t seq)
{
	struct tstk *s = stk_of(slot);

	if (s == NULL)
		return;
	if (s->have_seq && seq != s->seq && seq != s->seq + 1)
		s->depth = 0;
	s->seq = seq;
	s->have_seq = 1;
}

/*
 * Intervals in which ktrace held the process's mapping lock for work of its
 * own that can last: a ring prefault (MADV_POPULATE_WRITE, ring.c), a lean
 * patch batch (mprotect, lean.c) or the lean tables' populate, a
 * snapshot's copy buffers (mmap, populate, munmap, and the touch of each
 * page where the populate is not supported: snapfile.c), a read of
 * /proc/self/maps (funcs.c), ktrace's other mappings and their first
 * write (ktrace__map_own: a thread's state, hold buffers, the writer's
 * buffers), a drain of the scheduling buffers that touches their pages
 * first (sched.c).  A page fault, brk, mmap or mprotect of a
 * program thread waits for them, and such a wait counted as the
 * function's would keep it from being muted for good: Lua's luaH_new
 * blocked 37 and 74 us in two calls at the start while the writer
 * prefaulted the rings, then stayed recorded all run (131 k calls, 3.5 x
 * the records of a run where it was muted).  An off-cpu stretch that
 * began in one counts as preempted up to OWN_CAP_NS after it ended (the
 * thread's wake-up and its wait for a cpu: milliseconds on a loaded
 * machine), the rest as blocked (sched.c).  Read by the writer.  Two
 * rings: the writer's own notes (a pass of the prefault notes up to 4, a
 * snapshot ~15, a first-lap drain 1), which nothing else writes, and the
 * program threads' (a thread's state and its hold buffer: 2-3 notes in a
 * thread's life; a thread meeting a new module, funcs.c, maybe in a
 * signal handler), relaxed words: a program that starts thousands of
 * threads a second would otherwise push the writer's intervals out
 * before the decision that needs them reads them.  A pair of the
 * program's ring read torn (a slot's old start with its new end) is
 * dropped when it spans more than OWN_MAX_NS.
 */
#define NOWN 1024         /* intervals per ring */
#define OWN_SLACK_NS 2000 /* around the readings: the syscall's entry and exit */
#define OWN_CAP_NS 20000000LL
#define OWN_MAX_NS 1000000000LL
static _Atomic int64_t own_t[2][NOWN][2];   /* [0]: the writer's, [1]: the program's */
static _Atomic uint32_t own_n[2];

KT_NOINSTR void ktrace__filter_own_mm(int64_t t0, int64_t t1)
{
	int r = !ktrace__writer_is_self();
	uint32_t i = kt_add(&own_n[r], 1, relaxed) % NOWN;

	kt_store(&own_t[r][i][0], t0, relaxed);
	kt_store(&own_t[r][i][1], t1, relaxed);
}

KT_NOINSTR int ktrace__madvise_own(void *p, size_t len, int advice)
{
	int64_t t0;
	int rc;

	/* optional (sandbox.c): a populate's callers touch the pages
	 * instead, a DONTNEED's keep them */
	if (!ktrace__optional_begin()) {
		errno = EPERM;
		return -1;
	}
	t0 = ktrace__monotonic_ns();
	rc = madvise(p, len, advice);
	ktrace__optional_end();
	ktrace__filter_own_mm(t0, ktrace__monotonic_ns());
	return rc;
}

KT_NOINSTR int ktrace__populate_write(void *p, size_t len)
{
	return ktrace__madvise_own(p, len, MADV_POPULATE_WRITE);
}

/*
 * An anonymous mapping of ktrace's own (MAP_PRIVATE | MAP_ANONYMOUS |
 * flags), made in a noted interval together with its first write: a fresh
 * mapping's first write fault prepares its anon_vma under the mapping lock
 * (Linux leaves the per-VMA lock for that), as long as the fault takes and
 * for as long as the thread is preempted in it: a hold of ktrace's as much
 * as the mmap's.  The kernel's mmap_lock tracepoints showed the writer's
 * first writes to a snapshot's buffers holding it 10-56 us each, ~10 times
 * a snapshot, outside every noted interval; a program thread's mprotect
 * waiting on one (for a tick, were the writer preempted in it) was the
 * function's own block as far as the budget could tell, and a function
 * that blocked is kept for good.  MAP_POPULATE: the populate holds the
 * lock too.  NULL on failure.
 */
KT_NOINSTR void *ktrace__map_own(size_t bytes, int flags)
{
	int64_t t0 = ktrace__monotonic_ns();
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1,
	               0);

	if (p != MAP_FAILED)
		*(volatile char *)p = 0;
	ktrace__filter_own_mm(t0, ktrace__monotonic_ns());
	return p == MAP_FAILED ? NULL : p;
}

KT_NOINSTR void ktrace__unmap_own(void *p, size_t bytes)
{
	int64_t t0 = ktrace__monotonic_ns();

	munmap(p, bytes);
	ktrace__filter_own_mm(t0, ktrace__monotonic_ns());
}

KT_NOINSTR int64_t ktrace__filter_own_until(int64_t t)
{
	int64_t until = 0;

	for (int r = 0; r < 2; r++) {
		uint32_t n = kt_load(&own_n[r], relaxed);

		for (uint32_t i = 0; i < NOWN && i < n; i++) {
			int64_t a = kt_load(&own_t[r][i][0], relaxed);
			int64_t b = kt_load(&own_t[r][i][1], relaxed);

			if (b >= a && b - a <= OWN_MAX_NS && t >= a - OWN_SLACK_NS &&
			    t <= b + OWN_SLACK_NS && b + OWN_CAP_NS > until)
				until = b + OWN_CAP_NS;
		}
	}
	return until;
}

/*
 * A call of function id on thread slot from tick b to tick e (complete), or
 * an entry still open from b while its thread recorded until e.  It is long
 * when it lasted max_ticks or more, not counting the time its thread was
 * preempted (the scheduling records of sched.c, where the kernel gives
 * them): a short function that the scheduler happened to interrupt stays
 * eligible, while one that blocked or ran long does not.  Without
 * scheduling records (KTRACE_SCHED=off, refused, or a record missing) the
 * whole duration counts.  Only a function with no very long call yet asks.
 */
static KT_NOINSTR void observe(uint32_t id, uint32_t slot, uint64_t b, uint64_t e, int complete)
{
	struct fobs *o = &F.obs[id];
	uint64_t ticks = e > b ? e - b : 0;

	if (ticks >= F.max_ticks) {
		/* Time in requests nested in the call is the requests' (kept
		 * whole when slow), not the function's: the loop that serves
		 * requests is as short as its own work.  A call older than the
		 * thread's request log is not judged. */
		void *hs = ktrace__thread_hold(slot);
		uint32_t sh = ktrace__g.tsc_shift;
		if (hs) {
			int64_t rq = ktrace__hold_request_ticks(hs, b << sh, e << sh);
			if (rq < 0)
				return;
			rq >>= sh;
			ticks = ticks > (uint64_t)rq ? ticks - (uint64_t)rq : 0;
		}
	}
	if (complete)
		o->calls++;
	if (ticks >= F.max_ticks && o->blocked_long == 0) {
		uint32_t sh = ktrace__g.tsc_shift;
		int32_t tid = ktrace__thread_tid(slot);
		uint32_t np = 0;
		int64_t blk = 0;
		int64_t pre = tid ? ktrace__sched_preempted_ns(tid,
		                                             ktrace__counter_to_mono_ns(b << sh),
		                                             ktrace__counter_to_mono_ns(e << sh), &np,
		                                             &blk)
		                  : -1;

		/* It waited, at least KTRACE_FILTER_MAX_US: long for a reason of
		 * its own (a wait for ktrace's hold of the mapping lock counts as
		 * preempted: own_t).  Less is not trusted: the switch records are
		 * mapped onto the counter through the anchors, so a block just
		 * after a short call can overlap its end by a few us. */
		if (pre >= 0 && blk >= (int64_t)ktrace__cfg.filter_max_us * 1000)
			o->blocked_long++;
		if (pre > 0) {
			pre += (int64_t)np * PREEMPT_SLACK_NS;
			uint64_t pt = (uint64_t)((long double)pre * ktrace__tsc_hz() / 1e9L) >> sh;
			ticks = ticks > pt ? ticks - pt : 0;
		}
	}
	if (ticks > o->max_ticks)
		o->max_ticks = ticks;
	if (ticks >= F.max_ticks)
		o->long_calls++;
	if (ticks >= F.max_ticks * VERY_LONG)
		o->very_long++;
}

/* One function event of thread slot at tick. */
static KT_NOINSTR void on_event(uint32_t slot, uint32_t ev, uint64_t tick)
{
	struct tstk *s = stk_of(slot);
	uint32_t id = (ev & ~KTRACE_EV_EXIT_FLAG) - KTRACE_EV_ENTER_BASE;

	F.obs[id].count++;
	if (s == NULL)
		return;
	s->last_tick = tick;
	if (!(ev & KTRACE_EV_EXIT_FLAG)) {
		if (s->depth == STK_DEPTH) {   /* keep the newest frames */
			memmove(s->id, s->id + 1, (STK_DEPTH - 1) * sizeof(s->id[0]));
			memmove(s->tick, s->tick + 1, (STK_DEPTH - 1) * sizeof(s->tick[0]));
			s->depth--;
		}
		s->id[s->depth] = (uint16_t)id;
		s->tick[s->depth++] = tick;
		return;
	}
	for (uint32_t d = s->depth; d-- > 0;)
		if (s->id[d] == id) {
			observe(id, s->slot, s->tick[d], tick, 1);
			s->depth = d;
			return;
		}
	/* entered before the sample: nothing to measure */
}

/* Entries still open: long if the thread kept recording that long after. */
static KT_NOINSTR void close_sample(void)
{
	for (uint32_t i = 0; i < F.nstk; i++)
		for (uint32_t d = 0; d < F.stk[i].depth; d++)
			if (F.stk[i].last_tick > F.stk[i].tick[d])
				observe(F.stk[i].id[d], F.stk[i].slot, F.stk[i].tick[d], F.stk[i].last_tick, 0);
	F.nstk = 0;
}

/* Walk one sampled block; returns the words walked. */
static KT_NOINSTR uint32_t walk(const uint32_t *w, uint32_t n);

/* Tests: walk nblocks blocks of one core's stream as a sample, with
 * KTRACE_FILTER_MAX_US as max_ticks; the longest call of compact id that
 * the sample measured, and its complete calls.  -1 if the filter cannot
 * be set up. */
KT_NOINSTR int ktrace__filter_sample_test(const uint32_t *words, uint32_t nblocks, uint32_t id,
                                          uint64_t max_ticks, uint64_t *longest, uint64_t *calls)
{
	if (!F.ready && setup() != 0)
		return -1;
	memset(&F.obs[id], 0, sizeof(F.obs[id]));
	F.max_ticks = max_ticks;
	F.nstk = 0;
	for (uint32_t b = 0; b < nblocks; b++)
		walk(words + (size_t)b * BW, BW);
	close_sample();
	*longest = F.obs[id].max_ticks;
	*calls = F.obs[id].calls;
	return 0;
}

static KT_NOINSTR uint32_t walk(const uint32_t *w, uint32_t n)
{
	uint32_t shift = ktrace__g.tsc_shift, slot = KTRACE_EXT_ARG(w[1]), i = 5;
	uint64_t tick = ((uint64_t)w[3] | (uint64_t)w[4] << 32) >> shift;
	uint32_t ts20 = (uint32_t)tick & KTRACE_TS_MASK;

	while (i < n) {
		uint32_t ev = KTRACE_REC_EV(w[i]), ts = KTRACE_REC_TS(w[i]);
		uint32_t d = (ts - ts20) & KTRACE_TS_MASK;

		if (ev == KTRACE_EV_PAD)
			break;
		tick = d < KTRACE_TS_HALF ? tick + d : tick - (KTRACE_TS_MASK + 1 - d);
		ts20 = ts;
		if (KTRACE_EV_IS_EXT(ev)) {
			uint32_t type;
			if (i + ev >= n)
				break;
			type = KTRACE_EXT_TYPE(w[i + 1]);
			if (type == KTRACE_EXT_THREAD) {
				slot = KTRACE_EXT_ARG(w[i + 1]);
				if (ev >= 2)
					on_segment(slot, w[i + 2]);
			}
			else if (type == KTRACE_EXT_TSC && ev >= 3) {
				tick = ((uint64_t)w[i + 2] | (uint64_t)w[i + 3] << 32) >> shift;
				ts20 = (uint32_t)tick & KTRACE_TS_MASK;
			} else if (type == KTRACE_EXT_HELD && ev >= 6) {
				/* A kept request's run: its thread, its own time
				 * chain (ktrace_format.h, "Held runs"). */
				slot = KTRACE_EXT_ARG(w[i + 1]);
				tick = ((uint64_t)w[i + 5] | (uint64_t)w[i + 6] << 32) >> shift;
				ts20 = (uint32_t)tick & KTRACE_TS_MASK;
			}
			i += 1 + ev;
			continue;
		}
		if (KTRACE_EV_IS_ENTER(ev) || KTRACE_EV_IS_EXIT(ev))
			on_event(slot, ev, tick);
		i++;
	}
	return i;
}

/*
 * Copy and walk core c's newest blocks up to state s, oldest first,
 * through ring.c's reader (ktrace__ring_read_block).  A
 * block reused meanwhile, or missing, cuts the sample: stacks restart.
 * Returns the words walked.
 */
static KT_NOINSTR uint64_t sample_core(uint32_t c, uint64_t s, uint32_t since)
{
	struct kt_core *k = &ktrace__g.cores[c];
	uint32_t pos = KT_STATE_POS(s), cur = (pos - 1) & ~(BW - 1), nb = SAMPLE_BLOCKS;
	uint64_t used = kt_load(&k->blocks_used, relaxed), words = 0;

	if (used == 0)
		return 0;
	/* everything written since the last decision, when it fits */
	if ((pos - since) / BW + 1 < nb)
		nb = (pos - since) / BW + 1;
	if (nb > ktrace__g.nblocks)
		nb = ktrace__g.nblocks;
	if (nb > used)
		nb = (uint32_t)used;
	for (uint32_t i = nb; i-- > 0;) {
		uint32_t S = cur - i * BW, n = S == cur ? pos - S : BW;

		if (!ktrace__ring_read_block(k, S, n, F.sample)) {
			close_sample();
			continue;
		}
		words += walk(F.sample, n);
	}
	close_sample();
	return words;
}

static KT_NOINSTR void history(struct cst *k, uint64_t now, uint64_t hz)
{
	uint32_t rw = ktrace__g.ring_words, back;
	uint64_t target, t_old = 0, p_old = 0, horizon;

	k->htsc[k->hhead] = now;
	k->hpos[k->hhead] = k->pos64;
	k->hhead = (k->hhead + 1) % HIST;
	if (k->hn < HIST)
		k->hn++;
	/* The rate: over the last second, or, when a mute was adopted at
	 * least RATE_MIN_NS ago and less than a second ago, since then, so
	 * that the projection reflects what the filter does now. */
	horizon = (uint64_t)((double)RATE_NS * (double)hz / 1e9);
	if (F.mute_tsc) {
		uint64_t adopted = F.mute_tsc + (uint64_t)((double)ADOPT_NS * (double)hz / 1e9);
		uint64_t min = (uint64_t)((double)RATE_MIN_NS * (double)hz / 1e9);
		if (now > adopted && now - adopted >= min && now - adopted < horizon)
			horizon = now - adopted;
	}
	for (back = 1; back + 1 < k->hn; back++)
		if (now - k->htsc[(k->hhead + HIST - 1 - back) % HIST] >= horizon)
			break;
	if (back < k->hn) {
		uint32_t j = (k->hhead + HIST - 1 - back) % HIST;
		double dt = (double)(now - k->htsc[j]) / (double)hz;
		k->rate_wps = dt > 0 ? (uint64_t)((double)(k->pos64 - k->hpos[j]) / dt) : 0;
	}
	/* window held: when the ring's oldest word (pos64 - rw) was written */
	k->projected = 1;
	if (k->pos64 >= rw) {
		target = k->pos64 - rw;
		for (uint32_t m = 1; m < k->hn; m++) {
			uint32_t j = (k->hhead + HIST - 1 - m) % HIST;
			if (k->hpos[j] <= target) {
				t_old = k->htsc[j];
				p_old = k->hpos[j];
				k->projected = 0;
				break;
			}
		}
	}
	if (!k->projected) {
		(void)p_old;   /* the span from that decision on: a lower bound */
		k->window_ms = (now - t_old) * 1000 / hz;
	} else if (k->rate_wps > 0) {
		k->window_ms = (uint64_t)rw * 1000 / k->rate_wps;
	} else {
		k->window_ms = UINT64_MAX / 2;
	}
}

/* ---- writer thread: decide --------------------------------------------------- */

/* ids[] by calls, most first, then by id (what a stable sort of the
 * ascending ids gives): ktrace__sort, since qsort() would malloc a buffer
 * for 2016 ids, and the writer thread never mallocs (snapfile.c). */
static KT_NOINSTR int by_count(const void *pa, const void *pb)
{
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	uint32_t x = F.obs[a].count, y = F.obs[b].count;

	return x != y ? (x > y ? -1 : 1) : (a > b) - (a < b);
}

static KT_NOINSTR void sort_by_count(uint32_t *ids, uint32_t n)
{
	ktrace__sort(ids, n, sizeof(ids[0]), by_count);
}

static KT_NOINSTR int candidate(uint32_t id)
{
	struct fobs *o = &F.obs[id];

	/* Long calls (observe() says what counts as long; preempted time is
	 * not counted) keep a function from being muted:
	 *   - for good, a long call in which its thread blocked for
	 *     KTRACE_FILTER_MAX_US or more (a sleep, a lock, I/O): the
	 *     machine's noise never blocks a thread;
	 *   - while they are at least 1 in LONG_RATIO of its observed calls,
	 *     or calls of VERY_LONG x KTRACE_FILTER_MAX_US or more are at
	 *     least 1 in VERY_RATIO: a function with a long call is never a
	 *     candidate before it has been seen short LONG_RATIO times as
	 *     often (VERY_RATIO for a very long one).
	 * A single long call without blocking cannot be told from the machine
	 * interrupting a short one: an interrupt or the hypervisor taking the
	 * cpu leaves no switch record, and the chance grows with the call's
	 * length.  On this VM that stretched a 10 ns function past 5 us once
	 * in 13,000-38,000 calls (20-100 us each, ~2,000 times a second at
	 * load 1.5), Lua's ~1 us functions once in 300-1,000 calls (load 5),
	 * and calls past 500 us about once a second (1.25 ms, 7 us of it
	 * preempted, in Lua's allocator).
	 * A muted function's longest observed call is in the BUDGET section,
	 * so the summary shows what such a stretch was. */
	return o->count > 0 && o->why == 0 && !o->blocked_long && o->calls >= MIN_CALLS &&
	       o->long_calls * LONG_RATIO < o->calls && o->very_long * VERY_RATIO < o->calls &&
	       kt_load(&fmute[id], relaxed) == 0 && kt_load(&fstatic[id], relaxed) == 0;
}

/* Under CPU pressure only: a function that is not a candidate because of
 * its long calls (but never blocked) may still be muted, hottest first
 * (KTRACE_MUTE_HOT_CPU): the CPU share is the budget the user set, and the
 * calls inside it stay recorded (a GC step inside Lua's
 * lua_pushlstring, which made it long 1 time in 50, is still there). */
static KT_NOINSTR int candidate_cpu(uint32_t id)
{
	struct fobs *o = &F.obs[id];

	return o->count > 0 && o->why == 0 && !o->blocked_long && o->calls >= MIN_CALLS &&
	       kt_load(&fmute[id], relaxed) == 0 && kt_load(&fstatic[id], relaxed) == 0 &&
	       ktrace__lean_fn(id);
}

/* Mute o's function (id) in epoch, for why. */
static KT_NOINSTR void mute_one(uint32_t id, uint32_t why, uint32_t epoch, uint64_t now,
                                uint64_t sample_words)
{
	struct fobs *o = &F.obs[id];

	o->why = why;
	o->since_tsc = now;
	o->events_before = (uint64_t)o->est_events;
	o->sampled_before = o->sampled;
	o->share_ppm = (uint32_t)((uint64_t)o->count * 1000000 / sample_words);
	/* relaxed: published by the release store of the epoch. */
	kt_store(&fmute[id], epoch, relaxed);
	ktrace__lean_muting(id);   /* before the epoch: its learning's deadline */
}

/* Mute the hottest candidates of this sample until the rate fits R (the
 * window's rate, or the CPU's cw when only that one is exceeded: window
 * 0); then, while the core is still over the CPU's rate cw, the hottest
 * of the functions kept only by long calls (candidate_cpu). */
static KT_NOINSTR void decide(struct cst *k, uint64_t sample_words, uint64_t now, double R,
                              int window, double cw)
{
	double need = 1.0 - 0.7 * R / k->int_wps, removed = 0, all = 0;
	uint32_t *ids = F.ids, n = 0, epoch, muted = 0, nids;
	uint64_t floor = 0;

	if (sample_words == 0)
		return;
	nids = F.nids;
	/* Under CPU pressure alone, only lean functions: a muted
	 * -finstrument-functions call still costs both hooks, so muting one
	 * buys little CPU and loses its calls (a program may mix the modes). */
	for (uint32_t id = 0; id < nids; id++)
		if (candidate(id) && (window || ktrace__lean_fn(id))) {
			ids[n++] = id;
			all += F.obs[id].count;
		} else if (F.obs[id].count && kt_load(&fmute[id], relaxed) != 0) {
			/* muted already, not adopted everywhere yet: leaving */
			removed += F.obs[id].count;
		}
	sort_by_count(ids, n);
	/* When even every candidate cannot make the rate fit, mute only those
	 * that matter, writing at least MIN_SHARE of the budget R: a function
	 * called a few hundred times a second would lose its rare long call
	 * to the filter (it is not observed once muted) and save nothing that
	 * counts. */
	if (removed + all < need * (double)sample_words)
		floor = (uint64_t)(R / MIN_SHARE * (double)sample_words / k->int_wps);
	epoch = kt_load(&ktrace__mute_epoch, relaxed) + 1;
	for (uint32_t i = 0; i < n && removed < need * (double)sample_words; i++) {
		struct fobs *o = &F.obs[ids[i]];
		if (o->count < floor)
			break;
		removed += o->count;
		mute_one(ids[i], KTRACE_MUTE_HOT_SHORT, epoch, now, sample_words);
		ids[muted++] = ids[i];
	}
	if (cw > 0 && k->int_wps > cw) {
		double need_cpu = 1.0 - 0.7 * cw / k->int_wps;
		uint64_t cfloor = (uint64_t)(cw / MIN_SHARE * (double)sample_words / k->int_wps);
		uint32_t m = muted;

		for (uint32_t id = 0; id < nids && removed < need_cpu * (double)sample_words; id++)
			if (candidate_cpu(id) && !candidate(id))
				ids[m++] = id;
		sort_by_count(ids + muted, m - muted);
		for (uint32_t i = muted; i < m && removed < need_cpu * (double)sample_words; i++) {
			if (F.obs[ids[i]].count < cfloor)
				break;
			removed += F.obs[ids[i]].count;
			mute_one(ids[i], KTRACE_MUTE_HOT_CPU, epoch, now, sample_words);
			ids[muted++] = ids[i];
		}
	}
	/* Nothing left: nothing muted and the rate does not fit.  A decision
	 * that finds the rate fitting once the mutes not yet adopted are
	 * gone (a hint or a jump just after a mute) has not run out. */
	F.none_left = muted == 0 && removed < need * (double)sample_words;
	if (window)
		F.short_window = 0;
	if (window && removed < need * (double)sample_words) {
		/* Every candidate is muted and the rate still does not fit. */
		double left = k->int_wps * (1.0 - removed / (double)sample_words);
		uint64_t bytes = (uint64_t)(left * ktrace__cfg.window_s * 4), mb = 1;
		while ((mb << 20) < bytes)
			mb <<= 1;
		F.short_window = 1;
		F.ring_needed = mb << 20;
	}
	if (muted) {
		/* release: the fmute[] stores above happen before any thread
		 * that adopts this epoch (acquire in ktrace__filter_adopt). */
		kt_store(&ktrace__mute_epoch, epoch, release);
		for (uint32_t i = 0; i < muted; i++) {
			uint32_t more[2] = {epoch, F.obs[ids[i]].why};
			ktrace__emit_ext(KTRACE_EXT_MUTE, ids[i], more, 2);
		}
		/* The lean mode needs no pause: a decision counts what is
		 * muted but not yet adopted as gone (above), and a hot phase
		 * costs ~20 ns a call until it is muted. */
		F.cooldown = ktrace__lean_active() ? 0 : COOLDOWN;
		/* Decide at EARLY_NS for a while: a program whose hot set
		 * changes (a new phase) is caught up within tens of ms. */
		F.fast_until = F.decisions + FAST_AFTER_MUTE * (EARLY_NS / early_ns());
		F.mute_tsc = now;
	}
}

/* Between decisions: is a core under pressure at a rate well above the
 * one its last decision saw?  Positions only, no sample. */
static KT_NOINSTR int rate_jump(uint64_t hz)
{
	const struct kt_globals *g = &ktrace__g;
	double R = (double)g->ring_words / ktrace__cfg.window_s, cw = cpu_wps();
	uint64_t now = ktrace__now();

	if (!F.ready || !ktrace__cfg.filter)
		return 0;
	for (uint32_t c = 0; c < g->ncpus; c++) {
		const struct cst *k = &F.cs[c];
		/* relaxed: an estimate; the decision reads it again (acquire). */
		uint32_t d = KT_STATE_POS(kt_load(&g->cores[c].state, relaxed)) - k->last_pos;
		double dt = (double)(now - k->last_tsc) / (double)hz, wps;

		if (!k->have || d > 0x80000000u || dt <= 0)
			continue;
		wps = d / dt;
		if (((k->tokens + R * dt - d < 0 && wps > R) || (cw > 0 && wps > cw)) &&
		    wps > JUMP * k->int_wps)
			return 1;
	}
	return 0;
}

KT_NOINSTR void ktrace__filter_tick(int64_t *wait_ns)
{
	const struct kt_globals *g = &ktrace__g;
	int64_t now_ns = ktrace__monotonic_ns();
	uint64_t now, hz = ktrace__tsc_hz();
	double R, cap = g->ring_words / 4.0;
	int decided = 0, pressure = 0, any_pressure = 0;
	uint32_t nids;

	int64_t en = early_ns();
	uint64_t et = en == EARLY_NS ? EARLY_TICKS : LEAN_EARLY_TICKS;
	/* Early, decide often, unless the last decision found nothing left
	 * to mute (a hint or a jump still decides sooner). */
	int64_t every = !F.none_left && (F.decisions < et || F.decisions < F.fast_until) ? en
	                                                                              : INTERVAL_NS;
	double cw;

	/* Look every EARLY_NS (a few loads; the lean mode's 2 ms only while
	 * it decides that often: a hint wakes the writer anyway); decide
	 * every 'every', or at once when a core's rate jumps into pressure (a
	 * new hot phase would otherwise overwrite the ring before the next
	 * decision). */
	int64_t look = every < EARLY_NS ? every : EARLY_NS;

	if (wait_ns && look < *wait_ns)
		*wait_ns = look;
	/* A hint (a block filled over the CPU budget) decides at once, at
	 * most every HINT_MIN_NS; after the early decisions, once one found
	 * nothing to mute (a core kept over the budget by what may not be
	 * muted), at most every EARLY_NS: a new hot phase is still caught
	 * within ~10 ms, without a decision every millisecond for nothing. */
	int64_t hint_gap = F.none_left && F.decisions >= et ? EARLY_NS
	                   : ktrace__lean_active()           ? LEAN_HINT_MIN_NS
	                                                     : HINT_MIN_NS;
	int hint_set = kt_load(&hint, relaxed) != 0;
	/* The gap bounds the writer's time in decisions; one that found less
	 * than a block to sample cost next to nothing (the writer's first,
	 * while the program is still in its first calls), and a hint after
	 * it decides at once. */
	int hinted = hint_set && (F.light || now_ns - F.last_ns >= hint_gap);

	/* A hint too soon stays set (and wakes no one again): come back for
	 * it when it may decide, not at the next look. */
	if (hint_set && !hinted && wait_ns && F.last_ns + hint_gap - now_ns < *wait_ns)
		*wait_ns = F.last_ns + hint_gap - now_ns;

	if (hz == 0 || (now_ns - F.last_ns < every && !hinted && !rate_jump(hz)))
		return;
	kt_store(&hint, 0, relaxed);
	F.last_ns = now_ns;
	if (!F.ready && setup() != 0)
		return;
	F.decisions++;
	F.max_ticks = ((uint64_t)ktrace__cfg.filter_max_us * hz / 1000000) >> g->tsc_shift;
	R = (double)g->ring_words / ktrace__cfg.window_s;
	cw = cpu_wps();
	now = ktrace__now();
	{   /* relaxed: a threshold for claim_block (ring.c); stored only when
	     * it changes (the line is read by every block claim) */
		uint64_t ht = ktrace__cfg.filter && cw > 0 ? (uint64_t)((double)BW / cw * (double)hz) : 0;

		if (kt_load(&ktrace__g.hint_ticks, relaxed) != ht)
			kt_store(&ktrace__g.hint_ticks, ht, relaxed);
	}
	uint64_t walked = 0;

	for (uint32_t c = 0; c < g->ncpus; c++) {
		struct cst *k = &F.cs[c];
		/* acquire: as ktrace__ring_mark (every word below pos is visible). */
		uint64_t s = kt_load(&g->cores[c].state, acquire), words;
		uint32_t pos = KT_STATE_POS(s), d = pos - k->last_pos;
		double dt;

		if (!k->have || d > 0x80000000u) {   /* first look, or a fork child's reset */
			int first = !k->have;

			memset(k, 0, offsetof(struct cst, htsc));
			k->have = 1;
			k->tokens = cap;
			/* In the lean mode the first look measures from the end
			 * of start-up (the rings are at 0 then; relaxed: a time),
			 * so that the writer's first pass can decide: taking the
			 * look as a base instead left the program recording
			 * every call until the next decision, 0.3-0.5 ms later.
			 * Not in the default mode, whose decisions come 10 ms
			 * apart and need no such start: its first sample stays
			 * clear of the start-up's calls, as before. */
			uint64_t t0 = kt_load(&g->ready_tsc, relaxed);

			if (!first || t0 == 0 || t0 >= now || !ktrace__lean_active()) {
				k->last_pos = pos;
				k->pos64 = pos;
				k->last_tsc = now;
				continue;
			}
			k->last_tsc = t0;
			d = pos;
		}
		dt = (double)(now - k->last_tsc) / (double)hz;
		k->pos64 += d;
		k->last_pos = pos;
		k->last_tsc = now;
		k->int_wps = dt > 0 ? d / dt : 0;
		k->tokens += R * dt - d;
		if (k->tokens > cap)
			k->tokens = cap;
		history(k, now, hz);
		/* KTRACE_FILTER=off: nothing to decide, so nothing to sample
		 * (the copy would compete with the program for the caches). */
		if (d == 0 || !ktrace__cfg.filter)
			continue;
		/* the ids handed out before the sample; one handed out during it
		 * may get a count from it, which no one reads before the next
		 * sample zeroes it */
		nids = F.nids = ktrace__funcs_ids();
		for (uint32_t id = 0; id < nids; id++)
			F.obs[id].count = 0;
		words = sample_core(c, s, pos - d);
		walked += words;
		for (uint32_t id = 0; id < nids && words; id++)
			if (F.obs[id].count) {
				F.obs[id].sampled += F.obs[id].count;
				F.obs[id].est_events += (double)F.obs[id].count * d / (double)words;
			}
		/* Pressure: the bucket is dry and the core still writes
		 * faster than the budget (the first such core decides). */
		int wp = k->tokens < 0 && k->int_wps > R, cp = cw > 0 && k->int_wps > cw;

		pressure |= wp;
		any_pressure |= wp || cp;
		if (ktrace__cfg.filter && !decided && F.cooldown == 0 && (wp || cp)) {
			decide(k, words, now, wp ? R : cw, wp, cw);
			decided = 1;
		}
	}
	/* less than a block walked over all cores, and nothing decided: a
	 * light decision, which does not start the hint gap.  (It still
	 * counts towards the cooldown, which counts looks: a slow program's
	 * looks are all light, and one that did not count them was never
	 * muted again after its first mute, under TSan.) */
	F.light = !decided && walked < BW;
	if (F.cooldown > 0 && !decided)
		F.cooldown--;
	if (!pressure)
		F.short_window = 0;   /* the window holds again */
	if (!any_pressure)
		F.none_left = 0;      /* the next pressure decides at the early pace again */
}

/* ---- snapshot --------------------------------------------------------------- */

KT_NOINSTR void *ktrace__budget_serialize(size_t *len, uint32_t *count)
{
	const struct kt_globals *g = &ktrace__g;
	uint32_t n = 0, nc = g->ncpus;
	size_t cap = sizeof(struct ktrace_budget_rec) + nc * sizeof(struct ktrace_budget_core_rec) +
	             NF * sizeof(struct ktrace_muted_rec);
	unsigned char *buf = ktrace__walloc(cap);
	struct ktrace_budget_rec *b = (void *)buf;
	struct ktrace_budget_core_rec *cr = (void *)(b + 1);
	struct ktrace_muted_rec *m = (void *)(cr + nc);
	uint64_t hz = ktrace__tsc_hz(), maxrate = 0;
	double tick_ns = hz ? (double)(1ull << g->tsc_shift) * 1e9 / (double)hz : 0;

	if (buf == NULL)
		return NULL;
	b->window_s = ktrace__cfg.window_s;
	b->flags = ktrace__cfg.filter ? KTRACE_BUDGET_FILTER_ON : 0;
	b->ring_bytes_per_core = (uint64_t)g->ring_words * 4;
	b->sustainable_wps = g->ring_words / ktrace__cfg.window_s;
	b->max_us = ktrace__cfg.filter_max_us;
	b->ncores = nc;
	b->muted_calls = kt_load(&muted_calls, relaxed);
	b->decisions = F.decisions;
	b->epoch = kt_load(&ktrace__mute_epoch, relaxed);
	b->cpu_wps = F.ready ? (uint64_t)cpu_wps() : 0;
	b->cpu_pct = b->cpu_wps ? (uint32_t)cpu_pct() : 0;
	for (uint32_t c = 0; c < nc; c++) {
		cr[c].cpu = c;
		if (!F.ready || !F.cs[c].have || F.cs[c].hn == 0) {
			cr[c].flags = KTRACE_BUDGET_CORE_PROJECTED;
			continue;
		}
		cr[c].flags = F.cs[c].projected ? KTRACE_BUDGET_CORE_PROJECTED : 0;
		cr[c].rate_wps = F.cs[c].rate_wps;
		cr[c].window_ms = F.cs[c].window_ms;
		cr[c].tokens = (int64_t)F.cs[c].tokens;
		if (cr[c].rate_wps > maxrate)
			maxrate = cr[c].rate_wps;
	}
	if (F.short_window) {
		b->flags |= KTRACE_BUDGET_SHORT;
		b->ring_needed_bytes = F.ring_needed;
	} else if (!ktrace__cfg.filter && maxrate > b->sustainable_wps) {
		uint64_t bytes = maxrate * ktrace__cfg.window_s * 4, mb = 1;
		while ((mb << 20) < bytes)
			mb <<= 1;
		b->flags |= KTRACE_BUDGET_SHORT;
		b->ring_needed_bytes = mb << 20;
	}
	for (uint32_t id = 0; id < NF; id++) {
		uint8_t st = kt_load(&fstatic[id], relaxed);
		const struct fobs *o = F.ready ? &F.obs[id] : NULL;

		if (st != ST_EXCLUDE && (o == NULL || o->why == 0))
			continue;
		m[n].addr = kt_load(&faddr[id], relaxed);
		m[n].id = id;
		if (st == ST_EXCLUDE) {
			m[n].why = KTRACE_MUTE_EXCLUDE;
			m[n].since_tsc = kt_load(&fexcl_tsc[id], relaxed);
		} else {
			m[n].why = o->why;
			m[n].since_tsc = o->since_tsc;
			m[n].events_before = o->events_before;
			m[n].sampled_events = o->sampled_before;
			m[n].share_ppm = o->share_ppm;
		}
		if (o) {
			double ns = (double)o->max_ticks * tick_ns;
			m[n].max_ns = ns > 4e9 ? 4000000000u : (uint32_t)ns;
			m[n].calls_observed = o->calls;
		}
		n++;
	}
	*count = n;
	*len = (size_t)((unsigned char *)(m + n) - buf);
	return buf;
}
