/*
 * region.c - regions: lifecycle, the read path, flights and invalidation.
 *
 * A region is nstripes independent stripes (stripe.c) plus per-thread
 * counter slots (stats.c). This file holds the public entry points that
 * tie them together.
 *
 * The read path. A hit takes no lock (stripe.c, epoch.c): inside an epoch
 * section it finds the entry with acquire loads, checks that it is live
 * (not unlinked, not from before an invalidate-all) and not expired
 * (reading the clock only if the region has a ttl or tti), takes a value
 * reference through the thread's cache of hot values, and records the
 * access for the policy (S3-FIFO: a frequency byte; LRU: the thread's lane
 * on the stripe); then it counts the hit in the thread's own counter slot.
 * No allocation, no copy, and no store to a cache line that other readers
 * of the stripe write. A miss (or a dead or expired entry) takes the
 * stripe's mutex, re-checks, and registers a flight.
 *
 * Measured (tests/bench/bench_engine against one mutex + hash table + exact
 * LRU returning a pointer, same process, 2-vCPU VM shared with other
 * builds, so figures move by 2x between runs): see the commit messages and
 * the issue 8 report for the numbers of a run.
 *
 * Flights (single-flight loads and the stale-put guard). Every install goes
 * through a flight registered on a miss under the stripe's exclusive lock.
 * A second miss on the same key while the flight is attached joins it
 * (takes a reference, drops the stripe lock, sleeps on the stripe's
 * flight futex) instead of loading again. region_flight_done() detaches
 * the flight and installs the value unless the flight was poisoned, then
 * wakes the waiters with the value or the error (errors are never cached).
 * region_invalidate() (a write's E1 and E2, or an outside change) unlinks
 * the entry and poisons and detaches the key's flight, all under the
 * stripe lock; a reader that found the entry before the unlink may still
 * return it (its read overlapped the write), and one that starts after
 * cannot find it (release/acquire on the chain). Poisoned: its install will be refused (stale_puts_rejected).
 * Detached: a region_get() that starts after the invalidation cannot join
 * it, so it registers a fresh flight whose load starts after the
 * invalidation. Waiters already on the poisoned flight still get its value
 * (their reads overlapped the write). This closes seed 000's stranded-key
 * race: a load that read the old row before the commit can complete after
 * E2 but cannot install, and no read that starts after E2 sees it.
 * Capacity eviction and expiry poison nothing: they do not mean the value
 * changed.
 *
 * Writers' flights (region_write_begin/end(), a write-through install).
 * The other way into the cache: a write's E1 evicts and, in the same
 * hold, puts a flight on the stripe's list of writes (not in the buckets:
 * no miss joins it, and it is not a load); every invalidation of its key
 * after that (region_invalidate(), invalidate-all, another writer's
 * begin or end) poisons it and takes it off the list. The write's E2
 * evicts, poisons the key's reader flight and other writers' flights as
 * an invalidation does, and links the committed value in the same hold
 * if its own flight was not poisoned. region.h says why that value can
 * never be older than a commit whose E2 is done.
 *
 * Why flights sit in per-stripe lists (by hash, REGION_FLIGHT_BUCKETS)
 * and not in the hash table: only loads in the air are there (bounded by
 * the number of loading threads), and keeping them out of the table keeps
 * the hit path a single probe.
 *
 * Bounds. Each stripe gets a quota: max_entries/n entries (+1 for the
 * first max_entries%n stripes) and likewise for max_bytes, so the sums are
 * exactly the region's limits and concurrent installs on different stripes
 * can never push the region over them. So that every stripe can hold at
 * least one entry and one maximal value, the effective stripe count is
 *   min(nstripes, pow2floor(max_entries)           if max_entries set,
 *                 pow2floor(max_bytes / (max_value_size + REGION_MAX_KEY))
 *                                                 if both set,
 *                 pow2floor(max_bytes)             if max_bytes set)
 * (at least 1). The key counts in the max-value term because an entry is
 * charged key + value bytes. A loaded value larger than its stripe's byte
 * quota (or than max_value_size) is handed to the caller and the waiters
 * but not installed (counted uncacheable).
 *
 * Locking: see region_int.h. The region itself has two mutexes: cfg_mu
 * (the configured limits, for region_limits_get/set) and sweep_mu
 * (expire.c). region_set_limits() takes each stripe's lock in turn to
 * update its quotas and never holds two. Joined waiters sleep on their
 * stripe's flight futex (struct region_lock in region_int.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "region_int.h"

#ifdef RFS_TEST_HOOKS
static atomic_bool stale_guard_disabled;

void region_test_disable_stale_guard(bool disable)
{
	atomic_store(&stale_guard_disabled, disable);
}

static bool stale_guard_on(void)
{
	return !atomic_load_explicit(&stale_guard_disabled,
				     memory_order_relaxed);
}
#else
static bool stale_guard_on(void)
{
	return true;
}
#endif

/* ---- values ----------------------------------------------------------- */

/*
 * Bytes of every live value (data plus header), cached or only referenced
 * by readers: what the daemon's global memory limit measures. Touched on
 * create and free only, never on a hit, but that is every miss and every
 * eviction: so one counter per thread slot (seed 003: one shared counter
 * is a line every thread writes), summed on read. A value freed by
 * another thread than the one that made it leaves one slot negative and
 * another positive; the sum is exact. The blocks threads keep for reuse
 * (spares, region_int.h) count too, at their full size.
 */
struct region_vbytes region__live_value_bytes[REGION_STAT_SLOTS];

uint64_t region_values_bytes(void)
{
	int64_t sum = 0;
	unsigned i;

	for (i = 0; i < REGION_STAT_SLOTS; i++)
		sum += atomic_load_explicit(&region__live_value_bytes[i].b,
					    memory_order_relaxed);
	sum += (int64_t)region__spares_bytes(); /* freed, kept for reuse */
	return sum > 0 ? (uint64_t)sum : 0;
}

/* A value header of the given kind for len bytes, one reference. */
static void value_init(struct region_value *v, enum value_kind kind, size_t len)
{
	atomic_init(&v->refs, 1);
	v->kind = (uint8_t)kind;
	v->back = 0;
	region__vlen_set(v, len);
	v->mtime_ns = 0;
	v->version = 0;
	v->tag = 0;
}

/* A new INLINE value of len bytes, not filled in; NULL if it cannot be. */
static struct region_value *value_new(size_t len)
{
	struct region_value *v;

