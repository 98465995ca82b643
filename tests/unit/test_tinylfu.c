/*
 * test_tinylfu.c - the W-TinyLFU policy (regions/tinylfu.c) and its
 * frequency sketch (regions/sketch.c).
 *
 * The sketch is tested directly (internal header): counting never
 * underestimates, saturates at 15, halves on reset and resets by itself
 * after its sample. The policy is tested through the public API on one
 * stripe: the admission decision (a candidate enters main only when more
 * popular than the victim), the adaptation of the window share (up on a
 * recency pattern, down on a frequency pattern), scan resistance (a
 * one-pass scan does not flush a hot set, where LRU loses it), byte
 * quotas, live limit changes and bounds under concurrent installs.
 * Nothing depends on timing. The sketch and the ghost filters are
 * probabilistic, so the policy's outcomes depend a little on the hash
 * seed: main() fixes it (RFS_TEST_SEED overrides, to try others), and the
 * assertions keep margins that held for every seed tried.
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

#include "region_int.h"

/* ---- helpers ------------------------------------------------------------ */

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

	assert_int_equal(region_create("tlfu", &lim, &r), 0);
	return r;
}

/* Reads key: a miss loads a value of len bytes. Returns true on a hit. */
static bool get_len(struct region *r, const char *key, size_t len)
{
	struct region_value *v, *out;
	struct region_flight *fl;
	int rc = region_get(r, key, strlen(key), &out, &fl);

	if (rc == REGION_HIT) {
		region_value_unref(out);
		return true;
	}
	assert_int_equal(rc, REGION_LOAD);
	v = len ? region_value_adopt(calloc(1, len), len)
		: region_value_create(NULL, 0);
	assert_int_equal(region_flight_done(r, fl, 0, v, &out), 0);
	region_value_unref(out);
	return false;
}

static bool get(struct region *r, const char *key)
{
	return get_len(r, key, 1);
}

/* Key "<prefix><i>". */
static bool getf(struct region *r, const char *prefix, int i)
{
	char key[32];

	snprintf(key, sizeof(key), "%s%d", prefix, i);
	return get(r, key);
}

static bool hasf(struct region *r, const char *prefix, int i)
{
	char key[32];

	snprintf(key, sizeof(key), "%s%d", prefix, i);
	return region_contains(r, key, strlen(key));
}

static struct region_stats stats_of(struct region *r)
{
	struct region_stats st;

	region_stats(r, &st);
	return st;
}

static uint64_t hash_of(int i)
{
	char key[32];

	snprintf(key, sizeof(key), "s%d", i);
	return region__hash(key, strlen(key));
}

/* ---- sketch ------------------------------------------------------------- */

static void test_sketch_counts_without_underestimating(void **state)
{
	struct region_sketch k = {0};
	int i, j, zero = 0;

	(void)state;
	region__hash_init();
	assert_int_equal(region__sketch_size(&k, 1024), 0);
	assert_int_equal(k.sample, 10240);
	/* key i seen i % 16 times */
	for (i = 0; i < 200; i++) {
		for (j = 0; j < i % 16; j++)
			region__sketch_increment(&k, hash_of(i));
	}
	for (i = 0; i < 200; i++)
		assert_true(region__sketch_frequency(&k, hash_of(i)) >=
			    (unsigned)(i % 16));
	/* unseen keys: count-min may overestimate, but rarely at this load */
	for (i = 1000; i < 1100; i++)
		zero += region__sketch_frequency(&k, hash_of(i)) == 0;
	assert_true(zero >= 90);
	/* 4-bit counters saturate at 15 */
	for (j = 0; j < 40; j++)
		region__sketch_increment(&k, hash_of(5000));
	assert_int_equal(region__sketch_frequency(&k, hash_of(5000)), 15);
	assert_int_equal(k.resets, 0);
	region__sketch_release(&k);
}

