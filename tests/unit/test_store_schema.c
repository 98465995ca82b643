/*
 * test_store_schema.c - unit tests of the SQLite store's schema versions
 * (store/store_sql.h): the upgrade of a version 1 database in place, and
 * the change feed's sequence numbers, which are never handed out twice.
 *
 * A version 1 database is made as version 1 code made it: its schema
 * step (schema_steps[0], the SQL main's build runs on an empty file) and
 * user_version 1, through a plain sqlite3 connection, whose writes the
 * version 1 triggers record as they recorded anyone's. Every test gets a
 * fresh mkdtemp() directory.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"
#include "store_helpers.h"
#include "store_sql.h"

struct fixture {
	char dir[64];
	char path[128];
	sqlite3 *db; /* the outside connection */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	/* store_sql.h's other arrays are the store's business */
	(void)read_sql;
	(void)write_sql;
	(void)sync_full_sql;
	(void)sync_normal_sql;
	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/test_store_schema.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/store.db", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	static const char *const suffix[] = {"", "-wal", "-shm", "-reserve"};
	struct fixture *f = *state;
	char p[160];
	size_t i;

	sqlite3_close(f->db);
	for (i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
		unlink(p);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

/* A version 1 database at f->path, open as f->db. */
static void make_v1(struct fixture *f)
{
	assert_int_equal(sqlite3_open(f->path, &f->db), SQLITE_OK);
	sqlite3_busy_timeout(f->db, 5000);
	outside_exec(f->db, "PRAGMA journal_mode = WAL");
	outside_exec(f->db, "BEGIN");
	outside_exec(f->db, schema_steps[0]);
	outside_exec(f->db, "PRAGMA user_version = 1");
	outside_exec(f->db, "COMMIT");
	assert_int_equal(outside_int(f->db,
				     "SELECT count(*) FROM sqlite_schema "
				     "WHERE sql LIKE '%AUTOINCREMENT%'"),
			 1);
}

/* Collects store_changes() callbacks as "region/key" lines ("*" = all). */

static void assert_loads(struct store *st, const char *key, const char *val)
{
	struct store_meta m;
	void *data = NULL;

	assert_int_equal(store_load(st, "r", key, strlen(key), &data, &m), 0);
	assert_int_equal(m.size, strlen(val));
	assert_memory_equal(data, val, m.size);
	free(data);
}

/*
 * A version 1 database with rows and a feed opens, is upgraded, keeps its
 * rows and its feed: the head stays, a cursor taken before the upgrade
 * reads on exactly the changes made after it, numbers go on from the head.
 */
static void test_v1_database_upgrades_in_place(void **state)
{
	struct fixture *f = *state;
	struct feed_log log = {.calls = 0};
	uint64_t cursor, head;
	struct store *st;

	make_v1(f);
	outside_exec(f->db, "INSERT INTO kv(region, key, value) VALUES "
			    "('r', 'a', 'one'), ('r', 'b', 'two')");
	outside_exec(f->db, "UPDATE kv SET value = 'uno' WHERE key = 'a'");
	outside_exec(f->db, "DELETE FROM kv WHERE key = 'b'");
	outside_exec(f->db, "INSERT INTO kv(region, key, value) VALUES "
			    "('r', 'c', 'three')");
	cursor = (uint64_t)outside_int(f->db, "SELECT seq FROM sqlite_sequence "
					      "WHERE name = 'changes'");
	assert_int_equal(cursor, 5);

	assert_int_equal(store_open(f->path, NULL, &st), 0);
	assert_int_equal(outside_int(f->db, "PRAGMA user_version"), 2);
	assert_int_equal(outside_int(f->db,
				     "SELECT count(*) FROM sqlite_schema "
				     "WHERE sql LIKE '%AUTOINCREMENT%'"),
			 0);
	assert_int_equal(
		outside_int(f->db, "SELECT count(*) FROM sqlite_sequence"), 0);
	assert_int_equal(outside_int(f->db, "SELECT count(*) FROM changes"), 5);
	assert_loads(st, "a", "uno");
	assert_loads(st, "c", "three");
	assert_int_equal(store_stat(st, "r", "b", 1, NULL), -ENOENT);
	assert_int_equal(store_changes_head(st, &head), 0);
	assert_int_equal(head, 5);

	/* the triggers of version 2 record outside changes as before */
	assert_int_equal(store_changes(st, &cursor, feed_cb, &log), 0);
	outside_exec(f->db, "INSERT INTO kv(region, key, value) VALUES "
			    "('r', 'd', 'four')");
	outside_exec(f->db, "UPDATE kv SET key = 'e' WHERE key = 'a'");
	assert_int_equal(store_put(st, "r", "own", 3, "x", 1, 0, NULL), 0);
	assert_int_equal(store_changes(st, &cursor, feed_cb, &log), 3);
	assert_string_equal(log.text, "r/d\nr/a\nr/e\n");
	assert_int_equal(cursor, 9);
	assert_int_equal(outside_int(f->db, "SELECT max(seq) FROM changes"), 9);
	store_close(st);

	/* and it opens again as it is */
	assert_int_equal(store_open(f->path, NULL, &st), 0);
	assert_int_equal(store_changes_head(st, &head), 0);
	assert_int_equal(head, 9);
	assert_loads(st, "e", "uno");
	store_close(st);
}

/*
 * A version 1 feed pruned to nothing kept its head in sqlite_sequence
 * only: the upgrade keeps it as a head row, which the feed skips, so
 * numbers are not handed out again and a cursor at the head sees no hole.
 */
static void test_v1_pruned_feed_keeps_its_head(void **state)
{
	struct fixture *f = *state;
	struct feed_log log = {.calls = 0};
	uint64_t cursor = 3, old = 1, head;
	struct store *st;

	make_v1(f);
	outside_exec(f->db,
		     "INSERT INTO kv(region, key, value) VALUES "
		     "('r', 'a', '1'), ('r', 'b', '2'), ('r', 'c', '3')");
	outside_exec(f->db, "DELETE FROM changes");
	assert_int_equal(store_open(f->path, NULL, &st), 0);
	assert_int_equal(store_changes_head(st, &head), 0);
	assert_int_equal(head, 3);
	assert_int_equal(outside_int(f->db, "SELECT count(*) FROM changes "
					    "WHERE typeof(key) = 'blob'"),
			 1);
	outside_exec(f->db, "INSERT INTO kv(region, key, value) VALUES "
			    "('r', 'd', '4')");
	assert_int_equal(outside_int(f->db, "SELECT max(seq) FROM changes"), 4);
	assert_int_equal(store_changes(st, &cursor, feed_cb, &log), 1);
	assert_string_equal(log.text, "r/d\n");
	/* a cursor from before the prune sees the hole, not the head row */
	log.text[0] = '\0';
	assert_int_equal(store_changes(st, &old, feed_cb, &log), 2);
	assert_string_equal(log.text, "*\nr/d\n");
	store_close(st);
}

/*
 * Without AUTOINCREMENT a new number is max(seq) + 1: deleting the newest
 * row would hand its number out again, and a reader whose cursor is at it
 * would skip the new change for ever. Pruning, and deleting by hand, keep
 * the newest row.
 */
static void test_prune_never_reuses_a_number(void **state)
{
	struct fixture *f = *state;
	struct feed_log log = {.calls = 0};
	uint64_t cursor, head;
	struct store *st;

	assert_int_equal(store_open(f->path, NULL, &st), 0);
	assert_int_equal(sqlite3_open(f->path, &f->db), SQLITE_OK);
	sqlite3_busy_timeout(f->db, 5000);
	assert_int_equal(store_put(st, "r", "k1", 2, "x", 1, 0, NULL), 0);
	assert_int_equal(store_put(st, "r", "k2", 2, "x", 1, 0, NULL), 0);
	assert_int_equal(store_changes_head(st, &cursor), 0);
	assert_int_equal(cursor, 2);
	outside_exec(f->db, "UPDATE changes SET ts_ms = 0");
	assert_int_equal(store_changes_prune(st, 60000), 0);
	assert_int_equal(outside_int(f->db, "SELECT count(*) FROM changes"), 1);
	assert_int_equal(store_changes_head(st, &head), 0);
	assert_int_equal(head, 2);

	/* a poller at the head gets the next change, whoever deletes */
	outside_exec(f->db, "INSERT INTO kv(region, key, value) "
			    "VALUES ('r', 'k3', 'y')");
	assert_int_equal(store_changes(st, &cursor, feed_cb, &log), 1);
	assert_int_equal(cursor, 3);
	outside_exec(f->db, "DELETE FROM changes");
	assert_int_equal(outside_int(f->db, "SELECT count(*) FROM changes"), 1);
	outside_exec(f->db, "INSERT INTO kv(region, key, value) "
			    "VALUES ('r', 'k4', 'y')");
	assert_int_equal(outside_int(f->db, "SELECT max(seq) FROM changes"), 4);
	assert_int_equal(store_changes(st, &cursor, feed_cb, &log), 1);
	assert_string_equal(log.text, "r/k3\nr/k4\n");
	store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_v1_database_upgrades_in_place),
		T(test_v1_pruned_feed_keeps_its_head),
		T(test_prune_never_reuses_a_number),
#undef T
	};

	return cmocka_run_group_tests_name("store_schema", tests, NULL, NULL);
}
