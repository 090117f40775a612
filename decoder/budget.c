/*
 * budget.c - what the window budget did (section BUDGET), for the sinks:
 * the summary's lines, the muted functions' names, and the note every sink
 * that shows self time prints (muted calls are in their callers' self
 * time).  A helper of the sinks, not a sink: it reads only the decoded
 * result.
 *
 * A muted function's calls after its muting are not in the window: their
 * time is counted in the self time of the recorded frame that called
 * them.  Every sink that shows self time says so, by name.
 */
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "kd_time.h"
#include "names.h"
#include "result.h"
#include "snap.h"
#include "util.h"

int kd_budget_muted(const struct kd_dec *d, uint32_t func)
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

const char *kd_budget_muted_name(const struct kd_dec *d, uint32_t i, char *buf, size_t len)
{
	uint32_t f = muted_func(d, i);

	if (f != KD_NONE)
		return kd_names_func(d, f);
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

void kd_budget_lines(FILE *f, const struct kd_dec *d)
{
	const struct kd_snap *s = &d->snap;
	const struct ktrace_budget_rec *b = &s->budget;
	uint64_t held = UINT64_MAX;
	int projected = 0;
	char a[64], nb[64];

	if (!s->have_budget)
		return;
	fprintf(f, "budget:    window target %" PRIu32 " s, ring %" PRIu64 " MiB per core: "
	           "sustainable %" PRIu64 " events/s per core; filter %s",
	        b->window_s, b->ring_bytes_per_core >> 20, b->sustainable_wps,
	        (b->flags & KTRACE_BUDGET_FILTER_ON) ? "auto" : "off");
	if (b->flags & KTRACE_BUDGET_FILTER_ON)   /* the rule of lib/filter.c candidate() */
		fprintf(f, " (not muted: a function that blocked >= %" PRIu32 " us in a call, nor "
		           "one while 1 in 100 or more of its observed calls took >= %" PRIu32
		           " us, or 1 in 100,000 or more >= %" PRIu32 " us; preempted time not "
		           "counted)",
		        b->max_us, b->max_us, b->max_us * 100);
	if ((b->flags & KTRACE_BUDGET_FILTER_ON) && b->cpu_wps)   /* KTRACE_CPU_PCT */
		fprintf(f, "\n           CPU budget %" PRIu32 " %% of each core: a core recording more "
		           "than %" PRIu64 " events/s is under pressure at once, and then functions "
		           "kept only by long calls are muted too", b->cpu_pct, b->cpu_wps);
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
	fprintf(f, "muted:     %" PRIu32 " functions (their calls are not in the window after "
	           "muting; their time is in their callers' self time); %" PRIu64
	           " calls skipped since\n", s->nmuted, b->muted_calls);
	for (uint32_t i = 0; i < s->nmuted; i++) {
		const struct ktrace_muted_rec *m = &s->muted[i];
		char since[64], mx[32];

		kd_time_fmt_wall(kd_time_snap_wall_ns(s, m->since_tsc), 0, since, sizeof(since));
		if (m->max_ns >= 4000000000u)   /* the library's cap (filter.c) */
			snprintf(mx, sizeof(mx), "4 s or more");
		else
			kd_time_fmt_dur(m->max_ns, mx, sizeof(mx));
		if (m->why == KTRACE_MUTE_EXCLUDE)
			fprintf(f, "  %-28s excluded by KTRACE_EXCLUDE (first call %s UTC)\n",
			        kd_budget_muted_name(d, i, nb, sizeof(nb)), since);
		else
			fprintf(f, "  %-28s %5.1f%% of events when muted at %s UTC; ~%" PRIu64
			           " events before; %" PRIu64 " calls observed, longest %s%s\n",
			        kd_budget_muted_name(d, i, nb, sizeof(nb)), (double)m->share_ppm / 1e4, since,
			        m->events_before, m->calls_observed, mx,
			        m->why == KTRACE_MUTE_HOT_CPU ? " (over the CPU budget: some calls long)"
			                                      : "");
	}
}

const char *kd_budget_muted_list(const struct kd_dec *d, char *buf, size_t len)
{
	size_t used = 0;
	char nb[64], more[48];

	if (!len)
		return buf;
	buf[0] = 0;
	for (uint32_t i = 0; i < d->snap.nmuted; i++) {
		const char *name = kd_budget_muted_name(d, i, nb, sizeof(nb));
		size_t need = (i ? 2 : 0) + strlen(name);
		/* room for the names left, or for saying how many they are */
		size_t tail = i + 1 < d->snap.nmuted
		              ? (size_t)snprintf(more, sizeof(more), " and %" PRIu32 " more",
		                                 d->snap.nmuted - i - 1) : 0;

		if (used + need + tail >= len) {   /* never cut a name */
			snprintf(buf + used, len - used, "%s%s", used ? " and " : "",
			         (snprintf(more, sizeof(more), "%" PRIu32 " more",
			                   d->snap.nmuted - i), more));
			break;
		}
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", name);
	}
	return buf;
}

void kd_budget_note(FILE *f, const struct kd_dec *d, const char *prefix)
{
	char nb[64];

	if (!d->snap.nmuted)
		return;
	fprintf(f, "%sself time includes muted calls: ", prefix ? prefix : "");
	for (uint32_t i = 0; i < d->snap.nmuted; i++)   /* every name, whole */
		fprintf(f, "%s%s", i ? ", " : "", kd_budget_muted_name(d, i, nb, sizeof(nb)));
	fprintf(f, " (not recorded after muting: see the summary's \"muted\" lines)\n");
}

void kd_budget_note_short(FILE *f, const struct kd_dec *d, const char *prefix, uint32_t max)
{
	char nb[64];

	if (!d->snap.nmuted)
		return;
	fprintf(f, "%sself time includes muted calls of %" PRIu32 " functions: ", prefix,
	        d->snap.nmuted);
	for (uint32_t i = 0; i < d->snap.nmuted && i < max; i++)
		fprintf(f, "%s%s", i ? ", " : "", kd_budget_muted_name(d, i, nb, sizeof(nb)));
	if (d->snap.nmuted > max)
		fprintf(f, ", and %" PRIu32 " more", d->snap.nmuted - max);
	fprintf(f, " (not recorded after muting: the summary's \"muted\" lines list them all)\n");
}
