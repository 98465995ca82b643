/*
 * virtual.c - renders the read-only files under MNT/.regionfs/.
 *
 * fs/ops.c builds a struct rfs_view (borrowed pointers to the live regions
 * and copies of the daemon's counters) at open() time and calls
 * rfs_virtual_render(); the handle keeps the buffer until release, so every
 * read() of one open file sees one snapshot, whatever happens meanwhile.
 *
 * Rendering works in two steps. First every region is sampled exactly once
 * (region_stats(), region_limits_get() and, when the view has a store,
 * store_region_usage()) into an array of struct rsnap. Then the text is
 * produced from that array only, so the per-region lines, the global sums
 * and the Prometheus families all agree with each other within one file.
 * Sampling a region takes each of its stripe locks in turn (see
 * regions/stats.c); no lock is held while formatting, and none across calls.
 *
 * Output goes to a growing malloc()ed buffer (struct outbuf). An allocation
 * failure is sticky: later appends are no-ops and the render returns
 * -ENOMEM, so the formatting code needs no error checks of its own.
 *
 * Formats (every line is documented in doc/stats.md):
 * - stats files: memcached "STAT"-style "name value\n" lines, integers in
 *   decimal, hit_ratio with four decimals; awk '$1 == "hits" { print $2 }'.
 * - metrics.prom: Prometheus text exposition 0.0.4. A family's samples must
 *   be contiguous, so the per-region families are written family-major
 *   (one HELP/TYPE header, then one sample per region). Names follow the
 *   Prometheus conventions that `promtool check metrics` lints: a
 *   regionfs_ prefix, counters end in _total, base units (_bytes,
 *   _seconds). Keys never appear as labels (unbounded cardinality); region
 *   names do, escaped per the format even though regions.ini only allows
 *   [A-Za-z0-9_-]. Nanosecond totals are printed as exact decimal seconds
 *   (no floating-point rounding).
 * - config: "name value" lines, then one "region NAME" line per region.
 *   Values that could break the line format (a newline in a path or in a
 *   config error message) have their control characters replaced by '?'.
 *
 * Cost: one store_region_usage() (a COUNT/SUM over the region's rows) per
 * region for the files that show stored keys; virtual files are opened by
 * operators and scrapers, not on the data path, so that is accepted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "virtual.h"

#ifndef RFS_VERSION
#define RFS_VERSION "unknown"
#endif

#define OUT_MIN_CAP 4096

/* A growing output buffer; err is sticky (0 or -ENOMEM). */
struct outbuf {
	char *p;    /* NUL-terminated while len < cap */
	size_t len; /* bytes written, without the NUL */
	size_t cap; /* bytes allocated */
	int err;    /* first error, later appends are no-ops */
};

/* One region, sampled once per render. */
struct rsnap {
	struct region_stats s;
	struct region_limits lim;
	uint64_t keys_stored;	     /* rows of the region in the store */
	uint64_t value_bytes_stored; /* their value bytes */
	bool stored;		     /* the two above are valid */
};

/* Makes room for more bytes plus a NUL. 0 or -ENOMEM. */
static int out_reserve(struct outbuf *o, size_t more)
{
	size_t cap;
	char *p;

	if (o->err)
		return o->err;
	if (more >= SIZE_MAX / 4 - o->len) {
		o->err = -ENOMEM;
		return o->err;
	}
	if (o->len + more + 1 <= o->cap)
		return 0;
	cap = o->cap ? o->cap : OUT_MIN_CAP;
	while (cap < o->len + more + 1)
		cap *= 2;
	p = realloc(o->p, cap);
	if (!p) {
		o->err = -ENOMEM;
		return o->err;
	}
	o->p = p;
	o->cap = cap;
	return 0;
}

