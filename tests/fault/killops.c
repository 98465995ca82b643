/*
 * killops.c - renames or unlinks and re-creates keys through a mount until
 * the daemon dies under it (SIGKILL from the test), logging every
 * operation before it starts and once it returned; then, after a restart,
 * checks that the store holds exactly what the acknowledged operations
 * say, with only the one operation in flight at the kill left open (old
 * or new state, nothing lost, nothing doubled).
 *
 *   killops run DIR MODE NKEYS LOG SEED
 *   killops check DIR MODE NKEYS LOG
 *   killops init DIR MODE NKEYS
 *
 * MODE rename: key i is one file, named ri.a or ri.b, whose value is
 * val(i); each operation renames it to its other name. After the kill,
 * exactly one of the two names exists, with val(i) whole: the acknowledged
 * one, or for the key in flight either one.
 *
 * MODE unlink: key ui is absent or holds val(i); each operation unlinks a
 * present key, or re-creates an absent one (open O_CREAT|O_EXCL, write,
 * close). After the kill every key is as its last acknowledged operation
 * left it; the key in flight is old or new, and a re-create in flight may
 * also have left the key empty (O_CREAT makes the name before the value's
 * commit, as on any file system).
 *
 * run starts from what DIR holds (the previous round's state, checked),
 * writes "I <state>" (one character per key: a/b, or 1/0) and then
 * "S <i>" before and "A <i>" after each operation to LOG (O_APPEND, one
 * write(2) each), and stops at the first error (the daemon is dead:
 * ENOTCONN) or after 1,000,000 operations. check reads LOG and DIR.
 *
 * Exit 0 if every check held, 1 otherwise, 2 on usage errors.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#define MAXKEYS 256
#define VAL_MAX 8192

static const char *dir;
static bool mode_rename;
static unsigned nkeys;
static char state[MAXKEYS + 1];

static size_t val(unsigned i, uint8_t *buf)
{
	size_t n = 100 + tl_mix32(i) % 4000, j;

	for (j = 0; j < n; j++)
		buf[j] = (uint8_t)tl_mix32(i * 7919u + (unsigned)j);
	return n;
}

static void name_of(char *buf, size_t cap, unsigned i, char s)
{
	if (mode_rename)
		snprintf(buf, cap, "%s/r%u.%c", dir, i, s);
	else
		snprintf(buf, cap, "%s/u%u", dir, i);
}

/*
 * What DIR holds for key i: 'a'/'b' (rename), '1'/'0' (unlink), 'e' an
 * empty re-created key, '2' both rename names, '-' neither, 'x' a wrong
 * value, '?' an error.
 */
static char observe(unsigned i)
{
	static char buf[VAL_MAX + 1];
	uint8_t want[VAL_MAX];
	size_t wlen = val(i, want), len;
	char p[TL_PATH_MAX];
	char got[2];
	int n = 0, rc;
	unsigned s;

	for (s = 0; s < (mode_rename ? 2u : 1u); s++) {
		name_of(p, sizeof(p), i, (char)('a' + s));
		rc = tl_read_file(p, buf, sizeof(buf), &len);
		if (rc == -ENOENT)
			continue;
		if (rc)
			return '?';
		if (!mode_rename && len == 0)
			return 'e';
		if (len != wlen || memcmp(buf, want, len))
			return 'x';
		got[n++] = (char)('a' + s);
	}
	if (!mode_rename)
		return n ? '1' : '0';
	return n == 2 ? '2' : n == 1 ? got[0] : '-';
}

static int logfd;

/* One log line "C I" (C: S or A), one write(2). */
static void log_line(char c, unsigned i)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%c %u\n", c, i);

	if (write(logfd, line, (size_t)n) != n)
		tl_die("log: %s", strerror(errno));
}

static int op(unsigned i)
{
	uint8_t buf[VAL_MAX];
	char from[TL_PATH_MAX], to[TL_PATH_MAX];
	size_t n;
	int fd;

	if (mode_rename) {
		char other = state[i] == 'a' ? 'b' : 'a';

		name_of(from, sizeof(from), i, state[i]);
		name_of(to, sizeof(to), i, other);
		if (rename(from, to))
			return -errno;
		state[i] = other;
		return 0;
	}
	name_of(from, sizeof(from), i, 0);
	if (state[i] == '1') {
		if (unlink(from))
			return -errno;
		state[i] = '0';
		return 0;
	}
	n = val(i, buf);
	fd = open(from, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, n) != (ssize_t)n) {
		int err = errno;

		close(fd);
		return -err;
	}
	if (close(fd))
		return -errno;
	state[i] = '1';
	return 0;
}

/* Creates every key: ri.a, or ui. */
static void init(void)
{
	unsigned i;

	uint8_t buf[VAL_MAX];
	char p[TL_PATH_MAX];
	size_t n;
	int rc;

	for (i = 0; i < nkeys; i++) {
		name_of(p, sizeof(p), i, 'a');
		n = val(i, buf);
		rc = tl_write_file(p, buf, n);
		if (rc)
			tl_die("creating %s: %s", p, strerror(-rc));
	}
}

