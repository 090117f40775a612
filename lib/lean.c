/*
 * lean.c - the lean mode's slow paths and its live patching (x86-64).
 *
 * Code compiled with the lean flags (pkg-config --variable=lean_cflags
 * ktrace: -p -mfentry -minstrument-return=call) calls __fentry__ as each
 * function's first instruction and __return__ before each ret, after
 * inlining: inlined copies call nothing, and a sibling call calls
 * __return__ before its jump ("call __return__; jmp f").  In a PIE or a
 * shared library the
 * entry site is "call *__fentry__@GOTPCREL(%rip)" (6 bytes, or "addr32
 * call" once the linker resolved it locally), elsewhere "call" (5 bytes);
 * an exit site is always a 5-byte "call __return__@PLT".  The trampolines
 * and fast paths are in record.c.
 *
 * Nesting.  Each thread keeps the frames whose entry it recorded (struct
 * kt_lframe: the address of the frame's return-address slot, which is the
 * same at __fentry__ and at __return__).  An exit is recorded iff its
 * frame is there, so a call whose entry was skipped (muted, excluded,
 * patched out, or patched out while the call ran) never leaves an
 * unmatched exit, and a call whose exit site was patched out while it ran
 * is closed when the stack shows it is gone: an entry or exit at or above
 * its slot (a longjmp, an exception, or a nop'ed exit) closes every frame
 * below, innermost first, at that time; an entry closes one at its own
 * slot too (every exit calls __return__ first, a sibling call's too, so
 * such a frame left without it).  __cxa_begin_catch closes the frames a C++ exception unwound,
 * at the catch.
 *
 * Patching.  The writer thread (ktrace__lean_tick) turns the sites of a
 * function muted (filter.c) or excluded into nops, and back into the
 * original calls if that ever changes.  It knows a function's entry site
 * from its first call and learns its exit sites from its first
 * LEARN_CALLS calls (they go through the slow path: the frame carries
 * KT_LF_LEARN); an exit site it never learned keeps calling __return__,
 * which returns at once (no frame).  One batch: every site is in a module
 * dl_iterate_phdr lists (its loader lock keeps dlclose out meanwhile),
 *   P1 mprotect the pages RWX (failure: W^X, see below),
 *   W  a site whose changing bytes lie inside one aligned 16 bytes
 *      (every entry site of a 16-byte aligned function, every exit site
 *      followed by ret, which becomes a ret, and most others; FORMS
 *      below): the 16 bytes written whole, one lock cmpxchg16b, so a core
 *      fetching them sees the old call or the new instruction (or back),
 *      never a mix; P2's sync below then makes every core fetch them
 *      anew,
 *   P2 int3 over each other site's first byte (a sibling call's exit at
 *      15 of its 16 bytes), sync every core,
 *   P3 the other bytes, sync,
 *   P4 the first byte, sync,
 *   P5 mprotect back to R-X.
 * (A batch of W sites only: one sync if some go back in; going out, none:
 * see apply().  P1 and P5 are skipped for code kept writable between
 * close batches: LINGER.  Exits followed by a ret jump to a stub while
 * they wait to go out: STUBS.)
 * A thread that executes a site
 * between P2 and P4 traps, a few us each in a VM, and a hot site is hit
 * again and again until P4; the SIGTRAP
 * handler emulates the site's new instruction (a nop: skip it; a call:
 * push and jump), or, after P4, re-executes it.  "Sync" is membarrier's
 * SYNC_CORE (every core running this process serialises its instruction
 * stream), or, where the kernel has none, a private expedited membarrier
 * or an mprotect (an IPI each way; an interrupt return serialises).
 *
 * W^X.  Where the code cannot be made writable (MDWE, a seccomp filter,
 * SELinux execmod), nothing more is patched: muted functions keep calling
 * the hooks, which return after the cache lookup.  Said once on stderr and
 * in every snapshot (KTRACE_INFO_LEAN_NO_PATCH).
 */
#include "internal.h"
#include "snapshot.h"

#if defined(__x86_64__)

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include "cpufeat.h"
#include <ucontext.h>
#include <unistd.h>

#define NF KTRACE_FUNC_ID_COUNT
#define NEXIT 8              /* exit sites learned per function */
#define LEARN_CALLS 2        /* calls that learn exit sites, per function (learning()) */
#define MAXBATCH 1024        /* sites per batch */
#define FAR_STACK (64ull << 20) /* bytes: farther than this is another stack */

enum { LS_NONE = 0, LS_CLAIMED = 1, LS_READY = 2, LS_BAD = 3 };

struct lfn {
	_Atomic uint32_t st;           /* LS_*: app threads claim and publish */
	uint8_t len;                   /* entry site bytes: 5 or 6 */
	uint8_t orig[7];               /* the entry site's original bytes */
	uint64_t site;                 /* entry site address */
	_Atomic uint32_t learn;        /* calls that learned exits */
	_Atomic uint64_t learn_t0;     /* the counter at its first learning call */
	_Atomic uint64_t exits[NEXIT]; /* 0 free, 1 claimed, else the site */
	uint8_t exit_orig[NEXIT][5];   /* written before exits[i] is published */
	/* writer thread only */
	uint8_t learned;               /* learn reached LEARN_CALLS once (it may go back: learning()) */
	uint8_t nop_entry;             /* the entry site is a nop now */
	uint8_t nop_exit[NEXIT];
	uint64_t stub[NEXIT];          /* the exit site jumps to this stub (STUBS), 0: not */
	uint64_t entry_gen;            /* sync_gen before the batch that took the entry out */
	int64_t entry_ns;              /* when that batch ended (EXITS_AFTER's margin) */
	int64_t muted_ns;              /* muted at (0 = not muted): its learning ends LEARN_WAIT_NS later */
};

static struct lfn lf[NF];
static _Atomic int lean_used;       /* a lean hook ran */
static _Atomic int both_modes;      /* a function has both modes' hooks */
static _Atomic int wx_denied;       /* code could not be made writable */
static _Atomic int wx_errno;        /* mprotect's errno then, until said (wx_say) */
static _Atomic uint64_t n_patched, n_failed, n_nop;
static _Atomic uint64_t n_batches, batch_ns;   /* P1..P5, wall time */
static _Atomic int force;           /* tests: 1 every site out, 2 every one in */
static _Atomic int force_int3;      /* tests: every site by the int3 sequence */
static _Atomic uint64_t n_whole, n_int3;   /* sites written whole / by int3 */
static _Atomic uint64_t n_jump, n_ret;     /* of the whole ones, in jump / ret form */
static _Atomic uint64_t n_stub;            /* exit sites given a stub (STUBS) */
static _Atomic uint64_t n_callret;         /* exit sites out in call-ret form (FORMS) */
static _Atomic uint64_t n_early;           /* early passes (EARLY) */
static _Atomic uint64_t n_slow_in, n_slow_out;   /* slow entries and exits (tests) */
/* Writer thread: events that serialised every core running the program
 * (a sync, a TLB flush of its code or a stub's page), and their count at
 * this pass's look at the threads' frames (EXITS_AFTER). */
static uint64_t sync_gen, look_gen;
static int64_t look_ns;             /* writer thread: the time of that look */
static int64_t cur_gap;             /* writer thread: this pass's batch gap (ktrace__lean_tick) */
static int margin_wait;             /* writer thread: exits wait for look_ns's margin */
static int64_t last_sync_ns;
static int64_t last_batch_ns;       /* writer thread: the last batch's end */
static uint32_t batch_n;             /* writer thread: batches so far */

