/*
 * sched.c - the process's own context switches, from perf_event_open.
 *
 * Linux reports a task's context switches to it through a software dummy
 * event with context_switch=1 and exclude_kernel=1: each time a thread
 * leaves or gets a cpu the kernel writes a PERF_RECORD_SWITCH (misc says
 * out or in, and SWITCH_OUT_PREEMPT that the thread was still runnable)
 * into the event's mmapped buffer.  Allowed for one's own threads at
 * kernel.perf_event_paranoid <= 2, or with CAP_PERFMON.
 *
 * Events.  One per cpu and thread that exists at start-up (pid = tid,
 * cpu = c), with inherit=1 so every thread those threads create later
 * reports into the same per-cpu buffers, and inherit_thread=1 so a fork()
 * child does not (it opens its own: ktrace__sched_fork_child).  A per-task
 * event with inherit cannot be mmapped for cpu -1, hence one per cpu.
 * Records carry TID and TIME (sample_id_all); the cpu is the buffer's.
 *
 * Descriptors.  Each event's fd is closed right after its buffer is
 * mmapped: the mapping holds the event alive and readable (inherited
 * children included), and the library holds no descriptor the program
 * could close and reuse.  The mapping is VM_DONTCOPY (a fork child does
 * not get it) and goes away at exec, which ends the events with it.
 *
 * Clock.  use_clockid = CLOCK_MONOTONIC: the records' times are monotonic
 * ns, written as such; the decoder maps them onto the counter through the
 * ANCHORS section's (tsc, monotonic) pairs, which bracket every record
 * (the writer takes an anchor every 100 ms and at every snapshot), so the
 * interpolation error is the anchors' own (tens of ns).  The exact
 * alternative, perf's own clock converted with the mmap page's
 * time_zero/time_mult/time_shift, needs cap_user_time_zero, which this
 * project's machines (VMs) do not offer.
 *
 * Draining.  Only the writer thread touches the buffers and the window
 * after init (init and the fork child run before it exists).  Every
 * KT_SCHED_PERIOD_MS (KT_SCHED_FAST_MS when a buffer was over a quarter
 * full) it moves the records into a per-core window ring of
 * ktrace_sched_rec, sized from the event ring (KTRACE_BUFFER_MB / 2 per
 * core, pages touched only when used), oldest overwritten.  Records the
 * kernel could not store (PERF_RECORD_LOST) and records overwritten in the
 * window are counted (KTRACE_LOSS_SCHED), and the core's complete_from
 * moves past them so the decoder never takes a gap for time on the cpu.
 * The writer's own switches are not kept.
 *
 * When the kernel refuses, nothing is printed (the tracer is silent by
 * default); the SCHED section of every snapshot says why, with errno and
 * the paranoid level read at start.
 *
 * Sandboxes.  A seccomp filter may kill the process on perf_event_open
 * (SIGSYS: the default action of many allow-list sandboxes), and nothing
 * tells beforehand what a filter does with a call.  So with a filter
 * active (the "Seccomp:" line of /proc/self/status says 2), or when that
 * cannot be read, perf_event_open is not called at all unless the user
 * asked for it (KTRACE_SCHED=on); the section's status says so
 * (KTRACE_SCHED_SECCOMP).  A fork child opens events of its own: it
 * inherits a decision not to, and otherwise reads the line again, since
 * the program may have sandboxed itself after start-up (filters are
 * inherited and never removed, so a child never needs to read it twice).
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KT_SCHED_PAGES     32u   /* data pages per perf buffer (128 KiB) */
#define KT_SCHED_THREADS   64u   /* threads at start-up given events */
#define KT_SCHED_PERIOD_MS 50    /* drain period */
#define KT_SCHED_FAST_MS   10    /* ... when a buffer was over 1/4 full */
#define KT_SCHED_NAMES     1024u /* tids named (power of two) */

struct kt_sched_buf {
	struct perf_event_mmap_page *pg; /* 1 + KT_SCHED_PAGES pages */
	uint32_t core;                   /* index of the cpu */
	uint64_t seen;                   /* data bytes read so far, up to data_size */
};

