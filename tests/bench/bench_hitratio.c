/*
 * bench_hitratio.c - miss ratios of the real engine on recorded traces.
 *
 * Usage: bench_hitratio [-8] [-f FORMAT] [-p POLICIES] [-s STRIPES]
 *                       [-z PCTS] TRACE...
 *   -8           keys are big-endian 64-bit (default: 32-bit); -f be64
 *   -f FORMAT    be32 (default, the shipped format), be64, text (one
 *                decimal key per line; other lines, such as the "*" marks
 *                of the LIRS traces, are skipped), arc (the ARC paper's
 *                traces: "START COUNT ..." per line, the keys START to
 *                START+COUNT-1)
 *   -p LIST      policies, comma separated: default,lru,s3fifo,tinylfu
 *                (default: all four; "default" is what regions.ini gives a
 *                region that does not set strategy)
 *   -s LIST      stripe counts, comma separated (default: the built-in
 *                regions.ini default, i.e. what a region really gets; the
 *                engine may use fewer, see region_stats().nstripes)
 *   -z LIST      cache sizes in % of the distinct keys (default
 *                0.1,1,3,10,30)
 *   -S SEED      fix the engine's hash seed (default: random per run, as
 *                in a real process; the cells then move by about +-0.001
 *                between runs): same seed, same figures, for comparing
 *                two builds
 * With no TRACE, the traces in /work/shared/traces.
 *
 * A trace is read through "gzip -dc" if its name ends in .gz, else
 * through "xz -dcf" (xz files, or plain files as they are). Each request
 * goes through the real API: region_get(), and
 * region_flight_done() with a trivial value on a miss, on one region bounded
 * by entry count only (like the published figures). Next to it, in the same
 * run, an exact textbook LRU written here (one list, one table) gives the
 * lru_ figures, and a textbook ARC (Megiddo & Modha, FAST 2003) and LIRS
 * (Jiang & Zhang, SIGMETRICS 2002), written here from the papers, give
 * the arc_ and lirs_ reference figures (one cache, no stripes: the
 * frontier the default is compared with; LIRS needs 3 entries or more). Miss ratios count cold misses. Prints a table, then
 * name=value lines:
 *   miss_<trace>_<pct>pct      the default policy, default stripes
 *   lru_<trace>_<pct>pct       exact LRU
 *   arc_<trace>_<pct>pct, lirs_<trace>_<pct>pct   ARC, LIRS
 *   <policy>_s<N>_<trace>_<pct>pct   every policy and stripe count run
 * and, for tinylfu, the adapted window share at the end of each replay
 * and the sketch resets; any hits the policy did not record (stats
 * hits_unrecorded; none expected in this one-thread replay) are reported.
 * Asserts nothing.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "region.h"
#include "region_int.h" /* region__hash_seed, for -S */
#include "testlib.h"

#define DEFAULT_DIR "/work/shared/traces"
#define MAX_SIZES   16
#define MAX_RUNS    16

struct trace {
	const char *path;
	char name[128];
	uint64_t *keys;
	size_t n;
	size_t distinct;
};

/* Published miss ratios (traces/README.md; cold misses counted). */
static const struct {
	const char *trace;
	const char *policy;
	double pct[3];
	double ratio[3];
} refs[] = {
	{"orm_busy", "LRU", {1, 10, 30}, {0.2297, 0.1199, 0.0565}},
	{"orm_busy", "ARC", {1, 10, 30}, {0.2325, 0.1196, 0.0565}},
	{"orm_busy", "S3-FIFO", {1, 10, 30}, {0.2436, 0.1111, 0.0518}},
	{"orm_busy", "W-TinyLFU", {1, 10, 30}, {0.2881, 0.1039, 0.0472}},
	{"orm_busy", "optimal", {1, 10, 30}, {0.1718, 0.0669, 0.0295}},
};

struct run {
	char policy[16]; /* name as given (-p) */
	bool dflt;
	enum region_strategy strategy;
	unsigned nstripes;
};

enum trace_format { FMT_BE32, FMT_BE64, FMT_TEXT, FMT_ARC };

/* Runs "gzip -dc 'path'" or "xz -dcf 'path'" with the path quoted for the
 * shell. */
static FILE *open_xz(const char *path)
{
	size_t len = strlen(path), i, o = 0;
	char *cmd = malloc(len * 4 + 32);
	bool gz = len > 3 && strcmp(path + len - 3, ".gz") == 0;
	FILE *f;

	if (!cmd)
		return NULL;
	o += (size_t)sprintf(cmd, gz ? "gzip -dc '" : "xz -dcf '");
	for (i = 0; i < len; i++) {
		if (path[i] == '\'') {
			memcpy(cmd + o, "'\\''", 4);
			o += 4;
		} else {
			cmd[o++] = path[i];
		}
	}
	strcpy(cmd + o, "'");
	f = popen(cmd, "r");
	free(cmd);
	return f;
}

