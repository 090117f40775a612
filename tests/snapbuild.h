/*
 * snapbuild.h - build synthetic ktrace snapshot files in memory, for tests,
 * fuzz seeds and fixtures.  Everything the format needs is computed here:
 * BLOCK_START records, THREAD switches, TSC records when a gap exceeds
 * KTRACE_TS_FORWARD_MAX, block splitting at KTRACE_BLOCK_WORDS, every CRC.
 *
 *     struct snapbuild *sb = snapbuild_new();
 *     snapbuild_thread(sb, 1, 4242, "main", KTRACE_THREAD_MAIN);
 *     snapbuild_func(sb, 0, 0x401000);
 *     snapbuild_enter(sb, 0, 1, 1000, 0);   // cpu 0, slot 1, tick 1000, id 0
 *     snapbuild_exit(sb, 0, 1, 1500, 0);
 *     snapbuild_finish(sb, &buf, &len);      // malloc'ed file image
 *     snapbuild_free(sb);
 *
 * Ticks are TSC >> tsc_shift (defaults: tsc_hz 1 GHz, shift 0: 1 tick = 1 ns).
 */
#ifndef KD_SNAPBUILD_H
#define KD_SNAPBUILD_H

#include <stddef.h>
#include <stdint.h>

#include "ktrace_format.h"

struct snapbuild;

struct snapbuild *snapbuild_new(void);
void snapbuild_free(struct snapbuild *sb);

/* INFO fields (defaults are valid); the pointer stays valid until finish. */
struct ktrace_info_rec *snapbuild_info(struct snapbuild *sb);

/* Metadata sections (each emitted only if something was added). */
void snapbuild_anchor(struct snapbuild *sb, uint64_t tsc, int64_t realtime_ns);
void snapbuild_func(struct snapbuild *sb, uint32_t id, uint64_t addr);
void snapbuild_thread(struct snapbuild *sb, uint32_t slot, int32_t tid, const char *name,
                      uint32_t flags);
void snapbuild_name(struct snapbuild *sb, uint32_t id, uint16_t kind, const char *name);
void snapbuild_module(struct snapbuild *sb, uint64_t start, uint64_t end, uint64_t file_offset,
                      const char *path);
/* MODULES entries for every executable file mapping of this process, as
 * the library records them (/proc/self/maps).  0 or -1. */
int snapbuild_self_modules(struct snapbuild *sb);
void snapbuild_loss(struct snapbuild *sb, unsigned cause, uint64_t count);
void snapbuild_trigger(struct snapbuild *sb, const struct ktrace_trigger_rec *t);
void snapbuild_trigger_v1(struct snapbuild *sb, const struct ktrace_trigger_rec *t);
/* CORES entry for cpu (default: nblocks = blocks_used = blocks written). */
void snapbuild_core(struct snapbuild *sb, uint32_t cpu, uint32_t nblocks, uint64_t blocks_used);
/* CORES copy_tsc of cpu: its records up to this counter are all in the file. */
void snapbuild_core_copy_tsc(struct snapbuild *sb, uint32_t cpu, uint64_t copy_tsc);
/* Any section, bytes as given (CRC computed unless bad_crc). */
void snapbuild_raw_section(struct snapbuild *sb, uint32_t type, uint32_t count,
                           const void *data, size_t size, int bad_crc);
/* Leave out the INFO / CORES / LOSS sections. */
void snapbuild_omit(struct snapbuild *sb, uint32_t section_type);

/* ---- records, with automatic blocks --------------------------------------- */

/*
 * Write THREAD records with a segment number (N = 2), as the library does:
 * a thread's segment grows whenever it starts writing on a core, and every
 * BLOCK_START is followed by a THREAD record.  Off by default (N = 1, the
 * older form, which the golden fixture keeps).  Slots must be < 4096.
 */
void snapbuild_thread_seq(struct snapbuild *sb, int on);

/* First S of cpu's next block (default 0); S then advances by 1024 per block. */
void snapbuild_set_next_s(struct snapbuild *sb, uint32_t cpu, uint32_t s);
void snapbuild_enter(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                     uint32_t id);
void snapbuild_exit(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t id);
/* Extended record: type, 24-bit arg, n extra payload words (after the type word). */
void snapbuild_ext(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                   uint32_t type, uint32_t arg, const uint32_t *extra, uint32_t n);
void snapbuild_enter_addr(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                          uint64_t addr);
void snapbuild_exit_addr(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                         uint64_t addr);
void snapbuild_mark(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t name, uint64_t value);
void snapbuild_span(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t name, int end);
void snapbuild_req(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                   uint32_t kind, uint64_t id, int end);
/*
 * Format 2.  Requests: REQ_OPEN / REQ_OPEN_ID / REQ_CLOSE (innermost) /
 * REQ_CLOSE_ANY records.  Held runs: snapbuild_held() writes a HELD header
 * on cpu (a new block if the open one has little room) after which
 * snapbuild_enter/exit/... of that slot on that cpu go in as held records
 * (no THREAD, no segment change) until snapbuild_held_end(); the next ring
 * record on cpu names its thread again.  snapbuild_pos() is cpu's word
 * counter at the next word (a HELD run's P), snapbuild_seg() a slot's
 * current segment.
 */
