/*
 * result.h - the decoded result: struct kd_dec (one decoded file) and what it
 * holds: functions, threads, calls, requests, marks, core runs, off/on-CPU
 * intervals; then, apart, what a pass over it keeps (the range's and the
 * merge's cut, the stages' own state).  Filled by the stages (dec.h),
 * read by every sink.
 */
#ifndef KD_RESULT_H
#define KD_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include "snap.h"
#include "util.h"

enum kd_dec_call_flags {
	KD_CALL_TRUNC_BEGIN = 1u << 0, /* entry before the window: begin = window start */
	KD_CALL_TRUNC_END = 1u << 1,   /* exit not in the window (or lost) */
	KD_CALL_SPAN = 1u << 2,        /* a ktrace_span_begin/end pair */
	KD_CALL_EXIT_LOST = 1u << 3,   /* closed by an outer frame's exit */
	KD_CALL_HELD = 1u << 4,        /* entered in a held run (format 2): its core
	                                  is the one the run was written to, not
	                                  necessarily the one it ran on */
};

enum kd_dec_func_kind {
	KD_FUNC_ADDR = 0,     /* a code address (from FUNCS or *_ADDR records) */
	KD_FUNC_SPAN = 1,     /* a span name */
	KD_FUNC_UNKNOWN_ID = 2, /* a compact id FUNCS did not list */
};

struct kd_dec_func {
	uint64_t addr;            /* code address (KD_FUNC_ADDR) */
	uint32_t id;              /* span name id, or the unknown compact id */
	uint32_t kind;            /* enum kd_dec_func_kind */
	const char *name;         /* resolved name (never NULL after decode); a
	                             name several functions share has a label,
	                             "sdslen [t_string.c]" (symbols.c) */
	const char *sym;          /* the name without that label */
	const char *short_name;   /* name for timelines: long C++ names
	                             shortened (names.c); == name if short */
};

struct kd_dec_thread {
	uint32_t slot;            /* 1-based slot used in records */
	int32_t tid;              /* kernel thread id, 0 if unknown */
	uint32_t flags;           /* enum ktrace_thread_flags */
	int known;                /* THREADS section described it */
	char name[32];            /* NUL-terminated */
	uint64_t events;          /* records attributed to it in the window */
	uint64_t first_tick;      /* ticks: first event in the window */
	uint64_t last_tick;       /* ticks: last event in the window */
	uint64_t start_tick;      /* ticks: where its truncated-begin calls start */
};

struct kd_dec_call {
	uint64_t begin;           /* ticks */
	uint64_t end;             /* ticks */
	uint64_t self;            /* ticks: end - begin - children */
	uint32_t func;            /* index in kd_dec.funcs */
	uint32_t thread;          /* index in kd_dec.threads */
	uint32_t parent;          /* call index, or KD_NONE */
	uint32_t depth;           /* 0 = outermost known frame of the thread */
	uint32_t core;            /* core index of the entry (or exit if truncated) */
	uint32_t flags;           /* enum kd_dec_call_flags */
	uint16_t begin_sub;       /* recorded order within the begin's tick (kd_ev.sub) */
	uint16_t end_sub;         /* ... within the end's tick */
};

enum kd_dec_req_flags {
	KD_REQ_TRUNC_BEGIN = 1u << 0,
	KD_REQ_TRUNC_END = 1u << 1,
	KD_REQ_TRIGGER = 1u << 2,     /* the request that fired this snapshot */
	KD_REQ_NUMBERED = 1u << 3,    /* format 2: id is the kind's number ("get #1234") */
	KD_REQ_USER_ID = 1u << 4,     /* user_id is the program's own id (REQ_OPEN_ID) */
	KD_REQ_UNKNOWN = 1u << 5,     /* ended by REQ_CLOSE, begun before the window:
	                                 kind and number unknown */
};

struct kd_dec_request {
	uint64_t begin;           /* ticks */
	uint64_t end;             /* ticks */
	uint64_t id;              /* request id from the records (format 1: the
	                             thread's slot << 32 | its sequence number; format
	                             2: the kind's request number) */
	uint64_t user_id;         /* the program's id, if KD_REQ_USER_ID */
	uint32_t kind;            /* name id of the kind (KD_NONE: KD_REQ_UNKNOWN) */
	uint32_t thread;          /* thread index (of the begin; of the end if truncated) */
	uint32_t end_thread;      /* thread index of the end record, KD_NONE if not seen */
	uint32_t keep;            /* enum ktrace_req_keep of its end record (format 2) */
	uint32_t flags;           /* enum kd_dec_req_flags */
	uint32_t core;            /* core index of the begin */
	uint16_t begin_sub;       /* recorded order within the begin's tick (kd_ev.sub) */
	uint16_t end_sub;         /* ... within the end's tick */
	/* Recorded order, for calls that share a boundary tick (indices into
	 * kd_dec.calls, which holds a thread's calls in recorded order;
	 * KD_NONE where the record is not in the window, or the end
	 * came from another thread): */
	uint32_t call_first;      /* first call entered after the begin record */
	uint32_t call_end;        /* first call entered after the end record */
	uint32_t open_at_end;     /* innermost call still open at the end record */
};

