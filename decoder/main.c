/*
 * main.c - ktrace-decode command line.  All the work is in the stages
 * (their headers); this file only parses options, opens outputs and reports.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dec.h"
#include "kd_time.h"
#include "merge.h"
#include "formats.h"   /* every out-*.h (generated: decoder/CMakeLists.txt) */
#include "range.h"
#include "read.h"
#include "result.h"
#include "sink.h"
#include "stream.h"
#include "util.h"

static const char usage_text[] =
	"usage: ktrace-decode [--format summary|text|stats|chrome|perfetto|html|explain|folded|exclude]\n"
	"                     [-o OUT] [--all] [--sysroot DIR] [--debug-dir DIR] [--thread TID] [--limit N]\n"
	"                     [--no-demangle] [-q] [--from T] [--to T]\n"
	"                     [--around-trigger DUR] [--min-dur DUR] FILE...\n"
	"\n"
	"Decode ktrace snapshot files.\n"
	"  -f, --format F   summary (default): file, process, clock, window, per-core\n"
	"                   and per-thread activity, losses, damage, trigger;\n"
	"                   text: summary, explanation (if triggered), then one line\n"
	"                   per call/mark/request in time order (UTC wall clock);\n"
	"                   stats: summary, then per function calls, total, self,\n"
	"                   mean, p50, p99, max (exact), by self time;\n"
	"                   explain: the trigger (or slowest) request, its cause and\n"
	"                   call path first; then its call tree next to the median\n"
	"                   (typical) request, ranked causes, what other threads ran\n"
	"                   meanwhile; then the summary;\n"
	"                   chrome: Chrome/Perfetto trace JSON;\n"
	"                   perfetto: Perfetto protobuf trace (.pftrace) for\n"
	"                   ui.perfetto.dev, about a quarter of chrome's size;\n"
	"                   snapshots of one process merge;\n"
	"                   html: one self-contained HTML timeline page to open in\n"
	"                   any browser (at most 20 M calls, or --limit N);\n"
	"                   folded: folded stacks of self ns for flamegraph.pl;\n"
	"                   exclude: the -finstrument-functions-exclude-function-list\n"
	"                   flag that removes the muted (or hottest short) functions\n"
	"                   from the instrumentation, one line for all FILEs\n"
	"                   (notes on stderr).\n"
	"  -o, --output OUT write to OUT: a regular file is replaced atomically\n"
	"                   (temporary file, then rename); anything else (/dev/null,\n"
	"                   a FIFO) is written in place\n"
	"  -a, --all        keep data older than the complete window (where a wrapped\n"
	"                   core lost older records, stacks may be incomplete)\n"
	"  -s, --sysroot D  prefix module paths with D when reading ELF symbols\n"
	"  --debug-dir D    look for each module by its build-id as\n"
	"                   D/.build-id/xx/rest.debug first (as gdb, debuginfod)\n"
	"  -t, --thread TID only this kernel thread id (text, stats, chrome, perfetto,\n"
	"                   html, folded)\n"
	"  -n, --limit N    at most N timeline lines / N functions / N calls (html)\n"
	"  -r, --no-demangle  keep C++ names as the symbol table has them (mangled);\n"
	"                   by default they are demangled (with libstdc++'s\n"
	"                   demangler, when installed), and text and chrome\n"
	"                   timelines shorten names longer than 80 bytes\n"
	"                   (template arguments become <...>)\n"
	"  -q, --quiet      one line per file instead of each warning, no \"wrote\n"
	"                   OUT\" line, no progress line (shown on a terminal when\n"
	"                   a decode takes over a second: percent, records/s, time\n"
	"                   left)\n"
	"  -v, --verbose    the summary on stderr too (chrome, perfetto, html,\n"
	"                   folded: their output holds none); stderr otherwise has\n"
	"                   warnings and, with -o, one \"wrote OUT\" line\n"
	"  --from T, --to T keep only this time range (every format): T is a UTC\n"
	"                   time HH:MM:SS[.frac] as the text timeline prints it,\n"
	"                   YYYY-MM-DDTHH:MM:SS[.frac], or an offset into the window\n"
	"                   (+1.5s, +200ms; from the earliest window start of all\n"
	"                   FILEs); calls and requests across a cut are cut there and\n"
	"                   flagged like those at the window's edges\n"
	"  --around-trigger DUR  the trigger request, DUR (200ms, 1s, ...) either side\n"
	"  --min-dur DUR    leave calls shorter than DUR out (their time stays in\n"
	"                   their callers' self time; the summary says how many)\n"
	"  -h, --help       this text\n"
	"\n"
	"Memory: summary, folded, chrome and perfetto stream the calls, with or\n"
	"without --from/--to/--around-trigger/--min-dur: they keep per thread its\n"
	"open frames, per distinct stack or function a little, never per call.\n"
	"Except: with several FILEs, summary and chrome keep every call, and so\n"
	"does perfetto for snapshots of one process (it merges them on their\n"
	"calls; files of other processes stream).  text streams too: it spools\n"
	"32 bytes a call to a temporary file in $TMPDIR (or /tmp; none with\n"
	"--limit N, which spools N calls a thread at most) and keeps per thread a\n"
	"4 KiB buffer; with a trigger, its explanation keeps the calls overlapping\n"
	"the slow and the median request (56 bytes each), no others; text of\n"
	"snapshots of one process that overlap keeps every call of those files.\n"
	"stats, explain, html and exclude keep every call (about 56 bytes per\n"
	"call, more for html); under --from/--to/--around-trigger/--min-dur,\n"
	"these and text keep only the calls in the range.  The\n"
	"file itself is read in pieces of a few hundred KB, again for each pass\n"
	"(a pipe: whole).\n"
	"Times: one conversion (the snapshot's ANCHORS) in every format; chrome\n"
	"places a thread's events of one clock tick 1 ns apart in recorded order\n"
	"(times within a tick are interpolated), so zero-length calls nest.\n"
	"\n"
	"Several FILEs: text formats print each after a \"==> FILE <==\" header;\n"
	"text and summary then list the files on one time axis (UTC wall clock) and\n"
	"text prints one timeline of all of them; chrome, perfetto and html put all\n"
	"of them in one trace.  Snapshots of one process are merged without\n"
	"repeating calls (text, summary, chrome, html, perfetto).\n"
	"\n"
	"Exit status: 0 decoded (possibly with warnings: damaged blocks are\n"
	"skipped and reported on stderr, the rest is decoded); 1 a file could not\n"
	"be decoded (not a snapshot, unsupported version, damaged header, section\n"
	"table or INFO section) or the output could not be written; 2 bad usage.\n";

