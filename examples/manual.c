/*
 * manual.c - ktrace in a program built WITHOUT -finstrument-functions.
 *
 * Nothing is recorded automatically; only what the program marks by hand:
 * spans (ktrace_span_begin/end, shown like function calls), marks (a named
 * value at an instant) and requests (ktrace_request_begin/end, with a
 * tail-latency trigger).  Link libktrace as usual.
 *
 * The program runs 200 "jobs"; every 50th takes 20 ms instead of about
 * 1 ms, and the "job" trigger (10 ms) writes a snapshot of it in the
 * background.  At the end it also takes a snapshot on demand and prints
 * its path.
 */
#include <ktrace.h>

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static void spin_us(unsigned us)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000 +
	               (uint64_t)(t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static void run_job(int i)
{
	ktrace_request_t req = ktrace_request_begin("job");

	ktrace_span_begin("load");
	spin_us(300);
	ktrace_span_end("load");

	ktrace_span_begin("compute");
	spin_us(i % 50 == 49 ? 20000 : 500); /* the slow one */
	ktrace_span_end("compute");

	ktrace_span_begin("store");
	spin_us(200);
	ktrace_span_end("store");

	ktrace_mark("job done", (uint64_t)i);
	ktrace_request_end(req);
}

int main(void)
{
	char path[4096];
	int r;

	r = ktrace_trigger_set("job", 10000, 0, 0);
	if (r != 0)
		fprintf(stderr, "manual: ktrace_trigger_set: %s\n", ktrace_strerror(r));
	for (int i = 0; i < 200; i++)
		run_job(i);
	/* Let the trigger's post-trigger delay (200 ms) pass and its file be
	 * written, then take one on demand. */
	struct timespec d = {0, 400 * 1000 * 1000};
	nanosleep(&d, NULL);
	r = ktrace_snapshot("manual: end of run");
	if (r != 0) {
		fprintf(stderr, "manual: ktrace_snapshot: %s\n", ktrace_strerror(r));
		return 1;
	}
	if (ktrace_last_snapshot(path, sizeof(path)) > 0)
		printf("snapshot: %s\n", path);
	return 0;
}
