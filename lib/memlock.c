/*
 * memlock.c - programs that lock their memory with mlockall().
 *
 * mlockall(MCL_CURRENT) counts the process's whole address space against
 * RLIMIT_MEMLOCK (the kernel compares total_vm with the limit, unless the
 * caller has CAP_IPC_LOCK), and locks and faults in every page of it.
 * ktrace's reserved rings and tables (tens of MiB of address space, mostly
 * never touched) would make the call fail where it succeeds untraced, or,
 * with the privilege, lock tens of MiB that the program never asked for.
 *
 *   - At start-up, a program that imports mlockall (a dynamic symbol
 *     reference of any loaded object) under a finite RLIMIT_MEMLOCK
 *     without CAP_IPC_LOCK is not traced unless the limit leaves room
 *     for ktrace's buffers: tracing is off, said once on stderr with the
 *     limit that would do (KTRACE_EMEMLOCK).  The buffers cannot be given
 *     back later, while threads write into them.
 *   - The library defines mlockall itself (it binds before libc's): the
 *     call is made as asked, then ktrace's own buffers are unlocked again
 *     (munlock; their pages stay as they are), and with MCL_FUTURE the
 *     snapshot writer unlocks what it maps.  A call that fails anyway is
 *     returned as it is, and said once if ktrace's buffers are to blame.
 */
#include "internal.h"
#include "dynsym.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic int ktrace__mlock_future;   /* mlockall(MCL_FUTURE) in force */

/* ---- start-up: does the program call mlockall? ---------------------------- */

static KT_NOINSTR int imports_mlockall(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	return *(int *)arg = ktrace__dynsym_imports(info, "mlockall");
}

static KT_NOINSTR int has_ipc_lock(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct c[2];

	memset(c, 0, sizeof(c));
	return syscall(SYS_capget, &h, c) == 0 && (c[0].effective & (1u << CAP_IPC_LOCK));
}

/* The address space ktrace maps at start-up, in MiB (rings and their
 * block tables, half as much again for the scheduling windows, the
 * function/name/module tables, the writer's stack): an estimate. */
static KT_NOINSTR uint64_t own_mib(uint32_t ncpus)
{
	return (uint64_t)ncpus * ktrace__cfg.buffer_mb * 3 / 2 + 8;
}

KT_NOINSTR int ktrace__memlock_check(void)
{
	struct rlimit rl;
	long n = sysconf(_SC_NPROCESSORS_CONF);
	uint64_t need;
	int found = 0;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	need = own_mib(n > 0 ? (uint32_t)n : 1) + 64;   /* + room for the program */
	if (rl.rlim_cur >= need << 20)
		return 0;
	ktrace__phdr_iterate(imports_mlockall, &found);
	if (!found || has_ipc_lock())
		return 0;
	ktrace__say("this program calls mlockall() and RLIMIT_MEMLOCK is %llu KiB: ktrace's "
	            "buffers (about %llu MiB of address space) would make mlockall(MCL_CURRENT) "
	            "fail where it succeeds untraced, so tracing is off; to trace it, raise "
	            "RLIMIT_MEMLOCK (ulimit -l) to %llu MiB or more, or lower KTRACE_BUFFER_MB",
	            (unsigned long long)(rl.rlim_cur >> 10),
	            (unsigned long long)own_mib(n > 0 ? (uint32_t)n : 1),
	            (unsigned long long)need);
	return KTRACE_EMEMLOCK;
}

/* ---- the call itself --------------------------------------------------------- */

/* Unlock ktrace's own big mappings (locking never changes their content). */
static KT_NOINSTR void unlock_own(void)
{
	struct kt_globals *g = &ktrace__g;

	for (uint32_t c = 0; g->cores && c < g->ncpus; c++) {
		munlock(g->cores[c].ring, (size_t)g->ring_words * 4);
		munlock((void *)g->cores[c].gen, (size_t)g->nblocks * 4);
	}
	ktrace__funcs_unlock();
	ktrace__sched_unlock();
}

__attribute__((visibility("default"))) KT_NOINSTR int mlockall(int flags)
{
	long r = syscall(SYS_mlockall, flags);
	int e = errno;

	/* acquire: pairs with the release store that ends start-up. */
	if (kt_load(&ktrace__g.state, acquire) != KT_READY) {
		errno = e;
		return (int)r;
	}
	if (r == 0) {
		if (flags & MCL_FUTURE)
			kt_store(&ktrace__mlock_future, 1, relaxed);
		unlock_own();
	} else if (e == ENOMEM || e == EAGAIN || e == EPERM) {
		ktrace__warn_once(KT_WARN_MLOCK, "mlockall() failed (%s): ktrace's buffers count against "
		                  "RLIMIT_MEMLOCK; raise it (ulimit -l) or lower KTRACE_BUFFER_MB",
		                  strerror(e));
	}
	errno = e;
	return (int)r;
}

/* munlockall() ends MCL_FUTURE too. */
__attribute__((visibility("default"))) KT_NOINSTR int munlockall(void)
{
	kt_store(&ktrace__mlock_future, 0, relaxed);
	return (int)syscall(SYS_munlockall);
}
