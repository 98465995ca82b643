/*
 * commit.c - the write protocol, in one place: every change of a key's
 * row that the daemon makes (a write handle's commit, an unborn key's
 * empty row, truncate(2) of a path, unlink, rename) goes through here, and so
 * does the order between two changes of one name.
 *
 * The protocol (DESIGN.md "The write path"): E1 = region_invalidate(),
 * the store operation (the writer thread's group commit), E2 =
 * region_invalidate() again, then the inode table update (inode.c: an
 * unlinked name's inodes become gone, a renamed name's inodes move), then
 * the reply. E1 makes later reads miss; E2 poisons any flight that loaded
 * the old row before the store operation finished, so the old value can
 * never be installed after the reply (the stale-put guard).
 *
 * A write handle's commit does E1 and E2 as a write-through install
 * (put_cached_locked()): E1 also starts a writer's flight
 * (region_write_begin()), and E2 (region_write_end()) installs the bytes
 * just committed, with the row's new version and mtime, instead of
 * evicting, unless another invalidation of the key came after E1 (another
 * writer's E1 or E2, the change feed, invalidate-all): then it evicts as
 * before. So the next read of the key is a hit, and never of a value
 * older than a commit whose close() has returned (region.h has the
 * argument, doc/design.md "Write-through installs" the cases). Truncate,
 * unlink, rename and an unborn key's empty row keep plain evictions.
 *
 * Each operation resolves its region once (write_begin()): one reference
 * on the region the name has now, used for E1, E2 and the settings. A
 * reload that swapped the region table between E1 and E2 could recreate
 * the region (its cache starts empty) and let a reader of the new one
 * load the old row and install it after an E2 sent to the old one; so a
 * write holds the table's swap gate (state.c, shared) from E1 to E2, and
 * a reload swaps only when no write is between the two. A write to a
 * region the reload removed still reaches the store (nothing is lost; the
 * rows are there if the region comes back) with no cache to invalidate.
 *
 * The order of changes of one name. A write handle commits to the name
 * its inode has at commit time (so a rename while it is open moves the
 * data along, and an unlink makes it commit nothing). Resolving that name
 * and storing under it must be one step against an unlink or a rename of
 * the same name, or a close() that resolved its name just before an
 * unlink puts the key back after it, and one that resolved it before a
 * rename puts the old name back with the data the rename moved (both
 * seen on a mount: tests/consistency/race.c). So every name has a lock,
 * one of NAME_LOCKS reader-writer locks picked by a hash of (region,
 * key):
 *   exclusive  unlink (stat, E1, delete, E2, inodes gone), rename (both
 *              names, in stripe order: stat, E1, rename, E2, inodes
 *              moved), create (stat, the unborn name, the writer's
 *              inode),
 *              truncate(2) of a path (load, resize, E1, put, E2: a
 *              read-modify-write that must not lose a close() between
 *              its load and its put);
 *   shared     a write handle's commit (the inode's name is stable while
 *              it is held: names change only under the exclusive lock;
 *              two commits of one name may overlap, the last one wins as
 *              DESIGN.md says), a write open (the inode is not gone, and
 *              is filled from the name's row), and LOOKUP of a key
 *              (store_stat and the inode it returns: an unlink between
 *              the two would leave a new inode that is not gone for a
 *              key that is).
 * Unrelated names share a lock only when their hashes collide (1 in
 * NAME_LOCKS), and then only for the length of one operation. The locks
 * are writer-preferring, so a stream of LOOKUPs cannot starve an unlink;
 * nobody takes a name lock twice (they are not recursive). Never held
 * across a fuse_reply_*(); they are held across store calls, which is
 * their point (the store's writer thread takes no fs/ lock).
 *
 * What needs no name lock, and why:
 *  - an outside writer's change (the change feed, feed.c): it reaches the
 *    store by its own transaction, ordered by SQLite against ours; the
 *    feed invalidates the key (poisoning a flight, like E2) and makes its
 *    inode stop being current, both atomic steps that never move names,
 *    so a commit in progress stores before or after it, and the last one
 *    wins, as between two of our own commits;
 *  - a reload: the swap gate above;
 *  - reads: a read handle serves the value it opened; the stale-put guard
 *    orders it against commits.
 *
 * Lock order: name locks (a rename's two in ascending stripe order) ->
 * swap gate (state.c) -> everything else in fs/ (fs.h). A write handle's
 * mu is never held while taking a name lock (commits run without it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"

#define NAME_LOCKS 256 /* a power of two */

static pthread_rwlock_t name_locks[NAME_LOCKS] = {
	[0 ... NAME_LOCKS - 1] =
		PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP,
};

/* Kernel entries handed out per stripe (fs.h, struct rfs_entry_mark). */
static struct {
	_Alignas(64) atomic_uint_fast64_t n;
} handed[NAME_LOCKS];

/* Changes of existence per stripe (fs.h, struct rfs_absent). */
static struct {
	_Alignas(64) atomic_uint_fast64_t n;
} changes[NAME_LOCKS];

/* Negative notes, one per slot of callers' thread ids. */
#define ABSENT_SLOTS 64 /* a power of two */

