/*
 * inode.c - inode numbers, the kernel's lookup counts, and what the kernel
 * may cache of each key inode.
 *
 * The kernel names every file by a 64-bit node id that we hand out in
 * LOOKUP/CREATE replies, counts how many times we did (nlookup), and gives
 * the count back with FORGET when it drops the inode. This table maps a
 * number to what it names, (kind, region, key), and back.
 *
 * Numbers: 1..6 are fixed (the root and .regionfs/ with its fixed files);
 * every other inode gets the next value of a 64-bit counter, so a number is
 * never reused for anything else (2^64 lookups do not happen), which is why
 * the generation is always 0 and a stale number can only miss.
 *
 * Immutable inodes per row. A key inode stands for one row of the key:
 * (size, mtime_ns, version) as store_stat() saw it at the LOOKUP that made
 * the inode. Every committed change of a key (our write, a rename onto it,
 * an outside write) changes that triple, so the next LOOKUP of the name
 * makes a new inode, and the content of one RFS_K_PAGE inode never
 * changes: the kernel may keep its pages and attributes without any
 * invalidation (ops.c has the scheme and its cost). Only the triple can
 * be compared at LOOKUP; two rows with one triple and different bytes
 * (an outside writer that deletes and inserts a key within one
 * millisecond, same size: version 1 both times) are told apart below by
 * the values themselves.
 *
 * Classes (enum rfs_kclass):
 *  - RFS_K_PAGE: opened read-only with keep_cache. Its page cache must
 *    only ever hold the bytes of one value: the first value a page-cache
 *    handle was opened with is the inode's anchor (its load serial,
 *    the value's tag, handle.c), and a later open gets the page cache only with
 *    that same value; while page-cache handles are open the inode holds a
 *    reference on it (pval) and every new read open is served pval, so
 *    all its readers share one value. An open that cannot be served so
 *    (the cache holds a newer row, an older one the change feed has not
 *    invalidated yet, or a reload of the row: a different value whose
 *    bytes we cannot compare) makes the inode RFS_K_DIRECT when no page-
 *    cache handle is open, and gets the cache's value with direct I/O:
 *    from then on nobody reads the inode's page cache, so what a direct
 *    handle's mmap(MAP_PRIVATE) may put there harms no one, and the next
 *    LOOKUP makes a fresh inode. Serving pval, the inode's own row, is
 *    never stale while the inode is current: the kernel reached it
 *    through an entry that a LOOKUP made when this row was the name's,
 *    and every later row (a commit's, or an outside change the change
 *    feed applied) first makes the inode not current (rfs_inode_changed)
 *    and then has that entry dropped (kinval.c) before the commit's
 *    close() returns. An open of an inode that is not current (through
 *    an entry not dropped yet) gets the cache's value with direct I/O.
 *  - RFS_K_DIRECT: immutable attributes, every open is direct I/O.
 *  - RFS_K_WRITE: an inode a writer opened. A writer changes the kernel's
 *    inode under every other opener: open(O_TRUNC) sets its size to 0 and
 *    truncates its page cache, a write past the end grows the size, its
 *    fstat reports the pending size. So a write open makes a PAGE or
 *    DIRECT inode RFS_K_WRITE (direct I/O for everyone, attributes asked
 *    for every time, as before this scheme) only if no page-cache handle
 *    has it open; otherwise the open fails with ESTALE, which makes the
 *    kernel walk the path again with LOOKUP_REVAL (do_filp_open), and we
 *    remember (pid, name) in a marker so that this thread's next LOOKUP of
 *    the name returns an RFS_K_WRITE inode, which the retried open then
 *    gets. The kernel stamps every request with the caller's thread id,
 *    so the marker is exact for the retry; a marker left behind (a caller
 *    that never retried, pid 0 for callers in another pid namespace) only
 *    makes some later LOOKUPs of that name by that pid direct. At most
 *    MARKERS are kept (the oldest is dropped); a retry finds its marker
 *    unless that many other write opens were refused in between, which
 *    would cost the caller an ESTALE error. A writer that holds a page-
 *    cache reader of the same file itself and reopens it for writing by
 *    /proc/self/fd gets ESTALE: there is no path to walk again.
 *
 * Filling: the first read needs no READ. The open that anchors a PAGE
 * inode (its first page-cache open; the caller asks for it with fill, for
 * a value that is neither empty nor large) while no other handle has the
 * inode open gets *fill: the caller (ops.c) stores the value into the
 * kernel's page cache (FUSE_NOTIFY_STORE) before it replies to the OPEN,
 * then calls rfs_inode_filled(). Only the anchor's bytes are ever stored,
 * the value the inode's pages are entitled to, and only into pages the
 * kernel cannot hold yet: an inode is anchored once (a LOOKUP's new
 * inode, a promoted one), and an unanchored PAGE inode has never been
 * opened for reading. While filling, every other read open of the inode
 * waits (-EAGAIN, handle.c retries), so no other file of it exists until
 * the store is done: the store locks each page it fills, and a page
 * locked by a read of another file (readahead, or the fault of a direct
 * handle's private mapping) stays locked until its READ is answered,
 * which would need a worker that may be waiting in a store itself. With
 * no other file open nothing holds a page lock of the inode across a
 * request, so the store cannot wait on the daemon. A writer's open meets
 * the filling handle like any page-cache reader (ESTALE after its wait).
 *
 * Promotion: a read after a write keeps the kernel's dentry. A new inode
 * per row costs a read after a write one more LOOKUP and a FORGET: the
 * kernel's dentry still names the writer's inode, the LOOKUP that
 * revalidates it returns another number, and the kernel drops the dentry
 * and looks the name up again. Instead, a writer's inode that can have
 * no page in the kernel's cache ("pristine") and that no handle has open
 * becomes the RFS_K_PAGE inode of the row the name has at the next
 * LOOKUP. Pages enter a FUSE inode's cache only through READs on an open
 * file of it (read, fault, readahead; the RELEASE waits for them) and
 * through the store that fills it at a page-cache open, before that
 * open's reply (above), so an inode is pristine from its creation until a
 * handle that can read opens it (counted in nreaders and rgen); READ on a
 * write-only handle is refused (ops.c), so posix_fadvise(WILLNEED), which
 * the kernel allows on one, fills nothing. A page or direct inode that a
 * writer opens with no readable handle open has all its pages dropped by
 * the open (ops.c, RFS_INVAL_ALL) and is pristine again unless a reader
 * came in meanwhile (rfs_inode_cleaned checks rgen). The LOOKUP that promotes sends the
 * row's attributes; if a concurrent change of the kernel inode makes the
 * kernel ignore them, the writer's zero attribute timeout still holds and
 * the next use asks getattr, which answers from the row.
 *
 * Names: two hash tables share the nodes: by_ino (every node) and by_name
 * (every node that still has a name: all versions of a key the kernel
 * holds). One node per name is current: the one LOOKUP may return.
 * Renames and unlinks act on every named node of a name: rename moves
 * them to the new name, so a file opened for writing before the rename
 * commits to the new name at close; unlink and a rename's replaced target
 * make them "gone": out of by_name, but in by_ino until the kernel forgets
 * them; getattr on one reports nlink 0 (and a writer's last size), and
 * write handles on it commit nothing (POSIX: data written to an unlinked
 * file vanishes with it). The change feed and every commit of ours make
 * a key's current node not current (rfs_inode_changed): after a change
 * the next LOOKUP
 * makes a new inode, even if the triple did not change.
 *
 * A node is freed when its lookup count is 0 and no handle holds it.
 * Handles hold their inode because (1) getattr must report the size a
 * writer sees, (2) the counts above must stay right, and (3) RELEASE is
 * asynchronous in the kernel and may be processed after the FORGET of the
 * same inode.
 *
 * Locking: one rwlock, writer-preferring so that creations and forgets are
 * not starved, protects both tables, every node's links, names, gone,
 * current, last and writer list. nlookup is an atomic so that the common
 * operations - LOOKUP of a name that already has an inode, GETATTR, OPEN,
 * RELEASE - take the lock shared only. The fields of a key node marked
 * "N" (class, open handles, anchor, pristine) are changed under the
 * shared lock plus the node's lock (one of NODE_LOCKS mutexes picked by
 * number), or under the exclusive lock alone (promotion); cls is an
 * atomic besides, so LOOKUP may read it without the node lock. The markers have their own mutex, a
 * leaf. Lock order: a handle's mu -> this lock -> node lock. Under these
 * locks only the atomics of write handles are read and references on
 * values taken (never dropped: a value's last unref frees it). Every
 * request costs the kernel 25-30 us (DESIGN.md), a shared acquisition
 * tens of ns; striping was considered and rejected because a rename moves
 * nodes between stripes, which needs both stripes and the nodes' own, in
 * an order only known after the lookup.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fs.h"

#define MIN_BUCKETS 1024
#define NODE_LOCKS  64 /* striped node locks: a power of two */
#define MARKERS	    RFS_INODE_MARKERS

