/*
 * longjmp_prog.c - a traced program that leaves 50 traced frames by
 * longjmp (issue 11, item 12).  main calls catcher(), which setjmps and
 * calls dive(50): dive(1) longjmps back, so the 50 dive frames never run
 * their exits.  catcher then calls after_jump() and returns; main calls
 * work() 10 times and takes a snapshot, printing "snapshot <rc> <path>".
 */
#include <setjmp.h>
#include <stdio.h>

#include "ktrace.h"

#define DIVE 50

static jmp_buf jb;
static volatile int sink;

__attribute__((noinline)) void dive(int n)
{
	if (n <= 0)
		return;
	if (n == 1)
		longjmp(jb, 1);
	dive(n - 1);
	sink++; /* not a tail call: every level keeps its frame */
}

__attribute__((noinline)) void after_jump(void) { sink += 2; }
__attribute__((noinline)) void work(void) { sink += 3; }

__attribute__((noinline)) void catcher(void)
{
	if (!setjmp(jb))
		dive(DIVE);
	else
		after_jump();
}

int main(void)
{
	char path[4096] = "";
	int rc;

	catcher();
	for (int i = 0; i < 10; i++)
		work();
	rc = ktrace_snapshot("longjmp");
	ktrace_last_snapshot(path, sizeof(path));
	printf("snapshot %d %s\n", rc, path);
	return rc != 0;
}
