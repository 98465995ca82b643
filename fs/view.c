/*
 * view.c - the snapshot the .regionfs/ files are rendered from
 * (virtual.c): the region table and the configuration's state taken
 * together under cfg_lock, every counter of the daemon (state.c, the
 * inode table's gauge, the change feed's figures) and the store's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"

void rfs_counters_sum(struct rfs_counters *out)
{
	memset(out, 0, sizeof(*out));
#define SUM_SLOT(src, id, field, ...)	 SUM_SLOT_##src(id, field)
#define SUM_SLOT_RFS_SRC_SLOT(id, field) out->field = rfs_counter(id);
#define SUM_SLOT_RFS_SRC_OTHER(id, field)
	RFS_COUNTERS(SUM_SLOT)
#undef SUM_SLOT
	/* the RFS_SRC_OTHER ones, from their owners */
	out->inodes = rfs_inode_count();
	out->config_reloads = atomic_load(&rfs.reloads);
	out->config_failures = atomic_load(&rfs.reload_failures);
	out->config_cache_rebuilds = atomic_load(&rfs.cache_rebuilds);
	out->config_cache_carried = rfs_carry_count();
	out->malloc_trims = atomic_load(&rfs.trims);
	out->malloc_trim_last_us = atomic_load(&rfs.trim_last_us);
	out->malloc_trim_max_us = atomic_load(&rfs.trim_max_us);
	out->malloc_trim_us = atomic_load(&rfs.trim_total_us);
	rfs_feed_counters(&out->feed_changes, &out->feed_lag_ms);
	out->feed_poll_age_ms = rfs_feed_poll_age_ms();
	rfs_mem_counters(out);
}

int rfs_view_build(struct rfs_view_hold *h)
{
	struct rfs_view *v = &h->view;
	size_t i;

	memset(h, 0, sizeof(*h));
	pthread_mutex_lock(&rfs.cfg_lock);
	h->t = rfs_table_ref();
	v->generation = rfs.generation;
	v->loaded_at = rfs.loaded_at;
	v->last_result = rfs.last_ok ? "ok" : "error";
	memcpy(h->last_error, rfs.last_error, sizeof(h->last_error));
	pthread_mutex_unlock(&rfs.cfg_lock);

	h->rv = calloc(h->t->n ? h->t->n : 1, sizeof(*h->rv));
	if (!h->rv) {
		rfs_view_release(h);
		return -ENOMEM;
	}
	for (i = 0; i < h->t->n; i++) {
		h->rv[i].cfg = &h->t->v[i]->cfg;
		h->rv[i].region = h->t->v[i]->r;
		h->rv[i].carried = &h->t->v[i]->carried;
	}
	v->regions = h->rv;
	v->nregions = h->t->n;
	v->config_path = rfs.config_path;
	v->db_path = rfs.db_path;
	v->last_error = h->last_error;
	v->start_time = rfs.mount_time.tv_sec;
	rfs_counters_sum(&v->counters);
	store_stats(rfs.st, &v->store);
	v->st = rfs.st;
	return 0;
}

void rfs_view_release(struct rfs_view_hold *h)
{
	free(h->rv);
	h->rv = NULL;
	rfs_table_unref(h->t);
	h->t = NULL;
}
