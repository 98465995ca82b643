/*
 * race.c - changes of one name racing each other, through a regionfs mount.
 *
 * usage: race -d REGION_DIR [-n rounds] [-s scenario[,scenario...]]
 *             [-v max_reports] [-t watchdog_s] [-N rounds]
 *             [-c regions.ini [-p daemon_pid]] [-D database]
 *
 * Each round of a scenario prepares a few keys, then releases two threads
 * together (a pthread barrier) that each make one change of the same
 * name, and then checks that the outcome is one that some serial order of
 * the two changes gives. Key names carry the round number, so no round
 * sees another's leftovers (they are removed after the check).
 *
 * Scenarios (A and B are the two threads; "data" is a value unique to
 * the round; before the barrier each round opens and writes what A
 * closes):
 *   close_unlink  k open for writing with data. A: close(). B: unlink(k).
 *                 Serial orders: k absent (the close either committed
 *                 before the unlink, or wrote into an unlinked file).
 *   close_rename  the same, B: rename(k, k2). Serial orders: k absent, k2
 *                 holds data (the open file follows the rename).
 *   open_unlink   k exists. A: open(k, O_WRONLY|O_CREAT|O_TRUNC), write,
 *                 close. B: unlink(k). Orders: the open must succeed
 *                 (O_CREAT never fails with ENOENT), and k is absent
 *                 (unlink after the open) or holds data (unlink first).
 *   create_unlink k absent. A: as above. B: unlink(k), 0 or ENOENT.
 *                 Orders: unlink 0 and k absent, or ENOENT and k = data.
 *   rename_chain  a = "A", b = "B". A: rename(a, b). B: rename(b, c).
 *                 Orders: c = "A" (a->b first: both renames succeed) or
 *                 b = "A", c = "B"; a is absent either way.
 *   rename_onto   b open for writing with data, a = "A". A: close(b's
 *                 fd). B: rename(a, b). Orders: b = "A", a absent (the
 *                 written b was either overwritten by the rename or
 *                 replaced before its close, and then commits nothing).
 *   truncate_close k = "AAAAAAAA", open O_WRONLY with "BBBBBBBB" written
 *                 over it. A: close(). B: truncate(k, 4). Orders:
 *                 "BBBB" (close first) or "BBBBBBBB".
 *   close_reload  (only with -c) k open for writing with data. A:
 *                 close(). B: a reload that removes the region (regions.ini
 *                 rewritten without it, and SIGHUP to -p so the reload
 *                 overlaps the close; B waits until the generation in
 *                 .regionfs/config moves and the region is gone). close() must succeed either
 *                 way (nothing is lost: the row is stored even when the
 *                 region is gone), and once the region is back, k holds
 *                 data. -N rounds.
 *   close_outside (only with -D) k = "old", open for writing with data.
 *                 A: close(). B: an outside writer (a connection of its
 *                 own to the database file, as the sqlite3 shell) sets k
 *                 to "outside-N". Orders: the database holds data or
 *                 outside-N, and the mount must come to show what the
 *                 database holds (the change feed's bound; B waits up to
 *                 10 s): a value stranded in the cache never would. -N
 *                 rounds.
 *
 * Output: one line per scenario on stdout,
 *   race: scenario=NAME rounds=N bad=N errors=N [outcome counts]
 * and up to -v detailed violations on stderr. Exit 0 if every scenario
 * had no bad round and no error, 1 if a round ended in an outcome no
 * serial order gives, 2 on usage or I/O errors.
 *
 * Nothing here depends on timing: every check holds for any interleaving,
 * so a correct filesystem passes every run. How often a window is hit
 * depends on the scheduler; a few hundred rounds catch the races this
 * was written for on the unfixed daemon (see tests/consistency/meson.build
 * for the figures), thousands (-n 5000) make a miss unlikely.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "testlib.h"

#define VAL_CAP 256

struct round {
	unsigned n;	/* round number */
	char k[4][512]; /* paths of the round's keys */
	char data[64];	/* the round's unique value */
	int fd;		/* what A closes, or -1 */
	int rc[2];	/* 0 or -errno of A and B */
};

