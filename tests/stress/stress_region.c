/*
 * stress_region.c - many threads on a few stripes and a few keys.
 *
 * Threads mix reads (region_fetch and the two-phase get/done, with loads
 * that sometimes fail), writes (E1, commit, E2 on a simulated database),
 * bulk outside changes (commit all, region_invalidate_all), sweeps, live
 * limit changes, region_contains and region_stats, over 16 keys on 4
 * stripes with tight quotas, a ttl and a tti on a shared fake clock, for a
 * fixed number of operations. Run under TSan and ASan in CI.
 *
 * Invariants checked on every operation:
 * - a value returned for a key carries that key (no mix-up between keys
 *   or with freed memory), and values held across other operations keep
 *   their bytes;
 * - the stale-put guard: a read that starts after a write's E2 returned
 *   never sees a version older than that write's (the database keeps a
 *   version per key; done[k] is the newest version whose E2 completed);
 * - gauges never exceed the larger of the two limit sets in use.
 * At the end: gets == hits + misses, no flight left, and after a final
 * sweep the region is within its limits.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region.h"
#include "testlib.h"

#define NTHREADS 4
#define NOPS	 20000
#define NKEYS	 16
#define NHELD	 4

struct val {
	char key[8];
	uint64_t version;
	unsigned char fill; /* repeated to the value's end */
};

static atomic_uint_fast64_t db[NKEYS];	 /* committed version */
static atomic_uint_fast64_t done[NKEYS]; /* newest version past its E2 */
static atomic_uint_fast64_t fake_ms;
static struct region_limits lim_a, lim_b;

#define FAIL(...) tl_report(__VA_ARGS__)

static uint64_t clock_fn(void)
{
	return atomic_load_explicit(&fake_ms, memory_order_relaxed);
}

static void key_of(int k, char key[8])
{
	memset(key, 0, 8);
	snprintf(key, 8, "key%02d", k);
}

static struct region_value *make_value(int k, uint64_t version)
{
	size_t len = sizeof(struct val) + (version * 7 + (unsigned)k) % 200;
	unsigned char *buf = malloc(len);
	struct val h;

	if (!buf)
		return NULL;
	key_of(k, h.key);
	h.version = version;
	h.fill = (unsigned char)(k * 16 + version);
	memcpy(buf, &h, sizeof(h));
	memset(buf + sizeof(h), h.fill, len - sizeof(h));
	return region_value_adopt(buf, len);
}

/* Checks v is a well-formed value of key k; returns its version. */
static uint64_t check_value(const struct region_value *v, int k)
{
	const unsigned char *p = region_value_data(v);
	size_t len = region_value_len(v), i;
	char key[8];
	struct val h;

	if (len < sizeof(h)) {
		FAIL("short value for key %d", k);
		return 0;
	}
	memcpy(&h, p, sizeof(h));
	key_of(k, key);
	if (memcmp(h.key, key, 8) != 0)
		FAIL("value of %.8s served for %s", h.key, key);
	for (i = sizeof(h); i < len; i++) {
		if (p[i] != h.fill) {
			FAIL("value of %s corrupted at %zu", key, i);
			break;
		}
	}
	return h.version;
}

static int load(void *ctx, const void *key, size_t klen,
		struct region_value **out)
{
	unsigned *seed = ctx;
	int k = atoi((const char *)key + 3);

	(void)klen;
	if (rand_r(seed) % 20 == 0) {
		*out = NULL;
		return rand_r(seed) % 2 ? -EIO : -ENOENT;
	}
	*out = make_value(k, atomic_load(&db[k]));
	return *out ? 0 : -ENOMEM;
}

