/*
 * epoch.c - epoch-based reclamation for the lock-free read path, and the
 * per-thread value reference cache.
 *
 * Readers (region_get, region_contains) walk a stripe's hash chains
 * without a lock. Writers unlink entries under the stripe lock and retire
 * them; a retired entry (or table) is freed only once no reader can still
 * be looking at it. The classic three-epoch scheme (Fraser, "Practical
 * lock-freedom", 2004; as in crossbeam-epoch):
 * - one global epoch E;
 * - each thread has a record (on its own cache line) holding 0 when
 *   outside a read section, or (epoch << 1) | 1 when inside one. Entering
 *   publishes the epoch with a sequentially consistent exchange on the
 *   thread's own line: no cache line shared with other readers is written.
 *   (The asymmetric alternative, a plain store here and membarrier() in
 *   the writer as in liburcu's "memb" flavour, was tried: on our VM one
 *   membarrier() costs ~30 us of IPIs, and rate-limiting it made the
 *   retired batches large and cold, which cost more than the exchange);
 * - E advances to E + 1 only when every thread inside a section entered
 *   at E (region__epoch_try_advance(), called by writers, scanning the
 *   records);
 * - something unlinked while E was e may still be seen by sections that
 *   entered at e or e - 1, so it is freed once E >= e + 2.
 * Records are allocated on a thread's first section, kept in one global
 * list forever and reused after the thread exits (a key destructor marks
 * them free), so the scan never races with a free.
 *
 * The value reference cache. A hit hands out a value reference, and one
 * atomic increment per hit on the value's count is exactly the shared
 * read-modify-write that makes hot keys bounce between cores. So each
 * thread keeps a small direct-mapped cache of values it has recently
 * handed out; for each it holds VREF_BIAS references in the shared count,
 * taken with one atomic add, and counts locally how many of them it has
 * handed out (used). A hit on a cached value increments used; an unref by
 * the same thread of a cached value decrements it. An unref by another
 * thread is a plain atomic decrement, which consumes part of the holder's
 * bias. When a slot is replaced (or the thread exits) the thread returns
 * the bias it has not handed out: VREF_BIAS - used. So the shared count is
 * always true_count + sum over caching threads of (VREF_BIAS - used), and
 * since used stays below VREF_BIAS it cannot reach zero while any thread
 * caches the value. Only values up to VREF_MAX_LEN bytes are cached, and a
 * thread caches at most VREF_SLOTS of them, which bounds what an idle
 * thread keeps alive after their entries left the cache (documented in
 * region.h).
 */
#include <pthread.h>
#include <stdlib.h>

#include "region_int.h"

#if REGION_SPARE_ASAN
#include <sanitizer/asan_interface.h>
#endif

#if defined(__SANITIZE_THREAD__)
#define EPOCH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EPOCH_TSAN 1
#endif
#endif
#ifndef EPOCH_TSAN
#define EPOCH_TSAN 0
#endif

atomic_uint_fast64_t region__global_epoch = 2;
atomic_uint region__epoch_nrecs; /* records ever allocated */
static _Atomic(struct region__epoch_rec *) recs;
static pthread_mutex_t recs_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
__thread struct region__epoch_rec *region__my_rec
	__attribute__((tls_model("initial-exec")));

#define VREF_SLOTS   REGION_VREF_SLOTS
#define VREF_BIAS    REGION_VREF_BIAS
#define VREF_MAX_LEN 4096

__thread struct region__vref_slot region__vcache[REGION_VREF_SLOTS]
	__attribute__((tls_model("initial-exec")));
__thread unsigned region__vcache_tick
	__attribute__((tls_model("initial-exec")));

__thread struct region__spares region__spares
	__attribute__((tls_model("initial-exec")));

static void vcache_flush(void);
static void spares_free(struct region__epoch_rec *rec);

static void thread_exit(void *arg)
{
	struct region__epoch_rec *rec = arg;

	vcache_flush();
	if (rec) {
		atomic_store_explicit(&rec->state, 0, memory_order_release);
		atomic_store_explicit(&rec->in_use, false,
				      memory_order_release);
	}
	spares_free(rec);
	region__my_rec = NULL; /* no more spares from here on */
}

static void key_init(void)
{
	pthread_key_create(&thread_key, thread_exit);
}

struct region__epoch_rec *region__epoch_rec_acquire(void)
{
	struct region__epoch_rec *rec;

