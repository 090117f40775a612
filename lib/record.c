/*
 * record.c - the hot path: -finstrument-functions hooks and the manual
 * event API.  Keep this file small; read its assembly after every change
 * (cmake --build build --target ktrace-asm).
 *
 * One event, in the common case, is:
 *
 *   A. look fn up in the thread's direct-mapped cache of (address, event)
 *      pairs (one 64-bit load: a signal handler that refills the entry
 *      between our load and use cannot tear it);
 *   B. inside one restartable sequence (rseq) critical section:
 *        B1 load this thread's cpu id from its rseq area; a different
 *           cpu than last time starts a new segment (slow path); since
 *           last_cpu is only ever set to a core the slow path locked,
 *           this also bounds the cpu id (-1/-2 sentinels, hotplug),
 *        B2 load that core's state word (pos | owner),
 *        B3 check owner == this thread's slot (and so not locked),
 *        B4 check the block has room and no full timestamp is due,
 *        B5 rdtsc, build the word, store it at ring[pos],
 *        B6 commit: store state with pos + 1 (the last instruction).
 *
 * If the thread is preempted, migrated or interrupted by a signal anywhere
 * between B1 and B6, the kernel moves it to the abort handler, which starts
 * B over: the check of B3 and the reservation of B6 can never be separated
 * by another thread on the same core, the timestamp is read after any
 * preemption (no late stores), and a traced signal handler that interrupts
 * B runs to completion before B restarts.  No locked instruction is needed.
 * Everything else (new thread, new function, block full, timestamp due,
 * another thread owns the stream, core locked) goes to ktrace__slow_func.
 */
#include "internal.h"

#include <sched.h>
#include "rseq.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

_Static_assert(offsetof(struct kt_core, state) == 0, "asm reads state at 0");
_Static_assert(offsetof(struct kt_core, deadline) == 8, "asm reads deadline at 8");
_Static_assert(offsetof(struct kt_core, ring) == 16, "asm reads ring at 16");
_Static_assert(sizeof(struct kt_core) == 128, "asm scales cpu by 128");
_Static_assert(KTRACE_BLOCK_WORDS == 1024, "asm tests pos & 1023");

/* Static TLS: one pointer (internal.h says why).  The initial value is
 * in the TLS image, so every new thread starts on ktrace__idle. */
struct kt_thread ktrace__idle __attribute__((aligned(KT_CACHELINE)));
__thread struct kt_thread *ktrace__tp __attribute__((tls_model("initial-exec"))) = &ktrace__idle;

#if defined(__x86_64__)
/* Arm the section, then B1..B3 (see the file comment): r8 = &cores[cpu],
 * rcx = its state, r9 = pos.  Operands: rs, lastcpu, key; label slow.
 * ktrace__g's cores and ring_mask are read by name (hidden, so
 * rip-relative in the shared library too): as "m" operands GCC kept
 * their address in a callee-saved register, a push and a pop an event.
 * Comparing the cpu with last_cpu (only ever a core the slow path
 * locked) also bounds it: the -1/-2 "not registered" ids never match. */
#define KT_RSEQ_ENTER                                                          \
	KT_RSEQ_ARM                                                            \
	KT_RSEQ_BODY

/* B1..B3 alone, for a section that reads the TSC first. */
#define KT_RSEQ_BODY                                                           \
	"movl 4(%[rs]), %%r8d\n\t"          /* B1 cpu */                       \
	"cmpl %[lastcpu], %%r8d\n\t"        /* migrated: new segment */        \
	"jne %l[slow]\n\t"                                                   \
	"shlq $7, %%r8\n\t"                                                  \
	"addq ktrace__g(%%rip), %%r8\n\t"   /* r8 = &cores[cpu] */             \
	"movq (%%r8), %%rcx\n\t"            /* B2 state */                     \
	"cmpl %[key], %%ecx\n\t"            /* B3 owner == slot, unlocked */   \
	"jne %l[slow]\n\t"                                                   \
	"movq %%rcx, %%r9\n\t"                                               \
	"shrq $32, %%r9\n\t"                /* r9 = pos */
#endif

/*
 * Steps B1..B6 above.  Returns 1 when the record is committed, 0 when the
 * slow path must take it.  rs is the thread's struct rseq (cpu_id at 4,
 * rseq_cs at 8).
 */
static inline __attribute__((always_inline)) KT_NOINSTR int
append1(struct kt_thread *t, void *rs, uint32_t ev)
{
#if defined(__x86_64__)
again:
	asm goto(KT_RSEQ_TABLE
		 KT_RSEQ_ARM_TEST
		 "rdtsc\n\t"                     /* B5 first: B1..B4 overlap it */
		 KT_RSEQ_BODY
		 "testl $1023, %%r9d\n\t"        /* B4 block full? */
		 "jz %l[slow]\n\t"
		 "shlq $32, %%rdx\n\t"
		 "orq %%rax, %%rdx\n\t"
		 "cmpq 8(%%r8), %%rdx\n\t"       /* B4 full timestamp due? */
		 "jae %l[slow]\n\t"
		 "shrq $8, %%rdx\n\t"            /* KT_TSC_SHIFT */
		 "shll $12, %%edx\n\t"
		 "orl %[ev], %%edx\n\t"
		 "andl ktrace__g+12(%%rip), %%r9d\n\t"   /* ring_mask */
		 "movq 16(%%r8), %%rax\n\t"      /* ring */
		 "movl %%edx, (%%rax,%%r9,4)\n\t"
		 "movabsq $0x100000000, %%rax\n\t"
		 "addq %%rax, %%rcx\n\t"         /* pos + 1 in the high half */
		 "movq %%rcx, (%%r8)\n\t"        /* B6 commit pos + 1 */
		 "2:\n\t"
		 KT_RSEQ_ABORT_TEST(abort)
		 :
		 : [rs] "r"(rs), [key] "m"(t->key), [lastcpu] "m"(t->last_cpu), [ev] "r"(ev)
		 : "memory", "cc", "rax", "rcx", "rdx", "r8", "r9"
		 : slow, abort);
	return 1;
abort:
	goto again;
slow:
	return 0;
#else
	(void)t;
	(void)rs;
	(void)ev;
	return 0;
#endif
}

/*
 * The same critical section for a 4-word extended record (header with N =
 * 3, then w1..w3): REQ_BEGIN/REQ_END and MARK.  The payload is stored
 * before the header, all before the commit; the block must have room for
 * all four words (used <= 1020), so a record never straddles a block.
 */
