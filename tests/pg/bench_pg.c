/*
 * bench_pg.c - figures for the PostgreSQL store (a benchmark, not a test:
 * meson test never runs it; run_bench_pg.sh runs both parts against a
 * throwaway cluster).
 *
 *   bench_pg writes CONNINFO [SECONDS] [THREADS,...]
 *	Durable writes per second with 1, 4 and 8 writer threads: through
 *	the pg store (store_put with STORE_DURABLE: group commit, one writer
 *	connection, a doorbell after each commit) against raw libpq
 *	single-row upserts into the same table (each thread its own
 *	connection, one autocommit INSERT ... ON CONFLICT per write,
 *	synchronous_commit on), interleaved in the same run: rounds of a
 *	raw slice and a store slice, timed from when every writer is ready
 *	(raw writers connected). Prints writes/s of each and ratio_wN, the
 *	median over the rounds of store / raw.
 *
 *   bench_pg latency DIR_A DIR_B [ROUNDS]
 *	Invalidation latency between two mounts of one database: write
 *	round i's value to DIR_A/k (open, write, close), then read DIR_B/k
 *	until it shows it (B holds the previous value cached: it read it at
 *	the end of the previous round). Prints p50, p99 and max of the time
 *	from close() on A returning to the first read on B that shows it.
 *
 *   bench_pg close NAME DIR_BOUNDED DIR_STRICT [ROUNDS]
 *	The cost of coherence = strict: rounds of one write (open O_TRUNC,
 *	write, close) to DIR_BOUNDED/k, then one to DIR_STRICT/k, both on
 *	the same mount, interleaved; prints name=value lines: p50 and p90
 *	of close() alone and of the whole write, per coherence, and
 *	ack_cost_p50_NAME (strict minus bounded close p50), in ms. NAME
 *	tags the lines (run_bench_pg.sh: how many other mounts there are).
 *
 *   bench_pg reads KEYS ROUNDS PG_HIT PG_MISS SQLITE_HIT SQLITE_MISS
 *	Read costs next to the SQLite backend, through the mount. KEYS keys
 *	of 100 bytes are written into each of the four region directories
 *	(a PostgreSQL mount's and a SQLite mount's); then ROUNDS passes read
 *	every key of each, the four interleaved per key, each read an open
 *	with O_DIRECT (the kernel's page cache is bypassed, so every read
 *	reaches the daemon), a read and a close. *_HIT is a region that
 *	holds every key (a warm pass first): every read is a cache hit;
 *	*_MISS an LRU region of 16 entries read in a cycle: every read is a
 *	miss that loads the row from the store. Prints the p50 and p90 per
 *	read in microseconds and cost_ratio_{hit,miss}_pg_sqlite (p50 of
 *	PostgreSQL / p50 of SQLite).
 *
 *   bench_pg cost CONNINFO [WRITES] [REPS]
 *	What one lone durable write costs, store against raw, measured
 *	deterministically where the server allows: REPS blocks of WRITES
 *	writes each way (store_put with STORE_DURABLE from one thread, and
 *	the raw upsert of "writes" on a connection of its own), keys cycled
 *	over 1000 rows that already exist (a warm pass first), as in
 *	"writes". Per block and way: WAL bytes per write (pg_current_wal_lsn()
 *	before and after, read on a third connection, which writes none),
 *	the server's CPU per write (the writing backend's run time from
 *	/proc/PID/schedstat: the cluster must run on this machine), the
 *	client's (this process's CPU time, every thread of the store's
 *	included) and the wall time per write. Prints wal_start/wal_end of
 *	each block too (LSNs, for pg_waldump --stats). Run it on a cluster
 *	with autovacuum off, or autovacuum's WAL may land in a block.
 *	BENCH_COST_ONLY=store (or raw) runs the blocks of one way only.
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
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "store.h"
#include "testlib.h"

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- writes ------------------------------------------------------------------ */

struct wctx {
	const char *conninfo;
	struct store *st;      /* NULL: raw libpq */
	pthread_barrier_t *go; /* every writer ready: the clock starts */
	int id;
	int64_t ns; /* how long to write */
	uint64_t n;
	int err;
};

static const char value[100] = "0123456789012345678901234567890123456789";

