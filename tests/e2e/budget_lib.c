/* budget_lib.c - a traced shared library function for KTRACE_EXCLUDE. */
static volatile unsigned long lib_sink;

__attribute__((noinline)) void lib_leaf(void) { lib_sink++; }
