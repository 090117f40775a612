/*
 * init.c - start-up, per-thread registration, fork and exit.
 *
 * The library initialises itself from a constructor, or earlier from the
 * first hook that runs (another library's constructor may be traced before
 * ours runs).  ktrace__g.state goes UNINIT -> INITING -> READY (or OFF);
 * the thread that wins the CAS initialises, others wait for it.  The
 * initialising thread holds its nesting guard, so a traced signal handler
 * that interrupts it drops its events instead of waiting for itself.
 *
 * Appends use restartable sequences when the event clock is the TSC and a
 * struct rseq is registered for the thread: glibc 2.35+ registers one per
 * thread (found at the thread pointer + __rseq_offset); otherwise the
 * library registers its own per thread.  If neither works the whole process
 * uses the locked path (one mode per process: the two must not mix on a
 * core, see ring.c).
 *
 * __rseq_offset and __rseq_size (GLIBC_2.35) are looked up at run time in
 * the dynamic symbol tables of the loaded objects (dl_iterate_phdr, in
 * glibc since 2.2.5), not linked against: the library then loads on any
 * glibc from 2.28 on, and a glibc without them (or with its registration
 * off: GLIBC_TUNABLES=glibc.pthread.rseq=0) gets ours.  Not dlsym: it is
 * in libdl before 2.34, and it takes the loader lock, which a thread in
 * dlopen running a traced constructor holds while it waits for our init.
 */
#include "internal.h"
#include "rseq.h"
#include "dynsym.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if !defined(__NR_rseq) && defined(__x86_64__)
#define __NR_rseq 334 /* kernel headers before 4.18 */
#endif
/* rseq appends exist where rseq.h has their asm (x86-64 for now). */
#if defined(KT_RSEQ_TABLE) && defined(__NR_rseq)
#define KT_RSEQ_POSSIBLE 1
#endif

enum { KT_RSEQ_NONE = 0, KT_RSEQ_GLIBC = 1, KT_RSEQ_OWN = 2 };
static int rseq_mode;

#ifdef KT_RSEQ_POSSIBLE
/* glibc's registration, from its symbols __rseq_offset / __rseq_size;
 * written once by detect_rseq during init. */
static ptrdiff_t glibc_rseq_offset;  /* bytes from the thread pointer */
static unsigned int glibc_rseq_size; /* bytes; 0 = glibc registered none */

/* Our own registration when glibc has none: 32-byte aligned, per thread.
 * own_state: 0 not tried yet, 1 registered, -1 the kernel refused.  (The
 * area's cpu_id cannot say it: it starts as 0, a valid cpu.)  A fork child
 * inherits both the registration and this TLS; a new thread starts at 0. */
static __thread struct kt_rseq_area own_rseq __attribute__((tls_model("initial-exec")));
static __thread int own_state __attribute__((tls_model("initial-exec")));

static KT_NOINSTR void *thread_pointer(void)
{
#if defined(__x86_64__)
	void *tp;
	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
#elif defined(__aarch64__)
	void *tp;
	__asm__("mrs %0, tpidr_el0" : "=r"(tp));
	return tp;
#else
	return NULL;
#endif
}

#endif

/* This thread's struct rseq, registered; NULL if none. */
static KT_NOINSTR void *thread_rseq(void)
{
#ifdef KT_RSEQ_POSSIBLE
	if (rseq_mode == KT_RSEQ_GLIBC) {
		struct kt_rseq_area *a =
			(struct kt_rseq_area *)((char *)thread_pointer() + glibc_rseq_offset);
		return (int32_t)a->cpu_id >= 0 ? a : NULL;
	} else if (rseq_mode == KT_RSEQ_OWN) {
		if (own_state == 0) {
			own_rseq.cpu_id = 0xFFFFFFFFu;   /* RSEQ_CPU_ID_UNINITIALIZED */
			own_state = syscall(__NR_rseq, &own_rseq, sizeof(own_rseq), 0,
			                    KT_RSEQ_SIG_VALUE) == 0 ? 1 : -1;
		}
		if (own_state > 0)
			return &own_rseq;
	}
#endif
	return NULL;
}

#ifdef KT_RSEQ_POSSIBLE
/* ---- glibc's rseq symbols, found without linking against them ---------- */

struct sym_query {
	const char *name;
	const void *addr;     /* out: the definition, NULL if none */
};

static KT_NOINSTR int find_symbol(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct sym_query *q = arg;
	struct kt_dynsyms ds;
	const ElfW(Sym) *s;

	(void)size;
	if (ktrace__dynsyms(info, &ds) != 0)
		return 0;
	s = ktrace__dynsym_find(&ds, q->name);
	if (s == NULL || s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_OBJECT)
		return 0;
	q->addr = (const void *)(info->dlpi_addr + s->st_value);
	return 1;
}

/* 1 if glibc defines __rseq_offset and __rseq_size (2.35+): their values
 * are copied into glibc_rseq_offset / glibc_rseq_size. */
