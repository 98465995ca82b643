/*
 * test_stats.c - counters and gauges.
 *
 * Counters live in per-thread slots (32 per region); these tests run more
 * threads than slots so that some share one, and check that nothing is
 * lost and that the identities between counters hold at rest.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "region.h"

#define NTHREADS 40 /* more than the 32 counter slots */
#define NOPS	 500
#define NKEYS	 20

static struct region *make(uint64_t max_entries)
{
	struct region_limits lim = {
		.max_entries = max_entries,
		.nstripes = 4,
		.strategy = REGION_STRATEGY_S3FIFO,
	};
	struct region *r;

	assert_int_equal(region_create("st", &lim, &r), 0);
	return r;
}

static struct region_stats stats_of(struct region *r)
{
	struct region_stats st;

	region_stats(r, &st);
	return st;
}

static int load_key(void *ctx, const void *key, size_t klen,
		    struct region_value **out)
{
	(void)ctx;
	*out = region_value_create(key, klen);
	return *out ? 0 : -ENOMEM;
}

struct worker {
	struct region *r;
	unsigned seed;
	int failures; /* checked on the main thread */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct region_value *v;
	char key[16];
	int i;

	for (i = 0; i < NOPS; i++) {
		snprintf(key, sizeof(key), "key%d", rand_r(&w->seed) % NKEYS);
		if (region_fetch(w->r, key, strlen(key), load_key, NULL, &v))
			w->failures++;
		else if (region_value_len(v) != strlen(key) ||
			 memcmp(region_value_data(v), key, strlen(key)))
			w->failures++;
		region_value_unref(v);
	}
	return NULL;
}

static void test_counters_add_up_across_threads(void **state)
{
	struct region *r = make(10); /* some keys get evicted and reloaded */
	struct worker w[NTHREADS];
	pthread_t tid[NTHREADS];
	struct region_stats st;
	int i;

	(void)state;
	for (i = 0; i < NTHREADS; i++) {
		w[i].r = r;
		w[i].seed = (unsigned)i + 1;
		w[i].failures = 0;
		assert_int_equal(
			pthread_create(&tid[i], NULL, worker_main, &w[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++) {
		pthread_join(tid[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
	st = stats_of(r);
	assert_int_equal(st.gets, NTHREADS * NOPS);
	assert_int_equal(st.gets, st.hits + st.misses);
	/* every miss either loaded or waited for a load */
	assert_int_equal(st.misses, st.loads + st.coalesced);
	assert_int_equal(st.loads, st.installs);
	assert_int_equal(st.installs - st.evictions_size, st.entries);
	assert_true(st.entries <= 10);
	assert_int_equal(st.flights, 0);
	assert_int_equal(st.load_failures + st.load_not_found, 0);
	region_unref(r);
}

static void test_gauges_follow_entries_bytes_and_flights(void **state)
{
	struct region *r = make(0);
	struct region_flight *f1, *f2;
	struct region_value *v;
	struct region_stats st;

	(void)state;
	assert_int_equal(region_get(r, "ab", 2, &v, &f1), REGION_LOAD);
	assert_int_equal(region_get(r, "cde", 3, &v, &f2), REGION_LOAD);
	st = stats_of(r);
	assert_int_equal(st.flights, 2);
	assert_int_equal(st.entries, 0);
	region_flight_done(r, f1, 0, region_value_create("1234", 4), &v);
	region_value_unref(v);
	region_flight_done(r, f2, 0, region_value_create("1", 1), &v);
	region_value_unref(v);
	st = stats_of(r);
	assert_int_equal(st.flights, 0);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.bytes, (2 + 4) + (3 + 1));
	region_invalidate(r, "ab", 2, REGION_ORIGIN_LOCAL);
	st = stats_of(r);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bytes, 4);
	region_invalidate_all(r, REGION_ORIGIN_OUTSIDE);
	st = stats_of(r);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.invalidations_local, 1);
	assert_int_equal(st.invalidations_outside, 1);
	region_unref(r);
}

static void test_refused_gets_count_as_gets_only(void **state)
{
	struct region *r = make(0);
	struct region_value *v;
	struct region_flight *fl;
	struct region_stats st;

	(void)state;
	assert_int_equal(region_get(r, "", 0, &v, &fl), -EINVAL);
	st = stats_of(r);
	assert_int_equal(st.gets, 1);
	assert_int_equal(st.hits + st.misses, 0);
	region_unref(r);
}

static void test_counters_are_per_region(void **state)
{
	struct region *a = make(0), *b = make(0);
	struct region_value *v;

	(void)state;
	assert_int_equal(region_fetch(a, "k", 1, load_key, NULL, &v), 0);
	region_value_unref(v);
	assert_int_equal(stats_of(a).gets, 1);
	assert_int_equal(stats_of(b).gets, 0);
	region_unref(a);
	region_unref(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters_add_up_across_threads),
		cmocka_unit_test(test_gauges_follow_entries_bytes_and_flights),
		cmocka_unit_test(test_refused_gets_count_as_gets_only),
		cmocka_unit_test(test_counters_are_per_region),
	};

	return cmocka_run_group_tests_name("stats", tests, NULL, NULL);
}
