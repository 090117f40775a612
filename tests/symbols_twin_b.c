/*
 * symbols_twin_b.c - one of two static functions named twin, in two
 * files (as a static inline of a header is copied into every file that
 * calls it); test_decoder_symbols checks the decoder tells them apart.
 */
#include <stdint.h>

uintptr_t ktrace_test_twin_b(void);

__attribute__((noinline, used)) static int twin(int x)
{
	return x * 7 + 1;
}

uintptr_t ktrace_test_twin_b(void)
{
	return (uintptr_t)&twin + (uintptr_t)(twin(0) - 1);
}