static const uint8_t nop5[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
static const uint8_t nop6[6] = {0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00};

/* The batch being written, for the SIGTRAP handler. */
struct pend {
	uint64_t site;
	uint8_t len;
	uint8_t lead;                  /* its first bytes that change (FORMS) */
	uint8_t first;                 /* the first of them that changes (1 in call-ret form) */
	uint8_t form;                  /* FORM_* */
	uint8_t now[7];                /* the bytes being written */
};
enum { FORM_NOP, FORM_JUMP, FORM_RET, FORM_STUB, FORM_CALLRET };
static struct pend pend[MAXBATCH];   /* the writer thread's */
/* The same, for the SIGTRAP handler: (site, new bytes | len << 56) word
 * pairs under a sequence count (odd while they change); ntrap = 0 when no
 * batch is being written. */
static _Atomic uint64_t trap[MAXBATCH][2];
static _Atomic uint32_t ntrap, tseq;
static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;
static int sync_cmd;               /* membarrier command, 0 = mprotect */
static struct sigaction old_trap;
static int trap_installed;

/* Code bytes are read and written with plain byte moves the compiler (and
 * a sanitizer's instrumentation, which has no shadow for code) does not
 * see; a byte store is atomic on x86. */
static inline KT_NOINSTR uint8_t code_byte(uint64_t a)
{
	uint8_t v;

	__asm__ volatile("movb (%1), %0" : "=q"(v) : "r"(a) : "memory");
	return v;
}

static inline KT_NOINSTR void code_poke(uint64_t a, uint8_t v)
{
	__asm__ volatile("movb %1, (%0)" : : "r"(a), "q"(v) : "memory");
}

/*
 * An aligned 16 bytes of code, written whole: one locked cmpxchg16b, so a
 * core fetching them sees the old bytes or the new ones, never a mix.
 * Only the writer thread (under patch_lock) writes code, so the compare
 * holds.  A cpu without cmpxchg16b (have_cx16) takes the int3 sequence.
 */
static KT_NOINSTR int have_cx16(void)
{
	static int have = -1;

	if (have < 0)
		have = (ktrace__cpuid1_ecx() & bit_CMPXCHG16B) != 0;
	return have;
}

static KT_NOINSTR void code_set16(uint64_t a, const uint8_t *bytes, uint32_t off, uint32_t len)
{
	uint64_t lo, hi, nlo, nhi;
	unsigned char ok;
	uint8_t b[16];

	__asm__ volatile("movq (%2), %0\n\tmovq 8(%2), %1" : "=&r"(lo), "=&r"(hi) : "r"(a) : "memory");
	do {   /* lo, hi: what is there (a failed compare loads it) */
		memcpy(b, &lo, 8);
		memcpy(b + 8, &hi, 8);
		memcpy(b + off, bytes, len);
		memcpy(&nlo, b, 8);
		memcpy(&nhi, b + 8, 8);
		__asm__ volatile("lock cmpxchg16b (%[p])\n\tsete %[ok]"
		                 : [ok] "=q"(ok), "+a"(lo), "+d"(hi)
		                 : [p] "r"(a), "b"(nlo), "c"(nhi)
		                 : "memory", "cc");
	} while (!ok);
}

/* Does the site lie inside one aligned 16 bytes?  (Every entry site of a
 * 16-byte aligned function, and 3 exit sites in 4.) */
static inline KT_NOINSTR int one_chunk(uint64_t site, uint8_t len)
{
	return (site & 15) + len <= 16;
}

/*
 * FORMS.  What a site becomes when it goes out, and how many of its first
 * bytes change (lead; the others keep the call's bytes):
 *   ret   an exit site followed by "ret" (every exit but a sibling call's:
 *         SQLite 1831 of 2311): its first byte becomes "ret" itself, one
 *         byte, so the function returns there; lead 1;
 *   jump  a site across two aligned 16 bytes whose first two bytes are
 *         in the first (at 12, 13 or 14 of its 16): "jmp +len-2" over the
 *         call's other bytes; lead 2;
 *   call-ret  an exit site at 15 of its 16 not followed by ret (a
 *         sibling call's: "call __return__; jmp f"): still a call, of a
 *         ret (STUB_RET_OFF in a stub page within reach): only its rel32
 *         changes, bytes 1-4, all in the next aligned 16; first 1, lead 5;
 *   nop   the others: a nop of its length; lead len.
 * A site whose changing bytes (first to lead) lie inside one aligned 16
 * bytes is written by one cmpxchg16b of them (W, apply()), so a core
 * fetching the site sees the call or the new instruction, never a mix;
 * back in, the same bytes return the same way.  Only the others take the
 * int3 sequence: two more syncs per batch (an interrupt each on every
 * core running the program) and a trap (a signal) each time a thread runs
 * the site meanwhile (60-110 traps in SQLite's 0.09 s run with the jump
 * form alone, 112 before it).  Before the call-ret form that was every
 * sibling call's exit at 15 of 16: 3-4 batches in each of SQLite's short
 * runs, 3 membarriers each.  Left to it: a 5-byte entry site at 15 (a
 * function not aligned to 16), a 6-byte one at 11-15, and a call-ret site
 * where no stub page can be mapped within reach.  A ret or a jump costs
 * what a nop does, or less; the call-ret form, a call and a ret.
 */
static KT_NOINSTR int site_form(uint64_t site, uint8_t len, int is_exit)
{
	if (is_exit && len == 5 && code_byte(site + 5) == 0xc3)
		return FORM_RET;
	if (!one_chunk(site, len) && (site & 15) <= 14)
		return FORM_JUMP;
	return FORM_NOP;
}

/* The bytes that take a site of len out, in form, into buf. */
static KT_NOINSTR const uint8_t *out_bytes(int form, uint8_t len, const uint8_t *orig,
                                           uint8_t *buf)
{
	if (form == FORM_NOP)
		return len == 5 ? nop5 : nop6;
	memcpy(buf, orig, len);
	if (form == FORM_RET) {
		buf[0] = 0xc3;
	} else {
		buf[0] = 0xeb;
		buf[1] = (uint8_t)(len - 2);
	}
	return buf;
}

static KT_NOINSTR void code_read(uint8_t *dst, uint64_t a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = code_byte(a + i);
}

/* ---- application threads: slow paths ------------------------------------ */

/*
 * Entry sites noted so far, by their end r: (r << 8) | length, 0 = free.
 * A site is noted before its function is READY, so before it can ever be
 * patched: its bytes decode as a call until then, and afterwards this
 * table answers (a thread may reach the slow path after the writer
 * patched the site it came from).
 */
#define NSITES 8192u
static _Atomic uint64_t sites[NSITES];

/* The pages of [p, p + len) writable now (see lf_grow). */
static KT_NOINSTR void populate(const void *p, size_t len)
{
	uint64_t a = (uint64_t)p & ~4095ull, e = ((uint64_t)p + len + 4095) & ~4095ull;

	ktrace__populate_write((void *)a, (size_t)(e - a));
}

/* The whole pages inside [p, p + len) given back (zero again when next
 * touched); the pages it shares with other variables are kept. */
static KT_NOINSTR void unpopulate(void *p, size_t len)
{
	uint64_t a = ((uint64_t)p + 4095) & ~4095ull, e = ((uint64_t)p + len) & ~4095ull;

	if (e > a)
		madvise((void *)a, (size_t)(e - a), MADV_DONTNEED);
}

/*
 * The tables the slow paths read and then write are faulted in writable
 * before they are read (no-op before Linux 5.14).  Otherwise a first read
 * maps the zero page and the write after it copies it, with a TLB flush
 * interrupting every other core running the program, once per page: ~90
 * of them in SQLite's first 100 ms.  sites[] (hashed) at once; lf[] (by
 * compact id, handed out from 0 up) LF_CHUNK entries at a time, LF_AHEAD
 * ahead of the highest id noted (lf_grow): all 2016 entries (then 480 KiB)
 * took 0.22 ms of the program's start-up, and Lua uses ~700.  An entry
 * at or above lf_pop was never written (note_fn grows the table first),
 * so a reader that finds its id there takes it as LS_NONE without
 * reading it (lf_has).
 */
#define LF_CHUNK 256u   /* entries: 62 KiB (248 bytes each) */
#define LF_AHEAD 64u
static _Atomic uint32_t lf_pop;   /* lf[0, lf_pop) faulted in (or tried) */

static KT_NOINSTR void lf_grow(uint32_t id)
{
	/* acquire: pairs with the release below (the pages before the count) */
	uint32_t cur = kt_load(&lf_pop, acquire), want;

	if (id + LF_AHEAD < cur || cur >= NF)
		return;
	want = (id + LF_AHEAD + LF_CHUNK) / LF_CHUNK * LF_CHUNK;
	if (want > NF)
		want = NF;
	populate(&lf[cur], (size_t)(want - cur) * sizeof(lf[0]));
	while (cur < want && !kt_cas(&lf_pop, &cur, want, release))
		;
}

/* May lf[id] have been written (else it is LS_NONE, and never read)? */
static inline KT_NOINSTR int lf_has(uint32_t id)
{
	/* acquire: note_fn grew the table before it wrote the entry */
	return id < kt_load(&lf_pop, acquire);
}

/* lf[id]'s state: LS_NONE past the part faulted in, unread (lf_has).
 * acquire: pairs with note_fn's release of LS_READY (site, len, orig). */
static inline KT_NOINSTR uint32_t lf_state(uint32_t id)
{
	return lf_has(id) ? kt_load(&lf[id].st, acquire) : LS_NONE;
}

static KT_NOINSTR uint32_t site_hash(uint64_t r)
{
	return (uint32_t)((r * 0x9E3779B97F4A7C15ull) >> 51) & (NSITES - 1);
}

static KT_NOINSTR int site_find(uint64_t r)
{
	for (uint32_t i = site_hash(r), k = 0; k < NSITES; k++, i = (i + 1) & (NSITES - 1)) {
		/* acquire: pairs with site_put's CAS (seq_cst). */
		uint64_t v = kt_load(&sites[i], acquire);

		if (v == 0)
			return 0;
		if (v >> 8 == r)
			return (int)(v & 0xff);
	}
	return 0;
}

static KT_NOINSTR void site_put(uint64_t r, int len)
{
	uint64_t want = (r << 8) | (uint64_t)len;

	for (uint32_t i = site_hash(r), k = 0; k < NSITES; k++, i = (i + 1) & (NSITES - 1)) {
		uint64_t v = 0;

		/* seq_cst: before the function's READY store (release). */
		if (atomic_compare_exchange_strong(&sites[i], &v, want) || v >> 8 == r)
			return;
	}
}

/* The entry site ending at r: its start and length, 0 if not known. */
static KT_NOINSTR int entry_site(uint64_t r, uint64_t *site)
{
	int len = site_find(r);

	if (len == 0) {
		uint8_t b6 = code_byte(r - 6), b5 = code_byte(r - 5);

		if (b6 == 0xff && b5 == 0x15)
			len = 6;   /* call *__fentry__@GOTPCREL(%rip) */
		else if (b5 == 0xe8)
			len = b6 == 0x67 ? 6 : 5;   /* addr32 call: relaxed by ld */
		else
			len = site_find(r);   /* patched since the first look */
	}
	*site = r - (uint64_t)len;
	return len;
}

/* The function's address: the entry site, or the endbr64 before it. */
static KT_NOINSTR uint64_t site_fn(uint64_t site)
{
	static const uint8_t endbr[4] = {0xf3, 0x0f, 0x1e, 0xfa};
	uint8_t b[4];

	/* Read before the site only within its page: the first byte of a
	 * mapping has nothing mapped before it. */
	if ((site & 4095) < 4)
		return site;
	code_read(b, site - 4, 4);
	if (memcmp(b, endbr, 4) == 0)
		return site - 4;
	return site;
}

/* First call of the function with event ev: note its entry site. */
static KT_NOINSTR struct lfn *note_fn(uint32_t ev, uint64_t site, int len)
{
	uint32_t id = ev - KTRACE_EV_ENTER_BASE, zero = LS_NONE;
	struct lfn *l;

	if (ev == 0 || id >= NF)
		return NULL;
	lf_grow(id);
	l = &lf[id];
	/* acquire: pairs with the release store of LS_READY below. */
	uint32_t st = kt_load(&l->st, acquire);
	if (st == LS_READY)
		return l;
	if (st != LS_NONE)
		return NULL;
	/* relaxed: the claim orders nothing; READY publishes. */
	if (!kt_cas(&l->st, &zero, LS_CLAIMED, relaxed))
		return NULL;
	l->site = site;
	l->len = (uint8_t)len;
	site_put(site + (uint64_t)len, len);
	code_read(l->orig, site, (size_t)len);
	/* release: site, len and orig before the writer (acquire) reads them. */
	kt_store(&l->st, LS_READY, release);
	return l;
}

/* Is the function with event ev being noted by a thread (note_fn's claim
 * not yet published)? */
static KT_NOINSTR int noting(uint32_t ev)
{
	/* a claim that ends meanwhile costs one more miss */
	return lf_state(ev - KTRACE_EV_ENTER_BASE) == LS_CLAIMED;
}

/* An exit site ending at r of a learning function. */
static KT_NOINSTR void learn_exit(uint32_t ev, uint64_t r)
{
	uint32_t id = ev - KTRACE_EV_ENTER_BASE;
	uint64_t site = r - 5;
	struct lfn *l;

	if (ev == 0 || id >= NF || code_byte(site) != 0xe8)
		return;
	l = &lf[id];
	for (int i = 0; i < NEXIT; i++) {
		/* acquire: pairs with the release publish below. */
		uint64_t v = kt_load(&l->exits[i], acquire), zero = 0;

		if (v == site)
			return;
		if (v != 0)
			continue;
		/* relaxed: a claim; the publish below is the release. */
		if (!kt_cas(&l->exits[i], &zero, 1, relaxed)) {
			if (zero == site)
				return;
			continue;
		}
		code_read(l->exit_orig[i], site, 5);
		/* release: exit_orig before the writer reads the site. */
		kt_store(&l->exits[i], site, release);
		return;
	}
}

/*
 * LEARN_FAST.  A learning call's exit through a site its function has
 * learned already (most of them: a function returns through the same few
 * sites) needs nothing learned: record.c's fast path takes it as any
 * other exit when this says so, instead of the slow path with its vector
 * register saves (SQLite's short run: ~3,400 of its ~4,000 learning exits
 * a run, ~400 cycles each).  General registers only (the fast path's
 * rule: tests/check_lean_gpr.sh), so atomic loads, never vectorised.
 */
KT_NOINSTR int ktrace__lean_exit_known(uint32_t ev, uint64_t site)
{
	uint32_t id = ev - KTRACE_EV_ENTER_BASE;

	if (!lf_has(id))   /* also an ev below the base: id wraps past lf_pop */
		return 0;
	for (int i = 0; i < NEXIT; i++)
		/* relaxed: a site once published stays; missing one costs
		 * only the slow path */
		if (kt_load(&lf[id].exits[i], relaxed) == site)
			return 1;
	return 0;
}

/* Set when a function to be patched out has learned its exits (its
 * last learning call began), cleared by the writer's next lean pass:
 * 1 by a function whose calls came slowly, 2 by one whose calls came
 * fast (HINTS). */
static _Atomic uint32_t ready_hint;

/*
 * HINTS.  A hint that a function can be patched out now (its learning
 * done, or a frameless exit sampled) wakes the writer at once only when
 * the function's calls come fast: its learning calls at 35 k a second
 * or more (LEARN_CALLS within HOT_NS * (LEARN_CALLS - 1) / 7: the rate of
 * the 8 calls within HOT_NS this used to take), or KT_FL_EVERY frameless
 * returns within HOT_NS.  Any other hint waits for the writer's next timed look if
 * that comes within HINT_SLACK_NS (kt_wake_post_lazy), and wakes it
 * only when it does not (a writer in a long sleep: nothing patched
 * lately).  While a program's functions are being learned and patched,
 * the writer sleeps a batch gap (0.5 ms) or a learning deadline
 * (LEARN_WAIT_NS) at a time.  Each FUTEX_WAKE cost the hinting thread
 * 17-66 us in this VM (an idle vcpu woken through the hypervisor; a
 * getppid costs 1.3-2.4 us), and SQLite's short run made 46-103 of them
 * from its main thread, most for functions called a few times (every
 * function excluded: 1.098x -> 1.062x the plain build, 50 interleaved
 * pairs).  Waiting up to 2 ms costs a function called 40 k times a
 * second ~80 calls through both hooks (~0.4 us); a hot one pays more:
 * with every hint lazy, Lua's short run went 1.077x -> 1.097x (100
 * pairs), its interpreter's functions muted and left in the hooks
 * longer.  A hot hint after a slow one still wakes (the flag's 1 -> 2).
 */
#define HOT_NS 200000LL
#define HINT_SLACK_NS 2100000LL   /* LEARN_WAIT_NS and 0.1 ms */

/* Did calls counted from the counter value t0 to now come fast (HINTS)?
 * Yes while the counter's rate is not known yet, and for a t0 after now
 * (stored by another thread after this one read now): a signed
 * difference, which unsigned would wrap to "slow". */
static inline KT_NOINSTR int came_fast(uint64_t t0, uint64_t now, int64_t span_ns)
{
	uint64_t hz = kt_load(&ktrace__g.hz_cached, relaxed);

	return hz == 0 || t0 == 0 ||
	       (int64_t)(now - t0) < (int64_t)(hz / (uint64_t)(1000000000LL / span_ns));
}

/* Raise a hint flag to 1 (slow calls) or 2 (fast ones), waking the writer
 * as HINTS says when this call raised it. */
static KT_NOINSTR void hint_writer(_Atomic uint32_t *flag, int fast)
{
	uint32_t want = fast ? 2 : 1, was = kt_load(flag, relaxed);

	/* relaxed: the wake's add (seq_cst) publishes what the hint is for */
	while (was < want)
		if (kt_cas(flag, &was, want, relaxed)) {
			ktrace__writer_wake_lazy(fast ? -1 : HINT_SLACK_NS);
			return;
		}
}

/* Still learning the function's exit sites?  Counts this call, and says
 * which learning call it is (1 to LEARN_CALLS; 0: not one).  The last
 * learning call of a muted or excluded function (skip) hints the writer
 * (HINTS): its sites can go now, not at the writer's next pass, which may be
 * 10-100 ms away while the function runs at full speed through the
 * hooks.  LEARN_CALLS is 2, not 8 (and 8 was not 32): both slow paths
 * (timed around each in an instrumented copy) took 5.2-5.5 ms of SQLite's
 * 0.14 s short lean run with 32 (27 k calls), 3.2-3.5 ms with 8 (9 k),
 * and learning calls were still ~3,950 of its ~4,550 slow entries, at
 * ~0.5 us each (the trampoline's saves, the thread's and the function's
 * lines cold).  With 2 the short run measured 1.5 % faster (1.105x ->
 * 1.090x the plain build over 40-50 interleaved pairs, three sets; Lua's
 * 1.086x -> 1.067x); with 3 or 4 it did not.  The exits the first calls
 * never take (a function's second or third return, a sibling call's)
 * go out later through sampled frameless returns, ~2 ns each until then.
 * Two, not one: the rate of the learning calls (HINTS) needs two times. */
_Static_assert(LEARN_CALLS >= 2, "learning() times its calls from the first to the last");
static KT_NOINSTR uint32_t learning(struct lfn *l, uint32_t skip)
{
	if (l == NULL || kt_load(&wx_denied, relaxed) || ktrace__sandboxed())
		return 0;   /* nothing will be patched: nothing to learn */
	/* relaxed: a count; a few calls more or less learn the same. */
	uint32_t n = kt_load(&l->learn, relaxed);

	if (n >= LEARN_CALLS)
		return 0;
	/* A load and a store, not a locked add: the lock waited for the
	 * store buffer (the ring's stores) to drain, 40 % of this path's
	 * time in SQLite (22 k learning calls per 0.09 s run).  Threads
	 * racing here may lose counts, even take the count back below
	 * LEARN_CALLS after the writer saw it there (a thread that loaded
	 * early stores late): a few calls more learn, and the writer keeps
	 * what it saw (lfn.learned), so nothing goes back in for it.  Both
	 * may see the last one (ready_hint wakes once, HINTS). */
	kt_store(&l->learn, n + 1, relaxed);
	if (n == 0)
		kt_store(&l->learn_t0, ktrace__now(), relaxed);
	else if (n == LEARN_CALLS - 1 && skip)
		hint_writer(&ready_hint, came_fast(kt_load(&l->learn_t0, relaxed), ktrace__now(),
		                                   HOT_NS * (LEARN_CALLS - 1) / 7));
	return n + 1;
}

/* The thread's frame count, stored whole: the writer reads it
 * (ktrace__lean_open_frames, EXITS_AFTER). */
static inline KT_NOINSTR void lsp_set(struct kt_thread *t, uint32_t n)
{
	__atomic_store_n(&t->lsp, n, __ATOMIC_RELAXED);
}

/* Close the frames that are gone: below slot, or at it too for an entry
 * (every exit, a sibling call's too, calls __return__ first, so a frame
 * still open at a new entry's slot has left without it). */
static KT_NOINSTR void close_below(struct kt_thread *t, uint64_t slot, int at_entry)
{
	while (t->lsp > 0) {
		struct kt_lframe *f = &t->lstk[t->lsp - 1];

		if (f->slot > slot || (f->slot == slot && !at_entry))
			break;
		/* Far above: another stack (a signal handler's alternate stack,
		 * a coroutine's), not a longjmp: the frame stays open. */
		if (slot - f->slot > FAR_STACK)
			break;
		if (!(f->flags & KT_LF_SKIP))
			ktrace__record_func(t, f->fn, f->ev, KTRACE_EV_EXIT_FLAG);
		lsp_set(t, t->lsp - 1);
	}
}

/* The lean stack changed: ltop8 for __return__'s asm (record.c). */
static KT_NOINSTR void ltop_sync(struct kt_thread *t)
{
	uint32_t n = t->lsp;

	__atomic_store_n(&t->ltop8, n ? t->lstk[n - 1].slot - 8 : ~0ull, __ATOMIC_RELAXED);
}


static KT_NOINSTR void lean_start(void)
{
	int zero = 0;

	/* relaxed: the flag orders nothing; any thread may populate too */
	if (kt_cas(&lean_used, &zero, 1, relaxed)) {
		populate(sites, sizeof(sites));
		lf_grow(0);
	}
}

static KT_NOINSTR struct kt_thread *slow_begin(void)
{
	struct kt_thread *t = kt_self();

	if (!kt_load(&lean_used, relaxed))
		lean_start();
	if (t == &ktrace__idle) {
		if (!ktrace__ensure_init() || (t = ktrace__self_alloc()) == NULL)
			return NULL;
	}
	if (KT_UNLIKELY(t->in_vfork)) {
		ktrace__count_loss(KTRACE_LOSS_VFORK, 1);
		return NULL;
	}
	if (t->nest) {
		ktrace__count_loss(KTRACE_LOSS_NESTED, 1);
		return NULL;
	}
	t->nest++;
	if (ktrace__thread_ready(t) != 0) {
		t->nest--;
		return NULL;
	}
	return t;
}

/*
 * TWO_WAYS.  A thread's cache (fcache) keys a lean function by r, the end
 * of its entry site; the asm looks in r's first slot (KT_FC_LEAN_SLOT:
 * address bits 4..14), the C fast path then in its second
 * (KT_FC_LEAN_SLOT2).  With one slot, two recorded functions 32 KiB apart
 * evicted each other, and each call of the one not cached took the whole
 * slow path (~4 k cycles: the tables below, often a cache and TLB miss
 * each): 540-800 of SQLite's ~1,300 full slow entries a short run
 * (counted), ~1 ms.  A new entry takes r's first slot if free, else its
 * second if free, else the first.  Either slot may hold a function whose
 * first slot is another, which only costs a miss later.
 */
static KT_NOINSTR uint64_t *cache_slot(struct kt_thread *t, uint64_t r)
{
	uint64_t *a = &t->fcache[KT_FC_LEAN_SLOT(r)], *b = &t->fcache[KT_FC_LEAN_SLOT2(r)];

	if (*a >> 16 == r || (*b >> 16 != r && (*a == 0 || *b != 0)))
		return a;
	return b;
}

/*
 * CACHED.  A call of a function this thread met before (its cache entry
 * is r's: a learning call, or one that came here only for a full block
 * or a frame check) needs none of a first call's look-ups: the entry
 * holds its event and skip flags, and lf[] its entry site.  The look-ups
 * were most of a learning call's cost, two probes of large tables (the
 * sites by r, the compact ids by address) and a read of the code before
 * the site (endbr64?), a cache miss and often a TLB miss each,
 * LEARN_CALLS times for each function: SQLite's short run made ~14 k
 * learning calls with 32 of them.  The flags are this thread's to trust:
 * a thread adopting a new mute epoch sets its cache's skip flags as of
 * that epoch (filter.c), so an entry's are those of the epoch it holds.
 * The function's lf[] entry, or NULL: take the whole path.
 */
static KT_NOINSTR struct lfn *cached_call(uint64_t r, uint64_t e)
{
	uint32_t id = ((uint32_t)e & KTRACE_EVENT_MASK) - KTRACE_EV_ENTER_BASE;
	struct lfn *l;

	if ((e >> 16) != r || lf_state(id) != LS_READY)
		return NULL;
	l = &lf[id];
	return l->site + l->len == r ? l : NULL;
}

KT_NOINSTR void ktrace__lean_enter_slow(uint64_t r, uint64_t *slot)
{
	struct kt_thread *t = slow_begin();
	uint64_t site = 0, fn, *ce, e;
	uint32_t ev, skip, learn, nth;
	struct lfn *l;
	int len;

	if (t == NULL)
		return;
	kt_add(&n_slow_in, 1, relaxed);   /* a statistic (tests) */
	ktrace__filter_adopt(t);
	close_below(t, (uint64_t)slot, 1);
	ce = cache_slot(t, r);
	e = *ce;
	if ((l = cached_call(r, e)) != NULL) {
		/* CACHED: its event and skip flags from the cache entry;
		 * fn as the fast path has it (r: only an event-0 record, one
		 * without a compact id, is by address) */
		ev = (uint32_t)e & KTRACE_EVENT_MASK;
		skip = (uint32_t)e & KT_FC_SKIP;
		fn = r;
	} else {
		len = entry_site(r, &site);
		if (len == 0) {   /* not a compiler's entry site: nothing to attribute */
			ltop_sync(t);
			t->nest--;
			return;
		}
		fn = site_fn(site);
		ev = ktrace__func_event(fn);
		skip = ev ? ktrace__filter_flags(ev, t->mute_epoch) : 0;
		l = note_fn(ev, site, len);
	}
	nth = learning(l, skip);
	learn = nth ? KT_FC_LEARN : 0;
	if (skip & KT_FC_MUTED)
		t->lskip++;   /* reported at the next adoption (filter.c) */
	/* Not cached while another thread is noting the function (its
	 * claim, LS_CLAIMED): cached without LEARN, this thread would not
	 * learn its exits, and nothing empties the cache now (filter.c's
	 * adoption keeps it).  The last learning call caches the entry
	 * without LEARN (its own frame still learns): with LEARN the
	 * thread's next call came here too only to learn nothing, 1 in 3
	 * of the learning's slow entries in SQLite's short run. */
	if (ev && (l != NULL || !noting(ev)))
		__atomic_store_n(ce, (r << 16) | skip | (nth < LEARN_CALLS ? learn : 0) | ev,
		                 __ATOMIC_RELAXED);
	if (t->lsp >= KT_LEAN_DEPTH) {
		ktrace__count_loss(KTRACE_LOSS_LEAN_DEPTH, 1);
	} else if (!skip || learn) {
		uint32_t n = t->lsp;
		uint32_t fl = (learn ? KT_LF_LEARN : 0) | (skip ? KT_LF_SKIP : 0);

		if (!skip)
			ktrace__record_func(t, fn, ev, 0);
		/* as the fast paths push (a single write lost this call's
		 * exit to a handler's frame, seen under TSan) */
		ktrace__lframe_push(t, n, (uint64_t)slot, fn, ev, fl);
	}
	ltop_sync(t);
	t->nest--;
}

/*
 * NESTED_EXIT.  An exit that comes to the slow path while the thread is
 * in it already: a traced signal handler that interrupted the library
 * (slow_begin's nesting guard).  The handler's own frame must go all the
 * same.  Left on the lean stack, below the frames of the code the handler
 * interrupted, it was taken by that code for its own: the interrupted
 * exit path popped it in place of its call's frame (that call's exit
 * lost, and the calls after it nested under it), or the next handler's
 * calls at the same depth matched it (an exit without its entry).  Seen
 * in test_e2e_lean's storm under TSan, which runs handlers at the
 * library's atomics, 1 run in ~25 under load; natively a signal can land
 * at each of those points too.  The exit is recorded if the rseq append
 * has room; the rest of the slow path (a block claim, the core lock) may
 * wait for what the interrupted code holds, so otherwise it is counted
 * lost (NESTED).  Frames below this one (a handler that longjmp'ed out
 * of its calls) go too, unrecorded.  The handler's frames are the only
 * ones at or below its own stack: the interrupted code's lie above.
 */
static KT_NOINSTR void nested_exit(struct kt_thread *t, uint64_t slot)
{
	while (t->lsp > 0) {
		struct kt_lframe *f = &t->lstk[t->lsp - 1];

		if (f->slot > slot || slot - f->slot > FAR_STACK)
			break;
		if (!(f->flags & KT_LF_SKIP) &&
		    (f->slot != slot || f->ev == 0 || !ktrace__try_fast(t, f->ev | KTRACE_EV_EXIT_FLAG)))
			ktrace__count_loss(KTRACE_LOSS_NESTED, 1);
		lsp_set(t, t->lsp - 1);
	}
	ltop_sync(t);
}

KT_NOINSTR void ktrace__lean_exit_slow(uint64_t r, uint64_t *slot)
{
	struct kt_thread *t = kt_self();

	if (t != &ktrace__idle && t->nest && !t->in_vfork) {
		nested_exit(t, (uint64_t)slot);
		return;
	}
	t = slow_begin();
	if (t == NULL)
		return;
	kt_add(&n_slow_out, 1, relaxed);   /* a statistic (tests) */
	/* A new mute set is adopted here too: a thread in the fast path comes
	 * here only when a block fills, and a call pattern of a fixed length
	 * can make that an exit every time for a long while (1.4 ms measured,
	 * recording a muted hot function at full rate). */
	ktrace__filter_adopt(t);
	close_below(t, (uint64_t)slot, 0);
	if (t->lsp > 0 && t->lstk[t->lsp - 1].slot == (uint64_t)slot) {
		struct kt_lframe *f = &t->lstk[t->lsp - 1];

		if (f->flags & KT_LF_LEARN)
			learn_exit(f->ev, r);
		if (!(f->flags & KT_LF_SKIP))
			ktrace__record_func(t, f->fn, f->ev, KTRACE_EV_EXIT_FLAG);
		lsp_set(t, t->lsp - 1);
	}
	ltop_sync(t);
	t->nest--;
}

/* Is there an entry site calling __fentry__ as l's does in [a, e)?  (A
 * function never called, so not in lf[], whose code lies between.)  The
 * writer thread, under the loader's lock, with [a, e) in one code
 * segment. */
static KT_NOINSTR int entry_between(const struct lfn *l, uint64_t a, uint64_t e)
{
	uint8_t o[7], b[4];
	int32_t d;
	uint64_t want;

	memcpy(o, l->orig, sizeof(o));
	memcpy(&d, &o[l->len - 4], 4);
	want = l->site + l->len + (uint64_t)(int64_t)d;   /* __fentry__, or its GOT slot */
	for (uint64_t p = a; p + 5 <= e; p++) {
		uint8_t c = code_byte(p);

		if (c == 0xe8) {   /* call rel32 (or the end of "addr32 call") */
			code_read(b, p + 1, 4);
			memcpy(&d, b, 4);
			if (p + 5 + (uint64_t)(int64_t)d == want)
				return 1;
		} else if (c == 0xff && p + 6 <= e && code_byte(p + 1) == 0x15) {
			code_read(b, p + 2, 4);
			memcpy(&d, b, 4);
			if (p + 6 + (uint64_t)(int64_t)d == want)
				return 1;
		}
	}
	return 0;
}

/* The PT_LOAD code segment of info holding [a, a + len) (pages: its pages
 * do, the segment need not start or end at one): [*lo, *hi) as its
 * program header gives it; 0, or -1.  Only a read+exec one: a segment
 * also writable (a section flagged "awx" puts the whole data segment
 * there) would lose its write access where a batch puts the code back
 * to read+exec; its sites are left alone and muted in the hook. */
static KT_NOINSTR int exec_segment(const struct dl_phdr_info *info, uint64_t a, uint64_t len,
                                   int pages, uint64_t *lo, uint64_t *hi)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uint64_t b = info->dlpi_addr + p->p_vaddr, e = b + p->p_memsz;

		if (pages) {
			b &= ~4095ull;
			e = (e + 4095) & ~4095ull;
		}
		if (p->p_type == PT_LOAD && (p->p_flags & (PF_R | PF_W | PF_X)) == (PF_R | PF_X) &&
		    a >= b && a + len <= e) {
			*lo = info->dlpi_addr + p->p_vaddr;
			*hi = *lo + p->p_memsz;
			return 0;
		}
	}
	return -1;
}

