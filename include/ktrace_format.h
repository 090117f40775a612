/*
 * ktrace_format.h - byte layout of ktrace records and snapshot files.
 *
 * This header is the contract between the recording library (lib/) and any
 * reader (decoder/, or a third party's).  It depends on <stdint.h> only.
 * It is versioned and append-only: fields are never moved or reused; a new
 * field goes into reserved space or a new section type, and readers skip
 * section types they do not know.
 *
 * All multi-byte values are little-endian (the only byte order the library
 * writes; the file header's byte_order field lets a reader reject anything
 * else with a clear message).
 *
 * ------------------------------------------------------------------------
 * 1. Records
 * ------------------------------------------------------------------------
 *
 * One event is one 32-bit word:
 *
 *     bits 31..12  ts20   (TSC >> tsc_shift) & 0xFFFFF
 *     bits 11..0   event  12-bit event number
 *
 * Event numbers:
 *
 *     0x000            PAD.  Filler; a reader skips one word.  Its ts20
 *                      field means nothing (the writer stores 0) and does
 *                      not move the time reference.  The writer pads only
 *                      a block's tail, so a PAD word is followed by PAD
 *                      words up to the block end.
 *     0x001 .. 0x01F   Extended record header: the event number N is the
 *                      number of payload words that follow (1..31).  The
 *                      first payload word holds the extended type in bits
 *                      7..0 and a 24-bit argument in bits 31..8.  A reader
 *                      that does not know the type skips the N words.
 *     0x020 .. 0x7FF   Function entry, compact id = event - 0x020.
 *     0x820 .. 0xFFF   Function exit,  compact id = event - 0x820.
 *     0x800 .. 0x81F   Reserved (never written).
 *
 * Compact function ids run from 0 to KTRACE_FUNC_ID_COUNT - 1 and are mapped
 * to addresses by the FUNCS section.  A function that gets no compact id
 * (the space is used up) is recorded with FUNC_ENTER_ADDR / FUNC_EXIT_ADDR
 * extended records that carry the full address: nothing is dropped.
 *
 * Time within a block.  Every block starts with a BLOCK_START record that
 * carries the full 64-bit TSC.  After it, a reader rebuilds each record's
 * full tick (TSC >> tsc_shift) from the previous one:
 *
 *     d = (ts20 - prev_ts20) mod 2^20
 *     if d < 2^19: tick = prev_tick + d              (forward)
 *     else:        tick = prev_tick - (2^20 - d)     (small backward step)
 *
 * The writer guarantees that no record is more than KTRACE_TS_FORWARD_MAX
 * ticks after the previous one in its block (it inserts a TSC record first
 * when more time has passed, e.g. after a core was idle for minutes), so
 * the rule above is never ambiguous.  Backward steps are legal: clocks of
 * different cores may differ by a few ticks when a thread migrates, and a
 * fallback clock may store a record late.  TSC records reset the reference.
 *
 * Thread attribution.  Within one core's stream, every record belongs to
 * the thread whose slot was named last, by BLOCK_START or THREAD.  The
 * writer makes the ownership check and the space reservation one atomic
 * step, so a record can never land under another thread's name.  Every
 * BLOCK_START is followed by a THREAD record carrying the owner's segment
 * number, and so is every switch of thread or core (see KTRACE_EXT_THREAD):
 * one thread's records across cores are ordered by segment, not by time.
 *
 * ------------------------------------------------------------------------
 * 2. Snapshot file
 * ------------------------------------------------------------------------
 *
 *     offset 0   struct ktrace_file_header          (64 bytes)
 *     ...        section payloads, each 8-byte aligned
 *     table      section_count x struct ktrace_section (32 bytes each)
 *
 * Each section's bytes are covered by a CRC-32C (Castagnoli, reflected,
 * init 0xFFFFFFFF, final xor 0xFFFFFFFF; crc("123456789") = 0xE3069283).
 * The header carries its own CRC (computed with header_crc set to 0).
 * BLOCKS entries each carry a CRC of their words so one damaged block is
 * skipped and reported while the rest still decodes.
 *
 * A file is written under a temporary name (or unnamed) and linked or
 * renamed into place only when complete: a file that exists is whole.
 */
#ifndef KTRACE_FORMAT_H
#define KTRACE_FORMAT_H

#include <stdint.h>

#define KTRACE_FORMAT_VERSION 2u   /* 2: held runs, compact requests, REQUESTS */

/* ---- records ----------------------------------------------------------- */

#define KTRACE_TS_BITS        20u
#define KTRACE_TS_MASK        0xFFFFFu          /* ticks */
#define KTRACE_TS_HALF        (1u << 19)        /* ticks: forward/backward split */
#define KTRACE_TS_FORWARD_MAX (1u << 18)        /* ticks: writer's bound per step */
#define KTRACE_EVENT_BITS     12u
#define KTRACE_EVENT_MASK     0xFFFu

#define KTRACE_EV_PAD         0x000u
#define KTRACE_EV_EXT_MAX     0x01Fu            /* max payload words */
#define KTRACE_EV_ENTER_BASE  0x020u
#define KTRACE_EV_EXIT_BASE   0x820u
#define KTRACE_EV_EXIT_FLAG   0x800u            /* exit = entry | this */
#define KTRACE_FUNC_ID_COUNT  2016u             /* compact ids 0..2015 */

#define KTRACE_REC(ts20, ev) \
	((uint32_t)(((uint32_t)(ts20) & KTRACE_TS_MASK) << KTRACE_EVENT_BITS) | \
	 ((uint32_t)(ev) & KTRACE_EVENT_MASK))
