/*
 * callheavy.c - a call-heavy program of ordinary shape, for whole-program
 * overhead: generate a JSON-like document, tokenize and parse it by
 * recursive descent into a tree, intern every key in a hash table, collect
 * the numbers and merge-sort them through a comparator, then walk the tree.
 * Small functions everywhere, as in real parsers and containers (tens of
 * millions of calls per second uninstrumented).
 *
 * Built like hotpath.c: bench_callheavy_{none,empty,floor,ktrace}.
 * Usage: bench_callheavy_<variant> [iterations]
 * Prints: variant=.. iters=N seconds=.. checksum=..  (checksum must agree
 * between variants).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#ifndef BENCH_VARIANT
#define BENCH_VARIANT "unknown"
#endif

/* ---- document generator ------------------------------------------------ */

struct buf {
	char *p;
	size_t len, cap;
};

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint32_t rng_next(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

static uint32_t rng_below(uint32_t n)
{
	return rng_next() % n;
}

static void buf_grow(struct buf *b, size_t need)
{
	while (b->len + need > b->cap) {
		b->cap = b->cap ? b->cap * 2 : 4096;
		b->p = realloc(b->p, b->cap);
		if (b->p == NULL)
			exit(3);
	}
}

static void buf_putc(struct buf *b, char c)
{
	buf_grow(b, 1);
	b->p[b->len++] = c;
}

static void buf_puts(struct buf *b, const char *s)
{
	size_t n = strlen(s);
	buf_grow(b, n);
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static const char *const key_words[] = {
	"id", "name", "value", "items", "count", "price", "tags", "owner",
	"created", "updated", "parent", "children", "weight", "score", "kind",
	"x", "y", "z", "width", "height", "enabled", "limit", "offset", "total",
};
#define NKEYS (sizeof(key_words) / sizeof(key_words[0]))

static void gen_value(struct buf *b, int depth);

static void gen_number(struct buf *b)
{
	char tmp[32];
	snprintf(tmp, sizeof(tmp), "%u", rng_below(1000000));
	buf_puts(b, tmp);
}

static void gen_string(struct buf *b)
{
	buf_putc(b, '"');
	buf_puts(b, key_words[rng_below(NKEYS)]);
	buf_putc(b, '_');
	buf_putc(b, (char)('a' + rng_below(26)));
	buf_putc(b, '"');
}

static void gen_object(struct buf *b, int depth)
{
	uint32_t n = 2 + rng_below(6);
	buf_putc(b, '{');
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			buf_putc(b, ',');
		buf_putc(b, '"');
		buf_puts(b, key_words[rng_below(NKEYS)]);
		buf_puts(b, "\": ");
		gen_value(b, depth + 1);
	}
	buf_putc(b, '}');
}

static void gen_array(struct buf *b, int depth)
{
	uint32_t n = 1 + rng_below(8);
	buf_putc(b, '[');
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			buf_puts(b, ", ");
		gen_value(b, depth + 1);
	}
	buf_putc(b, ']');
}

static void gen_value(struct buf *b, int depth)
{
	uint32_t r = rng_below(10);
	if (depth < 5 && r < 3)
		gen_object(b, depth);
	else if (depth < 5 && r < 5)
		gen_array(b, depth);
	else if (r < 8)
		gen_number(b);
	else
		gen_string(b);
}

/* ---- tokenizer ----------------------------------------------------------- */

enum tok { T_EOF, T_LBRACE, T_RBRACE, T_LBRACK, T_RBRACK, T_COLON, T_COMMA,
           T_STRING, T_NUMBER, T_ERROR };

struct lexer {
	const char *s;
	size_t pos, len;
	enum tok tok;
	size_t tstart, tlen; /* token text */
	uint64_t num;
};

/* Per-character tests are macros, as in most hand-written lexers: the
 * calls in this program are per token, per node and per comparison. */
#define is_space(c) ((c) == ' ' || (c) == '\n' || (c) == '\t' || (c) == '\r')
#define is_digit(c) ((c) >= '0' && (c) <= '9')
#define peek(lx) ((lx)->pos < (lx)->len ? (lx)->s[(lx)->pos] : '\0')

static void skip_ws(struct lexer *lx)
{
	while (is_space(peek(lx)))
		lx->pos++;
}

static void lex_number(struct lexer *lx)
{
	uint64_t v = 0;
	lx->tstart = lx->pos;
	while (is_digit(peek(lx))) {
		v = v * 10 + (uint64_t)(peek(lx) - '0');
		lx->pos++;
	}
	lx->num = v;
	lx->tlen = lx->pos - lx->tstart;
	lx->tok = T_NUMBER;
}

static void lex_string(struct lexer *lx)
{
	lx->pos++; /* opening quote */
	lx->tstart = lx->pos;
	while (peek(lx) != '"' && peek(lx) != '\0')
		lx->pos++;
	lx->tlen = lx->pos - lx->tstart;
	if (peek(lx) == '"') {
		lx->pos++;
		lx->tok = T_STRING;
	} else {
		lx->tok = T_ERROR;
	}
}

