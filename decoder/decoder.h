/*
 * decoder.h - the stages of ktrace-decode, shared by the program, the unit
 * tests, the fuzz target and other engineers' end-to-end tests.
 *
 * Stages (each takes in-memory input and can be tested alone):
 *
 *   1. read.c      kd_snap_read(): bytes -> struct kd_snap.  The only
 *                  parser of the file: validates every length, offset and
 *                  CRC; damaged blocks are dropped and reported.
 *   1. read.c      also the file I/O (kd_snap_read_fd's windows, kd_dec_read_fd
 *                  for pipes, kd_dec_pread).
 *   2. iter.c      kd_snap_order(): groups blocks per core, oldest first.
 *                  struct kd_core_iter: one core's records -> events with
 *                  absolute ticks and thread slots (inner loop in iter.h).
 *   3. build.c     kd_dec_prepare(): cuts the cores' streams into pieces of
 *                  one thread segment (window, core runs, threads);
 *                  kd_dec_walk(): walks each thread's pieces in order,
 *                  rebuilds its call stack across cores and emits the event
 *                  stream (stream.h) to a sink; requests, marks.
 *                  collect.c: the collector sink -> d->calls.
 *   4. time.c      the one clock conversion (ticks -> ns, wall clock via
 *                  ANCHORS), used by every format.
 *   5. symbols.c   function addresses -> names (ELF .symtab/.dynsym).
 *   6. out-*.c     sinks, one file per format: summary, text, stats,
 *                  chrome, explain, folded ... (main.c's table says which
 *                  consume the stream and which need the collector's
 *                  arrays); a sink calls no other sink.
 *   range.c        the time range: one filter on the stream, in front of
 *                  every walk (kd_dec_walk_cut); merge.c: overlapping
 *                  snapshots of one process cut once.
 *   dec.c          the decoder's lifecycle, composing the stages:
 *                  kd_dec_open_*, kd_dec_collect, kd_dec_free.
 *   names.c time.c budget.c calltree.c requests.c: helpers the sinks
 *                  share (names, the clock, the muted functions, call
 *                  trees, request histograms).
 *   util.c         x-alloc, the growable array, hash map, string pool,
 *                  warnings, errors, CRC-32C (util.h).
 * No file calls another in a circle (test_decoder_layers).
 *
 * symbols.c and build.c never call each other: the build names functions
 * by index, symbols.c fills their names afterwards.
 *
 * The one-call entry points for programs and tests are kd_dec_open_file()
 * and kd_dec_open_buffer(), which run stages 1-5 (3 with the collector).
 *
 * Errors: functions return 0 or a negative KD_E* code and fill a
 * struct kd_dec_error that names the file offset and what is wrong.
 * Problems that do not stop decoding (a damaged block, a damaged optional
 * section) are collected as warnings in struct kd_snap.warn.
 */
#ifndef KD_DECODER_H
#define KD_DECODER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ktrace_format.h"
#include "stream.h"
#include "util.h"

/* Errors (struct kd_dec_error, KD_E*, kd_dec_fail): util.h. */

/*
 * Test hook (NULL in normal use): called before each chunk of a snapshot or
 * an ELF file is read, with the path, bytes read so far and the size fstat
 * gave.  Tests use it to truncate a file at a known moment.
 */
extern void (*kd_dec_read_hook)(const char *path, uint64_t done, uint64_t total);

/* ---- stage 1: read ------------------------------------------------------ */

struct kd_snap_block {
	uint64_t offset;        /* bytes: file offset of the struct ktrace_block_rec;
	                           its nwords words follow (kd_snap_block_words) */
	uint64_t tsc;           /* BLOCK_START's counter value */
	uint32_t nwords;        /* valid words, 5..KTRACE_BLOCK_WORDS */
	uint32_t cpu;           /* ring the block came from */
	uint32_t start;         /* S: the core's word counter at block start */
	uint32_t core;          /* index in kd_snap.cores (set by kd_snap_order) */
	uint32_t slot;          /* BLOCK_START's thread slot */
	uint32_t crc;           /* the entry's CRC-32C of the words */
	uint32_t index;         /* block number in its BLOCKS section */
};

/*
 * Where the bytes come from: a buffer holding the whole input, or a file
 * read in bounded pieces (pread into windows), so that memory does not grow
 * with the file.  A window holds one stretch of the file; pointers it
 * returns stay valid until its next read.
 */
struct kd_src {
	const uint8_t *buf;     /* the whole input, or NULL: read from fd */
	uint64_t len;           /* bytes */
	int fd;                 /* owned (closed by kd_snap_free), -1 with buf */
	char *path;             /* owned copy, for the read hook and messages */
	int64_t mtime_ns;       /* the file's when opened: kd_snap_changed() */
	uint64_t ino;
};

struct kd_win {
	uint8_t *mem;           /* cap bytes, allocated at first use */
	size_t cap;
	uint64_t off;           /* bytes: file offset of mem[0] */
	size_t len;             /* bytes of the file in mem */
	uint64_t failed;        /* blocks that could not be read again */
};

struct kd_snap_core {
	uint32_t cpu;           /* cpu number */
	int have_rec;           /* CORES section had this cpu */
	struct ktrace_core_rec rec; /* copy, if have_rec */
	int wrapped;            /* ring reused older blocks: oldest data is gone */
	uint32_t first_block;   /* index in kd_snap.blocks, blocks oldest first */
	uint32_t nblocks;       /* blocks of this core in the file (undamaged) */
};

struct kd_snap_name {
	uint32_t id;            /* name id used by MARK/SPAN/REQ records */
	uint16_t kind;          /* enum ktrace_name_kind */
	char *str;              /* NUL-terminated copy */
};

struct kd_snap_module {
	uint64_t start;         /* first mapped address */
	uint64_t end;           /* one past the last */
	uint64_t file_offset;   /* bytes: offset in the file of start */
	char *path;             /* NUL-terminated copy */
	uint32_t rec;           /* its index in the MODULES section (BUILDIDS) */
};

/* REQUESTS section (format 2), as read: kinds, each kind's slices, each
 * slice's buckets, in file order (read.c checked every count and bound). */
struct kd_snap_req_slice {
	struct ktrace_req_slice_rec rec;
	uint32_t first_bucket;  /* index in kd_snap.req_buckets */
};

struct kd_snap_req_kind {
	struct ktrace_req_kind_rec rec;
	uint32_t first_slice;   /* index in kd_snap.req_slices (rec.nslices of them) */
};

