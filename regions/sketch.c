/*
 * sketch.c - the frequency sketch behind W-TinyLFU admission.
 *
 * A count-min sketch (Cormode & Muthukrishnan) with 4-bit saturating
 * counters, as proposed for TinyLFU (Einziger, Friedman & Manes, "TinyLFU:
 * A Highly Efficient Cache Admission Policy", ACM ToS 2017) and used by
 * Caffeine. Four bits suffice because the policy only compares two keys'
 * recent popularity and the counts are halved every sample anyway.
 *
 * Layout: the table is an array of 64-byte blocks of eight 64-bit words,
 * each word sixteen 4-bit counters. A key hash picks one block, and four
 * counters in it: counter i lives in word 2i or 2i+1 of the block at one
 * of 16 nibbles, all chosen by a second mix of the hash. One cache line per
 * update and per lookup; the four counters still come from four disjoint
 * word pairs, so two keys collide on all four only by bad luck. The
 * estimate is the minimum of the four (count-min); an increment bumps all
 * four that are below 15.
 *
 * Aging ("reset"): after sample = 10 x capacity increments, every counter
 * is halved (one shift and mask per word) and the addition count with it,
 * minus a quarter of the odd counters (the halving truncated them), as in
 * the TinyLFU paper. This keeps frequencies recent: a key that was hot an
 * hour ago decays unless it stays hot.
 *
 * Size: one word (16 counters) per entry of capacity, rounded up to a
 * power of two, and half that from 4,096 words up: 4..8 bytes per entry
 * of a large quota. Caffeine uses a word per entry; halving it moved no
 * miss ratio measurably
 * (bench_hitratio, orm-busy and web12, 0.1-30 %, 1 and 16 stripes: every
 * cell within +-0.005, the run-to-run spread of the random hash seed),
 * but small sketches collide too much (test_tinylfu's 100-entry cases
 * then lose hot keys), hence full size below 4,096 words (32 KiB). The stripe's entry
 * quota is the capacity; a stripe bounded by bytes only sizes from its
 * entry count as it grows (tinylfu.c). A resize starts from zero, which
 * costs a few admissions, like Caffeine's ensureCapacity().
 *
 * A reset walks the whole table under the stripe lock: capacity/8 blocks,
 * 64 KiB of counters per 8,192 entries of quota, done once every 10 x
 * capacity accesses of the stripe. It examines no entries.
 */
#include <errno.h>
#include <stdlib.h>

#include "region_int.h"

#define SKETCH_BLOCK_WORDS 8
#define SKETCH_MIN_BLOCKS  1
#define SKETCH_SAMPLE_MULT 10
#define SKETCH_HALF_FROM                                                       \
	4096 /* words: larger sketches get half a word
				   per entry */

static uint64_t pow2ceil(uint64_t x)
{
	return x <= 1 ? 1 : (uint64_t)1 << (64 - __builtin_clzll(x - 1));
}

int region__sketch_size(struct region_sketch *k, uint64_t capacity)
{
	uint64_t words, blocks;
	uint64_t *t;

	if (capacity < 1)
		capacity = 1;
	if (capacity > ((uint64_t)1 << 40))
		capacity = (uint64_t)1 << 40;
	words = pow2ceil(capacity);
	if (words >= SKETCH_HALF_FROM)
		words /= 2;
	blocks = words / SKETCH_BLOCK_WORDS;
	if (blocks < SKETCH_MIN_BLOCKS)
		blocks = SKETCH_MIN_BLOCKS;
	t = aligned_alloc(64, blocks * SKETCH_BLOCK_WORDS * sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t, 0, blocks * SKETCH_BLOCK_WORDS * sizeof(*t));
	free(k->table);
	k->table = t;
	k->block_mask = blocks - 1;
	k->capacity = capacity;
	k->sample = capacity * SKETCH_SAMPLE_MULT;
	k->additions = 0;
	return 0;
}

void region__sketch_release(struct region_sketch *k)
{
	free(k->table);
	k->table = NULL;
	k->block_mask = 0;
	k->capacity = 0;
	k->additions = 0;
}

