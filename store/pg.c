/*
 * pg.c - the PostgreSQL backend of store.h: many mounts, on many hosts,
 * sharing one database that operators already run, replicate and back up.
 *
 * SOURCE is a postgresql:// URI or a libpq keyword/value string; every
 * connection is opened with it plus our settings (conn_open()): TCP
 * keepalives and tcp_user_timeout (a dead peer is noticed in seconds,
 * not after the kernel's two hours), a connect timeout, and
 * target_session_attrs=read-write, so that reads too come from the
 * primary and never from a replica that may lag. Keywords in SOURCE win
 * over our defaults, except target_session_attrs.
 *
 * Schema (pg_sql.h, doc/schema.md): schema regionfs holds kv (the rows),
 * changes (the change log, filled in the writer's own transaction: by
 * triggers for outside clients, by our writer's statements themselves,
 * which the triggers then skip) and schema_version; store_open() creates or upgrades it
 * under an advisory lock, so mounts starting together do not race.
 *
 * Connections. Reads run on a small pool of PG_READERS connections
 * (reader_get/put); a caller waits for a free one. Changes go through ONE
 * writer connection, used by one batch at a time (busy): a caller that
 * finds no batch running, nobody queued and a lone op in the last batch
 * runs its op itself, in its own thread (a lone writer then pays no
 * hand-over to a thread and back); the others queue an op and
 * sleep, and the writer thread takes the whole queue once the connection
 * is free and runs it in one transaction (group commit, as in sqlite.c),
 * then wakes them. The change feed has a
 * dedicated autocommit connection that LISTENs for doorbells and runs the
 * feed queries (feed_lock); it is never left idle in a transaction, and
 * pending notifications are drained after every query on it.
 *
 * Failures inside a batch. PostgreSQL aborts the whole transaction on any
 * error, so a failing op cannot simply be skipped as in SQLite: the batch
 * is rolled back and run again without it (the op alone gets the error).
 * Errors that concern every op (disk full, read-only, out of memory, the
 * connection) fail the whole batch; deadlocks, serialization failures and
 * lock timeouts (an outside client holding a row lock longer than
 * busy_timeout_ms, via lock_timeout) are retried with backoff until the
 * busy timeout, then fail with EAGAIN. A connection lost around COMMIT
 * leaves the outcome unknown: the ops fail with EIO (the row may or may
 * not have changed; a reader sees which) and the connection is opened
 * again, with backoff, by the next batch.
 *
 * Durability. The writer's session runs with synchronous_commit off
 * unless store_options.durable: a commit is then in the server's WAL
 * buffers, visible to every mount, and survives our crash but not the
 * server's (the analogue of SQLite's synchronous=NORMAL). A batch holding
 * a STORE_DURABLE op sets synchronous_commit on for its transaction, and
 * store_sync() commits a small transaction with it on (it takes a
 * transaction id, so it writes a commit record and waits for the WAL
 * flush, which covers every earlier commit) if anything was committed
 * asynchronously since the last such flush.
 *
 * Doorbells. After each commit that changed rows, the doorbell thread
 * rings the doorbell on a connection of its own (bell_ask() and below):
 * pg_notify in its own small transaction with synchronous_commit off,
 * payload our origin (so we ignore our own). Never inside the data
 * transaction and never from a trigger: a notifying commit holds a
 * cluster-wide lock through its WAL flush. A doorbell that fails is
 * counted (store_doorbells_failed), never turned into a write error: the
 * change log is the record, the doorbell only a hint; readers also replay
 * on a timer and after reconnecting.
 *
 * The change feed and its cursor (the reason this is not "seq > last"):
 * a sequence number is taken when a row is inserted, not when its
 * transaction commits, so a transaction holding seq 10 can commit after
 * one holding seq 11 has been read; a cursor at 11 would skip 10 for ever.
 * Instead each log row carries its transaction's id (xid8), and a
 * position is a snapshot P (pg_current_snapshot(): xmin, xmax and the ids
 * in progress): "I have seen every log row visible in P". A pass takes a
 * new snapshot S and reads the rows whose transaction S sees and P did
 * not (pg_visible_in_snapshot), then P := S. Visibility only ever grows
 * and the snapshots chain, so every committed row is delivered exactly
 * once, whatever the commit order; a transaction still running at S is
 * in S's list and is read by a later pass. The index on xid bounds the
 * scan to xid >= P.xmin. The first page's statement takes S itself (its
 * own snapshot), so a replay is one round trip, and an idle one an index
 * probe. A pass is paged by seq with S fixed, so a
 * caller that stops early resumes the same pass. Our own rows (origin =
 * this store's writer) are skipped, as our write path has handled them.
 *
 * The caller's cursor is a uint64_t (store.h), so positions live here: a
 * small ring of immutable states (P, S, seq reached) indexed by a growing
 * token, which is what the caller holds. Tokens follow the log's head
 * (max(seq)), so head - cursor estimates the backlog as with SQLite. A
 * token we no longer hold (the ring moved on, or another store's) means
 * an unknown position: the caller is told to invalidate everything, as
 * for a pruned log. Pruning deletes old log rows and raises
 * log_horizon.pruned_upto to the largest xid deleted, in one statement;
 * every page reads the horizon with its rows, and a position whose xmin
 * is at or below it may have missed a pruned row: invalidate everything.
 *
 * Locking: lock (queue, stopping, published stats; callers sleep on
 * their op's cond), bell_lock (what the doorbell thread owes; taken
 * alone), pool_lock (the reader slots), feed_lock (the feed
 * connection, the cursor ring and the lease's state), ack_lock (the count
 * of acknowledgements heard; store_wait_applied() sleeps on ack_cond).
 * Only feed_lock -> ack_lock is ever nested (draining the feed connection
 * wakes the waiters); none is held across a callback; pool_lock and
 * feed_lock are held across queries on their connection. Counters read
 * by store_stats() and the lease's end are atomics.
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "pg_sql.h"
#include "store_ops.h"

#define PG_READERS	4     /* reader connections */
#define PG_CURSORS	16    /* positions of the feed kept (the ring) */
#define PG_ACKS		64    /* mounts whose acknowledgements are kept */
#define DEFAULT_BUSY_MS 5000  /* store_options.busy_timeout_ms == 0 */
#define BACKOFF_MIN_MS	50    /* first wait before connecting again */
#define BACKOFF_MAX_MS	2000  /* longest wait */
#define PG_HINTS_MAX	4000  /* a doorbell's hints, at most (payload < 8000) */
#define PG_HINTS_HELD	65536 /* hints heard and not yet applied, at most */
#define BELL_LOOK_MS	100   /* "Nobody listening": a look's life */

enum op_kind { OP_PUT, OP_DELETE, OP_RENAME, OP_SYNC, OP_PRUNE };

/* A queued change, on its caller's stack (as in sqlite.c). */
struct op {
	enum op_kind kind;
	unsigned flags;
	const char *region;
	const void *key; /* rename: source */
	size_t klen;
	const void *key2; /* rename: target */
	size_t klen2;
	const void *data;
	size_t len;
	int64_t cutoff_ms;
	uint64_t if_version;
	struct store_meta meta; /* out (put) */
	int rc;			/* out */
	bool final; /* batch runner only: rc is settled (failed alone) */
	bool done;  /* L: lock */
	pthread_cond_t cond;
	struct op *next; /* L: lock while queued */
};

/* One connection and what was prepared on it. */
struct pconn {
	PGconn *c;	     /* NULL: not connected */
	uint32_t prepared;   /* bit i: pg_stmts[i] prepared here */
	int64_t next_try_ns; /* no connection attempt before this */
	unsigned backoff_ms; /* the next wait after a failed attempt */
	bool ever;	     /* was connected once: the next is a reconnect */
	int last_err;	     /* of the last failed attempt */
};

/* A position in the change feed: see the design note. */
struct cursor_state {
	uint64_t token; /* 0: free slot */
	char *from;	/* P: every log row visible in it was delivered */
	char *to;	/* S of a pass stopped early; NULL: none */
	uint64_t after; /* with to: rows up to this seq delivered */
};

/*
 * The latest acknowledgement heard from one mount: the snapshot it has
 * applied (the notification's payload, "origin snapshot").
 */
struct ack_entry {
	char id[40];
	char *snap; /* malloc()ed */
};

struct pg_store {
	const struct store_ops *ops; /* first: store_ops.h */

	/* immutable after open */
	char *conninfo;
	bool durable, read_only;
	unsigned busy_timeout_ms;
	store_error_fn on_error;
	void *error_ctx;
	char origin[40]; /* this store's writer: regionfs.origin */
	bool locks_ok, thread_ok;
	pthread_t writer;

	/* readers */
	pthread_mutex_t pool_lock;
	pthread_cond_t pool_free;
	struct pconn readers[PG_READERS]; /* L: pool_lock while taken */
	bool reader_busy[PG_READERS];	  /* L: pool_lock */

	/* whoever runs a batch (busy: the writer thread or a caller), and
	 * open/close */
	struct pconn w;
	bool unsynced; /* an async commit since the last WAL flush */
	struct store_stats wstats;

	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct op *queue, **tail; /* L: lock */
	unsigned nqueued;	  /* L: lock; ops on the queue */
	unsigned woke_queued;	  /* L: lock; nqueued when the last batch's
			       * callers were woken (gather_locked) */
	unsigned last_batch;	  /* L: lock; ops in the last batch */
	int64_t last_commit_ns;	  /* L: lock; how long it ran */
	bool busy;     /* L: lock; a batch runs (the connection is taken) */
	bool stopping; /* L: lock */
	struct store_stats stats; /* L: lock */

	/* the doorbell (see "Doorbells" above): its thread and connection */
	pthread_t beller;
	bool bell_thread_ok;
	struct pconn b; /* the bell thread's alone */
	pthread_mutex_t bell_lock;
	pthread_cond_t bell_cond;
	uint64_t bell_asked;	/* L: bell_lock; commits that want a bell */
	uint64_t bell_covered;	/* L: bell_lock; asked when the last bell was
				  * sent: commits up to it are rung */
	uint64_t bell_flight;	/* L: bell_lock; covered by the bell in
				  * flight on b (0: none) */
	bool bell_stop;		/* L: bell_lock */
	bool bell_nobody;	/* L: bell_lock; no other mount listened at
				* the last look ("Nobody listening") */
	bool bell_skipped;	/* L: bell_lock; commits covered without a
				* bell since the last bell */
	int64_t bell_looked_ns; /* L: bell_lock; the bell thread's last look */
	/* the names the commits not yet rung changed: the next bell's hints
	 * (" REGIONHEX:KEYHEX" each); none if they did not all fit */
	char hints[PG_HINTS_MAX + 1]; /* L: bell_lock */
	size_t hints_len;	      /* L: bell_lock */
	bool hints_over;	      /* L: bell_lock */

	/* the feed */
	pthread_mutex_t feed_lock;
	struct pconn f;	 /* L: feed_lock */
	bool listening;	 /* L: feed_lock */
	bool registered; /* L: feed_lock; our mounts row was written */
	struct cursor_state cur[PG_CURSORS]; /* L: feed_lock */
	uint64_t next_token;		     /* L: feed_lock */
	unsigned cur_next;		     /* L: feed_lock; ring slot */
	unsigned bells_pending; /* L: feed_lock; heard, not yet returned */
	char *heard;		/* L: feed_lock; others' hints, not applied */
	size_t heard_len, heard_cap; /* L: feed_lock */

	/* leases and acknowledgements: see "Leases" above */
	unsigned lease_ms, renew_ms; /* immutable */
	char host[128];		     /* immutable: for the mounts row */
	int64_t lease_sent_ns;	     /* L: feed_lock; last renewal sent */
	bool lease_ever;	     /* L: feed_lock; a renewal succeeded */
	bool resync;		     /* L: feed_lock; taken anew: the next
				      * complete pass makes us synced */
	atomic_int_fast64_t lease_end_ns; /* now_ns() our lease lasts to */
	atomic_bool synced;		  /* no lapse since the last replay */
	atomic_uint_fast64_t last_xid;	  /* our latest committed xid */
	pthread_mutex_t ack_lock;
	pthread_cond_t ack_cond; /* on CLOCK_MONOTONIC */
	uint64_t ack_seq;	 /* L: ack_lock; acknowledgements heard */
	struct ack_entry acks[PG_ACKS]; /* L: ack_lock; the latest of each */
	unsigned nacks;			/* L: ack_lock */
	uint64_t ack_unknown; /* L: ack_lock; heard without a snapshot */

	atomic_uint_fast64_t errs[STORE_ERR_NKINDS];
	atomic_uint_fast64_t bells_sent, bells_failed, bells_received,
		bells_coalesced, bells_unheard;
	atomic_uint_fast64_t passes, reconnects, queue_ppm;
	atomic_uint_fast64_t renewals, lapses, acks_waited, ack_wait_ns,
		ack_wait_max_ns, acks_timed_out;
};

#define PS(st) ((struct pg_store *)(void *)(st))

/* ---- small helpers -------------------------------------------------------- */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * The feed connection was lost: our lease is no longer counted on (hits
 * in strict regions stop) until a renewal on a new connection. The
 * renewal says whether it lapsed meanwhile on the server's clock; a
 * renewal committed asynchronously just before a server crash may be
 * lost, which this covers too (a crash always drops the connection).
 */
static void lease_drop(struct pg_store *ps)
{
	atomic_store(&ps->lease_end_ns, 0);
}

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

/* A binary int8 (or int4, bool) column; NULL reads as 0. */
static int64_t col_i64(const PGresult *r, int row, int col)
{
	const char *v = PQgetvalue(r, row, col);
	uint64_t u64;
	uint32_t u32;

	switch (PQgetisnull(r, row, col) ? 0 : PQgetlength(r, row, col)) {
	case 8:
		memcpy(&u64, v, 8);
		return (int64_t)be64toh(u64);
	case 4:
		memcpy(&u32, v, 4);
		return (int32_t)be32toh(u32);
	case 1:
		return (unsigned char)v[0];
	default:
		return 0;
	}
}

static uint64_t col_u64(const PGresult *r, int row, int col)
{
	int64_t v = col_i64(r, row, col);

	return v > 0 ? (uint64_t)v : 0;
}

static void col_meta(const PGresult *r, int row, int col, struct store_meta *m)
{
	m->size = col_u64(r, row, col);
	m->mtime_ns = col_i64(r, row, col + 1);
	m->version = col_u64(r, row, col + 2);
}