/* Appends k to t->keys (capacity *cap); false when out of memory. */
static bool add_key(struct trace *t, size_t *cap, uint64_t k)
{
	uint64_t *more;

	if (t->n == *cap) {
		*cap = *cap ? *cap * 2 : (size_t)1 << 20;
		more = realloc(t->keys, *cap * sizeof(*t->keys));
		if (!more)
			return false;
		t->keys = more;
	}
	t->keys[t->n++] = k;
	return true;
}

/* Reads one line of a text trace into t (see -f): false on no memory. */
static bool add_line(struct trace *t, size_t *cap, const char *line,
		     enum trace_format fmt)
{
	unsigned long long start, count, j;
	char *end;

	errno = 0;
	start = strtoull(line, &end, 10);
	if (end == line || errno)
		return true; /* not a key: "*", blank, a comment */
	if (fmt == FMT_TEXT)
		return add_key(t, cap, start);
	count = strtoull(end, NULL, 10);
	for (j = 0; j < count; j++)
		if (!add_key(t, cap, start + j))
			return false;
	return true;
}

static int read_trace(struct trace *t, enum trace_format fmt)
{
	unsigned width = fmt == FMT_BE32 ? 4 : 8;
	size_t cap = 0;
	unsigned char buf[8];
	char line[256];
	FILE *f = open_xz(t->path);
	bool ok = true;
	unsigned i;

	if (!f)
		return -errno;
	t->keys = NULL;
	t->n = 0;
	if (fmt == FMT_TEXT || fmt == FMT_ARC) {
		while (ok && fgets(line, sizeof(line), f))
			ok = add_line(t, &cap, line, fmt);
	} else {
		while (ok && fread(buf, width, 1, f) == 1) {
			uint64_t k = 0;

			for (i = 0; i < width; i++)
				k = k << 8 | buf[i];
			ok = add_key(t, &cap, k);
		}
	}
	if (pclose(f) != 0 || !ok || t->n == 0)
		return -EIO;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static size_t count_distinct(const struct trace *t)
{
	uint64_t *s = malloc(t->n * sizeof(*s));
	size_t i, d = 0;

	if (!s)
		return 0;
	memcpy(s, t->keys, t->n * sizeof(*s));
	qsort(s, t->n, sizeof(*s), cmp_u64);
	for (i = 0; i < t->n; i++)
		d += i == 0 || s[i] != s[i - 1];
	free(s);
	return d;
}

/* ---- exact LRU: open-addressed table + index-linked list --------------- */

struct xlru {
	uint64_t *key;	       /* per slot */
	uint32_t *prev, *next; /* per slot; list through slot indices */
	uint32_t *table;       /* open addressing: slot + 1, 0 = empty */
	size_t tmask, cap, n;
	uint32_t head, tail; /* most / least recent; UINT32_MAX = none */
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static void xlru_probe(const struct xlru *c, uint64_t k, size_t *pos)
{
	size_t i = mix(k) & c->tmask;

	while (c->table[i] && c->key[c->table[i] - 1] != k)
		i = (i + 1) & c->tmask;
	*pos = i;
}

static void xlru_unlink(struct xlru *c, uint32_t s)
{
	if (c->prev[s] != UINT32_MAX)
		c->next[c->prev[s]] = c->next[s];
	else
		c->head = c->next[s];
	if (c->next[s] != UINT32_MAX)
		c->prev[c->next[s]] = c->prev[s];
	else
		c->tail = c->prev[s];
}

static void xlru_push(struct xlru *c, uint32_t s)
{
	c->prev[s] = UINT32_MAX;
	c->next[s] = c->head;
	if (c->head != UINT32_MAX)
		c->prev[c->head] = s;
	c->head = s;
	if (c->tail == UINT32_MAX)
		c->tail = s;
}

/* Deletes table position i (backward-shift deletion). */
static void xlru_table_del(struct xlru *c, size_t i)
{
	size_t j = i, k;

	c->table[i] = 0;
	for (;;) {
		j = (j + 1) & c->tmask;
		if (!c->table[j])
			return;
		k = mix(c->key[c->table[j] - 1]) & c->tmask;
		if ((j > i && (k <= i || k > j)) ||
		    (j < i && k <= i && k > j)) {
			c->table[i] = c->table[j];
			c->table[j] = 0;
			i = j;
		}
	}
}

static double exact_lru(const struct trace *t, size_t cap)
{
	struct xlru c = {.cap = cap, .head = UINT32_MAX, .tail = UINT32_MAX};
	size_t tsize = 16, i, pos, misses = 0;

	while (tsize < cap * 2)
		tsize *= 2;
	c.tmask = tsize - 1;
	c.key = malloc(cap * sizeof(*c.key));
	c.prev = malloc(cap * sizeof(*c.prev));
	c.next = malloc(cap * sizeof(*c.next));
	c.table = calloc(tsize, sizeof(*c.table));
	if (!c.key || !c.prev || !c.next || !c.table || cap == 0) {
		free(c.key), free(c.prev), free(c.next), free(c.table);
		return -1;
	}
	for (i = 0; i < t->n; i++) {
		uint64_t k = t->keys[i];
		uint32_t s;

		xlru_probe(&c, k, &pos);
		if (c.table[pos]) {
			s = c.table[pos] - 1;
			xlru_unlink(&c, s);
			xlru_push(&c, s);
			continue;
		}
		misses++;
		if (c.n < c.cap) {
			s = (uint32_t)c.n++;
		} else {
			size_t vp;

			s = c.tail;
			xlru_unlink(&c, s);
			xlru_probe(&c, c.key[s], &vp);
			xlru_table_del(&c, vp);
			xlru_probe(&c, k, &pos);
		}
		c.key[s] = k;
		c.table[pos] = s + 1;
		xlru_push(&c, s);
	}
	free(c.key), free(c.prev), free(c.next), free(c.table);
	return (double)misses / (double)t->n;
}

/* ---- reference policies: textbook ARC and LIRS ------------------------- */

/*
 * A pool of key slots in several doubly-linked lists (each slot in at most
 * two: link set 0 and link set 1), found through an open-addressed table
 * like xlru's. Written here from the papers' descriptions, for reference
 * columns only (no engine code).
 */
#define NIL UINT32_MAX

struct dl {
	uint32_t head, tail; /* head = most recent */
	size_t n;
};

struct pool {
	uint64_t *key;
	uint32_t *prev[2], *next[2];
	uint8_t *tag; /* which list (policy-defined) */
	uint32_t *table;
	uint32_t free_head;
	size_t tmask;
};

static bool pool_init(struct pool *p, size_t slots)
{
	size_t tsize = 16, i;

	while (tsize < slots * 2)
		tsize *= 2;
	p->tmask = tsize - 1;
	p->key = malloc(slots * sizeof(*p->key));
	p->tag = calloc(slots, 1);
	p->table = calloc(tsize, sizeof(*p->table));
	for (i = 0; i < 2; i++) {
		p->prev[i] = malloc(slots * sizeof(uint32_t));
		p->next[i] = malloc(slots * sizeof(uint32_t));
	}
	if (!p->key || !p->tag || !p->table || !p->prev[0] || !p->prev[1] ||
	    !p->next[0] || !p->next[1])
		return false;
	for (i = 0; i < slots; i++)
		p->next[0][i] = i + 1 < slots ? (uint32_t)(i + 1) : NIL;
	p->free_head = 0;
	return true;
}

static void pool_free(struct pool *p)
{
	free(p->key), free(p->tag), free(p->table);
	free(p->prev[0]), free(p->prev[1]), free(p->next[0]), free(p->next[1]);
}

static size_t pool_probe(const struct pool *p, uint64_t k)
{
	size_t i = mix(k) & p->tmask;

	while (p->table[i] && p->key[p->table[i] - 1] != k)
		i = (i + 1) & p->tmask;
	return i;
}

static uint32_t pool_find(const struct pool *p, uint64_t k)
{
	size_t i = pool_probe(p, k);

	return p->table[i] ? p->table[i] - 1 : NIL;
}

static uint32_t pool_add(struct pool *p, uint64_t k)
{
	uint32_t s = p->free_head;

	assert(s != NIL);
	p->free_head = p->next[0][s];
	p->key[s] = k;
	p->table[pool_probe(p, k)] = s + 1;
	return s;
}

/* Forgets slot s (unlinked from every list by the caller). */
static void pool_del(struct pool *p, uint32_t s)
{
	size_t i = pool_probe(p, p->key[s]), j = i, h;

	p->table[i] = 0;
	for (;;) {
		j = (j + 1) & p->tmask;
		if (!p->table[j])
			break;
		h = mix(p->key[p->table[j] - 1]) & p->tmask;
		if ((j > i && (h <= i || h > j)) ||
		    (j < i && h <= i && h > j)) {
			p->table[i] = p->table[j];
			p->table[j] = 0;
			i = j;
		}
	}
	p->next[0][s] = p->free_head;
	p->free_head = s;
}

static void dl_unlink(struct pool *p, unsigned ls, struct dl *l, uint32_t s)
{
	uint32_t *pv = p->prev[ls], *nx = p->next[ls];

	if (pv[s] != NIL)
		nx[pv[s]] = nx[s];
	else
		l->head = nx[s];
	if (nx[s] != NIL)
		pv[nx[s]] = pv[s];
	else
		l->tail = pv[s];
	l->n--;
}

static void dl_push(struct pool *p, unsigned ls, struct dl *l, uint32_t s)
{
	p->prev[ls][s] = NIL;
	p->next[ls][s] = l->head;
	if (l->head != NIL)
		p->prev[ls][l->head] = s;
	l->head = s;
	if (l->tail == NIL)
		l->tail = s;
	l->n++;
}

#define DL_EMPTY                                                               \
	{                                                                      \
		NIL, NIL, 0                                                    \
	}

/*
 * ARC (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead Replacement
 * Cache", FAST 2003, fig. 4): T1/T2 resident, B1/B2 their ghosts, target p
 * for T1 adapted on ghost hits. Cold misses counted.
 */
enum { ARC_T1, ARC_T2, ARC_B1, ARC_B2 };

static void arc_replace(struct pool *p, struct dl *L, double target, bool in_b2)
{
	uint32_t s;

	if (L[ARC_T1].n >= 1 && ((in_b2 && (double)L[ARC_T1].n == target) ||
				 (double)L[ARC_T1].n > target)) {
		s = L[ARC_T1].tail;
		dl_unlink(p, 0, &L[ARC_T1], s);
		p->tag[s] = ARC_B1;
		dl_push(p, 0, &L[ARC_B1], s);
	} else {
		s = L[ARC_T2].tail;
		dl_unlink(p, 0, &L[ARC_T2], s);
		p->tag[s] = ARC_B2;
		dl_push(p, 0, &L[ARC_B2], s);
	}
}

static double ref_arc(const struct trace *t, size_t c)
{
	struct pool p;
	struct dl L[4] = {DL_EMPTY, DL_EMPTY, DL_EMPTY, DL_EMPTY};
	double target = 0;
	size_t i, misses = 0;

	if (!pool_init(&p, 2 * c + 1)) {
		pool_free(&p);
		return -1;
	}
	for (i = 0; i < t->n; i++) {
		uint64_t k = t->keys[i];
		uint32_t s = pool_find(&p, k);

		if (s != NIL && (p.tag[s] == ARC_T1 || p.tag[s] == ARC_T2)) {
			dl_unlink(&p, 0, &L[p.tag[s]], s);
			p.tag[s] = ARC_T2;
			dl_push(&p, 0, &L[ARC_T2], s);
			continue;
		}
		misses++;
		if (s != NIL) {
			bool b2 = p.tag[s] == ARC_B2;
			double b1n = (double)L[ARC_B1].n,
			       b2n = (double)L[ARC_B2].n;

			if (!b2) {
				double d = b2n / b1n > 1 ? b2n / b1n : 1;

				target = target + d < (double)c ? target + d
								: (double)c;
			} else {
				double d = b1n / b2n > 1 ? b1n / b2n : 1;

				target = target - d > 0 ? target - d : 0;
			}
			arc_replace(&p, L, target, b2);
			dl_unlink(&p, 0, &L[p.tag[s]], s);
			p.tag[s] = ARC_T2;
			dl_push(&p, 0, &L[ARC_T2], s);
			continue;
		}
		if (L[ARC_T1].n + L[ARC_B1].n == c) {
			if (L[ARC_T1].n < c) {
				uint32_t g = L[ARC_B1].tail;

				dl_unlink(&p, 0, &L[ARC_B1], g);
				pool_del(&p, g);
				arc_replace(&p, L, target, false);
			} else {
				uint32_t g = L[ARC_T1].tail;

				dl_unlink(&p, 0, &L[ARC_T1], g);
				pool_del(&p, g);
			}
		} else {
			size_t tot = L[0].n + L[1].n + L[2].n + L[3].n;

			if (tot >= c) {
				if (tot == 2 * c) {
					uint32_t g = L[ARC_B2].tail;

					dl_unlink(&p, 0, &L[ARC_B2], g);
					pool_del(&p, g);
				}
				if (L[ARC_T1].n + L[ARC_T2].n >= c)
					arc_replace(&p, L, target, false);
			}
		}
		s = pool_add(&p, k);
		p.tag[s] = ARC_T1;
		dl_push(&p, 0, &L[ARC_T1], s);
	}
	pool_free(&p);
	return (double)misses / (double)t->n;
}

/*
 * LIRS (Jiang & Zhang, "LIRS: An Efficient Low Inter-reference Recency Set
 * Replacement Policy", SIGMETRICS 2002): stack S (link set 0) of LIR,
 * resident HIR and non-resident HIR blocks, pruned so its bottom is LIR;
 * queue Q (link set 1) of resident HIR blocks, 1 % of the cache (at least
 * 1). Non-resident HIR blocks are kept in S up to 2 x c of them (oldest
 * forgotten first; link set 1 is their FIFO), a bound the paper leaves
 * open. Needs c >= 3 (else returns -1).
 */
enum { LIRS_LIR, LIRS_HIR, LIRS_NR };

#define LIRS_IN_S 4 /* tag bit: the block is in S */

static void lirs_prune(struct pool *p, struct dl *S, struct dl *NR)
{
	while (S->tail != NIL && (p->tag[S->tail] & 3) != LIRS_LIR) {
		uint32_t b = S->tail;

		dl_unlink(p, 0, S, b);
		p->tag[b] &= (uint8_t)~LIRS_IN_S;
		if ((p->tag[b] & 3) == LIRS_NR) {
			dl_unlink(p, 1, NR, b);
			pool_del(p, b);
		}
	}
}

/* The bottom LIR block of S becomes resident HIR at Q's end. */
static void lirs_demote_bottom(struct pool *p, struct dl *S, struct dl *Q,
			       struct dl *NR)
{
	uint32_t b = S->tail;

	dl_unlink(p, 0, S, b);
	p->tag[b] = LIRS_HIR; /* not in S */
	dl_push(p, 1, Q, b);
	lirs_prune(p, S, NR);
}

static double ref_lirs(const struct trace *t, size_t c)
{
	size_t lhirs = c / 100 ? c / 100 : 1, llirs = c - lhirs, nlir = 0;
	struct dl S = DL_EMPTY, Q = DL_EMPTY, NR = DL_EMPTY;
	struct pool p;
	size_t i, misses = 0;

	if (c < 3)
		return -1;
	if (!pool_init(&p, 3 * c + 2)) {
		pool_free(&p);
		return -1;
	}
	for (i = 0; i < t->n; i++) {
		uint64_t k = t->keys[i];
		uint32_t b = pool_find(&p, k);
		unsigned st = b != NIL ? p.tag[b] & 3 : LIRS_NR;
		bool in_s = b != NIL && (p.tag[b] & LIRS_IN_S);

		if (b != NIL && st == LIRS_LIR) {
			bool bottom = S.tail == b;

			dl_unlink(&p, 0, &S, b);
			dl_push(&p, 0, &S, b);
			if (bottom)
				lirs_prune(&p, &S, &NR);
			continue;
		}
		if (b != NIL && st == LIRS_HIR) {
			if (in_s) {
				dl_unlink(&p, 0, &S, b);
				dl_unlink(&p, 1, &Q, b);
				p.tag[b] = LIRS_LIR | LIRS_IN_S;
				dl_push(&p, 0, &S, b);
				lirs_demote_bottom(&p, &S, &Q, &NR);
			} else {
				dl_push(&p, 0, &S, b);
				p.tag[b] |= LIRS_IN_S;
				dl_unlink(&p, 1, &Q, b);
				dl_push(&p, 1, &Q, b);
			}
			continue;
		}
		misses++;
		if (nlir < llirs) { /* warming up: a new block is LIR */
			if (b == NIL)
				b = pool_add(&p, k);
			else {
				if (in_s)
					dl_unlink(&p, 0, &S, b);
				dl_unlink(&p, 1, &NR, b);
			}
			p.tag[b] = LIRS_LIR | LIRS_IN_S;
			dl_push(&p, 0, &S, b);
			nlir++;
			continue;
		}
		if (Q.n >= lhirs) { /* evict Q's front resident HIR block */
			uint32_t v = Q.tail;

			dl_unlink(&p, 1, &Q, v);
			if (p.tag[v] & LIRS_IN_S) {
				p.tag[v] = LIRS_NR | LIRS_IN_S;
				dl_push(&p, 1, &NR, v);
				if (NR.n > 2 * c) {
					uint32_t o = NR.tail;

					dl_unlink(&p, 1, &NR, o);
					dl_unlink(&p, 0, &S, o);
					pool_del(&p, o);
				}
			} else {
				pool_del(&p, v);
			}
			/* the oldest NR may have been b itself */
			b = pool_find(&p, k);
			in_s = b != NIL && (p.tag[b] & LIRS_IN_S);
		}
		if (b != NIL && in_s) { /* non-resident HIR in S: becomes LIR */
			dl_unlink(&p, 0, &S, b);
			dl_unlink(&p, 1, &NR, b);
			p.tag[b] = LIRS_LIR | LIRS_IN_S;
			dl_push(&p, 0, &S, b);
			lirs_demote_bottom(&p, &S, &Q, &NR);
		} else {
			if (b == NIL)
				b = pool_add(&p, k);
			p.tag[b] = LIRS_HIR | LIRS_IN_S;
			dl_push(&p, 0, &S, b);
			dl_push(&p, 1, &Q, b);
		}
	}
	pool_free(&p);
	return (double)misses / (double)t->n;
}

/* ---- the engine -------------------------------------------------------- */

/* Replays t on a fresh region; returns the miss ratio, or -1. */
static double replay(const struct trace *t, const struct run *ru,
		     uint64_t entries, unsigned width, unsigned *eff_stripes,
		     double *wshare, uint64_t *resets, uint64_t *unrec,
		     double *mops)
{
	struct region_limits lim = {
		.max_entries = entries,
		.nstripes = ru->nstripes,
		.strategy = ru->strategy,
	};
	struct region_value *trivial = region_value_create("v", 1), *v;
	struct region_flight *fl;
	struct region_stats st;
	struct region *r;
	size_t i, misses = 0;
	unsigned char kb[8];
	double t0;

	if (!trivial || region_create("trace", &lim, &r))
		return -1;
	t0 = tl_now_s();
	for (i = 0; i < t->n; i++) {
		int rc;

		/* the key as bytes, as in the trace */
		if (width == 8) {
			uint64_t k = t->keys[i];
			unsigned j;

			for (j = 0; j < 8; j++)
				kb[j] = (unsigned char)(k >> (56 - 8 * j));
		} else {
			uint32_t k = (uint32_t)t->keys[i];

			kb[0] = (unsigned char)(k >> 24);
			kb[1] = (unsigned char)(k >> 16);
			kb[2] = (unsigned char)(k >> 8);
			kb[3] = (unsigned char)k;
		}
		rc = region_get(r, kb, width, &v, &fl);
		if (rc == REGION_LOAD) {
			misses++;
			rc = region_flight_done(r, fl, 0,
						region_value_ref(trivial), &v);
		}
		if (rc != 0) {
			fprintf(stderr, "bench_hitratio: engine error %d\n",
				rc);
			exit(1);
		}
		region_value_unref(v);
	}
	*mops = (double)t->n / (tl_now_s() - t0) / 1e6;
	region_stats(r, &st);
	*eff_stripes = st.nstripes;
	*wshare = st.window_share;
	*resets = st.sketch_resets;
	*unrec = st.hits_unrecorded;
	region_unref(r);
	region_value_unref(trivial);
	return (double)misses / (double)t->n;
}

static const char *ref_for(const char *trace, const char *policy, double pct,
			   double *out)
{
	size_t i, p;

	for (i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		if (strcmp(refs[i].trace, trace) != 0 ||
		    strcmp(refs[i].policy, policy) != 0)
			continue;
		for (p = 0; p < 3; p++) {
			if (refs[i].pct[p] == pct) {
				*out = refs[i].ratio[p];
				return policy;
			}
		}
	}
	return NULL;
}

static void pct_tag(double pct, char *buf, size_t len)
{
	/* 0.1 -> "0.1", 1 -> "1"; '.' becomes 'p' in names: 0p1 */
	char *d;

	snprintf(buf, len, "%g", pct);
	if ((d = strchr(buf, '.')))
		*d = 'p';
}

static void bench(struct trace *t, const struct run *runs, size_t nruns,
		  const double *pcts, size_t npcts, unsigned width)
{
	double mr[MAX_RUNS][MAX_SIZES], lru[MAX_SIZES], arc[MAX_SIZES];
	double lirs[MAX_SIZES];
	double wsh[MAX_RUNS][MAX_SIZES];
	uint64_t rst[MAX_RUNS][MAX_SIZES], unr[MAX_RUNS][MAX_SIZES];
	unsigned eff[MAX_RUNS][MAX_SIZES];
	size_t i, p;
	char tag[32];

	t->distinct = count_distinct(t);
	printf("\n%s: %zu requests, %zu distinct keys\n", t->name, t->n,
	       t->distinct);
	printf("  %-24s", "miss ratio at size");
	for (p = 0; p < npcts; p++) {
		char h[40];

		snprintf(h, sizeof(h), "%g%%=%zu", pcts[p],
			 (size_t)((double)t->distinct * pcts[p] / 100));
		printf(" %13s", h);
	}
	printf("\n  %-24s", "exact LRU (bench)");
	for (p = 0; p < npcts; p++) {
		uint64_t cap = (uint64_t)((double)t->distinct * pcts[p] / 100);

		lru[p] = exact_lru(t, cap ? cap : 1);
		printf(" %13.4f", lru[p]);
		fflush(stdout);
	}
	printf("\n  %-24s", "ARC (bench)");
	for (p = 0; p < npcts; p++) {
		uint64_t cap = (uint64_t)((double)t->distinct * pcts[p] / 100);

		arc[p] = ref_arc(t, cap ? cap : 1);
		printf(" %13.4f", arc[p]);
		fflush(stdout);
	}
	printf("\n  %-24s", "LIRS (bench)");
	for (p = 0; p < npcts; p++) {
		uint64_t cap = (uint64_t)((double)t->distinct * pcts[p] / 100);

		lirs[p] = ref_lirs(t, cap ? cap : 1);
		if (lirs[p] < 0)
			printf(" %13s", "-");
		else
			printf(" %13.4f", lirs[p]);
		fflush(stdout);
	}
	printf("\n");
	for (i = 0; i < nruns; i++) {
		char label[64];

		snprintf(label, sizeof(label), "%s%s, %u stripes",
			 strcmp(runs[i].policy, "default") == 0 ? "default="
								: "",
			 config_strategy_name(runs[i].strategy),
			 runs[i].nstripes);
		printf("  %-24s", label);
		for (p = 0; p < npcts; p++) {
			uint64_t cap =
				(uint64_t)((double)t->distinct * pcts[p] / 100);
			double mops;

			mr[i][p] = replay(t, &runs[i], cap ? cap : 1, width,
					  &eff[i][p], &wsh[i][p], &rst[i][p],
					  &unr[i][p], &mops);
			printf(" %8.4f(%3u)", mr[i][p], eff[i][p]);
			fflush(stdout);
		}
		printf("\n");
	}
	{
		static const char *const pols[] = {"LRU", "ARC", "S3-FIFO",
						   "W-TinyLFU", "optimal"};
		size_t k;

		for (k = 0; k < sizeof(pols) / sizeof(pols[0]); k++) {
			bool any = false;
			double v;

			for (p = 0; p < npcts; p++)
				any |= ref_for(t->name, pols[k], pcts[p], &v) !=
				       NULL;
			if (!any)
				continue;
			printf("  %-24s", pols[k]);
			for (p = 0; p < npcts; p++) {
				if (ref_for(t->name, pols[k], pcts[p], &v))
					printf(" %8.4f     ", v);
				else
					printf(" %8s     ", "-");
			}
			printf("  (published)\n");
		}
	}
	printf("  (n) = effective stripes\n");
	for (i = 0; i < nruns; i++) {
		if (runs[i].strategy != REGION_STRATEGY_TINYLFU)
			continue;
		printf("  window share at the end, tinylfu %2u stripes",
		       runs[i].nstripes);
		for (p = 0; p < npcts; p++)
			printf(" %6.3f", wsh[i][p]);
		printf("\n  sketch resets, tinylfu %2u stripes         ",
		       runs[i].nstripes);
		for (p = 0; p < npcts; p++)
			printf(" %6" PRIu64, rst[i][p]);
		printf("\n");
	}
	for (i = 0; i < nruns; i++) {
		uint64_t lost = 0;

		for (p = 0; p < npcts; p++)
			lost += unr[i][p];
		if (lost)
			printf("  %s, %u stripes: %" PRIu64
			       " hits not recorded by the policy\n",
			       config_strategy_name(runs[i].strategy),
			       runs[i].nstripes, lost);
	}
	for (p = 0; p < npcts; p++) {
		pct_tag(pcts[p], tag, sizeof(tag));
		for (i = 0; i < nruns; i++) {
			if (runs[i].dflt)
				printf("miss_%s_%spct=%.4f\n", t->name, tag,
				       mr[i][p]);
		}
		printf("lru_%s_%spct=%.4f\n", t->name, tag, lru[p]);
		printf("arc_%s_%spct=%.4f\n", t->name, tag, arc[p]);
		if (lirs[p] >= 0)
			printf("lirs_%s_%spct=%.4f\n", t->name, tag, lirs[p]);
		for (i = 0; i < nruns; i++) {
			if (!runs[i].dflt)
				printf("%s_s%u_%s_%spct=%.4f\n",
				       config_strategy_name(runs[i].strategy),
				       runs[i].nstripes, t->name, tag,
				       mr[i][p]);
		}
	}
}

static int parse_strategy(const char *s, struct run *ru)
{
	struct config_region d;

	config_default_region(&d);
	ru->dflt = false;
	if (strcasecmp(s, "default") == 0) {
		ru->dflt = true;
		ru->strategy = d.lim.strategy;
		return 0;
	}
	for (int i = 0; i < 8; i++) {
		const char *n = config_strategy_name((enum region_strategy)i);

		if (n && strcasecmp(n, s) == 0) {
			ru->strategy = (enum region_strategy)i;
			return 0;
		}
	}
	return -EINVAL;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_hitratio [-8] [-f be32|be64|text|arc] "
			"[-p POLICIES] [-s STRIPES] [-z PCTS] [-S SEED] "
			"[TRACE...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const char *const defaults[] = {DEFAULT_DIR "/orm-busy.trace.xz",
					       DEFAULT_DIR "/web12.trace.xz"};
	const char *policies = "default,lru,s3fifo,tinylfu";
	const char *stripes_arg = NULL, *sizes = "0.1,1,3,10,30";
	double pcts[MAX_SIZES];
	unsigned stripes[MAX_SIZES], width;
	enum trace_format fmt = FMT_BE32;
	size_t npcts = 0, nstripes = 0, nruns = 0, i, j;
	struct run runs[MAX_RUNS];
	struct config_region d;
	char *copy, *tok, *save;
	int opt;

	while ((opt = getopt(argc, argv, "8f:p:s:z:S:h")) != -1) {
		switch (opt) {
		case '8':
			fmt = FMT_BE64;
			break;
		case 'f':
			if (!strcmp(optarg, "be32"))
				fmt = FMT_BE32;
			else if (!strcmp(optarg, "be64"))
				fmt = FMT_BE64;
			else if (!strcmp(optarg, "text"))
				fmt = FMT_TEXT;
			else if (!strcmp(optarg, "arc"))
				fmt = FMT_ARC;
			else
				usage();
			break;
		case 'p':
			policies = optarg;
			break;
		case 'S':
			/* before any region exists: the seed is read once */
			region__hash_init();
			region__hash_seed = strtoull(optarg, NULL, 0);
			break;
		case 's':
			stripes_arg = optarg;
			break;
		case 'z':
			sizes = optarg;
			break;
		default:
			usage();
		}
	}
	width = fmt == FMT_BE32 ? 4 : 8; /* bytes of a region key */
	config_default_region(&d);
	copy = strdup(sizes);
	for (tok = strtok_r(copy, ",", &save); tok && npcts < MAX_SIZES;
	     tok = strtok_r(NULL, ",", &save))
		pcts[npcts++] = atof(tok);
	free(copy);
	if (stripes_arg) {
		copy = strdup(stripes_arg);
		for (tok = strtok_r(copy, ",", &save);
		     tok && nstripes < MAX_SIZES;
		     tok = strtok_r(NULL, ",", &save))
			stripes[nstripes++] = (unsigned)atoi(tok);
		free(copy);
	} else {
		stripes[nstripes++] = d.lim.nstripes;
	}
	copy = strdup(policies);
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		struct run ru;

		if (parse_strategy(tok, &ru)) {
			fprintf(stderr, "bench_hitratio: unknown policy %s\n",
				tok);
			return 2;
		}
		for (j = 0; j < nstripes && nruns < MAX_RUNS; j++) {
			ru.nstripes = stripes[j];
			snprintf(ru.policy, sizeof(ru.policy), "%s", tok);
			runs[nruns] = ru;
			/* "default" means default stripes too */
			runs[nruns++].dflt =
				ru.dflt && stripes[j] == d.lim.nstripes;
		}
	}
	free(copy);
	if (npcts == 0 || nruns == 0)
		usage();
	for (i = (size_t)optind;
	     i < (size_t)argc || (argc == optind && i < 2 + (size_t)optind);
	     i++) {
		struct trace t = {.path = argc == optind
						  ? defaults[i - (size_t)optind]
						  : argv[i]};
		const char *base = strrchr(t.path, '/');

		snprintf(t.name, sizeof(t.name), "%s",
			 base ? base + 1 : t.path);
		if (strchr(t.name, '.'))
			*strchr(t.name, '.') = '\0';
		for (j = 0; t.name[j]; j++)
			if (t.name[j] == '-')
				t.name[j] = '_';
		if (read_trace(&t, fmt)) {
			fprintf(stderr, "bench_hitratio: cannot read %s\n",
				t.path);
			free(t.keys);
			return 1;
		}
		bench(&t, runs, nruns, pcts, npcts, width);
		free(t.keys);
	}
	return 0;
}
