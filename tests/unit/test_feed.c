/*
 * test_feed.c - unit tests of the change-feed thread (fs/feed.c).
 *
 * The test links the daemon's library (libregionfs-fs) and drives the feed
 * one poll at a time (rfs_feed__poll(), no thread) through seams made at
 * link time (--wrap, tests/unit/meson.build): store_changes() and
 * store_changes_head() fail on demand, the feed's clock (rfs_mono_ns())
 * is a fake one the tests set, rfs_log() counts what was logged, and the
 * region table is two regions of the fixture. The rest is real: the
 * daemon's store on a temp file, regions of the engine, and an outside
 * writer (a plain sqlite3 connection, as the shell or a loader script
 * would use).
 *
 * Nothing sleeps to let a race happen. The concurrency test checks an
 * invariant that must hold under any interleaving (a read that starts
 * after the feed applied a change never returns the old value) and waits
 * for conditions (read counts), not for time. The thread test waits, with
 * a generous deadline, for the condition the thread must bring about.
 *
 * Build: tests/unit/meson.build links it with fs_dep and the --wrap
 * options of the seams above.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "../../fs/fs.h"

/* ---- seams (linked with --wrap, see tests/unit/meson.build) ------------- */

static int head_fail_n;	   /* the next n store_changes_head() fail */
static int changes_fail_n; /* the next n store_changes() fail */
static int fail_rc = -EAGAIN;
static uint64_t fake_ns;      /* 0: the real clock */
static uint64_t fake_step_ns; /* added to fake_ns after every read */

int __real_store_changes_head(struct store *st, uint64_t *cursor);
int __real_store_changes(struct store *st, uint64_t *cursor, store_change_fn fn,
			 void *ctx);
uint64_t __real_rfs_mono_ns(void);
int __wrap_store_changes_head(struct store *st, uint64_t *cursor);
int __wrap_store_changes(struct store *st, uint64_t *cursor, store_change_fn fn,
			 void *ctx);
uint64_t __wrap_rfs_mono_ns(void);
struct rfs_table *__wrap_rfs_table_ref(void);
void __wrap_rfs_table_unref(struct rfs_table *t);
struct rfs_region *__wrap_rfs_table_find(const struct rfs_table *t,
					 const char *name);
void __wrap_rfs_log(enum rfs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

int __wrap_store_changes_head(struct store *st, uint64_t *cursor)
{
	if (head_fail_n > 0) {
		head_fail_n--;
		return fail_rc;
	}
	return __real_store_changes_head(st, cursor);
}

int __wrap_store_changes(struct store *st, uint64_t *cursor, store_change_fn fn,
			 void *ctx)
{
	if (changes_fail_n > 0) {
		changes_fail_n--;
		return fail_rc;
	}
	return __real_store_changes(st, cursor, fn, ctx);
}

/* The feed's clock (state.c's rfs_mono_ns()). */
uint64_t __wrap_rfs_mono_ns(void)
{
	uint64_t now = fake_ns;

	if (!fake_ns)
		return __real_rfs_mono_ns();
	fake_ns += fake_step_ns;
	return now;
}

/* The region table the feed sees: two regions the fixture makes. */
static struct rfs_table table;
static struct rfs_region *table_v[2];
static struct rfs_region region_a = {.cfg = {.name = "a"}};
static struct rfs_region region_b = {.cfg = {.name = "b"}};

static unsigned nlog[RFS_LOG_DEBUG + 1];
static char last_log[1024];

struct rfs_table *__wrap_rfs_table_ref(void)
{
	atomic_fetch_add(&table.refs, 1);
	return &table;
}

void __wrap_rfs_table_unref(struct rfs_table *t)
{
	unsigned long old = atomic_fetch_sub(&t->refs, 1);

	if (old <= 1) /* the fixture holds the last one */
		abort();
}

struct rfs_region *__wrap_rfs_table_find(const struct rfs_table *t,
					 const char *name)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->v[i]->cfg.name, name) == 0)
			return t->v[i];
	return NULL;
}

/* What the feed logged, counted by level. */
void __wrap_rfs_log(enum rfs_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_log, sizeof(last_log), fmt, ap);
	va_end(ap);
	nlog[level]++;
}

/* ---- fixture ------------------------------------------------------------- */

