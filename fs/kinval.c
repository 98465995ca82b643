/*
 * kinval.c - telling the kernel which key names it must look up again.
 *
 * Key entries (and negative entries: "no such key") are cached by the
 * kernel for KEY_TIMEOUT (ops.c), so a warm open of a key costs one OPEN
 * and a stat none. That is only correct if every change of what a name
 * means reaches the kernel before anyone can see the old meaning. Changes
 * the kernel makes itself (unlink, rename, create through this mount)
 * need nothing. Our own writes are arranged to need nothing either
 * (below). What remains is queued here and sent as an entry invalidation
 * (fuse_lowlevel_notify_inval_entry): the next path walk asks LOOKUP
 * again and gets the inode of the row the name has now (inode.c):
 *  - an outside writer's change delivered by the change feed (daemon.c's
 *    feed listener): the key's entry, or for "every key" the region
 *    directory's entry, which drops every entry below it, negative ones
 *    included;
 *  - a commit of ours (a write handle's, truncate(2), the removal of a key
 *    whose create failed) when its entry mark does not prove that the
 *    kernel holds no long-lived entry of the name (commit.c): a LOOKUP
 *    that raced with the writer's open;
 *  - a reload that changes a region's permissions or removes it is sent
 *    by daemon.c itself from the background thread.
 *
 * Why own writes avoid notifications. The kernel serves an entry
 * invalidation with the parent directory's lock held
 * (fuse_reverse_inval_entry(): inode_lock(parent), uninterruptible).
 * Requests that hold that lock while they wait for our reply (LOOKUP,
 * CREATE, UNLINK, RENAME, READDIR in the same region) are answered while
 * a notification waits, so normally it waits microseconds; but if the
 * daemon is killed (SIGKILL, the OOM killer) while one waits, nobody
 * answers those requests, the notifying thread never leaves the kernel,
 * the device is never released and the mount hangs, with the killed
 * daemon, until someone aborts the connection
 * (/sys/fs/fuse/connections/N/abort). tests/fault/test_kill.sh hit that
 * when every commit and rename sent one. So a writer never works through
 * a long-lived entry: a write open (or truncate(2)) of an inode that is
 * not a writer's converts it and drops its entry (one notification, sent
 * before the OPEN's reply; refusing the open with ESTALE, so that the
 * kernel looked the path up again, cost three LOOKUPs and another OPEN),
 * and while a writer is on a name no LOOKUP hands out a long-lived entry
 * for it (entry timeout 0); the entry mark (fs.h) catches the LOOKUP that
 * races with that. The commits themselves then need none: notifications
 * come from outside changes, write opens of keys that were read or
 * looked up, and races.
 *
 * Why a thread. A request whose kernel side holds a lock that a request
 * holding the directory's lock wants next (truncate(2) and fsync hold the
 * file's inode lock, which an unlink of the same name takes after its
 * directory's) must not wait for a notification at all, and any handler
 * that waited would hold a worker thread the requests the notification
 * waits for may need. So notifications are sent by this one thread, which
 * holds no lock of the daemon while it sends, and no request handler ever
 * blocks on it: close() (FLUSH) of a write handle hands its reply to this
 * thread instead (rfs_kinval_reply()), which sends it after every
 * invalidation queued before it (at once when none is queued, the usual
 * case), so close() returns only after the kernel has dropped a name its
 * commit had to invalidate; that holds in the single-threaded loop too.
 * truncate(2), fsync and RELEASE reply without waiting (the kernel holds
 * the file's inode lock across the first two): when their commit had to
 * queue an invalidation it is sent microseconds later.
 *
 * Queue entries are malloc()ed; if an allocation fails, the next pass
 * invalidates the entry of every region directory instead (everything
 * below is looked up again), so no change is ever lost, only more work.
 * A deferred reply whose hand-off cannot be allocated (its arguments or
 * its queue item) is sent at once by the caller, with its result: never
 * lost (a lost reply would hang the close() or open() for good), and the
 * caller still never waits on the kernel; only its order is lost, it may
 * go out before the invalidation queued ahead of it, which follows
 * (tests/unit/test_kinval.c).
 *
 * Locking: kq.mu protects the queue and the flags; it is a leaf (taken
 * under name locks by commit.c), never held while sending.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs.h"

#define STOP_WAIT_MS 2000 /* for the thread at shutdown */