/* ---- errors ------------------------------------------------------------- */

/*
 * -errno and kind of a failed result (r may be NULL: libpq could not even
 * make one) on connection c, by SQLSTATE class; *conn_lost is set when
 * the connection is gone or must be dropped.
 */
static int pg_errno(PGconn *c, const PGresult *r, enum store_err_kind *kind,
		    bool *conn_lost)
{
	const char *s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	*conn_lost = false;
	*kind = STORE_ERR_OTHER;
	if (!c || PQstatus(c) != CONNECTION_OK || !s || !strncmp(s, "08", 2) ||
	    !strncmp(s, "57P", 3)) {
		if (c && PQstatus(c) == CONNECTION_OK && !r) {
			*kind = STORE_ERR_NOMEM; /* libpq's own malloc */
			return -ENOMEM;
		}
		*conn_lost = true;
		*kind = STORE_ERR_IO;
		return -EIO;
	}
	if (!strcmp(s, "53100")) {
		*kind = STORE_ERR_FULL;
		return -ENOSPC;
	}
	if (!strcmp(s, "40001") || !strcmp(s, "40P01") || !strcmp(s, "55P03")) {
		*kind = STORE_ERR_BUSY;
		return -EAGAIN;
	}
	if (!strcmp(s, "25006")) {
		*kind = STORE_ERR_READONLY;
		return -EROFS;
	}
	if (!strcmp(s, "53200")) {
		*kind = STORE_ERR_NOMEM;
		return -ENOMEM;
	}
	if (!strcmp(s, "42501"))
		return -EACCES;
	if (!strcmp(s, "54000"))
		return -EFBIG;
	if (!strncmp(s, "XX", 2)) {
		*kind = STORE_ERR_CORRUPT; /* data_corrupted, index_corrupted */
		return -EIO;
	}
	return -EIO;
}

static void report(struct pg_store *ps, int err, enum store_err_kind kind,
		   const char *what, const char *region, const void *key,
		   size_t klen, const char *msg)
{
	atomic_fetch_add_explicit(&ps->errs[kind], 1, memory_order_relaxed);
	if (ps->on_error)
		ps->on_error(ps->error_ctx, err, kind, what, region, key, klen,
			     msg);
}

/* The message of r, or of c: one line. */
static const char *pg_msg(PGconn *c, const PGresult *r, char *buf, size_t n)
{
	const char *m = r ? PQresultErrorMessage(r) : "";
	char *nl;

	if (!m || !*m)
		m = c ? PQerrorMessage(c) : "no connection";
	snprintf(buf, n, "%s", m && *m ? m : "unknown PostgreSQL error");
	nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	return buf;
}

/*
 * Counts and reports a failed result; drops the connection if it is
 * gone. Returns the -errno. Takes r (PQclear).
 */
static int fail(struct pg_store *ps, struct pconn *pc, PGresult *r,
		const char *what, const char *region, const void *key,
		size_t klen)
{
	enum store_err_kind kind;
	char msg[512];
	bool lost;
	int err = pg_errno(pc->c, r, &kind, &lost);

	pg_msg(pc->c, r, msg, sizeof(msg));
	PQclear(r);
	if (lost && pc->c) {
		PQfinish(pc->c);
		pc->c = NULL;
		pc->prepared = 0;
	}
	report(ps, err, kind, what, region, key, klen, msg);
	return err;
}

/* ---- connections ---------------------------------------------------------- */

enum conn_kind { CONN_READER, CONN_WRITER, CONN_FEED };

/* Runs constant SQL that returns no rows; -errno (not reported). */
static int exec_cmd(PGconn *c, const char *sql, PGresult **err_out)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;

	if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
		PQclear(r);
		return 0;
	}
	if (err_out)
		*err_out = r;
	else
		PQclear(r);
	return -EIO;
}

/* Server notices (NOTICE, WARNING) are not errors: not printed. */
static void no_notices(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* Opens one connection with SOURCE and our settings; NULL on failure. */
static PGconn *conn_open(struct pg_store *ps, char *msg, size_t n)
{
	/* ours first (SOURCE overrides them), target_session_attrs last */
	static const char *const kw[] = {
		"connect_timeout",	"keepalives",
		"keepalives_idle",	"keepalives_interval",
		"keepalives_count",	"tcp_user_timeout",
		"application_name",	"dbname",
		"target_session_attrs", NULL,
	};
	const char *val[] = {
		"5",	 "1",	     "5",	   "2",		 "3",
		"10000", "regionfs", ps->conninfo, "read-write", NULL,
	};
	PGconn *c = PQconnectdbParams(kw, val, 1);

	if (c && PQstatus(c) == CONNECTION_OK) {
		PQsetNoticeProcessor(c, no_notices, NULL);
		return c;
	}
	pg_msg(c, NULL, msg, n);
	PQfinish(c);
	return NULL;
}

/*
 * The -errno of a failed connection attempt: a server that is up but
 * read-only (a standby, or default_transaction_read_only: refused by
 * target_session_attrs=read-write) is EROFS, the rest EIO.
 */
static int conn_errno(const char *msg, enum store_err_kind *kind)
{
	if (strstr(msg, "session is read-only") || strstr(msg, "hot standby")) {
		*kind = STORE_ERR_READONLY;
		return -EROFS;
	}
	*kind = STORE_ERR_IO;
	return -EIO;
}

/*
 * A new feed connection listens: our mounts row says so (PQ_HELLO), so
 * that writers elsewhere ring for us ("Nobody listening"). A failure (a
 * role without rights on mounts) only leaves them to ring when they find
 * a lease of ours.
 */
static void feed_hello(struct pg_store *ps, PGconn *c)
{
	char pid[24];
	const char *vals[3] = {ps->origin, ps->host, pid};
	PGresult *r;

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	r = PQexecParams(c, pg_stmts[PQ_HELLO].sql, 3, NULL, vals, NULL, NULL,
			 0);
	if (r && PQresultStatus(r) == PGRES_COMMAND_OK)
		ps->registered = true;
	PQclear(r);
}

/* Per-kind session settings of a new connection. */
static int conn_setup(struct pg_store *ps, PGconn *c, enum conn_kind kind,
		      PGresult **err)
{
	char sql[256];

	/*
	 * No JIT: our statements are small, and a plan whose estimate
	 * crosses jit_above_cost (a replay over a large log) spent 13-100 ms
	 * compiling, once per replay (seen in bench_pg's latency runs).
	 */
	if (exec_cmd(c, "SET jit = off", err))
		return -EIO;

	switch (kind) {
	case CONN_WRITER:
		snprintf(sql, sizeof(sql),
			 "SET synchronous_commit = %s; "
			 "SET lock_timeout = %u; "
			 "SET regionfs.self_logged = on; "
			 "SELECT set_config('regionfs.origin', '%s', false)",
			 ps->durable ? "on" : "off", ps->busy_timeout_ms,
			 ps->origin);
		return exec_cmd(c, sql, err);
	case CONN_FEED:
		/*
		 * Generic plans, planned once per connection: planning each
		 * replay (custom plans) cost 0.45 ms of server time on the
		 * invalidation's critical path. The replays' xid condition is
		 * written as a range (pg_sql.h, PQ_FIRST) so that the generic
		 * plan scans the xid index rather than the whole log.
		 */
		if (exec_cmd(c,
			     "SET plan_cache_mode = force_generic_plan; "
			     "SET synchronous_commit = off; "
			     "LISTEN " PG_CHANNEL "; LISTEN " PG_ACK_CHANNEL,
			     err))
			return -EIO;
		feed_hello(ps, c);
		return 0;
	case CONN_READER:
		break;
	}
	return 0;
}

/*
 * Makes sure pc is connected: one attempt, unless the last failure is
 * more recent than its backoff (then -EIO at once). A failure is
 * reported once per attempt.
 */
static int conn_ensure(struct pg_store *ps, struct pconn *pc,
		       enum conn_kind kind, const char *what)
{
	PGresult *r = NULL;
	char msg[512];
	int64_t t = now_ns();
	PGconn *c;

	if (pc->c && PQstatus(pc->c) == CONNECTION_OK)
		return 0;
	if (pc == &ps->f)
		lease_drop(ps);
	if (pc->c) {
		PQfinish(pc->c);
		pc->c = NULL;
	}
	pc->prepared = 0;
	if (t < pc->next_try_ns) { /* backing off: the last attempt's */
		atomic_fetch_add_explicit(
			&ps->errs[pc->last_err == -EROFS ? STORE_ERR_READONLY
							 : STORE_ERR_IO],
			1, memory_order_relaxed);
		return pc->last_err;
	}
	c = conn_open(ps, msg, sizeof(msg));
	if (c && conn_setup(ps, c, kind, &r)) {
		pg_msg(c, r, msg, sizeof(msg));
		PQclear(r);
		PQfinish(c);
		c = NULL;
	}
	if (!c) {
		enum store_err_kind k;
		int err = conn_errno(msg, &k);

		if (!pc->backoff_ms)
			pc->backoff_ms = BACKOFF_MIN_MS;
		pc->next_try_ns = t + (int64_t)pc->backoff_ms * 1000000;
		pc->backoff_ms = pc->backoff_ms * 2 > BACKOFF_MAX_MS
					 ? BACKOFF_MAX_MS
					 : pc->backoff_ms * 2;
		pc->last_err = err;
		report(ps, err, k, what, NULL, NULL, 0, msg);
		return err;
	}
	if (pc->ever)
		atomic_fetch_add_explicit(&ps->reconnects, 1,
					  memory_order_relaxed);
	pc->ever = true;
	pc->c = c;
	pc->backoff_ms = 0;
	pc->next_try_ns = 0;
	return 0;
}

/*
 * Runs prepared statement idx on pc (preparing it first if needed), with
 * binary results. Parameters: vals/lens/fmts as PQexecPrepared. Returns
 * the result, or NULL with *err set (reported, connection dropped if
 * lost).
 */
static PGresult *run(struct pg_store *ps, struct pconn *pc, int idx,
		     const char *const *vals, const int *lens, const int *fmts,
		     const char *what, const char *region, const void *key,
		     size_t klen, int *err)
{
	const struct pg_stmt *s = &pg_stmts[idx];
	enum store_err_kind kind;
	PGresult *r;
	bool lost, retried = false;

again:
	if (!(pc->prepared & (1u << idx))) {
		r = PQprepare(pc->c, s->name, s->sql, s->nparams, NULL);
		if (!r || PQresultStatus(r) != PGRES_COMMAND_OK)
			goto failed;
		PQclear(r);
		pc->prepared |= 1u << idx;
	}
	r = PQexecPrepared(pc->c, s->name, s->nparams, vals, lens, fmts, 1);
	if (r && (PQresultStatus(r) == PGRES_TUPLES_OK ||
		  PQresultStatus(r) == PGRES_COMMAND_OK)) {
		*err = 0;
		return r;
	}
failed:
	/*
	 * Every statement run here only reads: a connection found dead (the
	 * server restarted, a connection idle past a network change) is
	 * opened again and the statement run once more, without an error.
	 */
	pg_errno(pc->c, r, &kind, &lost);
	if (lost && !retried) {
		retried = true;
		PQclear(r);
		PQfinish(pc->c);
		pc->c = NULL;
		*err = conn_ensure(
			ps, pc, pc == &ps->f ? CONN_FEED : CONN_READER, what);
		if (*err)
			return NULL;
		goto again;
	}
	*err = fail(ps, pc, r, what, region, key, klen);
	return NULL;
}

/* ---- reads ------------------------------------------------------------------ */

/* Takes a free reader slot (waiting for one) and connects it. */
static int reader_get(struct pg_store *ps, const char *what, int *slot)
{
	int i, err;

	pthread_mutex_lock(&ps->pool_lock);
	for (;;) {
		for (i = 0; i < PG_READERS; i++)
			if (!ps->reader_busy[i])
				break;
		if (i < PG_READERS)
			break;
		pthread_cond_wait(&ps->pool_free, &ps->pool_lock);
	}
	ps->reader_busy[i] = true;
	pthread_mutex_unlock(&ps->pool_lock);
	/* the slot is ours: its connection is touched without the lock */
	err = conn_ensure(ps, &ps->readers[i], CONN_READER, what);
	if (err) {
		pthread_mutex_lock(&ps->pool_lock);
		ps->reader_busy[i] = false;
		pthread_cond_signal(&ps->pool_free);
		pthread_mutex_unlock(&ps->pool_lock);
		return err;
	}
	*slot = i;
	return 0;
}

static void reader_put(struct pg_store *ps, int slot)
{
	pthread_mutex_lock(&ps->pool_lock);
	ps->reader_busy[slot] = false;
	pthread_cond_signal(&ps->pool_free);
	pthread_mutex_unlock(&ps->pool_lock);
}

/* Runs a reader statement bound to (region, key[, more]). */
static PGresult *read_rk(struct pg_store *ps, int idx, const char *what,
			 const char *region, const void *key, size_t klen,
			 int *slot, int *err)
{
	const char *vals[2] = {region, key};
	int lens[2] = {0, (int)klen}, fmts[2] = {0, 1};
	PGresult *r;

	*err = reader_get(ps, what, slot);
	if (*err)
		return NULL;
	r = run(ps, &ps->readers[*slot], idx, vals, lens, fmts, what, region,
		key, klen, err);
	if (!r)
		reader_put(ps, *slot);
	return r;
}

static int pg_load(struct store *st, const char *region, const void *key,
		   size_t klen, void **data, struct store_meta *meta)
{
	struct pg_store *ps = PS(st);
	PGresult *r;
	int slot, err;
	size_t n;

	*data = NULL;
	err = check_args(region, key, klen);
	if (err)
		return err;
	r = read_rk(ps, PQ_LOAD, "load", region, key, klen, &slot, &err);
	if (!r)
		return err;
	if (PQntuples(r) == 0) {
		err = -ENOENT;
	} else {
		n = PQgetlength(r, 0, 0);
		if (n) {
			*data = malloc(n);
			if (*data)
				memcpy(*data, PQgetvalue(r, 0, 0), n);
			else
				err = -ENOMEM;
		}
		if (err == 0 && meta) {
			meta->size = n;
			meta->mtime_ns = col_i64(r, 0, 1);
			meta->version = col_u64(r, 0, 2);
		}
	}
	PQclear(r);
	reader_put(ps, slot);
	return err;
}

static int pg_stat(struct store *st, const char *region, const void *key,
		   size_t klen, struct store_meta *meta)
{
	struct pg_store *ps = PS(st);
	PGresult *r;
	int slot, err;

	err = check_args(region, key, klen);
	if (err)
		return err;
	r = read_rk(ps, PQ_STAT, "stat", region, key, klen, &slot, &err);
	if (!r)
		return err;
	if (PQntuples(r) == 0)
		err = -ENOENT;
	else if (meta)
		col_meta(r, 0, 0, meta);
	PQclear(r);
	reader_put(ps, slot);
	return err;
}

static int pg_list_page(struct store *st, const char *region, const void *from,
			size_t flen, size_t want, struct store_list_item *items,
			size_t *n)
{
	struct pg_store *ps = PS(st);
	char lim[24];
	const char *vals[3] = {region, (const char *)from, lim};
	int lens[3] = {0, (int)flen, 0}, fmts[3] = {0, 1, 0};
	PGresult *r;
	int slot, err, i;

	*n = 0;
	snprintf(lim, sizeof(lim), "%zu", want);
	err = reader_get(ps, "list", &slot);
	if (err)
		return err;
	r = run(ps, &ps->readers[slot], PQ_LIST, vals, lens, fmts, "list",
		region, flen ? from : NULL, flen, &err);
	if (r) {
		for (i = 0; i < PQntuples(r); i++) {
			items[i].klen = PQgetlength(r, i, 0);
			if (items[i].klen >
			    STORE_MAX_KEY) { /* PG_KEY_IS_NAME */
				err = -EIO;
				break;
			}
			memcpy(items[i].key, PQgetvalue(r, i, 0),
			       items[i].klen);
			col_meta(r, i, 1, &items[i].meta);
			(*n)++;
		}
		PQclear(r);
	}
	reader_put(ps, slot);
	return err;
}

static int pg_region_usage(struct store *st, const char *region,
			   uint64_t *nkeys, uint64_t *bytes)
{
	struct pg_store *ps = PS(st);
	const char *vals[1] = {region};
	int lens[1] = {0}, fmts[1] = {0};
	PGresult *r;
	int slot, err;

	if (!region)
		return -EINVAL;
	err = reader_get(ps, "usage", &slot);
	if (err)
		return err;
	r = run(ps, &ps->readers[slot], PQ_USAGE, vals, lens, fmts, "usage",
		region, NULL, 0, &err);
	if (r) {
		*nkeys = col_u64(r, 0, 0);
		*bytes = col_u64(r, 0, 1);
		PQclear(r);
	}
	reader_put(ps, slot);
	return err;
}

/* ---- the writer ------------------------------------------------------------- */

/*
 * The outcome of one op's statement inside the batch transaction: 0 or
 * -ENOENT (the transaction goes on), or an SQL error, which aborted it
 * (*r holds the failed result for the caller to classify).
 */
static int op_put(struct pg_store *ps, struct op *op, PGresult **fr)
{
	char size[24], mt[24];
	const char *vals[5] = {op->region, op->key, op->data ? op->data : "",
			       size, mt};
	int lens[5] = {0, (int)op->klen, (int)op->len, 0, 0};
	int fmts[5] = {0, 1, 1, 0, 0};
	const struct pg_stmt *s = &pg_stmts[PQ_PUT];
	int64_t now = wall_ns();
	PGresult *r;

	snprintf(size, sizeof(size), "%zu", op->len);
	snprintf(mt, sizeof(mt), "%" PRId64, now);
	r = PQexecPrepared(ps->w.c, s->name, 5, vals, lens, fmts, 1);
	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		*fr = r;
		return -EIO;
	}
	op->meta.version = col_u64(r, 0, 0);
	op->meta.size = op->len;
	op->meta.mtime_ns = now;
	PQclear(r);
	return 0;
}

