/*
 * bench_fs.c - small-file throughput of one directory, phase by phase.
 *
 *   bench_fs [-n VALUES] [-s SIZE] [-t THREADS] [-r READDIRS] [-p PHASES] DIR
 *
 * Runs every phase below once on DIR (a regionfs region directory, a tmpfs
 * directory, a passthrough_hp mount...) with THREADS threads and prints one
 * line per phase, "rate PHASE OPS_PER_S", for tests/bench/run_bench_fs.sh,
 * which runs it side by side on tmpfs, regionfs and passthrough_hp (fresh
 * mounts, interleaved, medians) and computes the ratios.
 *
 * Workload (defaults: 10,000 values of 1 KiB, 1 thread): the values are
 * split evenly over the threads, each thread working on its own keys
 * ("b-<n>"), released together by a barrier; a phase's time runs from just
 * before that release (every thread is waiting) to the last thread's end.
 *   create   open(O_CREAT|O_WRONLY|O_TRUNC), write SIZE bytes, close
 *   read     open(O_RDONLY), read to EOF, close; content checked
 *            (on regionfs the first read after a write may be a cache miss)
 *   warm     the same again (on regionfs: cache hits)
 *   rewrite  open(O_WRONLY|O_TRUNC), write new SIZE bytes, close, then
 *            open, read back and check, close (one op = both)
 *   stat     stat() of each key, size checked
 *   readdir  every thread lists the whole directory READDIRS times
 *            (default 1) with opendir/readdir/closedir; the rate is
 *            entries per second (all threads together), the count checked
 *   unlink   unlink() of each key
 *
 * -p PHASES runs only the phases named (comma-separated, in the order
 * above whatever the order given), e.g. "create" to fill a directory and
 * "read,warm,stat,readdir" on it after a read-only remount.
 *
 * This is a program, not a test: it prints figures and fails only if an
 * operation fails or a value reads back wrong.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#define MAX_THREADS 64

enum phase {
	P_CREATE,
	P_READ,
	P_WARM,
	P_REWRITE,
	P_STAT,
	P_READDIR,
	P_UNLINK,
	NPHASES
};

static const char *const phase_names[NPHASES] = {
	"create", "read", "warm", "rewrite", "stat", "readdir", "unlink",
};

/* One directory under test, for one thread count. */
struct bench {
	const char *dir;	 /* directory under test */
	unsigned nvalues;	 /* values per run */
	size_t size;		 /* bytes per value */
	unsigned nthreads;	 /* threads of this run */
	unsigned nreaddirs;	 /* listings per thread in P_READDIR */
	unsigned phases;	 /* bit p: run phase p (-p) */
	enum phase phase;	 /* phase being run; set before the barrier */
	pthread_barrier_t ready; /* nthreads workers + main: all waiting */
	pthread_barrier_t start; /* likewise: go (main took the start time) */
	pthread_barrier_t done;	 /* likewise, at the end of a phase */
};

struct worker {
	struct bench *b;
	unsigned id;
	int err;	 /* 0 or errno of the first failure */
	char what[4200]; /* what failed */
	pthread_t tid;
};

/* ---- the workload -------------------------------------------------------- */

static void fill(char *buf, size_t size, unsigned key, unsigned gen)
{
	for (size_t i = 0; i < size; i++)
		buf[i] = (char)('a' + (key * 7u + gen * 13u + i) % 26u);
}

static int fail(struct worker *w, const char *op, const char *path)
{
	w->err = errno ? errno : EIO;
	snprintf(w->what, sizeof(w->what), "%s %s", op, path);
	return -1;
}

static int do_write(struct worker *w, const char *path, const char *buf,
		    int flags)
{
	size_t size = w->b->size;
	int fd = open(path, O_WRONLY | O_TRUNC | flags, 0644);

	if (fd < 0)
		return fail(w, "open", path);
	if (write(fd, buf, size) != (ssize_t)size) {
		fail(w, "write", path);
		close(fd);
		return -1;
	}
	if (close(fd) != 0)
		return fail(w, "close", path);
	return 0;
}

