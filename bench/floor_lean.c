/*
 * floor_lean.c - the lean mode's floor: __fentry__ and __return__ that do
 * only what any timestamping tracer must do per event, as floor.c does for
 * -finstrument-functions: read the TSC and store a 4-byte word, here into
 * one global array with a wrapping index (single-threaded programs only:
 * it is a floor, not a tracer; nobody reads the array).
 *
 * They are called before a function's prologue and before its ret, where
 * the argument (or return value) registers are live: they save the three
 * registers they touch (rax, rdx: rdtsc; rcx: the index) and nothing more,
 * which is what ktrace's lean hooks cannot beat.  Link a lean build with
 * it instead of libktrace: bench_lean_floor here, or a whole program
 * (docs/lean.md: Lua and SQLite in place).
 */
#if defined(__x86_64__)
__asm__(".bss\n"
	".balign 64\n"
	"floor_lean_ring: .zero 4194304\n"   /* 1 Mi words */
	"floor_lean_pos: .quad 0\n"
	".text\n"
	".globl __fentry__\n"
	".globl __return__\n"
	".type __fentry__, @function\n"
	".type __return__, @function\n"
	"__fentry__:\n"
	"__return__:\n\t"
	"pushq %rax\n\t"
	"pushq %rdx\n\t"
	"pushq %rcx\n\t"
	"rdtsc\n\t"
	"movq floor_lean_pos(%rip), %rcx\n\t"
	"leaq floor_lean_ring(%rip), %rdx\n\t"
	"movl %eax, (%rdx,%rcx,4)\n\t"
	"incq %rcx\n\t"
	"andq $0xfffff, %rcx\n\t"
	"movq %rcx, floor_lean_pos(%rip)\n\t"
	"popq %rcx\n\t"
	"popq %rdx\n\t"
	"popq %rax\n\t"
	"ret\n"
	".size __fentry__, .-__fentry__\n");
#endif
