/*
 * test_evict.c - eviction: LRU order, S3-FIFO behaviour, quotas.
 *
 * Small single-stripe scenarios check which victim each policy picks;
 * threaded installs check that the region never goes over max_entries or
 * max_bytes for either policy (each stripe's quota holds under its lock,
 * and the quotas add up to the limits).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "region.h"

static struct region *make(enum region_strategy strategy, unsigned nstripes,
			   uint64_t max_entries, uint64_t max_bytes)
{
	struct region_limits lim = {
		.max_entries = max_entries,
		.max_bytes = max_bytes,
		.nstripes = nstripes,
		.strategy = strategy,
	};
	struct region *r;

	assert_int_equal(region_create("ev", &lim, &r), 0);
	return r;
}

static void put_len(struct region *r, const char *key, size_t len)
{
	struct region_value *v, *out;
	struct region_flight *fl;
	char *buf = calloc(1, len ? len : 1);

	assert_int_equal(region_get(r, key, strlen(key), &out, &fl),
			 REGION_LOAD);
	v = region_value_adopt(buf, len);
	assert_int_equal(region_flight_done(r, fl, 0, v, &out), 0);
	region_value_unref(out);
}

static void put(struct region *r, const char *key)
{
	put_len(r, key, 1);
}

static void hit(struct region *r, const char *key)
{
	struct region_value *v;
	struct region_flight *fl;

	assert_int_equal(region_get(r, key, strlen(key), &v, &fl), REGION_HIT);
	region_value_unref(v);
}

static bool has(struct region *r, const char *key)
{
	return region_contains(r, key, strlen(key));
}

static struct region_stats stats_of(struct region *r)
{
	struct region_stats st;

	region_stats(r, &st);
	return st;
}

/* ---- LRU -------------------------------------------------------------- */

static void test_lru_evicts_least_recently_used(void **state)
{
	struct region *r = make(REGION_STRATEGY_LRU, 1, 3, 0);

	(void)state;
	put(r, "a");
	put(r, "b");
	put(r, "c");
	hit(r, "a"); /* order now: a c b */
	put(r, "d"); /* evicts b */
	assert_false(has(r, "b"));
	assert_true(has(r, "a") && has(r, "c") && has(r, "d"));
	hit(r, "c"); /* c d a */
	put(r, "e"); /* evicts a */
	assert_false(has(r, "a"));
	assert_true(has(r, "c") && has(r, "d") && has(r, "e"));
	assert_int_equal(stats_of(r).evictions_size, 2);
	assert_int_equal(stats_of(r).entries, 3);
	region_unref(r);
}

static void test_lru_contains_is_not_an_access(void **state)
{
	struct region *r = make(REGION_STRATEGY_LRU, 1, 2, 0);

	(void)state;
	put(r, "a");
	put(r, "b");
	assert_true(has(r, "a")); /* does not refresh a */
	put(r, "c");
	assert_false(has(r, "a"));
	region_unref(r);
}

static void test_lru_many_hits_between_writes_keep_order(void **state)
{
	struct region *r = make(REGION_STRATEGY_LRU, 1, 4, 0);
	int i;

	(void)state;
	put(r, "a");
	put(r, "b");
	put(r, "c");
	put(r, "d");
	/* far more hits than the 64-slot access buffer holds */
	for (i = 0; i < 200; i++) {
		hit(r, "b");
		hit(r, "a");
	}
	hit(r, "c"); /* recency now: c a b d */
	put(r, "e");
	assert_false(has(r, "d"));
	put(r, "f");
	assert_false(has(r, "b"));
	assert_true(has(r, "a") && has(r, "c"));
	region_unref(r);
}

static void test_lru_byte_quota(void **state)
{
	struct region *r = make(REGION_STRATEGY_LRU, 1, 0, 100);

	(void)state;
	put_len(r, "a", 39); /* 40 bytes with the key */
	put_len(r, "b", 39);
	assert_int_equal(stats_of(r).bytes, 80);
	put_len(r, "c", 29); /* 110 > 100: evicts a */
	assert_false(has(r, "a"));
	assert_int_equal(stats_of(r).bytes, 70);
	put_len(r, "d", 99); /* exactly 100: evicts b and c */
	assert_int_equal(stats_of(r).entries, 1);
	assert_int_equal(stats_of(r).bytes, 100);
	put_len(r, "e", 100); /* 101 bytes: served, not cached */
	assert_false(has(r, "e"));
	assert_true(has(r, "d"));
	assert_int_equal(stats_of(r).uncacheable, 1);
	region_unref(r);
}

/* ---- S3-FIFO ---------------------------------------------------------- */

static void scan(struct region *r, const char *prefix, int n)
{
	char key[32];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s%d", prefix, i);
		put(r, key);
	}
}

