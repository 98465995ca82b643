/*
 * test_pg_store.c - unit tests of the PostgreSQL store (store/pg.c)
 * through store.h, against a throwaway cluster: meson runs this program
 * under tests/common/pg.sh, which starts the cluster and sets
 * RFS_PG_CONNINFO. Without it (no PostgreSQL binaries) it exits 77.
 *
 * Each test starts from an empty database (the regionfs schema dropped)
 * and opens the store anew. A plain libpq connection stands in for
 * outside writers (psql, a loader, a mount on another host). Nothing here
 * sleeps to let a race happen: the late-commit test holds a transaction
 * open on its own connection for exactly as long as it needs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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
#include <libpq-fe.h>

#include "pg_sql.h" /* the replay's statement text (test_replay_plan) */
#include "store.h"

static const char *conninfo;

struct fixture {
	struct store *st;
	PGconn *out; /* the outside writer */
};

static void sql_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType s = PQresultStatus(r);

	if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
		fail_msg("%s: %s", sql, PQresultErrorMessage(r));
	PQclear(r);
}

static PGconn *connect_out(void)
{
	PGconn *c = PQconnectdb(conninfo);

	if (PQstatus(c) != CONNECTION_OK)
		fail_msg("connect: %s", PQerrorMessage(c));
	sql_ok(c, "SET client_min_messages = warning");
	return c;
}

/* Every store error, on stderr: what the daemon would log. */
static void log_error(void *ctx, int err, enum store_err_kind kind,
		      const char *what, const char *region, const void *key,
		      size_t klen, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "store error (%s) in %s %s %.*s: %s (%s)\n",
		store_err_kind_name(kind), what, region ? region : "",
		(int)klen, key ? (const char *)key : "", strerror(-err), msg);
}

static const struct store_options log_opts = {.on_error = log_error};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->out = connect_out();
	sql_ok(f->out, "DROP SCHEMA IF EXISTS regionfs CASCADE");
	assert_int_equal(store_open(conninfo, &log_opts, &f->st), 0);
	assert_string_equal(store_backend_name(f->st), "postgresql");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	store_close(f->st);
	PQfinish(f->out);
	free(f);
	return 0;
}

/* ---- the change feed, collected ------------------------------------------- */

struct seen {
	int n, all;
	char keys[64][64];
};

static int collect(void *ctx, const char *region, const void *key, size_t klen)
{
	struct seen *s = ctx;

	if (!key) {
		assert_null(region);
		s->all++;
		return 0;
	}
	assert_true(klen < 48);
	if (s->n < 64)
		snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s/%.*s", region,
			 (int)klen, (const char *)key);
	s->n++;
	return 0;
}

static bool seen_key(const struct seen *s, const char *rk)
{
	int i;

	for (i = 0; i < s->n && i < 64; i++)
		if (!strcmp(s->keys[i], rk))
			return true;
	return false;
}

/* ---- tests ------------------------------------------------------------------- */

static void test_source_recognised(void **state)
{
	char *d;

	(void)state;
	assert_int_equal(store_source_backend("/var/lib/x.db"),
			 STORE_BACKEND_SQLITE);
	assert_int_equal(store_source_backend("data.db"), STORE_BACKEND_SQLITE);
	assert_int_equal(store_source_backend("./host=x"),
			 STORE_BACKEND_SQLITE);
	assert_int_equal(store_source_backend("hostile=1"),
			 STORE_BACKEND_SQLITE);
	assert_int_equal(store_source_backend("postgresql://h/db"),
			 STORE_BACKEND_POSTGRESQL);
	assert_int_equal(store_source_backend("postgres://h/db"),
			 STORE_BACKEND_POSTGRESQL);
	assert_int_equal(store_source_backend(" host = /run dbname=x"),
			 STORE_BACKEND_POSTGRESQL);
	d = store_source_display("postgresql://u:secret@h:5432/db?sslmode=x");
	assert_string_equal(d, "postgresql://u:***@h:5432/db?sslmode=x");
	free(d);
	d = store_source_display("host=h password=secret dbname=x");
	assert_string_equal(d, "host=h password=*** dbname=x");
	free(d);
	d = store_source_display("host=h password='se cret' dbname=x");
	assert_string_equal(d, "host=h password=*** dbname=x");
	free(d);
	d = store_source_display("postgresql://h/db?password=secret&x=1");
	assert_string_equal(d, "postgresql://h/db?password=***&x=1");
	free(d);
}

static void test_roundtrip(void **state)
{
	struct fixture *f = *state;
	static const char bin[] = {'a', '\x01', '\xff', 'z'};
	struct store_meta m, m2;
	uint64_t n, bytes;
	void *data;

	assert_int_equal(store_put(f->st, "r", "k", 1, "hello", 5, 0, &m), 0);
	assert_int_equal(m.size, 5);
	assert_int_equal(m.version, 1);
	assert_int_equal(store_load(f->st, "r", "k", 1, &data, &m2), 0);
	assert_memory_equal(data, "hello", 5);
	free(data);
	assert_int_equal(m2.version, 1);
	assert_int_equal(m2.mtime_ns, m.mtime_ns);
	assert_int_equal(store_put(f->st, "r", "k", 1, "", 0, 0, &m), 0);
	assert_int_equal(m.version, 2);
	assert_int_equal(store_load(f->st, "r", "k", 1, &data, &m2), 0);
	assert_null(data);
	assert_int_equal(m2.size, 0);
	/* any byte but NUL and '/' round-trips in keys */
	assert_int_equal(store_put(f->st, "r", bin, 4, bin, 4, 0, NULL), 0);
	assert_int_equal(store_stat(f->st, "r", bin, 4, &m), 0);
	assert_int_equal(m.size, 4);
	assert_int_equal(store_load(f->st, "r", "nope", 4, &data, NULL),
			 -ENOENT);
	assert_int_equal(store_stat(f->st, "other", "k", 1, &m), -ENOENT);
	assert_int_equal(store_region_usage(f->st, "r", &n, &bytes), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bytes, 4);
	assert_int_equal(store_delete(f->st, "r", "k", 1, 0), 0);
	assert_int_equal(store_delete(f->st, "r", "k", 1, 0), -ENOENT);
	assert_int_equal(store_put(f->st, "r", "a/b", 3, "x", 1, 0, NULL),
			 -EINVAL);
	assert_int_equal(store_put(f->st, NULL, "a", 1, "x", 1, 0, NULL),
			 -EINVAL);
}

