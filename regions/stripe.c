/*
 * stripe.c - one stripe of a region: its lock, hash table and entries.
 *
 * A region spreads its keys over nstripes stripes by the top bits of a
 * seeded 64-bit hash; the low bits pick a bucket of the stripe's chained
 * hash table. Each stripe is a small cache of its own: a writer-preferring
 * rwlock, a table that doubles when it holds more entries than buckets,
 * its share of the region's quotas, its eviction state and its flights.
 * Nothing on the hot path spans stripes, so readers of different stripes
 * never touch a common cache line.
 *
 * Why an rwlock per stripe and not a mutex: a hit only needs to find the
 * entry, take a value reference (one atomic add) and record the access
 * (one relaxed add into a lossy buffer, or one relaxed byte store for
 * S3-FIFO), so hits can run side by side; only misses, installs and
 * invalidations change the table. The lock prefers writers
 * (PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP) so a stream of hits cannot
 * starve an invalidation: E1/E2 of a write must not wait behind readers.
 * No path takes a stripe lock recursively, which that kind requires.
 *
 * Why rehash-all doubling and not incremental rehashing: a stripe holds
 * max_entries/nstripes entries (a few thousand at most in our configs), so
 * a doubling costs microseconds under one stripe's lock; incremental
 * rehashing would put a second probe on every hit. Tables never shrink
 * (NEEDSWORK: after a large shrink of max_entries the buckets stay).
 *
 * Invariants:
 * - An entry is in exactly one bucket chain and one eviction queue while
 *   linked; nentries/bytes are the sums over linked entries.
 * - Entries are unlinked only under the exclusive lock, after the access
 *   buffer has been drained (every exclusive acquisition drains first), so
 *   the buffer never holds a pointer to an unlinked entry: readers can only
 *   record entries they found in the table, and they cannot run while the
 *   exclusive lock is held. Unlinked entries go to a caller's graveyard
 *   and are freed after the lock is dropped (free() is not lock work).
 *
 * Locking: "L: stripe" fields in region_int.h. Functions named *_locked
 * need the exclusive lock and assert it in debug builds through an owner
 * token (the address of a thread-local byte: unique among live threads,
 * and cheaper than gettid()).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "region_int.h"

#define STRIPE_MIN_BUCKETS 16

/*
 * The hash seed: random per process, so that nobody can aim keys at one
 * bucket (keys are file names chosen by users). Set once, before the first
 * region exists; read without a lock afterwards.
 */
uint64_t region__hash_seed;
static pthread_once_t hash_once = PTHREAD_ONCE_INIT;

static void hash_seed_init(void)
{
	struct timespec ts;
	uint64_t seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
		/* no entropy yet (early boot): still differs per process */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = region__mum((uint64_t)ts.tv_nsec ^ (uint64_t)getpid(),
				   (uint64_t)(uintptr_t)&ts ^
					   0x9e3779b97f4a7c15ull);
	}
	region__hash_seed = seed;
}

void region__hash_init(void)
{
	pthread_once(&hash_once, hash_seed_init);
}

#ifndef NDEBUG
static __thread char thread_token_byte;

uintptr_t region__thread_token(void)
{
	return (uintptr_t)&thread_token_byte;
}
#endif