/* The temporary output file while it is not renamed into place: removed by
 * an exit from anywhere (out of memory exits at once, util.h).  The one
 * global: atexit() handlers take no argument. */
static char *tmp_out;

static void remove_tmp_out(void)
{
	if (tmp_out)
		unlink(tmp_out);
}

static void usage(FILE *f)
{
	fputs(usage_text, f);
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	errno = 0;
	if (!*s || *s == '-')
		return -1;
	x = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*v = x;
	return 0;
}

static void print_warnings(const struct kd_dec *d, int quiet)
{
	const struct kd_dec_warnings *w = &d->snap.warn;
	uint32_t show = quiet ? 0 : (w->n < 20 ? w->n : 20);

	for (uint32_t i = 0; i < show; i++)
		fprintf(stderr, "ktrace-decode: %s: warning: %s\n", d->file, w->lines[i]);
	if (w->total > show)
		fprintf(stderr, "ktrace-decode: %s: %" PRIu64 " %swarnings%s\n", d->file,
		        w->total - show, show ? "more " : "",
		        quiet ? " (run without -q to see them)" : "");
}

/* The one line a decode to a file prints: what it wrote, how big. */
static void say_wrote(const char *path, const char *format)
{
	struct stat st;
	char size[32] = "";

	if (stat(path, &st) == 0) {
		double b = (double)st.st_size;
		if (b >= 1e6)
			snprintf(size, sizeof(size), ", %.1f MB", b / 1e6);
		else if (b >= 1e3)
			snprintf(size, sizeof(size), ", %.1f KB", b / 1e3);
		else
			snprintf(size, sizeof(size), ", %lld bytes", (long long)st.st_size);
	}
	fprintf(stderr, "ktrace-decode: wrote %s (%s%s)\n", path, format, size);
}

