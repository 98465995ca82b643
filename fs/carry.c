/*
 * carry.c - a cache that a reload recreated takes over the old one's
 * entries, in bounded steps on the background thread.
 *
 * A reload that changes a region's stripes or strategy (or lowers its
 * limits below what its stripes need) must create a new engine region
 * (state.c). Its counters go on from the old cache's (rfs_region.carried);
 * its entries are carried over here, through the engine's public API
 * only: the engine has no way to list a cache's entries, so a job walks
 * the region's keys in the store in byte order (store_list, CARRY_LIST
 * keys a step from a cursor) and carries those the old cache still holds
 * (region_contains, region_peek).
 *
 * Carrying one key is a load whose bytes come from memory: the job opens a
 * flight for the key in the new cache (region_get: a miss), then reads the
 * row's metadata from the store (store_stat), and only if the row's
 * version and size are still those of the old cache's value does it
 * install that value (a large value is the same immutable object, no new
 * memory; a small one the engine copies into its entry, as for any
 * install; either keeps its load serial, so inode.c's page-cache rule
 * sees the same bytes); otherwise it loads the row like any miss
 * (rfs_flight_load).
 * The flight is what makes this safe against writes, exactly as for a
 * load: a write whose E2 (or an outside change whose feed invalidation)
 * comes after the flight opened poisons it and the install is refused;
 * one that came before is committed, so the store_stat after the flight
 * sees its version (a version grows with every change of a row,
 * doc/schema.md). The old cache stopped seeing invalidations at the swap,
 * which is why its value is never trusted without that check. A carried
 * entry leaves the old cache (region_invalidate), so memory is not held
 * twice while the job runs.
 *
 * Bounds: a step lists at most CARRY_LIST keys per job and carries at
 * most that many; the background thread runs a step every tick it has
 * (CARRY_TICK_MS) until the jobs are done, between its other work, so no
 * request waits for a job and the thread is never away for long (a step
 * can wait for a load of the same key in the air, like any reader). The
 * new cache is filled only as far as its limits allow: a job stops when
 * the entries or bytes it carried would pass the room the new cache had
 * (it never evicts what requests put there to make room for the old
 * entries). Entries of a region with ttl or tti are not carried (the
 * engine cannot tell their age; they would live longer than configured).
 *
 * Counts: a carried entry is, in the new cache's counters, a miss, a load
 * and an install (that is what the flight is); config_cache_carried
 * counts the entries carried. A job ends with one log line. If the region
 * is recreated again, or removed, before the job is done, the job stops
 * (a newer reload starts its own from the cache then current).
 *
 * Threads: the background thread only (daemon.c): the job list is its own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"

#define CARRY_LIST 1024 /* keys listed (and at most carried) a step */

struct ckey {
	size_t klen;
	char key[REGION_MAX_KEY];
};

struct carry {
	struct carry *next;
	struct rfs_region *from, *to; /* one reference each */
	char after[REGION_MAX_KEY];   /* the listing's cursor */
	size_t alen;		      /* 0: from the first key */
	uint64_t room_entries;	      /* what the new cache could take */
	uint64_t room_bytes;	      /* UINT64_MAX: no limit */
	uint64_t carried, reloaded, listed;
	uint64_t start_ns;
};

static struct carry *jobs;
static struct ckey *batch; /* CARRY_LIST keys, shared by the jobs */
static size_t nbatch;
static atomic_uint_fast64_t carried_total;

/* The room the new cache has now (max minus what it holds). */
static void room_of(struct carry *c)
{
	struct region_limits lim;
	struct region_stats st;

	region_limits_get(c->to->r, &lim);
	region_stats(c->to->r, &st);
	c->room_entries = UINT64_MAX;
	c->room_bytes = UINT64_MAX;
	if (lim.max_entries)
		c->room_entries = lim.max_entries > st.entries
					  ? lim.max_entries - st.entries
					  : 0;
	if (lim.max_bytes)
		c->room_bytes =
			lim.max_bytes > st.bytes ? lim.max_bytes - st.bytes : 0;
}

void rfs_carry_start(const struct rfs_table *old, const struct rfs_table *t)
{
	struct carry *c;
	size_t i;

	if (!old)
		return;
	for (i = 0; i < t->n; i++) {
		struct rfs_region *to = t->v[i];
		struct rfs_region *from = rfs_table_find(old, to->cfg.name);

		if (!from || from->r == to->r ||
		    !rfs_carry_possible(&from->cfg, &to->cfg))
			continue;
		if (!batch)
			batch = malloc(CARRY_LIST * sizeof(*batch));
		c = batch ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			rfs_log(RFS_LOG_WARNING,
				"region %s: out of memory: its cached entries "
				"are not carried over",
				to->cfg.name);
			continue;
		}
		atomic_fetch_add(&from->refs, 1);
		atomic_fetch_add(&to->refs, 1);
		c->from = from;
		c->to = to;
		c->start_ns = rfs_mono_ns();
		room_of(c);
		c->next = jobs;
		jobs = c;
	}
}

