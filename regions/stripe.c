/*
 * stripe.c - one stripe of a region: its lock, hash tables and entries.
 *
 * A region spreads its keys over nstripes stripes by the top bits of a
 * seeded 64-bit hash; the low bits pick a bucket of the stripe's chained
 * hash table. Each stripe is a small cache of its own: a mutex for
 * writers, a table, its share of the region's quotas, its eviction state,
 * its flights, and per-thread lanes of buffered hits.
 *
 * Readers take no lock (seed 000: a lock every reader takes, even a shared
 * one, is a cache line every reader writes). A hit walks the chain with
 * acquire loads inside an epoch section (epoch.c); writers publish with
 * release stores under the mutex. An unlinked entry is marked dead and
 * retired: still readable by a reader already on it (which then goes the
 * slow way), freed once the epoch has advanced twice. Since readers do
 * not block writers and a mutex has no reader side, neither side can
 * starve the other (the old writer-preferring rwlock let writers starve
 * readers under seed 003's mix).
 *
 * Hits for a policy without a lock-free access() (LRU) go to the hitting
 * thread's lane on the stripe (BP-Wrapper, Ding et al., ICDE 2009, with
 * per-thread buffers instead of one shared one, so recording a hit is two
 * relaxed stores to a line only that thread writes). A full lane is
 * replayed by its thread under a trylock; the lock holder also replays its
 * own lane first, so one thread alone sees exact LRU order. A hit is lost
 * only when its thread's lane is full and the lock is busy (counted).
 *
 * Tables grow (load factor > 1) and shrink (< 1/8) incrementally: a new
 * table is published, the old one stays readable, and every later lock
 * hold that inserts moves REGION_MIGRATE_BUCKETS buckets across, so no
 * hold examines more than a bounded number of buckets and entries. A
 * reader that races a move may miss the key and takes the locked path,
 * which looks in both tables. Invalidate-all bumps the stripe's
 * generation (O(1)): readers ignore entries of an older generation, and
 * they are reclaimed in bounded batches by installs and the sweep.
 *
 * Invariants:
 * - A linked entry is in exactly one chain of tab or old, and in the
 *   policy's state; nentries/bytes are the sums over linked entries
 *   (stale_n/stale_bytes over those of an older generation).
 * - Retired entries and tables are freed only when the epoch is two past
 *   their retirement, and only after the lock is dropped.
 *
 * Locking: "L: stripe" fields in region_int.h. Functions named *_locked
 * need the lock and assert it in debug builds through an owner token (the
 * address of a thread-local byte: unique among live threads, and cheaper
 * than gettid()).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "region_int.h"

#define STRIPE_MIN_BUCKETS     16
#define REGION_MIGRATE_BUCKETS 64  /* per lock hold */
#define REGION_MIGRATE_MAX     256 /* buckets + entries per lock hold */
#define RETIRE_ADVANCE_AT      64 /* retired entries per scan x2, + 4 per thread */

/*
 * The hash seed: random per process, so that nobody can aim keys at one
 * bucket (keys are file names chosen by users). Set once, before the first
 * region exists; read without a lock afterwards.
 */
uint64_t region__hash_seed;
static pthread_once_t hash_once = PTHREAD_ONCE_INIT;

static void hash_seed_init(void)
{
	struct timespec ts;
	uint64_t seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
		/* no entropy yet (early boot): still differs per process */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = region__mum((uint64_t)ts.tv_nsec ^ (uint64_t)getpid(),
				   (uint64_t)(uintptr_t)&ts ^
					   0x9e3779b97f4a7c15ull);
	}
	region__hash_seed = seed;
}

void region__hash_init(void)
{
	pthread_once(&hash_once, hash_seed_init);
}

#ifndef NDEBUG
static __thread char thread_token_byte;

uintptr_t region__thread_token(void)
{
	return (uintptr_t)&thread_token_byte;
}
#endif

static struct table *table_new(size_t nbuckets)
{
	struct table *t = calloc(1, sizeof(*t) + nbuckets * sizeof(t->b[0]));

