/*
 * daemon.c - the daemon's shared state: regions, counters, background work.
 *
 * The region table. Requests find a region by name on every LOOKUP, OPEN
 * and commit, so that lookup must not serialize readers. The table is an
 * immutable snapshot (struct rfs_table: the regions in file order plus a
 * sorted index for bsearch) that a reload builds aside and swaps in whole.
 * The classic problem with a swapped pointer is the window between loading
 * it and taking a reference, in which the old table could be freed. It is
 * closed here with a sharded reader lock: TABLE_SHARDS rwlocks, each on its
 * own cache line; a reader takes only the shard of its thread (threads get
 * distinct shards until there are more than TABLE_SHARDS of them), loads
 * the pointer, takes a reference on the one region it wants and unlocks;
 * the swap takes every shard exclusively. So a reader touches no cache
 * line that other readers write except the region's own reference count,
 * and the reload, which is rare, pays for the exclusion. An RCU grace
 * period would save the shard lock but needs quiescent states that
 * libfuse's worker threads do not report.
 *
 * A request that started with a region keeps it (struct rfs_region, which
 * holds an engine reference) until it ends, even if a reload removes or
 * recreates the region meanwhile. Writes invalidate (E1/E2) in whatever
 * region currently has the name, so a reload between E1 and E2 cannot
 * strand a stale value: a recreated region starts empty, and any flight in
 * it is poisoned by E2.
 *
 * Reloads (SIGHUP, or regions.ini saved) run on the background thread:
 * parse (config_load); on error keep everything and record the message for
 * .regionfs/config; on success build the new table - new regions are
 * created, a region whose stripes or strategy changed is recreated (its
 * cache starts cold), others get region_set_limits() and keep their cache -
 * swap it in, bump the generation, and tell the kernel to drop the root
 * dentries of regions that came or went (fuse_lowlevel_notify_inval_entry,
 * never from a request handler: the kernel may wait on the directory lock
 * a request holds). Files opened before a reload keep the settings they
 * were opened with (max_value_size, durable).
 *
 * Counters: struct rfs_counters (virtual.h) lives in COUNTER_SLOTS
 * per-thread slots, each on its own cache lines, added with relaxed atomics
 * and summed when a stats file is opened. One shared atomic for READ
 * counts was the top hot spot in seed 003's measurements.
 *
 * The background thread wakes every 100 ms: region_sweep() with a bounded
 * budget on every region (expired entries and the excess left by a
 * shrink; the sweep resumes where it stopped), store_changes_prune() every
 * minute (feed rows older than FEED_MAX_AGE_MS; the only place that
 * prunes), and a pending reload. It also ends the session on
 * SIGTERM/SIGINT (see handle_exit()). The change feed itself is read by
 * its own thread (feed.c), so its delay bound does not depend on this
 * work; rfs_bg_start()/rfs_bg_stop() start and stop both threads. The
 * background thread sleeps in poll() on a self-pipe (stop,
 * SIGHUP) and an inotify watch on regions.ini's directory (IN_CLOSE_WRITE
 * or IN_MOVED_TO of its name; the reload runs RELOAD_DEBOUNCE_MS after the
 * first event of a burst, so that an editor's several writes load once,
 * yet a file saved over and over cannot postpone it forever).
 *
 * Locking:
 *   rfs.cfg_lock   the generation and last-load fields of struct rfs, and
 *                  the table swap (one reload at a time; the view builder
 *                  takes the table and the generation together)
 *   shards[i].l    readers: their own shard; the swap: all, in index order
 *   order: cfg_lock -> shards. No lock is held across a store_*() call.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"

#define TABLE_SHARDS	   16
#define COUNTER_SLOTS	   32
#define TICK_MS		   100
#define SWEEP_BUDGET	   1024
#define PRUNE_EVERY_MS	   60000
#define FEED_MAX_AGE_MS	   600000
#define RELOAD_DEBOUNCE_MS 200

struct rfs rfs = {
	.cfg_lock = PTHREAD_MUTEX_INITIALIZER,
};

struct shard {
	_Alignas(64) pthread_rwlock_t l;
};

struct counter_slot {
	_Alignas(64) atomic_int_fast64_t c[RFS_C_NR];
};

static struct shard shards[TABLE_SHARDS] = {
	[0 ... TABLE_SHARDS - 1] = {.l = PTHREAD_RWLOCK_INITIALIZER},
};
static struct rfs_table *cur_table; /* L: shards (all to write) */
static struct counter_slot counters[COUNTER_SLOTS];

