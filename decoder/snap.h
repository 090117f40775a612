/*
 * snap.h - the snapshot as read.c parsed it (struct kd_snap: header, INFO,
 * anchors, functions, threads, names, modules, losses, trigger, budget,
 * blocks per core, SCHED, REQUESTS) and its lookups.  What every later
 * stage reads; the reading itself is read.h.
 */
#ifndef KD_SNAP_H
#define KD_SNAP_H

#include <stddef.h>
#include <stdint.h>

#include "ktrace_format.h"
#include "util.h"

struct kd_snap_block {
	uint64_t offset;        /* bytes: file offset of the struct ktrace_block_rec;
	                           its nwords words follow (kd_snap_block_words) */
	uint64_t tsc;           /* BLOCK_START's counter value */
	uint32_t nwords;        /* valid words, 5..KTRACE_BLOCK_WORDS */
	uint32_t cpu;           /* ring the block came from */
	uint32_t start;         /* S: the core's word counter at block start */
	uint32_t core;          /* index in kd_snap.cores (set by kd_iter_order) */
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


struct kd_win;

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
	struct kd_win *wins;    /* per core (kd_iter_order): the iterators' reads */
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
	int have_lean;                         /* LEAN section read */
	struct ktrace_lean_rec lean;
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
	struct kd_snap_core *cores;        /* by cpu number (kd_iter_order) */
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

const char *kd_read_section_name(uint32_t type);
const char *kd_read_loss_name(unsigned cause);
/* Name id -> string, or NULL. */
const char *kd_snap_name(const struct kd_snap *snap, uint32_t id);
const struct ktrace_thread_rec *kd_snap_thread(const struct kd_snap *snap,
                                                    uint32_t slot);

#endif /* KD_SNAP_H */
