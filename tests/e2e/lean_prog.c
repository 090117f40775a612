/*
 * lean_prog.c - a program built in the lean mode (-p -mfentry
 * -minstrument-return=call), PIE and not, for test_e2e_lean.  argv[1]
 * picks what it does; it prints what it did, takes a snapshot and prints
 * "snapshot <rc> <path>".
 *
 *   calls    main > run > outer x OUTER > inner x INNER, plus fp(),
 *            vargs(), big() (registers and memory the trampolines must
 *            keep) and rec(DEPTH) recursion; the results are checked here.
 *            Also prints "prof=1" if gprof's profiling runs (a SIGPROF
 *            handler or an ITIMER_PROF timer: a build linked with -p or -pg).
 *   longjmp  main > catcher > dive x 50, dive(1) longjmps to catcher,
 *            which calls after_jump; then main calls work x 10.
 *   tail     main > tail_a, which tail-calls tail_b, which tail-calls
 *            tail_c, x TAILS: GCC calls __return__ before each jump, so
 *            the three are siblings under main.
 *   dlopen   main > the plugin's plugin_outer x 100 > plugin_inner x 3.
 *   modes    main > mixed_outer x 50 > mixed_fi_run (lean_mixed_fi.c, in
 *            the default mode) > mixed_leaf x 10 and lean_cb x 10 (lean):
 *            e2e_lean_mixed only (the others print "modes absent").
 *   inl      main > via_inline x 100, into which twice() is inlined, then
 *            main > twice x 7 out of line (through a pointer): a lean
 *            build sees 7 calls of twice, -finstrument-functions 107.
 *   hot      main > hot_loop for ~300 ms > mid > leaf (the budget mutes
 *            them, or KTRACE_EXCLUDE does), then main > marker x 5.
 *   count    main > mid x COUNT > leaf x 10, then waits 300 ms and prints
 *            "leaf-site <first byte of leaf>" (a call, or a nop once
 *            patched out), "writable-code <n>" (mappings both writable
 *            and executable: the patched code back to read+exec) and
 *            "batches <n> nop <n>" (static build: the patching batches
 *            that ran, the sites that are nops).
 *   spread   (e2e_lean_big: 2 MiB more code) mid x COUNT > leaf x 10 in
 *            rounds of 100, reading /proc/self/maps after each and for
 *            300 ms after: prints "spread code-kb <the executable's code
 *            mapped> rwx-kb <most of it seen writable at once> now-kb
 *            <writable at the end>".
 *   wx       as count, after forbidding writable code (MDWE, else a
 *            seccomp filter); prints "wx mdwe" or "wx seccomp".
 *   wxexec   forbids writable code as wx does, then runs itself again
 *            (execve keeps the ban) in count mode: ktrace starts where
 *            code can never be made writable.
 *   seccompexec  installs a seccomp filter that allows everything, then
 *            runs itself again in count mode (ktrace starts under it).
 * Every mode first prints "code-copied <kB> <kB>" (print_code_copied).
 *   slowleaf main > slow_leaf x 40 (2 ms each), main > marker x 5;
 *            after 300 ms, "batches <n> nop <n>" (static build).
 *   ways     (static build) coll_a and coll_b, whose first cache slots
 *            are one, alternate 20,000 times under collide_run; then 16
 *            fresh functions wl0..wl15 make 8 calls each (2 learning)
 *            under learn_run; prints "ways collide <slow entries during
 *            the first> learn <slow exits during the second> ok <1|0>".
 *   nested   (static build) nx_leaf's first call returns while the thread
 *            is marked as in the library's slow path (a signal handler
 *            that interrupted it sees it so): its exit comes to the slow
 *            path (a learning call, its site not known yet) nested.  Then
 *            nx_after x 3.  Prints "nested depth <before> <after> ok <1|0>"
 *            (the thread's lean stack depth around the call).
 *   late     late_a (direct calls) and late_b (through a pointer), both
 *            excluded by the test, return one way 100 times, then the
 *            other 300,000 times; after 300 ms: "late calls <a> <b>", how
 *            many of each one's two exit sites still call __return__
 *            (static build; -1 where they cannot be told): 0 once the
 *            sites their first calls never took are learned and patched.
 *   flip     (static build) 8 threads run outer > inner and pads > pad0
 *            .. pad16 while main patches every function out and in again
 *            for ~1 s; then each thread runs outer and pads x 10 more;
 *            prints "patches <n> <ns per patch>".  pad<k>'s exit site (a
 *            sibling call's) is k bytes further into its 16-byte aligned
 *            function than pad0's, so pad1..pad16 cover every offset in
 *            16 bytes whatever the build's code: 12-14 in jump form, 15 in
 *            call-ret form (by int3 while the test forces it);
 *            pad_leaf's and the others' exits are followed by a ret (ret
 *            form).
 *   forkflip (static build) 4 threads run outer and pads while main
 *            patches every function out and in again and forks a child
 *            right after each of 24 flips (FORKFLIP_KIDS), while the writer patches: each
 *            child runs outer x 10 and pads x 10 (checking their results)
 *            and takes a snapshot ("child <pid> <rc> <path>"); main
 *            prints "forkflip children <n> ok <n>" (each exited 0).
 *   reload   loads libe2e_lean_reload_a.so, calls a_run until a_leaf
 *            (excluded by the test) is patched out and its 600 a_f<n>
 *            until they are, makes a's code read+exec itself and calls
 *            a_run2 until a_leaf2 is patched out, unloads a, and does the
 *            same with ..._b.so (which may land where a was, while ktrace
 *            keeps that code writable); prints "reload a <a_leaf's first
 *            byte> <a_run calls> a2 <a_leaf2's> <a_run2 calls> b <b_leaf's>
 *            <b_run calls> many <a_f still calling> <b_f still calling>".
 *   forkreload  loads libe2e_lean_reload_a.so, calls a_run until a_leaf
 *            (excluded) is patched out, so that ktrace keeps a's code
 *            writable for a while (LINGER), unloads a, maps read+write
 *            memory where its code was, fills it and forks; the child
 *            writes it again and exits 0 (a fork handler that made the
 *            old range read+exec killed it).  Prints "forkreload <tries
 *            that found the place free> child <its wait status, or -1>".
 *   forknofd  the same library patched (its code kept writable a while),
 *            then every descriptor taken (RLIMIT_NOFILE 64) and a fork:
 *            the child, which could not read /proc/self/maps in its fork
 *            handler, frees some and reads it: exits 2 if the library's
 *            code is still read+write+exec there, 0 if not.  Prints
 *            "forknofd child <its wait status>".
 *   storm    6 threads run storm_worker > outer(4) x STORM_ITERS while main
 *            sends them SIGUSR1 every ~5 us; the handler, on_sig, calls
 *            sig_leaf twice.  Signals and preemptions land inside the
 *            hooks' restartable sequences (record.c), whose aborts must
 *            restart without losing or doubling a record.  Prints
 *            "storm signals <handled> iters <per thread>".
 *   held     (static build) main > held(1) > held(0) and held(0) >
 *            held_leaf x 16 (held's exits A and B, followed by a ret,
 *            learned; C, a sibling call's, not: held is neither muted nor
 *            excluded, so no sampled return learns it), then main > held(3) > held(2) >
 *            held(1) > held(0) > held_loop, which patches every function
 *            out while the four are open, waits for exit stubs
 *            (lib/lean.c, STUBS), then calls held through A, B and C
 *            100,000 times each; the three return through A.  Then every
 *            site back in, 50 ms, and main > held x 3.  Prints "held stubs
 *            <exit sites given a stub>" and "held sum <s> want <s>".
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

#define OUTER 20
#define INNER 5
#define DEPTH 10
#define TAILS 7
#define COUNT 20000

static volatile int sink;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- calls ---------------------------------------------------------------- */

