/*
 * torture.c - the consistency torture test, run through a regionfs mount.
 *
 * usage: torture -d REGION_DIR [-k keys] [-r readers] [-n versions]
 *                [-b readback] [-R rename] [-f final_reads] [-s seed]
 *                [-t watchdog_s]
 *
 * What it proves. regionfs promises (README, DESIGN.md "the stale-put
 * guard"): once a write's close() has returned, every read through the
 * mount that starts afterwards returns that value or a newer one; no read
 * returns a mix of two values; a reader never goes back to an older value
 * after it has seen a newer one. This program hammers a few keys in a
 * small region (max_entries below the number of keys, so capacity
 * evictions, misses and loads race the writes all the time) and checks
 * every single read against those three rules.
 *
 * Threads. One writer per key writes versions 2..n of its key (version 1
 * is written before the threads start): open(O_WRONLY|O_CREAT|O_TRUNC),
 * one record, close(). Only once close() has returned 0 does the writer
 * publish the version in committed[key] (a release store). With -R m,
 * every m-th version is instead written to a scratch key ("kNN.tmp", never
 * read) and renamed over the key; the version counts as committed once
 * rename() returned 0 (the same guarantee covers rename). Every b-th
 * version the writer also reads its own key right back (the strictest
 * read-after-write). Reader threads read random keys (open, read to EOF,
 * close) until the writers are done.
 *
 * "A read that starts after close() returned". A reader loads committed[k]
 * (acquire) BEFORE its open(). Whatever version v it finds there, close()
 * of v returned before that load, hence before the open: the read must
 * return v or newer. The converse bound also holds: the writer of k does
 * not start version c + 2 before it published c + 1, so a read that ends
 * when committed[k] is c cannot return more than c + 1 ("future" reads
 * would mean garbage that happens to parse).
 *
 * Records. "key=kNN ver=V pad=P crc=XXXXXXXX\n", where the pad's length
 * (1..400) and letters are a function of (key, version) and the CRC-32
 * covers everything before " crc=". A read is checked by parsing it and
 * regenerating the record from the key and version it names: any torn
 * value, a mix of two versions, a stale size (short, or padded with
 * zeros: libfuse issue 468) or bytes of another key fail the comparison.
 *
 * After the writers finish, every key is read -f times and must return
 * exactly its last committed version.
 *
 * Output: one summary line on stdout,
 *   torture: reads=N stale=N torn=N wrong_key=N backward=N future=N
 *            final_mismatch=N errors=N ...
 * and up to TL_REPORT_MAX detailed violations on stderr. Exit 0 if every
 * count of a violation is 0, 1 if a consistency rule was broken, 2 on
 * usage or I/O errors (an I/O error is a failure, but not a finding about
 * consistency; run_torture.sh tells them apart).
 *
 * Nothing here depends on timing: every check is a rule that must hold
 * for any interleaving, so a correct filesystem passes on every run. How
 * often the race the rules guard against actually occurs does depend on
 * the interleaving; run_torture.sh widens that window with the test
 * daemon's load delay (see there) so that a daemon without the guard is
 * caught on every run, not by luck. The watchdog (-t) only turns a hang
 * into a failure; it never decides a result.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define MAX_KEYS    64
#define MAX_READERS 64
#define PAD_MAX	    400	 /* longest pad; records stay < REC_CAP */
#define REC_CAP	    1024 /* read buffer; a longer file is a violation */

struct opts {
	const char *dir;       /* the region directory on the mount */
	unsigned nkeys;	       /* -k: keys, one writer each */
	unsigned nreaders;     /* -r: reader threads */
	unsigned nversions;    /* -n: last version each writer writes */
	unsigned readback;     /* -b: writer reads back every b-th version */
	unsigned rename_every; /* -R: every m-th version through rename */
	unsigned final_reads;  /* -f: reads per key after the writers */
	unsigned watchdog_s;   /* -t: a hang fails after this long */
	uint64_t seed;	       /* -s: reader key choice */
};

/* Counts of one thread, summed at the end. */
struct tally {
	uint64_t reads;		 /* reads checked (readers and read-backs) */
	uint64_t readbacks;	 /* of which writers' read-backs */
	uint64_t writes;	 /* versions committed */
	uint64_t renames;	 /* of which through rename() */
	uint64_t stale;		 /* older than committed before the open */
	uint64_t torn;		 /* not exactly one well-formed record */
	uint64_t wrong_key;	 /* a record of another key */
	uint64_t backward;	 /* older than this thread saw before */
	uint64_t future;	 /* newer than could have been written */
	uint64_t final_mismatch; /* final reads not at the last version */
	uint64_t errors;	 /* failed open/read/write/close */
};

