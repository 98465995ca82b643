/*
 * bench_hit.c - hit throughput of a warm region vs. the "convoy and
 * photocopy" design of seed 000.
 *
 * Usage: bench_hit [SECONDS_PER_RUN] (default 0.5).
 *
 * A region (no limit is reached) is warmed, then 1 and 2 threads look up
 * random keys (pre-drawn, so drawing costs nothing) for a fixed time:
 * region_get() + touch one byte + region_value_unref(). The baseline, in
 * the same run, is the same hash function and chained table behind one
 * region-wide pthread mutex, copying the value out under the lock (malloc
 * + memcpy, freed by the reader), as a store-by-value cache guarded by
 * one lock does. Two working sets: 10,000 keys with 1 KiB values (10 MB:
 * every hit misses the CPU caches twice, for the entry and the value) and
 * 256 keys with 64-byte values (cache resident: the path's own cost).
 * Prints ops/s, ns/op and ratios; asserts nothing.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region_int.h" /* region__hash: the baseline uses the same one */
#include "testlib.h"

#define MAX_KEYS  10000
#define MAX_VALUE 1024
#define NDRAWS	  (1 << 16)
#define NBUCKETS  16384

static char keys[MAX_KEYS][16];
static size_t klens[MAX_KEYS];
static unsigned nkeys;
static size_t value_len;
static double run_seconds = 0.5;

/* ---- the baseline: one mutex, copy out ---------------------------- */

struct base_node {
	struct base_node *next;
	uint64_t hash;
	size_t klen, vlen;
	char key[16];
	unsigned char val[];
};

static struct {
	pthread_mutex_t lock;
	struct base_node *buckets[NBUCKETS];
} base = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void base_put(const char *key, size_t klen)
{
	struct base_node *n = calloc(1, sizeof(*n) + value_len);

	n->hash = region__hash(key, klen);
	n->klen = klen;
	n->vlen = value_len;
	memcpy(n->key, key, klen);
	memset(n->val, 'v', value_len);
	n->next = base.buckets[n->hash & (NBUCKETS - 1)];
	base.buckets[n->hash & (NBUCKETS - 1)] = n;
}

static void base_clear(void)
{
	struct base_node *n, *next;
	size_t i;

	for (i = 0; i < NBUCKETS; i++) {
		for (n = base.buckets[i]; n; n = next) {
			next = n->next;
			free(n);
		}
		base.buckets[i] = NULL;
	}
}

/* Returns a malloc'd copy of the value, or NULL. */
static unsigned char *base_get(const char *key, size_t klen, size_t *len)
{
	uint64_t h = region__hash(key, klen);
	unsigned char *copy = NULL;
	struct base_node *n;

	pthread_mutex_lock(&base.lock);
	for (n = base.buckets[h & (NBUCKETS - 1)]; n; n = n->next) {
		if (n->hash == h && n->klen == klen &&
		    memcmp(n->key, key, klen) == 0) {
			copy = malloc(n->vlen);
			if (copy)
				memcpy(copy, n->val, n->vlen);
			*len = n->vlen;
			break;
		}
	}
	pthread_mutex_unlock(&base.lock);
	return copy;
}

/* ---- the runs --------------------------------------------------------- */

struct runner {
	struct region *r; /* NULL: the baseline */
	unsigned seed;
	pthread_barrier_t *start;
	uint64_t ops;
	uint64_t sink;
	pthread_t tid;
};

static void *runner_main(void *arg)
{
	struct runner *ru = arg;
	uint32_t *draws = malloc(NDRAWS * sizeof(*draws));
	uint64_t s = ru->seed;
	struct region_value *v;
	struct region_flight *fl;
	uint64_t ops = 0, sink = 0;
	double end;
	size_t i;

	for (i = 0; i < NDRAWS; i++)
		draws[i] = (uint32_t)tl_rand_below(&s, nkeys);
	pthread_barrier_wait(ru->start);
	end = tl_now_s() + run_seconds;
	do {
		for (i = 0; i < 4096; i++) {
			uint32_t k = draws[(ops + i) & (NDRAWS - 1)];

			if (ru->r) {
				region_get(ru->r, keys[k], klens[k], &v, &fl);
				sink += ((const unsigned char *)
						 region_value_data(v))[0];
				region_value_unref(v);
			} else {
				size_t len;
				unsigned char *c =
					base_get(keys[k], klens[k], &len);

				sink += c[0];
				free(c);
			}
		}
		ops += 4096;
	} while (tl_now_s() < end);
	ru->ops = ops;
	ru->sink = sink;
	free(draws);
	return NULL;
}