struct inode {
	struct inode *ino_next;	 /* chain in by_ino */
	struct inode *name_next; /* chain in by_name (named only) */
	fuse_ino_t ino;
	atomic_uint_fast64_t nlookup; /* kernel references */
	uint64_t hash;		      /* of (kind, region, key) */
	enum rfs_ikind kind;
	bool gone;		    /* no name any more */
	bool current;		    /* the one LOOKUP returns for its name */
	bool last_valid;	    /* last is set */
	struct store_meta last;	    /* a gone key's last row */
	struct store_meta row;	    /* immutable: the row it was made for */
	atomic_int cls;		    /* N: enum rfs_kclass of a key */
	bool pristine;		    /* N: it can have no page cached */
	bool wanted;		    /* N: a writer's open is on its way */
	bool draining;		    /* N: a writer waits for the page-cache
				     * handles to close: new read opens
				     * are served direct */
	unsigned nreaders;	    /* N: open handles that can read */
	unsigned preaders;	    /* N: of which page-cache handles */
	unsigned nwriters;	    /* N: open write handles */
	uint64_t rgen;		    /* N: opens that could read, ever */
	bool anchored;		    /* N: anchor is set */
	uint64_t anchor;	    /* N: serial of the value in its pages */
	struct region_value *pval;  /* N: that value while preaders */
	bool filling;		    /* N: an open is storing pval into the
				     * kernel's page cache (ops.c): other
				     * read opens wait */
	bool kpin;		    /* N: the kernel's inode holds pval
				     * without a handle (one preader;
				     * zero-request opens), until FORGET */
	struct rfs_pin kpin_pin;    /* N: pval while kpin, counted in
				     * memory_pinned_bytes */
	struct rfs_handle *writers; /* open write handles */
	struct rfs_entry_mark mark; /* a writer's: of the LOOKUP that made it */
	size_t rlen;		    /* region name length */
	size_t klen;
	char *name; /* region NUL key NUL, malloc()ed */
};

struct table {
	struct inode **b;
	size_t mask; /* buckets - 1 */
};

/* A refused write open: pid's next LOOKUP of the name gets a writer. */
struct marker {
	bool used;
	pid_t pid;
	uint64_t hash;
	char region[REGION_MAX_NAME + 1];
	char key[REGION_MAX_KEY];
	size_t klen;
};

static struct {
	pthread_rwlock_t lock;
	struct table by_ino;	    /* L: lock */
	struct table by_name;	    /* L: lock */
	size_t count;		    /* L: lock; nodes */
	uint64_t next_ino;	    /* L: lock */
	uint64_t seed;		    /* immutable after init */
	atomic_uint_fast64_t nodes; /* gauge, read without the lock */
	pthread_mutex_t nlock[NODE_LOCKS];
} it;

static struct {
	pthread_mutex_t lock;
	struct marker m[MARKERS]; /* L: lock */
	unsigned next;		  /* L: lock; the slot to reuse next */
	atomic_uint used;	  /* markers in use, read without the lock */
} mk = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- locks and invariants ------------------------------------------------- */

/*
 * In debug builds (asserts are on in debugoptimized too) every thread
 * knows which of the table's locks it holds, so that a *_locked function
 * asserts the lock it documents, and every release of a node lock checks
 * the node's invariants (check_node_locked()).
 */
#ifndef NDEBUG
static _Thread_local char held_table; /* 0, 'r' or 'w' */
static _Thread_local int held_nodes;
#define ASSERT_TABLE() assert(held_table)
#define ASSERT_WRITE() assert(held_table == 'w')
/* a node's "N" fields: shared lock + node lock, or the exclusive lock */
#define ASSERT_NODE()                                                          \
	assert(held_table == 'w' || (held_table && held_nodes > 0))
#define HELD_TABLE(x) (held_table = (x))
#define HELD_NODES(d) (held_nodes += (d))
#else
#define ASSERT_TABLE() ((void)0)
#define ASSERT_WRITE() ((void)0)
#define ASSERT_NODE()  ((void)0)
#define HELD_TABLE(x)  ((void)0)
#define HELD_NODES(d)  ((void)0)
#endif

static void table_rdlock(void)
{
	pthread_rwlock_rdlock(&it.lock);
	HELD_TABLE('r');
}

static void table_wrlock(void)
{
	pthread_rwlock_wrlock(&it.lock);
	HELD_TABLE('w');
}

static void table_unlock(void)
{
	HELD_TABLE(0);
	pthread_rwlock_unlock(&it.lock);
}