struct worker {
	pthread_t tid;
	unsigned key;		 /* writers: the key written */
	uint64_t rng;		 /* readers: key choice */
	uint64_t last[MAX_KEYS]; /* newest version seen per key */
	struct tally t;
};

static struct opts opt = {
	.nkeys = 8,
	.nreaders = 6,
	.nversions = 300,
	.readback = 2,
	.final_reads = 5,
	.watchdog_s = 300,
	.seed = 0x5eed,
};

static char key_path[MAX_KEYS][TL_PATH_MAX];
static char tmp_path[MAX_KEYS][TL_PATH_MAX]; /* rename sources */
/* Last version of each key whose close() returned 0. */
static _Atomic uint64_t committed[MAX_KEYS];
static atomic_bool writers_done;
static pthread_barrier_t start_line;

/* ---- records ---------------------------------------------------------- */

/* The record of (k, ver) into buf (REC_CAP bytes); returns its length. */
static size_t record_build(unsigned k, uint64_t ver, char *buf)
{
	uint64_t m = tl_mix64(((uint64_t)k << 48) ^ ver);
	size_t n, i, plen = 1 + m % PAD_MAX;
	uint32_t crc;

	n = (size_t)snprintf(buf, REC_CAP, "key=k%02u ver=%" PRIu64 " pad=", k,
			     ver);
	for (i = 0; i < plen; i++)
		buf[n++] = (char)('a' + (m / 7 + i * 7) % 26);
	crc = tl_crc32(buf, n);
	n += (size_t)snprintf(buf + n, REC_CAP - n, " crc=%08x\n",
			      (unsigned)crc);
	return n;
}

/*
 * 0 with *k and *ver if buf holds exactly one well-formed record, whose
 * checksum matches and which is byte for byte the record of (*k, *ver).
 */
static int record_parse(const char *buf, size_t len, unsigned *k, uint64_t *ver)
{
	char text[REC_CAP + 1], again[REC_CAP];
	const char *crcp;
	unsigned long crc;
	int used = -1;

	if (len == 0 || len >= REC_CAP)
		return -1;
	memcpy(text, buf, len);
	text[len] = '\0';
	if (sscanf(text, "key=k%2u ver=%20" SCNu64 " pad=%n", k, ver, &used) !=
		    2 ||
	    used < 0 || *k >= MAX_KEYS)
		return -1;
	crcp = strstr(text + used, " crc=");
	if (!crcp || strlen(crcp) != 14 || crcp[13] != '\n')
		return -1;
	crc = strtoul(crcp + 5, NULL, 16);
	if (crc != tl_crc32(text, (size_t)(crcp - text)))
		return -1;
	if (record_build(*k, *ver, again) != len || memcmp(again, buf, len))
		return -1;
	return 0;
}

/* ---- checks ----------------------------------------------------------- */

/* The version rules for a well-formed record of key k. */
static void check_version(struct worker *w, unsigned k, uint64_t floor,
			  uint64_t ver)
{
	uint64_t ceiling;

	if (ver < floor) {
		w->t.stale++;
		tl_report("stale read: k%02u returned version %" PRIu64
			  " although close() of version %" PRIu64
			  " returned before the read started",
			  k, ver, floor);
	}
	if (ver < w->last[k]) {
		w->t.backward++;
		tl_report("backward read: k%02u returned version %" PRIu64
			  " after this thread had seen %" PRIu64,
			  k, ver, w->last[k]);
	}
	ceiling = atomic_load_explicit(&committed[k], memory_order_acquire);
	if (ver > ceiling + 1) {
		w->t.future++;
		tl_report("impossible read: k%02u version %" PRIu64
			  " while only %" PRIu64 " was committed",
			  k, ver, ceiling);
	}
	if (ver > w->last[k])
		w->last[k] = ver;
}

/*
 * Checks one read of key k that returned rc and buf[0..len): floor is
 * committed[k] as loaded before the open.
 */
static void check_read(struct worker *w, unsigned k, uint64_t floor, int rc,
		       const char *buf, size_t len)
{
	unsigned rk;
	uint64_t ver;

	w->t.reads++;
	if (rc) {
		w->t.errors++;
		tl_report("read error: %s: %s", key_path[k], strerror(-rc));
	} else if (record_parse(buf, len, &rk, &ver)) {
		w->t.torn++;
		tl_report("torn read: %s: %zu bytes: %.*s", key_path[k], len,
			  (int)(len < 80 ? len : 80), buf);
	} else if (rk != k) {
		w->t.wrong_key++;
		tl_report("wrong key: %s returned the record of k%02u",
			  key_path[k], rk);
	} else {
		check_version(w, k, floor, ver);
	}
}

