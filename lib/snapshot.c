/*
 * snapshot.c - from a request (signal, API, trigger) to one file on disk.
 *
 * All file work happens on one background thread, the writer, which also
 * takes the clock anchors every 100 ms.  It blocks every signal, so the
 * snapshot signal is delivered to application threads and SIGXFSZ (file
 * size limit) turns into an EFBIG error here instead of killing the
 * process.  Requests reach it through a pipe:
 *
 *   - the signal handler sets sig_pending and writes one byte (both
 *     async-signal-safe), then chains to a handler the program had;
 *   - ktrace_snapshot() queues a request under api_mu and waits on api_cv
 *     for the writer to finish it (only the caller waits);
 *   - a trigger (trigger.c) stores its record under trig_mu (held for a
 *     copy of ~100 bytes, never across I/O) with a due time; the writer
 *     waits until then so the aftermath is in the window.
 *
 * The writer copies the rings first (the window "now"), then the metadata,
 * which by then covers every function, thread and name the rings mention.
 * The file is created unnamed (O_TMPFILE, mode 0600) and linked into place
 * only when complete, so it appears whole or not at all, even if the
 * process dies mid-write; where O_TMPFILE is unsupported a temporary name
 * opened with O_EXCL|O_NOFOLLOW is renamed instead and unlinked on error.
 * linkat() and the O_EXCL open never follow a symlink planted in the
 * directory.
 */
#include "internal.h"
#include "crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int pipe_rd = -1, pipe_wr = -1;
/* Set by the signal handler (a lock-free atomic: async-signal-safe), taken
 * by the writer, read by the exit wait.  relaxed everywhere: the pipe byte
 * wakes the writer, and nothing else is published through the flag. */
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