static void *store_writer(void *arg)
{
	struct wctx *w = arg;
	char k[48];
	int64_t until;
	int rc;

	pthread_barrier_wait(w->go);
	until = now_ns() + w->ns;
	while (now_ns() < until) {
		snprintf(k, sizeof(k), "s%d-%" PRIu64, w->id, w->n % 1000);
		rc = store_put(w->st, "bench", k, strlen(k), value,
			       sizeof(value), STORE_DURABLE, NULL);
		if (rc) {
			w->err = rc;
			break;
		}
		w->n++;
	}
	return NULL;
}

static void *raw_writer(void *arg)
{
	struct wctx *w = arg;
	PGconn *c = PQconnectdb(w->conninfo);
	char k[48], size[16], mt[24];
	int64_t until;
	const char *vals[5] = {"raw", k, value, size, mt};
	int lens[5] = {0, 0, sizeof(value), 0, 0}, fmts[5] = {0, 1, 1, 0, 0};
	PGresult *r;

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "raw: %s", PQerrorMessage(c));
		w->err = -EIO;
		PQfinish(c);
		pthread_barrier_wait(w->go);
		return NULL;
	}
	PQclear(PQexec(c, "SET synchronous_commit = on"));
	r = PQprepare(c, "up",
		      "INSERT INTO regionfs.kv AS t"
		      "(region, key, value, size, mtime_ns, version) "
		      "VALUES ($1, $2, $3, $4, $5, 1) "
		      "ON CONFLICT (region, key) DO UPDATE SET "
		      "value = excluded.value, size = excluded.size, "
		      "mtime_ns = excluded.mtime_ns, "
		      "version = coalesce(t.version, 0) + 1 RETURNING version",
		      5, NULL);
	PQclear(r);
	snprintf(size, sizeof(size), "%zu", sizeof(value));
	pthread_barrier_wait(w->go); /* connected and prepared */
	until = now_ns() + w->ns;
	while (now_ns() < until) {
		snprintf(k, sizeof(k), "r%d-%" PRIu64, w->id, w->n % 1000);
		lens[1] = (int)strlen(k);
		snprintf(mt, sizeof(mt), "%" PRId64, now_ns());
		r = PQexecPrepared(c, "up", 5, vals, lens, fmts, 1);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "raw: %s", PQresultErrorMessage(r));
			w->err = -EIO;
			PQclear(r);
			break;
		}
		PQclear(r);
		w->n++;
	}
	PQfinish(c);
	return NULL;
}

/*
 * threads writers for secs seconds, timed from when all of them are
 * ready (raw writers connected); returns writes per second.
 */