static KT_NOINSTR int glibc_rseq_symbols(void)
{
	struct sym_query off = {"__rseq_offset", NULL}, sz = {"__rseq_size", NULL};

	ktrace__phdr_iterate(find_symbol, &off);
	ktrace__phdr_iterate(find_symbol, &sz);
	if (off.addr == NULL || sz.addr == NULL)
		return 0;
	glibc_rseq_offset = *(const ptrdiff_t *)off.addr;
	glibc_rseq_size = *(const unsigned int *)sz.addr;
	return 1;
}

#endif /* KT_RSEQ_POSSIBLE */

static KT_NOINSTR int detect_rseq(void)
{
	if (ktrace__cfg.no_rseq || ktrace__g.clock_source != KTRACE_CLOCK_TSC)
		return KT_RSEQ_NONE;
#ifdef KT_RSEQ_POSSIBLE
	if (glibc_rseq_symbols() && glibc_rseq_size >= 20) {
		rseq_mode = KT_RSEQ_GLIBC;
		if (thread_rseq())
			return KT_RSEQ_GLIBC;
	}
	rseq_mode = KT_RSEQ_OWN;
	if (thread_rseq())
		return KT_RSEQ_OWN;
#endif
	return KT_RSEQ_NONE;
}

static KT_NOINSTR void fork_child(void)
{
	struct kt_thread *t = kt_self();

	ktrace__seccomp_hold(0);   /* the parent may have forked during start-up */
	/* First: the parent's other threads are gone whatever else fails. */
	ktrace__registry_fork_child(t);
	if (kt_load(&ktrace__g.state, acquire) != KT_READY)
		return;
	if (t == &ktrace__idle) {
		/* A thread that never recorded: nothing of its own to reset. */
		if ((t = kt_self_alloc()) == NULL)
			return;
	}
	t->nest++;
	ktrace__ring_reset();
	ktrace__clock_reset();
	/* relaxed: as at init; the child's rings start at 0 again */
	kt_store(&ktrace__g.ready_tsc, ktrace__now(), relaxed);
	ktrace__threads_fork_child((int32_t)syscall(SYS_gettid));
	ktrace__funcs_fork_child();
	ktrace__sched_fork_child();
	ktrace__sandbox_fork_child();
	ktrace__hold_fork_child(t);
	ktrace__registry_fork_child(t);   /* again: t may be new */
	kt_store(&ktrace__g.after_until, 0, relaxed); /* the parent's trigger */
	/* Re-register under the child's tid on the next event. */
	t->slot = 0;
	t->key = 0;
	t->rseq = NULL;
	ktrace__snapshot_fork_child();
	t->nest--;
}

static KT_NOINSTR void at_exit(void)
{
	ktrace__snapshot_atexit();
}

static int off_reason;   /* written once by the initialising thread */

/*
 * A fork child of a process whose ktrace was starting (another thread
 * forked during do_init: a thread started by an earlier constructor) has
 * no thread to finish the start: its first traced call waited for it for
 * good (test_e2e_lifecycle fork_during_init).  Tracing is off in such a
 * child.  Registered before the start is claimed (fork_handler_ready); in
 * any other child the state is ready or off already.  (Registered in
 * do_init, after the claim, a child forked in between waited for good:
 * 4 runs of 40 lost their first child.  A vfork child, or a clone that
 * shares memory, runs no atfork handler, and waits as the parent's
 * threads do.)  (A fork by
 * the starting thread itself, from a signal handler, goes on starting in
 * the child, and sets the state at the end.)
 */
static KT_NOINSTR void init_fork_child(void)
{
	int s = KT_INITING;

	if (kt_cas(&ktrace__g.state, &s, KT_OFF, acq_rel)) {
		off_reason = KTRACE_EDISABLED;
#if defined(__x86_64__)
		kt_store(&ktrace__lean_skip, 1, relaxed);
#endif
	}
}

/*
 * init_fork_child registered, once a process image, before any thread
 * claims the start: 1 when it is.  A thread that finds another one
 * registering it (a few microseconds at the first traced call) returns
 * 0, untraced for this call, instead of waiting: a traced signal handler
 * on the registering thread would wait for itself (pthread_once would),
 * and a child forked meanwhile, where no thread ends the registration,
 * runs untraced.
 */
static _Atomic int fork_reg;   /* 0 not yet, 1 being registered, 2 done */

static KT_NOINSTR int fork_handler_ready(void)
{
	int e = 0;

	/* acquire: pairs with the release store below (the handler is in
	 * glibc's list before any thread claims the start) */
	if (KT_LIKELY(kt_load(&fork_reg, acquire) == 2))
		return 1;
	if (!kt_cas(&fork_reg, &e, 1, acq_rel))
		return e == 2;
	pthread_atfork(NULL, NULL, init_fork_child);
	kt_store(&fork_reg, 2, release);
	return 1;
}

/*
 * Start-up.  When a step fails, tracing is off for the process and what
 * was made is given back (rings, tables, perf events): a tracer that
 * cannot work must not keep 30 MiB for nothing.  The thread table's
 * pthread key and the atfork/atexit handlers stay (they cannot be
 * removed; each checks the state).
 */
