/*
 * decoder.h - the stages of ktrace-decode, shared by the program, the unit
 * tests, the fuzz target and other engineers' end-to-end tests.
 *
 * Stages (each takes in-memory input and can be tested alone):
 *
 *   1. read.c      ktrace__snap_read(): bytes -> struct ktrace_snap.  The only
 *                  parser of the file: validates every length, offset and
 *                  CRC; damaged blocks are dropped and reported.
 *   2. timeline.c  ktrace__snap_order(): groups blocks per core, oldest first.
 *                  struct ktrace_core_iter: one core's records -> events with
 *                  absolute ticks and thread slots.
 *   3. timeline.c  ktrace__dec_build(): cuts the cores' streams into pieces of
 *                  one thread segment, walks each thread's pieces in order
 *                  and rebuilds its call stack across cores -> calls,
 *                  requests, marks, per-core thread runs.
 *   4. timeline.c  time conversions (ticks -> ns, wall clock via ANCHORS).
 *   5. symbols.c   function addresses -> names (ELF .symtab/.dynsym).
 *   6. out-*.c     sinks: summary, text, stats, chrome, explain, folded.
 *
 * The one-call entry points for programs and tests are ktrace__dec_open_file()
 * and ktrace__dec_open_buffer(), which run stages 1-5.
 *
 * Errors: functions return 0 or a negative KTRACE_DEC_E* code and fill a
 * struct ktrace_dec_error that names the file offset and what is wrong.
 * Problems that do not stop decoding (a damaged block, a damaged optional
 * section) are collected as warnings in struct ktrace_snap.warn.
 */
#ifndef KTRACE_DECODER_H
#define KTRACE_DECODER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ktrace_format.h"

#define KTRACE_DEC_NONE UINT32_MAX

enum {
	KTRACE_DEC_EFORMAT = -1, /* not a ktrace file, or unsupported */
	KTRACE_DEC_ECORRUPT = -2, /* a ktrace file, but damaged beyond use */
	KTRACE_DEC_ENOMEM = -3,
	KTRACE_DEC_EIO = -4, /* could not open or read the file */
};

struct ktrace_dec_error {
	uint64_t offset; /* bytes from file start; meaningful if has_offset */
	int has_offset;
	int code;        /* KTRACE_DEC_E* */
	char msg[320];   /* what is wrong, no file name, no newline */
};

/* Format "ktrace-decode: FILE: offset 0x..: MSG" into buf. */
void ktrace__dec_error_format(const struct ktrace_dec_error *err, const char *file,
                              char *buf, size_t len);

/* Non-fatal problems, in file order.  At most KTRACE_DEC_MAX_WARN kept. */
#define KTRACE_DEC_MAX_WARN 256
struct ktrace_dec_warnings {
	char **lines;     /* "offset 0x..: what" */
	uint32_t n;       /* lines kept */
	uint64_t total;   /* warnings raised, including ones not kept */
};

