/*
 * tinylfu.h - W-TinyLFU policy state and its frequency sketch (regions/
 * only; included by region_int.h). See tinylfu.c and sketch.c.
 */
#ifndef RFS_TINYLFU_H
#define RFS_TINYLFU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A count-min sketch of 4-bit counters (16 to a 64-bit word) that estimates
 * how often each key hash was seen lately. A key maps to one 64-byte block
 * of 8 words and to 4 counters in it (one per pair of words), so an update
 * or a lookup touches one cache line. After sample_size increments every
 * counter is halved (a "reset"), so the history ages and a formerly hot key
 * loses its weight. L: stripe (like every policy field).
 */
struct region_sketch {
	uint64_t *table;     /* words, a multiple of 8; NULL until sized */
	uint64_t block_mask; /* nblocks - 1 */
	uint64_t capacity;   /* entries it was sized for */
	uint64_t sample;     /* increments before a reset: 10 x capacity */
	uint64_t additions;  /* increments since the last reset (halved too) */
	uint64_t resets;     /* resets done: a counter */
};

/* Sizes (or resizes, forgetting history) for capacity entries: one word
 * per entry rounded to a power of two (half that from 4,096 words), at
 * least one block. 0 or -ENOMEM (the old table stays). */
int region__sketch_size(struct region_sketch *k, uint64_t capacity);
void region__sketch_release(struct region_sketch *k);
/* The estimated count of hash, 0..15. */
unsigned region__sketch_frequency(const struct region_sketch *k, uint64_t hash);
/* Counts one more occurrence of hash; may halve the sketch. */
void region__sketch_increment(struct region_sketch *k, uint64_t hash);
/* region__sketch_increment() of hash[0], ..., hash[n - 1], in order. */
void region__sketch_increment_batch(struct region_sketch *k,
				    const uint64_t *hash, size_t n);
/* Halves every counter now (what a full sample triggers). */
void region__sketch_reset(struct region_sketch *k);

/*
 * A "ghost": a two-generation Bloom filter of key hashes recently evicted
 * one way (tinylfu.c). It has its own clock (ticks chosen by the policy):
 * it remembers what was added during the last gen_cap..2 x gen_cap ticks;
 * the older generation is cleared and reused when the newer one has seen
 * gen_cap ticks. 6 bits per remembered key and generation (at least
 * 1,024 bits), 4 probes.
 */
struct region_ghostbf {
	uint64_t *words;    /* 2 generations of gen_words each, or NULL */
	uint64_t gen_words; /* words per generation */
	uint64_t gen_cap;   /* ticks per generation */
	uint64_t n[2];	    /* ticks per generation */
	unsigned cur;	    /* the generation being filled */
};

/*
 * Per-stripe W-TinyLFU state (tinylfu.c). Entries sit in one of three LRU
 * lists, newest at the head, and entry.queue says which. Sizes are kept
 * in both dimensions (entries, bytes) because a stripe may be bounded by
 * either; the window's target is a share of the stripe's quota that the
 * hill climber moves. Needs struct rlist (region_int.h includes this
 * header after defining it). L: stripe.
 */
struct region_tlfu {
	struct rlist window, probation, protect; /* newest at the head */
	uint64_t win_n, win_b;			 /* window entries, bytes */
	uint64_t prob_n, prob_b;		 /* probation */
	uint64_t prot_n, prot_b;		 /* protected */
	struct region_sketch sketch;
	struct region_ghostbf gwin;  /* keys the window stage let go */
	struct region_ghostbf gmain; /* keys main let go */
	double wshare;	 /* window target, share of the quota 0..1 */
	uint64_t adapts; /* moves of wshare or strict: a counter */
	/* admission strictness, ARC's rule continued below a window of 0
	 * (tinylfu.c, "Strictness"): 0..1 */
	double strict;
	uint32_t rng; /* xorshift state for the hash-flooding guard */
	/* the correlation clock (tinylfu.c, "Correlated references"): an
	 * epoch of quota/4 accesses; entry.freq holds the epoch of the
	 * entry's last counted access while it is in the window */
	uint64_t epoch_left; /* accesses before the next epoch */
	uint8_t epoch;
};

#endif /* RFS_TINYLFU_H */
