/*
 * store.h - persistence for regionfs: the one interface fs/ and regions/
 * use, with two backends behind it (store_ops.h): an SQLite database file
 * (the default) and a PostgreSQL database, chosen by store_open() from
 * SOURCE. Everything below holds for both unless it names one.
 *
 * SQLite: one database file (WAL mode) holds every region's keys. Reads
 * run on a read connection of their own while they last; changes (put,
 * delete, rename) go through the only write connection, which commits
 * concurrent callers' changes in one transaction (group commit). Each change call returns only once its change is
 * committed.
 *
 * PostgreSQL (pg.c): the same calls over libpq. Reads on a small pool of
 * connections to the primary, changes through one writer thread and
 * connection with group commit; after each commit a doorbell (pg_notify,
 * in its own transaction) tells the other mounts to read the change log.
 *
 * The schema is a supported interface (see doc/schema.md): scripts and the
 * sqlite3 shell or psql may read and write the tables directly; triggers
 * record their changes in a change feed that store_changes() reads.
 *
 * Knows nothing of FUSE or of the cache. Thread-safe. Functions returning
 * int return 0 (or a documented count) or a negative errno: SQLite errors
 * are mapped once (FULL -> -ENOSPC, BUSY/LOCKED -> -EAGAIN after retries,
 * NOMEM -> -ENOMEM, READONLY -> -EROFS, else -EIO), PostgreSQL errors by
 * SQLSTATE the same way (doc/schema.md).
 *
 * Keys are byte strings of 1..STORE_MAX_KEY bytes (no '/' or NUL; fs/
 * checks), region names are NUL-terminated strings; values are any bytes.
 * Both round-trip exactly.
 */
#ifndef RFS_STORE_H
#define RFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_MAX_KEY 255

struct store; /* opaque */

/* What the store knows about a row besides its value. */
struct store_meta {
	uint64_t size;	  /* value length in bytes */
	int64_t mtime_ns; /* last change, CLOCK_REALTIME nanoseconds */
	uint64_t version; /* grows by one with every change of the row */
};

/*
 * Flags for the change calls. STORE_DURABLE: fsync-level, survives power
 * loss, not only a killed process.
 */
#define STORE_DURABLE 0x1u

/*
 * Kinds of store errors, counted apart (store_stats.errs). A missing key
 * (-ENOENT) is no error and is never counted.
 */
enum store_err_kind {
	STORE_ERR_CORRUPT,  /* SQLITE_CORRUPT, NOTADB: a damaged file */
	STORE_ERR_IO,	    /* SQLITE_IOERR, CANTOPEN, ...: the OS said no */
	STORE_ERR_FULL,	    /* SQLITE_FULL, ENOSPC, EDQUOT */
	STORE_ERR_BUSY,	    /* BUSY/LOCKED after the busy timeout */
	STORE_ERR_READONLY, /* SQLITE_READONLY, EROFS */
	STORE_ERR_NOMEM,    /* SQLITE_NOMEM */
	STORE_ERR_LOST,	    /* refused: the database file was deleted or
			     * replaced under the store (store_file_lost) */
	STORE_ERR_OTHER,    /* anything else (CONSTRAINT, TOOBIG, ...) */
	STORE_ERR_NKINDS
};

/*
 * Called on every store error (not -ENOENT) on the thread that met it,
 * with no store lock held: err is the -errno returned, what the call
 * ("load", "put", "list", ...), region and key what it was about (NULL /
 * 0 when none), msg SQLite's message (or the store's own). Must not call
 * back into the store.
 */
typedef void (*store_error_fn)(void *ctx, int err, enum store_err_kind kind,
			       const char *what, const char *region,
			       const void *key, size_t klen, const char *msg);

