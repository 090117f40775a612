/*
 * writer.c - the writer thread: from a request (signal, API, trigger) to
 * a call of ktrace__snapshot_write (snapfile.c), and the clock anchors
 * every 100 ms.
 *
 * All file work happens on this one background thread.  It blocks every
 * signal, so the snapshot signal is delivered to application threads and
 * SIGXFSZ (file size limit) turns into an EFBIG error here instead of
 * killing the process.  Requests reach it through a futex word (wake.h),
 * which owns no descriptor: a program that closes or reuses descriptor
 * numbers can never make the library read, write or wait on its files.
 *
 *   - the signal handler (signal.c) sets sig_pending, then
 *     ktrace__writer_wake() moves the word and, if the writer sleeps,
 *     calls FUTEX_WAKE (all async-signal-safe);
 *   - ktrace_snapshot() (snapshot.c) queues a request under api_mu and
 *     waits on api_cv for the writer to finish it;
 *   - a trigger (trigger.c) is queued with a due time (trigq.c).
 *
 * The writer sleeps in FUTEX_WAIT on the word with a timeout (the next
 * anchor or a trigger's due time); it never polls or spins.  Its stack is
 * KT_WRITER_STACK, not the default 8 MiB, and it allocates with mmap only
 * (snapfile.c): under RLIMIT_AS the program keeps its address space.
 *
 * State: the word, the thread and whether it runs, whether a file is being
 * written, and a fork child's "start on first need".  Locks: it takes
 * api_mu and trig_mu one at a time, never together (snapshot.h).
 */
#include "snapshot.h"
#include "wake.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The writer's stack: its deepest path (a snapshot, and one with a stderr
 * message) uses 23 KiB of it, TLS included (measured by scanning the
 * stack for the deepest non-zero byte); sanitizers need more. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KT_WRITER_STACK (1024 * 1024)
#else
#define KT_WRITER_STACK (128 * 1024)
#endif

/* Moved by every request, after its flag or queue entry is set; the
 * writer sleeps on it (wake.h). */
static struct kt_wake wake;
static pthread_t writer;
static _Atomic int writer_running;
/* The creating thread's cpu mask, which the writer takes back once it
 * runs (start_writer; later it may leave a waker's cpu: move_off); set
 * before pthread_create, which publishes it. */
static cpu_set_t writer_mask;
static int writer_pinned;
/* The creating thread is under a seccomp filter, or its state cannot be
 * read (the writer inherits its filters): start_writer reads it once for
 * start_elsewhere and short_slice, set before pthread_create. */
static int writer_filtered;
static _Atomic int writing;            /* 1 while a file is being written */

/* ---- messages ------------------------------------------------------------ */

static _Atomic uint64_t warned[(KT_WARN_KEYS + 63) / 64];   /* bit per message key */

KT_NOINSTR void ktrace__warn_once(int key, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	/* relaxed: only decides whether to print.  An or, not an add: two
	 * threads with one key added its bit twice, which carried into the
	 * next key's and cleared its own. */
	if (key < 0 || key >= KT_WARN_KEYS)
		key = 0;
	uint64_t bit = 1ull << (key & 63);
	if (atomic_fetch_or_explicit(&warned[key >> 6], bit, memory_order_relaxed) & bit)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ktrace__say("%s", buf);
}

/* The cpu of the last thread that woke the writer, + 1 (0: none since
 * the writer looked), noted only while track_waker is set (the writer
 * may move: see move_off; where it may not, under a seccomp filter,
 * getcpu is not called, a system call on some kernels). */
static _Atomic int waker_cpu, track_waker;
static __thread int on_writer __attribute__((tls_model("initial-exec")));   /* the writer */

/* Wake the writer for a request that can wait slack_ns (< 0: none) if
 * its timed look comes within it (kt_wake_post_lazy): the lean mode's
 * "ready to patch" hints.  Async-signal-safe: a getcpu (see waker_cpu),
 * one atomic add, a clock read (slack_ns >= 0) and at most one system
 * call.  The waker's cpu is noted either way: a writer whose timed look
 * finds itself on the cpu of a thread that was just busy there is as
 * much in its way as one it woke. */
KT_NOINSTR void ktrace__writer_wake_lazy(int64_t slack_ns)
{
	int saved = errno;

	/* relaxed: published by the post's add below */
	if (kt_load(&track_waker, relaxed) && !on_writer)
		kt_store(&waker_cpu, sched_getcpu() + 1, relaxed);
	/* the request set before this call (sig_pending, or an entry under
	 * api_mu / trig_mu) is visible to a writer that loads the new value */
	kt_wake_post_lazy(&wake, slack_ns);
	errno = saved;
}