#define KTRACE_REC_TS(w)     ((uint32_t)(w) >> KTRACE_EVENT_BITS)
#define KTRACE_REC_EV(w)     ((uint32_t)(w) & KTRACE_EVENT_MASK)
#define KTRACE_EV_IS_EXT(ev) ((ev) >= 1u && (ev) <= KTRACE_EV_EXT_MAX)
#define KTRACE_EV_IS_ENTER(ev) \
	((ev) >= KTRACE_EV_ENTER_BASE && (ev) < KTRACE_EV_ENTER_BASE + KTRACE_FUNC_ID_COUNT)
#define KTRACE_EV_IS_EXIT(ev) \
	((ev) >= KTRACE_EV_EXIT_BASE && (ev) < KTRACE_EV_EXIT_BASE + KTRACE_FUNC_ID_COUNT)

/* First payload word of an extended record. */
#define KTRACE_EXT_WORD(type, arg24) \
	((uint32_t)(type) | ((uint32_t)(arg24) << 8))
#define KTRACE_EXT_TYPE(w)   ((uint32_t)(w) & 0xFFu)
#define KTRACE_EXT_ARG(w)    ((uint32_t)(w) >> 8)
#define KTRACE_ARG24_MAX     0xFFFFFFu

/*
 * Extended record types.  "words" is the payload length N including the
 * type word; 64-bit values are stored low word first.
 */
enum ktrace_ext_type {
	/* arg = thread slot; S (u32 word counter at block start), tsc lo, tsc hi.
	 * N = 4.  Always the first record of a block. */
	KTRACE_EXT_BLOCK_START = 1,
	/* arg = 0; tsc lo, tsc hi.  N = 3.  Resets the time reference. */
	KTRACE_EXT_TSC = 2,
	/* arg = thread slot; seq.  N = 2.  Following records belong to that
	 * slot.  seq numbers the thread's segments: it grows by one each time
	 * the thread starts writing on a core (another thread owned the
	 * core's stream, or the thread migrated), and is repeated after every
	 * BLOCK_START.  A reader orders one thread's records by (seq, position
	 * in its core's stream): exact even when a migrating thread's records
	 * on two cores share a tick or the cores' clocks differ slightly.
	 * Writers of N = 1 (no seq) leave the order to timestamps. */
	KTRACE_EXT_THREAD = 3,
	/* arg = 0; addr lo, addr hi.  N = 3.  Entry/exit of a function that has
	 * no compact id. */
	KTRACE_EXT_FUNC_ENTER_ADDR = 4,
	KTRACE_EXT_FUNC_EXIT_ADDR = 5,
	/* arg = name id; value lo, value hi.  N = 3.  ktrace_mark(). */
	KTRACE_EXT_MARK = 6,
	/* arg = name id.  N = 1.  ktrace_span_begin() / ktrace_span_end(). */
	KTRACE_EXT_SPAN_BEGIN = 7,
	KTRACE_EXT_SPAN_END = 8,
	/* arg = kind name id; request id lo, request id hi.  N = 3. */
	KTRACE_EXT_REQ_BEGIN = 9,
	KTRACE_EXT_REQ_END = 10,
	/* arg = compact function id; epoch, why (enum ktrace_mute_why).  N = 3.
	 * The window budget muted the function at this record's time: from
	 * here on, each thread skips its calls once it adopts the epoch (at
	 * most one decision interval later); calls it entered before are
	 * still closed by their recorded exits.  Written by the writer
	 * thread.  The BUDGET section lists the same decisions. */
	KTRACE_EXT_MUTE = 11,
	/*
	 * Requests (format 2).  A request's records are held aside on its
	 * thread while it runs and reach the ring only when it ends and is
	 * kept (slow, sampled, ...): see "Held runs" below.  A request that
	 * is not kept leaves no record, only a count in the REQUESTS section.
	 *
	 * HELD: arg = thread slot; seg, P, (h << 8) | chunk, tsc lo, tsc hi.
	 * N = 6.  The records that follow, up to the next BLOCK_START, THREAD
	 * or HELD record, are thread <slot>'s, held aside while it ran a
	 * request and written here when it was kept.  Their time chain starts
	 * at tsc (as after a TSC record).  They ran on some core, not
	 * necessarily this one (a reader gives them no core).  seg and P
	 * place them in the thread's program order: after its records of
	 * segments < seg and of segment seg at stream positions (the core's
	 * word counter, as BLOCK_START's S counts) < P; before its records of
	 * segment seg at positions >= P and of later segments.  Held runs
	 * with equal (seg, P) are ordered by h (the thread's 24-bit hold
	 * number, compared modulo 2^24: consecutive holds differ by a small
	 * amount), and the chunks of one run (a run longer than a block is
	 * split, each chunk with its own HELD header) by chunk (0, 1, ...).
	 */
	KTRACE_EXT_HELD = 12,
	/* arg = kind name id; number.  N = 2.  A request begins on this
	 * thread.  number counts the kind's requests in the process from 1
	 * (a person says "get #1234"). */
	KTRACE_EXT_REQ_OPEN = 13,
	/* arg = kind name id; number, user id lo, user id hi.  N = 4.  As
	 * REQ_OPEN, with the program's own 64-bit id (ktrace_request_begin_id). */
	KTRACE_EXT_REQ_OPEN_ID = 14,
	/* arg = enum ktrace_req_keep flags.  N = 1.  The innermost request
	 * open on this thread ends here. */
	KTRACE_EXT_REQ_CLOSE = 15,
	/* arg = enum ktrace_req_keep flags; kind name id, number, slot of the
	 * thread that began it.  N = 4.  A request ends that was not the
	 * innermost one open on this thread (begun on another thread, or
	 * ended out of order). */
	KTRACE_EXT_REQ_CLOSE_ANY = 16,
};

