/*
 * slow_phdr.c - dl_iterate_phdr interposed, for the lifecycle program's
 * forkphdr mode (test_e2e_lifecycle): with E2E_SLOW_PHDR=<us>, a call on
 * ktrace's writer thread sleeps that long in each of its callbacks, with
 * the loader's lock held, so that a fork() of another thread meets it
 * there.  Other threads' calls are glibc's.  Not instrumented in either
 * mode (the writer runs it).  Not in a sanitizer build: the sanitizer's
 * runtime calls dl_iterate_phdr while it starts, before any of it may
 * run (the test then runs at glibc's speed).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
typedef int (*phdr_cb)(struct dl_phdr_info *, size_t, void *);

struct slow {
	phdr_cb cb;
	void *arg;
	useconds_t us;
};

static int (*real_iterate)(phdr_cb, void *);

__attribute__((no_instrument_function)) static int slow_cb(struct dl_phdr_info *i, size_t n,
                                                           void *a)
{
	struct slow *s = a;

	usleep(s->us);
	return s->cb(i, n, s->arg);
}

/* The writer must not call dlsym (it may allocate): the program calls
 * this once on its main thread first. */
__attribute__((no_instrument_function)) int dl_iterate_phdr(phdr_cb cb, void *arg)
{
	const char *e = getenv("E2E_SLOW_PHDR");
	char name[16] = "";

	if (real_iterate == NULL)
		real_iterate = (int (*)(phdr_cb, void *))dlsym(RTLD_NEXT, "dl_iterate_phdr");
	if (e != NULL && prctl(PR_GET_NAME, name) == 0 && strcmp(name, "ktrace-writer") == 0) {
		struct slow s = {cb, arg, (useconds_t)atoi(e)};

		return real_iterate(slow_cb, &s);
	}
	return real_iterate(cb, arg);
}
#endif
