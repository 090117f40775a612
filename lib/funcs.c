/*
 * funcs.c - function address -> compact id, user names -> name ids, and
 * the map of executable modules for symbolization.
 *
 * Function table: open addressing over KT_FTAB slots of {addr, id}, keys
 * claimed with a CAS from 0, never removed.  The claimer then takes the
 * next compact id (or KTRACE_FUNC_NO_ID when the 2016 are used up) and
 * publishes it with a store-release; a reader that finds the key before
 * the id is published waits for it (the claimer is in the same few
 * instructions of the slow path; it cannot be this thread, whose nesting
 * guard keeps a signal handler out of the slow path).  When the table is
 * full the function is still traced, through full-address records.
 *
 * Module map: every executable file mapping ever seen, kept so a library
 * that was dlclose()d before the snapshot still symbolizes.  It is
 * refreshed from /proc/self/maps when a new function's address lies in no
 * known module (and at each snapshot); the refresh is serialized by a
 * try-lock, and a thread that finds it busy skips it (the holder's scan or
 * the snapshot's will see the mapping).
 */
#include "internal.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KT_FTAB (1u << 18)         /* function slots, power of two */
/* A slot's id field holds the compact id + 1 (or KTRACE_FUNC_NO_ID + 1
 * for a function without one, KT_ID_FULL): 0 means "claimed, not
 * yet published", which is what the zero-filled table holds. */
#define KT_ID_PENDING 0u
#define KT_ID_FULL 0xFFFFFFFFu

struct kt_fslot {
	_Atomic uint64_t addr;         /* 0 = free; set once by CAS */
	_Atomic uint32_t id;           /* compact id + 1, KT_ID_FULL, or
	                                  KT_ID_PENDING (0) until published */
	uint32_t pad;
};

static struct kt_fslot *ftab;      /* KT_FTAB slots, mmapped at init */
static _Atomic uint32_t next_id;   /* compact ids handed out */
static _Atomic uint32_t nfuncs;    /* slots used */
static _Atomic uint32_t claiming;  /* registrations between claim and publish */

#define KT_NAMES 4096u             /* name ids 1..KT_NAMES-1 */
#define KT_NAME_LEN 63

struct kt_name {
	_Atomic uintptr_t ptr;         /* user's string address; 0 = free */
	_Atomic uint32_t id;           /* published id, 0 until then */
	uint16_t kind;                 /* enum ktrace_name_kind */
	uint16_t len;                  /* bytes in text */
	char text[KT_NAME_LEN + 1];
};
static struct kt_name *ntab;       /* hash slots */
static struct kt_name *_Atomic nbyid[KT_NAMES]; /* id -> slot, set before the id is published */
static _Atomic uint32_t next_name = 1;

#define KT_MODULES 1024u
#define KT_PATH 256
struct kt_module {
	uint64_t start, end, offset;
	uint64_t dev, ino;             /* of the file mapped (maps line) */
	uint64_t size;                 /* bytes of the file at first sight, 0 = unknown */
	int64_t mtime_ns;              /* its mtime then, 0 = unknown */
	char path[KT_PATH];
	/* writer thread only (ktrace__modules_buildids) */
	uint8_t id_len;                /* build-id bytes, 0 = none found yet */
	uint8_t id[32];
};
static struct kt_module *mods;      /* KT_MODULES entries */
static _Atomic uint32_t nmods;      /* published count */
static _Atomic int32_t scan_holder; /* the module scan's lock: its thread's tid, 0: free (rescan) */

static KT_NOINSTR void *map_zero(size_t bytes)
{
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return m == MAP_FAILED ? NULL : m;
}

KT_NOINSTR int ktrace__funcs_init(void)
{
	ftab = map_zero(sizeof(*ftab) * KT_FTAB);
	ntab = map_zero(sizeof(*ntab) * KT_NAMES * 2);
	mods = map_zero(sizeof(*mods) * KT_MODULES);
	return ftab && ntab && mods ? 0 : KTRACE_ENOMEM;
}