/* The same, now. */
KT_NOINSTR void ktrace__writer_wake(void)
{
	ktrace__writer_wake_lazy(-1);
}

/* ---- the writer thread ------------------------------------------------------ */

static KT_NOINSTR int64_t mono_ms(void)
{
	return ktrace__monotonic_ns() / 1000000;
}

/* The kernel's struct sched_attr (SCHED_ATTR_SIZE_VER0): glibc 2.36 has
 * no sched_setattr, and <linux/sched/types.h> redefines sched_param. */
struct kt_sched_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};
#define KT_WRITER_SLICE_NS 100000ull

/*
 * Ask for a short time slice (sched_runtime of a SCHED_OTHER thread,
 * Linux 6.12 and later; older kernels ignore it).  The writer wakes for a
 * few tens of us at a time, and sometimes on the cpu of the program's
 * busiest thread (that thread moved, or the idle cpu was not picked):
 * with the default slice it waited there for the program's slice to run
 * out, 2-4 ms measured (a 0.5 ms sleep took 4.2 ms), while the budget's
 * decisions and the lean mode's patching waited and a new hot phase was
 * recorded in full (SQLite's 0.09 s run then recorded 400-900 k events
 * instead of ~200 k).  A shorter slice makes its wake-up preempt; it
 * takes no more cpu than before (the scheduler's fairness is the same),
 * needs no privilege, and keeps the thread's policy and nice value.  A
 * program that made its threads real-time (the writer inherits that) is
 * left alone, and so is one under a seccomp filter (or whose filter
 * state cannot be read): a filter may kill the process on a call it does
 * not expect, as for perf_event_open (sched.c, "Sandboxes").
 */
static KT_NOINSTR void short_slice(void)
{
	struct kt_sched_attr a;

	if (writer_filtered)
		return;
	memset(&a, 0, sizeof(a));
	if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof(a), 0) != 0 || a.policy != SCHED_OTHER)
		return;
	a.size = sizeof(a);
	a.flags &= 0x01;   /* SCHED_FLAG_RESET_ON_FORK stays as it was */
	a.runtime = KT_WRITER_SLICE_NS;
	(void)syscall(SYS_sched_setattr, 0, &a, 0);
}

/*
 * Off the cpu of the thread that woke it.  A futex wake queues the writer
 * on the waker's cpu once the scheduler sees no idle cpu elsewhere (in
 * this VM: a halted vcpu can count as preempted), and from then on every
 * wake does the same, the writer's last cpu being the waker's: the
 * program's thread waits for each of the writer's passes, 50-110 times in
 * some of SQLite's 0.09 s runs, 2-6 ms in all, the other core idle.  So
 * when the writer wakes on its waker's cpu, it takes that cpu out of its
 * set and moves; it stays out until the writer finds itself on the cpu of
 * a waker again, and then comes back in as that one goes out.  A set
 * someone else gave the writer since (taskset, the program) is kept: it
 * becomes the set moves are made within, and one cpu is left alone.  At
 * most once per MOVE_GAP_NS: where every cpu is busy a move gains nothing
 * and costs a migration.  Only where the writer started elsewhere
 * (start_elsewhere: not under a seccomp filter, two cpus or more).
 * Writer thread only, but for track_waker.
 */
#define MOVE_GAP_NS 10000000LL

static int64_t move_last;         /* the last move */
static cpu_set_t move_mine;       /* the set the writer last gave itself */
static int move_out = -1;         /* the cpu it took out then, -1: none */

static KT_NOINSTR void move_start(void)
{
	move_last = 0;
	move_out = -1;
	kt_store(&waker_cpu, 0, relaxed);
	if (writer_pinned && sched_getaffinity(0, sizeof(move_mine), &move_mine) == 0)
		kt_store(&track_waker, 1, relaxed);
}

