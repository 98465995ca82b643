/*
 * stats.c - counters and gauges.
 *
 * Hot counters are per-thread, not one shared atomic per region: seed 003
 * saw a single contended AtomicLong become the top hot spot of a cache,
 * because every increment from every core fights for one cache line. Each
 * region has REGION_STAT_SLOTS (32) cache-line-aligned slots of relaxed
 * atomic counters. A thread takes a slot index on its first count: one of
 * the first 31 for itself alone while it lives (returned by a key
 * destructor when it exits), or, when all are taken, the last one, shared.
 * An owned slot has one writer, so its increment is a relaxed load and
 * store (no locked instruction: ~20 cycles saved per count, and a miss
 * counts five things); the shared slot keeps an atomic add, so no count is
 * ever lost and "gets == hits + misses" holds exactly at rest.
 * region_stats() sums the slots with relaxed loads: a snapshot, not exact
 * to the operation, but every counter only grows. The slot index is in an
 * initial-exec TLS variable (the library is static), so finding it is one
 * load from the thread pointer.
 *
 * The hit path counts one thing: hits. gets is derived as hits + misses +
 * refused calls (bad key, out of memory), which saves a second atomic add
 * on every hit and makes the identity hold by construction.
 *
 * What is counted is listed once, in REGION_STATS (region.h): the slot
 * counters' enum and their copy into struct region_stats are generated
 * from it; the derived, per-stripe and per-region numbers are set here by
 * hand.
 *
 * Gauges (entries, bytes, flights) are per-stripe fields guarded by the
 * stripe lock; region_stats() takes each stripe's lock in turn
 * (STYLE.md section 6), so each stripe's part is consistent and no lock is
 * held across stripes.
 */
#include <errno.h>
#include <stdlib.h>

#include "region_int.h"

__thread unsigned region__tslot_v __attribute__((tls_model("initial-exec")));
static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t slot_used; /* M: slot_mu; bit i: slot i is owned */
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;

/*
 * The thread exits. Its index is cleared too: another key's destructor
 * (the epoch record's flushes the thread's cached value references, which
 * may free values and count their bytes) can run after this one, and
 * counting on the released index would be a plain load and store on a slot
 * another thread may own by then, a lost update. Such a late count takes a
 * slot again, and its setspecific makes this destructor run once more.
 */
static void slot_release(void *arg)
{
	unsigned v = (unsigned)(uintptr_t)arg;

	pthread_mutex_lock(&slot_mu);
	slot_used &= ~(1u << (v - 1));
	pthread_mutex_unlock(&slot_mu);
	region__tslot_v = 0;
}

static void slot_key_init(void)
{
	pthread_key_create(&slot_key, slot_release);
}

unsigned region__tslot_assign(void)
{
	unsigned i;

	pthread_once(&slot_once, slot_key_init);
	pthread_mutex_lock(&slot_mu);
	for (i = 0; i < REGION_SHARED_SLOT; i++) {
		if (!(slot_used & (1u << i)))
			break;
	}
	if (i < REGION_SHARED_SLOT)
		slot_used |= 1u << i;
	pthread_mutex_unlock(&slot_mu);
	region__tslot_v = i + 1;
	if (i < REGION_SHARED_SLOT)
		pthread_setspecific(slot_key, (void *)(uintptr_t)(i + 1));
	return region__tslot_v;
}

int region__stats_init(struct region *r)
{
	unsigned i, j;

	r->slots = aligned_alloc(REGION_CACHELINE,
				 sizeof(*r->slots) * REGION_STAT_SLOTS);
	if (!r->slots)
		return -ENOMEM;
	for (i = 0; i < REGION_STAT_SLOTS; i++) {
		for (j = 0; j < ST__COUNT; j++)
			atomic_init(&r->slots[i].c[j], 0);
	}
	return 0;
}

void region__stats_release(struct region *r)
{
	free(r->slots);
	r->slots = NULL;
}

static void sum_counters(struct region *r, uint64_t c[ST__COUNT])
{
	unsigned i, j;

	memset(c, 0, sizeof(uint64_t) * ST__COUNT);
	for (i = 0; i < REGION_STAT_SLOTS; i++) {
		for (j = 0; j < ST__COUNT; j++)
			c[j] += atomic_load_explicit(&r->slots[i].c[j],
						     memory_order_relaxed);
	}
}

static void sum_gauges(struct region *r, struct region_stats *out)
{
	uint64_t mx;
	unsigned i;

	for (i = 0; i < r->nstripes; i++) {
		struct stripe *s = &r->stripes[i];

		region__lock(&s->lock);
		out->entries += s->nentries - s->stale_n;
		out->bytes += s->bytes - s->stale_bytes;
		out->flights += s->nflights;
		if (s->quota_entries != REGION_UNLIMITED)
			out->stripe_max_entries = s->quota_entries;
		if (r->strategy == REGION_STRATEGY_TINYLFU) {
			out->window_share += s->tlfu.wshare / r->nstripes;
			out->sketch_resets += s->tlfu.sketch.resets;
		}
		region__unlock(&s->lock);
		mx = atomic_load_explicit(&s->max_examined,
					  memory_order_relaxed);
		if (mx > out->max_examined_per_hold)
			out->max_examined_per_hold = mx;
	}
}

void region_stats(struct region *r, struct region_stats *out)
{
	uint64_t c[ST__COUNT];

	memset(out, 0, sizeof(*out));
	sum_counters(r, c);
#define COPY_SLOT(src, id, field, ...)	     COPY_SLOT_##src(id, field)
#define COPY_SLOT_REGION_SRC_SLOT(id, field) out->field = c[id];
#define COPY_SLOT_REGION_SRC_STRIPE(id, field)
#define COPY_SLOT_REGION_SRC_DERIVED(id, field)
#define COPY_SLOT_REGION_SRC_REGION(id, field)
	REGION_STATS(COPY_SLOT)
#undef COPY_SLOT
	out->gets = c[ST_HITS] + c[ST_MISSES] + c[ST_GET_ERRORS];
	sum_gauges(r, out);
	out->nstripes = r->nstripes;
}