static KT_NOINSTR void wake(void)
{
	int saved = errno;
	char c = 1;

	/* Nonblocking pipe: when full, the writer is already awake. */
	if (write(pipe_wr, &c, 1) < 0) {
	}
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
	int signo = ktrace__cfg.signo;

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

/* Open an unnamed file in dir (or a unique temporary name); -1 on error. */
static KT_NOINSTR int open_tmp(const char *dir, char *tmp, size_t tmplen)
{
	int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);

	tmp[0] = 0;
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	for (int i = 0; i < 100; i++) {
		snprintf(tmp, tmplen, "%s/.ktrace-%d-%u-%d.tmp", dir, (int)getpid(),
		         name_seq, i);
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
	for (int i = 0; i < 1000; i++) {
		int r;

		snprintf(path, pathlen, "%s/ktrace-%d-%s-%u.ktrace", dir, (int)getpid(), stamp,
		         ++name_seq);
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
	in->snapshot_seq = snap_seq;
	in->ring_bytes_per_core = (uint64_t)ktrace__g.ring_words * 4;
	in->prev_write_end_tsc = kt_load(&ktrace__snap_last_end, relaxed);
	snprintf(in->reason, sizeof(in->reason), "%s", reason ? reason : "");
	n = readlink("/proc/self/exe", in->exe, sizeof(in->exe) - 1);
	in->exe[n > 0 ? n : 0] = 0;
	gethostname(in->hostname, sizeof(in->hostname) - 1);
}

struct ring_copy {
	void *buf;
	size_t bytes;
	uint32_t nblocks;
};

KT_NOINSTR int ktrace__snapshot_write(const char *reason, const struct ktrace_trigger_rec *trig,
                                      char *path_out, size_t path_len)
{
	struct kt_globals *g = &ktrace__g;
	uint32_t ncpus = g->ncpus, total_blocks = 0, nnames = 0, nmods = 0;
	struct ring_copy *rc = calloc(ncpus, sizeof(*rc));
	struct ktrace_core_rec *cores = calloc(ncpus, sizeof(*cores));
	uint64_t *states = calloc(ncpus, sizeof(*states));
	struct wout *w = malloc(sizeof(*w));
	size_t nf = ktrace__funcs_count() + 64, nt = ktrace__threads_count() + 64;
	struct ktrace_func_rec *funcs = malloc(nf * sizeof(*funcs));
	struct ktrace_thread_rec *threads = malloc(nt * sizeof(*threads));
	struct ktrace_anchor_rec *anchors = malloc(4096 * sizeof(*anchors));
	size_t names_cap = 4096 * 72, mods_cap = 1024 * 296;
	void *names = malloc(names_cap), *mods = malloc(mods_cap);
	struct ktrace_info_rec info;
	struct ktrace_loss_rec loss;
	struct ktrace_file_header hdr;
	struct sec_list *secs = calloc(1, sizeof(*secs));
	char tmp[4352] = "", path[4352];
	uint64_t race = 0, snap_tsc;
	int64_t snap_rt;
	int fd = -1, rv = KTRACE_ENOMEM;
	size_t nanch, budget_len = 0;
	void *budget = NULL;   /* the BUDGET section (filter.c) */
	uint32_t nmuted = 0;
	size_t sched_len = 0;
	uint32_t nsched = 0;
	void *sched = NULL;         /* the SCHED section (sched.c) */

	kt_store(&writing, 1, relaxed);
	/* relaxed: read by triggers as a hint; a request racing with the
	 * start sees either value, and either choice is safe. */
	kt_store(&ktrace__snap_busy_since, ktrace__now() | 1, relaxed);
	if (!rc || !cores || !states || !w || !funcs || !threads || !anchors || !names || !mods || !secs)
		goto out;
	snap_seq++;

	/* 1. The window: every core's valid blocks, while tracing goes on.
	 * All positions are read first, in one quick pass, so the cores'
	 * windows end within a microsecond of each other; copy_tsc says
	 * exactly where each one ends. */
	snap_tsc = ktrace__now();
	snap_rt = ktrace__realtime_ns();
	for (uint32_t c = 0; c < ncpus; c++)
		states[c] = ktrace__ring_mark(c, &cores[c].copy_tsc);
	for (uint32_t c = 0; c < ncpus; c++) {
		struct kt_core *k = &g->cores[c];
		/* Read after the mark above: bounds the blocks ring_copy_at
		 * can accept (they were all claimed before the mark). */
		uint64_t used = kt_load(&k->blocks_used, relaxed);
		uint64_t nb = used < g->nblocks ? used : g->nblocks;

		cores[c].cpu = c;
		cores[c].nblocks = g->nblocks;
		cores[c].blocks_used = used;
		cores[c].words_written = kt_load(&k->words_written, relaxed);
		if (nb == 0)
			continue;
		rc[c].buf = malloc(nb * (sizeof(struct ktrace_block_rec) + KTRACE_BLOCK_WORDS * 4));
		if (rc[c].buf == NULL)
			goto out;
		rc[c].bytes = ktrace__ring_copy_at(c, states[c], rc[c].buf, (uint32_t)nb,
		                                   &rc[c].nblocks, &race);
		total_blocks += rc[c].nblocks;
	}
	if (race)
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOT_RACE, race);

	/* 2. Metadata, which now covers everything the copied blocks name. */
	ktrace__anchor_take();
	nanch = ktrace__anchors_copy(anchors, 4096);
	nf = ktrace__funcs_copy(funcs, nf);
	nt = ktrace__threads_copy(threads, nt);
	size_t names_len = ktrace__names_serialize(names, names_cap, &nnames);
	size_t mods_len = ktrace__modules_serialize(mods, mods_cap, &nmods);
	fill_info(&info, reason, snap_tsc, snap_rt);
	info.flags |= ktrace__sched_info_flags();
	sched = ktrace__sched_serialize(&sched_len, &nsched);
	for (int i = 0; i < KTRACE_LOSS_COUNT; i++)
		loss.count[i] = kt_load(&g->loss[i], relaxed);

	/* 3. The file. */
	rv = KTRACE_EIO;
	fd = open_tmp(ktrace__cfg.dir, tmp, sizeof(tmp));
	if (fd < 0) {
		ktrace__warn_once(errno, "cannot create a snapshot file in '%s': %s; the snapshot "
		                  "is dropped and tracing continues (set KTRACE_DIR to a writable "
		                  "directory)", ktrace__cfg.dir, strerror(errno));
		goto out;
	}
	memset(w, 0, offsetof(struct wout, buf));
	w->fd = fd;
	memset(&hdr, 0, sizeof(hdr));
	wbytes(w, &hdr, sizeof(hdr));
	sec(w, secs, KTRACE_SEC_INFO, &info, sizeof(info), 1);
	sec(w, secs, KTRACE_SEC_ANCHORS, anchors, nanch * sizeof(*anchors), (uint32_t)nanch);
	sec(w, secs, KTRACE_SEC_FUNCS, funcs, nf * sizeof(*funcs), (uint32_t)nf);
	sec(w, secs, KTRACE_SEC_THREADS, threads, nt * sizeof(*threads), (uint32_t)nt);
	sec(w, secs, KTRACE_SEC_NAMES, names, names_len, nnames);
	sec(w, secs, KTRACE_SEC_MODULES, mods, mods_len, nmods);
	sec(w, secs, KTRACE_SEC_LOSS, &loss, sizeof(loss), 1);
	sec(w, secs, KTRACE_SEC_CORES, cores, ncpus * sizeof(*cores), ncpus);
	if (trig)
		sec(w, secs, KTRACE_SEC_TRIGGER, trig, sizeof(*trig), 1);
	if ((budget = ktrace__budget_serialize(&budget_len, &nmuted)) != NULL)
		sec(w, secs, KTRACE_SEC_BUDGET, budget, budget_len, nmuted);
	if (sched)
		sec(w, secs, KTRACE_SEC_SCHED, sched, sched_len, nsched);
	sec_begin(w, secs, KTRACE_SEC_BLOCKS);
	for (uint32_t c = 0; c < ncpus; c++) {
		unsigned char *p = rc[c].buf, *end = p + rc[c].bytes;
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
		                  "limit)", ktrace__cfg.dir, strerror(w->err));
		goto out;
	}
	if (publish(fd, tmp, ktrace__cfg.dir, path, sizeof(path)) != 0) {
		ktrace__warn_once(errno, "cannot name the snapshot file in '%s': %s; the snapshot "
		                  "is dropped and tracing continues", ktrace__cfg.dir,
		                  strerror(errno));
		goto out;
	}
	tmp[0] = 0;
	rv = 0;
	if (path_out)
		snprintf(path_out, path_len, "%s", path);
	if (!ktrace__cfg.quiet)
		ktrace__say("wrote %s (%s; %u blocks)", path, reason ? reason : "", total_blocks);
out:
	if (fd >= 0)
		close(fd);
	if (tmp[0] && fd >= 0)
		unlink(tmp);
	if (rv != 0)
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_FAILED, 1);
	if (rc)
		for (uint32_t c = 0; c < ncpus; c++)
			free(rc[c].buf);
	free(rc);
	free(cores);
	free(states);
	free(w);
	free(funcs);
	free(threads);
	free(anchors);
	free(names);
	free(mods);
	free(secs);
	free(budget);
	free(sched);
	kt_store(&ktrace__snap_last_end, ktrace__now(), relaxed);
	kt_store(&ktrace__snap_busy_since, 0, relaxed);
	kt_store(&writing, 0, relaxed);
	return rv;
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
	char buf[64];

	(void)arg;
	kt_store(&ktrace__g.hz_cached, ktrace__tsc_hz(), relaxed);
	for (;;) {
		int64_t wait_ns = 100 * 1000000LL, now;
		struct ktrace_trigger_rec trig;
		struct pollfd pfd = {pipe_rd, POLLIN, 0};
		int have_trig;

		ktrace__filter_tick(&wait_ns);   /* the window budget (filter.c) */
		now = ktrace__monotonic_ns();
		ktrace__sched_drain();
		wait_ns = ktrace__sched_wait_ns(wait_ns);
		have_trig = take_trigger(&trig, now, &wait_ns);
		if (!have_trig && !kt_load(&sig_pending, relaxed)) {
			pthread_mutex_lock(&api_mu);
			int idle = api_asked == api_done;
			pthread_mutex_unlock(&api_mu);
			if (idle && poll(&pfd, 1, (int)(wait_ns / 1000000) + 1) > 0)
				while (read(pipe_rd, buf, sizeof(buf)) > 0) {
				}
		}
		if (mono_ms() - last_anchor >= 100) {
			ktrace__anchor_take();
			last_anchor = mono_ms();
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
			         ktrace__cfg.signo == SIGUSR2 ? "SIGUSR2"
			         : ktrace__cfg.signo == SIGUSR1 ? "SIGUSR1" : "RT");
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

static KT_NOINSTR int open_pipe(void)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
		return KTRACE_ENOMEM;
	pipe_rd = fds[0];
	pipe_wr = fds[1];
	return 0;
}