static double run_writers(const char *conninfo, struct store *st, int threads,
			  double secs)
{
	struct wctx w[64];
	pthread_t t[64];
	pthread_barrier_t go;
	uint64_t total = 0;
	int i;

	pthread_barrier_init(&go, NULL, (unsigned)threads);
	for (i = 0; i < threads; i++) {
		w[i] = (struct wctx){.conninfo = conninfo,
				     .st = st,
				     .go = &go,
				     .id = i,
				     .ns = (int64_t)(secs * 1e9)};
		pthread_create(&t[i], NULL, st ? store_writer : raw_writer,
			       &w[i]);
	}
	for (i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		if (w[i].err) {
			fprintf(stderr, "writer %d: %s\n", i,
				strerror(-w[i].err));
			exit(1);
		}
		total += w[i].n;
	}
	pthread_barrier_destroy(&go);
	return total / secs;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define WRITE_ROUNDS 6 /* per thread count: raw and store slices, paired */

/*
 * Per thread count, WRITE_ROUNDS rounds of a raw slice and a store slice
 * of secs / WRITE_ROUNDS each, which goes first alternating: on a shared
 * machine the load swings between slices, so each round gives a ratio of
 * two neighbouring slices, and ratio_wN is their median (the range and
 * the totals' rates are printed too).
 */
static int bench_writes(const char *conninfo, double secs, const char *list)
{
	struct store_options o = {0};
	struct store_stats s0, s1;
	struct store *st;
	char *copy = strdup(list), *tok, *save = NULL;
	double slice = secs / WRITE_ROUNDS;
	int rc, threads, i;

	rc = store_open(conninfo, &o, &st);
	if (rc) {
		fprintf(stderr, "store_open: %s\n", strerror(-rc));
		return 1;
	}
	printf("durable writes/s, %d rounds of %.2f s raw + %.2f s store per "
	       "case (order alternating), 100-byte values, raw = libpq "
	       "single-row upserts, one connection per thread\n",
	       WRITE_ROUNDS, slice, slice);
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		double raw = 0, ours = 0, r, o1, ratio[WRITE_ROUNDS];
		uint64_t n;

		threads = atoi(tok);
		if (threads < 1 || threads > 64)
			continue;
		store_stats(st, &s0);
		for (i = 0; i < WRITE_ROUNDS; i++) {
			if (i % 2) {
				o1 = run_writers(conninfo, st, threads, slice);
				r = run_writers(conninfo, NULL, threads, slice);
			} else {
				r = run_writers(conninfo, NULL, threads, slice);
				o1 = run_writers(conninfo, st, threads, slice);
			}
			raw += r / WRITE_ROUNDS;
			ours += o1 / WRITE_ROUNDS;
			ratio[i] = o1 / r;
		}
		store_stats(st, &s1);
		qsort(ratio, WRITE_ROUNDS, sizeof(ratio[0]), cmp_dbl);
		n = s1.commits - s0.commits;
		printf("w%d: store %.0f/s raw %.0f/s ratio_w%d %.2f (median "
		       "of %d rounds, range %.2f-%.2f; store: %.2f rows per "
		       "commit, %.3f ms per commit from its first statement "
		       "sent to COMMIT's reply)\n",
		       threads, ours, raw, threads,
		       (ratio[(WRITE_ROUNDS - 1) / 2] +
			ratio[WRITE_ROUNDS / 2]) /
			       2,
		       WRITE_ROUNDS, ratio[0], ratio[WRITE_ROUNDS - 1],
		       n ? (double)(s1.rows - s0.rows) / (double)n : 0.0,
		       n ? (double)(s1.commit_ns - s0.commit_ns) / 1e6 /
				       (double)n
			 : 0.0);
		fflush(stdout);
	}
	free(copy);
	store_close(st);
	return 0;
}

/* ---- invalidation latency -------------------------------------------------- */

