/*
 * ops.c - the FUSE low-level operations.
 *
 * Names on the mount (DESIGN.md): the root holds one directory per region
 * of regions.ini and .regionfs/; a region directory holds keys only; every
 * key is a regular file. Requests are answered from three places: the
 * inode table (inode.c) says what a node id names, the region table
 * (state.c) says which regions exist, and the store answers for keys:
 * LOOKUP of a key takes (size, mtime, version) of its row from the cached
 * value when there is one, else from a store_stat() (rfs_key_meta()), and
 * GETATTR of an immutable inode answers from the inode, so listing and
 * stat never load values into the cache; OPEN goes through the cache
 * (handle.c).
 *
 * Kernel caching: one immutable inode per row, names cached and dropped
 * when they change. Every synchronous FUSE request costs 25-30 us
 * (DESIGN.md's table), so the number of requests per operation decides
 * small-file speed. A key's inode stands for one row of the store, (size,
 * mtime, version) as LOOKUP's store_stat() saw it; every commit (ours, a
 * rename onto the key, an outside write) makes a new row, and the next
 * LOOKUP a new inode (inode.c). The content of an RFS_K_PAGE inode never
 * changes, so the kernel may keep its pages and attributes with no
 * invalidation at all:
 *  - Key entries, and negative entries (a missing key), are cached for
 *    KEY_TIMEOUT, so a warm open is one OPEN and a stat none. What a name
 *    means changes only with a new row. unlink, rename and create through
 *    the mount update the kernel's entries themselves. A writer never
 *    works through a long-lived entry: a write open or truncate(2) of an
 *    inode that is not a writer's gets ESTALE, and the kernel's retry
 *    (LOOKUP_REVAL) a writer's inode, whose entry is not cached; while a
 *    writer is on a name, LOOKUP and READDIRPLUS hand out entries that
 *    are not cached either (key_entry()). So a commit of ours finds no
 *    long-lived entry of the name, unless a LOOKUP raced with the
 *    writer's open, which the entry mark catches (commit.c): then, and
 *    for outside changes, kinval.c's thread invalidates the entry, and
 *    close() replies after that (kinval.c has why own writes avoid
 *    notifications: a daemon killed while one waits hangs the mount). An
 *    inode whose row is no longer its name's (a commit made it not
 *    current) serves an open through an entry not yet dropped the
 *    current value with direct I/O, never its own pages (inode.c).
 *  - An RFS_K_PAGE inode's attributes are its row's, for KEY_TIMEOUT (a
 *    day), and a read-only open gets keep_cache without direct_io, but
 *    only if it is served the very value the inode's page cache holds
 *    (inode.c: the anchor, by load serial; while page-cache handles are
 *    open, the value they share). Otherwise (a commit between LOOKUP and
 *    OPEN, a cache older than the store until the change feed invalidates
 *    it, a reload after eviction) the handle gets the cache's value with
 *    direct_io and the inode stops granting the page cache: no byte of any
 *    other value can enter it. A warm open/read/close is OPEN and an
 *    asynchronous RELEASE; the read itself is served by the kernel.
 *  - The first read needs no READ either: the open that anchors an inode
 *    (its first page-cache open, inode.c "Filling": the kernel can hold
 *    no page of it yet) stores the value into the kernel's page cache
 *    with FUSE_NOTIFY_STORE (rfs_rhandle_fill(), handle.c) before the
 *    OPEN's reply, for values of 1 byte to RFS_FILL_MAX (128 KiB, where
 *    it pays: fs.h; larger ones, and empty ones, keep the READ path).
 *    Only the anchor's bytes are stored, so a commit between LOOKUP and
 *    OPEN, an outside change, an inode that stopped granting the page
 *    cache store nothing (their opens are direct), and an open that
 *    truncates or writes is a writer's (direct, never stored). A READ
 *    marks the kernel's atime stale when it completes
 *    (fuse_invalidate_atime(), but on a read-only superblock), so the
 *    stat() or fstat() after a first read cost a GETATTR; with the store
 *    no READ happens, and a read after a write is LOOKUP, OPEN (+
 *    RELEASE), the stat after it nothing. A failed store
 *    (counted in kernel_fill_failures) leaves READ to serve the rest.
 *    Measured (tests/bench/count_requests.sh -n 100, release builds):
 *    first read after a create LOOKUP, OPEN, READ, RELEASE before,
 *    LOOKUP, OPEN, RELEASE after; the read after it OPEN, GETATTR,
 *    RELEASE before, OPEN, RELEASE after; likewise after a rewrite.
 *    run_bench_fs.sh -n 1000 (base interleaved, medians of 3, 1/2/4
 *    threads, a loaded 2-vCPU VM): stat after rewrite+readback 4.7/7.3/
 *    5.0x (1 KiB) and 3.7/4.3/7.9x (64 KiB) the rate before, the first
 *    read 2.9/1.5/1.0x and 0.7/0.9/1.0x (a second run with 5 reps: 64
 *    KiB 1.1/1.1x; unchanged phases swing 0.7-1.3x).
 *    Kernel behaviour this relies on (Linux 6.x, fs/fuse/dev.c
 *    fuse_notify_store(), file.c fuse_open()): the store finds the inode
 *    by node id (-ENOENT, and nothing done, if the kernel has none);
 *    extends i_size, and drops the cached size, only if the store ends
 *    past it (it ends exactly at the row's size, the inode's); fills each
 *    page under its page lock, and marks it uptodate when the store
 *    covers it from its start to its end or to the file's size (the last
 *    page is zero-filled past the end); a read-only open holds no inode,
 *    directory or page lock while it waits for the OPEN's reply (the
 *    inode lock only for O_TRUNC with writeback cache or DAX: off), and
 *    keep_cache keeps the pages at the open. The store cannot wait on
 *    the daemon: while it runs no other file of the inode is open (other
 *    read opens wait, inode.c), so no page of it is locked by a read
 *    waiting for a READ.
 *  - Writes keep the old protocol (direct_io, FLUSH commits with E1,
 *    store_put, E2) on an inode of their own: a writer's open changes the
 *    kernel inode's size and pages under every other opener (O_TRUNC
 *    truncates them, a write past the end grows the size), so a write
 *    open of an inode that is not RFS_K_WRITE fails with ESTALE, the
 *    kernel walks the path again (LOOKUP_REVAL) and gets a writer's inode
 *    (inode.c's markers; live attributes, timeout 0). (inode.c can still
 *    turn an inode without page-cache readers into a writer's, and then
 *    invalidates what the kernel held of it; the daemon only gets there
 *    when a LOOKUP promoted a writer's inode between the ESTALE's retry
 *    and its OPEN.) When the
 *    writer is gone, its inode, whose page cache is provably empty,
 *    becomes the page-cache inode of the row at the next LOOKUP, so a read
 *    after a write needs no second LOOKUP to replace the kernel's dentry.
 *  - An older inode keeps answering with its own row, so its open readers
 *    go on with the bytes they opened. Old inodes go with FORGET.
 *  - Read-only opens set noflush: close() of a reader sends no FLUSH.
 *    Write opens need the FLUSH, because close() is where the commit
 *    happens and where its error is returned.
 *  - Zero-request opens (-o ro, when the kernel offers
 *    FUSE_CAP_NO_OPEN_SUPPORT; rfs.noopen): OPEN and FLUSH answer ENOSYS
 *    once, and the kernel sends neither again, nor RELEASE; every file
 *    is opened with keep_cache and no handle. READ is served by inode:
 *    the value pinned on the kernel's inode (inode.c, kpin; a LOOKUP
 *    that read its row from a cached value pins it at once), so one
 *    inode's pages still hold one value. Virtual files: the section
 *    "zero-request opens" below. doc/design.md has the costs. Nothing
 *    is stored into the page cache there: there is no OPEN, a LOOKUP's
 *    reply makes the kernel's inode only after the handler returns (a
 *    store from it finds none), and one sent after the reply would race
 *    the inode's creation and its first READ, and copy every looked-up
 *    value, also of keys that are only stat()ed; the first READ of an
 *    inode stays, and marks no atime stale (read-only superblock).
 *  - The root's region directories and everything under .regionfs/ change
 *    only on a reload, so they get DIR_TIMEOUT; the reload invalidates
 *    their dentries from the background thread (daemon.c).
 *  - Virtual files have size 0 in getattr (like /proc) and are served
 *    with direct_io, so readers read to EOF.
 * Measured with tests/bench/run_bench_fs.sh (10,000 values of 1 KiB, 2
 * vCPU VM, kernel 6.18, libfuse 3.14), against the direct-I/O scheme this
 * replaced, two runs each, interleaved: a reread (page-cache hit) went
 * from 7-8k to 12-13k ops/s on one thread, 15-17k to 22-24k on two,
 * 20-24k to 38-40k on four; a first read after a write from 7-8k to 8.3k,
 * 11-13k to 15-16k, 21-22k to 23-25k (the page is filled by one READ
 * instead of READ and READ at EOF); creates and rewrites within noise
 * (a rewrite pays a few us for the invalidation). The first version of
 * this scheme, without promotion, made a read after a write 15-35%
 * slower than before: one more LOOKUP and a FORGET per read.
 * Notifications: the write open's inode invalidation is sent from its
 * own handler (handle.c, enter_writer() has why that cannot deadlock),
 * and so is the first page-cache open's store (above); entry
 * invalidations only from kinval.c's thread.
 *
 * Semantics chosen where POSIX leaves room (the README lists them):
 *  - mtime/ctime/atime of a key are the row's mtime (its last commit).
 *    utimes/touch on a key or a region directory is accepted and ignored.
 *  - chmod/chown to anything but the current mode/owner: EPERM (owner,
 *    group, mode and dir_mode come from regions.ini per region; unset
 *    owner/group: the daemon's user or -o uid=,gid=). A read_only region
 *    answers every change with EROFS.
 *  - Under .regionfs/ and at the root: anything that would change content
 *    (open for writing, truncate, create inside .regionfs/) is EACCES,
 *    like a read-only file; anything that changes names or metadata
 *    (unlink, rename, mkdir, rmdir, chmod, utimes) is EPERM, like sysfs.
 *    create/mknod/mkdir/symlink/link at the root or in a region: EPERM.
 *  - rename across regions: EXDEV (mv falls back to copy and unlink).
 *    RENAME_NOREPLACE is checked with store_stat() before the rename, which
 *    is not atomic against outside writers; RENAME_EXCHANGE: EINVAL.
 *  - create of a new key commits an empty value at once (E1, put, E2), so
 *    the file exists for everyone before close(). O_EXCL is checked the
 *    same way as NOREPLACE.
 *  - A file is the row it was opened at: fstat() on a reader shows that
 *    row's size and mtime, also after an overwrite, a truncate(2) of the
 *    path or an unlink (then nlink 0). A writer's fstat() shows its
 *    pending size; stat() of the path by anyone else shows the committed
 *    row until the writer's close() commits.
 *  - mmap(MAP_SHARED, PROT_READ) of a key opened read-only works (page-
 *    cache handles); on a writer's file, and on a reader served with
 *    direct I/O, the kernel refuses it as before.
 *
 * Every handler ends in exactly one fuse_reply_*() on every path; no lock
 * is held across a reply or a store call (the helpers below take and drop
 * their locks inside).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fs.h"

#define DIR_TIMEOUT	3600.0
#define KEY_TIMEOUT	86400.0	      /* attributes of an immutable key inode */
#define RFS_UNKNOWN_INO 0xffffffffULL /* d_ino of keys without an inode */
#define STATFS_CACHE_MS 1000

