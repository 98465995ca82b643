/*
 * test_inode.c - unit tests of the daemon's inode table (fs/inode.c).
 *
 * The test links the daemon's library (libregionfs-fs) like any other
 * user of inode.c, with two seams and no mount:
 *  - every pthread_rwlock_wrlock() of the library goes through
 *    __wrap_pthread_rwlock_wrlock() (linked with --wrap), which runs an
 *    armed hook once just before taking the lock. Every window inode.c
 *    closes by looking again under the write lock (a FORGET's count
 *    reaching 0 and the free; a LOOKUP's shared miss and its exclusive
 *    retry; a RELEASE racing a FORGET) is driven from there, on one
 *    thread, so the outcome does not depend on scheduling;
 *  - a few tests look at a node's fields (the anchor's reference) and the
 *    table's through rfs_inode__probe().
 * The rest is real: values of the engine stand for the cache's values,
 * tagged with a load serial as handle.c's loads do. Write
 * handles are bare struct rfs_handle carrying the atomics getattr reads.
 *
 * The tests play the kernel: a LOOKUP is rfs_inode_lookup_key() with the
 * row store_stat() would have returned, with the requesting thread's id
 * as pid; a FORGET gives counts back; an OPEN/RELEASE is a pair of
 * rfs_inode_open_read()/close_read() or open_write()/close_write(), a
 * commit a new row with a newly loaded value. Every test gives back every
 * count it took, and the teardown fails a test that leaves an inode.
 *
 * Nothing sleeps. The threaded test checks invariants that hold under
 * any interleaving (a page-cache grant serves its inode's row; a refused
 * writer's retry lands on a writer's inode; nothing is left when every
 * count is given back) and synchronises only on a barrier at the start.
 *
 * test_second_refused_writer_retry_survives_first_writer shows a defect
 * found while writing these tests (fixed: is_promotable() now refuses while
 * any marker names the inode's name).
 *
 * Build: tests/unit/meson.build links it with fs_dep (the library).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../fs/fs.h"

/* ---- seams into inode.c -------------------------------------------------- */

/* Runs once, on the thread that is about to take the write lock. */
struct hook {
	void (*fn)(void *arg);
	void *arg;
	unsigned ran; /* times fn ran */
};

static struct hook *_Atomic wrlock_hook;

/*
 * The link-time seam (meson.build links with --wrap=pthread_rwlock_wrlock):
 * every pthread_rwlock_wrlock() of the fs/ library comes here.
 */
int __real_pthread_rwlock_wrlock(pthread_rwlock_t *l);
int __wrap_pthread_rwlock_wrlock(pthread_rwlock_t *l);

int __wrap_pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	struct hook *h = atomic_exchange(&wrlock_hook, NULL);

	if (h) {
		h->fn(h->arg);
		h->ran++;
	}
	return __real_pthread_rwlock_wrlock(l);
}

/*
 * The second seam (--wrap=malloc): while malloc_fails is set, every
 * malloc() of the library (and of this file) returns NULL.
 */
static atomic_bool malloc_fails;

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);

void *__wrap_malloc(size_t size)
{
	return atomic_load(&malloc_fails) ? NULL : __real_malloc(size);
}

/* ---- helpers ------------------------------------------------------------- */

#define R	  "r" /* the region of every key below */
#define PID_R	  100 /* a reader thread */
#define PID_W	  200 /* a writer thread */
#define PID_W2	  201 /* another writer thread */
#define PID_O	  300 /* someone else */
#define MAX_VALUE 64  /* the largest row size used below */

static atomic_uint_fast64_t serials; /* the last load serial handed out */

static struct store_meta mkrow(uint64_t version, uint64_t size, int64_t mtime)
{
	struct store_meta m = {
		.size = size, .mtime_ns = mtime, .version = version};

	return m;
}

/* A value of row, as a load of it makes one: a fresh serial. */
static struct region_value *load(const struct store_meta *m)
{
	static const char zeros[MAX_VALUE];
	struct region_value *v;

	if (m->size > MAX_VALUE)
		abort(); /* a bad test */
	v = region_value_create(zeros, m->size);
	if (!v)
		abort(); /* out of memory: nothing left to test */
	region_value_set_meta(v, m->mtime_ns, m->version);
	region_value_set_tag(v, atomic_fetch_add(&serials, 1) + 1);
	return v;
}

static struct region_value *kept[64]; /* val()'s, dropped at teardown */
static unsigned nkept;

/* A value like load()'s that the fixture drops after the test. */
static struct region_value *val(const struct store_meta *m)
{
	assert_true(nkept < sizeof(kept) / sizeof(kept[0]));
	kept[nkept] = load(m);
	return kept[nkept++];
}

/* A LOOKUP of key by pid that found row m (NULL for a CREATE). */
static fuse_ino_t look_as(const char *key, const struct store_meta *m,
			  pid_t pid, bool write, enum rfs_kclass *cls)
{
	enum rfs_kclass c;
	fuse_ino_t ino = 0;

	assert_int_equal(rfs_inode_lookup_key(R, key, strlen(key), m, pid,
					      write, &ino, &c),
			 0);
	assert_true(ino >= RFS_INO_DYNAMIC);
	if (cls)
		*cls = c;
	return ino;
}

/* A reader's LOOKUP that must get a page-cache inode. */
static fuse_ino_t look(const char *key, const struct store_meta *m)
{
	enum rfs_kclass cls;
	fuse_ino_t ino = look_as(key, m, PID_R, false, &cls);

	assert_int_equal(cls, RFS_K_PAGE);
	return ino;
}

/* A CREATE's lookup: always a writer's inode. */
static fuse_ino_t create(const char *key, pid_t pid)
{
	enum rfs_kclass cls;
	fuse_ino_t ino = look_as(key, NULL, pid, true, &cls);

	assert_int_equal(cls, RFS_K_WRITE);
	return ino;
}

/* FORGET of one lookup of each of n numbers. */
static void forget_each(const fuse_ino_t *ino, size_t n)
{
	while (n--)
		rfs_inode_forget(*ino++, 1);
}

#define FORGET(...)                                                            \
	forget_each((const fuse_ino_t[]){__VA_ARGS__},                         \
		    sizeof((fuse_ino_t[]){__VA_ARGS__}) / sizeof(fuse_ino_t))

static struct rfs_ident ident(fuse_ino_t ino)
{
	struct rfs_ident id;

	assert_int_equal(rfs_inode_ident(ino, &id), 0);
	return id;
}

static bool exists(fuse_ino_t ino)
{
	struct rfs_ident id;

	return rfs_inode_ident(ino, &id) == 0;
}

static void assert_row(struct store_meta got, const struct store_meta *want)
{
	assert_int_equal(got.version, want->version);
	assert_int_equal(got.size, want->size);
	assert_int_equal(got.mtime_ns, want->mtime_ns);
}

static enum rfs_kclass cls_of(fuse_ino_t ino)
{
	return ident(ino).cls;
}

static fuse_ino_t peek(const char *key)
{
	return rfs_inode_peek(R, key, strlen(key));
}

/* A read-only OPEN of ino that found v in the cache: the value served. */
static struct region_value *open_r(fuse_ino_t ino, struct region_value *v,
				   bool *pcache)
{
	struct region_value *out = NULL;

	assert_int_equal(rfs_inode_open_read(ino, v, &out, pcache, NULL), 0);
	assert_non_null(out);
	return out;
}

/* open_r() by an OPEN that may fill the kernel's pages: *fill says so. */
static struct region_value *open_f(fuse_ino_t ino, struct region_value *v,
				   bool *pcache, bool *fill)
{
	struct region_value *out = NULL;

	assert_int_equal(rfs_inode_open_read(ino, v, &out, pcache, fill), 0);
	assert_non_null(out);
	return out;
}

/* The RELEASE of a handle from open_r(). */
static void close_r(fuse_ino_t ino, struct region_value *out, bool pcache)
{
	rfs_inode_close_read(ino, pcache);
	region_value_unref(out);
}

static int open_w(fuse_ino_t ino, pid_t pid, bool readable,
		  struct rfs_wopen *wo)
{
	return rfs_inode_open_write(ino, pid, readable, wo);
}

/* A write handle as getattr sees it: only the atomics inode.c reads. */
static void whandle_init(struct rfs_handle *h, fuse_ino_t ino)
{
	memset(h, 0, sizeof(*h));
	h->kind = RFS_H_WRITE;
	h->u.w.ino = ino;
	atomic_init(&h->u.w.dirty, false);
	atomic_init(&h->u.w.len, 0);
	atomic_init(&h->u.w.mod_seq, 0);
}

static void whandle_set(struct rfs_handle *h, size_t len, uint64_t seq)
{
	atomic_store(&h->u.w.len, len);
	atomic_store(&h->u.w.mod_seq, seq);
	atomic_store(&h->u.w.dirty, true);
}

/* The node numbered ino (white box: rfs_inode__probe()). */
static struct rfs_inode_probe node_of(fuse_ino_t ino)
{
	struct rfs_inode_probe p;

	assert_int_equal(rfs_inode__probe(ino, &p), 0);
	return p;
}

/* The table's figures: hash buckets, markers in use. */
static struct rfs_inode_probe table_probe(void)
{
	struct rfs_inode_probe p;

	rfs_inode__probe(0, &p);
	return p;
}

static void arm(struct hook *h)
{
	h->ran = 0;
	atomic_store(&wrlock_hook, h);
}

/* ---- fixture ------------------------------------------------------------- */

static int setup(void **state)
{
	(void)state;
	atomic_store(&wrlock_hook, NULL);
	return rfs_inode_init(); /* rfs_inode_fini() left nothing behind */
}

