/*
 * server.c - the ktrace demo: a small in-memory key-value "server" with a
 * rare slow request planted in its code path, caught by a tail-latency
 * trigger with nobody watching.
 *
 * There is no network.  A producer thread turns a seeded random stream into
 * text commands ("get user:00042", "put user:00042 <value>", "scan
 * user:00040 32") at a steady rate and feeds them through a bounded queue
 * to three workers.  Each worker marks every command as a request of its
 * kind (ktrace_request_begin/end) and runs an ordinary call path of small
 * functions: parse_request, hash_key, table_lookup / table_store,
 * checksum_value, log_append, serialize_reply.  A maintenance thread wakes
 * every 50 ms to expire a slice of the table and publish statistics, and
 * on request to persist the log's last segment.
 *
 * The planted problem: every put appends to a shared write-ahead log
 * buffer of LOG_CAPACITY entries.  The put that fills the buffer swaps in
 * the spare one (the lock is held only for the swap) and then compacts the
 * full buffer itself, inline, before replying: compact_log() dedupes the
 * entries, verifies them and LZ77-compresses them into a segment, about
 * 25 ms of CPU while a normal put takes a few microseconds.  Before it
 * overwrites the previous segment it waits for the maintenance thread to
 * write that one to "disk" (persist_segment, a 10 ms sleep standing in for
 * a slow fsync): about 10 ms off the cpu, blocked.  That happens once per
 * LOG_CAPACITY puts, once in a default run, about 4 s in.  compact_log() does its
 * work and its waiting in its own body (no traced helper calls), so the
 * decoder finds the extra time as compact_log's self time, and with
 * context switches recorded splits it into on-CPU and blocked.
 *
 * The trigger is set in code: a put slower than 10 ms fires a snapshot.
 * An absolute threshold is used because a running percentile fires on
 * scheduling noise on a busy machine (the slowest 0.1 % of 2 us requests
 * are preempted ones), while on a shared 2-core VM ordinary requests stay
 * under about 4 ms and the compaction takes 25-60 ms.
 *
 * The run lasts about 6 s at 1500 requests per second, with the one
 * compaction about 4 s in.  Every byte of every value stored or read goes
 * through crc_step(), so the server writes over a million words a second
 * at first: the window budget mutes crc_step and the other hot short
 * functions within ~100 ms (as soon as a quarter of the 8 MiB ring is
 * used up), and what is left (the requests, the queue, the locks, about
 * 25,000-50,000 words a second) holds 40-70 s, which the trigger's
 * snapshot reports.  At the end the program waits
 * for the trigger snapshots to appear in $KTRACE_DIR (default ".") and
 * prints what it did, "server: key=value" lines, for scripts and tests:
 *
 *   server: requests get=N put=N scan=N
 *   server: planted=N cause=compact_log
 *   server: planted_us min=N max=N          (the compacting puts)
 *   server: other_requests_max_us=N (kind)  (the slowest of all the others)
 *   server: unplanted_slow_puts=N           (puts over the threshold that
 *                                            were not compactions: noise)
 *   server: snapshot=PATH                   (one line per file, oldest first)
 *
 * Usage: ktrace-example-server [--seconds S] [--rate REQ_PER_S]
 *                              [--threshold-us US]
 * Build with -finstrument-functions -g and link libktrace.
 */
#include <ktrace.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NWORKERS 3
#define NKEYS 16384              /* keys in the store */
#define NBUCKETS 8192            /* hash buckets, power of two */
#define NSTRIPES 64              /* bucket lock stripes */
#define VALUE_MAX 256            /* bytes */
#define LOG_CAPACITY 1800        /* entries per write-ahead log buffer */
#define QUEUE_SLOTS 1024
#define CMD_MAX 320              /* bytes of one command line */
#define REPLY_MAX 4096

/* ---- configuration ---------------------------------------------------------- */

static double run_seconds = 6.0;
static unsigned rate = 1500;         /* requests per second, all kinds */
static unsigned threshold_us = 10000; /* put trigger */

