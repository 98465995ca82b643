/*
 * sqlite.c - SQLite persistence for regionfs (the default backend of
 * store.h, through dispatch.c's ops table): opening and the schema,
 * per-thread read connections, reads and listing, and the writer thread
 * with group commit. The change feed is in changes.c; store_int.h holds
 * what the two share (struct store and its lock map).
 *
 * One database file in WAL mode holds every region's keys in table kv; a
 * second table, changes, is a change feed filled by triggers on kv for
 * every writer. doc/schema.md documents both for scripts and the sqlite3
 * shell; this note explains how the store uses them.
 *
 * Connections. SQLite allows one writer at a time per database, and a
 * commit costs a WAL append (plus an fsync when durable) whatever its
 * size, so all changes go through ONE write connection, used by one
 * thread at a time. A caller of store_put/delete/rename/sync/prune puts an
 * op (on its own stack: its buffers stay valid because it blocks) on the
 * queue. If no batch is running and its op is alone in the queue, the
 * caller runs it itself (leader/follower): no hand-off to another thread
 * and back, which cost two context switches per commit, more than half of
 * the daemon's time in a create-heavy profile. Otherwise it sleeps on the
 * op's condition variable; once the running batch is done, the caller of
 * the first queued op is woken to lead the next one: it takes the whole
 * queue, runs it in one BEGIN IMMEDIATE ... COMMIT (group commit), then
 * wakes every other caller. (Waking the writer thread for it instead cost
 * one wake-up more per batch, as that caller had to be woken anyway; the
 * writer thread now only takes a queue that nobody leads, and exits at
 * close.) While a batch commits,
 * new callers queue up, so the batch grows with the load: with 8
 * writers, far fewer commits than puts (stress_store prints the
 * figures); a durable batch first waits briefly for the callers the
 * last one served, so that N writers in a loop share one fsync rather
 * than two (batch_gather_locked(); only the op that completes the
 * group wakes it, not each one). Reads never wait for the writer: they
 * go through read-only connections (WAL readers see the last committed
 * snapshot). A load, stat, listing or usage takes the pool's idle
 * connection used last, and gives it back after (rconn_take(): its page
 * cache holds the newest snapshot, while the others' caches are dropped
 * at their next read after a commit; every thread that reads lends the
 * pool one connection, so there are as many as with one per thread); the
 * change feed's calls use a connection of the calling thread's own,
 * found through a per-store pthread key whose destructor hands the
 * connection back to the idle ones when the thread exits. Every read
 * statement is reset right after use so that no read transaction stays
 * open to hold back WAL checkpoints; rows are copied out before any
 * callback runs.
 *
 * Per-op failures. Each op is one statement that changes the database
 * (rename reads first, then runs one UPDATE OR REPLACE), so a failing op is
 * rolled back by SQLite's statement journal and the others of the batch
 * still commit; no SAVEPOINT is needed. When SQLite instead aborts the
 * whole transaction (FULL, IOERR, NOMEM), or COMMIT fails, every op of the
 * batch gets the error and nothing of the batch is stored.
 *
 * Durability. A committed change (store_put returned 0) is in the WAL file
 * through write(): it survives a killed process, not a power loss
 * (synchronous=NORMAL). The write connection's VFS (walvfs.c) gathers a
 * commit's frames and writes them with one pwrite() before COMMIT
 * returns. A batch that holds a STORE_DURABLE op is committed
 * with synchronous=FULL, set outside the transaction (sync_mode()); the
 * write connection keeps the mode it was last set to until a batch wants
 * the other one, so a stream of durable batches runs no PRAGMA at all
 * (two sqlite3_exec() per batch before, each a parse, measured in the
 * durable create benchmark): the commit fsyncs the WAL, which makes every
 * earlier commit durable too,
 * as they live in the same file (checkpoints sync the database file
 * themselves; they run on checkpoint.c's thread, not in COMMIT). store_sync() queues a barrier: if no commit since the last
 * fsync was made with NORMAL, it returns at once, else it fsyncs the WAL
 * through SQLite's own file handle (SQLITE_FCNTL_JOURNAL_POINTER; we never
 * open the database files ourselves, since closing a second descriptor
 * would drop SQLite's POSIX locks).
 *
 * Own changes in the feed. The triggers record our writer's changes too,
 * which the daemon must not take for outside ones. Inside each batch
 * transaction the writer reads the feed's head (max(seq)) before
 * its first statement and after its last; SQLite admits one writer at a
 * time, so every sequence number in between is ours. It records that
 * range (changes.c) after COMMIT succeeds, holding ranges_lock across COMMIT
 * and the recording, so a poller that has read a committed row of ours
 * always finds its range; a rolled-back batch records nothing. changes.c's
 * note explains the ranges and how store_changes() reads the feed.
 *
 * Locking (the map is at struct store, store_int.h): lock guards the op
 * queue and the published stats, and each caller sleeps on its op's cond
 * with it; pool_lock guards the read connection lists and counts;
 * ranges_lock (own feed ranges) is taken here only by the writer around COMMIT. No function
 * holds two of them, none is held across a callback, and only ranges_lock
 * is held across SQLite work (one COMMIT).
 *
 * Statements (store_sql.h) are prepared once per connection and cached;
 * names and keys are only ever bound. Keys are bound as TEXT with an
 * explicit length, so any byte string round-trips and shell users can
 * write WHERE key='red'; TEXT compares with memcmp, so listings come in
 * byte order.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store_int.h"
#include "store_sql.h"

#define DEFAULT_BUSY_MS 5000	 /* store_options.busy_timeout_ms == 0 */
#define WRITER_CACHE_KB 16384	 /* page cache of the write connection */
#define READER_CACHE_KB 2048	 /* page cache of each read connection */
#define WAL_LIMIT_BYTES 67108864 /* WAL truncated to this after checkpoint */
#define GATHER_MAX_NS	3000000	 /* a durable batch waits for peers at most */
#define GATHER_MAX_OPS	64	 /* nor for more ops than this */

enum op_kind { OP_PUT, OP_DELETE, OP_RENAME, OP_SYNC, OP_PRUNE };

/*
 * A queued change. Lives on the caller's stack; every pointer is the
 * caller's and stays valid until done is set.
 */
struct op {
	enum op_kind kind;
	unsigned flags; /* STORE_DURABLE */
	const char *region;
	const void *key; /* rename: source */
	size_t klen;
	const void *key2; /* rename: target */
	size_t klen2;
	const void *data; /* put */
	size_t len;
	int64_t cutoff_ms;	/* prune: drop feed rows older than this */
	uint64_t if_version;	/* delete: only this empty version; 0 any */
	struct store_meta meta; /* out (put) */
	int rc;			/* out */
	bool done;		/* L: store.lock */
	bool lead;		/* L: store.lock; run the queue (handed_off) */
	pthread_cond_t cond;	/* signalled (under store.lock) when done or
				 * when lead is set */
	struct op *next;	/* L: store.lock while queued */
};

/* ---- errors and small helpers ---------------------------------------- */

int store_errno(int rc)
{
	if (rc == SQLITE_IOERR_NOMEM)
		return -ENOMEM;
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EAGAIN;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
		return -EPERM;
	case SQLITE_AUTH:
	case SQLITE_CANTOPEN:
		return -EACCES;
	case SQLITE_TOOBIG:
	case SQLITE_NOLFS:
		return -EFBIG;
	case SQLITE_NOTADB: /* only seen when the file is opened */
		return -EINVAL;
	case SQLITE_INTERRUPT:
		return -EINTR;
	default: /* CORRUPT, IOERR, CONSTRAINT, SCHEMA, MISUSE, ... */
		return -EIO;
	}
}

/* store_errno(), refined by the OS error where SQLite keeps one. */
int store__sqlerr(sqlite3 *db, int rc)
{
	int e = db ? sqlite3_system_errno(db) : 0;

	if ((rc & 0xff) == SQLITE_CANTOPEN && e > 0)
		return -e;
	if ((rc & 0xff) == SQLITE_IOERR && rc != SQLITE_IOERR_NOMEM &&
	    (e == ENOSPC || e == EDQUOT || e == EROFS))
		return e == EROFS ? -EROFS : -ENOSPC;
	return store_errno(rc);
}

/* The kind of a failure: SQLite's code, refined by the errno it gave. */
static enum store_err_kind err_kind(int rc, int err)
{
	if (err == -ENOSPC || err == -EDQUOT)
		return STORE_ERR_FULL;
	if (err == -EROFS)
		return STORE_ERR_READONLY;
	if (err == -ENOMEM)
		return STORE_ERR_NOMEM;
	switch (rc & 0xff) {
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return STORE_ERR_CORRUPT;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return STORE_ERR_BUSY;
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
		return STORE_ERR_IO;
	default:
		return STORE_ERR_OTHER;
	}
}

static void report(struct store *st, int err, enum store_err_kind kind,
		   const char *what, const char *region, const void *key,
		   size_t klen, const char *msg)
{
	atomic_fetch_add_explicit(&st->errs[kind], 1, memory_order_relaxed);
	if (st->on_error)
		st->on_error(st->error_ctx, err, kind, what, region, key, klen,
			     msg);
}

