/*
 * bench_engine.c - the engine's hit path against the simplest alternative.
 *
 * Usage: bench_engine [SECONDS_PER_CELL] [THREADS,...] [WORKLOAD,...]
 * (defaults 0.3, 1,2,4,8,48 and zipf,mix48,mix2,roles). The region's
 * policy is LRU, or the one named by BENCH_STRATEGY (lru, s3fifo,
 * tinylfu).
 *
 * The reference, written here: one pthread mutex around a chained hash
 * table (same hash function) with an exact LRU list, returning a pointer
 * to the stored value and copying nothing (it reads one byte of the value
 * under the lock, since the pointer is not safe after the unlock). The
 * engine: region_borrow() + read one byte + region_borrow_end() (the API
 * for a reader that does not keep the value), or with BENCH_READ=get
 * region_get() + read one byte + region_value_unref().
 *
 * Workloads, each at every thread count, regionfs and the reference
 * interleaved in one run, 3 reps, medians:
 * - zipf: 1M keys (16 bytes), 100-byte values, all cached (no limit),
 *   read-only, keys drawn Zipf(0.99) (pre-drawn, shared table, each thread
 *   starts at its own offset).
 * - mix48 / mix2: seed 003's mix, readers:writers:removers 48:6:4 and
 *   2:1:1 as per-operation odds in every thread, 50,000 keys drawn
 *   uniformly, capacity 512 (constant eviction). A read that misses loads
 *   (makes a value: the reference mallocs and fills it, regionfs fills
 *   the one region_flight_value() gives it in its entry's block) and
 *   installs it, as cache-aside does; a write replaces
 *   the key's value (regionfs: region_invalidate() then install through a
 *   flight, which is how fs/ writes); a remove drops the key.
 * - roles: the same mix as mix48 but with seed 003's fixed roles, 48
 *   reader, 6 writer and 4 remover threads: prints reads/s and the
 *   readers' share of all operations (a writer-preferring lock starves
 *   the readers: issue 8 measured 2.2 %), read_share_*_roles and
 *   ratio_reads_roles.
 * Prints one line per cell and name=value lines at the end:
 *   ops_<impl>_<workload>_t<N>, ratio_<workload>_t<N> (regionfs/reference,
 *   ops/s), cpu_ratio_<workload>_t<N> (reference/regionfs CPU time per
 *   operation: on a shared VM wall-clock ratios mostly measure the other
 *   tenants), cpu_ns_per_hit_{regionfs,reference} (zipf, 1 thread, thread
 *   CPU time). Asserts nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "region_int.h" /* region__hash: the reference uses the same one */
#include "testlib.h"

#define ZIPF_KEYS   1000000u
#define MIX_KEYS    50000u
#define MIX_CAP	    512u
#define VALUE_LEN   100u
#define NDRAWS	    (1u << 22)
#define BATCH	    1024u
#define REPS	    3
#define MAX_THREADS 64

static char (*keys)[16];
static uint32_t *zipf_draws; /* NDRAWS keys */
static uint32_t *unif_draws; /* NDRAWS keys < MIX_KEYS */
static double cell_seconds = 0.3;
static unsigned char value_buf[VALUE_LEN];

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * The operations are kept out of line, so that a profiler counts each one
 * inclusively (valgrind --tool=callgrind: instructions per call).
 */
#define BENCH_OP __attribute__((noinline))

/* ---- the reference: one mutex, hash table, exact LRU ------------------ */

struct ref_node {
	struct ref_node *hnext;
	struct ref_node *prev, *next; /* LRU, head = most recent */
	uint64_t hash;
	size_t klen;
	char key[16];
	unsigned char *val;
	size_t vlen;
};

static struct {
	pthread_mutex_t lock;
	struct ref_node **buckets;
	size_t mask;
	struct ref_node lru; /* sentinel */
	size_t n, cap;	     /* cap 0 = unlimited */
} ref = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void ref_lru_del(struct ref_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
}

static void ref_lru_head(struct ref_node *n)
{
	n->next = ref.lru.next;
	n->prev = &ref.lru;
	ref.lru.next->prev = n;
	ref.lru.next = n;
}

static void ref_init(size_t nbuckets, size_t cap)
{
	ref.buckets = calloc(nbuckets, sizeof(*ref.buckets));
	ref.mask = nbuckets - 1;
	ref.lru.next = ref.lru.prev = &ref.lru;
	ref.n = 0;
	ref.cap = cap;
}

static void ref_free_node(struct ref_node *n)
{
	free(n->val);
	free(n);
}

