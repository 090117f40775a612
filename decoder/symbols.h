/*
 * symbols.h - stage 5, symbols.c: function addresses -> names (ELF .symtab and
 * .dynsym, PIE, shared libraries), and one ELF file's symbols for tools.
 */
#ifndef KD_SYMBOLS_H
#define KD_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

/* Fill d->funcs[].name. Never fails: unresolvable addresses get hex names. */
void kd_symbols_resolve(struct kd_dec *d);
void kd_symbols_cache_free(void *cache);

/* One ELF file's function symbols, for tests and tools. */
struct kd_elf;
int kd_elf_open(const char *path, struct kd_elf **out, struct kd_dec_error *err);
/* Parse an ELF image in memory (copied). */
int kd_elf_parse(const void *buf, size_t len, struct kd_elf **out,
                      struct kd_dec_error *err);
/* Function symbol containing the ELF virtual address, or NULL. */
const char *kd_elf_lookup(const struct kd_elf *elf, uint64_t vaddr, uint64_t *sym_start);
/* Source file (STT_FILE) of the local function symbol at vaddr, or NULL. */
const char *kd_elf_lookup_file(const struct kd_elf *elf, uint64_t vaddr);
/* File offset -> ELF virtual address via PT_LOAD; 0 on success. */
int kd_elf_offset_to_vaddr(const struct kd_elf *elf, uint64_t off, uint64_t *vaddr);
/* Function symbol i (in address order), or NULL past the last one. */
const char *kd_elf_sym_name(const struct kd_elf *elf, uint32_t i);
void kd_elf_free(struct kd_elf *elf);

#endif /* KD_SYMBOLS_H */
