/*
 * internal.h - declarations shared between the library's files.  Never
 * installed; tests reach it through the ktrace_internal target.
 */
#ifndef KTRACE_INTERNAL_H
#define KTRACE_INTERNAL_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ktrace.h"
#include "ktrace_format.h"

/* Everything declared below is internal to the shared library: hidden, so
 * the hot path reaches globals without going through the GOT. */
#pragma GCC visibility push(hidden)

#define KT_NOINSTR   __attribute__((no_instrument_function))
#define KT_NOINLINE  __attribute__((noinline))
#define KT_LIKELY(x)   __builtin_expect(!!(x), 1)
#define KT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KT_CACHELINE 64
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23      /* Linux 5.14; older glibc headers lack it */
#endif

/*
 * Atomic helpers.  Every call site names its order; the comments there say
 * what it pairs with (see the ring's protocol in ring.c).
 */
#define kt_load(p, mo)      atomic_load_explicit((p), memory_order_##mo)
#define kt_store(p, v, mo)  atomic_store_explicit((p), (v), memory_order_##mo)
#define kt_add(p, v, mo)    atomic_fetch_add_explicit((p), (v), memory_order_##mo)
#define kt_cas(p, e, v, mo) \
	atomic_compare_exchange_strong_explicit((p), (e), (v), memory_order_##mo, \
	                                        memory_order_relaxed)
#define kt_fence(mo)        atomic_thread_fence(memory_order_##mo)

/* ---- per-core ring (ring.c) -------------------------------------------- */

/*
 * Core state word: bits 63..32 = pos, the core's 32-bit word counter (the
 * next word to write is ring[pos & ring_mask]); bits 31..0 = owner, the
 * thread slot whose records the stream currently carries, with
 * KT_OWNER_LOCK set while a slow path holds the core.
 */
#define KT_OWNER_LOCK  0x80000000u
#define KT_OWNER_NONE  0x7FFFFFFFu   /* no thread yet: matches no slot */
#define KT_STATE(pos, owner) (((uint64_t)(pos) << 32) | (uint32_t)(owner))
#define KT_STATE_POS(s)      ((uint32_t)((s) >> 32))
#define KT_STATE_OWNER(s)    ((uint32_t)(s))

/* Layout is read by the hot path's assembly: state at 0, deadline at 8,
 * ring at 16.  Pinned by _Static_asserts in record.c. */
struct kt_core {
	/* --- line 1: writer-hot, touched by every event on this core --- */
	_Atomic uint64_t state;      /* pos|owner; written by the hot path's
	                                commit store and by slow paths under
	                                the lock; read by snapshots */
	_Atomic uint64_t deadline;   /* counter value from which the next record
	                                needs a TSC record first; slow path */
	uint32_t *ring;              /* ring_words words; set at init */
	char pad1[KT_CACHELINE - 24];
	/* --- line 2: cold, slow path and snapshot only --- */
	_Atomic uint32_t *gen;       /* per block: S|1 while block holds the data
	                                starting at counter S, 0 while reused;
	                                slow path writes, snapshot reads */
	_Atomic uint64_t blocks_used;   /* blocks claimed since start; slow path */
	_Atomic uint64_t words_written; /* words committed by slow paths (the hot
	                                   path's are pos - S); informational */
	_Atomic uint64_t claim_tsc;  /* counter at the last block claimed; under
	                                the core lock (filter.c's hint) */
	uint64_t prefault_bytes;     /* ring bytes faulted in ahead; writer
	                                thread only (ktrace__ring_prefault) */
	uint64_t prefault_used;      /* bytes used at its last look, and when: */
	int64_t prefault_ns;         /* the rate its lead follows (same) */
	uint64_t touch_bytes;        /* of them, touched (same) */
};

struct kt_globals {
	/* read by the hot path */
	struct kt_core *cores;       /* ncpus entries, 128-byte aligned */
	uint32_t ncpus;              /* rings allocated (possible CPUs) */
	uint32_t ring_mask;          /* ring_words - 1 */
	/* configuration and state, slow paths only */
	uint32_t ring_words;         /* words per core ring, power of two */
	uint32_t nblocks;            /* ring_words / KTRACE_BLOCK_WORDS */
	int use_rseq;                /* appends use rseq (else CAS + locked path) */
	int clock_source;            /* enum ktrace_clock_source */
	uint32_t tsc_shift;          /* record ts20 = counter >> tsc_shift:
	                                KT_TSC_SHIFT with the TSC (clock.c) */
	uint64_t forward_max;        /* counter units: deadline step */
	uint64_t start_tsc;          /* counter at init */
	_Atomic uint64_t ready_tsc;  /* counter at init's end, when calls start
	                                to be recorded (0: not yet); the
	                                budget's first look measures from it */
	_Atomic int state;           /* enum kt_init_state */
	_Atomic uint64_t hint_ticks; /* a block filled in fewer counter units
	                                than this exceeds the CPU budget: wake
	                                the writer (filter.c); 0 = never */
	_Atomic uint64_t hz_cached;  /* counter Hz estimate for triggers; writer
	                                thread updates it every anchor, 0 = none */
	_Atomic uint64_t after_until; /* counter: a trigger's window is copied
	                                 about then; requests ending before it
	                                 are kept (KTRACE_REQ_AFTER) */
	_Atomic uint64_t loss[KTRACE_LOSS_COUNT]; /* by enum ktrace_loss_cause */
};

/* The TSC shift: a record's ts20 is (TSC >> KT_TSC_SHIFT), about 100 ns
 * ticks at 2.5 GHz.  The one definition: clock.c sets tsc_shift from it
 * (other clocks use their own, at most this), and the hooks' asm in
 * record.c, which shifts by the literal ("shrq $8"), asserts it. */
#define KT_TSC_SHIFT 8u

enum kt_init_state { KT_UNINIT = 0, KT_INITING = 1, KT_READY = 2, KT_OFF = 3 };

extern struct kt_globals ktrace__g;