static void test_delete_version(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;

	assert_int_equal(store_put(f->st, "r", "e", 1, "", 0, 0, &m), 0);
	assert_int_equal(
		store_delete_version(f->st, "r", "e", 1, m.version + 1, 0),
		-ENOENT);
	assert_int_equal(store_delete_version(f->st, "r", "e", 1, m.version, 0),
			 0);
	assert_int_equal(store_stat(f->st, "r", "e", 1, &m), -ENOENT);
	assert_int_equal(store_put(f->st, "r", "e", 1, "x", 1, 0, &m), 0);
	assert_int_equal(store_delete_version(f->st, "r", "e", 1, m.version, 0),
			 -ENOENT); /* not empty */
}

struct listed {
	int n;
	char keys[300][8];
};

static int list_fn(void *ctx, const void *key, size_t klen,
		   const struct store_meta *meta)
{
	struct listed *l = ctx;

	(void)meta;
	assert_true(klen < 8);
	memcpy(l->keys[l->n], key, klen);
	l->keys[l->n][klen] = '\0';
	l->n++;
	return 0;
}

static void test_list_byte_order(void **state)
{
	struct fixture *f = *state;
	struct listed l = {0};
	char k[8];
	int i;

	/* 0x7f-0xff sort after ASCII in byte order (not in a collation) */
	assert_int_equal(store_put(f->st, "r", "\xc3\xa9", 2, "", 0, 0, NULL),
			 0);
	assert_int_equal(store_put(f->st, "r", "B", 1, "", 0, 0, NULL), 0);
	assert_int_equal(store_put(f->st, "r", "a", 1, "", 0, 0, NULL), 0);
	for (i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "k%03d", i);
		assert_int_equal(
			store_put(f->st, "r", k, strlen(k), "", 0, 0, NULL), 0);
	}
	assert_int_equal(store_put(f->st, "other", "x", 1, "", 0, 0, NULL), 0);
	/* an outside writer's key that is no file name is not listed */
	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) "
		       "VALUES ('r', 'a/b', 'x')");
	assert_int_equal(store_list(f->st, "r", NULL, 0, 1000, list_fn, &l),
			 203);
	assert_string_equal(l.keys[0], "B");
	assert_string_equal(l.keys[1], "a");
	assert_string_equal(l.keys[2], "k000");
	assert_string_equal(l.keys[202], "\xc3\xa9");
	memset(&l, 0, sizeof(l));
	assert_int_equal(store_list(f->st, "r", "k100", 4, 10, list_fn, &l),
			 10);
	assert_string_equal(l.keys[0], "k101");
}

static void test_rename(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;
	void *data;

	assert_int_equal(store_put(f->st, "r", "a", 1, "A", 1, 0, NULL), 0);
	assert_int_equal(store_put(f->st, "r", "b", 1, "B", 1, 0, NULL), 0);
	assert_int_equal(store_put(f->st, "r", "b", 1, "BB", 2, 0, NULL), 0);
	assert_int_equal(store_rename(f->st, "r", "a", 1, "b", 1, 0), 0);
	assert_int_equal(store_stat(f->st, "r", "a", 1, &m), -ENOENT);
	assert_int_equal(store_load(f->st, "r", "b", 1, &data, &m), 0);
	assert_memory_equal(data, "A", 1);
	free(data);
	assert_int_equal(m.version, 3); /* above both old versions */
	assert_int_equal(store_rename(f->st, "r", "a", 1, "c", 1, 0), -ENOENT);
	assert_int_equal(store_rename(f->st, "r", "b", 1, "b", 1, 0), 0);
	assert_int_equal(store_rename(f->st, "r", "b", 1, "c", 1, 0), 0);
	assert_int_equal(store_stat(f->st, "r", "c", 1, &m), 0);
}

/*
 * Our writer logs its own changes in its statements, so the triggers do
 * not run for it (schema 3: regionfs.self_logged): with kv_fill and
 * kv_log made to fail, its put (of a new key and of one that exists),
 * rename and deletes still work, and log
 * the rows kv_log would have (both names of a rename, our origin); an
 * outside writer still goes through the triggers.
 */
static void test_writer_logs_itself(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;
	PGresult *r;
	int i;
	static const char *const want[] = {"p", "p", "p", "q", "q", "e", "e"};

	sql_ok(f->out, "CREATE OR REPLACE FUNCTION regionfs.kv_fill() "
		       "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
		       "RAISE EXCEPTION 'kv_fill ran'; END $$");
	sql_ok(f->out, "CREATE OR REPLACE FUNCTION regionfs.kv_log() "
		       "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
		       "RAISE EXCEPTION 'kv_log ran'; END $$");
	assert_int_equal(store_put(f->st, "r", "p", 1, "P", 1, 0, &m), 0);
	assert_int_equal(m.version, 1);
	assert_int_equal(store_put(f->st, "r", "p", 1, "PP", 2, 0, &m), 0);
	assert_int_equal(m.version, 2);
	assert_int_equal(store_rename(f->st, "r", "p", 1, "q", 1, 0), 0);
	assert_int_equal(store_delete(f->st, "r", "q", 1, 0), 0);
	assert_int_equal(store_delete(f->st, "r", "q", 1, 0), -ENOENT);
	assert_int_equal(store_put(f->st, "r", "e", 1, "", 0, 0, &m), 0);
	assert_int_equal(store_delete_version(f->st, "r", "e", 1, m.version, 0),
			 0);
	r = PQexec(f->out, "SELECT region, convert_from(key, 'UTF8'), "
			   "origin IS NOT NULL, ts_ms > 0 "
			   "FROM regionfs.changes ORDER BY seq");
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_int_equal(PQntuples(r), 7);
	for (i = 0; i < 7; i++) {
		assert_string_equal(PQgetvalue(r, i, 0), "r");
		assert_string_equal(PQgetvalue(r, i, 1), want[i]);
		assert_string_equal(PQgetvalue(r, i, 2), "t");
		assert_string_equal(PQgetvalue(r, i, 3), "t");
	}
	PQclear(r);
	r = PQexec(f->out, "INSERT INTO regionfs.kv(region, key, value) "
			   "VALUES ('r', 'o', 'x')");
	assert_int_equal(PQresultStatus(r), PGRES_FATAL_ERROR);
	PQclear(r);
}

static void test_outside_writer_fills_meta(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;
	void *data;

	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) "
		       "VALUES ('r', 'o', 'abc')");
	assert_int_equal(store_load(f->st, "r", "o", 1, &data, &m), 0);
	free(data);
	assert_int_equal(m.size, 3);
	assert_int_equal(m.version, 1);
	assert_true(m.mtime_ns > 0);
	sql_ok(f->out, "UPDATE regionfs.kv SET value = 'abcd' "
		       "WHERE region = 'r' AND key = 'o'");
	assert_int_equal(store_stat(f->st, "r", "o", 1, &m), 0);
	assert_int_equal(m.size, 4);
	assert_int_equal(m.version, 2);
}

