/*
 * crc32c.c - CRC-32C (Castagnoli): the SSE4.2 crc32 instruction where the
 * cpu has it (8 bytes per instruction, several times the table's speed:
 * a 512 MiB window is checksummed in a fraction of the time), else
 * slice-by-8 tables.  A load-time constructor chooses (and builds the
 * tables if needed) before any thread of the program can take a snapshot
 * or read one, so later calls only read constant data: thread-safe and
 * async-signal-safe.
 */
#include "crc32c.h"

#include <string.h>
#if defined(__x86_64__)
#include "cpufeat.h"
#endif

#include "ktrace_crc32c.h" /* the portable fallback, shared with the decoder */

static uint32_t table[8][256];
#if defined(__x86_64__)
static int use_sse42;   /* set once by the constructor */
#endif

#if defined(__x86_64__)
static uint32_t cpuid1_ecx;
static int cpuid1_read;

__attribute__((no_instrument_function)) uint32_t ktrace__cpuid1_ecx(void)
{
	if (!cpuid1_read) {
		unsigned int a, b, c, d;

		__cpuid(1, a, b, c, d);
		(void)a, (void)b, (void)d;
		cpuid1_ecx = c;
		cpuid1_read = 1;
	}
	return cpuid1_ecx;
}
#endif

/* One cpuid, shared (cpufeat.h), not __builtin_cpu_init's dozen: in a VM
 * each is a hypervisor exit, and this runs in every traced program's
 * start-up; the tables only where there is no crc32 instruction. */
__attribute__((constructor, no_instrument_function)) static void build_tables(void)
{
#if defined(__x86_64__)
	use_sse42 = (ktrace__cpuid1_ecx() & bit_SSE4_2) != 0;
	if (use_sse42)
		return;
#endif
	ktrace_crc32c_tables(table);
}


__attribute__((no_instrument_function)) uint32_t
ktrace__crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

#if defined(__x86_64__)
	if (use_sse42)
		return ktrace_crc32c_sse42(crc, p, len);
#endif
	return ktrace_crc32c_sw(table, crc, p, len);
}