static void ref_fini(void)
{
	struct ref_node *n, *next;

	for (n = ref.lru.next; n != &ref.lru; n = next) {
		next = n->next;
		ref_free_node(n);
	}
	free(ref.buckets);
	ref.buckets = NULL;
}

static struct ref_node **ref_slot(uint64_t h, const char *key, size_t klen)
{
	struct ref_node **pp = &ref.buckets[h & ref.mask];

	for (; *pp; pp = &(*pp)->hnext) {
		if ((*pp)->hash == h && (*pp)->klen == klen &&
		    memcmp((*pp)->key, key, klen) == 0)
			break;
	}
	return pp;
}

static void ref_unlink(struct ref_node **pp)
{
	struct ref_node *n = *pp;

	*pp = n->hnext;
	ref_lru_del(n);
	ref.n--;
	ref_free_node(n);
}

/* Returns a pointer to the value (valid under the lock only), or NULL. */
static const unsigned char *ref_get_locked(const char *key, size_t klen)
{
	uint64_t h = region__hash(key, klen);
	struct ref_node *n = *ref_slot(h, key, klen);

	if (!n)
		return NULL;
	ref_lru_del(n);
	ref_lru_head(n);
	return n->val;
}

/* Inserts or replaces; takes val over. Lock held. */
static void ref_put_locked(const char *key, size_t klen, unsigned char *val)
{
	uint64_t h = region__hash(key, klen);
	struct ref_node **pp = ref_slot(h, key, klen), *n;

	if (*pp)
		ref_unlink(pp);
	while (ref.cap && ref.n >= ref.cap) {
		struct ref_node *t = ref.lru.prev;

		ref_unlink(ref_slot(t->hash, t->key, t->klen));
	}
	n = malloc(sizeof(*n));
	n->hash = h;
	n->klen = klen;
	memcpy(n->key, key, klen);
	n->val = val;
	n->vlen = VALUE_LEN;
	n->hnext = ref.buckets[h & ref.mask];
	ref.buckets[h & ref.mask] = n;
	ref_lru_head(n);
	ref.n++;
}

BENCH_OP static void ref_remove(const char *key, size_t klen)
{
	uint64_t h = region__hash(key, klen);
	struct ref_node **pp;

	pthread_mutex_lock(&ref.lock);
	pp = ref_slot(h, key, klen);
	if (*pp)
		ref_unlink(pp);
	pthread_mutex_unlock(&ref.lock);
}

static unsigned char *make_value(void)
{
	unsigned char *v = malloc(VALUE_LEN);

	memcpy(v, value_buf, VALUE_LEN);
	return v;
}

/* A read: hit, or load + install (cache-aside). Returns one byte. */
BENCH_OP static unsigned ref_read(const char *key, size_t klen, uint64_t *hits)
{
	const unsigned char *p;
	unsigned b;

	pthread_mutex_lock(&ref.lock);
	p = ref_get_locked(key, klen);
	b = p ? p[0] : 0;
	pthread_mutex_unlock(&ref.lock);
	if (p) {
		(*hits)++;
		return b;
	}
	/* the load happens outside the lock */
	unsigned char *v = make_value();

	b = v[0];
	pthread_mutex_lock(&ref.lock);
	ref_put_locked(key, klen, v);
	pthread_mutex_unlock(&ref.lock);
	return b;
}

BENCH_OP static void ref_write(const char *key, size_t klen)
{
	unsigned char *v = make_value();

	pthread_mutex_lock(&ref.lock);
	ref_put_locked(key, klen, v);
	pthread_mutex_unlock(&ref.lock);
}

/* ---- regionfs ---------------------------------------------------------- */

static struct region *reg;

/* The load: made in place for the flight (region_flight_value()), as
 * the reference's make_value() mallocs and fills its node's value. */
static struct region_value *rfs_make_value(struct region_flight *fl)
{
	void *p;
	struct region_value *v = region_flight_value(fl, VALUE_LEN, &p);

	if (v)
		memcpy(p, value_buf, VALUE_LEN);
	return v;
}

static bool read_by_ref; /* BENCH_READ=get: region_get() + unref */