/* mlockall() locked everything: unlock the tables (memlock.c). */
KT_NOINSTR void ktrace__funcs_unlock(void)
{
	if (ftab)
		munlock(ftab, sizeof(*ftab) * KT_FTAB);
	if (ntab)
		munlock(ntab, sizeof(*ntab) * KT_NAMES * 2);
	if (mods)
		munlock(mods, sizeof(*mods) * KT_MODULES);
}

/* Start-up failed: give the tables back. */
KT_NOINSTR void ktrace__funcs_free(void)
{
	if (ftab)
		munmap(ftab, sizeof(*ftab) * KT_FTAB);
	if (ntab)
		munmap(ntab, sizeof(*ntab) * KT_NAMES * 2);
	if (mods)
		munmap(mods, sizeof(*mods) * KT_MODULES);
	ftab = NULL;
	ntab = NULL;
	mods = NULL;
}

static inline KT_NOINSTR uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static KT_NOINSTR uint32_t wait_id(_Atomic uint32_t *p, uint32_t pending)
{
	uint32_t v;

	/* acquire: pairs with the claimer's release store of the id. */
	while ((v = kt_load(p, acquire)) == pending)
		sched_yield();
	return v;
}

/*
 * A function's first slot.  Each 32 KiB of code has a run of 256 slots,
 * one page of the table, placed at random; within it a function's slot
 * is a hash of its address (16-byte units).  A program's first calls
 * touch about one page of the table per 32 KiB of code, not one page per
 * function as with a hash spreading every function over the 4 MiB (Lua:
 * ~550 pages, each a read fault, a write fault and a TLB flush
 * interrupting the other cores once a second thread exists).  A first
 * touch is a page fault in the thread that makes a function's first
 * call: ~20 us each on this VM, where runs of 1024 slots (a page per 16
 * KiB) cost SQLite's short lean run 46 of them, ~1 ms.
 *
 * Runs were once 64 KiB of code with slots in address order (one per
 * 256 bytes), which crowded: a 64 KiB of small functions holds more than
 * 256 of them, and functions closer than 256 bytes took the next slots,
 * so runs filled and spilled into each other.  Lookups in SQLite's table
 * took 34 probes on average (simulated from its symbols), 167 for 5,000
 * functions of ~100 bytes; a call that missed its thread's cache (a
 * function past the 2016 compact ids, or two functions evicting each
 * other) paid them: 100,000 functions of 16 bytes, each called 6 times,
 * took 0.85 s of slow paths, now 0.2 s.  Now 1.4 and 25 probes.  A run
 * that still fills spills into the next slots, another page: the store
 * below is made again where a probe enters one.
 */
static inline KT_NOINSTR uint64_t fslot(uintptr_t fn)
{
	return (((uint64_t)(fn >> 4) * 0x9E3779B97F4A7C15ull) >> 56) +
	       (mix((uint64_t)fn >> 15) << 8);
}

/* The page of each 32 KiB's run of slots (fslot) for the code in
 * [lo, hi): touched by the writer thread, so that a program thread's
 * first calls there find the page in place (a first touch cost it a
 * fault, ~15 us in the 2-core VM: 12 of SQLite's short lean run). */
KT_NOINSTR void ktrace__funcs_touch_code(uint64_t lo, uint64_t hi)
{
	if (ftab == NULL)
		return;
	for (uint64_t a = lo & ~0x7fffull; a < hi; a += 0x8000)
		ktrace__touch_pages(&ftab[fslot((uintptr_t)a) & (KT_FTAB - 1)].pad, sizeof(uint32_t));
}

