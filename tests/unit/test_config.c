/*
 * test_config.c - regions.ini parsing and validation (regions/config.c).
 *
 * Every error class is checked with its exact message and line number,
 * because operators read these messages and scripts may match them. The
 * inih traps (long lines split at 200 bytes, indented continuation lines,
 * section names cut at 49 bytes) each have a test that fails on a parser
 * that hands inih the raw file. The shipped regions.ini is parsed too,
 * found relative to this source file, and its [defaults] section must
 * match the built-in defaults it documents.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

/* ---- helpers --------------------------------------------------------- */

/* A new string: fmt printed, like asprintf; fails the test on ENOMEM. */
__attribute__((format(printf, 1, 2))) static char *xprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	return s;
}

/* A new string of n copies of c. */
static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* Parses text, which must be valid; prints the error otherwise. */
static struct config *parse_ok(const char *text)
{
	char err[CONFIG_ERR_LEN] = "";
	struct config *c = NULL;
	int rc;

	rc = config_parse_string(text, "t.ini", &c, err, sizeof(err));
	if (rc != 0)
		print_error("unexpected error: %s\n", err);
	assert_int_equal(rc, 0);
	assert_non_null(c);
	assert_string_equal(err, "");
	return c;
}

/* Parses text, which must fail with exactly msg. */
static void expect_error(const char *text, const char *msg)
{
	char err[CONFIG_ERR_LEN] = "x";
	struct config *c = (struct config *)&err;
	int rc;

	rc = config_parse_string(text, "t.ini", &c, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_null(c);
	assert_string_equal(err, msg);
}

/* The one region of a config that must hold exactly one. */
static const struct config_region *only_region(const struct config *c)
{
	assert_int_equal(c->nregions, 1);
	return &c->regions[0];
}

static void assert_limits_equal(const struct config_region *a,
				const struct config_region *b)
{
	assert_int_equal(a->lim.max_entries, b->lim.max_entries);
	assert_int_equal(a->lim.max_bytes, b->lim.max_bytes);
	assert_int_equal(a->lim.max_value_size, b->lim.max_value_size);
	assert_int_equal(a->lim.ttl_ms, b->lim.ttl_ms);
	assert_int_equal(a->lim.tti_ms, b->lim.tti_ms);
	assert_int_equal(a->lim.nstripes, b->lim.nstripes);
	assert_int_equal(a->lim.strategy, b->lim.strategy);
	assert_int_equal(a->durable, b->durable);
	assert_int_equal(a->write_through, b->write_through);
	assert_int_equal(a->read_only, b->read_only);
	assert_int_equal(a->owner, b->owner);
	assert_int_equal(a->group, b->group);
	assert_int_equal(a->mode, b->mode);
	assert_int_equal(a->dir_mode, b->dir_mode);
	assert_int_equal(a->coherence, b->coherence);
}

/* Writes len bytes of data to a new temporary file; returns its path. */
static char *write_temp(const void *data, size_t len)
{
	const char *dir = getenv("TMPDIR");
	char *path = xprintf("%s/test_config.XXXXXX", dir ? dir : "/tmp");
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
	return path;
}

/* ---- values and inheritance ------------------------------------------ */

static void test_bare_region_gets_builtin_defaults(void **state)
{
	struct config_region def;
	struct config *c;

	(void)state;
	config_default_region(&def);
	assert_int_equal(def.lim.max_entries, 100000);
	assert_int_equal(def.lim.max_bytes, 64 * MIB);
	assert_int_equal(def.lim.max_value_size, 1 * MIB);
	assert_int_equal(def.lim.ttl_ms, 0);
	assert_int_equal(def.lim.tti_ms, 0);
	assert_int_equal(def.lim.nstripes, 16);
	assert_int_equal(def.lim.strategy, REGION_STRATEGY_TINYLFU);
	assert_false(def.durable);
	assert_true(def.write_through);

	c = parse_ok("; a comment\n\n[a]\n");
	assert_limits_equal(only_region(c), &def);
	assert_string_equal(c->regions[0].name, "a");
	assert_int_equal(c->regions[0].line, 3);
	config_free(c);
}

static void test_every_setting_is_parsed(void **state)
{
	const struct config_region *r;
	struct config *c;

	(void)state;
	c = parse_ok("[r]\n"
		     "max_entries = 12345\n"
		     "max_bytes = 3G\n"
		     "max_value_size = 2M\n"
		     "ttl = 90m\n"
		     "tti = 45s\n"
		     "stripes = 256\n"
		     "strategy = s3fifo\n"
		     "durable = on\n");
	r = only_region(c);
	assert_int_equal(r->lim.max_entries, 12345);
	assert_int_equal(r->lim.max_bytes, 3 * GIB);
	assert_int_equal(r->lim.max_value_size, 2 * MIB);
	assert_int_equal(r->lim.ttl_ms, 90 * 60 * 1000);
	assert_int_equal(r->lim.tti_ms, 45 * 1000);
	assert_int_equal(r->lim.nstripes, 256);
	assert_int_equal(r->lim.strategy, REGION_STRATEGY_S3FIFO);
	assert_true(r->durable);
	config_free(c);
}

static void test_defaults_are_inherited_then_overridden(void **state)
{
	const struct config_region *a, *b;
	struct config *c;

	(void)state;
	c = parse_ok("[defaults]\n"
		     "ttl = 1h\n"
		     "stripes = 4\n"
		     "durable = yes\n"
		     "[a]\n"
		     "stripes = 32\n"
		     "[b]\n"
		     "durable = no\n"
		     "ttl = 0\n");
	assert_int_equal(c->nregions, 2);
	a = config_find(c, "a");
	b = config_find(c, "b");
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->lim.ttl_ms, 3600 * 1000);
	assert_int_equal(a->lim.nstripes, 32);
	assert_true(a->durable);
	assert_int_equal(a->lim.max_entries, 100000); /* built-in */
	assert_int_equal(b->lim.ttl_ms, 0);
	assert_int_equal(b->lim.nstripes, 4);
	assert_false(b->durable);
	assert_int_equal(a->line, 5);
	assert_int_equal(b->line, 7);
	config_free(c);
}

static void test_regions_keep_file_order_and_are_found(void **state)
{
	struct config *c;

	(void)state;
	c = parse_ok("[zeta]\n[alpha]\n[Mid_dle-9]\n");
	assert_int_equal(c->nregions, 3);
	assert_string_equal(c->regions[0].name, "zeta");
	assert_string_equal(c->regions[1].name, "alpha");
	assert_string_equal(c->regions[2].name, "Mid_dle-9");
	assert_ptr_equal(config_find(c, "alpha"), &c->regions[1]);
	assert_null(config_find(c, "mid_dle-9")); /* names are case-sensitive */
	assert_null(config_find(c, "defaults"));
	assert_null(config_find(NULL, "alpha"));
	config_free(c);
	config_free(NULL);
}

