/*
 * out-exclude.c - --format exclude: the compiler flags that take the
 * muted (or the hottest short) functions out of the instrumentation, for
 * all the files at once (below).  What the budget did, for every sink, is
 * in budget.c.
 */
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kd_sched.h"
#include "kd_time.h"
#include "names.h"
#include "out-exclude.h"
#include "result.h"
#include "snap.h"
#include "symbols.h"
#include "util.h"

/* ---- --format exclude --------------------------------------------------- */
/*
 * The flags that take functions out of -finstrument-functions altogether.
 *
 * GCC leaves a function uninstrumented when its name CONTAINS an entry of
 * -finstrument-functions-exclude-function-list (strstr on the printable
 * name: the identifier in C, so foo.part.0 goes with foo; in C++ (GCC 12)
 * the qualified name with template arguments, ns::Box::area).  So every
 * entry also takes every function whose name contains it.
 *
 * All files given are read together (each window sees one phase of the
 * program): one flag line.
 *
 * 1. Names.  Every function symbol of the modules the trace has code in
 *    (symbol tables, as read by symbols.c), and what the snapshots say of
 *    each: its calls in the windows, their durations without the time the
 *    thread was preempted (when switches were recorded), the budget's muted
 *    table (with the calls it observed), the FUNCS table (called at all).
 * 2. Long.  The window budget's rule (lib/filter.c candidate()): a name
 *    with a long call (KTRACE_FILTER_MAX_US or more, preempted time not
 *    counted) in which its thread blocked, or with long calls in 1 of 100
 *    of its calls or more, or calls of 100 x KTRACE_FILTER_MAX_US in 1 of
 *    100,000 or more, has long calls.  It is never listed, and neither is any entry that would also
 *    exclude it.
 * 3. What is listed.  Every function the budget muted or KTRACE_EXCLUDE
 *    excluded; then the short functions recorded in the windows, hottest
 *    first (events per second of window), until the short ones left make
 *    less than half the budget's sustainable rate: the rebuilt program then
 *    records what is left without muting it.
 * 4. Each entry is checked against every name: what else it takes is said
 *    on stderr; an entry implied by another (it contains it) is dropped.
 * 5. Offered on stderr, not listed: the hot functions that only a call of
 *    100 x the threshold keeps off, with the longer flag ("to go further").
 */

#define XLONG_RATIO 100    /* as lib/filter.c LONG_RATIO */
#define XALWAYS_LONG 100   /* as lib/filter.c VERY_LONG */
#define XVERY_RATIO 100000 /* as lib/filter.c VERY_RATIO */
#define XMIN_CALLS 8       /* complete calls before a recorded function is listed */
#define XPREEMPT_SLACK_NS 100000ull /* as lib/filter.c PREEMPT_SLACK_NS */

enum { X_MUTED = 1, X_ENVEXCL = 2, X_PICK = 4, X_FUNCS = 8, X_DROP = 16, X_IMPLIED = 32,
       X_OFFER = 64 };

struct xname {
	char *key;             /* printable name: C identifier, C++ qualified name */
	char *entry;           /* what is listed: key, or (C++) key up to a '<' or space */
	uint64_t calls;        /* calls in the windows, and those the budget observed */
	uint64_t long_calls;   /* of them >= max_us (preempted time not counted) */
	uint64_t very_long;    /* of them >= XALWAYS_LONG x max_us */
	uint64_t blocked;      /* of them (long), calls in which the thread blocked */
	uint64_t max_ns;       /* ns: longest of them */
	uint64_t fcalls;       /* calls in the window of the file being read */
	double wrate;          /* events per second of window (the highest of the files) */
	double mrate;          /* events per second before muting (muted table) */
	uint32_t flags;        /* X_* */
	const struct xname *taken; /* X_DROP: the long one its entry would take */
};

struct xset {
	struct xname *v;
	uint32_t n, cap;
	uint32_t *tab;         /* open addressing: index + 1, 0 = empty */
	uint32_t tcap;         /* power of two */
};

static uint64_t xhash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

