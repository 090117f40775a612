/*
 * snapbuild.c - synthetic snapshot files for tests (see snapbuild.h).
 * Aborts on allocation failure: it is test code.
 */
#include "snapbuild.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder.h"

#define MAX_CPUS 256
#define SB_SLOTS 4096 /* thread slots usable with snapbuild_thread_seq() */

struct sb_block {
	uint32_t cpu;
	uint32_t s;
	uint32_t nwords;
	int bad_crc;
	uint32_t w[KTRACE_BLOCK_WORDS];
};

struct sb_sec {
	uint32_t type;
	uint32_t count;
	uint8_t *data;
	size_t size;
	int bad_crc;
};

struct sb_stream {
	int open;            /* a block is open */
	uint32_t blk;        /* index of the open block */
	uint32_t slot;       /* current thread slot */
	uint64_t tick;       /* ticks: reference */
	uint32_t next_s;
	uint32_t nblocks;    /* blocks written */
	int have_core;
	uint32_t core_nblocks;
	uint64_t core_used;
	uint64_t copy_tsc;   /* CORES copy_tsc (0 = unknown) */
	int held;            /* a HELD run is open: records go in as they are */
};

struct buf {
	uint8_t *p;
	size_t n, cap;
	uint32_t count;
};

struct snapbuild {
	struct ktrace_info_rec info;
	struct buf anchors, funcs, threads, names, modules, trigger;
	struct ktrace_loss_rec loss;
	int have_loss, have_trigger;
	uint32_t omit;       /* bit per section type */
	struct sb_sec *raw;
	uint32_t nraw;
	struct sb_block **blocks;
	uint32_t nblocks, capblocks;
	struct sb_stream cpu[MAX_CPUS];
	int seq;                     /* write THREAD records with a segment number */
	uint32_t seg[SB_SLOTS];      /* per slot: current segment */
	uint32_t seg_cpu[SB_SLOTS];  /* per slot: cpu + 1 of the current segment */
	uint16_t version;            /* header version (default KTRACE_FORMAT_VERSION) */
	/* REQUESTS section (format 2), built by snapbuild_req_*: */
	int have_reqs;
	struct ktrace_req_hdr req_hdr;
	struct buf reqs;             /* kind, slice and bucket records as written */
	size_t req_kind_at;          /* offset in reqs of the last kind record */
};

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		abort();
	return p;
}

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void pad(struct buf *b, size_t align)
{
	static const uint8_t z[8];

	while (b->n % align)
		put(b, z, 1);
}

struct snapbuild *snapbuild_new(void)
{
	struct snapbuild *sb = calloc(1, sizeof(*sb));

	if (!sb)
		abort();
	sb->version = KTRACE_FORMAT_VERSION;
	sb->info.tsc_hz = 1000000000ull;
	sb->info.tsc_shift = 0;
	sb->info.clock_source = KTRACE_CLOCK_TSC;
	sb->info.pid = 4242;
	sb->info.ncpus = 4;
	sb->info.block_words = KTRACE_BLOCK_WORDS;
	sb->info.func_id_count = KTRACE_FUNC_ID_COUNT;
	sb->info.snapshot_seq = 1;
	sb->info.snapshot_realtime_ns = 1763700000000000000ll; /* 2025-11-21 04:40:00 UTC */
	sb->info.ring_bytes_per_core = 1u << 20;
	strcpy(sb->info.reason, "test");
	strcpy(sb->info.exe, "/usr/bin/synthetic");
	strcpy(sb->info.hostname, "testhost");
	return sb;
}

void snapbuild_free(struct snapbuild *sb)
{
	if (!sb)
		return;
	free(sb->anchors.p);
	free(sb->funcs.p);
	free(sb->threads.p);
	free(sb->names.p);
	free(sb->modules.p);
	free(sb->trigger.p);
	free(sb->reqs.p);
	for (uint32_t i = 0; i < sb->nraw; i++)
		free(sb->raw[i].data);
	free(sb->raw);
	for (uint32_t i = 0; i < sb->nblocks; i++)
		free(sb->blocks[i]);
	free(sb->blocks);
	free(sb);
}

struct ktrace_info_rec *snapbuild_info(struct snapbuild *sb)
{
	return &sb->info;
}

void snapbuild_anchor(struct snapbuild *sb, uint64_t tsc, int64_t realtime_ns)
{
	struct ktrace_anchor_rec a = { tsc, realtime_ns, (int64_t)tsc };

	put(&sb->anchors, &a, sizeof(a));
	sb->anchors.count++;
}

void snapbuild_func(struct snapbuild *sb, uint32_t id, uint64_t addr)
{
	struct ktrace_func_rec f = { addr, id, 0 };

	put(&sb->funcs, &f, sizeof(f));
	sb->funcs.count++;
}

void snapbuild_thread(struct snapbuild *sb, uint32_t slot, int32_t tid, const char *name,
                      uint32_t flags)
{
	struct ktrace_thread_rec t;

	memset(&t, 0, sizeof(t));
	t.slot = slot;
	t.tid = tid;
	t.flags = flags;
	snprintf(t.name, sizeof(t.name), "%s", name);
	put(&sb->threads, &t, sizeof(t));
	sb->threads.count++;
}

void snapbuild_name(struct snapbuild *sb, uint32_t id, uint16_t kind, const char *name)
{
	struct ktrace_name_rec r = { id, (uint16_t)strlen(name), kind };

	put(&sb->names, &r, sizeof(r));
	put(&sb->names, name, r.len);
	pad(&sb->names, 4);
	sb->names.count++;
}

void snapbuild_module(struct snapbuild *sb, uint64_t start, uint64_t end, uint64_t file_offset,
                      const char *path)
{
	struct ktrace_module_rec m = { start, end, file_offset, (uint32_t)strlen(path), 0 };

	put(&sb->modules, &m, sizeof(m));
	put(&sb->modules, path, m.path_len);
	pad(&sb->modules, 8);
	sb->modules.count++;
}

