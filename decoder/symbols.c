/*
 * symbols.c - stage 5 of ktrace-decode: function addresses -> names.
 *
 * The MODULES section lists the process's executable mappings {start, end,
 * file_offset, path}.  For an address inside one:
 *
 *     file_off = addr - start + file_offset
 *     vaddr    = p_vaddr + (file_off - p_offset)   (the PT_LOAD holding file_off)
 *
 * which is right for PIE executables, shared libraries and dlopen()ed code
 * alike.  The enclosing STT_FUNC symbol comes from .symtab (or .dynsym when
 * the file is stripped).  Every read from the ELF file is bounds-checked: a
 * truncated or hostile file gives an error, never a crash.  Parsed files are
 * cached per path for the life of the decoder.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "names.h"
#include "read.h"
#include "result.h"
#include "snap.h"
#include "symbols.h"
#include "util.h"

struct elf_sym {
	uint64_t addr;       /* ELF virtual address */
	uint64_t size;       /* bytes, 0 if unknown */
	const char *name;    /* NUL-terminated, inside the strtab (checked) */
	const char *file;    /* a local symbol's source file (the STT_FILE symbol
	                        before it in .symtab), or NULL */
};

struct elf_load {
	uint64_t offset;     /* p_offset */
	uint64_t filesz;     /* p_filesz */
	uint64_t vaddr;      /* p_vaddr */
};

struct kd_elf {
	uint8_t *buf;        /* the file */
	size_t len;          /* bytes */
	int is_mmap;         /* always 0: files are read, never mapped */
	struct elf_load *loads;
	uint32_t nloads;
	struct elf_sym *syms; /* sorted by addr */
	uint32_t nsyms;
	uint8_t id[32];       /* GNU build-id (.note.gnu.build-id), id_len bytes */
	uint8_t id_len;       /* 0 = the file has none */
	int64_t mtime_ns;     /* of the file opened, 0 = unknown (in memory) */
};

static int in_file(const struct kd_elf *e, uint64_t off, uint64_t size);

/* The GNU build-id from the file's SHT_NOTE sections, if any. */
static void find_build_id(struct kd_elf *e, const Elf64_Ehdr *eh)
{
	for (uint32_t i = 0; i < eh->e_shnum && !e->id_len; i++) {
		Elf64_Shdr sh;
		uint64_t p, end;

		memcpy(&sh, e->buf + eh->e_shoff + (uint64_t)i * eh->e_shentsize, sizeof(sh));
		if (sh.sh_type != SHT_NOTE || !in_file(e, sh.sh_offset, sh.sh_size))
			continue;
		for (p = sh.sh_offset, end = sh.sh_offset + sh.sh_size; end - p >= 12;) {
			uint32_t nh[3];
			uint64_t nsz, dsz;

			memcpy(nh, e->buf + p, sizeof(nh));
			nsz = ((uint64_t)nh[0] + 3) & ~3ull;
			dsz = ((uint64_t)nh[1] + 3) & ~3ull;
			if (nsz > end - p - 12 || dsz > end - p - 12 - nsz)
				break;
			if (nh[2] == NT_GNU_BUILD_ID && nh[0] == 4 &&
			    memcmp(e->buf + p + 12, "GNU", 4) == 0 && nh[1] > 0 && nh[1] <= 32) {
				memcpy(e->id, e->buf + p + 12 + nsz, nh[1]);
				e->id_len = (uint8_t)nh[1];
				break;
			}
			p += 12 + nsz + dsz;
		}
	}
}