/* Does one code segment of info hold [a, a + len)? */
static KT_NOINSTR int in_exec(const struct dl_phdr_info *info, uint64_t a, uint64_t len)
{
	uint64_t lo, hi;

	return exec_segment(info, a, len, 0, &lo, &hi) == 0;
}

/*
 * Exit sites from sampled frameless returns (record.c: about every
 * KT_FL_EVERY-th return whose entry was not recorded, per thread).  A
 * function's exit sites are learned from its first LEARN_CALLS calls; one
 * they never took keeps calling __return__ after the function is patched
 * out, a call and a few instructions each time.  The thread only queues
 * the site (fl_q, a ring that drops the oldest when full) and wakes the
 * writer; the writer finds whose exit it is under the loader's lock, with
 * every byte it reads inside the site's code segment (a module may have
 * been unloaded since): the known function with the nearest entry at or
 * before the site, at most 64 KiB before, with no entry site of another
 * function between.  Only a muted or excluded function learns the site,
 * and the same pass patches it out.  A site in a function's cold part
 * (foo.cold, placed far from foo) may be given to the function before it;
 * the frameless function whose exit it is had its entry skipped too.
 */
#define FLQ 256
#define FLSEEN 1024
static _Atomic uint64_t fl_q[FLQ];
static _Atomic uint32_t fl_head;
static _Atomic uint32_t fl_wake;  /* a sample queued since the writer took them: 1, 2 (HINTS) */
/* Sites the writer looked at lately (cleared every FLSEEN_NS): a site it
 * could not give away (its owner not muted, or its exits waiting for an
 * open frame, EXITS_AFTER) is not queued again and again. */
static _Atomic uint64_t fl_seen[FLSEEN];
#define FLSEEN_NS 100000000LL
static int64_t fl_seen_ns;        /* writer thread: when cleared */
static uint64_t fl_sites[FLQ];    /* writer thread: this pass's, 0 = done */
static uint32_t fl_n;

static inline KT_NOINSTR uint32_t fl_hash(uint64_t site)
{
	return (uint32_t)((site * 0x9e3779b97f4a7c15ull) >> 54) % FLSEEN;
}

KT_NOINSTR void ktrace__lean_frameless(uint64_t r, uint64_t *slot)
{
	struct kt_thread *t = kt_self();
	uint64_t now = ktrace__now(), prev = 0;

	(void)slot;
	/* The next look: KT_FL_EVERY / 2 .. 3/2 away, from the counter's bits
	 * mixed (its low bits alone can keep one parity in a VM, and a loop of
	 * two frameless returns then had one of them sampled every time).
	 * The thread's last look: KT_FL_EVERY returns ago, on average (HINTS). */
	if (t != &ktrace__idle) {
		t->nfl = KT_FL_EVERY / 2 + (uint32_t)(((now * 0x9e3779b97f4a7c15ull) >> 40) % KT_FL_EVERY);
		prev = t->fl_last;
		t->fl_last = now;
	}
	/* relaxed: a filter; a stale view queues a site once more */
	if (t == &ktrace__idle || t->in_vfork || kt_load(&wx_denied, relaxed) || ktrace__sandboxed() ||
	    kt_load(&fl_seen[fl_hash(r - 5)], relaxed) == r - 5)
		return;
	/* relaxed: a sample; the wake's add (seq_cst) publishes it */
	kt_store(&fl_q[kt_add(&fl_head, 1, relaxed) % FLQ], r - 5, relaxed);
	hint_writer(&fl_wake, came_fast(prev, now, HOT_NS));
}

/* Writer thread: take the queued sites for this pass. */
static KT_NOINSTR void fl_take(void)
{
	int64_t now = ktrace__monotonic_ns();

	kt_store(&fl_wake, 0, relaxed);
	if (now - fl_seen_ns > FLSEEN_NS) {
		for (uint32_t i = 0; i < FLSEEN; i++)
			kt_store(&fl_seen[i], 0, relaxed);
		fl_seen_ns = now;
	}
	fl_n = 0;
	for (uint32_t i = 0; i < FLQ; i++) {
		uint64_t site = kt_load(&fl_q[i], relaxed)
		                    ? atomic_exchange_explicit(&fl_q[i], 0, memory_order_relaxed)
		                    : 0;

		if (site != 0 && fl_n < FLQ)
			fl_sites[fl_n++] = site;
	}
}

static KT_NOINSTR void todo_add(uint32_t id);

/* Writer thread, under the loader's lock: learn the queued sites in
 * info's code (see above). */
static KT_NOINSTR void fl_learn(const struct dl_phdr_info *info)
{
	uint32_t n = (uint32_t)ktrace__funcs_count();

	for (uint32_t k = 0; k < fl_n; k++) {
		uint64_t site = fl_sites[k], lo, hi, best = 0;
		uint32_t bid = 0;

		if (site == 0 || exec_segment(info, site, 6, 0, &lo, &hi) != 0)
			continue;
		fl_sites[k] = 0;
		kt_store(&fl_seen[fl_hash(site)], site, relaxed);
		for (uint32_t id = 0; id < n && lf_has(id); id++) {
			/* acquire: pairs with note_fn's release of site and orig */
			if (kt_load(&lf[id].st, acquire) != LS_READY)
				continue;
			uint64_t e = lf[id].site;
			if (e <= site && e > best && e >= lo && site - e < 65536) {
				best = e;
				bid = id;
			}
		}
		if (best == 0 || entry_between(&lf[bid], best + lf[bid].len, site) ||
		    ktrace__filter_flags(KTRACE_EV_ENTER_BASE + bid, UINT32_MAX) == 0)
			continue;
		learn_exit(KTRACE_EV_ENTER_BASE + bid, site + 5);
		todo_add(bid);   /* out in this pass */
	}
}

/*
 * A C++ exception was caught: the frames it unwound (below the catching
 * function's, so below our caller's stack pointer) are gone; close them
 * now.  Then the C++ runtime's own.
 */
void *__cxa_begin_catch(void *e);

/* Weak: a program that links the C++ runtime statically keeps its own
 * (its frames are then closed at the next lean entry or exit). */
__attribute__((visibility("default"), weak)) KT_NOINSTR void *__cxa_begin_catch(void *e)
{
	static void *(*real)(void *);
	void *(*fp)(void *) = __atomic_load_n(&real, __ATOMIC_RELAXED);
	struct kt_thread *t = kt_self();

	if (t != &ktrace__idle && t->lsp > 0 && t->nest == 0) {
		uint64_t sp = (uint64_t)__builtin_frame_address(0);

		t->nest++;
		while (t->lsp > 0 && t->lstk[t->lsp - 1].slot < sp) {
			struct kt_lframe *f = &t->lstk[t->lsp - 1];

			if (!(f->flags & KT_LF_SKIP) && ktrace__thread_ready(t) == 0)
				ktrace__record_func(t, f->fn, f->ev, KTRACE_EV_EXIT_FLAG);
			lsp_set(t, t->lsp - 1);
		}
		ltop_sync(t);
		t->nest--;
	}
	if (fp == NULL) {
		fp = (void *(*)(void *))dlsym(RTLD_NEXT, "__cxa_begin_catch");
		if (fp == NULL)
			abort();
		__atomic_store_n(&real, fp, __ATOMIC_RELAXED);
	}
	return fp(e);
}

/* ---- writer thread: patching ---------------------------------------------- */