static void node_enter(pthread_mutex_t *mu)
{
	pthread_mutex_lock(mu);
	HELD_NODES(1);
}

static void node_leave(pthread_mutex_t *mu)
{
	HELD_NODES(-1);
	pthread_mutex_unlock(mu);
}

/* A name's hash: a random basis per process, and the kind. */
static uint64_t name_hash(enum rfs_ikind kind, const char *region,
			  const void *key, size_t klen)
{
	return rfs_name_hash(it.seed ^ (uint64_t)kind, region, key, klen);
}

static int table_init(struct table *t, size_t n)
{
	t->b = calloc(n, sizeof(*t->b));
	if (!t->b)
		return -ENOMEM;
	t->mask = n - 1;
	return 0;
}

static struct inode **ino_slot(fuse_ino_t ino)
{
	return &it.by_ino.b[rfs_hash_mix(ino) & it.by_ino.mask];
}

static struct inode **name_slot(uint64_t hash)
{
	return &it.by_name.b[hash & it.by_name.mask];
}

static pthread_mutex_t *node_lock(const struct inode *n)
{
	return &it.nlock[rfs_hash_mix(n->ino) & (NODE_LOCKS - 1)];
}

int rfs_inode_init(void)
{
	pthread_rwlockattr_t a;
	int rc, i;

	if (getrandom(&it.seed, sizeof(it.seed), 0) != sizeof(it.seed))
		it.seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)&it;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(
		&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	rc = -pthread_rwlock_init(&it.lock, &a);
	pthread_rwlockattr_destroy(&a);
	if (rc)
		return rc;
	for (i = 0; i < NODE_LOCKS; i++)
		pthread_mutex_init(&it.nlock[i], NULL);
	it.next_ino = RFS_INO_DYNAMIC;
	if (table_init(&it.by_ino, MIN_BUCKETS) ||
	    table_init(&it.by_name, MIN_BUCKETS)) {
		rfs_inode_fini();
		return -ENOMEM;
	}
	return 0;
}

static void node_free(struct inode *n)
{
	rfs_pin_del(&n->kpin_pin);
	region_value_unref(n->pval);
	free(n->name);
	free(n);
}

void rfs_inode_fini(void)
{
	struct inode *n, *next;
	size_t i;

	if (!it.by_ino.b)
		goto out;
	for (i = 0; i <= it.by_ino.mask; i++) {
		for (n = it.by_ino.b[i]; n; n = next) {
			next = n->ino_next;
			node_free(n);
		}
	}
out:
	free(it.by_ino.b);
	free(it.by_name.b);
	it.by_ino.b = NULL;
	it.by_name.b = NULL;
	it.count = 0;
	atomic_store(&it.nodes, 0);
	for (i = 0; i < NODE_LOCKS; i++)
		pthread_mutex_destroy(&it.nlock[i]);
	pthread_rwlock_destroy(&it.lock);
	/* a later rfs_inode_init() starts afresh (the unit tests) */
	pthread_mutex_lock(&mk.lock);
	memset(mk.m, 0, sizeof(mk.m));
	mk.next = 0;
	atomic_store(&mk.used, 0);
	pthread_mutex_unlock(&mk.lock);
}

static bool node_is(const struct inode *n, uint64_t hash, enum rfs_ikind kind,
		    const char *region, size_t rlen, const void *key,
		    size_t klen)
{
	return n->hash == hash && n->kind == kind && n->rlen == rlen &&
	       n->klen == klen && memcmp(n->name, region, rlen) == 0 &&
	       memcmp(n->name + rlen + 1, key, klen) == 0;
}

/* A named node for a name: the current one, or any. Lock held (either). */
static struct inode *find_name_locked(enum rfs_ikind kind, const char *region,
				      const void *key, size_t klen,
				      bool current)
{
	uint64_t h = name_hash(kind, region, key, klen);
	size_t rlen = strlen(region);
	struct inode *n;

	ASSERT_TABLE();
	for (n = *name_slot(h); n; n = n->name_next)
		if (node_is(n, h, kind, region, rlen, key, klen) &&
		    (n->current || !current))
			return n;
	return NULL;
}

static struct inode *find_ino_locked(fuse_ino_t ino)
{
	struct inode *n;

	ASSERT_TABLE();
	for (n = *ino_slot(ino); n; n = n->ino_next)
		if (n->ino == ino)
			return n;
	return NULL;
}

static void name_unlink_locked(struct inode *n)
{
	struct inode **pp = name_slot(n->hash);

	ASSERT_WRITE();
	while (*pp && *pp != n)
		pp = &(*pp)->name_next;
	if (*pp)
		*pp = n->name_next;
	n->name_next = NULL;
}

static void name_link_locked(struct inode *n)
{
	struct inode **pp = name_slot(n->hash);

	ASSERT_WRITE();
	n->name_next = *pp;
	*pp = n;
}

/* Doubles both tables when they get crowded; failure just keeps chains. */
static void grow_locked(void)
{
	struct table ni, nn;
	struct inode *n, *next;
	size_t i, size = (it.by_ino.mask + 1) * 2;

	ASSERT_WRITE();
	if (it.count <= it.by_ino.mask + 1)
		return;
	if (table_init(&ni, size))
		return;
	if (table_init(&nn, size)) {
		free(ni.b);
		return;
	}
	for (i = 0; i <= it.by_ino.mask; i++) {
		for (n = it.by_ino.b[i]; n; n = next) {
			next = n->ino_next;
			n->ino_next = ni.b[rfs_hash_mix(n->ino) & ni.mask];
			ni.b[rfs_hash_mix(n->ino) & ni.mask] = n;
			if (n->gone)
				continue;
			n->name_next = nn.b[n->hash & nn.mask];
			nn.b[n->hash & nn.mask] = n;
		}
	}
	free(it.by_ino.b);
	free(it.by_name.b);
	it.by_ino = ni;
	it.by_name = nn;
}

static char *make_name(const char *region, size_t rlen, const void *key,
		       size_t klen)
{
	char *p = malloc(rlen + klen + 2);

	if (!p)
		return NULL;
	memcpy(p, region, rlen + 1);
	memcpy(p + rlen + 1, key, klen);
	p[rlen + 1 + klen] = '\0';
	return p;
}

/* What a new node is made for. */
struct node_init {
	enum rfs_ikind kind;
	const char *region;
	const void *key;
	size_t klen;
	const struct store_meta *row; /* keys only */
	enum rfs_kclass cls;
	bool current;
};

/* Creates a named node with one lookup. Write lock held. */
static struct inode *create_locked(const struct node_init *ni)
{
	struct inode *n = calloc(1, sizeof(*n));