/* Does the file at path hold exactly v? */
static bool holds(const char *path, const char *v)
{
	char got[64];
	size_t len;

	return tl_read_file(path, got, sizeof(got), &len) == 0 &&
	       len == strlen(v) && memcmp(got, v, len) == 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int bench_latency(const char *a, const char *b, int rounds)
{
	char pa[4096], pb[4096], v[64];
	int64_t *lat = calloc(rounds, sizeof(*lat)), t0, deadline;
	int i;

	snprintf(pa, sizeof(pa), "%s/k", a);
	snprintf(pb, sizeof(pb), "%s/k", b);
	if (tl_write_file(pa, "v0", 2) || !lat)
		return 1;
	deadline = now_ns() + 10000000000LL;
	while (!holds(pb, "v0")) {
		if (now_ns() > deadline)
			return fprintf(stderr, "b never showed v0\n"), 1;
	}
	srand(42);
	for (i = 0; i < rounds; i++) {
		usleep(rand() % 20000); /* no lockstep with the 250 ms replay */
		snprintf(v, sizeof(v), "v%d", i + 1);
		if (tl_write_file(pa, v, strlen(v)))
			return fprintf(stderr, "write failed\n"), 1;
		t0 = now_ns();
		deadline = t0 + 10000000000LL;
		for (;;) {
			if (holds(pb, v))
				break;
			if (now_ns() > deadline)
				return fprintf(stderr, "round %d: b stuck\n",
					       i),
				       1;
		}
		lat[i] = now_ns() - t0;
	}
	qsort(lat, rounds, sizeof(*lat), cmp_i64);
	for (i = 0; i < rounds && lat[i] < 50000000; i++)
		;
	printf("invalidation latency, close() on A to the new value read on "
	       "B, %d rounds: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max "
	       "%.2f ms, %d over 50 ms\n",
	       rounds, lat[rounds / 2] / 1e6, lat[(rounds * 9) / 10] / 1e6,
	       lat[(rounds * 99) / 100] / 1e6, lat[rounds - 1] / 1e6,
	       rounds - i);
	free(lat);
	return 0;
}

/* ---- the cost of strict ------------------------------------------------------ */

/* One write of v to path: *close_ns the close() alone, *all_ns all of it. */
static int timed_write(const char *path, const char *v, int64_t *close_ns,
		       int64_t *all_ns)
{
	int64_t t0 = now_ns(), t1;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t n = strlen(v);

	if (fd < 0)
		return -1;
	if (write(fd, v, n) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	t1 = now_ns();
	if (close(fd))
		return -1;
	*close_ns = now_ns() - t1;
	*all_ns = now_ns() - t0;
	return 0;
}

static double pct(int64_t *v, int n, int p)
{
	qsort(v, n, sizeof(*v), cmp_i64);
	return v[(n * p) / 100] / 1e6;
}

static int bench_close(const char *name, const char *bounded,
		       const char *strict, int rounds)
{
	const char *dirs[2] = {bounded, strict},
		   *tag[2] = {"bounded", "strict"};
	int64_t *c[2], *w[2];
	char path[4096], v[64];
	double p50[2];
	int i, k;

	for (k = 0; k < 2; k++) {
		c[k] = calloc(rounds, sizeof(int64_t));
		w[k] = calloc(rounds, sizeof(int64_t));
		if (!c[k] || !w[k])
			return 1;
	}
	srand(42);
	for (i = 0; i < rounds; i++) {
		usleep(rand() % 5000);
		for (k = 0; k < 2; k++) {
			snprintf(path, sizeof(path), "%s/k", dirs[k]);
			snprintf(v, sizeof(v), "v%d", i);
			if (timed_write(path, v, &c[k][i], &w[k][i]))
				return fprintf(stderr, "write %s: %s\n", path,
					       strerror(errno)),
				       1;
		}
	}
	for (k = 0; k < 2; k++) {
		p50[k] = pct(c[k], rounds, 50);
		printf("close_p50_%s_%s=%.3f\n", tag[k], name, p50[k]);
		printf("close_p90_%s_%s=%.3f\n", tag[k], name,
		       pct(c[k], rounds, 90));
		printf("write_p50_%s_%s=%.3f\n", tag[k], name,
		       pct(w[k], rounds, 50));
		free(c[k]);
		free(w[k]);
	}
	printf("ack_cost_p50_%s=%.3f\n", name, p50[1] - p50[0]);
	return 0;
}

/* ---- read costs next to SQLite -------------------------------------------- */

/* One O_DIRECT read of path into buf (4 KiB aligned); ns spent, or -1. */
static int64_t timed_read(const char *path, char *buf)
{
	int64_t t0 = now_ns();
	int fd = open(path, O_RDONLY | O_DIRECT);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, 4096);
	close(fd);
	if (n != (ssize_t)sizeof(value))
		return -1;
	return now_ns() - t0;
}

static int bench_reads(int keys, int rounds, char **dirs)
{
	static const char *names[4] = {"hit_pg", "miss_pg", "hit_sqlite",
				       "miss_sqlite"};
	int64_t *lat[4];
	double p50[4];
	char path[4096], *buf;
	int c, i, r, n = keys * rounds;

	if (keys < 32 || rounds < 1 ||
	    posix_memalign((void **)&buf, 4096, 4096))
		return 2;
	for (c = 0; c < 4; c++) {
		lat[c] = calloc(n, sizeof(*lat[c]));
		if (!lat[c])
			return 1;
		for (i = 0; i < keys; i++) {
			snprintf(path, sizeof(path), "%s/r%d", dirs[c], i);
			if (tl_write_file(path, value, sizeof(value)))
				return fprintf(stderr, "write %s: %s\n", path,
					       strerror(errno)),
				       1;
		}
	}
	for (i = 0; i < keys; i++) /* the hit regions' warm pass */
		for (c = 0; c < 4; c += 2) {
			snprintf(path, sizeof(path), "%s/r%d", dirs[c], i);
			if (timed_read(path, buf) < 0)
				return fprintf(stderr, "read %s\n", path), 1;
		}
	for (r = 0; r < rounds; r++)
		for (i = 0; i < keys; i++)
			for (c = 0; c < 4; c++) {
				snprintf(path, sizeof(path), "%s/r%d", dirs[c],
					 i);
				lat[c][r * keys + i] = timed_read(path, buf);
				if (lat[c][r * keys + i] < 0)
					return fprintf(stderr, "read %s\n",
						       path),
					       1;
			}
	printf("reads through the mount (open O_DIRECT, read, close), %d "
	       "keys of %zu bytes, %d rounds, interleaved\n",
	       keys, sizeof(value), rounds);
	for (c = 0; c < 4; c++) {
		p50[c] = pct(lat[c], n, 50) * 1e3;
		printf("read_%s_p50_us=%.1f\nread_%s_p90_us=%.1f\n", names[c],
		       p50[c], names[c], pct(lat[c], n, 90) * 1e3);
		free(lat[c]);
	}
	printf("cost_ratio_hit_pg_sqlite=%.2f\ncost_ratio_miss_pg_sqlite=%."
	       "2f\n",
	       p50[0] / p50[2], p50[1] / p50[3]);
	free(buf);
	return 0;
}

/* ---- the cost of one lone durable write ----------------------------------- */

/* A backend's CPU time so far (ns), from /proc/PID/schedstat; -1: unknown. */
static int64_t backend_cpu_ns(int pid)
{
	char path[64];
	long long ns = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &ns) != 1)
		ns = -1;
	fclose(f);
	return ns;
}

