/*
 * state.c - the ground floor of the daemon: what every request reads.
 * struct rfs, the region table, the swap gate, the counters, per-thread
 * slots, the monotonic clock and thread spawning. Calls nothing in fs/
 * but log.c (fs.h has the floors).
 *
 * The region table. Requests find a region by name on every LOOKUP, OPEN
 * and commit, so that lookup must not serialize readers. The table is an
 * immutable snapshot (struct rfs_table: the regions in file order plus a
 * sorted index for bsearch) that a reload builds aside and swaps in whole.
 * The classic problem with a swapped pointer is the window between loading
 * it and taking a reference, in which the old table could be freed. It is
 * closed here with a sharded reader lock: TABLE_SHARDS rwlocks, each on its
 * own cache line; a reader takes only the shard of its thread (threads get
 * distinct shards until there are more than TABLE_SHARDS of them), loads
 * the pointer, takes a reference on the one region it wants and unlocks;
 * the swap takes every shard exclusively. So a reader touches no cache
 * line that other readers write except the region's own reference count,
 * and the reload, which is rare, pays for the exclusion. An RCU grace
 * period would save the shard lock but needs quiescent states that
 * libfuse's worker threads do not report.
 *
 * A request that started with a region keeps it (struct rfs_region, which
 * holds an engine reference) until it ends, even if a reload removes or
 * recreates the region meanwhile. A write (commit.c) resolves its region
 * once and holds the swap gate (shared) from its E1 to its E2; the swap
 * takes the gate exclusively first, so E1 and E2 always reach the same
 * cache: a recreated region can never see a flight that loaded the row
 * before a commit whose E2 went to the old one.
 *
 * Building a table (a reload, daemon.c): new regions are created, a region
 * whose stripes or strategy changed is recreated (its entries are carried
 * over in the background by carry.c, its counters go on in
 * rfs_region.carried), others get region_set_limits() and keep their
 * cache.
 *
 * Counters: struct rfs_counters (virtual.h) lives in COUNTER_SLOTS
 * per-thread slots, each on its own cache lines, added with relaxed atomics
 * and summed when a stats file is opened. One shared atomic for READ
 * counts was the top hot spot in seed 003's measurements.
 *
 * Locking:
 *   rfs.cfg_lock   the generation and last-load fields of struct rfs, and
 *                  the table swap (one reload at a time; the view builder
 *                  takes the table and the generation together)
 *   swap_gate      writes: shared; the swap: exclusive
 *   shards[i].l    readers: their own shard; the swap: all, in index order
 *   order: cfg_lock -> swap_gate -> shards. No lock is held across a
 *   store_*() call.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"

#define TABLE_SHARDS  16
#define COUNTER_SLOTS 32

struct rfs rfs = {
	.cfg_lock = PTHREAD_MUTEX_INITIALIZER,
};

struct shard {
	_Alignas(64) pthread_rwlock_t l;
};

struct counter_slot {
	_Alignas(64) atomic_int_fast64_t c[RFS_C_NR];
};

static struct shard shards[TABLE_SHARDS] = {
	[0 ... TABLE_SHARDS - 1] = {.l = PTHREAD_RWLOCK_INITIALIZER},
};
static struct rfs_table *cur_table; /* L: shards (all to write) */
/* writes hold it shared from E1 to E2; a swap exclusively (commit.c) */
static pthread_rwlock_t swap_gate =
	PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static struct counter_slot counters[COUNTER_SLOTS];

/* ---- small helpers ------------------------------------------------------- */

unsigned rfs_thread_slot(unsigned n)
{
	static atomic_uint next;
	static __thread unsigned slot; /* 0: not assigned yet */

	if (!slot)
		slot = atomic_fetch_add(&next, 1) + 1;
	return (slot - 1) % n;
}

uint64_t rfs_hash_mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