static inline __attribute__((always_inline)) KT_NOINSTR int
append4(struct kt_thread *t, void *rs, uint32_t w1, uint32_t w2, uint32_t w3)
{
#if defined(__x86_64__)
again:
	asm goto(KT_RSEQ_TABLE
		 KT_RSEQ_ENTER
		 "movl %%r9d, %%eax\n\t"
		 "andl $1023, %%eax\n\t"        /* used */
		 "jz %l[slow]\n\t"
		 "cmpl $1020, %%eax\n\t"
		 "ja %l[slow]\n\t"
		 "rdtsc\n\t"
		 "shlq $32, %%rdx\n\t"
		 "orq %%rax, %%rdx\n\t"
		 "cmpq 8(%%r8), %%rdx\n\t"
		 "jae %l[slow]\n\t"
		 "shrq $8, %%rdx\n\t"
		 "shll $12, %%edx\n\t"
		 "orl $3, %%edx\n\t"            /* N = 3 payload words */
		 "andl ktrace__g+12(%%rip), %%r9d\n\t"   /* ring_mask */
		 "movq 16(%%r8), %%rax\n\t"
		 "movl %[w1], 4(%%rax,%%r9,4)\n\t"
		 "movl %[w2], 8(%%rax,%%r9,4)\n\t"
		 "movl %[w3], 12(%%rax,%%r9,4)\n\t"
		 "movl %%edx, (%%rax,%%r9,4)\n\t"
		 "movabsq $0x400000000, %%rax\n\t"
		 "addq %%rax, %%rcx\n\t"         /* pos + 4 */
		 "movq %%rcx, (%%r8)\n\t"        /* commit */
		 "2:\n\t"
		 KT_RSEQ_ABORT(abort)
		 :
		 : [rs] "r"(rs), [key] "m"(t->key), [lastcpu] "m"(t->last_cpu),
		   [w1] "r"(w1), [w2] "r"(w2), [w3] "r"(w3)
		 : "memory", "cc", "rax", "rcx", "rdx", "r8", "r9"
		 : slow, abort);
	return 1;
abort:
	goto again;
slow:
	return 0;
#else
	(void)t;
	(void)rs;
	(void)w1;
	(void)w2;
	(void)w3;
	return 0;
#endif
}

_Static_assert(offsetof(struct kt_thread, hold) == 48, "hold asm layout");
_Static_assert(offsetof(struct kt_thread, hold_pos) == 56, "hold asm layout");
_Static_assert(offsetof(struct kt_thread, hold_lim) == 60, "hold asm layout");
_Static_assert(offsetof(struct kt_thread, hold_deadline) == 64, "hold asm layout");

/*
 * H. One event into the thread's hold buffer while it runs a request
 * (request.c): the same record, into a per-thread array instead of the
 * core's ring.  No other thread touches the buffer, but a traced signal
 * handler may interrupt us and append too, so the append is an rseq
 * critical section like B: a signal (or a preemption) between the load of
 * hold_pos and the commit store restarts it, after the handler's records.
 *   H1 load hold_pos, check it is below hold_lim (else slow: spill),
 *   H2 rdtsc, check the hold's TSC deadline (else slow: TSC record),
 *   H3 store the word at hold[pos], H4 commit hold_pos + 1.
 */
static inline __attribute__((always_inline)) KT_NOINSTR int
append_hold(struct kt_thread *t, void *rs, uint32_t ev)
{
#if defined(__x86_64__)
again:
	asm goto(KT_RSEQ_TABLE
		 KT_RSEQ_ARM_TEST
		 "movl %[pos], %%r9d\n\t"      /* H1 */
		 "cmpl %[lim], %%r9d\n\t"
		 "jae %l[slow]\n\t"
		 "rdtsc\n\t"                   /* H2 */
		 "shlq $32, %%rdx\n\t"
		 "orq %%rax, %%rdx\n\t"
		 "cmpq %[dl], %%rdx\n\t"
		 "jae %l[slow]\n\t"
		 "shrq $8, %%rdx\n\t"          /* KT_TSC_SHIFT */
		 "shll $12, %%edx\n\t"
		 "orl %[ev], %%edx\n\t"
		 "movq %[buf], %%rax\n\t"
		 "movl %%edx, (%%rax,%%r9,4)\n\t" /* H3 */
		 "addl $1, %%r9d\n\t"
		 "movl %%r9d, %[pos]\n\t"      /* H4 commit */
		 "2:\n\t"
		 KT_RSEQ_ABORT_TEST(abort)
		 :
		 : [rs] "r"(rs), [pos] "m"(t->hold_pos), [lim] "m"(t->hold_lim),
		   [dl] "m"(t->hold_deadline), [buf] "m"(t->hold), [ev] "r"(ev)
		 : "memory", "cc", "rax", "rdx", "r9"
		 : slow, abort);
	return 1;
abort:
	goto again;
slow:
	return 0;
#else
	(void)t;
	(void)rs;
	(void)ev;
	return 0;
#endif
}

_Static_assert(KT_TSC_SHIFT == 8, "the asm above shifts by 8: \"shrq $8\" (KT_TSC_SHIFT)");

KT_NOINSTR int ktrace__try_fast(struct kt_thread *t, uint32_t ev)
{
	void *rs = t->rseq;
	if (t->hold)
		return rs != NULL && append_hold(t, rs, ev);
	return rs != NULL && append1(t, rs, ev);
}


/*
 * A cache hit whose entry carries KT_FC_SKIP is a function this thread
 * does not record (filter.c):
 *   - KT_FC_EXCLUDED (KTRACE_EXCLUDE): never recorded, entry nor exit;
 *   - KT_FC_MUTED (the window budget): the entry is skipped and counted in
 *     ment; an exit is skipped, and counted in mexit, while more skipped
 *     frames are open (ment - mexit) than mlw, the low-water mark of the
 *     newest adoption that found skipped frames open: such a frame was
 *     opened after that adoption, so under the current view, and so is
 *     this exit's own frame (every frame opened after it has closed).
 *     Otherwise the slow path decides exactly (ktrace__filter_skip_exit,
 *     filter.c says why it is exact): skipped, or entered before the mute
 *     and recorded.  Without such an adoption mlw is 0: "skip while a
 *     skipped frame is open".
 * No rseq is needed: both counters are this thread's, and each update is
 * one read-modify-write instruction on x86 (see the asm), so a traced
 * signal handler runs before or after it, never inside it.
 */
/* *p += v as one instruction (see hook()). */
static inline __attribute__((always_inline)) KT_NOINSTR void local_add(uint64_t *p, uint64_t v)
{
#if defined(__x86_64__)
	asm("addq %1, %0" : "+m"(*p) : "er"(v) : "cc");
#else
	*p += v;
#endif
}

/*
 * A cache hit that is recorded, for both hooks: one copy of append1 and
 * append_hold, so one rseq descriptor each, which stays armed from one
 * event to the next (KT_RSEQ_ARM_TEST): with a copy inlined in each hook,
 * an entry and an exit wrote rseq_cs alternately, every event.  The
 * hooks jump here (a tail call) with the entry e they found; the muted
 * path stays inlined in each.
 */
static KT_NOINLINE KT_NOINSTR void record_hit(struct kt_thread *t, void *fn, uint64_t e,
                                              uint32_t exit_flag)
{
	void *rs = t->rseq;

	if (KT_LIKELY(rs != NULL)) {
		uint32_t ev = ((uint32_t)e & KTRACE_EVENT_MASK) | exit_flag;
		/* The ring's path stays the straight line (programs without
		 * requests); a held append costs a taken branch more. */
		if (KT_LIKELY(t->hold == NULL)) {
			if (KT_LIKELY(append1(t, rs, ev)))
				return;
		} else if (KT_LIKELY(append_hold(t, rs, ev))) {
			return;
		}
		/* exit_flag again from ev: one register fewer live across
		 * the asm (no push and pop of rbx) */
		ktrace__slow_func(fn, ev & KTRACE_EV_EXIT_FLAG);
		return;
	}
	ktrace__slow_func(fn, exit_flag);
}

