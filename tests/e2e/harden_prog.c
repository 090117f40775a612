/*
 * harden_prog.c - a traced program that does to ktrace what real programs
 * and careless users do (test_e2e_harden.c, issue 11 items 1-7).  Built
 * against the shared library (e2e_harden) and the static one
 * (e2e_harden_static, which the setuid test copies).  Modes (argv[1]):
 *
 *   fds           closes every descriptor from 3 up (as a daemon does),
 *                 opens its own pipe, writes 80 bytes to it and reads them
 *                 back ("pipe <bytes read back>"), takes a snapshot
 *                 ("snapshot <rc> <path>"), then puts write-only files on
 *                 the low descriptor numbers and measures the writer
 *                 thread's cpu over 1 s ("writer_ticks <utime+stime>"),
 *                 then raises the snapshot signal and waits for the file
 *                 ("signal_file <path or ->").
 *   secure DIR    prints "secure <AT_SECURE>", "sig <USR1 handler> <USR2
 *                 handler>" (0 = default), "env_snapshot <rc>", then
 *                 chooses DIR with ktrace_setting ("setting <rc>") and
 *                 snapshots ("snapshot <rc> <path>").
 *   rlimit        with E2E_AS_HEADROOM_MB set, a constructor that runs
 *                 before libktrace's (static link) limits RLIMIT_AS to the
 *                 current size plus that; main then creates a thread with
 *                 default attributes ("thread <errno>") and snapshots
 *                 ("snapshot <rc>").
 *   spin          calls traced functions until stdin closes; "ready" first.
 *   daemon        daemon(0, 1) (changes to /), then a snapshot:
 *                 "snapshot <rc> <path>" from the daemon process.
 *   chdir         chdir("/"), then a snapshot: "snapshot <rc> <path>".
 *   wait          "pid <pid>"; a snapshot for each "snap" line on stdin:
 *                 "snapshot <rc> <path>".
 *   exitflood     fills the rings for 150 ms, starts a 50 us SIGALRM timer
 *                 (an empty handler: every sleep is cut short), raises the
 *                 snapshot signal and calls exit(0) at once.
 *   stderr        closes descriptor 2 and opens a file of its own there
 *                 (as a daemon does), then takes a snapshot that fails
 *                 (KTRACE_DIR missing: ktrace has something to say) and
 *                 prints "snapshot <rc> -" and "stderr_file_bytes <size>".
 *   bigring N     two threads call traced functions as fast as they can;
 *                 once each made N calls (or after 20 s), main snapshots
 *                 while they go on ("snapshot <rc> <path>").
 *   affinity      "affinity <main's Cpus_allowed_list> <the writer's>", once
 *                 they are equal or after 2 s (the writer starts on
 *                 another cpu, then takes the program's set back).
 *   moveoff       main keeps to its cpu C, other cpus busy; the writer
 *                 is given C alone, then the program's set, and woken by
 *                 snapshots: "moveoff <C> <the writer's list at the end>
 *                 <its list while given C alone>" ("moveoff skip": under
 *                 a seccomp filter, fewer than two cpus or more than 16).
 *   slice         "slice <main's policy> <main's sched_runtime> <the
 *                 writer's policy> <its sched_runtime>" (ns; the time slice
 *                 a SCHED_OTHER thread asks for, Linux 6.12+), once the
 *                 writer's differs from main's or after 2 s.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

/* Also runs against a library without ktrace_setting (to show a test
 * fails on the code before it): a weak reference, NULL there. */
extern int ktrace_setting(const char *name, const char *value) __attribute__((weak));

static __thread volatile unsigned long sink;
static _Atomic int stop;

__attribute__((noinline)) void leaf_a(void) { sink++; }
__attribute__((noinline)) void leaf_b(void) { sink += 2; }
__attribute__((noinline)) void work(int n)
{
	for (int i = 0; i < n; i++)
		leaf_a();
}

static __attribute__((no_instrument_function)) void snap(const char *tag)
{
	char path[4352] = "-";
	int r = ktrace_snapshot(tag);

	if (r == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("snapshot %d %s\n", r, path);
	fflush(stdout);
}

static __attribute__((no_instrument_function)) int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static __attribute__((no_instrument_function)) void sleep_ms(int ms)
{
	struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&d, &d) != 0 && errno == EINTR) {
	}
}

/* ---- fds ---------------------------------------------------------------- */

/* Read /proc/self/<task><file> into buf (NUL-terminated): its length, or
 * -1. */
static ssize_t read_task_file(const char *task, const char *file, char *buf, size_t len)
{
	char p[300];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "/proc/self/%s%s", task, file);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

