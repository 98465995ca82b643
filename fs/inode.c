/*
 * inode.c - inode numbers and the kernel's lookup counts.
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
 * Two hash tables share the nodes: by_ino (every node) and by_name (only
 * the live ones). A key inode follows its key through renames: rename
 * moves the node to the new name, so a file opened before the rename
 * commits to the new name at close. An unlinked key's node, or the node of
 * a rename's replaced target, is "gone": out of by_name, so a later lookup
 * of that name creates a new inode, but still in by_ino until the kernel
 * forgets it; getattr on it reports nlink 0 and the row's last size, and
 * write handles on it commit nothing (POSIX: data written to an unlinked
 * file vanishes with it).
 *
 * A node is freed when its lookup count is 0 and no write handle is
 * attached. Write handles attach to their inode because (1) getattr must
 * report the size the writer sees (the kernel re-reads attributes, attr
 * timeout 0, and an lseek(SEEK_END) or O_APPEND position comes from them)
 * and (2) RELEASE is asynchronous in the kernel and may be processed after
 * the FORGET of the same inode.
 *
 * Locking: one rwlock, writer-preferring so that creations and forgets are
 * not starved, protects both tables, every node's links, names, gone/last
 * and writer list. nlookup is an atomic so that the common operations -
 * LOOKUP of a name that already has an inode, GETATTR, OPEN - take the lock
 * shared only. Lock order: a handle's mu may be held when taking this lock,
 * never the reverse; under this lock only the atomics of write handles are
 * read. Every request costs the kernel 25-30 us (DESIGN.md), a shared
 * acquisition tens of ns; striping was considered and rejected because a
 * rename moves a node between stripes, which needs both stripes and the
 * node's own, in an order only known after the lookup.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fs.h"

#define MIN_BUCKETS 1024

struct inode {
	struct inode *ino_next;	 /* chain in by_ino */
	struct inode *name_next; /* chain in by_name (live only) */
	fuse_ino_t ino;
	atomic_uint_fast64_t nlookup; /* kernel references */
	uint64_t hash;		      /* of (kind, region, key) */
	enum rfs_ikind kind;
	bool gone;
	bool last_valid;
	struct store_meta last;	    /* a gone key's last row */
	struct rfs_handle *writers; /* open write handles */
	size_t rlen;		    /* region name length */
	size_t klen;
	char *name; /* region NUL key NUL, malloc()ed */
};

struct table {
	struct inode **b;
	size_t mask; /* buckets - 1 */
};

static struct {
	pthread_rwlock_t lock;
	struct table by_ino;	    /* L: lock */
	struct table by_name;	    /* L: lock */
	size_t count;		    /* L: lock; nodes */
	uint64_t next_ino;	    /* L: lock */
	uint64_t seed;		    /* immutable after init */
	atomic_uint_fast64_t nodes; /* gauge, read without the lock */
} it;

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/* FNV-1a over the name with a random basis, then a finalizer. */
static uint64_t name_hash(enum rfs_ikind kind, const char *region,
			  const void *key, size_t klen)
{
	const unsigned char *p = (const unsigned char *)region;
	uint64_t h = it.seed ^ (uint64_t)kind;
	size_t i;

	for (; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	h = (h ^ 0xff) * 0x100000001b3ULL;
	p = key;
	for (i = 0; i < klen; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return mix(h);
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
	return &it.by_ino.b[mix(ino) & it.by_ino.mask];
}

static struct inode **name_slot(uint64_t hash)
{
	return &it.by_name.b[hash & it.by_name.mask];
}

int rfs_inode_init(void)
{
	pthread_rwlockattr_t a;
	int rc;

	if (getrandom(&it.seed, sizeof(it.seed), 0) != sizeof(it.seed))
		it.seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)&it;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(
		&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	rc = -pthread_rwlock_init(&it.lock, &a);
	pthread_rwlockattr_destroy(&a);
	if (rc)
		return rc;
	it.next_ino = RFS_INO_DYNAMIC;
	if (table_init(&it.by_ino, MIN_BUCKETS) ||
	    table_init(&it.by_name, MIN_BUCKETS)) {
		rfs_inode_fini();
		return -ENOMEM;
	}
	return 0;
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
			free(n->name);
			free(n);
		}
	}
out:
	free(it.by_ino.b);
	free(it.by_name.b);
	it.by_ino.b = NULL;
	it.by_name.b = NULL;
	pthread_rwlock_destroy(&it.lock);
}

