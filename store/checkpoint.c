/*
 * checkpoint.c - WAL checkpoints off the committing threads: a background
 * checkpointer with its own connection and thread, and an inline fallback
 * that keeps the WAL bounded under continuous writes.
 *
 * Why. SQLite's automatic checkpoint (wal_autocheckpoint, 1000 frames) runs
 * inside the COMMIT that passes the threshold, on the committing thread:
 * it syncs the WAL, copies the frames into the database file and syncs
 * that. With the store's leader/follower writer, that thread is a FUSE
 * worker whose close() waits for it: about 30 % of a 64 KiB create's store
 * time (issue 9), paid by one unlucky writer in every ~60 creates.
 *
 * How. The write connection's WAL hook (sqlite3_wal_hook(), which also
 * turns the automatic checkpoint off) learns the WAL's size in frames after
 * every commit. Past CKPT_SOFT_FRAMES new frames since the checkpointer
 * last looked, it wakes the checkpointer thread, which runs a PASSIVE
 * checkpoint on its own read-write connection: PASSIVE never waits for
 * readers or writers, so commits go on meanwhile (SQLite lets a checkpoint
 * run beside one writer: it copies only frames of snapshots nobody may
 * still need, up to the oldest reader's, and takes the WAL's checkpoint
 * lock, not the write lock).
 *
 * Why a fallback. The WAL is only reset (written again from its start)
 * when a write transaction begins while every frame has been copied and
 * no reader is on an old snapshot (SQLite's walRestartLog()). Under
 * continuous writes a checkpoint beside the writer never gets there: each
 * one copies the frames that were there when it started, while commits
 * append more, so the WAL would grow without bound (SQLite's docs call
 * this checkpoint starvation). So when a commit leaves CKPT_HARD_FRAMES or
 * more in the WAL, the committing thread, which holds the store's only
 * write role so that no commit of ours can come in between, runs a
 * RESTART checkpoint itself: it copies what the checkpointer has not
 * copied yet (fewer than CKPT_SOFT_FRAMES, as a rule) and waits, polling
 * briefly and for CKPT_INLINE_WAIT_NS at most, until no reader is on the
 * WAL, so that the next commit starts the WAL again from the beginning.
 * One inline checkpoint per CKPT_HARD_FRAMES instead of one per 1000
 * frames, each copying about as much. Not TRUNCATE: the file keeps its
 * size and its blocks (journal_size_limit, 64 MiB, trims it if it ever
 * gets larger).
 *
 * Only one checkpoint may run at a time (a second one gets SQLITE_BUSY at
 * once, whatever its busy handler): run_lock serializes ours, so an
 * inline checkpoint waits for a background one to end.
 *
 * Errors. A failed checkpoint loses nothing: the frames stay in the WAL,
 * which readers read and which crash recovery replays, and SQLite records
 * a frame as copied only after it is in the database file. Failures are
 * counted (store_checkpoint_failures) and, unless SQLite was only busy,
 * reported like any store error (a full disk counts in store_errors_full
 * and is logged). The checkpointer then tries again every
 * CKPT_RETRY_NS even if no commit comes (a full disk fails commits too); a
 * failed inline checkpoint is not tried again before the WAL grows by
 * another CKPT_HARD_FRAMES, so writes never wait on a failing one more
 * than once per that much. A busy one (readers stayed on the WAL for the
 * whole wait) is tried again after another CKPT_SOFT_FRAMES / 4: the WAL
 * then passes the hard limit by a multiple of that.
 *
 * Locking: lock guards pending-wakeups (wake), stopping, gen and trigger's
 * writes; run_lock is held across every checkpoint. The hook runs on the
 * thread running a batch (sqlite.c's writer role), inside COMMIT, with
 * ranges_lock held: order ranges_lock -> run_lock, ranges_lock -> lock;
 * the checkpointer takes run_lock and lock, never both, and never
 * ranges_lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <sqlite3.h>

#include "store_int.h"

#define CKPT_SOFT_FRAMES    STORE_CKPT_SOFT_FRAMES
#define CKPT_HARD_FRAMES    STORE_CKPT_HARD_FRAMES
#define CKPT_HARD_DURABLE   STORE_CKPT_HARD_DURABLE
#define CKPT_POLL_NS	    100000     /* the inline checkpoint's busy polls */
#define CKPT_INLINE_WAIT_NS 50000000   /* and its wait for readers at most */
#define CKPT_RETRY_NS	    1000000000 /* after a failure, try again this often */

