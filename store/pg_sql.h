/*
 * pg_sql.h - the SQL text of the PostgreSQL store: schema, upgrade steps
 * and the statements pg.c prepares. Included by pg.c only. doc/schema.md
 * is the reference for users of the schema.
 */
#ifndef RFS_PG_SQL_H
#define RFS_PG_SQL_H

#define PG_SCHEMA_VERSION 4 /* regionfs.schema_version this code writes */
#define PG_CHANNEL	  "regionfs"	 /* the doorbell's LISTEN channel */
#define PG_ACK_CHANNEL	  "regionfs_ack" /* acknowledgements (pg.c) */

/* Serialises schema creation and upgrades between mounts starting at once. */
#define PG_SCHEMA_LOCK "SELECT pg_advisory_xact_lock(7276784519437313)"

/*
 * Version 1. Everything lives in schema regionfs (created with
 * schema_version before the first step), so the tables sit next to an
 * application's own in a database operators already run.
 *
 * kv: keys are bytea (any bytes round-trip, and bytea compares with
 * memcmp, so ORDER BY key is byte order). kv_fill (BEFORE, per row)
 * keeps size, mtime_ns and version right for writers that leave them out
 * or change a row without a new version (psql); our writer sets all
 * three, so it changes nothing on our path.
 *
 * changes: the change log. kv_log (AFTER, per row; per statement for
 * TRUNCATE, logged as region and key NULL: "everything changed") inserts
 * one row per name changed, in the writer's own transaction, with its
 * transaction id (xid, pg_current_xact_id()) and the writer's origin (the
 * session setting regionfs.origin: each mount's writer sets its own, so
 * it can skip its own changes; NULL for everyone else). The trigger does
 * NOT notify: a notifying transaction holds a cluster-wide lock through
 * its commit's WAL flush, which serialises every writer's commits. It is
 * SECURITY DEFINER so that a client allowed to write kv is logged even
 * without rights on changes.
 *
 * log_horizon: the largest xid among the log rows pruned so far; a reader
 * whose position is older must assume it missed something.
 */
static const char pg_schema_v1[] =
	"CREATE TABLE regionfs.kv(\n"
	"  region text NOT NULL,\n"
	"  key bytea NOT NULL,\n"
	"  value bytea NOT NULL,\n"
	"  size bigint,\n"
	"  mtime_ns bigint,\n"
	"  version bigint,\n"
	"  PRIMARY KEY (region, key));\n"
	"CREATE TABLE regionfs.changes(\n"
	"  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n"
	"  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),\n"
	"  region text,\n"
	"  key bytea,\n"
	"  ts_ms bigint NOT NULL,\n"
	"  origin text);\n"
	"CREATE INDEX changes_xid ON regionfs.changes(xid);\n"
	"CREATE INDEX changes_ts ON regionfs.changes(ts_ms);\n"
	"CREATE TABLE regionfs.log_horizon(pruned_upto xid8 NOT NULL);\n"
	"INSERT INTO regionfs.log_horizon VALUES ('0');\n"
	"CREATE FUNCTION regionfs.kv_fill() RETURNS trigger\n"
	"LANGUAGE plpgsql AS $$\n"
	"BEGIN\n"
	"  IF TG_OP = 'UPDATE' THEN\n"
	"    IF NEW.version IS NOT DISTINCT FROM OLD.version AND\n"
	"       (NEW.region IS DISTINCT FROM OLD.region OR\n"
	"        NEW.key IS DISTINCT FROM OLD.key OR\n"
	"        NEW.value IS DISTINCT FROM OLD.value) THEN\n"
	"      NEW.size := NULL;\n"
	"      NEW.mtime_ns := NULL;\n"
	"      NEW.version := coalesce(OLD.version, 0) + 1;\n"
	"    END IF;\n"
	"    IF NEW.version IS NULL THEN\n"
	"      NEW.version := coalesce(OLD.version, 0) + 1;\n"
	"    END IF;\n"
	"  ELSIF NEW.version IS NULL THEN\n"
	"    NEW.version := 1;\n"
	"  END IF;\n"
	"  IF NEW.size IS NULL THEN\n"
	"    NEW.size := length(NEW.value);\n"
	"  END IF;\n"
	"  IF NEW.mtime_ns IS NULL THEN\n"
	"    NEW.mtime_ns :=\n"
	"      (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint;\n"
	"  END IF;\n"
	"  RETURN NEW;\n"
	"END $$;\n"
	"CREATE TRIGGER kv_fill BEFORE INSERT OR UPDATE ON regionfs.kv\n"
	"  FOR EACH ROW EXECUTE FUNCTION regionfs.kv_fill();\n"
	"CREATE FUNCTION regionfs.kv_log() RETURNS trigger\n"
	"LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, "
	"pg_temp AS $$\n"
	"DECLARE\n"
	"  now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)"
	"::bigint;\n"
	"  o text := nullif(current_setting('regionfs.origin', true), '');\n"
	"BEGIN\n"
	"  IF TG_OP = 'TRUNCATE' THEN\n"
	"    INSERT INTO regionfs.changes(region, key, ts_ms, origin)\n"
	"      VALUES (NULL, NULL, now_ms, o);\n"
	"    RETURN NULL;\n"
	"  END IF;\n"
	"  IF TG_OP = 'DELETE' THEN\n"
	"    INSERT INTO regionfs.changes(region, key, ts_ms, origin)\n"
	"      VALUES (OLD.region, OLD.key, now_ms, o);\n"
	"    RETURN NULL;\n"
	"  END IF;\n"
	"  IF TG_OP = 'UPDATE' THEN\n"
	"    IF OLD.region IS DISTINCT FROM NEW.region OR\n"
	"       OLD.key IS DISTINCT FROM NEW.key THEN\n"
	"      INSERT INTO regionfs.changes(region, key, ts_ms, origin)\n"
	"        VALUES (OLD.region, OLD.key, now_ms, o);\n"
	"    END IF;\n"
	"  END IF;\n"
	"  INSERT INTO regionfs.changes(region, key, ts_ms, origin)\n"
	"    VALUES (NEW.region, NEW.key, now_ms, o);\n"
	"  RETURN NULL;\n"
	"END $$;\n"
	"CREATE TRIGGER kv_log\n"
	"  AFTER INSERT OR DELETE OR UPDATE OF region, key, value\n"
	"  ON regionfs.kv FOR EACH ROW EXECUTE FUNCTION regionfs.kv_log();\n"
	"CREATE TRIGGER kv_log_truncate AFTER TRUNCATE ON regionfs.kv\n"
	"  FOR EACH STATEMENT EXECUTE FUNCTION regionfs.kv_log();\n";

