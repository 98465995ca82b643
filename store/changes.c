/*
 * changes.c - the store's change feed (store_changes*()), and the
 * own-change ranges that let it skip this store's own writes.
 *
 * The feed is table changes, filled by triggers on kv (store_sql.h) for
 * every writer: our writer thread, the sqlite3 shell, other processes and
 * mounts. Each change gets a growing sequence number, max(seq) + 1; the
 * newest row is never deleted (trigger changes_keep_head), so the head,
 * max(seq), never goes back and no number is handed out twice (schema
 * version 2; version 1 used AUTOINCREMENT, whose sqlite_sequence row cost
 * a page write per commit). The daemon polls store_changes() and
 * invalidates the keys that outside writers changed; its own writes are
 * already handled by the write path, so they must be skipped.
 *
 * Telling our changes from others'. The triggers record every change of
 * kv, ours included. Inside each batch transaction the writer (sqlite.c,
 * batch_txn) reads the feed's head before its first statement and after
 * its last; SQLite admits one writer at a time, so every sequence number
 * in between is ours. After COMMIT succeeds, the range is added to an
 * in-memory list (merged with the previous one when adjacent) that
 * store_changes() consults to skip our own changes. ranges_lock is held
 * across COMMIT and the recording, so a poller that has read a committed
 * row of ours always finds its range. A range is never recorded for a
 * rolled-back batch, whose numbers SQLite hands out again. If the list
 * grows past MAX_OWN_RANGES (nobody polls while outside writers interleave
 * with ours) its oldest half is dropped: our own changes then show up as
 * outside ones, which costs an extra invalidation, never a missed one. A
 * pass drops the ranges its cursor has gone past.
 *
 * Reading the feed. store_changes() first compares PRAGMA data_version
 * with what its connection saw after its last complete pass: if equal,
 * nobody committed since and it returns without a query. Otherwise it
 * reads the head once and pages (FEED_PAGE rows a query) up to it. Rows
 * are copied out of SQLite and the statement reset before any callback
 * runs, so no read transaction stays open across the caller's work. No
 * number below the head is missing unless its row was deleted (a rolled
 * back transaction hands its numbers out again), so a gap before the next
 * row is a prune: unless the gap holds only our own numbers, the caller
 * is told to invalidate everything, once per pass. A head below the cursor
 * means a different database file: invalidate everything too.
 *
 * Pruning (store_changes_prune) deletes rows, so it is a change like any
 * other and runs as an op on the writer thread, in sqlite.c.
 *
 * Locking: ranges_lock (struct store, store_int.h) guards ranges and
 * nranges; it is never held across a callback or a query. Everything else
 * here runs on the calling thread's own read connection.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <sqlite3.h>

#include "store_int.h"

#define FEED_PAGE 1000 /* changes read per query */

/* ---- own-change ranges -------------------------------------------------- */

#ifndef NDEBUG
uintptr_t store__thread_token(void)
{
	static _Thread_local char token;

	return (uintptr_t)&token;
}
#endif

void store__ranges_lock(struct store *st)
{
	pthread_mutex_lock(&st->ranges_lock);
#ifndef NDEBUG
	atomic_store_explicit(&st->ranges_owner, store__thread_token(),
			      memory_order_relaxed);
#endif
}

void store__ranges_unlock(struct store *st)
{
	store__assert_ranges_held(st);
#ifndef NDEBUG
	atomic_store_explicit(&st->ranges_owner, 0, memory_order_relaxed);
#endif
	pthread_mutex_unlock(&st->ranges_lock);
}

/*
 * The ranges stay ascending, disjoint and merged when adjacent; checks the
 * last two, the only ones an addition can break. ranges_lock held.
 */
static void ranges_check_tail_locked(const struct store *st)
{
#ifndef NDEBUG
	const struct seq_range *r = st->ranges;
	size_t n = st->nranges;

	assert(n <= MAX_OWN_RANGES);
	assert(n == 0 || r[n - 1].lo <= r[n - 1].hi);
	assert(n < 2 || r[n - 2].hi + 1 < r[n - 1].lo);
#else
	(void)st;
#endif
}

