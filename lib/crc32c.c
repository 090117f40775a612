/*
 * crc32c.c - CRC-32C (Castagnoli), slice-by-8.  The tables are built by a
 * load-time constructor, before any thread of the program can take a
 * snapshot or read one, so later calls only read constant data: thread-safe
 * and async-signal-safe.
 */
#include "crc32c.h"


#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];

__attribute__((constructor, no_instrument_function)) static void build_tables(void)
{
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

__attribute__((no_instrument_function)) uint32_t
ktrace__crc32c(uint32_t crc, const void *buf, size_t len)
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
