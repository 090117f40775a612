/*
 * vfork.c - vfork() children that run traced code before they exec.
 *
 * A vfork child runs on its parent's memory, stack and thread-local
 * storage until it calls exec or _exit: its hooks would find the parent
 * thread's struct kt_thread and append to the rings as that thread (the
 * kernel does not register rseq for a CLONE_VM child, so not even the
 * critical section protects it), while the parent's other threads go on
 * writing.  That gave the parent's timeline the children's calls and
 * damaged it (lost exits, cut block tails).  Running traced code in a
 * vfork child is undefined behaviour, and common.
 *
 * The library defines vfork (it binds before libc's, as for mlockall):
 * before the system call the thread's key is set to 0, which no core's
 * owner ever matches, so every hook of the child takes the slow path,
 * where in_vfork drops the event and counts it (KTRACE_LOSS_VFORK).  The
 * hot path's muted-call counters (ment, mexit) are saved too.  When the
 * parent resumes (the child has exec'd or exited) it restores all three.
 * The child itself returns without touching anything: memory is shared.
 * Nothing else of vfork changes: the same system call, the return
 * address kept in a register across it (the child may reuse the stack
 * slot), as glibc does.
 */
#include "internal.h"

#include <errno.h>

#if defined(__x86_64__) && defined(__linux__)

KT_NOINSTR void ktrace__vfork_enter(void)
{
	struct kt_thread *t = kt_self();

	/* acquire: pairs with the release store that ends start-up. */
	if (t == &ktrace__idle) {
		/* The child must not map a struct of its own in the shared
		 * address space: give the thread one now. */
		if (kt_load(&ktrace__g.state, acquire) != KT_READY ||
		    (t = ktrace__self_alloc()) == NULL)
			return;
	}
	t->vfork_key = t->key;
	t->vfork_ment = t->ment;
	t->vfork_mexit = t->mexit;
	t->vfork_hold_lim = t->hold_lim;
	t->in_vfork = 1;
	/* The compiler must not move the stores below the key's: a signal
	 * handler on this thread in between is fine either way (it runs as
	 * the parent), the child is not. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->key = 0;
	t->hold_lim = 0;   /* a held request's appends go to the slow path too */
}

KT_NOINSTR long ktrace__vfork_parent(long r)
{
	struct kt_thread *t = kt_self();

	if (t != &ktrace__idle && t->in_vfork) {
		t->key = t->vfork_key;
		t->ment = t->vfork_ment;
		t->mexit = t->vfork_mexit;
		t->hold_lim = t->vfork_hold_lim;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t->in_vfork = 0;
	}
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* Stack at entry: rsp % 16 == 8 (the return address).  The child returns
 * through the same code: 0 in eax, straight to the caller. */
__asm__(
	".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	subq $8, %rsp\n"
	"	call ktrace__vfork_enter\n"
	"	addq $8, %rsp\n"
	"	popq %rdi\n"                 /* return address, kept in a register */
	"	movl $58, %eax\n"            /* __NR_vfork */
	"	syscall\n"
	"	pushq %rdi\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"                     /* the child: return 0 */
	"	movq %rax, %rdi\n"
	"	subq $8, %rsp\n"
	"	call ktrace__vfork_parent\n"
	"	addq $8, %rsp\n"
	"1:	ret\n"
	".size vfork, .-vfork\n");

#endif