static struct absent_note {
	pthread_mutex_t mu;
	bool valid; /* L: mu, and the rest */
	pid_t pid;
	struct rfs_absent a;
	size_t klen;
	char region[REGION_MAX_NAME + 1];
	char key[REGION_MAX_KEY];
} absent[ABSENT_SLOTS] = {
	[0 ... ABSENT_SLOTS - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER},
};

/* ---- name locks ---------------------------------------------------------- */

static unsigned stripe_of(const char *region, const void *key, size_t klen)
{
	uint64_t h = rfs_name_hash(0xcbf29ce484222325ULL, region, key, klen);

	return (unsigned)(h & (NAME_LOCKS - 1));
}

static void stripe_lock(unsigned s, bool excl)
{
	if (excl)
		pthread_rwlock_wrlock(&name_locks[s]);
	else
		pthread_rwlock_rdlock(&name_locks[s]);
}

void rfs_names_lock(struct rfs_names *l, const char *region, const void *key,
		    size_t klen, bool excl)
{
	l->excl = excl;
	l->n = 1;
	l->s[0] = stripe_of(region, key, klen);
	stripe_lock(l->s[0], excl);
}

void rfs_names_handed(const char *region, const void *key, size_t klen,
		      struct rfs_entry_mark *m)
{
	unsigned s = stripe_of(region, key, klen);
	uint64_t seq = atomic_fetch_add(&handed[s].n, 1) + 1;

	if (m) {
		m->valid = true;
		m->stripe = s;
		m->seq = seq;
	}
}

void rfs_names_handed_all(void)
{
	unsigned s;

	for (s = 0; s < NAME_LOCKS; s++)
		atomic_fetch_add(&handed[s].n, 1);
}

void rfs_names_mark(const char *region, const void *key, size_t klen,
		    struct rfs_entry_mark *m)
{
	m->valid = true;
	m->stripe = stripe_of(region, key, klen);
	m->seq = atomic_load(&handed[m->stripe].n);
}

/*
 * May a commit to the name skip the invalidation of the kernel's entry?
 * Only with a mark of this very stripe whose count has not moved: no
 * LOOKUP, READDIRPLUS or rename has given the kernel an entry for any
 * name of the stripe since the kernel's entry for this one was a
 * writer's or none. (A LOOKUP counts before it reads the row; one
 * counted before the mark made its entry under the directory's lock,
 * which the mark's invalidation waited for, or revalidated an entry that
 * existed before: either way that invalidation dropped it.)
 */
static bool entry_clean(const char *region, const void *key, size_t klen,
			const struct rfs_entry_mark *m)
{
	unsigned s = stripe_of(region, key, klen);

	return m && m->valid && m->stripe == s &&
	       atomic_load(&handed[s].n) == m->seq;
}

/* Both names exclusively, in stripe order (one lock if they share it). */
static void names_lock2(struct rfs_names *l, const char *region, const void *a,
			size_t alen, const void *b, size_t blen)
{
	unsigned x = stripe_of(region, a, alen), y = stripe_of(region, b, blen);

	l->excl = true;
	l->n = x == y ? 1 : 2;
	l->s[0] = x < y ? x : y;
	l->s[1] = x < y ? y : x;
	stripe_lock(l->s[0], true);
	if (l->n == 2)
		stripe_lock(l->s[1], true);
}

void rfs_names_unlock(struct rfs_names *l)
{
	while (l->n) {
		if (l->excl) /* before the unlock: see rfs_names_absent_take() */
			atomic_fetch_add(&changes[l->s[l->n - 1]].n, 1);
		pthread_rwlock_unlock(&name_locks[l->s[--l->n]]);
	}
}

/* ---- negative notes ------------------------------------------------------ */

static struct absent_note *absent_slot(pid_t pid)
{
	return &absent[(unsigned)pid * 2654435761u % ABSENT_SLOTS];
}

void rfs_names_absent_begin(const char *region, const void *key, size_t klen,
			    struct rfs_absent *a)
{
	a->stripe = stripe_of(region, key, klen);
	a->seq = atomic_load(&changes[a->stripe].n);
}

void rfs_names_absent_note(pid_t pid, const char *region, const void *key,
			   size_t klen, const struct rfs_absent *a)
{
	struct absent_note *n = absent_slot(pid);

	if (!pid || strlen(region) > REGION_MAX_NAME || klen > REGION_MAX_KEY)
		return;
	pthread_mutex_lock(&n->mu);
	n->valid = true;
	n->pid = pid;
	n->a = *a;
	n->klen = klen;
	strcpy(n->region, region);
	memcpy(n->key, key, klen);
	pthread_mutex_unlock(&n->mu);
}

/*
 * Under the name's exclusive lock. An exclusive section of the stripe
 * that ran after the LOOKUP's shared one counted a change before its
 * unlock, so the count moved; one that ran before it was counted before
 * the LOOKUP took the count. A change of the name under a shared lock
 * (a commit of data) follows the exclusive section of its create.
 */
bool rfs_names_absent_take(pid_t pid, const char *region, const void *key,
			   size_t klen)
{
	struct absent_note *n = absent_slot(pid);
	bool ok;

	pthread_mutex_lock(&n->mu);
	ok = n->valid && pid && n->pid == pid && n->klen == klen &&
	     strcmp(n->region, region) == 0 && memcmp(n->key, key, klen) == 0 &&
	     n->a.stripe == stripe_of(region, key, klen) &&
	     atomic_load(&changes[n->a.stripe].n) == n->a.seq;
	n->valid = false;
	pthread_mutex_unlock(&n->mu);
	return ok;
}

