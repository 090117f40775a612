/*
 * sched.c - stage 3b: context switches -> off-CPU and on-CPU intervals.
 *
 * The SCHED section's records are CLOCK_MONOTONIC ns; each is mapped onto
 * the event counter by interpolating between the two ANCHORS pairs
 * (tsc, monotonic_ns) around it (extrapolated with the counter frequency
 * past either end), then shifted to ticks like every record.
 *
 * Per thread (records sorted by tid, time): an OUT record opens an off-CPU
 * interval (blocked or preempted, as the record says), the thread's next
 * IN closes it; a thread still out at the last drain stays off-CPU up to
 * it, unless it exited.  Per cpu (records sorted by cpu, time): an IN opens
 * the thread's run on that core, its OUT there closes it; between runs the
 * core ran another process (or idled): the sinks call that "other".
 * Threads that never wrote a traced event (no THREADS entry) are added to
 * d->threads under the name the SCHED section gives, or "tid N".
 */
#include <stdio.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kd_sched.h"
#include "kd_time.h"
#include "result.h"
#include "snap.h"
#include "util.h"

static uint64_t mono_to_tick(const struct kd_dec *d, int64_t t)
{
	const struct kd_snap *s = &d->snap;
	const struct ktrace_anchor_rec *a = s->anchors, *x, *y;
	uint32_t lo = 0, hi = s->nanchors;
	const __int128 lim = (__int128)1 << 62;
	__int128 tsc, dt;

	if (s->nanchors == 0 || d->tsc_hz == 0)
		return 0;
	/* first anchor with monotonic_ns > t */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (a[mid].monotonic_ns <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	x = &a[lo > 0 ? lo - 1 : 0];
	/* |dt| <= 2^62 and factors < 2^64 keep the products inside __int128
	 * whatever a hostile file holds (real times are far smaller). */
	dt = (__int128)t - x->monotonic_ns;
	if (dt > lim)
		dt = lim;
	if (dt < -lim)
		dt = -lim;
	if (lo > 0 && lo < s->nanchors && a[lo].monotonic_ns > a[lo - 1].monotonic_ns &&
	    a[lo].tsc > a[lo - 1].tsc) {
		y = &a[lo];
		tsc = (__int128)x->tsc + dt * (__int128)(y->tsc - x->tsc) /
		                         ((__int128)y->monotonic_ns - x->monotonic_ns);
	} else {
		tsc = (__int128)x->tsc + dt * (__int128)d->tsc_hz / 1000000000;
	}
	if (tsc < 0)
		tsc = 0;
	if (tsc > (__int128)UINT64_MAX)
		tsc = (__int128)UINT64_MAX;
	return (uint64_t)tsc >> d->shift;
}

struct srec {
	uint64_t tick;
	int32_t tid;
	uint32_t cpu;
	uint32_t what;            /* enum ktrace_sched_what */
	uint32_t seq;             /* position in the file: ties keep file order */
};

static int cmp_tid(const void *a, const void *b)
{
	const struct srec *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->tick != y->tick)
		return x->tick < y->tick ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_cpu(const void *a, const void *b)
{
	const struct srec *x = a, *y = b;

	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	if (x->tick != y->tick)
		return x->tick < y->tick ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_off(const void *a, const void *b)
{
	const struct kd_dec_offcpu *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Thread index of tid, adding a thread for a tid THREADS does not know. */
static uint32_t thread_of(struct kd_dec *d, struct kd_umap *m, int32_t tid)
{
	uint32_t x = kd_umap_get(m, (uint64_t)(uint32_t)tid);
	struct kd_dec_thread *p, *t;

	if (x != KD_NONE)
		return x;
	p = kd_xrealloc(d->threads, ((size_t)d->nthreads + 1) * sizeof(*p), "the context switches");
	if (!p)
		return KD_NONE;
	d->threads = p;
	t = &d->threads[d->nthreads];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->known = 1;
	snprintf(t->name, sizeof(t->name), "tid %" PRId32, tid);
	for (uint32_t i = 0; i < d->snap.sched.nnames; i++)
		if (d->snap.sched_names[i].tid == tid && d->snap.sched_names[i].name[0])
			snprintf(t->name, sizeof(t->name), "%s", d->snap.sched_names[i].name);
	if (kd_umap_put(m, (uint64_t)(uint32_t)tid, d->nthreads))
		return KD_NONE;
	return d->nthreads++;
}

/* Where a thread's last run ends: an exiting thread writes no switch-out
 * (its events go first), so its run ends at its exit from THREADS. */
static uint64_t exit_tick(const struct kd_dec *d, uint32_t th, uint64_t since)
{
	const struct kd_dec_thread *t = &d->threads[th];
	const struct ktrace_thread_rec *x;
	uint64_t e;

	if (!(t->flags & KTRACE_THREAD_EXITED) || t->slot == 0 ||
	    (x = kd_snap_thread(&d->snap, t->slot)) == NULL || x->exit_tsc == 0)
		return d->sched_to;
	e = x->exit_tsc >> d->shift;
	return e < since ? since : e < d->sched_to ? e : d->sched_to;
}

int kd_sched_decode(struct kd_dec *d)
{
	const struct kd_snap *s = &d->snap;
	uint32_t n = s->nsched_recs, noff = 0, non = 0;
	struct srec *r;
	struct kd_umap map = { 0 };
	int64_t from_ns;

	if (!s->have_sched || s->sched.status != KTRACE_SCHED_RECORDED)
		return 0;
	d->sched = 1;
	from_ns = s->sched.start_ns;
	for (uint32_t c = 0; c < s->sched.ncores; c++)
		if (s->sched_cores[c].complete_from_ns > from_ns)
			from_ns = s->sched_cores[c].complete_from_ns;
	d->sched_from = mono_to_tick(d, from_ns);
	d->sched_to = mono_to_tick(d, s->sched.end_ns);
	if (d->sched_to < d->sched_from)
		d->sched_to = d->sched_from;
	r = kd_xmalloc(((size_t)n + 1) * sizeof(*r), "the context switches");
	d->offcpu = kd_xmalloc(((size_t)n + 1) * sizeof(*d->offcpu), "the context switches");
	d->oncpu = kd_xmalloc(((size_t)n + 1) * sizeof(*d->oncpu), "the context switches");
	if (!r || !d->offcpu || !d->oncpu)
		goto oom;
	for (uint32_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].known && kd_umap_get(&map, (uint64_t)(uint32_t)d->threads[i].tid) ==
		                               KD_NONE &&
		    kd_umap_put(&map, (uint64_t)(uint32_t)d->threads[i].tid, i))
			goto oom;
	for (uint32_t i = 0; i < n; i++) {
		const struct ktrace_sched_rec *x = &s->sched_recs[i];

		r[i] = (struct srec){ mono_to_tick(d, x->time_ns), x->tid, x->cpu, x->what, i };
	}

	/* Off-CPU, per thread. */
	qsort(r, n, sizeof(*r), cmp_tid);
	for (uint32_t i = 0; i < n;) {
		uint32_t e = i, th;
		int out = 0;
		uint64_t out_tick = 0;
		uint32_t why = 0;

		while (e < n && r[e].tid == r[i].tid)
			e++;
		th = thread_of(d, &map, r[i].tid);
		if (th == KD_NONE)
			goto oom;
		for (uint32_t k = i; k < e; k++) {
			if (r[k].what != KTRACE_SCHED_IN) {
				out = 1;
				out_tick = r[k].tick;
				why = r[k].what == KTRACE_SCHED_OUT_PREEMPT ? KD_OFF_PREEMPTED
				                                            : KD_OFF_BLOCKED;
			} else if (out) {
				d->offcpu[noff++] = (struct kd_dec_offcpu){ out_tick, r[k].tick, th, why };
				out = 0;
			}
		}
		if (out && !(d->threads[th].flags & KTRACE_THREAD_EXITED) && out_tick < d->sched_to)
			d->offcpu[noff++] = (struct kd_dec_offcpu){ out_tick, d->sched_to, th, why };
		i = e;
	}
	qsort(d->offcpu, noff, sizeof(*d->offcpu), cmp_off);
	d->noffcpu = noff;
	d->offcpu_first = kd_xcalloc((size_t)d->nthreads + 1, sizeof(*d->offcpu_first),
			"the context switches");
	if (!d->offcpu_first)
		goto oom;
	for (uint32_t i = 0; i < noff; i++)
		d->offcpu_first[d->offcpu[i].thread + 1]++;
	for (uint32_t t = 0; t < d->nthreads; t++)
		d->offcpu_first[t + 1] += d->offcpu_first[t];

	/* On-CPU, per core. */
	qsort(r, n, sizeof(*r), cmp_cpu);
	for (uint32_t i = 0; i < n;) {
		uint32_t e = i, cur = KD_NONE;
		uint64_t since = 0;

		while (e < n && r[e].cpu == r[i].cpu)
			e++;
		for (uint32_t k = i; k < e; k++) {
			uint32_t th = kd_umap_get(&map, (uint64_t)(uint32_t)r[k].tid);

			if (r[k].what == KTRACE_SCHED_IN) {
				if (cur != KD_NONE) /* its OUT was lost */
					d->oncpu[non++] = (struct kd_dec_oncpu){ since, r[k].tick, cur,
					                                             r[k].cpu };
				cur = th;
				since = r[k].tick;
			} else if (cur == th && cur != KD_NONE) {
				d->oncpu[non++] = (struct kd_dec_oncpu){ since, r[k].tick, cur, r[k].cpu };
				cur = KD_NONE;
			} else if (cur == KD_NONE && r[k].tick >= d->sched_from && k == i) {
				/* running since before the first record of this core */
				d->oncpu[non++] = (struct kd_dec_oncpu){ d->sched_from, r[k].tick, th,
				                                             r[k].cpu };
			}
		}
		if (cur != KD_NONE && since < d->sched_to)
			d->oncpu[non++] = (struct kd_dec_oncpu){ since, exit_tick(d, cur, since),
			                                             cur, r[i].cpu };
		i = e;
	}
	d->noncpu = non;
	free(r);
	kd_umap_free(&map);
	return 0;
oom:
	free(r);
	kd_umap_free(&map);
	free(d->offcpu);
	free(d->oncpu);
	free(d->offcpu_first);
	d->offcpu = NULL;
	d->oncpu = NULL;
	d->offcpu_first = NULL;
	d->noffcpu = d->noncpu = 0;
	d->sched = 0;
	return KD_ENOMEM;
}

void kd_sched_offcpu_in(const struct kd_dec *d, uint32_t thread, uint64_t b, uint64_t e,
                           uint64_t out[2])
{
	uint32_t lo, hi;

	out[0] = out[1] = 0;
	if (!d->sched || !d->offcpu_first || thread >= d->nthreads || e <= b)
		return;
	lo = d->offcpu_first[thread];
	hi = d->offcpu_first[thread + 1];
	/* first interval ending after b (a thread's intervals do not overlap) */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (d->offcpu[mid].end <= b)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i < d->offcpu_first[thread + 1] && d->offcpu[i].begin < e; i++) {
		uint64_t x = d->offcpu[i].begin > b ? d->offcpu[i].begin : b;
		uint64_t y = d->offcpu[i].end < e ? d->offcpu[i].end : e;

		if (y > x)
			out[d->offcpu[i].why] += y - x;
	}
}

void kd_sched_fmt_split(const struct kd_dec *d, uint64_t wall, const uint64_t off[2],
                           char *buf, size_t len)
{
	char a[32], b[32], c[32];
	uint64_t o = off[0] + off[1];

	kd_time_fmt_dur(kd_time_ticks_ns(d, wall > o ? wall - o : 0), a, sizeof(a));
	kd_time_fmt_dur(kd_time_ticks_ns(d, off[0]), b, sizeof(b));
	kd_time_fmt_dur(kd_time_ticks_ns(d, off[1]), c, sizeof(c));
	snprintf(buf, len, "%s on-CPU, %s blocked, %s preempted", a, b, c);
}

void kd_sched_status(const struct kd_dec *d, char *buf, size_t len)
{
	const struct kd_snap *s = &d->snap;
	const struct ktrace_sched_hdr *h = &s->sched;
	char par[48];

	if (!s->have_sched) {
		snprintf(buf, len, "scheduling: not recorded (no SCHED section: written by a ktrace "
		                   "without scheduling support, or the section was damaged)");
		return;
	}
	if (h->paranoid == INT32_MIN)
		snprintf(par, sizeof(par), "kernel.perf_event_paranoid unreadable");
	else
		snprintf(par, sizeof(par), "kernel.perf_event_paranoid=%" PRId32, h->paranoid);
	switch (h->status) {
	case KTRACE_SCHED_RECORDED:
		snprintf(buf, len, "scheduling: recorded, %" PRIu32 " switch records in the file "
		                   "(%" PRIu64 " since start), %" PRIu64 " lost, %" PRIu32
		                   " off-CPU intervals", s->nsched_recs, h->switches, h->lost,
		         d->noffcpu);
		break;
	case KTRACE_SCHED_OFF:
		snprintf(buf, len, "scheduling: not recorded (KTRACE_SCHED=off)");
		break;
	case KTRACE_SCHED_REFUSED: {
		const char *en = h->err > 0 && h->err < 4096 ? strerrorname_np(h->err) : NULL;
		char num[16];

		if (!en) {
			snprintf(num, sizeof(num), "errno %" PRId32, h->err);
			en = num;
		}
		if ((h->err == EACCES || h->err == EPERM) && h->paranoid != INT32_MIN &&
		    h->paranoid <= 2)
			/* The sysctl already allows it: something else refused. */
			snprintf(buf, len, "scheduling: not recorded (%s: %s, %s, which allows it: a "
			                   "seccomp filter or a security module (container profile, "
			                   "SELinux, AppArmor) forbids the call here)",
			         h->what[0] ? h->what : "perf_event_open", en, par);
		else if (h->err == EACCES || h->err == EPERM)
			snprintf(buf, len, "scheduling: not recorded (%s: %s, %s; allow with sysctl "
			                   "kernel.perf_event_paranoid=2 or CAP_PERFMON)",
			         h->what[0] ? h->what : "perf_event_open", en, par);
		else
			snprintf(buf, len, "scheduling: not recorded (%s: %s, %s)",
			         h->what[0] ? h->what : "perf_event_open", en, par);
		break;
	}
	case KTRACE_SCHED_SECCOMP:
		if (strncmp(h->what, "seccomp", sizeof(h->what)) == 0)
			snprintf(buf, len, "scheduling: not recorded (a seccomp filter is active: "
			                   "perf_event_open was not tried, as a filter may kill the "
			                   "process on it; KTRACE_SCHED=on tries it)");
		else
			snprintf(buf, len, "scheduling: not recorded (whether a seccomp filter is "
			                   "active could not be read from /proc/self/status: "
			                   "perf_event_open was not tried; KTRACE_SCHED=on tries it)");
		break;
	default:
		snprintf(buf, len, "scheduling: not recorded (unknown status %" PRIu32 ")", h->status);
	}
}
