/*
 * ring.c - per-core rings: the slow path that writes under the core lock,
 * block switches, and the snapshot reader.
 *
 * Algorithm.  Each core has a ring of ring_words 32-bit words, split into
 * blocks of KTRACE_BLOCK_WORDS (1024) words.  The core's state word packs
 * pos (a 32-bit counter of words ever written; ring index = pos & mask)
 * with owner (the thread slot whose records follow, plus a LOCK bit).
 *
 * Invariants.
 *  I1. Every block starts with a BLOCK_START record carrying its start
 *      counter S, the owner slot and the full TSC; a block never holds a
 *      record that straddles its end (the tail is PAD words instead).
 *  I2. Words below pos are complete records.  A record becomes visible to
 *      readers only through the store of state that moves pos past it.
 *  I3. Within a block, no record is more than KTRACE_TS_FORWARD_MAX ticks
 *      after the previous one: 'deadline' is at most that far past the
 *      last full timestamp (BLOCK_START or TSC) in the stream, and a record
 *      at or after it goes through the slow path, which writes a TSC record
 *      first.  A stale (too early) deadline only causes an extra TSC record.
 *  I4. The owner in state is the slot named by the last BLOCK_START or
 *      THREAD record below pos.
 *  I5. gen[b] is S|1 while block b holds the incarnation that starts at S,
 *      and 0 while a slow path is turning it into a new one.
 *  I6. A thread's records form segments, one per stretch on one core; each
 *      segment, and each block, starts with a THREAD record carrying the
 *      thread's segment number.  The hot path appends only while the core's
 *      owner is the thread and the cpu is the one its segment is on, so a
 *      reader can order one thread's records across cores by segment.
 *
 * Writers.  The hot path (record.c) appends one word when owner == its
 * slot, inside an rseq critical section that commits with the state store.
 * Everything else takes the core lock: in rseq mode the LOCK bit is set by
 * a tiny rseq critical section on the core's own cpu, so it cannot
 * interleave with a hot-path append there (only one thread runs on a cpu at
 * a time, and a preempted critical section restarts); a hot path that then
 * sees LOCK fails its owner check and comes here to wait.  Without rseq,
 * every event takes the lock with a CAS.  The lock holder may migrate; it
 * releases with a store-release of the new state.
 *
 * Readers (snapshot).  Load state (acquire: pairs with the commit/unlock
 * store, so every word below pos is visible) and take the block holding
 * pos - 1 as current (cur); the ring then holds the incarnations cur,
 * cur - BW, ... back to the oldest.  Copy them oldest first: the writer
 * also reuses the oldest first, so a copier faster than it stays ahead and
 * loses nothing; several cores are copied in slices, the core whose writer
 * is closest to the next block first.  For each block: load gen (acquire)
 * and expect exactly S|1, copy its words (up to pos for the current block,
 * all of it for older ones), then an acquire fence and gen again: a change
 * means a writer reused the block while we copied.  A block reused before
 * or during its copy is a hole; the blocks copied before it are dropped as
 * well, so the copy is the newest unbroken run, and every dropped block is
 * counted (KTRACE_LOSS_NOT_COPIED_OVERWRITTEN in that file).  Tracing never
 * waits for a reader.
 */
#include "internal.h"
#include "rseq.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BW KTRACE_BLOCK_WORDS

struct kt_globals ktrace__g;

static KT_NOINSTR int mmap_zero(void **p, size_t bytes)
{
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	*p = m;
	return 0;
}

KT_NOINSTR int ktrace__ring_init(void)
{
	struct kt_globals *g = &ktrace__g;
	long n = sysconf(_SC_NPROCESSORS_CONF);
	uint64_t words = (uint64_t)ktrace__cfg.buffer_mb << 18; /* MiB -> words */
	void *p;

	if (n < 1)
		n = 1;
	if (n > 4096)
		n = 4096;
	g->ncpus = (uint32_t)n;
	g->ring_words = (uint32_t)words;   /* config keeps it a power of two */
	g->ring_mask = g->ring_words - 1;
	g->nblocks = g->ring_words / BW;
	if (mmap_zero(&p, sizeof(struct kt_core) * g->ncpus))
		return KTRACE_ENOMEM;
	g->cores = p;
	for (uint32_t c = 0; c < g->ncpus; c++) {
		struct kt_core *k = &g->cores[c];
		/* Rings and gens are reserved, not touched: an idle core's
		 * ring never costs resident memory. */
		if (mmap_zero(&p, (size_t)g->ring_words * 4))
			return KTRACE_ENOMEM;
		k->ring = p;
		if (mmap_zero(&p, (size_t)g->nblocks * 4))
			return KTRACE_ENOMEM;
		k->gen = p;
		kt_store(&k->state, KT_STATE(0, KT_OWNER_NONE), relaxed);
	}
	return 0;
}

/* Start-up failed after the rings were made: give them back (no thread
 * appends before the library is READY). */
