/*
 * region.h - in-memory cache regions.
 *
 * A region is a named, bounded key/value cache whose keys are spread over
 * lock-striped hash tables. Values are immutable, reference-counted buffers:
 * a reference stays valid for whoever holds it, even after the key is
 * evicted, expired or overwritten.
 *
 * Thread-safe. Functions returning int return 0 (or a documented positive
 * code) or a negative errno. Out-pointers come last and are set to NULL on
 * failure. Keys are byte strings of 1..REGION_MAX_KEY bytes; the engine does
 * not interpret them (fs/ checks for '/' and NUL).
 *
 * This header includes neither FUSE nor SQLite: the engine knows nothing of
 * where values come from. A miss hands the caller a *flight*; the caller
 * loads the value (from the store) without holding any lock and completes
 * the flight, which installs the value unless a write-eviction poisoned the
 * flight meanwhile (the stale-put guard, see regions/region.c).
 */
#ifndef RFS_REGION_H
#define RFS_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REGION_MAX_KEY	   255 /* bytes in a key */
#define REGION_MAX_NAME	   64  /* bytes in a region name, without NUL */
#define REGION_MAX_STRIPES 4096
/*
 * A region is created with at most max_entries / this many stripes: 256
 * entries a stripe keep the policy's miss ratio (bench_hitratio on the
 * shipped and cache2k traces, seeds 1-3: cells behind the frontier 11, 11,
 * 11 against 12, 13, 12 with 512), and a region of 512 entries gets two
 * stripes' locks instead of one (bench_engine's mix, capacity 512).
 */
#define REGION_STRIPE_MIN_ENTRIES 256

struct region;	      /* opaque */
struct region_value;  /* opaque; immutable, reference counted */
struct region_flight; /* opaque; one load in the air */

enum region_strategy {
	REGION_STRATEGY_LRU = 0, /* exact LRU per stripe, batched recording */
	REGION_STRATEGY_S3FIFO,	 /* small/main FIFO queues + ghost (S3-FIFO) */
	REGION_STRATEGY_TINYLFU, /* adaptive W-TinyLFU (window + SLRU + sketch) */
};

/* Where an invalidation came from; counted separately in the stats. */
enum region_origin {
	REGION_ORIGIN_LOCAL = 0, /* a write through this mount (E1/E2) */
	REGION_ORIGIN_OUTSIDE,	 /* a change by another process (change feed) */
};

struct region_limits {
	uint64_t max_entries;	 /* evict above this; 0 = unlimited */
	uint64_t max_bytes;	 /* key + value bytes; 0 = unlimited */
	uint64_t max_value_size; /* larger values are refused; 0 = no limit */
	uint64_t ttl_ms;   /* expire this long after load/write; 0 = never */
	uint64_t tti_ms;   /* expire this long after last access; 0 = never */
	unsigned nstripes; /* power of two, 1..REGION_MAX_STRIPES */
	enum region_strategy strategy;
};

/*
 * Every number of struct region_stats, defined once: the struct, the
 * engine's per-thread counter slots (regions/stats.c), the stats files and
 * metrics.prom (fs/virtual.c) and the check against doc/stats.md
 * (tests/integration/test_virtual.c) are all generated from this list, in
 * its order, which is the order of the stats files. A new counter is one
 * line here, one row in doc/stats.md and the code that counts it.
 *
 * X(src, ID, field, unit, line, prom, label, help):
 *   src    where the number comes from: REGION_SRC_SLOT (a counter in the
 *          per-thread slots, whose index is ID), REGION_SRC_STRIPE (a gauge
 *          summed over the stripes), REGION_SRC_DERIVED (computed from
 *          other counters) or REGION_SRC_REGION (a property of the region);
 *          the last two kinds are set by hand in region_stats()
 *   ID     the slot index (enum region_stat) of a SLOT counter, else NONE
 *   field  the field of struct region_stats (uint64_t)
 *   unit   REGION_UNIT_COUNT, or REGION_UNIT_NS (nanoseconds: the stats
 *          line shows microseconds, metrics.prom exact seconds)
 *   line   its line in the stats files
 *   prom   its metrics.prom family, "" for none; STRIPE and REGION
 *          numbers are gauges, the others counters
 *   label  its label value when several fields share a family (fs/virtual.c
 *          names the label), else NULL
 *   help   the family's HELP text (for a shared family: fs/virtual.c's)
 */