/* A statement that changes rows: -ENOENT if it changed none. */
static int exec_rows(struct pg_store *ps, int idx, const char *const *vals,
		     const int *lens, const int *fmts, PGresult **fr)
{
	const struct pg_stmt *s = &pg_stmts[idx];
	PGresult *r = PQexecPrepared(ps->w.c, s->name, s->nparams, vals, lens,
				     fmts, 1);
	int rc;

	if (!r || (PQresultStatus(r) != PGRES_COMMAND_OK &&
		   PQresultStatus(r) != PGRES_TUPLES_OK)) {
		*fr = r;
		return -EIO;
	}
	rc = atoi(PQcmdTuples(r)) > 0 ? 0 : -ENOENT;
	PQclear(r);
	return rc;
}

static int op_delete(struct pg_store *ps, struct op *op, PGresult **fr)
{
	char ver[24];
	const char *vals[3] = {op->region, op->key, ver};
	int lens[3] = {0, (int)op->klen, 0}, fmts[3] = {0, 1, 0};

	snprintf(ver, sizeof(ver), "%" PRIu64, op->if_version);
	return exec_rows(ps, op->if_version ? PQ_DELETE_VERSION : PQ_DELETE,
			 vals, lens, fmts, fr);
}

/* Version of a row, locked for the transaction; -ENOENT if absent. */
static int row_version(struct pg_store *ps, const char *region, const void *key,
		       size_t klen, int64_t *v, PGresult **fr)
{
	const char *vals[2] = {region, key};
	int lens[2] = {0, (int)klen}, fmts[2] = {0, 1};
	const struct pg_stmt *s = &pg_stmts[PQ_VERSION];
	PGresult *r = PQexecPrepared(ps->w.c, s->name, 2, vals, lens, fmts, 1);

	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
		*fr = r;
		return -EIO;
	}
	if (PQntuples(r) == 0) {
		PQclear(r);
		return -ENOENT;
	}
	*v = col_i64(r, 0, 0);
	PQclear(r);
	return 0;
}

/*
 * Moves the source row onto the target name, replacing the target, with
 * a version above both (as sqlite.c): delete the target, then rename.
 */
static int op_rename(struct pg_store *ps, struct op *op, PGresult **fr)
{
	char mt[24], ver[24];
	const char *vals[5] = {op->region, op->key, op->key2, mt, ver};
	int lens[5] = {0, (int)op->klen, (int)op->klen2, 0, 0};
	int fmts[5] = {0, 1, 1, 0, 0};
	int64_t sv, tv = 0;
	int rc;

	rc = row_version(ps, op->region, op->key, op->klen, &sv, fr);
	if (rc)
		return rc;
	if (op->klen == op->klen2 && !memcmp(op->key, op->key2, op->klen))
		return 0;
	rc = row_version(ps, op->region, op->key2, op->klen2, &tv, fr);
	if (rc == 0) {
		const char *dv[2] = {op->region, op->key2};
		int dl[2] = {0, (int)op->klen2}, df[2] = {0, 1};

		rc = exec_rows(ps, PQ_DELETE, dv, dl, df, fr);
	}
	if (rc && rc != -ENOENT)
		return rc;
	snprintf(mt, sizeof(mt), "%" PRId64, wall_ns());
	snprintf(ver, sizeof(ver), "%" PRId64, (sv > tv ? sv : tv) + 1);
	rc = exec_rows(ps, PQ_RENAME, vals, lens, fmts, fr);
	return rc == -ENOENT ? -EIO : rc; /* the source was locked above */
}

static int op_prune(struct pg_store *ps, struct op *op, PGresult **fr)
{
	char cut[24];
	const char *vals[1] = {cut};
	int lens[1] = {0}, fmts[1] = {0};
	int rc;

	snprintf(cut, sizeof(cut), "%" PRId64, op->cutoff_ms);
	rc = exec_rows(ps, PQ_PRUNE, vals, lens, fmts, fr);
	return rc == -ENOENT ? 0 : rc;
}