struct store_options {
	unsigned busy_timeout_ms; /* wait for outside writers; 0 = 5000 */
	bool durable;		  /* every commit durable (synchronous=FULL) */
	bool read_only;		  /* open read-only: no schema change, every
				   * change call fails with -EROFS */
	store_error_fn on_error;  /* NULL: errors are only counted */
	void *error_ctx;
	/*
	 * Space kept in reserve next to the database (file PATH-reserve),
	 * so that with the disk full, deletes and renames can still commit
	 * and free space: when a batch holding them fails with ENOSPC, the
	 * reserve is released and they are retried once (puts are not: they
	 * fail with ENOSPC). Made again after a later commit succeeds. 0:
	 * STORE_DEFAULT_RESERVE; UINT64_MAX: none.
	 */
	uint64_t reserve_bytes;
	/*
	 * PostgreSQL: this mount's lease (store_hits_ok(),
	 * store_wait_applied()): how long one renewal holds it, and how
	 * often it is renewed. 0: STORE_DEFAULT_LEASE_MS and
	 * STORE_DEFAULT_RENEW_MS. The caller keeps lease_ms >= 2 *
	 * renew_ms + 500 (renewals ride on the feed's passes, which come at
	 * least every 250 ms). Ignored by SQLite.
	 */
	unsigned lease_ms, renew_ms;
};

#define STORE_DEFAULT_LEASE_MS 5000
#define STORE_DEFAULT_RENEW_MS 1000

#define STORE_DEFAULT_RESERVE (1u << 20)

/* The backends; store_source_backend() tells which one a SOURCE names. */
enum store_backend {
	STORE_BACKEND_SQLITE,	  /* anything else: a database file path */
	STORE_BACKEND_POSTGRESQL, /* postgresql:// or postgres:// URI, or a
				   * libpq keyword/value string starting
				   * with a libpq keyword and '='
				   * ("host=/run/pg dbname=rfs") */
};
enum store_backend store_source_backend(const char *source);
/*
 * SOURCE as it may be shown (logs, fsname in /proc/mounts): a password in
 * it replaced by ***. malloc()ed; NULL on ENOMEM.
 */
char *store_source_display(const char *source);

/*
 * Opens the store SOURCE names (store_source_backend()). PostgreSQL: see
 * pg.c and doc/schema.md (schema created or upgraded, -EPROTO for a newer
 * one; a server that cannot be reached or refuses the login: -EIO, with
 * libpq's message passed to the error callback; -EPROTONOSUPPORT in a
 * build without libpq). SQLite, the rest of this comment:
 *
 * Opens (creating it with mode 0600 if missing) the database at path,
 * creates or upgrades the schema (PRAGMA user_version) and starts the
 * writer thread. opts may be NULL for defaults. "." paths and ":memory:"
 * are not supported (readers need their own connections to one file).
 * A database SQLite can only open read-only (file mode, read-only
 * filesystem) is refused with -EROFS unless opts->read_only; with it the
 * file must exist and hold the current schema (-EPROTO otherwise). A file
 * not owned by the effective user, or writable by group or others, is
 * refused with -EPERM (someone else could have planted or could rewrite
 * it); one that is no regular file with -EINVAL (-EISDIR).
 */
int store_open(const char *source, const struct store_options *opts,
	       struct store **out);
/* "sqlite" or "postgresql". */
const char *store_backend_name(struct store *st);
/*
 * Commits what is pending, stops the writer thread and closes every
 * connection. The caller must have stopped all other calls. Accepts NULL.
 */
void store_close(struct store *st);

/*
 * Reads a row on a read connection (sqlite.c). On success *data holds a
 * malloc()ed copy of the value (NULL when the value is empty) that the
 * caller frees, and *meta (if not NULL) its metadata. -ENOENT if absent.
 */
int store_load(struct store *st, const char *region, const void *key,
	       size_t klen, void **data, struct store_meta *meta);
/* Like store_load() without reading the value. -ENOENT if absent. */
int store_stat(struct store *st, const char *region, const void *key,
	       size_t klen, struct store_meta *meta);

/*
 * Replaces the value of (region, key), creating the row if needed, through
 * the writer thread; returns once committed. *meta (if not NULL) gets the
 * committed row's metadata.
 */
int store_put(struct store *st, const char *region, const void *key,
	      size_t klen, const void *data, size_t len, unsigned flags,
	      struct store_meta *meta);
