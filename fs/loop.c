/*
 * loop.c - the session loop: a fixed pool of worker threads.
 *
 * libfuse's multi-threaded loop (fuse_session_loop_mt) starts with one
 * worker and starts another whenever every worker is busy, up to
 * max_threads; since libfuse 3.12 it never stops one (max_idle_threads
 * -1). So the daemon's threads, and with them the SQLite read connections
 * the workers open at their first read (2 fds and a page cache of up to
 * 2 MiB each, store/sqlite.c), grow with the highest concurrency the
 * mount has met so far, at any time: the 60 s soak on a loaded machine
 * went from 14 to 16 threads and from 35 to 39 fds after its warm-up.
 * Bounded, but an operator (or a soak) cannot tell that from a leak, and
 * the memory a mount needs depends on its history.
 *
 * Here the pool is fixed instead: max_threads workers (-o max_threads,
 * libfuse's default 10) start with the loop, each opens its read
 * connection before it takes its first request (store_thread_prepare),
 * and all stay until the session ends. Threads and fds are then a
 * function of the configuration, not of the load, from the first request
 * on. The cost is max_threads idle threads on a quiet mount (their stacks
 * are mostly untouched virtual memory) and no more than max_threads
 * requests served at once, as before.
 *
 * A worker does what libfuse's does (fuse_loop_mt.c), minus the growth:
 * receive a request with cancellation enabled, process it with
 * cancellation disabled. The calling thread sleeps on a semaphore until
 * the session has exited: a worker posts it when it leaves (the device
 * was unmounted, or an error), and a signal interrupts the wait
 * (daemon.c's handle_exit() kicks this thread until rfs_loop_done()).
 * Then it cancels the workers, which can only be waiting in read(), joins
 * them and frees their buffers.
 *
 * With -o poll_us=N (N > 0) the same pool runs polled: see "Polled mode"
 * below.
 *
 * -o clone_fd needs libfuse's private channels, so with it the loop stays
 * libfuse's (growing) one; -s serves in the calling thread alone (poll_us
 * applies to neither).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"

struct worker {
	pthread_t thread;
	struct fuse_buf buf; /* the request buffer; freed after the join */
};