/* The printable name GCC matches (key) and the entry to list for a symbol
 * or decoded name; 0 if it cannot be listed.  C: the identifier (foo for
 * foo.part.0).  C++ (GCC 12 matches the qualified name with template
 * arguments, without return type or parameters: ns::Box::area,
 * ns::tw<int>): that, cut before the first '<' or space when it holds a
 * comma or a space, which a flag list cannot carry. */
static int xcanon(const char *name, char *key, size_t klen, char *entry, size_t elen)
{
	char *dm = kd_names_is_mangled(name) ? kd_names_demangle(name) : NULL;
	const char *n = dm ? dm : name, *cut;
	size_t k = strlen(n), depth = 0, first = 0;

	if ((cut = strstr(n, " [clone")) != NULL && (size_t)(cut - n) < k)
		k = (size_t)(cut - n);
	if ((cut = strstr(n, "+0x")) != NULL && (size_t)(cut - n) < k)
		k = (size_t)(cut - n);
	if (!strpbrk(n, ":(< ")) {
		k = strcspn(n, ".") < k ? strcspn(n, ".") : k; /* foo.part.0 -> foo */
	} else {
		/* C++: up to the parameter list, after a return type. */
		for (size_t i = 0; i < k; i++) {
			if (n[i] == '<')
				depth++;
			else if (n[i] == '>' && depth)
				depth--;
			else if (n[i] == ' ' && !depth && strncmp(n + first, "operator", 8) != 0)
				first = i + 1;
			else if (n[i] == '(' && !depth && i > first) {
				k = i;
				break;
			}
		}
	}
	if (k <= first || k - first >= klen || strncmp(n, "0x", 2) == 0) {
		free(dm);
		return 0;
	}
	memcpy(key, n + first, k - first);
	key[k - first] = 0;
	free(dm);
	k = strcspn(key, ", ") < strlen(key) ? strcspn(key, "< ") : strlen(key);
	if (k == 0 || k >= elen)
		return 0;
	memcpy(entry, key, k);
	entry[k] = 0;
	return 1;
}

/* The name's record, added if new; NULL if the name cannot be listed. */
static struct xname *xget(struct xset *s, const char *name)
{
	char key[512], entry[256];
	uint32_t i;

	if (!xcanon(name, key, sizeof(key), entry, sizeof(entry)))
		return NULL;
	if (2 * (s->n + 1) > s->tcap) {
		uint32_t cap = s->tcap ? 2 * s->tcap : 1024;
		uint32_t *t = kd_xcalloc(cap, sizeof(*t), "the exclude names");
		for (uint32_t j = 0; j < s->n; j++) {
			for (i = (uint32_t)xhash(s->v[j].key) & (cap - 1); t[i]; i = (i + 1) & (cap - 1))
				;
			t[i] = j + 1;
		}
		free(s->tab);
		s->tab = t;
		s->tcap = cap;
	}
	for (i = (uint32_t)xhash(key) & (s->tcap - 1); s->tab[i]; i = (i + 1) & (s->tcap - 1))
		if (strcmp(s->v[s->tab[i] - 1].key, key) == 0)
			return &s->v[s->tab[i] - 1];
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->v = kd_xrealloc(s->v, (size_t)s->cap * sizeof(*s->v), "the exclude names");
	}
	memset(&s->v[s->n], 0, sizeof(s->v[s->n]));
	s->v[s->n].key = kd_xstrdup(key, "the exclude names");
	s->v[s->n].entry = kd_xstrdup(entry, "the exclude names");
	s->tab[i] = ++s->n;
	return &s->v[s->n - 1];
}

static int xlong(const struct xname *x)
{
	return x->blocked || (x->long_calls && x->long_calls * XLONG_RATIO >= x->calls) ||
	       (x->very_long && x->very_long * XVERY_RATIO >= x->calls);
}

static double xrate(const struct xname *x)
{
	return x->wrate > x->mrate ? x->wrate : x->mrate;
}