struct kd_snap {
	struct kd_src src;      /* the input */
	struct kd_win *wins;    /* per core (kd_snap_order): the iterators' reads */
	struct ktrace_file_header hdr;
	struct ktrace_info_rec info;           /* strings forced NUL-terminated */
	struct ktrace_anchor_rec *anchors;     /* sorted by tsc, duplicates removed */
	uint32_t nanchors;
	/* Wall-clock steps: anchor pairs whose realtime moved apart from
	 * their monotonic time (a settimeofday, an NTP step).  When there
	 * are any, every wall time maps through the monotonic clock plus the
	 * newest anchor's realtime - monotonic (time.c). */
	uint32_t wall_steps;                   /* steps found between anchors */
	int64_t wall_step_ns;                  /* their sum: realtime minus monotonic */
	int64_t wall_step_max_ns;              /* the largest (by size), signed */
	uint64_t wall_step_max_tsc;            /* counter of the anchor after it */
	uint64_t func_addr[KTRACE_FUNC_ID_COUNT]; /* compact id -> address */
	uint8_t func_known[KTRACE_FUNC_ID_COUNT]; /* 1 if FUNCS named the id */
	uint32_t nfuncs;                       /* FUNCS entries */
	struct ktrace_thread_rec *threads;     /* sorted by slot, names NUL-terminated */
	uint32_t nthreads;
	struct kd_snap_name *names;        /* sorted by id */
	uint32_t nnames;
	struct kd_snap_module *modules;    /* sorted by start */
	uint32_t nmodules;
	struct ktrace_buildid_rec *buildids; /* BUILDIDS as in the file, or NULL */
	uint32_t nbuildids;
	int have_loss;
	struct ktrace_loss_rec loss;
	struct ktrace_core_rec *core_recs;
	uint32_t ncore_recs;
	int have_trigger;
	struct ktrace_trigger_rec trigger;     /* kind forced NUL-terminated */
	int have_budget;                       /* BUDGET section read */
	struct ktrace_budget_rec budget;
	struct ktrace_budget_core_rec *budget_cores; /* budget.ncores */
	struct ktrace_muted_rec *muted;        /* muted / excluded functions */
	uint32_t nmuted;
	struct kd_snap_block *blocks;      /* undamaged blocks */
	uint32_t nblocks;
	struct kd_snap_core *cores;        /* by cpu number (kd_snap_order) */
	uint32_t ncores;
	uint32_t damaged_blocks;               /* blocks skipped: CRC or structure */
	uint32_t unreadable_blocks;            /* entries lost to a broken BLOCKS walk */
	struct kd_dec_warnings warn;
	/* SCHED section (read_sched): have_sched = 0 for files without one */
	int have_sched;
	struct ktrace_sched_hdr sched;         /* what NUL-terminated */
	struct ktrace_sched_core *sched_cores; /* sched.ncores */
	struct ktrace_sched_rec *sched_recs;   /* nsched_recs, valid 'what' only */
	uint32_t nsched_recs;
	struct ktrace_sched_name *sched_names; /* sched.nnames, names NUL-terminated */
	/* REQUESTS section (read_requests, format 2): have_reqs = 0 without one */
	int have_reqs;
	struct ktrace_req_hdr req_hdr;
	struct kd_snap_req_kind *req_kinds;    /* req_hdr.nkinds */
	struct kd_snap_req_slice *req_slices;  /* nreq_slices, by kind */
	uint32_t nreq_slices;
	struct ktrace_req_bucket *req_buckets; /* nreq_buckets, by slice */
	uint32_t nreq_buckets;
};

/*
 * Parse and validate buf[0..len).  On success snap refers into buf (keep it
 * alive).  Returns 0 or KD_E*; on error err says where and what.
 */
int kd_snap_read(const void *buf, size_t len, struct kd_snap *snap,
                      struct kd_dec_error *err);
/*
 * The same on an open regular file (st: its fstat, from kd_dec_open_path),
 * read in bounded pieces: memory stays a few MiB whatever the file's size.
 * The snapshot owns fd from here on (also on error).  A file that comes up
 * shorter than st_size while it is read gives KD_EIO ("truncated while it
 * was read").
 */
struct stat;
int kd_snap_read_fd(int fd, const struct stat *st, const char *path, struct kd_snap *snap,
                         struct kd_dec_error *err);
/*
 * The words of block b (nwords little-endian u32), or NULL if they can no
 * longer be read (the file shrank after it was checked: counted in the
 * core's window).  From a file, the pointer is valid until the next call
 * for b's core.  Blocks are read again for each pass over them; their CRCs
 * were checked by the reader, and kd_snap_changed() tells whether the file
 * changed since.
 */
const uint8_t *kd_snap_block_words(const struct kd_snap *snap,
                                        const struct kd_snap_block *b);
/* 1 if the file changed since it was opened (size, modification time or
 * inode now differ, or a block could not be read again): what was decoded
 * may mix old and new data.  0 for a buffer. */
int kd_snap_changed(const struct kd_snap *snap);
void kd_snap_free(struct kd_snap *snap);
const char *kd_section_name(uint32_t type);
const char *kd_loss_name(unsigned cause);
/* Name id -> string, or NULL. */
const char *kd_snap_name(const struct kd_snap *snap, uint32_t id);
const struct ktrace_thread_rec *kd_snap_thread(const struct kd_snap *snap,
                                                    uint32_t slot);

/* ---- stage 2: per-core record iterator ---------------------------------- */

/* Group blocks per core and order each core's blocks by S, oldest first. */
int kd_snap_order(struct kd_snap *snap, struct kd_dec_error *err);

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

void kd_core_iter_init(struct kd_core_iter *it, const struct kd_snap *snap,
                            uint32_t core, struct kd_dec_warnings *warn);
/* 1: *ev filled; 0: end of this core's records. */
int kd_core_iter_next(struct kd_core_iter *it, struct kd_dec_event *ev);
/* Restart at a record returned earlier: blk = the iterator's blk - 1 then,
 * pos = ev_pos, ref_* = ev_ref_*, slot and seg = the event's. */
void kd_core_iter_seek(struct kd_core_iter *it, uint32_t blk, uint32_t pos,
                            uint64_t ref_tick, uint32_t ref_ts20, uint32_t slot, uint32_t seg);
