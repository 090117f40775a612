/*
 * hostenv_prog.c - a traced program in the environments production
 * programs really run in (test_e2e_hostenv.c).  Modes (argv[1]):
 *
 *   fork          calls work(), forks: the child calls work() and snapshots
 *                 ("child_snapshot <rc> <path>", exit 0); the parent prints
 *                 "child_status <wait status>" and snapshots ("snapshot ...").
 *   selfsandbox   after start-up, puts itself (all threads: TSYNC) under a
 *                 seccomp filter that kills on perf_event_open, then as fork.
 *   smallstack    threads with PTHREAD_STACK_MIN, 32 KiB and 64 KiB stacks;
 *                 the two larger ones use all but 10 KiB of theirs in
 *                 traced frames: "thread <size> <pthread_create rc>
 *                 <bytes used>"; then a snapshot.
 *   snaps N       N snapshots: "snapshot <rc> <path>" each.
 *   altstack LIB  an 8 KiB alternate signal stack (a guard page below it)
 *                 on a new thread and on main; a traced SIGUSR1 handler on
 *                 it calls a function of LIB (dlopen()ed, never called
 *                 before); on the thread it is the thread's first traced
 *                 code.  "altstack <thread|main> <bytes of it used>", then
 *                 a snapshot.
 *   sigtake       installs its own SIGUSR2 handler after ktrace started (as
 *                 Redis does), prints "ready", then per stdin line: "snap"
 *                 snapshots, "count" prints "usr2 <handler runs>".
 *   nproc         "enabled <ktrace_enabled()>", a snapshot ("snapshot <rc>
 *                 -" with ktrace_strerror), "vm_kb <VmSize>".
 *   vfork N       N vfork()s whose child runs traced code (work(3)) before
 *                 _exit (common, if undefined), while a second thread
 *                 calls traced code throughout; "vforks <N> <failures>",
 *                 then a snapshot.  main's own calls: work(2) per round.
 *   clockstep     (static build only: e2e_hostenv_static) main calls
 *                 before_step(), steps the library's wall clock back by
 *                 one hour (its test offset: no test can step the
 *                 machine's clock) in the middle of step_span(), then
 *                 after_step(), 250 ms each, then a snapshot.
 *   escnames      names with terminal escapes: the thread's name
 *                 ("\033[2Jx" by prctl) and a mark's ("\033]0;pwn\007"), then
 *                 a snapshot.
 *   manythreads N N short threads one after another (each calls work(1)),
 *                 then main calls work(400000): with a small ring the
 *                 window starts long after they exited.  A snapshot.
 *   mlock         mlockall(MCL_CURRENT | MCL_FUTURE): "mlockall <rc>
 *                 <errno>", "enabled <ktrace_enabled()>", "vm_lck_kb
 *                 <VmLck>", then a snapshot ("snapshot <rc> <path>").
 *                 Only in the build with HOSTENV_MLOCK (e2e_hostenv_mlock):
 *                 a program that imports mlockall is treated apart at
 *                 start-up (lib/memlock.c), which the other modes must not
 *                 depend on.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

#define NOI __attribute__((no_instrument_function))

static __thread volatile unsigned long sink;   /* per thread: no race */

__attribute__((noinline)) void leaf_a(void) { sink++; }
__attribute__((noinline)) void leaf_b(void) { sink += 2; }
__attribute__((noinline)) void work(int n)
{
	for (int i = 0; i < n; i++)
		leaf_a();
}

static NOI void snap(const char *prefix, const char *tag)
{
	char path[4352] = "-";
	int r = ktrace_snapshot(tag);

	if (r == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("%s %d %s\n", prefix, r, path);
	fflush(stdout);
}

/* ---- fork, selfsandbox ------------------------------------------------------ */

static NOI int sandbox_self(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) {
		perror("seccomp");
		return -1;
	}
	return 0;
}

static int mode_fork(void)
{
	pid_t pid;
	int st = -1;

	work(10);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		work(20);
		snap("child_snapshot", "child");
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 1;
	printf("child_status %d\n", st);
	snap("snapshot", "parent");
	return 0;
}

/* ---- smallstack ---------------------------------------------------------------- */

struct deep_arg {
	uintptr_t top;      /* address near the thread's first frame */
	size_t want;        /* bytes of stack to use */
	size_t used;        /* out: deepest frame reached */
};

__attribute__((noinline)) size_t deep(struct deep_arg *a)
{
	volatile char pad[480];
	size_t used = a->top - (uintptr_t)&pad[0];

	memset((char *)pad, 1, sizeof(pad));
	leaf_b();
	if (used + 1024 > a->want)
		return used;
	return deep(a) + pad[7] - 1;
}