/* ---- the sinks ---------------------------------------------------------- */

/* What a sink is told besides the output options. */
/* What a format needs from the decoder. */
enum need {
	NEED_CALLS,   /* the collector's d->calls (kd_dec_open_* as is) */
	NEED_STREAM,  /* opened with opts.stream; the sink walks itself */
};

struct sink {
	const char *name;
	enum need need;
	int merge;         /* several files on one timeline (merge.c): snapshots of
	                      one process cut so each call shows once; 2: the files
	                      stay opened for the stream, kd_merge_files collects
	                      only those it cuts (text) */
	int header;        /* "==> FILE <==" and the summary first, on the output;
	                      2: the summary after the output (explain: its
	                      answer on the first screen) */
	int summary_err;   /* the summary on stderr with -v, after the output */
	/* One file at a time, or all files at once (NULL entries skipped);
	 * nonzero: the output failed.  A format whose entry point has one of
	 * these types is named in its row as it is; the others have an
	 * adapter below. */
	int (*file)(FILE *out, struct kd_dec *d, const struct kd_out_opts *o);
	int (*files)(FILE *out, struct kd_dec **decs, int n, const struct kd_out_opts *o);
	/* After the per-file output when there are several files, or NULL. */
	int (*merged)(FILE *out, struct kd_dec **decs, int n, const struct kd_out_opts *o);
};

/* Walk d's stream into sink (the streamed formats). */
static int walk(struct kd_dec *d, struct kd_sink sink)
{
	struct kd_dec_error err;
	char msg[512];

	if (kd_range_walk_cut(d, sink, &err) == 0)
		return 0;
	kd_util_error_format(&err, d->file, msg, sizeof(msg));
	fprintf(stderr, "%s\n", msg);
	return 1;
}

static int out_none(FILE *out, struct kd_dec *d, const struct kd_out_opts *o)
{
	(void)out; (void)d; (void)o;
	return 0;
}

static int out_text(FILE *out, struct kd_dec *d, const struct kd_out_opts *o)
{
	/* With a trigger, its explanation first: it collects only the calls
	 * of its two requests' intervals (or has them: a file the merge cut);
	 * the timeline spools (out-text.c). */
	if (d->snap.have_trigger) {
		if (!d->opts.stream)
			kd_out_explain(out, d, o);
		else if (kd_out_explain_stream(out, d, o))
			return 1;
	}
	return o->nfiles == 1 && kd_out_text(out, d, o) ? 1 : 0;
}

static int merged_summary(FILE *out, struct kd_dec **decs, int n, const struct kd_out_opts *o)
{
	(void)o;
	fprintf(out, "\n==> all files <==\n");
	kd_out_summary_merged(out, decs, (uint32_t)n);
	return 0;
}

static int merged_text(FILE *out, struct kd_dec **decs, int n, const struct kd_out_opts *o)
{
	merged_summary(out, decs, n, o);
	return kd_out_text_merged(out, decs, (uint32_t)n, o) ? 1 : 0;
}

static int out_stats(FILE *out, struct kd_dec *d, const struct kd_out_opts *o)
{
	kd_out_stats(out, d, o);
	return 0;
}

static int out_explain(FILE *out, struct kd_dec *d, const struct kd_out_opts *o)
{
	kd_out_explain(out, d, o);
	return 0;
}

