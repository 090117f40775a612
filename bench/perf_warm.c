/*
 * perf_warm.c - hold the kernel's perf scheduling hooks on while a
 * benchmark runs, and say what turning them on cost.
 *
 * A traced program opens per-thread perf events at start-up (lib/sched.c:
 * its context switches).  When no process on the machine holds such an
 * event, the first open turns the kernel's perf scheduling hooks on (a
 * static key) and waits for an RCU grace period: 5-16 ms here, once per
 * process, in the program's start-up; the kernel turns them off again a
 * second after the last such event closes.  Benchmarks that run traced
 * programs back to back (peerbench's pairs) see it only in their first
 * run; one that alternates builds seconds apart (lean_floor.sh) would
 * charge it to every traced run.  Holding one such event open for the
 * whole benchmark measures every run as back-to-back runs and
 * long-running programs see them.
 *
 * Prints "perf_warm: first open <ms> ms" (the cost when the hooks were
 * off: the start-up stall a lone traced program pays; ~0.01 ms when they
 * were on already), then waits until killed.  Exits 1 if the kernel
 * refuses the event (kernel.perf_event_paranoid > 2): then no traced
 * program opens them either.
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(void)
{
	struct perf_event_attr a;
	struct timespec t0, t1;
	int fd;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.context_switch = 1;   /* what lib/sched.c asks for */
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (fd < 0) {
		perror("perf_warm: perf_event_open");
		return 1;
	}
	printf("perf_warm: first open %.3f ms\n",
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	fflush(stdout);
	for (;;)
		pause();
}