static void out_mem(struct outbuf *o, const void *data, size_t n)
{
	if (out_reserve(o, n))
		return;
	memcpy(o->p + o->len, data, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static void out_str(struct outbuf *o, const char *s)
{
	out_mem(o, s, strlen(s));
}

static void out_printf(struct outbuf *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void out_printf(struct outbuf *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (out_reserve(o, 128))
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		o->err = -ENOMEM; /* only on a bad format: cannot happen */
		return;
	}
	if ((size_t)n >= o->cap - o->len) {
		if (out_reserve(o, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
	}
	o->len += (size_t)n;
}

/* "name value\n" with an unsigned integer value. */
static void put_u64(struct outbuf *o, const char *name, uint64_t v)
{
	out_printf(o, "%s %" PRIu64 "\n", name, v);
}

/* "name value\n" with a string value; control characters become '?'. */
static void put_str(struct outbuf *o, const char *name, const char *s)
{
	size_t start;

	if (!s)
		s = "";
	out_str(o, name);
	if (*s)
		out_str(o, " ");
	start = o->len;
	out_str(o, s);
	if (o->err)
		return;
	for (size_t i = start; i < o->len; i++) {
		if ((unsigned char)o->p[i] < 0x20 || o->p[i] == 0x7f)
			o->p[i] = '?';
	}
	out_str(o, "\n");
}

/* A nanosecond total as exact decimal seconds ("12.000345678"). */
static void out_seconds(struct outbuf *o, uint64_t ns)
{
	out_printf(o, "%" PRIu64 ".%09" PRIu64, ns / 1000000000u,
		   ns % 1000000000u);
}

static int64_t now_realtime(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts))
		return 0;
	return ts.tv_sec;
}

/* ---- sampling ------------------------------------------------------------ */

static void sample_region(const struct rfs_view *v, size_t i, struct rsnap *out)
{
	const struct rfs_region_view *rv = &v->regions[i];
	const char *name;

	memset(out, 0, sizeof(*out));
	if (rv->region) {
		region_stats(rv->region, &out->s);
		if (rv->carried)
			rfs_region_counters_add(&out->s, rv->carried);
		region_limits_get(rv->region, &out->lim);
		name = region_name(rv->region);
	} else if (rv->cfg) {
		out->lim = rv->cfg->lim;
		name = rv->cfg->name;
	} else {
		return;
	}
	if (v->st && store_region_usage(v->st, name, &out->keys_stored,
					&out->value_bytes_stored) == 0)
		out->stored = true;
}

/* Samples every region. NULL with -ENOMEM in *rc; empty views are fine. */
static struct rsnap *sample_all(const struct rfs_view *v, int *rc)
{
	struct rsnap *snaps;

	*rc = 0;
	snaps = calloc(v->nregions ? v->nregions : 1, sizeof(*snaps));
	if (!snaps) {
		*rc = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < v->nregions; i++)
		sample_region(v, i, &snaps[i]);
	return snaps;
}

/* Adds every counter and gauge of b into a (limits are not summed). */
static void rsnap_add(struct rsnap *a, const struct rsnap *b)
{
	/* two numbers are per-stripe maxima: across regions, the largest */
	uint64_t examined = a->s.max_examined_per_hold;
	uint64_t stripe_max = a->s.stripe_max_entries;

#define ADD_FIELD(src, id, field, ...) a->s.field += b->s.field;
	REGION_STATS(ADD_FIELD)
#undef ADD_FIELD
	a->s.max_examined_per_hold = examined > b->s.max_examined_per_hold
					     ? examined
					     : b->s.max_examined_per_hold;
	a->s.stripe_max_entries = stripe_max > b->s.stripe_max_entries
					  ? stripe_max
					  : b->s.stripe_max_entries;
	if (b->stored) {
		a->keys_stored += b->keys_stored;
		a->value_bytes_stored += b->value_bytes_stored;
		a->stored = true;
	}
}

/* ---- the numbers of fs/, regions/ and store/ -------------------------- */

/* One number of struct region_stats (REGION_STATS in region.h). */
struct region_field {
	size_t off;	   /* offsetof(struct region_stats, field) */
	int src;	   /* enum region_stat_src */
	int unit;	   /* enum region_stat_unit */
	const char *line;  /* stats line */
	const char *prom;  /* metrics.prom family, "" for none */
	const char *label; /* label value in a shared family, or NULL */
	const char *help;  /* HELP of a family of its own */
};

static const struct region_field region_fields[] = {
#define REGION_FIELD(src, id, field, unit, line, prom, label, help)            \
	{offsetof(struct region_stats, field),                                 \
	 src,                                                                  \
	 unit,                                                                 \
	 line,                                                                 \
	 prom,                                                                 \
	 label,                                                                \
	 help},
	REGION_STATS(REGION_FIELD)
#undef REGION_FIELD
};

#define NREGION_FIELDS (sizeof(region_fields) / sizeof(region_fields[0]))

/*
 * The metrics.prom families shared by several region fields (told apart by
 * a label) or showing a nanosecond field in seconds, in the order the file
 * shows them after the families of one plain field each. In the stats
 * files the members of a family with a sum_line are followed by that line,
 * their sum.
 */
static const struct region_family {
	const char *name;     /* family, as in REGION_STATS */
	const char *label;    /* label name, NULL for a family of one field */
	const char *help;     /* NULL: the field's */
	const char *sum_line; /* stats line of the members' sum, or NULL */
} region_families[] = {
	{"regionfs_load_seconds_total", NULL, NULL, NULL},
	{"regionfs_evictions_total", "cause",
	 "Entries evicted, by cause: size limits, ttl or tti expiry.",
	 "evictions"},
	{"regionfs_invalidations_total", "origin",
	 "Keys invalidated by writes, by origin: this mount or outside "
	 "writers.",
	 "invalidations"},
};

/* One number of struct store_stats (STORE_STATS in store.h). */
static const struct store_field {
	size_t off;	  /* offsetof(struct store_stats, field) */
	int type;	  /* enum store_stat_type */
	int unit;	  /* enum store_stat_unit */
	const char *line; /* stats line */
	const char *prom; /* metrics.prom family */
	const char *help;
} store_fields[] = {
#define STORE_FIELD(type, field, unit, line, prom, help)                       \
	{offsetof(struct store_stats, field), type, unit, line, prom, help},
	STORE_STATS(STORE_FIELD)
#undef STORE_FIELD
};

#define NSTORE_FIELDS (sizeof(store_fields) / sizeof(store_fields[0]))

/* One number of struct rfs_counters (RFS_COUNTERS in virtual.h). */
static const struct rfs_field {
	size_t off;	  /* offsetof(struct rfs_counters, field) */
	int type;	  /* enum rfs_counter_type */
	int unit;	  /* enum rfs_counter_unit */
	const char *line; /* stats line */
	const char *prom; /* metrics.prom family */
	const char *help;
} rfs_fields[] = {
#define RFS_FIELD(src, id, field, type, unit, line, prom, help)                \
	{offsetof(struct rfs_counters, field), type, unit, line, prom, help},
	RFS_COUNTERS(RFS_FIELD)
#undef RFS_FIELD
};

#define NRFS_FIELDS (sizeof(rfs_fields) / sizeof(rfs_fields[0]))

/* The uint64_t at byte offset off of base. */
static uint64_t u64_at(const void *base, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}

/* The family f belongs to in region_families, or NULL for its own. */
static const struct region_family *family_of(const struct region_field *f)
{
	size_t n = sizeof(region_families) / sizeof(region_families[0]);

	for (size_t i = 0; i < n; i++) {
		if (strcmp(region_families[i].name, f->prom) == 0)
			return &region_families[i];
	}
	return NULL;
}

/* The sum of the fields of family fam in s. */
static uint64_t family_sum(const struct region_stats *s,
			   const struct region_family *fam)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < NREGION_FIELDS; i++) {
		if (strcmp(region_fields[i].prom, fam->name) == 0)
			sum += u64_at(s, region_fields[i].off);
	}
	return sum;
}

