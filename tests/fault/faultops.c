/*
 * faultops.c - random operations on one region of a mount while a fault
 * is in force (disk full, the database locked by an outside writer,
 * injected allocation or I/O failures), each result checked against an
 * exact model, and the check of the state afterwards.
 *
 *   faultops run DIR STATE SEED NOPS ERRNOS
 *   faultops verify DIR STATE
 *   faultops compare DIR DB REGION
 *
 * The model (STATE, a text file: one line "NAME SIZE SEED" per key that
 * exists) is read at the start of run (missing: DIR must be empty) and
 * written back at its end. Keys are k00..k15; the value of (SIZE, SEED)
 * is a function of both.
 *
 * run does NOPS operations chosen at random: write (open O_CREAT|O_TRUNC,
 * write()s, close) 35 %, read whole and compare 25 %, rename onto another
 * key 15 %, unlink 15 %, list the directory 5 %, stat 5 %. A result is
 * either success, with the model changed exactly as the operation says,
 * or a failure with an errno in ERRNOS (a comma-separated list of names:
 * ENOSPC,ENOMEM,EIO,EAGAIN; "none" for none), with the model unchanged:
 * a write whose open or close failed leaves the old value, or no key when
 * there was none - or, where even the daemon's clean-up of the key that
 * open(O_CREAT) made failed, an empty key (counted: left_empty=N); a
 * write() that failed before a close() that worked leaves what the
 * writes before it wrote, as on any file system. A failed rename or
 * unlink leaves both names as they were. ENOENT is right exactly when the model has no
 * such key. Any other errno, a wrong value, a wrong listing or size is a
 * finding. Each write picks a size of 0..MAXSIZE (env FAULTOPS_MAXSIZE,
 * default 65536).
 *
 * verify reads every key and lists DIR: exactly the model's keys, each
 * with its value; no error is allowed. compare checks DIR against the
 * rows of REGION in the database DB instead of a model.
 *
 * FAULTOPS_LENIENT=1: run checks only the errnos, not the model (for
 * faults under SQLite, where a change whose COMMIT reported an error may
 * have been committed all the same); run it with compare after.
 *
 * Output: "faultops: ops=N ok=N left_empty=N failed=ENOSPC=N,... write=OK/FAILED
 * rename=OK/FAILED unlink=OK/FAILED" on stdout (a rename or unlink of an
 * absent key is neither), the
 * first findings on stderr. Exit 0 if every check held, 1 otherwise, 2 on
 * usage errors.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "testlib.h"

#define NKEYS 16

struct key {
	bool present;
	bool maybe; /* a failed create: absent, or present and empty */
	size_t size;
	uint64_t seed;
};

static struct key model[NKEYS];
static const char *dir;
static size_t maxsize = 65536;
static int allowed[16];
static unsigned nallowed;
static unsigned long nerr[256];
static unsigned long nops, nok, nleft;
static bool trace; /* FAULTOPS_TRACE=1: every failure on stderr */

/* What an operation saw of key k settles a "maybe" key. */
static void resolve(unsigned k, bool exists)
{
	if (trace && model[k].maybe)
		fprintf(stderr, "#%lu k%02u: maybe resolved: %s\n", nops, k,
			exists ? "exists" : "absent");
	if (!model[k].maybe)
		return;
	model[k] = (struct key){.present = exists};
	nleft += exists;
	if (trace && exists)
		fprintf(stderr, "#%lu k%02u: left empty by a failed create\n",
			nops, k);
}

/* Per kind of change: done, failed with an allowed or other errno. */
enum { K_WRITE, K_RENAME, K_UNLINK, NKINDS };
static const char *const kind_name[NKINDS] = {"write", "rename", "unlink"};
static unsigned long kind_ok[NKINDS], kind_failed[NKINDS];

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{"ENOSPC", ENOSPC}, {"ENOMEM", ENOMEM}, {"EIO", EIO},
	{"EAGAIN", EAGAIN}, {"EBUSY", EBUSY},	{"EDQUOT", EDQUOT},
	{"EFBIG", EFBIG},   {"ENOENT", ENOENT}, {"ESTALE", ESTALE},
};

