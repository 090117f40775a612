/*
 * decode_read.c - what reading a snapshot instead of mapping it costs the
 * decoder (issue 11, item 9: a mapped file truncated meanwhile is SIGBUS).
 *
 *   decode_read FILE [RUNS]
 *
 * Interleaves RUNS decodes (stages 1-5, no symbols) of FILE each way:
 *   read  kd_dec_open_file: pread in windows (what ktrace-decode does)
 *   map   mmap + kd_dec_open_buffer (what it did before)
 * and prints the medians, their ratio, and the file size.  The file should
 * be in the page cache (a first untimed decode puts it there), so the
 * difference is the copy.  Make a large file with
 *   build/tests/ktrace-snapgen big FILE 2 20000000
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "decoder.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double by_read(const char *path, const struct kd_dec_opts *o)
{
	struct kd_dec_error err;
	struct kd_dec *d;
	double t0 = now_s();

	if (kd_dec_open_file(path, o, &d, &err) != 0) {
		fprintf(stderr, "decode_read: %s: %s\n", path, err.msg);
		exit(1);
	}
	kd_dec_free(d);
	return now_s() - t0;
}

static double by_map(const char *path, const struct kd_dec_opts *o)
{
	struct kd_dec_error err;
	struct kd_dec *d;
	struct stat st;
	double t0 = now_s();
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *map;

	if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0)
		exit(1);
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		exit(1);
	madvise(map, (size_t)st.st_size, MADV_WILLNEED);
	if (kd_dec_open_buffer(map, (size_t)st.st_size, path, o, &d, &err) != 0)
		exit(1);
	kd_dec_free(d);
	munmap(map, (size_t)st.st_size);
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	struct kd_dec_opts o = { .no_symbols = 1 };
	int runs = argc > 2 ? atoi(argv[2]) : 5;
	double *r, *m;
	struct stat st;

	if (argc < 2 || runs < 1 || stat(argv[1], &st) != 0) {
		fprintf(stderr, "usage: decode_read FILE [RUNS]\n");
		return 2;
	}
	r = calloc((size_t)runs, sizeof(*r));
	m = calloc((size_t)runs, sizeof(*m));
	if (!r || !m)
		return 1;
	by_read(argv[1], &o); /* warm the page cache */
	for (int i = 0; i < runs; i++) {
		r[i] = by_read(argv[1], &o);
		m[i] = by_map(argv[1], &o);
	}
	qsort(r, (size_t)runs, sizeof(*r), cmp_d);
	qsort(m, (size_t)runs, sizeof(*m), cmp_d);
	printf("decode_read: file %.1f MB, %d runs each: read %.3f s, map %.3f s (medians), "
	       "read/map %.3f\n", (double)st.st_size / 1e6, runs, r[runs / 2], m[runs / 2],
	       r[runs / 2] / m[runs / 2]);
	free(r);
	free(m);
	return 0;
}
