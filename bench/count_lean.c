/*
 * count_lean.c - __fentry__ and __return__ that count the calls a lean
 * build makes (functions left after inlining), for bench/lean_floor.sh's
 * per-call figures, as peerbench's hook_count.c does for
 * -finstrument-functions.  The count goes to the file named by
 * $PB_COUNT_FILE (or stderr) at exit.  Single-threaded programs only (a
 * plain increment); compiled without instrumentation.
 */
#include <stdio.h>
#include <stdlib.h>

#if defined(__x86_64__)
unsigned long long count_lean_calls;
__asm__(".text\n"
	".globl __fentry__\n"
	".globl __return__\n"
	".type __fentry__, @function\n"
	".type __return__, @function\n"
	"__fentry__:\n\t"
	"incq count_lean_calls(%rip)\n"     /* flags are free at a call */
	"__return__:\n\t"
	"ret\n"
	".size __fentry__, .-__fentry__\n");

__attribute__((destructor)) static void count_lean_report(void)
{
	const char *f = getenv("PB_COUNT_FILE");
	FILE *o = f ? fopen(f, "w") : stderr;

	if (o == NULL)
		return;
	fprintf(o, "%llu %llu\n", count_lean_calls, count_lean_calls);
	if (f)
		fclose(o);
}
#endif
