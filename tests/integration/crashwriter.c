/*
 * crashwriter.c - the writer and the checker of the kill -9 test.
 *
 *   crashwriter write  DIR LOG NKEYS MAXOPS
 *   crashwriter verify DIR LOG NKEYS
 *
 * write: op i (0, 1, 2, ...) writes value(i) to key DIR/c<i % NKEYS> with
 * open(O_WRONLY|O_CREAT|O_TRUNC), write(), close(). Only after close()
 * returned 0 it appends "ok i" to LOG (a file outside the mount, written
 * with O_APPEND and no buffering, so the test script can watch progress).
 * At the first error (the daemon was killed: ENOTCONN and friends) it
 * appends "fail i ERRNO-TEXT" and exits 0. Ops are sequential, so at most
 * one op (the failed one) was in flight when the daemon died. Reaching
 * MAXOPS appends "end" (the test then failed to kill mid-write).
 *
 * verify (on a fresh mount): for every key, with last = its last "ok" op
 * and f = the failed op if f % NKEYS is that key:
 *  - a key with an "ok" op must hold value(last) or value(f): f may have
 *    been committed before the daemon died, its reply lost;
 *  - a key without one must be absent, empty (created, never committed)
 *    or hold value(f).
 * So no value whose close() returned 0 is lost or replaced by an older
 * one, and nothing appears that was never written. Values are
 * self-describing ("crash key=K op=I body=B\n" + B bytes of (K, I)) with
 * B from 0 to 24 KiB, so a torn or truncated row is caught too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#define MAX_VALUE (24 * 1024 + 64)
#define NO_OP	  (-1L)

/* value(op) of key k into buf; returns its length. */
static size_t make_value(char *buf, unsigned k, long op)
{
	size_t body = tl_mix32((unsigned)op) % (24 * 1024), n;

	n = (size_t)snprintf(buf, MAX_VALUE, "crash key=%u op=%ld body=%zu\n",
			     k, op, body);
	for (size_t i = 0; i < body; i++)
		buf[n + i] = (char)(tl_mix32((unsigned)op * 31u + k) + i * 7u);
	return n + body;
}

static int write_op(const char *dir, unsigned nkeys, long op, char *buf)
{
	unsigned k = (unsigned)(op % nkeys);
	size_t len = make_value(buf, k, op);
	char path[TL_PATH_MAX];

	tl_key_path(path, sizeof(path), dir, "c", 4, k);
	return tl_write_file(path, buf, len);
}

static int do_write(const char *dir, const char *logpath, unsigned nkeys,
		    long maxops)
{
	char *buf = malloc(MAX_VALUE);
	int logfd, rc;

	logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (logfd < 0 || !buf)
		tl_die("cannot open %s", logpath);
	for (long op = 0; op < maxops; op++) {
		rc = write_op(dir, nkeys, op, buf);
		if (rc) {
			dprintf(logfd, "fail %ld %s\n", op, strerror(-rc));
			printf("crashwriter: %ld ops committed, op %ld failed: "
			       "%s\n",
			       op, op, strerror(-rc));
			goto out;
		}
		dprintf(logfd, "ok %ld\n", op);
	}
	dprintf(logfd, "end\n");
out:
	close(logfd);
	free(buf);
	return 0;
}

/* Reads LOG into last[] (per key) and *failed. */
static void read_log(const char *logpath, unsigned nkeys, long *last,
		     long *failed, long *nok)
{
	FILE *f = fopen(logpath, "r");
	char line[256];
	long op;

	if (!f)
		tl_die("cannot read %s", logpath);
	*failed = NO_OP;
	*nok = 0;
	for (unsigned k = 0; k < nkeys; k++)
		last[k] = NO_OP;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "ok %ld", &op) == 1) {
			last[op % nkeys] = op;
			(*nok)++;
		} else if (sscanf(line, "fail %ld", &op) == 1) {
			*failed = op;
		} else if (strncmp(line, "end", 3) != 0) {
			tl_die("bad log line: %s", line);
		}
	}
	fclose(f);
}

/* Reads key k; returns its length, or -1 if absent. */
static long read_key(const char *dir, unsigned k, char *buf)
{
	char path[TL_PATH_MAX];
	size_t len;
	int rc;

	tl_key_path(path, sizeof(path), dir, "c", 4, k);
	rc = tl_read_file(path, buf, MAX_VALUE, &len);
	if (rc == -ENOENT)
		return -1;
	if (rc)
		tl_die("%s %s: %s", tl_failed_call(), path, strerror(-rc));
	buf[len] = '\0'; /* buf holds MAX_VALUE + 1 bytes */
	return (long)len;
}

static int is_value(const char *got, long len, unsigned k, long op, char *want)
{
	size_t wlen;

	if (op == NO_OP)
		return 0;
	wlen = make_value(want, k, op);
	return (size_t)len == wlen && memcmp(got, want, wlen) == 0;
}

static int do_verify(const char *dir, const char *logpath, unsigned nkeys)
{
	long *last = calloc(nkeys, sizeof(*last)), failed, nok, len, f;
	char *buf = malloc(MAX_VALUE + 1), *want = malloc(MAX_VALUE + 1);
	unsigned bad = 0, inflight = 0;

	if (!last || !buf || !want)
		tl_die("out of memory");
	read_log(logpath, nkeys, last, &failed, &nok);
	for (unsigned k = 0; k < nkeys; k++) {
		f = failed != NO_OP && failed % nkeys == k ? failed : NO_OP;
		len = read_key(dir, k, buf);
		if (is_value(buf, len, k, f, want)) {
			inflight++;
			continue;
		}
		if (last[k] == NO_OP && (len <= 0))
			continue; /* absent, or created and never committed */
		if (last[k] != NO_OP && is_value(buf, len, k, last[k], want))
			continue;
		fprintf(stderr,
			"crashwriter: key %u: expected op %ld%s, found "
			"%ld bytes: %.40s\n",
			k, last[k], f != NO_OP ? " or the failed op" : "", len,
			len > 0 ? buf : "");
		bad++;
	}
	printf("crashwriter: %ld committed ops over %u keys checked, failed "
	       "op %ld %s, %u bad\n",
	       nok, nkeys, failed,
	       inflight ? "was committed" : "was not committed", bad);
	free(last);
	free(buf);
	free(want);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	long nkeys;

	if (argc >= 5 && strcmp(argv[1], "write") == 0) {
		nkeys = atol(argv[4]);
		if (nkeys < 1 || nkeys > 9999 || argc != 6)
			tl_die("bad arguments");
		setvbuf(stdout, NULL, _IONBF, 0);
		return do_write(argv[2], argv[3], (unsigned)nkeys,
				atol(argv[5]));
	}
	if (argc == 5 && strcmp(argv[1], "verify") == 0) {
		nkeys = atol(argv[4]);
		if (nkeys < 1 || nkeys > 9999)
			tl_die("bad arguments");
		return do_verify(argv[2], argv[3], (unsigned)nkeys);
	}
	fprintf(stderr, "usage: crashwriter write DIR LOG NKEYS MAXOPS\n"
			"       crashwriter verify DIR LOG NKEYS\n");
	return 2;
}