	if (!t)
		return NULL;
	t->mask = nbuckets - 1;
	return t; /* calloc: every bucket NULL */
}

int region__stripe_init(struct stripe *s, const struct region_evict_ops *ops)
{
	struct table *t;
	unsigned i;
	int rc;

	memset(s, 0, sizeof(*s));
	s->ops = ops;
	t = table_new(STRIPE_MIN_BUCKETS);
	s->lanes = aligned_alloc(REGION_CACHELINE,
				 sizeof(*s->lanes) * REGION_STAT_SLOTS);
	if (!t || !s->lanes) {
		free(t);
		free(s->lanes);
		s->lanes = NULL;
		return -ENOMEM;
	}
	memset(s->lanes, 0, sizeof(*s->lanes) * REGION_STAT_SLOTS);
	for (i = 0; i < REGION_STAT_SLOTS; i++)
		atomic_init(&s->lanes[i].n, 0);
	for (i = 0; i < REGION_STAT_SLOTS; i++)
		atomic_init(&s->lanes[i].seq, LANE_SEQ_NONE);
	atomic_init(&s->reclaims, 0);
	atomic_init(&s->tab, t);
	atomic_init(&s->old, NULL);
	atomic_init(&s->gen, 0);
	atomic_init(&s->max_examined, 0);
	atomic_init(&s->ttl_ms, 0);
	atomic_init(&s->tti_ms, 0);
	s->retired_tail = &s->retired;
	s->advance_at = RETIRE_ADVANCE_AT / 2;
	s->quota_entries = REGION_UNLIMITED;
	s->quota_bytes = REGION_UNLIMITED;
	rlist_init(&s->lru);
	rlist_init(&s->small);
	rlist_init(&s->main);
	if (ops->init && (rc = ops->init(s)) != 0) {
		free(t);
		free(s->lanes);
		s->lanes = NULL;
		return rc;
	}
	atomic_init(&s->lock.w, 0);
	atomic_init(&s->flight_seq, 0);
	return 0;
}

static void entry_free(struct entry *e)
{
	struct region_value *v = region__entry_val(e);

	/*
	 * The block goes with the last reference to its value header. A
	 * reclaimed entry is unreachable, so nobody can take a new reference
	 * to its value: a count of 1 is the entry's alone (a thread caching
	 * the value holds a bias in the count, and the acquire pairs with
	 * the acq_rel decrement of the last other holder), and the value is
	 * freed without a read-modify-write (one atomic less per eviction).
	 */
	if (atomic_load_explicit(&v->refs, memory_order_acquire) == 1)
		region__value_free(v);
	else
		region_value_unref(v);
}

static void table_free_chains(struct table *t)
{
	size_t i;

	for (i = 0; t && i <= t->mask; i++) {
		struct entry *e =
			atomic_load_explicit(&t->b[i], memory_order_relaxed);
		struct entry *next;

		for (; e; e = next) {
			next = atomic_load_explicit(&e->hnext,
						    memory_order_relaxed);
			entry_free(e);
		}
	}
	free(t);
}

void region__stripe_release(struct stripe *s)
{
	struct entry *e, *next;
	struct table *t, *tn;

	if (!s->lanes)
		return;
	/* nobody else can use s: no reader, no grace period to wait for */
	table_free_chains(atomic_load(&s->tab));
	table_free_chains(atomic_load(&s->old));
	for (e = s->retired; e; e = next) {
		next = e->retire.next;
		entry_free(e);
	}
	for (t = s->retired_tabs; t; t = tn) {
		tn = t->rnext;
		free(t);
	}
	region__ghost_release(&s->ghost);
	if (s->ops->release)
		s->ops->release(s);
	free(s->lanes);
	s->lanes = NULL;
}

struct entry *region__find_hash_locked(struct stripe *s, uint64_t hash)
{
	struct table *t = atomic_load_explicit(&s->tab, memory_order_relaxed);
	struct table *o = atomic_load_explicit(&s->old, memory_order_relaxed);
	struct entry *e;
	int pass;