static void store_max(atomic_uint_fast64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load(a);

	while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

struct worker {
	struct region *r;
	unsigned seed;
	struct region_value *held[NHELD];
	int held_key[NHELD];
};

static void check_read(struct worker *w, int k, uint64_t floor, int rc,
		       struct region_value *v)
{
	uint64_t ver;
	int slot;

	if (rc == -EIO || rc == -ENOENT)
		return;
	if (rc != 0 || !v) {
		FAIL("read of key %d failed: %d", k, rc);
		return;
	}
	ver = check_value(v, k);
	if (ver < floor)
		FAIL("key %d: version %" PRIu64 " after E2 of %" PRIu64, k, ver,
		     floor);
	/* keep it pinned for a while, check it again on release */
	slot = rand_r(&w->seed) % NHELD;
	if (w->held[slot])
		check_value(w->held[slot], w->held_key[slot]);
	region_value_unref(w->held[slot]);
	w->held[slot] = region_value_ref(v);
	w->held_key[slot] = k;
}

static void op_fetch(struct worker *w, int k, const char *key)
{
	uint64_t floor = atomic_load(&done[k]);
	struct region_value *v = NULL;
	int rc;

	rc = region_fetch(w->r, key, 8, load, &w->seed, &v);
	check_read(w, k, floor, rc, v);
	region_value_unref(v);
}

static void op_two_phase(struct worker *w, int k, const char *key)
{
	uint64_t floor = atomic_load(&done[k]);
	struct region_value *v = NULL, *lv = NULL;
	struct region_flight *fl;
	int rc;

	rc = region_get(w->r, key, 8, &v, &fl);
	if (rc == REGION_LOAD) {
		rc = load(&w->seed, key, 8, &lv);
		rc = region_flight_done(w->r, fl, rc, lv, &v);
	}
	check_read(w, k, floor, rc, v);
	region_value_unref(v);
}

static void op_write(struct worker *w, int k, const char *key)
{
	uint64_t ver;

	region_invalidate(w->r, key, 8, REGION_ORIGIN_LOCAL); /* E1 */
	ver = atomic_fetch_add(&db[k], 1) + 1;		      /* commit */
	region_invalidate(w->r, key, 8, REGION_ORIGIN_LOCAL); /* E2 */
	store_max(&done[k], ver);
}

static void op_outside_bulk(struct worker *w)
{
	uint64_t ver[NKEYS];
	int k;

	for (k = 0; k < NKEYS; k++)
		ver[k] = atomic_fetch_add(&db[k], 1) + 1;
	region_invalidate_all(w->r, REGION_ORIGIN_OUTSIDE);
	for (k = 0; k < NKEYS; k++)
		store_max(&done[k], ver[k]);
}

static void op_stats(struct worker *w)
{
	uint64_t max_e = lim_a.max_entries > lim_b.max_entries
				 ? lim_a.max_entries
				 : lim_b.max_entries;
	uint64_t max_b = lim_a.max_bytes > lim_b.max_bytes ? lim_a.max_bytes
							   : lim_b.max_bytes;
	struct region_stats st;

	region_stats(w->r, &st);
	if (st.entries > max_e || st.bytes > max_b)
		FAIL("over limits: %" PRIu64 " entries, %" PRIu64 " bytes",
		     st.entries, st.bytes);
	if (st.hits > st.gets)
		FAIL("hits > gets");
}

/* Reads of 4 hot keys: more hits, more coalescing. */
static void op_hot(struct worker *w, int k)
{
	char key[8];

	key_of(k, key);
	op_fetch(w, k, key);
}

static void one_op(struct worker *w)
{
	int k = rand_r(&w->seed) % NKEYS, dice = rand_r(&w->seed) % 1000;
	char key[8];

	key_of(k, key);
	if (dice < 500)
		op_fetch(w, k, key);
	else if (dice < 650)
		op_two_phase(w, k, key);
	else if (dice < 710)
		op_write(w, k, key);
	else if (dice < 712)
		op_outside_bulk(w);
	else if (dice < 760)
		region_sweep(w->r, 1 + (size_t)rand_r(&w->seed) % 8);
	else if (dice < 770)
		region_set_limits(w->r, dice % 2 ? &lim_a : &lim_b);
	else if (dice < 800)
		(void)region_contains(w->r, key, 8);
	else if (dice < 820)
		op_stats(w);
	else if (dice < 920)
		atomic_fetch_add(&fake_ms, 1);
	else
		op_hot(w, k % 4);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < NOPS; i++)
		one_op(w);
	for (i = 0; i < NHELD; i++) {
		if (w->held[i])
			check_value(w->held[i], w->held_key[i]);
		region_value_unref(w->held[i]);
	}
	return NULL;
}

