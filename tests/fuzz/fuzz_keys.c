/*
 * fuzz_keys.c - libFuzzer target: key names through the store. A key is
 * any byte string of 1..255 bytes without '/' or NUL; the store must
 * refuse anything else (-EINVAL, -ENAMETOOLONG) and round-trip anything
 * valid exactly: put, stat, load, list (which must find it in byte order
 * among the others) and delete. The input's first byte picks the region
 * ("a" or a region named with the rest of a short prefix), the rest is
 * the key. One store (a temporary directory) lives for the whole run.
 */
/* The checks below are the target: keep them in release builds too. */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct store *st;

struct find {
	const uint8_t *key;
	size_t klen;
	int found;
	int disorder;
	uint8_t last[STORE_MAX_KEY];
	size_t lastlen;
	int seen;
};

static int on_key(void *ctx, const void *key, size_t klen,
		  const struct store_meta *meta)
{
	struct find *f = ctx;
	size_t n = klen < f->lastlen ? klen : f->lastlen;
	int cmp = memcmp(f->last, key, n);

	(void)meta;
	if (f->seen && (cmp > 0 || (cmp == 0 && f->lastlen >= klen)))
		f->disorder++;
	if (klen == f->klen && !memcmp(key, f->key, klen))
		f->found++;
	memcpy(f->last, key, klen);
	f->lastlen = klen;
	f->seen++;
	return 0;
}

static char dir[] = "/tmp/fuzz_keys.XXXXXX";

/* At exit: the store closed, its files and directory removed. */
static void cleanup(void)
{
	static const char *const files[] = {"k.db", "k.db-wal", "k.db-shm",
					    "k.db-reserve"};
	char p[64];
	size_t i;

	store_close(st);
	st = NULL;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		unlink(p);
	}
	rmdir(dir);
}

static void open_once(void)
{
	char path[64];

	if (st)
		return;
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/k.db", dir);
	if (store_open(path, NULL, &st))
		abort();
	atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *region = size && (data[0] & 1) ? "b" : "a";
	const uint8_t *key = size ? data + 1 : data;
	size_t klen = size ? size - 1 : 0;
	bool valid = klen >= 1 && klen <= STORE_MAX_KEY &&
		     !memchr(key, '/', klen) && !memchr(key, '\0', klen);
	struct store_meta m;
	struct find f = {.key = key, .klen = klen};
	void *v = NULL;
	int rc;

	open_once();
	rc = store_put(st, region, key, klen, key, klen, 0, &m);
	if (!valid) {
		assert(rc == -EINVAL || rc == -ENAMETOOLONG);
		assert(store_load(st, region, key, klen, &v, NULL) == rc);
		return 0;
	}
	assert(rc == 0 && m.size == klen);
	assert(store_stat(st, region, key, klen, &m) == 0 && m.size == klen);
	assert(store_load(st, region, key, klen, &v, &m) == 0);
	assert(m.size == klen && !memcmp(v, key, klen));
	free(v);
	assert(store_list(st, region, NULL, 0, SIZE_MAX, on_key, &f) >= 1);
	assert(f.found == 1 && f.disorder == 0);
	/* every other input stays: the listing order is checked among them,
	 * but keep the table small */
	if (data[0] & 2)
		assert(store_delete(st, region, key, klen, 0) == 0);
	return 0;
}