static int by_rate(const void *a, const void *b)
{
	double x = xrate(*(struct xname *const *)a), y = xrate(*(struct xname *const *)b);
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The modules' symbol tables, opened once for this file. */
struct xmods {
	struct kd_elf **elf;  /* by module index; NULL: not used or unreadable */
	uint8_t *used;            /* the trace has code in it */
};

static int xmodule(const struct kd_snap *s, uint64_t addr)
{
	for (uint32_t i = 0; i < s->nmodules; i++)
		if (addr >= s->modules[i].start && addr < s->modules[i].end)
			return (int)i;
	return -1;
}

/* The symbol at addr (a function's first byte), from the module's table. */
static const char *xsym(const struct kd_dec *d, const struct xmods *m, uint64_t addr)
{
	int i = xmodule(&d->snap, addr);
	uint64_t va, start = 0;
	const char *name;

	if (i < 0 || !m->elf[i])
		return NULL;
	if (kd_elf_offset_to_vaddr(m->elf[i], addr - d->snap.modules[i].start +
	                                d->snap.modules[i].file_offset, &va) != 0)
		return NULL;
	name = kd_elf_lookup(m->elf[i], va, &start);
	return name && start == va ? name : NULL;
}

static void xmods_open(const struct kd_dec *d, struct xmods *m, struct xset *xs)
{
	const struct kd_snap *s = &d->snap;
	int k;

	m->elf = kd_xcalloc(s->nmodules + 1, sizeof(*m->elf), "the exclude modules");
	m->used = kd_xcalloc(s->nmodules + 1, 1, "the exclude modules");
	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (d->funcs[i].kind == KD_FUNC_ADDR && (k = xmodule(s, d->funcs[i].addr)) >= 0)
			m->used[k] = 1;
	for (uint32_t i = 0; i < KTRACE_FUNC_ID_COUNT; i++)
		if (s->func_known[i] && (k = xmodule(s, s->func_addr[i])) >= 0)
			m->used[k] = 1;
	for (uint32_t i = 0; i < s->nmuted; i++)
		if ((k = xmodule(s, s->muted[i].addr)) >= 0)
			m->used[k] = 1;
	for (uint32_t i = 0; i < s->nmodules && !d->opts.no_symbols; i++) {
		struct kd_dec_error err;
		char full[4096];
		const char *n;

		if (!m->used[i] || s->modules[i].path[0] != '/')
			continue;
		/* A module mapped twice (several executable segments) is read once. */
		for (uint32_t j = 0; j < i && !m->elf[i]; j++)
			if (m->used[j] && !strcmp(s->modules[j].path, s->modules[i].path))
				m->used[i] = 0;
		if (!m->used[i])
			continue;
		snprintf(full, sizeof(full), "%s%s", d->opts.sysroot ? d->opts.sysroot : "",
		         s->modules[i].path);
		memset(&err, 0, sizeof(err));
		if (kd_elf_open(full, &m->elf[i], &err) != 0) {
			fprintf(stderr, "ktrace-decode: %s: %s: %s; what an entry would also exclude "
			        "there is not known\n", d->file, full, err.msg);
			m->elf[i] = NULL;
			continue;
		}
		for (uint32_t j = 0; (n = kd_elf_sym_name(m->elf[i], j)) != NULL; j++)
			xget(xs, n);
	}
	/* Same path, other mappings: share the first one's table. */
	for (uint32_t i = 0; i < s->nmodules; i++)
		for (uint32_t j = 0; j < i && !m->elf[i]; j++)
			if (m->elf[j] && !strcmp(s->modules[j].path, s->modules[i].path))
				m->elf[i] = m->elf[j];
}

static void xmods_close(const struct kd_snap *s, struct xmods *m)
{
	for (uint32_t i = 0; i < s->nmodules; i++) {
		int shared = 0;
		for (uint32_t j = 0; j < i; j++)
			shared |= m->elf[j] == m->elf[i];
		if (!shared)
			kd_elf_free(m->elf[i]);
	}
	free(m->elf);
	free(m->used);
}

/* The record of a traced address: its decoded name, else its symbol. */
static struct xname *xaddr(const struct kd_dec *d, const struct xmods *m, struct xset *xs,
                           uint64_t addr)
{
	const char *n = xsym(d, m, addr);

	for (uint32_t i = 0; !n && i < d->nfuncs; i++)
		if (d->funcs[i].kind == KD_FUNC_ADDR && d->funcs[i].addr == addr)
			n = kd_names_func_sym(d, i);
	return n ? xget(xs, n) : NULL;
}

/* Steps 1 and 2: calls in the window, durations, the muted table. */
static uint32_t xobserve(const struct kd_dec *d, const struct xmods *m, struct xset *xs,
                         uint64_t max_ns)
{
	const struct kd_snap *s = &d->snap;
	double window_s = (double)kd_time_ticks_ns(d, d->window_end - d->window_start) / 1e9;
	struct xname **fx = kd_xcalloc(d->nfuncs + 1, sizeof(*fx), "the exclude names");
	uint32_t unnamed = 0;

	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (d->funcs[i].kind == KD_FUNC_ADDR)
			fx[i] = xget(xs, kd_names_func_sym(d, i));
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];
		struct xname *x = fx[c->func];
		uint64_t ns;

		if (!x || (c->flags & KD_CALL_SPAN))
			continue;
		ns = kd_time_ticks_ns(d, c->end - c->begin);
		if (ns >= max_ns && d->sched) {
			uint64_t off[2];
			uint64_t p;
			kd_sched_offcpu_in(d, c->thread, c->begin, c->end, off);
			/* it waited (at least the threshold: the switch times are
			 * mapped through the anchors, a block just after a short
			 * call can overlap its end a little): long for good */
			x->blocked += kd_time_ticks_ns(d, off[KD_OFF_BLOCKED]) >= max_ns;
			/* as the budget does: preempted time, and kernel time around
			 * the switch that its records do not cover */
			p = off[KD_OFF_PREEMPTED] ? kd_time_ticks_ns(d, off[KD_OFF_PREEMPTED]) +
			                                XPREEMPT_SLACK_NS : 0;
			ns = ns > p ? ns - p : 0;
		}
		x->calls++;
		x->fcalls++;
		x->long_calls += ns >= max_ns;
		x->very_long += ns >= XALWAYS_LONG * max_ns;
		if (ns > x->max_ns)
			x->max_ns = ns;
	}
	for (uint32_t i = 0; i < xs->n; i++) {
		double r = window_s > 0 ? 2.0 * (double)xs->v[i].fcalls / window_s : 0;
		if (r > xs->v[i].wrate)
			xs->v[i].wrate = r;
		xs->v[i].fcalls = 0;
	}
	for (uint32_t i = 0; i < KTRACE_FUNC_ID_COUNT; i++) {
		struct xname *x = s->func_known[i] ? xaddr(d, m, xs, s->func_addr[i]) : NULL;
		if (x)
			x->flags |= X_FUNCS;
	}
	for (uint32_t i = 0; i < s->nmuted; i++) {
		const struct ktrace_muted_rec *r = &s->muted[i];
		struct xname *x = xaddr(d, m, xs, r->addr);
		double el = s->info.tsc_hz && r->since_tsc > s->info.start_tsc
		            ? (double)(r->since_tsc - s->info.start_tsc) / (double)s->info.tsc_hz : 0;

		if (r->why == KTRACE_MUTE_HOT_CPU)
			continue;   /* long calls: never a compile-time exclusion (the rule below) */
		if (!x) {
			unnamed++;
			continue;
		}
		x->flags |= X_FUNCS | (r->why == KTRACE_MUTE_EXCLUDE ? X_ENVEXCL : X_MUTED);
		/* The calls the budget saw, all short or few long: evidence too. */
		x->calls += r->calls_observed;
		if (r->why == KTRACE_MUTE_HOT_SHORT && (double)r->events_before / (el > 1e-3 ? el : 1e-3) > x->mrate)
			x->mrate = (double)r->events_before / (el > 1e-3 ? el : 1e-3);
	}
	free(fx);
	return unnamed;
}