struct fixture {
	char dir[64];
	char path[128];
	sqlite3 *out; /* the outside writer */
};

static int make_region(struct rfs_region *rr)
{
	struct region_limits lim = {.max_entries = 100000, .nstripes = 8};

	atomic_init(&rr->refs, 1);
	return region_create(rr->cfg.name, &lim, &rr->r);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/test_feed.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/store.db", f->dir);
	if (store_open(f->path, NULL, &rfs.st))
		return -1;
	if (sqlite3_open(f->path, &f->out) != SQLITE_OK)
		return -1;
	sqlite3_busy_timeout(f->out, 10000);
	if (make_region(&region_a) || make_region(&region_b))
		return -1;
	table_v[0] = &region_a;
	table_v[1] = &region_b;
	table.v = table.byname = table_v;
	table.n = 2;
	atomic_init(&table.refs, 1);
	memset(nlog, 0, sizeof(nlog));
	head_fail_n = changes_fail_n = 0;
	fake_ns = fake_step_ns = 0;
	rfs_feed__reset();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char p[160];

	assert_int_equal(atomic_load(&table.refs), 1); /* none leaked */
	region_unref(region_a.r);
	region_unref(region_b.r);
	sqlite3_close(f->out);
	store_close(rfs.st);
	rfs.st = NULL;
	snprintf(p, sizeof(p), "%s/store.db-wal", f->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/store.db-shm", f->dir);
	unlink(p);
	unlink(f->path);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* ---- helpers ------------------------------------------------------------- */

static uint64_t feed_cursor(bool *have)
{
	bool h;

	return rfs_feed__cursor(have ? have : &h);
}

static bool feed_has_cursor(void)
{
	bool have;

	feed_cursor(&have);
	return have;
}

static void outside_sql(struct fixture *f, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(f->out, sql, NULL, NULL, &err) != SQLITE_OK)
		fail_msg("sqlite3: %s: %s", sql, err ? err : "?");
}

/* Installs key = val in rr's cache, as a completed load would. */
static void cache(struct rfs_region *rr, const char *key, const char *val)
{
	struct region_value *v = NULL, *got = NULL;
	struct region_flight *fl = NULL;
	int rc;

	rc = region_get(rr->r, key, strlen(key), &got, &fl);
	if (rc == REGION_HIT) {
		region_value_unref(got);
		region_invalidate(rr->r, key, strlen(key), REGION_ORIGIN_LOCAL);
		rc = region_get(rr->r, key, strlen(key), &got, &fl);
	}
	assert_int_equal(rc, REGION_LOAD);
	v = region_value_create(val, strlen(val));
	assert_non_null(v);
	assert_int_equal(region_flight_done(rr->r, fl, 0, v, &got), 0);
	region_value_unref(got);
	assert_true(region_contains(rr->r, key, strlen(key)));
}

static bool cached(struct rfs_region *rr, const char *key)
{
	return region_contains(rr->r, key, strlen(key));
}

/* Polls until a pass reaches the head; returns the number of polls. */
static unsigned poll_all(void)
{
	unsigned n = 1;

	while (rfs_feed__poll())
		n++;
	return n;
}

static uint64_t changes_applied(void)
{
	uint64_t c, lag;

	rfs_feed_counters(&c, &lag);
	return c;
}

static uint64_t outside_invalidations(struct rfs_region *rr)
{
	struct region_stats st;

	region_stats(rr->r, &st);
	return st.invalidations_outside;
}

static void put(const char *region, const char *key, const char *val)
{
	assert_int_equal(store_put(rfs.st, region, key, strlen(key), val,
				   strlen(val), 0, NULL),
			 0);
}

/* n rows "k000000".. of region a in one outside transaction. */
static void outside_bulk(struct fixture *f, unsigned n, const char *val)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 "
		 "FROM c WHERE i < %u) INSERT INTO kv(region, key, value) "
		 "SELECT 'a', printf('k%%06d', i), '%s' FROM c WHERE true "
		 "ON CONFLICT(region, key) DO UPDATE SET value = "
		 "excluded.value",
		 n - 1, val);
	outside_sql(f, sql);
}

static void key_name(char *buf, size_t len, unsigned i)
{
	snprintf(buf, len, "k%06u", i);
}

/* ---- single changes ------------------------------------------------------ */

