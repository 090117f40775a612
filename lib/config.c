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
 *   KTRACE_MAX_SNAPSHOTS_PER_MIN  trigger rate limit (default 6)
 *   KTRACE_QUIET                  1: no "wrote snapshot" lines on stderr
 *   KTRACE_CLOCK                  auto (default), tsc, monotonic
 *   KTRACE_RSEQ                   1 (default) / 0: use the locked fallback
 *   KTRACE_WINDOW_S               seconds the ring must hold (default 30)
 *   KTRACE_FILTER                 auto (default): mute hot short functions
 *                                 when the window is at risk; off: record all
 *   KTRACE_FILTER_MAX_US          a function with any call this long is
 *                                 never muted automatically (default 5)
 *   KTRACE_EXCLUDE                globs of function names never recorded
 *   KTRACE_INCLUDE                globs of function names always recorded
 *   KTRACE_SCHED                  auto (default: record context switches when
 *                                 the kernel allows it) / off
 */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct kt_config ktrace__cfg;

KT_NOINSTR void ktrace__say(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* One write() per message so lines from threads do not interleave. */
	if (fputs("ktrace: ", stderr) >= 0)
		fwrite(buf, 1, (size_t)n, stderr);
	fflush(stderr);
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

static KT_NOINSTR void num(const char *var, uint64_t lo, uint64_t hi, uint64_t *dst,
                           const char *unit)
{
	const char *s = getenv(var);
	uint64_t v;

	if (s == NULL || *s == 0)
		return;
	if (ktrace__parse_u64(s, lo, hi, &v) == 0) {
		*dst = v;
		return;
	}
	ktrace__say("%s='%s' is not a whole number of %s from %llu to %llu; using %llu",
	            var, s, unit, (unsigned long long)lo, (unsigned long long)hi,
	            (unsigned long long)*dst);
}

static KT_NOINSTR void flag(const char *var, int *dst)
{
	const char *s = getenv(var);

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
	v = c->filter_max_us;
	num("KTRACE_FILTER_MAX_US", 1, 60000000, &v, "microseconds");
	c->filter_max_us = (uint32_t)v;
	globs("KTRACE_EXCLUDE", c->exclude, sizeof(c->exclude));
	globs("KTRACE_INCLUDE", c->include, sizeof(c->include));
}

KT_NOINSTR void ktrace__config_load(void)
{
	struct kt_config *c = &ktrace__cfg;
	const char *s;
	uint64_t v;

	memset(c, 0, sizeof(*c));
	c->enabled = 1;
	strcpy(c->dir, ".");
	c->buffer_mb = 8;
	c->signo = SIGUSR2;
	c->trigger_min_samples = 1000;
	c->trigger_delay_ms = 200;
	c->max_per_min = 6;

	flag("KTRACE_ENABLE", &c->enabled);
	if ((s = getenv("KTRACE_DIR")) != NULL && *s) {
		if (strlen(s) >= sizeof(c->dir) - 64)
			ktrace__say("KTRACE_DIR is longer than %zu bytes; using '.'",
			            sizeof(c->dir) - 64);
		else
			strcpy(c->dir, s);
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
	if ((s = getenv("KTRACE_SIGNAL")) != NULL && *s &&
	    ktrace__parse_signal(s, &c->signo))
		ktrace__say("KTRACE_SIGNAL='%s' is not USR1, USR2, RTMIN+N, a number of one "
		            "of those, or none; using SIGUSR2", s);
	num("KTRACE_TRIGGER_US", 0, UINT64_MAX / 1000, &c->trigger_us, "microseconds");
	if ((s = getenv("KTRACE_TRIGGER_PCT")) != NULL && *s) {
		char *end;
		double d = strtod(s, &end);
		if (*end == 0 && end != s && d >= 0 && d < 100)
			c->trigger_pct = d;
		else
			ktrace__say("KTRACE_TRIGGER_PCT='%s' is not a percentile from 0 (off) "
			            "to below 100, e.g. 99.9; trigger by percentile is off", s);
	}
	v = c->trigger_min_samples;
	num("KTRACE_TRIGGER_MIN_SAMPLES", 1, 100000000, &v, "requests");
	c->trigger_min_samples = (uint32_t)v;
	v = c->trigger_delay_ms;
	num("KTRACE_TRIGGER_DELAY_MS", 0, 60000, &v, "milliseconds");
	c->trigger_delay_ms = (uint32_t)v;
	v = c->max_per_min;
	num("KTRACE_MAX_SNAPSHOTS_PER_MIN", 1, 600, &v, "snapshots");
	c->max_per_min = (uint32_t)v;
	flag("KTRACE_QUIET", &c->quiet);
	if ((s = getenv("KTRACE_CLOCK")) != NULL && *s) {
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
	c->sched = 1;
	if ((s = getenv("KTRACE_SCHED")) != NULL && *s) {
		int on;
		if (strcasecmp(s, "auto") == 0 || (ktrace__parse_bool(s, &on) == 0 && on))
			c->sched = 1;
		else if (ktrace__parse_bool(s, &on) == 0)
			c->sched = 0;
		else
			ktrace__say("KTRACE_SCHED='%s' is not auto or off; using auto", s);
	}
}