static int run(const char *log, uint64_t seed)
{
	uint64_t rng = seed ? seed : 1;
	unsigned i;
	long n;

	for (i = 0; i < nkeys; i++) {
		state[i] = observe(i);
		if (state[i] == 'e') { /* a re-create the last kill cut short */
			char p[TL_PATH_MAX];

			name_of(p, sizeof(p), i, 0);
			if (unlink(p))
				tl_die("unlink %s: %s", p, strerror(errno));
			state[i] = '0';
		}
		if (!strchr(mode_rename ? "ab" : "01", state[i]))
			tl_die("key %u: state '%c' at the start", i, state[i]);
	}
	logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (logfd < 0)
		tl_die("%s: %s", log, strerror(errno));
	if (dprintf(logfd, "I %s\n", state) < 0)
		tl_die("log: %s", strerror(errno));
	for (n = 0; n < 1000000; n++) {
		int rc;

		i = (unsigned)tl_rand_below(&rng, nkeys);
		log_line('S', i);
		rc = op(i);
		if (rc) {
			printf("killops: %ld operations, then %s\n", n,
			       strerror(-rc));
			break;
		}
		log_line('A', i);
	}
	close(logfd);
	return 0;
}

static int check(const char *log)
{
	FILE *f = fopen(log, "r");
	char line[MAXKEYS + 16], before = 0;
	unsigned i, acked = 0;
	long inflight = -1;
	bool have_init = false;

	if (!f)
		tl_die("%s: %s", log, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == 'I' && strlen(line) == nkeys + 3) {
			memcpy(state, line + 2, nkeys);
			have_init = true;
		} else if (line[0] == 'S' && sscanf(line, "S %u", &i) == 1 &&
			   i < nkeys && inflight < 0) {
			inflight = i;
			before = state[i];
		} else if (line[0] == 'A' && sscanf(line, "A %u", &i) == 1 &&
			   (long)i == inflight) {
			state[i] = mode_rename ? (before == 'a' ? 'b' : 'a')
					       : (before == '1' ? '0' : '1');
			inflight = -1;
			acked++;
		} else {
			tl_die("%s: bad line %s", log, line);
		}
	}
	fclose(f);
	if (!have_init)
		tl_die("%s: no I line", log);
	for (i = 0; i < nkeys; i++) {
		char got = observe(i), other;

		if (got == state[i])
			continue;
		other = mode_rename ? (state[i] == 'a' ? 'b' : 'a')
				    : (state[i] == '1' ? '0' : '1');
		if ((long)i == inflight &&
		    (got == other ||
		     (!mode_rename && state[i] == '0' && got == 'e')))
			continue;
		tl_report("key %u: '%c', acknowledged state '%c'%s", i, got,
			  state[i], (long)i == inflight ? " (in flight)" : "");
	}
	/* no stray names (a duplicate under a third name, a temporary) */
	{
		DIR *d = opendir(dir);
		struct dirent *de;
		unsigned long k;
		char *end;

		if (!d)
			tl_die("%s: %s", dir, strerror(errno));
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			k = strtoul(de->d_name + 1, &end, 10);
			if (de->d_name[0] != (mode_rename ? 'r' : 'u') ||
			    k >= nkeys ||
			    (mode_rename
				     ? strcmp(end, ".a") && strcmp(end, ".b")
				     : *end != 0))
				tl_report("stray name '%s'", de->d_name);
		}
		closedir(d);
	}
	/* the key in flight resolved: the next round starts from it */
	if (inflight >= 0) {
		char got = observe((unsigned)inflight);

		printf("killops: %u acknowledged, key %ld in flight: %s\n",
		       acked, inflight,
		       got == before ? "old"
		       : got == 'e'  ? "empty"
				     : "new");
	} else
		printf("killops: %u acknowledged, none in flight\n", acked);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc != 7 || strcmp(argv[1], "run")) &&
	    (argc != 6 || strcmp(argv[1], "check")) &&
	    (argc != 5 || strcmp(argv[1], "init"))) {
		fprintf(stderr, "usage: killops run DIR MODE NKEYS LOG SEED\n"
				"       killops check DIR MODE NKEYS LOG\n"
				"       killops init DIR MODE NKEYS\n");
		return 2;
	}
	dir = argv[2];
	mode_rename = !strcmp(argv[3], "rename");
	if (!mode_rename && strcmp(argv[3], "unlink"))
		tl_die("MODE is rename or unlink");
	nkeys = (unsigned)strtoul(argv[4], NULL, 10);
	if (nkeys < 1 || nkeys > MAXKEYS)
		tl_die("NKEYS is 1..%d", MAXKEYS);
	if (argv[1][0] == 'i')
		init();
	else if (argv[1][0] == 'r')
		run(argv[5], strtoull(argv[6], NULL, 0));
	else
		check(argv[5]);
	return tl_reported() ? 1 : 0;
}