/* ---- statistics (written by workers, read at the end) ----------------------- */

enum kind { K_GET, K_PUT, K_SCAN, K_STOP };
static const char *const kind_name[] = {"get", "put", "scan", "stop"};

static atomic_ulong served[3];       /* requests per kind */
static atomic_ulong planted;         /* compactions run inline by a put */
static atomic_ulong unplanted_slow;  /* puts over the threshold, no compaction */
static atomic_ulong get_hits, get_misses, expired;
static atomic_ulong planted_min_us = ULONG_MAX, planted_max_us; /* compacting puts */
static atomic_ulong normal_max_us;   /* slowest other request */
static atomic_int normal_max_kind;   /* its kind */

/* ---- the store: a chained hash table with striped locks --------------------- */

struct entry {
	struct entry *next;          /* bucket chain */
	uint64_t key;
	uint32_t len;                /* bytes of value */
	uint32_t crc;                /* checksum_value() of value */
	int64_t touched_ms;          /* last write, for expiry */
	char value[VALUE_MAX];
};

static struct entry *buckets[NBUCKETS];
static pthread_mutex_t stripes[NSTRIPES];
static struct entry *pool;           /* NKEYS entries, one per key */
static atomic_uint pool_used;

static uint32_t crc_table[256];

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		crc_table[i] = c;
	}
}

/* CRC-32C, table-driven: what a normal put pays per value. */
/* One byte of the checksum: a tiny helper called for every byte of every
 * value stored or read, the kind of hot short function the window budget
 * mutes (about 400,000 calls a second at the default rate). */
static __attribute__((noinline)) uint32_t crc_step(uint32_t c, uint8_t byte)
{
	return crc_table[(c ^ byte) & 0xff] ^ (c >> 8);
}

static uint32_t checksum_value(const char *p, size_t n)
{
	uint32_t c = ~0u;

	for (size_t i = 0; i < n; i++)
		c = crc_step(c, (uint8_t)p[i]);
	return ~c;
}

static uint32_t hash_key(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (uint32_t)key & (NBUCKETS - 1);
}

static struct entry *table_lookup(uint32_t b, uint64_t key)
{
	for (struct entry *e = buckets[b]; e; e = e->next)
		if (e->key == key)
			return e;
	return NULL;
}

static struct entry *entry_alloc(void)
{
	unsigned i = atomic_fetch_add_explicit(&pool_used, 1, memory_order_relaxed);

	return i < NKEYS ? &pool[i] : NULL;
}

static int table_store(uint64_t key, const char *value, uint32_t len, uint32_t crc)
{
	uint32_t b = hash_key(key);
	pthread_mutex_t *mu = &stripes[b % NSTRIPES];
	struct entry *e;
	int r = 0;

	pthread_mutex_lock(mu);
	e = table_lookup(b, key);
	if (e == NULL && (e = entry_alloc()) != NULL) {
		e->key = key;
		e->next = buckets[b];
		buckets[b] = e;
	}
	if (e) {
		memcpy(e->value, value, len);
		e->len = len;
		e->crc = crc;
		e->touched_ms = now_ms();
	} else {
		r = -1;
	}
	pthread_mutex_unlock(mu);
	return r;
}

/* Copy the value of key into out; returns its length or -1. */
static int table_get(uint64_t key, char *out, uint32_t *crc)
{
	uint32_t b = hash_key(key);
	pthread_mutex_t *mu = &stripes[b % NSTRIPES];
	struct entry *e;
	int n = -1;

	pthread_mutex_lock(mu);
	e = table_lookup(b, key);
	if (e && e->len) {
		memcpy(out, e->value, e->len);
		*crc = e->crc;
		n = (int)e->len;
	}
	pthread_mutex_unlock(mu);
	return n;
}

static void fill_value(char *v, uint32_t len, uint64_t seed)
{
	for (uint32_t i = 0; i < len; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		v[i] = (char)('a' + (seed >> 59) % 26);
	}
}