struct kitem {
	struct kitem *next;
	fuse_ino_t parent;     /* 0: a deferred call */
	void (*fn)(void *arg); /* a deferred call (a reply) */
	void *arg;
	size_t len;
	char name[]; /* NUL-terminated (libfuse sends the NUL) */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct kitem *head;  /* L: mu */
	struct kitem **tail; /* L: mu */
	bool running;	     /* L: mu; the thread takes items */
	bool stop;	     /* L: mu */
	bool lost;	     /* L: mu; an item could not be queued */
	bool busy;	     /* L: mu; the thread is sending one */
	pthread_t thread;
	atomic_ulong sent; /* notifications sent */
} kq = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.tail = &kq.head,
};

static void push_locked(struct kitem *k)
{
	k->next = NULL;
	*kq.tail = k;
	kq.tail = &k->next;
	pthread_cond_signal(&kq.cond);
}

void rfs_kinval_entry(fuse_ino_t parent, const char *name, size_t len)
{
	struct kitem *k;

	if (!parent)
		return;
	pthread_mutex_lock(&kq.mu);
	if (!kq.running) {
		pthread_mutex_unlock(&kq.mu);
		return; /* no kernel to tell (unit tests, shutdown) */
	}
	k = malloc(sizeof(*k) + len + 1);
	if (!k) {
		kq.lost = true;
		pthread_cond_signal(&kq.cond);
	} else {
		k->parent = parent;
		k->fn = NULL;
		k->arg = NULL;
		k->len = len;
		memcpy(k->name, name, len);
		k->name[len] = '\0';
		push_locked(k);
	}
	pthread_mutex_unlock(&kq.mu);
}

void rfs_kinval_key(const char *region, const void *key, size_t klen)
{
	/* no inode for the directory: the kernel holds no entry below it */
	rfs_kinval_entry(rfs_inode_peek_dir(region), key, klen);
}

void rfs_kinval_region(const char *region)
{
	struct rfs_table *t;
	size_t i;

	if (region) {
		rfs_kinval_entry(RFS_INO_ROOT, region, strlen(region));
		return;
	}
	t = rfs_table_ref();
	for (i = 0; i < t->n; i++)
		rfs_kinval_entry(RFS_INO_ROOT, t->v[i]->cfg.name,
				 strlen(t->v[i]->cfg.name));
	rfs_table_unref(t);
}

void rfs_kinval_then(void (*fn)(void *arg), void *arg)
{
	struct kitem *k = NULL;
	bool now;

	pthread_mutex_lock(&kq.mu);
	now = !kq.running || (!kq.head && !kq.busy && !kq.lost);
	if (!now) {
		k = malloc(sizeof(*k) + 1);
		if (k) {
			k->parent = 0;
			k->fn = fn;
			k->arg = arg;
			k->len = 0;
			k->name[0] = '\0';
			push_locked(k);
		}
	}
	pthread_mutex_unlock(&kq.mu);
	/*
	 * Nothing queued: nothing to wait for. No memory for the item:
	 * call now rather than never (the invalidations still follow).
	 */
	if (!k)
		fn(arg);
}

struct err_reply {
	fuse_req_t req;
	int rc;
};

static void send_err(void *arg)
{
	struct err_reply *r = arg;

	fuse_reply_err(r->req, -r->rc);
	free(r);
}

void rfs_kinval_reply(fuse_req_t req, int rc)
{
	struct err_reply *r = malloc(sizeof(*r));

	if (!r) {
		fuse_reply_err(req, -rc);
		return;
	}
	r->req = req;
	r->rc = rc;
	rfs_kinval_then(send_err, r);
}