/*
 * Held runs.  While a thread runs a request (between the outermost
 * ktrace_request_begin and its end on that thread), every record it makes
 * goes to a per-thread hold buffer instead of the ring, with the same
 * record encoding and time rule (a TSC record whenever more than
 * KTRACE_TS_FORWARD_MAX ticks passed).  At the end:
 *   - kept (enum ktrace_req_keep): the buffer is copied into the ring of
 *     the core the thread then runs on, as one or more HELD chunks;
 *   - not kept: dropped.  Only calls that began before the request and
 *     end inside it, or begin inside it and end after it, are kept (as a
 *     HELD run without REQ_OPEN/REQ_CLOSE), so that every thread's
 *     nesting stays exact;
 *   - larger than the buffer: the run is copied when the buffer fills
 *     (SPILLED) and the request's later records go straight to the ring.
 */
enum ktrace_req_keep {
	KTRACE_REQ_SLOW = 1u << 0,      /* slower than its kind's keep threshold */
	KTRACE_REQ_SAMPLED = 1u << 1,   /* chosen at its begin as a typical sample */
	KTRACE_REQ_NESTED = 1u << 2,    /* kept with another request of its held run */
	KTRACE_REQ_SPILLED = 1u << 3,   /* too large to hold: recorded as it ran */
	KTRACE_REQ_DIRECT = 1u << 4,    /* not held at all (KTRACE_KEEP=all, no hold
	                                   buffer, or ended on another thread) */
	KTRACE_REQ_TRIGGER = 1u << 5,   /* fired a trigger */
	KTRACE_REQ_OVERLAP = 1u << 6,   /* kept because it overlapped a slow request
	                                   of another thread (written a while after
	                                   its end) */
	KTRACE_REQ_WARMUP = 1u << 7,    /* kept because its kind had no threshold yet
	                                   (no absolute one, and fewer requests than
	                                   a percentile needs): nothing to judge by */
	KTRACE_REQ_AFTER = 1u << 8,     /* kept because it ended between a trigger
	                                   and the copy of its window (the
	                                   aftermath the post-trigger delay waits
	                                   for) */
};

/* Words in a block (4 KiB).  Blocks are aligned in the ring to this size. */
#define KTRACE_BLOCK_WORDS   1024u
#define KTRACE_BLOCK_SHIFT   10u

/* ---- file -------------------------------------------------------------- */

#define KTRACE_FILE_MAGIC      "KTRACE\r\n"     /* 8 bytes, no NUL */
#define KTRACE_BYTE_ORDER_MARK 0x01020304u

struct ktrace_file_header {
	char     magic[8];             /* KTRACE_FILE_MAGIC */
	uint32_t byte_order;           /* KTRACE_BYTE_ORDER_MARK as the writer stored it */
	uint16_t version;              /* KTRACE_FORMAT_VERSION */
	uint16_t header_size;          /* bytes: sizeof(struct ktrace_file_header) */
	uint32_t section_count;        /* entries in the section table */
	uint32_t section_entry_size;   /* bytes: sizeof(struct ktrace_section) */
	uint64_t section_table_offset; /* bytes from file start */
	uint64_t file_size;            /* bytes: whole file, for truncation checks */
	uint32_t header_crc;           /* CRC-32C of this header with this field 0 */
	uint32_t flags;                /* 0 */
	uint8_t  reserved[16];         /* 0 */
};
_Static_assert(sizeof(struct ktrace_file_header) == 64, "file header is 64 bytes");

struct ktrace_section {
	uint32_t type;                 /* enum ktrace_section_type */
	uint32_t count;                /* entries in the section (type-specific) */
	uint64_t offset;               /* bytes from file start, 8-byte aligned */
	uint64_t size;                 /* bytes */
	uint32_t crc;                  /* CRC-32C of the section's bytes */
	uint32_t flags;                /* 0 */
};
_Static_assert(sizeof(struct ktrace_section) == 32, "section entry is 32 bytes");

enum ktrace_section_type {
	KTRACE_SEC_INFO = 1,     /* one struct ktrace_info_rec */
	KTRACE_SEC_ANCHORS = 2,  /* count x struct ktrace_anchor_rec, oldest first */
	KTRACE_SEC_FUNCS = 3,    /* count x struct ktrace_func_rec */
	KTRACE_SEC_THREADS = 4,  /* count x struct ktrace_thread_rec */
	KTRACE_SEC_NAMES = 5,    /* count x (struct ktrace_name_rec + bytes, padded to 4) */
	KTRACE_SEC_MODULES = 6,  /* count x (struct ktrace_module_rec + path, padded to 8) */
	KTRACE_SEC_LOSS = 7,     /* one struct ktrace_loss_rec */
	KTRACE_SEC_CORES = 8,    /* count x struct ktrace_core_rec */
	KTRACE_SEC_BLOCKS = 9,   /* count x (struct ktrace_block_rec + nwords x u32) */
	KTRACE_SEC_TRIGGER = 10, /* one struct ktrace_trigger_rec (trigger snapshots only) */
	/* one struct ktrace_budget_rec, then budget.ncores x struct
	 * ktrace_budget_core_rec, then count x struct ktrace_muted_rec */
	KTRACE_SEC_BUDGET = 11,
	/* struct ktrace_sched_hdr, then hdr.ncores x struct ktrace_sched_core,
	 * then count x struct ktrace_sched_rec (each core's oldest first), then
	 * hdr.nnames x struct ktrace_sched_name.  Written by every snapshot,
	 * also when scheduling was not recorded (then count = 0 and the
	 * header says why). */
	KTRACE_SEC_SCHED = 12,
	/* struct ktrace_req_hdr, then hdr.nkinds x (struct ktrace_req_kind_rec,
	 * then kind.nslices x (struct ktrace_req_slice_rec, then
	 * slice.nbuckets x struct ktrace_req_bucket)).  Format 2. */
	KTRACE_SEC_REQUESTS = 13,
	/* count x struct ktrace_buildid_rec: what identifies the file of
	 * MODULES records (a reader compares it with the file it opens).
	 * Absent in older files. */
	KTRACE_SEC_BUILDIDS = 14,
	/* one struct ktrace_lean_rec: what the lean mode patched (files of
	 * processes where a lean hook ran).  Absent in older files. */
	KTRACE_SEC_LEAN = 15,
};