static bool is_vfile(fuse_ino_t ino, const struct rfs_ident *id);

/* ---- replies ------------------------------------------------------------- */

/* rc is 0 or -errno. ESTALE asks the kernel to retry: not an error. */
static void reply_err(fuse_req_t req, int rc)
{
	if (rc < 0 && rc != -ESTALE)
		rfs_count(RFS_C_ERRORS, 1);
	fuse_reply_err(req, -rc);
}

/* An entry counts one lookup; give it back if the kernel never saw it. */
static void reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	if (fuse_reply_entry(req, e) == -ENOENT)
		rfs_inode_forget(e->ino, 1);
}

/* ---- attributes ---------------------------------------------------------- */

static void attr_init(struct stat *st, fuse_ino_t ino)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = rfs.uid;
	st->st_gid = rfs.gid;
	st->st_blksize = 4096;
	st->st_atim = rfs.mount_time;
	st->st_mtim = rfs.mount_time;
	st->st_ctim = rfs.mount_time;
}

static void dir_attr(struct stat *st, fuse_ino_t ino, mode_t perm,
		     nlink_t nlink)
{
	attr_init(st, ino);
	st->st_mode = S_IFDIR | perm;
	st->st_nlink = nlink;
}

static void vfile_attr(struct stat *st, fuse_ino_t ino)
{
	attr_init(st, ino);
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
}

