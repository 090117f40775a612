/*
 * timeline.c - stages 2-4 of ktrace-decode.
 *
 * Stage 2 (per-core iterator): each core's blocks are ordered by their start
 * counter S (u32, modular: the newest block is the one no other block is
 * ahead of, and every other block sorts by S - S_newest as a signed number),
 * then walked record by record.  Each block starts from the full TSC in its
 * BLOCK_START; every later record's tick follows the rule in
 * ktrace_format.h (forward if d < 2^19, else a small backward step); TSC
 * records reset the reference; BLOCK_START and THREAD records name the
 * thread slot that owns the following records.  An extended record whose
 * payload runs past the block, a reserved event number or a BLOCK_START in
 * the middle of a block ends that block: the tail is reported and skipped.
 *
 * Stage 3 (stacks): a thread's records must be taken in its program order,
 * which a merge by time cannot give: a migrating thread makes several calls
 * per tick, so its last records on one core and its first on the next can
 * share a tick, and cores' clocks differ a little.  So, two passes:
 *
 *   1. scan_cores(): each core's stream is cut into pieces, maximal runs of
 *      records of one (thread slot, segment) -- the segment is the seq of
 *      the THREAD record, which the writer bumps whenever the thread starts
 *      writing on a core.  Per-core statistics, window filtering and the
 *      core tracks (runs) are done here, in stream order.
 *   2. walk_threads(): each thread's pieces, ordered by segment (exact), or
 *      by first tick for writers without segments, are re-read from their
 *      saved iterator state and fed to the stack builder.  Requests are
 *      matched afterwards, in time order, so one may even end on another
 *      thread.
 *
 * Within one thread, ticks are clamped to be non-decreasing so that small
 * backward steps (clock skew at a migration, a late store) never make a
 * child start before its parent.
 *
 *   exit of the frame on top            -> pop it
 *   exit of a frame deeper in the stack -> the frames above it lost their
 *                                          exits: close them (EXIT_LOST,
 *                                          TRUNC_END), then pop it
 *   exit of a function not in the stack -> entered before the window:
 *                                          a TRUNC_BEGIN call starting at the
 *                                          thread's window start; it becomes
 *                                          the parent of everything the thread
 *                                          did so far at the outermost level
 *                                          (if frames are still open, its
 *                                          entry was lost inside the top one:
 *                                          a TRUNC_BEGIN child of it, from the
 *                                          thread's previous record)
 *   frames open at the end              -> TRUNC_END, end = window end
 *
 * The complete window: a core whose ring wrapped lost its older data, so
 * stacks are only complete from the latest first-record time among wrapped
 * cores; and each core's records are complete only up to its CORES
 * copy_tsc, so the window ends at the earliest one.  Records outside are
 * dropped (counted per core) unless --all.
 *
 * Stage 4 (time): ticks -> ns with 128-bit arithmetic; wall clock by
 * piecewise-linear interpolation between ANCHORS, extrapolated with tsc_hz.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "decoder.h"

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static int fail(struct kd_dec_error *err, int code, const char *msg)
{
	if (err) {
		err->code = code;
		err->has_offset = 0;
		err->offset = 0;
		snprintf(err->msg, sizeof(err->msg), "%s", msg);
	}
	return code;
}

/* Grow *arr (elements of size sz) so that index n fits.  -1 only when n is
 * beyond any u32 capacity; out of memory is fatal (kd_dec_oom). */
static int grow(void *arrp, uint32_t *cap, uint32_t n, size_t sz)
{
	void **arr = arrp;
	uint64_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? (uint64_t)*cap * 2 : 64;
	while (ncap <= n)
		ncap *= 2;
	if (ncap > UINT32_MAX)
		ncap = UINT32_MAX;
	if (n >= ncap)
		return -1;
	p = kd_xrealloc(*arr, (size_t)ncap * sz, "the timeline");
	*arr = p;
	*cap = (uint32_t)ncap;
	return 0;
}

/* ---- stage 2: block order ------------------------------------------------ */

struct bkey {
	uint32_t cpu;
	int32_t age;     /* S - S_newest as signed: 0 for the newest, negative older */
	uint64_t offset; /* tie-break: file order */
	uint32_t idx;
};

static int cmp_bkey(const void *a, const void *b)
{
	const struct bkey *x = a, *y = b;

	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	if (x->age != y->age)
		return x->age < y->age ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int kd_snap_order(struct kd_snap *snap, struct kd_dec_error *err)
{
	uint32_t nb = snap->nblocks, ncpu = 0, j;
	struct bkey *keys = NULL;
	struct kd_snap_block *sorted = NULL;
	uint32_t *cpus = NULL;

	free(snap->cores);
	snap->cores = NULL;
	snap->ncores = 0;
	cpus = kd_xmalloc(((size_t)nb + snap->ncore_recs + 1) * sizeof(*cpus), "block order");
	keys = kd_xmalloc(((size_t)nb + 1) * sizeof(*keys), "block order");
	sorted = kd_xmalloc(((size_t)nb + 1) * sizeof(*sorted), "block order");
	if (!cpus || !keys || !sorted)
		goto nomem;

	/* Group by cpu (file order inside), find each cpu's newest S. */
	for (uint32_t i = 0; i < nb; i++) {
		keys[i].cpu = snap->blocks[i].cpu;
		keys[i].age = 0;
		keys[i].offset = snap->blocks[i].offset;
		keys[i].idx = i;
	}
	qsort(keys, nb, sizeof(*keys), cmp_bkey);
	for (uint32_t i = 0; i < nb;) {
		uint32_t e = i, newest;

		while (e < nb && keys[e].cpu == keys[i].cpu)
			e++;
		newest = snap->blocks[keys[i].idx].start;
		for (uint32_t k = i + 1; k < e; k++) {
			uint32_t s = snap->blocks[keys[k].idx].start;

			if ((int32_t)(s - newest) > 0)
				newest = s;
		}
		for (uint32_t k = i; k < e; k++)
			keys[k].age = (int32_t)(snap->blocks[keys[k].idx].start - newest);
		i = e;
	}
	qsort(keys, nb, sizeof(*keys), cmp_bkey);

	/* Drop duplicate S on one cpu (the same block copied twice). */
	j = 0;
	for (uint32_t i = 0; i < nb; i++) {
		if (j && keys[i].cpu == sorted[j - 1].cpu &&
		    snap->blocks[keys[i].idx].start == sorted[j - 1].start) {
			kd_warn(&snap->warn, snap->blocks[keys[i].idx].offset,
			             "block (cpu %" PRIu32 ", S %" PRIu32
			             ") duplicates an earlier block; skipped", keys[i].cpu,
			             sorted[j - 1].start);
			snap->damaged_blocks++;
			continue;
		}
		sorted[j++] = snap->blocks[keys[i].idx];
	}
	free(snap->blocks);
	snap->blocks = sorted;
	snap->nblocks = j;
	sorted = NULL;
	nb = j;

	/* Cores: every cpu that has blocks or a CORES entry. */
	for (uint32_t i = 0; i < nb; i++)
		cpus[ncpu++] = snap->blocks[i].cpu;
	for (uint32_t i = 0; i < snap->ncore_recs; i++)
		cpus[ncpu++] = snap->core_recs[i].cpu;
	qsort(cpus, ncpu, sizeof(*cpus), cmp_u32);
	j = 0;
	for (uint32_t i = 0; i < ncpu; i++)
		if (!j || cpus[j - 1] != cpus[i])
			cpus[j++] = cpus[i];
	ncpu = j;
	snap->cores = kd_xcalloc(ncpu ? ncpu : 1, sizeof(*snap->cores), "cores");
	if (!snap->cores)
		goto nomem;
	snap->ncores = ncpu;
	for (uint32_t c = 0; c < ncpu; c++)
		snap->cores[c].cpu = cpus[c];
	for (uint32_t i = 0, c = 0; i < nb; i++) {
		while (snap->cores[c].cpu != snap->blocks[i].cpu)
			c++;
		if (!snap->cores[c].nblocks)
			snap->cores[c].first_block = i;
		snap->cores[c].nblocks++;
		snap->blocks[i].core = c;
	}
	for (uint32_t i = 0; i < snap->ncore_recs; i++) {
		const struct ktrace_core_rec *r = &snap->core_recs[i];
		uint32_t lo = 0, hi = ncpu;

		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (snap->cores[mid].cpu < r->cpu)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < ncpu && !snap->cores[lo].have_rec) {
			snap->cores[lo].have_rec = 1;
			snap->cores[lo].rec = *r;
		}
	}
	for (uint32_t c = 0; c < ncpu; c++) {
		struct kd_snap_core *co = &snap->cores[c];

		if (co->have_rec)
			co->wrapped = co->rec.blocks_used > co->rec.nblocks;
		else
			co->wrapped = co->nblocks && snap->blocks[co->first_block].start != 0;
	}
	free(keys);
	free(cpus);
	return 0;
nomem:
	free(keys);
	free(cpus);
	free(sorted);
	return fail(err, KD_ENOMEM, "out of memory ordering blocks");
}