static void test_sketch_reset_halves_counters(void **state)
{
	struct region_sketch k = {0};
	uint64_t before;
	int j;

	(void)state;
	region__hash_init();
	assert_int_equal(region__sketch_size(&k, 1024), 0);
	for (j = 0; j < 10; j++)
		region__sketch_increment(&k, hash_of(1));
	for (j = 0; j < 7; j++)
		region__sketch_increment(&k, hash_of(2));
	for (j = 0; j < 15; j++)
		region__sketch_increment(&k, hash_of(3));
	assert_int_equal(region__sketch_frequency(&k, hash_of(1)), 10);
	assert_int_equal(region__sketch_frequency(&k, hash_of(3)), 15);
	before = k.additions;
	region__sketch_reset(&k);
	assert_int_equal(k.resets, 1);
	assert_int_equal(region__sketch_frequency(&k, hash_of(1)), 5);
	assert_int_equal(region__sketch_frequency(&k, hash_of(2)), 3);
	assert_int_equal(region__sketch_frequency(&k, hash_of(3)), 7);
	assert_true(k.additions <= before / 2);
	region__sketch_release(&k);
}

static void test_sketch_resets_itself_after_its_sample(void **state)
{
	struct region_sketch k = {0};
	uint64_t i;

	(void)state;
	region__hash_init();
	assert_int_equal(region__sketch_size(&k, 64), 0);
	assert_int_equal(k.sample, 640);
	/* every increment of a fresh key adds: 640 of them make one reset */
	for (i = 0; i < 640; i++)
		region__sketch_increment(&k, hash_of((int)i + 100000));
	assert_int_equal(k.resets, 1);
	assert_true(k.additions < 640 / 2 + 1);
	/* and the old counts are halved: a key seen 8 times reads 4 */
	for (i = 0; i < 8; i++)
		region__sketch_increment(&k, hash_of(7));
	region__sketch_reset(&k);
	assert_true(region__sketch_frequency(&k, hash_of(7)) >= 4);
	assert_true(region__sketch_frequency(&k, hash_of(7)) <= 7);
	region__sketch_release(&k);
}

static void test_sketch_resize_starts_fresh(void **state)
{
	struct region_sketch k = {0};
	int j;

	(void)state;
	region__hash_init();
	assert_int_equal(region__sketch_size(&k, 10), 0);
	assert_int_equal(region__sketch_frequency(&k, hash_of(1)), 0);
	for (j = 0; j < 3; j++)
		region__sketch_increment(&k, hash_of(1));
	assert_true(region__sketch_frequency(&k, hash_of(1)) >= 3);
	assert_int_equal(region__sketch_size(&k, 5000), 0);
	assert_int_equal(region__sketch_frequency(&k, hash_of(1)), 0);
	assert_int_equal(k.capacity, 5000);
	region__sketch_release(&k);
	assert_null(k.table);
	/* an unsized sketch counts nothing and says 0 */
	region__sketch_increment(&k, hash_of(1));
	assert_int_equal(region__sketch_frequency(&k, hash_of(1)), 0);
}

/* ---- admission ------------------------------------------------------------ */

static void test_unpopular_candidate_is_rejected(void **state)
{
	struct region *r = make(REGION_STRATEGY_TINYLFU, 1, 100, 0);
	struct region *l = make(REGION_STRATEGY_LRU, 1, 100, 0);
	int i, j, left = 0;

	(void)state;
	/*
	 * 89 keys, each read 4 times: they fill main (90 of the 100 entries;
	 * the window starts at 10), and the first cold keys fill the window
	 */
	for (i = 0; i < 89; i++) {
		getf(r, "hot", i);
		getf(l, "hot", i);
	}
	for (j = 0; j < 3; j++)
		for (i = 0; i < 89; i++)
			assert_true(getf(r, "hot", i));
	/* new keys read once each: every one loses against any hot key */
	for (i = 0; i < 500; i++) {
		assert_false(getf(r, "cold", i));
		getf(l, "cold", i);
	}
	for (i = 0; i < 89; i++)
		left += hasf(r, "hot", i);
	/*
	 * All of them, but for rare false positives: a cold key that both
	 * collides in the sketch and hits a ghost filter grows the window by
	 * one entry, and while it grows main's oldest entry leaves unjudged.
	 */
	assert_true(left >= 80);
	assert_int_equal(stats_of(r).entries, 100);
	for (i = 0, left = 0; i < 89; i++)
		left += hasf(l, "hot", i);
	assert_int_equal(left, 0); /* LRU keeps none */
	region_unref(r);
	region_unref(l);
}