static double run(struct region *r, int nthreads)
{
	struct runner ru[2];
	pthread_barrier_t start;
	double t0, dt;
	uint64_t ops = 0;
	int i;

	pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
	for (i = 0; i < nthreads; i++) {
		ru[i] = (struct runner){
			.r = r, .seed = 12345u + (unsigned)i, .start = &start};
		pthread_create(&ru[i].tid, NULL, runner_main, &ru[i]);
	}
	pthread_barrier_wait(&start);
	t0 = tl_now_s();
	for (i = 0; i < nthreads; i++) {
		pthread_join(ru[i].tid, NULL);
		ops += ru[i].ops;
	}
	dt = tl_now_s() - t0;
	pthread_barrier_destroy(&start);
	return (double)ops / dt;
}

static struct region *warm_region(enum region_strategy strategy,
				  uint64_t ttl_ms, unsigned nstripes)
{
	struct region_limits lim = {
		.nstripes = nstripes, .strategy = strategy, .ttl_ms = ttl_ms};
	unsigned char *buf = malloc(value_len);
	struct region_value *proto, *v;
	struct region_flight *fl;
	struct region *r;
	int i;

	if (region_create("hit", &lim, &r))
		exit(1);
	memset(buf, 'v', value_len);
	for (i = 0; i < (int)nkeys; i++) {
		region_get(r, keys[i], klens[i], &v, &fl);
		proto = region_value_create(buf, value_len);
		region_flight_done(r, fl, 0, proto, &v);
		region_value_unref(v);
	}
	free(buf);
	return r;
}

static void report(const char *name, double base1, double base2,
		   struct region *r)
{
	double one = run(r, 1), two = run(r, 2);
	struct region_stats st;

	region_stats(r, &st);
	printf("%-34s %10.0f %7.1f %6.1fx %10.0f %7.1f %6.1fx  %5.2f\n", name,
	       one, 1e9 / one, one / base1, two, 2e9 / two, two / base2,
	       two / one);
	if (st.misses != nkeys)
		printf("  (unexpected misses: %" PRIu64 ")\n", st.misses);
}

static void bench_set(unsigned n, size_t vlen)
{
	struct region *r;
	double b1, b2;
	unsigned i;

	nkeys = n;
	value_len = vlen;
	for (i = 0; i < nkeys; i++)
		base_put(keys[i], klens[i]);
	b1 = run(NULL, 1);
	b2 = run(NULL, 2);
	base_clear();
	printf("\nwarm hits, %u keys, %zu-byte values, %.1f s per run\n", nkeys,
	       value_len, run_seconds);
	printf("%-34s %10s %7s %7s %10s %7s %7s  %5s\n", "", "1 thr op/s",
	       "ns/op", "vs base", "2 thr op/s", "ns/op", "vs base", "2t/1t");
	printf("%-34s %10.0f %7.1f %6.1fx %10.0f %7.1f %6.1fx  %5.2f\n",
	       "baseline: 1 mutex + copy", b1, 1e9 / b1, 1.0, b2, 2e9 / b2, 1.0,
	       b2 / b1);
	r = warm_region(REGION_STRATEGY_LRU, 0, 16);
	report("region LRU, 16 stripes", b1, b2, r);
	region_unref(r);
	r = warm_region(REGION_STRATEGY_S3FIFO, 0, 16);
	report("region S3FIFO, 16 stripes", b1, b2, r);
	region_unref(r);
	r = warm_region(REGION_STRATEGY_S3FIFO, 3600 * 1000, 16);
	report("region S3FIFO, 16 stripes, ttl", b1, b2, r);
	region_unref(r);
	r = warm_region(REGION_STRATEGY_LRU, 0, 1);
	report("region LRU, 1 stripe", b1, b2, r);
	region_unref(r);
}

int main(int argc, char **argv)
{
	int i;

	if (argc > 1)
		run_seconds = atof(argv[1]);
	region__hash_init();
	for (i = 0; i < MAX_KEYS; i++)
		klens[i] = (size_t)snprintf(keys[i], sizeof(keys[i]), "key%05d",
					    i);
	bench_set(MAX_KEYS, MAX_VALUE);
	bench_set(256, 64);
	return 0;
}
