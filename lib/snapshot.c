/*
 * snapshot.c - from a request (signal, API, trigger) to one file on disk.
 *
 * All file work happens on one background thread, the writer, which also
 * takes the clock anchors every 100 ms.  It blocks every signal, so the
 * snapshot signal is delivered to application threads and SIGXFSZ (file
 * size limit) turns into an EFBIG error here instead of killing the
 * process.  Requests reach it through a futex word, wake_seq, which owns
 * no descriptor: a program that closes or reuses descriptor numbers can
 * never make the library read, write or wait on its files.
 *
 *   - the signal handler sets sig_pending, increments wake_seq and calls
 *     FUTEX_WAKE (all async-signal-safe), then chains to a handler the
 *     program had;
 *   - ktrace_snapshot() queues a request under api_mu and waits on api_cv
 *     for the writer to finish it (only the caller waits);
 *   - a trigger (trigger.c) stores its record under trig_mu (held for a
 *     copy of ~100 bytes, never across I/O) with a due time; the writer
 *     waits until then so the aftermath is in the window.
 *
 * The writer sleeps in FUTEX_WAIT on wake_seq with a timeout (the next
 * anchor or a trigger's due time); it never polls or spins.
 *
 * Every file-producing path (signal, API, trigger) passes one rate limit:
 * token buckets of KTRACE_MAX_FILES_PER_MIN files and KTRACE_MAX_MB_PER_MIN
 * MiB, refilled continuously at that rate per minute.  A refused snapshot
 * costs nothing (it is refused before the copy), is counted
 * (KTRACE_LOSS_SNAPSHOTS_REFUSED, in the next file) and reported once on
 * stderr.  The writer allocates with mmap only, never malloc, so it does
 * not give the process a malloc arena of its own (64 MiB of address
 * space each), and its stack is KT_WRITER_STACK, not the default 8 MiB:
 * under RLIMIT_AS the program keeps its address space for itself.
 *
 * The writer copies the rings first (the window "now"), then the metadata,
 * which by then covers every function, thread and name the rings mention.
 * The file is created unnamed (O_TMPFILE, mode 0600) and linked into place
 * only when complete, so it appears whole or not at all, even if the
 * process dies mid-write; where O_TMPFILE is unsupported a temporary name
 * opened with O_EXCL|O_NOFOLLOW is renamed instead and unlinked on error.
 * linkat() and the O_EXCL open never follow a symlink planted in the
 * directory.  A name someone else already took (another user can
 * pre-create the predictable ones in a shared sticky directory) is retried
 * with a random suffix instead of dropping the snapshot.
 */
#include "internal.h"
#include "crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The writer's stack: its deepest path (a snapshot, and one with a stderr
 * message) uses 23 KiB of it, TLS included (measured by scanning the
 * stack for the deepest non-zero byte); sanitizers need more. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KT_WRITER_STACK (1024 * 1024)
#else
#define KT_WRITER_STACK (128 * 1024)
#endif

/* Incremented by every request, after its flag or queue entry is set
 * (release: pairs with the writer's acquire load before it looks at the
 * requests); FUTEX_WAIT on it returns at once if it moved since. */
static _Atomic uint32_t wake_seq;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "wake_seq must be lock-free in a handler");
/* Set by the signal handler (a lock-free atomic: async-signal-safe), taken
 * by the writer, read by the exit wait.  relaxed everywhere: wake_seq
 * orders it for the writer, and nothing else is published through it. */
static _Atomic int sig_pending;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "sig_pending must be lock-free in a handler");
static struct sigaction prev_action;
static int have_prev_action;
static pthread_t writer;
static _Atomic int writer_running;
static _Atomic int writing;            /* 1 while a file is being written */
_Atomic uint64_t ktrace__snap_busy_since; /* counter at write start, 0 = idle */
_Atomic uint64_t ktrace__snap_last_end;   /* counter at the last write's end */
static uint32_t snap_seq;              /* writer thread */
static unsigned name_seq;              /* writer thread */
/* Signal our handler is on, 0 = none; written by install_signal (start-up,
 * ktrace_setting), read by the writer (check_signal, fill_info).  relaxed
 * everywhere: a free-standing value, re-read to detect a change. */
