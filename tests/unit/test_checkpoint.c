/*
 * test_checkpoint.c - unit tests of the store's WAL checkpoints
 * (store/checkpoint.c): they run off the writing thread, the WAL stays
 * bounded under continuous writes, a failing checkpoint (full disk) loses
 * nothing and blocks no write, and the data is intact after a reopen.
 *
 * In WAL mode SQLite writes the database file itself only when it
 * checkpoints (and once at creation, to switch to WAL). So main() puts a
 * thin default VFS in front of SQLite's own, before any store opens, whose
 * xWrite of a main database file records the calling thread's name and
 * can fail with SQLITE_FULL on demand: the checkpoints' thread, and a full
 * disk that only checkpoints meet. Nothing sleeps to make a race happen;
 * waits for the background checkpointer poll the store's stats with a
 * generous bound, and no assertion depends on how long anything took.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"
#include "store_int.h"

#define VALUE_SIZE 65536 /* about 17 WAL frames per put */
#define NKEYS	   64
#define FRAME	   (4096 + 24)
#define WAIT_NS	   ((int64_t)60 * 1000000000) /* bound on a wait, never hit */

/* ---- the recording VFS ---------------------------------------------------- */

static sqlite3_vfs *real_vfs;
static sqlite3_vfs test_vfs;
static sqlite3_io_methods db_methods; /* the real ones, but xWrite */
static const sqlite3_io_methods *real_db_methods;
static atomic_int writes_ckpt_thread;	/* by the thread "regionfs-ckpt" */
static atomic_int writes_other_threads; /* by any other thread */
static atomic_bool fail_db_writes;	/* the disk is full for the db */

static int db_write(sqlite3_file *f, const void *p, int amt, sqlite3_int64 off)
{
	char name[16] = "";

	pthread_getname_np(pthread_self(), name, sizeof(name));
	if (!strcmp(name, "regionfs-ckpt"))
		atomic_fetch_add(&writes_ckpt_thread, 1);
	else
		atomic_fetch_add(&writes_other_threads, 1);
	if (atomic_load(&fail_db_writes))
		return SQLITE_FULL;
	return real_db_methods->xWrite(f, p, amt, off);
}

/* Opens as SQLite's own VFS; a main database gets db_methods. */
static int test_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f,
		     int flags, int *out_flags)
{
	int rc = real_vfs->xOpen(real_vfs, name, f, flags, out_flags);

	(void)vfs;
	if (rc != SQLITE_OK || !f->pMethods || !(flags & SQLITE_OPEN_MAIN_DB))
		return rc;
	if (!real_db_methods) {
		real_db_methods = f->pMethods;
		db_methods = *f->pMethods;
		db_methods.xWrite = db_write;
	}
	assert_ptr_equal(f->pMethods, real_db_methods);
	f->pMethods = &db_methods;
	return rc;
}

static void test_vfs_install(void)
{
	real_vfs = sqlite3_vfs_find(NULL);
	assert_non_null(real_vfs);
	test_vfs = *real_vfs;
	test_vfs.zName = "test-record";
	test_vfs.pNext = NULL;
	test_vfs.xOpen = test_open;
	assert_int_equal(sqlite3_vfs_register(&test_vfs, 1), SQLITE_OK);
}

static void counts_reset(void)
{
	atomic_store(&writes_ckpt_thread, 0);
	atomic_store(&writes_other_threads, 0);
}

/* ---- fixture and helpers ---------------------------------------------- */

struct fixture {
	char dir[64];
	char path[128];
	char wal[136];
	struct store *st;
	unsigned char *val;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/test_ckpt.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/store.db", f->dir);
	snprintf(f->wal, sizeof(f->wal), "%s-wal", f->path);
	f->val = malloc(VALUE_SIZE);
	if (!f->val || store_open(f->path, NULL, &f->st))
		return -1;
	atomic_store(&fail_db_writes, false);
	counts_reset(); /* switching the new file to WAL wrote it */
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	static const char *const names[] = {"store.db", "store.db-wal",
					    "store.db-shm", "store.db-reserve"};
	struct fixture *f = *state;
	char p[256];
	size_t i;

	atomic_store(&fail_db_writes, false);
	store_close(f->st);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", f->dir, names[i]);
		unlink(p);
	}
	rmdir(f->dir);
	free(f->val);
	free(f);
	return 0;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void nap(void)
{
	struct timespec ts = {0, 5000000};

	nanosleep(&ts, NULL);
}

/* Value of key i in round r: every byte depends on both. */
static void fill(unsigned char *v, unsigned i, unsigned r)
{
	size_t j;

	for (j = 0; j < VALUE_SIZE; j++)
		v[j] = (unsigned char)(i * 31 + r * 7 + j * 13 + (j >> 8));
}