KT_NOINSTR void ktrace__ring_free(void)
{
	struct kt_globals *g = &ktrace__g;

	if (g->cores == NULL)
		return;
	for (uint32_t c = 0; c < g->ncpus; c++) {
		if (g->cores[c].ring)
			munmap(g->cores[c].ring, (size_t)g->ring_words * 4);
		if (g->cores[c].gen)
			munmap((void *)g->cores[c].gen, (size_t)g->nblocks * 4);
	}
	munmap(g->cores, sizeof(struct kt_core) * g->ncpus);
	g->cores = NULL;
}

/* Fork child: the child starts with empty rings; locks held by parent
 * threads that do not exist here are dropped. */
KT_NOINSTR void ktrace__ring_reset(void)
{
	struct kt_globals *g = &ktrace__g;

	for (uint32_t c = 0; c < g->ncpus; c++) {
		struct kt_core *k = &g->cores[c];
		memset((void *)k->gen, 0, (size_t)g->nblocks * 4);
		kt_store(&k->deadline, 0, relaxed);
		kt_store(&k->blocks_used, 0, relaxed);
		kt_store(&k->words_written, 0, relaxed);
		kt_store(&k->state, KT_STATE(0, KT_OWNER_NONE), relaxed);
		k->prefault_bytes = 0;
		k->prefault_used = 0;
		k->prefault_ns = 0;
		k->touch_bytes = 0;
	}
	for (int i = 0; i < KTRACE_LOSS_COUNT; i++)
		kt_store(&g->loss[i], 0, relaxed);
}

#define PREFAULT_AHEAD (512u << 10) /* bytes, at least */
#define PREFAULT_AHEAD_MAX (2u << 20)
#define PREFAULT_LEAD_NS 12000000LL /* ... or this long at the core's rate */
#define PREFAULT_STEP (256u << 10)  /* bytes per core per writer pass */
#define PREFAULT_PASS (1u << 20)    /* bytes per writer pass, all cores */
#define TOUCH_AHEAD (64u << 10)     /* bytes touched ahead, at least (or the lead) */

/*
 * Writer thread: fault in the ring pages just ahead of each core's
 * writers, so a thread that claims a new block does not take the page
 * fault itself.  Until a ring has been round once, every block claim
 * touched a new page: ~1.3 us of the recording thread's time each on
 * the VM, a few % of a short call-heavy run (peerbench's Lua and SQLite:
 * ~800 faults in 90 ms).  Only cores in use, PREFAULT_AHEAD ahead of the
 * blocks claimed: an idle core's ring stays untouched.  Pages a writer
 * reaches first it faults itself, as before; a kernel without
 * MADV_POPULATE_WRITE (before 5.14) or that refuses it turns this off.
 * At most PREFAULT_STEP per core and PREFAULT_PASS in all per pass (~0.1
 * and ~0.4 ms here), and the writer comes back 0.1 ms later while behind
 * (*wait_ns): the first 2 MiB in
 * one call took the writer 0.8 ms at a program's start, while the budget's
 * first decision waited and every call was recorded (SQLite's 0.09 s
 * run: its first mute came 1 ms after the first call).  The lead is
 * 12 ms at the core's rate since the writer's last look, between 512 KiB
 * and 2 MiB: a fixed 2 MiB was 3 MiB more memory for a short lean run to
 * fault in and free at its exit (Lua's RSS at exit 13.4 -> 10.4 MiB,
 * SQLite's 10.2 -> 7.6: 512 KiB is 60 ms at the lean mode's CPU budget),
 * and a fixed 512 KiB let KTRACE_FILTER=off runs (160 KiB/ms) outrun it
 * between the writer's looks (900 more faults in Lua's short run).
 *
 * The populated pages up to the same lead (at least TOUCH_AHEAD, not
 * PREFAULT_AHEAD: a page touched and never used is the writer's time
 * wasted) are then touched by the writer too (ktrace__touch_pages):
 * on a VM whose host maps a guest page only when user space first
 * touches it (this one, and the CI's: the populate maps a page in
 * ~0.5 us, the first store to it from user space still costs ~5 us,
 * with no guest fault), the recording thread otherwise paid that, once
 * per page of the first lap: 2,048 pages of an 8 MiB ring, ~10 ms of a
 * KTRACE_FILTER=off run of SQLite's speedtest1 --size 8.  Elsewhere a
 * touch is a cache miss.  The touch is a locked or of zero: the claim
 * of the next block may write the page's first word meanwhile, and that
 * store is then either before or after it, never lost.  At most
 * PREFAULT_STEP a core and PREFAULT_PASS in all a pass, as the populate.
 */
KT_NOINSTR void ktrace__touch_pages(void *p, size_t len)
{
	uintptr_t a = ((uintptr_t)p + 3) & ~(uintptr_t)3, e = (uintptr_t)p + len;

	for (; a + 4 <= e; a = (a & ~(uintptr_t)4095) + 4096) {
#if defined(__x86_64__)
		__asm__ volatile("lock orl $0, (%0)" : : "r"(a) : "memory", "cc");
#elif defined(__aarch64__)
		uint32_t v, fail;

		__asm__ volatile("1: ldxr %w0, [%2]\n\t"
		                 "stxr %w1, %w0, [%2]\n\t"
		                 "cbnz %w1, 1b"
		                 : "=&r"(v), "=&r"(fail) : "r"(a) : "memory");
#endif
	}
}

