/*
 * filter.c - the identity filter on the event stream: forwards every event
 * to the next sink.  A new filter starts from this (stream.h's rules).
 */
#include "filter.h"
#include "stream.h"

static void pass_ev(void *ctx, const struct kd_dec *d, const struct kd_ev *e)
{
	struct kd_filter_pass *f = ctx;

	if (f->next.ev)
		f->next.ev(f->next.ctx, d, e);
}

struct kd_sink kd_filter_pass(struct kd_filter_pass *f)
{
	return (struct kd_sink){ pass_ev, f };
}