	ASSERT_WRITE();
	if (!n)
		return NULL;
	n->rlen = strlen(ni->region);
	n->klen = ni->klen;
	n->name = make_name(ni->region, n->rlen, ni->key, ni->klen);
	if (!n->name) {
		free(n);
		return NULL;
	}
	n->kind = ni->kind;
	n->hash = name_hash(ni->kind, ni->region, ni->key, ni->klen);
	if (ni->row)
		n->row = *ni->row;
	atomic_init(&n->cls, (int)ni->cls);
	n->pristine = true;
	n->wanted = ni->cls == RFS_K_WRITE;
	n->current = ni->current;
	n->ino = it.next_ino++;
	atomic_init(&n->nlookup, 1);
	n->ino_next = *ino_slot(n->ino);
	*ino_slot(n->ino) = n;
	name_link_locked(n);
	it.count++;
	atomic_fetch_add(&it.nodes, 1);
	grow_locked();
	return n;
}

int rfs_inode_lookup(enum rfs_ikind kind, const char *region, fuse_ino_t *ino)
{
	struct node_init ni = {kind, region, "", 0, NULL, RFS_K_DIRECT, true};
	struct inode *n;
	int rc = 0;

	table_rdlock();
	n = find_name_locked(kind, region, "", 0, true);
	if (n) {
		atomic_fetch_add(&n->nlookup, 1);
		*ino = n->ino;
	}
	table_unlock();
	if (n)
		return 0;

	table_wrlock();
	n = find_name_locked(kind, region, "", 0, true);
	if (n)
		atomic_fetch_add(&n->nlookup, 1);
	else
		n = create_locked(&ni);
	if (n)
		*ino = n->ino;
	else
		rc = -ENOMEM;
	table_unlock();
	return rc;
}

/* ---- markers: refused write opens ---------------------------------------- */

static bool marker_is(const struct marker *m, pid_t pid, uint64_t hash,
		      const char *region, const void *key, size_t klen)
{
	return m->used && m->pid == pid && m->hash == hash && m->klen == klen &&
	       strcmp(m->region, region) == 0 && memcmp(m->key, key, klen) == 0;
}

/* Finds pid's marker for the name; take: and removes it. */
static bool marker_find(pid_t pid, const char *region, const void *key,
			size_t klen, bool take)
{
	uint64_t h;
	bool found = false;
	unsigned i;

	if (!atomic_load(&mk.used))
		return false; /* the common case: no refused open */
	h = name_hash(RFS_I_KEY, region, key, klen);
	pthread_mutex_lock(&mk.lock);
	for (i = 0; i < MARKERS && !found; i++) {
		if (!marker_is(&mk.m[i], pid, h, region, key, klen))
			continue;
		found = true;
		if (take) {
			mk.m[i].used = false;
			atomic_fetch_sub(&mk.used, 1);
		}
	}
	pthread_mutex_unlock(&mk.lock);
	return found;
}

/*
 * Does any thread's marker name n's name? While one does, a refused
 * writer's retry may still be on its way to a writer inode of the name,
 * so none of them may be promoted (is_promotable()): one "wanted" flag per
 * inode cannot count two such retries. Takes the markers' mutex (lock
 * order: it.lock, then mk.lock).
 */
static bool marker_names(const struct inode *n)
{
	const char *key = n->name + n->rlen + 1;
	bool found = false;
	unsigned i;

	if (!atomic_load(&mk.used))
		return false;
	pthread_mutex_lock(&mk.lock);
	for (i = 0; i < MARKERS && !found; i++) {
		const struct marker *m = &mk.m[i];

		found = m->used && m->hash == n->hash && m->klen == n->klen &&
			strcmp(m->region, n->name) == 0 &&
			memcmp(m->key, key, n->klen) == 0;
	}
	pthread_mutex_unlock(&mk.lock);
	return found;
}

static void marker_add(pid_t pid, const char *region, const void *key,
		       size_t klen)
{
	struct marker *m;

	if (marker_find(pid, region, key, klen, false))
		return;
	pthread_mutex_lock(&mk.lock);
	m = &mk.m[mk.next];
	mk.next = (mk.next + 1) % MARKERS;
	if (!m->used)
		atomic_fetch_add(&mk.used, 1);
	m->used = true;
	m->pid = pid;
	m->hash = name_hash(RFS_I_KEY, region, key, klen);
	strcpy(m->region, region);
	memcpy(m->key, key, klen);
	m->klen = klen;
	pthread_mutex_unlock(&mk.lock);
}

/*
 * A key node's counts and class agree: page-cache readers are readers;
 * the page readers' value is held exactly while there are page readers,
 * who exist only on a page-cache inode; an inode with open writers is a
 * writer's. Node lock (or the exclusive table lock) held.
 */
static void check_node_locked(const struct inode *n)
{
	ASSERT_NODE();
	assert(n->preaders <= n->nreaders);
	assert((n->pval != NULL) == (n->preaders > 0));
	assert(!n->preaders || atomic_load(&n->cls) == RFS_K_PAGE);
	assert(!n->nwriters || atomic_load(&n->cls) == RFS_K_WRITE);
	assert(!n->filling || n->preaders);
	(void)n;
}

/*
 * Inode ino with the table lock held shared and its node lock (*mu) held,
 * or NULL, with neither held, if the daemon does not know ino. Ended by
 * inode_leave().
 */
static struct inode *inode_enter(fuse_ino_t ino, pthread_mutex_t **mu)
{
	struct inode *n;

	table_rdlock();
	n = find_ino_locked(ino);
	if (!n) {
		table_unlock();
		return NULL;
	}
	*mu = node_lock(n);
	node_enter(*mu);
	return n;
}

static void inode_leave(const struct inode *n, pthread_mutex_t *mu)
{
	check_node_locked(n);
	node_leave(mu);
	table_unlock();
}

/* ---- key lookups ---------------------------------------------------------- */

static bool same_row(const struct store_meta *a, const struct store_meta *b)
{
	return a->version == b->version && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns;
}

/* Does n answer a LOOKUP that found row? Lock held (either mode). */
static bool serves_row(const struct inode *n, const struct store_meta *row)
{
	return atomic_load(&n->cls) == RFS_K_PAGE && same_row(&n->row, row);
}

/* The first key node of the name for which pred holds. Lock held. */
static struct inode *find_key_locked(const char *region, const void *key,
				     size_t klen,
				     bool (*pred)(const struct inode *n))
{
	uint64_t h = name_hash(RFS_I_KEY, region, key, klen);
	size_t rlen = strlen(region);
	struct inode *n;

	ASSERT_TABLE();
	for (n = *name_slot(h); n; n = n->name_next)
		if (node_is(n, h, RFS_I_KEY, region, rlen, key, klen) &&
		    pred(n))
			return n;
	return NULL;
}

static bool is_writable(const struct inode *n)
{
	return atomic_load(&n->cls) == RFS_K_WRITE;
}

