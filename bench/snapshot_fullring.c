/*
 * snapshot_fullring.c - how much of a full ring does a snapshot keep while
 * the program's threads write at full speed (issue 11, item 6)?
 *
 * Two threads call a traced function as fast as they can.  Each round the
 * main thread waits until the threads wrote 1.5 rings' worth of records
 * (so every ring wrapped again), calls ktrace_snapshot() while they go on,
 * and reads the file: blocks in it against blocks of the wrapped rings,
 * and the blocks counted as not copied (overwritten during the copy, no
 * memory).  Printed per run, then the medians: percent of the ring kept
 * and the snapshot call's time, next to a plain memcpy of the same bytes
 * measured in the same process (the floor of any copy).
 *
 * Usage: KTRACE_FILTER=off KTRACE_BUFFER_MB=64 KTRACE_DIR=/tmp/x KTRACE_QUIET=1 \
 *        bench_snapshot_fullring_ktrace [runs]
 * (KTRACE_FILTER=off: with the default settings the window budget mutes
 * busy_op within a second and no ring wraps; the bench says so and stops.)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "ktrace.h"
#include "ktrace_format.h"

BENCH_NOIPA uint64_t busy_op(uint64_t x);
BENCH_NOIPA uint64_t busy_op(uint64_t x)
{
	return x * 0x9E3779B97F4A7C15ull + 3;
}

static _Atomic int stop;
static _Atomic uint64_t calls[2];

static void *busy(void *arg)
{
	_Atomic uint64_t *n = arg;
	uint64_t x = 1;

	while (!stop) {
		for (int i = 0; i < 1000; i++)
			x = busy_op(x);
		*n += 1000;
	}
	return (void *)(uintptr_t)x;
}

/* Blocks in the file, blocks of wrapped rings, and the not-copied counts. */
static BENCH_NOINSTR int read_file(const char *path, uint64_t *in_file, uint64_t *ring,
                                   uint64_t *over, uint64_t *nomem)
{
	FILE *f = fopen(path, "rb");
	struct ktrace_file_header h;
	struct ktrace_section s[32];
	int ok = -1;

	*in_file = *ring = *over = *nomem = 0;
	if (f == NULL)
		return -1;
	if (fread(&h, sizeof(h), 1, f) != 1 || h.section_count > 32 ||
	    fseek(f, (long)h.section_table_offset, SEEK_SET) != 0 ||
	    fread(s, sizeof(s[0]), h.section_count, f) != h.section_count)
		goto out;
	for (uint32_t i = 0; i < h.section_count; i++) {
		if (s[i].type == KTRACE_SEC_BLOCKS)
			*in_file = s[i].count;
		if (s[i].type == KTRACE_SEC_LOSS) {
			struct ktrace_loss_rec l;
			if (fseek(f, (long)s[i].offset, SEEK_SET) || fread(&l, sizeof(l), 1, f) != 1)
				goto out;
			*over = l.count[KTRACE_LOSS_NOT_COPIED_OVERWRITTEN];
			*nomem = l.count[KTRACE_LOSS_NOT_COPIED_NO_MEMORY];
		}
		if (s[i].type == KTRACE_SEC_CORES) {
			struct ktrace_core_rec c;
			if (fseek(f, (long)s[i].offset, SEEK_SET))
				goto out;
			for (uint32_t k = 0; k < s[i].count; k++) {
				if (fread(&c, sizeof(c), 1, f) != 1)
					goto out;
				if (c.blocks_used > c.nblocks)
					*ring += c.nblocks;
			}
		}
	}
	ok = 0;
out:
	fclose(f);
	return ok;
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	const char *mb = getenv("KTRACE_BUFFER_MB");
	uint64_t ring_words = (uint64_t)(mb ? atoi(mb) : 8) << 18;
	pthread_t th[2];
	double *pct = calloc((size_t)runs, sizeof(double));
	double *ms = calloc((size_t)runs, sizeof(double));
	double *cp = calloc((size_t)runs, sizeof(double));
	int done = 0;

	if (runs < 1 || !pct || !ms || !cp)
		return 2;
	ktrace_setting("KTRACE_MAX_FILES_PER_MIN", "100000");
	ktrace_setting("KTRACE_MAX_MB_PER_MIN", "100000000");
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, busy, (void *)&calls[i]);
	for (int r = 0; r < runs; r++) {
		uint64_t c0 = calls[0] + calls[1], in_file, ring, over, nomem;
		char path[4352];
		/* 2 words per call, 2 threads: 1.5 rings of each core. */
		while (calls[0] + calls[1] - c0 < ring_words * 3 / 2)
			usleep(10000);
		uint64_t t0 = bench_now_ns();
		int rc = ktrace_snapshot("bench: full ring under load");
		uint64_t t1 = bench_now_ns();
		if (rc != 0 || ktrace_last_snapshot(path, sizeof(path)) < 0 ||
		    read_file(path, &in_file, &ring, &over, &nomem) != 0) {
			printf("run %d: snapshot failed: %s\n", r, ktrace_strerror(rc));
			continue;
		}
		unlink(path);
		/* The floor: one memcpy of the same bytes into fresh memory. */
		size_t bytes = (size_t)in_file * KTRACE_BLOCK_WORDS * 4;
		char *a = malloc(bytes ? bytes : 1), *b = malloc(bytes ? bytes : 1);
		memset(a, 1, bytes);
		__asm__ volatile("" : : "r"(a) : "memory");
		uint64_t t2 = bench_now_ns();
		memcpy(b, a, bytes);
		__asm__ volatile("" : : "r"(b) : "memory");
		uint64_t t3 = bench_now_ns();
		free(a);
		free(b);
		if (ring == 0) {
			printf("run %d: no ring wrapped (%llu blocks in the file): the window "
			       "budget muted the busy threads; run with KTRACE_FILTER=off\n", r,
			       (unsigned long long)in_file);
			done = 0;   /* exit 1 */
			break;
		}
		pct[done] = 100.0 * (double)in_file / (double)ring;
		ms[done] = (double)(t1 - t0) / 1e6;
		cp[done] = (double)(t3 - t2) / 1e6;
		printf("run %d: %llu of %llu blocks of the wrapped rings kept (%.1f %%), "
		       "overwritten during the copy %llu, no memory %llu; snapshot %.1f ms, "
		       "memcpy of the kept bytes %.1f ms\n", r, (unsigned long long)in_file,
		       (unsigned long long)ring, pct[done], (unsigned long long)over,
		       (unsigned long long)nomem, ms[done], cp[done]);
		done++;
	}
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	if (done == 0)
		return 1;
	printf("name=snapshot_fullring ring_mb=%s runs=%d median_kept_pct=%.1f "
	       "median_snapshot_ms=%.1f median_memcpy_ms=%.1f ratio=%.1f\n", mb ? mb : "8", done,
	       bench_median(pct, (size_t)done), bench_median(ms, (size_t)done),
	       bench_median(cp, (size_t)done),
	       bench_median(ms, (size_t)done) / bench_median(cp, (size_t)done));
	return 0;
}