void snapbuild_loss(struct snapbuild *sb, unsigned cause, uint64_t count)
{
	if (cause < KTRACE_LOSS_COUNT)
		sb->loss.count[cause] = count;
	sb->have_loss = 1;
}

void snapbuild_trigger(struct snapbuild *sb, const struct ktrace_trigger_rec *t)
{
	sb->trigger.n = 0;
	put(&sb->trigger, t, sizeof(*t));
	sb->have_trigger = 1;
}

/* The record as first written (KTRACE_TRIGGER_REC_SIZE_V1 bytes, before
 * preempted_ns), as files of older writers carry it. */
void snapbuild_trigger_v1(struct snapbuild *sb, const struct ktrace_trigger_rec *t)
{
	sb->trigger.n = 0;
	put(&sb->trigger, t, KTRACE_TRIGGER_REC_SIZE_V1);
	sb->have_trigger = 1;
}

void snapbuild_core(struct snapbuild *sb, uint32_t cpu, uint32_t nblocks, uint64_t blocks_used)
{
	if (cpu >= MAX_CPUS)
		return;
	sb->cpu[cpu].have_core = 1;
	sb->cpu[cpu].core_nblocks = nblocks;
	sb->cpu[cpu].core_used = blocks_used;
}

void snapbuild_core_copy_tsc(struct snapbuild *sb, uint32_t cpu, uint64_t copy_tsc)
{
	if (cpu < MAX_CPUS)
		sb->cpu[cpu].copy_tsc = copy_tsc;
}

void snapbuild_raw_section(struct snapbuild *sb, uint32_t type, uint32_t count,
                           const void *data, size_t size, int bad_crc)
{
	struct sb_sec *s;

	sb->raw = xrealloc(sb->raw, (sb->nraw + 1) * sizeof(*sb->raw));
	s = &sb->raw[sb->nraw++];
	s->type = type;
	s->count = count;
	s->size = size;
	s->data = xrealloc(NULL, size);
	if (size)
		memcpy(s->data, data, size);
	s->bad_crc = bad_crc;
}

void snapbuild_omit(struct snapbuild *sb, uint32_t type)
{
	if (type < 32)
		sb->omit |= 1u << type;
}

/* ---- records ------------------------------------------------------------------ */

uint32_t snapbuild_block_start_words(uint32_t *w, uint32_t slot, uint32_t s, uint64_t tsc)
{
	w[0] = KTRACE_REC(0, 4); /* ts20 is ignored: the payload has the full TSC */
	w[1] = KTRACE_EXT_WORD(KTRACE_EXT_BLOCK_START, slot);
	w[2] = s;
	w[3] = (uint32_t)tsc;
	w[4] = (uint32_t)(tsc >> 32);
	return 5;
}

static struct sb_block *new_block(struct snapbuild *sb, uint32_t cpu, uint32_t s)
{
	struct sb_block *b = calloc(1, sizeof(*b));

	if (!b)
		abort();
	b->cpu = cpu;
	b->s = s;
	if (sb->nblocks == sb->capblocks) {
		sb->capblocks = sb->capblocks ? sb->capblocks * 2 : 16;
		sb->blocks = xrealloc(sb->blocks, sb->capblocks * sizeof(*sb->blocks));
	}
	sb->blocks[sb->nblocks++] = b;
	return b;
}

void snapbuild_set_next_s(struct snapbuild *sb, uint32_t cpu, uint32_t s)
{
	if (cpu < MAX_CPUS)
		sb->cpu[cpu].next_s = s;
}

void snapbuild_flush(struct snapbuild *sb, uint32_t cpu)
{
	if (cpu < MAX_CPUS)
		sb->cpu[cpu].open = 0;
}

/* Make room for need words (a record and whatever precedes it) in cpu's block. */
static struct sb_block *room(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                             uint32_t need)
{
	struct sb_stream *st = &sb->cpu[cpu % MAX_CPUS];
	struct sb_block *b = st->open ? sb->blocks[st->blk] : NULL;
	uint64_t tsc = tick << sb->info.tsc_shift;
	uint32_t extra = 0, twords = sb->seq ? 3 : 2;
	/* Segments (THREAD seq): a thread starts a new one whenever it starts
	 * writing on a core: another thread owned the stream, or it migrated. */
	int newseg = sb->seq && (!st->open || st->slot != slot ||
	                         sb->seg_cpu[slot % SB_SLOTS] != cpu + 1);

