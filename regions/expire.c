/*
 * expire.c - time: ttl/tti expiry and the background sweep.
 *
 * Expiry is lazy on access plus a periodic sweep, as in Redis. An entry
 * carries its install time (ttl counts from the load or write that
 * installed it) and its last access time (tti), both in milliseconds of
 * one replaceable clock: region_now_ms(), CLOCK_MONOTONIC_COARSE by
 * default (see clock_monotonic_ms()), a fake clock in tests so that no
 * test sleeps. The ttl and tti in force are the stripe's current ones, so
 * a region_set_limits() that shortens them applies to entries already
 * cached.
 *
 * Never served once expired: every lookup that could return a value (hit
 * path, the exclusive re-check of a miss, region_contains()) checks expiry
 * against the clock first. A hit that finds its entry expired drops the
 * shared lock and goes down the miss path, which re-checks under the
 * exclusive lock, unlinks the entry (counted evictions_ttl/tti) and loads.
 * The hit path reads the clock only if the region has a ttl or tti, and
 * stores the access time only when it changed (at most one store per entry
 * per millisecond), so a hot entry does not bounce its cache line between
 * readers on every hit.
 *
 * The sweep reclaims what nobody asks for again, and evicts the excess
 * that a shrink of the limits left behind. region_sweep(budget) does
 * bounded work: it examines at most budget entries, holds one stripe lock
 * at a time and at most REGION_SWEEP_BATCH entries per lock hold, and
 * resumes where the previous call stopped (seed 002: a sweep that restarts
 * from the beginning after every interruption never gets to the end of a
 * large cache). Two cursors, both guarded by sweep_mu:
 * - the shrink cursor (trim_*): after region_set_limits() bumps trim_gen,
 *   the sweep walks the stripes from the first and evicts each one's
 *   excess by the policy; one pass per limits change.
 * - the expiry cursor (exp_*): stripe, bucket, and how many entries of
 *   that bucket's chain were already examined. A chain is at most a few
 *   entries (load factor <= 1), so the third number makes progress exact
 *   even for budget 1; if the table doubled meanwhile the cursor points
 *   into the new table and a few entries may be examined twice or skipped
 *   until the next round, which only delays their reclamation by a round.
 * The expiry pass runs only while the region has a ttl or tti.
 */
#include <stdlib.h>
#include <time.h>

#include "region_int.h"

/*
 * CLOCK_MONOTONIC_COARSE: the same time base as CLOCK_MONOTONIC, read from
 * the value the kernel updates every tick. Measured on our 2-vCPU VM
 * (vDSO, tsc): 5 ns per call against 24 ns, which is a third of a hit on a
 * region with a ttl or tti. The price is resolution (one tick, 4 ms here):
 * an entry may be served up to one tick past its ttl/tti, which no cache
 * timeout in milliseconds-to-hours cares about.
 */
static uint64_t clock_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static _Atomic(region_clock_fn) clock_fn = clock_monotonic_ms;

void region_clock_set(region_clock_fn fn)
{
	atomic_store(&clock_fn, fn ? fn : clock_monotonic_ms);
}

uint64_t region_now_ms(void)
{
	return atomic_load_explicit(&clock_fn, memory_order_relaxed)();
}

void region__expire_locked(struct region *r, struct stripe *s, struct entry *e,
			   enum region_expiry why)
{
	assert(why != REGION_LIVE);
	region__unlink_locked(s, e, NULL);
	region__count(r, why == REGION_EXPIRED_TTL ? ST_EV_TTL : ST_EV_TTI, 1);
}

/*
 * Evicts excess on the stripes from the shrink cursor on. Returns the
 * number evicted; *left is the remaining budget. sweep_mu held.
 */
static size_t sweep_trim(struct region *r, size_t *left)
{
	unsigned long gen = atomic_load(&r->trim_gen);
	size_t got = 0, n;
	bool over;

	if (gen != r->trim_seen) {
		r->trim_seen = gen;
		r->trim_stripe = 0;
		r->trim_active = true;
	}
	while (r->trim_active && *left > 0) {
		struct stripe *s = &r->stripes[r->trim_stripe];
		size_t max =
			*left < REGION_SWEEP_BATCH ? *left : REGION_SWEEP_BATCH;

		region__stripe_wrlock(s);
		n = region__make_room_locked(r, s, false, 0, max, NULL);
		over = region__over_quota(s, false, 0);
		region__stripe_wrunlock(s);
		got += n;
		*left -= n;
		if (over && n > 0)
			continue; /* more on this stripe, budget allowing */
		if (++r->trim_stripe == r->nstripes)
			r->trim_active = false;
	}
	return got;
}

