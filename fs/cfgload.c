/*
 * cfgload.c - regions.ini is read on a thread of its own.
 *
 * Reading the file can block: a FIFO put in its place (refused by
 * config_load(), which opens non-blocking and reads regular files only),
 * or a hung network file system, where open() and read() sleep in the
 * kernel for as long as the server is gone. If the background thread
 * (daemon.c) did the reading, expiry sweeps, feed pruning and the handling
 * of SIGTERM would stop with it. So the loader thread does every access
 * to the file and its directories (stat, realpath, open, read, the
 * inotify watches) and hands a parsed struct config to the background
 * thread, which applies it; the loader never touches the region table.
 * A loader stuck in the kernel only delays reloads: requests made
 * meanwhile collapse into one, the stall is logged, and at shutdown the
 * thread (detached) is simply left behind.
 *
 * The path. The path given with -o config= is kept as given (made
 * absolute against the working directory, symlinks left alone) and opened
 * anew at every load, so a re-pointed symlink (a `current` link, a
 * Kubernetes ConfigMap's ..data swap) is followed. Two directories are
 * watched (the inotify fd belongs to the background thread, which reads
 * the events): the one holding the path as given, where a link is
 * replaced, and the one holding the file it resolves to now, where the
 * file itself is edited or replaced; the second watch moves when the
 * target does. Any event in them asks for a check: the loader compares
 * the file's identity (resolved path, device, inode, size, mtime) with the
 * last one it loaded and loads only if it changed, so unrelated files in
 * those directories cost a stat, not a reload. SIGHUP forces a load.
 *
 * Locking: L.mu guards the request and result fields; the loader holds
 * it only to take a request or post a result, never while reading.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "fs.h"

/* What identifies the content at the path: changes when it is replaced. */
struct cfg_sig {
	bool ok;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim;
	char real[PATH_MAX];
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool running;		  /* L: mu; the thread was started */
	bool stop;		  /* L: mu */
	int want;		  /* L: mu; 0 none, 1 check, 2 load (SIGHUP) */
	bool busy;		  /* L: mu; reading now */
	uint64_t busy_ns;	  /* L: mu; since when */
	bool have;		  /* L: mu; a result is waiting */
	struct config *c;	  /* L: mu; the result: a config, or */
	char err[CONFIG_ERR_LEN]; /* L: mu; its error */
	void (*wake)(void);	  /* immutable: wakes the background thread */
	/* the loader thread's own */
	char *path;
	int ifd;
	int wd_link, wd_target;
	char target_dir[PATH_MAX];
	struct cfg_sig last;
} L = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.ifd = -1,
	.wd_link = -1,
	.wd_target = -1,
};

static void sig_take(const char *path, struct cfg_sig *s)
{
	struct stat sb;

	memset(s, 0, sizeof(*s));
	if (stat(path, &sb) < 0 || !realpath(path, s->real))
		return;
	s->ok = true;
	s->dev = sb.st_dev;
	s->ino = sb.st_ino;
	s->size = sb.st_size;
	s->mtim = sb.st_mtim;
}

static bool sig_same(const struct cfg_sig *a, const struct cfg_sig *b)
{
	return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino &&
	       a->size == b->size && a->mtim.tv_sec == b->mtim.tv_sec &&
	       a->mtim.tv_nsec == b->mtim.tv_nsec && !strcmp(a->real, b->real);
}

/* dir of path into out (PATH_MAX); "/" for a file at the root. */
static void dir_of(const char *path, char *out)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 0;

	if (!slash) {
		strcpy(out, ".");
		return;
	}
	if (len == 0)
		len = 1;
	memcpy(out, path, len);
	out[len] = '\0';
}

#define WATCH_MASK                                                             \
	(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM)

/* Watches the directory of the file the path resolves to now. */
static void watch_target(void)
{
	char dir[PATH_MAX], ldir[PATH_MAX];

	if (L.ifd < 0 || !L.last.ok)
		return;
	dir_of(L.last.real, dir);
	if (L.wd_target >= 0 && !strcmp(dir, L.target_dir))
		return;
	dir_of(L.path, ldir);
	if (L.wd_target >= 0 && L.wd_target != L.wd_link)
		inotify_rm_watch(L.ifd, L.wd_target);
	/* the same directory as the link's gives the same descriptor */
	L.wd_target = inotify_add_watch(L.ifd, dir, WATCH_MASK);
	if (L.wd_target < 0)
		rfs_log(RFS_LOG_WARNING,
			"cannot watch %s (%s): edits there "
			"reload on SIGHUP only",
			dir, strerror(errno));
	snprintf(L.target_dir, sizeof(L.target_dir), "%s", dir);
}