/* Populate core k's ring from where it stopped (or where its writers
 * are) to ahead bytes past used, at most *left bytes (the pass's) and
 * PREFAULT_STEP; -1: the pass is out of bytes (k first next pass), -2:
 * the populate failed (no MADV_POPULATE_WRITE: the prefault goes off). */
static KT_NOINSTR int populate_ahead(struct kt_core *k, uint64_t used, uint64_t ahead,
                                     uint64_t *left, int64_t *wait_ns)
{
	uint64_t ring_bytes = (uint64_t)ktrace__g.ring_words * 4;
	uint64_t from = k->prefault_bytes, to = used + ahead, cap;

	if (from >= ring_bytes)
		return 0;
	if (from < used)
		from = used & ~(uint64_t)4095;   /* behind: the writers did it */
	if (to > ring_bytes)
		to = ring_bytes;
	if (to <= from || to - from < ahead / 4)
		return 0;   /* far enough ahead: no call */
	cap = *left < PREFAULT_STEP ? *left : PREFAULT_STEP;
	if (to - from > cap) {   /* behind: back soon (out of bytes: this core first) */
		if (wait_ns && *wait_ns > 100000)
			*wait_ns = 100000;
		if (cap == 0)
			return -1;
		to = from + cap;
	}
	*left -= to - from;
	if (ktrace__populate_write((char *)k->ring + from, (size_t)(to - from)) != 0)
		return -2;
	k->prefault_bytes = to;
	return 0;
}

/* Touch the populated pages of core k's ring up to lead bytes past used
 * (ktrace__touch_pages), at most *left bytes (the pass's) and PREFAULT_STEP. */
static KT_NOINSTR void touch_ahead(struct kt_core *k, uint64_t used, uint64_t lead,
                                   uint64_t *left, int64_t *wait_ns)
{
	uint64_t from = k->touch_bytes, to = used + lead;
	uint64_t cap = *left < PREFAULT_STEP ? *left : PREFAULT_STEP;

	if (from < used)
		from = used & ~(uint64_t)4095;
	if (to > k->prefault_bytes)
		to = k->prefault_bytes;
	if (to <= from)
		return;
	if (to - from > cap) {   /* behind: back soon */
		if (wait_ns && *wait_ns > 100000)
			*wait_ns = 100000;
		to = from + cap;
	}
	if (to <= from)
		return;
	*left -= to - from;
	ktrace__touch_pages((char *)k->ring + from, (size_t)(to - from));
	k->touch_bytes = to;
}

/* The lead, in whole pages, between min and PREFAULT_AHEAD_MAX. */
static KT_NOINSTR uint64_t lead_bytes(double lead, uint64_t min)
{
	return lead > PREFAULT_AHEAD_MAX ? PREFAULT_AHEAD_MAX
	       : lead > (double)min      ? (uint64_t)lead & ~(uint64_t)4095
	                                 : min;
}

KT_NOINSTR void ktrace__ring_prefault(int64_t *wait_ns)
{
	static int off;
	static uint32_t next;   /* the core to start at: a capped pass serves all in turn */
	struct kt_globals *g = &ktrace__g;
	uint64_t left = PREFAULT_PASS, tleft = PREFAULT_PASS;
	int64_t now = ktrace__monotonic_ns();

	for (uint32_t i = 0; i < g->ncpus && !off; i++) {
		uint32_t c = (next + i) % g->ncpus;
		struct kt_core *k = &g->cores[c];
		/* relaxed: a position to stay ahead of, nothing read through it */
		uint64_t used = kt_load(&k->blocks_used, relaxed) * BW * 4;
		uint64_t ahead = PREFAULT_AHEAD, tlead = TOUCH_AHEAD;
		int64_t dt = now - k->prefault_ns;
		int r;

		if (k->prefault_ns != 0 && dt > 0 && used > k->prefault_used) {
			double lead = (double)(used - k->prefault_used) * PREFAULT_LEAD_NS / (double)dt;

			ahead = lead_bytes(lead, PREFAULT_AHEAD);
			tlead = lead_bytes(lead, TOUCH_AHEAD);
		}
		k->prefault_used = used;
		k->prefault_ns = now;
		if (used == 0)
			continue;
		r = populate_ahead(k, used, ahead, &left, wait_ns);
		if (r == -2) {
			off = 1;
			break;
		}
		touch_ahead(k, used, tlead, &tleft, wait_ns);
		if (r == -1) {
			next = c;
			break;
		}
	}
}

/* ---- the core lock ------------------------------------------------------ */

#if defined(__x86_64__)
/*
 * Set LOCK in the state of the core this thread runs on, as an rseq
 * critical section (see the file comment).  1 = locked (*cpu_out set),
 * 0 = already locked by someone, -1 = no usable cpu id.
 */
