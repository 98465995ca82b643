/*
 * tinylfu.c - REGION_STRATEGY_TINYLFU: adaptive W-TinyLFU, per stripe.
 *
 * The policy of Einziger, Friedman & Manes ("TinyLFU: A Highly Efficient
 * Cache Admission Policy", ACM ToS 2017) with the adaptive window of
 * Caffeine ("Adaptive Software Cache Management", Middleware 2018), written
 * for this engine from the papers and from reading Caffeine's
 * BoundedLocalCache (no code taken):
 *
 *   window (LRU, wshare of the quota, 1% at start)
 *      │ its LRU end is a *candidate* for main
 *      ▼
 *   main = probation (LRU) + protected (LRU, 80% of main)
 *      a probation hit moves to protected; protected overflow is demoted
 *      to the probation head
 *
 * Admission. When the stripe must evict and the window is full, the
 * window's oldest entry (the candidate) competes with main's oldest
 * (probation tail, else protected tail: the victim). The frequency sketch
 * (sketch.c) estimates both keys' recent popularity; the candidate enters
 * probation and the victim leaves only if the candidate is strictly more
 * popular, otherwise the candidate leaves. This is what resists scans: a
 * one-pass scan key was seen once and loses against any victim seen twice.
 * A warm candidate (estimate >= 6) that loses is still admitted with
 * probability 1/128, as in Caffeine, so an attacker who floods the sketch
 * to keep a hot victim hot cannot pin main forever.
 *
 * Adaptation (hill climbing). Each stripe counts its hits and misses; after
 * a sample of 10 x capacity requests (the sketch's aging period) it compares
 * the sample's hit rate with the previous one and moves the window share
 * one step in the same direction if the rate improved, else it turns round.
 * Steps start at 6.25% of the quota, decay by 0.98 per sample while the hit
 * rate is stable and restart at 6.25% when it jumps by 5 points (a new
 * workload phase). A recency-heavy workload grows the window (toward LRU),
 * a frequency-heavy one shrinks it (toward LFU). Window changes are applied
 * lazily: a larger window takes the next inserts while evictions come from
 * main; a smaller one pushes its excess into probation a few entries per
 * operation (TLFU_MOVES). Nothing walks a list.
 *
 * Both dimensions. A stripe may be bounded by entries, bytes or both; each
 * segment's target is the same share of each limited quota, and a segment
 * is "full" when it reaches its target in any limited dimension.
 *
 * Hits. A hit under the shared lock goes into the stripe's access buffer
 * (evict.c, the same BP-Wrapper batching as LRU); the drain under the
 * exclusive lock replays it: sketch increment and list move. Dropped
 * records (full buffer, contended stripe) cost a little recency and
 * frequency information, never correctness.
 *
 * Bounded work: every call moves or examines at most 2 + 2 x TLFU_MOVES
 * entries; the sketch reset walks counters, not entries (sketch.c).
 *
 * Memory: per entry one byte (entry.queue, shared with S3-FIFO) plus the
 * sketch, sized from the entries actually held (up to the entry quota):
 * 8..16 bytes per entry. No ghosts.
 */
#include <errno.h>
#include <stdlib.h>

#include "region_int.h"

#define TLFU_WINDOW_INIT 0.01	/* window share at start */
#define TLFU_PROTECTED	 0.80	/* protected share of main */
#define TLFU_STEP	 0.0625 /* climber step, share of the quota */
#define TLFU_STEP_DECAY	 0.98
#define TLFU_RESTART	 0.05 /* hit-rate jump that restarts the step */
#define TLFU_WARM_FREQ	 6    /* hash-flooding guard threshold */
#define TLFU_MOVES	 16   /* rebalancing moves per call */
#define TLFU_MIN_SKETCH	 64   /* entries a sketch is sized for at least */
#define TLFU_MIN_SAMPLE	 640  /* requests per climber sample at least */

#define entry_of(n) region__container_of(n, struct entry, qnode)

/* floor(quota x share), REGION_UNLIMITED stays so */
static uint64_t share_of(uint64_t quota, double share)
{
	if (quota == REGION_UNLIMITED)
		return REGION_UNLIMITED;
	return (uint64_t)((double)quota * share);
}

static uint64_t win_max_n(const struct stripe *s)
{
	uint64_t m = share_of(s->quota_entries, s->tlfu.wshare);

	return m ? m : 1;
}

static uint64_t win_max_b(const struct stripe *s)
{
	return share_of(s->quota_bytes, s->tlfu.wshare);
}

/* Main's quota minus the window's target, times the protected share. */
static uint64_t prot_max(uint64_t quota, uint64_t win)
{
	if (quota == REGION_UNLIMITED)
		return REGION_UNLIMITED;
	return win >= quota ? 0 : share_of(quota - win, TLFU_PROTECTED);
}

