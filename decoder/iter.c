/*
 * iter.c - stage 2 of ktrace-decode: block order and the per-core record
 * iterator.
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
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "iter.h"
#include "read.h"
#include "snap.h"
#include "util.h"

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

int kd_iter_order(struct kd_snap *snap, struct kd_dec_error *err)
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
	/* One read window per core for its iterators (kd_snap_block_words). */
	free(snap->wins);
	snap->wins = kd_xcalloc(ncpu ? ncpu : 1, sizeof(*snap->wins), "cores");
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
	return kd_util_fail(err, KD_ENOMEM, "out of memory ordering blocks");
}

/* ---- stage 2: per-core iterator ------------------------------------------ */

uint64_t kd_iter_block_start_tick(const struct kd_snap *snap,
                                  const struct kd_snap_block *b)
{
	return b->tsc >> snap->info.tsc_shift;
}

void kd_iter_init(struct kd_core_iter *it, const struct kd_snap *snap,
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

int kd_iter_open_block(struct kd_core_iter *it)
{
	const struct kd_snap_block *b;

	do {
		if (it->blk >= it->blk_end)
			return 0;
		b = &it->snap->blocks[it->blk++];
		/* The reader checked: nwords >= 5, word 0 is a 4-word extended
		 * header, word 1 a BLOCK_START type word.  NULL: the file changed
		 * since (counted; the block is left out). */
		it->words = kd_snap_block_words(it->snap, b);
	} while (!it->words);
	it->nwords = b->nwords;
	it->blk_offset = b->offset + sizeof(struct ktrace_block_rec);
	it->slot = b->slot;
	it->seg = KD_NONE; /* the writer's THREAD record follows */
	it->held = 0;
	it->tick = kd_iter_block_start_tick(it->snap, b);
	it->blk_tick = it->tick;
	it->ts20 = (uint32_t)it->tick & KTRACE_TS_MASK;
	it->pos = 5;
	return 1;
}

void kd_iter_damaged_tail(struct kd_core_iter *it, const char *what)
{
	kd_warn(it->warn, it->blk_offset + (uint64_t)it->pos * 4,
	             "cpu %" PRIu32 ": %s; the rest of this block (%" PRIu32
	             " words) is skipped", it->snap->cores[it->core].cpu, what,
	             it->nwords - it->pos);
	it->damaged_tails++;
	it->pos = it->nwords;
}

int kd_iter_record(struct kd_core_iter *it, struct kd_dec_event *ev)
{
	return kd_iter_next(it, ev);
}

void kd_iter_seek(struct kd_core_iter *it, uint32_t blk, uint32_t pos,
                            uint64_t ref_tick, uint32_t ref_ts20, uint32_t slot, uint32_t seg)
{
	const struct kd_snap_block *b = &it->snap->blocks[blk];

	it->blk = blk + 1;
	it->words = kd_snap_block_words(it->snap, b);
	it->nwords = it->words ? b->nwords : 0; /* unreadable now: on to the next */
	it->blk_offset = b->offset + sizeof(struct ktrace_block_rec);
	it->blk_tick = kd_iter_block_start_tick(it->snap, b);
	it->pos = pos;
	it->tick = ref_tick;
	it->ts20 = ref_ts20;
	it->slot = slot;
	it->seg = seg;
	it->held = 0; /* the caller sets a held run's state */
}


/*
 * kd_iter_batch: the first event by kd_iter_next (which opens blocks and
 * handles PAD, TSC, THREAD, extended records and damage), then, in the same
 * block, the plain ENTER/EXIT records that follow, decoded the same way in
 * a loop that keeps the state in locals; anything else ends the batch and is
 * left to the next call.  Afterwards it->ev_* describe the batch's first
 * event, not its last.
 */
uint32_t kd_iter_batch(struct kd_core_iter *it, struct kd_batch *bt, uint32_t max)
{
	struct kd_dec_event ev;
	const uint8_t *words;
	uint32_t pos, nwords, ts20, n = 1;
	uint64_t tick;

	ev.aux = 0; /* kd_iter_next sets them for format-2 request records only */
	ev.value2 = 0;
	if (!kd_iter_next(it, &ev))
		return bt->n = 0;
	bt->slot = ev.slot;
	bt->seg = ev.seg;
	bt->blk = it->blk - 1;
	bt->pos = it->ev_pos;
	bt->ref_tick = it->ev_ref_tick;
	bt->ref_ts20 = it->ev_ref_ts20;
	bt->blk_tick = it->held ? it->held_tick : it->blk_tick;
	bt->held = it->held;
	bt->held_p = it->held_p;
	bt->held_hc = it->held_hc;
	bt->aux0 = ev.aux;
	bt->value2_0 = ev.value2;
	bt->tick[0] = ev.tick;
	bt->id[0] = ev.id;
	bt->kind[0] = (uint8_t)ev.kind;
	bt->value[0] = ev.value;
	words = it->words;
	pos = it->pos;
	nwords = it->nwords;
	ts20 = it->ts20;
	tick = it->tick;
	while (n < max && pos < nwords) {
		uint32_t w = kd_le32(words + (size_t)pos * 4), e = KTRACE_REC_EV(w);
		/* ENTER (0x020..) and EXIT (0x820..): the same id, bit 11 apart */
		uint32_t id = (e & (KTRACE_EV_EXIT_FLAG - 1)) - KTRACE_EV_ENTER_BASE;

		_Static_assert(KTRACE_EV_EXIT_BASE == (KTRACE_EV_ENTER_BASE | KTRACE_EV_EXIT_FLAG) &&
		               KTRACE_EV_EXIT_FLAG == 0x800u && KD_DK_EXIT == KD_DK_ENTER + 1,
		               "compact ids: enter | 0x800 = exit");
		if (id >= KTRACE_FUNC_ID_COUNT)
			break; /* PAD, extended, reserved: kd_iter_next's */
		tick = kd_tick_of(tick, ts20, KTRACE_REC_TS(w));
		ts20 = KTRACE_REC_TS(w);
		bt->tick[n] = tick;
		bt->kind[n] = (uint8_t)(KD_DK_ENTER + (e >> 11));
		bt->id[n] = id;
		n++;
		pos++;
	}
	it->pos = pos;
	it->ts20 = ts20;
	it->tick = tick;
	return bt->n = n;
}