static int64_t process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One text value of a one-row query on c; "" on failure (static). */
static const char *query1(PGconn *c, const char *sql)
{
	static char out[128];
	PGresult *r = PQexec(c, sql);

	out[0] = '\0';
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		snprintf(out, sizeof(out), "%s", PQgetvalue(r, 0, 0));
	else
		fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	return out;
}

/* The WAL position, as bytes and as the LSN's text (lsn: 32 bytes). */
static uint64_t wal_pos(PGconn *mon, char *lsn)
{
	snprintf(lsn, 32, "%s", query1(mon, "SELECT pg_current_wal_lsn()"));
	return strtoull(query1(mon, "SELECT pg_current_wal_lsn() - '0/0'"),
			NULL, 10);
}

/* The pid of the store's writer backend (the one that ran its put). */
static int store_writer_pid(PGconn *mon)
{
	return atoi(query1(mon, "SELECT pid FROM pg_stat_activity WHERE "
				"application_name = 'regionfs' AND query "
				"LIKE 'WITH %regionfs.kv%' ORDER BY "
				"backend_start LIMIT 1"));
}

struct cost {
	uint64_t wal;
	int64_t server_ns, client_ns, wall_ns;
	char lsn0[32], lsn1[32];
};

static int raw_put(PGconn *c, int i)
{
	char k[48], size[16], mt[24];
	const char *vals[5] = {"raw", k, value, size, mt};
	int lens[5] = {0, 0, sizeof(value), 0, 0}, fmts[5] = {0, 1, 1, 0, 0};
	PGresult *r;
	int rc = 0;

	snprintf(size, sizeof(size), "%zu", sizeof(value));
	snprintf(k, sizeof(k), "r0-%d", i % 1000);
	lens[1] = (int)strlen(k);
	snprintf(mt, sizeof(mt), "%" PRId64, now_ns());
	r = PQexecPrepared(c, "up", 5, vals, lens, fmts, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "raw: %s", PQresultErrorMessage(r));
		rc = -EIO;
	}
	PQclear(r);
	return rc;
}

static int store_put1(struct store *st, int i)
{
	char k[48];

	snprintf(k, sizeof(k), "s0-%d", i % 1000);
	return store_put(st, "bench", k, strlen(k), value, sizeof(value),
			 STORE_DURABLE, NULL);
}

/* n writes one way (st NULL: raw on c), measured. */
static int cost_block(PGconn *mon, struct store *st, PGconn *c, int pid, int n,
		      struct cost *out)
{
	int64_t s0, c0, t0;
	uint64_t w0;
	int i, rc = 0;

	w0 = wal_pos(mon, out->lsn0);
	s0 = backend_cpu_ns(pid);
	c0 = process_cpu_ns();
	t0 = now_ns();
	for (i = 0; i < n && !rc; i++)
		rc = st ? store_put1(st, i) : raw_put(c, i);
	out->wall_ns = now_ns() - t0;
	out->client_ns = process_cpu_ns() - c0;
	out->server_ns = backend_cpu_ns(pid) - s0;
	out->wal = wal_pos(mon, out->lsn1) - w0;
	return rc;
}