KT_NOINSTR uint32_t ktrace__func_event(uintptr_t fn)
{
	uint64_t h = fslot(fn);

	/* A store first: a page of the table this touches for the first time
	 * is then allocated as it is written, not mapped to the zero page by
	 * the loads below and copied at the claim, with a TLB flush that
	 * interrupts every other core running the program. */
	__atomic_store_n(&ftab[h & (KT_FTAB - 1)].pad, 0, __ATOMIC_RELAXED);

	for (uint32_t i = 0; i < KT_FTAB; i++) {
		struct kt_fslot *s = &ftab[(h + i) & (KT_FTAB - 1)];
		uint64_t a, zero = 0;
		uint32_t id;

		if (i > 0 && ((h + i) & 255) == 0)   /* a page of the table */
			__atomic_store_n(&s->pad, 0, __ATOMIC_RELAXED);
		a = kt_load(&s->addr, acquire);

		if (a == 0) {
			/* The module first, while this thread holds no pending
			 * id: the scan may wait for another thread's, whose
			 * own signal handler may wait for such an id. */
			ktrace__module_note(fn);
			/* Counted before the claim so a fork child knows whether
			 * a parent thread may have left an id unpublished. */
			kt_add(&claiming, 1, relaxed);
			/* acq_rel on success: release orders nothing yet (id is
			 * published below); acquire on failure is not needed
			 * since we re-read the slot through the loop. */
			if (!kt_cas(&s->addr, &zero, (uint64_t)fn, acq_rel)) {
				kt_add(&claiming, -1, relaxed);
				if (zero != (uint64_t)fn)
					continue;
				id = wait_id(&s->id, KT_ID_PENDING);
			} else {
				uint32_t n = kt_add(&next_id, 1, relaxed);
				id = n < KTRACE_FUNC_ID_COUNT ? n + 1 : KT_ID_FULL;
				kt_add(&nfuncs, 1, relaxed);
				if (id != KT_ID_FULL)   /* KTRACE_EXCLUDE/INCLUDE */
					ktrace__filter_new_func(id - 1, fn);
				/* release: pairs with wait_id()'s acquire and the
				 * snapshot's acquire load in ktrace__funcs_copy. */
				kt_store(&s->id, id, release);
				kt_add(&claiming, -1, relaxed);
			}
		} else if (a == (uint64_t)fn) {
			id = wait_id(&s->id, KT_ID_PENDING);
		} else {
			continue;
		}
		return id == KT_ID_FULL ? 0 : KTRACE_EV_ENTER_BASE + id - 1;
	}
	return 0; /* table full: full-address records */
}

/* Tests: the slots a lookup of fn reads, its own included (0: not in the
 * table). */
KT_NOINSTR uint32_t ktrace__funcs_test_probes(uintptr_t fn)
{
	uint64_t h = fslot(fn);

	for (uint32_t i = 0; i < KT_FTAB; i++) {
		uint64_t a = kt_load(&ftab[(h + i) & (KT_FTAB - 1)].addr, acquire);

		if (a == (uint64_t)fn)
			return i + 1;
		if (a == 0)
			return 0;
	}
	return 0;
}

/*
 * Fork child: a parent thread that was between claiming a slot and
 * publishing its id does not exist here; publish such ids as "no compact
 * id" (those functions use full-address records in the child) so nobody
 * waits for them.  The module lock may have been held too.
 */
KT_NOINSTR void ktrace__funcs_fork_child(void)
{
	kt_store(&scan_holder, 0, relaxed);   /* the module scan's lock */
	if (kt_load(&claiming, relaxed) == 0)
		return;
	for (uint32_t i = 0; i < KT_FTAB; i++)
		if (kt_load(&ftab[i].addr, relaxed) &&
		    kt_load(&ftab[i].id, relaxed) == KT_ID_PENDING)
			kt_store(&ftab[i].id, KT_ID_FULL, release);
	kt_store(&claiming, 0, relaxed);
}

KT_NOINSTR size_t ktrace__funcs_count(void)
{
	return kt_load(&nfuncs, relaxed);
}

/* The compact ids handed out so far are below this: the writer's loops
 * over them stop here instead of at KTRACE_FUNC_ID_COUNT (Lua uses ~320
 * of 2016, and the budget's per-function state is ~100 bytes each).  An
 * id handed out after the load is not covered: its first sample waits for
 * the next look.  relaxed: a bound, nothing read through it. */