static const char *errname(int err)
{
	size_t i;

	for (i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (errnames[i].err == err)
			return errnames[i].name;
	return strerror(err);
}

static void fill(uint8_t *buf, size_t size, uint64_t seed)
{
	size_t i;

	for (i = 0; i < size; i++)
		buf[i] = (uint8_t)(tl_mix64(seed * 0x9e3779b97f4a7c15ull +
					    i / 8) >>
				   (8 * (i % 8)));
}

static char *key_path(char *buf, size_t cap, unsigned k)
{
	return tl_key_path(buf, cap, dir, "k", 2, k);
}

static bool err_allowed(int err)
{
	unsigned i;

	for (i = 0; i < nallowed; i++)
		if (allowed[i] == err)
			return true;
	return false;
}

/* A failed operation: counted; a finding unless its errno is allowed. */
/* FAULTOPS_LENIENT=1: only errnos are checked, not the model (see top) */
static bool lenient;
#define model_report(...)                                                      \
	do {                                                                   \
		if (!lenient)                                                  \
			tl_report(__VA_ARGS__);                                \
	} while (0)

static void failed(const char *op, unsigned k, int err)
{
	if (trace)
		fprintf(stderr, "#%lu %s k%02u: %s\n", nops, op, k,
			errname(err));
	nerr[err & 0xff]++;
	if (!err_allowed(err))
		tl_report("%s k%02u: unexpected %s (%d)", op, k, errname(err),
			  err);
}

static void check_value(const char *op, unsigned k, const uint8_t *got,
			size_t len)
{
	static uint8_t want[1 << 22];

	if (len != model[k].size) {
		model_report("%s k%02u: %zu bytes, model %zu", op, k, len,
			     model[k].size);
		return;
	}
	fill(want, len, model[k].seed);
	if (memcmp(want, got, len))
		model_report("%s k%02u: wrong content (seed %" PRIu64 ")", op,
			     k, model[k].seed);
}

static int do_read(unsigned k, bool strict)
{
	static char buf[1 << 22];
	char p[TL_PATH_MAX];
	size_t len;
	int rc =
		tl_read_file(key_path(p, sizeof(p), k), buf, sizeof(buf), &len);

	if (rc == 0 || rc == -ENOENT)
		resolve(k, rc == 0);
	if (rc == 0) {
		if (!model[k].present)
			model_report("read k%02u: exists, model: absent", k);
		else
			check_value("read", k, (uint8_t *)buf, len);
		return 0;
	}
	if (rc == -ENOENT && !model[k].present)
		return 0;
	if (rc == -ENOENT)
		model_report("read k%02u: ENOENT, model: %zu bytes", k,
			     model[k].size);
	else if (strict)
		tl_report("read k%02u: %s in %s", k, errname(-rc),
			  tl_failed_call());
	else
		failed("read", k, -rc);
	return rc;
}

/*
 * open(O_CREAT|O_TRUNC), 1-3 write()s, close(). What a failure leaves is
 * what it leaves on any file system: a failed open or close changes
 * nothing; a write() that failed ends the writing, and if the close()
 * then succeeds the key holds what the writes before it wrote (the
 * prefix, empty if none: O_TRUNC).
 */
static void do_write(unsigned k, uint64_t *rng)
{
	static uint8_t buf[1 << 22];
	char p[TL_PATH_MAX];
	size_t size = tl_rand_below(rng, maxsize + 1), off = 0, end;
	unsigned parts = 1 + (unsigned)tl_rand_below(rng, 3), i;
	uint64_t seed = tl_rand(rng);
	int fd, werr = 0;

	fill(buf, size, seed);
	fd = open(key_path(p, sizeof(p), k), O_WRONLY | O_CREAT | O_TRUNC,
		  0644);
	if (fd < 0) {
		kind_failed[K_WRITE]++;
		failed("open", k, errno);
		model[k].maybe |= !model[k].present;
		return;
	}
	for (i = 1; i <= parts && !werr; i++) {
		end = i == parts ? size : size / parts * i;
		while (off < end) {
			ssize_t n = write(fd, buf + off, end - off);

			if (n < 0) {
				werr = errno;
				break;
			}
			off += (size_t)n;
		}
	}
	if (werr)
		failed("write", k, werr);
	if (close(fd)) {
		kind_failed[K_WRITE]++;
		failed("close", k, errno);
		model[k].maybe |= !model[k].present;
		return;
	}
	if (werr) {
		kind_failed[K_WRITE]++;
		model[k] = (struct key){
			.present = true, .size = off, .seed = seed};
		return;
	}
	nok++;
	kind_ok[K_WRITE]++;
	model[k] = (struct key){.present = true, .size = size, .seed = seed};
}

static void do_rename(unsigned a, unsigned b)
{
	char pa[TL_PATH_MAX], pb[TL_PATH_MAX];

	if (rename(key_path(pa, sizeof(pa), a), key_path(pb, sizeof(pb), b))) {
		int err = errno;

		if (err == ENOENT)
			resolve(a, false);
		if (err == ENOENT && !model[a].present)
			return;
		if (err == ENOENT)
			model_report(
				"rename k%02u k%02u: ENOENT, model: present", a,
				b);
		else
			failed("rename", a, err);
		kind_failed[K_RENAME]++;
		return;
	}
	resolve(a, true);
	if (!model[a].present)
		model_report("rename k%02u k%02u: succeeded, model: absent", a,
			     b);
	nok++;
	kind_ok[K_RENAME]++;
	if (a != b) {
		model[b] = model[a];
		model[a].present = false;
	}
}

static void do_unlink(unsigned k)
{
	char p[TL_PATH_MAX];

	if (unlink(key_path(p, sizeof(p), k))) {
		int err = errno;

		if (err == ENOENT)
			resolve(k, false);
		if (err == ENOENT && !model[k].present)
			return;
		if (err == ENOENT)
			model_report("unlink k%02u: ENOENT, model: present", k);
		else
			failed("unlink", k, err);
		kind_failed[K_UNLINK]++;
		return;
	}
	resolve(k, true);
	if (!model[k].present)
		model_report("unlink k%02u: succeeded, model: absent", k);
	nok++;
	kind_ok[K_UNLINK]++;
	model[k].present = false;
}

static void do_stat(unsigned k)
{
	char p[TL_PATH_MAX];
	struct stat sb;

	if (stat(key_path(p, sizeof(p), k), &sb)) {
		int err = errno;

		if (err == ENOENT)
			resolve(k, false);
		if (err == ENOENT && !model[k].present)
			return;
		if (err == ENOENT)
			model_report("stat k%02u: ENOENT, model: present", k);
		else
			failed("stat", k, err);
		return;
	}
	resolve(k, true);
	if (!model[k].present)
		model_report("stat k%02u: exists, model: absent", k);
	else if ((size_t)sb.st_size != model[k].size)
		model_report("stat k%02u: size %jd, model %zu", k,
			     (intmax_t)sb.st_size, model[k].size);
}

/* Lists DIR: exactly the model's keys. strict: an error is a finding. */
static void do_list(bool strict)
{
	bool seen[NKEYS] = {0};
	struct dirent *de;
	DIR *d = opendir(dir);
	unsigned k;

	if (!d) {
		if (strict)
			tl_report("opendir %s: %s", dir, strerror(errno));
		else
			failed("opendir", 0, errno);
		return;
	}
	errno = 0;
	while ((de = readdir(d))) {
		char *end;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		k = de->d_name[0] == 'k'
			    ? (unsigned)strtoul(de->d_name + 1, &end, 10)
			    : NKEYS;
		if (k >= NKEYS || *end || strlen(de->d_name) != 3) {
			model_report("list: stray name '%s'", de->d_name);
			continue;
		}
		if (seen[k])
			model_report("list: k%02u listed twice", k);
		seen[k] = true;
	}
	if (errno) {
		if (strict)
			tl_report("readdir %s: %s", dir, strerror(errno));
		else
			failed("readdir", 0, errno);
		closedir(d);
		return;
	}
	closedir(d);
	for (k = 0; k < NKEYS; k++)
		resolve(k, seen[k]);
	for (k = 0; k < NKEYS; k++)
		if (seen[k] != model[k].present)
			model_report("list: k%02u %s, model: %s", k,
				     seen[k] ? "listed" : "not listed",
				     model[k].present ? "present" : "absent");
}

static void load_state(const char *path)
{
	FILE *f = fopen(path, "r");
	char name[16];
	size_t size;
	uint64_t seed;
	unsigned k;
	int maybe;

	if (!f) {
		if (errno != ENOENT)
			tl_die("%s: %s", path, strerror(errno));
		return;
	}
	while (fscanf(f, "%15s %zu %" SCNu64 " %d", name, &size, &seed,
		      &maybe) == 4) {
		if (sscanf(name, "k%u", &k) != 1 || k >= NKEYS)
			tl_die("%s: bad name %s", path, name);
		model[k] = (struct key){.present = !maybe,
					.maybe = maybe,
					.size = size,
					.seed = seed};
	}
	fclose(f);
}

static void save_state(const char *path)
{
	FILE *f = fopen(path, "w");
	unsigned k;

	if (!f)
		tl_die("%s: %s", path, strerror(errno));
	for (k = 0; k < NKEYS; k++)
		if (model[k].present || model[k].maybe)
			fprintf(f, "k%02u %zu %" PRIu64 " %d\n", k,
				model[k].size, model[k].seed, model[k].maybe);
	if (fclose(f))
		tl_die("%s: %s", path, strerror(errno));
}

static void parse_errnos(const char *list)
{
	char *copy = strdup(list), *tok, *save = NULL;
	size_t i;

	if (!copy)
		tl_die("out of memory");
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "none"))
			continue;
		for (i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
			if (!strcmp(tok, errnames[i].name))
				break;
		if (i == sizeof(errnames) / sizeof(errnames[0]) ||
		    nallowed == sizeof(allowed) / sizeof(allowed[0]))
			tl_die("unknown errno name %s", tok);
		allowed[nallowed++] = errnames[i].err;
	}
	free(copy);
}