static void key_attr(struct stat *st, fuse_ino_t ino,
		     const struct store_meta *m, nlink_t nlink,
		     const struct rfs_perms *p)
{
	attr_init(st, ino);
	st->st_uid = p->uid;
	st->st_gid = p->gid;
	st->st_mode = S_IFREG | p->mode;
	st->st_nlink = nlink;
	st->st_size = m->size;
	st->st_blocks = (m->size + 511) / 512;
	st->st_mtim.tv_sec = m->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = m->mtime_ns % 1000000000;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

static size_t nregions(void)
{
	return rfs_region_count();
}

static int fixed_attr(fuse_ino_t ino, struct stat *st)
{
	switch (ino) {
	case RFS_INO_ROOT:
		dir_attr(st, ino, 0755, 3 + nregions());
		return 0;
	case RFS_INO_VDIR:
		dir_attr(st, ino, 0555, 3);
		return 0;
	case RFS_INO_VREGIONS:
		dir_attr(st, ino, 0555, 2 + nregions());
		return 0;
	case RFS_INO_VSTATS:
	case RFS_INO_VMETRICS:
	case RFS_INO_VCONFIG:
		vfile_attr(st, ino);
		return 0;
	}
	return -ENOENT;
}

/* The realtime clock in ns, for a row that is still being written. */
/*
 * How long the kernel may keep a key's entry and attributes. A strict
 * region's (coherence = strict): not at all, so that a mount whose lease
 * lapsed (frozen, cut off) never has the kernel answer for it from old
 * entries once it runs again: every open and stat of such a key is a
 * LOOKUP, which rfs_hits_ok() gates. (Page-cache contents need no more:
 * an open always reaches the daemon, and a value loaded anew is served
 * with direct I/O, inode.c.)
 */
static double key_timeout(const struct rfs_perms *p)
{
	return p->strict ? 0 : KEY_TIMEOUT;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The row of a key as this mount knows it: from the cache when the value
 * is cached (it carries size, mtime and version; the cache holds no value
 * older than the store but for outside changes the change feed has not
 * yet delivered, the bound every read has), else store_stat() on the
 * covering index. A peek: neither a hit nor a miss in the region's stats.
 */
/* rfs_key_meta(), and the cached value it took the row from in *vout
 * (a reference; NULL when the store answered) if vout is not NULL. */
static int key_meta(const char *region, const void *key, size_t klen,
		    struct store_meta *m, struct region_value **vout)
{
	struct rfs_region *rr = rfs_region_ref(region);
	struct region_value *v;
	bool cached;

	if (vout)
		*vout = NULL;
	if (!rr)
		return -ENOENT;
	/* a strict region without a live lease asks the store (rfs_hits_ok) */
	cached = rfs_hits_ok(rr) && region_peek(rr->r, key, klen, &v);
	rfs_region_unref(rr);
	if (!cached)
		return store_stat(rfs.st, region, key, klen, m);
	m->size = region_value_len(v);
	m->mtime_ns = region_value_mtime(v);
	m->version = region_value_version(v);
	if (vout)
		*vout = v;
	else
		region_value_unref(v);
	return 0;
}

int rfs_key_meta(const char *region, const void *key, size_t klen,
		 struct store_meta *m)
{
	return key_meta(region, key, klen, m, NULL);
}

/*
 * A key's attributes. An immutable inode (RFS_K_PAGE, RFS_K_DIRECT) shows
 * the row it stands for, for KEY_TIMEOUT. A writer's inode shows the
 * name's row now, with the size an open writer sees if it has uncommitted
 * data, for no time at all; gone, its last row. nlink is 0 when gone.
 */
static int key_getattr(fuse_ino_t ino, const struct rfs_ident *id,
		       struct stat *st, double *timeout)
{
	struct store_meta m = {0};
	struct rfs_perms p;
	int rc = 0;

	rfs_region_perms(id->region, &p);
	*timeout = key_timeout(&p);
	if (id->cls != RFS_K_WRITE) {
		key_attr(st, ino, &id->row, id->gone ? 0 : 1, &p);
		return 0;
	}
	*timeout = 0;
	if (id->gone) {
		if (id->last_valid)
			m = id->last;
	} else if (rfs_unborn_is(id->region, id->key, id->klen)) {
		m.mtime_ns = now_ns(); /* no row yet: the writer's, below */
	} else {
		rc = store_stat(rfs.st, id->region, id->key, id->klen, &m);
		if (rc == -ENOENT && id->pending)
			rc = 0;
		if (rc)
			return rc;
	}
	if (id->pending) {
		m.size = id->pending_size;
		if (!m.mtime_ns)
			m.mtime_ns = now_ns();
	}
	key_attr(st, ino, &m, id->gone ? 0 : 1, &p);
	return 0;
}

static int ident_attr(fuse_ino_t ino, const struct rfs_ident *id,
		      struct stat *st, double *timeout)
{
	struct rfs_perms p;

	*timeout = DIR_TIMEOUT;
	if (id->kind == RFS_I_KEY)
		return key_getattr(ino, id, st, timeout);
	if (!rfs_region_perms(id->region, &p))
		return -ENOENT;
	if (id->kind == RFS_I_REGION) {
		dir_attr(st, ino, p.dir_mode, 2);
		st->st_uid = p.uid;
		st->st_gid = p.gid;
	} else if (id->kind == RFS_I_VREGION)
		dir_attr(st, ino, 0555, 2);
	else
		vfile_attr(st, ino);
	return 0;
}

static int do_getattr(fuse_ino_t ino, struct stat *st, double *timeout)
{
	struct rfs_ident id;
	int rc;

	*timeout = DIR_TIMEOUT;
	if (ino < RFS_INO_DYNAMIC)
		return fixed_attr(ino, st);
	rc = rfs_inode_ident(ino, &id);
	if (rc)
		return rc;
	return ident_attr(ino, &id, st, timeout);
}

/* ---- names --------------------------------------------------------------- */

/* A key name's length: 1..255 bytes (the kernel rules out '/' and NUL). */
static int key_len(const char *name, size_t *len)
{
	*len = strlen(name);
	if (*len > REGION_MAX_KEY)
		return -ENAMETOOLONG;
	return *len ? 0 : -EINVAL;
}

/*
 * The region directory that parent is, in *id: -EPERM for the root and
 * .regionfs/ (nothing there can be changed), -ENOTDIR for a file,
 * -ENOENT for a number we do not know or a region that is gone.
 */
static int region_parent(fuse_ino_t parent, struct rfs_ident *id)
{
	int rc;

	if (parent == RFS_INO_ROOT || parent == RFS_INO_VDIR ||
	    parent == RFS_INO_VREGIONS)
		return -EPERM;
	if (parent < RFS_INO_DYNAMIC)
		return -ENOTDIR;
	rc = rfs_inode_ident(parent, id);
	if (rc)
		return rc;
	if (id->kind == RFS_I_VREGION)
		return -EPERM;
	if (id->kind != RFS_I_REGION)
		return -ENOTDIR;
	return rfs_region_exists(id->region) ? 0 : -ENOENT;
}

/* ---- lookup -------------------------------------------------------------- */

static void fill_entry(struct fuse_entry_param *e, const struct stat *st,
		       double attr_timeout, double entry_timeout)
{
	e->ino = st->st_ino;
	e->generation = 0;
	e->attr = *st;
	e->attr_timeout = attr_timeout;
	e->entry_timeout = entry_timeout;
}

static int lookup_fixed(fuse_ino_t ino, struct fuse_entry_param *e)
{
	struct stat st;

	fixed_attr(ino, &st);
	fill_entry(e, &st, DIR_TIMEOUT, DIR_TIMEOUT);
	return 0;
}

/* A region's directory, or its .regionfs/regions/ directory or file. */
static int lookup_region_node(enum rfs_ikind kind, const char *region,
			      struct fuse_entry_param *e)
{
	struct rfs_ident id = {.kind = kind};
	fuse_ino_t ino;
	struct stat st;
	double timeout;
	int rc;

	if (strlen(region) > REGION_MAX_NAME || !rfs_region_exists(region))
		return -ENOENT;
	rc = rfs_inode_lookup(kind, region, &ino);
	if (rc)
		return rc;
	strcpy(id.region, region);
	rc = ident_attr(ino, &id, &st, &timeout);
	if (rc) {
		rfs_inode_forget(ino, 1);
		return rc;
	}
	fill_entry(e, &st, timeout, timeout);
	return 0;
}

/*
 * The entry of key inode ino for row m (cls: its class). A writer's inode
 * has live attributes, as getattr has them, and is asked for every time;
 * so is any entry of a name a writer is on, so that its commit finds no
 * long-lived entry to invalidate (commit.c, struct rfs_entry_mark).
 */
static void key_entry(const char *region, const char *name, size_t len,
		      fuse_ino_t ino, enum rfs_kclass cls, struct store_meta *m,
		      struct fuse_entry_param *e)
{
	double timeout, entry_timeout;
	struct rfs_ident id;
	struct rfs_perms p;
	struct stat st;

	rfs_region_perms(region, &p);
	timeout = key_timeout(&p);
	if (cls == RFS_K_WRITE) {
		timeout = 0;
		if (rfs_inode_ident(ino, &id) == 0 && id.pending)
			m->size = id.pending_size;
	}
	entry_timeout = timeout;
	if (timeout && rfs_inode_writing(region, name, len))
		entry_timeout = 0;
	key_attr(&st, ino, m, 1, &p);
	fill_entry(e, &st, timeout, entry_timeout);
}

/*
 * A key: the inode for the row the store has now, as rfs_key_meta() knows it
 * (inode.c), so a changed key is a new inode. The entry is cached for
 * KEY_TIMEOUT (see key_entry()), a missing key as a negative entry;
 * kinval.c drops them when the name changes in ways the kernel does not
 * see.
 */
static int lookup_key(pid_t pid, const char *region, const char *name,
		      struct fuse_entry_param *e)
{
	struct region_value *v = NULL, *pinned;
	struct rfs_entry_mark mark;
	struct rfs_absent absent;
	struct store_meta m;
	struct rfs_names l;
	enum rfs_kclass cls;
	fuse_ino_t ino;
	size_t len;
	int rc;

	rc = key_len(name, &len);
	if (rc)
		return rc;
	/* an unlink between the stat and the inode would leave an inode
	 * that is not gone for a key that is (commit.c) */
	rfs_names_lock(&l, region, name, len, false);
	rfs_names_handed(region, name, len, &mark); /* before the row is read */
	rfs_names_absent_begin(region, name, len, &absent);
	rc = rfs_unborn_settle_locked(region, name, len);
	if (!rc)
		rc = key_meta(region, name, len, &m,
			      atomic_load(&rfs.noopen) ? &v : NULL);
	if (!rc)
		rc = rfs_inode_lookup_key(region, name, len, &m, pid, false,
					  &ino, &cls);
	if (!rc && cls == RFS_K_WRITE)
		rfs_inode_set_mark(ino, &mark); /* a refused writer's retry */
	/*
	 * Zero-request opens: the inode's READs serve the value its row was
	 * read from, pinned now that we have it (inode.c), so that a change
	 * before the first READ cannot leave it without its bytes.
	 */
	if (!rc && v && rfs_inode_kernel_value(ino, v, &pinned) == 0)
		region_value_unref(pinned);
	region_value_unref(v);
	if (rc == -ENOENT) /* for a CREATE that follows (commit.c) */
		rfs_names_absent_note(pid, region, name, len, &absent);
	rfs_names_unlock(&l);
	if (rc == -ENOENT) {
		struct rfs_perms p;

		/* a negative entry: whoever creates the key tells the kernel */
		memset(e, 0, sizeof(*e));
		rfs_region_perms(region, &p);
		e->entry_timeout = key_timeout(&p);
		return 0;
	}
	if (!rc)
		key_entry(region, name, len, ino, cls, &m, e);
	return rc;
}

static int lookup_vdir(const char *name, struct fuse_entry_param *e)
{
	if (strcmp(name, "stats") == 0)
		return lookup_fixed(RFS_INO_VSTATS, e);
	if (strcmp(name, "metrics.prom") == 0)
		return lookup_fixed(RFS_INO_VMETRICS, e);
	if (strcmp(name, "config") == 0)
		return lookup_fixed(RFS_INO_VCONFIG, e);
	if (strcmp(name, "regions") == 0)
		return lookup_fixed(RFS_INO_VREGIONS, e);
	return -ENOENT;
}

static int lookup_dynamic(fuse_req_t req, fuse_ino_t parent, const char *name,
			  struct fuse_entry_param *e)
{
	struct rfs_ident id;
	int rc;

	rc = rfs_inode_ident(parent, &id);
	if (rc)
		return rc;
	switch (id.kind) {
	case RFS_I_REGION:
		if (!rfs_region_exists(id.region))
			return -ENOENT;
		return lookup_key(fuse_req_ctx(req)->pid, id.region, name, e);
	case RFS_I_VREGION:
		if (strcmp(name, "stats") == 0)
			return lookup_region_node(RFS_I_VREGION_STATS,
						  id.region, e);
		if (strcmp(name, "config") == 0)
			return lookup_region_node(RFS_I_VREGION_CONFIG,
						  id.region, e);
		return -ENOENT;
	default:
		return -ENOTDIR;
	}
}

static void rfs_ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rfs_ident id = {.kind = RFS_I_REGION};
	struct fuse_entry_param e;
	int rc;

	rfs_count(RFS_C_LOOKUPS, 1);
	memset(&e, 0, sizeof(e));
	if (strlen(name) > REGION_MAX_KEY)
		rc = -ENAMETOOLONG;
	else if (parent == RFS_INO_ROOT && strcmp(name, "." RFS_VDIR_NAME) == 0)
		rc = lookup_fixed(RFS_INO_VDIR, &e);
	else if (parent == RFS_INO_ROOT)
		rc = lookup_region_node(RFS_I_REGION, name, &e);
	else if (parent == RFS_INO_VDIR)
		rc = lookup_vdir(name, &e);
	else if (parent == RFS_INO_VREGIONS)
		rc = lookup_region_node(RFS_I_VREGION, name, &e);
	else if (parent < RFS_INO_DYNAMIC)
		rc = -ENOTDIR;
	else
		rc = lookup_dynamic(req, parent, name, &e);
	if (!rc && atomic_load(&rfs.noopen) && S_ISREG(e.attr.st_mode) &&
	    (e.ino < RFS_INO_DYNAMIC || rfs_inode_ident(e.ino, &id) == 0) &&
	    is_vfile(e.ino, &id))
		e.attr_timeout = 0; /* GETATTR makes the snapshot: see above */
	if (rc)
		reply_err(req, rc);
	else
		reply_entry(req, &e);
}

static void rfs_ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	rfs_inode_forget(ino, nlookup);
	fuse_reply_none(req);
}

