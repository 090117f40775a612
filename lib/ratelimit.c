/*
 * ratelimit.c - files and bytes per minute, for every file-producing path
 * (signal, API, trigger).
 *
 * Token buckets of KTRACE_MAX_FILES_PER_MIN files and KTRACE_MAX_MB_PER_MIN
 * MiB, refilled continuously at that rate per minute.  A refused snapshot
 * costs nothing (it is refused before the copy), is counted
 * (KTRACE_LOSS_SNAPSHOTS_REFUSED, in the next file) and reported once on
 * stderr.  Writer thread only: no lock.  The trigger rate limit
 * (KTRACE_MAX_SNAPSHOTS_PER_MIN) is trigq.c's.
 */
#include "snapshot.h"

/* Rate limit, writer thread only: tokens left (files, bytes) and when they
 * were last refilled (monotonic ns, 0 = never: full buckets). */
static double rl_files, rl_bytes;
static int64_t rl_when;


/*
 * The buckets (file comment).  rate_refill tops them up for the time
 * since the last call; a file needs one file token, and as many byte
 * tokens as it is big unless the byte bucket is full (so a window larger
 * than the limit still gives one file, then waits for the bucket to
 * refill).  Bytes are debited after the write and may go negative.
 */
static KT_NOINSTR void rate_refill(double fcap, double bcap)
{
	int64_t now = ktrace__monotonic_ns();

	if (rl_when == 0) {
		rl_files = fcap;
		rl_bytes = bcap;
	} else {
		double min = (double)(now - rl_when) / 60e9;
		rl_files += fcap * min;
		rl_bytes += bcap * min;
		if (rl_files > fcap)
			rl_files = fcap;
		if (rl_bytes > bcap)
			rl_bytes = bcap;
	}
	rl_when = now;
}

KT_NOINSTR int ktrace__rate_refuse(const char *why)
{
	ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_REFUSED, 1);
	ktrace__warn_once(KT_WARN_RATELIMIT, "snapshot refused: %s (KTRACE_MAX_FILES_PER_MIN=%u, "
	                  "KTRACE_MAX_MB_PER_MIN=%u); further refusals are only counted, "
	                  "in the next file", why, kt_load_cfg(max_files_per_min),
	                  kt_load_cfg(max_mb_per_min));
	return KTRACE_ERATE;
}

/* Writer: refill, then may a file be written?  (the first check, before
 * anything is copied) */
KT_NOINSTR int ktrace__rate_files_ok(double fcap, double bcap)
{
	rate_refill(fcap, bcap);
	return !(rl_files < 1);
}

/* Writer: may a file of about est bytes be written?  Yes when the bucket
 * is full, even if it holds less. */
KT_NOINSTR int ktrace__rate_bytes_ok(uint64_t est, double bcap)
{
	return !(rl_bytes < (double)est && rl_bytes < bcap);
}

KT_NOINSTR void ktrace__rate_debit(uint64_t bytes)
{
	rl_files -= 1;
	rl_bytes -= (double)bytes;
}

/* Fork child: a new process, full buckets. */
KT_NOINSTR void ktrace__rate_fork_child(void)
{
	rl_when = 0;
}