/* One checked read of key k, floor taken before the open. */
static void read_key(struct worker *w, unsigned k)
{
	char buf[REC_CAP];
	uint64_t floor;
	size_t len;
	int rc;

	floor = atomic_load_explicit(&committed[k], memory_order_acquire);
	rc = tl_read_file(key_path[k], buf, sizeof(buf), &len);
	check_read(w, k, floor, rc, buf, len);
}

/* ---- threads ---------------------------------------------------------- */

/* Commits version ver of key k, directly or through rename(). */
static int write_version(struct worker *w, uint64_t ver)
{
	char buf[REC_CAP];
	size_t len = record_build(w->key, ver, buf);
	int rc;

	if (!opt.rename_every || ver % opt.rename_every)
		return tl_write_file(key_path[w->key], buf, len);
	rc = tl_write_file(tmp_path[w->key], buf, len);
	if (rc)
		return rc;
	if (rename(tmp_path[w->key], key_path[w->key]) != 0)
		return -errno;
	w->t.renames++;
	return 0;
}

static void *writer_main(void *arg)
{
	struct worker *w = arg;
	uint64_t ver;
	int rc;

	pthread_barrier_wait(&start_line);
	for (ver = 2; ver <= opt.nversions; ver++) {
		rc = write_version(w, ver);
		if (rc) {
			w->t.errors++;
			tl_report("write error: %s version %" PRIu64 ": %s",
				  key_path[w->key], ver, strerror(-rc));
			break;
		}
		w->t.writes++;
		atomic_store_explicit(&committed[w->key], ver,
				      memory_order_release);
		if (opt.readback && ver % opt.readback == 0) {
			w->t.readbacks++;
			read_key(w, w->key);
		}
	}
	return NULL;
}

static void *reader_main(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(&start_line);
	while (!atomic_load_explicit(&writers_done, memory_order_acquire))
		read_key(w, (unsigned)tl_rand_below(&w->rng, opt.nkeys));
	return NULL;
}

/* ---- setup, final check, summary -------------------------------------- */

static int setup_keys(void)
{
	char buf[REC_CAP];
	unsigned k;
	int rc;

	for (k = 0; k < opt.nkeys; k++) {
		tl_key_path(key_path[k], TL_PATH_MAX, opt.dir, "k", 2, k);
		snprintf(tmp_path[k], TL_PATH_MAX, "%s/k%02u.tmp", opt.dir, k);
		rc = tl_write_file(key_path[k], buf, record_build(k, 1, buf));
		if (rc) {
			tl_warn("cannot create %s: %s", key_path[k],
				strerror(-rc));
			return rc;
		}
		atomic_store(&committed[k], 1);
	}
	return 0;
}

/* Every key must read back exactly its last committed version. */
static void final_check(struct worker *w)
{
	char buf[REC_CAP];
	unsigned k, i, rk;
	uint64_t ver, want;
	size_t len;
	int rc;

	for (k = 0; k < opt.nkeys; k++) {
		want = atomic_load(&committed[k]);
		for (i = 0; i < opt.final_reads; i++) {
			w->t.reads++;
			rc = tl_read_file(key_path[k], buf, sizeof(buf), &len);
			if (rc) {
				w->t.errors++;
				tl_report("final read error: %s: %s",
					  key_path[k], strerror(-rc));
			} else if (record_parse(buf, len, &rk, &ver) ||
				   rk != k || ver != want) {
				w->t.final_mismatch++;
				tl_report(
					"final mismatch: k%02u read %.*s, want "
					"version %" PRIu64,
					k, (int)(len < 40 ? len : 40), buf,
					want);
			}
		}
	}
}

static void tally_add(struct tally *d, const struct tally *s)
{
	d->reads += s->reads;
	d->readbacks += s->readbacks;
	d->writes += s->writes;
	d->renames += s->renames;
	d->stale += s->stale;
	d->torn += s->torn;
	d->wrong_key += s->wrong_key;
	d->backward += s->backward;
	d->future += s->future;
	d->final_mismatch += s->final_mismatch;
	d->errors += s->errors;
}