static int out_folded(FILE *out, struct kd_dec *d, const struct kd_out_opts *o)
{
	if (kd_out_folded_stream(out, d, o)) {
		fprintf(stderr, "ktrace-decode: %s: out of memory building the stacks\n", d->file);
		return 1;
	}
	return 0;
}

static int out_exclude(FILE *out, struct kd_dec **decs, int n, const struct kd_out_opts *o)
{
	(void)o;
	kd_out_exclude(out, decs, n);   /* one flag line for all the files */
	return 0;
}

static int out_perfetto(FILE *out, struct kd_dec **decs, int n, const struct kd_out_opts *o)
{
	if (kd_out_perfetto(out, decs, (uint32_t)n, o) != 0) {
		fprintf(stderr, "ktrace-decode: out of memory writing the perfetto trace\n");
		return 1;
	}
	return 0;
}

static int out_chrome(FILE *out, struct kd_dec **decs, int n, const struct kd_out_opts *o)
{
	struct kd_chrome ch;
	int64_t base = INT64_MAX;
	int64_t *pids = kd_xcalloc((size_t)n, sizeof(*pids), "chrome output");

	for (int i = 0; i < n; i++)
		if (decs[i]) {
			int64_t w = kd_time_wall_ns(decs[i], kd_range_start(decs[i]));
			if (w < base)
				base = w;
		}
	if (base == INT64_MAX)
		base = 0;
	kd_out_chrome_begin(&ch, out, base);
	for (int i = 0; i < n; i++) {
		int64_t pid;

		if (!decs[i])
			continue;
		pid = decs[i]->snap.info.pid;
		for (int k = 0; k < i; k++)
			if (decs[k] && pids[k] == pid)
				pid += 10000000ll * (i + 1); /* same process, two snapshots */
		pids[i] = pid;
		kd_out_chrome_file(&ch, decs[i], pid, o);
		/* -v: each file's summary right after its events. */
		if (o->verbose)
			kd_out_summary(stderr, decs[i]);
	}
	kd_out_chrome_end(&ch);
	free(pids);
	if (n > 1 && o->verbose)
		kd_out_summary_merged(stderr, decs, (uint32_t)n);
	return 0;
}

/*
 * The formats: a new one is one row here and its out-NAME.c (with
 * out-NAME.h: formats.h and the build find both).  A row names the entry
 * point itself when it has the type of `file` or `files` (html), else an
 * adapter above.  perfetto
 * merges snapshots of one process itself, on its event sequences (same
 * rule; such files it collects itself, a file alone it streams); stats,
 * explain and folded report each file on its own.
 */
static const struct sink sinks[] = {
	/* name       need         merge header summary_err file  files  merged */
	{ "summary",  NEED_STREAM, 1, 1, 0, out_none, NULL, merged_summary },
	{ "text",     NEED_STREAM, 2, 1, 0, out_text, NULL, merged_text },
	{ "stats",    NEED_CALLS, 0, 1, 0, out_stats, NULL, NULL },
	{ "explain",  NEED_CALLS, 0, 2, 0, out_explain, NULL, NULL },
	{ "folded",   NEED_STREAM, 0, 0, 1, out_folded, NULL, NULL },
	{ "exclude",  NEED_CALLS, 0, 0, 0, NULL, out_exclude, NULL },
	{ "chrome",   NEED_STREAM, 1, 0, 0, NULL, out_chrome, NULL }, /* summaries: out_chrome */
	{ "perfetto", NEED_STREAM, 0, 0, 1, NULL, out_perfetto, NULL },
	{ "html",     NEED_CALLS, 1, 0, 1, NULL, kd_out_html, NULL },
};

/* The text outputs' filter (main): every byte below 0x20 but newline and
 * tab, and DEL, is written as '?'. */