struct scenario {
	const char *name;
	int nkeys;
	int (*setup)(struct round *r);
	int (*a)(struct round *r);
	int (*b)(struct round *r);
	/* NULL if the outcome is a serial one, else what is wrong */
	const char *(*check)(struct round *r, char *why, size_t len);
	bool b_enoent; /* B's ENOENT is an outcome check() judges */
};

static struct {
	const char *dir;
	unsigned rounds;
	unsigned max_reports;
	unsigned watchdog_s;
	pthread_barrier_t start, end;
	const struct scenario *sc; /* the one running */
	struct round r;
	bool quit;
	const char *ini;	/* -c: regions.ini of the mount */
	pid_t pid;		/* -p: the daemon, for SIGHUP */
	char ini_orig[4096];	/* its content at start */
	unsigned reload_rounds; /* -N */
	char config_path[600];	/* MOUNT/.regionfs/config */
	const char *db;		/* -D: the mount's database file */
	char region[256];	/* the region's name (the last part of -d) */
} g = {.rounds = 200,
       .max_reports = 10,
       .watchdog_s = 600,
       .reload_rounds = 50};

/* ---- helpers ------------------------------------------------------------- */

static int err(int rc)
{
	return rc < 0 ? -errno : 0;
}

/* Writes a whole value with O_CREAT|O_TRUNC and close(). */
static int put(const char *path, const char *v)
{
	return tl_write_file(path, v, strlen(v));
}

/* Opens path for writing (flags added) and writes v. -errno or the fd. */
static int open_write(const char *path, int flags, const char *v)
{
	size_t len = strlen(v);
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags, 0644);

	if (fd < 0)
		return -errno;
	if (write(fd, v, len) != (ssize_t)len) {
		close(fd);
		return -EIO;
	}
	return fd;
}

/*
 * Reads a key: 0 with its value in buf (NUL-terminated), -ENOENT if it
 * is absent, -errno else.
 */
static int get(const char *path, char *buf)
{
	size_t len = 0;
	int rc = tl_read_file(path, buf, VAL_CAP - 1, &len);

	buf[rc ? 0 : len] = '\0';
	return rc;
}

/* "absent" or the value in quotes, for messages. */
static const char *show(int rc, const char *v, char *buf, size_t len)
{
	if (rc == -ENOENT)
		snprintf(buf, len, "absent");
	else if (rc)
		snprintf(buf, len, "error %s", strerror(-rc));
	else
		snprintf(buf, len, "\"%.40s\"", v);
	return buf;
}

/* ---- scenarios ----------------------------------------------------------- */

static int a_close(struct round *r)
{
	int rc = err(close(r->fd));

	r->fd = -1;
	return rc;
}

static int b_unlink(struct round *r)
{
	return err(unlink(r->k[0]));
}

static int setup_open(struct round *r)
{
	int fd = open_write(r->k[0], O_CREAT | O_TRUNC, r->data);

	if (fd < 0)
		return fd;
	r->fd = fd;
	return 0;
}

static const char *check_absent(struct round *r, char *why, size_t len)
{
	char v[VAL_CAP], s[80];
	int rc = get(r->k[0], v);

	if (rc == -ENOENT)
		return NULL;
	snprintf(why, len, "k is %s after unlink returned 0",
		 show(rc, v, s, sizeof(s)));
	return why;
}

static int b_rename(struct round *r)
{
	return err(rename(r->k[0], r->k[1]));
}

static const char *check_moved(struct round *r, char *why, size_t len)
{
	char v0[VAL_CAP], v1[VAL_CAP], s0[80], s1[80];
	int rc0 = get(r->k[0], v0), rc1 = get(r->k[1], v1);

	if (rc0 == -ENOENT && rc1 == 0 && strcmp(v1, r->data) == 0)
		return NULL;
	snprintf(why, len, "k is %s, k2 is %s (want absent, \"%s\")",
		 show(rc0, v0, s0, sizeof(s0)), show(rc1, v1, s1, sizeof(s1)),
		 r->data);
	return why;
}