static KT_NOINSTR void move_off_calls(void)
{
	int w = kt_load(&waker_cpu, relaxed) - 1;
	cpu_set_t cur, other;
	int64_t now;

	if (w < 0)
		return;
	kt_store(&waker_cpu, 0, relaxed);
	if (w >= CPU_SETSIZE || sched_getcpu() != w)
		return;
	now = ktrace__monotonic_ns();
	if (move_last != 0 && now - move_last < MOVE_GAP_NS)
		return;
	move_last = now;
	if (sched_getaffinity(0, sizeof(cur), &cur) != 0)
		return;
	if (!CPU_EQUAL(&cur, &move_mine)) {   /* set from outside since: keep it */
		move_mine = cur;
		move_out = -1;
	}
	other = move_mine;
	if (move_out >= 0)
		CPU_SET(move_out, &other);
	CPU_CLR(w, &other);
	if (CPU_COUNT(&other) == 0 || CPU_EQUAL(&other, &cur) ||
	    sched_setaffinity(0, sizeof(other), &other) != 0 ||
	    sched_getaffinity(0, sizeof(move_mine), &move_mine) != 0)
		return;
	move_out = w;
}

/* The move's calls are optional (sandbox.c): none under a filter put on
 * after start-up. */
static KT_NOINSTR void move_off(void)
{
	if (kt_load(&waker_cpu, relaxed) == 0 || !ktrace__optional_begin())
		return;
	move_off_calls();
	ktrace__optional_end();
}

/*
 * BETWEEN.  In the lean mode the budget's decision is looked for again
 * after each of the pass's long parts, not only at the pass's start.
 * That mode decides every 2 ms early on (filter.c, LEAN_EARLY_NS), and
 * on the 2-core VM a lean program's first batch took the writer ~1 ms
 * and a prefault pass 0.3-0.9 ms (its page touches, ~5 us each): the
 * pass that followed SQLite's short run's first mute lasted 2.3 ms with
 * no decision in it, while a new hot phase recorded at full rate.
 * Counted in an instrumented copy: 87-108 blocks of records in the run's
 * first 10 ms (three runs), 30-41 with the looks in between; 230-273
 * blocks in all against 178-203 (~0.6 ms of the program's time).  A look
 * that finds nothing due costs a few loads (filter.c gates it by the
 * hint, the cadence and a rate jump).  Not in the default mode, whose
 * cadence is 10 ms and 100 ms: there the looks only moved decisions next
 * to the writer's own hold of the mapping lock (the prefault's populate),
 * and test_e2e_budget's own_wait case failed once in CI with them (not
 * reproduced: under load its mapper stays recorded in 2-9 of 20-30 runs
 * with either code, most of them runs the test skips).  Serving only a
 * pending hint (the CPU budget's) lost the gain: the decisions that
 * cut the burst were the cadence's.
 */
static KT_NOINSTR void decide_between(int64_t *wait_ns)
{
	if (ktrace__lean_active())
		ktrace__filter_tick(wait_ns);
}

