/*
 * linger.c - the RELEASE reply of a write handle waits for the next open
 * of its inode, so that the kernel keeps the inode in between.
 *
 * Why. A write open drops the name's kernel entry (kinval.c), so once the
 * file is closed nothing but the RELEASE request holds the kernel's inode:
 * the kernel evicts it when our reply to RELEASE comes in
 * (fuse_release_end() puts its inode reference) and sends FORGET. A read
 * back of the key (cat after echo >) walks the path: LOOKUP, which
 * promotes the writer's inode to the new row's page-cache inode (inode.c)
 * and so answers with the same node id. If the eviction lands while that
 * LOOKUP is in flight, which is where the asynchronous RELEASE's reply
 * usually landed, the kernel makes a new inode for the node id and, because
 * an inode was evicted during the request (Linux 6.x: fc->evict_ctr, read
 * at the request's start), keeps the attributes it was just given marked
 * stale: the read that follows asks GETATTR. tests/bench/bench_fs's
 * rewrite phase (rewrite, then read back) sent 0.91 GETATTR and 1 FORGET
 * per key.
 *
 * What. rfs_linger_release() answers a write handle's RELEASE later: at
 * the next OPEN or GETATTR of the same node id (the kernel has finished
 * the LOOKUP that found the inode by then: the path walk is done), or
 * after LINGER_NS, whichever comes first, checked by the next RELEASE,
 * OPEN or GETATTR and by the background thread's tick (daemon.c, every
 * 100 ms), and at DESTROY and shutdown. Until then the kernel keeps the
 * inode alive for the promoting LOOKUP to find (fuse_iget() finds it by
 * node id and takes the attributes as fresh, since the inode is not new),
 * and the reply then drops a reference that the new dentry outlives:
 * nothing is evicted, no FORGET, no GETATTR. The daemon's own state is
 * done with the handle before the reply waits (ops.c frees it first): a
 * late reply changes only when the kernel puts its inode reference.
 *
 * Bounds. At most LINGER_MAX replies wait: each counts against the
 * kernel's limit of background requests (max_background, 12 by default,
 * readahead backs off at 9), so the others are answered at once. A
 * RELEASE never blocks anyone (close() has returned: RELEASE is
 * asynchronous), and a kill or abort of the connection ends the waiting
 * requests in the kernel, which puts the inodes then.
 *
 * Locking: lg.mu guards the table; a leaf, never held across a reply
 * (fuse_reply_*() writes to the device). lg.n lets the OPEN and GETATTR of
 * a mount with nothing waiting skip the lock (one relaxed load).
 */
#include "fs.h"

#define LINGER_MAX 4
#define LINGER_NS  2000000ULL /* 2 ms: a read back comes within ~0.1 ms */

struct lingering {
	fuse_req_t req;
	fuse_ino_t ino;
	uint64_t deadline_ns;
};

static struct {
	pthread_mutex_t mu;
	atomic_uint n; /* entries in use; written under mu */
	struct lingering w[LINGER_MAX];
	bool stopped; /* L: mu; after rfs_linger_stop(): answer at once */
} lg = {.mu = PTHREAD_MUTEX_INITIALIZER};

/*
 * Takes out the waiting replies for ino (0: none by node id), those past
 * their deadline at now_ns (0: none by time) and, with all, every one;
 * stores their requests in out[] and returns how many. Lock held.
 */
static unsigned take_locked(fuse_ino_t ino, uint64_t now_ns, bool all,
			    fuse_req_t out[LINGER_MAX])
{
	unsigned i = 0, k = 0,
		 n = atomic_load_explicit(&lg.n, memory_order_relaxed);

	while (i < n) {
		struct lingering *w = &lg.w[i];

		if (all || (ino && w->ino == ino) ||
		    (now_ns && now_ns >= w->deadline_ns)) {
			out[k++] = w->req;
			lg.w[i] = lg.w[--n]; /* order does not matter */
			continue;
		}
		i++;
	}
	atomic_store_explicit(&lg.n, n, memory_order_relaxed);
	return k;
}

/*
 * A relaxed look: a reply parked concurrently is missed only by a request
 * that raced with it, and waits for the next one or its deadline.
 */
static bool none_waiting(void)
{
	return atomic_load_explicit(&lg.n, memory_order_relaxed) == 0;
}

static void reply_all(fuse_req_t *reqs, unsigned k)
{
	unsigned i;

	for (i = 0; i < k; i++)
		fuse_reply_err(reqs[i], 0);
}

static void take_and_reply(fuse_ino_t ino, uint64_t now_ns, bool all)
{
	fuse_req_t reqs[LINGER_MAX];
	unsigned k;

	pthread_mutex_lock(&lg.mu);
	k = take_locked(ino, now_ns, all, reqs);
	pthread_mutex_unlock(&lg.mu);
	reply_all(reqs, k);
}

void rfs_linger_release(fuse_req_t req, fuse_ino_t ino)
{
	fuse_req_t reqs[LINGER_MAX];
	uint64_t now = rfs_mono_ns();
	unsigned k, n;
	bool parked = false;

	pthread_mutex_lock(&lg.mu);
	k = take_locked(0, now, false, reqs);
	n = atomic_load_explicit(&lg.n, memory_order_relaxed);
	if (!lg.stopped && n < LINGER_MAX) {
		lg.w[n] = (struct lingering){
			.req = req, .ino = ino, .deadline_ns = now + LINGER_NS};
		atomic_store_explicit(&lg.n, n + 1, memory_order_relaxed);
		parked = true;
	}
	pthread_mutex_unlock(&lg.mu);
	reply_all(reqs, k);
	if (parked)
		rfs_count(RFS_C_RELEASE_LINGERS, 1);
	else
		fuse_reply_err(req, 0);
}

void rfs_linger_opened(fuse_ino_t ino)
{
	if (none_waiting())
		return;
	take_and_reply(ino, rfs_mono_ns(), false);
}

void rfs_linger_expire(void)
{
	rfs_linger_opened(0); /* no node id: the overdue ones alone */
}

void rfs_linger_stop(void)
{
	pthread_mutex_lock(&lg.mu);
	lg.stopped = true;
	pthread_mutex_unlock(&lg.mu);
	take_and_reply(0, 0, true);
}