__attribute__((noinline)) int inner(int x)
{
	__atomic_fetch_add(&sink, x, __ATOMIC_RELAXED);   /* threads run it (flip) */
	return x + 1;
}

__attribute__((noinline)) int outer(int n)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += inner(i);
	return s;
}

__attribute__((noinline)) double fp(double a, double b, float c, double d, double e, double f,
                                    double g, double h)
{
	sink++;
	return a + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8;
}

__attribute__((noinline)) long vargs(int n, ...)
{
	va_list ap;
	long s = 0;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		s += i % 2 ? (long)va_arg(ap, double) : va_arg(ap, long);
	va_end(ap);
	return s;
}

struct big { long a[6]; };

__attribute__((noinline)) struct big big(long x)
{
	struct big b;

	for (int i = 0; i < 6; i++)
		b.a[i] = x + i;
	return b;
}

__attribute__((noinline)) int rec(int n)
{
	int r = n <= 1 ? 0 : rec(n - 1);

	sink += r;   /* not a tail call: GCC would turn it into a loop */
	return r + 1;
}

__attribute__((noinline)) int run(void)
{
	int s = 0;

	for (int i = 0; i < OUTER; i++)
		s += outer(INNER);
	return s;
}

/* Is gprof profiling this process (gcrt1.o's __monstartup: a SIGPROF
 * handler and an ITIMER_PROF timer)? */
static int gprof_running(void)
{
	struct sigaction sa;
	struct itimerval it;

	return (sigaction(SIGPROF, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL) ||
	       (getitimer(ITIMER_PROF, &it) == 0 && (it.it_value.tv_sec || it.it_value.tv_usec));
}

static int do_calls(void)
{
	int s = run();
	double d = fp(1, 2, 3, 4, 5, 6, 7, 8);
	long v = vargs(4, 10L, 2.5, 30L, 4.5);
	struct big b = big(100);
	int r = rec(DEPTH);

	printf("calls s=%d d=%g v=%ld b=%ld r=%d prof=%d\n", s, d, v, b.a[5], r, gprof_running());
	return s == OUTER * (INNER * (INNER + 1) / 2) && d == 1 + 4 + 9 + 16 + 25 + 36 + 49 + 64 &&
	       v == 10 + 2 + 30 + 4 && b.a[5] == 105 && r == DEPTH ? 0 : 1;
}

/* ---- longjmp ----------------------------------------------------------------- */

static jmp_buf jb;

__attribute__((noinline)) void dive(int n)
{
	if (n <= 0)
		return;
	if (n == 1)
		longjmp(jb, 1);
	dive(n - 1);
	sink++;
}

__attribute__((noinline)) void after_jump(void) { sink += 2; }
__attribute__((noinline)) void work(void) { sink += 3; }

__attribute__((noinline)) void catcher(void)
{
	if (!setjmp(jb))
		dive(50);
	else
		after_jump();
}

/* ---- mixed ---------------------------------------------------------------------- */

int mixed_fi_run(int n, int (*cb)(int)) __attribute__((weak));

static __attribute__((noipa)) int lean_cb(int x)
{
	return x ^ 5;
}

/* noipa: no clone of it for n = 10; the + 1: no tail call */
static __attribute__((noipa)) int mixed_outer(int n)
{
	return mixed_fi_run(n, lean_cb) + 1;
}

static int do_modes(void)
{
	int s = 0;

	if (mixed_fi_run == NULL) {
		printf("modes absent\n");
		return 1;
	}
	for (int i = 0; i < 50; i++)
		s += mixed_outer(10);
	printf("modes s=%d\n", s);
	return 0;
}

/* ---- inl ------------------------------------------------------------------------ */

static inline int twice(int x)
{
	return 2 * x + 1;
}

static int (*volatile twice_p)(int) = twice;

static __attribute__((noinline)) int via_inline(int x)
{
	return twice(x) + 1;
}

static int do_inl(void)
{
	int s = 0;

	for (int i = 0; i < 100; i++)
		s += via_inline(i);
	for (int i = 0; i < 7; i++)
		s += twice_p(i);
	printf("inl s=%d\n", s);
	return s != (2 * 4950 + 2 * 100) + (2 * 21 + 7) ? 1 : 0;
}

/* ---- tail calls -------------------------------------------------------------- */

__attribute__((noinline)) int tail_c(int x) { sink += x; return x * 3; }
__attribute__((noinline)) int tail_b(int x) { return tail_c(x + 1); }
__attribute__((noinline)) int tail_a(int x) { return tail_b(x + 1); }

/* ---- hot: the budget ---------------------------------------------------------- */

/* sink: only there to keep the calls; threads race on it (wxthreads),
 * harmlessly, which TSan need not report */
__attribute__((noinline, no_sanitize_thread)) int leaf(int x) { sink ^= x; return x * 2; }   /* ^: no overflow */

__attribute__((noinline)) int mid(int n)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += leaf(i);
	return s;
}

__attribute__((noinline)) void marker(void) { sink++; }

__attribute__((noinline)) long hot_loop(int ms)
{
	int64_t end = now_ns() + (int64_t)ms * 1000000;
	long s = 0;

	while (now_ns() < end)
		for (int i = 0; i < 1000; i++)
			s += mid(10);
	return s;
}

static void do_hot(void)
{
	long s = hot_loop(300);

	for (int i = 0; i < 5; i++)
		marker();
	printf("hot %ld\n", s);
}

/* phases: 16 hot phases of 20 ms one after another, each with a leaf of
 * its own under a mid of its own, so the budget mutes about once a phase:
 * some of those mutes come within a batch gap of the last batch and take
 * an early, entries-only pass (lean.c, EARLY); the nesting stays exact. */
#define PHASE(k)                                                               \
	__attribute__((noinline)) int ph_leaf##k(int x) { sink ^= x + k; return x * 2; } \
	__attribute__((noinline)) int ph_mid##k(int n)                         \
	{                                                                      \
		int s = 0;                                                     \
		for (int i = 0; i < n; i++)                                    \
			s += ph_leaf##k(i);                                    \
		return s;                                                      \
	}
PHASE(0) PHASE(1) PHASE(2) PHASE(3) PHASE(4) PHASE(5) PHASE(6) PHASE(7)
PHASE(8) PHASE(9) PHASE(10) PHASE(11) PHASE(12) PHASE(13) PHASE(14) PHASE(15)
static int (*const ph_mid[16])(int) = {
	ph_mid0, ph_mid1, ph_mid2, ph_mid3, ph_mid4, ph_mid5, ph_mid6, ph_mid7,
	ph_mid8, ph_mid9, ph_mid10, ph_mid11, ph_mid12, ph_mid13, ph_mid14, ph_mid15,
};

