/*
 * handle.c - open files: the read path's value references, the write
 * path's private buffers and the commit, and handle bookkeeping.
 *
 * Read handles (a key opened O_RDONLY) hold one reference on an immutable
 * region value, taken at open from the cache (a hit) or from a load on the
 * opening thread completed through the region's flight (a miss). read()
 * replies with a pointer into that value; a value outlives its eviction,
 * expiry or overwrite for as long as a handle references it, which is how
 * a reader that opened before an overwrite or unlink keeps reading the
 * bytes it opened. A read handle may also fill the kernel's page cache of
 * its inode (keep_cache): inode.c decides at open, and the release tells
 * it. For that decision every value carries, besides the row's version
 * and mtime, the serial number of the load that made it (value_new()): an
 * inode's page cache may only ever hold the bytes of one value, and two
 * loads of one row version need not hold the same bytes (an outside
 * writer may rewrite a row without changing version, size or mtime).
 * The serial is the value's tag (region_value_set_tag()); value_new() and
 * commit.c's write-through install (the value a commit leaves in the
 * cache) are the only places the daemon makes a value, both with a serial
 * of rfs_value_serial(), so every value in its regions has one (serials
 * start at 1; 0 means "no load").
 *
 * Write handles hold a private buffer (DESIGN.md "The write path"): a copy
 * of the value at open, or empty with O_TRUNC. write() and ftruncate()
 * edit it; flush (close), fsync and, failing those, release commit it
 * whole (a commit that failed drops what it had to store: its close()
 * said so, and no later call stores it after all) through the write protocol of commit.c (E1, store_put, E2, under
 * the lock of the name the inode has then), and reply.
 *
 * The buffer is copy-on-write (struct rfs_wbuf, reference counted): a
 * commit and a read() on an O_RDWR handle take a reference and run without
 * the handle's mutex; a write that finds the buffer shared copies it
 * first. So a commit never holds a lock across store_put(), and a write
 * racing with a commit on the same handle (two threads sharing the fd)
 * lands in the next commit instead of tearing this one. Commits of one
 * handle are serialized (committing + cond) so an older buffer can never
 * be stored after a newer one. Concurrent writers on different handles of
 * one key: the last commit wins, as DESIGN.md says.
 *
 * A write handle opens only a writer's inode: any other is converted at
 * the open and its kernel entry dropped (enter_writer(); kinval.c has why
 * a writer must not work through a long-lived kernel entry), or, while
 * page-cache readers keep it open, gets ESTALE and the kernel retries on
 * a writer's inode (inode.c's markers). The handle is counted there until
 * its release, as is a read handle's.
 * An inode that an unlink or a rename made gone between the kernel's
 * LOOKUP and the OPEN gets ESTALE too (whandle_attach()).
 *
 * A write handle commits to the name its inode has at commit time, so a
 * rename while the file is open moves the pending data with it; if the
 * key was unlinked or replaced meanwhile, the data goes nowhere (POSIX:
 * written to an unlinked file). commit.c makes resolving that name and
 * storing under it one step against unlinks and renames. A value larger than the region's
 * max_value_size is refused with EFBIG at write() time, and the handle is
 * then broken: its later writes and its close() fail with EFBIG too and
 * nothing of it is committed, so a too-large file never ends up stored cut
 * at the limit (the key keeps its previous value).
 *
 * Every handle is on one of HANDLE_STRIPES lists so that shutdown can
 * commit dirty handles the kernel never released (lazy unmount on SIGTERM
 * with files still open) and free everything. The stripe is picked per
 * thread, so open/release on different threads rarely share a lock.
 *
 * Locking: handle lists: hstripes[i].mu (a leaf). Write handle: w->mu
 * (see struct rfs_whandle in fs.h); w->mu may be held while taking the
 * inode table lock, never the reverse, and is never held while taking a
 * name lock (commit.c): a commit runs without it. A write open holds its
 * name's lock (shared) while it fills the buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"

#define HANDLE_STRIPES 16
/* How long a write open waits for page-cache readers (1 ms steps). */
#define WRITER_WAIT_MS 500

struct hstripe {
	_Alignas(64) pthread_mutex_t mu;
	struct rfs_handle *head; /* L: mu */
};

static struct hstripe hstripes[HANDLE_STRIPES] = {
	[0 ... HANDLE_STRIPES - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER},
};

static atomic_uint_fast64_t seq_gen; /* orders changes of all handles */

