/*
 * fuzz_elf.c - libFuzzer entry point for the ELF symbol reader
 * (decoder/symbols.c): a hostile or truncated ELF file must give an error
 * or a usable symbol table, never a crash.  Each input is also written to a
 * file and read back through kd_elf_open (which reads only the parts
 * it needs), and one special path (a FIFO with no writer, /dev/zero, a
 * directory, /dev/stdin) must be refused without blocking (issue 11).
 * Built as ktrace-fuzz-elf with -DKTRACE_BUILD_FUZZ=ON;
 * ktrace-fuzz-elf-regress replays tests/fuzz/corpus-elf and
 * tests/fuzz/regressions-elf in every build.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], fifo_path[80], file_path[80];

static void cleanup(void)
{
	unlink(fifo_path);
	unlink(file_path);
	rmdir(dir);
}

static void lookups(const struct kd_elf *e);

/* The same bytes through the file reader, then a special path. */
static void from_files(const uint8_t *data, size_t size)
{
	static const char *specials[] = { fifo_path, "/dev/zero", "/dev/stdin", "/", dir,
	                                  "/dev/null", "/nonexistent/ktrace-fuzz" };
	struct kd_elf *e;
	struct kd_dec_error err;
	int fd;

	if (!dir[0]) {
		/* tmpfs if there is one: a disk under load makes every write slow */
		snprintf(dir, sizeof(dir), "/dev/shm/ktrace-fuzz-elf-XXXXXX");
		if (!mkdtemp(dir)) {
			snprintf(dir, sizeof(dir), "/tmp/ktrace-fuzz-elf-XXXXXX");
			if (!mkdtemp(dir))
				abort();
		}
		snprintf(fifo_path, sizeof(fifo_path), "%s/fifo", dir);
		snprintf(file_path, sizeof(file_path), "%s/elf", dir);
		if (mkfifo(fifo_path, 0600) != 0)
			abort();
		atexit(cleanup);
	}
	fd = open(file_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	if (kd_elf_open(file_path, &e, &err) == 0) {
		lookups(e);
		kd_elf_free(e);
	}
	if (kd_elf_open(specials[size % (sizeof(specials) / sizeof(specials[0]))], &e,
	                     &err) == 0)
		abort(); /* no special file is ever read as ELF */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kd_elf *e;
	struct kd_dec_error err;

	from_files(data, size);
	if (kd_elf_parse(data, size, &e, &err) != 0)
		return 0;
	lookups(e);
	kd_elf_free(e);
	return 0;
}

static void lookups(const struct kd_elf *e)
{
	uint64_t v, start;

	for (uint64_t off = 0; off < 0x4000; off += 0x1f1)
		if (kd_elf_offset_to_vaddr(e, off, &v) == 0)
			kd_elf_lookup(e, v, &start);
	for (uint64_t a = 0; a < 0x10000; a += 0x3e7)
		kd_elf_lookup(e, a, &start);
	kd_elf_lookup(e, UINT64_MAX, NULL);
}