__attribute__((noinline)) long phase(int k, int ms)
{
	int64_t end = now_ns() + (int64_t)ms * 1000000;
	long s = 0;

	while (now_ns() < end)
		for (int i = 0; i < 1000; i++)
			s += ph_mid[k](10);
	return s;
}

/* mixed: short, but 1 call in 20 spins 10 us: never a candidate by the
 * window's rule (long calls 1 in 100 or more), muted by the CPU's. */
__attribute__((noinline)) int mixed(int i)
{
	if (i % 20 == 0) {
		int64_t end = now_ns() + 10000;
		while (now_ns() < end)
			sink++;
	}
	return leaf(i);
}

static void do_mixed(void)
{
	usleep(50000);
	for (int i = 0; i < 200000; i++)
		sink ^= mixed(i);   /* ^, not +: the sum would overflow an int */
	for (int i = 0; i < 5; i++)
		marker();
	usleep(300000);
	printf("mixed 200000\n");
}

/* BURST calls of mid(10), 50 ms after the start (the writer thread runs
 * its budget by then). */
#define BURST 100000
static void do_burst(void)
{
	usleep(50000);
	for (int i = 0; i < BURST; i++)
		sink += mid(10);
	for (int i = 0; i < 5; i++)
		marker();
	usleep(300000);
	printf("burst %d\n", BURST);
}

static void print_batches(void);

/* Mappings both writable and executable now (/proc/self/maps), -1 if
 * it cannot be read. */
static int writable_code(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], perms[8];
	int n = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %7s", perms) == 1 && perms[1] == 'w' && perms[2] == 'x')
			n++;
	fclose(f);
	return n;
}

#if defined(LEAN_PAD)
/* 2 MiB of code (int3s) beside the program's: e2e_lean_big's code
 * segment is large, and what a batch makes writable is small in it. */
__asm__(".pushsection .text.kt_pad,\"ax\",@progbits\n.skip 2097152, 0xcc\n.popsection");
#endif

/* The executable's code mapped (/proc/self/maps, kB) into *code_kb, and
 * of it what is writable now: -1 if the file cannot be read. */
static long exe_code_kb(long *code_kb)
{
	char exe[512], line[1024], perms[8], path[512];
	unsigned long lo, hi;
	long w = 0;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *f = fopen("/proc/self/maps", "r");

	if (n <= 0 || f == NULL) {
		if (f != NULL)
			fclose(f);
		return -1;
	}
	exe[n] = 0;
	*code_kb = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %511s", &lo, &hi, perms, path) == 4 &&
		    strcmp(path, exe) == 0 && perms[2] == 'x') {
			*code_kb += (long)((hi - lo) >> 10);
			if (perms[1] == 'w')
				w += (long)((hi - lo) >> 10);
		}
	fclose(f);
	return w;
}

static void do_spread(void)
{
	long s = 0, code = 0, w, most = 0, now;

	for (int i = 0; i < COUNT; i += 100) {
		for (int j = 0; j < 100; j++)
			s += mid(10);
		if ((w = exe_code_kb(&code)) > most)
			most = w;
	}
	for (int64_t end = now_ns() + 300000000LL; now_ns() < end; usleep(500))
		if ((w = exe_code_kb(&code)) > most)
			most = w;
	now = exe_code_kb(&code);
	printf("count %ld\nleaf-site %02x\n", s, *(const unsigned char *)(uintptr_t)leaf);
	printf("spread code-kb %ld rwx-kb %ld now-kb %ld\n", code, most, now);
}

static void do_count(void)
{
	long s = 0;

	for (int i = 0; i < COUNT; i++)
		s += mid(10);
	for (int i = 0; i < 5; i++)
		marker();
	usleep(300000);
	printf("count %ld\nleaf-site %02x\n", s, *(const unsigned char *)(uintptr_t)leaf);
	printf("writable-code %d\n", writable_code());
	print_batches();
}

/* slowleaf: an excluded function whose calls last 2 ms each, so that the
 * writer, woken at the entry of its last learning call (lib/lean.c,
 * ready_hint), finds that call still open when it takes the entry out. */
__attribute__((noinline)) void slow_leaf(void)
{
	usleep(2000);
	sink++;
}

__attribute__((noinline)) static void do_slowleaf(void)
{
	for (int i = 0; i < 40; i++)
		slow_leaf();
	for (int i = 0; i < 5; i++)
		marker();
	usleep(300000);
	print_batches();
}

#if defined(LEAN_RWX)
/* A section both writable and executable: the linker puts it with the
 * data, whose segment becomes RWX.  ktrace must leave that segment
 * writable (neither the copy at start-up nor a batch may make it r-x). */
__asm__(".section .wtext,\"awx\",@progbits\n\t.globl wtext_byte\nwtext_byte: .byte 0xc3\n\t.previous");
extern unsigned char wtext_byte;
#endif

/* "code-copied <kB> <kB>": of the executable's code mappings, the part
 * that is private memory (copied: PRECOPY in lean.c), and their size;
 * at main's start, before any patching. */
static void print_code_copied(void)
{
	char exe[4096], line[4352], perms[8], path[4096];
	long anon = 0, size = 0, v;
	int in_code = 0;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *f = fopen("/proc/self/smaps", "r");

	if (n <= 0 || f == NULL) {
		printf("code-copied -1 -1\n");
		if (f)
			fclose(f);
		return;
	}
	exe[n] = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*[0-9a-f]-%*[0-9a-f] %7s %*s %*s %*s %4095s", perms, path) == 2)
			in_code = strcmp(perms, "r-xp") == 0 && strcmp(path, exe) == 0;
		else if (in_code && sscanf(line, "Size: %ld kB", &v) == 1)
			size += v;
		else if (in_code && sscanf(line, "Anonymous: %ld kB", &v) == 1)
			anon += v;
	}
	fclose(f);
	printf("code-copied %ld %ld\n", anon, size);
}

/* ---- wx: forbid writable code ---------------------------------------------------- */

/* A seccomp filter of n instructions for this thread and its children
 * (no new privileges first, as an unprivileged process must); 0 or -1. */
static int install_filter(struct sock_filter *f, size_t n)
{
	struct sock_fprog prog = {(unsigned short)n, f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return -1;
	return 0;
}

static const char *forbid_wx(void)
{
	/* PR_SET_MDWE (Linux 6.3): refuse W+X and adding X. */
	if (prctl(65, 1, 0, 0, 0) == 0)
		return "mdwe";
	/* Else a seccomp filter: mprotect with PROT_WRITE and PROT_EXEC
	 * fails with EPERM. */
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_WRITE | PROT_EXEC),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_WRITE | PROT_EXEC, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};

	if (install_filter(f, sizeof(f) / sizeof(f[0])) != 0)
		return NULL;
	return "seccomp";
}

