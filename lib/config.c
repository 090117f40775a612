/*
 * config.c - KTRACE_* environment settings, read and validated once at
 * start-up.  A bad value is reported on stderr with what was expected, and
 * the default is used: a tracer must never stop the program it observes.
 *
 *   KTRACE_ENABLE                 1 (default) / 0: record nothing at all
 *   KTRACE_DIR                    snapshot directory (default ".")
 *   KTRACE_BUFFER_MB              ring size per core in MiB, 1..4096, rounded
 *                                 up to a power of two (default 8)
 *   KTRACE_SIGNAL                 USR2 (default), USR1, RTMIN+N, a number,
 *                                 or none
 *   KTRACE_TRIGGER_US             absolute request threshold, us (0 = off)
 *   KTRACE_TRIGGER_PCT            running percentile threshold, e.g. 99.9
 *                                 (0 = off, default)
 *   KTRACE_TRIGGER_MIN_SAMPLES    requests of a kind before the percentile
 *                                 arms (default 1000)
 *   KTRACE_TRIGGER_DELAY_MS       recording after a trigger before the
 *                                 window is written (default 200)
 *   KTRACE_TRIGGER_ON             wall (default): a request's threshold is
 *                                 compared with its wall time; run: with
 *                                 its wall time minus the time it was
 *                                 preempted (needs KTRACE_SCHED records)
 *   KTRACE_MAX_SNAPSHOTS_PER_MIN  trigger rate limit (default 6)
 *   KTRACE_MAX_FILES_PER_MIN      files per minute, every path (default 10)
 *   KTRACE_MAX_MB_PER_MIN         MiB of files per minute (default 1024)
 *   KTRACE_QUIET                  1: no "wrote snapshot" lines on stderr
 *   KTRACE_CLOCK                  auto (default), tsc, monotonic
 *   KTRACE_RSEQ                   1 (default) / 0: use the locked fallback
 *   KTRACE_WINDOW_S               seconds the ring must hold (default 30)
 *   KTRACE_FILTER                 auto (default): mute hot short functions
 *                                 when the window is at risk; off: record all
 *   KTRACE_CPU_PCT                auto (default: 2 in the lean mode, 0 in
 *                                 the default mode) or 0-100: a core whose
 *                                 recorded events take more than this share
 *                                 of its time is under pressure at once
 *                                 (filter.c); 0: the window alone decides
 *   KTRACE_FILTER_MAX_US          a call this long is long (default 5): a
 *                                 function that blocked that long in a call,
 *                                 or whose long calls are 1 in 100 (100x as
 *                                 long: 1 in 100,000), is not muted (filter.c)
 *   KTRACE_EXCLUDE                globs of function names never recorded
 *   KTRACE_INCLUDE                globs of function names always recorded
 *   KTRACE_SCHED                  auto (default: record context switches when
 *                                 the kernel allows it and no seccomp filter
 *                                 is active) / off / on (also under a filter:
 *                                 one that kills on perf_event_open kills
 *                                 the program)
 *   KTRACE_KEEP                   slow (default): a request's records are held
 *                                 aside and kept only when it is slow or
 *                                 sampled; all: every request recorded
 *   KTRACE_KEEP_PCT               slower than this running percentile of its
 *                                 kind is slow (default 99.9, 0 = off)
 *   KTRACE_KEEP_MIN_SAMPLES       requests of a kind before it arms (1000)
 *   KTRACE_SAMPLE_MS              one typical request per kind kept about
 *                                 this often (default 1000, 0 = none)
 *   KTRACE_HOLD_KB                each thread's hold buffer (default 256)
 *
 * A relative KTRACE_DIR is made absolute here, once: a program that later
 * changes directory (daemon()) still writes where it started.
 *
 * Secure execution (getauxval(AT_SECURE): setuid, setgid, file
 * capabilities): the environment belongs to a less privileged user, so no
 * setting is read from it (secure_getenv), and the defaults change: no
 * snapshot signal, and no snapshot directory until the program chooses
 * one.  The program itself can change some settings at run time with
 * ktrace_setting().
 */
#include "internal.h"

