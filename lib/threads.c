/*
 * threads.c - the thread table: slot -> (tid, name, first and exit time).
 *
 * Slots are handed out by an atomic counter and never reused, so a slot in
 * an old block always names the right thread.  Entries live in chunks of
 * KT_CHUNK, mmapped on first use and installed with a CAS, so the table
 * grows without locks and without moving.  The table is metadata: it
 * outlives the ring, and every snapshot carries all of it.
 *
 * Who writes: the registering thread fills its entry, then publishes it by
 * a release store of 'tid'; the thread itself stores exit_tsc from its key
 * destructor; names of live threads are read from /proc at snapshot time.
 */
#include "internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define KT_CHUNK 1024u
#define KT_CHUNKS 4096u              /* 4M threads */

struct kt_tinfo {
	_Atomic int32_t tid;         /* 0 until published */
	uint32_t flags;              /* enum ktrace_thread_flags */
	uint64_t first_tsc;          /* counter at registration */
	_Atomic uint64_t exit_tsc;   /* counter at exit, 0 = alive */
	char name[16];               /* comm at registration; then read-only */
	char exit_name[16];          /* comm at exit, before exit_tsc is set */
	_Atomic uint64_t mail;       /* requests begun here, ended by another
	                                thread: highest sequence | keep << 63 */
	void *_Atomic hold;          /* its hold state (request.c), NULL if none */
};

static struct kt_tinfo *_Atomic chunks[KT_CHUNKS];
static _Atomic uint32_t next_slot = 1;
static pthread_key_t exit_key;
static int32_t main_tid;

static KT_NOINSTR struct kt_tinfo *entry(uint32_t slot, int create)
{
	uint32_t c = slot / KT_CHUNK;
	/* acquire: pairs with the CAS that installed the chunk. */
	struct kt_tinfo *p = kt_load(&chunks[c], acquire), *expect = NULL;

	if (p || !create)
		return p ? &p[slot % KT_CHUNK] : NULL;
	p = ktrace__map_own(sizeof(*p) * KT_CHUNK, 0);
	if (p == NULL)
		return NULL;
	/* acq_rel: release publishes the zeroed chunk to other threads'
	 * acquire loads above. */
	if (!kt_cas(&chunks[c], &expect, p, acq_rel)) {
		ktrace__unmap_own(p, sizeof(*p) * KT_CHUNK);
		/* acquire: pairs with the winner's release CAS (the failed CAS
		 * read it with relaxed order only). */
		p = kt_load(&chunks[c], acquire);
	}
	return &p[slot % KT_CHUNK];
}

/* The calling thread's name into buf (16 bytes): an optional call
 * (sandbox.c); else left as it was, and the snapshot names the thread
 * from /proc. */
static KT_NOINSTR void own_name(char *buf)
{
	if (ktrace__optional_begin()) {
		prctl(PR_GET_NAME, buf, 0, 0, 0);
		ktrace__optional_end();
	}
}

static KT_NOINSTR void on_thread_exit(void *arg)
{
	uint32_t slot = (uint32_t)(uintptr_t)arg;
	struct kt_tinfo *e = entry(slot, 0);

	ktrace__hold_thread_exit();
	if (e == NULL)
		return;
	own_name(e->exit_name);
	/* release: the name above is visible to a snapshot that sees exit_tsc. */
	kt_store(&e->exit_tsc, ktrace__now() | 1, release);
	ktrace__self_release();
}

KT_NOINSTR int ktrace__threads_init(void)
{
	main_tid = getpid();
	return pthread_key_create(&exit_key, on_thread_exit) ? KTRACE_ENOMEM : 0;
}

KT_NOINSTR void ktrace__threads_fork_child(int32_t tid)
{
	uint32_t n = kt_load(&next_slot, relaxed);
	uint64_t now = ktrace__now() | 1;

	/* Slots stay unique across the fork; the child's main thread is the
	 * forking thread, which registers again under its new tid.  Every
	 * parent thread is gone here: mark it exited, so the child's
	 * snapshots do not list them as its own live threads. */
	main_tid = tid;
	for (uint32_t slot = 1; slot < n; slot++) {
		struct kt_tinfo *e = entry(slot, 0);
		if (e == NULL || kt_load(&e->tid, relaxed) == 0 ||
		    kt_load(&e->exit_tsc, relaxed) != 0)
			continue;
		memcpy(e->exit_name, e->name, sizeof(e->name));
		e->flags &= ~(uint32_t)KTRACE_THREAD_MAIN;
		kt_store(&e->exit_tsc, now, release);
	}
}

KT_NOINSTR uint32_t ktrace__thread_register(int32_t tid, uint64_t now)
{
	uint32_t slot = kt_add(&next_slot, 1, relaxed);
	struct kt_tinfo *e;

	if (slot > KTRACE_ARG24_MAX || slot / KT_CHUNK >= KT_CHUNKS ||
	    (e = entry(slot, 1)) == NULL)
		return 0;
	e->first_tsc = now;
	e->flags = tid == main_tid ? KTRACE_THREAD_MAIN : 0;
	own_name(e->name);
	/* release: pairs with the snapshot's acquire load of tid. */
	kt_store(&e->tid, tid, release);
	pthread_setspecific(exit_key, (void *)(uintptr_t)slot);
	return slot;
}

KT_NOINSTR void ktrace__thread_set_hold(uint32_t slot, void *hs)
{
	struct kt_tinfo *e = entry(slot, 0);

	/* release: the state's fields before the pointer (the budget's
	 * acquire load in ktrace__thread_hold). */
	if (e)
		kt_store(&e->hold, hs, release);
}