/* ---- stats files --------------------------------------------------------- */

/* The counter and gauge lines shared by the region and global files. */
static void put_region_counters(struct outbuf *o, const struct rsnap *r)
{
	const struct region_stats *s = &r->s;

	for (size_t i = 0; i < NREGION_FIELDS; i++) {
		const struct region_field *f = &region_fields[i];
		const struct region_family *fam = family_of(f);
		uint64_t v = u64_at(s, f->off);

		put_u64(o, f->line, f->unit == REGION_UNIT_NS ? v / 1000u : v);
		if (fam && fam->sum_line &&
		    (i + 1 == NREGION_FIELDS ||
		     strcmp(region_fields[i + 1].prom, f->prom) != 0))
			put_u64(o, fam->sum_line, family_sum(s, fam));
	}
	if (s->gets)
		out_printf(o, "hit_ratio %.4f\n",
			   (double)s->hits / (double)s->gets);
	else
		out_str(o, "hit_ratio 0\n");
	if (r->stored) {
		put_u64(o, "keys_stored", r->keys_stored);
		put_u64(o, "value_bytes_stored", r->value_bytes_stored);
	}
}

static void render_region_stats(struct outbuf *o, const struct rfs_view *v,
				const struct rsnap *r, size_t i)
{
	const struct rfs_region_view *rv = &v->regions[i];

	put_str(o, "region",
		rv->region ? region_name(rv->region) : rv->cfg->name);
	put_region_counters(o, r);
	put_u64(o, "max_entries", r->lim.max_entries);
	put_u64(o, "max_bytes", r->lim.max_bytes);
	/* the eviction policy's tuning state (0 unless strategy tinylfu) */
	out_printf(o, "window_share %.4f\n", r->s.window_share);
	put_u64(o, "sketch_resets", r->s.sketch_resets);
}

