/*
 * snapfile.c - one snapshot file, on the writer thread (writer.c).
 *
 * The writer copies the rings first (the window "now", through ring.c's
 * reader), then the metadata, which by then covers every function, thread
 * and name the rings mention.  The file is created unnamed (O_TMPFILE,
 * mode 0600) and linked into place only when complete, so it appears whole
 * or not at all, even if the process dies mid-write; where O_TMPFILE is
 * unsupported a temporary name opened with O_EXCL|O_NOFOLLOW is renamed
 * instead and unlinked on error.  linkat() and the O_EXCL open never
 * follow a symlink planted in the directory.  A name someone else already
 * took (another user can pre-create the predictable ones in a shared
 * sticky directory) is retried with a random suffix instead of dropping
 * the snapshot.  Every file passes the rate limit (ratelimit.c) first.
 *
 * The writer allocates with mmap only, never malloc, so it does not give
 * the process a malloc arena of its own (64 MiB of address space each).
 *
 * State: the snapshot and name sequence numbers (writer thread only) and
 * the counters bracketing writes that triggers read.  No lock.
 */
#include "snapshot.h"
#include "crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Atomic uint64_t ktrace__snap_busy_since; /* counter at write start, 0 = idle */
_Atomic uint64_t ktrace__snap_last_end;   /* counter at the last write's end */
static uint32_t snap_seq;              /* writer thread */
static unsigned name_seq;              /* writer thread */

/* ---- file output ------------------------------------------------------------ */

struct wout {
	int fd;
	int err;                 /* first errno, 0 if fine */
	uint64_t off;            /* bytes written so far */
	uint32_t crc;            /* running CRC of the current section */
	size_t n;                /* bytes buffered */
	unsigned char buf[1 << 16];
};

static KT_NOINSTR void wflush(struct wout *w)
{
	size_t done = 0;

	while (done < w->n && !w->err) {
		ssize_t r = write(w->fd, w->buf + done, w->n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->err = r < 0 ? errno : ENOSPC;
			break;
		}
		done += (size_t)r;
	}
	w->n = 0;
}

static KT_NOINSTR void wbytes(struct wout *w, const void *p, size_t len)
{
	const unsigned char *s = p;

	w->crc = ktrace__crc32c(w->crc, p, len);
	w->off += len;
	while (len) {
		size_t k = sizeof(w->buf) - w->n;
		if (k > len)
			k = len;
		memcpy(w->buf + w->n, s, k);
		w->n += k;
		s += k;
		len -= k;
		if (w->n == sizeof(w->buf))
			wflush(w);
	}
}

static KT_NOINSTR void wpad8(struct wout *w)
{
	static const unsigned char zero[8];

	if (w->off & 7)
		wbytes(w, zero, 8 - (w->off & 7));
}

struct sec_list {
	struct ktrace_section s[16];
	uint32_t n;
};

static KT_NOINSTR void sec_begin(struct wout *w, struct sec_list *l, uint32_t type)
{
	wpad8(w);
	l->s[l->n].type = type;
	l->s[l->n].offset = w->off;
	w->crc = 0;
}

static KT_NOINSTR void sec_end(struct wout *w, struct sec_list *l, uint32_t count)
{
	struct ktrace_section *s = &l->s[l->n++];

	s->size = w->off - s->offset;
	s->crc = w->crc;
	s->count = count;
	s->flags = 0;
}

static KT_NOINSTR void sec(struct wout *w, struct sec_list *l, uint32_t type,
                           const void *p, size_t len, uint32_t count)
{
	sec_begin(w, l, type);
	wbytes(w, p, len);
	sec_end(w, l, count);
}

/* 64 unpredictable bits for a name: getrandom, else the counter mixed. */
static KT_NOINSTR uint64_t name_random(void)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r))
		return r;
	r = ktrace__now() ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)&r;
	r ^= r >> 33;
	r *= 0xff51afd7ed558ccdull;
	return r ^ (r >> 33);
}

