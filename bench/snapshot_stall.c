/*
 * snapshot_stall.c - do snapshots stall the application's threads?
 *
 * Application threads run batches of small traced calls (about 1 us each)
 * and time every batch with rdtsc.  The main thread alternates quiet phases
 * and snapshot phases (Q S Q S ...); in a snapshot phase it calls
 * ktrace_snapshot() every period_ms and deletes the file.  Batch latency
 * percentiles are reported per phase type, from the same run, with the
 * snapshot call's duration (the write time: copy + file + fsync/rename as
 * the library does it).
 *
 * Usage: bench_snapshot_stall_ktrace [app_threads [ms_per_phase [period_ms [phase_pairs]]]]
 * Set KTRACE_DIR to a scratch directory and KTRACE_QUIET=1.
 *
 * Note: on a 2-core machine one application thread leaves one core to the
 * library's writer thread; with two, the writer must share a core with an
 * application thread and the scheduler's time slice shows in the tail.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_util.h"
#include "ktrace.h"
#include "snapinfo.h"

BENCH_NOIPA uint64_t small_op(uint64_t x);
BENCH_NOIPA uint64_t small_op(uint64_t x)
{
	return x * 0x9E3779B97F4A7C15ull + 7;
}

enum { PH_WARM = 0, PH_QUIET = 1, PH_SNAP = 2, PH_STOP = 3 };

static _Atomic int phase;
static uint64_t batch_calls;

struct lat {
	uint64_t *v;
	size_t n, cap;
	size_t dropped; /* samples beyond cap (not counted in the figures) */
};

struct app {
	pthread_t th;
	struct lat l[3];      /* by phase: [PH_QUIET], [PH_SNAP] */
	long ivcsw[4];        /* involuntary context switches, by phase */
	uint64_t sink;
};

/* The sample arrays are allocated and faulted in before the phases start:
 * growing them in the timed loop would page-fault while the library's
 * writer maps and unmaps its copy buffers, and the wait for the mm lock
 * would be blamed on the snapshot. */
static BENCH_NOINSTR int lat_init(struct lat *l, size_t cap)
{
	l->v = malloc(cap * sizeof(*l->v));
	if (l->v == NULL)
		return -1;
	memset(l->v, 0, cap * sizeof(*l->v));
	l->cap = cap;
	return 0;
}

static inline BENCH_NOINSTR void lat_push(struct lat *l, uint64_t v)
{
	if (l->n < l->cap)
		l->v[l->n++] = v;
	else
		l->dropped++;
}

/* Involuntary context switches of the calling thread so far: a batch that
 * lost its core to another thread shows up here, not as a ktrace stall. */