void rfs_names_changed(const char *region, const void *key, size_t klen)
{
	unsigned s;

	if (key) {
		atomic_fetch_add(&changes[stripe_of(region, key, klen)].n, 1);
		return;
	}
	for (s = 0; s < NAME_LOCKS; s++)
		atomic_fetch_add(&changes[s].n, 1);
}

static bool same_name(const struct rfs_ident *a, const struct rfs_ident *b)
{
	return a->gone == b->gone && a->klen == b->klen &&
	       strcmp(a->region, b->region) == 0 &&
	       memcmp(a->key, b->key, a->klen) == 0;
}

int rfs_names_lock_ino(struct rfs_names *l, fuse_ino_t ino, bool excl,
		       struct rfs_ident *id)
{
	struct rfs_ident again;
	int rc;

	rc = rfs_inode_ident(ino, id);
	for (;;) {
		if (rc)
			return rc;
		rfs_names_lock(l, id->region, id->key, id->klen, excl);
		rc = rfs_inode_ident(ino, &again);
		if (!rc && same_name(id, &again))
			return 0;
		/* renamed or unlinked meanwhile: lock the name it has now */
		rfs_names_unlock(l);
		*id = again;
	}
}

/* ---- one write ------------------------------------------------------------ */

/*
 * The region called name for one write, resolved once, with the swap gate
 * held until write_end(): NULL if no region has that name now.
 */
static struct rfs_region *write_begin(const char *name)
{
	rfs_swap_gate_enter();
	return rfs_region_ref(name);
}

static void write_end(struct rfs_region *rr)
{
	rfs_region_unref(rr);
	rfs_swap_gate_leave();
}

static void evict(struct rfs_region *rr, const void *key, size_t klen)
{
	if (rr)
		region_invalidate(rr->r, key, klen, REGION_ORIGIN_LOCAL);
}

static unsigned region_flags(const struct rfs_region *rr)
{
	return rr && rr->cfg.durable ? STORE_DURABLE : 0;
}

static uint64_t value_limit(const struct rfs_region *rr)
{
	uint64_t lim = rr ? rr->cfg.lim.max_value_size : 0;

	return lim && lim < RFS_MAX_VALUE ? lim : RFS_MAX_VALUE;
}

/*
 * The name has a new row: the inode that stood for the old one stops
 * being current (the next LOOKUP makes or promotes another; an open of
 * it through a dentry the kernel still holds is served the new value
 * with direct I/O, inode.c), and the kernel's entry for the name is
 * invalidated (kinval.c; close() waits for that before it returns).
 * Name lock held. A LOOKUP takes it shared, as a handle's commit does, so
 * one that read the old row may still make a current inode for it after
 * this; the kernel entry it makes is dropped by the invalidation queued
 * here (the kernel holds the directory's lock from a LOOKUP to its
 * entry, and a revalidated entry exists before), and the next LOOKUP
 * compares rows.
 */
static void changed(const char *region, const void *key, size_t klen)
{
	rfs_inode_changed(region, key, klen);
	rfs_kinval_key(region, key, klen);
}

static int put_meta_locked(struct rfs_region *rr, const char *region,
			   const void *key, size_t klen, const void *data,
			   size_t len, unsigned flags, bool notify,
			   struct store_meta *meta);
static int delete_store(const char *region, const void *key, size_t klen,
			const uint64_t *version);

/*
 * E1, store_put, E2 of one value in rr (write_begin(); NULL: a region
 * that is gone, only the store). The name lock is held. notify: tell the
 * kernel (changed()); create() does not, its reply makes the entry.
 */
static int put_locked(struct rfs_region *rr, const char *region,
		      const void *key, size_t klen, const void *data,
		      size_t len, unsigned flags, bool notify)
{
	return put_meta_locked(rr, region, key, klen, data, len, flags, notify,
			       NULL);
}

/*
 * The value a commit of data leaves in the cache: a copy made in the
 * block its entry will use (region_flight_value()), with the committed
 * row's metadata and a serial of its own. NULL if the store's row is not
 * known to be those bytes (a version of 0: a put that wrote no row) or on
 * ENOMEM.
 */
static struct region_value *committed_value(struct region_flight *wf,
					    const void *data, size_t len,
					    const struct store_meta *m)
{
	struct region_value *v;
	void *p;

	if (m->version == 0 || m->size != len)
		return NULL;
	v = region_flight_value(wf, len, &p);
	if (!v)
		return NULL;
	if (len)
		memcpy(p, data, len);
	region_value_set_meta(v, m->mtime_ns, m->version);
	region_value_set_tag(v, rfs_value_serial());
	return v;
}

/*
 * A change the store refused with EIO because the database file was
 * deleted or replaced: every cache is dropped now (rfs_feed_file_lost()),
 * before the caller's reply, not at the feed's next poll, so that no read
 * after the failed close() serves a value the store no longer has.
 */