/* The block and the second hash that picks the four counters. The
 * stripe's hash has its top bits fixed (they picked the stripe), so mix. */
#ifdef SKETCH_SPREAD
static const uint64_t seeds[4] = {0xc3a5c85c97cb3127ull, 0xb492b66fbe98f273ull,
				  0x9ae16a3b2f90404full, 0xcbf29ce484222325ull};
static inline uint64_t *word_of(const struct region_sketch *k, uint64_t hash,
				unsigned i, unsigned *shift)
{
	uint64_t b = region__mum(hash, 0x9e3779b97f4a7c15ull);
	uint64_t w = region__mum(b, seeds[i]);
	uint64_t nw = (k->block_mask + 1) * 8;

	*shift = (((unsigned)(b & 3) << 2) + i) * 4;
	return &k->table[w & (nw - 1)];
}
#endif

/* The block and the counters: region__sketch_block() and _counter() in
 * region_int.h, shared with the inline region__sketch_freq(). */
#define block_of   region__sketch_block
#define counter_at region__sketch_counter

unsigned region__sketch_frequency(const struct region_sketch *k, uint64_t hash)
{
#ifdef SKETCH_SPREAD
	unsigned i, sh, f = 15;

	if (!k->table)
		return 0;
	for (i = 0; i < 4; i++) {
		unsigned c = (unsigned)(*word_of(k, hash, i, &sh) >> sh) & 15;
		if (c < f)
			f = c;
	}
	return f;
#else
	return region__sketch_freq(k, hash);
#endif
}

/*
 * One increment of the four counters of hash (those below 15); returns 1
 * if any moved, else 0, for the caller to add to the additions without a
 * branch: additions stays below sample between calls, so testing it after
 * adding 0 changes nothing (a branch on "any moved" was a third of the
 * sketch's mispredictions: callgrind --branch-sim).
 */
static inline unsigned increment_one(const struct region_sketch *k,
				     uint64_t hash)
{
	uint64_t ch, *blk = block_of(k, hash, &ch);
	unsigned i, w, sh, added = 0;

	for (i = 0; i < 4; i++) {
		counter_at(ch, i, &w, &sh);
		if (((blk[w] >> sh) & 15) != 15) {
			blk[w] += (uint64_t)1 << sh;
			added = 1;
		}
	}
	return added;
}

void region__sketch_increment(struct region_sketch *k, uint64_t hash)
{
	if (!k->table)
		return;
#ifdef SKETCH_SPREAD
	{
		unsigned i, sh;
		bool added = false;

		for (i = 0; i < 4; i++) {
			uint64_t *p = word_of(k, hash, i, &sh);
			if (((*p >> sh) & 15) != 15) {
				*p += (uint64_t)1 << sh;
				added = true;
			}
		}
		if (added && ++k->additions >= k->sample)
			region__sketch_reset(k);
		return;
	}
#endif
	k->additions += increment_one(k, hash);
	if (k->additions >= k->sample)
		region__sketch_reset(k);
}

void region__sketch_increment_batch(struct region_sketch *k,
				    const uint64_t *hash, size_t n)
{
	size_t i;

#ifdef SKETCH_SPREAD
	for (i = 0; i < n; i++)
		region__sketch_increment(k, hash[i]);
	return;
#endif
	if (!k->table)
		return;
	for (i = 0; i < n; i++) {
		k->additions += increment_one(k, hash[i]);
		if (region__unlikely(k->additions >= k->sample))
			region__sketch_reset(k);
	}
}

void region__sketch_reset(struct region_sketch *k)
{
	uint64_t n = (k->block_mask + 1) * SKETCH_BLOCK_WORDS, i, odd = 0;

	if (!k->table)
		return;
	for (i = 0; i < n; i++) {
		odd += (uint64_t)__builtin_popcountll(k->table[i] &
						      0x1111111111111111ull);
		k->table[i] = (k->table[i] >> 1) & 0x7777777777777777ull;
	}
	odd /= 4;
	k->additions =
		(k->additions - (odd < k->additions ? odd : k->additions)) / 2;
	k->resets++;
}