static ssize_t tty_safe_write(void *cookie, const char *buf, size_t n)
{
	FILE *f = cookie;
	char tmp[4096];

	for (size_t done = 0; done < n;) {
		size_t k = n - done < sizeof(tmp) ? n - done : sizeof(tmp);

		for (size_t i = 0; i < k; i++) {
			unsigned char ch = (unsigned char)buf[done + i];
			tmp[i] = (ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f ? '?' : (char)ch;
		}
		if (fwrite(tmp, 1, k, f) != k)
			return done ? (ssize_t)done : -1;
		done += k;
	}
	return (ssize_t)n;
}

static const struct sink *find_sink(const char *name)
{
	for (size_t i = 0; i < sizeof(sinks) / sizeof(sinks[0]); i++)
		if (!strcmp(sinks[i].name, name))
			return &sinks[i];
	return NULL;
}

/* Run the chosen sink over the decoded files; nonzero: output failed. */
static int run_sink(const struct sink *k, FILE *out, struct kd_dec **decs, int n,
                    const struct kd_out_opts *o)
{
	int err = 0, printed = 0;

	if (k->files) {
		err = k->files(out, decs, n, o);
	} else {
		for (int i = 0; i < n; i++) {
			struct kd_dec *d = decs[i];

			if (!d)
				continue;
			if (d->opts.stream && k->header && walk(d, (struct kd_sink){ 0 }))
				return 1;
			if (k->header) {
				if (n > 1)
					fprintf(out, "%s==> %s <==\n", printed ? "\n" : "", d->file);
				printed = 1;
				if (k->header == 1)
					kd_out_summary(out, d);
			}
			err |= k->file(out, d, o);
			if (k->header == 2) {
				fprintf(out, "\n");
				kd_out_summary(out, d);
			}
			if (k->summary_err && o->verbose)
				kd_out_summary(stderr, d);
		}
		if (printed && n > 1 && k->merged)
			err |= k->merged(out, decs, n, o);
		return err;
	}
	for (int i = 0; i < n && k->summary_err && o->verbose; i++)
		if (decs[i])
			kd_out_summary(stderr, decs[i]);
	return err;
}

/* The sink over the files, text formats through the control-byte filter;
 * nonzero: the output failed. */
static int run_output(const struct sink *k, FILE *out, struct kd_dec **decs, int n,
                      const struct kd_out_opts *o)
{
	/* Text (summary, text, stats, explain, folded): names come from the
	 * snapshot and from ELF files, both hostile; control bytes other than
	 * newline and tab would drive the terminal. */
	static const cookie_io_functions_t io = { NULL, tty_safe_write, NULL, NULL };
	FILE *safe = k->file ? fopencookie(out, "w", io) : NULL;
	int err;

	if (!safe)
		return run_sink(k, out, decs, n, o);
	err = run_sink(k, safe, decs, n, o);
	if (fflush(safe) != 0 || ferror(safe))
		err = 1;
	fclose(safe);
	return err;
}

/* ---- the command line ----------------------------------------------------- */

struct args {
	const struct sink *sink;
	const char *out_path;     /* -o, or NULL: stdout */
	struct kd_dec_opts dopts;
	struct kd_out_opts oopts;
	struct kd_range range;
	int ranged;               /* --from/--to/--around-trigger/--min-dur given */
	char **files;
	int nfiles;
};

/*
 * Whether the sink reads the files' streams, or their collected calls.  A
 * NEED_STREAM format streams unless it merges several files in main
 * (sink->merge == 1: merge.c cuts collected calls; chrome and summary then
 * read those).  text (merge == 2) merges its files' streams itself and
 * collects only the files the merge cuts; under a range it collects the
 * calls the range keeps: its explanation and timeline then read them
 * instead of walking each file three more times.
 */
static int streams(const struct args *a)
{
	return a->sink->need == NEED_STREAM && !(a->nfiles > 1 && a->sink->merge == 1) &&
	       !(a->sink->merge == 2 && a->ranged);
}

/* Parse argv into a; -1 to go on, else the exit status (help, bad usage). */
static int parse_args(int argc, char **argv, struct args *a)
{
	/* Long-only options (time-range selection, range.c). */
	enum { OPT_FROM = 256, OPT_TO, OPT_AROUND, OPT_MIN_DUR, OPT_DEBUG_DIR };
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "all", no_argument, NULL, 'a' },
		{ "sysroot", required_argument, NULL, 's' },
		{ "thread", required_argument, NULL, 't' },
		{ "limit", required_argument, NULL, 'n' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "no-demangle", no_argument, NULL, 'r' },
		{ "raw-names", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ "from", required_argument, NULL, OPT_FROM },
		{ "to", required_argument, NULL, OPT_TO },
		{ "around-trigger", required_argument, NULL, OPT_AROUND },
		{ "min-dur", required_argument, NULL, OPT_MIN_DUR },
		{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
		{ NULL, 0, NULL, 0 },
	};
	struct kd_range *range = &a->range;
	char rmsg[400];
	uint64_t v;
	int c;

	memset(a, 0, sizeof(*a));
	a->sink = find_sink("summary");
	while ((c = getopt_long(argc, argv, "f:o:as:t:n:qvrh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			a->sink = find_sink(optarg);
			if (!a->sink) {
				fprintf(stderr, "ktrace-decode: unknown format '%s'\n", optarg);
				usage(stderr);
				return 2;
			}
			break;
		case 'o': a->out_path = optarg; break;
		case 'a': a->dopts.all = 1; break;
		case 's': a->dopts.sysroot = optarg; break;
		case OPT_DEBUG_DIR: a->dopts.debug_dir = optarg; break;
		case 'r': a->dopts.raw_names = 1; break;
		case 't':
			if (parse_u64(optarg, &v) || v > INT32_MAX) {
				fprintf(stderr, "ktrace-decode: --thread needs a thread id, not '%s'\n", optarg);
				return 2;
			}
			a->oopts.have_tid = 1;
			a->oopts.tid = (int32_t)v;
			break;
		case 'n':
			if (parse_u64(optarg, &v) || v == 0) {
				fprintf(stderr, "ktrace-decode: --limit needs a positive number, not '%s'\n",
				        optarg);
				return 2;
			}
			a->oopts.limit = v;
			break;
		case 'q': a->oopts.quiet = 1; break;
		case 'v': a->oopts.verbose = 1; break;
		case OPT_FROM:
		case OPT_TO:
			if (kd_range_parse_when(c == OPT_FROM ? "--from" : "--to", optarg,
			                  c == OPT_FROM ? &range->from : &range->to, rmsg, sizeof(rmsg))) {
				fprintf(stderr, "ktrace-decode: %s\n", rmsg);
				return 2;
			}
			break;
		case OPT_AROUND:
		case OPT_MIN_DUR:
			if (kd_range_parse_duration(c == OPT_AROUND ? "--around-trigger" : "--min-dur", optarg,
			                      c == OPT_AROUND ? &range->around_ns : &range->min_dur_ns,
			                      rmsg, sizeof(rmsg))) {
				fprintf(stderr, "ktrace-decode: %s\n", rmsg);
				return 2;
			}
			range->around_set |= c == OPT_AROUND;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (range->around_set && (range->from.kind || range->to.kind)) {
		fprintf(stderr, "ktrace-decode: --around-trigger chooses the range itself; give it "
		        "alone, or --from/--to without it\n");
		return 2;
	}
	a->files = argv + optind;
	a->nfiles = argc - optind;
	if (a->nfiles <= 0) {
		fprintf(stderr, "ktrace-decode: no snapshot file given\n");
		usage(stderr);
		return 2;
	}
	a->ranged = range->from.kind || range->to.kind || range->around_set || range->min_dur_ns;
	/* Under a range every file is opened for the stream: the range is
	 * resolved on all the files' windows, then each is cut on its walk, by
	 * a streamed sink or by the collector behind the range filter
	 * (open_files). */
	a->dopts.stream = streams(a) || a->ranged;
	a->dopts.find_trigger = a->range.around_set;
	/* The progress line: only for a person watching (stderr a terminal). */
	a->dopts.progress = !a->oopts.quiet && isatty(2);
	{
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		a->dopts.progress_t0 = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	}
	return -1;
}

/* ---- the files ------------------------------------------------------------ */

/*
 * Open every file (decs[i] NULL for one that failed: *status 1), resolve
 * the range on all of them, collect the files that need their calls
 * through it, and merge several files of one process.  0, or 2: the range
 * is unusable (said on stderr).
 */
static int open_files(struct args *a, struct kd_dec **decs, int *status)
{
	int streamed = streams(a);
	char rmsg[400];

	for (int i = 0; i < a->nfiles; i++) {
		struct kd_dec_error err;
		char msg[512];

		if (kd_dec_open_file(a->files[i], &a->dopts, &decs[i], &err) != 0) {
			kd_util_error_format(&err, a->files[i], msg, sizeof(msg));
			fprintf(stderr, "%s\n", msg);
			*status = 1;
			continue;
		}
		if (!a->ranged || streamed)
			print_warnings(decs[i], a->oopts.quiet);
	}
	/* --around-trigger: the trigger request as decoded (its records), not
	 * the TRIGGER record's times, which may end a little before it: a
	 * collected file has it in d->reqs, a streamed one in d->trigger_at
	 * (opts.find_trigger: found by kd_build_prepare, no walk of its own). */
	/* The range, resolved on every file's window; each file is cut while
	 * it is walked (by its sink, or by the collector below). */
	if (kd_range_resolve(&a->range, decs, (uint32_t)a->nfiles, rmsg, sizeof(rmsg))) {
		fprintf(stderr, "ktrace-decode: %s\n", rmsg);
		return 2;
	}
	for (int i = 0; i < a->nfiles && a->ranged; i++) {
		struct kd_dec_error err;
		char msg[512];

		if (!decs[i])
			continue;
		decs[i]->cut.range = &a->range;
		if (streamed)
			continue;
		if (kd_dec_collect(decs[i], &err) != 0) {  /* cut on the walk */
			kd_util_error_format(&err, decs[i]->file, msg, sizeof(msg));
			fprintf(stderr, "%s\n", msg);
			*status = 1;
			kd_dec_free(decs[i]);
			decs[i] = NULL;
			continue;
		}
		print_warnings(decs[i], a->oopts.quiet);
	}
	if (a->nfiles > 1 && a->sink->merge)
		kd_merge_files(decs, (uint32_t)a->nfiles);
	return 0;
}

/* ---- the output ----------------------------------------------------------- */

struct output {
	FILE *f;
	const char *path;         /* -o, or NULL: stdout */
	char *tmp;                /* the temporary file renamed into place */
	int direct;               /* -o names no regular file: written in place */
};

/* stdout, OUT in place (/dev/null, a FIFO, a terminal), or a temporary file
 * beside OUT.  0, or 1 (said on stderr). */
static int output_open(struct output *w, const char *path)
{
	struct stat st;
	size_t n;
	int fd;

	memset(w, 0, sizeof(*w));
	w->f = stdout;
	w->path = path;
	if (!path)
		return 0;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		w->f = fopen(path, "w");
		if (!w->f) {
			fprintf(stderr, "ktrace-decode: %s: cannot open: %s\n", path, strerror(errno));
			return 1;
		}
		w->direct = 1;
		return 0;
	}
	n = strlen(path) + 16;
	w->tmp = kd_xmalloc(n, "the output path");
	snprintf(w->tmp, n, "%s.XXXXXX", path);
	fd = mkstemp(w->tmp);
	if (fd >= 0) {
		tmp_out = w->tmp;
		atexit(remove_tmp_out);
	}
	if (fd < 0 || !(w->f = fdopen(fd, "w"))) {
		fprintf(stderr, "ktrace-decode: %s: cannot create: %s\n", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(w->tmp);
		}
		tmp_out = NULL;
		return 1;
	}
	return 0;
}

/* Flush and close; a temporary file replaces OUT only if everything was
 * written (write_err 0) and some file decoded (any).  Returns the exit
 * status it adds: 0 or 1. */
static int output_commit(struct output *w, int write_err, int any, const char *format,
                         int quiet)
{
	int status = 0;

	if (fflush(w->f) != 0 || ferror(w->f)) {
		fprintf(stderr, "ktrace-decode: %s: write error: %s\n", w->path ? w->path : "stdout",
		        strerror(errno));
		write_err = 1;
	}
	if (w->path && w->direct) {
		if (fclose(w->f) != 0) {
			fprintf(stderr, "ktrace-decode: %s: write error: %s\n", w->path, strerror(errno));
			write_err = 1;
		}
	} else if (w->path) {
		if (!write_err && fsync(fileno(w->f)) != 0 && errno != EINVAL) {
			fprintf(stderr, "ktrace-decode: %s: write error: %s\n", w->path, strerror(errno));
			write_err = 1;
		}
		if (fclose(w->f) != 0) {
			fprintf(stderr, "ktrace-decode: %s: write error: %s\n", w->path, strerror(errno));
			write_err = 1;
		}
		/* A partial output never replaces OUT; output of the files that
		 * did decode does, even if another file failed. */
		if (!write_err && any) {
			if (rename(w->tmp, w->path) == 0) {
				tmp_out = NULL;
				if (!quiet)
					say_wrote(w->path, format);
			} else {
				fprintf(stderr, "ktrace-decode: %s: cannot rename into place: %s\n", w->path,
				        strerror(errno));
				unlink(w->tmp);
				status = 1;
			}
		} else {
			unlink(w->tmp);
		}
		tmp_out = NULL;
		free(w->tmp);
	}
	return write_err ? 1 : status;
}

/* Files are read again for each pass: one that changed meanwhile gave an
 * output that may mix old and new data, which is not kept.  1 if any did. */
static int files_changed(struct kd_dec **decs, int n, int replaced)
{
	int changed = 0;

	for (int i = 0; i < n; i++)
		if (decs[i] && kd_snap_changed(&decs[i]->snap)) {
			fprintf(stderr, "ktrace-decode: %s: the file changed while it was decoded, so "
			        "the output may mix old and new data%s; decode a copy that nothing "
			        "writes to\n", decs[i]->file, replaced ? " and was not kept" : "");
			changed = 1;
		}
	return changed;
}

int main(int argc, char **argv)
{
	struct args a;
	struct output w;
	struct kd_dec **decs;
	int status = 0, write_err, any = 0, rc = parse_args(argc, argv, &a);

	if (rc >= 0)
		return rc;
	decs = kd_xcalloc((size_t)a.nfiles, sizeof(*decs), "the file list");
	rc = open_files(&a, decs, &status);
	if (rc == 0 && output_open(&w, a.out_path))
		rc = 1;
	if (rc) {
		for (int i = 0; i < a.nfiles; i++)
			kd_dec_free(decs[i]);
		free(decs);
		return rc;
	}
	a.oopts.nfiles = a.nfiles;
	write_err = run_output(a.sink, w.f, decs, a.nfiles, &a.oopts);
	write_err |= files_changed(decs, a.nfiles, a.out_path && !w.direct);
	for (int i = 0; i < a.nfiles; i++)
		any |= decs[i] != NULL;
	status |= output_commit(&w, write_err, any, a.sink->name, a.oopts.quiet);
	for (int i = 0; i < a.nfiles; i++)
		kd_dec_free(decs[i]);
	free(decs);
	return status;
}