static void lost_check(int rc)
{
	if (rc == -EIO && store_file_lost(rfs.st))
		rfs_feed_file_lost();
}

/*
 * put_locked(), *meta (may be NULL) getting the committed row, and with
 * cache a write-through install: E1 starts a
 * writer's flight (region_write_begin()), and E2 installs the committed
 * bytes in place of its eviction if no invalidation of the key came
 * after E1 (region_write_end(); doc/design.md, "Write-through installs").
 * A failed commit, a value over the region's max_value_size, or a region
 * with write_through = false (regions.ini: the committed value is not
 * kept, as for a write that is not read back) only evicts, as without
 * cache.
 */
static int put_cached_locked(struct rfs_region *rr, const char *region,
			     const void *key, size_t klen, const void *data,
			     size_t len, unsigned flags, bool notify,
			     bool cache, struct store_meta *meta)
{
	char esc[RFS_ESC_LEN];
	struct region_flight *wf = NULL;
	struct region_value *v = NULL;
	struct store_meta m;
	int rc;

	if (!meta)
		meta = &m;
	if (rr && cache && rr->cfg.write_through && len <= value_limit(rr))
		region_write_begin(rr->r, key, klen, REGION_ORIGIN_LOCAL, &wf);
	else
		evict(rr, key, klen); /* E1 */
	rc = store_put(rfs.st, region, key, klen, data, len, flags, meta);
	if (wf) { /* E2: the install, or the eviction */
		if (rc == 0)
			v = committed_value(wf, data, len, meta);
		region_write_end(rr->r, wf, v, REGION_ORIGIN_LOCAL);
	} else {
		evict(rr, key, klen); /* E2 */
	}
	if (rc == 0) {
		rfs_count(RFS_C_COMMITS, 1);
		if (notify)
			changed(region, key, klen);
		return 0;
	}
	rfs_count(RFS_C_COMMIT_ERRORS, 1);
	lost_check(rc);
	rfs_log(RFS_LOG_ERR, "commit %s/%s (%zu bytes): %s", region,
		rfs_escape(key, klen, esc), len, strerror(-rc));
	return rc;
}

/* put_locked(), and *meta (may be NULL) gets the committed row. */
static int put_meta_locked(struct rfs_region *rr, const char *region,
			   const void *key, size_t klen, const void *data,
			   size_t len, unsigned flags, bool notify,
			   struct store_meta *meta)
{
	return put_cached_locked(rr, region, key, klen, data, len, flags,
				 notify, false, meta);
}

/*
 * coherence = strict: once a change is committed and every lock of the
 * write dropped (the wait can last a lease: nothing may stall behind it),
 * waits until every other live mount has applied it
 * (store_wait_applied(), bounded; counted in the store's stats).
 */
static void strict_wait(const char *region)
{
	struct rfs_perms p;

	if (rfs_region_perms(region, &p) && p.strict)
		store_wait_applied(rfs.st);
}

/* ---- unborn keys ----------------------------------------------------------- */

/*
 * A key that create() made exists at once for everyone on this mount, but
 * its row is written only once, by its writer's first commit (close() or
 * fsync(): one commit per create+write+close, not an empty one first).
 * Until then the name is "unborn": the table below knows it, and whoever
 * else needs the name's row first commits the empty row the create used
 * to commit ("settles" it, rfs_unborn_settle()): a LOOKUP, an open of it
 * (read or write), a listing of its region, an unlink, a rename or a
 * truncate(2) of it, another create of it. So on this mount every
 * opener, stat and listing sees what it saw when the create committed an
 * empty row at once; only other mounts and outside readers of the store
 * do not see the key until its writer's first commit (or a settle).
 *
 * States (L: ub_mu): UNBORN (in the table), BIRTHING (in the table; a
 * settle or the writer's commit is storing the row: the others wait on
 * ub_cond), BORN (out of the table: a row was committed; version is the
 * empty row's if a settle made it, 0 if the writer's commit did) and DEAD
 * (out of the table: the create failed or its writer's commits all
 * failed; nothing was stored). The writer's handle owns the struct and
 * frees it at its end (rfs_unborn_free()).
 *
 * Every transition out of UNBORN happens under the name's lock (shared
 * for a settle or a commit, exclusive to drop it), so while the name is
 * locked exclusively an unborn name is never BIRTHING, and while it is
 * UNBORN the writer's inode has that name (renames and unlinks settle
 * first).
 */
#define UB_BUCKETS 256 /* a power of two */

enum ub_state { UB_UNBORN, UB_BIRTHING, UB_BORN, UB_DEAD };

struct rfs_unborn {
	struct rfs_unborn *next; /* L: ub_mu; in its bucket */
	uint64_t hash;
	enum ub_state state; /* L: ub_mu */
	bool tried;	     /* L: ub_mu; a put of it failed: maybe stored */
	uint64_t version;    /* L: ub_mu; BORN by a settle: the empty row */
	size_t rlen, klen;
	char name[]; /* region '\0' key '\0' */
};

static pthread_mutex_t ub_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ub_cond = PTHREAD_COND_INITIALIZER;
static struct rfs_unborn *ub_table[UB_BUCKETS]; /* L: ub_mu */
static atomic_uint ub_count;			/* entries in the table */