static void test_popular_candidate_is_admitted(void **state)
{
	struct region *r = make(REGION_STRATEGY_TINYLFU, 1, 100, 0);
	int i, admitted = 0;

	(void)state;
	/* a full region of keys read once */
	for (i = 0; i < 100; i++)
		getf(r, "once", i);
	/* newcomers read 3 times while in the window beat them */
	for (i = 0; i < 20; i++) {
		getf(r, "pop", i);
		assert_true(getf(r, "pop", i));
		assert_true(getf(r, "pop", i));
	}
	for (i = 0; i < 20; i++)
		admitted += hasf(r, "pop", i);
	/* each was judged when the next came; the last is still in the window */
	assert_int_equal(admitted, 20);
	assert_int_equal(stats_of(r).entries, 100);
	region_unref(r);
}

/*
 * Main's victim is the least popular of probation's oldest entries, not
 * just the oldest: a popular entry at probation's end does not shield the
 * unpopular one behind it.
 */
static void test_popular_oldest_does_not_shield_the_next(void **state)
{
	struct region *r = make(REGION_STRATEGY_TINYLFU, 1, 100, 0);
	struct region_sketch *k = &r->stripes[0].tlfu.sketch;
	int i;

	(void)state;
	/*
	 * 100 keys read once: the sketch is sized when the region is half
	 * full, so a0..a49 are counted 0 times and a50..a99 once; probation
	 * holds a0 (oldest) .. a89, the window a90..a99.
	 */
	for (i = 0; i < 100; i++)
		getf(r, "a", i);
	assert_true(hasf(r, "a", 0) && hasf(r, "a", 1));
	/* a0 becomes popular where it is (a hit would promote it) */
	for (i = 0; i < 5; i++)
		region__sketch_increment(k, region__hash("a0", 2));
	assert_true(region__sketch_frequency(k, region__hash("a0", 2)) >= 5);
	/* a newcomer pushes the window's oldest (a90, seen once) out */
	getf(r, "b", 0);
	assert_true(hasf(r, "a", 90)); /* admitted: it beats a1 */
	assert_true(hasf(r, "a", 0));  /* the popular oldest stays */
	assert_false(hasf(r, "a", 1)); /* the unpopular one behind it left */
	assert_int_equal(stats_of(r).entries, 100);
	region_unref(r);
}

/*
 * Correlated references. In a region of 100 (the window 10, an epoch 25
 * accesses) whose main keys were all read 4 times, 100 accesses apart
 * (counted 3 or 4 times: the sketch is sized when the region is half
 * full), a newcomer is read 5 times: in a burst, or `gap` accesses apart
 * (reads of one protected key). Then 12 more newcomers push it out of the
 * window, and it is judged. Is it admitted?
 */
static bool admitted_after_reads(int gap)
{
	struct region *r = make(REGION_STRATEGY_TINYLFU, 1, 100, 0);
	int i, j;
	bool in;

	for (j = 0; j < 4; j++)
		for (i = 0; i < 100; i++)
			assert_int_equal(getf(r, "m", i), j > 0);
	for (j = 0; j < 5; j++) {
		assert_int_equal(get(r, "b"), j > 0);
		for (i = 0; i < gap; i++)
			assert_true(get(r, "m75")); /* protected: stays */
	}
	for (i = 0; i < 12; i++)
		assert_false(getf(r, "c", i));
	in = region_contains(r, "b", 1);
	region_unref(r);
	return in;
}

/*
 * A burst of reads while a key is in the window is one use of it (the
 * correlated references of LRU-K and 2Q): counting each read let keys
 * read a few times in a row, then never, beat keys that come back. The
 * burst counts once (or twice across an epoch's end), so it loses against
 * main's keys seen 3 times; the same reads spread over more than an epoch
 * count 5 times and win.
 */
static void test_window_burst_counts_once(void **state)
{
	(void)state;
	assert_false(admitted_after_reads(0));
	assert_true(admitted_after_reads(30));
}

/* ---- scan resistance ------------------------------------------------------ */

/*
 * 50 hot keys read 5 times, then a scan of nscan keys never seen before or
 * after, with one hot read after every `every` scan keys (0: none). How
 * many hot keys are still cached?
 */
static int hot_left_after_scan(enum region_strategy strategy, int nscan,
			       int every)
{
	struct region *r = make(strategy, 1, 100, 0);
	int i, j, left = 0;

	for (j = 0; j < 5; j++)
		for (i = 0; i < 50; i++)
			getf(r, "hot", i);
	for (i = 0; i < nscan; i++) {
		getf(r, "scan", i);
		if (every && i % every == 0)
			getf(r, "hot", i / every % 50);
	}
	for (i = 0; i < 50; i++)
		left += hasf(r, "hot", i);
	assert_true(stats_of(r).entries <= 100);
	region_unref(r);
	return left;
}