	pthread_once(&key_once, key_init);
	pthread_mutex_lock(&recs_mu);
	for (rec = atomic_load(&recs); rec; rec = rec->next) {
		if (!atomic_load(&rec->in_use))
			break;
	}
	if (!rec) {
		rec = aligned_alloc(REGION_CACHELINE, sizeof(*rec));
		if (!rec)
			abort(); /* a few bytes once per thread */
		atomic_init(&rec->state, 0);
		atomic_init(&rec->spare_bytes, 0);
		rec->next = atomic_load(&recs);
		atomic_init(&rec->in_use, true);
		atomic_store(&recs, rec);
		atomic_fetch_add(&region__epoch_nrecs, 1);
	}
	atomic_store(&rec->in_use, true);
	rec->depth = 0;
	pthread_mutex_unlock(&recs_mu);
	pthread_setspecific(thread_key, rec);
	region__my_rec = rec;
	return rec;
}

uint64_t region__epoch_stamp(void)
{
	/*
	 * A full fence, then a load: the same StoreLoad order as a
	 * read-modify-write of the epoch, without taking its line exclusive
	 * (every reader loads it on every hit; an RMW per retiring lock hold
	 * made it bounce between all cores under a write-heavy mix).
	 */
#if EPOCH_TSAN
	/* TSan does not model standalone fences (gcc warns): the RMW */
	return atomic_fetch_add_explicit(&region__global_epoch, 0,
					 memory_order_seq_cst);
#else
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&region__global_epoch,
				    memory_order_relaxed);
#endif
}

uint64_t region__epoch_try_advance(void)
{
	struct region__epoch_rec *rec;
	uint64_t e = atomic_load_explicit(&region__global_epoch,
					  memory_order_seq_cst);

	for (rec = atomic_load_explicit(&recs, memory_order_acquire); rec;
	     rec = rec->next) {
		uint64_t st =
			atomic_load_explicit(&rec->state, memory_order_seq_cst);

		if ((st & 1) && (st >> 1) != e)
			return e; /* a section from an older epoch */
	}
	atomic_compare_exchange_strong(&region__global_epoch, &e, e + 1);
	return atomic_load_explicit(&region__global_epoch,
				    memory_order_seq_cst);
}

/* ---- the value reference cache ----------------------------------------- */

static void vslot_release(struct region__vref_slot *sl)
{
	struct region_value *v = sl->v;
	unsigned give = VREF_BIAS - sl->used;

	sl->v = NULL;
	sl->used = 0;
	if (atomic_fetch_sub_explicit(&v->refs, give, memory_order_acq_rel) ==
	    give)
		region__value_free(v);
}

void region__vcache_flush(void)
{
	vcache_flush();
}

static void vcache_flush(void)
{
	unsigned i;

	for (i = 0; i < VREF_SLOTS; i++) {
		if (region__vcache[i].v)
			vslot_release(&region__vcache[i]);
	}
}

struct region_value *region__value_ref_hit_slow(struct region_value *v)
{
	struct region__vref_slot *sl = region__vslot_of(v);

	/* cheapest test first: the value's header is another line */
	/* the inline part did the tick when the slot held another value */
	if (sl->v == v || region__vlen(v) > VREF_MAX_LEN)
		return region__value_ref(v); /* no slot: a plain reference */
	if (region__unlikely(!region__my_rec))
		region__epoch_rec_acquire(); /* the key destructor returns the biases */
	if (sl->v)
		vslot_release(sl);
	atomic_fetch_add_explicit(&v->refs, VREF_BIAS, memory_order_relaxed);
	sl->v = v;
	sl->used = 1;
	return v;
}

/* ---- spare blocks ------------------------------------------------------- */

void region__spare_poison(void *p, size_t len, bool poison)
{
#if REGION_SPARE_ASAN
	/*
	 * Word 0, the link to the next spare, stays addressable: LeakSanitizer
	 * ignores pointers held in poisoned words, so every spare after the
	 * first of its class was reported leaked (fuzz_fuse found it).
	 */
	if (poison)
		ASAN_POISON_MEMORY_REGION((char *)p + sizeof(void *),
					  len - sizeof(void *));
	else
		ASAN_UNPOISON_MEMORY_REGION(p, len);
#else
	(void)p;
	(void)len;
	(void)poison;
#endif
}

static void spares_free(struct region__epoch_rec *rec)
{
	size_t c, b;
	void *p, *next;

	if (!region__spares.bytes)
		return;
	for (c = 0; c < REGION_SPARE_CLASSES; c++) {
		b = region__spare_bytes(c);
		for (p = region__spares.head[c]; p; p = next) {
			region__spare_poison(p, b, false);
			memcpy(&next, p, sizeof(next));
			free(p);
		}
		region__spares.head[c] = NULL;
	}
	region__spares_set(rec, 0); /* spares were kept with this record */
}

void region__spares_flush(void)
{
	spares_free(region__my_rec);
}

uint64_t region__spares_bytes(void)
{
	struct region__epoch_rec *rec;
	uint64_t sum = 0;

	for (rec = atomic_load_explicit(&recs, memory_order_acquire); rec;
	     rec = rec->next)
		sum += atomic_load_explicit(&rec->spare_bytes,
					    memory_order_relaxed);
	return sum;
}