#include <fcntl.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct kt_config ktrace__cfg;
/* Guards ktrace__cfg.dir after start-up (ktrace_setting vs the writer). */
static pthread_mutex_t cfg_mu = PTHREAD_MUTEX_INITIALIZER;

/* The environment, unless this is a secure-execution process. */
static KT_NOINSTR const char *env(const char *var)
{
	return secure_getenv(var);
}

/* Identity of descriptor 2 when the library started (st_dev, st_ino);
 * err_known: 0 = not read yet, 1 = read, -1 = fd 2 was closed. */
static uint64_t err_dev;
static uint64_t err_ino;
static _Atomic int err_known;

/*
 * Device, inode and size of an open descriptor; -1 if it is not open.
 * statx (glibc 2.28) rather than fstat, whose symbol is GLIBC_2.33: the
 * library references nothing newer than 2.28 (test_lib_glibc_symbols).
 */
KT_NOINSTR int ktrace__fd_stat(int fd, uint64_t *dev, uint64_t *ino, uint64_t *size)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_SIZE, &sx) != 0)
		return -1;
	*dev = ((uint64_t)sx.stx_dev_major << 32) | sx.stx_dev_minor;
	*ino = sx.stx_ino;
	*size = sx.stx_size;
	return 0;
}

static KT_NOINSTR int stderr_is_ours(void)
{
	uint64_t dev = 0, ino = 0, size;
	int known = kt_load(&err_known, acquire); /* pairs with the release below */

	if (ktrace__fd_stat(2, &dev, &ino, &size) != 0)
		ino = 0, dev = 0;
	if (known == 0) {
		err_dev = dev;
		err_ino = ino;
		kt_store(&err_known, ino ? 1 : -1, release);
		return ino != 0;
	}
	return known == 1 && ino != 0 && dev == err_dev && ino == err_ino;
}

/*
 * Messages go to stderr only while descriptor 2 is still the file it was
 * when the library started: a daemon that closed it and got a file of its
 * own on that number must not find ktrace's lines in its data.
 *
 * And never at the cost of blocking: descriptor 2 can be a full pipe that
 * nobody reads (a hung log collector), and the caller can be the writer
 * thread (which must go on) or an application thread.  No stdio (its
 * stderr lock may be held by a program thread blocked in that very
 * write): one write() of the whole line, made only when poll() says the
 * descriptor is writable now, which for a pipe means a free page, room
 * for any line up to PIPE_BUF.  A line that cannot go is counted
 * (KTRACE_LOSS_MESSAGES, in the next snapshot) instead.
 */
KT_NOINSTR void ktrace__say(const char *fmt, ...)
{
	char buf[1024];
	struct pollfd pfd = {2, POLLOUT, 0};
	va_list ap;
	int n;

	if (!stderr_is_ours())
		return;
	memcpy(buf, "ktrace: ", 8);
	va_start(ap, fmt);
	n = vsnprintf(buf + 8, sizeof(buf) - 9, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n += 8;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLOUT) ||
	    write(2, buf, (size_t)n) < 0) {
		/* relaxed: a statistic (see ktrace__count_loss). */
		kt_add(&ktrace__g.loss[KTRACE_LOSS_MESSAGES], 1, relaxed);
	}
}

KT_NOINSTR int ktrace__parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	/* Digits only: strtoull() would skip blanks and accept a sign. */
	if (s == NULL || !(*s >= '0' && *s <= '9'))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end != 0 || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

KT_NOINSTR int ktrace__parse_bool(const char *s, int *out)
{
	static const char *const yes[] = {"1", "on", "yes", "true"};
	static const char *const no[] = {"0", "off", "no", "false"};

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0)
			return *out = 1, 0;
		if (strcasecmp(s, no[i]) == 0)
			return *out = 0, 0;
	}
	return -1;
}