BENCH_OP static unsigned rfs_read(const char *key, size_t klen, uint64_t *hits)
{
	struct region_value *v = NULL, *out = NULL;
	struct region_flight *fl;
	struct region_borrow bw;
	unsigned b = 0;
	int rc;

	if (read_by_ref) {
		rc = region_get(reg, key, klen, &v, &fl);
		if (rc == REGION_HIT) {
			(*hits)++;
			b = ((const unsigned char *)region_value_data(v))[0];
			region_value_unref(v);
			return b;
		}
	} else {
		rc = region_borrow(reg, key, klen, &bw, &fl);
		if (rc == REGION_HIT) {
			(*hits)++;
			b = ((const unsigned char *)region_value_data(bw.v))[0];
			region_borrow_end(&bw);
			return b;
		}
	}
	if (rc == REGION_LOAD) {
		v = rfs_make_value(fl);
		if (region_flight_done(reg, fl, v ? 0 : -ENOMEM, v, &out) == 0)
			b = ((const unsigned char *)region_value_data(out))[0];
		region_value_unref(out);
	}
	return b;
}

BENCH_OP static void rfs_write(const char *key, size_t klen)
{
	struct region_value *v = NULL, *out = NULL;
	struct region_flight *fl;

	region_invalidate(reg, key, klen, REGION_ORIGIN_LOCAL);
	if (region_get(reg, key, klen, &v, &fl) == REGION_LOAD) {
		v = rfs_make_value(fl);
		region_flight_done(reg, fl, v ? 0 : -ENOMEM, v, &out);
		region_value_unref(out);
	} else {
		region_value_unref(v); /* a racing read installed it first */
	}
}

BENCH_OP static void rfs_remove(const char *key, size_t klen)
{
	region_invalidate(reg, key, klen, REGION_ORIGIN_LOCAL);
}

/* ---- the runs ----------------------------------------------------------- */

enum workload { W_ZIPF, W_MIX48, W_MIX2, W_ROLES, W__COUNT };
static const char *const wl_name[W__COUNT] = {"zipf", "mix48", "mix2", "roles"};
/* reads, writes, removes out of the sum (roles: per thread, see below) */
static const unsigned wl_odds[W__COUNT][3] = {
	{1, 0, 0}, {48, 6, 4}, {2, 1, 1}, {48, 6, 4}};
#define ROLES_THREADS                                                          \
	58 /* seed 003's cohort: 48 readers, 6 writers, 4 removers */

struct runner {
	bool rfs;
	enum workload wl;
	unsigned idx;
	pthread_barrier_t *start;
	uint64_t ops, hits, sink, reads;
	double cpu;
	pthread_t tid;
};

static void *runner_main(void *arg)
{
	struct runner *ru = arg;
	const unsigned *odds = wl_odds[ru->wl];
	unsigned total = odds[0] + odds[1] + odds[2];
	uint32_t *draws = ru->wl == W_ZIPF ? zipf_draws : unif_draws;
	uint64_t pos = (uint64_t)ru->idx * 7919u * 131u, ops = 0, hits = 0;
	uint64_t sink = 0, rs = 99991u * (ru->idx + 1);
	unsigned char *opsel = malloc(BATCH);
	double end, c0;
	unsigned i;

	for (i = 0; i < BATCH; i++) {
		unsigned x = (unsigned)(splitmix(&rs) % total);

		opsel[i] = x < odds[0] ? 0 : x < odds[0] + odds[1] ? 1 : 2;
		if (ru->wl == W_ROLES) /* a fixed role per thread */
			opsel[i] = ru->idx < 48 ? 0 : ru->idx < 54 ? 1 : 2;
	}
	pthread_barrier_wait(ru->start);
	c0 = tl_cpu_s();
	end = tl_now_s() + cell_seconds;
	do {
		for (i = 0; i < BATCH; i++) {
			const char *k = keys[draws[(pos + i) & (NDRAWS - 1)]];

			switch (opsel[i]) {
			case 0:
				sink += ru->rfs ? rfs_read(k, 16, &hits)
						: ref_read(k, 16, &hits);
				break;
			case 1:
				if (ru->rfs)
					rfs_write(k, 16);
				else
					ref_write(k, 16);
				break;
			default:
				if (ru->rfs)
					rfs_remove(k, 16);
				else
					ref_remove(k, 16);
			}
		}
		pos += BATCH;
		ops += BATCH;
		if (opsel[0] == 0 && ru->wl == W_ROLES)
			ru->reads += BATCH;
	} while (tl_now_s() < end);
	ru->cpu = tl_cpu_s() - c0;
	ru->ops = ops;
	ru->hits = hits;
	ru->sink = sink;
	free(opsel);
	return NULL;
}

struct result {
	double ops_s, cpu_ns_per_hit, cpu_ns_per_op, reads_s, read_share;
};