static KT_NOINSTR int lock_rseq(void *rs, uint32_t *cpu_out)
{
again:
	asm goto(KT_RSEQ_TABLE
		 KT_RSEQ_ARM
		 "movl 4(%[rs]), %%r8d\n\t"
		 "cmpl %[ncpus], %%r8d\n\t"
		 "jae %l[nocpu]\n\t"
		 "movl %%r8d, (%[out])\n\t"
		 "shlq $7, %%r8\n\t"
		 "addq %[cores], %%r8\n\t"
		 "movq (%%r8), %%rcx\n\t"
		 "btl $31, %%ecx\n\t"
		 "jc %l[busy]\n\t"
		 "btsq $31, %%rcx\n\t"
		 "movq %%rcx, (%%r8)\n\t"        /* commit: LOCK set */
		 "2:\n\t"
		 KT_RSEQ_ABORT(abort)
		 :
		 : [rs] "r"(rs), [ncpus] "m"(ktrace__g.ncpus),
		   [cores] "m"(ktrace__g.cores), [out] "r"(cpu_out)
		 : "memory", "cc", "rax", "rcx", "r8"
		 : nocpu, busy, abort);
	/* acquire: the asm's plain load of state (an acquire on x86) saw the
	 * previous holder's release store; this fence says so to the compiler. */
	kt_fence(acquire);
	return 1;
abort:
	goto again;
busy:
	return 0;
nocpu:
	return -1;
}
#else
static KT_NOINSTR int lock_rseq(void *rs, uint32_t *cpu_out)
{
	(void)rs;
	(void)cpu_out;
	return -1;
}
#endif

static KT_NOINSTR int lock_cas(uint32_t *cpu_out)
{
	int cpu = sched_getcpu();
	struct kt_core *k;
	uint64_t s;

	if (cpu < 0 || (uint32_t)cpu >= ktrace__g.ncpus)
		cpu = 0;
	k = &ktrace__g.cores[cpu];
	s = kt_load(&k->state, relaxed);
	if (KT_STATE_OWNER(s) & KT_OWNER_LOCK)
		return 0;
	/* acquire on success: pairs with the release store in unlock(), so
	 * the previous holder's ring and deadline writes are visible. */
	if (!kt_cas(&k->state, &s, s | KT_OWNER_LOCK, acquire))
		return 0;
	*cpu_out = (uint32_t)cpu;
	return 1;
}

/* A spin-wait hint to the core (and to an SMT sibling). */
static inline KT_NOINSTR void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* Spin for the lock; NULL if this thread has no usable cpu. */
static KT_NOINSTR struct kt_core *lock_core(struct kt_thread *t)
{
	uint32_t cpu = 0;

	/* One mode per process (file comment): a thread without rseq in an
	 * rseq process must not take a core with a CAS. */
	if (ktrace__g.use_rseq && t->rseq == NULL)
		return NULL;
	for (unsigned spins = 0;; spins++) {
		int r = t->rseq ? lock_rseq(t->rseq, &cpu) : lock_cas(&cpu);
		if (r > 0)
			break;
		if (r < 0)
			return NULL;
		/* The holder may be preempted on this very cpu: let it run. */
		if (spins < 64)
			cpu_relax();
		else
			sched_yield();
	}
	t->locked_cpu = cpu;
	return &ktrace__g.cores[cpu];
}

/* ---- writing under the lock --------------------------------------------- */

static inline KT_NOINSTR void put(struct kt_core *k, uint32_t pos, uint32_t w)
{
	/* relaxed: published by the release store of state in ktrace__emit
	 * (I2), or, for a reused block, ordered after gen = 0 by the release
	 * fence in claim_block (I5). */
	__atomic_store_n(&k->ring[pos & ktrace__g.ring_mask], w, __ATOMIC_RELAXED);
}

static inline KT_NOINSTR uint32_t ts20(uint64_t now)
{
	return (uint32_t)(now >> ktrace__g.tsc_shift) & KTRACE_TS_MASK;
}

/* Pad the rest of the current block and start the next one at S; returns
 * the new pos (after the BLOCK_START record). */
