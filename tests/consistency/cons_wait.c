/*
 * cons_wait.c - waits, with a deadline, until a change made outside the
 * mount shows through it, and says how long that took.
 *
 * usage: cons_wait [-s EPOCHREALTIME] [-t timeout_ms] [-o OLD]
 *                  value PATH NEW [PATH NEW...] | absent PATH... |
 *                  present PATH...
 *
 *   value    until PATH reads exactly NEW. With -o, every read before must
 *            return exactly OLD: anything else (a mix, a stale size, an
 *            error) fails at once.
 *   absent   until open(PATH) fails with ENOENT and PATH's name is no
 *            longer listed by readdir of its directory.
 *   present  until the name is listed and PATH opens.
 * With several targets, each poll round checks every target not yet
 * visible, so one change of many keys is timed per key from one start.
 *
 * The delay is measured from -s (bash's $EPOCHREALTIME, taken right after
 * the outside writer finished, e.g. after the sqlite3 shell exited) or
 * else from this program's start, to the end of the first read that
 * showed the change: an upper bound of the true delay, plus the ~1 ms
 * polling interval. Prints "visible after N us (M polls)", N the largest
 * delay over the targets, and exits 0, or
 * prints why and exits 1 (deadline passed, unexpected value) or 2 (usage).
 * The deadline is a failure bound, not a race window: the change must
 * show within it on any correct daemon.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define VAL_CAP (1u << 20)
#define POLL_US 1000

#define MAX_TARGETS 256

enum mode { M_VALUE, M_ABSENT, M_PRESENT };

struct target {
	const char *path;
	const char *want; /* M_VALUE */
	bool done;	  /* the change showed */
	int last_rc;	  /* of the last read, for the failure message */
};

struct waiter {
	enum mode mode;
	const char *old; /* -o, or NULL */
	char *buf;	 /* VAL_CAP bytes */
	struct target t[MAX_TARGETS];
	unsigned n;
};

/* 1 if the last component of path is listed in its directory, 0 if not. */
static int listed(const char *path)
{
	char dcopy[PATH_MAX], ncopy[PATH_MAX];
	const char *name;
	struct dirent *de;
	int found = 0;
	DIR *d;

	snprintf(dcopy, sizeof(dcopy), "%s", path);
	snprintf(ncopy, sizeof(ncopy), "%s", path);
	name = basename(ncopy);
	d = opendir(dirname(dcopy));
	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, name) == 0)
			found = 1;
	closedir(d);
	return found;
}

/* 1: the change shows; 0: not yet; -1: a value that must never show. */
static int poll_value(struct waiter *w, struct target *t)
{
	size_t len, wl = strlen(t->want);
	int rc;

	rc = tl_read_file(t->path, w->buf, VAL_CAP, &len);
	t->last_rc = rc;
	if (rc == 0 && len == wl && memcmp(w->buf, t->want, wl) == 0)
		return 1;
	if (!w->old)
		return 0;
	if (rc == 0 && len == strlen(w->old) &&
	    memcmp(w->buf, w->old, len) == 0)
		return 0;
	if (rc)
		tl_warn("%s: %s (expected the old or the new value)", t->path,
			strerror(-rc));
	else
		tl_warn("%s: read %zu bytes '%.*s', which is neither the old "
			"nor the new value",
			t->path, len, (int)(len < 60 ? len : 60), w->buf);
	return -1;
}

static int poll_once(struct waiter *w, struct target *t)
{
	size_t len;
	int rc, l;

	switch (w->mode) {
	case M_VALUE:
		return poll_value(w, t);
	case M_ABSENT:
		rc = tl_read_file(t->path, w->buf, VAL_CAP, &len);
		t->last_rc = rc;
		return rc == -ENOENT && listed(t->path) == 0;
	case M_PRESENT:
		l = listed(t->path);
		rc = tl_read_file(t->path, w->buf, VAL_CAP, &len);
		t->last_rc = rc;
		return l == 1 && rc == 0;
	}
	return -1;
}