/* Every region directory's entry (after a lost item). */
static void send_all(void)
{
	struct rfs_table *t = rfs_table_ref();
	size_t i;

	for (i = 0; i < t->n; i++)
		fuse_lowlevel_notify_inval_entry(rfs.se, RFS_INO_ROOT,
						 t->v[i]->cfg.name,
						 strlen(t->v[i]->cfg.name));
	rfs_table_unref(t);
}

/* stopping: the session loop is over, only replies are still sent. */
static void send_one(struct kitem *k, bool stopping)
{
	if (k->parent && stopping) {
		/* nobody will look the name up through this mount again */
	} else if (k->parent) {
		/* -ENOENT: the kernel holds no such entry, nothing to do */
		fuse_lowlevel_notify_inval_entry(rfs.se, k->parent, k->name,
						 k->len);
		atomic_fetch_add(&kq.sent, 1);
	} else {
		k->fn(k->arg);
	}
	free(k);
}

/*
 * Takes the next item (or the lost flag); false when stopped and empty.
 * *stopping: rfs_kinval_stop() was called.
 */
static bool take(struct kitem **k, bool *lost, bool *stopping)
{
	pthread_mutex_lock(&kq.mu);
	kq.busy = false;
	while (!kq.head && !kq.lost && !kq.stop)
		pthread_cond_wait(&kq.cond, &kq.mu);
	*lost = kq.lost;
	*stopping = kq.stop;
	kq.lost = false;
	*k = NULL;
	if (!*lost && kq.head) {
		*k = kq.head;
		kq.head = (*k)->next;
		if (!kq.head)
			kq.tail = &kq.head;
	}
	kq.busy = *lost || *k;
	pthread_mutex_unlock(&kq.mu);
	return *lost || *k;
}

static void *kinval_main(void *arg)
{
	struct kitem *k;
	bool lost, stopping;

	(void)arg;
	while (take(&k, &lost, &stopping)) {
		if (lost && !stopping)
			send_all();
		if (k)
			send_one(k, stopping);
	}
	return NULL;
}

/* pthread_join() with a deadline: false if the thread is still running. */
static bool join_within(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return pthread_timedjoin_np(kq.thread, NULL, &ts) == 0;
}

int rfs_kinval_start(void)
{
	int rc;

	pthread_mutex_lock(&kq.mu);
	kq.stop = false;
	kq.running = true;
	pthread_mutex_unlock(&kq.mu);
	rc = rfs_thread_spawn(&kq.thread, kinval_main, NULL, "rfs-kinval");
	if (rc) {
		pthread_mutex_lock(&kq.mu);
		kq.running = false;
		pthread_mutex_unlock(&kq.mu);
	}
	return rc;
}

void rfs_kinval_stop(void)
{
	struct kitem *k;
	bool was;

	pthread_mutex_lock(&kq.mu);
	was = kq.running;
	kq.stop = true;
	pthread_cond_signal(&kq.cond);
	pthread_mutex_unlock(&kq.mu);
	if (!was)
		return;
	/*
	 * The thread drains the queue (replies included) before it exits.
	 * The session loop has stopped: a notification waiting for a
	 * directory lock that an unanswered request holds would wait
	 * forever, so give it a moment and then leave it.
	 */
	if (!join_within(STOP_WAIT_MS)) {
		rfs_log(RFS_LOG_WARNING, "kernel notification thread stuck "
					 "at shutdown: left behind");
		return;
	}
	pthread_mutex_lock(&kq.mu);
	kq.running = false;
	k = kq.head; /* queued after the thread's last look */
	kq.head = NULL;
	kq.tail = &kq.head;
	pthread_mutex_unlock(&kq.mu);
	while (k) {
		struct kitem *next = k->next;

		send_one(k, true);
		k = next;
	}
}

uint64_t rfs_kinval_sent(void)
{
	return atomic_load(&kq.sent);
}
