/*
 * cons_util.c - helpers shared by the consistency test programs.
 *
 * Everything here goes through the ordinary system calls a user's program
 * makes on a mount (open, read, write, close), so that the tests see
 * exactly what an application sees: the value a read returns is the bytes
 * read() gave until EOF, and a write counts as done when close() returned
 * 0. Nothing here sleeps to let a race happen; cons_sleep_us() is only the
 * interval of polling loops that have their own deadlines.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "cons_util.h"

static uint32_t crc_table[256];

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t cons_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t cons_wall_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

void cons_sleep_us(unsigned us)
{
	struct timespec ts = {
		.tv_sec = us / 1000000u,
		.tv_nsec = (long)(us % 1000000u) * 1000,
	};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Reads until EOF or until cap + 1 bytes were seen. */
static int read_all(int fd, char *buf, size_t cap, size_t *len)
{
	char extra;
	ssize_t n;

	*len = 0;
	for (;;) {
		if (*len < cap)
			n = read(fd, buf + *len, cap - *len);
		else
			n = read(fd, &extra, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		if (*len >= cap)
			return -EFBIG;
		*len += (size_t)n;
	}
}

int cons_read_file(const char *path, char *buf, size_t cap, size_t *len)
{
	int fd, rc;

	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = read_all(fd, buf, cap, len);
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

int cons_write_file(const char *path, const void *data, size_t len)
{
	const char *p = data;
	size_t done = 0;
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (done < len) {
		n = write(fd, p + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

uint64_t cons_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

uint64_t cons_rand_below(uint64_t *state, uint64_t n)
{
	return (cons_rand(state) >> 11) % n;
}

void cons_hist_add(struct cons_hist *h, uint64_t ns)
{
	uint64_t us = ns / 1000u;
	unsigned b = 0;

	while (b < CONS_HIST_BUCKETS - 1 && us >= (1ULL << b))
		b++;
	h->bucket[b]++;
	h->n++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

void cons_hist_merge(struct cons_hist *dst, const struct cons_hist *src)
{
	unsigned i;

	for (i = 0; i < CONS_HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->n += src->n;
	dst->sum_ns += src->sum_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
}

uint64_t cons_hist_quantile_us(const struct cons_hist *h, double q)
{
	uint64_t want, seen = 0;
	unsigned i;

	if (h->n == 0)
		return 0;
	want = (uint64_t)(q * (double)h->n);
	if (want == 0)
		want = 1;
	for (i = 0; i < CONS_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= want)
			return 1ULL << i;
	}
	return 1ULL << (CONS_HIST_BUCKETS - 1);
}

void cons_crc32_init(void)
{
	uint32_t c;
	unsigned i, k;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t cons_crc32(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint32_t c = 0xFFFFFFFFu;

	while (len--)
		c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
	return c ^ 0xFFFFFFFFu;
}
