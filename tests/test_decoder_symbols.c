/*
 * test_decoder_symbols.c - stage 5: addresses of this very test binary
 * (PIE or not) and of libc resolve to names through MODULES built from
 * /proc/self/maps, as the library records them; bad ELF files give errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "decoder.h"
#include "snapbuild.h"

__attribute__((noinline, used)) static int ktrace_test_static_function(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline, used)) int ktrace_test_global_function(int x);
__attribute__((noinline, used)) int ktrace_test_global_function(int x)
{
	return ktrace_test_static_function(x) + 2;
}

/* MODULES entries for every executable file mapping, like the library. */
static void add_modules(struct snapbuild *sb)
{
	assert_int_equal(snapbuild_self_modules(sb), 0);
}

static struct kd_dec *decode(struct snapbuild *sb, const char *sysroot)
{
	struct kd_dec_opts o = { .sysroot = sysroot };
	struct kd_dec_error err;
	struct kd_dec *d = snapbuild_decode(sb, &o, &err);

	if (d == NULL)
		fail_msg("decode failed: %s", err.msg);
	return d;
}

static const char *name_of(struct kd_dec *d, uint64_t addr)
{
	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (d->funcs[i].kind == KD_FUNC_ADDR && d->funcs[i].addr == addr)
			return d->funcs[i].name;
	return NULL;
}

static void test_symbols_own_functions(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint64_t a = (uint64_t)(uintptr_t)&ktrace_test_static_function;
	uint64_t b = (uint64_t)(uintptr_t)&ktrace_test_global_function;
	uint64_t c = (uint64_t)(uintptr_t)&fclose;

	(void)state;
	assert_int_equal(ktrace_test_global_function(1), 6);
	add_modules(sb);
	snapbuild_func(sb, 0, a);
	snapbuild_enter(sb, 0, 1, 100, 0);
	snapbuild_exit(sb, 0, 1, 200, 0);
	snapbuild_enter_addr(sb, 0, 1, 300, b);
	snapbuild_exit_addr(sb, 0, 1, 400, b);
	snapbuild_enter_addr(sb, 0, 1, 500, b + 4); /* inside: name+offset */
	snapbuild_exit_addr(sb, 0, 1, 600, b + 4);
	snapbuild_enter_addr(sb, 0, 1, 700, c);
	snapbuild_exit_addr(sb, 0, 1, 800, c);
	d = decode(sb, NULL);
	assert_string_equal(name_of(d, a), "ktrace_test_static_function");
	assert_string_equal(name_of(d, b), "ktrace_test_global_function");
	assert_string_equal(name_of(d, b + 4), "ktrace_test_global_function+0x4");
	/* libc: .symtab is usually stripped; .dynsym still names fclose */
	assert_non_null(strstr(name_of(d, c), "fclose"));
	kd_dec_free(d);
}

uintptr_t ktrace_test_twin_a(void);
uintptr_t ktrace_test_twin_b(void);

/* Two static functions named twin (symbols_twin_a.c, symbols_twin_b.c):
 * each name says which copy it is, by source file; the symbol stays. */
static void test_symbols_repeated_names(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint64_t a = ktrace_test_twin_a(), b = ktrace_test_twin_b();

	(void)state;
	assert_true(a != b);
	add_modules(sb);
	snapbuild_func(sb, 0, a);
	snapbuild_func(sb, 1, b);
	snapbuild_enter(sb, 0, 1, 100, 0);
	snapbuild_exit(sb, 0, 1, 200, 0);
	snapbuild_enter(sb, 0, 1, 300, 1);
	snapbuild_exit(sb, 0, 1, 400, 1);
	d = decode(sb, NULL);
	assert_string_equal(name_of(d, a), "twin [symbols_twin_a.c]");
	assert_string_equal(name_of(d, b), "twin [symbols_twin_b.c]");
	for (uint32_t i = 0; i < d->nfuncs; i++)
		if (d->funcs[i].addr == a || d->funcs[i].addr == b)
			assert_string_equal(kd_names_func_sym(d, i), "twin");
	kd_dec_free(d);
}