/* Every test gives back every count it took: no inode is left. */
static int teardown(void **state)
{
	uint64_t left = rfs_inode_count();

	(void)state;
	atomic_store(&wrlock_hook, NULL);
	atomic_store(&malloc_fails, false); /* a failed test's */
	rfs_inode_fini();
	while (nkept)
		region_value_unref(kept[--nkept]);
	if (left)
		print_error("%llu inodes left\n", (unsigned long long)left);
	return left ? -1 : 0;
}

/* ---- numbers and lookup counts ------------------------------------------- */

static void test_lookup_of_same_row_returns_same_inode(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct rfs_ident id;
	fuse_ino_t a;

	(void)state;
	a = look("k", &m);
	assert_int_equal(look("k", &m), a);
	assert_int_equal(rfs_inode_count(), 1);
	assert_int_equal(peek("k"), a);
	id = ident(a);
	assert_int_equal(id.kind, RFS_I_KEY);
	assert_string_equal(id.region, R);
	assert_string_equal(id.key, "k");
	assert_int_equal(id.klen, 1);
	assert_int_equal(id.cls, RFS_K_PAGE);
	assert_false(id.gone);
	assert_false(id.pending);
	assert_row(id.row, &m);
	rfs_inode_forget(a, 2);
}

static void test_new_version_size_or_mtime_gives_new_inode(void **state)
{
	const struct store_meta m[4] = {mkrow(1, 5, 1000), mkrow(2, 5, 1000),
					mkrow(2, 6, 1000), mkrow(2, 6, 2000)};
	fuse_ino_t ino[4];
	int i, j;

	(void)state;
	for (i = 0; i < 4; i++) {
		ino[i] = look("k", &m[i]);
		for (j = 0; j < i; j++)
			assert_true(ino[j] != ino[i]);
		assert_int_equal(peek("k"), ino[i]);
	}
	/* every older inode still answers with its own row while held */
	for (i = 0; i < 4; i++) {
		struct rfs_ident id = ident(ino[i]);

		assert_row(id.row, &m[i]);
		assert_int_equal(id.cls, RFS_K_PAGE);
		assert_false(id.gone);
	}
	assert_int_equal(look("k", &m[3]), ino[3]);
	assert_int_equal(rfs_inode_count(), 4);
	for (i = 0; i < 4; i++)
		rfs_inode_forget(ino[i], i == 3 ? 2 : 1);
}

static void test_old_inode_serves_the_new_value_directly(void **state)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 9, 2000);
	struct region_value *v1 = val(&m1), *v2, *o1, *o2;
	fuse_ino_t p, n;
	bool pc1, pc2;

	(void)state;
	p = look("k", &m1);
	o1 = open_r(p, v1, &pc1);
	assert_true(pc1);
	/* a commit: the store has m2, the cache v2 */
	v2 = val(&m2);
	n = look("k", &m2);
	assert_true(n != p);
	assert_row(ident(p).row, &m1);
	/*
	 * An open of the old inode through an entry the kernel still held:
	 * its row is not the name's any more, so it gets the cache's value
	 * with direct I/O, never its own pages (kernel entries are cached).
	 */
	o2 = open_r(p, v2, &pc2);
	assert_false(pc2);
	assert_ptr_equal(o2, v2);
	/* its page-cache readers keep their value and the class */
	assert_int_equal(cls_of(p), RFS_K_PAGE);
	close_r(p, o2, pc2);
	close_r(p, o1, pc1);
	assert_int_equal(cls_of(n), RFS_K_PAGE);
	o1 = open_r(n, v2, &pc1);
	assert_true(pc1);
	assert_ptr_equal(o1, v2);
	close_r(n, o1, pc1);
	FORGET(p, n);
}

static void test_inode_numbers_are_never_reused(void **state)
{
	static const char *const names[] = {"a", "b", "c"};
	struct store_meta m;
	fuse_ino_t ino, max = RFS_INO_DYNAMIC - 1;
	unsigned i;

	(void)state;
	for (i = 0; i < 3000; i++) {
		m = mkrow(i / 6 + 1, i % 2, 1000);
		ino = look(names[i % 3], &m);
		assert_true(ino > max);
		max = ino;
		rfs_inode_forget(ino, 1); /* freed at once */
		assert_false(exists(ino));
		if (i % 100)
			continue;
		assert_int_equal(rfs_inode_lookup(RFS_I_REGION, R, &ino), 0);
		assert_true(ino > max);
		max = ino;
		rfs_inode_forget(ino, 1);
	}
}

static void test_forget_frees_inode_at_zero_lookups_not_before(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	fuse_ino_t a, b;

	(void)state;
	a = look("k", &m);
	look("k", &m);
	look("k", &m);
	FORGET(a, a);
	assert_true(exists(a));
	assert_int_equal(rfs_inode_count(), 1);
	rfs_inode_forget(a, 1);
	assert_false(exists(a));
	assert_int_equal(rfs_inode_count(), 0);
	assert_int_equal(peek("k"), 0);
	/* the same row again: a new number, never the freed one */
	b = look("k", &m);
	assert_true(b > a);
	rfs_inode_forget(b, 10); /* more than counted: down to 0, freed */
	assert_false(exists(b));
	rfs_inode_forget(b, 1); /* already gone: nothing */
	FORGET(b + 1000, RFS_INO_ROOT);
}

static void test_unknown_numbers_answer_enoent(void **state)
{
	struct region_value *v, *out = (struct region_value *)&out; /* set */
	struct store_meta m = mkrow(1, 1, 1);
	struct rfs_handle h;
	struct rfs_wopen wo;
	struct rfs_ident id;
	bool pc = true;

	(void)state;
	v = val(&m);
	assert_int_equal(rfs_inode_ident(99, &id), -ENOENT);
	assert_int_equal(rfs_inode_ident(RFS_INO_ROOT, &id), -ENOENT);
	assert_int_equal(rfs_inode_open_read(99, v, &out, &pc, NULL), -ENOENT);
	assert_null(out);
	assert_false(pc);
	assert_int_equal(open_w(99, PID_W, false, &wo), -ENOENT);
	assert_int_equal(wo.inval, RFS_INVAL_NONE);
	whandle_init(&h, 99);
	assert_int_equal(rfs_inode_attach(99, &h), -ENOENT);
	rfs_inode_detach(99, &h);
	rfs_inode_cleaned(99, 0);
	rfs_inode_close_read(99, true);
	rfs_inode_close_write(99, true);
	assert_int_equal(peek("nothing"), 0);
}

static void test_open_handle_keeps_forgotten_inode_until_release(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v = val(&m), *o;
	struct rfs_wopen wo;
	fuse_ino_t a, b;
	bool pc;

	(void)state;
	a = look("k", &m);
	o = open_r(a, v, &pc);
	rfs_inode_forget(a, 1); /* FORGET overtook the RELEASE */
	assert_true(exists(a));
	assert_int_equal(look("k", &m), a); /* still the name's inode */
	rfs_inode_forget(a, 1);
	close_r(a, o, pc);
	assert_false(exists(a));

	b = look("w", &m);
	assert_int_equal(open_w(b, PID_W, false, &wo), 0);
	rfs_inode_forget(b, 1);
	assert_true(exists(b));
	rfs_inode_close_write(b, false);
	assert_false(exists(b));
}

static void test_attached_writers_report_pending_size_and_hold(void **state)
{
	struct rfs_handle h1, h2;
	struct rfs_wopen wo;
	fuse_ino_t ino;

	(void)state;
	ino = create("k", PID_W);
	assert_int_equal(open_w(ino, PID_W, false, &wo), 0);
	assert_int_equal(open_w(ino, PID_W2, false, &wo), 0);
	whandle_init(&h1, ino);
	whandle_init(&h2, ino);
	assert_int_equal(rfs_inode_attach(ino, &h1), 0);
	assert_int_equal(rfs_inode_attach(ino, &h2), 0);
	assert_false(ident(ino).pending); /* nothing uncommitted yet */
	whandle_set(&h1, 42, 5);
	assert_true(ident(ino).pending);
	assert_int_equal(ident(ino).pending_size, 42);
	whandle_set(&h2, 7, 9); /* the latest change wins */
	assert_int_equal(ident(ino).pending_size, 7);
	whandle_set(&h1, 43, 10);
	assert_int_equal(ident(ino).pending_size, 43);
	rfs_inode_forget(ino, 1);
	rfs_inode_detach(ino, &h1);
	assert_int_equal(ident(ino).pending_size, 7);
	rfs_inode_close_write(ino, false);
	atomic_store(&h2.u.w.dirty, false); /* committed */
	assert_false(ident(ino).pending);
	rfs_inode_close_write(ino, false);
	assert_true(exists(ino)); /* h2 is still attached */
	rfs_inode_detach(ino, &h2);
	assert_false(exists(ino));
}

/*
 * A writer is on a name (LOOKUP hands out no long-lived entry) from its
 * open until every write handle has committed and not changed since: a
 * closed writer whose RELEASE is still queued behind the next LOOKUP of
 * the name (a read back right after close()) no longer is.
 */
static void test_settled_writers_are_not_writing(void **state)
{
	struct rfs_handle h1, h2;
	struct rfs_wopen wo;
	fuse_ino_t ino;

	(void)state;
	ino = create("s", PID_W); /* wanted by the open that follows */
	assert_true(rfs_inode_writing(R, "s", 1));
	assert_int_equal(open_w(ino, PID_W, false, &wo), 0);
	assert_true(rfs_inode_writing(R, "s", 1)); /* open, not attached */
	whandle_init(&h1, ino);
	assert_int_equal(rfs_inode_attach(ino, &h1), 0);
	assert_true(rfs_inode_writing(R, "s", 1));
	atomic_store(&h1.u.w.settled, true); /* its close() committed */
	assert_false(rfs_inode_writing(R, "s", 1));
	/* a second writer opening: on the name until it too is settled */
	assert_int_equal(open_w(ino, PID_W2, false, &wo), 0);
	assert_true(rfs_inode_writing(R, "s", 1));
	whandle_init(&h2, ino);
	assert_int_equal(rfs_inode_attach(ino, &h2), 0);
	assert_true(rfs_inode_writing(R, "s", 1));
	atomic_store(&h2.u.w.settled, true);
	assert_false(rfs_inode_writing(R, "s", 1));
	atomic_store(&h1.u.w.settled, false); /* written again (a dup) */
	assert_true(rfs_inode_writing(R, "s", 1));
	rfs_inode_detach(ino, &h1);
	rfs_inode_close_write(ino, false);
	assert_false(rfs_inode_writing(R, "s", 1));
	rfs_inode_forget(ino, 1);
	rfs_inode_detach(ino, &h2);
	rfs_inode_close_write(ino, false);
	assert_false(exists(ino));
}