static void rfs_ll_forget_multi(fuse_req_t req, size_t count,
				struct fuse_forget_data *forgets)
{
	size_t i;

	for (i = 0; i < count; i++)
		rfs_inode_forget(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* ---- getattr / setattr --------------------------------------------------- */

/* ---- zero-request opens -------------------------------------------------- */

/*
 * On a zero-request mount (rfs.noopen) the kernel sends no OPEN, FLUSH or
 * RELEASE: every file is read through its page cache with no handle, and
 * a virtual file cannot be one snapshot per open, served with direct I/O.
 * Instead each reading thread (the request's pid) gets a snapshot, made
 * by the GETATTR that the kernel sends before a read that reaches the
 * cached size (attribute timeout 0, size 0 at LOOKUP), and kept for
 * VSNAP_MS so that the read at the end of the file, which asks GETATTR
 * again, finds the same size and ends; its mtime is the snapshot's, so
 * a new snapshot drops the old pages (FUSE_CAP_AUTO_INVAL_DATA).
 */
#define VSNAPS	 32
#define VSNAP_MS 1000

struct vsnap {
	fuse_ino_t ino; /* 0: free */
	pid_t pid;
	char *buf;
	size_t len;
	int64_t made_ns; /* also its mtime */
	uint64_t used;	 /* LRU tick */
};

static struct {
	pthread_mutex_t mu;
	struct vsnap s[VSNAPS]; /* L: mu */
	uint64_t tick;		/* L: mu */
	int64_t last_ns;	/* L: mu; made_ns are strictly increasing */
} vsnaps = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool is_vfile(fuse_ino_t ino, const struct rfs_ident *id)
{
	if (ino == RFS_INO_VSTATS || ino == RFS_INO_VMETRICS ||
	    ino == RFS_INO_VCONFIG)
		return true;
	return ino >= RFS_INO_DYNAMIC && (id->kind == RFS_I_VREGION_STATS ||
					  id->kind == RFS_I_VREGION_CONFIG);
}

static int vfile_kind(fuse_ino_t ino, const struct rfs_ident *id,
		      enum rfs_vfile *kind);
static int render_virtual(enum rfs_vfile kind, const char *region, char **buf,
			  size_t *len);

/*
 * pid's snapshot of virtual file ino (a copy in *buf, *len; malloc()ed),
 * made anew if fresh or if it has none younger than VSNAP_MS; *mtime_ns
 * is its mtime.
 */
static int vsnap_get(fuse_ino_t ino, const struct rfs_ident *id, pid_t pid,
		     bool fresh, char **buf, size_t *len, int64_t *mtime_ns)
{
	struct vsnap *s, *slot = NULL;
	enum rfs_vfile kind;
	char *nb = NULL;
	size_t nlen = 0;
	int64_t now = now_ns();
	int rc;
	size_t i;

	pthread_mutex_lock(&vsnaps.mu);
	for (i = 0; i < VSNAPS; i++) {
		s = &vsnaps.s[i];
		if (s->ino == ino && s->pid == pid) {
			slot = s;
			break;
		}
	}
	if (slot && !fresh && now - slot->made_ns < VSNAP_MS * 1000000LL)
		goto copy;
	pthread_mutex_unlock(&vsnaps.mu);
	rc = vfile_kind(ino, id, &kind);
	if (!rc)
		rc = render_virtual(kind, id->region, &nb, &nlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&vsnaps.mu);
	slot = NULL;
	for (i = 0; i < VSNAPS; i++) {
		s = &vsnaps.s[i];
		if (s->ino == ino && s->pid == pid) {
			slot = s;
			break;
		}
		if (!slot || s->used < slot->used)
			slot = s; /* the least recently used, or a free one */
	}
	free(slot->buf);
	slot->ino = ino;
	slot->pid = pid;
	slot->buf = nb;
	slot->len = nlen;
	if (now <= vsnaps.last_ns)
		now = vsnaps.last_ns + 1;
	vsnaps.last_ns = now;
	slot->made_ns = now;
copy:
	slot->used = ++vsnaps.tick;
	*len = slot->len;
	*mtime_ns = slot->made_ns;
	*buf = malloc(slot->len ? slot->len : 1);
	if (*buf)
		memcpy(*buf, slot->buf, slot->len);
	pthread_mutex_unlock(&vsnaps.mu);
	return *buf ? 0 : -ENOMEM;
}

/* GETATTR of a virtual file on a zero-request mount: pid's snapshot. */
static int vfile_noopen_attr(fuse_ino_t ino, const struct rfs_ident *id,
			     pid_t pid, struct stat *st)
{
	int64_t mtime;
	size_t len;
	char *buf;
	int rc;

	rc = vsnap_get(ino, id, pid, false, &buf, &len, &mtime);
	if (rc)
		return rc;
	free(buf);
	st->st_size = len;
	st->st_blocks = (len + 511) / 512;
	st->st_mtim.tv_sec = mtime / 1000000000;
	st->st_mtim.tv_nsec = mtime % 1000000000;
	st->st_ctim = st->st_mtim;
	return 0;
}

static void rfs_ll_getattr(fuse_req_t req, fuse_ino_t ino,
			   struct fuse_file_info *fi)
{
	struct rfs_ident id = {.kind = RFS_I_REGION};
	struct stat st;
	double timeout;
	int rc;

	(void)fi;
	rfs_linger_opened(ino); /* the kernel has this inode now */
	rc = do_getattr(ino, &st, &timeout);
	if (!rc && atomic_load(&rfs.noopen) && S_ISREG(st.st_mode) &&
	    (ino < RFS_INO_DYNAMIC || rfs_inode_ident(ino, &id) == 0) &&
	    is_vfile(ino, &id)) {
		rc = vfile_noopen_attr(ino, &id, fuse_req_ctx(req)->pid, &st);
		timeout = 0;
	}
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &st, timeout);
}

static bool is_virtual(fuse_ino_t ino, const struct rfs_ident *id)
{
	if (ino < RFS_INO_DYNAMIC)
		return ino != RFS_INO_ROOT;
	return id->kind != RFS_I_KEY && id->kind != RFS_I_REGION;
}

/* True if the region is read_only in regions.ini: changes get EROFS. */
static bool region_ro(const char *region)
{
	struct rfs_perms p;

	return rfs_region_perms(region, &p) && p.read_only;
}

/*
 * What setattr may change on ino: size only on keys; mode and owner only
 * to their current values; times are accepted and ignored on keys and
 * directories outside .regionfs/.
 */
static int setattr_check(fuse_ino_t ino, const struct rfs_ident *id,
			 const struct stat *cur, const struct stat *attr,
			 int to_set)
{
	bool dir = S_ISDIR(cur->st_mode);

	if (is_virtual(ino, id))
		return (to_set & FUSE_SET_ATTR_SIZE) ? (dir ? -EISDIR : -EACCES)
						     : -EPERM;
	if ((to_set & FUSE_SET_ATTR_SIZE) && dir)
		return -EISDIR;
	if ((to_set & FUSE_SET_ATTR_MODE) &&
	    (attr->st_mode & 07777) != (cur->st_mode & 07777))
		return -EPERM;
	if ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != cur->st_uid)
		return -EPERM;
	if ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != cur->st_gid)
		return -EPERM;
	if ((to_set & FUSE_SET_ATTR_SIZE) && region_ro(id->region))
		return -EROFS;
	return 0;
}

/*
 * ftruncate() on a write handle edits its buffer; truncate(2) of a path
 * loads, resizes and commits at once (commit.c). Like open, the latter
 * goes by the name, also for an inode a rename has just replaced.
 */
static int setattr_size(pid_t pid, fuse_ino_t ino, off_t size,
			struct fuse_file_info *fi)
{
	struct rfs_handle *h = fi ? (struct rfs_handle *)fi->fh : NULL;
	struct rfs_entry_mark mark;
	int rc;

	if (h && h->kind == RFS_H_WRITE)
		return rfs_whandle_truncate(h, size);
	/*
	 * The path's inode is cached with its row's attributes: it becomes
	 * a writer's (live attributes; ESTALE if page-cache readers have
	 * it open, and the kernel's retry gets a writer's inode), so the
	 * reply, and the caller's next stat, show the new size.
	 */
	rc = rfs_truncate_enter(ino, pid, &mark);
	if (!rc)
		rc = rfs_commit_truncate(ino, size, &mark);
	return rc;
}

static void rfs_ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			   int to_set, struct fuse_file_info *fi)
{
	struct rfs_ident id = {.kind = RFS_I_REGION};
	struct stat cur;
	double timeout;
	int rc = 0;

	if (ino >= RFS_INO_DYNAMIC)
		rc = rfs_inode_ident(ino, &id);
	if (!rc)
		rc = do_getattr(ino, &cur, &timeout);
	if (!rc)
		rc = setattr_check(ino, &id, &cur, attr, to_set);
	if (!rc && (to_set & FUSE_SET_ATTR_SIZE))
		rc = setattr_size(fuse_req_ctx(req)->pid, ino, attr->st_size,
				  fi);
	if (!rc && (to_set & FUSE_SET_ATTR_SIZE))
		rc = do_getattr(ino, &cur, &timeout);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &cur, timeout);
}