static int do_read(struct worker *w, const char *path, char *buf,
		   const char *want)
{
	size_t size = w->b->size, len = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return fail(w, "open", path);
	while (len <= size && (n = read(fd, buf + len, size + 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (len != size || memcmp(buf, want, size) != 0) {
		errno = EILSEQ;
		return fail(w, "wrong content in", path);
	}
	return 0;
}

static int do_stat(struct worker *w, const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return fail(w, "stat", path);
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size != w->b->size) {
		errno = EILSEQ;
		return fail(w, "wrong size or type from stat", path);
	}
	return 0;
}

/* Lists the whole directory; every key must be there. */
static int do_readdir(struct worker *w)
{
	struct bench *b = w->b;
	unsigned n = 0;
	struct dirent *d;
	DIR *dir = opendir(b->dir);

	if (!dir)
		return fail(w, "opendir", b->dir);
	errno = 0;
	while ((d = readdir(dir)) != NULL)
		if (d->d_name[0] == 'b' && d->d_name[1] == '-')
			n++;
	if (errno) {
		fail(w, "readdir", b->dir);
		closedir(dir);
		return -1;
	}
	closedir(dir);
	if (n != b->nvalues) {
		errno = EILSEQ;
		return fail(w, "wrong number of entries in", b->dir);
	}
	return 0;
}

/* One phase over this worker's share of the keys. */
static void run_phase(struct worker *w, char *buf, char *want)
{
	struct bench *b = w->b;
	unsigned per = b->nvalues / b->nthreads;
	unsigned first = w->id * per;
	char path[4096];

	if (b->phase == P_READDIR) {
		for (unsigned i = 0; i < b->nreaddirs && !w->err; i++)
			do_readdir(w);
		return;
	}
	if (w->id == b->nthreads - 1)
		per = b->nvalues - first;
	for (unsigned k = first; k < first + per && !w->err; k++) {
		snprintf(path, sizeof(path), "%s/b-%05u", b->dir, k);
		switch (b->phase) {
		case P_CREATE:
			fill(want, b->size, k, 0);
			do_write(w, path, want, O_CREAT);
			break;
		case P_READ:
		case P_WARM:
			fill(want, b->size, k, 0);
			do_read(w, path, buf, want);
			break;
		case P_REWRITE:
			fill(want, b->size, k, 1);
			if (do_write(w, path, want, 0) == 0)
				do_read(w, path, buf, want);
			break;
		case P_STAT:
			do_stat(w, path);
			break;
		case P_UNLINK:
			if (unlink(path) != 0)
				fail(w, "unlink", path);
			break;
		default:
			break;
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct bench *b = w->b;
	char *buf = malloc(b->size + 1), *want = malloc(b->size + 1);

	if (!buf || !want)
		w->err = ENOMEM;
	for (int p = 0; p < NPHASES; p++) {
		if (!(b->phases & 1u << p))
			continue;
		pthread_barrier_wait(&b->ready);
		pthread_barrier_wait(&b->start);
		if (!w->err)
			run_phase(w, buf, want);
		pthread_barrier_wait(&b->done);
	}
	free(buf);
	free(want);
	return NULL;
}

/* Runs every phase on dir with n threads; ops/s per phase into rate[]. */
static void run_dir(struct bench *b, double rate[NPHASES])
{
	struct worker w[MAX_THREADS];
	unsigned n = b->nthreads;
	double t0, ops;

	pthread_barrier_init(&b->ready, NULL, n + 1);
	pthread_barrier_init(&b->start, NULL, n + 1);
	pthread_barrier_init(&b->done, NULL, n + 1);
	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < n; i++) {
		w[i].b = b;
		w[i].id = i;
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]))
			tl_die("pthread_create failed");
	}
	for (int p = 0; p < NPHASES; p++) {
		if (!(b->phases & 1u << p))
			continue;
		b->phase = (enum phase)p; /* published by the barriers */
		pthread_barrier_wait(&b->ready);
		t0 = tl_now_s(); /* every worker is waiting at start */
		pthread_barrier_wait(&b->start);
		pthread_barrier_wait(&b->done);
		ops = b->nvalues;
		if (p == P_READDIR)
			ops *= (double)b->nreaddirs * n;
		rate[p] = ops / (tl_now_s() - t0);
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(w[i].tid, NULL);
		if (w[i].err)
			tl_die("%s: %s", w[i].what, strerror(w[i].err));
	}
	pthread_barrier_destroy(&b->ready);
	pthread_barrier_destroy(&b->start);
	pthread_barrier_destroy(&b->done);
}

/* ---- main ---------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: bench_fs [-n VALUES] [-s SIZE] [-t THREADS] "
			"[-r READDIRS] [-p PHASES] DIR\n");
	exit(2);
}

static unsigned long number(const char *s, unsigned long lo, unsigned long hi)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (end == s || *end || v < lo || v > hi)
		tl_die("bad number %s (%lu..%lu)", s, lo, hi);
	return v;
}

/* -p: a comma-separated list of phase names, as a mask. */
static unsigned phase_mask(char *list)
{
	unsigned mask = 0;
	char *save = NULL, *name;
	int p;

	for (name = strtok_r(list, ",", &save); name;
	     name = strtok_r(NULL, ",", &save)) {
		for (p = 0; p < NPHASES && strcmp(name, phase_names[p]); p++)
			;
		if (p == NPHASES)
			tl_die("unknown phase %s", name);
		mask |= 1u << p;
	}
	if (!mask)
		tl_die("no phase in -p");
	return mask;
}

int main(int argc, char **argv)
{
	struct bench b = {.nvalues = 10000,
			  .size = 1024,
			  .nthreads = 1,
			  .nreaddirs = 1,
			  .phases = (1u << NPHASES) - 1};
	double rate[NPHASES];
	int opt;

	while ((opt = getopt(argc, argv, "n:s:t:r:p:h")) != -1) {
		if (opt == 'n')
			b.nvalues = (unsigned)number(optarg, 1, 10000000);
		else if (opt == 's')
			b.size = number(optarg, 1, 64ul << 20);
		else if (opt == 't')
			b.nthreads = (unsigned)number(optarg, 1, MAX_THREADS);
		else if (opt == 'r')
			b.nreaddirs = (unsigned)number(optarg, 1, 1000000);
		else if (opt == 'p')
			b.phases = phase_mask(optarg);
		else
			usage();
	}
	if (optind != argc - 1)
		usage();
	if (b.nthreads > b.nvalues)
		tl_die("more threads than values");
	b.dir = argv[optind];
	setvbuf(stdout, NULL, _IOLBF, 0);
	run_dir(&b, rate);
	for (int p = 0; p < NPHASES; p++)
		if (b.phases & 1u << p)
			printf("rate %s %.1f\n", phase_names[p], rate[p]);
	return 0;
}
