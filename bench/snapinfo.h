/*
 * snapinfo.h - the few facts the benchmarks need from a snapshot file, read
 * with the public format header only (the decoder is the real parser):
 * which append path the library used, and how many record words it holds.
 */
#ifndef KTRACE_BENCH_SNAPINFO_H
#define KTRACE_BENCH_SNAPINFO_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ktrace_format.h"

struct bench_snapinfo {
	int ok;              /* 1 if the header and section table were read */
	uint32_t info_flags; /* ktrace_info_rec.flags */
	uint32_t clock;      /* ktrace_info_rec.clock_source */
	uint64_t blocks;     /* blocks in the BLOCKS section */
	uint64_t words;      /* record words in them */
	uint64_t file_bytes;
};

/* Reads the whole file into memory (one read, no per-block seeks). */
static BENCH_NOINSTR BENCH_UNUSED struct bench_snapinfo bench_snapinfo_read(const char *path)
{
	struct bench_snapinfo si;
	struct ktrace_file_header h;
	unsigned char *m = NULL;
	long size;
	FILE *f = fopen(path, "rb");

	memset(&si, 0, sizeof(si));
	if (f == NULL)
		return si;
	if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < (long)sizeof(h) || fseek(f, 0, SEEK_SET))
		goto out;
	m = malloc((size_t)size);
	if (m == NULL || fread(m, 1, (size_t)size, f) != (size_t)size)
		goto out;
	memcpy(&h, m, sizeof(h));
	if (memcmp(h.magic, KTRACE_FILE_MAGIC, 8) != 0 ||
	    h.section_entry_size != sizeof(struct ktrace_section) ||
	    h.section_table_offset + (uint64_t)h.section_count * sizeof(struct ktrace_section) >
	            (uint64_t)size)
		goto out;
	si.file_bytes = (uint64_t)size;
	for (uint32_t i = 0; i < h.section_count; i++) {
		struct ktrace_section s;

		memcpy(&s, m + h.section_table_offset + (uint64_t)i * sizeof(s), sizeof(s));
		if (s.offset + s.size > (uint64_t)size)
			goto out;
		if (s.type == KTRACE_SEC_INFO && s.size >= sizeof(struct ktrace_info_rec)) {
			struct ktrace_info_rec in;
			memcpy(&in, m + s.offset, sizeof(in));
			si.info_flags = in.flags;
			si.clock = in.clock_source;
		} else if (s.type == KTRACE_SEC_BLOCKS) {
			uint64_t off = s.offset, end = s.offset + s.size;
			for (uint32_t b = 0; b < s.count && off + sizeof(struct ktrace_block_rec) <= end; b++) {
				struct ktrace_block_rec br;
				memcpy(&br, m + off, sizeof(br));
				si.blocks++;
				si.words += br.nwords;
				off += sizeof(br) + (uint64_t)br.nwords * 4;
			}
		}
	}
	si.ok = 1;
out:
	free(m);
	fclose(f);
	return si;
}

/* "rseq", "locked" or "unreadable". */
static BENCH_NOINSTR BENCH_UNUSED const char *bench_snapshot_mode(const char *path)
{
	struct bench_snapinfo si = bench_snapinfo_read(path);

	if (!si.ok)
		return "unreadable";
	return (si.info_flags & KTRACE_INFO_RSEQ) ? "rseq" : "locked";
}

#endif /* KTRACE_BENCH_SNAPINFO_H */
