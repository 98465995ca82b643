/*
 * store_helpers.h - shared by the store's unit tests: what they do to a
 * database directly, as an outside writer would (sqlite3 on its own
 * connection: run statements that must succeed, read one integer), and a
 * change-feed callback that logs what it is told. Include after
 * <cmocka.h>, <sqlite3.h> and "store.h".
 */
#ifndef RFS_TEST_STORE_HELPERS_H
#define RFS_TEST_STORE_HELPERS_H

/* Runs sql on db; fails the test with SQLite's message otherwise. */
static inline void outside_exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK)
		fail_msg("%s: %s", sql, msg ? msg : "?");
}

/* The first column of the one row sql returns, as an integer. */
static inline int64_t outside_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s;
	int64_t v;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* What feed_cb() was told: "region/key" lines, "*" for everything. */
struct feed_log {
	char text[4096];
	int calls;
	int stop_after; /* 0: never stop */
};

static inline int feed_cb(void *ctx, const char *region, const void *key,
			  size_t klen)
{
	struct feed_log *log = ctx;
	size_t n = strlen(log->text);

	if (!region)
		snprintf(log->text + n, sizeof(log->text) - n, "*\n");
	else
		snprintf(log->text + n, sizeof(log->text) - n, "%s/%.*s\n",
			 region, (int)klen, (const char *)key);
	log->calls++;
	return log->stop_after && log->calls >= log->stop_after;
}

#endif