#define REGION_STATS(X)                                                        \
	X(REGION_SRC_DERIVED, NONE, gets, REGION_UNIT_COUNT, "gets",           \
	  "regionfs_gets_total", NULL,                                         \
	  "Lookups of keys in the region's cache.")                            \
	X(REGION_SRC_SLOT, ST_HITS, hits, REGION_UNIT_COUNT, "hits",           \
	  "regionfs_hits_total", NULL, "Lookups served from the cache.")       \
	X(REGION_SRC_SLOT, ST_MISSES, misses, REGION_UNIT_COUNT, "misses",     \
	  "regionfs_misses_total", NULL,                                       \
	  "Lookups not served from the cache (including coalesced ones).")     \
	X(REGION_SRC_SLOT, ST_COALESCED, coalesced, REGION_UNIT_COUNT,         \
	  "coalesced", "regionfs_coalesced_total", NULL,                       \
	  "Misses that waited for another reader's load of the same key.")     \
	X(REGION_SRC_SLOT, ST_LOADS, loads, REGION_UNIT_COUNT, "loads",        \
	  "regionfs_loads_total", NULL,                                        \
	  "Loads from the store completed successfully.")                      \
	X(REGION_SRC_SLOT, ST_LOAD_FAILURES, load_failures, REGION_UNIT_COUNT, \
	  "load_failures", "regionfs_load_failures_total", NULL,               \
	  "Loads from the store completed with an error.")                     \
	X(REGION_SRC_SLOT, ST_LOAD_NOT_FOUND, load_not_found,                  \
	  REGION_UNIT_COUNT, "load_not_found",                                 \
	  "regionfs_load_not_found_total", NULL,                               \
	  "Loads from the store that found no such key.")                      \
	X(REGION_SRC_SLOT, ST_LOAD_NS, load_ns, REGION_UNIT_NS,                \
	  "load_time_us", "regionfs_load_seconds_total", NULL,                 \
	  "Time loads from the store were in the air.")                        \
	X(REGION_SRC_SLOT, ST_STALE_PUTS, stale_puts_rejected,                 \
	  REGION_UNIT_COUNT, "stale_puts_rejected",                            \
	  "regionfs_stale_puts_rejected_total", NULL,                          \
	  "Installs of loaded values refused because a write overlapped.")     \
	X(REGION_SRC_SLOT, ST_UNCACHEABLE, uncacheable, REGION_UNIT_COUNT,     \
	  "uncacheable", "regionfs_uncacheable_total", NULL,                   \
	  "Loaded values too large to be cached.")                             \
	X(REGION_SRC_SLOT, ST_INSTALLS, installs, REGION_UNIT_COUNT,           \
	  "installs", "regionfs_installs_total", NULL,                         \
	  "Values installed in the cache.")                                    \
	X(REGION_SRC_SLOT, ST_WRITE_INSTALLS, write_installs,                  \
	  REGION_UNIT_COUNT, "write_installs",                                 \
	  "regionfs_write_installs_total", NULL,                               \
	  "Values installed by the write that committed them.")                \
	X(REGION_SRC_SLOT, ST_INV_LOCAL, invalidations_local,                  \
	  REGION_UNIT_COUNT, "invalidations_local",                            \
	  "regionfs_invalidations_total", "local",                             \
	  "Keys invalidated by writes through this mount.")                    \
	X(REGION_SRC_SLOT, ST_INV_OUTSIDE, invalidations_outside,              \
	  REGION_UNIT_COUNT, "invalidations_outside",                          \
	  "regionfs_invalidations_total", "outside",                           \
	  "Keys invalidated by changes of other processes.")                   \
	X(REGION_SRC_SLOT, ST_EV_SIZE, evictions_size, REGION_UNIT_COUNT,      \
	  "evictions_size", "regionfs_evictions_total", "size",                \
	  "Entries evicted for max_entries or max_bytes.")                     \
	X(REGION_SRC_SLOT, ST_EV_TTL, evictions_ttl, REGION_UNIT_COUNT,        \
	  "evictions_ttl", "regionfs_evictions_total", "ttl",                  \
	  "Entries expired by ttl.")                                           \
	X(REGION_SRC_SLOT, ST_EV_TTI, evictions_tti, REGION_UNIT_COUNT,        \
	  "evictions_tti", "regionfs_evictions_total", "tti",                  \
	  "Entries expired by tti.")                                           \
	X(REGION_SRC_STRIPE, NONE, entries, REGION_UNIT_COUNT, "entries",      \
	  "regionfs_cache_entries", NULL, "Entries in the cache.")             \
	X(REGION_SRC_STRIPE, NONE, bytes, REGION_UNIT_COUNT, "bytes",          \
	  "regionfs_cache_bytes", NULL, "Key and value bytes in the cache.")   \
	X(REGION_SRC_STRIPE, NONE, flights, REGION_UNIT_COUNT, "flights",      \
	  "regionfs_flights", NULL, "Loads from the store in the air.")        \
	X(REGION_SRC_REGION, NONE, nstripes, REGION_UNIT_COUNT, "stripes", "", \
	  NULL, "Lock stripes the region uses.")                               \
	X(REGION_SRC_REGION, NONE, stripe_max_entries, REGION_UNIT_COUNT,      \
	  "stripe_max_entries", "", NULL,                                      \
	  "A stripe's share of max_entries, 0 without a limit.")               \
	X(REGION_SRC_SLOT, ST_UNRECORDED, hits_unrecorded, REGION_UNIT_COUNT,  \
	  "hits_unrecorded", "regionfs_hits_unrecorded_total", NULL,           \
	  "Hits the eviction policy never saw (buffer full, stripe busy).")    \
	X(REGION_SRC_REGION, NONE, max_examined_per_hold, REGION_UNIT_COUNT,   \
	  "max_examined_per_hold", "regionfs_max_examined_per_hold", NULL,     \
	  "Most entries and buckets examined under one stripe lock hold.")