int store__fail(struct store *st, sqlite3 *db, int rc, const char *what,
		const char *region, const void *key, size_t klen)
{
	int err = store__sqlerr(db, rc);

	if (err == 0 || err == -ENOENT)
		return err;
	report(st, err, err_kind(rc, err), what, region, key, klen,
	       db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	return err;
}

int store__lost(struct store *st)
{
	if (!atomic_load_explicit(&st->lost, memory_order_acquire))
		return 0;
	atomic_fetch_add_explicit(&st->errs[STORE_ERR_LOST], 1,
				  memory_order_relaxed);
	return -EIO;
}

static const char *const side_suffix[2] = {"-wal", "-shm"};

/*
 * The -wal and -shm files at the path belong to the file we opened, not
 * to whatever is at the path now; SQLite names them by path, so the next
 * opener of the new file would apply our WAL to it (and SQLite does not
 * checkpoint or delete a WAL at close once its database has moved). So
 * they go, if they are still the ones we saw at open. Our connections
 * keep their descriptors; nothing is written through them any more.
 */
static void drop_side_files(struct store *st)
{
	char p[PATH_MAX];
	struct stat sb;
	int i;

	for (i = 0; i < 2; i++) {
		if (snprintf(p, sizeof(p), "%s%s", st->path, side_suffix[i]) >=
		    (int)sizeof(p))
			continue;
		if (stat(p, &sb) == 0 && sb.st_dev == st->side_dev[i] &&
		    sb.st_ino == st->side_ino[i] && st->side_ino[i])
			unlink(p);
	}
}

bool store__sq_file_lost(struct store *st)
{
	struct stat sb;

	if (atomic_load_explicit(&st->lost, memory_order_acquire))
		return true;
	if (stat(st->path, &sb) == 0) {
		if (sb.st_dev == st->dev && sb.st_ino == st->ino)
			return false;
	} else if (errno != ENOENT && errno != ENOTDIR) {
		return false; /* cannot tell (EACCES, EIO): not proof */
	}
	if (!atomic_exchange_explicit(&st->lost, true, memory_order_acq_rel) &&
	    !st->read_only)
		drop_side_files(st);
	return true;
}

static int64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t store__now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

int64_t store__wall_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

/*
 * The clock and the timed wait of the durable batch gather
 * (batch_gather_locked(), and the durable batch time it learns from):
 * the real ones, or in test builds the test's (store_test_set_gather()),
 * so that a test asserts the gather's bounds and what it learns exactly,
 * whatever the machine's speed.
 */
#ifdef RFS_TEST_HOOKS
static _Atomic(const struct store_test_gather *) test_gather;

void store_test_set_gather(const struct store_test_gather *hooks)
{
	atomic_store(&test_gather, hooks);
}

static int64_t gather_now(void)
{
	const struct store_test_gather *h = atomic_load(&test_gather);

	return h ? h->now_ns(h->arg) : store__now_ns();
}

static int gather_wait(struct store *st, const struct timespec *ts,
		       int64_t deadline)
{
	const struct store_test_gather *h = atomic_load(&test_gather);

	if (h)
		return h->wait(h->arg, st, deadline);
	return pthread_cond_timedwait(&st->gather, &st->lock, ts);
}
#else
static inline int64_t gather_now(void)
{
	return store__now_ns();
}

static inline int gather_wait(struct store *st, const struct timespec *ts,
			      int64_t deadline)
{
	(void)deadline;
	return pthread_cond_timedwait(&st->gather, &st->lock, ts);
}
#endif

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {ns / 1000000000, ns % 1000000000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* fs/ checks keys too; the store refuses what it could not round-trip. */
static int check_key(const void *key, size_t klen)
{
	if (!key || klen == 0)
		return -EINVAL;
	if (klen > STORE_MAX_KEY)
		return -ENAMETOOLONG;
	if (memchr(key, '\0', klen) || memchr(key, '/', klen))
		return -EINVAL;
	return 0;
}

static int check_args(const char *region, const void *key, size_t klen)
{
	return region ? check_key(key, klen) : -EINVAL;
}

static int bind_rk(sqlite3_stmt *s, const char *region, const void *key,
		   size_t klen)
{
	int rc = sqlite3_bind_text(s, 1, region, -1, SQLITE_STATIC);

	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(s, 2, key, (int)klen, SQLITE_STATIC);
	return rc;
}

uint64_t store__col_u64(sqlite3_stmt *s, int col)
{
	sqlite3_int64 v = sqlite3_column_int64(s, col);

	return v > 0 ? (uint64_t)v : 0;
}

/* Columns col.. are size, mtime_ns, version (NULL reads as 0). */
static void col_meta(sqlite3_stmt *s, int col, struct store_meta *meta)
{
	meta->size = store__col_u64(s, col);
	meta->mtime_ns = sqlite3_column_int64(s, col + 1);
	meta->version = store__col_u64(s, col + 2);
}

static int prepare_all(sqlite3 *db, const char *const *sql, int n,
		       sqlite3_stmt **out)
{
	int i, rc;

	for (i = 0; i < n; i++) {
		rc = sqlite3_prepare_v3(db, sql[i], -1,
					SQLITE_PREPARE_PERSISTENT, &out[i],
					NULL);
		if (rc != SQLITE_OK)
			return store__sqlerr(db, rc);
	}
	return 0;
}

static void finalize_all(sqlite3_stmt **stmt, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		sqlite3_finalize(stmt[i]);
		stmt[i] = NULL;
	}
}

/* Runs constant SQL (pragmas, DDL) that binds nothing. */
static int exec_sql(sqlite3 *db, const char *sql)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : store__sqlerr(db, rc);
}

/* Steps a statement that yields one integer row, then resets it. */
int store__step_int(sqlite3 *db, sqlite3_stmt *s, int64_t *v)
{
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	if (rc == SQLITE_ROW)
		return 0;
	return rc == SQLITE_DONE ? -ENOENT : store__sqlerr(db, rc);
}

/* ---- opening ----------------------------------------------------------- */

/* fsync()s the directory holding path, so a new file's name is durable. */
static void sync_parent_dir(const char *path)
{
	char *copy = strdup(path);
	int fd;

	if (!copy)
		return; /* best effort: the file itself was created fine */
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

/*
 * Creates the database file with mode 0600 if it does not exist, so that
 * the umask never widens it (SQLite gives -wal and -shm the same mode).
 */
static int create_file(const char *path)
{
	int fd, rc = 0;

	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	if (fchmod(fd, 0600))
		rc = -errno;
	close(fd);
	if (rc == 0)
		sync_parent_dir(path);
	return rc;
}

/*
 * A database someone else could have planted or can rewrite is refused
 * (-EPERM): it must be a regular file owned by the user running us, not
 * writable by group or others (SQLite gives -wal and -shm its mode, so a
 * 0666 file would make them world-writable too). A file readable by
 * others is the operator's choice and allowed.
 */
static int check_owner(const char *path)
{
	struct stat sb;

	if (stat(path, &sb))
		return -errno;
	if (!S_ISREG(sb.st_mode))
		return S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL;
	if (sb.st_uid != geteuid() || (sb.st_mode & 022))
		return -EPERM;
	return 0;
}

/*
 * Runs constant SQL that yields one row and compares its first column:
 * with text (as text) if text is not NULL, else *v gets it as an integer.
 * Returns 0 (equal or read), 1 (text differs) or -errno.
 */
static int query_one(sqlite3 *db, const char *sql, const char *text, int64_t *v)
{
	const char *got;
	sqlite3_stmt *s;
	int rc;

	rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return store__sqlerr(db, rc);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && text) {
		got = (const char *)sqlite3_column_text(s, 0);
		rc = got && !strcmp(got, text) ? 0 : 1;
	} else if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int64(s, 0);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? -EIO : store__sqlerr(db, rc);
	}
	sqlite3_finalize(s);
	return rc;
}

/*
 * Creates or upgrades the schema in one transaction. -EPROTO for a newer
 * version than we know, a user_version 0 database that already holds
 * tables (not ours), or one not in UTF-8 (keys would be converted).
 */
static int schema_upgrade(sqlite3 *db)
{
	int64_t v, nobjects;
	char sql[64];
	int rc;

	rc = exec_sql(db, "BEGIN IMMEDIATE");
	if (rc == 0)
		rc = query_one(db, "PRAGMA user_version", NULL, &v);
	if (rc == 0)
		rc = query_one(db, "SELECT count(*) FROM sqlite_schema", NULL,
			       &nobjects);
	if (rc == 0 && (v > SCHEMA_VERSION || (v == 0 && nobjects)))
		rc = -EPROTO;
	if (rc == 0 && v > 0 && query_one(db, "PRAGMA encoding", "UTF-8", NULL))
		rc = -EPROTO;
	for (; rc == 0 && v < SCHEMA_VERSION; v++) {
		rc = exec_sql(db, schema_steps[v]);
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d",
			 (int)v + 1);
		if (rc == 0)
			rc = exec_sql(db, sql);
	}
	if (rc == 0)
		rc = exec_sql(db, "COMMIT");
	if (rc && !sqlite3_get_autocommit(db))
		exec_sql(db, "ROLLBACK");
	return rc;
}