static bool node_is(const struct inode *n, uint64_t hash, enum rfs_ikind kind,
		    const char *region, size_t rlen, const void *key,
		    size_t klen)
{
	return n->hash == hash && n->kind == kind && n->rlen == rlen &&
	       n->klen == klen && memcmp(n->name, region, rlen) == 0 &&
	       memcmp(n->name + rlen + 1, key, klen) == 0;
}

/* The live node for a name. Lock held (either mode). */
static struct inode *find_name_locked(enum rfs_ikind kind, const char *region,
				      const void *key, size_t klen)
{
	uint64_t h = name_hash(kind, region, key, klen);
	size_t rlen = strlen(region);
	struct inode *n;

	for (n = *name_slot(h); n; n = n->name_next)
		if (node_is(n, h, kind, region, rlen, key, klen))
			return n;
	return NULL;
}

static struct inode *find_ino_locked(fuse_ino_t ino)
{
	struct inode *n;

	for (n = *ino_slot(ino); n; n = n->ino_next)
		if (n->ino == ino)
			return n;
	return NULL;
}

static void name_unlink_locked(struct inode *n)
{
	struct inode **pp = name_slot(n->hash);

	while (*pp && *pp != n)
		pp = &(*pp)->name_next;
	if (*pp)
		*pp = n->name_next;
	n->name_next = NULL;
}

static void name_link_locked(struct inode *n)
{
	struct inode **pp = name_slot(n->hash);

	n->name_next = *pp;
	*pp = n;
}

