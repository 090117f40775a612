/*
 * range.h - range.c: the time range (--from/--to/--around-trigger/--min-dur):
 * parsing, resolving on the files, and the filter on the stream.  What a
 * sink needs of it (the walk through it, the summary's note) is in sink.h.
 */
#ifndef KD_RANGE_H
#define KD_RANGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collect.h"
#include "result.h"
#include "stream.h"

enum kd_when_kind { KD_WHEN_NONE = 0, KD_WHEN_OFFSET, KD_WHEN_TIME_OF_DAY, KD_WHEN_WALL };

/* One end of a range as written on the command line. */
struct kd_when {
	int kind;                 /* enum kd_when_kind */
	int64_t ns;               /* offset, ns since midnight UTC, or ns since the epoch */
	const char *text;         /* as given */
};

struct kd_range {
	struct kd_when from, to;  /* --from / --to */
	int around_set;           /* --around-trigger given */
	uint64_t around_ns;       /* ns: its duration */
	uint64_t min_dur_ns;      /* --min-dur (0: none) */
	/* kd_range_resolve(): */
	int active;               /* from/to/around given */
	int64_t from_ns, to_ns;   /* CLOCK_REALTIME ns (INT64_MIN / INT64_MAX: open) */
};

/* Parse a --from/--to value / a duration; 0, or -1 with msg saying what to
 * write instead. */
int kd_range_parse_when(const char *opt, const char *s, struct kd_when *w, char *msg, size_t len);
int kd_range_parse_duration(const char *opt, const char *s, uint64_t *ns, char *msg, size_t len);
/* Turn the range into wall-clock ns for these files (offsets from the
 * earliest window start; --around-trigger from the first file with a
 * trigger).  0, or -1 with msg (no trigger, empty range, outside every window). */
int kd_range_resolve(struct kd_range *r, struct kd_dec *const *decs, uint32_t n, char *msg,
                     size_t len);
/* The range in d's ticks ([from, to], the window if no range) and
 * --min-dur in ticks; 0 no range, 1 a range, 2 a range that misses d's
 * window (from UINT64_MAX, to 0: nothing passes). */
int kd_range_ticks(const struct kd_dec *d, const struct kd_range *r, uint64_t *from,
                   uint64_t *to, uint64_t *min);
/* Cut d to the range and drop calls shorter than min_dur_ns (see range.c):
 * d's calls are collected again through the range filter (kd_dec_collect
 * with d->cut.range set), the one cut every format goes through. */
void kd_range_apply(struct kd_dec *d, const struct kd_range *r);
/* Marks outside [from, to] go; runs and off/on-CPU intervals are clamped
 * to it (or go). */
void kd_range_cut_intervals(struct kd_dec *d, uint64_t from, uint64_t to);
/* The same cut of the calls as a filter on the event stream (stream.h), for
 * sinks that consume it: kd_range_filter(&f, r, next) returns the sink to
 * give kd_build_walk; marks and requests outside the range go too. */
struct kd_range_filter {
	const struct kd_range *r;
	struct kd_sink next;
	const struct kd_dec *d;   /* the file whose ticks from/to/min are in */
	uint64_t from, to, min;   /* ticks */
	void *stack;              /* open calls (struct rf_frame, range.c) */
	size_t cap;
	uint32_t depth, undecided; /* frames below `undecided` are decided */
	void *q;                  /* events waiting behind an undecided call */
	size_t qcap;
	uint32_t qhead, qn;
	uint64_t calls_out;       /* calls dropped: outside the range */
	uint64_t min_dropped;     /* calls dropped: shorter than --min-dur */
	/* With `track` (set before the walk, for the collector behind it):
	 * per input call (the builder's call position), its caller's position
	 * and whether it was kept, so that requests' call positions can be
	 * remapped to the kept calls (kd_dec_collect).  Per call: 5 bytes. */
	int track;
	uint32_t npos;            /* CALL_BEGINs seen */
	uint32_t *in_parent;      /* [npos]: the caller's position, KD_NONE */
	uint8_t *in_kept;         /* [npos]: 1 kept */
	size_t cap_parent, cap_kept;
};
struct kd_sink kd_range_filter(struct kd_range_filter *f, const struct kd_range *r,
                               struct kd_sink next);
void kd_range_filter_free(struct kd_range_filter *f);
int kd_range_collect(struct kd_dec *d, struct kd_collector *c, struct kd_dec_error *err);

#endif /* KD_RANGE_H */
