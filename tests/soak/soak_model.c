/*
 * soak_model.c - the random-op model of the soak test: writes, reads,
 * unlinks, renames and stats on a few hundred keys of one region through
 * the mount, every result checked against a reference model, for a given
 * time.
 *
 *   soak_model DIR SECONDS [NKEYS NTHREADS SEED]   (default 300 4 1)
 *
 * Each thread owns the keys k with k % NTHREADS == its number and keeps
 * the exact model of them (present or not; if present, the key and
 * version whose value it holds): no other thread touches them, so every
 * outcome is known in advance and checked exactly. Run the region with
 * max_entries well below NKEYS: most reads then miss the cache, load from
 * SQLite and evict another key, which is what a soak must exercise.
 *
 * A value of (key K, version V) is self-describing: a header
 * "soak k=K v=V len=L\n" and then bytes that are a function of (K, V,
 * offset); its length is a function of (K, V), 0 to 8 KiB of body. A
 * rename moves a value to another key unchanged, so the model keeps the
 * key the value was written under.
 *
 * Operations (chosen at random): write (open O_TRUNC, 1-3 write()s,
 * close) 40 %, read whole and compare 35 %, unlink 10 %, rename onto
 * another of the thread's keys (present or not) 10 %, stat (size) 5 %.
 * An absent key must give ENOENT to read, unlink, rename (as source) and
 * stat. At the end every key is checked once more (readdir is not used:
 * listing is not the subject here).
 *
 * Output: "soak_model: ops=N writes=N reads=N unlinks=N renames=N
 * stats=N errors=N" on stdout, the first findings on stderr. Exit 0 if
 * every check held, 1 otherwise, 2 on usage errors. The time only bounds
 * the run; no result depends on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#define BODY_MAX 8192
#define VAL_MAX	 (BODY_MAX + 128)

struct key_model {
	bool present;
	unsigned src; /* the key the value was written under */
	uint32_t ver;
};

struct worker {
	pthread_t tid;
	unsigned no;
	uint64_t rng;
	uint64_t ops, writes, reads, unlinks, renames, stats;
};

static const char *dir;
static unsigned nkeys, nthreads;
static uint64_t deadline_ns;
static struct key_model *model;
static uint32_t *next_ver; /* per key, owned by the key's thread */

static size_t value_len(unsigned k, uint32_t v)
{
	return tl_mix32(k * 2654435761u ^ tl_mix32(v)) % (BODY_MAX + 1);
}

/* Writes the value of (k, v) into buf (VAL_MAX bytes); returns its size. */
static size_t make_value(char *buf, unsigned k, uint32_t v)
{
	size_t body = value_len(k, v), i;
	int n = snprintf(buf, VAL_MAX, "soak k=%u v=%" PRIu32 " len=%zu\n", k,
			 v, body);

	for (i = 0; i < body; i++)
		buf[n + i] = (char)(tl_mix32((uint32_t)(k << 20) ^ v ^
					     (uint32_t)(i * 0x9e3779b9u)) >>
				    24);
	return (size_t)n + body;
}

static void key_path(char *buf, unsigned k)
{
	tl_key_path(buf, TL_PATH_MAX, dir, "s", 4, k);
}

/* The value at key k must be what the model says. */
static void check_key(unsigned k)
{
	static _Thread_local char got[VAL_MAX + 1], want[VAL_MAX];
	char path[TL_PATH_MAX];
	const struct key_model *m = &model[k];
	size_t len, wlen;
	int rc;

	key_path(path, k);
	rc = tl_read_file(path, got, sizeof(got), &len);
	if (!m->present) {
		if (rc != -ENOENT)
			tl_report("read %s: absent key gave %s (len %zu)", path,
				  rc ? strerror(-rc) : "a value", len);
		return;
	}
	if (rc) {
		tl_report("read %s (k=%u v=%" PRIu32 "): %s: %s", path, m->src,
			  m->ver, tl_failed_call(), strerror(-rc));
		return;
	}
	wlen = make_value(want, m->src, m->ver);
	if (len != wlen || memcmp(got, want, len) != 0)
		tl_report("read %s: expected k=%u v=%" PRIu32
			  " (%zu bytes), got %zu bytes starting '%.40s'",
			  path, m->src, m->ver, wlen, len, got);
}

static void op_write(struct worker *w, unsigned k)
{
	static _Thread_local char buf[VAL_MAX];
	char path[TL_PATH_MAX];
	uint32_t v = ++next_ver[k];
	size_t len = make_value(buf, k, v);
	int rc;

	key_path(path, k);
	rc = tl_write_file_parts(path, buf, len,
				 1 + (unsigned)tl_rand_below(&w->rng, 3));
	if (rc) {
		tl_report("write %s: %s: %s", path, tl_failed_call(),
			  strerror(-rc));
		return;
	}
	model[k] = (struct key_model){true, k, v};
	w->writes++;
}

static void op_unlink(struct worker *w, unsigned k)
{
	char path[TL_PATH_MAX];
	int rc;

	key_path(path, k);
	rc = unlink(path) ? -errno : 0;
	if (model[k].present ? rc != 0 : rc != -ENOENT)
		tl_report("unlink %s: %s, model says %s", path,
			  rc ? strerror(-rc) : "success",
			  model[k].present ? "present" : "absent");
	model[k].present = false;
	w->unlinks++;
}