/* Has the window reached its target (one more insert pushes one out)? */
static bool win_full(const struct stripe *s)
{
	const struct region_tlfu *t = &s->tlfu;

	return (s->quota_entries != REGION_UNLIMITED &&
		t->win_n >= win_max_n(s)) ||
	       (s->quota_bytes != REGION_UNLIMITED && t->win_b >= win_max_b(s));
}

/* Is the window over its target (it always keeps one entry)? */
static bool win_over(const struct stripe *s)
{
	const struct region_tlfu *t = &s->tlfu;

	return (s->quota_entries != REGION_UNLIMITED &&
		t->win_n > win_max_n(s)) ||
	       (s->quota_bytes != REGION_UNLIMITED && t->win_n > 1 &&
		t->win_b > win_max_b(s));
}

static bool prot_over(const struct stripe *s)
{
	const struct region_tlfu *t = &s->tlfu;

	return (s->quota_entries != REGION_UNLIMITED &&
		t->prot_n > prot_max(s->quota_entries, win_max_n(s))) ||
	       (s->quota_bytes != REGION_UNLIMITED &&
		t->prot_b > prot_max(s->quota_bytes, win_max_b(s)));
}

static void push(struct region_tlfu *t, struct entry *e, enum entry_queue q)
{
	e->queue = (uint8_t)q;
	switch (q) {
	case ENTRY_Q_WINDOW:
		rlist_add_head(&t->window, &e->qnode);
		t->win_n++;
		t->win_b += e->charge;
		break;
	case ENTRY_Q_PROBATION:
		rlist_add_head(&t->probation, &e->qnode);
		t->prob_n++;
		t->prob_b += e->charge;
		break;
	default:
		assert(q == ENTRY_Q_PROTECTED);
		rlist_add_head(&t->protect, &e->qnode);
		t->prot_n++;
		t->prot_b += e->charge;
		break;
	}
}

static void del(struct region_tlfu *t, struct entry *e)
{
	rlist_del(&e->qnode);
	switch (e->queue) {
	case ENTRY_Q_WINDOW:
		t->win_n--;
		t->win_b -= e->charge;
		break;
	case ENTRY_Q_PROBATION:
		t->prob_n--;
		t->prob_b -= e->charge;
		break;
	default:
		assert(e->queue == ENTRY_Q_PROTECTED);
		t->prot_n--;
		t->prot_b -= e->charge;
		break;
	}
	e->queue = ENTRY_Q_NONE;
}

/* Moves the tail of list `from` (an entry of that queue) to the probation
 * head. */
static void to_probation(struct region_tlfu *t, struct rlist *from)
{
	struct entry *e = entry_of(rlist_tail(from));

	del(t, e);
	push(t, e, ENTRY_Q_PROBATION);
}

/* Pushes window excess into probation, a bounded number at a time. */
static void shrink_window(struct stripe *s)
{
	unsigned moved = 0;

	while (moved++ < TLFU_MOVES && win_over(s))
		to_probation(&s->tlfu, &s->tlfu.window);
}

static void demote_protected(struct stripe *s)
{
	unsigned moved = 0;

	while (moved++ < TLFU_MOVES && s->tlfu.prot_n && prot_over(s))
		to_probation(&s->tlfu, &s->tlfu.protect);
}

/*
 * One hill-climbing step when a sample is complete (Caffeine's
 * determineAdjustment(), with the window share as the variable).
 */
static void climb(struct stripe *s)
{
	struct region_tlfu *t = &s->tlfu;
	uint64_t n = t->s_hits + t->s_misses;
	uint64_t sample = t->sketch.sample;
	double rate, change, amount;

	if (sample < TLFU_MIN_SAMPLE)
		sample = TLFU_MIN_SAMPLE;
	if (n < sample)
		return;
	rate = (double)t->s_hits / (double)n;
	change = rate - t->prev_rate;
	amount = change >= 0 ? t->step : -t->step;
	if (change >= TLFU_RESTART || change <= -TLFU_RESTART)
		t->step = amount >= 0 ? TLFU_STEP : -TLFU_STEP;
	else
		t->step = TLFU_STEP_DECAY * amount;
	t->prev_rate = rate;
	t->s_hits = t->s_misses = 0;
	t->climbs++;
	t->wshare += amount;
	if (t->wshare < 0)
		t->wshare = 0;
	if (t->wshare > 1)
		t->wshare = 1;
}

/*
 * Sizes the sketch from the entries held (doubling as the stripe fills),
 * never above the entry quota: Caffeine sizes it lazily too, and an idle
 * region with a large quota then costs next to nothing.
 */
static void size_sketch(struct stripe *s)
{
	struct region_sketch *k = &s->tlfu.sketch;
	uint64_t want = s->nentries * 2;

	if (want < TLFU_MIN_SKETCH)
		want = TLFU_MIN_SKETCH;
	if (want > s->quota_entries)
		want = s->quota_entries;
	if (k->table && k->capacity <= s->quota_entries &&
	    (s->nentries < k->capacity || k->capacity == s->quota_entries))
		return;
	(void)region__sketch_size(k, want); /* -ENOMEM: keep the old one */
}

