/*
 * dynsym.h - a loaded module's dynamic symbol table, read in memory
 * through its PT_DYNAMIC (dynsym.c): glibc's rseq symbols (init.c), an
 * mlockall import (memlock.c), an mcount import (gprof.c).
 */
#ifndef KTRACE_DYNSYM_H
#define KTRACE_DYNSYM_H

#include <elf.h>
#include <link.h>
#include <stdint.h>

struct kt_dynsyms {
	const ElfW(Sym) *symtab;
	const char *strtab;
	const uint32_t *gh;     /* DT_GNU_HASH, or NULL */
	const uint32_t *hash;   /* DT_HASH, or NULL */
};

/* info's tables into *ds: 0, or -1 if it has no symbol table or hash. */
int ktrace__dynsyms(const struct dl_phdr_info *info, struct kt_dynsyms *ds);
/* The symbol called name, through the hash table; NULL if none. */
const ElfW(Sym) *ktrace__dynsym_find(const struct kt_dynsyms *ds, const char *name);
/* Symbols [0, n) that the hash table does not reach: below DT_GNU_HASH's
 * symoffset (the undefined ones among them: linkers put them first), or
 * every one under DT_HASH alone. */
uint32_t ktrace__dynsym_unhashed(const struct kt_dynsyms *ds);
/* Does info's object import name (an undefined dynamic symbol)? */
int ktrace__dynsym_imports(const struct dl_phdr_info *info, const char *name);

#endif