	if (sb->seq && slot >= SB_SLOTS)
		abort();
	if (st->held) {
		/* Inside a HELD run: no THREAD record, no segment change; a run
		 * that does not fit is the test's mistake (chunks are explicit). */
		if (!b || slot != st->slot)
			abort();
		if (tick > st->tick + KTRACE_TS_FORWARD_MAX || tick + (KTRACE_TS_HALF / 2) < st->tick)
			extra = 4;
		if (b->nwords + extra + need > KTRACE_BLOCK_WORDS)
			abort();
		if (extra) {
			b->w[b->nwords++] = KTRACE_REC(tick, 3);
			b->w[b->nwords++] = KTRACE_EXT_WORD(KTRACE_EXT_TSC, 0);
			b->w[b->nwords++] = (uint32_t)tsc;
			b->w[b->nwords++] = (uint32_t)(tsc >> 32);
			st->tick = tick;
		}
		return b;
	}
	if (b) {
		if (st->slot != slot || newseg)
			extra += twords;
		if (tick > st->tick + KTRACE_TS_FORWARD_MAX || tick + (KTRACE_TS_HALF / 2) < st->tick)
			extra += 4;
		if (b->nwords + extra + need > KTRACE_BLOCK_WORDS)
			b = NULL;
	}
	if (newseg || (sb->seq && sb->seg_cpu[slot % SB_SLOTS] != cpu + 1))
		sb->seg[slot % SB_SLOTS]++;
	if (sb->seq)
		sb->seg_cpu[slot % SB_SLOTS] = cpu + 1;
	if (!b) {
		b = new_block(sb, cpu, st->next_s);
		st->blk = sb->nblocks - 1;
		st->open = 1;
		st->next_s += KTRACE_BLOCK_WORDS;
		st->nblocks++;
		b->nwords = snapbuild_block_start_words(b->w, slot, b->s, tsc);
		if (sb->seq) { /* every BLOCK_START is followed by the owner's segment */
			b->w[b->nwords++] = KTRACE_REC(tick, 2);
			b->w[b->nwords++] = KTRACE_EXT_WORD(KTRACE_EXT_THREAD, slot);
			b->w[b->nwords++] = sb->seg[slot % SB_SLOTS];
		}
		st->slot = slot;
		st->tick = tick;
		return b;
	}
	if (tick > st->tick + KTRACE_TS_FORWARD_MAX || tick + (KTRACE_TS_HALF / 2) < st->tick) {
		b->w[b->nwords++] = KTRACE_REC(tick, 3);
		b->w[b->nwords++] = KTRACE_EXT_WORD(KTRACE_EXT_TSC, 0);
		b->w[b->nwords++] = (uint32_t)tsc;
		b->w[b->nwords++] = (uint32_t)(tsc >> 32);
		st->tick = tick;
	}
	if (st->slot != slot || newseg) {
		b->w[b->nwords++] = KTRACE_REC(tick, twords - 1);
		b->w[b->nwords++] = KTRACE_EXT_WORD(KTRACE_EXT_THREAD, slot);
		if (sb->seq)
			b->w[b->nwords++] = sb->seg[slot % SB_SLOTS];
		st->slot = slot;
	}
	return b;
}

void snapbuild_thread_seq(struct snapbuild *sb, int on)
{
	sb->seq = on;
}

void snapbuild_word(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t word)
{
	struct sb_block *b = room(sb, cpu, slot, tick, 1);

	b->w[b->nwords++] = word;
	sb->cpu[cpu % MAX_CPUS].tick = tick;
}

void snapbuild_enter(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                     uint32_t id)
{
	snapbuild_word(sb, cpu, slot, tick, KTRACE_REC(tick, KTRACE_EV_ENTER_BASE + id));
}

void snapbuild_exit(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t id)
{
	snapbuild_word(sb, cpu, slot, tick, KTRACE_REC(tick, KTRACE_EV_EXIT_BASE + id));
}

void snapbuild_ext(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                   uint32_t type, uint32_t arg, const uint32_t *extra, uint32_t n)
{
	struct sb_block *b;

	if (n + 1 > KTRACE_EV_EXT_MAX)
		abort();
	b = room(sb, cpu, slot, tick, n + 2);
	b->w[b->nwords++] = KTRACE_REC(tick, n + 1);
	b->w[b->nwords++] = KTRACE_EXT_WORD(type, arg & KTRACE_ARG24_MAX);
	for (uint32_t i = 0; i < n; i++)
		b->w[b->nwords++] = extra[i];
	sb->cpu[cpu % MAX_CPUS].tick = tick;
}

static void ext64(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                  uint32_t type, uint32_t arg, uint64_t v)
{
	uint32_t w[2] = { (uint32_t)v, (uint32_t)(v >> 32) };

	snapbuild_ext(sb, cpu, slot, tick, type, arg, w, 2);
}

void snapbuild_enter_addr(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                          uint64_t addr)
{
	ext64(sb, cpu, slot, tick, KTRACE_EXT_FUNC_ENTER_ADDR, 0, addr);
}

void snapbuild_exit_addr(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                         uint64_t addr)
{
	ext64(sb, cpu, slot, tick, KTRACE_EXT_FUNC_EXIT_ADDR, 0, addr);
}

void snapbuild_mark(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t name, uint64_t value)
{
	ext64(sb, cpu, slot, tick, KTRACE_EXT_MARK, name, value);
}

void snapbuild_span(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t name, int end)
{
	snapbuild_ext(sb, cpu, slot, tick, end ? KTRACE_EXT_SPAN_END : KTRACE_EXT_SPAN_BEGIN, name,
	              NULL, 0);
}

void snapbuild_req(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                   uint32_t kind, uint64_t id, int end)
{
	ext64(sb, cpu, slot, tick, end ? KTRACE_EXT_REQ_END : KTRACE_EXT_REQ_BEGIN, kind, id);
}

void snapbuild_req_open(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                        uint32_t kind, uint32_t number)
{
	snapbuild_ext(sb, cpu, slot, tick, KTRACE_EXT_REQ_OPEN, kind, &number, 1);
}

void snapbuild_req_open_id(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                           uint32_t kind, uint32_t number, uint64_t user_id)
{
	uint32_t w[3] = { number, (uint32_t)user_id, (uint32_t)(user_id >> 32) };

	snapbuild_ext(sb, cpu, slot, tick, KTRACE_EXT_REQ_OPEN_ID, kind, w, 3);
}

void snapbuild_req_close(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                         uint32_t keep)
{
	snapbuild_ext(sb, cpu, slot, tick, KTRACE_EXT_REQ_CLOSE, keep, NULL, 0);
}

void snapbuild_req_close_any(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                             uint32_t keep, uint32_t kind, uint32_t number, uint32_t begin_slot)
{
	uint32_t w[3] = { kind, number, begin_slot };

	snapbuild_ext(sb, cpu, slot, tick, KTRACE_EXT_REQ_CLOSE_ANY, keep, w, 3);
}

uint32_t snapbuild_pos(const struct snapbuild *sb, uint32_t cpu)
{
	const struct sb_stream *st = &sb->cpu[cpu % MAX_CPUS];

	return st->open ? sb->blocks[st->blk]->s + sb->blocks[st->blk]->nwords : st->next_s;
}

uint32_t snapbuild_seg(const struct snapbuild *sb, uint32_t slot)
{
	return sb->seg[slot % SB_SLOTS];
}