static void test_symbols_unresolved_formats(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;

	(void)state;
	snapbuild_module(sb, 0x7f1200000000ull, 0x7f1200100000ull, 0x2000, "/nonexistent/libfoo.so");
	snapbuild_enter_addr(sb, 0, 1, 100, 0x7f1200001234ull);
	snapbuild_enter_addr(sb, 0, 1, 110, 0x401234);
	d = decode(sb, NULL);
	assert_string_equal(name_of(d, 0x7f1200001234ull), "0x7f1200001234(libfoo.so+0x3234)");
	assert_string_equal(name_of(d, 0x401234), "0x401234");
	assert_true(d->snap.warn.total >= 1); /* the missing file is reported */
	kd_dec_free(d);
}

static void test_symbols_sysroot(void **state)
{
	struct snapbuild *sb = snapbuild_new();
	struct kd_dec *d;
	uint64_t a = (uint64_t)(uintptr_t)&ktrace_test_static_function;
	char exe[1024], root[] = "/tmp/ktrace-sysrootXXXXXX", cmd[8192];
	ssize_t n;

	(void)state;
	add_modules(sb);
	snapbuild_enter_addr(sb, 0, 1, 100, a);
	d = decode(sb, "/nonexistent-sysroot");
	assert_non_null(strstr(name_of(d, a), "0x")); /* looked under the sysroot: not found */
	kd_dec_free(d);

	/* a copy of this binary under a sysroot resolves */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	assert_non_null(mkdtemp(root));
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'\"$(dirname '%s')\" && cp '%s' '%s%s'", root, exe,
	         exe, root, exe);
	assert_int_equal(system(cmd), 0);
	sb = snapbuild_new();
	add_modules(sb);
	snapbuild_enter_addr(sb, 0, 1, 100, a);
	d = decode(sb, root);
	assert_string_equal(name_of(d, a), "ktrace_test_static_function");
	kd_dec_free(d);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

static uint8_t *read_self(size_t *len)
{
	uint8_t *p = snapbuild_read_file("/proc/self/exe", len);

	assert_non_null(p);
	return p;
}

static void test_symbols_garbage_elf(void **state)
{
	struct kd_elf *e;
	struct kd_dec_error err;
	size_t len;
	uint8_t *self = read_self(&len);
	uint8_t junk[4096];

	(void)state;
	memset(&err, 0, sizeof(err));
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 7 + 3);
	assert_int_not_equal(kd_elf_parse(junk, sizeof(junk), &e, &err), 0);
	assert_null(e);
	assert_non_null(strstr(err.msg, "not an ELF file"));
	/* every truncation of our own ELF: error or a smaller table, no crash */
	for (size_t cut = 0; cut < len; cut += (cut < 4096 ? 1 : 4093)) {
		if (kd_elf_parse(self, cut, &e, &err) == 0) {
			kd_elf_lookup(e, 0x1000, NULL);
			kd_elf_free(e);
		}
	}
	/* hostile header fields */
	{
		uint8_t *bad = malloc(len);
		uint64_t huge = ~0ull;
		uint16_t many = 0xFFFF;

		memcpy(bad, self, len);
		memcpy(bad + 0x28, &huge, 8); /* e_shoff */
		assert_int_not_equal(kd_elf_parse(bad, len, &e, &err), 0);
		memcpy(bad, self, len);
		memcpy(bad + 0x3C, &many, 2); /* e_shnum */
		assert_int_not_equal(kd_elf_parse(bad, len, &e, &err), 0);
		memcpy(bad, self, len);
		memcpy(bad + 0x20, &huge, 8); /* e_phoff */
		assert_int_not_equal(kd_elf_parse(bad, len, &e, &err), 0);
		/* random damage anywhere: no crash */
		for (size_t i = 0; i < 300; i++) {
			memcpy(bad, self, len);
			for (int k = 0; k < 8; k++)
				bad[(i * 2654435761u + k * 40503u) % len] ^= (uint8_t)(0x5A + k);
			if (kd_elf_parse(bad, len, &e, &err) == 0) {
				kd_elf_lookup(e, (uint64_t)i * 977, NULL);
				kd_elf_free(e);
			}
		}
		free(bad);
	}
	assert_int_not_equal(kd_elf_open("/nonexistent/x", &e, &err), 0);
	assert_int_not_equal(kd_elf_open("/proc/self/maps", &e, &err), 0);
	free(self);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symbols_own_functions),
		cmocka_unit_test(test_symbols_repeated_names),
		cmocka_unit_test(test_symbols_unresolved_formats),
		cmocka_unit_test(test_symbols_sysroot),
		cmocka_unit_test(test_symbols_garbage_elf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