/* ---- per-thread state (record.c) --------------------------------------- */

#define KT_FCACHE_SIZE 2048          /* entries, power of two (16 KiB) */
/* A function's slot: the default mode's hooks key on its address a, the
 * lean mode's on r, the end of its entry site (5 to 10 bytes in), looked
 * up one 16-byte chunk further on, so that a function built in both modes
 * never has its two entries in one slot (they evicted each other on every
 * call: both slow paths each time).  The lean asm (record.c) computes it
 * with the same lea. */
#define KT_FC_SLOT(a) (((a) >> 4) & (KT_FCACHE_SIZE - 1))
#define KT_FC_LEAN_SLOT(r) ((((r) + 16) >> 4) & (KT_FCACHE_SIZE - 1))
/* The lean mode's second slot for r (TWO_WAYS in lean.c): the first one
 * xor a hash of the address bits above it, never 0, so two functions
 * whose first slots meet (their addresses equal in bits 4..14) most
 * likely have second slots apart. */
#define KT_FC_LEAN_SLOT2(r) (KT_FC_LEAN_SLOT(r) ^                               \
	((uint32_t)((((uint64_t)(r) >> 15) * 0x9E3779B97F4A7C15ull) >> 53) | 1u))
#define KT_FCACHE_FULL (1ull << 47)  /* or'ed into a cached address: the
                                        function has no compact id */
/* Bits 15..12 of a cache entry are above the 12-bit event (filter.c):
 * the function is skipped in this thread's view. */
#define KT_FC_EXCLUDED 0x8000u       /* KTRACE_EXCLUDE: entry and exit skipped */
#define KT_FC_MUTED    0x4000u       /* muted by the budget: see record.c */
#define KT_FC_SKIP     (KT_FC_EXCLUDED | KT_FC_MUTED)

#define KT_FC_LEARN    0x2000u       /* lean entry: still learning the
                                        function's exit sites (lean.c) */
#define KT_LEAN_DEPTH  256           /* lean frames a thread tracks */
#define KT_LF_LEARN    1u            /* lean frame: learn its exit site */
#define KT_LF_SKIP     2u            /* lean frame: entry not recorded (learning only) */
#define KT_FL_EVERY    1024          /* frameless returns per exit-site look */

#define KT_MUTE_LEVELS 16            /* adoptions with skipped frames open */

struct kt_thread {
	/* hot: read by every event */
	void *rseq;                  /* this thread's struct rseq, NULL until the
	                                thread is registered (forces slow path) */
	uint32_t key;                /* owner value the hot path compares with:
	                                the slot, or 0 (never matches) */
	uint32_t last_cpu;           /* core whose stream this thread's current
	                                segment is in; the hot path compares */
	uint32_t slot;               /* 1-based thread slot, 0 = not registered */
	uint32_t seg;                /* segment number (THREAD record seq) */
	uint64_t ment;               /* entries skipped because muted (this thread) */
	uint64_t mexit;              /* exits skipped because muted: ment - mexit
	                                frames of muted calls are open */
	uint64_t mlw;                /* the newest mute level's low-water mark
	                                (filter.c), 0 when there is none */
	/* hot while the thread runs a request (request.c): its records go to
	 * the hold buffer instead of the ring.  Written by this thread only;
	 * the hold asm reads them at fixed offsets (record.c asserts). */
	uint32_t *hold;              /* hold buffer while holding, else NULL */
	uint32_t hold_pos;           /* words used in hold */
	uint32_t hold_lim;           /* words: a record may start below this */
	uint64_t hold_deadline;      /* counter value from which the next held
	                                record needs a TSC record first */
	uint64_t fcache[KT_FCACHE_SIZE]; /* (addr << 16) | KT_FC_* | entry event;
	                                    0 = empty */
	/* cold */
	uint32_t mute_epoch;         /* mute set this thread's view follows */
	uint32_t nmlev;              /* mute levels (filter.c) */
	struct kt_mute_level {
		uint32_t prev, next;     /* adopted epoch next over prev */
		uint64_t lw;             /* fewest skipped frames open since */
	} mlev[KT_MUTE_LEVELS];
	uint64_t ment_reported;      /* part of ment added to the global count */
	int nest;                    /* >0 while in the library's slow path */
	int32_t tid;
	int registered_key;          /* pthread key destructor armed */
	uint32_t locked_cpu;         /* core index held by this thread's lock */
	struct kt_hold *hs;          /* requests open on this thread and the held
	                                run (request.c); allocated at its first
	                                request */
	/* vfork (vfork.c): what a vfork child borrowing this thread must not
	 * change, saved by the parent before the call, restored after */
	int in_vfork;                /* 1 from before vfork until the parent resumes */
	uint32_t vfork_key;          /* key */
	uint64_t vfork_ment, vfork_mexit; /* ment, mexit */
	uint32_t vfork_hold_lim;     /* hold_lim */
	/* lean mode (lean.c): the frames whose entry this thread recorded
	 * through __fentry__, innermost last; an exit is recorded iff its
	 * frame is here.  Written by this thread only. */
	uint64_t ltop8;              /* lstk[lsp - 1].slot - 8, or all ones when
	                                lsp is 0: __return__'s asm returns at
	                                once when it is above its rsp (the frame
	                                exiting was not recorded) */
	uint32_t lsp;                /* frames in lstk */
	uint32_t nfl;                /* __return__'s frameless returns to go
	                                before one learns its exit site: its
	                                asm counts down, lean.c sets it again */
	struct kt_lframe {
		uint64_t slot;           /* address of the frame's return address */
		uint64_t fn;             /* function address */
		uint32_t ev;             /* entry event (0: full-address record) */
		uint32_t flags;          /* KT_LF_* */
	} lstk[KT_LEAN_DEPTH];
	int32_t reg_idx;             /* index in record.c's registry, -1: none */
	uint64_t fl_last;            /* the counter at its last frameless look (lean.c) */
	uint64_t lskip;              /* lean entries the hooks skipped because
	                                muted (not patched out yet, or W^X):
	                                __fentry__'s asm adds them, as ment */
	uint64_t lskip_reported;     /* part of lskip added to the global count */
};