enum ktrace_clock_source {
	KTRACE_CLOCK_TSC = 1,        /* invariant x86 TSC */
	KTRACE_CLOCK_MONOTONIC = 2,  /* fallback: CLOCK_MONOTONIC ns as "TSC" */
	KTRACE_CLOCK_CNTVCT = 3,     /* aarch64 virtual counter (cntvct_el0) */
};

enum ktrace_info_flags {
	KTRACE_INFO_RSEQ = 1u << 0,  /* per-core appends used restartable sequences */
	KTRACE_INFO_FILTER = 1u << 1,/* the window budget's filter was on (KTRACE_FILTER=auto) */
	KTRACE_INFO_SCHED = 1u << 2, /* context switches recorded (SCHED section) */
	KTRACE_INFO_SECURE = 1u << 3, /* secure-execution process (setuid, setgid,
	                                 file capabilities): no setting was taken
	                                 from the environment */
	KTRACE_INFO_SIGNAL_TAKEN = 1u << 4, /* the program installed its own handler
	                                       for the snapshot signal (signo) over
	                                       ktrace's: that signal writes nothing */
	KTRACE_INFO_LEAN = 1u << 5,  /* lean-mode functions (-p -mfentry) were
	                                traced: muted ones run patched-out nops */
	KTRACE_INFO_LEAN_NO_PATCH = 1u << 6, /* lean mode could not make code
	                                        writable (W^X policy): nothing
	                                        more was patched, muted calls
	                                        still call the hooks */
};

struct ktrace_info_rec {
	uint64_t tsc_hz;               /* counter ticks per second (unshifted) */
	uint64_t snapshot_tsc;         /* counter when the window was copied */
	int64_t  snapshot_realtime_ns; /* CLOCK_REALTIME at snapshot_tsc, ns since epoch */
	uint64_t start_tsc;            /* counter when tracing started in this process */
	uint32_t tsc_shift;            /* record ts20 = counter >> tsc_shift */
	uint32_t clock_source;         /* enum ktrace_clock_source */
	uint32_t pid;                  /* process id */
	uint32_t ncpus;                /* per-core rings (configured CPUs) */
	uint32_t block_words;          /* KTRACE_BLOCK_WORDS */
	uint32_t func_id_count;        /* KTRACE_FUNC_ID_COUNT */
	uint32_t flags;                /* enum ktrace_info_flags */
	uint32_t snapshot_seq;         /* 1-based number of this snapshot in the process */
	uint64_t ring_bytes_per_core;  /* bytes */
	char     reason[128];          /* NUL-terminated: "SIGUSR2", API reason, "trigger" */
	char     exe[256];             /* NUL-terminated path of /proc/self/exe */
	char     hostname[64];         /* NUL-terminated */
	uint64_t prev_write_end_tsc;   /* counter when this process's previous snapshot
	                                  file was complete, 0 if none; a request that
	                                  began before it never fires a trigger (the
	                                  write competed with it for the cpu) */
	/* Taken from reserved (older files have 0 here: unknown). */
	int32_t  signo;                /* snapshot signal in force (KTRACE_SIGNAL),
	                                  0 = none or unknown */
	uint32_t threads_omitted;      /* threads left out of THREADS: they exited
	                                  before the oldest block in the file */
	uint8_t  reserved[48];         /* 0 */
};
_Static_assert(sizeof(struct ktrace_info_rec) == 584, "info record size is pinned");
_Static_assert(__builtin_offsetof(struct ktrace_info_rec, signo) == 528, "info signo offset is pinned");
_Static_assert(__builtin_offsetof(struct ktrace_info_rec, threads_omitted) == 532,
               "info threads_omitted offset is pinned");

struct ktrace_anchor_rec {
	uint64_t tsc;                  /* counter value */
	int64_t  realtime_ns;          /* CLOCK_REALTIME, ns since epoch */
	int64_t  monotonic_ns;         /* CLOCK_MONOTONIC, ns */
};
_Static_assert(sizeof(struct ktrace_anchor_rec) == 24, "anchor record size is pinned");

struct ktrace_func_rec {
	uint64_t addr;                 /* code address the hook received */
	uint32_t id;                   /* compact id, or KTRACE_FUNC_NO_ID */
	uint32_t flags;                /* 0 */
};
_Static_assert(sizeof(struct ktrace_func_rec) == 16, "func record size is pinned");
#define KTRACE_FUNC_NO_ID 0xFFFFFFFFu

enum ktrace_thread_flags {
	KTRACE_THREAD_EXITED = 1u << 0,
	KTRACE_THREAD_MAIN = 1u << 1,
};

struct ktrace_thread_rec {
	uint32_t slot;                 /* 1-based id used in records (0 = none) */
	int32_t  tid;                  /* kernel thread id */
	uint64_t first_tsc;            /* counter at the thread's first event */
	uint64_t exit_tsc;             /* counter at thread exit, 0 if still alive */
	char     name[16];             /* NUL-terminated (pthread_setname_np / comm) */
	uint32_t flags;                /* enum ktrace_thread_flags */
	uint32_t reserved;             /* 0 */
};
_Static_assert(sizeof(struct ktrace_thread_rec) == 48, "thread record size is pinned");

