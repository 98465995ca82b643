/*
 * feed.c - the change feed: writes by other processes invalidate the cache.
 *
 * Other processes may change the database file behind the daemon: the
 * sqlite3 shell, a loader script, a second regionfs mounted on the same
 * file. Triggers record every change of a row in the store's change feed
 * (doc/schema.md); this module reads it and invalidates the keys it names,
 * so that a change committed elsewhere shows through the mount within a
 * bounded delay.
 *
 * One dedicated thread polls store_changes() from a cursor kept in
 * memory, woken by an inotify watch on the database's directory: any
 * commit, by anyone, writes the -wal file, so the thread polls right after
 * it (no sooner than FEED_GAP_MS after its previous poll, so a burst of
 * commits, ours included, costs one poll; up to FEED_GAP_MAX_MS while
 * only our own commits come, adapt_gap()), and at least every
 * FEED_SAFETY_MS in case an event is missed. Without a watch (inotify
 * unavailable), and while the store fails, it polls every FEED_POLL_MS.
 * The cursor starts at store_changes_head(), taken
 * when the thread is started: after the store is open and before the
 * session loop serves the first request, so nothing is cached yet and
 * every change the cache could miss comes after the cursor. Changes made
 * while the filesystem was not mounted need nothing (the cache starts
 * empty). The thread is not the background thread's 100 ms tick: the
 * delay bound must not depend on sweeps, reloads or a prune waiting for
 * the writer thread behind an outside writer's lock.
 *
 * The delay: commit -> the watch's event (or at most FEED_SAFETY_MS) ->
 * one region_invalidate() per change (0.4-1 us each, feed read included;
 * more when the cores are busy). A read that starts after that loads the
 * new row. A backlog is cut short at FEED_BULK_MS (below), so the delay
 * stays bounded whatever the size of the change. Measured on the 2-core
 * test VM, from the outside writer's exit to the end of the first read
 * through the mount that shows the change (tests/consistency, so it
 * includes the test's own 1 ms polling): sqlite3 UPDATE of a cached key,
 * 20 rounds: mean 1.9 ms, max 3.7 ms; a second mount's writes, 50 each
 * way: mean 1.7 ms, max 2.7 ms. With 10 ms polling and no watch it was
 * 5-9 ms on average and 10-11 ms at most. The README states 100 ms.
 *
 * Idle cost. store_changes() compares PRAGMA data_version with its last
 * pass and returns without a query when nobody committed, so an idle poll
 * is one wakeup and one small SQLite step (a WAL read lock taken and
 * dropped). Polling every 10 ms cost 0.55-0.75% of a core on an idle VM
 * (30-75 us per poll, half of it the timer wakeup); with the watch, idle
 * polls come every FEED_SAFETY_MS: 0.08% of a core at 100 ms (the
 * thread's schedstat over 20 s on an idle mount), 0.2% at 50 ms, the
 * safety poll chosen so that a lost event still leaves the stated bound
 * twice the margin. Nothing else is touched on an
 * idle poll (the region table reference is taken on the first change).
 *
 * PostgreSQL (store/pg.c). There is no file to watch: other mounts, on
 * other hosts, ring a doorbell (pg_notify, after their commit) that
 * arrives on the store's LISTEN connection, whose socket
 * store_changes_fd() gives us. The thread polls that socket instead of the
 * inotify watch (asking for the descriptor before every wait: it changes
 * when the store reconnects), drains it with store_changes_drain(), and
 * replays the change log on a doorbell, at least every FEED_BELL_MS
 * (doorbells are hints: one may be lost, or the queue full), and at once
 * after an error (the store reconnects in store_changes()). The log, not
 * the doorbell, says what changed; store_changes() there reads it with a
 * snapshot-safe position (pg.c), so a transaction that commits late with
 * a low sequence number is not skipped. The bound a mount states for
 * another mount's write is therefore the doorbell's trip (a round trip
 * to the server) plus one poll, or FEED_BELL_MS when a doorbell is lost.
 *
 * Each change is applied with region_invalidate(..., REGION_ORIGIN_OUTSIDE)
 * in the region of that name in the current table (changes in regions this
 * mount does not serve are ignored): it evicts the key and poisons a load
 * of it in the air, so a reader that read the old row before the outside
 * commit cannot install it afterwards (the same stale-put guard as for our
 * own writes). A NULL key from the store ("the feed was pruned past the
 * cursor, or the file was replaced") invalidates every region. Our own
 * writes are skipped by the store: the write path already invalidated
 * them (E1/E2).
 *
 * Bulk changes. A script replacing 100,000 rows makes 100,000 feed rows.
 * The store reads them in pages and calls us once per row; we stop each
 * store_changes() call after FEED_BATCH changes (the cursor stays on the
 * last change applied) and go on at once with the next batch. Between two
 * changes nothing is held but the table reference (an atomic count): each
 * region_invalidate() takes one stripe lock for a hash lookup, and no
 * store lock is held while we are called (the store copies each page out
 * and resets its statement first). So a reader waits at most for one
 * invalidation of its stripe, never for the batch; and between batches
 * the thread notices rfs_feed_stop() and takes a fresh table (a reload
 * during a bulk change).
 *
 * Key by key, a backlog costs time in proportion to its size: measured
 * 11-30 ms for 30,000 changes and 37-82 ms for 100,000 (the latter with
 * four readers competing for the two cores), and keys late in the feed
 * stay stale that long. So after each full batch the thread projects,
 * from the rate of the batches so far and the distance to the feed's
 * head, when it would finish: past FEED_BULK_MS it invalidates every
 * region at once and moves the cursor to the head instead (the 100,000
 * row test does this after 1-4 batches, 2-19 ms into the backlog). The
 * price is a cold cache in every region, the same as after a pruned
 * feed; misses are loads, not stalls (in that test, with four readers on
 * two cores: p99 of a read 0.5-2 ms, the slowest 5-23 ms over three
 * runs). Regions the change did not touch lose their cache too: the
 * store cannot say which regions a range of the feed names without
 * reading it.
 *
 * Errors. store_changes() can fail (-EAGAIN while another connection
 * holds a lock the reader needs, -EIO if the file was replaced or
 * damaged, -ENOMEM). The poll is retried every FEED_POLL_MS; the first
 * error of a streak is logged, and the recovery, not every attempt. The
 * cursor does not move on an error, so nothing is lost; but if the streak
 * lasted FEED_STALE_MS or more, every region is invalidated once after
 * the first good pass: conservative, since whatever broke the feed for
 * that long (the file replaced or restored, the feed table edited by
 * hand) may also have changed rows in ways the cursor cannot see.
 *
 * The lag figure (feed_lag_ms). The store reports a change without its
 * time, and the feed's ts_ms column would be the time of the writer's
 * statement, not of its commit, anyway. What this thread knows exactly is
 * when it last completed a pass up to the feed's head: every change
 * committed before the start of that pass has been applied, so a change
 * applied later was committed after that start. feed_lag_ms is therefore
 * the time from the start of the last complete pass to the moment the
 * newest change of the current pass was applied: an upper bound of its
 * commit-to-invalidation delay (about one poll interval when idle, more
 * while a backlog is worked off or the store fails), never an
 * underestimate. feed_changes counts the changes applied (keys of served
 * regions, plus one per "invalidate everything").
 *
 * Kernel caches. A key's name is never cached by the kernel (entry
 * timeout 0, no negative entries) and its inode stands for one row
 * (inode.c): a LOOKUP after an outside change finds the new row in the
 * store and gets a new inode, whose page cache starts empty, so no
 * notify_inval_inode/entry is needed. One case needs us: an outside
 * writer can replace a row without changing its (size, mtime, version)
 * (DELETE and INSERT within one millisecond: version 1 both times), and
 * then only the feed knows. So every change applied is also passed to the
 * change listener (rfs_feed_listen(); the daemon's makes the key's inode
 * stop being the one LOOKUP returns, and queues the invalidation of the
 * kernel's cached entry for the name, kinval.c). It is
 * called after the cache is invalidated: a LOOKUP between the two still
 * gets the old inode, whose open reloads and finds a different value
 * (inode.c); a LOOKUP after both gets a new inode.
 *
 * Pruning the feed table is the background thread's job (daemon.c, every
 * minute, rows older than 10 minutes). A mount that falls behind the
 * prune horizon gets the "invalidate everything" call: safe, and slow only
 * for the cache's hit rate.
 *
 * Locking: none of its own. Everything in struct feed_state belongs to
 * the feed thread; stop is an atomic flag the thread checks after every
 * poll and batch; the counters are relaxed atomics with one writer (the
 * thread). The thread takes engine stripe locks (inside region_*()) and
 * the table's shard lock (rfs_table_ref()) one at a time, never two.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"

#define FEED_POLL_MS	RFS_FEED_POLL_MS
#define FEED_SAFETY_MS	RFS_FEED_SAFETY_MS
#define FEED_GAP_MS	RFS_FEED_GAP_MS
#define FEED_BATCH	RFS_FEED_BATCH
#define FEED_STALE_MS	RFS_FEED_STALE_MS
#define FEED_BULK_MS	RFS_FEED_BULK_MS
#define FEED_BELL_MS	250 /* with a doorbell: replay at least this often */
#define FEED_GAP_MAX_MS 16  /* the gap while only our own writes come */