/*
 * Version 2: mounts, one row per mounted store (pg.c, "Leases"): id is
 * the store's origin, lease_until the end of its lease (the server's
 * clock), applied the snapshot up to which it has applied the change log
 * (every change of a transaction visible in it is invalidated in its
 * cache; NULL: none yet). A writer of a strict region waits for the live
 * rows whose applied does not yet see its transaction.
 */
static const char pg_schema_v2[] =
	"CREATE TABLE regionfs.mounts(\n"
	"  id text PRIMARY KEY,\n"
	"  host text NOT NULL,\n"
	"  pid integer NOT NULL,\n"
	"  started timestamptz NOT NULL DEFAULT clock_timestamp(),\n"
	"  lease_until timestamptz NOT NULL,\n"
	"  applied pg_snapshot,\n"
	"  renewals bigint NOT NULL DEFAULT 0);\n";

/*
 * Version 3: the triggers leave alone the changes of a session that logs
 * its own (session setting regionfs.self_logged = on: our writer, whose
 * statements insert their changes rows themselves, in the same statement,
 * and set size, mtime_ns and version). The triggers' work is what a write
 * costs the server beyond the row itself: three PL/pgSQL calls (kv_fill
 * twice for an upsert that updates) and the log row's INSERT run through
 * SPI from an AFTER trigger's queue (the server's CPU per lone durable
 * upsert fell from 123-141 us to 70-126 us with the log row in the
 * statement, pgbench -c1, loaded machine). Every other client is logged
 * as before, and so is a writer of an older regionfs, which never sets
 * it.
 */
#define PG_NOT_SELF_LOGGED                                                     \
	"current_setting('regionfs.self_logged', true) IS DISTINCT FROM 'on'"

static const char pg_schema_v3[] =
	"DROP TRIGGER kv_fill ON regionfs.kv;\n"
	"DROP TRIGGER kv_log ON regionfs.kv;\n"
	"CREATE TRIGGER kv_fill BEFORE INSERT OR UPDATE ON regionfs.kv\n"
	"  FOR EACH ROW WHEN (" PG_NOT_SELF_LOGGED ")\n"
	"  EXECUTE FUNCTION regionfs.kv_fill();\n"
	"CREATE TRIGGER kv_log\n"
	"  AFTER INSERT OR DELETE OR UPDATE OF region, key, value\n"
	"  ON regionfs.kv FOR EACH ROW WHEN (" PG_NOT_SELF_LOGGED ")\n"
	"  EXECUTE FUNCTION regionfs.kv_log();\n";

