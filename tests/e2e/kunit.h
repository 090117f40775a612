/*
 * kunit.h - start-up for the white-box unit tests (linked to
 * ktrace_internal, not instrumented).
 *
 * The library configures itself from the environment in a constructor that
 * runs before main(), so a unit test that needs a setting (a 1 MiB ring, a
 * scratch KTRACE_DIR) sets it and re-executes itself once.  Values already
 * in the environment win, so ctest can run the same executable in another
 * mode (KTRACE_RSEQ=0, KTRACE_CLOCK=monotonic).
 */
#ifndef KUNIT_H
#define KUNIT_H

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ktest.h"

/* env: "K=V" defaults, NULL-terminated.  Returns only in the re-executed
 * process; *dir_out gets the scratch KTRACE_DIR it created. */
static inline void kunit_reexec(char **argv, const char *const *env)
{
	if (getenv("KTRACE_UNIT_REEXEC") == NULL) {
		char *dir = kt_mkdtemp("unit");
		if (dir == NULL) {
			perror("mkdtemp");
			exit(1);
		}
		setenv("KTRACE_DIR", dir, 0);
		setenv("KTRACE_QUIET", "1", 0);
		for (size_t i = 0; env && env[i]; i++) {
			char k[128];
			const char *eq = strchr(env[i], '=');
			snprintf(k, sizeof(k), "%.*s", (int)(eq - env[i]), env[i]);
			setenv(k, eq + 1, 0);
		}
		setenv("KTRACE_UNIT_REEXEC", dir, 1);
		if (getenv("KTRACE_TEST_EMULATOR") && *getenv("KTRACE_TEST_EMULATOR")) {
			/* Cross build: the emulator runs us again (ktest.c). */
			static char self[4096];
			char *eargv[64];
			size_t n = 0;
			ssize_t l = readlink("/proc/self/exe", self, sizeof(self) - 1);
			if (l > 0) {
				self[l] = 0;
				eargv[n++] = getenv("KTRACE_TEST_EMULATOR");
				eargv[n++] = self;
				for (size_t i = 1; argv[i] && n + 1 < 64; i++)
					eargv[n++] = argv[i];
				eargv[n] = NULL;
				execv(eargv[0], eargv);
			}
		}
		execv("/proc/self/exe", argv);
		perror("re-exec");
		exit(1);
	}
}

/* The scratch directory made by kunit_reexec (removed by kunit_cleanup). */
static inline const char *kunit_dir(void)
{
	return getenv("KTRACE_UNIT_REEXEC");
}

static inline void kunit_cleanup(void)
{
	const char *d = kunit_dir();
	if (d && strncmp(d, "/tmp/ktrace-test-", 17) == 0)
		kt_rmtree(d);
}

static inline int kunit_pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static inline int kunit_unpin(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	for (int c = 0; c < CPU_SETSIZE && c < 1024; c++)
		CPU_SET(c, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

#endif /* KUNIT_H */
