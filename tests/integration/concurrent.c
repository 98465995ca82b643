/*
 * concurrent.c - concurrent readers and writers on the same keys, through
 * the mount.
 *
 *   concurrent DIR [NKEYS NWRITERS NREADERS ROUNDS]   (default 4 2 3 120)
 *
 * Every value is self-describing: a header line "rfs key=K w=W seq=S
 * len=L\n" followed by bytes that are a function of (K, W, S, offset), and
 * its length varies with (W, S) from 64 bytes to about 20 KiB, so a value
 * that mixes two writes, is cut short, or is padded with zeros (a stale
 * size in the kernel) fails validation.
 *
 * Writers: writer W writes seq 1..ROUNDS to every key in turn with
 * open(O_WRONLY|O_TRUNC), two write()s, close(), and publishes
 * committed[W][K] = seq after close() returned 0.
 * Readers: loop over the keys until every writer has finished, reading
 * each value whole (open, read to EOF, close) and checking
 *  - the value is intact (header, length, every byte);
 *  - no stale read: if writer W's close() of seq s had returned before the
 *    read's open(), the read must not return an older seq of W (DESIGN.md:
 *    once a write's close() has returned, no later read returns an older
 *    value);
 *  - per reader, per key and writer, seqs never go backwards.
 * At the end every key must hold seq ROUNDS of one of the writers (the
 * last commit wins and each writer's last write to a key is seq ROUNDS).
 *
 * Iterations are bounded (ROUNDS per writer; readers stop when the writers
 * are done); nothing depends on timing. Exit 0 if every check holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define MAX_KEYS    64
#define MAX_WRITERS 16
#define MAX_READERS 16
#define MAX_VALUE   (64 + 20480 + 128)

struct shared {
	const char *dir;
	unsigned nkeys, nwriters, nreaders, rounds;
	_Atomic unsigned committed[MAX_WRITERS][MAX_KEYS]; /* last closed seq */
	atomic_uint writers_left;
	atomic_bool failed;
	atomic_ulong reads, writes;
};

struct worker {
	struct shared *sh;
	unsigned id;
	pthread_t tid;
};

/* A finding (tl_report); every thread stops at the next check. */
#define fail(sh, ...)                                                          \
	do {                                                                   \
		tl_report(__VA_ARGS__);                                        \
		atomic_store(&(sh)->failed, true);                             \
	} while (0)

static size_t body_len(unsigned w, unsigned seq)
{
	return 64 + tl_mix32(w * 1000003u + seq) % 20480;
}

static unsigned char body_byte(unsigned k, unsigned w, unsigned seq, size_t i)
{
	return (unsigned char)(tl_mix32(k * 7919u + w * 104729u + seq) +
			       i * 131u);
}

/* Builds value (k, w, seq) into buf; returns its length. */
static size_t make_value(char *buf, unsigned k, unsigned w, unsigned seq)
{
	size_t blen = body_len(w, seq), hlen, len;
	char hdr[96];
	int n;

	/* the header states the total length, which includes the header */
	n = snprintf(hdr, sizeof(hdr), "rfs key=%u w=%u seq=%u len=", k, w,
		     seq);
	hlen = (size_t)n + 7; /* 6 digits + '\n' */
	len = hlen + blen;
	snprintf(buf, MAX_VALUE, "%s%06zu\n", hdr, len);
	for (size_t i = 0; i < blen; i++)
		buf[hlen + i] = (char)body_byte(k, w, seq, i);
	return len;
}

/* Checks value buf[0..len) of key k; 0 with *w and *seq, or -1. */
static int parse_value(struct shared *sh, const char *buf, size_t len,
		       unsigned k, unsigned *w, unsigned *seq)
{
	static __thread char want[MAX_VALUE + 1];
	unsigned kk;
	size_t wlen;

	if (len < 16 ||
	    sscanf(buf, "rfs key=%u w=%u seq=%u len=", &kk, w, seq) != 3) {
		fail(sh, "key %u: not a value of this test (%zu bytes)", k,
		     len);
		return -1;
	}
	if (kk != k || *w >= sh->nwriters || *seq > sh->rounds) {
		fail(sh, "key %u: header names key %u w %u seq %u", k, kk, *w,
		     *seq);
		return -1;
	}
	wlen = make_value(want, k, *w, *seq);
	if (len != wlen || memcmp(buf, want, len) != 0) {
		size_t i = 0;

		while (i < len && i < wlen && buf[i] == want[i])
			i++;
		fail(sh,
		     "key %u: torn value w %u seq %u: %zu bytes read, "
		     "%zu expected, first difference at %zu",
		     k, *w, *seq, len, wlen, i);
		return -1;
	}
	return 0;
}

static void key_path(const struct shared *sh, unsigned k, char *p, size_t n)
{
	tl_key_path(p, n, sh->dir, "ck", 2, k);
}

/* Writes value (k, w, seq) in two write()s and commits it (close). */
static int write_value(struct shared *sh, unsigned k, unsigned w, unsigned seq,
		       char *buf)
{
	size_t len = make_value(buf, k, w, seq);
	char path[TL_PATH_MAX];
	int rc;

	key_path(sh, k, path, sizeof(path));
	rc = tl_write_file_parts(path, buf, len, 2);
	if (rc) {
		fail(sh, "%s %s for writing: %s", tl_failed_call(), path,
		     strerror(-rc));
		return -1;
	}
	atomic_fetch_add(&sh->writes, 1);
	return 0;
}

