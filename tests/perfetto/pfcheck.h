/*
 * pfcheck.h - run a Perfetto trace written by ktrace-decode through protoc
 * (Debian's protobuf-compiler) against Perfetto's own perfetto_trace.proto
 * (tests/perfetto/upstream/, with its licence: every field must be one it
 * names) and the independent checker check_pftrace.py; for the tests that need it
 * (.ci/deps.sh CALLER --perfetto installs both tools).
 */
#ifndef PFCHECK_H
#define PFCHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define PF_DIR KTRACE_TEST_SOURCE_DIR "/perfetto"

/* The checker's stdout (malloc'd, NUL-terminated), or NULL with the reason
 * in why: protoc or the checker failed (their stderr goes to ours). */
static inline char *pf_check(const char *pftrace, char *why, size_t whylen)
{
	char cmd[4096];
	char *out = NULL;
	size_t n = 0, cap = 0;
	FILE *p;
	int st;

	if (system("command -v protoc >/dev/null && command -v python3 >/dev/null") != 0) {
		snprintf(why, whylen, "protoc or python3 missing: run .ci/deps.sh tests --perfetto "
		         "(apt-get install -y protobuf-compiler python3)");
		return NULL;
	}
	if (snprintf(cmd, sizeof(cmd),
	             "set -e; protoc --proto_path='%s/upstream' --decode=perfetto.protos.Trace "
	             "perfetto_trace.proto < '%s' > '%s.txt';"
	             " python3 '%s/check_pftrace.py' '%s.txt'; rm -f '%s.txt'",
	             PF_DIR, pftrace, pftrace, PF_DIR, pftrace, pftrace) >= (int)sizeof(cmd)) {
		snprintf(why, whylen, "the trace's path is too long for the checker's command line");
		return NULL;
	}
	p = popen(cmd, "r");
	if (!p) {
		snprintf(why, whylen, "popen failed");
		return NULL;
	}
	for (;;) {
		if (n + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 65536;
			nb = realloc(out, cap);
			if (!nb)
				break;
			out = nb;
		}
		size_t r = fread(out + n, 1, 4096, p);
		if (!r)
			break;
		n += r;
	}
	st = pclose(p);
	if (!out || st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(why, whylen, "protoc --decode or check_pftrace.py failed (status %d)", st);
		free(out);
		return NULL;
	}
	out[n] = 0;
	return out;
}

/* The count on the checker line "<prefix> <count>", or -1. */
static inline long pf_count(const char *out, const char *prefix)
{
	size_t len = strlen(prefix);

	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (!strncmp(l, prefix, len) && l[len] == ' ')
			return strtol(l + len + 1, NULL, 10);
	}
	return -1;
}

#endif /* PFCHECK_H */
