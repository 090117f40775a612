/*
 * ktest.c - see ktest.h.
 */
#include "ktest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

extern char **environ;

int64_t kt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t kt_now_ms(void) { return kt_now_ns() / 1000000; }

void kt_sleep_ms(int ms)
{
	struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&d, &d) != 0 && errno == EINTR) {
	}
}

char *kt_mkdtemp(const char *tag)
{
	char *p = malloc(256);
	if (p == NULL)
		return NULL;
	snprintf(p, 256, "/tmp/ktrace-test-%s-XXXXXX", tag);
	if (mkdtemp(p) == NULL) {
		free(p);
		return NULL;
	}
	return p;
}

static void rm_in(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096];

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && depth > 0) {
			chmod(path, 0700);
			rm_in(path, depth - 1);
			rmdir(path);
		} else {
			unlink(path);
		}
	}
	closedir(d);
}

void kt_rmtree(const char *dir)
{
	if (dir == NULL)
		return;
	rm_in(dir, 32);
	rmdir(dir);
}

_Noreturn void kt_skip_rm(char *dir)
{
	kt_rmtree(dir);
	free(dir);
	skip();
	abort();   /* not reached: skip() jumps back into cmocka */
}

int kt_count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* ---- processes ------------------------------------------------------------- */

static void grow(char **b, size_t *len, size_t *cap, const char *src, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 4096;
		while (c < *len + n + 1)
			c *= 2;
		*b = realloc(*b, c);
		*cap = c;
	}
	memcpy(*b + *len, src, n);
	*len += n;
	(*b)[*len] = 0;
}

/* The current environment with env applied ("K=V" sets, "K" unsets). */
static char **make_env(const char *const env[])
{
	size_t n = 0, m = 0;
	char **v;

	while (environ[n])
		n++;
	while (env && env[m])
		m++;
	v = calloc(n + m + 1, sizeof(*v));
	n = 0;
	for (char **e = environ; *e; e++) {
		int drop = 0;
		for (size_t i = 0; env && env[i]; i++) {
			const char *eq = strchr(env[i], '=');
			size_t kl = eq ? (size_t)(eq - env[i]) : strlen(env[i]);
			if (strncmp(*e, env[i], kl) == 0 && (*e)[kl] == '=')
				drop = 1;
		}
		if (!drop)
			v[n++] = *e;
	}
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		int later = 0;
		if (eq == NULL)
			continue;
		/* The last setting of a key wins, as with setenv() in order. */
		for (size_t j = i + 1; env[j]; j++) {
			const char *eq2 = strchr(env[j], '=');
			size_t kl = (size_t)(eq - env[i]);
			if (strncmp(env[j], env[i], kl) == 0 &&
			    ((eq2 && (size_t)(eq2 - env[j]) == kl) || (!eq2 && strlen(env[j]) == kl)))
				later = 1;
		}
		if (!later)
			v[n++] = (char *)env[i];
	}
	v[n] = NULL;
	return v;
}

static int spawn_plain(struct kt_proc *p, char *const argv[], const char *const env[],
                       int in[2], int out[2], int err[2])
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dfl;
	char **envp = make_env(env);
	int r;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGUSR1);
	sigaddset(&dfl, SIGUSR2);
	sigaddset(&dfl, SIGXFSZ);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	r = posix_spawn(&p->pid, argv[0], &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	free(envp);
	if (r != 0) {
		errno = r;
		return -1;
	}
	return 0;
}

/* Cross builds run their programs through an emulator (qemu-aarch64):
 * KTRACE_TEST_EMULATOR names it; the kernel here cannot exec them itself. */
static char *const *emulated(char *const argv[], char **buf, size_t cap)
{
	const char *emu = getenv("KTRACE_TEST_EMULATOR");
	size_t n = 0;

	if (emu == NULL || *emu == 0)
		return argv;
	buf[n++] = (char *)emu;
	for (size_t i = 0; argv[i] && n + 1 < cap; i++)
		buf[n++] = argv[i];
	buf[n] = NULL;
	return buf;
}