KT_NOINSTR int ktrace__parse_signal(const char *s, int *signo)
{
	uint64_t v;

	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	if (strcasecmp(s, "none") == 0 || strcmp(s, "0") == 0)
		return *signo = 0, 0;
	if (strcasecmp(s, "USR1") == 0)
		return *signo = SIGUSR1, 0;
	if (strcasecmp(s, "USR2") == 0)
		return *signo = SIGUSR2, 0;
	if (strncasecmp(s, "RTMIN", 5) == 0) {
		if (s[5] == 0)
			return *signo = SIGRTMIN, 0;
		if (s[5] == '+' && ktrace__parse_u64(s + 6, 0, (uint64_t)(SIGRTMAX - SIGRTMIN), &v) == 0)
			return *signo = SIGRTMIN + (int)v, 0;
		return -1;
	}
	/* Numbers: only signals whose default action we can safely take over. */
	if (ktrace__parse_u64(s, 1, (uint64_t)SIGRTMAX, &v) == 0 &&
	    (v == SIGUSR1 || v == SIGUSR2 || ((int)v >= SIGRTMIN && (int)v <= SIGRTMAX)))
		return *signo = (int)v, 0;
	return -1;
}

static KT_NOINSTR int parse_num(const char *var, const char *s, uint64_t lo, uint64_t hi,
                                 uint64_t *dst, const char *unit)
{
	uint64_t v;

	if (ktrace__parse_u64(s, lo, hi, &v) == 0) {
		*dst = v;
		return 0;
	}
	ktrace__say("%s='%s' is not a whole number of %s from %llu to %llu; using %llu",
	            var, s, unit, (unsigned long long)lo, (unsigned long long)hi,
	            (unsigned long long)*dst);
	return -1;
}

static KT_NOINSTR void num(const char *var, uint64_t lo, uint64_t hi, uint64_t *dst,
                           const char *unit)
{
	const char *s = env(var);

	if (s != NULL && *s != 0)
		parse_num(var, s, lo, hi, dst, unit);
}

static KT_NOINSTR void num32(const char *var, uint32_t lo, uint32_t hi, uint32_t *dst,
                             const char *unit)
{
	uint64_t v = *dst;

	num(var, lo, hi, &v, unit);
	*dst = (uint32_t)v;
}

/* dir made absolute against the current directory; 0, or -1 (told why). */
static KT_NOINSTR int resolve_dir(const char *var, const char *in, char *out, size_t len)
{
	char cwd[sizeof(ktrace__cfg.dir)];
	size_t n = strlen(in);

	/* At most len - 64 bytes: room for the file name in the path
	 * buffers (snapfile.c: 4352 bytes). */
	if (n > len - 64) {
		ktrace__say("%s is longer than %zu bytes; not used", var, len - 64);
		return -1;
	}
	if (in[0] == '/') {
		memcpy(out, in, n + 1);
		return 0;
	}
	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		ktrace__say("%s='%s': cannot read the current directory (%s); keeping the "
		            "relative path", var, in, strerror(errno));
		memcpy(out, in, n + 1);
		return 0;
	}
	if (strcmp(in, ".") == 0 || strcmp(in, "./") == 0)
		n = (size_t)snprintf(out, len, "%s", cwd);
	else
		n = (size_t)snprintf(out, len, "%s%s%s", cwd, cwd[1] ? "/" : "", in);
	if (n > len - 64) {
		ktrace__say("%s='%s' is longer than %zu bytes once made absolute; not used",
		            var, in, len - 64);
		return -1;
	}
	return 0;
}

KT_NOINSTR void ktrace__cfg_dir(char *buf, size_t len)
{
	pthread_mutex_lock(&cfg_mu);
	snprintf(buf, len, "%s", ktrace__cfg.dir);
	pthread_mutex_unlock(&cfg_mu);
}

static KT_NOINSTR void flag(const char *var, int *dst)
{
	const char *s = env(var);

	if (s == NULL || *s == 0)
		return;
	if (ktrace__parse_bool(s, dst))
		ktrace__say("%s='%s' is not 1/0, on/off, yes/no or true/false; using %d",
		            var, s, *dst);
}

/* A comma-separated glob list, kept as given (lib/filter.c matches it). */
static KT_NOINSTR void globs(const char *var, char *dst, size_t cap)
{
	const char *s = getenv(var);

	if (s == NULL || *s == 0)
		return;
	if (strlen(s) >= cap) {
		ktrace__say("%s is longer than %zu bytes; ignored (name fewer patterns, "
		            "or use wider globs such as 'prefix_*')", var, cap - 1);
		return;
	}
	strcpy(dst, s);
}