static void put_counters(struct outbuf *o, const struct rfs_counters *c)
{
	for (size_t i = 0; i < NRFS_FIELDS; i++)
		put_u64(o, rfs_fields[i].line, u64_at(c, rfs_fields[i].off));
}

static void put_store(struct outbuf *o, const struct store_stats *s)
{
	for (size_t i = 0; i < NSTORE_FIELDS; i++) {
		const struct store_field *f = &store_fields[i];
		uint64_t v = u64_at(s, f->off);

		put_u64(o, f->line, f->unit == STORE_UNIT_NS ? v / 1000u : v);
	}
	for (int k = 0; k < STORE_ERR_NKINDS; k++) {
		char name[48];

		snprintf(name, sizeof(name), "store_errors_%s",
			 store_err_kind_name(k));
		put_u64(o, name, s->errs[k]);
	}
}

static void render_global_stats(struct outbuf *o, const struct rfs_view *v,
				const struct rsnap *snaps)
{
	struct rsnap sum;
	int64_t now = now_realtime();

	memset(&sum, 0, sizeof(sum));
	for (size_t i = 0; i < v->nregions; i++)
		rsnap_add(&sum, &snaps[i]);
	put_str(o, "version", RFS_VERSION);
	put_u64(o, "pid", (uint64_t)getpid());
	put_u64(o, "time", (uint64_t)(now > 0 ? now : 0));
	put_u64(o, "uptime_seconds",
		(uint64_t)(now > v->start_time ? now - v->start_time : 0));
	put_u64(o, "regions", v->nregions);
	put_u64(o, "config_generation", v->generation);
	put_counters(o, &v->counters);
	put_store(o, &v->store);
	put_region_counters(o, &sum);
}

/* ---- metrics.prom -------------------------------------------------------- */

/* Label value escaping per the exposition format: \\, \" and \n. */
static void out_label_value(struct outbuf *o, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			out_str(o, "\\\\");
		else if (*s == '"')
			out_str(o, "\\\"");
		else if (*s == '\n')
			out_str(o, "\\n");
		else
			out_mem(o, s, 1);
	}
}