enum region_stat_src {
	REGION_SRC_SLOT,
	REGION_SRC_STRIPE,
	REGION_SRC_DERIVED,
	REGION_SRC_REGION,
};

enum region_stat_unit {
	REGION_UNIT_COUNT,
	REGION_UNIT_NS,
};

/*
 * A snapshot of a region's counters and gauges (see REGION_STATS). Counters
 * are summed from per-thread slots and per-stripe fields without stopping
 * the region, so a snapshot need not be exact to the operation, but every
 * counter only grows.
 */
struct region_stats {
#define REGION_STATS_FIELD(src, id, field, ...) uint64_t field;
	REGION_STATS(REGION_STATS_FIELD)
#undef REGION_STATS_FIELD
	/*
	 * The eviction policy's tuning state, strategy tinylfu only (0
	 * otherwise); not in REGION_STATS, since the share is a fraction.
	 */
	double window_share;	/* admission window's target share of the
				   quota, mean over stripes, 0..1 (adapts) */
	uint64_t sketch_resets; /* frequency sketch halvings (aging) */
};

/* ---- values ---------------------------------------------------------- */

/* A new value holding a copy of data[0..len). NULL on allocation failure
 * or for a length over 1 TiB (the engine keeps 40 bits of length). */
struct region_value *region_value_create(const void *data, size_t len);
/*
 * A new value that takes ownership of buf (allocated with malloc; NULL is
 * fine when len is 0). On failure (or len over 1 TiB) buf is freed and
 * NULL is returned.
 */
struct region_value *region_value_adopt(void *buf, size_t len);
const void *region_value_data(const struct region_value *v);
size_t region_value_len(const struct region_value *v);
/*
 * Caller-defined metadata that travels with the value: fs/ stores the row's
 * modification time and version here. Set it before the value is published
 * (installed or handed to a flight); it is immutable afterwards.
 */
