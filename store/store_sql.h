/*
 * store_sql.h - the SQL text of the store: schema, upgrade steps and the
 * statements sqlite.c prepares (changes.c's among them: it runs them through
 * store__rstmt). Included by sqlite.c only, as it defines static arrays;
 * the statement indexes live in store_int.h. doc/schema.md is the
 * reference for users of the schema.
 */
#ifndef RFS_STORE_SQL_H
#define RFS_STORE_SQL_H

#include "store_int.h" /* R_NSTMT, W_NSTMT and the indexes */

#define SCHEMA_VERSION 2 /* PRAGMA user_version this code writes */

/*
 * Times in triggers: julianday('now') has millisecond precision and is
 * fixed for one statement; rounding removes the float error (< 0.05 ms).
 */
#define NOW_MS                                                                 \
	"CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
#define NOW_NS "(" NOW_MS " * 1000000)"

/*
 * The kv_feed_* triggers record every change of a row's name or value in
 * changes; an UPDATE that moves a row records both names. Version 2
 * creates them again, unchanged, around its new changes table.
 */
#define FEED_TRIGGERS                                                          \
	"CREATE TRIGGER kv_feed_insert AFTER INSERT ON kv\n"                   \
	"BEGIN\n"                                                              \
	"  INSERT INTO changes(region, key, ts_ms)\n"                          \
	"    VALUES (NEW.region, NEW.key, " NOW_MS ");\n"                      \
	"END;\n"                                                               \
	"CREATE TRIGGER kv_feed_update\n"                                      \
	"AFTER UPDATE OF region, key, value ON kv\n"                           \
	"BEGIN\n"                                                              \
	"  INSERT INTO changes(region, key, ts_ms)\n"                          \
	"    SELECT OLD.region, OLD.key, " NOW_MS "\n"                         \
	"    WHERE OLD.region IS NOT NEW.region OR OLD.key IS NOT NEW.key;\n"  \
	"  INSERT INTO changes(region, key, ts_ms)\n"                          \
	"    VALUES (NEW.region, NEW.key, " NOW_MS ");\n"                      \
	"END;\n"                                                               \
	"CREATE TRIGGER kv_feed_delete AFTER DELETE ON kv\n"                   \
	"BEGIN\n"                                                              \
	"  INSERT INTO changes(region, key, ts_ms)\n"                          \
	"    VALUES (OLD.region, OLD.key, " NOW_MS ");\n"                      \
	"END;\n"

/*
 * Version 1. kv_meta covers stat, list and usage (stat names it with
 * INDEXED BY, list and usage get it from the planner): value precedes the
 * metadata in a row, so without it reading size walks the value's whole
 * overflow chain (8 MB value: ~2 ms per stat, 75 ms for a 40-key usage
 * sum; microseconds through the index).
 *
 * The kv_fill_* triggers keep size, mtime_ns and version right for
 * writers that leave them out or set them NULL (the shell); our writer
 * sets all three (and a new version), so they never fire on our path.
 * They update only size, mtime_ns and version: kv_fill_null's WHEN is
 * false after such an update and the other triggers do not watch those
 * columns, so nothing recurses, whatever PRAGMA recursive_triggers says.
 */