/* ---- namespace changes --------------------------------------------------- */

/* mkdir, mknod, symlink, link: never allowed; ENOTDIR under a file. */
static int refuse_new(fuse_ino_t parent)
{
	struct rfs_ident id;
	int rc = region_parent(parent, &id);

	return rc == -ENOTDIR || rc == -ENOENT ? rc : -EPERM;
}

static void rfs_ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
			 mode_t mode)
{
	(void)name;
	(void)mode;
	reply_err(req, refuse_new(parent));
}

static void rfs_ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
			 mode_t mode, dev_t rdev)
{
	(void)name;
	(void)mode;
	(void)rdev;
	reply_err(req, refuse_new(parent));
}

static void rfs_ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
			   const char *name)
{
	(void)link;
	(void)name;
	reply_err(req, refuse_new(parent));
}

static void rfs_ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
			const char *newname)
{
	(void)ino;
	(void)newname;
	reply_err(req, refuse_new(newparent));
}

static void rfs_ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rfs_ident id;
	int rc = region_parent(parent, &id);

	(void)name;
	/* regions come from regions.ini; keys are not directories */
	reply_err(req, rc == 0 ? -ENOTDIR : rc);
}

static void rfs_ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rfs_ident id;
	size_t len;
	int rc;

	rc = region_parent(parent, &id);
	if (!rc && region_ro(id.region))
		rc = -EROFS;
	if (!rc)
		rc = key_len(name, &len);
	if (!rc)
		rc = rfs_commit_delete(id.region, name, len);
	reply_err(req, rc);
}

static int do_rename(fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		     const char *newname, unsigned flags)
{
	struct rfs_ident from, to;
	size_t flen, tlen;
	int rc;

	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return -EINVAL; /* RENAME_EXCHANGE, RENAME_WHITEOUT */
	rc = region_parent(parent, &from);
	if (!rc)
		rc = region_parent(newparent, &to);
	if (rc)
		return rc;
	if (strcmp(from.region, to.region) != 0)
		return -EXDEV;
	if (region_ro(from.region))
		return -EROFS;
	rc = key_len(name, &flen);
	if (!rc)
		rc = key_len(newname, &tlen);
	if (rc)
		return rc;
	return rfs_commit_rename(from.region, name, flen, newname, tlen,
				 flags & RENAME_NOREPLACE);
}

static void rfs_ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			  fuse_ino_t newparent, const char *newname,
			  unsigned int flags)
{
	reply_err(req, do_rename(parent, name, newparent, newname, flags));
}

/* ---- open / create ------------------------------------------------------- */

/* The .regionfs file ino names, for rfs_virtual_render(). */
static int vfile_kind(fuse_ino_t ino, const struct rfs_ident *id,
		      enum rfs_vfile *kind)
{
	switch (ino) {
	case RFS_INO_VSTATS:
		*kind = RFS_V_STATS;
		return 0;
	case RFS_INO_VMETRICS:
		*kind = RFS_V_METRICS;
		return 0;
	case RFS_INO_VCONFIG:
		*kind = RFS_V_CONFIG;
		return 0;
	}
	if (ino < RFS_INO_DYNAMIC)
		return -EISDIR;
	if (id->kind == RFS_I_VREGION_STATS)
		*kind = RFS_V_REGION_STATS;
	else if (id->kind == RFS_I_VREGION_CONFIG)
		*kind = RFS_V_REGION_CONFIG;
	else
		return id->kind == RFS_I_KEY ? -EINVAL : -EISDIR;
	return 0;
}

/* Renders a virtual file into a malloc()ed buffer. */
static int render_virtual(enum rfs_vfile kind, const char *region, char **buf,
			  size_t *len)
{
	struct rfs_view_hold vh;
	long idx = 0;
	int rc;

	rc = rfs_view_build(&vh);
	if (rc)
		return rc;
	if (kind == RFS_V_REGION_STATS || kind == RFS_V_REGION_CONFIG)
		idx = rfs_table_index(vh.t, region);
	rc = idx < 0 ? -ENOENT
		     : rfs_virtual_render(&vh.view, kind, idx, buf, len);
	rfs_view_release(&vh);
	return rc;
}

/* Renders a virtual file into a new handle: one snapshot per open. */
static int open_virtual(enum rfs_vfile kind, const char *region, int flags,
			struct rfs_handle **out)
{
	struct rfs_handle *h;
	int rc;

