/*
 * virtual.h - the read-only files under MNT/.regionfs/.
 *
 * The daemon (fs/ops.c) builds a view of its state (a snapshot of the
 * configuration, the regions and the daemon's own counters) and asks this
 * module to render one file into a malloc()ed buffer at open() time, so one
 * read is one consistent snapshot.
 *
 *   .regionfs/stats                   global "name value" lines
 *   .regionfs/metrics.prom            Prometheus text exposition
 *   .regionfs/config                  config path, generation, last reload
 *   .regionfs/regions/<name>/stats    per-region "name value" lines
 *   .regionfs/regions/<name>/config   the region's effective settings
 */
#ifndef RFS_VIRTUAL_H
#define RFS_VIRTUAL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "region.h"
#include "store.h"

/* The daemon's own counters and gauges, summed at snapshot time. */
struct rfs_counters {
	uint64_t lookups;	   /* LOOKUP requests */
	uint64_t opens;		   /* OPEN/CREATE of key files */
	uint64_t reads;		   /* READ requests on key files */
	uint64_t read_bytes;	   /* bytes returned by those */
	uint64_t writes;	   /* WRITE requests on key files */
	uint64_t write_bytes;	   /* bytes accepted by those */
	uint64_t commits;	   /* values committed by close/fsync */
	uint64_t commit_errors;	   /* commits that failed (error returned) */
	uint64_t unlinks;	   /* keys removed */
	uint64_t renames;	   /* keys renamed */
	uint64_t readdirs;	   /* READDIR requests */
	uint64_t errors;	   /* requests answered with an error */
	uint64_t open_handles;	   /* gauge: open key and virtual files */
	uint64_t inodes;	   /* gauge: inodes the kernel holds */
	uint64_t feed_changes;	   /* outside changes applied (change feed) */
	uint64_t feed_lag_ms;	   /* gauge: age of the newest applied change */
	uint64_t feed_poll_age_ms; /* gauge: since the feed's last full pass */
	uint64_t config_reloads;   /* successful reloads */
	uint64_t config_failures;  /* refused reloads */
	uint64_t mem_values_bytes; /* gauge: live values, cached or pinned */
	uint64_t mem_wbuf_bytes;   /* gauge: write buffers of open files */
	uint64_t mem_limit_bytes;  /* -o max_memory; 0: none */
	uint64_t mem_refusals;	   /* loads/writes refused by that limit */
};

struct rfs_region_view {
	const struct config_region *cfg; /* effective settings */
	struct region *region;		 /* the live cache */
};

/* Everything the renderers may show. Borrowed for the call. */
struct rfs_view {
	const char *config_path; /* absolute path of regions.ini */
	const char *db_path;	 /* absolute path of the database */
	uint64_t generation;	 /* config generation, 1 at start */
	int64_t loaded_at;	 /* CLOCK_REALTIME seconds of last load */
	const char *last_result; /* "ok" or "error" */
	const char *last_error;	 /* "FILE:LINE: message" or "" */
	int64_t start_time;	 /* CLOCK_REALTIME seconds at mount */
	const struct rfs_region_view *regions;
	size_t nregions;
	struct rfs_counters counters;
	struct store_stats store;
	struct store *st; /* for per-region key counts; may be NULL */
};

enum rfs_vfile {
	RFS_V_STATS = 0,     /* .regionfs/stats */
	RFS_V_METRICS,	     /* .regionfs/metrics.prom */
	RFS_V_CONFIG,	     /* .regionfs/config */
	RFS_V_REGION_STATS,  /* .regionfs/regions/<name>/stats */
	RFS_V_REGION_CONFIG, /* .regionfs/regions/<name>/config */
};

/*
 * Renders one virtual file. region_index picks the region for the
 * per-region files (ignored otherwise). On success *buf is a malloc()ed
 * buffer of *len bytes that the caller frees. -ENOMEM, -ENOENT (bad index).
 */
int rfs_virtual_render(const struct rfs_view *v, enum rfs_vfile kind,
		       size_t region_index, char **buf, size_t *len);

#endif /* RFS_VIRTUAL_H */
