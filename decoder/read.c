/*
 * read.c - stage 1 of ktrace-decode: the only parser of snapshot files.
 *
 * Input is a byte buffer (the file, mmapped or read by the caller).  Every
 * length, count and offset is checked against the buffer before use, and
 * every allocation is bounded by the buffer size, so a truncated, damaged or
 * hostile file gives an error or a warning and never an out-of-bounds read.
 *
 * Policy (documented in ktrace-decode --help):
 *   - header problems, a bad section table, a missing or damaged INFO
 *     section, and sections whose CRC is good but whose contents are
 *     inconsistent (a writer bug or a forged file): fatal error;
 *   - an optional section whose CRC fails: warning, decoded without it;
 *   - a block whose CRC fails or that does not start with a valid
 *     BLOCK_START: skipped, counted and reported; the rest decodes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kd_time.h"
#include "read.h"
#include "snap.h"
#include "util.h"

#define HDR_SIZE sizeof(struct ktrace_file_header)
#define SEC_SIZE sizeof(struct ktrace_section)

/* ---- errors and warnings ------------------------------------------------ */

static int fail(struct kd_dec_error *err, int code, int has_off, uint64_t off,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail(struct kd_dec_error *err, int code, int has_off, uint64_t off,
                const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->code = code;
		err->has_offset = has_off;
		err->offset = off;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

/* ---- the test hook (read.h) -------------------------------------------------- */

void (*kd_read_hook)(const char *path, uint64_t done, uint64_t total);

/* ---- names ---------------------------------------------------------------- */

const char *kd_read_section_name(uint32_t type)
{
	static const char *const names[] = {
		[KTRACE_SEC_INFO] = "INFO",       [KTRACE_SEC_ANCHORS] = "ANCHORS",
		[KTRACE_SEC_FUNCS] = "FUNCS",     [KTRACE_SEC_THREADS] = "THREADS",
		[KTRACE_SEC_NAMES] = "NAMES",     [KTRACE_SEC_MODULES] = "MODULES",
		[KTRACE_SEC_LOSS] = "LOSS",       [KTRACE_SEC_CORES] = "CORES",
		[KTRACE_SEC_BLOCKS] = "BLOCKS",   [KTRACE_SEC_TRIGGER] = "TRIGGER",
		[KTRACE_SEC_BUDGET] = "BUDGET",
		[KTRACE_SEC_SCHED] = "SCHED",     [KTRACE_SEC_REQUESTS] = "REQUESTS",
		[KTRACE_SEC_BUILDIDS] = "BUILDIDS", [KTRACE_SEC_LEAN] = "LEAN",
	};
	if (type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "unknown type";
}

const char *kd_read_loss_name(unsigned cause)
{
	static const char *const names[KTRACE_LOSS_COUNT] = {
		[KTRACE_LOSS_OVERWRITTEN_BLOCKS] = "overwritten blocks",
		[KTRACE_LOSS_NESTED] = "nested events (signal in library slow path)",
		[KTRACE_LOSS_NO_THREAD_SLOT] = "no thread slot (thread table full)",
		[KTRACE_LOSS_NO_CPU] = "no usable cpu id",
		[KTRACE_LOSS_SNAPSHOT_RACE] = "blocks reused during snapshot copy",
		[KTRACE_LOSS_NO_NAME] = "name table full",
		[KTRACE_LOSS_SNAPSHOTS_SUPPRESSED] = "snapshots suppressed by rate limit",
		[KTRACE_LOSS_SNAPSHOTS_FAILED] = "snapshots that could not be written",
		[KTRACE_LOSS_SNAPSHOTS_REFUSED] = "snapshots refused by the files/MB per minute limit",
		[KTRACE_LOSS_NOT_COPIED_OVERWRITTEN] = "blocks not in this file: overwritten during the copy",
		[KTRACE_LOSS_NOT_COPIED_NO_MEMORY] = "blocks not in this file: no memory for the copy",
		[KTRACE_LOSS_SCHED] = "context-switch records",
		[KTRACE_LOSS_MESSAGES] = "stderr lines not printed (stderr would have blocked)",
		[KTRACE_LOSS_VFORK] = "events in vfork children before exec (not recorded)",
		[KTRACE_LOSS_TRIGGERS_PREEMPTED] = "triggers dropped: mostly preemption "
		                                   "(KTRACE_TRIGGER_ON=run)",
		[KTRACE_LOSS_LEAN_DEPTH] = "lean-mode calls deeper than 256 frames (not recorded)",
	};
	if (cause < KTRACE_LOSS_COUNT && names[cause])
		return names[cause];
	return NULL;
}

/* ---- helpers -------------------------------------------------------------- */

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static int host_is_little_endian(void)
{
	const uint32_t one = 1;
	unsigned char c;

	memcpy(&c, &one, 1);
	return c == 1;
}

/* Copy a fixed char field and force a NUL at its end. */
static void terminate(char *s, size_t size)
{
	s[size - 1] = '\0';
}

static int cmp_anchor(const void *a, const void *b)
{
	const struct ktrace_anchor_rec *x = a, *y = b;
	return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

static int cmp_thread(const void *a, const void *b)
{
	const struct ktrace_thread_rec *x = a, *y = b;
	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

static int cmp_name(const void *a, const void *b)
{
	const struct kd_snap_name *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_module(const void *a, const void *b)
{
	const struct kd_snap_module *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* One section table entry, validated for bounds. */
struct sec {
	uint32_t index;          /* position in the table */
	uint64_t entry_off;      /* bytes: file offset of the table entry */
	struct ktrace_section s; /* the entry */
	const uint8_t *p;        /* payload (pass 2; from a file, a copy in mem) */
	uint8_t *mem;            /* owned copy of the payload, or NULL */
	int crc_ok;
};

#define SEC_FMT "section %" PRIu32 " (%s) "
#define SEC_ARGS(x) (x)->index, kd_read_section_name((x)->s.type)

/* Fixed-size entries: size must be count * entsize. */
static int check_array(const struct sec *x, uint64_t entsize, struct kd_dec_error *err)
{
	if (x->s.size % entsize)
		return fail(err, KD_ECORRUPT, 1, x->entry_off + 16,
		            SEC_FMT "size %" PRIu64 " is not a multiple of %" PRIu64, SEC_ARGS(x),
		            x->s.size, entsize);
	if ((uint64_t)x->s.count * entsize != x->s.size)
		return fail(err, KD_ECORRUPT, 1, x->entry_off + 4,
		            SEC_FMT "count %" PRIu32 " does not match size %" PRIu64
		            " (%" PRIu64 " entries of %" PRIu64 " bytes)",
		            SEC_ARGS(x), x->s.count, x->s.size, x->s.size / entsize, entsize);
	return 0;
}

/* ---- the input: a buffer, or a file read in windows ------------------------ */

#define WIN_SCAN (256u << 10) /* the reader's window over BLOCKS and sections */
#define WIN_CORE (128u << 10) /* a core iterator's window (kd_snap_block_words) */

/*
 * Bytes [off, off + n) of the input, or NULL if they are not all there (a
 * file that shrank since fstat; a buffer never does: callers check bounds
 * first).  From a file, w is refilled by one pread of up to its capacity
 * (at least n) from off, so a sequential walk reads each byte once.
 */
static const uint8_t *src_get(const struct kd_src *s, struct kd_win *w, size_t cap,
                              uint64_t off, size_t n)
{
	uint64_t k;

	if (off > s->len || n > s->len - off) {
		errno = 0; /* past the end: as a short read */
		return NULL;
	}
	if (s->buf)
		return s->buf + off;
	if (w->mem && off >= w->off && off - w->off <= w->len && n <= w->len - (off - w->off))
		return w->mem + (off - w->off);
	/* Past where a read of this window found the file ending: gone, no
	 * read.  (Each block of a file truncated mid-walk read again, at each
	 * of a thread's pieces: 9.9 M preads for an 8 MB file cut to 2 MB.) */
	if (w->end && off + n > w->end) {
		errno = 0; /* as the short read */
		return NULL;
	}
	if (!w->mem || w->cap < n) {
		free(w->mem);
		w->cap = n > cap ? n : cap;
		w->mem = kd_xmalloc(w->cap, "a read buffer");
	}
	k = s->len - off < w->cap ? s->len - off : w->cap;
	w->off = off;
	w->len = (size_t)kd_read_pread(s->fd, w->mem, off, k, s->path, s->len);
	if (w->len < k && errno == 0 && (!w->end || off + w->len < w->end))
		w->end = off + w->len; /* end of file: it shrank */
	return w->len >= n ? w->mem : NULL;
}

/* CRC-32C of [off, off + n) continued from crc, through w; -1 if unreadable. */
static int src_crc(const struct kd_src *s, struct kd_win *w, uint64_t off, uint64_t n,
                   uint32_t *crc)
{
	while (n) {
		size_t k = n < WIN_SCAN ? (size_t)n : WIN_SCAN;
		const uint8_t *p = src_get(s, w, WIN_SCAN, off, k);

		if (!p)
			return -1;
		*crc = kd_crc32c(*crc, p, k);
		off += k;
		n -= k;
	}
	return 0;
}

static void win_free(struct kd_win *w)
{
	free(w->mem);
	w->mem = NULL;
	w->cap = w->len = 0;
	w->end = 0;
}

/* A read of the file came up short (src_get, sec_load): an error of the
 * device (errno, as kd_read_pread leaves it), or end of file in a file that
 * shrank since fstat. */
static int truncated(const struct kd_snap *snap, struct kd_dec_error *err)
{
	if (errno)
		return fail(err, KD_EIO, 0, 0, "read error: %s", strerror(errno));
	return fail(err, KD_EIO, 0, 0,
	            "the file was truncated while it was read (now shorter than its %" PRIu64
	            " bytes); decode a copy that nothing is writing to", snap->src.len);
}

const uint8_t *kd_snap_block_words(const struct kd_snap *snap,
                                        const struct kd_snap_block *b)
{
	const struct kd_src *s = &snap->src;
	struct kd_win *w;
	const uint8_t *p;

	if (s->buf)
		return s->buf + b->offset + sizeof(struct ktrace_block_rec);
	w = &snap->wins[b->core];
	p = src_get(s, w, WIN_CORE, b->offset + sizeof(struct ktrace_block_rec),
	            (size_t)b->nwords * 4);
	if (!p)
		w->failed++;
	return p;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

int kd_snap_changed(const struct kd_snap *snap)
{
	struct stat st;

	if (snap->src.buf || snap->src.fd < 0)
		return 0;
	for (uint32_t i = 0; snap->wins && i < snap->ncores; i++)
		if (snap->wins[i].failed)
			return 1;
	if (fstat(snap->src.fd, &st) != 0)
		return 1;
	return (uint64_t)st.st_size < snap->hdr.file_size || mtime_ns(&st) != snap->src.mtime_ns ||
	       (uint64_t)st.st_ino != snap->src.ino;
}

/* ---- sections ------------------------------------------------------------- */

static int read_info(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	struct ktrace_info_rec *in = &snap->info;
	uint64_t o = x->s.offset;

	if (!x->crc_ok)
		return fail(err, KD_ECORRUPT, 1, o,
		            SEC_FMT "CRC mismatch: the essential INFO section is damaged",
		            SEC_ARGS(x));
	if (x->s.size < sizeof(*in))
		return fail(err, KD_ECORRUPT, 1, x->entry_off + 16,
		            SEC_FMT "size %" PRIu64 " is smaller than the %zu-byte info record",
		            SEC_ARGS(x), x->s.size, sizeof(*in));
	memcpy(in, x->p, sizeof(*in));
	terminate(in->reason, sizeof(in->reason));
	terminate(in->exe, sizeof(in->exe));
	terminate(in->hostname, sizeof(in->hostname));
	if (in->tsc_hz < 1000000ull || in->tsc_hz > 100000000000ull)
		return fail(err, KD_ECORRUPT, 1, o + offsetof(struct ktrace_info_rec, tsc_hz),
		            "INFO tsc_hz %" PRIu64 " is outside 1 MHz .. 100 GHz", in->tsc_hz);
	if (in->tsc_shift > 32)
		return fail(err, KD_ECORRUPT, 1,
		            o + offsetof(struct ktrace_info_rec, tsc_shift),
		            "INFO tsc_shift %" PRIu32 " is larger than 32", in->tsc_shift);
	if (in->ncpus < 1 || in->ncpus > 65536)
		return fail(err, KD_ECORRUPT, 1, o + offsetof(struct ktrace_info_rec, ncpus),
		            "INFO ncpus %" PRIu32 " is outside 1 .. 65536", in->ncpus);
	if (in->block_words != KTRACE_BLOCK_WORDS)
		return fail(err, KD_EFORMAT, 1,
		            o + offsetof(struct ktrace_info_rec, block_words),
		            "INFO block_words %" PRIu32 " is not %u (unsupported)", in->block_words,
		            KTRACE_BLOCK_WORDS);
	if (in->func_id_count != KTRACE_FUNC_ID_COUNT)
		return fail(err, KD_EFORMAT, 1,
		            o + offsetof(struct ktrace_info_rec, func_id_count),
		            "INFO func_id_count %" PRIu32 " is not %u (unsupported)",
		            in->func_id_count, KTRACE_FUNC_ID_COUNT);
	if (in->clock_source != KTRACE_CLOCK_TSC && in->clock_source != KTRACE_CLOCK_MONOTONIC &&
	    in->clock_source != KTRACE_CLOCK_CNTVCT)
		kd_warn(&snap->warn, o + offsetof(struct ktrace_info_rec, clock_source),
		             "INFO clock_source %" PRIu32 " is unknown", in->clock_source);
	return 0;
}

static int read_anchors(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	uint32_t n, j = 0;
	int rc = check_array(x, sizeof(struct ktrace_anchor_rec), err);

	if (rc)
		return rc;
	n = x->s.count;
	if (!n)
		return 0;
	snap->anchors = kd_xmalloc((size_t)n * sizeof(*snap->anchors), "ANCHORS");
	memcpy(snap->anchors, x->p, (size_t)n * sizeof(*snap->anchors));
	qsort(snap->anchors, n, sizeof(*snap->anchors), cmp_anchor);
	for (uint32_t i = 0; i < n; i++) {
		if (j && snap->anchors[j - 1].tsc == snap->anchors[i].tsc)
			continue;
		snap->anchors[j++] = snap->anchors[i];
	}
	snap->nanchors = j;
	kd_time_find_steps(snap);
	return 0;
}

static int read_buildids(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	int rc = check_array(x, sizeof(struct ktrace_buildid_rec), err);

	if (rc || !x->s.count)
		return rc;
	snap->buildids = kd_xmalloc((size_t)x->s.count * sizeof(*snap->buildids), "BUILDIDS");
	memcpy(snap->buildids, x->p, (size_t)x->s.count * sizeof(*snap->buildids));
	for (uint32_t i = 0; i < x->s.count; i++)
		if (snap->buildids[i].id_len > sizeof(snap->buildids[i].id))
			snap->buildids[i].id_len = 0;   /* hostile: unknown */
	snap->nbuildids = x->s.count;
	return 0;
}

static int read_funcs(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	int rc = check_array(x, sizeof(struct ktrace_func_rec), err);

	if (rc)
		return rc;
	snap->nfuncs = x->s.count;
	for (uint32_t i = 0; i < x->s.count; i++) {
		struct ktrace_func_rec r;
		uint64_t off = x->s.offset + (uint64_t)i * sizeof(r);

		memcpy(&r, x->p + (size_t)i * sizeof(r), sizeof(r));
		if (r.id == KTRACE_FUNC_NO_ID)
			continue;
		if (r.id >= KTRACE_FUNC_ID_COUNT)
			return fail(err, KD_ECORRUPT, 1, off + 8,
			            "FUNCS entry %" PRIu32 ": compact id %" PRIu32
			            " is out of range (max %u)", i, r.id, KTRACE_FUNC_ID_COUNT - 1);
		if (snap->func_known[r.id]) {
			if (snap->func_addr[r.id] != r.addr)
				kd_warn(&snap->warn, off,
				             "FUNCS entry %" PRIu32 ": id %" PRIu32
				             " given twice (0x%" PRIx64 " and 0x%" PRIx64
				             "); keeping the first", i, r.id, snap->func_addr[r.id], r.addr);
			continue;
		}
		snap->func_known[r.id] = 1;
		snap->func_addr[r.id] = r.addr;
	}
	return 0;
}

static int read_threads(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	uint32_t n, j = 0;
	int rc = check_array(x, sizeof(struct ktrace_thread_rec), err);

	if (rc)
		return rc;
	n = x->s.count;
	if (!n)
		return 0;
	snap->threads = kd_xmalloc((size_t)n * sizeof(*snap->threads), "THREADS");
	for (uint32_t i = 0; i < n; i++) {
		struct ktrace_thread_rec *t = &snap->threads[j];

		memcpy(t, x->p + (size_t)i * sizeof(*t), sizeof(*t));
		terminate(t->name, sizeof(t->name));
		if (t->slot == 0 || t->slot > KTRACE_ARG24_MAX) {
			kd_warn(&snap->warn, x->s.offset + (uint64_t)i * sizeof(*t),
			             "THREADS entry %" PRIu32 ": slot %" PRIu32
			             " is invalid; entry ignored", i, t->slot);
			continue;
		}
		j++;
	}
	qsort(snap->threads, j, sizeof(*snap->threads), cmp_thread);
	n = j;
	j = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (j && snap->threads[j - 1].slot == snap->threads[i].slot) {
			kd_warn(&snap->warn, x->s.offset,
			             "THREADS: slot %" PRIu32 " listed twice; keeping one",
			             snap->threads[i].slot);
			continue;
		}
		snap->threads[j++] = snap->threads[i];
	}
	snap->nthreads = j;
	return 0;
}

static int read_names(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	uint64_t pos = 0, size = x->s.size;
	uint32_t n = x->s.count, j = 0;

	if ((uint64_t)n * sizeof(struct ktrace_name_rec) > size)
		return fail(err, KD_ECORRUPT, 1, x->entry_off + 4,
		            SEC_FMT "count %" PRIu32 " cannot fit in %" PRIu64 " bytes", SEC_ARGS(x),
		            n, size);
	if (!n)
		return 0;
	snap->names = kd_xcalloc(n, sizeof(*snap->names), "NAMES");
	for (uint32_t i = 0; i < n; i++) {
		struct ktrace_name_rec r;
		uint64_t padded;

		if (size - pos < sizeof(r))
			return fail(err, KD_ECORRUPT, 1, x->s.offset + pos,
			            "NAMES entry %" PRIu32 " runs past the section end", i);
		memcpy(&r, x->p + pos, sizeof(r));
		padded = ((uint64_t)r.len + 3) & ~3ull;
		if (size - pos - sizeof(r) < padded)
			return fail(err, KD_ECORRUPT, 1, x->s.offset + pos + 4,
			            "NAMES entry %" PRIu32 ": length %u runs past the section end", i,
			            r.len);
		snap->names[j].id = r.id;
		snap->names[j].kind = r.kind;
		snap->names[j].str = kd_xmalloc((size_t)r.len + 1, "NAMES");
		memcpy(snap->names[j].str, x->p + pos + sizeof(r), r.len);
		snap->names[j].str[r.len] = '\0';
		j++;
		snap->nnames = j;
		pos += sizeof(r) + padded;
	}
	qsort(snap->names, j, sizeof(*snap->names), cmp_name);
	return 0;
}

static int read_modules(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	uint64_t pos = 0, size = x->s.size;
	uint32_t n = x->s.count;

	if ((uint64_t)n * sizeof(struct ktrace_module_rec) > size)
		return fail(err, KD_ECORRUPT, 1, x->entry_off + 4,
		            SEC_FMT "count %" PRIu32 " cannot fit in %" PRIu64 " bytes", SEC_ARGS(x),
		            n, size);
	if (!n)
		return 0;
	snap->modules = kd_xcalloc(n, sizeof(*snap->modules), "MODULES");
	for (uint32_t i = 0; i < n; i++) {
		struct ktrace_module_rec r;
		struct kd_snap_module *m;
		uint64_t padded;

		if (size - pos < sizeof(r))
			return fail(err, KD_ECORRUPT, 1, x->s.offset + pos,
			            "MODULES entry %" PRIu32 " runs past the section end", i);
		memcpy(&r, x->p + pos, sizeof(r));
		padded = ((uint64_t)r.path_len + 7) & ~7ull;
		if (size - pos - sizeof(r) < padded)
			return fail(err, KD_ECORRUPT, 1, x->s.offset + pos + 24,
			            "MODULES entry %" PRIu32 ": path length %" PRIu32
			            " runs past the section end", i, r.path_len);
		if (r.start >= r.end) {
			kd_warn(&snap->warn, x->s.offset + pos,
			             "MODULES entry %" PRIu32 ": empty range 0x%" PRIx64
			             "..0x%" PRIx64 "; ignored", i, r.start, r.end);
		} else {
			m = &snap->modules[snap->nmodules];
			m->start = r.start;
			m->end = r.end;
			m->file_offset = r.file_offset;
			m->rec = i;
			m->path = kd_xmalloc((size_t)r.path_len + 1, "MODULES");
			memcpy(m->path, x->p + pos + sizeof(r), r.path_len);
			m->path[r.path_len] = '\0';
			snap->nmodules++;
		}
		pos += sizeof(r) + padded;
	}
	qsort(snap->modules, snap->nmodules, sizeof(*snap->modules), cmp_module);
	return 0;
}

static int read_cores(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	int rc = check_array(x, sizeof(struct ktrace_core_rec), err);

	if (rc)
		return rc;
	if (!x->s.count)
		return 0;
	snap->core_recs = kd_xmalloc((size_t)x->s.count * sizeof(*snap->core_recs), "CORES");
	memcpy(snap->core_recs, x->p, (size_t)x->s.count * sizeof(*snap->core_recs));
	snap->ncore_recs = x->s.count;
	for (uint32_t i = 0; i < x->s.count; i++)
		if (snap->core_recs[i].cpu >= snap->info.ncpus)
			return fail(err, KD_ECORRUPT, 1,
			            x->s.offset + (uint64_t)i * sizeof(struct ktrace_core_rec),
			            "CORES entry %" PRIu32 ": cpu %" PRIu32 " >= ncpus %" PRIu32, i,
			            snap->core_recs[i].cpu, snap->info.ncpus);
	return 0;
}

/*
 * BLOCKS: one walk over the section (through a window when reading a file),
 * checking each block's structure and the section's CRC as it goes; only
 * each block's place and header are kept, its words are read again when
 * decoded (kd_snap_block_words).  Entries are variable-length: a broken
 * nwords stops the walk (the next entry cannot be found), anything else
 * skips just the one block.  The section's CRC decides, as it always did:
 * when it is good it covers every block and the blocks' own CRCs are not
 * needed; when it is bad (known only at the end of the walk), the blocks
 * are read again and those whose own CRC fails are dropped.  A block whose
 * structure is broken is reported as damaged by its CRC if that fails too
 * and the section's does, else by what is broken (deferred to the end).
 */
struct deferred {
	uint32_t i;           /* block number in the section */
	uint32_t cpu, start;  /* the entry's */
	uint64_t off;
};

/* Is block i's structure (header r at off, words w8) broken?  With report,
 * say what is wrong and count it. */
static int block_broken(struct kd_snap *snap, uint32_t i, uint64_t off,
                        const struct ktrace_block_rec *r, const uint8_t *w8, int report)
{
	uint32_t h, t;

	if (r->cpu >= snap->info.ncpus) {
		if (report)
			kd_warn(&snap->warn, off,
			             "block %" PRIu32 ": cpu %" PRIu32 " >= ncpus %" PRIu32
			             "; block skipped", i, r->cpu, snap->info.ncpus);
		goto bad;
	}
	h = r->nwords >= 5 ? le32(w8) : 0;
	t = r->nwords >= 5 ? le32(w8 + 4) : 0;
	if (r->nwords < 5 || KTRACE_REC_EV(h) != 4 ||
	    KTRACE_EXT_TYPE(t) != KTRACE_EXT_BLOCK_START) {
		if (report)
			kd_warn(&snap->warn, off + sizeof(*r),
			             "block %" PRIu32 " (cpu %" PRIu32 ", S %" PRIu32
			             "): does not start with a BLOCK_START record; block skipped",
			             i, r->cpu, r->start);
		goto bad;
	}
	if (le32(w8 + 8) != r->start) {
		if (report)
			kd_warn(&snap->warn, off + sizeof(*r) + 8,
			             "block %" PRIu32 " (cpu %" PRIu32 "): BLOCK_START S %" PRIu32
			             " differs from the entry's S %" PRIu32
			             " (block reused while copied?); block skipped", i, r->cpu,
			             le32(w8 + 8), r->start);
		goto bad;
	}
	return 0;
bad:
	snap->damaged_blocks += report;
	return 1;
}

static void keep_block(struct kd_snap *snap, uint32_t i, uint64_t off,
                       const struct ktrace_block_rec *r, const uint8_t *w8)
{
	struct kd_snap_block *nb = &snap->blocks[snap->nblocks++];

	nb->offset = off;
	nb->tsc = le32(w8 + 12) | (uint64_t)le32(w8 + 16) << 32;
	nb->nwords = r->nwords;
	nb->cpu = r->cpu;
	nb->start = r->start;
	nb->core = 0;
	nb->slot = KTRACE_EXT_ARG(le32(w8 + 4));
	nb->crc = r->crc;
	nb->index = i;
}

static int read_blocks(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	uint64_t pos = 0, size = x->s.size;
	uint32_t n = x->s.count, crc = 0, ndef = 0, first = snap->nblocks, keep;
	size_t capdef = 0;
	struct deferred *def = NULL;
	struct kd_win w = { 0 };
	const uint8_t *w8;
	int rc = 0;

	if ((uint64_t)n * sizeof(struct ktrace_block_rec) > size) /* an empty block is 16 bytes */
		return fail(err, KD_ECORRUPT, 1, x->entry_off + 4,
		            SEC_FMT "count %" PRIu32 " cannot fit in %" PRIu64 " bytes", SEC_ARGS(x),
		            n, size);
	if (n)
		snap->blocks = kd_xrealloc(snap->blocks,
		                           ((size_t)snap->nblocks + n) * sizeof(*snap->blocks),
		                           "the block list");
	for (uint32_t i = 0; i < n; i++) {
		struct ktrace_block_rec r;
		uint64_t off = x->s.offset + pos;

		if (size - pos < sizeof(r)) {
			kd_warn(&snap->warn, off,
			             "block %" PRIu32 " of %" PRIu32 ": header runs past the end of "
			             "BLOCKS; %" PRIu32 " blocks unreadable", i, n, n - i);
			snap->unreadable_blocks += n - i;
			break;
		}
		if (!(w8 = src_get(&snap->src, &w, WIN_SCAN, off, sizeof(r))))
			goto trunc;
		memcpy(&r, w8, sizeof(r));
		if (r.nwords > KTRACE_BLOCK_WORDS ||
		    size - pos - sizeof(r) < (uint64_t)r.nwords * 4) {
			kd_warn(&snap->warn, off + 4,
			             "block %" PRIu32 " of %" PRIu32 ": nwords %" PRIu32 " %s; "
			             "%" PRIu32 " blocks unreadable", i, n, r.nwords,
			             r.nwords > KTRACE_BLOCK_WORDS ? "exceeds the block size 1024"
			                                           : "runs past the end of BLOCKS",
			             n - i);
			snap->unreadable_blocks += n - i;
			break;
		}
		crc = kd_crc32c(crc, &r, sizeof(r));
		if (!(w8 = src_get(&snap->src, &w, WIN_SCAN, off + sizeof(r), (size_t)r.nwords * 4)))
			goto trunc;
		crc = kd_crc32c(crc, w8, (size_t)r.nwords * 4);
		pos += sizeof(r) + (uint64_t)r.nwords * 4;
		if (r.nwords == 0)
			continue; /* claimed but never written: nothing to decode */
		if (!block_broken(snap, i, off, &r, w8, 0)) {
			keep_block(snap, i, off, &r, w8);
			continue;
		}
		if (kd_crc32c(0, w8, (size_t)r.nwords * 4) == r.crc) {
			block_broken(snap, i, off, &r, w8, 1); /* broken as written */
			continue;
		}
		if (kd_grow(&def, &capdef, ndef, sizeof(*def), "the block list"))
			goto nomem;
		def[ndef++] = (struct deferred){ i, r.cpu, r.start, off };
	}
	if (pos != size && snap->unreadable_blocks == 0)
		kd_warn(&snap->warn, x->s.offset + pos,
		             SEC_FMT "%" PRIu64 " bytes after the last block ignored", SEC_ARGS(x),
		             size - pos);
	if (src_crc(&snap->src, &w, x->s.offset + pos, size - pos, &crc))
		goto trunc;
	if (crc == x->s.crc) {
		/* The section's CRC vouches for the deferred blocks' bytes: they
		 * are broken as written. */
		for (uint32_t j = 0; j < ndef; j++) {
			struct ktrace_block_rec r;

			if (!(w8 = src_get(&snap->src, &w, WIN_SCAN, def[j].off, sizeof(r))))
				goto trunc;
			memcpy(&r, w8, sizeof(r));
			if (!(w8 = src_get(&snap->src, &w, WIN_SCAN, def[j].off + sizeof(r),
			                   (size_t)r.nwords * 4)))
				goto trunc;
			block_broken(snap, def[j].i, def[j].off, &r, w8, 1);
		}
		goto out;
	}
	kd_warn(&snap->warn, x->s.offset,
	             SEC_FMT "CRC mismatch; checking each block's own CRC", SEC_ARGS(x));
	for (uint32_t j = 0; j < ndef; j++) {
		kd_warn(&snap->warn, def[j].off,
		             "block %" PRIu32 " (cpu %" PRIu32 ", S %" PRIu32
		             "): CRC mismatch; block skipped", def[j].i, def[j].cpu, def[j].start);
		snap->damaged_blocks++;
	}
	keep = first;
	for (uint32_t k = first; k < snap->nblocks; k++) {
		const struct kd_snap_block *b = &snap->blocks[k];

		if (!(w8 = src_get(&snap->src, &w, WIN_SCAN, b->offset + sizeof(struct ktrace_block_rec),
		                   (size_t)b->nwords * 4)))
			goto trunc;
		if (kd_crc32c(0, w8, (size_t)b->nwords * 4) != b->crc) {
			kd_warn(&snap->warn, b->offset,
			             "block %" PRIu32 " (cpu %" PRIu32 ", S %" PRIu32
			             "): CRC mismatch; block skipped", b->index, b->cpu, b->start);
			snap->damaged_blocks++;
			continue;
		}
		snap->blocks[keep++] = *b;
	}
	snap->nblocks = keep;
	goto out;
nomem:
	rc = fail(err, KD_ENOMEM, 0, 0, "out of memory reading BLOCKS");
	goto out;
trunc:
	rc = truncated(snap, err);
out:
	free(def);
	win_free(&w);
	return rc;
}

static int read_small(struct kd_snap *snap, const struct sec *x, void *dst, size_t size,
                      int *have, struct kd_dec_error *err)
{
	(void)snap;
	if (x->s.size < size)
		return fail(err, KD_ECORRUPT, 1, x->entry_off + 16,
		            SEC_FMT "size %" PRIu64 " is smaller than the %zu-byte record",
		            SEC_ARGS(x), x->s.size, size);
	memcpy(dst, x->p, size);
	*have = 1;
	return 0;
}

/* LEAN: what the lean mode patched (its size checked by the caller, bytes
 * past the record this reader knows skipped). */
static int read_lean(struct kd_snap *snap, const struct sec *x)
{
	memcpy(&snap->lean, x->p, sizeof(snap->lean));
	snap->have_lean = 1;
	return 0;
}

/* TRIGGER: the record as first written (KTRACE_TRIGGER_REC_SIZE_V1 bytes)
 * or grown since (preempted_ns and after); fields a shorter record lacks
 * read as 0 (unknown), bytes past the ones this reader knows are skipped. */
static int read_trigger(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	size_t n = sizeof(snap->trigger);

	if (x->s.size < KTRACE_TRIGGER_REC_SIZE_V1)
		return fail(err, KD_ECORRUPT, 1, x->entry_off + 16,
		            SEC_FMT "size %" PRIu64 " is smaller than the %u-byte record",
		            SEC_ARGS(x), x->s.size, KTRACE_TRIGGER_REC_SIZE_V1);
	if (x->s.size < n)
		n = (size_t)x->s.size;
	memset(&snap->trigger, 0, sizeof(snap->trigger));
	memcpy(&snap->trigger, x->p, n);
	snap->have_trigger = 1;
	terminate(snap->trigger.kind, sizeof(snap->trigger.kind));
	return 0;
}

/* BUDGET: the record, its cores, its muted functions.  Optional: a section
 * that does not add up is reported and left out. */
static int read_budget(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	const struct ktrace_budget_rec *b = (const void *)x->p;
	uint64_t want;

	if (x->s.size < sizeof(*b)) {
		kd_warn(&snap->warn, x->entry_off + 16,
		             SEC_FMT "size %" PRIu64 " is smaller than the %zu-byte record; ignored",
		             SEC_ARGS(x), x->s.size, sizeof(*b));
		return 0;
	}
	memcpy(&snap->budget, b, sizeof(*b));
	want = sizeof(*b) + (uint64_t)snap->budget.ncores * sizeof(struct ktrace_budget_core_rec) +
	       (uint64_t)x->s.count * sizeof(struct ktrace_muted_rec);
	if (snap->budget.ncores > 65536 || x->s.count > KTRACE_FUNC_ID_COUNT || want != x->s.size) {
		kd_warn(&snap->warn, x->entry_off + 4,
		             SEC_FMT "%" PRIu32 " cores and %" PRIu32 " muted functions do not "
		             "make its %" PRIu64 " bytes; ignored", SEC_ARGS(x), snap->budget.ncores,
		             x->s.count, x->s.size);
		return 0;
	}
	snap->budget_cores = kd_xmalloc(snap->budget.ncores * sizeof(*snap->budget_cores) + 1,
			"the snapshot");
	snap->muted = kd_xmalloc(x->s.count * sizeof(*snap->muted) + 1, "the snapshot");
	if (!snap->budget_cores || !snap->muted)
		return fail(err, KD_ENOMEM, 0, 0, "out of memory (BUDGET section)");
	memcpy(snap->budget_cores, b + 1, snap->budget.ncores * sizeof(*snap->budget_cores));
	memcpy(snap->muted, x->p + sizeof(*b) + snap->budget.ncores * sizeof(*snap->budget_cores),
	       x->s.count * sizeof(*snap->muted));
	snap->nmuted = x->s.count;
	snap->have_budget = 1;
	return 0;
}

/* SCHED: header, cores, records, names; sizes must add up exactly.  A
 * damaged section is dropped with a warning (it is optional). */
static int read_sched(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	struct ktrace_sched_hdr h;
	uint64_t need, nrec = x->s.count;
	const uint8_t *p = x->p;
	uint32_t keep = 0;

	(void)err;
	if (x->s.size < sizeof(h)) {
		kd_warn(&snap->warn, x->s.offset, SEC_FMT "size %" PRIu64 " is smaller than "
		             "its %zu-byte header; scheduling ignored", SEC_ARGS(x), x->s.size,
		             sizeof(h));
		return 0;
	}
	memcpy(&h, p, sizeof(h));
	need = sizeof(h) + (uint64_t)h.ncores * sizeof(struct ktrace_sched_core) +
	       nrec * sizeof(struct ktrace_sched_rec) +
	       (uint64_t)h.nnames * sizeof(struct ktrace_sched_name);
	if (need != x->s.size) {
		kd_warn(&snap->warn, x->s.offset, SEC_FMT "size %" PRIu64 " does not match "
		             "%" PRIu32 " cores, %" PRIu64 " records and %" PRIu32 " names (%" PRIu64
		             " bytes); scheduling ignored", SEC_ARGS(x), x->s.size, h.ncores, nrec,
		             h.nnames, need);
		return 0;
	}
	terminate(h.what, sizeof(h.what));
	snap->sched_cores = kd_xmalloc(((size_t)h.ncores + 1) * sizeof(*snap->sched_cores),
			"the snapshot");
	snap->sched_recs = kd_xmalloc(((size_t)nrec + 1) * sizeof(*snap->sched_recs),
			"the snapshot");
	snap->sched_names = kd_xmalloc(((size_t)h.nnames + 1) * sizeof(*snap->sched_names),
			"the snapshot");
	if (!snap->sched_cores || !snap->sched_recs || !snap->sched_names)
		return fail(err, KD_ENOMEM, 0, 0, "out of memory");
	p += sizeof(h);
	memcpy(snap->sched_cores, p, (size_t)h.ncores * sizeof(*snap->sched_cores));
	p += (size_t)h.ncores * sizeof(*snap->sched_cores);
	for (uint64_t i = 0; i < nrec; i++, p += sizeof(struct ktrace_sched_rec)) {
		struct ktrace_sched_rec r;

		memcpy(&r, p, sizeof(r));
		if (r.what < KTRACE_SCHED_IN || r.what > KTRACE_SCHED_OUT_PREEMPT)
			continue;
		snap->sched_recs[keep++] = r;
	}
	if (keep != nrec)
		kd_warn(&snap->warn, x->s.offset, SEC_FMT "%" PRIu64 " switch records of "
		             "unknown kind skipped", SEC_ARGS(x), nrec - keep);
	memcpy(snap->sched_names, p, (size_t)h.nnames * sizeof(*snap->sched_names));
	for (uint32_t i = 0; i < h.nnames; i++)
		terminate(snap->sched_names[i].name, sizeof(snap->sched_names[i].name));
	snap->nsched_recs = keep;
	snap->sched = h;
	snap->have_sched = 1;
	return 0;
}

/*
 * REQUESTS (format 2): header, then per kind its record, then per slice its
 * record and buckets.  Hostile input: every count is checked against the
 * bytes left before anything is allocated or read, so allocations are
 * bounded by the section's size.  A CRC-good section that does not add up
 * is a fatal error naming the offset (the policy at the top of this file);
 * counts that disagree (kept > ended, buckets that do not sum to a slice's
 * count) are warnings: the histogram is still shown.
 */
#define REQ_MAX_SUB_BITS 8u   /* the writer uses 4; 2^8 sub-buckets is plenty */
#define REQ_MAX_BUCKET(sb) ((64u - (sb) + 1u) << (sb)) /* a u64 value's bucket < this */

static int read_requests(struct kd_snap *snap, const struct sec *x, struct kd_dec_error *err)
{
	struct ktrace_req_hdr h;
	const uint8_t *p = x->p;
	uint64_t left = x->s.size, off = x->s.offset, nslices = 0, nbuckets = 0;
	uint32_t bucket_lim;

	if (left < sizeof(h))
		return fail(err, KD_ECORRUPT, 1, off,
		            SEC_FMT "size %" PRIu64 " is smaller than its %zu-byte header",
		            SEC_ARGS(x), left, sizeof(h));
	memcpy(&h, p, sizeof(h));
	if (h.sub_bits < 1 || h.sub_bits > REQ_MAX_SUB_BITS)
		return fail(err, KD_ECORRUPT, 1, off + offsetof(struct ktrace_req_hdr, sub_bits),
		            SEC_FMT "sub_bits %" PRIu32 " is not in 1..%u", SEC_ARGS(x), h.sub_bits,
		            REQ_MAX_SUB_BITS);
	if (!h.slice_ticks)
		return fail(err, KD_ECORRUPT, 1, off + offsetof(struct ktrace_req_hdr, slice_ticks),
		            SEC_FMT "slice_ticks is 0", SEC_ARGS(x));
	if ((uint64_t)h.nkinds * sizeof(struct ktrace_req_kind_rec) > left - sizeof(h))
		return fail(err, KD_ECORRUPT, 1, off,
		            SEC_FMT "%" PRIu32 " kinds do not fit in its %" PRIu64 " bytes",
		            SEC_ARGS(x), h.nkinds, x->s.size);
	bucket_lim = REQ_MAX_BUCKET(h.sub_bits);
	/* Pass 1: walk the records, check every count against what is left. */
	p += sizeof(h);
	off += sizeof(h);
	left -= sizeof(h);
	for (uint32_t k = 0; k < h.nkinds; k++) {
		struct ktrace_req_kind_rec kr;

		if (left < sizeof(kr))
			return fail(err, KD_ECORRUPT, 1, off,
			            SEC_FMT "kind %" PRIu32 " of %" PRIu32 " runs past its end",
			            SEC_ARGS(x), k, h.nkinds);
		memcpy(&kr, p, sizeof(kr));
		p += sizeof(kr);
		off += sizeof(kr);
		left -= sizeof(kr);
		if ((uint64_t)kr.nslices * sizeof(struct ktrace_req_slice_rec) > left)
			return fail(err, KD_ECORRUPT, 1, off - sizeof(kr) +
			            offsetof(struct ktrace_req_kind_rec, nslices),
			            SEC_FMT "kind %" PRIu32 ": %" PRIu32 " slices do not fit in the "
			            "%" PRIu64 " bytes left", SEC_ARGS(x), k, kr.nslices, left);
		if (kr.kept_slow > kr.ended || kr.kept_sampled > kr.ended || kr.kept_other > kr.ended ||
		    kr.dropped > kr.ended)
			kd_warn(&snap->warn, off - sizeof(kr), SEC_FMT "kind %" PRIu32 ": kept or "
			        "dropped counts exceed the %" PRIu64 " requests ended", SEC_ARGS(x), k,
			        kr.ended);
		nslices += kr.nslices;
		for (uint32_t s = 0; s < kr.nslices; s++) {
			struct ktrace_req_slice_rec sr;
			uint64_t sum = 0;
			uint32_t prev = 0;

			if (left < sizeof(sr))
				return fail(err, KD_ECORRUPT, 1, off,
				            SEC_FMT "kind %" PRIu32 " slice %" PRIu32 " runs past its end",
				            SEC_ARGS(x), k, s);
			memcpy(&sr, p, sizeof(sr));
			if (sr.end_tsc < sr.start_tsc)
				return fail(err, KD_ECORRUPT, 1, off,
				            SEC_FMT "kind %" PRIu32 " slice %" PRIu32 " ends (%" PRIu64
				            ") before it starts (%" PRIu64 ")", SEC_ARGS(x), k, s,
				            sr.end_tsc, sr.start_tsc);
			p += sizeof(sr);
			off += sizeof(sr);
			left -= sizeof(sr);
			if ((uint64_t)sr.nbuckets * sizeof(struct ktrace_req_bucket) > left)
				return fail(err, KD_ECORRUPT, 1, off - sizeof(sr) +
				            offsetof(struct ktrace_req_slice_rec, nbuckets),
				            SEC_FMT "kind %" PRIu32 " slice %" PRIu32 ": %" PRIu32
				            " buckets do not fit in the %" PRIu64 " bytes left",
				            SEC_ARGS(x), k, s, sr.nbuckets, left);
			for (uint32_t i = 0; i < sr.nbuckets; i++) {
				struct ktrace_req_bucket bk;

				memcpy(&bk, p, sizeof(bk));
				if (bk.bucket >= bucket_lim || (i && bk.bucket <= prev) || !bk.count)
					return fail(err, KD_ECORRUPT, 1, off,
					            SEC_FMT "kind %" PRIu32 " slice %" PRIu32 " bucket %" PRIu32
					            ": index %" PRIu32 " count %" PRIu32 " (indices must "
					            "ascend below %" PRIu32 ", counts be non-zero)",
					            SEC_ARGS(x), k, s, i, bk.bucket, bk.count, bucket_lim);
				prev = bk.bucket;
				sum += bk.count;
				p += sizeof(bk);
				off += sizeof(bk);
				left -= sizeof(bk);
			}
			if (sum != sr.count)
				kd_warn(&snap->warn, off, SEC_FMT "kind %" PRIu32 " slice %" PRIu32
				        ": buckets hold %" PRIu64 " requests, the slice says %" PRIu64,
				        SEC_ARGS(x), k, s, sum, sr.count);
			nbuckets += sr.nbuckets;
		}
	}
	if (left)
		kd_warn(&snap->warn, off, SEC_FMT "%" PRIu64 " bytes after its last kind; ignored",
		        SEC_ARGS(x), left);
	/* Each slice takes 40 bytes and each bucket 8 of a section that fit the
	 * file: both counts are below 2^32 for any file under 32 GiB. */
	if (nslices > UINT32_MAX - 1 || nbuckets > UINT32_MAX - 1)
		return fail(err, KD_ECORRUPT, 1, x->s.offset, SEC_FMT "too many slices or buckets",
		            SEC_ARGS(x));
	snap->req_kinds = kd_xcalloc((size_t)h.nkinds + 1, sizeof(*snap->req_kinds), "the snapshot");
	snap->req_slices = kd_xcalloc((size_t)nslices + 1, sizeof(*snap->req_slices), "the snapshot");
	snap->req_buckets = kd_xcalloc((size_t)nbuckets + 1, sizeof(*snap->req_buckets),
	                               "the snapshot");
	if (!snap->req_kinds || !snap->req_slices || !snap->req_buckets)
		return fail(err, KD_ENOMEM, 0, 0, "out of memory (REQUESTS section)");
	/* Pass 2: copy (every bound was checked above). */
	p = x->p + sizeof(h);
	for (uint32_t k = 0, ns = 0, nb = 0; k < h.nkinds; k++) {
		struct kd_snap_req_kind *kk = &snap->req_kinds[k];

		memcpy(&kk->rec, p, sizeof(kk->rec));
		p += sizeof(kk->rec);
		kk->first_slice = ns;
		for (uint32_t s = 0; s < kk->rec.nslices; s++, ns++) {
			struct kd_snap_req_slice *sl = &snap->req_slices[ns];

			memcpy(&sl->rec, p, sizeof(sl->rec));
			p += sizeof(sl->rec);
			sl->first_bucket = nb;
			memcpy(&snap->req_buckets[nb], p, (size_t)sl->rec.nbuckets * sizeof(struct ktrace_req_bucket));
			p += (size_t)sl->rec.nbuckets * sizeof(struct ktrace_req_bucket);
			nb += sl->rec.nbuckets;
		}
	}
	snap->req_hdr = h;
	snap->nreq_slices = (uint32_t)nslices;
	snap->nreq_buckets = (uint32_t)nbuckets;
	snap->have_reqs = 1;
	return 0;
}

/* ---- the file ------------------------------------------------------------ */

/* Load section x's payload for pass 2 (a copy when reading a file). */
static int sec_load(struct kd_snap *snap, struct sec *x)
{
	if (snap->src.buf) {
		x->p = snap->src.buf + x->s.offset;
		return 0;
	}
	x->mem = kd_xmalloc((size_t)x->s.size + 1, "a section");
	x->p = x->mem;
	return kd_read_pread(snap->src.fd, x->mem, x->s.offset, x->s.size, snap->src.path,
	                    snap->src.len) == x->s.size ? 0 : -1;
}

static void sec_unload(struct sec *x)
{
	free(x->mem);
	x->mem = NULL;
	x->p = NULL;
}

/* Stage 1 on snap->src (kd_snap_read, kd_snap_read_fd). */
static int snap_read(struct kd_snap *snap, struct kd_dec_error *err)
{
	struct ktrace_file_header *h = &snap->hdr;
	struct ktrace_file_header tmp;
	struct sec *secs = NULL;
	struct kd_win w = { 0 };
	uint64_t len = snap->src.len;
	const uint8_t *p;
	uint32_t crc, seen = 0, info_idx = UINT32_MAX;
	int rc = 0;

	if (!host_is_little_endian())
		return fail(err, KD_EFORMAT, 0, 0,
		            "this decoder runs on little-endian hosts only");
	if (len < 8)
		return fail(err, KD_EFORMAT, 1, 0,
		            "not a ktrace snapshot (%" PRIu64 " bytes, too short for the magic)", len);
	if (!(p = src_get(&snap->src, &w, 4096, 0, len < HDR_SIZE ? 8 : HDR_SIZE))) {
		rc = truncated(snap, err);
		goto out;
	}
	if (memcmp(p, KTRACE_FILE_MAGIC, 8) != 0) {
		rc = fail(err, KD_EFORMAT, 1, 0, "not a ktrace snapshot (bad magic)");
		goto out;
	}
	if (len < HDR_SIZE) {
		rc = fail(err, KD_ECORRUPT, 1, len,
		          "file truncated: %" PRIu64 " bytes, the header alone is %zu", len, HDR_SIZE);
		goto out;
	}
	memcpy(h, p, HDR_SIZE);
	win_free(&w);
	if (h->byte_order != KTRACE_BYTE_ORDER_MARK) {
		if (h->byte_order == 0x04030201u)
			return fail(err, KD_EFORMAT, 1, 8,
			            "big-endian snapshot (byte order mark 04 03 02 01 reversed); "
			            "this decoder reads little-endian files only");
		return fail(err, KD_ECORRUPT, 1, 8,
		            "bad byte order mark 0x%08" PRIx32 " (expected 0x%08x)", h->byte_order,
		            KTRACE_BYTE_ORDER_MARK);
	}
	/* Version 1 has no held runs, compact requests or REQUESTS section;
	 * everything else is laid out the same, so both are read here. */
	if (h->version < 1 || h->version > KTRACE_FORMAT_VERSION)
		return fail(err, KD_EFORMAT, 1, 12,
		            "unsupported format version %u (this decoder reads versions 1 to %u)",
		            h->version, KTRACE_FORMAT_VERSION);
	if (h->header_size != HDR_SIZE)
		return fail(err, KD_ECORRUPT, 1, 14,
		            "header_size %u is not %zu", h->header_size, HDR_SIZE);
	tmp = *h;
	tmp.header_crc = 0;
	crc = kd_crc32c(0, &tmp, sizeof(tmp));
	if (crc != h->header_crc)
		return fail(err, KD_ECORRUPT, 1,
		            offsetof(struct ktrace_file_header, header_crc),
		            "header CRC 0x%08" PRIx32 " does not match the computed 0x%08" PRIx32,
		            h->header_crc, crc);
	if (h->file_size > len)
		return fail(err, KD_ECORRUPT, 1, len,
		            "file truncated: header says %" PRIu64 " bytes, file has %" PRIu64,
		            h->file_size, len);
	if (h->file_size < len) {
		kd_warn(&snap->warn, h->file_size,
		             "%" PRIu64 " bytes after the end the header gives; ignored",
		             len - h->file_size);
		len = h->file_size;
		snap->src.len = len;
	}
	if (h->section_entry_size != SEC_SIZE)
		return fail(err, KD_ECORRUPT, 1, 20,
		            "section_entry_size %" PRIu32 " is not %zu", h->section_entry_size,
		            SEC_SIZE);
	if (h->section_table_offset < HDR_SIZE || h->section_table_offset % 8 ||
	    h->section_table_offset > len)
		return fail(err, KD_ECORRUPT, 1, 24,
		            "section table offset 0x%" PRIx64 " is outside the file or misaligned",
		            h->section_table_offset);
	if ((uint64_t)h->section_count * SEC_SIZE > len - h->section_table_offset)
		return fail(err, KD_ECORRUPT, 1, 16,
		            "section table (%" PRIu32 " entries at 0x%" PRIx64
		            ") runs past the end of the file (%" PRIu64 " bytes)", h->section_count,
		            h->section_table_offset, len);
	if (h->section_count == 0)
		return fail(err, KD_ECORRUPT, 1, 16, "section table is empty (no INFO)");

	secs = kd_xcalloc(h->section_count, sizeof(*secs), "the section table");

	/* Pass 1: bounds of every entry, CRCs, find INFO. */
	for (uint32_t i = 0; i < h->section_count; i++) {
		struct sec *x = &secs[i];

		x->index = i;
		x->entry_off = h->section_table_offset + (uint64_t)i * SEC_SIZE;
		if (!(p = src_get(&snap->src, &w, WIN_SCAN, x->entry_off, SEC_SIZE))) {
			rc = truncated(snap, err);
			goto out;
		}
		memcpy(&x->s, p, SEC_SIZE);
		if (x->s.offset % 8 || x->s.offset < HDR_SIZE) {
			rc = fail(err, KD_ECORRUPT, 1, x->entry_off + 8,
			          SEC_FMT "offset 0x%" PRIx64 " is misaligned or inside the header",
			          SEC_ARGS(x), x->s.offset);
			goto out;
		}
		if (x->s.offset > len || x->s.size > len - x->s.offset) {
			rc = fail(err, KD_ECORRUPT, 1, x->entry_off + 8,
			          SEC_FMT "at 0x%" PRIx64 " size %" PRIu64
			          " runs past the end of the file (%" PRIu64 " bytes)",
			          SEC_ARGS(x), x->s.offset, x->s.size, len);
			goto out;
		}
		/* BLOCKS' CRC is checked in its one walk (read_blocks). */
		if (((x->s.type >= KTRACE_SEC_INFO && x->s.type <= KTRACE_SEC_TRIGGER) ||
		     x->s.type == KTRACE_SEC_BUDGET || x->s.type == KTRACE_SEC_SCHED ||
		     x->s.type == KTRACE_SEC_REQUESTS || x->s.type == KTRACE_SEC_BUILDIDS ||
		     x->s.type == KTRACE_SEC_LEAN) &&
		    x->s.type != KTRACE_SEC_BLOCKS) {
			crc = 0;
			if (src_crc(&snap->src, &w, x->s.offset, x->s.size, &crc)) {
				rc = truncated(snap, err);
				goto out;
			}
			x->crc_ok = crc == x->s.crc;
			if (x->s.type == KTRACE_SEC_INFO && info_idx == UINT32_MAX)
				info_idx = i;
		}
	}
	if (info_idx == UINT32_MAX) {
		rc = fail(err, KD_ECORRUPT, 1, h->section_table_offset,
		          "no INFO section in the section table");
		goto out;
	}
	win_free(&w);
	if (sec_load(snap, &secs[info_idx])) {
		rc = truncated(snap, err);
		goto out;
	}
	rc = read_info(snap, &secs[info_idx], err);
	sec_unload(&secs[info_idx]);
	if (rc)
		goto out;

	/* Pass 2: everything else, in table order. */
	for (uint32_t i = 0; i < h->section_count; i++) {
		struct sec *x = &secs[i];
		uint32_t type = x->s.type;

		if (type == KTRACE_SEC_REQUESTS || type == KTRACE_SEC_SCHED ||
		    type == KTRACE_SEC_LEAN) {
			/* Sections the blocks decode without: a damaged or a
			 * second one is warned about and skipped. */
			int have = type == KTRACE_SEC_REQUESTS ? snap->have_reqs :
			           type == KTRACE_SEC_SCHED ? snap->have_sched : snap->have_lean;
			const char *why = !x->crc_ok ? "CRC mismatch" : have ? "is a second one" :
			        type == KTRACE_SEC_REQUESTS && h->version < 2 ? "in a format 1 file" :
			        type == KTRACE_SEC_LEAN && x->s.size < sizeof(snap->lean) ?
			        "is smaller than its record" : NULL;

			if (why) {
				kd_warn(&snap->warn, x->s.offset, SEC_FMT "%s; decoding without it",
				        SEC_ARGS(x), why);
				continue;
			}
			if (sec_load(snap, x)) {
				rc = truncated(snap, err);
				goto out;
			}
			rc = type == KTRACE_SEC_REQUESTS ? read_requests(snap, x, err) :
			     type == KTRACE_SEC_SCHED ? read_sched(snap, x, err) : read_lean(snap, x);
			sec_unload(x);
			if (rc)
				goto out;
			continue;
		}
		if ((type < KTRACE_SEC_INFO || type > KTRACE_SEC_TRIGGER || type == KTRACE_SEC_INFO) &&
		    type != KTRACE_SEC_BUDGET && type != KTRACE_SEC_BUILDIDS)
			continue; /* unknown types are skipped: the format is append-only */
		if (type != KTRACE_SEC_BLOCKS) {
			if (seen & (1u << type)) {
				kd_warn(&snap->warn, x->entry_off,
				             SEC_FMT "is a second section of this type; ignored",
				             SEC_ARGS(x));
				continue;
			}
			seen |= 1u << type;
			if (!x->crc_ok) {
				kd_warn(&snap->warn, x->s.offset,
				             SEC_FMT "CRC mismatch; decoding without it", SEC_ARGS(x));
				continue;
			}
		}
		if (type != KTRACE_SEC_BLOCKS && sec_load(snap, x)) {
			rc = truncated(snap, err);
			goto out;
		}
		switch (type) {
		case KTRACE_SEC_ANCHORS: rc = read_anchors(snap, x, err); break;
		case KTRACE_SEC_FUNCS: rc = read_funcs(snap, x, err); break;
		case KTRACE_SEC_THREADS: rc = read_threads(snap, x, err); break;
		case KTRACE_SEC_NAMES: rc = read_names(snap, x, err); break;
		case KTRACE_SEC_MODULES: rc = read_modules(snap, x, err); break;
		case KTRACE_SEC_BUILDIDS: rc = read_buildids(snap, x, err); break;
		case KTRACE_SEC_LOSS:
			rc = read_small(snap, x, &snap->loss, sizeof(snap->loss), &snap->have_loss, err);
			break;
		case KTRACE_SEC_CORES: rc = read_cores(snap, x, err); break;
		case KTRACE_SEC_BLOCKS: rc = read_blocks(snap, x, err); break;
		case KTRACE_SEC_TRIGGER: rc = read_trigger(snap, x, err); break;
		case KTRACE_SEC_BUDGET: rc = read_budget(snap, x, err); break;
		}
		sec_unload(x);
		if (rc)
			goto out;
	}
out:
	win_free(&w);
	if (secs)
		for (uint32_t i = 0; i < h->section_count; i++)
			sec_unload(&secs[i]);
	free(secs);
	if (rc)
		kd_snap_free(snap);
	return rc;
}

int kd_snap_read(const void *buf, size_t len, struct kd_snap *snap,
                      struct kd_dec_error *err)
{
	memset(snap, 0, sizeof(*snap));
	snap->src.buf = buf;
	snap->src.len = len;
	snap->src.fd = -1;
	return snap_read(snap, err);
}

int kd_snap_read_fd(int fd, const struct stat *st, const char *path, struct kd_snap *snap,
                         struct kd_dec_error *err)
{
	int rc;

	memset(snap, 0, sizeof(*snap));
	snap->src.fd = fd;
	snap->src.len = (uint64_t)st->st_size;
	snap->src.path = kd_xstrdup(path, "the file name");
	snap->src.mtime_ns = mtime_ns(st);
	snap->src.ino = (uint64_t)st->st_ino;
	rc = snap_read(snap, err);
	if (rc)
		kd_snap_free(snap); /* also what an early error left: fd, path */
	return rc;
}

void kd_snap_free(struct kd_snap *snap)
{
	if (snap->wins)
		for (uint32_t i = 0; i < snap->ncores; i++)
			win_free(&snap->wins[i]);
	free(snap->wins);
	snap->wins = NULL;
	if (snap->src.path && snap->src.fd >= 0)
		close(snap->src.fd); /* kd_snap_read_fd's, the only owner of one */
	snap->src.fd = -1;
	free(snap->src.path);
	snap->src.path = NULL;
	free(snap->anchors);
	free(snap->buildids);
	free(snap->threads);
	for (uint32_t i = 0; i < snap->nnames; i++)
		free(snap->names[i].str);
	free(snap->names);
	for (uint32_t i = 0; i < snap->nmodules; i++)
		free(snap->modules[i].path);
	free(snap->modules);
	free(snap->core_recs);
	free(snap->blocks);
	free(snap->cores);
	free(snap->budget_cores);
	free(snap->muted);
	snap->budget_cores = NULL;
	snap->muted = NULL;
	snap->nmuted = 0;
	snap->have_budget = 0;
	free(snap->sched_cores);
	free(snap->sched_recs);
	free(snap->sched_names);
	snap->sched_cores = NULL;
	snap->sched_recs = NULL;
	snap->sched_names = NULL;
	snap->have_sched = 0;
	snap->nsched_recs = 0;
	free(snap->req_kinds);
	free(snap->req_slices);
	free(snap->req_buckets);
	snap->req_kinds = NULL;
	snap->req_slices = NULL;
	snap->req_buckets = NULL;
	snap->have_reqs = 0;
	snap->nreq_slices = snap->nreq_buckets = 0;
	kd_warnings_free(&snap->warn);
	snap->anchors = NULL;
	snap->buildids = NULL;
	snap->nbuildids = 0;
	snap->threads = NULL;
	snap->names = NULL;
	snap->modules = NULL;
	snap->core_recs = NULL;
	snap->blocks = NULL;
	snap->cores = NULL;
	snap->nanchors = snap->nthreads = snap->nnames = snap->nmodules = 0;
	snap->ncore_recs = snap->nblocks = snap->ncores = 0;
}

const char *kd_snap_name(const struct kd_snap *snap, uint32_t id)
{
	uint32_t lo = 0, hi = snap->nnames;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (snap->names[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < snap->nnames && snap->names[lo].id == id)
		return snap->names[lo].str;
	return NULL;
}

const struct ktrace_thread_rec *kd_snap_thread(const struct kd_snap *snap,
                                                    uint32_t slot)
{
	uint32_t lo = 0, hi = snap->nthreads;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (snap->threads[mid].slot < slot)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < snap->nthreads && snap->threads[lo].slot == slot)
		return &snap->threads[lo];
	return NULL;
}

/* ---- file I/O ------------------------------------------------------------- */

/*
 * Open a path named by a user or by a snapshot without ever blocking: a FIFO
 * without a writer, a tty or a device must not hang the decoder at open().
 * O_NONBLOCK is cleared again once fstat() says what it is, for the caller's
 * reads.  Returns the descriptor, or -1 with errno set.
 */
int kd_read_open_path(const char *path, struct stat *st)
{
	int fd, fl;

	/* "-" is standard input (a pipe is read whole, a file in windows). */
	if (strcmp(path, "-") == 0)
		fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
	else
		fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
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

uint64_t kd_read_pread(int fd, void *buf, uint64_t off, uint64_t n, const char *path,
                           uint64_t total)
{
	uint64_t done = 0;

	while (done < n) {
		size_t k = n - done < READ_CHUNK ? (size_t)(n - done) : READ_CHUNK;
		ssize_t r;

		if (kd_read_hook)
			kd_read_hook(path, off + done, total);
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
 * Read what kd_read_open_path opened (fd, st; fd < 0: the open failed with
 * errno) whole into memory, and close it: pipes and sockets
 * (`ktrace-decode <(zcat f.ktrace.gz)`), read to EOF, since they cannot be
 * read twice.  Regular files never come here (kd_snap_read_fd reads them
 * in windows); anything else (a directory, a device) is refused.
 */
int kd_read_whole_fd(int fd, const struct stat *st, char **bufp, size_t *lenp,
                        struct kd_dec_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	char msg[300];

	if (fd < 0) {
		snprintf(msg, sizeof(msg), "cannot open: %s", strerror(errno));
		return kd_util_fail(err, KD_EIO, msg);
	}
	if (S_ISFIFO(st->st_mode) || S_ISSOCK(st->st_mode)) {
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
		         S_ISDIR(st->st_mode)   ? "a directory" :
		         S_ISCHR(st->st_mode)   ? "a character device" :
		         S_ISBLK(st->st_mode)   ? "a block device" : "a special file");
		goto fail_io;
	}
	close(fd);
	*bufp = buf;
	*lenp = len;
	return 0;
fail_io:
	free(buf);
	close(fd);
	return kd_util_fail(err, KD_EIO, msg);
}

