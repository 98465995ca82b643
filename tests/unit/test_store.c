/*
 * test_store.c - unit tests of the SQLite store (store/store.c).
 *
 * Every test gets a fresh mkdtemp() directory with a store opened on
 * dir/store.db; the teardown closes it and removes the directory. An
 * "outside" connection (plain sqlite3, as the shell or a loader script
 * would use) stands in for other writers. Nothing here sleeps to let a
 * race happen: concurrency tests check invariants that must hold under
 * any interleaving, and the busy test holds a real lock for as long as it
 * needs. The ENOSPC test forks a child that mounts a 1 MiB tmpfs in a
 * private mount namespace; it is skipped where that is not allowed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"
#include "store_int.h"
#include "store_helpers.h"

/* the condition whose signals __wrap_pthread_cond_signal() counts */
static _Atomic(pthread_cond_t *) signals_watched;
static atomic_int signals_seen;
int __real_pthread_cond_signal(pthread_cond_t *cond);
int __wrap_pthread_cond_signal(pthread_cond_t *cond);

struct fixture {
	char dir[64];
	char path[128];
	struct store *st;
};

static int rm_tree_files(const char *dir)
{
	static const char *const names[] = {
		"store.db",	"store.db-wal", "store.db-shm", "other.db",
		"other.db-wal", "other.db-shm", "junk.db"};
	char p[256];
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	snprintf(p, sizeof(p), "%s/tmpfs", dir);
	rmdir(p);
	return rmdir(dir);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/test_store.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/store.db", f->dir);
	if (store_open(f->path, NULL, &f->st))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	store_test_set_gather(NULL); /* a failed test may leave it set */
	atomic_store(&signals_watched, NULL);
	store_close(f->st);
	rm_tree_files(f->dir);
	free(f);
	return 0;
}

/* ---- helpers ----------------------------------------------------------- */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int put_str(struct store *st, const char *region, const char *key,
		   const char *val, struct store_meta *meta)
{
	return store_put(st, region, key, strlen(key), val, strlen(val), 0,
			 meta);
}

/* Loads (region, key) and checks it holds exactly val. */
static void assert_value(struct store *st, const char *region, const char *key,
			 const void *val, size_t len)
{
	struct store_meta m;
	void *data;

	assert_int_equal(store_load(st, region, key, strlen(key), &data, &m),
			 0);
	assert_int_equal(m.size, len);
	if (len)
		assert_memory_equal(data, val, len);
	else
		assert_null(data);
	free(data);
}

static sqlite3 *outside_open(const char *path)
{
	sqlite3 *db = NULL;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	return db;
}

/* Collects store_changes() callbacks as "region/key" lines ("*" = all). */

/* ---- round trips ------------------------------------------------------- */

static void test_put_load_stat_delete_round_trip(void **state)
{
	struct fixture *f = *state;
	struct store_meta m1, m2, ms;
	int64_t t0 = now_ns();
	void *data;

	assert_int_equal(put_str(f->st, "r", "k", "hello", &m1), 0);
	assert_int_equal(m1.size, 5);
	assert_int_equal(m1.version, 1);
	assert_true(m1.mtime_ns >= t0 && m1.mtime_ns <= now_ns());
	assert_int_equal(store_load(f->st, "r", "k", 1, &data, &m2), 0);
	assert_memory_equal(data, "hello", 5);
	free(data);
	assert_memory_equal(&m1, &m2, sizeof(m1));
	assert_int_equal(store_stat(f->st, "r", "k", 1, &ms), 0);
	assert_memory_equal(&m1, &ms, sizeof(m1));

	assert_int_equal(put_str(f->st, "r", "k", "bye", &m2), 0);
	assert_int_equal(m2.version, 2);
	assert_int_equal(m2.size, 3);
	assert_value(f->st, "r", "k", "bye", 3);
	/* same key in another region is another row */
	assert_int_equal(store_stat(f->st, "other", "k", 1, &ms), -ENOENT);

	assert_int_equal(store_delete(f->st, "r", "k", 1, 0), 0);
	assert_int_equal(store_load(f->st, "r", "k", 1, &data, NULL), -ENOENT);
	assert_null(data);
	assert_int_equal(store_stat(f->st, "r", "k", 1, &ms), -ENOENT);
	assert_int_equal(store_delete(f->st, "r", "k", 1, 0), -ENOENT);
}

static void test_missing_keys_are_enoent(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;
	void *data = (void *)1;

	assert_int_equal(store_load(f->st, "r", "nope", 4, &data, &m), -ENOENT);
	assert_null(data);
	assert_int_equal(store_stat(f->st, "r", "nope", 4, &m), -ENOENT);
	assert_int_equal(store_delete(f->st, "r", "nope", 4, 0), -ENOENT);
	assert_int_equal(store_rename(f->st, "r", "nope", 4, "x", 1, 0),
			 -ENOENT);
	assert_int_equal(store_rename(f->st, "r", "nope", 4, "nope", 4, 0),
			 -ENOENT);
	assert_int_equal(store_stat(f->st, "r", "x", 1, &m), -ENOENT);
}

static void test_bad_arguments_are_refused(void **state)
{
	struct fixture *f = *state;
	char big[STORE_MAX_KEY + 1];
	struct store *st;

	memset(big, 'a', sizeof(big));
	assert_int_equal(store_put(f->st, "r", "", 0, "v", 1, 0, NULL),
			 -EINVAL);
	assert_int_equal(
		store_put(f->st, "r", big, sizeof(big), "v", 1, 0, NULL),
		-ENAMETOOLONG);
	assert_int_equal(store_put(f->st, "r", "a/b", 3, "v", 1, 0, NULL),
			 -EINVAL);
	assert_int_equal(store_put(f->st, "r", "a\0b", 3, "v", 1, 0, NULL),
			 -EINVAL);
	assert_int_equal(store_put(f->st, NULL, "a", 1, "v", 1, 0, NULL),
			 -EINVAL);
	assert_int_equal(store_put(f->st, "r", "a", 1, "v", 1, 0x80, NULL),
			 -EINVAL);
	assert_int_equal(store_rename(f->st, "r", "a", 1, "b/c", 3, 0),
			 -EINVAL);
	assert_int_equal(store_open(":memory:", NULL, &st), -EINVAL);
	assert_null(st);
	assert_int_equal(store_open("", NULL, &st), -EINVAL);
	assert_int_equal(store_open("/nonexistent-dir/x.db", NULL, &st),
			 -ENOENT);
	assert_null(st);
}

static void test_keys_with_any_bytes_round_trip(void **state)
{
	struct fixture *f = *state;
	char keys[6][STORE_MAX_KEY];
	size_t lens[6], i, j;
	struct store_meta m;
	void *data;

	strcpy(keys[0], " spaced key ");
	strcpy(keys[1], ".hidden");
	strcpy(keys[2], "\xff\xfe not utf-8 \x80");
	strcpy(keys[3], "caf\xc3\xa9");
	for (i = 0, j = 0; i < 254; i++) { /* every byte but NUL and '/' */
		if (i + 1 != '/')
			keys[4][j++] = (char)(i + 1);
	}
	lens[4] = j;
	memset(keys[5], 'z', STORE_MAX_KEY); /* the longest name */
	lens[5] = STORE_MAX_KEY;
	for (i = 0; i < 4; i++)
		lens[i] = strlen(keys[i]);
	for (i = 0; i < 6; i++)
		assert_int_equal(store_put(f->st, "r", keys[i], lens[i], &i,
					   sizeof(i), 0, NULL),
				 0);
	for (i = 0; i < 6; i++) {
		assert_int_equal(
			store_load(f->st, "r", keys[i], lens[i], &data, &m), 0);
		assert_int_equal(m.size, sizeof(i));
		assert_memory_equal(data, &i, sizeof(i));
		free(data);
	}
}