static uint64_t ub_hash(const char *region, const void *key, size_t klen)
{
	return rfs_name_hash(0x84222325cbf29ce4ULL, region, key, klen);
}

static bool ub_is(const struct rfs_unborn *u, uint64_t h, const char *region,
		  size_t rlen, const void *key, size_t klen)
{
	return u->hash == h && u->rlen == rlen && u->klen == klen &&
	       memcmp(u->name, region, rlen) == 0 &&
	       memcmp(u->name + rlen + 1, key, klen) == 0;
}

/* The table's entry for the name, or NULL. ub_mu held. */
static struct rfs_unborn *ub_find_locked(const char *region, const void *key,
					 size_t klen)
{
	uint64_t h = ub_hash(region, key, klen);
	size_t rlen = strlen(region);
	struct rfs_unborn *u;

	for (u = ub_table[h & (UB_BUCKETS - 1)]; u; u = u->next)
		if (ub_is(u, h, region, rlen, key, klen))
			return u;
	return NULL;
}

/* Takes u out of the table, as state. ub_mu held. */
static void ub_remove_locked(struct rfs_unborn *u, enum ub_state state)
{
	struct rfs_unborn **pp = &ub_table[u->hash & (UB_BUCKETS - 1)];

	if (u->state == UB_UNBORN || u->state == UB_BIRTHING) {
		while (*pp != u)
			pp = &(*pp)->next;
		*pp = u->next;
		atomic_fetch_sub(&ub_count, 1);
	}
	u->state = state;
	pthread_cond_broadcast(&ub_cond);
}

/* A new unborn name, in the table. Name lock held exclusive. */
static struct rfs_unborn *ub_add(const char *region, const void *key,
				 size_t klen)
{
	size_t rlen = strlen(region);
	struct rfs_unborn *u = malloc(sizeof(*u) + rlen + klen + 2);
	struct rfs_unborn **b;

	if (!u)
		return NULL;
	u->hash = ub_hash(region, key, klen);
	u->state = UB_UNBORN;
	u->tried = false;
	u->version = 0;
	u->rlen = rlen;
	u->klen = klen;
	memcpy(u->name, region, rlen + 1);
	memcpy(u->name + rlen + 1, key, klen);
	u->name[rlen + 1 + klen] = '\0';
	pthread_mutex_lock(&ub_mu);
	b = &ub_table[u->hash & (UB_BUCKETS - 1)];
	u->next = *b;
	*b = u;
	atomic_fetch_add(&ub_count, 1);
	pthread_mutex_unlock(&ub_mu);
	return u;
}

/*
 * Commits the empty row of the name if it is unborn (waiting if someone
 * is storing it right now). The name's lock is held (either way).
 */
int rfs_unborn_settle_locked(const char *region, const void *key, size_t klen)
{
	struct rfs_unborn *u;
	struct rfs_region *rr;
	struct store_meta m;
	int rc = 0;

	if (!atomic_load(&ub_count))
		return 0;
	pthread_mutex_lock(&ub_mu);
	while ((u = ub_find_locked(region, key, klen)) &&
	       u->state == UB_BIRTHING)
		pthread_cond_wait(&ub_cond, &ub_mu);
	if (u)
		u->state = UB_BIRTHING;
	pthread_mutex_unlock(&ub_mu);
	if (!u)
		return 0;
	rr = write_begin(region);
	rc = put_meta_locked(rr, region, key, klen, NULL, 0, region_flags(rr),
			     false, &m);
	write_end(rr);
	pthread_mutex_lock(&ub_mu);
	if (rc == 0) {
		u->version = m.version;
		ub_remove_locked(u, UB_BORN);
	} else {
		u->tried =
			true; /* SQLite may report NOMEM for a COMMIT that held */
		u->state = UB_UNBORN;
		pthread_cond_broadcast(&ub_cond);
	}
	pthread_mutex_unlock(&ub_mu);
	return rc;
}

int rfs_unborn_settle(const char *region, const void *key, size_t klen)
{
	struct rfs_names l;
	int rc;

	if (!atomic_load(&ub_count))
		return 0;
	rfs_names_lock(&l, region, key, klen, false);
	rc = rfs_unborn_settle_locked(region, key, klen);
	rfs_names_unlock(&l);
	return rc;
}

int rfs_unborn_settle_region(const char *region)
{
	struct rfs_unborn *u;
	char(*keys)[REGION_MAX_KEY + 1] = NULL;
	size_t *lens = NULL, n = 0, cap = 0, i, rlen = strlen(region);
	int rc = 0;

	if (!atomic_load(&ub_count))
		return 0;
	pthread_mutex_lock(&ub_mu);
	cap = atomic_load(&ub_count);
	keys = malloc(cap * sizeof(*keys));
	lens = malloc(cap * sizeof(*lens));
	for (i = 0; keys && lens && i < UB_BUCKETS; i++)
		for (u = ub_table[i]; u && n < cap; u = u->next)
			if (u->rlen == rlen &&
			    memcmp(u->name, region, rlen) == 0) {
				memcpy(keys[n], u->name + rlen + 1, u->klen);
				lens[n++] = u->klen;
			}
	pthread_mutex_unlock(&ub_mu);
	if (!keys || !lens)
		rc = -ENOMEM;
	for (i = 0; i < n && !rc; i++)
		rc = rfs_unborn_settle(region, keys[i], lens[i]);
	free(keys);
	free(lens);
	return rc;
}