void snapbuild_held(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t seg, uint32_t p, uint32_t h, uint32_t chunk)
{
	struct sb_stream *st = &sb->cpu[cpu % MAX_CPUS];
	struct sb_block *b = st->open ? sb->blocks[st->blk] : NULL;
	uint64_t tsc = tick << sb->info.tsc_shift;

	if (!b || b->nwords + 7 + 16 > KTRACE_BLOCK_WORDS) {
		/* A fresh block: BLOCK_START names the slot, THREAD its current
		 * segment (not a new one: the held records are not a segment). */
		b = new_block(sb, cpu, st->next_s);
		st->blk = sb->nblocks - 1;
		st->open = 1;
		st->next_s += KTRACE_BLOCK_WORDS;
		st->nblocks++;
		b->nwords = snapbuild_block_start_words(b->w, slot, b->s, tsc);
		if (sb->seq) {
			b->w[b->nwords++] = KTRACE_REC(tick, 2);
			b->w[b->nwords++] = KTRACE_EXT_WORD(KTRACE_EXT_THREAD, slot);
			b->w[b->nwords++] = sb->seg[slot % SB_SLOTS];
		}
	}
	b->w[b->nwords++] = KTRACE_REC(tick, 6);
	b->w[b->nwords++] = KTRACE_EXT_WORD(KTRACE_EXT_HELD, slot);
	b->w[b->nwords++] = seg;
	b->w[b->nwords++] = p;
	b->w[b->nwords++] = (h & KTRACE_ARG24_MAX) << 8 | (chunk & 0xFFu);
	b->w[b->nwords++] = (uint32_t)tsc;
	b->w[b->nwords++] = (uint32_t)(tsc >> 32);
	st->held = 1;
	st->slot = slot;
	st->tick = tick;
}

void snapbuild_held_end(struct snapbuild *sb, uint32_t cpu)
{
	struct sb_stream *st = &sb->cpu[cpu % MAX_CPUS];

	st->held = 0;
	st->slot = UINT32_MAX; /* the next record names its thread again */
}

void snapbuild_version(struct snapbuild *sb, uint16_t version)
{
	sb->version = version;
}

uint32_t snapbuild_req_bucket_of(uint64_t v, uint32_t sub_bits)
{
	uint32_t e;

	if (v < (1ull << sub_bits))
		return (uint32_t)v;
	e = 63u - (uint32_t)__builtin_clzll(v);
	return ((e - sub_bits + 1) << sub_bits) +
	       (uint32_t)((v >> (e - sub_bits)) & ((1ull << sub_bits) - 1));
}

void snapbuild_req_hdr(struct snapbuild *sb, const struct ktrace_req_hdr *h)
{
	sb->have_reqs = 1;
	sb->req_hdr = *h;
	sb->req_hdr.nkinds = 0;
}

void snapbuild_req_kind(struct snapbuild *sb, const struct ktrace_req_kind_rec *k)
{
	struct ktrace_req_kind_rec r = *k;

	r.nslices = 0;
	sb->req_kind_at = sb->reqs.n;
	put(&sb->reqs, &r, sizeof(r));
	sb->req_hdr.nkinds++;
}