static void test_feed_outside_not_own(void **state)
{
	struct fixture *f = *state;
	struct seen s = {0};
	uint64_t cur;

	assert_int_equal(store_changes_head(f->st, &cur), 0);
	assert_int_equal(store_put(f->st, "r", "mine", 4, "x", 1, 0, NULL), 0);
	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) "
		       "VALUES ('r', 'theirs', 'y')");
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 1);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.keys[0], "r/theirs");
	/* nothing new: nothing delivered, twice */
	memset(&s, 0, sizeof(s));
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 0);
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 0);
	/* a rename by the outside writer names both keys */
	sql_ok(f->out, "UPDATE regionfs.kv SET key = 'moved' "
		       "WHERE region = 'r' AND key = 'theirs'");
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 2);
	assert_true(seen_key(&s, "r/theirs"));
	assert_true(seen_key(&s, "r/moved"));
	/* TRUNCATE: everything */
	memset(&s, 0, sizeof(s));
	sql_ok(f->out, "TRUNCATE regionfs.kv");
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 1);
	assert_int_equal(s.all, 1);
}

/*
 * The reason for the snapshot cursor: a transaction that took a LOWER
 * sequence number commits AFTER one with a higher number was read. A
 * "seq > last" cursor skips it for ever; ours must deliver it.
 */
static void test_feed_late_lower_seq(void **state)
{
	struct fixture *f = *state;
	PGconn *late = connect_out();
	struct seen s = {0};
	uint64_t cur;
	PGresult *r;
	long long seq_late, seq_early;

	assert_int_equal(store_changes_head(f->st, &cur), 0);
	sql_ok(late, "BEGIN");
	sql_ok(late, "INSERT INTO regionfs.kv(region, key, value) "
		     "VALUES ('r', 'late', 'L')");
	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) "
		       "VALUES ('r', 'early', 'E')");
	r = PQexec(f->out, "SELECT max(seq) FILTER (WHERE key = 'early') "
			   "FROM regionfs.changes");
	seq_early = atoll(PQgetvalue(r, 0, 0));
	PQclear(r);
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 1);
	assert_string_equal(s.keys[0], "r/early");
	sql_ok(late, "COMMIT");
	r = PQexec(f->out, "SELECT max(seq) FILTER (WHERE key = 'late') "
			   "FROM regionfs.changes");
	seq_late = atoll(PQgetvalue(r, 0, 0));
	PQclear(r);
	assert_true(seq_late < seq_early); /* the case is real */
	memset(&s, 0, sizeof(s));
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 1);
	assert_string_equal(s.keys[0], "r/late");
	assert_int_equal(s.all, 0);
	PQfinish(late);
}

/* A caller that stops early resumes the same pass, nothing lost. */
static int stop_after_one(void *ctx, const char *region, const void *key,
			  size_t klen)
{
	collect(ctx, region, key, klen);
	return 1;
}

static void test_feed_stop_and_resume(void **state)
{
	struct fixture *f = *state;
	struct seen s = {0};
	uint64_t cur;
	int i;

	assert_int_equal(store_changes_head(f->st, &cur), 0);
	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) "
		       "SELECT 'r', convert_to('k' || i, 'UTF8'), 'v' "
		       "FROM generate_series(1, 5) i");
	for (i = 0; i < 5; i++)
		assert_int_equal(store_changes(f->st, &cur, stop_after_one, &s),
				 1);
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 0);
	assert_int_equal(s.n, 5);
	for (i = 1; i <= 5; i++) {
		char k[16];

		snprintf(k, sizeof(k), "r/k%d", i);
		assert_true(seen_key(&s, k));
	}
}

static void test_feed_pruned_and_unknown(void **state)
{
	struct fixture *f = *state;
	struct seen s = {0};
	uint64_t cur, cur2;

	assert_int_equal(store_changes_head(f->st, &cur), 0);
	cur2 = cur;
	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) "
		       "VALUES ('r', 'p', 'P')");
	/* every log row is older than "now + 1 s": all pruned */
	sql_ok(f->out, "UPDATE regionfs.changes SET ts_ms = ts_ms - 10000");
	assert_int_equal(store_changes_prune(f->st, 1000), 0);
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 1);
	assert_int_equal(s.all, 1);
	assert_int_equal(s.n, 0);
	/* a position the store never gave */
	memset(&s, 0, sizeof(s));
	cur2 = 123456789;
	assert_int_equal(store_changes(f->st, &cur2, collect, &s), 1);
	assert_int_equal(s.all, 1);
	/* and from the new positions, normal service */
	memset(&s, 0, sizeof(s));
	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) "
		       "VALUES ('r', 'q', 'Q')");
	assert_int_equal(store_changes(f->st, &cur, collect, &s), 1);
	assert_string_equal(s.keys[0], "r/q");
}

/*
 * The feed connection runs generic plans (planned once, not at every
 * replay): the replay's statement must then still scan the xid index on a
 * large log, not the whole log in seq order. The statement text of
 * pg_sql.h, prepared here as the store prepares it, on a log of 50,000
 * old rows (ANALYZEd), with the plan cache mode the feed sets.
 */
static void test_replay_plan(void **state)
{
	struct fixture *f = *state;
	const struct pg_stmt *q = &pg_stmts[PQ_FIRST];
	const char *vals[4] = {"1000", "1000:1000:", "x", PG_XID_MAX};
	char sql[256];
	PGresult *r;
	bool xid_index = false;
	int i;

	(void)pg_schema_steps;
	sql_ok(f->out,
	       "INSERT INTO regionfs.changes(xid, region, key, ts_ms) "
	       "SELECT '3', 'r', 'k', 1 FROM generate_series(1, 50000)");
	sql_ok(f->out, "ANALYZE regionfs.changes");
	sql_ok(f->out, "SET plan_cache_mode = force_generic_plan");
	r = PQprepare(f->out, q->name, q->sql, q->nparams, NULL);
	assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	assert_int_equal(q->nparams, 4);
	snprintf(sql, sizeof(sql), "EXPLAIN EXECUTE %s('%s', '%s', '%s', '%s')",
		 q->name, vals[0], vals[1], vals[2], vals[3]);
	r = PQexec(f->out, sql);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	for (i = 0; i < PQntuples(r); i++)
		xid_index |= strstr(PQgetvalue(r, i, 0), "changes_xid") != NULL;
	for (i = 0; !xid_index && i < PQntuples(r); i++)
		fprintf(stderr, "%s\n", PQgetvalue(r, i, 0)); /* the plan */
	PQclear(r);
	assert_true(xid_index);
	/* and the store replays over that log as before */
	{
		struct seen s = {0};
		uint64_t cur;

		assert_int_equal(store_changes_head(f->st, &cur), 0);
		sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) "
			       "VALUES ('r', 'big', 'B')");
		assert_int_equal(store_changes(f->st, &cur, collect, &s), 1);
		assert_string_equal(s.keys[0], "r/big");
	}
}

