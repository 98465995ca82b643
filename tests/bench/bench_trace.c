/*
 * bench_trace.c - miss ratios of the real engine on recorded traces.
 *
 * Usage: bench_trace [TRACE.xz ...]   (default: the traces in
 * /work/shared/traces). A trace is a headerless stream of big-endian
 * 32-bit keys, read through "xz -dc". Each request goes through the real
 * API (region_get(), and region_flight_done() with a trivial value on a
 * miss), on one region bounded by entry count only, at 1%, 10% and 30% of
 * the trace's distinct keys, for each strategy, with 1 stripe (the policy
 * itself) and 16 stripes (what striping costs: each stripe evicts on its
 * own share). Miss ratios count cold misses. Prints figures, asserts
 * nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region.h"
#include "testlib.h"

#define DEFAULT_DIR "/work/shared/traces"

struct trace {
	const char *path;
	uint32_t *keys; /* as read: big-endian bytes */
	size_t n;
	size_t distinct;
};

/* Reference miss ratios from traces/README.md (orm-busy only). */
static const struct {
	const char *trace;
	const char *policy;
	double ratio[3];
} refs[] = {
	{"orm-busy", "LRU", {0.2297, 0.1199, 0.0565}},
	{"orm-busy", "S3-FIFO", {0.2436, 0.1111, 0.0518}},
	{"orm-busy", "W-TinyLFU", {0.2881, 0.1039, 0.0472}},
	{"orm-busy", "optimal", {0.1718, 0.0669, 0.0295}},
};

static const unsigned pcts[3] = {1, 10, 30};

/* Runs "xz -dc 'path'" with the path quoted for the shell. */
static FILE *open_xz(const char *path)
{
	size_t len = strlen(path), i, o = 0;
	char *cmd = malloc(len * 4 + 32);
	FILE *f;

	if (!cmd)
		return NULL;
	o += (size_t)sprintf(cmd, "xz -dc '");
	for (i = 0; i < len; i++) {
		if (path[i] == '\'') {
			memcpy(cmd + o, "'\\''", 4);
			o += 4;
		} else {
			cmd[o++] = path[i];
		}
	}
	strcpy(cmd + o, "'");
	f = popen(cmd, "r");
	free(cmd);
	return f;
}

static int read_trace(struct trace *t)
{
	size_t cap = 1 << 20, got;
	FILE *f = open_xz(t->path);
	uint32_t *more;

	if (!f)
		return -errno;
	t->keys = malloc(cap * sizeof(*t->keys));
	t->n = 0;
	while (t->keys) {
		got = fread(t->keys + t->n, sizeof(*t->keys), cap - t->n, f);
		t->n += got;
		if (t->n < cap)
			break;
		cap *= 2;
		more = realloc(t->keys, cap * sizeof(*t->keys));
		if (!more)
			break;
		t->keys = more;
	}
	if (pclose(f) != 0 || !t->keys || t->n == 0 || t->n == cap)
		return -EIO;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static size_t count_distinct(const struct trace *t)
{
	uint32_t *s = malloc(t->n * sizeof(*s));
	size_t i, d = 0;

	if (!s)
		return 0;
	memcpy(s, t->keys, t->n * sizeof(*s));
	qsort(s, t->n, sizeof(*s), cmp_u32);
	for (i = 0; i < t->n; i++)
		d += i == 0 || s[i] != s[i - 1];
	free(s);
	return d;
}

/* Replays t on a fresh region; returns the miss ratio, or -1. */
static double replay(const struct trace *t, enum region_strategy strategy,
		     unsigned nstripes, uint64_t entries, double *mops)
{
	struct region_limits lim = {
		.max_entries = entries,
		.nstripes = nstripes,
		.strategy = strategy,
	};
	struct region_value *trivial = region_value_create("v", 1), *v;
	struct region_flight *fl;
	struct region *r;
	size_t i, misses = 0;
	double t0;

	if (!trivial || region_create("trace", &lim, &r))
		return -1;
	t0 = tl_now_s();
	for (i = 0; i < t->n; i++) {
		int rc = region_get(r, &t->keys[i], 4, &v, &fl);

		if (rc == REGION_LOAD) {
			misses++;
			rc = region_flight_done(r, fl, 0,
						region_value_ref(trivial), &v);
		}
		if (rc != 0) {
			fprintf(stderr, "bench_trace: engine error %d\n", rc);
			exit(1);
		}
		region_value_unref(v);
	}
	*mops = (double)t->n / (tl_now_s() - t0) / 1e6;
	region_unref(r);
	region_value_unref(trivial);
	return (double)misses / (double)t->n;
}

static void print_refs(const char *name)
{
	size_t i, p;

	for (i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		if (strcmp(refs[i].trace, name) != 0)
			continue;
		printf("  %-22s", refs[i].policy);
		for (p = 0; p < 3; p++)
			printf("  %8.4f        ", refs[i].ratio[p]);
		printf("  (README reference)\n");
	}
}

static void bench(struct trace *t)
{
	static const enum region_strategy strategies[] = {
		REGION_STRATEGY_LRU, REGION_STRATEGY_S3FIFO};
	static const unsigned stripes[] = {1, 16};
	char name[256];
	const char *base = strrchr(t->path, '/');
	size_t s, n, p;

	snprintf(name, sizeof(name), "%s", base ? base + 1 : t->path);
	if (strchr(name, '.'))
		*strchr(name, '.') = '\0';
	t->distinct = count_distinct(t);
	printf("\n%s: %zu requests, %zu distinct keys\n", name, t->n,
	       t->distinct);
	printf("  %-22s", "miss ratio (Mreq/s)");
	for (p = 0; p < 3; p++)
		printf("  %3u%% = %-9zu", pcts[p], t->distinct * pcts[p] / 100);
	printf("\n");
	for (s = 0; s < 2; s++) {
		for (n = 0; n < 2; n++) {
			printf("  %-6s %2u stripe%s      ",
			       strategies[s] == REGION_STRATEGY_LRU ? "LRU"
								    : "S3FIFO",
			       stripes[n], stripes[n] > 1 ? "s" : " ");
			for (p = 0; p < 3; p++) {
				double mops = 0;
				double mr = replay(t, strategies[s], stripes[n],
						   t->distinct * pcts[p] / 100,
						   &mops);

				printf("  %8.4f (%4.1f)", mr, mops);
				fflush(stdout);
			}
			printf("\n");
		}
	}
	print_refs(name);
}

int main(int argc, char **argv)
{
	const char *defaults[] = {DEFAULT_DIR "/orm-busy.trace.xz",
				  DEFAULT_DIR "/web12.trace.xz"};
	const char **paths = (const char **)argv + 1;
	int n = argc - 1, i;

	if (n == 0) {
		paths = defaults;
		n = 2;
	}
	for (i = 0; i < n; i++) {
		struct trace t = {.path = paths[i]};

		if (read_trace(&t)) {
			fprintf(stderr, "bench_trace: cannot read %s\n",
				paths[i]);
			free(t.keys);
			return 1;
		}
		bench(&t);
		free(t.keys);
	}
	return 0;
}