/* ---- stage 2: per-core iterator ------------------------------------------ */

uint64_t kd_block_start_tick(const struct kd_snap *snap,
                                  const struct kd_snap_block *b)
{
	uint64_t tsc = le32(b->words + 12) | (uint64_t)le32(b->words + 16) << 32;

	return tsc >> snap->info.tsc_shift;
}

void kd_core_iter_init(struct ktrace_core_iter *it, const struct kd_snap *snap,
                            uint32_t core, struct kd_dec_warnings *warn)
{
	memset(it, 0, sizeof(*it));
	it->snap = snap;
	it->warn = warn;
	it->core = core;
	if (core < snap->ncores) {
		it->blk = snap->cores[core].first_block;
		it->blk_end = it->blk + snap->cores[core].nblocks;
	}
}

static int open_block(struct ktrace_core_iter *it)
{
	const struct kd_snap_block *b;

	if (it->blk >= it->blk_end)
		return 0;
	b = &it->snap->blocks[it->blk++];
	/* The reader checked: nwords >= 5, word 0 is a 4-word extended header,
	 * word 1 a BLOCK_START type word. */
	it->words = b->words;
	it->nwords = b->nwords;
	it->blk_offset = b->offset + sizeof(struct ktrace_block_rec);
	it->slot = KTRACE_EXT_ARG(le32(b->words + 4));
	it->seg = KD_NONE; /* the writer's THREAD record follows */
	it->tick = kd_block_start_tick(it->snap, b);
	it->blk_tick = it->tick;
	it->ts20 = (uint32_t)it->tick & KTRACE_TS_MASK;
	it->pos = 5;
	return 1;
}

static void damaged_tail(struct ktrace_core_iter *it, const char *what)
{
	kd_warn(it->warn, it->blk_offset + (uint64_t)it->pos * 4,
	             "cpu %" PRIu32 ": %s; the rest of this block (%" PRIu32
	             " words) is skipped", it->snap->cores[it->core].cpu, what,
	             it->nwords - it->pos);
	it->damaged_tails++;
	it->pos = it->nwords;
}

/* Inlined into the two build passes (the hottest loop of the decoder). */
static inline __attribute__((always_inline)) int iter_next(struct ktrace_core_iter *it,
                                                          struct kd_dec_event *ev)
{
	for (;;) {
		const uint8_t *p;
		uint32_t w, e, d, n, t;
		uint64_t tick;

		if (it->pos >= it->nwords) {
			if (!open_block(it))
				return 0;
			continue;
		}
		p = it->words + (size_t)it->pos * 4;
		w = le32(p);
		e = KTRACE_REC_EV(w);
		if (e == KTRACE_EV_PAD) {
			it->pos++;
			continue;
		}
		d = (KTRACE_REC_TS(w) - it->ts20) & KTRACE_TS_MASK;
		if (d < KTRACE_TS_HALF)
			tick = it->tick + d;
		else
			tick = it->tick >= (KTRACE_TS_MASK + 1 - d) ? it->tick - (KTRACE_TS_MASK + 1 - d) : 0;

		if (KTRACE_EV_IS_ENTER(e) || KTRACE_EV_IS_EXIT(e)) {
			it->ev_pos = it->pos;
			it->ev_ref_tick = it->tick;
			it->ev_ref_ts20 = it->ts20;
			it->tick = tick;
			it->ts20 = KTRACE_REC_TS(w);
			it->pos++;
			ev->tick = tick;
			ev->value = 0;
			ev->slot = it->slot;
			ev->seg = it->seg;
			ev->core = it->core;
			if (e < KTRACE_EV_EXIT_FLAG) {
				ev->kind = KTRACE_DK_ENTER;
				ev->id = e - KTRACE_EV_ENTER_BASE;
			} else {
				ev->kind = KTRACE_DK_EXIT;
				ev->id = e - KTRACE_EV_EXIT_BASE;
			}
			return 1;
		}
		if (!KTRACE_EV_IS_EXT(e)) {
			damaged_tail(it, "reserved event number");
			continue;
		}
		n = e;
		if ((uint64_t)it->pos + 1 + n > it->nwords) {
			damaged_tail(it, "extended record runs past the block end");
			continue;
		}
		t = le32(p + 4);
		switch (KTRACE_EXT_TYPE(t)) {
		case KTRACE_EXT_BLOCK_START:
			damaged_tail(it, "BLOCK_START in the middle of a block");
			continue;
		case KTRACE_EXT_TSC:
			if (n < 3) {
				damaged_tail(it, "TSC record too short");
				continue;
			}
			it->tick = (le32(p + 8) | (uint64_t)le32(p + 12) << 32) >> it->snap->info.tsc_shift;
			it->ts20 = (uint32_t)it->tick & KTRACE_TS_MASK;
			it->pos += 1 + n;
			continue;
		case KTRACE_EXT_THREAD:
			/* Not a timed event: it leaves the time reference alone, so
			 * a THREAD record written before a due TSC record (after a
			 * long idle) cannot throw the following records off. */
			it->slot = KTRACE_EXT_ARG(t);
			it->seg = n >= 2 ? le32(p + 8) : KD_NONE;
			it->pos += 1 + n;
			continue;
		case KTRACE_EXT_FUNC_ENTER_ADDR:
		case KTRACE_EXT_FUNC_EXIT_ADDR:
		case KTRACE_EXT_MARK:
		case KTRACE_EXT_REQ_BEGIN:
		case KTRACE_EXT_REQ_END:
			if (n < 3) {
				damaged_tail(it, "extended record too short for its type");
				continue;
			}
			ev->value = le32(p + 8) | (uint64_t)le32(p + 12) << 32;
			break;
		case KTRACE_EXT_SPAN_BEGIN:
		case KTRACE_EXT_SPAN_END:
			ev->value = 0;
			break;
		default:
			/* Unknown type: skipped by its length (append-only format). */
			it->unknown_ext++;
			it->tick = tick;
			it->ts20 = KTRACE_REC_TS(w);
			it->pos += 1 + n;
			continue;
		}
		switch (KTRACE_EXT_TYPE(t)) {
		case KTRACE_EXT_FUNC_ENTER_ADDR: ev->kind = KTRACE_DK_ENTER_ADDR; break;
		case KTRACE_EXT_FUNC_EXIT_ADDR: ev->kind = KTRACE_DK_EXIT_ADDR; break;
		case KTRACE_EXT_MARK: ev->kind = KTRACE_DK_MARK; break;
		case KTRACE_EXT_REQ_BEGIN: ev->kind = KTRACE_DK_REQ_BEGIN; break;
		case KTRACE_EXT_REQ_END: ev->kind = KTRACE_DK_REQ_END; break;
		case KTRACE_EXT_SPAN_BEGIN: ev->kind = KTRACE_DK_SPAN_BEGIN; break;
		default: ev->kind = KTRACE_DK_SPAN_END; break;
		}
		ev->id = KTRACE_EXT_ARG(t);
		ev->tick = tick;
		ev->slot = it->slot;
		ev->seg = it->seg;
		ev->core = it->core;
		it->ev_pos = it->pos;
		it->ev_ref_tick = it->tick;
		it->ev_ref_ts20 = it->ts20;
		it->tick = tick;
		it->ts20 = KTRACE_REC_TS(w);
		it->pos += 1 + n;
		return 1;
	}
}