/* Open an unnamed file in dir (or a unique temporary name); -1 on error. */
static KT_NOINSTR int open_tmp(const char *dir, char *tmp, size_t tmplen)
{
	int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);

	tmp[0] = 0;
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	for (int i = 0; i < 100; i++) {
		snprintf(tmp, tmplen, "%s/.ktrace-%d-%016llx.tmp", dir, (int)getpid(),
		         (unsigned long long)name_random());
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0)
		tmp[0] = 0;
	return fd;
}

/* Give the finished file its final, unique name. */
static KT_NOINSTR int publish(int fd, const char *tmp, const char *dir, char *path,
                              size_t pathlen)
{
	char proc[64], stamp[32];

	ktrace__utc_stamp((int64_t)time(NULL), stamp, sizeof(stamp));
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	++name_seq;
	for (int i = 0; i < 100; i++) {
		int r;

		/* The plain name first; if taken, the same with a random suffix
		 * nobody can guess ahead. */
		if (i == 0)
			snprintf(path, pathlen, "%s/ktrace-%d-%s-%u.ktrace", dir, (int)getpid(),
			         stamp, name_seq);
		else
			snprintf(path, pathlen, "%s/ktrace-%d-%s-%u-%016llx.ktrace", dir,
			         (int)getpid(), stamp, name_seq,
			         (unsigned long long)name_random());
		if (tmp[0]) {
			/* The temporary name is ours (O_EXCL); never replace an
			 * existing entry: link then unlink the temporary. */
			r = link(tmp, path);
			if (r == 0)
				unlink(tmp);
		} else {
			r = linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
			if (r != 0 && errno == ENOENT)  /* no /proc: needs privilege */
				r = linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH);
		}
		if (r == 0)
			return 0;
		if (errno != EEXIST)
			return -1;
	}
	errno = EEXIST;
	return -1;
}

static KT_NOINSTR void fill_info(struct ktrace_info_rec *in, const char *reason,
                                 uint64_t snap_tsc, int64_t snap_rt)
{
	ssize_t n;

	memset(in, 0, sizeof(*in));
	in->tsc_hz = ktrace__tsc_hz();
	in->snapshot_tsc = snap_tsc;
	in->snapshot_realtime_ns = snap_rt;
	in->start_tsc = ktrace__g.start_tsc;
	in->tsc_shift = ktrace__g.tsc_shift;
	in->clock_source = (uint32_t)ktrace__g.clock_source;
	in->pid = (uint32_t)getpid();
	in->ncpus = ktrace__g.ncpus;
	in->block_words = KTRACE_BLOCK_WORDS;
	in->func_id_count = KTRACE_FUNC_ID_COUNT;
	in->flags = ktrace__g.use_rseq ? KTRACE_INFO_RSEQ : 0;
	in->flags |= ktrace__filter_on() ? KTRACE_INFO_FILTER : 0;
	in->flags |= ktrace__lean_info_flags();
	if (ktrace__cfg.secure)
		in->flags |= KTRACE_INFO_SECURE;
	if (ktrace__signal_taken())
		in->flags |= KTRACE_INFO_SIGNAL_TAKEN;
	in->signo = ktrace__signal_installed();
	in->snapshot_seq = snap_seq;
	in->ring_bytes_per_core = (uint64_t)ktrace__g.ring_words * 4;
	in->prev_write_end_tsc = kt_load(&ktrace__snap_last_end, relaxed);
	snprintf(in->reason, sizeof(in->reason), "%s", reason ? reason : "");
	n = readlink("/proc/self/exe", in->exe, sizeof(in->exe) - 1);
	in->exe[n > 0 ? n : 0] = 0;
	gethostname(in->hostname, sizeof(in->hostname) - 1);
}

/* ---- memory --------------------------------------------------------------- */

/* The writer's memory: mmap, never malloc (file comment).  NULL on failure. */
static KT_NOINSTR void *map(size_t bytes)
{
	int64_t t0 = ktrace__monotonic_ns();
	void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	/* relaxed: a flag (memlock.c); the program's lock is not ours to hold. */
	if (p != MAP_FAILED && kt_load(&ktrace__mlock_future, relaxed))
		munlock(p, bytes ? bytes : 1);
	/* the first write's fault holds the lock too (ktrace__map_own) */
	if (p != MAP_FAILED)
		*(volatile char *)p = 0;
	ktrace__filter_own_mm(t0, ktrace__monotonic_ns());   /* the mapping lock: filter.c */
	return p == MAP_FAILED ? NULL : p;
}