/* Tick of a block's BLOCK_START (the block was validated by the reader). */
uint64_t kd_block_start_tick(const struct kd_snap *snap,
                                  const struct kd_snap_block *b);

/* ---- stage 3: decoded result -------------------------------------------- */

enum kd_dec_call_flags {
	KD_CALL_TRUNC_BEGIN = 1u << 0, /* entry before the window: begin = window start */
	KD_CALL_TRUNC_END = 1u << 1,   /* exit not in the window (or lost) */
	KD_CALL_SPAN = 1u << 2,        /* a ktrace_span_begin/end pair */
	KD_CALL_EXIT_LOST = 1u << 3,   /* closed by an outer frame's exit */
	KD_CALL_HELD = 1u << 4,        /* entered in a held run (format 2): its core
	                                  is the one the run was written to, not
	                                  necessarily the one it ran on */
};

enum kd_dec_func_kind {
	KD_FUNC_ADDR = 0,     /* a code address (from FUNCS or *_ADDR records) */
	KD_FUNC_SPAN = 1,     /* a span name */
	KD_FUNC_UNKNOWN_ID = 2, /* a compact id FUNCS did not list */
};

struct kd_dec_func {
	uint64_t addr;            /* code address (KD_FUNC_ADDR) */
	uint32_t id;              /* span name id, or the unknown compact id */
	uint32_t kind;            /* enum kd_dec_func_kind */
	const char *name;         /* resolved name (never NULL after decode); a
	                             name several functions share has a label,
	                             "sdslen [t_string.c]" (symbols.c) */
	const char *sym;          /* the name without that label */
	const char *short_name;   /* name for timelines: long C++ names
	                             shortened (names.c); == name if short */
};

struct kd_dec_thread {
	uint32_t slot;            /* 1-based slot used in records */
	int32_t tid;              /* kernel thread id, 0 if unknown */
	uint32_t flags;           /* enum ktrace_thread_flags */
	int known;                /* THREADS section described it */
	char name[32];            /* NUL-terminated */
	uint64_t events;          /* records attributed to it in the window */
	uint64_t first_tick;      /* ticks: first event in the window */
	uint64_t last_tick;       /* ticks: last event in the window */
	uint64_t start_tick;      /* ticks: where its truncated-begin calls start */
};

struct kd_dec_call {
	uint64_t begin;           /* ticks */
	uint64_t end;             /* ticks */
	uint64_t self;            /* ticks: end - begin - children */
	uint32_t func;            /* index in kd_dec.funcs */
	uint32_t thread;          /* index in kd_dec.threads */
	uint32_t parent;          /* call index, or KD_NONE */
	uint32_t depth;           /* 0 = outermost known frame of the thread */
	uint32_t core;            /* core index of the entry (or exit if truncated) */
	uint32_t flags;           /* enum kd_dec_call_flags */
	uint16_t begin_sub;       /* recorded order within the begin's tick (kd_ev.sub) */
	uint16_t end_sub;         /* ... within the end's tick */
};

enum kd_dec_req_flags {
	KD_REQ_TRUNC_BEGIN = 1u << 0,
	KD_REQ_TRUNC_END = 1u << 1,
	KD_REQ_TRIGGER = 1u << 2,     /* the request that fired this snapshot */
	KD_REQ_NUMBERED = 1u << 3,    /* format 2: id is the kind's number ("get #1234") */
	KD_REQ_USER_ID = 1u << 4,     /* user_id is the program's own id (REQ_OPEN_ID) */
	KD_REQ_UNKNOWN = 1u << 5,     /* ended by REQ_CLOSE, begun before the window:
	                                 kind and number unknown */
};

struct kd_dec_request {
	uint64_t begin;           /* ticks */
	uint64_t end;             /* ticks */
	uint64_t id;              /* request id from the records (format 1: the
	                             thread's slot << 32 | its sequence number; format
	                             2: the kind's request number) */
	uint64_t user_id;         /* the program's id, if KD_REQ_USER_ID */
	uint32_t kind;            /* name id of the kind (KD_NONE: KD_REQ_UNKNOWN) */
	uint32_t thread;          /* thread index (of the begin; of the end if truncated) */
	uint32_t end_thread;      /* thread index of the end record, KD_NONE if not seen */
	uint32_t keep;            /* enum ktrace_req_keep of its end record (format 2) */
	uint32_t flags;           /* enum kd_dec_req_flags */
	uint32_t core;            /* core index of the begin */
	uint16_t begin_sub;       /* recorded order within the begin's tick (kd_ev.sub) */
	uint16_t end_sub;         /* ... within the end's tick */
	/* Recorded order, for calls that share a boundary tick (indices into
	 * kd_dec.calls, which holds a thread's calls in recorded order;
	 * KD_NONE where the record is not in the window, or the end
	 * came from another thread): */
	uint32_t call_first;      /* first call entered after the begin record */
	uint32_t call_end;        /* first call entered after the end record */
	uint32_t open_at_end;     /* innermost call still open at the end record */
};

struct kd_dec_mark {
	uint64_t tick;            /* ticks */
	uint64_t value;           /* ktrace_mark() value */
	uint32_t name;            /* name id */
	uint32_t thread;          /* thread index */
	uint32_t core;            /* core index */
	uint32_t sub;             /* recorded order within its tick (kd_ev.sub) */
};

/* A run of consecutive records of one thread on one core. */
struct kd_dec_run {
	uint64_t begin;           /* ticks: first record */
	uint64_t end;             /* ticks: last record */
	uint64_t events;
	uint32_t core;            /* core index */
	uint32_t thread;          /* thread index */
};

struct kd_dec_core_stats {
	uint64_t first_tick;      /* ticks: oldest surviving record (or block start) */
	uint64_t last_tick;       /* ticks: newest record */
	uint64_t events;          /* records decoded in the window (held runs not
	                             counted: they are not this core's occupancy) */
	uint64_t held;            /* records of held runs written into this core's
	                             ring (format 2), in the window */
	uint64_t dropped;         /* records before the complete window (not --all) */
	uint64_t dropped_after;   /* records after it (copied later than another core) */
	uint32_t damaged_tails;   /* blocks whose tail did not parse */
	int has_data;
};