/* wxthreads: after the burst (its leaf muted, in the hooks under W^X),
 * four threads each call mid 20000 times and exit: their last skipped
 * calls are counted at their exit, not at a later look they never make. */
#define WXT_THREADS 4
#define WXT_CALLS 20000
static void *wxt_worker(void *arg)
{
	int s = 0;

	(void)arg;
	for (int i = 0; i < WXT_CALLS; i++)
		s += mid(10);
	return (void *)(intptr_t)s;
}

static void do_wxthreads(void)
{
	pthread_t th[WXT_THREADS];

	do_burst();
	for (int i = 0; i < WXT_THREADS; i++)
		pthread_create(&th[i], NULL, wxt_worker, NULL);
	for (int i = 0; i < WXT_THREADS; i++)
		pthread_join(th[i], NULL);
	printf("wxthreads %d\n", WXT_THREADS * WXT_CALLS);
}

/*
 * tsync: 50 ms after start, a seccomp filter on every thread (TSYNC, as a
 * program that sandboxes itself once initialised) that kills the process
 * on each call ktrace makes only for its own ends: mprotect and
 * membarrier (patching), madvise (prefaulting), sched_[gs]etaffinity (the
 * writer's moves), prctl (thread names).  Then a burst the budget mutes.
 */
static int tsync_filter(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* the sanitizers' own runtimes call mprotect, madvise and prctl
	 * (LeakSanitizer at exit, the shadow's pages): only ktrace's others */
	static const int nrs[] = {SYS_membarrier, SYS_sched_setaffinity, SYS_sched_getaffinity};
#else
	static const int nrs[] = {SYS_mprotect, SYS_membarrier, SYS_madvise, SYS_sched_setaffinity,
	                          SYS_sched_getaffinity, SYS_prctl};
#endif
	enum { NRS = sizeof(nrs) / sizeof(nrs[0]) };
	struct sock_filter f[2 + 2 * NRS];
	struct sock_fprog prog;
	size_t n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	                                      offsetof(struct seccomp_data, nr));
	for (size_t i = 0; i < NRS; i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nrs[i], 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = (unsigned short)n;
	prog.filter = f;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
}

/* Runs this program again in count mode (execve keeps a ban or a filter
 * set before); returns only if execv failed. */
static int rerun_count(char *argv0)
{
	char *args[] = {argv0, (char *)"count", NULL};

	fflush(stdout);
	execv("/proc/self/exe", args);
	printf("execv: %s\n", strerror(errno));
	return 1;
}

/* ---- flip: patching under load ------------------------------------------------------ */

#if defined(LEAN_STATIC)
void ktrace__lean_test_force(int mode);   /* lean.c: 1 all out, 2 all in, 0 as decided */
void ktrace__lean_stats(uint64_t *patched, uint64_t *failed, uint64_t *nop_sites,
                        uint64_t *batches, uint64_t *ns);
void ktrace__lean_test_paths(int int3, uint64_t *whole, uint64_t *by_jump, uint64_t *by_ret,
                             uint64_t *by_int3);
#else
static void ktrace__lean_test_paths(int int3, uint64_t *whole, uint64_t *by_jump,
                                    uint64_t *by_ret, uint64_t *by_int3)
{
	(void)int3;
	*whole = *by_jump = *by_ret = *by_int3 = 0;
}
static void ktrace__lean_test_force(int mode) { (void)mode; }
static void ktrace__lean_stats(uint64_t *p, uint64_t *f, uint64_t *n, uint64_t *b, uint64_t *ns)
{
	*p = *f = *n = *b = *ns = 0;
}
#endif

/* "batches <batches that wrote> nop <sites that are nops now>" (0 0 but
 * in the static build, which can reach the library's counters). */
static void print_batches(void)
{
	uint64_t p, f, nop, b, ns;

	ktrace__lean_stats(&p, &f, &nop, &b, &ns);
	printf("batches %llu nop %llu\n", (unsigned long long)b, (unsigned long long)nop);
}

/* pad<k>: k bytes of nops move its exit site (and nothing else) k bytes;
 * it tail-calls pad_leaf ("call __return__; jmp pad_leaf": an exit site
 * not followed by a ret, so its geometry picks how it is written), which
 * returns x + k through an exit followed by a ret.  Not instrumented by a
 * sanitizer, whose exit call would end the tail calls. */
__attribute__((noinline)) int pad_leaf(int x)
{
	__atomic_fetch_xor(&sink, x, __ATOMIC_RELAXED);   /* threads run it (flip) */
	return x;
}

#define PAD(k)                                                           \
	__attribute__((noinline, aligned(16),                             \
	               no_sanitize("address", "thread", "undefined")))    \
	int pad##k(int x)                                                \
	{                                                                \
		__asm__ volatile(".skip " #k ", 0x90");                  \
		return pad_leaf(x + k);                                  \
	}
PAD(0) PAD(1) PAD(2) PAD(3) PAD(4) PAD(5) PAD(6) PAD(7) PAD(8)
PAD(9) PAD(10) PAD(11) PAD(12) PAD(13) PAD(14) PAD(15) PAD(16)

/* Each pad once; their results checked (a site patched wrong would skip
 * or garble code). */
__attribute__((noinline)) int pads(int x)
{
	int s = pad0(x) + pad1(x) + pad2(x) + pad3(x) + pad4(x) + pad5(x) + pad6(x) + pad7(x) +
	        pad8(x) + pad9(x) + pad10(x) + pad11(x) + pad12(x) + pad13(x) + pad14(x) +
	        pad15(x) + pad16(x);

	if (s != 17 * x + 136)
		abort();
	return s;
}

/* ---- late: exit sites a function's first calls never took -------------------- */


/* Two returns each: x == 0 one way (k), else the other (x * k) (not
 * instrumented by a sanitizer, whose exit call merges them into one). */
#define LATE(name, k)                                                             \
	__attribute__((noinline, no_sanitize("address", "thread", "undefined"))) int \
	name(int x)                                                              \
	{                                                                        \
		if (x == 0) {                                                    \
			sink += k;                                               \
			return k;                                                \
		}                                                                \
		sink += x;                                                       \
		return x * (k + 4);                                              \
	}
LATE(late_a, 1)
LATE(late_b, 2)

static int (*volatile late_b_ptr)(int) = late_b;

__attribute__((noinline)) int late_loop(int n, int x)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += late_a(x) + late_b_ptr(x);
	return s;
}

#if defined(LEAN_STATIC)
void __return__(void);

/* Of f's two exit sites (5 bytes, then its ret), how many still call
 * __return__ (a direct call in the static build) rather than being
 * patched out (a nop, a jump, or a ret over the call's first byte); -1
 * if two were not found. */
static int exit_calls(const unsigned char *f)
{
	static const unsigned char nop5[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
	int sites = 0, calls = 0;

	for (int i = 0; i + 6 <= 128 && sites < 2; i++) {
		int32_t d;

		if (f[i + 5] != 0xc3)
			continue;
		memcpy(&d, f + i + 1, 4);
		if (f[i] == 0xe8 && (uintptr_t)(f + i + 5) + (intptr_t)d == (uintptr_t)__return__)
			calls++;
		else if (memcmp(f + i, nop5, 5) != 0 && !(f[i] == 0xeb && f[i + 1] == 3) &&
		         !(f[i] == 0xc3 && (uintptr_t)(f + i + 5) + (intptr_t)d == (uintptr_t)__return__))
			continue;   /* not an exit site, nor one patched out (nop, jump, ret) */
		sites++;
		i += 5;
	}
	return sites == 2 ? calls : -1;
}
#else
static int exit_calls(const unsigned char *f)
{
	(void)f;
	return -1;
}
#endif

/* ---- held: a muted function's exits while recorded calls of it are open ---- */

uint64_t ktrace__lean_test_stubs(void);
uint64_t ktrace__lean_test_early(void);
uint64_t ktrace__lean_test_callret(void);
#if !defined(LEAN_STATIC)
uint64_t ktrace__lean_test_stubs(void) { return 0; }
uint64_t ktrace__lean_test_early(void) { return 0; }
uint64_t ktrace__lean_test_callret(void) { return 0; }
#endif

static uint64_t held_stubs;
static volatile int held_go;

__attribute__((noinline)) long held_leaf(long x)
{
	sink += (int)x;
	return x + 1;
}

/* depth > 0: held(depth - 1) inside, returns through exit A; else x >= 0:
 * x, exit B; x < 0: held_leaf(-x), a sibling call's exit C; once held_go
 * is set: the patching and the loop (below).  Not instrumented by a
 * sanitizer, whose exit call would end the tail call. */
__attribute__((noinline, no_sanitize("address", "thread", "undefined"))) long held(int depth,
                                                                                  long x);
static __attribute__((noinline)) long held_loop(void);

long held(int depth, long x)
{
	long s;

	if (depth > 0) {
		s = held(depth - 1, x);
		sink += (int)s;
		return s + 1;
	}
	if (held_go) {
		held_go = 0;
		return held_loop();
	}
	if (x < 0)
		return held_leaf(-x);
	sink += (int)x;
	return x;
}

/* Under held(3) > held(2) > held(1) > held(0): every function patched
 * out; once exits have stubs, 100,000 rounds of held through each of its
 * exits. */
static long held_loop(void)
{
	uint64_t s0 = ktrace__lean_test_stubs();
	long s = 0;

	ktrace__lean_test_force(1);
	for (int i = 0; i < 400 && ktrace__lean_test_stubs() - s0 < 1; i++)
		usleep(5000);
	usleep(20000);   /* and the passes after it */
	held_stubs = ktrace__lean_test_stubs() - s0;
	for (long i = 0; i < 100000; i++)
		s += held(0, i) + held(0, -(i + 1)) + held(1, i);
	return s;
}

static int do_held(void)
{
	long s = 0, want = 0;

	/* held's first 2 calls (LEARN_CALLS) learn A and B; C, a sibling
	 * call's, stays unlearned (it keeps calling __return__): the
	 * sampled returns learn sites of muted or excluded functions only,
	 * and held is patched by force.  flip's pads cover that exit form. */
	for (int i = 0; i < 16; i++)
		s += held(1, i) + held(0, -(i + 1));
	if (s != 136 + 152)
		return 1;
	held_go = 1;
	s = held(3, 0);
	for (long i = 0; i < 100000; i++)
		want += i + (i + 2) + (i + 1);
	ktrace__lean_test_force(2);
	usleep(50000);
	for (int i = 0; i < 3; i++)
		sink += (int)held(0, i);
	ktrace__lean_test_force(0);
	printf("held stubs %llu\n", (unsigned long long)held_stubs);
	printf("held sum %ld want %ld\n", s, want + 3);
	return s != want + 3;
}

/* ---- reload: a library unloaded while its code is kept writable ---------- */

static int is_call_byte(unsigned b)
{
	return b == 0xff || b == 0xe8 || b == 0x67;
}

/* Call run until leaf (both in h) is patched out or 2 s pass; leaf's first
 * byte after, the runs in *n. */
static unsigned run_until(void *h, const char *run, const char *leaf, long *n)
{
	long (*r)(long) = (long (*)(long))dlsym(h, run);
	const volatile unsigned char *l = (const volatile unsigned char *)dlsym(h, leaf);
	int64_t t0 = now_ns();

	*n = 0;
	if (r == NULL || l == NULL)
		return 0x100;
	while (is_call_byte(l[0]) && now_ns() - t0 < 2000000000LL) {
		sink += (int)r(100);
		++*n;
	}
	return l[0];
}

/* The many functions of h (lean_reload.c) still calling at entry, after
 * calling them all until none is or 2 s pass. */
static int run_many(void *h, const char *prefix)
{
	char name[64];
	const void *(*many)(int);
	long (*all)(void);
	int64_t t0 = now_ns();
	int calling;

	snprintf(name, sizeof(name), "%s_many", prefix);
	many = (const void *(*)(int))dlsym(h, name);
	snprintf(name, sizeof(name), "%s_run_many", prefix);
	all = (long (*)(void))dlsym(h, name);
	if (many == NULL || all == NULL)
		return -1;
	do {
		sink += (int)all();
		calling = 0;
		for (int i = 0; many(i) != NULL; i++)
			calling += is_call_byte(*(const volatile unsigned char *)many(i));
	} while (calling > 0 && now_ns() - t0 < 2000000000LL);
	return calling;
}

/* The page-rounded code segment of the loaded library whose name holds
 * name: [lo, hi). */
struct seg_find {
	const char *name;
	uintptr_t lo, hi;
};

static int seg_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct seg_find *f = arg;

	(void)size;
	if (strstr(info->dlpi_name, f->name) == NULL)
		return 0;
	for (int k = 0; k < info->dlpi_phnum; k++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[k];
		uintptr_t b = info->dlpi_addr + p->p_vaddr, e = b + p->p_memsz;

		if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			f->lo = b & ~(uintptr_t)4095;
			f->hi = (e + 4095) & ~(uintptr_t)4095;
		}
	}
	return 1;
}

