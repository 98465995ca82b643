/*
 * test_kinval.c - unit tests of fs/kinval.c: a close()'s reply handed to
 * the notification thread goes out after the invalidations queued before
 * it, and is never lost, even when the hand-off cannot be allocated.
 *
 * No kernel: fuse_lowlevel_notify_inval_entry() and fuse_reply_err() are
 * replaced at link time (--wrap). The fake notification blocks until the
 * test lets it return, so "an invalidation is being sent" is a state the
 * test holds, not a race it hopes for; malloc() fails on request, on the
 * test's thread only.
 */
#include <errno.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fs.h"

/* ---- the kernel, faked -------------------------------------------------- */

static sem_t notify_in;		 /* posted when a notification starts */
static sem_t notify_go;		 /* posted by the test: let it return */
static atomic_int notifies_done; /* notifications that returned */
static sem_t replied;		 /* posted by every reply */
static atomic_int replies;
static _Atomic(fuse_req_t) reply_req;
static atomic_int reply_err;
static atomic_int reply_after; /* notifies_done when it was sent */

int __wrap_fuse_lowlevel_notify_inval_entry(struct fuse_session *se,
					    fuse_ino_t parent, const char *name,
					    size_t namelen);
int __wrap_fuse_reply_err(fuse_req_t req, int err);

int __wrap_fuse_lowlevel_notify_inval_entry(struct fuse_session *se,
					    fuse_ino_t parent, const char *name,
					    size_t namelen)
{
	(void)se;
	(void)parent;
	(void)name;
	(void)namelen;
	sem_post(&notify_in);
	sem_wait(&notify_go);
	atomic_fetch_add(&notifies_done, 1);
	return 0;
}

int __wrap_fuse_reply_err(fuse_req_t req, int err)
{
	atomic_store(&reply_req, req);
	atomic_store(&reply_err, err);
	atomic_store(&reply_after, atomic_load(&notifies_done));
	atomic_fetch_add(&replies, 1);
	sem_post(&replied);
	return 0;
}

/* malloc() number fail_at of this thread fails (0: none does). */
static _Thread_local int fail_at;
static void *last_failed_peer; /* the allocation before the failed one */
static _Thread_local void *last_alloc;
static atomic_bool peer_freed;

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);
void __real_free(void *p);
void __wrap_free(void *p);

void *__wrap_malloc(size_t size)
{
	if (fail_at > 0 && --fail_at == 0) {
		last_failed_peer = last_alloc;
		return NULL;
	}
	last_alloc = __real_malloc(size);
	return last_alloc;
}

void __wrap_free(void *p)
{
	if (p && p == last_failed_peer)
		atomic_store(&peer_freed, true);
	__real_free(p);
}

/* ---- helpers ------------------------------------------------------------ */

static void sem_wait_10s(sem_t *s)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	assert_int_equal(sem_timedwait(s, &ts), 0);
}

static int setup(void **state)
{
	(void)state;
	sem_init(&notify_in, 0, 0);
	sem_init(&notify_go, 0, 0);
	sem_init(&replied, 0, 0);
	atomic_store(&notifies_done, 0);
	atomic_store(&replies, 0);
	atomic_store(&reply_req, NULL);
	atomic_store(&peer_freed, false);
	last_failed_peer = NULL;
	fail_at = 0;
	return rfs_kinval_start();
}

static int teardown(void **state)
{
	(void)state;
	fail_at = 0;
	rfs_kinval_stop();
	sem_destroy(&notify_in);
	sem_destroy(&notify_go);
	sem_destroy(&replied);
	return 0;
}

/* An invalidation the thread is sending now (until notify_go). */
static void sending_one(void)
{
	rfs_kinval_entry(RFS_INO_ROOT, "k", 1);
	sem_wait_10s(&notify_in);
}

#define REQ ((fuse_req_t)(uintptr_t)0x1000)

/* ---- tests -------------------------------------------------------------- */

/*
 * The usual case: with an invalidation on its way the reply waits for it,
 * and goes out (with the commit's result) once it has been sent.
 */
static void test_reply_waits_for_the_invalidation(void **state)
{
	(void)state;
	sending_one();
	rfs_kinval_reply(REQ, -EIO);
	assert_int_equal(atomic_load(&replies), 0); /* deferred */
	sem_post(&notify_go);
	sem_wait_10s(&replied);
	assert_ptr_equal(atomic_load(&reply_req), REQ);
	assert_int_equal(atomic_load(&reply_err), EIO);
	assert_int_equal(atomic_load(&reply_after), 1); /* after it */
}

/* Nothing queued: the reply goes out at once, on the caller's thread. */
static void test_reply_with_nothing_queued_is_at_once(void **state)
{
	(void)state;
	rfs_kinval_reply(REQ, 0);
	assert_int_equal(atomic_load(&replies), 1);
	assert_int_equal(atomic_load(&reply_err), 0);
}

/*
 * The hand-off's first allocation (the reply's arguments) fails: the
 * reply is not lost, nor does the caller wait for the kernel; it goes out
 * at once with the commit's result (the invalidation follows).
 */
static void test_reply_without_memory_is_sent_at_once(void **state)
{
	(void)state;
	sending_one();
	fail_at = 1;
	rfs_kinval_reply(REQ, -ENOSPC);
	assert_int_equal(fail_at, 0); /* the allocation did fail */
	assert_int_equal(atomic_load(&replies), 1);
	assert_ptr_equal(atomic_load(&reply_req), REQ);
	assert_int_equal(atomic_load(&reply_err), ENOSPC);
	assert_int_equal(atomic_load(&reply_after), 0); /* not waited */
	sem_post(&notify_go);
	rfs_kinval_stop(); /* drains: no second reply comes */
	assert_int_equal(atomic_load(&replies), 1);
	assert_int_equal(atomic_load(&notifies_done), 1);
}

/*
 * The second allocation (the queue item) fails: the same, and the first
 * one is freed.
 */
static void test_reply_without_a_queue_item_is_sent_at_once(void **state)
{
	(void)state;
	sending_one();
	fail_at = 2;
	rfs_kinval_reply(REQ, 0);
	assert_int_equal(fail_at, 0);
	assert_int_equal(atomic_load(&replies), 1);
	assert_int_equal(atomic_load(&reply_err), 0);
	assert_int_equal(atomic_load(&reply_after), 0);
	assert_non_null(last_failed_peer);
	assert_true(atomic_load(&peer_freed));
	sem_post(&notify_go);
	rfs_kinval_stop();
	assert_int_equal(atomic_load(&replies), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_reply_waits_for_the_invalidation),
		T(test_reply_with_nothing_queued_is_at_once),
		T(test_reply_without_memory_is_sent_at_once),
		T(test_reply_without_a_queue_item_is_sent_at_once),
#undef T
	};

	return cmocka_run_group_tests_name("kinval", tests, NULL, NULL);
}