static void on_hit(struct stripe *s, struct entry *e)
{
	struct region_tlfu *t = &s->tlfu;

	region__sketch_increment(&t->sketch, e->hash);
	t->s_hits++;
	switch (e->queue) {
	case ENTRY_Q_WINDOW:
		rlist_move_head(&t->window, &e->qnode);
		break;
	case ENTRY_Q_PROBATION:
		del(t, e);
		push(t, e, ENTRY_Q_PROTECTED);
		demote_protected(s);
		break;
	case ENTRY_Q_PROTECTED:
		rlist_move_head(&t->protect, &e->qnode);
		break;
	default:
		assert(!"tinylfu: hit on an unlinked entry");
	}
	climb(s);
}

static void tlfu_drain_locked(struct stripe *s)
{
	uint64_t n = atomic_load_explicit(&s->abuf_n, memory_order_relaxed);
	uint64_t i;

	region__assert_wrlocked(s);
	if (n > REGION_ABUF_SLOTS)
		n = REGION_ABUF_SLOTS;
	for (i = 0; i < n; i++)
		on_hit(s, s->abuf[i]);
	atomic_store_explicit(&s->abuf_n, 0, memory_order_relaxed);
}

static void tlfu_touch_locked(struct stripe *s, struct entry *e)
{
	on_hit(s, e);
}

static void tlfu_insert_locked(struct stripe *s, struct entry *e)
{
	struct region_tlfu *t = &s->tlfu;

	size_sketch(s);
	region__sketch_increment(&t->sketch, e->hash);
	t->s_misses++;
	push(t, e, ENTRY_Q_WINDOW);
	shrink_window(s);
	climb(s);
}

static void tlfu_remove_locked(struct stripe *s, struct entry *e)
{
	del(&s->tlfu, e);
}

static uint32_t xorshift32(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* Should cand replace victim in main? */
static bool admit(struct region_tlfu *t, const struct entry *cand,
		  const struct entry *victim)
{
	unsigned fc = region__sketch_frequency(&t->sketch, cand->hash);
	unsigned fv = region__sketch_frequency(&t->sketch, victim->hash);

	if (fc > fv)
		return true;
	if (fc >= TLFU_WARM_FREQ)
		return (xorshift32(&t->rng) & 127) == 0;
	return false;
}

static bool tlfu_evict_locked(struct region *r, struct stripe *s,
			      struct entry **grave)
{
	struct region_tlfu *t = &s->tlfu;
	struct entry *cand = NULL, *victim = NULL;
	struct rlist *l;

	shrink_window(s);
	if (win_full(s) && (l = rlist_tail(&t->window)))
		cand = entry_of(l);
	if ((l = rlist_tail(&t->probation)) || (l = rlist_tail(&t->protect)))
		victim = entry_of(l);
	if (!cand && !victim) {
		/* the window is below its target and main is empty */
		if (!(l = rlist_tail(&t->window)))
			return false;
		victim = entry_of(l);
	}
	if (!victim) {
		region__evict_locked(r, s, cand, grave);
		return true;
	}
	if (!cand) {
		/* the window grows: it keeps its entries, main gives room */
		region__evict_locked(r, s, victim, grave);
		return true;
	}
	if (admit(t, cand, victim)) {
		region__evict_locked(r, s, victim, grave);
		del(t, cand);
		push(t, cand, ENTRY_Q_PROBATION);
	} else {
		region__evict_locked(r, s, cand, grave);
	}
	return true;
}

static void tlfu_reset_locked(struct stripe *s)
{
	struct region_tlfu *t = &s->tlfu;

	assert(rlist_empty(&t->window) && rlist_empty(&t->probation) &&
	       rlist_empty(&t->protect));
	assert(!t->win_n && !t->prob_n && !t->prot_n);
	(void)t; /* the sketch and the climber keep their history */
}

static int tlfu_init(struct stripe *s)
{
	struct region_tlfu *t = &s->tlfu;

	memset(t, 0, sizeof(*t));
	rlist_init(&t->window);
	rlist_init(&t->probation);
	rlist_init(&t->protect);
	t->wshare = TLFU_WINDOW_INIT;
	t->step = -TLFU_STEP;
	t->rng = (uint32_t)(region__hash_seed ^ (uintptr_t)s) | 1;
	return 0;
}

static void tlfu_release(struct stripe *s)
{
	region__sketch_release(&s->tlfu.sketch);
}

const struct region_evict_ops region__tinylfu_ops = {
	.name = "tinylfu",
	.access = region__abuf_access,
	.drain_locked = tlfu_drain_locked,
	.insert_locked = tlfu_insert_locked,
	.touch_locked = tlfu_touch_locked,
	.remove_locked = tlfu_remove_locked,
	.evict_locked = tlfu_evict_locked,
	.reset_locked = tlfu_reset_locked,
	.init = tlfu_init,
	.release = tlfu_release,
};