static KT_NOINSTR void unmap(void *p, size_t bytes)
{
	if (p)
		ktrace__unmap_own(p, bytes ? bytes : 1);
}

/* For the writer's other files (filter.c, sched.c): zeroed memory from
 * map(), its size kept in the 64 bytes before it; NULL on failure. */
KT_NOINSTR void *ktrace__walloc(size_t bytes)
{
	unsigned char *p = map(bytes + 64);

	if (p == NULL)
		return NULL;
	*(size_t *)p = bytes + 64;
	return p + 64;
}

KT_NOINSTR void ktrace__wfree(void *p)
{
	if (p)
		unmap((unsigned char *)p - 64, *(size_t *)((unsigned char *)p - 64));
}

/* n arrays of sz[i] bytes in one ktrace__walloc (one mmap), each at a
 * 64-byte boundary, into *dst[i]; the whole (ktrace__wfree), or NULL. */
KT_NOINSTR void *ktrace__walloc_parts(int n, const size_t *sz, void **const *dst)
{
	size_t off = 0;
	unsigned char *p;

	for (int i = 0; i < n; i++)
		off += (sz[i] + 63) & ~(size_t)63;
	p = ktrace__walloc(off);
	if (p == NULL)
		return NULL;
	off = 0;
	for (int i = 0; i < n; i++) {
		*dst[i] = p + off;
		off += (sz[i] + 63) & ~(size_t)63;
	}
	return p;
}



/* The buffers one snapshot needs besides the ring copies, in one mapping. */
struct meta_bufs {
	void *base;   /* all of them (ktrace__walloc_parts) */
	struct kt_ring_cursor *cur;
	struct ktrace_core_rec *cores;
	uint64_t *states;
	struct wout *w;
	struct ktrace_func_rec *funcs;
	struct ktrace_thread_rec *threads;
	struct ktrace_anchor_rec *anchors;
	void *names, *mods;
	struct sec_list *secs;
	struct ktrace_buildid_rec *bids;   /* KT_MODS_MAX */
};

#define KT_ANCHORS_MAX 4096
#define KT_NAMES_CAP (4096 * 72)
#define KT_MODS_CAP (1024 * 296)
#define KT_MODS_MAX 1024   /* funcs.c's KT_MODULES */

static KT_NOINSTR int meta_alloc(struct meta_bufs *m, uint32_t ncpus, size_t nf, size_t nt)
{
	size_t sz[11] = {
		ncpus * sizeof(*m->cur), ncpus * sizeof(*m->cores), ncpus * sizeof(*m->states),
		sizeof(*m->w), nf * sizeof(*m->funcs), nt * sizeof(*m->threads),
		KT_ANCHORS_MAX * sizeof(*m->anchors), KT_NAMES_CAP, KT_MODS_CAP,
		sizeof(*m->secs), KT_MODS_MAX * sizeof(*m->bids)};
	void **dst[11] = {(void **)&m->cur, (void **)&m->cores, (void **)&m->states,
	                  (void **)&m->w, (void **)&m->funcs, (void **)&m->threads,
	                  (void **)&m->anchors, &m->names, &m->mods, (void **)&m->secs,
	                  (void **)&m->bids};
	m->base = ktrace__walloc_parts(11, sz, dst);
	return m->base ? 0 : -1;
}

#define BLK_BYTES (sizeof(struct ktrace_block_rec) + KTRACE_BLOCK_WORDS * 4)