/* Deletes (region, key). -ENOENT if it did not exist. */
int store_delete(struct store *st, const char *region, const void *key,
		 size_t klen, unsigned flags);
/*
 * Deletes (region, key) only if its row is still the empty value of the
 * given version (a create whose first real commit failed); -ENOENT if it
 * is absent or anything changed it since.
 */
int store_delete_version(struct store *st, const char *region, const void *key,
			 size_t klen, uint64_t version, unsigned flags);
/*
 * Renames from -> to within one region, replacing to atomically if it
 * exists. -ENOENT if from does not exist. Renaming a key onto itself is a
 * no-op that returns 0.
 */
int store_rename(struct store *st, const char *region, const void *from,
		 size_t flen, const void *to, size_t tlen, unsigned flags);
/* Makes every change committed so far durable (for fsync()). */
int store_sync(struct store *st);

/*
 * Lists a region's keys in byte order, starting after the key `after`
 * (NULL: from the first), at most max keys, without loading values. fn is
 * called for each key on the calling thread; a nonzero return stops the
 * listing early. Returns the number of keys passed to fn, or -errno. A
 * listing resumes by passing the last key seen as `after`.
 */
typedef int (*store_list_fn)(void *ctx, const void *key, size_t klen,
			     const struct store_meta *meta);
int store_list(struct store *st, const char *region, const void *after,
	       size_t alen, size_t max, store_list_fn fn, void *ctx);

/* Number of keys and total value bytes of a region. */
int store_region_usage(struct store *st, const char *region, uint64_t *nkeys,
		       uint64_t *bytes);

/*
 * The change feed. Every change of a row, by anyone (this store's writer,
 * the sqlite3 shell, another process or mount), is recorded by triggers
 * with a growing sequence number. store_changes() passes to fn each change
 * after *cursor that did NOT come from this store's own writer (those are
 * already handled by the write path), then advances *cursor. A cursor
 * starts at store_changes_head(). Cheap when nothing changed (SQLite
 * checks PRAGMA data_version first; PostgreSQL compares snapshots). If
 * the feed was pruned past *cursor (the daemon was too slow), fn is
 * called once with key NULL for every region ("invalidate everything"),
 * region NULL too.
 *
 * PostgreSQL: the cursor is a token for a snapshot-safe position the
 * store keeps (pg.c): a change that commits late with a lower sequence
 * number is still delivered. A token the store no longer holds (or
 * never gave) is treated like a pruned feed: fn(NULL) once, then the
 * cursor starts over from the present. Changes of a TRUNCATE are one
 * fn(NULL) call.
 */
typedef int (*store_change_fn)(void *ctx, const char *region, const void *key,
			       size_t klen);
int store_changes_head(struct store *st, uint64_t *cursor);
int store_changes(struct store *st, uint64_t *cursor, store_change_fn fn,
		  void *ctx);
/* Deletes feed rows older than max_age_ms. */
int store_changes_prune(struct store *st, uint64_t max_age_ms);
/*
 * A descriptor that polls readable when another writer may have committed
 * (PostgreSQL: the socket of the store's LISTEN connection, where the
 * doorbells arrive), for the thread that calls store_changes(). -ENOTSUP:
 * the backend has none (SQLite: watch the database file's directory);
 * another -errno: none right now (reconnecting: poll on a timer). May
 * change between calls (after a reconnect): ask before every wait.
 */
int store_changes_fd(struct store *st);
/*
 * After store_changes_fd() polled readable: consumes what arrived there.
 * Returns the number of doorbells read (0: none, only noise), or -errno.
 */
int store_changes_drain(struct store *st);

