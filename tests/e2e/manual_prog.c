/*
 * manual_prog.c - a program built WITHOUT -finstrument-functions that uses
 * only the manual API (marks, spans, requests) from two threads, then takes
 * a snapshot.  Used by test_e2e_manual.c.  Prints "snapshot <rc> <path>".
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "ktrace.h"

static void *marker(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "marker");
	for (uint64_t i = 0; i < 10; i++)
		ktrace_mark("t2mark", i);
	return NULL;
}

int main(void)
{
	pthread_t th;
	char path[4352] = "";
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("pid %d enabled %d\n", (int)getpid(), ktrace_enabled());
	pthread_create(&th, NULL, marker, NULL);
	for (int i = 0; i < 5; i++) {
		ktrace_span_begin("outer");
		ktrace_mark("m1", 1);
		ktrace_span_begin("inner");
		ktrace_mark("m2", 0xdeadbeefcafe1234ull);
		ktrace_span_end("inner");
		ktrace_span_end("outer");
	}
	for (int i = 0; i < 3; i++) {
		struct timespec d = {0, 2 * 1000 * 1000};
		ktrace_request_t q = ktrace_request_begin("get");
		nanosleep(&d, NULL);
		ktrace_request_end(q);
	}
	pthread_join(th, NULL);
	r = ktrace_snapshot("manual");
	if (r == 0)
		ktrace_last_snapshot(path, sizeof(path));
	printf("snapshot %d %s\n", r, path);
	return 0;
}
