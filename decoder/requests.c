/*
 * requests.c - what became of every request (format 2's REQUESTS
 * section), for the summary, stats and explain.
 *
 * The library holds a request's records aside while it runs and writes
 * them to the ring only if the request is kept (slow, sampled as a typical
 * one, nested in a kept one, ...); every ended request, kept or not, is
 * counted per kind and its duration goes into a log-linear histogram per
 * time slice.  This file sums the slices that overlap the decoded window
 * and reads percentiles off the sum.
 *
 * Error bound.  A duration v falls in bucket b whose values lie in
 * [lo, hi) with hi - lo <= lo / 2^sub_bits (ktrace_format.h).  A
 * percentile is reported as its bucket's hi, capped by the slices' exact
 * maximum: never below the true value, at most 2^-sub_bits above it (6.25 %
 * with sub_bits = 4).  Slices cut by the window's edges are counted whole,
 * so the histogram's window is the decoded one to within one slice each
 * side (the span is printed).
 */
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kd_time.h"
#include "names.h"
#include "requests.h"
#include "result.h"
#include "snap.h"
#include "util.h"

uint64_t kd_requests_bucket_hi(uint32_t b, uint32_t sub_bits)
{
	uint32_t e, m;
	uint64_t lo;

	if (b < (1u << sub_bits))
		return (uint64_t)b + 1;
	e = (b >> sub_bits) + sub_bits - 1;
	m = b & ((1u << sub_bits) - 1);
	if (e > 63)
		return UINT64_MAX;
	lo = ((1ull << sub_bits) + m) << (e - sub_bits);
	return lo > UINT64_MAX - (1ull << (e - sub_bits)) ? UINT64_MAX
	                                                  : lo + (1ull << (e - sub_bits));
}

