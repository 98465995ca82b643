/*
 * test_virtual.c - the .regionfs/ renderers (fs/virtual.c) without a mount.
 *
 * Builds a struct rfs_view over real regions (and a real store in a
 * temporary directory, for the stored-key lines), drives a known sequence
 * of gets, loads, invalidations and evictions through the engine, renders
 * every file and checks the text: every documented line present exactly
 * once, values that follow from the sequence, global sums equal to the sum
 * of the per-region files, and metrics.prom accepted by
 * `promtool check metrics` with no output at all (no lint warnings). The
 * promtool check is skipped when promtool is not installed.
 *
 * The end-to-end tests (tests/integration/test_*.sh) check the same files
 * through a real mount; this program pins the formats down cheaply and
 * covers what a mount cannot produce on demand (label escaping, a
 * thousand regions, a region without a live cache, bad indexes).
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "virtual.h"

#define PROMTOOL "/usr/bin/promtool"

struct fixture {
	char dir[64];
	char db[96];
	struct config *cfg;
	struct region *reg[2];
	struct rfs_region_view rv[2];
	struct store *st;
	struct rfs_view view;
};

static const char *const ini = "[alpha]\n"
			       "max_entries = 2\n"
			       "stripes = 1\n"
			       "[b-2]\n"
			       "max_entries = 100\n"
			       "max_bytes = 1M\n"
			       "ttl = 1h\n";

static int loader(void *ctx, const void *key, size_t klen,
		  struct region_value **out)
{
	(void)ctx;
	*out = region_value_create(key, klen);
	return *out ? 0 : -ENOMEM;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[CONFIG_ERR_LEN];

	assert_non_null(f);
	strcpy(f->dir, "/tmp/rfs-test-virtual-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof(f->db), "%s/db", f->dir);
	assert_int_equal(config_parse_string(ini, "regions.ini", &f->cfg, err,
					     sizeof(err)),
			 0);
	for (int i = 0; i < 2; i++) {
		const struct config_region *cr = &f->cfg->regions[i];

		assert_int_equal(region_create(cr->name, &cr->lim, &f->reg[i]),
				 0);
		f->rv[i].cfg = cr;
		f->rv[i].region = f->reg[i];
	}
	assert_int_equal(store_open(f->db, NULL, &f->st), 0);
	f->view.config_path = "/etc/regionfs/regions.ini";
	f->view.db_path = f->db;
	f->view.generation = 3;
	f->view.loaded_at = 1700000000;
	f->view.last_result = "ok";
	f->view.last_error = "";
	f->view.start_time = 1690000000;
	f->view.regions = f->rv;
	f->view.nregions = 2;
	f->view.st = f->st;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	store_close(f->st);
	for (int i = 0; i < 2; i++)
		region_unref(f->reg[i]);
	config_free(f->cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* ---- helpers --------------------------------------------------------- */

static char *render(const struct rfs_view *v, enum rfs_vfile kind, size_t idx,
		    size_t *len)
{
	char *buf = NULL;
	size_t n = 0;

	assert_int_equal(rfs_virtual_render(v, kind, idx, &buf, &n), 0);
	assert_non_null(buf);
	assert_true(n > 0);
	assert_int_equal(buf[n - 1], '\n');
	assert_int_equal(strlen(buf), n); /* no NULs inside */
	if (len)
		*len = n;
	return buf;
}

/* Counts lines that start with "name " (or are exactly "name"). */
static int count_lines(const char *text, const char *name)
{
	size_t nl = strlen(name);
	int n = 0;

	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');

		if (strncmp(p, name, nl) == 0 &&
		    (p[nl] == ' ' || p + nl == eol))
			n++;
		p = eol ? eol + 1 : p + strlen(p);
	}
	return n;
}

/* The value of line "name value" (which must be there exactly once). */
static const char *value_of(const char *text, const char *name, char *out,
			    size_t outlen)
{
	size_t nl = strlen(name);

	assert_int_equal(count_lines(text, name), 1);
	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');

		if (strncmp(p, name, nl) == 0 && p[nl] == ' ') {
			size_t vl = (size_t)(eol - (p + nl + 1));

			assert_true(vl < outlen);
			memcpy(out, p + nl + 1, vl);
			out[vl] = '\0';
			return out;
		}
		p = eol + 1;
	}
	out[0] = '\0';
	return out;
}