static const char *xknown(const struct xname *x)
{
	if (x->flags & X_MUTED)
		return "muted by the budget";
	if (x->flags & X_ENVEXCL)
		return "excluded by KTRACE_EXCLUDE";
	if (x->calls)
		return "short in the window";
	if (x->flags & X_FUNCS)
		return "called, not in the window";
	return "not called in this trace";
}

static void xrate_str(double r, char *buf, size_t len)
{
	if (r >= 1e6)
		snprintf(buf, len, "%.1fM", r / 1e6);
	else if (r >= 1e3)
		snprintf(buf, len, "%.1fk", r / 1e3);
	else
		snprintf(buf, len, "%.0f", r);
}

/* Would x's entry also exclude a function with long calls?  That one, or
 * NULL. */
static const struct xname *xtakes_long(struct xname *const *v, uint32_t n,
                                       const struct xname *x)
{
	for (uint32_t j = 0; j < n; j++)
		if (v[j] != x && xlong(v[j]) && strstr(v[j]->key, x->entry))
			return v[j];
	return NULL;
}

/* Steps 3 and 4: X_PICK on what is listed, X_DROP on what is left out
 * for another's long calls, X_IMPLIED on entries another one covers.
 * A function left out stays instrumented, so the pick goes on down the
 * list past it until what is left fits.  Returns the events/s of the
 * short functions left instrumented. */
