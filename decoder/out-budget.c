/*
 * out-budget.c - what the window budget did (section BUDGET), for every
 * sink: the summary's lines, the note that muted calls are in their
 * callers' self time, and --format exclude (compiler flags that take the
 * muted functions out of the instrumentation).
 *
 * A muted function's calls after its muting are not in the window: their
 * time is counted in the self time of the recorded frame that called
 * them.  Every sink that shows self time says so, by name.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decoder.h"

int kd_dec_muted(const struct kd_dec *d, uint32_t func)
{
	const struct kd_dec_func *fn;

	if (func >= d->nfuncs)
		return -1;
	fn = &d->funcs[func];
	if (fn->kind != KD_FUNC_ADDR)
		return -1;
	for (uint32_t i = 0; i < d->snap.nmuted; i++)
		if (d->snap.muted[i].addr == fn->addr)
			return (int)i;
	return -1;
}

/* Func index of muted entry i, or KD_NONE. */
static uint32_t muted_func(const struct kd_dec *d, uint32_t i)
{
	for (uint32_t f = 0; f < d->nfuncs; f++)
		if (d->funcs[f].kind == KD_FUNC_ADDR && d->funcs[f].addr == d->snap.muted[i].addr)
			return f;
	return KD_NONE;
}

static const char *muted_name(const struct kd_dec *d, uint32_t i, char *buf, size_t len)
{
	uint32_t f = muted_func(d, i);

	if (f != KD_NONE)
		return kd_dec_func_name(d, f);
	snprintf(buf, len, "0x%" PRIx64, d->snap.muted[i].addr);
	return buf;
}

static void fmt_ms(uint64_t ms, char *buf, size_t len)
{
	if (ms >= UINT64_MAX / 4)
		snprintf(buf, len, "unbounded");
	else
		snprintf(buf, len, "%.1f s", (double)ms / 1000.0);
}

void kd_out_budget(FILE *f, const struct kd_dec *d)
{
	const struct kd_snap *s = &d->snap;
	const struct ktrace_budget_rec *b = &s->budget;
	uint64_t held = UINT64_MAX, events = 0;
	int projected = 0;
	char a[64], nb[64];

	if (!s->have_budget)
		return;
	fprintf(f, "budget:    window target %" PRIu32 " s, ring %" PRIu64 " MiB per core: "
	           "sustainable %" PRIu64 " events/s per core; filter %s",
	        b->window_s, b->ring_bytes_per_core >> 20, b->sustainable_wps,
	        (b->flags & KTRACE_BUDGET_FILTER_ON) ? "auto" : "off");
	if (b->flags & KTRACE_BUDGET_FILTER_ON)
		fprintf(f, " (a function with a call >= %" PRIu32 " us is never muted)", b->max_us);
	fprintf(f, "\n           rate per core (last second):");
	for (uint32_t c = 0; c < b->ncores; c++) {
		const struct ktrace_budget_core_rec *cr = &s->budget_cores[c];
		if (!cr->rate_wps && !cr->window_ms)
			continue;
		fmt_ms(cr->window_ms, a, sizeof(a));
		fprintf(f, " cpu%" PRIu32 " %" PRIu64 "/s (holds %s%s)", cr->cpu, cr->rate_wps, a,
		        (cr->flags & KTRACE_BUDGET_CORE_PROJECTED) ? ", projected" : "");
		if (cr->window_ms < held) {
			held = cr->window_ms;
			projected = !!(cr->flags & KTRACE_BUDGET_CORE_PROJECTED);
		}
	}
	fmt_ms(held, a, sizeof(a));
	fprintf(f, "\n           window held: %s%s (target %" PRIu32 " s)%s\n", a,
	        projected ? ", projected from the recent rate (the ring has not wrapped yet)" : "",
	        b->window_s,
	        held != UINT64_MAX && held < (uint64_t)b->window_s * 1000 ? ": SHORT" : "");
	if (b->flags & KTRACE_BUDGET_SHORT)
		fprintf(f, "           the window cannot hold its target even with every candidate "
		           "muted: KTRACE_BUFFER_MB=%" PRIu64 " would hold it\n",
		        b->ring_needed_bytes >> 20);
	if (!s->nmuted) {
		fprintf(f, "muted:     none\n");
		return;
	}
	for (uint32_t i = 0; i < s->nmuted; i++)
		events += s->muted[i].why == KTRACE_MUTE_HOT_SHORT ? s->muted[i].events_before : 0;
	fprintf(f, "muted:     %" PRIu32 " functions (their calls are not in the window after "
	           "muting; their time is in their callers' self time); %" PRIu64
	           " calls skipped since\n", s->nmuted, b->muted_calls);
	for (uint32_t i = 0; i < s->nmuted; i++) {
		const struct ktrace_muted_rec *m = &s->muted[i];
		char since[64], mx[32];

		kd_fmt_wall(kd_snap_wall_ns(s, m->since_tsc), 0, since, sizeof(since));
		kd_fmt_dur(m->max_ns, mx, sizeof(mx));
		if (m->why == KTRACE_MUTE_EXCLUDE)
			fprintf(f, "  %-28s excluded by KTRACE_EXCLUDE (first call %s UTC)\n",
			        muted_name(d, i, nb, sizeof(nb)), since);
		else
			fprintf(f, "  %-28s %5.1f%% of events when muted at %s UTC; ~%" PRIu64
			           " events before; %" PRIu64 " calls observed, longest %s\n",
			        muted_name(d, i, nb, sizeof(nb)), (double)m->share_ppm / 1e4, since,
			        m->events_before, m->calls_observed, mx);
	}
}

