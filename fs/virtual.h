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

/*
 * Every counter and gauge of the daemon itself, defined once: struct
 * rfs_counters, the per-thread slots of state.c (enum rfs_ctr), their sum
 * (view.c), the global stats lines and metrics.prom families (virtual.c)
 * and the check against doc/stats.md (tests/integration/test_virtual.c)
 * are generated from this list, in its order.
 *
 * X(src, ID, field, type, unit, line, prom, help):
 *   src    RFS_SRC_SLOT: counted with rfs_count(ID, n) into per-thread
 *          slots; RFS_SRC_OTHER: read from its owner by rfs_counters_sum()
 *   ID     the enum rfs_ctr index of a SLOT number, else NONE
 *   field  the field of struct rfs_counters (uint64_t)
 *   type   RFS_COUNTER or RFS_GAUGE
 *   unit   RFS_UNIT_COUNT, RFS_UNIT_MS (milliseconds: metrics.prom
 *          shows seconds with three decimals, after the other families)
 *          or RFS_UNIT_US (microseconds: seconds with six decimals)
 *   line   its line in the global stats file
 *   prom   its metrics.prom family
 *   help   the family's HELP text
 */
#define RFS_COUNTERS(X)                                                        \
	X(RFS_SRC_SLOT, RFS_C_LOOKUPS, lookups, RFS_COUNTER, RFS_UNIT_COUNT,   \
	  "lookups", "regionfs_lookups_total", "LOOKUP requests.")             \
	X(RFS_SRC_SLOT, RFS_C_OPENS, opens, RFS_COUNTER, RFS_UNIT_COUNT,       \
	  "opens", "regionfs_opens_total", "Opens and creates of key files.")  \
	X(RFS_SRC_SLOT, RFS_C_READS, reads, RFS_COUNTER, RFS_UNIT_COUNT,       \
	  "reads", "regionfs_reads_total", "READ requests on key files.")      \
	X(RFS_SRC_SLOT, RFS_C_READ_BYTES, read_bytes, RFS_COUNTER,             \
	  RFS_UNIT_COUNT, "read_bytes", "regionfs_read_bytes_total",           \
	  "Bytes returned by READ requests on key files.")                     \
	X(RFS_SRC_SLOT, RFS_C_FILLS, kernel_fills, RFS_COUNTER,                \
	  RFS_UNIT_COUNT, "kernel_fills", "regionfs_kernel_fills_total",       \
	  "Values an open stored into the kernel's page cache, so that "       \
	  "reading them sent no READ.")                                        \
	X(RFS_SRC_SLOT, RFS_C_FILL_BYTES, kernel_fill_bytes, RFS_COUNTER,      \
	  RFS_UNIT_COUNT, "kernel_fill_bytes",                                 \
	  "regionfs_kernel_fill_bytes_total", "Bytes of those values.")        \
	X(RFS_SRC_SLOT, RFS_C_FILL_FAILURES, kernel_fill_failures,             \
	  RFS_COUNTER, RFS_UNIT_COUNT, "kernel_fill_failures",                 \
	  "regionfs_kernel_fill_failures_total",                               \
	  "Stores into the kernel's page cache that failed: READ requests "    \
	  "served those reads.")                                               \
	X(RFS_SRC_SLOT, RFS_C_OPEN_RESYNCS, open_resyncs, RFS_COUNTER,         \
	  RFS_UNIT_COUNT, "open_resyncs", "regionfs_open_resyncs_total",       \
	  "Opens of a superseded inode whose reply waited for the name's "     \
	  "entry to be dropped.")                                              \
	X(RFS_SRC_SLOT, RFS_C_RELEASE_LINGERS, release_lingers, RFS_COUNTER,   \
	  RFS_UNIT_COUNT, "release_lingers", "regionfs_release_lingers_total", \
	  "RELEASE replies of write handles that waited for the next open "    \
	  "of their inode.")                                                   \
	X(RFS_SRC_SLOT, RFS_C_WRITES, writes, RFS_COUNTER, RFS_UNIT_COUNT,     \
	  "writes", "regionfs_writes_total", "WRITE requests on key files.")   \
	X(RFS_SRC_SLOT, RFS_C_WRITE_BYTES, write_bytes, RFS_COUNTER,           \
	  RFS_UNIT_COUNT, "write_bytes", "regionfs_write_bytes_total",         \
	  "Bytes accepted by WRITE requests on key files.")                    \
	X(RFS_SRC_SLOT, RFS_C_COMMITS, commits, RFS_COUNTER, RFS_UNIT_COUNT,   \
	  "commits", "regionfs_commits_total",                                 \
	  "Values committed by close or fsync.")                               \
	X(RFS_SRC_SLOT, RFS_C_COMMIT_ERRORS, commit_errors, RFS_COUNTER,       \
	  RFS_UNIT_COUNT, "commit_errors", "regionfs_commit_errors_total",     \
	  "Commits that failed (the error was returned to the caller).")       \
	X(RFS_SRC_SLOT, RFS_C_UNLINKS, unlinks, RFS_COUNTER, RFS_UNIT_COUNT,   \
	  "unlinks", "regionfs_unlinks_total", "Keys removed.")                \
	X(RFS_SRC_SLOT, RFS_C_RENAMES, renames, RFS_COUNTER, RFS_UNIT_COUNT,   \
	  "renames", "regionfs_renames_total", "Keys renamed.")                \
	X(RFS_SRC_SLOT, RFS_C_CREATE_NOTED, create_checks_skipped,             \
	  RFS_COUNTER, RFS_UNIT_COUNT, "create_checks_skipped",                \
	  "regionfs_create_checks_skipped_total",                              \
	  "Creates that did not ask the store whether the key exists: the "    \
	  "caller's LOOKUP had just found it missing.")                        \
	X(RFS_SRC_SLOT, RFS_C_READDIRS, readdirs, RFS_COUNTER, RFS_UNIT_COUNT, \
	  "readdirs", "regionfs_readdirs_total", "READDIR requests.")          \
	X(RFS_SRC_SLOT, RFS_C_ERRORS, errors, RFS_COUNTER, RFS_UNIT_COUNT,     \
	  "errors", "regionfs_errors_total",                                   \
	  "Requests answered with an error.")                                  \
	X(RFS_SRC_SLOT, RFS_C_OPEN_HANDLES, open_handles, RFS_GAUGE,           \
	  RFS_UNIT_COUNT, "open_handles", "regionfs_open_handles",             \
	  "Open key and virtual files.")                                       \
	X(RFS_SRC_OTHER, NONE, inodes, RFS_GAUGE, RFS_UNIT_COUNT, "inodes",    \
	  "regionfs_inodes", "Inodes the kernel holds.")                       \
	X(RFS_SRC_OTHER, NONE, feed_changes, RFS_COUNTER, RFS_UNIT_COUNT,      \
	  "feed_changes", "regionfs_feed_changes_total",                       \
	  "Outside changes applied from the change feed.")                     \
	X(RFS_SRC_OTHER, NONE, feed_lag_ms, RFS_GAUGE, RFS_UNIT_MS,            \
	  "feed_lag_ms", "regionfs_feed_lag_seconds",                          \
	  "Age of the newest change applied from the change feed.")            \
	X(RFS_SRC_OTHER, NONE, feed_poll_age_ms, RFS_GAUGE, RFS_UNIT_MS,       \
	  "feed_poll_age_ms", "regionfs_feed_poll_age_seconds",                \
	  "Time since the change feed last finished a complete poll.")         \
	X(RFS_SRC_OTHER, NONE, config_reloads, RFS_COUNTER, RFS_UNIT_COUNT,    \
	  "config_reloads", "regionfs_config_reloads_total",                   \
	  "Configuration reloads applied.")                                    \
	X(RFS_SRC_OTHER, NONE, config_failures, RFS_COUNTER, RFS_UNIT_COUNT,   \
	  "config_failures", "regionfs_config_reload_failures_total",          \
	  "Configuration reloads refused (the old configuration kept "         \
	  "running).")                                                         \
	X(RFS_SRC_OTHER, NONE, config_cache_rebuilds, RFS_COUNTER,             \
	  RFS_UNIT_COUNT, "config_cache_rebuilds",                             \
	  "regionfs_config_cache_rebuilds_total",                              \
	  "Region caches a reload recreated (logged with the reason).")        \
	X(RFS_SRC_OTHER, NONE, config_cache_carried, RFS_COUNTER,              \
	  RFS_UNIT_COUNT, "config_cache_carried",                              \
	  "regionfs_config_cache_carried_total",                               \
	  "Cached entries carried over into caches a reload recreated.")       \
	X(RFS_SRC_OTHER, NONE, malloc_trims, RFS_COUNTER, RFS_UNIT_COUNT,      \
	  "malloc_trims", "regionfs_malloc_trims_total",                       \
	  "Calls of malloc_trim(0) (once a minute).")                          \
	X(RFS_SRC_OTHER, NONE, malloc_trim_last_us, RFS_GAUGE, RFS_UNIT_US,    \
	  "malloc_trim_last_us", "regionfs_malloc_trim_last_seconds",          \
	  "Time the last malloc_trim(0) took.")                                \
	X(RFS_SRC_OTHER, NONE, malloc_trim_max_us, RFS_GAUGE, RFS_UNIT_US,     \
	  "malloc_trim_max_us", "regionfs_malloc_trim_max_seconds",            \
	  "Longest time a malloc_trim(0) took since the mount.")               \
	X(RFS_SRC_OTHER, NONE, malloc_trim_us, RFS_COUNTER, RFS_UNIT_US,       \
	  "malloc_trim_us", "regionfs_malloc_trim_seconds_total",              \
	  "Time spent in malloc_trim(0) since the mount.")                     \
	X(RFS_SRC_OTHER, NONE, mem_values_bytes, RFS_GAUGE, RFS_UNIT_COUNT,    \
	  "memory_values_bytes", "regionfs_memory_values_bytes",               \
	  "Bytes of all values in memory: cached, or pinned by open files.")   \
	X(RFS_SRC_OTHER, NONE, mem_pinned_bytes, RFS_GAUGE, RFS_UNIT_COUNT,    \
	  "memory_pinned_bytes", "regionfs_memory_pinned_bytes",               \
	  "Bytes of the values files open for reading hold, each value once "  \
	  "(cached or not).")                                                  \
	X(RFS_SRC_OTHER, NONE, mem_pinned_values, RFS_GAUGE, RFS_UNIT_COUNT,   \
	  "memory_pinned_values", "regionfs_memory_pinned_values",             \
	  "Distinct values files open for reading hold.")                      \
	X(RFS_SRC_OTHER, NONE, mem_wbuf_bytes, RFS_GAUGE, RFS_UNIT_COUNT,      \
	  "memory_write_buffer_bytes", "regionfs_memory_write_buffer_bytes",   \
	  "Bytes of the write buffers of files open for writing.")             \
	X(RFS_SRC_OTHER, NONE, mem_limit_bytes, RFS_GAUGE, RFS_UNIT_COUNT,     \
	  "memory_limit_bytes", "regionfs_memory_limit_bytes",                 \
	  "The global memory limit (-o max_memory); 0: none.")                 \
	X(RFS_SRC_OTHER, NONE, mem_refusals, RFS_COUNTER, RFS_UNIT_COUNT,      \
	  "memory_refusals", "regionfs_memory_refusals_total",                 \
	  "Loads and writes refused with ENOMEM by the global memory limit.")

