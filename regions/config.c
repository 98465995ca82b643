/*
 * config.c - regions.ini: parsing and strict validation.
 *
 * inih parses regions.ini: it splits each setting at its '=', trims the
 * blanks around key and value and calls our handler (on_setting), which
 * validates the key and parses the value; that is all our code does with a
 * setting. inih reads the text through our line reader (read_line, given
 * to ini_parse_stream), a wrapper that checks each physical line for what
 * inih r55 gets wrong and hands inih the line only when inih will read it
 * as we mean it. Each trap is checked against Debian's build:
 *
 *  - inih reads lines into a 200-byte buffer and takes the rest of a longer
 *    line as a new line, so the tail of a long comment could set a key.
 *    The reader refuses lines over CONFIG_MAX_LINE (1024) bytes, gives inih
 *    an empty line for a comment, and cuts inline comments first, so lines
 *    up to 1024 bytes work whatever inih's buffer size. A setting that still
 *    does not fit (only an absurd value such as 300 leading zeros can do
 *    that) goes to the handler directly, split as inih would split it, and
 *    inih gets an empty line: every physical line is exactly one reader
 *    call, so inih's line numbers stay ours.
 *  - NUL bytes would end inih's line early, and control characters would
 *    pass silently: the reader refuses both, with the line number.
 *  - inih takes indented lines as continuations of the previous value
 *    (INI_ALLOW_MULTILINE): the reader refuses them.
 *  - inih truncates section names to 49 bytes and does not call the
 *    handler for headers (INI_CALL_HANDLER_ON_NEW_SECTION is 0), so an
 *    empty section would go unseen: the reader opens sections itself and
 *    the handler ignores inih's section.
 *  - inih's inline comments need a space before ';', and '#' is none; it
 *    also accepts "key: value" and skips a byte order mark on line 1 after
 *    ours. The reader cuts comments itself, refuses a line with ':' but no
 *    '=', and sends a line with ':' before its '=' (or a second byte order
 *    mark) to the handler directly, so these rules are ours, whatever
 *    options inih was built with.
 *  - inih passes the line number to the handler only when built with
 *    INI_HANDLER_LINENO. Debian's build does, so we define it before
 *    including ini.h. The handler checks that inih's count equals the
 *    reader's and refuses the file otherwise, so a library built without it
 *    fails loudly at the first test instead of misreporting lines.
 *
 * We never set inih's run-time option globals (ini_max_line and friends, a
 * Debian addition): they are process-wide and two parses would race. All
 * state lives in struct parser, so parsing is reentrant and thread-safe.
 *
 * Semantics: an optional [defaults] section must come first; every region
 * starts as a copy of the built-in defaults overlaid with [defaults], then
 * applies its own keys. A section's cross-field checks run when the next
 * header or the end of the file closes it, with the header's line number.
 * The first error wins: the reader stops there, so messages come in file
 * order and one bad line never hides behind a later one.
 */
#define INI_HANDLER_LINENO 1 /* Debian's libinih passes lineno; see above */
#include <ini.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

#define KIB		1024ull
#define MIB		(1024ull * KIB)
#define MAX_VALUE_SIZE	(64 * MIB)
#define MAX_DURATION_MS (36500ull * 86400 * 1000) /* 100 years */
#define MAX_FILE_SIZE	(16 * MIB) /* far above 1024 regions' worth */
#define QUOTE_MAX	64	   /* bytes of a value shown in a message */
#define QUOTE_LEN	(QUOTE_MAX * 4 + 4)
#define DEFAULTS_NAME	"defaults"
#define VALID_KEYS                                                             \
	"max_entries, max_bytes, max_value_size, ttl, tti, stripes, "          \
	"strategy, durable, write_through, read_only, owner, group, mode, "    \
	"dir_mode, coherence, max_memory"

enum key_id {
	K_MAX_ENTRIES,
	K_MAX_BYTES,
	K_MAX_VALUE_SIZE,
	K_TTL,
	K_TTI,
	K_STRIPES,
	K_STRATEGY,
	K_DURABLE,
	K_WRITE_THROUGH,
	K_READ_ONLY,
	K_OWNER,
	K_GROUP,
	K_MODE,
	K_DIR_MODE,
	K_COHERENCE,
	K_MAX_MEMORY,
	NKEYS
};

struct parser {
	const char *name;   /* file name for messages */
	const char *text;   /* the whole input, not NUL-terminated */
	size_t len;	    /* bytes in text */
	size_t pos;	    /* start of the next line */
	unsigned line;	    /* number of the line being read */
	char *err;	    /* the caller's message buffer, or NULL */
	size_t errlen;	    /* its size */
	int rc;		    /* first error (negative errno) or 0 */
	struct config *cfg; /* what we are building */
	size_t cap;	    /* allocated cfg->regions */
	struct config_region defaults; /* built-ins overlaid with [defaults] */
	unsigned dseen[NKEYS];	   /* line each key was set on in [defaults] */
	struct config_region *cur; /* section being filled, NULL before any */
	unsigned seen[NKEYS]; /* line each key was set on in cur; 0 = not */
};