/* KTRACE_TRIGGER_ON: what a request's trigger threshold is compared with. */
static KT_NOINSTR void trigger_on_setting(struct kt_config *c)
{
	const char *s;

	c->trigger_on = KTRACE_TRIGGER_ON_WALL;
	if ((s = env("KTRACE_TRIGGER_ON")) == NULL || !*s)
		return;
	if (strcasecmp(s, "run") == 0)
		c->trigger_on = KTRACE_TRIGGER_ON_RUN;
	else if (strcasecmp(s, "wall") != 0)
		ktrace__say("KTRACE_TRIGGER_ON='%s' is not wall or run; using wall", s);
}

static KT_NOINSTR void budget_settings(struct kt_config *c)
{
	const char *s;
	uint64_t v;

	c->window_s = 30;
	c->filter = 1;
	c->filter_max_us = 5;
	v = c->window_s;
	num("KTRACE_WINDOW_S", 1, 86400, &v, "seconds");
	c->window_s = (uint32_t)v;
	if ((s = getenv("KTRACE_FILTER")) != NULL && *s) {
		if (strcasecmp(s, "off") == 0 || strcmp(s, "0") == 0)
			c->filter = 0;
		else if (strcasecmp(s, "auto") != 0 && strcmp(s, "1") != 0)
			ktrace__say("KTRACE_FILTER='%s' is not auto or off; using auto", s);
	}
	c->cpu_pct = -1;
	if ((s = env("KTRACE_CPU_PCT")) != NULL && *s && strcasecmp(s, "auto") != 0) {
		if (ktrace__parse_u64(s, 0, 100, &v) == 0)
			c->cpu_pct = (int)v;
		else
			ktrace__say("KTRACE_CPU_PCT='%s' is not auto or a whole number of percent "
			            "from 0 to 100; using auto (2 in the lean mode, 0 otherwise)", s);
	}
	if (!c->filter && c->cpu_pct > 0)
		ktrace__say("KTRACE_CPU_PCT=%d has no effect with KTRACE_FILTER=off "
		            "(nothing is muted)", c->cpu_pct);
	v = c->filter_max_us;
	num("KTRACE_FILTER_MAX_US", 1, 60000000, &v, "microseconds");
	c->filter_max_us = (uint32_t)v;
	globs("KTRACE_EXCLUDE", c->exclude, sizeof(c->exclude));
	globs("KTRACE_INCLUDE", c->include, sizeof(c->include));
}

/* What is kept of requests (request.c, trigger.c). */
static KT_NOINSTR void keep_settings(struct kt_config *c)
{
	const char *s;

	c->keep_pct = 99.9;
	c->keep_min_samples = 1000;
	c->sample_ms = 1000;
	c->hold_kb = 256;
	c->gap_us = 1000;
	if ((s = env("KTRACE_KEEP")) != NULL && *s) {
		if (strcasecmp(s, "all") == 0)
			c->keep_all = 1;
		else if (strcasecmp(s, "slow") != 0)
			ktrace__say("KTRACE_KEEP='%s' is not slow or all; using slow (requests "
			            "are held aside and kept whole when slow or sampled)", s);
	}
	if ((s = env("KTRACE_KEEP_PCT")) != NULL && *s) {
		char *end;
		double d = strtod(s, &end);
		if (*end == 0 && end != s && d >= 0 && d < 100)
			c->keep_pct = d;
		else
			ktrace__say("KTRACE_KEEP_PCT='%s' is not a percentile from 0 (off) to "
			            "below 100, e.g. 99.9; using 99.9", s);
	}
	num32("KTRACE_KEEP_MIN_SAMPLES", 1, 100000000, &c->keep_min_samples, "requests");
	num32("KTRACE_SAMPLE_MS", 0, 3600000, &c->sample_ms, "milliseconds");
	/* at most 960 KiB: a held run is at most the buffer, written in chunks
	 * of a block's room (1017 words), and HELD numbers chunks in 8 bits */
	num32("KTRACE_HOLD_KB", 4, 960, &c->hold_kb, "KiB per thread");
	num32("KTRACE_GAP_US", 0, 60000000, &c->gap_us, "microseconds");
}

