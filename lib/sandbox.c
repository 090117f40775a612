/*
 * sandbox.c - a seccomp filter the program puts on all its threads after
 * start-up (SECCOMP_FILTER_FLAG_TSYNC).
 *
 * Such a filter covers the writer thread too, and a sandbox's allow-list
 * is the program's own: a call it does not list may kill the process
 * (SECCOMP_RET_KILL_PROCESS).  A filter present at start-up is read from
 * /proc (sched.c, writer.c); one installed later, nothing announces.  An
 * independent review's program (a TSYNC filter 50 ms after start that
 * kills on one call) died by the writer's hand on each of mprotect and
 * membarrier (lean patching), madvise (the rings' prefault),
 * sched_setaffinity (the writer's move off a waker's cpu) and prctl (a
 * thread's name at registration).
 *
 * So the library defines syscall(), the only way glibc gives to call
 * seccomp(2) (libseccomp's seccomp_load goes through it; prctl's
 * PR_SET_SECCOMP cannot synchronise other threads): before a
 * SECCOMP_SET_MODE_FILTER with TSYNC it counts itself as installing,
 * waits for every optional call of ktrace's under way (an optional section,
 * ktrace__optional_begin/end) to end, closes the lean mode's writable code
 * (lean.c), and only then makes the call; every installer does (two at
 * once both wait).  While one is installing, and for good once one
 * succeeded, ktrace makes no optional call: the lean mode patches nothing
 * more (its hooks skip muted functions, as under W^X, said once and in the
 * snapshot), the rings are not prefaulted (their pages fault in as they
 * fill), the writer stays where it is, threads are named from /proc at
 * the snapshot.  A call that fails (the filter refused, or a thread that
 * could not be synchronised) leaves things as they were.
 *
 * Every other system call goes through as glibc's syscall() makes it: the
 * six argument registers as they are, the result, and errno on an error.
 * Not seen: a filter installed with inline assembly, by a program with a
 * syscall() of its own, or through a libc ahead of this library in the
 * lookup order (docs/security-and-limits.md, "Sandboxes").
 */
#include "internal.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <time.h>

static _Atomic int installing;     /* such calls under way, all threads */
static _Atomic int installed;      /* one succeeded: for good (a fork child's too) */
static _Atomic int optional_busy;  /* optional sections under way, all threads */

/* How long an installer waits for the sections under way: a writer's
 * pass takes milliseconds; a section of the installing thread's own (a
 * signal handler that interrupted ktrace's slow path) never ends while
 * it waits. */
#define SANDBOX_WAIT_NS 10000000000LL
#define SANDBOX_WAIT_OWN_NS 100000000LL

KT_NOINSTR int ktrace__optional_begin(void)
{
	/* seq_cst, here and in sandbox_enter (Dekker): either the installer
	 * sees this section, or this section sees the installer */
	kt_add(&optional_busy, 1, seq_cst);
	if (kt_load(&installing, seq_cst) || kt_load(&installed, seq_cst)) {
		kt_add(&optional_busy, -1, release);
		return 0;
	}
	return 1;
}

KT_NOINSTR void ktrace__optional_end(void)
{
	/* release: the section's calls are over before an installer goes on */
	kt_add(&optional_busy, -1, release);
}

KT_NOINSTR int ktrace__sandboxed(void)
{
	return kt_load(&installing, relaxed) || kt_load(&installed, relaxed);
}

/* Fork child: only the forking thread goes on, in no section and
 * installing nothing; a filter installed stays (the child inherits it). */
KT_NOINSTR void ktrace__sandbox_fork_child(void)
{
	kt_store(&optional_busy, 0, relaxed);
	kt_store(&installing, 0, relaxed);
}

/* Every installer waits (two at once: each call must find ktrace quiet). */
static KT_NOINSTR void sandbox_enter(void)
{
	struct kt_thread *t = ktrace__tp;
	int64_t until;

	kt_add(&installing, 1, seq_cst);
	until = ktrace__monotonic_ns() +
	        (t != NULL && t->nest > 0 ? SANDBOX_WAIT_OWN_NS : SANDBOX_WAIT_NS);
	while (kt_load(&optional_busy, seq_cst) != 0 && ktrace__monotonic_ns() < until) {
		struct timespec d = {0, 50 * 1000};

		nanosleep(&d, NULL);
	}
	ktrace__lean_sandbox();
}

static KT_NOINSTR void sandbox_leave(int ok)
{
	if (ok)
		kt_store(&installed, 1, seq_cst);
	kt_add(&installing, -1, release);
}

#if defined(__x86_64__) || defined(__aarch64__)
static KT_NOINSTR long raw6(long nr, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long r;

	__asm__ volatile("syscall"
	                 : "=a"(r)
	                 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
	                 : "rcx", "r11", "memory");
	return r;
#else
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc 0"
	                 : "+r"(x0)
	                 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
	                 : "memory");
	return x0;
#endif
}

/* glibc's syscall(), with the sandbox noted first (above).  Weak: a
 * program statically linked with a syscall() of its own keeps it.  It
 * reads six arguments whatever the caller passed, as glibc's does (the
 * sixth from the caller's stack): not checked by AddressSanitizer. */
__attribute__((visibility("default"), weak, no_sanitize_address)) KT_NOINSTR long
syscall(long nr, ...)
{
	va_list ap;
	long a[6], r;
	int tsync;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	/* the kernel takes op and flags as unsigned int */
	tsync = nr == SYS_seccomp && (unsigned)a[0] == SECCOMP_SET_MODE_FILTER &&
	        ((unsigned)a[1] & SECCOMP_FILTER_FLAG_TSYNC);
	if (tsync)
		sandbox_enter();
	r = raw6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	/* A thread that could not be synchronised: its tid (> 0), unless
	 * TSYNC_ESRCH asked for -ESRCH; no filter went on either way. */
	if (tsync)
		sandbox_leave(r == 0 || (r > 0 && ((unsigned)a[1] & SECCOMP_FILTER_FLAG_TSYNC_ESRCH)));
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}
#endif
