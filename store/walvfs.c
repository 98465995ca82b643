/*
 * walvfs.c - the write connection's VFS: SQLite's default VFS, except
 * that the WAL's writes of one commit reach the file in one pwrite().
 *
 * Why. SQLite writes each WAL frame with two write calls (its 24-byte
 * header, then the page), so a create of a 1 KiB value (about 5 frames)
 * cost 10 pwrite()s, a 64 KiB one 43: the largest part of the writer's
 * time in a create-heavy profile (perf, 2-vCPU VM: pwrite 35%, where the
 * syscall entry itself costs several microseconds). The frames of one
 * commit are contiguous in the file, so they can go out as one write.
 *
 * How. Writes to the WAL file are appended to a buffer while each starts
 * where the last ended; anything else first writes the buffer out
 * (flush): a write elsewhere, a read, a sync, a truncate, asking the
 * size, closing, or the buffer about to pass WALVFS_MAX bytes. A commit ends
 * with its commit frame, the only frame whose header (24 bytes, written
 * on its own) has a nonzero "database size after commit" field (bytes 4-7,
 * big-endian, of the WAL file format: sqlite.org/fileformat.html#walformat);
 * the write that follows it, the frame's page, is flushed before xWrite
 * returns, and its result is that write's result. So a commit is in the
 * file (through write(), as before) before SQLite publishes it in the
 * wal-index and before COMMIT returns, and a failing write (ENOSPC) fails
 * the COMMIT, which SQLite rolls back as before: frames after the last
 * published one are never read. Frames of a commit that is not done yet
 * (a cache spill mid-transaction) may wait in the buffer; nobody reads
 * them but this connection, whose reads flush first. A killed process
 * loses only such uncommitted frames. Syncs (synchronous=FULL, the
 * store's wal_sync(), checkpoints) flush before they sync. One more write
 * may follow a commit frame inside COMMIT: when a transaction that
 * spilled pages to the WAL early commits, SQLite rewrites the checksums
 * in the headers of its frames after writing them, and those header-only
 * writes (no reader needs them; crash recovery does) wait in the buffer;
 * the store flushes after every COMMIT (store__walvfs_flush()), so they
 * too are in the file when the change call returns.
 *
 * Growing the file in steps. A commit that extends the WAL changes the
 * file's size, so its fsync (synchronous=FULL, a durable region) also
 * writes the inode, a second synchronous write after the data's (ext4
 * without a journal: __sync_dirty_buffer(); with one, a journal commit);
 * an overwrite of blocks that are there already writes only the data.
 * fdatasync() of 8 KiB at the end of a file on the 2-vCPU VM of issue 9:
 * 150-200 us appended, 85-100 us over blocks written before. So a write
 * that passes the end of what the file holds first grows it to the next
 * multiple of STORE_WAL_GROW with zeros (real zeros: a fallocate()d
 * extent is unwritten, and its first write costs the same metadata
 * write, worse: 1.4 ms per fdatasync measured); the next fsync writes
 * the inode once, and the commits of the following STORE_WAL_GROW bytes
 * overwrite in place (measured the same way: 98-103 us). Only a WAL that
 * is fsynced gains from it: the store turns it on with its first durable
 * commit (store__walvfs_grow()); without one the WAL grows as SQLite
 * writes it, as before (no zeros to write for a store whose commits
 * never wait for the disk). Zeros past the
 * last commit are no frames for SQLite: a frame is valid only with the
 * header's salts and a running checksum, and recovery stops at the first
 * invalid one, as it does after a WAL restart over older frames. The
 * WAL grows ahead only while the file system has WAL_GROW_ROOM (64 MiB)
 * free (room_to_grow(): near a full disk, ENOSPC comes where it came
 * before, tests/integration/test_diskfull.sh). A failed growth truncates
 * the zeros again and fails nothing: the write itself went out first;
 * growth is tried again only STORE_WAL_GROW * 16 bytes later, so a full
 * disk costs no write per commit.
 *
 * The buffer is mmap()ed, outside the heap: a 128 KiB malloc() on the
 * heap changed the daemon's heap layout enough to make a failure of
 * tests/fault/test_inject.sh (m=25, stale content after ENOMEM, with
 * MALLOC_PERTURB_) appear in 2 of 16 runs even with the buffer unused.
 *
 * Only the write connection uses this VFS (store__walvfs_name()); the
 * database and -shm files, and every file of the read connections, are
 * the default VFS's own objects, untouched. The unix VFS keeps its lock
 * table per inode for the whole process, whatever VFS object opened a
 * file, so locks between our connections work as before.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>

#include <sqlite3.h>

#include "store_int.h"

#define WALVFS_NAME "regionfs-wal"
/*
 * The buffer is flushed before it would grow past this: the unix VFS
 * writes at most 128 KiB - 1 bytes per call (seekAndWriteFd() masks the
 * length with 0x1ffff; a longer write fails with SQLITE_FULL). Room for
 * a 64 KiB value's 21 frames in one write.
 */