	for (pass = 0; pass < 2; pass++, t = o) {
		if (!t)
			break;
		e = atomic_load_explicit(&t->b[hash & t->mask],
					 memory_order_relaxed);
		for (; e; e = atomic_load_explicit(&e->hnext,
						   memory_order_relaxed)) {
			s->examined++;
			if (region__entry_hash(e) == hash)
				return e;
		}
	}
	return NULL;
}

/* Replays a lane's n > 0 buffered hits into the policy, in one
 * replay_locked() call (not an indirect call per hit). Lock held. */
void region__replay_lane_locked(struct stripe *s, struct lane *l, uint64_t n)
{
	struct lane_replay rp = {
		.l = l,
		.n = n < REGION_LANE_RECS ? n : REGION_LANE_RECS,
		.gen = atomic_load_explicit(&s->gen, memory_order_relaxed),
		.ptrs = atomic_load_explicit(&l->seq, memory_order_relaxed) ==
			region__stripe_reclaims(s),
	};

	s->ops->replay_locked(s, &rp);
	atomic_store_explicit(&l->n, 0, memory_order_relaxed);
	atomic_store_explicit(&l->seq, LANE_SEQ_NONE, memory_order_relaxed);
}

/* ---- the stripe lock (region_int.h) ---- */

void region__futex_wait(atomic_uint *word, unsigned val)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