static void load_store(void)
{
	char v[VALUE_MAX];

	for (uint64_t k = 0; k < NKEYS; k++) {
		uint32_t len = 64 + (uint32_t)(k * 37 % (VALUE_MAX - 64));
		fill_value(v, len, k);
		table_store(k, v, len, checksum_value(v, len));
	}
}

/* ---- the write-ahead log and its compaction (the planted cause) ------------- */

struct log_rec {
	uint64_t key;
	uint32_t len;
	uint32_t crc;
	char value[VALUE_MAX];
};

struct log_buf {
	uint32_t n;                  /* records used */
	struct log_rec rec[LOG_CAPACITY];
};

struct segment {
	uint32_t n;                  /* records kept */
	uint32_t crc;                /* over all records */
	uint64_t bytes;
	struct log_rec rec[LOG_CAPACITY];
};

static struct log_buf logs[2];
static struct log_buf *log_active = &logs[0];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct segment segment;       /* compact_log()'s output, under segment_mu */
static pthread_mutex_t segment_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t segments_written;    /* under segment_mu */

/*
 * Merge a full log buffer into a new segment: keep the newest record of
 * each key, verify each kept value against the log's checksum, and store it
 * LZ77-compressed (a naive longest-match search over the previous
 * LZ_WINDOW bytes).  All in this function's own body, so its cost is its
 * self time.  This is the slow part: it runs inline in the put that filled
 * the buffer.
 */
#define LZ_WINDOW 48

/* Persisting segments: compact_log asks, the maintenance thread writes. */
static pthread_mutex_t persist_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t persist_cv;    /* CLOCK_MONOTONIC; set up in main */
static unsigned persist_asked, persist_done; /* under persist_mu */

static void compact_log(struct log_buf *lb)
{
	static uint16_t slot_of[8192];   /* open-addressed key index, under segment_mu */
	static uint64_t key_at[8192];
	uint32_t kept = 0, seg_crc = ~0u;
	uint64_t bytes = 0;
	unsigned want;

	/* The previous segment must be on disk before it is overwritten: ask
	 * the maintenance thread to persist it and wait (off the cpu). */
	pthread_mutex_lock(&persist_mu);
	want = ++persist_asked;
	pthread_cond_broadcast(&persist_cv);
	while (persist_done < want)
		pthread_cond_wait(&persist_cv, &persist_mu);
	pthread_mutex_unlock(&persist_mu);

	pthread_mutex_lock(&segment_mu);
	memset(slot_of, 0xff, sizeof(slot_of));
	/* Newest record wins: walk from the end. */
	for (uint32_t i = lb->n; i-- > 0;) {
		const struct log_rec *r = &lb->rec[i];
		struct log_rec *out = &segment.rec[kept];
		uint32_t h = (uint32_t)(r->key * 0x9E3779B97F4A7C15ULL >> 51);
		uint32_t v = ~0u, o = 0;
		int dup = 0;

		while (slot_of[h] != 0xffff) {
			if (key_at[h] == r->key) {
				dup = 1;
				break;
			}
			h = (h + 1) & 8191;
		}
		if (dup)
			continue;
		slot_of[h] = (uint16_t)kept;
		key_at[h] = r->key;

		for (uint32_t j = 0; j < r->len; j++)
			v = crc_table[(v ^ (uint8_t)r->value[j]) & 0xff] ^ (v >> 8);
		if (~v != r->crc)
			fprintf(stderr, "server: log record for key %" PRIu64 " is damaged\n",
			        r->key);

		/* LZ77: (distance, length) pairs for matches of 3+ bytes,
		 * literals otherwise; output capped at VALUE_MAX bytes. */
		for (uint32_t p = 0; p < r->len && o + 3 <= VALUE_MAX;) {
			uint32_t best = 0, dist = 0;
			for (uint32_t q = p > LZ_WINDOW ? p - LZ_WINDOW : 0; q < p; q++) {
				uint32_t l = 0;
				while (p + l < r->len && l < 255 && r->value[q + l] == r->value[p + l])
					l++;
				if (l > best) {
					best = l;
					dist = p - q;
				}
			}
			if (best >= 3) {
				out->value[o++] = 0;
				out->value[o++] = (char)dist;
				out->value[o++] = (char)best;
				p += best;
			} else {
				out->value[o++] = r->value[p++];
			}
		}
		out->key = r->key;
		out->len = o;
		out->crc = ~v;
		seg_crc = crc_table[(seg_crc ^ out->crc) & 0xff] ^ (seg_crc >> 8);
		bytes += sizeof(r->key) + 8 + o;
		kept++;
	}
	segment.n = kept;
	segment.crc = ~seg_crc;
	segment.bytes = bytes;
	segments_written++;
	pthread_mutex_unlock(&segment_mu);
	pthread_mutex_lock(&log_mu);
	lb->n = 0; /* the buffer is the spare again */
	pthread_mutex_unlock(&log_mu);
}

