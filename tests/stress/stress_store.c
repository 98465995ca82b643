/*
 * stress_store.c - concurrent put/load/delete/rename/list on a few keys,
 * with an outside writer and a change-feed poller, then a throughput run.
 *
 * Every value is a self-describing record (header + payload derived from
 * a seed), so any torn, mixed or misattributed value is caught by the
 * reader that loads it. The outside writer (a plain sqlite3 connection,
 * as the shell would be) writes keys "x*"; the store's callers write keys
 * "k*", so the feed poller must only ever be told about "x*" keys (or be
 * told to invalidate everything after a prune). The run is bounded in
 * time (STRESS_SECONDS, default 1.5 s) and meant for ThreadSanitizer too.
 *
 * Finally it measures puts per second with 1 and 8 threads (1 KiB values,
 * synchronous=NORMAL) and prints them with the commit counts, which show
 * the group commit at work. Exit status 0 means no violation was seen.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "testlib.h"

#define NKEYS	   8 /* k0..k7, the store's own callers */
#define NXKEYS	   4 /* x0..x3, the outside writer */
#define NWORKERS   4
#define REC_MAGIC  0x52465331u /* "RFS1" */
#define BENCH_VLEN 1024

struct rec_hdr {
	uint32_t magic;
	uint32_t len;  /* payload bytes */
	uint64_t seed; /* payload[i] = byte i of the seed's tl_rand() stream */
};

static struct store *g_st;
static char g_path[256];
static atomic_bool g_stop;  /* the outside writer and the poller */
static atomic_bool g_wstop; /* the workers */
static atomic_long g_ops;
static double g_seconds = 1.5;

#define VIOLATION(...) tl_report("VIOLATION: " __VA_ARGS__)

/* Builds a record of payload length len from seed; returns its size. */
static size_t rec_make(unsigned char *buf, uint64_t seed, uint32_t len)
{
	struct rec_hdr h = {REC_MAGIC, len, seed | 1};
	uint64_t s = h.seed;
	uint32_t i;

	memcpy(buf, &h, sizeof(h));
	for (i = 0; i < len; i++)
		buf[sizeof(h) + i] = (unsigned char)tl_rand(&s);
	return sizeof(h) + len;
}

static bool rec_ok(const unsigned char *buf, size_t n)
{
	struct rec_hdr h;
	uint64_t s;
	uint32_t i;

	if (n < sizeof(h))
		return false;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != REC_MAGIC || sizeof(h) + h.len != n)
		return false;
	s = h.seed;
	for (i = 0; i < h.len; i++) {
		if (buf[sizeof(h) + i] != (unsigned char)tl_rand(&s))
			return false;
	}
	return true;
}

/* Mostly small values, now and then one that spills to overflow pages. */
static uint32_t rec_len(uint64_t *rng)
{
	uint64_t r = tl_rand(rng);

	return r % 16 == 0 ? (uint32_t)(r >> 8) % 65536
			   : (uint32_t)(r >> 8) % 512;
}

/* ---- workers ----------------------------------------------------------- */

static void do_load(const char *key)
{
	struct store_meta m;
	void *data;
	int rc = store_load(g_st, "s", key, strlen(key), &data, &m);

	if (rc == -ENOENT)
		return;
	if (rc)
		VIOLATION("load %s: %d", key, rc);
	else if (!rec_ok(data, m.size) || m.version == 0 || m.mtime_ns <= 0)
		VIOLATION("load %s: malformed value (%" PRIu64 " bytes)", key,
			  m.size);
	free(data);
}

struct list_check {
	char last[STORE_MAX_KEY + 1];
	int n;
};

static int list_cb(void *ctx, const void *key, size_t klen,
		   const struct store_meta *meta)
{
	struct list_check *c = ctx;
	char k[STORE_MAX_KEY + 1];

	memcpy(k, key, klen);
	k[klen] = '\0';
	if (c->n && strcmp(c->last, k) >= 0)
		VIOLATION("list: %s after %s", k, c->last);
	if ((k[0] != 'k' && k[0] != 'x') || meta->size < sizeof(struct rec_hdr))
		VIOLATION("list: bad entry %s (%" PRIu64 " bytes)", k,
			  meta->size);
	strcpy(c->last, k);
	c->n++;
	return 0;
}

