/*
 * region_int.h - internals shared by the regions/ sources only (fs/ must not see it).
 *
 * Object map:
 *
 *   struct region ──▶ stripes[nstripes] ──▶ table (+ old table while
 *        │                   │   migrating) ──▶ struct entry ──▶ struct region_value
 *        │                   ├──▶ eviction state (LRU list, or S3-FIFO small/
 *        │                   │    main queues + ghost), per-thread hit lanes,
 *        │                   │    retired entries and tables
 *        │                   └──▶ attached flights ──▶ struct region_flight
 *        └──▶ stat slots[REGION_STAT_SLOTS] (per-thread relaxed counters)
 *
 * Locking (see also the lock maps in region.c and stripe.c):
 * - Readers take no lock. A hit runs inside an epoch section (epoch.c):
 *   it loads the stripe's table and walks a hash chain with acquire loads,
 *   and everything it can reach stays allocated until every section that
 *   could have reached it has ended (epoch-based reclamation).
 * - Each stripe's mutex guards every field marked "L: stripe": its tables,
 *   its eviction state, its flights list, its gauges and quotas. Writers
 *   (misses, installs, invalidations, the sweep) hold it; every
 *   acquisition first replays the calling thread's own buffered hits
 *   (region__stripe_wrlock()).
 * - region.cfg_mu guards the region's copy of its limits ("M: cfg").
 * - region.sweep_mu guards the sweep cursors ("M: sweep").
 * Order: sweep_mu -> cfg_mu -> one stripe lock. No path holds two stripe
 * locks. Counters are relaxed atomics; entry.access_ms and the policy
 * byte entry.freq are relaxed atomics that readers may write.
 *
 * The policy seam (struct region_evict_ops, evict.c and policy files):
 * a policy owns, per entry, the fields marked "P:" (qnode, freq, queue:
 * 16 + 2 bytes) and, per stripe, the fields under "policy state". It is
 * called under the stripe lock on insert, on a hit (replay_locked: the
 * per-thread hit buffers, a lane per call; touch_locked: a hit found under
 * the lock), on remove and to pick victims (evict_locked); optionally on the
 * lock-free hit itself (access, which may only store to e->freq).
 */
#ifndef RFS_REGION_INT_H
#define RFS_REGION_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "region.h"

#define REGION_UNLIMITED   UINT64_MAX /* a stripe quota without a limit */
#define REGION_LANE_RECS   15	      /* buffered hits per thread lane */
#define REGION_STAT_SLOTS  32	      /* per-thread counter slots per region */
#define REGION_SHARED_SLOT (REGION_STAT_SLOTS - 1) /* the one threads share */
#define REGION_SWEEP_BATCH 1024 /* entries examined per lock hold */
#define REGION_CACHELINE   64