/*
 * An open through an entry that still leads to the inode of an older row
 * (the change feed marked it not current, its entry invalidation is not
 * sent yet) serves the new value with direct I/O; the kernel's attributes
 * of that inode are the old row's, which rfs_inode_attrs_stale() says, so
 * the open's reply waits for the entry to go (ops.c).
 */
static void test_attrs_are_stale_for_another_rows_value(void **state)
{
	struct store_meta r1 = mkrow(1, 5, 100), r2 = mkrow(2, 9, 200);
	struct region_value *v1 = val(&r1), *v2 = val(&r2), *out;
	struct rfs_wopen wo;
	fuse_ino_t ino, w;
	bool pcache;

	(void)state;
	ino = look("a", &r1);
	assert_false(rfs_inode_attrs_stale(ino, v1));
	assert_true(rfs_inode_attrs_stale(ino, v2));
	rfs_inode_changed(R, "a", 1); /* an outside change: r2 */
	out = open_r(ino, v2, &pcache);
	assert_false(pcache); /* superseded: direct I/O of the new value */
	assert_ptr_equal(out, v2);
	assert_true(rfs_inode_attrs_stale(ino, out));
	close_r(ino, out, pcache);
	/* a writer's inode: the kernel asks for its attributes every time */
	w = create("b", PID_W);
	assert_int_equal(open_w(w, PID_W, false, &wo), 0);
	assert_false(rfs_inode_attrs_stale(w, v2));
	rfs_inode_close_write(w, false);
	rfs_inode_forget(w, 1);
	rfs_inode_forget(ino, 1);
	assert_false(rfs_inode_attrs_stale(ino, v2)); /* unknown: no */
}

static void test_region_nodes_are_one_per_kind_and_region(void **state)
{
	static const enum rfs_ikind kinds[] = {RFS_I_REGION, RFS_I_VREGION,
					       RFS_I_VREGION_STATS,
					       RFS_I_VREGION_CONFIG};
	fuse_ino_t ino[4], again, other;
	struct rfs_ident id;
	int i, j;

	(void)state;
	for (i = 0; i < 4; i++) {
		assert_int_equal(rfs_inode_lookup(kinds[i], R, &ino[i]), 0);
		for (j = 0; j < i; j++)
			assert_true(ino[i] != ino[j]);
		id = ident(ino[i]);
		assert_int_equal(id.kind, kinds[i]);
		assert_string_equal(id.region, R);
		assert_int_equal(id.klen, 0);
		assert_string_equal(id.key, "");
	}
	assert_int_equal(rfs_inode_lookup(RFS_I_REGION, "s", &other), 0);
	assert_true(other != ino[0]);
	rfs_inode_changed(NULL, NULL, 0); /* concerns keys only */
	rfs_inode_unlinked(R, "", 0, NULL);
	assert_int_equal(rfs_inode_lookup(RFS_I_REGION, R, &again), 0);
	assert_int_equal(again, ino[0]);
	assert_false(ident(ino[0]).gone);
	rfs_inode_forget(ino[0], 2);
	for (i = 1; i < 4; i++)
		rfs_inode_forget(ino[i], 1);
	rfs_inode_forget(other, 1);
}

static void test_names_are_compared_byte_for_byte(void **state)
{
	char longkey[REGION_MAX_KEY + 1];
	struct store_meta m = mkrow(1, 3, 1000);
	enum rfs_kclass cls;
	fuse_ino_t a, b, c, d, e, l;

	(void)state;
	memset(longkey, 'x', REGION_MAX_KEY);
	longkey[REGION_MAX_KEY] = '\0';
	/* region "r" + key "ab" and region "ra" + key "b" */
	a = look("ab", &m);
	assert_int_equal(
		rfs_inode_lookup_key("ra", "b", 1, &m, PID_R, false, &b, &cls),
		0);
	c = look("a", &m);
	d = look("a\x01", &m);
	e = look("\xff", &m);
	l = look(longkey, &m);
	assert_true(a != b && a != c && c != d && d != e && e != l);
	assert_int_equal(rfs_inode_count(), 6);
	assert_string_equal(ident(b).region, "ra");
	assert_string_equal(ident(e).key, "\xff");
	assert_int_equal(ident(l).klen, REGION_MAX_KEY);
	assert_memory_equal(ident(l).key, longkey, REGION_MAX_KEY + 1);
	assert_int_equal(look(longkey, &m), l);
	rfs_inode_forget(l, 2);
	FORGET(a, b, c, d, e);
}

#define MANY 3000 /* nodes: the tables start at MIN_BUCKETS (1024) */

static void test_table_growth_keeps_every_inode_reachable(void **state)
{
	static fuse_ino_t ino[MANY];
	struct store_meta m = mkrow(1, 1, 1000);
	char key[16];
	unsigned i;

	(void)state;
	for (i = 0; i < MANY; i++) {
		snprintf(key, sizeof(key), "k%04u", i);
		ino[i] = look(key, &m);
		if (i % 5 == 0) /* gone nodes are in by_ino only */
			rfs_inode_unlinked(R, key, strlen(key), NULL);
	}
	assert_true(table_probe().ino_buckets >= MANY);
	assert_true(table_probe().name_buckets >= MANY);
	for (i = 0; i < MANY; i++) {
		snprintf(key, sizeof(key), "k%04u", i);
		assert_string_equal(ident(ino[i]).key, key);
		assert_int_equal(ident(ino[i]).gone, i % 5 == 0);
		if (i % 5 == 0) {
			assert_int_equal(peek(key), 0);
			continue;
		}
		assert_int_equal(look(key, &m), ino[i]);
		rfs_inode_forget(ino[i], 1);
	}
	for (i = 0; i < MANY; i++)
		rfs_inode_forget(ino[i], 1);
}

/* ---- page-cache grants --------------------------------------------------- */

static void test_first_open_with_row_value_grants_page_cache(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v = val(&m), *o;
	fuse_ino_t ino;
	bool pc = false;

	(void)state;
	ino = look("k", &m);
	o = open_r(ino, v, &pc);
	assert_true(pc);
	assert_ptr_equal(o, v);
	close_r(ino, o, pc);
	assert_null(node_of(ino).pval); /* no page reader: no reference */
	/* the exact value again (same load serial): the page cache again */
	o = open_r(ino, v, &pc);
	assert_true(pc);
	assert_ptr_equal(o, v);
	close_r(ino, o, pc);
	assert_int_equal(cls_of(ino), RFS_K_PAGE);
	rfs_inode_forget(ino, 1);
}

static void test_page_cache_readers_share_one_value(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000), m2 = mkrow(2, 7, 2000);
	struct region_value *v = val(&m), *reload = val(&m), *newer = val(&m2),
			    *o[3];
	fuse_ino_t ino;
	bool pc[3];

	(void)state;
	ino = look("k", &m);
	o[0] = open_r(ino, v, &pc[0]);
	/* while it is open, every open is served the value of its pages */
	o[1] = open_r(ino, reload, &pc[1]);
	o[2] = open_r(ino, newer, &pc[2]);
	assert_true(pc[0] && pc[1] && pc[2]);
	assert_ptr_equal(o[1], v);
	assert_ptr_equal(o[2], v);
	assert_ptr_equal(node_of(ino).pval, v);
	close_r(ino, o[1], pc[1]);
	close_r(ino, o[0], pc[0]);
	assert_ptr_equal(node_of(ino).pval, v);
	close_r(ino, o[2], pc[2]);
	assert_null(node_of(ino).pval);
	assert_int_equal(cls_of(ino), RFS_K_PAGE);
	rfs_inode_forget(ino, 1);
}

static void test_other_value_after_readers_left_turns_direct(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v = val(&m), *reload = val(&m), *o;
	fuse_ino_t ino, next;
	bool pc;

	(void)state;
	ino = look("k", &m);
	o = open_r(ino, v, &pc);
	close_r(ino, o, pc);
	/* evicted and loaded again: same row, other bytes for all we know */
	o = open_r(ino, reload, &pc);
	assert_false(pc);
	assert_ptr_equal(o, reload);
	assert_int_equal(cls_of(ino), RFS_K_DIRECT);
	close_r(ino, o, pc);
	/* the inode stops granting, even for the value of its pages */
	o = open_r(ino, v, &pc);
	assert_false(pc);
	assert_ptr_equal(o, v);
	close_r(ino, o, pc);
	/* the next LOOKUP makes a fresh page-cache inode for the row */
	next = look("k", &m);
	assert_true(next != ino);
	assert_int_equal(peek("k"), next);
	assert_row(ident(ino).row, &m);
	o = open_r(next, reload, &pc);
	assert_true(pc);
	close_r(next, o, pc);
	FORGET(ino, next);
}