static int setup_exists(struct round *r)
{
	return put(r->k[0], "old");
}

static int a_write_all(struct round *r)
{
	return put(r->k[0], r->data);
}

static const char *check_open_unlink(struct round *r, char *why, size_t len)
{
	char v[VAL_CAP], s[80];
	int rc = get(r->k[0], v);

	if (r->rc[0]) {
		snprintf(why, len, "open(O_CREAT) of k failed: %s",
			 strerror(-r->rc[0]));
		return why;
	}
	if (rc == -ENOENT || (rc == 0 && strcmp(v, r->data) == 0))
		return NULL;
	snprintf(why, len, "k is %s (want absent or \"%s\")",
		 show(rc, v, s, sizeof(s)), r->data);
	return why;
}

static int setup_none(struct round *r)
{
	(void)r;
	return 0;
}

static const char *check_create_unlink(struct round *r, char *why, size_t len)
{
	char v[VAL_CAP], s[80];
	int rc = get(r->k[0], v);

	if (r->rc[1] == 0 && rc == -ENOENT)
		return NULL;
	if (r->rc[1] == -ENOENT && rc == 0 && strcmp(v, r->data) == 0)
		return NULL;
	snprintf(why, len, "unlink returned %s and k is %s",
		 r->rc[1] ? strerror(-r->rc[1]) : "0",
		 show(rc, v, s, sizeof(s)));
	return why;
}

static int setup_chain(struct round *r)
{
	int rc = put(r->k[0], "A");

	return rc ? rc : put(r->k[1], "B");
}

static int a_rename01(struct round *r)
{
	return err(rename(r->k[0], r->k[1]));
}

static int b_rename12(struct round *r)
{
	return err(rename(r->k[1], r->k[2]));
}

static const char *check_chain(struct round *r, char *why, size_t len)
{
	char va[VAL_CAP], vb[VAL_CAP], vc[VAL_CAP], sa[80], sb[80], sc[80];
	int ra = get(r->k[0], va), rb = get(r->k[1], vb), rc = get(r->k[2], vc);

	if (ra == -ENOENT && rb == -ENOENT && rc == 0 && !strcmp(vc, "A"))
		return NULL;
	if (ra == -ENOENT && rb == 0 && !strcmp(vb, "A") && rc == 0 &&
	    !strcmp(vc, "B"))
		return NULL;
	snprintf(why, len, "a %s, b %s, c %s", show(ra, va, sa, sizeof(sa)),
		 show(rb, vb, sb, sizeof(sb)), show(rc, vc, sc, sizeof(sc)));
	return why;
}

static int setup_onto(struct round *r)
{
	int rc = put(r->k[0], "A"), fd;

	if (rc)
		return rc;
	fd = open_write(r->k[1], O_CREAT | O_TRUNC, r->data);
	if (fd < 0)
		return fd;
	r->fd = fd;
	return 0;
}

static const char *check_onto(struct round *r, char *why, size_t len)
{
	char va[VAL_CAP], vb[VAL_CAP], sa[80], sb[80];
	int ra = get(r->k[0], va), rb = get(r->k[1], vb);

	if (ra == -ENOENT && rb == 0 && strcmp(vb, "A") == 0)
		return NULL;
	snprintf(why, len, "a %s, b %s (want absent, \"A\")",
		 show(ra, va, sa, sizeof(sa)), show(rb, vb, sb, sizeof(sb)));
	return why;
}

static int setup_trunc(struct round *r)
{
	int rc = put(r->k[0], "AAAAAAAA"), fd;

	if (rc)
		return rc;
	fd = open_write(r->k[0], 0, "BBBBBBBB");
	if (fd < 0)
		return fd;
	r->fd = fd;
	return 0;
}

static int b_truncate(struct round *r)
{
	return err(truncate(r->k[0], 4));
}