uint64_t rfs_name_hash(uint64_t basis, const char *region, const void *key,
		       size_t klen)
{
	const unsigned char *p = (const unsigned char *)region;
	uint64_t h = basis;
	size_t i;

	for (; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	h = (h ^ 0xff) * 0x100000001b3ULL;
	p = key;
	for (i = 0; i < klen; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return rfs_hash_mix(h);
}

int rfs_watch_dir(const char *path, uint32_t mask, char *dir, size_t dirlen)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 0;
	int fd;

	snprintf(dir, dirlen, "%.*s", (int)(len ? len : 1), len ? path : "/");
	if (!slash || len + 1 >= dirlen)
		return -ENAMETOOLONG; /* main.c makes paths absolute */
	fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (inotify_add_watch(fd, dir, mask) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

bool rfs_watch_hit(int fd, const char *base, bool prefix)
{
	char buf[4096]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	size_t blen = strlen(base);
	bool hit = false;
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (void *)p;

			if (ev->mask & IN_Q_OVERFLOW)
				hit = true; /* events were lost */
			else if (ev->len &&
				 strncmp(ev->name, base, blen) == 0 &&
				 (prefix || ev->name[blen] == '\0'))
				hit = true;
			p += sizeof(*ev) + ev->len;
		}
	}
	return hit;
}

uint64_t rfs_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void rfs_signals_block(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

void rfs_signals_restore(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

int rfs_thread_spawn(pthread_t *t, void *(*fn)(void *), void *arg,
		     const char *name)
{
	sigset_t old;
	int rc;

	/* the signals stay with the session loop's threads */
	rfs_signals_block(&old);
	rc = pthread_create(t, NULL, fn, arg);
	rfs_signals_restore(&old);
	if (rc)
		return -rc;
	if (name)
		pthread_setname_np(*t, name); /* for top -H */
	return 0;
}

/* ---- counters ------------------------------------------------------------ */

void rfs_count(enum rfs_ctr c, int64_t n)
{
	struct counter_slot *s = &counters[rfs_thread_slot(COUNTER_SLOTS)];

	atomic_fetch_add_explicit(&s->c[c], n, memory_order_relaxed);
}

uint64_t rfs_counter(enum rfs_ctr c)
{
	int64_t sum = 0;
	unsigned i;

	for (i = 0; i < COUNTER_SLOTS; i++)
		sum += atomic_load_explicit(&counters[i].c[c],
					    memory_order_relaxed);
	return sum > 0 ? (uint64_t)sum : 0;
}

/* ---- value serials ------------------------------------------------------- */

static atomic_uint_fast64_t value_serial; /* the last serial handed out */

uint64_t rfs_value_serial(void)
{
	return atomic_fetch_add(&value_serial, 1) + 1;
}

/* ---- regions and tables -------------------------------------------------- */

void rfs_region_unref(struct rfs_region *rr)
{
	if (!rr || atomic_fetch_sub(&rr->refs, 1) != 1)
		return;
	region_unref(rr->r);
	free(rr);
}

/* Wraps r (taking over the caller's engine reference). */
static struct rfs_region *wrap_region(struct region *r,
				      const struct config_region *cr)
{
	struct rfs_region *rr = calloc(1, sizeof(*rr));

	if (!rr) {
		region_unref(r);
		return NULL;
	}
	atomic_init(&rr->refs, 1);
	rr->r = r;
	rr->cfg = *cr;
	return rr;
}

void rfs_table_unref(struct rfs_table *t)
{
	size_t i;

	if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	for (i = 0; i < t->n; i++)
		rfs_region_unref(t->v[i]);
	free(t->v);
	free(t->byname);
	free(t);
}

static int cmp_byname(const void *a, const void *b)
{
	const struct rfs_region *x = *(struct rfs_region *const *)a;
	const struct rfs_region *y = *(struct rfs_region *const *)b;

	return strcmp(x->cfg.name, y->cfg.name);
}

static int cmp_key(const void *key, const void *elem)
{
	const struct rfs_region *y = *(struct rfs_region *const *)elem;

	return strcmp(key, y->cfg.name);
}

static struct rfs_region *table_find(const struct rfs_table *t,
				     const char *name)
{
	struct rfs_region **p;

	if (!t || !t->n)
		return NULL;
	p = bsearch(name, t->byname, t->n, sizeof(*p), cmp_key);
	return p ? *p : NULL;
}

struct rfs_region *rfs_table_find(const struct rfs_table *t, const char *name)
{
	return table_find(t, name);
}

long rfs_table_index(const struct rfs_table *t, const char *name)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->v[i]->cfg.name, name) == 0)
			return (long)i;
	return -1;
}

struct rfs_region *rfs_region_ref(const char *name)
{
	struct shard *s = &shards[rfs_thread_slot(TABLE_SHARDS)];
	struct rfs_region *rr;