static void test_size_parser_accepts_units(void **state)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{"0", 0},
		{"512", 512},
		{"512B", 512},
		{"512b", 512},
		{"007", 7},
		{"1K", KIB},
		{"1k", KIB},
		{"64M", 64 * MIB},
		{"64MB", 64 * MIB},
		{"64MiB", 64 * MIB},
		{"64mib", 64 * MIB},
		{"2G", 2 * GIB},
		{"3T", 3 * 1024 * GIB},
		{"16777215T", 16777215ull << 40},
		{"18446744073709551615", UINT64_MAX},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t v = 1;

		assert_int_equal(config_parse_size(ok[i].s, &v), 0);
		assert_int_equal(v, ok[i].v);
	}
}

static void test_size_parser_rejects_garbage_and_overflow(void **state)
{
	static const char *const bad[] = {
		"",	 "K",  "M64", "1.5G",	"64 M", " 64",
		"64 ",	 "-1", "+1",  "0x10",	"64Mi", "64iB",
		"64KBB", "1P", "1E",  "64MiBs", "1e3",
	};
	static const char *const range[] = {
		"18446744073709551616",
		"99999999999999999999999",
		"16777216T",
		"17179869184G",
	};
	uint64_t v = 42;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(config_parse_size(bad[i], &v), -EINVAL);
	for (i = 0; i < sizeof(range) / sizeof(range[0]); i++)
		assert_int_equal(config_parse_size(range[i], &v), -ERANGE);
	assert_int_equal(v, 42); /* untouched on error */
}

static void test_duration_parser_converts_to_ms(void **state)
{
	static const struct {
		const char *s;
		uint64_t ms;
	} ok[] = {
		{"0", 0},
		{"0ms", 0},
		{"30", 30000},
		{"30s", 30000},
		{"500ms", 500},
		{"5m", 300000},
		{"2h", 7200000},
		{"1d", 86400000},
		{"18446744073709551615ms", UINT64_MAX},
	};
	static const char *const bad[] = {
		"",    "s",  "1M", "1H",  "1S",	  "1.5h",
		"1 h", "1w", "-1", "1hm", "1ms5", "1y",
	};
	uint64_t v = 42;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(config_parse_duration_ms(ok[i].s, &v), 0);
		assert_int_equal(v, ok[i].ms);
	}
	v = 42;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(config_parse_duration_ms(bad[i], &v), -EINVAL);
	assert_int_equal(config_parse_duration_ms("18446744073709552s", &v),
			 -ERANGE);
	assert_int_equal(config_parse_duration_ms("18446744073709551616", &v),
			 -ERANGE);
	assert_int_equal(v, 42);
}

static void test_write_through_is_a_boolean_on_by_default(void **state)
{
	struct config *c;

	(void)state;
	c = parse_ok("[defaults]\nwrite_through = off\n[a]\n[b]\n"
		     "write_through = yes\n[c]\nwrite_through = 1\n");
	assert_false(c->regions[0].write_through); /* from [defaults] */
	assert_true(c->regions[1].write_through);
	assert_true(c->regions[2].write_through);
	config_free(c);
	c = parse_ok("[a]\n");
	assert_true(c->regions[0].write_through);
	config_free(c);
	expect_error("[a]\nwrite_through = sometimes\n",
		     "t.ini:2: write_through: expected true or false (or "
		     "yes/no, on/off, 1/0), got 'sometimes'");
}

static void test_durable_accepts_the_boolean_words(void **state)
{
	static const char *const yes[] = {"true", "TRUE", "yes", "On", "1"};
	static const char *const no[] = {"false", "No", "off", "OFF", "0"};
	struct config *c;
	size_t i;
	char *t;

	(void)state;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		t = xprintf("[a]\ndurable = %s\n[b]\ndurable = %s\n", yes[i],
			    no[i]);
		c = parse_ok(t);
		assert_true(c->regions[0].durable);
		assert_false(c->regions[1].durable);
		config_free(c);
		free(t);
	}
}

static void test_strategy_names_round_trip(void **state)
{
	struct config *c;

	(void)state;
	assert_string_equal(config_strategy_name(REGION_STRATEGY_LRU), "lru");
	assert_string_equal(config_strategy_name(REGION_STRATEGY_S3FIFO),
			    "s3fifo");
	assert_string_equal(config_strategy_name((enum region_strategy)99),
			    "unknown");
	assert_string_equal(config_strategy_name(REGION_STRATEGY_TINYLFU),
			    "tinylfu");
	c = parse_ok("[a]\nstrategy = LRU\n[b]\nstrategy = S3FIFO\n"
		     "[c]\nstrategy = TinyLFU\n");
	assert_int_equal(c->regions[0].lim.strategy, REGION_STRATEGY_LRU);
	assert_int_equal(c->regions[1].lim.strategy, REGION_STRATEGY_S3FIFO);
	assert_int_equal(c->regions[2].lim.strategy, REGION_STRATEGY_TINYLFU);
	config_free(c);
}

/* ---- bad values ------------------------------------------------------ */

static void test_bad_values_say_what_is_expected(void **state)
{
	static const struct {
		const char *line;
		const char *msg;
	} cases[] = {
		{"max_entries = lots",
		 "max_entries: expected a count like 100000 (0 = unlimited), "
		 "got 'lots'"},
		{"max_entries = 1K",
		 "max_entries: expected a count like 100000 (0 = unlimited), "
		 "got '1K'"},
		{"max_entries = 18446744073709551616",
		 "max_entries: '18446744073709551616' is too large"},
		{"max_bytes = abc",
		 "max_bytes: expected a size like 64M, got 'abc'"},
		{"max_bytes =", "max_bytes: expected a size like 64M, got ''"},
		{"max_bytes = \"64M\"",
		 "max_bytes: expected a size like 64M, got '\"64M\"'"},
		{"max_bytes = 16777216T",
		 "max_bytes: '16777216T' is too large"},
		{"max_value_size = big",
		 "max_value_size: expected a size like 1M, got 'big'"},
		{"max_value_size = 0",
		 "max_value_size: expected a size from 1 to 64M, got '0'"},
		{"max_value_size = 65M",
		 "max_value_size: expected a size from 1 to 64M, got '65M'"},
		{"max_value_size = 67108865",
		 "max_value_size: expected a size from 1 to 64M, got "
		 "'67108865'"},
		{"ttl = 1M",
		 "ttl: expected a duration like 30s, 5m, 2h or 1d (0 = never), "
		 "got '1M'"},
		{"tti = soon",
		 "tti: expected a duration like 30s, 5m, 2h or 1d (0 = never), "
		 "got 'soon'"},
		{"ttl = 36501d", "ttl: duration too long (max 36500d)"},
		{"tti = 99999999999999999999d",
		 "tti: duration too long (max 36500d)"},
		{"stripes = 0",
		 "stripes: expected a power of two from 1 to 4096, got '0'"},
		{"stripes = 3",
		 "stripes: expected a power of two from 1 to 4096, got '3'"},
		{"stripes = 8192",
		 "stripes: expected a power of two from 1 to 4096, got '8192'"},
		{"stripes = 16K",
		 "stripes: expected a power of two from 1 to 4096, got '16K'"},
		{"strategy = arc",
		 "strategy: expected lru, s3fifo or tinylfu, got 'arc'"},
		{"durable = maybe",
		 "durable: expected true or false (or yes/no, on/off, 1/0), "
		 "got 'maybe'"},
		{"strategy = l\xc3\xa9", "strategy: expected lru, s3fifo or "
					 "tinylfu, got 'l\\xc3\\xa9'"},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *t = xprintf("[a]\n%s\n", cases[i].line);
		char *m = xprintf("t.ini:2: %s", cases[i].msg);

		expect_error(t, m);
		free(t);
		free(m);
	}
}

