/*
 * bench_memory.c - bytes per entry beyond key and value.
 *
 * Usage: bench_memory [ENTRIES] (default 1000000).
 *
 * For each policy (lru, s3fifo, tinylfu) and each case:
 *   full      max_entries = ENTRIES, ENTRIES installs of distinct keys
 *   evicting  max_entries = ENTRIES, 2 * ENTRIES installs (the second
 *             half evicts: ghosts and other policy state at their size)
 * with 16-byte keys and 100-byte values made by region_value_create(), it
 * measures the heap the region holds (glibc mallinfo2(): in-use chunks,
 * headers and rounding included, plus mmap'd blocks such as large bucket
 * arrays) and the process RSS, both as deltas from before the region was
 * created, after a sweep (so retired entries are freed), and prints
 *   bytes_per_entry_<policy>_<case>=X   heap delta / entries - 116
 *   rss_per_entry_<policy>_<case>=Y     RSS delta / entries - 116
 * and bytes_per_entry=max over the cells. 116 = key + value bytes.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "region.h"

#define REGION_HAS_TINYLFU 1 /* undefine to build against an older engine */

#define KEY_LEN	  16
#define VALUE_LEN 100

static unsigned char value_buf[VALUE_LEN];

static double heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (double)mi.uordblks + (double)mi.hblkhd;
}

static double rss_bytes(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

static void install(struct region *r, uint64_t i)
{
	struct region_value *v, *out;
	struct region_flight *fl;
	char tmp[32], key[KEY_LEN];

	snprintf(tmp, sizeof(tmp), "k%015llu", (unsigned long long)i);
	memcpy(key, tmp, KEY_LEN);
	if (region_get(r, key, KEY_LEN, &v, &fl) == REGION_LOAD) {
		v = region_value_create(value_buf, VALUE_LEN);
		region_flight_done(r, fl, v ? 0 : -12, v, &out);
		v = out;
	}
	region_value_unref(v);
}

static double cell(enum region_strategy strat, const char *sname,
		   const char *cname, uint64_t n, uint64_t installs)
{
	struct region_limits lim = {
		.max_entries = n, .nstripes = 16, .strategy = strat};
	double h0, r0, h1, r1, per_h, per_r;
	struct region_stats st;
	struct region *r;
	uint64_t i;

	malloc_trim(0);
	h0 = heap_bytes();
	r0 = rss_bytes();
	if (region_create("mem", &lim, &r))
		return 0;
	for (i = 0; i < installs; i++)
		install(r, i);
	for (i = 0; i < 1000; i++)
		region_sweep(r, 4096); /* frees what was retired */
	region_stats(r, &st);
	h1 = heap_bytes();
	r1 = rss_bytes();
	per_h = (h1 - h0) / (double)st.entries - (KEY_LEN + VALUE_LEN);
	per_r = (r1 - r0) / (double)st.entries - (KEY_LEN + VALUE_LEN);
	printf("%-7s %-9s entries %8llu  heap %6.1f B/entry  rss %6.1f "
	       "B/entry beyond key and value\n",
	       sname, cname, (unsigned long long)st.entries, per_h, per_r);
	printf("bytes_per_entry_%s_%s=%.1f\n", sname, cname, per_h);
	printf("rss_per_entry_%s_%s=%.1f\n", sname, cname, per_r);
	fflush(stdout);
	region_unref(r);
	return per_h;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	double worst = 0, x;

	memset(value_buf, 'v', sizeof(value_buf));
	x = cell(REGION_STRATEGY_LRU, "lru", "full", n, n);
	worst = x > worst ? x : worst;
	x = cell(REGION_STRATEGY_LRU, "lru", "evicting", n, 2 * n);
	worst = x > worst ? x : worst;
	x = cell(REGION_STRATEGY_S3FIFO, "s3fifo", "full", n, n);
	worst = x > worst ? x : worst;
	x = cell(REGION_STRATEGY_S3FIFO, "s3fifo", "evicting", n, 2 * n);
	worst = x > worst ? x : worst;
#ifdef REGION_HAS_TINYLFU
	x = cell(REGION_STRATEGY_TINYLFU, "tinylfu", "full", n, n);
	worst = x > worst ? x : worst;
	x = cell(REGION_STRATEGY_TINYLFU, "tinylfu", "evicting", n, 2 * n);
	worst = x > worst ? x : worst;
#endif
	printf("bytes_per_entry=%.1f\n", worst);
	return 0;
}