/* HELP and TYPE lines of one family. help has no '\\' or newline. */
static void prom_family(struct outbuf *o, const char *name, const char *type,
			const char *help)
{
	out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One unlabelled sample with an integer value. */
static void prom_u64(struct outbuf *o, const char *name, const char *type,
		     const char *help, uint64_t v)
{
	prom_family(o, name, type, help);
	out_printf(o, "%s %" PRIu64 "\n", name, v);
}

/* name{region="R"[,lname="lval"]} and a space, ready for the value. */
static void prom_labels(struct outbuf *o, const char *name, const char *region,
			const char *lname, const char *lval)
{
	out_str(o, name);
	out_str(o, "{region=\"");
	out_label_value(o, region);
	out_str(o, "\"");
	if (lname) {
		out_printf(o, ",%s=\"", lname);
		out_label_value(o, lval);
		out_str(o, "\"");
	}
	out_str(o, "} ");
}

/*
 * A per-region family of fs/'s own: a limit or a stored-usage figure, one
 * uint64_t field of struct rsnap.
 */
struct prom_region_metric {
	const char *name;
	const char *type;
	const char *help;
	size_t off;	   /* offsetof(struct rsnap, ...) */
	bool needs_stored; /* only for regions whose usage was read */
};

#define RL(field) offsetof(struct rsnap, lim.field)
#define RU(field) offsetof(struct rsnap, field)

static const struct prom_region_metric prom_region_metrics[] = {
	{"regionfs_cache_max_entries", "gauge",
	 "Limit on cache entries (0 = unlimited).", RL(max_entries), false},
	{"regionfs_cache_max_bytes", "gauge",
	 "Limit on cache key and value bytes (0 = unlimited).", RL(max_bytes),
	 false},
	{"regionfs_max_value_size_bytes", "gauge",
	 "Largest value a key may hold (0 = no limit).", RL(max_value_size),
	 false},
	{"regionfs_stored_keys", "gauge", "Keys of the region in the database.",
	 RU(keys_stored), true},
	{"regionfs_stored_value_bytes", "gauge",
	 "Value bytes of the region in the database.", RU(value_bytes_stored),
	 true},
};

static const char *snap_region_name(const struct rfs_view *v, size_t i)
{
	const struct rfs_region_view *rv = &v->regions[i];

	if (rv->region)
		return region_name(rv->region);
	return rv->cfg ? rv->cfg->name : "";
}

static const char *region_field_type(const struct region_field *f)
{
	if (f->src == REGION_SRC_STRIPE || f->src == REGION_SRC_REGION)
		return "gauge";
	return "counter";
}

/* The families of one plain region field each, in REGION_STATS order. */
static void prom_region_fields(struct outbuf *o, const struct rfs_view *v,
			       const struct rsnap *snaps)
{
	for (size_t m = 0; m < NREGION_FIELDS; m++) {
		const struct region_field *f = &region_fields[m];

		if (!f->prom[0] || family_of(f))
			continue;
		prom_family(o, f->prom, region_field_type(f), f->help);
		for (size_t i = 0; i < v->nregions; i++) {
			prom_labels(o, f->prom, snap_region_name(v, i), NULL,
				    NULL);
			out_printf(o, "%" PRIu64 "\n",
				   u64_at(&snaps[i].s, f->off));
		}
	}
}

static void prom_region_table(struct outbuf *o, const struct rfs_view *v,
			      const struct rsnap *snaps)
{
	size_t n = sizeof(prom_region_metrics) / sizeof(prom_region_metrics[0]);

	for (size_t m = 0; m < n; m++) {
		const struct prom_region_metric *pm = &prom_region_metrics[m];

		prom_family(o, pm->name, pm->type, pm->help);
		for (size_t i = 0; i < v->nregions; i++) {
			if (pm->needs_stored && !snaps[i].stored)
				continue;
			prom_labels(o, pm->name, snap_region_name(v, i), NULL,
				    NULL);
			out_printf(o, "%" PRIu64 "\n",
				   u64_at(&snaps[i], pm->off));
		}
	}
}

/* One family of region_families: every member of every region. */
static void prom_region_family(struct outbuf *o, const struct rfs_view *v,
			       const struct rsnap *snaps,
			       const struct region_family *fam)
{
	const struct region_field *first = NULL;

	for (size_t m = 0; m < NREGION_FIELDS && !first; m++) {
		if (strcmp(region_fields[m].prom, fam->name) == 0)
			first = &region_fields[m];
	}
	if (!first)
		return;
	prom_family(o, fam->name, region_field_type(first),
		    fam->help ? fam->help : first->help);
	for (size_t i = 0; i < v->nregions; i++) {
		for (size_t m = 0; m < NREGION_FIELDS; m++) {
			const struct region_field *f = &region_fields[m];
			uint64_t val = u64_at(&snaps[i].s, f->off);

			if (strcmp(f->prom, fam->name) != 0)
				continue;
			prom_labels(o, fam->name, snap_region_name(v, i),
				    fam->label, f->label);
			if (f->unit == REGION_UNIT_NS)
				out_seconds(o, val);
			else
				out_printf(o, "%" PRIu64, val);
			out_str(o, "\n");
		}
	}
}

static void prom_region_families(struct outbuf *o, const struct rfs_view *v,
				 const struct rsnap *snaps)
{
	size_t n = sizeof(region_families) / sizeof(region_families[0]);

	for (size_t i = 0; i < n; i++)
		prom_region_family(o, v, snaps, &region_families[i]);
}

static void prom_daemon_info(struct outbuf *o, const struct rfs_view *v)
{
	const char *n = "regionfs_build_info";
	bool ok = v->last_result && strcmp(v->last_result, "ok") == 0;

	prom_family(o, n, "gauge", "Always 1; the version as a label.");
	out_str(o, "regionfs_build_info{version=\"");
	out_label_value(o, RFS_VERSION);
	out_str(o, "\"} 1\n");
	prom_u64(o, "regionfs_start_time_seconds", "gauge",
		 "Unix time the file system was mounted.",
		 (uint64_t)(v->start_time > 0 ? v->start_time : 0));
	prom_u64(o, "regionfs_regions", "gauge", "Regions configured.",
		 v->nregions);
	prom_u64(o, "regionfs_config_generation", "gauge",
		 "Configuration generation, 1 at start, +1 per applied reload.",
		 v->generation);
	prom_u64(o, "regionfs_config_loaded_timestamp_seconds", "gauge",
		 "Unix time the running configuration was loaded.",
		 (uint64_t)(v->loaded_at > 0 ? v->loaded_at : 0));
	prom_u64(o, "regionfs_config_last_reload_success", "gauge",
		 "1 if the last configuration load succeeded, else 0.", ok);
}

static void prom_daemon(struct outbuf *o, const struct rfs_view *v)
{
	const struct store_stats *s = &v->store;
	const char *name;

	/* the plain families, then the ones in seconds */
	for (int ms = 0; ms < 2; ms++) {
		for (size_t m = 0; m < NRFS_FIELDS; m++) {
			const struct rfs_field *f = &rfs_fields[m];
			uint64_t val = u64_at(&v->counters, f->off);
			const char *type =
				f->type == RFS_GAUGE ? "gauge" : "counter";

			if ((f->unit != RFS_UNIT_COUNT) != ms)
				continue;
			prom_family(o, f->prom, type, f->help);
			if (f->unit == RFS_UNIT_MS)
				out_printf(o, "%s %" PRIu64 ".%03" PRIu64 "\n",
					   f->prom, val / 1000u, val % 1000u);
			else if (f->unit == RFS_UNIT_US)
				out_printf(o, "%s %" PRIu64 ".%06" PRIu64 "\n",
					   f->prom, val / 1000000u,
					   val % 1000000u);
			else
				out_printf(o, "%s %" PRIu64 "\n", f->prom, val);
		}
	}
	for (size_t m = 0; m < NSTORE_FIELDS; m++) {
		const struct store_field *f = &store_fields[m];
		uint64_t val = u64_at(s, f->off);
		const char *type = f->type == STORE_GAUGE ? "gauge" : "counter";

		prom_family(o, f->prom, type, f->help);
		out_printf(o, "%s ", f->prom);
		if (f->unit == STORE_UNIT_NS)
			out_seconds(o, val);
		else
			out_printf(o, "%" PRIu64, val);
		out_str(o, "\n");
	}
	name = "regionfs_store_failures_total";
	prom_family(o, name, "counter",
		    "Store errors by kind (a missing key is none).");
	for (int k = 0; k < STORE_ERR_NKINDS; k++)
		out_printf(o, "%s{kind=\"%s\"} %" PRIu64 "\n", name,
			   store_err_kind_name(k), s->errs[k]);
}

static void render_metrics(struct outbuf *o, const struct rfs_view *v,
			   const struct rsnap *snaps)
{
	prom_daemon_info(o, v);
	prom_daemon(o, v);
	prom_region_fields(o, v, snaps);
	prom_region_table(o, v, snaps);
	prom_region_families(o, v, snaps);
}

/* ---- config files -------------------------------------------------------- */

static void render_config(struct outbuf *o, const struct rfs_view *v)
{
	put_str(o, "path", v->config_path);
	put_str(o, "database", v->db_path);
	put_u64(o, "generation", v->generation);
	out_printf(o, "loaded_at %" PRId64 "\n", v->loaded_at);
	put_str(o, "last_reload", v->last_result ? v->last_result : "ok");
	put_str(o, "last_error", v->last_error);
	for (size_t i = 0; i < v->nregions; i++)
		put_str(o, "region", snap_region_name(v, i));
}

/* config_format_region() sizes like snprintf: try, then grow and retry. */
static void render_region_config(struct outbuf *o,
				 const struct config_region *cr)
{
	size_t need;

	if (out_reserve(o, 512))
		return;
	need = config_format_region(cr, o->p + o->len, o->cap - o->len);
	if (need >= o->cap - o->len) {
		if (out_reserve(o, need))
			return;
		need = config_format_region(cr, o->p + o->len, o->cap - o->len);
	}
	o->len += need;
}

/* ---- entry point --------------------------------------------------------- */

static bool needs_snapshots(enum rfs_vfile kind)
{
	return kind == RFS_V_STATS || kind == RFS_V_METRICS;
}

/* The region files of index i; -ENOENT if there is no such region. */
static int render_one_region(struct outbuf *o, const struct rfs_view *v,
			     enum rfs_vfile kind, size_t i)
{
	struct rsnap snap;

	if (i >= v->nregions || (!v->regions[i].region && !v->regions[i].cfg))
		return -ENOENT;
	if (kind == RFS_V_REGION_CONFIG) {
		if (!v->regions[i].cfg)
			return -ENOENT;
		render_region_config(o, v->regions[i].cfg);
		return 0;
	}
	sample_region(v, i, &snap);
	render_region_stats(o, v, &snap, i);
	return 0;
}

int rfs_virtual_render(const struct rfs_view *v, enum rfs_vfile kind,
		       size_t region_index, char **buf, size_t *len)
{
	struct outbuf o = {0};
	struct rsnap *snaps = NULL;
	int rc = 0;

	*buf = NULL;
	*len = 0;
	if (needs_snapshots(kind)) {
		snaps = sample_all(v, &rc);
		if (rc)
			goto out;
	}
	switch (kind) {
	case RFS_V_STATS:
		render_global_stats(&o, v, snaps);
		break;
	case RFS_V_METRICS:
		render_metrics(&o, v, snaps);
		break;
	case RFS_V_CONFIG:
		render_config(&o, v);
		break;
	case RFS_V_REGION_STATS:
	case RFS_V_REGION_CONFIG:
		rc = render_one_region(&o, v, kind, region_index);
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (!rc && !o.p)
		out_reserve(&o, 0); /* an empty file is still a buffer */
	if (!rc)
		rc = o.err;
out:
	free(snaps);
	if (rc) {
		free(o.p);
		return rc;
	}
	*buf = o.p;
	*len = o.len;
	return 0;
}
