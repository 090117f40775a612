/*
 * test_decoder_read.c - stage 1: the reader accepts a valid file and names
 * the offset and problem of every kind of damage, without crashing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder.h"
#include "snapbuild.h"

struct img {
	uint8_t *buf;
	size_t len;
};

static struct snapbuild *small_builder(void)
{
	struct snapbuild *sb = snapbuild_new();

	snapbuild_thread(sb, 1, 100, "t1", KTRACE_THREAD_MAIN);
	snapbuild_thread(sb, 2, 101, "t2", 0);
	snapbuild_func(sb, 0, 0x1000);
	snapbuild_func(sb, 1, 0x1100);
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "op");
	snapbuild_name(sb, 2, KTRACE_NAME_MARK, "mark");
	snapbuild_module(sb, 0x1000, 0x2000, 0, "/nonexistent/a.out");
	snapbuild_anchor(sb, 100, 1763700000000000000ll);
	snapbuild_anchor(sb, 900000, 1763700000000900000ll);
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_enter(sb, 0, 1, 1010, 1);
	snapbuild_exit(sb, 0, 1, 1020, 1);
	snapbuild_flush(sb, 0);
	snapbuild_enter(sb, 0, 1, 1030, 1);
	snapbuild_exit(sb, 0, 1, 1040, 1);
	snapbuild_flush(sb, 0);
	snapbuild_enter(sb, 0, 2, 1050, 1);
	snapbuild_exit(sb, 0, 2, 1060, 1);
	snapbuild_exit(sb, 0, 1, 1070, 0);
	return sb;
}

static struct img small_file(void)
{
	struct img m;
	struct snapbuild *sb = small_builder();

	snapbuild_finish(sb, &m.buf, &m.len);
	snapbuild_free(sb);
	return m;
}

static int read_img(const uint8_t *buf, size_t len, struct kd_snap *snap,
                    struct kd_dec_error *err)
{
	/* exact-size copy, so ASan catches any read past the end */
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	assert_non_null(copy);
	memcpy(copy, buf, len);
	memset(err, 0, sizeof(*err));
	rc = kd_snap_read(copy, len, snap, err);
	if (rc == 0)
		kd_snap_free(snap);
	free(copy);
	return rc;
}

static void expect_error(const uint8_t *buf, size_t len, uint64_t offset, const char *text)
{
	struct kd_snap snap;
	struct kd_dec_error err;
	int rc = read_img(buf, len, &snap, &err);

	assert_int_not_equal(rc, 0);
	if (!strstr(err.msg, text))
		fail_msg("error \"%s\" does not contain \"%s\"", err.msg, text);
	assert_true(err.has_offset);
	if (err.offset != offset)
		fail_msg("error \"%s\" at offset 0x%llx, expected 0x%llx", err.msg,
		         (unsigned long long)err.offset, (unsigned long long)offset);
}

static int has_warning(const struct kd_snap *s, const char *text)
{
	for (uint32_t i = 0; i < s->warn.n; i++)
		if (strstr(s->warn.lines[i], text))
			return 1;
	return 0;
}

static void test_read_valid(void **state)
{
	struct img m = small_file();
	struct kd_snap snap;
	struct kd_dec_error err;

	(void)state;
	assert_int_equal(kd_snap_read(m.buf, m.len, &snap, &err), 0);
	assert_int_equal(snap.nthreads, 2);
	assert_int_equal(snap.nnames, 2);
	assert_string_equal(kd_snap_name(&snap, 2), "mark");
	assert_null(kd_snap_name(&snap, 9));
	assert_int_equal(snap.nmodules, 1);
	assert_string_equal(snap.modules[0].path, "/nonexistent/a.out");
	assert_int_equal(snap.nanchors, 2);
	assert_int_equal(snap.nblocks, 3);
	assert_int_equal(snap.damaged_blocks, 0);
	assert_true(snap.func_known[1]);
	assert_int_equal(snap.func_addr[1], 0x1100);
	assert_int_equal(snap.warn.total, 0);
	assert_int_equal(snap.info.tsc_hz, 1000000000ull);
	kd_snap_free(&snap);
	free(m.buf);
}

