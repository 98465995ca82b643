/*
 * fs.h - internal interfaces of the regionfs daemon, shared by fs/ only.
 *
 * The daemon is built in floors: a file calls only into files on floors
 * below its own (and into regions/, store/ and libfuse), never up, so no
 * two files of fs/ call each other. From the ground up:
 *   0  log.c     rfs_log(): stderr in the foreground, syslog otherwise
 *   1  state.c   what every request reads: struct rfs, the region table
 *                (swapped whole by a reload) and its swap gate, the
 *                striped counters, per-thread slots, the monotonic clock,
 *                thread spawning
 *      pinned.c  the bytes of the values open files hold
 *   2  inode.c   inode numbers, lookup counts, what the kernel may cache
 *   2b kinval.c  the queue and thread that tell the kernel which cached
 *                key names changed (calls inode.c and state.c only)
 *   3  commit.c  the write protocol (E1, store op, E2, inode table) for
 *                put, delete, rename, create and truncate, and the
 *                per-name locks that order the changes of one name
 *      feed.c    the change-feed thread: outside writers' changes
 *                invalidate the cache within a bounded delay (it tells a
 *                listener, set by daemon.c, which keys changed)
 *   4  handle.c  open files: read handles, write buffers (their commit
 *                goes to commit.c), virtual-file and directory handles
 *      linger.c  a write handle's RELEASE reply waits for the next open
 *                of its inode (the kernel then keeps the inode)
 *      view.c    the snapshot the .regionfs/ files are rendered from
 *      virtual.c renders those files (see virtual.h; calls nothing here)
 *   5  ops.c     the FUSE low-level operations
 *      carry.c   a cache a reload recreated takes over the old one's
 *                entries, in the background (daemon.c runs it)
 *   6  daemon.c  the roof: the background thread (sweeps, change-feed
 *                pruning, regions.ini reloads), starting and stopping the
 *                feed, systemd notification
 *      loop.c    the session loop: a fixed pool of worker threads
 *   7  main.c    command line, startup checks, daemonizing, the session
 *                loop and the orderly shutdown
 * Everything but main.c is the static library libregionfs-fs, which the
 * unit tests link.
 *
 * Lock order, for every lock in fs/ (a lock may be taken while holding
 * only locks to its left):
 *   cfg_lock (state.c) -> swap gate -> table shard lock (state.c)
 *   name locks (commit.c; a rename's two in stripe order) -> swap gate
 *   handle->mu (handle.c) -> inode table lock -> node lock (inode.c)
 *   name locks -> inode table lock
 *   handle list stripe lock (handle.c), marker lock (inode.c): leaves
 * No fs/ lock is held across fuse_reply_*(). None is held across store_*()
 * calls or calls into regions/ that may sleep (region_get() joining a
 * flight) except the name locks and the swap gate, which exist to order
 * store operations (commit.c); a flight's loader takes neither. Engine
 * stripe locks are never visible here.
 */
#ifndef RFS_FS_H
#define RFS_FS_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "region.h"
#include "store.h"
#include "virtual.h"

#ifndef RFS_VERSION
#define RFS_VERSION "unknown"
#endif

#define RFS_DEFAULT_CONFIG "/etc/regionfs/regions.ini"

/*
 * Hard cap on a value, whatever regions.ini says: SQLite's default
 * SQLITE_MAX_LENGTH (1,000,000,000 bytes) refuses larger blobs.
 */
#define RFS_MAX_VALUE 1000000000ULL

/* ---- log.c --------------------------------------------------------------- */

enum rfs_log_level {
	RFS_LOG_ERR = 0,
	RFS_LOG_WARNING,
	RFS_LOG_NOTICE,
	RFS_LOG_INFO,
	RFS_LOG_DEBUG,
};