int kd_core_iter_next(struct ktrace_core_iter *it, struct kd_dec_event *ev)
{
	return iter_next(it, ev);
}

void kd_core_iter_seek(struct ktrace_core_iter *it, uint32_t blk, uint32_t pos,
                            uint64_t ref_tick, uint32_t ref_ts20, uint32_t slot, uint32_t seg)
{
	const struct kd_snap_block *b = &it->snap->blocks[blk];

	it->blk = blk + 1;
	it->words = b->words;
	it->nwords = b->nwords;
	it->blk_offset = b->offset + sizeof(struct ktrace_block_rec);
	it->blk_tick = kd_block_start_tick(it->snap, b);
	it->pos = pos;
	it->tick = ref_tick;
	it->ts20 = ref_ts20;
	it->slot = slot;
	it->seg = seg;
}

/* ---- small hash map: u64 key -> u32 value ---------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint32_t *umap_slot(const struct ktrace_umap *m, uint64_t k)
{
	uint32_t mask = m->cap - 1, i = (uint32_t)mix64(k) & mask;

	while (m->vals[i] != KD_NONE && m->keys[i] != k)
		i = (i + 1) & mask;
	return &m->vals[i];
}

uint32_t kd_umap_get(const struct ktrace_umap *m, uint64_t k)
{
	if (!m->cap)
		return KD_NONE;
	return *umap_slot(m, k);
}


static int umap_grow(struct ktrace_umap *m)
{
	struct ktrace_umap nm;
	uint32_t ncap = m->cap ? m->cap * 2 : 64;

	if (ncap == 0 || ncap > (1u << 30))
		return -1;
	nm.cap = ncap;
	nm.n = 0;
	nm.keys = kd_xmalloc((size_t)ncap * sizeof(*nm.keys), "a hash map");
	nm.vals = kd_xmalloc((size_t)ncap * sizeof(*nm.vals), "a hash map");
	if (!nm.keys || !nm.vals) {
		free(nm.keys);
		free(nm.vals);
		return -1;
	}
	memset(nm.vals, 0xff, (size_t)ncap * sizeof(*nm.vals));
	for (uint32_t i = 0; i < m->cap; i++)
		if (m->vals[i] != KD_NONE)
			kd_umap_put(&nm, m->keys[i], m->vals[i]);
	free(m->keys);
	free(m->vals);
	*m = nm;
	return 0;
}

/* v must not be KD_NONE (the empty marker). */
int kd_umap_put(struct ktrace_umap *m, uint64_t k, uint32_t v)
{
	uint32_t *s;
	size_t i;

	if ((m->n + 1) * 2 > m->cap && umap_grow(m))
		return -1;
	s = umap_slot(m, k);
	i = (size_t)(s - m->vals);
	if (v == KD_NONE)
		return -1;
	if (*s == KD_NONE)
		m->n++;
	m->keys[i] = k;
	*s = v;
	return 0;
}