const char *kd_dec_muted_list(const struct kd_dec *d, char *buf, size_t len)
{
	size_t used = 0;
	char nb[64];

	buf[0] = 0;
	for (uint32_t i = 0; i < d->snap.nmuted && used < len; i++) {
		int k = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
		                 muted_name(d, i, nb, sizeof(nb)));
		if (k < 0)
			break;
		used += (size_t)k;
	}
	return buf;
}

void kd_out_muted_note(FILE *f, const struct kd_dec *d, const char *prefix)
{
	char list[1024];

	if (!d->snap.nmuted)
		return;
	fprintf(f, "%sself time includes muted calls: %s (not recorded after muting: see the "
	           "summary's \"muted\" lines)\n", prefix ? prefix : "",
	        kd_dec_muted_list(d, list, sizeof(list)));
}

/* ---- --format exclude --------------------------------------------------- */

struct fcount {
	uint32_t func;
	uint64_t calls;
	uint64_t max_ns;
	char name[128];     /* the source-level name: symbol up to its first '.' */
};

static int by_calls(const void *a, const void *b)
{
	const struct fcount *x = a, *y = b;
	return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : 0;
}

void kd_out_exclude(FILE *f, const struct kd_dec *d)
{
	uint64_t max_ns = (d->snap.have_budget ? d->snap.budget.max_us : 5) * 1000ull, total = 0;
	struct fcount *fc = calloc(d->nfuncs + 1, sizeof(*fc));
	uint32_t *pick = calloc(d->nfuncs + 1, sizeof(*pick)), npick = 0, nout = 0;
	const char *src = "muted";

	if (!fc || !pick) {
		fprintf(stderr, "ktrace-decode: out of memory\n");
		goto out;
	}
	for (uint32_t i = 0; i < d->nfuncs; i++) {
		const char *n = kd_dec_func_name(d, i);
		size_t k = strcspn(n, ".");
		fc[i].func = i;
		snprintf(fc[i].name, sizeof(fc[i].name), "%.*s", (int)(k < 127 ? k : 127), n);
	}
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		uint64_t ns = kd_dec_ticks_ns(d, c->end - c->begin);
		if (c->flags & KD_CALL_SPAN)
			continue;
		fc[c->func].calls++;
		total++;
		if (ns > fc[c->func].max_ns)
			fc[c->func].max_ns = ns;
	}
	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (kd_dec_muted(d, i) >= 0 && d->funcs[i].kind == KD_FUNC_ADDR)
			pick[npick++] = i;
	if (npick == 0) {
		/* No muting: the hottest functions whose calls were all short,
		 * each at least 1% of the calls in the window. */
		struct fcount *sorted = malloc((d->nfuncs + 1) * sizeof(*sorted));
		src = "hottest short";
		if (sorted) {
			memcpy(sorted, fc, d->nfuncs * sizeof(*sorted));
			qsort(sorted, d->nfuncs, sizeof(*sorted), by_calls);
			for (uint32_t i = 0; i < d->nfuncs && npick < 32; i++)
				if (sorted[i].calls * 100 >= total && sorted[i].calls > 0 &&
				    sorted[i].max_ns < max_ns &&
				    d->funcs[sorted[i].func].kind == KD_FUNC_ADDR &&
				    strncmp(fc[sorted[i].func].name, "0x", 2) != 0)
					pick[npick++] = sorted[i].func;
			free(sorted);
		}
	}
	fprintf(stderr, "ktrace-decode: %s: %" PRIu32 " %s functions; GCC excludes every function "
	        "whose name contains a listed name:\n", d->file, npick, src);
	for (uint32_t i = 0; i < npick; i++) {
		const struct fcount *p = &fc[pick[i]];
		int drop = 0, dup = 0;

		for (uint32_t j = 0; j < i; j++)
			dup |= strcmp(fc[pick[j]].name, p->name) == 0;
		if (dup || !p->name[0] || strncmp(p->name, "0x", 2) == 0)
			continue;
		for (uint32_t k = 0; k < d->nfuncs; k++) {
			const struct fcount *o = &fc[k];
			if (k == pick[i] || strcmp(o->name, p->name) == 0 || !strstr(o->name, p->name))
				continue;
			if (o->max_ns >= max_ns && kd_dec_muted(d, k) < 0) {
				char mx[32];
				kd_fmt_dur(o->max_ns, mx, sizeof(mx));
				fprintf(stderr, "  %s: left out: it would also exclude %s, which made a "
				        "call of %s\n", p->name, o->name, mx);
				drop = 1;
			} else {
				fprintf(stderr, "  %s: would also exclude %s (%" PRIu64 " calls in the "
				        "window, all short)\n", p->name, o->name, o->calls);
			}
		}
		if (drop)
			continue;
		fprintf(f, "%s%s", nout++ ? "," : "-finstrument-functions-exclude-function-list=",
		        p->name);
	}
	if (nout)
		fprintf(f, "\n");
	else
		fprintf(stderr, "  (nothing to exclude)\n");
out:
	free(fc);
	free(pick);
}