/* Append one put to the log; compacts the buffer inline when it fills. */
static void log_append(uint64_t key, const char *value, uint32_t len, uint32_t crc,
                       int *compacted)
{
	struct log_buf *full = NULL;
	struct log_rec *r;

	pthread_mutex_lock(&log_mu);
	r = &log_active->rec[log_active->n++];
	r->key = key;
	r->len = len;
	r->crc = crc;
	memcpy(r->value, value, len);
	if (log_active->n == LOG_CAPACITY) {
		full = log_active;
		log_active = full == &logs[0] ? &logs[1] : &logs[0];
	}
	pthread_mutex_unlock(&log_mu);
	if (full) {
		compact_log(full);
		*compacted = 1;
	}
}

/* ---- requests ---------------------------------------------------------------- */

struct command {
	enum kind kind;
	char line[CMD_MAX];          /* "get user:00042" etc. */
};

struct parsed {
	enum kind kind;
	uint64_t key;
	uint32_t count;              /* scan */
	const char *value;           /* put: points into the line */
	uint32_t len;
};

/* Returns 0 if line is a well-formed command. */
static int parse_request(const char *line, struct parsed *p)
{
	const char *s = line, *end;
	char *num_end;

	memset(p, 0, sizeof(*p));
	if (strncmp(s, "get ", 4) == 0) {
		p->kind = K_GET;
		s += 4;
	} else if (strncmp(s, "put ", 4) == 0) {
		p->kind = K_PUT;
		s += 4;
	} else if (strncmp(s, "scan ", 5) == 0) {
		p->kind = K_SCAN;
		s += 5;
	} else {
		return -1;
	}
	if (strncmp(s, "user:", 5) != 0)
		return -1;
	p->key = strtoull(s + 5, &num_end, 10);
	if (num_end == s + 5 || p->key >= NKEYS)
		return -1;
	s = num_end;
	if (p->kind == K_GET)
		return *s == 0 ? 0 : -1;
	if (*s++ != ' ')
		return -1;
	if (p->kind == K_SCAN) {
		p->count = (uint32_t)strtoul(s, &num_end, 10);
		return *num_end == 0 && p->count > 0 && p->count <= 64 ? 0 : -1;
	}
	end = s + strlen(s);
	p->value = s;
	p->len = (uint32_t)(end - s);
	return p->len > 0 && p->len <= VALUE_MAX ? 0 : -1;
}

static int validate_value(const char *v, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		if (v[i] < 'a' || v[i] > 'z')
			return -1;
	return 0;
}

static size_t serialize_reply(char *out, size_t cap, const char *status, uint64_t key,
                              const char *value, uint32_t len, uint32_t crc)
{
	int n = snprintf(out, cap, "%s user:%05" PRIu64 " len=%u crc=%08x ", status, key, len,
	                 crc);
	size_t at = n > 0 ? (size_t)n : 0;

	if (value && at + len + 2 < cap) {
		memcpy(out + at, value, len);
		at += len;
	}
	out[at++] = '\n';
	out[at] = 0;
	return at;
}