/*
 * Coherence across mounts (regions.ini coherence = strict).
 *
 * store_hits_ok(): may this mount's cache serve hits in a strict region
 * now? PostgreSQL: only while this mount holds a live lease (a row in
 * regionfs.mounts it renews on its feed connection, every renew_ms, for
 * lease_ms; counted from before the renewal was sent, a fifth of it
 * kept as margin) AND has completed a replay of the change log that
 * started after the lease was last taken anew. A lapsed lease (the mount
 * was frozen, cut off, or the server down) means writers elsewhere stopped
 * waiting for this mount, so what it caches may be stale: false until
 * then. Cheap (two atomic loads, a clock read). SQLite: always true.
 *
 * store_wait_applied(): waits until every OTHER mount whose lease is live
 * has applied (replayed and acknowledged) every change this store
 * committed before the call, or its lease ran out: a mount that neither
 * acknowledges nor renews is waited for at most until its lease_until,
 * which is at most lease_ms after its last renewal; a mount that renews
 * acknowledges with the renewal's replay. So the wait is at most
 * lease_ms + renew_ms + a pass (the cap; beyond it the wait ends and is
 * counted in acks_timed_out). If the mounts table cannot be read (the
 * server unreachable), it waits out that cap instead: every other mount's
 * lease has then lapsed or been renewed after a replay covering the
 * change. Returns 0 (the change is committed either way); the waits are
 * counted in store_stats. SQLite: returns 0 at once (one host: the other
 * mounts see the file's commits within milliseconds).
 */
bool store_hits_ok(struct store *st);

/*
 * Space for statfs(2), in bytes, when the store knows better than the file
 * system of SOURCE: PostgreSQL, whose disk is the server's: used is
 * pg_database_size() of the database, avail STORE_SPACE_UNKNOWN (a client
 * cannot see the server's free space; like object-store file systems, a
 * large number, so that tools checking free space do not refuse), total
 * their sum. -ENOTSUP: ask the file system of the database file
 * (SQLite).
 */
#define STORE_SPACE_UNKNOWN (1ull << 50) /* 1 PiB */
int store_space(struct store *st, uint64_t *total, uint64_t *avail);
int store_wait_applied(struct store *st);

/*
 * Every counter of struct store_stats, defined once: the struct, the
 * stats file lines and metrics.prom families (fs/virtual.c) and the check
 * against doc/stats.md (tests/integration/test_virtual.c) are generated
 * from this list, in its order.
 * X(type, field, unit, line, prom, help):
 *   type   STORE_COUNTER or STORE_GAUGE
 *   field  the field of struct store_stats (uint64_t)
 *   unit   STORE_UNIT_COUNT, or STORE_UNIT_NS (nanoseconds: the stats
 *          line shows microseconds, metrics.prom exact seconds)
 *   line   its line in the global stats file
 *   prom   its metrics.prom family
 *   help   the family's HELP text
 */