static int op_run(struct pg_store *ps, struct op *op, PGresult **fr)
{
	switch (op->kind) {
	case OP_PUT:
		return op_put(ps, op, fr);
	case OP_DELETE:
		return op_delete(ps, op, fr);
	case OP_RENAME:
		return op_rename(ps, op, fr);
	case OP_PRUNE:
		return op_prune(ps, op, fr);
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

static const char *op_name(const struct op *op)
{
	static const char *const names[] = {
		[OP_PUT] = "put",	[OP_DELETE] = "delete",
		[OP_RENAME] = "rename", [OP_SYNC] = "sync",
		[OP_PRUNE] = "prune",
	};

	return names[op->kind];
}

/* Prepares the writer's statements on a fresh connection. */
static int writer_prepare(struct pg_store *ps)
{
	PGresult *r;
	int k;

	/* the writer's statements: PQ_PUT to PQ_XID_DURABLE (pg_sql.h) */
	for (k = PQ_PUT; k <= PQ_XID_DURABLE; k++) {
		if (ps->w.prepared & (1u << k))
			continue;
		r = PQprepare(ps->w.c, pg_stmts[k].name, pg_stmts[k].sql,
			      pg_stmts[k].nparams, NULL);
		if (!r || PQresultStatus(r) != PGRES_COMMAND_OK)
			return fail(ps, &ps->w, r, "prepare", NULL, NULL, 0);
		PQclear(r);
		ps->w.prepared |= 1u << k;
	}
	return 0;
}

/*
 * Connects the writer, retrying with backoff until deadline (the busy
 * timeout of the batch): a server restart or a failover should cost the
 * writers a wait, not an error.
 */
static int writer_connect(struct pg_store *ps, int64_t deadline)
{
	int64_t t;
	int err;

	/*
	 * A connection the server closed while it was idle (a restart, an
	 * administrator's pg_terminate_backend) has sent its FATAL message
	 * and EOF already: read them now, without a round trip, so that the
	 * batch goes to a new connection rather than failing with an unknown
	 * outcome (the whole batch, COMMIT included, is sent at once).
	 */
	if (ps->w.c &&
	    (!PQconsumeInput(ps->w.c) || PQstatus(ps->w.c) != CONNECTION_OK)) {
		PQfinish(ps->w.c);
		ps->w.c = NULL;
		ps->w.prepared = 0;
	}
	for (;;) {
		err = conn_ensure(ps, &ps->w, CONN_WRITER, "connect");
		if (err == 0)
			err = writer_prepare(ps);
		if (err == 0)
			return 0;
		t = now_ns();
		if (t >= deadline)
			return err;
		if (ps->w.next_try_ns > t)
			sleep_ms((unsigned)((ps->w.next_try_ns - t) / 1000000) +
				 1);
	}
}

/*
 * The doorbell (see "Doorbells" above). A commit that changed rows asks
 * for one (bell_ask(), before its callers are woken); the bell thread
 * rings it on a connection of its own, so the writer's connection goes
 * on with the next batch while the server runs the bell beside it (on
 * the writer's connection, behind the commit, it cost each lone write
 * the bell's transaction: tests/pg/run_bench_pg.sh, ratio_w1). At most
 * one bell is in flight: the commits that ask meanwhile are covered by
 * the next, sent as soon as it returns (store_doorbells_coalesced counts
 * the commits that got no bell of their own). So a commit's bell leaves
 * at most one bell's round trip after it, and back-to-back commits cost
 * one bell per round trip, not one each. A strict write does not wait
 * for the bell in flight: bell_hurry().
 *
 * Hints. A bell's payload is our origin, then the names its commits
 * changed, " REGIONHEX:KEYHEX" each (hex: a payload is text in the
 * server's encoding, and keys are any bytes), if they fit in
 * PG_HINTS_MAX; else the origin alone. A mount that hears one
 * invalidates those names at the start of its next pass, before the
 * pass's query (hints_apply()), so its readers see the change a round
 * trip to the server sooner; the pass then reads the log as always (the
 * record: a hint is only an early invalidation, of names whose commit is
 * done, since the bell leaves after it).
 */

static const char hexd[] = "0123456789abcdef";

/* Appends " REGIONHEX:KEYHEX" to the next bell's hints. L: bell_lock */
static void hint_add_locked(struct pg_store *ps, const char *region,
			    const void *key, size_t klen)
{
	size_t rlen = strlen(region), i;
	const unsigned char *k = key;
	char *o;

	if (ps->hints_over ||
	    ps->hints_len + 2 + 2 * (rlen + klen) > PG_HINTS_MAX) {
		ps->hints_over = true;
		return;
	}
	o = ps->hints + ps->hints_len;
	*o++ = ' ';
	for (i = 0; i < rlen; i++) {
		*o++ = hexd[(unsigned char)region[i] >> 4];
		*o++ = hexd[(unsigned char)region[i] & 15];
	}
	*o++ = ':';
	for (i = 0; i < klen; i++) {
		*o++ = hexd[k[i] >> 4];
		*o++ = hexd[k[i] & 15];
	}
	ps->hints_len = (size_t)(o - ps->hints);
}

/*
 * The payload of the bell that leaves now (out: sizeof origin +
 * PG_HINTS_MAX + 1), which takes the hints. L: bell_lock
 */
static void bell_payload_locked(struct pg_store *ps, char *out)
{
	size_t n = strlen(ps->origin);

	memcpy(out, ps->origin, n);
	if (!ps->hints_over) {
		memcpy(out + n, ps->hints, ps->hints_len);
		n += ps->hints_len;
	}
	out[n] = '\0';
	ps->hints_len = 0;
	ps->hints_over = false;
}

#define BELL_PAYLOAD_MAX                                                       \
	(sizeof(((struct pg_store *)0)->origin) + PG_HINTS_MAX + 1)

/*
 * A commit of batch that changed rows: ring for it, naming them. While
 * nobody listens (the bell thread's look, younger than BELL_LOOK_MS) and
 * no commit waits for the thread, the commit is covered here without a
 * bell, as the thread would cover it, and the thread is not woken: the
 * wake-up and its hand-over cost a lone writer more of its CPU (two
 * cores shared with the server) than the rest of its client work
 * (bench_pg cost: 3 futex calls per write and a context switch).
 */
static void bell_ask(struct pg_store *ps, const struct op *batch)
{
	const struct op *op;

	pthread_mutex_lock(&ps->bell_lock);
	ps->bell_asked++;
	if (ps->bell_nobody && !ps->bell_flight &&
	    ps->bell_asked == ps->bell_covered + 1 &&
	    now_ns() - ps->bell_looked_ns <= (int64_t)BELL_LOOK_MS * 1000000) {
		atomic_fetch_add_explicit(&ps->bells_unheard, 1,
					  memory_order_relaxed);
		ps->bell_covered = ps->bell_asked;
		ps->bell_skipped = true;
		ps->hints_len = 0;
		ps->hints_over = false;
		pthread_mutex_unlock(&ps->bell_lock);
		return;
	}
	for (op = batch; op; op = op->next) {
		if (!op_changes_kv(op) || op->rc != 0)
			continue;
		hint_add_locked(ps, op->region, op->key, op->klen);
		if (op->kind == OP_RENAME)
			hint_add_locked(ps, op->region, op->key2, op->klen2);
	}
	if (!ps->bell_flight) /* else the thread looks when it returns */
		pthread_cond_signal(&ps->bell_cond);
	pthread_mutex_unlock(&ps->bell_lock);
}

/* A bell for the commits up to upto leaves: counted. L: bell_lock */
static void bell_leaves_locked(struct pg_store *ps, uint64_t upto)
{
	atomic_fetch_add_explicit(&ps->bells_sent, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&ps->bells_coalesced,
				  upto - ps->bell_covered - 1,
				  memory_order_relaxed);
	ps->bell_covered = upto;
}

/*
 * Rings on pc (connected) with payload: PQ_BELL, a transaction of its own. False if
 * it failed (counted by the caller, never a write error); a lost
 * connection is dropped.
 */
static bool bell_ring(struct pconn *pc, const char *payload)
{
	const struct pg_stmt *s = &pg_stmts[PQ_BELL];
	const char *bv[1] = {payload};
	PGresult *r;
	bool ok = true;

	if (!(pc->prepared & (1u << PQ_BELL))) {
		r = PQprepare(pc->c, s->name, s->sql, s->nparams, NULL);
		ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
		PQclear(r);
		if (ok)
			pc->prepared |= 1u << PQ_BELL;
	}
	if (ok) {
		r = PQexecPrepared(pc->c, s->name, 1, bv, NULL, NULL, 0);
		ok = r && PQresultStatus(r) == PGRES_TUPLES_OK;
		PQclear(r);
	}
	if (!ok && PQstatus(pc->c) != CONNECTION_OK) {
		PQfinish(pc->c);
		pc->c = NULL;
		pc->prepared = 0;
	}
	return ok;
}

/*
 * The bell thread's ring, on its connection: one found lost on the way
 * (a server restart, an administrator's pg_terminate_backend while it
 * was idle) is opened again and the bell rung once more (a bell twice is
 * harmless).
 */
static bool bell_send(struct pg_store *ps, const char *payload)
{
	struct pconn *pc = &ps->b;
	int tries;

	for (tries = 0; tries < 2; tries++) {
		if (conn_ensure(ps, pc, CONN_READER, "doorbell"))
			return false;
		if (bell_ring(pc, payload))
			return true;
		if (pc->c)
			return false; /* failed, not the connection */
	}
	return false;
}

/*
 * Nobody listening. A bell costs a transaction on the server and a round
 * trip on the bell thread's connection, as much CPU as the write itself
 * (bench_pg writes, 1 writer: 50-70 us of the server's and 30-50 us of
 * ours per write); a mount alone on its database rings for nobody. So
 * the bell thread looks whether another mount listens (PQ_OTHERS: a row
 * in regionfs.mounts renewed or registered within 60 s; a feed
 * connection registers when it starts to LISTEN, feed_hello()), at most
 * every BELL_LOOK_MS while commits ask, after the bell when there is
 * someone (the look is off the bell's path) and before deciding when
 * there was nobody. While nobody listens, commits are covered without a
 * bell (store_doorbells_unheard): by bell_ask() itself while the last
 * look is fresh, without waking the thread. A mount that starts
 * meanwhile is rung for within BELL_LOOK_MS, and replays every 250 ms
 * anyway (the bound of a lost bell); a strict write that finds a mount
 * to wait for rings at once (bell_hurry()).
 *
 * bell_look(): does another mount listen? Yes when we cannot tell.
 */
static bool bell_look(struct pg_store *ps)
{
	const struct pg_stmt *s = &pg_stmts[PQ_OTHERS];
	const char *vals[1] = {ps->origin};
	struct pconn *pc = &ps->b;
	PGresult *r;
	bool others = true;

	if (conn_ensure(ps, pc, CONN_READER, "doorbell"))
		return true;
	if (!(pc->prepared & (1u << PQ_OTHERS))) {
		r = PQprepare(pc->c, s->name, s->sql, s->nparams, NULL);
		if (r && PQresultStatus(r) == PGRES_COMMAND_OK)
			pc->prepared |= 1u << PQ_OTHERS;
		PQclear(r);
	}
	r = PQexecPrepared(pc->c, s->name, 1, vals, NULL, NULL, 0);
	if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		others = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	return others;
}

/* The bell thread's look at now_ns() t found others (or not). L: bell_lock */
static void bell_looked_locked(struct pg_store *ps, int64_t t, bool others)
{
	ps->bell_looked_ns = t;
	ps->bell_nobody = !others;
}

/* Rings while commits ask; at close, once more for those not rung. */
static void *bell_main(void *arg)
{
	struct pg_store *ps = arg;
	char payload[BELL_PAYLOAD_MAX];
	uint64_t upto;
	int64_t t;
	bool ok, stale, others = true;

	pthread_mutex_lock(&ps->bell_lock);
	for (;;) {
		while (ps->bell_asked == ps->bell_covered && !ps->bell_stop)
			pthread_cond_wait(&ps->bell_cond, &ps->bell_lock);
		if (ps->bell_asked == ps->bell_covered)
			break; /* stopping, every commit rung */
		stale = now_ns() - ps->bell_looked_ns >
			(int64_t)BELL_LOOK_MS * 1000000;
		if (ps->bell_nobody && stale) {
			pthread_mutex_unlock(&ps->bell_lock);
			t = now_ns();
			others = bell_look(ps);
			pthread_mutex_lock(&ps->bell_lock);
			/* bell_hurry() may have found someone meanwhile */
			bell_looked_locked(ps, t, others || !ps->bell_nobody);
			continue; /* decide with it */
		}
		upto = ps->bell_asked;
		if (ps->bell_nobody) {
			atomic_fetch_add_explicit(&ps->bells_unheard,
						  upto - ps->bell_covered,
						  memory_order_relaxed);
			ps->bell_covered = upto;
			ps->bell_skipped = true;
			bell_payload_locked(ps, payload); /* drops the hints */
			continue;
		}
		bell_leaves_locked(ps, upto);
		bell_payload_locked(ps, payload);
		ps->bell_flight = upto;
		ps->bell_skipped = false;
		pthread_mutex_unlock(&ps->bell_lock);
		ok = bell_send(ps, payload);
		t = now_ns();
		if (stale)
			others = bell_look(ps);
		pthread_mutex_lock(&ps->bell_lock);
		ps->bell_flight = 0;
		if (stale)
			bell_looked_locked(ps, t, others);
		if (!ok)
			atomic_fetch_add_explicit(&ps->bells_failed, 1,
						  memory_order_relaxed);
	}
	pthread_mutex_unlock(&ps->bell_lock);
	return NULL;
}

/*
 * Before a strict write waits for acknowledgements: if commits wait for
 * a bell behind the one in flight (ours may be among them), they are
 * rung now, on a reader, rather than when that bell returns. With
 * others (the write found mounts to wait for): someone listens, so
 * commits covered without a bell are rung now too, and the next are.
 */
static void bell_hurry(struct pg_store *ps, bool others)
{
	char payload[BELL_PAYLOAD_MAX];
	uint64_t upto;
	bool ok = false;
	int slot;

	pthread_mutex_lock(&ps->bell_lock);
	upto = ps->bell_asked;
	if (others)
		ps->bell_nobody = false;
	if (others && ps->bell_skipped && upto == ps->bell_covered) {
		atomic_fetch_add_explicit(&ps->bells_sent, 1,
					  memory_order_relaxed);
		ps->bell_skipped = false;
		bell_payload_locked(ps, payload);
		goto ring;
	}
	if (!ps->bell_flight || upto == ps->bell_covered) {
		pthread_mutex_unlock(&ps->bell_lock);
		return; /* rung, or the thread rings it now */
	}
	bell_leaves_locked(ps, upto);
	bell_payload_locked(ps, payload);
ring:
	pthread_mutex_unlock(&ps->bell_lock);
	if (reader_get(ps, "doorbell", &slot) == 0) {
		ok = bell_ring(&ps->readers[slot], payload);
		reader_put(ps, slot);
	}
	if (!ok)
		atomic_fetch_add_explicit(&ps->bells_failed, 1,
					  memory_order_relaxed);
}

/* What a batch holds. */
struct batch_info {
	unsigned nchanges, nwrites;
	bool durable;
};

static void batch_scan(struct op *batch, struct batch_info *bi)
{
	struct op *op;

	memset(bi, 0, sizeof(*bi));
	for (op = batch; op; op = op->next) {
		bi->nchanges += op_changes_kv(op);
		bi->nwrites += op->kind != OP_SYNC;
		bi->durable |=
			op->kind == OP_SYNC || (op->flags & STORE_DURABLE);
	}
}

/* Every op not yet settled gets err. */
static void batch_fail(struct op *batch, int err)
{
	struct op *op;

	for (op = batch; op; op = op->next) {
		if (!op->final) {
			op->rc = err;
			op->final = true;
		}
	}
}

/* The transaction id in column col of a one-row result, as text
 * (pg_current_xact_id()::text; libpq ends a binary value with a NUL too). */
static uint64_t xid_of(const PGresult *r, int col)
{
	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 ||
	    PQnfields(r) <= col)
		return 0;
	return strtoull(PQgetvalue(r, 0, col), NULL, 10);
}

/* Our writer committed transaction xid: store_wait_applied() waits for it. */
static void xid_committed(struct pg_store *ps, uint64_t xid)
{
	uint64_t cur = atomic_load(&ps->last_xid);

	while (xid > cur &&
	       !atomic_compare_exchange_weak(&ps->last_xid, &cur, xid))
		;
}

/*
 * The batch's first statement: its transaction's id, and for a durable
 * batch of a session that commits asynchronously a synchronous commit of
 * this transaction (PQ_XID_DURABLE).
 */
static int xid_stmt(const struct pg_store *ps, bool durable)
{
	return durable && !ps->durable ? PQ_XID_DURABLE : PQ_XID;
}

/*
 * One attempt: BEGIN, every unsettled op, COMMIT. Returns 0 (committed),
 * or -errno with *fr the failed result and *failed the op that failed
 * (NULL: BEGIN or COMMIT); *at_commit once COMMIT was sent, after which
 * a lost connection leaves the outcome unknown.
 */
/* ---- the pipelined batch ---- */

/* The parameters of a put's or a delete's statement. */
struct op_params {
	int idx, n;
	const char *vals[5];
	int lens[5], fmts[5];
	char a[24], b[24];
};

static void op_params(const struct op *op, struct op_params *p, int64_t now)
{
	memset(p, 0, sizeof(*p));
	p->vals[0] = op->region;
	p->vals[1] = op->key;
	p->lens[1] = (int)op->klen;
	p->fmts[1] = 1;
	if (op->kind == OP_PUT) {
		p->idx = PQ_PUT;
		p->n = 5;
		snprintf(p->a, sizeof(p->a), "%zu", op->len);
		snprintf(p->b, sizeof(p->b), "%" PRId64, now);
		p->vals[2] = op->data ? op->data : "";
		p->lens[2] = (int)op->len;
		p->fmts[2] = 1;
		p->vals[3] = p->a;
		p->vals[4] = p->b;
	} else if (op->if_version) {
		p->idx = PQ_DELETE_VERSION;
		p->n = 3;
		snprintf(p->a, sizeof(p->a), "%" PRIu64, op->if_version);
		p->vals[2] = p->a;
	} else {
		p->idx = PQ_DELETE;
		p->n = 2;
	}
}

/* Can the batch's unsettled ops be pipelined (no op needs a result to
 * build its next statement)? */
static bool pipe_ok(const struct op *batch)
{
	const struct op *op;

	for (op = batch; op; op = op->next)
		if (!op->final && op->kind != OP_PUT && op->kind != OP_DELETE)
			return false;
	return true;
}

/*
 * The result of the next query of the pipeline (NULL: the connection
 * failed); consumes the NULL that ends it.
 */
static PGresult *pipe_result(PGconn *c)
{
	PGresult *r = PQgetResult(c), *extra;

	if (!r)
		return NULL;
	while ((extra = PQgetResult(c))) /* the end of this query */
		PQclear(extra);
	return r;
}

/*
 * Reads results up to the next pipeline sync: true at the sync, false
 * when the connection broke first; *err takes the first error result on
 * the way (the caller's to clear), others are dropped.
 */
static bool pipe_to_sync(PGconn *c, PGresult **err)
{
	PGresult *r;

	while (PQstatus(c) == CONNECTION_OK) {
		r = PQgetResult(c);
		if (!r)
			continue;
		if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			return true;
		}
		if (PQresultStatus(r) == PGRES_FATAL_ERROR && err && !*err)
			*err = r;
		else
			PQclear(r);
	}
	return false;
}

/*
 * The batch sent at once (libpq pipeline mode), then its results read in
 * order: one round trip per batch. One implicit transaction, ended by a
 * pipeline sync, which commits it: PQ_XID or PQ_XID_DURABLE, then every
 * op; a lone put returns the xid itself (PQ_PUT_XID or
 * PQ_PUT_XID_DURABLE, no PQ_XID), so it is one statement, where
 * BEGIN, SET LOCAL, the xid, the op and COMMIT were five (measured with
 * 1 writer: tests/pg/run_bench_pg.sh, ratio_w1). An error skips the rest
 * of the transaction, and an error reported at the sync is a failed
 * commit (nothing stored). writer_connect() first reads what a connection
 * closed while idle left, so a restart costs a reconnect, not an unknown
 * outcome. Same contract as batch_attempt().
 */
static int batch_pipe(struct pg_store *ps, struct op *batch,
		      const struct batch_info *bi, PGresult **fr,
		      struct op **failed, bool *at_commit)
{
	int first = xid_stmt(ps, bi->durable);
	PGconn *c = ps->w.c;
	bool synced = false, sent = true;
	uint64_t xid = 0;
	struct op_params p;
	int64_t now = wall_ns();
	struct op *op, *fold;
	PGresult *r;