static void test_empty_and_large_values(void **state)
{
	struct fixture *f = *state;
	size_t big = 6 << 20, i;
	struct store_meta m;
	unsigned char *buf;
	void *data;

	assert_int_equal(store_put(f->st, "r", "empty", 5, NULL, 0, 0, &m), 0);
	assert_int_equal(m.size, 0);
	assert_value(f->st, "r", "empty", NULL, 0);
	assert_int_equal(store_stat(f->st, "r", "empty", 5, &m), 0);
	assert_int_equal(m.size, 0);

	buf = malloc(big);
	assert_non_null(buf);
	for (i = 0; i < big; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	assert_int_equal(store_put(f->st, "r", "big", 3, buf, big, 0, &m), 0);
	assert_int_equal(m.size, big);
	assert_int_equal(store_load(f->st, "r", "big", 3, &data, &m), 0);
	assert_int_equal(m.size, big);
	assert_memory_equal(data, buf, big);
	free(data);
	assert_int_equal(store_stat(f->st, "r", "big", 3, &m), 0);
	assert_int_equal(m.size, big);
	free(buf);
}

/* ---- rename ------------------------------------------------------------- */

static void test_rename_replaces_target_and_raises_version(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;
	uint64_t nkeys, bytes;

	assert_int_equal(put_str(f->st, "r", "src", "SOURCE", NULL), 0);
	assert_int_equal(put_str(f->st, "r", "dst", "old1", NULL), 0);
	assert_int_equal(put_str(f->st, "r", "dst", "old2", NULL), 0);
	assert_int_equal(put_str(f->st, "r", "dst", "old3", &m), 0);
	assert_int_equal(m.version, 3);

	assert_int_equal(store_rename(f->st, "r", "src", 3, "dst", 3, 0), 0);
	assert_int_equal(store_stat(f->st, "r", "src", 3, &m), -ENOENT);
	assert_value(f->st, "r", "dst", "SOURCE", 6);
	assert_int_equal(store_stat(f->st, "r", "dst", 3, &m), 0);
	assert_int_equal(m.version, 4); /* max(3, 1) + 1 */
	assert_int_equal(store_region_usage(f->st, "r", &nkeys, &bytes), 0);
	assert_int_equal(nkeys, 1);
	assert_int_equal(bytes, 6);

	/* onto a new name; then onto itself: a no-op */
	assert_int_equal(store_rename(f->st, "r", "dst", 3, "new", 3, 0), 0);
	assert_int_equal(store_stat(f->st, "r", "new", 3, &m), 0);
	assert_int_equal(m.version, 5);
	assert_int_equal(store_rename(f->st, "r", "new", 3, "new", 3, 0), 0);
	assert_int_equal(store_stat(f->st, "r", "new", 3, &m), 0);
	assert_int_equal(m.version, 5);
	assert_value(f->st, "r", "new", "SOURCE", 6);
}

struct rename_reader {
	struct store *st;
	int stop; /* __atomic_*: set once the renames are done */
	pthread_barrier_t start;
	int missing, bad, reads;
};

static void *rename_reader_main(void *arg)
{
	struct rename_reader *r = arg;
	struct store_meta m;
	void *data;
	int rc;

	pthread_barrier_wait(&r->start);
	do { /* at least once, however the threads are scheduled */
		rc = store_load(r->st, "r", "target", 6, &data, &m);
		r->reads++;
		if (rc == -ENOENT)
			r->missing++;
		else if (rc || m.size != 8 || memcmp(data, "version-", 8))
			r->bad++;
		free(data);
	} while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE));
	return NULL;
}

/*
 * A reader of the target never finds it missing or mixed while it is
 * replaced by renames, whatever the interleaving.
 */
static void test_rename_is_atomic_for_readers(void **state)
{
	struct fixture *f = *state;
	struct rename_reader r = {.st = f->st};
	pthread_t t;
	int i;

	assert_int_equal(put_str(f->st, "r", "target", "version-", NULL), 0);
	pthread_barrier_init(&r.start, NULL, 2);
	assert_int_equal(pthread_create(&t, NULL, rename_reader_main, &r), 0);
	pthread_barrier_wait(&r.start);
	for (i = 0; i < 100; i++) {
		assert_int_equal(put_str(f->st, "r", "tmp", "version-", NULL),
				 0);
		assert_int_equal(
			store_rename(f->st, "r", "tmp", 3, "target", 6, 0), 0);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&r.start);
	assert_int_equal(r.missing, 0);
	assert_int_equal(r.bad, 0);
	assert_true(r.reads > 0);
}

/* ---- persistence, listing, usage --------------------------------------- */

static void test_reopen_keeps_data(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;

	assert_int_equal(put_str(f->st, "r", "a", "alpha", NULL), 0);
	assert_int_equal(put_str(f->st, "r", "a", "alpha2", NULL), 0);
	assert_int_equal(put_str(f->st, "s", "b", "beta", NULL), 0);
	store_close(f->st);
	f->st = NULL;
	assert_int_equal(store_open(f->path, NULL, &f->st), 0);
	assert_value(f->st, "r", "a", "alpha2", 6);
	assert_value(f->st, "s", "b", "beta", 4);
	assert_int_equal(store_stat(f->st, "r", "a", 1, &m), 0);
	assert_int_equal(m.version, 2);
}

static void test_db_file_is_private(void **state)
{
	struct fixture *f = *state;
	struct stat sb;
	mode_t old = umask(0);
	struct store *st;
	char p[256];

	snprintf(p, sizeof(p), "%s/other.db", f->dir);
	assert_int_equal(store_open(p, NULL, &st), 0);
	umask(old);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	store_close(st);
}

/* The file renamed away under an open store: everything is EIO from then. */
static void test_replaced_file_is_lost(void **state)
{
	struct fixture *f = *state;
	struct store_stats s;
	void *data = NULL;
	char old[300];

	assert_int_equal(put_str(f->st, "r", "a", "alpha", NULL), 0);
	assert_false(store_file_lost(f->st));
	snprintf(old, sizeof(old), "%s.old", f->path);
	assert_int_equal(rename(f->path, old), 0);
	assert_int_equal(put_str(f->st, "r", "b", "beta", NULL), -EIO);
	assert_true(store_file_lost(f->st));
	assert_int_equal(store_load(f->st, "r", "a", 1, &data, NULL), -EIO);
	assert_int_equal(store_delete(f->st, "r", "a", 1, 0), -EIO);
	store_stats(f->st, &s);
	assert_true(s.file_lost);
	assert_true(s.errs[STORE_ERR_LOST] >= 3);
	assert_int_equal(rename(old, f->path), 0); /* back: still lost */
	assert_true(store_file_lost(f->st));
}

/* A read-only store reads and refuses every change with EROFS. */
static void test_read_only_store(void **state)
{
	struct fixture *f = *state;
	struct store_options o = {.read_only = true};
	struct store *ro;
	struct store_stats s;

	assert_int_equal(put_str(f->st, "r", "a", "alpha", NULL), 0);
	assert_int_equal(store_open(f->path, &o, &ro), 0);
	assert_value(ro, "r", "a", "alpha", 5);
	assert_int_equal(put_str(ro, "r", "b", "beta", NULL), -EROFS);
	assert_int_equal(store_delete(ro, "r", "a", 1, 0), -EROFS);
	assert_int_equal(store_sync(ro), 0);
	store_stats(ro, &s);
	assert_true(s.read_only);
	store_close(ro);
}

#define NLIST 10000

/* Key i: 1..13 bytes with high bytes, spaces and dots; distinct per i. */
static size_t list_key(int i, char *out)
{
	return (size_t)sprintf(out, "%c%c%05d%s", (char)(0x80 + i % 100),
			       i % 3 ? '.' : ' ', i, i % 7 ? "" : "\xe2\x82");
}

struct list_ctx {
	char last[STORE_MAX_KEY];
	size_t lastlen;
	int seen, bad_order, bad_meta;
};