#ifdef RFS_TEST_HOOKS
unsigned rfs_test_load_delay_us; /* set once at startup */
#endif

/* ---- handles ------------------------------------------------------------- */

struct rfs_handle *rfs_handle_new(enum rfs_hkind kind)
{
	struct rfs_handle *h = calloc(1, sizeof(*h));
	struct hstripe *s;

	if (!h)
		return NULL;
	h->kind = kind;
	atomic_init(&h->refs, 1);
	h->stripe = rfs_thread_slot(HANDLE_STRIPES);
	s = &hstripes[h->stripe];
	pthread_mutex_lock(&s->mu);
	h->next = s->head;
	if (s->head)
		s->head->prev = h;
	s->head = h;
	pthread_mutex_unlock(&s->mu);
	rfs_count(RFS_C_OPEN_HANDLES, 1);
	return h;
}

static void untrack(struct rfs_handle *h)
{
	struct hstripe *s = &hstripes[h->stripe];

	pthread_mutex_lock(&s->mu);
	if (h->prev)
		h->prev->next = h->next;
	else
		s->head = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&s->mu);
	rfs_count(RFS_C_OPEN_HANDLES, -1);
}

/* ---- the global memory limit ---------------------------------------------- */

static atomic_uint_fast64_t wbuf_bytes;	  /* allocated write buffers */
static atomic_uint_fast64_t mem_refusals; /* rfs_mem_admit() said no */

void rfs_mem_set_limit(uint64_t max_memory)
{
	if (!rfs.max_memory_opt)
		atomic_store_explicit(&rfs.max_memory, max_memory,
				      memory_order_relaxed);
}

/* Does max_memory leave room for extra bytes more? Counts nothing. */
static bool mem_room(uint64_t extra)
{
	uint64_t max =
		atomic_load_explicit(&rfs.max_memory, memory_order_relaxed);

	return !max ||
	       region_values_bytes() + atomic_load(&wbuf_bytes) + extra <= max;
}

/*
 * Frees what the regions retired and no reader can still see: the values
 * of evicted or replaced entries otherwise stay counted until the readers'
 * grace period has passed at a later lock hold of their stripe or the
 * sweep (every 100 ms), and an open refused meanwhile would fail with
 * room that is only waiting to be freed. True if anything was freed.
 */
static bool mem_reclaim(void)
{
	struct rfs_table *t = rfs_table_ref();
	size_t i, got = 0;

	for (i = 0; i < t->n; i++)
		got += region_reclaim_retired(t->v[i]->r);
	rfs_table_unref(t);
	return got > 0;
}

int rfs_mem_admit(uint64_t extra)
{
	if (mem_room(extra))
		return 0;
	if (mem_reclaim() && mem_room(extra)) /* once: then it is full */
		return 0;
	atomic_fetch_add(&mem_refusals, 1);
	return -ENOMEM;
}

void rfs_mem_counters(struct rfs_counters *out)
{
	out->mem_values_bytes = region_values_bytes();
	out->mem_wbuf_bytes = atomic_load(&wbuf_bytes);
	rfs_pin_counters(&out->mem_pinned_bytes, &out->mem_pinned_values);
	out->mem_limit_bytes =
		atomic_load_explicit(&rfs.max_memory, memory_order_relaxed);
	out->mem_refusals = atomic_load(&mem_refusals);
}

void rfs_wbuf_unref(struct rfs_wbuf *b)
{
	if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
		atomic_fetch_sub(&wbuf_bytes, b->cap);
		free(b);
	}
}

/* Frees what h holds, and h. It is no longer on a list. */
static void destroy(struct rfs_handle *h)
{
	struct rfs_whandle *w = &h->u.w;

	switch (h->kind) {
	case RFS_H_READ:
		if (h->u.r.fill) /* never filled (cannot happen): let go */
			rfs_inode_filled(h->u.r.ino);
		if (h->u.r.v) /* counted by rfs_inode_open_read() */
			rfs_inode_close_read(h->u.r.ino, h->u.r.pcache);
		rfs_pin_del(&h->u.r.pin);
		region_value_unref(h->u.r.v);
		break;
	case RFS_H_VIRTUAL:
		free(h->u.virt.buf);
		break;
	case RFS_H_WRITE:
		rfs_inode_detach(w->ino, h);
		rfs_inode_close_write(w->ino, w->readable);
		rfs_wbuf_unref(w->buf);
		rfs_unborn_free(w->ub); /* never committed: it goes */
		rfs_region_unref(w->rr);
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->mu);
		break;
	case RFS_H_DIR:
		break;
	}
	free(h);
}