void ktrace__warn(struct ktrace_dec_warnings *w, uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ktrace__warnings_free(struct ktrace_dec_warnings *w);

/*
 * Memory.  Running out of memory is fatal in the decoder, at the first
 * failing allocation: one line on stderr, "ktrace-decode: out of memory
 * (N bytes for WHAT); ...", and exit status 1 (atexit handlers run, so
 * main.c removes its temporary output).  Never a retry, never a partial
 * result that looks whole.  Every allocation in decoder/ goes through these
 * (they never return NULL), except the image of an ELF file in symbols.c:
 * when that is refused, only that file's names are lost, with a warning.
 */
void ktrace__dec_oom(const char *what, size_t bytes) __attribute__((noreturn, cold));
void *ktrace__xmalloc(size_t n, const char *what);
void *ktrace__xcalloc(size_t n, size_t size, const char *what);
void *ktrace__xrealloc(void *p, size_t n, const char *what);
char *ktrace__xstrdup(const char *s, const char *what);

/*
 * Test hook (NULL in normal use): called before each chunk of a snapshot or
 * an ELF file is read, with the path, bytes read so far and the size fstat
 * gave.  Tests use it to truncate a file at a known moment.
 */
extern void (*ktrace__dec_read_hook)(const char *path, uint64_t done, uint64_t total);

/* ---- stage 1: read ------------------------------------------------------ */

struct ktrace_snap_block {
	uint64_t offset;        /* bytes: file offset of the struct ktrace_block_rec */
	const uint8_t *words;   /* nwords little-endian u32, inside the input buffer */
	uint32_t nwords;        /* valid words, 5..KTRACE_BLOCK_WORDS */
	uint32_t cpu;           /* ring the block came from */
	uint32_t start;         /* S: the core's word counter at block start */
	uint32_t core;          /* index in ktrace_snap.cores (set by ktrace__snap_order) */
};

struct ktrace_snap_core {
	uint32_t cpu;           /* cpu number */
	int have_rec;           /* CORES section had this cpu */
	struct ktrace_core_rec rec; /* copy, if have_rec */
	int wrapped;            /* ring reused older blocks: oldest data is gone */
	uint32_t first_block;   /* index in ktrace_snap.blocks, blocks oldest first */
	uint32_t nblocks;       /* blocks of this core in the file (undamaged) */
};

struct ktrace_snap_name {
	uint32_t id;            /* name id used by MARK/SPAN/REQ records */
	uint16_t kind;          /* enum ktrace_name_kind */
	char *str;              /* NUL-terminated copy */
};

struct ktrace_snap_module {
	uint64_t start;         /* first mapped address */
	uint64_t end;           /* one past the last */
	uint64_t file_offset;   /* bytes: offset in the file of start */
	char *path;             /* NUL-terminated copy */
};

struct ktrace_snap {
	const uint8_t *buf;     /* the whole file (not owned) */
	size_t len;             /* bytes */
	struct ktrace_file_header hdr;
	struct ktrace_info_rec info;           /* strings forced NUL-terminated */
	struct ktrace_anchor_rec *anchors;     /* sorted by tsc, duplicates removed */
	uint32_t nanchors;
	uint64_t func_addr[KTRACE_FUNC_ID_COUNT]; /* compact id -> address */
	uint8_t func_known[KTRACE_FUNC_ID_COUNT]; /* 1 if FUNCS named the id */
	uint32_t nfuncs;                       /* FUNCS entries */
	struct ktrace_thread_rec *threads;     /* sorted by slot, names NUL-terminated */
	uint32_t nthreads;
	struct ktrace_snap_name *names;        /* sorted by id */
	uint32_t nnames;
	struct ktrace_snap_module *modules;    /* sorted by start */
	uint32_t nmodules;
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
	struct ktrace_snap_block *blocks;      /* undamaged blocks */
	uint32_t nblocks;
	struct ktrace_snap_core *cores;        /* by cpu number (ktrace__snap_order) */
	uint32_t ncores;
	uint32_t damaged_blocks;               /* blocks skipped: CRC or structure */
	uint32_t unreadable_blocks;            /* entries lost to a broken BLOCKS walk */
	struct ktrace_dec_warnings warn;
	/* SCHED section (read_sched): have_sched = 0 for files without one */
	int have_sched;
	struct ktrace_sched_hdr sched;         /* what NUL-terminated */
	struct ktrace_sched_core *sched_cores; /* sched.ncores */
	struct ktrace_sched_rec *sched_recs;   /* nsched_recs, valid 'what' only */
	uint32_t nsched_recs;
	struct ktrace_sched_name *sched_names; /* sched.nnames, names NUL-terminated */
};

/*
 * Parse and validate buf[0..len).  On success snap refers into buf (keep it
 * alive).  Returns 0 or KTRACE_DEC_E*; on error err says where and what.
 */
int ktrace__snap_read(const void *buf, size_t len, struct ktrace_snap *snap,
                      struct ktrace_dec_error *err);
void ktrace__snap_free(struct ktrace_snap *snap);
const char *ktrace__section_name(uint32_t type);
const char *ktrace__loss_name(unsigned cause);
/* Name id -> string, or NULL. */
const char *ktrace__snap_name(const struct ktrace_snap *snap, uint32_t id);
const struct ktrace_thread_rec *ktrace__snap_thread(const struct ktrace_snap *snap,
                                                    uint32_t slot);

/* ---- stage 2: per-core record iterator ---------------------------------- */

/* Group blocks per core and order each core's blocks by S, oldest first. */
int ktrace__snap_order(struct ktrace_snap *snap, struct ktrace_dec_error *err);

enum ktrace_dec_kind {
	KTRACE_DK_ENTER = 1,      /* id = compact function id */
	KTRACE_DK_EXIT,           /* id = compact function id */
	KTRACE_DK_ENTER_ADDR,     /* value = function address */
	KTRACE_DK_EXIT_ADDR,      /* value = function address */
	KTRACE_DK_MARK,           /* id = name id, value = mark value */
	KTRACE_DK_SPAN_BEGIN,     /* id = name id */
	KTRACE_DK_SPAN_END,       /* id = name id */
	KTRACE_DK_REQ_BEGIN,      /* id = kind name id, value = request id */
	KTRACE_DK_REQ_END,        /* id = kind name id, value = request id */
};

struct ktrace_dec_event {
	uint64_t tick;            /* ticks: TSC >> tsc_shift */
	uint64_t value;           /* see enum ktrace_dec_kind */
	uint32_t id;              /* see enum ktrace_dec_kind */
	uint32_t slot;            /* thread slot named by BLOCK_START/THREAD */
	uint32_t core;            /* index in ktrace_snap.cores */
	uint32_t kind;            /* enum ktrace_dec_kind */
	uint32_t seg;             /* the thread's segment number (THREAD seq),
	                             KTRACE_DEC_NONE if the writer gave none */
};

struct ktrace_core_iter {
	const struct ktrace_snap *snap;
	struct ktrace_dec_warnings *warn; /* damaged block tails go here (may be NULL) */
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
	uint32_t seg;             /* current segment number, KTRACE_DEC_NONE if unknown */
	uint32_t damaged_tails;   /* blocks whose records stopped parsing */
	uint32_t unknown_ext;     /* extended records of unknown type skipped */
	uint32_t ev_pos;          /* word where the record returned last starts */
	uint32_t ev_ref_ts20;     /* reference ts20 before that record */
	uint64_t ev_ref_tick;     /* ticks: reference before that record */
};

void ktrace__core_iter_init(struct ktrace_core_iter *it, const struct ktrace_snap *snap,
                            uint32_t core, struct ktrace_dec_warnings *warn);
/* 1: *ev filled; 0: end of this core's records. */
int ktrace__core_iter_next(struct ktrace_core_iter *it, struct ktrace_dec_event *ev);
/* Restart at a record returned earlier: blk = the iterator's blk - 1 then,
 * pos = ev_pos, ref_* = ev_ref_*, slot and seg = the event's. */
void ktrace__core_iter_seek(struct ktrace_core_iter *it, uint32_t blk, uint32_t pos,
                            uint64_t ref_tick, uint32_t ref_ts20, uint32_t slot, uint32_t seg);
/* Tick of a block's BLOCK_START (the block was validated by the reader). */
uint64_t ktrace__block_start_tick(const struct ktrace_snap *snap,
                                  const struct ktrace_snap_block *b);

/* ---- stage 3: decoded result -------------------------------------------- */

enum ktrace_dec_call_flags {
	KTRACE_CALL_TRUNC_BEGIN = 1u << 0, /* entry before the window: begin = window start */
	KTRACE_CALL_TRUNC_END = 1u << 1,   /* exit not in the window (or lost) */
	KTRACE_CALL_SPAN = 1u << 2,        /* a ktrace_span_begin/end pair */
	KTRACE_CALL_EXIT_LOST = 1u << 3,   /* closed by an outer frame's exit */
};

enum ktrace_dec_func_kind {
	KTRACE_FUNC_ADDR = 0,     /* a code address (from FUNCS or *_ADDR records) */
	KTRACE_FUNC_SPAN = 1,     /* a span name */
	KTRACE_FUNC_UNKNOWN_ID = 2, /* a compact id FUNCS did not list */
};

struct ktrace_dec_func {
	uint64_t addr;            /* code address (KTRACE_FUNC_ADDR) */
	uint32_t id;              /* span name id, or the unknown compact id */
	uint32_t kind;            /* enum ktrace_dec_func_kind */
	const char *name;         /* resolved name (never NULL after decode) */
	const char *short_name;   /* name for timelines: long C++ names
	                             shortened (names.c); == name if short */
};

struct ktrace_dec_thread {
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

struct ktrace_dec_call {
	uint64_t begin;           /* ticks */
	uint64_t end;             /* ticks */
	uint64_t self;            /* ticks: end - begin - children */
	uint32_t func;            /* index in ktrace_dec.funcs */
	uint32_t thread;          /* index in ktrace_dec.threads */
	uint32_t parent;          /* call index, or KTRACE_DEC_NONE */
	uint32_t depth;           /* 0 = outermost known frame of the thread */
	uint32_t core;            /* core index of the entry (or exit if truncated) */
	uint32_t flags;           /* enum ktrace_dec_call_flags */
};

enum ktrace_dec_req_flags {
	KTRACE_REQ_TRUNC_BEGIN = 1u << 0,
	KTRACE_REQ_TRUNC_END = 1u << 1,
	KTRACE_REQ_TRIGGER = 1u << 2,     /* the request that fired this snapshot */
};

struct ktrace_dec_request {
	uint64_t begin;           /* ticks */
	uint64_t end;             /* ticks */
	uint64_t id;              /* request id from the records */
	uint32_t kind;            /* name id of the kind */
	uint32_t thread;          /* thread index (of the begin; of the end if truncated) */
	uint32_t flags;           /* enum ktrace_dec_req_flags */
	uint32_t core;            /* core index of the begin */
};

struct ktrace_dec_mark {
	uint64_t tick;            /* ticks */
	uint64_t value;           /* ktrace_mark() value */
	uint32_t name;            /* name id */
	uint32_t thread;          /* thread index */
	uint32_t core;            /* core index */
};

/* A run of consecutive records of one thread on one core. */
struct ktrace_dec_run {
	uint64_t begin;           /* ticks: first record */
	uint64_t end;             /* ticks: last record */
	uint64_t events;
	uint32_t core;            /* core index */
	uint32_t thread;          /* thread index */
};

struct ktrace_dec_core_stats {
	uint64_t first_tick;      /* ticks: oldest surviving record (or block start) */
	uint64_t last_tick;       /* ticks: newest record */
	uint64_t events;          /* records decoded in the window */
	uint64_t dropped;         /* records before the complete window (not --all) */
	uint64_t dropped_after;   /* records after it (copied later than another core) */
	uint32_t damaged_tails;   /* blocks whose tail did not parse */
	int has_data;
};

struct ktrace_dec_opts {
	int all;                  /* keep data before the complete window */
	int no_symbols;           /* never open ELF files (fuzzing) */
	const char *sysroot;      /* prefix for module paths, or NULL */
	int raw_names;            /* --no-demangle: keep C++ names mangled */
};

struct ktrace_dec {
	char *file;               /* name for messages */
	void *map;                /* owned file mapping or copy, or NULL */
	size_t map_len;           /* bytes */
	int map_is_mmap;
	struct ktrace_snap snap;
	struct ktrace_dec_opts opts;
	uint32_t shift;           /* info.tsc_shift */
	uint64_t tsc_hz;          /* info.tsc_hz */
	uint64_t window_start;    /* ticks: complete window start (or data start, --all) */
	uint64_t window_end;      /* ticks */
	uint64_t data_start;      /* ticks: oldest record of any core */
	int window_limited;       /* some core wrapped: window_start > data_start */
	uint64_t events;          /* records decoded in the window */
	uint64_t dropped;         /* records before the window */
	uint64_t window_cut;      /* ticks: the earliest CORES copy_tsc; later records
	                             may be missing on some core, so they are dropped
	                             (UINT64_MAX: no cut, or --all) */
	uint64_t dropped_after;   /* records after window_cut */
	struct ktrace_dec_func *funcs;     uint32_t nfuncs;
	struct ktrace_dec_thread *threads; uint32_t nthreads;
	struct ktrace_dec_call *calls;     uint32_t ncalls;  /* grouped by thread, in entry
	                                     order within one (a TRUNC_BEGIN call is
	                                     added at its exit); parent < child except
	                                     for TRUNC_BEGIN parents */
	struct ktrace_dec_request *reqs;   uint32_t nreqs;   /* in begin order */
	struct ktrace_dec_mark *marks;     uint32_t nmarks;
	struct ktrace_dec_run *runs;       uint32_t nruns;
	struct ktrace_dec_core_stats *core_stats; /* [snap.ncores] */
	uint32_t trigger_req;     /* request index of the trigger, or KTRACE_DEC_NONE */
	uint64_t unmatched_exits; /* exits with no entry (counted as truncated-begin) */
	uint64_t lost_exits;      /* frames closed by an outer exit */
	/* Scheduling (sched.c, after stage 3; nothing when not recorded). */
	struct ktrace_dec_offcpu *offcpu;  uint32_t noffcpu;  /* by thread, then begin */
	uint32_t *offcpu_first;   /* [nthreads + 1]: thread t's are offcpu[first[t]..first[t+1]) */
	struct ktrace_dec_oncpu *oncpu;    uint32_t noncpu;   /* by core, then begin */
	int sched;                /* switch records decoded (status RECORDED) */
	uint64_t sched_from;      /* ticks: switch data complete on every core from here */
	uint64_t sched_to;        /* ticks: ... up to here (the last drain) */
	char **strs;              /* strings made up by the decoder (owned) */
	uint32_t nstrs, capstrs;
	void *symcache;           /* symbols.c */
	int warned_demangle;      /* symbols.c: "names stay mangled" said */
};

/* Run stages 1-5 on a file (read into memory) or a caller's buffer (not
 * copied). */
int ktrace__dec_open_file(const char *path, const struct ktrace_dec_opts *opts,
                          struct ktrace_dec **out, struct ktrace_dec_error *err);
int ktrace__dec_open_buffer(const void *buf, size_t len, const char *name,
                            const struct ktrace_dec_opts *opts, struct ktrace_dec **out,
                            struct ktrace_dec_error *err);
void ktrace__dec_free(struct ktrace_dec *d);
/* open() a path for reading without blocking (O_NONBLOCK, cleared after
 * fstat fills *st); the caller checks the file type.  fd or -1 (errno). */
struct stat;
int ktrace__dec_open_path(const char *path, struct stat *st);
/* pread() n bytes at off into buf, in chunks (ktrace__dec_read_hook runs
 * before each; total is for the hook).  Returns the bytes read: fewer than
 * n with errno set on an error, with errno 0 at end of file. */
uint64_t ktrace__dec_pread(int fd, void *buf, uint64_t off, uint64_t n, const char *path,
                           uint64_t total);

/* Stage 3 alone, on a read + ordered snapshot already in d->snap. */
int ktrace__dec_build(struct ktrace_dec *d, struct ktrace_dec_error *err);

/* ---- stage 3b: scheduling (sched.c) ------------------------------------- */

enum ktrace_dec_off_why { KTRACE_OFF_BLOCKED = 0, KTRACE_OFF_PREEMPTED = 1 };

/* A thread off the cpu: from leaving it to getting one again. */
struct ktrace_dec_offcpu {
	uint64_t begin;           /* ticks: switch out */
	uint64_t end;             /* ticks: switch in (or sched_to if none) */
	uint32_t thread;          /* thread index */
	uint32_t why;             /* enum ktrace_dec_off_why */
};

/* One of the process's threads on a core. */
struct ktrace_dec_oncpu {
	uint64_t begin;           /* ticks: switch in (or sched_from) */
	uint64_t end;             /* ticks: switch out (or sched_to) */
	uint32_t thread;          /* thread index */
	uint32_t cpu;             /* cpu number */
};

/* Turn the SCHED section into offcpu/oncpu intervals (threads seen only
 * there are added to d->threads); 0 or KTRACE_DEC_ENOMEM. */
int ktrace__dec_sched(struct ktrace_dec *d);
/* Off-CPU ticks of a thread inside [b, e): out[KTRACE_OFF_BLOCKED],
 * out[KTRACE_OFF_PREEMPTED]. */
void ktrace__dec_offcpu_in(const struct ktrace_dec *d, uint32_t thread, uint64_t b, uint64_t e,
                           uint64_t out[2]);
/* "scheduling: ..." line for the summary (status, switches, losses, why not). */
void ktrace__dec_sched_status(const struct ktrace_dec *d, char *buf, size_t len);
/* "<d> on-CPU, <d> blocked, <d> preempted" for wall ticks and off[2] ticks. */
void ktrace__dec_fmt_split(const struct ktrace_dec *d, uint64_t wall, const uint64_t off[2],
                           char *buf, size_t len);

/* ---- stage 4: time ------------------------------------------------------ */

/* Ticks (a difference) -> ns, saturating. */
uint64_t ktrace__dec_ticks_ns(const struct ktrace_dec *d, uint64_t ticks);
/* Absolute tick -> CLOCK_REALTIME ns since the epoch. */
int64_t ktrace__dec_wall_ns(const struct ktrace_dec *d, uint64_t tick);
/* Same on a snapshot alone, on a full (unshifted) counter value. */
int64_t ktrace__snap_wall_ns(const struct ktrace_snap *snap, uint64_t tsc);
/* "HH:MM:SS.nnnnnnnnn" (UTC) into buf[32]; "YYYY-MM-DD " prefixed if date. */
void ktrace__fmt_wall(int64_t ns, int date, char *buf, size_t len);
/* "12.345 ms" style, adaptive unit, into buf. */
void ktrace__fmt_dur(uint64_t ns, char *buf, size_t len);

/* ---- stage 5: symbols --------------------------------------------------- */

/* Fill d->funcs[].name. Never fails: unresolvable addresses get hex names. */
void ktrace__dec_symbolize(struct ktrace_dec *d);
void ktrace__symcache_free(void *cache);

/* One ELF file's function symbols, for tests and tools. */
struct ktrace_elf;
int ktrace__elf_open(const char *path, struct ktrace_elf **out, struct ktrace_dec_error *err);
/* Parse an ELF image in memory (copied). */
int ktrace__elf_parse(const void *buf, size_t len, struct ktrace_elf **out,
                      struct ktrace_dec_error *err);
/* Function symbol containing the ELF virtual address, or NULL. */
const char *ktrace__elf_lookup(const struct ktrace_elf *elf, uint64_t vaddr, uint64_t *sym_start);
/* File offset -> ELF virtual address via PT_LOAD; 0 on success. */
int ktrace__elf_offset_to_vaddr(const struct ktrace_elf *elf, uint64_t off, uint64_t *vaddr);
/* Function symbol i (in address order), or NULL past the last one. */
const char *ktrace__elf_sym_name(const struct ktrace_elf *elf, uint32_t i);
void ktrace__elf_free(struct ktrace_elf *elf);

/* ---- helpers shared by the sinks ---------------------------------------- */

const char *ktrace__dec_func_name(const struct ktrace_dec *d, uint32_t func);
/* The timeline form of a function's name (names.c). */
const char *ktrace__dec_func_short(const struct ktrace_dec *d, uint32_t func);

/* ---- C++ names (names.c) ------------------------------------------------ */

#define KTRACE_SHORT_NAME_MAX 80  /* bytes a timeline name keeps whole */
int ktrace__name_is_mangled(const char *name);
/* Demangled copy (free() it) of an Itanium C++ name; NULL if name is not
 * one, does not demangle, or no C++ runtime (libstdc++) is installed. */
char *ktrace__demangle(const char *name);
int ktrace__demangler_missing(void);
/* name, or its short form written into buf. */
const char *ktrace__name_shorten(const char *name, char *buf, size_t cap);
/* Name id -> string; unknown ids get "name#N" (static buffer per call site: copy it). */
const char *ktrace__dec_name(const struct ktrace_dec *d, uint32_t id, char *buf, size_t len);
/* "name/tid" label of a thread into buf. */
const char *ktrace__dec_thread_label(const struct ktrace_dec *d, uint32_t thread,
                                     char *buf, size_t len);
/* Decoder-owned string copy (lives as long as d). */
const char *ktrace__dec_strdup(struct ktrace_dec *d, const char *s);

/* Small hash map u64 -> u32 (open addressing), shared by the stages. */
struct ktrace_umap {
	uint64_t *keys;
	uint32_t *vals;           /* KTRACE_DEC_NONE = empty */
	uint32_t cap;             /* power of two */
	uint32_t n;
};
uint32_t ktrace__umap_get(const struct ktrace_umap *m, uint64_t k); /* or KTRACE_DEC_NONE */
int ktrace__umap_put(struct ktrace_umap *m, uint64_t k, uint32_t v); /* 0 or -1 (no memory) */
void ktrace__umap_free(struct ktrace_umap *m);

/* ---- stage 6: sinks ----------------------------------------------------- */

struct ktrace_out_opts {
	int have_tid;             /* --thread given */
	int32_t tid;              /* --thread TID */
	uint64_t limit;           /* --limit N (0 = no limit) */
	int quiet;                /* -q */
};

void ktrace__out_summary(FILE *f, const struct ktrace_dec *d);
void ktrace__out_text(FILE *f, const struct ktrace_dec *d, const struct ktrace_out_opts *o);
/* Per-core occupancy from the context switches (part of text). */
void ktrace__out_text_cores(FILE *f, const struct ktrace_dec *d, const struct ktrace_out_opts *o);
void ktrace__out_stats(FILE *f, const struct ktrace_dec *d, const struct ktrace_out_opts *o);
void ktrace__out_explain(FILE *f, const struct ktrace_dec *d, const struct ktrace_out_opts *o);
/* Folded stacks: frames deeper than this are cut, "[up_to_N_frames_cut]". */
#define KTRACE_DEC_FOLD_DEPTH 512u
void ktrace__out_folded(FILE *f, const struct ktrace_dec *d, const struct ktrace_out_opts *o);

/* Chrome JSON: begin, one call per decoded file (distinct pid_base each), end. */
struct ktrace_chrome {
	FILE *f;
	int first;                /* no event written yet */
	int64_t base_wall_ns;     /* ns since epoch: ts 0 of the trace */
	int have_base;
};
void ktrace__out_chrome_begin(struct ktrace_chrome *c, FILE *f, int64_t base_wall_ns);
void ktrace__out_chrome_file(struct ktrace_chrome *c, const struct ktrace_dec *d,
                             int64_t pid, const struct ktrace_out_opts *o);
void ktrace__out_chrome_end(struct ktrace_chrome *c);

/* HTML timeline (out-html.c): one self-contained page for all files.  A page
 * holds at most KTRACE_HTML_MAX_CALLS calls (o->limit lowers it); beyond,
 * nothing is written, stderr says how to cut the window, and -1 returns. */
#define KTRACE_HTML_MAX_CALLS 20000000ull
int ktrace__out_html(FILE *f, struct ktrace_dec **decs, int n, const struct ktrace_out_opts *o);
/* Calls the page would hold (--thread applied). */
uint64_t ktrace__html_calls(struct ktrace_dec *const *decs, int n,
                            const struct ktrace_out_opts *o);

/* Perfetto protobuf trace of all decoded files (NULL entries skipped), one
 * process group per process; several snapshots of one process merged
 * (out-perfetto.c).  0 or KTRACE_DEC_ENOMEM; write errors show in ferror(f). */
int ktrace__out_perfetto(FILE *f, struct ktrace_dec *const *decs, uint32_t n,
                         const struct ktrace_out_opts *o);

/* The window budget (out-budget.c): the summary's lines, the note the
 * other sinks print ("self time includes muted calls: ..."), whether a
 * function is muted (index in snap.muted, or -1), and --format exclude. */
void ktrace__out_budget(FILE *f, const struct ktrace_dec *d);
void ktrace__out_muted_note(FILE *f, const struct ktrace_dec *d, const char *prefix);
const char *ktrace__dec_muted_list(const struct ktrace_dec *d, char *buf, size_t len);
int ktrace__dec_muted(const struct ktrace_dec *d, uint32_t func);
/* One flag line for all files (NULL entries skipped), notes on stderr. */
void ktrace__out_exclude(FILE *f, struct ktrace_dec *const *decs, int n);

/* Statistics per function (shared by stats and explain). */
struct ktrace_func_stats {
	uint32_t func;
	uint64_t calls;
	uint64_t total;           /* ns, inclusive (calls nested in themselves counted once) */
	uint64_t self;            /* ns */
	uint64_t p50, p99, max;   /* ns, of inclusive durations */
	double mean;              /* ns */
};
/* Returns an array sorted by self time descending (caller frees), or NULL. */
struct ktrace_func_stats *ktrace__func_stats(const struct ktrace_dec *d, int32_t tid,
                                             int have_tid, uint32_t *n);

/* Explain: the chosen request (trigger, else slowest) or KTRACE_DEC_NONE. */
uint32_t ktrace__explain_pick(const struct ktrace_dec *d, uint32_t *median);

#endif /* KTRACE_DECODER_H */
