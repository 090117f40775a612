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
 * pos - 1 as current.  For each block: load gen (acquire), skip it if 0 or
 * if its S is newer than the current block's, copy its words (up to pos for
 * the current block, all of it for older ones), then an acquire fence and
 * gen again: a change means a writer reused the block while we copied, so
 * the copy is dropped and counted (KTRACE_LOSS_SNAPSHOT_RACE).  Tracing
 * never waits for a reader.
 */
#include "internal.h"
#include "rseq.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
	}
	for (int i = 0; i < KTRACE_LOSS_COUNT; i++)
		kt_store(&g->loss[i], 0, relaxed);
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
		 "leaq 3b(%%rip), %%rax\n\t"
		 "movq %%rax, 8(%[rs])\n\t"
		 "1:\n\t"
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
                                       uint64_t now)
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
	struct kt_core *k = lock_core(t);
	uint64_t s, now, deadline, step = ktrace__g.forward_max;
	uint32_t pos, owner, used, need;
	int new_seg;

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
		pos = claim_block(k, pos, t->slot, now);
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
}

/* ---- reader --------------------------------------------------------------- */

/*
 * A writer that laps the whole ring while a (preempted) reader copies it
 * leaves the reader with blocks from before and after the lap: each valid,
 * but with holes between them.  Keep only the unbroken run of blocks that
 * ends at the current one (S = cur, cur - BW, ...), in place; the others
 * are counted as raced.  A reader never glues events across a hole.
 */
static KT_NOINSTR size_t keep_contiguous(void *dst, size_t bytes, uint32_t nb, uint32_t cur,
                                         uint32_t *nblocks_out, uint64_t *race_drops)
{
	unsigned char *p = dst, *end = p + bytes, *out = dst;
	uint32_t n = ktrace__g.nblocks, run = 0, kept = 0;
	uint8_t *have = calloc((n + 7) / 8, 1);   /* bit per age (cur - S) / BW */

	if (have == NULL) { /* cannot check: keep the copy as it is */
		*nblocks_out = nb;
		return bytes;
	}
	for (unsigned char *q = p; q < end;) {
		const struct ktrace_block_rec *r = (const void *)q;
		uint32_t age = (cur - r->start) / BW;   /* < n: checked by the copy */
		have[age / 8] |= (uint8_t)(1u << (age % 8));
		q += sizeof(*r) + (size_t)r->nwords * 4;
	}
	while (run < n && (have[run / 8] >> (run % 8) & 1))
		run++;
	for (unsigned char *q = p; q < end;) {
		const struct ktrace_block_rec *r = (const void *)q;
		size_t sz = sizeof(*r) + (size_t)r->nwords * 4;
		if ((cur - r->start) / BW < run) {
			memmove(out, q, sz);
			out += sz;
			kept++;
		}
		q += sz;
	}
	free(have);
	*race_drops += nb - kept;
	*nblocks_out = kept;
	return (size_t)(out - (unsigned char *)dst);
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

KT_NOINSTR size_t ktrace__ring_copy(uint32_t c, void *dst, uint32_t *nblocks_out,
                                    uint64_t *race_drops)
{
	uint64_t t;

	return ktrace__ring_copy_at(c, ktrace__ring_mark(c, &t), dst, ktrace__g.nblocks,
	                            nblocks_out, race_drops);
}

/*
 * Copy the blocks of core c up to state s into dst, at most max_blocks of
 * them.  Every block accepted (S at most the current block's) was claimed
 * before s was read, so blocks_used read after ktrace__ring_mark bounds
 * their number; max_blocks is checked anyway, as a guard on the buffer.
 */
KT_NOINSTR size_t ktrace__ring_copy_at(uint32_t c, uint64_t s, void *dst, uint32_t max_blocks,
                                       uint32_t *nblocks_out, uint64_t *race_drops)
{
	struct kt_core *k = &ktrace__g.cores[c];
	uint32_t rw = ktrace__g.ring_words;
	unsigned char *out = dst;
	uint32_t pos = KT_STATE_POS(s), cur, nb = 0;

	*nblocks_out = 0;
	if (kt_load(&k->blocks_used, relaxed) == 0)
		return 0;
	cur = (pos - 1) & ~(BW - 1);
	for (uint32_t b = 0; b < ktrace__g.nblocks; b++) {
		struct ktrace_block_rec *rec = (struct ktrace_block_rec *)out;
		uint32_t *words = (uint32_t *)(rec + 1);
		/* acquire: pairs with claim_block's release store of gen. */
		uint32_t g1 = kt_load(&k->gen[b], acquire), g2, S, n;

		if (g1 == 0)
			continue;
		S = g1 & ~1u;
		if (cur - S >= rw)   /* newer than the current block: skip */
			continue;
		if (nb == max_blocks) {   /* cannot happen (see above): guard */
			(*race_drops)++;
			continue;
		}
		n = (S == cur) ? pos - S : BW;
		if (n == 0 || n > BW)
			continue;
		for (uint32_t i = 0; i < n; i++)
			words[i] = __atomic_load_n(&k->ring[(S + i) & ktrace__g.ring_mask],
			                           __ATOMIC_RELAXED);
		/* acquire fence: pairs with claim_block's release fence (see
		 * I5): if any word copied came from a newer incarnation, the
		 * load below sees 0 or its S|1. */
		kt_fence(acquire);
		g2 = kt_load(&k->gen[b], relaxed);
		if (g1 != g2 || KTRACE_REC_EV(words[0]) != 4 ||
		    KTRACE_EXT_TYPE(words[1]) != KTRACE_EXT_BLOCK_START || words[2] != S) {
			(*race_drops)++;
			continue;
		}
		rec->cpu = c;
		rec->nwords = n;
		rec->start = S;
		rec->crc = 0; /* filled by the writer */
		out += sizeof(*rec) + (size_t)n * 4;
		nb++;
	}
	return keep_contiguous(dst, (size_t)(out - (unsigned char *)dst), nb, cur, nblocks_out,
	                       race_drops);
}
