/*
 * bench_fs.c - small-file throughput of a regionfs region against tmpfs.
 *
 *   bench_fs [-n VALUES] [-s SIZE] [-t THREADS,...] REGION_DIR [TMPFS_DIR]
 *
 * Runs the same workload on REGION_DIR (a region directory of a mounted
 * regionfs) and on a tmpfs directory, in the same run, and prints ops/s for
 * both and the ratio regionfs/tmpfs for each phase and thread count.
 * Without TMPFS_DIR the program mounts a private tmpfs on a temporary
 * directory (needs root) and always unmounts it before exiting, also on
 * SIGINT/SIGTERM/SIGHUP.
 *
 * Workload (defaults: 10,000 values of 1 KiB, 1, 2 and 4 threads): the
 * values are split evenly over the threads, each thread working on its own
 * keys ("b<threads>-<n>"), released together by a barrier; a phase's time
 * runs from just before that release (every thread is waiting) to the
 * last thread's end.
 *   create   open(O_CREAT|O_WRONLY|O_TRUNC), write SIZE bytes, close
 *   read     open(O_RDONLY), read to EOF, close; content checked
 *            (on regionfs the first read after a write is a cache miss:
 *            writes evict, DESIGN.md's double eviction)
 *   reread   the same again (on regionfs: cache hits)
 *   rewrite  open(O_WRONLY|O_TRUNC), write new SIZE bytes, close
 * Every close() of a write is a commit on regionfs (SQLite group commit)
 * and nothing on tmpfs, so create and rewrite measure the commit path.
 *
 * This is a program, not a test: it prints figures and fails only if an
 * operation fails or a value reads back wrong.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "testlib.h"

#define MAX_THREADS 64
#define MAX_RUNS    8

enum phase { P_CREATE, P_READ, P_REREAD, P_REWRITE, NPHASES };

static const char *const phase_names[NPHASES] = {
	"create",
	"read",
	"reread",
	"rewrite",
};

/* One directory under test, for one thread count. */
struct bench {
	const char *dir;	 /* directory under test */
	unsigned nvalues;	 /* values per run */
	size_t size;		 /* bytes per value */
	unsigned nthreads;	 /* threads of this run */
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

static char tmpfs_dir[64]; /* our own tmpfs mount point, "" if none */

/* ---- the private tmpfs --------------------------------------------------- */

static void tmpfs_cleanup(void)
{
	if (!tmpfs_dir[0])
		return;
	if (umount2(tmpfs_dir, 0) != 0)
		umount2(tmpfs_dir, MNT_DETACH);
	rmdir(tmpfs_dir);
	tmpfs_dir[0] = '\0';
}

static void on_signal(int sig)
{
	/* umount2 and rmdir are system calls: async-signal-safe */
	if (tmpfs_dir[0]) {
		if (umount2(tmpfs_dir, 0) != 0)
			umount2(tmpfs_dir, MNT_DETACH);
		rmdir(tmpfs_dir);
	}
	_exit(128 + sig);
}

static const char *tmpfs_mount(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	strcpy(tmpfs_dir, "/tmp/bench_fs-tmpfs.XXXXXX");
	if (!mkdtemp(tmpfs_dir))
		tl_die("mkdtemp: %s", strerror(errno));
	if (mount("tmpfs", tmpfs_dir, "tmpfs", MS_NOSUID | MS_NODEV,
		  "size=512m,mode=0700") != 0) {
		int e = errno;

		rmdir(tmpfs_dir);
		tmpfs_dir[0] = '\0';
		tl_die("mount -t tmpfs: %s (run as root, or give TMPFS_DIR)",
		       strerror(e));
	}
	atexit(tmpfs_cleanup);
	return tmpfs_dir;
}

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

/* One phase over this worker's share of the keys. */
static void run_phase(struct worker *w, char *buf, char *want)
{
	struct bench *b = w->b;
	unsigned per = b->nvalues / b->nthreads;
	unsigned first = w->id * per;
	char path[4096];

	if (w->id == b->nthreads - 1)
		per = b->nvalues - first;
	for (unsigned k = first; k < first + per && !w->err; k++) {
		snprintf(path, sizeof(path), "%s/b%u-%05u", b->dir, b->nthreads,
			 k);
		switch (b->phase) {
		case P_CREATE:
			fill(want, b->size, k, 0);
			do_write(w, path, want, O_CREAT);
			break;
		case P_READ:
		case P_REREAD:
			fill(want, b->size, k, 0);
			do_read(w, path, buf, want);
			break;
		case P_REWRITE:
			fill(want, b->size, k, 1);
			do_write(w, path, want, 0);
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
static void run_dir(const char *dir, unsigned nvalues, size_t size, unsigned n,
		    double rate[NPHASES])
{
	struct bench b = {
		.dir = dir, .nvalues = nvalues, .size = size, .nthreads = n};
	struct worker w[MAX_THREADS];
	double t0;

	pthread_barrier_init(&b.ready, NULL, n + 1);
	pthread_barrier_init(&b.start, NULL, n + 1);
	pthread_barrier_init(&b.done, NULL, n + 1);
	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < n; i++) {
		w[i].b = &b;
		w[i].id = i;
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]))
			tl_die("pthread_create failed");
	}
	for (int p = 0; p < NPHASES; p++) {
		b.phase = (enum phase)p; /* published by the barriers */
		pthread_barrier_wait(&b.ready);
		t0 = tl_now_s(); /* every worker is waiting at start */
		pthread_barrier_wait(&b.start);
		pthread_barrier_wait(&b.done);
		rate[p] = nvalues / (tl_now_s() - t0);
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(w[i].tid, NULL);
		if (w[i].err)
			tl_die("%s: %s", w[i].what, strerror(w[i].err));
	}
	pthread_barrier_destroy(&b.ready);
	pthread_barrier_destroy(&b.start);
	pthread_barrier_destroy(&b.done);
}