static void test_scan_does_not_flush_the_hot_set(void **state)
{
	(void)state;
	/*
	 * A pass of 9x the capacity, within the sketch's aging period: the
	 * hot set stays but for rare false positives (see above).
	 */
	assert_true(hot_left_after_scan(REGION_STRATEGY_TINYLFU, 900, 0) >= 45);
	/* the same scan flushes LRU completely */
	assert_int_equal(hot_left_after_scan(REGION_STRATEGY_LRU, 900, 0), 0);
}

static void test_long_scan_with_hot_reads_keeps_the_hot_set(void **state)
{
	(void)state;
	/* 200x the capacity, the hot set still read now and then */
	assert_true(hot_left_after_scan(REGION_STRATEGY_TINYLFU, 20000, 10) >=
		    45);
	/* LRU: each hot key comes back after 500 scan keys: gone by then */
	assert_true(hot_left_after_scan(REGION_STRATEGY_LRU, 20000, 10) < 10);
}

/* ---- adaptation ----------------------------------------------------------- */

/*
 * Recency: every key is read twice, 80 reads apart, in a region of 100.
 * A 10-entry window rejects each newcomer (seen once; victims twice),
 * and it comes back 30-70 window insertions later (fewer as more of the
 * returning keys hit): mostly within the window ghost's span (the last
 * 33-66 insertions), so the ghost calls for a larger window.
 */
static void recency_phase(struct region *r, int from, int n)
{
	int i;

	for (i = from; i < from + n; i++) {
		getf(r, "r", i);
		if (i - 40 >= from)
			getf(r, "r", i - 40);
	}
}

/*
 * Frequency: a hot set of 90 keys read in turn, interleaved with keys
 * read once; hot keys that main let go come back: a smaller window.
 */
static void frequency_phase(struct region *r, int from, int n)
{
	int i;

	for (i = from; i < from + n; i++) {
		getf(r, "h", i % 90);
		getf(r, "u", i);
	}
}

static void test_window_grows_on_recency_and_shrinks_on_frequency(void **state)
{
	struct region *r = make(REGION_STRATEGY_TINYLFU, 1, 100, 0);
	double start, grown, shrunk;

	(void)state;
	start = stats_of(r).window_share;
	assert_true(start > 0.099 && start < 0.101);
	recency_phase(r, 0, 20000);
	grown = stats_of(r).window_share;
	assert_true(grown > 0.3);
	frequency_phase(r, 0, 20000);
	shrunk = stats_of(r).window_share;
	assert_true(shrunk < grown / 2);
	region_unref(r);
}

static void test_recency_pattern_hits_like_lru(void **state)
{
	struct region *t = make(REGION_STRATEGY_TINYLFU, 1, 100, 0);
	struct region *l = make(REGION_STRATEGY_LRU, 1, 100, 0);
	uint64_t ht, hl;

	(void)state;
	recency_phase(t, 0, 20000);
	recency_phase(l, 0, 20000);
	ht = stats_of(t).hits;
	hl = stats_of(l).hits;
	/*
	 * LRU hits every second read; the adapted window nearly as often
	 * (19,800-19,900 of LRU's 19,960 for most hash seeds; 14,900 at worst
	 * in 30 seeds, when the window grew late).
	 */
	assert_true(hl > 19000);
	assert_true(ht > hl * 7 / 10);
	region_unref(t);
	region_unref(l);
}

/*
 * A loop over 300 keys in a region of 100: every key comes back after 300
 * window insertions, beyond what a window of the whole quota would keep,
 * so the window ghost (clocked by insertions) must not call for a larger
 * window; main keeps the keys it holds and hits them each round, where
 * LRU never hits.
 */
static void
test_loop_larger_than_the_region_does_not_grow_the_window(void **state)
{
	struct region *t = make(REGION_STRATEGY_TINYLFU, 1, 100, 0);
	struct region *l = make(REGION_STRATEGY_LRU, 1, 100, 0);
	double start;
	int i;

	(void)state;
	start = stats_of(t).window_share;
	for (i = 0; i < 30000; i++) {
		getf(t, "loop", i % 300);
		getf(l, "loop", i % 300);
	}
	assert_true(stats_of(t).window_share <= start);
	assert_int_equal(stats_of(l).hits, 0);
	/* main holds about 90 keys for good: nearly 90 hits a round */
	assert_true(stats_of(t).hits > 30000 / 300 * 45);
	region_unref(t);
	region_unref(l);
}