static void test_limits_at_the_edges_are_accepted(void **state)
{
	struct config *c;

	(void)state;
	c = parse_ok("[a]\nmax_value_size = 64MiB\nstripes = 4096\n"
		     "ttl = 36500d\nmax_bytes = 0\nmax_entries = 0\n"
		     "[b]\nmax_value_size = 1\nstripes = 1\ntti = 1ms\n");
	assert_int_equal(c->regions[0].lim.max_value_size, 64 * MIB);
	assert_int_equal(c->regions[0].lim.nstripes, 4096);
	assert_int_equal(c->regions[0].lim.ttl_ms, 36500ull * 86400000);
	assert_int_equal(c->regions[0].lim.max_bytes, 0);
	assert_int_equal(c->regions[0].lim.max_entries, 0);
	assert_int_equal(c->regions[1].lim.max_value_size, 1);
	assert_int_equal(c->regions[1].lim.nstripes, 1);
	assert_int_equal(c->regions[1].lim.tti_ms, 1);
	config_free(c);
}

static void test_long_bad_value_is_quoted_shortly(void **state)
{
	char *x = repeat('x', 500);
	char *t = xprintf("[a]\nmax_bytes = %s\n", x);
	char *m;

	(void)state;
	x[64] = '\0';
	m = xprintf("t.ini:2: max_bytes: expected a size like 64M, got "
		    "'%s...'",
		    x);
	expect_error(t, m);
	free(x);
	free(t);
	free(m);
}

/* ---- cross-field checks ---------------------------------------------- */

static void test_value_size_above_max_bytes_is_refused(void **state)
{
	(void)state;
	expect_error("[a]\nmax_bytes = 1M\nmax_value_size = 2M\n",
		     "t.ini:1: region 'a': max_value_size 2M exceeds "
		     "max_bytes 1M");
	expect_error("[a]\n[b]\nmax_bytes = 512K\n[c]\n",
		     "t.ini:2: region 'b': max_value_size 1M (built-in "
		     "default) exceeds max_bytes 512K");
	expect_error("[defaults]\nmax_value_size = 8M\n\n[big]\n"
		     "max_bytes = 1G\n[small]\nmax_bytes = 4M\n",
		     "t.ini:6: region 'small': max_value_size 8M (from "
		     "[defaults]) exceeds max_bytes 4M");
	expect_error("[defaults]\nmax_bytes = 1536K\nmax_value_size = 2M\n"
		     "[a]\n",
		     "t.ini:1: [defaults]: max_value_size 2M exceeds max_bytes "
		     "1536K");
	expect_error("[a]\nmax_bytes = 1000\nmax_value_size = 1001\n",
		     "t.ini:1: region 'a': max_value_size 1001 exceeds "
		     "max_bytes 1000");
}

static void test_value_size_is_free_when_bytes_unlimited(void **state)
{
	struct config *c;

	(void)state;
	c = parse_ok("[a]\nmax_bytes = 0\nmax_value_size = 64M\n"
		     "[b]\nmax_bytes = 1M\nmax_value_size = 1M\n");
	assert_int_equal(c->regions[0].lim.max_value_size, 64 * MIB);
	assert_int_equal(c->regions[1].lim.max_value_size, 1 * MIB);
	config_free(c);
}

/* ---- keys ------------------------------------------------------------ */

static void test_unknown_key_lists_the_valid_ones(void **state)
{
	(void)state;
	expect_error("[a]\nmax_entries = 1\nmax_byte = 1\n",
		     "t.ini:3: unknown key 'max_byte' (valid: max_entries, "
		     "max_bytes, max_value_size, ttl, tti, stripes, strategy, "
		     "durable, write_through, read_only, owner, group, mode, "
		     "dir_mode, "
		     "coherence, max_memory)");
	expect_error("[a]\nMax_Bytes = 1\n",
		     "t.ini:2: unknown key 'Max_Bytes' (valid: max_entries, "
		     "max_bytes, max_value_size, ttl, tti, stripes, strategy, "
		     "durable, write_through, read_only, owner, group, mode, "
		     "dir_mode, "
		     "coherence, max_memory)");
	expect_error("[a]\nmax bytes = 1\n",
		     "t.ini:2: unknown key 'max bytes' (valid: max_entries, "
		     "max_bytes, max_value_size, ttl, tti, stripes, strategy, "
		     "durable, write_through, read_only, owner, group, mode, "
		     "dir_mode, "
		     "coherence, max_memory)");
}

static void test_duplicate_key_names_its_first_line(void **state)
{
	struct config *c;

	(void)state;
	expect_error("[a]\nttl = 1h\n; again\nttl = 2h\n",
		     "t.ini:4: duplicate key 'ttl' (first set on line 2)");
	expect_error("[defaults]\nstripes=2\nstripes=4\n[a]\n",
		     "t.ini:3: duplicate key 'stripes' (first set on line 2)");
	/* the same key in [defaults] and in each region is fine */
	c = parse_ok("[defaults]\nttl = 1h\n[a]\nttl = 2h\n[b]\nttl = 3h\n");
	assert_int_equal(c->regions[0].lim.ttl_ms, 2 * 3600000);
	assert_int_equal(c->regions[1].lim.ttl_ms, 3 * 3600000);
	config_free(c);
}

static void test_key_before_any_section_is_refused(void **state)
{
	(void)state;
	expect_error("; header\nmax_bytes = 1M\n[a]\n",
		     "t.ini:2: key 'max_bytes' outside a section (put it under "
		     "[defaults] or a [region])");
}