typedef int (*setter_fn)(struct parser *p, struct config_region *cr,
			 const char *v);

struct setting {
	const char *key;
	setter_fn set;
};

/* ---- messages -------------------------------------------------------- */

/*
 * Records the first error as "NAME:LINE: message" ("NAME: message" when
 * line is 0). Later errors are dropped. Returns p->rc.
 */
__attribute__((format(printf, 3, 4))) static int
fail(struct parser *p, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->rc)
		return p->rc;
	p->rc = -EINVAL;
	if (!p->err || !p->errlen)
		return p->rc;
	if (line)
		n = snprintf(p->err, p->errlen, "%s:%u: ", p->name, line);
	else
		n = snprintf(p->err, p->errlen, "%s: ", p->name);
	if (n < 0 || (size_t)n >= p->errlen)
		return p->rc;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - n, fmt, ap);
	va_end(ap);
	return p->rc;
}

/* fail() for the line being read. */
#define fail_here(p, ...) fail((p), (p)->line, __VA_ARGS__)

/*
 * Copies s[0..n) into buf (QUOTE_LEN bytes) for a message: bytes outside
 * printable ASCII (and '\\', '\'') become \xNN, and after QUOTE_MAX bytes
 * of s the rest becomes "...". Returns buf.
 */
static const char *quote(const char *s, size_t n, char *buf)
{
	size_t i, o = 0;

	for (i = 0; i < n && i < QUOTE_MAX; i++) {
		unsigned char c = s[i];

		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
			buf[o++] = c;
		else
			o += sprintf(buf + o, "\\x%02x", c);
	}
	if (i < n)
		o += sprintf(buf + o, "...");
	buf[o] = '\0';
	return buf;
}

/* Renders a size the way regions.ini writes it: 64M, 1536K, 100. */
static const char *human_size(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "TGMK";
	int i;

	for (i = 0; v && i < 4; i++) {
		unsigned shift = 40 - 10 * i;

		if (v % (1ull << shift) == 0) {
			snprintf(buf, len, "%" PRIu64 "%c", v >> shift,
				 units[i]);
			return buf;
		}
	}
	snprintf(buf, len, "%" PRIu64, v);
	return buf;
}

/* ---- value parsers --------------------------------------------------- */

/*
 * Parses the decimal digits at the start of s into *out and points *end
 * past them. -EINVAL without a digit, -ERANGE beyond UINT64_MAX.
 */
static int parse_digits(const char *s, const char **end, uint64_t *out)
{
	uint64_t n = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = *s - '0';

		if (n > (UINT64_MAX - d) / 10)
			return -ERANGE;
		n = n * 10 + d;
	}
	*end = s;
	*out = n;
	return 0;
}

/* A plain decimal count, nothing after the digits. */
static int parse_count(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t n;
	int rc;

	rc = parse_digits(s, &end, &n);
	if (rc < 0)
		return rc;
	if (*end)
		return -EINVAL;
	*out = n;
	return 0;
}

/*
 * Sizes: digits, then optionally K, M, G or T (powers of 1024), then
 * optionally "B" or "iB"; case-insensitive. "512", "512B", "64M", "64MB"
 * and "64MiB" are all accepted; "1.5G", "64 M" and "-1" are not.
 */
int config_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	const char *end, *u;
	unsigned shift = 0;
	uint64_t n;
	int rc;

	rc = parse_digits(s, &end, &n);
	if (rc < 0)
		return rc;
	u = *end ? strchr(units, end[0] | 0x20) : NULL;
	if (u) {
		shift = 10 * (unsigned)(u - units + 1);
		end++;
		if ((end[0] | 0x20) == 'i' && (end[1] | 0x20) == 'b')
			end++;
	}
	if ((*end | 0x20) == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && n > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = n << shift;
	return 0;
}

/*
 * Durations: digits, then "ms", "s", "m", "h" or "d" (lowercase only, so
 * that "1M" is never read as a month); a bare number is seconds. The
 * result is in milliseconds.
 */
int config_parse_duration_ms(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t ms;
	} units[] = {
		{"", 1000},   {"ms", 1},      {"s", 1000},
		{"m", 60000}, {"h", 3600000}, {"d", 86400000},
	};
	const char *end;
	uint64_t n;
	size_t i;
	int rc;

	rc = parse_digits(s, &end, &n);
	if (rc < 0)
		return rc;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) != 0)
			continue;
		if (n > UINT64_MAX / units[i].ms)
			return -ERANGE;
		*out = n * units[i].ms;
		return 0;
	}
	return -EINVAL;
}