void region_value_set_meta(struct region_value *v, int64_t mtime_ns,
			   uint64_t version);
int64_t region_value_mtime(const struct region_value *v);
uint64_t region_value_version(const struct region_value *v);
/*
 * One more caller-defined word with the same rules (set before publication,
 * 0 until set): fs/ stores the serial number of the load that made the
 * value, which tells two loads of one row version apart.
 */
void region_value_set_tag(struct region_value *v, uint64_t tag);
uint64_t region_value_tag(const struct region_value *v);
/* Takes one more reference. Returns v. */
struct region_value *region_value_ref(struct region_value *v);
/*
 * Bytes held by all live values of the process (cached, or kept alive by
 * a reference only), headers included, and by the freed value blocks that
 * threads keep for reuse (at most 64 KiB a thread, freed when it exits).
 * Relaxed: a snapshot.
 */
uint64_t region_values_bytes(void);
/* Drops one reference; frees on the last. Accepts NULL. */
void region_value_unref(struct region_value *v);

/* ---- regions --------------------------------------------------------- */

/*
 * Creates a region. Copies name and *lim. -EINVAL for a bad name or limits.
 * The number of stripes actually used may be lower than lim->nstripes so
 * that every stripe gets a useful share of max_entries and max_bytes (see
 * region_stats().nstripes). The region starts with one reference.
 */
int region_create(const char *name, const struct region_limits *lim,
		  struct region **out);
/* Reference counting for the region object itself (fs/ keeps regions alive
 * while requests use them during a reload). The last unref destroys it;
 * the caller must have dropped all value references it cares about (values
 * themselves outlive the region safely). Accepts NULL. */
struct region *region_ref(struct region *r);
void region_unref(struct region *r);

const char *region_name(const struct region *r);
/* Copies the current limits into *out. */
void region_limits_get(struct region *r, struct region_limits *out);
/*
 * Applies new limits live. Shrinking does not evict here: the excess is
 * evicted incrementally by region_sweep() and by later installs, at most
 * a batch per lock hold (readers are never blocked at all). A change of
 * nstripes or strategy, or limits that would leave a stripe of the
 * region without room for one entry, cannot be applied live: -EINVAL
 * (recreate the region).
 */
int region_set_limits(struct region *r, const struct region_limits *lim);

/* ---- the read path --------------------------------------------------- */

enum {
	REGION_HIT = 0,	 /* *out holds a reference */
	REGION_LOAD = 1, /* *flight is yours: load, then region_flight_done() */
};

/*
 * Looks key up.
 * - Hit: returns REGION_HIT with a reference in *out. Takes no lock,
 *   allocates nothing, copies nothing. (A thread keeps references to up to
 *   16 recently hit values of at most 4 KiB in a private cache, so that a
 *   hot value's count is not written on every hit: such a value may be
 *   freed only when that thread next hits or exits. A hit on any other
 *   value is an atomic add on its count, and the unref an atomic
 *   subtract: a caller that does not keep the value should borrow it,
 *   region_borrow() below.)
 * - Miss, no load in the air: registers a flight and returns REGION_LOAD
 *   with *flight set; the caller must load the value without holding locks
 *   and call region_flight_done() exactly once, holding its reference to
 *   the region until then (a flight does not keep the region alive).
 * - Miss while another caller's load of the same key is in the air: sleeps
 *   until it completes and returns its result: REGION_HIT with *out, or
 *   its negative errno (errors are not cached).
 * -ENAMETOOLONG / -EINVAL for a bad key length, -ENOMEM.
 */
int region_get(struct region *r, const void *key, size_t klen,
	       struct region_value **out, struct region_flight **flight);

/*
 * A borrowed value: what region_borrow() hands out. v is readable until
 * region_borrow_end(); ref is private (a reference the borrow holds, when
 * the hit took the locked path).
 */