static inline __attribute__((always_inline)) KT_NOINSTR void
hook(void *fn, uint32_t exit_flag)
{
	struct kt_thread *t = ktrace__tp;   /* ktrace__idle: every lookup misses */
	uintptr_t a = (uintptr_t)fn;
	uint64_t e = t->fcache[KT_FC_SLOT(a)];   /* A */

	if (KT_LIKELY((e >> 16) == a)) {
		/* Not marked unlikely: with the window budget on, most calls of
		 * a call-heavy program take this branch (muted). */
		if (e & KT_FC_SKIP) {
			if (!exit_flag) {
				/* +1 when muted, +0 when excluded: no branch */
				local_add(&t->ment, (e >> 14) & 1);
				return;
			}
			if (e & KT_FC_EXCLUDED)
				return;
			if (t->ment - t->mexit > t->mlw) {
				local_add(&t->mexit, 1);
				return;
			}
			/* the slow path decides (skip_exit) */
		} else {
			record_hit(t, fn, e, exit_flag);
			return;
		}
	}
	ktrace__slow_func(fn, exit_flag);
}

__attribute__((visibility("default"))) KT_NOINSTR void
__cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	hook(fn, 0);
}

__attribute__((visibility("default"))) KT_NOINSTR void
__cyg_profile_func_exit(void *fn, void *site)
{
	(void)site;
	hook(fn, KTRACE_EV_EXIT_FLAG);
}

/* ---- lean mode: __fentry__ / __return__ (x86-64) ------------------------- */

/*
 * Code built with -p -mfentry -minstrument-return=call calls __fentry__
 * as a function's first instruction and __return__ just before each of
 * its ret instructions, after inlining (lean.c has the whole story).  At
 * both, [rsp] is the return address into the function (the site's end, r)
 * and [rsp + 8] its own return address; that slot's address is the
 * frame's identity, the same at entry and at exit.
 *
 * L1. entry: look r up in the cache (keyed by r: the function's address
 *     costs a decode, done once in the slow path); a muted one returns;
 *     a frame left on the thread's lean stack at or below this slot
 *     (longjmp, exception) goes to the slow path, which closes it first;
 *     B1..B6 record the entry; then the frame is pushed.
 * L2. exit: the innermost lean frame is this one (same slot): record the
 *     exit, pop.  It is above this slot: this call's entry was not recorded
 *     (muted, excluded, learning): nothing to do.
 * The common case of each (a cached, recorded entry; an exit whose frame
 * is the innermost; the block, or the request's hold buffer, has room)
 * runs in the hooks' own assembly below, before any register but the
 * five it uses is saved (KT_FENTRY_PRE, KT_RETURN_PRE).  Everything else
 * goes on to the trampolines, which save the general argument registers
 * and call the two C functions here; they decide all the cases again and return 1
 * for the slow path, for which the trampolines then save the vector
 * argument (or return value) registers and call lean.c.  The C fast
 * paths must not touch those: general registers only.
 */
#if defined(__x86_64__)
/* No vector register may be touched here (the trampolines save them only
 * for the slow path): word stores (never merged into vector stores), and
 * the tests check the assembly (tests/check_lean_gpr.sh). */
#define KT_GPR
KT_NOINSTR KT_GPR int ktrace__lean_enter_fast(uint64_t r, uint64_t *slot)
{
	struct kt_thread *t = ktrace__tp;
	uint64_t e = t->fcache[KT_FC_LEAN_SLOT(r)];   /* A */
	uint32_t n = t->lsp, ev;
	void *rs;

	if (KT_UNLIKELY((e >> 16) != r)) {
		/* not in its first slot: the second (lean.c, TWO_WAYS) */
		e = t->fcache[KT_FC_LEAN_SLOT2(r)];
		if ((e >> 16) != r)   /* a miss; tracing off: nothing to do */
			return kt_load(&ktrace__g.state, relaxed) != KT_OFF;
	}
	if (e & (KT_FC_SKIP | KT_FC_LEARN)) {
		if (e & KT_FC_LEARN)
			return 1;
		/* muted, not patched out yet (or W^X): counted as the asm does */
		__atomic_store_n(&t->lskip, t->lskip + ((e >> 14) & 1), __ATOMIC_RELAXED);
		return 0;
	}
	if (KT_UNLIKELY(n >= KT_LEAN_DEPTH || (n && t->lstk[n - 1].slot <= (uint64_t)slot)))
		return 1;
	if (KT_UNLIKELY((rs = t->rseq) == NULL))
		return 1;
	ev = (uint32_t)e & KTRACE_EVENT_MASK;
	if (KT_LIKELY(t->hold == NULL)) {
		if (KT_UNLIKELY(!append1(t, rs, ev)))
			return 1;
	} else if (KT_UNLIKELY(!append_hold(t, rs, ev))) {
		return 1;
	}
	ktrace__lframe_push(t, n, (uint64_t)slot, r, ev, 0);
	/* a handler in between recomputes it at its last pop */
	__atomic_store_n(&t->ltop8, (uint64_t)slot - 8, __ATOMIC_RELAXED);
	return 0;
}

KT_NOINSTR KT_GPR int ktrace__lean_exit_fast(uint64_t r, uint64_t *slot)
{
	struct kt_thread *t = ktrace__tp;
	uint32_t n = t->lsp, ev;
	struct kt_lframe *f;
	void *rs;

	(void)r;
	if (n == 0)
		return 0;
	f = &t->lstk[n - 1];
	if (f->slot > (uint64_t)slot)
		return 0;   /* this call's entry was not recorded */
	if (KT_UNLIKELY(f->slot != (uint64_t)slot || f->ev == 0 || (rs = t->rseq) == NULL))
		return 1;
	if (KT_UNLIKELY(f->flags)) {
		/* a learning call's exit through a site learned already:
		 * nothing to learn (lean.c, LEARN_FAST); a skipped entry's
		 * frame is only popped */
		if ((f->flags & ~KT_LF_SKIP) != KT_LF_LEARN || !ktrace__lean_exit_known(f->ev, r - 5))
			return 1;
		if (f->flags & KT_LF_SKIP)
			goto pop;
	}
	ev = f->ev | KTRACE_EV_EXIT_FLAG;
	if (KT_LIKELY(t->hold == NULL)) {
		if (KT_UNLIKELY(!append1(t, rs, ev)))
			return 1;
	} else if (KT_UNLIKELY(!append_hold(t, rs, ev))) {
		return 1;
	}
pop:
	__atomic_store_n(&t->lsp, n - 1, __ATOMIC_RELAXED);
	__asm__ volatile("" ::: "memory");
	__atomic_store_n(&t->ltop8, n > 1 ? t->lstk[n - 2].slot - 8 : ~0ull, __ATOMIC_RELAXED);
	return 0;
}


/*
 * The trampolines.  At a function's entry the argument registers are live
 * (rdi, rsi, rdx, rcx, r8, r9, rax for varargs, r10 for a static chain,
 * xmm0-7); before a ret the return registers (rax, rdx, xmm0, xmm1), and
 * before a sibling call ("call __return__; jmp f") the next call's
 * arguments: both save the same set.  x87 st0/st1 no hook code touches.
 * The fast path uses general registers only, so the vector registers are
 * saved only around the slow path.
 */