void rfs_handle_ref(struct rfs_handle *h)
{
	atomic_fetch_add(&h->refs, 1);
}

void rfs_handle_unref(struct rfs_handle *h)
{
	if (atomic_fetch_sub(&h->refs, 1) == 1)
		destroy(h);
}

void rfs_handle_free(struct rfs_handle *h)
{
	if (!h)
		return;
	untrack(h);
	rfs_handle_unref(h);
}

/* Takes one handle off the lists, or NULL when they are empty. */
static struct rfs_handle *pop_any(void)
{
	struct rfs_handle *h = NULL;
	int i;

	for (i = 0; i < HANDLE_STRIPES && !h; i++) {
		pthread_mutex_lock(&hstripes[i].mu);
		h = hstripes[i].head;
		pthread_mutex_unlock(&hstripes[i].mu);
	}
	if (h)
		untrack(h);
	return h;
}

unsigned rfs_handles_writers(void)
{
	struct rfs_handle *h;
	unsigned n = 0;
	int i;

	for (i = 0; i < HANDLE_STRIPES; i++) {
		pthread_mutex_lock(&hstripes[i].mu);
		for (h = hstripes[i].head; h; h = h->next)
			n += h->kind == RFS_H_WRITE;
		pthread_mutex_unlock(&hstripes[i].mu);
	}
	return n;
}

/*
 * A file still open for writing when the session ends (its writer did not
 * close it within the grace period) holds data nobody committed: a value
 * is committed only by its writer's close() or fsync(), so it is dropped,
 * never stored half-written over the intact old value. Logged per file
 * and summed up.
 */
void rfs_handles_shutdown(void)
{
	struct rfs_handle *h;
	struct rfs_ident id;
	char esc[RFS_ESC_LEN];
	unsigned long long files = 0, bytes = 0;

	/* single-threaded now: the session loop has returned */
	while ((h = pop_any())) {
		if (h->kind == RFS_H_WRITE && atomic_load(&h->u.w.dirty)) {
			size_t len = atomic_load(&h->u.w.len);

			files++;
			bytes += len;
			if (rfs_inode_ident(h->u.w.ino, &id) == 0 &&
			    id.kind == RFS_I_KEY)
				rfs_log(RFS_LOG_WARNING,
					"shutdown: %s/%s was still open for "
					"writing: its %zu uncommitted bytes "
					"are dropped (the key keeps its last "
					"committed value)",
					id.region,
					rfs_escape(id.key, id.klen, esc), len);
		}
		rfs_handle_unref(h);
	}
	if (files)
		rfs_log(RFS_LOG_WARNING,
			"shutdown: dropped the uncommitted data of %llu open "
			"file%s (%llu bytes)",
			files, files == 1 ? "" : "s", bytes);
}

/* ---- the read path ------------------------------------------------------- */

/*
 * A value for a loaded row: takes over data (malloc()ed, size bytes, NULL
 * when empty) and tags it with the load's serial (region_value_tag()).
 * NULL on ENOMEM (data is freed).
 */
static struct region_value *value_new(void *data, const struct store_meta *meta)
{
	uint64_t serial = rfs_value_serial();
	struct region_value *v = region_value_adopt(data, meta->size);

	if (v) {
		region_value_set_meta(v, meta->mtime_ns, meta->version);
		region_value_set_tag(v, serial);
	}
	return v;
}

int rfs_fetch(struct rfs_region *rr, const char *key, size_t klen,
	      struct region_value **out)
{
	struct region_flight *fl;
	int rc;

	if (!rfs_hits_ok(rr)) /* strict, no live lease: no hit, load it */
		region_invalidate(rr->r, key, klen, REGION_ORIGIN_OUTSIDE);
	rc = region_get(rr->r, key, klen, out, &fl);
	if (rc != REGION_LOAD)
		return rc;
	/* a miss: the flight is ours; load without holding anything */
	return rfs_flight_load(rr, fl, key, klen, out);
}

