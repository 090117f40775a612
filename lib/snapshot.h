/*
 * snapshot.h - the interface between the snapshot files, private to them
 * (internal.h declares what the rest of the library calls).  One file per
 * concern, each owning its state:
 *
 *   snapshot.c   the API: ktrace_snapshot(), ktrace_last_snapshot()
 *   signal.c     the snapshot signal: handler, chaining, sig_pending
 *   trigq.c      triggers waiting for the writer (wall and run mode) and
 *                the trigger rate limit (KTRACE_MAX_SNAPSHOTS_PER_MIN)
 *   ratelimit.c  files and bytes per minute, every path
 *   writer.c     the writer thread: its loop, wake-ups, anchors, start,
 *                fork child, exit wait; one-time messages
 *   snapfile.c   one snapshot file: the copy, sections, whole or nothing;
 *                the writer's memory
 *
 * Locks: api_mu (snapshot.c) and trig_mu (trigq.c) are leaves: never held
 * together, never across I/O (the writer lets api_mu go while it writes a
 * file).  The signal handler takes no lock: it sets sig_pending and wakes
 * the writer (ktrace__writer_wake, async-signal-safe).  In a fork child,
 * ktrace__snapshot_fork_child (writer.c) has each concern reset its own.
 */
#ifndef KTRACE_SNAPSHOT_H
#define KTRACE_SNAPSHOT_H

#include "internal.h"

#pragma GCC visibility push(hidden)

/* writer.c */
void ktrace__writer_wake(void);         /* after a request is set; async-signal-safe */
void ktrace__writer_wake_lazy(int64_t slack_ns);   /* the same, for a request that can wait slack_ns (< 0: none) */
/* Start a fork child's writer if it needs one; 1 if the writer runs. */
int ktrace__writer_ready(void);
int ktrace__writer_is_self(void);       /* 1 on the writer thread; async-signal-safe */
void ktrace__writer_set_writing(int on);  /* a file is being written (the exit wait) */

/* signal.c */
int ktrace__signal_pending(void);       /* the signal asked for a file */
void ktrace__signal_clear(void);        /* the writer took it */
void ktrace__signal_init(void);         /* start-up: install, unless done early */
void ktrace__signal_check(void);        /* writer, about once a second */
int ktrace__signal_installed(void);     /* the signal our handler is on, 0 = none */
int ktrace__signal_taken(void);         /* the program's handler replaced ours */
void ktrace__signal_fork_child(void);

/* trigq.c: the trigger due now, if any, into *out (1), else 0 and *wait_ns
 * lowered to the time until the next one is due. */
int ktrace__trigq_take(struct ktrace_trigger_rec *out, int64_t now_ns, int64_t *wait_ns);
int ktrace__trigq_pending(void);
void ktrace__trigq_fork_child(void);

/* snapshot.c: API requests */
int ktrace__api_pending(void);          /* asked and not done */
void ktrace__api_serve(void);           /* writer: write every file asked for */
void ktrace__api_fork_child(void);

/* ratelimit.c: token buckets of fcap files and bcap bytes a minute */
int ktrace__rate_files_ok(double fcap, double bcap);  /* refills first */
int ktrace__rate_bytes_ok(uint64_t est, double bcap);
void ktrace__rate_debit(uint64_t bytes);              /* a file was written */
int ktrace__rate_refuse(const char *why);             /* counts, says once: KTRACE_ERATE */
void ktrace__rate_fork_child(void);

/* snapfile.c */
void ktrace__snapfile_fork_child(void);

#pragma GCC visibility pop

#endif /* KTRACE_SNAPSHOT_H */