static void test_s3fifo_resists_a_scan(void **state)
{
	struct region *s3 = make(REGION_STRATEGY_S3FIFO, 1, 10, 0);
	struct region *lru = make(REGION_STRATEGY_LRU, 1, 10, 0);

	(void)state;
	put(s3, "hot");
	put(lru, "hot");
	hit(s3, "hot");
	hit(s3, "hot");
	hit(lru, "hot");
	hit(lru, "hot");
	/* one-hit wonders: S3-FIFO keeps them on probation in small */
	scan(s3, "scan", 100);
	scan(lru, "scan", 100);
	assert_true(has(s3, "hot"));
	assert_false(has(lru, "hot"));
	assert_int_equal(stats_of(s3).entries, 10);
	region_unref(s3);
	region_unref(lru);
}

static void test_s3fifo_evicts_one_hit_wonders_first(void **state)
{
	struct region *r = make(REGION_STRATEGY_S3FIFO, 1, 10, 0);
	char key[8];
	int i;

	(void)state;
	/* fill main with ten twice-read keys: each passes through small */
	for (i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "m%d", i);
		put(r, key);
		hit(r, key);
		hit(r, key);
	}
	scan(r, "x", 30);
	/* small (1 slot) churns; main keeps nine of the ten */
	for (i = 0, key[0] = 0; i < 10; i++) {
		char k[8];

		snprintf(k, sizeof(k), "m%d", i);
		if (!has(r, k))
			key[0]++;
	}
	assert_int_equal(key[0], 1);
	assert_int_equal(stats_of(r).entries, 10);
	region_unref(r);
}

static void test_s3fifo_ghost_readmits_to_main(void **state)
{
	struct region *r = make(REGION_STRATEGY_S3FIFO, 1, 10, 0);

	(void)state;
	put(r, "g");
	scan(r, "a", 10); /* g leaves small unread: into the ghost */
	assert_false(has(r, "g"));
	put(r, "g"); /* remembered: straight to main */
	scan(r, "b", 100);
	assert_true(has(r, "g")); /* main only evicts when over 90% */
	/* the ghost holds 9 (like main): older evictions are forgotten */
	put(r, "h");
	scan(r, "c", 30);
	put(r, "h");
	scan(r, "d", 30);
	assert_false(has(r, "h"));
	region_unref(r);
}

/*
 * The ghost is a ring of fingerprints with holes (keys taken back out of
 * it): after many times round the ring, the most recent evictions are
 * still found and the old ones are not.
 */
static void test_s3fifo_ghost_after_many_wraps(void **state)
{
	struct region *r = make(REGION_STRATEGY_S3FIFO, 1, 100, 0);
	char key[32];
	int round, i;

	(void)state;
	for (round = 0; round < 40; round++) {
		/* 300 one-hit keys through small: all evicted to the ghost */
		for (i = 0; i < 300; i++) {
			snprintf(key, sizeof(key), "w%d.%d", round, i);
			put(r, key);
		}
		/* a recent eviction (50 ago; the cache holds the last 100 or
		 * fewer) comes back: found in the ghost, so main */
		snprintf(key, sizeof(key), "w%d.%d", round, 150);
		assert_false(has(r, key));
		put(r, key); /* a hole in the ring from now on */
		/* an old one (295 evictions ago, the ghost keeps 90) is
		 * forgotten: small, and the next scan evicts it */
		snprintf(key, sizeof(key), "w%d.%d", round, 5);
		put(r, key);
		for (i = 0; i < 150; i++) {
			snprintf(key, sizeof(key), "x%d.%d", round, i);
			put(r, key);
		}
		snprintf(key, sizeof(key), "w%d.%d", round, 150);
		assert_true(has(r, key));
		snprintf(key, sizeof(key), "w%d.%d", round, 5);
		assert_false(has(r, key));
	}
	assert_true(stats_of(r).entries <= 100);
	region_unref(r);
}

static void test_s3fifo_main_gives_second_chances(void **state)
{
	struct region *r = make(REGION_STRATEGY_S3FIFO, 1, 10, 0);
	char key[8];
	int i;

	(void)state;
	/* m0..m8 read twice on probation, then promoted to main by x1 */
	for (i = 0; i < 9; i++) {
		snprintf(key, sizeof(key), "m%d", i);
		put(r, key);
		hit(r, key);
		hit(r, key);
	}
	put(r, "x0");
	put(r, "x1"); /* main: m0 (oldest) .. m8; x0 went to the ghost */
	assert_false(has(r, "x0"));
	hit(r, "m0");
	hit(r, "m1");
	put(r, "x0"); /* ghost hit: into main; x1 leaves small */
	put(r, "x1"); /* main over: m0, m1 go around, m2 leaves */
	assert_true(has(r, "m0"));
	assert_true(has(r, "m1"));
	assert_false(has(r, "m2"));
	assert_true(has(r, "m3"));
	assert_true(has(r, "x0") && has(r, "x1"));
	assert_int_equal(stats_of(r).entries, 10);
	region_unref(r);
}