static void test_value_of_another_row_at_first_open_turns_direct(void **s)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 5, 1000);
	struct region_value *v1 = val(&m1), *v2 = val(&m2), *o;
	fuse_ino_t a, b;
	bool pc;

	(void)s;
	/* a commit between LOOKUP and OPEN: the cache has a newer row */
	a = look("new", &m1);
	o = open_r(a, v2, &pc);
	assert_false(pc);
	assert_ptr_equal(o, v2);
	assert_int_equal(cls_of(a), RFS_K_DIRECT);
	assert_false(node_of(a).anchored);
	close_r(a, o, pc);
	/* an outside write the feed has not applied: the cache is older */
	b = look("old", &m2);
	o = open_r(b, v1, &pc);
	assert_false(pc);
	assert_ptr_equal(o, v1);
	assert_int_equal(cls_of(b), RFS_K_DIRECT);
	close_r(b, o, pc);
	FORGET(a, b);
}

/* ---- writers ------------------------------------------------------------- */

static void test_write_open_beside_page_readers_estale_then_writer(void **s)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v = val(&m), *o;
	struct rfs_wopen wo;
	enum rfs_kclass cls;
	fuse_ino_t p, w;
	bool pc;

	(void)s;
	p = look("k", &m);
	o = open_r(p, v, &pc);
	assert_int_equal(look_as("k", &m, PID_W, false, NULL), p);
	assert_int_equal(open_w(p, PID_W, false, &wo), -ESTALE);
	assert_int_equal(wo.inval, RFS_INVAL_NONE);
	assert_int_equal(cls_of(p), RFS_K_PAGE);
	/* the kernel walks the path again: this thread gets a writer */
	w = look_as("k", &m, PID_W, false, &cls);
	assert_int_equal(cls, RFS_K_WRITE);
	assert_true(w != p);
	assert_int_equal(cls_of(w), RFS_K_WRITE);
	/* anyone else still gets the readers' inode */
	assert_int_equal(look_as("k", &m, PID_O, false, &cls), p);
	assert_int_equal(cls, RFS_K_PAGE);
	assert_int_equal(peek("k"), p);
	assert_int_equal(open_w(w, PID_W, false, &wo), 0);
	assert_int_equal(wo.inval, RFS_INVAL_NONE); /* nothing was cached */
	/* the retry used the marker up */
	assert_int_equal(look_as("k", &m, PID_W, false, &cls), p);
	assert_int_equal(cls, RFS_K_PAGE);
	rfs_inode_close_write(w, false);
	rfs_inode_forget(w, 1);
	close_r(p, o, pc);
	rfs_inode_forget(p, 4);
	assert_int_equal(rfs_inode_count(), 0);
	assert_int_equal(table_probe().markers, 0);
}

static void test_write_open_without_page_readers_takes_inode(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000), m2 = mkrow(2, 5, 1000);
	struct region_value *v2 = val(&m2), *o;
	struct rfs_wopen wo;
	fuse_ino_t p, d;
	bool pc;

	(void)state;
	/* nothing open: the kernel must drop attributes and pages */
	p = look("k", &m);
	assert_int_equal(open_w(p, PID_W, false, &wo), 0);
	assert_int_equal(wo.inval, RFS_INVAL_ALL);
	assert_int_equal(cls_of(p), RFS_K_WRITE);
	/* a second writer of a writer's inode: nothing more to drop */
	assert_int_equal(open_w(p, PID_W2, true, &wo), 0);
	assert_int_equal(wo.inval, RFS_INVAL_NONE);
	rfs_inode_close_write(p, true);
	rfs_inode_close_write(p, false);
	/* a direct reader open: only the attributes (its pages are in use) */
	d = look("d", &m);
	o = open_r(d, v2, &pc);
	assert_false(pc);
	assert_int_equal(open_w(d, PID_W, false, &wo), 0);
	assert_int_equal(wo.inval, RFS_INVAL_ATTR);
	assert_int_equal(cls_of(d), RFS_K_WRITE);
	rfs_inode_close_write(d, false);
	close_r(d, o, pc);
	FORGET(p, d);
}

/* Opens a page-cache reader on the name's inode for m; returns it. */
static fuse_ino_t hold_page(const char *key, const struct store_meta *m,
			    struct region_value **v, struct region_value **o)
{
	fuse_ino_t ino = look(key, m);
	bool pc;

	*v = val(m);
	*o = open_r(ino, *v, &pc);
	assert_true(pc);
	return ino;
}

static void test_refusal_marker_is_per_thread_and_name(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v, *o;
	struct rfs_wopen wo;
	enum rfs_kclass cls;
	fuse_ino_t p, q, w;

	(void)state;
	p = hold_page("k1", &m, &v, &o);
	assert_int_equal(open_w(p, PID_W, false, &wo), -ESTALE);
	q = look_as("k2", &m, PID_W, false, &cls); /* another name */
	assert_int_equal(cls, RFS_K_PAGE);
	assert_int_equal(look_as("k1", &m, PID_O, false, &cls), p);
	assert_int_equal(cls, RFS_K_PAGE);
	w = look_as("k1", &m, PID_W, false, &cls);
	assert_int_equal(cls, RFS_K_WRITE);
	/* a second retry before the open: the same writer's inode */
	assert_int_equal(look_as("k1", &m, PID_W, false, NULL), w);
	assert_int_equal(open_w(w, PID_W, false, &wo), 0);
	rfs_inode_close_write(w, false);
	rfs_inode_forget(w, 2);
	rfs_inode_forget(q, 1);
	close_r(p, o, true);
	rfs_inode_forget(p, 2);
}

static void test_only_the_latest_refusals_are_remembered(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v, *o;
	struct rfs_wopen wo;
	enum rfs_kclass cls;
	fuse_ino_t p, w;
	pid_t pid;

	(void)state;
	p = hold_page("k", &m, &v, &o);
	for (pid = 1000; pid <= 1000 + RFS_INODE_MARKERS; pid++)
		assert_int_equal(open_w(p, pid, false, &wo), -ESTALE);
	assert_int_equal(open_w(p, 1000 + RFS_INODE_MARKERS, false, &wo),
			 -ESTALE);
	assert_int_equal(table_probe().markers, RFS_INODE_MARKERS);
	/* the oldest refusal was dropped: its retry gets the readers' inode */
	assert_int_equal(look_as("k", &m, 1000, false, &cls), p);
	assert_int_equal(cls, RFS_K_PAGE);
	w = look_as("k", &m, 1001, false, &cls);
	assert_int_equal(cls, RFS_K_WRITE);
	assert_int_equal(
		look_as("k", &m, 1000 + RFS_INODE_MARKERS, false, &cls), w);
	rfs_inode_forget(w, 2);
	close_r(p, o, true);
	rfs_inode_forget(p, 2);
}

static void test_create_gets_writer_inode_beside_readers_inode(void **s)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v, *o, *o2;
	struct rfs_wopen wo;
	fuse_ino_t p, c;
	bool pc;

	(void)s;
	p = hold_page("k", &m, &v, &o);
	c = create("k", PID_W);
	assert_true(c != p);
	assert_int_equal(peek("k"), p); /* a writer's inode is not current */
	assert_int_equal(create("k", PID_O), c); /* one per name */
	assert_int_equal(open_w(c, PID_W, false, &wo), 0);
	assert_int_equal(wo.inval, RFS_INVAL_NONE);
	/* a read-only open of a writer's inode: direct, still a writer's */
	o2 = open_r(c, v, &pc);
	assert_false(pc);
	assert_ptr_equal(o2, v);
	assert_int_equal(cls_of(c), RFS_K_WRITE);
	close_r(c, o2, pc);
	rfs_inode_close_write(c, false);
	rfs_inode_forget(c, 2);
	close_r(p, o, true);
	rfs_inode_forget(p, 1);
}

/* ---- promotion ----------------------------------------------------------- */

static void test_cleaned_writer_inode_becomes_next_rows_page_inode(void **s)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 8, 2000);
	struct region_value *v1 = val(&m1), *v2 = val(&m2), *o;
	struct rfs_handle h;
	struct rfs_wopen wo;
	enum rfs_kclass cls;
	fuse_ino_t p;
	bool pc;

	(void)s;
	p = look("k", &m1);
	o = open_r(p, v1, &pc); /* pages of v1 */
	assert_true(pc);
	close_r(p, o, pc);
	assert_int_equal(open_w(p, PID_W, false, &wo), 0);
	assert_int_equal(wo.inval, RFS_INVAL_ALL);
	rfs_inode_cleaned(p, wo.gen); /* the kernel dropped its pages */
	whandle_init(&h, p);
	assert_int_equal(rfs_inode_attach(p, &h), 0);
	whandle_set(&h, 8, 1);
	/* close(): commit m2, then RELEASE */
	atomic_store(&h.u.w.dirty, false);
	rfs_inode_detach(p, &h);
	rfs_inode_close_write(p, false);
	assert_int_equal(look_as("k", &m2, PID_R, false, &cls), p);
	assert_int_equal(cls, RFS_K_PAGE);
	assert_row(ident(p).row, &m2);
	assert_int_equal(peek("k"), p);
	o = open_r(p, v2, &pc); /* v1's anchor went with its pages */
	assert_true(pc);
	assert_ptr_equal(o, v2);
	close_r(p, o, pc);
	rfs_inode_forget(p, 2);
}

static void test_created_writer_inode_is_promoted_after_close(void **state)
{
	struct store_meta m = mkrow(3, 4, 3000);
	struct rfs_wopen wo;
	fuse_ino_t c;

	(void)state;
	c = create("k", PID_W);
	assert_int_equal(open_w(c, PID_W, false, &wo), 0);
	assert_int_equal(wo.inval, RFS_INVAL_NONE); /* pristine from birth */
	rfs_inode_close_write(c, false);
	assert_int_equal(look("k", &m), c);
	assert_row(ident(c).row, &m);
	rfs_inode_forget(c, 2);
}