static struct {
	pthread_t thread;
	pthread_t main_thread; /* runs the session loop */
	bool running;
	int pipe[2];	       /* wakes the thread */
	atomic_bool stop;      /* rfs_bg_stop() */
	atomic_bool hup;       /* a SIGHUP is pending */
	atomic_bool exit_req;  /* SIGTERM/SIGINT received */
	atomic_bool loop_done; /* the session loop has returned */
} bg = {.pipe = {-1, -1}};

/* ---- small helpers ------------------------------------------------------- */

unsigned rfs_thread_slot(unsigned n)
{
	static atomic_uint next;
	static __thread unsigned slot; /* 0: not assigned yet */

	if (!slot)
		slot = atomic_fetch_add(&next, 1) + 1;
	return (slot - 1) % n;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- counters ------------------------------------------------------------ */

void rfs_count(enum rfs_ctr c, int64_t n)
{
	struct counter_slot *s = &counters[rfs_thread_slot(COUNTER_SLOTS)];

	atomic_fetch_add_explicit(&s->c[c], n, memory_order_relaxed);
}

static uint64_t sum_counter(enum rfs_ctr c)
{
	int64_t sum = 0;
	unsigned i;

	for (i = 0; i < COUNTER_SLOTS; i++)
		sum += atomic_load_explicit(&counters[i].c[c],
					    memory_order_relaxed);
	return sum > 0 ? (uint64_t)sum : 0;
}

void rfs_counters_sum(struct rfs_counters *out)
{
	memset(out, 0, sizeof(*out));
	out->lookups = sum_counter(RFS_C_LOOKUPS);
	out->opens = sum_counter(RFS_C_OPENS);
	out->reads = sum_counter(RFS_C_READS);
	out->read_bytes = sum_counter(RFS_C_READ_BYTES);
	out->writes = sum_counter(RFS_C_WRITES);
	out->write_bytes = sum_counter(RFS_C_WRITE_BYTES);
	out->commits = sum_counter(RFS_C_COMMITS);
	out->commit_errors = sum_counter(RFS_C_COMMIT_ERRORS);
	out->unlinks = sum_counter(RFS_C_UNLINKS);
	out->renames = sum_counter(RFS_C_RENAMES);
	out->readdirs = sum_counter(RFS_C_READDIRS);
	out->errors = sum_counter(RFS_C_ERRORS);
	out->open_handles = sum_counter(RFS_C_OPEN_HANDLES);
	out->inodes = rfs_inode_count();
	out->config_reloads = atomic_load(&rfs.reloads);
	out->config_failures = atomic_load(&rfs.reload_failures);
	rfs_feed_counters(&out->feed_changes, &out->feed_lag_ms);
	out->feed_poll_age_ms = rfs_feed_poll_age_ms();
	rfs_mem_counters(out);
}

/* ---- regions and tables -------------------------------------------------- */

void rfs_region_put(struct rfs_region *rr)
{
	if (!rr || atomic_fetch_sub(&rr->refs, 1) != 1)
		return;
	region_unref(rr->r);
	free(rr);
}

/* Wraps r (taking over the caller's engine reference). */
static struct rfs_region *wrap_region(struct region *r,
				      const struct config_region *cr)
{
	struct rfs_region *rr = calloc(1, sizeof(*rr));

	if (!rr) {
		region_unref(r);
		return NULL;
	}
	atomic_init(&rr->refs, 1);
	rr->r = r;
	rr->cfg = *cr;
	return rr;
}

void rfs_table_put(struct rfs_table *t)
{
	size_t i;

	if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	for (i = 0; i < t->n; i++)
		rfs_region_put(t->v[i]);
	free(t->v);
	free(t->byname);
	free(t);
}

static int cmp_byname(const void *a, const void *b)
{
	const struct rfs_region *x = *(struct rfs_region *const *)a;
	const struct rfs_region *y = *(struct rfs_region *const *)b;

	return strcmp(x->cfg.name, y->cfg.name);
}

static int cmp_key(const void *key, const void *elem)
{
	const struct rfs_region *y = *(struct rfs_region *const *)elem;

	return strcmp(key, y->cfg.name);
}

static struct rfs_region *table_find(const struct rfs_table *t,
				     const char *name)
{
	struct rfs_region **p;

	if (!t || !t->n)
		return NULL;
	p = bsearch(name, t->byname, t->n, sizeof(*p), cmp_key);
	return p ? *p : NULL;
}

struct rfs_region *rfs_table_find(const struct rfs_table *t, const char *name)
{
	return table_find(t, name);
}

long rfs_table_index(const struct rfs_table *t, const char *name)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->v[i]->cfg.name, name) == 0)
			return (long)i;
	return -1;
}