static void *stack_thread(void *p)
{
	struct deep_arg *a = p;
	char here;

	a->top = (uintptr_t)&here;
	a->used = a->want ? deep(a) : 0;
	work(5);
	return NULL;
}

static int mode_smallstack(void)
{
	size_t sizes[3] = { (size_t)sysconf(_SC_THREAD_STACK_MIN), 32768, 65536 };

	if (sizes[0] < (size_t)PTHREAD_STACK_MIN)
		sizes[0] = PTHREAD_STACK_MIN;
	work(3);
	for (int i = 0; i < 3; i++) {
		pthread_attr_t at;
		pthread_t th;
		struct deep_arg a = { 0, i ? sizes[i] - 10240 : 0, 0 };
		int r;

		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, sizes[i]);
		r = pthread_create(&th, &at, stack_thread, &a);
		pthread_attr_destroy(&at);
		if (r == 0)
			pthread_join(th, NULL);
		printf("thread %zu %d %zu\n", sizes[i], r, a.used);
		fflush(stdout);
	}
	snap("snapshot", "smallstack");
	return 0;
}

/* ---- altstack -------------------------------------------------------------------- */

#define ALT_SIZE 8192
static int (*plugin_entry)(void);

__attribute__((noinline)) void on_usr1(int sig)
{
	(void)sig;
	plugin_entry();
	leaf_b();
}

/* An 8 KiB alternate stack with a PROT_NONE page below it: an overflow
 * faults instead of writing over other memory.  Filled with 0xA5 so the
 * bytes used can be counted afterwards. */
static NOI unsigned char *alt_setup(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *m = mmap(NULL, (size_t)pg + ALT_SIZE, PROT_READ | PROT_WRITE,
	                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	stack_t ss;

	if (m == MAP_FAILED || mprotect(m, (size_t)pg, PROT_NONE) != 0)
		return NULL;
	memset(m + pg, 0xA5, ALT_SIZE);
	ss.ss_sp = m + pg;
	ss.ss_size = ALT_SIZE;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL) != 0)
		return NULL;
	return m + pg;
}

static NOI size_t alt_used(const unsigned char *s)
{
	size_t i = 0;

	while (i < ALT_SIZE && s[i] == 0xA5)
		i++;
	return ALT_SIZE - i;
}

static NOI void *alt_thread(void *p)
{
	unsigned char *s = alt_setup();

	(void)p;
	if (s == NULL)
		return (void *)1;
	pthread_kill(pthread_self(), SIGUSR1);
	printf("altstack thread %zu\n", alt_used(s));
	fflush(stdout);
	return NULL;
}

static NOI int mode_altstack(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW);
	struct sigaction sa;
	unsigned char *s;
	pthread_t th;
	void *ret = (void *)1;

	if (h == NULL || (plugin_entry = (int (*)(void))dlsym(h, "plugin_entry")) == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	work(3);
	if (pthread_create(&th, NULL, alt_thread, NULL) != 0 || pthread_join(th, &ret) != 0 ||
	    ret != NULL)
		return 1;
	if ((s = alt_setup()) == NULL)
		return 1;
	raise(SIGUSR1);
	printf("altstack main %zu\n", alt_used(s));
	snap("snapshot", "altstack");
	return 0;
}

/* ---- sigtake ------------------------------------------------------------------------ */

static volatile sig_atomic_t usr2_runs;

static NOI void own_usr2(int sig)
{
	(void)sig;
	usr2_runs++;
}

static int mode_sigtake(void)
{
	struct sigaction sa;
	char line[64];

	work(5);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = own_usr2;
	sigemptyset(&sa.sa_mask);
	/* SA_RESTART: a signal that lands while fgets waits must not end the
	 * loop (EINTR read as end of input: the test's next line then failed) */
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "snap", 4) == 0) {
			work(5);
			snap("snapshot", "sigtake");
		} else if (strncmp(line, "count", 5) == 0) {
			printf("usr2 %d\n", (int)usr2_runs);
			fflush(stdout);
		}
	}
	return 0;
}

/* ---- vfork ----------------------------------------------------------------------------- */

static _Atomic int vfork_stop;

static void *vfork_busy(void *p)
{
	(void)p;
	while (!vfork_stop)
		work(50);
	return NULL;
}

__attribute__((noinline)) void vfork_child_work(void)
{
	work(3);
}

