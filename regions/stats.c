/*
 * stats.c - counters and gauges.
 *
 * Hot counters are per-thread, not one shared atomic per region: seed 003
 * saw a single contended AtomicLong become the top hot spot of a cache,
 * because every increment from every core fights for one cache line. Each
 * thread takes a slot index once (thread-local, from a global counter,
 * modulo REGION_STAT_SLOTS = 32) and each region has 32 cache-line-aligned
 * slots of relaxed atomic counters, so two threads share a slot (and a
 * line) only beyond 32 threads. The increment stays an atomic add, so
 * threads that do share a slot never lose counts and "gets == hits +
 * misses" holds exactly at rest. (A plain load + store would save 1-2 ns
 * per hit in bench_hit, inside the noise, and could make a counter go
 * backwards when two threads share a slot: not worth it.) region_stats() sums the slots with relaxed
 * loads: a snapshot, not exact to the operation, but every counter only
 * grows. The slot index is in an initial-exec TLS variable (the library is
 * static), so finding it is one load from the thread pointer.
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
 * stripe lock; region_stats() takes each stripe's shared lock in turn
 * (STYLE.md section 6), so each stripe's part is consistent and no lock is
 * held across stripes.
 */
#include <errno.h>
#include <stdlib.h>

#include "region_int.h"

__thread unsigned region__tslot_v __attribute__((tls_model("initial-exec")));
static atomic_uint next_slot;

unsigned region__tslot_assign(void)
{
	unsigned v =
		atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);

	region__tslot_v = v % REGION_STAT_SLOTS + 1;
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
	unsigned i;

	for (i = 0; i < r->nstripes; i++) {
		struct stripe *s = &r->stripes[i];

		pthread_rwlock_rdlock(&s->lock);
		out->entries += s->nentries;
		out->bytes += s->bytes;
		out->flights += s->nflights;
		if (r->strategy == REGION_STRATEGY_TINYLFU) {
			out->window_share += s->tlfu.wshare / r->nstripes;
			out->sketch_resets += s->tlfu.sketch.resets;
		}
		pthread_rwlock_unlock(&s->lock);
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