static void *writer(void *arg)
{
	struct worker *wk = arg;
	struct shared *sh = wk->sh;
	char *buf = malloc(MAX_VALUE + 1);

	for (unsigned seq = 1; buf && seq <= sh->rounds; seq++) {
		for (unsigned k = 0; k < sh->nkeys; k++) {
			if (atomic_load(&sh->failed) ||
			    write_value(sh, k, wk->id, seq, buf))
				goto out;
			atomic_store(&sh->committed[wk->id][k], seq);
		}
	}
out:
	free(buf);
	atomic_fetch_sub(&sh->writers_left, 1);
	return NULL;
}

/* Reads key k whole into buf; returns its length or -1. */
static ssize_t read_value(struct shared *sh, unsigned k, char *buf)
{
	char path[TL_PATH_MAX];
	size_t len;
	int rc;

	key_path(sh, k, path, sizeof(path));
	rc = tl_read_file(path, buf, MAX_VALUE, &len);
	if (rc) {
		fail(sh, "%s %s: %s", tl_failed_call(), path,
		     rc == -EFBIG ? "value too long" : strerror(-rc));
		return -1;
	}
	buf[len] = '\0'; /* buffers hold MAX_VALUE + 1 bytes */
	return (ssize_t)len;
}

/* One read of key k with the stale checks; last[w] is this reader's. */
static void read_check(struct shared *sh, unsigned k, unsigned *last, char *buf)
{
	unsigned floor[MAX_WRITERS], w, seq;
	ssize_t len;

	for (unsigned i = 0; i < sh->nwriters; i++)
		floor[i] = atomic_load(&sh->committed[i][k]);
	len = read_value(sh, k, buf);
	if (len < 0 || parse_value(sh, buf, (size_t)len, k, &w, &seq))
		return;
	atomic_fetch_add(&sh->reads, 1);
	if (seq < floor[w])
		fail(sh,
		     "key %u: stale read: w %u seq %u after seq %u was "
		     "committed",
		     k, w, seq, floor[w]);
	if (seq < last[w])
		fail(sh, "key %u: w %u went back from seq %u to %u", k, w,
		     last[w], seq);
	last[w] = seq;
}

static void *reader(void *arg)
{
	struct worker *wk = arg;
	struct shared *sh = wk->sh;
	unsigned(*last)[MAX_WRITERS] = calloc(MAX_KEYS, sizeof(*last));
	char *buf = malloc(MAX_VALUE + 1);
	bool more = true;

	while (buf && last && more && !atomic_load(&sh->failed)) {
		/* one more full pass after the writers finish */
		more = atomic_load(&sh->writers_left) > 0;
		for (unsigned i = 0; i < sh->nkeys; i++) {
			unsigned k = (i + wk->id) % sh->nkeys;

			read_check(sh, k, last[k], buf);
		}
	}
	free(buf);
	free(last);
	return NULL;
}

static unsigned arg_or(int argc, char **argv, int i, unsigned def, unsigned max)
{
	unsigned v = argc > i ? (unsigned)strtoul(argv[i], NULL, 10) : def;

	if (v < 1 || v > max) {
		tl_warn("argument %d out of range", i);
		exit(2);
	}
	return v;
}

/* Initial values (w 0, seq 0) so readers never meet a missing key. */
static int seed_keys(struct shared *sh)
{
	char *buf = malloc(MAX_VALUE + 1);
	int rc = 0;

	for (unsigned k = 0; buf && k < sh->nkeys && !rc; k++)
		rc = write_value(sh, k, 0, 0, buf);
	free(buf);
	return buf ? rc : -1;
}

/* After the run: every key holds seq ROUNDS of some writer. */
static void check_final(struct shared *sh)
{
	char *buf = malloc(MAX_VALUE + 1);
	unsigned w, seq;
	ssize_t len;

	for (unsigned k = 0; buf && k < sh->nkeys; k++) {
		len = read_value(sh, k, buf);
		if (len < 0 || parse_value(sh, buf, (size_t)len, k, &w, &seq))
			continue;
		if (seq != sh->rounds)
			fail(sh,
			     "key %u: final value is w %u seq %u, not the "
			     "last write (seq %u)",
			     k, w, seq, sh->rounds);
	}
	free(buf);
}

int main(int argc, char **argv)
{
	static struct shared sh;
	struct worker wk[MAX_WRITERS + MAX_READERS];
	unsigned n = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: concurrent DIR [NKEYS NWRITERS "
				"NREADERS ROUNDS]\n");
		return 2;
	}
	sh.dir = argv[1];
	sh.nkeys = arg_or(argc, argv, 2, 4, MAX_KEYS);
	sh.nwriters = arg_or(argc, argv, 3, 2, MAX_WRITERS);
	sh.nreaders = arg_or(argc, argv, 4, 3, MAX_READERS);
	sh.rounds = arg_or(argc, argv, 5, 120, 100000);
	if (seed_keys(&sh))
		return 1;
	atomic_store(&sh.writers_left, sh.nwriters);
	for (unsigned i = 0; i < sh.nwriters + sh.nreaders; i++, n++) {
		wk[i].sh = &sh;
		wk[i].id = i < sh.nwriters ? i : i - sh.nwriters;
		if (pthread_create(&wk[i].tid, NULL,
				   i < sh.nwriters ? writer : reader, &wk[i])) {
			fail(&sh, "pthread_create failed");
			break; /* the others stop at sh.failed */
		}
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(wk[i].tid, NULL);
	if (!atomic_load(&sh.failed))
		check_final(&sh);
	printf("concurrent: %u keys, %u writers x %u rounds, %u readers: "
	       "%lu writes, %lu checked reads\n",
	       sh.nkeys, sh.nwriters, sh.rounds, sh.nreaders,
	       atomic_load(&sh.writes), atomic_load(&sh.reads));
	return atomic_load(&sh.failed) ? 1 : 0;
}