static uint64_t u64_of(const char *text, const char *name)
{
	char v[64];
	char *end;
	uint64_t x;

	value_of(text, name, v, sizeof(v));
	x = strtoull(v, &end, 10);
	assert_true(end != v && *end == '\0');
	return x;
}

/* Every line is "name value" with a name of [a-z0-9_]. */
static void assert_flat_lines(const char *text)
{
	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');
		const char *q = p;

		assert_non_null(eol);
		while (q < eol && ((*q >= 'a' && *q <= 'z') ||
				   (*q >= '0' && *q <= '9') || *q == '_'))
			q++;
		assert_true(q > p);
		assert_true(q == eol || *q == ' ');
		p = eol + 1;
	}
}

static const char *const region_lines[] = {
	"gets",
	"hits",
	"misses",
	"coalesced",
	"loads",
	"load_failures",
	"load_not_found",
	"load_time_us",
	"stale_puts_rejected",
	"uncacheable",
	"installs",
	"invalidations_local",
	"invalidations_outside",
	"invalidations",
	"evictions_size",
	"evictions_ttl",
	"evictions_tti",
	"evictions",
	"entries",
	"bytes",
	"flights",
	"stripes",
	"stripe_max_entries",
	"hits_unrecorded",
	"max_examined_per_hold",
	"hit_ratio",
	"keys_stored",
	"value_bytes_stored",
};

