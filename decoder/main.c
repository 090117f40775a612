/*
 * main.c - ktrace-decode command line.  All the work is in the stages
 * (decoder.h); this file only parses options, opens outputs and reports.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder.h"

enum fmt { F_SUMMARY, F_TEXT, F_STATS, F_CHROME, F_EXPLAIN, F_FOLDED, F_HTML, F_PERFETTO, F_EXCLUDE };

static const char usage_text[] =
	"usage: ktrace-decode [--format summary|text|stats|chrome|perfetto|html|explain|folded|exclude]\n"
	"                     [-o OUT] [--all] [--sysroot DIR] [--thread TID] [--limit N]\n"
	"                     [--no-demangle] [-q] FILE...\n"
	"\n"
	"Decode ktrace snapshot files.\n"
	"  -f, --format F   summary (default): file, process, clock, window, per-core\n"
	"                   and per-thread activity, losses, damage, trigger;\n"
	"                   text: summary, explanation (if triggered), then one line\n"
	"                   per call/mark/request in time order (UTC wall clock);\n"
	"                   stats: summary, then per function calls, total, self,\n"
	"                   mean, p50, p99, max (exact), by self time;\n"
	"                   explain: summary, then the trigger (or slowest) request's\n"
	"                   call tree next to the median request, ranked causes and\n"
	"                   what other threads ran meanwhile;\n"
	"                   chrome: Chrome/Perfetto trace JSON (summary to stderr);\n"
	"                   perfetto: Perfetto protobuf trace (.pftrace) for\n"
	"                   ui.perfetto.dev, about a quarter of chrome's size\n"
	"                   (summary to stderr); snapshots of one process merge;\n"
	"                   html: one self-contained HTML timeline page to open in\n"
	"                   any browser (summary to stderr; at most 20 M calls, or\n"
	"                   --limit N);\n"
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
	"  -t, --thread TID only this kernel thread id (text, stats, chrome, perfetto,\n"
	"                   html, folded)\n"
	"  -n, --limit N    at most N timeline lines / N functions / N calls (html)\n"
	"  -r, --no-demangle  keep C++ names as the symbol table has them (mangled);\n"
	"                   by default they are demangled (with libstdc++'s\n"
	"                   demangler, when installed), and text and chrome\n"
	"                   timelines shorten names longer than 80 bytes\n"
	"                   (template arguments become <...>)\n"
	"  -q, --quiet      no summary on stderr (chrome, perfetto, html, folded); one\n"
	"                   line per file instead of each warning\n"
	"  -h, --help       this text\n"
	"\n"
	"Several FILEs: text formats print each after a \"==> FILE <==\" header;\n"
	"chrome and perfetto put all of them in one trace (common wall clock;\n"
	"perfetto merges several snapshots of one process without repeating calls).\n"
	"\n"
	"Exit status: 0 decoded (possibly with warnings: damaged blocks are\n"
	"skipped and reported on stderr, the rest is decoded); 1 a file could not\n"
	"be decoded (not a snapshot, unsupported version, damaged header, section\n"
	"table or INFO section) or the output could not be written; 2 bad usage.\n";

/* The temporary output file while it is not renamed into place: removed by
 * an exit from anywhere (out of memory exits at once, decoder.h). */
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