static int list_cb(void *ctx, const void *key, size_t klen,
		   const struct store_meta *meta)
{
	struct list_ctx *c = ctx;
	size_t n = klen < c->lastlen ? klen : c->lastlen;
	int cmp = memcmp(c->last, key, n);

	if (c->seen && (cmp > 0 || (cmp == 0 && c->lastlen >= klen)))
		c->bad_order++;
	if (meta->size != klen || meta->version != 1)
		c->bad_meta++;
	memcpy(c->last, key, klen);
	c->lastlen = klen;
	c->seen++;
	return 0;
}

static void bulk_load_list_keys(const char *path)
{
	sqlite3 *db = outside_open(path);
	sqlite3_stmt *s;
	char key[32];
	size_t n;
	int i;

	outside_exec(db, "BEGIN");
	assert_int_equal(sqlite3_prepare_v2(db,
					    "INSERT INTO kv(region, key, value)"
					    " VALUES ('r', ?1, ?1)",
					    -1, &s, NULL),
			 SQLITE_OK);
	for (i = NLIST - 1; i >= 0; i--) { /* reverse: order is the store's */
		n = list_key(i, key);
		sqlite3_bind_text(s, 1, key, (int)n, SQLITE_STATIC);
		assert_int_equal(sqlite3_step(s), SQLITE_DONE);
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	outside_exec(db, "INSERT INTO kv(region, key, value) "
			 "VALUES ('r', 'bad/name', 'x'), ('r', '', 'x'), "
			 "('r', X'ff', 'x'), ('r', X'6b', 'x')");
	outside_exec(db, "COMMIT");
	sqlite3_close(db);
}

static void test_list_pages_in_byte_order(void **state)
{
	struct fixture *f = *state;
	struct list_ctx c = {.lastlen = 0};
	int n, pages = 0;

	bulk_load_list_keys(f->path);
	do { /* resume from the last key seen, 333 at a time */
		n = store_list(f->st, "r", c.seen ? c.last : NULL,
			       c.seen ? c.lastlen : 0, 333, list_cb, &c);
		assert_true(n >= 0);
		pages++;
	} while (n == 333);
	/* invalid names and BLOB keys (sorted after all TEXT) not listed */
	assert_int_equal(c.seen, NLIST);
	assert_int_equal(c.bad_order, 0);
	assert_int_equal(c.bad_meta, 0);
	assert_int_equal(pages, NLIST / 333 + 1);
	assert_int_equal(store_list(f->st, "none", NULL, 0, 10, list_cb, &c),
			 0);
}

static int stop_at_third(void *ctx, const void *key, size_t klen,
			 const struct store_meta *meta)
{
	int *n = ctx;

	(void)key;
	(void)klen;
	(void)meta;
	return ++*n == 3;
}

static void test_list_stops_when_callback_says_so(void **state)
{
	struct fixture *f = *state;
	int calls = 0;

	assert_int_equal(put_str(f->st, "r", "a", "1", NULL), 0);
	assert_int_equal(put_str(f->st, "r", "b", "1", NULL), 0);
	assert_int_equal(put_str(f->st, "r", "c", "1", NULL), 0);
	assert_int_equal(put_str(f->st, "r", "d", "1", NULL), 0);
	assert_int_equal(
		store_list(f->st, "r", NULL, 0, 100, stop_at_third, &calls), 3);
	calls = 0;
	assert_int_equal(
		store_list(f->st, "r", "b", 1, 100, stop_at_third, &calls), 2);
	assert_int_equal(
		store_list(f->st, "r", NULL, 0, 0, stop_at_third, &calls), 0);
}

static void test_region_usage_counts_keys_and_bytes(void **state)
{
	struct fixture *f = *state;
	uint64_t n, b;

	assert_int_equal(store_region_usage(f->st, "r1", &n, &b), 0);
	assert_int_equal(n, 0);
	assert_int_equal(b, 0);
	assert_int_equal(put_str(f->st, "r1", "a", "1", NULL), 0);
	assert_int_equal(put_str(f->st, "r1", "b", "1234567890", NULL), 0);
	assert_int_equal(put_str(f->st, "r1", "c", "", NULL), 0);
	assert_int_equal(put_str(f->st, "r2", "a", "12345", NULL), 0);
	assert_int_equal(store_region_usage(f->st, "r1", &n, &b), 0);
	assert_int_equal(n, 3);
	assert_int_equal(b, 11);
	assert_int_equal(store_delete(f->st, "r1", "b", 1, 0), 0);
	assert_int_equal(store_region_usage(f->st, "r1", &n, &b), 0);
	assert_int_equal(n, 2);
	assert_int_equal(b, 1);
	assert_int_equal(store_region_usage(f->st, "r2", &n, &b), 0);
	assert_int_equal(n, 1);
	assert_int_equal(b, 5);
}

/* ---- read connections ---------------------------------------------------- */

/* Page cache misses of every read connection of st so far. */
static long read_misses(struct store *st)
{
	struct rconn *rc;
	int cur, hi;
	long n = 0;

	pthread_mutex_lock(&st->pool_lock);
	for (rc = st->conns; rc; rc = rc->next_all)
		if (sqlite3_db_status(rc->db, SQLITE_DBSTATUS_CACHE_MISS, &cur,
				      &hi, 0) == SQLITE_OK)
			n += cur;
	pthread_mutex_unlock(&st->pool_lock);
	return n;
}

#define TURN_THREADS 4

struct turn_arg {
	struct store *st;
	pthread_barrier_t *ready, *end;
	sem_t *mine, *next; /* my turn; the next thread's */
	int rc;
};

/* Prepares, then one read in its turn, then lives until all have read. */
static void *turn_main(void *arg)
{
	struct turn_arg *a = arg;
	struct store_meta m;

	a->rc = store_thread_prepare(a->st);
	pthread_barrier_wait(a->ready);
	sem_wait(a->mine);
	if (a->rc == 0)
		a->rc = store_stat(a->st, "r", "k", 1, &m);
	sem_post(a->next);
	pthread_barrier_wait(a->end);
	return NULL;
}

/*
 * After a commit, threads that take turns reading read through the
 * connection used last, whose page cache already holds the new snapshot:
 * only the first read misses pages. With a connection per thread, each
 * thread's first read after the commit read the pages again.
 */
static void test_reads_share_the_connection_used_last(void **state)
{
	struct fixture *f = *state;
	struct turn_arg args[TURN_THREADS];
	pthread_t t[TURN_THREADS];
	sem_t turn[TURN_THREADS + 1], first;
	pthread_barrier_t ready, end;
	long m0, m1, m2;
	int i;

	pthread_barrier_init(&ready, NULL, TURN_THREADS + 1);
	pthread_barrier_init(&end, NULL, TURN_THREADS);
	for (i = 0; i <= TURN_THREADS; i++)
		sem_init(&turn[i], 0, 0);
	sem_init(&first, 0, 0);
	for (i = 0; i < TURN_THREADS; i++) {
		args[i] = (struct turn_arg){f->st,    &ready,	    &end,
					    &turn[i], &turn[i + 1], -1};
		if (i == 0) /* the first tells this thread, which goes on */
			args[i].next = &first;
		assert_int_equal(
			pthread_create(&t[i], NULL, turn_main, &args[i]), 0);
	}
	pthread_barrier_wait(&ready); /* every thread's connection is open */
	assert_int_equal(put_str(f->st, "r", "k", "v", NULL), 0);
	m0 = read_misses(f->st);
	sem_post(&turn[0]);
	sem_wait(&first); /* the first read is done */
	m1 = read_misses(f->st);
	sem_post(&turn[1]);
	sem_wait(&turn[TURN_THREADS]); /* every thread has read */
	m2 = read_misses(f->st);
	for (i = 0; i < TURN_THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(args[i].rc, 0);
	}
	print_message("page cache misses: first read %ld, the other %d %ld\n",
		      m1 - m0, TURN_THREADS - 1, m2 - m1);
	assert_true(m1 > m0);
	assert_int_equal(m2, m1);
	for (i = 0; i <= TURN_THREADS; i++)
		sem_destroy(&turn[i]);
	sem_destroy(&first);
	pthread_barrier_destroy(&ready);
	pthread_barrier_destroy(&end);
}

/* ---- group commit ------------------------------------------------------- */

#define GC_THREADS 8
#define GC_PUTS	   100

struct gc_arg {
	struct store *st;
	pthread_barrier_t *start;
	unsigned flags; /* of every put: 0 or STORE_DURABLE */
	int id, failures;
};

static void *gc_main(void *arg)
{
	struct gc_arg *a = arg;
	char key[32], val[32];
	int i;

	pthread_barrier_wait(a->start);
	for (i = 0; i < GC_PUTS; i++) {
		snprintf(key, sizeof(key), "t%d-%d", a->id, i);
		snprintf(val, sizeof(val), "value %d %d", a->id, i);
		if (store_put(a->st, "gc", key, strlen(key), val, strlen(val),
			      a->flags, NULL))
			a->failures++;
	}
	return NULL;
}

/*
 * nthreads threads put GC_PUTS keys each (with flags), each with one put
 * in flight; checks every put and returns the commits they took.
 */
static uint64_t gc_run(struct fixture *f, int nthreads, unsigned flags)
{
	struct gc_arg args[GC_THREADS];
	pthread_t t[GC_THREADS];
	pthread_barrier_t start;
	struct store_stats s0, s1;
	int i;

	store_stats(f->st, &s0);
	pthread_barrier_init(&start, NULL, (unsigned)nthreads);
	for (i = 0; i < nthreads; i++) {
		args[i] = (struct gc_arg){f->st, &start, flags, i, 0};
		assert_int_equal(pthread_create(&t[i], NULL, gc_main, &args[i]),
				 0);
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(args[i].failures, 0);
	}
	pthread_barrier_destroy(&start);
	store_stats(f->st, &s1);
	assert_int_equal(s1.rows - s0.rows, nthreads * GC_PUTS);
	print_message("group commit: %d puts in %llu commits, max batch %llu\n",
		      nthreads * GC_PUTS,
		      (unsigned long long)(s1.commits - s0.commits),
		      (unsigned long long)s1.max_batch);
	return s1.commits - s0.commits;
}

/*
 * Each caller has at most one put in flight, so a commit of one op per
 * put would need every one of 800 commits to find a single caller
 * waiting while seven others are runnable.
 */
static void test_group_commit_batches_concurrent_puts(void **state)
{
	struct fixture *f = *state;
	struct store_stats s;
	char key[32], val[32];
	int i, j;

	assert_true(gc_run(f, GC_THREADS, 0) < GC_THREADS * GC_PUTS);
	store_stats(f->st, &s);
	assert_true(s.max_batch > 1);
	for (i = 0; i < GC_THREADS; i++) {
		for (j = 0; j < GC_PUTS; j++) {
			snprintf(key, sizeof(key), "t%d-%d", i, j);
			snprintf(val, sizeof(val), "value %d %d", i, j);
			assert_value(f->st, "gc", key, val, strlen(val));
		}
	}
}

/*
 * Voluntary context switches of the store's writer thread (named
 * regionfs-store; the fixture has one store open), or -1 if not found;
 * *sleeping: it is in state S.
 */
static long writer_thread_switches(bool *sleeping)
{
	char path[320], comm[32], line[128], state = 0;
	long n = -1;
	struct dirent *de;
	FILE *fp;
	DIR *d = opendir("/proc/self/task");

	if (!d)
		return -1;
	while (n < 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 de->d_name);
		fp = fopen(path, "r");
		if (!fp)
			continue;
		if (!fgets(comm, sizeof(comm), fp))
			comm[0] = '\0';
		fclose(fp);
		if (strcmp(comm, "regionfs-store\n"))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
			 de->d_name);
		fp = fopen(path, "r");
		while (fp && fgets(line, sizeof(line), fp)) {
			if (sscanf(line, "State: %c", &state) == 1)
				continue;
			if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) ==
			    1)
				break;
		}
		if (fp)
			fclose(fp);
	}
	closedir(d);
	*sleeping = state == 'S';
	return n;
}