struct rfs_region *rfs_region_get(const char *name)
{
	struct shard *s = &shards[rfs_thread_slot(TABLE_SHARDS)];
	struct rfs_region *rr;

	pthread_rwlock_rdlock(&s->l);
	rr = table_find(cur_table, name);
	if (rr)
		atomic_fetch_add(&rr->refs, 1);
	pthread_rwlock_unlock(&s->l);
	return rr;
}

bool rfs_region_exists(const char *name)
{
	struct shard *s = &shards[rfs_thread_slot(TABLE_SHARDS)];
	bool found;

	pthread_rwlock_rdlock(&s->l);
	found = table_find(cur_table, name) != NULL;
	pthread_rwlock_unlock(&s->l);
	return found;
}

size_t rfs_region_count(void)
{
	struct shard *s = &shards[rfs_thread_slot(TABLE_SHARDS)];
	size_t n;

	pthread_rwlock_rdlock(&s->l);
	n = cur_table ? cur_table->n : 0;
	pthread_rwlock_unlock(&s->l);
	return n;
}

struct rfs_table *rfs_table_get(void)
{
	struct shard *s = &shards[rfs_thread_slot(TABLE_SHARDS)];
	struct rfs_table *t;

	pthread_rwlock_rdlock(&s->l);
	t = cur_table;
	atomic_fetch_add(&t->refs, 1);
	pthread_rwlock_unlock(&s->l);
	return t;
}

/* Installs t as the current table; returns the old one (its reference). */
static struct rfs_table *table_swap(struct rfs_table *t)
{
	struct rfs_table *old;
	int i;

	for (i = 0; i < TABLE_SHARDS; i++)
		pthread_rwlock_wrlock(&shards[i].l);
	old = cur_table;
	cur_table = t;
	for (i = TABLE_SHARDS - 1; i >= 0; i--)
		pthread_rwlock_unlock(&shards[i].l);
	return old;
}

static struct rfs_table *table_alloc(size_t n)
{
	struct rfs_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	atomic_init(&t->refs, 1);
	t->v = calloc(n ? n : 1, sizeof(*t->v));
	t->byname = calloc(n ? n : 1, sizeof(*t->byname));
	if (!t->v || !t->byname) {
		rfs_table_put(t);
		return NULL;
	}
	return t;
}

/*
 * The engine region for cr: the old one when its limits can be applied
 * live (*applied set, so a failed build can restore them), else a new one.
 */
static int region_for(const struct config_region *cr,
		      const struct rfs_region *old, bool *applied,
		      struct region **out)
{
	*applied = false;
	if (old && old->cfg.lim.nstripes == cr->lim.nstripes &&
	    old->cfg.lim.strategy == cr->lim.strategy &&
	    region_set_limits(old->r, &cr->lim) == 0) {
		*applied = true;
		*out = region_ref(old->r);
		return 0;
	}
	/* new, or stripes/strategy changed: a fresh (cold) cache */
	return region_create(cr->name, &cr->lim, out);
}

/* Restores the limits region_for() applied to the old regions. */
static void undo_limits(const struct config *c, const struct rfs_table *old,
			const bool *applied)
{
	struct rfs_region *o;
	size_t i;

	for (i = 0; i < c->nregions; i++) {
		o = applied[i] ? table_find(old, c->regions[i].name) : NULL;
		if (o)
			region_set_limits(o->r, &o->cfg.lim);
	}
}

/*
 * Builds the table for c, reusing old's regions where possible. On error
 * writes a message into err and leaves old's regions as they were.
 */
static int table_build(const struct config *c, const struct rfs_table *old,
		       struct rfs_table **out, char *err, size_t errlen)
{
	struct rfs_table *t = table_alloc(c->nregions);
	bool *applied = calloc(c->nregions ? c->nregions : 1, sizeof(bool));
	struct region *r;
	size_t i;
	int rc = -ENOMEM;

