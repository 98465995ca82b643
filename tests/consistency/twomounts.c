/*
 * twomounts.c - two regionfs mounts of one database file: a write through
 * one shows through the other within the stated delay.
 *
 * usage: twomounts -a DIR_A -b DIR_B [-n writes] [-k keys]
 *                  [-t deadline_ms] [-B bound_ms] [-1]
 *
 * DIR_A and DIR_B are the same region on two mounts (two daemons, one
 * SOURCE). For each of -n rounds in each direction (A->B, then B->A):
 *   1. read the key through the other mount until it shows the current
 *      value (so it is cached there: the round tests invalidation through
 *      the change feed, not just a fresh load);
 *   2. write a new value (a length that changes every round) through the
 *      writing mount; close() returned 0 = committed;
 *   3. read it back through the writing mount: it must show at once (the
 *      mount's own write path, no feed involved);
 *   4. poll the other mount (1 ms interval) until it shows the new value.
 *      Every read before must return exactly the old value: a mix, a
 *      stale size or an error fails. The delay is taken from close()'s
 *      return to the end of the first read showing the new value;
 *   5. read once more through the other mount: never back to the old one.
 * -1: A->B only (B may be a read-only mount, -o ro).
 * Prints the delays (max, mean, p50, p95) per direction. Exits 1 if a read
 * showed anything but the old or the new value, went back, a change did
 * not show within the deadline (-t, default 2000 ms), or the largest
 * delay exceeds the stated bound (-B, 0 = report only); 2 on I/O errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define VAL_CAP	   4096
#define MAX_KEYS   16
#define MAX_WRITES 10000
#define POLL_US	   1000

struct opts {
	const char *dir[2];   /* -a, -b */
	unsigned nwrites;     /* -n: rounds per direction */
	unsigned nkeys;	      /* -k */
	uint64_t deadline_ms; /* -t */
	uint64_t bound_ms;    /* -B: 0 = report only */
	bool one_way;	      /* -1: A->B only */
};

struct round {
	char path_w[4096], path_r[4096];
	char old[VAL_CAP], new[VAL_CAP];
	size_t old_len, new_len;
};

static struct opts opt = {
	.nwrites = 50,
	.nkeys = 4,
	.deadline_ms = 2000,
};
static uint64_t delays_us[2][MAX_WRITES];

static bool same(const char *a, size_t al, const char *b, size_t bl)
{
	return al == bl && memcmp(a, b, al) == 0;
}

/* A finding: reported and counted by tl_report(); the round fails. */
#define fail(...) (tl_report(__VA_ARGS__), -1)

/* Step 1: the reading mount shows (and so caches) the current value. */
static int prime(struct round *r)
{
	char buf[VAL_CAP];
	uint64_t end = tl_now_ns() + opt.deadline_ms * 1000000u;
	size_t len;
	int rc;

	do {
		rc = tl_read_file(r->path_r, buf, sizeof(buf), &len);
		if (rc == 0 && same(buf, len, r->old, r->old_len))
			return 0;
		tl_sleep_us(POLL_US);
	} while (tl_now_ns() < end);
	return fail("%s never showed the previous value", r->path_r);
}

/* Steps 4 and 5; returns the delay in us, or -1. */
static int64_t wait_visible(struct round *r, uint64_t t0)
{
	char buf[VAL_CAP];
	uint64_t now;
	size_t len;
	int rc;

	for (;;) {
		rc = tl_read_file(r->path_r, buf, sizeof(buf), &len);
		now = tl_now_ns();
		if (rc)
			return fail("%s: %s", r->path_r, strerror(-rc));
		if (same(buf, len, r->new, r->new_len))
			break;
		if (!same(buf, len, r->old, r->old_len))
			return fail("%s: read '%.*s', neither old nor new",
				    r->path_r, (int)(len < 60 ? len : 60), buf);
		if (now - t0 > opt.deadline_ms * 1000000u)
			return fail("%s: new value not visible after %" PRIu64
				    " ms",
				    r->path_r, opt.deadline_ms);
		tl_sleep_us(POLL_US);
	}
	rc = tl_read_file(r->path_r, buf, sizeof(buf), &len);
	if (rc || !same(buf, len, r->new, r->new_len))
		return fail("%s went back after showing the new value",
			    r->path_r);
	return (int64_t)((now - t0) / 1000u);
}