static KT_NOINSTR void on_trap(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	uint64_t ip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP] - 1;
	if (si->si_code == SI_KERNEL) {
		uint64_t code = 0;
		uint32_t s1, n;
		int found;

		do {   /* the batch, read as a seqlock reader */
			/* acquire: pairs with apply()'s release of tseq (even). */
			s1 = kt_load(&tseq, acquire);
			n = s1 & 1 ? 0 : kt_load(&ntrap, relaxed);
			found = 0;
			for (uint32_t i = 0; i < n && i < MAXBATCH; i++)
				/* relaxed: checked by the sequence count below */
				if (kt_load(&trap[i][0], relaxed) == ip) {
					code = kt_load(&trap[i][1], relaxed);
					found = 1;
					break;
				}
			/* acquire fence: the loads above before tseq's re-read. */
			kt_fence(acquire);
		} while (kt_load(&tseq, relaxed) != s1);
		if (found) {
			uint8_t now[8], len = (uint8_t)(code >> 56);
			uint64_t end = ip + len, to;
			int32_t d;

			memcpy(now, &code, 8);
			if (now[0] == 0xe8 || now[0] == 0x67 || now[0] == 0xff) {
				/* the call: push the return address, jump */
				memcpy(&d, &now[len - 4], 4);
				to = now[0] == 0xff ? *(const uint64_t *)(end + (int64_t)d)
				                    : end + (int64_t)d;
				uc->uc_mcontext.gregs[REG_RSP] -= 8;
				*(uint64_t *)uc->uc_mcontext.gregs[REG_RSP] = end;
				uc->uc_mcontext.gregs[REG_RIP] = (greg_t)to;
			} else if (now[0] == 0xe9) {   /* a jump to a stub (STUBS) */
				memcpy(&d, &now[1], 4);
				uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(end + (int64_t)d);
			} else {
				uc->uc_mcontext.gregs[REG_RIP] = (greg_t)end;   /* a nop */
			}
			return;
		}
		if (code_byte(ip) != 0xcc) {
			/* ours, finished since the trap: run what is there now */
			uc->uc_mcontext.gregs[REG_RIP] = (greg_t)ip;
			return;
		}
	}
	if (old_trap.sa_flags & SA_SIGINFO) {
		old_trap.sa_sigaction(sig, si, ucv);
	} else if (old_trap.sa_handler == SIG_DFL) {
		signal(SIGTRAP, SIG_DFL);   /* the trap comes again and kills */
		if (si->si_code == SI_KERNEL)
			uc->uc_mcontext.gregs[REG_RIP] = (greg_t)ip;
		else
			raise(SIGTRAP);
	} else if (old_trap.sa_handler != SIG_IGN) {
		old_trap.sa_handler(sig);
	}
}

static KT_NOINSTR void sync_cores(uint64_t page)
{
	if (sync_cmd != 0 && syscall(SYS_membarrier, sync_cmd, 0, 0) == 0) {
		sync_gen++;
		last_sync_ns = ktrace__monotonic_ns();
		return;
	}
	if (page == 0)
		return;
	sync_gen++;
	/* Changing a mapping's protection flushes its TLB entries on every
	 * core running the process: an interrupt each, which serialises. */
	mprotect((void *)page, 4096, PROT_READ | PROT_EXEC);
	mprotect((void *)page, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
}

/*
 * Register for membarrier's core serialisation, once.  Not under a seccomp
 * filter (or where the thread's mode cannot be read): an allow-list that
 * does not name membarrier kills the process on it (SIGSYS), and nothing
 * tells beforehand; the program itself never needed it (its loader did
 * need mprotect, the way serialised without it: sync_cores).  A program
 * started in such a sandbox pays a TLB flush where a membarrier would do.
 */
static KT_NOINSTR void sync_setup(void)
{
	static int done;

	if (done)
		return;
	done = 1;
	if (ktrace__seccomp_mode(1) != 0)
		return;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0)
		sync_cmd = MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE;
	else if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		sync_cmd = MEMBARRIER_CMD_PRIVATE_EXPEDITED;
}

/* The process's threads, from /proc/self/stat (0: not known). */
static KT_NOINSTR int nthreads(void)
{
	char b[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), n = 0;
	ssize_t k;
	char *p;

	if (fd < 0)
		return 0;
	k = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (k <= 0)
		return 0;
	b[k] = 0;
	if ((p = strrchr(b, ')')) == NULL)
		return 0;
	for (int f = 2; *p && f < 20; p++)   /* field 20: num_threads */
		if (*p == ' ')
			f++;
	while (*p >= '0' && *p <= '9')
		n = n * 10 + (*p++ - '0');
	return n;
}

/*
 * PRECOPY.  The executable's code is a private file mapping: the first
 * write to one of its pages (a batch's, P1 or W) copies the page, and the
 * copy flushes the page's old translation on every core running the
 * program, an interrupt each (SQLite's short run: 105 pages, about 100 of
 * the 147 interrupts left; Lua's: 31).  While the process has one thread
 * nobody else runs it and nothing is interrupted, so at init a lean
 * executable's code segments are copied at once: made writable, each
 * page faulted in for writing, then read+exec again.  The cost is the
 * code's size in private memory, pages a long run's batches copy anyway
 * where they patch; nothing is done above PRECOPY_MAX, under a seccomp
 * filter (ktrace__lean_init), for a shared
 * library (loaded before init or not, it may be mapped by many processes
 * and is copied page by page as it is patched), or where code cannot be
 * made writable (the writer finds that out at its first batch and says
 * so: W^X below).
 *
 * A lean executable: its main begins (after an endbr64) with a call of
 * __fentry__, direct, through its GOT slot, or through a PLT entry whose
 * slot is bound.  main is found from the entry point: glibc's _start
 * loads it into %rdi ("lea main(%rip)", "mov main@GOTPCREL(%rip)" or
 * "mov $main") just before it calls __libc_start_main.  Every address
 * read is inside one of the executable's segments.
 */
#define PRECOPY_MAX (64ull << 20)
void __fentry__(void);   /* record.c */

/* Is [a, a + n) inside a readable loaded segment of info (code: an exec
 * one)?  No info: yes (ktrace__lean_owns: code reached from a function's
 * own address, without the loader's lock). */
static KT_NOINSTR int in_load(const struct dl_phdr_info *info, uint64_t a, uint64_t n, int code)
{
	if (info == NULL)
		return 1;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uint64_t b = info->dlpi_addr + p->p_vaddr;

		if (p->p_type == PT_LOAD && (p->p_flags & PF_R) && (!code || (p->p_flags & PF_X)) &&
		    a >= b && a + n <= b + p->p_memsz && a + n >= a)
			return 1;
	}
	return 0;
}

/* The 8 bytes at a, if a segment of info holds them; 0 if not. */
static KT_NOINSTR uint64_t load_word(const struct dl_phdr_info *info, uint64_t a)
{
	uint64_t v = 0;

	if (in_load(info, a, 8, 0))
		memcpy(&v, (const void *)(uintptr_t)a, 8);
	return v;
}

/* Where the call or jump at p (opcode bytes n, then a rel32) leads: its
 * target, or the word in the slot it reads (slot != 0). */
static KT_NOINSTR uint64_t rel_target(const struct dl_phdr_info *info, uint64_t p, int n,
                                      int slot)
{
	uint8_t b[4];
	int32_t d;
	uint64_t t;

	code_read(b, p + (uint64_t)n, 4);
	memcpy(&d, b, 4);
	t = p + (uint64_t)n + 4 + (uint64_t)(int64_t)d;
	return slot ? load_word(info, t) : t;
}

/* The code at a, past an endbr64 if one is there: its address, and its
 * first 4 bytes in c.  [a, a + 8) is code. */
static KT_NOINSTR uint64_t past_endbr(uint64_t a, uint8_t *c)
{
	static const uint8_t endbr[4] = {0xf3, 0x0f, 0x1e, 0xfa};

	code_read(c, a, 4);
	if (memcmp(c, endbr, 4) != 0)
		return a;
	code_read(c, a + 4, 4);
	return a + 4;
}

/* Does the code at f (in an exec segment of info) begin with a call of
 * __fentry__? */
static KT_NOINSTR int calls_fentry(const struct dl_phdr_info *info, uint64_t f)
{
	uint64_t t = 0, want = (uint64_t)(uintptr_t)&__fentry__;
	uint8_t c[4];

	if (!in_load(info, f, 16, 1))
		return 0;
	f = past_endbr(f, c);
	if (c[0] == 0xe8)
		t = rel_target(info, f, 1, 0);
	else if (c[0] == 0x67 && c[1] == 0xe8)
		t = rel_target(info, f, 2, 0);
	else if (c[0] == 0xff && c[1] == 0x15)
		return rel_target(info, f, 2, 1) == want;
	else
		return 0;   /* not a call (the PLT look below would read at 0) */
	if (t == want)
		return 1;
	/* a PLT entry: [endbr64] [bnd] jmp *slot(%rip) */
	if (!in_load(info, t, 16, 1))
		return 0;
	t = past_endbr(t, c);
	if (c[0] == 0xf2)
		code_read(c, ++t, 2);
	return c[0] == 0xff && c[1] == 0x25 && rel_target(info, t, 2, 1) == want;
}

/* main's address from _start's code at entry; 0 if not found. */
static KT_NOINSTR uint64_t find_main(const struct dl_phdr_info *info, uint64_t entry)
{
	uint8_t c[64];

	if (!in_load(info, entry, sizeof(c), 1))
		return 0;
	code_read(c, entry, sizeof(c));
	for (uint32_t i = 0; i + 7 <= sizeof(c); i++) {
		if (c[i] == 0x48 && c[i + 1] == 0x8d && c[i + 2] == 0x3d)   /* lea rel(%rip), %rdi */
			return rel_target(info, entry + i, 3, 0);
		if (c[i] == 0x48 && c[i + 1] == 0x8b && c[i + 2] == 0x3d)   /* mov rel(%rip), %rdi */
			return rel_target(info, entry + i, 3, 1);
		if (c[i] == 0x48 && c[i + 1] == 0xc7 && c[i + 2] == 0xc7) {   /* mov $imm32, %rdi */
			int32_t v;

			memcpy(&v, c + i + 3, 4);
			return (uint64_t)(int64_t)v;
		}
		if (c[i] == 0xff && c[i + 1] == 0x15)   /* the call: no main before it */
			return 0;
	}
	return 0;
}

static uint64_t exe_lo, exe_hi;   /* a lean executable's code: its exec segments' span */

/* Is the executable (the first module listed) built in the lean mode?
 * Into *(int *)arg; if it is, its code's span into exe_lo, exe_hi. */
static KT_NOINSTR int lean_exe_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	uint64_t entry = getauxval(AT_ENTRY), m;

	(void)size;
	*(int *)arg = entry != 0 && (m = find_main(info, entry)) != 0 && calls_fentry(info, m);
	for (int i = 0; *(int *)arg && i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uint64_t a = info->dlpi_addr + p->p_vaddr;

		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X))
			continue;
		if (exe_lo == 0 || a < exe_lo)
			exe_lo = a;
		if (a + p->p_memsz > exe_hi)
			exe_hi = a + p->p_memsz;
	}
	return 1;
}

static KT_NOINSTR int precopy_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	uint64_t total = 0;

	(void)size;
	(void)arg;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < info->dlpi_phnum; i++) {
			const ElfW(Phdr) *p = &info->dlpi_phdr[i];
			uint64_t a = (info->dlpi_addr + p->p_vaddr) & ~4095ull;
			uint64_t e = (info->dlpi_addr + p->p_vaddr + p->p_memsz + 4095) & ~4095ull;

			/* read+exec only, as exec_segment(): a writable one
			 * must stay writable */
			if (p->p_type != PT_LOAD ||
			    (p->p_flags & (PF_R | PF_W | PF_X)) != (PF_R | PF_X))
				continue;
			if (pass == 0) {
				total += e - a;
				continue;
			}
			if (total > PRECOPY_MAX)
				return 1;
			if (mprotect((void *)a, e - a, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
				/* W^X, or no memory for the copy: the writer's
				 * first batch finds out and says so */
				mprotect((void *)a, e - a, PROT_READ | PROT_EXEC);
				return 1;
			}
			/* Before Linux 5.14 (EINVAL): the same byte written
			 * back at each page, no store of another thread's to
			 * race with (there is none).  Other errors (ENOMEM):
			 * no copy, as the batches would find too. */
			if (ktrace__populate_write((void *)a, e - a) != 0 && errno == EINVAL)
				for (uint64_t q = a; q < e; q += 4096)
					code_poke(q, code_byte(q));
			mprotect((void *)a, e - a, PROT_READ | PROT_EXEC);
		}
	return 1;
}

/* At init, with one thread: a lean executable's code copied (PRECOPY). */
static KT_NOINSTR void precopy(void)
{
	ktrace__phdr_iterate(precopy_cb, NULL);
}

/*
 * At init (before the writer thread exists): registering for membarrier
 * costs microseconds while the process has one thread, but a grace period
 * once it has several (6-22 ms measured on the 2-core VM), which the
 * writer would otherwise spend just before its first patch, while every
 * call of the program's hot functions is still recorded.
 */
static int tables_at_init;   /* lean_start ran in ktrace__lean_init */

/* Init failed after ktrace__lean_init: tracing is off for good, and the
 * tables it faulted in go back (they would stay resident for nothing). */
KT_NOINSTR void ktrace__lean_init_undo(void)
{
	if (!tables_at_init)
		return;
	tables_at_init = 0;
	unpopulate(lf, sizeof(lf));
	unpopulate(sites, sizeof(sites));
	kt_store(&lf_pop, 0, relaxed);
	kt_store(&lean_used, 0, relaxed);
}

KT_NOINSTR void ktrace__lean_init(void)
{
	int held = ktrace__held_threads();   /* start-up's read (sched.c) */
	int lean_exe = 0, one = (held ? held : nthreads()) == 1;

	if (one)
		sync_setup();
	ktrace__phdr_iterate(lean_exe_cb, &lean_exe);
	if (!lean_exe)
		return;   /* a lean library's tables: at its first call (lean_start) */
	/* The tables, here rather than at the first call: that came just
	 * as the writer started, and the populate holds the mapping lock
	 * ~0.3 ms, which the writer's first mmap waited for (its first
	 * decision with it, while every call was recorded). */
	lean_start();
	tables_at_init = 1;
	/* filter off: nothing is patched out; under a seccomp filter an
	 * mprotect it does not expect may kill the process, and this one
	 * is optional (the batches make theirs when they must, as before) */
	if (one && ktrace__cfg.filter && ktrace__seccomp_mode(0) == 0)
		precopy();
}

static KT_NOINSTR void patch_setup(void)
{
	static int done;
	struct sigaction sa;

	if (done)
		return;
	done = 1;
	sync_setup();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTRAP, &sa, &old_trap) == 0)
		trap_installed = 1;
}

static KT_NOINSTR int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * LINGER.  A module's code, once made writable for a batch, stays so
 * while batches keep coming: it goes back to read+exec LINGER_NS after the
 * last batch, or OPEN_MAX_NS after it was opened, whichever comes first
 * (the writer wakes for it), and in a fork child at once.  Each mprotect
 * back to read+exec flushes the TLB of every core running the program,
 * an interrupt each, and the interrupt was the cost: SQLite's 0.09 s run
 * makes ~60 batches in its first 100 ms, and keeping its code writable
 * between them made it 3-4 % faster against the plain build (a sync per
 * batch instead, a membarrier, cost as much as the flush).  A close and
 * the open after it cost more than their interrupt: the open rewrites
 * every page table entry of the segment under the mapping lock (0.9 us
 * a page on the 2-core VM, 0.2 ms for SQLite's 210 pages; a close 0.1-0.2
 * us a page), and the close's flush of the whole range empties the
 * program's TLB (and a hypervisor that shadows page tables may rebuild them).
 * With 10 ms and 50 ms, SQLite's short run closed and reopened its code
 * 6-7 times (under strace); with 30 ms and 200 ms at most once, and it
 * ran 1-2 % faster against the plain build (1.123x -> 1.100x, 1.085x ->
 * 1.078x, 41 interleaved pairs each; Lua's 1.115x -> 1.096x).  What is
 * opened is the runs of pages a batch writes, each grown to hold the
 * next batch's runs near it (MERGE_GAP, orng_open): adding a permission
 * needs no flush, and a later batch's runs already open cost a call that
 * changes nothing.  The whole code segment was opened at once before:
 * every page's entry rewritten at each open, under the mapping lock:
 * another thread's mmap and munmap waited up to 26-31 ms for it in a
 * program with 32 MiB of code here (bench/lean_bigcode.sh; 0.3-2 ms
 * since, as with ktrace off).  The
 * price: code is writable for at most OPEN_MAX_NS at a time while the
 * budget is patching (longer only while the writer is busy elsewhere: a
 * snapshot), and exits wait for a serialising event (EXITS_AFTER).
 * Restored under the loader's lock, per segment (one mprotect from its
 * first open run to its last), matching the module's code segment as
 * its program header gives it, so a module unloaded since is skipped; a
 * run kept open is trusted by later batches only while no module was
 * unloaded (dlpi_subs), since another may have been loaded at its place.
 */
#define LINGER_NS 30000000LL
#define MERGE_GAP (64u << 10)   /* bytes between two runs opened as one, at most */
#define OPEN_MAX_NS 200000000LL
#define NORNG 64
struct orng {
	uint64_t seg, seg_end;   /* a module's code segment, as its program header says */
	uint64_t a, len;         /* a run of its pages made writable */
	uint64_t subs;           /* the loader's unload count then (dlpi_subs) */
};
static struct orng orng[NORNG];   /* writer thread (and a fork child), under patch_lock */