static void test_lines_that_are_not_settings_are_refused(void **state)
{
	(void)state;
	expect_error(
		"[a]\nmax_bytes\n",
		"t.ini:2: expected 'key = value', '[region]' or a comment");
	expect_error("[a]\nmax_bytes: 1M\n",
		     "t.ini:2: expected '=' between key and value (':' is not "
		     "accepted)");
	expect_error("[a]\n= 1M\n", "t.ini:2: missing key before '='");
	expect_error("[a\n", "t.ini:1: missing ']' in section header");
	expect_error("[a] b\n", "t.ini:1: unexpected text after ']'");
	expect_error("[a]]\n", "t.ini:1: unexpected text after ']'");
}

/* ---- sections -------------------------------------------------------- */

static void test_bad_region_names_are_refused(void **state)
{
	static const struct {
		const char *header;
		const char *msg;
	} cases[] = {
		{"[]", "empty region name"},
		{"[.hidden]",
		 "bad region name '.hidden': must not start with '.' or '-'"},
		{"[-x]",
		 "bad region name '-x': must not start with '.' or '-'"},
		{"[a b]", "bad region name 'a b': use only A-Z a-z 0-9 _ -"},
		{"[ a]", "bad region name ' a': use only A-Z a-z 0-9 _ -"},
		{"[a.b]", "bad region name 'a.b': use only A-Z a-z 0-9 _ -"},
		{"[a/b]", "bad region name 'a/b': use only A-Z a-z 0-9 _ -"},
		{"[caf\xc3\xa9]",
		 "bad region name 'caf\\xc3\\xa9': use only A-Z a-z 0-9 _ -"},
		{"[Defaults]",
		 "region name 'Defaults' is reserved (the defaults section is "
		 "spelled [defaults])"},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *t = xprintf("[ok]\n%s\n", cases[i].header);
		char *m = xprintf("t.ini:2: %s", cases[i].msg);

		expect_error(t, m);
		free(t);
		free(m);
	}
}

static void test_region_name_of_64_bytes_is_kept_whole(void **state)
{
	char *a = repeat('a', 64), *b = repeat('a', 64), *t;
	struct config *c;

	(void)state;
	b[63] = 'b'; /* differs from a only after inih's 49-byte cut */
	t = xprintf("[%s]\nttl = 1s\n[%s]\nttl = 2s\n", a, b);
	c = parse_ok(t);
	assert_int_equal(c->nregions, 2);
	assert_string_equal(c->regions[0].name, a);
	assert_string_equal(c->regions[1].name, b);
	assert_int_equal(config_find(c, a)->lim.ttl_ms, 1000);
	assert_int_equal(config_find(c, b)->lim.ttl_ms, 2000);
	config_free(c);
	free(a);
	free(b);
	free(t);
}

static void test_region_name_of_65_bytes_is_refused(void **state)
{
	char *a = repeat('a', 65);
	char *t = xprintf("[ok]\n[%s]\n", a);

	(void)state;
	expect_error(t, "t.ini:2: region name too long (65 bytes, max 64)");
	free(a);
	free(t);
}

static void test_duplicate_sections_name_the_first(void **state)
{
	(void)state;
	expect_error("[a]\n[b]\n\n[a]\n",
		     "t.ini:4: duplicate region 'a' (first defined on line 1)");
	expect_error("[defaults]\n[defaults]\n[a]\n",
		     "t.ini:2: duplicate [defaults] section (first on line 1)");
}

static void test_defaults_after_a_region_is_refused(void **state)
{
	(void)state;
	expect_error("; c\n[a]\n[b]\n[defaults]\nttl = 1h\n",
		     "t.ini:4: [defaults] must come before the first region "
		     "(first region on line 2)");
}

static void test_file_without_regions_is_refused(void **state)
{
	(void)state;
	expect_error("", "t.ini: no regions defined (add a [region] section)");
	expect_error("; only a comment\n\n",
		     "t.ini: no regions defined (add a [region] section)");
	expect_error("[defaults]\nttl = 1h\n",
		     "t.ini: no regions defined (add a [region] section)");
}

/* n regions named r0, r1, ...; one header per line. */
static char *many_regions(size_t n)
{
	char *t = malloc(n * 8 + 1), *o = t;
	size_t i;

	assert_non_null(t);
	for (i = 0; i < n; i++)
		o += sprintf(o, "[r%zu]\n", i);
	*o = '\0';
	return t;
}

static void test_region_count_is_capped(void **state)
{
	struct config *c;
	char *t;

	(void)state;
	t = many_regions(CONFIG_MAX_REGIONS);
	c = parse_ok(t);
	assert_int_equal(c->nregions, CONFIG_MAX_REGIONS);
	assert_int_equal(c->regions[CONFIG_MAX_REGIONS - 1].line,
			 CONFIG_MAX_REGIONS);
	config_free(c);
	free(t);
	t = many_regions(CONFIG_MAX_REGIONS + 1);
	expect_error(t, "t.ini:1025: too many regions (max 1024)");
	free(t);
}

/* ---- lines: the inih traps ------------------------------------------- */

static void test_line_over_1024_bytes_is_refused(void **state)
{
	char *x = repeat('x', CONFIG_MAX_LINE - 1);
	char *ok = xprintf("[a]\n;%s\n", x); /* exactly 1024 bytes */
	char *bad = xprintf("[a]\n;%sx\nttl = 1h\n", x);
	struct config *c;

	(void)state;
	c = parse_ok(ok);
	config_free(c);
	expect_error(bad, "t.ini:2: line too long (1025 bytes, max 1024)");
	free(x);
	free(ok);
	free(bad);
}

/*
 * inih reads 200-byte chunks: fed raw, the tail of this comment would be
 * read as its own line and set max_entries.
 */
static void test_long_comment_cannot_set_a_key(void **state)
{
	char *x = repeat('x', 198);
	char *t = xprintf("[a]\n;%smax_entries = 7\n#%smax_entries = 7\n"
			  "max_bytes = bad\n",
			  x, x);
	struct config *c;

	(void)state;
	expect_error(t, "t.ini:4: max_bytes: expected a size like 64M, got "
			"'bad'");
	free(t);
	t = xprintf("[a]\n;%smax_entries = 7\n", x);
	c = parse_ok(t);
	assert_int_equal(only_region(c)->lim.max_entries, 100000);
	config_free(c);
	free(x);
	free(t);
}

static void test_lines_between_200_and_1024_bytes_work(void **state)
{
	char *zeros = repeat('0', 600), *x = repeat('x', 900), *t;
	const struct config_region *r;
	struct config *c;

	(void)state;
	t = xprintf("[a] ; %s\n"
		    "max_bytes = %s64M\n"
		    "ttl = 5m ; %s\n"
		    "max_entries = %s7\n"
		    "stripes = 4 # %s\n",
		    x, zeros, x, zeros, x);
	c = parse_ok(t);
	r = only_region(c);
	assert_int_equal(r->lim.max_bytes, 64 * MIB);
	assert_int_equal(r->lim.ttl_ms, 300000);
	assert_int_equal(r->lim.max_entries, 7);
	assert_int_equal(r->lim.nstripes, 4);
	config_free(c);
	free(t);
	/* line numbers stay exact after long lines, including applied ones */
	t = xprintf("[a]\nmax_bytes = %s64M\n;%s\nmax_bytes = 1M\n", zeros, x);
	expect_error(t, "t.ini:4: duplicate key 'max_bytes' (first set on "
			"line 2)");
	free(t);
	free(zeros);
	free(x);
}

