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
	for (uint32_t i = 0; i < sb->nraw; i++)
		add_sec(&file, &table, sb->raw[i].type, sb->raw[i].count, sb->raw[i].data,
		        sb->raw[i].size, sb->raw[i].bad_crc);
	if (!(sb->omit & (1u << KTRACE_SEC_BLOCKS)))
		add_sec(&file, &table, KTRACE_SEC_BLOCKS, blocks.count, blocks.p, blocks.n, damaged);
	pad(&file, 8);

	memcpy(h.magic, KTRACE_FILE_MAGIC, 8);
	h.byte_order = KTRACE_BYTE_ORDER_MARK;
	h.version = KTRACE_FORMAT_VERSION;
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