/*
 * A loop over 1,300 keys in a region of 400: all keys have about the same
 * count, so the sketch's collisions alone make some of probation's oldest
 * look a step colder than the oldest. Admitting every candidate that beat
 * such a near-tie replaced a main key on most misses, evicting keys just
 * before their turn came: 1,400-1,800 hits in 30,000 reads for 7 of 12
 * hash seeds (the fixed one among them). Main that stays put hits each of
 * its keys once a round (at most ~9,200): 6,500-8,100 in the same 12.
 */
static void test_loop_near_ties_do_not_churn_main(void **state)
{
	struct region *t = make(REGION_STRATEGY_TINYLFU, 1, 400, 0);
	int i;

	(void)state;
	for (i = 0; i < 30000; i++)
		getf(t, "loop", i % 1300);
	assert_true(stats_of(t).hits > 5000);
	region_unref(t);
}

/*
 * Strictness. A loop over 450 keys in a region of 400 (1 stripe): keys
 * that main let go come back each round, the window shrinks to nothing,
 * and the same votes then make admission stricter. A candidate counted
 * this round must then beat main's victim, not yet read this round, by
 * more than one count: main stops trading keys about to be read for keys
 * just read. Hits in 40,000 reads (hash seeds 1-5): 32,147-32,362 with
 * the margin never raised, 34,453-34,628 with it (400/450 of the reads
 * after the first round: ~35,200). A recency phase after it undoes the
 * strictness before the window grows.
 */
static void test_loop_at_the_window_floor_makes_admission_stricter(void **state)
{
	struct region *t = make(REGION_STRATEGY_TINYLFU, 1, 400, 0);
	const struct region_tlfu *tl = &t->stripes[0].tlfu;
	int i;

	(void)state;
	for (i = 0; i < 40000; i++)
		getf(t, "loop", i % 450);
	assert_true(stats_of(t).window_share == 0);
	assert_true(tl->strict >= 0.01); /* a margin of at least 1 */
	assert_true(stats_of(t).hits > 33500);
	recency_phase(t, 0, 40000);
	assert_true(tl->strict == 0);
	assert_true(stats_of(t).window_share > 0.1);
	region_unref(t);
}

static void test_other_strategies_report_no_window(void **state)
{
	struct region *r = make(REGION_STRATEGY_LRU, 4, 100, 0);
	struct region_stats st;

	(void)state;
	getf(r, "a", 1);
	st = stats_of(r);
	assert_true(st.window_share == 0);
	assert_int_equal(st.sketch_resets, 0);
	region_unref(r);
}

static void test_sketch_resets_are_counted(void **state)
{
	struct region *r = make(REGION_STRATEGY_TINYLFU, 1, 64, 0);
	int i;

	(void)state;
	/* sample 640 accesses of distinct keys per reset */
	for (i = 0; i < 5000; i++)
		getf(r, "k", i);
	assert_true(stats_of(r).sketch_resets >= 3);
	region_unref(r);
}

/* ---- quotas and limits ---------------------------------------------------- */

static void test_byte_quota_holds(void **state)
{
	struct region *r = make(REGION_STRATEGY_TINYLFU, 1, 0, 1000);
	char key[16];
	int i;

	(void)state;
	for (i = 0; i < 400; i++) {
		snprintf(key, sizeof(key), "b%03d", i);
		get_len(r, key, (size_t)(i % 7) * 10 + 6);
		assert_true(stats_of(r).bytes <= 1000);
		if (i % 3 == 0)
			get_len(r, "b000", 6); /* one key stays popular */
	}
	assert_true(region_contains(r, "b000", 4));
	assert_true(stats_of(r).bytes > 700);
	region_unref(r);
}