	pthread_rwlock_rdlock(&s->l);
	rr = table_find(cur_table, name);
	if (rr)
		atomic_fetch_add(&rr->refs, 1);
	pthread_rwlock_unlock(&s->l);
	return rr;
}

bool rfs_region_exists(const char *name)
{
	struct shard *s = &shards[rfs_thread_slot(TABLE_SHARDS)];
	bool found;

	pthread_rwlock_rdlock(&s->l);
	found = table_find(cur_table, name) != NULL;
	pthread_rwlock_unlock(&s->l);
	return found;
}

bool rfs_region_perms(const char *name, struct rfs_perms *out)
{
	struct shard *s = &shards[rfs_thread_slot(TABLE_SHARDS)];
	const struct rfs_region *rr;
	struct config_region cr;
	bool found;

	pthread_rwlock_rdlock(&s->l);
	rr = table_find(cur_table, name);
	found = rr != NULL;
	if (found)
		cr = rr->cfg;
	pthread_rwlock_unlock(&s->l);
	if (!found)
		config_default_region(&cr);
	out->uid = cr.owner == CONFIG_ID_UNSET ? rfs.uid : cr.owner;
	out->gid = cr.group == CONFIG_ID_UNSET ? rfs.gid : cr.group;
	out->mode = cr.mode;
	out->dir_mode = cr.dir_mode;
	out->read_only = cr.read_only;
	out->strict = cr.coherence == CONFIG_COHERENCE_STRICT;
	return found;
}

size_t rfs_region_count(void)
{
	struct shard *s = &shards[rfs_thread_slot(TABLE_SHARDS)];
	size_t n;

	pthread_rwlock_rdlock(&s->l);
	n = cur_table ? cur_table->n : 0;
	pthread_rwlock_unlock(&s->l);
	return n;
}

struct rfs_table *rfs_table_ref(void)
{
	struct shard *s = &shards[rfs_thread_slot(TABLE_SHARDS)];
	struct rfs_table *t;

	pthread_rwlock_rdlock(&s->l);
	t = cur_table;
	atomic_fetch_add(&t->refs, 1);
	pthread_rwlock_unlock(&s->l);
	return t;
}

void rfs_swap_gate_enter(void)
{
	pthread_rwlock_rdlock(&swap_gate);
}

void rfs_swap_gate_leave(void)
{
	pthread_rwlock_unlock(&swap_gate);
}

/*
 * Installs t as the current table; returns the old one (its reference).
 * Waits for the writes between E1 and E2 (the swap gate).
 */
static struct rfs_table *table_swap(struct rfs_table *t)
{
	struct rfs_table *old;
	int i;

	pthread_rwlock_wrlock(&swap_gate);
	for (i = 0; i < TABLE_SHARDS; i++)
		pthread_rwlock_wrlock(&shards[i].l);
	old = cur_table;
	cur_table = t;
	for (i = TABLE_SHARDS - 1; i >= 0; i--)
		pthread_rwlock_unlock(&shards[i].l);
	pthread_rwlock_unlock(&swap_gate);
	return old;
}

static struct rfs_table *table_alloc(size_t n)
{
	struct rfs_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	atomic_init(&t->refs, 1);
	t->v = calloc(n ? n : 1, sizeof(*t->v));
	t->byname = calloc(n ? n : 1, sizeof(*t->byname));
	if (!t->v || !t->byname) {
		rfs_table_unref(t);
		return NULL;
	}
	return t;
}

bool rfs_carry_possible(const struct config_region *from,
			const struct config_region *to)
{
	return !from->lim.ttl_ms && !from->lim.tti_ms && !to->lim.ttl_ms &&
	       !to->lim.tti_ms;
}

/*
 * The engine region for cr: the old one when its limits can be applied
 * live (*applied set, so a failed build can restore them), else a new one.
 * *carried: the counters the new table's region starts from (old's, plus
 * old's cache's when it is recreated).
 */
static int region_for(const struct config_region *cr,
		      const struct rfs_region *old, bool *applied,
		      struct region_stats *carried, struct region **out)
{
	const char *why;
	struct region_stats st, now;
	bool carry;
	int rc;