struct ktrace_name_rec {
	uint32_t id;                   /* name id used by MARK/SPAN/REQ records */
	uint16_t len;                  /* bytes of name that follow, no NUL */
	uint16_t kind;                 /* enum ktrace_name_kind */
};
_Static_assert(sizeof(struct ktrace_name_rec) == 8, "name record size is pinned");

enum ktrace_name_kind {
	KTRACE_NAME_MARK = 1,
	KTRACE_NAME_SPAN = 2,
	KTRACE_NAME_REQUEST = 3,
};

struct ktrace_module_rec {
	uint64_t start;                /* first mapped address (executable mapping) */
	uint64_t end;                  /* one past the last */
	uint64_t file_offset;          /* offset in the file of 'start' */
	uint32_t path_len;             /* bytes of path that follow, no NUL */
	uint32_t flags;                /* 0 */
};
_Static_assert(sizeof(struct ktrace_module_rec) == 32, "module record size is pinned");

/*
 * Build-ids (BUILDIDS section): for MODULES record number 'module' (its
 * index in that section), the GNU build-id of the object mapped there
 * (NT_GNU_BUILD_ID, read from the process's memory, so it is the running
 * code's even when the file on disk was replaced), and, as a fallback for
 * files built without one, the size and mtime of the file mapped (0 when
 * the path named another file by the time of the snapshot: flag
 * KTRACE_BUILDID_REPLACED).
 */
enum ktrace_buildid_flags {
	KTRACE_BUILDID_REPLACED = 1u << 0, /* the path names another file now (its
	                                      inode is not the one mapped) */
};

struct ktrace_buildid_rec {
	uint32_t module;               /* index of the MODULES record */
	uint32_t flags;                /* enum ktrace_buildid_flags */
	uint8_t  id_len;               /* bytes of id, 0 = no build-id known */
	uint8_t  reserved[7];          /* 0 */
	uint8_t  id[32];               /* the build-id (20 bytes for SHA-1) */
	uint64_t file_size;            /* bytes of the file mapped, 0 = unknown */
	int64_t  mtime_ns;             /* its mtime, ns since the epoch, 0 = unknown */
};
_Static_assert(sizeof(struct ktrace_buildid_rec) == 64, "build-id record size is pinned");

enum ktrace_lean_flags {
	KTRACE_LEAN_BOTH_MODES = 1u << 0, /* functions compiled with -finstrument-
	                                     functions too: recorded once, by the
	                                     lean hooks */
};

/* The lean mode's patching since start, as of the snapshot.  A site is a
 * function's entry or one of its exits (lib/lean.c). */
struct ktrace_lean_rec {
	uint64_t site_writes;          /* sites patched out or back in */
	uint64_t site_failures;        /* sites that could not be written */
	uint64_t nop_sites;            /* sites that are nops now */
	uint64_t batches;              /* patch batches */
	uint64_t batch_ns;             /* the writer thread's wall time in them */
	uint32_t funcs;                /* lean functions seen (their entry site known) */
	uint32_t funcs_out;            /* of them, entry patched out now */
	uint32_t flags;                /* enum ktrace_lean_flags */
	uint32_t reserved;             /* 0 */
};
_Static_assert(sizeof(struct ktrace_lean_rec) == 56, "lean record size is pinned");

enum ktrace_loss_cause {
	KTRACE_LOSS_OVERWRITTEN_BLOCKS = 0, /* blocks the ring reused (oldest data) */
	KTRACE_LOSS_NESTED = 1,        /* events inside the library's own slow path
	                                  (a traced signal handler interrupting it) */
	KTRACE_LOSS_NO_THREAD_SLOT = 2,/* thread table full */
	KTRACE_LOSS_NO_CPU = 3,        /* thread had no usable cpu id */
	KTRACE_LOSS_SNAPSHOT_RACE = 4, /* blocks reused while a snapshot copied them
	                                  (older writers; now 9) */
	KTRACE_LOSS_NO_NAME = 5,       /* name table full (marks, spans, kinds) */
	KTRACE_LOSS_SNAPSHOTS_SUPPRESSED = 6, /* triggers dropped by the rate limit */
	KTRACE_LOSS_SNAPSHOTS_FAILED = 7,     /* snapshot files that could not be written */
	KTRACE_LOSS_SNAPSHOTS_REFUSED = 8,    /* snapshots (signal, API, trigger) refused
	                                         by the files/bytes-per-minute limit */
	/* 9 and 10 count this file only (not the process's total): blocks the
	 * ring held when the window was marked that are not in this file.
	 * With the blocks in the file they account for every block of the
	 * ring.  Writers of these counters no longer count cause 4. */
	KTRACE_LOSS_NOT_COPIED_OVERWRITTEN = 9, /* reused by the program's threads
	                                           before the snapshot copied them */
	KTRACE_LOSS_NOT_COPIED_NO_MEMORY = 10,  /* no memory for the copy */
	KTRACE_LOSS_SCHED = 11,        /* context-switch records lost (kernel buffer
	                                  full, or overwritten in the window) */
	KTRACE_LOSS_MESSAGES = 12,     /* stderr lines not printed: descriptor 2
	                                  would have blocked (a full pipe nobody
	                                  reads) */
	KTRACE_LOSS_VFORK = 13,        /* events of vfork children before exec or
	                                  _exit: not recorded (they would be the
	                                  parent thread's) */
	KTRACE_LOSS_TRIGGERS_PREEMPTED = 14, /* triggers dropped because the request
	                                        was slow only while preempted
	                                        (KTRACE_TRIGGER_ON=run): its wall
	                                        time minus its preempted time was
	                                        under the threshold */
	KTRACE_LOSS_LEAN_DEPTH = 15,   /* lean-mode calls not recorded: the
	                                  thread's lean frame stack was full
	                                  (recursion deeper than 256) */
	KTRACE_LOSS_COUNT = 16
};

