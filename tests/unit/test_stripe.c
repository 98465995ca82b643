/*
 * test_stripe.c - stripes: hashing, the table, the access buffer.
 *
 * These tests look inside (region_int.h) to check what the public API
 * cannot show: how keys spread over stripes, that tables grow, and that
 * every lock acquisition replays the thread's buffered hits, that hits take
 * no lock, and that tables grow and shrink in bounded steps.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "region_int.h"

static struct region *make(unsigned nstripes, uint64_t max_entries)
{
	struct region_limits lim = {
		.max_entries = max_entries,
		.nstripes = nstripes,
		.strategy = REGION_STRATEGY_LRU,
	};
	struct region *r;

	assert_int_equal(region_create("sp", &lim, &r), 0);
	return r;
}

static void put(struct region *r, const void *key, size_t klen)
{
	struct region_value *out;
	struct region_flight *fl;

	assert_int_equal(region_get(r, key, klen, &out, &fl), REGION_LOAD);
	assert_int_equal(region_flight_done(r, fl, 0,
					    region_value_create(key, klen),
					    &out),
			 0);
	region_value_unref(out);
}

static void hit(struct region *r, const void *key, size_t klen)
{
	struct region_value *v;
	struct region_flight *fl;

	assert_int_equal(region_get(r, key, klen, &v, &fl), REGION_HIT);
	assert_int_equal(region_value_len(v), klen);
	assert_memory_equal(region_value_data(v), key, klen);
	region_value_unref(v);
}

static void test_table_grows_and_keeps_every_key(void **state)
{
	struct region *r = make(1, 0);
	char key[16];
	int i;

	(void)state;
	for (i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "%d", i);
		put(r, key, strlen(key));
	}
	assert_true(atomic_load(&r->stripes[0].tab)->mask + 1 >= 8192);
	for (i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "%d", i);
		hit(r, key, strlen(key));
	}
	region_unref(r);
}

static void test_keys_spread_over_stripes(void **state)
{
	struct region *r = make(16, 0);
	char key[16];
	unsigned i;

	(void)state;
	/* sequential names: the worst case for a weak hash */
	for (i = 0; i < 3200; i++) {
		snprintf(key, sizeof(key), "file%u", i);
		put(r, key, strlen(key));
	}
	for (i = 0; i < 16; i++) {
		/* 200 expected; 7 standard deviations either side */
		assert_in_range(r->stripes[i].nentries, 100, 300);
	}
	region_unref(r);
}

static void test_hash_sees_every_byte(void **state)
{
	unsigned char a[REGION_MAX_KEY], b[REGION_MAX_KEY];
	size_t len, i;

	(void)state;
	region__hash_init();
	memset(a, 'x', sizeof(a));
	for (len = 1; len <= REGION_MAX_KEY; len++) {
		assert_true(region__hash(a, len) == region__hash(a, len));
		for (i = 0; i < len; i++) {
			memcpy(b, a, len);
			b[i] ^= 1;
			assert_true(region__hash(a, len) !=
				    region__hash(b, len));
		}
		if (len > 1)
			assert_true(region__hash(a, len) !=
				    region__hash(a, len - 1));
	}
}

static void test_long_keys_differing_in_last_byte(void **state)
{
	struct region *r = make(4, 0);
	unsigned char key[REGION_MAX_KEY];
	int i;

	(void)state;
	memset(key, 0, sizeof(key)); /* NUL bytes are key bytes too */
	for (i = 0; i < 256; i++) {
		key[REGION_MAX_KEY - 1] = (unsigned char)i;
		put(r, key, sizeof(key));
	}
	for (i = 0; i < 256; i++) {
		key[REGION_MAX_KEY - 1] = (unsigned char)i;
		hit(r, key, sizeof(key));
	}
	region_unref(r);
}

static void test_lock_replays_this_threads_hits(void **state)
{
	struct region *r = make(1, 100);
	struct stripe *s = &r->stripes[0];
	struct lane *l = &s->lanes[region__tslot()];
	int i;

	(void)state;
	put(r, "a", 1);
	put(r, "b", 1);
	for (i = 0; i < 3; i++)
		hit(r, "a", 1);
	/* recorded in this thread's lane, not yet applied */
	assert_int_equal(atomic_load(&l->n), 3);
	region_invalidate(r, "zzz", 3, REGION_ORIGIN_LOCAL);
	assert_int_equal(atomic_load(&l->n), 0);
	/* a was moved to the head: b is now the LRU tail */
	assert_ptr_equal(
		rlist_tail(&s->lru),
		&region__stripe_find(s, region__hash("b", 1), "b", 1)->qnode);
	/* the hit that fills the lane replays it (trylock succeeds) */
	for (i = 0; i < REGION_LANE_RECS; i++)
		hit(r, "b", 1);
	assert_int_equal(atomic_load(&l->n), 0);
	assert_ptr_equal(
		rlist_tail(&s->lru),
		&region__stripe_find(s, region__hash("a", 1), "a", 1)->qnode);
	region_unref(r);
}