/* The feed thread's own state. */
struct feed_state {
	uint64_t cursor;    /* last change seen */
	bool have_cursor;   /* the head was read */
	bool start_late;    /* head read late: invalidate all when known */
	uint64_t clean_ns;  /* start of the last pass up to the head */
	uint64_t err_since; /* first failed poll of a streak; 0: none */
	unsigned nerr;	    /* failed polls in the streak */
	uint64_t bulk_t0;   /* start of a backlog (>= 1 batch); 0: none */
	uint64_t bulk_n;    /* changes read in that backlog */
	bool lost;	    /* the database file was deleted or replaced */
	unsigned gap_ms;    /* the gap before the next poll (file_wait) */
	uint64_t own_seen;  /* own_writes() at the last poll */
};

/* One store_changes() call: what the callback needs and counts. */
struct feed_batch {
	struct rfs_table *t; /* taken on the first change */
	unsigned calls;	     /* of the callback */
	uint64_t applied;    /* changes that touched a served region */
};

static struct {
	rfs_feed_listener listen;     /* set before start, then immutable */
	atomic_bool stop;	      /* rfs_feed_stop() asks */
	bool running;		      /* start/stop callers only */
	pthread_t thread;	      /* start/stop callers only */
	struct feed_state s;	      /* feed thread only (set before start) */
	atomic_uint_fast64_t changes; /* feed_changes */
	atomic_uint_fast64_t lag_ms;  /* feed_lag_ms */
	atomic_uint_fast64_t
		done_ns; /* rfs_mono_ns() of the last complete pass */
	int wfd;	 /* inotify on the database's directory */
	int wake[2];	 /* rfs_feed_stop() writes to wake[1] */
	bool bell;	 /* the store has a doorbell (store_changes_fd) */
} feed = {.wfd = -1, .wake = {-1, -1}};