KT_NOINSTR uint32_t ktrace__funcs_ids(void)
{
	uint32_t n = kt_load(&next_id, relaxed);

	return n < KTRACE_FUNC_ID_COUNT ? n : KTRACE_FUNC_ID_COUNT;
}

KT_NOINSTR size_t ktrace__funcs_copy(struct ktrace_func_rec *dst, size_t max)
{
	size_t k = 0;

	for (uint32_t i = 0; i < KT_FTAB && k < max; i++) {
		uint64_t a = kt_load(&ftab[i].addr, acquire);
		uint32_t id;

		if (a == 0)
			continue;
		id = kt_load(&ftab[i].id, acquire);
		if (id == KT_ID_PENDING)   /* being registered: no record yet */
			continue;
		dst[k].addr = a;
		dst[k].id = id == KT_ID_FULL ? KTRACE_FUNC_NO_ID : id - 1;
		dst[k].flags = 0;
		k++;
	}
	return k;
}

/* Names are pointers to strings the caller keeps alive (literals). */
KT_NOINSTR uint32_t ktrace__name_id(const char *name, int kind)
{
	uint64_t h = mix((uintptr_t)name);
	uint32_t cap = KT_NAMES * 2;

	for (uint32_t i = 0; i < cap; i++) {
		struct kt_name *s = &ntab[(h + i) & (cap - 1)];
		uintptr_t p = kt_load(&s->ptr, acquire), zero = 0;

		if (p == (uintptr_t)name)
			return wait_id(&s->id, 0) & 0xFFFFFF;
		if (p != 0)
			continue;
		if (!kt_cas(&s->ptr, &zero, (uintptr_t)name, acq_rel)) {
			if (zero == (uintptr_t)name)
				return wait_id(&s->id, 0) & 0xFFFFFF;
			continue;
		}
		uint32_t id = kt_add(&next_name, 1, relaxed);
		size_t n = strnlen(name, KT_NAME_LEN);
		memcpy(s->text, name, n);
		s->text[n] = 0;
		s->len = (uint16_t)n;
		s->kind = (uint16_t)kind;
		if (id >= KT_NAMES)
			id = 0x1000000; /* full: low 24 bits 0 = "no id" */
		else
			kt_store(&nbyid[id], s, relaxed); /* published by the release below */
		/* release: pairs with wait_id() and ktrace__names_serialize. */
		kt_store(&s->id, id, release);
		return id & 0xFFFFFF;
	}
	return 0;
}

KT_NOINSTR const char *ktrace__name_text(uint32_t id)
{
	struct kt_name *s;

	if (id == 0 || id >= KT_NAMES)
		return "";
	/* acquire: pairs with the release store of the id after the text. */
	s = kt_load(&nbyid[id], acquire);
	return s && kt_load(&s->id, acquire) == id ? s->text : "";
}

KT_NOINSTR size_t ktrace__names_serialize(void *dst, size_t cap, uint32_t *count)
{
	unsigned char *o = dst;
	size_t used = 0;
	uint32_t n = kt_load(&next_name, relaxed);

	*count = 0;
	for (uint32_t id = 1; id < n && id < KT_NAMES; id++) {
		struct kt_name *s = kt_load(&nbyid[id], acquire);
		struct ktrace_name_rec r;
		size_t sz;

		/* acquire: the id was published after the text was copied. */
		if (s == NULL || kt_load(&s->id, acquire) != id)
			continue;
		sz = (sizeof(r) + s->len + 3) & ~(size_t)3;
		if (used + sz > cap)
			break;
		r.id = id;
		r.len = s->len;
		r.kind = s->kind;
		memcpy(o + used, &r, sizeof(r));
		memcpy(o + used + sizeof(r), s->text, s->len);
		memset(o + used + sizeof(r) + s->len, 0, sz - sizeof(r) - s->len);
		used += sz;
		(*count)++;
	}
	return used;
}

/* ---- modules ----------------------------------------------------------- */

static KT_NOINSTR int known(uint64_t addr)
{
	/* acquire: pairs with the release store of nmods after an append. */
	uint32_t n = kt_load(&nmods, acquire);

	for (uint32_t i = 0; i < n; i++)
		if (addr >= mods[i].start && addr < mods[i].end)
			return 1;
	return 0;
}

