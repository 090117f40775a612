/*
 * decode_formats.c - ktrace-decode per output format on one (large)
 * snapshot: records per CPU-second and per wall second, peak memory, and
 * for the timeline formats the output's bytes per call.  Medians of RUNS
 * interleaved runs; with a BASELINE decoder (another build, e.g. main's),
 * the same figures for it, measured in the same run, and the ratios.
 *
 *   decode_formats DECODER SNAPSHOT [RUNS [BASELINE_DECODER]]
 *
 * DECODE_FORMATS="summary folded" limits the formats (default: summary
 * folded chrome text stats perfetto; explain and html on request).
 * DECODE_ARGS="--from +1s --to +2s" adds arguments to every decode (a
 * range: the cut path), split on spaces.
 * Each decode is a child (fork + exec, -q, output to a temporary file);
 * its CPU time and peak RSS come from wait4()'s rusage.  Make a snapshot of
 * two 64 MiB rings with
 *   KTRACE_BUFFER_MB=64 build/bench/bench_mksnap_ktrace 40000000
 * or a synthetic one with build/tests/ktrace-snapgen big FILE 2 60000000.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

static const char *const fmts[] = { "summary", "folded", "chrome", "text", "stats",
	                            "perfetto", "explain", "html" };
#define NDEFAULT 6               /* explain and html only if DECODE_FORMATS names them */
#define NFMT (sizeof(fmts) / sizeof(fmts[0]))
#define MAXRUNS 15

struct fig {
	double cpu_s[MAXRUNS], wall_s[MAXRUNS], rss_mb[MAXRUNS], bytes[MAXRUNS];
	int n, failed;
};

static double now_s(void)
{
	return (double)bench_now_ns() / 1e9;
}

static double median(const double *v, int n)
{
	double t[MAXRUNS];

	if (n <= 0)
		return 0;
	memcpy(t, v, (size_t)n * sizeof(*t));
	return bench_median(t, (size_t)n);
}

/* One decode; 0 or -1. */
static int run(const char *dec, const char *fmt, const char *snap, const char *out,
               struct fig *f)
{
	struct rusage ru;
	struct stat st;
	double t0 = now_s();
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		char *argv[40], *extra = getenv("DECODE_ARGS");
		int n = 0;

		argv[n++] = (char *)dec;
		argv[n++] = (char *)"--format";
		argv[n++] = (char *)fmt;
		argv[n++] = (char *)"-q";
		argv[n++] = (char *)"-o";
		argv[n++] = (char *)out;
		if (extra && *extra) {
			extra = strdup(extra);
			for (char *t = strtok(extra, " "); t && n < 36; t = strtok(NULL, " "))
				argv[n++] = t;
		}
		argv[n++] = (char *)snap;
		argv[n] = NULL;
		execv(dec, argv);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		f->failed = 1;
		return -1;
	}
	f->wall_s[f->n] = now_s() - t0;
	f->cpu_s[f->n] = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	                 (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	f->rss_mb[f->n] = (double)ru.ru_maxrss / 1024;
	f->bytes[f->n] = stat(out, &st) == 0 ? (double)st.st_size : 0;
	f->n++;
	return 0;
}

/* Records and calls from the decoder's summary. */
static int counts(const char *dec, const char *snap, double *records, double *calls)
{
	char cmd[4096], line[512];
	FILE *p;
	unsigned long long r, c;
	int ok = 0;

	snprintf(cmd, sizeof(cmd), "'%s' -q '%s' 2>/dev/null", dec, snap);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, "decoded: %llu records, %llu calls", &r, &c) == 2) {
			*records = (double)r;
			*calls = (double)c;
			ok = 1;
		}
	pclose(p);
	return ok ? 0 : -1;
}

static void print(const char *who, const char *fmt, const struct fig *f, double records,
                  double calls)
{
	double cpu = median(f->cpu_s, f->n), wall = median(f->wall_s, f->n);

	if (f->failed || !f->n) {
		printf("%-8s %-9s failed\n", who, fmt);
		return;
	}
	printf("%-8s %-9s %7.1f M records/CPU-s %7.1f M records/s  peak %7.0f MiB", who, fmt,
	       records / cpu / 1e6, records / wall / 1e6, median(f->rss_mb, f->n));
	if (!strcmp(fmt, "chrome") || !strcmp(fmt, "perfetto"))
		printf("  %.1f bytes/call", median(f->bytes, f->n) / calls);
	printf("\n");
}

static int wanted(const char *fmt)
{
	const char *l = getenv("DECODE_FORMATS");
	size_t n = strlen(fmt);

	if (!l || !*l) {
		for (size_t k = 0; k < NDEFAULT; k++)
			if (!strcmp(fmts[k], fmt))
				return 1;
		return 0;
	}
	for (const char *p = l; (p = strstr(p, fmt)) != NULL; p += n)
		if ((p == l || p[-1] == ' ' || p[-1] == ',') && (!p[n] || p[n] == ' ' || p[n] == ','))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	static struct fig now[NFMT], base[NFMT];
	const char *dec, *snap, *old;
	char out[64];
	double records, calls;
	int runs;

	if (argc < 3) {
		fprintf(stderr, "usage: decode_formats DECODER SNAPSHOT [RUNS [BASELINE_DECODER]]\n");
		return 2;
	}
	dec = argv[1];
	snap = argv[2];
	runs = argc > 3 ? atoi(argv[3]) : 3;
	if (runs < 1 || runs > MAXRUNS)
		runs = 3;
	old = argc > 4 ? argv[4] : NULL;
	if (counts(dec, snap, &records, &calls)) {
		fprintf(stderr, "decode_formats: %s cannot decode %s\n", dec, snap);
		return 1;
	}
	snprintf(out, sizeof(out), "/tmp/decode_formats.%d", (int)getpid());
	printf("snapshot %s: %.0f records, %.0f calls; medians of %d runs%s%s\n", snap, records,
	       calls, runs, getenv("DECODE_ARGS") ? "; arguments " : "",
	       getenv("DECODE_ARGS") ? getenv("DECODE_ARGS") : "");
	for (int r = 0; r < runs; r++)
		for (size_t k = 0; k < NFMT; k++) {
			if (!wanted(fmts[k]))
				continue;
			run(dec, fmts[k], snap, out, &now[k]);
			if (old)
				run(old, fmts[k], snap, out, &base[k]);
		}
	unlink(out);
	for (size_t k = 0; k < NFMT; k++) {
		if (!wanted(fmts[k]))
			continue;
		print("new", fmts[k], &now[k], records, calls);
		if (!old)
			continue;
		print("baseline", fmts[k], &base[k], records, calls);
		if (now[k].n && base[k].n && !now[k].failed && !base[k].failed)
			printf("ratio    %-9s %7.2fx CPU speed, %.2fx less memory\n", fmts[k],
			       median(base[k].cpu_s, base[k].n) / median(now[k].cpu_s, now[k].n),
			       median(base[k].rss_mb, base[k].n) / median(now[k].rss_mb, now[k].n));
	}
	return 0;
}