static const char *const global_lines[] = {
	"version",
	"pid",
	"time",
	"uptime_seconds",
	"regions",
	"config_generation",
	"lookups",
	"opens",
	"reads",
	"read_bytes",
	"writes",
	"write_bytes",
	"commits",
	"commit_errors",
	"unlinks",
	"renames",
	"readdirs",
	"errors",
	"open_handles",
	"inodes",
	"feed_changes",
	"feed_lag_ms",
	"config_reloads",
	"config_failures",
	"config_cache_rebuilds",
	"config_cache_carried",
	"malloc_trims",
	"malloc_trim_last_us",
	"malloc_trim_max_us",
	"malloc_trim_us",
	"store_commits",
	"store_rows",
	"store_max_batch",
	"store_errors",
	"store_busy_retries",
	"store_commit_time_us",
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* gets a, a (hit), b, c (evicts one: max_entries 2), invalidates b. */
static void drive_alpha(struct fixture *f)
{
	struct region_value *v = NULL;

	assert_int_equal(region_fetch(f->reg[0], "a", 1, loader, NULL, &v), 0);
	region_value_unref(v);
	assert_int_equal(region_fetch(f->reg[0], "a", 1, loader, NULL, &v), 0);
	region_value_unref(v);
	assert_int_equal(region_fetch(f->reg[0], "b", 1, loader, NULL, &v), 0);
	region_value_unref(v);
	assert_int_equal(region_fetch(f->reg[0], "c", 1, loader, NULL, &v), 0);
	region_value_unref(v);
	region_invalidate(f->reg[0], "b", 1, REGION_ORIGIN_LOCAL);
	region_invalidate(f->reg[0], "zz", 2, REGION_ORIGIN_OUTSIDE);
}

/* Runs promtool on text; returns its exit status, output in out. */
static int promtool_check(const char *text, char *out, size_t outlen)
{
	char path[] = "/tmp/rfs-prom-XXXXXX";
	char cmd[128];
	FILE *p;
	size_t n;
	int fd, st;

	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(cmd, sizeof(cmd), PROMTOOL " check metrics < %s 2>&1", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, outlen - 1, p);
	out[n] = '\0';
	st = pclose(p);
	unlink(path);
	return st;
}

static void assert_promtool_clean(const char *text)
{
	char out[4096];
	int st;

	if (access(PROMTOOL, X_OK) != 0) {
		print_message("promtool not installed: check skipped\n");
		return;
	}
	st = promtool_check(text, out, sizeof(out));
	if (st != 0 || out[0])
		print_message("promtool said:\n%s", out);
	assert_int_equal(st, 0);
	assert_string_equal(out, "");
}

/* ---- tests ----------------------------------------------------------- */

static void test_region_stats_follow_the_operations(void **state)
{
	struct fixture *f = *state;
	char *t, v[32];

	assert_int_equal(
		store_put(f->st, "alpha", "k1", 2, "hello", 5, 0, NULL), 0);
	assert_int_equal(store_put(f->st, "alpha", "k2", 2, "abc", 3, 0, NULL),
			 0);
	drive_alpha(f);
	t = render(&f->view, RFS_V_REGION_STATS, 0, NULL);
	assert_flat_lines(t);
	for (size_t i = 0; i < NELEM(region_lines); i++)
		assert_int_equal(count_lines(t, region_lines[i]), 1);
	assert_int_equal(u64_of(t, "gets"), 4);
	assert_int_equal(u64_of(t, "hits"), 1);
	assert_int_equal(u64_of(t, "misses"), 3);
	assert_int_equal(u64_of(t, "loads"), 3);
	assert_int_equal(u64_of(t, "invalidations_local"), 1);
	assert_int_equal(u64_of(t, "invalidations_outside"), 1);
	assert_int_equal(u64_of(t, "invalidations"), 2);
	assert_true(u64_of(t, "evictions_size") >= 1);
	assert_int_equal(u64_of(t, "evictions"),
			 u64_of(t, "evictions_size") +
				 u64_of(t, "evictions_ttl") +
				 u64_of(t, "evictions_tti"));
	assert_true(u64_of(t, "entries") <= 2);
	assert_int_equal(u64_of(t, "max_entries"), 2);
	assert_int_equal(u64_of(t, "keys_stored"), 2);
	assert_int_equal(u64_of(t, "value_bytes_stored"), 8);
	assert_string_equal(value_of(t, "hit_ratio", v, sizeof(v)), "0.2500");
	assert_string_equal(value_of(t, "region", v, sizeof(v)), "alpha");
	free(t);
}

static void test_idle_region_has_zero_hit_ratio(void **state)
{
	struct fixture *f = *state;
	char *t, v[32];

	t = render(&f->view, RFS_V_REGION_STATS, 1, NULL);
	assert_string_equal(value_of(t, "hit_ratio", v, sizeof(v)), "0");
	assert_int_equal(u64_of(t, "gets"), 0);
	assert_int_equal(u64_of(t, "max_bytes"), 1024 * 1024);
	assert_int_equal(u64_of(t, "keys_stored"), 0);
	free(t);
}

static void test_global_stats_sum_the_regions(void **state)
{
	struct fixture *f = *state;
	struct region_value *v = NULL;
	char *g, *r0, *r1, s[32];

	drive_alpha(f);
	assert_int_equal(region_fetch(f->reg[1], "x", 1, loader, NULL, &v), 0);
	region_value_unref(v);
	f->view.counters.lookups = 11;
	f->view.counters.feed_lag_ms = 1234;
	f->view.store.commits = 5;
	f->view.store.commit_ns = 7654321;
	g = render(&f->view, RFS_V_STATS, 0, NULL);
	r0 = render(&f->view, RFS_V_REGION_STATS, 0, NULL);
	r1 = render(&f->view, RFS_V_REGION_STATS, 1, NULL);
	assert_flat_lines(g);
	for (size_t i = 0; i < NELEM(global_lines); i++)
		assert_int_equal(count_lines(g, global_lines[i]), 1);
	for (size_t i = 0; i < NELEM(region_lines); i++) {
		const char *n = region_lines[i];

		uint64_t sum;

		if (strcmp(n, "hit_ratio") == 0)
			continue;
		sum = u64_of(r0, n) + u64_of(r1, n);
		/* microseconds of the summed nanoseconds: each region's
		 * truncation may lose up to 1 us of the sum */
		if (strcmp(n, "load_time_us") == 0)
			assert_in_range(u64_of(g, n), sum, sum + 1);
		else if (strcmp(n, "max_examined_per_hold") == 0 ||
			 strcmp(n, "stripe_max_entries") == 0)
			/* per-stripe maxima: the largest, not a sum */
			assert_int_equal(u64_of(g, n),
					 u64_of(r0, n) > u64_of(r1, n)
						 ? u64_of(r0, n)
						 : u64_of(r1, n));
		else
			assert_int_equal(u64_of(g, n), sum);
	}
	assert_string_equal(value_of(g, "hit_ratio", s, sizeof(s)), "0.2000");
	assert_string_equal(value_of(g, "version", s, sizeof(s)), RFS_VERSION);
	assert_int_equal(u64_of(g, "pid"), (uint64_t)getpid());
	assert_int_equal(u64_of(g, "regions"), 2);
	assert_int_equal(u64_of(g, "config_generation"), 3);
	assert_int_equal(u64_of(g, "lookups"), 11);
	assert_int_equal(u64_of(g, "feed_lag_ms"), 1234);
	assert_int_equal(u64_of(g, "store_commits"), 5);
	assert_int_equal(u64_of(g, "store_commit_time_us"), 7654);
	assert_true(u64_of(g, "uptime_seconds") > 0);
	assert_int_equal(count_lines(g, "max_entries"), 0);
	free(g);
	free(r0);
	free(r1);
}

static void test_metrics_pass_promtool(void **state)
{
	struct fixture *f = *state;
	char *t;

	drive_alpha(f);
	f->view.store.commit_ns = 1500000001;
	f->view.counters.malloc_trim_max_us = 1234567;
	f->view.counters.malloc_trim_last_us = 89;
	t = render(&f->view, RFS_V_METRICS, 0, NULL);
	assert_promtool_clean(t);
	assert_non_null(strstr(t, "regionfs_build_info{version=\"" RFS_VERSION
				  "\"} 1\n"));
	assert_non_null(strstr(t, "regionfs_hits_total{region=\"alpha\"} 1\n"));
	assert_non_null(strstr(t, "regionfs_gets_total{region=\"b-2\"} 0\n"));
	assert_non_null(strstr(t, "regionfs_evictions_total{region=\"alpha\","
				  "cause=\"ttl\"} 0\n"));
	assert_non_null(strstr(t, "regionfs_invalidations_total{region="
				  "\"alpha\",origin=\"local\"} 1\n"));
	assert_non_null(strstr(t, "regionfs_store_commit_seconds_total "
				  "1.500000001\n"));
	assert_non_null(strstr(t, "regionfs_config_generation 3\n"));
	assert_non_null(strstr(t, "regionfs_malloc_trim_max_seconds "
				  "1.234567\n"));
	assert_non_null(strstr(t, "regionfs_malloc_trim_last_seconds "
				  "0.000089\n"));
	assert_non_null(
		strstr(t, "regionfs_stored_keys{region=\"alpha\"} 0\n"));
	/* every family is declared exactly once */
	assert_int_equal(count_lines(t, "# TYPE regionfs_hits_total"), 1);
	assert_int_equal(count_lines(t, "# HELP regionfs_hits_total"), 1);
	assert_int_equal(count_lines(t, "# TYPE regionfs_evictions_total"), 1);
	assert_non_null(strstr(t, "# TYPE regionfs_hits_total counter\n"));
	free(t);
}

static void test_metrics_escape_label_values(void **state)
{
	struct fixture *f = *state;
	struct config_region odd;
	struct rfs_region_view rv[1];
	struct rfs_view v = f->view;
	char *t;

	config_default_region(&odd);
	strcpy(odd.name, "we\"ird\\na\nme");
	rv[0].cfg = &odd;
	rv[0].region = NULL;
	v.regions = rv;
	v.nregions = 1;
	v.st = NULL;
	t = render(&v, RFS_V_METRICS, 0, NULL);
	assert_non_null(strstr(t, "regionfs_gets_total{region=\"we\\\"ird"
				  "\\\\na\\nme\"} 0\n"));
	assert_null(strstr(t, "regionfs_stored_keys{"));
	assert_promtool_clean(t);
	free(t);
}

static void test_many_regions_grow_the_buffer(void **state)
{
	struct fixture *f = *state;
	enum { N = 1000 };
	struct config_region *crs = calloc(N, sizeof(*crs));
	struct rfs_region_view *rv = calloc(N, sizeof(*rv));
	struct rfs_view v = f->view;
	char *t;
	size_t len;

	assert_non_null(crs);
	assert_non_null(rv);
	for (int i = 0; i < N; i++) {
		config_default_region(&crs[i]);
		snprintf(crs[i].name, sizeof(crs[i].name), "r%04d", i);
		rv[i].cfg = &crs[i];
	}
	v.regions = rv;
	v.nregions = N;
	v.st = NULL;
	t = render(&v, RFS_V_METRICS, 0, &len);
	assert_true(len > 100 * N);
	assert_non_null(strstr(t, "regionfs_cache_max_entries{region=\"r0999\"}"
				  " 100000\n"));
	assert_promtool_clean(t);
	free(t);
	t = render(&v, RFS_V_CONFIG, 0, NULL);
	assert_non_null(strstr(t, "\nregion r0000\n"));
	assert_non_null(strstr(t, "\nregion r0999\n"));
	free(t);
	free(crs);
	free(rv);
}

static void test_config_file_lines(void **state)
{
	struct fixture *f = *state;
	char *t, s[256];

	f->view.last_result = "error";
	f->view.last_error = "/etc/regionfs/regions.ini:7: unknown key \"x\"\n";
	t = render(&f->view, RFS_V_CONFIG, 0, NULL);
	assert_string_equal(value_of(t, "path", s, sizeof(s)),
			    "/etc/regionfs/regions.ini");
	assert_string_equal(value_of(t, "database", s, sizeof(s)), f->db);
	assert_int_equal(u64_of(t, "generation"), 3);
	assert_int_equal(u64_of(t, "loaded_at"), 1700000000);
	assert_string_equal(value_of(t, "last_reload", s, sizeof(s)), "error");
	assert_string_equal(value_of(t, "last_error", s, sizeof(s)),
			    "/etc/regionfs/regions.ini:7: unknown key \"x\"?");
	assert_int_equal(count_lines(t, "region"), 2);
	assert_non_null(strstr(t, "region alpha\nregion b-2\n"));
	free(t);
	f->view.last_result = "ok";
	f->view.last_error = "";
	t = render(&f->view, RFS_V_CONFIG, 0, NULL);
	assert_int_equal(count_lines(t, "last_error"), 1);
	assert_non_null(strstr(t, "\nlast_error\n"));
	free(t);
}

static void test_region_config_is_config_format_region(void **state)
{
	struct fixture *f = *state;
	char want[1024], *t;

	config_format_region(&f->cfg->regions[1], want, sizeof(want));
	t = render(&f->view, RFS_V_REGION_CONFIG, 1, NULL);
	assert_string_equal(t, want);
	assert_non_null(strstr(t, "ttl 3600000ms\n"));
	free(t);
}

static void test_bad_region_index_is_enoent(void **state)
{
	struct fixture *f = *state;
	char *buf = (char *)1;
	size_t len = 7;

	assert_int_equal(
		rfs_virtual_render(&f->view, RFS_V_REGION_STATS, 2, &buf, &len),
		-ENOENT);
	assert_null(buf);
	assert_int_equal(len, 0);
	assert_int_equal(rfs_virtual_render(&f->view, RFS_V_REGION_CONFIG,
					    SIZE_MAX, &buf, &len),
			 -ENOENT);
	assert_null(buf);
}

static void test_empty_view_renders(void **state)
{
	struct fixture *f = *state;
	struct rfs_view v = f->view;
	char *t;

	v.nregions = 0;
	v.regions = NULL;
	t = render(&v, RFS_V_STATS, 0, NULL);
	assert_int_equal(u64_of(t, "regions"), 0);
	assert_int_equal(count_lines(t, "keys_stored"), 0);
	free(t);
	t = render(&v, RFS_V_METRICS, 0, NULL);
	assert_promtool_clean(t);
	free(t);
}

/* ---- doc/stats.md documents every number ----------------------------- */

/* doc/stats.md, whole; RFS_DOC_STATS is its path (set by meson.build). */
static char *read_doc(void)
{
	FILE *f = fopen(RFS_DOC_STATS, "rb");
	char *text;
	long len;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	return text;
}

/*
 * The table row of doc whose first cell starts with "`" name and then
 * one of the characters of ends, as one string, or NULL. Caller frees.
 */
static char *doc_row(const char *doc, const char *name, const char *ends)
{
	char *head = NULL, *row = NULL;
	const char *p, *eol;

	assert_true(asprintf(&head, "\n| `%s", name) > 0);
	for (p = strstr(doc, head); p; p = strstr(p + 1, head)) {
		const char *after = p + strlen(head);

		if (*after && strchr(ends, *after)) {
			eol = strchr(p + 1, '\n');
			assert_non_null(eol);
			row = strndup(p + 1, (size_t)(eol - p - 1));
			break;
		}
	}
	free(head);
	return row;
}

/* Fails unless doc has a row "| `name` | kind |" (a stats file line). */
static void assert_doc_line(const char *doc, const char *name, const char *kind)
{
	char *row = doc_row(doc, name, "`"), *want = NULL;

	if (!row)
		fail_msg("doc/stats.md has no row for the stats line '%s'",
			 name);
	assert_true(asprintf(&want, "| `%s` | %s |", name, kind) > 0);
	if (strncmp(row, want, strlen(want)) != 0)
		fail_msg("doc/stats.md: '%s' should start '%s'", row, want);
	free(want);
	free(row);
}

/*
 * Fails unless doc has a metrics row for family prom of the given type
 * whose text names the stats line (and the label value, if any).
 */
static void assert_doc_metric(const char *doc, const char *prom,
			      const char *type, const char *line,
			      const char *label)
{
	char *row = doc_row(doc, prom, label ? "{" : "`"), *want = NULL;

	if (!row)
		fail_msg("doc/stats.md has no row for the metric %s", prom);
	assert_true(asprintf(&want, "` | %s |", type) > 0);
	if (!strstr(row, want))
		fail_msg("doc/stats.md: %s should be a %s: %s", prom, type,
			 row);
	free(want);
	assert_true(asprintf(&want, "`%s`", line) > 0);
	if (!strstr(row, want))
		fail_msg("doc/stats.md: the row of %s does not name %s", prom,
			 want);
	free(want);
	if (label) {
		assert_true(asprintf(&want, "\"%s\"", label) > 0);
		if (!strstr(row, want))
			fail_msg("doc/stats.md: %s lacks the label value %s",
				 prom, want);
		free(want);
	}
	free(row);
}

static bool region_src_is_gauge(int src)
{
	return src == REGION_SRC_STRIPE || src == REGION_SRC_REGION;
}

/*
 * Generated from RFS_COUNTERS, REGION_STATS and STORE_STATS: a new number
 * needs a row.
 */
static void test_every_number_is_documented(void **state)
{
	char *doc = read_doc();

	(void)state;
#define CHECK_REGION(src, id, field, unit, line, prom, label, help)            \
	do {                                                                   \
		bool gauge = region_src_is_gauge(src);                         \
                                                                               \
		assert_doc_line(doc, line, gauge ? "gauge" : "counter");       \
		if ((prom)[0])                                                 \
			assert_doc_metric(doc, prom,                           \
					  gauge ? "gauge" : "counter", line,   \
					  label);                              \
	} while (0);
	REGION_STATS(CHECK_REGION)
#undef CHECK_REGION
#define CHECK_STORE(type, field, unit, line, prom, help)                       \
	do {                                                                   \
		const char *t = (type) == STORE_GAUGE ? "gauge" : "counter";   \
                                                                               \
		assert_doc_line(doc, line, t);                                 \
		assert_doc_metric(doc, prom, t, line, NULL);                   \
	} while (0);
	STORE_STATS(CHECK_STORE)
#undef CHECK_STORE
#define CHECK_FS(src, id, field, type, unit, line, prom, help)                 \
	do {                                                                   \
		const char *t = (type) == RFS_GAUGE ? "gauge" : "counter";     \
                                                                               \
		assert_doc_line(doc, line, t);                                 \
		assert_doc_metric(doc, prom, t, line, NULL);                   \
	} while (0);
	RFS_COUNTERS(CHECK_FS)
#undef CHECK_FS
	/* the sums fs/virtual.c adds after the members of a family */
	assert_doc_line(doc, "invalidations", "counter");
	assert_doc_line(doc, "evictions", "counter");
	free(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_region_stats_follow_the_operations),
		T(test_idle_region_has_zero_hit_ratio),
		T(test_global_stats_sum_the_regions),
		T(test_metrics_pass_promtool),
		T(test_metrics_escape_label_values),
		T(test_many_regions_grow_the_buffer),
		T(test_config_file_lines),
		T(test_region_config_is_config_format_region),
		T(test_bad_region_index_is_enoent),
		T(test_empty_view_renders),
		cmocka_unit_test(test_every_number_is_documented),
#undef T
	};

	return cmocka_run_group_tests_name("virtual", tests, NULL, NULL);
}