static void test_outside_update_invalidates_cached_key(void **state)
{
	struct fixture *f = *state;

	put("a", "red", "old");
	cache(&region_a, "red", "old");
	cache(&region_a, "blue", "other");
	assert_false(rfs_feed__poll());
	assert_true(cached(&region_a, "red")); /* our own put: skipped */
	outside_sql(f, "UPDATE kv SET value = 'new' WHERE region = 'a' AND "
		       "key = 'red'");
	assert_false(rfs_feed__poll());
	assert_false(cached(&region_a, "red"));
	assert_true(cached(&region_a, "blue"));
	assert_int_equal(changes_applied(), 1);
	assert_int_equal(outside_invalidations(&region_a), 1);
}

static void test_outside_insert_delete_rename_invalidate(void **state)
{
	struct fixture *f = *state;

	cache(&region_a, "fresh", "negative"); /* as if cached before */
	outside_sql(f, "INSERT INTO kv(region, key, value) VALUES "
		       "('a', 'fresh', 'x'), ('a', 'gone', 'y')");
	poll_all();
	assert_false(cached(&region_a, "fresh"));
	cache(&region_a, "gone", "y");
	cache(&region_a, "moved", "stale");
	cache(&region_a, "fresh", "x");
	outside_sql(f, "DELETE FROM kv WHERE region = 'a' AND key = 'gone'");
	outside_sql(f, "UPDATE kv SET key = 'moved' WHERE region = 'a' AND "
		       "key = 'fresh'");
	poll_all();
	assert_false(cached(&region_a, "gone"));
	assert_false(cached(&region_a, "fresh")); /* the old name */
	assert_false(cached(&region_a, "moved")); /* the new name */
}

static void test_own_writes_are_not_outside_changes(void **state)
{
	(void)state;
	cache(&region_a, "k", "v");
	put("a", "k", "v2"); /* the write path invalidated it (E1/E2) */
	put("a", "other", "x");
	assert_int_equal(store_delete(rfs.st, "a", "other", 5, 0), 0);
	assert_false(rfs_feed__poll());
	assert_true(cached(&region_a, "k"));
	assert_int_equal(changes_applied(), 0);
	assert_int_equal(outside_invalidations(&region_a), 0);
}

static void test_change_in_unserved_region_is_ignored(void **state)
{
	struct fixture *f = *state;

	cache(&region_a, "k", "v");
	outside_sql(f, "INSERT INTO kv(region, key, value) VALUES "
		       "('not-served', 'k', 'x')");
	assert_false(rfs_feed__poll());
	assert_true(cached(&region_a, "k"));
	assert_int_equal(changes_applied(), 0);
}

static void test_idle_poll_takes_nothing(void **state)
{
	(void)state;
	assert_false(rfs_feed__poll());
	assert_false(rfs_feed__poll());
	/* the table is taken on the first change only */
	assert_int_equal(atomic_load(&table.refs), 1);
	assert_int_equal(changes_applied(), 0);
	assert_int_equal(nlog[RFS_LOG_WARNING] + nlog[RFS_LOG_ERR], 0);
}

/*
 * The stale-put guard for outside writers: a load that read the row
 * before the outside commit must not install it once the feed has seen
 * the change; its waiters still get the value (their reads overlapped).
 */
static void test_outside_change_poisons_load_in_the_air(void **state)
{
	struct fixture *f = *state;
	struct region_value *v = NULL, *got = NULL;
	struct region_flight *fl = NULL;
	struct region_stats rs;
	void *data = NULL;
	struct store_meta m;

	put("a", "k", "old");
	assert_int_equal(region_get(region_a.r, "k", 1, &got, &fl),
			 REGION_LOAD);
	assert_int_equal(store_load(rfs.st, "a", "k", 1, &data, &m), 0);
	outside_sql(f, "UPDATE kv SET value = 'new' WHERE region = 'a' AND "
		       "key = 'k'");
	assert_false(rfs_feed__poll());
	v = region_value_adopt(data, m.size);
	assert_non_null(v);
	assert_int_equal(region_flight_done(region_a.r, fl, 0, v, &got), 0);
	assert_memory_equal(region_value_data(got), "old", 3);
	region_value_unref(got);
	assert_false(cached(&region_a, "k"));
	region_stats(region_a.r, &rs);
	assert_int_equal(rs.stale_puts_rejected, 1);
}

