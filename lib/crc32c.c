/*
 * crc32c.c - CRC-32C (Castagnoli): the SSE4.2 crc32 instruction where the
 * cpu has it (8 bytes per instruction, several times the table's speed:
 * a 512 MiB window is checksummed in a fraction of the time), else
 * slice-by-8 tables.  Both are built or chosen by a load-time constructor,
 * before any thread of the program can take a snapshot or read one, so
 * later calls only read constant data: thread-safe and async-signal-safe.
 */
#include "crc32c.h"

#include <string.h>


#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static int use_sse42;   /* set once by the constructor */

__attribute__((constructor, no_instrument_function)) static void build_tables(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	use_sse42 = __builtin_cpu_supports("sse4.2");
#endif
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"), no_instrument_function)) static uint32_t
crc_sse42(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = ~crc;

	for (; len && ((uintptr_t)p & 7); len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	for (; len; len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

__attribute__((no_instrument_function)) uint32_t
ktrace__crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

#if defined(__x86_64__)
	if (use_sse42)
		return crc_sse42(crc, p, len);
#endif
	crc = ~crc;
	while (len >= 8) {
		uint32_t lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
		              (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 |
		              (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
		lo ^= crc;
		crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^
		      table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
		      table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
		      table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
	return ~crc;
}