static void send_reply(const char *reply, size_t len, uint64_t *sink)
{
	/* No network: fold the reply into a per-worker sink so the work is
	 * not optimized away. */
	uint64_t h = *sink;

	for (size_t i = 0; i < len; i += 8)
		h = (h ^ (uint8_t)reply[i]) * 0x100000001b3ULL;
	*sink = h;
}

static void handle_get(const struct parsed *p, char *reply, uint64_t *sink)
{
	char value[VALUE_MAX];
	uint32_t crc = 0;
	int n = table_get(p->key, value, &crc);
	size_t len;

	if (n < 0) {
		atomic_fetch_add_explicit(&get_misses, 1, memory_order_relaxed);
		len = serialize_reply(reply, REPLY_MAX, "MISS", p->key, NULL, 0, 0);
	} else {
		atomic_fetch_add_explicit(&get_hits, 1, memory_order_relaxed);
		if (checksum_value(value, (size_t)n) != crc)   /* verify on read */
			len = serialize_reply(reply, REPLY_MAX, "CORRUPT", p->key, NULL, 0, 0);
		else
			len = serialize_reply(reply, REPLY_MAX, "OK", p->key, value, (uint32_t)n,
			                      crc);
	}
	send_reply(reply, len, sink);
}

static void handle_put(const struct parsed *p, char *reply, uint64_t *sink, int *compacted)
{
	uint32_t crc;
	size_t len;

	if (validate_value(p->value, p->len) != 0) {
		len = serialize_reply(reply, REPLY_MAX, "BAD", p->key, NULL, 0, 0);
		send_reply(reply, len, sink);
		return;
	}
	crc = checksum_value(p->value, p->len);
	log_append(p->key, p->value, p->len, crc, compacted);
	table_store(p->key, p->value, p->len, crc);
	len = serialize_reply(reply, REPLY_MAX, "STORED", p->key, NULL, p->len, crc);
	send_reply(reply, len, sink);
}

static void handle_scan(const struct parsed *p, char *reply, uint64_t *sink)
{
	char value[VALUE_MAX];
	size_t at = 0;
	uint32_t crc;

	for (uint32_t i = 0; i < p->count; i++) {
		uint64_t key = (p->key + i) % NKEYS;
		int n = table_get(key, value, &crc);
		if (n < 0)
			continue;
		if (at + 64 >= REPLY_MAX) {
			send_reply(reply, at, sink);
			at = 0;
		}
		/* Scans return keys and checksums, not values. */
		at += serialize_reply(reply + at, REPLY_MAX - at, "ROW", key, NULL, (uint32_t)n,
		                      crc);
	}
	send_reply(reply, at, sink);
}

static void handle_request(const struct command *c, uint64_t *sink, int *compacted)
{
	char reply[REPLY_MAX];
	struct parsed p;

	if (parse_request(c->line, &p) != 0) {
		fprintf(stderr, "server: bad command '%.40s'\n", c->line);
		return;
	}
	switch (p.kind) {
	case K_GET:
		handle_get(&p, reply, sink);
		break;
	case K_PUT:
		handle_put(&p, reply, sink, compacted);
		break;
	case K_SCAN:
		handle_scan(&p, reply, sink);
		break;
	default:
		break;
	}
}

/* ---- the queue ---------------------------------------------------------------- */

static struct command queue[QUEUE_SLOTS];
static unsigned q_head, q_tail;      /* under q_mu; head = next to pop */
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_nonempty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t q_nonfull = PTHREAD_COND_INITIALIZER;

static void queue_push(const struct command *c)
{
	pthread_mutex_lock(&q_mu);
	while (q_tail - q_head == QUEUE_SLOTS)
		pthread_cond_wait(&q_nonfull, &q_mu);
	queue[q_tail++ % QUEUE_SLOTS] = *c;
	pthread_cond_signal(&q_nonempty);
	pthread_mutex_unlock(&q_mu);
}

