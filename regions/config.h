/*
 * config.h - regions.ini: parsing and strict validation.
 *
 * regions.ini is parsed with inih into plain structs; no inih type crosses
 * this header. Errors are reported as "FILE:LINE: message" in a
 * caller-supplied buffer, so the daemon can print them at start and show
 * them in .regionfs/config after a refused reload.
 *
 * Format (see the default regions.ini for every setting, explained):
 *
 *   [defaults]             ; optional, must come first; every region
 *   max_entries = 100000   ; inherits these, then overrides its own
 *   [options]              ; a region: [A-Za-z0-9_-], 1..64 bytes,
 *   max_bytes = 64M        ; not starting with '.' or '-'
 *
 * Sizes take K/M/G/T suffixes (powers of 1024), durations s/m/h/d (a bare
 * number is seconds, "0" disables). Unknown keys, duplicate keys, bad
 * values, bad or duplicate region names, indented lines, keys outside a
 * section and lines longer than CONFIG_MAX_LINE are errors.
 */
#ifndef RFS_CONFIG_H
#define RFS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "region.h"

#define CONFIG_MAX_LINE	   1024 /* bytes per line, without the newline */
#define CONFIG_MAX_REGIONS 1024
#define CONFIG_ERR_LEN	   512 /* a good size for error buffers */

#define CONFIG_ID_UNSET UINT32_MAX /* owner/group: the daemon's (-o uid=) */

/*
 * coherence = bounded | strict (doc/config.md): what close() of a write
 * waits for, and whether the cache may serve hits without a live lease
 * (store.h: store_wait_applied(), store_hits_ok()).
 */
enum config_coherence {
	CONFIG_COHERENCE_BOUNDED, /* close() returns at commit; other mounts
				   * converge within the feed's bound */
	CONFIG_COHERENCE_STRICT,  /* close() returns once every live mount
				   * applied it; no hits without a lease */
};

struct config_region {
	char name[REGION_MAX_NAME + 1];
	struct region_limits lim;
	bool durable;	    /* commits on close are fsync-durable */
	bool write_through; /* a close() leaves its value in the cache */
	bool read_only;	    /* every change through the mount: EROFS */
	enum config_coherence coherence; /* across mounts of one store */
	uint32_t owner;	   /* uid of its keys and directory, or UNSET */
	uint32_t group;	   /* gid of its keys and directory, or UNSET */
	uint16_t mode;	   /* permission bits of its keys (0644) */
	uint16_t dir_mode; /* permission bits of its directory (0755) */
	unsigned line;	   /* line of the [section] header */
};

struct config {
	struct config_region *regions; /* in file order */
	size_t nregions;
	uint64_t max_memory; /* [defaults] max_memory: values cached or held
			      * open plus write buffers; 0: no bound */
};

/*
 * Parses and validates the file at path. On error returns -EINVAL (bad
 * content), -ENOENT/-EACCES/... (cannot read) or -ENOMEM, writes
 * "path:LINE: message" (or "path: message" when no line applies) into
 * err, and sets *out to NULL.
 */
int config_load(const char *path, struct config **out, char *err,
		size_t errlen);
/* The same for text in memory; name stands for the path in messages. */
int config_parse_string(const char *text, const char *name, struct config **out,
			char *err, size_t errlen);
/* Accepts NULL. */
void config_free(struct config *c);

/* The region called name, or NULL. */
const struct config_region *config_find(const struct config *c,
					const char *name);

/* The built-in defaults (what an empty [defaults] section means). */
void config_default_region(struct config_region *out);

/*
 * Renders one region's effective settings as "name value\n" lines, in the
 * units regions.ini accepts, into buf. Returns the length it needed (like
 * snprintf).
 */
size_t config_format_region(const struct config_region *cr, char *buf,
			    size_t len);

/* Value parsers, exposed for tests: 0 or -EINVAL (or -ERANGE). */
int config_parse_size(const char *s, uint64_t *out);
int config_parse_duration_ms(const char *s, uint64_t *out);
const char *config_strategy_name(enum region_strategy s);
const char *config_coherence_name(enum config_coherence c);

#endif /* RFS_CONFIG_H */
