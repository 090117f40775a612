/*
 * fuzz_read.c - libFuzzer entry point: the whole decoder (read, order,
 * timeline, every sink) on arbitrary bytes, symbol files never opened.
 * Each input is decoded twice: as given (exercises the checks), and with
 * every CRC recomputed (so mutations reach the record and stack logic
 * instead of stopping at a CRC mismatch).  Then its modules are
 * symbolized from special files (a FIFO with no writer, /dev/zero,
 * /dev/stdin, a directory, a missing path...): the decoder must refuse
 * them without blocking (issue 11).
 * Built as ktrace-fuzz-read with -DKTRACE_BUILD_FUZZ=ON (clang), and linked
 * into ktrace-fuzz-regress, which replays tests/fuzz/corpus and
 * tests/fuzz/regressions in every normal build.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder.h"

/* Recompute block, section and header CRCs in place, bounds-checked. */
static void fix_crcs(uint8_t *buf, size_t len)
{
	struct ktrace_file_header h;

	if (len < sizeof(h))
		return;
	memcpy(&h, buf, sizeof(h));
	for (uint32_t i = 0; i < h.section_count && i < 4096; i++) {
		struct ktrace_section s;
		uint64_t eo = h.section_table_offset + (uint64_t)i * sizeof(s);

		if (h.section_table_offset > len || eo > len - sizeof(s))
			break;
		memcpy(&s, buf + eo, sizeof(s));
		if (s.offset > len || s.size > len - s.offset)
			continue;
		if (s.type == KTRACE_SEC_BLOCKS) {
			uint64_t pos = 0;

			for (uint32_t k = 0; k < s.count && s.size - pos >= 16; k++) {
				struct ktrace_block_rec r;

				memcpy(&r, buf + s.offset + pos, sizeof(r));
				if ((uint64_t)r.nwords * 4 > s.size - pos - 16)
					break;
				r.crc = kd_crc32c(0, buf + s.offset + pos + 16, (size_t)r.nwords * 4);
				memcpy(buf + s.offset + pos, &r, sizeof(r));
				pos += 16 + (uint64_t)r.nwords * 4;
			}
		}
		s.crc = kd_crc32c(0, buf + s.offset, (size_t)s.size);
		memcpy(buf + eo, &s, sizeof(s));
	}
	h.header_crc = 0;
	h.header_crc = kd_crc32c(0, &h, sizeof(h));
	memcpy(buf, &h, sizeof(h));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run(const uint8_t *data, size_t size);

/* What the timeline stage promises, whatever the input: abort if not. */
static void broken(const struct kd_dec *d, uint32_t i, const char *what)
{
	const struct kd_dec_call *c = &d->calls[i];

	fprintf(stderr, "invariant broken: call %u: %s (begin %llu end %llu self %llu depth %u "
	        "parent %u flags %#x)\n", i, what, (unsigned long long)c->begin,
	        (unsigned long long)c->end, (unsigned long long)c->self, c->depth, c->parent,
	        c->flags);
	if (c->parent < d->ncalls)
		fprintf(stderr, "  parent: begin %llu end %llu depth %u flags %#x\n",
		        (unsigned long long)d->calls[c->parent].begin,
		        (unsigned long long)d->calls[c->parent].end, d->calls[c->parent].depth,
		        d->calls[c->parent].flags);
	abort();
}

static void check_invariants(const struct kd_dec *d)
{
	for (uint32_t i = 0; i < d->ncalls; i++) {
		const struct kd_dec_call *c = &d->calls[i];

		if (c->begin > c->end)
			broken(d, i, "begin > end");
		if (c->self > c->end - c->begin)
			broken(d, i, "self > duration");
		if (c->func >= d->nfuncs || c->thread >= d->nthreads ||
		    c->core >= (d->snap.ncores ? d->snap.ncores : 1))
			broken(d, i, "index out of range");
		if (c->parent != KD_NONE) {
			const struct kd_dec_call *p;

			if (c->parent >= d->ncalls)
				broken(d, i, "parent out of range");
			p = &d->calls[c->parent];
			if (p->thread != c->thread)
				broken(d, i, "parent on another thread");
			if (p->begin > c->begin || c->end > p->end)
				broken(d, i, "not inside its parent");
			if (c->depth != p->depth + 1)
				broken(d, i, "depth != parent depth + 1");
		}
	}
	for (uint32_t i = 0; i < d->nreqs; i++)
		if (d->reqs[i].begin > d->reqs[i].end || d->reqs[i].thread >= d->nthreads)
			abort();
	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (!d->funcs[i].name)
			abort();
}

/* Paths no symbol file may come from; each must be refused at once. */
static char fifo_path[64];
static const char *specials[] = { fifo_path, "/dev/zero", "/dev/stdin", "/dev/null", "/",
                                  "/proc/self/fd/0", "/nonexistent/ktrace-fuzz", "/etc/passwd" };

static void remove_fifo(void)
{
	unlink(fifo_path);
}

/* Symbolize d's modules from special files, rotated by seed. */
static void symbolize_specials(struct kd_dec *d, size_t seed)
{
	size_t n = sizeof(specials) / sizeof(specials[0]);

	if (!fifo_path[0]) {
		snprintf(fifo_path, sizeof(fifo_path), "/tmp/ktrace-fuzz-fifo-%ld", (long)getpid());
		unlink(fifo_path);
		if (mkfifo(fifo_path, 0600) == 0)
			atexit(remove_fifo);
	}
	for (uint32_t i = 0; i < d->snap.nmodules; i++) {
		free(d->snap.modules[i].path);
		d->snap.modules[i].path = kd_xstrdup(specials[(seed + i) % n], "fuzz");
	}
	d->opts.no_symbols = 0;
	d->opts.sysroot = NULL;
	kd_symbols_resolve(d);
	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (!d->funcs[i].name)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	run(data, size);
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	fix_crcs(copy, size);
	run(copy, size);
	free(copy);
	return 0;
}

/* Two outputs in memory that must be byte-identical (else abort). */
struct two {
	char *x, *y;
	size_t nx, ny;
	FILE *fx, *fy;
};

static void two_open(struct two *t)
{
	memset(t, 0, sizeof(*t));
	t->fx = open_memstream(&t->x, &t->nx);
	t->fy = open_memstream(&t->y, &t->ny);
	if (!t->fx || !t->fy)
		abort();
}

static void two_same(struct two *t)
{
	fclose(t->fx);
	fclose(t->fy);
	if (t->nx != t->ny || memcmp(t->x, t->y, t->nx) != 0)
		abort();
	free(t->x);
	free(t->y);
}

/* The streamed text (spool + merge; explain from the calls of its two
 * requests) prints what the collected one prints, with and without a
 * --limit. */
static void same_text(struct kd_dec *ds, const uint8_t *data, size_t size,
                      const struct kd_dec_opts *opts)
{
	struct kd_dec_opts co = *opts;
	struct kd_dec_error err;
	struct kd_dec *dc;

	co.stream = 0;
	if (kd_dec_open_buffer(data, size, "fuzz", &co, &dc, &err) != 0)
		abort(); /* it opened for the stream */
	for (uint64_t limit = 0; limit < 4; limit += 3) {
		struct kd_out_opts oo = { .limit = limit };
		struct two t;

		two_open(&t);
		kd_out_explain(t.fx, dc, &oo);
		kd_out_text(t.fx, dc, &oo);
		if (kd_out_explain_stream(t.fy, ds, &oo) || kd_out_text(t.fy, ds, &oo))
			abort();
		two_same(&t);
	}
	kd_dec_free(dc);
}

static void run(const uint8_t *data, size_t size)
{
	static FILE *null;
	struct kd_dec_opts opts = { .no_symbols = 1 };
	struct kd_out_opts oo = { 0 };
	struct kd_dec_error err;
	struct kd_dec *d, *prev = NULL;
	struct kd_chrome ch;
	char msg[512];

	if (!null)
		null = fopen("/dev/null", "w");
	if (!null)
		return;
	for (int all = 0; all < 2; all++) {
		opts.all = all;
		if (kd_dec_open_buffer(data, size, "fuzz", &opts, &d, &err) != 0) {
			kd_util_error_format(&err, "fuzz", msg, sizeof(msg));
			fputs(msg, null);
			kd_dec_free(prev);
			return;
		}
		check_invariants(d);
		kd_out_summary(null, d);
		kd_out_text(null, d, &oo);
		kd_out_stats(null, d, &oo);
		kd_out_explain(null, d, &oo);
		kd_out_html(null, &d, 1, &oo);
		kd_out_folded_stream(null, d, &oo);
		kd_out_chrome_begin(&ch, null, kd_time_wall_ns(d, d->window_start));
		kd_out_chrome_file(&ch, d, d->snap.info.pid, &oo);
		kd_out_chrome_end(&ch);
		if (all)
			symbolize_specials(d, size);
		kd_out_perfetto(null, &d, 1, &oo);
		if (prev) {
			/* Two snapshots of one process (the window, and --all). */
			struct kd_dec *two[2] = { prev, d };

			kd_out_perfetto(null, two, 2, &oo);
			kd_dec_free(prev);
			prev = NULL;
			kd_dec_free(d);
		} else {
			prev = d;
		}
	}
	kd_dec_free(prev);
	/* Streamed: no collector, the sinks walk the file themselves. */
	opts.all = 0;
	opts.stream = 1;
	if (kd_dec_open_buffer(data, size, "fuzz", &opts, &d, &err) == 0) {
		kd_out_folded_stream(null, d, &oo);
		kd_out_summary(null, d);
		kd_out_chrome_begin(&ch, null, kd_time_wall_ns(d, d->window_start));
		kd_out_chrome_file(&ch, d, d->snap.info.pid, &oo);
		kd_out_chrome_end(&ch);
		same_text(d, data, size, &opts);
		kd_dec_free(d);
	}
	opts.stream = 0;
}