static int cmp_u32v(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

void snapbuild_req_slice(struct snapbuild *sb, uint64_t start_tsc, uint64_t end_tsc,
                         const uint64_t *dur_ticks, uint32_t n)
{
	struct ktrace_req_slice_rec r;
	struct ktrace_req_kind_rec k;
	uint32_t *b = xrealloc(NULL, ((size_t)n + 1) * sizeof(*b));

	memset(&r, 0, sizeof(r));
	r.start_tsc = start_tsc;
	r.end_tsc = end_tsc;
	r.count = n;
	for (uint32_t i = 0; i < n; i++) {
		b[i] = snapbuild_req_bucket_of(dur_ticks[i], sb->req_hdr.sub_bits);
		if (dur_ticks[i] > r.max_ticks)
			r.max_ticks = dur_ticks[i];
	}
	qsort(b, n, sizeof(*b), cmp_u32v);
	for (uint32_t i = 0; i < n; i++)
		r.nbuckets += !i || b[i] != b[i - 1];
	put(&sb->reqs, &r, sizeof(r));
	for (uint32_t i = 0; i < n;) {
		struct ktrace_req_bucket bk = { b[i], 0 };

		while (i < n && b[i] == bk.bucket) {
			bk.count++;
			i++;
		}
		put(&sb->reqs, &bk, sizeof(bk));
	}
	memcpy(&k, sb->reqs.p + sb->req_kind_at, sizeof(k));
	k.nslices++;
	memcpy(sb->reqs.p + sb->req_kind_at, &k, sizeof(k));
	free(b);
}

void snapbuild_block_raw(struct snapbuild *sb, uint32_t cpu, uint32_t s, const uint32_t *words,
                         uint32_t nwords)
{
	struct sb_block *b = new_block(sb, cpu, s);

	if (nwords > KTRACE_BLOCK_WORDS)
		abort();
	memcpy(b->w, words, (size_t)nwords * 4);
	b->nwords = nwords;
	if (cpu < MAX_CPUS)
		sb->cpu[cpu].nblocks++;
}

uint32_t snapbuild_nblocks(const struct snapbuild *sb)
{
	return sb->nblocks;
}

void snapbuild_block_bad_crc(struct snapbuild *sb, uint32_t block)
{
	if (block < sb->nblocks)
		sb->blocks[block]->bad_crc = 1;
}

void snapbuild_reverse_blocks(struct snapbuild *sb)
{
	for (uint32_t i = 0, j = sb->nblocks; i + 1 < j; i++, j--) {
		struct sb_block *t = sb->blocks[i];

		sb->blocks[i] = sb->blocks[j - 1];
		sb->blocks[j - 1] = t;
	}
	for (uint32_t c = 0; c < MAX_CPUS; c++)
		sb->cpu[c].open = 0;
}

/* ---- the file -------------------------------------------------------------------- */

static void add_sec(struct buf *file, struct buf *table, uint32_t type, uint32_t count,
                    const void *data, size_t size, int bad_crc)
{
	struct ktrace_section s;

	pad(file, 8);
	memset(&s, 0, sizeof(s));
	s.type = type;
	s.count = count;
	s.offset = file->n;
	s.size = size;
	s.crc = kd_crc32c(0, data, size) ^ (bad_crc ? 1u : 0u);
	put(file, data, size);
	put(table, &s, sizeof(s));
	table->count++;
}

int snapbuild_finish(struct snapbuild *sb, uint8_t **out, size_t *outlen)
{
	struct buf file = { 0 }, table = { 0 }, blocks = { 0 }, cores = { 0 };
	struct ktrace_file_header h;
	uint64_t max_tick = 0;
	int damaged = 0; /* a bad block CRC models damage after writing: the
	                    BLOCKS section's CRC is then wrong as well */

	memset(&h, 0, sizeof(h));
	put(&file, &h, sizeof(h));

	for (uint32_t i = 0; i < sb->nblocks; i++) {
		struct sb_block *b = sb->blocks[i];
		struct ktrace_block_rec r = { b->cpu, b->nwords, b->s, 0 };

		r.crc = kd_crc32c(0, b->w, (size_t)b->nwords * 4) ^ (b->bad_crc ? 1u : 0u);
		damaged |= b->bad_crc;
		put(&blocks, &r, sizeof(r));
		put(&blocks, b->w, (size_t)b->nwords * 4);
		blocks.count++;
	}
	for (uint32_t c = 0; c < MAX_CPUS; c++) {
		struct sb_stream *st = &sb->cpu[c];
		struct ktrace_core_rec r;

		if (st->tick > max_tick)
			max_tick = st->tick;
		if (!st->nblocks && !st->have_core)
			continue;
		memset(&r, 0, sizeof(r));
		r.cpu = c;
		r.nblocks = st->have_core ? st->core_nblocks : (st->nblocks ? st->nblocks : 1);
		r.blocks_used = st->have_core ? st->core_used : st->nblocks;
		r.words_written = (uint64_t)st->nblocks * KTRACE_BLOCK_WORDS;
		r.copy_tsc = st->copy_tsc;
		put(&cores, &r, sizeof(r));
		cores.count++;
	}
	if (!sb->info.snapshot_tsc)
		sb->info.snapshot_tsc = max_tick << sb->info.tsc_shift;

	if (!(sb->omit & (1u << KTRACE_SEC_INFO)))
		add_sec(&file, &table, KTRACE_SEC_INFO, 1, &sb->info, sizeof(sb->info), 0);
	if (sb->anchors.count)
		add_sec(&file, &table, KTRACE_SEC_ANCHORS, sb->anchors.count, sb->anchors.p,
		        sb->anchors.n, 0);
	if (sb->funcs.count)
		add_sec(&file, &table, KTRACE_SEC_FUNCS, sb->funcs.count, sb->funcs.p, sb->funcs.n, 0);
	if (sb->threads.count)
		add_sec(&file, &table, KTRACE_SEC_THREADS, sb->threads.count, sb->threads.p,
		        sb->threads.n, 0);
	if (sb->names.count)
		add_sec(&file, &table, KTRACE_SEC_NAMES, sb->names.count, sb->names.p, sb->names.n, 0);
	if (sb->modules.count)
		add_sec(&file, &table, KTRACE_SEC_MODULES, sb->modules.count, sb->modules.p,
		        sb->modules.n, 0);
	if (!(sb->omit & (1u << KTRACE_SEC_LOSS)))
		add_sec(&file, &table, KTRACE_SEC_LOSS, 1, &sb->loss, sizeof(sb->loss), 0);
	if (cores.count && !(sb->omit & (1u << KTRACE_SEC_CORES)))
		add_sec(&file, &table, KTRACE_SEC_CORES, cores.count, cores.p, cores.n, 0);
	if (sb->have_trigger)
		add_sec(&file, &table, KTRACE_SEC_TRIGGER, 1, sb->trigger.p, sb->trigger.n, 0);
	if (sb->have_reqs) {
		struct buf r = { 0 };

		put(&r, &sb->req_hdr, sizeof(sb->req_hdr));
		put(&r, sb->reqs.p, sb->reqs.n);
		add_sec(&file, &table, KTRACE_SEC_REQUESTS, sb->req_hdr.nkinds, r.p, r.n, 0);
		free(r.p);
	}
	for (uint32_t i = 0; i < sb->nraw; i++)
		add_sec(&file, &table, sb->raw[i].type, sb->raw[i].count, sb->raw[i].data,
		        sb->raw[i].size, sb->raw[i].bad_crc);
	if (!(sb->omit & (1u << KTRACE_SEC_BLOCKS)))
		add_sec(&file, &table, KTRACE_SEC_BLOCKS, blocks.count, blocks.p, blocks.n, damaged);
	pad(&file, 8);

	memcpy(h.magic, KTRACE_FILE_MAGIC, 8);
	h.byte_order = KTRACE_BYTE_ORDER_MARK;
	h.version = sb->version;
	h.header_size = sizeof(h);
	h.section_count = table.count;
	h.section_entry_size = sizeof(struct ktrace_section);
	h.section_table_offset = file.n;
	put(&file, table.p, table.n);
	h.file_size = file.n;
	h.header_crc = 0;
	h.header_crc = kd_crc32c(0, &h, sizeof(h));
	memcpy(file.p, &h, sizeof(h));

	free(table.p);
	free(blocks.p);
	free(cores.p);
	*out = file.p;
	*outlen = file.n;
	return 0;
}

int snapbuild_find_section(const uint8_t *buf, size_t len, uint32_t type, uint64_t *off,
                           uint64_t *size, uint64_t *entry_off)
{
	struct ktrace_file_header h;

	if (len < sizeof(h))
		return -1;
	memcpy(&h, buf, sizeof(h));
	for (uint32_t i = 0; i < h.section_count; i++) {
		struct ktrace_section s;
		uint64_t eo = h.section_table_offset + (uint64_t)i * sizeof(s);

		if (eo + sizeof(s) > len)
			return -1;
		memcpy(&s, buf + eo, sizeof(s));
		if (s.type == type) {
			if (off)
				*off = s.offset;
			if (size)
				*size = s.size;
			if (entry_off)
				*entry_off = eo;
			return 0;
		}
	}
	return -1;
}

void snapbuild_fix_header_crc(uint8_t *buf)
{
	struct ktrace_file_header h;

	memcpy(&h, buf, sizeof(h));
	h.header_crc = 0;
	h.header_crc = kd_crc32c(0, &h, sizeof(h));
	memcpy(buf, &h, sizeof(h));
}

void snapbuild_fix_crcs(uint8_t *buf, size_t len)
{
	struct ktrace_file_header h;

	memcpy(&h, buf, sizeof(h));
	for (uint32_t i = 0; i < h.section_count; i++) {
		struct ktrace_section s;
		uint64_t eo = h.section_table_offset + (uint64_t)i * sizeof(s);

		if (eo + sizeof(s) > len)
			break;
		memcpy(&s, buf + eo, sizeof(s));
		if (s.offset <= len && s.size <= len - s.offset) {
			s.crc = kd_crc32c(0, buf + s.offset, s.size);
			memcpy(buf + eo, &s, sizeof(s));
		}
	}
	snapbuild_fix_header_crc(buf);
}

int snapbuild_write_file(const char *path, const uint8_t *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		return -1;
	if (fwrite(buf, 1, len, f) != len) {
		fclose(f);
		return -1;
	}
	return fclose(f) ? -1 : 0;
}

uint8_t *snapbuild_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = NULL;
	size_t n = 0, cap = 0;

	if (!f)
		return NULL;
	for (;;) {
		size_t r;

		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			p = xrealloc(p, cap);
		}
		r = fread(p + n, 1, cap - n, f);
		if (!r)
			break;
		n += r;
	}
	fclose(f);
	*len = n;
	return p;
}