/*
 * A store in each page of [p, p + len), a fresh zero mapping of ours,
 * after MADV_POPULATE_WRITE.  The populate alone is not enough under some
 * hypervisors: on this project's CI VMs (Firecracker) it maps the pages
 * in 0.5 us each, and the first access from user space to each one still
 * costs 5 us more (a 64 MiB copy: 85-170 ms instead of 5); the copy then
 * ran at 500 MB/s, slower than two threads filling their rings, and lost
 * half of a full 64 MiB ring (test_e2e_hostile full_64mib_ring_under_load).
 * Taken here, before the mark, that cost no longer slows the race; it
 * delays the mark instead: ~80 ms per 64 MiB ring there, core after core
 * (a 16-core process with full 64 MiB rings: over a second), nothing
 * where the populate backs the pages.  The program may feel it: in a
 * microbenchmark, a thread calling mprotect every 20 us while another
 * touched 64 MiB so had 1.4 % of its calls over 5 us (0.1 % otherwise:
 * the TLB flush waits for the touching cpu, out of the guest at each
 * page), no block.  Where the populate is not supported (kernels before
 * 5.14) the stores fault the pages in.
 */
static KT_NOINSTR void touch_pages(void *p, size_t len, int populated)
{
	int64_t t0 = ktrace__monotonic_ns();

	for (size_t i = 0; i < len; i += 4096)
		((volatile char *)p)[i] = 0;
	if (!populated)   /* page faults took the mapping lock (filter.c) */
		ktrace__filter_own_mm(t0, ktrace__monotonic_ns());
}

/*
 * Room to copy core c: the whole ring, or as much of it as the address
 * space allows (the rest is counted as not copied: no memory).  Pages are
 * faulted in before the copy, as far as the ring is used, so the race
 * with the program's threads (ring.c, "Readers") is run at memcpy speed.
 */
static KT_NOINSTR void *copy_alloc(uint32_t c, uint32_t *max_blocks, size_t *bytes)
{
	uint64_t used = kt_load(&ktrace__g.cores[c].blocks_used, relaxed); /* a hint */
	uint32_t want = ktrace__g.nblocks;
	void *p = NULL;

	*max_blocks = 0;
	*bytes = 0;
	if (used == 0)
		return NULL;
	for (; want > 0; want /= 2) {
		p = map((size_t)want * BLK_BYTES);
		if (p)
			break;
	}
	if (p == NULL)
		return NULL;
	*max_blocks = want;
	*bytes = (size_t)want * BLK_BYTES;
	used += 64;   /* blocks the writer may still claim before the mark */
	size_t len = (size_t)(used < want ? used : want) * BLK_BYTES;
	if (ktrace__populate_write(p, len) == 0)
		touch_pages(p, len, 1);
	else if (errno == EINVAL)   /* no MADV_POPULATE_WRITE (before 5.14) */
		touch_pages(p, len, 0);
	/* else (ENOMEM: a memory limit) the copy faults pages in as it goes,
	 * rather than all of them now. */
	return p;
}