KT_NOINSTR void *ktrace__thread_hold(uint32_t slot)
{
	struct kt_tinfo *e = entry(slot, 0);

	return e ? kt_load(&e->hold, acquire) : NULL;
}

/* A request that thread slot began (its sequence seq there) ended on
 * another thread; keep: it was slow.  The owner takes the mail at its next
 * request call (request.c). */
KT_NOINSTR void ktrace__thread_mail_post(uint32_t slot, uint32_t seq, int keep)
{
	struct kt_tinfo *e = entry(slot, 0);
	uint64_t m, v;

	if (e == NULL || seq == 0)
		return;
	/* relaxed: the mail is a hint for the owner's bookkeeping; nothing
	 * else is published through it. */
	m = kt_load(&e->mail, relaxed);
	do {
		uint32_t hi = (uint32_t)m;
		v = (m & (1ull << 63)) | (keep ? 1ull << 63 : 0) |
		    (m && (int32_t)(hi - seq) > 0 ? hi : seq);
	} while (!kt_cas(&e->mail, &m, v, relaxed));
}

KT_NOINSTR uint64_t ktrace__thread_mail_take(uint32_t slot)
{
	struct kt_tinfo *e = entry(slot, 0);

	/* relaxed: see ktrace__thread_mail_post; the load first keeps the
	 * common no-mail case free of a locked instruction. */
	if (e == NULL || kt_load(&e->mail, relaxed) == 0)
		return 0;
	return atomic_exchange_explicit(&e->mail, 0, memory_order_relaxed);
}

/* Kernel thread id of a slot, 0 if unknown (writer thread: the filter). */
KT_NOINSTR int32_t ktrace__thread_tid(uint32_t slot)
{
	struct kt_tinfo *e = slot ? entry(slot, 0) : NULL;

	/* acquire: pairs with the release store in ktrace__thread_register. */
	return e ? kt_load(&e->tid, acquire) : 0;
}

KT_NOINSTR size_t ktrace__threads_count(void)
{
	return kt_load(&next_slot, relaxed) - 1;
}

/*
 * The name a live thread tid registered with (its comm then), from the
 * newest NAME_SCAN slots: 1 if found.  The writer's scheduling records
 * name the threads they see (sched.c) from here before they open
 * /proc/self/task/N/comm: an open takes the lowest free descriptor, and
 * a program that closes 2 and opens its own file there (as a daemon
 * does at its start, when the writer's first drains meet its threads)
 * got descriptor 3 once in CI while the writer read a name
 * (test_e2e_hostile stderr_reused_by_program).  A thread ktrace never
 * registered is still named from /proc.  A registered one is named as
 * it registered (a later pthread_setname_np is not seen here): the
 * decoder names the threads of THREADS from there (their names as of
 * the snapshot), and these only for the others.
 */
#define NAME_SCAN 4096u
KT_NOINSTR int ktrace__thread_name_of(int32_t tid, char name[16])
{
	uint32_t n = kt_load(&next_slot, relaxed), lo = n > NAME_SCAN ? n - NAME_SCAN : 1;

	for (uint32_t slot = n; slot-- > lo;) {
		struct kt_tinfo *e = slot / KT_CHUNK < KT_CHUNKS ? entry(slot, 0) : NULL;

		/* acquire: pairs with the release store of tid at registration
		 * (name before it); a thread that exited may have a successor
		 * with its tid: only a live one counts */
		if (e != NULL && kt_load(&e->tid, acquire) == tid &&
		    kt_load(&e->exit_tsc, acquire) == 0) {
			memcpy(name, e->name, 16);
			name[15] = 0;
			return 1;
		}
	}
	return 0;
}

/* Live threads' current names (pthread_setname_np) come from /proc. */
static KT_NOINSTR void comm_of(int32_t tid, char name[16])
{
	char path[64], buf[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	if (buf[n - 1] == '\n')
		n--;
	if (n > 15)
		n = 15;
	memcpy(name, buf, (size_t)n);
	name[n] = 0;
}

/* Threads that exited before 'since' (counter; 0 = keep all) are left
 * out: nothing of theirs can be in a window that starts after their exit,
 * and a process that ran 200k short threads would otherwise carry every
 * one of them in every file (*omitted counts them). */
KT_NOINSTR size_t ktrace__threads_copy(struct ktrace_thread_rec *dst, size_t max, uint64_t since,
                                       uint32_t *omitted)
{
	uint32_t n = kt_load(&next_slot, relaxed);
	size_t k = 0;

	*omitted = 0;
	for (uint32_t slot = 1; slot < n && k < max; slot++) {
		struct kt_tinfo *e = entry(slot, 0);
		struct ktrace_thread_rec *r = &dst[k];
		int32_t tid;
		uint64_t ex;

		/* acquire: pairs with the release store in register. */
		if (e == NULL || (tid = kt_load(&e->tid, acquire)) == 0)
			continue;
		/* relaxed: a thread that exits meanwhile is simply kept. */
		ex = kt_load(&e->exit_tsc, relaxed);
		if (since && ex != 0 && ex < since) {
			(*omitted)++;
			continue;
		}
		memset(r, 0, sizeof(*r));
		r->slot = slot;
		r->tid = tid;
		r->first_tsc = e->first_tsc;
		/* acquire: pairs with on_thread_exit's release store. */
		ex = kt_load(&e->exit_tsc, acquire);
		r->exit_tsc = ex;
		r->flags = e->flags | (ex ? KTRACE_THREAD_EXITED : 0);
		memcpy(r->name, ex ? e->exit_name : e->name, sizeof(r->name));
		if (!ex)
			comm_of(tid, r->name);
		r->name[15] = 0;
		k++;
	}
	return k;
}