struct ktrace_loss_rec {
	uint64_t count[KTRACE_LOSS_COUNT]; /* events/blocks/snapshots by cause */
};
_Static_assert(sizeof(struct ktrace_loss_rec) == 128, "loss record size is pinned");

struct ktrace_core_rec {
	uint32_t cpu;                  /* cpu number */
	uint32_t nblocks;              /* blocks in this core's ring */
	uint64_t blocks_used;          /* blocks claimed since start (ring laps * nblocks + ...) */
	uint64_t words_written;        /* words committed by slow paths (informational) */
	uint64_t copy_tsc;             /* counter just before this core's position was
	                                  read: its records from before this time are
	                                  all in the file, later ones may not be.  A
	                                  reader ends the complete window at the
	                                  earliest copy_tsc of the cores (0 = unknown) */
};
_Static_assert(sizeof(struct ktrace_core_rec) == 32, "core record size is pinned");

struct ktrace_block_rec {
	uint32_t cpu;                  /* core whose ring held this block */
	uint32_t nwords;               /* valid words that follow (<= KTRACE_BLOCK_WORDS) */
	uint32_t start;                /* S: the core's word counter at block start */
	uint32_t crc;                  /* CRC-32C of the nwords words */
};
_Static_assert(sizeof(struct ktrace_block_rec) == 16, "block record size is pinned");

enum ktrace_trigger_why {
	KTRACE_TRIGGER_ABSOLUTE = 1,   /* slower than the absolute threshold */
	KTRACE_TRIGGER_PERCENTILE = 2, /* slower than the running percentile */
};

struct ktrace_trigger_rec {
	uint64_t request_id;           /* format 1: id in the REQ_BEGIN/REQ_END records;
	                                  format 2: the request's number (REQ_OPEN) */
	uint64_t begin_tsc;            /* counter at request begin */
	uint64_t end_tsc;              /* counter at request end */
	uint64_t threshold_ns;         /* threshold the request exceeded */
	uint64_t duration_ns;          /* measured duration */
	uint64_t suppressed;           /* triggers rate-limited since the previous file */
	uint32_t kind_id;              /* name id of the request kind */
	uint32_t thread_slot;          /* slot of the thread that ran the request */
	int32_t  tid;                  /* its kernel thread id */
	uint32_t why;                  /* enum ktrace_trigger_why */
	uint32_t percentile_x1000;     /* e.g. 99900 for p99.9, when why = PERCENTILE */
	uint32_t samples;              /* requests of this kind seen before */
	char     kind[32];             /* NUL-terminated kind name */
	/* Appended (a reader accepts KTRACE_TRIGGER_REC_SIZE_V1 bytes, and
	 * then takes these as 0 = unknown). */
	uint64_t preempted_ns;         /* ns the thread was preempted (off the cpu
	                                  while runnable) within [begin, end], when
	                                  flags has KTRACE_TRIGGER_SCHED_KNOWN */
	uint64_t blocked_ns;           /* ns it was blocked (waiting) in it, idem */
	uint32_t npreempt;             /* times it was preempted in it, idem */
	uint32_t trigger_on;           /* enum ktrace_trigger_on: what the threshold
	                                  was compared with */
	uint32_t flags;                /* enum ktrace_trigger_flags */
	uint32_t reserved;             /* 0 */
};
_Static_assert(sizeof(struct ktrace_trigger_rec) == 136, "trigger record size is pinned");
#define KTRACE_TRIGGER_REC_SIZE_V1 104u  /* before preempted_ns was appended */

enum ktrace_trigger_on {
	KTRACE_TRIGGER_ON_WALL = 1,    /* wall time, begin to end (default) */
	KTRACE_TRIGGER_ON_RUN = 2,     /* wall time minus preempted time: what the
	                                  program did (on the cpu, or blocked) */
};

enum ktrace_trigger_flags {
	KTRACE_TRIGGER_SCHED_KNOWN = 1u << 0, /* preempted_ns, blocked_ns and npreempt
	                                         were measured from the SCHED records */
	KTRACE_TRIGGER_RUN_FELL_BACK = 1u << 1, /* KTRACE_TRIGGER_ON=run, but the
	                                           preempted time was unknown (context
	                                           switches not recorded or lost):
	                                           compared with wall time */
};

/*
 * The window budget (section BUDGET).  The ring must hold window_s
 * seconds: a core may write sustainable_wps words per second on average
 * (ring words / window_s).  Each core has a token bucket of a quarter of
 * the ring, refilled at that rate; only when a core's bucket runs dry does
 * the filter mute the hottest functions whose calls were all short.
 */
enum ktrace_budget_flags {
	KTRACE_BUDGET_FILTER_ON = 1u << 0,   /* KTRACE_FILTER=auto */
	KTRACE_BUDGET_SHORT = 1u << 1,       /* even with every candidate muted the
	                                        window is shorter than its target
	                                        (ring_needed_bytes says what would hold it) */
};

