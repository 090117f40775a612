/*
 * nomalloc.c - an LD_PRELOAD library for the e2e tests: the process exits
 * with status 97, saying why on stderr, if ktrace's writer thread calls
 * malloc (or calloc, realloc, an aligned allocation).  The writer never
 * mallocs (lib/snapfile.c: a malloc arena of its own would reserve 64 MiB
 * of the program's address space, and a program's own allocator would run
 * on the writer, inside the loader's lock for lean.c's patching); libc
 * functions that malloc behind the caller's back (qsort above 1 KiB,
 * gmtime_r's first time-zone load) broke that rule unseen until this
 * library ran the suites.
 *
 * The writer is known by its name.  It names itself, its first step
 * (prctl(PR_SET_NAME, "ktrace-writer"), lib/writer.c's writer_main), and
 * under a seccomp filter its creator names it instead, just after
 * pthread_create (pthread_setname_np(t, "ktrace-writer")).  Both are
 * interposed here and remember the thread; each allocation compares
 * pthread_self() with it (a name lookup per malloc would slow the
 * decoder's runs).  Allocations go to glibc's __libc_* functions.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);

static pthread_t writer;
static int have_writer;

static void check(const char *what)
{
	if (__atomic_load_n(&have_writer, __ATOMIC_ACQUIRE) && pthread_equal(pthread_self(), writer)) {
		char msg[160];
		int n = snprintf(msg, sizeof(msg),
		                 "nomalloc: ktrace's writer thread called %s (it must never "
		                 "malloc: lib/snapfile.c)\n", what);

		if (write(2, msg, (size_t)n) < 0) {
			/* exiting anyway */
		}
		_exit(97);
	}
}

/* A fork child's writer is a new thread, named again; until then another
 * thread of the child may have the old writer's pthread_t. */
static void forget_writer(void)
{
	__atomic_store_n(&have_writer, 0, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void init(void)
{
	pthread_atfork(NULL, NULL, forget_writer);
}

/* Thread t takes name: the writer's, remember t. */
static void note_name(pthread_t t, const char *name)
{
	if (name && strcmp(name, "ktrace-writer") == 0) {
		writer = t;
		__atomic_store_n(&have_writer, 1, __ATOMIC_RELEASE);
	}
}

int pthread_setname_np(pthread_t t, const char *name)
{
	static int (*real)(pthread_t, const char *);

	if (real == NULL)
		real = (int (*)(pthread_t, const char *))dlsym(RTLD_NEXT, "pthread_setname_np");
	note_name(t, name);
	return real ? real(t, name) : 0;
}

int prctl(int option, ...)
{
	static int (*real)(int, ...);
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (real == NULL)
		real = (int (*)(int, ...))dlsym(RTLD_NEXT, "prctl");
	if (option == PR_SET_NAME)
		note_name(pthread_self(), (const char *)a[0]);
	return real ? real(option, a[0], a[1], a[2], a[3]) : (errno = ENOSYS, -1);
}

void *malloc(size_t n)
{
	check("malloc");
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	check("calloc");
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	check("realloc");
	return __libc_realloc(p, n);
}

void *reallocarray(void *p, size_t n, size_t size)
{
	check("reallocarray");
	if (size != 0 && n > (size_t)-1 / size) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, n * size);
}

void *valloc(size_t n)
{
	check("valloc");
	return __libc_valloc(n);
}

void *pvalloc(size_t n)
{
	check("pvalloc");
	return __libc_pvalloc(n);
}

void *memalign(size_t align, size_t n)
{
	check("memalign");
	return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	check("aligned_alloc");
	return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	check("posix_memalign");
	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	if ((p = __libc_memalign(align, n)) == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}