static void test_writer_inode_in_use_is_not_promoted(void **state)
{
	struct store_meta m2 = mkrow(2, 4, 2000), m3 = mkrow(3, 4, 3000);
	struct rfs_handle h;
	struct rfs_wopen wo;
	fuse_ino_t c, n, n2;

	(void)state;
	c = create("k", PID_W);
	assert_int_equal(open_w(c, PID_W, false, &wo), 0);
	n = look("k", &m2); /* open write handle: a new inode */
	assert_true(n != c);
	assert_int_equal(cls_of(c), RFS_K_WRITE);
	rfs_inode_close_write(c, false);
	/* a handle still attached keeps it in use too */
	whandle_init(&h, c);
	assert_int_equal(rfs_inode_attach(c, &h), 0);
	n2 = look("k", &m3);
	assert_true(n2 != c && n2 != n);
	rfs_inode_detach(c, &h);
	/* free now: the next row's LOOKUP promotes it */
	assert_int_equal(look("k", &m2), c);
	assert_row(ident(c).row, &m2);
	rfs_inode_forget(c, 2);
	FORGET(n, n2);
}

static void test_uncleaned_writer_inode_is_not_promoted(void **state)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 5, 2000);
	struct rfs_wopen wo;
	fuse_ino_t p, n;

	(void)state;
	p = look("k", &m1);
	assert_int_equal(open_w(p, PID_W, false, &wo), 0);
	assert_int_equal(wo.inval, RFS_INVAL_ALL);
	/* the invalidation failed: rfs_inode_cleaned() is never called */
	rfs_inode_close_write(p, false);
	n = look("k", &m2);
	assert_true(n != p);
	assert_int_equal(cls_of(p), RFS_K_WRITE);
	FORGET(p, n);
}

static void test_reader_since_invalidation_keeps_inode_unpromoted(void **s)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 5, 2000);
	struct region_value *v = val(&m1), *o;
	struct rfs_wopen wo;
	fuse_ino_t p, n;
	bool pc;

	(void)s;
	p = look("k", &m1);
	assert_int_equal(open_w(p, PID_W, false, &wo), 0);
	assert_int_equal(wo.inval, RFS_INVAL_ALL);
	/* a reader opened (and read) between the decision and the notify */
	o = open_r(p, v, &pc);
	assert_false(pc);
	close_r(p, o, pc);
	rfs_inode_cleaned(p, wo.gen);
	assert_false(node_of(p).pristine);
	rfs_inode_close_write(p, false);
	n = look("k", &m2);
	assert_true(n != p);
	FORGET(p, n);
}

static void test_writer_inode_opened_to_read_is_not_promoted(void **state)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 5, 2000),
			  m3 = mkrow(3, 5, 3000);
	struct region_value *v = val(&m1), *o;
	struct rfs_wopen wo;
	fuse_ino_t c, d, n, n2;
	bool pc;

	(void)state;
	/* O_RDWR: the writer itself may have filled pages */
	c = create("rw", PID_W);
	assert_int_equal(open_w(c, PID_W, true, &wo), 0);
	rfs_inode_close_write(c, true);
	n = look("rw", &m2);
	assert_true(n != c);
	/* a read-only open of a writer's inode */
	d = create("ro", PID_W);
	assert_int_equal(open_w(d, PID_W, false, &wo), 0);
	o = open_r(d, v, &pc);
	close_r(d, o, pc);
	rfs_inode_close_write(d, false);
	n2 = look("ro", &m3);
	assert_true(n2 != d);
	FORGET(c, d, n, n2);
}

static void test_refused_writers_retry_inode_is_kept_for_it(void **state)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 5, 2000);
	struct region_value *v, *o;
	struct rfs_wopen wo;
	fuse_ino_t p, w, n;

	(void)state;
	p = hold_page("k", &m1, &v, &o);
	assert_int_equal(open_w(p, PID_W, false, &wo), -ESTALE);
	w = look_as("k", &m1, PID_W, false, NULL);
	close_r(p, o, true);
	/* someone commits m2 and looks it up before the writer's OPEN */
	n = look("k", &m2);
	assert_true(n != w);
	assert_int_equal(cls_of(w), RFS_K_WRITE);
	assert_int_equal(open_w(w, PID_W, false, &wo), 0);
	rfs_inode_close_write(w, false);
	FORGET(p, w, n);
}

/*
 * Was a bug, fixed by the marker check in is_promotable(). Two threads whose
 * write opens were refused with ESTALE both retry: their LOOKUPs return
 * the same writer's inode W, and mark it "wanted" (a bool). The first
 * writer's OPEN clears the flag; once it has closed, W is pristine, has
 * no handle and is not wanted, so a reader's LOOKUP of the committed row
 * promotes W to the page-cache inode and a page-cache reader may open it
 * before the second writer's retried OPEN arrives, which then fails with
 * ESTALE again. The kernel retries an ESTALE open only once, so open(2)
 * returns ESTALE to the application. Needs only the first writer's whole
 * open/write/close and a reader's lookup+open to fit between the second
 * writer's LOOKUP and OPEN. is_promotable() now also refuses while any
 * marker names the inode's name, which keeps W a writer's inode until
 * every retry has opened it: the second writer's open must succeed.
 */
static void test_second_refused_writer_retry_survives_first_writer(void **s)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 6, 2000);
	struct region_value *v, *o, *v2, *o2;
	struct rfs_wopen wo;
	fuse_ino_t p, w, n;
	bool pc;
	int rc;

	(void)s;
	p = hold_page("k", &m1, &v, &o);
	assert_int_equal(open_w(p, PID_W, false, &wo), -ESTALE);
	assert_int_equal(open_w(p, PID_W2, false, &wo), -ESTALE);
	w = look_as("k", &m1, PID_W, false, NULL);
	assert_int_equal(look_as("k", &m1, PID_W2, false, NULL), w);
	/* the first writer opens, commits m2 and closes */
	assert_int_equal(open_w(w, PID_W, false, &wo), 0);
	rfs_inode_close_write(w, false);
	/* a reader looks the new row up and opens it */
	v2 = val(&m2);
	n = look("k", &m2);
	o2 = open_r(n, v2, &pc);
	/* the second writer's retried OPEN */
	rc = open_w(w, PID_W2, false, &wo);
	if (rc == 0)
		rfs_inode_close_write(w, false);
	close_r(n, o2, pc);
	close_r(p, o, true);
	FORGET(p, w, w, n);
	assert_int_equal(rc, 0); /* fails: -ESTALE (n == w was promoted) */
}

/* ---- names --------------------------------------------------------------- */

static void test_unlink_makes_every_inode_of_the_name_gone(void **state)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 6, 2000),
			  m3 = mkrow(1, 0, 3000);
	fuse_ino_t ino[3], x, again, last;
	struct rfs_ident id;
	int i;

	(void)state;
	ino[0] = look("k", &m1); /* an old version */
	ino[1] = look("k", &m2); /* the current one */
	ino[2] = create("k", PID_W);
	x = look("k2", &m1);
	rfs_inode_unlinked(R, "k", 1, &m2);
	for (i = 0; i < 3; i++) {
		id = ident(ino[i]);
		assert_true(id.gone);
		assert_true(id.last_valid);
		assert_row(id.last, &m2);
		assert_string_equal(id.key, "k");
	}
	assert_int_equal(cls_of(ino[2]), RFS_K_WRITE);
	assert_int_equal(peek("k"), 0);
	assert_int_equal(peek("k2"), x);
	assert_false(ident(x).gone);
	/* a new key of that name: a new inode, none of the gone ones */
	again = create("k", PID_W);
	for (i = 0; i < 3; i++)
		assert_true(again != ino[i]);
	rfs_inode_unlinked(R, "k", 1, NULL);
	assert_true(ident(again).gone);
	assert_false(ident(again).last_valid);
	last = look("k", &m3);
	assert_true(last > again);
	for (i = 0; i < 3; i++)
		rfs_inode_forget(ino[i], 1);
	FORGET(again, x, last);
}

static void test_rename_moves_source_inodes_and_detaches_target(void **s)
{
	struct store_meta mf = mkrow(4, 5, 1000), mt = mkrow(9, 3, 500);
	struct store_meta moved = mkrow(5, 5, 7000); /* store_rename's row */
	struct region_value *v, *o;
	struct rfs_handle h;
	struct rfs_wopen wo;
	fuse_ino_t f, fw, t, n;

	(void)s;
	f = hold_page("from", &mf, &v, &o);
	fw = create("from", PID_W);
	assert_int_equal(open_w(fw, PID_W, false, &wo), 0);
	whandle_init(&h, fw);
	assert_int_equal(rfs_inode_attach(fw, &h), 0);
	t = look("to", &mt);
	rfs_inode_renamed(R, "from", 4, "to", 2, &mt, NULL);
	/* the replaced target is detached with its last row */
	assert_true(ident(t).gone);
	assert_row(ident(t).last, &mt);
	/* open files follow the rename: a commit of fw goes to "to" */
	assert_string_equal(ident(f).key, "to");
	assert_int_equal(ident(f).klen, 2);
	assert_false(ident(f).gone);
	assert_string_equal(ident(fw).key, "to");
	assert_int_equal(peek("to"), f);
	assert_int_equal(peek("from"), 0);
	assert_row(ident(f).row, &mf);
	/* the row the rename committed: a new inode; f keeps its own row */
	n = look("to", &moved);
	assert_true(n != f && n != fw && n != t);
	assert_row(ident(f).row, &mf);
	/* the source name is free: a new key there gets a new inode */
	assert_true(look("from", &mf) > n);
	rfs_inode_detach(fw, &h);
	rfs_inode_close_write(fw, false);
	close_r(f, o, true);
	FORGET(peek("from"), f, fw, t, n);
}

