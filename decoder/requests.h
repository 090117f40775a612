/*
 * requests.h - requests.c: the REQUESTS section (format 2): latency histograms
 * summed over a range, the summary's request lines.
 */
#ifndef KD_REQUESTS_H
#define KD_REQUESTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"

/* ---- requests (requests.c): the REQUESTS section (format 2) ---------------- */

/* A kind's latency histogram summed over the slices that overlap a range. */
struct kd_req_hist {
	uint32_t kind;            /* name id */
	const struct ktrace_req_kind_rec *rec; /* its counts */
	uint32_t nslices;         /* slices summed */
	uint64_t first_tsc, last_tsc; /* counter: their span (the range to within a slice) */
	uint64_t count;           /* requests that ended in them */
	double per_s;             /* count per second of the span */
	uint64_t pct_ticks[4];    /* counter ticks: p50, p90, p99, p99.9 (bucket upper
	                             bounds capped by max: never below the true value) */
	uint64_t pct_ns[4];       /* the same in ns */
	uint64_t max_ticks, max_ns; /* the slices' exact maximum */
	double err_pct;           /* percent a percentile may be above the true value */
	uint64_t span_ns;         /* ns: last_tsc - first_tsc */
};
/* Exclusive upper bound of histogram bucket b (counter ticks). */
uint64_t kd_requests_bucket_hi(uint32_t b, uint32_t sub_bits);
/* Kind k (index in snap.req_kinds) over [from, to] (ticks, shifted): 0, or -1
 * (no section, no such kind, out of memory). */
int kd_requests_hist(const struct kd_dec *d, uint32_t k, uint64_t from, uint64_t to,
                struct kd_req_hist *h);
/* Index in snap.req_kinds of a kind's name id, or KD_NONE. */
uint32_t kd_requests_kind_index(const struct kd_dec *d, uint32_t kind_id);
/* The summary's requests lines (nothing without a REQUESTS section). */
void kd_requests_lines(FILE *f, const struct kd_dec *d, const char *indent);

#endif /* KD_REQUESTS_H */