void store__ranges_add_locked(struct store *st, uint64_t lo, uint64_t hi)
{
	struct seq_range *last;

	store__assert_ranges_held(st);
	if (hi < lo)
		return;
	last = st->nranges ? &st->ranges[st->nranges - 1] : NULL;
	if (last && last->hi + 1 >= lo) {
		if (hi > last->hi)
			last->hi = hi;
		return;
	}
	if (st->nranges == MAX_OWN_RANGES) {
		/* forget the oldest half: they show up as outside changes */
		memmove(st->ranges, st->ranges + MAX_OWN_RANGES / 2,
			(MAX_OWN_RANGES / 2) * sizeof(*st->ranges));
		st->nranges = MAX_OWN_RANGES / 2;
	}
	st->ranges[st->nranges].lo = lo;
	st->ranges[st->nranges].hi = hi;
	st->nranges++;
	ranges_check_tail_locked(st);
}

/*
 * True if every seq of lo..hi is ours; the caller holds ranges_lock.
 * Adjacent ranges are merged, so a covered span lies in one range.
 */
static bool ranges_cover_locked(struct store *st, uint64_t lo, uint64_t hi)
{
	size_t a = 0, b = st->nranges, m;

	store__assert_ranges_held(st);
	while (a < b) { /* first range with hi >= lo */
		m = a + (b - a) / 2;
		if (st->ranges[m].hi < lo)
			a = m + 1;
		else
			b = m;
	}
	return a < st->nranges && st->ranges[a].lo <= lo &&
	       st->ranges[a].hi >= hi;
}

/* Drops the ranges at or below seq; the caller holds ranges_lock. */
static void ranges_forget_locked(struct store *st, uint64_t seq)
{
	size_t i = 0;

	store__assert_ranges_held(st);
	while (i < st->nranges && st->ranges[i].hi <= seq)
		i++;
	memmove(st->ranges, st->ranges + i,
		(st->nranges - i) * sizeof(*st->ranges));
	st->nranges -= i;
	assert(st->nranges == 0 || st->ranges[0].hi > seq);
}

static bool ranges_cover(struct store *st, uint64_t lo, uint64_t hi)
{
	bool own;

	store__ranges_lock(st);
	own = ranges_cover_locked(st, lo, hi);
	store__ranges_unlock(st);
	return own;
}

/* ---- change feed -------------------------------------------------------- */

int store__sq_changes_head(struct store *st, uint64_t *cursor)
{
	struct rconn *rc;
	sqlite3_stmt *s;
	int64_t v;
	int err;

	err = store__lost(st);
	if (err == 0)
		err = store__rstmt(st, R_HEAD, &rc, &s);
	if (err == 0)
		err = store__step_int(rc->db, s, &v);
	if (err)
		return err == -ENOENT ? -EIO : err;
	*cursor = v > 0 ? (uint64_t)v : 0;
	return 0;
}

/* One change read from the feed; region and key point into page->buf. */
struct feed_row {
	uint64_t seq;
	size_t region_off, key_off, klen;
	bool own;
	bool blob; /* region or key is a BLOB: names no file, skipped */
};

struct feed_page {
	struct feed_row rows[FEED_PAGE];
	size_t n;
	char *buf; /* NUL-terminated regions and keys */
	size_t len, cap;
};

/* One store_changes() call. */
struct feed_pass {
	store_change_fn fn;
	void *ctx;
	uint64_t head;	  /* read once: the pass ends there */
	int calls;	  /* of fn */
	bool invalidated; /* fn(NULL) was called */
	bool stop;	  /* fn returned nonzero */
};

static int page_add(struct feed_page *p, sqlite3_stmt *s)
{
	struct feed_row *r = &p->rows[p->n];
	ssize_t ro, ko;

	r->seq = store__col_u64(s, 0);
	assert(p->n == 0 || r->seq > p->rows[p->n - 1].seq); /* ORDER BY seq */
	ro = store__append(&p->buf, &p->len, &p->cap, sqlite3_column_text(s, 1),
			   sqlite3_column_bytes(s, 1));
	ko = store__append(&p->buf, &p->len, &p->cap, sqlite3_column_text(s, 2),
			   sqlite3_column_bytes(s, 2));
	if (ro < 0 || ko < 0)
		return SQLITE_NOMEM;
	r->region_off = ro;
	r->key_off = ko;
	r->klen = sqlite3_column_bytes(s, 2);
	r->blob = !sqlite3_column_int(s, 3); /* SQL_TEXT_ROW */
	p->n++;
	return SQLITE_OK;
}

/* Reads the changes after cursor up to head, one page, into p. */
static int feed_fetch(struct store *st, uint64_t cursor, uint64_t head,
		      struct feed_page *p)
{
	struct rconn *rc;
	sqlite3_stmt *s;
	size_t i;
	int err;

