/*
 * main.c - the regionfs command: options, startup, session loop, shutdown.
 *
 *   regionfs [options] SOURCE MOUNTPOINT
 *   regionfs --check-config FILE
 *
 * SOURCE is the SQLite database (created with mode 0600 if missing), or a
 * PostgreSQL database: a postgresql:// (postgres://) URI or a libpq
 * keyword/value string ("host=/run/postgresql dbname=rfs"), which may
 * also be given as -o store=SOURCE with MOUNTPOINT alone (fstab lines
 * whose first field cannot hold the URI). A PostgreSQL SOURCE is shown
 * (fsname, logs, the stats file) with its password replaced by ***. The
 * same command line works from /etc/fstab through mount.fuse3, which runs
 * "regionfs SOURCE MOUNTPOINT -o OPTIONS": SOURCE is the first non-option
 * argument, our own options (config=, uid=, gid=) come through -o, and
 * everything else goes to libfuse.
 *
 * Startup does everything that can fail while the terminal is still
 * there, so an error is one line "regionfs: ..." on stderr and a non-zero
 * exit: parse regions.ini, check the mount point (missing, not a
 * directory, a dead or live FUSE mount already on it), open the database
 * once (then close it again), create the regions, create the FUSE session
 * and mount. Only then does it daemonize (fuse_daemonize: fork, setsid,
 * chdir /, stdio to /dev/null). The store is opened for good after the
 * fork because fork() keeps only the calling thread and the store runs a
 * writer thread; the pre-fork open makes a failure there all but
 * impossible, and if it happens anyway it is logged to syslog and the
 * mount removed.
 *
 * Threads and signals: SIGHUP requests a reload; SIGINT/SIGTERM request
 * the end of the session, which the background thread carries out (see
 * handle_exit() in daemon.c for why not the handler itself). Every thread
 * we or the store start is created with all signals blocked, and
 * libfuse's workers block these signals too, so they land in the main
 * thread, which runs the loop.
 *
 * Shutdown (SIGTERM, SIGINT): new opens of keys are refused (ESHUTDOWN)
 * and the background thread waits up to shutdown_grace seconds for files
 * open for writing to be closed (handle_exit() in daemon.c); then the
 * loop stops taking requests and lets the handlers in progress finish,
 * the background thread stops, the uncommitted data of files still open
 * is dropped and logged (a value is committed only by its writer's close
 * or fsync, never half-written), the store commits what is pending and
 * closes, and the mount goes. Exit status 0. fusermount3 -u: the same
 * without the wait.
 */
#include <errno.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"

struct main_opts {
	char *source; /* first non-option argument, or -o store= */
	char *store;  /* -o store= */
	char *config; /* -o config= */
	char *uid;    /* -o uid= */
	char *gid;    /* -o gid= */
	int ro;	      /* -o ro (kept for libfuse too) */
	int openreq;  /* -o open_requests */
	char *grace;  /* -o shutdown_grace= */
	char *maxmem; /* -o max_memory= */
	char *lease;  /* -o lease= */
	char *renew;  /* -o lease_renew= */
	char *pollus; /* -o poll_us= */
};

#define RFS_OPT(t, f)                                                          \
	{                                                                      \
		t, offsetof(struct main_opts, f), 0                            \
	}

static const struct fuse_opt main_optspec[] = {
	RFS_OPT("config=%s", config),
	RFS_OPT("uid=%s", uid),
	RFS_OPT("gid=%s", gid),
	RFS_OPT("shutdown_grace=%s", grace),
	RFS_OPT("max_memory=%s", maxmem),
	RFS_OPT("store=%s", store),
	RFS_OPT("lease=%s", lease),
	RFS_OPT("lease_renew=%s", renew),
	RFS_OPT("poll_us=%s", pollus),
	{"ro", offsetof(struct main_opts, ro), 1},
	{"open_requests", offsetof(struct main_opts, openreq), 1},
	FUSE_OPT_KEY("ro", FUSE_OPT_KEY_KEEP),
	FUSE_OPT_END};