/*
 * The reader hands inih a setting only when it fits inih's 200-byte
 * buffer (with "\n" and NUL); longer ones go to the handler directly.
 * Around that edge every value is read whole and the line numbers of the
 * lines after it stay exact.
 */
static void test_settings_around_inih_buffer_size_are_read_whole(void **state)
{
	size_t len;

	(void)state;
	for (len = 190; len <= 210; len++) {
		/* "max_bytes = " is 12 bytes, "2M" 2: the rest are zeros */
		char *zeros = repeat('0', len - 14);
		char *t = xprintf("[a]\nmax_bytes = %s2M\n", zeros);
		char *bad = xprintf("[a]\nmax_bytes = %s2M\nttl = x\n", zeros);
		struct config *c = parse_ok(t);

		assert_int_equal(strlen(strchr(t, '\n') + 1), len + 1);
		assert_int_equal(only_region(c)->lim.max_bytes, 2 * MIB);
		config_free(c);
		expect_error(bad, "t.ini:3: ttl: expected a duration like 30s, "
				  "5m, 2h or 1d (0 = never), got 'x'");
		free(zeros);
		free(t);
		free(bad);
	}
}

/* A key too long for inih's buffer is still named in the message. */
static void test_long_unknown_key_is_reported_on_its_line(void **state)
{
	char *k = repeat('k', 300);
	char *t = xprintf("[a]\n\n%s = 1\n", k);
	char *m;

	(void)state;
	k[64] = '\0';
	m = xprintf("t.ini:3: unknown key '%s...' (valid: max_entries, "
		    "max_bytes, max_value_size, ttl, tti, stripes, strategy, "
		    "durable, write_through, read_only, owner, group, mode, "
		    "dir_mode, "
		    "coherence, max_memory)",
		    k);
	expect_error(t, m);
	free(k);
	free(t);
	free(m);
}

/*
 * inih splits "key: value" at the ':'; we split at the first '=' only, so
 * a ':' before it is part of the key and one after it part of the value.
 */
static void test_colon_is_not_a_separator(void **state)
{
	(void)state;
	expect_error("[a]\nmax:bytes = 1M\n",
		     "t.ini:2: unknown key 'max:bytes' (valid: max_entries, "
		     "max_bytes, max_value_size, ttl, tti, stripes, strategy, "
		     "durable, write_through, read_only, owner, group, mode, "
		     "dir_mode, "
		     "coherence, max_memory)");
	expect_error("[a]\nttl = 1:30\n",
		     "t.ini:2: ttl: expected a duration like 30s, 5m, 2h or 1d "
		     "(0 = never), got '1:30'");
	expect_error("[a]\nttl :\n",
		     "t.ini:2: expected '=' between key and value (':' is not "
		     "accepted)");
}

/* inih would skip a byte order mark at the start of line 1 after ours. */
static void test_only_one_byte_order_mark_is_skipped(void **state)
{
	(void)state;
	expect_error("\xef\xbb\xbf\xef\xbb\xbfttl = 1h\n[a]\n",
		     "t.ini:1: key '\\xef\\xbb\\xbfttl' outside a section (put "
		     "it under [defaults] or a [region])");
	expect_error("\xef\xbb\xbf\xef\xbb\xbf[a]\n",
		     "t.ini:1: expected 'key = value', '[region]' or a "
		     "comment");
}

/* Whitespace inih would trim silently is a control character to us. */
static void test_control_characters_inih_would_trim_are_refused(void **state)
{
	(void)state;
	expect_error("[a]\nttl = 1h\x0c\n",
		     "t.ini:2: control character 0x0c in line (column 9)");
	expect_error("[a]\n\x0bttl = 1h\n",
		     "t.ini:2: control character 0x0b in line (column 1)");
	expect_error("[a]\nttl\r= 1h\n",
		     "t.ini:2: control character 0x0d in line (column 4)");
}

static void test_indented_lines_are_refused(void **state)
{
	struct config *c;

	(void)state;
	expect_error("[a]\nttl = 1h\n  2h\n",
		     "t.ini:3: indented line (continuation lines are not "
		     "supported)");
	expect_error("[a]\n\tttl = 1h\n",
		     "t.ini:2: indented line (continuation lines are not "
		     "supported)");
	expect_error(" [a]\n",
		     "t.ini:1: indented line (continuation lines are not "
		     "supported)");
	/* indented comments and blank-only lines are fine */
	c = parse_ok("[a]\nttl = 1h\n   ; note\n\t# note\n \t \n\n");
	assert_int_equal(only_region(c)->lim.ttl_ms, 3600000);
	config_free(c);
}

static void test_inline_comments_need_a_blank_before(void **state)
{
	const struct config_region *r;
	struct config *c;

	(void)state;
	c = parse_ok("[a] ; the a region\n"
		     "max_bytes = 8M ; eight\n"
		     "ttl = 1h\t# an hour\n"
		     "durable = true ;; x = y ; [z]\n");
	r = only_region(c);
	assert_int_equal(r->lim.max_bytes, 8 * MIB);
	assert_int_equal(r->lim.ttl_ms, 3600000);
	assert_true(r->durable);
	config_free(c);
	expect_error("[a]\nmax_bytes = 8M;eight\n",
		     "t.ini:2: max_bytes: expected a size like 64M, got "
		     "'8M;eight'");
	expect_error("[a]\nstrategy = lru#x\n",
		     "t.ini:2: strategy: expected lru, s3fifo or tinylfu, got "
		     "'lru#x'");
	expect_error("[a]#x\n", "t.ini:1: unexpected text after ']'");
}

static void test_trailing_blanks_crlf_and_bom_are_accepted(void **state)
{
	const struct config_region *r;
	struct config *c;

	(void)state;
	c = parse_ok("\xef\xbb\xbf[a]  \r\n"
		     "max_bytes   =   2M \t \r\n"
		     "\r\n"
		     "; comment\r\n"
		     "ttl=1h\r\n"
		     "stripes = 2");
	r = only_region(c);
	assert_string_equal(r->name, "a");
	assert_int_equal(r->lim.max_bytes, 2 * MIB);
	assert_int_equal(r->lim.ttl_ms, 3600000);
	assert_int_equal(r->lim.nstripes, 2);
	config_free(c);
	/* a BOM anywhere but at the start is not skipped */
	expect_error("[a]\n\xef\xbb\xbfttl = 1h\n",
		     "t.ini:2: unknown key '\\xef\\xbb\\xbfttl' (valid: "
		     "max_entries, max_bytes, max_value_size, ttl, tti, "
		     "stripes, strategy, durable, write_through, read_only, "
		     "owner, group, "
		     "mode, dir_mode, coherence, max_memory)");
	/* line numbers in CRLF files are right */
	expect_error("[a]\r\n\r\nttl = x\r\n",
		     "t.ini:3: ttl: expected a duration like 30s, 5m, 2h or 1d "
		     "(0 = never), got 'x'");
}