/*
 * The writer's walks over the modules that write code or the ranges
 * (orng_tick, lean_tick): patch_lock is taken inside the walk, at its
 * first callback, once the loader's lock is held, so that the writer
 * never holds patch_lock while it waits for the loader's lock (a program
 * thread in dl_iterate_phdr).  A fork takes ktrace__phdr_iterate's lock
 * first, for at most a second, then patch_lock (the handlers' order,
 * init.c): the writer holds patch_lock only while it writes, which waits
 * for no program thread, and a fork child never gets half a batch.
 * Returns with patch_lock held.
 */
struct patch_walk {
	int (*cb)(struct dl_phdr_info *, size_t, void *);
	void *arg;
	int locked;
};

static KT_NOINSTR int patch_walk_cb(struct dl_phdr_info *info, size_t size, void *a)
{
	struct patch_walk *w = a;

	if (!w->locked) {
		pthread_mutex_lock(&patch_lock);
		w->locked = 1;
	}
	return w->cb(info, size, w->arg);
}

static KT_NOINSTR void patch_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
	struct patch_walk w = {cb, arg, 0};

	ktrace__phdr_iterate(patch_walk_cb, &w);
	if (!w.locked)   /* no module: the loader's lock is not waited for now */
		pthread_mutex_lock(&patch_lock);
}
static uint32_t n_orng;
static int64_t open_since_ns, open_last_ns;

/* Is o an open run of the code segment [lo, hi) of a module loaded since
 * the loader's unload count was subs? */
static KT_NOINSTR int orng_in(const struct orng *o, uint64_t lo, uint64_t hi, uint64_t subs)
{
	return o->len != 0 && o->seg == lo && o->seg_end == hi && o->subs == subs;
}

/* [*a, *e) widened to hold [b, f). */
static KT_NOINSTR void widen(uint64_t *a, uint64_t *e, uint64_t b, uint64_t f)
{
	*a = b < *a ? b : *a;
	*e = f > *e ? f : *e;
}

/* Is [a, a + len) in a run of a code segment of info kept open?  Only
 * while no module was unloaded since it was opened: another may lie
 * there now. */
static KT_NOINSTR int orng_has(const struct dl_phdr_info *info, uint64_t a, uint64_t len)
{
	for (uint32_t k = 0; k < n_orng; k++)
		if (orng[k].len != 0 && orng[k].subs == info->dlpi_subs && a >= orng[k].a &&
		    a + len <= orng[k].a + orng[k].len)
			return 1;
	return 0;
}

/* The run of pages [a, a + len) of one code segment writable, kept open
 * (LINGER): 1; 0 when it cannot be kept (no room, not in one segment, or
 * no memory to make it writable): the caller opens the run alone; -1:
 * mprotect refused (W^X).  Only the run: making a whole segment writable
 * rewrote every page table entry of it under the mapping lock, ~0.9 us a
 * page on the 2-core VM (SQLite's 211 pages: 0.2 ms), while the program's
 * mmap, munmap and brk waited.
 *
 * An entry says what may be writable, so that the close covers it; what
 * a batch writes is made writable by the batch itself (P1 makes each of
 * its runs writable again, kept or not).  So an entry may claim more than
 * is writable, never less: a grow that fails is recorded all the same
 * (its mprotect may have changed a part) and takes nothing back, since
 * the runs of the batch before this one may lie inside it (written after
 * P1, unprotected). */
static KT_NOINSTR int orng_open(const struct dl_phdr_info *info, uint64_t a, uint64_t len)
{
	uint64_t lo, hi, plo = a & ~4095ull, phi = (a + len + 4095) & ~4095ull, gap, best_gap = ~0ull;
	uint32_t k = NORNG, best = NORNG, at;
	int grown, r = 1;

	if (exec_segment(info, a, len, 1, &lo, &hi) != 0)
		return 0;
	/* A run of the same segment near it is grown to hold it (the one
	 * nearest, however far, once every entry is taken: it stays one
	 * segment's code); else a free entry. */
	for (uint32_t j = 0; j < n_orng; j++) {
		if (orng[j].len == 0) {
			k = k == NORNG ? j : k;
			continue;
		}
		if (!orng_in(&orng[j], lo, hi, info->dlpi_subs))
			continue;
		gap = phi < orng[j].a ? orng[j].a - phi
		      : plo > orng[j].a + orng[j].len ? plo - (orng[j].a + orng[j].len) : 0;
		if (gap < best_gap) {
			best_gap = gap;
			best = j;
		}
	}
	if (k == NORNG && n_orng < NORNG)
		k = n_orng;
	if (best != NORNG && (best_gap <= MERGE_GAP || k == NORNG)) {
		at = best;
		widen(&plo, &phi, orng[at].a, orng[at].a + orng[at].len);
		/* and every other run of the segment it now meets, which it
		 * takes in (entries never nest: a table of nested runs would
		 * fill and grow far) */
		do {
			grown = 0;
			for (uint32_t j = 0; j < n_orng; j++)
				if (j != at && orng_in(&orng[j], lo, hi, info->dlpi_subs) &&
				    orng[j].a <= phi && orng[j].a + orng[j].len >= plo) {
					widen(&plo, &phi, orng[j].a, orng[j].a + orng[j].len);
					orng[j].len = 0;
					grown = 1;
				}
		} while (grown);
	} else if (k == NORNG) {
		return 0;
	} else {
		at = k;
	}
	if (mprotect((void *)plo, phi - plo, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
		int e = errno;

		if (at != best) {
			/* A new run, apart from every other: put back what may
			 * have changed (ENOMEM: the run's pages charged as
			 * writable private memory, or a part changed). */
			if (e != EACCES && e != EPERM)
				mprotect((void *)plo, phi - plo, PROT_READ | PROT_EXEC);
			return e == EACCES || e == EPERM ? -1 : 0;
		}
		r = e == EACCES || e == EPERM ? -1 : 0;   /* grown: recorded below */
	}
	if (n_orng == 0)
		open_since_ns = ktrace__monotonic_ns();
	orng[at].seg = lo;
	orng[at].seg_end = hi;
	orng[at].a = plo;
	orng[at].len = phi - plo;
	orng[at].subs = info->dlpi_subs;
	if (at == n_orng)
		n_orng++;
	return r;
}

/* Back to read+exec: the open runs of each segment that is still a code
 * segment of a loaded module, as it was (an unloaded one went with its
 * module); one mprotect a segment, from its first open run to its last
 * (its pages between are its code, read+exec already): one flush of
 * every core running the program, not one a run. */
static KT_NOINSTR int orng_close_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	for (uint32_t k = 0; k < n_orng; k++) {
		uint64_t lo, hi, a, e;

		if (orng[k].len == 0 || exec_segment(info, orng[k].seg, 1, 0, &lo, &hi) != 0 ||
		    lo != orng[k].seg || hi != orng[k].seg_end)
			continue;
		a = orng[k].a;
		e = orng[k].a + orng[k].len;
		for (uint32_t j = k + 1; j < n_orng; j++)
			if (orng_in(&orng[j], lo, hi, orng[k].subs)) {
				widen(&a, &e, orng[j].a, orng[j].a + orng[j].len);
				orng[j].len = 0;
			}
		mprotect((void *)a, e - a, PROT_READ | PROT_EXEC);
		orng[k].len = 0;
	}
	return 0;
}

/* Writer thread: the open code back to read+exec when due; else *wait_ns
 * bounded by when it is due.  (The flush is not counted as serialising:
 * it need not interrupt anyone, e.g. AMD's INVLPGB; EXITS_AFTER.) */
static KT_NOINSTR void orng_tick(int64_t now, int64_t *wait_ns)
{
	int64_t due;

	if (n_orng == 0)
		return;
	due = open_last_ns + LINGER_NS < open_since_ns + OPEN_MAX_NS ? open_last_ns + LINGER_NS
	                                                             : open_since_ns + OPEN_MAX_NS;
	if (now < due) {
		if (wait_ns && due - now < *wait_ns)
			*wait_ns = due - now;
		return;
	}
	int64_t t0 = ktrace__monotonic_ns();

	patch_iterate(orng_close_cb, NULL);
	n_orng = 0;
	pthread_mutex_unlock(&patch_lock);
	ktrace__filter_own_mm(t0, ktrace__monotonic_ns());
}

/* P1..P5 over pend[0..n), sites of the module info (any_in: some go back
 * in); 0, or -1 when the pages could not be made writable (nothing
 * written).  Pages of a code segment kept open (LINGER) need neither P1
 * nor P5. */
