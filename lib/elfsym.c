/*
 * elfsym.c - the name of a function from the ELF symbol tables of the
 * module that holds it, for KTRACE_EXCLUDE / KTRACE_INCLUDE.
 *
 * Used only when one of those is set, once per function (on its first
 * call, in the slow path that gives it a compact id).  The module is the
 * executable mapping /proc/self/maps names (funcs.c keeps the map); its
 * file is mapped read-only once and kept (KT_ELF_CACHE modules), and
 * .symtab (static functions too) then .dynsym are searched for a function
 * symbol starting at the address, through an index of both sorted by
 * address, made at the module's first lookup (mmap()ed, 16 bytes a
 * symbol).  A scan of the tables for each function cost a big program's
 * first calls dearly: 100,000 functions, 2016 of them looked up, took
 * 137 ms of slow paths (68 us a lookup), and a program with 10 times the
 * symbols would pay 10 times that.  No malloc, no stdio: the slow path
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

/* A function symbol: its address, and where it is (a .symtab before a
 * .dynsym, each in section order; then its index there). */
struct kt_symref {
	uint64_t vaddr;
	uint16_t rank;              /* the section's: .symtab ones first */
	uint16_t shndx;             /* the section header */
	uint32_t sym;               /* the symbol's index in it */
};

struct kt_elf {
	char path[KT_ELF_PATH];
	const unsigned char *map;   /* whole file, read-only; NULL: unusable */
	size_t size;                /* bytes */
	struct kt_symref *idx;      /* by (vaddr, rank, sym); NULL: not made */
	uint64_t nidx;
	int idx_tried;
};

static struct kt_elf elfs[KT_ELF_CACHE];
static uint32_t nelfs;             /* under elf_lock */
static atomic_flag elf_lock = ATOMIC_FLAG_INIT;

static KT_NOINSTR struct kt_elf *elf_get(const char *path)
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

/* Symbol table section sh (its strings strs) as an array of n symbols,
 * or NULL where the file does not hold it. */
static KT_NOINSTR const Elf64_Sym *sym_table(const struct kt_elf *e, const Elf64_Shdr *sh,
                                             const Elf64_Shdr *strs, uint64_t *n)
{
	*n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	if (sh->sh_entsize != sizeof(Elf64_Sym) || !in_file(e, sh->sh_offset, *n, sizeof(Elf64_Sym)) ||
	    !in_file(e, strs->sh_offset, strs->sh_size, 1))
		return NULL;
	return (const Elf64_Sym *)(e->map + sh->sh_offset);
}

/* s's name (from strs) if s is a defined function with a whole name. */
static KT_NOINSTR const char *func_name(const struct kt_elf *e, const Elf64_Sym *s,
                                        const Elf64_Shdr *strs)
{
	int type = ELF64_ST_TYPE(s->st_info);
	const char *name;
	size_t room;

	if (s->st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
	    s->st_name >= strs->sh_size)
		return NULL;
	name = (const char *)e->map + strs->sh_offset + s->st_name;
	room = strs->sh_size - s->st_name;
	return strnlen(name, room) == room || name[0] == 0 ? NULL : name;
}

static KT_NOINSTR void copy_name(char *buf, size_t len, const char *name)
{
	strncpy(buf, name, len - 1);
	buf[len - 1] = 0;
}

/* Search one symbol table section for a function starting at vaddr (the
 * index's fallback). */
static KT_NOINSTR int find_in(const struct kt_elf *e, const Elf64_Shdr *sh,
                              const Elf64_Shdr *strs, uint64_t vaddr, char *buf, size_t len)
{
	uint64_t n;
	const Elf64_Sym *t = sym_table(e, sh, strs, &n);
	const char *name;

	for (uint64_t i = 0; t && i < n; i++)
		if (t[i].st_value == vaddr && (name = func_name(e, &t[i], strs)) != NULL) {
			copy_name(buf, len, name);
			return 0;
		}
	return -1;
}

static KT_NOINSTR int by_ref(const void *a, const void *b)
{
	const struct kt_symref *x = a, *y = b;

	if (x->vaddr != y->vaddr)
		return x->vaddr < y->vaddr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->sym < y->sym ? -1 : x->sym > y->sym;
}