	*out = NULL;
	if (!t || !applied)
		goto out;
	for (i = 0; i < c->nregions; i++) {
		const struct config_region *cr = &c->regions[i];

		rc = region_for(cr, table_find(old, cr->name), &applied[i], &r);
		if (rc) {
			snprintf(err, errlen, "%s:%u: region %s: %s",
				 rfs.config_path, cr->line, cr->name,
				 strerror(-rc));
			goto out;
		}
		t->v[i] = wrap_region(r, cr);
		rc = -ENOMEM;
		if (!t->v[i])
			goto out;
		t->n = i + 1;
	}
	memcpy(t->byname, t->v, t->n * sizeof(*t->v));
	qsort(t->byname, t->n, sizeof(*t->byname), cmp_byname);
	*out = t;
	t = NULL;
	rc = 0;
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory", rfs.config_path);
	if (rc && applied)
		undo_limits(c, old, applied);
	free(applied);
	rfs_table_put(t);
	return rc;
}

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

int rfs_daemon_init(const struct config *c)
{
	char err[CONFIG_ERR_LEN];
	struct rfs_table *t;
	int rc;

	rc = table_build(c, NULL, &t, err, sizeof(err));
	if (rc) {
		rfs_log(RFS_LOG_ERR, "%s", err);
		return rc;
	}
	table_swap(t);
	rfs.generation = 1;
	rfs.loaded_at = now_s();
	rfs.last_ok = true;
	return 0;
}

void rfs_daemon_fini(void)
{
	rfs_table_put(table_swap(NULL));
}

/* ---- reload -------------------------------------------------------------- */

/* Invalidates the kernel's dentries of regions that came or went. */
static void notify_names(const struct rfs_table *a, const struct rfs_table *b)
{
	size_t i;

	for (i = 0; i < a->n; i++) {
		const char *name = a->v[i]->cfg.name;

		if (table_find(b, name))
			continue;
		fuse_lowlevel_notify_inval_entry(rfs.se, RFS_INO_ROOT, name,
						 strlen(name));
		fuse_lowlevel_notify_inval_entry(rfs.se, RFS_INO_VREGIONS, name,
						 strlen(name));
	}
}

static void record_failure(const char *msg)
{
	pthread_mutex_lock(&rfs.cfg_lock);
	rfs.last_ok = false;
	snprintf(rfs.last_error, sizeof(rfs.last_error), "%s", msg);
	pthread_mutex_unlock(&rfs.cfg_lock);
	atomic_fetch_add(&rfs.reload_failures, 1);
	rfs_log(RFS_LOG_ERR, "reload refused, keeping the running config: %s",
		msg);
}

int rfs_reload(void)
{
	struct rfs_table *t, *old;
	char err[CONFIG_ERR_LEN];
	struct config *c;
	uint64_t gen;
	int rc;

	rc = config_load(rfs.config_path, &c, err, sizeof(err));
	if (rc) {
		record_failure(err);
		return rc;
	}
	pthread_mutex_lock(&rfs.cfg_lock);
	rc = table_build(c, cur_table, &t, err, sizeof(err));
	if (rc) {
		pthread_mutex_unlock(&rfs.cfg_lock);
		config_free(c);
		record_failure(err);
		return rc;
	}
	old = table_swap(t);
	gen = ++rfs.generation;
	rfs.loaded_at = now_s();
	rfs.last_ok = true;
	rfs.last_error[0] = '\0';
	pthread_mutex_unlock(&rfs.cfg_lock);
	atomic_fetch_add(&rfs.reloads, 1);
	if (rfs.se && old) {
		notify_names(old, t);
		notify_names(t, old);
	}
	rfs_log(RFS_LOG_NOTICE, "reloaded %s: generation %llu, %zu regions",
		rfs.config_path, (unsigned long long)gen, c->nregions);
	rfs_table_put(old);
	config_free(c);
	return 0;
}

/* ---- views for the virtual files ----------------------------------------- */

int rfs_view_build(struct rfs_view_hold *h)
{
	struct rfs_view *v = &h->view;
	size_t i;

	memset(h, 0, sizeof(*h));
	pthread_mutex_lock(&rfs.cfg_lock);
	h->t = rfs_table_get();
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
	rfs_table_put(h->t);
	h->t = NULL;
}

/* ---- systemd ------------------------------------------------------------- */