/* true/false, yes/no, on/off, 1/0; case-insensitive. */
static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
			*out = strcasecmp(s, yes[i]) == 0;
			return 0;
		}
	}
	return -EINVAL;
}

const char *config_strategy_name(enum region_strategy s)
{
	switch (s) {
	case REGION_STRATEGY_LRU:
		return "lru";
	case REGION_STRATEGY_S3FIFO:
		return "s3fifo";
	case REGION_STRATEGY_TINYLFU:
		return "tinylfu";
	}
	return "unknown";
}

const char *config_coherence_name(enum config_coherence c)
{
	return c == CONFIG_COHERENCE_STRICT ? "strict" : "bounded";
}

/* ---- settings -------------------------------------------------------- */

/* The error for a value that does not parse: "KEY: expected WHAT, got 'V'". */
static int bad_value(struct parser *p, const char *key, const char *what,
		     const char *v)
{
	char q[QUOTE_LEN];

	return fail_here(p, "%s: expected %s, got '%s'", key, what,
			 quote(v, strlen(v), q));
}

static int too_large(struct parser *p, const char *key, const char *v)
{
	char q[QUOTE_LEN];

	return fail_here(p, "%s: '%s' is too large", key,
			 quote(v, strlen(v), q));
}

static int set_max_entries(struct parser *p, struct config_region *cr,
			   const char *v)
{
	int rc = parse_count(v, &cr->lim.max_entries);

	if (rc == -ERANGE)
		return too_large(p, "max_entries", v);
	if (rc < 0)
		return bad_value(p, "max_entries",
				 "a count like 100000 (0 = unlimited)", v);
	return 0;
}

static int set_max_bytes(struct parser *p, struct config_region *cr,
			 const char *v)
{
	int rc = config_parse_size(v, &cr->lim.max_bytes);

	if (rc == -ERANGE)
		return too_large(p, "max_bytes", v);
	if (rc < 0)
		return bad_value(p, "max_bytes", "a size like 64M", v);
	return 0;
}

static int set_max_value_size(struct parser *p, struct config_region *cr,
			      const char *v)
{
	uint64_t n;
	int rc = config_parse_size(v, &n);

	if (rc == -EINVAL)
		return bad_value(p, "max_value_size", "a size like 1M", v);
	if (rc < 0 || n == 0 || n > MAX_VALUE_SIZE)
		return bad_value(p, "max_value_size", "a size from 1 to 64M",
				 v);
	cr->lim.max_value_size = n;
	return 0;
}

static int set_duration(struct parser *p, const char *key, uint64_t *ms,
			const char *v)
{
	uint64_t n;
	int rc = config_parse_duration_ms(v, &n);

	if (rc == -EINVAL)
		return bad_value(
			p, key, "a duration like 30s, 5m, 2h or 1d (0 = never)",
			v);
	if (rc < 0 || n > MAX_DURATION_MS)
		return fail_here(p, "%s: duration too long (max 36500d)", key);
	*ms = n;
	return 0;
}

static int set_ttl(struct parser *p, struct config_region *cr, const char *v)
{
	return set_duration(p, "ttl", &cr->lim.ttl_ms, v);
}

static int set_tti(struct parser *p, struct config_region *cr, const char *v)
{
	return set_duration(p, "tti", &cr->lim.tti_ms, v);
}

static int set_stripes(struct parser *p, struct config_region *cr,
		       const char *v)
{
	uint64_t n;

	if (parse_count(v, &n) < 0 || n == 0 || n > REGION_MAX_STRIPES ||
	    (n & (n - 1)) != 0)
		return bad_value(p, "stripes", "a power of two from 1 to 4096",
				 v);
	cr->lim.nstripes = (unsigned)n;
	return 0;
}

static int set_strategy(struct parser *p, struct config_region *cr,
			const char *v)
{
	if (strcasecmp(v, "lru") == 0)
		cr->lim.strategy = REGION_STRATEGY_LRU;
	else if (strcasecmp(v, "s3fifo") == 0)
		cr->lim.strategy = REGION_STRATEGY_S3FIFO;
	else if (strcasecmp(v, "tinylfu") == 0)
		cr->lim.strategy = REGION_STRATEGY_TINYLFU;
	else
		return bad_value(p, "strategy", "lru, s3fifo or tinylfu", v);
	return 0;
}

static int set_durable(struct parser *p, struct config_region *cr,
		       const char *v)
{
	if (parse_bool(v, &cr->durable) < 0)
		return bad_value(p, "durable",
				 "true or false (or yes/no, on/off, 1/0)", v);
	return 0;
}

