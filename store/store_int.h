/*
 * store_int.h - what the SQLite backend's .c files share and fs/ must not
 * see. (dispatch.c dispatches store.h to the backends, store_ops.h; pg.c is
 * the PostgreSQL backend, with its own struct.)
 *
 *   sqlite.c   open/schema, the read connections, reads and
 *              listing, the writer thread with group commit, the change
 *              calls
 *   changes.c  the change feed (store_changes*()) and the own-change
 *              ranges that let it skip our writer's own changes
 *   checkpoint.c  WAL checkpoints on a thread of their own, with an
 *              inline fallback that keeps the WAL bounded
 *   walvfs.c   the write connection's VFS (one pwrite() per commit)
 *
 * Internal functions are non-static with the store__ prefix; everything
 * else stays static in its file. Functions returning int return 0 or a
 * negative errno, as in store.h.
 */
#ifndef RFS_STORE_INT_H
#define RFS_STORE_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <sqlite3.h>

#include "store.h"
#include "store_ops.h"

#define MAX_OWN_RANGES 4096 /* bound on the own-change range list */

/*
 * Statements of the read connections, prepared on first use; each indexes
 * read_sql[] in store_sql.h.
 */
enum {
	R_LOAD,
	R_STAT,
	R_LIST,
	R_USAGE,
	R_HEAD,
	R_FEED,
	R_DATA_VERSION,
	R_NSTMT
};

/* Statements of the write connection, prepared at open; see write_sql[]. */
enum {
	W_BEGIN,
	W_COMMIT,
	W_ROLLBACK,
	W_PUT,
	W_DELETE,
	W_DELETE_VERSION,
	W_VERSION,
	W_RENAME,
	W_HEAD,
	W_PRUNE_FIND,
	W_PRUNE,
	W_SAVEPOINT,
	W_ROLLBACK_TO,
	W_RELEASE,
	W_NSTMT
};

struct op;   /* a queued change: sqlite.c */
struct ckpt; /* the checkpointer: checkpoint.c */

/* A read connection: idle, taken for one read, or one thread's own. */
struct rconn {
	struct store *st;	     /* immutable */
	sqlite3 *db;		     /* immutable */
	sqlite3_stmt *stmt[R_NSTMT]; /* the thread holding it only */
	bool dv_valid;		     /* likewise: next two set */
	int64_t dv;		     /* data_version at the last full poll */
	uint64_t dv_head;	     /* feed cursor after that poll */
	struct rconn *next_all;	     /* L: store.pool_lock */
	struct rconn *next_free;     /* L: store.pool_lock */
};

/* Sequence numbers lo..hi (inclusive) of the feed are our own changes. */
struct seq_range {
	uint64_t lo, hi;
};

/*
 * Locking. lock guards the op queue, stopping and the published stats;
 * callers wait on their op's cond with it. pool_lock guards the lists of
 * read connections. ranges_lock guards the own-change ranges; the writer
 * holds it across COMMIT. No function holds two of these locks, and none
 * is held across a callback.
 */
struct store {
	const struct store_ops *ops; /* first: store_ops.h */
	/* immutable after store_open */
	char *path; /* as SQLite should see it */
	unsigned busy_timeout_ms;
	bool durable;		 /* synchronous=FULL for every commit */
	bool read_only;		 /* store_options.read_only */
	store_error_fn on_error; /* may be NULL */
	void *error_ctx;
	dev_t dev; /* the database file opened: store_file_lost() */
	ino_t ino;
	char *reserve_path; /* NULL: no reserve */
	uint64_t reserve_bytes;
	dev_t side_dev[2]; /* its -wal and -shm files (0/0: none seen) */
	ino_t side_ino[2];
	pthread_key_t tls;		  /* -> this thread's struct rconn */
	bool tls_ok, locks_ok, thread_ok; /* tls_ok: tls and lent */
	pthread_t writer;
	struct ckpt *ckpt; /* NULL: none (read-only) */

	/* the thread running a batch only (busy: the writer thread, or a
	 * caller leading its own batch; store_open before the writer starts) */
	sqlite3 *wdb;
	sqlite3_stmt *w[W_NSTMT];
	int64_t busy_start;	   /* when the current wait began */
	bool unsynced;		   /* a NORMAL commit since the last fsync */
	bool sync_full;		   /* wdb's synchronous is FULL (sync_mode) */
	struct store_stats wstats; /* published into stats per batch */
	int64_t reserve_tried;	   /* CLOCK_MONOTONIC ns of the last attempt */
	bool reserve_spent;	   /* released for a full disk, not made
				    * again yet */
	int64_t durable_ns;	   /* a durable batch's time, moving average */
	bool puts_held;		   /* this batch: the reserve is spent and
				    * cannot be made, puts get ENOSPC */
	bool wal_grows;		   /* store__walvfs_grow() was called */