void rfs_feed_counters(uint64_t *changes, uint64_t *lag_ms)
{
	*changes = atomic_load_explicit(&feed.changes, memory_order_relaxed);
	*lag_ms = atomic_load_explicit(&feed.lag_ms, memory_order_relaxed);
}

uint64_t rfs_feed_poll_age_ms(void)
{
	uint64_t done =
		atomic_load_explicit(&feed.done_ns, memory_order_relaxed);
	uint64_t now = rfs_mono_ns();

	return done && now > done ? (now - done) / 1000000 : 0;
}

void rfs_feed_listen(rfs_feed_listener fn)
{
	feed.listen = fn;
}

/* Tells the listener, if any, that key (NULL: every key) changed. */
static void changed(const char *region, const void *key, size_t klen)
{
	if (feed.listen)
		feed.listen(region, key, klen);
}

/* Invalidates every region of t. */
static void invalidate_all(struct rfs_table *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		region_invalidate_all(t->v[i]->r, REGION_ORIGIN_OUTSIDE);
	changed(NULL, NULL, 0);
}

/* Invalidates every region of the current table. */
static void invalidate_everything(void)
{
	struct rfs_table *t = rfs_table_ref();

	invalidate_all(t);
	rfs_table_unref(t);
}

/* Once, by whoever sees the loss first (this thread's poll, a commit). */
static atomic_bool file_lost_done;

void rfs_feed_file_lost(void)
{
	if (atomic_exchange(&file_lost_done, true))
		return;
	/* the store refuses everything now: drop what we cache */
	invalidate_everything();
	rfs_log(RFS_LOG_ERR,
		"database %s was deleted or replaced under the mount: every "
		"read and write of a key now fails with EIO (nothing is "
		"written to the old file); unmount, check the file and mount "
		"again",
		rfs.db_path);
}

/*
 * The store_change_fn: applies one change (key NULL: all of them). Holds
 * no lock between calls; a stripe lock inside region_invalidate() only.
 * Returns nonzero to end the batch after FEED_BATCH calls.
 */
