/*
 * testlib.h - helpers shared by the test and benchmark programs
 * (tests/integration, tests/consistency, tests/stress, tests/bench).
 *
 * Messages that name the program, clocks, key paths, reading and writing a
 * key through a mount with the system calls an application uses, a fast
 * random generator, latency histograms and a checksum. Functions returning
 * int return 0 or a negative errno. Everything is thread-safe unless
 * noted.
 */
#ifndef RFS_TESTLIB_H
#define RFS_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

#define TL_PATH_MAX   4096 /* room for any path the tests build */
#define TL_REPORT_MAX 12   /* default of tl_report_max() */

/* ---- messages ------------------------------------------------------- */

/* Prints "PROG: message\n" on stderr (PROG: this program's name). */
void tl_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* tl_warn(), then exit(1). */
void tl_die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
/*
 * A finding (a violated guarantee, a failed check): counted, and printed
 * like tl_warn() for the first tl_report_max() (TL_REPORT_MAX unless
 * set), so a broken run shows the first findings, not thousands of lines.
 */
void tl_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sets how many findings tl_report() prints; call before any thread runs. */
void tl_report_max(unsigned max);
/* How many findings tl_report() was given, printed or not. */
unsigned tl_reported(void);

/* ---- clocks --------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t tl_now_ns(void);
/* CLOCK_MONOTONIC in seconds, for rates in benchmarks. */
double tl_now_s(void);
/*
 * This thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID): what a
 * benchmark measures when another tenant's preemption is no cost of ours.
 */
double tl_cpu_s(void);
/* CLOCK_REALTIME in nanoseconds (to compare with bash's EPOCHREALTIME). */
uint64_t tl_wall_ns(void);
/* Sleeps us microseconds (a polling interval, never a race window). */
void tl_sleep_us(unsigned us);

/* ---- keys through a mount ------------------------------------------- */

/*
 * Writes "DIR/PREFIX<k>" into buf (cap bytes), k with at least width
 * digits (zero-padded), and returns buf. Dies if the path does not fit.
 */
char *tl_key_path(char *buf, size_t cap, const char *dir, const char *prefix,
		  int width, unsigned k);
/*
 * Reads the whole file at path into buf (open, read until EOF, close).
 * *len gets the byte count. -EFBIG if the file holds more than cap bytes;
 * the errno of open/read/close otherwise.
 */
int tl_read_file(const char *path, char *buf, size_t cap, size_t *len);
/*
 * Writes len bytes to path with open(O_WRONLY|O_CREAT|O_TRUNC, 0644),
 * write() until done and close(); 0 only if close() returned 0 (on
 * regionfs: the value is committed).
 */
int tl_write_file(const char *path, const void *data, size_t len);
/* The same in nparts write() calls of about equal size (nparts >= 1). */
int tl_write_file_parts(const char *path, const void *data, size_t len,
			unsigned nparts);
/*
 * The system call that made this thread's last tl_read_file() or
 * tl_write_file*() fail: "open", "read", "write" or "close".
 */
const char *tl_failed_call(void);

/* ---- numbers -------------------------------------------------------- */

/* xorshift64*: a fast per-thread generator; never seed with 0. */
uint64_t tl_rand(uint64_t *state);
/* A value in [0, n). n > 0. */
uint64_t tl_rand_below(uint64_t *state, uint64_t n);
/* Bit mixers (murmur3's and splitmix64's finalizers): hash to pattern. */
uint32_t tl_mix32(uint32_t x);
uint64_t tl_mix64(uint64_t x);

/*
 * CRC-32 (IEEE 802.3, the zlib one) of len bytes. The table is built on
 * first use (pthread_once).
 */
uint32_t tl_crc32(const void *data, size_t len);

/* ---- latency histograms (not thread-safe: one per thread, merged) ---- */

/* Power-of-two microsecond buckets (bucket i: < 2^i us). */
#define TL_HIST_BUCKETS 32
struct tl_hist {
	uint64_t n;			  /* samples */
	uint64_t max_ns;		  /* largest sample */
	uint64_t sum_ns;		  /* for the mean */
	uint64_t bucket[TL_HIST_BUCKETS]; /* counts */
};

void tl_hist_add(struct tl_hist *h, uint64_t ns);
/* Adds src into dst. */
void tl_hist_merge(struct tl_hist *dst, const struct tl_hist *src);
/* Upper bound (us) of the bucket holding the q-quantile, 0 < q <= 1. */
uint64_t tl_hist_quantile_us(const struct tl_hist *h, double q);

#endif /* RFS_TESTLIB_H */