static KT_NOINSTR int apply(const struct dl_phdr_info *info, uint32_t n, int any_in)
{
	static uint64_t pages[2 * MAXBATCH], plen[2 * MAXBATCH];
	static uint8_t kept[2 * MAXBATCH];   /* the run lies in an open segment (LINGER) */
	uint32_t np = 0, k = 0, i;

	for (i = 0; i < n; i++) {
		pages[np++] = pend[i].site & ~4095ull;
		pages[np++] = (pend[i].site + pend[i].len - 1) & ~4095ull;
	}
	ktrace__sort(pages, np, sizeof(pages[0]), cmp_u64);   /* qsort() would malloc */
	/* Runs of adjacent pages: one mprotect (and one TLB flush, an
	 * interrupt on every core running the program) per run, not per
	 * page. */
	for (i = 0; i < np; i++)
		if (k > 0 && pages[i] <= pages[k - 1] + plen[k - 1] - 4096) {
			continue;   /* a page the run has */
		} else if (k > 0 && pages[i] == pages[k - 1] + plen[k - 1]) {
			plen[k - 1] += 4096;
		} else {
			pages[k] = pages[i];
			plen[k++] = 4096;
		}
	np = k;
	patch_setup();
	/* Without membarrier, one run from the first page to the last when
	 * the module's code segment holds it all: each mprotect back to
	 * read+exec (P5) flushes the TLB of every core running the program,
	 * an interrupt each (~10 us of the interrupted thread's time in a VM,
	 * where it is a hypervisor exit), and the pages between are the
	 * module's code too.  With it the runs stay open (LINGER) and are
	 * closed at once, per segment: runs at most MERGE_GAP apart are
	 * one (an mprotect call costs about what rewriting 16 pages' entries
	 * does), the others stay apart, so that the pages made writable are
	 * about those written (orng_open). */
	if (sync_cmd == 0) {
		if (np > 1 && in_exec(info, pages[0], pages[np - 1] + plen[np - 1] - pages[0])) {
			plen[0] = pages[np - 1] + plen[np - 1] - pages[0];
			np = 1;
		}
	} else {
		for (i = k = 0; i < np; i++)
			if (k > 0 && pages[i] - (pages[k - 1] + plen[k - 1]) <= MERGE_GAP &&
			    in_exec(info, pages[k - 1], pages[i] + plen[i] - pages[k - 1])) {
				plen[k - 1] = pages[i] + plen[i] - pages[k - 1];
			} else {
				pages[k] = pages[i];
				plen[k++] = plen[i];
			}
		np = k;
	}
	for (i = 0; i < np; i++) {   /* P1 */
		/* A run kept open (LINGER) is made writable again all the
		 * same: the program (or another patcher) may have made it
		 * read+exec meanwhile, and adding write access flushes nothing.
		 * Without membarrier nothing lingers (EXITS_AFTER counts P5's
		 * flushes then). */
		int o = sync_cmd == 0              ? 0
		        : orng_has(info, pages[i], plen[i]) ? 1
		                                            : orng_open(info, pages[i], plen[i]);

		kept[i] = o == 1;
		if (o >= 0 && mprotect((void *)pages[i], plen[i], PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
			o = -1;
		if (o < 0) {
			int e = errno;
			while (i-- > 0)
				if (!kept[i])
					mprotect((void *)pages[i], plen[i], PROT_READ | PROT_EXEC);
			errno = e;
			return -1;
		}
	}
	/* A site whose lead bytes (FORMS) lie inside one aligned 16 bytes is
	 * written whole, in one cmpxchg16b (W); the others (nt of them,
	 * moved to the front of pend here) take the int3 sequence.  Publish
	 * those for the handler (seqlock writer): tseq odd, the entries,
	 * ntrap, tseq even; release: all of it before the int3s. */
	for (i = k = 0; i < n; i++)
		if (((pend[i].site + pend[i].first) & 15) + pend[i].lead - pend[i].first > 16 ||
		    !have_cx16() || kt_load(&force_int3, relaxed)) {
			struct pend tmp = pend[k];
			pend[k++] = pend[i];
			pend[i] = tmp;
		}
	uint32_t nt = k;
	kt_add(&tseq, 1, relaxed);
	kt_fence(release);   /* odd before the entries: pairs with the handler's acquire fence */
	for (i = 0; i < nt; i++) {
		uint64_t code = 0;

		memcpy(&code, pend[i].now, pend[i].len);
		code |= (uint64_t)pend[i].len << 56;
		kt_store(&trap[i][0], pend[i].site, relaxed);
		kt_store(&trap[i][1], code, relaxed);
	}
	kt_store(&ntrap, nt, relaxed);
	kt_add(&tseq, 1, release);
	for (i = 0; i < nt; i++)   /* P2 */
		code_poke(pend[i].site, 0xcc);
	for (i = nt; i < n; i++) {   /* W: from the first byte that changes to the end of its 16 */
		uint64_t a = pend[i].site + pend[i].first;
		uint32_t off = (uint32_t)(a & 15), len = pend[i].len - pend[i].first;

		code_set16(a & ~15ull, pend[i].now + pend[i].first, off, off + len <= 16 ? len : 16 - off);
		if (pend[i].form != FORM_NOP && pend[i].form != FORM_CALLRET)
			kt_add(pend[i].form == FORM_JUMP ? &n_jump : &n_ret, 1, relaxed);
	}
	/* A batch of whole writes out needs no sync of its own.  A core
	 * that still runs a site's old bytes a moment after the write sees
	 * the old call whole (or the new instruction whole), and the old
	 * call only reaches a hook: an entry of a muted function is skipped
	 * or, by a thread that has not adopted the mute yet, recorded with
	 * its exits still calling or jumping to a stub that is the call
	 * (EXITS_AFTER: they go out only after a later event serialised
	 * every core; an excluded function's with its entry, since none is
	 * ever recorded); an exit finds no frame.  One interrupt less per
	 * batch, 10-50 us of each thread's time in a VM.  A batch that
	 * brings sites back in (their order matters: exits before entries)
	 * or writes int3 sites syncs. */
	if (nt > 0 || any_in)
		sync_cores(pages[0]);
	if (nt > 0) {
		for (i = 0; i < nt; i++)   /* P3 */
			for (uint32_t j = 1; j < pend[i].len; j++)
				code_poke(pend[i].site + j, pend[i].now[j]);
		sync_cores(pages[0]);
		for (i = 0; i < nt; i++)   /* P4 */
			code_poke(pend[i].site, pend[i].now[0]);
		sync_cores(pages[0]);
	}
	kt_store(&ntrap, 0, release);   /* P4 is done: a trap now re-executes */
	kt_add(&n_whole, n - nt, relaxed);
	kt_add(&n_int3, nt, relaxed);
	for (i = 0; i < np; i++)   /* P5 */
		if (!kept[i]) {
			/* Without membarrier, the flush taking write access away
			 * is the serialisation counted (it interrupts every core
			 * running the program where the flush is an IPI). */
			if (mprotect((void *)pages[i], plen[i], PROT_READ | PROT_EXEC) == 0 && sync_cmd == 0)
				sync_gen++;
		}
	open_last_ns = ktrace__monotonic_ns();
	return 0;
}

/*
 * The patch a function's sites should be in: 1 = out (nops).  A muted
 * function goes out with the exit sites its first LEARN_CALLS calls took;
 * one muted before it made that many finishes learning first, for
 * LEARN_WAIT_NS at most (the writer wakes for it).  Until then each of its
 * calls still goes through both hooks to be skipped.  An exit site it
 * takes only later is learned from sampled frameless returns (fl_learn).
 * (Learning the exits again after the mute, from
 * the phase that made the function hot, cost Lua's 0.09 s run 3 %: its
 * muted functions waited up to LEARN_WAIT_NS, skipped through the hooks.)
 */
#define LEARN_WAIT_NS 2000000LL

static int64_t pass_ns;   /* writer thread: CLOCK_MONOTONIC at this pass */

static KT_NOINSTR uint8_t wanted(uint32_t id)
{
	struct lfn *l = &lf[id];
	int fo = kt_load(&force, relaxed);

	if (fo)
		return fo == 1;
	if (ktrace__filter_flags(KTRACE_EV_ENTER_BASE + id, UINT32_MAX) == 0)
		return 0;
	if (l->learned || kt_load(&l->learn, relaxed) >= LEARN_CALLS)
		return l->learned = 1;
	return l->muted_ns != 0 && pass_ns - l->muted_ns > LEARN_WAIT_NS;
}

/* This pass's functions whose sites are not all as wanted, in id order
 * (writer thread): patch_module looks at these only, not at every id in
 * every module (that was a fifth of the writer's time in SQLite's short
 * run). */
static uint32_t todo[NF], ntodo;
static uint8_t in_todo[NF];

static KT_NOINSTR void todo_add(uint32_t id)
{
	if (!in_todo[id]) {
		in_todo[id] = 1;
		todo[ntodo++] = id;
	}
}

/* Is one of id's sites not as wanted?  *due: the end of its relearning
 * by time, if that comes before *due (0: none). */
static KT_NOINSTR int needs_work(uint32_t id, int64_t *due)
{
	struct lfn *l = &lf[id];
	uint8_t w;

	/* relaxed: a hint; patch_module reads with acquire. */
	if (kt_load(&l->st, relaxed) != LS_READY)
		return 0;
	w = wanted(id);
	if (!w && !l->nop_entry && l->muted_ns != 0 && kt_load(&l->learn, relaxed) < LEARN_CALLS &&
	    !kt_load(&force, relaxed) && (*due == 0 || l->muted_ns + LEARN_WAIT_NS < *due))
		*due = l->muted_ns + LEARN_WAIT_NS;
	if (l->nop_entry != w)
		return 1;
	for (int i = 0; i < NEXIT; i++)
		if (kt_load(&l->exits[i], relaxed) > 1 && (l->nop_exit[i] != w || (l->stub[i] && !w)))
			return 1;
	return 0;
}

/* Is any site not as wanted?  Those functions go in todo[].  all: look at
 * every known function (NF loads and more: cheaper than walking the
 * modules, but a pass every 0.5 ms over ~160 KiB of tables for Lua's 700
 * functions); else only at the last pass's list, which is enough while
 * nothing that changes what is wanted happened (the caller's test: a
 * new mute or function, a learning done, a deadline, the tests' force).
 * *due: the earliest end of a muted function's relearning by time (0:
 * none), for the writer's wait. */
static KT_NOINSTR int work_to_do(int all, int64_t *due)
{
	uint32_t n = (uint32_t)ktrace__funcs_count(), k0 = 0;

	*due = 0;
	if (all) {
		for (uint32_t k = 0; k < ntodo; k++)
			in_todo[todo[k]] = 0;
		ntodo = 0;
		for (uint32_t id = 0; id < n && lf_has(id); id++)
			if (needs_work(id, due))
				todo_add(id);
		return ntodo > 0;
	}
	for (uint32_t k = 0; k < ntodo; k++) {
		uint32_t id = todo[k];

		if (needs_work(id, due))
			todo[k0++] = id;
		else
			in_todo[id] = 0;
	}
	ntodo = k0;
	return ntodo > 0;
}

struct mod_ctx {
	uint32_t n;
	uint8_t *flag[MAXBATCH];      /* nop_entry / nop_exit[] to set, or NULL */
	uint8_t to[MAXBATCH];         /* their new value */
	uint64_t *stubp[MAXBATCH];    /* lfn.stub[] to set, or NULL */
	uint64_t stubv[MAXBATCH];     /* its new value */
	struct lfn *entry_out[MAXBATCH];   /* its entry going out: entry_gen, entry_ns to set; or NULL */
};

/* Site of len gets now; lead (FORMS) is how far it differs from what is
 * there (the writer alone writes code, under patch_lock). */
static KT_NOINSTR int add(struct mod_ctx *m, uint64_t site, uint8_t len, int form,
                          const uint8_t *now, uint8_t *flag, uint8_t to)
{
	struct pend *p = &pend[m->n];
	uint8_t cur[7];

	for (uint32_t i = 0; i < m->n; i++)
		if (pend[i].site == site)
			return 0;   /* a site learned for two functions: once a batch */
	code_read(cur, site, len);
	p->site = site;
	p->len = len;
	p->form = (uint8_t)form;
	p->lead = 1;
	p->first = len;
	for (uint8_t i = 0; i < len; i++)
		if (cur[i] != now[i]) {
			p->lead = (uint8_t)(i + 1);
			if (p->first == len)
				p->first = i;
		}
	if (p->first == len)
		p->first = 0;
	memcpy(p->now, now, len);
	m->flag[m->n] = flag;
	m->to[m->n] = to;
	m->stubp[m->n] = NULL;
	m->stubv[m->n] = 0;
	m->entry_out[m->n] = NULL;
	m->n++;
	return 1;
}

/* Patching batches at most this often: the functions a program's start
 * makes hot arrive over a few ms, and each batch costs its threads an
 * interrupt per TLB flush and membarrier (10-14 us each in a VM) and the
 * traps of the int3 sites they hit meanwhile, against both hooks' skip
 * per call of a muted function not patched yet (see LEARN_WAIT_NS);
 * after the first EARLY_BATCHES, 20 ms apart. */
#define BATCH_GAP_NS 500000LL
#define BATCH_GAP_LATER_NS 20000000LL   /* after the first EARLY_BATCHES */
#define EARLY_BATCHES 128

/*
 * EXITS_AFTER.  A call whose exit site goes out while it runs leaves its
 * frame open until a hook at or above the frame's slot closes it (see the
 * file comment); a deeper call made meanwhile (its caller's next call of
 * a recorded function, whose frame may lie below the gone one's) would
 * nest under it.  So a function's exits go out at a pass whose look at
 * every thread's lean frames (open_ids, ktrace__lean_open_frames) finds
 * none of it open, and which comes after an event that serialised every
 * core running the program since the batch that took its entry out
 * (look_gen > entry_gen: a membarrier, made for it when exits wait,
 * exits_wait_sync(); a TLB flush is counted only where there is no
 * membarrier, and then nothing lingers): then no core can still be
 * running the entry's old call,
 * and no recorded call of it starts later; and a batch gap or more after
 * the entry went out (an entry taken out by an early pass, EARLY, may
 * be younger than that at the next full pass's look).  Or in the same
 * batch as the entry, if no thread ever records it (quiet(): excluded),
 * even while a learning call of it is open (the writer is woken at the
 * last one's entry: ready_hint; TSan's slow learning path once caught
 * that call open and took the exit out a batch later).  Meanwhile its
 * exits followed by a ret jump to a stub that is the call minus the call
 * (STUBS), so the wait costs little, and a function muted while a
 * recorded call of it stays open (an outer call: Lua's luaD_precall under
 * pcall) keeps that stub until the call returns (before the stubs, its
 * exits kept calling __return__: 4 % of Lua's 0.09 s run); a sibling
 * call's exit keeps its call.  Back in, the exits come first: a call
 * recorded at the entry then always finds its exits calling.  Left: a
 * thread stopped inside __fentry__ between its cache look and its push
 * for a whole batch gap or more; and the frames of threads the registry
 * could not hold (more than 4096 at once) are not seen.
 */
static uint8_t open_ids[NF];   /* writer thread: this pass's look */

/* Is id never recorded (KTRACE_EXCLUDE)?  Its flag is set before its id
 * is published, so no thread ever records a call of it, whatever its
 * cache holds: its exits may go out in the batch that takes its entry
 * out.  (Not a muted function: a thread may still be recording a call of
 * it from a cache entry read before it adopted the mute, even one whose
 * signal handler adopted it meanwhile.  Not the tests' forced patching,
 * whose functions are recorded.) */
static KT_NOINSTR int quiet(uint32_t id)
{
	return !kt_load(&force, relaxed) &&
	       ktrace__filter_flags(KTRACE_EV_ENTER_BASE + id, 0) == KT_FC_EXCLUDED;
}

/* Does the site going out still hold the bytes saved as its original?  A
 * slow path reads them byte by byte, and a batch may have written the site
 * meanwhile (another function's site, learned twice); such a site is left
 * as it is rather than later "restored" to a mix. */
static KT_NOINSTR int intact(uint64_t site, const uint8_t *orig, uint8_t len)
{
	uint8_t cur[7];

	code_read(cur, site, len);
	return memcmp(cur, orig, len) == 0;
}

/*
 * STUBS.  An exit site followed by ret (4 in 5) of a function whose entry
 * goes out becomes, in the same batch, a jump to a stub that does what
 * __return__'s first test does, without the call:
 *
 *     mov  %fs:tp, %r11              the thread's struct (ktrace__tp)
 *     cmp  %rsp, ltop8(%r11)         its innermost recorded frame's slot - 8
 *     jb   1f                        below this frame's slot: it may be ours
 *     ret                            else not recorded: return, as a ret would
 * 1:  call *target(%rip)             what the site called (__return__)
 *     ret
 *
 * At the site rsp is the frame's slot (record.c), so this is the test
 * __return__ makes at rsp - 8: the stub is the call, minus the call and a
 * countdown, and may replace it at any time.  It goes in with the entry,
 * and the site goes out (a ret) only later, under EXITS_AFTER's rules;
 * meanwhile a recorded call of the function still open (Lua's
 * luaD_precall under pcall, for the whole run) has its exit recorded
 * through it, and the calls made since the entry went out cost a jump and
 * four instructions instead of a call into __return__ (1.2 M of them in
 * Lua's 0.09 s run, ~2.4 ns each before).  One stub per call target (a
 * module's __return__@PLT), in a page of its own mapped below the module
 * within reach of a rel32 jump, written before it is made read+exec, once,
 * and never unmapped (a thread may be in it): at most STUB_PAGES.  r11 and
 * the flags are free at a call site.  ktrace__tp is initial-exec TLS, at
 * the same offset from every thread's %fs.  A sibling call's exit ("call
 * __return__; jmp f") keeps its call until it goes out, and so does an
 * exit whose 5 bytes cross an aligned 16 (1 in 4): its jump could not be
 * written whole, and the int3 sequence costs three syncs and the traps.
 */
#define STUB_PAGES 32
#define STUB_RET_OFF 18   /* the ret after "jb 1f" */
struct estub {
	uint64_t addr, target;
};
static struct estub estubs[STUB_PAGES];   /* writer thread */
static uint32_t n_estubs;
static uint64_t stub_failed[16];            /* writer thread: segments with no page near */
static uint32_t n_stub_failed;
static int stubs_off;                        /* writer thread: no stubs (TLS offset) */

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static inline KT_NOINSTR int reach(uint64_t from, uint64_t to)
{
	int64_t d = (int64_t)(to - from);

	return d > -0x7fff0000ll && d < 0x7fff0000ll;
}

/* A fresh writable page within reach of all of info's code segment
 * [lo, hi): below it (above lie the data and brk's heap). */
static KT_NOINSTR uint8_t *stub_page(uint64_t lo, uint64_t hi)
{
	for (uint64_t k = 1; k <= 256; k++) {
		uint64_t a = (lo & ~0xffffull) - k * 0x10000;
		void *p;

		if (a < (1ull << 20) || a >= lo || !reach(a, hi))
			break;
		p = mmap((void *)a, 4096, PROT_READ | PROT_WRITE,
		         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == MAP_FAILED) {
			if (errno == EEXIST)
				continue;
			break;
		}
		if ((uint64_t)p != a) {   /* a kernel before 4.17 took it as a hint */
			munmap(p, 4096);
			continue;
		}
		return p;
	}
	return NULL;
}

/* The stub for exit sites of info that call target, within reach of site;
 * 0 if there is none and none can be made. */
static KT_NOINSTR uint64_t stub_for(const struct dl_phdr_info *info, uint64_t site,
                                    uint64_t target)
{
	static int64_t tp_off = 1;
	uint64_t lo, hi, tcb;
	uint8_t *p, *c;
	int32_t d;

	for (uint32_t k = 0; k < n_estubs; k++)
		if (estubs[k].target == target && reach(site + 5, estubs[k].addr))
			return estubs[k].addr;
	if (tp_off == 1) {   /* once: ktrace__tp's offset from %fs (initial-exec) */
		__asm__("movq %%fs:0, %0" : "=r"(tcb));
		tp_off = (int64_t)((uint64_t)&ktrace__tp - tcb);
		if (tp_off < INT32_MIN || tp_off > INT32_MAX)
			stubs_off = 1;
	}
	if (stubs_off || n_estubs == STUB_PAGES || exec_segment(info, site, 1, 0, &lo, &hi) != 0)
		return 0;
	for (uint32_t k = 0; k < n_stub_failed; k++)
		if (stub_failed[k] == lo)
			return 0;
	if ((p = stub_page(lo, hi)) == NULL) {
		if (n_stub_failed < 16)
			stub_failed[n_stub_failed++] = lo;
		return 0;
	}
	memset(p, 0xcc, 4096);
	c = p;
	/* mov %fs:tp_off, %r11 */
	memcpy(c, "\x64\x4c\x8b\x1c\x25", 5);
	d = (int32_t)tp_off;
	memcpy(c + 5, &d, 4);
	c += 9;
	/* cmp %rsp, ltop8(%r11) */
	memcpy(c, "\x49\x39\xa3", 3);
	d = (int32_t)offsetof(struct kt_thread, ltop8);
	memcpy(c + 3, &d, 4);
	c += 7;
	memcpy(c, "\x72\x01\xc3", 3);   /* jb 1f; ret (STUB_RET_OFF) */
	c += 3;
	/* 1: call *target(%rip); ret */
	memcpy(c, "\xff\x15", 2);
	d = 64 - (int32_t)(c + 6 - p);
	memcpy(c + 2, &d, 4);
	c[6] = 0xc3;
	memcpy(p + 64, &target, 8);
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0) {
		munmap(p, 4096);
		stubs_off = 1;
		return 0;
	}
	estubs[n_estubs].addr = (uint64_t)p;
	estubs[n_estubs++].target = target;
	return (uint64_t)p;
}

/* A ret within reach of a call at site (call-ret form, FORMS): the one
 * in a stub page near it, made for the site's target if none is; 0 if
 * none can be.  The stubs' pages stay (a thread may be in one). */
static KT_NOINSTR uint64_t ret_near(const struct dl_phdr_info *info, uint64_t site,
                                    uint64_t target)
{
	uint64_t st;

	for (uint32_t k = 0; k < n_estubs; k++)
		if (reach(site + 5, estubs[k].addr + STUB_RET_OFF))
			return estubs[k].addr + STUB_RET_OFF;
	st = stub_for(info, site, target);
	return st ? st + STUB_RET_OFF : 0;
}

/* The site's bytes as "op rel32" to to: a jump to a stub (op e9), a call
 * of a stub page's ret (e8, call-ret form). */
static KT_NOINSTR void rel_site(uint8_t *b, uint8_t op, uint64_t s, uint64_t to)
{
	int32_t d = (int32_t)(int64_t)(to - (s + 5));

	b[0] = op;
	memcpy(b + 1, &d, 4);
}

/* What the exit site whose original bytes are orig calls. */
static KT_NOINSTR uint64_t exit_target(uint64_t s, const uint8_t *orig)
{
	int32_t d;

	memcpy(&d, orig + 1, 4);
	return s + 5 + (uint64_t)(int64_t)d;
}

/*
 * RELOAD.  A library unloaded and loaded again, at the same place (the
 * loader's choice when nothing else took it), has its functions at the
 * addresses, so the compact ids, they had: their state here says out,
 * their code holds the calls again.  Once a module was unloaded, a pass
 * after each load or unload (dlpi_adds, dlpi_subs) looks at every known
 * function: a site that says out but holds its original bytes is taken
 * as in, and goes out again as usual.  (Another
 * library at the same place holds other bytes: its sites stay as they
 * are, its functions skipped in the hooks.)
 */
static uint64_t seen_adds, seen_subs;   /* writer thread */
static int revalidate;                  /* writer thread: this pass */

static KT_NOINSTR int subs_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	((uint64_t *)arg)[0] = info->dlpi_adds;
	((uint64_t *)arg)[1] = info->dlpi_subs;
	return 1;
}

