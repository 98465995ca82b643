/*
 * test_carry.c - unit tests of fs/carry.c: a cache a reload recreated
 * takes over the old one's entries, and never a stale one.
 *
 * A real SQLite store in a temporary directory and the daemon's real
 * region table (rfs_state_init/replace), no mount: the steps run on this
 * thread (rfs_carry_start/step, as daemon.c calls them), so a change can
 * be put exactly between the reload and the carry, which a mount cannot
 * do: a row changed after the swap, while the old cache still holds its
 * previous value (the old cache no longer sees invalidations), must be
 * loaded again, not carried.
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

#define NKEYS 10

static char dir[] = "/tmp/rfs-carry-XXXXXX";
static char db[64];

static struct config *parse(const char *text)
{
	char err[CONFIG_ERR_LEN];
	struct config *c = NULL;

	if (config_parse_string(text, "regions.ini", &c, err, sizeof(err)))
		fail_msg("%s", err);
	return c;
}

static int setup(void **state)
{
	struct config *c;

	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(db, sizeof(db), "%s/db", dir);
	if (store_open(db, NULL, &rfs.st))
		return -1;
	rfs.config_path = "regions.ini";
	c = parse("[r]\nstripes = 4\n[t]\nstripes = 4\nttl = 1h\n");
	if (rfs_state_init(c))
		return -1;
	config_free(c);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	rfs_carry_stop();
	rfs_state_fini();
	store_close(rfs.st);
	rfs.st = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void put(const char *region, const char *key, const char *val)
{
	assert_int_equal(store_put(rfs.st, region, key, strlen(key), val,
				   strlen(val), 0, NULL),
			 0);
}

/* The value of (region, key) through the current table's cache. */
static struct region_value *fetch(const char *region, const char *key)
{
	struct rfs_table *t = rfs_table_ref();
	struct rfs_region *rr = rfs_table_find(t, region);
	struct region_value *v = NULL;

	assert_non_null(rr);
	assert_int_equal(rfs_fetch(rr, key, strlen(key), &v), 0);
	rfs_table_unref(t);
	return v;
}

/* Is key cached in region's current cache? Its value in *out if so. */
static bool cached(const char *region, const char *key,
		   struct region_value **out)
{
	struct rfs_table *t = rfs_table_ref();
	struct rfs_region *rr = rfs_table_find(t, region);
	bool yes = region_peek(rr->r, key, strlen(key), out);

	rfs_table_unref(t);
	return yes;
}

static void reload(const char *text)
{
	char err[CONFIG_ERR_LEN];
	struct config *c = parse(text);
	struct rfs_table *old = NULL, *t;

	assert_int_equal(rfs_state_replace(c, &old, err, sizeof(err)), 0);
	t = rfs_table_ref();
	rfs_carry_start(old, t);
	rfs_table_unref(t);
	rfs_table_unref(old);
	config_free(c);
}

static void test_entries_come_over_and_a_changed_row_is_reloaded(void **s)
{
	struct region_value *before[NKEYS], *v;
	char key[16], val[32];
	uint64_t carried0 = rfs_carry_count();
	int steps = 0;

	(void)s;
	for (int i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		snprintf(val, sizeof(val), "value %d", i);
		put("r", key, val);
		before[i] = fetch("r", key);
		put("t", key, val);
		region_value_unref(fetch("t", key));
	}
	reload("[r]\nstripes = 2\n[t]\nstripes = 2\nttl = 1h\n");
	assert_false(cached("r", "k0", &v)); /* nothing yet: cold until */
	put("r", "k3", "changed after the swap");
	while (rfs_carry_step())
		steps++;
	for (int i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_true(cached("r", key, &v));
		if (i == 3) { /* loaded again: a new load, the new bytes */
			assert_int_not_equal(region_value_tag(v),
					     region_value_tag(before[i]));
			assert_int_equal(region_value_len(v), 22);
			assert_memory_equal(region_value_data(v),
					    "changed after the swap", 22);
		} else { /* the old cache's value: the same load */
			assert_int_equal(region_value_tag(v),
					 region_value_tag(before[i]));
			assert_int_equal(region_value_len(v),
					 region_value_len(before[i]));
			assert_memory_equal(region_value_data(v),
					    region_value_data(before[i]),
					    region_value_len(v));
		}
		region_value_unref(v);
		region_value_unref(before[i]);
		/* t has a ttl: its entries start cold */
		assert_false(cached("t", key, &v));
	}
	assert_int_equal(rfs_carry_count() - carried0, NKEYS - 1);
	assert_int_equal(steps, 0); /* 10 keys: one step */
}

static void test_the_carry_stops_at_the_new_limit(void **s)
{
	char key[16];
	struct region_value *v;
	uint64_t carried0 = rfs_carry_count();
	int n = 0;

	(void)s;
	/* r holds the 10 keys (the test before); one stripe of 4 entries */
	reload("[r]\nstripes = 1\nmax_entries = 4\n[t]\nstripes = 2\n"
	       "ttl = 1h\n");
	while (rfs_carry_step())
		;
	for (int i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		if (cached("r", key, &v)) {
			region_value_unref(v);
			n++;
		}
	}
	assert_int_equal(n, 4);
	assert_int_equal(rfs_carry_count() - carried0, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_entries_come_over_and_a_changed_row_is_reloaded),
		cmocka_unit_test(test_the_carry_stops_at_the_new_limit),
	};

	return cmocka_run_group_tests_name("carry", tests, setup, teardown);
}