static KT_NOINSTR uint64_t hexnum(const char **pp)
{
	const char *p = *pp;
	uint64_t v = 0;

	for (;; p++) {
		int d;
		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else
			break;
		v = v * 16 + (uint64_t)d;
	}
	*pp = p;
	return v;
}

static struct statx scan_stx;      /* under scan_holder (maps_line) */

/* One /proc/self/maps line, "start-end perms offset dev inode   path",
 * into *m (path: NULL when none; dev: major << 32 | minor); 0 when the
 * line is well formed. */
KT_NOINSTR int ktrace__maps_parse(const char *l, struct kt_maps_line *m)
{
	const char *p = l;

	memset(m, 0, sizeof(*m));
	m->start = hexnum(&p);
	if (*p++ != '-')
		return -1;
	m->end = hexnum(&p);
	if (*p++ != ' ' || strnlen(p, 4) < 4)
		return -1;
	memcpy(m->perms, p, 4);
	p += 4;
	if (*p++ != ' ')
		return -1;
	m->offset = hexnum(&p);
	if (*p == ' ') {   /* "dev inode": major:minor in hex, inode in decimal */
		uint64_t maj, min = 0;

		p++;
		maj = hexnum(&p);
		if (*p == ':') {
			p++;
			min = hexnum(&p);
		}
		m->dev = (maj << 32) | min;
		while (*p == ' ')
			p++;
		while (*p >= '0' && *p <= '9')
			m->ino = m->ino * 10 + (uint64_t)(*p++ - '0');
	}
	m->path = strchr(p, '/');
	return 0;
}

/* An executable mapping with a path: the module table's (rescan). */
static KT_NOINSTR void maps_line(const char *l, void *arg)
{
	struct kt_maps_line ml;
	uint32_t n;

	(void)arg;
	if (ktrace__maps_parse(l, &ml) != 0 || ml.perms[2] != 'x' || ml.path == NULL)
		return;
	n = kt_load(&nmods, relaxed);
	for (uint32_t i = 0; i < n; i++)
		if (mods[i].start == ml.start && mods[i].end == ml.end &&
		    strncmp(mods[i].path, ml.path, KT_PATH - 1) == 0)
			return;
	if (n >= KT_MODULES)
		return;
	mods[n].start = ml.start;
	mods[n].end = ml.end;
	mods[n].offset = ml.offset;
	mods[n].dev = ml.dev;
	mods[n].ino = ml.ino;
	strncpy(mods[n].path, ml.path, KT_PATH - 1);
	mods[n].path[KT_PATH - 1] = 0;
	/* The file's size and mtime now, for files without a build-id (a
	 * system call: fine in a signal handler; scan_stx is static, under
	 * scan_holder like the scan buffers). */
	mods[n].size = 0;
	mods[n].mtime_ns = 0;
	if (statx(AT_FDCWD, mods[n].path, 0, STATX_SIZE | STATX_MTIME, &scan_stx) == 0) {
		mods[n].size = scan_stx.stx_size;
		mods[n].mtime_ns = (int64_t)scan_stx.stx_mtime.tv_sec * 1000000000 +
		                   scan_stx.stx_mtime.tv_nsec;
	}
	/* release: the entry above is complete before readers count it. */
	kt_store(&nmods, n + 1, release);
}

/*
 * /proc/self/maps, each line (cut at llen - 1 bytes) to fn, read with
 * system calls into the caller's buf and lbuf: no stdio, no allocation, no
 * libc open/read a program may interpose, so it serves the slow path
 * inside a signal handler and a fork child's handler.  Each read takes the
 * mapping lock (noted: filter.c).  0 when the file was read whole.
 */