/*
 * Push a lean frame at lstk[n] (n = lsp): written, lsp moved, written
 * again.  A traced signal handler that runs before lsp moves takes
 * lstk[n] for its own frames (the hooks' fast paths do not look at nest)
 * and leaves lsp at n; without the second write the frame pushed would
 * be the handler's.  Relaxed atomics: plain word stores, each whole for a
 * signal handler (the writer reads ev, lean.c's EXITS_AFTER), never
 * merged into vector stores (record.c's C fast path, KT_GPR).  The
 * caller sets ltop8 after.  lib/record.c's asm push does the same.
 */
static inline __attribute__((always_inline, no_instrument_function)) void
kt_lframe_words(struct kt_lframe *f, uint64_t slot, uint64_t fn, uint32_t ev, uint32_t flags)
{
	__atomic_store_n(&f->slot, slot, __ATOMIC_RELAXED);
	__atomic_store_n(&f->fn, fn, __ATOMIC_RELAXED);
	__atomic_store_n(&f->ev, ev, __ATOMIC_RELAXED);
	__atomic_store_n(&f->flags, flags, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline, no_instrument_function)) void
ktrace__lframe_push(struct kt_thread *t, uint32_t n, uint64_t slot, uint64_t fn, uint32_t ev,
                    uint32_t flags)
{
	kt_lframe_words(&t->lstk[n], slot, fn, ev, flags);
	__asm__ volatile("" ::: "memory");
	__atomic_store_n(&t->lsp, n + 1, __ATOMIC_RELAXED);
	__asm__ volatile("" ::: "memory");
	kt_lframe_words(&t->lstk[n], slot, fn, ev, flags);
}

/*
 * Per-thread state lives out of static TLS: glibc takes static TLS out of
 * every thread's stack, and 16.8 KiB of it stopped threads with small
 * stacks from starting (PTHREAD_STACK_MIN) or overflowed them.  The
 * thread-local word ktrace__tp points at the thread's struct kt_thread,
 * mmapped by the slow path on the thread's first event (an async-signal-
 * safe call: the first event can be in a signal handler).  Until then,
 * and after the thread's exit destructor released it, it points at
 * ktrace__idle, a shared all-zero struct whose empty function cache never
 * matches, so the hot path needs no NULL test: it goes to the slow path,
 * which allocates (record.c).  Nothing ever writes ktrace__idle.
 */
extern __thread struct kt_thread *ktrace__tp __attribute__((tls_model("initial-exec")));
extern struct kt_thread ktrace__idle;

/*
 * This thread's struct kt_thread as a plain pointer, for the slow paths:
 * ktrace__idle when it has none yet (read-only then; see kt_self_alloc).
 * The empty asm keeps GCC from re-deriving it after a call as a
 * segment-relative %fs:offset(%reg) access with a zero base register,
 * which UBSan's null check then reports as a null pointer (a false
 * positive seen in executables that link the static library).
 */
static inline __attribute__((always_inline, no_instrument_function)) struct kt_thread *
kt_self(void)
{
	struct kt_thread *t = ktrace__tp;
	__asm__("" : "+r"(t));
	return t;
}

/* This thread's own struct kt_thread, allocated on first use; NULL when
 * it cannot be (no memory, or the thread has exited). */
struct kt_thread *ktrace__self_alloc(void);
/* Thread exit (threads.c's key destructor): give the struct back. */
void ktrace__self_release(void);

static inline __attribute__((always_inline, no_instrument_function)) struct kt_thread *
kt_self_alloc(void)
{
	struct kt_thread *t = kt_self();
	return KT_LIKELY(t != &ktrace__idle) ? t : ktrace__self_alloc();
}

/* Write one record (header word built from event ev, with 'extra' payload
 * words) under the core lock; the timestamp is taken under the lock.
 * ext_words: payload words of an extended record (ev = count) or NULL. */
void ktrace__emit(struct kt_thread *t, uint32_t ev, const uint32_t *payload,
                  uint32_t npayload);
/* Fast append of one single-word event; 1 on success, 0 if the slow path
 * must handle it (record.c). */
int ktrace__try_fast(struct kt_thread *t, uint32_t ev);
int ktrace__ring_init(void);
void ktrace__ring_reset(void);     /* fork child: empty every ring */
void ktrace__ring_free(void);      /* start-up failed: unmap the rings */
/* Snapshot side: ring_mark reads core c's state (and the counter just
 * before); a cursor then copies the blocks up to that state, oldest first,
 * in steps, so several cores can be copied in slices (ring.c, "Readers").
 * Marking every core first makes the cores' windows end together. */
uint64_t ktrace__ring_mark(uint32_t c, uint64_t *copy_tsc);
struct kt_ring_cursor {
	uint32_t cpu;
	uint32_t pos;          /* word counter at the mark */
	uint32_t cur;          /* S of the block holding pos - 1 */
	uint32_t next;         /* S of the next block to copy */
	uint32_t left;         /* blocks still to copy, next .. cur */
	uint32_t exists;       /* blocks the ring held at the mark */
	uint32_t kept;         /* blocks in dst: an unbroken run */
	uint32_t lost;         /* blocks reused before their copy was done */
	uint32_t no_room;      /* oldest blocks not copied: dst too small */
	uint32_t done;         /* blocks copied (kept or dropped later) */
	int64_t t0_ns;         /* CLOCK_MONOTONIC at init: for the rates */
	int64_t t0_cpu_ns;     /* the copying thread's cpu time at init */
	unsigned char *dst;    /* block records (ktrace_block_rec + words) */
	size_t bytes;          /* bytes used in dst */
};
/* dst has room for max_blocks blocks with their headers. */
void ktrace__ring_cursor_init(struct kt_ring_cursor *k, uint32_t c, uint64_t state,
                              void *dst, uint32_t max_blocks);