	pthread_mutex_t lock;
	pthread_cond_t wake;	  /* the writer waits for ops */
	struct op *queue;	  /* L: lock */
	struct op **tail;	  /* L: lock */
	bool busy;		  /* L: lock; a batch is running */
	pthread_cond_t gather;	  /* a durable batch waits for peers */
	bool gathering;		  /* L: lock; one waits on gather */
	unsigned gather_left;	  /* L: lock; ops it still waits for */
	unsigned group_target;	  /* L: lock; ops a durable batch waits
				   * for (sqlite.c, batch_gather_locked) */
	int64_t gather_ns;	  /* L: lock; the wait of a gather that
				   * completed its group, moving average */
	bool stopping;		  /* L: lock */
	struct store_stats stats; /* L: lock */

	pthread_mutex_t ranges_lock;
	struct seq_range *ranges; /* L: ranges_lock; ascending; allocated
				   * with MAX_OWN_RANGES slots at open */
	size_t nranges;		  /* L: ranges_lock */

	pthread_mutex_t pool_lock;
	struct rconn *conns; /* L: pool_lock; every read connection */
	struct rconn *idle;  /* L: pool_lock; owned by no thread */
	struct rconn *warm;  /* L: pool_lock; the pool's idle ones, the
			      * one given back last first (rconn_take) */
	unsigned spare;	     /* L: pool_lock; pooled ones lent by threads
			      * that have exited */
	pthread_key_t lent;  /* non-NULL: this thread lent one */

	atomic_bool lost; /* the file was deleted or replaced: sticky */
	atomic_uint_fast64_t errs[STORE_ERR_NKINDS]; /* relaxed counters */
#ifndef NDEBUG
	atomic_uintptr_t ranges_owner; /* ranges_lock holder's token, or 0 */
	uintptr_t writer_token;	       /* L: lock; the thread running the batch
				 * (busy), or the last one; 0 before any */
#endif
};

/* ---- invariants ---------------------------------------------------------- */

/*
 * Checked with assert(), so on in debug and debugoptimized builds and
 * compiled out with NDEBUG (b_ndebug=if-release), as in regions/. Each
 * check is O(1): they run on every commit and every feed pass.
 */
#ifndef NDEBUG
/* A value unique to the calling thread while it lives (never 0). */
uintptr_t store__thread_token(void);
#define store__assert_ranges_held(st)                                          \
	assert(atomic_load_explicit(&(st)->ranges_owner,                       \
				    memory_order_relaxed) ==                   \
	       store__thread_token())
/*
 * The writer's own state (wdb, w[], wstats, ...) is touched only by the
 * thread running a batch (the writer thread or a leading caller, sqlite.c
 * submit()), or by store_open/store_close while no batch runs.
 */
#define store__assert_writer(st)                                               \
	assert((st)->writer_token == 0 ||                                      \
	       (st)->writer_token == store__thread_token())
#else
#define store__assert_ranges_held(st) ((void)(st))
#define store__assert_writer(st)      ((void)(st))
#endif

/* ranges_lock, with its holder recorded for store__assert_ranges_held. */
void store__ranges_lock(struct store *st);
void store__ranges_unlock(struct store *st);

/* ---- sqlite.c ----------------------------------------------------------- */

/*
 * The write connection's busy handler (sqlite3_busy_handler()), which
 * checkpoint.c puts back after its inline checkpoint's own.
 */
int store__writer_busy(void *arg, int count);
/* pthread_cond_init() of a condition whose timed waits take
 * CLOCK_MONOTONIC deadlines (st->gather, the checkpointer's wake). */
int store__cond_init_monotonic(pthread_cond_t *cond);
/* Maps a SQLite result code to -errno (0 for SQLITE_OK/ROW/DONE). */
int store_errno(int sqlite_rc);
/* store_file_lost() of the SQLite store. */
bool store__sq_file_lost(struct store *st);

/*
 * The store's clock: CLOCK_MONOTONIC in nanoseconds, for every duration
 * and deadline (busy waits, commit time). Wall-clock time is used only for
 * the timestamps written into the database (store__wall_ns).
 */
int64_t store__now_ns(void);
/* CLOCK_REALTIME in nanoseconds. */
int64_t store__wall_ns(void);

#ifdef RFS_TEST_HOOKS
/*
 * Test builds only (store_test_dep): the durable batch gather's clock and
 * timed wait. now_ns replaces store__now_ns() where a durable batch's time
 * and a gather's are measured and its deadline is set; wait replaces the
 * gather's pthread_cond_timedwait(&st->gather, &st->lock, deadline): it is
 * called with st->lock held and returns 0 (woken: the gather looks at the
 * queue again) or ETIMEDOUT, with the lock held again. NULL: the real ones.
 */