/* Drains st's feed connection until a notification was heard (bounded:
 * 10 s), never waiting a fixed time. */
static void drain_until_heard(struct store *st)
{
	int got = 0, tries;

	for (tries = 0; tries < 1000 && got == 0; tries++) {
		got = store_changes_drain(st);
		assert_true(got >= 0);
		if (!got)
			usleep(10000);
	}
	assert_true(got > 0);
}

/* Two stores (two mounts) on one database: each sees the other's writes,
 * and the doorbell reaches the other's LISTEN connection. */
static void test_two_stores_doorbell(void **state)
{
	struct fixture *f = *state;
	struct store *b;
	struct store_stats sa, sb;
	struct seen s = {0};
	uint64_t cur;
	int fd;

	assert_int_equal(store_open(conninfo, NULL, &b), 0);
	assert_int_equal(store_changes_head(b, &cur), 0);
	assert_int_equal(store_put(f->st, "r", "x", 1, "1", 1, 0, NULL), 0);
	fd = store_changes_fd(b);
	assert_true(fd >= 0);
	/* the doorbell was rung before put returned; wait for it to land */
	drain_until_heard(b);
	/* the doorbell's hint, then the log's row */
	assert_int_equal(store_changes(b, &cur, collect, &s), 2);
	assert_string_equal(s.keys[0], "r/x");
	assert_string_equal(s.keys[1], "r/x");
	store_stats(f->st, &sa);
	store_stats(b, &sb);
	assert_true(sa.doorbells_sent >= 1);
	assert_true(sb.doorbells_received >= 1);
	store_close(b);
}

/*
 * A doorbell names what its commits changed (hints): the other store
 * invalidates those names at the start of its next pass, before and
 * without the log (deleted here, so only the hints can name them). Any
 * bytes of a key; a rename's both names; entries that are no region and
 * file name are skipped; an outside client's empty payload names nothing.
 */
static void test_doorbell_hints(void **state)
{
	struct fixture *f = *state;
	static const char odd[] = "a b\x01\xff:";
	struct store *b;
	struct seen s = {0};
	uint64_t cur;

	assert_int_equal(store_open(conninfo, NULL, &b), 0);
	assert_int_equal(store_changes_head(b, &cur), 0);
	assert_int_equal(
		store_put(f->st, "r 1", odd, strlen(odd), "1", 1, 0, NULL), 0);
	drain_until_heard(b);
	sql_ok(f->out, "DELETE FROM regionfs.changes");
	assert_int_equal(store_changes(b, &cur, collect, &s), 1);
	assert_true(seen_key(&s, "r 1/a b\x01\xff:"));
	memset(&s, 0, sizeof(s));
	assert_int_equal(
		store_rename(f->st, "r 1", odd, strlen(odd), "c", 1, 0), 0);
	drain_until_heard(b);
	sql_ok(f->out, "DELETE FROM regionfs.changes");
	assert_int_equal(store_changes(b, &cur, collect, &s), 2);
	assert_true(seen_key(&s, "r 1/a b\x01\xff:"));
	assert_true(seen_key(&s, "r 1/c"));
	/* forged: not hex, a '/' key, an empty key, an odd length; then r/A */
	memset(&s, 0, sizeof(s));
	sql_ok(f->out, "SELECT pg_notify('regionfs', "
		       "'someone zz:41 72:2f 72: 72:4 72:41')");
	sql_ok(f->out, "SELECT pg_notify('regionfs', '')");
	drain_until_heard(b);
	assert_int_equal(store_changes(b, &cur, collect, &s), 1);
	assert_string_equal(s.keys[0], "r/A");
	store_close(b);
}

/* Commits covered: rung, coalesced or unheard; waits for the bell thread. */
static void wait_covered(struct store *st, struct store_stats *s)
{
	int i;

	for (i = 0; i < 1000; i++) {
		store_stats(st, s);
		if (s->doorbells_sent + s->doorbells_coalesced +
			    s->doorbells_unheard >=
		    s->commits)
			return;
		usleep(10000);
	}
	fail_msg("commits not covered by doorbells");
}

/*
 * A store alone on its database rings for nobody: after its first look
 * (the first bell rings, then looks), commits are counted unheard. A
 * store that starts to listen registers, and is rung for after the next
 * look (at most 100 ms later): it hears a doorbell within a bounded
 * number of writes 20 ms apart.
 */
static void test_doorbell_unheard(void **state)
{
	struct fixture *f = *state;
	struct store_stats s;
	struct store *b;
	uint64_t cur;
	int i, got = 0;

	assert_int_equal(store_put(f->st, "r", "a", 1, "1", 1, 0, NULL), 0);
	wait_covered(f->st, &s);
	assert_int_equal(s.doorbells_sent, 1);
	assert_int_equal(store_put(f->st, "r", "a", 1, "2", 1, 0, NULL), 0);
	wait_covered(f->st, &s);
	assert_int_equal(s.doorbells_sent, 1);
	assert_int_equal(s.doorbells_unheard, 1);
	assert_int_equal(store_open(conninfo, NULL, &b), 0);
	assert_int_equal(store_changes_head(b, &cur), 0);
	for (i = 0; i < 500 && got == 0; i++) {
		assert_int_equal(store_put(f->st, "r", "a", 1, "3", 1, 0, NULL),
				 0);
		wait_covered(f->st, &s);
		usleep(20000);
		got = store_changes_drain(b);
		assert_true(got >= 0);
	}
	assert_true(got > 0);
	store_close(b);
}

struct writer_arg {
	struct store *st;
	int id;
};

static void *writer(void *arg)
{
	struct writer_arg *w = arg;
	char k[32];
	int i;

	for (i = 0; i < 100; i++) {
		snprintf(k, sizeof(k), "w%d-%d", w->id, i);
		assert_int_equal(store_put(w->st, "r", k, strlen(k), "v", 1,
					   STORE_DURABLE, NULL),
				 0);
	}
	return NULL;
}

/* 8 writers (writer() above) on st, joined. */
static void run_writers(struct store *st)
{
	struct writer_arg wa[8];
	pthread_t t[8];
	int i;

	for (i = 0; i < 8; i++) {
		wa[i].st = st;
		wa[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL, writer, &wa[i]),
				 0);
	}
	for (i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
}

static void test_group_commit(void **state)
{
	struct fixture *f = *state;
	struct store_stats s;
	uint64_t n, bytes;

	run_writers(f->st);
	assert_int_equal(store_region_usage(f->st, "r", &n, &bytes), 0);
	assert_int_equal(n, 800);
	store_stats(f->st, &s);
	assert_int_equal(s.rows, 800);
	assert_true(s.commits <= 800);
	assert_true(s.max_batch >= 1);
	assert_int_equal(s.errors, 0);
	assert_int_equal(store_sync(f->st), 0);
}