/*
 * The store's error callback: one log line per store error, with SQLite's
 * message, the call and the key; at most STORE_LOG_BURST lines a second
 * (a reader looping on a damaged key must not flood the log), the rest
 * counted and summed up in the next line that gets through. Every error
 * is counted by kind in the stats anyway.
 */
#define STORE_LOG_BURST 10
#define OPEN_MSG_LEN	512 /* check_database()'s copy of the message */

static void store_error(void *ctx, int err, enum store_err_kind kind,
			const char *what, const char *region, const void *key,
			size_t klen, const char *msg)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static time_t window;
	static unsigned n, dropped;
	char esc[RFS_ESC_LEN];
	unsigned skipped = 0;
	time_t now = time(NULL);
	bool log;

	if (ctx) { /* check_database(): the message goes in its one line */
		snprintf(ctx, OPEN_MSG_LEN, "%s", msg ? msg : "");
		return;
	}
	pthread_mutex_lock(&lock);
	if (now != window) {
		window = now;
		n = 0;
	}
	log = n++ < STORE_LOG_BURST;
	if (log) {
		skipped = dropped;
		dropped = 0;
	} else {
		dropped++;
	}
	pthread_mutex_unlock(&lock);
	if (!log)
		return;
	rfs_log(kind == STORE_ERR_BUSY ? RFS_LOG_WARNING : RFS_LOG_ERR,
		"store error (%s) in %s%s%s%s%s: %s (%s)%s%.0u%s",
		store_err_kind_name(kind), what, region ? " " : "",
		region ? region : "", key ? "/" : "",
		key ? rfs_escape(key, klen, esc) : "", msg ? msg : "?",
		strerror(-err), skipped ? " [" : "", skipped,
		skipped ? " more store errors not logged]" : "");
}

static struct store_options store_opts = {.on_error = store_error};

/*
 * What store_open() gets: the absolute path of an SQLite file, or the
 * PostgreSQL SOURCE as given (password included). rfs.db_path is what is
 * shown: the same path, or the SOURCE without its password.
 */
static char *store_source;

static void usage(const char *prog)
{
	printf("usage: %s [options] SOURCE MOUNTPOINT\n"
	       "       %s --check-config FILE\n"
	       "\n"
	       "Mounts the regions of regions.ini as directories whose\n"
	       "files are the keys of in-memory caches in front of the\n"
	       "SQLite database SOURCE (created with mode 0600 if missing)\n"
	       "or the PostgreSQL database SOURCE (postgresql://... URI or\n"
	       "libpq \"host=... dbname=...\" string).\n"
	       "\n"
	       "regionfs options:\n"
	       "    -o store=SOURCE        SOURCE as an option (then only\n"
	       "                           MOUNTPOINT is given)\n"
	       "    -o config=FILE         regions.ini to serve\n"
	       "                           (default: " RFS_DEFAULT_CONFIG ")\n"
	       "    -o uid=N,gid=N         owner shown for every file\n"
	       "                           (default: the user running it)\n"
	       "    -o shutdown_grace=S    on SIGTERM, wait up to S seconds\n"
	       "                           for files open for writing to be\n"
	       "                           closed (default 10)\n"
	       "    -o max_memory=SIZE     bound values in memory (cached or\n"
	       "                           held by open files) plus write\n"
	       "                           buffers; beyond it opens that load\n"
	       "                           and writes get ENOMEM (no default)\n"
	       "    -o lease=DURATION      PostgreSQL: this mount's lease for\n"
	       "                           coherence = strict (default 5s)\n"
	       "    -o lease_renew=DURATION  its renewal period (default 1s;\n"
	       "                           lease >= 2 x lease_renew + 500ms)\n"
	       "    -o poll_us=N           an idle worker polls for the next\n"
	       "                           request for up to N microseconds\n"
	       "                           before it sleeps (default 0: off)\n"
	       "    -o ro                  read-only mount over a read-only\n"
	       "                           database (refused without it);\n"
	       "                           opens send the daemon no request\n"
	       "    -o open_requests       with -o ro: opens ask the daemon\n"
	       "                           as on a read-write mount\n"
	       "    --check-config FILE    validate FILE, print each region's\n"
	       "                           effective settings, and exit\n"
	       "    -h, --help             this help\n"
	       "    -V, --version          versions of regionfs and libfuse\n"
	       "\n"
	       "Signals: SIGHUP reloads regions.ini (so does saving it);\n"
	       "SIGTERM/SIGINT refuse new opens, wait for open writers\n"
	       "(shutdown_grace), drop what is still uncommitted, unmount.\n"
	       "\n",
	       prog, prog);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

/* --check-config FILE: 0 valid, 1 not (with FILE:LINE: message). */
static int check_config(const char *path)
{
	char err[CONFIG_ERR_LEN], buf[2048];
	struct config *c;
	size_t i;

	if (config_load(path, &c, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	for (i = 0; i < c->nregions; i++) {
		config_format_region(&c->regions[i], buf, sizeof(buf));
		printf("%s%s", i ? "\n" : "", buf);
	}
	fprintf(stderr, "%s: ok, %zu region%s\n", path, c->nregions,
		c->nregions == 1 ? "" : "s");
	config_free(c);
	return 0;
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct main_opts *o = data;

	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT && !o->source) {
		o->source = strdup(arg);
		return o->source ? 0 : -1;
	}
	return 1; /* keep it for libfuse */
}

/*
 * An absolute version of path with its symlinks left alone: regions.ini is
 * opened anew at every load, so a re-pointed link is followed (cfgload.c).
 * NULL on ENOMEM.
 */
static char *abs_path_keep_links(const char *path)
{
	char cwd[PATH_MAX], *p;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&p, "%s/%s", cwd, path) < 0)
		return NULL;
	return p;
}