/* ---- canned scenarios ----------------------------------------------------------- */

void snapbuild_scenario_golden(struct snapbuild *sb)
{
	struct ktrace_info_rec *in = snapbuild_info(sb);
	struct ktrace_trigger_rec tr;
	const uint64_t us = 2400000000ull / 1000000 / 256 + 1; /* ~1 us in ticks (10) */
	uint64_t t = 1000000, slow_begin = 0, slow_end = 0;

	snapbuild_version(sb, 1); /* tests/fixtures/golden-v1.ktrace */
	in->tsc_hz = 2400000000ull;
	in->tsc_shift = 8;
	in->ncpus = 2;
	in->pid = 31337;
	in->snapshot_seq = 2;
	strcpy(in->reason, "trigger");
	strcpy(in->exe, "/opt/demo/bin/kvserver");
	strcpy(in->hostname, "db7");
	in->start_tsc = (t - 100000) << 8;

	snapbuild_thread(sb, 1, 1001, "main", KTRACE_THREAD_MAIN);
	snapbuild_thread(sb, 2, 1002, "worker-1", 0);
	snapbuild_thread(sb, 3, 1003, "worker-2", KTRACE_THREAD_EXITED);
	snapbuild_func(sb, 0, 0x401000);
	snapbuild_func(sb, 1, 0x401100);
	snapbuild_func(sb, 2, 0x401200);
	snapbuild_func(sb, 3, 0x401300);
	snapbuild_func(sb, 4, 0x401400);
	snapbuild_func(sb, KTRACE_FUNC_NO_ID, 0x402000);
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "get");
	snapbuild_name(sb, 2, KTRACE_NAME_MARK, "queue_depth");
	snapbuild_name(sb, 3, KTRACE_NAME_SPAN, "commit");
	snapbuild_loss(sb, KTRACE_LOSS_OVERWRITTEN_BLOCKS, 8);
	snapbuild_loss(sb, KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, 1);

	/* cpu 1 (worker-2) first, so its oldest block starts the complete window. */
	snapbuild_set_next_s(sb, 1, 8u * KTRACE_BLOCK_WORDS);
	snapbuild_core(sb, 1, 2, 10);
	/* an older partial call on cpu 0 before the window: dropped by default */
	snapbuild_enter(sb, 0, 1, t - 5000, 0);
	snapbuild_flush(sb, 0);
	snapbuild_enter(sb, 1, 3, t, 4);
	snapbuild_exit(sb, 1, 3, t + 30 * us, 4);
	snapbuild_enter(sb, 0, 1, t + 1 * us, 1);      /* main calls handle */
	snapbuild_exit(sb, 0, 1, t + 2 * us, 1);
	snapbuild_span(sb, 0, 1, t + 3 * us, 3, 0);
	snapbuild_enter_addr(sb, 0, 1, t + 4 * us, 0x402000);
	snapbuild_exit_addr(sb, 0, 1, t + 6 * us, 0x402000);
	snapbuild_span(sb, 0, 1, t + 7 * us, 3, 1);
	t += 40 * us;
	for (uint32_t r = 1; r <= 20; r++) {
		uint64_t b = t;
		uint64_t parse = 20 * us + (r % 3) * us;

		snapbuild_req(sb, 0, 2, t, 1, r, 0);
		snapbuild_enter(sb, 0, 2, t + 1 * us, 1);
		snapbuild_enter(sb, 0, 2, t + 2 * us, 2);
		snapbuild_exit(sb, 0, 2, t + 2 * us + parse, 2);
		t += 2 * us + parse;
		if (r == SNAPBUILD_GOLDEN_SLOW_REQ) {
			snapbuild_enter(sb, 0, 2, t + 1 * us, 3);
			snapbuild_exit(sb, 0, 2, t + 1 * us + 5000 * us, 3);
			t += 5001 * us;
		} else if (r % 2) {
			snapbuild_enter(sb, 0, 2, t + 1 * us, 3);
			snapbuild_exit(sb, 0, 2, t + 6 * us, 3);
			t += 6 * us;
		}
		snapbuild_exit(sb, 0, 2, t + 1 * us, 1);
		snapbuild_req(sb, 0, 2, t + 2 * us, 1, r, 1);
		snapbuild_mark(sb, 0, 2, t + 2 * us, 2, 20 - r);
		if (r == SNAPBUILD_GOLDEN_SLOW_REQ) {
			slow_begin = b;
			slow_end = t + 2 * us;
		}
		/* worker-2 spins on cpu 1 meanwhile */
		snapbuild_enter(sb, 1, 3, b + 5 * us, 4);
		snapbuild_exit(sb, 1, 3, t, 4);
		t += 10 * us;
	}
	/* main migrates: enters main() on cpu 0, returns on cpu 1 */
	snapbuild_enter(sb, 0, 1, t, 0);
	snapbuild_exit(sb, 1, 1, t + 50 * us, 0);
	/* worker-2 still inside lock_wait at the end */
	snapbuild_enter(sb, 1, 3, t + 60 * us, 4);
	snapbuild_anchor(sb, (1000000ull - 1000) << 8, 1763700000000000000ll);
	snapbuild_anchor(sb, (t + 100 * us) << 8,
	                 1763700000000000000ll + (int64_t)((t + 100 * us - 999000) * 256 * 10 / 24));
	in->snapshot_tsc = (t + 70 * us) << 8;
	in->snapshot_realtime_ns = 1763700000000000000ll + (int64_t)((t + 70 * us - 999000) * 256 * 10 / 24);

	memset(&tr, 0, sizeof(tr));
	tr.request_id = SNAPBUILD_GOLDEN_SLOW_REQ;
	tr.begin_tsc = slow_begin << 8;
	tr.end_tsc = slow_end << 8;
	tr.threshold_ns = 1000000;
	tr.duration_ns = (slow_end - slow_begin) * 256 * 10 / 24;
	tr.kind_id = 1;
	tr.thread_slot = 2;
	tr.tid = 1002;
	tr.why = KTRACE_TRIGGER_ABSOLUTE;
	tr.samples = SNAPBUILD_GOLDEN_SLOW_REQ - 1;
	strcpy(tr.kind, "get");
	snapbuild_trigger_v1(sb, &tr);   /* the fixture predates the grown record */
}