static int set_write_through(struct parser *p, struct config_region *cr,
			     const char *v)
{
	if (parse_bool(v, &cr->write_through) < 0)
		return bad_value(p, "write_through",
				 "true or false (or yes/no, on/off, 1/0)", v);
	return 0;
}

static int set_read_only(struct parser *p, struct config_region *cr,
			 const char *v)
{
	if (parse_bool(v, &cr->read_only) < 0)
		return bad_value(p, "read_only",
				 "true or false (or yes/no, on/off, 1/0)", v);
	return 0;
}

/*
 * A user or group: a number, or a name looked up in the system's
 * databases now (a reload looks it up again). -EINVAL: neither.
 */
static int parse_id(const char *v, bool group, uint32_t *out)
{
	char buf[16384];
	uint64_t n;
	int rc;

	if (parse_count(v, &n) == 0)
		return n < CONFIG_ID_UNSET ? (*out = (uint32_t)n, 0) : -ERANGE;
	if (group) {
		struct group gr, *g = NULL;

		rc = getgrnam_r(v, &gr, buf, sizeof(buf), &g);
		if (rc || !g)
			return -EINVAL;
		*out = g->gr_gid;
	} else {
		struct passwd pw, *u = NULL;

		rc = getpwnam_r(v, &pw, buf, sizeof(buf), &u);
		if (rc || !u)
			return -EINVAL;
		*out = u->pw_uid;
	}
	return 0;
}

static int set_owner(struct parser *p, struct config_region *cr, const char *v)
{
	if (parse_id(v, false, &cr->owner) < 0)
		return bad_value(p, "owner", "a user name or uid", v);
	return 0;
}

static int set_group(struct parser *p, struct config_region *cr, const char *v)
{
	if (parse_id(v, true, &cr->group) < 0)
		return bad_value(p, "group", "a group name or gid", v);
	return 0;
}

/* Permission bits in octal, 0 to 0777 ("0640", "640"); no set-id bits. */
static int parse_mode(const char *v, uint16_t *out)
{
	unsigned m = 0;
	const char *s;

	if (!*v || strlen(v) > 4)
		return -EINVAL;
	for (s = v; *s; s++) {
		if (*s < '0' || *s > '7')
			return -EINVAL;
		m = m * 8 + (unsigned)(*s - '0');
	}
	if (m > 0777)
		return -EINVAL;
	*out = (uint16_t)m;
	return 0;
}

static int set_mode(struct parser *p, struct config_region *cr, const char *v)
{
	if (parse_mode(v, &cr->mode) < 0)
		return bad_value(p, "mode", "octal permission bits like 0640",
				 v);
	return 0;
}

static int set_dir_mode(struct parser *p, struct config_region *cr,
			const char *v)
{
	if (parse_mode(v, &cr->dir_mode) < 0)
		return bad_value(p, "dir_mode",
				 "octal permission bits like 0750", v);
	return 0;
}

static int set_coherence(struct parser *p, struct config_region *cr,
			 const char *v)
{
	if (strcasecmp(v, "bounded") == 0)
		cr->coherence = CONFIG_COHERENCE_BOUNDED;
	else if (strcasecmp(v, "strict") == 0)
		cr->coherence = CONFIG_COHERENCE_STRICT;
	else
		return bad_value(p, "coherence", "bounded or strict", v);
	return 0;
}

static bool is_defaults(const struct parser *p, const struct config_region *cr);

/*
 * max_memory bounds the whole daemon (values cached or held open, plus
 * write buffers), not one region: it is set in [defaults] only and is
 * not inherited. 0: no bound.
 */
static int set_max_memory(struct parser *p, struct config_region *cr,
			  const char *v)
{
	int rc;

	if (!is_defaults(p, cr))
		return fail_here(p,
				 "max_memory bounds the whole daemon, not one "
				 "region: set it in [%s]",
				 DEFAULTS_NAME);
	rc = config_parse_size(v, &p->cfg->max_memory);
	if (rc == -ERANGE)
		return too_large(p, "max_memory", v);
	if (rc < 0)
		return bad_value(p, "max_memory",
				 "a size like 1G, or 0 for none", v);
	return 0;
}

/* In enum key_id order. */
static const struct setting settings[NKEYS] = {
	[K_MAX_ENTRIES] = {"max_entries", set_max_entries},
	[K_MAX_BYTES] = {"max_bytes", set_max_bytes},
	[K_MAX_VALUE_SIZE] = {"max_value_size", set_max_value_size},
	[K_TTL] = {"ttl", set_ttl},
	[K_TTI] = {"tti", set_tti},
	[K_STRIPES] = {"stripes", set_stripes},
	[K_STRATEGY] = {"strategy", set_strategy},
	[K_DURABLE] = {"durable", set_durable},
	[K_WRITE_THROUGH] = {"write_through", set_write_through},
	[K_READ_ONLY] = {"read_only", set_read_only},
	[K_OWNER] = {"owner", set_owner},
	[K_GROUP] = {"group", set_group},
	[K_MODE] = {"mode", set_mode},
	[K_DIR_MODE] = {"dir_mode", set_dir_mode},
	[K_COHERENCE] = {"coherence", set_coherence},
	[K_MAX_MEMORY] = {"max_memory", set_max_memory},
};

