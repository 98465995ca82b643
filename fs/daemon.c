/*
 * daemon.c - the roof of the daemon: the background thread, regions.ini
 * reloads, the change feed's start and stop, systemd notification.
 * Nothing in fs/ calls up into it but main.c (fs.h has the floors).
 *
 * Reloads (SIGHUP, or regions.ini saved) run on the background thread:
 * parse (config_load); on error keep everything and record the message for
 * .regionfs/config; on success build the new table (state.c) and swap it
 * in, bump the generation, and tell the kernel to drop the root dentries
 * of regions that came or went (fuse_lowlevel_notify_inval_entry, never
 * from a request handler: the kernel may wait on the directory lock a
 * request holds). Files opened before a reload keep the settings they
 * were opened with (max_value_size, durable).
 *
 * The background thread wakes every 100 ms: region_sweep() with a bounded
 * budget on every region (expired entries and the excess left by a
 * shrink; the sweep resumes where it stopped), a step of carrying the
 * entries of caches a reload recreated into the new ones (carry.c), store_changes_prune() every
 * minute (feed rows older than FEED_MAX_AGE_MS; the only place that
 * prunes; with it malloc_trim()), and a pending reload. It also ends the session on
 * SIGTERM/SIGINT (see handle_exit()). The change feed itself is read by
 * its own thread (feed.c), so its delay bound does not depend on this
 * work; rfs_bg_start()/rfs_bg_stop() start and stop both threads. The
 * background thread sleeps in poll() on a self-pipe (stop,
 * SIGHUP) and an inotify watch on regions.ini's directory (IN_CLOSE_WRITE
 * or IN_MOVED_TO of its name; the reload runs RELOAD_DEBOUNCE_MS after the
 * first event of a burst, so that an editor's several writes load once,
 * yet a file saved over and over cannot postpone it forever).
 *
 * Locking: rfs.cfg_lock (state.c) around a reload's swap; no lock of its
 * own (the thread's state is its own; the flags are atomics).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
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

static uint64_t mono_ms(void)
{
	return rfs_mono_ns() / 1000000;
}

#define TICK_MS		   100
#define SWEEP_BUDGET	   1024
#define PRUNE_EVERY_MS	   60000
#define FEED_MAX_AGE_MS	   600000
#define RELOAD_DEBOUNCE_MS 200

static struct {
	pthread_t thread;
	pthread_t main_thread; /* runs the session loop */
	bool running;
	int pipe[2];	  /* wakes the thread */
	int ifd;	  /* inotify: regions.ini's directories (cfgload.c) */
	atomic_bool stop; /* rfs_bg_stop() */
	atomic_bool hup;  /* a SIGHUP is pending */
	atomic_bool exit_req;  /* SIGTERM/SIGINT received */
	atomic_bool loop_done; /* the session loop has returned */
} bg = {.pipe = {-1, -1}, .ifd = -1};

/* ---- reload -------------------------------------------------------------- */

/* Invalidates the kernel's dentries of regions that came or went. */
static void notify_names(const struct rfs_table *a, const struct rfs_table *b)
{
	size_t i;

	for (i = 0; i < a->n; i++) {
		const char *name = a->v[i]->cfg.name;

		if (rfs_table_find(b, name))
			continue;
		fuse_lowlevel_notify_inval_entry(rfs.se, RFS_INO_ROOT, name,
						 strlen(name));
		fuse_lowlevel_notify_inval_entry(rfs.se, RFS_INO_VREGIONS, name,
						 strlen(name));
	}
}

/*
 * Regions whose owner, group or modes changed: their root dentries go,
 * so the next path walk looks them up again and the kernel (which checks
 * permissions itself with default_permissions) gets the new attributes.
 * That takes every cached key entry below with it (d_invalidate() drops
 * the subtree), so the keys' new attributes come with their next lookup.
 * The same when a region became coherence = strict: its keys' entries,
 * cached for a day while it was bounded, must not outlive the switch
 * (strict keys are not cached by the kernel at all, ops.c).
 */
