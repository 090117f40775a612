/*
 * out-summary.c - --format summary, and the summary the text formats print
 * first (text, stats, explain; the others on stderr with -v): file,
 * process, clock, window, per-core and per-thread activity, losses,
 * damage, trigger, requests, the budget; and for several files, the list
 * of them on one time axis (kd_out_summary_merged).
 */
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "kd_sched.h"
#include "kd_time.h"
#include "merge.h"
#include "names.h"
#include "out-summary.h"
#include "requests.h"
#include "result.h"
#include "sink.h"
#include "snap.h"
#include "util.h"

static const char *clock_name(uint32_t c)
{
	switch (c) {
	case KTRACE_CLOCK_TSC: return "invariant TSC";
	case KTRACE_CLOCK_CNTVCT: return "aarch64 virtual counter";
	case KTRACE_CLOCK_MONOTONIC: return "CLOCK_MONOTONIC fallback";
	default: return "unknown clock";
	}
}

static void fmt_secs(uint64_t ns, char *buf, size_t len)
{
	snprintf(buf, len, "%.6f s", (double)ns / 1e9);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The function table's use: compact ids the snapshot's FUNCS section gave
 * out, and the functions in the window recorded past them, by address. */
static void func_table(FILE *f, const struct kd_dec *d)
{
	const struct kd_snap *s = &d->snap;
	uint64_t *known = kd_xmalloc(KTRACE_FUNC_ID_COUNT * sizeof(*known), "the function table");
	uint32_t n = 0, past = 0;

	for (uint32_t i = 0; i < KTRACE_FUNC_ID_COUNT; i++)
		if (s->func_known[i])
			known[n++] = s->func_addr[i];
	qsort(known, n, sizeof(*known), cmp_u64);
	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (d->funcs[i].kind == KD_FUNC_ADDR &&
		    !bsearch(&d->funcs[i].addr, known, n, sizeof(*known), cmp_u64))
			past++;
	fprintf(f, "functions: %" PRIu32 " of %u compact ids used", n, KTRACE_FUNC_ID_COUNT);
	if (past)
		fprintf(f, "; %" PRIu32 " functions in the window came past them, recorded by "
		           "address (4 words per event instead of 1, never muted or excluded)", past);
	else
		fprintf(f, " (past them, functions are recorded by address: 4 words per event "
		           "instead of 1, never muted or excluded)");
	fprintf(f, "\n");
	free(known);
}

void kd_out_summary(FILE *f, const struct kd_dec *d)
{
	const struct kd_snap *s = &d->snap;
	const struct ktrace_info_rec *in = &s->info;
	char a[64], b[64], c[64], lbl[64];
	uint64_t ntb = 0, nte = 0, nel = 0;
	uint32_t quiet_exited = 0;   /* exited threads without events in the window */

	fprintf(f, "file:      %s\n", d->file);
	fprintf(f, "process:   pid %" PRIu32 "  exe %s  host %s\n", in->pid,
	        in->exe[0] ? in->exe : "?", in->hostname[0] ? in->hostname : "?");
	fprintf(f, "reason:    %s  (snapshot #%" PRIu32 " of this process)\n",
	        in->reason[0] ? in->reason : "?", in->snapshot_seq);
	if (in->flags & KTRACE_INFO_SIGNAL_TAKEN) {
		const char *sn = in->signo > 0 && in->signo < 65 ? sigabbrev_np(in->signo) : NULL;
		char nm[32];

		if (sn)
			snprintf(nm, sizeof(nm), "SIG%s, %" PRId32, sn, in->signo);
		else
			snprintf(nm, sizeof(nm), "signal %" PRId32, in->signo);
		fprintf(f, "signal:    the program took over the snapshot signal (%s): its own "
		           "handler replaced ktrace's, so that signal wrote no file; set "
		           "KTRACE_SIGNAL to a signal it does not use (e.g. RTMIN+5)\n", nm);
	}
	if (in->flags & KTRACE_INFO_LEAN_NO_PATCH)
		fprintf(f, "lean:      the code could not be made writable (a W^X policy): muted "
		           "functions were skipped in the hooks, not patched out\n");
	else if (in->flags & KTRACE_INFO_LEAN)
		fprintf(f, "lean:      lean-mode functions: muted ones patched out to nops\n");
	if (s->have_lean) {
		const struct ktrace_lean_rec *l = &s->lean;

		fprintf(f, "           %" PRIu32 " lean functions seen, %" PRIu32 " of them patched "
		        "out now (%" PRIu64 " entry and exit sites nops); %" PRIu64 " site writes in %"
		        PRIu64 " batch%s, %.3f ms on the writer thread",
		        l->funcs, l->funcs_out, l->nop_sites, l->site_writes, l->batches,
		        l->batches == 1 ? "" : "es", (double)l->batch_ns / 1e6);
		if (l->site_failures)
			fprintf(f, "; %" PRIu64 " sites could not be written", l->site_failures);
		fprintf(f, "\n");
		if (l->flags & KTRACE_LEAN_BOTH_MODES)
			fprintf(f, "           some functions were compiled with -finstrument-functions "
			           "too: recorded once (by the lean hooks), but each call pays both; "
			           "compile them with the lean flags alone\n");
	}
	kd_time_fmt_wall(in->snapshot_realtime_ns, 1, a, sizeof(a));
	fprintf(f, "snapshot:  %s UTC", a);
	if (in->prev_write_end_tsc) {
		kd_time_fmt_wall(kd_time_snap_wall_ns(s, in->prev_write_end_tsc), 0, b, sizeof(b));
		fprintf(f, " (previous file done %s: requests begun before it cannot trigger)", b);
	}
	fprintf(f, "\n");
	fprintf(f, "clock:     %.6f MHz %s, tsc_shift %" PRIu32 " (%.1f ns per tick), %" PRIu32
	           " anchors\n", (double)in->tsc_hz / 1e6, clock_name(in->clock_source),
	        in->tsc_shift, (double)((uint64_t)1 << in->tsc_shift) * 1e9 / (double)in->tsc_hz,
	        s->nanchors);
	if (s->wall_steps) {
		kd_time_fmt_wall(kd_time_snap_wall_ns(s, s->wall_step_max_tsc), 0, a, sizeof(a));
		fprintf(f, "wallclock: the wall clock stepped %" PRIu32 " time%s while recording "
		           "(largest %+.3f s, before %s UTC; %+.3f s in all): times map through "
		           "the monotonic clock, at the wall-clock offset of the snapshot\n",
		        s->wall_steps, s->wall_steps == 1 ? "" : "s",
		        (double)s->wall_step_max_ns / 1e9, a, (double)s->wall_step_ns / 1e9);
	}
	fprintf(f, "rings:     %" PRIu32 " cpus, %" PRIu64 " bytes per core\n", in->ncpus,
	        in->ring_bytes_per_core);

	kd_time_fmt_wall(kd_time_wall_ns(d, d->window_start), 0, a, sizeof(a));
	kd_time_fmt_wall(kd_time_wall_ns(d, d->window_end), 0, b, sizeof(b));
	fmt_secs(kd_time_ticks_ns(d, d->window_end - d->window_start), c, sizeof(c));
	fprintf(f, "window:    %s .. %s UTC (%s)%s\n", a, b, c,
	        d->opts.all ? ", --all: includes partial data" :
	        d->window_limited ? ", complete window (wrapped rings lost older data)" : "");
	kd_range_note(f, d);
	if (d->dropped) {
		fprintf(f, "dropped:   %" PRIu64 " older records before the complete window "
		           "(stacks there may be incomplete; --all keeps them):", d->dropped);
		for (uint32_t i = 0; i < s->ncores; i++)
			if (d->core_stats[i].dropped)
				fprintf(f, " cpu%" PRIu32 " %" PRIu64, s->cores[i].cpu,
				        d->core_stats[i].dropped);
		fprintf(f, "\n");
	}

	if (d->dropped_after) {
		fprintf(f, "cut:       %" PRIu64 " newer records after the first core's copy "
		           "(another core may lack its records of that time; --all keeps them):",
		        d->dropped_after);
		for (uint32_t i = 0; i < s->ncores; i++)
			if (d->core_stats[i].dropped_after)
				fprintf(f, " cpu%" PRIu32 " %" PRIu64, s->cores[i].cpu,
				        d->core_stats[i].dropped_after);
		fprintf(f, "\n");
	}

	fprintf(f, "cores:\n  %5s  %-18s  %-18s  %12s  %10s  %12s  %s\n", "cpu", "first (UTC)",
	        "last (UTC)", "span", "events", "events/s", "ring");
	for (uint32_t i = 0; i < s->ncores; i++) {
		const struct kd_dec_core_stats *cs = &d->core_stats[i];
		const struct kd_snap_core *co = &s->cores[i];
		uint64_t span, rate;

		if (!cs->has_data) {
			fprintf(f, "  %5" PRIu32 "  %-18s  %-18s  %12s  %10s  %12s  %s\n", co->cpu, "-",
			        "-", "-", "0", "-", co->wrapped ? "wrapped" : "not wrapped");
			continue;
		}
		span = kd_time_ticks_ns(d, cs->last_tick - cs->first_tick);
		/* the rate is over the part of the span inside the window */
		rate = cs->last_tick > d->window_start ?
		       kd_time_ticks_ns(d, cs->last_tick - (cs->first_tick > d->window_start ?
		                                                cs->first_tick : d->window_start)) : 0;
		kd_time_fmt_wall(kd_time_wall_ns(d, cs->first_tick), 0, a, sizeof(a));
		kd_time_fmt_wall(kd_time_wall_ns(d, cs->last_tick), 0, b, sizeof(b));
		fmt_secs(span, c, sizeof(c));
		fprintf(f, "  %5" PRIu32 "  %-18s  %-18s  %12s  %10" PRIu64 "  %12.0f  %s", co->cpu, a,
		        b, c, cs->events, rate ? (double)cs->events * 1e9 / (double)rate : 0.0,
		        co->wrapped ? "wrapped" : "not wrapped");
		if (cs->damaged_tails)
			fprintf(f, ", %" PRIu32 " damaged block tails", cs->damaged_tails);
		fprintf(f, "\n");
	}

	fprintf(f, "threads:\n  %8s  %-16s  %10s  %s\n", "tid", "name", "events", "state");
	for (uint32_t i = 0; i < d->nthreads; i++) {
		const struct kd_dec_thread *t = &d->threads[i];

		if (!t->known && !t->events)
			continue; /* only seen outside the window */
		/* Exited, or only seen in context switches (slot 0: not in
		 * THREADS, e.g. left out of the file as exited before the
		 * window), with no events: one line for all of them, below. */
		if (!t->events && ((t->flags & KTRACE_THREAD_EXITED) || t->slot == 0)) {
			quiet_exited++;
			continue;
		}
		if (t->known)
			fprintf(f, "  %8" PRId32 "  %-16s  %10" PRIu64 "  %s%s\n", t->tid,
			        t->name[0] ? t->name : "?", t->events,
			        (t->flags & KTRACE_THREAD_EXITED) ? "exited" : "alive",
			        (t->flags & KTRACE_THREAD_MAIN) ? ", main" : "");
		else
			fprintf(f, "  %8s  %-16s  %10" PRIu64 "  %s\n", "?", t->name, t->events,
			        "not in THREADS");
	}
	if (quiet_exited)
		fprintf(f, "  (%" PRIu32 " threads with no events in the window not listed: "
		           "exited, or seen only in context switches)\n", quiet_exited);
	if (in->threads_omitted)
		fprintf(f, "  (%" PRIu32 " threads that exited before the window are not in the "
		           "file)\n", in->threads_omitted);

	/* A frame closed by an outer frame's exit (longjmp, or an exit record
	 * lost) is not "at the end": it is counted apart.  Counted by the walk
	 * (build.c), so streamed formats have them too. */
	ntb = d->counts.trunc_begin;
	nte = d->counts.trunc_end;
	nel = d->counts.exit_lost;
	fprintf(f, "decoded:   %" PRIu64 " records, %" PRIu64 " calls (%" PRIu64
	           " truncated at the window start, %" PRIu64 " at the end", d->events,
	        d->counts.calls, ntb, nte);
	if (nel)
		fprintf(f, ", %" PRIu64 " exits lost: closed by an outer frame's exit (longjmp?)",
		        nel);
	fprintf(f, "), %" PRIu32 " requests, %" PRIu32 " marks, %" PRIu32 " functions\n",
	        d->nreqs, d->nmarks, d->nfuncs);
	func_table(f, d);

	fprintf(f, "losses:   ");
	if (s->have_loss) {
		int any = 0;

		for (unsigned i = 0; i < KTRACE_LOSS_COUNT; i++) {
			const char *n = kd_read_loss_name(i);

			if (!s->loss.count[i])
				continue;
			if (n)
				fprintf(f, "%s %s %" PRIu64, any ? "," : "", n, s->loss.count[i]);
			else
				fprintf(f, "%s cause %u %" PRIu64, any ? "," : "", i, s->loss.count[i]);
			any = 1;
		}
		fprintf(f, "%s\n", any ? "" : " none");
	} else {
		fprintf(f, " unknown (no LOSS section)\n");
	}
	{
		uint32_t tails = 0;

		for (uint32_t i = 0; i < s->ncores; i++)
			tails += d->core_stats[i].damaged_tails;
		fprintf(f, "damage:    %" PRIu32 " blocks skipped, %" PRIu32 " unreadable, %" PRIu32
		           " block tails cut, %" PRIu64 " lost exits, %" PRIu64 " warnings\n",
		        s->damaged_blocks, s->unreadable_blocks, tails, d->lost_exits, s->warn.total);
	}
	{
		char sl[512];

		kd_sched_status(d, sl, sizeof(sl));
		fprintf(f, "%s\n", sl);
	}
	if (s->have_trigger) {
		const struct ktrace_trigger_rec *t = &s->trigger;

		kd_time_fmt_dur(t->duration_ns, a, sizeof(a));
		kd_time_fmt_dur(t->threshold_ns, b, sizeof(b));
		if (t->why == KTRACE_TRIGGER_PERCENTILE)
			snprintf(c, sizeof(c), "p%.3g of %" PRIu32 " earlier",
			         t->percentile_x1000 / 1000.0, t->samples);
		else
			snprintf(c, sizeof(c), "absolute");
		if (d->trigger_req != KD_NONE &&
		    (s->hdr.version >= 2 || (d->reqs[d->trigger_req].id >> 32)))
			fprintf(f, "trigger:   slow \"%s\" request %s on tid %" PRId32 ": %s > %s (%s)",
			        t->kind, kd_names_req_id(&d->reqs[d->trigger_req], lbl, sizeof(lbl)),
			        t->tid, a, b, c);
		else /* format 1 with a small id (written before ids were slot.seq) */
			fprintf(f, "trigger:   slow \"%s\" request id %" PRIu64 " on tid %" PRId32
			           ": %s > %s (%s)", t->kind, t->request_id, t->tid, a, b, c);
		if (d->trigger_req != KD_NONE)
			fprintf(f, ", on thread %s",
			        kd_names_thread(d, d->reqs[d->trigger_req].thread, lbl,
			                                 sizeof(lbl)));
		if (t->suppressed)
			fprintf(f, ", %" PRIu64 " triggers suppressed", t->suppressed);
		if (t->flags & KTRACE_TRIGGER_SCHED_KNOWN) {
			kd_time_fmt_dur(t->preempted_ns, a, sizeof(a));
			kd_time_fmt_dur(t->blocked_ns, b, sizeof(b));
			fprintf(f, "; preempted %s (%" PRIu32 " times), blocked %s", a, t->npreempt, b);
		}
		if (t->trigger_on == KTRACE_TRIGGER_ON_RUN)
			fprintf(f, "; compared %s", t->flags & KTRACE_TRIGGER_RUN_FELL_BACK
			        ? "wall time (preempted time unknown)" : "run time (wall - preempted)");
		fprintf(f, "\n");
	} else {
		fprintf(f, "trigger:   none\n");
	}
	{
		uint64_t held = 0;

		for (uint32_t i = 0; i < s->ncores; i++)
			held += d->core_stats[i].held;
		if (held)
			fprintf(f, "held:      %" PRIu64 " records of kept requests, held aside while "
			           "they ran and written when they ended (not counted as the cores' "
			           "events above)\n", held);
	}
	kd_requests_lines(f, d, "");
	kd_budget_lines(f, d);
}

/* ---- several files ------------------------------------------------------- */

/* "exe pid N @ host" of a file. */
static const char *proc_label(const struct kd_dec *d, char *buf, size_t len)
{
	const char *exe = strrchr(d->snap.info.exe, '/');

	exe = exe ? exe + 1 : (d->snap.info.exe[0] ? d->snap.info.exe : "process");
	snprintf(buf, len, "%s pid %" PRIu32 " @ %s", exe, d->snap.info.pid,
	         d->snap.info.hostname[0] ? d->snap.info.hostname : "?");
	return buf;
}

void kd_out_summary_merged(FILE *f, struct kd_dec *const *decs, uint32_t n)
{
	int64_t base = kd_merge_origin(decs, n);
	char a[48], b[48], o[32], lbl[400], cut[48];

	kd_time_fmt_wall(base, 1, a, sizeof(a));
	fprintf(f, "\nmerged timeline of %" PRIu32 " files, on CLOCK_REALTIME from each file's "
	           "anchors, starting %s UTC:\n", n, a);
	for (uint32_t i = 0; i < n; i++) {
		const struct kd_dec *d = decs[i];
		int64_t s;

		if (!d)
			continue;
		s = kd_time_wall_ns(d, d->window_start);
		kd_time_fmt_wall(s, 0, a, sizeof(a));
		kd_time_fmt_wall(kd_time_wall_ns(d, d->window_end), 0, b, sizeof(b));
		kd_time_fmt_dur(s > base ? (uint64_t)(s - base) : 0, o, sizeof(o));
		fprintf(f, "  [%" PRIu32 "] %s: %s, window %s .. %s UTC (+%s), clock offset used "
		           "+0 ns (%" PRIu32 " anchors)\n",
		        i + 1, d->file, proc_label(d, lbl, sizeof(lbl)), a, b, o, d->snap.nanchors);
		if (d->merge.cut) {
			kd_time_fmt_wall(kd_time_wall_ns(d, d->merge.cut), 0, cut, sizeof(cut));
			fprintf(f, "      overlaps an earlier snapshot of process group %" PRIu32
			           " up to %s: %" PRIu64 " calls it holds left out here, %" PRIu64
			           " frames open across the cut joined\n",
			        d->merge.group, cut, d->merge.dropped, d->merge.joined);
		}
	}
	fprintf(f, "  (hosts' clocks are taken as they are: a skew between hosts shows in the "
	           "timeline)\n");
}