struct ktrace_budget_rec {
	uint32_t window_s;             /* seconds: KTRACE_WINDOW_S, the target */
	uint32_t flags;                /* enum ktrace_budget_flags */
	uint64_t ring_bytes_per_core;  /* bytes */
	uint64_t sustainable_wps;      /* words per second per core: ring words / window_s */
	uint32_t max_us;               /* us: KTRACE_FILTER_MAX_US, what a long call is
	                                  (a muted function's long calls were under
	                                  1 in 100 of those observed, see filter.c) */
	uint32_t ncores;               /* ktrace_budget_core_rec entries that follow */
	uint64_t muted_calls;          /* calls skipped because their function was muted
	                                  (automatically, after muting): counted per thread,
	                                  summed at each thread's slow path (lags < 30 ms) */
	uint64_t ring_needed_bytes;    /* bytes per core that would hold window_s at the
	                                  highest measured core rate; 0 if the ring holds it */
	uint64_t decisions;            /* filter decisions taken (one per ~100 ms) */
	uint64_t epoch;                /* mute epoch: how many times the mute set grew */
	uint64_t cpu_wps;              /* words per second per core the CPU budget allows
	                                  (KTRACE_CPU_PCT), 0 = no CPU budget (older files: 0) */
	uint32_t cpu_pct;              /* KTRACE_CPU_PCT in effect, percent */
	uint8_t  reserved[4];          /* 0 */
};
_Static_assert(sizeof(struct ktrace_budget_rec) == 80, "budget record size is pinned");

enum ktrace_budget_core_flags {
	KTRACE_BUDGET_CORE_PROJECTED = 1u << 0, /* the ring has not wrapped yet: window_ms
	                                           is projected from the recent rate */
};

struct ktrace_budget_core_rec {
	uint32_t cpu;                  /* cpu number */
	uint32_t flags;                /* enum ktrace_budget_core_flags */
	uint64_t rate_wps;             /* words per second over the last ~1 s */
	uint64_t window_ms;            /* ms the ring holds at this core (measured
	                                  span of the last ring_words words, or projected) */
	int64_t  tokens;               /* words left in the bucket (negative: deficit) */
};
_Static_assert(sizeof(struct ktrace_budget_core_rec) == 32, "budget core record size is pinned");

enum ktrace_mute_why {
	KTRACE_MUTE_HOT_SHORT = 1,     /* automatic: hot, every observed call short */
	KTRACE_MUTE_EXCLUDE = 2,       /* KTRACE_EXCLUDE pattern, from its first call */
	KTRACE_MUTE_HOT_CPU = 3,       /* automatic, over the CPU budget (KTRACE_CPU_PCT):
	                                  hot, some observed calls long, none blocked */
};

struct ktrace_muted_rec {
	uint64_t addr;                 /* function address (as in FUNCS) */
	uint32_t id;                   /* compact id */
	uint32_t why;                  /* enum ktrace_mute_why */
	uint64_t since_tsc;            /* counter when muted (first call for EXCLUDE) */
	uint64_t events_before;        /* estimated events (entries + exits) it wrote
	                                  before muting: sampled share x words written */
	uint64_t sampled_events;       /* events of it the filter saw in its samples */
	uint32_t share_ppm;            /* its share of sampled events when muted, ppm */
	uint32_t max_ns;               /* longest call observed (complete, or still open
	                                  while its thread kept recording on that core),
	                                  ns, time its thread was preempted not counted,
	                                  nor (format 2) time in requests nested in it */
	uint64_t calls_observed;       /* complete calls whose duration was observed */
};
_Static_assert(sizeof(struct ktrace_muted_rec) == 56, "muted record size is pinned");

/*
 * Scheduling (SCHED section).  The kernel reports the process's own context
 * switches (perf_event_open, a software dummy event with context_switch=1);
 * each record says when a thread left or got a cpu.  Times are CLOCK_MONOTONIC
 * ns (the perf clock the library asks for); a reader maps them onto the
 * counter through the ANCHORS (tsc, monotonic_ns) pairs, interpolating.
 * A thread is off-CPU from an OUT record to its next IN record; OUT_PREEMPT
 * means it was still runnable (preempted), OUT_BLOCK that it waited (lock,
 * sleep, I/O).  A core's records are complete from complete_from_ns to
 * end_ns: outside that range nothing is known.
 */
enum ktrace_sched_status {
	KTRACE_SCHED_RECORDED = 1,     /* switch records follow */
	KTRACE_SCHED_OFF = 2,          /* KTRACE_SCHED=off */
	KTRACE_SCHED_REFUSED = 3,      /* the kernel refused: err, paranoid, what */
	KTRACE_SCHED_SECCOMP = 4,      /* not tried: a seccomp filter is active
	                                  (what = "seccomp"), or whether one is
	                                  could not be read (what = the file,
	                                  err = ENOENT); KTRACE_SCHED=on tries */
};

struct ktrace_sched_hdr {
	uint32_t status;               /* enum ktrace_sched_status */
	int32_t  err;                  /* errno of the refusal (REFUSED), else 0 */
	int32_t  paranoid;             /* /proc/sys/kernel/perf_event_paranoid at
	                                  start, INT32_MIN if unreadable */
	uint32_t ncores;               /* struct ktrace_sched_core entries */
	uint32_t nnames;               /* struct ktrace_sched_name entries */
	uint32_t clockid;              /* clock of the times: 1 = CLOCK_MONOTONIC */
	int64_t  start_ns;             /* monotonic ns when recording started */
	int64_t  end_ns;               /* monotonic ns of the last drain: records
	                                  up to here are all in (if not lost) */
	uint64_t switches;             /* records drained since start */
	uint64_t lost;                 /* records lost since start (also LOSS) */
	char     what[32];             /* NUL-terminated call that failed, e.g.
	                                  "perf_event_open" (REFUSED) */
	uint8_t  reserved[40];         /* 0 */
};
_Static_assert(sizeof(struct ktrace_sched_hdr) == 128, "sched header size is pinned");

struct ktrace_sched_core {
	uint32_t cpu;                  /* cpu number */
	uint32_t count;                /* records of this core in the section */
	int64_t  complete_from_ns;     /* monotonic ns: no record of this core from
	                                  here on was lost or overwritten */
};
_Static_assert(sizeof(struct ktrace_sched_core) == 16, "sched core size is pinned");

