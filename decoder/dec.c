/*
 * dec.c - the decoder's lifecycle: kd_dec_open_file/_buffer run stages
 * 1-5 (dec.h), kd_dec_collect (a walk with the collector, through the
 * range if any), kd_dec_free.  It composes the stages; none calls it.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "build.h"
#include "collect.h"
#include "dec.h"
#include "iter.h"
#include "kd_sched.h"
#include "range.h"
#include "read.h"
#include "result.h"
#include "symbols.h"
#include "util.h"

/* Stage 3 on a read and ordered snapshot: prepare, then walk with the
 * collector. */
int kd_dec_build(struct kd_dec *d, struct kd_dec_error *err)
{
	struct kd_collector c;
	int rc = kd_build_prepare(d, err);

	if (rc)
		return rc;
	kd_collector_init(&c, d);
	rc = kd_build_walk(d, kd_collector_sink(&c), err);
	kd_collector_free(&c);
	return rc;
}

int kd_dec_collect(struct kd_dec *d, struct kd_dec_error *err)
{
	struct kd_collector c;
	int rc;

	kd_collector_init(&c, d);
	if (d->cut.range)
		rc = kd_range_collect(d, &c, err);  /* cut on the way (range.c) */
	else
		rc = kd_build_walk(d, kd_collector_sink(&c), err);
	kd_collector_free(&c);
	if (!rc)
		d->opts.stream = 0;
	return rc;
}

/* Stages 2-5 on d->snap, read by the caller (stage 1).  Frees d on error. */
static int open_rest(struct kd_dec *d, struct kd_dec **out, struct kd_dec_error *err)
{
	int rc = kd_iter_order(&d->snap, err);

	if (!rc)
		rc = d->opts.stream ? kd_build_prepare(d, err) : kd_dec_build(d, err);
	if (rc) {
		kd_dec_free(d);
		return rc;
	}
	kd_symbols_resolve(d);
	if (kd_sched_decode(d)) {
		kd_dec_free(d);
		return kd_util_fail(err, KD_ENOMEM, "out of memory");
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
	fd = kd_read_open_path(path, &st);
	if (fd >= 0 && S_ISREG(st.st_mode)) {
		d = dec_new(path, opts);
		rc = kd_snap_read_fd(fd, &st, path, &d->snap, err);
		if (rc) {
			kd_dec_free(d);
			return rc;
		}
		return open_rest(d, out, err);
	}
	rc = kd_read_whole_fd(fd, &st, &buf, &len, err);
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
	kd_symbols_cache_free(d->pass.symcache);
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
	free(d->merge.joins);
	kd_strpool_free(&d->strs);
	kd_build_free(d->pass.build);
	if (d->map) {
		if (d->map_is_mmap)
			munmap(d->map, d->map_len);
		else
			free(d->map);
	}
	free(d->file);
	free(d);
}