static KT_NOINSTR void reloaded(const struct dl_phdr_info *info, struct lfn *l)
{
	if (l->nop_entry && in_exec(info, l->site, l->len) && intact(l->site, l->orig, l->len)) {
		l->nop_entry = 0;
		kt_add(&n_nop, (uint64_t)-1, relaxed);
	}
	for (int i = 0; i < NEXIT; i++) {
		/* acquire: pairs with learn_exit's release. */
		uint64_t s = kt_load(&l->exits[i], acquire);

		if (s > 1 && (l->nop_exit[i] || l->stub[i]) && in_exec(info, s, 6) &&
		    intact(s, l->exit_orig[i], 5)) {
			if (l->nop_exit[i])
				kt_add(&n_nop, (uint64_t)-1, relaxed);
			l->nop_exit[i] = 0;
			l->stub[i] = 0;
		}
	}
}

/* Writer thread, before the look: does a function whose entry went out in
 * an earlier batch wait for a serialising event (EXITS_AFTER), with an
 * exit still calling __return__ (a sibling call's, one that crosses an
 * aligned 16, or one with no stub), or for SYNC_WAIT_NS already?  Then a
 * membarrier now: the only event counted as serialising (a TLB flush need
 * not interrupt anyone: AMD's INVLPGB, hypervisor flushes), and cheaper
 * than those calls.  Exits that merely jump to a stub wait up to
 * SYNC_WAIT_NS, so that one membarrier serves many functions.  (Without
 * membarrier, P5's flushes are counted and nothing lingers.) */
#define SYNC_WAIT_NS 10000000LL

/* Is id's entry out with no serialising event since (EXITS_AFTER)? */
static KT_NOINSTR int waits_sync(uint32_t id)
{
	return lf[id].nop_entry && lf[id].entry_gen >= sync_gen && !quiet(id);
}

static KT_NOINSTR int exits_wait_sync(void)
{
	int waiting = 0;

	if (sync_cmd == 0)
		return 0;
	for (uint32_t k = 0; k < ntodo; k++) {
		struct lfn *l = &lf[todo[k]];

		if (!waits_sync(todo[k]) || !wanted(todo[k]))
			continue;
		waiting = 1;
		for (int i = 0; i < NEXIT; i++)
			if (kt_load(&l->exits[i], relaxed) > 1 && !l->nop_exit[i] && !l->stub[i])
				return 1;
	}
	return waiting && pass_ns - last_sync_ns >= SYNC_WAIT_NS;
}

/* Does the site going back in hold what ktrace writes there (a nop, a
 * jump over the call, a ret, a jump to a stub, a call of a stub page's
 * ret)?  Not if another library was loaded at the place of the one it was
 * written in. */
static KT_NOINSTR int ours(uint64_t site)
{
	uint8_t c = code_byte(site), b[5];

	if (c == 0x0f || c == 0x66 || c == 0xeb || c == 0xc3 || c == 0xe9)
		return 1;
	if (c != 0xe8)
		return 0;
	code_read(b, site, 5);
	for (uint32_t k = 0; k < n_estubs; k++)
		if (exit_target(site, b) == estubs[k].addr + STUB_RET_OFF)
			return 1;
	return 0;
}

/* One module, under the loader's lock: the sites of it that must change. */
static KT_NOINSTR int patch_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct mod_ctx *m = arg;
	uint32_t id;

	(void)size;
	if (kt_load(&wx_denied, relaxed))
		return 1;
	fl_learn(info);
	if (revalidate)   /* every one, before a full batch can end the loop */
		for (uint32_t k = 0; k < ntodo; k++)
			if (kt_load(&lf[todo[k]].st, acquire) == LS_READY)
				reloaded(info, &lf[todo[k]]);
	for (uint32_t k = 0; k < ntodo; k++) {
		id = todo[k];
		struct lfn *l = &lf[id];
		/* acquire: pairs with note_fn's release of site and orig. */
		if (kt_load(&l->st, acquire) != LS_READY || !in_exec(info, l->site, l->len))
			continue;
		uint8_t want = wanted(id), buf[7];
		int exits_in = 1;

		if (m->n + 1 + NEXIT > MAXBATCH)
			break;   /* the next tick */
		for (int i = 0; i < NEXIT; i++)
			if (l->nop_exit[i] || l->stub[i])
				exits_in = 0;
		/* Out: the entry first, the exits later (to a stub at once);
		 * in: the exits first (see EXITS_AFTER, STUBS). */
		int entry_going = 0;

		if (l->nop_entry != want && (want || exits_in) &&
		    (want ? intact(l->site, l->orig, l->len) : ours(l->site))) {
			int f = site_form(l->site, l->len, 0);

			if (add(m, l->site, l->len, f, want ? out_bytes(f, l->len, l->orig, buf) : l->orig,
			        &l->nop_entry, want) && want) {
				m->entry_out[m->n - 1] = l;
				entry_going = 1;
			}
		}
		/* The exits go out once no thread has a frame of it open, at a
		 * look after an event that serialised every core since its
		 * entry went out; or with the entry, if no thread records it
		 * (quiet): its frames are only learning calls' (KT_LF_SKIP), and
		 * one whose exit went out under it is closed, recording nothing,
		 * at the next hook at or above its slot. */
		int q = quiet(id), synced = l->nop_entry && look_gen > l->entry_gen;
		int young = synced && look_ns - l->entry_ns < cur_gap;   /* the margin's wait */
		int out_now = want && (q || (!open_ids[id] && synced && !young));

		if (want && young && !q)
			margin_wait = 1;

		for (int i = 0; i < NEXIT; i++) {
			/* acquire: pairs with learn_exit's release. */
			uint64_t s = kt_load(&l->exits[i], acquire), st;
			uint8_t cur[5], now[5];
			int f;

			if (s <= 1 || !in_exec(info, s, 6))
				continue;
			if (l->stub[i])
				rel_site(cur, 0xe9, s, l->stub[i]);
			else
				memcpy(cur, l->exit_orig[i], 5);
			f = site_form(s, 5, 1);
			if (!want) {   /* back in */
				if ((l->nop_exit[i] || l->stub[i]) && ours(s) &&
				    add(m, s, 5, f, l->exit_orig[i], &l->nop_exit[i], 0) && l->stub[i])
					m->stubp[m->n - 1] = &l->stub[i];   /* to 0 */
				continue;
			}
			if (l->nop_exit[i] || !intact(s, cur, 5))
				continue;
			if (out_now) {
				const uint8_t *ob = out_bytes(f, 5, l->exit_orig[i], buf);
				uint64_t rt;

				if (f == FORM_NOP && (s & 15) == 15 && !l->stub[i] && have_cx16() &&
				    !kt_load(&force_int3, relaxed) &&
				    (rt = ret_near(info, s, exit_target(s, l->exit_orig[i]))) != 0) {
					rel_site(now, 0xe8, s, rt);
					ob = now;
					f = FORM_CALLRET;
				}
				if (l->stub[i] && f == FORM_RET) {   /* ret over the jump's first byte */
					memcpy(now, cur, 5);
					now[0] = 0xc3;
					ob = now;
				}
				if (add(m, s, 5, f, ob, &l->nop_exit[i], 1) && l->stub[i])
					m->stubp[m->n - 1] = &l->stub[i];   /* to 0 */
			} else if (!l->stub[i] && f == FORM_RET && (l->nop_entry || entry_going) &&
			           one_chunk(s, 5) && have_cx16() && !kt_load(&force_int3, relaxed) &&
			           (st = stub_for(info, s, exit_target(s, l->exit_orig[i]))) != 0) {
				/* (only a site written whole: the int3 sequence would
				 * cost three syncs, and the traps) */
				rel_site(now, 0xe9, s, st);
				if (add(m, s, 5, FORM_STUB, now, NULL, 0)) {
					m->stubp[m->n - 1] = &l->stub[i];
					m->stubv[m->n - 1] = st;
				}
			}
		}
	}
	if (m->n == 0)
		return 0;
	int64_t t0 = ktrace__monotonic_ns();
	uint64_t gen0 = sync_gen;   /* before the batch's own syncs */
	int any_in = 0;

	for (uint32_t i = 0; i < m->n; i++)
		any_in |= m->flag[i] != NULL && m->to[i] == 0;
	int rc = apply(info, m->n, any_in);
	int64_t te = ktrace__monotonic_ns();

	ktrace__filter_own_mm(t0, te);
	batch_n++;
	kt_add(&batch_ns, (uint64_t)(te - t0), relaxed);
	kt_add(&n_batches, 1, relaxed);
	if (rc != 0) {
		/* said after the loader's lock is let go (wx_say) */
		kt_store(&wx_errno, errno, relaxed);
		kt_add(&n_failed, m->n, relaxed);
		kt_store(&wx_denied, 1, relaxed);
		m->n = 0;
		return 1;
	}
	for (uint32_t i = 0; i < m->n; i++) {
		if (m->flag[i] != NULL && *m->flag[i] != m->to[i])
			kt_add(&n_nop, m->to[i] ? 1 : (uint64_t)-1, relaxed);
		if (m->flag[i] != NULL)
			*m->flag[i] = m->to[i];
		if (m->stubp[i] != NULL)
			*m->stubp[i] = m->stubv[i];
		if (m->entry_out[i] != NULL) {
			m->entry_out[i]->entry_gen = gen0;
			m->entry_out[i]->entry_ns = te;
		}
		if (pend[i].form == FORM_STUB)
			kt_add(&n_stub, 1, relaxed);
		if (pend[i].form == FORM_CALLRET && m->to[i])
			kt_add(&n_callret, 1, relaxed);
	}
	kt_add(&n_patched, m->n, relaxed);
	m->n = 0;
	return 0;
}

/* A batch that could not make code writable, said once (not inside the
 * loader's callback: strerror and the message's formatting may allocate,
 * under an allocator that holds its locks across fork). */
static KT_NOINSTR void wx_say(void)
{
	int e = kt_load(&wx_errno, relaxed);

	if (e == 0)
		return;
	kt_store(&wx_errno, 0, relaxed);
	if (!kt_load_cfg(quiet))   /* the snapshot says it in any case */
		ktrace__warn_once(KT_WARN_LEAN_WX, "lean mode: cannot make code writable (mprotect: %s); "
		                  "muted functions keep calling the hooks, which skip them",
		                  strerror(e));
}

/* The patch lock across fork() (registered at init by ktrace__lean_atfork,
 * before ktrace__phdr_atfork: a fork takes this one second, as the
 * writer does: patch_iterate).  The child's only thread is the one that
 * forked and took it. */
static KT_NOINSTR void atfork_prepare(void) { pthread_mutex_lock(&patch_lock); }
static KT_NOINSTR void atfork_parent(void) { pthread_mutex_unlock(&patch_lock); }

/*
 * The child's part of the open ranges (LINGER) that is still what ktrace
 * made writable: a file's pages mapped read+write+exec.  A module
 * unloaded while its range was open (the writer closes only those still
 * loaded, orng_close_cb) may have left its place to other memory, data
 * maybe, which a blind mprotect would have made read-only in the child.
 * The loader's list cannot be walked here (dl_iterate_phdr's lock may
 * have been held by another thread at the fork: ktrace__phdr_iterate),
 * so /proc/self/maps answers, read with system calls into static buffers
 * (the child has one thread).  A part found is put in put[]; the
 * mprotects come after the read, which they would otherwise change.
 * (A program's own private rwx mapping of a file, a JIT's memfd, put
 * where the unloaded module was would be taken for it: read+exec.)
 */
#define FORK_PUT (2 * NORNG)
static char fork_buf[4096], fork_line[256];
static uint64_t fork_put[FORK_PUT][2];
static int fork_over;   /* more parts than fork_put holds */

static KT_NOINSTR void fork_line_ranges(const char *l, void *arg)
{
	uint32_t *np = arg, n = *np;
	struct kt_maps_line ml;
	uint64_t start, end;

	/* anonymous (ino 0): not a module's code */
	if (ktrace__maps_parse(l, &ml) != 0 || memcmp(ml.perms, "rwxp", 4) != 0 || ml.ino == 0)
		return;
	start = ml.start;
	end = ml.end;
	for (uint32_t k = 0; k < n_orng; k++) {
		uint64_t lo = orng[k].a > start ? orng[k].a : start;
		uint64_t hi = orng[k].a + orng[k].len < end ? orng[k].a + orng[k].len : end;

		if (orng[k].len == 0 || lo >= hi)
			continue;
		/* A run's pages may be several lines (written while apart,
		 * their mappings no longer merge): one part, where they meet */
		if (n > 0 && lo <= fork_put[n - 1][1] && hi >= fork_put[n - 1][0]) {
			widen(&fork_put[n - 1][0], &fork_put[n - 1][1], lo, hi);
		} else if (n < FORK_PUT) {
			fork_put[n][0] = lo;
			fork_put[n++][1] = hi;
		} else {
			fork_over = 1;
		}
	}
	*np = n;
}

/* The open ranges (LINGER) back to read+exec, under patch_lock, without
 * the loader's lock: only the parts /proc/self/maps shows still mapped
 * read+write+exec from a file (put[] above). */
static KT_NOINSTR void orng_close_maps(void)
{
	uint32_t n = 0;

	/* Where the file cannot be read
	 * whole (no /proc, no descriptor left, a sandbox), or holds more
	 * parts than fork_put, every range as it was, as before: code left
	 * writable for the child's life is the worse risk. */
	fork_over = 0;
	if (n_orng != 0 &&
	    ktrace__maps_read(fork_line_ranges, &n, fork_buf, sizeof(fork_buf), fork_line,
	                      sizeof(fork_line)) == 0 &&
	    !fork_over) {
		for (uint32_t i = 0; i < n; i++)
			mprotect((void *)fork_put[i][0], fork_put[i][1] - fork_put[i][0],
			         PROT_READ | PROT_EXEC);
	} else {
		for (uint32_t k = 0; k < n_orng; k++)
			if (orng[k].len != 0)
				mprotect((void *)orng[k].a, orng[k].len, PROT_READ | PROT_EXEC);
	}
	n_orng = 0;
}

/* The child's code too (LINGER): nothing is patched meanwhile,
 * atfork_prepare held the lock. */
static KT_NOINSTR void atfork_child(void)
{
	orng_close_maps();
	pthread_mutex_unlock(&patch_lock);
}

/* The program's thread, in syscall() before it installs a filter on all
 * threads (sandbox.c), every optional section over and none able to
 * begin: the code kept writable goes back to read+exec while mprotect is
 * still allowed.  No loader lock (the program may hold it: a filter
 * installed from a dl_iterate_phdr callback), and patch_lock only if
 * free: a writer still in its pass (the wait ran out) holds it. */
KT_NOINSTR void ktrace__lean_sandbox(void)
{
	if (pthread_mutex_trylock(&patch_lock) != 0)
		return;
	if (n_orng != 0)
		orng_close_maps();
	pthread_mutex_unlock(&patch_lock);
}

/* At init (do_init, once a process image), right before
 * ktrace__phdr_atfork, and before init's own child handler (fork_child),
 * after which the child's next traced call may start its writer: this
 * child handler runs before it, and that writer never meets the lock
 * still held. */
KT_NOINSTR void ktrace__lean_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* A compact id whose function is in the lean mode (its entry site is
 * known): the CPU side of the budget mutes only these (filter.c). */
KT_NOINSTR int ktrace__lean_fn(uint32_t id)
{
	/* a function noted a moment later waits a decision */
	return lf_state(id) == LS_READY;
}


/* Writer thread: what the last full look saw (work_to_do). */
static uint32_t seen_epoch, seen_nf;
static int seen_force, first_pass = 1;
static int64_t next_due;

/*
 * TOUCHED.  In a VM whose host maps a guest page only when user space
 * first touches it (this 2-core VM, as the ring's pages: ring.c), a page
 * populated by MADV_POPULATE_WRITE still costs the first thread that
 * touches it ~8 us (touched after the populate by another thread: 0.03
 * us), and a page never written a fault, ~15 us.  The lean tables the
 * slow paths read and write were populated by the thread that then
 * first touched each page: sites[] (hashed, 16 pages) and lf[] (by
 * compact id, 62 KiB a chunk) at a lean executable's init, the function
 * table's pages at the first call in each 32 KiB of code (funcs.c): 42-56
 * of SQLite's short run's slow entries took 6-19 us each, 0.4-0.6 ms of
 * its main thread (timed around each in an instrumented copy).  So the
 * writer thread touches them: sites[] and the function table's pages
 * for a lean executable's code at its first pass, and lf[] as it grows,
 * kept LF_CHUNK / 2 entries or more ahead of the ids handed out (lf_grow
 * here: the populate is the writer's too).  The tables first thing
 * when the writer starts (tables_only: 29 pages for SQLite with a page of
 * the function table per 64 KiB of code, ~0.3 ms),
 * before its first decision's set-up: from its first pass they came
 * 2.7 ms after the program's first call, by when the program had
 * touched 12 of the function table's 13 pages itself (now 1).  The
 * program's first calls may still come first (the writer starts after
 * them): 21-29 such slow entries were left, 0.20-0.28 ms.  A page
 * touched twice costs a cache miss.  (The code copied at start-up is
 * not touched: see the lean mode's documentation, "The code copied at
 * start-up".)
 */