/*
 * A batch that queued while another ran is led by the caller of its
 * first op, which is woken anyway, not by the writer thread: the writer
 * thread sleeps through a run of concurrent puts that batch (max_batch >
 * 1: some batch queued behind another). Before, every such batch woke
 * the writer thread, which then woke the callers: one wake-up more.
 */
static void test_group_commit_hands_batches_to_callers(void **state)
{
	struct fixture *f = *state;
	struct store_stats s;
	long before, after;
	bool sleeping = false;
	int i;

	/* until the new writer thread sleeps for the first time */
	for (i = 0; i < 10000 && !sleeping; i++) {
		before = writer_thread_switches(&sleeping);
		assert_true(before >= 0);
		if (!sleeping)
			usleep(1000);
	}
	assert_true(sleeping);
	gc_run(f, GC_THREADS, 0);
	after = writer_thread_switches(&sleeping);
	store_stats(f->st, &s);
	assert_true(s.max_batch > 1);
	assert_int_equal(after, before);
}

/* ---- the durable batch gather, on a fake clock --------------------------- */

/*
 * The gather's clock and wait (store_test_set_gather()): the clock moves
 * only when the test moves it, so every bound and every learned time is
 * exact. A wait either times out at once (timeout: the clock jumps to its
 * deadline) or sleeps on the real condition until the op that completes
 * the group wakes it, with a real bound of 10 s that only a broken gather
 * reaches (counted in real_timeouts).
 */
struct fake_gather {
	atomic_llong now;     /* the fake clock, ns */
	atomic_llong step;    /* it moves this much at every reading */
	int real_bound_s;     /* a sleeping wait's real bound (10 s) */
	atomic_bool timeout;  /* waits time out at once */
	sem_t waiting;	      /* posted when a wait sleeps */
	int waits;	      /* L: st->lock; calls of wait */
	int64_t deadline;     /* L: st->lock; the last wait's */
	int real_timeouts;    /* L: st->lock */
	unsigned left_at_end; /* L: st->lock; gather_left when it returned */
};

static struct fake_gather fg;

static int64_t fake_now(void *arg)
{
	struct fake_gather *g = arg;
	int64_t step = atomic_load(&g->step);

	return atomic_fetch_add(&g->now, step) + step;
}

static int fake_wait(void *arg, struct store *st, int64_t deadline)
{
	struct fake_gather *g = arg;
	struct timespec ts;
	int rc;

	g->waits++;
	g->deadline = deadline;
	if (atomic_load(&g->timeout)) {
		atomic_store(&g->now, deadline);
		return ETIMEDOUT;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts); /* st->gather's clock */
	ts.tv_sec += g->real_bound_s;
	sem_post(&g->waiting);
	rc = pthread_cond_timedwait(&st->gather, &st->lock, &ts);
	g->left_at_end = st->gather_left;
	if (rc == ETIMEDOUT)
		g->real_timeouts++;
	return rc;
}

/*
 * pthread_cond_signal() of the store (linked with --wrap): counts the
 * signals of the condition watched (a store's gather), so a test sees
 * that only the op completing a group wakes its gather.
 */
int __wrap_pthread_cond_signal(pthread_cond_t *cond)
{
	if (cond == atomic_load(&signals_watched))
		atomic_fetch_add(&signals_seen, 1);
	return __real_pthread_cond_signal(cond);
}

static const struct store_test_gather fake_gather_hooks = {fake_now, fake_wait,
							   &fg};

#define FAKE_T0 1000000000000LL /* where the fake clock starts, ns */

static void fake_gather_start(void)
{
	memset(&fg, 0, sizeof(fg));
	atomic_init(&fg.now, FAKE_T0);
	atomic_init(&fg.timeout, false);
	atomic_init(&fg.step, 0);
	fg.real_bound_s = 10;
	assert_int_equal(sem_init(&fg.waiting, 0, 0), 0);
	store_test_set_gather(&fake_gather_hooks);
}

/* The gather's learned state, set or read under the store's lock. */
struct gather_state {
	unsigned group_target;
	int64_t gather_ns, durable_ns;
};