int region__stripe_init(struct stripe *s, const struct region_evict_ops *ops)
{
	pthread_rwlockattr_t attr;
	int rc;

	memset(s, 0, sizeof(*s));
	s->ops = ops;
	s->buckets = calloc(STRIPE_MIN_BUCKETS, sizeof(*s->buckets));
	if (!s->buckets)
		return -ENOMEM;
	s->mask = STRIPE_MIN_BUCKETS - 1;
	s->quota_entries = REGION_UNLIMITED;
	s->quota_bytes = REGION_UNLIMITED;
	rlist_init(&s->lru);
	rlist_init(&s->small);
	rlist_init(&s->main);
	rlist_init(&s->ghost.fifo);
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(
		&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	rc = pthread_rwlock_init(&s->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc) {
		free(s->buckets);
		s->buckets = NULL;
		return -rc;
	}
	if (ops->init && (rc = ops->init(s)) != 0) {
		pthread_rwlock_destroy(&s->lock);
		free(s->buckets);
		s->buckets = NULL;
		return rc;
	}
	return 0;
}

void region__stripe_release(struct stripe *s)
{
	struct entry *grave = NULL;
	size_t i;

	if (!s->buckets)
		return;
	/* nobody else can hold the lock: no drain needed, buffer is moot */
	for (i = 0; i <= s->mask; i++) {
		struct entry *e = s->buckets[i], *next;

		for (; e; e = next) {
			next = e->hnext;
			e->hnext = grave;
			grave = e;
		}
	}
	region__entries_free(grave);
	region__ghost_release(&s->ghost);
	if (s->ops->release)
		s->ops->release(s);
	free(s->buckets);
	s->buckets = NULL;
	pthread_rwlock_destroy(&s->lock);
}

static void set_owner(struct stripe *s, bool mine)
{
#ifndef NDEBUG
	atomic_store_explicit(&s->owner, mine ? region__thread_token() : 0,
			      memory_order_relaxed);
#else
	(void)s;
	(void)mine;
#endif
}

void region__stripe_wrlock(struct stripe *s)
{
	pthread_rwlock_wrlock(&s->lock);
	set_owner(s, true);
	s->ops->drain_locked(s);
}

void region__stripe_wrunlock(struct stripe *s)
{
	region__assert_wrlocked(s);
	set_owner(s, false);
	pthread_rwlock_unlock(&s->lock);
}

void region__stripe_try_drain(struct stripe *s)
{
	/* trylock: a reader must never wait here, it has its value already */
	if (pthread_rwlock_trywrlock(&s->lock) != 0)
		return;
	set_owner(s, true);
	s->ops->drain_locked(s);
	region__stripe_wrunlock(s);
}

struct entry *region__entry_create(uint64_t hash, const void *key, size_t klen,
				   struct region_value *v)
{
	struct entry *e = malloc(sizeof(*e) + klen);

	if (!e)
		return NULL;
	e->hnext = NULL;
	e->hash = hash;
	e->val = v;
	rlist_init(&e->qnode);
	e->charge = (uint64_t)klen + v->len;
	e->install_ms = 0;
	atomic_init(&e->access_ms, 0);
	atomic_init(&e->freq, 0);
	e->queue = ENTRY_Q_NONE;
	e->klen = (uint8_t)klen;
	memcpy(e->key, key, klen);
	return e;
}

void region__entries_free(struct entry *grave)
{
	struct entry *next;

	for (; grave; grave = next) {
		next = grave->hnext;
		region_value_unref(grave->val);
		free(grave);
	}
}

/* Doubles the table; on allocation failure keeps the old one (longer
 * chains, still correct). */
static void grow_locked(struct stripe *s)
{
	size_t n = (s->mask + 1) * 2, i;
	struct entry **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return;
	for (i = 0; i <= s->mask; i++) {
		struct entry *e = s->buckets[i], *next;

		for (; e; e = next) {
			next = e->hnext;
			e->hnext = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	}
	free(s->buckets);
	s->buckets = nb;
	s->mask = n - 1;
}

void region__link_locked(struct stripe *s, struct entry *e, uint64_t now)
{
	struct entry **b;

	region__assert_wrlocked(s);
	if (s->nentries >= s->mask + 1 && s->mask < SIZE_MAX / 4)
		grow_locked(s);
	b = &s->buckets[e->hash & s->mask];
	e->hnext = *b;
	*b = e;
	e->install_ms = now;
	atomic_store_explicit(&e->access_ms, now, memory_order_relaxed);
	s->nentries++;
	s->bytes += e->charge;
	s->ops->insert_locked(s, e);
}

void region__unlink_at_locked(struct stripe *s, struct entry **pp,
			      struct entry **grave)
{
	struct entry *e = *pp;

	region__assert_wrlocked(s);
	/* the buffer invariant of the design note */
	assert(atomic_load_explicit(&s->abuf_n, memory_order_relaxed) == 0);
	*pp = e->hnext;
	s->ops->remove_locked(s, e);
	assert(s->nentries > 0 && s->bytes >= e->charge);
	s->nentries--;
	s->bytes -= e->charge;
	e->hnext = *grave;
	*grave = e;
}

void region__unlink_locked(struct stripe *s, struct entry *e,
			   struct entry **grave)
{
	struct entry **pp = &s->buckets[e->hash & s->mask];

	while (*pp != e) {
		assert(*pp);
		pp = &(*pp)->hnext;
	}
	region__unlink_at_locked(s, pp, grave);
}

void region__evict_locked(struct region *r, struct stripe *s, struct entry *e,
			  struct entry **grave)
{
	region__unlink_locked(s, e, grave);
	region__count(r, ST_EV_SIZE, 1);
}

size_t region__make_room_locked(struct region *r, struct stripe *s, bool adding,
				uint64_t charge, size_t max,
				struct entry **grave)
{
	uint64_t before = s->nentries;

	region__assert_wrlocked(s);
	while (before - s->nentries < max &&
	       region__over_quota(s, adding, charge)) {
		if (!s->ops->evict_locked(r, s, grave))
			break;
	}
	return before - s->nentries;
}

void region__stripe_clear_locked(struct stripe *s, struct entry **grave)
{
	size_t i;

	region__assert_wrlocked(s);
	for (i = 0; i <= s->mask; i++) {
		while (s->buckets[i])
			region__unlink_at_locked(s, &s->buckets[i], grave);
	}
	assert(s->nentries == 0 && s->bytes == 0);
	s->ops->reset_locked(s);
}