#define KT_LEAN_TRAMPOLINE(name, pre, fast, slow)                              \
	".globl " name "\n"                                                    \
	".type " name ", @function\n"                                          \
	name ":\n\t"                                                           \
	pre                                                                    \
	"pushq %rbp\n\t"                                                       \
	"movq %rsp, %rbp\n\t"            /* 8(%rbp) = r, 16(%rbp) = slot */   \
	"andq $-16, %rsp\n\t"            /* __fentry__: before the prologue */ \
	"pushq %rdi\n\tpushq %rsi\n\tpushq %rdx\n\tpushq %rcx\n\t"             \
	"pushq %r8\n\tpushq %r9\n\tpushq %rax\n\tpushq %r10\n\t"               \
	"movq 8(%rbp), %rdi\n\t"                                               \
	"leaq 16(%rbp), %rsi\n\t"                                              \
	"call " fast "\n\t"                                                    \
	"testl %eax, %eax\n\t"                                                 \
	"jnz 1f\n"                                                             \
	"2:\n\t"                                                               \
	"popq %r10\n\tpopq %rax\n\tpopq %r9\n\tpopq %r8\n\t"                   \
	"popq %rcx\n\tpopq %rdx\n\tpopq %rsi\n\tpopq %rdi\n\t"                 \
	"leave\n\t"                                                            \
	"ret\n"                                                                \
	"1:\n\t"                                                               \
	"subq $128, %rsp\n\t"                                                  \
	"movdqu %xmm0, 0(%rsp)\n\tmovdqu %xmm1, 16(%rsp)\n\t"                  \
	"movdqu %xmm2, 32(%rsp)\n\tmovdqu %xmm3, 48(%rsp)\n\t"                 \
	"movdqu %xmm4, 64(%rsp)\n\tmovdqu %xmm5, 80(%rsp)\n\t"                 \
	"movdqu %xmm6, 96(%rsp)\n\tmovdqu %xmm7, 112(%rsp)\n\t"                \
	"movq 8(%rbp), %rdi\n\t"                                               \
	"leaq 16(%rbp), %rsi\n\t"                                              \
	"call " slow "\n\t"                                                    \
	"movdqu 0(%rsp), %xmm0\n\tmovdqu 16(%rsp), %xmm1\n\t"                  \
	"movdqu 32(%rsp), %xmm2\n\tmovdqu 48(%rsp), %xmm3\n\t"                 \
	"movdqu 64(%rsp), %xmm4\n\tmovdqu 80(%rsp), %xmm5\n\t"                 \
	"movdqu 96(%rsp), %xmm6\n\tmovdqu 112(%rsp), %xmm7\n\t"                \
	"addq $128, %rsp\n\t"                                                  \
	"jmp 2b\n"                                                             \
	".size " name ", .-" name "\n"

/* L2's first test in three instructions, before any register is saved:
 * the innermost recorded frame is above this one (ltop8 > rsp: its slot
 * above rsp + 8, or no frame), so this exit's entry was not recorded: a
 * muted function whose exit site is still a call.  r11 is free at every
 * call site.  When the thread's countdown nfl reaches 0 (about every
 * KT_FL_EVERY-th such return, at random: a loop of two frameless returns
 * would otherwise see the same one sampled every time), the return goes
 * on to ktrace__lean_frameless (lean.c), which learns the exit site if
 * the function is muted: an exit its first calls never took (SQLite's
 * short run made 1.4 M frameless returns, 0.55 M at one exit of
 * sqlite3VdbeSerialGet; Lua's 2.5 M).  Otherwise L2 in assembly (the
 * innermost frame is this one, recorded: its exit, the pop), else the
 * trampoline.  The entry's asm uses ltop8 too, for "a frame left at or
 * below this slot": ltop8 <= slot - 8. */
#define KT_LTOP8_OFF "16784"
#define KT_NFL_OFF "16796"
_Static_assert(offsetof(struct kt_thread, ltop8) == 16784, "asm reads ltop8 at 16784");
_Static_assert(offsetof(struct kt_thread, nfl) == 16796, "asm counts nfl at 16796");
#define KT_HOLD_OFF "48"
#define KT_HOLD_POS_OFF "56"
#define KT_HOLD_LIM_OFF "60"
#define KT_HOLD_DL_OFF "64"
#define KT_LSP_OFF "16792"
#define KT_LSKIP_OFF "22960"
_Static_assert(offsetof(struct kt_thread, lskip) == 22960, "asm counts lskip at 22960");
#define KT_LSTK_OFF "16800"
#define KT_LEAN_DEPTH_S "256"
_Static_assert(offsetof(struct kt_thread, rseq) == 0 && offsetof(struct kt_thread, key) == 8 &&
               offsetof(struct kt_thread, last_cpu) == 12, "lean asm reads them at 0, 8, 12");
_Static_assert(offsetof(struct kt_thread, lsp) == 16792, "asm reads lsp at 16792");
_Static_assert(offsetof(struct kt_thread, lstk) == 16800, "asm reads lstk at 16800");
_Static_assert(sizeof(struct kt_lframe) == 24 && offsetof(struct kt_lframe, fn) == 8 &&
               offsetof(struct kt_lframe, ev) == 16 && offsetof(struct kt_lframe, flags) == 20,
               "asm scales lean frames by 24 and reads ev, flags at 16, 20");
_Static_assert(KT_LEAN_DEPTH == 256 && KTRACE_EVENT_MASK == 0xfff && KTRACE_EV_EXIT_FLAG == 0x800,
               "the lean asm has them as constants");
_Static_assert(offsetof(struct kt_globals, cores) == 0 && offsetof(struct kt_globals, ring_mask) == 12,
               "asm reads ktrace__g.cores at 0, ring_mask at 12");

/*
 * L1 and L2 in assembly, for the common case: a recorded entry, an exit
 * whose frame is the innermost, into the core's ring or, while the
 * thread runs a request, its hold buffer (KT_LEAN_HOLD).  The
 * trampolines' C fast paths above do the same with the eight argument
 * registers saved and a call; this saves the five it uses.  Anything
 * else (the lean stack full or holding a frame left by a longjmp, no
 * rseq, the core's block or the hold buffer full, a full timestamp due,
 * another cpu) goes on to the trampoline, before the commit, and the C
 * path decides it again.
 *
 * KT_LEAN_APPEND(tag, slow) is append1 (B1..B6) with t in r11 and ev in
 * r8d, both inputs of every restart: an abort (a signal, a preemption)
 * goes back to the arming, so nothing in the section may write them.
 * rcx = the rseq area, then the state; r9 = &cores[cpu]; rax, rdx = the
 * TSC, the word built in edx.  The TSC is read first: the checks after
 * it overlap its latency.
 *
 * One section for both hooks ("la", in __fentry__; __return__ jumps to
 * it and r8d's exit flag, 0x800, sends it back), one for the hold buffer
 * ("lh"), so that rseq_cs is written only when it does not already point
 * at the section's descriptor: the kernel clears it whenever it finds
 * the thread outside the section (a preemption, a signal), and the next
 * hook writes it again.  The test is the section's first instruction, so
 * an abort or a clearing after it restarts at the arming; the write is
 * out of the section, and goes back to the test.  Writing it every time,
 * alternating an entry's descriptor and an exit's, cost SQLite's short
 * run (KTRACE_FILTER=off) 6-8 % of its time; the test costs nothing
 * measurable.
 */