static void test_rename_to_free_name_or_onto_itself(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	fuse_ino_t a, b;

	(void)state;
	a = look("a", &m);
	/* onto itself: nothing */
	rfs_inode_renamed(R, "a", 1, "a", 1, &m, NULL);
	assert_false(ident(a).gone);
	assert_int_equal(peek("a"), a);
	rfs_inode_renamed(R, "a", 1, "b", 1, NULL, NULL);
	assert_false(ident(a).gone);
	assert_false(ident(a).last_valid);
	assert_string_equal(ident(a).key, "b");
	assert_int_equal(peek("a"), 0);
	assert_int_equal(peek("b"), a);
	/* an unchanged row under the new name: the same inode */
	assert_int_equal(look("b", &m), a);
	/* a rename from a name without inodes only detaches the target */
	rfs_inode_renamed(R, "zz", 2, "b", 1, &m, NULL);
	assert_true(ident(a).gone);
	assert_int_equal(peek("b"), 0);
	b = look("b", &m);
	assert_true(b != a);
	rfs_inode_forget(a, 2);
	rfs_inode_forget(b, 1);
}

/*
 * A rename the store committed moves every inode of its source, even
 * with no memory left: their names were allocated before the store's
 * rename (rfs_inode_rename_prepare()). One made gone instead stayed what
 * the kernel's entry of the new name pointed to, and opens of that name
 * read the old name's value, or ENOENT (tests/fault/test_inject.sh, m=).
 */
static void test_rename_prepared_moves_without_memory(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct rfs_inode_names names;
	fuse_ino_t a, w;

	(void)state;
	a = look("a", &m);
	w = create("a", PID_W); /* a second inode of the name */
	atomic_store(&malloc_fails, true);
	/* no memory for the names: -ENOMEM, nothing to free */
	assert_int_equal(rfs_inode_rename_prepare(R, "a", 1, "b", 1, &names),
			 -ENOMEM);
	assert_null(names.v);
	assert_int_equal(names.n, 0);
	atomic_store(&malloc_fails, false);
	assert_int_equal(rfs_inode_rename_prepare(R, "a", 1, "b", 1, &names),
			 0);
	assert_int_equal(names.n, 2);
	atomic_store(&malloc_fails, true);
	assert_true(rfs_inode_renamed(R, "a", 1, "b", 1, NULL, &names));
	atomic_store(&malloc_fails, false);
	assert_int_equal(names.n, 0);
	rfs_inode_names_free(&names);
	assert_false(ident(a).gone);
	assert_string_equal(ident(a).key, "b");
	assert_false(ident(w).gone);
	assert_string_equal(ident(w).key, "b");
	assert_int_equal(peek("b"), a);
	assert_int_equal(peek("a"), 0);
	/* without prepared names and no memory: made gone, and said so */
	assert_int_equal(rfs_inode_rename_prepare(R, "b", 1, "b", 1, &names),
			 0); /* onto itself: nothing to move */
	assert_null(names.v);
	atomic_store(&malloc_fails, true);
	assert_false(rfs_inode_renamed(R, "b", 1, "c", 1, NULL, NULL));
	atomic_store(&malloc_fails, false);
	assert_true(ident(a).gone);
	assert_true(ident(w).gone);
	FORGET(a, w);
}

/* ---- outside changes ----------------------------------------------------- */

static void test_outside_change_gives_new_inode_for_same_row(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v, *o, *reload, *o2;
	fuse_ino_t p, other, n;
	bool pc;

	(void)state;
	p = hold_page("k", &m, &v, &o);
	other = look("k2", &m);
	/* deleted and inserted again within a millisecond: the same triple */
	rfs_inode_changed(R, "k", 1);
	n = look("k", &m);
	assert_true(n != p);
	assert_int_equal(peek("k"), n);
	assert_int_equal(look("k2", &m), other); /* untouched */
	/* the old inode keeps its row and its readers' value */
	assert_row(ident(p).row, &m);
	assert_false(ident(p).gone);
	/* an open of it (a kernel entry not yet dropped): direct I/O */
	o2 = open_r(p, v, &pc);
	assert_false(pc);
	close_r(p, o2, pc);
	/* the new inode gets the page cache of the value loaded now */
	reload = val(&m);
	o2 = open_r(n, reload, &pc);
	assert_true(pc);
	assert_ptr_equal(o2, reload);
	close_r(n, o2, pc);
	close_r(p, o, true);
	FORGET(p, n);
	rfs_inode_forget(other, 2);
}

static void test_outside_change_of_everything_renews_every_key(void **s)
{
	struct store_meta m = mkrow(1, 5, 1000);
	fuse_ino_t a, b, c, dir, dir2;

	(void)s;
	a = look("a", &m);
	b = look("b", &m);
	assert_int_equal(rfs_inode_lookup_key("other", "c", 1, &m, PID_R, false,
					      &c, &(enum rfs_kclass){0}),
			 0);
	assert_int_equal(rfs_inode_lookup(RFS_I_REGION, R, &dir), 0);
	rfs_inode_changed(NULL, NULL, 0); /* what the feed sends */
	assert_int_equal(peek("a"), 0);
	assert_int_equal(peek("b"), 0);
	assert_int_equal(rfs_inode_peek("other", "c", 1), 0);
	assert_true(look("a", &m) != a);
	assert_true(look("b", &m) != b);
	assert_int_equal(rfs_inode_lookup(RFS_I_REGION, R, &dir2), 0);
	assert_int_equal(dir2, dir);
	FORGET(peek("a"), peek("b"), a, b, c);
	rfs_inode_forget(dir, 2);
}

/* ---- races, driven through the write-lock hook --------------------------- */

struct look_args {
	const char *key;
	const struct store_meta *m;
	bool write;
	fuse_ino_t ino;
};

static void hook_lookup(void *arg)
{
	struct look_args *a = arg;

	a->ino = look_as(a->key, a->m, PID_O, a->write, NULL);
}

static void test_lookup_between_forget_and_free_revives(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct look_args a = {"k", &m, false, 0};
	struct hook h = {hook_lookup, &a, 0};
	fuse_ino_t ino;

	(void)state;
	ino = look("k", &m);
	arm(&h);
	rfs_inode_forget(ino, 1); /* count 0, then the LOOKUP, then the free */
	assert_int_equal(h.ran, 1);
	assert_int_equal(a.ino, ino);
	assert_true(exists(ino));
	assert_int_equal(node_of(ino).nlookup, 1);
	rfs_inode_forget(ino, 1);
	assert_false(exists(ino));
}

struct close_args {
	fuse_ino_t ino;
	struct region_value *o;
};

static void hook_close(void *arg)
{
	struct close_args *a = arg;

	close_r(a->ino, a->o, true);
}

static void test_release_between_forget_and_free_frees_once(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v, *o;
	struct close_args ca;
	struct hook h = {hook_close, &ca, 0};
	fuse_ino_t ino;

	(void)state;
	/* both find the node unused; the first to lock frees it */
	ino = hold_page("k", &m, &v, &o);
	ca.ino = ino;
	ca.o = o;
	arm(&h);
	rfs_inode_forget(ino, 1);
	assert_int_equal(h.ran, 1);
	assert_false(exists(ino));
}

static void test_lookup_between_release_and_free_revives(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct look_args a = {"k", &m, false, 0};
	struct hook h = {hook_lookup, &a, 0};
	struct region_value *v, *o;
	fuse_ino_t ino;

	(void)state;
	ino = hold_page("k", &m, &v, &o);
	rfs_inode_forget(ino, 1); /* FORGET first: the handle holds it */
	assert_true(exists(ino));
	arm(&h);
	close_r(ino, o, true); /* unused, then the LOOKUP, then the free */
	assert_int_equal(h.ran, 1);
	assert_int_equal(a.ino, ino);
	assert_true(exists(ino));
	assert_int_equal(node_of(ino).nlookup, 1);
	rfs_inode_forget(ino, 1);
	assert_false(exists(ino));
}

static void hook_region_lookup(void *arg)
{
	assert_int_equal(rfs_inode_lookup(RFS_I_REGION, R, arg), 0);
}

static void test_lookups_racing_to_create_make_one_inode(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct look_args a = {"k", &m, false, 0};
	struct hook h = {hook_lookup, &a, 0};
	fuse_ino_t ino, w, dir, dir2 = 0;

	(void)state;
	/* the other LOOKUP runs after this one's shared miss */
	arm(&h);
	ino = look("k", &m);
	assert_int_equal(h.ran, 1);
	assert_int_equal(a.ino, ino);
	assert_int_equal(node_of(ino).nlookup, 2);
	/* two CREATEs of one name: one writer's inode */
	a = (struct look_args){"w", NULL, true, 0};
	arm(&h);
	w = create("w", PID_W);
	assert_int_equal(h.ran, 1);
	assert_int_equal(a.ino, w);
	assert_int_equal(node_of(w).nlookup, 2);
	/* a region directory, the same way */
	h = (struct hook){hook_region_lookup, &dir2, 0};
	arm(&h);
	assert_int_equal(rfs_inode_lookup(RFS_I_REGION, R, &dir), 0);
	assert_int_equal(h.ran, 1);
	assert_int_equal(dir, dir2);
	assert_int_equal(rfs_inode_count(), 3);
	rfs_inode_forget(ino, 2);
	rfs_inode_forget(w, 2);
	rfs_inode_forget(dir, 2);
}

/* ---- threads ------------------------------------------------------------- */

#define T_KEYS	    3
#define T_READERS   2
#define T_READ_OPS  10000 /* per reader */
#define T_WRITE_OPS 3000
#define T_MIX_OPS   10000

/* One key as the store and the cache have it. */
struct tkey {
	pthread_mutex_t mu;
	char name[2];
	struct store_meta row;	/* L: mu; the store's row */
	struct region_value *v; /* L: mu; the cache's value (one reference) */
};