static const char *check_trunc(struct round *r, char *why, size_t len)
{
	char v[VAL_CAP], s[80];
	int rc = get(r->k[0], v);

	if (rc == 0 && (!strcmp(v, "BBBB") || !strcmp(v, "BBBBBBBB")))
		return NULL;
	snprintf(why, len, "k is %s (want \"BBBB\" or \"BBBBBBBB\")",
		 show(rc, v, s, sizeof(s)));
	return why;
}

/* The generation .regionfs/config shows, or 0. */
static unsigned long generation(void)
{
	char buf[VAL_CAP * 16], *p;
	ssize_t n;
	int fd = open(g.config_path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strstr(buf, "\ngeneration ");
	if (!p && strncmp(buf, "generation ", 11) == 0)
		p = buf - 1;
	return p ? strtoul(p + 12, NULL, 10) : 0;
}

/*
 * Replaces regions.ini with text (a new file renamed over it, as editors
 * save), sends the daemon SIGHUP if -p named it (a reload at once; its
 * inotify watch reloads again RELOAD_DEBOUNCE_MS later, reading the file
 * as it is then), and waits, polling every millisecond for at most 10 s,
 * until a reload has happened and the region is there or not as present
 * says.
 */
static int reload_to(const char *text, bool present)
{
	char tmp[600];
	unsigned long g0 = generation();
	int i, fd;

	snprintf(tmp, sizeof(tmp), "%s.race-tmp", g.ini);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
	    close(fd) || rename(tmp, g.ini))
		return errno ? -errno : -EIO;
	if (g.pid)
		kill(g.pid, SIGHUP);
	for (i = 0; i < 10000; i++) {
		if (generation() > g0 && (access(g.dir, F_OK) == 0) == present)
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

static int b_reload_away(struct round *r)
{
	(void)r;
	return reload_to("; race.c: the region is away for a moment\n"
			 "[race_spare]\nmax_entries = 16\n",
			 false);
}

static const char *check_reload(struct round *r, char *why, size_t len)
{
	char v[VAL_CAP], s[80];
	int rc = reload_to(g.ini_orig, true);

	if (!rc)
		rc = get(r->k[0], v);
	if (r->rc[0] == 0 && rc == 0 && strcmp(v, r->data) == 0)
		return NULL;
	snprintf(why, len, "close() %s, then k is %s (want 0, \"%s\")",
		 r->rc[0] ? strerror(-r->rc[0]) : "0",
		 show(rc, v, s, sizeof(s)), r->data);
	return why;
}

/* ---- an outside writer -------------------------------------------------- */

static const char *base(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Runs sql with ?1 = the region, ?2 = the key of path, ?3 = text. */
static int outside_sql(const char *sql, const char *path, const char *text,
		       char *out, size_t outlen)
{
	sqlite3_stmt *st = NULL;
	sqlite3 *db = NULL;
	int rc;

	rc = sqlite3_open_v2(g.db, &db, SQLITE_OPEN_READWRITE, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_busy_timeout(db, 10000);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, g.region, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, base(path), -1, SQLITE_STATIC);
		if (text)
			sqlite3_bind_text(st, 3, text, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW && out)
			snprintf(out, outlen, "%.*s",
				 sqlite3_column_bytes(st, 0),
				 (const char *)sqlite3_column_blob(st, 0));
		else if (rc == SQLITE_DONE && out)
			rc = SQLITE_NOTFOUND;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE && rc != SQLITE_NOTFOUND)
		fprintf(stderr, "race: sqlite3: %s\n", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	sqlite3_close(db);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0
	       : rc == SQLITE_NOTFOUND		     ? -ENOENT
						     : -EIO;
}

static int setup_outside(struct round *r)
{
	int rc = put(r->k[0], "old");

	return rc ? rc : setup_open(r);
}

static int b_outside(struct round *r)
{
	char text[64];

	snprintf(text, sizeof(text), "outside-%u", r->n);
	return outside_sql("INSERT INTO kv(region, key, value) "
			   "VALUES (?1, ?2, CAST(?3 AS BLOB)) "
			   "ON CONFLICT(region, key) DO UPDATE "
			   "SET value = excluded.value",
			   r->k[0], text, NULL, 0);
}

static const char *check_outside(struct round *r, char *why, size_t len)
{
	char want[VAL_CAP], v[VAL_CAP], other[64], s[80];
	int i, rc;

	snprintf(other, sizeof(other), "outside-%u", r->n);
	rc = outside_sql("SELECT value FROM kv WHERE region = ?1 AND key = ?2",
			 r->k[0], NULL, want, sizeof(want));
	if (rc || (strcmp(want, r->data) && strcmp(want, other))) {
		snprintf(why, len, "the database holds %s",
			 show(rc, want, s, sizeof(s)));
		return why;
	}
	for (i = 0; i < 10000; i++) { /* the change feed's delay */
		rc = get(r->k[0], v);
		if (rc == 0 && strcmp(v, want) == 0)
			return NULL;
		usleep(1000);
	}
	snprintf(why, len, "the database holds \"%s\", the mount still %s",
		 want, show(rc, v, s, sizeof(s)));
	return why;
}

static const struct scenario scenarios[] = {
	{"close_unlink", 1, setup_open, a_close, b_unlink, check_absent, false},
	{"close_rename", 2, setup_open, a_close, b_rename, check_moved, false},
	{"open_unlink", 1, setup_exists, a_write_all, b_unlink,
	 check_open_unlink, false},
	{"create_unlink", 1, setup_none, a_write_all, b_unlink,
	 check_create_unlink, true},
	{"rename_chain", 3, setup_chain, a_rename01, b_rename12, check_chain,
	 false},
	{"rename_onto", 2, setup_onto, a_close, a_rename01, check_onto, false},
	{"truncate_close", 1, setup_trunc, a_close, b_truncate, check_trunc,
	 false},
	{"close_reload", 1, setup_open, a_close, b_reload_away, check_reload,
	 false},
	{"close_outside", 1, setup_outside, a_close, b_outside, check_outside,
	 false},
};
#define NSCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

/* ---- rounds -------------------------------------------------------------- */

static void *worker(void *arg)
{
	int who = (int)(intptr_t)arg;

	for (;;) {
		pthread_barrier_wait(&g.start);
		if (g.quit)
			return NULL;
		g.r.rc[who] = who == 0 ? g.sc->a(&g.r) : g.sc->b(&g.r);
		pthread_barrier_wait(&g.end);
	}
}

static void cleanup_round(const struct round *r, int nkeys)
{
	int i;

	for (i = 0; i < nkeys; i++)
		unlink(r->k[i]);
}

/* Runs one scenario; returns 0, 1 (bad rounds) or 2 (errors). */
static int run(const struct scenario *sc)
{
	unsigned i, bad = 0, errors = 0, absent = 0;
	char why[512];
	int j, rc;
	bool slow = sc->b == b_reload_away || sc->b == b_outside;
	unsigned rounds = slow ? g.reload_rounds : g.rounds;

	g.sc = sc;
	for (i = 0; i < rounds; i++) {
		struct round *r = &g.r;

		memset(r, 0, sizeof(*r));
		r->n = i;
		r->fd = -1;
		for (j = 0; j < sc->nkeys; j++)
			snprintf(r->k[j], sizeof(r->k[j]), "%s/%s-%u-%c", g.dir,
				 sc->name, i, 'a' + j);
		snprintf(r->data, sizeof(r->data), "data-%s-%u", sc->name, i);
		rc = sc->setup(r);
		if (rc) {
			tl_report("%s round %u: setup: %s", sc->name, i,
				  strerror(-rc));
			errors++;
			cleanup_round(r, sc->nkeys);
			continue;
		}
		pthread_barrier_wait(&g.start);
		pthread_barrier_wait(&g.end);
		if (r->fd >= 0)
			close(r->fd);
		if (sc->check(r, why, sizeof(why))) {
			tl_report("%s round %u: not a serial outcome: %s",
				  sc->name, i, why);
			bad++;
		} else if (r->rc[0] || (r->rc[1] && !(sc->b_enoent &&
						      r->rc[1] == -ENOENT))) {
			tl_report("%s round %u: A %s, B %s", sc->name, i,
				  strerror(-r->rc[0]), strerror(-r->rc[1]));
			errors++;
		}
		if (access(r->k[0], F_OK) != 0)
			absent++;
		cleanup_round(r, sc->nkeys);
	}
	printf("race: scenario=%s rounds=%u bad=%u errors=%u k_absent=%u\n",
	       sc->name, rounds, bad, errors, absent);
	fflush(stdout);
	return bad ? 1 : errors ? 2 : 0;
}

static void on_alarm(int sig)
{
	static const char msg[] = "race: watchdog: a round hangs\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing to do */
	}
	_exit(2);
}

static void usage(void)
{
	size_t i;

	fprintf(stderr,
		"usage: race -d REGION_DIR [-n rounds] "
		"[-s scenario,...] [-v max_reports] [-t watchdog_s]\n"
		"            [-N slow_rounds] [-c regions.ini [-p pid]] "
		"[-D database]\n"
		"scenarios:");
	for (i = 0; i < NSCENARIOS; i++)
		fprintf(stderr, " %s", scenarios[i].name);
	fprintf(stderr, "\n");
	exit(2);
}

/* Reads regions.ini (-c) and finds .regionfs/config above the region. */
static int load_ini(void)
{
	const char *slash = strrchr(g.dir, '/');
	int fd = open(g.ini, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0 || !slash) {
		perror(g.ini);
		return -1;
	}
	n = read(fd, g.ini_orig, sizeof(g.ini_orig) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	g.ini_orig[n] = '\0';
	snprintf(g.config_path, sizeof(g.config_path), "%.*s/.regionfs/config",
		 (int)(slash - g.dir), g.dir);
	return generation() ? 0 : -1;
}

/* Is name in the comma-separated list (NULL: every scenario)? */
static bool chosen(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p;

	if (!list)
		return true;
	for (p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	const char *list = NULL;
	pthread_t t[2];
	int c, worst = 0, rc, n = 0;
	size_t i;

	while ((c = getopt(argc, argv, "d:n:s:v:t:c:N:p:D:")) != -1) {
		switch (c) {
		case 'd':
			g.dir = optarg;
			break;
		case 'n':
			g.rounds = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 's':
			list = optarg;
			break;
		case 'v':
			g.max_reports = (unsigned)atoi(optarg);
			break;
		case 't':
			g.watchdog_s = (unsigned)atoi(optarg);
			break;
		case 'c':
			g.ini = optarg;
			break;
		case 'N':
			g.reload_rounds = (unsigned)atoi(optarg);
			break;
		case 'p':
			g.pid = (pid_t)atoi(optarg);
			break;
		case 'D':
			g.db = optarg;
			break;
		default:
			usage();
		}
	}
	tl_report_max(g.max_reports);
	if (!g.dir || !g.rounds)
		usage();
	if (g.ini && load_ini())
		return 2;
	snprintf(g.region, sizeof(g.region), "%s", base(g.dir));
	for (i = 0; i < NSCENARIOS; i++)
		n += chosen(list, scenarios[i].name);
	if (!n)
		usage();
	signal(SIGALRM, on_alarm);
	alarm(g.watchdog_s);
	pthread_barrier_init(&g.start, NULL, 3);
	pthread_barrier_init(&g.end, NULL, 3);
	for (c = 0; c < 2; c++)
		pthread_create(&t[c], NULL, worker, (void *)(intptr_t)c);
	for (i = 0; i < NSCENARIOS; i++) {
		if (!chosen(list, scenarios[i].name) ||
		    (scenarios[i].b == b_reload_away && !g.ini) ||
		    (scenarios[i].b == b_outside && !g.db))
			continue;
		rc = run(&scenarios[i]);
		if (rc == 1 || (rc == 2 && worst == 0))
			worst = rc;
	}
	g.quit = true;
	pthread_barrier_wait(&g.start);
	for (c = 0; c < 2; c++)
		pthread_join(t[c], NULL);
	return worst;
}