int kt_spawn(struct kt_proc *p, char *const argv_in[], const char *const env[],
             const struct kt_spawn_opts *o)
{
	int in[2], out[2], err[2];
	char *ebuf[64];
	char *const *argv = emulated(argv_in, ebuf, 64);

	memset(p, 0, sizeof(*p));
	p->in_fd = p->out_fd = p->err_fd = -1;
	signal(SIGPIPE, SIG_IGN); /* a dead child's stdin must not kill the test */
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -1;
	fflush(stdout);
	fflush(stderr);
	if (o == NULL || (!o->fsize_limit && !o->cwd && !o->run_as_uid && !o->pin_cpu)) {
		/* posix_spawn: no fork handlers run in the parent's image (a test
		 * process that links libktrace would otherwise start its writer
		 * thread in the child, which TSan refuses). */
		if (spawn_plain(p, argv, env, in, out, err) != 0)
			return -1;
		goto parent;
	}
	p->pid = fork();
	if (p->pid < 0)
		return -1;
	if (p->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		for (size_t i = 0; env && env[i]; i++) {
			const char *eq = strchr(env[i], '=');
			if (eq) {
				char k[256];
				size_t kl = (size_t)(eq - env[i]);
				if (kl >= sizeof(k))
					kl = sizeof(k) - 1;
				memcpy(k, env[i], kl);
				k[kl] = 0;
				setenv(k, eq + 1, 1);
			} else {
				unsetenv(env[i]);
			}
		}
		if (o && o->fsize_limit) {
			struct rlimit rl;
			getrlimit(RLIMIT_FSIZE, &rl);
			rl.rlim_cur = o->fsize_limit;
			setrlimit(RLIMIT_FSIZE, &rl);
		}
		if (o && o->cwd && chdir(o->cwd) != 0)
			_exit(126);
		if (o && o->pin_cpu > 0) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(o->pin_cpu - 1, &set);
			sched_setaffinity(0, sizeof(set), &set);
		}
		if (o && o->run_as_uid && (setgroups(0, NULL) != 0 ||
		                           setgid((gid_t)o->run_as_uid) != 0 ||
		                           setuid((uid_t)o->run_as_uid) != 0))
			_exit(125);
		/* The parent may block signals (cmocka does not); start clean. */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGUSR1, SIG_DFL);
		signal(SIGUSR2, SIG_DFL);
		signal(SIGXFSZ, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
parent:
	close(in[0]);
	close(out[1]);
	close(err[1]);
	p->in_fd = in[1];
	p->out_fd = out[0];
	p->err_fd = err[0];
	grow(&p->out, &p->out_len, &p->out_cap, "", 0);
	grow(&p->err, &p->err_len, &p->err_cap, "", 0);
	return 0;
}