static void do_list(void)
{
	struct list_check c = {.n = 0};
	int rc = store_list(g_st, "s", NULL, 0, 100, list_cb, &c);

	if (rc < 0 || rc != c.n || rc > NKEYS + NXKEYS)
		VIOLATION("list: %d (saw %d)", rc, c.n);
}

static void worker_op(uint64_t *rng, unsigned char *buf)
{
	char key[8], key2[8];
	uint64_t r = tl_rand(rng);
	size_t n;
	int rc = 0;

	snprintf(key, sizeof(key), "k%u", (unsigned)(r % NKEYS));
	snprintf(key2, sizeof(key2), "k%u", (unsigned)(r / NKEYS % NKEYS));
	switch (r / 64 % 10) {
	case 0:
	case 1:
	case 2:
		n = rec_make(buf, tl_rand(rng), rec_len(rng));
		rc = store_put(g_st, "s", key, strlen(key), buf, n,
			       r % 50 == 0 ? STORE_DURABLE : 0, NULL);
		break;
	case 3:
		rc = store_delete(g_st, "s", key, strlen(key), 0);
		break;
	case 4:
		rc = store_rename(g_st, "s", key, strlen(key), key2,
				  strlen(key2), 0);
		break;
	case 5:
		do_list();
		break;
	case 6:
		snprintf(key, sizeof(key), "x%u", (unsigned)(r % NXKEYS));
		do_load(key);
		break;
	default:
		do_load(key);
		break;
	}
	if (rc && rc != -ENOENT)
		VIOLATION("change of %s: %d", key, rc);
	atomic_fetch_add_explicit(&g_ops, 1, memory_order_relaxed);
}

static void *worker_main(void *arg)
{
	uint64_t rng = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	unsigned char *buf = malloc(sizeof(struct rec_hdr) + 65536);

	if (!buf)
		abort();
	while (!atomic_load(&g_wstop))
		worker_op(&rng, buf);
	free(buf);
	return NULL;
}

/* ---- the outside writer and the feed poller ----------------------------- */

static void *outside_main(void *arg)
{
	unsigned char *buf = malloc(sizeof(struct rec_hdr) + 65536);
	uint64_t rng = 12345;
	sqlite3_stmt *put, *del, *s;
	char key[8];
	sqlite3 *db;
	size_t n;
	int rc;

	(void)arg;
	if (!buf || sqlite3_open(g_path, &db) != SQLITE_OK)
		abort();
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db,
			       "INSERT INTO kv(region, key, value) "
			       "VALUES ('s', ?1, ?2) ON CONFLICT(region, key) "
			       "DO UPDATE SET value = excluded.value",
			       -1, &put, NULL) ||
	    sqlite3_prepare_v2(db,
			       "DELETE FROM kv WHERE region = 's' AND "
			       "key = ?1",
			       -1, &del, NULL))
		abort();
	while (!atomic_load(&g_stop)) {
		snprintf(key, sizeof(key), "x%u",
			 (unsigned)(tl_rand(&rng) % NXKEYS));
		n = rec_make(buf, tl_rand(&rng), rec_len(&rng));
		sqlite3_bind_text(put, 1, key, -1, SQLITE_STATIC);
		sqlite3_bind_blob(put, 2, buf, (int)n, SQLITE_STATIC);
		sqlite3_bind_text(del, 1, key, -1, SQLITE_STATIC);
		s = tl_rand(&rng) % 4 ? put : del;
		rc = sqlite3_step(s);
		if (rc != SQLITE_DONE)
			VIOLATION("outside write: %s", sqlite3_errmsg(db));
		sqlite3_reset(s);
		usleep(1000); /* a script's pace; a tight loop starves us */
	}
	sqlite3_finalize(put);
	sqlite3_finalize(del);
	sqlite3_close(db);
	free(buf);
	return NULL;
}

struct poll_stats {
	long changes, invalidations, polls;
};

static int feed_cb(void *ctx, const char *region, const void *key, size_t klen)
{
	struct poll_stats *ps = ctx;

	if (!region) {
		ps->invalidations++;
		return 0;
	}
	if (strcmp(region, "s") || klen < 2 || ((const char *)key)[0] != 'x')
		VIOLATION("feed reported our own change %s/%.*s", region,
			  (int)klen, (const char *)key);
	ps->changes++;
	return 0;
}