static double xpick(struct xname **v, uint32_t n, double budget)
{
	double left = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct xname *x = v[i];
		if (xlong(x))
			continue;
		if (!(x->flags & (X_MUTED | X_ENVEXCL))) {
			left += x->calls >= XMIN_CALLS ? x->wrate : 0;
		} else if ((x->taken = xtakes_long(v, n, x)) != NULL) {
			x->flags |= X_DROP;
			left += x->calls >= XMIN_CALLS ? x->wrate : 0;
		} else {
			x->flags |= X_PICK;
		}
	}
	for (uint32_t i = 0; i < n && left >= budget / 2; i++) {
		struct xname *x = v[i];
		if ((x->flags & (X_PICK | X_DROP | X_MUTED | X_ENVEXCL)) || x->calls < XMIN_CALLS ||
		    xlong(x))
			continue;
		if ((x->taken = xtakes_long(v, n, x)) != NULL) {
			x->flags |= X_DROP;   /* stays instrumented: on to the next */
			continue;
		}
		x->flags |= X_PICK;
		left -= x->wrate;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct xname *x = v[i];
		for (uint32_t j = 0; j < n && (x->flags & X_PICK) && !(x->flags & X_IMPLIED); j++)
			if (v[j] != x && (v[j]->flags & X_PICK) && !(v[j]->flags & X_IMPLIED) &&
			    strstr(x->entry, v[j]->entry))
				x->flags |= X_IMPLIED;
	}
	return left;
}

/* Is x excluded by some entry (listed or taken along)? */
static int xgone(struct xname *const *v, uint32_t n, const struct xname *x);

/* The hot functions not listed only for a rare very long call (under 1 in
 * XLONG_RATIO calls long, but one of XALWAYS_LONG x max_us): offered on
 * stderr, hottest first, until what stays instrumented fits half the
 * budget.  X_OFFER; returns how many. */
static uint32_t xoffer(struct xname **v, uint32_t n, double budget)
{
	double rest = 0;
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++)
		if (v[i]->calls && !xgone(v, n, v[i]))
			rest += xrate(v[i]);
	for (uint32_t i = 0; i < n && rest >= budget / 2 && k < 16; i++) {
		struct xname *x = v[i];
		int takes_long = 0;

		if (!xlong(x) || x->long_calls * XLONG_RATIO >= x->calls || x->calls < XMIN_CALLS ||
		    xgone(v, n, x))
			continue;
		for (uint32_t j = 0; j < n && !takes_long; j++)
			takes_long = v[j] != x && xlong(v[j]) && !(v[j]->flags & X_OFFER) &&
			             v[j]->long_calls * XLONG_RATIO >= v[j]->calls &&
			             strstr(v[j]->key, x->entry);
		if (takes_long)
			continue;
		x->flags |= X_OFFER;
		rest -= xrate(x);
		k++;
	}
	return k;
}

/* Is x excluded by some entry (listed or taken along)? */
static int xgone(struct xname *const *v, uint32_t n, const struct xname *x)
{
	for (uint32_t j = 0; j < n; j++)
		if ((v[j]->flags & X_PICK) && strstr(x->key, v[j]->entry))
			return 1;
	return 0;
}

