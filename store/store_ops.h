/*
 * store_ops.h - the seam between store.h and its backends.
 *
 * store.h is the one interface fs/ and regions/ use. dispatch.c (the
 * dispatcher) validates the arguments every backend would check the same
 * way, then calls the backend's function through the ops table of the
 * store: sqlite.c + changes.c (an SQLite file, the default) or pg.c
 * (PostgreSQL, chosen by store_open() when SOURCE is a postgresql:// or
 * postgres:// URI or a libpq keyword/value string).
 *
 * Each backend defines its own struct whose FIRST member is
 * `const struct store_ops *ops` (SQLite's is struct store itself, in
 * store_int.h; PostgreSQL's is struct pg_store in pg.c). A pointer to a
 * structure points to its first member (C11 6.7.2.1p15), so the
 * dispatcher reads the table through store__ops() without knowing which
 * struct it has. Every function has the contract of its store.h
 * counterpart; optional ones may be NULL.
 */
#ifndef RFS_STORE_OPS_H
#define RFS_STORE_OPS_H

#include <sys/types.h>

#include "store.h"

/* One key of a store_list() page, copied out of the backend's result. */
struct store_list_item {
	struct store_meta meta;
	size_t klen;
	char key[STORE_MAX_KEY];
};

#define STORE_LIST_CHUNK 128 /* keys read per query by store_list() */

struct store_ops {
	const char *name; /* "sqlite", "postgresql" */
	void (*close)(struct store *st);
	int (*load)(struct store *st, const char *region, const void *key,
		    size_t klen, void **data, struct store_meta *meta);
	int (*stat)(struct store *st, const char *region, const void *key,
		    size_t klen, struct store_meta *meta);
	int (*put)(struct store *st, const char *region, const void *key,
		   size_t klen, const void *data, size_t len, unsigned flags,
		   struct store_meta *meta);
	int (*del)(struct store *st, const char *region, const void *key,
		   size_t klen, unsigned flags);
	int (*delete_version)(struct store *st, const char *region,
			      const void *key, size_t klen, uint64_t version,
			      unsigned flags);
	int (*rename)(struct store *st, const char *region, const void *from,
		      size_t flen, const void *to, size_t tlen, unsigned flags);
	int (*sync)(struct store *st);
	/*
	 * One page of store_list(): up to want keys after (from, flen)
	 * (flen 0: from the first) into items, in byte order; *n of them.
	 * store_list() (dispatch.c) checks the arguments and pages.
	 */
	int (*list_page)(struct store *st, const char *region, const void *from,
			 size_t flen, size_t want,
			 struct store_list_item *items, size_t *n);
	int (*region_usage)(struct store *st, const char *region,
			    uint64_t *nkeys, uint64_t *bytes);
	int (*changes_head)(struct store *st, uint64_t *cursor);
	int (*changes)(struct store *st, uint64_t *cursor, store_change_fn fn,
		       void *ctx);
	int (*changes_prune)(struct store *st, uint64_t max_age_ms);
	void (*stats)(struct store *st, struct store_stats *out);
	bool (*file_lost)(struct store *st);	/* NULL: never */
	int (*changes_fd)(struct store *st);	/* NULL: -ENOTSUP */
	int (*changes_drain)(struct store *st); /* NULL: 0 */
	bool (*hits_ok)(struct store *st);	/* NULL: true */
	int (*wait_applied)(struct store *st);	/* NULL: 0 */
	int (*space)(struct store *st, uint64_t *total,
		     uint64_t *avail); /* NULL: -ENOTSUP */

	/* store_thread_prepare(); NULL: nothing to prepare */
	int (*thread_prepare)(struct store *st);
};

/*
 * Appends n bytes of b and a NUL to the growing buffer (*buf, *len,
 * *cap); returns the offset they start at, or -1 if out of memory.
 */
ssize_t store__append(char **buf, size_t *len, size_t *cap, const void *b,
		      size_t n);

/* The ops table of st: the first member of every backend's struct. */
static inline const struct store_ops *store__ops(struct store *st)
{
	return *(const struct store_ops *const *)(const void *)st;
}

/* Backends' open functions (store_open() contract, for their SOURCE). */
int store__sqlite_open(const char *path, const struct store_options *opts,
		       struct store **out);
extern const struct store_ops store__sqlite_ops;

int store__pg_open(const char *conninfo, const struct store_options *opts,
		   struct store **out);

#endif /* RFS_STORE_OPS_H */