/*
 * Examines up to max entries and buckets of s from the expiry cursor
 * (empty buckets count too: an emptied table must not make one call walk
 * a million of them), reclaiming the expired ones. Returns true when the
 * stripe's end was reached. Lock held, sweep_mu held.
 */
static bool scan_stripe_locked(struct region *r, struct stripe *s, size_t *max,
			       size_t *got)
{
	struct table *t = atomic_load_explicit(&s->tab, memory_order_relaxed);
	uint64_t now = region_now_ms();
	enum region_expiry why;
	struct entry *e, *next;
	size_t skip;

	for (; r->exp_bucket <= t->mask; r->exp_bucket++, r->exp_skip = 0) {
		e = atomic_load_explicit(&t->b[r->exp_bucket],
					 memory_order_relaxed);
		if (!e && r->exp_skip == 0) {
			/* an empty bucket costs one unit of budget */
			if (*max == 0)
				return false;
			(*max)--;
			continue;
		}
		for (skip = r->exp_skip; e && skip; skip--)
			e = atomic_load_explicit(&e->hnext,
						 memory_order_relaxed);
		for (; e; e = next) {
			next = atomic_load_explicit(&e->hnext,
						    memory_order_relaxed);
			if (*max == 0)
				return false;
			(*max)--;
			why = region__expired(s, e, now);
			if (why != REGION_LIVE) {
				region__expire_locked(r, s, e, why);
				(*got)++;
			} else {
				r->exp_skip++;
			}
		}
	}
	return true;
}

/* Runs the expiry cursor over at most *left entries. sweep_mu held. */
static size_t sweep_expired(struct region *r, size_t *left)
{
	unsigned visited = 0;
	size_t got = 0;

	while (*left > 0 && visited <= r->nstripes) {
		struct stripe *s = &r->stripes[r->exp_stripe];
		size_t max =
			*left < REGION_SWEEP_BATCH ? *left : REGION_SWEEP_BATCH;
		size_t used = max;
		bool end;

		region__stripe_wrlock(s);
		end = scan_stripe_locked(r, s, &max, &got);
		s->examined += used - max;
		region__stripe_wrunlock(s);
		*left -= used - max;
		if (end) {
			r->exp_stripe = (r->exp_stripe + 1) & (r->nstripes - 1);
			r->exp_bucket = 0;
			r->exp_skip = 0;
			visited++;
		}
	}
	return got;
}

/*
 * Housekeeping every stripe needs whatever the limits: reclaims entries
 * left stale by an invalidate-all, finishes table migrations (growth or
 * shrinking), and frees what was retired long enough ago, each bounded by
 * REGION_SWEEP_BATCH per lock hold. sweep_mu held.
 */
static size_t sweep_housekeeping(struct region *r, size_t *left)
{
	size_t got = 0, cost, ex0;
	unsigned i;
	bool more;

	for (i = 0; i<r->nstripes && * left> 0; i++) {
		struct stripe *s = &r->stripes[i];

		do {
			size_t max = *left < REGION_SWEEP_BATCH
					     ? *left
					     : REGION_SWEEP_BATCH;

			region__stripe_wrlock(s);
			ex0 = s->examined;
			got += region__reclaim_stale_locked(r, s, max);
			if (!s->stale_n)
				region__migrate_step_locked(s);
			if (s->retired)
				region__epoch_try_advance();
			more = s->stale_n ||
			       atomic_load_explicit(&s->old,
						    memory_order_relaxed);
			/* what the housekeeping examined */
			cost = s->examined - ex0;
			region__stripe_wrunlock(s);
			*left -= cost < *left ? cost : *left;
		} while (more && cost && *left > 0);
	}
	return got;
}

size_t region_sweep(struct region *r, size_t budget)
{
	size_t left = budget, got;
	bool expiring;

	pthread_mutex_lock(&r->sweep_mu);
	got = sweep_housekeeping(r, &left);
	got += sweep_trim(r, &left);
	pthread_mutex_lock(&r->cfg_mu);
	expiring = r->lim.ttl_ms || r->lim.tti_ms;
	pthread_mutex_unlock(&r->cfg_mu);
	if (expiring)
		got += sweep_expired(r, &left);
	pthread_mutex_unlock(&r->sweep_mu);
	return got;
}

size_t region_reclaim_retired(struct region *r)
{
	size_t got = 0;
	unsigned i;

	for (i = 0; i < r->nstripes; i++)
		got += region__stripe_reclaim_retired(&r->stripes[i]);
	return got;
}
