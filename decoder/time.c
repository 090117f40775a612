/*
 * time.c - stage 4 of ktrace-decode: the one clock conversion.
 *
 * Ticks -> ns with 128-bit arithmetic; wall clock by piecewise-linear
 * interpolation between ANCHORS, extrapolated with tsc_hz.  Every format
 * converts with these two functions, nothing else.
 */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "kd_time.h"
#include "result.h"
#include "snap.h"

/* ---- stage 4: time --------------------------------------------------------- */

static int64_t clamp_i64(__int128 v)
{
	if (v > INT64_MAX)
		return INT64_MAX;
	if (v < INT64_MIN)
		return INT64_MIN;
	return (int64_t)v;
}

uint64_t kd_time_ticks_ns(const struct kd_dec *d, uint64_t ticks)
{
	unsigned __int128 v = ((unsigned __int128)ticks << d->shift) * 1000000000u;

	if (!d->tsc_hz)
		return 0;
	v /= d->tsc_hz;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static int64_t extrapolate(uint64_t hz, uint64_t t0, int64_t r0, uint64_t tsc)
{
	__int128 dt = (__int128)tsc - (__int128)t0;

	return clamp_i64((__int128)r0 + dt * 1000000000 / (__int128)hz);
}

/*
 * Wall-clock steps.  Between two anchors the realtime and monotonic
 * clocks advance together but for NTP's slew (at most 500 ppm); a step of
 * the wall clock (settimeofday, an NTP step, a VM resumed) shows as a
 * pair whose realtime difference is not its monotonic one.  Threshold:
 * 1 ms plus 0.1 % of the interval, far above the slew and the anchors'
 * own jitter (microseconds).  Anchors written without monotonic times
 * (0), or whose monotonic times do not follow the counter, are not
 * compared.
 */
void kd_time_find_steps(struct kd_snap *snap)
{
	const struct ktrace_anchor_rec *a = snap->anchors;

	snap->wall_steps = 0;
	snap->wall_step_ns = snap->wall_step_max_ns = 0;
	snap->wall_step_max_tsc = 0;
	uint64_t hz = snap->info.tsc_hz;

	for (uint32_t i = 1; i < snap->nanchors && hz; i++) {
		__int128 dr = (__int128)a[i].realtime_ns - a[i - 1].realtime_ns;
		__int128 dm = (__int128)a[i].monotonic_ns - a[i - 1].monotonic_ns;
		__int128 dc = ((__int128)a[i].tsc - a[i - 1].tsc) * 1000000000 / hz;
		__int128 step = dr - dm, mag = step < 0 ? -step : step;
		__int128 drift = dm - dc, thr = 1000000 + dm / 1000;

		/* Only where the monotonic clock agrees with the counter: a
		 * file whose monotonic times are not (synthetic ones) keeps
		 * its realtime mapping. */
		if (a[i].monotonic_ns == 0 || a[i - 1].monotonic_ns == 0 || dm < 0 ||
		    mag <= thr || drift > thr || -drift > thr)
			continue;
		snap->wall_steps++;
		snap->wall_step_ns = clamp_i64((__int128)snap->wall_step_ns + step);
		if (mag > (snap->wall_step_max_ns < 0 ? -(__int128)snap->wall_step_max_ns
		                                       : (__int128)snap->wall_step_max_ns)) {
			snap->wall_step_max_ns = clamp_i64(step);
			snap->wall_step_max_tsc = a[i].tsc;
		}
	}
}

/* The realtime of anchor i, or with steps its monotonic time plus the
 * newest anchor's offset: one continuous clock that reads the wall time
 * of the snapshot's end. */
static int64_t anchor_wall(const struct kd_snap *snap, uint32_t i)
{
	const struct ktrace_anchor_rec *a = snap->anchors, *z = &a[snap->nanchors - 1];

	if (!snap->wall_steps)
		return a[i].realtime_ns;
	return clamp_i64((__int128)a[i].monotonic_ns + z->realtime_ns - z->monotonic_ns);
}

int64_t kd_time_snap_wall_ns(const struct kd_snap *snap, uint64_t tsc)
{
	const struct ktrace_anchor_rec *a = snap->anchors;
	uint64_t hz = snap->info.tsc_hz ? snap->info.tsc_hz : 1000000000u;
	uint32_t n = snap->nanchors, lo, hi;
	long double frac;

	if (!n)
		return extrapolate(hz, snap->info.snapshot_tsc, snap->info.snapshot_realtime_ns, tsc);
	if (tsc <= a[0].tsc)
		return extrapolate(hz, a[0].tsc, anchor_wall(snap, 0), tsc);
	if (tsc >= a[n - 1].tsc)
		return extrapolate(hz, a[n - 1].tsc, anchor_wall(snap, n - 1), tsc);
	lo = 0;
	hi = n - 1; /* a[lo].tsc < tsc < a[hi].tsc */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (a[mid].tsc <= tsc)
			lo = mid;
		else
			hi = mid;
	}
	frac = (long double)(tsc - a[lo].tsc) / (long double)(a[hi].tsc - a[lo].tsc);
	return clamp_i64((__int128)anchor_wall(snap, lo) +
	                 (__int128)(frac * (long double)((__int128)anchor_wall(snap, hi) -
	                                                 (__int128)anchor_wall(snap, lo))));
}

int64_t kd_time_wall_ns(const struct kd_dec *d, uint64_t tick)
{
	unsigned __int128 tsc = (unsigned __int128)tick << d->shift;

	return kd_time_snap_wall_ns(&d->snap, tsc > UINT64_MAX ? UINT64_MAX : (uint64_t)tsc);
}

void kd_time_fmt_wall(int64_t ns, int date, char *buf, size_t len)
{
	int64_t sec = ns / 1000000000, frac = ns % 1000000000;
	time_t t;
	struct tm tm;

	if (frac < 0) {
		frac += 1000000000;
		sec--;
	}
	t = (time_t)sec;
	if (!gmtime_r(&t, &tm) || tm.tm_year > 8099 || tm.tm_year < -1899) {
		snprintf(buf, len, "@%" PRId64 "ns", ns);
		return;
	}
	if (date)
		snprintf(buf, len, "%04d-%02d-%02d %02d:%02d:%02d.%09" PRId64,
		         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		         tm.tm_sec, frac);
	else
		snprintf(buf, len, "%02d:%02d:%02d.%09" PRId64, tm.tm_hour, tm.tm_min, tm.tm_sec,
		         frac);
}

void kd_time_fmt_dur(uint64_t ns, char *buf, size_t len)
{
	if (ns < 1000)
		snprintf(buf, len, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.3f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.3f s", (double)ns / 1e9);
}


int64_t kd_time_event_ns(const struct kd_dec *d, uint64_t tick, uint32_t sub)
{
	int64_t w = kd_time_wall_ns(d, tick), next;

	if (!sub)
		return w;
	/* Never at or past the next tick's time (the same conversion). */
	next = kd_time_wall_ns(d, tick + 1);
	if (next - w <= 1)
		return w;
	if ((int64_t)sub > next - w - 1)
		sub = (uint32_t)(next - w - 1);
	return w + (int64_t)sub;
}
