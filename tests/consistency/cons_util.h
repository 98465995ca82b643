/*
 * cons_util.h - small helpers shared by the consistency test programs.
 *
 * Plain POSIX file I/O through a mount, a monotonic and a wall clock, a
 * per-thread random generator and a latency histogram. Functions
 * returning int return 0 or a negative errno.
 */
#ifndef RFS_CONS_UTIL_H
#define RFS_CONS_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t cons_now_ns(void);
/* CLOCK_REALTIME in nanoseconds (to compare with bash's EPOCHREALTIME). */
uint64_t cons_wall_ns(void);
/* Sleeps us microseconds (a polling interval, never a race window). */
void cons_sleep_us(unsigned us);

/*
 * Reads the whole file at path into buf (open, read until EOF, close).
 * *len gets the byte count. -EFBIG if the file holds more than cap bytes;
 * the errno of open/read/close otherwise.
 */
int cons_read_file(const char *path, char *buf, size_t cap, size_t *len);
/*
 * Writes len bytes to path with open(path, O_WRONLY|O_CREAT|O_TRUNC), one
 * write loop and close(); 0 only if close() returned 0 (on regionfs: the
 * value is committed).
 */
int cons_write_file(const char *path, const void *data, size_t len);

/* xorshift64*: a fast per-thread generator; never seed with 0. */
uint64_t cons_rand(uint64_t *state);
/* A value in [0, n). n > 0. */
uint64_t cons_rand_below(uint64_t *state, uint64_t n);

/* Latencies in power-of-two microsecond buckets (bucket i: < 2^i us). */
#define CONS_HIST_BUCKETS 32
struct cons_hist {
	uint64_t n;			    /* samples */
	uint64_t max_ns;		    /* largest sample */
	uint64_t sum_ns;		    /* for the mean */
	uint64_t bucket[CONS_HIST_BUCKETS]; /* counts */
};

void cons_hist_add(struct cons_hist *h, uint64_t ns);
/* Adds src into dst. */
void cons_hist_merge(struct cons_hist *dst, const struct cons_hist *src);
/* Upper bound (us) of the bucket holding the q-quantile, 0 < q <= 1. */
uint64_t cons_hist_quantile_us(const struct cons_hist *h, double q);

/*
 * CRC-32 (IEEE 802.3, the zlib one) of len bytes. Thread-safe: the table
 * is built once by cons_crc32_init(), which main() calls before any
 * thread starts.
 */
void cons_crc32_init(void);
uint32_t cons_crc32(const void *data, size_t len);

#endif /* RFS_CONS_UTIL_H */
