/*
 * snap_at_end.c - takes a ktrace snapshot when main() returns, for
 * bench/exclude_twostep.sh: link it (not instrumented) into a traced build
 * with -Wl,--wrap=main, so a program that knows nothing of ktrace leaves
 * the window of its end of run in KTRACE_DIR.
 */
#include <stdio.h>

#include "ktrace.h"

int __real_main(int argc, char **argv);
int __wrap_main(int argc, char **argv);

int __wrap_main(int argc, char **argv)
{
	int r = __real_main(argc, argv);
	int e = ktrace_snapshot("end of main");

	if (e != 0)
		fprintf(stderr, "snap_at_end: ktrace_snapshot: %s\n", ktrace_strerror(e));
	return r;
}