/*
 * A writer's inode that may become the page-cache inode of the name's
 * row: no page of it can be cached (pristine), no handle has it open, no
 * refused writer's retry is on its way to it. Write lock held.
 */
static bool is_promotable(const struct inode *n)
{
	return is_writable(n) && n->pristine && !n->wanted && !n->nwriters &&
	       !n->nreaders && !n->writers && !marker_names(n);
}

/* A named writable node of the name, if any. Lock held (either mode). */
static struct inode *find_writable_locked(const char *region, const void *key,
					  size_t klen)
{
	return find_key_locked(region, key, klen, is_writable);
}

/* A promotable writer's inode of the name, if any. Write lock held. */
static struct inode *find_promotable_locked(const char *region, const void *key,
					    size_t klen)
{
	return find_key_locked(region, key, klen, is_promotable);
}

/*
 * Makes n the current RFS_K_PAGE inode of row: its page cache is empty
 * and nothing can fill it but a page-cache handle (see the top). Write
 * lock held.
 */
static void promote_locked(struct inode *n, const struct store_meta *row)
{
	ASSERT_WRITE();
	atomic_store(&n->cls, RFS_K_PAGE);
	n->row = *row;
	n->anchored = false;
	n->current = true;
	check_node_locked(n);
}

/* The slow path of rfs_inode_lookup_key(). Write lock held. */
static struct inode *lookup_key_locked(const struct node_init *ni)
{
	struct inode *n, *p;

	ASSERT_WRITE();
	if (ni->cls == RFS_K_WRITE) {
		n = find_writable_locked(ni->region, ni->key, ni->klen);
		if (!n)
			return create_locked(ni);
		n->wanted = true;
		atomic_fetch_add(&n->nlookup, 1);
		return n;
	}
	n = find_name_locked(RFS_I_KEY, ni->region, ni->key, ni->klen, true);
	if (n && serves_row(n, ni->row)) {
		atomic_fetch_add(&n->nlookup, 1);
		return n;
	}
	if (n)
		n->current = false; /* another row: another inode */
	p = find_promotable_locked(ni->region, ni->key, ni->klen);
	if (!p)
		return create_locked(ni);
	promote_locked(p, ni->row);
	atomic_fetch_add(&p->nlookup, 1);
	return p;
}

int rfs_inode_lookup_key(const char *region, const void *key, size_t klen,
			 const struct store_meta *row, pid_t pid, bool write,
			 fuse_ino_t *ino, enum rfs_kclass *cls)
{
	struct node_init ni = {RFS_I_KEY, region,     key, klen,
			       row,	  RFS_K_PAGE, true};
	struct inode *n = NULL;

	if (write || marker_find(pid, region, key, klen, false)) {
		ni.cls = RFS_K_WRITE;
		ni.current = false;
	} else {
		table_rdlock();
		n = find_name_locked(RFS_I_KEY, region, key, klen, true);
		if (n && serves_row(n, row))
			atomic_fetch_add(&n->nlookup, 1);
		else
			n = NULL;
		table_unlock();
	}
	if (!n) {
		table_wrlock();
		n = lookup_key_locked(&ni);
		table_unlock();
	}
	if (!n)
		return -ENOMEM;
	*ino = n->ino; /* the number is immutable, the node may go now */
	*cls = ni.cls;
	return 0;
}

fuse_ino_t rfs_inode_peek(const char *region, const void *key, size_t klen)
{
	struct inode *n;
	fuse_ino_t ino = 0;

	table_rdlock();
	n = find_name_locked(RFS_I_KEY, region, key, klen, true);
	if (n)
		ino = n->ino;
	table_unlock();
	return ino;
}

fuse_ino_t rfs_inode_peek_dir(const char *region)
{
	struct inode *n;
	fuse_ino_t ino = 0;

	table_rdlock();
	n = find_name_locked(RFS_I_REGION, region, "", 0, true);
	if (n)
		ino = n->ino;
	table_unlock();
	return ino;
}

/* The size an attached writer with uncommitted data shows. Lock held. */
static void pending_locked(const struct inode *n, struct rfs_ident *out)
{
	const struct rfs_handle *h;
	uint64_t best = 0;

	ASSERT_TABLE();
	out->pending = false;
	for (h = n->writers; h; h = h->u.w.inode_next) {
		const struct rfs_whandle *w = &h->u.w;
		uint64_t seq = atomic_load(&w->mod_seq);

		if (!atomic_load(&w->dirty) || (out->pending && seq < best))
			continue;
		best = seq;
		out->pending = true;
		out->pending_size = atomic_load(&w->len);
	}
}

int rfs_inode_ident(fuse_ino_t ino, struct rfs_ident *out)
{
	struct inode *n;

	table_rdlock();
	n = find_ino_locked(ino);
	if (n) {
		out->kind = n->kind;
		out->gone = n->gone;
		memcpy(out->region, n->name, n->rlen + 1);
		memcpy(out->key, n->name + n->rlen + 1, n->klen + 1);
		out->klen = n->klen;
		out->cls = (enum rfs_kclass)atomic_load(&n->cls);
		out->row = n->row;
		out->last = n->last;
		out->last_valid = n->last_valid;
		pending_locked(n, out);
	}
	table_unlock();
	return n ? 0 : -ENOENT;
}

/* ---- lifetime ------------------------------------------------------------- */

/* Unlinks and frees n if nothing holds it. Write lock held. */
static void maybe_free_locked(struct inode *n)
{
	struct inode **pp;

	ASSERT_WRITE();
	if (atomic_load(&n->nlookup) || n->writers || n->nreaders ||
	    n->nwriters)
		return;
	if (!n->gone)
		name_unlink_locked(n);
	for (pp = ino_slot(n->ino); *pp != n; pp = &(*pp)->ino_next)
		;
	*pp = n->ino_next;
	it.count--;
	atomic_fetch_sub(&it.nodes, 1);
	node_free(n);
}

/* Frees the node numbered ino if nothing holds it any more. */
static void free_if_unused(fuse_ino_t ino)
{
	struct inode *node;

	/* find it again: a racing forget may have freed it, a lookup revived */
	table_wrlock();
	node = find_ino_locked(ino);
	if (node)
		maybe_free_locked(node);
	table_unlock();
}

/* Subtracts n from the count, never below 0. Returns the new count. */
static uint64_t sub_lookups(struct inode *node, uint64_t n)
{
	uint_fast64_t cur = atomic_load(&node->nlookup), next;

	do {
		next = cur > n ? cur - n : 0;
	} while (!atomic_compare_exchange_weak(&node->nlookup, &cur, next));
	return next;
}

/*
 * The kernel forgot n (its lookup count is 0): its inode and pages are
 * gone, so the value pinned for its READs goes, and the anchor with it
 * (a later LOOKUP of the number makes a new kernel inode, with no page).
 * A LOOKUP that revives the number counts before the kernel can READ
 * the new inode, so a pin taken after the check below is the new
 * inode's. Node lock held.
 */