/* Counter ticks (unshifted) -> ns. */
static uint64_t tsc_ns(const struct kd_dec *d, uint64_t t)
{
	unsigned __int128 v = (unsigned __int128)t * 1000000000u;

	if (!d->snap.info.tsc_hz)
		return 0;
	v /= d->snap.info.tsc_hz;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

int kd_requests_hist(const struct kd_dec *d, uint32_t k, uint64_t from, uint64_t to,
                struct kd_req_hist *h)
{
	const struct kd_snap *s = &d->snap;
	const struct kd_snap_req_kind *kk;
	uint32_t sb, lim;
	uint64_t *cnt, from_tsc, to_tsc;
	static const uint32_t q1000[5] = { 500, 900, 990, 999, 0 };

	memset(h, 0, sizeof(*h));
	if (!s->have_reqs || k >= s->req_hdr.nkinds)
		return -1;
	kk = &s->req_kinds[k];
	h->kind = kk->rec.kind_id;
	h->rec = &kk->rec;
	sb = s->req_hdr.sub_bits;
	lim = (64u - sb + 1u) << sb; /* read.c kept bucket indices below this */
	cnt = kd_xcalloc(lim, sizeof(*cnt), "the request histogram");
	if (!cnt)
		return -1;
	from_tsc = from << d->shift;
	to_tsc = to > (UINT64_MAX >> d->shift) ? UINT64_MAX : to << d->shift;
	h->first_tsc = UINT64_MAX;
	for (uint32_t i = 0; i < kk->rec.nslices; i++) {
		const struct kd_snap_req_slice *sl = &s->req_slices[kk->first_slice + i];

		if (sl->rec.end_tsc < from_tsc || sl->rec.start_tsc > to_tsc)
			continue;
		h->nslices++;
		if (sl->rec.start_tsc < h->first_tsc)
			h->first_tsc = sl->rec.start_tsc;
		if (sl->rec.end_tsc > h->last_tsc)
			h->last_tsc = sl->rec.end_tsc;
		if (sl->rec.max_ticks > h->max_ticks)
			h->max_ticks = sl->rec.max_ticks;
		for (uint32_t j = 0; j < sl->rec.nbuckets; j++) {
			const struct ktrace_req_bucket *bk = &s->req_buckets[sl->first_bucket + j];

			cnt[bk->bucket] += bk->count;
			h->count += bk->count;
		}
	}
	if (!h->nslices)
		h->first_tsc = 0;
	/* Percentiles: the bucket holding the rank ceil(q * count). */
	for (int qi = 0; qi < 4 && h->count; qi++) {
		uint64_t rank = (h->count * q1000[qi] + 999) / 1000, acc = 0;

		if (!rank)
			rank = 1;
		for (uint32_t b = 0; b < lim; b++) {
			acc += cnt[b];
			if (acc >= rank) {
				uint64_t hi = kd_requests_bucket_hi(b, sb);

				/* hi is exclusive; values below 2^sub_bits are exact */
				if (b < (1u << sb))
					hi = b;
				if (h->max_ticks && hi > h->max_ticks)
					hi = h->max_ticks;
				h->pct_ticks[qi] = hi;
				break;
			}
		}
	}
	free(cnt);
	h->span_ns = h->last_tsc > h->first_tsc ? tsc_ns(d, h->last_tsc - h->first_tsc) : 0;
	h->per_s = h->span_ns ? (double)h->count * 1e9 / (double)h->span_ns : 0.0;
	for (int qi = 0; qi < 4; qi++)
		h->pct_ns[qi] = tsc_ns(d, h->pct_ticks[qi]);
	h->max_ns = tsc_ns(d, h->max_ticks);
	h->err_pct = 100.0 / (double)(1u << sb);
	return 0;
}

uint32_t kd_requests_kind_index(const struct kd_dec *d, uint32_t kind_id)
{
	for (uint32_t k = 0; d->snap.have_reqs && k < d->snap.req_hdr.nkinds; k++)
		if (d->snap.req_kinds[k].rec.kind_id == kind_id)
			return k;
	return KD_NONE;
}

void kd_requests_lines(FILE *f, const struct kd_dec *d, const char *indent)
{
	const struct kd_snap *s = &d->snap;
	char nb[64], a[32], b[32], c[32], e[32], g[32], t[32];

	if (!s->have_reqs)
		return;
	fprintf(f, "%srequests: %s; per kind, what became of the requests that ended "
	           "(kept: all their records are in the file)\n", indent,
	        (s->req_hdr.flags & KTRACE_REQS_HOLD) ?
	        "held aside while running, kept whole only if slow or sampled" :
	        "recorded as they ran (not held aside)");
	if ((s->req_hdr.flags & KTRACE_REQS_HOLD) && s->req_hdr.gap_us) {
		kd_time_fmt_dur((uint64_t)s->req_hdr.gap_us * 1000, a, sizeof(a));
		fprintf(f, "%s  between requests: held aside too; %" PRIu32 " gaps kept whole "
		           "since start (%s or longer, sampled, with a mark or after a "
		           "trigger), the rest reduced to the calls the nesting needs\n",
		        indent, s->req_hdr.gaps_kept, a);
	}
	if (s->req_hdr.hold_failed)
		fprintf(f, "%s  %" PRIu64 " threads got no hold buffer (memory): their requests "
		           "were recorded as they ran\n", indent, s->req_hdr.hold_failed);
	for (uint32_t k = 0; k < s->req_hdr.nkinds; k++) {
		const struct ktrace_req_kind_rec *r = &s->req_kinds[k].rec;
		struct kd_req_hist h;
		uint64_t oldest = UINT64_MAX;
		uint32_t nslow = 0;

		fprintf(f, "%s  %s: %" PRIu64 " ended; kept %" PRIu64 " slow, %" PRIu64 " sampled, %"
		           PRIu64 " other; %" PRIu64 " not kept (counted only)\n", indent,
		        kd_names_id(d, r->kind_id, nb, sizeof(nb)), r->ended, r->kept_slow,
		        r->kept_sampled, r->kept_other, r->dropped);
		if (kd_requests_hist(d, k, d->window_start, d->window_end, &h) == 0 && h.count) {
			kd_time_fmt_wall(kd_time_snap_wall_ns(s, h.first_tsc), 0, a, sizeof(a));
			kd_time_fmt_wall(kd_time_snap_wall_ns(s, h.last_tsc), 0, b, sizeof(b));
			fprintf(f, "%s    latency of the %" PRIu64 " that ended in %s .. %s UTC "
			           "(%" PRIu32 " slice%s: the window to within one slice), %.1f/s\n",
			        indent, h.count, a, b, h.nslices, h.nslices == 1 ? "" : "s", h.per_s);
			kd_time_fmt_dur(h.pct_ns[0], a, sizeof(a));
			kd_time_fmt_dur(h.pct_ns[1], b, sizeof(b));
			kd_time_fmt_dur(h.pct_ns[2], c, sizeof(c));
			kd_time_fmt_dur(h.pct_ns[3], e, sizeof(e));
			kd_time_fmt_dur(h.max_ns, g, sizeof(g));
			fprintf(f, "%s    p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (a percentile is at "
			           "most %.2f %% above the true value, never below)\n", indent, a, b, c,
			        e, g, h.err_pct);
		} else {
			fprintf(f, "%s    no request of this kind ended in the window\n", indent);
		}
		for (uint32_t i = 0; i < d->nreqs; i++)
			if (d->reqs[i].kind == r->kind_id && (d->reqs[i].keep & KTRACE_REQ_SLOW)) {
				nslow++;
				if (d->reqs[i].begin < oldest)
					oldest = d->reqs[i].begin;
			}
		if (r->threshold_ns)
			kd_time_fmt_dur(r->threshold_ns, t, sizeof(t));
		if (nslow) {
			kd_time_fmt_dur(kd_time_ticks_ns(d, d->window_end > oldest ? d->window_end - oldest : 0),
			           a, sizeof(a));
			fprintf(f, "%s    slow requests kept back to %s before the window end "
			           "(%" PRIu32 " in the file; slow: over %s)\n", indent, a, nslow,
			        r->threshold_ns ? t : "the threshold");
		}
		else
			fprintf(f, "%s    no slow request kept in the file (%s%s)\n", indent,
			        r->threshold_ns ? "slow: over " : "threshold not armed yet",
			        r->threshold_ns ? t : "");
	}
}