static void next_token(struct lexer *lx)
{
	char c;
	skip_ws(lx);
	c = peek(lx);
	switch (c) {
	case '\0': lx->tok = T_EOF; return;
	case '{': lx->tok = T_LBRACE; break;
	case '}': lx->tok = T_RBRACE; break;
	case '[': lx->tok = T_LBRACK; break;
	case ']': lx->tok = T_RBRACK; break;
	case ':': lx->tok = T_COLON; break;
	case ',': lx->tok = T_COMMA; break;
	case '"': lex_string(lx); return;
	default:
		if (is_digit(c)) {
			lex_number(lx);
			return;
		}
		lx->tok = T_ERROR;
		return;
	}
	lx->pos++;
}

/* ---- tree and hash table ------------------------------------------------- */

enum ntype { N_OBJECT, N_ARRAY, N_NUMBER, N_STRING };

struct node {
	enum ntype type;
	uint32_t key;          /* interned key id (object members), 0 = none */
	uint64_t num;          /* N_NUMBER value, N_STRING hash */
	struct node *child;    /* first child */
	struct node *next;     /* next sibling */
};

struct arena {
	struct node *nodes;
	size_t used, cap;
};

/* The arena is sized before parsing (a node takes at least one byte of
 * text), so nodes never move while the parser holds pointers to them. */
static struct node *new_node(struct arena *a, enum ntype t)
{
	struct node *n;
	if (a->used == a->cap)
		exit(3);
	n = &a->nodes[a->used++];
	memset(n, 0, sizeof(*n));
	n->type = t;
	return n;
}

#define HT_SIZE 1024u
struct ht_entry {
	const char *key;
	size_t len;
	uint32_t id;
	uint32_t hits;
};
struct htab {
	struct ht_entry e[HT_SIZE];
	uint32_t nids;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int key_eq(const struct ht_entry *e, const char *s, size_t n)
{
	return e->len == n && memcmp(e->key, s, n) == 0;
}

static uint32_t ht_intern(struct htab *t, const char *s, size_t n)
{
	uint32_t i = (uint32_t)hash_bytes(s, n) & (HT_SIZE - 1);
	for (;;) {
		struct ht_entry *e = &t->e[i];
		if (e->key == NULL) {
			e->key = s;
			e->len = n;
			e->id = ++t->nids;
			e->hits = 1;
			return e->id;
		}
		if (key_eq(e, s, n)) {
			e->hits++;
			return e->id;
		}
		i = (i + 1) & (HT_SIZE - 1);
	}
}

/* ---- parser -------------------------------------------------------------- */

struct parser {
	struct lexer lx;
	struct arena *arena;
	struct htab *ht;
	int err;
};

static struct node *parse_value(struct parser *p);

static int expect(struct parser *p, enum tok t)
{
	if (p->lx.tok != t) {
		p->err = 1;
		return 0;
	}
	next_token(&p->lx);
	return 1;
}

static void append_child(struct node *parent, struct node **tail, struct node *c)
{
	if (*tail)
		(*tail)->next = c;
	else
		parent->child = c;
	*tail = c;
}

static struct node *parse_object(struct parser *p)
{
	struct node *o = new_node(p->arena, N_OBJECT), *tail = NULL;

	next_token(&p->lx);
	while (p->lx.tok == T_STRING && !p->err) {
		uint32_t key = ht_intern(p->ht, p->lx.s + p->lx.tstart, p->lx.tlen);
		struct node *v;
		next_token(&p->lx);
		if (!expect(p, T_COLON))
			break;
		v = parse_value(p);
		if (v == NULL)
			break;
		v->key = key;
		append_child(o, &tail, v);
		if (p->lx.tok != T_COMMA)
			break;
		next_token(&p->lx);
	}
	expect(p, T_RBRACE);
	return o;
}

static struct node *parse_array(struct parser *p)
{
	struct node *a = new_node(p->arena, N_ARRAY), *tail = NULL;