static void put_round(struct fixture *f, unsigned i, unsigned r)
{
	char key[32];

	snprintf(key, sizeof(key), "k%u", i);
	fill(f->val, i, r);
	assert_int_equal(store_put(f->st, "r", key, strlen(key), f->val,
				   VALUE_SIZE, 0, NULL),
			 0);
}

static off_t wal_size(const struct fixture *f)
{
	struct stat sb;

	return stat(f->wal, &sb) == 0 ? sb.st_size : 0;
}

static void stats(struct fixture *f, struct store_stats *s)
{
	store_stats(f->st, s);
}

/* Every key holds its value of round last[i] (after a reopen too). */
static void check_all(struct fixture *f, const unsigned *last)
{
	unsigned i;
	char key[32];
	void *data;
	struct store_meta meta;

	for (i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "k%u", i);
		assert_int_equal(
			store_load(f->st, "r", key, strlen(key), &data, &meta),
			0);
		assert_int_equal(meta.size, VALUE_SIZE);
		fill(f->val, i, last[i]);
		assert_memory_equal(data, f->val, VALUE_SIZE);
		free(data);
	}
}

static void reopen(struct fixture *f)
{
	store_close(f->st);
	f->st = NULL;
	assert_int_equal(store_open(f->path, NULL, &f->st), 0);
}

/* ---- tests ---------------------------------------------------------------- */

/*
 * Puts enough to pass the soft threshold (and far from the hard one):
 * the database file is written only by the checkpointer's thread, never
 * by the thread that commits (SQLite's autocheckpoint wrote it there).
 */
static void test_checkpoints_run_off_the_writing_thread(void **state)
{
	struct fixture *f = *state;
	int64_t deadline;
	unsigned i, n;

	n = 2 * STORE_CKPT_SOFT_FRAMES / (VALUE_SIZE / 4096);
	assert_true(n * (VALUE_SIZE / 4096 + 2) < STORE_CKPT_HARD_FRAMES / 2);
	for (i = 0; i < n; i++)
		put_round(f, i % NKEYS, i / NKEYS);
	deadline = mono_ns() + WAIT_NS;
	while (atomic_load(&writes_ckpt_thread) +
			       atomic_load(&writes_other_threads) ==
		       0 &&
	       mono_ns() < deadline)
		nap();
	assert_int_equal(atomic_load(&writes_other_threads), 0);
	assert_true(atomic_load(&writes_ckpt_thread) > 0);
}

struct reader_arg {
	struct store *st;
	atomic_bool stop;
	unsigned loads;
};

/* Reads keys in a loop: short read transactions beside the writes. */
static void *reader_main(void *arg)
{
	struct reader_arg *ra = arg;
	char key[32];
	void *data;
	unsigned i = 0;

	while (!atomic_load(&ra->stop)) {
		snprintf(key, sizeof(key), "k%u", i++ % NKEYS);
		if (store_load(ra->st, "r", key, strlen(key), &data, NULL) == 0)
			free(data);
		ra->loads++;
	}
	return NULL;
}

/*
 * Writes without a pause, with a reader beside them, several times the
 * hard limit: the WAL file never grows far past the hard limit (without
 * the inline fallback: 157 MB; with SQLite's autocheckpoint and this
 * reader, 44 MB), and everything reads back, before and after a reopen.
 */
static void test_wal_stays_bounded_under_continuous_writes(void **state)
{
	struct fixture *f = *state;
	/* an inline checkpoint that found a reader busy tries again after
	 * STORE_CKPT_SOFT_FRAMES (under valgrind: checkpoint.c) */
	off_t bound = (off_t)(STORE_CKPT_HARD_FRAMES +
			      4 * STORE_CKPT_SOFT_FRAMES + 64) *
			      FRAME +
		      32 + STORE_WAL_GROW; /* zeros ahead: walvfs.c */
	struct reader_arg ra = {.st = f->st};
	unsigned i, n, last[NKEYS];
	struct store_stats s;
	pthread_t reader;
	off_t most = 0;

	n = 4 * STORE_CKPT_HARD_FRAMES / (VALUE_SIZE / 4096);
	atomic_init(&ra.stop, false);
	assert_int_equal(pthread_create(&reader, NULL, reader_main, &ra), 0);
	for (i = 0; i < n; i++) {
		put_round(f, i % NKEYS, i / NKEYS);
		last[i % NKEYS] = i / NKEYS;
		if (wal_size(f) > most)
			most = wal_size(f);
	}
	atomic_store(&ra.stop, true);
	pthread_join(reader, NULL);
	stats(f, &s);
	print_message("wal: %lld bytes at most, %llu frames; checkpoints %llu, "
		      "inline %llu; %u loads beside\n",
		      (long long)most, (unsigned long long)s.wal_frames_max,
		      (unsigned long long)s.checkpoints,
		      (unsigned long long)s.checkpoints_inline, ra.loads);
	assert_true(most <= bound);
	assert_true(s.wal_frames_max <=
		    STORE_CKPT_HARD_FRAMES + 4 * STORE_CKPT_SOFT_FRAMES + 64);
	assert_int_equal(s.errors, 0); /* a busy checkpoint is no error */
	check_all(f, last);
	reopen(f);
	check_all(f, last);
}