static void gather_set(struct store *st, struct gather_state g)
{
	pthread_mutex_lock(&st->lock);
	st->group_target = g.group_target;
	st->gather_ns = g.gather_ns;
	st->durable_ns = g.durable_ns;
	pthread_mutex_unlock(&st->lock);
}

static struct gather_state gather_get(struct store *st)
{
	struct gather_state g;

	pthread_mutex_lock(&st->lock);
	g.group_target = st->group_target;
	g.gather_ns = st->gather_ns;
	g.durable_ns = st->durable_ns;
	pthread_mutex_unlock(&st->lock);
	return g;
}

static int fake_waits(struct store *st, int64_t *deadline)
{
	int n;

	pthread_mutex_lock(&st->lock);
	n = fg.waits;
	if (deadline)
		*deadline = fg.deadline;
	pthread_mutex_unlock(&st->lock);
	return n;
}

static uint64_t commits_of(struct store *st)
{
	struct store_stats s;

	store_stats(st, &s);
	return s.commits;
}

struct dput_arg {
	struct store *st;
	char key[16];
	int rc;
};

static void *dput_main(void *arg)
{
	struct dput_arg *a = arg;

	a->rc = store_put(a->st, "g", a->key, strlen(a->key), "x", 1,
			  STORE_DURABLE, NULL);
	return NULL;
}

/*
 * Four durable writers of which three come back late (creates through
 * the kernel come back so, each after requests of its own): the last
 * durable batch held four, so the next one, led by the first writer
 * back, waits for three more. Its bound is the longer of half a durable
 * commit (150 us here) and twice what complete gathers took (800 us):
 * the three come 500 us after it began waiting, past half a commit, and
 * still share its commit, which only the op that completes the group
 * wakes. The gather then learns its time (a moving average of 1/8), and
 * the commit's (the fake clock stood still during it: 0). Before the
 * fake clock, this ran real writers with pauses and skipped where a
 * commit alone took under 100 us or over 1 ms (2 rounds of 5).
 */
static void test_durable_writers_wait_for_late_peers(void **state)
{
	struct fixture *f = *state;
	struct dput_arg a[4];
	struct gather_state g;
	pthread_t t[4];
	struct timespec ts;
	uint64_t c0;
	int64_t deadline;
	int i;

	fake_gather_start();
	gather_set(f->st, (struct gather_state){4, 400000, 300000});
	c0 = commits_of(f->st);
	for (i = 0; i < 4; i++) {
		a[i] = (struct dput_arg){.st = f->st};
		snprintf(a[i].key, sizeof(a[i].key), "w%d", i);
	}
	atomic_store(&signals_seen, 0);
	atomic_store(&signals_watched, &f->st->gather);
	assert_int_equal(pthread_create(&t[0], NULL, dput_main, &a[0]), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	assert_int_equal(sem_timedwait(&fg.waiting, &ts), 0); /* it waits */
	assert_int_equal(fake_waits(f->st, &deadline), 1);
	assert_int_equal(deadline, FAKE_T0 + 800000); /* 2 x 400 us */
	atomic_store(&fg.now, FAKE_T0 + 500000);      /* the others, late */
	for (i = 1; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, dput_main, &a[i]),
				 0);
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].rc, 0);
	}
	assert_int_equal(commits_of(f->st) - c0, 1); /* one commit for four */
	assert_int_equal(atomic_load(&signals_seen), 1); /* not one per op */
	atomic_store(&signals_watched, NULL);
	pthread_mutex_lock(&f->st->lock);
	assert_int_equal(fg.real_timeouts, 0);
	assert_int_equal(fg.left_at_end, 0);
	pthread_mutex_unlock(&f->st->lock);
	g = gather_get(f->st);
	assert_int_equal(g.group_target, 4);
	assert_int_equal(g.gather_ns, (7 * 400000 + 500000) / 8);
	assert_int_equal(g.durable_ns, 7 * 300000 / 8);
	for (i = 0; i < 4; i++)
		assert_value(f->st, "g", a[i].key, "x", 1);
	store_test_set_gather(NULL);
	sem_destroy(&fg.waiting);
}

/* One durable put from this thread; returns the commits it took. */
static uint64_t dput(struct store *st, const char *key, unsigned flags)
{
	uint64_t c0 = commits_of(st);

	assert_int_equal(
		store_put(st, "g", key, strlen(key), "x", 1, flags, NULL), 0);
	return commits_of(st) - c0;
}

/*
 * The gather's bounds, each exactly: the longer of half a durable
 * commit and twice the learned gather time, never over 3 ms
 * (GATHER_MAX_NS); a group that does not come costs that one wait, which
 * teaches nothing of the gather time, and the target is relearned from
 * the batch (1: the next durable batch does not wait); no wait for a
 * batch that does not fsync, nor when nothing bounds the wait (no
 * durable commit or gather measured yet).
 */
static void test_durable_gather_bounds(void **state)
{
	struct fixture *f = *state;
	struct gather_state g;
	int64_t deadline, t;
	int waits;

	fake_gather_start();
	atomic_store(&fg.timeout, true);

	/* twice the gather time: 2 x 400 us over 300 us / 2 */
	gather_set(f->st, (struct gather_state){4, 400000, 300000});
	t = atomic_load(&fg.now);
	assert_int_equal(dput(f->st, "a", STORE_DURABLE), 1);
	assert_int_equal(fake_waits(f->st, &deadline), 1);
	assert_int_equal(deadline, t + 800000);
	g = gather_get(f->st);
	assert_int_equal(g.gather_ns, 400000); /* a timeout teaches nothing */
	assert_int_equal(g.group_target, 1);   /* relearned: it came alone */
	/* target 1: no wait */
	assert_int_equal(dput(f->st, "b", STORE_DURABLE), 1);
	assert_int_equal(fake_waits(f->st, NULL), 1);

	/* half a durable commit, when that is longer: 1 ms / 2 */
	gather_set(f->st, (struct gather_state){4, 100000, 1000000});
	t = atomic_load(&fg.now);
	assert_int_equal(dput(f->st, "c", STORE_DURABLE), 1);
	assert_int_equal(fake_waits(f->st, &deadline), 2);
	assert_int_equal(deadline, t + 500000);

	/* never over 3 ms */
	gather_set(f->st, (struct gather_state){4, 10000000, 300000});
	t = atomic_load(&fg.now);
	assert_int_equal(dput(f->st, "d", STORE_DURABLE), 1);
	assert_int_equal(fake_waits(f->st, &deadline), 3);
	assert_int_equal(deadline, t + 3000000);

	/* a batch that does not fsync does not wait */
	gather_set(f->st, (struct gather_state){4, 400000, 300000});
	assert_int_equal(dput(f->st, "e", 0), 1);
	waits = fake_waits(f->st, NULL);
	assert_int_equal(waits, 3);
	assert_int_equal(gather_get(f->st).group_target, 4); /* kept */

	/* nothing measured yet: nothing bounds a wait */
	gather_set(f->st, (struct gather_state){4, 0, 0});
	assert_int_equal(dput(f->st, "f", STORE_DURABLE), 1);
	assert_int_equal(fake_waits(f->st, NULL), 3);
	store_test_set_gather(NULL);
	sem_destroy(&fg.waiting);
}

/*
 * Four writers of durable puts in a closed loop share their fsyncs: a
 * durable batch waits for the writers the last one served, so they
 * commit in groups of four. Without the wait they settle into
 * alternating groups of one and three (the one that finds the writer
 * idle commits alone while the others queue behind its fsync): about one
 * commit per two puts, which cannot reach 8/3. On the fake clock every
 * durable commit takes 1 ms, so the wait is bounded whatever the disk
 * (this was skipped where an fsync cost under 100 us, as on tmpfs, and
 * took up to three rounds on a loaded machine); a wait ends when the
 * group is complete, or after 1 s of real time when it cannot be (a
 * writer done with its puts before the others: at the end of the run,
 * once or twice).
 */