/* The parts of a lean hook's rseq section that KT_LEAN_APPEND and
 * KT_LEAN_HOLD share: its descriptor (start, length, abort), the arming
 * (t in r11: rcx = its rseq area, rax = the descriptor), the TSC read
 * first; and its end, with the abort handler after the signature, which
 * restarts at the arming, and the write of rseq_cs. */
#define KT_LEAN_RSEQ_BEGIN(tag, slow)                                          \
	".pushsection __rseq_cs, \"aw\"\n\t"                                   \
	".balign 32\n"                                                         \
	".Lkt_" tag "_cs:\n\t"                                                 \
	".long 0x0, 0x0\n\t"                                                   \
	".quad .Lkt_" tag "_start, (.Lkt_" tag "_end - .Lkt_" tag "_start), .Lkt_" tag "_abort\n\t" \
	".popsection\n\t"                                                      \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"                         \
	".quad .Lkt_" tag "_cs\n\t"                                            \
	".popsection\n"                                                        \
	".Lkt_" tag "_arm:\n\t"                                                \
	"movq 0(%r11), %rcx\n\t"                /* t->rseq */                  \
	"testq %rcx, %rcx\n\t"                                                 \
	"jz " slow "\n\t"                                                      \
	"leaq .Lkt_" tag "_cs(%rip), %rax\n"                                   \
	".Lkt_" tag "_start:\n\t"                                              \
	"cmpq %rax, 8(%rcx)\n\t"                /* armed: rseq_cs = &desc? */  \
	"jne .Lkt_" tag "_store\n\t"                                          \
	"rdtsc\n\t"

/* The section's end; after the signature, its abort handler (restart at
 * the arming) and its store of rseq_cs (out of the section, then back to
 * its start: the test above sees it). */
#define KT_LEAN_RSEQ_END(tag)                                                  \
	".Lkt_" tag "_end:\n\t"                                                \
	".pushsection __rseq_failure, \"ax\"\n\t"                              \
	KT_RSEQ_SIGNATURE                                                      \
	".Lkt_" tag "_abort:\n\t"                                              \
	"jmp .Lkt_" tag "_arm\n"                                               \
	".Lkt_" tag "_store:\n\t"                                              \
	"movq %rax, 8(%rcx)\n\t"                /* rseq->rseq_cs = &desc */    \
	"jmp .Lkt_" tag "_start\n\t"                                          \
	".popsection\n\t"

#define KT_LEAN_SAVE "pushq %rax\n\tpushq %rcx\n\tpushq %rdx\n\tpushq %r8\n\tpushq %r9\n\t"
#define KT_LEAN_RESTORE "popq %r9\n\tpopq %r8\n\tpopq %rdx\n\tpopq %rcx\n\tpopq %rax\n\t"
#define KT_LEAN_APPEND(tag, slow)                                              \
	KT_LEAN_RSEQ_BEGIN(tag, slow)           /* B5 first: the rest */       \
	"movl 4(%rcx), %r9d\n\t"                /* B1 cpu, overlaps it */      \
	"cmpl 12(%r11), %r9d\n\t"               /* last_cpu */                 \
	"jne " slow "\n\t"                                                     \
	"shlq $7, %r9\n\t"                                                     \
	"addq ktrace__g(%rip), %r9\n\t"         /* &cores[cpu] */              \
	"movq (%r9), %rcx\n\t"                  /* B2 state */                 \
	"cmpl 8(%r11), %ecx\n\t"                /* B3 owner == key */          \
	"jne " slow "\n\t"                                                     \
	"testl $1023, 4(%r9)\n\t"               /* B4 block full? (pos) */     \
	"jz " slow "\n\t"                                                      \
	"shlq $32, %rdx\n\t"                                                   \
	"orq %rax, %rdx\n\t"                                                   \
	"cmpq 8(%r9), %rdx\n\t"                 /* full timestamp due? */      \
	"jae " slow "\n\t"                                                     \
	"shrq $8, %rdx\n\t"                     /* KT_TSC_SHIFT */             \
	"shll $12, %edx\n\t"                                                   \
	"orl %r8d, %edx\n\t"                                                   \
	"movl 4(%r9), %eax\n\t"                                                \
	"andl ktrace__g+12(%rip), %eax\n\t"     /* pos & ring_mask */          \
	"shlq $2, %rax\n\t"                     /* (r8, an input of a */       \
	"addq 16(%r9), %rax\n\t"                /* restart, stays ev) */       \
	"movl %edx, (%rax)\n\t"                 /* ring[pos] */                \
	"movabsq $0x100000000, %rax\n\t"                                       \
	"addq %rax, %rcx\n\t"                                                  \
	"movq %rcx, (%r9)\n"                    /* B6 commit pos + 1 */        \
	KT_LEAN_RSEQ_END(tag)

/* The same into the thread's hold buffer while it runs a request
 * (append_hold, H1..H4): t in r11, ev in r8d, both inputs of a restart;
 * r9 = hold_pos, rax, rdx = the TSC, the word built in edx. */
#define KT_LEAN_HOLD(tag, slow)                                                \
	KT_LEAN_RSEQ_BEGIN(tag, slow)                                          \
	"movl " KT_HOLD_POS_OFF "(%r11), %r9d\n\t"     /* H1 */                \
	"cmpl " KT_HOLD_LIM_OFF "(%r11), %r9d\n\t"                             \
	"jae " slow "\n\t"                      /* full: spill */              \
	"shlq $32, %rdx\n\t"                                                   \
	"orq %rax, %rdx\n\t"                                                   \
	"cmpq " KT_HOLD_DL_OFF "(%r11), %rdx\n\t"      /* H2 */                \
	"jae " slow "\n\t"                      /* a TSC record due */         \
	"shrq $8, %rdx\n\t"                     /* KT_TSC_SHIFT */             \
	"shll $12, %edx\n\t"                                                   \
	"orl %r8d, %edx\n\t"                                                   \
	"movq " KT_HOLD_OFF "(%r11), %rax\n\t"                                 \
	"movl %edx, (%rax,%r9,4)\n\t"           /* H3 */                       \
	"addl $1, %r9d\n\t"                                                    \
	"movl %r9d, " KT_HOLD_POS_OFF "(%r11)\n"       /* H4 commit */         \
	KT_LEAN_RSEQ_END(tag)

