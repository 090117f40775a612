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
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define NOINSTR __attribute__((no_instrument_function))
#define EXPORT  __attribute__((visibility("default")))
#define FLOOR_WORDS (2u << 20) /* 8 MiB of 4-byte words, power of two */

static __thread uint32_t *floor_buf __attribute__((tls_model("initial-exec")));
static __thread uint64_t floor_idx __attribute__((tls_model("initial-exec")));

/* Maps this thread's array; on failure points it at a small static one
 * (shared, racy, but a floor that never crashes). */
static NOINSTR __attribute__((noinline, cold)) uint32_t *floor_map(void)
{
	static uint32_t fallback[FLOOR_WORDS];
	void *p = mmap(NULL, FLOOR_WORDS * sizeof(uint32_t), PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	floor_buf = p == MAP_FAILED ? fallback : (uint32_t *)p;
	return floor_buf;
}

static inline __attribute__((always_inline)) NOINSTR void floor_event(void *fn, uint32_t ev)
{
	uint32_t *b = floor_buf;
	uint64_t i = floor_idx;
	uint32_t lo, hi;

	(void)fn;
	if (__builtin_expect(b == NULL, 0))
		b = floor_map();
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	b[i & (FLOOR_WORDS - 1)] =
		((uint32_t)((((uint64_t)hi << 32) | lo) >> 8) << 12) | ev;
	floor_idx = i + 1;
}

EXPORT NOINSTR void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	floor_event(fn, 1);
}

EXPORT NOINSTR void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)site;
	floor_event(fn, 2);
}

static NOINSTR __attribute__((destructor)) void floor_report(void)
{
	const char *s = getenv("FLOOR_REPORT");

	if (s && *s == '1')
		fprintf(stderr, "floor: main thread events=%llu\n",
		        (unsigned long long)floor_idx);
}