/*
 * Version 4: the triggers' WHEN is a call of regionfs.logs() (the same
 * test as version 3's, in a PL/pgSQL function), and the index on
 * changes.ts_ms is gone. A trigger's WHEN is read back from its stored
 * node tree and planned again by every statement that may fire it, for
 * every client, ours included, whose rows it then skips: kv_fill's and
 * kv_log's cost our upsert about 70,000 server instructions of its
 * 347,000 (callgrind, postgres --single, one durable upsert of an
 * existing key), and a WHEN that only calls a function takes 30,000 of
 * them off (tgqual's node tree is much smaller). Pruning walks the log in seq order (the primary
 * key) up to the first row not old enough (PQ_PRUNE), so the index on
 * ts_ms, an index insert for every log row, is dropped. Per lone durable
 * put of an existing key: 347,000 server instructions at version 3 (raw
 * upserts, logged by the triggers: 385,000), 306,000 now (raw: 345,000);
 * 8.0 WAL records and 570 bytes at version 3, 7.0 and 503 now. The
 * step runs again over its own result (OR REPLACE, IF EXISTS).
 */
static const char pg_schema_v4[] =
	"CREATE OR REPLACE FUNCTION regionfs.logs() RETURNS boolean\n"
	"LANGUAGE plpgsql STABLE AS $$\n"
	"BEGIN\n"
	"  RETURN " PG_NOT_SELF_LOGGED ";\n"
	"END $$;\n"
	"DROP TRIGGER kv_fill ON regionfs.kv;\n"
	"DROP TRIGGER kv_log ON regionfs.kv;\n"
	"CREATE TRIGGER kv_fill BEFORE INSERT OR UPDATE ON regionfs.kv\n"
	"  FOR EACH ROW WHEN (regionfs.logs())\n"
	"  EXECUTE FUNCTION regionfs.kv_fill();\n"
	"CREATE TRIGGER kv_log\n"
	"  AFTER INSERT OR DELETE OR UPDATE OF region, key, value\n"
	"  ON regionfs.kv FOR EACH ROW WHEN (regionfs.logs())\n"
	"  EXECUTE FUNCTION regionfs.kv_log();\n"
	"DROP INDEX IF EXISTS regionfs.changes_ts;\n";

/*
 * pg_schema_steps[v] upgrades a database at version v to v + 1, inside
 * the transaction pg.c's schema_upgrade() opens (with PG_SCHEMA_LOCK
 * held). A new version appends its step and bumps PG_SCHEMA_VERSION.
 */
static const char *const pg_schema_steps[PG_SCHEMA_VERSION] = {
	pg_schema_v1, /* 0 -> 1: no regionfs schema yet */
	pg_schema_v2, /* 1 -> 2: mounts (leases) */
	pg_schema_v3, /* 2 -> 3: the writer logs its own changes */
	pg_schema_v4, /* 3 -> 4: WHEN regionfs.logs(), no ts_ms index */
};

/* Keys that are valid file names (1..255 bytes, no '/' or NUL). */
#define PG_KEY_IS_NAME                                                         \
	"length(key) BETWEEN 1 AND 255 AND position('\\x2f'::bytea IN key) = " \
	"0 AND position('\\x00'::bytea IN key) = 0"

/* Prepared statements, by connection kind; see pg.c. */
enum {
	/* readers */
	PQ_LOAD,
	PQ_STAT,
	PQ_LIST,
	PQ_USAGE,
	PQ_PENDING,
	PQ_DBSIZE,
	/* the writer (pg.c prepares PQ_PUT to PQ_XID_DURABLE on it) */
	PQ_PUT,
	PQ_PUT_XID,
	PQ_PUT_XID_DURABLE,
	PQ_DELETE,
	PQ_DELETE_VERSION,
	PQ_VERSION,
	PQ_RENAME,
	PQ_PRUNE,
	PQ_XID,
	PQ_XID_DURABLE,
	PQ_BELL,
	PQ_OTHERS,
	/* the feed (LISTEN) connection */
	PQ_SNAP,
	PQ_FIRST,
	PQ_PAGE,
	PQ_LEASE,
	PQ_ACK_BELL,
	PQ_HELLO,
	PQ_NSTMT
};