	for (fold = batch; fold && fold->final; fold = fold->next)
		;
	for (op = fold ? fold->next : NULL; op && op->final; op = op->next)
		;
	/*
	 * Only a lone put returns the xid: its RETURNING runs only for a row
	 * it wrote, so a put that an outside BEFORE trigger suppressed would
	 * leave the batch's other ops without their xid (strict acks) and a
	 * durable batch without its synchronous commit. A lone put that
	 * wrote nothing needs neither.
	 */
	if (fold && (fold->kind != OP_PUT || op))
		fold = NULL; /* the xid from a statement of its own */
	if (!PQenterPipelineMode(c))
		return -EAGAIN; /* the caller goes on without the pipeline */
	if (!fold)
		sent = PQsendQueryPrepared(c, pg_stmts[first].name, 0, NULL,
					   NULL, NULL, 0) == 1;
	for (op = batch; op && sent; op = op->next) {
		if (op->final)
			continue;
		op_params(op, &p, now);
		if (op == fold)
			p.idx = first == PQ_XID ? PQ_PUT_XID
						: PQ_PUT_XID_DURABLE;
		op->meta.mtime_ns = now;
		sent = PQsendQueryPrepared(c, pg_stmts[p.idx].name, p.n, p.vals,
					   p.lens, p.fmts, 1) == 1;
	}
	sent = sent && PQpipelineSync(c) == 1;
	*at_commit = true;
	if (!sent) { /* the connection broke while sending */
		*fr = NULL;
		return -EIO;
	}
	r = fold ? NULL : pipe_result(c); /* the xid */
	if (!fold && (!r || PQresultStatus(r) != PGRES_TUPLES_OK)) {
		*at_commit = !r; /* a lost connection: unknown */
		*fr = r;
		goto drain;
	}
	if (!fold)
		xid = xid_of(r, 0);
	PQclear(r);
	for (op = batch; op; op = op->next) {
		if (op->final)
			continue;
		r = pipe_result(c);
		if (!r || (PQresultStatus(r) != PGRES_TUPLES_OK &&
			   PQresultStatus(r) != PGRES_COMMAND_OK)) {
			*failed = r && PQresultStatus(r) == PGRES_FATAL_ERROR
					  ? op
					  : NULL;
			*at_commit = !*failed; /* an op failed: no commit */
			*fr = r;
			goto drain;
		}
		if (op == fold)
			xid = xid_of(r, 1);
		if (op->kind == OP_PUT) {
			op->meta.version = col_u64(r, 0, 0);
			op->meta.size = op->len;
			op->rc = 0;
		} else {
			op->rc = atoi(PQcmdTuples(r)) > 0 ? 0 : -ENOENT;
		}
		PQclear(r);
	}
	/* the commit: the sync, or an error before it (nothing stored) */
	synced = pipe_to_sync(c, fr);
	if (!synced || *fr)
		goto drain;
	PQexitPipelineMode(c);
	xid_committed(ps, xid);
	return 0;
drain:
	/* skip to the sync; a broken connection ends it early */
	if (!synced)
		pipe_to_sync(c, NULL);
	if (PQstatus(c) == CONNECTION_OK)
		PQexitPipelineMode(c);
	return -EIO;
}

static int batch_attempt(struct pg_store *ps, struct op *batch,
			 const struct batch_info *bi, PGresult **fr,
			 struct op **failed, bool *at_commit)
{
	bool durable = bi->durable;
	uint64_t xid;
	struct op *op;
	PGresult *xr;
	int rc;

	*failed = NULL;
	*fr = NULL;
	*at_commit = false;
	if (pipe_ok(batch)) {
		rc = batch_pipe(ps, batch, bi, fr, failed, at_commit);
		if (rc != -EAGAIN)
			return rc;
	}
	if (exec_cmd(ps->w.c, "BEGIN", fr))
		return -EIO;
	/* the pipeline's first statement (a synchronous commit with it) */
	xr = PQexecPrepared(ps->w.c, pg_stmts[xid_stmt(ps, durable)].name, 0,
			    NULL, NULL, NULL, 0);
	xid = xid_of(xr, 0);
	if (!xid) {
		*fr = xr;
		PQclear(PQexec(ps->w.c, "ROLLBACK"));
		return -EIO;
	}
	PQclear(xr);
	for (op = batch; op; op = op->next) {
		if (op->final)
			continue;
		rc = op_run(ps, op, fr);
		if (*fr) {
			*failed = op;
			PQclear(PQexec(ps->w.c, "ROLLBACK"));
			return rc;
		}
		op->rc = rc;
	}
	*at_commit = true;
	if (exec_cmd(ps->w.c, "COMMIT", fr))
		return -EIO;
	xid_committed(ps, xid);
	return 0;
}

/* After a commit: every op settled, the counters. */
static void batch_account(struct pg_store *ps, struct op *batch,
			  const struct batch_info *bi, int64_t commit_ns)
{
	struct op *op;

	ps->wstats.commits++;
	ps->wstats.commit_ns += commit_ns;
	if (bi->nchanges > ps->wstats.max_batch)
		ps->wstats.max_batch = bi->nchanges;
	for (op = batch; op; op = op->next) {
		op->final = true;
		if (!op_changes_kv(op))
			continue;
		if (op->rc == 0)
			ps->wstats.rows++;
		else if (op->rc != -ENOENT)
			ps->wstats.errors++;
	}
}

/* Flushes the WAL if an async commit is not yet durable (store_sync). */
static int wal_flush(struct pg_store *ps)
{
	PGresult *r = NULL;

	if (!ps->unsynced)
		return 0;
	if (exec_cmd(ps->w.c,
		     "BEGIN; SET LOCAL synchronous_commit = on; "
		     "SELECT pg_current_xact_id(); COMMIT",
		     &r)) {
		if (PQtransactionStatus(ps->w.c) == PQTRANS_INERROR)
			PQclear(PQexec(ps->w.c, "ROLLBACK"));
		return fail(ps, &ps->w, r, "sync", NULL, NULL, 0);
	}
	ps->unsynced = false;
	return 0;
}

/* The whole life of one batch; settles every op. */
static void batch_run(struct pg_store *ps, struct op *batch)
{
	int64_t deadline = now_ns() + (int64_t)ps->busy_timeout_ms * 1000000,
		t0;
	enum store_err_kind kind;
	struct batch_info bi;
	unsigned tries = 0;
	struct op *op, *failed;
	PGresult *fr;
	char msg[512];
	bool lost, at_commit;
	int err;

	batch_scan(batch, &bi);
	for (op = batch; op; op = op->next) {
		op->final = false;
		op->rc = 0;
	}
	err = writer_connect(ps, deadline);
	if (err) {
		batch_fail(batch, err);
		return;
	}
	if (!bi.nwrites) { /* syncs only */
		batch_fail(batch, wal_flush(ps));
		return;
	}
	for (;;) {
		t0 = now_ns();
		err = batch_attempt(ps, batch, &bi, &fr, &failed, &at_commit);
		if (err == 0) {
			batch_account(ps, batch, &bi, now_ns() - t0);
			ps->unsynced = !(bi.durable || ps->durable);
			if (bi.nchanges)
				bell_ask(ps, batch); /* before callers wake */
			return;
		}
		err = pg_errno(ps->w.c, fr, &kind, &lost);
		pg_msg(ps->w.c, fr, msg, sizeof(msg));
		PQclear(fr);
		if (lost) {
			PQfinish(ps->w.c);
			ps->w.c = NULL;
			ps->w.prepared = 0;
			/* before COMMIT nothing of the batch is stored: run it
			 * again on a new connection (a server restart, or a
			 * connection that died while idle); after COMMIT the
			 * outcome is unknown and the ops fail with EIO */
			if (!at_commit && now_ns() < deadline) {
				err = writer_connect(ps, deadline);
				if (err == 0) {
					tries++;
					continue;
				}
				for (op = batch; op; op = op->next)
					if (!op->final && op_changes_kv(op))
						ps->wstats.errors++;
				batch_fail(batch, err); /* reported */
				return;
			}
		}
		if (kind == STORE_ERR_BUSY && now_ns() < deadline) {
			ps->wstats.busy_retries++;
			sleep_ms(1u << (tries < 4 ? tries : 4));
			tries++;
			continue;
		}
		if (failed && kind == STORE_ERR_OTHER) {
			/* this op alone: the others run again without it */
			failed->rc = err;
			failed->final = true;
			if (op_changes_kv(failed))
				ps->wstats.errors++;
			report(ps, err, kind, op_name(failed), failed->region,
			       failed->key, failed->klen, msg);
			continue;
		}
		/* logged once for the batch, counted for each change in it
		 * (as sqlite.c does) */
		report(ps, err, kind, batch->next ? "commit" : op_name(batch),
		       batch->region, batch->key, batch->klen, msg);
		for (op = batch; op; op = op->next) {
			if (op->final || !op_changes_kv(op))
				continue;
			ps->wstats.errors++;
			if (op != batch)
				atomic_fetch_add_explicit(&ps->errs[kind], 1,
							  memory_order_relaxed);
		}
		batch_fail(batch, err);
		return;
	}
}

/*
 * Before taking a queue that already holds ops: waits a little for the
 * callers of the batch just committed, who (writers in a loop) come back
 * at once. Without it, N writers split into two halves for good, one
 * queueing while the other commits: N/2 rows per commit, where raw
 * connections share the server's WAL flushes. It waits until the queue
 * holds the ops that were there when the last batch's callers were woken
 * (woke_queued) plus one per caller of that batch (prev), so a lone
 * writer, already back, waits for nothing (wanting one more op than that,
 * as before, made every batch of a lone writer wait the whole delay,
 * since its callers wake at COMMIT's reply and are back before the
 * writer looks). At most GATHER_MAX_NS, and a quarter of the last
 * commit's time. The same idea as PostgreSQL's commit_delay. L: lock.
 */
#define GATHER_MAX_NS 1000000

static void gather_locked(struct pg_store *ps)
{
	int64_t commit_ns = ps->last_commit_ns;
	int64_t wait =
		commit_ns / 4 < GATHER_MAX_NS ? commit_ns / 4 : GATHER_MAX_NS;
	unsigned prev = ps->last_batch, want = ps->woke_queued + prev;
	struct timespec ts;
	int64_t end;

	if (!prev || ps->nqueued >= want || wait <= 0)
		return;
	end = now_ns() + wait;
	ts.tv_sec = end / 1000000000;
	ts.tv_nsec = end % 1000000000;
	while (ps->nqueued < want && !ps->stopping)
		if (pthread_cond_timedwait(&ps->wake, &ps->lock, &ts) ==
		    ETIMEDOUT)
			break;
}

/*
 * Runs batch (the caller set busy) and settles it: its ops are done and
 * their callers woken, and the connection is free again. L: lock,
 * released while the batch runs.
 */
static void run_locked(struct pg_store *ps, struct op *batch, unsigned n)
{
	struct op *op, *next;
	int64_t t0;

	pthread_mutex_unlock(&ps->lock);
	t0 = now_ns();
	batch_run(ps, batch);
	pthread_mutex_lock(&ps->lock);
	ps->last_batch = n;
	ps->last_commit_ns = now_ns() - t0;
	ps->stats = ps->wstats;
	ps->woke_queued = ps->nqueued;
	for (op = batch; op; op = next) {
		next = op->next; /* op dies once its caller wakes */
		op->done = true;
		pthread_cond_signal(&op->cond);
	}
	ps->busy = false;
}

/* Runs the queue whenever the connection is free; ends at close. */
static void *writer_main(void *arg)
{
	struct pg_store *ps = arg;
	struct op *batch;
	unsigned n;
	bool came;

	pthread_mutex_lock(&ps->lock);
	for (;;) {
		/* ops that came while a batch ran (ours or a caller's) */
		came = ps->queue != NULL;
		while ((!ps->queue || ps->busy) && !(ps->stopping && !ps->busy))
			pthread_cond_wait(&ps->wake, &ps->lock);
		if (!ps->queue)
			break; /* stopping, and nothing left */
		if (came)
			gather_locked(ps);
		batch = ps->queue;
		n = ps->nqueued;
		ps->queue = NULL;
		ps->tail = &ps->queue;
		ps->nqueued = 0;
		ps->busy = true;
		run_locked(ps, batch, n);
	}
	pthread_mutex_unlock(&ps->lock);
	return NULL;
}

static int submit(struct pg_store *ps, struct op *op)
{
	int rc;

	op->done = false;
	op->next = NULL;
	op->rc = 0;
	if (ps->read_only)
		return op->kind == OP_SYNC || op->kind == OP_PRUNE ? 0 : -EROFS;
	if (pthread_cond_init(&op->cond, NULL))
		return -ENOMEM;
	pthread_mutex_lock(&ps->lock);
	if (ps->stopping) {
		rc = -ESHUTDOWN;
		goto out;
	}
	if (!ps->busy && !ps->queue && ps->last_batch <= 1) {
		/*
		 * Nobody commits, nobody waits, and the last batch was a lone
		 * op: a batch of one, run here. After a larger batch its
		 * callers are coming back: queue, and the writer gathers them
		 * into one batch again (a fast path taken then split N looping
		 * writers into a lone op and the rest: 2.7 rows per commit at
		 * 4 writers instead of 3.5).
		 */
		ps->busy = true;
		run_locked(ps, op, 1);
		if (ps->queue || ps->stopping) /* they came meanwhile */
			pthread_cond_signal(&ps->wake);
		rc = op->rc;
		goto out;
	}
	*ps->tail = op;
	ps->tail = &op->next;
	ps->nqueued++;
	pthread_cond_signal(&ps->wake);
	while (!op->done)
		pthread_cond_wait(&op->cond, &ps->lock);
	rc = op->rc;
out:
	pthread_mutex_unlock(&ps->lock);
	pthread_cond_destroy(&op->cond);
	return rc;
}

static int pg_put(struct store *st, const char *region, const void *key,
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
	if (rc == 0 &&
	    ((flags & ~STORE_DURABLE) || (len && !data) || len > INT_MAX))
		rc = len > INT_MAX ? -EFBIG : -EINVAL;
	if (rc == 0)
		rc = submit(PS(st), &op);
	if (rc == 0 && meta)
		*meta = op.meta;
	return rc;
}

static int pg_delete(struct store *st, const char *region, const void *key,
		     size_t klen, unsigned flags)
{
	struct op op = {.kind = OP_DELETE,
			.flags = flags,
			.region = region,
			.key = key,
			.klen = klen};
	int rc = check_args(region, key, klen);

	if (rc == 0 && (flags & ~STORE_DURABLE))
		rc = -EINVAL;
	return rc ? rc : submit(PS(st), &op);
}