/* An absolute version of path, which need not exist. NULL on ENOMEM. */
static char *abs_path(const char *path)
{
	char cwd[PATH_MAX], *p;

	if (path[0] == '/')
		return strdup(path);
	p = realpath(path, NULL);
	if (p)
		return p;
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&p, "%s/%s", cwd, path) < 0)
		return NULL;
	return p;
}

static int parse_id(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > UINT_MAX - 1)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Adds "-o subtype=regionfs,fsname=SOURCE" (SOURCE escaped for -o). */
static int add_names(struct fuse_args *args, const char *source)
{
	char *opt = NULL, *fsname;
	int rc = -1;

	if (asprintf(&fsname, "fsname=%s", source) < 0)
		return -1;
	if (fuse_opt_add_opt(&opt, "subtype=regionfs") == 0 &&
	    fuse_opt_add_opt_escaped(&opt, fsname) == 0 &&
	    fuse_opt_add_arg(args, "-o") == 0 &&
	    fuse_opt_add_arg(args, opt) == 0)
		rc = 0;
	free(opt);
	free(fsname);
	return rc;
}

/*
 * Parses argv. Returns 0 to go on, 1 after --help/--version (exit 0),
 * -1 on a usage error (reported).
 */
/*
 * -o store=SOURCE: the first non-option argument taken as SOURCE was the
 * mount point; it goes back to libfuse. Two of them besides store= leave
 * libfuse an extra argument, which it refuses.
 */
static int take_store_opt(struct fuse_args *args, struct main_opts *o)
{
	if (!o->store)
		return 0;
	if (o->source && fuse_opt_add_arg(args, o->source) < 0)
		return -1;
	free(o->source);
	o->source = o->store;
	o->store = NULL;
	return 0;
}

/*
 * SOURCE as shown (fsname, logs, stats): an SQLite file's absolute path,
 * as mount(8) shows it, or a PostgreSQL SOURCE without its password.
 */
static char *shown_source(const char *source)
{
	if (store_source_backend(source) == STORE_BACKEND_POSTGRESQL)
		return store_source_display(source);
	return abs_path(source);
}