static struct {
	pthread_barrier_t start;
	struct tkey keys[T_KEYS];
	atomic_uint failures;
	atomic_uint estale; /* information only: refused write opens */
	atomic_uint pcache; /* page-cache read opens */
	atomic_uint direct; /* direct read opens */
	pthread_mutex_t msg_lock;
	char first[160]; /* L: msg_lock; the first failure */
} ts = {.msg_lock = PTHREAD_MUTEX_INITIALIZER};

/* cmocka's asserts cannot be used off the main thread: count instead. */
static void t_fail(int line, const char *what)
{
	if (atomic_fetch_add(&ts.failures, 1))
		return;
	pthread_mutex_lock(&ts.msg_lock);
	snprintf(ts.first, sizeof(ts.first), "line %d: %s", line, what);
	pthread_mutex_unlock(&ts.msg_lock);
}

#define t_check(c) ((c) ? true : (t_fail(__LINE__, #c), false))

/* What a reader's store_stat() and cache lookup would return now. */
static struct region_value *t_snap(struct tkey *k, struct store_meta *row)
{
	struct region_value *v;

	pthread_mutex_lock(&k->mu);
	*row = k->row;
	v = region_value_ref(k->v);
	pthread_mutex_unlock(&k->mu);
	return v;
}

/* Replaces the cache's value: by a commit (new row) or a reload. */
static void t_install(struct tkey *k, bool commit)
{
	struct region_value *old;

	pthread_mutex_lock(&k->mu);
	if (commit) {
		k->row.version++;
		k->row.size = (k->row.size + 3) % 17;
		k->row.mtime_ns += 1000;
	}
	old = k->v;
	k->v = load(&k->row);
	pthread_mutex_unlock(&k->mu);
	region_value_unref(old);
}

/* Does v hold the row (version, size, mtime)? As inode.c checks it. */
static bool value_is_row(const struct region_value *v,
			 const struct store_meta *row)
{
	return region_value_version(v) == row->version &&
	       region_value_len(v) == row->size &&
	       region_value_mtime(v) == row->mtime_ns;
}

/* Checks what a read OPEN of ino that found v in the cache served. */
static void t_opened(fuse_ino_t ino, struct region_value *v,
		     struct region_value *out, bool pc)
{
	struct rfs_ident id;

	atomic_fetch_add(pc ? &ts.pcache : &ts.direct, 1);
	t_check(pc || out == v); /* direct: the cache's value */
	if (pc) { /* a page-cache handle pins its inode's class and row */
		t_check(rfs_inode_ident(ino, &id) == 0);
		t_check(id.cls == RFS_K_PAGE && value_is_row(out, &id.row));
	}
}

/*
 * A second OPEN of ino while the first handle (out, pc) is open, with
 * what the cache has now: page-cache readers all share one value (a
 * second open of an inode a commit made not current meanwhile gets the
 * cache's value directly instead).
 */
static void t_reopen(struct tkey *k, fuse_ino_t ino,
		     const struct region_value *out, bool pc)
{
	struct region_value *v, *out2 = NULL;
	struct store_meta row;
	bool pc2 = false;

	v = t_snap(k, &row);
	if (t_check(rfs_inode_open_read(ino, v, &out2, &pc2, NULL) == 0)) {
		t_opened(ino, v, out2, pc2);
		t_check(!pc || !pc2 || out2 == out);
		rfs_inode_close_read(ino, pc2);
	}
	region_value_unref(out2);
	region_value_unref(v);
}

/* LOOKUP, OPEN O_RDONLY (twice: nested), RELEASE, FORGET. */
static void t_read(struct tkey *k, pid_t pid, bool forget_first, bool nested)
{
	struct region_value *v, *out = NULL;
	struct store_meta row;
	enum rfs_kclass cls;
	fuse_ino_t ino;
	bool pc = false;

	v = t_snap(k, &row);
	if (!t_check(rfs_inode_lookup_key(R, k->name, 1, &row, pid, false, &ino,
					  &cls) == 0))
		goto out;
	if (!t_check(rfs_inode_open_read(ino, v, &out, &pc, NULL) == 0)) {
		rfs_inode_forget(ino, 1);
		goto out;
	}
	t_opened(ino, v, out, pc);
	if (nested)
		t_reopen(k, ino, out, pc);
	if (forget_first) /* FORGET overtakes RELEASE */
		rfs_inode_forget(ino, 1);
	rfs_inode_close_read(ino, pc);
	if (!forget_first)
		rfs_inode_forget(ino, 1);
out:
	region_value_unref(out);
	region_value_unref(v);
}

/* LOOKUP and write OPEN, with the ESTALE retry; 0 or the inode. */
static fuse_ino_t t_enter(struct tkey *k, pid_t pid, struct rfs_wopen *wo)
{
	struct store_meta row;
	enum rfs_kclass cls;
	fuse_ino_t ino;
	int rc;

	region_value_unref(t_snap(k, &row));
	if (!t_check(rfs_inode_lookup_key(R, k->name, 1, &row, pid, false, &ino,
					  &cls) == 0))
		return 0;
	rc = rfs_inode_open_write(ino, pid, false, wo);
	if (rc == -ESTALE) {
		atomic_fetch_add(&ts.estale, 1);
		rfs_inode_forget(ino, 1);
		if (!t_check(rfs_inode_lookup_key(R, k->name, 1, &row, pid,
						  false, &ino, &cls) == 0))
			return 0;
		t_check(cls == RFS_K_WRITE);
		rc = rfs_inode_open_write(ino, pid, false, wo);
	}
	if (!t_check(rc == 0)) {
		rfs_inode_forget(ino, 1);
		return 0;
	}
	return ino;
}

/* A whole write: open, dirty the buffer, commit on close, release. */
static void t_write(struct tkey *k, pid_t pid)
{
	struct rfs_handle h;
	struct rfs_wopen wo;
	fuse_ino_t ino = t_enter(k, pid, &wo);

	if (!ino)
		return;
	if (wo.inval == RFS_INVAL_ALL)
		rfs_inode_cleaned(ino, wo.gen);
	whandle_init(&h, ino);
	t_check(rfs_inode_attach(ino, &h) == 0);
	whandle_set(&h, 3, 1);
	t_install(k, true);
	atomic_store(&h.u.w.dirty, false);
	rfs_inode_detach(ino, &h);
	rfs_inode_close_write(ino, false);
	rfs_inode_forget(ino, 1);
}

struct tctx {
	unsigned role; /* 0..T_READERS-1 readers, then the writer, the mixer */
	pthread_t t;
};

static void t_reader(unsigned n)
{
	unsigned i;

	for (i = 0; i < T_READ_OPS; i++)
		t_read(&ts.keys[(i + n) % T_KEYS], PID_R + (pid_t)n, false,
		       i % 2);
}

static void t_writer(void)
{
	unsigned i;

	for (i = 0; i < T_WRITE_OPS; i++)
		t_write(&ts.keys[i % T_KEYS], PID_W);
}

/* Outside changes, reloads, FORGET before RELEASE, peeks. */
static void t_mixer(void)
{
	struct rfs_ident id;
	struct tkey *k;
	unsigned i;

	for (i = 0; i < T_MIX_OPS; i++) {
		k = &ts.keys[i % T_KEYS];
		switch (i % 4) {
		case 0:
			if (i % 400 == 0)
				rfs_inode_changed(NULL, NULL, 0);
			else
				rfs_inode_changed(R, k->name, 1);
			break;
		case 1:
			t_install(k, false); /* evicted and loaded again */
			break;
		case 2:
			t_read(k, PID_O, true, false);
			break;
		default: /* readdir's d_ino: no count held, may be gone */
			rfs_inode_ident(rfs_inode_peek(R, k->name, 1), &id);
			break;
		}
	}
}

static void *t_main(void *arg)
{
	struct tctx *c = arg;

	pthread_barrier_wait(&ts.start);
	if (c->role < T_READERS)
		t_reader(c->role);
	else if (c->role == T_READERS)
		t_writer();
	else
		t_mixer();
	return NULL;
}

static void t_init(void)
{
	unsigned i;

	atomic_store(&ts.failures, 0);
	atomic_store(&ts.estale, 0);
	atomic_store(&ts.pcache, 0);
	atomic_store(&ts.direct, 0);
	for (i = 0; i < T_KEYS; i++) {
		struct tkey *k = &ts.keys[i];

		pthread_mutex_init(&k->mu, NULL);
		k->name[0] = (char)('a' + i);
		k->name[1] = '\0';
		k->row = mkrow(1, i + 1, 1000);
		k->v = load(&k->row);
	}
}

static void test_threads_mixing_lookup_open_write_forget(void **state)
{
	struct tctx c[T_READERS + 2];
	unsigned i, n = T_READERS + 2;

	(void)state;
	t_init();
	assert_int_equal(pthread_barrier_init(&ts.start, NULL, n), 0);
	for (i = 0; i < n; i++) {
		c[i].role = i;
		assert_int_equal(pthread_create(&c[i].t, NULL, t_main, &c[i]),
				 0);
	}
	for (i = 0; i < n; i++)
		pthread_join(c[i].t, NULL);
	pthread_barrier_destroy(&ts.start);
	if (atomic_load(&ts.failures))
		fail_msg("%u failures, first at %s", atomic_load(&ts.failures),
			 ts.first);
	print_message("threads: %u page-cache opens, %u direct, %u refused "
		      "write opens\n",
		      atomic_load(&ts.pcache), atomic_load(&ts.direct),
		      atomic_load(&ts.estale));
	/* every count was given back: nothing is left, no marker either */
	assert_int_equal(rfs_inode_count(), 0);
	assert_int_equal(table_probe().markers, 0);
	for (i = 0; i < T_KEYS; i++) {
		region_value_unref(ts.keys[i].v);
		pthread_mutex_destroy(&ts.keys[i].mu);
	}
}

/* ---- zero-request opens: READ by inode --------------------------------- */

static uint64_t pinned_bytes(void)
{
	uint64_t bytes, values;

	rfs_pin_counters(&bytes, &values);
	return bytes;
}