int rfs_unborn_settle_own(struct rfs_unborn *u)
{
	/* only u's writer ends UNBORN by a commit, and it is here: while
	 * UNBORN, u's name is its inode's */
	bool unborn;

	if (!u)
		return 0;
	pthread_mutex_lock(&ub_mu);
	unborn = u->state == UB_UNBORN || u->state == UB_BIRTHING;
	pthread_mutex_unlock(&ub_mu);
	return unborn ? rfs_unborn_settle(u->name, u->name + u->rlen + 1,
					  u->klen)
		      : 0;
}

bool rfs_unborn_is(const char *region, const void *key, size_t klen)
{
	bool is;

	if (!atomic_load(&ub_count))
		return false;
	pthread_mutex_lock(&ub_mu);
	is = ub_find_locked(region, key, klen) != NULL;
	pthread_mutex_unlock(&ub_mu);
	return is;
}

/*
 * The writer's commit of u's name is about to store: true if it makes the
 * key's row (u was UNBORN: now BIRTHING). Waits for a settle in progress.
 * The name's lock is held.
 */
static bool ub_claim(struct rfs_unborn *u)
{
	bool mine;

	if (!u)
		return false;
	pthread_mutex_lock(&ub_mu);
	while (u->state == UB_BIRTHING)
		pthread_cond_wait(&ub_cond, &ub_mu);
	mine = u->state == UB_UNBORN;
	if (mine)
		u->state = UB_BIRTHING;
	pthread_mutex_unlock(&ub_mu);
	return mine;
}

static void ub_claimed(struct rfs_unborn *u, int rc)
{
	pthread_mutex_lock(&ub_mu);
	if (rc == 0) {
		ub_remove_locked(u, UB_BORN);
	} else {
		u->tried = true;
		u->state = UB_UNBORN;
		pthread_cond_broadcast(&ub_cond);
	}
	pthread_mutex_unlock(&ub_mu);
}

/*
 * The writer's commits failed: an unborn name dies unstored (a put that
 * failed may have stored an empty row all the same: removed if it is
 * still empty). 0 if u was dead or unborn; -EEXIST if a settle made its
 * empty row, whose version *version then gets.
 */
int rfs_unborn_drop(struct rfs_unborn *u, uint64_t *version,
		    const struct rfs_entry_mark *mark)
{
	char esc[RFS_ESC_LEN];
	const char *region, *key;
	struct store_meta last;
	struct rfs_names l;
	bool tried, unborn;
	int rc = 0;

	if (!u)
		return 0;
	region = u->name;
	key = u->name + u->rlen + 1;
	rfs_names_lock(&l, region, key, u->klen, true);
	pthread_mutex_lock(&ub_mu);
	unborn = u->state == UB_UNBORN; /* never BIRTHING: excl. lock */
	tried = u->tried;
	if (u->state == UB_BORN) {
		*version = u->version;
		rc = -EEXIST;
	}
	if (unborn)
		ub_remove_locked(u, UB_DEAD);
	pthread_mutex_unlock(&ub_mu);
	if (unborn) {
		if (tried &&
		    store_stat(rfs.st, region, key, u->klen, &last) == 0 &&
		    last.size == 0 &&
		    delete_store(region, key, u->klen, &last.version) != 0)
			rfs_log(RFS_LOG_WARNING,
				"%s/%s: created, but no write to it was "
				"committed, and removing the empty key failed",
				region, rfs_escape(key, u->klen, esc));
		rfs_inode_unlinked(region, key, u->klen, NULL);
		if (!entry_clean(region, key, u->klen, mark))
			rfs_kinval_key(region, key, u->klen);
	}
	rfs_names_unlock(&l);
	return rc;
}

void rfs_unborn_free(struct rfs_unborn *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&ub_mu);
	if (u->state == UB_UNBORN)
		ub_remove_locked(u, UB_DEAD);
	pthread_mutex_unlock(&ub_mu);
	free(u);
}

/* ---- the operations ------------------------------------------------------- */

/*
 * The name has a new row of ours: changed(), but the kernel's entry is
 * invalidated only if the mark cannot show that it is not stale (checked
 * after the store has the row: a LOOKUP counts itself before it reads
 * the row, so one that read the old row has moved the count by then).
 */
static void notify_unless_clean(const char *region, const void *key,
				size_t klen, const struct rfs_entry_mark *mark)
{
	if (entry_clean(region, key, klen, mark))
		rfs_inode_changed(region, key, klen);
	else
		changed(region, key, klen);
}

/*
 * put_locked() in the region of id's name, resolved once. The kernel's
 * entry is invalidated unless the mark shows it cannot be stale, checked
 * after the store has the new row: a LOOKUP counts itself before it reads
 * the row, so one that read the old row has moved the count by then.
 */
static int put_id(const struct rfs_ident *id, const void *data, size_t len,
		  unsigned flags, bool cache, const struct rfs_entry_mark *mark)
{
	struct rfs_region *rr = write_begin(id->region);
	int rc = put_cached_locked(rr, id->region, id->key, id->klen, data, len,
				   flags, false, cache, NULL);

	if (rc == 0)
		notify_unless_clean(id->region, id->key, id->klen, mark);
	write_end(rr);
	return rc;
}