#define KT_RETURN_PRE                                                          \
	"movq ktrace__tp@gottpoff(%rip), %r11\n\t"                            \
	"movq %fs:(%r11), %r11\n\t"                                           \
	"cmpq %rsp, " KT_LTOP8_OFF "(%r11)\n\t"                               \
	"jbe 3f\n\t"                                                          \
	"decl " KT_NFL_OFF "(%r11)\n\t"                                        \
	"jz ktrace__lean_frameless_tramp\n\t"                                  \
	"ret\n"                                                               \
	"3:\n\t"                                                              \
	KT_LEAN_SAVE                            /* slot = 48(%rsp) */         \
	"movl " KT_LSP_OFF "(%r11), %eax\n\t"                                  \
	"testl %eax, %eax\n\t"                                                \
	"jz .Lkt_re_slow\n\t"                                                 \
	"leal (%eax,%eax,2), %eax\n\t"          /* n * 3: frames are 24 B */  \
	"leaq 48(%rsp), %rdx\n\t"                                             \
	"cmpq %rdx, " KT_LSTK_OFF "-24(%r11,%rax,8)\n\t"  /* lstk[n-1].slot */ \
	"jne .Lkt_re_slow\n\t"                                                \
	"cmpl $0, " KT_LSTK_OFF "-4(%r11,%rax,8)\n\t"     /* its flags */     \
	"jne .Lkt_re_slow\n\t"                                                \
	"movl " KT_LSTK_OFF "-8(%r11,%rax,8), %r8d\n\t"   /* its ev */        \
	"testl %r8d, %r8d\n\t"                  /* 0: a full-address record */ \
	"jz .Lkt_re_slow\n\t"                                                 \
	"orl $0x800, %r8d\n\t"                  /* KTRACE_EV_EXIT_FLAG */     \
	"cmpq $0, " KT_HOLD_OFF "(%r11)\n\t"     /* holding a request */       \
	"jne .Lkt_lh_arm\n\t"                                                  \
	"jmp .Lkt_la_arm\n"                     /* __fentry__'s, back below */ \
	".Lkt_re_pop:\n\t"                                                    \
	"movl " KT_LSP_OFF "(%r11), %eax\n\t"   /* pop */                     \
	"subl $1, %eax\n\t"                                                   \
	"movl %eax, " KT_LSP_OFF "(%r11)\n\t"                                  \
	"movq $-1, %rdx\n\t"                                                  \
	"testl %eax, %eax\n\t"                                                \
	"jz 5f\n\t"                                                           \
	"leal (%eax,%eax,2), %eax\n\t"                                        \
	"movq " KT_LSTK_OFF "-24(%r11,%rax,8), %rdx\n\t"                      \
	"subq $8, %rdx\n"                                                     \
	"5:\n\t"                                                              \
	"movq %rdx, " KT_LTOP8_OFF "(%r11)\n\t"                               \
	KT_LEAN_RESTORE                                                       \
	"ret\n"                                                               \
	".Lkt_re_slow:\n\t"                                                   \
	KT_LEAN_RESTORE

/* Tracing is off for good (init failed or KTRACE_ENABLE=0): __fentry__
 * returns before saving anything, so a lean build costs a call and a ret
 * per function (its sites are never patched out then: no writer).
 *
 * Then the cache entry for r (the return address at [rsp]), with rax
 * (a varargs count) and rdx (the third argument) saved, and r11 (free at
 * every call site): (r << 16) ^ e is the event when the entry is r's
 * (user addresses below 2^48, as the cache's layout assumes) and neither
 * skipped nor learning, and only then at most 0xfff, so one compare finds
 * the recorded case (L1 in assembly, above).  An entry that is r's and
 * says skipped (muted or excluded), not learning: ret.  A muted function
 * waits for its batch this way (0.5 ms and more, at up to 300 k calls a
 * ms on Lua's start).  The rest: the trampoline. */
__attribute__((visibility("hidden"))) _Atomic uint8_t ktrace__lean_skip;
#define KT_FCACHE_OFF "72"
_Static_assert(offsetof(struct kt_thread, fcache) == 72, "asm reads fcache at 72");
_Static_assert(KT_FCACHE_SIZE == 2048 && KT_FC_SKIP == 0xc000 && KT_FC_LEARN == 0x2000,
               "the asm below has them as constants");
#define KT_FENTRY_PRE                                                          \
	"cmpb $0, ktrace__lean_skip(%rip)\n\t"                              \
	"je 3f\n\t"                                                          \
	"ret\n"                                                               \
	"3:\n\t"                                                            \
	"pushq %rax\n\t"                                                     \
	"pushq %rdx\n\t"                                                     \
	"movq 16(%rsp), %rax\n\t"               /* r */                      \
	"leaq 16(%rax), %rdx\n\t"              /* its cache slot: */         \
	"shrq $4, %rdx\n\t"                    /* KT_FC_LEAN_SLOT(r) */      \
	"andl $2047, %edx\n\t"                                                \
	"movq ktrace__tp@gottpoff(%rip), %r11\n\t"                           \
	"movq %fs:(%r11), %r11\n\t"             /* t */                       \
	"movq " KT_FCACHE_OFF "(%r11,%rdx,8), %rdx\n\t"  /* e */             \
	"shlq $16, %rax\n\t"                                                  \
	"xorq %rdx, %rax\n\t"                   /* r's, neither skipped nor */ \
	"cmpq $0xfff, %rax\n\t"                 /* learning: rax = its ev */  \
	"ja 5f\n\t"                                                           \
	"pushq %rcx\n\tpushq %r8\n\tpushq %r9\n\t"  /* 40(%rsp) = r, */       \
	"movl %eax, %r8d\n\t"                   /* 48(%rsp) = slot */         \
	"leaq 40(%rsp), %rdx\n\t"               /* a frame left at or below */ \
	"cmpq %rdx, " KT_LTOP8_OFF "(%r11)\n\t"  /* this slot (longjmp, */     \
	"jbe .Lkt_fe_slow\n\t"                  /* exception): the C path */  \
	"cmpl $" KT_LEAN_DEPTH_S ", " KT_LSP_OFF "(%r11)\n\t"                  \
	"jae .Lkt_fe_slow\n\t"                  /* lean stack full */         \
	"cmpq $0, " KT_HOLD_OFF "(%r11)\n\t"     /* holding a request */       \
	"jne .Lkt_lh_arm\n\t"                                                  \
	KT_LEAN_APPEND("la", ".Lkt_la_slow")    /* __return__'s too */         \
	"testl $0x800, %r8d\n\t"                /* an exit: back there */      \
	"jnz .Lkt_re_pop\n"                                                    \
	".Lkt_fe_push:\n\t"                     /* push: slot, ev, flags 0 */  \
	"movl " KT_LSP_OFF "(%r11), %eax\n\t"   /* (fn is read only when */   \
	"leal (%eax,%eax,2), %ecx\n\t"          /* ev is 0: not written) */   \
	"leaq " KT_LSTK_OFF "(%r11,%rcx,8), %rcx\n\t"   /* &lstk[n] */        \
	"leaq 48(%rsp), %r9\n\t"                                              \
	"movq %r9, (%rcx)\n\t"                                                \
	"movq %r8, 16(%rcx)\n\t"                /* ev, zero-extended */        \
	"addl $1, %eax\n\t"                                                   \
	"movl %eax, " KT_LSP_OFF "(%r11)\n\t"                                  \
	"cmpq %r9, (%rcx)\n\t"                  /* a handler that ran before */ \
	"jne 6f\n"                              /* lsp moved took lstk[n] */  \
	"7:\n\t"                                                              \
	"subq $8, %r9\n\t"                                                    \
	"movq %r9, " KT_LTOP8_OFF "(%r11)\n\t"                                \
	"popq %r9\n\tpopq %r8\n\tpopq %rcx\n\tpopq %rdx\n\tpopq %rax\n\t"      \
	"ret\n"                                                               \
	"6:\n\t"                                /* (its slot was another: */  \
	"movq %r9, (%rcx)\n\t"                  /* both frames live at once) */ \
	"movq %r8, 16(%rcx)\n\t"                /* write it again */           \
	"jmp 7b\n"                                                            \
	KT_LEAN_HOLD("lh", ".Lkt_la_slow")      /* both hooks' */              \
	"testl $0x800, %r8d\n\t"                                               \
	"jnz .Lkt_re_pop\n\t"                                                  \
	"jmp .Lkt_fe_push\n"                                                   \
	"5:\n\t"                                /* rdx = e */                 \
	"shrq $16, %rax\n\t"                                                  \
	"jnz 4f\n\t"                            /* not r's: the C path */     \
	"testl $0x2000, %edx\n\t"               /* learning: the slow path */ \
	"jnz 4f\n\t"                                                          \
	"btl $14, %edx\n\t"                     /* skipped; muted (not */     \
	"adcq $0, " KT_LSKIP_OFF "(%r11)\n\t"    /* excluded): counted */      \
	"popq %rdx\n\t"                                                       \
	"popq %rax\n\t"                                                       \
	"ret\n"                                                               \
	".Lkt_la_slow:\n\t"                     /* the sections' slow exits */ \
	"testl $0x800, %r8d\n\t"                                               \
	"jnz .Lkt_re_slow\n\t"                  /* an exit's */                \
	".Lkt_fe_slow:\n\t"                                                   \
	"popq %r9\n\tpopq %r8\n\tpopq %rcx\n"                                 \
	"4:\n\t"                                                            \
	"popq %rdx\n\t"                                                       \
	"popq %rax\n\t"

