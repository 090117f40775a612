/*
 * filter.h - filter.c: the identity filter, where a new filter on the event
 * stream starts (stream.h says what a filter must preserve; range.c's
 * kd_range_filter is the full example).
 */
#ifndef KD_FILTER_H
#define KD_FILTER_H

#include "stream.h"

/* The identity filter: forwards everything to next. */
struct kd_filter_pass {
	struct kd_sink next;
};
struct kd_sink kd_filter_pass(struct kd_filter_pass *f);

#endif /* KD_FILTER_H */