KT_NOINSTR int ktrace__maps_read(void (*fn)(const char *line, void *arg), void *arg, char *buf,
                                 size_t blen, char *lbuf, size_t llen)
{
	size_t ll = 0;
	ssize_t r;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	for (;;) {
		int64_t t0 = ktrace__monotonic_ns();

		r = syscall(SYS_read, fd, buf, blen);
		ktrace__filter_own_mm(t0, ktrace__monotonic_ns());
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] == '\n') {
				lbuf[ll] = 0;
				fn(lbuf, arg);
				ll = 0;
			} else if (ll < llen - 1) {
				lbuf[ll++] = buf[i];
			}
		}
	}
	syscall(SYS_close, fd);
	return r < 0 ? -1 : 0;
}

/* The module table's scan: its buffers are static, used under scan_holder:
 * the slow path runs on the application's stack, which can be a small
 * signal alternate stack. */
static char scan_buf[4096];        /* under scan_holder */
static char scan_line[512];        /* under scan_holder */

/*
 * A scan of /proc/self/maps that begins after the call: addr known then
 * (addr 0: the snapshot's scan, which must see every module mapped now).
 * A thread that finds another one scanning waits for it and looks again,
 * scanning itself if addr is still unknown: the other scan may have read
 * the maps before addr's module was mapped (eight threads dlopening at
 * once: one in ten runs left a library's functions unnamed, and so not
 * excluded, for good).  It does not wait for its own thread's scan (a
 * signal handler that interrupted it), nor for longer than SCAN_WAIT_NS
 * (a scanning thread stopped by a debugger): the snapshot's scan then
 * names what this one could not.
 */
#define SCAN_WAIT_NS 200000000LL
static _Atomic uint32_t scan_gen;      /* scans begun */
static _Atomic uint32_t scan_stuck;    /* scan_gen + 1 of one waited out, 0: none */
static _Atomic uint32_t scan_timeouts; /* waits given up (tests) */

/* The lock is the scanning thread's tid (0: free), taken and let go in
 * one operation each, so that the thread's own signal handler always
 * knows it for its own. */
static KT_NOINSTR int scan_lock(int32_t self)
{
	int32_t zero = 0;

	/* acquire: pairs with the release store of the last scanner */
	if (!kt_cas(&scan_holder, &zero, self, acquire))
		return 0;
	kt_add(&scan_gen, 1, relaxed);
	return 1;
}

static KT_NOINSTR void rescan(uint64_t addr)
{
	int32_t self;
	int64_t until = 0;
	uint32_t g;

	if (addr != 0 && known(addr))
		return;
	self = (int32_t)syscall(SYS_gettid);
	while (!scan_lock(self)) {
		if (kt_load(&scan_holder, relaxed) == self)
			return;   /* a handler in its own thread's scan */
		/* a scan waited out once (stopped by a debugger, or a vfork
		 * child's killed mid-scan) is not waited for again */
		g = kt_load(&scan_gen, relaxed);
		if (kt_load(&scan_stuck, relaxed) == g + 1)
			return;
		if (until == 0)
			until = ktrace__monotonic_ns() + SCAN_WAIT_NS;
		if (ktrace__monotonic_ns() > until) {
			kt_store(&scan_stuck, g + 1, relaxed);
			kt_add(&scan_timeouts, 1, relaxed);
			return;
		}
		syscall(SYS_sched_yield);
		if (addr != 0 && known(addr))
			return;
	}
	ktrace__maps_read(maps_line, NULL, scan_buf, sizeof(scan_buf), scan_line, sizeof(scan_line));
	/* release: the table and the buffers before the next scanner */
	kt_store(&scan_holder, 0, release);
}

/* Tests: hold the scan lock as a scan in progress would (on), or let it
 * go (off), from the calling thread; the waits given up so far. */
KT_NOINSTR void ktrace__modules_test_hold(int on)
{
	if (on) {
		int32_t self = (int32_t)syscall(SYS_gettid);

		while (!scan_lock(self))
			syscall(SYS_sched_yield);
		return;
	}
	kt_store(&scan_holder, 0, release);
}

KT_NOINSTR uint32_t ktrace__modules_test_timeouts(void)
{
	return kt_load(&scan_timeouts, relaxed);
}