static int parse_args(struct fuse_args *args, struct main_opts *o,
		      struct fuse_cmdline_opts *cmd)
{
	if (fuse_opt_parse(args, o, main_optspec, opt_proc) < 0 ||
	    take_store_opt(args, o) < 0)
		return -1;
	if (o->source) { /* fsname */
		char *abs = shown_source(o->source);
		int rc = abs ? add_names(args, abs) : -1;

		free(abs);
		if (rc < 0)
			return -1;
	}
	if (fuse_parse_cmdline(args, cmd) < 0)
		return -1;
	if (cmd->show_help) {
		usage(args->argv[0]);
		return 1;
	}
	if (cmd->show_version) {
		printf("regionfs %s\nlibfuse %s\n", RFS_VERSION,
		       fuse_pkgversion());
		return 1;
	}
	if (!o->source || !cmd->mountpoint) {
		rfs_log(RFS_LOG_ERR, "usage: regionfs [options] SOURCE "
				     "MOUNTPOINT (regionfs --help for more)");
		return -1;
	}
	return 0;
}

/* Is a FUSE file system mounted on path (absolute, resolved)? */
static bool fuse_mounted_on(const char *path, char *type, size_t tlen)
{
	char line[8192], mnt[PATH_MAX], fstype[256];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool found = false;
	char *sep;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%255s", fstype) != 1)
			continue;
		/* mountinfo escapes blanks as \040; compare unescaped */
		if (strncmp(fstype, "fuse", 4) != 0)
			continue;
		found = strcmp(mnt, path) == 0;
		if (found)
			snprintf(type, tlen, "%s", fstype);
	}
	fclose(f);
	return found;
}