enum ktrace_sched_what {
	KTRACE_SCHED_IN = 1,           /* the thread got the cpu */
	KTRACE_SCHED_OUT_BLOCK = 2,    /* left the cpu to wait (not runnable) */
	KTRACE_SCHED_OUT_PREEMPT = 3,  /* left the cpu while runnable (preempted) */
};

struct ktrace_sched_rec {
	int64_t  time_ns;              /* monotonic ns */
	int32_t  tid;                  /* kernel thread id */
	uint16_t cpu;                  /* cpu number */
	uint8_t  what;                 /* enum ktrace_sched_what */
	uint8_t  flags;                /* 0 */
};
_Static_assert(sizeof(struct ktrace_sched_rec) == 16, "sched record size is pinned");

struct ktrace_sched_name {
	int32_t  tid;                  /* a thread seen in the records */
	uint32_t flags;                /* 0 */
	char     name[16];             /* NUL-terminated comm when first seen */
};
_Static_assert(sizeof(struct ktrace_sched_name) == 24, "sched name size is pinned");

/*
 * Requests (REQUESTS section, format 2): what became of every request
 * that ended, per kind, including the ones whose records were not kept.
 *
 * Latency histograms are log-linear in counter ticks (unshifted): a
 * duration of v ticks falls in bucket
 *     b = v                                          if v < 2^sub_bits
 *     b = (e - sub_bits + 1) * 2^sub_bits + ((v >> (e - sub_bits)) & (2^sub_bits - 1))
 *                                                    else, e = floor(log2 v)
 * whose values lie in [lo, hi) with hi - lo <= lo / 2^sub_bits: reported
 * as hi, a percentile is never below the true value and at most 1/16
 * (6.25 %) above it with sub_bits = 4.  Counts are kept per time slice of
 * slice_ticks; the section carries the slices that overlap the last
 * slice_count slices, so a reader sums the ones inside its window (a
 * slice cut by the window edge is counted whole: the histogram's window
 * is known to within one slice).
 */
enum ktrace_req_hdr_flags {
	KTRACE_REQS_HOLD = 1u << 0,    /* requests were held aside (KTRACE_KEEP=slow) */
};

struct ktrace_req_hdr {
	uint32_t nkinds;               /* struct ktrace_req_kind_rec entries */
	uint32_t flags;                /* enum ktrace_req_hdr_flags */
	uint64_t slice_ticks;          /* counter ticks per histogram slice */
	uint32_t slice_count;          /* slices kept (the histogram spans at most
	                                  slice_count * slice_ticks) */
	uint32_t sub_bits;             /* histogram sub-buckets per power of two, log2 */
	uint64_t hold_bytes;           /* bytes: each thread's hold buffer */
	uint64_t sample_ms;            /* ms: one typical request per kind is sampled
	                                  about this often */
	uint32_t keep_pct_x1000;       /* KTRACE_KEEP_PCT * 1000: slower than this
	                                  running percentile of its kind is slow */
	uint32_t keep_min_samples;     /* requests of a kind before it arms */
	uint64_t hold_failed;          /* threads that got no hold buffer (memory) */
	uint64_t slow_over_budget;     /* requests slower than their kind's running
	                                  KTRACE_KEEP_PCT percentile (and under every
	                                  trigger threshold) not kept because such
	                                  requests of that thread already used
	                                  their share of the ring (half of a
	                                  core's window budget) */
	/* Were reserved (0) in the first format 2 files: 0 reads as "gaps
	 * not held". */
	uint32_t gap_us;               /* KTRACE_GAP_US: a thread's time between
	                                  its requests is held, and kept whole when
	                                  at least this long (0 = not held) */
	uint32_t gaps_kept;            /* such gaps kept whole since start (long,
	                                  sampled, with a mark, or a trigger's
	                                  aftermath; saturates) */
};
_Static_assert(sizeof(struct ktrace_req_hdr) == 72, "req header size is pinned");

struct ktrace_req_kind_rec {
	uint32_t kind_id;              /* name id (NAMES, kind REQUEST) */
	uint32_t nslices;              /* struct ktrace_req_slice_rec that follow */
	uint64_t ended;                /* requests ended since start */
	uint64_t kept_slow;            /* ... kept whole because slow */
	uint64_t kept_sampled;         /* ... kept whole as typical samples */
	uint64_t kept_other;           /* ... kept for another reason (nested in a
	                                  kept one, spilled, direct) */
	uint64_t dropped;              /* ... whose records were not kept */
	uint64_t threshold_ns;         /* keep threshold at the snapshot: the
	                                  smaller of the absolute trigger threshold
	                                  and the running keep percentile (0 = none
	                                  armed yet) */
	uint64_t abs_ns;               /* absolute trigger threshold, 0 = off */
	uint32_t trig_pct_x1000;       /* trigger percentile * 1000, 0 = off */
	uint32_t flags;                /* 0 */
};
_Static_assert(sizeof(struct ktrace_req_kind_rec) == 72, "req kind size is pinned");

struct ktrace_req_slice_rec {
	uint64_t start_tsc;            /* counter at the slice's start */
	uint64_t end_tsc;              /* counter at its end (the snapshot's time
	                                  for the current slice) */
	uint64_t count;                /* requests of the kind that ended in it */
	uint64_t max_ticks;            /* longest of them, counter ticks */
	uint32_t nbuckets;             /* struct ktrace_req_bucket that follow */
	uint32_t reserved;             /* 0 */
};
_Static_assert(sizeof(struct ktrace_req_slice_rec) == 40, "req slice size is pinned");

struct ktrace_req_bucket {
	uint32_t bucket;               /* histogram bucket index (ascending) */
	uint32_t count;                /* requests in it (non-zero) */
};
_Static_assert(sizeof(struct ktrace_req_bucket) == 8, "req bucket size is pinned");

#endif /* KTRACE_FORMAT_H */