static KT_NOINSTR void *writer_main(void *arg)
{
	int64_t last_anchor = mono_ms();
	uint32_t ticks = 0;

	(void)arg;
	on_writer = 1;
	/* Its own name, on its own time: named by its creator, the program's
	 * thread paid an open, a write and a close of /proc/self/task/N/comm
	 * (75-175 us at start-up on the 2-core VM, 2-5 us for this prctl).
	 * Under a seccomp filter the creator names it as before (a filter may
	 * kill the process on a call it does not expect: short_slice). */
	if (!writer_filtered)
		prctl(PR_SET_NAME, "ktrace-writer");
	if (writer_pinned)   /* started on another cpu: back to the program's set */
		sched_setaffinity(0, sizeof(writer_mask), &writer_mask);
	move_start();
	short_slice();
	kt_store(&ktrace__g.hz_cached, ktrace__tsc_hz(), relaxed);
	ktrace__lean_touch(1);   /* before the program's first calls get there */
	for (;;) {
		int64_t wait_ns = 100 * 1000000LL, now;
		struct ktrace_trigger_rec trig;
		int have_trig;
		/* loaded before the requests are looked at, so a request made
		 * after the look moves it and the wait below returns at once */
		uint32_t seq = kt_wake_seq(&wake);

		ktrace__filter_tick(&wait_ns);   /* the window budget (filter.c) */
		ktrace__lean_tick(&wait_ns);     /* patch muted lean functions out */
		decide_between(&wait_ns);
		ktrace__ring_prefault(&wait_ns); /* ring pages ahead of the writers */
		ktrace__lean_touch(0);           /* the lean tables' pages ahead of them */
		decide_between(&wait_ns);
		ktrace__kinds_tick();            /* the next histogram slice (trigger.c) */
		now = ktrace__monotonic_ns();
		ktrace__sched_drain();
		wait_ns = ktrace__sched_wait_ns(wait_ns);
		have_trig = ktrace__trigq_take(&trig, now, &wait_ns);
		if (have_trig)   /* the aftermath ends with the copy (trigger.c) */
			kt_store(&ktrace__g.after_until, ktrace__now(), relaxed);
		if (!have_trig && !ktrace__signal_pending()) {
			if (!ktrace__api_pending()) {
				/* A futex timeout never ends early: the deadline has
				 * passed when it returns; the 50 us keep a deadline
				 * just missed from spinning the loop (was 1 ms, from
				 * a millisecond poll: the lean mode's 2 ms decisions
				 * and batches came 3 ms apart). */
				struct timespec ts = {(time_t)(wait_ns / 1000000000),
				                      (long)(wait_ns % 1000000000) + 50000};
				if (ts.tv_nsec >= 1000000000) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000;
				}
				kt_wake_wait(&wake, seq, &ts);
				move_off();
			}
		}
		if (mono_ms() - last_anchor >= 100) {
			ktrace__anchor_take();
			last_anchor = mono_ms();
			if (++ticks % 10 == 0)   /* about once a second */
				ktrace__signal_check();
			/* relaxed: a free-standing estimate, read by triggers. */
			kt_store(&ktrace__g.hz_cached, ktrace__tsc_hz(), relaxed);
		}
		if (ktrace__signal_pending()) {
			char reason[32];
			/* writing before the flag is cleared: ktrace__snapshot_atexit
			 * must never see both at 0 while a request is taken. */
			kt_store(&writing, 1, relaxed);
			ktrace__signal_clear();
			snprintf(reason, sizeof(reason), "signal %s",
			         kt_load_cfg(signo) == SIGUSR2 ? "SIGUSR2"
			         : kt_load_cfg(signo) == SIGUSR1 ? "SIGUSR1" : "RT");
			ktrace__snapshot_write(reason, NULL, NULL, 0);
		}
		if (have_trig) {
			char reason[96];
			snprintf(reason, sizeof(reason), "trigger: slow '%s' request", trig.kind);
			ktrace__snapshot_write(reason, &trig, NULL, 0);
		}
		ktrace__api_serve();
	}
	return NULL;
}

/*
 * Start the writer on a cpu the creating thread is not on, where it may
 * run.  A new thread is queued on its parent's cpu, and a program busy
 * from its first instruction kept it waiting there for a time slice,
 * 0.2-4 ms on the 2-core VM (the other core idle), while the writer's
 * first budget decision waited and every call of the program's hot start
 * was recorded.  The writer takes back the creator's mask at once.  Not
 * under a seccomp filter (or where its state cannot be read): a filter
 * may kill the process on sched_setaffinity, as on perf_event_open
 * (sched.c, "Sandboxes").
 */
static KT_NOINSTR void start_elsewhere(pthread_attr_t *at)
{
	cpu_set_t other;
	int cpu = sched_getcpu();

	if (writer_filtered)
		return;
	if (cpu < 0 || cpu >= CPU_SETSIZE ||
	    sched_getaffinity(0, sizeof(writer_mask), &writer_mask) != 0)
		return;
	other = writer_mask;
	CPU_CLR(cpu, &other);
	if (CPU_COUNT(&other) == 0 || pthread_attr_setaffinity_np(at, sizeof(other), &other) != 0)
		return;
	writer_pinned = 1;
}

/* at_start: from start-up, where a failure turns tracing off; else a
 * fork child's, where only snapshots are lost. */
static KT_NOINSTR int start_writer(int at_start)
{
	sigset_t all, old;
	pthread_attr_t at;
	int r;

	/* The writer inherits a full mask: no signal ever runs on it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	writer_filtered = ktrace__seccomp_mode(1) != 0;
	/* Elsewhere first; if that fails (the cpu set changed meanwhile),
	 * anywhere. */
	for (int elsewhere = 1;; elsewhere = 0) {
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, KT_WRITER_STACK);
		writer_pinned = 0;
		if (elsewhere)
			start_elsewhere(&at);
		r = pthread_create(&writer, &at, writer_main, NULL);
		pthread_attr_destroy(&at);
		if (r == 0 || !writer_pinned)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		ktrace__say("cannot start the snapshot writer thread in process %d: %s%s; %s",
		            (int)getpid(), strerror(r), r == EAGAIN ? " (RLIMIT_NPROC, or the "
		            "system's thread limit, reached)" : "", at_start ? "tracing is off "
		            "and its buffers are given back" : "no snapshot can be written in it");
		return KTRACE_ENOWRITER;
	}
	if (writer_filtered)   /* else the writer names itself (writer_main) */
		pthread_setname_np(writer, "ktrace-writer");
	/* release: the state above is visible to any thread that
	 * sees writer_running == 1 with acquire. */
	kt_store(&writer_running, 1, release);
	return 0;
}

