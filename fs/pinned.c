/*
 * pinned.c - the bytes of values that open files hold (memory_pinned_*).
 *
 * A read handle holds a reference on one region value from open to
 * release, and that value stays in memory however the cache moves on
 * (evicted, expired, overwritten): what open files pin is memory that
 * max_bytes does not bound (issue 10). The stats show it as the bytes of
 * the distinct values read handles hold, each value counted once however
 * many handles hold it (1,000 opens of one 1 MiB key pin 1 MiB, 1,000
 * opens of 1,000 keys pin 1,000 MiB), cached or not.
 *
 * Each read handle embeds its struct rfs_pin, so adding and removing one
 * allocates nothing and cannot fail. The pins hash on the value's address
 * into PIN_BUCKETS buckets; a bucket lists one pin per distinct value (the
 * head), and the other pins of that value hang off the head in a circular
 * ring. A value is counted when its first pin comes and uncounted when its
 * last goes; removing the head hands its place to the next pin of its
 * ring. Work per open and release: the walk of one bucket's distinct
 * values (a few), under one of PIN_LOCKS striped mutexes (leaves).
 */
#include "fs.h"

#define PIN_BUCKETS 1024 /* power of two */
#define PIN_LOCKS   64	 /* power of two, divides PIN_BUCKETS */

static struct rfs_pin *buckets[PIN_BUCKETS]; /* L: locks[b % PIN_LOCKS] */

static struct {
	_Alignas(64) pthread_mutex_t mu;
} locks[PIN_LOCKS] = {[0 ... PIN_LOCKS - 1] = {PTHREAD_MUTEX_INITIALIZER}};

static atomic_uint_fast64_t pinned_bytes;  /* of the distinct values */
static atomic_uint_fast64_t pinned_values; /* distinct values */

static size_t bucket_of(const struct region_value *v)
{
	return rfs_hash_mix((uint64_t)(uintptr_t)v) & (PIN_BUCKETS - 1);
}

void rfs_pin_add(struct rfs_pin *p, const struct region_value *v)
{
	size_t b = bucket_of(v);
	pthread_mutex_t *mu = &locks[b & (PIN_LOCKS - 1)].mu;
	struct rfs_pin *h;

	pthread_mutex_lock(mu);
	for (h = buckets[b]; h && h->v != v; h = h->next)
		;
	p->v = v;
	if (h) { /* v is pinned already: join its ring */
		p->head = false;
		p->next = NULL;
		p->ring_prev = h;
		p->ring_next = h->ring_next;
		h->ring_next->ring_prev = p;
		h->ring_next = p;
	} else {
		p->head = true;
		p->ring_prev = p->ring_next = p;
		p->next = buckets[b];
		buckets[b] = p;
		atomic_fetch_add(&pinned_bytes, region_value_len(v));
		atomic_fetch_add(&pinned_values, 1);
	}
	pthread_mutex_unlock(mu);
}

void rfs_pin_del(struct rfs_pin *p)
{
	size_t b;
	pthread_mutex_t *mu;
	struct rfs_pin **pp, *n;

	if (!p->v)
		return;
	b = bucket_of(p->v);
	mu = &locks[b & (PIN_LOCKS - 1)].mu;
	pthread_mutex_lock(mu);
	n = p->ring_next;
	if (p->head) {
		for (pp = &buckets[b]; *pp != p; pp = &(*pp)->next)
			;
		if (n != p) { /* the next pin of v takes the head's place */
			n->head = true;
			n->next = p->next;
			*pp = n;
		} else {
			*pp = p->next;
			atomic_fetch_sub(&pinned_bytes, region_value_len(p->v));
			atomic_fetch_sub(&pinned_values, 1);
		}
	}
	n->ring_prev = p->ring_prev;
	p->ring_prev->ring_next = n;
	p->v = NULL;
	pthread_mutex_unlock(mu);
}

void rfs_pin_counters(uint64_t *bytes, uint64_t *values)
{
	*bytes = atomic_load(&pinned_bytes);
	*values = atomic_load(&pinned_values);
}