#define WALVFS_MAX    0x1ffff
#define WAL_FRAME_HDR 24 /* bytes of a WAL frame header */
/* Free bytes the file system needs for the WAL to grow ahead: the note. */
#define WAL_GROW_ROOM ((uint64_t)STORE_WAL_GROW * 64)

/* A WAL file: our methods, then the default VFS's file after it. */
struct walfile {
	sqlite3_file base;
	sqlite3_file *real; /* the default VFS's object, after this struct */
	unsigned char *buf; /* WALVFS_MAX bytes, or NULL: no buffering */
	size_t len;	    /* bytes in buf waiting to be written at off */
	sqlite3_int64 off;
	sqlite3_int64 commit_page; /* where a commit frame's page goes; 0 */
	const char *path;    /* SQLite's name of the file, valid until close */
	bool grow;	     /* grow ahead (store__walvfs_grow()) */
	sqlite3_int64 grown; /* the file holds written blocks up to here */
	sqlite3_int64 grow_after; /* a growth failed: not before this offset */
};

/* What a growth writes per call (the unix VFS takes < 128 KiB a call). */
static const unsigned char zeros[65536];

static sqlite3_vfs *parent;
static sqlite3_vfs walvfs;
static pthread_once_t walvfs_once = PTHREAD_ONCE_INIT;
static int walvfs_rc = SQLITE_ERROR;

/*
 * Is there room on the file system to grow the WAL ahead of its commits?
 * Not with less than WAL_GROW_ROOM free: near a full disk the zeros
 * would take the last room (a commit that SQLite would have refused with
 * ENOSPC would succeed in it, and a checkpoint, which needs room in the
 * database file, would fail); there the WAL grows with its commits, as
 * SQLite grows it.
 */
static bool room_to_grow(const struct walfile *w)
{
	struct statvfs sv;

	return w->path && statvfs(w->path, &sv) == 0 &&
	       (uint64_t)sv.f_bavail * sv.f_frsize >= WAL_GROW_ROOM;
}

/*
 * After a write that ended at end: if the file holds no written blocks
 * there yet, grows it with zeros to the next multiple of STORE_WAL_GROW
 * (see the note). Never fails: a failed growth is undone.
 */
static void wal_grow(struct walfile *w, sqlite3_int64 end)
{
	const sqlite3_io_methods *m = w->real->pMethods;
	sqlite3_int64 to, off, size;
	int n, rc = SQLITE_OK;

	if (end <= w->grown || end < w->grow_after)
		return;
	if (m->xFileSize(w->real, &size) != SQLITE_OK)
		return;
	to = (end + STORE_WAL_GROW - 1) / STORE_WAL_GROW * STORE_WAL_GROW;
	if (to > size && !room_to_grow(w)) {
		w->grow_after = end + STORE_WAL_GROW;
		return;
	}
	for (off = size; off < to && rc == SQLITE_OK; off += n) {
		n = to - off < (sqlite3_int64)sizeof(zeros)
			    ? (int)(to - off)
			    : (int)sizeof(zeros);
		rc = m->xWrite(w->real, zeros, n, off);
	}
	if (rc == SQLITE_OK) {
		w->grown = to > size ? to : size;
		return;
	}
	m->xTruncate(w->real, size > end ? size : end);
	w->grown = 0;
	w->grow_after = end + (sqlite3_int64)STORE_WAL_GROW * 16;
}

/*
 * Writes through to the file, growing it (wal_grow()) after success. A
 * write at offset 0 (the header of a WAL that starts again) asks the
 * file's size again: someone else may have truncated it meanwhile
 * (another process's wal_checkpoint(TRUNCATE)).
 */
static int wal_put(struct walfile *w, const void *p, int amt, sqlite3_int64 off)
{
	int rc = w->real->pMethods->xWrite(w->real, p, amt, off);

	if (off == 0)
		w->grown = 0;
	if (rc == SQLITE_OK && w->grow)
		wal_grow(w, off + amt);
	return rc;
}

/* The buffer written out at once; SQLite's own write gives the result. */
static int wal_flush(struct walfile *w)
{
	int rc;

	if (w->len == 0)
		return SQLITE_OK;
	rc = wal_put(w, w->buf, (int)w->len, w->off);
	w->len = 0;
	return rc;
}

static int wal_close(sqlite3_file *f)
{
	struct walfile *w = (struct walfile *)f;
	int rc = wal_flush(w), rc2;

	if (w->buf)
		munmap(w->buf, WALVFS_MAX);
	w->buf = NULL;
	rc2 = w->real->pMethods->xClose(w->real);
	return rc != SQLITE_OK ? rc : rc2;
}