void snapbuild_scenario_big(struct snapbuild *sb, uint32_t ncpus, uint64_t nevents)
{
	struct ktrace_info_rec *in = snapbuild_info(sb);
	uint64_t per_cpu = nevents / (ncpus ? ncpus : 1);

	in->tsc_hz = 2400000000ull;
	in->tsc_shift = 8;
	in->ncpus = ncpus;
	for (uint32_t i = 0; i < 64; i++)
		snapbuild_func(sb, i, 0x500000 + 0x100 * (uint64_t)i);
	for (uint32_t c = 0; c < ncpus; c++) {
		uint64_t t = 1000000;
		uint64_t n = 0, x = c * 7919u + 1;

		for (uint32_t k = 0; k < 4; k++) {
			char name[16];

			snprintf(name, sizeof(name), "w%u.%u", c, k);
			snapbuild_thread(sb, 1 + c * 4 + k, (int32_t)(5000 + c * 4 + k), name, 0);
		}
		while (n + 8 <= per_cpu) {
			uint32_t slot = 1 + c * 4 + (uint32_t)((n / 64) % 4);
			uint32_t f = (uint32_t)(x % 60);

			x = x * 6364136223846793005ull + 1442695040888963407ull;
			snapbuild_enter(sb, c, slot, t += 3, f);
			snapbuild_enter(sb, c, slot, t += 5, f + 1);
			snapbuild_enter(sb, c, slot, t += 2, f + 2);
			snapbuild_exit(sb, c, slot, t += 9, f + 2);
			snapbuild_enter(sb, c, slot, t += 4, f + 3);
			snapbuild_exit(sb, c, slot, t += 1 + (x >> 60), f + 3);
			snapbuild_exit(sb, c, slot, t += 2, f + 1);
			snapbuild_exit(sb, c, slot, t += 3, f);
			n += 8;
		}
	}
}

struct kd_dec *snapbuild_decode(struct snapbuild *sb, const struct kd_dec_opts *opts,
                                    struct kd_dec_error *err)
{
	struct kd_dec *d;
	uint8_t *buf;
	size_t len;

	if (snapbuild_finish(sb, &buf, &len) != 0) {
		snapbuild_free(sb);
		return NULL;
	}
	snapbuild_free(sb);
	if (kd_dec_open_buffer(buf, len, "t.ktrace", opts, &d, err) != 0) {
		free(buf);
		return NULL;
	}
	/* the decoder keeps pointers into the buffer: hand it over */
	d->map = buf;
	d->map_len = len;
	d->map_is_mmap = 0;
	return d;
}

int snapbuild_self_modules(struct snapbuild *sb)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8], path[4096];
		int n = 0;

		path[0] = '\0';
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off, &n) < 4)
			continue;
		if (perms[2] != 'x')
			continue;
		if (n > 0 && sscanf(line + n, "%4095[^\n]", path) == 1 && path[0] == '/')
			snapbuild_module(sb, start, end, off, path);
	}
	fclose(f);
	return 0;
}