static int check_mountpoint(const char *mnt)
{
	char *real, type[256];
	struct stat st;

	if (strncmp(mnt, "/dev/fd/", 8) == 0)
		return 0; /* passed as a file descriptor by a mount helper */
	if (stat(mnt, &st) < 0) {
		if (errno == ENOTCONN)
			rfs_log(RFS_LOG_ERR,
				"mount point %s: a dead FUSE mount is still "
				"there (fusermount3 -u %s)",
				mnt, mnt);
		else
			rfs_log(RFS_LOG_ERR, "mount point %s: %s", mnt,
				strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		rfs_log(RFS_LOG_ERR, "mount point %s: Not a directory", mnt);
		return -1;
	}
	real = realpath(mnt, NULL);
	if (real && fuse_mounted_on(real, type, sizeof(type))) {
		rfs_log(RFS_LOG_ERR, "mount point %s: already mounted (%s)",
			mnt, type);
		free(real);
		return -1;
	}
	free(real);
	return 0;
}

/* store_open() with every signal blocked: its writer thread inherits that. */
static int store_open_blocked(const struct store_options *opts,
			      struct store **st)
{
	sigset_t old;
	int rc;

	rfs_signals_block(&old);
	rc = store_open(store_source, opts, st);
	rfs_signals_restore(&old);
	return rc;
}

/*
 * Opens and closes the database: does it work, before we detach? A
 * failure is one line, with the store's message if it gave one (the
 * PostgreSQL server's or libpq's).
 */
static int check_database(void)
{
	struct store_options opts = store_opts;
	char msg[OPEN_MSG_LEN] = "";
	struct store *st;
	int rc;

	opts.error_ctx = msg;
	rc = store_open_blocked(&opts, &st);
	if (rc) {
		if (msg[0]) {
			rfs_log(RFS_LOG_ERR, "database %s: %s (%s)",
				rfs.db_path, strerror(-rc), msg);
			return -1;
		}
		rfs_log(RFS_LOG_ERR, "database %s: %s%s", rfs.db_path,
			strerror(-rc),
			rc == -EPROTONOSUPPORT
				? " (this regionfs was built without "
				  "PostgreSQL support)"
			: rc == -EINVAL || rc == -EIO
				? " (not an SQLite database, or damaged?)"
			: rc == -EPERM
				? " (it must be owned by the user running "
				  "regionfs and not writable by group or "
				  "others: chown it, chmod 0600 it)"
			: rc == -EROFS && !store_opts.read_only
				? " (the file or its directory cannot be "
				  "written: mount with -o ro to serve it "
				  "read-only)"
				: "");
		return -1;
	}
	store_close(st);
	return 0;
}

#define RFS_DEFAULT_GRACE_S 10

/* "N", "NK", "NM", "NG" (powers of 1024) -> bytes; -EINVAL if not. */
static int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		end++;
		break;
	case 'M':
	case 'm':
		shift = 20;
		end++;
		break;
	case 'G':
	case 'g':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/*
 * -o lease=, lease_renew= (durations as in regions.ini): the store's lease
 * for strict regions (store.h). Renewals ride on the change feed's
 * passes, at least every 250 ms, so the lease must outlast two renewal
 * periods and a pass.
 */
static int setup_lease(const struct main_opts *o)
{
	uint64_t lease = STORE_DEFAULT_LEASE_MS, renew = STORE_DEFAULT_RENEW_MS;

	if (o->lease && (config_parse_duration_ms(o->lease, &lease) ||
			 lease < 1000 || lease > 3600000)) {
		rfs_log(RFS_LOG_ERR, "bad lease=%s (a duration, 1s to 1h)",
			o->lease);
		return -1;
	}
	if (o->renew && (config_parse_duration_ms(o->renew, &renew) ||
			 renew < 100 || renew > 600000)) {
		rfs_log(RFS_LOG_ERR,
			"bad lease_renew=%s (a duration, 100ms to 10m)",
			o->renew);
		return -1;
	}
	if (lease < 2 * renew + 500) {
		rfs_log(RFS_LOG_ERR,
			"lease=%llums is too short for lease_renew=%llums "
			"(at least 2 x lease_renew + 500ms)",
			(unsigned long long)lease, (unsigned long long)renew);
		return -1;
	}
	store_opts.lease_ms = (unsigned)lease;
	store_opts.renew_ms = (unsigned)renew;
	return 0;
}

/* -o uid=, gid=: the owner shown for every file; -o shutdown_grace=. */
static int setup_owner(const struct main_opts *o)
{
	unsigned id;

	rfs.uid = getuid();
	rfs.gid = getgid();
	if (o->uid) {
		if (parse_id(o->uid, &id)) {
			rfs_log(RFS_LOG_ERR, "bad uid=%s", o->uid);
			return -1;
		}
		rfs.uid = id;
	}
	if (o->gid) {
		if (parse_id(o->gid, &id)) {
			rfs_log(RFS_LOG_ERR, "bad gid=%s", o->gid);
			return -1;
		}
		rfs.gid = id;
	}
	rfs.grace_s = RFS_DEFAULT_GRACE_S;
	if (o->grace) { /* seconds; systemd's TimeoutStopSec bounds it */
		if (parse_id(o->grace, &id) || id > 86400) {
			rfs_log(RFS_LOG_ERR,
				"bad shutdown_grace=%s (seconds, 0 to 86400)",
				o->grace);
			return -1;
		}
		rfs.grace_s = id;
	}
	if (setup_lease(o))
		return -1;
	rfs.poll_us = 0;
	if (o->pollus) {
		if (parse_id(o->pollus, &id) || id > RFS_POLL_US_MAX) {
			rfs_log(RFS_LOG_ERR,
				"bad poll_us=%s (microseconds, 0 to %u)",
				o->pollus, RFS_POLL_US_MAX);
			return -1;
		}
		rfs.poll_us = id;
	}
	if (o->maxmem) {
		uint64_t max;

		if (parse_size(o->maxmem, &max)) {
			rfs_log(RFS_LOG_ERR,
				"bad max_memory=%s (bytes, or K/M/G)",
				o->maxmem);
			return -1;
		}
		atomic_store(&rfs.max_memory, max);
		rfs.max_memory_opt = true;
	}
	return 0;
}

/* Paths, owner and regions.ini; every failure reported. */
static int setup_state(const struct main_opts *o)
{
	char err[CONFIG_ERR_LEN];
	struct config *c;
	int rc;

	if (setup_owner(o))
		return -1;
	rfs.db_path = shown_source(o->source);
	store_source =
		store_source_backend(o->source) == STORE_BACKEND_POSTGRESQL
			? strdup(o->source)
			: abs_path(o->source);
	rfs.config_path =
		abs_path_keep_links(o->config ? o->config : RFS_DEFAULT_CONFIG);
	if (!rfs.db_path || !store_source || !rfs.config_path) {
		rfs_log(RFS_LOG_ERR, "out of memory");
		return -1;
	}
	/* stat before the load: an edit after it shows as a difference */
	if (stat(rfs.config_path, &rfs.config_st) < 0)
		memset(&rfs.config_st, 0, sizeof(rfs.config_st));
	rc = config_load(rfs.config_path, &c, err, sizeof(err));
	if (rc) {
		rfs_log(RFS_LOG_ERR, "%s", err);
		return -1;
	}
	clock_gettime(CLOCK_REALTIME, &rfs.mount_time);
	rc = rfs_inode_init();
	if (!rc)
		rc = rfs_state_init(c);
	config_free(c);
	if (rc)
		rfs_log(RFS_LOG_ERR, "cannot start: %s", strerror(-rc));
	return rc ? -1 : 0;
}

static void on_sighup(int sig)
{
	(void)sig;
	rfs_reload_request();
}

static void on_stop(int sig)
{
	(void)sig;
	rfs_exit_request();
}

/*
 * Our own handlers instead of fuse_set_signal_handlers(): SIGTERM/SIGINT
 * go through the background thread (see handle_exit() in daemon.c), and
 * without SA_RESTART so that they interrupt the loop's blocking calls.
 */
static int set_signals(void)
{
	struct sigaction stop = {.sa_handler = on_stop};
	struct sigaction hup = {.sa_handler = on_sighup,
				.sa_flags = SA_RESTART};
	struct sigaction ign = {.sa_handler = SIG_IGN};

	sigemptyset(&stop.sa_mask);
	sigemptyset(&hup.sa_mask);
	sigemptyset(&ign.sa_mask);
	if (sigaction(SIGTERM, &stop, NULL) || sigaction(SIGINT, &stop, NULL) ||
	    sigaction(SIGHUP, &hup, NULL) || sigaction(SIGPIPE, &ign, NULL))
		return -1;
	return 0;
}

static void ignore_signals(void)
{
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
}

/*
 * regionfs-testhooks only: switches for the consistency tests, read once
 * at startup and announced loudly. The shipped binary has none.
 */
static void test_hooks(void)
{
#ifdef RFS_TEST_HOOKS
	const char *v = getenv("REGIONFS_TEST_DISABLE_STALE_GUARD");
	unsigned us;

	if (v && strcmp(v, "1") == 0) {
		region_test_disable_stale_guard(true);
		rfs_log(RFS_LOG_WARNING,
			"TEST BUILD: THE STALE-PUT GUARD IS DISABLED "
			"(REGIONFS_TEST_DISABLE_STALE_GUARD=1); stale values "
			"can be served. Never use this binary for real data.");
	}
	v = getenv("REGIONFS_TEST_LOAD_DELAY_US");
	if (v && parse_id(v, &us) == 0 && us) {
		rfs_test_load_delay_us = us;
		rfs_log(RFS_LOG_WARNING,
			"TEST BUILD: every cache-miss load sleeps %u us "
			"before it completes (REGIONFS_TEST_LOAD_DELAY_US)",
			us);
	}
#endif
}

/* After the mount: detach, open the store for good, serve. */
static int serve(struct fuse_session *se, const struct fuse_cmdline_opts *cmd)
{
	struct rfs_table *t;
	int rc;

	if (fuse_daemonize(cmd->foreground) < 0)
		return -1;
	if (!cmd->foreground)
		rfs_log_to_syslog();
	test_hooks();
	rc = store_open_blocked(&store_opts, &rfs.st);
	if (rc) {
		rfs_log(RFS_LOG_ERR, "database %s: %s", rfs.db_path,
			strerror(-rc));
		return -1;
	}
	rc = rfs_bg_start();
	if (rc)
		rfs_log(RFS_LOG_ERR, "background thread: %s", strerror(-rc));
	if (rc)
		return -1;
	t = rfs_table_ref();
	rfs_log(RFS_LOG_NOTICE, "mounted %s on %s (%zu regions, config %s)",
		rfs.db_path, cmd->mountpoint, t->n, rfs.config_path);
	rfs_table_unref(t);
	rfs_sd_notify("READY=1");
	rc = rfs_loop_run(se, cmd);
	rfs_loop_done();
	rfs_sd_notify("STOPPING=1");
	/* rc > 0: the signal that ended the loop; that is a clean stop */
	if (rc < 0)
		rfs_log(RFS_LOG_ERR, "session loop: %s", strerror(-rc));
	return rc < 0 ? -1 : 0;
}

static void shutdown_all(struct fuse_session *se, bool mounted)
{
	ignore_signals();  /* from now on the handlers' pipe may be closed */
	rfs_linger_stop(); /* the loop has ended: late RELEASE replies go */
	rfs_bg_stop();
	if (rfs.st) {
		rfs_handles_shutdown();
		store_close(rfs.st);
		rfs.st = NULL;
	}
	if (mounted)
		fuse_session_unmount(se);
	if (se)
		fuse_session_destroy(se);
	rfs_state_fini();
	rfs_inode_fini();
}

/*
 * glibc's malloc raises its mmap threshold to the largest block freed so
 * far (up to 32 MiB), and its trim threshold to twice that: after a few
 * large values came and went (1 MiB values: 1 MiB and 2 MiB), every
 * thread's arena keeps up to 2 MiB free at its top for good and large
 * values no longer go back to the system when freed. A fixed threshold
 * (the default, 128 KiB) turns that adjustment off: values from 128 KiB
 * up are mapped and unmapped, arena tops are trimmed above 128 KiB.
 * Measured with tests/soak (arenas of about 2.4 MiB with 0.4 MiB in use
 * before). The background thread's malloc_trim() does the rest.
 */
static void malloc_tune(void)
{
#ifdef __GLIBC__
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cmd = {0};
	struct main_opts o = {0};
	struct fuse_session *se = NULL;
	bool mounted = false;
	int rc = 1;

	malloc_tune();
	rfs_log_capture_fuse();
	if (argc == 3 && strcmp(argv[1], "--check-config") == 0)
		return check_config(argv[2]);
	if (argc == 2 && strncmp(argv[1], "--check-config=", 15) == 0)
		return check_config(argv[1] + 15);
	rc = parse_args(&args, &o, &cmd);
	if (rc) {
		rc = rc > 0 ? 0 : 1;
		goto out_args;
	}
	rc = 1;
	rfs_log_set_debug(cmd.debug);
	rfs.foreground = cmd.foreground;
	store_opts.read_only = o.ro;
	rfs.ro = o.ro;
	rfs.open_requests = o.openreq;
	if (setup_state(&o) || check_mountpoint(cmd.mountpoint) ||
	    check_database())
		goto out;
	se = fuse_session_new(&args, &rfs_ops, sizeof(rfs_ops), NULL);
	if (!se || set_signals() < 0)
		goto out;
	rfs.se = se;
	if (fuse_session_mount(se, cmd.mountpoint) != 0)
		goto out;
	mounted = true;
	rc = serve(se, &cmd) ? 1 : 0;
out:
	shutdown_all(se, mounted);
	if (rc == 0 && mounted)
		rfs_log(RFS_LOG_NOTICE, "unmounted %s", cmd.mountpoint);
	free((char *)rfs.db_path);
	free(store_source);
	free((char *)rfs.config_path);
out_args:
	free(cmd.mountpoint);
	free(o.source);
	free(o.config);
	free(o.uid);
	free(o.gid);
	free(o.grace);
	free(o.maxmem);
	free(o.lease);
	free(o.renew);
	free(o.pollus);
	free(o.store);
	fuse_opt_free_args(&args);
	return rc;
}