/* The writer thread's task directory ("task/<tid>/") into out, or "" if it
 * has none. */
static void writer_task(char *out, size_t len)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	out[0] = 0;
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char task[300], buf[256];

		if (e->d_name[0] == '.')
			continue;
		snprintf(task, sizeof(task), "task/%s/", e->d_name);
		if (read_task_file(task, "comm", buf, sizeof(buf)) > 0 &&
		    strncmp(buf, "ktrace-writer", 13) == 0)
			snprintf(out, len, "%s", task);
	}
	closedir(d);
}

/* utime + stime of the thread named ktrace-writer, in clock ticks; -1 if
 * there is none. */
static long writer_ticks(void)
{
	char task[300], buf[1024], *s;
	long ut = 0, st = 0;

	writer_task(task, sizeof(task));
	if (task[0] == 0 || read_task_file(task, "stat", buf, sizeof(buf)) <= 0)
		return -1;
	/* Fields after the ")": state is 3, utime 14, stime 15. */
	s = strrchr(buf, ')');
	if (s && sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) == 2)
		return ut + st;
	return -1;
}

static int count_files(const char *dir, char *last, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "ktrace-", 7) == 0) {
			n++;
			snprintf(last, len, "%s/%s", dir, e->d_name);
		}
	closedir(d);
	return n;
}

static int mode_fds(void)
{
	char msg[80], back[160], last[4400] = "-";
	int p[2], got = 0;
	const char *dir = getenv("KTRACE_DIR");

	work(1000);
	/* A daemon's closefrom(3). */
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	if (pipe(p) != 0)
		return 1;
	memset(msg, 'x', sizeof(msg));
	if (write(p[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
		return 1;
	/* Give a reader that should not be there (the writer, woken every
	 * 100 ms) time to take them, then read back. */
	sleep_ms(300);
	for (int64_t end = now_ms() + 500; got < (int)sizeof(msg) && now_ms() < end;) {
		struct pollfd pf = {p[0], POLLIN, 0};
		if (poll(&pf, 1, 50) > 0) {
			ssize_t n = read(p[0], back + got, sizeof(back) - (size_t)got);
			if (n > 0)
				got += (int)n;
		}
	}
	printf("pipe %d\n", got);
	fflush(stdout);
	work(1000);
	snap("after closefrom");
	/* The low numbers become write-only files: a reader of them would
	 * spin (poll says readable, read fails). */
	close(p[0]);
	close(p[1]);
	for (int i = 0; i < 8; i++)
		if (open("/dev/null", O_WRONLY | O_CLOEXEC) < 0)
			return 1;
	long t0 = writer_ticks();
	sleep_ms(1000);
	long t1 = writer_ticks();
	printf("writer_ticks %ld\n", t0 < 0 || t1 < 0 ? -1 : t1 - t0);
	fflush(stdout);
	int before = count_files(dir, last, sizeof(last));
	raise(SIGUSR2);
	for (int64_t end = now_ms() + 10000; now_ms() < end; sleep_ms(10))
		if (count_files(dir, last, sizeof(last)) > before)
			break;
	printf("signal_file %s\n", count_files(dir, last, sizeof(last)) > before ? last : "-");
	return 0;
}

/* ---- secure ------------------------------------------------------------- */

static int handler_set(int sig)
{
	struct sigaction sa;

	sigaction(sig, NULL, &sa);
	return sa.sa_handler != SIG_DFL;
}

static int mode_secure(const char *dir)
{
	printf("secure %lu\n", getauxval(AT_SECURE));
	printf("sig %d %d\n", handler_set(SIGUSR1), handler_set(SIGUSR2));
	work(100);
	printf("env_snapshot %d\n", ktrace_snapshot("from the environment's settings"));
	printf("setting %d\n", ktrace_setting ? ktrace_setting("KTRACE_DIR", dir) : -99);
	fflush(stdout);
	work(100);
	snap("program's own directory");
	return 0;
}

/* ---- rlimit ------------------------------------------------------------- */

static __attribute__((no_instrument_function)) long vm_size_kb(void)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	const char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "VmSize:");
	return p ? strtol(p + 7, NULL, 10) : -1;
}

/* Before libktrace's constructor (101) in the static link: the limit an
 * administrator sized for the program alone. */
__attribute__((constructor(100), no_instrument_function)) static void limit_as(void)
{
	const char *h = getenv("E2E_AS_HEADROOM_MB");
	struct rlimit rl;
	long kb = vm_size_kb();

	if (h == NULL || kb < 0)
		return;
	rl.rlim_cur = rl.rlim_max = (rlim_t)kb * 1024 + (rlim_t)atol(h) * 1048576;
	setrlimit(RLIMIT_AS, &rl);
}

static void *thread_main(void *arg)
{
	(void)arg;
	work(100);
	return NULL;
}

static int mode_rlimit(void)
{
	pthread_t th;
	int r = pthread_create(&th, NULL, thread_main, NULL);

	printf("thread %d\n", r);
	fflush(stdout);
	if (r == 0)
		pthread_join(th, NULL);
	snap("under RLIMIT_AS");
	return 0;
}

/* ---- spin, wait, daemon, chdir -------------------------------------------- */

static int mode_spin(void)
{
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		struct pollfd pf = {0, POLLIN, 0};
		char buf[64];
		work(200);
		leaf_b();
		if (poll(&pf, 1, 0) > 0 && read(0, buf, sizeof(buf)) <= 0)
			break;
	}
	printf("done\n");
	return 0;
}