/* The key_id of key[0..n), or -1. */
static int find_key(const char *key, size_t n)
{
	int i;

	for (i = 0; i < NKEYS; i++) {
		if (strlen(settings[i].key) == n &&
		    memcmp(settings[i].key, key, n) == 0)
			return i;
	}
	return -1;
}

void config_default_region(struct config_region *out)
{
	memset(out, 0, sizeof(*out));
	out->lim.max_entries = 100000;
	out->lim.max_bytes = 64 * MIB;
	out->lim.max_value_size = 1 * MIB;
	out->lim.ttl_ms = 0;
	out->lim.tti_ms = 0;
	out->lim.nstripes = 16;
	out->lim.strategy = REGION_STRATEGY_TINYLFU;
	out->durable = false;
	out->write_through = true;
	out->read_only = false;
	out->owner = CONFIG_ID_UNSET;
	out->group = CONFIG_ID_UNSET;
	out->mode = 0644;
	out->dir_mode = 0755;
	out->coherence = CONFIG_COHERENCE_BOUNDED;
}

/* ---- sections -------------------------------------------------------- */

static bool is_defaults(const struct parser *p, const struct config_region *cr)
{
	return cr == &p->defaults;
}

/* Where the value of key k in the section being closed came from. */
static const char *origin(const struct parser *p, int k)
{
	if (p->seen[k])
		return "";
	if (!is_defaults(p, p->cur) && p->dseen[k])
		return " (from [defaults])";
	return " (built-in default)";
}

/*
 * Cross-field checks on the section being closed, after inheritance;
 * errors carry the header's line.
 */
static int close_section(struct parser *p)
{
	const struct region_limits *l;
	char a[32], b[32], what[REGION_MAX_NAME + 16];

	if (!p->cur)
		return 0;
	l = &p->cur->lim;
	if (is_defaults(p, p->cur)) {
		memcpy(p->dseen, p->seen, sizeof(p->dseen));
		snprintf(what, sizeof(what), "[%s]", DEFAULTS_NAME);
	} else {
		snprintf(what, sizeof(what), "region '%s'", p->cur->name);
	}
	if (l->max_bytes && l->max_value_size > l->max_bytes)
		return fail(p, p->cur->line,
			    "%s: max_value_size %s%s exceeds max_bytes %s%s",
			    what, human_size(l->max_value_size, a, sizeof(a)),
			    origin(p, K_MAX_VALUE_SIZE),
			    human_size(l->max_bytes, b, sizeof(b)),
			    origin(p, K_MAX_BYTES));
	return 0;
}

static int open_defaults(struct parser *p)
{
	if (p->cfg->nregions)
		return fail_here(p,
				 "[%s] must come before the first region "
				 "(first region on line %u)",
				 DEFAULTS_NAME, p->cfg->regions[0].line);
	if (p->defaults.line)
		return fail_here(p, "duplicate [%s] section (first on line %u)",
				 DEFAULTS_NAME, p->defaults.line);
	p->defaults.line = p->line;
	p->cur = &p->defaults;
	return 0;
}

/* Checks a region name: [A-Za-z0-9_-], 1..64 bytes, no leading '-'. */
static int check_region_name(struct parser *p, const char *s, size_t n)
{
	char q[QUOTE_LEN];
	size_t i;

	if (n == 0)
		return fail_here(p, "empty region name");
	if (n > REGION_MAX_NAME)
		return fail_here(p, "region name too long (%zu bytes, max %d)",
				 n, REGION_MAX_NAME);
	if (s[0] == '.' || s[0] == '-')
		return fail_here(p,
				 "bad region name '%s': must not start with "
				 "'.' or '-'",
				 quote(s, n, q));
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return fail_here(p,
					 "bad region name '%s': use only "
					 "A-Z a-z 0-9 _ -",
					 quote(s, n, q));
	}
	if (n == strlen(DEFAULTS_NAME) && strncasecmp(s, DEFAULTS_NAME, n) == 0)
		return fail_here(p,
				 "region name '%.*s' is reserved (the defaults "
				 "section is spelled [%s])",
				 (int)n, s, DEFAULTS_NAME);
	return 0;
}