	if (len > REGION_VALUE_MAX_LEN)
		return NULL;
	v = region__block_alloc(REGION_VALUE_HDR + len);
	if (!v)
		return NULL;
	value_init(v, VALUE_INLINE, len);
	region__values_account((int64_t)(REGION_VALUE_HDR + len));
	return v;
}

struct region_value *region_value_create(const void *data, size_t len)
{
	struct region_value *v = value_new(len);

	if (v && len)
		memcpy(v->inline_data, data, len);
	return v;
}

struct region_value *region_value_adopt(void *buf, size_t len)
{
	struct region_value *v = NULL;

	if (!buf)
		return region_value_create(NULL, 0);
	if (len <= REGION_VALUE_MAX_LEN)
		v = region__block_alloc(REGION_VALUE_HDR +
					REGION_VALUE_PTR_OFF + sizeof(void *));
	if (!v) {
		free(buf);
		return NULL;
	}
	value_init(v, VALUE_ADOPTED, len);
	memcpy(v->inline_data + REGION_VALUE_PTR_OFF, &buf, sizeof(buf));
	region__values_account((int64_t)(REGION_VALUE_HDR + region__vlen(v)));
	return v;
}

const void *region_value_data(const struct region_value *v)
{
	void *p;

	if (v->kind != VALUE_ADOPTED && v->kind != VALUE_INDIRECT)
		return v->inline_data;
	memcpy(&p, v->inline_data + REGION_VALUE_PTR_OFF, sizeof(p));
	return p;
}

size_t region_value_len(const struct region_value *v)
{
	return region__vlen(v);
}

void region_value_set_meta(struct region_value *v, int64_t mtime_ns,
			   uint64_t version)
{
	v->mtime_ns = mtime_ns;
	v->version = version;
}

int64_t region_value_mtime(const struct region_value *v)
{
	return v->mtime_ns;
}

uint64_t region_value_version(const struct region_value *v)
{
	return v->version;
}

void region_value_set_tag(struct region_value *v, uint64_t tag)
{
	v->tag = tag;
}

uint64_t region_value_tag(const struct region_value *v)
{
	return v->tag;
}

struct region_value *region_value_ref(struct region_value *v)
{
	return region__value_ref(v);
}

void region__value_free(struct region_value *v)
{
	struct region_value *target;

	switch (v->kind) {
	case VALUE_EMBEDDED:
		region__values_account(
			-(int64_t)(REGION_VALUE_HDR + region__vlen(v)));
		/* the entry's block */
		region__block_free((char *)v - v->back,
				   v->back + REGION_VALUE_HDR +
					   region__vlen(v));
		return;
	case VALUE_INDIRECT:
		memcpy(&target,
		       v->inline_data + REGION_VALUE_PTR_OFF + sizeof(void *),
		       sizeof(target));
		region__values_account(
			-(int64_t)(REGION_VALUE_HDR + REGION_VALUE_PTRS));
		region__block_free((char *)v - v->back,
				   v->back + REGION_VALUE_HDR +
					   REGION_VALUE_PTRS);
		region_value_unref(target);
		return;
	case VALUE_ADOPTED:
		free((void *)region_value_data(v));
		region__values_account(
			-(int64_t)(REGION_VALUE_HDR + region__vlen(v)));
		region__block_free(v, REGION_VALUE_HDR + REGION_VALUE_PTR_OFF +
					      sizeof(void *));
		return;
	}
	region__values_account(-(int64_t)(REGION_VALUE_HDR + region__vlen(v)));
	region__block_free(v, REGION_VALUE_HDR + region__vlen(v));
}

void region_value_unref(struct region_value *v)
{
	if (!v || region__value_unref_cached(v))
		return;
	/*
	 * acq_rel rather than release + an acquire fence: the same lock xadd
	 * on x86, and ThreadSanitizer does not model standalone fences.
	 */
	if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1)
		return;
	region__value_free(v);
}

/* ---- limits ----------------------------------------------------------- */