/* The module holding addr: its mapping start, file offset and path. */
KT_NOINSTR int ktrace__module_of(uintptr_t addr, uint64_t *start, uint64_t *offset,
                                 char *path, size_t len)
{
	/* acquire: pairs with the release store of nmods after an append. */
	uint32_t n = kt_load(&nmods, acquire);

	for (uint32_t i = 0; i < n; i++)
		if (addr >= mods[i].start && addr < mods[i].end) {
			*start = mods[i].start;
			*offset = mods[i].offset;
			/* not snprintf: printf's work buffers would take
			 * about 1 KiB of the caller's (slow path's) stack */
			size_t k = strnlen(mods[i].path, KT_PATH);
			if (len == 0)
				return -1;
			if (k >= len)
				k = len - 1;
			memcpy(path, mods[i].path, k);
			path[k] = 0;
			return 0;
		}
	return -1;
}

KT_NOINSTR void ktrace__module_note(uintptr_t addr)
{
	rescan(addr);
}

/* ---- build-ids (writer thread) --------------------------------------------- */

/* The NT_GNU_BUILD_ID of a loaded object, from its PT_NOTE segments in
 * memory: the running code's, whatever the file on disk is now. */
static KT_NOINSTR void note_ids(struct dl_phdr_info *info, uint8_t *id, uint8_t *len)
{
	for (int i = 0; i < info->dlpi_phnum && *len == 0; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
		size_t left = ph->p_memsz;

		if (ph->p_type != PT_NOTE)
			continue;
		while (left >= sizeof(ElfW(Nhdr))) {
			ElfW(Nhdr) nh;
			size_t nsz, dsz;

			memcpy(&nh, p, sizeof(nh));
			nsz = (nh.n_namesz + 3) & ~(size_t)3;
			dsz = (nh.n_descsz + 3) & ~(size_t)3;
			if (nsz > left - sizeof(nh) || dsz > left - sizeof(nh) - nsz)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp(p + sizeof(nh), "GNU", 4) == 0 && nh.n_descsz > 0 &&
			    nh.n_descsz <= 32) {
				memcpy(id, p + sizeof(nh) + nsz, nh.n_descsz);
				*len = (uint8_t)nh.n_descsz;
				return;
			}
			p += sizeof(nh) + nsz + dsz;
			left -= sizeof(nh) + nsz + dsz;
		}
	}
}

static KT_NOINSTR int object_ids(struct dl_phdr_info *info, size_t size, void *arg)
{
	uint32_t n = *(const uint32_t *)arg;
	uint8_t id[32], len = 0;
	int looked = 0;

	(void)size;
	for (uint32_t m = 0; m < n; m++) {
		if (mods[m].id_len)
			continue;
		for (int i = 0; i < info->dlpi_phnum; i++) {
			const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
			uint64_t lo = info->dlpi_addr + ph->p_vaddr;

			if (ph->p_type != PT_LOAD || mods[m].start < lo ||
			    mods[m].start >= lo + ph->p_memsz)
				continue;
			if (!looked) {
				note_ids(info, id, &len);
				looked = 1;
			}
			if (len) {
				memcpy(mods[m].id, id, len);
				mods[m].id_len = len;
			}
			break;
		}
	}
	return 0;
}

/*
 * ktrace__phdr_iterate (internal.h): a lock fork() takes first.  The
 * forking thread waits at most PHDR_FORK_WAIT_S for it: a call waiting
 * for the loader's lock held by a third thread, whose callback waits for
 * a lock the forking thread took in an earlier prepare handler (an
 * allocator's), would otherwise wait for the fork for good.  After that
 * the fork goes on, and the child may inherit the loader's lock held, as
 * it could without ktrace.  phdr_held is per thread: two threads may fork
 * at once, one of them after the other's wait ran out.
 */
#define PHDR_FORK_WAIT_S 1
static pthread_mutex_t phdr_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int phdr_held __attribute__((tls_model("initial-exec")));

KT_NOINSTR int ktrace__phdr_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
	pthread_mutex_lock(&phdr_lock);
	int r = dl_iterate_phdr(cb, arg);
	pthread_mutex_unlock(&phdr_lock);
	return r;
}

