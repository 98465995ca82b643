/*
 * dispatch.c - the store interface (store.h) dispatched to its backends.
 *
 * store_open() picks the backend from SOURCE (store_source_backend()):
 * an SQLite database file (sqlite.c and changes.c, the default) or a
 * PostgreSQL database (pg.c). Every other call goes through the ops table
 * the backend put first in its struct (store_ops.h), so fs/ and regions/
 * never know which one runs. What is the same for every backend lives
 * here: the names of the error kinds, the recognition of SOURCE and the
 * form of it that may be shown (no password).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_ops.h"

static const char *const err_kind_names[STORE_ERR_NKINDS] = {
	[STORE_ERR_CORRUPT] = "corrupt",   [STORE_ERR_IO] = "io",
	[STORE_ERR_FULL] = "full",	   [STORE_ERR_BUSY] = "busy",
	[STORE_ERR_READONLY] = "readonly", [STORE_ERR_NOMEM] = "nomem",
	[STORE_ERR_LOST] = "lost",	   [STORE_ERR_OTHER] = "other",
};

const char *store_err_kind_name(enum store_err_kind kind)
{
	return (unsigned)kind < STORE_ERR_NKINDS ? err_kind_names[kind] : "?";
}

/* ---- SOURCE ---------------------------------------------------------------- */

/*
 * The libpq connection keywords a keyword/value SOURCE may start with
 * (libpq's "Parameter Key Words"). A file name that happens to start with
 * one of them and '=' is written ./NAME.
 */
static const char *const pg_keywords[] = {
	"host",
	"hostaddr",
	"port",
	"dbname",
	"user",
	"password",
	"passfile",
	"service",
	"connect_timeout",
	"client_encoding",
	"options",
	"application_name",
	"fallback_application_name",
	"keepalives",
	"keepalives_idle",
	"keepalives_interval",
	"keepalives_count",
	"tcp_user_timeout",
	"sslmode",
	"sslcert",
	"sslkey",
	"sslrootcert",
	"sslcrl",
	"sslpassword",
	"requiressl",
	"gssencmode",
	"krbsrvname",
	"target_session_attrs",
	"load_balance_hosts",
	NULL,
};

static bool has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* Does s start with a libpq keyword followed by '=' (blanks allowed)? */
static bool pg_keyword_string(const char *s)
{
	size_t n = 0, i;

	while (isspace((unsigned char)*s))
		s++;
	while (isalpha((unsigned char)s[n]) || s[n] == '_')
		n++;
	if (!n)
		return false;
	for (i = 0; pg_keywords[i]; i++) {
		if (strlen(pg_keywords[i]) == n &&
		    !strncmp(s, pg_keywords[i], n)) {
			s += n;
			while (isspace((unsigned char)*s))
				s++;
			return *s == '=';
		}
	}
	return false;
}

enum store_backend store_source_backend(const char *source)
{
	if (!source)
		return STORE_BACKEND_SQLITE;
	if (has_prefix(source, "postgresql://") ||
	    has_prefix(source, "postgres://") || pg_keyword_string(source))
		return STORE_BACKEND_POSTGRESQL;
	return STORE_BACKEND_SQLITE;
}

/*
 * URI: drops ":password" of "scheme://user:password@host", and the value
 * of a password= query parameter. Keyword string: the value of
 * password=. What is dropped reads "***".
 */
char *store_source_display(const char *source)
{
	size_t n = strlen(source), o = 0;
	char *out = malloc(4 * n + 16), *p; /* each *** < 4x */
	const char *s = source, *at, *colon, *slash, *v;

	if (!out)
		return NULL;
	if (store_source_backend(source) != STORE_BACKEND_POSTGRESQL) {
		memcpy(out, source, n + 1);
		return out;
	}
	if (has_prefix(s, "postgres")) {
		p = strstr(s, "://");
		slash = strchr(p + 3, '/');
		at = strchr(p + 3, '@');
		colon = strchr(p + 3, ':');
		if (at && (!slash || at < slash) && colon && colon < at) {
			memcpy(out, s, colon - s + 1);
			o = colon - s + 1;
			memcpy(out + o, "***", 3);
			o += 3;
			s = at;
		}
	}
	/* password=VALUE, in a keyword string or a URI's query */
	while (*s) {
		if ((s == source || s[-1] == ' ' || s[-1] == '?' ||
		     s[-1] == '&') &&
		    has_prefix(s, "password")) {
			v = s + 8;
			while (*v == ' ')
				v++;
			if (*v == '=') {
				v++;
				while (*v == ' ')
					v++;
				memcpy(out + o, "password=***", 12);
				o += 12;
				if (*v == '\'') { /* quoted: to the closing ' */
					for (v++; *v && *v != '\''; v++)
						if (*v == '\\' && v[1])
							v++;
					if (*v)
						v++;
				} else {
					while (*v && *v != ' ' && *v != '&')
						v++;
				}
				s = v;
				continue;
			}
		}
		out[o++] = *s++;
	}
	out[o] = '\0';
	return out;
}

/* ---- the calls ------------------------------------------------------------- */

int store_open(const char *source, const struct store_options *opts,
	       struct store **out)
{
	*out = NULL;
	if (!source || !*source)
		return -EINVAL;
	if (store_source_backend(source) == STORE_BACKEND_POSTGRESQL)
		return store__pg_open(source, opts, out);
	return store__sqlite_open(source, opts, out);
}