/* Makes room for one more region. */
static int grow_regions(struct parser *p)
{
	struct config_region *r;
	size_t cap;

	if (p->cfg->nregions < p->cap)
		return 0;
	cap = p->cap ? p->cap * 2 : 8;
	r = realloc(p->cfg->regions, cap * sizeof(*r));
	if (!r) {
		fail(p, 0, "out of memory");
		return p->rc = -ENOMEM;
	}
	p->cfg->regions = r;
	p->cap = cap;
	return 0;
}

static int open_region(struct parser *p, const char *s, size_t n)
{
	struct config_region *cr;
	size_t i;
	int rc;

	rc = check_region_name(p, s, n);
	if (rc < 0)
		return rc;
	for (i = 0; i < p->cfg->nregions; i++) {
		cr = &p->cfg->regions[i];
		if (strlen(cr->name) == n && memcmp(cr->name, s, n) == 0)
			return fail_here(p,
					 "duplicate region '%s' (first defined "
					 "on line %u)",
					 cr->name, cr->line);
	}
	if (p->cfg->nregions >= CONFIG_MAX_REGIONS)
		return fail_here(p, "too many regions (max %d)",
				 CONFIG_MAX_REGIONS);
	rc = grow_regions(p);
	if (rc < 0)
		return rc;
	cr = &p->cfg->regions[p->cfg->nregions++];
	*cr = p->defaults;
	memcpy(cr->name, s, n);
	cr->name[n] = '\0';
	cr->line = p->line;
	p->cur = cr;
	return 0;
}

/* A "[name]" header: closes the previous section, opens the next one. */
static int open_section(struct parser *p, const char *s, size_t n)
{
	int rc;

	rc = close_section(p);
	if (rc < 0)
		return rc;
	memset(p->seen, 0, sizeof(p->seen));
	if (n == strlen(DEFAULTS_NAME) && memcmp(s, DEFAULTS_NAME, n) == 0)
		return open_defaults(p);
	return open_region(p, s, n);
}

/* ---- the handler: validation ---------------------------------------- */

/*
 * Checks the key s[0..klen) of a setting in the current section and
 * records its line. Returns its key_id or a negative errno.
 */
static int check_key(struct parser *p, const char *s, size_t klen)
{
	char q[QUOTE_LEN];
	int k;

	if (!klen)
		return fail_here(p, "missing key before '='");
	if (!p->cur)
		return fail_here(p,
				 "key '%s' outside a section (put it under "
				 "[%s] or a [region])",
				 quote(s, klen, q), DEFAULTS_NAME);
	k = find_key(s, klen);
	if (k < 0)
		return fail_here(p, "unknown key '%s' (valid: %s)",
				 quote(s, klen, q), VALID_KEYS);
	if (p->seen[k])
		return fail_here(p, "duplicate key '%s' (first set on line %u)",
				 settings[k].key, p->seen[k]);
	p->seen[k] = p->line;
	return k;
}

/*
 * inih's handler: one setting, split at its '=' and trimmed by inih.
 * Checks the key and parses the value into the current section. Returns
 * nonzero on success, as inih wants; after an error the reader hands inih
 * no further line.
 */
static int on_setting(void *user, const char *section, const char *name,
		      const char *value, int lineno)
{
	struct parser *p = user;
	int k;

	(void)section; /* cut at 49 bytes by inih; the reader tracks sections */
	if (p->rc)
		return 0;
	if (lineno < 0 || (unsigned)lineno != p->line) {
		fail_here(p, "internal error: inih reports line %d", lineno);
		return 0;
	}
	k = check_key(p, name, strlen(name));
	if (k < 0)
		return 0;
	return settings[k].set(p, p->cur, value) == 0;
}

/* ---- the reader: what inih gets wrong -------------------------------- */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/*
 * Cuts an inline comment (';' or '#' after a blank) and trailing blanks
 * from s[0..n). Returns the new length.
 */
static size_t strip_comment(const char *s, size_t n)
{
	size_t i;

	for (i = 1; i < n; i++) {
		if ((s[i] == ';' || s[i] == '#') && is_blank(s[i - 1])) {
			n = i;
			break;
		}
	}
	while (n && is_blank(s[n - 1]))
		n--;
	return n;
}

/* Checks that s[0..n) holds no control character but tab. */
static int check_controls(struct parser *p, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = s[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return fail_here(p,
					 "control character 0x%02x in line "
					 "(column %zu)",
					 c, i + 1);
	}
	return 0;
}

/* "[name]" (inline comment already cut): closes a section, opens one. */
static int read_header(struct parser *p, const char *s, size_t n)
{
	const char *rb = memchr(s, ']', n);

	if (!rb)
		return fail_here(p, "missing ']' in section header");
	if (rb != s + n - 1)
		return fail_here(p, "unexpected text after ']'");
	return open_section(p, s + 1, rb - s - 1);
}

