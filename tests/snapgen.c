/*
 * snapgen - write synthetic snapshot files (tests/snapbuild.h scenarios).
 *
 *   snapgen golden FILE              the golden fixture scenario
 *   snapgen big FILE NCPUS NEVENTS   a large file, for decoder throughput
 *   snapgen corpus DIR               fuzz seed corpus (small valid variants)
 *   snapgen viewer FILE              the HTML timeline's browser test (viewercheck.py)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapbuild.h"

static int emit(struct snapbuild *sb, const char *path)
{
	uint8_t *buf;
	size_t len;
	int rc;

	snapbuild_finish(sb, &buf, &len);
	rc = snapbuild_write_file(path, buf, len);
	if (rc)
		perror(path);
	free(buf);
	snapbuild_free(sb);
	return rc;
}

static struct snapbuild *small(int variant)
{
	struct snapbuild *sb = snapbuild_new();

	if (variant == 3) {
		/* the library's current form: THREAD segments, copy_tsc */
		snapbuild_thread_seq(sb, 1);
		snapbuild_core_copy_tsc(sb, 0, 1085);
		snapbuild_core_copy_tsc(sb, 1, 1095);
	}

	snapbuild_thread(sb, 1, 100, "t1", KTRACE_THREAD_MAIN);
	snapbuild_thread(sb, 2, 101, "t2", 0);
	snapbuild_func(sb, 0, 0x1000);
	snapbuild_func(sb, 1, 0x1100);
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "op");
	snapbuild_name(sb, 2, KTRACE_NAME_MARK, "m");
	snapbuild_name(sb, 3, KTRACE_NAME_SPAN, "s");
	snapbuild_module(sb, 0x1000, 0x2000, 0, "/nonexistent/a.out");
	snapbuild_anchor(sb, 100, 1763700000000000000ll);
	snapbuild_anchor(sb, 900000, 1763700000000900000ll);
	snapbuild_req(sb, 0, 1, 1000, 1, 7, 0);
	snapbuild_enter(sb, 0, 1, 1010, 0);
	snapbuild_enter(sb, 0, 1, 1020, 1);
	snapbuild_mark(sb, 0, 1, 1025, 2, 99);
	snapbuild_exit(sb, 0, 1, 1030, 1);
	snapbuild_span(sb, 0, 2, 1040, 3, 0);
	snapbuild_enter_addr(sb, 0, 2, 1050, 0x1800);
	snapbuild_exit_addr(sb, 1, 2, 1060, 0x1800);
	snapbuild_span(sb, 1, 2, 1070, 3, 1);
	snapbuild_exit(sb, 0, 1, 1080, 0);
	snapbuild_req(sb, 0, 1, 1090, 1, 7, 1);
	if (variant == 1) {
		/* wraps, TSC gaps, unknown extended type */
		uint32_t x[2] = { 1, 2 };

		snapbuild_ext(sb, 0, 1, 1100, 0x7f, 5, x, 2);
		snapbuild_enter(sb, 0, 1, 1200000, 0);
		snapbuild_exit(sb, 0, 1, 90000000000ull, 0);
		snapbuild_core(sb, 0, 1, 5);
	}
	if (variant == 2) {
		struct ktrace_trigger_rec t;

		memset(&t, 0, sizeof(t));
		t.request_id = 7;
		t.kind_id = 1;
		t.thread_slot = 1;
		t.tid = 100;
		t.begin_tsc = 1000;
		t.end_tsc = 1090;
		t.duration_ns = 90;
		t.threshold_ns = 50;
		t.why = KTRACE_TRIGGER_PERCENTILE;
		t.percentile_x1000 = 99900;
		strcpy(t.kind, "op");
		snapbuild_trigger(sb, &t);
		snapbuild_block_bad_crc(sb, 1);
	}
	if (variant == 4) {
		/* context switches (SCHED): main blocked in 0, preempted in 1 */
		struct {
			struct ktrace_sched_hdr h;
			struct ktrace_sched_core c;
			struct ktrace_sched_rec r[4];
			struct ktrace_sched_name n;
		} s;

		memset(&s, 0, sizeof(s));
		s.h.status = KTRACE_SCHED_RECORDED;
		s.h.paranoid = 2;
		s.h.ncores = 1;
		s.h.nnames = 1;
		s.h.clockid = 1;
		s.h.start_ns = 500;
		s.h.end_ns = 2000;
		s.h.switches = 4;
		s.c = (struct ktrace_sched_core){ 0, 4, 500 };
		s.r[0] = (struct ktrace_sched_rec){ 1012, 100, 0, KTRACE_SCHED_OUT_BLOCK, 0 };
		s.r[1] = (struct ktrace_sched_rec){ 1018, 100, 0, KTRACE_SCHED_IN, 0 };
		s.r[2] = (struct ktrace_sched_rec){ 1022, 100, 0, KTRACE_SCHED_OUT_PREEMPT, 0 };
		s.r[3] = (struct ktrace_sched_rec){ 1028, 777, 0, KTRACE_SCHED_IN, 0 };
		s.n.tid = 777;
		strcpy(s.n.name, "other");
		snapbuild_raw_section(sb, KTRACE_SEC_SCHED, 4, &s, sizeof(s), 0);
	}
	return sb;
}

