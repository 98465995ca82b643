/*
 * strict_race.c - the race torture across mounts for coherence = strict.
 *
 *   strict_race [-s] -n ROUNDS WRITER_DIR READER_DIR...
 *
 * One writer thread writes 1, 2, ... ROUNDS to WRITER_DIR/t (open with
 * O_TRUNC, write, close) and, each time close() has returned, publishes
 * the number (an atomic store). Two reader threads per READER_DIR (other
 * mounts of the same database) loop: load the published number c, THEN
 * read READER_DIR/t (open, read, close) and parse it as v. A read that
 * started after close() of c returned must see v >= c; v < c is a stale
 * read. An empty value (the O_TRUNC of the next write, committed before
 * its close) is skipped.
 *
 * Prints "rounds=N reads=R stale=S" and exits 1 if S > 0 (with -s: exits
 * 0 and only reports, to show that a bounded region does see stale reads,
 * i.e. that the torture can tell).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_READERS 16

static atomic_long committed;
static atomic_bool done;
static atomic_long reads, stale, errors;

struct reader {
	const char *dir;
	pthread_t t;
};

static int write_value(const char *path, long v)
{
	char buf[32];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), n;

	if (fd < 0)
		return -1;
	n = snprintf(buf, sizeof(buf), "%ld\n", v);
	if (write(fd, buf, n) != n) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* The value of path: 0 and *v, 1 if empty, -1 on an error. */
static int read_value(const char *path, long *v)
{
	char buf[32];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -1;
	if (n == 0)
		return 1;
	buf[n] = '\0';
	*v = strtol(buf, NULL, 10);
	return 0;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	char path[4096];
	long c, v;
	int rc;

	snprintf(path, sizeof(path), "%s/t", r->dir);
	while (!atomic_load(&done)) {
		c = atomic_load(&committed);
		rc = read_value(path, &v);
		if (rc < 0) {
			atomic_fetch_add(&errors, 1);
			continue;
		}
		if (rc > 0)
			continue;
		atomic_fetch_add(&reads, 1);
		if (v < c) {
			if (atomic_fetch_add(&stale, 1) < 5)
				fprintf(stderr,
					"stale: %s read %ld after %ld was "
					"closed\n",
					path, v, c);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct reader rd[MAX_READERS];
	bool report_only = false;
	long rounds = 100, i;
	int opt, nr = 0, k;
	char path[4096];

	while ((opt = getopt(argc, argv, "sn:")) != -1) {
		if (opt == 's')
			report_only = true;
		else if (opt == 'n')
			rounds = atol(optarg);
		else
			return 2;
	}
	if (argc - optind < 2) {
		fprintf(stderr, "usage: strict_race [-s] -n ROUNDS WRITER_DIR "
				"READER_DIR...\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/t", argv[optind]);
	if (write_value(path, 0)) {
		perror(path);
		return 1;
	}
	for (k = optind + 1; k < argc && nr + 2 <= MAX_READERS; k++) {
		for (i = 0; i < 2; i++) {
			rd[nr].dir = argv[k];
			if (pthread_create(&rd[nr].t, NULL, reader_main,
					   &rd[nr]))
				return 1;
			nr++;
		}
	}
	for (i = 1; i <= rounds; i++) {
		if (write_value(path, i)) {
			fprintf(stderr, "write %ld: %s\n", i, strerror(errno));
			atomic_store(&done, true);
			break;
		}
		atomic_store(&committed, i); /* close() returned */
	}
	atomic_store(&done, true);
	for (k = 0; k < nr; k++)
		pthread_join(rd[k].t, NULL);
	printf("rounds=%ld reads=%ld stale=%ld read_errors=%ld\n", i - 1,
	       atomic_load(&reads), atomic_load(&stale), atomic_load(&errors));
	if (i <= rounds)
		return 1;
	return !report_only && atomic_load(&stale) ? 1 : 0;
}