/* ---- bulk changes -------------------------------------------------------- */

static void cache_bulk(unsigned n)
{
	char key[16];
	unsigned i;

	for (i = 0; i < n; i++) {
		key_name(key, sizeof(key), i);
		cache(&region_a, key, "gen1");
	}
}

static unsigned count_cached(unsigned n)
{
	char key[16];
	unsigned i, c = 0;

	for (i = 0; i < n; i++) {
		key_name(key, sizeof(key), i);
		c += cached(&region_a, key);
	}
	return c;
}

/*
 * 10,000 changes in one transaction are applied RFS_FEED_BATCH at a time, the
 * cursor moving batch by batch, and none is lost. The fake clock stands
 * still, so the backlog never looks slow enough to jump.
 */
static void test_backlog_is_applied_in_bounded_batches(void **state)
{
	struct fixture *f = *state;
	const unsigned n = 10000;
	uint64_t c0;

	outside_bulk(f, n, "gen1");
	fake_ns = 1000000000;
	poll_all();
	c0 = changes_applied();
	assert_int_equal(c0, n);
	cache_bulk(n);
	cache(&region_b, "k000001", "other region");
	outside_bulk(f, n, "gen2");
	assert_true(rfs_feed__poll()); /* stopped at the bound */
	assert_int_equal(changes_applied() - c0, RFS_FEED_BATCH);
	assert_int_equal(count_cached(n), n - RFS_FEED_BATCH);
	assert_int_equal(atomic_load(&table.refs), 1);
	assert_int_equal(poll_all(),
			 (n + RFS_FEED_BATCH - 1) / RFS_FEED_BATCH - 1);
	assert_int_equal(changes_applied() - c0, n);
	assert_int_equal(count_cached(n), 0);
	assert_true(cached(&region_b, "k000001"));
	assert_int_equal(nlog[RFS_LOG_NOTICE], 0); /* no jump */
}

/*
 * A backlog that would take longer than RFS_FEED_BULK_MS key by key (here:
 * the fake clock moves 100 ms per reading, so the first batch "took" that
 * long) invalidates every region once and jumps to the head.
 */
static void test_slow_backlog_invalidates_everything_once(void **state)
{
	struct fixture *f = *state;
	const unsigned n = 20000;
	uint64_t c0, head;

	outside_bulk(f, n, "gen1");
	fake_ns = 1000000000;
	poll_all();
	c0 = changes_applied();
	cache_bulk(100);
	cache(&region_b, "elsewhere", "x");
	outside_bulk(f, n, "gen2");
	fake_step_ns = 100000000;
	assert_true(rfs_feed__poll());
	assert_int_equal(store_changes_head(rfs.st, &head), 0);
	assert_int_equal(feed_cursor(NULL), head);
	assert_int_equal(changes_applied() - c0, RFS_FEED_BATCH + 1);
	assert_int_equal(count_cached(100), 0);
	assert_false(cached(&region_b, "elsewhere"));
	assert_int_equal(nlog[RFS_LOG_NOTICE], 1);
	assert_non_null(strstr(last_log, "invalidated every region"));
	assert_false(rfs_feed__poll()); /* nothing left */
	assert_non_null(strstr(last_log, "a backlog of"));
}

/* ---- errors -------------------------------------------------------------- */

static void test_short_error_streak_logs_once_and_loses_nothing(void **state)
{
	struct fixture *f = *state;
	int i;

	cache(&region_a, "k", "v");
	cache(&region_b, "other", "v");
	fake_ns = 1000000000;
	fake_step_ns = 1000000; /* 20 polls: well under RFS_FEED_STALE_MS */
	changes_fail_n = 20;
	outside_sql(f, "INSERT INTO kv(region, key, value) VALUES "
		       "('a', 'k', 'x')");
	for (i = 0; i < 20; i++)
		assert_false(rfs_feed__poll());
	assert_true(cached(&region_a, "k"));
	assert_int_equal(nlog[RFS_LOG_WARNING], 1);
	assert_non_null(strstr(last_log, strerror(EAGAIN)));
	assert_false(rfs_feed__poll());
	assert_false(cached(&region_a, "k"));
	assert_true(cached(&region_b, "other")); /* no invalidate-all */
	assert_int_equal(nlog[RFS_LOG_NOTICE], 1);
	assert_non_null(strstr(last_log, "20 failed polls"));
	assert_null(strstr(last_log, "invalidated every region"));
	assert_int_equal(nlog[RFS_LOG_WARNING], 1);
}

