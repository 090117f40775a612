/*
 * iter.h - the per-core record iterator's inner loop (iter.c), inline so the
 * build passes (build.c) run it without a call per record.
 */
#ifndef KD_ITER_H
#define KD_ITER_H

#include <stddef.h>
#include <stdint.h>

#include "ktrace_format.h"
#include "snap.h"
#include "util.h"

/* Group blocks per core and order each core's blocks by S, oldest first. */
int kd_iter_order(struct kd_snap *snap, struct kd_dec_error *err);

enum kd_dec_kind {
	KD_DK_ENTER = 1,      /* id = compact function id */
	KD_DK_EXIT,           /* id = compact function id */
	KD_DK_ENTER_ADDR,     /* value = function address */
	KD_DK_EXIT_ADDR,      /* value = function address */
	KD_DK_MARK,           /* id = name id, value = mark value */
	KD_DK_SPAN_BEGIN,     /* id = name id */
	KD_DK_SPAN_END,       /* id = name id */
	KD_DK_REQ_BEGIN,      /* id = kind name id, value = request id */
	KD_DK_REQ_END,        /* id = kind name id, value = request id */
	/* format 2 (compact requests): */
	KD_DK_REQ_OPEN,       /* id = kind name id, value = number, value2 = user id
	                         if aux = 1 (REQ_OPEN_ID) */
	KD_DK_REQ_CLOSE,      /* id = keep flags: the thread's innermost request ends */
	KD_DK_REQ_CLOSE_ANY,  /* id = kind name id, value = number, value2 = slot of
	                         the thread that began it, aux = keep flags */
};

struct kd_dec_event {
	uint64_t tick;            /* ticks: TSC >> tsc_shift */
	uint64_t value;           /* see enum kd_dec_kind */
	uint32_t id;              /* see enum kd_dec_kind */
	uint32_t slot;            /* thread slot named by BLOCK_START/THREAD */
	uint32_t core;            /* index in kd_snap.cores */
	uint32_t kind;            /* enum kd_dec_kind */
	uint32_t seg;             /* the thread's segment number (THREAD seq),
	                             KD_NONE if the writer gave none */
	uint32_t aux;             /* see enum kd_dec_kind */
	uint64_t value2;          /* see enum kd_dec_kind */
};

struct kd_core_iter {
	const struct kd_snap *snap;
	struct kd_dec_warnings *warn; /* damaged block tails go here (may be NULL) */
	uint32_t core;            /* index in snap->cores */
	uint32_t blk;             /* next block index in snap->blocks */
	uint32_t blk_end;         /* one past this core's last block */
	const uint8_t *words;     /* current block */
	uint64_t blk_offset;      /* bytes: file offset of the current block's words */
	uint32_t pos;             /* next word in the current block */
	uint32_t nwords;          /* words in the current block (0 = none open) */
	uint32_t ts20;            /* reference ts20 */
	uint64_t tick;            /* ticks: reference */
	uint64_t blk_tick;        /* ticks: the current block's BLOCK_START */
	uint32_t slot;            /* current thread slot */
	uint32_t seg;             /* current segment number, KD_NONE if unknown */
	/* A HELD run (format 2) is being read: its records are thread slot's,
	 * placed in its program order at (seg, held_p, held_hc), not this
	 * core's occupancy.  Cleared by the next BLOCK_START or THREAD. */
	uint32_t held;            /* 1 inside a HELD run */
	uint32_t held_p;          /* P: stream position of the place, on seg's core */
	uint32_t held_hc;         /* (h << 8) | chunk */
	uint64_t held_tick;       /* ticks: the run's time base (its tsc) */
	uint32_t damaged_tails;   /* blocks whose records stopped parsing */
	uint32_t unknown_ext;     /* extended records of unknown type skipped */
	uint32_t ev_pos;          /* word where the record returned last starts */
	uint32_t ev_ref_ts20;     /* reference ts20 before that record */
	uint64_t ev_ref_tick;     /* ticks: reference before that record */
};

void kd_iter_init(struct kd_core_iter *it, const struct kd_snap *snap,
                            uint32_t core, struct kd_dec_warnings *warn);
/* 1: *ev filled; 0: end of this core's records. */
int kd_iter_record(struct kd_core_iter *it, struct kd_dec_event *ev);
/* Restart at a record returned earlier: blk = the iterator's blk - 1 then,
 * pos = ev_pos, ref_* = ev_ref_*, slot and seg = the event's. */