static void test_s3fifo_byte_quota(void **state)
{
	struct region *r = make(REGION_STRATEGY_S3FIFO, 1, 0, 1000);
	char key[16];
	int i;

	(void)state;
	for (i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put_len(r, key, (size_t)(i % 7) * 20);
		if (i % 3 == 0)
			hit(r, key);
		assert_true(stats_of(r).bytes <= 1000);
	}
	assert_true(stats_of(r).bytes > 800);
	put_len(r, "big", 998); /* 1001 bytes: served, not cached */
	assert_false(has(r, "big"));
	region_unref(r);
}

/* ---- quotas under concurrent installs --------------------------------- */

#define BOUND_THREADS 4
#define BOUND_OPS     3000
#define BOUND_ENTRIES 50
#define BOUND_BYTES   4000

struct bound_ctx {
	struct region *r;
	unsigned seed;
	atomic_int violations;
};

static void *bound_main(void *arg)
{
	struct bound_ctx *c = arg;
	struct region_value *v, *out;
	struct region_flight *fl;
	struct region_stats st;
	unsigned seed = c->seed;
	char key[16];
	int i;

	for (i = 0; i < BOUND_OPS; i++) {
		int k = rand_r(&seed) % 1000;
		size_t len = (size_t)(rand_r(&seed) % 200);

		snprintf(key, sizeof(key), "k%d", k);
		if (region_get(c->r, key, strlen(key), &out, &fl) ==
		    REGION_LOAD) {
			v = len ? region_value_adopt(calloc(1, len), len)
				: region_value_create(NULL, 0);
			region_flight_done(c->r, fl, 0, v, &out);
		}
		region_value_unref(out);
		region_stats(c->r, &st);
		if (st.entries > BOUND_ENTRIES || st.bytes > BOUND_BYTES)
			atomic_fetch_add(&c->violations, 1);
	}
	return NULL;
}

static void run_bounds(enum region_strategy strategy)
{
	struct region *r = make(strategy, 4, BOUND_ENTRIES, BOUND_BYTES);
	struct bound_ctx c[BOUND_THREADS];
	pthread_t tid[BOUND_THREADS];
	struct region_stats st;
	int i, violations = 0;

	for (i = 0; i < BOUND_THREADS; i++) {
		c[i].r = r;
		c[i].seed = (unsigned)i * 7919u + 1;
		atomic_init(&c[i].violations, 0);
		pthread_create(&tid[i], NULL, bound_main, &c[i]);
	}
	for (i = 0; i < BOUND_THREADS; i++) {
		pthread_join(tid[i], NULL);
		violations += atomic_load(&c[i].violations);
	}
	assert_int_equal(violations, 0);
	region_stats(r, &st);
	assert_true(st.entries <= BOUND_ENTRIES);
	assert_true(st.bytes <= BOUND_BYTES);
	assert_true(st.evictions_size > 0);
	assert_int_equal(st.installs - st.evictions_size, st.entries);
	region_unref(r);
}

static void test_lru_bounds_hold_under_concurrent_installs(void **state)
{
	(void)state;
	run_bounds(REGION_STRATEGY_LRU);
}

static void test_s3fifo_bounds_hold_under_concurrent_installs(void **state)
{
	(void)state;
	run_bounds(REGION_STRATEGY_S3FIFO);
}

static void test_quotas_add_up_to_limits(void **state)
{
	struct region *r = make(REGION_STRATEGY_LRU, 4, 10, 0);
	char key[16];
	int i;

	(void)state;
	/* 10 over 4 stripes: 3+3+2+2; the region never holds more than 10 */
	for (i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "%d", i);
		put(r, key);
	}
	assert_true(stats_of(r).entries <= 10);
	assert_true(stats_of(r).entries >= 8);
	region_unref(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lru_evicts_least_recently_used),
		cmocka_unit_test(test_lru_contains_is_not_an_access),
		cmocka_unit_test(test_lru_many_hits_between_writes_keep_order),
		cmocka_unit_test(test_lru_byte_quota),
		cmocka_unit_test(test_s3fifo_resists_a_scan),
		cmocka_unit_test(test_s3fifo_evicts_one_hit_wonders_first),
		cmocka_unit_test(test_s3fifo_ghost_readmits_to_main),
		cmocka_unit_test(test_s3fifo_ghost_after_many_wraps),
		cmocka_unit_test(test_s3fifo_main_gives_second_chances),
		cmocka_unit_test(test_s3fifo_byte_quota),
		cmocka_unit_test(
			test_lru_bounds_hold_under_concurrent_installs),
		cmocka_unit_test(
			test_s3fifo_bounds_hold_under_concurrent_installs),
		cmocka_unit_test(test_quotas_add_up_to_limits),
	};

	return cmocka_run_group_tests_name("evict", tests, NULL, NULL);
}
