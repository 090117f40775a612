/*
 * trigq.c - triggers on their way to the writer.
 *
 * A trigger (trigger.c, on the thread that ended a slow request) stores
 * its record under trig_mu (held for a copy of ~100 bytes, never across
 * I/O) with a due time; the writer waits until then so the aftermath is
 * in the window.  Rate limit: at most KTRACE_MAX_SNAPSHOTS_PER_MIN trigger
 * files in any 60 s; a trigger while one is pending or over the limit is
 * counted and reported in the next file.  With KTRACE_TRIGGER_ON=run the
 * triggers wait in a queue of their own until their run time is known
 * ("Trigger on run time" below).
 *
 * Lock: trig_mu, a leaf (snapshot.h): nothing else is taken under it, and
 * the run-time check, which drains the context-switch records, runs
 * outside it.
 */
#include "snapshot.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t trig_mu = PTHREAD_MUTEX_INITIALIZER;
static int trig_pending;               /* under trig_mu */
static struct ktrace_trigger_rec trig_rec; /* under trig_mu */
static int64_t trig_due_ns;            /* under trig_mu: monotonic */
static uint64_t trig_suppressed;       /* under trig_mu */
static int64_t trig_times[600];        /* under trig_mu: recent trigger files */
static uint32_t trig_times_n;          /* under trig_mu */
/* KTRACE_TRIGGER_ON=run: triggers whose run time is not known yet wait
 * here (several: one that turns out to be mostly preemption must not hide
 * a genuinely slow one that ended during its delay).  See "Trigger on run
 * time" below. */
#define KT_RUN_QUEUE 8
static struct ktrace_trigger_rec run_q[KT_RUN_QUEUE]; /* under trig_mu */
static int64_t run_due[KT_RUN_QUEUE];  /* under trig_mu: monotonic ns */
static uint32_t run_n;                 /* under trig_mu */

/* ---- trigger on run time ----------------------------------------------------- */

/*
 * A request's wall time on a busy host includes time it was runnable but
 * not running (preempted by other work).  Every trigger record carries the
 * preempted and blocked time of the request's thread within [begin, end],
 * from the context-switch records (sched.c), which the writer drains; the
 * writer measures it after the trigger's delay, when the records of the
 * request's end are in.  With KTRACE_TRIGGER_ON=run, a trigger whose wall
 * time minus preempted time is not over its threshold is dropped there,
 * before the rate limit (it takes no file token), and counted
 * (KTRACE_LOSS_TRIGGERS_PREEMPTED).  Where switches are not recorded (off,
 * refused, or records lost in the interval), the wall time decides and the
 * record says so (KTRACE_TRIGGER_RUN_FELL_BACK).
 */

/* Fill the record's scheduling fields; 1 if they were measured. */
static KT_NOINSTR int trigger_sched_fill(struct ktrace_trigger_rec *t)
{
	int64_t from = ktrace__counter_to_mono_ns(t->begin_tsc);
	int64_t to = ktrace__counter_to_mono_ns(t->end_tsc);
	int64_t blocked = 0, pre;
	uint32_t np = 0;

	t->trigger_on = kt_load_cfg(trigger_on);
	pre = ktrace__sched_request_preempted_ns(t->tid, from, to, &np, &blocked);
	if (pre < 0)
		return 0;
	t->preempted_ns = (uint64_t)pre;
	t->blocked_ns = (uint64_t)blocked;
	t->npreempt = np;
	t->flags |= KTRACE_TRIGGER_SCHED_KNOWN;
	return 1;
}

/* Run mode: 1 if the request was slow for what it did itself. */
static KT_NOINSTR int trigger_run_slow(struct ktrace_trigger_rec *t)
{
	if (!trigger_sched_fill(t)) {
		t->flags |= KTRACE_TRIGGER_RUN_FELL_BACK;
		ktrace__warn_once(KT_WARN_TRIGGER_RUN, "KTRACE_TRIGGER_ON=run: the preempted time of a slow request "
		                  "is unknown (context switches are %s); its trigger compares wall "
		                  "time", ktrace__sched_info_flags() ? "lost in its interval"
		                  : "not recorded: see KTRACE_SCHED and perf_event_paranoid");
		return 1;
	}
	return t->duration_ns > t->preempted_ns &&
	       t->duration_ns - t->preempted_ns > t->threshold_ns;
}

/* Under trig_mu: forget the trigger files written more than 60 s before
 * now_ns; 1 if one more is within max. */
static KT_NOINSTR int trig_rate_room_locked(int64_t now_ns, uint32_t max)
{
	uint32_t keep = 0;

	for (uint32_t i = 0; i < trig_times_n; i++)
		if (now_ns - trig_times[i] < 60 * 1000000000LL)
			trig_times[keep++] = trig_times[i];
	trig_times_n = keep;
	return trig_times_n < max;
}

/* From the request's thread (ktrace__snapshot_request_trigger), under
 * trig_mu: queue a run-mode trigger; 0, or KTRACE_ERATE when the queue is
 * full (then counted as suppressed by the caller). */
static KT_NOINSTR int run_queue_locked(const struct ktrace_trigger_rec *trig, int64_t due)
{
	if (run_n >= KT_RUN_QUEUE) {
		trig_suppressed++;
		return KTRACE_ERATE;
	}
	run_q[run_n] = *trig;
	run_due[run_n] = due;
	run_n++;
	return 0;
}