static void *poller_main(void *arg)
{
	struct poll_stats *ps = arg;
	uint64_t cursor;
	int rc;

	if (store_changes_head(g_st, &cursor))
		abort();
	while (!atomic_load(&g_stop)) {
		rc = store_changes(g_st, &cursor, feed_cb, ps);
		if (rc < 0)
			VIOLATION("store_changes: %d", rc);
		if (++ps->polls % 200 == 0 && store_changes_prune(g_st, 0) < 0)
			VIOLATION("prune failed");
	}
	return NULL;
}

static int run_mixed(void)
{
	pthread_t w[NWORKERS], out, poll;
	struct poll_stats ps = {0};
	struct store_stats s;
	double t0 = tl_now_s();
	int i, round;

	pthread_create(&out, NULL, outside_main, NULL);
	pthread_create(&poll, NULL, poller_main, &ps);
	for (round = 0; round < 2; round++) { /* round 2 reuses connections */
		atomic_store(&g_wstop, false);
		for (i = 0; i < NWORKERS; i++)
			pthread_create(&w[i], NULL, worker_main,
				       (void *)(uintptr_t)(round * 16 + i + 1));
		while (tl_now_s() - t0 < g_seconds * (round + 1) / 2)
			usleep(10000); /* the run's length, not a race */
		atomic_store(&g_wstop, true);
		for (i = 0; i < NWORKERS; i++)
			pthread_join(w[i], NULL);
	}
	atomic_store(&g_stop, true);
	pthread_join(out, NULL);
	pthread_join(poll, NULL);
	store_stats(g_st, &s);
	printf("mixed: %ld ops in %.1f s, %" PRIu64 " commits, %" PRIu64
	       " rows, max batch %" PRIu64 ", %ld feed changes, %ld "
	       "invalidations, %ld polls\n",
	       atomic_load(&g_ops), tl_now_s() - t0, s.commits, s.rows,
	       s.max_batch, ps.changes, ps.invalidations, ps.polls);
	return 0;
}

/* ---- throughput ------------------------------------------------------------ */

struct bench_arg {
	int id;
	long puts;
	double until;
};

static void *bench_main(void *arg)
{
	struct bench_arg *a = arg;
	unsigned char val[BENCH_VLEN];
	char key[32];
	int rc;

	memset(val, 'v', sizeof(val));
	while (tl_now_s() < a->until) {
		snprintf(key, sizeof(key), "b%d-%ld", a->id, a->puts % 1000);
		rc = store_put(g_st, "bench", key, strlen(key), val,
			       sizeof(val), 0, NULL);
		if (rc)
			VIOLATION("bench put: %d", rc);
		a->puts++;
	}
	return NULL;
}

static void run_bench(int nthreads, double seconds)
{
	struct bench_arg a[8];
	struct store_stats s0, s1;
	pthread_t t[8];
	double t0 = tl_now_s();
	long puts = 0;
	int i;

	store_stats(g_st, &s0);
	for (i = 0; i < nthreads; i++) {
		a[i] = (struct bench_arg){i, 0, t0 + seconds};
		pthread_create(&t[i], NULL, bench_main, &a[i]);
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		puts += a[i].puts;
	}
	store_stats(g_st, &s1);
	printf("bench: %d thread(s): %.0f puts/s (%ld puts, %" PRIu64
	       " commits, %.1f puts/commit, mean commit %.0f us)\n",
	       nthreads, puts / (tl_now_s() - t0), puts,
	       s1.commits - s0.commits,
	       (double)puts / (double)(s1.commits - s0.commits),
	       (s1.commit_ns - s0.commit_ns) / 1e3 /
		       (double)(s1.commits - s0.commits));
}

int main(void)
{
	char dir[] = "/tmp/stress_store.XXXXXX";
	const char *secs = getenv("STRESS_SECONDS");
	char p[300];
	int v;

	if (secs && atof(secs) > 0)
		g_seconds = atof(secs);
	if (!mkdtemp(dir))
		return 1;
	snprintf(g_path, sizeof(g_path), "%s/store.db", dir);
	if (store_open(g_path, NULL, &g_st)) {
		fprintf(stderr, "store_open failed\n");
		return 1;
	}
	run_mixed();
	run_bench(1, g_seconds / 3);
	run_bench(8, g_seconds / 3);
	store_close(g_st);
	snprintf(p, sizeof(p), "%s-wal", g_path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", g_path);
	unlink(p);
	unlink(g_path);
	rmdir(dir);
	v = (int)tl_reported();
	printf("%s: %d violation(s)\n", v ? "FAIL" : "OK", v);
	return v ? 1 : 0;
}