static void test_long_error_streak_invalidates_everything(void **state)
{
	(void)state;
	cache(&region_a, "k", "v");
	cache(&region_b, "other", "v");
	fake_ns = 1000000000;
	fake_step_ns = 100000000; /* 100 ms a reading: > 1 s in all */
	changes_fail_n = 10;
	while (changes_fail_n)
		assert_false(rfs_feed__poll());
	assert_true(cached(&region_b, "other"));
	assert_false(rfs_feed__poll());
	assert_false(cached(&region_a, "k"));
	assert_false(cached(&region_b, "other"));
	assert_non_null(strstr(last_log, "invalidated every region"));
	assert_int_equal(nlog[RFS_LOG_WARNING], 1);
}

static void test_head_unreadable_at_start_invalidates_when_known(void **state)
{
	(void)state;
	head_fail_n = 3;
	rfs_feed__reset();
	assert_false(feed_has_cursor());
	assert_int_equal(nlog[RFS_LOG_WARNING], 1);
	cache(&region_a, "k", "loaded meanwhile");
	assert_false(rfs_feed__poll());
	assert_false(rfs_feed__poll());
	assert_true(cached(&region_a, "k"));
	assert_false(rfs_feed__poll()); /* the head is read now */
	assert_true(feed_has_cursor());
	assert_false(cached(&region_a, "k"));
	assert_int_equal(nlog[RFS_LOG_WARNING], 1);
	assert_int_equal(nlog[RFS_LOG_NOTICE], 1);
}

/*
 * Feed rows deleted before they were read (a prune): everything goes.
 * The newest row always stays (schema version 2: changes_keep_head).
 */
static void test_feed_pruned_past_cursor_invalidates_everything(void **state)
{
	struct fixture *f = *state;

	cache(&region_a, "k", "v");
	cache(&region_b, "other", "v");
	outside_sql(f, "INSERT INTO kv(region, key, value) VALUES "
		       "('a', 'x', 'y')");
	outside_sql(f, "INSERT INTO kv(region, key, value) VALUES "
		       "('b', 'z', 'y')");
	outside_sql(f, "DELETE FROM changes");
	assert_false(rfs_feed__poll());
	assert_false(cached(&region_a, "k"));
	assert_false(cached(&region_b, "other"));
	assert_int_equal(changes_applied(), 2);
}

/* ---- the lag figure ------------------------------------------------------ */

static uint64_t lag_ms(void)
{
	uint64_t c, lag;

	rfs_feed_counters(&c, &lag);
	return lag;
}

static void test_lag_bounds_commit_to_invalidation(void **state)
{
	struct fixture *f = *state;

	fake_ns = 5000000000;
	assert_false(rfs_feed__poll()); /* complete pass at 5000 ms */
	outside_sql(f, "INSERT INTO kv(region, key, value) VALUES "
		       "('a', 'x', '1')");
	fake_ns = 5010000000;
	assert_false(rfs_feed__poll());
	assert_int_equal(lag_ms(), 10);
	/* a streak: the bound runs from the last complete pass (5010) */
	changes_fail_n = 2;
	fake_ns = 5020000000;
	assert_false(rfs_feed__poll());
	fake_ns = 5030000000;
	assert_false(rfs_feed__poll());
	outside_sql(f, "UPDATE kv SET value = '2' WHERE key = 'x'");
	fake_ns = 5040000000;
	assert_false(rfs_feed__poll());
	assert_int_equal(lag_ms(), 30);
	/* an idle pass changes nothing */
	fake_ns = 9000000000;
	assert_false(rfs_feed__poll());
	assert_int_equal(lag_ms(), 30);
}

/* ---- the thread ---------------------------------------------------------- */

static void test_thread_applies_changes_and_stops(void **state)
{
	struct fixture *f = *state;
	struct timespec ms = {0, 1000000};
	int i;

	assert_int_equal(rfs_feed_start(), 0);
	cache(&region_a, "k", "v");
	outside_sql(f, "INSERT INTO kv(region, key, value) VALUES "
		       "('a', 'k', 'w')");
	/* a deadline for a condition, not a race window: 10 ms expected */
	for (i = 0; i < 5000 && cached(&region_a, "k"); i++)
		nanosleep(&ms, NULL);
	assert_false(cached(&region_a, "k"));
	rfs_feed_stop();
	assert_int_equal(changes_applied(), 1);
	rfs_feed_stop(); /* twice is fine */
}

