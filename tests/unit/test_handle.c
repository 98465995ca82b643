/*
 * test_handle.c - unit tests of fs/handle.c: the global memory limit.
 *
 * A real SQLite store in a temporary directory and the daemon's real
 * region table (rfs_state_init), no mount; values are loaded through the
 * cache as a read open loads them (rfs_fetch). Nothing here waits: the
 * room that retired entries hold comes back when an admit needs it, not
 * after the readers' grace period at some later lock hold or sweep, which
 * is what tests/integration/test_memlimit.sh had to poll for.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs.h"

#define NKEYS  8
#define VBYTES (16 * 1024) /* over the per-thread value cache's 4 KiB */

static char dir[] = "/tmp/rfs-handle-XXXXXX";
static char db[64];

static int setup(void **state)
{
	char err[CONFIG_ERR_LEN];
	struct config *c = NULL;

	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(db, sizeof(db), "%s/db", dir);
	if (store_open(db, NULL, &rfs.st))
		return -1;
	rfs.config_path = "regions.ini";
	if (config_parse_string("[m]\nstripes = 4\nmax_value_size = 64K\n",
				"regions.ini", &c, err, sizeof(err)))
		return -1;
	if (rfs_state_init(c))
		return -1;
	config_free(c);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	atomic_store(&rfs.max_memory, 0);
	rfs_state_fini();
	store_close(rfs.st);
	rfs.st = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static uint64_t refusals(void)
{
	struct rfs_counters c;

	memset(&c, 0, sizeof(c));
	rfs_mem_counters(&c);
	return c.mem_refusals;
}

/*
 * Values of evicted, replaced or invalidated entries stay in memory
 * (counted by the limit) until no reader can still see their entries.
 * An admit the limit would refuse frees those first and looks once more:
 * the load fits in the room they held. Room held by a reference (an open
 * file's value) is not given back: that admit is refused, and counted.
 */
static void test_admit_reclaims_retired_values_first(void **state)
{
	struct rfs_table *t = rfs_table_ref();
	struct rfs_region *rr = rfs_table_find(t, "m");
	struct region_value *v, *held = NULL;
	char key[16], *buf = malloc(VBYTES);
	uint64_t base, used, refused0;
	int i;

	(void)state;
	assert_non_null(rr);
	assert_non_null(buf);
	memset(buf, 'v', VBYTES);
	base = region_values_bytes();
	for (i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(store_put(rfs.st, "m", key, strlen(key), buf,
					   VBYTES, 0, NULL),
				 0);
		assert_int_equal(rfs_fetch(rr, key, strlen(key), &v), 0);
		assert_int_equal(region_value_len(v), VBYTES);
		if (i == 0)
			held = v; /* an open file's value */
		else
			region_value_unref(v);
	}
	for (i = 0; i < NKEYS; i++) { /* retired, not freed yet */
		snprintf(key, sizeof(key), "k%d", i);
		region_invalidate(rr->r, key, strlen(key),
				  REGION_ORIGIN_OUTSIDE);
	}
	used = region_values_bytes();
	/* the test means something only if retired values hold room */
	assert_true(used >= base + 2 * VBYTES);

	/* room for one value more only once the retired ones are freed */
	atomic_store(&rfs.max_memory, used + VBYTES / 2);
	refused0 = refusals();
	assert_int_equal(rfs_mem_admit(VBYTES), 0);
	assert_int_equal(refusals(), refused0);
	/* all but the held one freed */
	assert_true(region_values_bytes() < base + 2 * VBYTES);
	assert_true(region_values_bytes() >= base + VBYTES);

	/* the held value's room is not the limit's to take */
	atomic_store(&rfs.max_memory, region_values_bytes() + VBYTES / 2);
	assert_int_equal(rfs_mem_admit(VBYTES), -ENOMEM);
	assert_int_equal(refusals(), refused0 + 1);
	region_value_unref(held);
	assert_int_equal(rfs_mem_admit(VBYTES), 0);
	assert_int_equal(refusals(), refused0 + 1);
	rfs_table_unref(t);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_admit_reclaims_retired_values_first),
	};

	return cmocka_run_group_tests_name("handle", tests, setup, teardown);
}