static void test_read_bad_magic(void **state)
{
	struct img m = small_file();

	(void)state;
	m.buf[1] ^= 0x20;
	expect_error(m.buf, m.len, 0, "bad magic");
	expect_error((const uint8_t *)"KTRA", 4, 0, "too short");
	free(m.buf);
}

static void test_read_wrong_version(void **state)
{
	struct img m = small_file();
	uint16_t v = KTRACE_FORMAT_VERSION + 1;

	(void)state;
	memcpy(m.buf + offsetof(struct ktrace_file_header, version), &v, 2);
	snapbuild_fix_header_crc(m.buf);
	expect_error(m.buf, m.len, 12, "unsupported format version 3");
	free(m.buf);
}

static void test_read_wrong_byte_order(void **state)
{
	struct img m = small_file();
	uint32_t bo = 0x04030201u;

	(void)state;
	memcpy(m.buf + 8, &bo, 4);
	snapbuild_fix_header_crc(m.buf);
	expect_error(m.buf, m.len, 8, "big-endian");
	bo = 0x12345678u;
	memcpy(m.buf + 8, &bo, 4);
	snapbuild_fix_header_crc(m.buf);
	expect_error(m.buf, m.len, 8, "bad byte order mark");
	free(m.buf);
}

static void test_read_header_crc(void **state)
{
	struct img m = small_file();

	(void)state;
	m.buf[offsetof(struct ktrace_file_header, reserved)] = 1;
	expect_error(m.buf, m.len, offsetof(struct ktrace_file_header, header_crc),
	             "header CRC");
	free(m.buf);
}

/* Every truncation length must give a clean error, never a crash. */
static void test_read_every_truncation(void **state)
{
	struct img m = small_file();
	struct kd_dec_opts o = { .no_symbols = 1 };

	(void)state;
	for (size_t len = 0; len < m.len; len++) {
		struct kd_snap snap;
		struct kd_dec_error err;
		struct kd_dec *d;
		uint8_t *copy = malloc(len ? len : 1);

		assert_int_not_equal(read_img(m.buf, len, &snap, &err), 0);
		assert_true(err.msg[0] != '\0');
		memcpy(copy, m.buf, len);
		assert_int_not_equal(kd_dec_open_buffer(copy, len, "t", &o, &d, &err), 0);
		assert_null(d);
		free(copy);
	}
	free(m.buf);
}

static void test_read_trailing_bytes(void **state)
{
	struct img m = small_file();
	struct kd_snap snap;
	struct kd_dec_error err;
	uint8_t *big = calloc(1, m.len + 40);

	(void)state;
	memcpy(big, m.buf, m.len);
	assert_int_equal(kd_snap_read(big, m.len + 40, &snap, &err), 0);
	assert_true(has_warning(&snap, "40 bytes after the end"));
	kd_snap_free(&snap);
	free(big);
	free(m.buf);
}

static void test_read_section_past_eof(void **state)
{
	struct img m = small_file();
	uint64_t off, size, eo, big = 1u << 30;

	(void)state;
	assert_int_equal(snapbuild_find_section(m.buf, m.len, KTRACE_SEC_FUNCS, &off, &size, &eo), 0);
	memcpy(m.buf + eo + 16, &big, 8);
	expect_error(m.buf, m.len, eo + 8, "runs past the end of the file");
	big = 3; /* misaligned offset */
	memcpy(m.buf + eo + 16, &size, 8);
	memcpy(m.buf + eo + 8, &big, 8);
	expect_error(m.buf, m.len, eo + 8, "misaligned");
	free(m.buf);
}

static void test_read_section_size_not_multiple(void **state)
{
	struct img m = small_file();
	uint64_t off, size, eo, bad;

	(void)state;
	assert_int_equal(snapbuild_find_section(m.buf, m.len, KTRACE_SEC_FUNCS, &off, &size, &eo), 0);
	bad = size + 1;
	memcpy(m.buf + eo + 16, &bad, 8);
	snapbuild_fix_crcs(m.buf, m.len);
	expect_error(m.buf, m.len, eo + 16, "(FUNCS) size 33 is not a multiple of 16");
	free(m.buf);
}