static int wal_read(sqlite3_file *f, void *p, int amt, sqlite3_int64 off)
{
	struct walfile *w = (struct walfile *)f;
	int rc = wal_flush(w);

	return rc != SQLITE_OK ? rc
			       : w->real->pMethods->xRead(w->real, p, amt, off);
}

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int wal_write(sqlite3_file *f, const void *p, int amt, sqlite3_int64 off)
{
	struct walfile *w = (struct walfile *)f;
	int rc;

	if (!w->buf) /* no buffer: every write goes straight through */
		return wal_put(w, p, amt, off);
	if (w->len && (off != w->off + (sqlite3_int64)w->len ||
		       w->len + (size_t)amt > WALVFS_MAX)) {
		rc = wal_flush(w);
		if (rc != SQLITE_OK)
			return rc;
	}
	if ((size_t)amt > WALVFS_MAX) /* never, with pages of 64 KiB */
		return wal_put(w, p, amt, off);
	if (w->len == 0)
		w->off = off;
	memcpy(w->buf + w->len, p, amt);
	w->len += amt;
	if (amt == WAL_FRAME_HDR && get_be32((const unsigned char *)p + 4)) {
		w->commit_page = off + WAL_FRAME_HDR; /* a commit frame */
		return SQLITE_OK;
	}
	if (w->commit_page && off == w->commit_page) {
		w->commit_page = 0;
		return wal_flush(w); /* the commit is complete */
	}
	return SQLITE_OK;
}

static int wal_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	struct walfile *w = (struct walfile *)f;
	int rc = wal_flush(w);

	if (rc != SQLITE_OK)
		return rc;
	if (size < w->grown)
		w->grown = size;
	return w->real->pMethods->xTruncate(w->real, size);
}

static int wal_sync(sqlite3_file *f, int flags)
{
	struct walfile *w = (struct walfile *)f;
	int rc = wal_flush(w);

	return rc != SQLITE_OK ? rc : w->real->pMethods->xSync(w->real, flags);
}

static int wal_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	struct walfile *w = (struct walfile *)f;
	int rc = wal_flush(w);

	return rc != SQLITE_OK ? rc
			       : w->real->pMethods->xFileSize(w->real, size);
}

/* ---- the rest passes through ------------------------------------------- */

#define REAL(f) (((struct walfile *)(f))->real)

static int wal_lock(sqlite3_file *f, int lock)
{
	return REAL(f)->pMethods->xLock(REAL(f), lock);
}

static int wal_unlock(sqlite3_file *f, int lock)
{
	return REAL(f)->pMethods->xUnlock(REAL(f), lock);
}

static int wal_check_reserved(sqlite3_file *f, int *out)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int wal_file_control(sqlite3_file *f, int op, void *arg)
{
	return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int wal_sector_size(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int wal_device_chars(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

/* A WAL file has no -shm and is not mapped: SQLite never asks. */
static const sqlite3_io_methods wal_methods = {
	.iVersion = 1,
	.xClose = wal_close,
	.xRead = wal_read,
	.xWrite = wal_write,
	.xTruncate = wal_truncate,
	.xSync = wal_sync,
	.xFileSize = wal_file_size,
	.xLock = wal_lock,
	.xUnlock = wal_unlock,
	.xCheckReservedLock = wal_check_reserved,
	.xFileControl = wal_file_control,
	.xSectorSize = wal_sector_size,
	.xDeviceCharacteristics = wal_device_chars,
};

/* Opens a WAL through the wrapper, every other file as the default VFS. */
static int walvfs_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f,
		       int flags, int *out_flags)
{
	struct walfile *w = (struct walfile *)f;
	int rc;

	(void)vfs;
	if (!(flags & SQLITE_OPEN_WAL))
		return parent->xOpen(parent, name, f, flags, out_flags);
	memset(w, 0, sizeof(*w));
	w->real = (sqlite3_file *)(w + 1);
	w->path = name;
	rc = parent->xOpen(parent, name, w->real, flags, out_flags);
	w->base.pMethods = w->real->pMethods ? &wal_methods : NULL;
	if (rc == SQLITE_OK) { /* here: a write never allocates */
		w->buf = mmap(NULL, WALVFS_MAX, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (w->buf == MAP_FAILED)
			w->buf = NULL;
	}
	return rc;
}

static void walvfs_init(void)
{
	parent = sqlite3_vfs_find(NULL);
	if (!parent)
		return;
	walvfs = *parent;
	walvfs.zName = WALVFS_NAME;
	walvfs.pNext = NULL;
	walvfs.szOsFile = (int)sizeof(struct walfile) + parent->szOsFile;
	walvfs.xOpen = walvfs_open;
	walvfs_rc = sqlite3_vfs_register(&walvfs, 0);
}

/* db's WAL file if it is ours (open, through this VFS), else NULL. */
static struct walfile *wal_of(sqlite3 *db)
{
	sqlite3_file *f = NULL;

	if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER,
				 &f) != SQLITE_OK ||
	    !f || f->pMethods != &wal_methods)
		return NULL;
	return (struct walfile *)f;
}

int store__walvfs_flush(sqlite3 *db)
{
	struct walfile *w = wal_of(db);

	return w ? wal_flush(w) : SQLITE_OK;
}

void store__walvfs_grow(sqlite3 *db)
{
	struct walfile *w = wal_of(db);

	if (w)
		w->grow = true;
}

const char *store__walvfs_name(void)
{
	pthread_once(&walvfs_once, walvfs_init);
	return walvfs_rc == SQLITE_OK ? WALVFS_NAME : NULL;
}