int rfs_commit_handle(fuse_ino_t ino, const void *data, size_t len,
		      unsigned flags, bool cache,
		      const struct rfs_entry_mark *mark, struct rfs_unborn *ub)
{
	char esc[RFS_ESC_LEN];
	struct rfs_names l;
	struct rfs_ident id;
	bool birth;
	int rc;

	rc = rfs_names_lock_ino(&l, ino, false, &id);
	if (rc)
		return rc;
	if (id.gone) {
		rfs_log(RFS_LOG_DEBUG, "%s/%s: unlinked while open, not stored",
			id.region, rfs_escape(id.key, id.klen, esc));
	} else {
		/* the create's row and the data in one commit */
		birth = ub_claim(ub);
		rc = put_id(&id, data, len, flags, cache, mark);
		if (birth)
			ub_claimed(ub, rc);
	}
	rfs_names_unlock(&l);
	if (rc == 0 && !id.gone)
		strict_wait(id.region);
	return rc;
}

int rfs_commit_create(const char *region, const char *key, size_t klen,
		      int oflags, pid_t pid, struct rfs_names *l,
		      fuse_ino_t *ino, enum rfs_kclass *cls,
		      struct rfs_unborn **created)
{
	struct store_meta m;
	int rc;

	*created = NULL;
	rfs_names_lock(l, region, key, klen, true);
	/* another writer's create that has not committed yet: it exists */
	rc = rfs_unborn_is(region, key, klen) ? 0 : -ENOENT;
	if (rc == 0 && !(oflags & O_EXCL))
		rc = rfs_unborn_settle_locked(region, key, klen);
	/*
	 * Missing when this thread's LOOKUP just asked (a negative note):
	 * the store is not asked again. O_EXCL always asks: it is checked
	 * against outside writers as exactly as before.
	 */
	if (rc == -ENOENT && !(oflags & O_EXCL) &&
	    rfs_names_absent_take(pid, region, key, klen))
		rfs_count(RFS_C_CREATE_NOTED, 1); /* rc stays -ENOENT */
	else if (rc == -ENOENT)
		rc = store_stat(rfs.st, region, key, klen, &m);
	if (rc == 0 && (oflags & O_EXCL))
		rc = -EEXIST;
	if (rc == -ENOENT) {
		/* nothing is stored until the writer's first commit */
		*created = ub_add(region, key, klen);
		rc = *created ? 0 : -ENOMEM;
	}
	if (!rc)
		rc = rfs_inode_lookup_key(region, key, klen, NULL, pid, true,
					  ino, cls);
	if (rc && *created) { /* no inode (ENOMEM): the create fails */
		rfs_unborn_free(*created);
		*created = NULL;
	}
	if (rc)
		rfs_names_unlock(l);
	return rc;
}

/* The row of id's name resized to size: data (malloc()ed) and its length. */
static int load_resized(const struct rfs_ident *id, off_t size, void **data,
			bool *same)
{
	struct store_meta m;
	void *p;
	int rc;

	*data = NULL;
	if (size == 0)
		rc = store_stat(rfs.st, id->region, id->key, id->klen, &m);
	else
		rc = store_load(rfs.st, id->region, id->key, id->klen, data,
				&m);
	*same = rc == 0 && m.size == (uint64_t)size;
	if (rc || *same || size == 0)
		return rc;
	p = realloc(*data, size);
	if (!p)
		return -ENOMEM;
	*data = p;
	if ((uint64_t)size > m.size)
		memset((char *)p + m.size, 0, size - m.size);
	return 0;
}

int rfs_commit_truncate(fuse_ino_t ino, off_t size,
			const struct rfs_entry_mark *mark)
{
	struct rfs_region *rr;
	struct rfs_names l;
	struct rfs_ident id;
	void *data = NULL;
	bool same = false;
	int rc;

	rc = rfs_names_lock_ino(&l, ino, true, &id);
	if (rc)
		return rc;
	rc = id.gone ? 0 : rfs_unborn_settle_locked(id.region, id.key, id.klen);
	if (rc) {
		rfs_names_unlock(&l);
		return rc;
	}
	rr = write_begin(id.region);
	rc = !rr ? -ENOENT : (uint64_t)size > value_limit(rr) ? -EFBIG : 0;
	if (!rc)
		rc = load_resized(&id, size, &data, &same);
	if (!rc && !same)
		rc = put_locked(rr, id.region, id.key, id.klen, data, size,
				region_flags(rr), false);
	if (!rc && !same)
		notify_unless_clean(id.region, id.key, id.klen, mark);
	write_end(rr);
	rfs_names_unlock(&l);
	free(data);
	if (rc == 0 && !same)
		strict_wait(id.region);
	return rc;
}

/* E1, the row's delete (only at *version when given), E2. Name lock held. */
static int delete_store(const char *region, const void *key, size_t klen,
			const uint64_t *version)
{
	struct rfs_region *rr = write_begin(region);
	unsigned flags = region_flags(rr);
	int rc;

	evict(rr, key, klen); /* E1 */
	rc = version ? store_delete_version(rfs.st, region, key, klen, *version,
					    flags)
		     : store_delete(rfs.st, region, key, klen, flags);
	lost_check(rc);
	evict(rr, key, klen); /* E2 */
	write_end(rr);
	return rc;
}

