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
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define KT_HAVE_GLIBC_RSEQ 1
#endif
#endif

enum { KT_RSEQ_NONE = 0, KT_RSEQ_GLIBC = 1, KT_RSEQ_OWN = 2 };
static int rseq_mode;

/* Our own registration when glibc has none: 32-byte aligned, per thread. */
struct kt_rseq_area {
	uint32_t cpu_id_start;
	uint32_t cpu_id;
	uint64_t rseq_cs;
	uint32_t flags;
	uint32_t pad[3];
} __attribute__((aligned(32)));
static __thread struct kt_rseq_area own_rseq __attribute__((tls_model("initial-exec")));

static KT_NOINSTR void *thread_pointer(void)
{
#if defined(__x86_64__)
	void *tp;
	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
#else
	return NULL;
#endif
}

/* This thread's struct rseq, registered; NULL if none. */
static KT_NOINSTR void *thread_rseq(void)
{
#if defined(__x86_64__) && defined(__NR_rseq)
	if (rseq_mode == KT_RSEQ_GLIBC) {
#ifdef KT_HAVE_GLIBC_RSEQ
		struct kt_rseq_area *a =
			(struct kt_rseq_area *)((char *)thread_pointer() + __rseq_offset);
		return (int32_t)a->cpu_id >= 0 ? a : NULL;
#endif
	} else if (rseq_mode == KT_RSEQ_OWN) {
		if ((int32_t)own_rseq.cpu_id >= 0 && own_rseq.cpu_id != 0xFFFFFFFFu)
			return &own_rseq;
		own_rseq.cpu_id = 0xFFFFFFFFu;
		if (syscall(__NR_rseq, &own_rseq, sizeof(own_rseq), 0, 0x53053053) == 0)
			return &own_rseq;
	}
#endif
	return NULL;
}

static KT_NOINSTR int detect_rseq(void)
{
	if (ktrace__cfg.no_rseq || ktrace__g.clock_source != KTRACE_CLOCK_TSC)
		return KT_RSEQ_NONE;
#if defined(__x86_64__) && defined(__NR_rseq)
#ifdef KT_HAVE_GLIBC_RSEQ
	if (__rseq_size >= 20) {
		rseq_mode = KT_RSEQ_GLIBC;
		if (thread_rseq())
			return KT_RSEQ_GLIBC;
	}
#endif
	rseq_mode = KT_RSEQ_OWN;
	if (thread_rseq())
		return KT_RSEQ_OWN;
#endif
	return KT_RSEQ_NONE;
}

static KT_NOINSTR void fork_child(void)
{
	struct kt_thread *t = kt_self();

	if (kt_load(&ktrace__g.state, acquire) != KT_READY)
		return;
	t->nest++;
	ktrace__ring_reset();
	ktrace__clock_reset();
	ktrace__threads_fork_child((int32_t)syscall(SYS_gettid));
	ktrace__funcs_fork_child();
	ktrace__sched_fork_child();
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

static KT_NOINSTR int do_init(void)
{
	int r;

	ktrace__config_load();
	if (!ktrace__cfg.enabled)
		return KTRACE_EDISABLED;
	if ((r = ktrace__clock_init()) || (r = ktrace__ring_init()) ||
	    (r = ktrace__funcs_init()) || (r = ktrace__threads_init()) ||
	    (r = ktrace__trigger_init()) || (r = ktrace__sched_init()))
		return r;
	rseq_mode = detect_rseq();
	ktrace__g.use_rseq = rseq_mode != KT_RSEQ_NONE;
	pthread_atfork(NULL, NULL, fork_child);
	atexit(at_exit);
	return ktrace__snapshot_init();
}

KT_NOINSTR int ktrace__ensure_init(void)
{
	/* acquire: pairs with the release store that ends do_init, so the
	 * rings and tables are visible. */
	int s = kt_load(&ktrace__g.state, acquire), expect = KT_UNINIT;
	struct kt_thread *t = kt_self();

	if (KT_LIKELY(s == KT_READY))
		return 1;
	if (s == KT_OFF)
		return 0;
	if (kt_cas(&ktrace__g.state, &expect, KT_INITING, acq_rel)) {
		int r;
		t->nest++;
		r = do_init();
		if (r && r != KTRACE_EDISABLED)
			ktrace__say("tracing is off: %s", ktrace_strerror(r));
		/* release: publishes everything do_init set up. */
		kt_store(&ktrace__g.state, r ? KT_OFF : KT_READY, release);
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