/*
 * The HTML timeline's browser test (tests/html/viewercheck.py): ticks are
 * ns (1 GHz, shift 0, monotonic == counter).  Thread main (tid 100) serves
 * 10 "get" requests, 1 ms apart; each is serve() (0x401000) calling 20
 * tiny() (0x402000, 10 ns each, from +10 to +400) and then one long()
 * (0x403000) from +420, so the long call begins in the same pixel as
 * tiny ones at most zoom levels.  long() takes 50 us, in request 7 (the
 * trigger) 600 us, in which main is blocked [+520, +400520) and preempted
 * [+450520, +500520).  Thread worker (tid 101, cpu 1) runs hold() (0x404000)
 * while main is blocked, and is otherwise blocked.  Request 7's duration:
 * 600 us + 460 ns; the others 50 us + 460 ns.  Request "job" #99 is begun
 * by main at 6.1 ms and ended by worker at request 7's +300 us (handed
 * over; it overlaps request 7 on main).  The window budget muted 0x405000
 * (12345 calls not recorded).
 */
void snapbuild_scenario_viewer(struct snapbuild *sb)
{
	struct {
		struct ktrace_sched_hdr h;
		struct ktrace_sched_core c[2];
		struct ktrace_sched_rec r[8];
		struct ktrace_sched_name n;
	} s;
	struct {
		struct ktrace_budget_rec b;
		struct ktrace_muted_rec m;
	} bud;
	struct ktrace_trigger_rec t;
	const uint64_t slow_b = 1000 + 7 * 1000000ull;

	snapbuild_anchor(sb, 100, 1763700000000000000ll);
	snapbuild_anchor(sb, 20000000, 1763700000019999900ll);
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_thread(sb, 2, 101, "worker", 0);
	for (uint32_t f = 0; f < 4; f++)
		snapbuild_func(sb, f, 0x401000 + 0x1000ull * f);
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "get");
	snapbuild_name(sb, 2, KTRACE_NAME_REQUEST, "job");
	for (uint64_t r = 0; r < 10; r++) {
		uint64_t b = 1000 + r * 1000000, dur = r == 7 ? 600000 : 50000;

		snapbuild_req(sb, 0, 1, b, 1, r, 0);
		snapbuild_enter(sb, 0, 1, b, 0);
		for (uint64_t i = 0; i < 20; i++) {
			snapbuild_enter(sb, 0, 1, b + 10 + 20 * i, 1);
			snapbuild_exit(sb, 0, 1, b + 20 + 20 * i, 1);
		}
		snapbuild_enter(sb, 0, 1, b + 420, 2);
		snapbuild_exit(sb, 0, 1, b + 420 + dur, 2);
		snapbuild_exit(sb, 0, 1, b + 430 + dur, 0);
		snapbuild_req(sb, 0, 1, b + 460 + dur, 1, r, 1);
		if (r == 6) /* a "job" main begins and worker ends: handed over */
			snapbuild_req(sb, 0, 1, 6100000, 2, 99, 0);
	}
	snapbuild_enter(sb, 1, 2, slow_b + 2000, 3);
	snapbuild_req(sb, 1, 2, slow_b + 300000, 2, 99, 1);
	snapbuild_exit(sb, 1, 2, slow_b + 399000, 3);

	memset(&t, 0, sizeof(t));
	t.request_id = 7;
	t.kind_id = 1;
	t.thread_slot = 1;
	t.tid = 100;
	t.begin_tsc = slow_b;
	t.end_tsc = slow_b + 600460;
	t.duration_ns = 600460;
	t.threshold_ns = 100000;
	t.why = KTRACE_TRIGGER_PERCENTILE;
	t.percentile_x1000 = 99000;
	strcpy(t.kind, "get");
	snapbuild_trigger(sb, &t);

	memset(&s, 0, sizeof(s));
	s.h.status = KTRACE_SCHED_RECORDED;
	s.h.paranoid = 2;
	s.h.ncores = 2;
	s.h.nnames = 0;
	s.h.clockid = 1;
	s.h.start_ns = 200;
	s.h.end_ns = 10500000;
	s.h.switches = 8;
	s.c[0] = (struct ktrace_sched_core){ 0, 4, 200 };
	s.c[1] = (struct ktrace_sched_core){ 1, 4, 200 };
	s.r[0] = (struct ktrace_sched_rec){ (int64_t)slow_b + 520, 100, 0, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.r[1] = (struct ktrace_sched_rec){ (int64_t)slow_b + 400520, 100, 0, KTRACE_SCHED_IN, 0 };
	s.r[2] = (struct ktrace_sched_rec){ (int64_t)slow_b + 450520, 100, 0, KTRACE_SCHED_OUT_PREEMPT, 0 };
	s.r[3] = (struct ktrace_sched_rec){ (int64_t)slow_b + 500520, 100, 0, KTRACE_SCHED_IN, 0 };
	s.r[4] = (struct ktrace_sched_rec){ 300, 101, 1, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.r[5] = (struct ktrace_sched_rec){ (int64_t)slow_b + 1000, 101, 1, KTRACE_SCHED_IN, 0 };
	s.r[6] = (struct ktrace_sched_rec){ (int64_t)slow_b + 399500, 101, 1, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.r[7] = (struct ktrace_sched_rec){ (int64_t)slow_b + 399600, 101, 1, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.h.switches = 7;
	s.c[1].count = 3;
	snapbuild_raw_section(sb, KTRACE_SEC_SCHED, 7, &s, sizeof(s) - sizeof(s.r[7]) - sizeof(s.n), 0);

	/* The window budget muted one function (0x405000, 12345 calls not
	 * recorded since): the page's header must say so. */
	memset(&bud, 0, sizeof(bud));
	bud.b.window_s = 30;
	bud.b.ring_bytes_per_core = 1 << 20;
	bud.b.sustainable_wps = 1000;
	bud.b.max_us = 5;
	bud.b.muted_calls = 12345;
	bud.m = (struct ktrace_muted_rec){ 0x405000, 4, KTRACE_MUTE_HOT_SHORT, 5000, 100, 10,
	                                   500000, 50, 20 };
	snapbuild_raw_section(sb, KTRACE_SEC_BUDGET, 1, &bud, sizeof(bud), 0);
}