static NOI int mode_vfork(int n)
{
	pthread_t th;
	volatile int fails = 0;

	if (pthread_create(&th, NULL, vfork_busy, NULL) != 0)
		return 1;
	for (int i = 0; i < n; i++) {
		pid_t pid;
		int st;

		work(2);
		pid = vfork();
		if (pid == 0) {
			vfork_child_work();
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
			fails++;
	}
	vfork_stop = 1;
	pthread_join(th, NULL);
	printf("vforks %d %d\n", n, (int)fails);
	snap("snapshot", "vfork");
	return 0;
}

/* ---- clockstep ------------------------------------------------------------------------ */

#ifdef HOSTENV_STATIC
extern _Atomic int64_t ktrace__realtime_offset_ns;   /* lib/clock.c, tests only */

/* About ms of calls to leaf_a, one a millisecond (the anchors come
 * every 100 ms). */
static NOI void spin_ms(int ms)
{
	struct timespec a, b, d = {0, 1000000};

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		leaf_a();
		nanosleep(&d, NULL);
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

__attribute__((noinline)) void before_step(void) { spin_ms(250); }
__attribute__((noinline)) void after_step(void) { spin_ms(250); }

__attribute__((noinline)) void step_span(void)
{
	before_step();
	ktrace__realtime_offset_ns -= 3600LL * 1000000000LL;
	after_step();
}

static int mode_clockstep(void)
{
	step_span();
	snap("snapshot", "clockstep");
	return 0;
}
#endif

/* ---- escnames ---------------------------------------------------------------------- */

static int mode_escnames(void)
{
	prctl(PR_SET_NAME, "\033[2Jx", 0, 0, 0);
	work(3);
	ktrace_mark("\033]0;pwn\007", 7);
	snap("snapshot", "escnames");
	return 0;
}

/* ---- manythreads ----------------------------------------------------------------------- */

static void *short_thread(void *p)
{
	(void)p;
	work(1);
	return NULL;
}

static int mode_manythreads(int n)
{
	for (int i = 0; i < n; i++) {
		pthread_t th;

		if (pthread_create(&th, NULL, short_thread, NULL) != 0)
			return 1;
		pthread_join(th, NULL);
	}
	work(400000);
	snap("snapshot", "manythreads");
	return 0;
}

/* ---- nproc ----------------------------------------------------------------------------- */

static NOI long status_kb(const char *key)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	const char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static int mode_nproc(void)
{
	int r;

	printf("enabled %d\n", ktrace_enabled());
	work(5);
	r = ktrace_snapshot("nproc");
	printf("snapshot %d %s\n", r, ktrace_strerror(r));
	printf("vm_kb %ld\n", status_kb("VmSize:"));
	return 0;
}

#ifdef HOSTENV_MLOCK
static int mode_mlock(void)
{
	int r = mlockall(MCL_CURRENT | MCL_FUTURE);

	printf("mlockall %d %d\n", r, r ? errno : 0);
	printf("enabled %d\n", ktrace_enabled());
	work(5);
	printf("vm_lck_kb %ld\n", status_kb("VmLck:"));
	snap("snapshot", "mlock");
	return 0;
}
#endif

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "fork"))
		return mode_fork();
	if (!strcmp(m, "selfsandbox"))
		return sandbox_self() ? 1 : mode_fork();
	if (!strcmp(m, "smallstack"))
		return mode_smallstack();
	if (!strcmp(m, "snaps") && argc > 2) {
		for (int i = 0, n = atoi(argv[2]); i < n; i++) {
			work(5);
			snap("snapshot", "snaps");
		}
		return 0;
	}
	if (!strcmp(m, "altstack") && argc > 2)
		return mode_altstack(argv[2]);
	if (!strcmp(m, "sigtake"))
		return mode_sigtake();
	if (!strcmp(m, "nproc"))
		return mode_nproc();
#ifdef HOSTENV_STATIC
	if (!strcmp(m, "clockstep"))
		return mode_clockstep();
#endif
	if (!strcmp(m, "manythreads") && argc > 2)
		return mode_manythreads(atoi(argv[2]));
	if (!strcmp(m, "escnames"))
		return mode_escnames();
	if (!strcmp(m, "vfork") && argc > 2)
		return mode_vfork(atoi(argv[2]));
#ifdef HOSTENV_MLOCK
	if (!strcmp(m, "mlock"))
		return mode_mlock();
#endif
	fprintf(stderr, "usage: %s fork|selfsandbox|smallstack|snaps N|altstack LIB|sigtake|"
	        "nproc|vfork N|escnames|manythreads N|clockstep|mlock\n", argv[0]);
	return 2;
}