static _Atomic int installed_signo;
/* 1 while the program's own handler is on installed_signo instead of
 * ours (writer thread: check_signal; read by fill_info). */
static _Atomic int signal_taken;

/* Rate limit, writer thread only: tokens left (files, bytes) and when they
 * were last refilled (monotonic ns, 0 = never: full buckets). */
static double rl_files, rl_bytes;
static int64_t rl_when;

static pthread_mutex_t api_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t api_cv = PTHREAD_COND_INITIALIZER;
static uint64_t api_asked, api_done;   /* under api_mu */
static char api_reason[128];           /* under api_mu */
static int api_result;                 /* under api_mu */
static char last_path[4352];           /* under api_mu */

static pthread_mutex_t trig_mu = PTHREAD_MUTEX_INITIALIZER;
static int trig_pending;               /* under trig_mu */
static struct ktrace_trigger_rec trig_rec; /* under trig_mu */
static int64_t trig_due_ns;            /* under trig_mu: monotonic */
static uint64_t trig_suppressed;       /* under trig_mu */
static int64_t trig_times[600];        /* under trig_mu: recent trigger files */
static uint32_t trig_times_n;          /* under trig_mu */
/* KTRACE_TRIGGER_ON=run: triggers whose run time is not known yet wait
 * here (several: one that turns out to be mostly preemption must not hide
 * a genuinely slow one that ended during its delay).  See "Trigger on run
 * time" below. */
#define KT_RUN_QUEUE 8
static struct ktrace_trigger_rec run_q[KT_RUN_QUEUE]; /* under trig_mu */
static int64_t run_due[KT_RUN_QUEUE];  /* under trig_mu: monotonic ns */
static uint32_t run_n;                 /* under trig_mu */

/* ---- messages ------------------------------------------------------------ */

static _Atomic uint64_t warned;        /* bit per message key */

KT_NOINSTR void ktrace__warn_once(int key, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	/* relaxed: only decides whether to print; a duplicate line in a race
	 * is harmless. */
	if (kt_load(&warned, relaxed) & (1ull << (key & 63)))
		return;
	kt_add(&warned, 1ull << (key & 63), relaxed);
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ktrace__say("%s", buf);
}

/* Async-signal-safe: one atomic add and one system call. */
static KT_NOINSTR void wake(void)
{
	int saved = errno;

	/* release: the request set before this call (sig_pending, or an
	 * entry under api_mu / trig_mu) is visible to a writer that loads
	 * the new value with acquire. */
	kt_add(&wake_seq, 1, release);
	syscall(SYS_futex, &wake_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = saved;
}

/* ---- signal --------------------------------------------------------------- */

static KT_NOINSTR void on_signal(int sig, siginfo_t *si, void *uc)
{
	kt_store(&sig_pending, 1, relaxed);
	wake();
	if (have_prev_action) {
		if (prev_action.sa_flags & SA_SIGINFO) {
			if (prev_action.sa_sigaction)
				prev_action.sa_sigaction(sig, si, uc);
		} else if (prev_action.sa_handler != SIG_DFL &&
		           prev_action.sa_handler != SIG_IGN) {
			prev_action.sa_handler(sig);
		}
	}
}

static KT_NOINSTR void install_signal(void)
{
	struct sigaction sa;
	int signo = kt_load_cfg(signo), old = kt_load(&installed_signo, relaxed);

	if (old != 0) {   /* ktrace_setting: move to another signal */
		/* 0 first: the writer must not take the restored handler for
		 * the program's taking the signal over (check_signal). */
		kt_store(&installed_signo, 0, relaxed);
		sigaction(old, have_prev_action ? &prev_action : NULL, NULL);
		if (!have_prev_action)
			signal(old, SIG_DFL);
		have_prev_action = 0;
	}
	if (signo == 0)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(signo, NULL, &prev_action) == 0 &&
	    prev_action.sa_handler != SIG_DFL && prev_action.sa_handler != SIG_IGN)
		have_prev_action = 1; /* the program's handler keeps running */
	if (sigaction(signo, &sa, NULL) != 0)
		ktrace__say("cannot install the snapshot signal handler (signal %d): %s; "
		            "use ktrace_snapshot() or set KTRACE_SIGNAL", signo, strerror(errno));
	else
		kt_store(&installed_signo, signo, relaxed);
}