/*
 * Doorbells are coalesced, never lost: 8 writers commit back to back;
 * every commit is covered by a doorbell rung after it (sent, or
 * coalesced into a later one), the last one included, within a bounded
 * wait (the doorbell thread rings behind the commits), and the other
 * store hears them.
 */
static void test_doorbells_coalesce(void **state)
{
	struct fixture *f = *state;
	struct store_stats s;
	struct store *b;
	uint64_t cur;
	int i;

	assert_int_equal(store_open(conninfo, NULL, &b), 0);
	assert_int_equal(store_changes_head(b, &cur), 0);
	run_writers(f->st);
	for (i = 0; i < 1000; i++) {
		store_stats(f->st, &s);
		if (s.doorbells_sent + s.doorbells_coalesced >= s.commits)
			break;
		usleep(10000);
	}
	assert_int_equal(s.rows, 800);
	assert_int_equal(s.doorbells_sent + s.doorbells_coalesced, s.commits);
	assert_int_equal(s.doorbells_unheard, 0); /* b listens */
	assert_true(s.doorbells_sent >= 1);
	assert_int_equal(s.doorbells_failed, 0);
	drain_until_heard(b);
	store_close(b);
}

/*
 * A failing op fails alone: the others of its batch still commit. An
 * outside CHECK constraint refuses one value.
 */
static void test_op_fails_alone(void **state)
{
	struct fixture *f = *state;
	struct store_stats s;
	struct store_meta m;

	sql_ok(f->out, "ALTER TABLE regionfs.kv ADD CONSTRAINT no_bad "
		       "CHECK (value <> 'bad'::bytea)");
	assert_int_equal(store_put(f->st, "r", "k", 1, "bad", 3, 0, NULL),
			 -EIO);
	assert_int_equal(store_put(f->st, "r", "k", 1, "good", 4, 0, NULL), 0);
	assert_int_equal(store_stat(f->st, "r", "k", 1, &m), 0);
	assert_int_equal(m.size, 4);
	store_stats(f->st, &s);
	assert_true(s.errs[STORE_ERR_OTHER] >= 1);
}

/*
 * A batch whose commit fails (an outside deferred constraint trigger
 * refuses value 'late' at commit, after every statement of the batch
 * succeeded) fails, stores nothing, and leaves the writer's connection
 * ready for the next batch: a pipelined batch commits at its pipeline
 * sync, and an error there is a failed commit, not a success.
 */
static void test_commit_fails(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;

	sql_ok(f->out, "CREATE FUNCTION no_late() RETURNS trigger "
		       "LANGUAGE plpgsql AS $$ BEGIN IF NEW.value = "
		       "'late'::bytea THEN RAISE EXCEPTION 'late'; END IF; "
		       "RETURN NULL; END $$");
	sql_ok(f->out, "CREATE CONSTRAINT TRIGGER no_late AFTER INSERT OR "
		       "UPDATE ON regionfs.kv DEFERRABLE INITIALLY DEFERRED "
		       "FOR EACH ROW EXECUTE FUNCTION no_late()");
	assert_int_equal(store_put(f->st, "r", "a", 1, "1", 1, 0, NULL), 0);
	assert_int_equal(
		store_put(f->st, "r", "k", 1, "late", 4, STORE_DURABLE, NULL),
		-EIO);
	assert_int_equal(store_stat(f->st, "r", "k", 1, &m), -ENOENT);
	assert_int_equal(store_put(f->st, "r", "k", 1, "ok", 2, 0, NULL), 0);
	assert_int_equal(store_put(f->st, "r", "b", 1, "2", 1, 0, NULL), 0);
	assert_int_equal(store_stat(f->st, "r", "k", 1, &m), 0);
	assert_int_equal(m.size, 2);
	sql_ok(f->out, "DROP FUNCTION no_late() CASCADE");
}

/* synchronous_standby_names, set (a standby that never comes) or reset,
 * in effect for new connections on return */
static void sync_standby(PGconn *out, bool on)
{
	PGresult *r;
	int i;
	bool set = !on;

	sql_ok(out, on ? "ALTER SYSTEM SET synchronous_standby_names = "
			 "'rfs_nobody'"
		       : "ALTER SYSTEM RESET synchronous_standby_names");
	sql_ok(out, "SELECT pg_reload_conf()");
	for (i = 0; i < 1000 && set != on; i++) {
		PGconn *c = connect_out();

		r = PQexec(c, "SHOW synchronous_standby_names");
		set = *PQgetvalue(r, 0, 0) != '\0';
		PQclear(r);
		PQfinish(c);
		if (set != on)
			usleep(10000);
	}
	assert_true(set == on);
}

/* teardown of test_durable_commit: no standby is waited for after it,
 * even when it failed half-way (later tests commit durably) */
static int teardown_sync(void **state)
{
	struct fixture *f = *state;

	sql_ok(f->out, "ALTER SYSTEM RESET synchronous_standby_names");
	sql_ok(f->out, "SELECT pg_reload_conf()");
	return teardown(state);
}

static void *durable_put(void *arg)
{
	return (void *)(intptr_t)store_put(arg, "r", "d", 1, "v", 1,
					   STORE_DURABLE, NULL);
}

/*
 * Durability, seen through a synchronous standby that never comes: a
 * synchronous commit waits for it (wait event SyncRep) until
 * synchronous_standby_names is reset, an asynchronous one does not. The
 * store's session commits asynchronously (not opened durable): a plain
 * put and its doorbell return at once, a STORE_DURABLE put waits.
 */
static void test_durable_commit(void **state)
{
	struct fixture *f = *state;
	struct store *b;
	pthread_t t;
	PGresult *r;
	void *rc;
	int i, waiting = 0;

	sync_standby(f->out, true);
	assert_int_equal(store_open(conninfo, &log_opts, &b), 0);
	assert_int_equal(store_put(b, "r", "a", 1, "1", 1, 0, NULL), 0);
	assert_int_equal(store_put(b, "r", "b", 1, "2", 1, 0, NULL), 0);
	assert_int_equal(store_rename(b, "r", "b", 1, "c", 1, 0), 0);
	assert_int_equal(pthread_create(&t, NULL, durable_put, b), 0);
	for (i = 0; i < 1000 && !waiting; i++) {
		r = PQexec(f->out, "SELECT count(*) FROM pg_stat_activity "
				   "WHERE application_name = 'regionfs' "
				   "AND wait_event = 'SyncRep'");
		waiting = atoi(PQgetvalue(r, 0, 0));
		PQclear(r);
		if (!waiting)
			usleep(10000);
	}
	sync_standby(f->out, false); /* releases the waiting commit */
	assert_int_equal(pthread_join(t, &rc), 0);
	assert_int_equal((intptr_t)rc, 0);
	assert_int_equal(waiting, 1);
	store_close(b);
}