int rfs_flight_load(struct rfs_region *rr, struct region_flight *fl,
		    const char *key, size_t klen, struct region_value **out)
{
	struct region_value *v = NULL;
	struct store_meta meta;
	void *data = NULL;
	int rc;

	rc = store_load(rfs.st, rr->cfg.name, key, klen, &data, &meta);
#ifdef RFS_TEST_HOOKS
	if (rfs_test_load_delay_us)
		usleep(rfs_test_load_delay_us);
#endif
	if (rc == 0 && (rc = rfs_mem_admit(meta.size)) != 0) {
		free(data); /* over the global memory limit: not kept */
		data = NULL;
	}
	if (rc == 0) {
		v = value_new(data, &meta);
		if (!v)
			rc = -ENOMEM;
	}
	return region_flight_done(rr->r, fl, rc, v, out);
}

/*
 * A read handle for key inode id: the cache's value, and whether the
 * kernel may keep it in the page cache (inode.c decides), and whether the
 * OPEN stores it there (fill: only values of 1..RFS_FILL_MAX bytes; an
 * empty one has no page, a large one would be copied whole for a reader
 * that may want a part). While another open of the inode is filling its
 * pages, inode.c says -EAGAIN: that open's store takes microseconds
 * (memory copies, no request), so this one polls without holding a lock.
 */