static void test_read_huge_counts(void **state)
{
	static const uint32_t types[] = { KTRACE_SEC_THREADS, KTRACE_SEC_NAMES, KTRACE_SEC_MODULES,
	                                  KTRACE_SEC_ANCHORS, KTRACE_SEC_FUNCS, KTRACE_SEC_CORES,
	                                  KTRACE_SEC_BLOCKS };
	(void)state;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct img m = small_file();
		uint64_t off, size, eo;
		uint32_t huge = 0xFFFFFFFFu;
		struct kd_snap snap;
		struct kd_dec_error err;

		assert_int_equal(snapbuild_find_section(m.buf, m.len, types[i], &off, &size, &eo), 0);
		memcpy(m.buf + eo + 4, &huge, 4);
		assert_int_not_equal(read_img(m.buf, m.len, &snap, &err), 0);
		assert_int_equal(err.offset, eo + 4);
		assert_non_null(strstr(err.msg, "count 4294967295"));
		free(m.buf);
	}
}

static void test_read_section_table_bounds(void **state)
{
	struct img m = small_file();
	uint32_t n = 1000000;
	uint64_t o = 7;

	(void)state;
	memcpy(m.buf + 16, &n, 4);
	snapbuild_fix_header_crc(m.buf);
	expect_error(m.buf, m.len, 16, "section table");
	free(m.buf);
	m = small_file();
	memcpy(m.buf + 24, &o, 8);
	snapbuild_fix_header_crc(m.buf);
	expect_error(m.buf, m.len, 24, "section table offset");
	free(m.buf);
}

static void test_read_bad_block_crc_skipped(void **state)
{
	struct snapbuild *sb = small_builder();
	struct kd_dec_opts o = { .no_symbols = 1 };
	struct kd_dec_error err;
	struct kd_dec *d;
	struct img m;

	(void)state;
	snapbuild_block_bad_crc(sb, 1);
	snapbuild_finish(sb, &m.buf, &m.len);
	snapbuild_free(sb);
	assert_int_equal(kd_dec_open_buffer(m.buf, m.len, "t", &o, &d, &err), 0);
	assert_int_equal(d->snap.damaged_blocks, 1);
	assert_int_equal(d->snap.nblocks, 2);
	assert_true(has_warning(&d->snap, "CRC mismatch; block skipped"));
	/* blocks 0 and 2 still decode: f0 (open across the lost block) and f1 */
	assert_true(d->ncalls >= 2);
	kd_dec_free(d);
	free(m.buf);
}

static void test_read_block_nwords_too_big(void **state)
{
	struct img m = small_file();
	uint64_t off, size, eo;
	uint32_t nw = KTRACE_BLOCK_WORDS + 1;
	struct kd_snap snap;
	struct kd_dec_error err;

	(void)state;
	assert_int_equal(snapbuild_find_section(m.buf, m.len, KTRACE_SEC_BLOCKS, &off, &size, &eo), 0);
	memcpy(m.buf + off + 4, &nw, 4);
	snapbuild_fix_crcs(m.buf, m.len);
	assert_int_equal(kd_snap_read(m.buf, m.len, &snap, &err), 0);
	assert_int_equal(snap.nblocks, 0);
	assert_int_equal(snap.unreadable_blocks, 3);
	assert_true(has_warning(&snap, "exceeds the block size 1024"));
	kd_snap_free(&snap);
	free(m.buf);
}

static void test_read_block_start_mismatch(void **state)
{
	struct img m = small_file();
	uint64_t off, size, eo;
	uint32_t s = 12345;
	struct kd_snap snap;
	struct kd_dec_error err;

	(void)state;
	assert_int_equal(snapbuild_find_section(m.buf, m.len, KTRACE_SEC_BLOCKS, &off, &size, &eo), 0);
	/* entry S differs from its BLOCK_START S: a block reused while copied */
	memcpy(m.buf + off + 8, &s, 4);
	snapbuild_fix_crcs(m.buf, m.len);
	assert_int_equal(kd_snap_read(m.buf, m.len, &snap, &err), 0);
	assert_int_equal(snap.damaged_blocks, 1);
	assert_true(has_warning(&snap, "differs from the entry's S"));
	kd_snap_free(&snap);
	free(m.buf);
}