KT_NOINSTR void ktrace__config_load(void)
{
	struct kt_config *c = &ktrace__cfg;
	const char *s;
	uint64_t v;

	stderr_is_ours();   /* note which file descriptor 2 is now */
	memset(c, 0, sizeof(*c));
	c->enabled = 1;
	c->buffer_mb = 8;
	c->signo = SIGUSR2;
	c->trigger_min_samples = 1000;
	c->trigger_delay_ms = 200;
	c->max_per_min = 6;
	c->max_files_per_min = 10;
	c->max_mb_per_min = 1024;
	c->secure = getauxval(AT_SECURE) != 0;
	if (c->secure) {
		extern char **environ;
		/* No directory and no signal until the program asks. */
		c->signo = 0;
		for (char **e = environ; e && *e; e++)
			if (strncmp(*e, "KTRACE_", 7) == 0) {
				ktrace__say("setuid/setgid program: KTRACE_* settings in the "
				            "environment are ignored (the program can choose its "
				            "own with ktrace_setting())");
				break;
			}
	} else if (resolve_dir("KTRACE_DIR", ".", c->dir, sizeof(c->dir)) != 0) {
		strcpy(c->dir, ".");
	}

	flag("KTRACE_ENABLE", &c->enabled);
	if ((s = env("KTRACE_DIR")) != NULL && *s) {
		char d[sizeof(c->dir)];
		if (resolve_dir("KTRACE_DIR", s, d, sizeof(d)) == 0)
			strcpy(c->dir, d);
	}
	v = c->buffer_mb;
	num("KTRACE_BUFFER_MB", 1, 4096, &v, "MiB per core");
	/* Round up to a power of two: ring indexes are pos & mask. */
	c->buffer_mb = 1;
	while (c->buffer_mb < v)
		c->buffer_mb <<= 1;
	if (c->buffer_mb != v)
		ktrace__say("KTRACE_BUFFER_MB=%llu rounded up to %u (a power of two)",
		            (unsigned long long)v, c->buffer_mb);
	if ((s = env("KTRACE_SIGNAL")) != NULL && *s &&
	    ktrace__parse_signal(s, &c->signo))
		ktrace__say("KTRACE_SIGNAL='%s' is not USR1, USR2, RTMIN+N, a number of one "
		            "of those, or none; using SIGUSR2", s);
	num("KTRACE_TRIGGER_US", 0, UINT64_MAX / 1000, &c->trigger_us, "microseconds");
	if ((s = env("KTRACE_TRIGGER_PCT")) != NULL && *s) {
		char *end;
		double d = strtod(s, &end);
		if (*end == 0 && end != s && d >= 0 && d < 100)
			c->trigger_pct = d;
		else
			ktrace__say("KTRACE_TRIGGER_PCT='%s' is not a percentile from 0 (off) "
			            "to below 100, e.g. 99.9; trigger by percentile is off", s);
	}
	num32("KTRACE_TRIGGER_MIN_SAMPLES", 1, 100000000, &c->trigger_min_samples, "requests");
	num32("KTRACE_TRIGGER_DELAY_MS", 0, 60000, &c->trigger_delay_ms, "milliseconds");
	num32("KTRACE_MAX_SNAPSHOTS_PER_MIN", 1, 600, &c->max_per_min, "snapshots");
	num32("KTRACE_MAX_FILES_PER_MIN", 1, 100000, &c->max_files_per_min, "files");
	num32("KTRACE_MAX_MB_PER_MIN", 1, 100000000, &c->max_mb_per_min, "MiB");
	flag("KTRACE_QUIET", &c->quiet);
	if ((s = env("KTRACE_CLOCK")) != NULL && *s) {
		if (strcasecmp(s, "tsc") == 0)
			c->force_clock = KTRACE_CLOCK_TSC;
		else if (strcasecmp(s, "monotonic") == 0)
			c->force_clock = KTRACE_CLOCK_MONOTONIC;
		else if (strcasecmp(s, "auto") != 0)
			ktrace__say("KTRACE_CLOCK='%s' is not auto, tsc or monotonic; using auto", s);
	}
	int rseq = 1;
	flag("KTRACE_RSEQ", &rseq);
	c->no_rseq = !rseq;
	budget_settings(c);
	keep_settings(c);
	trigger_on_setting(c);
	c->sched = 1;
	if ((s = getenv("KTRACE_SCHED")) != NULL && *s) {
		int on;
		if (strcasecmp(s, "auto") == 0)
			c->sched = 1;
		else if (ktrace__parse_bool(s, &on) == 0)
			c->sched = on ? 2 : 0;
		else
			ktrace__say("KTRACE_SCHED='%s' is not auto, on or off; using auto", s);
	}
}