/* Words the live writer may append before it reuses the next block. */
uint32_t ktrace__ring_cursor_margin(const struct kt_ring_cursor *k);
/* Copy up to max blocks; returns the blocks left to copy. */
uint32_t ktrace__ring_cursor_step(struct kt_ring_cursor *k, uint32_t max);
/* The one reader protocol (ring.c): copy the first n words (5..BW) of
 * incarnation S of core k's ring (ring_words words, like every core's)
 * into dst; 1 if the copy is consistent (one incarnation, starting with
 * its BLOCK_START), 0 if torn or not there (dst is then garbage). */
int ktrace__ring_read_block(const struct kt_core *k, uint32_t S, uint32_t n, uint32_t *dst);
/* All of core c in one go; dst has room for the whole ring.  race_drops
 * gets the blocks reused before they were copied. */
size_t ktrace__ring_copy(uint32_t c, void *dst, uint32_t *nblocks_out, uint64_t *race_drops);

/* ---- slow path entry points (record.c) --------------------------------- */
void ktrace__slow_func(void *fn, uint32_t exit_flag) KT_NOINLINE;
/* Register the calling thread if needed; 0 if it can record. */
int ktrace__thread_ready(struct kt_thread *t);
void ktrace__count_loss(int cause, uint64_t n);
/* An extended record (type, 24-bit arg, up to 3 more payload words) from
 * the API, with the nesting guard. */
void ktrace__emit_ext(uint32_t type, uint32_t arg24, const uint32_t *more, uint32_t nmore);

/* ---- requests held aside (request.c) ------------------------------------ */
/* Append one record (header event ev, npayload payload words) to t's hold
 * buffer, under t's nesting guard (slow path).  Makes room by spilling the
 * held run to the ring when the buffer is full. */
void ktrace__hold_emit(struct kt_thread *t, uint32_t ev, const uint32_t *payload,
                       uint32_t npayload);
void ktrace__hold_fork_child(struct kt_thread *t);
/* Writer thread: open[id] = 1 for each compact id with a lean frame open
 * on some registered thread (record.c's registry of thread structs; a
 * thread it could not hold is not seen). */
void ktrace__lean_open_frames(uint8_t *open, uint32_t nf);
void ktrace__registry_fork_child(struct kt_thread *self);
void ktrace__hold_before_snapshot(void);
void ktrace__hold_thread_exit(void);
uint64_t ktrace__hold_gaps_kept(void);   /* gaps kept whole since start */
/* ring.c: write n held words (whole records, starting at time base_tsc)
 * into the ring of the core t runs on as HELD chunks keyed (seg, P, h). */
void ktrace__ring_write_held(struct kt_thread *t, const uint32_t *w, uint32_t n,
                             uint64_t base_tsc, uint32_t seg, uint32_t P, uint32_t h);
/* ... with chunks numbered from chunk (they sort after lower ones of the
 * same key: request.c's deferred entries). */
void ktrace__ring_write_held_at(struct kt_thread *t, const uint32_t *w, uint32_t n,
                                uint64_t base_tsc, uint32_t seg, uint32_t P, uint32_t h,
                                uint32_t chunk);
/* ring.c: the word counter of core cpu's stream now (0 if no such core). */
uint32_t ktrace__ring_pos(uint32_t cpu);
void ktrace__ring_prefault(int64_t *wait_ns);  /* writer thread: pages ahead of the writers */
/* Each page of [p, p + len) written in place (a locked or of zero at its
 * first word: a store of another thread's to it is never lost), so that
 * the host maps it now, for the thread that touches it (ring.c). */
void ktrace__touch_pages(void *p, size_t len);
/* From t0 to t1 (CLOCK_MONOTONIC ns) ktrace held the process's mapping
 * lock for work of its own (filter.c's own_t lists which); a thread's page
 * fault, brk, mmap or mprotect waited for it meanwhile.  Any thread, also
 * in a signal handler. */
void ktrace__filter_own_mm(int64_t t0, int64_t t1);
/* madvise(MADV_POPULATE_WRITE) over [p, p + len), noted as such a hold;
 * madvise's result. */
int ktrace__populate_write(void *p, size_t len);
/* madvise(p, len, advice) in such a noted interval; madvise's result. */
int ktrace__madvise_own(void *p, size_t len, int advice);
/* ktrace's own anonymous mappings, made and given back in noted intervals
 * (filter.c); NULL on failure. */
void *ktrace__map_own(size_t bytes, int flags);
void ktrace__unmap_own(void *p, size_t bytes);
/* Writer thread: a block that began at t, in such a hold, counts as
 * preempted until the returned time (0: not in one). */
int64_t ktrace__filter_own_until(int64_t t);

/* trigger.c: per-kind bookkeeping of requests. */
struct kt_req_end {
	uint64_t ticks;              /* duration, counter ticks */
	uint32_t keep;               /* enum ktrace_req_keep: SLOW / TRIGGER set here */
	uint32_t pct_only;           /* SLOW only by the running keep percentile */
};
/* A request slow only by the keep percentile, of about words words: 1 if
 * it may be kept (within its thread's share of the ring: the bucket
 * *tokens, refilled since *last), 0 if not. */
int ktrace__kind_slow_budget(int64_t *tokens, uint64_t *last, uint64_t words, uint64_t now);
/* Number the kind's next request (1-based). */
uint32_t ktrace__kind_number(uint32_t kind);
/* Whether a request of kind beginning now is a typical sample. */
int ktrace__kind_sample(uint32_t kind, uint64_t now);
/* A request of kind ended: threshold checks, trigger, histograms. */
void ktrace__kind_end(uint32_t kind, uint32_t number, uint32_t begin_slot, uint64_t begin,
                      uint64_t end, struct kt_req_end *out);
