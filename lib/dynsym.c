/*
 * dynsym.c - a loaded module's dynamic symbol table, read in memory
 * (dynsym.h).
 */
#include "internal.h"
#include "dynsym.h"

#include <string.h>

/* A dynamic-section pointer: glibc relocates them in place on most
 * architectures, not in read-only ones (vDSO; RISC-V, MIPS). */
static KT_NOINSTR uintptr_t dyn_ptr(const struct dl_phdr_info *info, uintptr_t p)
{
	return p < info->dlpi_addr ? p + info->dlpi_addr : p;
}

KT_NOINSTR int ktrace__dynsyms(const struct dl_phdr_info *info, struct kt_dynsyms *ds)
{
	const ElfW(Dyn) *d = NULL;

	memset(ds, 0, sizeof(*ds));
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	for (; d && d->d_tag != DT_NULL; d++) {
		uintptr_t p = dyn_ptr(info, d->d_un.d_ptr);

		if (d->d_tag == DT_SYMTAB)
			ds->symtab = (const ElfW(Sym) *)p;
		else if (d->d_tag == DT_STRTAB)
			ds->strtab = (const char *)p;
		else if (d->d_tag == DT_GNU_HASH)
			ds->gh = (const uint32_t *)p;
		else if (d->d_tag == DT_HASH)
			ds->hash = (const uint32_t *)p;
	}
	return ds->symtab && ds->strtab && (ds->gh || ds->hash) ? 0 : -1;
}

static KT_NOINSTR uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

static KT_NOINSTR const ElfW(Sym) *gnu_lookup(const struct kt_dynsyms *ds, const char *name)
{
	const uint32_t *gh = ds->gh;
	uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_words = gh[2];
	const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)&gh[4] + bloom_words);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t h = gnu_hash(name), i;

	if (nbuckets == 0)
		return NULL;
	i = buckets[h % nbuckets];
	if (i < symoffset)
		return NULL;
	for (;; i++) {
		uint32_t h2 = chain[i - symoffset];
		if ((h | 1) == (h2 | 1) && strcmp(ds->strtab + ds->symtab[i].st_name, name) == 0)
			return &ds->symtab[i];
		if (h2 & 1)
			return NULL;
	}
}

KT_NOINSTR const ElfW(Sym) *ktrace__dynsym_find(const struct kt_dynsyms *ds, const char *name)
{
	if (ds->gh)
		return gnu_lookup(ds, name);
	for (uint32_t i = 0; i < ds->hash[1]; i++)   /* nchain = number of symbols */
		if (strcmp(ds->strtab + ds->symtab[i].st_name, name) == 0)
			return &ds->symtab[i];
	return NULL;
}

KT_NOINSTR uint32_t ktrace__dynsym_unhashed(const struct kt_dynsyms *ds)
{
	return ds->gh ? ds->gh[1] : ds->hash[1];
}

KT_NOINSTR int ktrace__dynsym_imports(const struct dl_phdr_info *info, const char *name)
{
	struct kt_dynsyms ds;
	const ElfW(Sym) *s;
	uint32_t n;

	if (ktrace__dynsyms(info, &ds) != 0)
		return 0;
	/* Only the symbols the hash table does not reach are read one by
	 * one: under DT_GNU_HASH the undefined ones come first, below its
	 * symoffset, and libc's ~3000 defined ones were 30 us of every traced
	 * program's start-up.  A linker that hashed an undefined one too is
	 * still answered by the lookup. */
	n = ktrace__dynsym_unhashed(&ds);
	for (uint32_t i = 1; i < n; i++)
		if (ds.symtab[i].st_shndx == SHN_UNDEF && strcmp(ds.strtab + ds.symtab[i].st_name, name) == 0)
			return 1;
	return ds.gh && (s = ktrace__dynsym_find(&ds, name)) != NULL && s->st_shndx == SHN_UNDEF;
}