static void test_control_characters_are_refused(void **state)
{
	(void)state;
	expect_error("[a]\nttl = 1h\x0b\n",
		     "t.ini:2: control character 0x0b in line (column 9)");
	expect_error("[a]\nttl = 1h\r\r\n",
		     "t.ini:2: control character 0x0d in line (column 9)");
	expect_error("[a\x1b]\n",
		     "t.ini:1: control character 0x1b in line (column 3)");
	/* but not in comments */
	config_free(parse_ok("; bell \x07 here\n[a]\n"));
}

static void test_first_error_wins(void **state)
{
	(void)state;
	expect_error("[a]\nttl = x\nbogus = 1\n[a]\n",
		     "t.ini:2: ttl: expected a duration like 30s, 5m, 2h or 1d "
		     "(0 = never), got 'x'");
	/* a cross-field error is reported when its section closes */
	expect_error("[a]\nmax_bytes = 1K\n[b]\nttl = x\n",
		     "t.ini:1: region 'a': max_value_size 1M (built-in "
		     "default) exceeds max_bytes 1K");
}

/* ---- the error buffer ------------------------------------------------ */

static void test_error_buffer_is_optional_and_bounded(void **state)
{
	struct config *c = NULL;
	char err[12];
	int rc;

	(void)state;
	rc = config_parse_string("[a]\nttl = x\n", "t.ini", &c, NULL, 0);
	assert_int_equal(rc, -EINVAL);
	assert_null(c);
	memset(err, 'z', sizeof(err));
	rc = config_parse_string("[a]\nttl = x\n", "t.ini", &c, err,
				 sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_string_equal(err, "t.ini:2: tt");
	memset(err, 'z', sizeof(err));
	rc = config_parse_string("", "a-long-file-name.ini", &c, err,
				 sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_string_equal(err, "a-long-file");
	rc = config_load("/nonexistent/regions.ini", &c, NULL, 0);
	assert_int_equal(rc, -ENOENT);
}

/* ---- files ----------------------------------------------------------- */

static void test_load_reads_a_file(void **state)
{
	static const char text[] = "[a]\nmax_entries = 5\n";
	char *path = write_temp(text, sizeof(text) - 1);
	char err[CONFIG_ERR_LEN];
	struct config *c = NULL;

	(void)state;
	assert_int_equal(config_load(path, &c, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(only_region(c)->lim.max_entries, 5);
	config_free(c);
	unlink(path);
	free(path);
}

static void test_load_names_the_path_in_errors(void **state)
{
	static const char text[] = "[a]\n\nstripes = 5\n";
	char *path = write_temp(text, sizeof(text) - 1);
	char err[CONFIG_ERR_LEN];
	struct config *c = NULL;
	char *msg;

	(void)state;
	assert_int_equal(config_load(path, &c, err, sizeof(err)), -EINVAL);
	assert_null(c);
	msg = xprintf("%s:3: stripes: expected a power of two from 1 to "
		      "4096, got '5'",
		      path);
	assert_string_equal(err, msg);
	unlink(path);
	free(path);
	free(msg);
}

static void test_load_refuses_nul_bytes(void **state)
{
	static const char text[] = "[a]\nttl = 1h\n; x\0y\n";
	char *path = write_temp(text, sizeof(text) - 1);
	char err[CONFIG_ERR_LEN];
	struct config *c = NULL;
	char *msg;

	(void)state;
	assert_int_equal(config_load(path, &c, err, sizeof(err)), -EINVAL);
	assert_null(c);
	msg = xprintf("%s:3: line contains a NUL byte", path);
	assert_string_equal(err, msg);
	unlink(path);
	free(path);
	free(msg);
}

/*
 * inih would end the line at the NUL and set ttl = 1h: the reader refuses
 * the line.
 */
static void test_load_refuses_nul_in_a_setting(void **state)
{
	static const char text[] = "[a]\nttl = 1h\0 2h\n";
	char *path = write_temp(text, sizeof(text) - 1);
	char err[CONFIG_ERR_LEN];
	struct config *c = NULL;
	char *msg;

	(void)state;
	assert_int_equal(config_load(path, &c, err, sizeof(err)), -EINVAL);
	assert_null(c);
	msg = xprintf("%s:2: line contains a NUL byte", path);
	assert_string_equal(err, msg);
	unlink(path);
	free(path);
	free(msg);
}

static void test_load_reports_unreadable_files(void **state)
{
	char err[CONFIG_ERR_LEN];
	struct config *c = NULL;

	(void)state;
	assert_int_equal(
		config_load("/nonexistent/regions.ini", &c, err, sizeof(err)),
		-ENOENT);
	assert_null(c);
	assert_string_equal(err, "/nonexistent/regions.ini: cannot read: No "
				 "such file or directory");
	assert_int_equal(config_load("/", &c, err, sizeof(err)), -EISDIR);
	assert_string_equal(err, "/: cannot read: Is a directory");
	/* a FIFO (or device) would block or never end: refused at once */
	assert_int_equal(config_load("/dev/null", &c, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "/dev/null: not a regular file");
}

static void test_load_refuses_huge_files(void **state)
{
	size_t len = 16 * MIB + 1;
	char *text = repeat('\n', len), *path, *msg;
	char err[CONFIG_ERR_LEN];
	struct config *c = NULL;

	(void)state;
	memcpy(text, "[a]", 3);
	path = write_temp(text, len);
	assert_int_equal(config_load(path, &c, err, sizeof(err)), -EINVAL);
	assert_null(c);
	msg = xprintf("%s: file too large (max 16777216 bytes)", path);
	assert_string_equal(err, msg);
	unlink(path);
	free(path);
	free(msg);
	free(text);
}

/* ---- rendering ------------------------------------------------------- */

/* Turns config_format_region() output back into a regions.ini section. */
static char *format_to_ini(const char *fmt)
{
	char *ini = malloc(strlen(fmt) * 2 + 16), *o = ini;
	const char *line = fmt, *sp, *nl;

	assert_non_null(ini);
	for (; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		sp = strchr(line, ' ');
		assert_non_null(nl);
		assert_true(sp && sp < nl);
		if (strncmp(line, "name ", 5) == 0)
			o += sprintf(o, "[%.*s]\n", (int)(nl - sp - 1), sp + 1);
		else
			o += sprintf(o, "%.*s = %.*s\n", (int)(sp - line), line,
				     (int)(nl - sp - 1), sp + 1);
	}
	*o = '\0';
	return ini;
}

static void test_coherence(void **state)
{
	struct config *c;

	(void)state;
	c = parse_ok("[defaults]\ncoherence = strict\n"
		     "[a]\n[b]\ncoherence = Bounded\n[c]\n");
	assert_int_equal(c->regions[0].coherence, CONFIG_COHERENCE_STRICT);
	assert_int_equal(c->regions[1].coherence, CONFIG_COHERENCE_BOUNDED);
	assert_int_equal(c->regions[2].coherence, CONFIG_COHERENCE_STRICT);
	config_free(c);
	c = parse_ok("[a]\n");
	assert_int_equal(c->regions[0].coherence, CONFIG_COHERENCE_BOUNDED);
	config_free(c);
	expect_error("[a]\n\ncoherence = eventual\n",
		     "t.ini:3: coherence: expected bounded or strict, got "
		     "'eventual'");
}

static void test_max_memory(void **state)
{
	struct config *c;

	(void)state;
	c = parse_ok("[defaults]\nmax_memory = 512M\n[a]\n");
	assert_int_equal(c->max_memory, 512ULL << 20);
	config_free(c);
	c = parse_ok("[a]\n");
	assert_int_equal(c->max_memory, 0);
	config_free(c);
	expect_error("[a]\nmax_memory = 1G\n",
		     "t.ini:2: max_memory bounds the whole daemon, not one "
		     "region: set it in [defaults]");
	expect_error("[defaults]\nmax_memory = lots\n",
		     "t.ini:2: max_memory: expected a size like 1G, or 0 for "
		     "none, got 'lots'");
	expect_error("[defaults]\nmax_memory = 1G\nmax_memory = 2G\n",
		     "t.ini:3: duplicate key 'max_memory' (first set on line "
		     "2)");
}

static void test_owner_group_mode_read_only(void **state)
{
	struct config *c;
	const struct config_region *r;

	(void)state;
	c = parse_ok("[defaults]\nmode = 0600\n"
		     "[a]\nowner = root\ngroup = root\ndir_mode = 0700\n"
		     "read_only = true\n"
		     "[b]\nowner = 1234\ngroup = 5678\nmode = 444\n");
	r = &c->regions[0];
	assert_int_equal(r->owner, 0);
	assert_int_equal(r->group, 0);
	assert_int_equal(r->mode, 0600); /* from [defaults] */
	assert_int_equal(r->dir_mode, 0700);
	assert_true(r->read_only);
	r = &c->regions[1];
	assert_int_equal(r->owner, 1234);
	assert_int_equal(r->group, 5678);
	assert_int_equal(r->mode, 0444);
	assert_int_equal(r->dir_mode, 0755);
	assert_false(r->read_only);
	config_free(c);
	c = parse_ok("[c]\n");
	assert_int_equal(c->regions[0].owner, CONFIG_ID_UNSET);
	assert_int_equal(c->regions[0].group, CONFIG_ID_UNSET);
	assert_int_equal(c->regions[0].mode, 0644);
	config_free(c);
	expect_error("[a]\nmode = 0888\n",
		     "t.ini:2: mode: expected octal permission bits like 0640, "
		     "got '0888'");
	expect_error("[a]\nmode = 4755\n",
		     "t.ini:2: mode: expected octal permission bits like 0640, "
		     "got '4755'");
	expect_error("[a]\nowner = no-such-user-here\n",
		     "t.ini:2: owner: expected a user name or uid, got "
		     "'no-such-user-here'");
	expect_error("[a]\ngroup = no-such-group-here\n",
		     "t.ini:2: group: expected a group name or gid, got "
		     "'no-such-group-here'");
	expect_error("[a]\nread_only = maybe\n",
		     "t.ini:2: read_only: expected true or false (or yes/no, "
		     "on/off, 1/0), got 'maybe'");
}

static void test_format_round_trips(void **state)
{
	struct config *c, *back;
	char buf[1024];
	size_t i, n;
	char *ini;

	(void)state;
	c = parse_ok("[defaults]\nstripes = 8\n"
		     "[plain]\n"
		     "[full]\nmax_entries = 0\nmax_bytes = 0\n"
		     "max_value_size = 64M\nttl = 1d\ntti = 1500ms\n"
		     "stripes = 4096\nstrategy = s3fifo\ndurable = 1\n"
		     "read_only = yes\nowner = root\ngroup = 42\n"
		     "mode = 0640\ndir_mode = 750\n"
		     "[odd]\nmax_bytes = 1000001\nmax_value_size = 999\n");
	for (i = 0; i < c->nregions; i++) {
		n = config_format_region(&c->regions[i], buf, sizeof(buf));
		assert_int_equal(n, strlen(buf));
		ini = format_to_ini(buf);
		back = parse_ok(ini);
		assert_string_equal(only_region(back)->name,
				    c->regions[i].name);
		assert_limits_equal(only_region(back), &c->regions[i]);
		config_free(back);
		free(ini);
	}
	config_free(c);
}

static void test_format_is_exact_and_snprintf_like(void **state)
{
	static const char want[] = "name full\n"
				   "max_entries 0\n"
				   "max_bytes 2147483648\n"
				   "max_value_size 1048576\n"
				   "ttl 86400000ms\n"
				   "tti 1500ms\n"
				   "stripes 4\n"
				   "strategy s3fifo\n"
				   "durable true\n"
				   "write_through true\n"
				   "read_only false\n"
				   "mode 0644\n"
				   "dir_mode 0755\n"
				   "coherence strict\n";
	struct config *c;
	char buf[512], small[10];
	size_t n;

	(void)state;
	c = parse_ok("[full]\nmax_entries = 0\nmax_bytes = 2G\nttl = 1d\n"
		     "tti = 1500ms\nstripes = 4\nstrategy = s3fifo\n"
		     "durable = yes\ncoherence = STRICT\n");
	n = config_format_region(&c->regions[0], buf, sizeof(buf));
	assert_string_equal(buf, want);
	assert_int_equal(n, sizeof(want) - 1);
	assert_int_equal(
		config_format_region(&c->regions[0], small, sizeof(small)),
		sizeof(want) - 1);
	assert_string_equal(small, "name full");
	assert_int_equal(config_format_region(&c->regions[0], NULL, 0),
			 sizeof(want) - 1);
	config_free(c);
}

/* ---- reentrancy ----------------------------------------------------- */

#define PARSE_THREADS 4
#define PARSE_ROUNDS  200

/* Parses a valid and an invalid text repeatedly; returns NULL if all ok. */
static void *parse_loop(void *arg)
{
	const char *good = "[defaults]\nttl = 1h\n[a]\nstripes = 4\n[b]\n";
	const char *bad = "[a]\nttl = 1h\nttl = 2h\n";
	char err[CONFIG_ERR_LEN];
	struct config *c;
	int i;

	for (i = 0; i < PARSE_ROUNDS; i++) {
		if (config_parse_string(good, "g.ini", &c, err, sizeof(err)))
			return arg;
		if (c->nregions != 2 || c->regions[1].lim.ttl_ms != 3600000)
			return arg;
		config_free(c);
		if (config_parse_string(bad, "b.ini", &c, err, sizeof(err)) !=
			    -EINVAL ||
		    strcmp(err, "b.ini:3: duplicate key 'ttl' (first set on "
				"line 2)") != 0)
			return arg;
	}
	return NULL;
}

/* The parser keeps no global state: parses in parallel do not interfere. */
static void test_parses_run_concurrently(void **state)
{
	pthread_t t[PARSE_THREADS];
	void *res;
	uintptr_t i;

	(void)state;
	for (i = 0; i < PARSE_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, parse_loop,
						(void *)(i + 1)),
				 0);
	for (i = 0; i < PARSE_THREADS; i++) {
		assert_int_equal(pthread_join(t[i], &res), 0);
		assert_null(res);
	}
}

/* ---- the shipped regions.ini ----------------------------------------- */

/*
 * The path of the repository's regions.ini: two directories above this
 * source file. Meson compiles with a path relative to the build root,
 * which is two directories above this executable, so resolve it from there
 * when it is not absolute.
 */
static char *shipped_ini_path(void)
{
	char exe[PATH_MAX], src[PATH_MAX];
	ssize_t n;

	snprintf(src, sizeof(src), "%s", __FILE__);
	if (src[0] == '/')
		return xprintf("%s/../../regions.ini", dirname(src));
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	return xprintf("%s/../../%s/../../regions.ini", dirname(exe),
		       dirname(src));
}

static void test_shipped_regions_ini_parses(void **state)
{
	char *path = shipped_ini_path();
	char err[CONFIG_ERR_LEN] = "";
	struct config *c = NULL;
	int rc;

	(void)state;
	rc = config_load(path, &c, err, sizeof(err));
	if (rc != 0)
		print_error("%s\n", err);
	assert_int_equal(rc, 0);
	assert_true(c->nregions >= 2);
	assert_non_null(config_find(c, "options"));
	config_free(c);
	free(path);
}

/* Its [defaults] section shows every built-in default; they must agree. */
static void test_shipped_defaults_match_builtins(void **state)
{
	char *path = shipped_ini_path(), *text, *cut, *probe;
	struct config_region def;
	struct config *c;
	long len;
	FILE *f;

	(void)state;
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	text = calloc(1, len + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, len, f), (size_t)len);
	fclose(f);
	assert_non_null(strstr(text, "\n[defaults]\n"));
	cut = strstr(strstr(text, "\n[defaults]\n") + 1, "\n[");
	assert_non_null(cut);
	cut[1] = '\0'; /* keep everything up to the first region */
	probe = xprintf("%s[probe]\n", text);
	c = parse_ok(probe);
	config_default_region(&def);
	assert_limits_equal(only_region(c), &def);
	config_free(c);
	free(probe);
	free(text);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bare_region_gets_builtin_defaults),
		cmocka_unit_test(test_every_setting_is_parsed),
		cmocka_unit_test(test_defaults_are_inherited_then_overridden),
		cmocka_unit_test(test_regions_keep_file_order_and_are_found),
		cmocka_unit_test(test_size_parser_accepts_units),
		cmocka_unit_test(test_size_parser_rejects_garbage_and_overflow),
		cmocka_unit_test(test_duration_parser_converts_to_ms),
		cmocka_unit_test(test_durable_accepts_the_boolean_words),
		cmocka_unit_test(test_write_through_is_a_boolean_on_by_default),
		cmocka_unit_test(test_strategy_names_round_trip),
		cmocka_unit_test(test_bad_values_say_what_is_expected),
		cmocka_unit_test(test_limits_at_the_edges_are_accepted),
		cmocka_unit_test(test_long_bad_value_is_quoted_shortly),
		cmocka_unit_test(test_value_size_above_max_bytes_is_refused),
		cmocka_unit_test(test_value_size_is_free_when_bytes_unlimited),
		cmocka_unit_test(test_unknown_key_lists_the_valid_ones),
		cmocka_unit_test(test_duplicate_key_names_its_first_line),
		cmocka_unit_test(test_key_before_any_section_is_refused),
		cmocka_unit_test(test_lines_that_are_not_settings_are_refused),
		cmocka_unit_test(test_bad_region_names_are_refused),
		cmocka_unit_test(test_region_name_of_64_bytes_is_kept_whole),
		cmocka_unit_test(test_region_name_of_65_bytes_is_refused),
		cmocka_unit_test(test_duplicate_sections_name_the_first),
		cmocka_unit_test(test_defaults_after_a_region_is_refused),
		cmocka_unit_test(test_file_without_regions_is_refused),
		cmocka_unit_test(test_region_count_is_capped),
		cmocka_unit_test(test_line_over_1024_bytes_is_refused),
		cmocka_unit_test(test_long_comment_cannot_set_a_key),
		cmocka_unit_test(test_lines_between_200_and_1024_bytes_work),
		cmocka_unit_test(
			test_settings_around_inih_buffer_size_are_read_whole),
		cmocka_unit_test(test_long_unknown_key_is_reported_on_its_line),
		cmocka_unit_test(test_colon_is_not_a_separator),
		cmocka_unit_test(test_only_one_byte_order_mark_is_skipped),
		cmocka_unit_test(
			test_control_characters_inih_would_trim_are_refused),
		cmocka_unit_test(test_indented_lines_are_refused),
		cmocka_unit_test(test_inline_comments_need_a_blank_before),
		cmocka_unit_test(
			test_trailing_blanks_crlf_and_bom_are_accepted),
		cmocka_unit_test(test_control_characters_are_refused),
		cmocka_unit_test(test_first_error_wins),
		cmocka_unit_test(test_error_buffer_is_optional_and_bounded),
		cmocka_unit_test(test_load_reads_a_file),
		cmocka_unit_test(test_load_names_the_path_in_errors),
		cmocka_unit_test(test_load_refuses_nul_bytes),
		cmocka_unit_test(test_load_refuses_nul_in_a_setting),
		cmocka_unit_test(test_load_reports_unreadable_files),
		cmocka_unit_test(test_load_refuses_huge_files),
		cmocka_unit_test(test_owner_group_mode_read_only),
		cmocka_unit_test(test_coherence),
		cmocka_unit_test(test_max_memory),
		cmocka_unit_test(test_format_round_trips),
		cmocka_unit_test(test_format_is_exact_and_snprintf_like),
		cmocka_unit_test(test_parses_run_concurrently),
		cmocka_unit_test(test_shipped_regions_ini_parses),
		cmocka_unit_test(test_shipped_defaults_match_builtins),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