struct kd_dec_opts {
	int all;                  /* keep data before the complete window */
	int no_symbols;           /* never open ELF files (fuzzing) */
	const char *sysroot;      /* prefix for module paths, or NULL */
	const char *debug_dir;    /* --debug-dir: DIR/.build-id/xx/rest.debug, or NULL */
	int raw_names;            /* --no-demangle: keep C++ names mangled */
	int stream;               /* open without the collector: no d->calls; the
	                             caller walks (kd_dec_walk) with its sink */
	int progress;             /* a progress line on stderr during long walks */
	int64_t progress_t0;      /* CLOCK_MONOTONIC ns: when the decode began */
};

struct kd_range;

/*
 * One decoded file.  The decoded result (what the stages made of the
 * snapshot: window, functions, threads, calls, requests, marks, runs,
 * scheduling), then, apart, what a pass over it keeps: how a range and a
 * merge cut it (cut, merge) and the stages' own state (pass).
 */
struct kd_dec {
	char *file;               /* name for messages */
	void *map;                /* owned file mapping or copy, or NULL */
	size_t map_len;           /* bytes */
	int map_is_mmap;
	struct kd_snap snap;
	struct kd_dec_opts opts;
	/* ---- the decoded result ---- */
	uint32_t shift;           /* info.tsc_shift */
	uint64_t tsc_hz;          /* info.tsc_hz */
	uint64_t window_start;    /* ticks: complete window start (or data start, --all);
	                             the range's start once cut (cut.full_start: the
	                             snapshot's) */
	uint64_t window_end;      /* ticks */
	uint64_t data_start;      /* ticks: oldest record of any core */
	int window_limited;       /* some core wrapped: window_start > data_start */
	uint64_t events;          /* records decoded in the window */
	uint64_t dropped;         /* records before the window */
	uint64_t window_cut;      /* ticks: the earliest CORES copy_tsc; later records
	                             may be missing on some core, so they are dropped
	                             (UINT64_MAX: no cut, or --all) */
	uint64_t dropped_after;   /* records after window_cut */
	struct kd_dec_func *funcs;     uint32_t nfuncs;
	struct kd_dec_thread *threads; uint32_t nthreads;
	struct kd_dec_call *calls;     uint32_t ncalls;  /* the collector's: grouped by
	                                     thread, in entry (recorded) order within
	                                     one, calls entered before the window
	                                     first; parent < child.  Empty when
	                                     opened with opts.stream */
	struct kd_dec_request *reqs;   uint32_t nreqs;   /* in begin order */
	struct kd_dec_mark *marks;     uint32_t nmarks;
	struct kd_dec_run *runs;       uint32_t nruns;
	struct kd_dec_core_stats *core_stats; /* [snap.ncores] */
	uint32_t trigger_req;     /* request index of the trigger, or KD_NONE */
	uint64_t unmatched_exits; /* exits with no entry (counted as truncated-begin) */
	uint64_t lost_exits;      /* frames closed by an outer exit */
	/* Scheduling (sched.c, after stage 3; nothing when not recorded). */
	struct kd_dec_offcpu *offcpu;  uint32_t noffcpu;  /* by thread, then begin */
	uint32_t *offcpu_first;   /* [nthreads + 1]: thread t's are offcpu[first[t]..first[t+1]) */
	struct kd_dec_oncpu *oncpu;    uint32_t noncpu;   /* by core, then begin */
	int sched;                /* switch records decoded (status RECORDED) */
	uint64_t sched_from;      /* ticks: switch data complete on every core from here */
	uint64_t sched_to;        /* ticks: ... up to here (the last drain) */
	struct kd_strpool strs;   /* strings made up by the decoder (owned) */
	struct {                  /* calls the last walk saw (summary, any format) */
		uint64_t calls;
		uint64_t trunc_begin; /* entered before the window */
		uint64_t trunc_end;   /* still running at its end */
		uint64_t exit_lost;   /* closed by an outer frame's exit (longjmp) */
	} counts;
	/* ---- the time range on this file (range.c; zero without one) ---- */
	struct kd_dec_cut {
		const struct kd_range *range; /* cut on every walk (kd_dec_walk_cut),
		                             set by main.c; NULL: no range */
		int walked;           /* a walk has cut d once (the window is the range's) */
		int state;            /* 1: window_start/end are the range now; 2: the
		                         range misses this file (nothing left) */
		uint64_t full_start, full_end; /* ticks: the snapshot's window */
		uint64_t calls_out;   /* calls left out: wholly outside the range */
		uint64_t min_dur_ns;  /* --min-dur, ns */
		uint64_t min_dur_ticks; /* ... in ticks */
		uint64_t min_dur_dropped; /* calls left out: shorter than min_dur */
		int trigger_clipped;  /* the trigger request crosses the range's edge
		                         (still marked; explain does not name it) */
	} cut;
	/* ---- several files on one timeline (merge.c; zero for one file) ---- */
	struct kd_dec_merge {
		uint32_t group;       /* 1-based process group among the files */
		uint64_t cut;         /* ticks: an earlier snapshot of the process ends
		                         here (0: no overlap) */
		uint64_t dropped;     /* calls left out: the earlier snapshot has them */
		uint64_t joined;      /* frames open across the cut made one call */
	} merge;
	/* ---- the stages' own state between passes ---- */
	struct {
		struct kd_build *build; /* stage 3's, between prepare and walks (build.c) */
		void *symcache;       /* symbols.c's ELF files */
		int warned_demangle;  /* symbols.c: "names stay mangled" said */
	} pass;
};

/* Run stages 1-5 on a file (a regular file read in bounded windows, a pipe
 * into memory) or a caller's buffer (not copied). */
int kd_dec_open_file(const char *path, const struct kd_dec_opts *opts,
                          struct kd_dec **out, struct kd_dec_error *err);
int kd_dec_open_buffer(const void *buf, size_t len, const char *name,
                            const struct kd_dec_opts *opts, struct kd_dec **out,
                            struct kd_dec_error *err);
void kd_dec_free(struct kd_dec *d);
/* open() a path for reading without blocking (O_NONBLOCK, cleared after
 * fstat fills *st); the caller checks the file type.  fd or -1 (errno). */
int kd_dec_open_path(const char *path, struct stat *st);
/* pread() n bytes at off into buf, in chunks (kd_dec_read_hook runs
 * before each; total is for the hook).  Returns the bytes read: fewer than
 * n with errno set on an error, with errno 0 at end of file. */
uint64_t kd_dec_pread(int fd, void *buf, uint64_t off, uint64_t n, const char *path,
                           uint64_t total);