static struct region_value *unpin_locked(struct inode *n)
{
	struct region_value *drop = NULL;

	ASSERT_NODE();
	if (!n->kpin || atomic_load(&n->nlookup))
		return NULL;
	n->kpin = false;
	rfs_pin_del(&n->kpin_pin);
	memset(&n->kpin_pin, 0, sizeof(n->kpin_pin));
	n->nreaders--;
	if (--n->preaders == 0) {
		drop = n->pval;
		n->pval = NULL;
		n->anchored = false;
	}
	check_node_locked(n);
	return drop;
}

void rfs_inode_forget(fuse_ino_t ino, uint64_t n)
{
	struct region_value *drop = NULL;
	pthread_mutex_t *mu;
	struct inode *node;
	uint64_t left = 1;

	if (ino < RFS_INO_DYNAMIC)
		return;
	table_rdlock();
	node = find_ino_locked(ino);
	if (node)
		left = sub_lookups(node, n);
	if (node && !left) {
		mu = node_lock(node);
		node_enter(mu);
		drop = unpin_locked(node);
		node_leave(mu);
	}
	table_unlock();
	region_value_unref(drop);
	if (!left)
		free_if_unused(ino);
}

/* ---- names ---------------------------------------------------------------- */

static void make_gone_locked(struct inode *n, const struct store_meta *last)
{
	ASSERT_WRITE();
	name_unlink_locked(n);
	n->gone = true;
	n->current = false;
	if (last) {
		n->last = *last;
		n->last_valid = true;
	}
}

/* Every named node of a key becomes gone. Write lock held. */
static void unlink_all_locked(const char *region, const void *key, size_t klen,
			      const struct store_meta *last)
{
	struct inode *n;

	ASSERT_WRITE();
	while ((n = find_name_locked(RFS_I_KEY, region, key, klen, false)))
		make_gone_locked(n, last);
}

void rfs_inode_unlinked(const char *region, const void *key, size_t klen,
			const struct store_meta *last)
{
	table_wrlock();
	unlink_all_locked(region, key, klen, last);
	table_unlock();
}

/* The number of named nodes of a key. Table lock held. */
static size_t count_name_locked(const char *region, const void *key,
				size_t klen)
{
	uint64_t h = name_hash(RFS_I_KEY, region, key, klen);
	size_t rlen = strlen(region), cnt = 0;
	struct inode *n;

	ASSERT_TABLE();
	for (n = *name_slot(h); n; n = n->name_next)
		cnt += node_is(n, h, RFS_I_KEY, region, rlen, key, klen);
	return cnt;
}

int rfs_inode_rename_prepare(const char *region, const void *from, size_t flen,
			     const void *to, size_t tlen,
			     struct rfs_inode_names *names)
{
	size_t cnt, rlen = strlen(region);

	names->v = NULL;
	names->n = 0;
	if (flen == tlen && memcmp(from, to, flen) == 0)
		return 0; /* onto itself: nothing moves */
	table_rdlock();
	cnt = count_name_locked(region, from, flen);
	table_unlock();
	if (!cnt)
		return 0;
	names->v = calloc(cnt, sizeof(*names->v));
	if (!names->v)
		return -ENOMEM;
	for (; names->n < cnt; names->n++) {
		names->v[names->n] = make_name(region, rlen, to, tlen);
		if (!names->v[names->n]) {
			rfs_inode_names_free(names);
			return -ENOMEM;
		}
	}
	return 0;
}

void rfs_inode_names_free(struct rfs_inode_names *names)
{
	while (names->n)
		free(names->v[--names->n]);
	free(names->v);
	names->v = NULL;
}

/*
 * Moves n to the name region/to, with a name of spare (may be NULL) if it
 * has one left; false if there is no memory for it.
 */
static bool move_locked(struct inode *n, const char *region, const void *to,
			size_t tlen, struct rfs_inode_names *spare)
{
	char *name = spare && spare->n ? spare->v[--spare->n]
				       : make_name(region, n->rlen, to, tlen);

	ASSERT_WRITE();
	if (!name)
		return false;
	name_unlink_locked(n);
	free(n->name);
	n->name = name;
	n->klen = tlen;
	n->hash = name_hash(RFS_I_KEY, region, to, tlen);
	name_link_locked(n);
	return true;
}

bool rfs_inode_renamed(const char *region, const void *from, size_t flen,
		       const void *to, size_t tlen,
		       const struct store_meta *last,
		       struct rfs_inode_names *names)
{
	struct inode *f;
	bool ok = true;

	if (flen == tlen && memcmp(from, to, flen) == 0)
		return true; /* onto itself: nothing changed */
	table_wrlock();
	unlink_all_locked(region, to, tlen, last);
	while ((f = find_name_locked(RFS_I_KEY, region, from, flen, false)))
		if (!move_locked(f, region, to, tlen, names)) {
			make_gone_locked(f, NULL); /* no memory: let it go */
			ok = false;
		}
	table_unlock();
	return ok;
}

void rfs_inode_changed(const char *region, const void *key, size_t klen)
{
	struct inode *n;
	size_t i;

	table_wrlock();
	if (key) {
		n = find_name_locked(RFS_I_KEY, region, key, klen, true);
		if (n)
			n->current = false;
	} else {
		for (i = 0; i <= it.by_ino.mask; i++)
			for (n = it.by_ino.b[i]; n; n = n->ino_next)
				if (n->kind == RFS_I_KEY)
					n->current = false;
	}
	table_unlock();
}

int rfs_inode_each_key(const char *region,
		       void (*fn)(const char *region, const void *key,
				  size_t klen))
{
	struct inode *n;
	size_t i, cnt = 0, bytes = 0, off = 0;
	size_t *lens;
	char *names;

	table_rdlock();
	for (i = 0; i <= it.by_ino.mask; i++)
		for (n = it.by_ino.b[i]; n; n = n->ino_next)
			if (n->kind == RFS_I_KEY &&
			    (!region || strcmp(n->name, region) == 0)) {
				cnt++;
				bytes += n->rlen + 1 + n->klen + 1;
			}
	lens = malloc((cnt ? cnt : 1) * 2 * sizeof(*lens));
	names = malloc(bytes ? bytes : 1);
	if (!lens || !names) {
		table_unlock();
		free(lens);
		free(names);
		return -ENOMEM;
	}
	cnt = 0;
	for (i = 0; i <= it.by_ino.mask; i++)
		for (n = it.by_ino.b[i]; n; n = n->ino_next)
			if (n->kind == RFS_I_KEY &&
			    (!region || strcmp(n->name, region) == 0)) {
				memcpy(names + off, n->name,
				       n->rlen + 1 + n->klen + 1);
				lens[2 * cnt] = n->rlen;
				lens[2 * cnt + 1] = n->klen;
				off += n->rlen + 1 + n->klen + 1;
				cnt++;
			}
	table_unlock();
	for (i = 0, off = 0; i < cnt; i++) {
		fn(names + off, names + off + lens[2 * i] + 1, lens[2 * i + 1]);
		off += lens[2 * i] + 1 + lens[2 * i + 1] + 1;
	}
	free(lens);
	free(names);
	return 0;
}

