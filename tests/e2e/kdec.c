/*
 * kdec.c - see kdec.h.
 */
#include "kdec.h"

#include <stdio.h>
#include <string.h>

struct kd_dec *kd_open(const char *path)
{
	struct kd_dec *d = NULL;
	struct kd_dec_error err;
	struct kd_dec_opts o;
	char msg[512];

	memset(&o, 0, sizeof(o));
	if (kd_dec_open_file(path, &o, &d, &err) != 0) {
		kd_util_error_format(&err, path, msg, sizeof(msg));
		fprintf(stderr, "%s\n", msg);
		return NULL;
	}
	return d;
}

uint32_t kd_thread(const struct kd_dec *d, const char *name)
{
	for (uint32_t i = 0; i < d->nthreads; i++)
		if (strcmp(d->threads[i].name, name) == 0)
			return i;
	return KD_NONE;
}

uint32_t kd_thread_tid(const struct kd_dec *d, int32_t tid)
{
	for (uint32_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].tid == tid)
			return i;
	return KD_NONE;
}

const char *kd_func(const struct kd_dec *d, const struct kd_dec_call *c)
{
	const char *n = kd_names_func(d, c->func);
	return n ? n : "?";
}

int kd_is(const struct kd_dec *d, const struct kd_dec_call *c, const char *name)
{
	return strcmp(kd_func(d, c), name) == 0;
}

uint64_t kd_count(const struct kd_dec *d, uint32_t thread, const char *func)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		if ((thread == KD_NONE || c->thread == thread) && kd_is(d, c, func))
			n++;
	}
	return n;
}

uint64_t kd_count_flags(const struct kd_dec *d, uint32_t flags)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < d->ncalls; i++)
		if (d->calls[i].flags & flags)
			n++;
	return n;
}

uint64_t kd_ns(const struct kd_dec *d, const struct kd_dec_call *c)
{
	return kd_time_ticks_ns(d, c->end - c->begin);
}

const char *kd_name(const struct kd_dec *d, uint32_t id)
{
	const char *s = kd_snap_name(&d->snap, id);
	return s ? s : "";
}

const struct ktrace_muted_rec *kd_muted(const struct kd_dec *d, const char *name)
{
	for (uint32_t f = 0; f < d->nfuncs; f++) {
		int m = kd_budget_muted(d, f);

		if (m >= 0 && strcmp(kd_names_func(d, f), name) == 0)
			return &d->snap.muted[m];
	}
	return NULL;
}