/*
 * Start-up installs the handler as soon as the settings are read, before
 * the rings, clocks and context-switch events: until then the snapshot
 * signal has its default action, which ends the process, so the sooner
 * the better.  A signal taken before the writer thread runs waits in
 * sig_pending; the writer's first turn writes its snapshot.  If start-up
 * then fails, ktrace__snapshot_signal_undo() gives the signal back.
 */
KT_NOINSTR void ktrace__snapshot_signal_early(void)
{
	install_signal();
}

KT_NOINSTR void ktrace__snapshot_signal_undo(void)
{
	if (installed_signo == 0)
		return;
	sigaction(installed_signo, have_prev_action ? &prev_action : NULL, NULL);
	if (!have_prev_action)
		signal(installed_signo, SIG_DFL);
	have_prev_action = 0;
	installed_signo = 0;
	kt_store(&sig_pending, 0, relaxed);
}

/* ktrace_setting("KTRACE_SIGNAL", ...): signo is already in ktrace__cfg. */
KT_NOINSTR void ktrace__snapshot_signal_changed(void)
{
	install_signal();
	kt_store(&signal_taken, 0, relaxed);
}

/*
 * Writer thread, about once a second: is our handler still on the
 * snapshot signal?  A program that installs its own after ours (Redis
 * does, for SIGUSR2) silently turns `kill -USR2` into nothing, and the
 * user takes the missing file for tracing being off.  Said once on
 * stderr, with the fix, and in every snapshot while it lasts
 * (KTRACE_INFO_SIGNAL_TAKEN).  Reading a disposition changes nothing.
 */
static KT_NOINSTR void check_signal(void)
{
	struct sigaction cur;
	int signo = kt_load(&installed_signo, relaxed);   /* ktrace_setting may move it */
	int taken;

	if (signo == 0 || sigaction(signo, NULL, &cur) != 0 ||
	    signo != kt_load(&installed_signo, relaxed))
		return;
	taken = !(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_signal;
	/* relaxed: a flag the writer itself reads for the next file. */
	kt_store(&signal_taken, taken, relaxed);
	if (taken)
		ktrace__warn_once(60, "the program installed its own handler for signal %d (%s) "
		                  "over ktrace's: that signal no longer writes a snapshot (tracing "
		                  "goes on); set KTRACE_SIGNAL to a signal the program does not use "
		                  "(e.g. KTRACE_SIGNAL=RTMIN+5) or call ktrace_snapshot()", signo,
		                  signo == SIGUSR2 ? "SIGUSR2" : signo == SIGUSR1 ? "SIGUSR1"
		                  : "a real-time signal");
}

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
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
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
	if (kt_load(&signal_taken, relaxed))
		in->flags |= KTRACE_INFO_SIGNAL_TAKEN;
	in->signo = kt_load(&installed_signo, relaxed);
	in->snapshot_seq = snap_seq;
	in->ring_bytes_per_core = (uint64_t)ktrace__g.ring_words * 4;
	in->prev_write_end_tsc = kt_load(&ktrace__snap_last_end, relaxed);
	snprintf(in->reason, sizeof(in->reason), "%s", reason ? reason : "");
	n = readlink("/proc/self/exe", in->exe, sizeof(in->exe) - 1);
	in->exe[n > 0 ? n : 0] = 0;
	gethostname(in->hostname, sizeof(in->hostname) - 1);
}

/* ---- memory and rate ---------------------------------------------------- */

/* The writer's memory: mmap, never malloc (file comment).  NULL on failure. */
static KT_NOINSTR void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* relaxed: a flag (memlock.c); the program's lock is not ours to hold. */
	if (kt_load(&ktrace__mlock_future, relaxed))
		munlock(p, bytes ? bytes : 1);
	return p;
}

static KT_NOINSTR void unmap(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes ? bytes : 1);
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

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/*
 * Token buckets (file comment).  rate_refill tops them up for the time
 * since the last call; a file needs one file token, and as many byte
 * tokens as it is big unless the byte bucket is full (so a window larger
 * than the limit still gives one file, then waits for the bucket to
 * refill).  Bytes are debited after the write and may go negative.
 */