static void final_checks(struct region *r)
{
	struct region_stats st;
	int rounds = 0;

	if (region_set_limits(r, &lim_b))
		FAIL("set_limits refused");
	while (region_sweep(r, 64) > 0 && rounds < 1000)
		rounds++;
	region_stats(r, &st);
	if (st.entries > lim_b.max_entries || st.bytes > lim_b.max_bytes)
		FAIL("after sweep: %" PRIu64 " entries, %" PRIu64 " bytes",
		     st.entries, st.bytes);
	if (st.gets != st.hits + st.misses)
		FAIL("gets %" PRIu64 " != hits %" PRIu64 " + misses %" PRIu64,
		     st.gets, st.hits, st.misses);
	if (st.flights != 0)
		FAIL("%" PRIu64 " flights left", st.flights);
	printf("  gets %" PRIu64 " hits %" PRIu64 " coalesced %" PRIu64
	       " loads %" PRIu64 " stale_puts_rejected %" PRIu64
	       " evictions size/ttl/tti %" PRIu64 "/%" PRIu64 "/%" PRIu64 "\n",
	       st.gets, st.hits, st.coalesced, st.loads, st.stale_puts_rejected,
	       st.evictions_size, st.evictions_ttl, st.evictions_tti);
}

static void run(enum region_strategy strategy, unsigned seed)
{
	struct worker w[NTHREADS];
	pthread_t tid[NTHREADS];
	struct region *r;
	int i;

	lim_a = (struct region_limits){
		.max_entries = 12,
		.max_bytes = 8000,
		.max_value_size = 300,
		.ttl_ms = 40,
		.tti_ms = 8,
		.nstripes = 4,
		.strategy = strategy,
	};
	lim_b = lim_a;
	lim_b.max_entries = 6;
	lim_b.max_bytes = 5000;
	lim_b.ttl_ms = 0;
	if (region_create("stress", &lim_a, &r)) {
		FAIL("region_create");
		return;
	}
	memset(w, 0, sizeof(w));
	for (i = 0; i < NTHREADS; i++) {
		w[i].r = r;
		w[i].seed = seed + (unsigned)i * 7919u;
		if (pthread_create(&tid[i], NULL, worker_main, &w[i]))
			FAIL("pthread_create");
	}
	for (i = 0; i < NTHREADS; i++)
		pthread_join(tid[i], NULL);
	printf("%s:\n", strategy == REGION_STRATEGY_LRU	     ? "lru"
			: strategy == REGION_STRATEGY_S3FIFO ? "s3fifo"
							     : "tinylfu");
	final_checks(r);
	region_unref(r);
}

int main(int argc, char **argv)
{
	unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 1;

	if (argc > 2 && strcmp(argv[2], "--no-guard") == 0)
		region_test_disable_stale_guard(true); /* to see it fail */

	atomic_store(&fake_ms, 1000);
	region_clock_set(clock_fn);
	run(REGION_STRATEGY_LRU, seed);
	run(REGION_STRATEGY_S3FIFO, seed + 1);
	run(REGION_STRATEGY_TINYLFU, seed + 2);
	region_clock_set(NULL);
	if (tl_reported()) {
		tl_warn("%u failures", tl_reported());
		return 1;
	}
	printf("stress_region: ok\n");
	return 0;
}