static int apply_change(void *ctx, const char *region, const void *key,
			size_t klen)
{
	struct feed_batch *b = ctx;
	struct rfs_region *rr;

	if (!b->t)
		b->t = rfs_table_ref();
	if (!key) {
		invalidate_all(b->t);
		b->applied++;
	} else if ((rr = rfs_table_find(b->t, region))) {
		region_invalidate(rr->r, key, klen, REGION_ORIGIN_OUTSIDE);
		changed(region, key, klen);
		b->applied++;
	}
	return ++b->calls >= FEED_BATCH;
}

/* n changes were applied, the newest at now: the counters. */
static void count_applied(const struct feed_state *s, uint64_t n, uint64_t now)
{
	if (!n)
		return;
	atomic_fetch_add_explicit(&feed.changes, n, memory_order_relaxed);
	atomic_store_explicit(&feed.lag_ms, (now - s->clean_ns) / 1000000,
			      memory_order_relaxed);
}

/* A poll failed with rc: logs the first failure of a streak. */
static void poll_failed(struct feed_state *s, int rc, uint64_t t0)
{
	if (!s->err_since) {
		s->err_since = t0;
		rfs_log(RFS_LOG_WARNING,
			"change feed: %s; retrying every %d ms (outside "
			"changes are not applied meanwhile)",
			strerror(-rc), FEED_POLL_MS);
	}
	s->nerr++;
}

/* A poll succeeded after a streak of failures. */
static void poll_recovered(struct feed_state *s, uint64_t now)
{
	uint64_t ms = (now - s->err_since) / 1000000;
	bool all = ms >= FEED_STALE_MS;

	if (all)
		invalidate_everything();
	rfs_log(RFS_LOG_NOTICE,
		"change feed: working again after %llu ms (%u failed polls)%s",
		(unsigned long long)ms, s->nerr,
		all ? "; invalidated every region" : "");
	s->err_since = 0;
	s->nerr = 0;
}

/*
 * After a full batch of a backlog: if going on key by key would take the
 * backlog past FEED_BULK_MS, at the rate measured on it so far, invalidates
 * every region and moves the cursor to the head instead. Safe: every
 * change up to the head was committed before the head was read, so a load
 * that starts after the invalidation reads them all, and a load in the air
 * is poisoned by it.
 */
static void bulk_jump(struct feed_state *s, uint64_t now)
{
	uint64_t head, left, spent = now - s->bulk_t0;

	if (store_changes_head(rfs.st, &head) || head <= s->cursor)
		return;
	left = head - s->cursor; /* our own changes included: an estimate */
	if (spent + left * (spent / s->bulk_n) <= FEED_BULK_MS * 1000000ULL)
		return;
	invalidate_everything();
	count_applied(s, 1, rfs_mono_ns());
	rfs_log(RFS_LOG_NOTICE,
		"change feed: %llu changes waiting after %llu ms: invalidated "
		"every region instead of each key",
		(unsigned long long)left,
		(unsigned long long)(spent / 1000000));
	s->bulk_n += left;
	s->cursor = head;
	s->clean_ns = now;
}

/* Tracks a backlog worked off in several batches; logs its end. */
static void bulk_progress(struct feed_state *s, const struct feed_batch *b,
			  uint64_t t0, uint64_t now)
{
	if (!s->bulk_t0)
		s->bulk_t0 = t0;
	s->bulk_n += b->calls;
	if (b->calls >= FEED_BATCH)
		return;
	rfs_log(RFS_LOG_INFO,
		"change feed: a backlog of %llu changes done in %llu ms",
		(unsigned long long)s->bulk_n,
		(unsigned long long)((now - s->bulk_t0) / 1000000));
	s->bulk_t0 = 0;
	s->bulk_n = 0;
}

/*
 * Reads the head if the start could not; a late head invalidates all,
 * since requests may have loaded rows that changed before it.
 */
static int poll_head(struct feed_state *s)
{
	int rc;

	if (s->have_cursor)
		return 0;
	rc = store_changes_head(rfs.st, &s->cursor);
	if (rc)
		return rc;
	s->have_cursor = true;
	if (s->start_late)
		invalidate_everything();
	return 0;
}

/* Changes of the store this mount made so far (commit.c counts them). */
static uint64_t own_writes(void)
{
	return rfs_counter(RFS_C_COMMITS) + rfs_counter(RFS_C_UNLINKS) +
	       rfs_counter(RFS_C_RENAMES);
}