/* Read what kd_dec_open_path returned (fd, *st) whole into memory, and
 * close fd: a pipe's or a socket's snapshot (regular files go to
 * kd_snap_read_fd; anything else is refused).  *buf is malloc'ed. */
int kd_dec_read_fd(int fd, const struct stat *st, char **buf, size_t *len,
                        struct kd_dec_error *err);

/* Stage 3 on a read + ordered snapshot already in d->snap: prepare, then
 * walk with the collector (d->calls). */
int kd_dec_build(struct kd_dec *d, struct kd_dec_error *err);
/* Stage 3's first pass: window, pieces, threads, core runs (d->pass.build). */
int kd_dec_prepare(struct kd_dec *d, struct kd_dec_error *err);
/* Walk every thread, emitting the stream (stream.h) to sink; fills
 * d->reqs, d->marks, d->counts, per-thread counts.  May run again. */
int kd_dec_walk(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err);
void kd_build_free(struct kd_build *b);

/* ---- stage 3b: scheduling (sched.c) ------------------------------------- */

enum kd_dec_off_why { KD_OFF_BLOCKED = 0, KD_OFF_PREEMPTED = 1 };

/* A thread off the cpu: from leaving it to getting one again. */
struct kd_dec_offcpu {
	uint64_t begin;           /* ticks: switch out */
	uint64_t end;             /* ticks: switch in (or sched_to if none) */
	uint32_t thread;          /* thread index */
	uint32_t why;             /* enum kd_dec_off_why */
};

/* One of the process's threads on a core. */
struct kd_dec_oncpu {
	uint64_t begin;           /* ticks: switch in (or sched_from) */
	uint64_t end;             /* ticks: switch out (or sched_to) */
	uint32_t thread;          /* thread index */
	uint32_t cpu;             /* cpu number */
};

/* Turn the SCHED section into offcpu/oncpu intervals (threads seen only
 * there are added to d->threads); 0 or KD_ENOMEM. */
int kd_dec_sched(struct kd_dec *d);
/* Off-CPU ticks of a thread inside [b, e): out[KD_OFF_BLOCKED],
 * out[KD_OFF_PREEMPTED]. */
void kd_dec_offcpu_in(const struct kd_dec *d, uint32_t thread, uint64_t b, uint64_t e,
                           uint64_t out[2]);
/* "scheduling: ..." line for the summary (status, switches, losses, why not). */
void kd_dec_sched_status(const struct kd_dec *d, char *buf, size_t len);
/* "<d> on-CPU, <d> blocked, <d> preempted" for wall ticks and off[2] ticks. */
void kd_dec_fmt_split(const struct kd_dec *d, uint64_t wall, const uint64_t off[2],
                           char *buf, size_t len);

/* ---- stage 4: time ------------------------------------------------------ */

/* Ticks (a difference) -> ns, saturating. */
uint64_t kd_dec_ticks_ns(const struct kd_dec *d, uint64_t ticks);
/* Absolute tick -> CLOCK_REALTIME ns since the epoch. */
int64_t kd_dec_wall_ns(const struct kd_dec *d, uint64_t tick);
/*
 * The time of an event: its tick's wall clock plus sub ns, sub being the
 * event's place among its thread's events in that tick (kd_ev.sub), capped
 * below the next tick.  Times within a tick are interpolated so that
 * viewers that nest by time see the recorded order; every format that
 * prints an event's time uses this.
 */
int64_t kd_dec_event_ns(const struct kd_dec *d, uint64_t tick, uint32_t sub);
/* Same on a snapshot alone, on a full (unshifted) counter value. */
/* Anchors: find wall-clock steps (time.c), after they are read. */
void kd_snap_find_steps(struct kd_snap *snap);
int64_t kd_snap_wall_ns(const struct kd_snap *snap, uint64_t tsc);
/* "HH:MM:SS.nnnnnnnnn" (UTC) into buf[32]; "YYYY-MM-DD " prefixed if date. */
void kd_fmt_wall(int64_t ns, int date, char *buf, size_t len);
/* "12.345 ms" style, adaptive unit, into buf. */
void kd_fmt_dur(uint64_t ns, char *buf, size_t len);

/* ---- stage 5: symbols --------------------------------------------------- */

/* Fill d->funcs[].name. Never fails: unresolvable addresses get hex names. */
void kd_dec_symbolize(struct kd_dec *d);
void kd_symcache_free(void *cache);

/* One ELF file's function symbols, for tests and tools. */
struct kd_elf;
int kd_elf_open(const char *path, struct kd_elf **out, struct kd_dec_error *err);
/* Parse an ELF image in memory (copied). */
int kd_elf_parse(const void *buf, size_t len, struct kd_elf **out,
                      struct kd_dec_error *err);
/* Function symbol containing the ELF virtual address, or NULL. */
const char *kd_elf_lookup(const struct kd_elf *elf, uint64_t vaddr, uint64_t *sym_start);
/* Source file (STT_FILE) of the local function symbol at vaddr, or NULL. */
const char *kd_elf_lookup_file(const struct kd_elf *elf, uint64_t vaddr);
/* File offset -> ELF virtual address via PT_LOAD; 0 on success. */
int kd_elf_offset_to_vaddr(const struct kd_elf *elf, uint64_t off, uint64_t *vaddr);
/* Function symbol i (in address order), or NULL past the last one. */
const char *kd_elf_sym_name(const struct kd_elf *elf, uint32_t i);
void kd_elf_free(struct kd_elf *elf);

/* ---- helpers shared by the sinks ---------------------------------------- */

const char *kd_dec_func_name(const struct kd_dec *d, uint32_t func);
/* The function's symbol name, without the label a repeated name gets. */
const char *kd_dec_func_sym(const struct kd_dec *d, uint32_t func);
/* The timeline form of a function's name (names.c). */
const char *kd_dec_func_short(const struct kd_dec *d, uint32_t func);

/* ---- C++ names (names.c) ------------------------------------------------ */

#define KD_SHORT_NAME_MAX 80  /* bytes a timeline name keeps whole */
int kd_name_is_mangled(const char *name);
/* Demangled copy (free() it) of an Itanium C++ name; NULL if name is not
 * one, does not demangle, or no C++ runtime (libstdc++) is installed. */
char *kd_demangle(const char *name);
int kd_demangler_missing(void);
/* name, or its short form written into buf. */
const char *kd_name_shorten(const char *name, char *buf, size_t cap);
/* Name id -> string; unknown ids get "name#N" (static buffer per call site: copy it). */
const char *kd_dec_name(const struct kd_dec *d, uint32_t id, char *buf, size_t len);
/* "name/tid" label of a thread into buf. */
const char *kd_dec_thread_label(const struct kd_dec *d, uint32_t thread,
                                     char *buf, size_t len);
