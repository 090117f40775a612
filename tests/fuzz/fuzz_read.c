/*
 * fuzz_read.c - libFuzzer entry point: the whole decoder (read, order,
 * timeline, every sink) on arbitrary bytes, symbol files never opened.
 * Built as ktrace-fuzz-read with -DKTRACE_BUILD_FUZZ=ON (clang), and linked
 * into ktrace-fuzz-regress, which replays tests/fuzz/corpus and
 * tests/fuzz/regressions in every normal build.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "decoder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	struct ktrace_dec_opts opts = { .no_symbols = 1 };
	struct ktrace_out_opts oo = { 0 };
	struct ktrace_dec_error err;
	struct ktrace_dec *d;
	struct ktrace_chrome ch;
	char msg[512];

	if (!null)
		null = fopen("/dev/null", "w");
	if (!null)
		return 0;
	for (int all = 0; all < 2; all++) {
		opts.all = all;
		if (ktrace__dec_open_buffer(data, size, "fuzz", &opts, &d, &err) != 0) {
			ktrace__dec_error_format(&err, "fuzz", msg, sizeof(msg));
			fputs(msg, null);
			return 0;
		}
		ktrace__out_summary(null, d);
		ktrace__out_text(null, d, &oo);
		ktrace__out_stats(null, d, &oo);
		ktrace__out_explain(null, d, &oo);
		ktrace__out_folded(null, d, &oo);
		ktrace__out_chrome_begin(&ch, null, ktrace__dec_wall_ns(d, d->window_start));
		ktrace__out_chrome_file(&ch, d, d->snap.info.pid, &oo);
		ktrace__out_chrome_end(&ch);
		ktrace__dec_free(d);
	}
	return 0;
}