/* store_list's callback: keeps the keys the old cache holds. */
static int collect(void *ctx, const void *key, size_t klen,
		   const struct store_meta *meta)
{
	struct carry *c = ctx;

	(void)meta;
	c->listed++;
	memcpy(c->after, key, klen);
	c->alen = klen;
	if (klen <= REGION_MAX_KEY && region_contains(c->from->r, key, klen)) {
		memcpy(batch[nbatch].key, key, klen);
		batch[nbatch].klen = klen;
		nbatch++;
	}
	return 0;
}

/*
 * Carries one key (see the note at the top): 1 if the new cache holds
 * the key's current value now, 0 if not, -1 if it would not fit in the
 * room left.
 */
static int carry_one(struct carry *c, const char *key, size_t klen)
{
	struct region_value *ov, *v;
	struct region_flight *fl;
	struct store_meta m;
	uint64_t charge;
	int rc;

	if (!region_peek(c->from->r, key, klen, &ov))
		return 0; /* gone from the old cache meanwhile */
	charge = klen + region_value_len(ov);
	if (!c->room_entries || charge > c->room_bytes) {
		region_value_unref(ov);
		return -1;
	}
	rc = region_get(c->to->r, key, klen, &v, &fl);
	if (rc != REGION_LOAD) { /* cached (by a request) already, or -errno */
		region_value_unref(ov);
		if (rc == REGION_HIT)
			region_value_unref(v);
		return 0;
	}
	rc = store_stat(rfs.st, c->to->cfg.name, key, klen, &m);
	if (rc == 0 && m.version == region_value_version(ov) &&
	    m.size == region_value_len(ov)) {
		rc = region_flight_done(c->to->r, fl, 0, ov, &v);
		c->carried++;
		atomic_fetch_add(&carried_total, 1);
	} else { /* changed since the old cache loaded it: a real load */
		region_value_unref(ov);
		rc = rfs_flight_load(c->to, fl, key, klen, &v);
		c->reloaded++;
	}
	if (rc == 0)
		region_value_unref(v);
	region_invalidate(c->from->r, key, klen, REGION_ORIGIN_LOCAL);
	c->room_entries--;
	c->room_bytes -= charge;
	return rc == 0;
}

/* Is c's new cache still the one the current table serves? */
static bool current(const struct carry *c)
{
	struct rfs_table *t = rfs_table_ref();
	const struct rfs_region *rr = rfs_table_find(t, c->to->cfg.name);
	bool yes = rr && rr->r == c->to->r;

	rfs_table_unref(t);
	return yes;
}

static void finish(struct carry *c, const char *why)
{
	struct region_stats st;

	region_stats(c->from->r, &st);
	rfs_log(RFS_LOG_NOTICE,
		"region %s: carrying the cache over ended (%s): %llu entries "
		"carried, %llu reloaded (changed meanwhile), %llu left in the "
		"old cache; %llu keys listed in %llu ms",
		c->to->cfg.name, why, (unsigned long long)c->carried,
		(unsigned long long)c->reloaded, (unsigned long long)st.entries,
		(unsigned long long)c->listed,
		(unsigned long long)((rfs_mono_ns() - c->start_ns) / 1000000));
	rfs_region_unref(c->from);
	rfs_region_unref(c->to);
	free(c);
}

/* One step of c: NULL when c is done (and freed), else why not yet. */
static const char *step(struct carry *c)
{
	int rc;
	size_t i;

	if (!current(c))
		return "the region was reloaded again or removed";
	nbatch = 0;
	rc = store_list(rfs.st, c->to->cfg.name, c->alen ? c->after : NULL,
			c->alen, CARRY_LIST, collect, c);
	if (rc < 0) {
		rfs_log(RFS_LOG_WARNING,
			"region %s: listing its keys to carry the cache over: "
			"%s",
			c->to->cfg.name, strerror(-rc));
		return "the store failed";
	}
	for (i = 0; i < nbatch; i++) {
		if (carry_one(c, batch[i].key, batch[i].klen) < 0)
			return "the new cache is full";
	}
	if ((size_t)rc < CARRY_LIST)
		return "complete";
	return NULL;
}

bool rfs_carry_step(void)
{
	struct carry **pp = &jobs, *c;
	const char *why;

	while ((c = *pp)) {
		why = step(c);
		if (why) {
			*pp = c->next;
			finish(c, why);
		} else {
			pp = &c->next;
		}
	}
	if (!jobs) {
		free(batch);
		batch = NULL;
	}
	return jobs != NULL;
}

void rfs_carry_stop(void)
{
	struct carry *c;

	while ((c = jobs)) {
		jobs = c->next;
		finish(c, "unmounting");
	}
	free(batch);
	batch = NULL;
}

uint64_t rfs_carry_count(void)
{
	return atomic_load(&carried_total);
}