static KT_NOINSTR void rate_refill(double fcap, double bcap)
{
	int64_t now = ktrace__monotonic_ns();

	if (rl_when == 0) {
		rl_files = fcap;
		rl_bytes = bcap;
	} else {
		double min = (double)(now - rl_when) / 60e9;
		rl_files += fcap * min;
		rl_bytes += bcap * min;
		if (rl_files > fcap)
			rl_files = fcap;
		if (rl_bytes > bcap)
			rl_bytes = bcap;
	}
	rl_when = now;
}

static KT_NOINSTR int rate_refuse(const char *why)
{
	ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_REFUSED, 1);
	ktrace__warn_once(62, "snapshot refused: %s (KTRACE_MAX_FILES_PER_MIN=%u, "
	                  "KTRACE_MAX_MB_PER_MIN=%u); further refusals are only counted, "
	                  "in the next file", why, kt_load_cfg(max_files_per_min),
	                  kt_load_cfg(max_mb_per_min));
	return KTRACE_ERATE;
}

/* The buffers one snapshot needs besides the ring copies, in one mapping. */
struct meta_bufs {
	void *base;
	size_t bytes;
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
	size_t off = 0;
	unsigned char *p;

	for (int i = 0; i < 11; i++)
		off += (sz[i] + 63) & ~(size_t)63;
	p = map(off);
	if (p == NULL)
		return -1;
	m->base = p;
	m->bytes = off;
	for (int i = 0; i < 11; i++) {
		*dst[i] = p;
		p += (sz[i] + 63) & ~(size_t)63;
	}
	return 0;
}

#define BLK_BYTES (sizeof(struct ktrace_block_rec) + KTRACE_BLOCK_WORDS * 4)

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
	madvise(p, (size_t)(used < want ? used : want) * BLK_BYTES, MADV_POPULATE_WRITE);
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
		ktrace__warn_once(61, "no snapshot directory: this is a setuid/setgid program "
		                  "(secure execution), which takes no setting from the "
		                  "environment; it must choose one with "
		                  "ktrace_setting(\"KTRACE_DIR\", ...); the snapshot is dropped");
		kt_store(&writing, 0, relaxed);
		return KTRACE_ENODIR;
	}
	rate_refill(fcap, bcap);
	if (rl_files < 1) {
		kt_store(&writing, 0, relaxed);
		return rate_refuse("too many files in the last minute");
	}
	kt_store(&writing, 1, relaxed);
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
	if (rl_bytes < (double)est && rl_bytes < bcap) {
		rv = rate_refuse("too many bytes in the last minute");
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
		ktrace__warn_once(errno, "cannot create a snapshot file in '%s': %s; the snapshot "
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
		ktrace__warn_once(w->err, "cannot write a snapshot in '%s': %s; no partial file is "
		                  "left and tracing continues (free space or raise the file size "
		                  "limit)", dir, strerror(w->err));
		goto out;
	}
	if (publish(fd, tmp, dir, path, sizeof(path)) != 0) {
		ktrace__warn_once(errno, "cannot name the snapshot file in '%s': %s; the snapshot "
		                  "is dropped and tracing continues", dir, strerror(errno));
		goto out;
	}
	tmp[0] = 0;
	rv = 0;
	rl_files -= 1;
	rl_bytes -= (double)w->off;
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
	unmap(m.base, m.bytes);
	ktrace__wfree(budget);   /* ktrace__walloc'ed by filter.c, sched.c, trigger.c */
	ktrace__wfree(sched);
	ktrace__wfree(reqs);
	kt_store(&ktrace__snap_last_end, ktrace__now(), relaxed);
	kt_store(&ktrace__snap_busy_since, 0, relaxed);
	kt_store(&writing, 0, relaxed);
	return rv;
}

/* ---- trigger on run time ----------------------------------------------------- */

/*
 * A request's wall time on a busy host includes time it was runnable but
 * not running (preempted by other work).  Every trigger record carries the
 * preempted and blocked time of the request's thread within [begin, end],
 * from the context-switch records (sched.c), which the writer drains; the
 * writer measures it after the trigger's delay, when the records of the
 * request's end are in.  With KTRACE_TRIGGER_ON=run, a trigger whose wall
 * time minus preempted time is not over its threshold is dropped there,
 * before the rate limit (it takes no file token), and counted
 * (KTRACE_LOSS_TRIGGERS_PREEMPTED).  Where switches are not recorded (off,
 * refused, or records lost in the interval), the wall time decides and the
 * record says so (KTRACE_TRIGGER_RUN_FELL_BACK).
 */

