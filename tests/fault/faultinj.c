/*
 * faultinj.c - a fault injector for the daemon, loaded with LD_PRELOAD by
 * tests/fault/test_inject.sh (never by anything shipped). It makes calls
 * fail at a rate the test sets while the daemon runs:
 *
 *   m=N  malloc/calloc/realloc called from the daemon's own code (fs/,
 *        regions/, store/: the caller's address is in the executable;
 *        libc, libfuse and SQLite's own calls are left alone) return NULL
 *   s=N  SQLite's allocations fail (SQLITE_CONFIG_MALLOC): SQLITE_NOMEM
 *   i=N  SQLite's file reads and writes fail (a VFS over the default
 *        one): SQLITE_IOERR_READ / SQLITE_IOERR_WRITE
 *   f=N  SQLite's file writes fail with SQLITE_FULL (disk full)
 *
 * each about once in N calls (0: never), picked by a hash of a global
 * call counter. The rates are read from the file named by RFS_FAULT_CTL,
 * mapped shared: one line of at most 63 bytes such as "m=40 s=30 i=0 f=0",
 * rewritten in place by the test (printf '%-63s\n' ... 1<>FILE, no
 * truncation) to arm and disarm. Without RFS_FAULT_CTL nothing fails.
 * Counts of failures made are in the same file from byte 64 on, one line
 * "made m=N s=N i=N f=N" (written by the injector).
 *
 * Under ASan or TSan the executable defines malloc itself, so m= does not
 * reach it; faultinj_active in the counts line says whether it does.
 */
#include <fcntl.h>
#include <link.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CTL_SIZE 128

enum { F_MALLOC, F_SQLMEM, F_IO, F_FULL, F_N };
static const char fault_letter[F_N] = {'m', 's', 'i', 'f'};

static volatile char *ctl; /* the mapped control file, or NULL */
static atomic_uint_fast64_t calls;
static atomic_ulong made[F_N];
static uintptr_t exe_lo, exe_hi; /* the executable's mapped range */
static atomic_int malloc_seen;	 /* our malloc was called at all */

void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);

/* The rate of fault f from the control line (0: off). */
static unsigned rate(int f)
{
	unsigned v = 0;
	int i;

	if (!ctl)
		return 0;
	for (i = 0; i < 62; i++) {
		if (ctl[i] == '\n' || ctl[i] == 0)
			return 0;
		if (ctl[i] == fault_letter[f] && ctl[i + 1] == '=' &&
		    (i == 0 || ctl[i - 1] == ' ')) {
			for (i += 2; i < 63 && ctl[i] >= '0' && ctl[i] <= '9';
			     i++)
				v = v * 10 + (unsigned)(ctl[i] - '0');
			return v;
		}
	}
	return 0;
}

static atomic_flag publishing = ATOMIC_FLAG_INIT;

/* Writes the counts line; one thread at a time (a spin: it is short). */
static void publish(void)
{
	char line[CTL_SIZE - 64];
	int n;

	if (!ctl)
		return;
	while (atomic_flag_test_and_set_explicit(&publishing,
						 memory_order_acquire))
		;
	n = snprintf(line, sizeof(line),
		     "made m=%lu s=%lu i=%lu f=%lu active=%d\n",
		     atomic_load(&made[F_MALLOC]), atomic_load(&made[F_SQLMEM]),
		     atomic_load(&made[F_IO]), atomic_load(&made[F_FULL]),
		     atomic_load(&malloc_seen));
	if (n > 0 && (size_t)n < sizeof(line))
		memcpy((char *)ctl + 64, line, (size_t)n + 1);
	atomic_flag_clear_explicit(&publishing, memory_order_release);
}

/* Should this call fail with fault f? */
static int fail(int f)
{
	unsigned n = rate(f);
	uint64_t x;

	if (!n)
		return 0;
	x = atomic_fetch_add(&calls, 1) + 1;
	x ^= x >> 33; /* splitmix64's finalizer */
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	if (x % n)
		return 0;
	atomic_fetch_add(&made[f], 1);
	publish();
	return 1;
}

/* ---- malloc from the daemon's own code ---------------------------------- */

static int from_exe(const void *caller)
{
	uintptr_t a = (uintptr_t)caller;

	return a >= exe_lo && a < exe_hi;
}

/* The first call from the executable: active=1 in the counts line. */
static void seen(void)
{
	if (!atomic_load_explicit(&malloc_seen, memory_order_relaxed) &&
	    !atomic_exchange(&malloc_seen, 1))
		publish();
}

void *malloc(size_t size)
{
	if (exe_hi && from_exe(__builtin_return_address(0))) {
		seen();
		if (fail(F_MALLOC))
			return NULL;
	}
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	if (exe_hi && from_exe(__builtin_return_address(0))) {
		seen();
		if (fail(F_MALLOC))
			return NULL;
	}
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	if (exe_hi && size && from_exe(__builtin_return_address(0))) {
		seen();
		if (fail(F_MALLOC))
			return NULL;
	}
	return __libc_realloc(p, size);
}

/* ---- SQLite's allocator --------------------------------------------------- */

static sqlite3_mem_methods real_mem;

static void *sq_malloc(int n)
{
	return fail(F_SQLMEM) ? NULL : real_mem.xMalloc(n);
}