static KT_NOINSTR int start_writer(void)
{
	sigset_t all, old;
	pthread_attr_t at;
	int r;

	/* The writer inherits a full mask: no signal ever runs on it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&writer, &at, writer_main, NULL);
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return KTRACE_ENOMEM;
	pthread_setname_np(writer, "ktrace-writer");
	/* release: the pipe and state above are visible to any thread that
	 * sees writer_running == 1 with acquire. */
	kt_store(&writer_running, 1, release);
	return 0;
}

KT_NOINSTR int ktrace__snapshot_init(void)
{
	int r = open_pipe();

	if (r || (r = start_writer()))
		return r;
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
	if (start_writer() != 0)
		ktrace__say("cannot start the snapshot writer in process %d; snapshots are "
		            "off in it", (int)getpid());
	kt_store(&writer_wanted, 0, release);
}

/* Fork child: no writer thread exists here and the mutexes may have been
 * held by a parent thread.  Start over with fresh ones and a new pipe (the
 * inherited one would wake the parent's writer); the writer itself starts
 * on first need (ktrace__snapshot_ensure_writer). */
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
	kt_store(&sig_pending, 0, relaxed);
	snap_seq = 0;
	kt_store(&writing, 0, relaxed);
	kt_store(&writer_running, 0, relaxed);
	close(pipe_rd);
	close(pipe_wr);
	if (open_pipe() != 0) {
		ktrace__say("fork child: no pipe for the snapshot writer; snapshots are off "
		            "in process %d", (int)getpid());
		return;
	}
	kt_store(&writer_wanted, 1, release);
}

/* exit() while a snapshot is being written: give it up to 2 s to finish so
 * the file the operator asked for is not lost (a file is never partial
 * either way: it is linked into place only when complete). */
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
		p = trig_pending;
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
	for (int i = 0; i < 200 && work_pending(); i++) {
		struct timespec d = {0, 10 * 1000 * 1000};
		nanosleep(&d, NULL);
	}
}

/* ---- API ---------------------------------------------------------------------- */

__attribute__((visibility("default"))) KT_NOINSTR int ktrace_snapshot(const char *reason)
{
	uint64_t mine;
	int r;

	if (!ktrace__ensure_init())
		return KTRACE_EDISABLED;
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
	uint32_t keep = 0, max = ktrace__cfg.max_per_min;
	int r = 0;

	ktrace__snapshot_ensure_writer();
	if (!kt_load(&writer_running, acquire))
		return KTRACE_ENOTREADY;
	pthread_mutex_lock(&trig_mu);
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
	if (r == 0)
		wake();
	else
		ktrace__count_loss(KTRACE_LOSS_SNAPSHOTS_SUPPRESSED, 1);
	return r;
}