	*out = NULL;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		return -EACCES;
	h = rfs_handle_new(RFS_H_VIRTUAL);
	if (!h)
		return -ENOMEM;
	rc = render_virtual(kind, region, &h->u.virt.buf, &h->u.virt.len);
	if (rc) {
		rfs_handle_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

static bool read_only(int flags)
{
	return (flags & O_ACCMODE) == O_RDONLY && !(flags & O_TRUNC);
}

/*
 * Opens a key: a value reference to read, or a private buffer to write.
 * A gone inode (the kernel resolved the name just before a rename
 * replaced it or an unlink removed it) still opens for reading, by name:
 * a reader gets the value the name has now (the rename's new value: old
 * or new, never ENOENT for a name that stayed visible throughout, as
 * POSIX requires), or the inode's own value if page-cache readers have it
 * open. A writer gets ESTALE (handle.c): the kernel walks the path again
 * and opens, or with O_CREAT creates, what the name is now; opening the
 * gone inode would fail open(O_CREAT|O_TRUNC) with ENOENT. locked: the
 * caller (create) holds the name's lock (commit.c).
 */
static int open_key(pid_t pid, fuse_ino_t ino, const struct rfs_ident *id,
		    int flags, struct rfs_unborn *created, bool locked,
		    struct rfs_handle **out)
{
	struct rfs_region *rr;
	int rc;

	*out = NULL;
	rr = rfs_region_ref(id->region);
	if (!rr)
		return -ENOENT;
	if (read_only(flags)) {
		/* another writer's created key: its empty row, as before
		 * (create() settled its own) */
		rc = locked ? 0
			    : rfs_unborn_settle(id->region, id->key, id->klen);
		if (!rc)
			rc = rfs_rhandle_open(rr, ino, id, out);
	} else if (rr->cfg.read_only)
		rc = -EROFS; /* regions.ini: read_only = true */
	else
		rc = rfs_whandle_open(rr, ino, pid, id->key, id->klen, flags,
				      created, locked, out);
	rfs_region_unref(rr);
	if (!rc)
		rfs_count(RFS_C_OPENS, 1);
	return rc;
}

/* A read handle on an immutable inode keeps its pages; all else direct. */
static void set_open_flags(struct fuse_file_info *fi, struct rfs_handle *h)
{
	bool pcache = h->kind == RFS_H_READ && h->u.r.pcache;

	fi->fh = (uintptr_t)h;
	fi->direct_io = !pcache;
	fi->keep_cache = pcache;
	fi->noflush = h->kind != RFS_H_WRITE;
}

static void reply_open(fuse_req_t req, struct fuse_file_info *fi,
		       struct rfs_handle *h)
{
	if (fuse_reply_open(req, fi) == -ENOENT)
		rfs_handle_free(h); /* interrupted: no RELEASE will come */
}

struct open_reply {
	fuse_req_t req;
	struct fuse_file_info fi;
	struct rfs_handle *h;
};

static void send_open(void *arg)
{
	struct open_reply *o = arg;

	reply_open(o->req, &o->fi, o->h);
	free(o);
}

/*
 * A write open that made the inode a writer's queued the invalidation of
 * its name's entry (handle.c): the reply waits for it, so that nobody's
 * stat of the path shows this writer's pending size. The kernel holds no
 * lock across an OPEN (the writeback cache, under which it holds the
 * inode's for O_TRUNC, is off: rfs_ll_init()), so the wait is safe.
 */
static void reply_open_later(fuse_req_t req, struct fuse_file_info *fi,
			     struct rfs_handle *h)
{
	struct open_reply *o = malloc(sizeof(*o));

	if (!o) {
		reply_open(req, fi, h);
		return;
	}
	o->req = req;
	o->fi = *fi;
	o->h = h;
	rfs_kinval_then(send_open, o);
}

static void rfs_ll_open(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct rfs_ident id = {.kind = RFS_I_REGION};
	struct rfs_handle *h = NULL;
	enum rfs_vfile kind;
	int rc = 0;

	rfs_linger_opened(ino); /* the kernel has this inode now */
	if (atomic_load(&rfs.noopen)) {
		/* zero-request opens: the kernel stops asking (see above);
		 * not an error */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (ino >= RFS_INO_DYNAMIC)
		rc = rfs_inode_ident(ino, &id);
	if (!rc && id.kind == RFS_I_KEY && atomic_load(&rfs.draining))
		rc = -ESHUTDOWN; /* SIGTERM: waiting for writers to close */
	else if (!rc && ino >= RFS_INO_DYNAMIC && id.kind == RFS_I_KEY)
		rc = open_key(fuse_req_ctx(req)->pid, ino, &id, fi->flags, NULL,
			      false, &h);
	else if (!rc && !(rc = vfile_kind(ino, &id, &kind)))
		rc = open_virtual(kind, id.region, fi->flags, &h);
	if (rc) {
		reply_err(req, rc);
		return;
	}
	set_open_flags(fi, h);
	if (h->kind == RFS_H_WRITE) {
		reply_open_later(req, fi, h);
		return;
	}
	if (h->kind == RFS_H_READ && h->u.r.resync) {
		/* reads of new bytes, the kernel's attributes of another
		 * row: the name's entry goes first (the next stat() looks
		 * it up again), as a writer's open does (above) */
		rfs_kinval_key(id.region, id.key, id.klen);
		rfs_count(RFS_C_OPEN_RESYNCS, 1);
		reply_open_later(req, fi, h);
		return;
	}
	rfs_rhandle_fill(h); /* the first page-cache open: see the top */
	reply_open(req, fi, h);
}

/*
 * create(): 0 with *ino (one lookup counted) and *h. The inode is a
 * writer's (inode.c), never the one page-cache readers of the name use.
 */
static int do_create(pid_t pid, fuse_ino_t parent, const char *name,
		     mode_t mode, int flags, fuse_ino_t *ino,
		     struct rfs_handle **h)
{
	struct rfs_unborn *created;
	struct rfs_ident id;
	struct rfs_names l;
	enum rfs_kclass cls;
	size_t len;
	int rc;

	rc = region_parent(parent, &id);
	if (rc == -EPERM && parent != RFS_INO_ROOT)
		rc = -EACCES; /* .regionfs/ is read-only */
	if (!rc && (mode & S_IFMT) && !S_ISREG(mode))
		rc = -EPERM;
	if (!rc && region_ro(id.region))
		rc = -EROFS;
	if (!rc)
		rc = key_len(name, &len);
	if (!rc)
		rc = rfs_commit_create(id.region, name, len, flags, pid, &l,
				       ino, &cls, &created);
	/* a reader commits nothing: open(O_CREAT|O_RDONLY) stores it now */
	if (!rc && created && read_only(flags)) {
		rc = rfs_unborn_settle_locked(id.region, name, len);
		rfs_unborn_free(created);
		created = NULL;
		if (rc) {
			rfs_names_unlock(&l);
			rfs_inode_forget(*ino, 1);
		}
	}
	if (rc)
		return rc;
	id.kind = RFS_I_KEY;
	id.gone = false;
	id.cls = cls;
	memcpy(id.key, name, len + 1);
	id.klen = len;
	/* the name stays locked: no unlink between the create and the open */
	rc = open_key(pid, *ino, &id, flags, created, true, h);
	if (rc) /* the open(O_CREAT) fails: nothing was stored */
		rfs_unborn_free(created);
	rfs_names_unlock(&l);
	if (rc)
		rfs_inode_forget(*ino, 1);
	return rc;
}

/*
 * A create whose reply the kernel does not take: the key may exist now
 * (committed empty) while the kernel keeps its negative entry, which must
 * go (kinval.c; sent once the CREATE has released the directory).
 */
static void create_lost(fuse_ino_t ino, struct rfs_handle *h)
{
	struct rfs_ident id;

	if (rfs_inode_ident(ino, &id) == 0 && id.kind == RFS_I_KEY)
		rfs_kinval_key(id.region, id.key, id.klen);
	rfs_handle_free(h);
	rfs_inode_forget(ino, 1);
}

static void rfs_ll_create(fuse_req_t req, fuse_ino_t parent, const char *name,
			  mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	struct rfs_handle *h;
	fuse_ino_t ino;
	double timeout;
	int rc;

	memset(&e, 0, sizeof(e));
	if (atomic_load(&rfs.draining)) {
		reply_err(req, -ESHUTDOWN); /* SIGTERM: see handle_exit() */
		return;
	}
	rc = do_create(fuse_req_ctx(req)->pid, parent, name, mode, fi->flags,
		       &ino, &h);
	if (!rc) {
		rc = do_getattr(ino, &e.attr, &timeout);
		if (rc)
			create_lost(ino, h);
	}
	if (rc) {
		reply_err(req, rc);
		return;
	}
	e.ino = ino;
	set_open_flags(fi, h);
	rfs_rhandle_fill(h); /* never asked: a writer's inode (inode.c) */
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		create_lost(ino, h); /* interrupted */
}

/* ---- read / write / flush / release -------------------------------------- */

/*
 * Replies with the slice [off, off+size) of data[0..len), counted as a
 * key read unless it is a virtual file's.
 */
static void reply_slice(fuse_req_t req, const char *data, size_t len,
			size_t size, off_t off, bool key)
{
	size_t n = 0;

	if (off >= 0 && (uint64_t)off < len)
		n = len - off < size ? len - off : size;
	if (key) {
		rfs_count(RFS_C_READS, 1);
		rfs_count(RFS_C_READ_BYTES, n);
	}
	fuse_reply_buf(req, n ? data + off : NULL, n);
}

/*
 * A READ without a handle (zero-request opens): a key's inode serves the
 * value pinned on it (inode.c), a virtual file the reader's snapshot.
 */
static void read_noopen(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off)
{
	struct rfs_ident id = {.kind = RFS_I_REGION};
	struct region_value *v = NULL, *serve;
	struct rfs_region *rr;
	int64_t mtime;
	size_t len;
	char *buf;
	int rc = 0;

	if (ino >= RFS_INO_DYNAMIC)
		rc = rfs_inode_ident(ino, &id);
	if (!rc && is_vfile(ino, &id)) {
		rc = vsnap_get(ino, &id, fuse_req_ctx(req)->pid, false, &buf,
			       &len, &mtime);
		if (!rc)
			reply_slice(req, buf, len, size, off, false);
		else
			reply_err(req, rc);
		free(buf);
		return;
	}
	if (!rc && (ino < RFS_INO_DYNAMIC || id.kind != RFS_I_KEY))
		rc = -EISDIR;
	if (!rc)
		rc = rfs_inode_kernel_value(ino, NULL, &serve);
	if (rc == -EAGAIN) { /* the inode's first READ */
		rr = rfs_region_ref(id.region);
		rc = rr ? rfs_fetch(rr, id.key, id.klen, &v) : -ENOENT;
		if (rr)
			rfs_region_unref(rr);
		if (!rc)
			rc = rfs_inode_kernel_value(ino, v, &serve);
		region_value_unref(v);
		if (rc == -EIO)
			rfs_log(RFS_LOG_WARNING,
				"read of %s/%.*s: its row changed size "
				"before its first read; EIO until the "
				"change feed drops the kernel's entry",
				id.region, (int)id.klen, id.key);
	}
	if (rc) {
		reply_err(req, rc); /* counted in errors */
		return;
	}
	reply_slice(req, region_value_data(serve), region_value_len(serve),
		    size, off, true);
	region_value_unref(serve);
}

static void rfs_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	struct rfs_handle *h = (struct rfs_handle *)fi->fh;
	struct rfs_wbuf *b;

	if (!h && atomic_load(&rfs.noopen)) {
		read_noopen(req, ino, size, off);
		return;
	}
	switch (h ? h->kind : RFS_H_DIR) {
	case RFS_H_READ:
		rfs_handle_ref(h);
		reply_slice(req, region_value_data(h->u.r.v),
			    region_value_len(h->u.r.v), size, off, true);
		rfs_handle_unref(h);
		break;
	case RFS_H_VIRTUAL:
		rfs_handle_ref(h);
		reply_slice(req, h->u.virt.buf, h->u.virt.len, size, off,
			    false);
		rfs_handle_unref(h);
		break;
	case RFS_H_WRITE:
		/*
		 * O_RDWR: the writer reads its own buffer. The VFS sends READ
		 * for an O_WRONLY file only for readahead it was asked for
		 * (posix_fadvise(WILLNEED) checks no read access): refused,
		 * so no page of a writer's buffer ever gets cached (inode.c).
		 */
		if (!h->u.w.readable) {
			reply_err(req, -EBADF);
			break;
		}
		b = rfs_whandle_snapshot(h);
		reply_slice(req, b->data, b->len, size, off, true);
		rfs_wbuf_unref(b);
		break;
	default:
		reply_err(req, -EISDIR);
	}
}

static void rfs_ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
			 size_t size, off_t off, struct fuse_file_info *fi)
{
	struct rfs_handle *h = (struct rfs_handle *)fi->fh;
	int rc = -EBADF;

	(void)ino;
	if (h && h->kind == RFS_H_WRITE)
		rc = rfs_whandle_write(h, buf, size, off);
	if (rc) {
		reply_err(req, rc);
		return;
	}
	rfs_count(RFS_C_WRITES, 1);
	rfs_count(RFS_C_WRITE_BYTES, size);
	fuse_reply_write(req, size);
}

/*
 * close(): the commit, whose error close() returns. The reply goes out
 * once the kernel has been told to drop the entry of the changed name
 * (kinval.c), which the commit queued: a stat or open after close()
 * looks the name up again.
 */
static void rfs_ll_flush(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	struct rfs_handle *h = (struct rfs_handle *)fi->fh;
	int rc = 0;

	(void)ino;
	if (!h && atomic_load(&rfs.noopen)) {
		/* nothing to commit on a read-only mount: stop asking */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (!h || h->kind != RFS_H_WRITE) {
		reply_err(req, rc);
		return;
	}
	rc = rfs_whandle_commit(h, false);
	if (rc < 0)
		rfs_count(RFS_C_ERRORS, 1);
	rfs_kinval_reply(req, rc);
}

static void rfs_ll_release(fuse_req_t req, fuse_ino_t ino,
			   struct fuse_file_info *fi)
{
	struct rfs_handle *h = (struct rfs_handle *)fi->fh;
	bool linger = h && h->kind == RFS_H_WRITE && h->u.w.unnamed;

	/*
	 * Changed since the last flush (never flushed; written through a
	 * shared mapping after the close): last chance, and nobody to tell
	 * but the log (commit.c logs a store error). Data whose flush
	 * failed is not dirty any more: its close() reported the error, and
	 * committing it now would store it after all. A broken (EFBIG)
	 * handle was refused on purpose.
	 */
	if (h && h->kind == RFS_H_WRITE && atomic_load(&h->u.w.dirty))
		rfs_whandle_commit(h, false);
	if (h && h->kind == RFS_H_WRITE)
		rfs_whandle_release(h);
	rfs_handle_free(h);
	/* the kernel evicts the inode at our reply: not while the LOOKUP
	 * that reads the key back is in flight (linger.c) */
	if (linger)
		rfs_linger_release(req, ino);
	else
		fuse_reply_err(req, 0);
}

static void rfs_ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
			 struct fuse_file_info *fi)
{
	struct rfs_handle *h = (struct rfs_handle *)fi->fh;
	int rc = 0;

