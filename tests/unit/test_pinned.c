/*
 * test_pinned.c - unit tests of fs/pinned.c: the bytes of the values open
 * files hold, each distinct value counted once (memory_pinned_bytes).
 *
 * The pins are added and removed as read handles would (one struct
 * rfs_pin each), checked against a model after every step: a fixed
 * sequence that covers the head of a value's ring leaving first, last and
 * in the middle, then a seeded random walk over many pins on few values
 * (so rings and bucket lists both hold several), then threads that pin
 * and unpin values of their own and shared ones at once (TSan's case).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fs.h"

#define NVALUES 37
#define NPINS	400

static struct region_value *vals[NVALUES];

static int setup(void **state)
{
	static char data[NVALUES * 10];

	(void)state;
	for (int i = 0; i < NVALUES; i++) {
		vals[i] = region_value_create(data, (size_t)i * 10 + 1);
		if (!vals[i])
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < NVALUES; i++)
		region_value_unref(vals[i]);
	return 0;
}

/* The counters must equal the model of how many pins each value has. */
static void check(const unsigned *npins)
{
	uint64_t bytes = 0, values = 0, b, v;

	for (int i = 0; i < NVALUES; i++) {
		if (npins[i]) {
			bytes += region_value_len(vals[i]);
			values++;
		}
	}
	rfs_pin_counters(&b, &v);
	assert_int_equal(b, bytes);
	assert_int_equal(v, values);
}

static void test_a_value_counts_once_whoever_leaves_first(void **state)
{
	struct rfs_pin p[4] = {{0}};
	unsigned n[NVALUES] = {0};

	(void)state;
	rfs_pin_del(&p[0]); /* never pinned: nothing */
	check(n);
	for (int i = 0; i < 3; i++) {
		rfs_pin_add(&p[i], vals[5]);
		n[5]++;
		check(n);
	}
	rfs_pin_add(&p[3], vals[6]);
	n[6]++;
	check(n);
	rfs_pin_del(&p[0]); /* the head goes: the next pin takes over */
	n[5]--;
	check(n);
	rfs_pin_del(&p[2]); /* a member goes */
	n[5]--;
	check(n);
	rfs_pin_del(&p[2]); /* twice: nothing more */
	check(n);
	rfs_pin_del(&p[1]); /* the last pin of vals[5] */
	n[5]--;
	check(n);
	rfs_pin_del(&p[3]);
	n[6]--;
	check(n);
}

static void test_random_pins_match_the_model(void **state)
{
	static struct rfs_pin p[NPINS];
	int owner[NPINS];
	unsigned n[NVALUES] = {0};
	unsigned seed = 10;

	(void)state;
	for (int i = 0; i < NPINS; i++)
		owner[i] = -1;
	for (int step = 0; step < 20000; step++) {
		int i = rand_r(&seed) % NPINS;

		if (owner[i] < 0) {
			owner[i] = rand_r(&seed) % NVALUES;
			rfs_pin_add(&p[i], vals[owner[i]]);
			n[owner[i]]++;
		} else {
			rfs_pin_del(&p[i]);
			n[owner[i]]--;
			owner[i] = -1;
		}
		if (step % 97 == 0)
			check(n);
	}
	for (int i = 0; i < NPINS; i++) {
		if (owner[i] >= 0) {
			rfs_pin_del(&p[i]);
			n[owner[i]]--;
		}
	}
	check(n);
}

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	struct rfs_pin p[16] = {{0}};

	for (int step = 0; step < 20000; step++) {
		struct rfs_pin *q = &p[rand_r(&seed) % 16];

		if (q->v)
			rfs_pin_del(q);
		else
			rfs_pin_add(q, vals[rand_r(&seed) % NVALUES]);
	}
	for (int i = 0; i < 16; i++)
		rfs_pin_del(&p[i]);
	return NULL;
}

static void test_threads_leave_nothing_pinned(void **state)
{
	pthread_t t[4];
	unsigned n[NVALUES] = {0};

	(void)state;
	for (uintptr_t i = 0; i < 4; i++)
		assert_int_equal(
			pthread_create(&t[i], NULL, churn, (void *)(i + 1)), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	check(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_value_counts_once_whoever_leaves_first),
		cmocka_unit_test(test_random_pins_match_the_model),
		cmocka_unit_test(test_threads_leave_nothing_pinned),
	};

	return cmocka_run_group_tests_name("pinned", tests, setup, teardown);
}