/* Doubles both tables when they get crowded; failure just keeps chains. */
static void grow_locked(void)
{
	struct table ni, nn;
	struct inode *n, *next;
	size_t i, size = (it.by_ino.mask + 1) * 2;

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
			n->ino_next = ni.b[mix(n->ino) & ni.mask];
			ni.b[mix(n->ino) & ni.mask] = n;
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

/* Creates a live node with one lookup. Write lock held. */
static struct inode *create_locked(enum rfs_ikind kind, const char *region,
				   const void *key, size_t klen)
{
	struct inode *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->rlen = strlen(region);
	n->klen = klen;
	n->name = make_name(region, n->rlen, key, klen);
	if (!n->name) {
		free(n);
		return NULL;
	}
	n->kind = kind;
	n->hash = name_hash(kind, region, key, klen);
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

int rfs_inode_lookup(enum rfs_ikind kind, const char *region, const void *key,
		     size_t klen, fuse_ino_t *ino)
{
	struct inode *n;
	int rc = 0;

	pthread_rwlock_rdlock(&it.lock);
	n = find_name_locked(kind, region, key, klen);
	if (n) {
		atomic_fetch_add(&n->nlookup, 1);
		*ino = n->ino;
	}
	pthread_rwlock_unlock(&it.lock);
	if (n)
		return 0;

	pthread_rwlock_wrlock(&it.lock);
	n = find_name_locked(kind, region, key, klen);
	if (n)
		atomic_fetch_add(&n->nlookup, 1);
	else
		n = create_locked(kind, region, key, klen);
	if (n)
		*ino = n->ino;
	else
		rc = -ENOMEM;
	pthread_rwlock_unlock(&it.lock);
	return rc;
}

fuse_ino_t rfs_inode_peek(const char *region, const void *key, size_t klen)
{
	struct inode *n;
	fuse_ino_t ino = 0;

	pthread_rwlock_rdlock(&it.lock);
	n = find_name_locked(RFS_I_KEY, region, key, klen);
	if (n)
		ino = n->ino;
	pthread_rwlock_unlock(&it.lock);
	return ino;
}

/* The size an attached writer with uncommitted data shows. Lock held. */
static void pending_locked(const struct inode *n, struct rfs_ident *out)
{
	const struct rfs_handle *h;
	uint64_t best = 0;

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

	pthread_rwlock_rdlock(&it.lock);
	n = find_ino_locked(ino);
	if (n) {
		out->kind = n->kind;
		out->gone = n->gone;
		memcpy(out->region, n->name, n->rlen + 1);
		memcpy(out->key, n->name + n->rlen + 1, n->klen + 1);
		out->klen = n->klen;
		out->last = n->last;
		out->last_valid = n->last_valid;
		pending_locked(n, out);
	}
	pthread_rwlock_unlock(&it.lock);
	return n ? 0 : -ENOENT;
}

/* Unlinks and frees n if nothing holds it. Write lock held. */
static void maybe_free_locked(struct inode *n)
{
	struct inode **pp;

	if (atomic_load(&n->nlookup) || n->writers)
		return;
	if (!n->gone)
		name_unlink_locked(n);
	for (pp = ino_slot(n->ino); *pp != n; pp = &(*pp)->ino_next)
		;
	*pp = n->ino_next;
	it.count--;
	atomic_fetch_sub(&it.nodes, 1);
	free(n->name);
	free(n);
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

void rfs_inode_forget(fuse_ino_t ino, uint64_t n)
{
	struct inode *node;
	uint64_t left = 1;

	if (ino < RFS_INO_DYNAMIC)
		return;
	pthread_rwlock_rdlock(&it.lock);
	node = find_ino_locked(ino);
	if (node)
		left = sub_lookups(node, n);
	pthread_rwlock_unlock(&it.lock);
	if (left)
		return;
	/* find it again: a racing forget may have freed it, a lookup revived */
	pthread_rwlock_wrlock(&it.lock);
	node = find_ino_locked(ino);
	if (node)
		maybe_free_locked(node);
	pthread_rwlock_unlock(&it.lock);
}

static void make_gone_locked(struct inode *n, const struct store_meta *last)
{
	name_unlink_locked(n);
	n->gone = true;
	if (last) {
		n->last = *last;
		n->last_valid = true;
	}
}

void rfs_inode_unlinked(const char *region, const void *key, size_t klen,
			const struct store_meta *last)
{
	struct inode *n;

	pthread_rwlock_wrlock(&it.lock);
	n = find_name_locked(RFS_I_KEY, region, key, klen);
	if (n)
		make_gone_locked(n, last);
	pthread_rwlock_unlock(&it.lock);
}

void rfs_inode_renamed(const char *region, const void *from, size_t flen,
		       const void *to, size_t tlen,
		       const struct store_meta *last)
{
	size_t rlen = strlen(region);
	char *name = make_name(region, rlen, to, tlen);
	struct inode *f, *t;

	pthread_rwlock_wrlock(&it.lock);
	t = find_name_locked(RFS_I_KEY, region, to, tlen);
	f = find_name_locked(RFS_I_KEY, region, from, flen);
	if (t && t != f)
		make_gone_locked(t, last);
	if (f && t != f) {
		if (name) {
			name_unlink_locked(f);
			free(f->name);
			f->name = name;
			name = NULL;
			f->klen = tlen;
			f->hash = name_hash(RFS_I_KEY, region, to, tlen);
			name_link_locked(f);
		} else {
			/* no memory for the new name: let it go */
			make_gone_locked(f, NULL);
		}
	}
	pthread_rwlock_unlock(&it.lock);
	free(name);
}

int rfs_inode_attach(fuse_ino_t ino, struct rfs_handle *h)
{
	struct inode *n;

	pthread_rwlock_wrlock(&it.lock);
	n = find_ino_locked(ino);
	if (n) {
		h->u.w.inode_next = n->writers;
		n->writers = h;
	}
	pthread_rwlock_unlock(&it.lock);
	return n ? 0 : -ENOENT;
}

void rfs_inode_detach(fuse_ino_t ino, struct rfs_handle *h)
{
	struct rfs_handle **pp;
	struct inode *n;

	pthread_rwlock_wrlock(&it.lock);
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
	pthread_rwlock_unlock(&it.lock);
}

uint64_t rfs_inode_count(void)
{
	return atomic_load_explicit(&it.nodes, memory_order_relaxed);
}