static void notify_perms(const struct rfs_table *old, const struct rfs_table *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		const struct config_region *n = &t->v[i]->cfg;
		const struct rfs_region *o = rfs_table_find(old, n->name);

		if (!o ||
		    (o->cfg.owner == n->owner && o->cfg.group == n->group &&
		     o->cfg.mode == n->mode && o->cfg.dir_mode == n->dir_mode &&
		     o->cfg.coherence == n->coherence))
			continue;
		fuse_lowlevel_notify_inval_entry(rfs.se, RFS_INO_ROOT, n->name,
						 strlen(n->name));
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

int rfs_reload_apply(struct config *c)
{
	struct rfs_table *t, *old;
	char err[CONFIG_ERR_LEN];
	uint64_t gen;
	int rc;

	pthread_mutex_lock(&rfs.cfg_lock);
	rc = rfs_state_replace(c, &old, err, sizeof(err));
	if (rc) {
		pthread_mutex_unlock(&rfs.cfg_lock);
		record_failure(err);
		return rc;
	}
	t = rfs_table_ref();
	gen = ++rfs.generation;
	rfs.loaded_at = (int64_t)time(NULL);
	rfs.last_ok = true;
	rfs.last_error[0] = '\0';
	pthread_mutex_unlock(&rfs.cfg_lock);
	atomic_fetch_add(&rfs.reloads, 1);
	if (rfs.se && old) {
		notify_names(old, t);
		notify_names(t, old);
		notify_perms(old, t);
	}
	rfs_log(RFS_LOG_NOTICE, "reloaded %s: generation %llu, %zu regions",
		rfs.config_path, (unsigned long long)gen, c->nregions);
	rfs_carry_start(old, t); /* recreated caches: carry.c */
	rfs_table_unref(old);
	rfs_table_unref(t);
	return 0;
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
	struct rfs_table *t = rfs_table_ref();
	size_t i;

	for (i = 0; i < t->n; i++)
		region_sweep(t->v[i]->r, SWEEP_BUDGET);
	rfs_table_unref(t);
}

/*
 * The inotify fd on regions.ini's directories; the loader thread
 * (cfgload.c) adds and moves the watches, this thread reads the events.
 */
static int watch_config(void)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	if (fd < 0)
		rfs_log(RFS_LOG_WARNING,
			"cannot watch regions.ini (%s): reload with SIGHUP "
			"only",
			strerror(errno));
	return fd;
}

/*
 * Reads pending events: true if there was any. Which file it named does
 * not matter: the loader checks whether regions.ini (through its links)
 * is another file or changed, and loads only then.
 */
static bool config_event(int fd)
{
	char buf[4096]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	bool hit = false;

	while (read(fd, buf, sizeof(buf)) > 0)
		hit = true;
	return hit;
}

/*
 * Applies what the loader read, if anything; logs once per stall a load
 * that has been in the kernel for long (a hung file system).
 */
static void take_config(bool *stall_logged)
{
	char err[CONFIG_ERR_LEN];
	struct config *c;
	uint64_t stuck_ms;
	int rc = rfs_cfgload_take(&c, err, sizeof(err), &stuck_ms);

	if (rc > 0) {
		rfs_reload_apply(c);
		config_free(c);
	} else if (rc < 0) {
		record_failure(err);
	}
	if (stuck_ms >= 5000 && !*stall_logged) {
		rfs_log(RFS_LOG_WARNING,
			"reading %s has taken %llu ms so far (a hung file "
			"system?): reloads wait, everything else goes on",
			rfs.config_path, (unsigned long long)stuck_ms);
		*stall_logged = true;
	} else if (!stuck_ms) {
		*stall_logged = false;
	}
}