struct kd_dec_mark {
	uint64_t tick;            /* ticks */
	uint64_t value;           /* ktrace_mark() value */
	uint32_t name;            /* name id */
	uint32_t thread;          /* thread index */
	uint32_t core;            /* core index */
	uint32_t sub;             /* recorded order within its tick (kd_ev.sub) */
};

/* A run of consecutive records of one thread on one core. */
struct kd_dec_run {
	uint64_t begin;           /* ticks: first record */
	uint64_t end;             /* ticks: last record */
	uint64_t events;
	uint32_t core;            /* core index */
	uint32_t thread;          /* thread index */
};

struct kd_dec_core_stats {
	uint64_t first_tick;      /* ticks: oldest surviving record (or block start) */
	uint64_t last_tick;       /* ticks: newest record */
	uint64_t events;          /* records decoded in the window (held runs not
	                             counted: they are not this core's occupancy) */
	uint64_t held;            /* records of held runs written into this core's
	                             ring (format 2), in the window */
	uint64_t dropped;         /* records before the complete window (not --all) */
	uint64_t dropped_after;   /* records after it (copied later than another core) */
	uint32_t damaged_tails;   /* blocks whose tail did not parse */
	int has_data;
};

struct kd_dec_opts {
	int all;                  /* keep data before the complete window */
	int no_symbols;           /* never open ELF files (fuzzing) */
	const char *sysroot;      /* prefix for module paths, or NULL */
	const char *debug_dir;    /* --debug-dir: DIR/.build-id/xx/rest.debug, or NULL */
	int raw_names;            /* --no-demangle: keep C++ names mangled */
	int stream;               /* open without the collector: no d->calls; the
	                             caller walks (kd_build_walk) with its sink */
	int find_trigger;         /* with stream: find the trigger request in the
	                             prepare (d->trigger_at), for --around-trigger */
	int progress;             /* a progress line on stderr during long walks */
	int64_t progress_t0;      /* CLOCK_MONOTONIC ns: when the decode began */
};

enum kd_dec_off_why { KD_OFF_BLOCKED = 0, KD_OFF_PREEMPTED = 1 };

/* A thread off the cpu: from leaving it to getting one again. */
struct kd_dec_offcpu {
	uint64_t begin;           /* ticks: switch out */
	uint64_t end;             /* ticks: switch in (or sched_to if none) */
	uint32_t thread;          /* thread index */
	uint32_t why;             /* enum kd_dec_off_why */
};

/* One of the process's threads on a core. */
struct kd_dec_oncpu {
	uint64_t begin;           /* ticks: switch in (or sched_from) */
	uint64_t end;             /* ticks: switch out (or sched_to) */
	uint32_t thread;          /* thread index */
	uint32_t cpu;             /* cpu number */
};

struct kd_range;

/* A call of a later snapshot that merge.c joined with the earlier
 * snapshot's frame still open at the cut: one call, its begin (tick) the
 * earlier one's.  from and sub say where that begin was recorded (after a
 * chain of joins, the first file's), for a format that orders events by
 * recorded order (perfetto). */
struct kd_merge_join {
	uint32_t call;            /* index in this file's calls */
	uint32_t sub;             /* the begin's place in its tick, in from's numbering */
	const struct kd_dec *from; /* the file whose records hold the begin */
};

/*
 * One decoded file.  The decoded result (what the stages made of the
 * snapshot: window, functions, threads, calls, requests, marks, runs,
 * scheduling), then, apart, what a pass over it keeps: how a range and a
 * merge cut it (cut, merge) and the stages' own state (pass).
 */