/*
 * The gap before the next poll after a database event: FEED_GAP_MS, and
 * twice the last one (up to FEED_GAP_MAX_MS) after a poll that found no
 * outside change while this mount was writing: the events were our own
 * commits, which need no poll (the write path invalidated them), and a
 * burst of them then wakes the thread once per gap, not once per 2 ms.
 * An outside change among them shows after at most FEED_GAP_MAX_MS and a
 * poll (the bound stays 100 ms), and the first poll that finds one, or
 * finds this mount idle, brings the gap back to FEED_GAP_MS.
 */
static void adapt_gap(struct feed_state *s, const struct feed_batch *b)
{
	uint64_t own = own_writes();

	if (b->calls == 0 && own != s->own_seen)
		s->gap_ms = s->gap_ms * 2 < FEED_GAP_MAX_MS ? s->gap_ms * 2
							    : FEED_GAP_MAX_MS;
	else
		s->gap_ms = FEED_GAP_MS;
	s->own_seen = own;
}

/*
 * One poll: applies at most FEED_BATCH changes. Returns true if it
 * stopped at that bound (more may be waiting: poll again at once).
 */
static bool feed_poll(struct feed_state *s)
{
	struct feed_batch b = {0};
	uint64_t t0 = rfs_mono_ns(), now;
	int rc;

	if (!s->lost && store_file_lost(rfs.st)) {
		s->lost = true;
		rfs_feed_file_lost();
	}
	rc = poll_head(s);
	if (rc == 0)
		rc = store_changes(rfs.st, &s->cursor, apply_change, &b);
	now = rfs_mono_ns();
	if (b.t)
		rfs_table_unref(b.t);
	count_applied(s, b.applied, now);
	if (rc < 0) {
		poll_failed(s, rc, t0);
		return false;
	}
	if (s->err_since)
		poll_recovered(s, now);
	adapt_gap(s, &b);
	if (b.calls >= FEED_BATCH || s->bulk_t0)
		bulk_progress(s, &b, t0, now);
	if (b.calls < FEED_BATCH) {
		s->clean_ns = t0; /* a complete pass */
		atomic_store_explicit(&feed.done_ns, now, memory_order_relaxed);
		return false;
	}
	bulk_jump(s, now);
	return true;
}

/*
 * Sleeps until deadline (CLOCK_MONOTONIC ns). A plain timed sleep, not a
 * condition variable: rfs_feed_stop() then waits at most one interval,
 * which is fine at unmount, and the thread needs no lock at all.
 */
static void feed_sleep(uint64_t deadline)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline / 1000000000),
		.tv_nsec = (long)(deadline % 1000000000),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

/*
 * Watches the database's directory, so a commit by anyone (a write to the
 * -wal file, or the file replaced) wakes the thread at once. Returns the
 * inotify fd, or -1: then the thread polls every FEED_POLL_MS.
 */
static int watch_db(void)
{
	char dir[PATH_MAX];
	int fd;

	if (!rfs.db_path)
		return -1; /* unit tests without a database path */
	fd = rfs_watch_dir(rfs.db_path,
			   IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO |
				   IN_CREATE | IN_DELETE,
			   dir, sizeof(dir));

	if (fd >= 0)
		return fd;
	rfs_log(RFS_LOG_WARNING,
		"change feed: cannot watch %s (%s): polling every %d ms", dir,
		strerror(-fd), FEED_POLL_MS);
	return -1;
}

/* Drains the watch: true if an event named the database or its -wal. */
static bool db_event(int fd)
{
	return rfs_watch_hit(fd, strrchr(rfs.db_path, '/') + 1, true);
}

/*
 * Waits for the next poll: a database event (but no sooner than
 * the gap after the last poll started: FEED_GAP_MS, longer while only our
 * own commits come, adapt_gap()), FEED_SAFETY_MS at most, or rfs_feed_stop().
 * Without a watch, or while the store fails, every FEED_POLL_MS.
 */
/*
 * feed_wait() with a doorbell: until one of another writer's doorbells
 * arrives, FEED_BELL_MS, or rfs_feed_stop(). Noise on the socket (our
 * own doorbells, other traffic) waits on to the same deadline.
 */
static void bell_wait(const struct feed_state *s, uint64_t started)
{
	int period = s->err_since ? FEED_POLL_MS : FEED_BELL_MS;
	uint64_t deadline = started + (uint64_t)period * 1000000ULL;
	struct pollfd pfd[2] = {
		{.fd = feed.wake[0], .events = POLLIN},
		{.fd = -1, .events = POLLIN},
	};

	if (store_changes_drain(rfs.st) > 0)
		return; /* heard during the last poll: poll again */
	for (;;) {
		uint64_t now = rfs_mono_ns();
		int fd = store_changes_fd(rfs.st),
		    timeout =
			    now < deadline
				    ? (int)((deadline - now + 999999) / 1000000)
				    : 0;

		pfd[1].fd = fd >= 0 ? fd : -1; /* negative: ignored */
		if (poll(pfd, 2, timeout) <= 0)
			return; /* the deadline (or EINTR): poll now */
		if (pfd[0].revents)
			return; /* stop */
		if (store_changes_drain(rfs.st) != 0)
			return; /* a doorbell, or the connection failed */
	}
}