static void test_durable_writers_share_commits(void **state)
{
	struct fixture *f = *state;
	uint64_t commits;
	int timeouts;

	fake_gather_start();
	atomic_store(&fg.step, 1000000);
	fg.real_bound_s = 1;
	commits = gc_run(f, 4, STORE_DURABLE);
	pthread_mutex_lock(&f->st->lock);
	timeouts = fg.real_timeouts;
	pthread_mutex_unlock(&f->st->lock);
	print_message("%d gathers timed out\n", timeouts);
	assert_true(commits * 8 < 4 * GC_PUTS * 3); /* over 8/3 puts a commit */
	store_test_set_gather(NULL);
	sem_destroy(&fg.waiting);
}

struct veto_arg {
	struct store *st;
	pthread_barrier_t *round;
	int id, bad_ok, good_failed;
};

static void *veto_main(void *arg)
{
	struct veto_arg *a = arg;
	char key[32];
	int i, rc;

	for (i = 0; i < 50; i++) {
		pthread_barrier_wait(a->round);
		if (a->id == 0) {
			rc = put_str(a->st, "r", "vetoed", "x", NULL);
			a->bad_ok += rc != -EIO;
			continue;
		}
		snprintf(key, sizeof(key), "g%d-%d", a->id, i);
		a->good_failed += put_str(a->st, "r", key, key, NULL) != 0;
	}
	return NULL;
}

/*
 * An outside trigger vetoes one key. Whatever ops share its batch, only
 * the vetoed put fails: the others commit.
 */
static void test_failing_op_does_not_fail_its_batch(void **state)
{
	struct fixture *f = *state;
	struct veto_arg args[4];
	pthread_barrier_t round;
	sqlite3 *db = outside_open(f->path);
	struct store_stats s;
	pthread_t t[4];
	char key[32];
	int i, j;

	outside_exec(db, "CREATE TRIGGER veto BEFORE INSERT ON kv "
			 "WHEN NEW.key = 'vetoed' "
			 "BEGIN SELECT RAISE(ABORT, 'vetoed'); END");
	pthread_barrier_init(&round, NULL, 4);
	for (i = 0; i < 4; i++) {
		args[i] = (struct veto_arg){f->st, &round, i, 0, 0};
		assert_int_equal(
			pthread_create(&t[i], NULL, veto_main, &args[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(args[i].bad_ok, 0);
		assert_int_equal(args[i].good_failed, 0);
	}
	pthread_barrier_destroy(&round);
	for (i = 1; i < 4; i++) {
		for (j = 0; j < 50; j++) {
			snprintf(key, sizeof(key), "g%d-%d", i, j);
			assert_value(f->st, "r", key, key, strlen(key));
		}
	}
	assert_int_equal(store_stat(f->st, "r", "vetoed", 6, NULL), -ENOENT);
	store_stats(f->st, &s);
	assert_int_equal(s.errors, 50);
	assert_int_equal(s.rows, 150);
	outside_exec(db, "DROP TRIGGER veto");
	sqlite3_close(db);
}

static void test_durable_writes_and_sync(void **state)
{
	struct fixture *f = *state;
	struct store_options o = {.durable = true};
	struct store *st;
	char p[256];

	assert_int_equal(
		store_put(f->st, "r", "d", 1, "x", 1, STORE_DURABLE, NULL), 0);
	assert_int_equal(put_str(f->st, "r", "n", "y", NULL), 0);
	assert_int_equal(store_sync(f->st), 0);
	assert_int_equal(store_sync(f->st), 0); /* nothing left to sync */
	assert_int_equal(store_delete(f->st, "r", "d", 1, STORE_DURABLE), 0);
	assert_int_equal(store_delete(f->st, "r", "d", 1, STORE_DURABLE),
			 -ENOENT);
	assert_value(f->st, "r", "n", "y", 1);

	snprintf(p, sizeof(p), "%s/other.db", f->dir);
	assert_int_equal(store_open(p, &o, &st), 0);
	assert_int_equal(put_str(st, "r", "k", "v", NULL), 0);
	assert_int_equal(store_sync(st), 0);
	assert_value(st, "r", "k", "v", 1);
	store_close(st);
}

/* ---- outside writers and the change feed ------------------------------- */

static void test_triggers_fill_metadata_for_outside_writes(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;
	sqlite3 *db = outside_open(f->path);
	int64_t t0 = now_ns() / 1000000, t1;

	outside_exec(db, "INSERT INTO kv(region, key, value) "
			 "VALUES ('r', 'red', 'crimson')"); /* TEXT value */
	t1 = now_ns() / 1000000;
	assert_int_equal(store_stat(f->st, "r", "red", 3, &m), 0);
	assert_int_equal(m.size, 7);
	assert_int_equal(m.version, 1);
	assert_true(m.mtime_ns / 1000000 >= t0 - 1);
	assert_true(m.mtime_ns / 1000000 <= t1 + 1);
	assert_value(f->st, "r", "red", "crimson", 7);

	outside_exec(db, "UPDATE kv SET value = x'0001020304' "
			 "WHERE region = 'r' AND key = 'red'");
	assert_int_equal(store_stat(f->st, "r", "red", 3, &m), 0);
	assert_int_equal(m.size, 5);
	assert_int_equal(m.version, 2);
	assert_value(f->st, "r", "red", "\0\1\2\3\4", 5);

	outside_exec(db, "UPDATE kv SET size = NULL WHERE key = 'red'");
	assert_int_equal(store_stat(f->st, "r", "red", 3, &m), 0);
	assert_int_equal(m.size, 5);

	/* our own writes leave the triggers idle: version grows by one */
	assert_int_equal(put_str(f->st, "r", "red", "ours", &m), 0);
	assert_int_equal(m.version, 3);
	assert_int_equal(outside_int(db, "SELECT version FROM kv "
					 "WHERE key = 'red'"),
			 3);
	assert_int_equal(store_rename(f->st, "r", "red", 3, "blue", 4, 0), 0);
	assert_int_equal(outside_int(db, "SELECT version FROM kv "
					 "WHERE key = 'blue'"),
			 4);
	sqlite3_close(db);
}

static void test_feed_reports_outside_changes_only(void **state)
{
	struct fixture *f = *state;
	struct feed_log log = {.calls = 0};
	sqlite3 *db = outside_open(f->path);
	uint64_t cursor;

	assert_int_equal(put_str(f->st, "r", "mine", "1", NULL), 0);
	assert_int_equal(store_changes_head(f->st, &cursor), 0);
	assert_true(cursor > 0);
	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 0);

	assert_int_equal(put_str(f->st, "r", "mine", "2", NULL), 0);
	outside_exec(db, "INSERT INTO kv(region, key, value) "
			 "VALUES ('r', 'a', 'x'), ('s', 'b', 'y')");
	assert_int_equal(put_str(f->st, "r", "mine2", "3", NULL), 0);
	outside_exec(db, "UPDATE kv SET value = 'z' WHERE key = 'a'");
	assert_int_equal(store_rename(f->st, "r", "mine2", 5, "mine3", 5, 0),
			 0);
	outside_exec(db, "DELETE FROM kv WHERE key = 'b'");
	outside_exec(db, "UPDATE kv SET key = 'c' WHERE key = 'a'");
	assert_int_equal(store_delete(f->st, "r", "mine", 4, 0), 0);

	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 6);
	assert_string_equal(log.text, "r/a\ns/b\nr/a\ns/b\nr/a\nr/c\n");
	/* nothing new: answered from PRAGMA data_version */
	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 0);
	assert_int_equal(put_str(f->st, "r", "mine", "4", NULL), 0);
	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 0);
	outside_exec(db, "INSERT INTO kv(region, key, value) "
			 "VALUES ('r', 'new', 'n')");
	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 1);
	assert_int_equal(outside_int(db, "SELECT max(seq) FROM changes"),
			 (int64_t)cursor);
	sqlite3_close(db);
}

