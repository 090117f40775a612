/*
 * dec.c - the decoder's lifecycle: kd_dec_open_file/_buffer run stages
 * 1-5 (decoder.h), kd_dec_free; and the small lookups every sink uses.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "decoder.h"


/* ---- helpers and the one-call pipeline -------------------------------------- */

const char *kd_dec_strdup(struct kd_dec *d, const char *s)
{
	return kd_strpool_add(&d->strs, s);
}

const char *kd_dec_func_name(const struct kd_dec *d, uint32_t func)
{
	if (func >= d->nfuncs || !d->funcs[func].name)
		return "?";
	return d->funcs[func].name;
}

const char *kd_dec_func_sym(const struct kd_dec *d, uint32_t func)
{
	if (func >= d->nfuncs || !d->funcs[func].sym)
		return kd_dec_func_name(d, func);
	return d->funcs[func].sym;
}

const char *kd_dec_name(const struct kd_dec *d, uint32_t id, char *buf, size_t len)
{
	const char *s = kd_snap_name(&d->snap, id);

	if (s)
		return s;
	snprintf(buf, len, "name#%" PRIu32, id);
	return buf;
}

const char *kd_req_id_str(const struct kd_dec_request *q, char *buf, size_t len)
{
	if (q->flags & KD_REQ_UNKNOWN)
		snprintf(buf, len, "(begun before the window)");
	else if (q->flags & KD_REQ_USER_ID)
		snprintf(buf, len, "id=%" PRIu64, q->user_id);
	else if (q->flags & KD_REQ_NUMBERED)
		snprintf(buf, len, "#%" PRIu64, q->id);
	else if (q->id >> 32) /* format 1: the thread's slot (from 1) and its sequence */
		snprintf(buf, len, "#%" PRIu32 ".%" PRIu32, (uint32_t)(q->id >> 32),
		         (uint32_t)q->id);
	else /* format 1 with a small id (a program's own) */
		snprintf(buf, len, "#%" PRIu64, q->id);
	return buf;
}

const char *kd_req_label(const struct kd_dec *d, const struct kd_dec_request *q, char *buf,
                         size_t len)
{
	char nb[64], ib[48];
	const char *kind = q->kind == KD_NONE ? "request" : kd_dec_name(d, q->kind, nb, sizeof(nb));

	snprintf(buf, len, "%s %s", kind, kd_req_id_str(q, ib, sizeof(ib)));
	return buf;
}

const char *kd_req_keep_str(uint32_t keep, char *buf, size_t len)
{
	/* enum ktrace_req_keep, bit by bit */
	static const char *const names[] = { "slow", "sampled", "nested", "spilled", "direct",
	                                     "trigger", "overlap", "warmup", "after" };
	size_t n = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]) && n < len; i++)
		if (keep & (1u << i))
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", names[i]);
	return buf;
}

const char *kd_dec_thread_label(const struct kd_dec *d, uint32_t thread,
                                     char *buf, size_t len)
{
	const struct kd_dec_thread *t;

	if (thread >= d->nthreads) {
		snprintf(buf, len, "?");
		return buf;
	}
	t = &d->threads[thread];
	if (t->known)
		snprintf(buf, len, "%s/%" PRId32, t->name[0] ? t->name : "?", t->tid);
	else
		snprintf(buf, len, "%s", t->name);
	return buf;
}

/* Stages 2-5 on d->snap, read by the caller (stage 1).  Frees d on error. */
static int open_rest(struct kd_dec *d, struct kd_dec **out, struct kd_dec_error *err)
{
	int rc = kd_snap_order(&d->snap, err);

	if (!rc)
		rc = d->opts.stream ? kd_dec_prepare(d, err) : kd_dec_build(d, err);
	if (rc) {
		kd_dec_free(d);
		return rc;
	}
	kd_dec_symbolize(d);
	if (kd_dec_sched(d)) {
		kd_dec_free(d);
		return kd_dec_fail(err, KD_ENOMEM, "out of memory");
	}
	*out = d;
	return 0;
}

static struct kd_dec *dec_new(const char *name, const struct kd_dec_opts *opts)
{
	struct kd_dec *d = kd_xcalloc(1, sizeof(*d), "the decoder");

	d->file = kd_xstrdup(name, "the decoder");
	if (opts)
		d->opts = *opts;
	return d;
}

int kd_dec_open_buffer(const void *buf, size_t len, const char *name,
                            const struct kd_dec_opts *opts, struct kd_dec **out,
                            struct kd_dec_error *err)
{
	struct kd_dec *d;
	int rc;

	*out = NULL;
	memset(err, 0, sizeof(*err));
	d = dec_new(name ? name : "(buffer)", opts);
	rc = kd_snap_read(buf, len, &d->snap, err);
	if (rc) {
		kd_dec_free(d);
		return rc;
	}
	return open_rest(d, out, err);
}

/*
 * A regular file is read in bounded windows (kd_snap_read_fd): memory does
 * not grow with its size.  A pipe or socket (`ktrace-decode <(zcat f.gz)`)
 * cannot be read twice, so it is read into memory whole.
 */
int kd_dec_open_file(const char *path, const struct kd_dec_opts *opts,
                          struct kd_dec **out, struct kd_dec_error *err)
{
	struct kd_dec *d;
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int rc, fd;

	*out = NULL;
	memset(err, 0, sizeof(*err));
	fd = kd_dec_open_path(path, &st);
	if (fd >= 0 && S_ISREG(st.st_mode)) {
		d = dec_new(path, opts);
		rc = kd_snap_read_fd(fd, &st, path, &d->snap, err);
		if (rc) {
			kd_dec_free(d);
			return rc;
		}
		return open_rest(d, out, err);
	}
	rc = kd_dec_read_fd(fd, &st, &buf, &len, err);
	if (rc)
		return rc;
	rc = kd_dec_open_buffer(buf ? buf : "", len, path, opts, out, err);
	if (rc) {
		free(buf);
		return rc;
	}
	(*out)->map = buf;
	(*out)->map_len = len;
	(*out)->map_is_mmap = 0;
	return 0;
}

void kd_dec_free(struct kd_dec *d)
{
	if (!d)
		return;
	kd_snap_free(&d->snap);
	kd_symcache_free(d->symcache);
	free(d->funcs);
	free(d->threads);
	free(d->calls);
	free(d->reqs);
	free(d->marks);
	free(d->runs);
	free(d->core_stats);
	free(d->offcpu);
	free(d->offcpu_first);
	free(d->oncpu);
	kd_strpool_free(&d->strs);
	kd_build_free(d->build);
	if (d->map) {
		if (d->map_is_mmap)
			munmap(d->map, d->map_len);
		else
			free(d->map);
	}
	free(d->file);
	free(d);
}
