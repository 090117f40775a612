/*
 * gprof.c - a lean build linked with -p (or -pg).
 *
 * The lean mode's flags (-p -mfentry -minstrument-return=call) belong on
 * the compile line, but a program built in one step passes them to the
 * link too, and there -p (as -pg) makes GCC's driver start the program with
 * gprof's gcrt1.o: its __gmon_start__ calls __monstartup(), which starts
 * an ITIMER_PROF timer (a SIGPROF every 10 ms of CPU, which interrupts
 * poll, epoll_wait and nanosleep with EINTR whatever SA_RESTART says) and
 * allocates gprof's tables, and registers _mcleanup(), which writes a
 * gmon.out into the working directory at exit.  With -mfentry nothing
 * calls gprof's mcount, so all of that is cost and litter for nothing.
 *
 * The library defines both (weak: a static link that pulls in libc.a's
 * gmon.o takes its strong ones), as uftrace's libmcount does: they bind
 * before libc's, from libktrace.so or from libktrace.a in the program.
 * They pass the calls on to libc's only when a loaded object imports
 * mcount or _mcount: code compiled with -pg (or -p) but not -mfentry, a gprof
 * build, whose profile keeps working with ktrace linked in.
 */
#include "internal.h"
#include "dynsym.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/gmon.h>   /* their prototypes */

static int gprof_on;   /* __monstartup went on to libc's */

/* Does info's object import gprof's mcount? */
static KT_NOINSTR int imports_mcount(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	return *(int *)arg = ktrace__dynsym_imports(info, "mcount") ||
	                     ktrace__dynsym_imports(info, "_mcount");
}

__attribute__((visibility("default"), weak)) KT_NOINSTR void __monstartup(unsigned long lowpc,
                                                                            unsigned long highpc)
{
	void (*real)(unsigned long, unsigned long);
	int found = 0;

	dl_iterate_phdr(imports_mcount, &found);
	if (!found)
		return;
	real = (void (*)(unsigned long, unsigned long))dlsym(RTLD_NEXT, "__monstartup");
	if (real == NULL || real == __monstartup)
		return;
	gprof_on = 1;
	real(lowpc, highpc);
}

__attribute__((visibility("default"), weak)) KT_NOINSTR void _mcleanup(void)
{
	void (*real)(void);

	if (!gprof_on)
		return;
	real = (void (*)(void))dlsym(RTLD_NEXT, "_mcleanup");
	if (real != NULL && real != _mcleanup)
		real();
}