static void test_feed_stops_when_callback_says_so(void **state)
{
	struct fixture *f = *state;
	struct feed_log log = {.stop_after = 2};
	sqlite3 *db = outside_open(f->path);
	uint64_t cursor;

	assert_int_equal(store_changes_head(f->st, &cursor), 0);
	outside_exec(db,
		     "INSERT INTO kv(region, key, value) VALUES "
		     "('r', 'k1', 'x'), ('r', 'k2', 'x'), ('r', 'k3', 'x')");
	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 2);
	log.stop_after = 0;
	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 1);
	assert_string_equal(log.text, "r/k1\nr/k2\nr/k3\n");
	sqlite3_close(db);
}

static void test_pruned_feed_invalidates_everything(void **state)
{
	struct fixture *f = *state;
	struct feed_log log = {.calls = 0};
	sqlite3 *db = outside_open(f->path);
	uint64_t cursor, head;

	assert_int_equal(store_changes_head(f->st, &cursor), 0);
	outside_exec(db, "INSERT INTO kv(region, key, value) VALUES "
			 "('r', 'k1', 'x'), ('r', 'k2', 'x')");
	outside_exec(db, "UPDATE changes SET ts_ms = 0");
	assert_int_equal(store_changes_prune(f->st, 60000), 0);
	/* the newest row stays (test_store_schema.c) */
	assert_int_equal(outside_int(db, "SELECT count(*) FROM changes"), 1);
	outside_exec(db, "INSERT INTO kv(region, key, value) "
			 "VALUES ('r', 'k3', 'x')");
	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 3);
	assert_string_equal(log.text, "*\nr/k2\nr/k3\n");
	assert_int_equal(store_changes_head(f->st, &head), 0);
	assert_int_equal(cursor, head);

	/* pruning only our own changes is no reason to invalidate */
	log.text[0] = '\0';
	assert_int_equal(put_str(f->st, "r", "own1", "x", NULL), 0);
	assert_int_equal(put_str(f->st, "r", "own2", "x", NULL), 0);
	outside_exec(db, "UPDATE changes SET ts_ms = 0");
	assert_int_equal(store_changes_prune(f->st, 60000), 0);
	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 0);
	assert_string_equal(log.text, "");

	/* fresh rows survive a prune */
	outside_exec(db, "INSERT INTO kv(region, key, value) "
			 "VALUES ('r', 'k4', 'x')");
	assert_int_equal(store_changes_prune(f->st, 60000), 0);
	assert_int_equal(outside_int(db, "SELECT count(*) FROM changes"), 1);
	assert_int_equal(store_changes(f->st, &cursor, feed_cb, &log), 1);
	assert_string_equal(log.text, "r/k4\n");
	sqlite3_close(db);
}

static void test_busy_outside_writer_gives_eagain(void **state)
{
	struct fixture *f = *state;
	struct store_options o = {.busy_timeout_ms = 50};
	struct store_stats s;
	struct store *st;
	sqlite3 *db;

	store_close(f->st);
	assert_int_equal(store_open(f->path, &o, &f->st), 0);
	st = f->st;
	db = outside_open(f->path);
	outside_exec(db, "BEGIN IMMEDIATE");
	assert_int_equal(put_str(st, "r", "k", "v", NULL), -EAGAIN);
	store_stats(st, &s);
	assert_true(s.busy_retries > 0);
	assert_int_equal(s.errors, 1);
	assert_int_equal(store_stat(st, "r", "k", 1, NULL), -ENOENT);
	outside_exec(db, "COMMIT");
	assert_int_equal(put_str(st, "r", "k", "v", NULL), 0);
	assert_value(st, "r", "k", "v", 1);
	sqlite3_close(db);
}

/* ---- the WAL writes ------------------------------------------------------- */

static atomic_int wal_writes;
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);

static bool all_zero(const void *buf, size_t n)
{
	const unsigned char *p = buf;

	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/*
 * The unix VFS's pwrite64 (xSetSystemCall), counting writes to a -wal;
 * not the zeros the WAL grows by (walvfs.c), which no commit waits for
 * one by one.
 */
static ssize_t counting_pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	char link[64], path[PATH_MAX];
	ssize_t len;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	len = readlink(link, path, sizeof(path));
	if (len > 4 && !memcmp(path + len - 4, "-wal", 4) && !all_zero(buf, n))
		atomic_fetch_add(&wal_writes, 1);
	return real_pwrite64(fd, buf, n, off);
}

/*
 * A commit's WAL frames (about 5 for a 1 KiB create, 21 for 64 KiB, two
 * write calls each in SQLite) reach the file in one pwrite() (walvfs.c),
 * durable or not, and are in the file when the put returns: the outside
 * connection reads them.
 */
static void test_commit_writes_the_wal_once(void **state)
{
	struct fixture *f = *state;
	sqlite3_vfs *vfs = sqlite3_vfs_find("unix");
	size_t big = 65536;
	char key[16], *buf;
	sqlite3 *db;
	int i;

	assert_non_null(vfs);
	buf = calloc(1, big);
	assert_non_null(buf);
	db = outside_open(f->path);
	real_pwrite64 = (ssize_t(*)(int, const void *, size_t,
				    off_t))vfs->xGetSystemCall(vfs, "pwrite64");
	assert_non_null(real_pwrite64);
	atomic_store(&wal_writes, 0);
	assert_int_equal(
		vfs->xSetSystemCall(vfs, "pwrite64",
				    (sqlite3_syscall_ptr)counting_pwrite64),
		SQLITE_OK);
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(store_put(f->st, "r", key, strlen(key), buf,
					   i % 2 ? big : 1024,
					   i == 7 ? STORE_DURABLE : 0, NULL),
				 0);
		assert_int_equal(outside_int(db, "SELECT count(*) FROM kv"),
				 i + 1);
	}
	vfs->xSetSystemCall(vfs, "pwrite64", NULL);
	assert_int_equal(atomic_load(&wal_writes), 20);
	sqlite3_close(db);
	free(buf);
}

/* Copies file from to to (a crash image: what a killed process leaves). */
static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n;
	int in = open(from, O_RDONLY), out;

	assert_true(in >= 0);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, n), n);
	assert_int_equal(n, 0);
	close(in);
	close(out);
}

/*
 * When a change call returns, its commit is whole in the WAL file: a copy
 * of the database and its WAL taken then (the store still open, as if
 * killed) recovers it. A put larger than the writer's page cache spills
 * pages to the WAL before COMMIT, after which SQLite rewrites the
 * checksums of their frames (walvfs.c flushes those after COMMIT).
 */
static void test_commit_is_in_the_wal_on_return(void **state)
{
	struct fixture *f = *state;
	char db[160], wal[200], path[200];
	size_t big = 24 << 20;
	unsigned char *buf;
	sqlite3 *c;
	int i;

	buf = malloc(big);
	assert_non_null(buf);
	for (i = 0; i < 3; i++) {
		memset(buf, 'a' + i, big);
		assert_int_equal(store_put(f->st, "r", "big", 3, buf,
					   big - i * 8192, 0, NULL),
				 0);
		assert_int_equal(put_str(f->st, "r", "small", "s", NULL), 0);
		snprintf(db, sizeof(db), "%s/other.db", f->dir);
		snprintf(wal, sizeof(wal), "%s-wal", db);
		copy_file(f->path, db);
		snprintf(path, sizeof(path), "%s-wal", f->path);
		copy_file(path, wal);
		c = outside_open(db);
		assert_int_equal(outside_int(c, "SELECT length(value) FROM kv "
						"WHERE key = 'big'"),
				 (int64_t)(big - i * 8192));
		assert_int_equal(outside_int(c, "SELECT count(*) FROM kv "
						"WHERE key = 'small'"),
				 1);
		sqlite3_close(c);
		unlink(db);
		unlink(wal);
	}
	free(buf);
}

/*
 * Once the store made a durable commit (before, the WAL grows as SQLite
 * writes it), the WAL grows by STORE_WAL_GROW bytes of zeros at a time
 * (walvfs.c), so that a commit's fsync finds its blocks there and writes
 * no inode: while
 * 64 durable 1 KiB puts (about 1 MiB of frames) fill the first step or
 * two, the file changes its size at most twice, and its
 * blocks are all allocated (no hole, no fallocate()d extent: st_blocks
 * covers the size). An outside connection reads every put, and so does a
 * crash image of the files (zeros past the last commit are no frames).
 */