/*
 * A lane keeps pointers to the entries its thread hit. If the stripe frees
 * entries before the lane is replayed, the replay must not use them (it
 * finds the entries again by hash): here another thread's lane still
 * holds the pointer to "a" after "a" was invalidated and freed. Under
 * ASan a replay through the stale pointer is a use after free.
 */
struct lane_peer {
	struct region *r;
	sem_t hit_done, go;
};

#define BIG_VALUE 5000 /* over the thread value cache's 4 KiB: no bias */

static void *lane_peer_main(void *arg)
{
	struct lane_peer *p = arg;
	struct region_value *v;
	struct region_flight *fl;
	int i;

	for (i = 0; i < 3; i++) {
		/* no reference outlives the hit: freeing the entry frees its
		 * block */
		assert_int_equal(region_get(p->r, "a", 1, &v, &fl), REGION_HIT);
		assert_int_equal(region_value_len(v), BIG_VALUE);
		region_value_unref(v);
	}
	sem_post(&p->hit_done);
	sem_wait(&p->go);
	/* takes the lock: replays this thread's lane */
	region_invalidate(p->r, "zzz", 3, REGION_ORIGIN_LOCAL);
	return NULL;
}

static void test_replay_ignores_freed_entries(void **state)
{
	struct region *r = make(1, 100);
	struct stripe *s = &r->stripes[0];
	struct lane_peer p = {.r = r};
	uint64_t before;
	pthread_t t;
	int i;

	struct region_value *v;
	struct region_flight *fl;

	(void)state;
	assert_int_equal(region_get(r, "a", 1, &v, &fl), REGION_LOAD);
	assert_int_equal(
		region_flight_done(
			r, fl, 0,
			region_value_adopt(calloc(1, BIG_VALUE), BIG_VALUE),
			&v),
		0);
	region_value_unref(v);
	put(r, "b", 1);
	assert_int_equal(sem_init(&p.hit_done, 0, 0), 0);
	assert_int_equal(sem_init(&p.go, 0, 0), 0);
	assert_int_equal(pthread_create(&t, NULL, lane_peer_main, &p), 0);
	sem_wait(&p.hit_done);
	before = region__stripe_reclaims(s);
	region_invalidate(r, "a", 1, REGION_ORIGIN_LOCAL);
	for (i = 0; i < 16 && s->retired; i++)
		region__stripe_reclaim(s); /* the peer is in no section */
	assert_null(s->retired);
	assert_true(region__stripe_reclaims(s) != before);
	sem_post(&p.go);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* b is the only entry and the policy is intact */
	assert_int_equal(s->nentries, 1);
	assert_ptr_equal(
		rlist_tail(&s->lru),
		&region__stripe_find(s, region__hash("b", 1), "b", 1)->qnode);
	sem_destroy(&p.hit_done);
	sem_destroy(&p.go);
	region_unref(r);
}

struct pin_peer {
	sem_t in, out;
};

/* Stays in an epoch section until told to leave. */
static void *pin_peer_main(void *arg)
{
	struct pin_peer *p = arg;

	region__epoch_enter();
	sem_post(&p->in);
	sem_wait(&p->out);
	region__epoch_exit();
	return NULL;
}

/*
 * Retired entries are freed only after every section that could see them
 * has ended, by runs of one epoch each (struct retire_run): while a peer
 * stays in a section nothing is freed however many holds retire and try
 * to advance, the ring holds at most three epochs, and once the peer has
 * left everything goes.
 */
static void test_retired_entries_wait_for_sections(void **state)
{
	struct region *r = make(1, 0);
	struct stripe *s = &r->stripes[0];
	struct pin_peer p;
	pthread_t t;
	char key[16];
	int i;

	(void)state;
	assert_int_equal(sem_init(&p.in, 0, 0), 0);
	assert_int_equal(sem_init(&p.out, 0, 0), 0);
	assert_int_equal(pthread_create(&t, NULL, pin_peer_main, &p), 0);
	sem_wait(&p.in);
	for (i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(r, key, strlen(key));
		region_invalidate(r, key, strlen(key), REGION_ORIGIN_LOCAL);
		region__stripe_reclaim(s); /* tries to advance every time */
		assert_true(s->nruns <= 3);
	}
	assert_int_equal(s->nretired, 500); /* the peer may see any */
	sem_post(&p.out);
	assert_int_equal(pthread_join(t, NULL), 0);
	for (i = 0; i < 16 && s->retired; i++)
		region__stripe_reclaim(s);
	assert_null(s->retired);
	assert_int_equal(s->nretired, 0);
	assert_int_equal(s->nruns, 0);
	sem_destroy(&p.in);
	sem_destroy(&p.out);
	region_unref(r);
}