/* One round: write through dir[w], watch through dir[!w]. */
static int64_t one_round(unsigned w, unsigned i, struct round *r)
{
	char buf[VAL_CAP];
	size_t len;
	uint64_t t0;
	int rc;

	snprintf(r->path_w, sizeof(r->path_w), "%s/t%02u", opt.dir[w],
		 i % opt.nkeys);
	snprintf(r->path_r, sizeof(r->path_r), "%s/t%02u", opt.dir[!w],
		 i % opt.nkeys);
	rc = tl_read_file(r->path_w, r->old, sizeof(r->old), &r->old_len);
	if (rc)
		return fail("%s: %s", r->path_w, strerror(-rc));
	if (prime(r))
		return -1;
	r->new_len =
		(size_t)snprintf(r->new, sizeof(r->new), "round %u via %c %*s|",
				 i, "AB"[w], (int)(i * 37 % 300), "");
	rc = tl_write_file(r->path_w, r->new, r->new_len);
	t0 = tl_now_ns();
	if (rc)
		return fail("write %s: %s", r->path_w, strerror(-rc));
	rc = tl_read_file(r->path_w, buf, sizeof(buf), &len);
	if (rc || !same(buf, len, r->new, r->new_len))
		return fail("%s does not read back its own write at once",
			    r->path_w);
	return wait_visible(r, t0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Prints the delays of direction w; returns the largest (us). */
static uint64_t summarize(unsigned w)
{
	uint64_t *d = delays_us[w], sum = 0;
	unsigned i, n = opt.nwrites;

	qsort(d, n, sizeof(*d), cmp_u64);
	for (i = 0; i < n; i++)
		sum += d[i];
	printf("twomounts: %c->%c writes=%u delay_us max=%" PRIu64
	       " mean=%" PRIu64 " p50=%" PRIu64 " p95=%" PRIu64 "\n",
	       "AB"[w], "AB"[!w], n, d[n - 1], sum / n, d[n / 2],
	       d[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1]);
	return d[n - 1];
}

static int setup_keys(void)
{
	char path[4096], val[64];
	unsigned k;
	int rc;

	for (k = 0; k < opt.nkeys; k++) {
		snprintf(path, sizeof(path), "%s/t%02u", opt.dir[0], k);
		rc = tl_write_file(
			path, val,
			(size_t)snprintf(val, sizeof(val), "initial t%02u", k));
		if (rc) {
			tl_warn("%s: %s", path, strerror(-rc));
			return 2;
		}
	}
	return 0;
}

static void parse_args(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "a:b:n:k:t:B:1")) != -1) {
		if (c == 'a')
			opt.dir[0] = optarg;
		else if (c == 'b')
			opt.dir[1] = optarg;
		else if (c == 'n')
			opt.nwrites = (unsigned)strtoul(optarg, NULL, 10);
		else if (c == 'k')
			opt.nkeys = (unsigned)strtoul(optarg, NULL, 10);
		else if (c == 't')
			opt.deadline_ms = strtoull(optarg, NULL, 10);
		else if (c == 'B')
			opt.bound_ms = strtoull(optarg, NULL, 10);
		else if (c == '1')
			opt.one_way = true;
		else
			goto bad;
	}
	if (opt.dir[0] && opt.dir[1] && optind == argc && opt.nwrites &&
	    opt.nwrites <= MAX_WRITES && opt.nkeys && opt.nkeys <= MAX_KEYS)
		return;
bad:
	fprintf(stderr, "usage: twomounts -a DIR_A -b DIR_B [-n writes] "
			"[-k keys] [-t deadline_ms] [-B bound_ms] [-1]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct round r;
	uint64_t worst = 0, m;
	unsigned w, i;
	int64_t d;

	parse_args(argc, argv);
	if (setup_keys())
		return 2;
	for (w = 0; w < (opt.one_way ? 1u : 2u); w++) {
		for (i = 0; i < opt.nwrites; i++) {
			d = one_round(w, i, &r);
			if (d < 0)
				return 1;
			delays_us[w][i] = (uint64_t)d;
		}
		m = summarize(w);
		worst = m > worst ? m : worst;
	}
	if (opt.bound_ms && worst > opt.bound_ms * 1000u) {
		tl_report("largest delay %" PRIu64 " us exceeds the stated "
			  "bound of %" PRIu64 " ms",
			  worst, opt.bound_ms);
		return 1;
	}
	printf("twomounts: PASS, largest delay %" PRIu64 " us\n", worst);
	return tl_reported() ? 1 : 0;
}