/* Fill the record's scheduling fields; 1 if they were measured. */
static KT_NOINSTR int trigger_sched_fill(struct ktrace_trigger_rec *t)
{
	int64_t from = ktrace__counter_to_mono_ns(t->begin_tsc);
	int64_t to = ktrace__counter_to_mono_ns(t->end_tsc);
	int64_t blocked = 0, pre;
	uint32_t np = 0;

	t->trigger_on = kt_load_cfg(trigger_on);
	pre = ktrace__sched_request_preempted_ns(t->tid, from, to, &np, &blocked);
	if (pre < 0)
		return 0;
	t->preempted_ns = (uint64_t)pre;
	t->blocked_ns = (uint64_t)blocked;
	t->npreempt = np;
	t->flags |= KTRACE_TRIGGER_SCHED_KNOWN;
	return 1;
}

/* Run mode: 1 if the request was slow for what it did itself. */
static KT_NOINSTR int trigger_run_slow(struct ktrace_trigger_rec *t)
{
	if (!trigger_sched_fill(t)) {
		t->flags |= KTRACE_TRIGGER_RUN_FELL_BACK;
		ktrace__warn_once(60, "KTRACE_TRIGGER_ON=run: the preempted time of a slow request "
		                  "is unknown (context switches are %s); its trigger compares wall "
		                  "time", ktrace__sched_info_flags() ? "lost in its interval"
		                  : "not recorded: see KTRACE_SCHED and perf_event_paranoid");
		return 1;
	}
	return t->duration_ns > t->preempted_ns &&
	       t->duration_ns - t->preempted_ns > t->threshold_ns;
}

/* From the request's thread (ktrace__snapshot_request_trigger), under
 * trig_mu: queue a run-mode trigger; 0, or KTRACE_ERATE when the queue is
 * full (then counted as suppressed by the caller). */
static KT_NOINSTR int run_queue_locked(const struct ktrace_trigger_rec *trig, int64_t due)
{
	if (run_n >= KT_RUN_QUEUE) {
		trig_suppressed++;
		return KTRACE_ERATE;
	}
	run_q[run_n] = *trig;
	run_due[run_n] = due;
	run_n++;
	return 0;
}

/* Writer: the oldest run-mode trigger that is due, checked and through the
 * rate limit, into *out; 0 if none.  A check runs outside trig_mu (it
 * drains the context-switch records). */
static KT_NOINSTR int take_run_trigger(struct ktrace_trigger_rec *out, int64_t now_ns,
                                       int64_t *wait_ns)
{
	for (;;) {
		int have = 0, ok;
		uint32_t keep = 0, max = kt_load_cfg(max_per_min);

		pthread_mutex_lock(&trig_mu);
		if (run_n > 0) {
			if (now_ns >= run_due[0]) {
				*out = run_q[0];
				memmove(run_q, run_q + 1, (run_n - 1) * sizeof(run_q[0]));
				memmove(run_due, run_due + 1, (run_n - 1) * sizeof(run_due[0]));
				run_n--;
				have = 1;
			} else if (run_due[0] - now_ns < *wait_ns) {
				*wait_ns = run_due[0] - now_ns;
			}
		}
		pthread_mutex_unlock(&trig_mu);
		if (!have)
			return 0;
		if (!trigger_run_slow(out)) {
			ktrace__count_loss(KTRACE_LOSS_TRIGGERS_PREEMPTED, 1);
			continue;
		}
		/* The rate limit (as ktrace__snapshot_request_trigger's in wall
		 * mode), now that the trigger is known to count. */
		pthread_mutex_lock(&trig_mu);
		for (uint32_t i = 0; i < trig_times_n; i++)
			if (now_ns - trig_times[i] < 60 * 1000000000LL)
				trig_times[keep++] = trig_times[i];
		trig_times_n = keep;
		ok = trig_times_n < max;
		if (ok) {
			trig_times[trig_times_n++] = now_ns;
			/* The ones queued meanwhile are in this file's window, as a
			 * trigger while one is pending is in wall mode. */
			trig_suppressed += run_n;
			out->suppressed = trig_suppressed;
			trig_suppressed = 0;
			if (run_n)
				ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, run_n);
			run_n = 0;
		} else {
			trig_suppressed++;
		}
		pthread_mutex_unlock(&trig_mu);
		if (ok)
			return 1;
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, 1);
	}
}