/*
 * The writer's own log rows (see version 3): the columns kv_log fills in,
 * for the rows a statement's CTE returns.
 */
#define PG_LOG_INTO "INSERT INTO regionfs.changes(region, key, ts_ms, origin) "
#define PG_LOG_NOW                                                             \
	"(extract(epoch FROM clock_timestamp()) * 1000)::bigint, "             \
	"nullif(current_setting('regionfs.origin', true), '')"

/*
 * An upsert of (region $1, key $2): value $3, size $4, mtime_ns $5, with
 * its log row when it wrote one; the statement's columns follow (the
 * version first).
 */
#define PG_PUT_SQL                                                             \
	"WITH u AS (INSERT INTO regionfs.kv AS t"                              \
	"(region, key, value, size, mtime_ns, version) "                       \
	"VALUES ($1, $2, $3, $4, $5, 1) "                                      \
	"ON CONFLICT (region, key) DO UPDATE SET "                             \
	"value = excluded.value, size = excluded.size, "                       \
	"mtime_ns = excluded.mtime_ns, "                                       \
	"version = coalesce(t.version, 0) + 1 RETURNING version), "            \
	"l AS (" PG_LOG_INTO "SELECT $1, $2, " PG_LOG_NOW " FROM u) "          \
	"SELECT version"

/* A delete of the rows WHERE selects (region $1, key $2, ...), logged. */
#define PG_DELETE_SQL(where)                                                   \
	"WITH d AS (DELETE FROM regionfs.kv WHERE " where                      \
	" RETURNING region, key) " PG_LOG_INTO                                 \
	"SELECT region, key, " PG_LOG_NOW " FROM d"

struct pg_stmt {
	const char *name, *sql;
	int nparams;
};