struct region_borrow {
	struct region_value *v;	  /* no reference of yours: never unref it */
	struct region_value *ref; /* private */
};

/*
 * region_get() for a caller that only reads the value before it returns
 * (copies it out, replies with it): a hit takes no reference at all, so it
 * writes nothing on the value that other readers write. Same results as
 * region_get(), with the value in b->v instead of *out:
 * - REGION_HIT: b->v stays valid until region_borrow_end(b), which the
 *   same thread must call, and soon: until then the thread holds up the
 *   reclamation of every region's unlinked entries (no blocking call in
 *   between, no waiting for another thread). The caller holds its
 *   reference to the region until then. Borrows nest, and any other
 *   region call may be made while one is held (mind that a miss joining
 *   another caller's load sleeps until it completes).
 * - REGION_LOAD: *flight is yours, as for region_get() (b->v is NULL;
 *   region_borrow_end() is then a no-op).
 * - a negative errno, b->v NULL.
 * A value to keep past the borrow: region_value_ref(b->v) before the end.
 */
int region_borrow(struct region *r, const void *key, size_t klen,
		  struct region_borrow *b, struct region_flight **flight);
/* Ends a borrow (b->v is NULL afterwards). Accepts one that holds none. */
void region_borrow_end(struct region_borrow *b);

/*
 * Completes a flight from region_get(). rc is 0 with v holding a reference
 * that this call takes over, or a negative errno with v NULL (-ENOENT for
 * an absent key). Installs v unless the flight was poisoned by an
 * invalidation since it was registered (then counts stale_puts_rejected)
 * or v is larger than the stripe can hold (counts uncacheable). Waiters get
 * v or rc in any case. Returns 0 with a reference in *out, or rc.
 */
int region_flight_done(struct region *r, struct region_flight *fl, int rc,
		       struct region_value *v, struct region_value **out);

/*
 * A value of len bytes for fl's key (a load's flight, or a writer's from
 * region_write_begin(), whose value goes to region_write_end(r, fl, v,
 * ...)) that the loader fills in place (*data:
 * len writable bytes; set its metadata too) before it hands the value to
 * region_flight_done(r, fl, 0, v, ...). Up to 4 KiB it is made in the
 * block the cache entry will live in (entry header, key and value in one
 * allocation), so the install neither allocates nor copies. Otherwise, and
 * for a load that fails (region_value_unref() it), an ordinary value. The
 * caller keeps its reference until region_flight_done(). NULL (and *data
 * NULL) on allocation failure or for a length over 1 TiB.
 */
struct region_value *region_flight_value(struct region_flight *fl, size_t len,
					 void **data);

/* A loader for region_fetch(): 0 with *out holding a reference, or -errno. */
typedef int (*region_loader_fn)(void *ctx, const void *key, size_t klen,
				struct region_value **out);
/* region_get() + load + region_flight_done() in one call. */
int region_fetch(struct region *r, const void *key, size_t klen,
		 region_loader_fn load, void *ctx, struct region_value **out);

/* Is key cached (and not expired)? Does not count as an access. */
bool region_contains(struct region *r, const void *key, size_t klen);
/*
 * region_contains() that also returns the cached value: true with a
 * reference in *out (region_value_unref() it), false with *out NULL. Not
 * an access either (no hit, no miss, no flight, no policy update): for
 * callers that want the value's length and metadata, not its use.
 */
bool region_peek(struct region *r, const void *key, size_t klen,
		 struct region_value **out);

/* ---- the write path -------------------------------------------------- */

/*
 * Evicts key, if cached, and poisons a flight for it in the air so that its
 * install is refused; the flight is detached, so a region_get() that starts
 * after this call never joins it. Writes call it before the commit (E1) and
 * after it (E2). Counts one invalidation of the given origin.
 */
void region_invalidate(struct region *r, const void *key, size_t klen,
		       enum region_origin origin);