#define TOUCH_CODE_MAX (2ull << 20)   /* 64 pages of the function table */
static uint32_t lf_touched;   /* writer: lf[0, lf_touched) touched */
static int tables_touched;    /* writer: sites[] and the function table's pages */

KT_NOINSTR void ktrace__lean_touch(int tables_only)
{
	uint32_t pop;

	if (!kt_load(&lean_used, relaxed))
		return;
	if (!tables_touched) {
		tables_touched = 1;
		/* at most TOUCH_CODE_MAX of code: a page of the table per 32
		 * KiB, ~15 us each, before the writer's first decision */
		if (exe_hi > exe_lo && exe_hi - exe_lo <= TOUCH_CODE_MAX)
			ktrace__funcs_touch_code(exe_lo, exe_hi);
		ktrace__touch_pages(sites, sizeof(sites));
	}
	if (tables_only)
		return;
	lf_grow(ktrace__funcs_ids() + LF_CHUNK / 2);   /* lf[] is by compact id */
	/* acquire: the populate before the count (lf_grow's release) */
	pop = kt_load(&lf_pop, acquire);
	if (pop > lf_touched) {
		ktrace__touch_pages(&lf[lf_touched], (size_t)(pop - lf_touched) * sizeof(lf[0]));
		lf_touched = pop;
	}
}

static KT_NOINSTR void lean_tick(int64_t *wait_ns);

/* Writer thread: the batches are optional calls (sandbox.c).  Under a
 * filter put on all threads after start-up: said once, and the snapshot
 * says it as under W^X (KTRACE_INFO_LEAN_NO_PATCH). */
KT_NOINSTR void ktrace__lean_tick(int64_t *wait_ns)
{
	if (!kt_load(&lean_used, relaxed))
		return;
	if (!ktrace__optional_begin()) {
		if (!kt_load_cfg(quiet))
			ktrace__warn_once(KT_WARN_LEAN_SANDBOX, "lean mode: the program put a seccomp "
			                  "filter on all its threads, which may kill the process on "
			                  "the calls that patch code; no more code is patched, and "
			                  "muted functions keep calling the hooks, which skip them");
		return;
	}
	lean_tick(wait_ns);
	ktrace__optional_end();
}

static KT_NOINSTR void lean_tick(int64_t *wait_ns)
{
	int all;
	static struct mod_ctx m;
	int64_t now, gap, due;
	uint64_t batches0;

	if (kt_load(&both_modes, relaxed))
		ktrace__warn_once(KT_WARN_LEAN_BOTH, "functions compiled with both -finstrument-functions and the "
		                  "lean flags call both modes' hooks: each call is recorded once "
		                  "(by the lean hooks) but pays both; compile with the lean flags "
		                  "alone (-fno-instrument-functions after pkg-config --cflags, or "
		                  "-I$(pkg-config --variable=includedir ktrace) instead)");
	now = pass_ns = ktrace__monotonic_ns();
	orng_tick(now, wait_ns);
	gap = cur_gap = batch_n < EARLY_BATCHES ? BATCH_GAP_NS : BATCH_GAP_LATER_NS;
	/* EARLY.  A new mute within the gap gets an entries-only pass now:
	 * its functions' entries go out (an entry is safe to take out at any
	 * time), with no sync and no new look at the threads' frames, so no
	 * exit goes out that the last full pass would not have taken out:
	 * an exit still waits a full pass, a gap after its entry went out
	 * (EXITS_AFTER).  Waiting the gap cost each new mute of a hot
	 * function up to 0.5 ms of calls skipped through both hooks (50 k
	 * in one of Lua's, ~3 ns each). */
	int early = 0;

	if (last_batch_ns != 0 && now - last_batch_ns < gap) {
		if (kt_load(&ktrace__mute_epoch, relaxed) == seen_epoch) {
			if (wait_ns && gap - (now - last_batch_ns) < *wait_ns)
				*wait_ns = gap - (now - last_batch_ns);
			return;
		}
		early = 1;
	}
	if (kt_load(&wx_denied, relaxed))
		return;
	/* exchange, not a load and a store: a hint raised between the two
	 * would be erased and its function left for the next full look */
	int hinted = atomic_exchange_explicit(&ready_hint, 0, memory_order_relaxed) != 0;

	fl_take();
	/* A module loaded or unloaded since the last pass, once one was
	 * unloaded (RELOAD): every known function is looked at again. */
	uint64_t subs[2] = {0, 0};

	ktrace__phdr_iterate(subs_cb, subs);
	revalidate = subs[1] != 0 && (subs[0] != seen_adds || subs[1] != seen_subs);
	seen_adds = subs[0];
	seen_subs = subs[1];
	/* Every tick: a function that finished learning is ready to patch
	 * without a new mute epoch (a look is NF loads per module). */
	{
		uint32_t ep = kt_load(&ktrace__mute_epoch, relaxed), nf = (uint32_t)ktrace__funcs_count();
		int fo = kt_load(&force, relaxed);

		all = hinted || ep != seen_epoch || nf != seen_nf || fo != seen_force || first_pass ||
		      (next_due != 0 && now >= next_due);
		seen_epoch = ep;
		seen_nf = nf;
		seen_force = fo;
		first_pass = 0;
	}
	int busy = work_to_do(all, &due);

	if (all)
		next_due = due;
	else if (due != 0 && (next_due == 0 || due < next_due))
		next_due = due;
	if (!busy && fl_n == 0 && !revalidate) {
		if (next_due != 0 && wait_ns && next_due - now < *wait_ns)
			*wait_ns = next_due - now > 0 ? next_due - now : 0;
		return;
	}
	batches0 = kt_load(&n_batches, relaxed);
	if (revalidate)
		for (uint32_t id = 0; id < (uint32_t)ktrace__funcs_count() && lf_has(id); id++)
			if (kt_load(&lf[id].st, relaxed) == LS_READY)
				todo_add(id);
	if (!early) {
		if (exits_wait_sync())
			sync_cores(0);
		look_gen = sync_gen;
		look_ns = ktrace__monotonic_ns();
		margin_wait = 0;
		ktrace__lean_open_frames(open_ids, NF);
	}
	m.n = 0;
	patch_iterate(patch_module, &m);
	pthread_mutex_unlock(&patch_lock);
	wx_say();
	if (early) {   /* the full pass stays due a gap after the last */
		int64_t left = last_batch_ns + gap - ktrace__monotonic_ns();

		kt_add(&n_early, 1, relaxed);
		if (wait_ns && (left > 0 ? left : 0) < *wait_ns)
			*wait_ns = left > 0 ? left : 0;
		return;
	}
	last_batch_ns = ktrace__monotonic_ns();
	/* A batch ran: its functions' exits may go in the next (EXITS_AFTER);
	 * exits that wait for a frame to close wait for the writer's next
	 * look (2-100 ms), not a pass every gap.  Exits whose entry went out
	 * in an early pass less than a gap before this look: the next. */
	if ((kt_load(&n_batches, relaxed) != batches0 || margin_wait) && wait_ns && gap < *wait_ns)
		*wait_ns = gap;
	/* Exits waiting for a serialising event: back for it by
	 * SYNC_WAIT_NS after the last one (exits_wait_sync). */
	if (wait_ns && sync_cmd != 0)
		for (uint32_t k = 0; k < ntodo; k++)
			if (waits_sync(todo[k])) {
				int64_t w = last_sync_ns + SYNC_WAIT_NS - ktrace__monotonic_ns();

				w = w < gap ? gap : w;
				if (w < *wait_ns)
					*wait_ns = w;
				break;
			}
}

KT_NOINSTR void ktrace__lean_muting(uint32_t id)
{
	if (id >= NF)
		return;
	/* The deadline of the learning it has not finished (see LEARN_WAIT_NS);
	 * one that has finished is patched out in the next batch. */
	lf[id].muted_ns = ktrace__monotonic_ns();
}

/*
 * Was the function at fn compiled with the lean flags too?  A program
 * compiled with -finstrument-functions and the lean flags at once (a
 * newcomer's "$(pkg-config --cflags ktrace) $(pkg-config --variable=
 * lean_cflags ktrace)") calls both hooks in every function; the default
 * mode's then leave it to the lean ones (record.c), and each call is
 * recorded once.  Its code begins (past an endbr64) with an entry site
 * this library noted, which may be a nop now, or a call of __fentry__:
 * the default mode's hook can come first, from a copy inlined elsewhere.
 * Never true before a lean hook ran (lean_used): a program built in the
 * default mode alone pays nothing more than this load, in its slow path.
 */
KT_NOINSTR int ktrace__lean_owns(uint64_t fn)
{
	uint8_t c[4];
	uint64_t s;

	if (!kt_load(&lean_used, relaxed))
		return 0;
	s = past_endbr(fn, c);
	if (site_find(s + 5) == 5 || site_find(s + 6) == 6 || calls_fentry(NULL, fn)) {
		kt_store(&both_modes, 1, relaxed);
		return 1;
	}
	return 0;
}

KT_NOINSTR int ktrace__lean_active(void)
{
	return kt_load(&lean_used, relaxed) != 0;
}

KT_NOINSTR uint32_t ktrace__lean_info_flags(void)
{
	uint32_t f = 0;

	if (kt_load(&lean_used, relaxed))
		f |= KTRACE_INFO_LEAN;
	if (kt_load(&wx_denied, relaxed) || (kt_load(&lean_used, relaxed) && ktrace__sandboxed()))
		f |= KTRACE_INFO_LEAN_NO_PATCH;
	return f;
}

/* Tests (hidden; a statically linked test program calls it): force every
 * known site out (1) or in (2), or back to the budget's decisions (0), and
 * wait for the writer thread's next pass. */
KT_NOINSTR void ktrace__lean_test_force(int mode)
{
	uint64_t p = kt_load(&n_patched, relaxed);

	kt_store(&force, mode, relaxed);
	for (int i = 0; i < 200 && kt_load(&n_patched, relaxed) == p; i++)
		usleep(1000);
}

/* Tests (hidden): the sites written so far whole (of them, in jump and in
 * ret form) and by the int3 sequence; int3 >= 0 sets whether every site
 * takes the int3 sequence. */
KT_NOINSTR void ktrace__lean_test_paths(int int3, uint64_t *whole, uint64_t *by_jump,
                                        uint64_t *by_ret, uint64_t *by_int3)
{
	if (int3 >= 0)
		kt_store(&force_int3, int3, relaxed);
	*whole = kt_load(&n_whole, relaxed);
	*by_jump = kt_load(&n_jump, relaxed);
	*by_ret = kt_load(&n_ret, relaxed);
	*by_int3 = kt_load(&n_int3, relaxed);
}

/* Tests (hidden): exit sites given a stub so far (STUBS). */
KT_NOINSTR uint64_t ktrace__lean_test_callret(void)
{
	return kt_load(&n_callret, relaxed);
}

KT_NOINSTR uint64_t ktrace__lean_test_stubs(void)
{
	return kt_load(&n_stub, relaxed);
}

KT_NOINSTR uint64_t ktrace__lean_test_early(void)
{
	return kt_load(&n_early, relaxed);
}

/* Tests (hidden): the calling thread as a signal handler that interrupted
 * the library sees it (nest += delta), and its lean stack's depth
 * (NESTED_EXIT). */
KT_NOINSTR void ktrace__lean_test_nest(int delta)
{
	struct kt_thread *t = kt_self();

	if (t != &ktrace__idle)
		t->nest += delta;
}

KT_NOINSTR uint32_t ktrace__lean_test_depth(void)
{
	return kt_self()->lsp;
}

/* Tests (hidden): slow entries and exits so far (TWO_WAYS, LEARN_FAST). */
KT_NOINSTR void ktrace__lean_test_slow(uint64_t *in, uint64_t *out)
{
	*in = kt_load(&n_slow_in, relaxed);
	*out = kt_load(&n_slow_out, relaxed);
}

/* The snapshot's LEAN section (writer thread: nop_entry is its own); 0
 * if no lean hook ran. */
KT_NOINSTR int ktrace__lean_record(struct ktrace_lean_rec *r)
{
	uint32_t n;

	memset(r, 0, sizeof(*r));
	if (!kt_load(&lean_used, relaxed))
		return 0;
	ktrace__lean_stats(&r->site_writes, &r->site_failures, &r->nop_sites, &r->batches,
	                   &r->batch_ns);
	n = kt_load(&lf_pop, acquire);
	for (uint32_t id = 0; id < n && id < NF; id++)
		if (kt_load(&lf[id].st, acquire) == LS_READY) {
			r->funcs++;
			r->funcs_out += lf[id].nop_entry != 0;
		}
	if (kt_load(&both_modes, relaxed))
		r->flags |= KTRACE_LEAN_BOTH_MODES;
	return 1;
}

KT_NOINSTR void ktrace__lean_stats(uint64_t *patched, uint64_t *failed, uint64_t *nop_sites,
                                   uint64_t *batches, uint64_t *ns)
{
	*batches = kt_load(&n_batches, relaxed);
	*ns = kt_load(&batch_ns, relaxed);
	*patched = kt_load(&n_patched, relaxed);
	*failed = kt_load(&n_failed, relaxed);
	*nop_sites = kt_load(&n_nop, relaxed);
}

#else /* not x86-64: no lean mode (lean_cflags is empty there) */

KT_NOINSTR void ktrace__lean_tick(int64_t *wait_ns) { (void)wait_ns; }
KT_NOINSTR void ktrace__lean_sandbox(void) {}
KT_NOINSTR void ktrace__lean_touch(int tables_only) { (void)tables_only; }
KT_NOINSTR uint32_t ktrace__lean_info_flags(void) { return 0; }
KT_NOINSTR int ktrace__lean_active(void) { return 0; }
KT_NOINSTR void ktrace__lean_init(void) {}
KT_NOINSTR void ktrace__lean_atfork(void) {}
KT_NOINSTR void ktrace__lean_init_undo(void) {}
KT_NOINSTR int ktrace__lean_fn(uint32_t id) { (void)id; return 0; }
KT_NOINSTR int ktrace__lean_owns(uint64_t fn) { (void)fn; return 0; }
KT_NOINSTR void ktrace__lean_muting(uint32_t id) { (void)id; }
KT_NOINSTR void ktrace__lean_enter_slow(uint64_t r, uint64_t *slot) { (void)r; (void)slot; }
KT_NOINSTR void ktrace__lean_exit_slow(uint64_t r, uint64_t *slot) { (void)r; (void)slot; }
KT_NOINSTR void ktrace__lean_frameless(uint64_t r, uint64_t *slot) { (void)r; (void)slot; }
KT_NOINSTR void ktrace__lean_stats(uint64_t *patched, uint64_t *failed, uint64_t *nop_sites,
                                   uint64_t *batches, uint64_t *ns)
{
	*patched = *failed = *nop_sites = *batches = *ns = 0;
}
KT_NOINSTR int ktrace__lean_record(struct ktrace_lean_rec *r)
{
	*r = (struct ktrace_lean_rec){0};
	return 0;
}
KT_NOINSTR void ktrace__lean_test_force(int mode) { (void)mode; }
KT_NOINSTR uint64_t ktrace__lean_test_stubs(void) { return 0; }
KT_NOINSTR uint64_t ktrace__lean_test_callret(void) { return 0; }
KT_NOINSTR uint64_t ktrace__lean_test_early(void) { return 0; }
KT_NOINSTR void ktrace__lean_test_slow(uint64_t *in, uint64_t *out) { *in = *out = 0; }
KT_NOINSTR void ktrace__lean_test_nest(int delta) { (void)delta; }
KT_NOINSTR uint32_t ktrace__lean_test_depth(void) { return 0; }
KT_NOINSTR void ktrace__lean_test_paths(int int3, uint64_t *whole, uint64_t *by_jump,
                                        uint64_t *by_ret, uint64_t *by_int3)
{
	(void)int3;
	*whole = *by_jump = *by_ret = *by_int3 = 0;
}

#endif