	p->n = p->len = 0;
	err = store__rstmt(st, R_FEED, &rc, &s);
	if (err)
		return err;
	err = sqlite3_bind_int64(s, 1, (sqlite3_int64)cursor);
	if (err == SQLITE_OK)
		err = sqlite3_bind_int64(s, 2, (sqlite3_int64)head);
	if (err == SQLITE_OK)
		err = sqlite3_bind_int(s, 3, FEED_PAGE);
	while (err == SQLITE_OK && (err = sqlite3_step(s)) == SQLITE_ROW)
		err = page_add(p, s);
	sqlite3_reset(s);
	if (err != SQLITE_DONE)
		return store__fail(st, rc->db, err, "feed", NULL, NULL, 0);
	/* our rows were recorded before we could read them: design note */
	store__ranges_lock(st);
	for (i = 0; i < p->n; i++)
		p->rows[i].own =
			ranges_cover_locked(st, p->rows[i].seq, p->rows[i].seq);
	store__ranges_unlock(st);
	return 0;
}

/*
 * Rows lo..hi are missing: pruned (or deleted by hand). Unless they were
 * all ours, fn(NULL) tells the caller to invalidate everything; once per
 * pass is enough, as every missing row predates that call.
 */
static void feed_hole(struct store *st, struct feed_pass *fp, uint64_t lo,
		      uint64_t hi)
{
	if (hi < lo || fp->invalidated || ranges_cover(st, lo, hi))
		return;
	fp->invalidated = true;
	fp->calls++;
	fp->stop = fp->fn(fp->ctx, NULL, NULL, 0) != 0;
}

/* Delivers p's outside changes and holes, advancing *cursor. */
static void feed_emit(struct store *st, struct feed_pass *fp,
		      struct feed_page *p, uint64_t *cursor)
{
	struct feed_row *r;
	size_t i;

	for (i = 0; i < p->n && !fp->stop; i++) {
		r = &p->rows[i];
		assert(r->seq > *cursor && r->seq <= fp->head);
		feed_hole(st, fp, *cursor + 1, r->seq - 1);
		*cursor = r->seq - 1;
		if (fp->stop)
			return;
		*cursor = r->seq;
		if (r->own || r->blob)
			continue;
		fp->calls++;
		fp->stop = fp->fn(fp->ctx, p->buf + r->region_off,
				  p->buf + r->key_off, r->klen) != 0;
	}
	if (p->n < FEED_PAGE && !fp->stop) { /* reached the head */
		feed_hole(st, fp, *cursor + 1, fp->head);
		*cursor = fp->head;
	}
}

/* Pages through the feed from *cursor to fp->head. */
static int feed_pass(struct store *st, struct feed_pass *fp, uint64_t *cursor)
{
	struct feed_page *p;
	int err = 0;

	if (fp->head < *cursor) { /* the feed went backwards: a new file */
		*cursor = fp->head;
		fp->invalidated = true;
		fp->calls++;
		fp->stop = fp->fn(fp->ctx, NULL, NULL, 0) != 0;
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	while (*cursor < fp->head && !fp->stop) {
		err = feed_fetch(st, *cursor, fp->head, p);
		if (err)
			break;
		feed_emit(st, fp, p, cursor);
	}
	free(p->buf);
	free(p);
	assert(err || fp->stop || *cursor == fp->head);
	return err;
}

int store__sq_changes(struct store *st, uint64_t *cursor, store_change_fn fn,
		      void *ctx)
{
	struct feed_pass fp = {.fn = fn, .ctx = ctx};
	struct rconn *rc;
	sqlite3_stmt *s;
	int64_t dv;
	int err;

	if (!fn)
		return -EINVAL;
	err = store__sq_file_lost(st) ? store__lost(st) : 0;
	if (err == 0)
		err = store__rstmt(st, R_DATA_VERSION, &rc, &s);
	if (err == 0)
		err = store__step_int(rc->db, s, &dv);
	if (err)
		return err == -ENOENT ? -EIO : err;
	if (rc->dv_valid && rc->dv == dv && *cursor >= rc->dv_head)
		return 0; /* nobody committed since our last full pass */
	rc->dv_valid = false;
	err = store__sq_changes_head(st, &fp.head);
	if (err == 0)
		err = feed_pass(st, &fp, cursor);
	if (err == 0 && !fp.stop) {
		rc->dv = dv;
		rc->dv_head = *cursor;
		rc->dv_valid = true;
	}
	store__ranges_lock(st);
	ranges_forget_locked(st, *cursor);
	store__ranges_unlock(st);
	return err ? err : fp.calls;
}