	(void)ino;
	(void)datasync;
	if (h && h->kind == RFS_H_WRITE)
		rc = rfs_whandle_commit(h, true);
	if (!rc)
		rc = store_sync(rfs.st);
	reply_err(req, rc);
}

/* ---- directories --------------------------------------------------------- */

static void rfs_ll_opendir(fuse_req_t req, fuse_ino_t ino,
			   struct fuse_file_info *fi)
{
	struct rfs_handle *h = NULL;
	struct rfs_ident id;
	int rc = 0;

	if (ino >= RFS_INO_DYNAMIC) {
		rc = rfs_inode_ident(ino, &id);
		if (!rc && id.kind != RFS_I_REGION && id.kind != RFS_I_VREGION)
			rc = -ENOTDIR;
		if (!rc && !rfs_region_exists(id.region))
			rc = -ENOENT;
		if (!rc && id.kind == RFS_I_REGION) {
			h = rfs_handle_new(RFS_H_DIR);
			if (h)
				strcpy(h->u.d.region, id.region);
			else
				rc = -ENOMEM;
		}
	} else if (fixed_attr(ino, &(struct stat){0}) == 0 &&
		   ino != RFS_INO_ROOT && ino != RFS_INO_VDIR &&
		   ino != RFS_INO_VREGIONS) {
		rc = -ENOTDIR;
	}
	if (rc) {
		reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT)
		rfs_handle_free(h);
}

/* Which fixed listing a directory shows. */
enum listing {
	LIST_ROOT,
	LIST_VDIR,
	LIST_VREGIONS,
	LIST_VREGION,
};

struct dent {
	const char *name;
	fuse_ino_t ino;
	mode_t mode;
};

/* Entry i of a fixed listing (0 ".", 1 ".."), or false past the end. */
static bool list_entry(enum listing l, fuse_ino_t self,
		       const struct rfs_table *t, off_t i, struct dent *d)
{
	static const char *const vfiles[] = {"stats", "metrics.prom", "config",
					     "regions"};
	static const fuse_ino_t vinos[] = {RFS_INO_VSTATS, RFS_INO_VMETRICS,
					   RFS_INO_VCONFIG, RFS_INO_VREGIONS};
	static const fuse_ino_t parents[] = {RFS_INO_ROOT, RFS_INO_ROOT,
					     RFS_INO_VDIR, RFS_INO_VREGIONS};

	d->mode = S_IFDIR;
	d->ino = i == 0 ? self : parents[l];
	d->name = i == 0 ? "." : "..";
	if (i < 2)
		return true;
	i -= 2;
	d->ino = RFS_UNKNOWN_INO;
	if (l == LIST_ROOT && i == 0) {
		d->name = "." RFS_VDIR_NAME;
		d->ino = RFS_INO_VDIR;
		return true;
	}
	if (l == LIST_ROOT)
		i--;
	if (l == LIST_ROOT || l == LIST_VREGIONS) {
		if ((size_t)i >= t->n)
			return false;
		d->name = t->v[i]->cfg.name;
		return true;
	}
	d->mode = S_IFREG;
	if (l == LIST_VREGION) {
		if (i >= 2)
			return false;
		d->name = i == 0 ? "stats" : "config";
		return true;
	}
	if (i >= 4)
		return false;
	d->name = vfiles[i];
	d->ino = vinos[i];
	if (i == 3)
		d->mode = S_IFDIR;
	return true;
}

/*
 * Adds one entry at *pos; false when it does not fit. plus (READDIRPLUS):
 * without attributes (node id 0: the kernel makes no dentry of it and
 * counts no lookup).
 */
static bool add_dent(fuse_req_t req, char *buf, size_t size, size_t *pos,
		     const char *name, fuse_ino_t ino, mode_t mode, off_t next,
		     bool plus)
{
	struct fuse_entry_param e = {.attr = {.st_ino = ino, .st_mode = mode}};
	size_t n;

	if (plus)
		n = fuse_add_direntry_plus(req, buf + *pos, size - *pos, name,
					   &e, next);
	else
		n = fuse_add_direntry(req, buf + *pos, size - *pos, name,
				      &e.attr, next);
	if (n > size - *pos)
		return false;
	*pos += n;
	return true;
}

static size_t readdir_fixed(fuse_req_t req, enum listing l, fuse_ino_t self,
			    char *buf, size_t size, off_t off, bool plus)
{
	struct rfs_table *t = rfs_table_ref();
	size_t pos = 0;
	struct dent d;

	for (; list_entry(l, self, t, off, &d); off++)
		if (!add_dent(req, buf, size, &pos, d.name, d.ino, d.mode,
			      off + 1, plus))
			break;
	rfs_table_unref(t);
	return pos;
}

/* A region listing in progress: one READDIR's worth. */
struct list_ctx {
	fuse_req_t req;
	char *buf;
	size_t size;
	size_t pos;
	uint64_t skip;	/* keys to pass over first */
	off_t next_off; /* d_off of the next key */
	struct rfs_dhandle *d;
	bool plus; /* READDIRPLUS: entries with their inodes */
	pid_t pid; /* of the caller, for rfs_inode_lookup_key() */
};

/*
 * A READDIRPLUS entry for a key: its inode for the listed row, exactly
 * as LOOKUP makes it (lookup_key(); under the name's lock), counted once.
 * The kernel holds the directory's lock across the READDIRPLUS, so an
 * unlink or rename through the mount cannot interleave; a commit or an
 * outside change that does queues an invalidation of the name, which the
 * kernel serves after the listing (kinval.c). false when it does not fit.
 */
static bool add_key_plus(struct list_ctx *c, const char *name, size_t klen,
			 const struct store_meta *meta, off_t next)
{
	struct fuse_entry_param e;
	struct store_meta m;
	struct rfs_names l;
	enum rfs_kclass cls;
	fuse_ino_t ino;
	size_t n;
	int rc;

	rfs_names_lock(&l, c->d->region, name, klen, false);
	rc = rfs_inode_lookup_key(c->d->region, name, klen, meta, c->pid, false,
				  &ino, &cls);
	rfs_names_unlock(&l);
	if (rc) /* no memory: an entry without attributes */
		return add_dent(c->req, c->buf, c->size, &c->pos, name,
				RFS_UNKNOWN_INO, S_IFREG, next, true);
	m = *meta;
	memset(&e, 0, sizeof(e));
	key_entry(c->d->region, name, klen, ino, cls, &m, &e);
	n = fuse_add_direntry_plus(c->req, c->buf + c->pos, c->size - c->pos,
				   name, &e, next);
	if (n > c->size - c->pos) {
		rfs_inode_forget(ino, 1); /* not sent */
		return false;
	}
	c->pos += n;
	return true;
}

static int list_cb(void *ctx, const void *key, size_t klen,
		   const struct store_meta *meta)
{
	struct list_ctx *c = ctx;
	char name[REGION_MAX_KEY + 1];
	fuse_ino_t ino;

	if (c->skip) {
		c->skip--;
		c->next_off++;
		return 0;
	}
	if (klen > REGION_MAX_KEY || memchr(key, '\0', klen))
		return 0; /* not a name we can show */
	memcpy(name, key, klen);
	name[klen] = '\0';
	if (c->plus) {
		if (!add_key_plus(c, name, klen, meta, c->next_off))
			return 1; /* full: the cursor stays on the last one */
	} else {
		ino = rfs_inode_peek(c->d->region, key, klen);
		if (!add_dent(c->req, c->buf, c->size, &c->pos, name,
			      ino ? ino : RFS_UNKNOWN_INO, S_IFREG, c->next_off,
			      false))
			return 1; /* full: the cursor stays on the last one */
	}
	memcpy(c->d->last, key, klen);
	c->d->last_len = klen;
	c->d->last_off = c->next_off++;
	return 0;
}

/*
 * The size of the smallest entry a listing can add (a one-byte name): at
 * most size / dirent_min() + 2 keys fit a reply of size bytes, which is
 * how many rows a page asks the store for. A READDIRPLUS entry carries
 * its inode's attributes (160 bytes at least, against 24 for READDIR).
 * Sized for READDIR, a READDIRPLUS asked for 6.7 times the rows that fit
 * (store_list() reads them in pages of STORE_LIST_CHUNK): a 32 KiB one
 * (Linux 6.18) read 256 rows for the 195 entries of 16-byte names that
 * fit, a 4 KiB one (older kernels) 128 for 24; every row not sent is
 * read again by the next request's query.
 */
static size_t dirent_min(fuse_req_t req, bool plus)
{
	struct fuse_entry_param e = {.attr = {.st_mode = S_IFREG}};

	/* a NULL buffer of size 0: libfuse returns the size, writes nothing */
	return plus ? fuse_add_direntry_plus(req, NULL, 0, "x", &e, 0)
		    : fuse_add_direntry(req, NULL, 0, "x", &e.attr, 0);
}

/*
 * Offsets: "." 1, ".." 2, then the i-th key (0-based) 3 + i. READDIR at
 * the offset of the last key returned resumes after it (store_list with
 * after = that key); any other offset (seekdir, rewinddir) lists from the
 * start and skips.
 */
static int readdir_region(fuse_req_t req, fuse_ino_t ino, struct rfs_dhandle *d,
			  char *buf, size_t size, off_t off, size_t *pos,
			  bool plus)
{
	struct list_ctx c = {.req = req,
			     .buf = buf,
			     .size = size,
			     .d = d,
			     .plus = plus,
			     .pid = fuse_req_ctx(req)->pid};
	const void *after = NULL;
	size_t alen = 0;
	int rc;

	if (off == 0 &&
	    !add_dent(req, buf, size, &c.pos, ".", ino, S_IFDIR, 1, plus))
		goto out;
	if (off <= 1 && !add_dent(req, buf, size, &c.pos, "..", RFS_INO_ROOT,
				  S_IFDIR, 2, plus))
		goto out;
	c.next_off = off <= 2 ? 3 : off + 1;
	if (off > 2 && d->last_len && d->last_off == off) {
		after = d->last;
		alen = d->last_len;
	} else if (off > 2) {
		c.skip = off - 2;
		c.next_off = 3;
	}
	/* keys created here and not committed yet: listed as before */
	if (off <= 2 && (rc = rfs_unborn_settle_region(d->region)) != 0)
		return rc;
	if (plus)
		rfs_names_handed_all(); /* entries to come, before the rows */
	rc = store_list(rfs.st, d->region, after, alen,
			c.skip + size / dirent_min(req, plus) + 2, list_cb, &c);
	if (rc < 0 && c.pos == 0)
		return rc;
out:
	*pos = c.pos;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct rfs_handle *h = (struct rfs_handle *)fi->fh;
	char *buf = malloc(size ? size : 1);
	size_t pos = 0;
	int rc = 0;

	rfs_count(RFS_C_READDIRS, 1);
	if (!buf)
		rc = -ENOMEM;
	else if (h && h->kind == RFS_H_DIR)
		rc = readdir_region(req, ino, &h->u.d, buf, size, off, &pos,
				    plus);
	else if (ino == RFS_INO_ROOT)
		pos = readdir_fixed(req, LIST_ROOT, ino, buf, size, off, plus);
	else if (ino == RFS_INO_VDIR)
		pos = readdir_fixed(req, LIST_VDIR, ino, buf, size, off, plus);
	else if (ino == RFS_INO_VREGIONS)
		pos = readdir_fixed(req, LIST_VREGIONS, ino, buf, size, off,
				    plus);
	else
		pos = readdir_fixed(req, LIST_VREGION, ino, buf, size, off,
				    plus);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_buf(req, buf, pos);
	free(buf);
}

static void rfs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

/*
 * READDIRPLUS (the kernel asks for it on a listing's first batch, and
 * for the rest when the listed names are being looked up, as ls -l
 * does): the keys come with their inodes and attributes, so ls -l needs
 * no LOOKUP per key; their entries are cached like LOOKUP's.
 */
static void rfs_ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			       off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void rfs_ll_releasedir(fuse_req_t req, fuse_ino_t ino,
			      struct fuse_file_info *fi)
{
	(void)ino;
	rfs_handle_free((struct rfs_handle *)fi->fh);
	fuse_reply_err(req, 0);
}

static void rfs_ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			    struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	reply_err(req, store_sync(rfs.st));
}