static void test_wal_grows_in_steps_of_zeros(void **state)
{
	struct fixture *f = *state;
	char wal[200], db[160], dbwal[200], key[16], buf[1024];
	struct statvfs sv;
	struct stat sb;
	off_t size = 0;
	int i, changes = 0;
	sqlite3 *c;

	if (statvfs(f->dir, &sv) || (uint64_t)sv.f_bavail * sv.f_frsize <
					    80 * (uint64_t)STORE_WAL_GROW) {
		print_message("less than 80 MiB free here: skipped\n");
		skip(); /* the WAL grows ahead only with 64 MiB free */
	}
	snprintf(wal, sizeof(wal), "%s-wal", f->path);
	memset(buf, 'v', sizeof(buf));
	/* a WAL that is never fsynced grows as SQLite writes it */
	for (i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "n%d", i);
		assert_int_equal(store_put(f->st, "r", key, strlen(key), buf,
					   sizeof(buf), 0, NULL),
				 0);
	}
	assert_int_equal(stat(wal, &sb), 0);
	assert_true(sb.st_size < STORE_WAL_GROW / 2);
	/* the first durable put turns the growth on; it grows at the next */
	assert_int_equal(store_put(f->st, "r", "d", 1, buf, sizeof(buf),
				   STORE_DURABLE, NULL),
			 0);
	for (i = 0; i < 64; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(store_put(f->st, "r", key, strlen(key), buf,
					   sizeof(buf), STORE_DURABLE, NULL),
				 0);
		assert_int_equal(stat(wal, &sb), 0);
		assert_true(sb.st_size >= STORE_WAL_GROW);
		assert_int_equal(sb.st_size % STORE_WAL_GROW, 0);
		assert_true((off_t)sb.st_blocks * 512 >= sb.st_size);
		changes += sb.st_size != size;
		size = sb.st_size;
	}
	assert_true(changes <= 2); /* 64 commits of about 16 KiB each */
	c = outside_open(f->path);
	assert_int_equal(outside_int(c, "SELECT count(*) FROM kv"), 73);
	sqlite3_close(c);
	snprintf(db, sizeof(db), "%s/image.db", f->dir);
	copy_file(f->path, db);
	snprintf(dbwal, sizeof(dbwal), "%s-wal", db);
	copy_file(wal, dbwal);
	c = outside_open(db);
	assert_int_equal(outside_int(c, "SELECT count(*) FROM kv WHERE "
					"length(value) = 1024"),
			 73);
	sqlite3_close(c);
	unlink(db);
	unlink(dbwal);
}

/* ---- refusing files ------------------------------------------------------ */

static void test_newer_schema_is_refused(void **state)
{
	struct fixture *f = *state;
	struct store *st = (struct store *)1;
	char p[256];
	sqlite3 *db;

	snprintf(p, sizeof(p), "%s/other.db", f->dir);
	db = outside_open(p);
	outside_exec(db, "PRAGMA user_version = 99");
	sqlite3_close(db);
	assert_int_equal(store_open(p, NULL, &st), -EPROTO);
	assert_null(st);

	/* a database of someone else's (tables, user_version 0) */
	unlink(p);
	db = outside_open(p);
	outside_exec(db, "CREATE TABLE t(x)");
	sqlite3_close(db);
	assert_int_equal(store_open(p, NULL, &st), -EPROTO);

	/* our own version opens, and the store's file is left usable */
	assert_int_equal(store_stat(f->st, "r", "k", 1, NULL), -ENOENT);
}

static void test_not_a_database_is_refused(void **state)
{
	struct fixture *f = *state;
	struct store *st = (struct store *)1;
	char p[256], junk[8192];
	int fd;

	snprintf(p, sizeof(p), "%s/junk.db", f->dir);
	memset(junk, 'J', sizeof(junk));
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
	close(fd);
	assert_int_equal(store_open(p, NULL, &st), -EINVAL);
	assert_null(st);
}

/* ---- a full disk --------------------------------------------------------- */

/*
 * In a thread of its own: unshare(CLONE_NEWNS) gives only this thread a
 * private mount namespace, which the writer thread it starts inherits;
 * the mount dies with them. No fork(): TSan cannot start threads after a
 * fork of a threaded process. Returns 0 if all went as expected, 77 to
 * skip, else the failed step.
 */
struct enospc_arg {
	const char *dir;
	int rc;
};

static int enospc_run(const char *dir)
{
	char mnt[128], path[160];
	size_t big = 2 << 20;
	struct store *st;
	void *data = NULL;
	char *buf;
	int rc = 0;

	snprintf(mnt, sizeof(mnt), "%s/tmpfs", dir);
	snprintf(path, sizeof(path), "%s/store.db", mnt);
	if (unshare(CLONE_NEWNS) ||
	    mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", mnt, "tmpfs", 0, "size=1m"))
		return 77;
	buf = malloc(big);
	if (!buf || store_open(path, NULL, &st)) {
		free(buf);
		return 2;
	}
	memset(buf, 'B', big);
	if (store_put(st, "r", "k", 1, "old", 3, 0, NULL))
		rc = 3;
	else if (store_put(st, "r", "k", 1, buf, big, 0, NULL) != -ENOSPC)
		rc = 4;
	else if (store_load(st, "r", "k", 1, &data, NULL) ||
		 memcmp(data, "old", 3))
		rc = 5;
	else if (store_put(st, "r", "k2", 2, "small", 5, 0, NULL))
		rc = 6;
	free(data);
	store_close(st);
	free(buf);
	umount(mnt);
	return rc;
}

static void *enospc_main(void *arg)
{
	struct enospc_arg *a = arg;

	a->rc = enospc_run(a->dir);
	return NULL;
}

static void test_full_disk_gives_enospc_and_keeps_old_value(void **state)
{
	struct fixture *f = *state;
	struct enospc_arg a = {.dir = f->dir};
	char mnt[128];
	pthread_t t;

	snprintf(mnt, sizeof(mnt), "%s/tmpfs", f->dir);
	assert_int_equal(mkdir(mnt, 0700), 0);
	assert_int_equal(pthread_create(&t, NULL, enospc_main, &a), 0);
	pthread_join(t, NULL);
	if (a.rc == 77)
		skip();
	assert_int_equal(a.rc, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_put_load_stat_delete_round_trip),
		T(test_missing_keys_are_enoent),
		T(test_bad_arguments_are_refused),
		T(test_keys_with_any_bytes_round_trip),
		T(test_empty_and_large_values),
		T(test_rename_replaces_target_and_raises_version),
		T(test_rename_is_atomic_for_readers),
		T(test_reopen_keeps_data),
		T(test_db_file_is_private),
		T(test_replaced_file_is_lost),
		T(test_read_only_store),
		T(test_list_pages_in_byte_order),
		T(test_list_stops_when_callback_says_so),
		T(test_region_usage_counts_keys_and_bytes),
		T(test_group_commit_batches_concurrent_puts),
		T(test_failing_op_does_not_fail_its_batch),
		T(test_durable_writes_and_sync),
		T(test_reads_share_the_connection_used_last),
		T(test_group_commit_hands_batches_to_callers),
		T(test_durable_writers_share_commits),
		T(test_durable_writers_wait_for_late_peers),
		T(test_durable_gather_bounds),
		T(test_triggers_fill_metadata_for_outside_writes),
		T(test_feed_reports_outside_changes_only),
		T(test_feed_stops_when_callback_says_so),
		T(test_pruned_feed_invalidates_everything),
		T(test_busy_outside_writer_gives_eagain),
		T(test_commit_writes_the_wal_once),
		T(test_wal_grows_in_steps_of_zeros),
		T(test_commit_is_in_the_wal_on_return),
		T(test_newer_schema_is_refused),
		T(test_not_a_database_is_refused),
		T(test_full_disk_gives_enospc_and_keeps_old_value),
#undef T
	};

	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