/* What became of it (counts per kind): keep flags, or 0 = dropped. */
void ktrace__kind_fate(uint32_t kind, uint32_t keep);
/* A dropped one was kept after all (it overlapped a slow request). */
void ktrace__kind_refate(uint32_t kind);
/* A thread got no hold buffer (counted in the REQUESTS section). */
void ktrace__hold_failed(void);
/* trigger.c: keep a request that ended at end, of about words, as part of
 * a trigger's aftermath (KTRACE_REQ_AFTER)? */
int ktrace__after_keep(uint64_t end, uint64_t words);
/* Writer thread: prepare the next histogram slice. */
void ktrace__kinds_tick(void);
/* The REQUESTS section (ktrace__walloc'ed; caller frees), or NULL. */
void *ktrace__requests_serialize(size_t *len, uint32_t *count);
/* The budget: ticks of thread hold state h's requests in [b, e] (counter
 * values), -1 if unknown. */
int64_t ktrace__hold_request_ticks(const void *h, uint64_t b, uint64_t e);
/* threads.c: the hold state of thread slot (request.c), or NULL. */
void ktrace__thread_set_hold(uint32_t slot, void *hs);
void *ktrace__thread_hold(uint32_t slot);
/* threads.c: a request begun on thread slot ended on another thread. */
void ktrace__thread_mail_post(uint32_t slot, uint32_t seq, int keep);
uint64_t ktrace__thread_mail_take(uint32_t slot);

/* ---- clock (clock.c) --------------------------------------------------- */
int ktrace__clock_init(void);
uint64_t ktrace__now(void);          /* counter value (TSC or mono ns) */
void ktrace__anchor_take(void);      /* bg thread: add an anchor */
uint64_t ktrace__tsc_hz(void);       /* best frequency estimate */
uint64_t ktrace__clock_test_measure_hz(int fresh, int64_t *slept_ns);   /* tests */
size_t ktrace__anchors_copy(struct ktrace_anchor_rec *dst, size_t max);
int64_t ktrace__realtime_ns(void);
extern _Atomic int64_t ktrace__realtime_offset_ns; /* tests: a wall-clock step */
int64_t ktrace__monotonic_ns(void);
/* t (s since 1970) as YYYYMMDDTHHMMSSZ, UTC, without gmtime_r's malloc */
void ktrace__utc_stamp(int64_t t, char *out, size_t len);
int64_t ktrace__counter_to_mono_ns(uint64_t c); /* via the newest anchor */
void ktrace__clock_reset(void);      /* fork child */

/* ---- function and name tables (funcs.c) -------------------------------- */
/* Event number for fn's entry (KTRACE_EV_ENTER_BASE + id), or 0 when fn has
 * no compact id (then use the full-address record). */
uint32_t ktrace__func_event(uintptr_t fn);
size_t ktrace__funcs_copy(struct ktrace_func_rec *dst, size_t max);
size_t ktrace__funcs_count(void);
/* Writer thread: the function table's pages that the functions in the
 * code [lo, hi) take their first slots in, touched (funcs.c). */
void ktrace__funcs_touch_code(uint64_t lo, uint64_t hi);
uint32_t ktrace__funcs_ids(void);
/* Name id for a user string (marks, spans, kinds); 0 when the table is full. */
uint32_t ktrace__name_id(const char *name, int kind);
size_t ktrace__names_serialize(void *dst, size_t cap, uint32_t *count);
const char *ktrace__name_text(uint32_t id);
/* Module map: note that addr was seen (rescans /proc/self/maps when addr is
 * in no known module), and serialize all modules ever seen. */
void ktrace__module_note(uintptr_t addr);
int ktrace__module_of(uintptr_t addr, uint64_t *start, uint64_t *offset, char *path,
                      size_t len);
size_t ktrace__modules_serialize(void *dst, size_t cap, uint32_t *count);
/* Writer thread: the BUILDIDS records of the first count modules. */
size_t ktrace__modules_buildids(struct ktrace_buildid_rec *dst, size_t max, uint32_t count);
int ktrace__funcs_init(void);
void ktrace__funcs_free(void);     /* start-up failed */
void ktrace__funcs_fork_child(void);

/* ---- threads (threads.c) ----------------------------------------------- */
int ktrace__threads_init(void);
uint32_t ktrace__thread_register(int32_t tid, uint64_t now);
/* Threads that exited before since (counter, 0 = none left out) are left
 * out and counted in *omitted. */
size_t ktrace__threads_copy(struct ktrace_thread_rec *dst, size_t max, uint64_t since,
                            uint32_t *omitted);
size_t ktrace__threads_count(void);
int32_t ktrace__thread_tid(uint32_t slot);   /* 0 if unknown */
/* The name live thread tid registered with: 1 if it is a registered one. */
int ktrace__thread_name_of(int32_t tid, char name[16]);
void ktrace__threads_fork_child(int32_t tid);