static int mode_wait(void)
{
	char line[64];

	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		work(500);
		if (strncmp(line, "snap", 4) == 0)
			snap("asked");
	}
	return 0;
}

static int mode_daemon(int really)
{
	if (really ? daemon(0, 1) != 0 : chdir("/") != 0)
		return 1;
	work(100);
	snap(really ? "daemon" : "chdir");
	return 0;
}

/* ---- exitflood ------------------------------------------------------------ */

static void on_alarm(int sig) { (void)sig; }

static int mode_exitflood(void)
{
	struct sigaction sa;
	struct itimerval it = {{0, 50}, {0, 50}};

	for (int64_t end = now_ms() + 150; now_ms() < end;)
		work(1000);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	raise(SIGUSR2);
	exit(0);
}

/* ---- stderr ------------------------------------------------------------- */

static int mode_stderr(const char *file)
{
	struct stat st;
	int fd;

	close(2);
	/* Another thread's open between the two (the writer's, reading a
	 * name in /proc) would take 2: say so rather than end silently. */
	if ((fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) != 2) {
		printf("open_fd %d (not 2)\n", fd);
		fflush(stdout);
		return 1;
	}
	work(100);
	snap("into a missing directory");
	if (fstat(2, &st) != 0)
		return 1;
	printf("stderr_file_bytes %lld\n", (long long)st.st_size);
	return 0;
}

/* ---- bigring -------------------------------------------------------------- */

static _Atomic long calls[2];

static void *busy_main(void *arg)
{
	_Atomic long *n = arg;

	while (!stop) {
		work(1000);
		*n += 1000;
	}
	return NULL;
}

static int mode_bigring(long min_calls)
{
	pthread_t th[2];

	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, busy_main, &calls[i]) != 0)
			return 1;
	/* Until each thread made min_calls calls (2 events each): both rings
	 * wrapped if the threads ran on both cores. */
	for (int64_t end = now_ms() + 20000; now_ms() < end; sleep_ms(20))
		if (calls[0] >= min_calls && calls[1] >= min_calls)
			break;
	snap("full ring under load");
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	return 0;
}

/* ---- affinity ------------------------------------------------------------- */

/* The Cpus_allowed_list of /proc/self/<task>status into out ("?" if none). */
static void cpus_of(const char *task, char *out, size_t len)
{
	char buf[4096], *l;

	snprintf(out, len, "?");
	if (read_task_file(task, "status", buf, sizeof(buf)) > 0 &&
	    (l = strstr(buf, "Cpus_allowed_list:")) != NULL)
		sscanf(l + strlen("Cpus_allowed_list:"), "%255s", out);
}

/* Wait (2 s at most) for the writer to have the program's cpu set back
 * (it starts on another cpu: writer_main): main's Cpus_allowed_list into
 * mine[256], the writer's ("none": no writer) into its[256], its task
 * ("task/<tid>/", "" if none) into task[300]. */
static void program_set_back(char *mine, char *its, char *task)
{
	for (int64_t end = now_ms() + 2000;; sleep_ms(10)) {
		work(100);
		cpus_of("", mine, 256);
		writer_task(task, 300);
		if (task[0])
			cpus_of(task, its, 256);
		else
			snprintf(its, 256, "none");
		if (!strcmp(mine, its) || now_ms() > end)
			break;
	}
}

static int mode_affinity(void)
{
	char mine[256], its[256], task[300];

	program_set_back(mine, its, task);
	printf("affinity %s %s\n", mine, its);
	return 0;
}

static _Atomic int spin_stop;

static void *spinner(void *arg)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET((int)(intptr_t)arg, &one);
	sched_setaffinity(0, sizeof(one), &one);
	while (!spin_stop)
		;
	return NULL;
}

/* Snapshots (each wakes the writer from this thread) 20 ms apart until
 * the writer's cpu list is not want (differ) or is (!differ), or 2 s. */