KT_NOINSTR int ktrace__snapshot_write(const char *reason, const struct ktrace_trigger_rec *trig,
                                      char *path_out, size_t path_len)
{
	struct kt_globals *g = &ktrace__g;
	uint32_t ncpus = g->ncpus, total_blocks = 0, nnames = 0, nmods = 0;
	size_t nf = ktrace__funcs_count() + 64, nt = ktrace__threads_count() + 64;
	struct meta_bufs m;
	void **rbuf = NULL;
	size_t *rbytes = NULL, rmeta = 0;
	struct ktrace_info_rec info;
	struct ktrace_loss_rec loss;
	struct ktrace_lean_rec lean;
	struct ktrace_file_header hdr;
	char tmp[4352] = "", path[4352], dir[sizeof(ktrace__cfg.dir)];
	uint64_t snap_tsc, blocks_bytes = 0, win_tsc = 0;
	uint32_t nt_omitted = 0;   /* threads exited before the window */
	int64_t snap_rt;
	int fd = -1, rv = KTRACE_ENOMEM;
	size_t budget_len = 0, reqs_len = 0;
	void *reqs = NULL;
	uint32_t nreqs = 0;
	void *budget = NULL;   /* the BUDGET section (filter.c) */
	uint32_t nmuted = 0;
	size_t sched_len = 0;
	uint32_t nsched = 0;
	void *sched = NULL;         /* the SCHED section (sched.c) */
	size_t nanch;
	double fcap = kt_load_cfg(max_files_per_min);
	double bcap = (double)kt_load_cfg(max_mb_per_min) * 1048576.0;

	memset(&m, 0, sizeof(m));
	ktrace__cfg_dir(dir, sizeof(dir));
	if (dir[0] == 0) {
		ktrace__warn_once(KT_WARN_SECURE_NO_DIR, "no snapshot directory: this is a setuid/setgid program "
		                  "(secure execution), which takes no setting from the "
		                  "environment; it must choose one with "
		                  "ktrace_setting(\"KTRACE_DIR\", ...); the snapshot is dropped");
		ktrace__writer_set_writing(0);
		return KTRACE_ENODIR;
	}
	if (!ktrace__rate_files_ok(fcap, bcap)) {
		ktrace__writer_set_writing(0);
		return ktrace__rate_refuse("too many files in the last minute");
	}
	ktrace__writer_set_writing(1);
	/* relaxed: read by triggers as a hint; a request racing with the
	 * start sees either value, and either choice is safe. */
	kt_store(&ktrace__snap_busy_since, ktrace__now() | 1, relaxed);
	rmeta = ncpus * (sizeof(void *) + sizeof(size_t));
	rbuf = map(rmeta);
	if (rbuf == NULL || meta_alloc(&m, ncpus, nf, nt) != 0)
		goto out;
	rbytes = (size_t *)(rbuf + ncpus);
	snap_seq++;

	/* 1. The window: every core's valid blocks, while tracing goes on.
	 * Room first (page faults now, not during the race); then all
	 * positions in one quick pass, so the cores' windows end within a
	 * microsecond of each other (copy_tsc says exactly where each one
	 * ends); then the copy, oldest blocks first, in slices of 16 blocks,
	 * always from the core whose writer is closest to the next block
	 * (ring.c, "Readers"). */
	for (uint32_t c = 0; c < ncpus; c++)   /* cores[c].nblocks: room, for now */
		rbuf[c] = copy_alloc(c, &m.cores[c].nblocks, &rbytes[c]);
	/* The page faults above used up this thread's time slice; start the
	 * race with a fresh one rather than be preempted right after the
	 * mark, when the copy has no lead on the writers yet. */
	sched_yield();
	snap_tsc = ktrace__now();
	snap_rt = ktrace__realtime_ns();
	for (uint32_t c = 0; c < ncpus; c++)
		m.states[c] = ktrace__ring_mark(c, &m.cores[c].copy_tsc);
	for (uint32_t c = 0; c < ncpus; c++) {
		struct kt_core *k = &g->cores[c];
		uint32_t room = m.cores[c].nblocks;

		ktrace__ring_cursor_init(&m.cur[c], c, m.states[c], rbuf[c], room);
		m.cores[c].cpu = c;
		m.cores[c].nblocks = g->nblocks;
		m.cores[c].blocks_used = kt_load(&k->blocks_used, relaxed);
		m.cores[c].words_written = kt_load(&k->words_written, relaxed);
	}
	for (;;) {
		uint32_t best = ncpus, bm = UINT32_MAX;
		for (uint32_t c = 0; c < ncpus; c++) {
			uint32_t mg;
			if (m.cur[c].left == 0)
				continue;
			mg = ktrace__ring_cursor_margin(&m.cur[c]);
			if (mg < bm || best == ncpus) {
				bm = mg;
				best = c;
			}
		}
		if (best == ncpus)
			break;
		ktrace__ring_cursor_step(&m.cur[best], 16);
	}
	memset(&loss, 0, sizeof(loss));
	for (uint32_t c = 0; c < ncpus; c++) {
		total_blocks += m.cur[c].kept;
		blocks_bytes += m.cur[c].bytes;
		loss.count[KTRACE_LOSS_NOT_COPIED_OVERWRITTEN] += m.cur[c].lost;
		loss.count[KTRACE_LOSS_NOT_COPIED_NO_MEMORY] += m.cur[c].no_room;
	}

	/* The window's start: the oldest copied block's BLOCK_START time over
	 * all cores (format: header, type word, S, tsc lo, tsc hi). */
	for (uint32_t c = 0; c < ncpus; c++) {
		const struct ktrace_block_rec *b = (const void *)rbuf[c];
		const uint32_t *wd = (const uint32_t *)(b + 1);
		uint64_t t;

		if (m.cur[c].bytes < sizeof(*b) + 5 * 4 || b->nwords < 5 ||
		    KTRACE_REC_EV(wd[0]) != 4 || KTRACE_EXT_TYPE(wd[1]) != KTRACE_EXT_BLOCK_START)
			continue;
		t = wd[3] | (uint64_t)wd[4] << 32;
		if (win_tsc == 0 || t < win_tsc)
			win_tsc = t;
	}

	/* 2. Metadata, which now covers everything the copied blocks name. */
	ktrace__anchor_take();
	nanch = ktrace__anchors_copy(m.anchors, KT_ANCHORS_MAX);
	nf = ktrace__funcs_copy(m.funcs, nf);
	nt = ktrace__threads_copy(m.threads, nt, win_tsc, &nt_omitted);
	size_t names_len = ktrace__names_serialize(m.names, KT_NAMES_CAP, &nnames);
	size_t mods_len = ktrace__modules_serialize(m.mods, KT_MODS_CAP, &nmods);
	size_t nbids = ktrace__modules_buildids(m.bids, KT_MODS_MAX, nmods);
	fill_info(&info, reason, snap_tsc, snap_rt);
	info.flags |= ktrace__sched_info_flags();
	info.threads_omitted = nt_omitted;
	sched = ktrace__sched_serialize(&sched_len, &nsched);

	/* The byte budget, now that the size is known (within the small
	 * metadata); refused before anything touches the disk. */
	uint64_t est = blocks_bytes + sizeof(hdr) + sizeof(info) + names_len + mods_len +
	               nf * sizeof(*m.funcs) + nt * sizeof(*m.threads) + 4096;
	if (!ktrace__rate_bytes_ok(est, bcap)) {
		rv = ktrace__rate_refuse("too many bytes in the last minute");
		goto out;
	}
	for (int i = 0; i < KTRACE_LOSS_COUNT; i++)
		if (i != KTRACE_LOSS_NOT_COPIED_OVERWRITTEN && i != KTRACE_LOSS_NOT_COPIED_NO_MEMORY)
			loss.count[i] = kt_load(&g->loss[i], relaxed);

	/* 3. The file. */
	struct wout *w = m.w;
	struct sec_list *secs = m.secs;
	rv = KTRACE_EIO;
	fd = open_tmp(dir, tmp, sizeof(tmp));
	if (fd < 0) {
		ktrace__warn_once(KT_WARN_ERRNO(KT_WARN_CREATE, errno), "cannot create a snapshot file in '%s': %s; the snapshot "
		                  "is dropped and tracing continues (set KTRACE_DIR to a writable "
		                  "directory)", dir, strerror(errno));
		goto out;
	}
	memset(w, 0, offsetof(struct wout, buf));
	w->fd = fd;
	memset(&hdr, 0, sizeof(hdr));
	wbytes(w, &hdr, sizeof(hdr));
	sec(w, secs, KTRACE_SEC_INFO, &info, sizeof(info), 1);
	sec(w, secs, KTRACE_SEC_ANCHORS, m.anchors, nanch * sizeof(*m.anchors), (uint32_t)nanch);
	sec(w, secs, KTRACE_SEC_FUNCS, m.funcs, nf * sizeof(*m.funcs), (uint32_t)nf);
	sec(w, secs, KTRACE_SEC_THREADS, m.threads, nt * sizeof(*m.threads), (uint32_t)nt);
	sec(w, secs, KTRACE_SEC_NAMES, m.names, names_len, nnames);
	sec(w, secs, KTRACE_SEC_MODULES, m.mods, mods_len, nmods);
	sec(w, secs, KTRACE_SEC_BUILDIDS, m.bids, nbids * sizeof(*m.bids), (uint32_t)nbids);
	sec(w, secs, KTRACE_SEC_LOSS, &loss, sizeof(loss), 1);
	sec(w, secs, KTRACE_SEC_CORES, m.cores, ncpus * sizeof(*m.cores), ncpus);
	if (trig)
		sec(w, secs, KTRACE_SEC_TRIGGER, trig, sizeof(*trig), 1);
	if ((budget = ktrace__budget_serialize(&budget_len, &nmuted)) != NULL)
		sec(w, secs, KTRACE_SEC_BUDGET, budget, budget_len, nmuted);
	if (sched)
		sec(w, secs, KTRACE_SEC_SCHED, sched, sched_len, nsched);
	if ((reqs = ktrace__requests_serialize(&reqs_len, &nreqs)) != NULL)
		sec(w, secs, KTRACE_SEC_REQUESTS, reqs, reqs_len, nreqs);
	if (ktrace__lean_record(&lean))
		sec(w, secs, KTRACE_SEC_LEAN, &lean, sizeof(lean), 1);
	sec_begin(w, secs, KTRACE_SEC_BLOCKS);
	for (uint32_t c = 0; c < ncpus; c++) {
		unsigned char *p = rbuf[c], *end = p + m.cur[c].bytes;
		while (p < end) {
			struct ktrace_block_rec *b = (struct ktrace_block_rec *)p;
			size_t wl = (size_t)b->nwords * 4;
			b->crc = ktrace__crc32c(0, b + 1, wl);
			wbytes(w, b, sizeof(*b) + wl);
			p += sizeof(*b) + wl;
		}
	}
	sec_end(w, secs, total_blocks);
	wpad8(w);
	memcpy(hdr.magic, KTRACE_FILE_MAGIC, 8);
	hdr.byte_order = KTRACE_BYTE_ORDER_MARK;
	hdr.version = KTRACE_FORMAT_VERSION;
	hdr.header_size = sizeof(hdr);
	hdr.section_count = secs->n;
	hdr.section_entry_size = sizeof(struct ktrace_section);
	hdr.section_table_offset = w->off;
	wbytes(w, secs->s, secs->n * sizeof(struct ktrace_section));
	hdr.file_size = w->off;
	hdr.header_crc = ktrace__crc32c(0, &hdr, sizeof(hdr));
	wflush(w);
	if (!w->err && pwrite(fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		w->err = errno ? errno : EIO;
	if (w->err) {
		ktrace__warn_once(KT_WARN_ERRNO(KT_WARN_WRITE, w->err), "cannot write a snapshot in '%s': %s; no partial file is "
		                  "left and tracing continues (free space or raise the file size "
		                  "limit)", dir, strerror(w->err));
		goto out;
	}
	if (publish(fd, tmp, dir, path, sizeof(path)) != 0) {
		ktrace__warn_once(KT_WARN_ERRNO(KT_WARN_PUBLISH, errno), "cannot name the snapshot file in '%s': %s; the snapshot "
		                  "is dropped and tracing continues", dir, strerror(errno));
		goto out;
	}
	tmp[0] = 0;
	rv = 0;
	ktrace__rate_debit(w->off);
	if (path_out)
		snprintf(path_out, path_len, "%s", path);
	if (!kt_load_cfg(quiet))
		ktrace__say("wrote %s (%s; %u blocks)", path, reason ? reason : "", total_blocks);
out:
	if (fd >= 0)
		close(fd);
	if (tmp[0] && fd >= 0)
		unlink(tmp);
	if (rv != 0 && rv != KTRACE_ERATE)
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_FAILED, 1);
	if (rbuf) {
		for (uint32_t c = 0; c < ncpus; c++)
			unmap(rbuf[c], rbytes[c]);
		unmap(rbuf, rmeta);
	}
	ktrace__wfree(m.base);
	ktrace__wfree(budget);   /* ktrace__walloc'ed by filter.c, sched.c, trigger.c */
	ktrace__wfree(sched);
	ktrace__wfree(reqs);
	kt_store(&ktrace__snap_last_end, ktrace__now(), relaxed);
	kt_store(&ktrace__snap_busy_since, 0, relaxed);
	ktrace__writer_set_writing(0);
	return rv;
}

/* Fork child: the child's files are numbered from 1 again. */
KT_NOINSTR void ktrace__snapfile_fork_child(void)
{
	snap_seq = 0;
}
