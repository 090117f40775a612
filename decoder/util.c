/*
 * util.c - the decoder's utilities (util.h): x-alloc, the growable array,
 * the hash map, the string pool, warnings, CRC-32C.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktrace_crc32c.h"
#include "util.h"

/* ---- memory --------------------------------------------------------------- */

/* ---- errors ----------------------------------------------------------------- */

int kd_util_fail(struct kd_dec_error *err, int code, const char *msg)
{
	if (err) {
		err->code = code;
		err->has_offset = 0;
		err->offset = 0;
		snprintf(err->msg, sizeof(err->msg), "%s", msg);
	}
	return code;
}

void kd_util_error_format(const struct kd_dec_error *err, const char *file,
                              char *buf, size_t len)
{
	if (err->has_offset)
		snprintf(buf, len, "ktrace-decode: %s: offset 0x%" PRIx64 ": %s", file,
		         err->offset, err->msg);
	else
		snprintf(buf, len, "ktrace-decode: %s: %s", file, err->msg);
}

/* ---- memory ----------------------------------------------------------------- */

void kd_util_oom(const char *what, size_t bytes)
{
	fprintf(stderr, "ktrace-decode: out of memory (%zu bytes for %s); decode one file at a "
	        "time or raise the memory limit (ulimit -v)\n", bytes, what);
	exit(1);
}

void *kd_xmalloc(size_t n, const char *what)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		kd_util_oom(what, n);
	return p;
}

void *kd_xcalloc(size_t n, size_t size, const char *what)
{
	void *p;

	if (size && n > SIZE_MAX / size)
		kd_util_oom(what, SIZE_MAX);
	p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		kd_util_oom(what, n * size);
	return p;
}

void *kd_xrealloc(void *p, size_t n, const char *what)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		kd_util_oom(what, n);
	return q;
}

char *kd_xstrdup(const char *s, const char *what)
{
	size_t n = strlen(s) + 1;

	return memcpy(kd_xmalloc(n, what), s, n);
}

void kd_warn(struct kd_dec_warnings *w, uint64_t offset, const char *fmt, ...)
{
	char msg[320];
	int n;
	va_list ap;

	if (!w)
		return;
	w->total++;
	if (w->n >= KD_MAX_WARN)
		return;
	if (!w->lines) {
		w->lines = kd_xcalloc(KD_MAX_WARN, sizeof(*w->lines), "warnings");
	}
	n = snprintf(msg, sizeof(msg), "offset 0x%" PRIx64 ": ", offset);
	if (n < 0 || (size_t)n >= sizeof(msg))
		return;
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	w->lines[w->n++] = kd_xstrdup(msg, "warnings");
}

void kd_warnings_free(struct kd_dec_warnings *w)
{
	for (uint32_t i = 0; i < w->n; i++)
		free(w->lines[i]);
	free(w->lines);
	memset(w, 0, sizeof(*w));
}

/* ---- the growable array ------------------------------------------------------ */

int kd_grow(void *arrp, size_t *cap, size_t n, size_t sz, const char *what)
{
	void **arr = arrp;
	size_t ncap;

	if (n < *cap)
		return 0;
	if (n >= UINT32_MAX)
		return -1;
	ncap = *cap ? *cap * 2 : 64;
	while (ncap <= n)
		ncap *= 2;
	if (ncap > UINT32_MAX)
		ncap = UINT32_MAX;
	if (sz && ncap > SIZE_MAX / sz)
		kd_util_oom(what, SIZE_MAX);
	*arr = kd_xrealloc(*arr, ncap * sz, what);
	*cap = ncap;
	return 0;
}

/* ---- small hash map: u64 key -> u32 value ---------------------------------- */

uint64_t kd_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint32_t *umap_slot(const struct kd_umap *m, uint64_t k)
{
	uint32_t mask = m->cap - 1, i = (uint32_t)kd_mix64(k) & mask;

	while (m->vals[i] != KD_NONE && m->keys[i] != k)
		i = (i + 1) & mask;
	return &m->vals[i];
}

uint32_t kd_umap_get(const struct kd_umap *m, uint64_t k)
{
	if (!m->cap)
		return KD_NONE;
	return *umap_slot(m, k);
}


static int umap_grow(struct kd_umap *m)
{
	struct kd_umap nm;
	uint32_t ncap = m->cap ? m->cap * 2 : 64;

	if (ncap == 0 || ncap > (1u << 30))
		return -1;
	nm.cap = ncap;
	nm.n = 0;
	nm.keys = kd_xmalloc((size_t)ncap * sizeof(*nm.keys), "a hash map");
	nm.vals = kd_xmalloc((size_t)ncap * sizeof(*nm.vals), "a hash map");
	if (!nm.keys || !nm.vals) {
		free(nm.keys);
		free(nm.vals);
		return -1;
	}
	memset(nm.vals, 0xff, (size_t)ncap * sizeof(*nm.vals));
	for (uint32_t i = 0; i < m->cap; i++)
		if (m->vals[i] != KD_NONE)
			kd_umap_put(&nm, m->keys[i], m->vals[i]);
	free(m->keys);
	free(m->vals);
	*m = nm;
	return 0;
}

/* v must not be KD_NONE (the empty marker). */
int kd_umap_put(struct kd_umap *m, uint64_t k, uint32_t v)
{
	uint32_t *s;
	size_t i;

	if ((m->n + 1) * 2 > m->cap && umap_grow(m))
		return -1;
	s = umap_slot(m, k);
	i = (size_t)(s - m->vals);
	if (v == KD_NONE)
		return -1;
	if (*s == KD_NONE)
		m->n++;
	m->keys[i] = k;
	*s = v;
	return 0;
}

void kd_umap_free(struct kd_umap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- string pool -------------------------------------------------------------- */

const char *kd_strpool_add(struct kd_strpool *p, const char *s)
{
	char *c;

	if (kd_grow(&p->s, &p->cap, p->n, sizeof(*p->s), "names"))
		return "?";
	c = kd_xstrdup(s, "names");
	p->s[p->n++] = c;
	return c;
}

void kd_strpool_free(struct kd_strpool *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		free(p->s[i]);
	free(p->s);
	memset(p, 0, sizeof(*p));
}

/* ---- CRC-32C ------------------------------------------------------------------ */

static uint32_t crc_table[8][256];
#if defined(__x86_64__)
static int crc_sse42; /* set once, before main(): later calls only read */
#endif

__attribute__((constructor)) static void crc_init(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_sse42 = __builtin_cpu_supports("sse4.2");
#endif
	ktrace_crc32c_tables(crc_table);
}

uint32_t kd_crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
	if (crc_sse42)
		return ktrace_crc32c_sse42(crc, buf, len);
#endif
	return ktrace_crc32c_sw(crc_table, crc, buf, len);
}