struct store_test_gather {
	int64_t (*now_ns)(void *arg);
	int (*wait)(void *arg, struct store *st, int64_t deadline_ns);
	void *arg;
};
void store_test_set_gather(const struct store_test_gather *hooks);
#endif

/* store_errno(), refined by the OS error where SQLite keeps one. */
int store__sqlerr(sqlite3 *db, int rc);
/*
 * store__sqlerr() for a failed call on db, counted by kind and passed to
 * the error callback with SQLite's message; -ENOENT and 0 pass through
 * uncounted. what/region/key say what the call was about.
 */
int store__fail(struct store *st, sqlite3 *db, int rc, const char *what,
		const char *region, const void *key, size_t klen);
/* -EIO (counted as STORE_ERR_LOST) once the file is lost, else 0. */
int store__lost(struct store *st);
/* Column col of the current row as an unsigned value; NULL and < 0 give 0. */
uint64_t store__col_u64(sqlite3_stmt *s, int col);
/*
 * Steps a statement that yields one integer row into *v, then resets it.
 * -ENOENT if it yields no row.
 */
int store__step_int(sqlite3 *db, sqlite3_stmt *s, int64_t *v);
/*
 * Statement idx (R_*) of the calling thread's read connection, which it
 * opens or takes from the pool on first use; *rcp gets the connection.
 * The caller resets the statement after use.
 */
int store__rstmt(struct store *st, int idx, struct rconn **rcp,
		 sqlite3_stmt **out);

/* ---- walvfs.c ----------------------------------------------------------- */

/*
 * The name of the write connection's VFS (the default one, with each
 * commit's WAL frames written in one pwrite()), registered on first call;
 * NULL (the default VFS) if it could not be registered.
 */
const char *store__walvfs_name(void);
/*
 * Writes out what db's WAL still holds back (0 or an SQLite code); the
 * writer calls it after each COMMIT. Nothing for another VFS's WAL.
 */
int store__walvfs_flush(sqlite3 *db);
/*
 * The write connection's WAL grows in steps of this many bytes, written
 * with zeros ahead of the commits (walvfs.c: an fsync over blocks that
 * are there is cheaper than one that extends the file), once
 * store__walvfs_grow() turned it on (the writer does at its first
 * durable commit). Nothing for another VFS's WAL.
 */
#define STORE_WAL_GROW 1048576
void store__walvfs_grow(sqlite3 *db);

/* ---- checkpoint.c -------------------------------------------------------- */

/*
 * WAL frames (pages of 4 KiB plus a 24-byte header) before the
 * checkpointer is woken: SQLite's own autocheckpoint threshold, so
 * checkpoints come as often as before, only on another thread.
 */
#define STORE_CKPT_SOFT_FRAMES 1000
/*
 * Frames after which a commit checkpoints inline: about 32 MiB, under the
 * journal_size_limit of 64 MiB (sqlite.c's WAL_LIMIT_BYTES). The WAL
 * never holds more than this plus one commit's frames for longer than
 * the inline checkpoint takes (unless it fails: checkpoint.c).
 */
#define STORE_CKPT_HARD_FRAMES 8000
/* The same after a durable commit: checkpoint.c, ckpt_hook(). */
#define STORE_CKPT_HARD_DURABLE 2000

/*
 * Starts the checkpointer: its connection and thread, and the write
 * connection's WAL hook (which turns SQLite's inline autocheckpoint off).
 * Before the writer thread starts. On failure store_close() cleans up.
 */
int store__ckpt_start(struct store *st);
/*
 * Stops and joins the checkpointer and closes its connection; after the
 * writer thread has stopped, before the write connection closes (whose
 * close, the last, checkpoints as before). Accepts a store without one.
 */
void store__ckpt_stop(struct store *st);
/* Fills the checkpoint numbers of *out (zero without a checkpointer). */
void store__ckpt_stats(struct store *st, struct store_stats *out);

/* ---- changes.c ---------------------------------------------------------- */

/* store_changes_head() and store_changes() of the SQLite store. */
int store__sq_changes_head(struct store *st, uint64_t *cursor);
int store__sq_changes(struct store *st, uint64_t *cursor, store_change_fn fn,
		      void *ctx);

/*
 * Records lo..hi (nothing if hi < lo) as our own feed range. The caller,
 * the writer, holds ranges_lock across the COMMIT that made them ours.
 */
void store__ranges_add_locked(struct store *st, uint64_t lo, uint64_t hi);

#endif /* RFS_STORE_INT_H */