struct kt_sched_win {
	struct ktrace_sched_rec *rec;    /* cap records, mmapped */
	uint64_t head;                   /* records ever stored */
	int64_t complete_from_ns;        /* monotonic ns: nothing lost after */
};

struct kt_sched_tname {
	int32_t tid;                     /* 0 = empty */
	char name[16];
};

static struct {
	int status;                      /* enum ktrace_sched_status, 0 = not set */
	int err;                         /* errno of the refusal */
	int paranoid;                    /* value at start, INT32_MIN if unknown */
	char what[32];                   /* call that failed */
	int64_t start_ns, end_ns;        /* monotonic ns */
	uint64_t switches, lost;         /* records drained / lost */
	struct kt_sched_buf *bufs;       /* nbufs, mmapped array */
	uint32_t nbufs, maxbufs;
	struct kt_sched_win *wins;       /* ncpus, mmapped array */
	uint32_t ncpus;
	uint64_t cap;                    /* records per window ring, power of two */
	int32_t pid;                     /* getpid() at open: records of others dropped */
	int32_t writer_tid;              /* the draining thread, 0 until known */
	int64_t next_drain_ns;           /* monotonic ns */
	int fast;                        /* drain at the fast period */
	struct kt_sched_tname *names;    /* KT_SCHED_NAMES, open addressing */
	uint32_t nnames;
	int touched;                     /* this drain touched memory first (writer) */
} S;