/*
 * region_reclaim_retired() frees at once, in one call, what was retired
 * and no reader can see (the entries and the values only they held:
 * region_values_bytes() falls back by their data), where lock holds free it only once
 * the epoch has moved on twice; what a reader's section may still see
 * stays until it has left.
 */
static void test_reclaim_retired_frees_what_no_reader_sees(void **state)
{
	struct region *r = make(1, 100);
	struct stripe *s = &r->stripes[0];
	struct region_value *v;
	struct region_flight *fl;
	struct pin_peer p;
	uint64_t base = region_values_bytes();
	pthread_t t;
	char key[16];
	size_t n;
	int i;

	(void)state;
	for (i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(region_get(r, key, strlen(key), &v, &fl),
				 REGION_LOAD);
		assert_int_equal(
			region_flight_done(
				r, fl, 0,
				region_value_adopt(calloc(1, BIG_VALUE),
						   BIG_VALUE),
				&v),
			0);
		region_value_unref(v);
		region_invalidate(r, key, strlen(key), REGION_ORIGIN_LOCAL);
	}
	assert_non_null(s->retired);
	n = s->nretired;
	assert_true(n > 0);
	/* their values are still in memory */
	assert_true(region_values_bytes() >= base + n * BIG_VALUE);
	assert_int_equal(region_reclaim_retired(r), n);
	assert_null(s->retired);
	/* every data block freed (small headers stay as the thread's
	 * spares, counted) */
	assert_true(region_values_bytes() < base + BIG_VALUE);

	/* a reader in a section: nothing retired after it entered goes */
	assert_int_equal(sem_init(&p.in, 0, 0), 0);
	assert_int_equal(sem_init(&p.out, 0, 0), 0);
	assert_int_equal(pthread_create(&t, NULL, pin_peer_main, &p), 0);
	sem_wait(&p.in);
	put(r, "x", 1);
	region_invalidate(r, "x", 1, REGION_ORIGIN_LOCAL);
	assert_int_equal(region_reclaim_retired(r), 0);
	assert_int_equal(s->nretired, 1);
	sem_post(&p.out);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(region_reclaim_retired(r), 1);
	assert_int_equal(s->nretired, 0);
	sem_destroy(&p.in);
	sem_destroy(&p.out);
	region_unref(r);
}

/*
 * A miss looks among the flights of its key's bucket only, and so does the
 * install that detaches one: with 1,000 loads in the air no lock hold
 * examines more than a few dozen flights (one list of them all: ~1,000).
 */
static void test_misses_examine_few_flights(void **state)
{
	static struct region_flight *fl[1000];
	struct region *r = make(1, 0);
	struct region_value *out;
	struct region_stats st;
	char key[16];
	int i;

	(void)state;
	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "f%d", i);
		assert_int_equal(region_get(r, key, strlen(key), &out, &fl[i]),
				 REGION_LOAD);
	}
	for (i = 0; i < 1000; i++)
		assert_int_equal(
			region_flight_done(r, fl[i], -ENOENT, NULL, &out),
			-ENOENT);
	region_stats(r, &st);
	assert_in_range(st.max_examined_per_hold, 1, 1000 / 8);
	region_unref(r);
}

static void test_hits_take_no_lock(void **state)
{
	struct region *r = make(1, 100);
	struct stripe *s = &r->stripes[0];
	struct region_value *v;
	struct region_flight *fl;

	(void)state;
	put(r, "a", 1);
	/* a writer holds the stripe: a hit must still be served */
	region__lock(&s->lock);
	assert_int_equal(region_get(r, "a", 1, &v, &fl), REGION_HIT);
	region_value_unref(v);
	region__unlock(&s->lock);
	region_unref(r);
}

/*
 * The stripe lock's slow path spins before it sleeps and takes a free
 * word as 0 -> 1: a waiter that got the lock by spinning does not mark it
 * contended, so its unlock makes no futex wake (the old slow path always
 * stored 2).
 */
static void test_lock_spin_takes_free_lock_uncontended(void **state)
{
	struct region_lock l = {0};

	(void)state;
	region__lock_slow(&l);
	assert_int_equal(atomic_load(&l.w), 1);
	region__unlock(&l);
	assert_int_equal(atomic_load(&l.w), 0);
}

struct lock_count {
	struct region_lock l;
	unsigned long n;
};

static void *lock_adder(void *arg)
{
	struct lock_count *c = arg;
	int i;

	for (i = 0; i < 20000; i++) {
		region__lock(&c->l);
		c->n++;
		region__unlock(&c->l);
	}
	return NULL;
}