/* Make the code of the loaded library whose name holds name read+exec. */
static void reseal(const char *name)
{
	struct seg_find f = {name, 0, 0};

	dl_iterate_phdr(seg_cb, &f);
	if (f.lo != 0)
		mprotect((void *)f.lo, f.hi - f.lo, PROT_READ | PROT_EXEC);
}

static int do_reload(void)
{
	long na, na2, nb;
	void *ha, *hb;
	unsigned a, a2, b;
	int ma, mb;

	if ((ha = dlopen(KTRACE_TEST_BINARY_DIR "/libe2e_lean_reload_a.so", RTLD_NOW)) == NULL) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	a = run_until(ha, "a_run", "a_leaf", &na);
	ma = run_many(ha, "a");
	/* sealed again by the program while ktrace keeps it writable */
	reseal("libe2e_lean_reload_a");
	a2 = run_until(ha, "a_run2", "a_leaf2", &na2);
	dlclose(ha);
	if ((hb = dlopen(KTRACE_TEST_BINARY_DIR "/libe2e_lean_reload_b.so", RTLD_NOW)) == NULL) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	b = run_until(hb, "b_run", "b_leaf", &nb);
	mb = run_many(hb, "b");
	printf("reload a %02x %ld a2 %02x %ld b %02x %ld many %d %d\n", a, na, a2, na2, b, nb, ma, mb);
	return a > 0xff || a2 > 0xff || b > 0xff;
}