static struct {
	struct fuse_session *se;
	sem_t finish;	   /* a worker left its loop */
	_Atomic int error; /* the first receive error (-errno), or 0 */
	/* -o poll_us (polled mode, below); poll_ns 0: every worker blocks
	 * in read() */
	uint64_t poll_ns;
	int fd;		  /* the session's device, O_NONBLOCK when polled */
	atomic_bool led;  /* a worker holds the lead */
	sem_t lead;	  /* followers wait here to be given the lead */
	atomic_uint idle; /* followers waiting (or about to) on lead */
	atomic_uint busy; /* workers processing a request */
	int stop_fd;	  /* eventfd: readable once the loop must end */
} pool;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Receives one request; in the plain pool with cancellation enabled (as
 * libfuse's loop), polled workers are never cancelled (take_lead()).
 */
static int receive(struct worker *w)
{
	int rc;

	if (pool.poll_ns) /* O_NONBLOCK: never blocks */
		return fuse_session_receive_buf(pool.se, &w->buf);
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	rc = fuse_session_receive_buf(pool.se, &w->buf);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	return rc;
}

/*
 * A receive that ends the worker's loop (rc <= 0; 0: unmounted, libfuse
 * has exited the session): the first error is kept and ends the session.
 */
static void receive_ended(int rc)
{
	int none = 0;

	if (rc < 0) {
		atomic_compare_exchange_strong(&pool.error, &none, rc);
		fuse_session_exit(pool.se);
	}
}

/*
 * Polled mode (-o poll_us=N). Every FUSE request that finds the daemon's
 * workers asleep in read() pays for a wake-up: the kernel wakes a worker,
 * which must be scheduled on a CPU that was idle (on a VM, a halted vCPU
 * that the host must resume) before the request is even read. Here one
 * worker at a time, the leader, waits for requests: after each one it
 * reads the device without blocking for up to N us (sched_yield() between
 * tries, so that a thread that wants its CPU gets it) and only then
 * sleeps in poll(), the one thread that sleeps on the device. The others,
 * followers, sleep on a semaphore and are given the lead when the leader
 * has a request that may take long (anything but the few opcodes that a
 * cached key answers from memory: quick_opcode()) or sees another request
 * already waiting: then two requests run at once, as in the plain pool. A
 * leader that kept the lead through its request reads the next one
 * without a wake-up. The leader does not poll while another worker is
 * busy (a commit, a store read), which needs the CPU more. A LOOKUP or
 * OPEN that misses the cache keeps the lead through its store read; a
 * request that comes meanwhile waits for it (one read of a row), or for a
 * follower if another request was already waiting when the leader took it.
 *
 * Measured (tests/bench/run_bench_fs.sh -n 2000 -s 1024, poll_us=50 ÷ the
 * plain pool in one interleaved run, 2 vCPUs, release build): with one
 * client thread warm reads 1.42x, first reads 1.50x, creates 1.27x,
 * unlinks 1.14x; with 2 and 4 client threads, which keep both vCPUs busy,
 * the poll takes CPU from them: warm reads 0.89x and 0.66x, and stat()
 * (which sends no request) 0.41-0.56x at every thread count. So it is
 * off by default: it pays where CPUs are idle and clients few.
 */
static bool quick_opcode(uint32_t op)
{
	switch (op) {
	case FUSE_LOOKUP:
	case FUSE_GETATTR:
	case FUSE_OPEN:
	case FUSE_READ:
	case FUSE_WRITE: /* a copy into the handle's buffer */
	case FUSE_RELEASE:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
	case FUSE_GETXATTR:
	case FUSE_LISTXATTR:
	case FUSE_ACCESS:
	case FUSE_STATFS:
	case FUSE_OPENDIR:
	case FUSE_RELEASEDIR:
		return true;
	default:
		return false;
	}
}

/*
 * Takes the lead, waiting for it as a follower; false once the session
 * has exited. Polled workers are never cancelled: run_pool() makes
 * stop_fd readable and posts the semaphore once per worker, and every
 * worker leaves by itself (with a worker cancelled in sem_wait(), TSan
 * reported a race in the stats slots' key destructor, which takes its
 * mutex: most likely TSan losing track of the cancelled thread).
 */
static bool take_lead(void)
{
	bool no = false;

	while (!atomic_compare_exchange_strong(&pool.led, &no, true)) {
		no = false;
		if (fuse_session_exited(pool.se))
			return false;
		atomic_fetch_add(&pool.idle, 1);
		/* the leader may have left between the CAS and here */
		if (atomic_load(&pool.led))
			while (sem_wait(&pool.lead) && errno == EINTR)
				;
		atomic_fetch_sub(&pool.idle, 1);
	}
	return true;
}

/* The leader's receive: polls, then sleeps on the device. */
static int lead_receive(struct worker *w)
{
	uint64_t deadline = 0;
	int rc;

	for (;;) {
		rc = receive(w);
		if (rc != -EAGAIN)
			return rc;
		if (!deadline)
			deadline = now_ns() + pool.poll_ns;
		/* a worker still busy (a commit, a store read) needs the
		 * CPU more than a poll does */
		if (now_ns() < deadline && !atomic_load(&pool.busy)) {
			sched_yield();
			continue;
		}
		struct pollfd pfd[2] = {{.fd = pool.fd, .events = POLLIN},
					{.fd = pool.stop_fd, .events = POLLIN}};

		if (poll(pfd, 2, -1) > 0 && pfd[1].revents)
			return 0; /* the loop ends */
		deadline = 0;
	}
}

/* After the leader got a request: hand the lead on if it should. */
static void after_receive(struct worker *w)
{
	const struct fuse_in_header *in = w->buf.mem;
	struct pollfd pfd = {.fd = pool.fd, .events = POLLIN};
	bool pass = !quick_opcode(in->opcode);

	if (!pass)
		pass = poll(&pfd, 1, 0) > 0;
	atomic_store(&pool.led, false);
	if (pass && atomic_load(&pool.idle))
		sem_post(&pool.lead);
}

static void *polled_main(struct worker *w)
{
	int rc;

	while (!fuse_session_exited(pool.se)) {
		if (!take_lead())
			break;
		rc = lead_receive(w);
		if (rc == -EINTR) {
			atomic_store(&pool.led, false);
			continue;
		}
		if (rc <= 0) {
			receive_ended(rc);
			atomic_store(&pool.led, false);
			break;
		}
		atomic_fetch_add(&pool.busy, 1);
		after_receive(w);
		fuse_session_process_buf(pool.se, &w->buf);
		atomic_fetch_sub(&pool.busy, 1);
	}
	/* wake one follower, which sees the exit and wakes the next */
	sem_post(&pool.lead);
	return NULL;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int rc;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	rc = store_thread_prepare(rfs.st);
	if (rc)
		rfs_log(RFS_LOG_WARNING,
			"worker: opening its read connection: %s (retried at "
			"its first read)",
			strerror(-rc));
	if (pool.poll_ns) {
		polled_main(w);
		sem_post(&pool.finish);
		return NULL;
	}
	while (!fuse_session_exited(pool.se)) {
		rc = receive(w);
		if (rc == -EINTR)
			continue;
		if (rc <= 0) {
			receive_ended(rc);
			break;
		}
		fuse_session_process_buf(pool.se, &w->buf);
	}
	sem_post(&pool.finish);
	return NULL;
}

/* Starts up to n workers; returns how many started (*err: the failure). */
static unsigned start_workers(struct worker *w, unsigned n, int *err)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		*err = rfs_thread_spawn(&w[i].thread, worker_main, &w[i],
					"regionfs-fuse");
		if (*err)
			break;
	}
	return i;
}