static int pg_delete_version(struct store *st, const char *region,
			     const void *key, size_t klen, uint64_t version,
			     unsigned flags)
{
	struct op op = {.kind = OP_DELETE,
			.flags = flags,
			.region = region,
			.key = key,
			.klen = klen,
			.if_version = version};
	int rc = check_args(region, key, klen);

	if (rc == 0 &&
	    ((flags & ~STORE_DURABLE) || !version || version > INT64_MAX))
		rc = -EINVAL;
	return rc ? rc : submit(PS(st), &op);
}

static int pg_rename(struct store *st, const char *region, const void *from,
		     size_t flen, const void *to, size_t tlen, unsigned flags)
{
	struct op op = {.kind = OP_RENAME,
			.flags = flags,
			.region = region,
			.key = from,
			.klen = flen,
			.key2 = to,
			.klen2 = tlen};
	int rc = check_args(region, from, flen);

	if (rc == 0)
		rc = check_key(to, tlen);
	if (rc == 0 && (flags & ~STORE_DURABLE))
		rc = -EINVAL;
	return rc ? rc : submit(PS(st), &op);
}

static int pg_sync(struct store *st)
{
	struct op op = {.kind = OP_SYNC};

	return submit(PS(st), &op);
}

static int pg_changes_prune(struct store *st, uint64_t max_age_ms)
{
	struct op op = {.kind = OP_PRUNE};
	int64_t now = wall_ns() / 1000000;

	op.cutoff_ms = max_age_ms >= (uint64_t)now ? 0 : now - max_age_ms;
	return submit(PS(st), &op);
}

/* ---- the change feed ---------------------------------------------------------- */

/* Reads what arrived on the feed connection; counts others' doorbells. */
/*
 * Records an acknowledgement, payload "origin snapshot" (lease_send()):
 * store_wait_applied() can then tell from it alone whether that mount has
 * applied a transaction, without asking the server again. A payload
 * without a snapshot (too long to send, or an older regionfs) is counted
 * in ack_unknown: the waiters look at regionfs.mounts again.
 */
static void ack_heard(struct pg_store *ps, const char *payload)
{
	const char *sp = strchr(payload, ' ');
	size_t idlen = sp ? (size_t)(sp - payload) : 0;
	struct ack_entry *e = NULL;
	char *snap = NULL;
	unsigned i;

	if (sp && idlen < sizeof(e->id))
		snap = strdup(sp + 1);
	pthread_mutex_lock(&ps->ack_lock);
	for (i = 0; snap && i < ps->nacks && !e; i++)
		if (strlen(ps->acks[i].id) == idlen &&
		    !memcmp(ps->acks[i].id, payload, idlen))
			e = &ps->acks[i];
	if (snap && !e && ps->nacks < PG_ACKS) {
		e = &ps->acks[ps->nacks++];
		memcpy(e->id, payload, idlen);
		e->id[idlen] = '\0';
		e->snap = NULL;
	}
	if (e) {
		free(e->snap);
		e->snap = snap;
	} else {
		free(snap);
		ps->ack_unknown++;
	}
	pthread_mutex_unlock(&ps->ack_lock);
}

/* Is payload a bell of ours (our origin, alone or before hints)? */
static bool bell_ours(const struct pg_store *ps, const char *payload)
{
	size_t n = strlen(ps->origin);

	return !strncmp(payload, ps->origin, n) &&
	       (payload[n] == '\0' || payload[n] == ' ');
}

/* Keeps the hints of another mount's bell for the next pass. L: feed_lock */
static void hints_heard_locked(struct pg_store *ps, const char *payload)
{
	const char *h = strchr(payload, ' ');
	size_t n = h ? strlen(h) : 0;

	if (!n || ps->heard_len + n >= PG_HINTS_HELD)
		return; /* none, or too many: the pass's log has them */
	if (ps->heard_len + n + 1 > ps->heard_cap) {
		size_t cap = ps->heard_cap ? ps->heard_cap : 1024;
		char *b;

		while (cap < ps->heard_len + n + 1)
			cap *= 2;
		b = realloc(ps->heard, cap);
		if (!b)
			return;
		ps->heard = b;
		ps->heard_cap = cap;
	}
	memcpy(ps->heard + ps->heard_len, h, n + 1);
	ps->heard_len += n;
}

static int feed_drain_locked(struct pg_store *ps)
{
	PGnotify *n;
	int got = 0, acks = 0;

	if (!ps->f.c)
		return -ENOTCONN;
	if (!PQconsumeInput(ps->f.c)) {
		PQfinish(ps->f.c);
		ps->f.c = NULL;
		ps->f.prepared = 0;
		lease_drop(ps);
		return -EIO;
	}
	while ((n = PQnotifies(ps->f.c))) {
		if (!strcmp(n->relname, PG_ACK_CHANNEL)) {
			acks++;
			ack_heard(ps, n->extra);
		} else if (!bell_ours(ps, n->extra)) {
			got++;
			hints_heard_locked(ps, n->extra);
		}
		PQfreemem(n);
	}
	if (acks) { /* wake store_wait_applied() */
		pthread_mutex_lock(&ps->ack_lock);
		ps->ack_seq += acks;
		pthread_cond_broadcast(&ps->ack_cond);
		pthread_mutex_unlock(&ps->ack_lock);
	}
	if (got)
		atomic_fetch_add_explicit(&ps->bells_received, got,
					  memory_order_relaxed);
	ps->bells_pending += got;
	return got;
}

static int feed_connect_locked(struct pg_store *ps)
{
	return conn_ensure(ps, &ps->f, CONN_FEED, "feed");
}

/* The state holding token, or NULL. */
static struct cursor_state *cur_find_locked(struct pg_store *ps, uint64_t tok)
{
	int i;

	for (i = 0; tok && i < PG_CURSORS; i++)
		if (ps->cur[i].token == tok)
			return &ps->cur[i];
	return NULL;
}

/*
 * Records a new position (copies of from and to) and returns its token;
 * 0 on ENOMEM. Tokens grow, and follow the log's head where they can.
 */
static uint64_t cur_add_locked(struct pg_store *ps, const char *from,
			       const char *to, uint64_t after, uint64_t head)
{
	struct cursor_state *c = &ps->cur[ps->cur_next];
	char *f = strdup(from), *t = to ? strdup(to) : NULL;
	uint64_t tok;

	if (!f || (to && !t)) {
		free(f);
		free(t);
		return 0;
	}
	tok = head > ps->next_token ? head : ps->next_token;
	ps->next_token = tok + 1;
	free(c->from);
	free(c->to);
	c->token = tok;
	c->from = f;
	c->to = t;
	c->after = after;
	ps->cur_next = (ps->cur_next + 1) % PG_CURSORS;
	return tok;
}

/* A new target snapshot (and the head); drains notifications. */
static int feed_snap_locked(struct pg_store *ps, char **snap, uint64_t *head)
{
	PGresult *r;
	int err;

	err = feed_connect_locked(ps);
	if (err)
		return err;
	r = run(ps, &ps->f, PQ_SNAP, NULL, NULL, NULL, "feed", NULL, NULL, 0,
		&err);
	if (!r)
		return err;
	feed_drain_locked(ps);
	*snap = strdup(PQgetvalue(r, 0, 0));
	*head = col_u64(r, 0, 1);
	atomic_store_explicit(&ps->queue_ppm, col_u64(r, 0, 2),
			      memory_order_relaxed);
	PQclear(r);
	return *snap ? 0 : -ENOMEM;
}

static int pg_changes_head(struct store *st, uint64_t *cursor)
{
	struct pg_store *ps = PS(st);
	uint64_t head, tok = 0;
	char *snap = NULL;
	int err;

	pthread_mutex_lock(&ps->feed_lock);
	err = feed_snap_locked(ps, &snap, &head);
	if (err == 0)
		tok = cur_add_locked(ps, snap, NULL, 0, head);
	pthread_mutex_unlock(&ps->feed_lock);
	free(snap);
	if (err == 0 && !tok)
		err = -ENOMEM;
	if (err == 0)
		*cursor = tok;
	return err;
}

/* ---- leases and acknowledgements ----------------------------------------- */

/*
 * Leases (coherence = strict; store.h: store_hits_ok(),
 * store_wait_applied()). Each store holds a row in regionfs.mounts (id:
 * its origin) with lease_until, on the server's clock, and applied, the
 * snapshot up to which it has applied the change log. The row is written
 * on the feed connection, by the thread that runs store_changes(), at the
 * end of a complete pass (PQ_LEASE, one statement): always when the pass
 * applied a change of someone else's (an acknowledgement: applied moves
 * to the pass's target snapshot, and a notification on PG_ACK_CHANNEL
 * wakes the writers waiting), else when renew_ms has passed since the
 * last renewal. So a renewal always carries the snapshot of a pass that
 * ended just before it: a mount that renews acknowledges too.
 *
 * The statement reads whether the lease was still live before extending
 * it. If not (a new row, or a lapse: frozen, cut off, the server down),
 * writers may have stopped waiting for us, so what we cache may be
 * stale: synced goes false, and true again only at the end of the next
 * complete pass, which starts after the renewal committed and so sees
 * every change whose writer did not wait for us (it committed before the
 * writer read our row as lapsed, so before our renewal). If the lease
 * was live, no writer ever skipped us: lease_until only grows, and each
 * renewal found it later than its own time.
 *
 * Hits are allowed while synced and now_ns() < lease_end_ns: the time
 * before the renewal was sent plus lease_ms, less a fifth of it as margin
 * for clock rates and for a renewal committed asynchronously and lost in
 * a server crash (the feed connection commits with synchronous_commit
 * off, like the doorbells: up to 3 x wal_writer_delay, 600 ms by default,
 * could be lost; the connection drops then anyway, and lease_drop()
 * stops hits at once).
 *
 * The rows of mounts that stopped without deleting theirs (killed) stay
 * until a store opening later deletes rows expired for a day; a lapsed
 * row costs writers nothing.
 */
#define LEASE_MARGIN_MS(l) ((l) / 5)

/*
 * The lease statement and, with ack, the acknowledgement's notification
 * in a transaction of its own (a full NOTIFY queue must never fail the
 * renewal), sent at once (pipeline mode, a sync after each): one round
 * trip. Returns the lease's result, or NULL (reported; the connection
 * dropped if it broke).
 */
static PGresult *lease_send(struct pg_store *ps, const char *const *vals,
			    bool ack)
{
	static const int idx[2] = {PQ_LEASE, PQ_ACK_BELL};
	char payload[4000];
	const char *bv[1] = {payload};
	PGconn *c = ps->f.c;
	PGresult *r, *lease = NULL, *bad = NULL;
	int syncs = 0, want = ack ? 2 : 1, i;
	bool ok;

	for (i = 0; i < 2; i++) {
		if (ps->f.prepared & (1u << idx[i]))
			continue;
		r = PQprepare(c, pg_stmts[idx[i]].name, pg_stmts[idx[i]].sql,
			      pg_stmts[idx[i]].nparams, NULL);
		if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
			fail(ps, &ps->f, r, "lease", NULL, NULL, 0);
			return NULL;
		}
		PQclear(r);
		ps->f.prepared |= 1u << idx[i];
	}
	/* "origin snapshot": what we applied (ack_heard()); the origin alone
	 * if the snapshot is too long for a notification */
	if (!vals[2] || snprintf(payload, sizeof(payload), "%s %s", ps->origin,
				 vals[2]) >= (int)sizeof(payload))
		snprintf(payload, sizeof(payload), "%s", ps->origin);
	ok = PQenterPipelineMode(c) &&
	     PQsendQueryPrepared(c, pg_stmts[PQ_LEASE].name, 5, vals, NULL,
				 NULL, 1) &&
	     PQpipelineSync(c);
	if (ok && ack)
		ok = PQsendQueryPrepared(c, pg_stmts[PQ_ACK_BELL].name, 1, bv,
					 NULL, NULL, 1) &&
		     PQpipelineSync(c);
	while (ok && syncs < want) {
		r = PQgetResult(c);
		if (!r) { /* between two queries' results, or broken */
			ok = PQstatus(c) == CONNECTION_OK;
			continue;
		}
		if (PQresultStatus(r) == PGRES_PIPELINE_SYNC)
			syncs++;
		else if (syncs == 0 && PQresultStatus(r) == PGRES_TUPLES_OK &&
			 !lease)
			lease = r, r = NULL;
		else if (syncs == 0 && !bad &&
			 PQresultStatus(r) != PGRES_TUPLES_OK)
			bad = r, r = NULL; /* the lease failed */
		PQclear(r);		   /* a failed notification: ignored */
	}
	if (ok)
		PQexitPipelineMode(c);
	if (ok && lease) {
		PQclear(bad);
		return lease;
	}
	PQclear(lease);
	fail(ps, &ps->f, bad, "lease", NULL, NULL, 0);
	if (!ok && ps->f.c) { /* broken while sending or reading */
		PQfinish(ps->f.c);
		ps->f.c = NULL;
		ps->f.prepared = 0;
	}
	return NULL;
}

static void lease_pass_done(struct pg_store *ps, const char *applied, bool ack)
{
	char ms[24], pid[24];
	const char *vals[5] = {ps->origin, ms, applied, ps->host, pid};
	int64_t t = now_ns(), end;
	PGresult *r;
	bool live;

	pthread_mutex_lock(&ps->feed_lock);
	if (ps->resync) { /* this pass started after the lease was taken */
		ps->resync = false;
		atomic_store(&ps->synced, true);
	}
	if (!ack && ps->lease_ever &&
	    t - ps->lease_sent_ns < (int64_t)ps->renew_ms * 1000000 &&
	    t < atomic_load(&ps->lease_end_ns))
		goto out;
	snprintf(ms, sizeof(ms), "%u", ps->lease_ms);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (feed_connect_locked(ps))
		goto out;
	r = lease_send(ps, vals, ack);
	if (!r)
		goto out;
	live = PQntuples(r) == 1 && col_i64(r, 0, 0) != 0;
	PQclear(r);
	end = t +
	      ((int64_t)ps->lease_ms - LEASE_MARGIN_MS(ps->lease_ms)) * 1000000;
	atomic_fetch_add_explicit(&ps->renewals, 1, memory_order_relaxed);
	if (!live) {
		if (ps->lease_ever)
			atomic_fetch_add_explicit(&ps->lapses, 1,
						  memory_order_relaxed);
		atomic_store(&ps->synced, false);
		ps->resync = true;
	}
	ps->lease_ever = true;
	ps->lease_sent_ns = t;
	atomic_store(&ps->lease_end_ns, end);
	feed_drain_locked(ps);
out:
	pthread_mutex_unlock(&ps->feed_lock);
}