int rfs_rhandle_open(struct rfs_region *rr, fuse_ino_t ino,
		     const struct rfs_ident *id, struct rfs_handle **out)
{
	struct region_value *v;
	struct rfs_handle *h;
	size_t len;
	bool *fill;
	int rc;

	*out = NULL;
	rc = rfs_fetch(rr, id->key, id->klen, &v);
	if (rc)
		return rc;
	len = region_value_len(v);
	h = rfs_handle_new(RFS_H_READ);
	rc = -ENOMEM;
	if (h) {
		h->u.r.ino = ino;
		fill = len && len <= RFS_FILL_MAX ? &h->u.r.fill : NULL;
		while ((rc = rfs_inode_open_read(ino, v, &h->u.r.v,
						 &h->u.r.pcache, fill)) ==
		       -EAGAIN)
			nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
		if (rc == 0)
			rfs_pin_add(&h->u.r.pin, h->u.r.v);
		if (rc == 0 && !h->u.r.pcache)
			h->u.r.resync = rfs_inode_attrs_stale(ino, h->u.r.v);
	}
	region_value_unref(v);
	if (rc) {
		rfs_handle_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

void rfs_rhandle_fill(struct rfs_handle *h)
{
	struct rfs_rhandle *r = &h->u.r;
	struct fuse_bufvec bv;
	size_t len;
	int rc;

	if (h->kind != RFS_H_READ || !r->fill)
		return;
	len = region_value_len(r->v);
	bv = (struct fuse_bufvec)FUSE_BUFVEC_INIT(len);
	/*
	 * Offset 0 and exactly the value: the kernel marks every page it
	 * fills uptodate (the last one zero-filled past the end, since the
	 * store ends at the file's size), and leaves the size alone (a
	 * store past the size would extend it and drop the attributes).
	 * Copied during the call: no splice of the value's memory.
	 */
	bv.buf[0].mem = (void *)region_value_data(r->v);
	rc = fuse_lowlevel_notify_store(rfs.se, r->ino, 0, &bv,
					FUSE_BUF_NO_SPLICE);
	rfs_inode_filled(r->ino);
	r->fill = false;
	if (rc) {
		/* the pages it did fill are the value's; READ does the rest */
		rfs_count(RFS_C_FILL_FAILURES, 1);
		rfs_log(RFS_LOG_DEBUG,
			"open: storing %zu bytes into the page cache of inode "
			"%llu: %s (READ serves them)",
			len, (unsigned long long)r->ino, strerror(-rc));
		return;
	}
	rfs_count(RFS_C_FILLS, 1);
	rfs_count(RFS_C_FILL_BYTES, len);
}

/* ---- write buffers ------------------------------------------------------- */

static struct rfs_wbuf *wbuf_new(size_t cap)
{
	struct rfs_wbuf *b = malloc(sizeof(*b) + (cap ? cap : 1));

	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = 0;
	b->cap = cap;
	atomic_fetch_add(&wbuf_bytes, cap);
	return b;
}

static uint64_t value_limit(const struct rfs_whandle *w)
{
	uint64_t lim = w->rr->cfg.lim.max_value_size;

	return lim && lim < RFS_MAX_VALUE ? lim : RFS_MAX_VALUE;
}

/*
 * Makes w->buf private to the handle and able to hold need bytes, keeping
 * its first len bytes. Grows geometrically up to the value limit. w->mu
 * held.
 */
static int make_room(struct rfs_whandle *w, size_t need)
{
	struct rfs_wbuf *b = w->buf, *nb;
	size_t cap;

	if (atomic_load(&b->refs) == 1 && b->cap >= need)
		return 0;
	cap = need;
	if (need > b->cap) {
		cap = b->cap * 2 > need ? b->cap * 2 : need;
		if (cap > value_limit(w))
			cap = need;
	} else {
		cap = b->cap; /* a shared buffer: copy, same size */
	}
	if (rfs_mem_admit(cap))
		return -ENOMEM;
	nb = wbuf_new(cap);
	if (!nb)
		return -ENOMEM;
	nb->len = b->len < cap ? b->len : cap;
	memcpy(nb->data, b->data, nb->len);
	w->buf = nb;
	rfs_wbuf_unref(b);
	return 0;
}

static void mark_changed_locked(struct rfs_whandle *w)
{
	atomic_store(&w->len, w->buf->len);
	atomic_store(&w->mod_seq, atomic_fetch_add(&seq_gen, 1) + 1);
	atomic_store(&w->dirty, true);
	atomic_store(&w->settled, false);
}

/* Sets the buffer's length to len, zero-filling any growth. w->mu held. */
static int resize_locked(struct rfs_whandle *w, size_t len)
{
	size_t old;
	int rc;

	if (len > value_limit(w))
		return -EFBIG;
	rc = make_room(w, len);
	if (rc)
		return rc;
	old = w->buf->len;
	if (len > old)
		memset(w->buf->data + old, 0, len - old);
	w->buf->len = len;
	return 0;
}

int rfs_whandle_write(struct rfs_handle *h, const char *data, size_t size,
		      off_t off)
{
	struct rfs_whandle *w = &h->u.w;
	uint64_t end;
	int rc = 0;

	if (off < 0)
		return -EINVAL;
	if (!size)
		return 0;
	pthread_mutex_lock(&w->mu);
	rc = w->broken;
	if (rc)
		goto out;
	if (w->append)
		off = w->buf->len;
	end = (uint64_t)off + size;
	if (end > value_limit(w)) {
		rc = w->broken = -EFBIG;
		goto out;
	}
	if (end > w->buf->len)
		rc = resize_locked(w, end);
	else
		rc = make_room(w, w->buf->len);
	if (rc)
		goto out;
	memcpy(w->buf->data + off, data, size);
	mark_changed_locked(w);
out:
	pthread_mutex_unlock(&w->mu);
	return rc;
}

int rfs_whandle_truncate(struct rfs_handle *h, off_t size)
{
	struct rfs_whandle *w = &h->u.w;
	int rc;

	if (size < 0)
		return -EINVAL;
	pthread_mutex_lock(&w->mu);
	rc = w->broken;
	if (!rc && (uint64_t)size > value_limit(w))
		rc = w->broken = -EFBIG;
	if (!rc)
		rc = resize_locked(w, size);
	if (!rc)
		mark_changed_locked(w);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

struct rfs_wbuf *rfs_whandle_snapshot(struct rfs_handle *h)
{
	struct rfs_whandle *w = &h->u.w;
	struct rfs_wbuf *b;

	pthread_mutex_lock(&w->mu);
	b = w->buf;
	atomic_fetch_add(&b->refs, 1);
	pthread_mutex_unlock(&w->mu);
	return b;
}

/*
 * Fills a new write handle's buffer from the current value. The handle is
 * not shared yet, so the "_locked" helpers may run without w->mu.
 */
static int whandle_fill(struct rfs_whandle *w, const char *key, size_t klen,
			int flags, bool created)
{
	struct region_value *v;
	struct store_meta meta;
	size_t len;
	int rc;

	if (created) {
		/* create() stored nothing: the first commit stores the key
		 * with its data (commit.c, unborn keys); a flush before any
		 * write stores it empty (rfs_whandle_commit()) */
		w->buf = wbuf_new(0);
		return w->buf ? 0 : -ENOMEM;
	}
	if (flags & O_TRUNC) {
		/* the key must still exist: O_TRUNC alone never creates */
		rc = store_stat(rfs.st, w->rr->cfg.name, key, klen, &meta);
		if (rc)
			return rc;
		w->buf = wbuf_new(0);
		if (!w->buf)
			return -ENOMEM;
		mark_changed_locked(w);
		return 0;
	}
	rc = rfs_fetch(w->rr, key, klen, &v);
	if (rc)
		return rc;
	len = region_value_len(v);
	w->buf = wbuf_new(len);
	if (w->buf) {
		memcpy(w->buf->data, region_value_data(v), len);
		w->buf->len = len;
		atomic_store(&w->len, len);
	}
	region_value_unref(v);
	return w->buf ? 0 : -ENOMEM;
}

/*
 * ino (a key) just became a writer's: its attributes are live now (the
 * writer's fstat shows its pending size), but the kernel's entry for the
 * name still names it, so everybody's stat would. The entry goes
 * (kinval.c); the next path walk gets the inode of the committed row.
 * The OPEN's reply waits for that (ops.c); a CREATE never converts.
 */
static void drop_entry(fuse_ino_t ino, struct rfs_entry_mark *mark)
{
	struct rfs_ident id;

	if (rfs_inode_ident(ino, &id) != 0 || id.kind != RFS_I_KEY || id.gone)
		return;
	/* before the invalidation is queued: see struct rfs_entry_mark */
	if (mark)
		rfs_names_mark(id.region, id.key, id.klen, mark);
	rfs_kinval_key(id.region, id.key, id.klen);
}

/*
 * Counts a write handle on ino, which becomes a writer's inode (inode.c:
 * ESTALE, and a marker so that the kernel's retry gets a writer's inode,
 * if page-cache readers still have it open after WRITER_WAIT_MS); mark
 * (may be NULL, or already set by create()) gets the writer's inode's
 * entry mark. An inode that was not a writer's (a key that was read or
 * looked up, or one a LOOKUP promoted) is converted, and what the kernel
 * may hold of it with a long timeout is invalidated before the reply:
 * its entry (drop_entry(), through kinval.c: the OPEN's reply waits), its attributes, so that
 * the writer's fstat() and lseek(SEEK_END) ask getattr, which reports the
 * pending size; and its pages when no handle that can read has it open,
 * so that it can later serve the committed row from an empty page cache
 * (inode.c, "promotion"). Sent from the OPEN handler: attributes are a
 * counter and a timestamp under the kernel inode's spinlock; pages are
 * locked only by page I/O, which needs an open file that can read, and
 * none is open (the kernel sends RELEASE after its file's page I/O; a
 * reader that opens meanwhile is counted, and in the single-threaded
 * loop cannot even open until we reply). So it cannot deadlock with the
 * OPEN the kernel is waiting for (fuse_reverse_inval_inode).
 */
static int enter_writer(fuse_ino_t ino, pid_t pid, bool readable,
			struct rfs_entry_mark *mark, bool *dropped)
{
	struct rfs_wopen wo;
	unsigned waited;
	int rc;

	/*
	 * An inode that is not a writer's is converted here when no page-
	 * cache reader has it open (below: its entry and attributes are
	 * invalidated before the reply), at once: refusing it with ESTALE
	 * first made the kernel retry with three LOOKUPs and another OPEN,
	 * or, since the wait below, slept 1 ms per rewrite of a key that had
	 * been read.
	 */
	rc = rfs_inode_open_write(ino, pid, readable, &wo);
	/*
	 * Page-cache readers have the inode open. The kernel retries an open
	 * that got ESTALE only once, and this may be that retry (another
	 * reader's LOOKUP can hand it the same inode), so wait a little for
	 * those readers to close instead: from the refusal on, new read opens
	 * of the inode are served direct (inode.c, draining), so they drain.
	 * No lock is held while waiting. Past WRITER_WAIT_MS, ESTALE.
	 */
	for (waited = 0; rc == -ESTALE && waited < WRITER_WAIT_MS; waited++) {
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
		rc = rfs_inode_open_write(ino, pid, readable, &wo);
	}
	if (rc == -ESTALE)
		rfs_log(RFS_LOG_DEBUG,
			"open for writing: inode %llu has "
			"page-cache readers: ESTALE, the kernel retries",
			(unsigned long long)ino);
	if (!rc && mark && !mark->valid)
		rfs_inode_get_mark(ino, mark);
	if (rc || wo.inval == RFS_INVAL_NONE)
		return rc;
	/* a LOOKUP promoted it meanwhile: converted, as before the scheme */
	drop_entry(ino, mark);
	if (dropped)
		*dropped = true;
	if (wo.inval == RFS_INVAL_ATTR)
		fuse_lowlevel_notify_inval_inode(rfs.se, ino, -1, 0);
	else if (fuse_lowlevel_notify_inval_inode(rfs.se, ino, 0, 0) == 0)
		rfs_inode_cleaned(ino, wo.gen);
	return 0;
}

int rfs_truncate_enter(fuse_ino_t ino, pid_t pid, struct rfs_entry_mark *mark)
{
	int rc;

	mark->valid = false;
	rc = enter_writer(ino, pid, false, mark, NULL);

	if (!rc)
		rfs_inode_close_write(ino, false);
	return rc;
}

/*
 * Fills w and attaches it to its inode, with the inode's name locked
 * (shared) unless the caller (create()) holds it already (locked): an unlink or a rename cannot come
 * between the check that the inode still has its name and the fill from
 * that name's row. A gone inode (the kernel resolved the name just before
 * an unlink or a rename replaced it) gets ESTALE: the kernel walks the
 * path again (do_filp_open's retry with LOOKUP_REVAL) and the open lands
 * on what the name is now, or creates it with O_CREAT, either a serial
 * order; opening the gone inode instead would fail O_CREAT|O_TRUNC with
 * ENOENT.
 */
static int whandle_attach(struct rfs_handle *h, const char *key, size_t klen,
			  int flags, bool created, bool locked)
{
	struct rfs_whandle *w = &h->u.w;
	struct rfs_names l = {.n = 0};
	struct rfs_ident id;
	int rc = 0;

	if (!locked) {
		rc = rfs_names_lock_ino(&l, w->ino, false, &id);
		if (!rc && id.gone)
			rc = -ESTALE;
		key = id.key;
		klen = id.klen;
		/* another writer's created key: its empty row, as before */
		if (!rc && rfs_unborn_is(id.region, key, klen)) {
			rfs_names_unlock(&l);
			rc = rfs_unborn_settle(id.region, key, klen);
			if (!rc)
				return whandle_attach(h, key, klen, flags,
						      created, locked);
			return rc;
		}
	}
	if (!rc)
		rc = whandle_fill(w, key, klen, flags, created);
	/*
	 * The key is gone from the store though the kernel still had an
	 * entry for it (an outside DELETE the change feed has not applied
	 * yet): the kernel walks the path again and finds it missing, and an
	 * open(O_CREAT) then creates it (OPEN does not say O_CREAT).
	 */
	if (rc == -ENOENT && !created)
		rc = -ESTALE;
	if (!rc)
		rc = rfs_inode_attach(w->ino, h);
	rfs_names_unlock(&l);
	return rc;
}

int rfs_whandle_open(struct rfs_region *rr, fuse_ino_t ino, pid_t pid,
		     const char *key, size_t klen, int flags,
		     struct rfs_unborn *created, bool locked,
		     struct rfs_handle **out)
{
	bool readable = (flags & O_ACCMODE) != O_WRONLY;
	struct rfs_handle *h;
	struct rfs_whandle *w;
	bool dropped = false;
	int rc;

	struct rfs_entry_mark mark = {.valid = false};

	*out = NULL;
	if (locked) /* create(): the CREATE's reply makes the entry, a writer's */
		rfs_names_mark(rr->cfg.name, key, klen, &mark);
	rc = enter_writer(ino, pid, readable, &mark, &dropped);
	if (rc)
		return rc;
	h = rfs_handle_new(RFS_H_WRITE);
	if (!h) {
		rfs_inode_close_write(ino, readable);
		return -ENOMEM;
	}
	w = &h->u.w;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->append = flags & O_APPEND;
	w->readable = readable;
	w->unnamed = dropped;
	atomic_fetch_add(&rr->refs, 1);
	w->rr = rr;
	w->ino = ino; /* from here on its release uncounts it */
	w->mark = mark;
	rc = whandle_attach(h, key, klen, flags, created != NULL, locked);
	if (rc) {
		rfs_handle_free(h);
		return rc;
	}
	w->ub = created; /* the handle's from now on */
	*out = h;
	return 0;
}

/* Waits for this handle's commit in progress, if any. w->mu held. */
static void wait_commit_locked(struct rfs_whandle *w)
{
	while (w->committing)
		pthread_cond_wait(&w->cond, &w->mu);
}

/* Stores b under the inode's current name (commit.c). 0 if it is gone. */
static int commit_buf(struct rfs_whandle *w, const struct rfs_wbuf *b,
		      bool durable)
{
	unsigned flags = 0;
	bool cache;

	if (durable || w->rr->cfg.durable)
		flags |= STORE_DURABLE;
	/* the committed value may stay in the cache (commit.c) if the memory
	 * limit has room for it, as for a load (not a refusal if not: the
	 * write goes on, only the install is skipped) */
	cache = mem_room(b->len);
	return rfs_commit_handle(w->ino, b->data, b->len, flags, cache,
				 &w->mark, w->ub);
}

/*
 * A key this handle's create() made and that no commit of it filled, now
 * that a commit failed (or the handle broke): it goes again, so that the
 * open(O_CREAT) whose close() failed leaves no key. Unborn (commit.c),
 * nothing was stored; if someone else needed its row meanwhile (a settle
 * stored an empty one), that row is removed unless it changed since.
 * Called at the failed flush, before close() returns (a reader must not
 * find the key between the close() and the RELEASE), and again at the
 * RELEASE (a no-op then).
 */
static void drop_created(struct rfs_whandle *w)
{
	struct rfs_ident id;
	uint64_t version;
	bool failed;

	pthread_mutex_lock(&w->mu);
	failed = w->ub && !w->committed && (w->broken || w->last_err);
	pthread_mutex_unlock(&w->mu);
	if (!failed)
		return;
	if (rfs_unborn_drop(w->ub, &version, &w->mark) == -EEXIST) {
		if (rfs_inode_ident(w->ino, &id) == 0 && !id.gone)
			rfs_commit_delete_created(id.region, id.key, id.klen,
						  version, &w->mark);
		return;
	}
	/*
	 * It never existed outside this handle: like an open(O_CREAT) that
	 * failed, the handle is done, and its later writes and close() get
	 * the error (they would store nothing: its inode is gone now).
	 */
	pthread_mutex_lock(&w->mu);
	if (!w->broken)
		w->broken = w->last_err;
	pthread_mutex_unlock(&w->mu);
}

void rfs_whandle_release(struct rfs_handle *h)
{
	drop_created(&h->u.w);
}

int rfs_whandle_commit(struct rfs_handle *h, bool durable)
{
	struct rfs_whandle *w = &h->u.w;
	struct rfs_wbuf *b;
	uint64_t seq;
	int rc;

	pthread_mutex_lock(&w->mu);
	wait_commit_locked(w);
	if (w->broken || !atomic_load(&w->dirty)) {
		rc = w->broken ? w->broken : w->last_err;
		/*
		 * Created here, nothing written yet, and a close() (the
		 * shell's after dup2(), touch's) or fsync() that must not
		 * return before the key is stored: its empty row, as the
		 * create stored it before (a settle: the handle has not
		 * committed, so a failure of its writes still removes it).
		 */
		if (!rc && w->ub && !w->committed) {
			w->committing = true; /* no name lock under mu */
			pthread_mutex_unlock(&w->mu);
			rc = rfs_unborn_settle_own(w->ub);
			pthread_mutex_lock(&w->mu);
			w->committing = false;
			w->last_err = rc;
			if (!atomic_load(&w->dirty))
				atomic_store(&w->settled, rc == 0);
			pthread_cond_broadcast(&w->cond);
		}
		pthread_mutex_unlock(&w->mu);
		if (rc)
			drop_created(w);
		return rc;
	}
	b = w->buf;
	atomic_fetch_add(&b->refs, 1);
	seq = atomic_load(&w->mod_seq);
	w->committing = true;
	pthread_mutex_unlock(&w->mu);

	rc = commit_buf(w, b, durable);

	pthread_mutex_lock(&w->mu);
	w->committing = false;
	w->last_err = rc;
	w->committed |= rc == 0;
	/*
	 * Failed: what was written up to now is dropped, not kept for a
	 * retry. The close() that gets the error is the writer's only
	 * answer; a later commit of the same bytes (the RELEASE after that
	 * close, another descriptor's close) would store a value whose
	 * close() failed, perhaps over a value another writer committed
	 * meanwhile. Later flushes without new writes return the error
	 * again; new writes make the whole buffer dirty again.
	 */
	if (atomic_load(&w->mod_seq) == seq) {
		atomic_store(&w->dirty, false);
		atomic_store(&w->settled, rc == 0);
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
	rfs_wbuf_unref(b);
	if (rc)
		drop_created(w);
	return rc;
}