/* Parses bash's EPOCHREALTIME ("1700000000.123456") into ns. */
static uint64_t parse_epoch(const char *s)
{
	unsigned long long sec = 0, frac = 0;
	unsigned digits = 0;
	char *p;

	sec = strtoull(s, &p, 10);
	if (*p == '.' || *p == ',') {
		for (p++; *p >= '0' && *p <= '9' && digits < 9; p++, digits++)
			frac = frac * 10 + (unsigned)(*p - '0');
	}
	for (; digits < 9; digits++)
		frac *= 10;
	return sec * 1000000000ULL + frac;
}

static void usage(void)
{
	fprintf(stderr, "usage: cons_wait [-s EPOCHREALTIME] [-t timeout_ms] "
			"[-o OLD] value PATH NEW [PATH NEW...] | absent "
			"PATH... | present PATH...\n");
	exit(2);
}

static void parse_targets(struct waiter *w, int argc, char **argv)
{
	int i, step;

	if (argc < 2)
		usage();
	if (strcmp(argv[0], "value") == 0)
		w->mode = M_VALUE;
	else if (strcmp(argv[0], "absent") == 0)
		w->mode = M_ABSENT;
	else if (strcmp(argv[0], "present") == 0)
		w->mode = M_PRESENT;
	else
		usage();
	step = w->mode == M_VALUE ? 2 : 1;
	if ((argc - 1) % step || (argc - 1) / step > MAX_TARGETS)
		usage();
	for (i = 1; i < argc; i += step) {
		w->t[w->n].path = argv[i];
		w->t[w->n].want = step == 2 ? argv[i + 1] : NULL;
		w->n++;
	}
}

/*
 * Polls every target not yet done until all are, the deadline passes or
 * a forbidden value shows. Returns 1, 0 (deadline) or -1; *worst gets
 * the latest time (ns since since) at which a target showed its change.
 */
static int poll_all(struct waiter *w, uint64_t since, uint64_t deadline,
		    uint64_t *worst, uint64_t *polls)
{
	unsigned i, left = w->n;
	uint64_t now;
	int r;

	for (;;) {
		for (i = 0; i < w->n; i++) {
			if (w->t[i].done)
				continue;
			r = poll_once(w, &w->t[i]);
			(*polls)++;
			if (r < 0)
				return -1;
			if (r == 0)
				continue;
			now = tl_wall_ns();
			w->t[i].done = true;
			left--;
			if (now > since && now - since > *worst)
				*worst = now - since;
		}
		if (left == 0)
			return 1;
		if (tl_wall_ns() > deadline)
			return 0;
		tl_sleep_us(POLL_US);
	}
}

static void report_late(const struct waiter *w, uint64_t timeout_ms)
{
	unsigned i;

	for (i = 0; i < w->n; i++) {
		if (w->t[i].done)
			continue;
		tl_warn("%s: not %s after %" PRIu64 " ms (last read: %s)",
			w->t[i].path, w->mode == M_ABSENT ? "gone" : "visible",
			timeout_ms,
			w->t[i].last_rc ? strerror(-w->t[i].last_rc)
					: "a value");
	}
}

int main(int argc, char **argv)
{
	static struct waiter w;
	uint64_t since = 0, timeout_ms = 2000, worst = 0, polls = 0;
	int c, r;

	while ((c = getopt(argc, argv, "+s:t:o:")) != -1) {
		if (c == 's')
			since = parse_epoch(optarg);
		else if (c == 't')
			timeout_ms = strtoull(optarg, NULL, 10);
		else if (c == 'o')
			w.old = optarg;
		else
			usage();
	}
	parse_targets(&w, argc - optind, argv + optind);
	w.buf = malloc(VAL_CAP);
	if (!w.buf)
		return 2;
	if (!since)
		since = tl_wall_ns();
	r = poll_all(&w, since, since + timeout_ms * 1000000u, &worst, &polls);
	free(w.buf);
	if (r == 1) {
		printf("visible after %" PRIu64 " us (%" PRIu64 " polls)\n",
		       worst / 1000u, polls);
		return 0;
	}
	if (r == 0)
		report_late(&w, timeout_ms);
	return 1;
}