void snapbuild_req_open(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                        uint32_t kind, uint32_t number);
void snapbuild_req_open_id(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                           uint32_t kind, uint32_t number, uint64_t user_id);
void snapbuild_req_close(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                         uint32_t keep);
void snapbuild_req_close_any(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                             uint32_t keep, uint32_t kind, uint32_t number, uint32_t begin_slot);
uint32_t snapbuild_pos(const struct snapbuild *sb, uint32_t cpu);
uint32_t snapbuild_seg(const struct snapbuild *sb, uint32_t slot);
void snapbuild_held(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t seg, uint32_t p, uint32_t h, uint32_t chunk);
void snapbuild_held_end(struct snapbuild *sb, uint32_t cpu);
/* Header version (default KTRACE_FORMAT_VERSION; the golden scenario: 1). */
void snapbuild_version(struct snapbuild *sb, uint16_t version);
/* REQUESTS section: the header (nkinds counted), then each kind followed by
 * its slices; a slice's buckets are made from the durations given (ticks,
 * unshifted) with the header's sub_bits. */
uint32_t snapbuild_req_bucket_of(uint64_t v, uint32_t sub_bits);
void snapbuild_req_hdr(struct snapbuild *sb, const struct ktrace_req_hdr *h);
void snapbuild_req_kind(struct snapbuild *sb, const struct ktrace_req_kind_rec *k);
void snapbuild_req_slice(struct snapbuild *sb, uint64_t start_tsc, uint64_t end_tsc,
                         const uint64_t *dur_ticks, uint32_t n);

/* A raw word into cpu's current block (opens one at tick if needed). */
void snapbuild_word(struct snapbuild *sb, uint32_t cpu, uint32_t slot, uint64_t tick,
                    uint32_t word);
/* Close cpu's current block (the next record opens a new one). */
void snapbuild_flush(struct snapbuild *sb, uint32_t cpu);

/* A block with exactly these words (BLOCK_START included by the caller). */
void snapbuild_block_raw(struct snapbuild *sb, uint32_t cpu, uint32_t s, const uint32_t *words,
                         uint32_t nwords);
/* Blocks so far, and per-block tweaks applied at finish. */
uint32_t snapbuild_nblocks(const struct snapbuild *sb);
void snapbuild_block_bad_crc(struct snapbuild *sb, uint32_t block);
void snapbuild_reverse_blocks(struct snapbuild *sb);

/* Helpers for hand-built words. */
uint32_t snapbuild_block_start_words(uint32_t *w, uint32_t slot, uint32_t s, uint64_t tsc);

/* Assemble the file: header, INFO, other sections, BLOCKS, section table.
 * 0 on success; *buf is malloc'ed. */
int snapbuild_finish(struct snapbuild *sb, uint8_t **buf, size_t *len);

/* Finish sb, free it, and decode the image with opts: the decoded snapshot
 * owns the image (freed by kd_dec_free).  NULL on failure, with err
 * filled. */
struct kd_dec;
struct kd_dec_opts;
struct kd_dec_error;
struct kd_dec *snapbuild_decode(struct snapbuild *sb, const struct kd_dec_opts *opts,
                                    struct kd_dec_error *err);

/* ---- editing finished images ------------------------------------------------ */

/* Offset/size of the first section of a type; 0 if found. */
int snapbuild_find_section(const uint8_t *buf, size_t len, uint32_t type, uint64_t *off,
                           uint64_t *size, uint64_t *entry_off);
/* Recompute the header CRC and every section CRC (after deliberate edits). */
void snapbuild_fix_crcs(uint8_t *buf, size_t len);
void snapbuild_fix_header_crc(uint8_t *buf);
int snapbuild_write_file(const char *path, const uint8_t *buf, size_t len);
uint8_t *snapbuild_read_file(const char *path, size_t *len);

/* The HTML timeline's browser test and the perfetto off-CPU test: 10
 * requests, one slow with main blocked then preempted (snapbuild.c). */
void snapbuild_scenario_viewer(struct snapbuild *sb);

#endif

/* ---- canned scenarios (fixtures, fuzz seeds, benchmarks) ------------------- */

/*
 * "golden": 2 cpus, 3 threads (main, worker-1, worker-2), 20 "get" requests
 * on worker-1 of which #13 is slow because slow_io() sleeps (TRIGGER names
 * it), worker-2 spinning in lock_wait(), main() migrating from cpu 0 to
 * cpu 1, a span, marks, an address-only function, cpu 1's ring wrapped.
 * tsc_hz 2.4 GHz, shift 8.  Compact ids: 0 main, 1 handle, 2 parse,
 * 3 slow_io, 4 lock_wait; address 0x402000 has no id.
 */
#define SNAPBUILD_GOLDEN_SLOW_REQ 13u
void snapbuild_scenario_golden(struct snapbuild *sb);
/* A large file: ncpus cpus, about nevents records in total (enter/exit pairs
 * of nested calls on 4 threads per cpu). */
void snapbuild_scenario_big(struct snapbuild *sb, uint32_t ncpus, uint64_t nevents);