static void wake_until(const char *task, const char *want, int differ, char *its, size_t len)
{
	for (int64_t end = now_ms() + 2000;; sleep_ms(20)) {
		ktrace_snapshot("moveoff");
		cpus_of(task, its, len);
		if ((strcmp(its, want) != 0) == differ || now_ms() > end)
			break;
	}
}

static int mode_moveoff(void)
{
	char task[300], its[256], mine[256], one[32], again[256], buf[4096], *l;
	int c = sched_getcpu(), n = 0, wt;
	pthread_t spin[16];
	cpu_set_t set, all;

	program_set_back(mine, its, task);
	if (read_task_file("", "status", buf, sizeof(buf)) <= 0 ||
	    (l = strstr(buf, "Seccomp:")) == NULL || atoi(l + strlen("Seccomp:")) != 0 ||
	    c < 0 || sched_getaffinity(0, sizeof(all), &all) != 0 || CPU_COUNT(&all) < 2 ||
	    CPU_COUNT(&all) > 16 || !CPU_ISSET(c, &all) || !task[0]) {
		printf("moveoff skip\n");
		return 0;
	}
	wt = atoi(task + strlen("task/"));
	/* Main on c, every other cpu busy: a wake leaves the writer on c. */
	CPU_ZERO(&set);
	CPU_SET(c, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		printf("moveoff skip\n");
		return 0;
	}
	for (int k = 0; k < CPU_SETSIZE && n < 16; k++)
		if (k != c && CPU_ISSET(k, &all) &&
		    pthread_create(&spin[n], NULL, spinner, (void *)(intptr_t)k) == 0)
			n++;
	snprintf(one, sizeof(one), "%d", c);
	/* On c by a set of its own: it stays (one cpu, given from outside);
	 * then back to the program's set, still on c: it leaves c. */
	sched_setaffinity(wt, sizeof(set), &set);
	wake_until(task, one, 1, again, sizeof(again));
	sched_setaffinity(wt, sizeof(all), &all);
	wake_until(task, mine, 0, its, sizeof(its));   /* the set is back */
	wake_until(task, mine, 1, its, sizeof(its));   /* and then c leaves it */
	spin_stop = 1;
	for (int k = 0; k < n; k++)
		pthread_join(spin[k], NULL);
	printf("moveoff %d %s %s\n", c, its, again);
	return 0;
}

/* ---- slice ------------------------------------------------------------------ */

struct sattr {   /* the kernel's struct sched_attr, SCHED_ATTR_SIZE_VER0 */
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

static void attr_of(int tid, struct sattr *a)
{
	memset(a, 0, sizeof(*a));
	if (syscall(SYS_sched_getattr, tid, a, (unsigned)sizeof(*a), 0) != 0)
		a->policy = 99;
}

static int mode_slice(void)
{
	struct sattr m, w;
	char task[300];

	attr_of(0, &m);
	memset(&w, 0, sizeof(w));
	for (int64_t end = now_ms() + 2000; now_ms() < end; sleep_ms(10)) {
		work(100);
		writer_task(task, sizeof(task));
		if (task[0]) {
			attr_of(atoi(task + strlen("task/")), &w);
			if (w.runtime != m.runtime)
				break;
		}
	}
	printf("slice %u %llu %u %llu\n", m.policy, (unsigned long long)m.runtime, w.policy,
	       (unsigned long long)w.runtime);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "fds"))
		return mode_fds();
	if (!strcmp(m, "secure") && argc > 2)
		return mode_secure(argv[2]);
	if (!strcmp(m, "rlimit"))
		return mode_rlimit();
	if (!strcmp(m, "spin"))
		return mode_spin();
	if (!strcmp(m, "wait"))
		return mode_wait();
	if (!strcmp(m, "daemon"))
		return mode_daemon(1);
	if (!strcmp(m, "chdir"))
		return mode_daemon(0);
	if (!strcmp(m, "exitflood"))
		return mode_exitflood();
	if (!strcmp(m, "stderr") && argc > 2)
		return mode_stderr(argv[2]);
	if (!strcmp(m, "bigring") && argc > 2)
		return mode_bigring(atol(argv[2]));
	if (!strcmp(m, "affinity"))
		return mode_affinity();
	if (!strcmp(m, "moveoff"))
		return mode_moveoff();
	if (!strcmp(m, "slice"))
		return mode_slice();
	fprintf(stderr, "usage: %s fds|secure DIR|rlimit|spin|wait|daemon|chdir|exitflood|"
	        "stderr FILE|bigring N|affinity|moveoff|slice\n", argv[0]);
	return 2;
}
