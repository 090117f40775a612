/*
 * collect.c - the collector (stream.h): the sink that keeps every call in
 * d->calls for the in-memory sinks (stats, explain, html, exclude) and for
 * programs and tests (kd_dec_open_*), and the identity filter.  A stage on
 * the stream: it calls nothing but the utilities (dec.c walks with it).
 */
#include <stdlib.h>
#include <string.h>

#include "collect.h"
#include "result.h"
#include "stream.h"
#include "util.h"

static void collect_ev(void *ctx, const struct kd_dec *dc, const struct kd_ev *e)
{
	struct kd_collector *c = ctx;
	struct kd_dec *d = c->d;
	struct kd_dec_call *k;
	uint32_t ci;

	(void)dc;
	switch (e->kind) {
	case KD_EV_THREAD_BEGIN:
		c->depth = 0;
		return;
	case KD_EV_CALL_BEGIN:
		if ((d->ncalls >= c->capcalls &&
		     kd_grow(&d->calls, &c->capcalls, d->ncalls, sizeof(*d->calls), "the calls")) ||
		    (c->depth >= c->capstack &&
		     kd_grow(&c->stack, &c->capstack, c->depth, sizeof(*c->stack), "the calls")))
			kd_util_oom("the calls", SIZE_MAX);
		ci = d->ncalls++;
		k = &d->calls[ci];
		k->begin = e->tick;
		k->end = e->tick;
		k->self = 0;
		k->func = e->func;
		k->thread = e->thread;
		k->parent = c->depth ? c->stack[c->depth - 1] : KD_NONE;
		k->depth = e->depth;
		k->core = e->core;
		k->flags = e->flags;
		k->begin_sub = e->sub > UINT16_MAX ? UINT16_MAX : (uint16_t)e->sub;
		k->end_sub = 0;
		c->stack[c->depth++] = ci;
		return;
	case KD_EV_CALL_END:
		if (!c->depth)
			return;
		k = &d->calls[c->stack[--c->depth]];
		k->end = e->tick;
		k->self = e->self;
		k->flags = e->flags;
		k->end_sub = e->sub > UINT16_MAX ? UINT16_MAX : (uint16_t)e->sub;
		return;
	default:
		return;
	}
}

void kd_collector_init(struct kd_collector *c, struct kd_dec *d)
{
	memset(c, 0, sizeof(*c));
	c->d = d;
	free(d->calls);
	d->calls = NULL;
	d->ncalls = 0;
}

struct kd_sink kd_collector_sink(struct kd_collector *c)
{
	return (struct kd_sink){ collect_ev, c };
}

void kd_collector_free(struct kd_collector *c)
{
	free(c->stack);
	c->stack = NULL;
}
