/*
 * gen_traces.c - synthetic traces for bench_hitratio (the patterns of the
 * LIRS and ARC papers), in the shipped format: headerless big-endian
 * 32-bit keys, xz-compressed.
 *
 * Usage: gen_traces [DIR] (default: the current directory). Writes
 *   zipf.trace.xz      2,000,000 requests, Zipf 0.9 over 200,000 keys
 *   loop.trace.xz      600,000 requests cycling over 20,000 keys
 *   zipfscan.trace.xz  Zipf 0.9 over 100,000 keys, 100,000 requests at a
 *                      time, each followed by a one-pass scan of 20,000
 *                      keys never seen before or after (2,400,000 in all)
 *   zigzag.trace.xz    600,000 requests sweeping 20,000 keys forward, then
 *                      backward, and so on (LIRS's "zigzag"): the keys just
 *                      read come back first, which LRU serves best
 * Popular Zipf keys are scattered over the key space (a random
 * permutation). A fixed xorshift seed makes the traces the same on every
 * run, so figures measured on them can be reproduced.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 12345;

static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

struct zipf {
	double *cdf;
	uint32_t *perm;
	uint32_t n;
};

static int zipf_init(struct zipf *z, uint32_t n, double alpha)
{
	double sum = 0;
	uint32_t i;

	z->n = n;
	z->cdf = malloc(n * sizeof(*z->cdf));
	z->perm = malloc(n * sizeof(*z->perm));
	if (!z->cdf || !z->perm)
		return -1;
	for (i = 0; i < n; i++) {
		sum += pow((double)i + 1, -alpha);
		z->cdf[i] = sum;
	}
	for (i = 0; i < n; i++) {
		z->cdf[i] /= sum;
		z->perm[i] = i;
	}
	for (i = n - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(uniform() * (i + 1)), t = z->perm[i];

		z->perm[i] = z->perm[j];
		z->perm[j] = t;
	}
	return 0;
}

static void zipf_free(struct zipf *z)
{
	free(z->cdf);
	free(z->perm);
}

/* A key 1..n (0 is never used). */
static uint32_t zipf_draw(const struct zipf *z)
{
	double u = uniform();
	uint32_t lo = 0, hi = z->n - 1;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return z->perm[lo] + 1;
}

static void put(FILE *f, uint32_t k)
{
	unsigned char b[4] = {(unsigned char)(k >> 24),
			      (unsigned char)(k >> 16), (unsigned char)(k >> 8),
			      (unsigned char)k};

	fwrite(b, 4, 1, f);
}

static FILE *open_out(const char *dir, const char *name)
{
	char cmd[4096];
	FILE *f;

	if (strchr(dir, '\'')) {
		fprintf(stderr, "gen_traces: no quote in DIR, please\n");
		exit(2);
	}
	snprintf(cmd, sizeof(cmd), "xz -1 -c > '%s/%s'", dir, name);
	f = popen(cmd, "w");
	if (!f) {
		perror("gen_traces: xz");
		exit(1);
	}
	return f;
}

static void close_out(FILE *f, const char *name)
{
	if (pclose(f) != 0) {
		fprintf(stderr, "gen_traces: writing %s failed\n", name);
		exit(1);
	}
	printf("%s\n", name);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	uint32_t scan = 10000000, i, c;
	struct zipf z;
	FILE *f;

	f = open_out(dir, "zipf.trace.xz");
	if (zipf_init(&z, 200000, 0.9))
		return 1;
	for (i = 0; i < 2000000; i++)
		put(f, zipf_draw(&z));
	zipf_free(&z);
	close_out(f, "zipf.trace.xz");

	f = open_out(dir, "loop.trace.xz");
	for (i = 0; i < 600000; i++)
		put(f, i % 20000 + 1);
	close_out(f, "loop.trace.xz");

	f = open_out(dir, "zipfscan.trace.xz");
	if (zipf_init(&z, 100000, 0.9))
		return 1;
	for (c = 0; c < 20; c++) {
		for (i = 0; i < 100000; i++)
			put(f, zipf_draw(&z));
		for (i = 0; i < 20000; i++)
			put(f, scan++);
	}
	zipf_free(&z);
	close_out(f, "zipfscan.trace.xz");

	f = open_out(dir, "zigzag.trace.xz");
	for (i = 0; i < 600000; i++) {
		uint32_t pos = i % 40000;

		put(f, pos < 20000 ? pos + 1 : 40000 - pos);
	}
	close_out(f, "zigzag.trace.xz");
	return 0;
}
