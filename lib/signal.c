/*
 * signal.c - the snapshot signal (KTRACE_SIGNAL, SIGUSR2 by default).
 *
 * The handler sets sig_pending, increments the writer's wake word and
 * calls FUTEX_WAKE (ktrace__writer_wake: all async-signal-safe), then
 * chains to a handler the program had.  The writer takes the flag and
 * writes the file.  About once a second the writer checks that our
 * handler is still installed (a program that installs its own after ours
 * silently turns the signal into nothing) and says so once.
 *
 * State: sig_pending, the program's previous action, the signal our
 * handler is on and whether the program took it over.  No lock: the
 * handler takes none; install_signal runs at start-up and from
 * ktrace_setting (config.c), as before the split.
 */
#include "snapshot.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

/* Set by the signal handler (a lock-free atomic: async-signal-safe), taken
 * by the writer, read by the exit wait.  relaxed everywhere: the writer's
 * futex word (wake.h) orders it for the writer, and nothing else is
 * published through it. */
static _Atomic int sig_pending;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "sig_pending must be lock-free in a handler");
static struct sigaction prev_action;
static int have_prev_action;
/* Signal our handler is on, 0 = none; written by install_signal (start-up,
 * ktrace_setting), read by the writer (ktrace__signal_check, snapfile.c's
 * fill_info).  relaxed everywhere: a free-standing value, re-read to
 * detect a change. */
static _Atomic int installed_signo;
/* 1 while the program's own handler is on installed_signo instead of
 * ours (writer thread: ktrace__signal_check; read by snapfile.c's
 * fill_info). */
static _Atomic int signal_taken;

/* ---- signal --------------------------------------------------------------- */

static KT_NOINSTR void on_signal(int sig, siginfo_t *si, void *uc)
{
	kt_store(&sig_pending, 1, relaxed);
	ktrace__writer_wake();
	if (have_prev_action) {
		if (prev_action.sa_flags & SA_SIGINFO) {
			if (prev_action.sa_sigaction)
				prev_action.sa_sigaction(sig, si, uc);
		} else if (prev_action.sa_handler != SIG_DFL &&
		           prev_action.sa_handler != SIG_IGN) {
			prev_action.sa_handler(sig);
		}
	}
}

static KT_NOINSTR void install_signal(void)
{
	struct sigaction sa;
	int signo = kt_load_cfg(signo), old = kt_load(&installed_signo, relaxed);

	if (old != 0) {   /* ktrace_setting: move to another signal */
		/* 0 first: the writer must not take the restored handler for
		 * the program's taking the signal over (ktrace__signal_check). */
		kt_store(&installed_signo, 0, relaxed);
		sigaction(old, have_prev_action ? &prev_action : NULL, NULL);
		if (!have_prev_action)
			signal(old, SIG_DFL);
		have_prev_action = 0;
	}
	if (signo == 0)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(signo, NULL, &prev_action) == 0 &&
	    prev_action.sa_handler != SIG_DFL && prev_action.sa_handler != SIG_IGN)
		have_prev_action = 1; /* the program's handler keeps running */
	if (sigaction(signo, &sa, NULL) != 0)
		ktrace__say("cannot install the snapshot signal handler (signal %d): %s; "
		            "use ktrace_snapshot() or set KTRACE_SIGNAL", signo, strerror(errno));
	else
		kt_store(&installed_signo, signo, relaxed);
}

/*
 * Start-up installs the handler as soon as the settings are read, before
 * the rings, clocks and context-switch events: until then the snapshot
 * signal has its default action, which ends the process, so the sooner
 * the better.  A signal taken before the writer thread runs waits in
 * sig_pending; the writer's first turn writes its snapshot.  If start-up
 * then fails, ktrace__snapshot_signal_undo() gives the signal back.
 */
KT_NOINSTR void ktrace__snapshot_signal_early(void)
{
	install_signal();
}

KT_NOINSTR void ktrace__snapshot_signal_undo(void)
{
	if (installed_signo == 0)
		return;
	sigaction(installed_signo, have_prev_action ? &prev_action : NULL, NULL);
	if (!have_prev_action)
		signal(installed_signo, SIG_DFL);
	have_prev_action = 0;
	installed_signo = 0;
	kt_store(&sig_pending, 0, relaxed);
}

/* ktrace_setting("KTRACE_SIGNAL", ...): signo is already in ktrace__cfg. */
KT_NOINSTR void ktrace__snapshot_signal_changed(void)
{
	install_signal();
	kt_store(&signal_taken, 0, relaxed);
}

/*
 * Writer thread, about once a second: is our handler still on the
 * snapshot signal?  A program that installs its own after ours (Redis
 * does, for SIGUSR2) silently turns `kill -USR2` into nothing, and the
 * user takes the missing file for tracing being off.  Said once on
 * stderr, with the fix, and in every snapshot while it lasts
 * (KTRACE_INFO_SIGNAL_TAKEN).  Reading a disposition changes nothing.
 */
KT_NOINSTR void ktrace__signal_check(void)
{
	struct sigaction cur;
	int signo = kt_load(&installed_signo, relaxed);   /* ktrace_setting may move it */
	int taken;

	if (signo == 0 || sigaction(signo, NULL, &cur) != 0 ||
	    signo != kt_load(&installed_signo, relaxed))
		return;
	taken = !(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_signal;
	/* relaxed: a flag the writer itself reads for the next file. */
	kt_store(&signal_taken, taken, relaxed);
	if (taken)
		ktrace__warn_once(KT_WARN_SIGNAL_TAKEN, "the program installed its own handler for signal %d (%s) "
		                  "over ktrace's: that signal no longer writes a snapshot (tracing "
		                  "goes on); set KTRACE_SIGNAL to a signal the program does not use "
		                  "(e.g. KTRACE_SIGNAL=RTMIN+5) or call ktrace_snapshot()", signo,
		                  signo == SIGUSR2 ? "SIGUSR2" : signo == SIGUSR1 ? "SIGUSR1"
		                  : "a real-time signal");
}

/* ktrace__snapshot_init: install the handler unless start-up did already
 * (ktrace__snapshot_signal_early). */
KT_NOINSTR void ktrace__signal_init(void)
{
	if (installed_signo == 0)
		install_signal();
}

/* relaxed: the writer's futex word orders sig_pending for it (see above). */
KT_NOINSTR int ktrace__signal_pending(void)
{
	return kt_load(&sig_pending, relaxed);
}

KT_NOINSTR void ktrace__signal_clear(void)
{
	kt_store(&sig_pending, 0, relaxed);
}

KT_NOINSTR int ktrace__signal_installed(void)
{
	return kt_load(&installed_signo, relaxed);
}

KT_NOINSTR int ktrace__signal_taken(void)
{
	return kt_load(&signal_taken, relaxed);
}

/* Fork child: the handler stays installed (the child inherits it); a
 * signal the parent had not served yet is the parent's. */
KT_NOINSTR void ktrace__signal_fork_child(void)
{
	kt_store(&sig_pending, 0, relaxed);
}