static void queue_pop(struct command *c)
{
	pthread_mutex_lock(&q_mu);
	while (q_tail == q_head)
		pthread_cond_wait(&q_nonempty, &q_mu);
	*c = queue[q_head++ % QUEUE_SLOTS];
	pthread_cond_signal(&q_nonfull);
	pthread_mutex_unlock(&q_mu);
}

/* ---- threads ------------------------------------------------------------------ */

/* Returns 1 if v became the new maximum. */
static int atomic_max(atomic_ulong *a, unsigned long v)
{
	unsigned long old = atomic_load_explicit(a, memory_order_relaxed);

	while (v > old) {
		if (atomic_compare_exchange_weak_explicit(a, &old, v, memory_order_relaxed,
		                                          memory_order_relaxed))
			return 1;
	}
	return 0;
}

static void atomic_min(atomic_ulong *a, unsigned long v)
{
	unsigned long old = atomic_load_explicit(a, memory_order_relaxed);

	while (v < old && !atomic_compare_exchange_weak_explicit(a, &old, v, memory_order_relaxed,
	                                                         memory_order_relaxed)) {
	}
}

static void *worker_main(void *arg)
{
	char name[16];
	struct command c;
	uint64_t sink = 0;

	snprintf(name, sizeof(name), "worker-%d", (int)(intptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	for (;;) {
		int compacted = 0;
		uint64_t t0, us;

		queue_pop(&c);
		if (c.kind == K_STOP)
			break;
		t0 = now_ns();
		ktrace_request_t req = ktrace_request_begin(kind_name[c.kind]);
		handle_request(&c, &sink, &compacted);
		ktrace_request_end(req);
		us = (now_ns() - t0) / 1000;
		atomic_fetch_add_explicit(&served[c.kind], 1, memory_order_relaxed);
		if (compacted) {
			atomic_fetch_add_explicit(&planted, 1, memory_order_relaxed);
			atomic_max(&planted_max_us, us);
			atomic_min(&planted_min_us, us);
		} else {
			if (c.kind == K_PUT && us > threshold_us)
				atomic_fetch_add_explicit(&unplanted_slow, 1, memory_order_relaxed);
			if (atomic_max(&normal_max_us, us))
				atomic_store_explicit(&normal_max_kind, (int)c.kind,
				                      memory_order_relaxed);
		}
	}
	return (void *)(uintptr_t)sink;
}

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;

static uint32_t rng_next(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 32);
}

static void make_command(struct command *c)
{
	uint32_t r = rng_next() % 100, key = rng_next() % NKEYS;

	if (r < 60) {
		c->kind = K_GET;
		snprintf(c->line, sizeof(c->line), "get user:%05u", key);
	} else if (r < 90) {
		uint32_t len = 32 + rng_next() % (VALUE_MAX - 32);
		int n;
		c->kind = K_PUT;
		n = snprintf(c->line, sizeof(c->line), "put user:%05u ", key);
		fill_value(c->line + n, len, rng_next());
		c->line[n + (int)len] = 0;
	} else {
		c->kind = K_SCAN;
		snprintf(c->line, sizeof(c->line), "scan user:%05u %u", key, 8 + rng_next() % 57);
	}
}

/* Paced producer: rate requests per second in 1 ms batches, for
 * run_seconds, then one stop command per worker. */
static void *producer_main(void *arg)
{
	uint64_t total = (uint64_t)(rate * run_seconds), sent = 0;
	struct timespec next;
	struct command c;

	(void)arg;
	pthread_setname_np(pthread_self(), "producer");
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (uint64_t tick = 1; sent < total; tick++) {
		uint64_t due = tick * rate / 1000;
		for (; sent < due && sent < total; sent++) {
			make_command(&c);
			queue_push(&c);
		}
		next.tv_nsec += 1000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
		}
	}
	c.kind = K_STOP;
	c.line[0] = 0;
	for (int i = 0; i < NWORKERS; i++)
		queue_push(&c);
	return NULL;
}