/*
 * A write with a write-through install: E1 and E2 of a write that may
 * leave the value it committed in the cache instead of evicting it twice.
 *
 * region_write_begin() is E1: region_invalidate(), and in the same stripe
 * lock hold, after the eviction, a *writer flight* for key in *wf. A
 * writer flight is not a load: no region_get() joins it, it is not
 * counted in flights, and it installs nothing by itself; it only records
 * whether the key was invalidated after this E1. Every invalidation of
 * the key from then on poisons it: region_invalidate() (another writer's
 * E1 or E2 of the old kind, an outside change), region_invalidate_all(),
 * another writer's region_write_begin() or region_write_end() of the
 * key. 0, or -ENOMEM / -EINVAL / -ENAMETOOLONG with *wf NULL (the key is
 * invalidated all the same; region_write_end(r, NULL, ...) is then E2).
 *
 * region_write_end() is E2: region_invalidate() (the key's entry, its
 * reader's flight, the other writers' flights), and in the same hold, if
 * v is not NULL, wf was not poisoned and v fits the stripe, installs v
 * (the bytes the write committed, its metadata set) in place of the
 * evicted entry. Takes over the caller's reference to v (NULL: a failed
 * commit, evict only). wf is freed. Returns 1 if v was installed, else 0.
 * Counts one invalidation of origin, and write_installs for an install.
 * region_flight_value(wf, ...) may make v in place (in the entry's block).
 *
 * Why an installed value is never older than a committed value whose
 * writer's E2 is done: the caller commits between the two calls. Another
 * write whose E2 ran before this E1 committed before this write's commit
 * began (so v is newer); one whose E2 ran after this E1 and before this
 * E2 poisoned wf (no install); one whose E2 runs after this E2 evicts v.
 * An outside change: its invalidation (after its commit) before this E1
 * means this commit is later; between E1 and E2 it poisons wf; after E2
 * it evicts v. (doc/design.md, "Write-through installs".)
 */
int region_write_begin(struct region *r, const void *key, size_t klen,
		       enum region_origin origin, struct region_flight **wf);
int region_write_end(struct region *r, struct region_flight *wf,
		     struct region_value *v, enum region_origin origin);
/* Invalidates every key and poisons every flight (a bulk outside change).
 * O(stripes): entries are reclaimed lazily, in bounded batches. */
void region_invalidate_all(struct region *r, enum region_origin origin);

/* ---- maintenance ----------------------------------------------------- */

/*
 * Background work: reclaims expired entries and evicts any excess left by a
 * shrink. Examines at most budget entries, resuming where the previous call
 * stopped (no rescans from the start). Returns the number of entries
 * reclaimed. Holds one stripe lock at a time.
 */
size_t region_sweep(struct region *r, size_t budget);
/*
 * Frees now the entries the region retired (evicted, invalidated or
 * replaced; still readable by readers already on them) and the values
 * only they held, as far as no reader can still see them, advancing the
 * epoch to make them so, instead of leaving them to later lock holds of
 * their stripes or the sweep. For a caller that needs the memory now:
 * the daemon, before its memory limit refuses a load or a write buffer.
 * Returns the entries freed. Holds one stripe lock at a time, up to three
 * times a stripe; never sleeps.
 */
size_t region_reclaim_retired(struct region *r);

/* Fills *out with a snapshot of the counters and gauges. */
void region_stats(struct region *r, struct region_stats *out);

/* ---- clock and test hooks -------------------------------------------- */

/*
 * The engine reads time (milliseconds, monotonic) through one replaceable
 * function so tests never sleep. NULL restores the default clock
 * (CLOCK_MONOTONIC_COARSE: a few ms resolution, 5 ns a call). Not for use
 * while regions are in use by other threads.
 */
typedef uint64_t (*region_clock_fn)(void);
void region_clock_set(region_clock_fn fn);
uint64_t region_now_ms(void);

#ifdef RFS_TEST_HOOKS
/*
 * Test builds only: disables the stale-put guard (invalidations no longer
 * poison flights), so tests can show that the stranded-key race then
 * happens. Never compiled into the shipped library.
 */
void region_test_disable_stale_guard(bool disable);
#endif

#endif /* RFS_REGION_H */
