/*
 * test_commit.c - unit tests of fs/commit.c's name locks and negative
 * notes (no mount, no store).
 *
 * The window commit.c closes: a write handle's commit resolves the name
 * its inode has, and an unlink or a rename of that name may land between
 * the resolution and the store. rfs_names_lock_ino() locks the name it
 * resolved and looks again; if the inode moved or went meanwhile, it
 * locks the name it has now. These tests put a rename or an unlink of the
 * inode exactly into that window, on one thread, through a link-time seam
 * (--wrap of pthread_rwlock_rdlock, tests/unit/meson.build): a hook runs
 * before the n-th shared lock the library takes. In rfs_names_lock_ino()
 * the first is the inode table's (the first look), the second the name
 * lock's. The outcome never depends on scheduling.
 *
 * The inodes are made as the kernel's CREATE would (rfs_inode_lookup_key()
 * with write), renamed and unlinked as commit.c's rename and unlink do
 * after their store operation (rfs_inode_renamed/_unlinked()).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fs.h"

#define R "r" /* the region of every key below */

/* ---- the seam ------------------------------------------------------------ */

static void (*hook_fn)(void); /* runs once, then is cleared */
static int hook_countdown;    /* ...before the shared lock that makes it 0 */
static unsigned hook_ran;

int __real_pthread_rwlock_rdlock(pthread_rwlock_t *l);
int __wrap_pthread_rwlock_rdlock(pthread_rwlock_t *l);

int __wrap_pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	void (*fn)(void) = hook_fn;

	if (fn && --hook_countdown == 0) {
		hook_fn = NULL;
		fn();
		hook_ran++;
	}
	return __real_pthread_rwlock_rdlock(l);
}

/* Runs fn just before the n-th shared lock from now (this thread only). */
static void arm(void (*fn)(void), int n)
{
	hook_ran = 0;
	hook_countdown = n;
	hook_fn = fn;
}

/* ---- helpers ------------------------------------------------------------- */

/* A writer's inode of key, as CREATE makes it (one lookup counted). */
static fuse_ino_t create(const char *key)
{
	enum rfs_kclass cls;
	fuse_ino_t ino = 0;

	assert_int_equal(rfs_inode_lookup_key(R, key, strlen(key), NULL, 1,
					      true, &ino, &cls),
			 0);
	assert_int_equal(cls, RFS_K_WRITE);
	return ino;
}

static void rename_a_to_b(void)
{
	rfs_inode_renamed(R, "a", 1, "b", 1, NULL, NULL);
}

static void unlink_a(void)
{
	rfs_inode_unlinked(R, "a", 1, NULL);
}

static int setup(void **state)
{
	(void)state;
	hook_fn = NULL;
	return rfs_inode_init();
}

static int teardown(void **state)
{
	(void)state;
	hook_fn = NULL;
	rfs_inode_fini();
	return 0;
}

/* ---- tests --------------------------------------------------------------- */

/* Without a change in the window: the name the inode has, locked. */
static void test_lock_ino_locks_the_current_name(void **state)
{
	fuse_ino_t ino = create("a");
	struct rfs_names l;
	struct rfs_ident id;

	(void)state;
	assert_int_equal(rfs_names_lock_ino(&l, ino, false, &id), 0);
	assert_int_equal(id.klen, 1);
	assert_string_equal(id.key, "a");
	assert_false(id.gone);
	assert_int_equal(l.n, 1);
	rfs_names_unlock(&l);
	assert_int_equal(l.n, 0);
	rfs_inode_forget(ino, 1);
}

/* A rename between the first look and the lock: the new name is locked. */
static void test_lock_ino_follows_a_rename_in_the_window(void **state)
{
	fuse_ino_t ino = create("a");
	struct rfs_names l;
	struct rfs_ident id;

	(void)state;
	arm(rename_a_to_b, 2); /* before the (shared) name lock of "a" */
	assert_int_equal(rfs_names_lock_ino(&l, ino, false, &id), 0);
	assert_int_equal(hook_ran, 1);
	assert_string_equal(id.key, "b");
	assert_false(id.gone);
	rfs_names_unlock(&l);
	rfs_inode_forget(ino, 1);
}

