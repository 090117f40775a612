/*
 * wake.h - one sleeper (the writer thread) and any number of wakers
 * (application threads, signal handlers) on one futex word.
 *
 * The sleeper loads seq (kt_wake_seq), looks at what was asked, and then
 * sleeps in kt_wake_wait(seq): FUTEX_WAIT returns at once if seq moved
 * since.  A waker sets its request, then kt_wake_post: it adds to seq,
 * and makes the FUTEX_WAKE system call only when the sleeper is in (or
 * about to enter) FUTEX_WAIT.  No wakeup is lost: the sleeper stores
 * sleeping seq_cst before the kernel reads seq (after a full barrier of
 * its own), the waker adds to seq seq_cst before it loads sleeping; so
 * either the waker sees sleeping and wakes, or the kernel's compare sees
 * the new seq.  Lua's short lean run made ~130 FUTEX_WAKEs from its main
 * thread without the flag, most while the writer was awake anyway, and 41
 * with it.  Async-signal-safe: lock-free atomics and one system call.
 * test_lib_wake checks it with a sleeper that would otherwise sleep 30 s,
 * and with each side held in the other's window (the seams below).
 *
 * A post that can wait (kt_wake_post_lazy: "patch this when you next
 * look") makes no system call when the sleeper's timed sleep ends within
 * the waker's slack anyway (the sleeper's `until`): the request is seen
 * at that pass.  A FUTEX_WAKE of a thread asleep on another cpu cost the
 * waking thread 17-66 us in this 2-vcpu VM (an idle vcpu woken through
 * the hypervisor; a getppid costs 1.3-2.4 us), and SQLite's short lean
 * run made 46-66 of them from its main thread, 1-4 ms of a 0.15 s run,
 * most while the writer was due back within a millisecond.
 */
#ifndef KTRACE_WAKE_H
#define KTRACE_WAKE_H

#include "internal.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Test-only seams; test_lib_wake defines them before it includes this file
 * to hold a thread between the two steps of a post or of a wait, and to
 * count the FUTEX_WAKE calls a post makes.  Nothing in the library does. */
#ifndef KT_WAKE_POST_GAP
#define KT_WAKE_POST_GAP(w) ((void)0)
#endif
#ifndef KT_WAKE_WAIT_GAP
#define KT_WAKE_WAIT_GAP(w) ((void)0)
#endif
#ifndef KT_WAKE_SYSCALL
#define KT_WAKE_SYSCALL(w) ((void)0)
#endif

struct kt_wake {
	_Atomic uint32_t seq;   /* moved by every post */
	_Atomic int sleeping;   /* 1 while the sleeper is in (or entering) FUTEX_WAIT */
	_Atomic int64_t until;  /* CLOCK_MONOTONIC ns its sleep ends by; 0: no limit */
};
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "kt_wake must be lock-free in a handler");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "kt_wake's until must be lock-free in a handler");

/* Sleeper: the value to pass to kt_wake_wait, loaded before it looks at
 * the requests (acquire: pairs with the post's add, so a request set
 * before the post is seen). */
static inline KT_NOINSTR uint32_t kt_wake_seq(struct kt_wake *w)
{
	return kt_load(&w->seq, acquire);
}

/* CLOCK_MONOTONIC in ns (vDSO: async-signal-safe). */
static inline KT_NOINSTR int64_t kt_wake_mono_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
}

/* Sleeper: sleep until a post after seq was loaded, or until ts (relative,
 * NULL: no limit) has passed. */
static inline KT_NOINSTR void kt_wake_wait(struct kt_wake *w, uint32_t seq, const struct timespec *ts)
{
	int saved = errno;

	int64_t until = ts ? kt_wake_mono_ns() + (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec : 0;
	/* The same end for the kernel: an absolute CLOCK_MONOTONIC deadline
	 * (FUTEX_WAIT_BITSET), so a sleeper preempted before its call does
	 * not sleep past the end a lazy waker read. */
	struct timespec end = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};

	/* Before sleeping is set (its seq_cst store releases this): a lazy
	 * waker that sees this sleep's flag sees its end, or a later one. */
	kt_store(&w->until, until, relaxed);
	kt_store(&w->sleeping, 1, seq_cst);
	KT_WAKE_WAIT_GAP(w);
	syscall(SYS_futex, &w->seq, FUTEX_WAIT_BITSET_PRIVATE, seq, ts ? &end : NULL, NULL,
	        FUTEX_BITSET_MATCH_ANY);
	kt_store(&w->sleeping, 0, relaxed);
	errno = saved;
}

/* Waker, for a request that can wait slack_ns (< 0: none, kt_wake_post):
 * after the request is set, move seq, and wake the sleeper if it sleeps,
 * unless its timed sleep ends within slack_ns from now; it sees the
 * request then (the add moved seq: a sleeper that loaded seq before it
 * does not sleep again on the old value).  A flag read from an earlier
 * sleep than the one under way (the sleeper woke and slept again since)
 * comes with a post the next sleep's FUTEX_WAIT sees (the add precedes
 * that sleep's flag): the request waits at most slack_ns, or until
 * the sleeper's next look (the kernel wakes it at until itself, however
 * late its call came). */
static inline KT_NOINSTR void kt_wake_post_lazy(struct kt_wake *w, int64_t slack_ns)
{
	int saved = errno;

	kt_add(&w->seq, 1, seq_cst);
	KT_WAKE_POST_GAP(w);
	if (kt_load(&w->sleeping, seq_cst)) {
		int64_t until = slack_ns < 0 ? 0 : kt_load(&w->until, relaxed);

		if (until == 0 || until - kt_wake_mono_ns() > slack_ns) {
			KT_WAKE_SYSCALL(w);
			syscall(SYS_futex, &w->seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		}
	}
	errno = saved;
}

/* Waker: after the request is set. */
static inline KT_NOINSTR void kt_wake_post(struct kt_wake *w)
{
	kt_wake_post_lazy(w, -1);
}

#endif