static void file_wait(const struct feed_state *s, uint64_t started)
{
	struct pollfd pfd[2] = {
		{.fd = feed.wake[0], .events = POLLIN},
		{.fd = feed.wfd, .events = POLLIN},
	};
	int period =
		feed.wfd < 0 || s->err_since ? FEED_POLL_MS : FEED_SAFETY_MS;
	uint64_t deadline = started + (uint64_t)period * 1000000ULL;
	uint64_t gap_end = started + (uint64_t)s->gap_ms * 1000000ULL;

	for (;;) {
		uint64_t now = rfs_mono_ns();
		int timeout =
			now < deadline
				? (int)((deadline - now + 999999) / 1000000)
				: 0;

		if (poll(pfd, feed.wfd < 0 ? 1 : 2, timeout) <= 0)
			return; /* the deadline (or EINTR): poll now */
		if (pfd[0].revents)
			return; /* stop */
		if (db_event(feed.wfd))
			break;
		/* events of other files in the directory: wait on, to the
		 * same deadline, so their churn never delays a poll */
	}
	if (rfs_mono_ns() < gap_end)
		feed_sleep(gap_end);
	db_event(feed.wfd); /* what came meanwhile is in this poll */
}

static void feed_wait(const struct feed_state *s, uint64_t started)
{
	if (feed.bell)
		bell_wait(s, started);
	else
		file_wait(s, started);
}

static void *feed_main(void *arg)
{
	struct feed_state *s = &feed.s;

	(void)arg;
	while (!atomic_load_explicit(&feed.stop, memory_order_acquire)) {
		uint64_t started = rfs_mono_ns();

		if (feed_poll(s))
			continue; /* a backlog: the next batch at once */
		feed_wait(s, started);
	}
	return NULL;
}

/* Resets the thread's state and takes the cursor at the feed's head. */
static void feed_init(void)
{
	struct feed_state *s = &feed.s;
	int rc;

	memset(s, 0, sizeof(*s));
	s->gap_ms = FEED_GAP_MS;
	atomic_store(&feed.stop, false);
	s->clean_ns = rfs_mono_ns();
	rc = store_changes_head(rfs.st, &s->cursor);
	if (rc == 0) {
		s->have_cursor = true;
		return;
	}
	s->start_late = true; /* the thread retries, then invalidates all */
	poll_failed(s, rc, s->clean_ns);
}

static void close_fds(void)
{
	if (feed.wfd >= 0)
		close(feed.wfd);
	if (feed.wake[0] >= 0) {
		close(feed.wake[0]);
		close(feed.wake[1]);
	}
	feed.wfd = feed.wake[0] = feed.wake[1] = -1;
}

int rfs_feed_start(void)
{
	int rc;

	feed_init();
	if (pipe2(feed.wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	feed.bell = rfs.st && store_changes_fd(rfs.st) != -ENOTSUP;
	feed.wfd = feed.bell ? -1 : watch_db();
	rc = rfs_thread_spawn(&feed.thread, feed_main, NULL, "regionfs-feed");
	if (rc) {
		close_fds();
		return rc;
	}
	feed.running = true;
	return 0;
}

void rfs_feed_stop(void)
{
	if (!feed.running)
		return;
	atomic_store_explicit(&feed.stop, true, memory_order_release);
	if (write(feed.wake[1], "", 1) < 0) {
		/* full pipe: a wake-up is pending anyway */
	}
	pthread_join(feed.thread, NULL); /* after the batch in progress */
	feed.running = false;
	close_fds();
}

/* ---- white box (tests/unit/test_feed.c) ----------------------------------- */

void rfs_feed__reset(void)
{
	atomic_store(&feed.changes, 0);
	atomic_store(&feed.lag_ms, 0);
	atomic_store(&file_lost_done, false);
	feed_init();
}

bool rfs_feed__poll(void)
{
	return feed_poll(&feed.s);
}

uint64_t rfs_feed__cursor(bool *have)
{
	*have = feed.s.have_cursor;
	return feed.s.cursor;
}