/*
 * ktrace_setting: the settings that can change while the program runs.
 * The others size or select what start-up built (rings, clock, rseq).
 */
__attribute__((visibility("default"))) KT_NOINSTR int ktrace_setting(const char *name,
                                                                   const char *value)
{
	static const char *const fixed[] = {"KTRACE_ENABLE", "KTRACE_BUFFER_MB", "KTRACE_CLOCK",
	                                    "KTRACE_RSEQ", "KTRACE_TRIGGER_US",
	                                    "KTRACE_TRIGGER_PCT", "KTRACE_TRIGGER_MIN_SAMPLES",
	                                    "KTRACE_TRIGGER_DELAY_MS", "KTRACE_TRIGGER_ON"};
	static const struct {
		const char *name;
		uint64_t lo, hi;
		uint32_t *dst;
		const char *unit;
	} nums[] = {
		{"KTRACE_MAX_SNAPSHOTS_PER_MIN", 1, 600, &ktrace__cfg.max_per_min, "snapshots"},
		{"KTRACE_MAX_FILES_PER_MIN", 1, 100000, &ktrace__cfg.max_files_per_min, "files"},
		{"KTRACE_MAX_MB_PER_MIN", 1, 100000000, &ktrace__cfg.max_mb_per_min, "MiB"},
	};
	char dir[sizeof(ktrace__cfg.dir)];
	int r = 0;

	if (name == NULL || value == NULL)
		return KTRACE_EINVAL;
	if (!ktrace__ensure_init())
		return ktrace__off_reason();
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (strcmp(name, fixed[i]) == 0) {
			ktrace__say("ktrace_setting: %s is fixed at start-up; set it in the "
			            "environment%s", name, ktrace__cfg.secure ?
			            " (ignored in a setuid/setgid program)" : "");
			return KTRACE_EBUSY;
		}
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (strcmp(name, nums[i].name) == 0) {
			uint64_t v = __atomic_load_n(nums[i].dst, __ATOMIC_RELAXED);
			if (parse_num(name, value, nums[i].lo, nums[i].hi, &v, nums[i].unit))
				return KTRACE_ERANGE;
			/* relaxed: a free-standing value, read as a whole. */
			__atomic_store_n(nums[i].dst, (uint32_t)v, __ATOMIC_RELAXED);
			return 0;
		}
	if (strcmp(name, "KTRACE_DIR") == 0) {
		if (*value == 0 || resolve_dir(name, value, dir, sizeof(dir)) != 0)
			return KTRACE_EINVAL;
		pthread_mutex_lock(&cfg_mu);
		strcpy(ktrace__cfg.dir, dir);
		pthread_mutex_unlock(&cfg_mu);
		return 0;
	}
	if (strcmp(name, "KTRACE_QUIET") == 0) {
		int q;
		if (ktrace__parse_bool(value, &q)) {
			ktrace__say("KTRACE_QUIET='%s' is not 1/0, on/off, yes/no or true/false",
			            value);
			return KTRACE_EINVAL;
		}
		__atomic_store_n(&ktrace__cfg.quiet, q, __ATOMIC_RELAXED);
		return 0;
	}
	if (strcmp(name, "KTRACE_SIGNAL") == 0) {
		int signo;
		if (ktrace__parse_signal(value, &signo)) {
			ktrace__say("KTRACE_SIGNAL='%s' is not USR1, USR2, RTMIN+N, a number of one "
			            "of those, or none", value);
			return KTRACE_EINVAL;
		}
		pthread_mutex_lock(&cfg_mu);
		__atomic_store_n(&ktrace__cfg.signo, signo, __ATOMIC_RELAXED);
		ktrace__snapshot_signal_changed();
		pthread_mutex_unlock(&cfg_mu);
		return r;
	}
	ktrace__say("ktrace_setting: unknown setting '%s'", name);
	return KTRACE_EINVAL;
}
