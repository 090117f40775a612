/*
 * ktrace_crc32c.h - portable CRC-32C (Castagnoli), the one source both
 * sides use: the library (lib/crc32c.c) as its fallback where the cpu has
 * no crc32 instruction, the decoder as its only one.  Header-only, not
 * installed.  Slice-by-8 over a table the caller fills once
 * (ktrace_crc32c_tables) and then only reads, so it is thread-safe and
 * async-signal-safe as long as the table is built before first use; on
 * x86-64 also the SSE4.2 crc32 instruction (ktrace_crc32c_sse42: 8 bytes per
 * instruction, several times the table's speed), for callers that checked
 * __builtin_cpu_supports("sse4.2") once.
 */
#ifndef KTRACE_CRC32C_PORTABLE_H
#define KTRACE_CRC32C_PORTABLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KTRACE_CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

__attribute__((no_instrument_function)) static inline void
ktrace_crc32c_tables(uint32_t table[8][256])
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ KTRACE_CRC32C_POLY : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
}

/* Continue a CRC-32C over len bytes (start with crc = 0). */
__attribute__((no_instrument_function)) static inline uint32_t
ktrace_crc32c_sw(const uint32_t table[8][256], uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

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

#if defined(__x86_64__)
/* Continue a CRC-32C with the SSE4.2 instruction (the cpu must have it). */
__attribute__((target("sse4.2"), no_instrument_function)) static inline uint32_t
ktrace_crc32c_sse42(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
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

#endif