static KT_NOINSTR uint32_t claim_block(struct kt_core *k, uint32_t pos, uint32_t slot,
                                       uint64_t now, int *hint)
{
	uint32_t S = (pos + BW - 1) & ~(BW - 1);
	uint32_t b = (S & ktrace__g.ring_mask) / BW;
	uint64_t used;

	for (uint32_t p = pos; p != S; p++)
		put(k, p, KTRACE_REC(0, KTRACE_EV_PAD));
	/* Step A: mark the block as being reused (I5). */
	kt_store(&k->gen[b], 0, relaxed);
	/* release fence: orders gen = 0 before every word of the new
	 * incarnation below; pairs with the reader's acquire fence after its
	 * copy, so a reader that copied any new word sees gen != its g1. */
	kt_fence(release);
	/* Step B: the new block's header (I1). */
	put(k, S, KTRACE_REC(ts20(now), 4));
	put(k, S + 1, KTRACE_EXT_WORD(KTRACE_EXT_BLOCK_START, slot));
	put(k, S + 2, S);
	put(k, S + 3, (uint32_t)now);
	put(k, S + 4, (uint32_t)(now >> 32));
	/* Step C: publish the incarnation.  release: a reader that loads S|1
	 * with acquire sees the header above.  A reader between A and C skips
	 * the block; one that read the old gen before A detects the change. */
	kt_store(&k->gen[b], S | 1u, release);
	used = kt_add(&k->blocks_used, 1, relaxed) + 1;
	if (used > ktrace__g.nblocks)
		ktrace__count_loss(KTRACE_LOSS_OVERWRITTEN_BLOCKS, 1);
	/* The block before this one filled faster than the CPU budget allows:
	 * *hint, for the caller to wake the writer once it has unlocked (a
	 * woken writer could otherwise wait here for the lock).  A held run
	 * written out (hint NULL) is not a rate: its records were made
	 * earlier.  relaxed: a threshold the writer sets; a late view only
	 * delays a hint by a block. */
	if (hint && now - kt_load(&k->claim_tsc, relaxed) < kt_load(&ktrace__g.hint_ticks, relaxed))
		*hint = 1;
	/* relaxed: under the core lock; atomic for the sanitizers, which do
	 * not see the rseq ownership of a core (as for the ring's words). */
	kt_store(&k->claim_tsc, now, relaxed);
	return S + 5;
}

/* THREAD record: t's slot and segment number (I6). */
static KT_NOINSTR uint32_t put_thread(struct kt_core *k, uint32_t pos, struct kt_thread *t,
                                      uint64_t now)
{
	put(k, pos, KTRACE_REC(ts20(now), 2));
	put(k, pos + 1, KTRACE_EXT_WORD(KTRACE_EXT_THREAD, t->slot));
	put(k, pos + 2, t->seg);
	return pos + 3;
}

/*
 * Write one record (header event ev, then npayload payload words) for
 * thread t on the core it runs on, under that core's lock.  The timestamp
 * is read after the lock is taken, so records are in time order within the
 * core's stream (no late stores, I3).
 */
KT_NOINSTR void ktrace__emit(struct kt_thread *t, uint32_t ev, const uint32_t *payload,
                             uint32_t npayload)
{
	struct kt_core *k;
	uint64_t s, now, deadline, step = ktrace__g.forward_max;
	uint32_t pos, owner, used, need;
	int new_seg, hint = 0;

	if (t->hold) {
		/* The thread runs a request: its records are held aside
		 * (request.c) until the request's end decides their fate. */
		ktrace__hold_emit(t, ev, payload, npayload);
		return;
	}
	k = lock_core(t);
	if (k == NULL) {
		ktrace__count_loss(KTRACE_LOSS_NO_CPU, 1);
		return;
	}
	/* relaxed: we hold the lock; only lock holders write state now. */
	s = kt_load(&k->state, relaxed);
	pos = KT_STATE_POS(s);
	owner = KT_STATE_OWNER(s) & ~KT_OWNER_LOCK;
	now = ktrace__now();
	deadline = kt_load(&k->deadline, relaxed);
	used = pos & (BW - 1);
	/* A new segment when another thread owned the stream or this thread
	 * last wrote on another core (I6). */
	new_seg = owner != t->slot || t->last_cpu != t->locked_cpu;
	if (new_seg) {
		t->seg++;
		t->last_cpu = t->locked_cpu;
	}
	need = 1 + npayload + (new_seg ? 3 : 0) + (now >= deadline ? 4 : 0);
	if (used == 0 || used + need > BW) {
		pos = claim_block(k, pos, t->slot, now, &hint);
		pos = put_thread(k, pos, t, now);
		deadline = now + step;
	} else {
		/* The TSC record first: every record after it, THREAD included,
		 * is then within reach of the reference (I3). */
		if (now >= deadline) {
			put(k, pos++, KTRACE_REC(ts20(now), 3));
			put(k, pos++, KTRACE_EXT_WORD(KTRACE_EXT_TSC, 0));
			put(k, pos++, (uint32_t)now);
			put(k, pos++, (uint32_t)(now >> 32));
			deadline = now + step;
		}
		if (new_seg)
			pos = put_thread(k, pos, t, now);
	}
	put(k, pos++, KTRACE_REC(ts20(now), ev));
	for (uint32_t i = 0; i < npayload; i++)
		put(k, pos++, payload[i]);
	/* relaxed: read by the hot path only after it saw owner == its slot,
	 * which it can only see after the release store below. */
	kt_store(&k->deadline, deadline, relaxed);
	kt_add(&k->words_written, 1 + npayload, relaxed);
	/* release: publishes the words above (I2) and unlocks; pairs with the
	 * snapshot's acquire load of state and the next holder's lock. */
	kt_store(&k->state, KT_STATE(pos, t->slot), release);
	if (hint)
		ktrace__filter_hint();
}

/* The word counter of core cpu's stream now: the position a record this
 * thread writes there from now on would get at least. */
