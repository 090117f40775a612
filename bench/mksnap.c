/*
 * mksnap.c - make a large snapshot for timing the decoder: two threads
 * make enough traced calls (a small recursive tree of 16 functions, so the
 * timeline has depth) to wrap every core's ring, then ktrace_snapshot().
 *
 * Usage: bench_mksnap_ktrace [calls_per_thread]
 * Prints: path=.. file_mb=.. words=.. blocks=..
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "ktrace.h"
#include "snapinfo.h"

#define NODE(i, next)                                                          \
	BENCH_NOIPA uint64_t node##i(uint64_t x, int d);           \
	BENCH_NOIPA uint64_t node##i(uint64_t x, int d)            \
	{                                                                      \
		x = x * 0x9E3779B97F4A7C15ull + i;                             \
		if (d > 0) {                                                   \
			x = next(x, d - 1);                                    \
			x = next(x ^ 1, d - 1);                                \
		}                                                              \
		return x;                                                      \
	}
uint64_t node0(uint64_t x, int d);
NODE(15, node0)
NODE(14, node15) NODE(13, node14) NODE(12, node13) NODE(11, node12) NODE(10, node11)
NODE(9, node10) NODE(8, node9) NODE(7, node8) NODE(6, node7) NODE(5, node6)
NODE(4, node5) NODE(3, node4) NODE(2, node3) NODE(1, node2) NODE(0, node1)

static uint64_t per_thread;

static uint64_t (*const roots[16])(uint64_t, int) = {
	node0, node1, node2, node3, node4, node5, node6, node7,
	node8, node9, node10, node11, node12, node13, node14, node15,
};

static BENCH_NOINSTR void *filler(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg, done = 0;

	/* nodeK(.., 5) makes 63 calls: a 6-level binary tree over 6 of the
	 * 16 functions, starting at a different one each time. */
	for (unsigned k = 0; done < per_thread; k++) {
		x = roots[k & 15](x, 5);
		done += 63;
	}
	return (void *)(uintptr_t)(x & 1);
}

BENCH_NOINSTR int main(int argc, char **argv)
{
	pthread_t th[2];
	char path[4096];
	struct bench_snapinfo si;
	int r;

	per_thread = bench_arg(argc, argv, 1, 12000000);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, filler, (void *)(uintptr_t)(i + 1)) != 0)
			return 2;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	r = ktrace_snapshot("bench_mksnap");
	if (r != 0 || ktrace_last_snapshot(path, sizeof(path)) <= 0) {
		fprintf(stderr, "bench_mksnap: snapshot failed: %s\n", ktrace_strerror(r));
		return 1;
	}
	si = bench_snapinfo_read(path);
	printf("path=%s file_mb=%.1f words=%llu blocks=%llu mode=%s\n", path,
	       (double)si.file_bytes / 1048576.0, (unsigned long long)si.words,
	       (unsigned long long)si.blocks,
	       si.ok ? ((si.info_flags & KTRACE_INFO_RSEQ) ? "rseq" : "locked") : "unreadable");
	return 0;
}
