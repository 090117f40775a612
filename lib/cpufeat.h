/*
 * cpufeat.h - x86-64 CPUID feature bits, as start-up reads them.
 *
 * In a VM each cpuid instruction is a hypervisor exit (5.4 us on the
 * 2-core VM), and start-up made 8 of them (__get_cpuid checks the highest
 * leaf first; clock.c, crc32c.c and lean.c each asked): 43 us of every
 * traced program's start.  Now 3: leaf 1 once (every x86-64 cpu has it),
 * shared by crc32c.c and lean.c, and clock.c's two for the invariant TSC.
 * (glibc 2.33's <sys/platform/x86.h> has ld.so's copy of the bits, but
 * the library runs on glibc 2.28: test_lib_glibc_symbols.)
 */
#ifndef KTRACE_CPUFEAT_H
#define KTRACE_CPUFEAT_H

#if defined(__x86_64__)
#include <cpuid.h>
#include <stdint.h>

/* crc32c.c: cpuid leaf 1's ecx, read once (its load-time constructor asks
 * first, before any thread of the program can run). */
uint32_t ktrace__cpuid1_ecx(void);
#endif

#endif
