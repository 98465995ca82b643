/*
 * bench_steps.c - where a rewrite and its read back spend their time: the
 * median latency of each system call of the loop, one thread.
 *
 *   bench_steps [-n KEYS] [-s SIZE] DIR
 *
 * Creates KEYS files of SIZE bytes in DIR (defaults 2,000 and 1 KiB) and
 * reads each once (not timed), then for each key times
 *   open(O_WRONLY|O_TRUNC), write SIZE bytes, close,
 *   open(O_RDONLY), read SIZE bytes, close
 * with CLOCK_MONOTONIC around each call, and prints per step
 *   step_<name>_us MEDIAN
 * and step_sum_us (the sum of the medians). bench_fs's rewrite phase is
 * the same loop as a rate; this says which call the time goes to, e.g.
 * for regionfs against passthrough_hp or tmpfs: run it on a fresh mount
 * of each, in turn, on a quiet machine (medians of one thread's calls
 * move less with the load than bench_fs's rates, but they do move). A
 * program that prints figures: it fails only if a call fails or a value
 * reads back wrong.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum step { S_OPEN_W, S_WRITE, S_CLOSE_W, S_OPEN_R, S_READ, S_CLOSE_R, S__N };

static const char *const step_name[S__N] = {"open_w", "write", "close_w",
					    "open_r", "read",  "close_r"};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "bench_steps: %s %s: %s\n", what, path,
		strerror(errno));
	exit(1);
}

static void write_file(const char *path, int flags, const char *buf,
		       size_t size, double *t)
{
	double t0 = now_us(), t1, t2;
	int fd = open(path, flags, 0644);

	if (fd < 0)
		die("open", path);
	t1 = now_us();
	if (write(fd, buf, size) != (ssize_t)size)
		die("write", path);
	t2 = now_us();
	if (close(fd))
		die("close", path);
	if (t) {
		t[S_OPEN_W] = t1 - t0;
		t[S_WRITE] = t2 - t1;
		t[S_CLOSE_W] = now_us() - t2;
	}
}

static void read_file(const char *path, const char *want, char *buf,
		      size_t size, double *t)
{
	double t0 = now_us(), t1, t2;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		die("open", path);
	t1 = now_us();
	if (read(fd, buf, size) != (ssize_t)size)
		die("read", path);
	t2 = now_us();
	if (close(fd))
		die("close", path);
	if (memcmp(buf, want, size) != 0) {
		fprintf(stderr, "bench_steps: %s reads back wrong\n", path);
		exit(1);
	}
	if (t) {
		t[S_OPEN_R] = t1 - t0;
		t[S_READ] = t2 - t1;
		t[S_CLOSE_R] = now_us() - t2;
	}
}

int main(int argc, char **argv)
{
	size_t n = 2000, size = 1024, i;
	char *val, *buf, path[4096];
	double *t[S__N], sum = 0, cur[S__N];
	const char *dir;
	int opt, k;

	while ((opt = getopt(argc, argv, "n:s:")) != -1) {
		if (opt == 'n')
			n = strtoul(optarg, NULL, 10);
		else if (opt == 's')
			size = strtoul(optarg, NULL, 10);
		else
			goto usage;
	}
	if (optind != argc - 1 || n == 0 || size == 0)
		goto usage;
	dir = argv[optind];
	val = malloc(size);
	buf = malloc(size);
	for (k = 0; k < S__N; k++) {
		t[k] = malloc(n * sizeof(double));
		if (!t[k])
			val = NULL;
	}
	if (!val || !buf) {
		fprintf(stderr, "bench_steps: out of memory\n");
		return 1;
	}
	memset(val, 'a', size);
	for (i = 0; i < n; i++) { /* the keys exist and were read */
		snprintf(path, sizeof(path), "%s/st-%zu", dir, i);
		write_file(path, O_WRONLY | O_CREAT | O_TRUNC, val, size, NULL);
		read_file(path, val, buf, size, NULL);
	}
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/st-%zu", dir, i);
		val[0] = (char)('b' + i % 24); /* new bytes every time */
		write_file(path, O_WRONLY | O_TRUNC, val, size, cur);
		read_file(path, val, buf, size, cur);
		for (k = 0; k < S__N; k++)
			t[k][i] = cur[k];
	}
	for (k = 0; k < S__N; k++) {
		qsort(t[k], n, sizeof(double), cmp_double);
		printf("step_%s_us %.1f\n", step_name[k], t[k][n / 2]);
		sum += t[k][n / 2];
	}
	printf("step_sum_us %.1f\n", sum);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/st-%zu", dir, i);
		if (unlink(path))
			die("unlink", path);
	}
	return 0;
usage:
	fprintf(stderr, "usage: bench_steps [-n KEYS] [-s SIZE] DIR\n");
	return 2;
}
