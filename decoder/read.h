/*
 * read.h - stage 1, read.c: the parser and the file I/O (pread windows, pipes).
 * Reader-internal: dec.c, iter.c and symbols.c use it; sinks never do.
 */
#ifndef KD_READ_H
#define KD_READ_H

#include <stddef.h>
#include <stdint.h>

#include "snap.h"

/*
 * Test hook (NULL in normal use): called before each chunk of a snapshot or
 * an ELF file is read, with the path, bytes read so far and the size fstat
 * gave.  Tests use it to truncate a file at a known moment.
 */
extern void (*kd_read_hook)(const char *path, uint64_t done, uint64_t total);

struct kd_win {
	uint8_t *mem;           /* cap bytes, allocated at first use */
	size_t cap;
	uint64_t off;           /* bytes: file offset of mem[0] */
	size_t len;             /* bytes of the file in mem */
	uint64_t failed;        /* blocks that could not be read again */
	uint64_t end;           /* the file ended here at a read (it shrank since
	                         * the reader's fstat); 0: not seen */
};

/*
 * Parse and validate buf[0..len).  On success snap refers into buf (keep it
 * alive).  Returns 0 or KD_E*; on error err says where and what.
 */
int kd_snap_read(const void *buf, size_t len, struct kd_snap *snap,
                      struct kd_dec_error *err);
/*
 * The same on an open regular file (st: its fstat, from kd_read_open_path),
 * read in bounded pieces: memory stays a few MiB whatever the file's size.
 * The snapshot owns fd from here on (also on error).  A file that comes up
 * shorter than st_size while it is read gives KD_EIO ("truncated while it
 * was read").
 */
struct stat;
int kd_snap_read_fd(int fd, const struct stat *st, const char *path, struct kd_snap *snap,
                         struct kd_dec_error *err);
/*
 * The words of block b (nwords little-endian u32), or NULL if they can no
 * longer be read (the file shrank after it was checked: counted in the
 * core's window).  From a file, the pointer is valid until the next call
 * for b's core.  Blocks are read again for each pass over them; their CRCs
 * were checked by the reader, and kd_snap_changed() tells whether the file
 * changed since.
 */
const uint8_t *kd_snap_block_words(const struct kd_snap *snap,
                                        const struct kd_snap_block *b);
/* 1 if the file changed since it was opened (size, modification time or
 * inode now differ, or a block could not be read again): what was decoded
 * may mix old and new data.  0 for a buffer. */
int kd_snap_changed(const struct kd_snap *snap);
void kd_snap_free(struct kd_snap *snap);

/* open() a path for reading without blocking (O_NONBLOCK, cleared after
 * fstat fills *st); the caller checks the file type.  fd or -1 (errno). */
int kd_read_open_path(const char *path, struct stat *st);
/* pread() n bytes at off into buf, in chunks (kd_read_hook runs
 * before each; total is for the hook).  Returns the bytes read: fewer than
 * n with errno set on an error, with errno 0 at end of file. */
uint64_t kd_read_pread(int fd, void *buf, uint64_t off, uint64_t n, const char *path,
                           uint64_t total);

/* Read what kd_read_open_path returned (fd, *st) whole into memory, and
 * close fd: a pipe's or a socket's snapshot (regular files go to
 * kd_snap_read_fd; anything else is refused).  *buf is malloc'ed. */
int kd_read_whole_fd(int fd, const struct stat *st, char **buf, size_t *len,
                        struct kd_dec_error *err);

#endif /* KD_READ_H */