void store_close(struct store *st)
{
	if (st)
		store__ops(st)->close(st);
}

const char *store_backend_name(struct store *st)
{
	return store__ops(st)->name;
}

int store_load(struct store *st, const char *region, const void *key,
	       size_t klen, void **data, struct store_meta *meta)
{
	return store__ops(st)->load(st, region, key, klen, data, meta);
}

int store_stat(struct store *st, const char *region, const void *key,
	       size_t klen, struct store_meta *meta)
{
	return store__ops(st)->stat(st, region, key, klen, meta);
}

int store_put(struct store *st, const char *region, const void *key,
	      size_t klen, const void *data, size_t len, unsigned flags,
	      struct store_meta *meta)
{
	return store__ops(st)->put(st, region, key, klen, data, len, flags,
				   meta);
}

int store_delete(struct store *st, const char *region, const void *key,
		 size_t klen, unsigned flags)
{
	return store__ops(st)->del(st, region, key, klen, flags);
}

int store_delete_version(struct store *st, const char *region, const void *key,
			 size_t klen, uint64_t version, unsigned flags)
{
	return store__ops(st)->delete_version(st, region, key, klen, version,
					      flags);
}

int store_rename(struct store *st, const char *region, const void *from,
		 size_t flen, const void *to, size_t tlen, unsigned flags)
{
	return store__ops(st)->rename(st, region, from, flen, to, tlen, flags);
}

int store_sync(struct store *st)
{
	return store__ops(st)->sync(st);
}

int store_list(struct store *st, const char *region, const void *after,
	       size_t alen, size_t max, store_list_fn fn, void *ctx)
{
	const struct store_ops *ops = store__ops(st);
	struct store_list_item *items;
	char from[STORE_MAX_KEY];
	size_t count = 0, flen, n, i, want;
	int err = 0;

	if (!region || !fn || (alen && !after) || alen > STORE_MAX_KEY)
		return -EINVAL;
	items = malloc(STORE_LIST_CHUNK * sizeof(*items));
	if (!items)
		return -ENOMEM;
	flen = alen;
	if (alen)
		memcpy(from, after, alen);
	while (count < max) {
		want = max - count < STORE_LIST_CHUNK ? max - count
						      : STORE_LIST_CHUNK;
		err = ops->list_page(st, region, from, flen, want, items, &n);
		if (err)
			break;
		for (i = 0; i < n; i++) {
			count++;
			if (fn(ctx, items[i].key, items[i].klen,
			       &items[i].meta))
				goto out;
		}
		if (n < want)
			break;
		flen = items[n - 1].klen;
		memcpy(from, items[n - 1].key, flen);
	}
out:
	free(items);
	return err ? err : (int)(count > INT_MAX ? INT_MAX : count);
}

int store_region_usage(struct store *st, const char *region, uint64_t *nkeys,
		       uint64_t *bytes)
{
	return store__ops(st)->region_usage(st, region, nkeys, bytes);
}

int store_changes_head(struct store *st, uint64_t *cursor)
{
	return store__ops(st)->changes_head(st, cursor);
}

int store_changes(struct store *st, uint64_t *cursor, store_change_fn fn,
		  void *ctx)
{
	return store__ops(st)->changes(st, cursor, fn, ctx);
}

int store_changes_prune(struct store *st, uint64_t max_age_ms)
{
	return store__ops(st)->changes_prune(st, max_age_ms);
}

int store_changes_fd(struct store *st)
{
	const struct store_ops *ops = store__ops(st);

	return ops->changes_fd ? ops->changes_fd(st) : -ENOTSUP;
}

int store_changes_drain(struct store *st)
{
	const struct store_ops *ops = store__ops(st);

	return ops->changes_drain ? ops->changes_drain(st) : 0;
}

bool store_hits_ok(struct store *st)
{
	const struct store_ops *ops = store__ops(st);

	return ops->hits_ok ? ops->hits_ok(st) : true;
}

int store_wait_applied(struct store *st)
{
	const struct store_ops *ops = store__ops(st);

	return ops->wait_applied ? ops->wait_applied(st) : 0;
}

int store_space(struct store *st, uint64_t *total, uint64_t *avail)
{
	const struct store_ops *ops = store__ops(st);

	return ops->space ? ops->space(st, total, avail) : -ENOTSUP;
}

void store_stats(struct store *st, struct store_stats *out)
{
	store__ops(st)->stats(st, out);
}

bool store_file_lost(struct store *st)
{
	const struct store_ops *ops = store__ops(st);

	return ops->file_lost ? ops->file_lost(st) : false;
}

int store_thread_prepare(struct store *st)
{
	const struct store_ops *ops = store__ops(st);

	return ops->thread_prepare ? ops->thread_prepare(st) : 0;
}

ssize_t store__append(char **buf, size_t *len, size_t *cap, const void *b,
		      size_t n)
{
	size_t need = *len + n + 1, off = *len, ncap;
	char *nb;

	if (need > *cap) {
		ncap = need > 2 * *cap ? need : 2 * *cap;
		nb = realloc(*buf, ncap);
		if (!nb)
			return -1;
		*buf = nb;
		*cap = ncap;
	}
	if (n)
		memcpy(*buf + off, b, n);
	(*buf)[off + n] = '\0';
	*len = need;
	return (ssize_t)off;
}