/* An unlink in the window: the inode is gone, and the caller sees it. */
static void test_lock_ino_sees_an_unlink_in_the_window(void **state)
{
	fuse_ino_t ino = create("a");
	struct rfs_names l;
	struct rfs_ident id;

	(void)state;
	arm(unlink_a, 2);
	assert_int_equal(rfs_names_lock_ino(&l, ino, false, &id), 0);
	assert_int_equal(hook_ran, 1);
	assert_true(id.gone);
	rfs_names_unlock(&l);
	rfs_inode_forget(ino, 1);
}

/*
 * The bug of issue 7, one step at a time: a close() whose commit resolved
 * "a" just before an unlink of "a" must store nothing. There is no store
 * here (rfs.st is NULL): a commit that tried to store would fail.
 */
static void test_commit_after_unlink_in_the_window_stores_nothing(void **state)
{
	fuse_ino_t ino = create("a");

	(void)state;
	assert_null(rfs.st);
	arm(unlink_a, 2);
	assert_int_equal(rfs_commit_handle(ino, "x", 1, 0, false, NULL, NULL),
			 0);
	assert_int_equal(hook_ran, 1);
	rfs_inode_forget(ino, 1);
}

static void test_lock_ino_of_an_unknown_inode(void **state)
{
	struct rfs_names l = {.n = 0};
	struct rfs_ident id;

	(void)state;
	assert_int_equal(
		rfs_names_lock_ino(&l, RFS_INO_DYNAMIC + 1000, false, &id),
		-ENOENT);
	assert_int_equal(l.n, 0); /* nothing to unlock */
}

/* ---- negative notes ------------------------------------------------------ */

/* A LOOKUP's miss noted for thread pid, as ops.c's lookup_key() does. */
static void note_miss(pid_t pid, const char *key)
{
	struct rfs_absent a;
	struct rfs_names l;

	rfs_names_lock(&l, R, key, strlen(key), false);
	rfs_names_absent_begin(R, key, strlen(key), &a);
	rfs_names_absent_note(pid, R, key, strlen(key), &a);
	rfs_names_unlock(&l);
}

/* The CREATE's check under the exclusive lock, as commit.c does. */
static bool take(pid_t pid, const char *key)
{
	struct rfs_names l;
	bool ok;

	rfs_names_lock(&l, R, key, strlen(key), true);
	ok = rfs_names_absent_take(pid, R, key, strlen(key));
	rfs_names_unlock(&l);
	return ok;
}

static void section(const char *key, bool excl)
{
	struct rfs_names l;

	rfs_names_lock(&l, R, key, strlen(key), excl);
	rfs_names_unlock(&l);
}

/* A CREATE right after its LOOKUP skips the check, once. */
static void test_note_serves_the_next_create_once(void **state)
{
	(void)state;
	note_miss(100, "n");
	assert_true(take(100, "n"));
	assert_false(take(100, "n")); /* consumed */
	note_miss(100, "n");
	section("n", false); /* a reader or a commit of data: no change */
	assert_true(take(100, "n"));
}

/* Only the same thread and the same name. */
static void test_note_is_the_threads_and_the_names(void **state)
{
	(void)state;
	note_miss(100, "n");
	assert_false(take(101, "n"));
	note_miss(100, "n");
	assert_false(take(100, "m"));
	note_miss(100, "n");
	assert_false(take(100, "n2"));
	note_miss(0, "n"); /* a caller in another pid namespace */
	assert_false(take(0, "n"));
}

/*
 * Any change of existence in between through this mount (an exclusive
 * section of the name: another thread's create, an unlink, a rename) or
 * from outside (the feed) makes the CREATE ask the store.
 */
static void test_note_dies_with_any_change(void **state)
{
	(void)state;
	note_miss(100, "n");
	section("n", true); /* another thread's create of n */
	assert_false(take(100, "n"));
	note_miss(100, "n");
	rfs_names_changed(R, "n", 1);
	assert_false(take(100, "n"));
	note_miss(100, "n");
	rfs_names_changed(NULL, NULL, 0);
	assert_false(take(100, "n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_lock_ino_locks_the_current_name),
		T(test_lock_ino_follows_a_rename_in_the_window),
		T(test_lock_ino_sees_an_unlink_in_the_window),
		T(test_commit_after_unlink_in_the_window_stores_nothing),
		T(test_lock_ino_of_an_unknown_inode),
		T(test_note_serves_the_next_create_once),
		T(test_note_is_the_threads_and_the_names),
		T(test_note_dies_with_any_change),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