	next_token(&p->lx);
	while (p->lx.tok != T_RBRACK && !p->err) {
		struct node *v = parse_value(p);
		if (v == NULL)
			break;
		append_child(a, &tail, v);
		if (p->lx.tok != T_COMMA)
			break;
		next_token(&p->lx);
	}
	expect(p, T_RBRACK);
	return a;
}

static struct node *parse_value(struct parser *p)
{
	struct node *n;
	switch (p->lx.tok) {
	case T_LBRACE:
		return parse_object(p);
	case T_LBRACK:
		return parse_array(p);
	case T_NUMBER:
		n = new_node(p->arena, N_NUMBER);
		n->num = p->lx.num;
		next_token(&p->lx);
		return n;
	case T_STRING:
		n = new_node(p->arena, N_STRING);
		n->num = hash_bytes(p->lx.s + p->lx.tstart, p->lx.tlen);
		next_token(&p->lx);
		return n;
	default:
		p->err = 1;
		return NULL;
	}
}

/* ---- sort and walk ------------------------------------------------------- */

static int cmp_u64(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

static void merge(uint64_t *v, uint64_t *tmp, size_t lo, size_t mid, size_t hi,
                  int (*cmp)(uint64_t, uint64_t))
{
	size_t i = lo, j = mid, k = lo;
	while (i < mid && j < hi)
		tmp[k++] = cmp(v[i], v[j]) <= 0 ? v[i++] : v[j++];
	while (i < mid)
		tmp[k++] = v[i++];
	while (j < hi)
		tmp[k++] = v[j++];
	memcpy(v + lo, tmp + lo, (hi - lo) * sizeof(*v));
}

static void merge_sort(uint64_t *v, uint64_t *tmp, size_t lo, size_t hi,
                       int (*cmp)(uint64_t, uint64_t))
{
	size_t mid;
	if (hi - lo < 2)
		return;
	mid = lo + (hi - lo) / 2;
	merge_sort(v, tmp, lo, mid, cmp);
	merge_sort(v, tmp, mid, hi, cmp);
	merge(v, tmp, lo, mid, hi, cmp);
}

struct collect {
	uint64_t *v;
	size_t n, cap;
};

static void collect_push(struct collect *c, uint64_t x)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 1024;
		c->v = realloc(c->v, c->cap * sizeof(*c->v));
		if (c->v == NULL)
			exit(3);
	}
	c->v[c->n++] = x;
}

static uint64_t visit(const struct node *n, struct collect *c, int depth)
{
	uint64_t h = (uint64_t)n->type * 31 + n->key + (uint64_t)depth;
	if (n->type == N_NUMBER)
		collect_push(c, n->num);
	else if (n->type == N_STRING)
		h ^= n->num;
	return h;
}

static uint64_t walk(const struct node *n, struct collect *c, int depth)
{
	uint64_t h = visit(n, c, depth);
	for (const struct node *k = n->child; k; k = k->next)
		h = h * 1000003u ^ walk(k, c, depth + 1);
	return h;
}

/* ---- driver -------------------------------------------------------------- */

static uint64_t one_pass(const char *doc, size_t len, struct arena *ar, struct htab *ht,
                         struct collect *col, uint64_t **tmp, size_t *tmpcap)
{
	struct parser p;
	struct node *root;
	uint64_t h, s = 0;

	memset(&p, 0, sizeof(p));
	p.lx.s = doc;
	p.lx.len = len;
	p.arena = ar;
	p.ht = ht;
	ar->used = 0;
	col->n = 0;
	next_token(&p.lx);
	root = parse_value(&p);
	if (root == NULL || p.err)
		return 0;
	h = walk(root, col, 0);
	if (*tmpcap < col->n) {
		*tmpcap = col->n;
		*tmp = realloc(*tmp, col->n * sizeof(uint64_t));
		if (*tmp == NULL)
			exit(3);
	}
	merge_sort(col->v, *tmp, 0, col->n, cmp_u64);
	for (size_t i = 0; i < col->n; i += 97)
		s += col->v[i];
	return h ^ s ^ col->n;
}

BENCH_NOINSTR int main(int argc, char **argv)
{
	uint64_t iters = bench_arg(argc, argv, 1, 40);
	struct buf doc = {0};
	struct arena ar = {0};
	struct collect col = {0};
	static struct htab ht;
	uint64_t *tmp = NULL, sum = 0, t0, t1;
	size_t tmpcap = 0;

	/* About 1 MB of document (generation is traced too, but untimed). */
	buf_putc(&doc, '[');
	for (int i = 0; doc.len < (1u << 20); i++) {
		if (i)
			buf_puts(&doc, ",\n");
		gen_object(&doc, 0);
	}
	buf_putc(&doc, ']');
	buf_putc(&doc, '\0');
	doc.len--;
	ar.cap = doc.len + 16;
	ar.nodes = malloc(ar.cap * sizeof(*ar.nodes));
	if (ar.nodes == NULL)
		return 3;

	t0 = bench_now_ns();
	for (uint64_t i = 0; i < iters; i++)
		sum = sum * 31 + one_pass(doc.p, doc.len, &ar, &ht, &col, &tmp, &tmpcap);
	t1 = bench_now_ns();
	printf("variant=%s iters=%llu seconds=%.4f checksum=%016llx nodes=%zu numbers=%zu\n",
	       BENCH_VARIANT, (unsigned long long)iters, (double)(t1 - t0) / 1e9,
	       (unsigned long long)sum, ar.used, col.n);
	free(doc.p);
	free(ar.nodes);
	free(col.v);
	free(tmp);
	return 0;
}