/* A frameless return that learns (above): the same saves as the slow
 * path (the return registers, and those of a sibling call's arguments),
 * then lean.c. */
KT_NOINSTR KT_GPR int ktrace__lean_frameless_fast(uint64_t r, uint64_t *slot)
{
	(void)r;
	(void)slot;
	return 1;
}

__asm__(".text\n"
	".hidden ktrace__g\n"
	KT_LEAN_TRAMPOLINE("__fentry__", KT_FENTRY_PRE, "ktrace__lean_enter_fast",
	                   "ktrace__lean_enter_slow")
	KT_LEAN_TRAMPOLINE("__return__", KT_RETURN_PRE, "ktrace__lean_exit_fast",
	                   "ktrace__lean_exit_slow")
	".hidden ktrace__lean_frameless_tramp\n"
	KT_LEAN_TRAMPOLINE("ktrace__lean_frameless_tramp", "", "ktrace__lean_frameless_fast",
	                   "ktrace__lean_frameless"));
#endif

/* ---- slow path ---------------------------------------------------------- */

/*
 * The registry of thread structs, for the writer's look at the lean frames
 * open on every thread (ktrace__lean_open_frames; lean.c waits for them
 * before an exit site goes out).  A struct is added when it is mapped and
 * removed before it is unmapped; removal waits while the writer looks
 * (scanning), a handshake with sequentially consistent stores and loads:
 * the writer either sees the slot empty or is seen looking.  The frames
 * of a thread that finds no free slot are not seen (lean.c's EXITS_AFTER
 * says what that leaves).
 */
#define KT_REG 4096
static struct kt_thread *_Atomic reg[KT_REG];
static _Atomic int scanning;
/* No slot at or above it was ever claimed: the writer's look stops here
 * (it ran over all 4096 slots at every lean pass: ~6 % of the writer's
 * time in Lua's short run).  Raised before the claim, seq_cst like it,
 * so a look that can see the slot taken also loads a bound above it. */
static _Atomic uint32_t reg_hi;

static KT_NOINSTR void reg_add(struct kt_thread *t)
{
	t->reg_idx = -1;
	for (int32_t i = 0; i < KT_REG; i++) {
		struct kt_thread *none = NULL;
		uint32_t hi;

		if (kt_load(&reg[i], relaxed) != NULL)
			continue;
		hi = kt_load(&reg_hi, seq_cst);
		while (hi < (uint32_t)i + 1 && !kt_cas(&reg_hi, &hi, (uint32_t)i + 1, seq_cst))
			;
		if (kt_cas(&reg[i], &none, t, seq_cst)) {
			t->reg_idx = i;
			return;
		}
	}
}

static KT_NOINSTR void reg_remove(struct kt_thread *t)
{
	if (t->reg_idx < 0)
		return;
	kt_store(&reg[t->reg_idx], NULL, seq_cst);
	while (kt_load(&scanning, seq_cst))
		sched_yield();
}

KT_NOINSTR void ktrace__lean_open_frames(uint8_t *open, uint32_t nf)
{
	uint32_t hi;

	memset(open, 0, nf);
	kt_store(&scanning, 1, seq_cst);
	hi = kt_load(&reg_hi, seq_cst);
	for (uint32_t i = 0; i < hi && i < KT_REG; i++) {
		struct kt_thread *t = kt_load(&reg[i], seq_cst);
		uint32_t n;

		if (t == NULL)
			continue;
		/* another thread's frames: word loads of what it stores whole
		 * (ktrace__lframe_push); a frame pushed or popped meanwhile is seen or
		 * not, and lean.c allows for either */
		n = __atomic_load_n(&t->lsp, __ATOMIC_RELAXED);
		for (uint32_t k = 0; k < n && k < KT_LEAN_DEPTH; k++) {
			uint32_t id = __atomic_load_n(&t->lstk[k].ev, __ATOMIC_RELAXED) - KTRACE_EV_ENTER_BASE;

			if (id < nf)
				open[id] = 1;
		}
	}
	kt_store(&scanning, 0, seq_cst);
}

/* A fork child: the other threads are gone, their structs stay mapped
 * (copies) but are no one's. */
KT_NOINSTR void ktrace__registry_fork_child(struct kt_thread *self)
{
	for (uint32_t i = 0; i < KT_REG; i++)   /* keep only its own slot */
		if (kt_load(&reg[i], relaxed) != self || self->reg_idx != (int32_t)i)
			kt_store(&reg[i], NULL, relaxed);
	kt_store(&scanning, 0, relaxed);
	if (self != &ktrace__idle && self->reg_idx < 0)
		reg_add(self);
}

/*
 * The thread's first event (or API call): map its struct kt_thread.  mmap
 * is async-signal-safe, and the pointer is installed with a CAS on the
 * thread's own TLS word: a traced signal handler that ran in between and
 * installed one of its own wins, and ours is given back.
 */
KT_NOINSTR struct kt_thread *ktrace__self_alloc(void)
{
	struct kt_thread *idle = &ktrace__idle, *t;

	/* MAP_POPULATE: the pages come writable now.  Otherwise the hot
	 * path's first read of each maps the shared zero page, and the slow
	 * path's first write then copies it, with a TLB flush that interrupts
	 * every other core running the program (~10 us each in a VM).  The
	 * populate holds the mapping lock: noted (ktrace__map_own). */
	t = ktrace__map_own(sizeof(*t), MAP_POPULATE);
	if (t == NULL) {
		ktrace__count_loss(KTRACE_LOSS_NO_THREAD_SLOT, 1);
		return NULL;
	}
	t->ltop8 = ~0ull;   /* no lean frame */
	t->nfl = KT_FL_EVERY;
	/* relaxed: only this thread (and its signal handlers) use the word. */
	if (!__atomic_compare_exchange_n(&ktrace__tp, &idle, t, 0, __ATOMIC_RELAXED,
	                                 __ATOMIC_RELAXED)) {
		ktrace__unmap_own(t, sizeof(*t));
		return idle;   /* the handler's */
	}
	reg_add(t);
	return t;
}

/* Thread exit: back to ktrace__idle first, so a signal handler never sees
 * the struct being unmapped.  An event after this (a later key destructor
 * that is traced) maps a new one and registers the thread again. */
