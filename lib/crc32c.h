/* crc32c.h - CRC-32C (Castagnoli), shared by the snapshot writer and reader. */
#ifndef KTRACE_CRC32C_H
#define KTRACE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Continue a CRC-32C over len bytes.  Start with crc = 0; the result of one
 * call can be passed as crc to the next to checksum data in pieces.
 * Async-signal-safe and thread-safe (the tables are constant).
 */
uint32_t ktrace__crc32c(uint32_t crc, const void *buf, size_t len);

#endif