/* Sets the write connection's pragmas; WAL must really be on. */
static int writer_pragmas(struct store *st)
{
	char sql[256];
	int rc;

	rc = query_one(st->wdb, "PRAGMA journal_mode = WAL", "wal", NULL);
	if (rc)
		return rc < 0 ? rc : -ENOTSUP; /* e.g. no shared memory */
	/* secure_delete=FAST: Debian's default (ON) rewrites freed pages */
	snprintf(sql, sizeof(sql),
		 "PRAGMA synchronous = %s; PRAGMA foreign_keys = OFF; "
		 "PRAGMA cache_size = -%d; PRAGMA journal_size_limit = %d; "
		 "PRAGMA secure_delete = FAST",
		 st->durable ? "FULL" : "NORMAL", WRITER_CACHE_KB,
		 WAL_LIMIT_BYTES);
	st->sync_full = st->durable;
	return exec_sql(st->wdb, sql);
}

/*
 * A read-only store changes nothing: the file must already be a WAL
 * database at our schema version.
 */
static int check_read_only(struct store *st)
{
	int64_t v;
	int rc;

	rc = query_one(st->wdb, "PRAGMA journal_mode", "wal", NULL);
	if (rc)
		return rc < 0 ? rc : -EPROTO;
	rc = query_one(st->wdb, "PRAGMA user_version", NULL, &v);
	if (rc == 0 && v != SCHEMA_VERSION)
		rc = -EPROTO;
	return rc;
}