void rfs_sd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len;
	int fd;

	if (!path || (path[0] != '/' && path[0] != '@'))
		return;
	len = strlen(path);
	if (len >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		   (struct sockaddr *)&sa,
		   offsetof(struct sockaddr_un, sun_path) + len) < 0)
		rfs_log(RFS_LOG_WARNING, "sd_notify %s: %s", state,
			strerror(errno));
	close(fd);
}

/* ---- the background thread ----------------------------------------------- */

static void wake_bg(void)
{
	char c = 'w';

	if (bg.pipe[1] >= 0 && write(bg.pipe[1], &c, 1) < 0) {
		/* the pipe is full: a wakeup is pending anyway */
	}
}

void rfs_reload_request(void)
{
	int saved = errno;

	atomic_store(&bg.hup, true);
	wake_bg();
	errno = saved;
}

void rfs_exit_request(void)
{
	int saved = errno;

	if (!atomic_exchange(&bg.exit_req, true))
		wake_bg();
	errno = saved;
}

void rfs_loop_done(void)
{
	atomic_store(&bg.loop_done, true);
}

/*
 * Ends the session on SIGTERM/SIGINT. Done here, between two pieces of
 * work, and not in the signal handler, because a notify_inval_entry() of
 * this thread can wait for the root directory's lock, which a queued
 * LOOKUP holds until it is answered: if the loop stopped first, the notify
 * would wait forever. Once exiting, this thread sends no notification.
 * The main thread is kicked with SIGTERM every tick until its loop has
 * returned, since the loop checks the exit flag only when its blocking
 * call is interrupted and a single signal can land just before that call.
 */
static void handle_exit(bool *exiting, uint64_t *deadline)
{
	unsigned writers;

	if (!*exiting) {
		writers = rfs_handles_writers();
		if (!*deadline) {
			atomic_store(&rfs.draining, true);
			*deadline = mono_ms() + (uint64_t)rfs.grace_s * 1000;
			if (writers && rfs.grace_s)
				rfs_log(RFS_LOG_NOTICE,
					"terminating: new opens refused; "
					"waiting up to %u s for %u file%s "
					"open for writing to be closed",
					rfs.grace_s, writers,
					writers == 1 ? "" : "s");
		}
		if (writers && mono_ms() < *deadline)
			return; /* the next tick looks again */
		*exiting = true;
		rfs_log(RFS_LOG_NOTICE, "terminating: unmounting%s",
			writers ? " (grace period over: uncommitted data of "
				  "files still open is dropped)"
				: "");
		if (rfs.se)
			fuse_session_exit(rfs.se);
	}
	if (!atomic_load(&bg.loop_done))
		pthread_kill(bg.main_thread, SIGTERM);
}

static void sweep_all(void)
{
	struct rfs_table *t = rfs_table_get();
	size_t i;

	for (i = 0; i < t->n; i++)
		region_sweep(t->v[i]->r, SWEEP_BUDGET);
	rfs_table_put(t);
}

/* Watches regions.ini's directory. Returns the inotify fd or -1. */
static int watch_config(void)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(rfs.config_path, '/');
	size_t len = slash ? (size_t)(slash - rfs.config_path) : 0;
	int fd;

	if (!slash || len + 1 >= sizeof(dir))
		return -1;
	memcpy(dir, rfs.config_path, len);
	dir[len ? len : 1] = '\0';
	if (!len)
		dir[0] = '/';
	fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		goto fail;
	if (inotify_add_watch(fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
		close(fd);
		goto fail;
	}
	return fd;
fail:
	rfs_log(RFS_LOG_WARNING,
		"cannot watch %s (%s): reload with SIGHUP only", dir,
		strerror(errno));
	return -1;
}

/* Reads pending events: true if one named regions.ini. */
static bool config_event(int fd)
{
	char buf[4096]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	const char *base = strrchr(rfs.config_path, '/') + 1;
	bool hit = false;
	ssize_t n;
	char *p;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (p = buf; p < buf + n;) {
			const struct inotify_event *ev = (void *)p;

			if (ev->len && strcmp(ev->name, base) == 0)
				hit = true;
			p += sizeof(*ev) + ev->len;
		}
	}
	return hit;
}