void kd_iter_seek(struct kd_core_iter *it, uint32_t blk, uint32_t pos,
                            uint64_t ref_tick, uint32_t ref_ts20, uint32_t slot, uint32_t seg);
/* Tick of a block's BLOCK_START (the block was validated by the reader). */
uint64_t kd_iter_block_start_tick(const struct kd_snap *snap,
                                  const struct kd_snap_block *b);

static inline uint32_t kd_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* The absolute tick of a record whose 20-bit timestamp is ts, given the
 * reference tick and its ts20: the nearer of a step forward or back (late
 * stores step back a little), never below 0. */
static inline __attribute__((always_inline)) uint64_t kd_tick_of(uint64_t tick, uint32_t ts20,
                                                                uint32_t ts)
{
	uint32_t d = (ts - ts20) & KTRACE_TS_MASK;

	if (__builtin_expect(d < KTRACE_TS_HALF, 1))
		return tick + d;
	return tick >= (KTRACE_TS_MASK + 1 - d) ? tick - (KTRACE_TS_MASK + 1 - d) : 0;
}

/* Next block of the core; 0 at its end. */
int kd_iter_open_block(struct kd_core_iter *it);
/* Report the rest of the current block as damaged and skip it. */
void kd_iter_damaged_tail(struct kd_core_iter *it, const char *what);