/*
 * Terminates every connection of the stores (application_name regionfs)
 * and waits until their backends are gone, so each has closed its socket
 * (the stores see a dead idle connection, not one dying mid-batch). The
 * doorbell thread rings behind the last put, and opens its connection
 * again if it was rung while killed: those are terminated too.
 */
static void kill_store_conns(PGconn *out)
{
	PGresult *r;
	int i, left = 1;

	for (i = 0; i < 1000 && left; i++) {
		if (i % 10 == 0) /* at once, then every 100 ms */
			sql_ok(out, "SELECT pg_terminate_backend(pid) FROM "
				    "pg_stat_activity WHERE application_name "
				    "= 'regionfs' AND pid <> pg_backend_pid()");
		r = PQexec(out, "SELECT count(*) FROM pg_stat_activity "
				"WHERE application_name = 'regionfs'");
		left = atoi(PQgetvalue(r, 0, 0));
		PQclear(r);
		if (left)
			usleep(10000);
	}
	assert_int_equal(left, 0);
}

/*
 * A lost connection is opened again; a read-only server (here: the
 * database set read-only, as a standby would be) gives EROFS.
 */
static void test_reconnect_and_erofs(void **state)
{
	struct fixture *f = *state;
	struct store_stats s;
	void *data;

	assert_int_equal(store_put(f->st, "r", "k", 1, "v", 1, 0, NULL), 0);
	kill_store_conns(f->out);
	/* the writer's dead connection is noticed at BEGIN, before anything
	 * was sent: the batch runs again on a new one */
	assert_int_equal(store_put(f->st, "r", "k", 1, "w", 1, 0, NULL), 0);
	/* a reader's too: reads are run again on a new connection */
	assert_int_equal(store_load(f->st, "r", "k", 1, &data, NULL), 0);
	assert_memory_equal(data, "w", 1);
	free(data);
	store_stats(f->st, &s);
	assert_true(s.reconnects >= 2);
	assert_int_equal(s.errs[STORE_ERR_IO], 0);
	sql_ok(f->out, "ALTER DATABASE rfs SET default_transaction_read_only "
		       "= on");
	kill_store_conns(f->out);
	assert_int_equal(store_put(f->st, "r", "k", 1, "x", 1, 0, NULL),
			 -EROFS);
	store_stats(f->st, &s);
	assert_true(s.errs[STORE_ERR_READONLY] >= 1);
	sql_ok(f->out,
	       "ALTER DATABASE rfs RESET default_transaction_read_only");
	kill_store_conns(f->out);
	assert_int_equal(store_put(f->st, "r", "k", 1, "y", 1, 0, NULL), 0);
}

/* A row locked by an outside client past the busy timeout: EAGAIN. */
static void test_busy(void **state)
{
	struct fixture *f = *state;
	struct store_options o = {.busy_timeout_ms = 200};
	struct store *b;
	struct store_stats s;

	assert_int_equal(store_put(f->st, "r", "k", 1, "v", 1, 0, NULL), 0);
	assert_int_equal(store_open(conninfo, &o, &b), 0);
	sql_ok(f->out, "BEGIN");
	sql_ok(f->out, "SELECT * FROM regionfs.kv WHERE key = 'k' FOR UPDATE");
	assert_int_equal(store_put(b, "r", "k", 1, "w", 1, 0, NULL), -EAGAIN);
	sql_ok(f->out, "ROLLBACK");
	assert_int_equal(store_put(b, "r", "k", 1, "w", 1, 0, NULL), 0);
	store_stats(b, &s);
	assert_true(s.errs[STORE_ERR_BUSY] >= 1);
	store_close(b);
}

static void test_read_only_and_version(void **state)
{
	struct fixture *f = *state;
	struct store_options o = {.read_only = true};
	struct store *b;
	void *data;

	assert_int_equal(store_put(f->st, "r", "k", 1, "v", 1, 0, NULL), 0);
	assert_int_equal(store_open(conninfo, &o, &b), 0);
	assert_int_equal(store_load(b, "r", "k", 1, &data, NULL), 0);
	free(data);
	assert_int_equal(store_put(b, "r", "k", 1, "w", 1, 0, NULL), -EROFS);
	store_close(b);
	/* a newer schema than this code knows is refused */
	sql_ok(f->out, "UPDATE regionfs.schema_version SET version = 99");
	assert_int_equal(store_open(conninfo, NULL, &b), -EPROTO);
	sql_ok(f->out, "UPDATE regionfs.schema_version SET version = 1");
}

/* A database at schema version 1 (no mounts) is upgraded to the current
 * version. */
static void test_upgrade_from_v1(void **state)
{
	struct fixture *f = *state;
	struct store *b;
	PGresult *r;

	sql_ok(f->out, "DROP TABLE regionfs.mounts");
	sql_ok(f->out, "UPDATE regionfs.schema_version SET version = 1");
	assert_int_equal(store_open(conninfo, NULL, &b), 0);
	store_close(b);
	r = PQexec(f->out, "SELECT version, to_regclass('regionfs.mounts') "
			   "IS NOT NULL FROM regionfs.schema_version");
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_int_equal(atoi(PQgetvalue(r, 0, 0)), PG_SCHEMA_VERSION);
	assert_string_equal(PQgetvalue(r, 0, 1), "t");
	PQclear(r);
}

