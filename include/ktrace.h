/*
 * ktrace.h - always-on function tracing with per-core ring buffers.
 *
 * Build your program with -finstrument-functions and link -lktrace
 * -lpthread: every function entry and exit on every thread is recorded from
 * before main() to exit, with no call needed.  Nothing reaches the disk
 * until a snapshot is asked for:
 *
 *   - kill -USR2 <pid>           (signal configurable: KTRACE_SIGNAL)
 *   - ktrace_snapshot("reason")  from the program
 *   - a request slower than its threshold (ktrace_request_begin/end)
 *
 * Then the last window of everything is written to
 * $KTRACE_DIR/ktrace-<pid>-<time>-<n>.ktrace; ktrace-decode turns it into
 * timelines.  All functions here are safe to call from any thread, before or
 * after the library initialised itself, and in a program built without
 * -finstrument-functions (only what you mark by hand is then recorded).
 */
#ifndef KTRACE_H
#define KTRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KTRACE_VERSION_MAJOR 0
#define KTRACE_VERSION_MINOR 2
#define KTRACE_VERSION_PATCH 0

#if defined(__GNUC__) && defined(KTRACE_BUILDING)
#define KTRACE_EXPORT __attribute__((visibility("default")))
#else
#define KTRACE_EXPORT
#endif

/* Error codes: 0 is success, failures are negative. */
#define KTRACE_ERRNO_MAP(XX)                                                   \
	XX(EINVAL, -1, "invalid argument")                                     \
	XX(EDISABLED, -2, "tracing is disabled (KTRACE_ENABLE=0)")             \
	XX(ENOMEM, -3, "out of memory")                                        \
	XX(EIO, -4, "snapshot file could not be written (see stderr)")         \
	XX(EBUSY, -5, "a snapshot is already being written")                   \
	XX(ERATE, -6, "snapshot suppressed by the rate limit")                 \
	XX(ENOTREADY, -7, "the snapshot writer is not running")                \
	XX(ERANGE, -8, "value out of range")                                   \
	XX(ENODIR, -9, "no snapshot directory: a setuid/setgid program must "  \
	               "choose one with ktrace_setting(\"KTRACE_DIR\", ...)")    \
	XX(ENOWRITER, -10, "tracing is off: the snapshot writer thread could " \
	                   "not be started")                                   \
	XX(EMEMLOCK, -11, "tracing is off: the program calls mlockall() and "  \
	                  "RLIMIT_MEMLOCK has no room for ktrace's buffers")

enum ktrace_error {
#define KTRACE_XX(name, val, msg) KTRACE_##name = (val),
	KTRACE_ERRNO_MAP(KTRACE_XX)
#undef KTRACE_XX
};

/* A short static description of err (0 or a KTRACE_E* code). */
KTRACE_EXPORT const char *ktrace_strerror(int err);

/* 1 if events are being recorded in this process, 0 if tracing is off. */
KTRACE_EXPORT int ktrace_enabled(void);

/*
 * Write the current window to a new snapshot file and wait until it is on
 * disk (tracing goes on meanwhile in every thread).  reason may be NULL; it
 * is stored in the file (at most 127 bytes).  Returns 0 or a KTRACE_E* code;
 * the file's path is then available from ktrace_last_snapshot().
 */
KTRACE_EXPORT int ktrace_snapshot(const char *reason);

/*
 * Copy the path of the last snapshot file this process wrote into buf
 * (NUL-terminated).  Returns the path length, or KTRACE_EINVAL if there is
 * none yet or buf is too small.
 */
KTRACE_EXPORT int ktrace_last_snapshot(char *buf, size_t len);

/*
 * Change a setting while the program runs: KTRACE_DIR (a relative path is
 * made absolute now), KTRACE_SIGNAL, KTRACE_QUIET,
 * KTRACE_MAX_SNAPSHOTS_PER_MIN, KTRACE_MAX_FILES_PER_MIN and
 * KTRACE_MAX_MB_PER_MIN, with the values the environment variables take.
 * The others are fixed at start-up (KTRACE_EBUSY).  A setuid/setgid program
 * takes no setting from the environment: this is how it chooses its own
 * (call it early in main).  Returns 0 or KTRACE_EINVAL / KTRACE_ERANGE
 * (with a message on stderr).
 */
KTRACE_EXPORT int ktrace_setting(const char *name, const char *value);

/*
 * Manual events, for what the compiler cannot see or for code built without
 * -finstrument-functions.  name must be a string that lives as long as the
 * process (a literal): it is remembered by address, its text copied once.
 */
KTRACE_EXPORT void ktrace_mark(const char *name, uint64_t value);
KTRACE_EXPORT void ktrace_span_begin(const char *name);
KTRACE_EXPORT void ktrace_span_end(const char *name);

/*
 * Requests.  begin returns a token to pass to end, on the same thread or
 * another one (an asynchronous server passes it along); kind is a short
 * string literal ("get", "put").  Requests of a kind are numbered from 1
 * ("get #1234"); ktrace_request_begin_id also records the program's own
 * 64-bit id for the request.
 *
 * What is kept (KTRACE_KEEP=slow, the default): while a request runs, the
 * records of the thread that began it are held aside; when it ends they go
 * into the ring whole if it was slow (over its kind's trigger threshold or
 * running KTRACE_KEEP_PCT percentile) or chosen as a typical sample (about
 * one per kind every KTRACE_SAMPLE_MS), and are dropped otherwise, leaving
 * a count in the kind's latency histogram that every snapshot carries.
 * A request slower than its trigger threshold also fires a snapshot
 * (written in the background after KTRACE_TRIGGER_DELAY_MS, rate-limited).
 * The fields are private.
 */
typedef struct ktrace_request {
	uint64_t begin_tsc_; /* private */
	uint32_t kind_;      /* private */
	uint32_t seq_;       /* private */
	uint32_t number_;    /* private */
	uint32_t slot_;      /* private */
} ktrace_request_t;

KTRACE_EXPORT ktrace_request_t ktrace_request_begin(const char *kind);
KTRACE_EXPORT ktrace_request_t ktrace_request_begin_id(const char *kind, uint64_t id);
KTRACE_EXPORT void ktrace_request_end(ktrace_request_t req);

/*
 * Per-kind thresholds, overriding KTRACE_TRIGGER_US / KTRACE_TRIGGER_PCT.
 * abs_us: fire when a request takes longer than this many microseconds
 * (0 = no absolute threshold).  percentile: fire when a request is slower
 * than this running percentile of its kind, e.g. 99.9 (0 = off), once at
 * least min_samples requests of the kind were seen.  Returns 0 or KTRACE_E*.
 */
KTRACE_EXPORT int ktrace_trigger_set(const char *kind, uint64_t abs_us,
                                     double percentile, uint32_t min_samples);

#ifdef __cplusplus
}
#endif

#endif /* KTRACE_H */