static int bench_cost(const char *conninfo, int n, int reps)
{
	struct store_options o = {0};
	struct store *st;
	PGconn *mon = PQconnectdb(conninfo), *raw = PQconnectdb(conninfo);
	const char *only = getenv("BENCH_COST_ONLY"); /* store or raw */
	struct cost cs, cr;
	int i, rc, spid, rpid;

	if (PQstatus(mon) != CONNECTION_OK || PQstatus(raw) != CONNECTION_OK)
		return fprintf(stderr, "connect: %s", PQerrorMessage(mon)), 1;
	rc = store_open(conninfo, &o, &st);
	if (rc)
		return fprintf(stderr, "store_open: %s\n", strerror(-rc)), 1;
	PQclear(PQexec(raw, "SET synchronous_commit = on"));
	PQclear(PQprepare(raw, "up",
			  "INSERT INTO regionfs.kv AS t"
			  "(region, key, value, size, mtime_ns, version) "
			  "VALUES ($1, $2, $3, $4, $5, 1) "
			  "ON CONFLICT (region, key) DO UPDATE SET "
			  "value = excluded.value, size = excluded.size, "
			  "mtime_ns = excluded.mtime_ns, "
			  "version = coalesce(t.version, 0) + 1 RETURNING "
			  "version",
			  5, NULL));
	if (getenv("BENCH_COST_SQL")) /* an experiment's setting */
		PQclear(PQexec(mon, getenv("BENCH_COST_SQL")));
	for (i = 0; i < 1000 && !rc; i++) /* every row exists */
		rc = store_put1(st, i) || raw_put(raw, i);
	if (rc)
		return 1;
	spid = store_writer_pid(mon);
	rpid = PQbackendPID(raw);
	printf("lone durable writes, %d per block, 100-byte values over 1000 "
	       "existing rows; per write: WAL bytes, server CPU (the "
	       "writing backend), client CPU (this process), wall time\n",
	       n);
	for (i = 0; i < reps; i++) {
		memset(&cs, 0, sizeof(cs));
		memset(&cr, 0, sizeof(cr));
		if ((!only || !strcmp(only, "store")) &&
		    cost_block(mon, st, NULL, spid, n, &cs))
			return 1;
		if ((!only || !strcmp(only, "raw")) &&
		    cost_block(mon, NULL, raw, rpid, n, &cr))
			return 1;
		printf("block %d: store wal %.1f B server %.1f us client %.1f "
		       "us wall %.1f us | raw wal %.1f B server %.1f us client "
		       "%.1f us wall %.1f us | store wal %s..%s raw wal "
		       "%s..%s\n",
		       i, (double)cs.wal / n, cs.server_ns / 1e3 / n,
		       cs.client_ns / 1e3 / n, cs.wall_ns / 1e3 / n,
		       (double)cr.wal / n, cr.server_ns / 1e3 / n,
		       cr.client_ns / 1e3 / n, cr.wall_ns / 1e3 / n, cs.lsn0,
		       cs.lsn1, cr.lsn0, cr.lsn1);
		fflush(stdout);
	}
	store_close(st);
	PQfinish(raw);
	PQfinish(mon);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "writes"))
		return bench_writes(argv[2], argc > 3 ? atof(argv[3]) : 4.0,
				    argc > 4 ? argv[4] : "1,4,8");
	if (argc >= 4 && !strcmp(argv[1], "latency"))
		return bench_latency(argv[2], argv[3],
				     argc > 4 ? atoi(argv[4]) : 200);
	if (argc >= 5 && !strcmp(argv[1], "close"))
		return bench_close(argv[2], argv[3], argv[4],
				   argc > 5 ? atoi(argv[5]) : 200);
	if (argc >= 3 && !strcmp(argv[1], "cost"))
		return bench_cost(argv[2], argc > 3 ? atoi(argv[3]) : 2000,
				  argc > 4 ? atoi(argv[4]) : 3);
	if (argc == 8 && !strcmp(argv[1], "reads"))
		return bench_reads(atoi(argv[2]), atoi(argv[3]), argv + 4);
	fprintf(stderr,
		"usage: bench_pg writes CONNINFO [SECONDS] [THREADS,...]\n"
		"       bench_pg latency DIR_A DIR_B [ROUNDS]\n"
		"       bench_pg close NAME DIR_BOUNDED DIR_STRICT [ROUNDS]\n"
		"       bench_pg reads KEYS ROUNDS PG_HIT PG_MISS SQLITE_HIT "
		"SQLITE_MISS\n"
		"       bench_pg cost CONNINFO [WRITES] [REPS]\n");
	return 2;
}