static void *sq_realloc(void *p, int n)
{
	return fail(F_SQLMEM) ? NULL : real_mem.xRealloc(p, n);
}

/* ---- SQLite's files -------------------------------------------------------- */

struct ffile {
	sqlite3_file base;
	sqlite3_file *real; /* follows this struct */
};

static sqlite3_vfs *real_vfs;
static sqlite3_vfs fault_vfs;
static sqlite3_io_methods fault_io_v1, fault_io_v2, fault_io_v3;

#define REAL(f) (((struct ffile *)(f))->real)

static int f_close(sqlite3_file *f)
{
	int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f))
				   : SQLITE_OK;

	f->pMethods = NULL;
	return rc;
}

static int f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
	if (fail(F_IO))
		return SQLITE_IOERR_READ;
	return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}

static int f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
	if (fail(F_IO))
		return SQLITE_IOERR_WRITE;
	if (fail(F_FULL))
		return SQLITE_FULL;
	return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}

static int f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int f_sync(sqlite3_file *f, int flags)
{
	if (fail(F_IO))
		return SQLITE_IOERR_FSYNC;
	return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int f_size(sqlite3_file *f, sqlite3_int64 *size)
{
	return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int f_lock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xLock(REAL(f), l);
}

static int f_unlock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xUnlock(REAL(f), l);
}

static int f_check(sqlite3_file *f, int *out)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int f_fcntl(sqlite3_file *f, int op, void *arg)
{
	return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int f_sector(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int f_devchar(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int f_shmmap(sqlite3_file *f, int pg, int pgsz, int extend,
		    void volatile **pp)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, pgsz, extend, pp);
}

static int f_shmlock(sqlite3_file *f, int off, int n, int flags)
{
	return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}

static void f_shmbarrier(sqlite3_file *f)
{
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int f_shmunmap(sqlite3_file *f, int del)
{
	return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
	return REAL(f)->pMethods->xFetch(REAL(f), off, n, pp);
}

static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
	return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f,
		  int flags, int *out_flags)
{
	struct ffile *ff = (struct ffile *)f;
	int rc;

	(void)vfs;
	ff->real = (sqlite3_file *)(ff + 1);
	rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out_flags);
	if (!ff->real->pMethods) {
		f->pMethods = NULL;
		return rc;
	}
	switch (ff->real->pMethods->iVersion) {
	case 1:
		f->pMethods = &fault_io_v1;
		break;
	case 2:
		f->pMethods = &fault_io_v2;
		break;
	default:
		f->pMethods = &fault_io_v3;
		break;
	}
	return rc;
}

static void install_vfs(void)
{
	static const sqlite3_io_methods base = {
		.iVersion = 3,
		.xClose = f_close,
		.xRead = f_read,
		.xWrite = f_write,
		.xTruncate = f_truncate,
		.xSync = f_sync,
		.xFileSize = f_size,
		.xLock = f_lock,
		.xUnlock = f_unlock,
		.xCheckReservedLock = f_check,
		.xFileControl = f_fcntl,
		.xSectorSize = f_sector,
		.xDeviceCharacteristics = f_devchar,
		.xShmMap = f_shmmap,
		.xShmLock = f_shmlock,
		.xShmBarrier = f_shmbarrier,
		.xShmUnmap = f_shmunmap,
		.xFetch = f_fetch,
		.xUnfetch = f_unfetch,
	};

	real_vfs = sqlite3_vfs_find(NULL);
	if (!real_vfs)
		return;
	fault_io_v3 = base;
	fault_io_v2 = base;
	fault_io_v2.iVersion = 2;
	fault_io_v1 = base;
	fault_io_v1.iVersion = 1;
	fault_vfs = *real_vfs;
	fault_vfs.zName = "faultinj";
	fault_vfs.szOsFile = (int)sizeof(struct ffile) + real_vfs->szOsFile;
	fault_vfs.xOpen = v_open;
	fault_vfs.pNext = NULL;
	sqlite3_vfs_register(&fault_vfs, 1);
}

/* ---- set-up ---------------------------------------------------------------- */

static int find_exe(struct dl_phdr_info *info, size_t size, void *arg)
{
	int i;

	(void)size;
	(void)arg;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo, hi;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		lo = info->dlpi_addr + ph->p_vaddr;
		hi = lo + ph->p_memsz;
		if (!exe_lo || lo < exe_lo)
			exe_lo = lo;
		if (hi > exe_hi)
			exe_hi = hi;
	}
	return 1; /* the first object is the executable */
}

__attribute__((constructor)) static void faultinj_init(void)
{
	const char *path = getenv("RFS_FAULT_CTL");
	sqlite3_mem_methods m;
	void *p;
	int fd;

	if (!path)
		return;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || ftruncate(fd, CTL_SIZE) < 0) {
		perror(path);
		_exit(99);
	}
	p = mmap(NULL, CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		perror("faultinj: mmap");
		_exit(99);
	}
	/* SQLite first: its configuration is only taken before any use */
	if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real_mem) == SQLITE_OK) {
		m = real_mem;
		m.xMalloc = sq_malloc;
		m.xRealloc = sq_realloc;
		sqlite3_config(SQLITE_CONFIG_MALLOC, &m);
	}
	install_vfs();
	dl_iterate_phdr(find_exe, NULL);
	ctl = p;
	publish();
}