KT_NOINSTR int ktrace__snapshot_init(void)
{
	int r = start_writer(1);

	if (r)
		return r;
	ktrace__signal_init();   /* unless ktrace__snapshot_signal_early did */
	return 0;
}

/*
 * After fork(), writer_wanted is set and the writer is started by the
 * first thread of the child that needs it: its first traced event (the
 * thread registers again under its new tid), ktrace_snapshot() or a
 * trigger.  Starting a thread inside the atfork child handler is not
 * allowed by POSIX (only async-signal-safe calls until exec) and a child
 * that only execs should not pay for one.
 */
static _Atomic int writer_wanted;   /* 1: start on first need, 2: starting */

KT_NOINSTR void ktrace__snapshot_ensure_writer(void)
{
	int expect = 1;

	/* acquire: pairs with the fork child's release store. */
	if (kt_load(&writer_wanted, acquire) != 1 ||
	    !kt_cas(&writer_wanted, &expect, 2, acq_rel))
		return;
	start_writer(0);   /* says why when it fails */
	kt_store(&writer_wanted, 0, release);
}

/* Fork child: no writer thread exists here and the mutexes may have been
 * held by a parent thread.  Each concern starts over with fresh ones
 * (the futex word is private, this process's own; the parent's writer
 * may have been asleep in it); the writer itself starts on first need
 * (ktrace__snapshot_ensure_writer). */
KT_NOINSTR void ktrace__snapshot_fork_child(void)
{
	kt_store(&wake.sleeping, 0, relaxed);
	ktrace__api_fork_child();       /* api_mu, api_cv, requests, last path */
	ktrace__trigq_fork_child();     /* trig_mu, queued triggers, trigger rate */
	ktrace__signal_fork_child();    /* sig_pending */
	ktrace__snapfile_fork_child();  /* snapshot_seq */
	ktrace__rate_fork_child();      /* a new process: full buckets */
	kt_store(&writing, 0, relaxed);
	kt_store(&writer_running, 0, relaxed);
	kt_store(&track_waker, 0, relaxed);   /* until the new writer's move_start */
	kt_store(&writer_wanted, 1, release);
}

/* exit() while a snapshot is being written: give it up to 2 s to finish so
 * the file the operator asked for is not lost (a file is never partial
 * either way: it is linked into place only when complete).  The 2 s are a
 * CLOCK_MONOTONIC deadline: signals that cut the sleeps short do not
 * shorten the wait. */
static KT_NOINSTR int work_pending(void)
{
	return ktrace__signal_pending() || kt_load(&writing, relaxed) || ktrace__api_pending() ||
	       ktrace__trigq_pending();
}

KT_NOINSTR void ktrace__snapshot_atexit(void)
{
	if (!kt_load(&writer_running, acquire))
		return;
	/* A signal, an API call or a trigger asked for a file that is not
	 * written yet, or one is being written. */
	int64_t end = ktrace__monotonic_ns() + 2000000000LL;

	while (work_pending()) {
		int64_t left = end - ktrace__monotonic_ns();
		struct timespec d = {0, 10 * 1000 * 1000};

		if (left <= 0)
			break;
		if (left < d.tv_nsec)
			d.tv_nsec = (long)left;
		nanosleep(&d, NULL);
	}
}

/* ktrace_snapshot() and triggers: start a fork child's writer if it needs
 * one; 1 if the writer runs. */
KT_NOINSTR int ktrace__writer_ready(void)
{
	ktrace__snapshot_ensure_writer();
	/* acquire: pairs with the release store in start_writer. */
	return kt_load(&writer_running, acquire);
}

/* From the thread's own word: no read of writer, which its creator
 * writes (any thread may ask, a signal handler too: filter.c own_t). */
KT_NOINSTR int ktrace__writer_is_self(void)
{
	return on_writer;
}

/* snapfile.c, and the writer before it takes a signal's request:
 * ktrace__snapshot_atexit must never see a request taken and no file
 * being written. */
KT_NOINSTR void ktrace__writer_set_writing(int on)
{
	kt_store(&writing, on, relaxed);
}