/*
 * The first READ of a kernel inode pins the cache's value of its row; every
 * later READ gets that value whatever the cache holds; the pin is counted
 * in memory_pinned_bytes and goes with the last FORGET, not before.
 */
static void test_kernel_read_pins_the_first_value_until_forget(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v = val(&m), *reload = val(&m), *out;
	uint64_t b0 = pinned_bytes();
	fuse_ino_t ino;

	(void)state;
	ino = look("k", &m);
	assert_int_equal(look("k", &m), ino); /* nlookup 2 */
	assert_int_equal(rfs_inode_kernel_value(ino, NULL, &out), -EAGAIN);
	assert_int_equal(rfs_inode_kernel_value(ino, v, &out), 0);
	assert_ptr_equal(out, v);
	region_value_unref(out);
	assert_int_equal(pinned_bytes() - b0, 5);
	/* a reload of the row (another serial): the pinned value still */
	assert_int_equal(rfs_inode_kernel_value(ino, reload, &out), 0);
	assert_ptr_equal(out, v);
	region_value_unref(out);
	rfs_inode_changed(R, "k", 1); /* the row changed: the pin stays */
	assert_int_equal(rfs_inode_kernel_value(ino, NULL, &out), 0);
	assert_ptr_equal(out, v);
	region_value_unref(out);
	rfs_inode_forget(ino, 1);
	assert_int_equal(rfs_inode_kernel_value(ino, NULL, &out), 0);
	region_value_unref(out);
	assert_int_equal(pinned_bytes() - b0, 5);
	rfs_inode_forget(ino, 1);
	assert_false(exists(ino));
	assert_int_equal(pinned_bytes(), b0);
}

/*
 * A row that changed before the inode's first READ: a value of another
 * row is served (and pinned) only if it fits the kernel's size, the old
 * row's; a longer one is EIO.
 */
static void test_kernel_read_after_a_change_fits_the_size_or_fails(void **s)
{
	struct store_meta m = mkrow(1, 5, 1000), longer = mkrow(2, 7, 2000),
			  shorter = mkrow(3, 3, 3000);
	struct region_value *vl = val(&longer), *vs = val(&shorter), *out;
	fuse_ino_t ino;

	(void)s;
	ino = look("k", &m);
	rfs_inode_changed(R, "k", 1);
	assert_int_equal(rfs_inode_kernel_value(ino, vl, &out), -EIO);
	assert_int_equal(rfs_inode_kernel_value(ino, vs, &out), 0);
	assert_ptr_equal(out, vs);
	region_value_unref(out);
	assert_int_equal(rfs_inode_kernel_value(ino, vl, &out), 0);
	assert_ptr_equal(out, vs); /* pinned */
	region_value_unref(out);
	rfs_inode_forget(ino, 1);
	assert_false(exists(ino));
}

/* ---- filling the kernel's pages at open ------------------------------------ */

static void test_first_page_open_fills_and_others_wait(void **state)
{
	struct store_meta m = mkrow(1, 5, 1000);
	struct region_value *v = val(&m), *o1, *o2, *out = NULL;
	struct rfs_wopen wo;
	bool pc1, pc2, f1, f2;
	fuse_ino_t p;

	(void)state;
	p = look("k", &m);
	o1 = open_f(p, v, &pc1, &f1);
	assert_true(pc1);
	assert_true(f1); /* the anchoring open: the kernel has no page */
	assert_ptr_equal(o1, v);
	assert_true(node_of(p).filling);
	/* every other read open waits, and is not counted */
	assert_int_equal(rfs_inode_open_read(p, v, &out, &pc2, &f2), -EAGAIN);
	assert_null(out);
	assert_int_equal(rfs_inode_open_read(p, v, &out, &pc2, NULL), -EAGAIN);
	rfs_inode_filled(p);
	assert_false(node_of(p).filling);
	o2 = open_f(p, v, &pc2, &f2);
	assert_true(pc2);
	assert_false(f2); /* the pages are there */
	assert_ptr_equal(o2, v);
	close_r(p, o2, pc2);
	close_r(p, o1, pc1);
	/* the anchor stays: its pages may too, so no open fills again */
	o1 = open_f(p, v, &pc1, &f1);
	assert_true(pc1);
	assert_false(f1);
	/* a writer meets a page-cache reader, as without filling */
	assert_int_equal(open_w(p, PID_W, false, &wo), -ESTALE);
	close_r(p, o1, pc1);
	FORGET(p);
	/* the refused writer's marker: its retry LOOKUP takes it */
	p = look_as("k", &m, PID_W, false, NULL);
	FORGET(p);
}

static void test_only_the_anchors_first_open_fills(void **state)
{
	struct store_meta m1 = mkrow(1, 5, 1000), m2 = mkrow(2, 9, 2000);
	struct region_value *v1 = val(&m1), *v1b = val(&m1), *v2 = val(&m2);
	struct region_value *o;
	fuse_ino_t p, n, q;
	bool pc, f;

	(void)state;
	/* a commit between LOOKUP and OPEN: the inode is not current */
	p = look("k", &m1);
	n = look("k", &m2);
	o = open_f(p, v2, &pc, &f);
	assert_false(pc);
	assert_false(f);
	assert_false(node_of(p).filling);
	close_r(p, o, pc);
	/* the cache holds another row than the inode's: direct, no fill */
	o = open_f(n, v1, &pc, &f);
	assert_false(pc);
	assert_false(f);
	close_r(n, o, pc);
	assert_int_equal(cls_of(n), RFS_K_DIRECT);
	/* and a direct inode never fills, whatever the value */
	o = open_f(n, v2, &pc, &f);
	assert_false(pc);
	assert_false(f);
	close_r(n, o, pc);
	FORGET(p, n);
	/* an anchor set by an open that did not ask (a large value) */
	q = look("j", &m1);
	o = open_r(q, v1, &pc);
	assert_true(pc);
	close_r(q, o, pc);
	o = open_f(q, v1, &pc, &f);
	assert_true(pc);
	assert_false(f);
	close_r(q, o, pc);
	/* another load of the same row: not the anchor, direct */
	o = open_f(q, v1b, &pc, &f);
	assert_false(pc);
	assert_false(f);
	close_r(q, o, pc);
	FORGET(q);
}

static void test_promoted_writer_inode_fills_at_first_open(void **state)
{
	struct store_meta m = mkrow(3, 4, 3000);
	struct region_value *v = val(&m), *o;
	struct rfs_wopen wo;
	fuse_ino_t c;
	bool pc, f;

	(void)state;
	c = create("k", PID_W);
	assert_int_equal(open_w(c, PID_W, false, &wo), 0);
	rfs_inode_close_write(c, false);
	assert_int_equal(look("k", &m), c); /* promoted: pristine */
	o = open_f(c, v, &pc, &f);
	assert_true(pc);
	assert_true(f);
	rfs_inode_filled(c);
	close_r(c, o, pc);
	rfs_inode_forget(c, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_lookup_of_same_row_returns_same_inode),
		T(test_new_version_size_or_mtime_gives_new_inode),
		T(test_old_inode_serves_the_new_value_directly),
		T(test_inode_numbers_are_never_reused),
		T(test_forget_frees_inode_at_zero_lookups_not_before),
		T(test_unknown_numbers_answer_enoent),
		T(test_open_handle_keeps_forgotten_inode_until_release),
		T(test_attached_writers_report_pending_size_and_hold),
		T(test_settled_writers_are_not_writing),
		T(test_attrs_are_stale_for_another_rows_value),
		T(test_region_nodes_are_one_per_kind_and_region),
		T(test_names_are_compared_byte_for_byte),
		T(test_table_growth_keeps_every_inode_reachable),
		T(test_first_open_with_row_value_grants_page_cache),
		T(test_page_cache_readers_share_one_value),
		T(test_other_value_after_readers_left_turns_direct),
		T(test_value_of_another_row_at_first_open_turns_direct),
		T(test_write_open_beside_page_readers_estale_then_writer),
		T(test_write_open_without_page_readers_takes_inode),
		T(test_refusal_marker_is_per_thread_and_name),
		T(test_only_the_latest_refusals_are_remembered),
		T(test_create_gets_writer_inode_beside_readers_inode),
		T(test_cleaned_writer_inode_becomes_next_rows_page_inode),
		T(test_created_writer_inode_is_promoted_after_close),
		T(test_writer_inode_in_use_is_not_promoted),
		T(test_uncleaned_writer_inode_is_not_promoted),
		T(test_reader_since_invalidation_keeps_inode_unpromoted),
		T(test_writer_inode_opened_to_read_is_not_promoted),
		T(test_refused_writers_retry_inode_is_kept_for_it),
		T(test_second_refused_writer_retry_survives_first_writer),
		T(test_unlink_makes_every_inode_of_the_name_gone),
		T(test_rename_moves_source_inodes_and_detaches_target),
		T(test_rename_to_free_name_or_onto_itself),
		T(test_rename_prepared_moves_without_memory),
		T(test_outside_change_gives_new_inode_for_same_row),
		T(test_outside_change_of_everything_renews_every_key),
		T(test_lookup_between_forget_and_free_revives),
		T(test_release_between_forget_and_free_frees_once),
		T(test_lookup_between_release_and_free_revives),
		T(test_lookups_racing_to_create_make_one_inode),
		T(test_threads_mixing_lookup_open_write_forget),
		T(test_kernel_read_pins_the_first_value_until_forget),
		T(test_kernel_read_after_a_change_fits_the_size_or_fails),
		T(test_first_page_open_fills_and_others_wait),
		T(test_only_the_anchors_first_open_fills),
		T(test_promoted_writer_inode_fills_at_first_open),
#undef T
	};

	return cmocka_run_group_tests_name("inode", tests, NULL, NULL);
}