/* ---- config (config.c) ------------------------------------------------- */
struct kt_config {
	int enabled;                 /* KTRACE_ENABLE */
	char dir[4096];              /* KTRACE_DIR */
	uint32_t buffer_mb;          /* KTRACE_BUFFER_MB, per core */
	int signo;                   /* KTRACE_SIGNAL, 0 = none */
	uint64_t trigger_us;         /* KTRACE_TRIGGER_US, 0 = off */
	double trigger_pct;          /* KTRACE_TRIGGER_PCT, 0 = off */
	uint32_t trigger_min_samples;/* KTRACE_TRIGGER_MIN_SAMPLES */
	uint32_t trigger_delay_ms;   /* KTRACE_TRIGGER_DELAY_MS */
	uint32_t max_per_min;        /* KTRACE_MAX_SNAPSHOTS_PER_MIN (triggers) */
	uint32_t max_files_per_min;  /* KTRACE_MAX_FILES_PER_MIN, every path */
	uint32_t max_mb_per_min;     /* KTRACE_MAX_MB_PER_MIN, MiB, every path */
	int secure;                  /* AT_SECURE: nothing taken from the environment */
	int quiet;                   /* KTRACE_QUIET */
	int force_clock;             /* KTRACE_CLOCK: 0 auto, or a clock source */
	int no_rseq;                 /* KTRACE_RSEQ=0 forces the locked path */
	uint32_t window_s;           /* KTRACE_WINDOW_S: window the ring must hold, s */
	int filter;                  /* KTRACE_FILTER: 1 auto (default), 0 off */
	int cpu_pct;                 /* KTRACE_CPU_PCT: -1 auto (filter.c) */
	uint32_t filter_max_us;      /* KTRACE_FILTER_MAX_US: longest call a muted
	                                function may have made, us */
	char exclude[1024];          /* KTRACE_EXCLUDE: comma-separated globs */
	char include[1024];          /* KTRACE_INCLUDE: comma-separated globs */
	int keep_all;                /* KTRACE_KEEP=all: requests not held */
	double keep_pct;             /* KTRACE_KEEP_PCT: slower is slow (0 = off) */
	uint32_t keep_min_samples;   /* KTRACE_KEEP_MIN_SAMPLES */
	uint32_t sample_ms;          /* KTRACE_SAMPLE_MS: a typical sample per kind
	                                about this often (0 = none) */
	uint32_t hold_kb;            /* KTRACE_HOLD_KB: each thread's hold buffer */
	uint32_t gap_us;             /* KTRACE_GAP_US: a thread's time between its
	                                requests is held too, and kept when at
	                                least this long (0 = not held) */
	uint32_t trigger_on;         /* KTRACE_TRIGGER_ON: enum ktrace_trigger_on */
	int sched;                   /* KTRACE_SCHED: 1 auto (default), 0 off,
	                                2 on (even under a seccomp filter) */
};
extern struct kt_config ktrace__cfg;
/* A field that ktrace_setting() may change while other threads run:
 * relaxed, each is a free-standing value (dir goes through ktrace__cfg_dir). */
#define kt_load_cfg(field) __atomic_load_n(&ktrace__cfg.field, __ATOMIC_RELAXED)
/* Copy the snapshot directory ("" = none chosen, secure execution). */
void ktrace__cfg_dir(char *buf, size_t len);
/* Parse the environment into ktrace__cfg; complaints go to stderr. */
void ktrace__config_load(void);
/* Device, inode and size of an open fd (statx: GLIBC_2.28); -1 if closed. */
int ktrace__fd_stat(int fd, uint64_t *dev, uint64_t *ino, uint64_t *size);
/* Parse helpers, exposed for tests: 0 on success, -1 with *why set. */
int ktrace__parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int ktrace__parse_signal(const char *s, int *signo);
int ktrace__parse_bool(const char *s, int *out);

/* ---- snapshots (snapshot.c, signal.c, trigq.c, ratelimit.c, writer.c,
 *      snapfile.c; how they fit, and their lock order: snapshot.h) ------- */
/* Counter values bracketing snapshot writes, for triggers: a request that
 * overlapped one was slowed by it (on a busy or one-cpu machine the writer
 * competes for the cpu) and must not fire another.  busy_since is 0 when
 * no write is running. */
extern _Atomic uint64_t ktrace__snap_busy_since;
extern _Atomic uint64_t ktrace__snap_last_end;
int ktrace__snapshot_init(void);
void ktrace__snapshot_fork_child(void);
/* Start the writer if a fork child still needs one (cheap check). */
void ktrace__snapshot_ensure_writer(void);
void ktrace__snapshot_atexit(void);
/* ktrace_setting changed KTRACE_SIGNAL: move the handler. */
void ktrace__snapshot_signal_changed(void);
void ktrace__snapshot_signal_early(void);   /* start-up, right after the settings */
void ktrace__snapshot_signal_undo(void);    /* start-up failed after it */
struct kt_trigger_info;
/* Ask the writer thread for a snapshot after delay_ms; async-safe with
 * respect to application threads (no blocking). */
int ktrace__snapshot_request_trigger(const struct ktrace_trigger_rec *trig,
                                     uint32_t delay_ms);
/* Write a snapshot now (writer thread only; snapfile.c); 0 or KTRACE_E*. */
int ktrace__snapshot_write(const char *reason, const struct ktrace_trigger_rec *trig,
                           char *path_out, size_t path_len);
/* The writer thread's memory (snapfile.c): zeroed, from mmap, never malloc
 * (a malloc arena of its own would reserve 64 MiB of the program's address
 * space).  ktrace__warn_once: writer.c. */
void *ktrace__walloc(size_t bytes);
void ktrace__wfree(void *p);
/* qsort() without its malloc (sort.c): in place, not stable.  The writer
 * thread's sorts. */
void ktrace__sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
/* n arrays of sz[i] bytes in one mapping, each 64-byte aligned, into
 * *dst[i]; returns the whole (for ktrace__wfree) or NULL. */
void *ktrace__walloc_parts(int n, const size_t *sz, void **const *dst);
/* ktrace__warn_once's keys: a message is printed once per key.  Each
 * message has its own; one that names an errno is printed once per errno
 * (KT_WARN_ERRNO: its kind's range, errno 1-127; above, one key). */