static void run(uint64_t seed, unsigned long n)
{
	uint64_t rng = seed ? seed : 1;
	unsigned long i;
	unsigned e;

	for (i = 0; i < n; i++) {
		unsigned r = (unsigned)tl_rand_below(&rng, 100);
		unsigned k = (unsigned)tl_rand_below(&rng, NKEYS);
		unsigned j = (unsigned)tl_rand_below(&rng, NKEYS);

		nops++;
		if (r < 35) {
			do_write(k, &rng);
		} else if (r < 60) {
			if (do_read(k, false) == 0)
				nok++;
		} else if (r < 75) {
			do_rename(k, j);
		} else if (r < 90) {
			do_unlink(k);
		} else if (r < 95) {
			do_list(false);
		} else {
			do_stat(k);
		}
	}
	printf("faultops: ops=%lu ok=%lu left_empty=%lu failed=", nops, nok,
	       nleft);
	for (e = 0, i = 0; e < 256; e++)
		if (nerr[e]) {
			printf("%s%s=%lu", i++ ? "," : "", errname((int)e),
			       nerr[e]);
		}
	printf("%s", i ? "" : "0");
	for (e = 0; e < NKINDS; e++)
		printf(" %s=%lu/%lu", kind_name[e], kind_ok[e], kind_failed[e]);
	printf("\n");
}

