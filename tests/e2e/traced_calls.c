/*
 * traced_calls.c - a traced program (built with -finstrument-functions)
 * that knows exactly what it called.  Used by test_e2e_calls.c and
 * test_e2e_files.c, linked to the shared library (e2e_calls) and to the
 * static one (e2e_calls_static).
 *
 *   e2e_calls calls     8 named threads ("worker-<i>") call leaf_a, mid_b
 *                       (which calls leaf_c twice) a known number of times,
 *                       worker 0 also sleep_20ms and spin_5ms, worker 1
 *                       sleep_250ms (several timestamp wraps); main calls
 *                       main_only 7 times; then ktrace_snapshot("e2e-api")
 *                       prints "snapshot <rc> <path>", prints "ready" and
 *                       waits for stdin to close (the test sends SIGUSR2
 *                       meanwhile).
 *   e2e_calls files     prints "pid <pid>"; for each stdin line "snap",
 *                       calls work then ktrace_snapshot and prints
 *                       "snapshot <rc> <path>"; exits at EOF.
 *   e2e_calls pipe N    forks; the parent sends N messages over a pipe
 *                       (send_msg: ktrace_mark("send", i), then write), the
 *                       child receives each (recv_msg: read, then
 *                       ktrace_mark("recv", i)) and acknowledges it over a
 *                       second pipe before the parent sends the next; each
 *                       snapshots: the child prints "child <rc> <path>",
 *                       then the parent "snapshot <rc> <path>".
 *
 * Counts per worker i (expected_*): see the functions below.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

#define NWORKERS 8

/* Per thread: the functions only need a side effect, not a data race. */
static __thread volatile unsigned long sink;

__attribute__((noinline)) void leaf_a(void) { sink++; }
__attribute__((noinline)) void leaf_c(void) { sink += 3; }
__attribute__((noinline)) void mid_b(void)
{
	leaf_c();
	leaf_c();
}
__attribute__((noinline)) void main_only(void) { sink += 7; }

__attribute__((noinline)) void sleep_20ms(void)
{
	struct timespec d = {0, 20 * 1000 * 1000};
	while (nanosleep(&d, &d) != 0) {
	}
}

/* Longer than the 20-bit timestamp's wrap (~0.1 s at 2.5 GHz, shift 8):
 * its exit is only placed right if the library wrote a full timestamp. */
__attribute__((noinline)) void sleep_250ms(void)
{
	struct timespec d = {0, 250 * 1000 * 1000};
	while (nanosleep(&d, &d) != 0) {
	}
}

__attribute__((noinline)) void spin_5ms(void)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 5000000L);
}

__attribute__((noinline)) void send_msg(int fd, uint32_t i)
{
	ktrace_mark("send", i);
	if (write(fd, &i, sizeof(i)) != (ssize_t)sizeof(i))
		abort();
}

__attribute__((noinline)) int recv_msg(int fd, uint32_t *i)
{
	if (read(fd, i, sizeof(*i)) != (ssize_t)sizeof(*i))
		return -1;
	ktrace_mark("recv", *i);
	return 0;
}

static pthread_barrier_t start;
static int ncpus = 1;

static void hop(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

__attribute__((noinline)) void *worker_main(void *arg)
{
	int i = (int)(long)arg;
	int n = (i + 1) * 300; /* leaf_a calls; mid_b on every 3rd: (n + 2) / 3 */
	char name[16];

	snprintf(name, sizeof(name), "worker-%d", i);
	pthread_setname_np(pthread_self(), name);
	pthread_barrier_wait(&start);
	for (int k = 0; k < n; k++) {
		leaf_a();
		if (k % 3 == 0)
			mid_b();
		if (k % 10 == 0)
			sched_yield(); /* share and change cores */
		if (k % 100 == 99) {
			/* Move to another cpu in the middle of worker_main (and
			 * of nothing else): entry and exit on different cores. */
			hop((i + k / 100) % ncpus);
		}
	}
	if (i == 0) {
		sleep_20ms();
		spin_5ms();
	}
	if (i == 1)
		sleep_250ms();
	return NULL;
}

__attribute__((noinline)) void run_workers(void)
{
	pthread_t th[NWORKERS];

	pthread_barrier_init(&start, NULL, NWORKERS);
	for (long i = 0; i < NWORKERS; i++)
		pthread_create(&th[i], NULL, worker_main, (void *)i);
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
}

static void snap(const char *reason)
{
	char path[4352] = "";
	int r = ktrace_snapshot(reason);
	if (r == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("snapshot %d %s\n", r, path);
	fflush(stdout);
}

/* Until stdin closes.  poll() with a timeout rather than a blocking
 * read: TSan delivers signals only at calls it intercepts, and the read
 * inside fgets() is not one of them. */
static void wait_eof(void)
{
	char buf[256];

	for (;;) {
		struct pollfd p = {0, POLLIN, 0};
		if (poll(&p, 1, 20) > 0 && read(0, buf, sizeof(buf)) <= 0)
			return;
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "calls";

	setvbuf(stdout, NULL, _IOLBF, 0);
	ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpus < 1)
		ncpus = 1;
	printf("pid %d\n", (int)getpid());
	if (strcmp(mode, "calls") == 0) {
		run_workers();
		for (int i = 0; i < 7; i++)
			main_only();
		snap("e2e-api");
		printf("ready\n");
		wait_eof();
		return 0;
	}
	if (strcmp(mode, "files") == 0) {
		char buf[256];
		while (fgets(buf, sizeof(buf), stdin) != NULL) {
			if (strncmp(buf, "snap", 4) != 0)
				continue;
			run_workers();
			snap("files");
		}
		return 0;
	}
	if (strcmp(mode, "pipe") == 0) {
		int fds[2], ack[2], st, n = argc > 2 ? atoi(argv[2]) : 100;
		uint32_t i, a;
		pid_t pid;

		if (pipe(fds) != 0 || pipe(ack) != 0 || (pid = fork()) < 0)
			return 1;
		if (pid == 0) {
			char path[4352] = "";
			int r;

			close(fds[1]);
			close(ack[0]);
			while (recv_msg(fds[0], &i) == 0)
				if (write(ack[1], &i, sizeof(i)) != (ssize_t)sizeof(i))
					break;
			r = ktrace_snapshot("pipe-child");
			if (r == 0)
				ktrace_last_snapshot(path, sizeof(path));
			printf("child %d %s\n", r, path);
			fflush(stdout);
			_exit(0);
		}
		close(fds[0]);
		close(ack[1]);
		for (i = 0; i < (uint32_t)n; i++) {
			send_msg(fds[1], i);
			if (read(ack[0], &a, sizeof(a)) != (ssize_t)sizeof(a))
				break;
		}
		close(fds[1]);
		waitpid(pid, &st, 0);
		snap("pipe-parent");
		return 0;
	}
	fprintf(stderr, "unknown mode %s\n", mode);
	return 2;
}
