/*
 * floor.c - the bare floor: -finstrument-functions hooks that do only what
 * any timestamping tracer must do per event, namely read the TSC and store
 * a 4-byte word, into a per-thread array with a wrapping index.
 *
 * Built as a shared library with the same flags as libktrace (PIC, hidden
 * visibility, initial-exec TLS), so the executables pay the same PLT call
 * for both.  The word stored has ktrace's shape (20 bits of shifted TSC,
 * 12 bits of event) so the arithmetic is comparable too; there is no
 * address-to-id mapping, no per-core reservation and nobody can read the
 * array: it is a floor, not a tracer.
 *
 * The array (FLOOR_WORDS words, 8 MiB like one default ktrace ring) is
 * mapped by the first event of each thread, behind an unlikely branch.
 * FLOOR_REPORT=1 in the environment prints the main thread's event count at
 * exit (used to count the calls a workload makes).
 *
 * Built a second time with -DFLOOR_NO_TSC (libktrace_floor_store.so): the
 * same store with a counter instead of the TSC, to show what the rdtsc
 * instruction alone costs on this machine.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define NOINSTR __attribute__((no_instrument_function))
#define EXPORT  __attribute__((visibility("default")))
#define FLOOR_WORDS (2u << 20) /* 8 MiB of 4-byte words, power of two */

/* One TLS block (one GOT load for its offset in the hooks). */
struct floor_tls {
	uint32_t *buf; /* FLOOR_WORDS words, NULL until the thread's first event */
	uint64_t idx;  /* events written by this thread; slot = idx & mask */
};
static __thread struct floor_tls floor_t __attribute__((tls_model("initial-exec")));

static inline __attribute__((always_inline)) NOINSTR void floor_store(uint32_t *b, uint32_t ev)
{
	uint32_t lo, hi;
	uint64_t i = floor_t.idx;

#ifdef FLOOR_NO_TSC
	lo = (uint32_t)i;
	hi = 0;
#else
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
#endif
	b[i & (FLOOR_WORDS - 1)] = ((uint32_t)((((uint64_t)hi << 32) | lo) >> 8) << 12) | ev;
	floor_t.idx = i + 1;
}

/* The thread's first event: map its array (on failure a small static one:
 * shared and racy, but a floor that never crashes), then store.  A tail
 * call from the hooks, so they need no stack frame. */
static NOINSTR __attribute__((noinline, cold)) void floor_first(uint32_t ev)
{
	static uint32_t fallback[FLOOR_WORDS];
	void *p = mmap(NULL, FLOOR_WORDS * sizeof(uint32_t), PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	floor_t.buf = p == MAP_FAILED ? fallback : (uint32_t *)p;
	floor_store(floor_t.buf, ev);
}

static inline __attribute__((always_inline)) NOINSTR void floor_event(uint32_t ev)
{
	uint32_t *b = floor_t.buf;

	if (__builtin_expect(b == NULL, 0)) {
		floor_first(ev);
		return;
	}
	floor_store(b, ev);
}

EXPORT NOINSTR void __cyg_profile_func_enter(void *fn, void *site);
EXPORT NOINSTR void __cyg_profile_func_exit(void *fn, void *site);

EXPORT NOINSTR void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	(void)fn;
	floor_event(1);
}

EXPORT NOINSTR void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)site;
	(void)fn;
	floor_event(2);
}

static NOINSTR __attribute__((destructor)) void floor_report(void)
{
	const char *s = getenv("FLOOR_REPORT");

	if (s && *s == '1')
		fprintf(stderr, "floor: main thread events=%llu\n",
		        (unsigned long long)floor_t.idx);
}