KT_NOINSTR uint32_t ktrace__ring_pos(uint32_t cpu)
{
	if (cpu >= ktrace__g.ncpus)
		return 0;
	/* relaxed: the calling thread's own earlier records are below it by
	 * program order; other threads only move pos forward. */
	return KT_STATE_POS(kt_load(&ktrace__g.cores[cpu].state, relaxed));
}

/* Words of the record whose header is w[0] (1 for a plain event). */
static inline KT_NOINSTR uint32_t rec_words(uint32_t w)
{
	uint32_t ev = KTRACE_REC_EV(w);
	return KTRACE_EV_IS_EXT(ev) ? 1 + ev : 1;
}

/*
 * A held run (request.c) into the ring of the core t runs on: chunks of at
 * most one block's room, each under the lock and behind its own HELD
 * header (ktrace_format.h, "Held runs"), so the lock is held for at most a
 * block's worth of stores.  The words are whole records with their own
 * time chain from base_tsc; the chunk header of a continuation carries the
 * time the chain reached.  After each chunk the stream's owner is none and
 * its deadline 0: the next record on that core, whoever writes it, starts
 * with a TSC and a THREAD record (I3, I4), since the held words' times
 * and thread are not the stream's.
 */
KT_NOINSTR void ktrace__ring_write_held(struct kt_thread *t, const uint32_t *w, uint32_t n,
                                        uint64_t base_tsc, uint32_t seg, uint32_t P,
                                        uint32_t h)
{
	ktrace__ring_write_held_at(t, w, n, base_tsc, seg, P, h, 0);
}

KT_NOINSTR void ktrace__ring_write_held_at(struct kt_thread *t, const uint32_t *w, uint32_t n,
                                           uint64_t base_tsc, uint32_t seg, uint32_t P,
                                           uint32_t h, uint32_t chunk)
{
	uint32_t shift = ktrace__g.tsc_shift, i = 0;
	uint64_t tick = base_tsc >> shift;

	while (i < n) {
		struct kt_core *k = lock_core(t);
		uint64_t s, now;
		uint32_t pos, used, room, j, hdr_ts;

		if (k == NULL) {
			ktrace__count_loss(KTRACE_LOSS_NO_CPU, n - i);
			return;
		}
		s = kt_load(&k->state, relaxed);   /* relaxed: we hold the lock */
		pos = KT_STATE_POS(s);
		now = ktrace__now();
		used = pos & (BW - 1);
		/* HELD header (7 words) and at least one record of the run */
		if (used == 0 || used + 7 + rec_words(w[i]) > BW) {
			pos = claim_block(k, pos, t->slot, now, NULL);
			used = pos & (BW - 1);
		}
		room = BW - used - 7;
		/* The chunk: whole records that fit. */
		for (j = i; j < n && j - i + rec_words(w[j]) <= room;)
			j += rec_words(w[j]);
		if (j == i) {   /* a record larger than a block: cannot be */
			ktrace__count_loss(KTRACE_LOSS_NESTED, n - i);
			j = n;
		}
		hdr_ts = (uint32_t)tick & KTRACE_TS_MASK;
		put(k, pos++, KTRACE_REC(hdr_ts, 6));
		put(k, pos++, KTRACE_EXT_WORD(KTRACE_EXT_HELD, t->slot));
		put(k, pos++, seg);
		put(k, pos++, P);
		put(k, pos++, ((h & 0xFFFFFFu) << 8) | (chunk & 0xFFu));
		put(k, pos++, (uint32_t)(tick << shift));
		put(k, pos++, (uint32_t)((tick << shift) >> 32));
		/* Copy, following the time chain for the next chunk's base. */
		for (uint32_t x = i; x < j;) {
			uint32_t rw = rec_words(w[x]);
			uint32_t ev = KTRACE_REC_EV(w[x]);
			if (ev != KTRACE_EV_PAD) {
				if (ev == 3 && KTRACE_EXT_TYPE(w[x + 1]) == KTRACE_EXT_TSC) {
					tick = (((uint64_t)w[x + 3] << 32) | w[x + 2]) >> shift;
				} else {
					uint32_t d = (KTRACE_REC_TS(w[x]) - (uint32_t)tick) & KTRACE_TS_MASK;
					if (d < KTRACE_TS_HALF)
						tick += d;
					else
						tick -= KTRACE_TS_MASK + 1 - d;
				}
			}
			for (uint32_t y = 0; y < rw; y++)
				put(k, pos++, w[x + y]);
			x += rw;
		}
		kt_add(&k->words_written, 7 + (j - i), relaxed);
		/* The next record on this core needs TSC + THREAD first. */
		kt_store(&k->deadline, 0, relaxed);
		/* release: publishes the chunk (I2) and unlocks. */
		kt_store(&k->state, KT_STATE(pos, KT_OWNER_NONE), release);
		i = j;
		chunk++;
	}
}

/* ---- reader --------------------------------------------------------------- */