static int writer_open(struct store *st)
{
	int rc;

	rc = sqlite3_open_v2(
		st->path, &st->wdb,
		(st->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
			SQLITE_OPEN_NOMUTEX,
		st->read_only ? NULL : store__walvfs_name());
	if (rc != SQLITE_OK)
		return store__sqlerr(st->wdb, rc);
	sqlite3_extended_result_codes(st->wdb, 1);
	sqlite3_busy_handler(st->wdb, store__writer_busy, st);
	/* SQLite falls back to read-only when it may not write the file */
	if (!st->read_only && sqlite3_db_readonly(st->wdb, "main") == 1)
		return -EROFS;
	if (st->read_only)
		return check_read_only(st);
	rc = writer_pragmas(st);
	if (rc == 0)
		rc = schema_upgrade(st->wdb);
	if (rc == 0)
		rc = prepare_all(st->wdb, write_sql, W_NSTMT, st->w);
	return rc;
}

/*
 * Remembers which file the store opened (device and inode), for
 * store_file_lost(); SQLite must agree that it is the one at the path.
 */
static int remember_file(struct store *st)
{
	struct stat sb;
	int moved = 0;

	char p[PATH_MAX];
	int i;

	if (stat(st->path, &sb))
		return -errno;
	st->dev = sb.st_dev;
	st->ino = sb.st_ino;
	for (i = 0; i < 2; i++) { /* they exist: the writer has read */
		if (snprintf(p, sizeof(p), "%s%s", st->path, side_suffix[i]) <
			    (int)sizeof(p) &&
		    stat(p, &sb) == 0) {
			st->side_dev[i] = sb.st_dev;
			st->side_ino[i] = sb.st_ino;
		}
	}
	if (sqlite3_file_control(st->wdb, "main", SQLITE_FCNTL_HAS_MOVED,
				 &moved) == SQLITE_OK &&
	    moved)
		return -ESTALE; /* replaced while we opened it */
	return 0;
}

/* ---- read connections ------------------------------------------------- */

static void rconn_close(struct rconn *rc)
{
	finalize_all(rc->stmt, R_NSTMT);
	sqlite3_close_v2(rc->db);
	free(rc);
}

/* pthread key destructor: the exiting thread's connection goes idle. */
static void rconn_release(void *arg)
{
	struct rconn *rc = arg;
	struct store *st = rc->st;

	pthread_mutex_lock(&st->pool_lock);
	rc->next_free = st->idle;
	st->idle = rc;
	pthread_mutex_unlock(&st->pool_lock);
}

static int rconn_open(struct store *st, struct rconn **out)
{
	char sql[64];
	struct rconn *rc;
	int err;

	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	rc->st = st;
	err = sqlite3_open_v2(st->path, &rc->db,
			      SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	if (err != SQLITE_OK) {
		err = store__sqlerr(rc->db, err);
		rconn_close(rc);
		return err;
	}
	if (store__sq_file_lost(st)) { /* it may have opened the new file */
		rconn_close(rc);
		return store__lost(st);
	}
	sqlite3_extended_result_codes(rc->db, 1);
	sqlite3_busy_timeout(rc->db, (int)st->busy_timeout_ms);
	snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%d", READER_CACHE_KB);
	err = exec_sql(rc->db, sql);
	if (err) {
		rconn_close(rc);
		return err;
	}
	pthread_mutex_lock(&st->pool_lock);
	rc->next_all = st->conns;
	st->conns = rc;
	pthread_mutex_unlock(&st->pool_lock);
	*out = rc;
	return 0;
}

/* The calling thread's own read connection (changes.c), opened or taken
 * from those of exited threads. */
static int rconn_get(struct store *st, struct rconn **out)
{
	struct rconn *rc = pthread_getspecific(st->tls);
	int err;

	if (rc) {
		*out = rc;
		return 0;
	}
	pthread_mutex_lock(&st->pool_lock);
	rc = st->idle;
	if (rc)
		st->idle = rc->next_free;
	pthread_mutex_unlock(&st->pool_lock);
	if (!rc) {
		err = rconn_open(st, &rc);
		if (err)
			return err;
	}
	rc->dv_valid = false;
	if (pthread_setspecific(st->tls, rc)) {
		rconn_release(rc);
		return -ENOMEM;
	}
	*out = rc;
	return 0;
}

/* pthread key destructor (lent): an exiting thread's lent connection
 * stays in the pool, as a spare for the next thread to lend. */
static void lender_exit(void *arg)
{
	struct store *st = arg;

	pthread_mutex_lock(&st->pool_lock);
	st->spare++;
	pthread_mutex_unlock(&st->pool_lock);
}

/*
 * The calling thread lends the pool one connection, unless it has: a
 * spare one (see lender_exit()), or else a new one.
 */
static int rconn_lend(struct store *st)
{
	struct rconn *rc;
	bool spare;
	int err;

	if (pthread_getspecific(st->lent))
		return 0;
	pthread_mutex_lock(&st->pool_lock);
	spare = st->spare > 0;
	st->spare -= spare;
	pthread_mutex_unlock(&st->pool_lock);
	if (!spare) {
		err = rconn_open(st, &rc);
		if (err)
			return err;
		pthread_mutex_lock(&st->pool_lock);
		rc->next_free = st->warm;
		st->warm = rc;
		pthread_mutex_unlock(&st->pool_lock);
	}
	if (pthread_setspecific(st->lent, st)) {
		lender_exit(st); /* lent all the same: a spare */
		return -ENOMEM;
	}
	return 0;
}

/*
 * An idle pooled connection for one short read (load, stat, list,
 * usage): the one given back last; rconn_give() returns it. Why not a
 * connection of the thread's own: after each commit SQLite drops a
 * connection's whole page cache at its next read, and the daemon's
 * requests hop between worker threads, so every worker's connection read
 * the database header and the index pages again after every commit (a
 * rewrite and its read-back on one thread: 14.9 pread()s each, 8.2 now).
 * The connection used last has read the newest snapshot: only the first
 * read after a commit reads those pages again. Each thread that reads
 * lends the pool one connection first (rconn_lend()), so there are as
 * many as there were with one per thread, and one is always idle: at
 * most the other lenders are reading.
 */
static int rconn_take(struct store *st, struct rconn **out)
{
	struct rconn *rc;
	int err = rconn_lend(st);

	if (err && err != -ENOMEM)
		return err;
	pthread_mutex_lock(&st->pool_lock);
	rc = st->warm;
	if (rc)
		st->warm = rc->next_free;
	pthread_mutex_unlock(&st->pool_lock);
	if (!rc) { /* only after a failed pthread_setspecific() */
		err = rconn_open(st, &rc);
		if (err)
			return err;
	}
	*out = rc;
	return 0;
}

/* A connection of rconn_take() goes idle again, first in line. */
static void rconn_give(struct store *st, struct rconn *rc)
{
	if (!rc)
		return;
	pthread_mutex_lock(&st->pool_lock);
	rc->next_free = st->warm;
	st->warm = rc;
	pthread_mutex_unlock(&st->pool_lock);
}

/*
 * store_thread_prepare(): the calling thread lends its connection to the
 * pool now (the session loop calls it in each worker before its first
 * request).
 */
static int sq_thread_prepare(struct store *st)
{
	return rconn_lend(st);
}

/* Statement idx of connection rc, prepared on first use. */
static int rconn_stmt(struct rconn *rc, int idx, sqlite3_stmt **out)
{
	int err;

	assert(idx >= 0 && idx < R_NSTMT);
	if (!rc->stmt[idx]) {
		err = sqlite3_prepare_v3(rc->db, read_sql[idx], -1,
					 SQLITE_PREPARE_PERSISTENT,
					 &rc->stmt[idx], NULL);
		if (err != SQLITE_OK)
			return store__sqlerr(rc->db, err);
	}
	*out = rc->stmt[idx];
	return 0;
}

/*
 * Statement idx of an idle connection (rconn_take()); *rcp gets it, to
 * be given back with rconn_give() (also when this fails: *rcp NULL).
 */
static int pooled_stmt(struct store *st, int idx, struct rconn **rcp,
		       sqlite3_stmt **out)
{
	int err = rconn_take(st, rcp);

	if (err) {
		*rcp = NULL;
		return err;
	}
	return rconn_stmt(*rcp, idx, out);
}

/* Statement idx of the calling thread's read connection. */
int store__rstmt(struct store *st, int idx, struct rconn **rcp,
		 sqlite3_stmt **out)
{
	struct rconn *rc;
	int err;

	assert(idx >= 0 && idx < R_NSTMT);
	err = rconn_get(st, &rc);
	if (err)
		return err;
	assert(rc->st == st); /* this thread's connection to this store */
	err = rconn_stmt(rc, idx, out);
	if (err)
		return err;
	*rcp = rc;
	return 0;
}

/* ---- reads ------------------------------------------------------------ */

/* Copies column 0 of the current row of s into a malloc()ed buffer. */
static int copy_value(sqlite3_stmt *s, void **data, uint64_t *len)
{
	const void *src = sqlite3_column_blob(s, 0); /* bytes of TEXT too */
	int n = sqlite3_column_bytes(s, 0);

	*len = n;
	if (n == 0)
		return 0; /* an empty value reads as NULL */
	if (!src) /* out of memory, or a damaged page (read_row reports) */
		return sqlite3_errcode(sqlite3_db_handle(s)) == SQLITE_NOMEM
			       ? -ENOMEM
			       : -EIO;
	*data = malloc(n);
	if (!*data)
		return -ENOMEM;
	memcpy(*data, src, n);
	return 0;
}

/*
 * Steps s, bound to (region, key), on rc; runs row(s, arg) on the row.
 * -ENOENT if there is none. Resets s before returning.
 */
static int read_row(struct rconn *rc, sqlite3_stmt *s, const char *what,
		    const char *region, const void *key, size_t klen,
		    int (*row)(sqlite3_stmt *s, void *arg), void *arg)
{
	int err = bind_rk(s, region, key, klen), code;

	if (err == SQLITE_OK)
		err = sqlite3_step(s);
	if (err == SQLITE_ROW) {
		err = row(s, arg);
		code = sqlite3_errcode(rc->db); /* reading a column failed? */
		if (err && code != SQLITE_OK && code != SQLITE_ROW)
			err = store__fail(rc->st, rc->db, code, what, region,
					  key, klen);
	} else {
		err = err == SQLITE_DONE ? -ENOENT
					 : store__fail(rc->st, rc->db, err,
						       what, region, key, klen);
	}
	sqlite3_reset(s);
	return err;
}

struct load_out {
	void **data;
	struct store_meta meta;
};

static int load_row(sqlite3_stmt *s, void *arg)
{
	struct load_out *o = arg;

	o->meta.mtime_ns = sqlite3_column_int64(s, 1);
	o->meta.version = store__col_u64(s, 2);
	return copy_value(s, o->data, &o->meta.size);
}

static int stat_row(sqlite3_stmt *s, void *arg)
{
	col_meta(s, 0, arg);
	return 0;
}

static int sq_load(struct store *st, const char *region, const void *key,
		   size_t klen, void **data, struct store_meta *meta)
{
	struct load_out o = {.data = data};
	struct rconn *rc = NULL;
	sqlite3_stmt *s;
	int err;

	*data = NULL;
	err = check_args(region, key, klen);
	if (err == 0)
		err = store__lost(st);
	if (err == 0)
		err = pooled_stmt(st, R_LOAD, &rc, &s);
	if (err == 0)
		err = read_row(rc, s, "load", region, key, klen, load_row, &o);
	rconn_give(st, rc);
	if (err == 0 && meta)
		*meta = o.meta;
	return err;
}

static int sq_stat(struct store *st, const char *region, const void *key,
		   size_t klen, struct store_meta *meta)
{
	struct store_meta m;
	struct rconn *rc = NULL;
	sqlite3_stmt *s;
	int err;

	err = check_args(region, key, klen);
	if (err == 0)
		err = store__lost(st);
	if (err == 0)
		err = pooled_stmt(st, R_STAT, &rc, &s);
	if (err == 0)
		err = read_row(rc, s, "stat", region, key, klen, stat_row, &m);
	rconn_give(st, rc);
	if (err == 0 && meta)
		*meta = m;
	return err;
}

/*
 * Reads up to want keys after (from, flen) into items. SQL skips keys
 * that are no valid file name (an outside writer's), so each fits.
 */
static int sq_list_page(struct store *st, const char *region, const void *from,
			size_t flen, size_t want, struct store_list_item *items,
			size_t *n)
{
	struct rconn *rc;
	sqlite3_stmt *s;
	int err;

	*n = 0;
	err = store__lost(st);
	if (err)
		return err;
	err = pooled_stmt(st, R_LIST, &rc, &s);
	if (err) {
		rconn_give(st, rc);
		return err;
	}
	err = bind_rk(s, region, flen ? from : "", flen);
	if (err == SQLITE_OK)
		err = sqlite3_bind_int64(s, 3, (sqlite3_int64)want);
	while (err == SQLITE_OK && (err = sqlite3_step(s)) == SQLITE_ROW) {
		items[*n].klen = sqlite3_column_bytes(s, 0);
		if (items[*n].klen > STORE_MAX_KEY) { /* SQL_KEY_IS_NAME */
			err = SQLITE_INTERNAL;
			break;
		}
		memcpy(items[*n].key, sqlite3_column_blob(s, 0),
		       items[*n].klen);
		col_meta(s, 1, &items[*n].meta);
		(*n)++;
		err = SQLITE_OK;
	}
	sqlite3_reset(s);
	err = err == SQLITE_DONE ? 0
				 : store__fail(st, rc->db, err, "list", region,
					       flen ? from : NULL, flen);
	rconn_give(st, rc);
	return err;
}

static int sq_region_usage(struct store *st, const char *region,
			   uint64_t *nkeys, uint64_t *bytes)
{
	struct rconn *rc;
	sqlite3_stmt *s;
	int err;

	if (!region)
		return -EINVAL;
	err = store__lost(st);
	if (err)
		return err;
	err = pooled_stmt(st, R_USAGE, &rc, &s);
	if (err) {
		rconn_give(st, rc);
		return err;
	}
	err = sqlite3_bind_text(s, 1, region, -1, SQLITE_STATIC);
	if (err == SQLITE_OK)
		err = sqlite3_step(s);
	if (err == SQLITE_ROW) {
		*nkeys = store__col_u64(s, 0);
		*bytes = store__col_u64(s, 1);
	}
	sqlite3_reset(s);
	if (err == SQLITE_ROW)
		err = 0;
	else if (err == SQLITE_DONE)
		err = -EIO;
	else
		err = store__fail(st, rc->db, err, "usage", region, NULL, 0);
	rconn_give(st, rc);
	return err;
}

/* ---- the writer thread ---------------------------------------------------- */

/*
 * Busy handler of the write connection (the writer thread, or store_open
 * before it starts): waits with exponential backoff, 1 to 8 ms, until
 * busy_timeout_ms has passed since the wait began. SQLite's locks are not
 * fair; short naps keep our odds against an outside writer in a loop.
 */
int store__writer_busy(void *arg, int count)
{
	struct store *st = arg;
	int64_t now = store__now_ns(), left, nap;

	if (count == 0)
		st->busy_start = now;
	left = st->busy_start + (int64_t)st->busy_timeout_ms * 1000000 - now;
	if (left <= 0)
		return 0;
	nap = (int64_t)1000000 << (count < 3 ? count : 3);
	sleep_ns(nap < left ? nap : left);
	st->wstats.busy_retries++;
	return 1;
}

/*
 * Steps a parameterless writer statement (BEGIN, COMMIT), retrying
 * SQLITE_BUSY that bypassed the busy handler until the timeout. Returns
 * the SQLite code.
 */
static int wstep_retry(struct store *st, int idx)
{
	int64_t deadline =
		store__now_ns() + (int64_t)st->busy_timeout_ms * 1000000;
	int rc, tries = 0;

	for (;;) {
		rc = sqlite3_step(st->w[idx]);
		sqlite3_reset(st->w[idx]);
		if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
			return rc;
		if (store__now_ns() >= deadline)
			return rc;
		sleep_ns((int64_t)1000000 << (tries < 3 ? tries : 3));
		tries++;
		st->wstats.busy_retries++;
	}
}

static int wstep(struct store *st, int idx)
{
	int rc = sqlite3_step(st->w[idx]);

	sqlite3_reset(st->w[idx]);
	if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		return 0;
	return store__sqlerr(st->wdb, rc);
}

static int row_version(struct store *st, const char *region, const void *key,
		       size_t klen, int64_t *v);

/*
 * The upsert, then its row's new version read back (W_VERSION) in the same
 * transaction. A RETURNING clause on the upsert gave the version in one
 * statement but stored its row in an ephemeral table opened and closed on
 * every run (a pager and a b-tree each time): a median of 10.2 us per put
 * against 7.6 us for the upsert and the SELECT (1 KiB values, 5,000 keys
 * rewritten in one transaction, six rounds of a C loop against the
 * system's SQLite 3.40, loaded machine); malloc() calls of the daemon per
 * create 35.6 -> 27.7 (bench_fs -p create, counted with a uprobe).
 */
static int op_put(struct store *st, struct op *op)
{
	sqlite3_stmt *s = st->w[W_PUT];
	int64_t now = store__wall_ns(), v = 0;
	int rc;

	rc = bind_rk(s, op->region, op->key, op->klen);
	if (rc == SQLITE_OK)
		rc = op->len ? sqlite3_bind_blob64(s, 3, op->data, op->len,
						   SQLITE_STATIC)
			     : sqlite3_bind_zeroblob(s, 3, 0);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(s, 4, (sqlite3_int64)op->len);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(s, 5, now);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return store__sqlerr(st->wdb, rc);
	rc = row_version(st, op->region, op->key, op->klen, &v);
	if (rc)
		return rc == -ENOENT ? -EIO : rc; /* the row was just written */
	op->meta.version = (uint64_t)v;
	op->meta.size = op->len;
	op->meta.mtime_ns = now;
	return 0;
}

static int op_delete(struct store *st, struct op *op)
{
	sqlite3_stmt *s = st->w[op->if_version ? W_DELETE_VERSION : W_DELETE];
	int rc;

	rc = bind_rk(s, op->region, op->key, op->klen);
	if (rc == SQLITE_OK && op->if_version)
		rc = sqlite3_bind_int64(s, 3, (sqlite3_int64)op->if_version);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return store__sqlerr(st->wdb, rc);
	return sqlite3_changes(st->wdb) ? 0 : -ENOENT;
}

/* Version of (region, key) in the write transaction; -ENOENT if absent. */
static int row_version(struct store *st, const char *region, const void *key,
		       size_t klen, int64_t *v)
{
	sqlite3_stmt *s = st->w[W_VERSION];
	int rc = bind_rk(s, region, key, klen);

	if (rc != SQLITE_OK) {
		sqlite3_reset(s);
		return store__sqlerr(st->wdb, rc);
	}
	return store__step_int(st->wdb, s, v);
}

/*
 * Moves the source row (its value is not copied) onto the target name,
 * replacing the target row in the same statement. The new version is
 * above both old ones, so no reader ever sees one version number for two
 * contents of the target.
 */
static int op_rename(struct store *st, struct op *op)
{
	sqlite3_stmt *s = st->w[W_RENAME];
	int64_t sv, tv = 0;
	int rc;

	rc = row_version(st, op->region, op->key, op->klen, &sv);
	if (rc)
		return rc;
	if (op->klen == op->klen2 && !memcmp(op->key, op->key2, op->klen))
		return 0;
	rc = row_version(st, op->region, op->key2, op->klen2, &tv);
	if (rc && rc != -ENOENT)
		return rc;
	rc = bind_rk(s, op->region, op->key, op->klen);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(s, 3, op->key2, (int)op->klen2,
				       SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(s, 4, store__wall_ns());
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(s, 5, (sv > tv ? sv : tv) + 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? 0 : store__sqlerr(st->wdb, rc);
}

/* Deletes the oldest feed rows up to the first one not older than cutoff. */
static int op_prune(struct store *st, struct op *op)
{
	sqlite3_stmt *s = st->w[W_PRUNE_FIND];
	int64_t keep = INT64_MAX;
	int rc;

	rc = sqlite3_bind_int64(s, 1, op->cutoff_ms);
	if (rc != SQLITE_OK)
		return store__sqlerr(st->wdb, rc);
	rc = store__step_int(st->wdb, s, &keep); /* -ENOENT: every row is old */
	if (rc && rc != -ENOENT)
		return rc;
	s = st->w[W_PRUNE];
	rc = sqlite3_bind_int64(s, 1, keep);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? 0 : store__sqlerr(st->wdb, rc);
}

static int op_run(struct store *st, struct op *op)
{
	store__assert_writer(st);
	switch (op->kind) {
	case OP_PUT:
		return op_put(st, op);
	case OP_DELETE:
		return op_delete(st, op);
	case OP_RENAME:
		return op_rename(st, op);
	case OP_PRUNE:
		return op_prune(st, op);
	case OP_SYNC:
		break;
	}
	return 0;
}

static bool op_changes_kv(const struct op *op)
{
	return op->kind == OP_PUT || op->kind == OP_DELETE ||
	       op->kind == OP_RENAME;
}

/* What a batch holds: changes of kv, writes at all, a durability ask. */
struct batch_info {
	unsigned nchanges, nwrites;
	bool durable;
};

static void batch_scan(const struct op *batch, struct batch_info *bi)
{
	const struct op *op;

	memset(bi, 0, sizeof(*bi));
	for (op = batch; op; op = op->next) {
		bi->nchanges += op_changes_kv(op);
		bi->nwrites += op->kind != OP_SYNC;
		bi->durable |=
			op->kind == OP_SYNC || (op->flags & STORE_DURABLE);
	}
}

static const char *op_name(const struct op *op)
{
	static const char *const names[] = {
		[OP_PUT] = "put",	[OP_DELETE] = "delete",
		[OP_RENAME] = "rename", [OP_SYNC] = "sync",
		[OP_PRUNE] = "prune",
	};

	return names[op->kind];
}

/* Reports op's failure (not -ENOENT), met just now on the write connection. */
static void op_report(struct store *st, const struct op *op, const char *what)
{
	int code = sqlite3_extended_errcode(st->wdb);

	if (op->rc == 0 || op->rc == -ENOENT)
		return;
	report(st, op->rc, err_kind(code, op->rc), what ? what : op_name(op),
	       op->region, op->key, op->klen, sqlite3_errmsg(st->wdb));
}

/*
 * Every op of the batch fails with err, reported once for the batch (as
 * the first op when the batch holds only one); lost: the file is gone,
 * counted per op and not reported (the caller of store_file_lost logs).
 */
static void batch_fail(struct store *st, struct op *batch, int err, bool lost)
{
	enum store_err_kind kind;
	struct op *op;

	for (op = batch; op; op = op->next) {
		op->rc = err;
		st->wstats.errors += op_changes_kv(op);
		if (lost)
			atomic_fetch_add_explicit(&st->errs[STORE_ERR_LOST], 1,
						  memory_order_relaxed);
	}
	if (lost)
		return;
	op_report(st, batch, batch->next ? "commit" : NULL);
	/* logged once for the batch, counted for each change in it */
	kind = err_kind(sqlite3_extended_errcode(st->wdb), err);
	for (op = batch->next; op; op = op->next)
		if (op_changes_kv(op) && err != -ENOENT)
			atomic_fetch_add_explicit(&st->errs[kind], 1,
						  memory_order_relaxed);
}

/*
 * Runs every op, each in a savepoint; returns nonzero only if SQLite
 * aborted the transaction or an op's changes could not be undone
 * (batch_fail() then reports it). An op that fails alone is rolled back to
 * its savepoint and reported here: an error does not always undo what the
 * statement did (a put whose RETURNING row was read and whose last step
 * then failed with NOMEM was committed with the batch, measured with
 * tests/fault/faultinj.so, while its caller got ENOMEM; a put's upsert
 * that succeeded before its version read failed is the same case now). A batch of one
 * op (every commit of a lone writer) runs it without a savepoint: if it
 * fails, *undo is set and the caller rolls the whole transaction back
 * instead of committing it, which undoes no less. (The savepoint and its
 * release were two statements more per commit, each opening and closing
 * the pager's savepoint journal state: 5% of the instructions of a
 * store_put under callgrind.)
 */
static int batch_apply(struct store *st, struct op *batch, bool *undo)
{
	struct op *op;
	int rc;

	*undo = false;
	if (!batch->next && !(batch->kind == OP_PUT && st->puts_held)) {
		batch->rc = op_run(st, batch);
		if (batch->rc && sqlite3_get_autocommit(st->wdb))
			return batch->rc;
		if (batch->rc) {
			op_report(st, batch, NULL);
			*undo = true;
		}
		return 0;
	}
	for (op = batch; op; op = op->next) {
		if (op->kind == OP_PUT && st->puts_held) {
			op->rc = -ENOSPC;
			report(st, op->rc, STORE_ERR_FULL, "put", op->region,
			       op->key, op->klen,
			       "disk full: the space of the released reserve "
			       "is kept for deletes and renames");
			continue;
		}
		rc = wstep(st, W_SAVEPOINT);
		if (rc)
			return rc;
		op->rc = op_run(st, op);
		if (op->rc && sqlite3_get_autocommit(st->wdb))
			return op->rc;
		if (op->rc) {
			op_report(st, op, NULL);
			rc = wstep(st, W_ROLLBACK_TO);
			if (rc)
				return rc;
		}
		rc = wstep(st, W_RELEASE);
		if (rc)
			return rc;
	}
	return 0;
}

/* Commits, recording lo..hi as our own feed range if the commit holds. */
static int batch_commit(struct store *st, uint64_t lo, uint64_t hi)
{
	int64_t t0 = store__now_ns();
	int rc, frc;

	store__assert_writer(st);
	store__ranges_lock(st);
	rc = wstep_retry(st, W_COMMIT);
	if (rc == SQLITE_DONE)
		store__ranges_add_locked(st, lo, hi);
	store__ranges_unlock(st);
	if (rc == SQLITE_DONE) { /* checksum rewrites wait: walvfs.c */
		frc = store__walvfs_flush(st->wdb);
		rc = frc == SQLITE_OK ? rc : frc;
	}
	st->wstats.commit_ns += store__now_ns() - t0;
	return rc == SQLITE_DONE ? 0 : store__sqlerr(st->wdb, rc);
}

/* Counts the batch's outcome once it is committed. */
static void batch_account(struct store *st, struct op *batch,
			  const struct batch_info *bi)
{
	uint64_t counted = st->wstats.rows + st->wstats.errors;
	struct op *op;

	store__assert_writer(st);
	st->wstats.commits++;
	if (bi->nchanges > st->wstats.max_batch)
		st->wstats.max_batch = bi->nchanges;
	for (op = batch; op; op = op->next) {
		if (!op_changes_kv(op))
			continue;
		if (op->rc == 0)
			st->wstats.rows++;
		else if (op->rc != -ENOENT)
			st->wstats.errors++;
	}
	assert(st->wstats.rows + st->wstats.errors - counted <= bi->nchanges);
	(void)counted;
}

/* fsync()s the WAL through SQLite's own handle (see the design note). */
static int wal_sync(struct store *st)
{
	sqlite3_file *f = NULL;
	int rc;

	rc = sqlite3_file_control(st->wdb, "main", SQLITE_FCNTL_JOURNAL_POINTER,
				  &f);
	if (rc != SQLITE_OK)
		return store__sqlerr(st->wdb, rc);
	if (!f || !f->pMethods)
		return 0;
	rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);
	return rc == SQLITE_OK ? 0 : store__sqlerr(st->wdb, rc);
}

/* BEGIN IMMEDIATE, the ops, COMMIT. Returns 0 or the batch's error. */
static int batch_txn(struct store *st, struct op *batch,
		     const struct batch_info *bi)
{
	bool undo = false;
	int64_t lo, hi;
	int rc;

	rc = wstep_retry(st, W_BEGIN);
	if (rc != SQLITE_DONE)
		return store__sqlerr(st->wdb, rc);
	rc = store__step_int(st->wdb, st->w[W_HEAD], &lo);
	if (rc == 0)
		rc = batch_apply(st, batch, &undo);
	if (rc == 0 && undo) { /* its lone op failed: nothing to commit */
		rc = wstep(st, W_ROLLBACK);
		if (rc == 0) {
			batch_account(st, batch, bi);
			return 0;
		}
	}
	if (rc == 0)
		rc = store__step_int(st->wdb, st->w[W_HEAD], &hi);
	if (rc == 0)
		rc = batch_commit(st, lo + 1, hi);
	if (rc) {
		if (!sqlite3_get_autocommit(st->wdb))
			wstep(st, W_ROLLBACK);
		return rc;
	}
	batch_account(st, batch, bi);
	return 0;
}

/*
 * After a committed batch: a commit that wrote with synchronous=FULL
 * fsynced the WAL; one that wrote with NORMAL leaves the WAL unsynced; a
 * durable batch that wrote nothing fsyncs it if needed.
 */
static int batch_sync(struct store *st, const struct batch_info *bi, bool wrote,
		      bool full)
{
	int rc;

	if (wrote) {
		st->unsynced = !full;
		return 0;
	}
	if (!bi->durable || !st->unsynced)
		return 0;
	rc = wal_sync(st);
	if (rc == 0)
		st->unsynced = false;
	return rc;
}

/*
 * Sets the write connection's synchronous mode to FULL (full) or NORMAL,
 * unless it has it already. A failure to set FULL fails the batch; one to
 * set NORMAL leaves FULL, which is only slower (sync_full tells the truth).
 */
static int sync_mode(struct store *st, bool full)
{
	int rc;

	if (st->sync_full == full)
		return 0;
	rc = exec_sql(st->wdb, full ? sync_full_sql : sync_normal_sql);
	if (rc == 0)
		st->sync_full = full;
	return full ? rc : 0;
}

/* The whole life of one batch; sets every op's rc. */
static void batch_run_once(struct store *st, struct op *batch)
{
	int changes0 = sqlite3_total_changes(st->wdb);
	int64_t t0 = gather_now(), t;
	struct batch_info bi;
	int rc = 0;

	batch_scan(batch, &bi);
	if (store__sq_file_lost(
		    st)) { /* before anything reaches the old file */
		batch_fail(st, batch, -EIO, true);
		return;
	}
	if (bi.nwrites)
		rc = sync_mode(st, st->durable || bi.durable);
	if (rc == 0 && bi.nwrites)
		rc = batch_txn(st, batch, &bi);
	if (rc == 0 && st->sync_full && !st->wal_grows && bi.nwrites) {
		store__walvfs_grow(st->wdb); /* fsynced: ahead from now on */
		st->wal_grows = true;
	}
	if (rc == 0)
		rc = batch_sync(st, &bi,
				sqlite3_total_changes(st->wdb) != changes0,
				st->sync_full);
	if (rc)
		batch_fail(st, batch, rc, false);
	if (rc == 0 && bi.nwrites && st->sync_full) {
		/* what a batch that waits for peers saves: batch_gather_locked */
		t = gather_now() - t0;
		st->durable_ns =
			st->durable_ns ? (7 * st->durable_ns + t) / 8 : t;
	}
}

/* ---- the disk-full reserve ------------------------------------------------ */

/*
 * Makes the reserve file (STORE_DEFAULT_RESERVE bytes of allocated blocks
 * beside the database) if it is not there; true if it is there now. A
 * reserve that cannot be made whole (the disk is full) is removed again.
 */
static bool reserve_make(struct store *st)
{
	struct stat sb;
	int fd, rc;

	if (!st->reserve_path)
		return false;
	st->reserve_tried = clock_ns(CLOCK_MONOTONIC);
	if (stat(st->reserve_path, &sb) == 0 && S_ISREG(sb.st_mode) &&
	    (uint64_t)sb.st_blocks * 512 >= st->reserve_bytes) {
		st->reserve_spent = false;
		return true;
	}
	fd = open(st->reserve_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	rc = posix_fallocate(fd, 0, (off_t)st->reserve_bytes);
	if (rc == 0)
		rc = fsync(fd) ? errno : 0;
	close(fd);
	if (rc)
		unlink(st->reserve_path);
	else
		st->reserve_spent = false;
	return rc == 0;
}

/* After a batch that committed something: puts the reserve back, at most
 * once a second while the disk stays full. */
static void reserve_refill(struct store *st)
{
	if (st->wstats.reserve_ok || !st->reserve_path ||
	    clock_ns(CLOCK_MONOTONIC) - st->reserve_tried < 1000000000)
		return;
	st->wstats.reserve_ok = reserve_make(st);
}

/*
 * Runs a batch. If deletes or renames in it failed for lack of space and
 * the reserve is there, releases the reserve and runs them once more on
 * their own: they free space, and without room for their WAL frames
 * nothing could ever be removed from a full disk. Puts are not retried;
 * while the reserve is gone and cannot be made again (the disk is still
 * full), puts fail with ENOSPC without running, so that the space the
 * reserve freed stays for deletes and renames (as ext4 keeps its reserved
 * blocks): writers that go on writing would otherwise fill it at once.
 */
static void batch_run(struct store *st, struct op *batch)
{
	struct op *op, *sub = NULL, **tail = &sub, **ops = NULL, **next_of;
	size_t n = 0, i = 0;
	bool committed = false;

	st->puts_held = false;
	if (st->reserve_spent) {
		for (op = batch; op && op->kind != OP_PUT; op = op->next)
			;
		if (op && !(st->wstats.reserve_ok = reserve_make(st)))
			st->puts_held = true;
	}
	batch_run_once(st, batch);
	for (op = batch; op; op = op->next) {
		committed |= op->rc == 0 && op->kind != OP_SYNC;
		n += (op->kind == OP_DELETE || op->kind == OP_RENAME) &&
		     op->rc == -ENOSPC;
	}
	if (n && st->wstats.reserve_ok)
		ops = malloc(2 * n * sizeof(*ops));
	if (!ops) {
		if (committed)
			reserve_refill(st);
		return;
	}
	unlink(st->reserve_path);
	st->reserve_spent = true;
	st->wstats.reserve_ok = false;
	st->wstats.reserve_used++;
	st->reserve_tried = clock_ns(CLOCK_MONOTONIC);
	report(st, -ENOSPC, STORE_ERR_FULL, "reserve", NULL, NULL, 0,
	       "disk full: released the reserve file so that deletes and "
	       "renames can commit and free space");
	/* relink the retried ops; the batch's own chain is restored after */
	next_of = ops + n;
	for (op = batch; op; op = op->next) {
		if ((op->kind == OP_DELETE || op->kind == OP_RENAME) &&
		    op->rc == -ENOSPC) {
			ops[i] = op;
			next_of[i++] = op->next;
		}
	}
	for (i = 0; i < n; i++) {
		ops[i]->rc = 0;
		*tail = ops[i];
		tail = &ops[i]->next;
	}
	*tail = NULL;
	batch_run_once(st, sub);
	for (i = 0; i < n; i++)
		ops[i]->next = next_of[i];
	free(ops);
}

/*
 * Takes the queue as the next batch and marks a batch running (busy), for
 * the calling thread; NULL if the queue is empty. lock held.
 */
static struct op *take_batch_locked(struct store *st)
{
	struct op *batch = st->queue;

	if (!batch)
		return NULL;
	st->queue = NULL;
	st->tail = &st->queue;
	st->busy = true;
#ifndef NDEBUG
	st->writer_token = store__thread_token();
#endif
	return batch;
}

static unsigned chain_len(const struct op *op)
{
	unsigned n = 0;

	for (; op; op = op->next)
		n++;
	return n;
}

/* Does the batch fsync when it commits (synchronous=FULL, or a sync)? */
static bool batch_durable(const struct store *st, const struct op *batch)
{
	for (; batch; batch = batch->next)
		if (st->durable || batch->kind == OP_SYNC ||
		    (batch->flags & STORE_DURABLE))
			return true;
	return false;
}

/*
 * Before a durable batch runs: waits, at most half of what a durable
 * batch takes or twice what the gathers that completed their group took
 * (the longer; GATHER_MAX_NS at most), until it holds group_target ops,
 * taking the ops queued meanwhile into it. group_target is the size of
 * the last durable batch plus the ops that queued while it ran: the
 * callers that will be back soon. Without the wait, a closed loop of N
 * writers settles into alternating batches (one caller finds the writer
 * idle and commits alone, the others queue behind its fsync and form
 * the next batch, while it comes back and queues behind theirs): about
 * two fsyncs for N changes. With it, the N mostly share one (4
 * writers of a durable region: 510-560 commits for 1,000 creates before,
 * 300-380 after). One writer never waits (its target is 1); a target that
 * no longer comes costs one bounded wait, after which it is relearned.
 * Why the second bound: the callers come back after their own replies
 * and their next requests through the kernel (a create: LOOKUP, CREATE,
 * WRITE, FLUSH), which takes as long as it takes, not a fraction of an
 * fsync: with half a durable batch (~150 us) the group of 4 writers on
 * the 2-vCPU VM of issue 9 was complete in few batches (2.6 changes per
 * commit, the gather timing out at a median of 220 us and the rest
 * forming a batch of their own); waiting for up to twice what complete
 * groups took, 3.9 per commit and 13% more creates per second.
 * lock held, by the thread that took the batch (busy).
 */
static void batch_gather_locked(struct store *st, struct op *batch)
{
	int64_t bound = st->durable_ns / 2, t0, deadline;
	unsigned n = chain_len(batch);
	struct op *last = batch;
	struct timespec ts;

	if (2 * st->gather_ns > bound)
		bound = 2 * st->gather_ns;
	if (n >= st->group_target || bound <= 0 || !batch_durable(st, batch))
		return;
	t0 = gather_now();
	deadline = t0 + (bound < GATHER_MAX_NS ? bound : GATHER_MAX_NS);
	ts.tv_sec = deadline / 1000000000;
	ts.tv_nsec = deadline % 1000000000;
	while (last->next)
		last = last->next;
	st->gathering = true;
	for (;;) {
		if (st->queue) {
			last->next = st->queue;
			for (; last->next; last = last->next)
				n++;
			st->queue = NULL;
			st->tail = &st->queue;
		}
		/* the op that completes the target wakes us, no other */
		st->gather_left =
			n < st->group_target ? st->group_target - n : 0;
		if (n >= st->group_target) {
			t0 = gather_now() - t0;
			st->gather_ns = st->gather_ns
						? (7 * st->gather_ns + t0) / 8
						: t0;
			break;
		}
		if (st->stopping || gather_wait(st, &ts, deadline) == ETIMEDOUT)
			break;
	}
	st->gathering = false;
	st->gather_left = 0;
	if (st->queue) { /* queued after the last look */
		last->next = st->queue;
		st->queue = NULL;
		st->tail = &st->queue;
	}
}

/* Publishes a run batch's counters and wakes its callers. lock held. */
static void batch_done_locked(struct store *st, struct op *batch)
{
	unsigned target;
	struct op *op, *next;

	/* every published counter only grows, max_batch too (a gauge that
	 * never falls); reserve_ok comes and goes */
#define STORE_STAT_GROWS(type, field, ...)                                     \
	assert(type == STORE_GAUGE || st->wstats.field >= st->stats.field);
	STORE_STATS(STORE_STAT_GROWS)
#undef STORE_STAT_GROWS
	assert(st->wstats.max_batch >= st->stats.max_batch);
	st->stats = st->wstats;
	if (batch_durable(st, batch)) {
		target = chain_len(batch) + chain_len(st->queue);
		st->group_target =
			target < GATHER_MAX_OPS ? target : GATHER_MAX_OPS;
	}
	for (op = batch; op; op = next) {
		next = op->next; /* op dies once its caller wakes */
		op->done = true;
		pthread_cond_signal(&op->cond);
	}
	if (st->queue) {
		/*
		 * The next batch is led by the caller of its first op, which
		 * has to be woken anyway: one wake-up fewer per batch than
		 * waking the writer thread, which would then wake that caller
		 * too. busy stays set until it has taken the queue, so
		 * nobody else takes it meanwhile (handed_off()).
		 */
		st->queue->lead = true;
		pthread_cond_signal(&st->queue->cond);
		return;
	}
	st->busy = false;
	if (st->stopping)
		pthread_cond_signal(&st->wake); /* the writer exits */
}

/*
 * Runs the queue as one batch on the calling thread, which holds lock and
 * owns busy (an idle store, or a batch handed to it by batch_done_locked());
 * the first queued op is the caller's, op.
 */
static void lead_locked(struct store *st, struct op *op)
{
	struct op *batch = take_batch_locked(st);

	assert(batch == op);
	(void)op;
	batch_gather_locked(st, batch);
	pthread_mutex_unlock(&st->lock);
	batch_run(st, batch);
	pthread_mutex_lock(&st->lock);
	batch_done_locked(st, batch);
}

static void *writer_main(void *arg)
{
	struct store *st = arg;
	struct op *batch;

	pthread_mutex_lock(&st->lock);
	for (;;) {
		while (st->busy || (!st->queue && !st->stopping))
			pthread_cond_wait(&st->wake, &st->lock);
		batch = take_batch_locked(st);
		if (!batch)
			break; /* stopping, and nothing left to commit */
		batch_gather_locked(st, batch);
		pthread_mutex_unlock(&st->lock);

		batch_run(st, batch);

		pthread_mutex_lock(&st->lock);
		batch_done_locked(st, batch);
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

/* Queues op and waits until the writer has run it; returns its result. */
static int submit(struct store *st, struct op *op)
{
	int rc;

	op->done = false;
	op->lead = false;
	op->next = NULL;
	op->rc = 0;
	if (st->read_only)
		return op->kind == OP_SYNC || op->kind == OP_PRUNE ? 0 : -EROFS;
	rc = store__lost(st);
	if (rc)
		return rc;
	if (pthread_cond_init(&op->cond, NULL))
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	if (st->stopping) {
		rc = -ESHUTDOWN;
		goto out;
	}
	assert(*st->tail == NULL &&
	       (st->queue == NULL) == (st->tail == &st->queue));
	*st->tail = op;
	st->tail = &op->next;
	if (!st->busy && st->queue == op) {
		/*
		 * No batch runs and none waits: lead this one on the calling
		 * thread, instead of two hand-offs to the writer thread and
		 * back (each a context switch on a busy machine). Callers
		 * that come meanwhile queue up and form the next batch, which
		 * the caller of their first op leads when this batch is
		 * done: group commit as before.
		 */
		lead_locked(st, op);
	} else if (!st->busy) {
		pthread_cond_signal(&st->wake);
	} else if (st->gathering && st->gather_left && --st->gather_left == 0) {
		pthread_cond_signal(&st->gather);
	}
	while (!op->done) {
		if (op->lead) { /* handed the queue: see batch_done_locked() */
			op->lead = false;
			lead_locked(st, op);
			continue;
		}
		pthread_cond_wait(&op->cond, &st->lock);
	}
	rc = op->rc;
out:
	pthread_mutex_unlock(&st->lock);
	pthread_cond_destroy(&op->cond);
	return rc;
}

/* ---- the change calls ---------------------------------------------------- */

static int sq_put(struct store *st, const char *region, const void *key,
		  size_t klen, const void *data, size_t len, unsigned flags,
		  struct store_meta *meta)
{
	struct op op = {.kind = OP_PUT,
			.flags = flags,
			.region = region,
			.key = key,
			.klen = klen,
			.data = data,
			.len = len};
	int rc;

	rc = check_args(region, key, klen);
	if (rc == 0 && ((flags & ~STORE_DURABLE) || (len && !data)))
		rc = -EINVAL;
	if (rc == 0)
		rc = submit(st, &op);
	if (rc == 0 && meta)
		*meta = op.meta;
	return rc;
}

static int sq_delete(struct store *st, const char *region, const void *key,
		     size_t klen, unsigned flags)
{
	struct op op = {.kind = OP_DELETE,
			.flags = flags,
			.region = region,
			.key = key,
			.klen = klen};
	int rc;

	rc = check_args(region, key, klen);
	if (rc == 0 && (flags & ~STORE_DURABLE))
		rc = -EINVAL;
	return rc ? rc : submit(st, &op);
}

static int sq_delete_version(struct store *st, const char *region,
			     const void *key, size_t klen, uint64_t version,
			     unsigned flags)
{
	struct op op = {.kind = OP_DELETE,
			.flags = flags,
			.region = region,
			.key = key,
			.klen = klen,
			.if_version = version};
	int rc;

	rc = check_args(region, key, klen);
	if (rc == 0 &&
	    ((flags & ~STORE_DURABLE) || !version || version > INT64_MAX))
		rc = -EINVAL;
	return rc ? rc : submit(st, &op);
}

static int sq_rename(struct store *st, const char *region, const void *from,
		     size_t flen, const void *to, size_t tlen, unsigned flags)
{
	struct op op = {.kind = OP_RENAME,
			.flags = flags,
			.region = region,
			.key = from,
			.klen = flen,
			.key2 = to,
			.klen2 = tlen};
	int rc;

	rc = check_args(region, from, flen);
	if (rc == 0)
		rc = check_key(to, tlen);
	if (rc == 0 && (flags & ~STORE_DURABLE))
		rc = -EINVAL;
	return rc ? rc : submit(st, &op);
}

static int sq_sync(struct store *st)
{
	struct op op = {.kind = OP_SYNC};

	return submit(st, &op);
}

static int sq_changes_prune(struct store *st, uint64_t max_age_ms)
{
	struct op op = {.kind = OP_PRUNE};
	int64_t now = store__wall_ns() / 1000000;

	op.cutoff_ms = max_age_ms >= (uint64_t)now ? 0 : now - max_age_ms;
	return submit(st, &op);
}

static void sq_stats(struct store *st, struct store_stats *out)
{
	int k;

	pthread_mutex_lock(&st->lock);
	*out = st->stats;
	pthread_mutex_unlock(&st->lock);
	for (k = 0; k < STORE_ERR_NKINDS; k++)
		out->errs[k] = atomic_load_explicit(&st->errs[k],
						    memory_order_relaxed);
	out->file_lost = atomic_load_explicit(&st->lost, memory_order_acquire);
	out->read_only = st->read_only;
	store__ckpt_stats(st, out);
}

/* ---- open and close ------------------------------------------------------- */

int store__cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t a;
	int rc = pthread_condattr_init(&a);

	if (rc == 0)
		rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(cond, &a);
	pthread_condattr_destroy(&a);
	return rc;
}

/*
 * Fills the immutable fields and the locks. With USE_URI builds (Debian)
 * SQLite would read a path starting with "file:" as a URI: "./" avoids it.
 */
static int store_init(struct store *st, const char *path,
		      const struct store_options *opts)
{
	bool uri = strncmp(path, "file:", 5) == 0;

	st->path = malloc(strlen(path) + (uri ? 3 : 1));
	if (!st->path)
		return -ENOMEM;
	strcpy(st->path, uri ? "./" : "");
	strcat(st->path, path);
	st->busy_timeout_ms = opts && opts->busy_timeout_ms
				      ? opts->busy_timeout_ms
				      : DEFAULT_BUSY_MS;
	if (st->busy_timeout_ms > INT_MAX)
		st->busy_timeout_ms = INT_MAX;
	st->durable = opts && opts->durable;
	st->read_only = opts && opts->read_only;
	st->on_error = opts ? opts->on_error : NULL;
	st->error_ctx = opts ? opts->error_ctx : NULL;
	st->reserve_bytes = opts && opts->reserve_bytes ? opts->reserve_bytes
							: STORE_DEFAULT_RESERVE;
	if (st->reserve_bytes != UINT64_MAX && !st->read_only) {
		st->reserve_path = malloc(strlen(st->path) + 9);
		if (!st->reserve_path)
			return -ENOMEM;
		strcpy(st->reserve_path, st->path);
		strcat(st->reserve_path, "-reserve");
	}
	st->tail = &st->queue;
	st->ranges = malloc(MAX_OWN_RANGES * sizeof(*st->ranges));
	if (!st->ranges)
		return -ENOMEM;
	if (pthread_mutex_init(&st->lock, NULL) ||
	    pthread_cond_init(&st->wake, NULL) ||
	    store__cond_init_monotonic(&st->gather) ||
	    pthread_mutex_init(&st->ranges_lock, NULL) ||
	    pthread_mutex_init(&st->pool_lock, NULL))
		return -ENOMEM; /* glibc's inits cannot fail */
	st->locks_ok = true;
	if (pthread_key_create(&st->tls, rconn_release))
		return -EAGAIN;
	if (pthread_key_create(&st->lent, lender_exit)) {
		pthread_key_delete(st->tls);
		return -EAGAIN;
	}
	st->tls_ok = true;
	return 0;
}

static void sq_close(struct store *st);

/*
 * Process-wide SQLite settings, before anything initializes the library
 * (sqlite3_config() refuses them after; then the defaults stay, which is
 * only slower). Memory statistics off: with them on (the default), every
 * sqlite3_malloc() and free takes one global mutex, which the writer, the
 * checkpointer and every request thread's read connection share; nothing
 * here reads them (sqlite3_memory_used(), soft heap limits).
 */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;

static void sqlite_setup(void)
{
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int store__sqlite_open(const char *path, const struct store_options *opts,
		       struct store **out)
{
	struct store *st;
	int rc;

	pthread_once(&sqlite_once, sqlite_setup);
	*out = NULL;
	if (!path || !*path || !strcmp(path, ":memory:"))
		return -EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->ops = &store__sqlite_ops;
	rc = store_init(st, path, opts);
	if (rc == 0 && !st->read_only)
		rc = create_file(path);
	if (rc == 0)
		rc = check_owner(path);
	if (rc == 0)
		rc = writer_open(st);
	if (rc == 0)
		rc = remember_file(st);
	if (rc == 0) /* before the writer starts: its field, then */
		st->wstats.reserve_ok = st->stats.reserve_ok = reserve_make(st);
	if (rc == 0 && !st->read_only)
		rc = store__ckpt_start(st);
	if (rc == 0) {
		rc = -pthread_create(&st->writer, NULL, writer_main, st);
		st->thread_ok = rc == 0;
		if (rc == 0) /* for top -H, and tests that watch it wait */
			pthread_setname_np(st->writer, "regionfs-store");
	}
	if (rc) {
		sq_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

/*
 * Threads that used the store must not exit while it runs: their key
 * destructors would touch the store. Read connections close first, so
 * the writer's close, the last one, checkpoints and removes the WAL.
 */
static void sq_close(struct store *st)
{
	struct rconn *rc, *next;

	if (!st)
		return;
	if (st->thread_ok) {
		pthread_mutex_lock(&st->lock);
		st->stopping = true;
		pthread_cond_signal(&st->wake);
		pthread_mutex_unlock(&st->lock);
		pthread_join(st->writer, NULL);
	}
	store__ckpt_stop(st);
	if (st->tls_ok) {
		pthread_key_delete(st->tls);
		pthread_key_delete(st->lent);
	}
	for (rc = st->conns; rc; rc = next) {
		next = rc->next_all;
		rconn_close(rc);
	}
	finalize_all(st->w, W_NSTMT);
	sqlite3_close_v2(st->wdb);
	if (st->locks_ok) {
		pthread_mutex_destroy(&st->lock);
		pthread_cond_destroy(&st->wake);
		pthread_cond_destroy(&st->gather);
		pthread_mutex_destroy(&st->ranges_lock);
		pthread_mutex_destroy(&st->pool_lock);
	}
	free(st->ranges);
	free(st->reserve_path);
	free(st->path);
	free(st);
}

const struct store_ops store__sqlite_ops = {
	.name = "sqlite",
	.close = sq_close,
	.load = sq_load,
	.stat = sq_stat,
	.put = sq_put,
	.del = sq_delete,
	.delete_version = sq_delete_version,
	.rename = sq_rename,
	.sync = sq_sync,
	.list_page = sq_list_page,
	.region_usage = sq_region_usage,
	.changes_head = store__sq_changes_head,
	.changes = store__sq_changes,
	.changes_prune = sq_changes_prune,
	.stats = sq_stats,
	.file_lost = store__sq_file_lost,
	.thread_prepare = sq_thread_prepare,
};