static int do_forkreload(void)
{
	int found = 0, status = -1;

	for (int t = 0; t < 5 && !found; t++) {
		struct seg_find f = {"libe2e_lean_reload_a", 0, 0};
		void *h, *m;
		long n;
		unsigned a;
		pid_t pid;

		if ((h = dlopen(KTRACE_TEST_BINARY_DIR "/libe2e_lean_reload_a.so", RTLD_NOW)) == NULL) {
			printf("dlopen: %s\n", dlerror());
			return 1;
		}
		a = run_until(h, "a_run", "a_leaf", &n);
		dl_iterate_phdr(seg_cb, &f);
		dlclose(h);
		if (a > 0xff || f.lo == 0) {
			printf("forkreload: a_leaf not patched out (%x) or no code segment\n", a);
			return 1;
		}
		m = mmap((void *)f.lo, f.hi - f.lo, PROT_READ | PROT_WRITE,
		         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (m == MAP_FAILED)
			continue;
		if (m != (void *)f.lo) {   /* a kernel before 4.17: a hint only */
			munmap(m, f.hi - f.lo);
			continue;
		}
		found++;
		memset(m, 1, f.hi - f.lo);
		fflush(stdout);
		if ((pid = fork()) == 0) {
			memset(m, 2, f.hi - f.lo);
			_exit(0);
		}
		if (pid > 0)
			waitpid(pid, &status, 0);
		munmap(m, f.hi - f.lo);
	}
	printf("forkreload %d child %d\n", found, status);
	return found && status != 0;
}

/* Is a code mapping of the library whose name holds name rwx here? */
static int lib_code_rwx(const char *name)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int rwx = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, name) && strstr(line, " rwxp "))
			rwx = 1;
	fclose(f);
	return rwx;
}

static int do_forknofd(void)
{
	struct rlimit old, lim;
	int fds[128], nfd = 0, status = -1;
	long n;
	unsigned a;
	void *h;
	pid_t pid;

	if ((h = dlopen(KTRACE_TEST_BINARY_DIR "/libe2e_lean_reload_a.so", RTLD_NOW)) == NULL) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	getrlimit(RLIMIT_NOFILE, &old);
	lim = old;
	lim.rlim_cur = 64;
	setrlimit(RLIMIT_NOFILE, &lim);
	a = run_until(h, "a_run", "a_leaf", &n);
	while (nfd < 128 && (fds[nfd] = dup(0)) >= 0)
		nfd++;
	fflush(stdout);
	if ((pid = fork()) == 0) {
		for (int i = 0; i < nfd && i < 8; i++)
			close(fds[i]);
		_exit(lib_code_rwx("libe2e_lean_reload_a") == 0 ? 0 : 2);
	}
	while (nfd > 0)
		close(fds[--nfd]);
	setrlimit(RLIMIT_NOFILE, &old);
	if (pid > 0)
		waitpid(pid, &status, 0);
	printf("forknofd %x child %d\n", a, status);
	return a > 0xff;
}

static int do_late(void)
{
	if (late_loop(100, 0) != 300 || late_loop(300000, 1) != 300000 * 11)
		return 1;
	usleep(300000);
	printf("late calls %d %d\n", exit_calls((const unsigned char *)(uintptr_t)late_a),
	       exit_calls((const unsigned char *)(uintptr_t)late_b));
	return 0;
}

/* ---- ways: the function cache's second slot, learning exits' fast path --- */

#if defined(LEAN_STATIC)
void ktrace__lean_test_slow(uint64_t *in, uint64_t *out);   /* lean.c */

/* 32 KiB apart (both aligned to it): their entries' ends r agree in bits
 * 4..14, so both have the same first cache slot (KT_FC_LEAN_SLOT). */
__attribute__((noinline, aligned(32768))) int coll_a(int x)
{
	sink += x;
	return x + 1;
}

__attribute__((noinline, aligned(32768))) int coll_b(int x)
{
	sink ^= x;
	return x + 2;
}

static __attribute__((noipa)) long collide_run(int n)
{
	long t = 0;

	for (int i = 0; i < n; i++)
		t += coll_a(i) + coll_b(i);
	return t;
}

#define WL(k)                                                             \
	__attribute__((noinline)) int wl##k(int x) { sink += x; return x + k; }
WL(0) WL(1) WL(2) WL(3) WL(4) WL(5) WL(6) WL(7)
WL(8) WL(9) WL(10) WL(11) WL(12) WL(13) WL(14) WL(15)
static int (*const wl[16])(int) = {wl0, wl1, wl2, wl3, wl4, wl5, wl6, wl7,
                                   wl8, wl9, wl10, wl11, wl12, wl13, wl14, wl15};

static __attribute__((noipa)) int learn_run(void)
{
	int t = 0;

	for (int k = 0; k < 16; k++)
		for (int i = 0; i < 8; i++)   /* LEARN_CALLS (2) learn, 6 more don't */
			t += wl[k](i);
	return t;
}

/* "ways collide <slow entries> learn <slow exits> <slow entries> ok <1|0>":
 * slow entries while coll_a and coll_b alternate WAYS_N times each (one
 * slot: every call of one of them); slow exits and entries while 16 fresh
 * functions make 8 calls each, LEARN_CALLS of them learning (exits
 * without the fast path: 32, and learn_run's own first exit: 33; entries:
 * the learning calls', 32, and learn_run's, 33, or 49 when the third call
 * came to the slow path too). */
#define WAYS_N 20000
static int do_ways(void)
{
	uint64_t in0, out0, in1, out1, in2, out2;
	long want = 0;
	int lt = 0;

	ktrace__lean_test_slow(&in0, &out0);
	long got = collide_run(WAYS_N);
	ktrace__lean_test_slow(&in1, &out1);
	int lr = learn_run();
	ktrace__lean_test_slow(&in2, &out2);
	for (int i = 0; i < WAYS_N; i++)
		want += 2L * i + 3;
	for (int k = 0; k < 16; k++)
		for (int i = 0; i < 8; i++)
			lt += i + k;
	printf("ways collide %llu learn %llu %llu ok %d\n", (unsigned long long)(in1 - in0),
	       (unsigned long long)(out2 - out1), (unsigned long long)(in2 - in1),
	       got == want && lr == lt);
	return got != want || lr != lt;
}
#else
static int do_ways(void)
{
	printf("ways absent\n");
	return 0;
}
#endif

/* ---- nested: a handler's exit while the library's slow path runs ------- */

#if defined(LEAN_STATIC)
void ktrace__lean_test_nest(int delta);     /* lean.c */
uint32_t ktrace__lean_test_depth(void);

__attribute__((noinline)) int nx_leaf(int x)
{
	ktrace__lean_test_nest(1);   /* its exit: as in a handler that interrupted the library */
	sink += x;
	return x + 1;
}