/* ---- concurrency --------------------------------------------------------- */

#define CKEYS	 500
#define CREADERS 3

struct creader {
	pthread_t tid;
	atomic_uint_fast64_t reads, reads_after;
	uint64_t violations, errors;
	uint64_t rng;
};

static atomic_bool c_applied, c_stop;

static int load_from_store(void *ctx, const void *key, size_t klen,
			   struct region_value **out)
{
	struct store_meta m;
	void *data = NULL;
	int rc;

	(void)ctx;
	*out = NULL;
	rc = store_load(rfs.st, "a", key, klen, &data, &m);
	if (rc)
		return rc;
	*out = region_value_adopt(data, m.size);
	return *out ? 0 : -ENOMEM;
}

static void *creader_main(void *arg)
{
	struct creader *r = arg;
	struct region_value *v;
	char key[16];
	bool after;

	while (!atomic_load(&c_stop)) {
		r->rng = r->rng * 6364136223846793005ULL +
			 1442695040888963407ULL;
		key_name(key, sizeof(key), (unsigned)(r->rng >> 33) % CKEYS);
		after = atomic_load(&c_applied); /* before the read starts */
		if (region_fetch(region_a.r, key, 7, load_from_store, NULL,
				 &v)) {
			r->errors++;
			continue;
		}
		if (after && memcmp(region_value_data(v), "gen2", 4) != 0)
			r->violations++;
		region_value_unref(v);
		atomic_fetch_add(after ? &r->reads_after : &r->reads, 1);
	}
	return NULL;
}

static void wait_reads(struct creader *r, bool after, uint64_t n)
{
	int i;

	for (i = 0; i < CREADERS; i++)
		while (atomic_load(after ? &r[i].reads_after : &r[i].reads) < n)
			sched_yield();
}

/*
 * Readers load and hit keys through the cache while an outside
 * transaction rewrites them all and the feed applies it: once the feed
 * has applied it, no read that starts afterwards returns the old value,
 * whatever loads were in the air (the stale-put guard).
 */
static void test_no_old_value_after_the_feed_applied(void **state)
{
	struct fixture *f = *state;
	struct creader r[CREADERS];
	int i;

	outside_bulk(f, CKEYS, "gen1");
	poll_all();
	memset(r, 0, sizeof(r));
	atomic_store(&c_applied, false);
	atomic_store(&c_stop, false);
	for (i = 0; i < CREADERS; i++) {
		r[i].rng = (uint64_t)i + 1;
		assert_int_equal(
			pthread_create(&r[i].tid, NULL, creader_main, &r[i]),
			0);
	}
	wait_reads(r, false, 2000);
	outside_bulk(f, CKEYS, "gen2");
	poll_all();
	atomic_store(&c_applied, true);
	wait_reads(r, true, 2000);
	atomic_store(&c_stop, true);
	for (i = 0; i < CREADERS; i++)
		pthread_join(r[i].tid, NULL);
	for (i = 0; i < CREADERS; i++) {
		assert_int_equal(r[i].errors, 0);
		assert_int_equal(r[i].violations, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_outside_update_invalidates_cached_key),
		T(test_outside_insert_delete_rename_invalidate),
		T(test_own_writes_are_not_outside_changes),
		T(test_change_in_unserved_region_is_ignored),
		T(test_idle_poll_takes_nothing),
		T(test_outside_change_poisons_load_in_the_air),
		T(test_backlog_is_applied_in_bounded_batches),
		T(test_slow_backlog_invalidates_everything_once),
		T(test_short_error_streak_logs_once_and_loses_nothing),
		T(test_long_error_streak_invalidates_everything),
		T(test_head_unreadable_at_start_invalidates_when_known),
		T(test_feed_pruned_past_cursor_invalidates_everything),
		T(test_lag_bounds_commit_to_invalidation),
		T(test_thread_applies_changes_and_stops),
		T(test_no_old_value_after_the_feed_applied),
#undef T
	};

	return cmocka_run_group_tests_name("feed", tests, NULL, NULL);
}