static void test_read_info_damage_is_fatal(void **state)
{
	struct img m = small_file();
	uint64_t off, size, eo, hz = 5;

	(void)state;
	assert_int_equal(snapbuild_find_section(m.buf, m.len, KTRACE_SEC_INFO, &off, &size, &eo), 0);
	m.buf[off + 100] ^= 1;
	expect_error(m.buf, m.len, off, "INFO section is damaged");
	m.buf[off + 100] ^= 1;
	memcpy(m.buf + off, &hz, 8);
	snapbuild_fix_crcs(m.buf, m.len);
	expect_error(m.buf, m.len, off, "tsc_hz 5 is outside");
	free(m.buf);
}

static void test_read_info_bounds(void **state)
{
	(void)state;
	for (int k = 0; k < 3; k++) {
		struct snapbuild *sb = small_builder();
		struct img m;

		if (k == 0)
			snapbuild_info(sb)->tsc_shift = 40;
		if (k == 1)
			snapbuild_info(sb)->ncpus = 70000;
		if (k == 2)
			snapbuild_info(sb)->block_words = 512;
		snapbuild_finish(sb, &m.buf, &m.len);
		snapbuild_free(sb);
		if (k == 0)
			expect_error(m.buf, m.len, 64 + offsetof(struct ktrace_info_rec, tsc_shift),
			             "tsc_shift 40");
		if (k == 1)
			expect_error(m.buf, m.len, 64 + offsetof(struct ktrace_info_rec, ncpus),
			             "ncpus 70000");
		if (k == 2)
			expect_error(m.buf, m.len, 64 + offsetof(struct ktrace_info_rec, block_words),
			             "block_words 512");
		free(m.buf);
	}
}

static void test_read_missing_info(void **state)
{
	struct snapbuild *sb = small_builder();
	struct img m;
	struct ktrace_file_header h;

	(void)state;
	snapbuild_omit(sb, KTRACE_SEC_INFO);
	snapbuild_finish(sb, &m.buf, &m.len);
	snapbuild_free(sb);
	memcpy(&h, m.buf, sizeof(h));
	expect_error(m.buf, m.len, h.section_table_offset, "no INFO section");
	free(m.buf);
}

static void test_read_optional_section_crc_warns(void **state)
{
	struct img m = small_file();
	uint64_t off, size, eo;
	struct kd_snap snap;
	struct kd_dec_error err;

	(void)state;
	assert_int_equal(snapbuild_find_section(m.buf, m.len, KTRACE_SEC_NAMES, &off, &size, &eo), 0);
	m.buf[off + 9] ^= 0x40;
	assert_int_equal(kd_snap_read(m.buf, m.len, &snap, &err), 0);
	assert_int_equal(snap.nnames, 0);
	assert_true(has_warning(&snap, "(NAMES) CRC mismatch; decoding without it"));
	kd_snap_free(&snap);
	free(m.buf);
}

static void test_read_name_length_overrun(void **state)
{
	struct img m = small_file();
	uint64_t off, size, eo;
	uint16_t len = 60000;

	(void)state;
	assert_int_equal(snapbuild_find_section(m.buf, m.len, KTRACE_SEC_NAMES, &off, &size, &eo), 0);
	memcpy(m.buf + off + 4, &len, 2);
	snapbuild_fix_crcs(m.buf, m.len);
	expect_error(m.buf, m.len, off + 4, "length 60000 runs past the section end");
	free(m.buf);
}

static void test_read_unknown_section_skipped(void **state)
{
	struct snapbuild *sb = small_builder();
	struct img m;
	struct kd_snap snap;
	struct kd_dec_error err;
	uint8_t junk[24] = { 1, 2, 3 };

	(void)state;
	snapbuild_raw_section(sb, 77, 3, junk, sizeof(junk), 1);
	snapbuild_finish(sb, &m.buf, &m.len);
	snapbuild_free(sb);
	assert_int_equal(kd_snap_read(m.buf, m.len, &snap, &err), 0);
	assert_int_equal(snap.warn.total, 0);
	assert_int_equal(snap.nblocks, 3);
	kd_snap_free(&snap);
	free(m.buf);
}