/*
 * The mount agrees with the store: every row of REGION in DB reads back
 * through DIR byte for byte, and DIR lists exactly those keys.
 */
static void compare(const char *db, const char *region)
{
	static char buf[1 << 22];
	char p[TL_PATH_MAX];
	unsigned long rows = 0, listed = 0;
	sqlite3_stmt *st;
	struct dirent *de;
	sqlite3 *h;
	size_t len;
	DIR *d;
	int rc;

	if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) ||
	    sqlite3_prepare_v2(h,
			       "SELECT key, value FROM kv WHERE region = ?1 "
			       "AND typeof(key) = 'text'",
			       -1, &st, NULL) ||
	    sqlite3_bind_text(st, 1, region, -1, SQLITE_STATIC))
		tl_die("%s: %s", db, sqlite3_errmsg(h));
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(st, 0);
		const void *val = sqlite3_column_blob(st, 1);
		size_t vlen = (size_t)sqlite3_column_bytes(st, 1);

		rows++;
		snprintf(p, sizeof(p), "%s/%s", dir, key);
		rc = tl_read_file(p, buf, sizeof(buf), &len);
		if (rc)
			tl_report("compare %s: %s through the mount, a row in "
				  "the store",
				  key, errname(-rc));
		else if (len != vlen || (len && memcmp(buf, val, len)))
			tl_report("compare %s: %zu bytes through the mount, "
				  "%zu other bytes in the store",
				  key, len, vlen);
	}
	sqlite3_finalize(st);
	sqlite3_close(h);
	d = opendir(dir);
	if (!d)
		tl_die("%s: %s", dir, strerror(errno));
	while ((de = readdir(d)))
		listed += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	if (listed != rows)
		tl_report("compare: %lu names listed, %lu rows in the store",
			  listed, rows);
	printf("faultops: %s agrees with the store (%lu keys)\n", dir, rows);
}

int main(int argc, char **argv)
{
	const char *env = getenv("FAULTOPS_MAXSIZE");
	unsigned k;

	if (env)
		maxsize = strtoul(env, NULL, 10);
	trace = getenv("FAULTOPS_TRACE") != NULL;
	lenient = getenv("FAULTOPS_LENIENT") != NULL;
	if (maxsize > (1u << 22))
		maxsize = 1u << 22;
	if (argc == 7 && !strcmp(argv[1], "run")) {
		dir = argv[2];
		load_state(argv[3]);
		parse_errnos(argv[6]);
		run(strtoull(argv[4], NULL, 0), strtoul(argv[5], NULL, 0));
		save_state(argv[3]);
	} else if (argc == 5 && !strcmp(argv[1], "compare")) {
		dir = argv[2];
		compare(argv[3], argv[4]);
	} else if (argc == 4 && !strcmp(argv[1], "verify")) {
		dir = argv[2];
		load_state(argv[3]);
		for (k = 0; k < NKEYS; k++)
			do_read(k, true);
		do_list(true);
		printf("faultops: verified %s\n", dir);
	} else {
		fprintf(stderr,
			"usage: faultops run DIR STATE SEED NOPS ERRNOS\n"
			"       faultops verify DIR STATE\n"
			"       faultops compare DIR DB REGION\n");
		return 2;
	}
	return tl_reported() ? 1 : 0;
}