/* Format 2: a held run placed inside a ring segment (cut at P, nesting
 * across it), compact requests (one ended on another thread, the trigger
 * named by its number), and a REQUESTS section with two kinds and three
 * slices. */
static struct snapbuild *small_v2(void)
{
	struct snapbuild *sb = snapbuild_new();
	struct ktrace_req_hdr h;
	struct ktrace_req_kind_rec k;
	struct ktrace_trigger_rec t;
	static const uint64_t d0[] = { 3, 40, 41, 900, 70000 }, d1[] = { 17, 5000 };
	uint32_t p, seg;

	snapbuild_thread_seq(sb, 1);
	snapbuild_thread(sb, 1, 100, "t1", KTRACE_THREAD_MAIN);
	snapbuild_thread(sb, 2, 101, "t2", 0);
	snapbuild_func(sb, 0, 0x1000);
	snapbuild_func(sb, 1, 0x1100);
	snapbuild_func(sb, 2, 0x1200);
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "get");
	snapbuild_name(sb, 2, KTRACE_NAME_REQUEST, "put");
	snapbuild_enter(sb, 0, 1, 1000, 0);
	snapbuild_enter(sb, 0, 1, 1010, 1);
	p = snapbuild_pos(sb, 0);
	seg = snapbuild_seg(sb, 1);
	snapbuild_exit(sb, 0, 1, 1100, 2);
	snapbuild_exit(sb, 0, 1, 1120, 0);
	snapbuild_req_open(sb, 1, 2, 1005, 2, 1);
	snapbuild_enter(sb, 1, 2, 1015, 1);
	snapbuild_held(sb, 1, 1, 1020, seg, p, 9, 0);
	snapbuild_exit(sb, 1, 1, 1020, 1);
	snapbuild_req_open_id(sb, 1, 1, 1030, 1, 44, 987654);
	snapbuild_enter(sb, 1, 1, 1040, 2);
	snapbuild_req_close(sb, 1, 1, 1050, KTRACE_REQ_SLOW);
	snapbuild_held_end(sb, 1);
	snapbuild_exit(sb, 1, 2, 1060, 1);
	snapbuild_req_close_any(sb, 0, 1, 1125, KTRACE_REQ_DIRECT, 2, 1, 2);
	memset(&t, 0, sizeof(t));
	t.request_id = 44; /* format 2: the kind's number */
	t.kind_id = 1;
	t.thread_slot = 1;
	t.tid = 100;
	t.begin_tsc = 1030;
	t.end_tsc = 1050;
	t.duration_ns = 20;
	t.threshold_ns = 10;
	t.why = KTRACE_TRIGGER_ABSOLUTE;
	strcpy(t.kind, "get");
	snapbuild_trigger(sb, &t);
	memset(&h, 0, sizeof(h));
	h.slice_ticks = 500;
	h.slice_count = 8;
	h.sub_bits = 4;
	h.flags = KTRACE_REQS_HOLD;
	snapbuild_req_hdr(sb, &h);
	memset(&k, 0, sizeof(k));
	k.kind_id = 1;
	k.ended = 7;
	k.kept_slow = 1;
	k.dropped = 6;
	k.threshold_ns = 800;
	snapbuild_req_kind(sb, &k);
	snapbuild_req_slice(sb, 0, 499, d0, 2);
	snapbuild_req_slice(sb, 500, 1200, d0 + 2, 3);
	k.kind_id = 2;
	k.ended = 2;
	k.kept_slow = 0;
	k.kept_other = 1;
	k.dropped = 1;
	snapbuild_req_kind(sb, &k);
	snapbuild_req_slice(sb, 900, 1200, d1, 2);
	return sb;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "golden")) {
		struct snapbuild *sb = snapbuild_new();

		snapbuild_scenario_golden(sb);
		return emit(sb, argv[2]) ? 1 : 0;
	}
	if (argc == 5 && !strcmp(argv[1], "big")) {
		struct snapbuild *sb = snapbuild_new();

		snapbuild_scenario_big(sb, (uint32_t)atoi(argv[3]), strtoull(argv[4], NULL, 10));
		return emit(sb, argv[2]) ? 1 : 0;
	}
	if (argc == 3 && !strcmp(argv[1], "corpus")) {
		char path[4096];
		struct snapbuild *sb = snapbuild_new();

		snapbuild_scenario_golden(sb);
		snprintf(path, sizeof(path), "%s/golden.ktrace", argv[2]);
		if (emit(sb, path))
			return 1;
		for (int v = 0; v < 5; v++) {
			snprintf(path, sizeof(path), "%s/small-%d.ktrace", argv[2], v);
			if (emit(small(v), path))
				return 1;
		}
		snprintf(path, sizeof(path), "%s/small-v2.ktrace", argv[2]);
		return emit(small_v2(), path) ? 1 : 0;
	}
	if (argc == 3 && !strcmp(argv[1], "viewer"))
		{
		struct snapbuild *sb = snapbuild_new();

		snapbuild_scenario_viewer(sb);
		return emit(sb, argv[2]) ? 1 : 0;
	}
	fprintf(stderr, "usage: snapgen golden FILE | big FILE NCPUS NEVENTS | corpus DIR | "
	                "viewer FILE\n");
	return 2;
}