/* The LEAN section (what the lean mode patched) is read when whole; a
 * short, a damaged or a second one is warned about and the file decodes
 * without it, since nothing else depends on it. */
static void test_read_lean_section(void **state)
{
	struct ktrace_lean_rec l;
	struct kd_snap snap;
	struct kd_dec_error err;

	(void)state;
	memset(&l, 0, sizeof(l));
	l.site_writes = 387;
	l.nop_sites = 286;
	l.batches = 30;
	l.batch_ns = 649000;
	l.funcs = 322;
	l.funcs_out = 126;
	l.flags = KTRACE_LEAN_BOTH_MODES;
	for (int v = 0; v < 4; v++) {   /* whole, short, bad CRC, two */
		struct snapbuild *sb = small_builder();
		struct img m;

		snapbuild_raw_section(sb, KTRACE_SEC_LEAN, 1, &l, v == 1 ? sizeof(l) - 8 : sizeof(l),
		                      v == 2);
		if (v == 3)
			snapbuild_raw_section(sb, KTRACE_SEC_LEAN, 1, &l, sizeof(l), 0);
		snapbuild_finish(sb, &m.buf, &m.len);
		snapbuild_free(sb);
		assert_int_equal(kd_snap_read(m.buf, m.len, &snap, &err), 0);
		assert_int_equal(snap.nblocks, 3);
		assert_int_equal(snap.have_lean, v != 1 && v != 2);
		assert_int_equal(snap.warn.total, v == 0 ? 0 : 1);
		if (snap.have_lean) {
			assert_int_equal(snap.lean.funcs, 322);
			assert_int_equal(snap.lean.funcs_out, 126);
			assert_int_equal(snap.lean.nop_sites, 286);
			assert_int_equal(snap.lean.site_writes, 387);
			assert_int_equal(snap.lean.batches, 30);
			assert_int_equal(snap.lean.batch_ns, 649000);
			assert_true(snap.lean.flags & KTRACE_LEAN_BOTH_MODES);
		}
		kd_snap_free(&snap);
		free(m.buf);
	}
}

/* The trigger record as first written (104 bytes) and grown (136): both
 * read, the missing fields as 0; shorter than the first is corrupt. */
static void test_read_trigger_sizes(void **state)
{
	struct ktrace_trigger_rec t;
	struct kd_snap snap;
	struct kd_dec_error err;

	(void)state;
	memset(&t, 0, sizeof(t));
	t.request_id = 7;
	t.duration_ns = 5000000;
	snprintf(t.kind, sizeof(t.kind), "op");
	t.preempted_ns = 4000000;
	t.npreempt = 3;
	t.trigger_on = KTRACE_TRIGGER_ON_RUN;
	t.flags = KTRACE_TRIGGER_SCHED_KNOWN;
	for (int v1 = 0; v1 < 2; v1++) {
		struct snapbuild *sb = small_builder();
		struct img m;

		if (v1)
			snapbuild_trigger_v1(sb, &t);
		else
			snapbuild_trigger(sb, &t);
		snapbuild_finish(sb, &m.buf, &m.len);
		snapbuild_free(sb);
		memset(&err, 0, sizeof(err));
		if (kd_snap_read(m.buf, m.len, &snap, &err) != 0)
			fail_msg("%s", err.msg);
		assert_true(snap.have_trigger);
		assert_int_equal(snap.trigger.request_id, 7);
		assert_string_equal(snap.trigger.kind, "op");
		assert_int_equal(snap.trigger.preempted_ns, v1 ? 0 : 4000000);
		assert_int_equal(snap.trigger.npreempt, v1 ? 0 : 3);
		assert_int_equal(snap.trigger.flags, v1 ? 0 : KTRACE_TRIGGER_SCHED_KNOWN);
		kd_snap_free(&snap);
		free(m.buf);
	}
	{
		struct snapbuild *sb = small_builder();
		struct img m;

		snapbuild_raw_section(sb, KTRACE_SEC_TRIGGER, 1, &t, KTRACE_TRIGGER_REC_SIZE_V1 - 8, 0);
		snapbuild_finish(sb, &m.buf, &m.len);
		snapbuild_free(sb);
		assert_int_not_equal(kd_snap_read(m.buf, m.len, &snap, &err), 0);
		assert_non_null(strstr(err.msg, "smaller than the 104-byte record"));
		free(m.buf);
	}
}