static void xnotes(const char *file, struct xname *const *v, uint32_t n,
                   uint64_t max_ns, double left, double budget, uint32_t unnamed,
                   uint32_t noffer)
{
	uint32_t npick = 0, nmuted = 0, nenv = 0;
	double total = 0, listed = 0;
	char r1[32], d1[32];

	for (uint32_t i = 0; i < n; i++) {
		total += xrate(v[i]);
		if (!(v[i]->flags & X_PICK))
			continue;
		npick++;
		listed += xrate(v[i]);
		nmuted += !!(v[i]->flags & X_MUTED);
		nenv += (v[i]->flags & (X_MUTED | X_ENVEXCL)) == X_ENVEXCL;
	}
	fprintf(stderr, "ktrace-decode: %s: %" PRIu32 " functions to exclude (%" PRIu32 " muted by "
	        "the budget, %" PRIu32 " by KTRACE_EXCLUDE, %" PRIu32 " short ones from the window, "
	        "hottest first), ~%.1f%% of the events seen; GCC also excludes every function "
	        "whose name contains an entry:\n", file, npick, nmuted, nenv,
	        npick - nmuted - nenv, total > 0 ? 100.0 * listed / total : 0.0);
	if (unnamed)
		fprintf(stderr, "  %" PRIu32 " muted functions have no name (no symbol table): not "
		        "listed\n", unnamed);
	for (uint32_t i = 0; i < n; i++) {
		const struct xname *x = v[i];

		kd_time_fmt_dur(x->max_ns, d1, sizeof(d1));
		if ((x->flags & (X_MUTED | X_ENVEXCL)) && xlong(x))
			fprintf(stderr, "  %s: %s, but %" PRIu64 " of its %" PRIu64 " calls seen took %"
			        PRIu64 " us or more (longest %s): not listed\n", x->key,
			        xknown(x), x->long_calls, x->calls, max_ns / 1000, d1);
		if (x->flags & X_DROP) {
			kd_time_fmt_dur(x->taken->max_ns, d1, sizeof(d1));
			fprintf(stderr, "  %s: left out: its entry would also exclude %s, which made %"
			        PRIu64 " of %" PRIu64 " calls of %" PRIu64 " us or more (longest %s)\n",
			        x->key, x->taken->key, x->taken->long_calls, x->taken->calls,
			        max_ns / 1000, d1);
		}
		if (!(x->flags & X_PICK))
			continue;
		if (x->long_calls)
			fprintf(stderr, "  %s: %" PRIu64 " of its %" PRIu64 " calls seen took %"
			        PRIu64 " us or more (longest %s): under 1 in %d, those %d times that "
			        "under 1 in %d, and none blocked, so taken for interruptions, as the "
			        "budget does\n", x->key, x->long_calls, x->calls, max_ns / 1000, d1,
			        XLONG_RATIO, XALWAYS_LONG, XVERY_RATIO);
		for (uint32_t j = 0, said = 0; j < n && !(x->flags & X_IMPLIED); j++) {
			const struct xname *y = v[j];
			if (y == x || (y->flags & X_PICK) || !strstr(y->key, x->entry))
				continue;
			if (said++ < 8)
				fprintf(stderr, "  %s: also excludes %s (%s)\n", x->entry, y->key,
				        xknown(y));
			else if (said == 9)
				fprintf(stderr, "  %s: ... and more names that contain it\n", x->entry);
		}
	}
	if (noffer) {
		fprintf(stderr, "  hot, but each made a rare very long call (under 1 in %d of its calls "
		        "long, one of %" PRIu64 " us or more): not listed; excluding them too loses "
		        "those calls from the trace:\n", XLONG_RATIO, XALWAYS_LONG * max_ns / 1000);
		for (uint32_t i = 0; i < n; i++) {
			const struct xname *x = v[i];
			if (!(x->flags & X_OFFER))
				continue;
			xrate_str(xrate(x), r1, sizeof(r1));
			kd_time_fmt_dur(x->max_ns, d1, sizeof(d1));
			fprintf(stderr, "    %-28s %8s events/s  %" PRIu64 " of %" PRIu64 " calls >= %"
			        PRIu64 " us, longest %s\n", x->key, r1, x->long_calls, x->calls,
			        max_ns / 1000, d1);
		}
		fprintf(stderr, "  to go further: -finstrument-functions-exclude-function-list=");
		for (uint32_t i = 0, k = 0; i < n; i++)
			if (((v[i]->flags & X_PICK) && !(v[i]->flags & X_IMPLIED)) ||
			    (v[i]->flags & X_OFFER))
				fprintf(stderr, "%s%s", k++ ? "," : "", v[i]->entry);
		fprintf(stderr, "\n");
	}
	xrate_str(left, r1, sizeof(r1));
	xrate_str(budget, d1, sizeof(d1));
	fprintf(stderr, "  left instrumented: the short functions make ~%s events/s (the budget: "
	        "%s per core); the hottest functions left:\n", r1, d1);
	for (uint32_t i = 0, said = 0; i < n && said < 8; i++) {
		const struct xname *x = v[i];
		if (!x->calls || xgone(v, n, x) || (x->flags & X_OFFER))
			continue;
		said++;
		xrate_str(xrate(x), r1, sizeof(r1));
		kd_time_fmt_dur(x->max_ns, d1, sizeof(d1));
		fprintf(stderr, "    %-28s %8s events/s  %s (%" PRIu64 " of %" PRIu64 " calls >= %"
		        PRIu64 " us, longest %s)\n", x->key, r1,
		        xlong(x) ? "long" : (x->flags & X_DROP) ? "short, left out" : "short",
		        x->long_calls, x->calls, max_ns / 1000, d1);
	}
}