static atomic_int maint_stop;

static void expire_slice(unsigned *cursor)
{
	int64_t cutoff = now_ms() - 60 * 1000; /* nothing is older in a 6 s run */

	for (unsigned s = 0; s < NBUCKETS / 64; s++, (*cursor)++) {
		uint32_t b = *cursor % NBUCKETS;
		pthread_mutex_t *mu = &stripes[b % NSTRIPES];
		pthread_mutex_lock(mu);
		for (struct entry *e = buckets[b]; e; e = e->next)
			if (e->len && e->touched_ms < cutoff) {
				e->len = 0;
				atomic_fetch_add_explicit(&expired, 1, memory_order_relaxed);
			}
		pthread_mutex_unlock(mu);
	}
}

static void publish_stats(unsigned long *last_total)
{
	unsigned long total = 0;

	for (int k = 0; k < 3; k++)
		total += atomic_load_explicit(&served[k], memory_order_relaxed);
	ktrace_mark("requests served", total - *last_total);
	*last_total = total;
}

/* Write the last segment out: a slow disk, 10 ms (the planted wait). */
static void persist_segment(void)
{
	struct timespec d = {0, 10 * 1000 * 1000};

	while (nanosleep(&d, &d) == EINTR) {
	}
}

static void *maintenance_main(void *arg)
{
	unsigned cursor = 0;
	unsigned long last_total = 0;
	struct timespec next;

	(void)arg;
	pthread_setname_np(pthread_self(), "maintenance");
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!atomic_load_explicit(&maint_stop, memory_order_relaxed)) {
		unsigned asked;

		/* Every 50 ms, or at once when a compaction waits. */
		next.tv_nsec += 50 * 1000 * 1000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&persist_mu);
		while (persist_done == persist_asked &&
		       pthread_cond_timedwait(&persist_cv, &persist_mu, &next) == 0) {
		}
		asked = persist_asked;
		pthread_mutex_unlock(&persist_mu);
		if (asked != persist_done) {
			persist_segment();
			pthread_mutex_lock(&persist_mu);
			persist_done = asked;
			pthread_cond_broadcast(&persist_cv);
			pthread_mutex_unlock(&persist_mu);
			continue;
		}
		expire_slice(&cursor);
		publish_stats(&last_total);
	}
	return NULL;
}

/* ---- main: run, then wait for the trigger snapshots ---------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* This process's snapshot files in dir, sorted by name (= time, then
 * sequence number).  Returns how many; *out is malloc'd. */