static void test_read_empty_blocks(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct img m;
	struct kd_snap snap;
	struct kd_dec_error err;
	uint32_t w[8];

	(void)state;
	for (uint32_t i = 0; i < 6; i++)
		snapbuild_block_raw(sb, 1, 4096 + i * 1024, w, 0); /* claimed, never written */
	snapbuild_enter(sb, 0, 1, 100, 0);
	snapbuild_finish(sb, &m.buf, &m.len);
	snapbuild_free(sb);
	assert_int_equal(kd_snap_read(m.buf, m.len, &snap, &err), 0);
	assert_int_equal(snap.nblocks, 1);
	assert_int_equal(snap.damaged_blocks, 0);
	assert_int_equal(snap.warn.total, 0);
	kd_snap_free(&snap);
	free(m.buf);
}

static void test_read_error_format(void **state)
{
	struct kd_dec_error err = { 0x1c0, 1, KD_ECORRUPT,
	                                "section 3 (FUNCS) size 17 is not a multiple of 16" };
	char buf[512];

	(void)state;
	kd_util_error_format(&err, "x.ktrace", buf, sizeof(buf));
	assert_string_equal(buf, "ktrace-decode: x.ktrace: offset 0x1c0: section 3 (FUNCS) "
	                         "size 17 is not a multiple of 16");
}

/* Flip every byte of a small file in turn: never a crash, always a result. */
static void test_read_every_byte_flip(void **state)
{
	struct img m = small_file();
	struct kd_dec_opts o = { .no_symbols = 1 };

	(void)state;
	for (size_t i = 0; i < m.len; i++) {
		uint8_t *copy = malloc(m.len);
		struct kd_dec_error err;
		struct kd_dec *d;

		memcpy(copy, m.buf, m.len);
		copy[i] ^= 0xA5;
		if (kd_dec_open_buffer(copy, m.len, "t", &o, &d, &err) == 0)
			kd_dec_free(d);
		else
			assert_true(err.msg[0] != '\0');
		free(copy);
	}
	free(m.buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_valid),
		cmocka_unit_test(test_read_bad_magic),
		cmocka_unit_test(test_read_wrong_version),
		cmocka_unit_test(test_read_wrong_byte_order),
		cmocka_unit_test(test_read_header_crc),
		cmocka_unit_test(test_read_every_truncation),
		cmocka_unit_test(test_read_trailing_bytes),
		cmocka_unit_test(test_read_section_past_eof),
		cmocka_unit_test(test_read_section_size_not_multiple),
		cmocka_unit_test(test_read_huge_counts),
		cmocka_unit_test(test_read_section_table_bounds),
		cmocka_unit_test(test_read_bad_block_crc_skipped),
		cmocka_unit_test(test_read_block_nwords_too_big),
		cmocka_unit_test(test_read_block_start_mismatch),
		cmocka_unit_test(test_read_info_damage_is_fatal),
		cmocka_unit_test(test_read_info_bounds),
		cmocka_unit_test(test_read_missing_info),
		cmocka_unit_test(test_read_optional_section_crc_warns),
		cmocka_unit_test(test_read_name_length_overrun),
		cmocka_unit_test(test_read_unknown_section_skipped),
		cmocka_unit_test(test_read_lean_section),
		cmocka_unit_test(test_read_trigger_sizes),
		cmocka_unit_test(test_read_empty_blocks),
		cmocka_unit_test(test_read_error_format),
		cmocka_unit_test(test_read_every_byte_flip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