enum kt_warn_key {
	KT_WARN_LEAN_WX = 1,       /* lean.c: code cannot be made writable */
	KT_WARN_LEAN_BOTH,         /* lean.c: both modes in one function */
	KT_WARN_LEAN_SANDBOX,      /* lean.c: a filter put on after start-up */
	KT_WARN_MLOCK,             /* memlock.c */
	KT_WARN_SIGNAL_TAKEN,      /* signal.c */
	KT_WARN_TRIGGER_RUN,       /* trigq.c: KTRACE_TRIGGER_ON=run falls back */
	KT_WARN_SECURE_NO_DIR,     /* snapfile.c */
	KT_WARN_RATELIMIT,         /* ratelimit.c */
	KT_WARN_NAMED              /* (the named keys end here) */
};
enum kt_warn_kind {   /* KT_WARN_ERRNO's first argument */
	KT_WARN_CREATE,            /* snapfile.c, per errno: a file not created */
	KT_WARN_WRITE,             /* ... not written whole */
	KT_WARN_PUBLISH,           /* ... not named */
	KT_WARN_KINDS
};
#define KT_WARN_KEYS (64 + KT_WARN_KINDS * 128)
_Static_assert(KT_WARN_NAMED <= 64, "the named keys fit below 64");
#define KT_WARN_ERRNO(kind, e) (64 + (kind) * 128 + ((e) > 0 && (e) < 128 ? (e) : 0))
void ktrace__warn_once(int key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* funcs.c, tests: the module scan's lock held as a scan would (on) or let
 * go; the waits for a scan given up so far. */
void ktrace__modules_test_hold(int on);
uint32_t ktrace__modules_test_timeouts(void);
uint32_t ktrace__funcs_test_probes(uintptr_t fn);   /* tests: slots a lookup of fn reads */
/* /proc/self/maps line by line, with system calls, and one line's
 * fields (funcs.c). */
int ktrace__maps_read(void (*fn)(const char *line, void *arg), void *arg, char *buf, size_t blen,
                      char *lbuf, size_t llen);
struct kt_maps_line {
	uint64_t start, end, offset;
	uint64_t dev;                /* major << 32 | minor */
	uint64_t ino;                /* 0: anonymous */
	char perms[4];               /* "r-xp" */
	const char *path;            /* in the line; NULL: none */
};
int ktrace__maps_parse(const char *l, struct kt_maps_line *m);
/* dl_iterate_phdr for ktrace's own calls (funcs.c), never across a fork:
 * glibc (2.36) does not reset its loader's dl_load_write_lock in a fork
 * child, so a fork while a thread is inside dl_iterate_phdr leaves the
 * child's locked for good, and the child's next dl_iterate_phdr or dlopen
 * of a new library (its own ktrace writer's, a name-service lookup's)
 * waits forever.  fork() waits for the calls made through this
 * (ktrace__phdr_atfork, registered first thing at init). */
struct dl_phdr_info;
int ktrace__phdr_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg);
void ktrace__phdr_atfork(void);
void ktrace__say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- triggers (trigger.c) ---------------------------------------------- */
int ktrace__trigger_init(void);
uint32_t ktrace__bucket_of(uint64_t v);     /* tests */
uint64_t ktrace__bucket_top(uint32_t b);    /* tests */

/* ---- window budget (filter.c, elfsym.c) -------------------------------- */
extern _Atomic uint32_t ktrace__mute_epoch;   /* grows when the mute set grows */
/* Slow path, before an event: adopt a newer mute set when no muted frame
 * is open (flushes the cache), and report muted calls. */
void ktrace__filter_adopt(struct kt_thread *t);
/* The muted calls t skipped since it last reported them (adopt, exit). */
void ktrace__filter_report(struct kt_thread *t);
/* KT_FC_* bits of compact event ev in the view of mute epoch 'epoch'. */
uint32_t ktrace__filter_flags(uint32_t ev, uint32_t epoch);
/* sandbox.c: a call a seccomp filter installed with TSYNC after start-up
 * may kill (mprotect, membarrier, madvise, sched_setaffinity, prctl) is
 * made inside ktrace__optional_begin() (0: not now, skip it) and
 * ktrace__optional_end(); ktrace__sandboxed(): such a filter is on. */
int ktrace__optional_begin(void);
void ktrace__optional_end(void);
int ktrace__sandboxed(void);
void ktrace__sandbox_fork_child(void);
/* lean.c: the code kept writable goes back to read+exec (before the filter). */
void ktrace__lean_sandbox(void);
/* sched.c: the Seccomp: mode of /proc/self/status (of the calling thread's
 * own with this_thread), -1 if it cannot be read. */
int ktrace__seccomp_mode(int this_thread);
/* on: read the calling thread's mode once, and answer it to every call
 * until ktrace__seccomp_hold(0) (start-up). */
void ktrace__seccomp_hold(int on);
/* The process's threads when start-up began, from the same read (sched.c);
 * 0 when unknown or outside start-up. */
int ktrace__held_threads(void);
/* Slow path: an exit of compact event ev, muted in t's view, with no more
 * skipped frames open than t->mlw: 1 = its entry was skipped (counted in
 * mexit), 0 = its entry was recorded before the mute (record the exit). */
int ktrace__filter_skip_exit(struct kt_thread *t, uint32_t ev);
/* funcs.c, before a new compact id is published: match the function's
 * name against KTRACE_EXCLUDE / KTRACE_INCLUDE. */
void ktrace__filter_new_func(uint32_t id, uintptr_t addr);
/* Writer thread, every loop: measure, decide (every ~100 ms, 10 ms at
 * first); lowers *wait_ns to the time until the next decision. */
void ktrace__filter_tick(int64_t *wait_ns);
/* Snapshot: the BUDGET section (ktrace__walloc'ed; caller frees), or NULL. */
void *ktrace__budget_serialize(size_t *len, uint32_t *count);
int ktrace__filter_on(void);
void ktrace__filter_mute_now(uintptr_t fn);   /* tests */
/* A core filled a block faster than the CPU budget allows: ask the writer
 * for a decision now (ring.c, after the core lock is released;
 * async-signal-safe). */
void ktrace__filter_hint(void);
int ktrace__filter_sample_test(const uint32_t *words, uint32_t nblocks, uint32_t id,
                               uint64_t max_ticks, uint64_t *longest, uint64_t *calls);
/* Name of the function at addr from its module's ELF symbol tables. */
int ktrace__sym_name(uintptr_t addr, char *buf, size_t len);
int ktrace__sym_name_test_scan(uintptr_t addr, char *buf, size_t len);   /* tests */

/* ---- lean mode (lean.c, x86-64) ---------------------------------------- */
/* Writer thread, every loop: patch the sites of functions muted or
 * unmuted since the last call. */
