/*
 * region_int.h - internals shared by the regions/ sources only (fs/ must not see it).
 *
 * Object map:
 *
 *   struct region ──▶ stripes[nstripes] ──▶ buckets[] ──▶ struct entry ──▶
 *        │                   │                              struct region_value
 *        │                   ├──▶ eviction state (LRU list, or S3-FIFO small/
 *        │                   │    main queues + ghost), access buffer
 *        │                   └──▶ attached flights ──▶ struct region_flight
 *        └──▶ stat slots[REGION_STAT_SLOTS] (per-thread relaxed counters)
 *
 * Locking (see also the lock maps in region.c and stripe.c):
 * - Each stripe's rwlock guards every field marked "L: stripe": its table,
 *   its eviction state, its flights list, its gauges and quotas. Hits hold
 *   it shared; everything that changes the stripe holds it exclusive, and
 *   every exclusive acquisition first drains the access buffer
 *   (region__stripe_wrlock()).
 * - region.cfg_mu guards the region's copy of its limits ("M: cfg").
 * - region.sweep_mu guards the sweep cursors ("M: sweep").
 * - flight.mu guards a flight's result ("M: flight").
 * Order: sweep_mu -> cfg_mu -> one stripe lock -> flight.mu. No path holds
 * two stripe locks. Counters are relaxed atomics; entry.access_ms and
 * entry.freq are relaxed atomics written by readers under the shared lock.
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
#include <string.h>

#include "region.h"

#define REGION_UNLIMITED   UINT64_MAX /* a stripe quota without a limit */
#define REGION_ABUF_SLOTS  64	      /* LRU access buffer per stripe */
#define REGION_STAT_SLOTS  32	      /* per-thread counter slots per region */
#define REGION_SWEEP_BATCH 1024	      /* entries examined per lock hold */
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

struct region_value {
	atomic_uint_fast32_t refs; /* references; freed at zero */
	bool adopted;		   /* data is a separate malloc block */
	size_t len;		   /* immutable */
	const unsigned char *data; /* immutable; inline[] or adopted */
	int64_t mtime_ns;	   /* set before publication, then immutable */
	uint64_t version;	   /* set before publication, then immutable */
	uint64_t tag;		   /* set before publication, then immutable */
	unsigned char inline_data[];
};

/* ---- entries --------------------------------------------------------- */

enum entry_queue {
	ENTRY_Q_NONE = 0, /* LRU: the single list */
	ENTRY_Q_SMALL,	  /* S3-FIFO small (probation) queue */
	ENTRY_Q_MAIN,	  /* S3-FIFO main queue */
	ENTRY_Q_WINDOW,	  /* TinyLFU admission window (tinylfu.c) */
	ENTRY_Q_PROBATION, /* TinyLFU main, probation segment */
	ENTRY_Q_PROTECTED, /* TinyLFU main, protected segment */
};

/*
 * One cached key. Linked in exactly one stripe's table and eviction state
 * while cached; freed (after the stripe lock is dropped) once unlinked.
 * Readers never keep an entry pointer past their shared lock: what they
 * keep is a reference to the value.
 */
struct entry {
	struct entry *hnext;	  /* L: stripe; hash chain, or graveyard */
	uint64_t hash;		  /* immutable */
	struct region_value *val; /* immutable; owns one reference */
	struct rlist qnode;	  /* L: stripe; LRU list or S3-FIFO queue */
	uint64_t charge;	  /* immutable; key + value bytes */
	uint64_t install_ms;	  /* immutable; start of the ttl */
	atomic_uint_fast64_t access_ms; /* relaxed; last access, for tti */
	atomic_uchar freq;		/* relaxed; S3-FIFO access count 0..3 */
	uint8_t queue;			/* L: stripe; enum entry_queue */
	uint8_t klen;			/* immutable; 1..REGION_MAX_KEY */
	unsigned char key[];		/* immutable */
};

/* ---- flights --------------------------------------------------------- */

/*
 * One load in the air. Refcounted: the loader holds one reference until
 * region_flight_done(), each waiter one until it has read the result.
 */
struct region_flight {
	struct region_flight *next; /* L: stripe; while attached */
	struct region *r;	    /* holds a region reference until done */
	uint64_t hash;		    /* immutable */
	uint64_t start_ns;	    /* immutable; CLOCK_MONOTONIC */
	bool attached;		    /* L: stripe; findable by region_get() */
	bool poisoned;		    /* L: stripe; an invalidation hit it */
	atomic_uint refs;	    /* loader + waiters */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;		  /* M: flight */
	int rc;			  /* M: flight; 0 or -errno */
	struct region_value *val; /* M: flight; one reference when rc == 0 */
	uint8_t klen;		  /* immutable */
	unsigned char key[];	  /* immutable */
};

/* ---- ghost (S3-FIFO) ------------------------------------------------- */