/* One request: load (if forced, or if the file changed) and post. */
static void serve(int want)
{
	char err[CONFIG_ERR_LEN] = "";
	struct config *c = NULL;
	struct cfg_sig now;

	sig_take(L.path, &now);
	if (want == 1 && sig_same(&now, &L.last))
		return; /* an event of another file: nothing to do */
	if (config_load(L.path, &c, err, sizeof(err)))
		c = NULL;
	/* a refused file is reported once, not at every event in its
	 * directory: the next change (or SIGHUP) tries again */
	L.last = now;
	pthread_mutex_lock(&L.mu);
	if (L.stop) { /* the fds may be closed already */
		pthread_mutex_unlock(&L.mu);
		config_free(c);
		return;
	}
	pthread_mutex_unlock(&L.mu);
	watch_target(); /* stop waits for busy to end before closing ifd */
	pthread_mutex_lock(&L.mu);
	config_free(L.c); /* an older result nobody took */
	L.c = c;
	snprintf(L.err, sizeof(L.err), "%s", c ? "" : err);
	L.have = true;
	if (!L.stop)
		L.wake();
	pthread_mutex_unlock(&L.mu);
}

static void *loader_main(void *arg)
{
	int want;

	(void)arg;
	pthread_mutex_lock(&L.mu);
	for (;;) {
		while (!L.want && !L.stop)
			pthread_cond_wait(&L.cond, &L.mu);
		if (L.stop)
			break;
		want = L.want;
		L.want = 0;
		L.busy = true;
		L.busy_ns = rfs_mono_ns();
		pthread_mutex_unlock(&L.mu);
		serve(want);
		pthread_mutex_lock(&L.mu);
		L.busy = false;
	}
	config_free(L.c);
	L.c = NULL;
	pthread_mutex_unlock(&L.mu);
	free(L.path);
	L.path = NULL;
	return NULL;
}

int rfs_cfgload_start(const char *path, int ifd, void (*wake)(void))
{
	char dir[PATH_MAX];
	pthread_t t;
	int rc;

	L.path = strdup(path);
	if (!L.path)
		return -ENOMEM;
	L.wake = wake;
	L.ifd = ifd;
	L.stop = false;
	/* the identity the start-up load saw (main.c took it first): an
	 * edit since shows as a difference at the first check */
	L.last = (struct cfg_sig){0};
	if (rfs.config_st.st_ino) {
		L.last.ok = realpath(path, L.last.real) != NULL;
		L.last.dev = rfs.config_st.st_dev;
		L.last.ino = rfs.config_st.st_ino;
		L.last.size = rfs.config_st.st_size;
		L.last.mtim = rfs.config_st.st_mtim;
	}
	if (ifd >= 0) {
		dir_of(path, dir);
		L.wd_link = inotify_add_watch(ifd, dir, WATCH_MASK);
		if (L.wd_link < 0)
			rfs_log(RFS_LOG_WARNING,
				"cannot watch %s (%s): reload with SIGHUP only",
				dir, strerror(errno));
		watch_target();
	}
	rc = rfs_thread_spawn(&t, loader_main, NULL, "regionfs-cfg");
	if (rc) {
		free(L.path);
		L.path = NULL;
		return rc;
	}
	pthread_detach(t);
	pthread_mutex_lock(&L.mu);
	L.running = true;
	L.want = 1; /* changed between the start-up load and the watch? */
	pthread_cond_signal(&L.cond);
	pthread_mutex_unlock(&L.mu);
	return 0;
}

void rfs_cfgload_request(bool force)
{
	pthread_mutex_lock(&L.mu);
	if (force || !L.want)
		L.want = force ? 2 : 1;
	pthread_cond_signal(&L.cond);
	pthread_mutex_unlock(&L.mu);
}

int rfs_cfgload_take(struct config **c, char *err, size_t errlen,
		     uint64_t *stuck_ms)
{
	int rc = 0;

	*c = NULL;
	*stuck_ms = 0;
	pthread_mutex_lock(&L.mu);
	if (L.have) {
		*c = L.c;
		rc = L.c ? 1 : -1;
		if (!L.c)
			snprintf(err, errlen, "%s", L.err);
		L.c = NULL;
		L.have = false;
	}
	if (L.busy)
		*stuck_ms = (rfs_mono_ns() - L.busy_ns) / 1000000;
	pthread_mutex_unlock(&L.mu);
	return rc;
}

bool rfs_cfgload_stop(void)
{
	bool idle;

	pthread_mutex_lock(&L.mu);
	L.stop = true; /* a thread stuck in a read exits when it returns */
	idle = !L.busy;
	pthread_cond_signal(&L.cond);
	pthread_mutex_unlock(&L.mu);
	return idle;
}