int rfs_commit_delete_created(const char *region, const void *key, size_t klen,
			      uint64_t version,
			      const struct rfs_entry_mark *mark)
{
	char esc[RFS_ESC_LEN];
	struct store_meta last;
	struct rfs_names l;
	int rc;

	rfs_names_lock(&l, region, key, klen, true);
	rc = store_stat(rfs.st, region, key, klen, &last);
	if (rc == 0 && (last.version != version || last.size != 0))
		rc = -ENOENT; /* changed since: not ours to remove */
	if (rc)
		goto out;
	rc = delete_store(region, key, klen, &version);
	if (rc == 0) {
		rfs_inode_unlinked(region, key, klen, &last);
		/* the kernel's entry names the writer's inode, or older */
		if (!entry_clean(region, key, klen, mark))
			rfs_kinval_key(region, key, klen);
		rfs_log(RFS_LOG_NOTICE,
			"%s/%s: created, but no write to it was committed: "
			"removed again",
			region, rfs_escape(key, klen, esc));
	} else if (rc != -ENOENT) {
		rfs_log(RFS_LOG_WARNING,
			"%s/%s: created, but no write to it was committed, "
			"and removing the empty key failed too: %s",
			region, rfs_escape(key, klen, esc), strerror(-rc));
	}
out:
	rfs_names_unlock(&l);
	return rc;
}

int rfs_commit_delete(const char *region, const void *key, size_t klen)
{
	char esc[RFS_ESC_LEN];
	struct store_meta last;
	struct rfs_names l;
	int rc;

	rfs_names_lock(&l, region, key, klen, true);
	rc = rfs_unborn_settle_locked(region, key, klen);
	/* a cached key needs no query: the delete says if it was gone */
	if (!rc)
		rc = rfs_key_meta(region, key, klen, &last);
	if (rc)
		goto out;
	rc = delete_store(region, key, klen, NULL);
	if (rc == 0 || rc == -ENOENT)
		rfs_inode_unlinked(region, key, klen, &last);
	if (rc == 0)
		rfs_count(RFS_C_UNLINKS, 1);
	else if (rc != -ENOENT)
		rfs_log(RFS_LOG_ERR, "unlink %s/%s: %s", region,
			rfs_escape(key, klen, esc), strerror(-rc));
out:
	rfs_names_unlock(&l);
	if (rc == 0)
		strict_wait(region);
	return rc;
}

/* E1, store_rename, E2 on both names. Both name locks held. */
static int rename_store(const char *region, const void *from, size_t flen,
			const void *to, size_t tlen)
{
	struct rfs_region *rr = write_begin(region);
	int rc;

	evict(rr, from, flen); /* E1 */
	evict(rr, to, tlen);
	rc = store_rename(rfs.st, region, from, flen, to, tlen,
			  region_flags(rr));
	lost_check(rc);
	evict(rr, from, flen); /* E2 */
	evict(rr, to, tlen);
	write_end(rr);
	return rc;
}

int rfs_commit_rename(const char *region, const void *from, size_t flen,
		      const void *to, size_t tlen, bool noreplace)
{
	char e1[RFS_ESC_LEN], e2[RFS_ESC_LEN];
	struct rfs_inode_names names = {NULL, 0};
	struct store_meta last;
	struct rfs_names l;
	bool replaced;
	int rc;

	names_lock2(&l, region, from, flen, to, tlen);
	rc = rfs_unborn_settle_locked(region, from, flen);
	if (!rc)
		rc = rfs_unborn_settle_locked(region, to, tlen);
	if (rc)
		goto out;
	rc = store_stat(rfs.st, region, to, tlen, &last);
	if (rc && rc != -ENOENT)
		goto out;
	replaced = rc == 0;
	/* not atomic against outside writers: the store has no NOREPLACE */
	rc = replaced && noreplace ? -EEXIST : 0;
	/* before the store: moving the inodes must not fail after it */
	if (!rc)
		rc = rfs_inode_rename_prepare(region, from, flen, to, tlen,
					      &names);
	if (!rc)
		rc = rename_store(region, from, flen, to, tlen);
	if (!rc) {
		/* the kernel moves its entries: marks of both names expire */
		rfs_names_handed(region, from, flen, NULL);
		rfs_names_handed(region, to, tlen, NULL);
		/* an inode made gone: the kernel's entry of to names it */
		if (!rfs_inode_renamed(region, from, flen, to, tlen,
				       replaced ? &last : NULL, &names))
			rfs_kinval_key(region, to, tlen);
		rfs_count(RFS_C_RENAMES, 1);
	} else if (rc != -ENOENT && rc != -EEXIST) {
		rfs_log(RFS_LOG_ERR, "rename %s/%s -> %s: %s", region,
			rfs_escape(from, flen, e1), rfs_escape(to, tlen, e2),
			strerror(-rc));
	}
out:
	rfs_names_unlock(&l);
	rfs_inode_names_free(&names);
	if (rc == 0)
		strict_wait(region);
	return rc;
}