/* A polled wait on the monotonic clock: pthread_mutex_timedlock's
 * deadline is on CLOCK_REALTIME, which a step back (NTP, an operator, a
 * resumed VM) made a wait as long as the step.  The writer's calls take
 * well under a millisecond; 20 us naps. */
static KT_NOINSTR void phdr_prepare(void)
{
	int64_t until = ktrace__monotonic_ns() + PHDR_FORK_WAIT_S * 1000000000LL;
	struct timespec nap = {0, 20000};

	while (!(phdr_held = pthread_mutex_trylock(&phdr_lock) == 0) &&
	       ktrace__monotonic_ns() < until)
		nanosleep(&nap, NULL);
}

static KT_NOINSTR void phdr_parent(void)
{
	if (phdr_held)
		pthread_mutex_unlock(&phdr_lock);
	phdr_held = 0;
}

/* The child's only thread is the one that forked: it unlocks what it
 * took; a lock its wait did not get was some other thread's, which the
 * child does not have: made anew. */
static KT_NOINSTR void phdr_child(void)
{
	if (phdr_held)
		pthread_mutex_unlock(&phdr_lock);
	else
		pthread_mutex_init(&phdr_lock, NULL);
	phdr_held = 0;
}

/* At init (do_init, once a process image), before its own dl_iterate_phdr
 * calls, and after the lean mode's (ktrace__lean_atfork): prepare handlers
 * run last-registered first, so a fork takes this one, then the patch
 * lock, the writer's order (lean.c patch_iterate). */
KT_NOINSTR void ktrace__phdr_atfork(void)
{
	pthread_atfork(phdr_prepare, phdr_parent, phdr_child);
}

/* The BUILDIDS section for the first 'count' modules (as serialized). */
KT_NOINSTR size_t ktrace__modules_buildids(struct ktrace_buildid_rec *dst, size_t max,
                                           uint32_t count)
{
	uint32_t n = kt_load(&nmods, acquire);
	struct statx sx;
	size_t k = 0;

	if (count < n)
		n = count;
	ktrace__phdr_iterate(object_ids, &n);
	for (uint32_t m = 0; m < n && k < max; m++) {
		struct ktrace_buildid_rec *r = &dst[k++];

		memset(r, 0, sizeof(*r));
		r->module = m;
		r->id_len = mods[m].id_len;
		memcpy(r->id, mods[m].id, sizeof(r->id));
		r->file_size = mods[m].size;
		r->mtime_ns = mods[m].mtime_ns;
		/* The path names another file now (a deploy replaced it)? */
		if (mods[m].size && (statx(AT_FDCWD, mods[m].path, 0, STATX_SIZE | STATX_MTIME,
		                           &sx) != 0 || sx.stx_size != mods[m].size ||
		                     (int64_t)sx.stx_mtime.tv_sec * 1000000000 +
		                     sx.stx_mtime.tv_nsec != mods[m].mtime_ns))
			r->flags |= KTRACE_BUILDID_REPLACED;
	}
	return k;
}

KT_NOINSTR size_t ktrace__modules_serialize(void *dst, size_t cap, uint32_t *count)
{
	unsigned char *o = dst;
	size_t used = 0;
	uint32_t n;

	rescan(0);
	n = kt_load(&nmods, acquire);
	*count = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct ktrace_module_rec r;
		size_t pl = strnlen(mods[i].path, KT_PATH);
		size_t sz = (sizeof(r) + pl + 7) & ~(size_t)7;

		if (used + sz > cap)
			break;
		r.start = mods[i].start;
		r.end = mods[i].end;
		r.file_offset = mods[i].offset;
		r.path_len = (uint32_t)pl;
		r.flags = 0;
		memcpy(o + used, &r, sizeof(r));
		memcpy(o + used + sizeof(r), mods[i].path, pl);
		memset(o + used + sizeof(r) + pl, 0, sz - sizeof(r) - pl);
		used += sz;
		(*count)++;
	}
	return used;
}