/* ---- the file system ----------------------------------------------------- */

/*
 * Keys stored in every region, for f_files: a COUNT per region, so the
 * result is kept for STATFS_CACHE_MS (desktops poll statfs; a region
 * with a million keys takes tens of ms to count).
 */
static uint64_t count_keys(void)
{
	static atomic_uint_fast64_t cached, cached_at;
	uint64_t sum = 0, n, bytes, now = rfs_mono_ns() / 1000000;
	struct rfs_table *t;
	size_t i;

	if (atomic_load(&cached_at) &&
	    now - atomic_load(&cached_at) < STATFS_CACHE_MS)
		return atomic_load(&cached);
	t = rfs_table_ref();
	for (i = 0; i < t->n; i++)
		if (store_region_usage(rfs.st, t->v[i]->cfg.name, &n, &bytes) ==
		    0)
			sum += n;
	rfs_table_unref(t);
	atomic_store(&cached, sum);
	atomic_store(&cached_at, now);
	return sum;
}

/*
 * Space is the store's when it tells (store_space(): PostgreSQL, the
 * database's size used and an unknown free space), else the database
 * file's file system's (where the values go), in 4 KiB blocks; files are
 * the stored keys, plus as many more as there are free blocks (a key
 * needs at least a few bytes).
 */
static void rfs_ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv, out;
	uint64_t f, total, avail;

	(void)ino;
	memset(&out, 0, sizeof(out));
	if (rfs.st && store_space(rfs.st, &total, &avail) == 0) {
		out.f_blocks = total / 4096;
		out.f_bfree = avail / 4096;
		out.f_bavail = avail / 4096;
	} else if (statvfs(rfs.db_path, &sv) == 0) {
		f = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
		out.f_blocks = (uint64_t)sv.f_blocks * f / 4096;
		out.f_bfree = (uint64_t)sv.f_bfree * f / 4096;
		out.f_bavail = (uint64_t)sv.f_bavail * f / 4096;
	}
	out.f_bsize = 4096;
	out.f_frsize = 4096;
	out.f_ffree = out.f_bavail;
	out.f_favail = out.f_bavail;
	out.f_files = count_keys() + out.f_ffree;
	out.f_namemax = REGION_MAX_KEY;
	fuse_reply_statfs(req, &out);
}

static void rfs_ll_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/*
	 * Writes go through write handles with direct I/O into a private
	 * buffer; a writeback cache would put them into the page cache of
	 * an immutable inode (see the top).
	 */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/*
	 * Zero-request opens on a read-only mount (see above): no writer
	 * needs a handle. A new snapshot of a virtual file must drop the
	 * old one's pages: auto_inval_data (mtime changes).
	 */
	if (rfs.ro && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) &&
	    (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) && !rfs.open_requests) {
		conn->want |=
			FUSE_CAP_NO_OPEN_SUPPORT | FUSE_CAP_AUTO_INVAL_DATA;
		atomic_store(&rfs.noopen, true);
	}
	rfs_log(RFS_LOG_DEBUG, "FUSE protocol %u.%u, max_write %u",
		conn->proto_major, conn->proto_minor, conn->max_write);
}

/* Unmount: the kernel waits for this reply; nothing lingers past it. */
static void rfs_ll_destroy(void *userdata)
{
	(void)userdata;
	rfs_linger_stop();
}

const struct fuse_lowlevel_ops rfs_ops = {
	.init = rfs_ll_init,
	.destroy = rfs_ll_destroy,
	.lookup = rfs_ll_lookup,
	.forget = rfs_ll_forget,
	.forget_multi = rfs_ll_forget_multi,
	.getattr = rfs_ll_getattr,
	.setattr = rfs_ll_setattr,
	.mknod = rfs_ll_mknod,
	.mkdir = rfs_ll_mkdir,
	.symlink = rfs_ll_symlink,
	.link = rfs_ll_link,
	.unlink = rfs_ll_unlink,
	.rmdir = rfs_ll_rmdir,
	.rename = rfs_ll_rename,
	.open = rfs_ll_open,
	.create = rfs_ll_create,
	.read = rfs_ll_read,
	.write = rfs_ll_write,
	.flush = rfs_ll_flush,
	.release = rfs_ll_release,
	.fsync = rfs_ll_fsync,
	.opendir = rfs_ll_opendir,
	.readdir = rfs_ll_readdir,
	.readdirplus = rfs_ll_readdirplus,
	.releasedir = rfs_ll_releasedir,
	.fsyncdir = rfs_ll_fsyncdir,
	.statfs = rfs_ll_statfs,
};