/*
 * The one reader protocol (see "Readers" above); the snapshot's cursor
 * and the window budget's sampler (filter.c) both copy through it.
 * Copy the first n words of incarnation S of core k's ring into dst, and
 * return 1 when the copy is consistent: gen was S|1 before and after it
 * (acquire load, copy, acquire fence, load again: I5), and it starts with
 * the BLOCK_START record naming S (I1).  Returns 0 for a torn block (reused
 * before or while it was copied, or never written): dst then holds words
 * of no single incarnation and must not be used.  The caller bounds n by
 * what it knows is committed (pos - S for the block holding pos - 1, read
 * from a state loaded with acquire; BW for older ones); n outside 5..BW is
 * refused.  Never waits for a writer.
 */
/* Not checked by ASan: the ring and dst are the library's own mappings,
 * bounds checked by the callers, and an instrumented word-by-word copy
 * would be slower than the (uninstrumented, asm) writers it races with. */
KT_NOINSTR __attribute__((no_sanitize_address)) int
ktrace__ring_read_block(const struct kt_core *core, uint32_t S, uint32_t n, uint32_t *dst)
{
	uint32_t mask = ktrace__g.ring_mask, b = (S & mask) / BW, g1, g2;

	if (n < 5 || n > BW)
		return 0;
	/* acquire: pairs with claim_block's release store of gen. */
	g1 = kt_load(&core->gen[b], acquire);
	if (g1 != (S | 1u))
		return 0;
	for (uint32_t i = 0; i < n; i++)
		dst[i] = __atomic_load_n(&core->ring[(S + i) & mask], __ATOMIC_RELAXED);
	/* acquire fence: pairs with claim_block's release fence (see I5): if
	 * any word copied came from a newer incarnation, the load below sees
	 * 0 or its S|1. */
	kt_fence(acquire);
	g2 = kt_load(&core->gen[b], relaxed);
	return g1 == g2 && KTRACE_REC_EV(dst[0]) == 4 &&
	       KTRACE_EXT_TYPE(dst[1]) == KTRACE_EXT_BLOCK_START && dst[2] == S;
}

KT_NOINSTR uint64_t ktrace__ring_mark(uint32_t c, uint64_t *copy_tsc)
{
	/* The counter first: every record committed after the load below
	 * read its timestamp after this (inside its rseq section or under the
	 * lock), so records older than copy_tsc are all below pos. */
	*copy_tsc = ktrace__now();
	/* acquire: pairs with the hot path's commit store (a plain store on
	 * x86, release in effect) and ktrace__emit's release store: every
	 * word below pos is complete and visible. */
	return kt_load(&ktrace__g.cores[c].state, acquire);
}

