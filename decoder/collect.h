/*
 * collect.h - collect.c: the collector (a sink that appends every call to
 * d->calls, for the formats that need calls in memory).
 */
#ifndef KD_COLLECT_H
#define KD_COLLECT_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"
#include "stream.h"

/* The collector: appends calls to d->calls (index at CALL_BEGIN, parent from
 * its own stack), as kd_dec_open_* always did. */
struct kd_collector {
	struct kd_dec *d;
	size_t capcalls;
	uint32_t *stack;          /* open call indices of the current thread */
	size_t capstack;
	uint32_t depth;
};
void kd_collector_init(struct kd_collector *c, struct kd_dec *d);
struct kd_sink kd_collector_sink(struct kd_collector *c);
void kd_collector_free(struct kd_collector *c);

#endif /* KD_COLLECT_H */
