/*
 * names.c - names: C++ demangling and short forms for timelines; and the
 * names every sink prints of functions, threads and requests (below).
 *
 * Demangling uses the C++ runtime's own demangler, __cxa_demangle from
 * libstdc++.so.6, loaded with dlopen the first time a mangled (Itanium
 * "_Z") name is seen, and only if it is installed: the decoder links
 * nothing beyond libc, a C-only machine decodes as before (names stay
 * mangled, one warning says why), and the names match what c++filt and gdb
 * print, for every construct the compiler emits (a demangler of our own
 * would be a few thousand lines to reach that).  Measured on the C++
 * example's names: see docs/building.md (C++ programs).
 *
 * A timeline line or a chrome slice has room for "ns::Cls<...>::fn(...)",
 * not for three lines of template arguments: kd_names_shorten() keeps a
 * name up to KD_SHORT_NAME_MAX bytes as it is, and otherwise empties
 * the template argument lists (outermost <...>), then the parameter list.
 * The full name stays in stats, explain, folded and chrome's args.
 */
#include "names.h"
#include "result.h"
#include "snap.h"
#include "util.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

static cxa_demangle_fn cxa_demangle;
static int demangler_state; /* 0 not tried, 1 loaded, -1 not available */

static cxa_demangle_fn demangler(void)
{
	if (demangler_state == 0) {
		/* RTLD_LOCAL: its symbols do not leak into later lookups. */
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			cxa_demangle = (cxa_demangle_fn)dlsym(h, "__cxa_demangle");
		demangler_state = cxa_demangle ? 1 : -1;
	}
	return cxa_demangle;
}

int kd_names_is_mangled(const char *name)
{
	return name[0] == '_' && name[1] == 'Z';
}

int kd_names_demangler_missing(void)
{
	return demangler() == NULL;
}