/* ---- the writer thread ------------------------------------------------------ */

static KT_NOINSTR int64_t mono_ms(void)
{
	return ktrace__monotonic_ns() / 1000000;
}

/* Trigger due now?  Copies it out under trig_mu. */
static KT_NOINSTR int take_trigger(struct ktrace_trigger_rec *out, int64_t now_ns,
                                   int64_t *wait_ns)
{
	int r = 0;

	pthread_mutex_lock(&trig_mu);
	if (trig_pending) {
		if (now_ns >= trig_due_ns) {
			*out = trig_rec;
			out->suppressed = trig_suppressed;
			trig_suppressed = 0;
			trig_pending = 0;
			r = 1;
		} else if (trig_due_ns - now_ns < *wait_ns) {
			*wait_ns = trig_due_ns - now_ns;
		}
	}
	pthread_mutex_unlock(&trig_mu);
	return r;
}

static KT_NOINSTR void *writer_main(void *arg)
{
	int64_t last_anchor = mono_ms();
	uint32_t ticks = 0;

	(void)arg;
	kt_store(&ktrace__g.hz_cached, ktrace__tsc_hz(), relaxed);
	for (;;) {
		int64_t wait_ns = 100 * 1000000LL, now;
		struct ktrace_trigger_rec trig;
		int have_trig;
		/* acquire: pairs with wake()'s release add; loaded before the
		 * requests are looked at, so a request made after the look
		 * moves wake_seq and FUTEX_WAIT below returns at once. */
		uint32_t seq = kt_load(&wake_seq, acquire);

		ktrace__filter_tick(&wait_ns);   /* the window budget (filter.c) */
		ktrace__lean_tick();             /* patch muted lean functions out */
		ktrace__kinds_tick();            /* the next histogram slice (trigger.c) */
		now = ktrace__monotonic_ns();
		ktrace__sched_drain();
		wait_ns = ktrace__sched_wait_ns(wait_ns);
		have_trig = take_trigger(&trig, now, &wait_ns);
		if (have_trig)
			trigger_sched_fill(&trig);   /* informational in wall mode */
		else
			have_trig = take_run_trigger(&trig, now, &wait_ns);
		if (have_trig)   /* the aftermath ends with the copy (trigger.c) */
			kt_store(&ktrace__g.after_until, ktrace__now(), relaxed);
		if (!have_trig && !kt_load(&sig_pending, relaxed)) {
			pthread_mutex_lock(&api_mu);
			int idle = api_asked == api_done;
			pthread_mutex_unlock(&api_mu);
			if (idle) {
				struct timespec ts = {(time_t)(wait_ns / 1000000000),
				                      (long)(wait_ns % 1000000000) + 1000000};
				if (ts.tv_nsec >= 1000000000) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000;
				}
				syscall(SYS_futex, &wake_seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
			}
		}
		if (mono_ms() - last_anchor >= 100) {
			ktrace__anchor_take();
			last_anchor = mono_ms();
			if (++ticks % 10 == 0)   /* about once a second */
				check_signal();
			/* relaxed: a free-standing estimate, read by triggers. */
			kt_store(&ktrace__g.hz_cached, ktrace__tsc_hz(), relaxed);
		}
		if (kt_load(&sig_pending, relaxed)) {
			char reason[32];
			/* writing before the flag is cleared: ktrace__snapshot_atexit
			 * must never see both at 0 while a request is taken. */
			kt_store(&writing, 1, relaxed);
			kt_store(&sig_pending, 0, relaxed);
			snprintf(reason, sizeof(reason), "signal %s",
			         kt_load_cfg(signo) == SIGUSR2 ? "SIGUSR2"
			         : kt_load_cfg(signo) == SIGUSR1 ? "SIGUSR1" : "RT");
			ktrace__snapshot_write(reason, NULL, NULL, 0);
		}
		if (have_trig) {
			char reason[96];
			snprintf(reason, sizeof(reason), "trigger: slow '%s' request", trig.kind);
			ktrace__snapshot_write(reason, &trig, NULL, 0);
		}
		pthread_mutex_lock(&api_mu);
		while (api_done < api_asked) {
			char reason[128], path[4352] = "";
			uint64_t n = api_asked;
			memcpy(reason, api_reason, sizeof(reason));
			pthread_mutex_unlock(&api_mu);
			int r = ktrace__snapshot_write(reason, NULL, path, sizeof(path));
			pthread_mutex_lock(&api_mu);
			api_result = r;
			if (r == 0)
				memcpy(last_path, path, sizeof(last_path));
			api_done = n;
			pthread_cond_broadcast(&api_cv);
		}
		pthread_mutex_unlock(&api_mu);
	}
	return NULL;
}

