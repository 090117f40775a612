/*
 * fuzz_elf.c - libFuzzer entry point for the ELF symbol reader
 * (decoder/symbols.c): a hostile or truncated ELF file must give an error
 * or a usable symbol table, never a crash.  Built as ktrace-fuzz-elf with
 * -DKTRACE_BUILD_FUZZ=ON; ktrace-fuzz-elf-regress replays
 * tests/fuzz/corpus-elf and tests/fuzz/regressions-elf in every build.
 */
#include <stddef.h>
#include <stdint.h>

#include "decoder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ktrace_elf *e;
	struct ktrace_dec_error err;
	uint64_t v, start;

	if (ktrace__elf_parse(data, size, &e, &err) != 0)
		return 0;
	for (uint64_t off = 0; off < 0x4000; off += 0x1f1)
		if (ktrace__elf_offset_to_vaddr(e, off, &v) == 0)
			ktrace__elf_lookup(e, v, &start);
	for (uint64_t a = 0; a < 0x10000; a += 0x3e7)
		ktrace__elf_lookup(e, a, &start);
	ktrace__elf_lookup(e, UINT64_MAX, NULL);
	ktrace__elf_free(e);
	return 0;
}
