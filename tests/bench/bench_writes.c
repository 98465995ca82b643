/*
 * bench_writes.c - new-key writes per second, through a mount or as raw
 * SQLite single-row commits, for run_bench_writes.sh.
 *
 *   bench_writes fs DIR N THREADS SIZE
 *   bench_writes sqlite DBFILE N THREADS SIZE full|normal
 *
 * fs: THREADS threads create N keys of SIZE bytes in DIR between them
 * (open(O_CREAT|O_WRONLY|O_TRUNC), one write, close: what an application
 * storing values does). sqlite: THREADS threads, each with its own
 * connection to DBFILE (WAL, synchronous=FULL or NORMAL, busy timeout
 * 10 s), insert N rows of SIZE bytes between them, one row per commit
 * (autocommit INSERT OR REPLACE into a table keyed like regionfs's kv):
 * the baseline issue 9 names, "raw SQLite single-row commits". Every
 * thread waits at a barrier; the time runs from the release to the last
 * thread's end. Prints "rate OPS_PER_S".
 *
 * A program, not a test: it fails only if an operation fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define MAX_THREADS 64

static const char *target;
static bool use_sqlite;
static const char *sync_mode;
static unsigned nkeys, nthreads;
static size_t size;
static pthread_barrier_t start;

struct worker {
	pthread_t tid;
	unsigned id;
};

static void fs_writes(unsigned id, const char *buf)
{
	char path[4096];
	unsigned i;

	for (i = id; i < nkeys; i += nthreads) {
		snprintf(path, sizeof(path), "%s/w-%u", target, i);
		if (tl_write_file(path, buf, size))
			tl_die("%s %s: %s", tl_failed_call(), path,
			       strerror(errno));
	}
}

static sqlite3 *db_open(void)
{
	char sql[64];
	sqlite3 *db;

	if (sqlite3_open_v2(target, &db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				    SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK)
		tl_die("open %s: %s", target, sqlite3_errmsg(db));
	sqlite3_busy_timeout(db, 10000);
	snprintf(sql, sizeof(sql), "PRAGMA synchronous=%s", sync_mode);
	if (sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) ||
	    sqlite3_exec(db, sql, NULL, NULL, NULL))
		tl_die("%s: %s", target, sqlite3_errmsg(db));
	return db;
}

static void sqlite_writes(sqlite3 *db, unsigned id, const char *buf)
{
	sqlite3_stmt *st;
	char key[32];
	unsigned i;

	if (sqlite3_prepare_v2(db,
			       "INSERT OR REPLACE INTO kv(region, key, value)"
			       " VALUES('bench', ?1, ?2)",
			       -1, &st, NULL))
		tl_die("prepare: %s", sqlite3_errmsg(db));
	for (i = id; i < nkeys; i += nthreads) {
		snprintf(key, sizeof(key), "w-%u", i);
		sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
		sqlite3_bind_blob(st, 2, buf, (int)size, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
			tl_die("insert %s: %s", key, sqlite3_errmsg(db));
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	sqlite3 *db = use_sqlite ? db_open() : NULL;
	char *buf = malloc(size ? size : 1);

	if (!buf)
		tl_die("out of memory");
	memset(buf, 'a' + (int)(w->id % 26), size);
	pthread_barrier_wait(&start);
	if (db)
		sqlite_writes(db, w->id, buf);
	else
		fs_writes(w->id, buf);
	sqlite3_close(db);
	free(buf);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_writes fs DIR N THREADS SIZE\n"
			"       bench_writes sqlite DBFILE N THREADS SIZE "
			"full|normal\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct worker w[MAX_THREADS];
	uint64_t t0, t1;
	unsigned i;

	if (argc < 6)
		usage();
	use_sqlite = strcmp(argv[1], "sqlite") == 0;
	if (!use_sqlite && strcmp(argv[1], "fs") != 0)
		usage();
	if (use_sqlite && argc != 7)
		usage();
	target = argv[2];
	nkeys = (unsigned)strtoul(argv[3], NULL, 10);
	nthreads = (unsigned)strtoul(argv[4], NULL, 10);
	size = strtoul(argv[5], NULL, 10);
	sync_mode = use_sqlite ? argv[6] : "";
	if (!nkeys || !nthreads || nthreads > MAX_THREADS)
		usage();
	if (use_sqlite) {
		sqlite3 *db = db_open();

		if (sqlite3_exec(db,
				 "CREATE TABLE IF NOT EXISTS kv(region TEXT "
				 "NOT NULL, key TEXT NOT NULL, value BLOB NOT "
				 "NULL, PRIMARY KEY(region, key))",
				 NULL, NULL, NULL))
			tl_die("create: %s", sqlite3_errmsg(db));
		sqlite3_close(db);
	}
	pthread_barrier_init(&start, NULL, nthreads + 1);
	for (i = 0; i < nthreads; i++) {
		w[i].id = i;
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]))
			tl_die("pthread_create failed");
	}
	/* every thread has its connection and buffer: go */
	t0 = tl_now_ns();
	pthread_barrier_wait(&start);
	for (i = 0; i < nthreads; i++)
		pthread_join(w[i].tid, NULL);
	t1 = tl_now_ns();
	printf("rate %.1f\n", nkeys / ((t1 - t0) / 1e9));
	return 0;
}