/* ---- main ---------------------------------------------------------------- */

static unsigned parse_threads(const char *s, unsigned *out)
{
	unsigned n = 0;
	char *end;

	while (*s && n < MAX_RUNS) {
		unsigned long t = strtoul(s, &end, 10);

		if (end == s || t < 1 || t > MAX_THREADS)
			tl_die("bad thread count list: %s", s);
		out[n++] = (unsigned)t;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			tl_die("bad thread count list");
	}
	return n;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_fs [-n VALUES] [-s SIZE] "
			"[-t THREADS,...] REGION_DIR [TMPFS_DIR]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned threads[MAX_RUNS] = {1, 2, 4}, nruns = 3, nvalues = 10000;
	double rfs[NPHASES], tmp[NPHASES];
	const char *tdir;
	size_t size = 1024;
	int opt;

	while ((opt = getopt(argc, argv, "n:s:t:h")) != -1) {
		if (opt == 'n')
			nvalues = (unsigned)strtoul(optarg, NULL, 10);
		else if (opt == 's')
			size = strtoul(optarg, NULL, 10);
		else if (opt == 't')
			nruns = parse_threads(optarg, threads);
		else
			usage();
	}
	if (optind != argc - 1 && optind != argc - 2)
		usage();
	if (nvalues < 1 || size < 1 || size > (64u << 20))
		tl_die("bad -n or -s");
	tdir = optind == argc - 2 ? argv[optind + 1] : tmpfs_mount();
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("bench_fs: %u values of %zu bytes; regionfs %s, tmpfs %s\n",
	       nvalues, size, argv[optind], tdir);
	printf("%-8s %7s %14s %14s %8s\n", "phase", "threads", "regionfs op/s",
	       "tmpfs op/s", "ratio");
	for (unsigned r = 0; r < nruns; r++) {
		if (threads[r] > nvalues)
			tl_die("more threads than values");
		run_dir(argv[optind], nvalues, size, threads[r], rfs);
		run_dir(tdir, nvalues, size, threads[r], tmp);
		for (int p = 0; p < NPHASES; p++)
			printf("%-8s %7u %14.0f %14.0f %8.3f\n", phase_names[p],
			       threads[r], rfs[p], tmp[p], rfs[p] / tmp[p]);
	}
	return 0;
}