/* Read what is available within timeout_ms; 0 when both streams hit EOF. */
static int pump(struct kt_proc *p, int timeout_ms)
{
	struct pollfd f[2];
	int n = 0;
	char buf[65536];

	if (p->out_fd >= 0)
		f[n++] = (struct pollfd){p->out_fd, POLLIN, 0};
	if (p->err_fd >= 0)
		f[n++] = (struct pollfd){p->err_fd, POLLIN, 0};
	if (n == 0)
		return 0;
	if (poll(f, (nfds_t)n, timeout_ms) <= 0)
		return 1;
	for (int i = 0; i < n; i++) {
		if (!(f[i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t r = read(f[i].fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			close(f[i].fd);
			if (f[i].fd == p->out_fd)
				p->out_fd = -1;
			else
				p->err_fd = -1;
			continue;
		}
		if (f[i].fd == p->out_fd)
			grow(&p->out, &p->out_len, &p->out_cap, buf, (size_t)r);
		else
			grow(&p->err, &p->err_len, &p->err_cap, buf, (size_t)r);
	}
	return 1;
}

int kt_expect_line(struct kt_proc *p, const char *prefix, char *buf, size_t len,
                   int timeout_ms)
{
	int64_t end = kt_now_ms() + timeout_ms;

	for (;;) {
		/* Scan complete lines after out_seen. */
		size_t i = p->out_seen;
		while (i < p->out_len) {
			char *nl = memchr(p->out + i, '\n', p->out_len - i);
			if (nl == NULL)
				break;
			size_t ll = (size_t)(nl - (p->out + i));
			if (ll >= strlen(prefix) && memcmp(p->out + i, prefix, strlen(prefix)) == 0) {
				if (buf && len) {
					size_t c = ll < len - 1 ? ll : len - 1;
					memcpy(buf, p->out + i, c);
					buf[c] = 0;
				}
				p->out_seen = (size_t)(nl - p->out) + 1;
				return 0;
			}
			i += ll + 1;
		}
		int64_t left = end - kt_now_ms();
		if (left <= 0)
			return -1;
		if (pump(p, (int)(left < 50 ? left : 50)) == 0 && p->out_fd < 0) {
			/* EOF: one more scan happened above; nothing more comes. */
			if (i >= p->out_len)
				return -1;
		}
	}
}

void kt_close_stdin(struct kt_proc *p)
{
	if (p->in_fd >= 0)
		close(p->in_fd);
	p->in_fd = -1;
}

int kt_send(struct kt_proc *p, const char *s)
{
	size_t n = strlen(s);

	while (n > 0 && p->in_fd >= 0) {
		ssize_t r = write(p->in_fd, s, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		s += r;
		n -= (size_t)r;
	}
	return n == 0 ? 0 : -1;
}

int kt_wait(struct kt_proc *p, int timeout_ms)
{
	int64_t end = kt_now_ms() + timeout_ms;
	int killed = 0;

	kt_close_stdin(p);
	while (!p->reaped) {
		int64_t left = end - kt_now_ms();
		if (left <= 0 && !killed) {
			fprintf(stderr, "ktest: pid %d timed out, killing it\n", (int)p->pid);
			kill(p->pid, SIGKILL);
			killed = 1;
		}
		if (p->out_fd >= 0 || p->err_fd >= 0) {
			/* A grandchild (a hung fork child) may hold the pipes
			 * open for good: after the kill, read on only a while. */
			if (killed && kt_now_ms() > end + 5000) {
				if (p->out_fd >= 0)
					close(p->out_fd);
				if (p->err_fd >= 0)
					close(p->err_fd);
				p->out_fd = p->err_fd = -1;
				continue;
			}
			pump(p, 50);
			continue;
		}
		pid_t r = waitpid(p->pid, &p->status, killed ? 0 : WNOHANG);
		if (r == p->pid)
			p->reaped = 1;
		else if (r == 0)
			kt_sleep_ms(5);
		else if (errno != EINTR)
			break;
	}
	return p->reaped && !killed && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0
	       ? 0 : -1;
}

void kt_proc_free(struct kt_proc *p)
{
	if (p->in_fd >= 0)
		close(p->in_fd);
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->err_fd >= 0)
		close(p->err_fd);
	if (!p->reaped && p->pid > 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &p->status, 0);
	}
	free(p->out);
	free(p->err);
	memset(p, 0, sizeof(*p));
}

int kt_run(char *const argv[], const char *const env[], struct kt_proc *p, int timeout_ms)
{
	if (kt_spawn(p, argv, env, NULL) != 0)
		return -1;
	return kt_wait(p, timeout_ms);
}

int kt_count_str(const char *hay, const char *needle)
{
	int n = 0;
	size_t nl = strlen(needle);

	if (hay == NULL || nl == 0)
		return 0;
	for (const char *s = hay; (s = strstr(s, needle)) != NULL; s += nl)
		n++;
	return n;
}

/* ---- snapshot files ----------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int kt_list_snapshots(const char *dir, char ***paths)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0, cap = 16;
	char **v = calloc(cap, sizeof(*v));

	while (d && (e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);
		if (strncmp(e->d_name, "ktrace-", 7) != 0 || l < 8 ||
		    strcmp(e->d_name + l - 7, ".ktrace") != 0)
			continue;
		if (n + 2 > cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
		}
		v[n] = malloc(strlen(dir) + l + 2);
		sprintf(v[n], "%s/%s", dir, e->d_name);
		n++;
	}
	if (d)
		closedir(d);
	v[n] = NULL;
	qsort(v, n, sizeof(*v), cmp_str);
	*paths = v;
	return (int)n;
}

void kt_free_list(char **paths)
{
	for (size_t i = 0; paths && paths[i]; i++)
		free(paths[i]);
	free(paths);
}

int kt_wait_snapshots(const char *dir, int n, int timeout_ms)
{
	int64_t end = kt_now_ms() + timeout_ms;

	for (;;) {
		char **v;
		int k = kt_list_snapshots(dir, &v);
		kt_free_list(v);
		if (k >= n)
			return k;
		if (kt_now_ms() > end)
			return -1;
		kt_sleep_ms(5);
	}
}

uint32_t kt_crc32c(uint32_t crc, const void *p, size_t len)
{
	const unsigned char *s = p;

	crc = ~crc;
	while (len--) {
		crc ^= *s++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
	}
	return ~crc;
}

#define FAIL(...) do { snprintf(f->why, sizeof(f->why), __VA_ARGS__); return -1; } while (0)

int kt_file_load(const char *path, struct kt_file *f)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	struct ktrace_file_header h;

	memset(f, 0, sizeof(*f));
	if (fd < 0 || fstat(fd, &st) != 0)
		FAIL("open %s: %s", path, strerror(errno));
	f->len = (size_t)st.st_size;
	f->buf = malloc(f->len + 1);
	if (f->buf == NULL || read(fd, f->buf, f->len) != (ssize_t)f->len) {
		close(fd);
		FAIL("read %s", path);
	}
	close(fd);
	if (f->len < sizeof(h))
		FAIL("file shorter than a header (%zu bytes)", f->len);
	memcpy(&h, f->buf, sizeof(h));
	f->hdr = h;
	if (memcmp(h.magic, KTRACE_FILE_MAGIC, 8) != 0)
		FAIL("bad magic");
	if (h.byte_order != KTRACE_BYTE_ORDER_MARK || h.version != KTRACE_FORMAT_VERSION ||
	    h.header_size != sizeof(h) || h.section_entry_size != sizeof(struct ktrace_section))
		FAIL("bad header fields");
	if (h.file_size != f->len)
		FAIL("file_size %llu but file has %zu bytes", (unsigned long long)h.file_size, f->len);
	h.header_crc = 0;
	if (kt_crc32c(0, &h, sizeof(h)) != f->hdr.header_crc)
		FAIL("header CRC");
	if (h.section_table_offset > f->len ||
	    (f->len - h.section_table_offset) / sizeof(struct ktrace_section) < h.section_count)
		FAIL("section table outside the file");
	f->secs = (const struct ktrace_section *)(f->buf + h.section_table_offset);
	f->nsecs = h.section_count;
	for (uint32_t i = 0; i < f->nsecs; i++) {
		const struct ktrace_section *s = &f->secs[i];
		if (s->offset > f->len || s->size > f->len - s->offset || (s->offset & 7))
			FAIL("section %u (type %u) outside the file or misaligned", i, s->type);
		if (kt_crc32c(0, f->buf + s->offset, s->size) != s->crc)
			FAIL("section %u (type %u) CRC", i, s->type);
		if (s->type == KTRACE_SEC_BLOCKS) {
			const unsigned char *p = f->buf + s->offset, *e = p + s->size;
			for (uint32_t b = 0; b < s->count; b++) {
				struct ktrace_block_rec r;
				if ((size_t)(e - p) < sizeof(r))
					FAIL("BLOCKS entry %u truncated", b);
				memcpy(&r, p, sizeof(r));
				if (r.nwords > KTRACE_BLOCK_WORDS ||
				    (size_t)(e - p) < sizeof(r) + (size_t)r.nwords * 4)
					FAIL("BLOCKS entry %u has %u words", b, r.nwords);
				if (kt_crc32c(0, p + sizeof(r), (size_t)r.nwords * 4) != r.crc)
					f->bad_blocks++;
				p += sizeof(r) + (size_t)r.nwords * 4;
				f->nblocks++;
			}
		}
	}
	return 0;
}

void kt_file_free(struct kt_file *f)
{
	free(f->buf);
	memset(f, 0, sizeof(*f));
}

const void *kt_file_section(const struct kt_file *f, uint32_t type, uint32_t *count,
                            uint64_t *size)
{
	for (uint32_t i = 0; i < f->nsecs; i++)
		if (f->secs[i].type == type) {
			if (count)
				*count = f->secs[i].count;
			if (size)
				*size = f->secs[i].size;
			return f->buf + f->secs[i].offset;
		}
	return NULL;
}

const struct ktrace_info_rec *kt_file_info(const struct kt_file *f)
{
	uint64_t sz;
	const void *p = kt_file_section(f, KTRACE_SEC_INFO, NULL, &sz);
	return p && sz >= sizeof(struct ktrace_info_rec) ? p : NULL;
}

const struct ktrace_loss_rec *kt_file_loss(const struct kt_file *f)
{
	uint64_t sz;
	const void *p = kt_file_section(f, KTRACE_SEC_LOSS, NULL, &sz);
	return p && sz >= sizeof(struct ktrace_loss_rec) ? p : NULL;
}

const struct ktrace_trigger_rec *kt_file_trigger(const struct kt_file *f)
{
	uint64_t sz;
	const void *p = kt_file_section(f, KTRACE_SEC_TRIGGER, NULL, &sz);
	return p && sz >= sizeof(struct ktrace_trigger_rec) ? p : NULL;
}

/* ---- record walker ------------------------------------------------------------- */

#undef FAIL
#define FAIL(...) do { snprintf(w->why, sizeof(w->why), __VA_ARGS__); return -1; } while (0)

static struct kt_rec *push(struct kt_walk *w)
{
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 4096;
		w->recs = realloc(w->recs, w->cap * sizeof(*w->recs));
	}
	memset(&w->recs[w->n], 0, sizeof(w->recs[0]));
	return &w->recs[w->n++];
}

int kt_walk_block(struct kt_walk *w, const uint32_t *words, uint32_t nwords, uint32_t S)
{
	uint32_t slot, ts, i, held = 0;
	uint64_t tick;

	w->blocks++;
	if (nwords < 5 || nwords > KTRACE_BLOCK_WORDS)
		FAIL("block S=%u has %u words", S, nwords);
	if (S % KTRACE_BLOCK_WORDS)
		FAIL("block S=%u not block-aligned", S);
	if (KTRACE_REC_EV(words[0]) != 4 || KTRACE_EXT_TYPE(words[1]) != KTRACE_EXT_BLOCK_START)
		FAIL("block S=%u does not start with BLOCK_START (%08x %08x)", S, words[0], words[1]);
	if (words[2] != S)
		FAIL("block S=%u: BLOCK_START says S=%u", S, words[2]);
	slot = KTRACE_EXT_ARG(words[1]);
	tick = (((uint64_t)words[4] << 32) | words[3]) >> w->tsc_shift;
	ts = KTRACE_REC_TS(words[0]);
	if ((uint32_t)(tick & KTRACE_TS_MASK) != ts)
		FAIL("block S=%u: header ts20 %05x does not match its TSC", S, ts);
	for (i = 5; i < nwords;) {
		uint32_t h = words[i], ev = KTRACE_REC_EV(h), d;
		struct kt_rec *r;

		if (ev == KTRACE_EV_PAD) {
			for (uint32_t j = i; j < nwords; j++)
				if (words[j] != KTRACE_REC(0, KTRACE_EV_PAD))
					FAIL("block S=%u: PAD at %u followed by a record at %u", S, i, j);
			w->pad_words += nwords - i;
			break;
		}
		if (ev >= 0x800 && ev < 0x820)
			FAIL("block S=%u: reserved event %03x at %u", S, ev, i);
		d = (KTRACE_REC_TS(h) - ts) & KTRACE_TS_MASK;
		if (KTRACE_EV_IS_EXT(ev) && i + 1 < nwords &&
		    (KTRACE_EXT_TYPE(words[i + 1]) == KTRACE_EXT_TSC ||
		     KTRACE_EXT_TYPE(words[i + 1]) == KTRACE_EXT_HELD)) {
			/* Resets the reference: no step rule (checked below). */
		} else if (d < KTRACE_TS_HALF) {
			tick += d;
			if (d > w->max_forward)
				w->max_forward = d;
			if (d > KTRACE_TS_FORWARD_MAX)
				FAIL("block S=%u: step of %u ticks at %u (%08x after %08x) without a TSC "
				     "record", S, d, i, h, words[i - 1]);
		} else {
			tick -= KTRACE_TS_MASK + 1 - d;
			w->backward_steps++;
			if (KTRACE_TS_MASK + 1 - d > w->max_backward) {
				w->max_backward = KTRACE_TS_MASK + 1 - d;
				w->max_backward_at = S + i;
			}
		}
		ts = KTRACE_REC_TS(h);
		r = push(w);
		r->counter = S + i;
		r->ev = ev;
		r->slot = slot;
		r->tick = tick;
		r->held = held;
		if (KTRACE_EV_IS_EXT(ev)) {
			if (i + ev >= nwords)
				FAIL("block S=%u: extended record at %u (%u words) straddles the end (%u)",
				     S, i, ev, nwords);
			r->ext_type = KTRACE_EXT_TYPE(words[i + 1]);
			r->arg = KTRACE_EXT_ARG(words[i + 1]);
			for (uint32_t j = 2; j <= ev && j - 2 < 6; j++)
				r->payload[r->npayload++] = words[i + j];
			if (r->ext_type == KTRACE_EXT_BLOCK_START)
				FAIL("block S=%u: BLOCK_START inside the block at %u", S, i);
			if (r->ext_type == KTRACE_EXT_THREAD) {
				slot = r->arg;
				r->slot = slot;
				r->held = held = 0;
				w->thread_recs++;
			}
			if (r->ext_type == KTRACE_EXT_HELD) {
				/* A held run: another thread's records, on their
				 * own time chain (ktrace_format.h, "Held runs"). */
				uint64_t full = ((uint64_t)r->payload[4] << 32) | r->payload[3];
				if (r->npayload != 5)
					FAIL("block S=%u: HELD record at %u has %u words", S, i, ev);
				if (((full >> w->tsc_shift) & KTRACE_TS_MASK) != KTRACE_REC_TS(h))
					FAIL("block S=%u: HELD record at %u disagrees with its ts20", S, i);
				slot = r->arg;
				r->slot = slot;
				tick = full >> w->tsc_shift;
				r->tick = tick;
				r->held = held = 1;
				w->held_recs++;
			}
			if (r->ext_type == KTRACE_EXT_TSC) {
				uint64_t full = ((uint64_t)r->payload[1] << 32) | r->payload[0];
				if (((full >> w->tsc_shift) & KTRACE_TS_MASK) != KTRACE_REC_TS(h))
					FAIL("block S=%u: TSC record at %u disagrees with its ts20", S, i);
				tick = full >> w->tsc_shift;
				r->tick = tick;
				w->tsc_recs++;
			}
			i += 1 + ev;
		} else {
			i++;
		}
	}
	return 0;
}

void kt_walk_free(struct kt_walk *w)
{
	free(w->recs);
	memset(w, 0, sizeof(*w));
}