/*
 * The disk is full for the database file: every checkpoint fails, while
 * every put still succeeds (the WAL holds them) and no put fails after a
 * failed checkpoint. Once there is room again, the WAL is checkpointed and
 * starts again from its beginning; nothing was lost.
 */
static void
test_failing_checkpoints_lose_nothing_and_block_no_write(void **state)
{
	struct fixture *f = *state;
	unsigned i, n, r = 0, last[NKEYS];
	struct store_stats s;

	atomic_store(&fail_db_writes, true);
	n = 3 * STORE_CKPT_HARD_FRAMES / (VALUE_SIZE / 4096) / 2;
	for (i = 0; i < n; i++, r++) {
		put_round(f, r % NKEYS, r / NKEYS);
		last[r % NKEYS] = r / NKEYS;
	}
	stats(f, &s);
	assert_true(s.checkpoint_failures >= 1);
	assert_true(s.checkpoints_inline >= 1); /* at the hard limit */
	assert_true(s.errs[STORE_ERR_FULL] >= 1);
	assert_true(s.wal_frames > STORE_CKPT_HARD_FRAMES); /* kept it all */
	assert_int_equal(s.errors, 0);
	check_all(f, last);

	atomic_store(&fail_db_writes, false);
	for (i = 0; i < 4 * n; i++, r++) {
		put_round(f, r % NKEYS, r / NKEYS);
		last[r % NKEYS] = r / NKEYS;
		stats(f, &s);
		if (s.wal_frames < STORE_CKPT_SOFT_FRAMES)
			break; /* the WAL started again */
	}
	assert_true(s.wal_frames < STORE_CKPT_SOFT_FRAMES);
	check_all(f, last);
	reopen(f);
	check_all(f, last);
}

/*
 * Durable commits (each fsyncs the WAL) keep the WAL at the lower limit,
 * where it is overwritten in place rather than grown.
 */
static void test_durable_commits_keep_the_wal_small(void **state)
{
	struct fixture *f = *state;
	struct store_options o = {.durable = true};
	unsigned i, n, last[NKEYS];
	struct store_stats s;

	store_close(f->st);
	assert_int_equal(store_open(f->path, &o, &f->st), 0);
	n = 2 * STORE_CKPT_HARD_DURABLE / (VALUE_SIZE / 4096);
	for (i = 0; i < n; i++) {
		put_round(f, i % NKEYS, i / NKEYS);
		last[i % NKEYS] = i / NKEYS;
	}
	stats(f, &s);
	assert_true(s.checkpoints_inline >= 1);
	assert_true(s.wal_frames_max <=
		    STORE_CKPT_HARD_DURABLE + 4 * STORE_CKPT_SOFT_FRAMES + 64);
	check_all(f, last);
}

/* Closing while the checkpointer may be running: nothing is lost. */
static void test_close_stops_the_checkpointer_and_keeps_data(void **state)
{
	struct fixture *f = *state;
	unsigned i, n, last[NKEYS];
	struct stat sb;

	n = STORE_CKPT_SOFT_FRAMES / (VALUE_SIZE / 4096) + NKEYS;
	for (i = 0; i < n; i++) {
		put_round(f, i % NKEYS, i / NKEYS);
		last[i % NKEYS] = i / NKEYS;
	}
	store_close(f->st);
	f->st = NULL;
	/* the last connection's close checkpointed and removed the WAL */
	assert_int_equal(stat(f->wal, &sb), -1);
	assert_int_equal(store_open(f->path, NULL, &f->st), 0);
	check_all(f, last);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_checkpoints_run_off_the_writing_thread),
		T(test_wal_stays_bounded_under_continuous_writes),
		T(test_failing_checkpoints_lose_nothing_and_block_no_write),
		T(test_durable_commits_keep_the_wal_small),
		T(test_close_stops_the_checkpointer_and_keeps_data),
#undef T
	};

	test_vfs_install();
	return cmocka_run_group_tests_name("checkpoint", tests, NULL, NULL);
}