static int efail(struct kd_dec_error *err, uint64_t off, const char *fmt, const char *a,
                 uint64_t v)
{
	if (err) {
		err->code = KD_EFORMAT;
		err->has_offset = 1;
		err->offset = off;
		snprintf(err->msg, sizeof(err->msg), fmt, a, v);
	}
	return KD_EFORMAT;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct elf_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Larger size first, so the lookup's leftmost hit has the widest range. */
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Is [off, off+size) inside the file? */
static int in_file(const struct kd_elf *e, uint64_t off, uint64_t size)
{
	return off <= e->len && size <= e->len - off;
}

static int load_symtab(struct kd_elf *e, const Elf64_Ehdr *eh, uint32_t want,
                       struct kd_dec_error *err)
{
	for (uint32_t i = 0; i < eh->e_shnum; i++) {
		Elf64_Shdr sh, st;
		uint64_t n;
		uint32_t k = 0;

		memcpy(&sh, e->buf + eh->e_shoff + (uint64_t)i * eh->e_shentsize, sizeof(sh));
		if (sh.sh_type != want)
			continue;
		if (sh.sh_link >= eh->e_shnum)
			return efail(err, eh->e_shoff + (uint64_t)i * eh->e_shentsize,
			             "%ssymbol table's string table index %" PRIu64 " is out of range",
			             "", sh.sh_link);
		memcpy(&st, e->buf + eh->e_shoff + (uint64_t)sh.sh_link * eh->e_shentsize,
		       sizeof(st));
		if (!in_file(e, sh.sh_offset, sh.sh_size) || !in_file(e, st.sh_offset, st.sh_size))
			return efail(err, eh->e_shoff + (uint64_t)i * eh->e_shentsize,
			             "%ssymbol table runs past the end of the file (%" PRIu64 " bytes)",
			             "", e->len);
		if (sh.sh_entsize && sh.sh_entsize < sizeof(Elf64_Sym))
			return efail(err, eh->e_shoff + (uint64_t)i * eh->e_shentsize,
			             "%ssymbol entry size %" PRIu64 " is too small", "", sh.sh_entsize);
		{
			uint64_t ent = sh.sh_entsize ? sh.sh_entsize : sizeof(Elf64_Sym);

			const char *file = NULL;

			n = sh.sh_size / ent;
			e->syms = kd_xmalloc((size_t)(n ? n : 1) * sizeof(*e->syms),
			                          "ELF symbols");
			for (uint64_t j = 0; j < n; j++) {
				Elf64_Sym s;
				const char *name;

				memcpy(&s, e->buf + sh.sh_offset + j * ent, sizeof(s));
				/* The local symbols of one source file follow its
				 * STT_FILE symbol (the ELF spec's order for .symtab). */
				if (ELF64_ST_TYPE(s.st_info) == STT_FILE) {
					file = NULL;
					if (s.st_name && s.st_name < st.sh_size) {
						name = (const char *)e->buf + st.sh_offset + s.st_name;
						if (memchr(name, '\0', st.sh_size - s.st_name) && name[0])
							file = name;
					}
					continue;
				}
				if (ELF64_ST_TYPE(s.st_info) != STT_FUNC &&
				    ELF64_ST_TYPE(s.st_info) != STT_GNU_IFUNC)
					continue;
				if (s.st_shndx == SHN_UNDEF || s.st_value == 0)
					continue;
				if (s.st_name >= st.sh_size)
					continue;
				name = (const char *)e->buf + st.sh_offset + s.st_name;
				if (!memchr(name, '\0', st.sh_size - s.st_name) || !name[0])
					continue;
				e->syms[k].addr = s.st_value;
				e->syms[k].size = s.st_size;
				e->syms[k].name = name;
				e->syms[k].file = ELF64_ST_BIND(s.st_info) == STB_LOCAL ? file : NULL;
				k++;
			}
		}
		e->nsyms = k;
		qsort(e->syms, k, sizeof(*e->syms), cmp_sym);
		return 0;
	}
	return 1; /* none of this type */
}

static int parse(struct kd_elf *e, struct kd_dec_error *err)
{
	Elf64_Ehdr eh;
	int rc;

	if (e->len < sizeof(eh) || memcmp(e->buf, ELFMAG, SELFMAG) != 0)
		return efail(err, 0, "%snot an ELF file (%" PRIu64 " bytes)", "", e->len);
	memcpy(&eh, e->buf, sizeof(eh));
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return efail(err, 4, "%snot a little-endian ELF64 file (class %" PRIu64 ")", "",
		             eh.e_ident[EI_CLASS]);
	if (eh.e_phnum) {
		if (eh.e_phentsize < sizeof(Elf64_Phdr) ||
		    !in_file(e, eh.e_phoff, (uint64_t)eh.e_phnum * eh.e_phentsize))
			return efail(err, offsetof(Elf64_Ehdr, e_phoff),
			             "%sprogram headers run past the end of the file (%" PRIu64 " bytes)",
			             "", e->len);
		e->loads = kd_xcalloc(eh.e_phnum, sizeof(*e->loads), "ELF program headers");
		for (uint32_t i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;

			memcpy(&ph, e->buf + eh.e_phoff + (uint64_t)i * eh.e_phentsize, sizeof(ph));
			if (ph.p_type != PT_LOAD)
				continue;
			e->loads[e->nloads].offset = ph.p_offset;
			e->loads[e->nloads].filesz = ph.p_filesz;
			e->loads[e->nloads].vaddr = ph.p_vaddr;
			e->nloads++;
		}
	}
	if (!eh.e_shnum)
		return efail(err, offsetof(Elf64_Ehdr, e_shnum), "%sno section headers%.0" PRIu64,
		             "", 0);
	if (eh.e_shentsize < sizeof(Elf64_Shdr) ||
	    !in_file(e, eh.e_shoff, (uint64_t)eh.e_shnum * eh.e_shentsize))
		return efail(err, offsetof(Elf64_Ehdr, e_shoff),
		             "%ssection headers run past the end of the file (%" PRIu64 " bytes)", "",
		             e->len);
	find_build_id(e, &eh);
	rc = load_symtab(e, &eh, SHT_SYMTAB, err);
	if (rc == 1)
		rc = load_symtab(e, &eh, SHT_DYNSYM, err);
	if (rc == 1)
		return efail(err, 0, "%sno symbol table (.symtab or .dynsym)%.0" PRIu64, "", 0);
	return rc;
}

void kd_elf_free(struct kd_elf *e)
{
	if (!e)
		return;
	if (e->is_mmap)
		munmap(e->buf, e->len);
	else
		free(e->buf);
	free(e->loads);
	free(e->syms);
	free(e);
}

int kd_elf_parse(const void *buf, size_t len, struct kd_elf **out,
                      struct kd_dec_error *err)
{
	struct kd_elf *e = kd_xcalloc(1, sizeof(*e), "an ELF file");
	int rc;

	*out = NULL;
	e->buf = kd_xmalloc(len, "an ELF file");
	memcpy(e->buf, buf, len);
	e->len = len;
	rc = parse(e, err);
	if (rc) {
		kd_elf_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

static int eio(struct kd_dec_error *err, const char *fmt, const char *path, const char *why)
{
	if (err) {
		err->code = KD_EIO;
		err->has_offset = 0;
		snprintf(err->msg, sizeof(err->msg), fmt, path, why);
	}
	return KD_EIO;
}

/* Read [off, off + n) of the file, clipped to its size, into e->buf at the
 * same offset.  0, or -1 if the file came up short: truncated meanwhile. */
static int read_range(int fd, struct kd_elf *e, const char *path, uint64_t off, uint64_t n)
{
	if (off >= e->len)
		return 0;
	if (n > e->len - off)
		n = e->len - off;
	return kd_read_pread(fd, e->buf + off, off, n, path, e->len) == n ? 0 : -1;
}

/*
 * Only what parse() looks at is read: the ELF header, program and section
 * headers, the symbol tables and their string tables.  They go to their own
 * offsets in a zero-filled buffer of the file's size (calloc of a large size
 * maps zero pages that cost nothing until written), so parse() checks every
 * offset against the file size exactly as for an in-memory image.  Nothing
 * is mapped from the file: a binary rebuilt or truncated while the decoder
 * reads it gives an error here, never SIGBUS later.
 */
static int read_needed(int fd, struct kd_elf *e, const char *path)
{
	Elf64_Ehdr eh;

	if (read_range(fd, e, path, 0, sizeof(eh)))
		return -1;
	if (e->len < sizeof(eh))
		return 0;
	memcpy(&eh, e->buf, sizeof(eh));
	if (read_range(fd, e, path, eh.e_phoff, (uint64_t)eh.e_phnum * eh.e_phentsize) ||
	    read_range(fd, e, path, eh.e_shoff, (uint64_t)eh.e_shnum * eh.e_shentsize))
		return -1;
	if (eh.e_shentsize < sizeof(Elf64_Shdr) ||
	    !in_file(e, eh.e_shoff, (uint64_t)eh.e_shnum * eh.e_shentsize))
		return 0;
	/* Small note sections (the build-id's): at most 16 of 4 KiB. */
	for (uint32_t i = 0, notes = 0; i < eh.e_shnum && notes < 16; i++) {
		Elf64_Shdr sh;

		memcpy(&sh, e->buf + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof(sh));
		if (sh.sh_type != SHT_NOTE || sh.sh_size > 4096)
			continue;
		notes++;
		if (read_range(fd, e, path, sh.sh_offset, sh.sh_size))
			return -1;
	}
	/* load_symtab() uses the first table of each type: read no other (a
	 * hostile file could list 65535 tables that each span the file). */
	for (uint32_t i = 0, seen = 0; i < eh.e_shnum && seen != 3; i++) {
		Elf64_Shdr sh, st;
		uint32_t bit;

		memcpy(&sh, e->buf + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof(sh));
		bit = sh.sh_type == SHT_SYMTAB ? 1 : sh.sh_type == SHT_DYNSYM ? 2 : 0;
		if (!bit || (seen & bit))
			continue;
		seen |= bit;
		if (read_range(fd, e, path, sh.sh_offset, sh.sh_size))
			return -1;
		if (sh.sh_link >= eh.e_shnum)
			continue;
		memcpy(&st, e->buf + eh.e_shoff + (uint64_t)sh.sh_link * eh.e_shentsize,
		       sizeof(st));
		if (read_range(fd, e, path, st.sh_offset, st.sh_size))
			return -1;
	}
	return 0;
}

int kd_elf_open(const char *path, struct kd_elf **out, struct kd_dec_error *err)
{
	struct kd_elf *e;
	struct stat st;
	int fd, rc;

	*out = NULL;
	/* Never blocks: the path comes from the snapshot and may name a FIFO. */
	fd = kd_read_open_path(path, &st);
	if (fd < 0)
		return eio(err, "cannot open %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
		close(fd);
		return eio(err, "%s is not a regular non-empty file (%s); not read", path,
		           S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory" :
		           S_ISCHR(st.st_mode) ? "a character device" :
		           S_ISBLK(st.st_mode) ? "a block device" :
		           S_ISSOCK(st.st_mode) ? "a socket" : "empty");
	}
	e = kd_xcalloc(1, sizeof(*e), "an ELF file");
	e->len = (size_t)st.st_size;
	e->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	/* Address space for the whole file (untouched pages cost nothing).  If
	 * even that is refused, this file's names are lost, not the decode. */
	e->buf = calloc(1, e->len);
	if (!e->buf) {
		close(fd);
		free(e);
		return eio(err, "%s: %s", path,
		           "no address space to read its symbols (file too large for the memory limit)");
	}
	if (read_needed(fd, e, path)) {
		close(fd);
		kd_elf_free(e);
		return eio(err, "%s: %s", path,
		           "the file was truncated while it was read (rebuilt meanwhile?)");
	}
	close(fd);
	rc = parse(e, err);
	if (rc) {
		kd_elf_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

static const struct elf_sym *lookup(const struct kd_elf *e, uint64_t vaddr)
{
	uint32_t lo = 0, hi = e->nsyms;

	/* Last symbol with addr <= vaddr, then walk back over equal addresses. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (e->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	lo--;
	while (lo > 0 && e->syms[lo - 1].addr == e->syms[lo].addr)
		lo--;
	{
		const struct elf_sym *s = &e->syms[lo];

		if (vaddr == s->addr || (s->size && vaddr - s->addr < s->size))
			return s;
	}
	return NULL;
}

const char *kd_elf_lookup(const struct kd_elf *e, uint64_t vaddr, uint64_t *sym_start)
{
	const struct elf_sym *s = lookup(e, vaddr);

	if (s && sym_start)
		*sym_start = s->addr;
	return s ? s->name : NULL;
}

const char *kd_elf_lookup_file(const struct kd_elf *e, uint64_t vaddr)
{
	const struct elf_sym *s = lookup(e, vaddr);

	return s ? s->file : NULL;
}

/* Name of function symbol i, in address order; NULL past the last. */
const char *kd_elf_sym_name(const struct kd_elf *e, uint32_t i)
{
	return i < e->nsyms ? e->syms[i].name : NULL;
}

int kd_elf_offset_to_vaddr(const struct kd_elf *e, uint64_t off, uint64_t *vaddr)
{
	for (uint32_t i = 0; i < e->nloads; i++) {
		const struct elf_load *l = &e->loads[i];

		if (off >= l->offset && off - l->offset < l->filesz) {
			*vaddr = l->vaddr + (off - l->offset);
			return 0;
		}
	}
	return -1;
}

/* ---- per-decoder cache ------------------------------------------------------ */

struct symcache {
	struct {
		char *path;              /* as given in MODULES */
		struct kd_elf *elf;  /* NULL if it could not be used */
	} *ent;
	uint32_t n;
};

void kd_symbols_cache_free(void *p)
{
	struct symcache *c = p;

	if (!c)
		return;
	for (uint32_t i = 0; i < c->n; i++) {
		free(c->ent[i].path);
		kd_elf_free(c->ent[i].elf);
	}
	free(c->ent);
	free(c);
}

/* The BUILDIDS record of module m, or NULL. */
static const struct ktrace_buildid_rec *bid_of(const struct kd_snap *s,
                                               const struct kd_snap_module *m)
{
	for (uint32_t i = 0; i < s->nbuildids; i++)
		if (s->buildids[i].module == m->rec)
			return &s->buildids[i];
	return NULL;
}

static void hex(const uint8_t *id, uint32_t n, char *out)
{
	for (uint32_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", id[i]);
	out[2 * n] = 0;
}

/* Open path as an ELF file; NULL (and a warning) when it cannot be used. */
static struct kd_elf *try_open(struct kd_dec *d, const char *full, int quiet_missing)
{
	struct kd_dec_error err;
	struct kd_elf *e = NULL;

	memset(&err, 0, sizeof(err));
	if (kd_elf_open(full, &e, &err) == 0)
		return e;
	if (quiet_missing && access(full, F_OK) != 0)
		return NULL;
	if (err.has_offset)
		kd_warn(&d->snap.warn, 0, "symbols: %s: offset 0x%" PRIx64 ": %s; addresses in it "
		        "stay numeric", full, err.offset, err.msg);
	else
		kd_warn(&d->snap.warn, 0, "symbols: %s; addresses in it stay numeric", err.msg);
	return NULL;
}

/*
 * The ELF file for module m.  The snapshot records what the running code
 * was (BUILDIDS: its GNU build-id, else the file's size and mtime); a file
 * that is not it (the program was rebuilt or redeployed since) would give
 * plausible, wrong names, so it is refused with a warning and the
 * addresses stay numeric.  With a build-id the file is looked for first
 * where gdb and debuginfod put it, by build-id: --debug-dir DIR and
 * SYSROOT/usr/lib/debug, as .build-id/xx/rest.debug, then at the path.
 */
static struct kd_elf *cached_elf(struct kd_dec *d, struct symcache *c,
                                 const struct kd_snap_module *m)
{
	const char *path = m->path, *root = d->opts.sysroot ? d->opts.sysroot : "";
	const struct ktrace_buildid_rec *b = bid_of(&d->snap, m);
	char full[4600], want[65], got[65];
	struct kd_elf *e = NULL;
	void *p;

	for (uint32_t i = 0; i < c->n; i++)
		if (strcmp(c->ent[i].path, path) == 0)
			return c->ent[i].elf;
	p = kd_xrealloc(c->ent, ((size_t)c->n + 1) * sizeof(*c->ent), "the symbol cache");
	c->ent = p;
	if (b && b->id_len) {
		hex(b->id, b->id_len, want);
		for (int k = 0; k < 2 && !e; k++) {
			const char *dir = k == 0 ? d->opts.debug_dir : d->opts.sysroot;

			if (!dir)
				continue;
			snprintf(full, sizeof(full), "%s%s/.build-id/%.2s/%s.debug", dir,
			         k == 0 ? "" : "/usr/lib/debug", want, want + 2);
			e = try_open(d, full, 1);
			if (e && (e->id_len != b->id_len || memcmp(e->id, b->id, b->id_len))) {
				kd_elf_free(e);   /* a wrong file under its build-id: skip it */
				e = NULL;
			}
		}
	}
	if (!e && path[0] == '/') {
		snprintf(full, sizeof(full), "%s%s", root, path);
		e = try_open(d, full, 0);
		if (e && b && b->id_len && e->id_len &&
		    (e->id_len != b->id_len || memcmp(e->id, b->id, b->id_len))) {
			hex(e->id, e->id_len, got);
			kd_warn(&d->snap.warn, 0, "symbols: %s: not the file that ran (build-id "
			        "%.12s..., the snapshot's %s): its addresses stay numeric; "
			        "--debug-dir D finds D/.build-id/%.2s/%s.debug", full, got, want,
			        want, want + 2);
			kd_elf_free(e);
			e = NULL;
		} else if (e && b && (!b->id_len || !e->id_len) && b->file_size &&
		           b->file_size != e->len) {
			kd_warn(&d->snap.warn, 0, "symbols: %s: not the file that ran (%zu bytes, "
			        "it had %" PRIu64 "; no build-id to compare): its addresses stay "
			        "numeric", full, e->len, b->file_size);
			kd_elf_free(e);
			e = NULL;
		} else if (e && b && (!b->id_len || !e->id_len) && b->mtime_ns && !d->opts.sysroot &&
		           b->mtime_ns != e->mtime_ns) {
			kd_warn(&d->snap.warn, 0, "symbols: %s: modified since the program mapped it "
			        "(same size, no build-id to compare): names may be wrong", full);
		}
	}
	c->ent[c->n].path = kd_xstrdup(path, "the symbol cache");
	c->ent[c->n].elf = e;
	c->n++;
	return e;
}

static const struct kd_snap_module *find_module(const struct kd_snap *s, uint64_t addr)
{
	uint32_t lo = 0, hi = s->nmodules;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (s->modules[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Mappings do not overlap in a real process; check a few to the left. */
	for (uint32_t k = 0; k < 8 && lo > 0; k++, lo--)
		if (addr < s->modules[lo - 1].end)
			return &s->modules[lo - 1];
	return NULL;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static const char *symbolize_addr(struct kd_dec *d, struct symcache *c, uint64_t addr)
{
	const struct kd_snap_module *m = find_module(&d->snap, addr);
	char buf[512];

	if (!m) {
		snprintf(buf, sizeof(buf), "0x%" PRIx64, addr);
		return kd_names_strdup(d, buf);
	}
	{
		uint64_t off = addr - m->start + m->file_offset, vaddr, start = 0;
		struct kd_elf *e = (c && !d->opts.no_symbols) ? cached_elf(d, c, m) : NULL;
		const char *name = NULL;

		if (e && kd_elf_offset_to_vaddr(e, off, &vaddr) == 0)
			name = kd_elf_lookup(e, vaddr, &start);
		if (name && start == vaddr)
			return name; /* lives as long as the cache */
		if (name) {
			snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, name, vaddr - start);
			return kd_names_strdup(d, buf);
		}
		snprintf(buf, sizeof(buf), "0x%" PRIx64 "(%s+0x%" PRIx64 ")", addr,
		         base_name(m->path), off);
		return kd_names_strdup(d, buf);
	}
}

/* A C++ symbol's demangled form ("name" or "name+0x10"), decoder-owned;
 * the name itself if it is not mangled or does not demangle. */
static const char *demangled(struct kd_dec *d, const char *name)
{
	const char *plus = strchr(name, '+');
	char base[4096], *dm, *full;
	const char *r = name;
	size_t n = plus ? (size_t)(plus - name) : strlen(name);

	if (d->opts.raw_names || !kd_names_is_mangled(name) || n >= sizeof(base))
		return name;
	memcpy(base, name, n);
	base[n] = 0;
	if ((dm = kd_names_demangle(base)) == NULL) {
		if (kd_names_demangler_missing() && !d->pass.warned_demangle) {
			d->pass.warned_demangle = 1;
			fprintf(stderr, "ktrace-decode: %s: C++ names stay mangled: libstdc++.so.6 "
			        "(its __cxa_demangle) is not installed; install libstdc++6, or "
			        "pipe the output through c++filt\n", d->file ? d->file : "?");
		}
		return name;
	}
	if ((full = malloc(strlen(dm) + strlen(name + n) + 1)) != NULL) {
		strcpy(full, dm);
		strcat(full, name + n);
		r = kd_names_strdup(d, full);
		free(full);
	}
	free(dm);
	return r;
}

/* The timeline form of f->name (names.c), decoder-owned if different. */
static void set_short(struct kd_dec *d, struct kd_dec_func *f)
{
	char buf[KD_SHORT_NAME_MAX * 2];
	const char *s = kd_names_shorten(f->name, buf, sizeof(buf));

	f->short_name = s == f->name ? f->name : kd_names_strdup(d, s);
}

/* The source file of the local symbol at addr (base name), or NULL. */
static const char *file_of(struct kd_dec *d, struct symcache *c, uint64_t addr)
{
	const struct kd_snap_module *m = find_module(&d->snap, addr);
	struct kd_elf *e;
	uint64_t vaddr;
	const char *file;

	if (!m || !c || d->opts.no_symbols || !(e = cached_elf(d, c, m)) ||
	    kd_elf_offset_to_vaddr(e, addr - m->start + m->file_offset, &vaddr) != 0 ||
	    !(file = kd_elf_lookup_file(e, vaddr)))
		return NULL;
	return base_name(file);
}

static const struct kd_dec_func *sort_funcs; /* cmp_func_sym's table */

static int cmp_func_sym(const void *a, const void *b)
{
	const struct kd_dec_func *f = sort_funcs;
	const struct kd_dec_func *x = &f[*(const uint32_t *)a], *y = &f[*(const uint32_t *)b];
	int r = strcmp(x->sym, y->sym);

	if (r)
		return r;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * Names that repeat say which copy they are.  Static functions of the same
 * name in several files (a static inline of a header, copied into every
 * file that calls it) are different functions at different addresses: each
 * gets a label, "sdslen [t_string.c]", the source file from the symbol
 * table's STT_FILE entry; where that does not tell them apart (no .symtab,
 * or two copies in one file), the module and offset, "sdslen
 * [redis-server+0x4a1f0]".  f->sym keeps the symbol's own name (what
 * --format exclude gives GCC).
 */
static void label_repeats(struct kd_dec *d, struct symcache *c)
{
	uint32_t *ix = kd_xmalloc((size_t)(d->nfuncs ? d->nfuncs : 1) * sizeof(*ix),
	                          "the repeated names");
	uint32_t n = 0;
	char buf[4200];

	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (d->funcs[i].kind == KD_FUNC_ADDR)
			ix[n++] = i;
	sort_funcs = d->funcs;
	qsort(ix, n, sizeof(*ix), cmp_func_sym);
	for (uint32_t a = 0, b; a < n; a = b) {
		int by_file = 1;

		for (b = a + 1; b < n && !strcmp(d->funcs[ix[b]].sym, d->funcs[ix[a]].sym); b++)
			;
		if (b - a < 2)
			continue;
		/* by file when every copy has one and no two share it */
		for (uint32_t i = a; i < b && by_file; i++) {
			const char *fi = file_of(d, c, d->funcs[ix[i]].addr);

			by_file = fi != NULL;
			for (uint32_t j = a; j < i && by_file; j++)
				by_file = strcmp(fi, file_of(d, c, d->funcs[ix[j]].addr)) != 0;
		}
		for (uint32_t i = a; i < b; i++) {
			struct kd_dec_func *f = &d->funcs[ix[i]];
			const struct kd_snap_module *m = find_module(&d->snap, f->addr);

			if (by_file)
				snprintf(buf, sizeof(buf), "%s [%s]", f->sym, file_of(d, c, f->addr));
			else if (m)
				snprintf(buf, sizeof(buf), "%s [%s+0x%" PRIx64 "]", f->sym,
				         base_name(m->path), f->addr - m->start + m->file_offset);
			else
				snprintf(buf, sizeof(buf), "%s [0x%" PRIx64 "]", f->sym, f->addr);
			f->name = kd_names_strdup(d, buf);
			set_short(d, f);
		}
	}
	free(ix);
}

void kd_symbols_resolve(struct kd_dec *d)
{
	struct symcache *c = NULL;
	char buf[64];

	if (!d->opts.no_symbols && !d->pass.symcache)
		d->pass.symcache = kd_xcalloc(1, sizeof(struct symcache), "the symbol cache");
	c = d->pass.symcache;
	for (uint32_t i = 0; i < d->nfuncs; i++) {
		struct kd_dec_func *f = &d->funcs[i];

		if (f->name)
			continue; /* named by an earlier call */
		switch (f->kind) {
		case KD_FUNC_SPAN: {
			const char *s = kd_snap_name(&d->snap, f->id);

			if (s) {
				f->name = s;
			} else {
				snprintf(buf, sizeof(buf), "span#%" PRIu32, f->id);
				f->name = kd_names_strdup(d, buf);
			}
			break;
		}
		case KD_FUNC_UNKNOWN_ID:
			snprintf(buf, sizeof(buf), "func#%" PRIu32, f->id);
			f->name = kd_names_strdup(d, buf);
			break;
		default:
			f->name = demangled(d, symbolize_addr(d, c, f->addr));
			break;
		}
		f->sym = f->name;
		set_short(d, f);
	}
	label_repeats(d, c);
}
