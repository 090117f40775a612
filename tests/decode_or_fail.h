/*
 * decode_or_fail.h - for the decoder's cmocka tests: decode a snapbuild
 * image without symbols, failing the test with the decoder's message when
 * it cannot.  Include after <cmocka.h> and "snapbuild.h".
 */
#ifndef KTRACE_TESTS_DECODE_OR_FAIL_H
#define KTRACE_TESTS_DECODE_OR_FAIL_H

static inline struct kd_dec *decode(struct snapbuild *sb)
{
	struct kd_dec_opts o = { .no_symbols = 1 };
	struct kd_dec_error err;
	struct kd_dec *d = snapbuild_decode(sb, &o, &err);

	if (d == NULL)
		fail_msg("decode failed: %s", err.msg);
	return d;
}

/* The same on an image (opened twice to compare two ways of decoding it);
 * stream: opened for the stream (opts.stream, no d->calls). */
static inline struct kd_dec *decode_image(const uint8_t *buf, size_t len, int stream)
{
	struct kd_dec_opts o = { .no_symbols = 1, .stream = stream };
	struct kd_dec_error err;
	struct kd_dec *d;

	if (kd_dec_open_buffer(buf, len, "image", &o, &d, &err) != 0)
		fail_msg("decode failed: %s", err.msg);
	return d;
}

#endif