/* ---- opens ---------------------------------------------------------------- */

static bool value_is_row(const struct region_value *v,
			 const struct store_meta *row)
{
	return region_value_version(v) == row->version &&
	       region_value_len(v) == row->size &&
	       region_value_mtime(v) == row->mtime_ns;
}

/*
 * The read-open decision for a PAGE node (see the top): the value the
 * handle serves, or NULL for "not from the page cache". Lock held shared,
 * node lock held.
 */
static struct region_value *
page_value_locked(struct inode *n, struct region_value *v, bool *first)
{
	uint64_t serial = region_value_tag(v); /* the load serial */

	ASSERT_NODE();
	*first = false;
	if (!n->current && !n->gone)
		return NULL; /* superseded: its row is no longer the name's */
	if (n->preaders)
		return n->pval;
	if (n->anchored ? serial != n->anchor : !value_is_row(v, &n->row))
		return NULL;
	*first = !n->anchored;
	n->anchored = true;
	n->anchor = serial;
	n->pval = region_value_ref(v);
	return v;
}

/* A handle that can read n opens: n may get pages. Node lock held. */
static void reader_in_locked(struct inode *n)
{
	ASSERT_NODE();
	n->nreaders++;
	n->rgen++;
	n->pristine = false;
}

int rfs_inode_open_read(fuse_ino_t ino, struct region_value *v,
			struct region_value **out, bool *pcache, bool *fill)
{
	struct region_value *serve = NULL;
	pthread_mutex_t *mu;
	struct inode *n;
	bool first = false;

	*out = NULL;
	*pcache = false;
	if (fill)
		*fill = false;
	n = inode_enter(ino, &mu);
	if (!n)
		return -ENOENT;
	if (n->filling) {
		inode_leave(n, mu);
		return -EAGAIN; /* the kernel is being handed its pages */
	}
	if (atomic_load(&n->cls) == RFS_K_PAGE) {
		serve = n->draining ? NULL : page_value_locked(n, v, &first);
		if (serve)
			n->preaders++;
		else if (!n->preaders)
			atomic_store(&n->cls, RFS_K_DIRECT);
	}
	/*
	 * The open that anchors the inode, with no other handle open: the
	 * kernel's inode has no page yet and no file through which one
	 * could be read (see "Filling" at the top).
	 */
	if (fill && first && !n->nreaders) {
		n->filling = true;
		*fill = true;
	}
	reader_in_locked(n);
	*pcache = serve != NULL;
	*out = region_value_ref(serve ? serve : v);
	inode_leave(n, mu);
	return 0;
}

int rfs_inode_kernel_value(fuse_ino_t ino, struct region_value *v,
			   struct region_value **out)
{
	struct region_value *serve = NULL;
	pthread_mutex_t *mu;
	struct inode *n;
	bool first;
	int rc = 0;

	*out = NULL;
	n = inode_enter(ino, &mu);
	if (!n)
		return -ENOENT;
	if (n->kpin)
		serve = n->pval;
	else if (!v)
		rc = -EAGAIN;
	else if (atomic_load(&n->cls) != RFS_K_PAGE)
		rc = -EIO; /* never on a zero-request mount: no handles */
	else if (!(serve = page_value_locked(n, v, &first)) && !n->preaders &&
		 !n->anchored && region_value_len(v) <= n->row.size) {
		/*
		 * The row changed before the first READ: the kernel's inode
		 * has no page yet, so the whole file can be the new value;
		 * a shorter one ends in a short READ, which makes the kernel
		 * lower its size (fuse_short_read()). A longer one cannot
		 * be served under the kernel's size.
		 */
		n->anchored = true;
		n->anchor = region_value_tag(v);
		n->pval = region_value_ref(v);
		serve = v;
	}
	if (!rc && !serve)
		rc = -EIO;
	if (!rc && !n->kpin) {
		n->kpin = true;
		n->preaders++;
		reader_in_locked(n);
		rfs_pin_add(&n->kpin_pin, n->pval);
	}
	if (!rc)
		*out = region_value_ref(serve);
	inode_leave(n, mu);
	return rc;
}

bool rfs_inode_attrs_stale(fuse_ino_t ino, const struct region_value *v)
{
	pthread_mutex_t *mu;
	struct inode *n;
	bool stale;

	n = inode_enter(ino, &mu);
	if (!n)
		return false;
	stale = atomic_load(&n->cls) != RFS_K_WRITE && !n->gone &&
		!value_is_row(v, &n->row);
	inode_leave(n, mu);
	return stale;
}

void rfs_inode_filled(fuse_ino_t ino)
{
	pthread_mutex_t *mu;
	struct inode *n;

	n = inode_enter(ino, &mu);
	if (!n)
		return;
	n->filling = false;
	inode_leave(n, mu);
}

/* Drops one handle's counts; true if nothing holds n any more. */
static bool handle_out(struct inode *n, bool reader, bool pcache, bool writer,
		       struct region_value **drop)
{
	pthread_mutex_t *mu = node_lock(n);
	bool unused;

	node_enter(mu);
	if (reader && n->nreaders)
		n->nreaders--;
	if (writer && n->nwriters)
		n->nwriters--;
	if (pcache && n->preaders && --n->preaders == 0) {
		*drop = n->pval;
		n->pval = NULL;
	}
	unused = !n->nreaders && !n->nwriters;
	check_node_locked(n);
	node_leave(mu);
	return unused && !atomic_load(&n->nlookup) && !n->writers;
}

/* The release of a handle counted by an open. */
static void close_handle(fuse_ino_t ino, bool reader, bool pcache, bool writer)
{
	struct region_value *drop = NULL;
	struct inode *n;
	bool unused = false;

	table_rdlock();
	n = find_ino_locked(ino);
	if (n)
		unused = handle_out(n, reader, pcache, writer, &drop);
	table_unlock();
	region_value_unref(drop);
	if (unused)
		free_if_unused(ino);
}

void rfs_inode_close_read(fuse_ino_t ino, bool pcache)
{
	close_handle(ino, true, pcache, false);
}

void rfs_inode_close_write(fuse_ino_t ino, bool readable)
{
	close_handle(ino, readable, false, true);
}