void ktrace__lean_tick(int64_t *wait_ns);
/* Writer thread: the lean tables' pages touched ahead of the program's
 * threads (TOUCHED); tables_only: only those made at init (the writer's
 * start). */
void ktrace__lean_touch(int tables_only);
uint32_t ktrace__lean_info_flags(void);   /* KTRACE_INFO_LEAN* */
int ktrace__lean_active(void);            /* a lean hook has run */
void ktrace__lean_init(void);             /* init, before the writer starts */
void ktrace__lean_atfork(void);           /* init: the patch lock across fork() */
int ktrace__lean_fn(uint32_t id);         /* compact id of a lean function */
int ktrace__lean_owns(uint64_t fn);       /* fn has the lean hooks too */
int ktrace__lean_record(struct ktrace_lean_rec *r);   /* LEAN section; 0: none */
/* Writer thread, before the epoch that mutes compact id is published:
 * starts the deadline of its learning, if unfinished (lean.c). */
void ktrace__lean_muting(uint32_t id);
/* The lean hooks behind the __fentry__ / __return__ trampolines: r is
 * the return address into the function, slot the address of its own
 * return address.  The fast ones (record.c) return 1 for the slow ones
 * (lean.c). */
int ktrace__lean_enter_fast(uint64_t r, uint64_t *slot);
extern _Atomic uint8_t ktrace__lean_skip;   /* tracing off: __fentry__ returns */
int ktrace__lean_exit_fast(uint64_t r, uint64_t *slot);
int ktrace__lean_exit_known(uint32_t ev, uint64_t site);   /* lean.c, LEARN_FAST */
int ktrace__lean_frameless_fast(uint64_t r, uint64_t *slot);   /* returns 1 */
void ktrace__lean_enter_slow(uint64_t r, uint64_t *slot);
void ktrace__lean_exit_slow(uint64_t r, uint64_t *slot);
void ktrace__lean_frameless(uint64_t r, uint64_t *slot);   /* record.c's asm */
/* Record event ev (| exit_flag) of fn from a slow path (record.c). */
void ktrace__record_func(struct kt_thread *t, uintptr_t fn, uint32_t ev, uint32_t exit_flag);
/* Tests: sites patched and failed since start, sites nop'ed now, patch
 * batches and the ns they took (wall time, mprotect to mprotect). */
void ktrace__lean_stats(uint64_t *patched, uint64_t *failed, uint64_t *nop_sites,
                        uint64_t *batches, uint64_t *ns);
void ktrace__lean_test_paths(int int3, uint64_t *whole, uint64_t *by_jump, uint64_t *by_ret,
                             uint64_t *by_int3);   /* tests */
void ktrace__lean_test_force(int mode);
uint64_t ktrace__lean_test_stubs(void);
void ktrace__lean_test_slow(uint64_t *in, uint64_t *out);
void ktrace__lean_test_nest(int delta);
uint32_t ktrace__lean_test_depth(void);
uint64_t ktrace__lean_test_callret(void);   /* exit sites out in call-ret form */
uint64_t ktrace__lean_test_early(void);   /* early passes (lean.c, EARLY) */
void ktrace__lean_init_undo(void);   /* init failed after ktrace__lean_init */

/* ---- scheduling (sched.c) --------------------------------------------- */
/* Open the context-switch events (before the writer thread exists). */
int ktrace__sched_init(void);
void ktrace__sched_fork_child(void);
void ktrace__sched_free(void);     /* start-up failed */
/* Writer thread: move the kernel's records into the window when due, and
 * shorten the writer's poll timeout to the next drain. */
void ktrace__sched_drain(void);
int64_t ktrace__sched_wait_ns(int64_t wait_ns);
uint32_t ktrace__sched_info_flags(void);  /* KTRACE_INFO_SCHED or 0 */
/* The SCHED section (drains first): ktrace__walloc'ed, *count records. */
void *ktrace__sched_serialize(size_t *len, uint32_t *count);
/* Writer thread (the window budget): of thread tid's time in the monotonic
 * interval [from_ns, to_ns], the ns it spent preempted; -1 when scheduling
 * is not recorded, or the interval is not fully covered by the window;
 * *npreempt = the preemptions, *blocked_ns = the ns it was blocked (off the
 * cpu not runnable: a sleep, a lock, I/O).  A block that began while ktrace
 * held the mapping lock counts as preempted, for a while
 * (ktrace__filter_own_until). */
int64_t ktrace__sched_preempted_ns(int32_t tid, int64_t from_ns, int64_t to_ns,
                                   uint32_t *npreempt, int64_t *blocked_ns);
/* The same for a request's trigger (more switches allowed). */
int64_t ktrace__sched_request_preempted_ns(int32_t tid, int64_t from_ns, int64_t to_ns,
                                           uint32_t *npreempt, int64_t *blocked_ns);

/* ---- mlockall (memlock.c) ---------------------------------------------- */
/* Start-up: KTRACE_EMEMLOCK when the program calls mlockall and its
 * RLIMIT_MEMLOCK has no room for ktrace's buffers (said on stderr). */
int ktrace__memlock_check(void);
extern _Atomic int ktrace__mlock_future;   /* mlockall(MCL_FUTURE) in force */
void ktrace__funcs_unlock(void);            /* funcs.c: munlock the tables */
void ktrace__sched_unlock(void);            /* sched.c: munlock the windows */

/* ---- vfork (vfork.c, x86-64) ------------------------------------------- */
void ktrace__vfork_enter(void);          /* before the system call */
long ktrace__vfork_parent(long r);       /* after it, in the parent: errno */

/* ---- init (init.c) ----------------------------------------------------- */
/* Initialise the library if not done; returns 1 if tracing is on. */
int ktrace__ensure_init(void);
/* Why tracing is off: KTRACE_EDISABLED (KTRACE_ENABLE=0) or the error
 * that stopped start-up. */
int ktrace__off_reason(void);

#pragma GCC visibility pop

#endif /* KTRACE_INTERNAL_H */