	*applied = false;
	memset(carried, 0, sizeof(*carried));
	if (!old)
		return region_create(cr->name, &cr->lim, out);
	*carried = old->carried;
	if (old->cfg.lim.nstripes != cr->lim.nstripes)
		why = "its stripes changed";
	else if (old->cfg.lim.strategy != cr->lim.strategy)
		why = "its strategy changed";
	else if (region_set_limits(old->r, &cr->lim) == 0) {
		*applied = true;
		*out = region_ref(old->r);
		return 0;
	} else
		why = "the new limits leave too few entries for each of its "
		      "stripes";
	/* a new cache; never silent: logged and counted. Its entries come
	 * over in the background (carry.c) unless ttl or tti forbid it;
	 * its counters go on from the old cache's */
	rc = region_create(cr->name, &cr->lim, out);
	if (rc)
		return rc;
	region_stats(old->r, &st);
	region_stats(*out, &now);
	rfs_region_counters_add(carried, &st);
	carry = rfs_carry_possible(&old->cfg, cr);
	rfs_log(RFS_LOG_NOTICE,
		"region %s: cache recreated%s at the reload (%s): %s%llu "
		"cached entries %s, counters kept, %llu stripes now (were "
		"%llu)",
		cr->name, carry ? "" : " cold", why, carry ? "its " : "",
		(unsigned long long)st.entries,
		carry ? "are carried over in the background"
		      : "dropped (with ttl or tti set, an entry's age cannot "
			"come over)",
		(unsigned long long)now.nstripes,
		(unsigned long long)st.nstripes);
	atomic_fetch_add(&rfs.cache_rebuilds, 1);
	return 0;
}

/* Restores the limits region_for() applied to the old regions. */
static void undo_limits(const struct config *c, const struct rfs_table *old,
			const bool *applied)
{
	struct rfs_region *o;
	size_t i;

	for (i = 0; i < c->nregions; i++) {
		o = applied[i] ? table_find(old, c->regions[i].name) : NULL;
		if (o)
			region_set_limits(o->r, &o->cfg.lim);
	}
}

/*
 * Builds the table for c, reusing old's regions where possible. On error
 * writes a message into err and leaves old's regions as they were.
 */
static int table_build(const struct config *c, const struct rfs_table *old,
		       struct rfs_table **out, char *err, size_t errlen)
{
	struct rfs_table *t = table_alloc(c->nregions);
	bool *applied = calloc(c->nregions ? c->nregions : 1, sizeof(bool));
	struct region_stats carried;
	struct region *r;
	size_t i;
	int rc = -ENOMEM;

	*out = NULL;
	if (!t || !applied)
		goto out;
	for (i = 0; i < c->nregions; i++) {
		const struct config_region *cr = &c->regions[i];

		rc = region_for(cr, table_find(old, cr->name), &applied[i],
				&carried, &r);
		if (rc) {
			snprintf(err, errlen, "%s:%u: region %s: %s",
				 rfs.config_path, cr->line, cr->name,
				 strerror(-rc));
			goto out;
		}
		t->v[i] = wrap_region(r, cr);
		rc = -ENOMEM;
		if (!t->v[i])
			goto out;
		t->v[i]->carried = carried;
		t->n = i + 1;
	}
	memcpy(t->byname, t->v, t->n * sizeof(*t->v));
	qsort(t->byname, t->n, sizeof(*t->byname), cmp_byname);
	*out = t;
	t = NULL;
	rc = 0;
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory", rfs.config_path);
	if (rc && applied)
		undo_limits(c, old, applied);
	free(applied);
	rfs_table_unref(t);
	return rc;
}

int rfs_state_init(const struct config *c)
{
	char err[CONFIG_ERR_LEN];
	struct rfs_table *t;
	int rc;

	rc = table_build(c, NULL, &t, err, sizeof(err));
	if (rc) {
		rfs_log(RFS_LOG_ERR, "%s", err);
		return rc;
	}
	table_swap(t);
	rfs_mem_set_limit(c->max_memory);
	rfs.generation = 1;
	rfs.loaded_at = (int64_t)time(NULL);
	rfs.last_ok = true;
	return 0;
}

void rfs_state_fini(void)
{
	rfs_table_unref(table_swap(NULL));
}

int rfs_state_replace(const struct config *c, struct rfs_table **old, char *err,
		      size_t errlen)
{
	struct rfs_table *t;
	int rc;

	*old = NULL;
	rc = table_build(c, cur_table, &t, err, errlen);
	if (rc)
		return rc;
	*old = table_swap(t);
	rfs_mem_set_limit(c->max_memory);
	return 0;
}