char *kd_names_demangle(const char *name)
{
	cxa_demangle_fn fn;
	int status = -1;
	char *out;

	if (!kd_names_is_mangled(name) || (fn = demangler()) == NULL)
		return NULL;
	out = fn(name, NULL, NULL, &status);
	if (status != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* Characters an operator name may consist of after "operator". */
static int op_char(char c)
{
	return c && strchr("<>=!+-*/%&|^~[],", c) != NULL;
}

/* Copy s into out, emptying every bracket pair open..close at depth 0 of
 * that pair kind (contents become "..."), except inside operator names;
 * only_last: empty only the last such pair. */
static size_t collapse(const char *s, char *out, size_t cap, char open, char close, int only_last)
{
	size_t n = 0, len = strlen(s), last = (size_t)-1;
	int depth = 0;

	if (only_last) {
		/* the last depth-0 group's opening bracket */
		for (size_t i = 0; i < len; i++) {
			if (strncmp(s + i, "operator", 8) == 0) {
				i += 8;
				if (s[i] == '(' && s[i + 1] == ')')
					i += 1;
				else
					while (op_char(s[i + 1]))
						i++;
				continue;
			}
			if (s[i] == open && depth++ == 0)
				last = i;
			else if (s[i] == close && depth > 0)
				depth--;
		}
		depth = 0;
	}
	for (size_t i = 0; i < len && n + 4 < cap; i++) {
		if (depth == 0 && strncmp(s + i, "operator", 8) == 0) {
			size_t j = i + 8;
			if (s[j] == '(' && s[j + 1] == ')')
				j += 2;
			else
				while (op_char(s[j]))
					j++;
			while (i < j && n + 4 < cap)
				out[n++] = s[i++];
			i--;
			continue;
		}
		if (s[i] == open && (!only_last || i == last || depth > 0)) {
			if (depth++ == 0) {
				memcpy(out + n, (const char[]){open, '.', '.', '.'}, 4);
				n += 4;
			}
			continue;
		}
		if (s[i] == close && depth > 0) {
			if (--depth == 0)
				out[n++] = close;
			continue;
		}
		if (depth == 0)
			out[n++] = s[i];
	}
	out[n] = 0;
	return n;
}

const char *kd_names_shorten(const char *name, char *buf, size_t cap)
{
	char tmp[KD_SHORT_NAME_MAX * 8];

	if (strlen(name) <= KD_SHORT_NAME_MAX || cap < 8)
		return name;
	collapse(name, tmp, sizeof(tmp), '<', '>', 0);
	if (strlen(tmp) > KD_SHORT_NAME_MAX)
		collapse(tmp, buf, cap, '(', ')', 1);
	else
		snprintf(buf, cap, "%s", tmp);
	return buf;
}

const char *kd_names_func_short(const struct kd_dec *d, uint32_t func)
{
	if (func >= d->nfuncs || !d->funcs[func].short_name)
		return kd_names_func(d, func);
	return d->funcs[func].short_name;
}

/* ---- names of functions, threads and requests ------------------------------- */

const char *kd_names_strdup(struct kd_dec *d, const char *s)
{
	return kd_strpool_add(&d->strs, s);
}

const char *kd_names_func(const struct kd_dec *d, uint32_t func)
{
	if (func >= d->nfuncs || !d->funcs[func].name)
		return "?";
	return d->funcs[func].name;
}

const char *kd_names_func_sym(const struct kd_dec *d, uint32_t func)
{
	if (func >= d->nfuncs || !d->funcs[func].sym)
		return kd_names_func(d, func);
	return d->funcs[func].sym;
}

const char *kd_names_id(const struct kd_dec *d, uint32_t id, char *buf, size_t len)
{
	const char *s = kd_snap_name(&d->snap, id);

	if (s)
		return s;
	snprintf(buf, len, "name#%" PRIu32, id);
	return buf;
}

const char *kd_names_req_id(const struct kd_dec_request *q, char *buf, size_t len)
{
	if (q->flags & KD_REQ_UNKNOWN)
		snprintf(buf, len, "(begun before the window)");
	else if (q->flags & KD_REQ_USER_ID)
		snprintf(buf, len, "id=%" PRIu64, q->user_id);
	else if (q->flags & KD_REQ_NUMBERED)
		snprintf(buf, len, "#%" PRIu64, q->id);
	else if (q->id >> 32) /* format 1: the thread's slot (from 1) and its sequence */
		snprintf(buf, len, "#%" PRIu32 ".%" PRIu32, (uint32_t)(q->id >> 32),
		         (uint32_t)q->id);
	else /* format 1 with a small id (a program's own) */
		snprintf(buf, len, "#%" PRIu64, q->id);
	return buf;
}

const char *kd_names_req(const struct kd_dec *d, const struct kd_dec_request *q, char *buf,
                         size_t len)
{
	char nb[64], ib[48];
	const char *kind = q->kind == KD_NONE ? "request" : kd_names_id(d, q->kind, nb, sizeof(nb));

	snprintf(buf, len, "%s %s", kind, kd_names_req_id(q, ib, sizeof(ib)));
	return buf;
}

const char *kd_names_req_keep(uint32_t keep, char *buf, size_t len)
{
	/* enum ktrace_req_keep, bit by bit */
	static const char *const names[] = { "slow", "sampled", "nested", "spilled", "direct",
	                                     "trigger", "overlap", "warmup", "after" };
	size_t n = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]) && n < len; i++)
		if (keep & (1u << i))
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", names[i]);
	return buf;
}

const char *kd_names_thread(const struct kd_dec *d, uint32_t thread,
                                     char *buf, size_t len)
{
	const struct kd_dec_thread *t;

	if (thread >= d->nthreads) {
		snprintf(buf, len, "?");
		return buf;
	}
	t = &d->threads[thread];
	if (t->known)
		snprintf(buf, len, "%s/%" PRId32, t->name[0] ? t->name : "?", t->tid);
	else
		snprintf(buf, len, "%s", t->name);
	return buf;
}