static KT_NOINSTR void *map_anon(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static KT_NOINSTR int read_paranoid(void)
{
	char buf[32];
	ssize_t n;
	int fd = open("/proc/sys/kernel/perf_event_paranoid", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return INT32_MIN;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return INT32_MIN;
	buf[n] = 0;
	return (int)strtol(buf, NULL, 10);
}

static KT_NOINSTR void refuse(const char *what, int err)
{
	S.status = KTRACE_SCHED_REFUSED;
	S.err = err;
	snprintf(S.what, sizeof(S.what), "%s", what);
}

/*
 * The "Threads:" and "Seccomp:" lines of /proc/self/status (or the
 * calling thread's): the process's thread count (0 when not found) and
 * the thread's seccomp mode, 0 none, 1 strict, 2 filter, -1 when it cannot
 * be read (no /proc: a chroot).  Each line's head is kept, up to 15
 * characters, and looked at when the line ends.  The read stops at the
 * Seccomp line: Linux puts Threads before it, and a file that did not
 * would leave the count unknown (0), never the mode.  Read in small
 * pieces: this runs in the fork child handler and from the first hook,
 * on an application thread's stack (init.c).
 */
static KT_NOINSTR int status_line(const char *l, int *threads, int *mode)
{
	if (strncmp(l, "Threads:", 8) == 0) {
		*threads = (int)strtol(l + 8, NULL, 10);
	} else if (strncmp(l, "Seccomp:", 8) == 0) {
		l += 8;
		while (*l == ' ' || *l == '\t')
			l++;
		if (*l >= '0' && *l <= '9')
			*mode = *l - '0';
		return 1;   /* the last line wanted */
	}
	return 0;
}

static KT_NOINSTR int status_read(int this_thread, int *threads)
{
	char buf[128], line[16];
	size_t ll = 0;
	int fd, mode = -1, done = 0;
	ssize_t n;

	*threads = 0;
	fd = open(this_thread ? "/proc/thread-self/status" : "/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (!done && (n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n && !done; i++) {
			if (buf[i] != '\n') {
				if (ll < sizeof(line) - 1)
					line[ll++] = buf[i];
				continue;
			}
			line[ll] = 0;
			ll = 0;
			done = status_line(line, threads, &mode);
		}
	close(fd);
	return mode;
}

/* ktrace__seccomp_hold's mode (-2: none).  Atomic: start-up ends the hold
 * after it started the writer, whose first batch may ask (either value
 * is right for it: the writer inherited the initialising thread's
 * filter). */
static _Atomic int seccomp_held = -2;
static int threads_held;        /* ... and the thread count with it (0: unknown) */

KT_NOINSTR int ktrace__seccomp_mode(int this_thread)
{
	int threads, held = kt_load(&seccomp_held, relaxed);

	if (held != -2)
		return held;
	return status_read(this_thread, &threads);
}

/*
 * Start-up asks three times, on the initialising thread and microseconds
 * apart (the perf events here, the code's copy in lean.c, the writer's
 * scheduling in writer.c), and each read cost ~30 us: the kernel builds
 * the whole file.  One read of the thread's own mode serves them: a
 * filter of that thread's is what its perf_event_open, its mprotect and
 * the writer it creates meet.  The same read counts the process's
 * threads (ktrace__held_threads).  Off again at the end of start-up and
 * in a fork child (whose parent may have forked during another thread's).
 */
KT_NOINSTR void ktrace__seccomp_hold(int on)
{
	kt_store(&seccomp_held, -2, relaxed);
	threads_held = 0;
	if (on)
		kt_store(&seccomp_held, status_read(1, &threads_held), relaxed);
}

/*
 * The process's threads when start-up began (0: unknown, or not in
 * start-up).  1 stays exact until start-up creates the writer: only the
 * initialising thread could create another one, and it is busy here.
 */
KT_NOINSTR int ktrace__held_threads(void)
{
	return threads_held;
}

/* Whether perf_event_open may be called here (see "Sandboxes"); sets the
 * status to KTRACE_SCHED_SECCOMP when not. */
static KT_NOINSTR int sandbox_allows(void)
{
	int mode;

	if (ktrace__cfg.sched == 2)   /* KTRACE_SCHED=on: the user asked */
		return 1;
	mode = ktrace__seccomp_mode(0);
	if (mode == 0)
		return 1;
	S.status = KTRACE_SCHED_SECCOMP;
	S.err = mode < 0 ? ENOENT : 0;
	snprintf(S.what, sizeof(S.what), "%s", mode < 0 ? "/proc/self/status" : "seccomp");
	return 0;
}

/* Open, map and close one event; 0 or the errno (*what = the failing call). */
static KT_NOINSTR int open_one(int32_t tid, uint32_t core, int inherit_thread,
                               const char **what)
{
	struct perf_event_attr at;
	size_t len = (size_t)(1 + KT_SCHED_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
	void *m;
	int fd, e;

	if (S.nbufs >= S.maxbufs)
		return *what = "buffers", ENOSPC;
	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	at.type = PERF_TYPE_SOFTWARE;
	at.config = PERF_COUNT_SW_DUMMY;
	at.context_switch = 1;
	at.exclude_kernel = 1;
	at.exclude_hv = 1;
	at.sample_id_all = 1;
	at.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	at.inherit = 1;
	at.inherit_thread = (unsigned)inherit_thread;
	at.use_clockid = 1;
	at.clockid = CLOCK_MONOTONIC;
	fd = (int)syscall(SYS_perf_event_open, &at, (pid_t)tid, (int)core, -1,
	                  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return *what = "perf_event_open", errno;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	e = errno;
	close(fd); /* the mapping keeps the event: no descriptor is held */
	if (m == MAP_FAILED)
		return *what = "mmap", e;
	S.bufs[S.nbufs].pg = m;
	S.bufs[S.nbufs].core = core;
	S.bufs[S.nbufs].seen = 0;   /* a fork child's slot: fresh pages */
	S.nbufs++;
	return 0;
}

/* Events for one thread on every cpu; 0 or the errno of the first failure. */
static KT_NOINSTR int open_thread(int32_t tid, const char **what)
{
	static int inherit_thread = 1;
	int e = 0;

	for (uint32_t c = 0; c < S.ncpus; c++) {
		e = open_one(tid, c, inherit_thread, what);
		if (e == EINVAL && inherit_thread && c == 0) {
			/* Kernels before 5.13 lack inherit_thread: fork children
			 * then report into our buffers too, and are dropped by pid. */
			inherit_thread = 0;
			e = open_one(tid, c, 0, what);
		}
		if (e == ENODEV || e == ENXIO)
			continue; /* a possible cpu that is offline */
		if (e)
			return e;
	}
	return 0;
}

static KT_NOINSTR void unmap_bufs(void)
{
	size_t len = (size_t)(1 + KT_SCHED_PAGES) * (size_t)sysconf(_SC_PAGESIZE);

	for (uint32_t i = 0; i < S.nbufs; i++)
		munmap(S.bufs[i].pg, len);
	S.nbufs = 0;
}

/* Events for the threads that exist now (the calling thread included). */
static KT_NOINSTR void open_all(int only_self)
{
	const char *what = "perf_event_open";
	int32_t self = (int32_t)syscall(SYS_gettid);
	int e = open_thread(self, &what);
	DIR *dir;
	struct dirent *de;

	if (e) {
		unmap_bufs();
		refuse(what, e);
		return;
	}
	S.status = KTRACE_SCHED_RECORDED;
	S.pid = (int32_t)getpid();
	S.start_ns = ktrace__monotonic_ns();
	if (only_self || (dir = opendir("/proc/self/task")) == NULL)
		return;
	while ((de = readdir(dir)) != NULL) {
		int32_t tid = (int32_t)strtol(de->d_name, NULL, 10);
		uint32_t before = S.nbufs;

		if (tid <= 0 || tid == self)
			continue;
		/* A thread that exited meanwhile (ESRCH) needs nothing; one
		 * that fails half-way keeps the cpus it got. */
		if (open_thread(tid, &what) && S.nbufs == before)
			continue;
	}
	closedir(dir);
}

KT_NOINSTR int ktrace__sched_init(void)
{
	uint32_t ncpus = ktrace__g.ncpus;

	memset(&S, 0, sizeof(S));
	S.paranoid = read_paranoid();
	if (!ktrace__cfg.sched) {
		S.status = KTRACE_SCHED_OFF;
		return 0;
	}
	S.ncpus = ncpus;
	S.maxbufs = ncpus * KT_SCHED_THREADS;
	/* Window per core: half the event ring's bytes (16-byte records). */
	S.cap = 1;
	while (S.cap * sizeof(struct ktrace_sched_rec) * 2 < (uint64_t)ktrace__g.ring_words * 4)
		S.cap <<= 1;
	S.bufs = map_anon(S.maxbufs * sizeof(*S.bufs));
	S.wins = map_anon(ncpus * sizeof(*S.wins));
	S.names = map_anon(KT_SCHED_NAMES * sizeof(*S.names));
	if (!S.bufs || !S.wins || !S.names) {
		refuse("mmap", ENOMEM);
		return 0;
	}
	for (uint32_t c = 0; c < ncpus; c++)
		if ((S.wins[c].rec = map_anon(S.cap * sizeof(struct ktrace_sched_rec))) == NULL) {
			refuse("mmap", ENOMEM);
			return 0;
		}
	/* One thread: no other to give events (a /proc/self/task walk,
	 * 130-270 us of start-up here); every later one inherits ours. */
	if (sandbox_allows())
		open_all(ktrace__held_threads() == 1);
	return 0;
}

/*
 * Fork child (one thread, before anything else runs in it): the parent's
 * buffers are not mapped here (VM_DONTCOPY) and its window is the
 * parent's history; start clean with events of the child's own, unless
 * the process put itself in a sandbox since (file comment).  open, read,
 * perf_event_open, mmap and close are plain system calls.
 */
KT_NOINSTR void ktrace__sched_fork_child(void)
{
	if (S.status != KTRACE_SCHED_RECORDED)
		return;
	S.nbufs = 0;
	S.switches = S.lost = 0;
	S.writer_tid = 0;
	S.end_ns = 0;   /* not drained yet: the first drain is noted (filter.c) */
	S.nnames = 0;
	memset(S.names, 0, KT_SCHED_NAMES * sizeof(*S.names));
	for (uint32_t c = 0; c < S.ncpus; c++) {
		S.wins[c].head = 0;
		S.wins[c].complete_from_ns = 0;
	}
	if (sandbox_allows())
		open_all(1);
}

/* mlockall() locked everything: unlock the windows (memlock.c). */
KT_NOINSTR void ktrace__sched_unlock(void)
{
	for (uint32_t c = 0; S.wins && c < S.ncpus; c++)
		if (S.wins[c].rec)
			munlock(S.wins[c].rec, S.cap * sizeof(struct ktrace_sched_rec));
}

/* Start-up failed: close the events (their mappings) and free the
 * windows. */
KT_NOINSTR void ktrace__sched_free(void)
{
	unmap_bufs();
	for (uint32_t c = 0; S.wins && c < S.ncpus; c++)
		if (S.wins[c].rec)
			munmap(S.wins[c].rec, S.cap * sizeof(struct ktrace_sched_rec));
	if (S.wins)
		munmap(S.wins, S.ncpus * sizeof(*S.wins));
	if (S.bufs)
		munmap(S.bufs, S.maxbufs * sizeof(*S.bufs));
	if (S.names)
		munmap(S.names, KT_SCHED_NAMES * sizeof(*S.names));
	S.wins = NULL;
	S.bufs = NULL;
	S.names = NULL;
	S.status = KTRACE_SCHED_OFF;
}

KT_NOINSTR uint32_t ktrace__sched_info_flags(void)
{
	return S.status == KTRACE_SCHED_RECORDED ? KTRACE_INFO_SCHED : 0;
}

/* ---- names of the threads seen ----------------------------------------- */

static KT_NOINSTR void note_tid(int32_t tid)
{
	uint32_t h = ((uint32_t)tid * 2654435761u) & (KT_SCHED_NAMES - 1);
	char path[64];
	ssize_t n;
	int fd;

	for (uint32_t k = 0; k < KT_SCHED_NAMES; k++, h = (h + 1) & (KT_SCHED_NAMES - 1)) {
		struct kt_sched_tname *e = &S.names[h];

		if (e->tid == tid)
			return;
		if (e->tid != 0)
			continue;
		if (S.nnames >= KT_SCHED_NAMES / 2)
			return; /* table full enough: the decoder says "tid N" */
		e->tid = tid;
		S.nnames++;
		S.touched = 1;   /* maybe a page of the table written first */
		/* ktrace's own thread table first: no descriptor taken
		 * (ktrace__thread_name_of says why) */
		if (ktrace__thread_name_of(tid, e->name))
			return;
		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		n = read(fd, e->name, sizeof(e->name) - 1);
		close(fd);
		if (n > 0 && e->name[n - 1] == '\n')
			n--;
		e->name[n > 0 ? n : 0] = 0;
		return;
	}
}

/* ---- draining ------------------------------------------------------------ */

static KT_NOINSTR void win_put(uint32_t core, int64_t t, int32_t tid, uint8_t what)
{
	struct kt_sched_win *w = &S.wins[core];
	struct ktrace_sched_rec *r = &w->rec[w->head & (S.cap - 1)];

	if (w->head >= S.cap) {
		/* Overwrite the oldest: the window is complete only after it. */
		if (r->time_ns >= w->complete_from_ns)
			w->complete_from_ns = r->time_ns + 1;
		S.lost++;
		ktrace__count_loss(KTRACE_LOSS_SCHED, 1);
	}
	if (w->head < S.cap && ((w->head * sizeof(*r)) & 4095) == 0)
		S.touched = 1;   /* a page of the window written first */
	r->time_ns = t;
	r->tid = tid;
	r->cpu = (uint16_t)core;
	r->what = what;
	r->flags = 0;
	w->head++;
	S.switches++;
}

/* Copy len bytes at ring offset off (wrapping) out of a perf buffer. */
static KT_NOINSTR void ring_read(const unsigned char *data, uint64_t size, uint64_t off,
                                 void *dst, size_t len)
{
	size_t at = (size_t)(off & (size - 1)), k = (size_t)size - at;

	if (k >= len) {
		memcpy(dst, data + at, len);
	} else {
		memcpy(dst, data + at, k);
		memcpy((char *)dst + k, data, len - k);
	}
}

/* Drain one buffer; returns the bytes that were waiting. */
static KT_NOINSTR uint64_t drain_buf(struct kt_sched_buf *b)
{
	struct perf_event_mmap_page *pg = b->pg;
	const unsigned char *data = (const unsigned char *)pg + pg->data_offset;
	uint64_t size = pg->data_size;
	/* acquire: pairs with the kernel's store of data_head after it wrote
	 * the records (perf_event.h: "rmb() after reading data_head"). */
	uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = pg->data_tail, waiting = head - tail;

	while (head - tail >= sizeof(struct perf_event_header)) {
		struct perf_event_header h;
		struct { uint32_t pid, tid; uint64_t time; } id;   /* sample_id */
		uint64_t lost[2];

		ring_read(data, size, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail)
			break;
		if (h.type == PERF_RECORD_SWITCH && h.size >= sizeof(h) + sizeof(id)) {
			ring_read(data, size, tail + sizeof(h), &id, sizeof(id));
			if ((int32_t)id.pid == S.pid && (int32_t)id.tid != S.writer_tid) {
				uint8_t what = !(h.misc & PERF_RECORD_MISC_SWITCH_OUT) ? KTRACE_SCHED_IN
				               : (h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT)
				               ? KTRACE_SCHED_OUT_PREEMPT : KTRACE_SCHED_OUT_BLOCK;
				note_tid((int32_t)id.tid);
				win_put(b->core, (int64_t)id.time, (int32_t)id.tid, what);
			}
		} else if (h.type == PERF_RECORD_LOST &&
		           h.size >= sizeof(h) + sizeof(lost) + sizeof(id)) {
			ring_read(data, size, tail + sizeof(h), lost, sizeof(lost));
			ring_read(data, size, tail + sizeof(h) + sizeof(lost), &id, sizeof(id));
			S.lost += lost[1];
			ktrace__count_loss(KTRACE_LOSS_SCHED, lost[1]);
			if ((int64_t)id.time >= S.wins[b->core].complete_from_ns)
				S.wins[b->core].complete_from_ns = (int64_t)id.time + 1;
		}
		tail += h.size;
	}
	/* release: our reads of the records happen before the kernel may
	 * reuse their space ("mb() before writing data_tail"). */
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	if (b->seen < size && tail > b->seen) {   /* read data pages first */
		uint64_t lim = tail < size ? tail : size;

		if (b->seen == 0 || (lim - 1) / 4096 != (b->seen - 1) / 4096)
			S.touched = 1;
		b->seen = lim;
	}
	return waiting;
}

/*
 * A drain that touches memory for the first time holds the mapping lock
 * while it faults: a page of the kernel's buffers read first (perf's
 * pages are mapped at their first read, under the lock), the first write
 * of a window or of the names table (their anon_vma; a later page of
 * them takes the lock only where the kernel has no per-VMA lock, and is
 * noted too, to be safe).  Such a drain is noted as ktrace's own hold
 * (filter.c): a program thread's mprotect that waited for it is not the
 * function's own block.  Drains after the first lap of each buffer and
 * window touch nothing new and are not noted.
 */
KT_NOINSTR void ktrace__sched_drain(void)
{
	int fast = 0;
	int64_t t0;

	if (S.status != KTRACE_SCHED_RECORDED)
		return;
	t0 = ktrace__monotonic_ns();
	S.touched = S.end_ns == 0;   /* the first: the buffers' header pages */
	if (S.writer_tid == 0)
		S.writer_tid = (int32_t)syscall(SYS_gettid);
	for (uint32_t i = 0; i < S.nbufs; i++)
		if (drain_buf(&S.bufs[i]) > S.bufs[i].pg->data_size / 4)
			fast = 1;
	S.end_ns = ktrace__monotonic_ns();
	if (S.touched)
		ktrace__filter_own_mm(t0, S.end_ns);
	S.fast = fast;
	S.next_drain_ns = S.end_ns + (int64_t)(fast ? KT_SCHED_FAST_MS : KT_SCHED_PERIOD_MS) *
	                  1000000;
}

/* The writer's poll timeout: at most the time to the next drain. */
KT_NOINSTR int64_t ktrace__sched_wait_ns(int64_t wait_ns)
{
	int64_t left;

	if (S.status != KTRACE_SCHED_RECORDED)
		return wait_ns;
	left = S.next_drain_ns - ktrace__monotonic_ns();
	if (left < 0)
		left = 0;
	return left < wait_ns ? left : wait_ns;
}

/* ---- the window budget's question ------------------------------------------ */

/* By time; at one ns (a switch takes microseconds: not seen), a switch
 * out before a switch in, as a migration would have them, so the order
 * is total for one thread's records (ktrace__sort is not stable). */
static KT_NOINSTR int by_time(const void *a, const void *b)
{
	const struct ktrace_sched_rec *p = a, *q = b;
	int pi = p->what == KTRACE_SCHED_IN, qi = q->what == KTRACE_SCHED_IN;

	if (p->time_ns != q->time_ns)
		return p->time_ns < q->time_ns ? -1 : 1;
	return pi - qi;
}

/*
 * Of thread tid's time in [from_ns, to_ns], the ns it was preempted: off
 * the cpu while still runnable.  The window budget (filter.c) asks this
 * about a call that looked long, so that a short function the scheduler
 * happened to preempt stays eligible for muting while one that blocked
 * (or ran long) does not.  The thread is taken to be on a cpu at from_ns
 * (it recorded the call's entry then).  -1 when scheduling is not recorded
 * or a record the interval needs may be missing (lost, overwritten, or
 * more switches than this looks at): the caller then counts the call as
 * long.  *npreempt: how many times the thread was preempted in it;
 * *blocked_ns: the ns it was blocked in it (a call that blocked is long for
 * what it is, never the machine's noise).
 */
static KT_NOINSTR int64_t preempted_in(int32_t tid, int64_t from_ns, int64_t to_ns,
                                       uint32_t *npreempt, int64_t *blocked_ns,
                                       struct ktrace_sched_rec *got, uint32_t cap, int own);

KT_NOINSTR int64_t ktrace__sched_preempted_ns(int32_t tid, int64_t from_ns, int64_t to_ns,
                                             uint32_t *npreempt, int64_t *blocked_ns)
{
	struct ktrace_sched_rec got[64];

	return preempted_in(tid, from_ns, to_ns, npreempt, blocked_ns, got, 64, 1);
}

/*
 * The same for a request that fired a trigger (trigger.c, KTRACE_TRIGGER_ON):
 * on a busy host a 100 ms request may be preempted at every tick, more
 * switches than the 64 a call of the budget's is allowed, so this one looks
 * at up to KT_SCHED_TRIG_RECS, in a buffer mapped on first use.
 */
#define KT_SCHED_TRIG_RECS 8192u
KT_NOINSTR int64_t ktrace__sched_request_preempted_ns(int32_t tid, int64_t from_ns,
                                                     int64_t to_ns, uint32_t *npreempt,
                                                     int64_t *blocked_ns)
{
	static struct ktrace_sched_rec *big;

	*npreempt = 0;
	*blocked_ns = 0;
	if (S.status != KTRACE_SCHED_RECORDED)
		return -1;
	if (big == NULL &&
	    (big = ktrace__map_own(KT_SCHED_TRIG_RECS * sizeof(struct ktrace_sched_rec), 0)) == NULL)
		return -1;
	return preempted_in(tid, from_ns, to_ns, npreempt, blocked_ns, big, KT_SCHED_TRIG_RECS, 0);
}

/* own: a block that began while ktrace held the mapping lock (filter.c)
 * counts as preempted: the window budget's view of the function. */
static KT_NOINSTR int64_t preempted_in(int32_t tid, int64_t from_ns, int64_t to_ns,
                                       uint32_t *npreempt, int64_t *blocked_ns,
                                       struct ktrace_sched_rec *got, uint32_t cap, int own)
{
	uint32_t n = 0;
	int64_t out = -1, sum = 0, own_until = 0;
	int preempt = 0;

	*npreempt = 0;
	*blocked_ns = 0;
	if (S.status != KTRACE_SCHED_RECORDED || to_ns < from_ns)
		return -1;
	if (to_ns > S.end_ns)
		ktrace__sched_drain();
	for (uint32_t c = 0; c < S.ncpus; c++) {
		struct kt_sched_win *w = &S.wins[c];
		uint64_t have = w->head < S.cap ? w->head : S.cap;

		if (w->complete_from_ns > from_ns)
			return -1;
		for (uint64_t i = 0; i < have; i++) {
			const struct ktrace_sched_rec *r = &w->rec[(w->head - 1 - i) & (S.cap - 1)];

			if (r->time_ns < from_ns)
				break;
			if (r->tid != tid || r->time_ns > to_ns)
				continue;
			if (n == cap)
				return -1;
			got[n++] = *r;
		}
	}
	ktrace__sort(got, n, sizeof(got[0]), by_time);   /* the writer's: qsort() would malloc */
	for (uint32_t i = 0; i <= n; i++) {
		int64_t t = i < n ? got[i].time_ns : to_ns;

		if (i < n && got[i].what != KTRACE_SCHED_IN) {
			out = t;
			preempt = got[i].what == KTRACE_SCHED_OUT_PREEMPT;
			own_until = !preempt && own ? ktrace__filter_own_until(out) : 0;
			*npreempt += (uint32_t)(preempt || own_until > 0);
			continue;
		}
		if (out >= 0 && preempt) {
			sum += t - out;
		} else if (out >= 0) {   /* blocked: ktrace's, up to own_until */
			int64_t o = own_until > out ? (own_until < t ? own_until : t) - out : 0;

			sum += o;
			*blocked_ns += t - out - o;
		}
		out = -1;
	}
	return sum;
}

/* ---- the SCHED section --------------------------------------------------- */

/* Serialize the section into a ktrace__walloc'ed buffer (writer thread); NULL on
 * no memory.  *count = records. */
KT_NOINSTR void *ktrace__sched_serialize(size_t *len, uint32_t *count)
{
	struct ktrace_sched_hdr h;
	uint64_t nrec = 0;
	uint32_t ncores = S.status == KTRACE_SCHED_RECORDED ? S.ncpus : 0;
	uint32_t nnames = S.status == KTRACE_SCHED_RECORDED ? S.nnames : 0;
	unsigned char *buf, *p;

	ktrace__sched_drain();
	for (uint32_t c = 0; c < ncores; c++)
		nrec += S.wins[c].head < S.cap ? S.wins[c].head : S.cap;
	*len = sizeof(h) + ncores * sizeof(struct ktrace_sched_core) +
	       nrec * sizeof(struct ktrace_sched_rec) + nnames * sizeof(struct ktrace_sched_name);
	*count = (uint32_t)nrec;
	buf = p = ktrace__walloc(*len);   /* the writer never mallocs */
	if (!buf)
		return NULL;
	memset(&h, 0, sizeof(h));
	h.status = (uint32_t)(S.status ? S.status : KTRACE_SCHED_OFF);
	h.err = S.err;
	h.paranoid = S.paranoid;
	h.ncores = ncores;
	h.nnames = nnames;
	h.clockid = CLOCK_MONOTONIC;
	h.start_ns = S.start_ns;
	h.end_ns = S.end_ns;
	h.switches = S.switches;
	h.lost = S.lost;
	snprintf(h.what, sizeof(h.what), "%s", S.what);
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	for (uint32_t c = 0; c < ncores; c++) {
		struct kt_sched_win *w = &S.wins[c];
		struct ktrace_sched_core sc = { c, (uint32_t)(w->head < S.cap ? w->head : S.cap),
		                                w->complete_from_ns > S.start_ns ?
		                                w->complete_from_ns : S.start_ns };
		memcpy(p, &sc, sizeof(sc));
		p += sizeof(sc);
	}
	for (uint32_t c = 0; c < ncores; c++) {
		struct kt_sched_win *w = &S.wins[c];
		uint64_t n = w->head < S.cap ? w->head : S.cap;

		for (uint64_t i = w->head - n; i < w->head; i++) {
			memcpy(p, &w->rec[i & (S.cap - 1)], sizeof(struct ktrace_sched_rec));
			p += sizeof(struct ktrace_sched_rec);
		}
	}
	for (uint32_t i = 0, k = 0; i < KT_SCHED_NAMES && k < nnames; i++) {
		struct ktrace_sched_name n;

		if (S.names[i].tid == 0)
			continue;
		memset(&n, 0, sizeof(n));
		n.tid = S.names[i].tid;
		memcpy(n.name, S.names[i].name, sizeof(n.name));
		n.name[15] = 0;
		memcpy(p, &n, sizeof(n));
		p += sizeof(n);
		k++;
	}
	return buf;
}
