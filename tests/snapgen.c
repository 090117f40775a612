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

/*
 * The HTML timeline's browser test (tests/html/viewercheck.py): ticks are
 * ns (1 GHz, shift 0, monotonic == counter).  Thread main (tid 100) serves
 * 10 "get" requests, 1 ms apart; each is serve() (0x401000) calling 20
 * tiny() (0x402000, 10 ns each, from +10 to +400) and then one long()
 * (0x403000) from +420, so the long call begins in the same pixel as
 * tiny ones at most zoom levels.  long() takes 50 us, in request 7 (the
 * trigger) 600 us, in which main is blocked [+520, +400520) and preempted
 * [+450520, +500520).  Thread worker (tid 101, cpu 1) runs hold() (0x404000)
 * while main is blocked, and is otherwise blocked.  Request 7's duration:
 * 600 us + 460 ns; the others 50 us + 460 ns.
 */
static struct snapbuild *viewer(void)
{
	struct snapbuild *sb = snapbuild_new();
	struct {
		struct ktrace_sched_hdr h;
		struct ktrace_sched_core c[2];
		struct ktrace_sched_rec r[8];
		struct ktrace_sched_name n;
	} s;
	struct ktrace_trigger_rec t;
	const uint64_t slow_b = 1000 + 7 * 1000000ull;

	snapbuild_anchor(sb, 100, 1763700000000000000ll);
	snapbuild_anchor(sb, 20000000, 1763700000019999900ll);
	snapbuild_thread(sb, 1, 100, "main", KTRACE_THREAD_MAIN);
	snapbuild_thread(sb, 2, 101, "worker", 0);
	for (uint32_t f = 0; f < 4; f++)
		snapbuild_func(sb, f, 0x401000 + 0x1000ull * f);
	snapbuild_name(sb, 1, KTRACE_NAME_REQUEST, "get");
	for (uint64_t r = 0; r < 10; r++) {
		uint64_t b = 1000 + r * 1000000, dur = r == 7 ? 600000 : 50000;

		snapbuild_req(sb, 0, 1, b, 1, r, 0);
		snapbuild_enter(sb, 0, 1, b, 0);
		for (uint64_t i = 0; i < 20; i++) {
			snapbuild_enter(sb, 0, 1, b + 10 + 20 * i, 1);
			snapbuild_exit(sb, 0, 1, b + 20 + 20 * i, 1);
		}
		snapbuild_enter(sb, 0, 1, b + 420, 2);
		snapbuild_exit(sb, 0, 1, b + 420 + dur, 2);
		snapbuild_exit(sb, 0, 1, b + 430 + dur, 0);
		snapbuild_req(sb, 0, 1, b + 460 + dur, 1, r, 1);
	}
	snapbuild_enter(sb, 1, 2, slow_b + 2000, 3);
	snapbuild_exit(sb, 1, 2, slow_b + 399000, 3);

	memset(&t, 0, sizeof(t));
	t.request_id = 7;
	t.kind_id = 1;
	t.thread_slot = 1;
	t.tid = 100;
	t.begin_tsc = slow_b;
	t.end_tsc = slow_b + 600460;
	t.duration_ns = 600460;
	t.threshold_ns = 100000;
	t.why = KTRACE_TRIGGER_PERCENTILE;
	t.percentile_x1000 = 99000;
	strcpy(t.kind, "get");
	snapbuild_trigger(sb, &t);

	memset(&s, 0, sizeof(s));
	s.h.status = KTRACE_SCHED_RECORDED;
	s.h.paranoid = 2;
	s.h.ncores = 2;
	s.h.nnames = 0;
	s.h.clockid = 1;
	s.h.start_ns = 200;
	s.h.end_ns = 10500000;
	s.h.switches = 8;
	s.c[0] = (struct ktrace_sched_core){ 0, 4, 200 };
	s.c[1] = (struct ktrace_sched_core){ 1, 4, 200 };
	s.r[0] = (struct ktrace_sched_rec){ (int64_t)slow_b + 520, 100, 0, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.r[1] = (struct ktrace_sched_rec){ (int64_t)slow_b + 400520, 100, 0, KTRACE_SCHED_IN, 0 };
	s.r[2] = (struct ktrace_sched_rec){ (int64_t)slow_b + 450520, 100, 0, KTRACE_SCHED_OUT_PREEMPT, 0 };
	s.r[3] = (struct ktrace_sched_rec){ (int64_t)slow_b + 500520, 100, 0, KTRACE_SCHED_IN, 0 };
	s.r[4] = (struct ktrace_sched_rec){ 300, 101, 1, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.r[5] = (struct ktrace_sched_rec){ (int64_t)slow_b + 1000, 101, 1, KTRACE_SCHED_IN, 0 };
	s.r[6] = (struct ktrace_sched_rec){ (int64_t)slow_b + 399500, 101, 1, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.r[7] = (struct ktrace_sched_rec){ (int64_t)slow_b + 399600, 101, 1, KTRACE_SCHED_OUT_BLOCK, 0 };
	s.h.switches = 7;
	s.c[1].count = 3;
	snapbuild_raw_section(sb, KTRACE_SEC_SCHED, 7, &s, sizeof(s) - sizeof(s.r[7]) - sizeof(s.n), 0);
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
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "viewer"))
		return emit(viewer(), argv[2]) ? 1 : 0;
	fprintf(stderr, "usage: snapgen golden FILE | big FILE NCPUS NEVENTS | corpus DIR | "
	                "viewer FILE\n");
	return 2;
}