static int pg_space(struct store *st, uint64_t *total, uint64_t *avail)
{
	struct pg_store *ps = PS(st);
	PGresult *r;
	int slot, err;

	err = reader_get(ps, "space", &slot);
	if (err)
		return err;
	r = run(ps, &ps->readers[slot], PQ_DBSIZE, NULL, NULL, NULL, "space",
		NULL, NULL, 0, &err);
	if (r) {
		*avail = STORE_SPACE_UNKNOWN;
		*total = col_u64(r, 0, 0) + *avail;
		PQclear(r);
	}
	reader_put(ps, slot);
	return err;
}

static bool pg_hits_ok(struct store *st)
{
	struct pg_store *ps = PS(st);

	return atomic_load(&ps->synced) &&
	       now_ns() < atomic_load(&ps->lease_end_ns);
}

/*
 * One look at the mounts still to acknowledge xid: *n of them, the first
 * PG_ACKS of their ids in ids, and *left_ms of the first of their leases.
 */
static int pending_acks(struct pg_store *ps, uint64_t xid, int64_t *n,
			char (*ids)[40], int64_t *left_ms)
{
	char x[24];
	const char *vals[2] = {ps->origin, x};
	int lens[2] = {0}, fmts[2] = {0};
	PGresult *r;
	int slot, err, i;

	snprintf(x, sizeof(x), "%" PRIu64, xid);
	err = reader_get(ps, "ack", &slot);
	if (err)
		return err;
	r = run(ps, &ps->readers[slot], PQ_PENDING, vals, lens, fmts, "ack",
		NULL, NULL, 0, &err);
	if (r) {
		*n = PQntuples(r);
		*left_ms = 0;
		for (i = 0; i < *n; i++) {
			int64_t l = col_i64(r, i, 1);

			if (i == 0 || l < *left_ms)
				*left_ms = l;
			if (i < PG_ACKS)
				snprintf(ids[i], sizeof(ids[i]), "%.*s",
					 PQgetlength(r, i, 0),
					 PQgetvalue(r, i, 0));
		}
		PQclear(r);
	}
	reader_put(ps, slot);
	return err;
}

/* Does snapshot snap ("xmin:xmax:xip,...") see committed xid? */
static bool snap_sees(const char *snap, uint64_t xid)
{
	char *end;
	uint64_t xmin = strtoull(snap, &end, 10), xmax, x;

	if (*end != ':')
		return false;
	xmax = strtoull(end + 1, &end, 10);
	if (*end != ':')
		return false;
	if (xid < xmin)
		return true;
	if (xid >= xmax)
		return false;
	while (*++end) { /* the xids in progress */
		x = strtoull(end, &end, 10);
		if (x == xid)
			return false;
		if (*end != ',')
			break;
	}
	return true;
}

/*
 * Waits until every mount of ids (n <= PG_ACKS) has acknowledged a
 * snapshot that sees xid (true), or ms pass, or an acknowledgement
 * without a snapshot comes after unknown (false: look again).
 */
static bool acks_wait(struct pg_store *ps, uint64_t xid, char (*ids)[40],
		      int64_t n, uint64_t unknown, int64_t ms)
{
	int64_t end = now_ns() + ms * 1000000;
	struct timespec ts = {.tv_sec = end / 1000000000,
			      .tv_nsec = end % 1000000000};
	bool all = false;
	int64_t i;
	unsigned k;

	pthread_mutex_lock(&ps->ack_lock);
	for (;;) {
		for (i = 0, all = true; i < n && all; i++) {
			for (k = 0; k < ps->nacks; k++)
				if (!strcmp(ps->acks[k].id, ids[i]))
					break;
			all = k < ps->nacks && ps->acks[k].snap &&
			      snap_sees(ps->acks[k].snap, xid);
		}
		if (all || ps->ack_unknown != unknown)
			break;
		if (pthread_cond_timedwait(&ps->ack_cond, &ps->ack_lock, &ts) ==
		    ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&ps->ack_lock);
	return all;
}

/* Sleeps on ack_cond until an acknowledgement after seq, or ms. */
static void ack_sleep(struct pg_store *ps, uint64_t seq, int64_t ms)
{
	int64_t end = now_ns() + ms * 1000000;
	struct timespec ts = {.tv_sec = end / 1000000000,
			      .tv_nsec = end % 1000000000};

	pthread_mutex_lock(&ps->ack_lock);
	while (ps->ack_seq == seq)
		if (pthread_cond_timedwait(&ps->ack_cond, &ps->ack_lock, &ts) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&ps->ack_lock);
}

#define ACK_POLL_MS 50 /* look again at least this often */

static int pg_wait_applied(struct store *st)
{
	struct pg_store *ps = PS(st);
	uint64_t xid = atomic_load(&ps->last_xid), seq, unknown, took, max;
	int64_t t0 = now_ns(), cap, n = 0, left = 0, t;
	char ids[PG_ACKS][40];
	bool timed_out = false, hurried = false;
	int err;

	if (!xid)
		return 0; /* we never committed anything */
	bell_hurry(ps, false);
	/* a mount that renews acknowledges; one that does not renews is
	 * waited for until its lease_until, at most lease_ms away; a pass
	 * and a renewal period on top (store.h) */
	cap = t0 + ((int64_t)ps->lease_ms + ps->renew_ms + 500) * 1000000;
	for (;;) {
		pthread_mutex_lock(&ps->ack_lock);
		seq = ps->ack_seq;
		unknown = ps->ack_unknown;
		pthread_mutex_unlock(&ps->ack_lock);
		err = pending_acks(ps, xid, &n, ids, &left);
		t = now_ns();
		if (err) { /* cannot look: wait out the bound */
			if (t < cap)
				sleep_ms((unsigned)((cap - t) / 1000000) + 1);
			timed_out = true;
			break;
		}
		if (n == 0)
			break;
		if (!hurried) /* someone to wait for: rung for? */
			bell_hurry(ps, true);
		hurried = true;
		if (t >= cap) {
			timed_out = true;
			break;
		}
		left = left < 1 ? 1 : left + 1;
		if (left > ACK_POLL_MS)
			left = ACK_POLL_MS;
		/* the acknowledgements carry what each mount applied: done
		 * once all of those we wait for saw xid, without asking the
		 * server again (one round trip less per strict write) */
		if (n <= PG_ACKS) {
			if (acks_wait(ps, xid, ids, n, unknown, left))
				break;
		} else {
			ack_sleep(ps, seq, left);
		}
	}
	took = (uint64_t)(now_ns() - t0);
	atomic_fetch_add_explicit(&ps->acks_waited, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&ps->ack_wait_ns, took, memory_order_relaxed);
	max = atomic_load(&ps->ack_wait_max_ns);
	while (took > max &&
	       !atomic_compare_exchange_weak(&ps->ack_wait_max_ns, &max, took))
		;
	if (timed_out)
		atomic_fetch_add_explicit(&ps->acks_timed_out, 1,
					  memory_order_relaxed);
	return 0;
}

/* One change of a page, copied out: region and key point into buf. */
struct feed_row {
	uint64_t seq;
	size_t region_off, key_off, klen;
	bool all; /* region NULL: a TRUNCATE, everything changed */
	bool own;
};

struct feed_page {
	struct feed_row rows[PG_PAGE_ROWS];
	size_t n;
	bool pruned;
	char *buf;
	size_t len, cap;
};

/* The xmin of a snapshot's text form "xmin:xmax:xip,...". */
static void snap_xmin(const char *snap, char *out, size_t n)
{
	size_t i = strcspn(snap, ":");

	if (i >= n)
		i = n - 1;
	memcpy(out, snap, i);
	out[i] = '\0';
}

/*
 * Reads one page of the pass from -> to after seq `after` into p. With to
 * NULL, the pass's first page, whose statement takes the target snapshot
 * itself: *snap gets it (malloc()ed), *head the log's head.
 */
static int feed_page_locked(struct pg_store *ps, const char *from,
			    const char *to, uint64_t after, struct feed_page *p,
			    char **snap, uint64_t *head)
{
	char xmin[32], aft[24];
	const char *vals[6] = {xmin, from, to, aft, ps->origin, PG_XID_MAX};
	const char *fvals[4] = {xmin, from, ps->origin, PG_XID_MAX};
	int lens[6] = {0}, fmts[6] = {0};
	PGresult *r;
	ssize_t ro, ko;
	int err, i;

	p->n = p->len = 0;
	p->pruned = false;
	snap_xmin(from, xmin, sizeof(xmin));
	snprintf(aft, sizeof(aft), "%" PRIu64, after);
	err = feed_connect_locked(ps);
	if (err)
		return err;
	r = run(ps, &ps->f, to ? PQ_PAGE : PQ_FIRST, to ? vals : fvals, lens,
		fmts, "feed", NULL, NULL, 0, &err);
	if (!r)
		return err;
	feed_drain_locked(ps);
	if (!to && PQntuples(r) > 0) {
		*snap = strdup(PQgetvalue(r, 0, 0));
		*head = col_u64(r, 0, 6);
		atomic_store_explicit(&ps->queue_ppm, col_u64(r, 0, 7),
				      memory_order_relaxed);
		if (!*snap)
			err = -ENOMEM;
	} else if (!to) {
		err = -EIO; /* the statement always yields a row */
	}
	for (i = 0; i < PQntuples(r) && err == 0; i++) {
		struct feed_row *row = &p->rows[p->n];

		if (i == 0)
			p->pruned = col_i64(r, 0, 1) != 0;
		if (PQgetisnull(r, i, 2))
			continue; /* no log row: the LEFT JOIN's filler */
		row->seq = col_u64(r, i, 2);
		row->all = PQgetisnull(r, i, 3) || PQgetisnull(r, i, 4);
		row->own = col_i64(r, i, 5) != 0;
		ro = store__append(&p->buf, &p->len, &p->cap,
				   PQgetvalue(r, i, 3), PQgetlength(r, i, 3));
		ko = store__append(&p->buf, &p->len, &p->cap,
				   PQgetvalue(r, i, 4), PQgetlength(r, i, 4));
		if (ro < 0 || ko < 0) {
			err = -ENOMEM;
			break;
		}
		row->region_off = ro;
		row->key_off = ko;
		row->klen = PQgetlength(r, i, 4);
		p->n++;
	}
	PQclear(r);
	return err;
}

/* One store_changes() call. */
struct feed_pass {
	store_change_fn fn;
	void *ctx;
	int calls;
	bool stop, invalidated;
	bool others; /* a change not ours was applied: acknowledge it */
};

static void pass_call(struct feed_pass *fp, const char *region, const void *key,
		      size_t klen)
{
	fp->others = true;
	if (!key) {
		if (fp->invalidated)
			return; /* once per pass is enough */
		fp->invalidated = true;
		region = NULL;
	}
	fp->calls++;
	fp->stop = fp->fn(fp->ctx, region, key, klen) != 0;
}

/* Hex digits to bytes: the length, or -1 if not hex or over max. */
static ssize_t unhex(const char *h, size_t n, char *out, size_t max)
{
	size_t i;

	if (n % 2 || n / 2 > max)
		return -1;
	for (i = 0; i < n; i += 2) {
		const char *a = strchr(hexd, h[i]), *b = strchr(hexd, h[i + 1]);

		if (!h[i] || !h[i + 1] || !a || !b)
			return -1;
		out[i / 2] = (char)((a - hexd) << 4 | (b - hexd));
	}
	return (ssize_t)(n / 2);
}

/*
 * The hints heard since the last pass (" REGIONHEX:KEYHEX" each, see
 * "Hints"): each name invalidated through fp before the pass reads the
 * log; an entry that is no region and file name is skipped.
 */
static void hints_apply(struct pg_store *ps, struct feed_pass *fp)
{
	char region[STORE_MAX_KEY + 1], key[STORE_MAX_KEY];
	char *h, *p, *colon, *end;
	ssize_t rl, kl;

	pthread_mutex_lock(&ps->feed_lock);
	h = ps->heard;
	ps->heard = NULL;
	ps->heard_len = ps->heard_cap = 0;
	pthread_mutex_unlock(&ps->feed_lock);
	for (p = h; p && *p == ' ' && !fp->stop; p = end) {
		p++;
		end = p + strcspn(p, " ");
		colon = memchr(p, ':', (size_t)(end - p));
		if (!colon)
			continue;
		rl = unhex(p, (size_t)(colon - p), region, STORE_MAX_KEY);
		kl = unhex(colon + 1, (size_t)(end - colon - 1), key,
			   sizeof(key));
		if (rl <= 0 || kl <= 0 || memchr(region, '\0', (size_t)rl) ||
		    check_key(key, (size_t)kl))
			continue;
		region[rl] = '\0';
		fp->calls++;
		fp->stop = fp->fn(fp->ctx, region, key, (size_t)kl) != 0;
	}
	free(h);
}

/*
 * The pass from *from to *to (a fresh snapshot if the position has no
 * pass in progress), paged; ends with the new position's token. Hints
 * heard first (hints_apply()).
 */
static int pg_changes(struct store *st, uint64_t *cursor, store_change_fn fn,
		      void *ctx)
{
	struct pg_store *ps = PS(st);
	struct feed_pass fp = {.fn = fn, .ctx = ctx};
	struct cursor_state *c;
	struct feed_page *p = NULL;
	char *from = NULL, *to = NULL;
	uint64_t after = 0, head = 0, tok = 0;
	bool done = false;
	size_t i;
	int err;

	if (!fn)
		return -EINVAL;
	hints_apply(ps, &fp);
	pthread_mutex_lock(&ps->feed_lock);
	c = cur_find_locked(ps, *cursor);
	if (c) {
		from = strdup(c->from);
		to = c->to ? strdup(c->to) : NULL;
		after = c->after;
		err = from && (to || !c->to) ? 0 : -ENOMEM;
	} else { /* a position we no longer hold: start over from now */
		err = feed_snap_locked(ps, &to, &head);
	}
	pthread_mutex_unlock(&ps->feed_lock);
	if (err == 0 && !c) {
		pass_call(&fp, NULL, NULL, 0);
		from = to;
		to = NULL;
		done = true;
	}
	if (err == 0 && !done && !(p = calloc(1, sizeof(*p))))
		err = -ENOMEM;
	while (err == 0 && !done && !fp.stop) {
		char *snap = NULL;

		pthread_mutex_lock(&ps->feed_lock);
		err = feed_page_locked(ps, from, to, after, p, &snap, &head);
		pthread_mutex_unlock(&ps->feed_lock);
		if (!to)
			to = snap; /* the first page took the pass's target */
		else
			free(snap);
		if (err)
			break;
		if (p->pruned) { /* rows we may not have seen are gone */
			pass_call(&fp, NULL, NULL, 0);
			done = true;
			break;
		}
		for (i = 0; i < p->n && !fp.stop; i++) {
			struct feed_row *row = &p->rows[i];

			after = row->seq;
			if (!row->own)
				fp.others = true; /* even if no file: to ack */
			if (row->own || (!row->all && !row->klen))
				continue; /* ours, or an empty key: no file */
			if (row->all)
				pass_call(&fp, NULL, NULL, 0);
			else
				pass_call(&fp, p->buf + row->region_off,
					  p->buf + row->key_off, row->klen);
		}
		if (i == p->n && p->n < PG_PAGE_ROWS)
			done = true;
	}
	if (p) {
		free(p->buf);
		free(p);
	}
	if (err == 0) {
		atomic_fetch_add_explicit(&ps->passes, 1, memory_order_relaxed);
		pthread_mutex_lock(&ps->feed_lock);
		if (done && to) /* the pass reached its target */
			tok = cur_add_locked(ps, to, NULL, 0, head);
		else if (done)
			tok = cur_add_locked(ps, from, NULL, 0, head);
		else
			tok = cur_add_locked(ps, from, to, after, head);
		pthread_mutex_unlock(&ps->feed_lock);
		if (!tok)
			err = -ENOMEM;
		else
			*cursor = tok;
	}
	if (err == 0 && done) /* every change up to it is applied */
		lease_pass_done(ps, to ? to : from, fp.others);
	free(from);
	free(to);
	return err ? err : fp.calls;
}

static int pg_changes_fd(struct store *st)
{
	struct pg_store *ps = PS(st);
	int fd;

	pthread_mutex_lock(&ps->feed_lock);
	fd = ps->f.c && PQstatus(ps->f.c) == CONNECTION_OK ? PQsocket(ps->f.c)
							   : -ENOTCONN;
	pthread_mutex_unlock(&ps->feed_lock);
	return fd >= 0 ? fd : -ENOTCONN;
}

static int pg_changes_drain(struct store *st)
{
	struct pg_store *ps = PS(st);
	int n;

	pthread_mutex_lock(&ps->feed_lock);
	n = feed_drain_locked(ps);
	if (n >= 0 || ps->bells_pending) {
		/* with those drained after the feed's own queries: a bell
		 * heard during a pass may be for a commit after its snapshot */
		n = ps->bells_pending;
		ps->bells_pending = 0;
	}
	pthread_mutex_unlock(&ps->feed_lock);
	return n;
}

/* ---- stats, open and close ------------------------------------------------- */

static void pg_stats(struct store *st, struct store_stats *out)
{
	struct pg_store *ps = PS(st);
	int k;

	pthread_mutex_lock(&ps->lock);
	*out = ps->stats;
	pthread_mutex_unlock(&ps->lock);
	for (k = 0; k < STORE_ERR_NKINDS; k++)
		out->errs[k] = atomic_load_explicit(&ps->errs[k],
						    memory_order_relaxed);
	out->read_only = ps->read_only;
	out->doorbells_sent =
		atomic_load_explicit(&ps->bells_sent, memory_order_relaxed);
	out->doorbells_failed =
		atomic_load_explicit(&ps->bells_failed, memory_order_relaxed);
	out->doorbells_coalesced = atomic_load_explicit(&ps->bells_coalesced,
							memory_order_relaxed);
	out->doorbells_unheard =
		atomic_load_explicit(&ps->bells_unheard, memory_order_relaxed);
	out->doorbells_received =
		atomic_load_explicit(&ps->bells_received, memory_order_relaxed);
	out->feed_passes =
		atomic_load_explicit(&ps->passes, memory_order_relaxed);
	out->reconnects =
		atomic_load_explicit(&ps->reconnects, memory_order_relaxed);
	out->notify_queue_ppm =
		atomic_load_explicit(&ps->queue_ppm, memory_order_relaxed);
	out->lease_live = pg_hits_ok(st);
	out->lease_renewals = atomic_load(&ps->renewals);
	out->lease_lapses = atomic_load(&ps->lapses);
	out->acks_waited = atomic_load(&ps->acks_waited);
	out->ack_wait_ns = atomic_load(&ps->ack_wait_ns);
	out->ack_wait_max_ns = atomic_load(&ps->ack_wait_max_ns);
	out->acks_timed_out = atomic_load(&ps->acks_timed_out);
}

/*
 * Creates or upgrades the schema in one transaction, under an advisory
 * lock. -EPROTO for a newer version than we know, or one that a read-only
 * store would have to change.
 */
static int schema_upgrade(struct pg_store *ps, PGconn *c)
{
	PGresult *r = NULL;
	char sql[128];
	int v = 0, err = 0;

	if (exec_cmd(c, "BEGIN", &r) || exec_cmd(c, PG_SCHEMA_LOCK, &r))
		goto fail;
	r = PQexec(c, "SELECT to_regclass('regionfs.schema_version') "
		      "IS NOT NULL");
	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail;
	if (PQgetvalue(r, 0, 0)[0] == 't') {
		PQclear(r);
		r = PQexec(c, "SELECT max(version) FROM "
			      "regionfs.schema_version");
		if (!r || PQresultStatus(r) != PGRES_TUPLES_OK)
			goto fail;
		v = atoi(PQgetvalue(r, 0, 0));
	} else if (!ps->read_only) {
		PQclear(r);
		r = NULL;
		if (exec_cmd(c,
			     "CREATE SCHEMA IF NOT EXISTS regionfs; "
			     "CREATE TABLE regionfs.schema_version("
			     "version integer NOT NULL); "
			     "INSERT INTO regionfs.schema_version VALUES (0)",
			     &r))
			goto fail;
	}
	PQclear(r);
	r = NULL;
	if (v > PG_SCHEMA_VERSION || (ps->read_only && v != PG_SCHEMA_VERSION))
		err = -EPROTO;
	for (; err == 0 && v < PG_SCHEMA_VERSION; v++) {
		snprintf(sql, sizeof(sql),
			 "UPDATE regionfs.schema_version SET version = %d",
			 v + 1);
		if (exec_cmd(c, pg_schema_steps[v], &r) || exec_cmd(c, sql, &r))
			goto fail;
	}
	if (err == 0 && exec_cmd(c, "COMMIT", &r))
		goto fail;
	if (err)
		PQclear(PQexec(c, "ROLLBACK"));
	return err;
fail : {
	enum store_err_kind kind;
	char msg[512];
	bool lost;

	err = pg_errno(c, r, &kind, &lost);
	report(ps, err, kind, "schema", NULL, NULL, 0,
	       pg_msg(c, r, msg, sizeof(msg)));
	PQclear(r);
}
	if (PQstatus(c) == CONNECTION_OK)
		PQclear(PQexec(c, "ROLLBACK"));
	return err;
}

static void pconn_close(struct pconn *pc)
{
	PQfinish(pc->c);
	pc->c = NULL;
}

static void pg_close(struct store *st)
{
	struct pg_store *ps = PS(st);
	int i;

	if (ps->thread_ok) {
		pthread_mutex_lock(&ps->lock);
		ps->stopping = true;
		pthread_cond_signal(&ps->wake);
		pthread_mutex_unlock(&ps->lock);
		pthread_join(ps->writer, NULL);
	}
	if (ps->bell_thread_ok) { /* after the writer: it rings what is owed */
		pthread_mutex_lock(&ps->bell_lock);
		ps->bell_stop = true;
		pthread_cond_signal(&ps->bell_cond);
		pthread_mutex_unlock(&ps->bell_lock);
		pthread_join(ps->beller, NULL);
	}
	if ((ps->lease_ever || ps->registered) && ps->f.c &&
	    PQstatus(ps->f.c) == CONNECTION_OK) {
		/* others stop waiting for us at once */
		const char *vals[1] = {ps->origin};

		PQclear(PQexecParams(
			ps->f.c, "DELETE FROM regionfs.mounts WHERE id = $1", 1,
			NULL, vals, NULL, NULL, 0));
	}
	pconn_close(&ps->w);
	pconn_close(&ps->b);
	pconn_close(&ps->f);
	for (i = 0; i < PG_READERS; i++)
		pconn_close(&ps->readers[i]);
	for (i = 0; i < PG_CURSORS; i++) {
		free(ps->cur[i].from);
		free(ps->cur[i].to);
	}
	if (ps->locks_ok) {
		pthread_mutex_destroy(&ps->lock);
		pthread_cond_destroy(&ps->wake);
		pthread_mutex_destroy(&ps->pool_lock);
		pthread_cond_destroy(&ps->pool_free);
		pthread_mutex_destroy(&ps->feed_lock);
		pthread_mutex_destroy(&ps->ack_lock);
		pthread_cond_destroy(&ps->ack_cond);
		pthread_mutex_destroy(&ps->bell_lock);
		pthread_cond_destroy(&ps->bell_cond);
	}
	for (i = 0; (unsigned)i < ps->nacks; i++)
		free(ps->acks[i].snap);
	free(ps->heard);
	free(ps->conninfo);
	free(ps);
}

static const struct store_ops pg_ops;

/* The writer's condition variable, timed on CLOCK_MONOTONIC. */
static int wake_init(pthread_cond_t *c)
{
	pthread_condattr_t a;
	int rc;

	if (pthread_condattr_init(&a))
		return -1;
	rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC) ||
	     pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
	return rc;
}