#define region__likely(x)   __builtin_expect(!!(x), 1)
#define region__unlikely(x) __builtin_expect(!!(x), 0)
#define region__container_of(ptr, type, member)                                \
	((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- intrusive circular doubly linked list --------------------------- */

struct rlist {
	struct rlist *prev, *next;
};

static inline void rlist_init(struct rlist *l)
{
	l->prev = l;
	l->next = l;
}

static inline bool rlist_empty(const struct rlist *l)
{
	return l->next == l;
}

static inline void rlist_del(struct rlist *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n;
	n->next = n;
}

/* Inserts n right after head (the "head" end: most recent). */
static inline void rlist_add_head(struct rlist *head, struct rlist *n)
{
	n->next = head->next;
	n->prev = head;
	head->next->prev = n;
	head->next = n;
}

static inline void rlist_move_head(struct rlist *head, struct rlist *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	rlist_add_head(head, n);
}

/* The oldest element (the "tail" end), or NULL. */
static inline struct rlist *rlist_tail(const struct rlist *head)
{
	return rlist_empty(head) ? NULL : head->prev;
}

/* ---- values ---------------------------------------------------------- */

enum value_kind {
	VALUE_INLINE = 0, /* data in inline_data[] */
	VALUE_ADOPTED,	  /* inline_data[] holds a pointer to malloc'd data */
	VALUE_EMBEDDED,	  /* inline_data[], in its entry's allocation */
	VALUE_INDIRECT,	  /* in its entry's allocation; inline_data[] holds
			     the data pointer and the value it belongs to,
			     of which it owns one reference */
};

/*
 * 36 bytes of header (REGION_VALUE_HDR: the data starts right after it,
 * unaligned). Every cached value lives in its entry's allocation (one
 * malloc per entry: entry, key, value header and data together): a value
 * of at most REGION_EMBED_MAX bytes is copied there (EMBEDDED), a larger
 * one is referenced from a header there (INDIRECT). The block is freed
 * with the last reference to that header, which may outlive the entry.
 * The length is 40 bits (len_lo + len_hi): values up to 1 TiB.
 */
struct region_value {
	int64_t mtime_ns; /* set before publication, then immutable */
	uint64_t version; /* set before publication, then immutable */
	uint64_t tag;	  /* set before publication, then immutable */
	atomic_uint refs; /* references; freed at zero */
	uint32_t len_lo;  /* immutable; low 32 bits of the length */
	uint16_t back;	  /* EMBEDDED, INDIRECT: offset in the block */
	uint8_t kind;	  /* enum value_kind; immutable */
	uint8_t len_hi;	  /* immutable; bits 32..39 of the length */
	unsigned char inline_data[];
};

#define REGION_VALUE_HDR offsetof(struct region_value, inline_data)
/*
 * Where ADOPTED and INDIRECT values keep their pointers: inline_data[] is
 * at offset 36, so they are stored 4 bytes on, 8-aligned (the header is):
 * LeakSanitizer follows only aligned pointers, and a value referenced
 * from an INDIRECT header alone was reported leaked.
 */
#define REGION_VALUE_PTR_OFF ((8 - REGION_VALUE_HDR % 8) % 8)
#define REGION_VALUE_PTRS    (REGION_VALUE_PTR_OFF + 2 * sizeof(void *))
#define REGION_VALUE_MAX_LEN ((((uint64_t)1) << 40) - 1)
#define REGION_EMBED_MAX     4096 /* bytes copied into the entry at install */

static inline size_t region__vlen(const struct region_value *v)
{
	return ((size_t)v->len_hi << 32) | v->len_lo;
}

static inline void region__vlen_set(struct region_value *v, size_t len)
{
	v->len_lo = (uint32_t)len;
	v->len_hi = (uint8_t)((uint64_t)len >> 32);
}

/* ---- entries --------------------------------------------------------- */

enum entry_queue {
	ENTRY_Q_NONE = 0,  /* LRU: the single list */
	ENTRY_Q_SMALL,	   /* S3-FIFO small (probation) queue */
	ENTRY_Q_MAIN,	   /* S3-FIFO main queue */
	ENTRY_Q_WINDOW,	   /* TinyLFU admission window (tinylfu.c) */
	ENTRY_Q_PROBATION, /* TinyLFU main, probation segment */
	ENTRY_Q_PROTECTED, /* TinyLFU main, protected segment */
};

/*
 * One cached key: 48 bytes, then the key, then (8-aligned) its value's
 * header and data (region__entry_val()), all in one allocation. Linked in
 * exactly one stripe's table and eviction state while cached. Unlinked
 * entries are retired: marked dead, kept allocated (and still walkable by
 * readers already on the chain) until the epoch grace period has passed,
 * then the entry drops its reference to the value, and the block goes
 * with the value's last reference. Readers never keep an entry pointer
 * past their epoch section: what they keep is a value reference.
 *
 * What is not stored is derived: the hash from the key
 * (region__entry_hash(), for table moves, unlinks and the policies'
 * sketches and ghosts; a lookup compares klen and the key directly), the
 * charge from klen and the value's length, the value from klen.
 *
 * Layout: what a hit reads (hnext, gen, dead, klen, the key, then the
 * value header's count and length and the data) is one contiguous run
 * from offset 32 on, so a hit on a 16-byte key touches two cache lines of
 * the block whatever its alignment (with hnext first the run started at
 * 0 and crossed a third line for half of the 16-byte-aligned blocks).
 * The policy's list node comes right before it, for the replay of the
 * hit under the lock (LRU, TinyLFU); the tti/ttl times, read only when
 * the region expires entries, come first.
 */
struct entry {
	uint64_t install_ms;		/* immutable; start of the ttl */
	atomic_uint_fast64_t access_ms; /* relaxed; last access, for tti */
	union {
		struct rlist qnode; /* P: while linked; policy list */
		struct {
			struct entry *next; /* L: stripe; retire list */
		} retire; /* once unlinked; its epoch: struct retire_run */
	};
	_Atomic(struct entry *) hnext; /* L: stripe; readers load acquire */
	uint32_t gen;		       /* immutable; stripe generation */
	atomic_uchar freq;	       /* P: relaxed; readers may store */
	uint8_t queue;		       /* P: L: stripe */
	atomic_uchar dead;	       /* release; set when unlinked;
					  ENTRY_FRESH until first linked */
	uint8_t klen;		       /* immutable; 1..REGION_MAX_KEY */
	unsigned char key[];	       /* immutable */
};

/*
 * entry.dead of an entry never linked yet (made by region__entry_alloc()
 * for region_flight_value(): its block may still become a cache entry).
 * Readers never reach it: only linked entries are in a table.
 */
#define ENTRY_FRESH 2

/* Where the value header of an entry with a klen-byte key starts. */
static inline size_t region__entry_val_off(size_t klen)
{
	return (sizeof(struct entry) + klen + 7) & ~(size_t)7;
}

/* e's value (EMBEDDED or INDIRECT), which holds e's reference. */
static inline struct region_value *region__entry_val(const struct entry *e)
{
	return (struct region_value *)((char *)e +
				       region__entry_val_off(e->klen));
}

/* Bytes e is charged: key + value. */
static inline uint64_t region__entry_charge(const struct entry *e)
{
	return (uint64_t)e->klen + region__vlen(region__entry_val(e));
}

/* ---- flights --------------------------------------------------------- */

/*
 * One load in the air. Refcounted: the loader holds one reference until
 * region_flight_done(), each waiter one until it has read the result.
 * Waiters sleep on the stripe's flight futex, checking under its lock, so
 * a flight needs no lock of its own (a miss allocates nothing but it).
 */
struct region_flight {
	struct region_flight *next; /* L: stripe; while attached */
	struct region *r;	    /* the caller's; no reference of its own */
	uint64_t hash;		    /* immutable */
	uint64_t start_ns;	    /* immutable; coarse monotonic clock */
	uint32_t gen;		    /* immutable; stripe generation */
	bool attached;		    /* L: stripe; findable by region_get(),
				     * or a writer's: on the stripe's writes */
	bool poisoned;		    /* L: stripe; an invalidation hit it */
	bool done;		    /* L: stripe */
	atomic_uint refs;	    /* loader + waiters */
	unsigned waiters;	    /* L: stripe */
	int rc;			    /* L: stripe; 0 or -errno */
	struct region_value *val;   /* L: stripe; one reference if rc == 0 */
	uint8_t klen;		    /* immutable */
	unsigned char key[];	    /* immutable */
};

/* ---- ghost (S3-FIFO) ------------------------------------------------- */

/*
 * The keys recently evicted from S3-FIFO's small queue, as 32-bit
 * fingerprints of their hashes: a FIFO ring of (fingerprint, charge)
 * records and a linear-probing index of ring positions (at most half
 * full, backward-shift deletion), about 16 bytes per remembered key and
 * no allocation per key. A record taken out of the middle leaves a hole
 * (fingerprint 0) that the head skips. Sized to the ghost's entry cap
 * (a power of two); when the cap outgrows it, or falls to a quarter of it,
 * the ghost starts again empty at the new size (a ghost is a hint).
 */
struct ghost_rec {
	uint32_t fp;	 /* 0: a hole */
	uint32_t charge; /* saturated at UINT32_MAX */
};

struct ghost {
	struct ghost_rec *ring; /* L: stripe; rmask + 1 records, or NULL */
	uint32_t *index;	/* L: stripe; ring position + 1, 0 empty */
	uint32_t rmask;		/* L: stripe; ring size - 1 */
	uint32_t ibits;		/* L: stripe; log2 of the index size */
	uint32_t head, tail;	/* L: stripe; oldest record, next free */
	uint64_t n;		/* L: stripe; live records */
	uint64_t bytes;		/* L: stripe; sum of their charges */
};

/* ---- stripes --------------------------------------------------------- */

#include "tinylfu.h" /* struct region_tlfu: needs struct rlist */

struct stripe;
struct region;
struct lane_replay;

/*
 * The eviction seam (evict.c). One ops table per strategy; every function
 * but access() needs the stripe lock. Hits reach a policy in one of two
 * ways: access() on the lock-free hit itself (it may only store to
 * e->freq, relaxed, and must not allocate or touch lists), or, when
 * access is NULL, replay_locked() later under the lock from the hitting
 * thread's buffer (struct lane: batches of REGION_LANE_RECS, in order per
 * thread; a thread's own buffer is replayed before any lock it takes, so
 * a single thread sees exact recency). The entries a policy examines per
 * call should be reported with region__examined().
 */
struct region_evict_ops {
	const char *name;
	/* Optional: records a hit without any lock (see above). */
	void (*access)(struct stripe *s, struct entry *e);
	/* A new entry (already in the table and the gauges). */
	void (*insert_locked)(struct stripe *s, struct entry *e);
	/* A hit found under the lock, or a replayed buffered hit; hash is
	 * the hash of e's key. */
	void (*touch_locked)(struct stripe *s, struct entry *e, uint64_t hash);
	/* The replay of a lane: what touch_locked() does for the entry of
	 * each record (region__replay_entry()), in order, in one call (no
	 * indirect call per hit). Needed when access is NULL. */
	void (*replay_locked)(struct stripe *s, struct lane_replay *rp);
	/* Forgets e (being unlinked for any reason). */
	void (*remove_locked)(struct stripe *s, struct entry *e);
	/*
	 * Evicts at least one entry by the policy through
	 * region__evict_locked(); false if the stripe holds none.
	 */
	bool (*evict_locked)(struct region *r, struct stripe *s,
			     struct entry **grave);
	/* Drops policy state that outlives entries (the ghost). */
	void (*reset_locked)(struct stripe *s);
	/* Optional: sets up policy state at stripe init; 0 or -errno. */
	int (*init)(struct stripe *s);
	/* Optional: frees it at stripe release. No lock; nobody else uses s. */
	void (*release)(struct stripe *s);
};

/* A chained hash table; readers walk it with acquire loads. */
struct table {
	size_t mask;		     /* immutable; nbuckets - 1 */
	struct table *rnext;	     /* L: stripe; retire list */
	uint64_t repoch;	     /* L: stripe; retired at */
	_Atomic(struct entry *) b[]; /* L: stripe writes */
};

/*
 * One thread's buffered hits on one stripe: the entries it hit and their
 * hashes, replayed through replay_locked() by the same thread when the lane
 * is full (trylock: if the lock is busy the hit is not recorded and is
 * counted in hits_unrecorded) or when it takes the stripe lock. Lanes are
 * indexed by the thread's counter slot, so a lane is written by one
 * thread (two beyond REGION_STAT_SLOTS threads: then records may be lost,
 * never corrupted: every field is a relaxed atomic, and that shared lane
 * never uses its pointers).
 *
 * A recorded pointer may be stale by replay time, even freed. It is used
 * only if the stripe has freed nothing since the lane's first record:
 * seq holds the stripe's reclaim count read inside the epoch section of
 * that hit, and an entry found in a section is freed only by a reclaim
 * that starts after the section ended, which bumps the count first (under
 * the lock the replay holds). The lane's later records come from sections
 * its thread entered after that first one, so a reclaim that frees any of
 * their entries also starts after the first section ended and leaves the
 * count above seq: one read of the count per lane (at its first record)
 * covers every record, and the other hits do not load the line that
 * installs write. Then the entries are still allocated, and touched if
 * they are still linked and current. Otherwise (something was freed, or
 * seq is LANE_SEQ_NONE) the replay finds each entry again by its hash
 * (which it then recomputes for the chain: no hash is stored).
 */
#define LANE_SEQ_NONE UINT64_MAX

struct lane_rec {
	_Atomic(struct entry *) e;
	atomic_uint_fast64_t hash;
};

struct lane {
	alignas(REGION_CACHELINE) atomic_uint_fast64_t n;
	atomic_uint_fast64_t seq; /* reclaims at the first record, or NONE */
	struct lane_rec rec[REGION_LANE_RECS];
};

/* A lane being replayed under the stripe lock (stripe.c, and the
 * policies' replay_locked() through region__replay_entry()). */
struct lane_replay {
	const struct lane *l;
	uint64_t n;   /* records */
	uint32_t gen; /* the stripe's generation */
	bool ptrs;    /* the recorded pointers are safe (struct lane) */
};

/* The first linked entry with this hash, or NULL. Lock held. */
struct entry *region__find_hash_locked(struct stripe *s, uint64_t hash);

/*
 * The entry of a replay's record i if it is still linked and current
 * (through its recorded pointer if that is safe, else found by hash), or
 * NULL; its hash in *hash. Lock held.
 */
static inline struct entry *region__replay_entry(struct stripe *s,
						 const struct lane_replay *rp,
						 uint64_t i, uint64_t *hash)
{
	const struct lane_rec *rec = &rp->l->rec[i];
	struct entry *e;

	*hash = atomic_load_explicit(&rec->hash, memory_order_relaxed);
	if (region__likely(rp->ptrs)) {
		/* allocated (see struct lane): linked and current? */
		e = atomic_load_explicit(&rec->e, memory_order_relaxed);
		if (atomic_load_explicit(&e->dead, memory_order_relaxed))
			return NULL;
	} else if (!(e = region__find_hash_locked(s, *hash))) {
		return NULL;
	}
	return e->gen == rp->gen ? e : NULL;
}

/*
 * A run of retired entries stamped with one epoch: the stripe's retired
 * list, oldest first, is cut into runs (a ring, oldest at run_head), so
 * that a lock hold finds what it may free from the runs' epochs and
 * detaches it at one entry (the last safe run's), without walking or
 * stamping every retired entry under the lock (each a cache miss once
 * other threads have run). After a hold at most three runs are left
 * (the epochs of entries not yet safe are the current one and the one
 * before, and the hold's own); should the ring ever be full, the newest
 * run grows and takes the newer epoch (freed later: safe).
 */
#define REGION_RETIRE_RUNS 8

/*
 * A stripe's attached flights are chained in buckets by their key's hash,
 * so that a miss looks among the flights of its bucket only: with 48
 * threads on 2 cores most threads wait for the lock in
 * region_flight_done() with a flight attached, and one list made every
 * miss and every install walk all of them under the lock (a cache miss
 * each).
 */
#define REGION_FLIGHT_BUCKETS 32

static inline unsigned region__flight_bucket(uint64_t hash)
{
	return (unsigned)(hash >> 32) & (REGION_FLIGHT_BUCKETS - 1);
}

struct retire_run {
	struct entry *last; /* the run's newest entry */
	uint64_t epoch;	    /* retired at */
	uint64_t n;	    /* entries in the run */
};

/*
 * The stripe lock: a futex mutex (0 free, 1 held, 2 held and someone may
 * sleep; Drepper, "Futexes Are Tricky", mutex 3), the algorithm of
 * glibc's default mutex, but inline: pthread_mutex_lock() and _unlock()
 * were ~57 instructions a hold through the PLT (callgrind), and a miss
 * takes two holds. Unlike glibc's default mutex, a waiter first spins a
 * bounded number of loads (REGION_LOCK_SPINS, stopping early when the
 * word says someone sleeps) and takes a free word without marking it
 * contended (region__lock_slow() in stripe.c): a hold is a few hundred
 * nanoseconds, a futex sleep and wake-up several microseconds. Not fair,
 * like glibc's: writers only contend among themselves (readers take no
 * lock). Joined waiters sleep on a futex of their own (struct stripe's
 * flight_seq), which the lock's holder bumps when a flight completes.
 */
struct region_lock {
	atomic_uint w;
};

/* Loads a waiter spins on a held lock before it sleeps (stripe.c). */
#define REGION_LOCK_SPINS 100

void region__lock_slow(struct region_lock *l);
void region__lock_wake(struct region_lock *l);

static inline bool region__trylock(struct region_lock *l)
{
	unsigned z = 0;

	return atomic_compare_exchange_strong_explicit(
		&l->w, &z, 1, memory_order_acquire, memory_order_relaxed);
}

static inline void region__lock(struct region_lock *l)
{
	if (region__unlikely(!region__trylock(l)))
		region__lock_slow(l);
}

static inline void region__unlock(struct region_lock *l)
{
	if (region__unlikely(atomic_exchange_explicit(
				     &l->w, 0, memory_order_release) == 2))
		region__lock_wake(l);
}

/* Sleeps while *word == val (or returns at once); wakes every sleeper. */
void region__futex_wait(atomic_uint *word, unsigned val);
void region__futex_wake_all(atomic_uint *word);

struct stripe {
	alignas(REGION_CACHELINE) struct region_lock lock;
	atomic_uint flight_seq; /* L: stripe writes; see above */
	/*
	 * What every hit reads, on a line that no lock hold writes (the lock
	 * word's line is written by every acquisition, the gauges' by every
	 * install): written only by invalidate-all, table swaps and limits.
	 */
	alignas(REGION_CACHELINE) const struct region_evict_ops *ops;
	struct lane *lanes;	     /* REGION_STAT_SLOTS of them */
	_Atomic(struct table *) tab; /* L: stripe; readers acquire */
	_Atomic(struct table *) old; /* L: stripe; being migrated */
	atomic_uint gen;	     /* L: stripe writes; readers */
	atomic_uint_fast64_t ttl_ms; /* L: stripe writes; 0 = never */
	atomic_uint_fast64_t tti_ms; /* L: stripe writes; 0 = never */
	alignas(REGION_CACHELINE) size_t migrate_pos; /* L: stripe */
	uint64_t nentries;		   /* L: stripe; gauge, incl. stale */
	uint64_t bytes;			   /* L: stripe; gauge, incl. stale */
	uint64_t stale_n, stale_bytes;	   /* L: stripe; older generation */
	size_t stale_pos;		   /* L: stripe; reclaim cursor */
	uint64_t nflights;		   /* L: stripe; gauge */
	uint64_t quota_entries;		   /* L: stripe; or REGION_UNLIMITED */
	uint64_t quota_bytes;		   /* L: stripe; or REGION_UNLIMITED */
	uint64_t max_value_size;	   /* L: stripe; 0 = none */
	atomic_uint_fast64_t reclaims;	   /* L: stripe writes; batches freed */
	struct entry *retired;		   /* L: stripe; oldest first */
	uint64_t npending;		   /* L: stripe; the last, unstamped */
	bool pending_tabs;		   /* L: stripe; a table not stamped */
	struct entry **retired_tail;	   /* L: stripe */
	uint64_t nretired;		   /* L: stripe */
	struct table *retired_tabs;	   /* L: stripe */
	uint64_t examined;		   /* L: stripe; in this hold */
	atomic_uint_fast64_t max_examined; /* L: stripe writes; stats */
	/* the retired entries' epochs (struct retire_run) */
	struct retire_run runs[REGION_RETIRE_RUNS]; /* L: stripe; a ring */
	unsigned run_head, nruns;		    /* L: stripe */
	uint64_t advance_at; /* L: stripe; nretired to scan at */
	/* attached flights, by their key's hash (region__flight_bucket()) */
	struct region_flight *flights[REGION_FLIGHT_BUCKETS]; /* L: stripe */
	/* writers' flights between E1 and E2 (region_write_begin()): one
	 * per write in progress on the stripe, never joined */
	struct region_flight *writes; /* L: stripe */
	/* policy state: LRU, most recently used at the head */
	struct rlist lru; /* L: stripe */
	/* S3-FIFO */
	struct rlist small, main;      /* L: stripe; newest at the head */
	uint64_t small_n, small_bytes; /* L: stripe */
	uint64_t main_n, main_bytes;   /* L: stripe */
	struct ghost ghost;	       /* L: stripe */
	/* W-TinyLFU (tinylfu.c) */
	struct region_tlfu tlfu; /* L: stripe */
#ifndef NDEBUG
	atomic_uintptr_t owner; /* lock holder's token, or 0 */
#endif
};

/* ---- counters -------------------------------------------------------- */

/*
 * The per-thread slot counters: the REGION_SRC_SLOT numbers of
 * REGION_STATS, then the ones region_stats() only uses to derive others.
 */
#define REGION_STAT_ENUM(src, id, ...)	     REGION_STAT_ENUM_##src(id)
#define REGION_STAT_ENUM_REGION_SRC_SLOT(id) id,
#define REGION_STAT_ENUM_REGION_SRC_STRIPE(id)
#define REGION_STAT_ENUM_REGION_SRC_DERIVED(id)
#define REGION_STAT_ENUM_REGION_SRC_REGION(id)
enum region_stat {
	REGION_STATS(REGION_STAT_ENUM)
		ST_GET_ERRORS, /* region_get() calls refused (bad key, -ENOMEM) */
	ST__COUNT
};

/* One thread's counters (the last slot is shared by threads beyond 31). */
struct stat_slot {
	alignas(REGION_CACHELINE) atomic_uint_fast64_t c[ST__COUNT];
};

/* ---- regions --------------------------------------------------------- */

struct region {
	atomic_ulong refs;
	/* immutable after create */
	char name[REGION_MAX_NAME + 1];
	unsigned nstripes;     /* effective, power of two */
	unsigned stripe_shift; /* 64 - log2(nstripes) */
	enum region_strategy strategy;
	struct stripe *stripes;
	struct stat_slot *slots; /* REGION_STAT_SLOTS of them */
	pthread_mutex_t cfg_mu;
	struct region_limits lim; /* M: cfg; as configured */
	pthread_mutex_t sweep_mu;
	unsigned exp_stripe;	 /* M: sweep; expiry cursor */
	size_t exp_bucket;	 /* M: sweep */
	size_t exp_skip;	 /* M: sweep; entries done in bucket */
	unsigned trim_stripe;	 /* M: sweep; shrink cursor */
	unsigned long trim_seen; /* M: sweep; last trim_gen served */
	bool trim_active;	 /* M: sweep */
	atomic_ulong trim_gen;	 /* bumped by region_set_limits() */
};

/* ---- hashing --------------------------------------------------------- */

extern uint64_t region__hash_seed; /* random, set once by region_create() */
void region__hash_init(void);

static inline uint64_t region__mum(uint64_t a, uint64_t b)
{
	__uint128_t m = (__uint128_t)a * b;

	return (uint64_t)m ^ (uint64_t)(m >> 64);
}

static inline uint64_t region__rd64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline uint64_t region__rd32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * A seeded 64-bit multiply-mix hash in the style of wyhash: 8 bytes per
 * 128-bit multiply, a final double mix. Keys are at most 255 bytes.
 */
static inline uint64_t region__hash(const void *key, size_t len)
{
	const uint64_t p0 = 0xa0761d6478bd642full, p1 = 0xe7037ed1a0b428dbull;
	const unsigned char *p = key;
	uint64_t seed = region__hash_seed, a, b;
	size_t i = len;

	if (len <= 16) {
		if (len >= 4) {
			size_t q = (len >> 3) << 2;

			a = (region__rd32(p) << 32) | region__rd32(p + q);
			b = (region__rd32(p + len - 4) << 32) |
			    region__rd32(p + len - 4 - q);
		} else if (len > 0) {
			a = ((uint64_t)p[0] << 16) |
			    ((uint64_t)p[len >> 1] << 8) | p[len - 1];
			b = 0;
		} else {
			a = b = 0;
		}
	} else {
		while (i > 16) {
			seed = region__mum(region__rd64(p) ^ p1,
					   region__rd64(p + 8) ^ seed);
			p += 16;
			i -= 16;
		}
		a = region__rd64(p + i - 16);
		b = region__rd64(p + i - 8);
	}
	return region__mum(p1 ^ len, region__mum(a ^ p1, b ^ seed ^ p0));
}

/*
 * The frequency sketch's layout (sketch.c has the design): the block of
 * a key hash and the second hash that picks its four counters, and
 * counter i's word (2i or 2i+1) and bit shift. Here so that TinyLFU's
 * victim search reads estimates inline: up to 17 a capacity eviction,
 * and the call was ~10 instructions of each (callgrind, bench_engine
 * mix48 tinylfu). The stripe's hash has its top bits fixed (they picked
 * the stripe), so mix.
 */
static inline uint64_t *region__sketch_block(const struct region_sketch *k,
					     uint64_t hash, uint64_t *ch)
{
	uint64_t b = region__mum(hash, 0x9e3779b97f4a7c15ull);

	*ch = region__mum(b, 0xbf58476d1ce4e5b9ull);
	return &k->table[(b & k->block_mask) * 8];
}

static inline void region__sketch_counter(uint64_t ch, unsigned i,
					  unsigned *word, unsigned *shift)
{
	unsigned h = (unsigned)(ch >> (i * 8));

	*word = 2 * i + (h & 1);
	*shift = ((h >> 1) & 15) * 4;
}

/* region__sketch_frequency(), inline: the minimum of the four counters,
 * 0 before the sketch is sized. */
static inline unsigned region__sketch_freq(const struct region_sketch *k,
					   uint64_t hash)
{
	unsigned i, w, sh, f = 15;
	uint64_t ch, *blk;

	if (!k->table)
		return 0;
	blk = region__sketch_block(k, hash, &ch);
	for (i = 0; i < 4; i++) {
		unsigned c;

		region__sketch_counter(ch, i, &w, &sh);
		c = (unsigned)(blk[w] >> sh) & 15;
		if (c < f)
			f = c;
	}
	return f;
}

/* The hash of e's key (not stored: recomputed, a few ns for short keys). */
static inline uint64_t region__entry_hash(const struct entry *e)
{
	return region__hash(e->key, e->klen);
}

static inline struct stripe *region__stripe_of(const struct region *r,
					       uint64_t hash)
{
	/* top bits pick the stripe, low bits the bucket */
	return &r->stripes[r->nstripes > 1 ? hash >> r->stripe_shift : 0];
}

/* ---- epoch.c --------------------------------------------------------- */

/* A read section: what is reachable from a table inside it stays allocated
 * until it ends. Nests. */
/* The per-thread record (epoch.c); its fast paths are inline: a hit
 * enters and leaves one section, and the calls were ~20 instructions of
 * it (callgrind). */
struct region__epoch_rec {
	alignas(REGION_CACHELINE) atomic_uint_fast64_t state;
	atomic_bool in_use;
	struct region__epoch_rec *next; /* immutable once published */
	unsigned depth;			/* owner thread only */
	atomic_size_t spare_bytes;	/* owner writes; its spare blocks */
};
extern atomic_uint_fast64_t region__global_epoch;
extern __thread struct region__epoch_rec *region__my_rec
	__attribute__((tls_model("initial-exec")));
struct region__epoch_rec *region__epoch_rec_acquire(void);

/* region__epoch_enter() for a caller that has the thread's record. */
static inline void region__epoch_enter_rec(struct region__epoch_rec *rec)
{
	if (rec->depth++ == 0) {
		uint64_t e = atomic_load_explicit(&region__global_epoch,
						  memory_order_relaxed);

		/* the publication is ordered before our loads */
		atomic_exchange_explicit(&rec->state, (e << 1) | 1,
					 memory_order_seq_cst);
	}
}

static inline void region__epoch_enter(void)
{
	struct region__epoch_rec *rec = region__my_rec;

	if (region__unlikely(!rec))
		rec = region__epoch_rec_acquire();
	region__epoch_enter_rec(rec);
}

static inline void region__epoch_exit(void)
{
	struct region__epoch_rec *rec = region__my_rec;

	if (--rec->depth == 0)
		atomic_store_explicit(&rec->state, 0, memory_order_release);
}
/* The global epoch. */
static inline uint64_t region__epoch_now(void)
{
	return atomic_load_explicit(&region__global_epoch,
				    memory_order_seq_cst);
}
/* Advances the epoch if every section in progress entered at the current
 * one; returns the epoch afterwards. Scans one record per thread. */
uint64_t region__epoch_try_advance(void);
/* Threads that have ever had a record (the cost of a scan). */
extern atomic_uint region__epoch_nrecs;
static inline unsigned region__epoch_nthreads(void)
{
	return atomic_load_explicit(&region__epoch_nrecs, memory_order_relaxed);
}
/* The epoch, read after a full barrier (the stores before it are visible
 * to all before the load). */
uint64_t region__epoch_stamp(void);
#define REGION_EPOCH_PENDING (UINT64_MAX - 2) /* retired, not yet stamped */
/* Something retired at epoch e can be freed once the epoch is >= e + 2. */
static inline bool region__epoch_safe(uint64_t retired, uint64_t now)
{
	return retired != REGION_EPOCH_PENDING && now >= retired + 2;
}
/* The thread's value reference cache (epoch.c): fast paths inline. */
#define REGION_VREF_SLOTS 16
#define REGION_VREF_BIAS  (1u << 20)
struct region__vref_slot {
	struct region_value *v;
	uint32_t used;
};
extern __thread struct region__vref_slot region__vcache[REGION_VREF_SLOTS]
	__attribute__((tls_model("initial-exec")));
static inline struct region__vref_slot *
region__vslot_of(const struct region_value *v)
{
	uintptr_t x = (uintptr_t)v;

	return &region__vcache[((x >> 4) ^ (x >> 12)) &
			       (REGION_VREF_SLOTS - 1)];
}
extern __thread unsigned region__vcache_tick
	__attribute__((tls_model("initial-exec")));
/* The slow path of region__value_ref_hit() (epoch.c). */
struct region_value *region__value_ref_hit_slow(struct region_value *v);
/* Takes a value reference for a hit through the thread's cache without
 * a call, or returns false: then region__value_ref_hit_slow() takes it. */
static inline bool region__value_ref_hit_fast(struct region_value *v)
{
	struct region__vref_slot *sl = region__vslot_of(v);

	if (region__likely(sl->v == v && sl->used < REGION_VREF_BIAS - 1)) {
		sl->used++;
		return true;
	}
	/* the slot holds another value: replace it only every 8th time
	 * (cold keys of a large working set would thrash it), else a plain
	 * reference without the call (most hits on a 1M-key Zipf) */
	if (sl->v && sl->v != v && (++region__vcache_tick & 7) != 0) {
		atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
		return true;
	}
	return false;
}

/* A value reference for a hit, through the thread's cache. */
static inline struct region_value *region__value_ref_hit(struct region_value *v)
{
	return region__value_ref_hit_fast(v) ? v
					     : region__value_ref_hit_slow(v);
}
/* Drops a reference the thread's cache handed out; false if it did not. */
static inline bool region__value_unref_cached(struct region_value *v)
{
	struct region__vref_slot *sl = region__vslot_of(v);

	if (sl->v == v && sl->used > 0) {
		sl->used--;
		return true;
	}
	return false;
}
/* Returns the calling thread's cached references (its unused biases). */
void region__vcache_flush(void);

/* ---- stripe.c -------------------------------------------------------- */

int region__stripe_init(struct stripe *s, const struct region_evict_ops *ops);
/* Frees every entry and the table. No lock; nobody else may use s. */
void region__stripe_release(struct stripe *s);

/* The out-of-line parts of region__stripe_wrlock() and _wrunlock(),
 * which are inline (the end of this file): the replay of a lane's n > 0
 * buffered hits, and an unlock that has retired entries to collect. */
void region__replay_lane_locked(struct stripe *s, struct lane *l, uint64_t n);
void region__wrunlock_collect(struct stripe *s);
/* Appends the hit on e as record n (< REGION_LANE_RECS) of lane l, the
 * thread's own (slot): relaxed stores. The first record of a lane notes
 * the stripe's reclaim count (read in the caller's epoch section: see
 * struct lane); the shared lane is marked LANE_SEQ_NONE (replayed by
 * hash). */
static inline void region__lane_append(const struct stripe *s, struct lane *l,
				       uint64_t n, struct entry *e,
				       uint64_t hash, unsigned slot)
{
	if (n == 0)
		atomic_store_explicit(
			&l->seq,
			slot == REGION_SHARED_SLOT
				? LANE_SEQ_NONE
				: atomic_load_explicit(&s->reclaims,
						       memory_order_relaxed),
			memory_order_relaxed);
	atomic_store_explicit(&l->rec[n].e, e, memory_order_relaxed);
	atomic_store_explicit(&l->rec[n].hash, hash, memory_order_relaxed);
	atomic_store_explicit(&l->n, n + 1, memory_order_relaxed);
}

/* region__stripe_record_hit() when the lane is full or about to be: it
 * records and replays under a trylock. */
void region__stripe_record_hit_slow(struct region *r, struct stripe *s,
				    struct entry *e, uint64_t hash,
				    unsigned slot);
/* Records a hit on e (its key's hash) for a policy without access();
 * never blocks. Called inside the epoch section in which e was found
 * (struct lane). The common case inline: a few relaxed stores to the
 * thread's own lane. */
static inline void region__stripe_record_hit(struct region *r, struct stripe *s,
					     struct entry *e, uint64_t hash,
					     unsigned slot)
{
	struct lane *l = &s->lanes[slot];
	uint64_t n = atomic_load_explicit(&l->n, memory_order_relaxed);

	if (region__unlikely(n >= REGION_LANE_RECS - 1)) {
		region__stripe_record_hit_slow(r, s, e, hash, slot);
		return;
	}
	region__lane_append(s, l, n, e, hash, slot);
}
static inline uint64_t region__stripe_reclaims(const struct stripe *s)
{
	return atomic_load_explicit(&s->reclaims, memory_order_relaxed);
}
/* Advances the epoch and frees what can be freed. Takes the lock. */
void region__stripe_reclaim(struct stripe *s);
/*
 * Frees every retired entry and table of s that no reader can still see,
 * advancing the epoch (twice at most) to make them so: what
 * region_reclaim_retired() does for each stripe. Returns the entries
 * freed. Takes the lock (up to three holds).
 */
size_t region__stripe_reclaim_retired(struct stripe *s);

#ifndef NDEBUG
uintptr_t region__thread_token(void);
#define region__assert_wrlocked(s)                                             \
	assert(atomic_load_explicit(&(s)->owner, memory_order_relaxed) ==      \
	       region__thread_token())
#else
#define region__assert_wrlocked(s) ((void)(s))
#endif

/* Counts n entries or buckets examined in this lock hold (bounded by
 * REGION_SWEEP_BATCH everywhere; the maximum is a stat). Lock held. */
static inline void region__examined(struct stripe *s, uint64_t n)
{
	s->examined += n;
}

/*
 * Walks a chain for key. No hash is stored to filter on: klen, then the
 * key's last 8 bytes (keys that share a prefix, like file names, differ
 * there first), then the words before them. Inline word compares: the
 * library memcmp() through the PLT was 11% of a cache-resident hit.
 */
static inline struct entry *region__chain_find(struct entry *e, const void *key,
					       size_t klen)
{
	const unsigned char *k = key;
	uint64_t tail;

	if (klen < 8) {
		/* bytes, not memcmp(): a call would make the lock-free hit
		 * save registers (region_borrow()) */
		for (; e; e = atomic_load_explicit(&e->hnext,
						   memory_order_acquire)) {
			size_t i = 0;

			if (e->klen != klen)
				continue;
			while (i < klen && e->key[i] == k[i])
				i++;
			if (i == klen)
				return e;
		}
		return NULL;
	}
	tail = region__rd64(k + klen - 8);
	for (; e; e = atomic_load_explicit(&e->hnext, memory_order_acquire)) {
		size_t i;

		if (e->klen != klen || region__rd64(e->key + klen - 8) != tail)
			continue;
		/* the last 8 bytes are equal: the words before them */
		for (i = 0; i + 8 < klen; i += 8) {
			if (region__rd64(e->key + i) != region__rd64(k + i))
				break;
		}
		if (i + 8 >= klen)
			return e;
	}
	return NULL;
}

/*
 * The entry for key, or NULL, in the current table and then in the table
 * being migrated. Inside an epoch section (lock-free: may miss an entry
 * that is being moved between tables; callers then take the lock and
 * look again) or with the lock held (exact).
 */
static inline struct entry *region__stripe_find(const struct stripe *s,
						uint64_t hash, const void *key,
						size_t klen)
{
	struct table *t = atomic_load_explicit(&s->tab, memory_order_acquire);
	struct table *o = atomic_load_explicit(&s->old, memory_order_acquire);
	struct entry *e;

	e = region__chain_find(atomic_load_explicit(&t->b[hash & t->mask],
						    memory_order_acquire),
			       key, klen);
	if (!e && o)
		e = region__chain_find(
			atomic_load_explicit(&o->b[hash & o->mask],
					     memory_order_acquire),
			key, klen);
	return e;
}

/* Is e current (not unlinked, not from before an invalidate-all)? */
static inline bool region__entry_live(const struct stripe *s,
				      const struct entry *e)
{
	return !atomic_load_explicit(&e->dead, memory_order_acquire) &&
	       e->gen == atomic_load_explicit(&s->gen, memory_order_acquire);
}

/*
 * A new entry for v, or NULL. A value of at most REGION_EMBED_MAX bytes is
 * copied into the entry's allocation; a larger one gets a header there
 * that points at v's data (region__entry_indirect()) and that will own a
 * reference to v, which the caller takes before linking. The entry's
 * value header starts with one reference: the entry's. An entry never
 * linked is dropped with region__entry_discard().
 */
struct entry *region__entry_create(const void *key, size_t klen,
				   struct region_value *v);
/*
 * A new entry block for key with len (<= REGION_EMBED_MAX) bytes of
 * EMBEDDED value data, uninitialized, and metadata 0: region_flight_value()
 * hands its value to the loader to fill in place. Its value header starts
 * with one reference (the loader's); the entry takes none until linked.
 * It stays ENTRY_FRESH until region_flight_done() claims it.
 */
struct entry *region__entry_alloc(const void *key, size_t klen, size_t len);
/* The entry whose block holds v, if v was made by region__entry_alloc()
 * and is not claimed yet; else NULL. */
static inline struct entry *region__entry_of_fresh(struct region_value *v)
{
	struct entry *e;

	if (v->kind != VALUE_EMBEDDED)
		return NULL;
	e = (struct entry *)((char *)v - v->back);
	if (atomic_load_explicit(&e->dead, memory_order_relaxed) != ENTRY_FRESH)
		return NULL;
	return e;
}
/* Does e's value point at the caller's value (a reference to take)? */
static inline bool region__entry_indirect(const struct entry *e)
{
	return region__entry_val(e)->kind == VALUE_INDIRECT;
}
/* Frees an entry that was never linked (and took no reference). */
void region__entry_discard(struct entry *e);

/*
 * Makes room for e (region__make_room_locked(), at most max victims),
 * then links e into table, gauges and policy; stamps install/access
 * times and the generation. Lock held.
 */
void region__install_locked(struct region *r, struct stripe *s, struct entry *e,
			    uint64_t hash, uint64_t now, size_t max);
/*
 * Unlinks e from everything and retires it (freed after the grace
 * period). grave is unused (kept for the policy seam). Lock held.
 */
void region__unlink_locked(struct stripe *s, struct entry *e,
			   struct entry **grave);
/* The same for a caller that knows the hash of e's key. */
void region__unlink_hash_locked(struct stripe *s, struct entry *e,
				uint64_t hash);
/* Unlinks e as a capacity eviction (counted). Lock held. */
void region__evict_locked(struct region *r, struct stripe *s, struct entry *e,
			  struct entry **grave);
/* Is the stripe over either quota if charge more bytes (and one more
 * entry when adding) were added? */
static inline bool region__over_quota(const struct stripe *s, bool adding,
				      uint64_t charge)
{
	return s->nentries + adding > s->quota_entries ||
	       s->bytes + charge > s->quota_bytes ||
	       s->bytes + charge < s->bytes;
}
/*
 * Evicts (entries of an older generation first, then by the policy) until
 * one more entry of charge bytes fits (adding) or the stripe is within
 * quotas, or max victims went. Returns the number evicted. Lock held.
 */
size_t region__make_room_locked(struct region *r, struct stripe *s, bool adding,
				uint64_t charge, size_t max,
				struct entry **grave);
/* Makes every entry stale (O(1)): readers stop seeing them, and they are
 * reclaimed lazily. Lock held. */
void region__stripe_invalidate_all_locked(struct stripe *s);
/* Reclaims up to max stale entries from the cursor on; returns how many.
 * Lock held. */
size_t region__reclaim_stale_locked(struct region *r, struct stripe *s,
				    size_t max);
/* One step of an incremental table migration, if one is running. */
void region__migrate_step_locked(struct stripe *s);

/* ---- evict.c --------------------------------------------------------- */

const struct region_evict_ops *region__evict_ops(enum region_strategy s);
/* Frees the ghost. No lock; nobody else may use s. */
void region__ghost_release(struct ghost *g);
/* tinylfu.c */
extern const struct region_evict_ops region__tinylfu_ops;

/* ---- expire.c -------------------------------------------------------- */

enum region_expiry {
	REGION_LIVE = 0,
	REGION_EXPIRED_TTL,
	REGION_EXPIRED_TTI,
};

static inline uint64_t region__ttl(const struct stripe *s)
{
	return atomic_load_explicit(&s->ttl_ms, memory_order_relaxed);
}

static inline uint64_t region__tti(const struct stripe *s)
{
	return atomic_load_explicit(&s->tti_ms, memory_order_relaxed);
}

/* Is e expired at now? Lock held, or inside an epoch section. */
static inline enum region_expiry
region__expired(const struct stripe *s, const struct entry *e, uint64_t now)
{
	uint64_t acc, ttl = region__ttl(s), tti = region__tti(s);

	if (ttl && now >= e->install_ms && now - e->install_ms >= ttl)
		return REGION_EXPIRED_TTL;
	if (tti) {
		acc = atomic_load_explicit(&e->access_ms, memory_order_relaxed);
		if (now >= acc && now - acc >= tti)
			return REGION_EXPIRED_TTI;
	}
	return REGION_LIVE;
}

/* Does this stripe need the clock at all on a hit? */
static inline bool region__expiring(const struct stripe *s)
{
	return (region__ttl(s) | region__tti(s)) != 0;
}

/* Records a hit at now for tti (at most one store per millisecond). */
static inline void region__touch_time(const struct stripe *s, struct entry *e,
				      uint64_t now)
{
	if (region__tti(s) &&
	    atomic_load_explicit(&e->access_ms, memory_order_relaxed) != now)
		atomic_store_explicit(&e->access_ms, now, memory_order_relaxed);
}

/* Unlinks an expired entry and counts it by cause. Write lock held. */
void region__expire_locked(struct region *r, struct stripe *s, struct entry *e,
			   enum region_expiry why);

/* ---- stats.c --------------------------------------------------------- */

extern __thread unsigned region__tslot_v
	__attribute__((tls_model("initial-exec")));
unsigned region__tslot_assign(void);

/* This thread's counter slot index. */
static inline unsigned region__tslot(void)
{
	unsigned v = region__tslot_v;

	if (region__unlikely(v == 0))
		v = region__tslot_assign();
	return v - 1;
}

/* region__count() for a caller that has its thread's slot i at hand. */
static inline void region__count_slot(struct region *r, unsigned i,
				      enum region_stat id, uint64_t n)
{
	atomic_uint_fast64_t *c = &r->slots[i].c[id];

	if (region__likely(i != REGION_SHARED_SLOT))
		atomic_store_explicit(
			c, atomic_load_explicit(c, memory_order_relaxed) + n,
			memory_order_relaxed); /* this thread's own slot */
	else
		atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static inline void region__count(struct region *r, enum region_stat id,
				 uint64_t n)
{
	region__count_slot(r, region__tslot(), id, n);
}

int region__stats_init(struct region *r);
void region__stats_release(struct region *r);

/* ---- region.c -------------------------------------------------------- */

/* Values: take one more reference (the hit path inlines it). */
static inline struct region_value *region__value_ref(struct region_value *v)
{
	atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
	return v;
}

/* Frees a value whose count reached zero. */
void region__value_free(struct region_value *v);
/* The bytes of live values, per thread slot (region.c). */
struct region_vbytes {
	alignas(REGION_CACHELINE) atomic_int_fast64_t b;
};
extern struct region_vbytes region__live_value_bytes[REGION_STAT_SLOTS];

/* Adds delta to the bytes of live values (region_values_bytes()). */
static inline void region__values_account(int64_t delta)
{
	unsigned i = region__tslot();
	atomic_int_fast64_t *c = &region__live_value_bytes[i].b;

	if (region__likely(i != REGION_SHARED_SLOT))
		atomic_store_explicit(
			c,
			atomic_load_explicit(c, memory_order_relaxed) + delta,
			memory_order_relaxed); /* this thread's own slot */
	else
		atomic_fetch_add_explicit(c, delta, memory_order_relaxed);
}

/*
 * Spare blocks (epoch.c). Every value and entry block goes through
 * region__block_alloc() and region__block_free() with the size it was
 * asked for. A thread keeps the blocks it frees, by size class (16c + 8
 * bytes: what a glibc chunk of 16c + 16 holds, so that rounding a block
 * up to its class costs no memory; rounding to 16c cost 16 bytes an
 * entry, bench_memory) up to ~1 KiB and at most REGION_SPARE_BYTES in
 * all, and hands them out again for its next values and entries, so that
 * a miss that evicts neither mallocs nor frees: retired entries are freed
 * in batches (epoch.c), which overflow glibc's per-thread cache (7 blocks
 * a size) and cost ~400 instructions a miss in its arenas (callgrind,
 * bench_engine mix48). Spare bytes count in region_values_bytes() (the
 * memory the daemon limits: the sum over the epoch records, where each
 * thread keeps its count) until they are reused or freed: when the
 * thread exits (the epoch record's destructor: only threads with a record
 * keep spares) and on region_destroy() for the calling thread. Under ASan
 * a spare is poisoned past its link word, so a use after free is still
 * reported.
 */
#define REGION_SPARE_QUANTUM 16
#define REGION_SPARE_CLASSES 64		 /* blocks up to 1 KiB */
#define REGION_SPARE_BYTES   (64 * 1024) /* per thread */

struct region__spares {
	void *head[REGION_SPARE_CLASSES]; /* singly linked through word 0 */
	size_t bytes;
};
extern __thread struct region__spares region__spares
	__attribute__((tls_model("initial-exec")));
void region__spare_poison(void *p, size_t len, bool poison);
/* Frees the calling thread's spare blocks. */
void region__spares_flush(void);
/* The spare bytes of all threads (epoch.c). */
uint64_t region__spares_bytes(void);

#if defined(__SANITIZE_ADDRESS__)
#define REGION_SPARE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REGION_SPARE_ASAN 1
#endif
#endif
#ifndef REGION_SPARE_ASAN
#define REGION_SPARE_ASAN 0
#endif

static inline size_t region__spare_class(size_t size)
{
	return (size + REGION_SPARE_QUANTUM / 2 - 1) / REGION_SPARE_QUANTUM;
}

/* The bytes of a block of class c. */
static inline size_t region__spare_bytes(size_t c)
{
	return c * REGION_SPARE_QUANTUM + REGION_SPARE_QUANTUM / 2;
}

/* The owner's store of the spare byte count, which region_values_bytes()
 * reads from the thread's epoch record. */
static inline void region__spares_set(struct region__epoch_rec *rec,
				      size_t bytes)
{
	region__spares.bytes = bytes;
	atomic_store_explicit(&rec->spare_bytes, bytes, memory_order_relaxed);
}

/* A block of at least size bytes: a spare of its class, or malloc's. */
static inline void *region__block_alloc(size_t size)
{
	size_t c = region__spare_class(size), b = region__spare_bytes(c);
	void *p;

	if (region__unlikely(c >= REGION_SPARE_CLASSES))
		return malloc(size);
	p = region__spares.head[c];
	if (!p)
		return malloc(b); /* the whole class: it may become a spare */
	if (REGION_SPARE_ASAN)
		region__spare_poison(p, b, false);
	memcpy(&region__spares.head[c], p, sizeof(void *));
	/* a spare was kept with a record, which the thread keeps */
	region__spares_set(region__my_rec, region__spares.bytes - b);
	return p;
}

/* Keeps a block region__block_alloc(size) returned as a spare if *bytes
 * (the thread's spare bytes, which it then adds to) leaves room; else
 * free(). The caller has an epoch record and stores *bytes with
 * region__spares_set() (a batch of frees stores it once). */
static inline void region__block_keep(void *p, size_t size, size_t *bytes)
{
	size_t c = region__spare_class(size), b = region__spare_bytes(c);

	if (c < REGION_SPARE_CLASSES && *bytes + b <= REGION_SPARE_BYTES) {
		memcpy(p, &region__spares.head[c], sizeof(void *));
		region__spares.head[c] = p;
		*bytes += b;
		if (REGION_SPARE_ASAN)
			region__spare_poison(p, b, true);
		return;
	}
	free(p);
}

/* Frees a block region__block_alloc(size) returned: keeps it as a spare
 * if the thread has room (and an epoch record), else free(). */
static inline void region__block_free(void *p, size_t size)
{
	struct region__epoch_rec *rec = region__my_rec;
	size_t bytes = region__spares.bytes;

	if (!rec) {
		free(p);
		return;
	}
	region__block_keep(p, size, &bytes);
	if (bytes != region__spares.bytes)
		region__spares_set(rec, bytes);
}

/* ---- the stripe lock's holds (stripe.c) ------------------------------ */

/*
 * Inline, with only their slow parts out of line: a miss takes two holds
 * and a write three, and the calls were ~8 instructions a hold
 * (callgrind, bench_engine mix48 LRU).
 */
static inline void region__set_owner(struct stripe *s, bool mine)
{
#ifndef NDEBUG
	atomic_store_explicit(&s->owner, mine ? region__thread_token() : 0,
			      memory_order_relaxed);
#else
	(void)s;
	(void)mine;
#endif
}

/* What every acquisition does: replays the thread's own buffered hits. */
static inline void region__lock_acquired(struct stripe *s)
{
	struct lane *l;
	uint64_t n;

	region__set_owner(s, true);
	s->examined = 0;
	if (s->ops->access)
		return;
	l = &s->lanes[region__tslot()];
	n = atomic_load_explicit(&l->n, memory_order_relaxed);
	if (n) /* most holds: nothing buffered, the lane's line untouched */
		region__replay_lane_locked(s, l, n);
}

/* Takes the stripe lock and replays this thread's buffered hits. */
static inline void region__stripe_wrlock(struct stripe *s)
{
	region__lock(&s->lock);
	region__lock_acquired(s);
}

/*
 * Would the collection of the unlock (stripe.c's collect_locked()) do
 * nothing (detach nothing, stamp nothing, ask for no scan)? Most holds:
 * nothing retired, or retired entries of which the oldest run is not
 * safe yet, below the scan threshold. Its answer is collect_locked()'s
 * exactly; it only spares those holds the rest of collect_locked() and
 * the registers of the unlock's slow path (~30 instructions a hold,
 * callgrind, bench_engine mix2). Lock held.
 */
static inline bool region__collect_idle_locked(const struct stripe *s)
{
	if (!s->retired && !s->retired_tabs)
		return true;
	return !s->retired_tabs && s->nruns && s->nretired < s->advance_at &&
	       !region__epoch_safe(s->runs[s->run_head].epoch,
				   region__epoch_now());
}

/* Drops the stripe lock; frees what was retired long enough ago (after
 * unlocking). */
static inline void region__stripe_wrunlock(struct stripe *s)
{
	region__assert_wrlocked(s);
	if (s->examined >
	    atomic_load_explicit(&s->max_examined, memory_order_relaxed))
		atomic_store_explicit(&s->max_examined, s->examined,
				      memory_order_relaxed);
	if (!region__collect_idle_locked(s)) {
		region__wrunlock_collect(s);
		return;
	}
	region__set_owner(s, false);
	region__unlock(&s->lock);
}

/* Computes stripe quotas for limits spread over n stripes. */
void region__quota_of(const struct region_limits *lim, unsigned n, unsigned i,
		      uint64_t *entries, uint64_t *bytes);

#endif /* RFS_REGION_INT_H */