/* A recently evicted key, remembered by hash only. */
struct ghost_node {
	struct ghost_node *hnext; /* L: stripe; ghost hash chain */
	struct rlist qnode;	  /* L: stripe; ghost FIFO */
	uint64_t hash;
	uint64_t charge;
};

struct ghost {
	struct ghost_node **buckets; /* L: stripe; power-of-two sized */
	size_t mask;		     /* L: stripe; nbuckets - 1, or 0 */
	struct rlist fifo;	     /* L: stripe; newest at the head */
	uint64_t n;		     /* L: stripe */
	uint64_t bytes;		     /* L: stripe; sum of charges */
};

/* ---- stripes --------------------------------------------------------- */

#include "tinylfu.h" /* struct region_tlfu: needs struct rlist */

struct stripe;
struct region;

/*
 * The eviction seam (evict.c). One ops table per strategy; every function
 * but access() needs the stripe write lock.
 */
struct region_evict_ops {
	const char *name;
	/*
	 * Records a hit under the shared lock: no allocation, no list change.
	 * Returns true when the caller should try to drain (the LRU access
	 * buffer just filled up).
	 */
	bool (*access)(struct stripe *s, struct entry *e);
	/* Applies buffered accesses. Called by every write-lock acquisition. */
	void (*drain_locked)(struct stripe *s);
	/* A new entry (already in the table and the gauges). */
	void (*insert_locked)(struct stripe *s, struct entry *e);
	/* A hit found under the write lock. */
	void (*touch_locked)(struct stripe *s, struct entry *e);
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

struct stripe {
	alignas(REGION_CACHELINE) pthread_rwlock_t lock;
	const struct region_evict_ops *ops; /* immutable */
	struct entry **buckets;		    /* L: stripe; power-of-two sized */
	size_t mask;			    /* L: stripe; nbuckets - 1 */
	uint64_t nentries;		    /* L: stripe; gauge */
	uint64_t bytes;			    /* L: stripe; gauge, key + value */
	uint64_t nflights;		    /* L: stripe; gauge */
	struct region_flight *flights;	    /* L: stripe; attached flights */
	uint64_t quota_entries;		    /* L: stripe; or REGION_UNLIMITED */
	uint64_t quota_bytes;		    /* L: stripe; or REGION_UNLIMITED */
	uint64_t max_value_size;	    /* L: stripe; 0 = none */
	uint64_t ttl_ms;		    /* L: stripe; 0 = never */
	uint64_t tti_ms;		    /* L: stripe; 0 = never */
	/* LRU: most recently used at the head */
	struct rlist lru; /* L: stripe */
	/* S3-FIFO */
	struct rlist small, main;      /* L: stripe; newest at the head */
	uint64_t small_n, small_bytes; /* L: stripe */
	uint64_t main_n, main_bytes;   /* L: stripe */
	struct ghost ghost;	       /* L: stripe */
	/* W-TinyLFU (tinylfu.c) */
	struct region_tlfu tlfu; /* L: stripe */
#ifndef NDEBUG
	atomic_uintptr_t owner; /* write-lock holder's token, or 0 */
#endif
	/*
	 * The LRU access buffer (BP-Wrapper). A hit claims a slot with one
	 * relaxed fetch_add and stores the entry in it, all under the shared
	 * lock; each slot below abuf_n is written by exactly one reader, and
	 * the drain reads them under the exclusive lock, which orders after
	 * every reader's unlock. Records past the last slot are dropped.
	 */
	alignas(REGION_CACHELINE) atomic_uint_fast64_t abuf_n;
	struct entry *abuf[REGION_ABUF_SLOTS]; /* see above */
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

/* One thread's counters (threads share a slot modulo REGION_STAT_SLOTS). */
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

static inline struct stripe *region__stripe_of(const struct region *r,
					       uint64_t hash)
{
	/* top bits pick the stripe, low bits the bucket */
	return &r->stripes[r->nstripes > 1 ? hash >> r->stripe_shift : 0];
}

/* ---- stripe.c -------------------------------------------------------- */

int region__stripe_init(struct stripe *s, const struct region_evict_ops *ops);
/* Frees every entry and the table. No lock; nobody else may use s. */
void region__stripe_release(struct stripe *s);

/* Takes the exclusive lock and drains the access buffer. */
void region__stripe_wrlock(struct stripe *s);
void region__stripe_wrunlock(struct stripe *s);
/* Tries to take the exclusive lock just to drain; never blocks. */
void region__stripe_try_drain(struct stripe *s);

#ifndef NDEBUG
uintptr_t region__thread_token(void);
#define region__assert_wrlocked(s)                                             \
	assert(atomic_load_explicit(&(s)->owner, memory_order_relaxed) ==      \
	       region__thread_token())
#else
#define region__assert_wrlocked(s) ((void)(s))
#endif

/*
 * Are a[0..len) and b[0..len) equal? Inline word compares: the library
 * memcmp() through the PLT was 11% of a cache-resident hit.
 */
static inline bool region__key_eq(const unsigned char *a,
				  const unsigned char *b, size_t len)
{
	size_t i;

	if (len < 8)
		return memcmp(a, b, len) == 0;
	for (i = 0; i + 8 < len; i += 8) {
		if (region__rd64(a + i) != region__rd64(b + i))
			return false;
	}
	/* the last 8 bytes, overlapping the previous word if need be */
	return region__rd64(a + len - 8) == region__rd64(b + len - 8);
}

/* The entry for key, or NULL. Shared or exclusive lock held. */
static inline struct entry *region__stripe_find(const struct stripe *s,
						uint64_t hash, const void *key,
						size_t klen)
{
	struct entry *e = s->buckets[hash & s->mask];

	for (; e; e = e->hnext) {
		if (e->hash == hash && e->klen == klen &&
		    region__key_eq(e->key, key, klen))
			return e;
	}
	return NULL;
}

/* A new entry owning one reference to v (taken over), or NULL. */
struct entry *region__entry_create(uint64_t hash, const void *key, size_t klen,
				   struct region_value *v);
/* Frees a graveyard (entries chained by hnext) and drops their values. */
void region__entries_free(struct entry *grave);

/*
 * Links e into table, gauges and policy; stamps install/access times. The
 * caller has made room. Write lock held.
 */
void region__link_locked(struct stripe *s, struct entry *e, uint64_t now);
/* Unlinks e from everything and moves it to *grave. Write lock held. */
void region__unlink_locked(struct stripe *s, struct entry *e,
			   struct entry **grave);
/* The same, for the entry at *pp in its hash chain. */
void region__unlink_at_locked(struct stripe *s, struct entry **pp,
			      struct entry **grave);
/* Unlinks e as a capacity eviction (counted). Write lock held. */
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
 * Evicts by the policy until one more entry of charge bytes fits (adding)
 * or the stripe is within quotas, or max victims went. Returns the number
 * evicted. Write lock held.
 */
size_t region__make_room_locked(struct region *r, struct stripe *s, bool adding,
				uint64_t charge, size_t max,
				struct entry **grave);
/* Unlinks every entry into *grave. Write lock held. */
void region__stripe_clear_locked(struct stripe *s, struct entry **grave);

/* ---- evict.c --------------------------------------------------------- */

const struct region_evict_ops *region__evict_ops(enum region_strategy s);
/* Frees the ghost. No lock; nobody else may use s. */
void region__ghost_release(struct ghost *g);
/* The LRU access buffer's record (shared lock): true when it just filled. */
bool region__abuf_access(struct stripe *s, struct entry *e);
/* tinylfu.c */
extern const struct region_evict_ops region__tinylfu_ops;

/* ---- expire.c -------------------------------------------------------- */

enum region_expiry {
	REGION_LIVE = 0,
	REGION_EXPIRED_TTL,
	REGION_EXPIRED_TTI,
};

/* Is e expired at now? Shared or exclusive lock held. */
static inline enum region_expiry
region__expired(const struct stripe *s, const struct entry *e, uint64_t now)
{
	uint64_t acc;

	if (s->ttl_ms && now >= e->install_ms &&
	    now - e->install_ms >= s->ttl_ms)
		return REGION_EXPIRED_TTL;
	if (s->tti_ms) {
		acc = atomic_load_explicit(&e->access_ms, memory_order_relaxed);
		if (now >= acc && now - acc >= s->tti_ms)
			return REGION_EXPIRED_TTI;
	}
	return REGION_LIVE;
}

/* Does this stripe need the clock at all on a hit? */
static inline bool region__expiring(const struct stripe *s)
{
	return (s->ttl_ms | s->tti_ms) != 0;
}

/* Records a hit at now for tti (at most one store per millisecond). */
static inline void region__touch_time(const struct stripe *s, struct entry *e,
				      uint64_t now)
{
	if (s->tti_ms &&
	    atomic_load_explicit(&e->access_ms, memory_order_relaxed) != now)
		atomic_store_explicit(&e->access_ms, now, memory_order_relaxed);
}

/* Unlinks an expired entry and counts it by cause. Write lock held. */
void region__expire_locked(struct region *r, struct stripe *s,
			   struct entry **pp, enum region_expiry why,
			   struct entry **grave);

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

static inline void region__count(struct region *r, enum region_stat id,
				 uint64_t n)
{
	atomic_fetch_add_explicit(&r->slots[region__tslot()].c[id], n,
				  memory_order_relaxed);
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

/* Computes stripe quotas for limits spread over n stripes. */
void region__quota_of(const struct region_limits *lim, unsigned n, unsigned i,
		      uint64_t *entries, uint64_t *bytes);

#endif /* RFS_REGION_INT_H */