/*
 * The index of e's function symbols (two passes over the tables: count,
 * then fill), sorted.  Not made (lookups scan the tables) where a table
 * has 2^32 symbols or more, where the count is more than the file could
 * hold (section headers naming one table many times: a hostile file
 * would take gigabytes), where the memory cannot be had, or where the
 * second pass does not find what the first counted (the file changed
 * under its read-only mapping, as a library copied over in place does).
 */
static KT_NOINSTR void index_make(struct kt_elf *e, const Elf64_Shdr *sh, uint32_t shnum)
{
	uint64_t n = 0, k = 0;
	struct kt_symref *x = NULL;

	e->idx_tried = 1;
	for (int fill = 0; fill < 2; fill++) {
		uint16_t rank = 0;

		k = 0;
		for (uint32_t want = SHT_SYMTAB;; want = SHT_DYNSYM) {
			for (uint32_t i = 0; i < shnum; i++) {
				const Elf64_Sym *t;
				uint64_t m;

				if (sh[i].sh_type != want || sh[i].sh_link >= shnum ||
				    (t = sym_table(e, &sh[i], &sh[sh[i].sh_link], &m)) == NULL)
					continue;
				if (m > UINT32_MAX)
					goto out;
				for (uint64_t j = 0; j < m; j++) {
					if (func_name(e, &t[j], &sh[sh[i].sh_link]) == NULL)
						continue;
					if (fill) {
						if (k == n)
							goto out;
						x[k] = (struct kt_symref){ t[j].st_value, rank,
						                           (uint16_t)i, (uint32_t)j };
					}
					k++;
				}
				rank++;
			}
			if (want == SHT_DYNSYM)
				break;
		}
		if (!fill) {
			void *m;

			n = k;
			if (n == 0 || n > e->size / sizeof(Elf64_Sym))
				return;
			m = mmap(NULL, n * sizeof(*x), PROT_READ | PROT_WRITE,
			         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				return;
			x = m;
		}
	}
	if (k == n) {
		ktrace__sort(x, n, sizeof(*x), by_ref);
		e->idx = x;
		e->nidx = n;
		return;
	}
out:
	if (x)
		munmap(x, n * sizeof(*x));
}

/* The index's first symbol at vaddr: .symtab's before .dynsym's, each
 * table's first, as the scan finds them. */
static KT_NOINSTR int index_find(const struct kt_elf *e, const Elf64_Shdr *sh, uint32_t shnum,
                                 uint64_t vaddr, char *buf, size_t len)
{
	uint64_t lo = 0, hi = e->nidx;
	const struct kt_symref *r;
	const Elf64_Sym *t;
	const char *name;
	uint64_t m;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (e->idx[mid].vaddr < vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == e->nidx || e->idx[lo].vaddr != vaddr)
		return -1;
	r = &e->idx[lo];
	/* checked as the index was made; again, should the file change */
	if (r->shndx >= shnum || sh[r->shndx].sh_link >= shnum)
		return -1;
	t = sym_table(e, &sh[r->shndx], &sh[sh[r->shndx].sh_link], &m);
	if (t == NULL || r->sym >= m ||
	    (name = func_name(e, &t[r->sym], &sh[sh[r->shndx].sh_link])) == NULL)
		return -1;
	copy_name(buf, len, name);
	return 0;
}

static int scan_only;   /* tests: the tables scanned, the index not used */

static KT_NOINSTR int lookup(struct kt_elf *e, uint64_t file_off, char *buf, size_t len)
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
	if (!e->idx_tried)
		index_make(e, sh, h->e_shnum);
	if (e->idx && !scan_only)
		return index_find(e, sh, h->e_shnum, vaddr, buf, len);
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
	struct kt_elf *e;
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

/* Tests: ktrace__sym_name by scanning the tables, as before the index. */
KT_NOINSTR int ktrace__sym_name_test_scan(uintptr_t addr, char *buf, size_t len)
{
	int r;

	scan_only = 1;
	r = ktrace__sym_name(addr, buf, len);
	scan_only = 0;
	return r;
}