#define STORE_STATS(X)                                                         \
	X(STORE_COUNTER, commits, STORE_UNIT_COUNT, "store_commits",           \
	  "regionfs_store_commits_total", "Write transactions committed.")     \
	X(STORE_COUNTER, rows, STORE_UNIT_COUNT, "store_rows",                 \
	  "regionfs_store_rows_total", "Row changes committed.")               \
	X(STORE_GAUGE, max_batch, STORE_UNIT_COUNT, "store_max_batch",         \
	  "regionfs_store_batch_max_rows",                                     \
	  "Most row changes committed in one transaction.")                    \
	X(STORE_COUNTER, errors, STORE_UNIT_COUNT, "store_errors",             \
	  "regionfs_store_errors_total", "Row changes that failed.")           \
	X(STORE_COUNTER, busy_retries, STORE_UNIT_COUNT, "store_busy_retries", \
	  "regionfs_store_busy_retries_total",                                 \
	  "Retries after the database was busy.")                              \
	X(STORE_COUNTER, commit_ns, STORE_UNIT_NS, "store_commit_time_us",     \
	  "regionfs_store_commit_seconds_total", "Time spent in COMMIT.")      \
	X(STORE_COUNTER, checkpoints, STORE_UNIT_COUNT, "store_checkpoints",   \
	  "regionfs_store_checkpoints_total",                                  \
	  "WAL checkpoints run by the background checkpointer.")               \
	X(STORE_COUNTER, checkpoints_inline, STORE_UNIT_COUNT,                 \
	  "store_checkpoints_inline",                                          \
	  "regionfs_store_checkpoints_inline_total",                           \
	  "Checkpoints a commit ran itself: the WAL passed its hard limit.")   \
	X(STORE_COUNTER, checkpoint_failures, STORE_UNIT_COUNT,                \
	  "store_checkpoint_failures",                                         \
	  "regionfs_store_checkpoint_failures_total",                          \
	  "Checkpoints that failed or found the database busy.")               \
	X(STORE_COUNTER, checkpoint_ns, STORE_UNIT_NS,                         \
	  "store_checkpoint_time_us",                                          \
	  "regionfs_store_checkpoint_seconds_total",                           \
	  "Time the background checkpointer spent checkpointing.")             \
	X(STORE_GAUGE, wal_frames, STORE_UNIT_COUNT, "store_wal_frames",       \
	  "regionfs_store_wal_frames",                                         \
	  "Frames in the WAL after the last commit.")                          \
	X(STORE_GAUGE, wal_frames_max, STORE_UNIT_COUNT,                       \
	  "store_wal_frames_max", "regionfs_store_wal_frames_max",             \
	  "Most frames the WAL held after a commit since the store opened.")   \
	X(STORE_GAUGE, reserve_ok, STORE_UNIT_COUNT, "store_reserve_ok",       \
	  "regionfs_store_reserve_ok",                                         \
	  "1 while the disk-full reserve file is in place.")                   \
	X(STORE_COUNTER, reserve_used, STORE_UNIT_COUNT, "store_reserve_used", \
	  "regionfs_store_reserve_used_total",                                 \
	  "Times the reserve was released so deletes could free a full disk.") \
	X(STORE_GAUGE, file_lost, STORE_UNIT_COUNT, "store_file_lost",         \
	  "regionfs_store_file_lost",                                          \
	  "1 once the database file was deleted or replaced under the mount.") \
	X(STORE_GAUGE, read_only, STORE_UNIT_COUNT, "store_read_only",         \
	  "regionfs_store_read_only",                                          \
	  "1 if the database is served read-only (-o ro).")                    \
	X(STORE_COUNTER, doorbells_sent, STORE_UNIT_COUNT,                     \
	  "store_doorbells_sent", "regionfs_store_doorbells_sent_total",       \
	  "PostgreSQL: doorbells (pg_notify) rung after commits.")             \
	X(STORE_COUNTER, doorbells_failed, STORE_UNIT_COUNT,                   \
	  "store_doorbells_failed", "regionfs_store_doorbells_failed_total",   \
	  "PostgreSQL: doorbells that failed (the write still succeeded).")    \
	X(STORE_COUNTER, doorbells_coalesced, STORE_UNIT_COUNT,                \
	  "store_doorbells_coalesced",                                         \
	  "regionfs_store_doorbells_coalesced_total",                          \
	  "PostgreSQL: commits covered by a later commit's doorbell.")         \
	X(STORE_COUNTER, doorbells_unheard, STORE_UNIT_COUNT,                  \
	  "store_doorbells_unheard", "regionfs_store_doorbells_unheard_total", \
	  "PostgreSQL: commits not rung for: no other mount listened.")        \
	X(STORE_COUNTER, doorbells_received, STORE_UNIT_COUNT,                 \
	  "store_doorbells_received",                                          \
	  "regionfs_store_doorbells_received_total",                           \
	  "PostgreSQL: other writers' doorbells heard.")                       \
	X(STORE_COUNTER, feed_passes, STORE_UNIT_COUNT, "store_feed_passes",   \
	  "regionfs_store_feed_passes_total",                                  \
	  "PostgreSQL: replays of the change log.")                            \
	X(STORE_COUNTER, reconnects, STORE_UNIT_COUNT, "store_reconnects",     \
	  "regionfs_store_reconnects_total",                                   \
	  "PostgreSQL: connections opened again after one was lost.")          \
	X(STORE_GAUGE, notify_queue_ppm, STORE_UNIT_COUNT,                     \
	  "store_notify_queue_ppm", "regionfs_store_notify_queue_ppm",         \
	  "PostgreSQL: pg_notification_queue_usage() in millionths.")          \
	X(STORE_GAUGE, lease_live, STORE_UNIT_COUNT, "store_lease_live",       \
	  "regionfs_store_lease_live",                                         \
	  "PostgreSQL: 1 while this mount holds a live lease and has "         \
	  "replayed the change log since taking it (strict regions serve "     \
	  "hits).")                                                            \
	X(STORE_COUNTER, lease_renewals, STORE_UNIT_COUNT,                     \
	  "store_lease_renewals", "regionfs_store_lease_renewals_total",       \
	  "PostgreSQL: lease renewals (and acknowledgements) committed.")      \
	X(STORE_COUNTER, lease_lapses, STORE_UNIT_COUNT, "store_lease_lapses", \
	  "regionfs_store_lease_lapses_total",                                 \
	  "PostgreSQL: times this mount found its lease had run out.")         \
	X(STORE_COUNTER, acks_waited, STORE_UNIT_COUNT, "store_acks_waited",   \
	  "regionfs_store_acks_waited_total",                                  \
	  "PostgreSQL: strict changes that waited for other mounts' "          \
	  "acknowledgements.")                                                 \
	X(STORE_COUNTER, ack_wait_ns, STORE_UNIT_NS, "store_ack_wait_time_us", \
	  "regionfs_store_ack_wait_seconds_total",                             \
	  "PostgreSQL: time strict changes spent waiting for "                 \
	  "acknowledgements.")                                                 \
	X(STORE_GAUGE, ack_wait_max_ns, STORE_UNIT_NS,                         \
	  "store_ack_wait_max_us", "regionfs_store_ack_wait_max_seconds",      \
	  "PostgreSQL: the longest such wait.")                                \
	X(STORE_COUNTER, acks_timed_out, STORE_UNIT_COUNT,                     \
	  "store_acks_timed_out", "regionfs_store_acks_timed_out_total",       \
	  "PostgreSQL: waits ended by the bound, not by every "                \
	  "acknowledgement.")