static void op_rename(struct worker *w, unsigned a, unsigned b)
{
	char pa[TL_PATH_MAX], pb[TL_PATH_MAX];
	int rc;

	key_path(pa, a);
	key_path(pb, b);
	rc = rename(pa, pb) ? -errno : 0;
	if (model[a].present ? rc != 0 : rc != -ENOENT) {
		tl_report("rename %s %s: %s, model says source %s", pa, pb,
			  rc ? strerror(-rc) : "success",
			  model[a].present ? "present" : "absent");
		return;
	}
	if (model[a].present && a != b) {
		model[b] = model[a];
		model[a].present = false;
	}
	w->renames++;
}

static void op_stat(struct worker *w, unsigned k)
{
	char path[TL_PATH_MAX], hdr[128];
	struct stat st;
	int rc, n;

	key_path(path, k);
	rc = stat(path, &st) ? -errno : 0;
	if (!model[k].present) {
		if (rc != -ENOENT)
			tl_report("stat %s: absent key gave %s", path,
				  rc ? strerror(-rc) : "success");
	} else if (rc) {
		tl_report("stat %s: %s", path, strerror(-rc));
	} else {
		const struct key_model *m = &model[k];
		size_t body = value_len(m->src, m->ver);

		n = snprintf(hdr, sizeof(hdr),
			     "soak k=%u v=%" PRIu32 " len=%zu\n", m->src,
			     m->ver, body);
		if ((size_t)st.st_size != (size_t)n + body)
			tl_report("stat %s: size %jd, expected %zu", path,
				  (intmax_t)st.st_size, (size_t)n + body);
	}
	w->stats++;
}

/* One of thread w's keys, at random. */
static unsigned pick(struct worker *w)
{
	unsigned mine = (nkeys - w->no + nthreads - 1) / nthreads;

	return w->no + nthreads * (unsigned)tl_rand_below(&w->rng, mine);
}

static void *run(void *arg)
{
	struct worker *w = arg;
	unsigned k, r;

	while (tl_now_ns() < deadline_ns) {
		k = pick(w);
		r = (unsigned)tl_rand_below(&w->rng, 100);
		if (r < 40) {
			op_write(w, k);
		} else if (r < 75) {
			check_key(k);
			w->reads++;
		} else if (r < 85) {
			op_unlink(w, k);
		} else if (r < 95) {
			op_rename(w, k, pick(w));
		} else {
			op_stat(w, k);
		}
		w->ops++;
	}
	/* the final check of the thread's keys */
	for (k = w->no; k < nkeys; k += nthreads)
		check_key(k);
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker *ws;
	uint64_t seed = 1, tot[6] = {0};
	double secs;
	unsigned i;

	if (argc != 3 && argc != 6) {
		fprintf(stderr, "usage: soak_model DIR SECONDS [NKEYS NTHREADS "
				"SEED]\n");
		return 2;
	}
	dir = argv[1];
	secs = atof(argv[2]);
	nkeys = 300;
	nthreads = 4;
	if (argc == 6) {
		nkeys = (unsigned)atoi(argv[3]);
		nthreads = (unsigned)atoi(argv[4]);
		seed = strtoull(argv[5], NULL, 10);
	}
	if (secs <= 0 || nthreads == 0 || nkeys < 2 * nthreads) {
		fprintf(stderr, "soak_model: bad arguments\n");
		return 2;
	}
	model = calloc(nkeys, sizeof(*model));
	next_ver = calloc(nkeys, sizeof(*next_ver));
	ws = calloc(nthreads, sizeof(*ws));
	if (!model || !next_ver || !ws)
		tl_die("out of memory");
	/* keys left by an earlier run in DIR would break the model */
	for (i = 0; i < nkeys; i++) {
		char path[TL_PATH_MAX];

		key_path(path, i);
		if (unlink(path) && errno != ENOENT)
			tl_die("unlink %s: %s", path, strerror(errno));
	}
	deadline_ns = tl_now_ns() + (uint64_t)(secs * 1e9);
	for (i = 0; i < nthreads; i++) {
		ws[i].no = i;
		ws[i].rng = tl_mix64(seed * 1000003u + i + 1) | 1;
		if (pthread_create(&ws[i].tid, NULL, run, &ws[i]))
			tl_die("pthread_create failed");
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(ws[i].tid, NULL);
		tot[0] += ws[i].ops;
		tot[1] += ws[i].writes;
		tot[2] += ws[i].reads;
		tot[3] += ws[i].unlinks;
		tot[4] += ws[i].renames;
		tot[5] += ws[i].stats;
	}
	printf("soak_model: ops=%" PRIu64 " writes=%" PRIu64 " reads=%" PRIu64
	       " unlinks=%" PRIu64 " renames=%" PRIu64 " stats=%" PRIu64
	       " errors=%u\n",
	       tot[0], tot[1], tot[2], tot[3], tot[4], tot[5], tl_reported());
	free(ws);
	free(next_ver);
	free(model);
	return tl_reported() ? 1 : 0;
}
