/*
 * launch.c - start a program in a hostile environment that must be set up
 * before it runs (and so before libktrace's constructor).  Not traced.
 *
 *   e2e_launch [OPTIONS] PROGRAM [ARGS...]
 *     --seccomp kill     a seccomp filter that kills the process (SIGSYS)
 *                        on perf_event_open, as many allow-list sandboxes do
 *     --seccomp eperm    ... that makes perf_event_open fail with EPERM
 *     --seccomp killsched  ... that kills on perf_event_open,
 *                        sched_setaffinity, sched_setattr and sched_getattr
 *     --seccomp killlean   ... that kills on perf_event_open and membarrier
 *                        (an allow-list that names neither: the program
 *                        never calls them; the lean mode's patching may)
 *     --uid N            setgid/setuid to N (root only)
 *     --nproc N          RLIMIT_NPROC = N (after --uid: root ignores it)
 *     --memlock BYTES    RLIMIT_MEMLOCK = BYTES
 */
#include <errno.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int i = 1;

	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		const char *o = argv[i], *v = argv[i + 1];

		if (strcmp(o, "--seccomp") == 0) {
			/* kill / eperm: perf_event_open only; killsched: also
			 * the scheduler calls a tracer might make (affinity,
			 * sched_setattr); killlean: also membarrier */
			unsigned act = strncmp(v, "kill", 4) == 0 ? SECCOMP_RET_KILL_PROCESS
			             : SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
			unsigned more = strcmp(v, "killsched") == 0;
			unsigned mb = strcmp(v, "killlean") == 0 ? __NR_membarrier
			            : more                       ? __NR_sched_setaffinity
			                                         : ~0u;
			struct sock_filter f[] = {
				BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
				BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 4, 0),
				BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, mb, 3, 0),
				BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, more ? __NR_sched_setattr : ~0u, 2, 0),
				BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, more ? __NR_sched_getattr : ~0u, 1, 0),
				BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
				BPF_STMT(BPF_RET | BPF_K, act),
			};
			struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
			    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
				perror("e2e_launch: seccomp");
				return 2;
			}
		} else if (strcmp(o, "--uid") == 0) {
			uid_t u = (uid_t)atoi(v);
			if (setgroups(0, NULL) != 0 || setgid(u) != 0 || setuid(u) != 0) {
				perror("e2e_launch: setuid");
				return 2;
			}
		} else if (strcmp(o, "--nproc") == 0 || strcmp(o, "--memlock") == 0) {
			struct rlimit rl;
			rl.rlim_cur = rl.rlim_max = strtoull(v, NULL, 10);
			if (setrlimit(strcmp(o, "--nproc") == 0 ? RLIMIT_NPROC : RLIMIT_MEMLOCK,
			              &rl) != 0) {
				perror("e2e_launch: setrlimit");
				return 2;
			}
		} else {
			fprintf(stderr, "e2e_launch: unknown option %s\n", o);
			return 2;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "usage: e2e_launch [OPTIONS] PROGRAM [ARGS...]\n");
		return 2;
	}
	execv(argv[i], argv + i);
	perror("e2e_launch: exec");
	return 127;
}
