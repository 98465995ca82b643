/*
 * testlib.c - helpers shared by the test and benchmark programs.
 *
 * Keys are read and written through the ordinary system calls a user's
 * program makes on a mount (open, read, write, close), so that the tests
 * see exactly what an application sees: the value a read returns is the
 * bytes read() gave until EOF, and a write counts as done when close()
 * returned 0. Nothing here sleeps to let a race happen; tl_sleep_us() is
 * only the interval of polling loops that have their own deadlines.
 *
 * Messages start with the program's name (glibc's
 * program_invocation_short_name), so a helper needs no set-up call and
 * its lines stay recognisable in a test's mixed output.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

static atomic_uint nreports;
static unsigned report_max = TL_REPORT_MAX;
static _Thread_local const char *failed_call = "";
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* ---- messages ------------------------------------------------------- */

static void vwarn(const char *fmt, va_list ap)
{
	char line[2048];

	/* one write, so lines of several threads do not interleave */
	vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(stderr, "%s: %s\n", program_invocation_short_name, line);
}

void tl_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
}

void tl_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
	exit(1);
}

void tl_report(const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&nreports, 1) >= report_max)
		return;
	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
}

void tl_report_max(unsigned max)
{
	report_max = max;
}

unsigned tl_reported(void)
{
	return atomic_load(&nreports);
}

/* ---- clocks --------------------------------------------------------- */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tl_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

double tl_now_s(void)
{
	return (double)tl_now_ns() / 1e9;
}

double tl_cpu_s(void)
{
	return (double)clock_ns(CLOCK_THREAD_CPUTIME_ID) / 1e9;
}

uint64_t tl_wall_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

void tl_sleep_us(unsigned us)
{
	struct timespec ts = {
		.tv_sec = us / 1000000u,
		.tv_nsec = (long)(us % 1000000u) * 1000,
	};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- keys through a mount ------------------------------------------- */

char *tl_key_path(char *buf, size_t cap, const char *dir, const char *prefix,
		  int width, unsigned k)
{
	int n = snprintf(buf, cap, "%s/%s%0*u", dir, prefix, width, k);

	if (n < 0 || (size_t)n >= cap)
		tl_die("path too long: %s/%s%0*u", dir, prefix, width, k);
	return buf;
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

int tl_read_file(const char *path, char *buf, size_t cap, size_t *len)
{
	int fd, rc;

	*len = 0;
	failed_call = "open";
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	failed_call = "read";
	rc = read_all(fd, buf, cap, len);
	if (close(fd) != 0 && rc == 0) {
		failed_call = "close";
		rc = -errno;
	}
	return rc;
}

/* Writes data[0..len) to fd, EINTR and short writes retried. */
static int write_all(int fd, const char *data, size_t len)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = write(fd, data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

int tl_write_file_parts(const char *path, const void *data, size_t len,
			unsigned nparts)
{
	const char *p = data;
	size_t off = 0, end;
	unsigned i;
	int fd, rc = 0;

	failed_call = "open";
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	failed_call = "write";
	for (i = 1; i <= nparts && rc == 0; i++) {
		end = i == nparts ? len : len / nparts * i;
		rc = write_all(fd, p + off, end - off);
		off = end;
	}
	if (close(fd) != 0 && rc == 0) {
		failed_call = "close";
		rc = -errno;
	}
	return rc;
}

int tl_write_file(const char *path, const void *data, size_t len)
{
	return tl_write_file_parts(path, data, len, 1);
}

const char *tl_failed_call(void)
{
	return failed_call;
}

/* ---- numbers -------------------------------------------------------- */

uint64_t tl_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

uint64_t tl_rand_below(uint64_t *state, uint64_t n)
{
	return (tl_rand(state) >> 11) % n;
}

uint32_t tl_mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

uint64_t tl_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void crc_init(void)
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

uint32_t tl_crc32(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint32_t c = 0xFFFFFFFFu;

	pthread_once(&crc_once, crc_init);
	while (len--)
		c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
	return c ^ 0xFFFFFFFFu;
}

/* ---- latency histograms --------------------------------------------- */

void tl_hist_add(struct tl_hist *h, uint64_t ns)
{
	uint64_t us = ns / 1000u;
	unsigned b = 0;

	while (b < TL_HIST_BUCKETS - 1 && us >= (1ULL << b))
		b++;
	h->bucket[b]++;
	h->n++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

void tl_hist_merge(struct tl_hist *dst, const struct tl_hist *src)
{
	unsigned i;

	for (i = 0; i < TL_HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->n += src->n;
	dst->sum_ns += src->sum_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
}

uint64_t tl_hist_quantile_us(const struct tl_hist *h, double q)
{
	uint64_t want, seen = 0;
	unsigned i;

	if (h->n == 0)
		return 0;
	want = (uint64_t)(q * (double)h->n);
	if (want == 0)
		want = 1;
	for (i = 0; i < TL_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= want)
			return 1ULL << i;
	}
	return 1ULL << (TL_HIST_BUCKETS - 1);
}