static void drain(int fd)
{
	char buf[64];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* One pass of periodic work; returns the poll timeout until the next. */
static int bg_work(uint64_t *next_tick, uint64_t *next_prune,
		   uint64_t *reload_at, bool exiting)
{
	uint64_t now = mono_ms();
	int timeout;

	if (*reload_at && now >= *reload_at && !exiting) {
		*reload_at = 0;
		rfs_reload();
	}
	if (now >= *next_tick) {
		sweep_all();
		*next_tick = now + TICK_MS;
	}
	if (now >= *next_prune) {
		int rc = store_changes_prune(rfs.st, FEED_MAX_AGE_MS);

		if (rc < 0)
			rfs_log(RFS_LOG_WARNING, "pruning the change feed: %s",
				strerror(-rc));
		*next_prune = now + PRUNE_EVERY_MS;
	}
	timeout = (int)(*next_tick - now);
	if (*reload_at && (int)(*reload_at - now) < timeout)
		timeout = (int)(*reload_at - now);
	return timeout > 0 ? timeout : 0;
}

/* Waits for the pipe, regions.ini's directory or the timeout. */
static void bg_wait(struct pollfd *pfd, int timeout, uint64_t *reload_at)
{
	if (poll(pfd, 2, timeout) <= 0)
		return;
	if (pfd[0].revents)
		drain(pfd[0].fd);
	/* the first event of a burst schedules the reload; it reads the
	 * file as it is then, and a later event schedules another */
	if (pfd[1].revents && config_event(pfd[1].fd) && !*reload_at)
		*reload_at = mono_ms() + RELOAD_DEBOUNCE_MS;
}

/*
 * True if regions.ini changed between the start-up load and the moment the
 * watch was set up: such an edit sent no event, so it must be reloaded.
 */
static bool config_changed_since_start(void)
{
	const struct stat *a = &rfs.config_st;
	struct stat b;

	if (stat(rfs.config_path, &b) < 0)
		return false; /* gone: the next save will tell */
	return a->st_ino != b.st_ino || a->st_dev != b.st_dev ||
	       a->st_size != b.st_size ||
	       a->st_mtim.tv_sec != b.st_mtim.tv_sec ||
	       a->st_mtim.tv_nsec != b.st_mtim.tv_nsec;
}

static void *bg_main(void *arg)
{
	uint64_t next_tick = mono_ms(), reload_at = 0;
	uint64_t next_prune = next_tick + PRUNE_EVERY_MS, exit_deadline = 0;
	struct pollfd pfd[2];
	bool exiting = false;
	int ifd = watch_config();
	int timeout = 0;

	(void)arg;
	pfd[0] = (struct pollfd){.fd = bg.pipe[0], .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = ifd, .events = POLLIN};
	if (ifd >= 0 && config_changed_since_start())
		reload_at = mono_ms();
	while (!atomic_load(&bg.stop)) {
		bg_wait(pfd, timeout, &reload_at);
		if (atomic_exchange(&bg.hup, false) && !exiting) {
			rfs_log(RFS_LOG_NOTICE, "SIGHUP: reloading %s",
				rfs.config_path);
			reload_at = mono_ms();
		}
		if (atomic_load(&bg.stop))
			break;
		if (atomic_load(&bg.exit_req))
			handle_exit(&exiting, &exit_deadline);
		timeout = bg_work(&next_tick, &next_prune, &reload_at, exiting);
	}
	if (ifd >= 0)
		close(ifd);
	return NULL;
}

int rfs_bg_start(void)
{
	sigset_t all, old;
	int rc;

	bg.main_thread = pthread_self();
	rfs_feed_listen(rfs_inode_changed); /* outside changes: new inodes */
	rc = rfs_feed_start();
	if (rc)
		return rc;
	if (pipe2(bg.pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		rc = -errno;
		rfs_feed_stop();
		return rc;
	}
	/* the signals stay with the session loop's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&bg.thread, NULL, bg_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		close(bg.pipe[0]);
		close(bg.pipe[1]);
		bg.pipe[0] = bg.pipe[1] = -1;
		rfs_feed_stop();
		return -rc;
	}
	bg.running = true;
	return 0;
}

void rfs_bg_stop(void)
{
	char c = 's';

	rfs_feed_stop();
	if (!bg.running)
		return;
	atomic_store(&bg.stop, true);
	if (write(bg.pipe[1], &c, 1) < 0) {
		/* full pipe: the thread wakes anyway */
	}
	pthread_join(bg.thread, NULL);
	bg.running = false;
	close(bg.pipe[0]);
	close(bg.pipe[1]);
	bg.pipe[0] = bg.pipe[1] = -1;
}