static KT_NOINSTR int64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The cursor: which block incarnations core c held at the mark (state s),
 * and how far the copy of them got.  Incarnation S lives in block
 * (S & mask) / BW; the ring held exactly the ones from cur - (exists-1)*BW
 * to cur.  A ring whose 32-bit counter went round (2^22 blocks, far more
 * than any ring's 2^20) is wrapped; blocks_used, read after the mark, can
 * only be a few claims ahead of it.
 */
KT_NOINSTR void ktrace__ring_cursor_init(struct kt_ring_cursor *k, uint32_t c, uint64_t s,
                                         void *dst, uint32_t max_blocks)
{
	struct kt_core *core = &ktrace__g.cores[c];
	uint32_t n = ktrace__g.nblocks;
	uint64_t used = kt_load(&core->blocks_used, relaxed); /* relaxed: a bound only */

	memset(k, 0, sizeof(*k));
	k->t0_ns = ktrace__monotonic_ns();
	k->t0_cpu_ns = thread_cpu_ns();
	k->cpu = c;
	k->pos = KT_STATE_POS(s);
	k->dst = dst;
	if (used == 0 || k->pos == 0)
		return;
	k->cur = (k->pos - 1) & ~(BW - 1);
	k->exists = used >= (1u << 21) ? n : k->cur / BW + 1;
	if (k->exists > n)
		k->exists = n;
	/* No room for all of them: the oldest are not copied (never the
	 * newest, which end the window at copy_tsc). */
	k->left = k->exists;
	if (k->left > max_blocks) {
		k->no_room = k->left - max_blocks;
		k->left = max_blocks;
	}
	if (k->left == 0)
		return;
	k->next = k->cur - (k->left - 1) * BW;
}

/* Words the writer can still append before it reuses the next block to
 * copy; 0 when it already has (or is on it). */
KT_NOINSTR uint32_t ktrace__ring_cursor_margin(const struct kt_ring_cursor *k)
{
	/* relaxed: a scheduling hint; each copy is checked through gen. */
	uint32_t live = KT_STATE_POS(kt_load(&ktrace__g.cores[k->cpu].state, relaxed));
	uint32_t m = k->next + ktrace__g.ring_words - live;

	return m > ktrace__g.ring_words ? 0 : m;
}

/*
 * The writer overtook the copy.  Where to go on: a copy faster than the
 * writer only needs to get ahead of it again (a margin past its front);
 * a slower one (a busy or sanitized machine) can never stay
 * ahead, and would keep dropping everything it copied at each new hole:
 * it goes to where the newest blocks it can still finish start.  The
 * margin is twice what the writer gained in the stall that made the hole
 * (a preempted copy is stalled again for about as long), at most a
 * quarter of what is left.  With copy rate C (per ns of the copying
 * thread's cpu time: a stall is not slowness; taken as the faster until
 * 64 blocks were copied) and writer rate W (per ns of wall time), both
 * since the mark, in blocks, the D blocks from the writer's front to cur
 * allow
 * X = D * C / (C + W) of them (the writer must not reach the first of the
 * X before the copy is done); 10 % of slack.  The blocks skipped are
 * counted as overwritten: the writer reuses them before any copy could.
 */
static KT_NOINSTR void skip_ahead(struct kt_ring_cursor *k)
{
	uint32_t rw = ktrace__g.ring_words;
	/* relaxed: an estimate; every copy is still checked through gen. */
	uint32_t live = KT_STATE_POS(kt_load(&ktrace__g.cores[k->cpu].state, relaxed));
	uint32_t front = (((live - 1) & ~(BW - 1)) + BW - rw);   /* oldest not reused */
	uint32_t after = k->next + BW;                            /* next candidate */
	uint32_t d, x, start;
	/* The copy's rate on the cpu (a stall is not slowness), the
	 * writer's on the wall clock. */
	double dt = (double)(ktrace__monotonic_ns() - k->t0_ns) + 1;
	double dc = (double)(thread_cpu_ns() - k->t0_cpu_ns) + 1;
	double c = (double)k->done / dc, w = (double)((live - k->pos) / BW) / dt;

	if (front - after >= rw)      /* front behind 'after': nothing to skip */
		return;
	if (k->cur - front >= rw) {   /* the writer lapped cur itself */
		k->lost += k->left - 1;
		k->left = 1;
		k->next = k->cur - BW;    /* the loop's increment ends the copy */
		return;
	}
	d = (k->cur - front) / BW + 1;
	/* How far the writer got past the copy during the stall that made
	 * this hole: a lead of twice that survives the next such stall. */
	uint32_t gap = (front - k->next) / BW;
	uint32_t lead = 64 + (k->done < 64 ? gap : 2 * gap);  /* the first: no stall */
	if (lead > d / 4)   /* one stall costs at most a quarter of the rest */
		lead = d / 4;
	/* Too few blocks copied to know the copy's rate (the oldest block
	 * is often reused right after the mark): assume the faster. */
	if (k->done < 64 || c > 1.25 * w)
		x = d > lead ? d - lead : 1;
	else
		x = (uint32_t)((double)d * c / (c + w) * 0.9);
	if (x < 1)
		x = 1;
	start = k->cur - (x - 1) * BW;
	if (start - after >= rw || start == after)
		return;
	/* The loop's increment moves next to 'after' and left down by one. */
	k->lost += (start - after) / BW;
	k->left -= (start - after) / BW;
	k->next = start - BW;
}

/*
 * Copy up to max blocks, oldest first; returns the blocks still to copy.
 * The writer reuses blocks oldest first too, so a copier faster than the
 * writer stays ahead of it and loses nothing.  A block reused before (or
 * while) it was copied is a hole: everything copied before it is older
 * than the hole and is dropped too, so what stays in dst is always one
 * unbroken run ending at the newest block copied (a reader never glues
 * events across a hole).  Dropped blocks are counted in k->lost.
 */
KT_NOINSTR uint32_t
ktrace__ring_cursor_step(struct kt_ring_cursor *k, uint32_t max)
{
	for (; k->left && max; k->left--, max--, k->next += BW) {
		uint32_t S = k->next;
		struct ktrace_block_rec *rec = (struct ktrace_block_rec *)(k->dst + k->bytes);
		uint32_t n = (S == k->cur) ? k->pos - S : BW;

		if (ktrace__ring_read_block(&ktrace__g.cores[k->cpu], S, n, (uint32_t *)(rec + 1))) {
			rec->cpu = k->cpu;
			rec->nwords = n;
			rec->start = S;
			rec->crc = 0; /* filled by the writer */
			k->bytes += sizeof(*rec) + (size_t)n * 4;
			k->kept++;
			k->done++;
			continue;
		}
		/* A hole: S was reused (or is being reused) by the writer. */
		k->lost += k->kept + 1;
		k->kept = 0;
		k->bytes = 0;
		if (k->left > 1)
			skip_ahead(k);
	}
	return k->left;
}

KT_NOINSTR size_t ktrace__ring_copy(uint32_t c, void *dst, uint32_t *nblocks_out,
                                    uint64_t *race_drops)
{
	struct kt_ring_cursor k;
	uint64_t t;

	ktrace__ring_cursor_init(&k, c, ktrace__ring_mark(c, &t), dst, ktrace__g.nblocks);
	ktrace__ring_cursor_step(&k, UINT32_MAX);
	*nblocks_out = k.kept;
	*race_drops += k.lost;
	return k.bytes;
}
