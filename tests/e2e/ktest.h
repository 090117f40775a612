/*
 * ktest.h - helpers shared by the library's unit and end-to-end tests:
 * temporary directories, child processes with extra environment and
 * captured output, snapshot-file listing, and a small independent reader
 * of the snapshot file (header, section table, CRCs) so file-level facts
 * (INFO, LOSS, TRIGGER, ANCHORS) can be checked without the decoder.
 *
 * Nothing here is instrumented or links the recording library.
 */
#ifndef KTEST_H
#define KTEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ktrace_format.h"

/* ---- pseudo-random numbers --------------------------------------------------- */

/* xorshift64: the next value of the sequence in *x (never 0 if *x is not),
 * reproducible from its seed, for tests' generated inputs. */
static inline uint64_t kt_xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* ---- directories ---------------------------------------------------------- */

/* A fresh directory /tmp/ktrace-test-<tag>-XXXXXX (malloc'd path). */
char *kt_mkdtemp(const char *tag);
/* rm -rf dir (32 levels of subdirectories deep; a sysroot mirrors absolute paths). */
void kt_rmtree(const char *dir);
/* kt_rmtree(dir), free(dir) and skip the test (cmocka's skip() jumps out). */
_Noreturn void kt_skip_rm(char *dir);
/* Entries of dir other than . and .., or -1 if it cannot be read. */
int kt_count_entries(const char *dir);

/* ---- child processes ------------------------------------------------------ */

struct kt_proc {
	pid_t pid;
	int in_fd;          /* child's stdin (write end), -1 once closed */
	int out_fd, err_fd; /* read ends, -1 at EOF */
	char *out, *err;    /* captured so far, NUL-terminated */
	size_t out_len, err_len, out_cap, err_cap;
	size_t out_seen;    /* kt_expect_line consumed up to here */
	int status;         /* waitpid status once reaped */
	int reaped;
};

struct kt_spawn_opts {
	uint64_t fsize_limit;  /* RLIMIT_FSIZE soft limit for the child (bytes),
	                          0 = none; the hard limit is left as it is so
	                          the test can raise it again with prlimit() */
	const char *cwd;       /* chdir in the child, or NULL */
	unsigned run_as_uid;   /* root only: setgid/setuid to this id, 0 = stay */
	int pin_cpu;           /* cpu + 1: the child and all its threads run
	                          on that cpu only; 0 = no pinning */
};

/*
 * Start argv[0] with the current environment plus env ("K=V" sets,
 * "K" alone unsets; NULL-terminated list, may be NULL).  0 or -1.
 */
int kt_spawn(struct kt_proc *p, char *const argv[], const char *const env[],
             const struct kt_spawn_opts *o);
/* Wait up to timeout_ms for a stdout line starting with prefix (after the
 * last line found); copies the line (no newline) into buf.  0 or -1. */
int kt_expect_line(struct kt_proc *p, const char *prefix, char *buf, size_t len,
                   int timeout_ms);
void kt_close_stdin(struct kt_proc *p);
/* Write s to the child's stdin.  0 or -1. */
int kt_send(struct kt_proc *p, const char *s);
/* Read all output until EOF and reap; kill -9 after timeout_ms.  Returns
 * 0 if the child exited with status 0, else -1 (status in p->status). */
int kt_wait(struct kt_proc *p, int timeout_ms);
void kt_proc_free(struct kt_proc *p);
/* spawn + wait. */
int kt_run(char *const argv[], const char *const env[], struct kt_proc *p, int timeout_ms);
/* Occurrences of needle in hay. */
int kt_count_str(const char *hay, const char *needle);

/* ---- snapshot files -------------------------------------------------------- */

/* Sorted, malloc'd paths of dir/ktrace-*.ktrace (NULL-terminated array);
 * returns the count (the array is always allocated). */
int kt_list_snapshots(const char *dir, char ***paths);
void kt_free_list(char **paths);
/* Wait until dir holds at least n snapshot files; count or -1 on timeout. */
int kt_wait_snapshots(const char *dir, int n, int timeout_ms);

/* A whole snapshot file in memory, validated (magic, sizes, header CRC,
 * every section CRC inside the file, every block CRC). */
struct kt_file {
	unsigned char *buf;
	size_t len;
	struct ktrace_file_header hdr;
	const struct ktrace_section *secs;
	uint32_t nsecs;
	uint32_t nblocks;       /* BLOCKS entries */
	uint32_t bad_blocks;    /* block entries whose CRC failed */
	char why[256];          /* what failed, if load returned -1 */
};
int kt_file_load(const char *path, struct kt_file *f);
void kt_file_free(struct kt_file *f);
/* Section of the given type (first), its count and size; NULL if absent. */
const void *kt_file_section(const struct kt_file *f, uint32_t type, uint32_t *count,
                            uint64_t *size);
const struct ktrace_info_rec *kt_file_info(const struct kt_file *f);
const struct ktrace_loss_rec *kt_file_loss(const struct kt_file *f);
const struct ktrace_trigger_rec *kt_file_trigger(const struct kt_file *f);

/* ---- record walker (format section 1), independent of the decoder ---------- */

struct kt_rec {
	uint32_t counter;     /* the core's word counter of the header word */
	uint32_t ev;          /* event number of the header word */
	uint32_t ext_type;    /* extended type, 0 for single-word events */
	uint32_t arg;         /* extended arg24 */
	uint32_t payload[6];  /* payload words after the type word */
	uint32_t npayload;
	uint32_t slot;        /* thread slot the record belongs to */
	uint64_t tick;        /* rebuilt tick */
	uint32_t held;        /* 1: in a held run (after a HELD record) */
};

struct kt_walk {
	struct kt_rec *recs;
	size_t n, cap;
	uint32_t tsc_shift;
	uint32_t blocks, thread_recs, tsc_recs, pad_words, held_recs;
	uint32_t backward_steps;  /* records earlier than the previous one */
	uint64_t max_backward;    /* ticks: largest such step */
	uint32_t max_backward_at; /* counter of the record that made it */
	uint64_t max_forward;     /* ticks: largest step between records */
	char why[256];            /* first structural error */
};

/* Walk one block (words[0..nwords), starting at counter S).  Appends its
 * records to w; 0, or -1 with w->why set when the block breaks a rule of
 * ktrace_format.h (header, straddling record, PAD not only at the tail,
 * reserved event, a forward step above KTRACE_TS_FORWARD_MAX). */
int kt_walk_block(struct kt_walk *w, const uint32_t *words, uint32_t nwords, uint32_t S);
void kt_walk_free(struct kt_walk *w);

uint32_t kt_crc32c(uint32_t crc, const void *p, size_t len);

/* Monotonic ms / ns. */
int64_t kt_now_ms(void);
int64_t kt_now_ns(void);
void kt_sleep_ms(int ms);

#endif /* KTEST_H */