static const char schema_v1[] =
	"CREATE TABLE kv(\n"
	"  region TEXT NOT NULL,\n"
	"  key TEXT NOT NULL,\n"
	"  value BLOB NOT NULL,\n"
	"  size INTEGER,\n"
	"  mtime_ns INTEGER,\n"
	"  version INTEGER,\n"
	"  PRIMARY KEY(region, key));\n"
	"CREATE INDEX kv_meta ON kv(region, key, size, mtime_ns, version);\n"
	"CREATE TABLE changes(\n"
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,\n"
	"  region TEXT NOT NULL,\n"
	"  key TEXT NOT NULL,\n"
	"  ts_ms INTEGER NOT NULL);\n"
	"CREATE TRIGGER kv_fill_insert AFTER INSERT ON kv\n"
	"WHEN NEW.size IS NULL OR NEW.mtime_ns IS NULL OR NEW.version IS NULL\n"
	"BEGIN\n"
	"  UPDATE kv SET size = length(CAST(NEW.value AS BLOB)),\n"
	"    mtime_ns = coalesce(NEW.mtime_ns, " NOW_NS "),\n"
	"    version = coalesce(NEW.version, 1)\n"
	"  WHERE rowid = NEW.rowid;\n"
	"END;\n"
	"CREATE TRIGGER kv_fill_update\n"
	"AFTER UPDATE OF region, key, value ON kv\n"
	"WHEN NEW.version IS OLD.version\n"
	"BEGIN\n"
	"  UPDATE kv SET size = length(CAST(NEW.value AS BLOB)),\n"
	"    mtime_ns = " NOW_NS ",\n"
	"    version = coalesce(OLD.version, 0) + 1\n"
	"  WHERE rowid = NEW.rowid;\n"
	"END;\n"
	"CREATE TRIGGER kv_fill_null AFTER UPDATE OF size, mtime_ns, version\n"
	"ON kv\n"
	"WHEN NEW.size IS NULL OR NEW.mtime_ns IS NULL OR NEW.version IS NULL\n"
	"BEGIN\n"
	"  UPDATE kv SET size = length(CAST(NEW.value AS BLOB)),\n"
	"    mtime_ns = coalesce(NEW.mtime_ns, " NOW_NS "),\n"
	"    version = coalesce(NEW.version, coalesce(OLD.version, 0) + 1)\n"
	"  WHERE rowid = NEW.rowid;\n"
	"END;\n" FEED_TRIGGERS;

/*
 * Version 2: changes without AUTOINCREMENT. AUTOINCREMENT kept the head in
 * sqlite_sequence, a table of its own whose page every commit rewrote: one
 * WAL frame of about 5.9 per create (2 of the writer's 12 pwrite()s).
 * Now a new seq is max(seq) + 1, which never reuses a number as long as
 * the newest row is never deleted: changes_keep_head makes deleting it a
 * no-op, for everyone (prune, the shell), so a pruned feed keeps its head
 * row. The upgrade copies the rows; a head that sqlite_sequence held
 * beyond the last row (every row pruned) lives on as a head row whose
 * region and key are X'' (a BLOB: the feed skips it, SQL_TEXT_ROW). The
 * kv_feed_* triggers are dropped and made again around the swap, as the
 * renaming checks every trigger that names the table.
 */
static const char schema_v2[] =
	"DROP TRIGGER kv_feed_insert;\n"
	"DROP TRIGGER kv_feed_update;\n"
	"DROP TRIGGER kv_feed_delete;\n"
	"ALTER TABLE changes RENAME TO changes_v1;\n"
	"CREATE TABLE changes(\n"
	"  seq INTEGER PRIMARY KEY,\n"
	"  region TEXT NOT NULL,\n"
	"  key TEXT NOT NULL,\n"
	"  ts_ms INTEGER NOT NULL);\n"
	"INSERT INTO changes(seq, region, key, ts_ms)\n"
	"  SELECT seq, region, key, ts_ms FROM changes_v1 ORDER BY seq;\n"
	"INSERT INTO changes(seq, region, key, ts_ms)\n"
	"  SELECT seq, x'', x'', " NOW_MS " FROM sqlite_sequence\n"
	"  WHERE name = 'changes_v1'\n"
	"    AND seq > coalesce((SELECT max(seq) FROM changes), 0);\n"
	"DROP TABLE changes_v1;\n"
	"CREATE TRIGGER changes_keep_head BEFORE DELETE ON changes\n"
	"WHEN OLD.seq = (SELECT max(seq) FROM changes)\n"
	"BEGIN\n"
	"  SELECT RAISE(IGNORE);\n"
	"END;\n" FEED_TRIGGERS;

/*
 * schema_steps[v] upgrades a database at user_version v to v + 1, inside
 * the transaction schema_upgrade() opens. A new version appends its step
 * here and bumps SCHEMA_VERSION. An empty database runs every step.
 */
static const char *const schema_steps[SCHEMA_VERSION] = {
	schema_v1, /* 0 -> 1: an empty database */
	schema_v2, /* 1 -> 2: changes without AUTOINCREMENT */
};

/*
 * The feed's head: the last sequence number handed out, 0 if none. max()
 * of the rowid is one descent to the table's last row.
 */
#define SQL_HEAD "SELECT coalesce(max(seq), 0) FROM changes"

