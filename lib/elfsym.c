/*
 * elfsym.c - the name of a function from the ELF symbol tables of the
 * module that holds it, for KTRACE_EXCLUDE / KTRACE_INCLUDE.
 *
 * Used only when one of those is set, once per function (on its first
 * call, in the slow path that gives it a compact id).  The module is the
 * executable mapping /proc/self/maps names (funcs.c keeps the map); its
 * file is mapped read-only once and kept (KT_ELF_CACHE modules), and
 * .symtab (static functions too) then .dynsym are searched for a function
 * symbol starting at the address.  No allocation, no stdio: the slow path
 * can run inside a traced signal handler.  Callers are serialized by a
 * spin flag; the slow path's nesting guard keeps a signal handler on the
 * holder's own thread out of here, so the spin cannot deadlock.
 */
#include "internal.h"

#include <elf.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define KT_ELF_CACHE 64
#define KT_ELF_PATH 256

struct kt_elf {
	char path[KT_ELF_PATH];
	const unsigned char *map;   /* whole file, read-only; NULL: unusable */
	size_t size;                /* bytes */
};

static struct kt_elf elfs[KT_ELF_CACHE];
static uint32_t nelfs;             /* under elf_lock */
static atomic_flag elf_lock = ATOMIC_FLAG_INIT;

static KT_NOINSTR const struct kt_elf *elf_get(const char *path)
{
	struct kt_elf *e;
	uint64_t dev, ino, size = 0;
	void *m;
	int fd;

	for (uint32_t i = 0; i < nelfs; i++)
		if (strcmp(elfs[i].path, path) == 0)
			return &elfs[i];
	if (nelfs == KT_ELF_CACHE)
		return NULL;
	e = &elfs[nelfs++];
	/* not snprintf: see funcs.c's module_of (stack); path is
	 * NUL-terminated within KT_ELF_PATH (module_of) */
	memcpy(e->path, path, strnlen(path, sizeof(e->path) - 1));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return e;
	if (ktrace__fd_stat(fd, &dev, &ino, &size) == 0 && size >= sizeof(Elf64_Ehdr)) {
		m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m != MAP_FAILED) {
			const Elf64_Ehdr *h = m;
			if (memcmp(h->e_ident, ELFMAG, SELFMAG) == 0 &&
			    h->e_ident[EI_CLASS] == ELFCLASS64) {
				e->map = m;
				e->size = (size_t)size;
			} else {
				munmap(m, (size_t)size);
			}
		}
	}
	close(fd);
	return e;
}

/* Is [off, off + n * sz) inside the file? */
static KT_NOINSTR int in_file(const struct kt_elf *e, uint64_t off, uint64_t n, uint64_t sz)
{
	return off <= e->size && sz != 0 && n <= (e->size - off) / sz;
}

/* Search one symbol table section for a function starting at vaddr. */
static KT_NOINSTR int find_in(const struct kt_elf *e, const Elf64_Shdr *sh,
                              const Elf64_Shdr *strs, uint64_t vaddr, char *buf, size_t len)
{
	uint64_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	if (sh->sh_entsize != sizeof(Elf64_Sym) || !in_file(e, sh->sh_offset, n, sizeof(Elf64_Sym)) ||
	    !in_file(e, strs->sh_offset, strs->sh_size, 1))
		return -1;
	for (uint64_t i = 0; i < n; i++) {
		const Elf64_Sym *s = (const Elf64_Sym *)(e->map + sh->sh_offset) + i;
		int type = ELF64_ST_TYPE(s->st_info);
		const char *name;
		size_t room;

		if (s->st_value != vaddr || s->st_shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC) || s->st_name >= strs->sh_size)
			continue;
		name = (const char *)e->map + strs->sh_offset + s->st_name;
		room = strs->sh_size - s->st_name;
		if (strnlen(name, room) == room || name[0] == 0)
			continue;
		strncpy(buf, name, len - 1);
		buf[len - 1] = 0;
		return 0;
	}
	return -1;
}

static KT_NOINSTR int lookup(const struct kt_elf *e, uint64_t file_off, char *buf, size_t len)
{
	const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->map;
	const Elf64_Shdr *sh;
	uint64_t vaddr = 0;
	int found = 0;

	if (!in_file(e, h->e_phoff, h->e_phnum, sizeof(Elf64_Phdr)) ||
	    !in_file(e, h->e_shoff, h->e_shnum, sizeof(Elf64_Shdr)) ||
	    h->e_phentsize != sizeof(Elf64_Phdr) || h->e_shentsize != sizeof(Elf64_Shdr))
		return -1;
	/* File offset -> ELF virtual address through the PT_LOAD holding it. */
	for (uint32_t i = 0; i < h->e_phnum && !found; i++) {
		const Elf64_Phdr *p = (const Elf64_Phdr *)(e->map + h->e_phoff) + i;
		if (p->p_type == PT_LOAD && file_off >= p->p_offset &&
		    file_off - p->p_offset < p->p_filesz) {
			vaddr = p->p_vaddr + (file_off - p->p_offset);
			found = 1;
		}
	}
	if (!found)
		return -1;
	sh = (const Elf64_Shdr *)(e->map + h->e_shoff);
	/* .symtab first (it has the static functions), then .dynsym. */
	for (uint32_t want = SHT_SYMTAB;; want = SHT_DYNSYM) {
		for (uint32_t i = 0; i < h->e_shnum; i++)
			if (sh[i].sh_type == want && sh[i].sh_link < h->e_shnum &&
			    find_in(e, &sh[i], &sh[sh[i].sh_link], vaddr, buf, len) == 0)
				return 0;
		if (want == SHT_DYNSYM)
			return -1;
	}
}

KT_NOINSTR int ktrace__sym_name(uintptr_t addr, char *buf, size_t len)
{
	char path[KT_ELF_PATH];
	uint64_t start, offset;
	const struct kt_elf *e;
	int r = -1;

	if (len == 0)
		return -1;
	if (ktrace__module_of(addr, &start, &offset, path, sizeof(path)) != 0) {
		ktrace__module_note(addr);
		if (ktrace__module_of(addr, &start, &offset, path, sizeof(path)) != 0)
			return -1;
	}
	/* acquire: pairs with the release clear below, so the cache entries
	 * the previous holder added are visible. */
	while (atomic_flag_test_and_set_explicit(&elf_lock, memory_order_acquire))
		sched_yield();
	e = elf_get(path);
	if (e && e->map)
		r = lookup(e, offset + (addr - start), buf, len);
	atomic_flag_clear_explicit(&elf_lock, memory_order_release);
	return r;
}
