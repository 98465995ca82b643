/*
 * pg_none.c - store__pg_open() of a build without libpq: a PostgreSQL
 * SOURCE is refused with -EPROTONOSUPPORT (meson -Dpostgresql=enabled
 * needs libpq-dev).
 */
#include <errno.h>

#include "store_ops.h"

int store__pg_open(const char *conninfo, const struct store_options *opts,
		   struct store **out)
{
	(void)conninfo;
	(void)opts;
	*out = NULL;
	return -EPROTONOSUPPORT;
}