/* A random origin id for this store's writer. */
static void make_origin(struct pg_store *ps)
{
	unsigned char b[12];
	size_t i;

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		uint64_t t = (uint64_t)wall_ns() ^ (uint64_t)(uintptr_t)ps;

		memcpy(b, &t, 8);
		memset(b + 8, 0, 4);
	}
	memcpy(ps->origin, "rfs-", 4);
	for (i = 0; i < sizeof(b); i++)
		snprintf(ps->origin + 4 + 2 * i, 3, "%02x", b[i]);
}

int store__pg_open(const char *conninfo, const struct store_options *opts,
		   struct store **out)
{
	struct pg_store *ps;
	char msg[512];
	PGconn *c;
	int err;

	*out = NULL;
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	ps->ops = &pg_ops;
	ps->conninfo = strdup(conninfo);
	ps->durable = opts && opts->durable;
	ps->read_only = opts && opts->read_only;
	ps->busy_timeout_ms = opts && opts->busy_timeout_ms
				      ? opts->busy_timeout_ms
				      : DEFAULT_BUSY_MS;
	ps->on_error = opts ? opts->on_error : NULL;
	ps->error_ctx = opts ? opts->error_ctx : NULL;
	ps->tail = &ps->queue;
	ps->next_token = 1;
	ps->lease_ms = opts && opts->lease_ms ? opts->lease_ms
					      : STORE_DEFAULT_LEASE_MS;
	ps->renew_ms = opts && opts->renew_ms ? opts->renew_ms
					      : STORE_DEFAULT_RENEW_MS;
	if (gethostname(ps->host, sizeof(ps->host)) < 0)
		strcpy(ps->host, "?");
	ps->host[sizeof(ps->host) - 1] = '\0';
	make_origin(ps);
	if (!ps->conninfo) {
		free(ps);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&ps->lock, NULL) || wake_init(&ps->wake) ||
	    pthread_mutex_init(&ps->pool_lock, NULL) ||
	    pthread_cond_init(&ps->pool_free, NULL) ||
	    pthread_mutex_init(&ps->feed_lock, NULL) ||
	    pthread_mutex_init(&ps->ack_lock, NULL) ||
	    wake_init(&ps->ack_cond) ||
	    pthread_mutex_init(&ps->bell_lock, NULL) ||
	    pthread_cond_init(&ps->bell_cond, NULL)) {
		free(ps->conninfo);
		free(ps);
		return -ENOMEM;
	}
	ps->locks_ok = true;
	/* the schema on a connection of its own, which becomes a reader */
	c = conn_open(ps, msg, sizeof(msg));
	if (!c) {
		enum store_err_kind kind;

		err = conn_errno(msg, &kind);
		report(ps, err, kind, "connect", NULL, NULL, 0, msg);
		goto out;
	}
	ps->readers[0].c = c;
	ps->readers[0].ever = true;
	{
		PGresult *r = NULL;

		if (conn_setup(ps, c, CONN_READER, &r)) {
			err = fail(ps, &ps->readers[0], r, "connect", NULL,
				   NULL, 0);
			goto out;
		}
	}
	err = schema_upgrade(ps, c);
	if (err)
		goto out;
	if (!ps->read_only) /* rows of mounts gone for a day: killed ones */
		PQclear(PQexec(c, "DELETE FROM regionfs.mounts WHERE "
				  "lease_until < clock_timestamp() - "
				  "interval '1 day'"));
	if (!ps->read_only) {
		err = conn_ensure(ps, &ps->w, CONN_WRITER, "connect");
		if (err == 0)
			err = writer_prepare(ps);
		if (err)
			goto out;
		/* the doorbell's connection now, not at the first commit's
		 * bell; a failure here is the bell thread's to retry */
		conn_ensure(ps, &ps->b, CONN_READER, "doorbell");
		err = -pthread_create(&ps->beller, NULL, bell_main, ps);
		ps->bell_thread_ok = err == 0;
	}
	if (!err && !ps->read_only) {
		err = -pthread_create(&ps->writer, NULL, writer_main, ps);
		ps->thread_ok = err == 0;
	}
out:
	if (err) {
		pg_close((struct store *)(void *)ps);
		return err;
	}
	*out = (struct store *)(void *)ps;
	return 0;
}

static const struct store_ops pg_ops = {
	.name = "postgresql",
	.close = pg_close,
	.load = pg_load,
	.stat = pg_stat,
	.put = pg_put,
	.del = pg_delete,
	.delete_version = pg_delete_version,
	.rename = pg_rename,
	.sync = pg_sync,
	.list_page = pg_list_page,
	.region_usage = pg_region_usage,
	.changes_head = pg_changes_head,
	.changes = pg_changes,
	.changes_prune = pg_changes_prune,
	.stats = pg_stats,
	.changes_fd = pg_changes_fd,
	.changes_drain = pg_changes_drain,
	.hits_ok = pg_hits_ok,
	.wait_applied = pg_wait_applied,
	.space = pg_space,
};