static int list_snapshots(const char *dir, char ***out)
{
	char prefix[64], **v = NULL;
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;

	*out = NULL;
	if (d == NULL)
		return 0;
	snprintf(prefix, sizeof(prefix), "ktrace-%d-", (int)getpid());
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		char **nv;
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 || len < 7 ||
		    strcmp(de->d_name + len - 7, ".ktrace") != 0)
			continue;
		nv = realloc(v, sizeof(*v) * (size_t)(n + 1));
		if (nv == NULL)
			break;
		v = nv;
		if (asprintf(&v[n], "%s/%s", dir, de->d_name) < 0)
			break;
		n++;
	}
	closedir(d);
	qsort(v, (size_t)n, sizeof(*v), cmp_str);
	*out = v;
	return n;
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--seconds S] [--rate REQ_PER_S] [--threshold-us US]\n",
	        argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	pthread_t workers[NWORKERS], producer, maint;
	const char *dir = getenv("KTRACE_DIR");
	unsigned long expect;
	char **files = NULL;
	int nfiles = 0, r;

	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--seconds") == 0)
			run_seconds = atof(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--rate") == 0)
			rate = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (i + 1 < argc && strcmp(argv[i], "--threshold-us") == 0)
			threshold_us = (unsigned)strtoul(argv[++i], NULL, 10);
		else
			usage(argv[0]);
	}
	if (run_seconds <= 0 || run_seconds > 3600 || rate == 0 || rate > 1000000 ||
	    threshold_us == 0)
		usage(argv[0]);
	if (dir == NULL || *dir == 0)
		dir = ".";
	pthread_setname_np(pthread_self(), "server-main");

	/* A put slower than threshold_us fires a snapshot; get and scan keep
	 * whatever KTRACE_TRIGGER_US / KTRACE_TRIGGER_PCT say (off by default). */
	r = ktrace_trigger_set("put", threshold_us, 0, 0);
	if (r != 0)
		fprintf(stderr, "server: ktrace_trigger_set: %s (tracing %s)\n",
		        ktrace_strerror(r), ktrace_enabled() ? "on" : "off");

	crc_init();
	pool = calloc(NKEYS, sizeof(*pool));
	if (pool == NULL) {
		fprintf(stderr, "server: out of memory\n");
		return 1;
	}
	for (int i = 0; i < NSTRIPES; i++)
		pthread_mutex_init(&stripes[i], NULL);
	load_store();

	printf("server: %d workers, %u requests/s for %.1f s, put trigger > %u us, "
	       "log compaction every %d puts\n",
	       NWORKERS, rate, run_seconds, threshold_us, LOG_CAPACITY);
	fflush(stdout);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&persist_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	pthread_create(&maint, NULL, maintenance_main, NULL);
	for (int i = 0; i < NWORKERS; i++)
		pthread_create(&workers[i], NULL, worker_main, (void *)(intptr_t)(i + 1));
	pthread_create(&producer, NULL, producer_main, NULL);

	pthread_join(producer, NULL);
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(workers[i], NULL);
	atomic_store_explicit(&maint_stop, 1, memory_order_relaxed);
	pthread_join(maint, NULL);

	/* Trigger snapshots are written in the background, after the post-
	 * trigger delay (KTRACE_TRIGGER_DELAY_MS, 200 ms by default): wait for
	 * one file per slow put (at most the rate limit's 6), up to 10 s, or 2 s
	 * once there is one (slow puts close together share a file). */
	expect = atomic_load(&planted) + atomic_load(&unplanted_slow);
	if (expect > 6)
		expect = 6;
	if (ktrace_enabled()) {
		for (int i = 0; i < 1000; i++) {
			for (int j = 0; j < nfiles; j++)
				free(files[j]);
			free(files);
			nfiles = list_snapshots(dir, &files);
			if ((unsigned long)nfiles >= expect || (nfiles > 0 && i >= 200))
				break;
			struct timespec d = {0, 10 * 1000 * 1000};
			nanosleep(&d, NULL);
		}
	}

	printf("server: requests get=%lu put=%lu scan=%lu\n", atomic_load(&served[K_GET]),
	       atomic_load(&served[K_PUT]), atomic_load(&served[K_SCAN]));
	printf("server: get_hits=%lu get_misses=%lu expired=%lu segments=%" PRIu64 "\n",
	       atomic_load(&get_hits), atomic_load(&get_misses), atomic_load(&expired),
	       segments_written);
	printf("server: planted=%lu cause=compact_log\n", atomic_load(&planted));
	if (atomic_load(&planted))
		printf("server: planted_us min=%lu max=%lu\n", atomic_load(&planted_min_us),
		       atomic_load(&planted_max_us));
	printf("server: other_requests_max_us=%lu (%s)\n", atomic_load(&normal_max_us),
	       kind_name[atomic_load(&normal_max_kind)]);
	printf("server: unplanted_slow_puts=%lu\n", atomic_load(&unplanted_slow));
	for (int j = 0; j < nfiles; j++) {
		printf("server: snapshot=%s\n", files[j]);
		free(files[j]);
	}
	free(files);
	free(pool);
	return 0;
}