KT_NOINSTR void ktrace__self_release(void)
{
	struct kt_thread *t = kt_self();

	if (t == &ktrace__idle)
		return;
	__atomic_store_n(&ktrace__tp, &ktrace__idle, __ATOMIC_RELAXED);
	ktrace__filter_report(t);   /* its last skipped calls, counted */
	reg_remove(t);
	ktrace__unmap_own(t, sizeof(*t));
}

KT_NOINSTR void ktrace__count_loss(int cause, uint64_t n)
{
	/* relaxed: a statistic; the snapshot reads it on the writer thread and
	 * an approximate value at that instant is what it reports. */
	kt_add(&ktrace__g.loss[cause], n, relaxed);
}

/* The hook's rules for a skipped function (see hook()); 1 = skip. */
static inline KT_NOINSTR int skipped(struct kt_thread *t, uint32_t ev, uint32_t skip,
                                     uint32_t exit_flag)
{
	if (skip & KT_FC_EXCLUDED)
		return 1;
	if (!exit_flag) {
		local_add(&t->ment, 1);
		return 1;
	}
	if (t->ment - t->mexit > t->mlw) {
		local_add(&t->mexit, 1);
		return 1;
	}
	return ktrace__filter_skip_exit(t, ev);
}

KT_NOINSTR KT_NOINLINE void ktrace__slow_func(void *fn, uint32_t exit_flag)
{
	struct kt_thread *t = kt_self();
	uintptr_t a = (uintptr_t)fn;

	if (t == &ktrace__idle) {
		/* relaxed: a hint; a disabled library maps nothing per thread. */
		if (kt_load(&ktrace__g.state, relaxed) == KT_OFF ||
		    (t = ktrace__self_alloc()) == NULL)
			return;
	}
	if (KT_UNLIKELY(t->in_vfork)) {
		/* A vfork child on its parent's memory (vfork.c). */
		ktrace__count_loss(KTRACE_LOSS_VFORK, 1);
		return;
	}
	if (t->nest) {
		/* A traced signal handler interrupted our own slow path: the
		 * event cannot be recorded without corrupting the one in
		 * progress. */
		ktrace__count_loss(KTRACE_LOSS_NESTED, 1);
		return;
	}
	t->nest++;
	if (ktrace__thread_ready(t) == 0) {
		uint64_t *ce = &t->fcache[KT_FC_SLOT(a)];
		/* A function without a compact id is cached as this marker
		 * (bit 47 set: above every user address), which the hot path's
		 * compare never matches, so only the hash probe is saved. */
		uint64_t full = ((uint64_t)a | KT_FCACHE_FULL) << 16;
		uint32_t ev, skip;

		ktrace__filter_adopt(t);
		if (*ce != full && ktrace__lean_owns(a)) {
			/* compiled in both modes: the lean hooks record it.
			 * Cached as excluded with no event, which no mute set's
			 * adoption rewrites (filter.c): both hooks return. */
			*ce = ((uint64_t)a << 16) | KT_FC_EXCLUDED;
			t->nest--;
			return;
		}
		ev = *ce == full ? 0 : ktrace__func_event(a);
		skip = ev ? ktrace__filter_flags(ev, t->mute_epoch) : 0;
		if (ev)
			*ce = ((uint64_t)a << 16) | skip | ev;
		/* skipped: not recorded in this thread's view */
		if (!(skip && skipped(t, ev, skip, exit_flag))) {
			if (!ev)   /* past the compact ids: recorded by address */
				*ce = full;
			ktrace__record_func(t, a, ev, exit_flag);
		}
	}
	t->nest--;
}

/*
 * Record fn's entry or exit (exit_flag) from a slow path that holds the
 * nesting guard and has a ready thread: compact event ev, or the
 * full-address record when ev is 0 (lean.c).
 */
KT_NOINSTR void ktrace__record_func(struct kt_thread *t, uintptr_t fn, uint32_t ev,
                                    uint32_t exit_flag)
{
	if (ev) {
		if (!ktrace__try_fast(t, ev | exit_flag))
			ktrace__emit(t, ev | exit_flag, NULL, 0);
	} else {
		uint32_t p[3] = {
			KTRACE_EXT_WORD(exit_flag ? KTRACE_EXT_FUNC_EXIT_ADDR
			                          : KTRACE_EXT_FUNC_ENTER_ADDR, 0),
			(uint32_t)fn, (uint32_t)((uint64_t)fn >> 32)};
		if (t->hold || !t->rseq || !append4(t, t->rseq, p[0], p[1], p[2]))
			ktrace__emit(t, 3, p, 3);
	}
}

/* An extended record through the slow path, with the nesting guard. */
static KT_NOINSTR void emit_ext(uint32_t type, uint32_t arg24, const uint32_t *more,
                                uint32_t nmore)
{
	struct kt_thread *t = kt_self_alloc();
	uint32_t p[4];

	if (t == NULL)
		return;   /* counted */
	if (KT_UNLIKELY(t->in_vfork)) {
		ktrace__count_loss(KTRACE_LOSS_VFORK, 1);
		return;
	}
	/* Requests and marks: 4 words, appended like a hot-path event. */
	if (nmore == 2 && t->rseq && t->hold == NULL &&
	    append4(t, t->rseq, KTRACE_EXT_WORD(type, arg24), more[0], more[1]))
		return;
	if (t->nest) {
		ktrace__count_loss(KTRACE_LOSS_NESTED, 1);
		return;
	}
	t->nest++;
	if (ktrace__thread_ready(t) == 0) {
		p[0] = KTRACE_EXT_WORD(type, arg24);
		for (uint32_t i = 0; i < nmore; i++)
			p[1 + i] = more[i];
		ktrace__emit(t, 1 + nmore, p, 1 + nmore);
	}
	t->nest--;
}

KT_NOINSTR void ktrace__emit_ext(uint32_t type, uint32_t arg24, const uint32_t *more,
                                 uint32_t nmore)
{
	emit_ext(type, arg24, more, nmore);
}

static KT_NOINSTR uint32_t name_or_loss(const char *name, int kind)
{
	uint32_t id;

	if (name == NULL || !ktrace__ensure_init())
		return 0;
	id = ktrace__name_id(name, kind);
	if (id == 0)
		ktrace__count_loss(KTRACE_LOSS_NO_NAME, 1);
	return id;
}

__attribute__((visibility("default"))) KT_NOINSTR void
ktrace_mark(const char *name, uint64_t value)
{
	uint32_t id = name_or_loss(name, KTRACE_NAME_MARK);
	uint32_t v[2] = {(uint32_t)value, (uint32_t)(value >> 32)};

	if (id)
		emit_ext(KTRACE_EXT_MARK, id, v, 2);
}

__attribute__((visibility("default"))) KT_NOINSTR void
ktrace_span_begin(const char *name)
{
	uint32_t id = name_or_loss(name, KTRACE_NAME_SPAN);

	if (id)
		emit_ext(KTRACE_EXT_SPAN_BEGIN, id, NULL, 0);
}

__attribute__((visibility("default"))) KT_NOINSTR void
ktrace_span_end(const char *name)
{
	uint32_t id = name_or_loss(name, KTRACE_NAME_SPAN);

	if (id)
		emit_ext(KTRACE_EXT_SPAN_END, id, NULL, 0);
}