/* The fixed pool: 0, or -errno (no worker could start, or a receive). */
static int run_pool(struct fuse_session *se, unsigned n)
{
	struct worker *w = calloc(n, sizeof(*w));
	unsigned started, i;
	int err = 0;

	if (!w)
		return -ENOMEM;
	pool.se = se;
	atomic_store(&pool.error, 0);
	pool.fd = fuse_session_fd(se);
	pool.poll_ns = (uint64_t)rfs.poll_us * 1000;
	atomic_store(&pool.led, false);
	atomic_store(&pool.idle, 0);
	atomic_store(&pool.busy, 0);
	pool.stop_fd = -1;
	if (pool.poll_ns) {
		int fl = fcntl(pool.fd, F_GETFL);

		pool.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (pool.stop_fd < 0 || fl < 0 ||
		    fcntl(pool.fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			rfs_log(RFS_LOG_WARNING,
				"poll_us: cannot make the device non-blocking "
				"(%s); workers block in read()",
				strerror(errno));
			if (pool.stop_fd >= 0)
				close(pool.stop_fd);
			pool.stop_fd = -1;
			pool.poll_ns = 0;
		}
	}
	if (sem_init(&pool.finish, 0, 0)) {
		free(w);
		return -errno;
	}
	if (sem_init(&pool.lead, 0, 0)) {
		sem_destroy(&pool.finish);
		free(w);
		return -errno;
	}
	started = start_workers(w, n, &err);
	if (started < n)
		rfs_log(started ? RFS_LOG_WARNING : RFS_LOG_ERR,
			"starting worker threads: %s (%u of %u started)",
			strerror(-err), started, n);
	if (started) {
		err = 0;
		/* sem_wait() returns early on a signal: look again */
		while (!fuse_session_exited(se))
			sem_wait(&pool.finish);
		if (pool.poll_ns) { /* polled: every worker leaves by itself */
			uint64_t one = 1;

			if (write(pool.stop_fd, &one, sizeof(one)) < 0)
				rfs_log(RFS_LOG_WARNING, "poll_us: stop: %s",
					strerror(errno));
			for (i = 0; i < started; i++)
				sem_post(&pool.lead);
		} else {
			for (i = 0; i < started; i++)
				pthread_cancel(w[i].thread);
		}
		for (i = 0; i < started; i++)
			pthread_join(w[i].thread, NULL);
		err = atomic_load(&pool.error);
	}
	for (i = 0; i < n; i++)
		free(w[i].buf.mem);
	free(w);
	sem_destroy(&pool.finish);
	sem_destroy(&pool.lead);
	if (pool.stop_fd >= 0)
		close(pool.stop_fd);
	fuse_session_reset(se);
	return err;
}

/* libfuse's own loop, for -o clone_fd (see the note at the top). */
static int run_libfuse(struct fuse_session *se,
		       const struct fuse_cmdline_opts *cmd)
{
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	int rc;

	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, cmd->clone_fd);
	if (cmd->max_idle_threads != UINT_MAX) /* UINT_MAX: the default */
		fuse_loop_cfg_set_idle_threads(lc, cmd->max_idle_threads);
	fuse_loop_cfg_set_max_threads(lc, cmd->max_threads);
	rc = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return rc;
}

int rfs_loop_run(struct fuse_session *se, const struct fuse_cmdline_opts *cmd)
{
	if (cmd->singlethread)
		return fuse_session_loop(se);
	if (cmd->clone_fd)
		return run_libfuse(se, cmd);
	return run_pool(se, cmd->max_threads ? cmd->max_threads : 1);
}