void kd_out_exclude(FILE *f, struct kd_dec *const *decs, int ndecs)
{
	const struct kd_dec *d0 = NULL;
	uint64_t max_ns = 5000;
	double budget = 0, left;
	struct xset xs = {0};
	struct xname **v;
	uint32_t nout = 0, unnamed = 0, nfiles = 0, noffer;
	char files[64];

	/* The budget's settings from the first file that has them. */
	for (int i = ndecs - 1; i >= 0; i--) {
		const struct kd_snap *s = decs[i] ? &decs[i]->snap : NULL;
		if (!s)
			continue;
		d0 = decs[i];
		nfiles++;
		if (s->have_budget) {
			max_ns = s->budget.max_us * 1000ull;
			budget = (double)s->budget.sustainable_wps;
		} else if (budget == 0) {
			budget = (double)s->info.ring_bytes_per_core / 4 / 30;
		}
	}
	if (!d0)
		return;
	for (int i = 0; i < ndecs; i++) {
		struct xmods m = {0};
		if (!decs[i])
			continue;
		xmods_open(decs[i], &m, &xs);
		unnamed += xobserve(decs[i], &m, &xs, max_ns);
		xmods_close(&decs[i]->snap, &m);
	}
	v = kd_xcalloc(xs.n + 1, sizeof(*v), "the exclude names");
	for (uint32_t i = 0; i < xs.n; i++)
		v[i] = &xs.v[i];
	qsort(v, xs.n, sizeof(*v), by_rate);
	left = xpick(v, xs.n, budget);
	if (nfiles > 1)
		snprintf(files, sizeof(files), "%" PRIu32 " files", nfiles);
	noffer = xoffer(v, xs.n, budget);
	xnotes(nfiles > 1 ? files : d0->file, v, xs.n, max_ns, left, budget, unnamed, noffer);
	for (uint32_t i = 0; i < xs.n; i++)
		if ((v[i]->flags & X_PICK) && !(v[i]->flags & X_IMPLIED))
			fprintf(f, "%s%s", nout++ ? "," : "-finstrument-functions-exclude-function-list=",
			        v[i]->entry);
	if (nout)
		fprintf(f, "\n");
	else
		fprintf(stderr, "  (nothing to exclude)\n");
	for (uint32_t i = 0; i < xs.n; i++) {
		free(xs.v[i].key);
		free(xs.v[i].entry);
	}
	free(xs.v);
	free(xs.tab);
	free(v);
}