void region__futex_wake_all(atomic_uint *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

void region__lock_slow(struct region_lock *l)
{
	unsigned i, w;

	/*
	 * A bounded spin first (REGION_LOCK_SPINS loads, no stores to the
	 * line while it is held): a hold is a few hundred nanoseconds, and a
	 * holder running on another core releases it sooner than a futex
	 * sleep and wake-up takes (each several microseconds, and the
	 * unlock's wake a syscall too). Only a free word is taken (0 -> 1:
	 * not marked contended, so its unlock makes no syscall); the spin
	 * stops early once someone sleeps (2: the holder will wake one of
	 * them, and a spinner that barged past them on every release could
	 * keep them asleep). A holder preempted on a loaded machine costs
	 * the spinners the bound, then they sleep as before.
	 */
	for (i = 0; i < REGION_LOCK_SPINS; i++) {
		w = atomic_load_explicit(&l->w, memory_order_relaxed);
		if (w == 0 && region__trylock(l))
			return;
		if (w == 2)
			break;
		cpu_relax();
	}
	/* mark it contended; whoever unlocks then wakes one sleeper */
	while (atomic_exchange_explicit(&l->w, 2, memory_order_acquire) != 0)
		syscall(SYS_futex, &l->w, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void region__lock_wake(struct region_lock *l)
{
	syscall(SYS_futex, &l->w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The retire run at position i of the ring (0: the oldest). */
static struct retire_run *run_at(struct stripe *s, unsigned i)
{
	return &s->runs[(s->run_head + i) % REGION_RETIRE_RUNS];
}

/*
 * Stamps what was retired since the last stamp (this hold's and earlier
 * ones') with the epoch, read after a full barrier, so every unlink is
 * visible to all before the epoch it is stamped with is read. (A plain
 * load right after each unlink could be ordered before the unlink's
 * store, StoreLoad, and stamp an epoch so old that a reader pinned two
 * epochs later could still find the entry.) The entries join the newest
 * run, or start one. Lock held.
 */
static void stamp_pending_locked(struct stripe *s)
{
	struct retire_run *run;
	struct entry *last;
	struct table *t;
	uint64_t now;

	if (!s->npending && !s->pending_tabs)
		return;
	now = region__epoch_stamp();
	if (s->npending) {
		last = region__container_of(s->retired_tail, struct entry,
					    retire.next);
		run = s->nruns ? run_at(s, s->nruns - 1) : NULL;
		if (!run ||
		    (run->epoch != now && s->nruns < REGION_RETIRE_RUNS)) {
			run = run_at(s, s->nruns++);
			run->n = 0;
		}
		run->last = last;
		run->epoch = now; /* a full ring: the newer epoch, later */
		run->n += s->npending;
		s->npending = 0;
	}
	for (t = s->retired_tabs; t; t = t->rnext) {
		if (t->repoch == REGION_EPOCH_PENDING)
			t->repoch = now;
	}
	s->pending_tabs = false;
}

/*
 * Detaches what was retired long enough ago: the runs whose epoch is safe,
 * cut from the list at the last one's newest entry. Returns whether the
 * caller should try to advance the epoch after unlocking: a scan reads a
 * line per thread, so it runs out of the lock, once the stripe holds
 * RETIRE_ADVANCE_AT / 2 + 2 per thread retired entries more than after its
 * last detach or try (a reader preempted in a section holds the epoch
 * back; at 48 threads on 2 cores, trying on every hold past the threshold
 * made each hold scan every thread's record under the lock). Lock held.
 */
static bool collect_locked(struct stripe *s, struct entry **ents,
			   struct table **tabs)
{
	struct entry *last = NULL;
	struct retire_run *run;
	struct table **tp;
	uint64_t now, n = 0, step;
	bool advance;

	*ents = NULL;
	*tabs = NULL;
	if (!s->retired && !s->retired_tabs)
		return false;
	/* stamping late is safe (a later epoch, freed later), and the
	 * epoch moves only when someone scans: so the fence is paid once
	 * per scan, not on every hold that retired something */
	advance = s->nretired >= s->advance_at || s->retired_tabs;
	if (advance || !s->nruns || s->pending_tabs)
		stamp_pending_locked(s);
	now = region__epoch_now();
	/* the runs are oldest first: detach the prefix that is safe */
	for (run = run_at(s, 0);
	     s->nruns && region__epoch_safe(run->epoch, now);
	     run = run_at(s, 0)) {
		last = run->last;
		n += run->n;
		s->run_head = (s->run_head + 1) % REGION_RETIRE_RUNS;
		s->nruns--;
	}
	if (last) {
		*ents = s->retired;
		s->retired = last->retire.next;
		last->retire.next = NULL;
		s->nretired -= n;
		/* before any of them is freed: lanes' pointers go stale */
		atomic_store_explicit(
			&s->reclaims,
			atomic_load_explicit(&s->reclaims,
					     memory_order_relaxed) +
				1,
			memory_order_relaxed);
		if (!s->retired)
			s->retired_tail = &s->retired;
	}
	for (tp = &s->retired_tabs; *tp;) {
		struct table *t = *tp;

		if (region__epoch_safe(t->repoch, now)) {
			*tp = t->rnext;
			t->rnext = *tabs;
			*tabs = t;
		} else {
			tp = &t->rnext;
		}
	}
	if (advance || last) {
		step = RETIRE_ADVANCE_AT / 2 +
		       2 * (uint64_t)region__epoch_nthreads();
		if (advance || s->advance_at > s->nretired + step)
			s->advance_at = s->nretired + step;
	}
	return advance;
}

/*
 * Frees what collect_locked() detached; returns the entries freed. The
 * common entry, an EMBEDDED value that only the entry references
 * (entry_free()), goes straight to the thread's spares, and the batch
 * stores the live-bytes and spare-bytes gauges once instead of once an
 * entry (callgrind, bench_engine mix48 LRU: ~20 instructions an eviction).
 */
static size_t free_collected(struct entry *ents, struct table *tabs)
{
	struct region__epoch_rec *rec = region__my_rec;
	size_t spare = region__spares.bytes;
	int64_t freed = 0;
	struct entry *next;
	struct table *tn;
	size_t n = 0;

	for (; ents; ents = next, n++) {
		struct region_value *v = region__entry_val(ents);
		size_t len;

		next = ents->retire.next;
		if (!rec || v->kind != VALUE_EMBEDDED ||
		    atomic_load_explicit(&v->refs, memory_order_acquire) != 1) {
			/* it may keep a spare too: the count in step first */
			if (spare != region__spares.bytes)
				region__spares_set(rec, spare);
			entry_free(ents);
			spare = region__spares.bytes;
			continue;
		}
		len = region__vlen(v);
		freed += (int64_t)(REGION_VALUE_HDR + len);
		region__block_keep(ents, v->back + REGION_VALUE_HDR + len,
				   &spare);
	}
	if (freed)
		region__values_account(-freed);
	if (spare != region__spares.bytes)
		region__spares_set(rec, spare);
	for (; tabs; tabs = tn) {
		tn = tabs->rnext;
		free(tabs);
	}
	return n;
}

/* The unlock of a hold that has something to collect. */
void region__wrunlock_collect(struct stripe *s)
{
	struct entry *ents;
	struct table *tabs;
	bool advance;

	advance = collect_locked(s, &ents, &tabs);
	region__set_owner(s, false);
	region__unlock(&s->lock);
	if (advance)
		region__epoch_try_advance();
	free_collected(ents, tabs); /* free() is not lock work */
}

void region__stripe_reclaim(struct stripe *s)
{
	region__stripe_wrlock(s);
	s->advance_at = 0; /* stamp, then scan after the unlock */
	region__stripe_wrunlock(s);
}

/*
 * Three rounds of stamp, collect, advance: what was retired before the
 * call is stamped with the epoch E of the first round at the latest, and
 * safe once E + 2 is reached, which two advances make unless a reader
 * still sits in a section of an older epoch (then it stays for later
 * holds). Stops as soon as nothing is left retired.
 */
size_t region__stripe_reclaim_retired(struct stripe *s)
{
	struct entry *ents;
	struct table *tabs;
	size_t n = 0;
	bool left = true;
	int round;

	for (round = 0; round < 3 && left; round++) {
		region__stripe_wrlock(s);
		if (!s->retired && !s->retired_tabs) {
			region__stripe_wrunlock(s);
			break;
		}
		s->advance_at = 0; /* stamp whatever is pending */
		collect_locked(s, &ents, &tabs);
		left = s->retired || s->retired_tabs;
		region__set_owner(s, false);
		region__unlock(&s->lock);
		if (left)
			region__epoch_try_advance();
		n += free_collected(ents, tabs);
	}
	return n;
}

void region__stripe_record_hit_slow(struct region *r, struct stripe *s,
				    struct entry *e, uint64_t hash,
				    unsigned slot)
{
	struct lane *l = &s->lanes[slot];
	uint64_t n = atomic_load_explicit(&l->n, memory_order_relaxed);

	if (region__unlikely(n >= REGION_LANE_RECS)) {
		/* full, and its last replay found the lock busy */
		if (!region__trylock(&s->lock)) {
			region__count_slot(r, slot, ST_UNRECORDED, 1);
			return;
		}
		region__lock_acquired(s); /* replays this lane */
		region__stripe_wrunlock(s);
		n = 0;
	}
	region__lane_append(s, l, n, e, hash, slot);
	if (n + 1 == REGION_LANE_RECS && region__trylock(&s->lock)) {
		region__lock_acquired(s);
		region__stripe_wrunlock(s);
	}
}

/* A new unlinked entry for key whose value header (one reference: the
 * entry's; metadata 0) is of kind, with len bytes of length and data bytes
 * of room after it (uninitialized). Accounted as a live value. */
static struct entry *entry_alloc(const void *key, size_t klen,
				 enum value_kind kind, size_t len, size_t data)
{
	size_t off = region__entry_val_off(klen);
	struct region_value *c;
	struct entry *e;

	e = region__block_alloc(off + REGION_VALUE_HDR + data);
	if (!e)
		return NULL;
	atomic_init(&e->hnext, NULL);
	rlist_init(&e->qnode);
	e->install_ms = 0;
	atomic_init(&e->access_ms, 0);
	e->gen = 0;
	atomic_init(&e->freq, 0);
	e->queue = ENTRY_Q_NONE;
	atomic_init(&e->dead, ENTRY_FRESH);
	e->klen = (uint8_t)klen;
	memcpy(e->key, key, klen);
	c = region__entry_val(e);
	atomic_init(&c->refs, 1);
	c->kind = (uint8_t)kind;
	c->back = (uint16_t)off;
	region__vlen_set(c, len);
	c->mtime_ns = 0;
	c->version = 0;
	c->tag = 0;
	region__values_account((int64_t)(REGION_VALUE_HDR + data));
	return e;
}

struct entry *region__entry_alloc(const void *key, size_t klen, size_t len)
{
	assert(len <= REGION_EMBED_MAX);
	return entry_alloc(key, klen, VALUE_EMBEDDED, len, len);
}

struct entry *region__entry_create(const void *key, size_t klen,
				   struct region_value *v)
{
	size_t len = region__vlen(v);
	bool embed = len <= REGION_EMBED_MAX;
	struct region_value *c;
	const void *p = region_value_data(v);
	struct entry *e;

	e = entry_alloc(key, klen, embed ? VALUE_EMBEDDED : VALUE_INDIRECT, len,
			embed ? len : REGION_VALUE_PTRS);
	if (!e)
		return NULL;
	c = region__entry_val(e);
	c->mtime_ns = v->mtime_ns;
	c->version = v->version;
	c->tag = v->tag;
	if (embed) {
		if (len)
			memcpy(c->inline_data, p, len);
	} else {
		/* the reference to v is the caller's to take */
		memcpy(c->inline_data + REGION_VALUE_PTR_OFF, &p, sizeof(p));
		memcpy(c->inline_data + REGION_VALUE_PTR_OFF + sizeof(p), &v,
		       sizeof(v));
	}
	return e;
}

void region__entry_discard(struct entry *e)
{
	struct region_value *c = region__entry_val(e);
	size_t data =
		c->kind == VALUE_EMBEDDED ? region__vlen(c) : REGION_VALUE_PTRS;

	region__values_account(-(int64_t)(REGION_VALUE_HDR + data));
	region__block_free(e, c->back + REGION_VALUE_HDR + data);
}

static void retire_table_locked(struct stripe *s, struct table *t)
{
	t->repoch = REGION_EPOCH_PENDING; /* stamped at the unlock */
	s->pending_tabs = true;
	t->rnext = s->retired_tabs;
	s->retired_tabs = t;
}

/* Pushes e (whose key has this hash) at the head of its bucket in t,
 * publishing it. */
static void push_locked(struct table *t, struct entry *e, uint64_t hash)
{
	_Atomic(struct entry *) *b = &t->b[hash & t->mask];

	/*
	 * release, not relaxed: a migration moves live entries, and a reader
	 * already standing on e (found before the move) follows this link
	 * into the new chain without passing the bucket: it must see the
	 * entries behind it initialized (TSan found this on the x16 limit
	 * swings of stress_engine; free on x86, needed on weaker machines).
	 */
	atomic_store_explicit(&e->hnext,
			      atomic_load_explicit(b, memory_order_relaxed),
			      memory_order_release);
	atomic_store_explicit(b, e, memory_order_release);
}

static void maybe_resize_locked(struct stripe *s);

void region__migrate_step_locked(struct stripe *s)
{
	struct table *o = atomic_load_explicit(&s->old, memory_order_relaxed);
	struct table *t = atomic_load_explicit(&s->tab, memory_order_relaxed);
	size_t end, moved = 0;

	region__assert_wrlocked(s);
	if (!o) {
		maybe_resize_locked(s); /* may start one */
		return;
	}
	end = s->migrate_pos + REGION_MIGRATE_BUCKETS;
	for (; s->migrate_pos <= o->mask && s->migrate_pos < end &&
	       moved < REGION_MIGRATE_MAX - REGION_MIGRATE_BUCKETS;
	     s->migrate_pos++) {
		_Atomic(struct entry *) *b = &o->b[s->migrate_pos];
		struct entry *e;

		s->examined++;
		while ((e = atomic_load_explicit(b, memory_order_relaxed))) {
			/* a reader on e may follow it into t's chain: it then
			 * misses and retries under the lock */
			atomic_store_explicit(
				b,
				atomic_load_explicit(&e->hnext,
						     memory_order_relaxed),
				memory_order_release);
			push_locked(t, e, region__entry_hash(e));
			moved++;
		}
	}
	s->examined += moved;
	if (s->migrate_pos > o->mask) {
		atomic_store_explicit(&s->old, NULL, memory_order_release);
		retire_table_locked(s, o);
	}
}

/* Starts a migration to a table of n buckets (failure: keep the table). */
static void resize_locked(struct stripe *s, size_t n)
{
	struct table *t = atomic_load_explicit(&s->tab, memory_order_relaxed);
	struct table *nt = table_new(n);

	if (!nt)
		return;
	atomic_store_explicit(&s->old, t, memory_order_release);
	atomic_store_explicit(&s->tab, nt, memory_order_release);
	s->migrate_pos = 0;
	/* any stale-reclaim cursor restarts on the new table */
	s->stale_pos = 0;
}

static void maybe_resize_locked(struct stripe *s)
{
	struct table *t = atomic_load_explicit(&s->tab, memory_order_relaxed);
	size_t nb = t->mask + 1, want = STRIPE_MIN_BUCKETS;

	if (atomic_load_explicit(&s->old, memory_order_relaxed))
		return;
	if (s->nentries > nb && nb < SIZE_MAX / 16) {
		resize_locked(s, nb * 2);
	} else if (nb > STRIPE_MIN_BUCKETS && s->nentries < nb / 8) {
		while (want < s->nentries * 2)
			want *= 2;
		resize_locked(s, want);
	}
}

/* Is a migration running, or due (maybe_resize_locked()'s bounds)? */
static inline bool table_work_locked(const struct stripe *s)
{
	const struct table *t =
		atomic_load_explicit(&s->tab, memory_order_relaxed);
	size_t nb = t->mask + 1;

	return atomic_load_explicit(&s->old, memory_order_relaxed) ||
	       s->nentries > nb ||
	       (nb > STRIPE_MIN_BUCKETS && s->nentries < nb / 8);
}

/* The link that points at e, in tab or old. Lock held. */
static _Atomic(struct entry *) *
link_of_locked(struct stripe *s, const struct entry *e, uint64_t hash)
{
	struct table *t = atomic_load_explicit(&s->tab, memory_order_relaxed);
	struct table *o = atomic_load_explicit(&s->old, memory_order_relaxed);
	_Atomic(struct entry *) *pp;
	int pass;

	for (pass = 0; pass < 2; pass++, t = o) {
		struct entry *x;

		if (!t)
			break;
		pp = &t->b[hash & t->mask];
		while ((x = atomic_load_explicit(pp, memory_order_relaxed))) {
			if (x == e)
				return pp;
			pp = &x->hnext;
		}
	}
	assert(!"entry not in its stripe's tables");
	return NULL;
}

/* region__unlink_hash_locked(), inlined into region__unlink_locked() and
 * region__evict_locked(): a capacity eviction was four calls deep (13
 * instructions of an eviction's 157, callgrind, bench_engine mix2). */
static inline __attribute__((always_inline)) void
unlink_hash_locked(struct stripe *s, struct entry *e, uint64_t hash)
{
	_Atomic(struct entry *) *pp = link_of_locked(s, e, hash);
	uint64_t charge = region__entry_charge(e);

	region__assert_wrlocked(s);
	/* e keeps its hnext: a reader standing on e walks on */
	atomic_store_explicit(
		pp, atomic_load_explicit(&e->hnext, memory_order_relaxed),
		memory_order_release);
	atomic_store_explicit(&e->dead, 1, memory_order_release);
	s->ops->remove_locked(s, e);
	assert(s->nentries > 0 && s->bytes >= charge);
	s->nentries--;
	s->bytes -= charge;
	if (e->gen != atomic_load_explicit(&s->gen, memory_order_relaxed)) {
		s->stale_n--;
		s->stale_bytes -= charge;
	}
	/* qnode is the policy's no more: it becomes the retire link */
	e->retire.next = NULL;
	s->npending++; /* stamped at the unlock */
	*s->retired_tail = e;
	s->retired_tail = &e->retire.next;
	s->nretired++;
}

void region__unlink_hash_locked(struct stripe *s, struct entry *e,
				uint64_t hash)
{
	unlink_hash_locked(s, e, hash);
}

void region__unlink_locked(struct stripe *s, struct entry *e,
			   struct entry **grave)
{
	(void)grave;
	unlink_hash_locked(s, e, region__entry_hash(e));
}

void region__evict_locked(struct region *r, struct stripe *s, struct entry *e,
			  struct entry **grave)
{
	(void)grave;
	unlink_hash_locked(s, e, region__entry_hash(e));
	region__count(r, ST_EV_SIZE, 1);
}

size_t region__reclaim_stale_locked(struct region *r, struct stripe *s,
				    size_t max)
{
	uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
	struct table *t;
	size_t got = 0, seen = 0;

	(void)r;
	region__assert_wrlocked(s);
	if (!s->stale_n)
		return 0;
	if (atomic_load_explicit(&s->old, memory_order_relaxed)) {
		region__migrate_step_locked(s); /* one table at a time */
		return 0;
	}
	t = atomic_load_explicit(&s->tab, memory_order_relaxed);
	while (s->stale_n && seen < max) {
		struct entry *e, *next;

		if (s->stale_pos > t->mask)
			s->stale_pos = 0;
		e = atomic_load_explicit(&t->b[s->stale_pos],
					 memory_order_relaxed);
		seen++;
		for (; e && seen < max; e = next) {
			next = atomic_load_explicit(&e->hnext,
						    memory_order_relaxed);
			seen++;
			if (e->gen != gen) {
				region__unlink_locked(s, e, NULL);
				got++;
			}
		}
		if (!e) /* else resume in this bucket next time */
			s->stale_pos++;
	}
	s->examined += seen;
	if (!s->nentries && s->ops->reset_locked)
		s->ops->reset_locked(s);
	return got;
}

/* region__make_room_locked(), inlined into region__install_locked() too. */
static inline __attribute__((always_inline)) size_t
make_room_locked(struct region *r, struct stripe *s, bool adding,
		 uint64_t charge, size_t max, struct entry **grave)
{
	uint64_t before = s->nentries;

	region__assert_wrlocked(s);
	if (s->stale_n && region__over_quota(s, adding, charge))
		region__reclaim_stale_locked(r, s, max / 2);
	while (before - s->nentries < max &&
	       region__over_quota(s, adding, charge)) {
		/* bounded per hold; the sweep and later installs go on */
		if (s->examined + REGION_MIGRATE_MAX >= REGION_SWEEP_BATCH &&
		    before != s->nentries)
			break;
		s->examined++;
		if (!s->ops->evict_locked(r, s, grave))
			break;
	}
	return before - s->nentries;
}

size_t region__make_room_locked(struct region *r, struct stripe *s, bool adding,
				uint64_t charge, size_t max,
				struct entry **grave)
{
	return make_room_locked(r, s, adding, charge, max, grave);
}

/*
 * One function for the room and the link of an install (the charge
 * computed once; two calls less: ~35 instructions a miss, callgrind,
 * bench_engine mix48 LRU).
 */
void region__install_locked(struct region *r, struct stripe *s, struct entry *e,
			    uint64_t hash, uint64_t now, size_t max)
{
	uint64_t charge = region__entry_charge(e);

	make_room_locked(r, s, true, charge, max, NULL);
	if (table_work_locked(s))
		region__migrate_step_locked(s);
	e->install_ms = now;
	atomic_store_explicit(&e->access_ms, now, memory_order_relaxed);
	e->gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
	/* no longer fresh (published below by the release push) */
	atomic_store_explicit(&e->dead, 0, memory_order_relaxed);
	s->nentries++;
	s->bytes += charge;
	s->ops->insert_locked(s, e);
	push_locked(atomic_load_explicit(&s->tab, memory_order_relaxed), e,
		    hash);
}

void region__stripe_invalidate_all_locked(struct stripe *s)
{
	region__assert_wrlocked(s);
	atomic_store_explicit(
		&s->gen,
		atomic_load_explicit(&s->gen, memory_order_relaxed) + 1,
		memory_order_release);
	s->stale_n = s->nentries;
	s->stale_bytes = s->bytes;
	s->stale_pos = 0;
}
