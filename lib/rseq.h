/*
 * rseq.h - the restartable-sequence pieces every critical section shares:
 * the abort signature, the per-thread area's layout, and the asm that
 * declares a critical section's descriptor and its abort handler.
 *
 * Used by record.c (the hot-path appends), ring.c (taking the core lock)
 * and init.c (registering an area when glibc did not).  No <sys/rseq.h>:
 * it exists only from glibc 2.35, and the kernel ABI below is all we use.
 *
 * A critical section in asm is written as
 *
 *   KT_RSEQ_TABLE            descriptor 3: start 1f, length 2f - 1f, abort 4f
 *   KT_RSEQ_ARM              store &3b into rseq_cs of the thread's area, 1:
 *   ... body, the last instruction commits ...
 *   2:
 *   KT_RSEQ_ABORT(label)     signature, then 4: jump to label
 *
 * as in librseq.  The kernel moves a thread that is preempted, migrated or
 * signalled between 1 and 2 to 4, which jumps to the C label that restarts.
 */
#ifndef KTRACE_RSEQ_H
#define KTRACE_RSEQ_H

#include <stdint.h>

/* The abort signature glibc registers with (RSEQ_SIG on x86 and aarch64);
 * our own registration uses the same, so one section serves both. */
#define KT_RSEQ_SIG_VALUE 0x53053053u
#define KT_RSEQ_SIG "0x53053053"

/* struct rseq of the kernel ABI (linux/rseq.h), 32-byte aligned: the asm
 * reads cpu_id at 4 and writes rseq_cs at 8. */
struct kt_rseq_area {
	uint32_t cpu_id_start;   /* kernel writes */
	uint32_t cpu_id;         /* kernel writes; -1 unregistered, -2 failed */
	uint64_t rseq_cs;        /* critical section descriptor; we write */
	uint32_t flags;
	uint32_t pad[3];
} __attribute__((aligned(32)));

#if defined(__x86_64__)
/* The critical section descriptor (label 3) of one asm block. */
#define KT_RSEQ_TABLE                                                          \
	".pushsection __rseq_cs, \"aw\"\n\t"                                   \
	".balign 32\n\t"                                                       \
	"3:\n\t"                                                               \
	".long 0x0, 0x0\n\t"                                                   \
	".quad 1f, (2f - 1f), 4f\n\t"                                          \
	".popsection\n\t"                                                      \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"                         \
	".quad 3b\n\t"                                                         \
	".popsection\n\t"

/* Arm the section of this asm block (store &descriptor 3 into rseq_cs of
 * the area at operand rs, clobbering rax) and open it (label 1): the body
 * follows. */
#define KT_RSEQ_ARM                                                            \
	"leaq 3b(%%rip), %%rax\n\t"                                          \
	"movq %%rax, 8(%[rs])\n\t"        /* rseq->rseq_cs = &desc */        \
	"1:\n\t"

/* KT_RSEQ_ARM for a section that often runs again on the same thread
 * with no other section in between (the -finstrument-functions hooks'):
 * rseq_cs is written only when it does not already point at this
 * section's descriptor (the kernel clears it whenever it finds the thread
 * outside the section: a preemption, a signal).  The test is the
 * section's first instruction (label 1), so a clearing after it finds the
 * thread inside and aborts; the write (label 5, in KT_RSEQ_ABORT_TEST) is
 * out of the section and goes back to the test.  rax = &descriptor. */
#define KT_RSEQ_ARM_TEST                                                       \
	"leaq 3b(%%rip), %%rax\n\t"                                          \
	"1:\n\t"                                                               \
	"cmpq %%rax, 8(%[rs])\n\t"       /* armed already? */                \
	"jne 5f\n\t"

/* The signature the kernel checks in the 4 bytes before an abort handler
 * (here inside a ud1 instruction): every rseq section's, C or asm. */
#define KT_RSEQ_SIGNATURE                                                      \
	".byte 0x0f, 0xb9, 0x3d\n\t"                                           \
	".long " KT_RSEQ_SIG "\n"

/* The abort handler (label 4) after the signature, then `more` (code out
 * of the section, in the same place). */
#define KT_RSEQ_ABORT_THEN(label, more)                                        \
	".pushsection __rseq_failure, \"ax\"\n\t"                              \
	KT_RSEQ_SIGNATURE                                                      \
	"4:\n\t"                                                               \
	"jmp %l[" #label "]\n\t"                                               \
	more                                                                   \
	".popsection\n\t"

#define KT_RSEQ_ABORT(label) KT_RSEQ_ABORT_THEN(label, "")

/* KT_RSEQ_ABORT with the write of rseq_cs that KT_RSEQ_ARM_TEST jumps to. */
#define KT_RSEQ_ABORT_TEST(label)                                              \
	KT_RSEQ_ABORT_THEN(label,                                              \
	                   "5:\n\t"                                            \
	                   "movq %%rax, 8(%[rs])\n\t" /* rseq_cs = &desc */   \
	                   "jmp 1b\n\t")
#endif

#endif