/* Decoder-owned string copy (lives as long as d). */
const char *kd_dec_strdup(struct kd_dec *d, const char *s);


/* ---- time-range selection (range.c) ------------------------------------- */

enum kd_when_kind { KD_WHEN_NONE = 0, KD_WHEN_OFFSET, KD_WHEN_TIME_OF_DAY, KD_WHEN_WALL };

/* One end of a range as written on the command line. */
struct kd_when {
	int kind;                 /* enum kd_when_kind */
	int64_t ns;               /* offset, ns since midnight UTC, or ns since the epoch */
	const char *text;         /* as given */
};

struct kd_range {
	struct kd_when from, to;  /* --from / --to */
	int around_set;           /* --around-trigger given */
	uint64_t around_ns;       /* ns: its duration */
	uint64_t min_dur_ns;      /* --min-dur (0: none) */
	/* kd_range_resolve(): */
	int active;               /* from/to/around given */
	int64_t from_ns, to_ns;   /* CLOCK_REALTIME ns (INT64_MIN / INT64_MAX: open) */
};

/* Parse a --from/--to value / a duration; 0, or -1 with msg saying what to
 * write instead. */
int kd_parse_when(const char *opt, const char *s, struct kd_when *w, char *msg, size_t len);
int kd_parse_duration(const char *opt, const char *s, uint64_t *ns, char *msg, size_t len);
/* Turn the range into wall-clock ns for these files (offsets from the
 * earliest window start; --around-trigger from the first file with a
 * trigger).  0, or -1 with msg (no trigger, empty range, outside every window). */
int kd_range_resolve(struct kd_range *r, struct kd_dec *const *decs, uint32_t n, char *msg,
                     size_t len);
/* The range in d's ticks ([from, to], the window if no range) and
 * --min-dur in ticks; 0 no range, 1 a range, 2 a range that misses d's
 * window (from UINT64_MAX, to 0: nothing passes). */
int kd_range_ticks(const struct kd_dec *d, const struct kd_range *r, uint64_t *from,
                   uint64_t *to, uint64_t *min);
/* Cut d to the range and drop calls shorter than min_dur_ns (see range.c):
 * d's calls are collected again through the range filter (kd_dec_collect
 * with d->cut.range set), the one cut every format goes through. */
void kd_range_apply(struct kd_dec *d, const struct kd_range *r);
/* Marks outside [from, to] go; runs and off/on-CPU intervals are clamped
 * to it (or go). */
void kd_dec_cut_intervals(struct kd_dec *d, uint64_t from, uint64_t to);
/* The same cut of the calls as a filter on the event stream (stream.h), for
 * sinks that consume it: kd_range_filter(&f, r, next) returns the sink to
 * give kd_dec_walk; marks and requests outside the range go too. */
struct kd_range_filter {
	const struct kd_range *r;
	struct kd_sink next;
	const struct kd_dec *d;   /* the file whose ticks from/to/min are in */
	uint64_t from, to, min;   /* ticks */
	void *stack;              /* open calls (struct rf_frame, range.c) */
	size_t cap;
	uint32_t depth, undecided; /* frames below `undecided` are decided */
	void *q;                  /* events waiting behind an undecided call */
	size_t qcap;
	uint32_t qhead, qn;
	uint64_t calls_out;       /* calls dropped: outside the range */
	uint64_t min_dropped;     /* calls dropped: shorter than --min-dur */
	/* With `track` (set before the walk, for the collector behind it):
	 * per input call (the builder's call position), its caller's position
	 * and whether it was kept, so that requests' call positions can be
	 * remapped to the kept calls (kd_dec_collect).  Per call: 5 bytes. */
	int track;
	uint32_t npos;            /* CALL_BEGINs seen */
	uint32_t *in_parent;      /* [npos]: the caller's position, KD_NONE */
	uint8_t *in_kept;         /* [npos]: 1 kept */
	size_t cap_parent, cap_kept;
};
struct kd_sink kd_range_filter(struct kd_range_filter *f, const struct kd_range *r,
                               struct kd_sink next);
void kd_range_filter_free(struct kd_range_filter *f);
/* kd_dec_walk with d->cut.range (if set) cut on the stream: the filter, then
 * requests, marks, runs, intervals and the window as kd_range_apply cuts
 * them; the summary's range lines count as on the collector.  Every
 * streamed sink walks through this. */
int kd_dec_walk_cut(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err);
/* The same for a sink that collects calls and reads requests' call
 * positions (call_first ...): they are remapped to the calls the range
 * keeps, not cleared (5 bytes a call while walking). */
int kd_dec_walk_cut_pos(struct kd_dec *d, struct kd_sink sink, struct kd_dec_error *err);
/* Ticks: d's window start once kd_dec_walk_cut has cut it (for a sink that
 * writes its time origin before the walk). */
uint64_t kd_range_start(const struct kd_dec *d);
/* The summary's "range:" / "min-dur:" lines, if a cut was made. */
void kd_out_range_note(FILE *f, const struct kd_dec *d);

/* ---- several files on one timeline (merge.c) ----------------------------- */

/* Same host, pid, start_tsc and tsc_shift: snapshots of one process. */
int kd_same_process(const struct kd_dec *a, const struct kd_dec *b);
/* Group the files by process and cut overlapping snapshots of one process so
 * that each call appears once (see merge.c). */
void kd_merge_files(struct kd_dec *const *decs, uint32_t n);
/* ns since the epoch: the earliest window start of the files. */
int64_t kd_merge_origin(struct kd_dec *const *decs, uint32_t n);
/* "merged timeline of N files" (out-summary.c): each file's process,
 * window, offset on the merged timeline and the clock offset used. */
void kd_out_merge_summary(FILE *f, struct kd_dec *const *decs, uint32_t n);
/* One text timeline of all files (out-text.c), lines tagged "[N]" by file:
 * files opened with opts.stream from their streams (bounded), the others
 * from their collected calls.  0, or -1 (a stream failed; said on stderr). */
struct kd_out_opts;
int kd_out_text_merged(FILE *f, struct kd_dec *const *decs, uint32_t n,
                       const struct kd_out_opts *o);

/* ---- the call tree (calltree.c), shared by folded and explain ----------- */

