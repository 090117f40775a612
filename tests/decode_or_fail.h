/*
 * decode_or_fail.h - for the decoder's cmocka tests: decode a snapbuild
 * image without symbols, failing the test with the decoder's message when
 * it cannot.  Include after <cmocka.h> and "snapbuild.h".
 */
#ifndef KTRACE_TESTS_DECODE_OR_FAIL_H
#define KTRACE_TESTS_DECODE_OR_FAIL_H

static struct kd_dec *decode(struct snapbuild *sb)
{
	struct kd_dec_opts o = { .no_symbols = 1 };
	struct kd_dec_error err;
	struct kd_dec *d = snapbuild_decode(sb, &o, &err);

	if (d == NULL)
		fail_msg("decode failed: %s", err.msg);
	return d;
}

#endif