/*
 * Keys and regions are TEXT. The columns have TEXT affinity, so an INTEGER
 * or REAL written by an outside writer is stored as its text ("42") and
 * NULL is refused (NOT NULL); only a BLOB keeps its type. A BLOB never
 * equals a bound TEXT, so lookups and changes never reach a BLOB-keyed
 * row; listing and usage bound the key below X'' (every TEXT sorts before
 * every BLOB), which keeps such rows out and keeps the index range tight;
 * the feed reads TEXT_ROW to skip their changes. See doc/schema.md.
 */
#define SQL_KEY_IS_TEXT "key < x''"
#define SQL_TEXT_ROW	"typeof(region) = 'text' AND typeof(key) = 'text'"

/* Keys that are valid file names (1..255 bytes, no '/' or NUL). */
#define SQL_KEY_IS_NAME                                                        \
	"length(CAST(key AS BLOB)) <= 255 "                                    \
	"AND instr(CAST(key AS BLOB), x'2f') = 0 "                             \
	"AND instr(CAST(key AS BLOB), x'00') = 0"

/* Statements of the read connections, indexed by R_* (store_int.h). */
static const char *const read_sql[R_NSTMT] = {
	[R_LOAD] = "SELECT value, mtime_ns, version FROM kv "
		   "WHERE region = ?1 AND key = ?2",
	/* INDEXED BY: on an equality over the whole primary key SQLite
	 * picks the unique index and reads the table row (whose value
	 * precedes the metadata) rather than the covering kv_meta */
	[R_STAT] = "SELECT size, mtime_ns, version FROM kv INDEXED BY kv_meta "
		   "WHERE region = ?1 AND key = ?2",
	[R_LIST] = "SELECT key, size, mtime_ns, version FROM kv "
		   "WHERE region = ?1 AND key > ?2 AND " SQL_KEY_IS_TEXT
		   " AND " SQL_KEY_IS_NAME " ORDER BY key LIMIT ?3",
	[R_USAGE] = "SELECT count(*), coalesce(sum(size), 0) FROM kv "
		    "WHERE region = ?1 AND " SQL_KEY_IS_TEXT,
	[R_HEAD] = SQL_HEAD,
	[R_FEED] = "SELECT seq, region, key, " SQL_TEXT_ROW " FROM changes "
		   "WHERE seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3",
	[R_DATA_VERSION] = "PRAGMA data_version",
};

/* Statements of the write connection, indexed by W_* (store_int.h). */
static const char *const write_sql[W_NSTMT] = {
	[W_BEGIN] = "BEGIN IMMEDIATE",
	[W_COMMIT] = "COMMIT",
	[W_ROLLBACK] = "ROLLBACK",
	[W_SAVEPOINT] = "SAVEPOINT op",
	[W_ROLLBACK_TO] = "ROLLBACK TO op",
	[W_RELEASE] = "RELEASE op",
	[W_PUT] = "INSERT INTO kv(region, key, value, size, mtime_ns, version) "
		  "VALUES (?1, ?2, ?3, ?4, ?5, 1) "
		  "ON CONFLICT(region, key) DO UPDATE SET "
		  "value = excluded.value, size = excluded.size, "
		  "mtime_ns = excluded.mtime_ns, "
		  "version = coalesce(kv.version, 0) + 1",
	[W_DELETE] = "DELETE FROM kv WHERE region = ?1 AND key = ?2",
	[W_DELETE_VERSION] = "DELETE FROM kv WHERE region = ?1 AND key = ?2 "
			     "AND version = ?3 AND size = 0",
	[W_VERSION] = "SELECT coalesce(version, 0) FROM kv "
		      "WHERE region = ?1 AND key = ?2",
	[W_RENAME] = "UPDATE OR REPLACE kv SET key = ?3, mtime_ns = ?4, "
		     "version = ?5 WHERE region = ?1 AND key = ?2",
	[W_HEAD] = SQL_HEAD,
	[W_PRUNE_FIND] = "SELECT seq FROM changes WHERE ts_ms >= ?1 "
			 "ORDER BY seq LIMIT 1",
	[W_PRUNE] = "DELETE FROM changes WHERE seq < ?1",
};

/*
 * PRAGMA synchronous takes effect when the statement is prepared, not when
 * it is stepped, so it cannot be a cached statement: these run through
 * sqlite3_exec() each time.
 */
static const char sync_full_sql[] = "PRAGMA synchronous = FULL";
static const char sync_normal_sql[] = "PRAGMA synchronous = NORMAL";

#endif /* RFS_STORE_SQL_H */