static struct result run_cell(bool rfs, enum workload wl, unsigned nthreads)
{
	struct runner ru[MAX_THREADS];
	pthread_barrier_t start;
	uint64_t ops = 0, hits = 0, reads = 0;
	double t0, dt, cpu = 0;
	unsigned i;

	if (wl == W_ROLES)
		nthreads = ROLES_THREADS;
	pthread_barrier_init(&start, NULL, nthreads + 1);
	for (i = 0; i < nthreads; i++) {
		ru[i] = (struct runner){
			.rfs = rfs, .wl = wl, .idx = i, .start = &start};
		pthread_create(&ru[i].tid, NULL, runner_main, &ru[i]);
	}
	pthread_barrier_wait(&start);
	t0 = tl_now_s();
	for (i = 0; i < nthreads; i++) {
		pthread_join(ru[i].tid, NULL);
		ops += ru[i].ops;
		hits += ru[i].hits;
		reads += ru[i].reads;
		cpu += ru[i].cpu;
	}
	dt = tl_now_s() - t0;
	pthread_barrier_destroy(&start);
	return (struct result){(double)ops / dt,
			       hits ? cpu * 1e9 / (double)hits : 0,
			       cpu * 1e9 / (double)ops, (double)reads / dt,
			       (double)reads / (double)ops};
}