static bool valid_name(const char *name)
{
	size_t i, n;

	if (!name)
		return false;
	n = strnlen(name, REGION_MAX_NAME + 1);
	if (n == 0 || n > REGION_MAX_NAME || name[0] == '-')
		return false;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static bool valid_limits(const struct region_limits *lim)
{
	if (!lim)
		return false;
	if (lim->nstripes < 1 || lim->nstripes > REGION_MAX_STRIPES ||
	    (lim->nstripes & (lim->nstripes - 1)))
		return false;
	if (lim->strategy != REGION_STRATEGY_LRU &&
	    lim->strategy != REGION_STRATEGY_S3FIFO &&
	    lim->strategy != REGION_STRATEGY_TINYLFU)
		return false;
	if (lim->max_bytes && lim->max_value_size > lim->max_bytes)
		return false;
	return true;
}

static uint64_t pow2floor(uint64_t x)
{
	return x ? (uint64_t)1 << (63 - __builtin_clzll(x)) : 1;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The most stripes the limits allow (see the design note). */
static unsigned max_stripes(const struct region_limits *lim)
{
	uint64_t n = lim->nstripes, per = 1;

	if (lim->max_entries)
		n = min_u64(n, pow2floor(lim->max_entries));
	if (lim->max_bytes) {
		/* one maximal value with the longest key, without overflow */
		if (lim->max_value_size)
			per = lim->max_value_size +
			      min_u64(REGION_MAX_KEY,
				      UINT64_MAX - lim->max_value_size);
		n = min_u64(n, pow2floor(lim->max_bytes / per));
	}
	return (unsigned)n;
}

/*
 * The stripe count a region is created with: at most max_stripes(), and
 * few enough that each stripe holds REGION_STRIPE_MIN_ENTRIES entries of
 * max_entries, so the policy works on a useful sample (striping a small
 * region into stripes of a few dozen entries costs misses: issue 8
 * measured up to 4.7 % more below ~140 entries per stripe).
 */
static unsigned effective_stripes(const struct region_limits *lim)
{
	uint64_t n = max_stripes(lim);

	if (lim->max_entries)
		n = min_u64(n, pow2floor(lim->max_entries /
					 REGION_STRIPE_MIN_ENTRIES));
	return (unsigned)(n ? n : 1);
}

void region__quota_of(const struct region_limits *lim, unsigned n, unsigned i,
		      uint64_t *entries, uint64_t *bytes)
{
	*entries = REGION_UNLIMITED;
	*bytes = REGION_UNLIMITED;
	if (lim->max_entries)
		*entries = lim->max_entries / n + (i < lim->max_entries % n);
	if (lim->max_bytes)
		*bytes = lim->max_bytes / n + (i < lim->max_bytes % n);
}

/* Applies lim to stripe i of r. Write lock held. */
static void stripe_apply_limits_locked(struct region *r, unsigned i,
				       const struct region_limits *lim)
{
	struct stripe *s = &r->stripes[i];

	region__assert_wrlocked(s);
	region__quota_of(lim, r->nstripes, i, &s->quota_entries,
			 &s->quota_bytes);
	s->max_value_size = lim->max_value_size;
	atomic_store_explicit(&s->ttl_ms, lim->ttl_ms, memory_order_relaxed);
	atomic_store_explicit(&s->tti_ms, lim->tti_ms, memory_order_relaxed);
}

/* ---- lifecycle -------------------------------------------------------- */

static void region_destroy(struct region *r)
{
	unsigned i;

	if (!r)
		return;
	/* the caller's cached value references (other threads return theirs
	 * when they exit or replace them); lets a process that only ever
	 * used regions from its main thread end without a leak */
	region__vcache_flush();
	for (i = 0; r->stripes && i < r->nstripes; i++) {
		assert(r->stripes[i].nflights == 0);
		assert(!r->stripes[i].writes);
		region__stripe_release(&r->stripes[i]);
	}
	free(r->stripes);
	/* the blocks the release freed, and earlier ones, as above */
	region__spares_flush();
	region__stats_release(r);
	pthread_mutex_destroy(&r->cfg_mu);
	pthread_mutex_destroy(&r->sweep_mu);
	free(r);
}

static int init_stripes(struct region *r)
{
	const struct region_evict_ops *ops = region__evict_ops(r->strategy);
	unsigned i;
	int rc;

	r->stripes = aligned_alloc(REGION_CACHELINE,
				   sizeof(*r->stripes) * r->nstripes);
	if (!r->stripes)
		return -ENOMEM;
	for (i = 0; i < r->nstripes; i++) {
		rc = region__stripe_init(&r->stripes[i], ops);
		if (rc) {
			/* release the ones that were set up */
			while (i--)
				region__stripe_release(&r->stripes[i]);
			free(r->stripes);
			r->stripes = NULL;
			return rc;
		}
		region__stripe_wrlock(&r->stripes[i]);
		stripe_apply_limits_locked(r, i, &r->lim);
		region__stripe_wrunlock(&r->stripes[i]);
	}
	return 0;
}

int region_create(const char *name, const struct region_limits *lim,
		  struct region **out)
{
	struct region *r;
	int rc;

	*out = NULL;
	if (!valid_name(name) || !valid_limits(lim))
		return -EINVAL;
	region__hash_init();
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	atomic_init(&r->refs, 1);
	strcpy(r->name, name);
	r->lim = *lim;
	r->strategy = lim->strategy;
	r->nstripes = effective_stripes(lim);
	r->stripe_shift = 64 - (unsigned)__builtin_ctz(r->nstripes);
	pthread_mutex_init(&r->cfg_mu, NULL);
	pthread_mutex_init(&r->sweep_mu, NULL);
	rc = region__stats_init(r);
	if (rc == 0)
		rc = init_stripes(r);
	if (rc) {
		region_destroy(r);
		return rc;
	}
	*out = r;
	return 0;
}

struct region *region_ref(struct region *r)
{
	if (r)
		atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
	return r;
}

void region_unref(struct region *r)
{
	if (!r)
		return;
	if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
		return;
	region_destroy(r);
}

const char *region_name(const struct region *r)
{
	return r->name;
}

void region_limits_get(struct region *r, struct region_limits *out)
{
	pthread_mutex_lock(&r->cfg_mu);
	*out = r->lim;
	pthread_mutex_unlock(&r->cfg_mu);
}

int region_set_limits(struct region *r, const struct region_limits *lim)
{
	unsigned i;

	if (!valid_limits(lim) || lim->strategy != r->strategy)
		return -EINVAL;
	pthread_mutex_lock(&r->cfg_mu);
	if (lim->nstripes != r->lim.nstripes ||
	    max_stripes(lim) < r->nstripes) {
		pthread_mutex_unlock(&r->cfg_mu);
		return -EINVAL;
	}
	r->lim = *lim;
	for (i = 0; i < r->nstripes; i++) {
		region__stripe_wrlock(&r->stripes[i]);
		stripe_apply_limits_locked(r, i, lim);
		region__stripe_wrunlock(&r->stripes[i]);
	}
	pthread_mutex_unlock(&r->cfg_mu);
	/* region_sweep() evicts any excess from the first stripe on */
	atomic_fetch_add(&r->trim_gen, 1);
	return 0;
}

/* ---- flights ---------------------------------------------------------- */

/*
 * load_ns is sampled: one flight in LOAD_SAMPLE per thread is timed with
 * CLOCK_MONOTONIC (68-118 ns a read on our VM, too dear for every miss;
 * the coarse clock's 4 ms tick cannot time a load of microseconds) and
 * counts LOAD_SAMPLE times. Each thread's first flight is timed.
 */
#define LOAD_SAMPLE 64
static __thread unsigned load_tick;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * One spare flight per thread (sized for the longest key): a thread has
 * at most one load in the air in the common case, so most misses neither
 * malloc nor free a flight. Freed at thread exit by a key destructor.
 */
static __thread struct region_flight *spare_flight;
static __thread bool spare_registered; /* the key's destructor will run */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_free(void *arg)
{
	(void)arg;
	free(spare_flight);
	spare_flight = NULL;
	spare_registered = false; /* a later flight_free() registers again */
}

static void spare_key_init(void)
{
	pthread_key_create(&spare_key, spare_free);
}

static void flight_free(struct region_flight *fl)
{
	if (region__unlikely(!spare_registered)) {
		/* once per thread: a non-NULL value makes the destructor run */
		pthread_once(&spare_once, spare_key_init);
		pthread_setspecific(spare_key, (void *)1);
		spare_registered = true;
	}
	if (!spare_flight) {
		spare_flight = fl;
		return;
	}
	free(fl);
}

static struct region_flight *flight_create(uint64_t hash, const void *key,
					   size_t klen)
{
	struct region_flight *fl = spare_flight;

	if (fl) {
		spare_flight = NULL;
	} else {
		fl = malloc(sizeof(*fl) + REGION_MAX_KEY);
		if (!fl)
			return NULL;
	}
	fl->next = NULL;
	fl->r = NULL;
	fl->hash = hash;
	fl->start_ns = 0;
	fl->gen = 0;
	fl->attached = false;
	fl->poisoned = false;
	fl->done = false;
	atomic_init(&fl->refs, 1);
	fl->waiters = 0;
	fl->rc = 0;
	fl->val = NULL;
	fl->klen = (uint8_t)klen;
	memcpy(fl->key, key, klen);
	return fl;
}

static void flight_unref(struct region_flight *fl)
{
	if (!fl ||
	    atomic_fetch_sub_explicit(&fl->refs, 1, memory_order_acq_rel) != 1)
		return;
	region_value_unref(fl->val);
	flight_free(fl);
}

static void detach_at_locked(struct stripe *s, struct region_flight **pp);

/* Is fl from before the stripe's last invalidate-all? */
static bool flight_stale_locked(const struct stripe *s,
				const struct region_flight *fl)
{
	return fl->gen != atomic_load_explicit(&s->gen, memory_order_relaxed) &&
	       stale_guard_on();
}

/*
 * The attached flight for key, or NULL. Flights from before an
 * invalidate-all are detached on the way (they are poisoned by their
 * generation). Lock held.
 */
static struct region_flight **find_flight_locked(struct stripe *s,
						 uint64_t hash, const void *key,
						 size_t klen)
{
	struct region_flight **pp = &s->flights[region__flight_bucket(hash)];

	region__assert_wrlocked(s);
	while (*pp) {
		region__examined(s, 1);
		if (flight_stale_locked(s, *pp)) {
			detach_at_locked(s, pp);
			continue;
		}
		if ((*pp)->hash == hash && (*pp)->klen == klen &&
		    memcmp((*pp)->key, key, klen) == 0)
			return pp;
		pp = &(*pp)->next;
	}
	return NULL;
}

static void attach_locked(struct stripe *s, struct region_flight *fl)
{
	region__assert_wrlocked(s);
	fl->gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
	fl->next = s->flights[region__flight_bucket(fl->hash)];
	s->flights[region__flight_bucket(fl->hash)] = fl;
	fl->attached = true;
	s->nflights++;
}

/* Removes the flight at *pp from the stripe's list. Lock held. */
static void detach_at_locked(struct stripe *s, struct region_flight **pp)
{
	struct region_flight *fl = *pp;

	region__assert_wrlocked(s);
	assert(fl->attached && s->nflights > 0);
	*pp = fl->next;
	fl->next = NULL;
	fl->attached = false;
	s->nflights--;
}

static void detach_locked(struct stripe *s, struct region_flight *fl)
{
	struct region_flight **pp =
		&s->flights[region__flight_bucket(fl->hash)];

	while (*pp != fl) {
		region__examined(s, 1);
		pp = &(*pp)->next;
	}
	detach_at_locked(s, pp);
}

/*
 * Waits for a joined flight's result on the stripe's flight futex; drops
 * the waiter's reference. (The raw lock: nothing *_locked runs.)
 */
static int flight_wait(struct stripe *s, struct region_flight *fl,
		       struct region_value **out)
{
	int rc;

	region__lock(&s->lock);
	while (!fl->done) {
		/* read under the lock: a completion after it changes it */
		unsigned seq = atomic_load_explicit(&s->flight_seq,
						    memory_order_relaxed);

		region__unlock(&s->lock);
		region__futex_wait(&s->flight_seq, seq);
		region__lock(&s->lock);
	}
	rc = fl->rc;
	if (rc == 0)
		*out = region__value_ref(fl->val);
	fl->waiters--;
	region__unlock(&s->lock);
	flight_unref(fl);
	return rc == 0 ? REGION_HIT : rc;
}

/* Hands the result to the waiters: v's reference, if any, is theirs. Lock
 * held. */
static void flight_publish_locked(struct stripe *s, struct region_flight *fl,
				  int rc, struct region_value *v)
{
	region__assert_wrlocked(s);
	fl->rc = rc;
	fl->val = v;
	fl->done = true;
	if (fl->waiters) {
		atomic_fetch_add_explicit(&s->flight_seq, 1,
					  memory_order_relaxed);
		region__futex_wake_all(&s->flight_seq);
	}
}

/* ---- the read path ---------------------------------------------------- */

static int check_key(const void *key, size_t klen)
{
	if (klen > REGION_MAX_KEY)
		return -ENAMETOOLONG;
	if (klen == 0 || !key)
		return -EINVAL;
	return 0;
}

#define MISS_JOINED 2 /* miss_locked(): joined another caller's flight */

/*
 * The locked part of a miss: re-check (a hit, or an expired or stale entry
 * to drop), then join the key's flight or attach fl_new. Returns
 * REGION_HIT with *out, REGION_LOAD after attaching fl_new, or MISS_JOINED
 * after taking a reference on the flight in *join.
 */
static int miss_locked(struct region *r, struct stripe *s, uint64_t h,
		       const void *key, size_t klen,
		       struct region_flight *fl_new, struct region_value **out,
		       struct region_flight **join)
{
	struct entry *e = region__stripe_find(s, h, key, klen);
	struct region_flight **fp;

	if (e && !region__entry_live(s, e)) {
		region__unlink_hash_locked(s, e, h); /* invalidated by gen */
		e = NULL;
	}
	if (e) {
		uint64_t now = region__expiring(s) ? region_now_ms() : 0;
		enum region_expiry why = region__expired(s, e, now);

		if (why == REGION_LIVE) {
			*out = region__value_ref(region__entry_val(e));
			region__touch_time(s, e, now);
			s->ops->touch_locked(s, e, h);
			return REGION_HIT;
		}
		region__expire_locked(r, s, e, why);
	}
	fp = find_flight_locked(s, h, key, klen);
	if (fp) {
		*join = *fp;
		atomic_fetch_add_explicit(&(*fp)->refs, 1,
					  memory_order_relaxed);
		(*fp)->waiters++;
		/* counted before sleeping, so tests can wait for it */
		region__count(r, ST_COALESCED, 1);
		return MISS_JOINED;
	}
	attach_locked(s, fl_new);
	return REGION_LOAD;
}

/* Out of line: inlined, its registers were saved and restored on every
 * hit (region_get's prologue and epilogue, callgrind). */
__attribute__((noinline)) static int
get_slow(struct region *r, struct stripe *s, uint64_t h, const void *key,
	 size_t klen, struct region_value **out, struct region_flight **flight)
{
	struct region_flight *fl_new, *join = NULL;
	int rc;

	/* allocated before the lock: most misses do register a flight */
	fl_new = flight_create(h, key, klen);
	if (!fl_new) {
		region__count(r, ST_GET_ERRORS, 1);
		return -ENOMEM;
	}
	region__stripe_wrlock(s);
	rc = miss_locked(r, s, h, key, klen, fl_new, out, &join);
	region__stripe_wrunlock(s);
	if (rc == REGION_HIT) {
		flight_free(fl_new); /* never attached: ours alone */
		region__count(r, ST_HITS, 1);
		return REGION_HIT;
	}
	region__count(r, ST_MISSES, 1);
	if (rc == REGION_LOAD) {
		fl_new->r = r; /* the caller keeps r alive until done */
		if (load_tick++ % LOAD_SAMPLE == 0)
			fl_new->start_ns = mono_ns();
		*flight = fl_new;
		return REGION_LOAD;
	}
	flight_free(fl_new); /* never attached: ours alone */
	return flight_wait(s, join, out);
}

/*
 * The hit path's look-up, inside the caller's epoch section: the live,
 * unexpired entry for key (its tti access recorded), or NULL.
 */
static inline struct entry *hit_find(struct stripe *s, uint64_t h,
				     const void *key, size_t klen)
{
	struct entry *e = region__stripe_find(s, h, key, klen);
	uint64_t now;

	if (e && !region__entry_live(s, e))
		return NULL;
	if (e && region__expiring(s)) {
		now = region_now_ms();
		if (region__expired(s, e, now))
			return NULL;
		region__touch_time(s, e, now);
	}
	return e;
}

/*
 * What region_get() and region_borrow() do first: checks the key (counting
 * a refused one), hashes it, finds its stripe and the thread's slot (read
 * once for the lane and the stat).
 */
static inline int get_begin(struct region *r, const void *key, size_t klen,
			    uint64_t *h, struct stripe **s, unsigned *slot)
{
	int rc = check_key(key, klen);

	if (rc) {
		region__count(r, ST_GET_ERRORS, 1);
		return rc;
	}
	*h = region__hash(key, klen);
	*s = region__stripe_of(r, *h);
	*slot = region__tslot();
	return 0;
}

enum { FAST_HIT, FAST_MISS, FAST_SLOW };

/*
 * The lock-free look-up of region_get() and region_borrow() for the
 * common case: a valid key, a thread that has its epoch record and
 * counter slot, a stripe without expiry (else FAST_SLOW: the caller's
 * full path). FAST_HIT: *e is live, found in an epoch section that is
 * still open, *slot is the thread's slot. FAST_MISS: no section is open;
 * the locked path decides. Calls nothing, so that the callers' hits save
 * no registers: everything else they reach by a tail call (callgrind:
 * a prologue and epilogue were 16 of a borrow hit's instructions).
 */
static inline int fast_find(struct region *r, const void *key, size_t klen,
			    uint64_t *h, struct stripe **s, struct entry **e,
			    unsigned *slot)
{
	struct region__epoch_rec *rec;

	if (region__unlikely(klen - 1 >= REGION_MAX_KEY || !key))
		return FAST_SLOW;
	*h = region__hash(key, klen);
	*s = region__stripe_of(r, *h);
	rec = region__my_rec;
	if (region__unlikely(!rec || region__expiring(*s)))
		return FAST_SLOW;
	region__epoch_enter_rec(rec);
	*e = region__stripe_find(*s, *h, key, klen);
	*slot = region__tslot_v; /* 0: none yet */
	if (region__unlikely(!*e || !region__entry_live(*s, *e) || !*slot)) {
		region__epoch_exit();
		return FAST_MISS;
	}
	(*slot)--;
	return FAST_HIT;
}

/* region_get() in full: any key, a thread's first call, an expiring
 * stripe. */
__attribute__((noinline)) static int get_full(struct region *r, const void *key,
					      size_t klen,
					      struct region_value **out,
					      struct region_flight **flight)
{
	const struct region_evict_ops *ops;
	struct region_value *v = NULL;
	struct stripe *s;
	struct entry *e;
	unsigned slot;
	uint64_t h;
	int rc;

	*out = NULL;
	*flight = NULL;
	rc = get_begin(r, key, klen, &h, &s, &slot);
	if (rc)
		return rc;
	ops = s->ops;
	region__epoch_enter();
	e = hit_find(s, h, key, klen);
	if (region__likely(e != NULL)) {
		v = region__value_ref_hit(region__entry_val(e));
		if (ops->access)
			ops->access(s, e);
		else /* inside the section: see struct lane */
			region__stripe_record_hit(r, s, e, h, slot);
	}
	region__epoch_exit();
	if (region__unlikely(!v))
		return get_slow(r, s, h, key, klen, out, flight);
	*out = v;
	region__count_slot(r, slot, ST_HITS, 1);
	return REGION_HIT;
}

/* A region_get() that missed lock-free: the locked path. */
__attribute__((noinline)) static int get_miss(struct region *r, uint64_t h,
					      const void *key, size_t klen,
					      struct region_value **out,
					      struct region_flight **flight)
{
	return get_slow(r, region__stripe_of(r, h), h, key, klen, out, flight);
}

/* The end of a region_get() hit whose reference is taken: the policy's
 * record (inside the section: see struct lane), then the section's end. */
__attribute__((noinline)) static int get_hit_end(struct region *r,
						 struct stripe *s,
						 struct entry *e, uint64_t h,
						 unsigned slot)
{
	if (s->ops->access)
		s->ops->access(s, e);
	else
		region__stripe_record_hit(r, s, e, h, slot);
	region__epoch_exit();
	return REGION_HIT;
}

/* A region_get() hit whose reference takes the call. */
__attribute__((noinline)) static int
get_hit_ref(struct region *r, struct stripe *s, struct entry *e, uint64_t h,
	    unsigned slot, struct region_value **out)
{
	*out = region__value_ref_hit_slow(region__entry_val(e));
	return get_hit_end(r, s, e, h, slot);
}

int region_get(struct region *r, const void *key, size_t klen,
	       struct region_value **out, struct region_flight **flight)
{
	struct region_value *v;
	struct stripe *s;
	struct entry *e;
	struct lane *l;
	unsigned slot;
	uint64_t h, n;

	*out = NULL;
	*flight = NULL;
	switch (fast_find(r, key, klen, &h, &s, &e, &slot)) {
	case FAST_SLOW:
		return get_full(r, key, klen, out, flight);
	case FAST_MISS:
		return get_miss(r, h, key, klen, out, flight);
	}
	region__count_slot(r, slot, ST_HITS, 1);
	v = region__entry_val(e);
	if (region__unlikely(!region__value_ref_hit_fast(v)))
		return get_hit_ref(r, s, e, h, slot, out);
	*out = v;
	/* region__stripe_record_hit() inline; its call a tail call */
	l = &s->lanes[slot];
	n = atomic_load_explicit(&l->n, memory_order_relaxed);
	if (region__unlikely(s->ops->access || n >= REGION_LANE_RECS - 1))
		return get_hit_end(r, s, e, h, slot);
	region__lane_append(s, l, n, e, h, slot);
	region__epoch_exit();
	return REGION_HIT;
}

/* The calls of a borrowed hit, each returning REGION_HIT so that the hit
 * path reaches them by a tail call (see region_borrow()). */
__attribute__((noinline)) static int hit_access(struct stripe *s,
						struct entry *e)
{
	s->ops->access(s, e);
	return REGION_HIT;
}

__attribute__((noinline)) static int hit_record_slow(struct region *r,
						     struct stripe *s,
						     struct entry *e,
						     uint64_t h, unsigned slot)
{
	region__stripe_record_hit_slow(r, s, e, h, slot);
	return REGION_HIT;
}

/* A hit found in the caller's epoch section, which stays open: the
 * borrow, the count and the policy's record of it (inside the section: e
 * cannot be freed). */
static inline int borrow_hit(struct region *r, struct stripe *s,
			     struct entry *e, uint64_t h, unsigned slot,
			     struct region_borrow *b)
{
	struct lane *l;
	uint64_t n;

	b->v = region__entry_val(e);
	b->ref = NULL;
	region__count_slot(r, slot, ST_HITS, 1);
	if (s->ops->access)
		return hit_access(s, e);
	/* region__stripe_record_hit(), its call a tail call */
	l = &s->lanes[slot];
	n = atomic_load_explicit(&l->n, memory_order_relaxed);
	if (region__unlikely(n >= REGION_LANE_RECS - 1))
		return hit_record_slow(r, s, e, h, slot);
	region__lane_append(s, l, n, e, h, slot);
	return REGION_HIT;
}

/* A borrow that missed lock-free: the locked path, with a reference. */
__attribute__((noinline)) static int borrow_miss(struct region *r, uint64_t h,
						 const void *key, size_t klen,
						 struct region_borrow *b,
						 struct region_flight **flight)
{
	struct stripe *s = region__stripe_of(r, h);
	int rc;

	b->ref = NULL;
	rc = get_slow(r, s, h, key, klen, &b->ref, flight);
	b->v = b->ref;
	return rc;
}

/* region_borrow() in full: any key, a thread's first call, an expiring
 * stripe. */
__attribute__((noinline)) static int borrow_slow(struct region *r,
						 const void *key, size_t klen,
						 struct region_borrow *b,
						 struct region_flight **flight)
{
	struct stripe *s;
	struct entry *e;
	uint64_t h;
	unsigned slot;
	int rc;

	b->v = NULL;
	b->ref = NULL;
	*flight = NULL;
	rc = get_begin(r, key, klen, &h, &s, &slot);
	if (rc)
		return rc;
	region__epoch_enter();
	e = hit_find(s, h, key, klen);
	if (region__unlikely(!e)) {
		region__epoch_exit();
		return borrow_miss(r, h, key, klen, b, flight);
	}
	return borrow_hit(r, s, e, h, slot, b);
}

/*
 * A borrow: the hit of region_get() without the value reference. The
 * epoch section the entry was found in stays open until
 * region_borrow_end(), so the entry, which holds a reference to its value,
 * is not freed meanwhile even if it is unlinked (epoch.c). No atomic
 * read-modify-write on anything but the thread's own epoch record.
 */
int region_borrow(struct region *r, const void *key, size_t klen,
		  struct region_borrow *b, struct region_flight **flight)
{
	struct stripe *s;
	struct entry *e;
	unsigned slot;
	uint64_t h;

	*flight = NULL;
	switch (fast_find(r, key, klen, &h, &s, &e, &slot)) {
	case FAST_SLOW:
		return borrow_slow(r, key, klen, b, flight);
	case FAST_MISS:
		return borrow_miss(r, h, key, klen, b, flight);
	}
	return borrow_hit(r, s, e, h, slot, b);
}

void region_borrow_end(struct region_borrow *b)
{
	struct region_value *ref = b->ref, *v = b->v;

	b->v = NULL; /* first: the unref is then a tail call */
	b->ref = NULL;
	if (ref)
		region_value_unref(ref);
	else if (v)
		region__epoch_exit();
}

/* Does e's value fit the stripe? Lock held. */
static bool cacheable_locked(const struct stripe *s, const struct entry *e)
{
	if (s->max_value_size &&
	    region__vlen(region__entry_val(e)) > s->max_value_size)
		return false;
	return region__entry_charge(e) <= s->quota_bytes;
}

/* May e be installed for fl's key (not poisoned, not too big)? Counts the
 * refusals. Lock held. */
static bool installable_locked(struct region *r, struct stripe *s,
			       struct region_flight *fl, struct entry *e)
{
	if (fl->poisoned || flight_stale_locked(s, fl)) {
		region__count(r, ST_STALE_PUTS, 1);
		return false;
	}
	if (!cacheable_locked(s, e)) {
		region__count(r, ST_UNCACHEABLE, 1);
		return false;
	}
	return true;
}

/*
 * Links e (its value reference taken) for fl's key. Lock held. attached:
 * fl was attached until this hold. Then no entry for the key can exist:
 * a miss attaches a flight only after dropping any entry for the key, a
 * second miss joins the attached flight, installs go through flights
 * only, and a writer's install (region_write_end()) detaches the key's
 * flight. Otherwise (a poisoned flight with the guard off, or with the
 * guard off a writer's install beside an attached flight) one is
 * replaced.
 */
static void install_locked(struct region *r, struct stripe *s,
			   struct region_flight *fl, struct entry *e,
			   bool attached, uint64_t now)
{
	struct entry *old = NULL;

	if (!attached || !stale_guard_on())
		old = region__stripe_find(s, fl->hash, fl->key, fl->klen);
	assert(!region__stripe_find(s, fl->hash, fl->key, fl->klen) ||
	       !attached || !stale_guard_on());
	if (old)
		region__unlink_hash_locked(s, old, fl->hash);
	/* bounded: excess left by a lowered limit goes in later holds (half
	 * the hold's budget: the link may migrate table buckets too) */
	region__install_locked(r, s, e, fl->hash, now, REGION_SWEEP_BATCH / 2);
	region__count(r, ST_INSTALLS, 1);
}

static void count_load(struct region *r, struct region_flight *fl, int rc)
{
	if (rc == 0)
		region__count(r, ST_LOADS, 1);
	else if (rc == -ENOENT)
		region__count(r, ST_LOAD_NOT_FOUND, 1);
	else
		region__count(r, ST_LOAD_FAILURES, 1);
	if (fl->start_ns)
		region__count(r, ST_LOAD_NS,
			      (mono_ns() - fl->start_ns) * LOAD_SAMPLE);
}

struct region_value *region_flight_value(struct region_flight *fl, size_t len,
					 void **data)
{
	struct region_value *v;
	struct entry *e;

	*data = NULL;
	if (len > REGION_EMBED_MAX) {
		v = value_new(len); /* an entry references it (INDIRECT) */
		if (!v)
			return NULL;
	} else {
		e = region__entry_alloc(fl->key, fl->klen, len);
		if (!e)
			return NULL;
		v = region__entry_val(e);
	}
	*data = v->inline_data;
	return v;
}

/*
 * The entry for fl's install, with its reference to v taken if it needs
 * one (*eref; given back by the caller if the install is refused): v's
 * own block if region_flight_value() made it for this key and nobody
 * claimed it yet (claimed now: no copy, *own), else a new entry with a
 * copy of v (or one that references it), or NULL.
 *
 * A block whose value has one reference, the caller's, is claimed and
 * referenced with plain stores: nobody else holds v, so nobody can claim
 * the block or change the count meanwhile (the acquire pairs with the
 * last other holder's acq_rel decrement, as in entry_free()). That is
 * every miss of a loader that fills the value it was given (two locked
 * read-modify-writes less per miss: the claim's exchange and the
 * reference's add). A shared v is claimed by an exchange, as the only
 * way two callers could race for its block.
 */
static inline __attribute__((always_inline)) struct entry *
entry_for(struct region_flight *fl, struct region_value *v, bool *own,
	  bool *eref)
{
	struct entry *e = region__entry_of_fresh(v);

	*own = false;
	*eref = false;
	/* chain_find(e) returns e only if e's key is fl's (inline compare) */
	if (e && region__chain_find(e, fl->key, fl->klen) == e) {
		/* dead until linked: a used block, never again */
		if (atomic_load_explicit(&v->refs, memory_order_acquire) == 1) {
			atomic_store_explicit(&e->dead, 1,
					      memory_order_relaxed);
			atomic_store_explicit(&v->refs, 2,
					      memory_order_relaxed);
			*own = *eref = true;
			return e;
		}
		if (atomic_exchange_explicit(
			    &e->dead, 1, memory_order_relaxed) == ENTRY_FRESH) {
			atomic_fetch_add_explicit(&v->refs, 1,
						  memory_order_relaxed);
			*own = *eref = true;
			return e;
		}
	}
	e = region__entry_create(fl->key, fl->klen, v);
	if (e && region__entry_indirect(e)) {
		atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
		*eref = true;
	}
	return e;
}

int region_flight_done(struct region *r, struct region_flight *fl, int rc,
		       struct region_value *v, struct region_value **out)
{
	struct stripe *s = region__stripe_of(r, fl->hash);
	struct entry *e = NULL;
	uint64_t now = 0;
	unsigned waiters;
	bool attached, own = false, eref = false;

	*out = NULL;
	assert(fl->r == r);
	if (rc > 0 || (rc == 0 && !v))
		rc = -EIO; /* a loader bug: never publish a non-value */
	if (rc) {
		region_value_unref(v);
		v = NULL;
	} else {
		/* v's own block or a copy in the entry, and the entry's
		 * reference to v if it needs one, before the lock (nobody
		 * sees the entry before it is linked; the reference is given
		 * back if the install is refused); NULL skips the install */
		e = entry_for(fl, v, &own, &eref);
	}
	count_load(r, fl, rc);
	if (e) /* not lock work: the install's time */
		now = region_now_ms();
	region__stripe_wrlock(s);
	attached = fl->attached;
	if (attached)
		detach_locked(s, fl);
	waiters = fl->waiters; /* detached: nobody can join any more */
	if (e && !installable_locked(r, s, fl, e)) {
		if (!own) /* never linked */
			region__entry_discard(e);
		e = NULL; /* own: the block stays v's */
	}
	if (v && waiters) /* one for them all: fl->val's */
		atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
	if (e)
		install_locked(r, s, fl, e, attached, now);
	flight_publish_locked(s, fl, rc, waiters ? v : NULL);
	region__stripe_wrunlock(s);
	if (eref && !e) /* refused: never the last, *out keeps one */
		atomic_fetch_sub_explicit(&v->refs, 1, memory_order_relaxed);
	*out = v;
	if (waiters)
		flight_unref(fl);
	else
		flight_free(fl); /* detached, no waiter: ours alone */
	return rc;
}

int region_fetch(struct region *r, const void *key, size_t klen,
		 region_loader_fn load, void *ctx, struct region_value **out)
{
	struct region_flight *fl;
	struct region_value *v = NULL;
	int rc;

	rc = region_get(r, key, klen, out, &fl);
	if (rc != REGION_LOAD)
		return rc;
	rc = load(ctx, key, klen, &v);
	return region_flight_done(r, fl, rc, v, out);
}

/* A live, unexpired entry's value with a new reference, or NULL. The
 * caller is in an epoch or holds the stripe lock, so the entry and its
 * value's reference are not freed under it. */
static struct region_value *peek_value(struct stripe *s, struct entry *e)
{
	if (!e || !region__entry_live(s, e) ||
	    (region__expiring(s) && region__expired(s, e, region_now_ms())))
		return NULL;
	return region_value_ref(region__entry_val(e));
}

bool region_peek(struct region *r, const void *key, size_t klen,
		 struct region_value **out)
{
	struct region_value *v;
	struct stripe *s;
	uint64_t h;

	*out = NULL;
	if (check_key(key, klen))
		return false;
	h = region__hash(key, klen);
	s = region__stripe_of(r, h);
	region__epoch_enter();
	v = peek_value(s, region__stripe_find(s, h, key, klen));
	region__epoch_exit();
	if (!v && atomic_load_explicit(&s->old, memory_order_acquire)) {
		/* a migration may have hidden it from the lock-free look */
		region__stripe_wrlock(s);
		v = peek_value(s, region__stripe_find(s, h, key, klen));
		region__stripe_wrunlock(s);
	}
	*out = v;
	return v != NULL;
}

bool region_contains(struct region *r, const void *key, size_t klen)
{
	struct region_value *v;

	if (!region_peek(r, key, klen, &v))
		return false;
	region_value_unref(v);
	return true;
}

/* ---- the write path --------------------------------------------------- */

static void count_invalidation(struct region *r, enum region_origin origin)
{
	bool outside = origin == REGION_ORIGIN_OUTSIDE;

	region__count(r, outside ? ST_INV_OUTSIDE : ST_INV_LOCAL, 1);
}

/* Poisons and detaches the flight at *fp. Lock held. */
static void poison_at_locked(struct stripe *s, struct region_flight **fp)
{
	(*fp)->poisoned = true;
	detach_at_locked(s, fp);
}

/* Poisons the writer's flight at *pp and takes it off the stripe's list.
 * Lock held. */
static void poison_write_at_locked(struct region_flight **pp)
{
	struct region_flight *w = *pp;

	*pp = w->next;
	w->next = NULL;
	w->poisoned = true;
	w->attached = false;
}

/* Poisons and takes off the stripe's list every writer's flight for key.
 * Lock held. */
static void poison_writes_locked(struct stripe *s, uint64_t h, const void *key,
				 size_t klen)
{
	struct region_flight **pp = &s->writes, *w;

	while ((w = *pp)) {
		region__examined(s, 1);
		if (w->hash == h && w->klen == klen &&
		    memcmp(w->key, key, klen) == 0)
			poison_write_at_locked(pp);
		else
			pp = &w->next;
	}
}

/* Takes writer's flight w off the stripe's list, if it is on it. */
static void unlist_write_locked(struct stripe *s, struct region_flight *w)
{
	struct region_flight **pp = &s->writes;

	if (!w->attached)
		return;
	while (*pp != w) {
		region__examined(s, 1);
		pp = &(*pp)->next;
	}
	*pp = w->next;
	w->next = NULL;
	w->attached = false;
}

/* The key's entry unlinked, its flight and its writers' poisoned. */
static void invalidate_locked(struct stripe *s, uint64_t h, const void *key,
			      size_t klen)
{
	struct region_flight **fp;
	struct entry *e;

	e = region__stripe_find(s, h, key, klen);
	if (e)
		region__unlink_hash_locked(s, e, h);
	fp = find_flight_locked(s, h, key, klen);
	if (fp && stale_guard_on())
		poison_at_locked(s, fp);
	if (s->writes && stale_guard_on())
		poison_writes_locked(s, h, key, klen);
}

void region_invalidate(struct region *r, const void *key, size_t klen,
		       enum region_origin origin)
{
	struct stripe *s;
	uint64_t h;

	if (check_key(key, klen))
		return; /* such a key can be neither cached nor loading */
	h = region__hash(key, klen);
	s = region__stripe_of(r, h);
	region__stripe_wrlock(s);
	invalidate_locked(s, h, key, klen);
	region__stripe_wrunlock(s);
	count_invalidation(r, origin);
}

int region_write_begin(struct region *r, const void *key, size_t klen,
		       enum region_origin origin, struct region_flight **wf)
{
	struct region_flight *w;
	struct stripe *s;
	uint64_t h;
	int rc;

	*wf = NULL;
	rc = check_key(key, klen);
	if (rc)
		return rc; /* such a key can be neither cached nor loading */
	h = region__hash(key, klen);
	s = region__stripe_of(r, h);
	w = flight_create(h, key, klen); /* before the lock, as a miss's */
	region__stripe_wrlock(s);
	invalidate_locked(s, h, key, klen);
	if (w) { /* after the eviction: only later invalidations poison it */
		w->r = r;
		w->gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
		w->next = s->writes;
		s->writes = w;
		w->attached = true;
	}
	region__stripe_wrunlock(s);
	count_invalidation(r, origin);
	if (!w)
		return -ENOMEM;
	*wf = w;
	return 0;
}

int region_write_end(struct region *r, struct region_flight *wf,
		     struct region_value *v, enum region_origin origin)
{
	struct stripe *s;
	struct entry *e = NULL;
	bool own = false, eref = false, ok;
	uint64_t now = 0;

	if (!wf) {
		region_value_unref(v);
		return 0; /* region_write_begin() failed and invalidated */
	}
	assert(wf->r == r);
	s = region__stripe_of(r, wf->hash);
	if (v) {
		/* as region_flight_done(): the entry and its reference to v
		 * made before the lock (given back if the install is refused) */
		e = entry_for(wf, v, &own, &eref);
		now = region_now_ms();
	}
	region__stripe_wrlock(s);
	unlist_write_locked(s, wf);
	invalidate_locked(s, wf->hash, wf->key, wf->klen);
	/* a refusal is not a stale put: the write goes on, uncached */
	ok = e && !wf->poisoned && !flight_stale_locked(s, wf) &&
	     cacheable_locked(s, e);
	if (ok) /* invalidate_locked() left no entry for the key */
		install_locked(r, s, wf, e, false, now);
	else if (e && !own)
		region__entry_discard(e); /* never linked */
	region__stripe_wrunlock(s);
	if (eref && !ok) /* refused: never the last, ours keeps one */
		atomic_fetch_sub_explicit(&v->refs, 1, memory_order_relaxed);
	count_invalidation(r, origin);
	if (ok)
		region__count(r, ST_WRITE_INSTALLS, 1);
	region_value_unref(v);
	flight_free(wf); /* never joined: ours alone */
	return ok ? 1 : 0;
}

/*
 * O(1) entries per stripe: bumps each stripe's generation. Entries of an
 * older generation are invisible at once and reclaimed lazily (installs,
 * the sweep, at most REGION_SWEEP_BATCH per lock hold); the flights in the
 * air are poisoned and detached, so no region_get() that starts after
 * this call joins one (their generation alone would refuse the install).
 */
void region_invalidate_all(struct region *r, enum region_origin origin)
{
	unsigned i, b;

	for (i = 0; i < r->nstripes; i++) {
		struct stripe *s = &r->stripes[i];

		region__stripe_wrlock(s);
		region__stripe_invalidate_all_locked(s);
		/* few (one per loading thread at most): poisoned by their
		 * generation, detached now so that nobody joins them */
		for (b = 0; b < REGION_FLIGHT_BUCKETS && stale_guard_on();
		     b++) {
			while (s->flights[b])
				poison_at_locked(s, &s->flights[b]);
		}
		/* writers' flights: likewise (their generation too) */
		while (s->writes && stale_guard_on()) {
			region__examined(s, 1);
			poison_write_at_locked(&s->writes);
		}
		region__stripe_wrunlock(s);
	}
	count_invalidation(r, origin);
}