struct kd_dec {
	char *file;               /* name for messages */
	void *map;                /* owned file mapping or copy, or NULL */
	size_t map_len;           /* bytes */
	int map_is_mmap;
	struct kd_snap snap;
	struct kd_dec_opts opts;
	/* ---- the decoded result ---- */
	uint32_t shift;           /* info.tsc_shift */
	uint64_t tsc_hz;          /* info.tsc_hz */
	uint64_t window_start;    /* ticks: complete window start (or data start, --all);
	                             the range's start once cut (cut.full_start: the
	                             snapshot's) */
	uint64_t window_end;      /* ticks */
	uint64_t data_start;      /* ticks: oldest record of any core */
	int window_limited;       /* some core wrapped: window_start > data_start */
	uint64_t events;          /* records decoded in the window */
	uint64_t dropped;         /* records before the window */
	uint64_t window_cut;      /* ticks: the earliest CORES copy_tsc; later records
	                             may be missing on some core, so they are dropped
	                             (UINT64_MAX: no cut, or --all) */
	uint64_t dropped_after;   /* records after window_cut */
	struct kd_dec_func *funcs;     uint32_t nfuncs;
	struct kd_dec_thread *threads; uint32_t nthreads;
	struct kd_dec_call *calls;     uint32_t ncalls;  /* the collector's: grouped by
	                                     thread, in entry (recorded) order within
	                                     one, calls entered before the window
	                                     first; parent < child.  Empty when
	                                     opened with opts.stream */
	struct kd_dec_request *reqs;   uint32_t nreqs;   /* in begin order */
	struct kd_dec_mark *marks;     uint32_t nmarks;
	struct kd_dec_run *runs;       uint32_t nruns;
	struct kd_dec_core_stats *core_stats; /* [snap.ncores] */
	uint32_t trigger_req;     /* request index of the trigger, or KD_NONE */
	struct {                  /* the trigger request as a walk decodes it, known
	                             before any walk (kd_build_prepare, for a file
	                             opened with opts.stream and opts.find_trigger):
	                             --around-trigger needs no walk of its own.
	                             known 0: the walk finds no trigger request */
		int known;
		uint64_t begin, end;  /* ticks: reqs[trigger_req].begin/.end after a walk */
	} trigger_at;
	uint64_t unmatched_exits; /* exits with no entry (counted as truncated-begin) */
	uint64_t lost_exits;      /* frames closed by an outer exit */
	/* Scheduling (sched.c, after stage 3; nothing when not recorded). */
	struct kd_dec_offcpu *offcpu;  uint32_t noffcpu;  /* by thread, then begin */
	uint32_t *offcpu_first;   /* [nthreads + 1]: thread t's are offcpu[first[t]..first[t+1]) */
	struct kd_dec_oncpu *oncpu;    uint32_t noncpu;   /* by core, then begin */
	int sched;                /* switch records decoded (status RECORDED) */
	uint64_t sched_from;      /* ticks: switch data complete on every core from here */
	uint64_t sched_to;        /* ticks: ... up to here (the last drain) */
	struct kd_strpool strs;   /* strings made up by the decoder (owned) */
	struct {                  /* calls the last walk saw (summary, any format) */
		uint64_t calls;
		uint64_t trunc_begin; /* entered before the window */
		uint64_t trunc_end;   /* still running at its end */
		uint64_t exit_lost;   /* closed by an outer frame's exit (longjmp) */
	} counts;
	/* ---- the time range on this file (range.c; zero without one) ---- */
	struct kd_dec_cut {
		const struct kd_range *range; /* cut on every walk (kd_range_walk_cut),
		                             set by main.c; NULL: no range */
		int walked;           /* a walk has cut d once (the window is the range's) */
		int state;            /* 1: window_start/end are the range now; 2: the
		                         range misses this file (nothing left) */
		uint64_t full_start, full_end; /* ticks: the snapshot's window */
		uint64_t calls_out;   /* calls left out: wholly outside the range */
		uint64_t min_dur_ns;  /* --min-dur, ns */
		uint64_t min_dur_ticks; /* ... in ticks */
		uint64_t min_dur_dropped; /* calls left out: shorter than min_dur */
		int trigger_clipped;  /* the trigger request crosses the range's edge
		                         (still marked; explain does not name it) */
	} cut;
	/* ---- several files on one timeline (merge.c; zero for one file) ---- */
	struct kd_dec_merge {
		uint32_t group;       /* 1-based process group among the files */
		uint64_t cut;         /* ticks: an earlier snapshot of the process ends
		                         here (0: no overlap) */
		uint64_t dropped;     /* calls left out: the earlier snapshot has them */
		uint64_t joined;      /* frames open across the cut made one call */
		struct kd_merge_join *joins; /* those calls (njoins; owned) */
		uint32_t njoins;
	} merge;
	/* ---- the stages' own state between passes ---- */
	struct {
		struct kd_build *build; /* stage 3's, between prepare and walks (build.c) */
		void *symcache;       /* symbols.c's ELF files */
		int warned_demangle;  /* symbols.c: "names stay mangled" said */
	} pass;
};

#endif /* KD_RESULT_H */