__attribute__((noinline)) int nx_after(int x)
{
	sink += x;
	return x + 2;
}

static int do_nested(void)
{
	uint32_t d0 = ktrace__lean_test_depth(), d1;
	int v = nx_leaf(1);

	ktrace__lean_test_nest(-1);
	d1 = ktrace__lean_test_depth();
	for (int i = 0; i < 3; i++)
		v += nx_after(i);
	printf("nested depth %u %u ok %d\n", d0, d1, v == 2 + 2 + 3 + 4);
	return v != 2 + 2 + 3 + 4;
}
#else
static int do_nested(void)
{
	printf("nested absent\n");
	return 0;
}
#endif

static _Atomic int stop;
static _Atomic long worker_calls;

__attribute__((noinline)) void *worker(void *arg)
{
	long n = 0;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		outer(INNER);
		pads((int)n & 1023);
		n++;
	}
	__atomic_fetch_add(&worker_calls, n, __ATOMIC_RELAXED);
	return NULL;
}

__attribute__((noinline)) void *tail_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++) {
		outer(INNER);
		pads(i);
	}
	return NULL;
}

/* A child forked while the writer may have been patching: it runs
 * patched code (no stale int3 may stop it), traces into its own buffers,
 * and its writer goes on patching. */
static int forkflip_child(void)
{
	char path[4096];
	int bad = 0, rc;

	alarm(30);   /* hung: killed, and the parent says so */
	for (int i = 0; i < 10; i++) {
		if (outer(INNER) != INNER * (INNER + 1) / 2)
			bad = 1;
		pads(i);   /* aborts if wrong */
	}
	rc = ktrace_snapshot("child");
	ktrace_last_snapshot(path, sizeof(path));
	printf("child %d %d %s\n", (int)getpid(), rc, path);
	fflush(stdout);
	return rc != 0 || bad;
}