static int summarize(const struct tally *t, uint64_t ns)
{
	uint64_t bad = t->stale + t->torn + t->wrong_key + t->backward +
		       t->future + t->final_mismatch;

	printf("torture: reads=%" PRIu64 " stale=%" PRIu64 " torn=%" PRIu64
	       " wrong_key=%" PRIu64 " backward=%" PRIu64 " future=%" PRIu64
	       " final_mismatch=%" PRIu64 " errors=%" PRIu64 " writes=%" PRIu64
	       " renames=%" PRIu64 " readbacks=%" PRIu64 " keys=%u"
	       " readers=%u versions=%u elapsed_ms=%" PRIu64 "\n",
	       t->reads, t->stale, t->torn, t->wrong_key, t->backward,
	       t->future, t->final_mismatch, t->errors, t->writes, t->renames,
	       t->readbacks, opt.nkeys, opt.nreaders, opt.nversions,
	       ns / 1000000u);
	fflush(stdout);
	if (t->errors)
		return 2;
	return bad ? 1 : 0;
}

/* ---- main ------------------------------------------------------------- */

static void on_alarm(int sig)
{
	static const char msg[] = "torture: watchdog: no result in time "
				  "(hung mount?)\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(2);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: torture -d REGION_DIR [-k keys] [-r readers] "
		"[-n versions] [-b readback] [-R rename] [-f final_reads] "
		"[-s seed] [-t watchdog_s]\n");
	exit(2);
}

static unsigned num_arg(const char *s, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || end == s || v < lo || v > hi)
		usage();
	return (unsigned)v;
}

static void parse_args(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "d:k:r:n:b:R:f:s:t:")) != -1) {
		switch (c) {
		case 'd':
			opt.dir = optarg;
			break;
		case 'k':
			opt.nkeys = num_arg(optarg, 1, MAX_KEYS);
			break;
		case 'r':
			opt.nreaders = num_arg(optarg, 0, MAX_READERS);
			break;
		case 'n':
			opt.nversions = num_arg(optarg, 2, 1u << 30);
			break;
		case 'b':
			opt.readback = num_arg(optarg, 0, 1u << 30);
			break;
		case 'R':
			opt.rename_every = num_arg(optarg, 0, 1u << 30);
			break;
		case 'f':
			opt.final_reads = num_arg(optarg, 1, 1000);
			break;
		case 's':
			opt.seed = num_arg(optarg, 1, UINT_MAX);
			break;
		case 't':
			opt.watchdog_s = num_arg(optarg, 1, 86400);
			break;
		default:
			usage();
		}
	}
	if (!opt.dir || optind != argc)
		usage();
}

/*
 * Starts nw workers running fn. On failure exits: the workers already
 * started wait on the barrier and could never be joined.
 */
static void start_workers(struct worker *w, unsigned nw, void *(*fn)(void *))
{
	unsigned i;
	int rc;

	for (i = 0; i < nw; i++) {
		rc = pthread_create(&w[i].tid, NULL, fn, &w[i]);
		if (rc) {
			fprintf(stderr, "torture: pthread_create: %s\n",
				strerror(rc));
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	static struct worker writers[MAX_KEYS], readers[MAX_READERS], fin;
	struct tally total = {0};
	uint64_t t0;
	unsigned i;

	parse_args(argc, argv);
	signal(SIGALRM, on_alarm);
	alarm(opt.watchdog_s);
	if (setup_keys())
		return 2;
	pthread_barrier_init(&start_line, NULL, opt.nkeys + opt.nreaders + 1);
	for (i = 0; i < opt.nkeys; i++)
		writers[i].key = i;
	for (i = 0; i < opt.nreaders; i++)
		readers[i].rng = tl_mix64(opt.seed + i) | 1;
	start_workers(writers, opt.nkeys, writer_main);
	start_workers(readers, opt.nreaders, reader_main);
	t0 = tl_now_ns();
	pthread_barrier_wait(&start_line);
	for (i = 0; i < opt.nkeys; i++)
		pthread_join(writers[i].tid, NULL);
	atomic_store_explicit(&writers_done, true, memory_order_release);
	for (i = 0; i < opt.nreaders; i++)
		pthread_join(readers[i].tid, NULL);
	final_check(&fin);
	for (i = 0; i < opt.nkeys; i++)
		tally_add(&total, &writers[i].t);
	for (i = 0; i < opt.nreaders; i++)
		tally_add(&total, &readers[i].t);
	tally_add(&total, &fin.t);
	pthread_barrier_destroy(&start_line);
	return summarize(&total, tl_now_ns() - t0);
}