enum kd_ctree_kind {
	KD_CTREE_FUNC = 0,    /* func: a function index */
	KD_CTREE_THREAD = 1,  /* a thread's root (thread_roots): func = thread index */
	KD_CTREE_CUT = 2,     /* everything below max_depth frames (func NONE) */
};

struct kd_ctree_node {
	uint32_t parent;          /* node index, KD_NONE for a root */
	uint32_t func;            /* see enum kd_ctree_kind */
	uint32_t kind;            /* enum kd_ctree_kind */
	uint32_t depth;           /* nodes above it (a root: 0) */
	uint32_t cut;             /* CUT node: the most frames cut below its parent */
	uint32_t first_child, next_sibling; /* set by kd_ctree_link */
};

struct kd_ctree {
	struct kd_ctree_node *n;
	uint32_t nn, cap;
	unsigned char *data;      /* nn payloads of esize bytes, zeroed when created */
	size_t esize;
	int thread_roots;         /* calls without a placed parent hang under their thread */
	uint32_t max_depth;       /* cut below this depth (0: never) */
	struct kd_umap map;   /* (parent node + 1, func) -> node */
	uint32_t *chain;          /* scratch for kd_ctree_place */
	uint32_t capchain;
	int oom;                  /* a map insertion failed: the tree is incomplete */
};

void kd_ctree_init(struct kd_ctree *t, size_t esize, int thread_roots,
                        uint32_t max_depth);
void kd_ctree_free(struct kd_ctree *t);
void *kd_ctree_data(const struct kd_ctree *t, uint32_t node);
/* A thread's root node (thread_roots trees). */
uint32_t kd_ctree_root(struct kd_ctree *t, uint32_t thread);
/* The node of func called from node parent (KD_NONE: a root), at
 * `frames` frames below the thread root (for the cut count).  NONE: oom. */
uint32_t kd_ctree_child(struct kd_ctree *t, uint32_t parent, uint32_t func,
                             uint32_t frames);
/* Place call i of d (and its callers that keep() accepts, NULL: all) in the
 * tree: node_of[] (d->ncalls entries, KD_NONE = not placed) and
 * optional frames[] (depth below the thread root) are filled for them.
 * Returns i's node, NONE if out of memory. */
uint32_t kd_ctree_place(struct kd_ctree *t, const struct kd_dec *d,
                             uint32_t *node_of, uint32_t *frames, uint32_t i,
                             int (*keep)(const struct kd_dec *d, uint32_t call, void *arg),
                             void *arg);
/* Link children in cmp order (NULL: creation order); *roots (malloc'ed, free
 * it) gets the roots in that order.  0. */
int kd_ctree_link(struct kd_ctree *t,
                       int (*cmp)(const struct kd_ctree *t, uint32_t a, uint32_t b, void *arg),
                       void *arg, uint32_t **roots, uint32_t *nroots);

/* ---- stage 6: sinks ----------------------------------------------------- */

struct kd_out_opts {
	int have_tid;             /* --thread given */
	int32_t tid;              /* --thread TID */
	uint64_t limit;           /* --limit N (0 = no limit) */
	int quiet;                /* -q */
	int verbose;              /* -v: the summary on stderr too, for formats
	                             whose output is not text (chrome, perfetto,
	                             html, folded) */
};

void kd_out_summary(FILE *f, const struct kd_dec *d);
/* Per-core occupancy from the context switches (part of text). */
void kd_out_text_cores(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o);
void kd_out_stats(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o);

/* The text timeline's pieces (out-text.c): its lines and their order. */
enum kd_text_type { KD_TEXT_CALL, KD_TEXT_MARK, KD_TEXT_REQ, KD_TEXT_OFF };
struct kd_text_item {
	uint64_t tick;            /* ticks: the line's time (a call's begin) */
	uint32_t thread;          /* thread index */
	uint32_t sub;             /* recorded order within the thread's tick */
	uint32_t type;            /* enum kd_text_type */
	uint32_t idx;             /* in d->calls/marks/reqs/offcpu (calls: any
	                             number rising in the thread's recorded order) */
};
/* The timeline's order: time, thread, recorded order, never depth. */
int kd_text_item_cmp(const void *a, const void *b);
int kd_text_want_thread(const struct kd_dec *d, uint32_t th, const struct kd_out_opts *o);
/* d's marks, requests, off-CPU intervals (and calls if `calls`) of the
 * wanted threads, sorted; *out malloc'ed.  Returns their number. */
size_t kd_text_items(const struct kd_dec *d, const struct kd_out_opts *o, int calls,
                     struct kd_text_item **out);
/* "\ntimeline (UTC, ...):" and the muted note. */
void kd_text_header(FILE *f, const struct kd_dec *d);
/* One line; c: the call of a KD_TEXT_CALL item. */
void kd_text_line(FILE *f, const struct kd_dec *d, const struct kd_text_item *x,
                  const struct kd_dec_call *c);

/*
 * The text timeline (out-text.c), from the event stream: memory
 * bounded by threads x stack depth + marks, requests, off-CPU intervals +
 * buffers, not by calls.  Each thread's calls go to a spool in begin order
 * (32 bytes a call, in memory up to 1 MiB, then in an unlinked temporary
 * file in $TMPDIR or /tmp), then a k-way merge over the threads prints the
 * lines in kd_text_item_cmp order.  --limit N spools at most N calls per
 * thread.  A collected file (not opened with opts.stream: the merge cut its
 * calls) is printed from d->calls in the same order.
 */
struct kd_text_stream;
/* Walk d into a spool (0), or -1 (a message on stderr: the walk or the
 * temporary file failed). */
int kd_text_stream_open(struct kd_text_stream **out, struct kd_dec *d,
                        const struct kd_out_opts *o);
/* The next timeline line printed to f: 1, or 0 when none is left. */
int kd_text_stream_next(struct kd_text_stream *t, FILE *f);
/* Lines not printed yet (calls counted even where --limit did not spool them). */
uint64_t kd_text_stream_left(const struct kd_text_stream *t);
void kd_text_stream_free(struct kd_text_stream *t);
/* The whole timeline of one file: 0 or -1. */
int kd_out_text(FILE *f, struct kd_dec *d, const struct kd_out_opts *o);
/* explain of a file opened with opts.stream (out-explain.c), collecting
 * only the calls that overlap the explained request and the median one (a
 * walk of its own, through the range; the calls are freed after): 0 or -1
 * (message on stderr). */
