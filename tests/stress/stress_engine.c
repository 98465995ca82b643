/*
 * stress_engine.c - lock-free readers against every kind of writer.
 *
 * Readers hit and miss on 4,096 keys spread over 8 stripes while other
 * threads, at the same time, rewrite keys (invalidate + install through a
 * flight), invalidate everything, sweep, and move max_entries between
 * "everything fits" and 1/16 of it, so that tables grow and shrink
 * (incremental migration), entries are retired and freed under the
 * readers' feet, and stale generations are reclaimed. Run under TSan and
 * ASan in CI: the point is that no reader ever touches freed memory and
 * no value is ever served for another key.
 *
 * Checked on every read (half of them borrows, region_borrow()): the value
 * carries the key it was read for and is intact. At the end: gets == hits + misses, no flight left.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region.h"
#include "testlib.h"

#define NREADERS 4
#define NKEYS	 4096
#define NREADS	 60000
#define VLEN	 48

static struct region *reg;
static atomic_bool stop;

#define FAIL(...) tl_report(__VA_ARGS__)

static void key_of(unsigned k, char key[16])
{
	snprintf(key, 16, "key-%011u", k);
}

static struct region_value *make_value(const char *key, unsigned ver)
{
	unsigned char buf[VLEN];

	memset(buf, (int)(ver & 0xff), sizeof(buf));
	memcpy(buf, key, 15);
	return region_value_create(buf, sizeof(buf));
}

static void check(const char *key, struct region_value *v)
{
	const unsigned char *d = region_value_data(v);
	size_t i;

	if (region_value_len(v) != VLEN || memcmp(d, key, 15) != 0) {
		FAIL("value for the wrong key (%s)", key);
		return;
	}
	for (i = 16; i < VLEN; i++) {
		if (d[i] != d[15]) {
			FAIL("torn value for %s", key);
			return;
		}
	}
}

/* A read; on a miss it loads (version ver) and installs. borrow: through
 * region_borrow(), the value checked before the borrow ends. */
static void read_key(unsigned k, unsigned ver, bool borrow)
{
	struct region_value *v = NULL, *out;
	struct region_flight *fl;
	struct region_borrow b;
	char key[16];
	int rc;

	key_of(k, key);
	if (borrow) {
		rc = region_borrow(reg, key, 15, &b, &fl);
		if (rc == REGION_HIT)
			check(key, b.v);
		region_borrow_end(&b);
	} else {
		rc = region_get(reg, key, 15, &v, &fl);
	}
	if (rc == REGION_LOAD) {
		v = make_value(key, ver);
		rc = region_flight_done(reg, fl, v ? 0 : -12, v, &out);
		v = out;
	}
	if (rc == 0 && v)
		check(key, v);
	region_value_unref(v);
}

static void *reader_main(void *arg)
{
	unsigned s = (unsigned)(uintptr_t)arg, i;

	for (i = 0; i < NREADS; i++) {
		s = s * 1103515245u + 12345u;
		/* skewed: a quarter of the reads on 64 hot keys */
		read_key((s >> 8) % (i % 4 ? NKEYS : 64), i, i % 2);
	}
	return NULL;
}

static void *writer_main(void *arg)
{
	unsigned s = (unsigned)(uintptr_t)arg, ver = 0;
	char key[16];

	while (!atomic_load(&stop)) {
		unsigned k;

		s = s * 1103515245u + 12345u;
		k = (s >> 8) % NKEYS;
		key_of(k, key);
		region_invalidate(reg, key, 15, REGION_ORIGIN_LOCAL);
		read_key(k, ++ver, false);
		region_invalidate(reg, key, 15, REGION_ORIGIN_LOCAL);
	}
	return NULL;
}

static void *chaos_main(void *arg)
{
	struct region_limits lim;
	unsigned i = 0;

	(void)arg;
	region_limits_get(reg, &lim);
	while (!atomic_load(&stop)) {
		switch (i++ % 4) {
		case 0:
			region_invalidate_all(reg, REGION_ORIGIN_OUTSIDE);
			break;
		case 1:
			lim.max_entries = lim.max_entries == 8 * 1024
						  ? 8 * 1024 / 16
						  : 8 * 1024;
			if (region_set_limits(reg, &lim))
				FAIL("region_set_limits");
			break;
		default:
			region_sweep(reg, 2048);
		}
	}
	return NULL;
}

int main(void)
{
	struct region_limits lim = {.max_entries = 8 * 1024, .nstripes = 8};
	pthread_t rd[NREADERS], wr, ch;
	struct region_stats st;
	static const enum region_strategy strat[] = {REGION_STRATEGY_LRU,
						     REGION_STRATEGY_S3FIFO,
						     REGION_STRATEGY_TINYLFU};
	static const char *const sname[] = {"lru", "s3fifo", "tinylfu"};
	int i, pass;

	for (pass = 0; pass < 3; pass++) {
		lim.strategy = strat[pass];
		lim.max_entries = 8 * 1024;
		lim.nstripes = 8;
		if (region_create("engine", &lim, &reg)) {
			FAIL("region_create");
			break;
		}
		atomic_store(&stop, false);
		pthread_create(&wr, NULL, writer_main, (void *)(uintptr_t)7);
		pthread_create(&ch, NULL, chaos_main, NULL);
		for (i = 0; i < NREADERS; i++)
			pthread_create(&rd[i], NULL, reader_main,
				       (void *)(uintptr_t)(i + 1));
		for (i = 0; i < NREADERS; i++)
			pthread_join(rd[i], NULL);
		atomic_store(&stop, true);
		pthread_join(wr, NULL);
		pthread_join(ch, NULL);
		region_stats(reg, &st);
		if (st.gets != st.hits + st.misses)
			FAIL("gets %" PRIu64 " != hits + misses", st.gets);
		if (st.flights)
			FAIL("%" PRIu64 " flights left", st.flights);
		printf("%s: gets %" PRIu64 " hits %" PRIu64
		       " hits_unrecorded %" PRIu64 " stripes %" PRIu64
		       " max_examined_per_hold %" PRIu64 "\n",
		       sname[pass], st.gets, st.hits, st.hits_unrecorded,
		       st.nstripes, st.max_examined_per_hold);
		region_unref(reg);
	}
	if (tl_reported()) {
		tl_warn("%u failures", tl_reported());
		return 1;
	}
	printf("stress_engine: ok\n");
	return 0;
}