/* One int8 (or count) column of a one-row query. */
static long long sql_int(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	long long v;

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		fail_msg("%s: %s", sql, PQresultErrorMessage(r));
	v = atoll(PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

#define KV_O  "FROM regionfs.kv WHERE region = 'r' AND key = 'o'"
#define LOG_O "FROM regionfs.changes WHERE region = 'r' AND key = 'o'"

/*
 * A database at schema version 3 (built by the steps that made it) is
 * upgraded to 4: the triggers' WHEN calls regionfs.logs(), and there is
 * no index on changes.ts_ms. Outside changes are still filled in and
 * logged once, ours are logged by our statements only.
 */
static void test_upgrade_from_v3(void **state)
{
	struct fixture *f = *state;
	struct store_meta m;
	struct store *b;
	int v;

	sql_ok(f->out, "DROP SCHEMA regionfs CASCADE");
	sql_ok(f->out, "CREATE SCHEMA regionfs; CREATE TABLE "
		       "regionfs.schema_version(version integer NOT NULL); "
		       "INSERT INTO regionfs.schema_version VALUES (3)");
	for (v = 0; v < 3; v++)
		sql_ok(f->out, pg_schema_steps[v]);
	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) "
		       "VALUES ('r', 'o', 'abc')");
	assert_int_equal(store_open(conninfo, &log_opts, &b), 0);
	assert_int_equal(
		sql_int(f->out, "SELECT version FROM regionfs.schema_version"),
		4);
	assert_int_equal(sql_int(f->out, "SELECT count(*) FROM pg_trigger "
					 "WHERE tgrelid = 'regionfs.kv'::"
					 "regclass AND pg_get_triggerdef(oid) "
					 "LIKE '%WHEN (regionfs.logs())%'"),
			 2);
	assert_int_equal(sql_int(f->out, "SELECT count(*) FROM pg_class WHERE "
					 "relname = 'changes_ts'"),
			 0);
	/* a new value without a version: old + 1, its size */
	sql_ok(f->out, "UPDATE regionfs.kv SET value = 'abcd' "
		       "WHERE region = 'r' AND key = 'o'");
	assert_int_equal(store_stat(b, "r", "o", 1, &m), 0);
	assert_int_equal(m.size, 4);
	assert_int_equal(m.version, 2);
	/* logged by the triggers: the insert and the new value */
	assert_int_equal(sql_int(f->out, "SELECT count(*) " LOG_O), 2);
	assert_int_equal(sql_int(f->out, "SELECT count(*) " LOG_O
					 " AND origin IS NOT NULL"),
			 0);
	/* our put of the row: old + 1, one log row, ours */
	assert_int_equal(store_put(b, "r", "o", 1, "Z", 1, 0, &m), 0);
	assert_int_equal(m.version, 3);
	assert_int_equal(sql_int(f->out, "SELECT version " KV_O), 3);
	assert_int_equal(sql_int(f->out, "SELECT count(*) " LOG_O), 3);
	assert_int_equal(sql_int(f->out, "SELECT count(*) " LOG_O
					 " AND origin IS NOT NULL"),
			 1);
	store_close(b);
}

/*
 * Pruning walks the log in seq order (version 4: no index on ts_ms): the
 * rows before the first one not old enough go, the horizon rises past
 * them; an old row after a young one waits for a later prune.
 */
static void test_prune_seq_order(void **state)
{
	struct fixture *f = *state;
	PGresult *r;

	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) VALUES "
		       "('r', 'p1', ''), ('r', 'p2', ''), ('r', 'p3', '')");
	sql_ok(f->out, "INSERT INTO regionfs.kv(region, key, value) VALUES "
		       "('r', 'q1', ''), ('r', 'q2', '')");
	sql_ok(f->out, "UPDATE regionfs.changes SET ts_ms = ts_ms - 10000 "
		       "WHERE key <> 'q1'");
	assert_int_equal(store_changes_prune(f->st, 1000), 0);
	r = PQexec(f->out, "SELECT string_agg(convert_from(key, 'UTF8'), ',' "
			   "ORDER BY seq), (SELECT pruned_upto <> '0' FROM "
			   "regionfs.log_horizon) FROM regionfs.changes");
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_string_equal(PQgetvalue(r, 0, 0), "q1,q2");
	assert_string_equal(PQgetvalue(r, 0, 1), "t");
	PQclear(r);
	/* q1 old now too: the rest goes */
	sql_ok(f->out, "UPDATE regionfs.changes SET ts_ms = ts_ms - 10000 "
		       "WHERE key = 'q1'");
	assert_int_equal(store_changes_prune(f->st, 1000), 0);
	assert_int_equal(sql_int(f->out, "SELECT count(*) FROM "
					 "regionfs.changes"),
			 0);
	/* an empty log: nothing to do */
	assert_int_equal(store_changes_prune(f->st, 1000), 0);
}

/* A mount's feed thread, as fs/feed.c runs it: a pass every 20 ms. */
struct feeder {
	struct store *st;
	atomic_bool stop;
	pthread_t t;
};

static int ignore(void *ctx, const char *region, const void *key, size_t klen)
{
	(void)ctx;
	(void)region;
	(void)key;
	(void)klen;
	return 0;
}

static void *feeder_main(void *arg)
{
	struct feeder *fd = arg;
	uint64_t cur;

	assert_int_equal(store_changes_head(fd->st, &cur), 0);
	while (!atomic_load(&fd->stop)) {
		store_changes_drain(fd->st);
		store_changes(fd->st, &cur, ignore, NULL);
		usleep(20000);
	}
	return NULL;
}

static void feeder_start(struct feeder *fd, struct store *st)
{
	fd->st = st;
	atomic_store(&fd->stop, false);
	assert_int_equal(pthread_create(&fd->t, NULL, feeder_main, fd), 0);
}

static void feeder_stop(struct feeder *fd)
{
	atomic_store(&fd->stop, true);
	pthread_join(fd->t, NULL);
}

/* Waits (at most 10 s) until store_hits_ok(st) is want. */
static void wait_hits(struct store *st, bool want)
{
	int i;

	for (i = 0; i < 1000 && store_hits_ok(st) != want; i++)
		usleep(10000);
	assert_int_equal(store_hits_ok(st), want);
}

/*
 * Leases and acknowledgements: B takes its lease on its first passes;
 * A's wait ends on B's acknowledgement; with B's passes stopped (frozen),
 * B's lease lapses, A's wait ends when it runs out, and B serves no hits
 * until it renewed and replayed again.
 */
static void test_lease_and_ack(void **state)
{
	struct fixture *f = *state;
	struct store_options o = {.lease_ms = 1500, .renew_ms = 200};
	struct store *a, *b;
	struct store_stats sa, sb;
	struct feeder fb;
	PGresult *r;

	assert_int_equal(store_open(conninfo, &o, &a), 0);
	assert_int_equal(store_open(conninfo, &o, &b), 0);
	assert_false(store_hits_ok(b)); /* no lease yet */
	feeder_start(&fb, b);
	wait_hits(b, true);
	/* a strict write waits for B's acknowledgement */
	assert_int_equal(store_put(a, "r", "k", 1, "1", 1, 0, NULL), 0);
	assert_int_equal(store_wait_applied(a), 0);
	r = PQexec(f->out, "SELECT count(*) FROM regionfs.mounts WHERE "
			   "pg_visible_in_snapshot((SELECT max(xid) FROM "
			   "regionfs.changes), applied)");
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_string_equal(PQgetvalue(r, 0, 0), "1"); /* B, not A */
	PQclear(r);
	store_stats(a, &sa);
	assert_int_equal(sa.acks_waited, 1);
	assert_int_equal(sa.acks_timed_out, 0);
	/* B frozen: its lease lapses; A's wait ends with it, not at a cap */
	feeder_stop(&fb);
	assert_int_equal(store_put(a, "r", "k", 1, "2", 1, 0, NULL), 0);
	assert_int_equal(store_wait_applied(a), 0);
	store_stats(a, &sa);
	assert_int_equal(sa.acks_waited, 2);
	assert_int_equal(sa.acks_timed_out, 0);
	wait_hits(b, false);
	/* B wakes: renewed (the lapse seen), then replayed: hits again */
	feeder_start(&fb, b);
	wait_hits(b, true);
	store_stats(b, &sb);
	assert_true(sb.lease_lapses >= 1);
	assert_true(sb.lease_renewals >= 2);
	assert_int_equal(sb.lease_live, 1);
	feeder_stop(&fb);
	/* a closed store's row is gone: nobody waits for it */
	store_close(b);
	assert_int_equal(store_put(a, "r", "k", 1, "3", 1, 0, NULL), 0);
	assert_int_equal(store_wait_applied(a), 0);
	store_stats(a, &sa);
	assert_int_equal(sa.acks_waited, 3);
	assert_int_equal(sa.acks_timed_out, 0);
	store_close(a);
}