/*
 * A setting s[0..n) that inih cannot be handed: splits it at eq, its first
 * '=', and trims the blanks around it, as inih does, then calls the
 * handler directly with the reader's line number.
 */
static int call_handler(struct parser *p, const char *s, size_t n,
			const char *eq)
{
	char buf[CONFIG_MAX_LINE + 1];
	size_t klen = eq - s, v = klen + 1;

	memcpy(buf, s, n);
	buf[n] = '\0';
	while (klen && is_blank(buf[klen - 1]))
		klen--;
	buf[klen] = '\0';
	while (is_blank(buf[v]))
		v++;
	on_setting(p, NULL, buf, buf + v, (int)p->line);
	return p->rc;
}

/*
 * A setting (inline comment and trailing blanks already cut). It goes to
 * inih through out (outlen bytes), unless inih would read it otherwise
 * than as "key = value" split at the first '=': it does not fit inih's
 * buffer, a ':' before the '=' would be inih's "key: value", or on line 1
 * inih would skip a second byte order mark. Those go to the handler
 * directly, and inih gets an empty line.
 */
static int read_setting(struct parser *p, const char *s, size_t n, char *out,
			int outlen)
{
	const char *eq = memchr(s, '=', n);
	const char *colon = memchr(s, ':', n);

	if (!eq && colon)
		return fail_here(p, "expected '=' between key and value ("
				    "':' is not accepted)");
	if (!eq)
		return fail_here(p, "expected 'key = value', '[region]' or a "
				    "comment");
	if (n + 2 > (size_t)outlen || (colon && colon < eq) ||
	    (p->line == 1 && n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0))
		return call_handler(p, s, n, eq);
	memcpy(out, s, n);
	memcpy(out + n, "\n", 2);
	return 0;
}

/*
 * Checks one physical line s[0..n) (no line terminator) and fills out
 * with the line inih gets: "\n" for all but a setting it can read.
 */
static int read_one(struct parser *p, const char *s, size_t n, char *out,
		    int outlen)
{
	size_t i;
	int rc;

	strcpy(out, "\n");
	if (n > CONFIG_MAX_LINE)
		return fail_here(p, "line too long (%zu bytes, max %d)", n,
				 CONFIG_MAX_LINE);
	if (memchr(s, '\0', n))
		return fail_here(p, "line contains a NUL byte");
	for (i = 0; i < n && is_blank(s[i]); i++)
		;
	if (i == n || s[i] == ';' || s[i] == '#')
		return 0;
	if (i > 0)
		return fail_here(p, "indented line (continuation lines are not "
				    "supported)");
	n = strip_comment(s, n);
	rc = check_controls(p, s, n);
	if (rc < 0)
		return rc;
	if (s[0] == '[')
		return read_header(p, s, n);
	return read_setting(p, s, n, out, outlen);
}

/*
 * inih's reader: one call per physical line, so inih's line numbers are
 * ours. Returns NULL at the end of the text and after the first error,
 * which stops inih.
 */
static char *read_line(char *str, int num, void *stream)
{
	struct parser *p = stream;
	const char *s = p->text + p->pos;
	const char *eol;
	size_t n;

	if (p->rc || p->pos >= p->len)
		return NULL;
	if (num < 2) {
		fail(p, p->line, "internal error: inih buffer of %d bytes",
		     num);
		return NULL;
	}
	eol = memchr(s, '\n', p->len - p->pos);
	n = eol ? (size_t)(eol - s) : p->len - p->pos;
	p->pos += n + (eol != NULL);
	p->line++;
	if (p->line == 1 && n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) {
		s += 3; /* a UTF-8 byte order mark */
		n -= 3;
	}
	if (n && s[n - 1] == '\r')
		n--; /* CRLF */
	if (read_one(p, s, n, str, num) < 0)
		return NULL;
	return str;
}

/* ---- entry points ---------------------------------------------------- */

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->regions);
	free(c);
}

/* Runs inih over text[0..len) and the end-of-file checks. */
static int parse_all(struct parser *p)
{
	int rc;

	rc = ini_parse_stream(read_line, p, on_setting, p);
	if (p->rc)
		return p->rc;
	if (rc > 0)
		return fail(p, (unsigned)rc, "syntax error");
	if (rc < 0) {
		fail(p, 0, "out of memory");
		return p->rc = -ENOMEM;
	}
	rc = close_section(p);
	if (rc < 0)
		return rc;
	if (!p->cfg->nregions)
		return fail(p, 0,
			    "no regions defined (add a [region] section)");
	return 0;
}