static void drain(int fd)
{
	char buf[64];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

#ifdef __GLIBC__
/*
 * malloc_trim(0), timed: it walks every arena's free chunks with the
 * arena locked, so a worker that allocates meanwhile waits for it; the
 * stats show how long it takes (malloc_trim_last_us, _max_us), and a
 * trim of TRIM_SLOW_US or more is logged.
 */
#define TRIM_SLOW_US 100000

static void trim(void)
{
	uint64_t t0 = rfs_mono_ns(), us, max;

	malloc_trim(0);
	us = (rfs_mono_ns() - t0) / 1000;
	atomic_store(&rfs.trim_last_us, us);
	atomic_fetch_add(&rfs.trim_total_us, us);
	atomic_fetch_add(&rfs.trims, 1);
	max = atomic_load(&rfs.trim_max_us); /* only this thread writes it */
	if (us > max)
		atomic_store(&rfs.trim_max_us, us);
	if (us >= TRIM_SLOW_US)
		rfs_log(RFS_LOG_WARNING, "malloc_trim(0) took %llu ms",
			(unsigned long long)(us / 1000));
}
#endif

/* One pass of periodic work; returns the poll timeout until the next. */
static int bg_work(uint64_t *next_tick, uint64_t *next_prune,
		   uint64_t *reload_at, bool exiting)
{
	uint64_t now = mono_ms();
	int timeout;

	if (*reload_at && now >= *reload_at && !exiting) {
		*reload_at = 0;
		rfs_cfgload_request(false); /* the loader checks and loads */
	}
	if (now >= *next_tick) {
		rfs_linger_expire(); /* when no request came to send them */
		sweep_all();
		if (!exiting)
			rfs_carry_step();
		*next_tick = now + TICK_MS;
	}
	if (now >= *next_prune) {
		int rc = store_changes_prune(rfs.st, FEED_MAX_AGE_MS);

		if (rc < 0)
			rfs_log(RFS_LOG_WARNING, "pruning the change feed: %s",
				strerror(-rc));
		*next_prune = now + PRUNE_EVERY_MS;
#ifdef __GLIBC__
		/*
		 * Every thread has its own malloc arena (each FUSE worker
		 * allocates values and its SQLite read connection's pages,
		 * which SQLite drops whenever another connection wrote);
		 * the free pages inside the arenas are returned only here.
		 * Measured (tests/soak): without it RSS kept creeping by
		 * 1-4 MiB in 15 minutes while the memory in use stayed flat.
		 */
		trim();
#endif
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

static void *bg_main(void *arg)
{
	uint64_t next_tick = mono_ms(), reload_at = 0;
	uint64_t next_prune = next_tick + PRUNE_EVERY_MS, exit_deadline = 0;
	struct pollfd pfd[2];
	bool exiting = false, stall_logged = false;
	int timeout = 0;

	(void)arg;
	pfd[0] = (struct pollfd){.fd = bg.pipe[0], .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = bg.ifd, .events = POLLIN};
	while (!atomic_load(&bg.stop)) {
		bg_wait(pfd, timeout, &reload_at);
		if (atomic_exchange(&bg.hup, false) && !exiting) {
			rfs_log(RFS_LOG_NOTICE, "SIGHUP: reloading %s",
				rfs.config_path);
			rfs_cfgload_request(true);
		}
		if (atomic_load(&bg.stop))
			break;
		if (atomic_load(&bg.exit_req))
			handle_exit(&exiting, &exit_deadline);
		if (!exiting)
			take_config(&stall_logged);
		timeout = bg_work(&next_tick, &next_prune, &reload_at, exiting);
	}
	return NULL;
}

/*
 * An outside writer changed key (NULL: maybe every key) and the feed has
 * invalidated the cache: the name's inode stops being current, and the
 * kernel's entry for the name goes (for "every key", every region
 * directory's entry, which takes negative entries with it, and the entry
 * of every key name the kernel may hold: a child entry that was in use
 * while its directory's entry went stays otherwise), kinval.c.
 */
static void feed_changed(const char *region, const void *key, size_t klen)
{
	rfs_inode_changed(region, key, klen);
	rfs_names_changed(region, key, klen); /* negative notes */
	if (key) {
		rfs_kinval_key(region, key, klen);
	} else {
		rfs_kinval_region(region);
		/* a child entry in use while its directory's went survives */
		if (rfs_inode_each_key(region, rfs_kinval_key))
			rfs_log(RFS_LOG_WARNING,
				"change feed: out of memory listing the names "
				"the kernel holds; some may stay until their "
				"entry timeout");
	}
}

int rfs_bg_start(void)
{
	int rc;

	bg.main_thread = pthread_self();
	rc = rfs_kinval_start();
	if (rc)
		return rc;
	rfs_feed_listen(feed_changed);
	rc = rfs_feed_start();
	if (rc) {
		rfs_kinval_stop();
		return rc;
	}
	if (pipe2(bg.pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		rc = -errno;
		rfs_feed_stop();
		return rc;
	}
	bg.ifd = watch_config();
	rc = rfs_cfgload_start(rfs.config_path, bg.ifd, wake_bg);
	if (rc == 0)
		rc = rfs_thread_spawn(&bg.thread, bg_main, NULL, "regionfs-bg");
	if (rc) {
		if (rfs_cfgload_stop() && bg.ifd >= 0)
			close(bg.ifd);
		bg.ifd = -1;
		close(bg.pipe[0]);
		close(bg.pipe[1]);
		bg.pipe[0] = bg.pipe[1] = -1;
		rfs_feed_stop();
		rfs_kinval_stop();
		return rc;
	}
	bg.running = true;
	return 0;
}

void rfs_bg_stop(void)
{
	char c = 's';

	rfs_feed_stop();
	rfs_kinval_stop(); /* after the feed, its last producer */
	if (!bg.running)
		return;
	atomic_store(&bg.stop, true);
	if (write(bg.pipe[1], &c, 1) < 0) {
		/* full pipe: the thread wakes anyway */
	}
	pthread_join(bg.thread, NULL);
	bg.running = false;
	rfs_carry_stop();
	/* a loader stuck in a read keeps its fds: it may still use them */
	if (rfs_cfgload_stop() && bg.ifd >= 0)
		close(bg.ifd);
	bg.ifd = -1;
	close(bg.pipe[0]);
	close(bg.pipe[1]);
	bg.pipe[0] = bg.pipe[1] = -1;
}