static int do_forkflip(void)
{
	pthread_t th[4];
	int ok = 0, n = 0;
	/* FORKFLIP_KIDS: fewer under TSan (the test says why) */
	const char *k = getenv("FORKFLIP_KIDS");
	int kids = k && atoi(k) > 0 ? atoi(k) : 24;

	alarm(150);   /* ends the run if a child's wait hangs */
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	usleep(100000);
	for (int i = 0; i < kids; i++) {
		ktrace__lean_test_force(1 + i % 2);
		usleep(i % 3 == 0 ? 0 : 500 * (i % 5));   /* into the writer's batch */
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0)
			_exit(forkflip_child());
		int st = 0;
		n++;
		if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
		else if (pid > 0)
			printf("forkflip child %d: %s %d\n", (int)pid,
			       WIFSIGNALED(st) ? "killed by signal" : "exit status",
			       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
	ktrace__lean_test_force(2);
	usleep(100000);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ktrace__lean_test_force(0);
	alarm(0);
	printf("forkflip children %d ok %d\n", n, ok);
	return ok != n;
}

static int do_flip(void)
{
	pthread_t th[8];
	uint64_t p0, p1, f, nop, b0, b1, ns0, ns1, w0, w1, i0, i1, w2, i2, pm, bm, nsm, j0, j1, j2;
	uint64_t r0, r1, r2, st0, st1, c0, c1 = 0, c2;
	int64_t t0, t1;

	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	usleep(100000);
	ktrace__lean_stats(&p0, &f, &nop, &b0, &ns0);
	t0 = now_ns();
	/* The first 12 flips write every site by the int3 sequence, the
	 * others as ktrace chooses (one cmpxchg16b for a site inside 16
	 * aligned bytes): both paths run under the 8 threads. */
	ktrace__lean_test_paths(1, &w0, &j0, &r0, &i0);
	st0 = ktrace__lean_test_stubs();
	c0 = ktrace__lean_test_callret();
	for (int i = 0; i < 25; i++) {
		if (i == 12) {
			ktrace__lean_test_paths(0, &w1, &j1, &r1, &i1);
			c1 = ktrace__lean_test_callret();
			ktrace__lean_stats(&pm, &f, &nop, &bm, &nsm);
		}
		ktrace__lean_test_force(1 + i % 2);
		usleep(40000);
	}
	ktrace__lean_test_force(2);
	usleep(100000);
	t1 = now_ns();
	ktrace__lean_stats(&p1, &f, &nop, &b1, &ns1);
	ktrace__lean_test_paths(-1, &w2, &j2, &r2, &i2);
	st1 = ktrace__lean_test_stubs();
	c2 = ktrace__lean_test_callret();
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	ktrace__lean_test_force(0);
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, tail_worker, NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	printf("flip sites written by int3 %llu (%.1f us per batch), then whole %llu (%llu of them "
	       "in jump form, %llu in ret form) and by int3 %llu (%.1f us per batch)\n",
	       (unsigned long long)(i1 - i0), bm > b0 ? (nsm - ns0) / 1e3 / (double)(bm - b0) : 0.0,
	       (unsigned long long)(w2 - w1), (unsigned long long)(j2 - j1),
	       (unsigned long long)(r2 - r1), (unsigned long long)(i2 - i1),
	       b1 > bm ? (ns1 - nsm) / 1e3 / (double)(b1 - bm) : 0.0);
	printf("flip stubs %llu, exits out in call-ret form %llu (by int3 first: %llu)\n",
	       (unsigned long long)(st1 - st0), (unsigned long long)(c2 - c1),
	       (unsigned long long)(c1 - c0));
	printf("flip calls %ld patches %llu failed %llu nop %llu in %lld ms; %llu batches, "
	       "%.1f us per batch, %.1f us per site\n",
	       (long)worker_calls, (unsigned long long)(p1 - p0), (unsigned long long)f,
	       (unsigned long long)nop, (long long)((t1 - t0) / 1000000),
	       (unsigned long long)(b1 - b0), b1 > b0 ? (ns1 - ns0) / 1e3 / (double)(b1 - b0) : 0.0,
	       p1 > p0 ? (ns1 - ns0) / 1e3 / (double)(p1 - p0) : 0.0);
#if defined(LEAN_STATIC)
	/* Every write path ran: the first half only by int3, the second
	 * whole (every entry site), in ret form (exits followed by a ret), in
	 * jump form (the pads' exits at 12-14 of 16) and in call-ret form (the
	 * pad's at 15), and by int3 none; exits followed by a ret through
	 * stubs while they wait (STUBS). */
	if (st1 == st0 || i1 - i0 == 0 || w1 != w0 || j1 != j0 || r1 != r0 || c1 != c0 ||
	    w2 - w1 == 0 || j2 - j1 == 0 || r2 - r1 == 0 || c2 - c1 == 0 || i2 - i1 != 0)
		return 1;
#endif
	return p1 - p0 > 0 ? 0 : 1;
}

/* ---- storm ---------------------------------------------------------------- */

#define STORM_THREADS 6
#define STORM_ITERS 50000
static _Atomic long storm_sigs;
static _Atomic int storm_done[STORM_THREADS];

__attribute__((noinline)) int sig_leaf(int x)
{
	__atomic_fetch_add(&sink, x, __ATOMIC_RELAXED);
	return x ^ 1;
}

__attribute__((noinline)) void on_sig(int sig)
{
	(void)sig;
	sig_leaf(1);
	sig_leaf(2);
	__atomic_fetch_add(&storm_sigs, 1, __ATOMIC_RELAXED);
}

__attribute__((noinline)) void *storm_worker(void *arg)
{
	for (int i = 0; i < STORM_ITERS; i++)
		outer(4);
	__atomic_store_n(&storm_done[(intptr_t)arg], 1, __ATOMIC_RELEASE);
	return NULL;
}

static int do_storm(void)
{
	struct sigaction sa;
	pthread_t th[STORM_THREADS];
	int live = STORM_THREADS;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		return 1;
	for (intptr_t i = 0; i < STORM_THREADS; i++)
		pthread_create(&th[i], NULL, storm_worker, (void *)i);
	while (live > 0) {
		live = 0;
		for (int i = 0; i < STORM_THREADS; i++) {
			int64_t t = now_ns() + 5000;

			if (__atomic_load_n(&storm_done[i], __ATOMIC_ACQUIRE))
				continue;
			live++;
			pthread_kill(th[i], SIGUSR1);
			while (now_ns() < t)
				;
		}
	}
	for (int i = 0; i < STORM_THREADS; i++)
		pthread_join(th[i], NULL);
	signal(SIGUSR1, SIG_IGN);
	printf("storm signals %ld iters %d\n", (long)storm_sigs, STORM_ITERS);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "calls";
	char path[4096] = "";
	int rc, bad = 0;

	print_code_copied();
#if defined(LEAN_RWX)
	printf("wtext %02x\n", wtext_byte);
#endif
	if (strcmp(mode, "calls") == 0) {
		bad = do_calls();
	} else if (strcmp(mode, "longjmp") == 0) {
		catcher();
		for (int i = 0; i < 10; i++)
			work();
	} else if (strcmp(mode, "modes") == 0) {
		bad = do_modes();
	} else if (strcmp(mode, "inl") == 0) {
		bad = do_inl();
	} else if (strcmp(mode, "tail") == 0) {
		int s = 0;

		for (int i = 0; i < TAILS; i++)
			s += tail_a(i);
		printf("tail %d\n", s);
	} else if (strcmp(mode, "dlopen") == 0) {
		void *h = dlopen(KTRACE_TEST_BINARY_DIR "/libe2e_lean_plugin.so", RTLD_NOW);
		int (*po)(int);

		if (h == NULL || (po = (int (*)(int))dlsym(h, "plugin_outer")) == NULL) {
			printf("dlopen: %s\n", dlerror());
			return 1;
		}
		for (int i = 0; i < 100; i++)
			sink += po(i);
	} else if (strcmp(mode, "hot") == 0) {
		do_hot();
		usleep(300000);
		printf("leaf-site %02x\n", *(const unsigned char *)(uintptr_t)leaf);
		printf("early passes %llu\n", (unsigned long long)ktrace__lean_test_early());
	} else if (strcmp(mode, "phases") == 0) {
		long t = 0;

		for (int k = 0; k < 16; k++)
			t += phase(k, 20);
		for (int i = 0; i < 5; i++)
			marker();
		printf("phases %ld\n", t);
		printf("early passes %llu\n", (unsigned long long)ktrace__lean_test_early());
	} else if (strcmp(mode, "count") == 0) {
		do_count();
	} else if (strcmp(mode, "spread") == 0) {
		do_spread();
	} else if (strcmp(mode, "mixed") == 0) {
		do_mixed();
	} else if (strcmp(mode, "burst") == 0) {
		const volatile unsigned char *site = (const unsigned char *)(uintptr_t)leaf;

		do_burst();
		/* leaf, muted in the burst, goes out in a batch soon after:
		 * up to 2 s for it (its site a call: 0xe8, 0xff, 0x67) */
		for (int i = 0; i < 200 && (*site == 0xe8 || *site == 0xff || *site == 0x67); i++)
			usleep(10000);
		printf("leaf-site %02x\n", *site);
	} else if (strcmp(mode, "wx") == 0 || strcmp(mode, "wxburst") == 0 ||
	           strcmp(mode, "wxexec") == 0 || strcmp(mode, "wxthreads") == 0) {
		const char *how = forbid_wx();

		if (how == NULL) {
			printf("wx none\n");
			return 77;
		}
		printf("wx %s\n", how);
		if (strcmp(mode, "wxexec") == 0)
			return rerun_count(argv[0]);
		if (strcmp(mode, "wx") == 0) {
			do_count();
		} else if (strcmp(mode, "wxthreads") == 0) {
			do_wxthreads();
		} else {
			do_burst();
			printf("leaf-site %02x\n", *(const unsigned char *)(uintptr_t)leaf);
		}
	} else if (strcmp(mode, "tsynclate") == 0) {
		/* the filter right after a burst the writer patched: its code
		 * kept writable (LINGER) is closed before the filter goes on */
		int before;

		usleep(50000);
		for (int i = 0; i < BURST; i++)
			sink += mid(10);
		before = writable_code();
		if (tsync_filter() != 0) {
			printf("tsync: %s\n", strerror(errno));
			return 77;
		}
		printf("tsync on\nwritable-code before %d after %d\n", before, writable_code());
		do_burst();
	} else if (strcmp(mode, "tsync") == 0) {
		usleep(50000);
		if (tsync_filter() != 0) {
			printf("tsync: %s\n", strerror(errno));
			return 77;
		}
		printf("tsync on\n");
		do_burst();
		printf("leaf-site %02x\n", *(const unsigned char *)(uintptr_t)leaf);
	} else if (strcmp(mode, "seccompexec") == 0) {
		/* a filter that allows everything: ktrace sees "Seccomp: 2" */
		struct sock_filter f[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};

		if (install_filter(f, 1) != 0) {
			printf("seccomp: %s\n", strerror(errno));
			return 77;
		}
		return rerun_count(argv[0]);
	} else if (strcmp(mode, "slowleaf") == 0) {
		do_slowleaf();
	} else if (strcmp(mode, "storm") == 0) {
		bad = do_storm();
	} else if (strcmp(mode, "flip") == 0) {
		bad = do_flip();
	} else if (strcmp(mode, "forkflip") == 0) {
		bad = do_forkflip();
	} else if (strcmp(mode, "late") == 0) {
		bad = do_late();
	} else if (strcmp(mode, "ways") == 0) {
		bad = do_ways();
	} else if (strcmp(mode, "nested") == 0) {
		bad = do_nested();
	} else if (strcmp(mode, "held") == 0) {
		bad = do_held();
	} else if (strcmp(mode, "reload") == 0) {
		bad = do_reload();
	} else if (strcmp(mode, "forkreload") == 0) {
		bad = do_forkreload();
	} else if (strcmp(mode, "forknofd") == 0) {
		bad = do_forknofd();
	}
	fflush(stdout);
	rc = ktrace_snapshot(mode);
	ktrace_last_snapshot(path, sizeof(path));
	printf("snapshot %d %s\n", rc, path);
	return rc != 0 || bad;
}