/* Spinning or sleeping, the lock excludes: no increment is lost. */
static void test_lock_excludes_under_contention(void **state)
{
	struct lock_count c = {.n = 0};
	pthread_t t[4];
	int i;

	(void)state;
	atomic_init(&c.l.w, 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, lock_adder, &c),
				 0);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(c.n, 4 * 20000);
	assert_int_equal(atomic_load(&c.l.w), 0);
}

static void *lock_once(void *arg)
{
	struct lock_count *c = arg;

	region__lock(&c->l);
	c->n++;
	region__unlock(&c->l);
	return NULL;
}

/* A word marked contended (a sleeper) stops the spin: the waiter sleeps
 * and the unlock wakes it. */
static void test_lock_waiter_behind_sleeper_is_woken(void **state)
{
	struct lock_count c = {.n = 0};
	pthread_t t;

	(void)state;
	atomic_init(&c.l.w, 0);
	region__lock(&c.l);
	atomic_store(&c.l.w, 2); /* as if someone slept on it */
	assert_int_equal(pthread_create(&t, NULL, lock_once, &c), 0);
	region__unlock(&c.l); /* 2: wakes a sleeper, if it sleeps yet */
	pthread_join(t, NULL);
	assert_int_equal(c.n, 1);
	assert_int_equal(atomic_load(&c.l.w), 0);
}

static void test_growth_and_shrink_are_incremental(void **state)
{
	struct region *r = make(1, 0);
	struct stripe *s = &r->stripes[0];
	struct region_stats st;
	char key[16];
	int i;

	(void)state;
	for (i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "%d", i);
		put(r, key, strlen(key));
		if (i % 997 == 0) /* every key stays findable mid-migration */
			hit(r, "0", 1);
	}
	for (i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "%d", i);
		if (i % 10)
			region_invalidate(r, key, strlen(key),
					  REGION_ORIGIN_LOCAL);
	}
	/* installs and the sweep shrink the table in bounded steps */
	for (i = 0; i < 200; i++)
		region_sweep(r, 4096);
	put(r, "fresh", 5);
	for (i = 0; i < 200; i++)
		region_sweep(r, 4096);
	for (i = 0; i < 100000; i += 10) {
		snprintf(key, sizeof(key), "%d", i);
		hit(r, key, strlen(key));
	}
	assert_true(atomic_load(&s->tab)->mask + 1 < 65536);
	region_stats(r, &st);
	assert_int_equal(st.entries, 10001);
	assert_in_range(st.max_examined_per_hold, 1, REGION_SWEEP_BATCH + 64);
	region_unref(r);
}

static void test_invalidate_all_empties_every_stripe(void **state)
{
	struct region *r = make(8, 0);
	struct region_stats st;
	char key[16];
	unsigned i;

	(void)state;
	for (i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "%u", i);
		put(r, key, strlen(key));
	}
	region_invalidate_all(r, REGION_ORIGIN_LOCAL);
	/* O(1): nothing is visible at once, and the sweep reclaims it */
	for (i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "%u", i);
		assert_false(region_contains(r, key, strlen(key)));
	}
	region_stats(r, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	region_sweep(r, 100000);
	for (i = 0; i < r->nstripes; i++) {
		assert_int_equal(r->stripes[i].nentries, 0);
		assert_int_equal(r->stripes[i].bytes, 0);
		assert_true(rlist_empty(&r->stripes[i].lru));
	}
	put(r, "again", 5);
	hit(r, "again", 5);
	region_unref(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_grows_and_keeps_every_key),
		cmocka_unit_test(test_keys_spread_over_stripes),
		cmocka_unit_test(test_hash_sees_every_byte),
		cmocka_unit_test(test_long_keys_differing_in_last_byte),
		cmocka_unit_test(test_lock_replays_this_threads_hits),
		cmocka_unit_test(test_replay_ignores_freed_entries),
		cmocka_unit_test(test_retired_entries_wait_for_sections),
		cmocka_unit_test(
			test_reclaim_retired_frees_what_no_reader_sees),
		cmocka_unit_test(test_misses_examine_few_flights),
		cmocka_unit_test(test_hits_take_no_lock),
		cmocka_unit_test(test_lock_spin_takes_free_lock_uncontended),
		cmocka_unit_test(test_lock_excludes_under_contention),
		cmocka_unit_test(test_lock_waiter_behind_sleeper_is_woken),
		cmocka_unit_test(test_growth_and_shrink_are_incremental),
		cmocka_unit_test(test_invalidate_all_empties_every_stripe),
	};

	return cmocka_run_group_tests_name("stripe", tests, NULL, NULL);
}