/* Writer: the oldest run-mode trigger that is due, checked and through the
 * rate limit, into *out; 0 if none.  A check runs outside trig_mu (it
 * drains the context-switch records). */
static KT_NOINSTR int take_run_trigger(struct ktrace_trigger_rec *out, int64_t now_ns,
                                       int64_t *wait_ns)
{
	for (;;) {
		int have = 0, ok;
		uint32_t max = kt_load_cfg(max_per_min);

		pthread_mutex_lock(&trig_mu);
		if (run_n > 0) {
			if (now_ns >= run_due[0]) {
				*out = run_q[0];
				memmove(run_q, run_q + 1, (run_n - 1) * sizeof(run_q[0]));
				memmove(run_due, run_due + 1, (run_n - 1) * sizeof(run_due[0]));
				run_n--;
				have = 1;
			} else if (run_due[0] - now_ns < *wait_ns) {
				*wait_ns = run_due[0] - now_ns;
			}
		}
		pthread_mutex_unlock(&trig_mu);
		if (!have)
			return 0;
		if (!trigger_run_slow(out)) {
			ktrace__count_loss(KTRACE_LOSS_TRIGGERS_PREEMPTED, 1);
			continue;
		}
		/* The rate limit (as ktrace__snapshot_request_trigger's in wall
		 * mode), now that the trigger is known to count. */
		pthread_mutex_lock(&trig_mu);
		ok = trig_rate_room_locked(now_ns, max);
		if (ok) {
			trig_times[trig_times_n++] = now_ns;
			/* The ones queued meanwhile are in this file's window, as a
			 * trigger while one is pending is in wall mode. */
			trig_suppressed += run_n;
			out->suppressed = trig_suppressed;
			trig_suppressed = 0;
			if (run_n)
				ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, run_n);
			run_n = 0;
		} else {
			trig_suppressed++;
		}
		pthread_mutex_unlock(&trig_mu);
		if (ok)
			return 1;
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, 1);
	}
}

/* Writer: the wall-mode trigger, if due now; copies it out under trig_mu. */
static KT_NOINSTR int take_trigger(struct ktrace_trigger_rec *out, int64_t now_ns,
                                   int64_t *wait_ns)
{
	int r = 0;

	pthread_mutex_lock(&trig_mu);
	if (trig_pending) {
		if (now_ns >= trig_due_ns) {
			*out = trig_rec;
			out->suppressed = trig_suppressed;
			trig_suppressed = 0;
			trig_pending = 0;
			r = 1;
		} else if (trig_due_ns - now_ns < *wait_ns) {
			*wait_ns = trig_due_ns - now_ns;
		}
	}
	pthread_mutex_unlock(&trig_mu);
	return r;
}

/*
 * From trigger.c on the thread that ended a slow request.  Never blocks on
 * I/O: a short critical section under trig_mu, then a futex wake.
 * Rate limit: at most max_per_min trigger files in any 60 s; a trigger
 * while one is pending or over the limit is counted and reported in the
 * next file (ktrace_trigger_rec.suppressed, and the loss counters).
 */
KT_NOINSTR int ktrace__snapshot_request_trigger(const struct ktrace_trigger_rec *trig,
                                                uint32_t delay_ms)
{
	int64_t now = ktrace__monotonic_ns();
	uint32_t max = kt_load_cfg(max_per_min);
	int r = 0, room;

	if (!ktrace__writer_ready())
		return KTRACE_ENOTREADY;
	pthread_mutex_lock(&trig_mu);
	if (kt_load_cfg(trigger_on) == KTRACE_TRIGGER_ON_RUN) {
		/* Checked and rate-limited by the writer (take_run_trigger). */
		r = run_queue_locked(trig, now + (int64_t)delay_ms * 1000000);
		pthread_mutex_unlock(&trig_mu);
		goto done;
	}
	room = trig_rate_room_locked(now, max);
	if (trig_pending || !room) {
		trig_suppressed++;
		r = KTRACE_ERATE;
	} else {
		trig_rec = *trig;
		trig_due_ns = now + (int64_t)delay_ms * 1000000;
		trig_pending = 1;
		trig_times[trig_times_n++] = now;
	}
	pthread_mutex_unlock(&trig_mu);
done:
	if (r == 0)
		ktrace__writer_wake();
	else
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, 1);
	return r;
}

/* Writer, every turn: a wall-mode trigger that is due (its scheduling
 * fields filled, for information), else a run-mode one that is due and
 * counts. */
KT_NOINSTR int ktrace__trigq_take(struct ktrace_trigger_rec *out, int64_t now_ns,
                                  int64_t *wait_ns)
{
	int have = take_trigger(out, now_ns, wait_ns);

	if (have)
		trigger_sched_fill(out);   /* informational in wall mode */
	else
		have = take_run_trigger(out, now_ns, wait_ns);
	return have;
}

/* The exit wait: a trigger not written yet. */
KT_NOINSTR int ktrace__trigq_pending(void)
{
	int p;

	pthread_mutex_lock(&trig_mu);
	p = trig_pending || run_n;
	pthread_mutex_unlock(&trig_mu);
	return p;
}

/* Fork child: trig_mu may have been held by a parent thread; start over
 * with a fresh one and empty queues (the parent's triggers are its own). */
KT_NOINSTR void ktrace__trigq_fork_child(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

	memcpy(&trig_mu, &m, sizeof(m));
	trig_pending = 0;
	trig_suppressed = 0;
	trig_times_n = 0;
	run_n = 0;
}