/* at_start: from start-up, where a failure turns tracing off; else a
 * fork child's, where only snapshots are lost. */
static KT_NOINSTR int start_writer(int at_start)
{
	sigset_t all, old;
	pthread_attr_t at;
	int r;

	/* The writer inherits a full mask: no signal ever runs on it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, KT_WRITER_STACK);
	r = pthread_create(&writer, &at, writer_main, NULL);
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		ktrace__say("cannot start the snapshot writer thread in process %d: %s%s; %s",
		            (int)getpid(), strerror(r), r == EAGAIN ? " (RLIMIT_NPROC, or the "
		            "system's thread limit, reached)" : "", at_start ? "tracing is off "
		            "and its buffers are given back" : "no snapshot can be written in it");
		return KTRACE_ENOWRITER;
	}
	pthread_setname_np(writer, "ktrace-writer");
	/* release: the state above is visible to any thread that
	 * sees writer_running == 1 with acquire. */
	kt_store(&writer_running, 1, release);
	return 0;
}

KT_NOINSTR int ktrace__snapshot_init(void)
{
	int r = start_writer(1);

	if (r)
		return r;
	if (installed_signo == 0)   /* not yet by ktrace__snapshot_signal_early */
		install_signal();
	return 0;
}

/*
 * After fork(), writer_wanted is set and the writer is started by the
 * first thread of the child that needs it: its first traced event (the
 * thread registers again under its new tid), ktrace_snapshot() or a
 * trigger.  Starting a thread inside the atfork child handler is not
 * allowed by POSIX (only async-signal-safe calls until exec) and a child
 * that only execs should not pay for one.
 */
static _Atomic int writer_wanted;   /* 1: start on first need, 2: starting */

KT_NOINSTR void ktrace__snapshot_ensure_writer(void)
{
	int expect = 1;

	/* acquire: pairs with the fork child's release store. */
	if (kt_load(&writer_wanted, acquire) != 1 ||
	    !kt_cas(&writer_wanted, &expect, 2, acq_rel))
		return;
	start_writer(0);   /* says why when it fails */
	kt_store(&writer_wanted, 0, release);
}

/* Fork child: no writer thread exists here and the mutexes may have been
 * held by a parent thread.  Start over with fresh ones (wake_seq needs
 * nothing: a private futex is this process's own); the writer itself
 * starts on first need (ktrace__snapshot_ensure_writer). */
KT_NOINSTR void ktrace__snapshot_fork_child(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

	memcpy(&api_mu, &m, sizeof(m));
	memcpy(&trig_mu, &m, sizeof(m));
	memcpy(&api_cv, &cv, sizeof(cv));
	api_asked = api_done = 0;
	last_path[0] = 0;
	trig_pending = 0;
	trig_suppressed = 0;
	trig_times_n = 0;
	run_n = 0;
	kt_store(&sig_pending, 0, relaxed);
	snap_seq = 0;
	rl_when = 0;   /* a new process: full buckets */
	kt_store(&writing, 0, relaxed);
	kt_store(&writer_running, 0, relaxed);
	kt_store(&writer_wanted, 1, release);
}

/* exit() while a snapshot is being written: give it up to 2 s to finish so
 * the file the operator asked for is not lost (a file is never partial
 * either way: it is linked into place only when complete).  The 2 s are a
 * CLOCK_MONOTONIC deadline: signals that cut the sleeps short do not
 * shorten the wait. */