void kd_umap_free(struct ktrace_umap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- stage 3: build ------------------------------------------------------- */

struct frame {
	uint32_t call;       /* index in d->calls */
	uint32_t func;
	uint64_t child;      /* ticks: children's durations */
};

struct tstate {
	struct frame *stack;
	uint32_t depth, cap;
	uint64_t last_tick;  /* ticks: clamp for per-thread monotonic time */
	uint64_t prev_tick;  /* ticks: the thread's record before the current one */
	uint64_t orphan;     /* ticks: outermost calls since the last TRUNC_BEGIN */
	uint32_t ntb;        /* TRUNC_BEGIN calls so far */
	uint32_t *roots;     /* outermost calls waiting for a TRUNC_BEGIN parent */
	uint32_t nroots, caproots;
	int seen;
};

/*
 * A piece: a maximal run of consecutive records of one (thread slot,
 * segment) in one core's stream.  Pieces are where a thread's records are
 * re-ordered: inside a piece the core's stream order is the program order.
 */
struct piece {
	uint64_t first_tick;     /* ticks: its first record */
	uint64_t nrec;           /* records in it (before window filtering) */
	uint64_t ref_tick;       /* iterator state before its first record: */
	uint32_t ref_ts20;       /*   reference tick and ts20, */
	uint32_t blk;            /*   block index in snap->blocks, */
	uint32_t pos;            /*   word position in the block */
	uint32_t core;           /* core index */
	uint32_t slot, seg;      /* as named by BLOCK_START/THREAD */
	uint32_t thread;         /* thread index */
	uint32_t idx;            /* creation order */
	uint64_t key1, key2;     /* sort keys inside the thread, see order_pieces() */
};

/* A request begin or end, matched after all threads were walked. */
struct reqev {
	uint64_t tick;           /* ticks: per-thread clamped */
	uint64_t id;             /* request id */
	uint64_t seq;            /* walk order: ties keep a thread's program order */
	uint32_t kind;           /* name id */
	uint32_t thread, core;
	uint32_t end;            /* 1 for REQ_END */
	uint32_t at_call;        /* recorded order: d->ncalls when the record was
	                            walked (threads are walked one at a time) */
	uint32_t top;            /* call on top of the thread's stack then, or NONE */
};

struct build {
	struct kd_dec *d;
	struct tstate *ts;
	uint32_t capts;
	uint32_t capthreads, capcalls, capreqs, capmarks, capruns, capfuncs;
	struct ktrace_umap thread_map;  /* slot -> thread index */
	struct ktrace_umap addr_map;    /* address -> func index */
	struct ktrace_umap span_map;    /* name id -> func index */
	struct ktrace_umap req_map;     /* mix(kind, id) -> open request index */
	uint32_t id_func[KTRACE_FUNC_ID_COUNT]; /* compact id -> func index */
	uint64_t run_gap;        /* ticks: a gap this long splits a core run */
	uint64_t end_limit;      /* ticks: records after it are dropped (UINT64_MAX: none) */
	struct piece *pieces;
	uint32_t npieces, cappieces;
	struct reqev *reqevs;
	uint32_t nreqevs, capreqevs;
	int oom;
};

static uint32_t new_func(struct build *b, uint64_t addr, uint32_t id, uint32_t kind)
{
	struct kd_dec *d = b->d;

	if (grow(&d->funcs, &b->capfuncs, d->nfuncs, sizeof(*d->funcs))) {
		b->oom = 1;
		return KD_NONE;
	}
	d->funcs[d->nfuncs].addr = addr;
	d->funcs[d->nfuncs].id = id;
	d->funcs[d->nfuncs].kind = kind;
	d->funcs[d->nfuncs].name = NULL;
	return d->nfuncs++;
}

static uint32_t func_addr(struct build *b, uint64_t addr)
{
	uint32_t f = kd_umap_get(&b->addr_map, addr);

	if (f != KD_NONE)
		return f;
	f = new_func(b, addr, 0, KTRACE_FUNC_ADDR);
	if (f != KD_NONE && kd_umap_put(&b->addr_map, addr, f))
		b->oom = 1;
	return f;
}

static uint32_t func_id(struct build *b, uint32_t id)
{
	uint32_t f = b->id_func[id];

	if (f != KD_NONE)
		return f;
	if (b->d->snap.func_known[id])
		f = func_addr(b, b->d->snap.func_addr[id]);
	else
		f = new_func(b, 0, id, KTRACE_FUNC_UNKNOWN_ID);
	b->id_func[id] = f;
	return f;
}

static uint32_t func_span(struct build *b, uint32_t name)
{
	uint32_t f = kd_umap_get(&b->span_map, name);

	if (f != KD_NONE)
		return f;
	f = new_func(b, 0, name, KTRACE_FUNC_SPAN);
	if (f != KD_NONE && kd_umap_put(&b->span_map, name, f))
		b->oom = 1;
	return f;
}

static uint32_t new_thread(struct build *b, uint32_t slot, const struct ktrace_thread_rec *r)
{
	struct kd_dec *d = b->d;
	struct kd_dec_thread *t;

	if (grow(&d->threads, &b->capthreads, d->nthreads, sizeof(*d->threads)) ||
	    grow(&b->ts, &b->capts, d->nthreads, sizeof(*b->ts))) {
		b->oom = 1;
		return KD_NONE;
	}
	t = &d->threads[d->nthreads];
	memset(t, 0, sizeof(*t));
	memset(&b->ts[d->nthreads], 0, sizeof(b->ts[0]));
	t->slot = slot;
	if (r) {
		t->tid = r->tid;
		t->flags = r->flags;
		t->known = 1;
		snprintf(t->name, sizeof(t->name), "%s", r->name);
	} else {
		snprintf(t->name, sizeof(t->name), "slot%" PRIu32, slot);
	}
	if (kd_umap_put(&b->thread_map, slot, d->nthreads)) {
		b->oom = 1;
		return KD_NONE;
	}
	return d->nthreads++;
}

static uint32_t thread_of(struct build *b, uint32_t slot)
{
	uint32_t t = kd_umap_get(&b->thread_map, slot);

	if (t != KD_NONE)
		return t;
	return new_thread(b, slot, NULL);
}

static uint32_t new_call(struct build *b, uint32_t thread)
{
	struct kd_dec *d = b->d;

	(void)thread;
	if (grow(&d->calls, &b->capcalls, d->ncalls, sizeof(*d->calls))) {
		b->oom = 1;
		return KD_NONE;
	}
	return d->ncalls++;
}

static void push(struct build *b, uint32_t thread, uint32_t func, uint64_t tick,
                 uint32_t core, uint32_t flags)
{
	struct tstate *s = &b->ts[thread];
	struct kd_dec_call *c;
	uint32_t ci;

	if (func == KD_NONE)
		return;
	if (grow(&s->stack, &s->cap, s->depth, sizeof(*s->stack))) {
		b->oom = 1;
		return;
	}
	ci = new_call(b, thread);
	if (ci == KD_NONE)
		return;
	c = &b->d->calls[ci];
	c->begin = tick;
	c->end = tick;
	c->self = 0;
	c->func = func;
	c->thread = thread;
	c->parent = s->depth ? s->stack[s->depth - 1].call : KD_NONE;
	/* depth - (TRUNC_BEGIN calls so far), mod 2^32; the thread's final
	 * TRUNC_BEGIN count is added at the end (frames found underneath). */
	c->depth = s->depth - s->ntb;
	c->core = core;
	c->flags = flags;
	if (!s->depth) {
		if (grow(&s->roots, &s->caproots, s->nroots, sizeof(*s->roots))) {
			b->oom = 1;
			return;
		}
		s->roots[s->nroots++] = ci;
	}
	s->stack[s->depth].call = ci;
	s->stack[s->depth].func = func;
	s->stack[s->depth].child = 0;
	s->depth++;
}

static void close_top(struct build *b, uint32_t thread, uint64_t tick, uint32_t flags)
{
	struct tstate *s = &b->ts[thread];
	struct frame *f = &s->stack[--s->depth];
	struct kd_dec_call *c = &b->d->calls[f->call];
	uint64_t dur;

	c->end = tick > c->begin ? tick : c->begin;
	c->flags |= flags;
	dur = c->end - c->begin;
	c->self = dur > f->child ? dur - f->child : 0;
	if (s->depth)
		s->stack[s->depth - 1].child += dur;
	else
		s->orphan += dur;
}

/* How deep an exit looks for its entry before calling it unmatched. */
#define MATCH_DEPTH 256u

static void pop(struct build *b, uint32_t thread, uint32_t func, uint64_t tick,
                uint32_t core, uint32_t span)
{
	struct tstate *s = &b->ts[thread];
	struct kd_dec *d = b->d;
	struct kd_dec_call *c;
	uint32_t lim = s->depth > MATCH_DEPTH ? s->depth - MATCH_DEPTH : 0;
	uint32_t ci, i;
	uint64_t begin;

	if (func == KD_NONE)
		return;
	for (i = s->depth; i > lim; i--)
		if (s->stack[i - 1].func == func)
			break;
	if (i > lim) {
		while (s->depth > i) {
			close_top(b, thread, tick, KTRACE_CALL_TRUNC_END | KTRACE_CALL_EXIT_LOST);
			d->lost_exits++;
		}
		close_top(b, thread, tick, 0);
		return;
	}
	if (s->depth) {
		/* Not in the stack, yet frames are open: its entry was lost inside
		 * the current frame (not before the window, or it would enclose
		 * them).  It ran at most since the thread's previous record. */
		push(b, thread, func, s->prev_tick, core, KTRACE_CALL_TRUNC_BEGIN | span);
		if (s->depth && s->stack[s->depth - 1].func == func)
			close_top(b, thread, tick, 0);
		d->unmatched_exits++;
		return;
	}
	/* Entered before the window: it encloses everything this thread did so
	 * far at the outermost level. */
	ci = new_call(b, thread);
	if (ci == KD_NONE)
		return;
	begin = d->threads[thread].start_tick;
	if (begin > tick)
		begin = tick;
	c = &d->calls[ci];
	c->begin = begin;
	c->end = tick;
	c->func = func;
	c->thread = thread;
	c->parent = KD_NONE;
	c->depth = 0u - s->ntb - 1u; /* outer than all TRUNC_BEGIN calls so far */
	c->core = core;
	c->flags = KTRACE_CALL_TRUNC_BEGIN | span;
	c->self = tick - begin > s->orphan ? tick - begin - s->orphan : 0;
	s->orphan = tick - begin;
	for (uint32_t r = 0; r < s->nroots; r++)
		d->calls[s->roots[r]].parent = ci;
	s->nroots = 0;
	if (grow(&s->roots, &s->caproots, 0, sizeof(*s->roots))) {
		b->oom = 1;
		return;
	}
	s->roots[s->nroots++] = ci;
	s->ntb++;
	d->unmatched_exits++;
}

static void on_request(struct build *b, const struct reqev *ev)
{
	struct kd_dec *d = b->d;
	uint64_t key = ev->id ^ mix64((uint64_t)ev->kind + 0x9e3779b97f4a7c15ull);
	uint32_t r = kd_umap_get(&b->req_map, key);
	uint32_t thread = ev->thread;
	uint64_t tick = ev->tick;
	struct kd_dec_request *q;

	if (ev->end && r < d->nreqs && d->reqs[r].kind == ev->kind && d->reqs[r].id == ev->id) {
		q = &d->reqs[r];
		q->end = tick > q->begin ? tick : q->begin;
		q->flags &= ~(uint32_t)KTRACE_REQ_TRUNC_END;
		if (thread == q->thread) {
			q->call_end = ev->at_call;
			q->open_at_end = ev->top;
		}
		/* Closed: a tombstone value, so probe chains stay intact. */
		kd_umap_put(&b->req_map, key, KD_NONE - 1);
		return;
	}
	if (grow(&d->reqs, &b->capreqs, d->nreqs, sizeof(*d->reqs))) {
		b->oom = 1;
		return;
	}
	q = &d->reqs[d->nreqs];
	q->id = ev->id;
	q->kind = ev->kind;
	q->thread = thread;
	q->core = ev->core;
	q->call_first = q->call_end = q->open_at_end = KD_NONE;
	if (!ev->end) {
		q->call_first = ev->at_call;
		q->begin = tick;
		q->end = tick;
		q->flags = KTRACE_REQ_TRUNC_END; /* until its end is seen */
		if (kd_umap_put(&b->req_map, key, d->nreqs))
			b->oom = 1;
	} else {
		q->begin = d->threads[thread].start_tick < tick ? d->threads[thread].start_tick : tick;
		q->end = tick;
		q->flags = KTRACE_REQ_TRUNC_BEGIN;
		q->call_end = ev->at_call;
		q->open_at_end = ev->top;
	}
	d->nreqs++;
}

static int cmp_reqev(const void *a, const void *b)
{
	const struct reqev *x = a, *y = b;

	if (x->tick != y->tick)
		return x->tick < y->tick ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_req(const void *a, const void *b)
{
	const struct kd_dec_request *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->thread < y->thread ? -1 : x->thread > y->thread;
}

/* 0: in the window; 1: before it; 2: after it.  A block that starts in the
 * window is kept whole, so a late store just after a block switch (a small
 * backward step below the block's start) is not dropped. */
static int outside(const struct build *b, uint64_t tick, uint64_t blk_tick)
{
	if (tick < b->d->window_start && blk_tick < b->d->window_start)
		return 1;
	return tick > b->end_limit ? 2 : 0;
}

/* One record of thread th, in the thread's program order. */
static void on_event(struct build *b, const struct kd_dec_event *ev, uint32_t th)
{
	struct kd_dec *d = b->d;
	struct kd_dec_thread *t = &d->threads[th];
	struct tstate *s = &b->ts[th];
	uint64_t tick;

	d->events++;
	tick = ev->tick > s->last_tick ? ev->tick : s->last_tick;
	s->prev_tick = s->seen ? s->last_tick : tick;
	s->last_tick = tick;
	if (!s->seen) {
		s->seen = 1;
		t->first_tick = tick;
		if (!d->opts.all)
			t->start_tick = d->window_start;
		else
			t->start_tick = d->core_stats[ev->core].first_tick;
		if (t->known) {
			const struct ktrace_thread_rec *r = kd_snap_thread(&d->snap, t->slot);
			uint64_t ft = r ? r->first_tsc >> d->shift : 0;

			if (ft > t->start_tick && ft <= tick)
				t->start_tick = ft;
		}
		/* Records may step back below their block's start. */
		if (t->start_tick > tick)
			t->start_tick = tick;
	}
	t->events++;
	t->last_tick = tick;

	switch (ev->kind) {
	case KTRACE_DK_ENTER:
		push(b, th, func_id(b, ev->id % KTRACE_FUNC_ID_COUNT), tick, ev->core, 0);
		break;
	case KTRACE_DK_ENTER_ADDR:
		push(b, th, func_addr(b, ev->value), tick, ev->core, 0);
		break;
	case KTRACE_DK_SPAN_BEGIN:
		push(b, th, func_span(b, ev->id), tick, ev->core, KTRACE_CALL_SPAN);
		break;
	case KTRACE_DK_EXIT:
		pop(b, th, func_id(b, ev->id % KTRACE_FUNC_ID_COUNT), tick, ev->core, 0);
		break;
	case KTRACE_DK_EXIT_ADDR:
		pop(b, th, func_addr(b, ev->value), tick, ev->core, 0);
		break;
	case KTRACE_DK_SPAN_END:
		pop(b, th, func_span(b, ev->id), tick, ev->core, KTRACE_CALL_SPAN);
		break;
	case KTRACE_DK_MARK:
		if (grow(&d->marks, &b->capmarks, d->nmarks, sizeof(*d->marks))) {
			b->oom = 1;
			break;
		}
		d->marks[d->nmarks].tick = tick;
		d->marks[d->nmarks].value = ev->value;
		d->marks[d->nmarks].name = ev->id;
		d->marks[d->nmarks].thread = th;
		d->marks[d->nmarks].core = ev->core;
		d->nmarks++;
		break;
	case KTRACE_DK_REQ_BEGIN:
	case KTRACE_DK_REQ_END:
		if (grow(&b->reqevs, &b->capreqevs, b->nreqevs, sizeof(*b->reqevs))) {
			b->oom = 1;
			break;
		}
		b->reqevs[b->nreqevs] = (struct reqev){
			tick, ev->value, b->nreqevs, ev->id, th, ev->core, ev->kind == KTRACE_DK_REQ_END,
			d->ncalls, s->depth ? s->stack[s->depth - 1].call : KD_NONE
		};
		b->nreqevs++;
		break;
	}
}

/*
 * Pass 1, per core in stream order: cut the stream into pieces, count what
 * falls outside the window, and record which thread ran where (runs).
 */
static void scan_cores(struct build *b)
{
	struct kd_dec *d = b->d;
	const struct kd_snap *snap = &d->snap;

	for (uint32_t c = 0; c < snap->ncores && !b->oom; c++) {
		struct kd_dec_core_stats *cs = &d->core_stats[c];
		struct ktrace_core_iter it;
		struct kd_dec_event ev;
		struct kd_dec_run run = { 0 };
		uint32_t cur = KD_NONE, cslot = 0, cthread = KD_NONE;

		kd_core_iter_init(&it, snap, c, &d->snap.warn);
		while (iter_next(&it, &ev)) {
			struct piece *p;
			uint32_t th;
			int w;

			if (cur == KD_NONE || b->pieces[cur].slot != ev.slot ||
			    b->pieces[cur].seg != ev.seg) {
				if (cthread == KD_NONE || cslot != ev.slot) {
					cthread = thread_of(b, ev.slot);
					cslot = ev.slot;
				}
				if (cthread == KD_NONE ||
				    grow(&b->pieces, &b->cappieces, b->npieces, sizeof(*b->pieces))) {
					b->oom = 1;
					break;
				}
				p = &b->pieces[b->npieces];
				p->first_tick = ev.tick;
				p->nrec = 0;
				p->ref_tick = it.ev_ref_tick;
				p->ref_ts20 = it.ev_ref_ts20;
				p->blk = it.blk - 1;
				p->pos = it.ev_pos;
				p->core = c;
				p->slot = ev.slot;
				p->seg = ev.seg;
				p->thread = cthread;
				p->idx = b->npieces;
				cur = b->npieces++;
			}
			b->pieces[cur].nrec++;
			th = b->pieces[cur].thread;
			w = outside(b, ev.tick, it.blk_tick);
			if (w == 1) {
				cs->dropped++;
				d->dropped++;
				continue;
			}
			if (w == 2) {
				cs->dropped_after++;
				d->dropped_after++;
				continue;
			}
			cs->events++;
			if (ev.tick > cs->last_tick)
				cs->last_tick = ev.tick;
			if (run.events && (run.thread != th || ev.tick > run.end + b->run_gap)) {
				if (grow(&d->runs, &b->capruns, d->nruns, sizeof(*d->runs))) {
					b->oom = 1;
					break;
				}
				d->runs[d->nruns++] = run;
				run.events = 0;
			}
			if (!run.events) {
				run.begin = ev.tick;
				run.end = ev.tick;
				run.core = c;
				run.thread = th;
			}
			if (ev.tick > run.end)
				run.end = ev.tick;
			run.events++;
		}
		if (run.events) {
			if (grow(&d->runs, &b->capruns, d->nruns, sizeof(*d->runs)))
				b->oom = 1;
			else
				d->runs[d->nruns++] = run;
		}
		cs->damaged_tails = it.damaged_tails;
	}
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->key1 != y->key1)
		return x->key1 < y->key1 ? -1 : 1;
	if (x->key2 != y->key2)
		return x->key2 < y->key2 ? -1 : 1;
	if (x->core != y->core)
		return x->core < y->core ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Order each thread's pieces.  With segment numbers (THREAD records of
 * N >= 2) the order is exact: by segment, then time.  A thread with any
 * piece lacking one (an older writer) is ordered by the pieces' first
 * ticks: a thread runs on one core at a time, so whole pieces do not
 * interleave in time except by clock skew.
 */
static int order_pieces(struct build *b)
{
	uint8_t *by_time = kd_xcalloc((size_t)b->d->nthreads + 1, 1, "thread order");

	if (!by_time)
		return -1;
	for (uint32_t i = 0; i < b->npieces; i++)
		if (b->pieces[i].seg == KD_NONE)
			by_time[b->pieces[i].thread] = 1;
	for (uint32_t i = 0; i < b->npieces; i++) {
		struct piece *p = &b->pieces[i];

		p->key1 = by_time[p->thread] ? p->first_tick : p->seg;
		p->key2 = by_time[p->thread] ? p->seg : p->first_tick;
	}
	free(by_time);
	if (b->npieces)
		qsort(b->pieces, b->npieces, sizeof(*b->pieces), cmp_piece);
	return 0;
}

/* Pass 2: every thread's pieces in order, each re-read from its start. */
static void walk_threads(struct build *b)
{
	const struct kd_snap *snap = &b->d->snap;
	struct ktrace_core_iter it;
	struct kd_dec_event ev;

	for (uint32_t i = 0; i < b->npieces && !b->oom; i++) {
		const struct piece *p = &b->pieces[i];

		kd_core_iter_init(&it, snap, p->core, NULL);
		kd_core_iter_seek(&it, p->blk, p->pos, p->ref_tick, p->ref_ts20, p->slot, p->seg);
		for (uint64_t k = 0; k < p->nrec && !b->oom; k++) {
			if (!iter_next(&it, &ev))
				break;
			if (!outside(b, ev.tick, it.blk_tick))
				on_event(b, &ev, p->thread);
		}
	}
}

static void find_trigger(struct kd_dec *d, struct build *b)
{
	const struct ktrace_trigger_rec *tr = &d->snap.trigger;
	struct kd_dec_request *q;
	uint32_t th;

	d->trigger_req = KD_NONE;
	if (!d->snap.have_trigger)
		return;
	for (uint32_t i = 0; i < d->nreqs; i++)
		if (d->reqs[i].id == tr->request_id && d->reqs[i].kind == tr->kind_id) {
			d->reqs[i].flags |= KTRACE_REQ_TRIGGER;
			d->trigger_req = i;
			return;
		}
	/* Not in the decoded window: rebuild it from the trigger record. */
	if (tr->end_tsc < tr->begin_tsc)
		return;
	th = thread_of(b, tr->thread_slot);
	if (th == KD_NONE ||
	    grow(&d->reqs, &b->capreqs, d->nreqs, sizeof(*d->reqs)))
		return;
	q = &d->reqs[d->nreqs];
	memset(q, 0, sizeof(*q));
	q->begin = tr->begin_tsc >> d->shift;
	q->end = tr->end_tsc >> d->shift;
	q->id = tr->request_id;
	q->kind = tr->kind_id;
	q->thread = th;
	q->call_first = q->call_end = q->open_at_end = KD_NONE;
	q->flags = KTRACE_REQ_TRIGGER;
	if (q->begin < d->window_start)
		q->flags |= KTRACE_REQ_TRUNC_BEGIN;
	d->trigger_req = d->nreqs++;
}

int kd_dec_build(struct kd_dec *d, struct kd_dec_error *err)
{
	struct kd_snap *snap = &d->snap;
	struct build *b;
	uint32_t nc = snap->ncores;
	uint64_t snap_tick, ten_s;
	int rc = 0;

	d->shift = snap->info.tsc_shift;
	d->tsc_hz = snap->info.tsc_hz;
	d->trigger_req = KD_NONE;
	b = kd_xcalloc(1, sizeof(*b), "the timeline");
	d->core_stats = kd_xcalloc(nc ? nc : 1, sizeof(*d->core_stats), "core statistics");
	if (!b || !d->core_stats) {
		rc = fail(err, KD_ENOMEM, "out of memory");
		goto out;
	}
	b->d = d;
	memset(b->id_func, 0xff, sizeof(b->id_func));
	/* Muted functions are named even when no call of theirs is left. */
	for (uint32_t i = 0; i < snap->nmuted; i++)
		func_addr(b, snap->muted[i].addr);
	/* 1 ms of ticks: a longer silence on a core splits its thread runs. */
	b->run_gap = (uint64_t)(((unsigned __int128)d->tsc_hz / 1000) >> d->shift);
	if (!b->run_gap)
		b->run_gap = 1;

	/* Window start: latest first-record time among cores whose ring wrapped. */
	d->data_start = UINT64_MAX;
	d->window_start = 0;
	for (uint32_t c = 0; c < nc; c++) {
		struct kd_snap_core *co = &snap->cores[c];
		uint64_t first;

		if (!co->nblocks)
			continue;
		first = kd_block_start_tick(snap, &snap->blocks[co->first_block]);
		d->core_stats[c].first_tick = first;
		d->core_stats[c].last_tick = first;
		d->core_stats[c].has_data = 1;
		if (first < d->data_start)
			d->data_start = first;
		if (co->wrapped && first > d->window_start)
			d->window_start = first;
	}
	if (d->data_start == UINT64_MAX)
		d->data_start = 0;
	if (d->opts.all || d->window_start < d->data_start)
		d->window_start = d->data_start;
	d->window_limited = d->window_start > d->data_start;
	/* Window end: every core's records before its copy_tsc are in the file,
	 * later ones may not be: the complete window ends at the earliest. */
	b->end_limit = UINT64_MAX;
	for (uint32_t c = 0; c < nc && !d->opts.all; c++)
		if (snap->cores[c].have_rec && snap->cores[c].rec.copy_tsc &&
		    (snap->cores[c].rec.copy_tsc >> d->shift) < b->end_limit)
			b->end_limit = snap->cores[c].rec.copy_tsc >> d->shift;
	if (b->end_limit < d->window_start)
		b->end_limit = d->window_start;
	d->window_cut = b->end_limit;

	/* Known threads first, in slot order, so indices are stable. */
	for (uint32_t i = 0; i < snap->nthreads; i++)
		if (new_thread(b, snap->threads[i].slot, &snap->threads[i]) == KD_NONE) {
			rc = fail(err, KD_ENOMEM, "out of memory");
			goto out;
		}

	scan_cores(b);
	if (!b->oom && order_pieces(b))
		b->oom = 1;
	if (!b->oom)
		walk_threads(b);
	if (!b->oom && b->nreqevs) {
		qsort(b->reqevs, b->nreqevs, sizeof(*b->reqevs), cmp_reqev);
		for (uint32_t i = 0; i < b->nreqevs && !b->oom; i++)
			on_request(b, &b->reqevs[i]);
	}
	if (b->oom) {
		rc = fail(err, KD_ENOMEM, "out of memory building the timeline");
		goto out;
	}

	/* Window end: the earliest copy_tsc; without one, the newest record, or
	 * the snapshot moment if it is just after it (calls still running then
	 * end there). */
	d->window_end = d->window_start;
	for (uint32_t c = 0; c < nc; c++)
		if (d->core_stats[c].has_data && d->core_stats[c].last_tick > d->window_end)
			d->window_end = d->core_stats[c].last_tick;
	if (b->end_limit != UINT64_MAX) {
		d->window_end = b->end_limit;
	} else {
		snap_tick = snap->info.snapshot_tsc >> d->shift;
		ten_s = (uint64_t)(((unsigned __int128)d->tsc_hz * 10) >> d->shift);
		if (snap_tick > d->window_end && snap_tick - d->window_end <= ten_s)
			d->window_end = snap_tick;
	}

	for (uint32_t t = 0; t < d->nthreads; t++) {
		struct tstate *s = &b->ts[t];
		uint64_t end = d->window_end > s->last_tick ? d->window_end : s->last_tick;

		while (s->depth)
			close_top(b, t, end, KTRACE_CALL_TRUNC_END);
	}
	for (uint32_t i = 0; i < d->nreqs; i++)
		if (d->reqs[i].flags & KTRACE_REQ_TRUNC_END)
			d->reqs[i].end = d->window_end > d->reqs[i].begin ? d->window_end : d->reqs[i].begin;
	/* Depth: add the frames that TRUNC_BEGIN calls revealed underneath. */
	for (uint32_t i = 0; i < d->ncalls; i++)
		d->calls[i].depth += b->ts[d->calls[i].thread].ntb;
	if (d->nreqs)
		qsort(d->reqs, d->nreqs, sizeof(*d->reqs), cmp_req);
	find_trigger(d, b);
out:
	if (b) {
		for (uint32_t t = 0; t < d->nthreads && b->ts; t++) {
			free(b->ts[t].stack);
			free(b->ts[t].roots);
		}
		free(b->ts);
		free(b->pieces);
		free(b->reqevs);
		kd_umap_free(&b->thread_map);
		kd_umap_free(&b->addr_map);
		kd_umap_free(&b->span_map);
		kd_umap_free(&b->req_map);
		free(b);
	}
	return rc;
}

/* ---- stage 4: time --------------------------------------------------------- */

static int64_t clamp_i64(__int128 v)
{
	if (v > INT64_MAX)
		return INT64_MAX;
	if (v < INT64_MIN)
		return INT64_MIN;
	return (int64_t)v;
}

uint64_t kd_dec_ticks_ns(const struct kd_dec *d, uint64_t ticks)
{
	unsigned __int128 v = ((unsigned __int128)ticks << d->shift) * 1000000000u;

	if (!d->tsc_hz)
		return 0;
	v /= d->tsc_hz;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static int64_t extrapolate(uint64_t hz, uint64_t t0, int64_t r0, uint64_t tsc)
{
	__int128 dt = (__int128)tsc - (__int128)t0;

	return clamp_i64((__int128)r0 + dt * 1000000000 / (__int128)hz);
}

int64_t kd_snap_wall_ns(const struct kd_snap *snap, uint64_t tsc)
{
	const struct ktrace_anchor_rec *a = snap->anchors;
	uint64_t hz = snap->info.tsc_hz ? snap->info.tsc_hz : 1000000000u;
	uint32_t n = snap->nanchors, lo, hi;
	long double frac;

	if (!n)
		return extrapolate(hz, snap->info.snapshot_tsc, snap->info.snapshot_realtime_ns, tsc);
	if (tsc <= a[0].tsc)
		return extrapolate(hz, a[0].tsc, a[0].realtime_ns, tsc);
	if (tsc >= a[n - 1].tsc)
		return extrapolate(hz, a[n - 1].tsc, a[n - 1].realtime_ns, tsc);
	lo = 0;
	hi = n - 1; /* a[lo].tsc < tsc < a[hi].tsc */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (a[mid].tsc <= tsc)
			lo = mid;
		else
			hi = mid;
	}
	frac = (long double)(tsc - a[lo].tsc) / (long double)(a[hi].tsc - a[lo].tsc);
	return clamp_i64((__int128)a[lo].realtime_ns +
	                 (__int128)(frac * (long double)((__int128)a[hi].realtime_ns -
	                                                 (__int128)a[lo].realtime_ns)));
}

int64_t kd_dec_wall_ns(const struct kd_dec *d, uint64_t tick)
{
	unsigned __int128 tsc = (unsigned __int128)tick << d->shift;

	return kd_snap_wall_ns(&d->snap, tsc > UINT64_MAX ? UINT64_MAX : (uint64_t)tsc);
}

void kd_fmt_wall(int64_t ns, int date, char *buf, size_t len)
{
	int64_t sec = ns / 1000000000, frac = ns % 1000000000;
	time_t t;
	struct tm tm;

	if (frac < 0) {
		frac += 1000000000;
		sec--;
	}
	t = (time_t)sec;
	if (!gmtime_r(&t, &tm) || tm.tm_year > 8099 || tm.tm_year < -1899) {
		snprintf(buf, len, "@%" PRId64 "ns", ns);
		return;
	}
	if (date)
		snprintf(buf, len, "%04d-%02d-%02d %02d:%02d:%02d.%09" PRId64,
		         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		         tm.tm_sec, frac);
	else
		snprintf(buf, len, "%02d:%02d:%02d.%09" PRId64, tm.tm_hour, tm.tm_min, tm.tm_sec,
		         frac);
}

void kd_fmt_dur(uint64_t ns, char *buf, size_t len)
{
	if (ns < 1000)
		snprintf(buf, len, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.3f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.3f s", (double)ns / 1e9);
}

/* ---- helpers and the one-call pipeline -------------------------------------- */

const char *kd_dec_strdup(struct kd_dec *d, const char *s)
{
	char *p;

	if (grow(&d->strs, &d->capstrs, d->nstrs, sizeof(*d->strs)))
		return "?";
	p = kd_xstrdup(s, "names");
	d->strs[d->nstrs++] = p;
	return p;
}

const char *kd_dec_func_name(const struct kd_dec *d, uint32_t func)
{
	if (func >= d->nfuncs || !d->funcs[func].name)
		return "?";
	return d->funcs[func].name;
}

const char *kd_dec_name(const struct kd_dec *d, uint32_t id, char *buf, size_t len)
{
	const char *s = kd_snap_name(&d->snap, id);

	if (s)
		return s;
	snprintf(buf, len, "name#%" PRIu32, id);
	return buf;
}

const char *kd_dec_thread_label(const struct kd_dec *d, uint32_t thread,
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

int kd_dec_open_buffer(const void *buf, size_t len, const char *name,
                            const struct kd_dec_opts *opts, struct kd_dec **out,
                            struct kd_dec_error *err)
{
	struct kd_dec *d;
	int rc;

	*out = NULL;
	memset(err, 0, sizeof(*err));
	d = kd_xcalloc(1, sizeof(*d), "the decoder");
	d->file = kd_xstrdup(name ? name : "(buffer)", "the decoder");
	if (opts)
		d->opts = *opts;
	rc = kd_snap_read(buf, len, &d->snap, err);
	if (!rc)
		rc = kd_snap_order(&d->snap, err);
	if (!rc)
		rc = kd_dec_build(d, err);
	if (rc) {
		kd_dec_free(d);
		return rc;
	}
	kd_dec_symbolize(d);
	if (kd_dec_sched(d)) {
		kd_dec_free(d);
		return fail(err, KD_ENOMEM, "out of memory");
	}
	*out = d;
	return 0;
}

/*
 * Open a path named by a user or by a snapshot without ever blocking: a FIFO
 * without a writer, a tty or a device must not hang the decoder at open().
 * O_NONBLOCK is cleared again once fstat() says what it is, for the caller's
 * reads.  Returns the descriptor, or -1 with errno set.
 */
int kd_dec_open_path(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC), fl;

	if (fd < 0)
		return -1;
	if (fstat(fd, st) != 0 || (fl = fcntl(fd, F_GETFL)) < 0 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Bytes per pread(); the test hook runs before each. */
#define READ_CHUNK (16u << 20)

uint64_t kd_dec_pread(int fd, void *buf, uint64_t off, uint64_t n, const char *path,
                           uint64_t total)
{
	uint64_t done = 0;

	while (done < n) {
		size_t k = n - done < READ_CHUNK ? (size_t)(n - done) : READ_CHUNK;
		ssize_t r;

		if (kd_dec_read_hook)
			kd_dec_read_hook(path, off + done, total);
		r = pread(fd, (char *)buf + done, k, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return done;
		if (r == 0) {
			errno = 0; /* end of file: the file is shorter than it was */
			return done;
		}
		done += (uint64_t)r;
	}
	return done;
}

/*
 * The file is read, not mapped: a mapped file that someone truncates while
 * the decoder walks it kills the decoder with SIGBUS, and a copy costs a
 * few percent of a decode (bench/RESULTS.md, "decoder: read vs mmap").  A
 * regular file is read to the size fstat() gave; coming up short means it
 * was truncated meanwhile, which is an error, not a smaller snapshot.
 * Pipes and sockets (`ktrace-decode <(zcat f.ktrace.gz)`) are read to EOF;
 * anything else (a directory, a device) is refused.
 */
int kd_dec_open_file(const char *path, const struct kd_dec_opts *opts,
                          struct kd_dec **out, struct kd_dec_error *err)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, rc;
	char msg[300];

	*out = NULL;
	memset(err, 0, sizeof(*err));
	fd = kd_dec_open_path(path, &st);
	if (fd < 0) {
		snprintf(msg, sizeof(msg), "cannot open: %s", strerror(errno));
		return fail(err, KD_EIO, msg);
	}
	if (S_ISREG(st.st_mode)) {
		size_t want = (size_t)st.st_size;

		buf = kd_xmalloc(want, "the snapshot file");
		len = (size_t)kd_dec_pread(fd, buf, 0, want, path, want);
		if (len < want && errno) {
			snprintf(msg, sizeof(msg), "read error at byte %zu: %s", len, strerror(errno));
			goto fail_io;
		}
		if (len < want) {
			snprintf(msg, sizeof(msg),
			         "the file was truncated while it was read (%zu of %zu bytes)"
			         "; decode a copy that nothing is writing to", len, want);
			goto fail_io;
		}
	} else if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
		size_t cap = 0;

		for (;;) {
			ssize_t n;

			if (len == cap) {
				cap = cap ? cap * 2 : 65536;
				buf = kd_xrealloc(buf, cap, "the snapshot file");
			}
			n = read(fd, buf + len, cap - len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				snprintf(msg, sizeof(msg), "read error: %s", strerror(errno));
				goto fail_io;
			}
			if (n == 0)
				break;
			len += (size_t)n;
		}
	} else {
		snprintf(msg, sizeof(msg), "not a regular file or a pipe (%s); nothing read",
		         S_ISDIR(st.st_mode)   ? "a directory" :
		         S_ISCHR(st.st_mode)   ? "a character device" :
		         S_ISBLK(st.st_mode)   ? "a block device" : "a special file");
		goto fail_io;
	}
	close(fd);
	rc = kd_dec_open_buffer(buf ? buf : "", len, path, opts, out, err);
	if (rc) {
		free(buf);
		return rc;
	}
	(*out)->map = buf;
	(*out)->map_len = len;
	(*out)->map_is_mmap = 0;
	return 0;
fail_io:
	free(buf);
	close(fd);
	return fail(err, KD_EIO, msg);
}

void kd_dec_free(struct kd_dec *d)
{
	if (!d)
		return;
	kd_snap_free(&d->snap);
	kd_symcache_free(d->symcache);
	free(d->funcs);
	free(d->threads);
	free(d->calls);
	free(d->reqs);
	free(d->marks);
	free(d->runs);
	free(d->core_stats);
	free(d->offcpu);
	free(d->offcpu_first);
	free(d->oncpu);
	for (uint32_t i = 0; i < d->nstrs; i++)
		free(d->strs[i]);
	free(d->strs);
	if (d->map) {
		if (d->map_is_mmap)
			munmap(d->map, d->map_len);
		else
			free(d->map);
	}
	free(d->file);
	free(d);
}