enum store_stat_type {
	STORE_COUNTER,
	STORE_GAUGE,
};

enum store_stat_unit {
	STORE_UNIT_COUNT,
	STORE_UNIT_NS,
};

struct store_stats {
#define STORE_STATS_FIELD(type, field, ...) uint64_t field;
	STORE_STATS(STORE_STATS_FIELD)
#undef STORE_STATS_FIELD
	uint64_t errs[STORE_ERR_NKINDS]; /* every store error, by kind: the
					  * lines store_errors_KIND and the
					  * family regionfs_store_failures_total
					  * {kind="KIND"} (fs/virtual.c) */
};
void store_stats(struct store *st, struct store_stats *out);

/* Names of the kinds ("corrupt", "io", ...), for stats and logs. */
const char *store_err_kind_name(enum store_err_kind kind);

/*
 * SQLite only (always false for PostgreSQL):
 * true once the database file at the store's path is not the one the
 * store opened (deleted, or replaced by a rename or a copy: its device or
 * inode differs). From then on every call fails with -EIO (kind LOST) and
 * nothing more is written: the open connections still point at the old,
 * unlinked file, and writing there would be lost at the next start, or,
 * with the old -wal file applied to the new database, damage it. Sticky.
 * Costs one stat(); the writer checks before every transaction, and the
 * daemon's feed thread on every poll, so an idle mount notices too.
 */
bool store_file_lost(struct store *st);

/*
 * Opens now what the calling thread will read through (SQLite: one more
 * idle read connection, 2 fds and a page cache, which any thread's read
 * may take), instead of at a first read, so that a fixed pool of threads
 * holds all of its resources from its start (fs/loop.c). PostgreSQL: nothing (its connections are a pool of
 * their own). 0 or -errno; a failure is no harm: the first read tries
 * again.
 */
int store_thread_prepare(struct store *st);

#endif /* RFS_STORE_H */
