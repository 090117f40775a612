/*
 * test_lib_rseq.c - the library's restartable-sequence registration
 * (lib/init.c, lib/rseq.h), white box.
 *
 * Whichever registration a thread uses (glibc's, or the library's own when
 * glibc registered none: ctest runs this executable a second time with
 * GLIBC_TUNABLES=glibc.pthread.rseq=0), it must be one the kernel really
 * keeps: a thread pinned to a cpu reads that cpu in its area's cpu_id, and
 * a second registration is refused with EBUSY.  An area the kernel does
 * not know keeps whatever it was initialised with, and the hot path would
 * then append to a core it does not run on without any atomicity.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "rseq.h"

void __cyg_profile_func_enter(void *fn, void *site);
void __cyg_profile_func_exit(void *fn, void *site);

static int ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : (int)n;
}

static int pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s);
}

struct result {
	int use_rseq;      /* the process appends with rseq */
	int have_area;     /* the thread has an area after its first event */
	int cpus_checked;  /* cpus the thread was pinned to */
	int cpu_mismatch;  /* cpus where cpu_id was not the pinned cpu */
	long again;        /* the same registration again: -1 ... */
	int again_errno;   /* ... with EBUSY if the kernel holds this area */
};

/* Record one event so the thread registers, then check its area on every
 * cpu it can be pinned to.  Runs on the tested thread; asserts are made by
 * the main thread (cmocka's longjmp must not cross threads). */
static void *check_thread(void *arg)
{
	struct kt_thread *t;
	struct kt_rseq_area *a;
	struct result *r = arg;

	__cyg_profile_func_enter((void *)0x10000040, NULL);
	__cyg_profile_func_exit((void *)0x10000040, NULL);
	t = kt_self();   /* mapped by the first event */
	r->use_rseq = ktrace__g.use_rseq;
	if (!r->use_rseq || (a = t->rseq) == NULL)
		return NULL;   /* locked path: nothing registered to check */
	r->have_area = 1;
	for (int c = ncpus() - 1; c >= 0; c--) {
		if (pin(c) != 0)
			continue;
		sched_yield();   /* the kernel updates cpu_id on return to user */
		r->cpus_checked++;
		r->cpu_mismatch += a->cpu_id != (uint32_t)c;
	}
	/* The kernel refuses a second registration of the area it holds with
	 * EBUSY (another area: EINVAL; none: it would succeed). */
	r->again = syscall(__NR_rseq, a, (unsigned)sizeof(*a), 0, KT_RSEQ_SIG_VALUE);
	r->again_errno = errno;
	return NULL;
}

static void check(const struct result *r)
{
	if (!r->use_rseq)
		skip();   /* e.g. KTRACE_RSEQ=0 or no invariant TSC */
	assert_true(r->have_area);
	assert_true(r->cpus_checked > 0);
	assert_int_equal(r->cpu_mismatch, 0);
	assert_int_equal(r->again, -1);
	assert_int_equal(r->again_errno, EBUSY);
}

static void test_rseq_main_thread_registered(void **state)
{
	struct result r = {0};

	(void)state;
	check_thread(&r);
	check(&r);
}

static void test_rseq_new_thread_registered(void **state)
{
	struct result r = {0};
	pthread_t th;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, check_thread, &r), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	check(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rseq_main_thread_registered),
		cmocka_unit_test(test_rseq_new_thread_registered),
	};
	setenv("KTRACE_DIR", "/nonexistent-ktrace-test", 0);
	if (!ktrace_enabled())
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