int kd_out_explain_stream(FILE *f, struct kd_dec *d, const struct kd_out_opts *o);

void kd_out_explain(FILE *f, const struct kd_dec *d, const struct kd_out_opts *o);
/* Folded stacks: frames deeper than this are cut, "[up_to_N_frames_cut]". */
#define KD_FOLD_DEPTH 512u
/* Folded stacks from the event stream (out-folded.c): memory per distinct
 * stack, not per call; walks d (through its range, kd_dec_walk_cut).  0, or
 * -1 (out of memory building the timeline). */
int kd_out_folded_stream(FILE *f, struct kd_dec *d, const struct kd_out_opts *o);

/* Chrome JSON: begin, one call per decoded file (distinct pid_base each), end. */
struct kd_chrome {
	FILE *f;
	int first;                /* no event written yet */
	int64_t base_wall_ns;     /* ns since epoch: ts 0 of the trace */
	int have_base;
};
void kd_out_chrome_begin(struct kd_chrome *c, FILE *f, int64_t base_wall_ns);
/* Walks d's stream (kd_dec_walk): d may be opened with opts.stream. */
void kd_out_chrome_file(struct kd_chrome *c, struct kd_dec *d,
                             int64_t pid, const struct kd_out_opts *o);
void kd_out_chrome_end(struct kd_chrome *c);

/* HTML timeline (out-html.c): one self-contained page for all files.  A page
 * holds at most KD_HTML_MAX_CALLS calls (o->limit lowers it); beyond,
 * nothing is written, stderr says how to cut the window, and -1 returns. */
#define KD_HTML_MAX_CALLS 20000000ull
int kd_out_html(FILE *f, struct kd_dec **decs, int n, const struct kd_out_opts *o);
/* Calls the page would hold (--thread applied). */
uint64_t kd_html_calls(struct kd_dec *const *decs, int n,
                            const struct kd_out_opts *o);

/* Perfetto protobuf trace of all decoded files (NULL entries skipped), one
 * process group per process; several snapshots of one process merged
 * (out-perfetto.c).  0 or KD_ENOMEM; write errors show in ferror(f). */
int kd_out_perfetto(FILE *f, struct kd_dec *const *decs, uint32_t n,
                         const struct kd_out_opts *o);

/* The window budget (budget.c, a helper of the sinks): the summary's
 * lines, the note the sinks print ("self time includes muted calls: ..."),
 * whether a function is muted (index in snap.muted, or -1). */
void kd_budget_lines(FILE *f, const struct kd_dec *d);
void kd_budget_note(FILE *f, const struct kd_dec *d, const char *prefix);
/* The same condensed: the first max functions, then "and N more". */
void kd_budget_note_short(FILE *f, const struct kd_dec *d, const char *prefix, uint32_t max);
const char *kd_budget_muted_list(const struct kd_dec *d, char *buf, size_t len);
/* Name of snap.muted[i] (its function's, else its address in buf). */
const char *kd_budget_muted_name(const struct kd_dec *d, uint32_t i, char *buf, size_t len);
int kd_budget_muted(const struct kd_dec *d, uint32_t func);
/* --format exclude (out-exclude.c): one flag line for all files (NULL
 * entries skipped), notes on stderr. */
void kd_out_exclude(FILE *f, struct kd_dec *const *decs, int n);

/* Statistics per function (shared by stats and explain). */
struct kd_func_stats {
	uint32_t func;
	uint64_t calls;
	uint64_t total;           /* ns, inclusive (calls nested in themselves counted once) */
	uint64_t self;            /* ns */
	uint64_t p50, p99, max;   /* ns, of inclusive durations */
	double mean;              /* ns */
};
/* Returns an array sorted by self time descending (caller frees), or NULL. */
struct kd_func_stats *kd_func_stats(const struct kd_dec *d, int32_t tid,
                                             int have_tid, uint32_t *n);

/* "get #1234" (format 2), "get id=987654" (with the program's id), "get
 * #3.17" (format 1: thread slot . sequence) into buf. */
const char *kd_req_label(const struct kd_dec *d, const struct kd_dec_request *q, char *buf,
                         size_t len);
/* The id part alone: "#1234", "id=987654", "#3.17". */
const char *kd_req_id_str(const struct kd_dec_request *q, char *buf, size_t len);
/* "slow, sampled" for keep flags into buf ("" for none). */
const char *kd_req_keep_str(uint32_t keep, char *buf, size_t len);

/* ---- requests (requests.c): the REQUESTS section (format 2) ---------------- */

/* A kind's latency histogram summed over the slices that overlap a range. */
struct kd_req_hist {
	uint32_t kind;            /* name id */
	const struct ktrace_req_kind_rec *rec; /* its counts */
	uint32_t nslices;         /* slices summed */
	uint64_t first_tsc, last_tsc; /* counter: their span (the range to within a slice) */
	uint64_t count;           /* requests that ended in them */
	double per_s;             /* count per second of the span */
	uint64_t pct_ticks[4];    /* counter ticks: p50, p90, p99, p99.9 (bucket upper
	                             bounds capped by max: never below the true value) */
	uint64_t pct_ns[4];       /* the same in ns */
	uint64_t max_ticks, max_ns; /* the slices' exact maximum */
	double err_pct;           /* percent a percentile may be above the true value */
	uint64_t span_ns;         /* ns: last_tsc - first_tsc */
};
/* Exclusive upper bound of histogram bucket b (counter ticks). */
uint64_t kd_req_bucket_hi(uint32_t b, uint32_t sub_bits);
/* Kind k (index in snap.req_kinds) over [from, to] (ticks, shifted): 0, or -1
 * (no section, no such kind, out of memory). */
int kd_req_hist(const struct kd_dec *d, uint32_t k, uint64_t from, uint64_t to,
                struct kd_req_hist *h);
/* Index in snap.req_kinds of a kind's name id, or KD_NONE. */
uint32_t kd_req_kind_index(const struct kd_dec *d, uint32_t kind_id);
/* The summary's requests lines (nothing without a REQUESTS section). */
void kd_out_requests(FILE *f, const struct kd_dec *d, const char *indent);

/* Explain: the chosen request (the trigger if it is wholly in the range,
 * else the slowest complete one) or KD_NONE. */
uint32_t kd_explain_pick(const struct kd_dec *d, uint32_t *median);

#endif /* KD_DECODER_H */