/* ---- an older mount's acknowledgement: the id alone ----------------------- */

struct waiter {
	struct store *st;
	atomic_bool done;
	int ret;
	pthread_t t;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->ret = store_wait_applied(w->st); /* no cmocka outside main */
	atomic_store(&w->done, true);
	return NULL;
}

/*
 * Rings, as mount "older" of an earlier regionfs would, an acknowledgement
 * of its id alone, with a doorbell behind it in the same transaction, and
 * drains st's feed connection until the doorbell is heard (bounded: 10 s):
 * one sender's notifications arrive in order, so the acknowledgement has
 * been heard too.
 */
static void ack_id_only(PGconn *out, struct store *st)
{
	sql_ok(out, "SELECT pg_notify('" PG_ACK_CHANNEL "', 'older'), "
		    "pg_notify('" PG_CHANNEL "', 'older')");
	drain_until_heard(st);
}

/* The one bigint a query returns. */
static int64_t sql_i64(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	int64_t v;

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		fail_msg("%s: %s", sql, PQresultErrorMessage(r));
	v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

/* Now, and the latest start of a look at regionfs.mounts by a writer
 * waiting for acknowledgements (PQ_PENDING): server clock, microseconds. */
#define SQL_NOW_US                                                             \
	"SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint"
#define SQL_PENDING_US                                                         \
	"SELECT coalesce((extract(epoch FROM max(query_start)) * 1e6)"         \
	"::bigint, 0) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "    \
	"AND query LIKE 'SELECT id, (extract(epoch FROM lease_until%'"

/*
 * Waits until the writer has begun two looks at regionfs.mounts after
 * server time since (bounded: 10 s): between them, it went through the
 * acknowledgements heard before since and did not return. False if
 * store_wait_applied() returned instead.
 */
static bool waiter_looked_twice(PGconn *out, struct waiter *w, int64_t since)
{
	int64_t first = 0, t;
	int tries;

	for (tries = 0; tries < 5000 && !atomic_load(&w->done); tries++) {
		t = sql_i64(out, SQL_PENDING_US);
		if (t > since && !first)
			first = t;
		else if (t > first && first)
			return true;
		usleep(2000);
	}
	if (!atomic_load(&w->done))
		fail_msg("the writer did not look at regionfs.mounts twice");
	return false;
}

/*
 * An acknowledgement of the id alone (an older regionfs, or a snapshot
 * too long for a notification) says nothing of what that mount applied:
 * a strict writer waiting for it must read regionfs.mounts again, and
 * return only once the mount's row there sees its change, never on the
 * notification alone. "older" is such a mount, played by the outside
 * connection: a live lease and an applied snapshot from before the write.
 * (That the writer looks again at once, not at its next poll 50 ms
 * later, is latency: not tested.) The waiter is static: a failure here
 * may leave it running.
 */
static void test_ack_id_only(void **state)
{
	struct fixture *f = *state;
	struct store_options o = {.lease_ms = 60000, .renew_ms = 1000};
	static struct waiter w;
	struct store *a;
	struct store_stats sa;
	uint64_t cur;
	int64_t since;

	assert_int_equal(store_open(conninfo, &o, &a), 0);
	assert_int_equal(store_changes_head(a, &cur), 0); /* LISTENs */
	sql_ok(f->out, "INSERT INTO regionfs.mounts(id, host, pid, "
		       "lease_until, applied) VALUES ('older', 'h', 1, "
		       "clock_timestamp() + interval '1 hour', "
		       "pg_current_snapshot())");
	assert_int_equal(store_put(a, "r", "k", 1, "1", 1, 0, NULL), 0);
	w.st = a;
	atomic_store(&w.done, false);
	assert_int_equal(pthread_create(&w.t, NULL, waiter_main, &w), 0);

	/* acknowledged, but its row still shows the older snapshot: the
	 * writer keeps waiting through two more looks at the row */
	ack_id_only(f->out, a);
	since = sql_i64(f->out, SQL_NOW_US);
	assert_true(waiter_looked_twice(f->out, &w, since));
	assert_false(atomic_load(&w.done));

	/* the row sees the write, then the id alone again: done */
	sql_ok(f->out, "UPDATE regionfs.mounts SET applied = "
		       "pg_current_snapshot(), renewals = renewals + 1 "
		       "WHERE id = 'older'");
	ack_id_only(f->out, a);
	pthread_join(w.t, NULL);
	assert_int_equal(w.ret, 0);
	store_stats(a, &sa);
	assert_int_equal(sa.acks_waited, 1);
	assert_int_equal(sa.acks_timed_out, 0); /* not at the cap */
	store_close(a);
}

static void test_unreachable(void **state)
{
	struct store *b;

	(void)state;
	assert_int_equal(
		store_open("host=/nonexistent-rfs dbname=x connect_timeout=2",
			   NULL, &b),
		-EIO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_source_recognised),
		cmocka_unit_test_setup_teardown(test_roundtrip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_delete_version, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_list_byte_order, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outside_writer_fills_meta,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed_outside_not_own,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed_late_lower_seq, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_logs_itself, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_feed_stop_and_resume,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed_pruned_and_unknown,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_replay_plan, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_two_stores_doorbell, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_doorbell_hints, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_doorbell_unheard, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_group_commit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_doorbells_coalesce, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_commit_fails, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_durable_commit, setup,
						teardown_sync),
		cmocka_unit_test_setup_teardown(test_op_fails_alone, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_and_erofs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_busy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only_and_version,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_v3, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_prune_seq_order, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_v1, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lease_and_ack, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ack_id_only, setup,
						teardown),
		cmocka_unit_test(test_unreachable),
	};

	conninfo = getenv("RFS_PG_CONNINFO");
	if (!conninfo || !*conninfo) {
		printf("SKIP: RFS_PG_CONNINFO not set (run under "
		       "tests/common/pg.sh)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