static void test_shrink_and_grow_limits_live(void **state)
{
	struct region *r = make(REGION_STRATEGY_TINYLFU, 1, 200, 0);
	struct region_limits lim;
	int i;

	(void)state;
	for (i = 0; i < 400; i++)
		getf(r, "x", i);
	assert_int_equal(stats_of(r).entries, 200);
	region_limits_get(r, &lim);
	lim.max_entries = 20;
	assert_int_equal(region_set_limits(r, &lim), 0);
	while (region_sweep(r, 64))
		;
	assert_true(stats_of(r).entries <= 20);
	for (i = 0; i < 400; i++)
		getf(r, "y", i % 30);
	assert_true(stats_of(r).entries <= 20);
	lim.max_entries = 300;
	assert_int_equal(region_set_limits(r, &lim), 0);
	for (i = 0; i < 1000; i++)
		getf(r, "z", i);
	assert_int_equal(stats_of(r).entries, 300);
	region_unref(r);
}

static void test_few_entries_per_stripe_still_work(void **state)
{
	/* 16 entries over 16 stripes: one each, window of one */
	struct region *r = make(REGION_STRATEGY_TINYLFU, 16, 16, 0);
	int i, hits = 0;

	(void)state;
	for (i = 0; i < 3000; i++)
		hits += getf(r, "t", i % 8);
	assert_true(stats_of(r).entries <= 16);
	assert_true(hits > 0);
	region_unref(r);
}

#define BOUND_THREADS 4
#define BOUND_OPS     3000

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
		/* skewed: a few keys often, many rarely */
		int k = rand_r(&seed) % 2 ? rand_r(&seed) % 40
					  : rand_r(&seed) % 2000;
		size_t len = (size_t)(rand_r(&seed) % 200);

		snprintf(key, sizeof(key), "k%d", k);
		if (region_get(c->r, key, strlen(key), &out, &fl) ==
		    REGION_LOAD) {
			v = len ? region_value_adopt(calloc(1, len), len)
				: region_value_create(NULL, 0);
			region_flight_done(c->r, fl, 0, v, &out);
		}
		region_value_unref(out);
		if (i % 16 == 0)
			region_invalidate(c->r, key, strlen(key),
					  REGION_ORIGIN_LOCAL);
		region_stats(c->r, &st);
		if (st.entries > 50 || st.bytes > 4000)
			atomic_fetch_add(&c->violations, 1);
	}
	return NULL;
}

static void test_bounds_hold_under_concurrent_installs(void **state)
{
	struct region *r = make(REGION_STRATEGY_TINYLFU, 4, 50, 4000);
	struct bound_ctx c[BOUND_THREADS];
	pthread_t tid[BOUND_THREADS];
	struct region_stats st;
	int i, violations = 0;

	(void)state;
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
	assert_true(st.entries <= 50 && st.bytes <= 4000);
	assert_true(st.evictions_size > 0);
	region_unref(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sketch_counts_without_underestimating),
		cmocka_unit_test(test_sketch_reset_halves_counters),
		cmocka_unit_test(test_sketch_resets_itself_after_its_sample),
		cmocka_unit_test(test_sketch_resize_starts_fresh),
		cmocka_unit_test(test_unpopular_candidate_is_rejected),
		cmocka_unit_test(test_popular_candidate_is_admitted),
		cmocka_unit_test(test_popular_oldest_does_not_shield_the_next),
		cmocka_unit_test(test_window_burst_counts_once),
		cmocka_unit_test(test_scan_does_not_flush_the_hot_set),
		cmocka_unit_test(
			test_long_scan_with_hot_reads_keeps_the_hot_set),
		cmocka_unit_test(
			test_window_grows_on_recency_and_shrinks_on_frequency),
		cmocka_unit_test(test_recency_pattern_hits_like_lru),
		cmocka_unit_test(
			test_loop_larger_than_the_region_does_not_grow_the_window),
		cmocka_unit_test(test_loop_near_ties_do_not_churn_main),
		cmocka_unit_test(
			test_loop_at_the_window_floor_makes_admission_stricter),
		cmocka_unit_test(test_other_strategies_report_no_window),
		cmocka_unit_test(test_sketch_resets_are_counted),
		cmocka_unit_test(test_byte_quota_holds),
		cmocka_unit_test(test_shrink_and_grow_limits_live),
		cmocka_unit_test(test_few_entries_per_stripe_still_work),
		cmocka_unit_test(test_bounds_hold_under_concurrent_installs),
	};

	const char *seed = getenv("RFS_TEST_SEED");

	/* the first region__hash_init() wins; then the seed is ours */
	region__hash_init();
	region__hash_seed =
		seed ? strtoull(seed, NULL, 0) : 0x9e3779b97f4a7c15ull;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
