/*
 * util.h - the decoder's one set of utilities, used by every stage and sink:
 * allocation that never returns NULL (x-alloc), ONE growable array, a hash
 * map u64 -> u32, a string pool and the warning list.  Nothing here knows
 * about snapshots.
 */
#ifndef KD_UTIL_H
#define KD_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define KD_NONE UINT32_MAX

/*
 * Errors: functions return 0 or a negative KD_E* code and fill a
 * struct kd_dec_error that names the file offset and what is wrong.
 */
enum {
	KD_EFORMAT = -1, /* not a ktrace file, or unsupported */
	KD_ECORRUPT = -2, /* a ktrace file, but damaged beyond use */
	KD_ENOMEM = -3,
	KD_EIO = -4, /* could not open or read the file */
};

struct kd_dec_error {
	uint64_t offset; /* bytes from file start; meaningful if has_offset */
	int has_offset;
	int code;        /* KD_E* */
	char msg[320];   /* what is wrong, no file name, no newline */
};

/* Fill err (no offset); returns code. */
int kd_util_fail(struct kd_dec_error *err, int code, const char *msg);
/* Format "ktrace-decode: FILE: offset 0x..: MSG" into buf. */
void kd_util_error_format(const struct kd_dec_error *err, const char *file,
                              char *buf, size_t len);

/*
 * Memory.  Running out of memory is fatal in the decoder, at the first
 * failing allocation: one line on stderr, "ktrace-decode: out of memory
 * (N bytes for WHAT); ...", and exit status 1 (atexit handlers run, so
 * main.c removes its temporary output).  Never a retry, never a partial
 * result that looks whole.  Every allocation in decoder/ goes through these
 * (they never return NULL), except the image of an ELF file in symbols.c:
 * when that is refused, only that file's names are lost, with a warning.
 */
void kd_util_oom(const char *what, size_t bytes) __attribute__((noreturn, cold));
void *kd_xmalloc(size_t n, const char *what);
void *kd_xcalloc(size_t n, size_t size, const char *what);
void *kd_xrealloc(void *p, size_t n, const char *what);
char *kd_xstrdup(const char *s, const char *what);

/*
 * The growable array: make index n of *arrp (elements of sz bytes, *cap of
 * them allocated) valid, doubling.  Arrays are indexed by u32: -1 when n
 * is UINT32_MAX or more, else 0 (out of memory is fatal, above).
 *
 *	if (kd_grow(&v, &cap, n, sizeof(*v), "what")) ...; v[n++] = x;
 */
int kd_grow(void *arrp, size_t *cap, size_t n, size_t sz, const char *what);

/* A 64-bit mixer (splitmix64's finaliser), for hash keys. */
uint64_t kd_mix64(uint64_t x);

/* Hash map u64 -> u32 (open addressing); zero-initialised is empty. */
struct kd_umap {
	uint64_t *keys;
	uint32_t *vals;           /* KD_NONE = empty */
	uint32_t cap;             /* power of two */
	uint32_t n;
};
uint32_t kd_umap_get(const struct kd_umap *m, uint64_t k); /* or KD_NONE */
/* v must not be KD_NONE; 0, or -1 when the map cannot grow further. */
int kd_umap_put(struct kd_umap *m, uint64_t k, uint32_t v);
void kd_umap_free(struct kd_umap *m);

/* String pool: copies that live until kd_strpool_free. */
struct kd_strpool {
	char **s;
	uint32_t n;
	size_t cap;
};
const char *kd_strpool_add(struct kd_strpool *p, const char *s);
void kd_strpool_free(struct kd_strpool *p);

/* Non-fatal problems, in file order.  At most KD_MAX_WARN kept. */
#define KD_MAX_WARN 256
struct kd_dec_warnings {
	char **lines;     /* "offset 0x..: what" */
	uint32_t n;       /* lines kept */
	uint64_t total;   /* warnings raised, including ones not kept */
};

void kd_warn(struct kd_dec_warnings *w, uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void kd_warnings_free(struct kd_dec_warnings *w);

/* CRC-32C (the portable one in include/ktrace_crc32c.h). */
uint32_t kd_crc32c(uint32_t crc, const void *buf, size_t len);

#endif /* KD_UTIL_H */