enum rfs_counter_src {
	RFS_SRC_SLOT,
	RFS_SRC_OTHER,
};

enum rfs_counter_type {
	RFS_COUNTER,
	RFS_GAUGE,
};

enum rfs_counter_unit {
	RFS_UNIT_COUNT,
	RFS_UNIT_MS,
	RFS_UNIT_US,
};

/* The daemon's own counters and gauges, summed at snapshot time. */
struct rfs_counters {
#define RFS_COUNTERS_FIELD(src, id, field, ...) uint64_t field;
	RFS_COUNTERS(RFS_COUNTERS_FIELD)
#undef RFS_COUNTERS_FIELD
};

struct rfs_region_view {
	const struct config_region *cfg; /* effective settings */
	struct region *region;		 /* the live cache */
	/* counters of the caches a reload replaced (added); may be NULL */
	const struct region_stats *carried;
};

/*
 * Adds b's counters (REGION_SRC_SLOT and _DERIVED, and sketch_resets) to
 * a's; the gauges stay a's.
 */
static inline void rfs_region_counters_add(struct region_stats *a,
					   const struct region_stats *b)
{
#define RFS_ADD_COUNTER(src, id, field, ...)                                   \
	if (src == REGION_SRC_SLOT || src == REGION_SRC_DERIVED)               \
		a->field += b->field;
	REGION_STATS(RFS_ADD_COUNTER)
#undef RFS_ADD_COUNTER
	a->sketch_resets += b->sketch_resets;
}

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