static BENCH_NOINSTR long ivcsw_now(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

static BENCH_NOINSTR void *app_main(void *arg)
{
	struct app *a = arg;
	uint64_t x = (uint64_t)(uintptr_t)a;
	int ph, prev = PH_WARM;
	long last = ivcsw_now();

	/* relaxed: the phase is a label for the samples; a batch straddling a
	 * change is attributed to either side. */
	while ((ph = atomic_load_explicit(&phase, memory_order_relaxed)) != PH_STOP) {
		uint64_t t0, t1;
		if (ph != prev) {
			long now = ivcsw_now();
			a->ivcsw[prev] += now - last;
			last = now;
			prev = ph;
		}
		t0 = bench_rdtsc();
		for (uint64_t i = 0; i < batch_calls; i++)
			x = small_op(x);
		t1 = bench_rdtsc();
		if (ph == PH_QUIET || ph == PH_SNAP)
			lat_push(&a->l[ph], t1 - t0);
	}
	a->ivcsw[prev] += ivcsw_now() - last;
	a->sink = x;
	return NULL;
}

static BENCH_NOINSTR void sleep_ms(double ms)
{
	struct timespec d = {(time_t)(ms / 1000), (long)((ms - 1000.0 * (time_t)(ms / 1000)) * 1e6)};
	nanosleep(&d, NULL);
}

static BENCH_NOINSTR void report(const char *name, struct app *apps, uint64_t napps, int ph,
                                 double tpn)
{
	size_t n = 0, dropped = 0;
	long ivcsw = 0;
	uint64_t *all;

	for (uint64_t i = 0; i < napps; i++) {
		n += apps[i].l[ph].n;
		dropped += apps[i].l[ph].dropped;
		ivcsw += apps[i].ivcsw[ph];
	}
	all = malloc((n ? n : 1) * sizeof(*all));
	if (all == NULL)
		return;
	n = 0;
	for (uint64_t i = 0; i < napps; i++)
		for (size_t k = 0; k < apps[i].l[ph].n; k++)
			all[n++] = apps[i].l[ph].v[k];
	bench_sort_u64(all, n);
	printf("name=batch_%s samples=%zu p50_ns=%.0f p99_ns=%.0f p999_ns=%.0f max_ns=%.0f ivcsw=%ld dropped=%zu\n",
	       name, n, bench_quantile_u64(all, n, 0.50) / tpn,
	       bench_quantile_u64(all, n, 0.99) / tpn, bench_quantile_u64(all, n, 0.999) / tpn,
	       n ? all[n - 1] / tpn : 0.0, ivcsw, dropped);
	free(all);
}

BENCH_NOINSTR int main(int argc, char **argv)
{
	uint64_t napps = bench_arg(argc, argv, 1, 1);
	uint64_t phase_ms = bench_arg(argc, argv, 2, 1000);
	uint64_t period_ms = bench_arg(argc, argv, 3, 50);
	uint64_t pairs = bench_arg(argc, argv, 4, 2);
	struct app *apps = calloc(napps, sizeof(*apps));
	double tpn = bench_tsc_per_ns(), snap_ms[4096];
	size_t nsnap = 0, fails = 0;
	uint64_t x = 1, t0, t1, snap_bytes = 0, snap_words = 0;
	char path[4096];

	if (apps == NULL)
		return 2;
	/* Calibrate a batch to about 1 us of traced calls: the fastest of 5
	 * rounds (the machine is shared; the slow rounds are someone else). */
	for (int i = 0; i < 100000; i++)
		x = small_op(x);
	double best = 1e18;
	for (int r = 0; r < 5; r++) {
		t0 = bench_now_ns();
		for (int i = 0; i < 200000; i++)
			x = small_op(x);
		t1 = bench_now_ns();
		if ((double)(t1 - t0) / 2e5 < best)
			best = (double)(t1 - t0) / 2e5;
	}
	batch_calls = (uint64_t)(1000.0 / best);
	if (batch_calls < 1)
		batch_calls = 1;
	printf("name=setup batch_calls=%llu ns_per_call=%.2f tsc_per_ns=%.4f app_threads=%llu"
	       " period_ms=%llu phase_ms=%llu pairs=%llu sink=%llu\n",
	       (unsigned long long)batch_calls, best, tpn,
	       (unsigned long long)napps, (unsigned long long)period_ms,
	       (unsigned long long)phase_ms, (unsigned long long)pairs,
	       (unsigned long long)(x & 1));

	for (uint64_t i = 0; i < napps; i++) {
		/* room for one sample every 0.25 us of each phase type */
		size_t cap = (size_t)(pairs * phase_ms * 4000 + 1024);
		if (lat_init(&apps[i].l[PH_QUIET], cap) || lat_init(&apps[i].l[PH_SNAP], cap))
			return 2;
	}
	for (uint64_t i = 0; i < napps; i++)
		if (pthread_create(&apps[i].th, NULL, app_main, &apps[i]) != 0)
			return 2;
	sleep_ms(200); /* warm-up: threads registered, rings faulted in */

	for (uint64_t p = 0; p < pairs; p++) {
		/* relaxed: see app_main. */
		atomic_store_explicit(&phase, PH_QUIET, memory_order_relaxed);
		sleep_ms((double)phase_ms);
		atomic_store_explicit(&phase, PH_SNAP, memory_order_relaxed);
		t0 = bench_now_ns();
		while (bench_now_ns() - t0 < phase_ms * 1000000ull) {
			uint64_t s0 = bench_now_ns();
			int r = ktrace_snapshot("bench_snapshot_stall");
			uint64_t s1 = bench_now_ns();

			if (r == 0 && ktrace_last_snapshot(path, sizeof(path)) > 0) {
				struct bench_snapinfo si = bench_snapinfo_read(path);
				snap_bytes = si.file_bytes;
				snap_words = si.words;
				remove(path);
				if (nsnap < sizeof(snap_ms) / sizeof(snap_ms[0]))
					snap_ms[nsnap++] = (double)(s1 - s0) / 1e6;
			} else {
				fails++;
				if (fails == 1)
					fprintf(stderr, "snapshot failed: %s\n", ktrace_strerror(r));
			}
			if (s1 - s0 < period_ms * 1000000ull)
				sleep_ms((double)(period_ms * 1000000ull - (s1 - s0)) / 1e6);
		}
	}
	atomic_store_explicit(&phase, PH_STOP, memory_order_relaxed);
	for (uint64_t i = 0; i < napps; i++)
		pthread_join(apps[i].th, NULL);

	report("quiet", apps, napps, PH_QUIET, tpn);
	report("snapshots", apps, napps, PH_SNAP, tpn);
	{
		double mx = 0;
		for (size_t i = 0; i < nsnap; i++)
			if (snap_ms[i] > mx)
				mx = snap_ms[i];
		printf("name=snapshot_write count=%zu failed=%zu median_ms=%.2f max_ms=%.2f"
		       " file_mb=%.1f words=%llu\n",
		       nsnap, fails, bench_median(snap_ms, nsnap), mx, (double)snap_bytes / 1048576.0,
		       (unsigned long long)snap_words);
	}
	for (uint64_t i = 0; i < napps; i++) {
		free(apps[i].l[PH_QUIET].v);
		free(apps[i].l[PH_SNAP].v);
	}
	free(apps);
	return 0;
}