/* Inlined into the build passes (the hottest loop of the decoder). */
static inline __attribute__((always_inline)) int kd_iter_next(struct kd_core_iter *it,
                                                             struct kd_dec_event *ev)
{
	for (;;) {
		const uint8_t *p;
		uint32_t w, e, n, t;
		uint64_t tick;

		if (it->pos >= it->nwords) {
			if (!kd_iter_open_block(it))
				return 0;
			continue;
		}
		p = it->words + (size_t)it->pos * 4;
		w = kd_le32(p);
		e = KTRACE_REC_EV(w);
		if (e == KTRACE_EV_PAD) {
			it->pos++;
			continue;
		}
		tick = kd_tick_of(it->tick, it->ts20, KTRACE_REC_TS(w));

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
				ev->kind = KD_DK_ENTER;
				ev->id = e - KTRACE_EV_ENTER_BASE;
			} else {
				ev->kind = KD_DK_EXIT;
				ev->id = e - KTRACE_EV_EXIT_BASE;
			}
			return 1;
		}
		if (!KTRACE_EV_IS_EXT(e)) {
			kd_iter_damaged_tail(it, "reserved event number");
			continue;
		}
		n = e;
		if ((uint64_t)it->pos + 1 + n > it->nwords) {
			kd_iter_damaged_tail(it, "extended record runs past the block end");
			continue;
		}
		t = kd_le32(p + 4);
		switch (KTRACE_EXT_TYPE(t)) {
		case KTRACE_EXT_BLOCK_START:
			kd_iter_damaged_tail(it, "BLOCK_START in the middle of a block");
			continue;
		case KTRACE_EXT_TSC:
			if (n < 3) {
				kd_iter_damaged_tail(it, "TSC record too short");
				continue;
			}
			it->tick = (kd_le32(p + 8) | (uint64_t)kd_le32(p + 12) << 32) >> it->snap->info.tsc_shift;
			it->ts20 = (uint32_t)it->tick & KTRACE_TS_MASK;
			it->pos += 1 + n;
			continue;
		case KTRACE_EXT_THREAD:
			/* Not a timed event: it leaves the time reference alone, so
			 * a THREAD record written before a due TSC record (after a
			 * long idle) cannot throw the following records off. */
			it->slot = KTRACE_EXT_ARG(t);
			it->seg = n >= 2 ? kd_le32(p + 8) : KD_NONE;
			it->held = 0;
			it->pos += 1 + n;
			continue;
		case KTRACE_EXT_HELD:
			/* A held run: thread <arg>'s records from its hold buffer,
			 * with their own time base (as after a TSC record). */
			if (n < 6) {
				kd_iter_damaged_tail(it, "HELD record too short");
				continue;
			}
			it->slot = KTRACE_EXT_ARG(t);
			it->seg = kd_le32(p + 8);
			it->held = 1;
			it->held_p = kd_le32(p + 12);
			it->held_hc = kd_le32(p + 16);
			it->tick = (kd_le32(p + 20) | (uint64_t)kd_le32(p + 24) << 32) >>
			           it->snap->info.tsc_shift;
			it->ts20 = (uint32_t)it->tick & KTRACE_TS_MASK;
			it->held_tick = it->tick;
			it->pos += 1 + n;
			continue;
		case KTRACE_EXT_REQ_OPEN:
		case KTRACE_EXT_REQ_OPEN_ID:
		case KTRACE_EXT_REQ_CLOSE:
		case KTRACE_EXT_REQ_CLOSE_ANY: {
			uint32_t ty = KTRACE_EXT_TYPE(t);
			uint32_t need = ty == KTRACE_EXT_REQ_OPEN ? 2 :
			                ty == KTRACE_EXT_REQ_CLOSE ? 1 : 4;

			if (n < need) {
				kd_iter_damaged_tail(it, "extended record too short for its type");
				continue;
			}
			ev->id = KTRACE_EXT_ARG(t);
			ev->value = 0;
			ev->value2 = 0;
			ev->aux = 0;
			if (ty == KTRACE_EXT_REQ_OPEN || ty == KTRACE_EXT_REQ_OPEN_ID) {
				ev->kind = KD_DK_REQ_OPEN;
				ev->value = kd_le32(p + 8);
				if (ty == KTRACE_EXT_REQ_OPEN_ID) {
					ev->value2 = kd_le32(p + 12) |
					             (uint64_t)kd_le32(p + 16) << 32;
					ev->aux = 1;
				}
			} else if (ty == KTRACE_EXT_REQ_CLOSE) {
				ev->kind = KD_DK_REQ_CLOSE;
			} else {
				ev->kind = KD_DK_REQ_CLOSE_ANY;
				ev->aux = KTRACE_EXT_ARG(t);
				ev->id = kd_le32(p + 8);
				ev->value = kd_le32(p + 12);
				ev->value2 = kd_le32(p + 16);
			}
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
		case KTRACE_EXT_FUNC_ENTER_ADDR:
		case KTRACE_EXT_FUNC_EXIT_ADDR:
		case KTRACE_EXT_MARK:
		case KTRACE_EXT_REQ_BEGIN:
		case KTRACE_EXT_REQ_END:
			if (n < 3) {
				kd_iter_damaged_tail(it, "extended record too short for its type");
				continue;
			}
			ev->value = kd_le32(p + 8) | (uint64_t)kd_le32(p + 12) << 32;
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
		case KTRACE_EXT_FUNC_ENTER_ADDR: ev->kind = KD_DK_ENTER_ADDR; break;
		case KTRACE_EXT_FUNC_EXIT_ADDR: ev->kind = KD_DK_EXIT_ADDR; break;
		case KTRACE_EXT_MARK: ev->kind = KD_DK_MARK; break;
		case KTRACE_EXT_REQ_BEGIN: ev->kind = KD_DK_REQ_BEGIN; break;
		case KTRACE_EXT_REQ_END: ev->kind = KD_DK_REQ_END; break;
		case KTRACE_EXT_SPAN_BEGIN: ev->kind = KD_DK_SPAN_BEGIN; break;
		default: ev->kind = KD_DK_SPAN_END; break;
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

/*
 * Batches: the build passes decode a core's records a block at a time into
 * arrays, in a loop that keeps the iterator's state in registers (the
 * record-at-a-time kd_iter_next reloads and stores it for every record).
 * A batch holds events of one thread slot and segment only, from one
 * block: it ends before a THREAD record that changes them and at the
 * block's end.  The iterator state before its first event (blk, pos,
 * ref_tick, ref_ts20) is where a piece starting there is sought again.
 */
#define KD_BATCH 1024u

struct kd_batch {
	uint32_t n;               /* events */
	uint32_t slot, seg;       /* every event's */
	uint32_t blk, pos;        /* the first event's block index and word */
	uint32_t ref_ts20;        /* reference before the first event */
	uint64_t ref_tick;
	uint64_t blk_tick;        /* ticks: the block's BLOCK_START (a held run's:
	                             its time base) */
	uint32_t held, held_p, held_hc; /* as kd_core_iter's, for every event */
	uint32_t aux0;            /* aux and value2 of the first event (extended */
	uint64_t value2_0;        /*   records only ever start a batch) */
	uint64_t tick[KD_BATCH];
	uint32_t id[KD_BATCH];    /* as kd_dec_event.id */
	uint8_t kind[KD_BATCH];   /* enum kd_dec_kind */
	uint64_t value[KD_BATCH]; /* set for extended events only */
};

/* The next batch of at most max (<= KD_BATCH) events; 0 at the core's end. */
uint32_t kd_iter_batch(struct kd_core_iter *it, struct kd_batch *bt, uint32_t max);

#endif /* KD_ITER_H */