static KT_NOINSTR int work_pending(void)
{
	int p = kt_load(&sig_pending, relaxed) || kt_load(&writing, relaxed);

	if (!p) {
		pthread_mutex_lock(&api_mu);
		p = api_asked != api_done;
		pthread_mutex_unlock(&api_mu);
	}
	if (!p) {
		pthread_mutex_lock(&trig_mu);
		p = trig_pending || run_n;
		pthread_mutex_unlock(&trig_mu);
	}
	return p;
}

KT_NOINSTR void ktrace__snapshot_atexit(void)
{
	if (!kt_load(&writer_running, acquire))
		return;
	/* A signal, an API call or a trigger asked for a file that is not
	 * written yet, or one is being written. */
	int64_t end = ktrace__monotonic_ns() + 2000000000LL;

	while (work_pending()) {
		int64_t left = end - ktrace__monotonic_ns();
		struct timespec d = {0, 10 * 1000 * 1000};

		if (left <= 0)
			break;
		if (left < d.tv_nsec)
			d.tv_nsec = (long)left;
		nanosleep(&d, NULL);
	}
}

/* ---- API ---------------------------------------------------------------------- */

__attribute__((visibility("default"))) KT_NOINSTR int ktrace_snapshot(const char *reason)
{
	uint64_t mine;
	int r;

	if (!ktrace__ensure_init())
		return ktrace__off_reason();
	ktrace__hold_before_snapshot();   /* the caller's own request, if any */
	ktrace__snapshot_ensure_writer();
	/* acquire: pairs with the release store in start_writer. */
	if (!kt_load(&writer_running, acquire))
		return KTRACE_ENOTREADY;
	if (pthread_equal(pthread_self(), writer))
		return KTRACE_EBUSY;
	pthread_mutex_lock(&api_mu);
	snprintf(api_reason, sizeof(api_reason), "%s", reason ? reason : "api");
	mine = ++api_asked;
	wake();
	while (api_done < mine)
		pthread_cond_wait(&api_cv, &api_mu);
	r = api_result;
	pthread_mutex_unlock(&api_mu);
	return r;
}

__attribute__((visibility("default"))) KT_NOINSTR int ktrace_last_snapshot(char *buf, size_t len)
{
	int r = KTRACE_EINVAL;
	size_t n;

	if (buf == NULL)
		return KTRACE_EINVAL;
	pthread_mutex_lock(&api_mu);
	n = strlen(last_path);
	if (n > 0 && n < len) {
		memcpy(buf, last_path, n + 1);
		r = (int)n;
	}
	pthread_mutex_unlock(&api_mu);
	return r;
}

/*
 * From trigger.c on the thread that ended a slow request.  Never blocks on
 * I/O: a short critical section under trig_mu, then a pipe write.
 * Rate limit: at most max_per_min trigger files in any 60 s; a trigger
 * while one is pending or over the limit is counted and reported in the
 * next file (ktrace_trigger_rec.suppressed, and the loss counters).
 */
KT_NOINSTR int ktrace__snapshot_request_trigger(const struct ktrace_trigger_rec *trig,
                                                uint32_t delay_ms)
{
	int64_t now = ktrace__monotonic_ns();
	uint32_t keep = 0, max = kt_load_cfg(max_per_min);
	int r = 0;

	ktrace__snapshot_ensure_writer();
	if (!kt_load(&writer_running, acquire))
		return KTRACE_ENOTREADY;
	pthread_mutex_lock(&trig_mu);
	if (kt_load_cfg(trigger_on) == KTRACE_TRIGGER_ON_RUN) {
		/* Checked and rate-limited by the writer (take_run_trigger). */
		r = run_queue_locked(trig, now + (int64_t)delay_ms * 1000000);
		pthread_mutex_unlock(&trig_mu);
		goto done;
	}
	for (uint32_t i = 0; i < trig_times_n; i++)
		if (now - trig_times[i] < 60 * 1000000000LL)
			trig_times[keep++] = trig_times[i];
	trig_times_n = keep;
	if (trig_pending || trig_times_n >= max) {
		trig_suppressed++;
		r = KTRACE_ERATE;
	} else {
		trig_rec = *trig;
		trig_due_ns = now + (int64_t)delay_ms * 1000000;
		trig_pending = 1;
		trig_times[trig_times_n++] = now;
	}
	pthread_mutex_unlock(&trig_mu);
done:
	if (r == 0)
		wake();
	else
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, 1);
	return r;
}