/* Until rfs_log_to_syslog() is called, lines go to stderr. */
void rfs_log_to_syslog(void);
void rfs_log_set_debug(bool on);
void rfs_log(enum rfs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * Escapes klen bytes of key for a log line: printable ASCII stays, a
 * backslash becomes "\\", every other byte "\xNN". Returns buf, which must
 * hold RFS_ESC_LEN bytes (enough for REGION_MAX_KEY bytes; longer keys are
 * cut with "...").
 */
#define RFS_ESC_LEN (REGION_MAX_KEY * 4 + 4)
const char *rfs_escape(const void *key, size_t klen, char *buf);
/* Routes libfuse's own messages through rfs_log(). */
void rfs_log_capture_fuse(void);

/* ---- state.c: regions ---------------------------------------------------- */

/*
 * One region as the daemon serves it: the live cache and the settings it
 * was configured with. Immutable after creation except refs; a reload that
 * changes a region's settings builds a new struct rfs_region (which may
 * share the struct region when the limits can be applied live).
 */
struct rfs_region {
	atomic_ulong refs;	  /* the table, requests, handles */
	struct region *r;	  /* one engine reference held */
	struct config_region cfg; /* copy of the effective settings */
	/*
	 * The counters (REGION_SRC_SLOT and _DERIVED, sketch_resets) of the
	 * caches a reload recreated this one from, up to the swap: the
	 * stats show them added to r's, so they never restart from 0.
	 * Immutable after the table is built.
	 */
	struct region_stats carried;
};

/*
 * The set of regions: an immutable snapshot, replaced whole by a reload.
 * byname is sorted with strcmp for bsearch; v is in regions.ini order.
 */
struct rfs_table {
	atomic_ulong refs;
	size_t n;
	struct rfs_region **v;	    /* file order; one reference each */
	struct rfs_region **byname; /* the same pointers, sorted */
};

/* The region called name, with a reference, or NULL. Never blocks long. */
struct rfs_region *rfs_region_ref(const char *name);
/* Is there a region called name? Takes no reference (no shared write). */
bool rfs_region_exists(const char *name);
/* How many regions there are now. */
size_t rfs_region_count(void);

/* Who may do what in a region (regions.ini owner, group, mode, ...). */
struct rfs_perms {
	uid_t uid; /* of its keys and directory */
	gid_t gid;
	mode_t mode;	 /* permission bits of its keys */
	mode_t dir_mode; /* of its directory */
	bool read_only;	 /* changes get EROFS */
	bool strict;	 /* coherence = strict: no kernel caching of its
			  * keys (timeouts 0), hits gated (rfs_hits_ok) */
};
/*
 * The region's permissions now (unset owner/group: -o uid=,gid= or the
 * daemon's). False, with those defaults, if there is no such region.
 */
bool rfs_region_perms(const char *name, struct rfs_perms *out);
void rfs_region_unref(struct rfs_region *rr);
/* The current table, with a reference. */
struct rfs_table *rfs_table_ref(void);
void rfs_table_unref(struct rfs_table *t);
/*
 * The swap gate: a write holds it (shared) from its E1 to its E2, so that
 * a reload never swaps the region table in between (commit.c). Not
 * recursive: take it once.
 */
void rfs_swap_gate_enter(void);
void rfs_swap_gate_leave(void);
/* Index of name in t->v, or -1. */
long rfs_table_index(const struct rfs_table *t, const char *name);
/* The region of t called name, or NULL; no reference (t holds one). */
struct rfs_region *rfs_table_find(const struct rfs_table *t, const char *name);

/* ---- state.c: global state ----------------------------------------------- */

/*
 * The daemon. One per process. Fields in the first group are set by
 * main.c before the session loop starts and never change afterwards.
 */
struct rfs {
	struct store *st;
	struct fuse_session *se;
	const char *config_path; /* absolute */
	const char *db_path;	 /* absolute */
	uid_t uid;		 /* owner shown for every file */
	gid_t gid;
	struct timespec mount_time; /* CLOCK_REALTIME at start */
	struct stat config_st; /* regions.ini as the start-up load saw it */
	bool foreground;
	unsigned grace_s; /* -o shutdown_grace: wait for writers on SIGTERM */
	unsigned poll_us; /* -o poll_us: an idle worker polls this long */
	/* values + write buffers; 0: none. -o max_memory, which wins over
	 * regions.ini's [defaults] max_memory (max_memory_opt), or that */
	_Atomic uint64_t max_memory;
	bool max_memory_opt;
	atomic_bool draining; /* SIGTERM: new opens of keys get ESHUTDOWN */
	bool ro;	      /* -o ro: the kernel refuses every change */
	bool open_requests;   /* -o open_requests: no zero-request opens */
	/*
	 * Zero-request opens (ops.c): -o ro on a kernel that offers
	 * FUSE_CAP_NO_OPEN_SUPPORT. Set by the INIT handler, before any
	 * other request; OPEN then answers ENOSYS and READ serves by inode.
	 */
	atomic_bool noopen;

	/* the configuration's state; L: cfg_lock */
	pthread_mutex_t cfg_lock;
	uint64_t generation;		 /* 1 at start, +1 per applied reload */
	int64_t loaded_at;		 /* CLOCK_REALTIME seconds */
	bool last_ok;			 /* result of the last load */
	char last_error[CONFIG_ERR_LEN]; /* its message, "" when ok */
	atomic_ulong reloads;		 /* successful reloads */
	atomic_ulong reload_failures;	 /* refused reloads */
	atomic_ulong cache_rebuilds;	 /* regions a reload recreated */

	/* malloc_trim(0) on the background thread (daemon.c), microseconds */
	atomic_ulong trims;	   /* calls so far */
	atomic_ulong trim_last_us; /* the last one took */
	atomic_ulong trim_max_us;  /* the longest */
	atomic_ulong trim_total_us;
};

extern struct rfs rfs;

#define RFS_POLL_US_MAX 100000u /* -o poll_us: at most 100 ms */

/*
 * May the cache serve a hit of rr's keys? Always, unless the region is
 * coherence = strict and the store says this mount's lease has lapsed
 * and it has not replayed the change log since (store_hits_ok()): then
 * every read goes to the store (fails with EIO while it is unreachable).
 */
static inline bool rfs_hits_ok(const struct rfs_region *rr)
{
	return rr->cfg.coherence != CONFIG_COHERENCE_STRICT || !rfs.st ||
	       store_hits_ok(rfs.st);
}

/*
 * Builds the first region table from c (which the daemon keeps no pointer
 * to). Sets generation 1. 0 or -errno.
 */
int rfs_state_init(const struct config *c);
/* Drops the table. After the session loop and the background thread. */
void rfs_state_fini(void);
/*
 * A reload (cfg_lock held): builds the table for c from the current one
 * and swaps it in (after the writes between E1 and E2: the swap gate).
 * *old gets the previous table (a reference). On error writes a message
 * into err and changes nothing.
 */
/*
 * Can a recreated region's cache take over the entries of its old one?
 * Not when either has ttl or tti: an entry's age would restart.
 */
bool rfs_carry_possible(const struct config_region *from,
			const struct config_region *to);
int rfs_state_replace(const struct config *c, struct rfs_table **old, char *err,
		      size_t errlen);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t rfs_mono_ns(void);
/*
 * Watching a directory for a name (regions.ini, the database and its
 * -wal): an inotify fd (non-blocking) with a watch for mask on the
 * directory of path (absolute), or -errno; dir gets that directory, for
 * messages. rfs_watch_hit() reads every pending event: true if one named
 * base (prefix: or any name that starts with base) or events were lost.
 */
int rfs_watch_dir(const char *path, uint32_t mask, char *dir, size_t dirlen);
bool rfs_watch_hit(int fd, const char *base, bool prefix);
/* A 64-bit finalizer (murmur3's fmix64): spreads every input bit. */
uint64_t rfs_hash_mix(uint64_t h);
/*
 * FNV-1a over region, a 0xff separator (no region name holds it) and the
 * key's klen bytes, from basis, then rfs_hash_mix().
 */
uint64_t rfs_name_hash(uint64_t basis, const char *region, const void *key,
		       size_t klen);
/*
 * Blocks every signal in this thread (*old: the mask before), so that a
 * thread created meanwhile (here, or inside store_open()) inherits that;
 * restores *old.
 */
void rfs_signals_block(sigset_t *old);
void rfs_signals_restore(const sigset_t *old);
/*
 * pthread_create() with every signal blocked in the new thread (they
 * belong to the session loop's threads), named name (may be NULL).
 * 0 or -errno.
 */
int rfs_thread_spawn(pthread_t *t, void *(*fn)(void *), void *arg,
		     const char *name);

/* ---- pinned.c: values open files hold ------------------------------------ */

/*
 * One read handle's pin on its value (embedded in struct rfs_rhandle;
 * zeroed: not pinned). The fields are pinned.c's, under its bucket lock.
 */
struct rfs_pin {
	const struct region_value *v;	       /* NULL: not pinned */
	struct rfs_pin *next;		       /* bucket list (heads only) */
	struct rfs_pin *ring_prev, *ring_next; /* the other pins of v */
	bool head;			       /* on the bucket list */
};

/* Pins v for p (p->v NULL before): counted once per distinct value. */
void rfs_pin_add(struct rfs_pin *p, const struct region_value *v);
/* Unpins p, if pinned. */
void rfs_pin_del(struct rfs_pin *p);
/* Bytes (value data) and number of the distinct values pinned now. */
void rfs_pin_counters(uint64_t *bytes, uint64_t *values);

/* ---- carry.c: a recreated cache takes over the old one's entries --------- */

/*
 * After a reload swapped table t in for old: a job for each region t
 * recreated (rfs_carry_possible()), which carries the old cache's entries
 * into the new one in bounded steps. The background thread only, as for
 * the two below.
 */
void rfs_carry_start(const struct rfs_table *old, const struct rfs_table *t);
/* One bounded step of every job; true while work remains. */
bool rfs_carry_step(void);
/* Drops every job, done or not (shutdown). */
void rfs_carry_stop(void);
/* Entries carried over so far (stats: config_cache_carried). */
uint64_t rfs_carry_count(void);

/* ---- loop.c: the session loop -------------------------------------------- */

/*
 * Serves se until the session exits: cmd->max_threads worker threads, all
 * started at once and kept to the end (each with its store read
 * connection open: store_thread_prepare); libfuse's own loops for -s and
 * -o clone_fd. 0 or -errno. Call with rfs.st open, after rfs_bg_start().
 */
int rfs_loop_run(struct fuse_session *se, const struct fuse_cmdline_opts *cmd);

/* ---- daemon.c: the roof -------------------------------------------------- */

/*
 * Starts/stops the background thread and the change feed's thread
 * (rfs_feed_start/stop). Start after the mount is up and the store is
 * open, before the session loop serves requests, from the thread that
 * then runs the loop; stop after the loop, before the store is closed.
 */
int rfs_bg_start(void);
void rfs_bg_stop(void);
/* Asks the background thread to reload regions.ini. Async-signal-safe. */
void rfs_reload_request(void);
/*
 * SIGTERM/SIGINT: asks the background thread to end the session loop.
 * Async-signal-safe. rfs_loop_done() tells it the loop has returned.
 */
void rfs_exit_request(void);
void rfs_loop_done(void);
/*
 * Applies a configuration the loader read (the background thread calls
 * it; c stays the caller's). Returns 0 if it was applied, -errno if it
 * was refused (recorded for .regionfs/config and logged).
 */
int rfs_reload_apply(struct config *c);

/* ---- cfgload.c ----------------------------------------------------------- */

/*
 * Starts the loader thread, which reads regions.ini at path (kept as
 * given: symlinks are followed anew at every load) and watches its
 * directories through ifd (-1: none). wake() is called (under the
 * loader's lock, never after rfs_cfgload_stop()) when a result waits.
 */
int rfs_cfgload_start(const char *path, int ifd, void (*wake)(void));
/* Asks for a load: force (SIGHUP) always loads, else only if changed. */
void rfs_cfgload_request(bool force);
/*
 * Takes the loader's result: 1 and *c (the caller frees it) for a new
 * configuration, -1 with err for a refused one, 0 for none. *stuck_ms:
 * how long the current read has taken (0: not reading).
 */
int rfs_cfgload_take(struct config **c, char *err, size_t errlen,
		     uint64_t *stuck_ms);
/*
 * Stops the loader. True if it was idle (it touches nothing more, so ifd
 * may be closed); false if it is inside a read, from which it returns
 * only to exit.
 */
bool rfs_cfgload_stop(void);

/* Sends "READY=1" etc. to $NOTIFY_SOCKET if set. */
void rfs_sd_notify(const char *state);

/* ---- feed.c: outside writers --------------------------------------------- */

#define RFS_FEED_POLL_MS   10	/* poll interval without a watch, or failing */
#define RFS_FEED_SAFETY_MS 50	/* with a watch: poll at least this often */
#define RFS_FEED_GAP_MS	   2	/* with a watch: at most one poll per gap */
#define RFS_FEED_BATCH	   4096 /* changes applied per store_changes() call */
#define RFS_FEED_STALE_MS  1000 /* a longer error streak invalidates all */
#define RFS_FEED_BULK_MS   50	/* a longer backlog invalidates all */

/*
 * Starts the thread that polls the store's change feed and invalidates
 * the keys other processes changed (see feed.c). Takes the feed's cursor
 * at its head now: call it before any request can load a value. 0 or
 * -errno. rfs_bg_start() calls it.
 */
int rfs_feed_start(void);
/* Stops and joins the thread. Accepts a feed that never started. */
void rfs_feed_stop(void);
/*
 * Called by the feed thread for every change it applied, after the cache
 * was invalidated: key NULL (and region NULL) for "every key".
 */
typedef void (*rfs_feed_listener)(const char *region, const void *key,
				  size_t klen);
/*
 * The database file was deleted or replaced under the mount
 * (store_file_lost()): invalidates every region's cache, so that no read
 * serves a value the store can no longer confirm, and logs it; once. The
 * feed thread calls it at its next poll; a commit that failed on the loss
 * calls it before its close() returns EIO, so a read after that close()
 * fails too (a value a write-through install left in the cache would
 * otherwise be served until the poll).
 */
void rfs_feed_file_lost(void);
/* Sets the listener (none by default). Call before rfs_feed_start(). */
void rfs_feed_listen(rfs_feed_listener fn);
/* feed_changes and feed_lag_ms for struct rfs_counters. */
void rfs_feed_counters(uint64_t *changes, uint64_t *lag_ms);
/*
 * Milliseconds since the feed thread last finished a complete pass (0
 * before the first): it grows without bound while the feed is stuck or
 * failing, which feed_lag_ms (it moves only when a change is applied)
 * cannot show.
 */
uint64_t rfs_feed_poll_age_ms(void);
/*
 * White box, for tests/unit/test_feed.c (no thread): resets the feed's
 * state and counters as rfs_feed_start() does and takes the cursor;
 * makes one poll as the thread would (true: it stopped at
 * RFS_FEED_BATCH, more may wait); reads the cursor.
 */
void rfs_feed__reset(void);
bool rfs_feed__poll(void);
uint64_t rfs_feed__cursor(bool *have);

/* ---- state.c: counters --------------------------------------------------- */

/*
 * The daemon's counters (struct rfs_counters in virtual.h), kept in
 * per-thread slots so that hot counters never share a cache line between
 * threads (seed 003), and summed by rfs_counters_sum().
 */
#define RFS_CTR_ENUM(src, id, ...)    RFS_CTR_ENUM_##src(id)
#define RFS_CTR_ENUM_RFS_SRC_SLOT(id) id,
#define RFS_CTR_ENUM_RFS_SRC_OTHER(id)
enum rfs_ctr {
	RFS_COUNTERS(RFS_CTR_ENUM) /* the RFS_SRC_SLOT ones, in list order */
	RFS_C_NR,
};

void rfs_count(enum rfs_ctr c, int64_t n);
/* The sum of counter c over every slot (a gauge never goes below 0). */
uint64_t rfs_counter(enum rfs_ctr c);
/* A small per-thread number (0..n-1), assigned on first use. */
unsigned rfs_thread_slot(unsigned n);
/*
 * A new serial for a value the daemon makes (its tag, region_value_tag():
 * handle.c's loads and commit.c's write-through installs). Starts at 1.
 */
uint64_t rfs_value_serial(void);

/* ---- view.c: the snapshot of the virtual files --------------------------- */

/*
 * Fills *v for the virtual files. Every pointer in *v stays valid until
 * rfs_view_release(); strings are copied into *v's own storage.
 */
struct rfs_view_hold {
	struct rfs_view view;
	struct rfs_table *t;
	struct rfs_region_view *rv;
	char last_error[CONFIG_ERR_LEN];
};
int rfs_view_build(struct rfs_view_hold *h);
void rfs_view_release(struct rfs_view_hold *h);
/* Every counter of the daemon (the stats files' "counters"). */
void rfs_counters_sum(struct rfs_counters *out);

/* ---- ops.c --------------------------------------------------------------- */

extern const struct fuse_lowlevel_ops rfs_ops;

/*
 * The row of a key as this mount knows it, without counting a hit or a
 * miss: from the cached value when there is one (size, mtime, version;
 * a strict region without a live lease asks the store), else
 * store_stat() on the covering index. -ENOENT for an unknown region.
 */
int rfs_key_meta(const char *region, const void *key, size_t klen,
		 struct store_meta *m);

/*
 * Kernel entries handed out for names: LOOKUP and READDIRPLUS replies
 * that make the kernel cache a name as an inode with a row's attributes
 * (not a writer's) or as missing, and renames, count on the name's
 * stripe. A mark taken when the kernel's entry for a name is known to be
 * a writer's or none (a CREATE's reply; a write open whose invalidation
 * the reply waits for) proves, while the stripe's count has not moved,
 * that the kernel still holds no entry a commit could make stale, so the
 * commit need not invalidate it (commit.c).
 */
struct rfs_entry_mark {
	bool valid;
	unsigned stripe;
	uint64_t seq;
};

/* ---- inode.c ------------------------------------------------------------- */

/* Fixed inode numbers. Dynamic ones start at RFS_INO_DYNAMIC. */
#define RFS_INO_ROOT	 1 /* FUSE_ROOT_ID */
#define RFS_INO_VDIR	 2 /* .regionfs/ */
#define RFS_INO_VSTATS	 3 /* .regionfs/stats */
#define RFS_INO_VMETRICS 4 /* .regionfs/metrics.prom */
#define RFS_INO_VCONFIG	 5 /* .regionfs/config */
#define RFS_INO_VREGIONS 6 /* .regionfs/regions/ */
#define RFS_INO_DYNAMIC	 16

#define RFS_VDIR_NAME "regionfs" /* after the leading '.' */

/* What a dynamic inode names. */
enum rfs_ikind {
	RFS_I_KEY = 0,	      /* <region>/<key> */
	RFS_I_REGION,	      /* <region>/ */
	RFS_I_VREGION,	      /* .regionfs/regions/<region>/ */
	RFS_I_VREGION_STATS,  /* .regionfs/regions/<region>/stats */
	RFS_I_VREGION_CONFIG, /* .regionfs/regions/<region>/config */
};

/*
 * What the kernel may cache of a key inode (inode.c explains). A key
 * inode starts as RFS_K_PAGE (or RFS_K_WRITE when made for a writer) and
 * moves down the list, except that a writer's inode whose page cache is
 * empty may become RFS_K_PAGE for a new row ("promotion").
 */
enum rfs_kclass {
	RFS_K_PAGE = 0, /* one row's content: page cache, immutable attrs */
	RFS_K_DIRECT,	/* immutable attrs; every open is direct I/O */
	RFS_K_WRITE,	/* open for writing: direct I/O, live attrs */
};

struct rfs_handle;

/* A copy of what an inode names, taken under the inode table's lock. */
struct rfs_ident {
	enum rfs_ikind kind;
	bool gone; /* unlinked, or replaced by a rename */
	char region[REGION_MAX_NAME + 1];
	char key[REGION_MAX_KEY + 1]; /* NUL-terminated; keys hold no NUL */
	size_t klen;
	/* a key: what the kernel may cache, and the row it stands for */
	enum rfs_kclass cls;
	struct store_meta row; /* RFS_K_PAGE, RFS_K_DIRECT: its attributes */
	/* a gone key: its last known row (size, mtime) */
	struct store_meta last;
	bool last_valid;
	/* an open write handle with uncommitted data: its size */
	bool pending;
	uint64_t pending_size;
};

int rfs_inode_init(void);
/* Frees every inode (at exit; the kernel is gone). */
void rfs_inode_fini(void);
/*
 * Finds or creates the inode for (kind, region) of a region kind (not
 * RFS_I_KEY) and counts one kernel lookup. 0 or -ENOMEM.
 */
int rfs_inode_lookup(enum rfs_ikind kind, const char *region, fuse_ino_t *ino);
/*
 * LOOKUP of a key whose row is *row: counts one kernel lookup of the
 * inode in *ino, which is
 *  - with write (CREATE), or when pid's last write open of this name was
 *    refused with ESTALE (rfs_inode_open_write): an RFS_K_WRITE inode of
 *    the name (one that exists, or a new one);
 *  - else the name's current inode if it is RFS_K_PAGE and stands for
 *    exactly *row (size, mtime and version), or a writer's inode of the
 *    name that can have no page cached and no open handle, which becomes
 *    the RFS_K_PAGE inode of *row (so a read after a write keeps the
 *    kernel's dentry), or a new RFS_K_PAGE inode for *row; it becomes
 *    current.
 * *cls gets its class. 0 or -ENOMEM.
 */
int rfs_inode_lookup_key(const char *region, const void *key, size_t klen,
			 const struct store_meta *row, pid_t pid, bool write,
			 fuse_ino_t *ino, enum rfs_kclass *cls);
/* The number of the current inode for a key, without counting; 0 if none. */
fuse_ino_t rfs_inode_peek(const char *region, const void *key, size_t klen);
/* The number of a region directory's inode, without counting; 0 if none. */
fuse_ino_t rfs_inode_peek_dir(const char *region);
/* Copies what ino names into *out. -ENOENT for an unknown number. */
int rfs_inode_ident(fuse_ino_t ino, struct rfs_ident *out);
/* FORGET: drops n lookups; frees the inode when nothing holds it. */
void rfs_inode_forget(fuse_ino_t ino, uint64_t n);
/*
 * The key was removed (unlink): its inodes become gone and stop answering
 * lookups. last (may be NULL) is the row as it was.
 */
void rfs_inode_unlinked(const char *region, const void *key, size_t klen,
			const struct store_meta *last);
/*
 * The new names of the inodes a rename moves, allocated before the
 * store's rename (rfs_inode_rename_prepare()): moving an inode needs its
 * new name, and one that could not move after the rename committed would
 * be gone while the kernel's entry of the new name (the kernel moves it
 * once RENAME succeeds) still names it, so opens of the new name would
 * read the old name's value, or ENOENT.
 */
struct rfs_inode_names {
	char **v;
	size_t n;
};
/*
 * One name for each inode of from, to move it to to (none for a rename
 * onto itself). Both names' locks held exclusive (commit.c), so no inode
 * gets or loses the name before rfs_inode_renamed(). 0, or -ENOMEM with
 * *names empty.
 */
int rfs_inode_rename_prepare(const char *region, const void *from, size_t flen,
			     const void *to, size_t tlen,
			     struct rfs_inode_names *names);
/* Frees what rfs_inode_renamed() did not use (*names may be zeroed). */
void rfs_inode_names_free(struct rfs_inode_names *names);
/*
 * from was renamed to to within region: the inodes of to become gone
 * (last: its row before, may be NULL), the inodes of from now name to, so
 * open files follow the rename. names (may be NULL): from
 * rfs_inode_rename_prepare(), used up first. false if an inode had to be
 * made gone instead of moved, for want of memory (the caller drops the
 * kernel's entry of to).
 */
bool rfs_inode_renamed(const char *region, const void *from, size_t flen,
		       const void *to, size_t tlen,
		       const struct store_meta *last,
		       struct rfs_inode_names *names);
/*
 * The key has a new row (a commit of ours, or the change feed's): its
 * current inode stops being current, so the next LOOKUP makes a new one
 * and an open of the old one is not served its pages. key NULL: every
 * key.
 */
void rfs_inode_changed(const char *region, const void *key, size_t klen);
/*
 * Calls fn(region, key, klen) for every key inode the kernel may hold an
 * entry for (region NULL: in every region), from a copy of the names taken
 * under the table lock, so fn may take it. For "every key changed": the
 * kernel keeps a child entry that was in use while its directory's entry
 * was invalidated, so each name is invalidated as well. -ENOMEM if the
 * copy could not be made (nothing called), else 0.
 */
int rfs_inode_each_key(const char *region,
		       void (*fn)(const char *region, const void *key,
				  size_t klen));
/*
 * A read-only open of key inode ino, which found v in the cache (v's load
 * serial is its tag, region_value_tag()). Decides what the handle serves:
 * *out gets a reference on that value, and *pcache says whether the kernel may keep
 * it in the page cache (keep_cache). Only bytes of the one value an
 * RFS_K_PAGE inode was first opened with ever enter its page cache; an
 * inode that cannot serve them any more becomes RFS_K_DIRECT. The handle
 * is counted until rfs_inode_close_read(). fill (may be NULL: not asked)
 * gets true for the open that should store the value into the kernel's
 * page cache before its reply (inode.c, "Filling"); it then calls
 * rfs_inode_filled(), and until then every other read open of ino gets
 * -EAGAIN (retry). -ENOENT if ino is unknown.
 */
int rfs_inode_open_read(fuse_ino_t ino, struct region_value *v,
			struct region_value **out, bool *pcache, bool *fill);
/*
 * Do the attributes the kernel caches for ino (an RFS_K_PAGE or
 * RFS_K_DIRECT inode's row, for KEY_TIMEOUT) describe another value than
 * v, which a direct-I/O open of it serves (the row changed: an outside
 * change whose entry invalidation is not sent yet, a commit of ours)?
 * Then a stat() of the path would show the old size next to the new
 * bytes this open reads: its reply waits for the name's entry to be
 * dropped (ops.c).
 */
bool rfs_inode_attrs_stale(fuse_ino_t ino, const struct region_value *v);
/* The store that rfs_inode_open_read()'s *fill asked for is done. */
void rfs_inode_filled(fuse_ino_t ino);
/* The release of a handle opened by rfs_inode_open_read(). */
void rfs_inode_close_read(fuse_ino_t ino, bool pcache);
/*
 * A READ without a handle (zero-request opens, ops.c): the value the
 * kernel's inode ino holds pages of, with a reference, in *out. The first
 * READ of a kernel inode pins a value on it until the kernel forgets the
 * inode: v, the cache's value of the key, if it is the inode's row (or,
 * the row having changed, a value of the same size: the kernel's inode
 * has no page yet, and the whole file is then the new value). v NULL
 * asks only for the pinned value: -EAGAIN if none yet. -EIO if v cannot
 * be served under the inode's size; -ENOENT if ino is unknown.
 */
int rfs_inode_kernel_value(fuse_ino_t ino, struct region_value *v,
			   struct region_value **out);

/* What the kernel must forget of an inode a writer opens. */
enum rfs_inval {
	RFS_INVAL_NONE = 0,
	RFS_INVAL_ATTR, /* its attributes (notify_inval_inode, offset -1) */
	RFS_INVAL_ALL,	/* attributes and pages (offset 0, length 0) */
};

struct rfs_wopen {
	enum rfs_inval inval; /* to send before replying to the OPEN */
	uint64_t gen;	      /* RFS_INVAL_ALL: for rfs_inode_cleaned() */
};

/*
 * A write open of key inode ino by pid (readable: O_RDWR). 0: go ahead;
 * the inode is now RFS_K_WRITE and the handle is counted until
 * rfs_inode_close_write(); wo says what the kernel may hold of it (it
 * was cached with long timeouts): the caller sends that invalidation
 * before replying, and after RFS_INVAL_ALL calls rfs_inode_cleaned().
 * -ESTALE: page-cache readers have it open (a writer would truncate or
 * grow the size they read by): the kernel retries the open after a
 * LOOKUP, which rfs_inode_lookup_key() answers with a writable inode.
 * -ENOENT if ino is unknown.
 */
int rfs_inode_open_write(fuse_ino_t ino, pid_t pid, bool readable,
			 struct rfs_wopen *wo);
/*
 * The kernel has dropped every page of ino (RFS_INVAL_ALL sent for the
 * open that returned gen): unless a handle that can read opened it since,
 * ino can have no page cached, and once its writers are gone it may
 * become the page-cache inode of the row they committed.
 */
void rfs_inode_cleaned(fuse_ino_t ino, uint64_t gen);
/* The release of a write handle counted by rfs_inode_open_write(). */
void rfs_inode_close_write(fuse_ino_t ino, bool readable);
/*
 * Attaches/detaches an open write handle to its inode, so that getattr
 * reports the size the writer sees and the inode outlives a FORGET that
 * overtakes the RELEASE. -ENOENT if ino is unknown.
 */
int rfs_inode_attach(fuse_ino_t ino, struct rfs_handle *h);
void rfs_inode_detach(fuse_ino_t ino, struct rfs_handle *h);
/* Gauge: inodes the kernel holds. */
uint64_t rfs_inode_count(void);
/*
 * Is a writer on the name (an open write handle, or a refused writer's
 * retry on its way)? LOOKUP then hands out no long-lived entry. A handle
 * whose commit is done and that has not changed since ("settled": its
 * close() has returned, its RELEASE may still be queued behind this
 * LOOKUP) does not count: should it write again (through a dup), its
 * commit finds the stripe's count moved by this LOOKUP (struct
 * rfs_entry_mark) and invalidates the entry.
 */
bool rfs_inode_writing(const char *region, const void *key, size_t klen);
/* The entry mark of a writer's inode (set by the LOOKUP that made it). */
void rfs_inode_set_mark(fuse_ino_t ino, const struct rfs_entry_mark *m);
void rfs_inode_get_mark(fuse_ino_t ino, struct rfs_entry_mark *m);

/* Refused write opens remembered (inode.c, "markers"). */
#define RFS_INODE_MARKERS 64

/* White box, for tests/unit/test_inode.c: one node's state and the table's. */
struct rfs_inode_probe {
	uint64_t nlookup;
	const struct region_value *pval; /* the page readers' value */
	bool anchored;
	bool pristine;
	bool filling;
	size_t ino_buckets, name_buckets; /* of the two hash tables */
	unsigned markers;		  /* in use */
};
/* Fills *p; -ENOENT (and only the table's fields) for an unknown ino. */
int rfs_inode__probe(fuse_ino_t ino, struct rfs_inode_probe *p);

/* ---- handle.c ------------------------------------------------------------ */

enum rfs_hkind {
	RFS_H_READ = 0, /* a key opened read-only: one value */
	RFS_H_WRITE,	/* a key opened for writing: a private buffer */
	RFS_H_VIRTUAL,	/* a .regionfs file: its rendered snapshot */
	RFS_H_DIR,	/* a directory: readdir cursor */
};

/* A copy-on-write buffer: shared (refs > 1) means immutable. */
struct rfs_wbuf {
	atomic_uint refs;
	size_t len; /* bytes of data */
	size_t cap; /* bytes allocated for data */
	char data[];
};

struct rfs_unborn; /* a created key not stored yet (commit.c) */

/*
 * A write handle. Locking: mu protects every field marked "L: mu"; the
 * fields read by getattr through the inode table (len, dirty, mod_seq) are
 * also atomics, written under mu and read without it. A commit runs
 * without mu (committing tells other flushes to wait on cond), on a
 * reference to the buffer, so writes during a commit copy the buffer
 * instead of changing what is being stored.
 */
struct rfs_whandle {
	pthread_mutex_t mu;
	pthread_cond_t cond;	       /* signalled when a commit ends */
	struct rfs_wbuf *buf;	       /* L: mu */
	bool committing;	       /* L: mu */
	bool append;		       /* immutable: O_APPEND */
	bool readable;		       /* immutable: O_RDWR */
	bool unnamed;		       /* immutable: the open dropped the
					* inode's entry (enter_writer()):
					* the kernel keeps the inode for
					* the RELEASE alone (linger.c) */
	int last_err;		       /* L: mu; error of the last commit */
	int broken;		       /* L: mu; -EFBIG: nothing is stored */
	struct rfs_unborn *ub;	       /* immutable: the key create() made
					* here (NULL: not created here) */
	struct rfs_entry_mark mark;    /* immutable after open (fs.h) */
	bool committed;		       /* L: mu; a commit of ours held */
	atomic_bool dirty;	       /* changed since the last commit */
	atomic_bool settled;	       /* committed, unchanged since: its
					* close() is done (rfs_inode_writing) */
	atomic_size_t len;	       /* buf->len, for getattr */
	atomic_uint_fast64_t mod_seq;  /* last change (global order) */
	struct rfs_region *rr;	       /* settings at open; one reference */
	fuse_ino_t ino;		       /* immutable; attached to the inode */
	struct rfs_handle *inode_next; /* L: inode table */
};

/*
 * A key opened read-only: one value. With pcache the kernel keeps the
 * value's pages in ino's page cache (rfs_inode_open_read() said so) and
 * the release tells the inode table (rfs_inode_close_read()).
 */
struct rfs_rhandle {
	struct region_value *v; /* one reference */
	fuse_ino_t ino;		/* immutable */
	bool pcache;		/* immutable: keep_cache, not direct_io */
	bool fill;		/* the OPEN stores v into the kernel's page
				 * cache (rfs_rhandle_fill()) */
	bool resync;		/* direct, and the kernel's attributes of ino
				 * are another row's (rfs_inode_attrs_stale) */
	struct rfs_pin pin;	/* v, counted in memory_pinned_bytes */
};

/* One directory listing in progress (region directories). */
struct rfs_dhandle {
	char region[REGION_MAX_NAME + 1];
	char last[REGION_MAX_KEY + 1]; /* last key returned */
	size_t last_len;	       /* 0: no cursor */
	off_t last_off;		       /* the offset after it */
};

/*
 * An open file or directory, in fi->fh. Requests on one handle may run
 * concurrently (two threads sharing an fd), except readdir, which the
 * kernel serializes per open directory (f_pos lock).
 */
struct rfs_handle {
	enum rfs_hkind kind;
	atomic_uint refs;		/* the kernel's (to RELEASE), replies */
	unsigned stripe;		/* which list (shutdown tracking) */
	struct rfs_handle *prev, *next; /* L: list stripe lock */
	union {
		struct rfs_rhandle r; /* RFS_H_READ */
		struct {	      /* RFS_H_VIRTUAL */
			char *buf;
			size_t len;
		} virt;
		struct rfs_whandle w; /* RFS_H_WRITE */
		struct rfs_dhandle d; /* RFS_H_DIR */
	} u;
};

/* Allocates a handle of kind and tracks it. NULL on ENOMEM. */
struct rfs_handle *rfs_handle_new(enum rfs_hkind kind);
/*
 * RELEASE: untracks h and drops the kernel's reference; h is freed (with
 * what it holds) when the last reference goes. Accepts NULL.
 */
void rfs_handle_free(struct rfs_handle *h);
/*
 * A read() reply points into the handle's value; it holds a reference on
 * the handle until fuse_reply_buf() has returned. (The kernel has copied
 * the data before it wakes the reader, so a RELEASE cannot really race
 * with the copy, but writev() returns later, and checkers such as ASan
 * look at the buffer only then.) Per handle, so concurrent readers of one
 * hot value never share a counter.
 */
void rfs_handle_ref(struct rfs_handle *h);
void rfs_handle_unref(struct rfs_handle *h);
/*
 * At shutdown, after the session loop: commits every dirty write handle
 * (logging errors) and frees every handle the kernel never released.
 */
void rfs_handles_shutdown(void);
/*
 * At RELEASE of a write handle whose open created the key: if none of its
 * commits held (ENOSPC, EFBIG, ...), the empty key its create left is
 * removed again, unless something changed it since; a failed close()
 * leaves the name as it was before the open.
 */
void rfs_whandle_release(struct rfs_handle *h);
/*
 * The global memory limit (rfs.max_memory: -o max_memory, else
 * regions.ini's [defaults] max_memory): values in memory
 * (region_values_bytes(): cached or pinned by open files) plus write
 * buffers. rfs_mem_admit(): -ENOMEM (counted) if adding extra bytes would
 * pass it even after the regions freed what they retired and no reader
 * can see (region_reclaim_retired(), only when it would).
 * rfs_mem_set_limit(): the config's value, at start and at every applied
 * reload; -o max_memory, when given, stays in force instead.
 */
void rfs_mem_set_limit(uint64_t max_memory);
int rfs_mem_admit(uint64_t extra);
/* Fills the mem_* fields of the daemon's counters. */
void rfs_mem_counters(struct rfs_counters *out);
/* Key files open for writing now (shutdown waits for them to close). */
unsigned rfs_handles_writers(void);

/*
 * The value of (rr, key) through the cache: a hit, or a load from the
 * store on this thread completed through the flight. 0 with a reference
 * in *out, -ENOENT, or -errno.
 */
int rfs_fetch(struct rfs_region *rr, const char *key, size_t klen,
	      struct region_value **out);
/*
 * The second half of rfs_fetch(): loads (rr, key) from the store and
 * completes fl, the caller's flight from region_get() on rr->r, with it
 * (or with the load's error). Same results as rfs_fetch().
 */
int rfs_flight_load(struct rfs_region *rr, struct region_flight *fl,
		    const char *key, size_t klen, struct region_value **out);
#ifdef RFS_TEST_HOOKS
/*
 * Test builds only (regionfs-testhooks): every cache-miss load sleeps this
 * long between reading the row and completing its flight, which widens the
 * window the stale-put guard closes. REGIONFS_TEST_LOAD_DELAY_US.
 */
extern unsigned rfs_test_load_delay_us;
#endif

/*
 * Opens key inode id for reading: the value of the key through the cache,
 * kept in the kernel's page cache if inode.c allows it. 0 with *out, or
 * -errno.
 */
int rfs_rhandle_open(struct rfs_region *rr, fuse_ino_t ino,
		     const struct rfs_ident *id, struct rfs_handle **out);
/*
 * The largest value an open stores into the kernel's page cache
 * (rfs_rhandle_fill()); larger ones are read with READ requests. The
 * kernel's readahead window (128 KiB): a value up to it is one READ, so
 * the store saves that request (and the GETATTR its atime costs). Past
 * it, the kernel's READs run ahead while the reader copies, and the
 * store, which fills single pages one by one in the daemon's own call,
 * cost more CPU per read (measured, not explained further). Daemon +
 * reader CPU per first read after a write, base against the store, three
 * interleaved runs on a loaded 2-vCPU VM (256 MiB of values each): 4 KiB
 * 131/96, 117/110, 133/84 us; 128 KiB 572/517, 524/479, 542/634; 256 KiB
 * 1130/1291, 1137/1309, 1199/937; 1 MiB 5208/5549, 4216/4910, 3801/4448.
 */
#define RFS_FILL_MAX (128 * 1024)
/*
 * Before the reply to the OPEN of read handle h (ops.c): if inode.c
 * asked for it (h->u.r.fill), stores the handle's value into the
 * kernel's page cache of its inode (FUSE_NOTIFY_STORE, offset 0, whole
 * value), counted in kernel_fills or kernel_fill_failures (then the
 * reads are READs, as without it).
 */
void rfs_rhandle_fill(struct rfs_handle *h);
/*
 * Opens a key for writing: a handle whose buffer is a copy of the current
 * value, or empty with O_TRUNC (which also makes it dirty), or empty and
 * dirty when created (the unborn key created, from rfs_commit_create(),
 * which the handle owns once the open succeeded: its first commit
 * stores the key).
 * Takes its own reference on rr. The inode becomes a writer's
 * (rfs_inode_open_write(), for pid): -ESTALE when page-cache readers have
 * it open, and when the inode is gone (unlinked or replaced: the kernel
 * walks the path again). -ENOENT if the key does not exist. The inode's
 * name is locked (commit.c) for the fill, unless locked says the caller
 * holds it (create(); then key is the name).
 */
int rfs_whandle_open(struct rfs_region *rr, fuse_ino_t ino, pid_t pid,
		     const char *key, size_t klen, int flags,
		     struct rfs_unborn *created, bool locked,
		     struct rfs_handle **out);
/*
 * truncate(2) of a path resolved to key inode ino, by pid: like a write
 * open, with no handle left counted: -ESTALE unless ino is a writer's
 * (the kernel retries on one), *mark its entry mark. -ENOENT if ino is
 * unknown.
 */
int rfs_truncate_enter(fuse_ino_t ino, pid_t pid, struct rfs_entry_mark *mark);
/* write(): 0 with *written, -EFBIG, -ENOMEM. */
int rfs_whandle_write(struct rfs_handle *h, const char *data, size_t size,
		      off_t off);
/* ftruncate(): -EFBIG, -ENOMEM. */
int rfs_whandle_truncate(struct rfs_handle *h, off_t size);
/* A reference on the current buffer (for read() on O_RDWR). */
struct rfs_wbuf *rfs_whandle_snapshot(struct rfs_handle *h);
void rfs_wbuf_unref(struct rfs_wbuf *b);
/*
 * Commits the buffer if it changed since the last commit. durable adds
 * STORE_DURABLE. 0 or -errno; on error what was written so far is dropped
 * (not dirty any more: the RELEASE does not commit it after the close()
 * that reported the error) and later calls return the error again until
 * a new write makes the buffer dirty.
 */
int rfs_whandle_commit(struct rfs_handle *h, bool durable);

/* ---- linger.c: late RELEASE replies of write handles ----------------------- */

/*
 * Answers the RELEASE req of a write handle (already freed) on inode ino
 * at the next rfs_linger_opened(ino), or within a few milliseconds, so
 * that the kernel keeps the inode for the LOOKUP that reads the key back
 * (linger.c explains); at once when LINGER_MAX replies wait already.
 */
void rfs_linger_release(fuse_req_t req, fuse_ino_t ino);
/* An OPEN or GETATTR of ino: its waiting reply, and any overdue one, go. */
void rfs_linger_opened(fuse_ino_t ino);
/* Sends the overdue replies (the background thread's tick). */
void rfs_linger_expire(void);
/* Sends every waiting reply, and from now on answers at once (DESTROY,
 * shutdown). */
void rfs_linger_stop(void);

/* ---- kinval.c: the kernel's cached names ---------------------------------- */

/*
 * Starts/stops the thread that sends entry invalidations (kinval.c).
 * Without it (unit tests) every call below does nothing but reply.
 */
int rfs_kinval_start(void);
void rfs_kinval_stop(void);
/* Queues an invalidation of the entry name (len bytes) in parent. */
void rfs_kinval_entry(fuse_ino_t parent, const char *name, size_t len);
/* The same for the key's entry in its region directory. */
void rfs_kinval_key(const char *region, const void *key, size_t klen);
/* The region directory's entry (NULL: every region's). */
void rfs_kinval_region(const char *region);
/*
 * Calls fn(arg) once every invalidation queued before this call has been
 * sent: at once (on this thread) if none is pending, else on the
 * notification thread. Never blocks. fn sends a deferred reply; only
 * requests whose kernel side holds no directory or inode lock may be
 * deferred (kinval.c).
 */
void rfs_kinval_then(void (*fn)(void *arg), void *arg);
/* rfs_kinval_then() of fuse_reply_err(req, -rc). */
void rfs_kinval_reply(fuse_req_t req, int rc);
/* Entry invalidations sent so far. */
uint64_t rfs_kinval_sent(void);

/* ---- commit.c: the write protocol and the order of changes of a name --- */

/* Name locks held: one or two stripes (commit.c explains). */
struct rfs_names {
	unsigned s[2];
	unsigned n;
	bool excl; /* an exclusive lock counts a change at the unlock */
};

/*
 * Locks the name (region, key): exclusive for a change of the name,
 * shared to use it (a commit, a write open, a LOOKUP). Not recursive.
 */
void rfs_names_lock(struct rfs_names *l, const char *region, const void *key,
		    size_t klen, bool excl);
void rfs_names_unlock(struct rfs_names *l);
/*
 * Locks the name inode ino has, and copies what it names into *id; the
 * name (and whether it is gone) cannot change until the unlock. -ENOENT
 * (nothing locked) for an unknown number.
 */
int rfs_names_lock_ino(struct rfs_names *l, fuse_ino_t ino, bool excl,
		       struct rfs_ident *id);

/*
 * Counts an entry handed out for the name (before its row is read); *m
 * (may be NULL) gets the mark right after that count.
 */
void rfs_names_handed(const char *region, const void *key, size_t klen,
		      struct rfs_entry_mark *m);
/* Every stripe's count (READDIRPLUS: names not known before listing). */
void rfs_names_handed_all(void);

/*
 * Negative notes: a CREATE right after its own LOOKUP found the name
 * missing need not ask the store again (commit.c). The LOOKUP takes the
 * name's change count under its shared lock before it reads the row
 * (rfs_names_absent_begin), and notes a miss for the caller's thread
 * (rfs_names_absent_note); the CREATE, under the exclusive lock, takes
 * the note (rfs_names_absent_take): true only for the same thread and
 * name, with no exclusive section of the name's stripe (every change of
 * existence through this mount: create, unlink, rename, truncate) and no
 * outside change the feed applied (rfs_names_changed) in between.
 */
struct rfs_absent {
	unsigned stripe;
	uint64_t seq;
};
void rfs_names_absent_begin(const char *region, const void *key, size_t klen,
			    struct rfs_absent *a);
void rfs_names_absent_note(pid_t pid, const char *region, const void *key,
			   size_t klen, const struct rfs_absent *a);
bool rfs_names_absent_take(pid_t pid, const char *region, const void *key,
			   size_t klen);
/* An outside change of the name (key NULL: of every name), from the feed. */
void rfs_names_changed(const char *region, const void *key, size_t klen);
/* A mark of the name now. */
void rfs_names_mark(const char *region, const void *key, size_t klen,
		    struct rfs_entry_mark *m);

/*
 * A write handle's commit of data to the name its inode ino has now: E1,
 * store_put, E2. 0 without storing anything if the inode is gone
 * (unlinked or replaced while open). flags: STORE_*. cache: E2 may leave
 * the committed value in the cache (a write-through install, commit.c)
 * instead of evicting it. mark (may be NULL): the handle's, see above;
 * with it, the kernel's entry is invalidated only if needed. 0 or -errno.
 */
int rfs_commit_handle(fuse_ino_t ino, const void *data, size_t len,
		      unsigned flags, bool cache,
		      const struct rfs_entry_mark *mark, struct rfs_unborn *ub);
/*
 * create(): -EEXIST with O_EXCL in oflags if the key exists (in the store,
 * or unborn: created here and not committed yet); if it does not, it
 * becomes unborn (*created, see below): nothing is stored until its
 * writer's first commit. Then the writer's inode of the name
 * (rfs_inode_lookup_key() with write: *ino with one lookup counted,
 * *cls). On success the name stays locked in *l (exclusive) until the
 * caller has opened its handle and calls rfs_names_unlock(); on error
 * nothing is locked. *created belongs to the caller: its write handle's
 * commits pass it to rfs_commit_handle(), and rfs_unborn_free() ends it.
 */
int rfs_commit_create(const char *region, const char *key, size_t klen,
		      int oflags, pid_t pid, struct rfs_names *l,
		      fuse_ino_t *ino, enum rfs_kclass *cls,
		      struct rfs_unborn **created);
/*
 * Unborn keys (commit.c explains): a created key whose row its writer has
 * not committed yet. rfs_unborn_settle() commits the empty row of the
 * name if it is unborn, for anyone else who needs the row (takes the
 * name's lock shared; 0 or the commit's error); _region() does so for
 * every unborn name of a region (before a listing). rfs_unborn_is(): is
 * the name unborn now (a peek; the name's lock makes it stable).
 */
int rfs_unborn_settle(const char *region, const void *key, size_t klen);
/* rfs_unborn_settle() with the name's lock held (shared or exclusive). */
int rfs_unborn_settle_locked(const char *region, const void *key, size_t klen);
int rfs_unborn_settle_region(const char *region);
/* rfs_unborn_settle() of u's name, by u's writer (a flush before any write). */
int rfs_unborn_settle_own(struct rfs_unborn *u);
bool rfs_unborn_is(const char *region, const void *key, size_t klen);
/*
 * The writer's commits all failed: an unborn name goes without a trace
 * (0); -EEXIST if a settle committed its empty row (*version: that row,
 * for rfs_commit_delete_created()). Takes the name's lock.
 */
int rfs_unborn_drop(struct rfs_unborn *u, uint64_t *version,
		    const struct rfs_entry_mark *mark);
/* Ends u (NULL is fine): an unborn name goes, nothing is stored. */
void rfs_unborn_free(struct rfs_unborn *u);

/*
 * truncate(2) of a path: the row of the name inode ino has (also when a
 * rename or unlink just made it gone: like open, it goes by the name)
 * resized to size and committed. -EFBIG above the region's
 * max_value_size, -ENOENT if the key or the region is gone.
 */
int rfs_commit_truncate(fuse_ino_t ino, off_t size,
			const struct rfs_entry_mark *mark);
/* unlink: E1, store_delete, E2, the name's inodes become gone. */
int rfs_commit_delete(const char *region, const void *key, size_t klen);
/*
 * Removes (region, key) if its row is still the empty one of version
 * that a create committed (the unlink protocol, conditional in the
 * store). -ENOENT if it changed or is gone.
 */
int rfs_commit_delete_created(const char *region, const void *key, size_t klen,
			      uint64_t version,
			      const struct rfs_entry_mark *mark);
/*
 * rename within region: E1, store_rename, E2 on both names, then the
 * inodes of to become gone and those of from move to to. noreplace:
 * -EEXIST if to exists (checked against this mount's changes only).
 */
int rfs_commit_rename(const char *region, const void *from, size_t flen,
		      const void *to, size_t tlen, bool noreplace);

#endif /* RFS_FS_H */