static void setup(enum workload wl)
{
	struct region_limits lim = {.nstripes = 16,
				    .strategy = REGION_STRATEGY_LRU};
	unsigned i, n = wl == W_ZIPF ? ZIPF_KEYS : MIX_KEYS;
	uint64_t dummy = 0;

	const char *strat = getenv("BENCH_STRATEGY");

	if (strat && strcmp(strat, "s3fifo") == 0)
		lim.strategy = REGION_STRATEGY_S3FIFO;
	if (strat && strcmp(strat, "tinylfu") == 0)
		lim.strategy = REGION_STRATEGY_TINYLFU;
	if (wl != W_ZIPF)
		lim.max_entries = MIX_CAP;
	if (region_create("bench", &lim, &reg)) {
		fprintf(stderr, "region_create failed\n");
		exit(1);
	}
	ref_init(wl == W_ZIPF ? (1u << 20) : (1u << 16),
		 wl == W_ZIPF ? 0 : MIX_CAP);
	if (wl == W_ZIPF) {
		for (i = 0; i < n; i++) {
			rfs_read(keys[i], 16, &dummy);
			ref_read(keys[i], 16, &dummy);
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Seed 003's fixed roles: do readers get their share next to writers? */
static void run_roles(void)
{
	double a[REPS], b[REPS], sa[REPS], sb[REPS];
	unsigned rep;

	for (rep = 0; rep < REPS; rep++) {
		struct result x = run_cell(false, W_ROLES, ROLES_THREADS);
		struct result y = run_cell(true, W_ROLES, ROLES_THREADS);

		a[rep] = x.reads_s;
		sa[rep] = x.read_share;
		b[rep] = y.reads_s;
		sb[rep] = y.read_share;
	}
	qsort(a, REPS, sizeof(double), cmp_double);
	qsort(b, REPS, sizeof(double), cmp_double);
	qsort(sa, REPS, sizeof(double), cmp_double);
	qsort(sb, REPS, sizeof(double), cmp_double);
	printf("roles  48 readers/6 writers/4 removers: reference %11.0f "
	       "reads/s (%.1f%% of ops)  regionfs %11.0f reads/s (%.1f%% of "
	       "ops)  ratio %.2f\n",
	       a[REPS / 2], 100 * sa[REPS / 2], b[REPS / 2], 100 * sb[REPS / 2],
	       b[REPS / 2] / a[REPS / 2]);
	printf("read_share_reference_roles=%.3f\n", sa[REPS / 2]);
	printf("read_share_regionfs_roles=%.3f\n", sb[REPS / 2]);
	printf("ratio_reads_roles=%.2f\n", b[REPS / 2] / a[REPS / 2]);
	fflush(stdout);
}

static void teardown(void)
{
	region_unref(reg);
	reg = NULL;
	ref_fini();
}

static void make_draws(void)
{
	double *cdf = malloc(sizeof(*cdf) * ZIPF_KEYS), sum = 0;
	uint64_t s = 42;
	unsigned i;

	keys = malloc(sizeof(*keys) * ZIPF_KEYS);
	for (i = 0; i < ZIPF_KEYS; i++) {
		char tmp[32];

		snprintf(tmp, sizeof(tmp), "key%013u", i);
		memcpy(keys[i], tmp, 16);
	}
	for (i = 0; i < ZIPF_KEYS; i++) {
		sum += 1.0 / pow((double)(i + 1), 0.99);
		cdf[i] = sum;
	}
	zipf_draws = malloc(sizeof(*zipf_draws) * NDRAWS);
	unif_draws = malloc(sizeof(*unif_draws) * NDRAWS);
	for (i = 0; i < NDRAWS; i++) {
		double u =
			(double)(splitmix(&s) >> 11) / 9007199254740992.0 * sum;
		unsigned lo = 0, hi = ZIPF_KEYS - 1;

		while (lo < hi) {
			unsigned mid = (lo + hi) / 2;

			if (cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		/* scatter ranks over the key space: hot keys not adjacent */
		zipf_draws[i] = (uint32_t)((lo * 2654435761ull) % ZIPF_KEYS);
		unif_draws[i] = (uint32_t)(splitmix(&s) % MIX_KEYS);
	}
	free(cdf);
	memset(value_buf, 'v', sizeof(value_buf));
}

int main(int argc, char **argv)
{
	unsigned threads[16] = {1, 2, 4, 8, 48}, nth = 5, w, t, rep;
	double cpu_rfs = 0, cpu_ref = 0;

	read_by_ref =
		getenv("BENCH_READ") && !strcmp(getenv("BENCH_READ"), "get");
	if (argc > 1)
		cell_seconds = atof(argv[1]);
	if (argc > 2) {
		char *p = argv[2];

		for (nth = 0; nth < 16 && *p; nth++) {
			threads[nth] = (unsigned)strtoul(p, &p, 10);
			if (threads[nth] < 1 || threads[nth] > MAX_THREADS)
				threads[nth] = 1;
			if (*p == ',')
				p++;
		}
	}
	make_draws();
	for (w = 0; w < W__COUNT; w++) {
		if (argc > 3 && !strstr(argv[3], wl_name[w]))
			continue;
		setup((enum workload)w);
		if (w == W_ROLES) {
			run_roles();
			teardown();
			continue;
		}
		for (t = 0; t < nth; t++) {
			double a[REPS], b[REPS], ca[REPS], cb[REPS];
			double oa[REPS], ob[REPS];

			for (rep = 0; rep < REPS; rep++) {
				struct result x =
					run_cell(false, w, threads[t]);
				struct result y = run_cell(true, w, threads[t]);

				a[rep] = x.ops_s;
				oa[rep] = x.cpu_ns_per_op;
				ob[rep] = y.cpu_ns_per_op;
				ca[rep] = x.cpu_ns_per_hit;
				b[rep] = y.ops_s;
				cb[rep] = y.cpu_ns_per_hit;
			}
			qsort(a, REPS, sizeof(double), cmp_double);
			qsort(b, REPS, sizeof(double), cmp_double);
			qsort(ca, REPS, sizeof(double), cmp_double);
			qsort(cb, REPS, sizeof(double), cmp_double);
			qsort(oa, REPS, sizeof(double), cmp_double);
			qsort(ob, REPS, sizeof(double), cmp_double);
			printf("%-6s t%-3u reference %11.0f ops/s %6.0f "
			       "cpu-ns/op"
			       "  regionfs %11.0f ops/s %6.0f cpu-ns/op  ratio "
			       "%.2f\n",
			       wl_name[w], threads[t], a[REPS / 2],
			       oa[REPS / 2], b[REPS / 2], ob[REPS / 2],
			       b[REPS / 2] / a[REPS / 2]);
			printf("ops_reference_%s_t%u=%.0f\n", wl_name[w],
			       threads[t], a[REPS / 2]);
			printf("ops_regionfs_%s_t%u=%.0f\n", wl_name[w],
			       threads[t], b[REPS / 2]);
			printf("ratio_%s_t%u=%.2f\n", wl_name[w], threads[t],
			       b[REPS / 2] / a[REPS / 2]);
			/* CPU per operation: less sensitive to other tenants */
			printf("cpu_ratio_%s_t%u=%.2f\n", wl_name[w],
			       threads[t], oa[REPS / 2] / ob[REPS / 2]);
			if (w == W_ZIPF && threads[t] == 1) {
				cpu_ref = ca[REPS / 2];
				cpu_rfs = cb[REPS / 2];
			}
			fflush(stdout);
		}
		teardown();
	}
	if (cpu_rfs > 0) {
		printf("cpu_ns_per_hit_reference=%.1f\n", cpu_ref);
		printf("cpu_ns_per_hit_regionfs=%.1f\n", cpu_rfs);
	}
	free(keys);
	free(zipf_draws);
	free(unif_draws);
	return 0;
}