static KT_NOINSTR int do_init(void)
{
	int r;

	ktrace__config_load();
	if (!ktrace__cfg.enabled)
		return KTRACE_EDISABLED;
	/* The atfork handlers first, before ktrace's own dl_iterate_phdr calls
	 * (ktrace__phdr_iterate: never across a fork).  Prepare handlers run
	 * last-registered first: a fork takes the phdr lock (for at most a
	 * second), then the lean mode's patch lock, the writer's order (lean.c
	 * patch_iterate); child handlers run in this order, the lean one
	 * before fork_child's (registered below). */
	ktrace__lean_atfork();
	ktrace__phdr_atfork();
	/* Then the snapshot signal: a SIGUSR2 sent right after the program
	 * started must not meet its default action (signal.c). */
	ktrace__snapshot_signal_early();
	if ((r = ktrace__memlock_check()) != 0)
		goto fail;
	ktrace__seccomp_hold(1);
	if ((r = ktrace__clock_init()) || (r = ktrace__ring_init()) ||
	    (r = ktrace__funcs_init()) || (r = ktrace__threads_init()) ||
	    (r = ktrace__trigger_init()) || (r = ktrace__sched_init()))
		goto fail;
	rseq_mode = detect_rseq();
	ktrace__g.use_rseq = rseq_mode != KT_RSEQ_NONE;
	pthread_atfork(NULL, NULL, fork_child);
	atexit(at_exit);
	ktrace__lean_init();
	if ((r = ktrace__snapshot_init()) == 0) {
		ktrace__seccomp_hold(0);
		return 0;
	}
fail:
	ktrace__seccomp_hold(0);
	ktrace__lean_init_undo();
	ktrace__snapshot_signal_undo();
	ktrace__sched_free();
	ktrace__funcs_free();
	ktrace__ring_free();
	return r;
}

KT_NOINSTR int ktrace__off_reason(void)
{
	return off_reason ? off_reason : KTRACE_EDISABLED;
}

KT_NOINSTR int ktrace__ensure_init(void)
{
	/* acquire: pairs with the release store that ends do_init, so the
	 * rings and tables are visible. */
	int s = kt_load(&ktrace__g.state, acquire), expect = KT_UNINIT;
	struct kt_thread *t;

	if (KT_LIKELY(s == KT_READY))
		return 1;
	if (s == KT_OFF)
		return 0;
	/* A child forked once the start is claimed: untraced (above). */
	if (!fork_handler_ready())
		return 0;
	if (kt_cas(&ktrace__g.state, &expect, KT_INITING, acq_rel)) {
		int r;
		/* The nesting guard needs a struct of the thread's own (a
		 * traced signal handler here must not wait for this init). */
		t = kt_self_alloc();
		if (t)
			t->nest++;
		r = do_init();
		off_reason = r;
		/* The others said why themselves. */
		if (r && r != KTRACE_EDISABLED && r != KTRACE_ENOWRITER && r != KTRACE_EMEMLOCK)
			ktrace__say("tracing is off: %s", ktrace_strerror(r));
		if (r == 0)   /* relaxed: a time, read by the writer's first look */
			kt_store(&ktrace__g.ready_tsc, ktrace__now(), relaxed);
		/* release: publishes everything do_init set up. */
		kt_store(&ktrace__g.state, r ? KT_OFF : KT_READY, release);
#if defined(__x86_64__)
		if (r)   /* relaxed: a hint for __fentry__ (record.c) */
			kt_store(&ktrace__lean_skip, 1, relaxed);
#endif
		if (t)
			t->nest--;
		return r == 0;
	}
	while ((s = kt_load(&ktrace__g.state, acquire)) == KT_INITING)
		sched_yield();
	return s == KT_READY;
}

/* Make the calling thread able to record: 0 if it can. */
KT_NOINSTR int ktrace__thread_ready(struct kt_thread *t)
{
	if (KT_LIKELY(t->slot != 0))
		return 0;
	if (!ktrace__ensure_init())
		return -1;
	t->tid = (int32_t)syscall(SYS_gettid);
	t->slot = ktrace__thread_register(t->tid, ktrace__now());
	if (t->slot == 0) {
		ktrace__count_loss(KTRACE_LOSS_NO_THREAD_SLOT, 1);
		return -1;
	}
	/* A fork child's first thread to record starts its writer. */
	ktrace__snapshot_ensure_writer();
	if (ktrace__g.use_rseq) {
		t->rseq = thread_rseq();
		/* Without its own rseq this thread can still take the core
		 * lock only through rseq; lock_core reports NO_CPU. */
		t->key = t->rseq ? t->slot : 0;
	}
	return 0;
}

__attribute__((constructor(101))) static KT_NOINSTR void ktrace_ctor(void)
{
	ktrace__ensure_init();
}

__attribute__((visibility("default"))) KT_NOINSTR int ktrace_enabled(void)
{
	return ktrace__ensure_init();
}

__attribute__((visibility("default"))) KT_NOINSTR const char *ktrace_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
#define KTRACE_XX(name, val, msg) \
	case KTRACE_##name:       \
		return msg;
		KTRACE_ERRNO_MAP(KTRACE_XX)
#undef KTRACE_XX
	default:
		return "unknown ktrace error";
	}
}