static const struct pg_stmt pg_stmts[PQ_NSTMT] = {
	[PQ_LOAD] = {"rfs_load",
		     "SELECT value, mtime_ns, version FROM regionfs.kv "
		     "WHERE region = $1 AND key = $2",
		     2},
	[PQ_STAT] = {"rfs_stat",
		     "SELECT size, mtime_ns, version FROM regionfs.kv "
		     "WHERE region = $1 AND key = $2",
		     2},
	[PQ_LIST] = {"rfs_list",
		     "SELECT key, size, mtime_ns, version FROM regionfs.kv "
		     "WHERE region = $1 AND key > $2 AND " PG_KEY_IS_NAME
		     " ORDER BY key LIMIT $3",
		     3},
	[PQ_USAGE] = {"rfs_usage",
		      "SELECT count(*), coalesce(sum(size), 0)::bigint "
		      "FROM regionfs.kv WHERE region = $1",
		      1},
	/*
	 * The other mounts ($1: us) a strict change of transaction $2 still
	 * waits for (live lease, applied not seeing $2): their ids, and the
	 * ms left of their leases.
	 */
	[PQ_PENDING] =
		{"rfs_pending",
		 "SELECT id, (extract(epoch FROM lease_until - "
		 "clock_timestamp()) * 1000)::bigint FROM "
		 "regionfs.mounts WHERE id <> $1 "
		 "AND lease_until > clock_timestamp() AND (applied IS "
		 "NULL OR NOT pg_visible_in_snapshot($2::xid8, applied))",
		 2},
	[PQ_DBSIZE] = {"rfs_dbsize",
		       "SELECT pg_database_size(current_database())", 0},
	[PQ_PUT] = {"rfs_put", PG_PUT_SQL " FROM u", 5},
	/*
	 * A pipelined batch's lone put (pg.c, batch_pipe()), which also
	 * returns what PQ_XID and PQ_XID_DURABLE do: its transaction's id,
	 * as text, and for a durable batch of a session that commits
	 * asynchronously a synchronous commit of this transaction. A lone
	 * put is then one statement, as a raw upsert is.
	 */
	[PQ_PUT_XID] = {"rfs_put_xid",
			PG_PUT_SQL ", pg_current_xact_id()::text FROM u", 5},
	[PQ_PUT_XID_DURABLE] =
		{"rfs_put_xid_durable",
		 PG_PUT_SQL
		 ", pg_current_xact_id()::text, "
		 "set_config('synchronous_commit', 'on', true) FROM u",
		 5},
	[PQ_DELETE] = {"rfs_delete", PG_DELETE_SQL("region = $1 AND key = $2"),
		       2},
	[PQ_DELETE_VERSION] = {"rfs_delete_version",
			       PG_DELETE_SQL("region = $1 AND key = $2 AND "
					     "version = $3 AND size = 0"),
			       3},
	[PQ_VERSION] = {"rfs_version",
			"SELECT coalesce(version, 0) FROM regionfs.kv "
			"WHERE region = $1 AND key = $2 FOR UPDATE",
			2},
	/* both names logged, as kv_log does */
	[PQ_RENAME] = {"rfs_rename",
		       "WITH u AS (UPDATE regionfs.kv SET key = $3, "
		       "mtime_ns = $4, version = $5 WHERE region = $1 "
		       "AND key = $2 RETURNING region) " PG_LOG_INTO
		       "SELECT u.region, n.k, " PG_LOG_NOW " FROM u "
		       "CROSS JOIN (VALUES ($2::bytea), ($3::bytea)) n(k)",
		       5},
	/*
	 * Deletes old log rows and raises the horizon past them, at once:
	 * the rows before the first (in seq order, the primary key) with
	 * ts_ms >= $1, all of them if there is none. The server's clock
	 * stamps ts_ms when the row is inserted, as it takes seq, so this is
	 * every row older than $1 but for a clock stepped back (those wait
	 * for a later prune: fewer rows pruned is always safe).
	 */
	[PQ_PRUNE] = {"rfs_prune",
		      "WITH d AS (DELETE FROM regionfs.changes WHERE seq < "
		      "coalesce((SELECT seq FROM regionfs.changes "
		      "WHERE ts_ms >= $1 ORDER BY seq LIMIT 1), "
		      "(SELECT max(seq) + 1 FROM regionfs.changes)) "
		      "RETURNING xid) "
		      "UPDATE regionfs.log_horizon SET pruned_upto = "
		      "greatest(pruned_upto, (SELECT max(xid) FROM d)) "
		      "WHERE EXISTS (SELECT 1 FROM d)",
		      1},
	/*
	 * The first statement of a pipelined batch (pg.c, batch_pipe()),
	 * which runs in the implicit transaction its pipeline sync commits:
	 * the transaction's id, as text, and for a durable batch of a
	 * session that commits asynchronously, a synchronous commit (for
	 * this transaction only; read when it commits).
	 */
	[PQ_XID] = {"rfs_xid", "SELECT pg_current_xact_id()::text", 0},
	[PQ_XID_DURABLE] = {"rfs_xid_durable",
			    "SELECT pg_current_xact_id()::text, "
			    "set_config('synchronous_commit', 'on', true)",
			    0},
	/*
	 * The doorbell, payload $1 our origin: a transaction of its own
	 * after the data's commit, committed asynchronously whatever the
	 * session's setting (a notifying commit holds a cluster-wide lock
	 * through its WAL flush; the bell is only a hint).
	 */
	[PQ_BELL] = {"rfs_bell",
		     "SELECT pg_notify('" PG_CHANNEL "', $1), "
		     "set_config('synchronous_commit', 'off', true)",
		     1},
	/*
	 * Does another mount than $1 listen (pg.c, "Nobody listening")? A
	 * mount's row is renewed every second or so while it runs, and
	 * registered when its feed connection starts to LISTEN.
	 */
	[PQ_OTHERS] = {"rfs_others",
		       "SELECT EXISTS (SELECT 1 FROM regionfs.mounts WHERE "
		       "id <> $1 AND lease_until > clock_timestamp() - "
		       "interval '60 seconds')",
		       1},
	/*
	 * Registers mount $1 as listening, without a live lease (strict
	 * writers wait only for live ones): a lapsed lease_until moves to
	 * now, a live one stays.
	 */
	[PQ_HELLO] =
		{"rfs_hello",
		 "INSERT INTO regionfs.mounts AS m(id, host, pid, "
		 "lease_until) VALUES ($1, $2, $3::integer, "
		 "clock_timestamp()) ON CONFLICT (id) DO UPDATE SET "
		 "lease_until = greatest(m.lease_until, clock_timestamp())",
		 3},
	/* a pass's target snapshot, the log's head, the NOTIFY queue */
	[PQ_SNAP] = {"rfs_snap",
		     "SELECT pg_current_snapshot()::text, "
		     "coalesce((SELECT max(seq) FROM regionfs.changes), 0), "
		     "(pg_notification_queue_usage() * 1000000)::bigint",
		     0},
	/*
	 * The first page of a pass from snapshot $2 (xmin $1), with the
	 * pass's target S taken by this very statement (its snapshot): the
	 * log rows of transactions S sees and $2 did not, in seq order. One
	 * round trip. Columns (PQ_PAGE's too): S, whether rows were pruned
	 * that $2 may not have seen, then seq, region, key, ours (origin =
	 * $3), then the log's head and the NOTIFY queue's use. The LEFT JOIN
	 * gives a row when no log row qualifies (seq NULL).
	 *
	 * $4 (PQ_PAGE: $6) is PG_XID_MAX, no bound at all, so that the xid
	 * condition is a range of two parameters: the feed connection runs
	 * generic plans (pg.c, conn_setup()), planned once, and a generic
	 * plan estimates a range at 0.5% of the rows, so it scans the xid
	 * index; with "xid >= $1" alone it estimated a third and walked the
	 * whole log in seq order (6 ms on 50,000 rows, against 0.09 ms).
	 * Planning each replay instead (custom plans) cost 0.45 ms of server
	 * time per replay, on the invalidation's critical path.
	 */
	[PQ_FIRST] = {"rfs_first",
		      "SELECT s.snap::text, h.pruned_upto >= $1::xid8, c.seq, "
		      "c.region, c.key, c.origin IS NOT DISTINCT FROM $3, "
		      "coalesce((SELECT max(seq) FROM regionfs.changes), 0), "
		      "(pg_notification_queue_usage() * 1000000)::bigint "
		      "FROM (SELECT pg_current_snapshot() AS snap) s "
		      "CROSS JOIN regionfs.log_horizon h LEFT JOIN LATERAL ("
		      "SELECT seq, region, key, origin FROM regionfs.changes "
		      "WHERE xid >= $1::xid8 AND xid <= $4::xid8 "
		      "AND NOT pg_visible_in_snapshot(xid, $2::pg_snapshot) "
		      "AND pg_visible_in_snapshot(xid, s.snap) "
		      "ORDER BY seq LIMIT 1000) c ON true ORDER BY c.seq",
		      4},
	/*
	 * A further page of the pass from $2 (xmin $1) to $3 (fixed: the
	 * rows it sees are committed and stay), after seq $4; $5 our origin,
	 * $6 PG_XID_MAX (see PQ_FIRST).
	 */
	[PQ_PAGE] = {"rfs_page",
		     "SELECT $3::text, h.pruned_upto >= $1::xid8, c.seq, "
		     "c.region, c.key, c.origin IS NOT DISTINCT FROM $5, "
		     "0::bigint, (-1)::bigint "
		     "FROM regionfs.log_horizon h LEFT JOIN LATERAL ("
		     "SELECT seq, region, key, origin FROM regionfs.changes "
		     "WHERE xid >= $1::xid8 AND xid <= $6::xid8 AND seq > $4 "
		     "AND NOT pg_visible_in_snapshot(xid, $2::pg_snapshot) "
		     "AND pg_visible_in_snapshot(xid, $3::pg_snapshot) "
		     "ORDER BY seq LIMIT 1000) c ON true ORDER BY c.seq",
		     6},
	/*
	 * Takes or renews the lease of mount $1 for $2 ms, recording $3 (a
	 * snapshot; NULL keeps the last) as applied. Returns whether the
	 * lease was live before (NULL: no row), read before the change.
	 */
	[PQ_LEASE] =
		{"rfs_lease",
		 "WITH old AS (SELECT lease_until > clock_timestamp() AS "
		 "live FROM regionfs.mounts WHERE id = $1) "
		 "INSERT INTO regionfs.mounts AS m"
		 "(id, host, pid, lease_until, applied) VALUES ($1, $4, "
		 "$5::integer, clock_timestamp() + $2::bigint * "
		 "interval '1 millisecond', $3::pg_snapshot) "
		 "ON CONFLICT (id) DO UPDATE SET lease_until = "
		 "excluded.lease_until, applied = coalesce(excluded.applied, "
		 "m.applied), renewals = m.renewals + 1 "
		 "RETURNING (SELECT live FROM old)",
		 5},
	/* tells waiting writers that mount $1 acknowledged */
	[PQ_ACK_BELL] = {"rfs_ack_bell",
			 "SELECT pg_notify('" PG_ACK_CHANNEL "', $1)", 1},
};

#define PG_PAGE_ROWS 1000		    /* the LIMIT of PQ_PAGE */
#define PG_XID_MAX   "18446744073709551615" /* the largest xid8 */

#endif /* RFS_PG_SQL_H */