static void print_warnings(const struct ktrace_dec *d, int quiet)
{
	const struct ktrace_dec_warnings *w = &d->snap.warn;
	uint32_t show = quiet ? 0 : (w->n < 20 ? w->n : 20);

	for (uint32_t i = 0; i < show; i++)
		fprintf(stderr, "ktrace-decode: %s: warning: %s\n", d->file, w->lines[i]);
	if (w->total > show)
		fprintf(stderr, "ktrace-decode: %s: %" PRIu64 " %swarnings%s\n", d->file,
		        w->total - show, show ? "more " : "",
		        quiet ? " (run without -q to see them)" : "");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "all", no_argument, NULL, 'a' },
		{ "sysroot", required_argument, NULL, 's' },
		{ "thread", required_argument, NULL, 't' },
		{ "limit", required_argument, NULL, 'n' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "no-demangle", no_argument, NULL, 'r' },
		{ "raw-names", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ktrace_dec_opts dopts = { 0 };
	struct ktrace_out_opts oopts = { 0 };
	enum fmt fmt = F_SUMMARY;
	const char *out_path = NULL;
	char *tmp_path = NULL;
	struct ktrace_dec **decs;
	FILE *out = stdout;
	int c, nfiles, status = 0, write_err = 0, direct = 0;
	struct stat st;
	uint64_t v;

	while ((c = getopt_long(argc, argv, "f:o:as:t:n:qrh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "summary")) fmt = F_SUMMARY;
			else if (!strcmp(optarg, "text")) fmt = F_TEXT;
			else if (!strcmp(optarg, "stats")) fmt = F_STATS;
			else if (!strcmp(optarg, "chrome")) fmt = F_CHROME;
			else if (!strcmp(optarg, "explain")) fmt = F_EXPLAIN;
			else if (!strcmp(optarg, "folded")) fmt = F_FOLDED;
			else if (!strcmp(optarg, "html")) fmt = F_HTML;
			else if (!strcmp(optarg, "perfetto")) fmt = F_PERFETTO;
			else if (!strcmp(optarg, "exclude")) fmt = F_EXCLUDE;
			else {
				fprintf(stderr, "ktrace-decode: unknown format '%s'\n", optarg);
				usage(stderr);
				return 2;
			}
			break;
		case 'o': out_path = optarg; break;
		case 'a': dopts.all = 1; break;
		case 's': dopts.sysroot = optarg; break;
		case 'r': dopts.raw_names = 1; break;
		case 't':
			if (parse_u64(optarg, &v) || v > INT32_MAX) {
				fprintf(stderr, "ktrace-decode: --thread needs a thread id, not '%s'\n", optarg);
				return 2;
			}
			oopts.have_tid = 1;
			oopts.tid = (int32_t)v;
			break;
		case 'n':
			if (parse_u64(optarg, &v) || v == 0) {
				fprintf(stderr, "ktrace-decode: --limit needs a positive number, not '%s'\n",
				        optarg);
				return 2;
			}
			oopts.limit = v;
			break;
		case 'q': oopts.quiet = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	nfiles = argc - optind;
	if (nfiles <= 0) {
		fprintf(stderr, "ktrace-decode: no snapshot file given\n");
		usage(stderr);
		return 2;
	}
	decs = ktrace__xcalloc((size_t)nfiles, sizeof(*decs), "the file list");
	if (!decs) {
		fprintf(stderr, "ktrace-decode: out of memory\n");
		return 1;
	}
	for (int i = 0; i < nfiles; i++) {
		struct ktrace_dec_error err;
		char msg[512];

		if (ktrace__dec_open_file(argv[optind + i], &dopts, &decs[i], &err) != 0) {
			ktrace__dec_error_format(&err, argv[optind + i], msg, sizeof(msg));
			fprintf(stderr, "%s\n", msg);
			status = 1;
			continue;
		}
		print_warnings(decs[i], oopts.quiet);
	}

	if (out_path && stat(out_path, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* /dev/null, a FIFO, a terminal: write in place, never replace. */
		out = fopen(out_path, "w");
		if (!out) {
			fprintf(stderr, "ktrace-decode: %s: cannot open: %s\n", out_path, strerror(errno));
			return 1;
		}
		direct = 1;
	} else if (out_path) {
		size_t n = strlen(out_path) + 16;
		int fd;

		tmp_path = ktrace__xmalloc(n, "the output path");
		if (!tmp_path) {
			fprintf(stderr, "ktrace-decode: out of memory\n");
			return 1;
		}
		snprintf(tmp_path, n, "%s.XXXXXX", out_path);
		fd = mkstemp(tmp_path);
		if (fd >= 0) {
			tmp_out = tmp_path;
			atexit(remove_tmp_out);
		}
		if (fd < 0 || !(out = fdopen(fd, "w"))) {
			fprintf(stderr, "ktrace-decode: %s: cannot create: %s\n", out_path,
			        strerror(errno));
			if (fd >= 0) {
				close(fd);
				unlink(tmp_path);
			}
			return 1;
		}
	}

	if (fmt == F_PERFETTO) {
		if (ktrace__out_perfetto(out, decs, (uint32_t)nfiles, &oopts) != 0) {
			fprintf(stderr, "ktrace-decode: out of memory writing the perfetto trace\n");
			write_err = 1;
		}
		for (int i = 0; i < nfiles && !oopts.quiet; i++)
			if (decs[i])
				ktrace__out_summary(stderr, decs[i]);
	} else if (fmt == F_CHROME) {
		struct ktrace_chrome ch;
		int64_t base = INT64_MAX;
		int64_t *pids = ktrace__xcalloc((size_t)nfiles, sizeof(*pids), "chrome output");

		for (int i = 0; i < nfiles; i++)
			if (decs[i]) {
				int64_t w = ktrace__dec_wall_ns(decs[i], decs[i]->window_start);
				if (w < base)
					base = w;
			}
		if (base == INT64_MAX)
			base = 0;
		ktrace__out_chrome_begin(&ch, out, base);
		for (int i = 0; i < nfiles; i++) {
			int64_t pid;

			if (!decs[i])
				continue;
			pid = decs[i]->snap.info.pid;
			for (int k = 0; pids && k < i; k++)
				if (decs[k] && pids[k] == pid)
					pid += 10000000ll * (i + 1); /* same process, two snapshots */
			if (pids)
				pids[i] = pid;
			ktrace__out_chrome_file(&ch, decs[i], pid, &oopts);
			if (!oopts.quiet)
				ktrace__out_summary(stderr, decs[i]);
		}
		ktrace__out_chrome_end(&ch);
		free(pids);
	} else if (fmt == F_HTML) {
		/* All files in one page; over the page's limit, no page at all. */
		if (ktrace__out_html(out, decs, nfiles, &oopts) != 0)
			write_err = 1;
		for (int i = 0; i < nfiles && !oopts.quiet; i++)
			if (decs[i])
				ktrace__out_summary(stderr, decs[i]);
	} else {
		int printed = 0;

		for (int i = 0; i < nfiles; i++) {
			struct ktrace_dec *d = decs[i];

			if (!d)
				continue;
			if (fmt == F_EXCLUDE) {
				ktrace__out_exclude(out, decs, nfiles); /* all files at once */
				break;
			}
			if (fmt == F_FOLDED) {
				ktrace__out_folded(out, d, &oopts);
				if (!oopts.quiet)
					ktrace__out_summary(stderr, d);
				continue;
			}
			if (nfiles > 1)
				fprintf(out, "%s==> %s <==\n", printed ? "\n" : "", d->file);
			printed = 1;
			ktrace__out_summary(out, d);
			switch (fmt) {
			case F_TEXT:
				if (d->snap.have_trigger)
					ktrace__out_explain(out, d, &oopts);
				ktrace__out_text(out, d, &oopts);
				break;
			case F_STATS: ktrace__out_stats(out, d, &oopts); break;
			case F_EXPLAIN: ktrace__out_explain(out, d, &oopts); break;
			default: break;
			}
		}
	}

	if (fflush(out) != 0 || ferror(out)) {
		fprintf(stderr, "ktrace-decode: %s: write error: %s\n", out_path ? out_path : "stdout",
		        strerror(errno));
		write_err = 1;
	}
	if (out_path && direct) {
		if (fclose(out) != 0) {
			fprintf(stderr, "ktrace-decode: %s: write error: %s\n", out_path, strerror(errno));
			write_err = 1;
		}
	} else if (out_path) {
		if (!write_err && fsync(fileno(out)) != 0 && errno != EINVAL) {
			fprintf(stderr, "ktrace-decode: %s: write error: %s\n", out_path, strerror(errno));
			write_err = 1;
		}
		if (fclose(out) != 0) {
			fprintf(stderr, "ktrace-decode: %s: write error: %s\n", out_path, strerror(errno));
			write_err = 1;
		}
		/* A partial output never replaces OUT; output of the files that
		 * did decode does, even if another file failed. */
		for (c = 0; c < nfiles && !decs[c]; c++)
			;
		if (!write_err && c < nfiles) {
			if (rename(tmp_path, out_path) == 0) {
				tmp_out = NULL;
			} else {
				fprintf(stderr, "ktrace-decode: %s: cannot rename into place: %s\n", out_path,
				        strerror(errno));
				unlink(tmp_path);
				status = 1;
			}
		} else {
			unlink(tmp_path);
		}
		tmp_out = NULL;
		free(tmp_path);
	}
	if (write_err)
		status = 1;
	for (int i = 0; i < nfiles; i++)
		ktrace__dec_free(decs[i]);
	free(decs);
	return status;
}