static int parse_buffer(const char *text, size_t len, const char *name,
			struct config **out, char *err, size_t errlen)
{
	struct parser p = {
		.name = name,
		.text = text,
		.len = len,
		.err = err,
		.errlen = errlen,
	};
	int rc;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	config_default_region(&p.defaults);
	p.cfg = calloc(1, sizeof(*p.cfg));
	if (!p.cfg) {
		fail(&p, 0, "out of memory");
		return -ENOMEM;
	}
	rc = parse_all(&p);
	if (rc < 0) {
		config_free(p.cfg);
		return rc;
	}
	*out = p.cfg;
	return 0;
}

int config_parse_string(const char *text, const char *name, struct config **out,
			char *err, size_t errlen)
{
	return parse_buffer(text, strlen(text), name, out, err, errlen);
}

/* Reads the whole file at fd into a new buffer. -EFBIG above the limit. */
static int read_all(int fd, char **out, size_t *outlen)
{
	size_t len = 0, cap = 0;
	char *buf = NULL, *nb;
	ssize_t n;

	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 16384;
			if (cap > MAX_FILE_SIZE + 1)
				cap = MAX_FILE_SIZE + 1;
			if (len == cap) {
				free(buf);
				return -EFBIG;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return -errno;
		}
		if (n == 0)
			break;
		len += n;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

/*
 * Reads path whole; on error writes "path: ..." into err. Only a regular
 * file (after symlinks) is read: a FIFO, socket or device would block the
 * reader or never end, so it is refused. O_NONBLOCK makes the open of a
 * FIFO return at once, so that fstat() can tell; on a regular file it
 * changes nothing.
 */
static int read_file(const char *path, char **text, size_t *len, char *err,
		     size_t errlen)
{
	struct stat sb;
	char ebuf[128];
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
		close(fd);
		goto fail;
	}
	if (S_ISDIR(sb.st_mode)) {
		close(fd);
		rc = -EISDIR;
		goto fail;
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		snprintf(err, errlen, "%s: not a regular file", path);
		return -EINVAL;
	}
	rc = read_all(fd, text, len);
	close(fd);
	if (rc == -EFBIG) {
		snprintf(err, errlen, "%s: file too large (max %llu bytes)",
			 path, MAX_FILE_SIZE);
		return -EINVAL;
	}
	if (rc == 0)
		return 0;
fail:
	snprintf(err, errlen, "%s: cannot read: %s", path,
		 strerror_r(-rc, ebuf, sizeof(ebuf)));
	return rc;
}

int config_load(const char *path, struct config **out, char *err, size_t errlen)
{
	char dummy[1];
	char *text = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	rc = read_file(path, &text, &len, err, errlen);
	if (rc < 0)
		return rc;
	rc = parse_buffer(text, len, path, out, err, errlen);
	free(text);
	return rc;
}

const struct config_region *config_find(const struct config *c,
					const char *name)
{
	size_t i;

	for (i = 0; c && i < c->nregions; i++) {
		if (strcmp(c->regions[i].name, name) == 0)
			return &c->regions[i];
	}
	return NULL;
}

/* ---- rendering ------------------------------------------------------- */

/*
 * Sizes and counts are plain integers (bytes), durations integer
 * milliseconds with the "ms" suffix: exact, easy for scripts, and each
 * line is a valid regions.ini value.
 */
size_t config_format_region(const struct config_region *cr, char *buf,
			    size_t len)
{
	const struct region_limits *l = &cr->lim;
	char owner[24] = "", group[24] = "";
	int n;

	/* owner and group only when set: unset is "the daemon's" */
	if (cr->owner != CONFIG_ID_UNSET)
		snprintf(owner, sizeof(owner), "owner %" PRIu32 "\n",
			 cr->owner);
	if (cr->group != CONFIG_ID_UNSET)
		snprintf(group, sizeof(group), "group %" PRIu32 "\n",
			 cr->group);
	n = snprintf(buf, len,
		     "name %s\n"
		     "max_entries %" PRIu64 "\n"
		     "max_bytes %" PRIu64 "\n"
		     "max_value_size %" PRIu64 "\n"
		     "ttl %" PRIu64 "ms\n"
		     "tti %" PRIu64 "ms\n"
		     "stripes %u\n"
		     "strategy %s\n"
		     "durable %s\n"
		     "write_through %s\n"
		     "read_only %s\n"
		     "%s%s"
		     "mode %04o\n"
		     "dir_mode %04o\n"
		     "coherence %s\n",
		     cr->name, l->max_entries, l->max_bytes, l->max_value_size,
		     l->ttl_ms, l->tti_ms, l->nstripes,
		     config_strategy_name(l->strategy),
		     cr->durable ? "true" : "false",
		     cr->write_through ? "true" : "false",
		     cr->read_only ? "true" : "false", owner, group,
		     (unsigned)cr->mode, (unsigned)cr->dir_mode,
		     config_coherence_name(cr->coherence));
	return n < 0 ? 0 : (size_t)n;
}