/*
 * The write-open decision (see the top and fs.h). Node lock held, lock
 * held shared.
 */
static int write_in_locked(struct inode *n, bool readable, struct rfs_wopen *wo)
{
	ASSERT_NODE();
	if (n->preaders) {
		n->draining = true; /* handle.c, enter_writer(): it waits */
		return -ESTALE;
	}
	n->draining = false;
	if (atomic_load(&n->cls) != RFS_K_WRITE) {
		atomic_store(&n->cls, RFS_K_WRITE);
		n->pristine = false; /* until rfs_inode_cleaned() */
		wo->inval = n->nreaders ? RFS_INVAL_ATTR : RFS_INVAL_ALL;
		wo->gen = n->rgen;
	}
	n->wanted = false;
	n->nwriters++;
	if (readable)
		reader_in_locked(n);
	return 0;
}

int rfs_inode_open_write(fuse_ino_t ino, pid_t pid, bool readable,
			 struct rfs_wopen *wo)
{
	char region[REGION_MAX_NAME + 1], key[REGION_MAX_KEY];
	pthread_mutex_t *mu;
	struct inode *n;
	size_t klen = 0;
	int rc = 0;

	wo->inval = RFS_INVAL_NONE;
	wo->gen = 0;
	table_rdlock();
	n = find_ino_locked(ino);
	if (n) {
		mu = node_lock(n);
		node_enter(mu);
		rc = write_in_locked(n, readable, wo);
		check_node_locked(n);
		node_leave(mu);
		memcpy(region, n->name, n->rlen + 1);
		memcpy(key, n->name + n->rlen + 1, n->klen);
		klen = n->klen;
	}
	table_unlock();
	if (!n)
		return -ENOENT;
	if (rc)
		marker_add(pid, region, key, klen);
	else
		marker_find(pid, region, key, klen, true);
	return rc;
}

void rfs_inode_cleaned(fuse_ino_t ino, uint64_t gen)
{
	pthread_mutex_t *mu;
	struct inode *n;

	n = inode_enter(ino, &mu);
	if (!n)
		return;
	/* nothing that can read opened it since the decision */
	if (n->rgen == gen && !n->nreaders &&
	    atomic_load(&n->cls) == RFS_K_WRITE)
		n->pristine = true;
	inode_leave(n, mu);
}

/* ---- write handles -------------------------------------------------------- */

int rfs_inode_attach(fuse_ino_t ino, struct rfs_handle *h)
{
	struct inode *n;

	table_wrlock();
	n = find_ino_locked(ino);
	if (n) {
		h->u.w.inode_next = n->writers;
		n->writers = h;
	}
	table_unlock();
	return n ? 0 : -ENOENT;
}

void rfs_inode_detach(fuse_ino_t ino, struct rfs_handle *h)
{
	struct rfs_handle **pp;
	struct inode *n;

	table_wrlock();
	n = find_ino_locked(ino);
	if (n) {
		for (pp = &n->writers; *pp; pp = &(*pp)->u.w.inode_next) {
			if (*pp == h) {
				*pp = h->u.w.inode_next;
				break;
			}
		}
		maybe_free_locked(n);
	}
	table_unlock();
}

/* A marker for the name, any pid's (marker_names() by name). */
static bool marker_for(const char *region, const void *key, size_t klen)
{
	uint64_t h;
	bool found = false;
	unsigned i;

	if (!atomic_load(&mk.used))
		return false;
	h = name_hash(RFS_I_KEY, region, key, klen);
	pthread_mutex_lock(&mk.lock);
	for (i = 0; i < MARKERS && !found; i++) {
		const struct marker *m = &mk.m[i];

		found = m->used && m->hash == h && m->klen == klen &&
			strcmp(m->region, region) == 0 &&
			memcmp(m->key, key, klen) == 0;
	}
	pthread_mutex_unlock(&mk.lock);
	return found;
}

/*
 * Every write handle of n has committed and not changed since (their
 * close() is done: what remains is the RELEASE, which the kernel sends
 * asynchronously and which may still be queued behind the next LOOKUP of
 * the name, e.g. a read back right after the close). Table lock held.
 */
static bool writers_settled_locked(const struct inode *n)
{
	const struct rfs_handle *h;
	unsigned k = 0;

	for (h = n->writers; h; h = h->u.w.inode_next, k++)
		if (!atomic_load(&h->u.w.settled))
			return false;
	return k >= n->nwriters; /* none still opening */
}

bool rfs_inode_writing(const char *region, const void *key, size_t klen)
{
	uint64_t h = name_hash(RFS_I_KEY, region, key, klen);
	size_t rlen = strlen(region);
	pthread_mutex_t *mu;
	struct inode *n;
	bool w = false;

	if (marker_for(region, key, klen))
		return true; /* a refused writer's retry is on its way */
	table_rdlock();
	for (n = *name_slot(h); n && !w; n = n->name_next) {
		if (!node_is(n, h, RFS_I_KEY, region, rlen, key, klen) ||
		    atomic_load(&n->cls) != RFS_K_WRITE)
			continue;
		mu = node_lock(n);
		node_enter(mu);
		w = n->wanted ||
		    ((n->nwriters || n->writers) && !writers_settled_locked(n));
		node_leave(mu);
	}
	table_unlock();
	return w;
}

void rfs_inode_set_mark(fuse_ino_t ino, const struct rfs_entry_mark *m)
{
	struct inode *n;

	table_wrlock();
	n = find_ino_locked(ino);
	if (n)
		n->mark = *m;
	table_unlock();
}

void rfs_inode_get_mark(fuse_ino_t ino, struct rfs_entry_mark *m)
{
	struct inode *n;

	table_rdlock();
	n = find_ino_locked(ino);
	*m = n ? n->mark : (struct rfs_entry_mark){.valid = false};
	table_unlock();
}

uint64_t rfs_inode_count(void)
{
	return atomic_load_explicit(&it.nodes, memory_order_relaxed);
}

/* ---- white box (tests/unit/test_inode.c) ---------------------------------- */

int rfs_inode__probe(fuse_ino_t ino, struct rfs_inode_probe *p)
{
	pthread_mutex_t *mu;
	struct inode *n;

	memset(p, 0, sizeof(*p));
	table_rdlock();
	n = find_ino_locked(ino);
	if (n) {
		mu = node_lock(n);
		node_enter(mu);
		p->nlookup = atomic_load(&n->nlookup);
		p->pval = n->pval;
		p->anchored = n->anchored;
		p->pristine = n->pristine;
		p->filling = n->filling;
		check_node_locked(n);
		node_leave(mu);
	}
	p->ino_buckets = it.by_ino.mask + 1;
	p->name_buckets = it.by_name.mask + 1;
	table_unlock();
	p->markers = atomic_load(&mk.used);
	return n ? 0 : -ENOENT;
}