struct ckpt {
	struct store *st; /* immutable */
	sqlite3 *db;	  /* the checkpointer's thread only (and open/close) */
	pthread_t thread;
	bool thread_ok;

	pthread_mutex_t lock;
	pthread_cond_t wake;
	atomic_bool pending; /* a wakeup is asked for (set without lock) */
	bool stopping;	     /* L: lock */
	unsigned gen;	     /* L: lock; WAL restarts the hook has seen */
	atomic_int trigger;  /* wake at this many frames; written under lock,
			      * read by the hook without */
	bool failing;	     /* checkpointer only: the last run failed */

	pthread_mutex_t run_lock; /* held across each checkpoint */

	/* the writer role only (the WAL hook) */
	int prev_frames;    /* the WAL's frames at the last commit */
	int retry_after;    /* after a failed inline checkpoint, none before
			     * the WAL has this many frames; 0: none */
	int64_t busy_start; /* when the inline checkpoint's wait began */

	/* published counters: relaxed atomics */
	atomic_uint_fast64_t runs, inline_runs, failures, ns;
	atomic_int wal_frames, wal_frames_max;
};

static bool is_busy(int rc)
{
	return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

static int64_t now_ns(void)
{
	return store__now_ns();
}

/*
 * One checkpoint of db in mode; *log gets the WAL's frames as SQLite saw
 * them and *done those copied (-1 on error). Counts a failure and reports
 * it unless SQLite was only busy. Returns the SQLite code.
 */
static int ckpt_run(struct ckpt *c, sqlite3 *db, int mode, int *log, int *done)
{
	int rc;

	pthread_mutex_lock(&c->run_lock);
	rc = sqlite3_wal_checkpoint_v2(db, "main", mode, log, done);
	pthread_mutex_unlock(&c->run_lock);
	if (rc == SQLITE_OK)
		return rc;
	atomic_fetch_add_explicit(&c->failures, 1, memory_order_relaxed);
	if (!is_busy(rc))
		store__fail(c->st, db, rc, "checkpoint", NULL, NULL, 0);
	return rc;
}

/* ---- the checkpointer thread ------------------------------------------- */

/* One background PASSIVE checkpoint, and the next trigger. */
static void ckpt_background(struct ckpt *c)
{
	int64_t t0 = now_ns();
	int log = -1, done = -1, rc;
	unsigned gen;

	pthread_mutex_lock(&c->lock);
	gen = c->gen;
	pthread_mutex_unlock(&c->lock);
	if (atomic_load_explicit(&c->st->lost, memory_order_acquire))
		rc = SQLITE_OK; /* the file is gone: nothing worth copying */
	else
		rc = ckpt_run(c, c->db, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
	atomic_fetch_add_explicit(&c->runs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->ns, now_ns() - t0, memory_order_relaxed);
	c->failing = rc != SQLITE_OK;
	if (log < 0)
		log = atomic_load_explicit(&c->wal_frames,
					   memory_order_relaxed);
	pthread_mutex_lock(&c->lock);
	/*
	 * Next time: once CKPT_SOFT_FRAMES more have come than this run saw
	 * (not than it copied: frames a reader still holds would wake us
	 * after every commit). Unless the WAL restarted meanwhile (gen): the
	 * hook has set the trigger for the new WAL then.
	 */
	if (gen == c->gen)
		atomic_store_explicit(&c->trigger, log + CKPT_SOFT_FRAMES,
				      memory_order_relaxed);
	atomic_store_explicit(&c->pending, false, memory_order_relaxed);
	pthread_mutex_unlock(&c->lock);
}

static void *ckpt_main(void *arg)
{
	struct ckpt *c = arg;
	struct timespec ts;
	int64_t t;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		if (!atomic_load_explicit(&c->pending, memory_order_relaxed)) {
			if (!c->failing) {
				pthread_cond_wait(&c->wake, &c->lock);
				continue;
			}
			t = now_ns() + CKPT_RETRY_NS;
			ts.tv_sec = t / 1000000000;
			ts.tv_nsec = t % 1000000000;
			if (pthread_cond_timedwait(&c->wake, &c->lock, &ts) !=
			    ETIMEDOUT)
				continue;
		}
		pthread_mutex_unlock(&c->lock);
		ckpt_background(c);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- the WAL hook: on the committing thread ------------------------------ */

/*
 * The inline checkpoint's busy handler: polls every CKPT_POLL_NS for
 * CKPT_INLINE_WAIT_NS at most. The readers it waits for are those whose
 * read began while the checkpoint copied (they hold the WAL; readers that
 * begin after it read the database only), each done within one read, so
 * short polls end the wait soon; the store's own handler naps up to 8 ms
 * and against one thread reading without a pause took 44-356 ms, once 5 s
 * (its timeout).
 */
static int ckpt_busy(void *arg, int count)
{
	struct ckpt *c = arg;
	struct timespec ts = {0, CKPT_POLL_NS};
	int64_t now = now_ns();

	if (count == 0)
		c->busy_start = now;
	if (now - c->busy_start >= CKPT_INLINE_WAIT_NS)
		return 0;
	nanosleep(&ts, NULL);
	return 1;
}

/*
 * A commit left the WAL with CKPT_HARD_FRAMES frames or more: a RESTART
 * checkpoint here, on the write connection, between two of our commits,
 * so that the next one starts the WAL again. It copies what the
 * checkpointer has not copied yet, then waits (ckpt_busy()) until no
 * reader is on the WAL. A plain PASSIVE one does not wait, but readers
 * that began during its copy were still on the WAL when the next commit
 * began, nearly every time with one thread reading in a loop: 110-216
 * inline checkpoints per 32,000 frames instead of 4.
 */
static void ckpt_inline(struct ckpt *c, sqlite3 *db, int nframe)
{
	int log = -1, done = -1, rc;

	sqlite3_busy_handler(db, ckpt_busy, c);
	rc = ckpt_run(c, db, SQLITE_CHECKPOINT_RESTART, &log, &done);
	sqlite3_busy_handler(db, store__writer_busy, c->st);
	atomic_fetch_add_explicit(&c->inline_runs, 1, memory_order_relaxed);
	/*
	 * Done: the next commit restarts the WAL (the hook sees it). Busy
	 * (readers stayed on the WAL, or another process checkpoints): again
	 * after CKPT_SOFT_FRAMES / 4 more. Failed (a full disk): after
	 * CKPT_HARD_FRAMES more; the checkpointer retries meanwhile.
	 */
	if (rc == SQLITE_OK)
		c->retry_after = 0;
	else if (is_busy(rc))
		c->retry_after = nframe + CKPT_SOFT_FRAMES / 4;
	else
		c->retry_after = nframe + CKPT_HARD_FRAMES;
}

static void note_frames(struct ckpt *c, int nframe)
{
	atomic_store_explicit(&c->wal_frames, nframe, memory_order_relaxed);
	if (nframe >
	    atomic_load_explicit(&c->wal_frames_max, memory_order_relaxed))
		atomic_store_explicit(&c->wal_frames_max, nframe,
				      memory_order_relaxed);
}

/*
 * sqlite3_wal_hook() callback: nframe is the WAL's size in frames after a
 * commit. Must return SQLITE_OK: an error would fail the COMMIT's step
 * although the commit holds.
 */
static int ckpt_hook(void *arg, sqlite3 *db, const char *name, int nframe)
{
	struct ckpt *c = arg;
	int hard;

	(void)name;
	store__assert_writer(c->st);
	note_frames(c, nframe);
	if (nframe < c->prev_frames) { /* the WAL started again */
		pthread_mutex_lock(&c->lock);
		c->gen++;
		atomic_store_explicit(&c->trigger, CKPT_SOFT_FRAMES,
				      memory_order_relaxed);
		pthread_mutex_unlock(&c->lock);
		c->retry_after = 0;
	}
	c->prev_frames = nframe;
	/*
	 * A durable commit (synchronous=FULL, sync_full: ours, as the hook
	 * runs in the writer role) fsyncs the WAL: while the WAL grows into
	 * new blocks, each such fsync also commits the file system's
	 * journal, so durable commits keep the WAL small, where it is
	 * overwritten in place. Durable creates, 1 writer, regionfs ÷ main:
	 * 0.51-0.90 with 8000 frames, 1.09 with 2000. (Measured before
	 * walvfs.c grew the WAL in steps of zeros, after which only the
	 * first fsync of each STORE_WAL_GROW bytes writes the inode.)
	 */
	hard = c->st->sync_full ? CKPT_HARD_DURABLE : CKPT_HARD_FRAMES;
	if (nframe >= hard && nframe >= c->retry_after) {
		ckpt_inline(c, db, nframe);
		return SQLITE_OK;
	}
	if (nframe >= atomic_load_explicit(&c->trigger, memory_order_relaxed) &&
	    !atomic_exchange_explicit(&c->pending, true,
				      memory_order_relaxed)) {
		pthread_mutex_lock(&c->lock);
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->lock);
	}
	return SQLITE_OK;
}

/* ---- start, stop, stats -------------------------------------------------- */

/* The checkpointer's connection: read-write, the default VFS, WAL open. */
static int ckpt_open_db(struct ckpt *c)
{
	struct store *st = c->st;
	int rc;

	rc = sqlite3_open_v2(st->path, &c->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
		return store__sqlerr(c->db, rc);
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, (int)st->busy_timeout_ms);
	sqlite3_wal_autocheckpoint(c->db, 0);
	/*
	 * synchronous=NORMAL: a checkpoint syncs the WAL before it copies
	 * and the database after it copied everything, which is what makes
	 * a later WAL restart safe. A read makes SQLite open the WAL.
	 */
	rc = sqlite3_exec(
		c->db,
		"PRAGMA synchronous = NORMAL; PRAGMA cache_size = -256;"
		"SELECT count(*) FROM sqlite_schema",
		NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : store__sqlerr(c->db, rc);
}

int store__ckpt_start(struct store *st)
{
	struct ckpt *c;
	int rc;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->st = st;
	atomic_init(&c->trigger, CKPT_SOFT_FRAMES);
	if (pthread_mutex_init(&c->lock, NULL) ||
	    pthread_mutex_init(&c->run_lock, NULL) ||
	    store__cond_init_monotonic(&c->wake)) {
		free(c);
		return -ENOMEM; /* glibc's inits cannot fail */
	}
	st->ckpt = c;
	rc = ckpt_open_db(c);
	if (rc == 0)
		rc = -pthread_create(&c->thread, NULL, ckpt_main, c);
	if (rc)
		return rc; /* store_close() cleans up */
	c->thread_ok = true;
	pthread_setname_np(c->thread, "regionfs-ckpt");
	sqlite3_wal_hook(st->wdb, ckpt_hook, c);
	return 0;
}

void store__ckpt_stop(struct store *st)
{
	struct ckpt *c = st->ckpt;

	if (!c)
		return;
	if (st->wdb)
		sqlite3_wal_hook(st->wdb, NULL, NULL);
	if (c->thread_ok) {
		pthread_mutex_lock(&c->lock);
		c->stopping = true;
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
	}
	sqlite3_close_v2(c->db);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->run_lock);
	pthread_cond_destroy(&c->wake);
	free(c);
	st->ckpt = NULL;
}

void store__ckpt_stats(struct store *st, struct store_stats *out)
{
	struct ckpt *c = st->ckpt;

	if (!c)
		return;
	out->checkpoints = atomic_load_explicit(&c->runs, memory_order_relaxed);
	out->checkpoints_inline =
		atomic_load_explicit(&c->inline_runs, memory_order_relaxed);
	out->checkpoint_failures =
		atomic_load_explicit(&c->failures, memory_order_relaxed);
	out->checkpoint_ns = atomic_load_explicit(&c->ns, memory_order_relaxed);
	out->wal_frames =
		atomic_load_explicit(&c->wal_frames, memory_order_relaxed);
	out->wal_frames_max =
		atomic_load_explicit(&c->wal_frames_max, memory_order_relaxed);
}
