/*
 * bulk.c - a bulk change by an outside writer while readers run through
 * the mount: reads must not stall, and every key must show the new value
 * once the change is committed (plus the stated delay).
 *
 * usage: bulk -d REGION_DIR -N keys [-H hot] [-r readers] [-w warm]
 *             [-a after] [-B bound_ms] [-t deadline_ms] [-L stall_ms]
 *             [-S sample] -- COMMAND [ARGS...]
 *
 * The region holds keys b000000 .. b(N-1), written beforehand (by the
 * caller, through the sqlite3 shell) with the value "gen=1 key=<key>".
 * COMMAND replaces them all in one transaction with
 * "gen=2 key=<key> replaced-in-bulk" (a different length, so a stale size
 * shows).
 *
 * Readers (-r) read keys in a loop: 9 of 10 reads from the first -H keys
 * (so that they are cached and the change must invalidate them), the rest
 * from all keys. Once every reader has made -w reads, the main thread
 * runs COMMAND and waits for it: t_done is when it exited (committed).
 * The readers go on for -a reads each after t_done, then stop. Checked
 * for every read:
 *   - it returns exactly gen=1 or gen=2 of the key read (no torn value, no
 *     stale size, no other key's value, no error);
 *   - a reader never returns gen=1 for a key after it has seen gen=2 for
 *     it (no going back);
 *   - a read that starts later than t_done + bound (-B, the stated delay)
 *     returns gen=2.
 * Then the main thread reads every key any reader touched (the only ones
 * that can be cached) plus every (N/S)-th other key: each must show gen=2
 * by t_done + deadline (-t); it records how long after t_done the last of
 * them showed gen=2 (the full visibility delay).
 * The latency of every read (open to close) goes into histograms, overall
 * and for reads that overlapped the window from the start of COMMAND to
 * t_done + deadline; a read slower than -L ms fails the test (a stall).
 *
 * Prints "bulk: ..." lines with the figures. Exit 0, 1 on a violation, 2
 * on usage or setup errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#define MAX_READERS 32
#define VAL_CAP	    256
#define POLL_US	    1000

extern char **environ;

struct opts {
	const char *dir;      /* -d */
	unsigned nkeys;	      /* -N */
	unsigned hot;	      /* -H */
	unsigned nreaders;    /* -r */
	unsigned warm;	      /* -w: reads per reader before COMMAND */
	unsigned after;	      /* -a: reads per reader after t_done */
	uint64_t bound_ms;    /* -B: the stated delay */
	uint64_t deadline_ms; /* -t: hard limit for the final check */
	uint64_t stall_ms;    /* -L: slowest acceptable read */
	unsigned sample;      /* -S: untouched keys checked at the end */
	char **cmd;	      /* after "--" */
};

struct counts {
	uint64_t reads, gen1, gen2;
	uint64_t torn;		/* neither gen=1 nor gen=2 of the key */
	uint64_t errors;	/* failed open/read/close */
	uint64_t backward;	/* gen=1 after gen=2 by the same reader */
	uint64_t late_stale;	/* gen=1, started after t_done + bound */
	uint64_t stalls;	/* reads slower than -L */
	uint64_t last_gen1_at;	/* latest start of any gen=1 read (mono ns) */
	uint64_t first_gen2_at; /* earliest end of a gen=2 read (mono ns) */
};

struct reader {
	pthread_t tid;
	uint64_t rng;
	unsigned char *seen2; /* per key: this reader saw gen=2 */
	atomic_uint_fast64_t nreads;
	struct counts c;
	struct tl_hist all, during;
};

static struct opts opt = {
	.hot = 2000,
	.nreaders = 4,
	.warm = 2000,
	.after = 2000,
	.bound_ms = 100,
	.deadline_ms = 2000,
	.stall_ms = 1000,
	.sample = 1000,
};
static atomic_uchar *touched;		       /* per key: read by someone */
static _Atomic uint64_t t_start_ns, t_done_ns; /* 0 until known */

static void key_path(unsigned k, char *buf, size_t cap)
{
	tl_key_path(buf, cap, opt.dir, "b", 6, k);
}

/* 1 or 2: which generation buf holds for key k; 0 for anything else. */
static int generation(unsigned k, const char *buf, size_t len)
{
	char want[VAL_CAP];
	int n;

	n = snprintf(want, sizeof(want), "gen=1 key=b%06u", k);
	if ((size_t)n == len && memcmp(want, buf, len) == 0)
		return 1;
	n = snprintf(want, sizeof(want), "gen=2 key=b%06u replaced-in-bulk", k);
	if ((size_t)n == len && memcmp(want, buf, len) == 0)
		return 2;
	return 0;
}

/* ---- readers ---------------------------------------------------------- */

static void check(struct reader *r, unsigned k, int rc, const char *buf,
		  size_t len, uint64_t start, uint64_t end)
{
	uint64_t done = atomic_load(&t_done_ns);
	int g = rc ? -1 : generation(k, buf, len);

	r->c.reads++;
	if (g < 0) {
		r->c.errors++;
		tl_report("b%06u: %s", k, strerror(-rc));
	} else if (g == 0) {
		r->c.torn++;
		tl_report("b%06u: torn or foreign value '%.*s' (%zu bytes)", k,
			  (int)(len < 60 ? len : 60), buf, len);
	} else if (g == 2) {
		r->c.gen2++;
		r->seen2[k] = 1;
		if (!r->c.first_gen2_at || end < r->c.first_gen2_at)
			r->c.first_gen2_at = end;
	} else {
		r->c.gen1++;
		if (start > r->c.last_gen1_at)
			r->c.last_gen1_at = start;
		if (r->seen2[k]) {
			r->c.backward++;
			tl_report("b%06u: gen=1 after this reader saw gen=2",
				  k);
		}
		if (done && start > done + opt.bound_ms * 1000000u) {
			r->c.late_stale++;
			tl_report("b%06u: gen=1 in a read that started %" PRIu64
				  " ms after the bulk change committed",
				  k, (start - done) / 1000000u);
		}
	}
}

/* Latency bookkeeping of one read [start, end). */
static void account(struct reader *r, uint64_t start, uint64_t end)
{
	uint64_t s = atomic_load(&t_start_ns), d = atomic_load(&t_done_ns);

	tl_hist_add(&r->all, end - start);
	if (s && end >= s && (!d || start <= d + opt.deadline_ms * 1000000u))
		tl_hist_add(&r->during, end - start);
	if (end - start > opt.stall_ms * 1000000u) {
		r->c.stalls++;
		tl_report("a read took %" PRIu64 " ms",
			  (end - start) / 1000000u);
	}
}

/* Readers run until t_done, then opt.after more reads. */
static bool reader_more(uint64_t *after_left)
{
	if (!atomic_load(&t_done_ns))
		return true;
	if (*after_left == 0)
		return false;
	(*after_left)--;
	return true;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint64_t after_left = opt.after, start, end;
	char path[4096], buf[VAL_CAP];
	size_t len;
	unsigned k;
	int rc;

	while (reader_more(&after_left)) {
		if (tl_rand_below(&r->rng, 10))
			k = (unsigned)tl_rand_below(&r->rng, opt.hot);
		else
			k = (unsigned)tl_rand_below(&r->rng, opt.nkeys);
		key_path(k, path, sizeof(path));
		atomic_store_explicit(&touched[k], 1, memory_order_relaxed);
		start = tl_now_ns();
		rc = tl_read_file(path, buf, sizeof(buf), &len);
		end = tl_now_ns();
		check(r, k, rc, buf, len, start, end);
		account(r, start, end);
		atomic_fetch_add_explicit(&r->nreads, 1, memory_order_relaxed);
	}
	return NULL;
}

/* ---- the bulk change and the final check ------------------------------ */

/* Waits until every reader made opt.warm reads (bounded by the watchdog
 * of meson's timeout: readers always progress or fail). */
static void wait_warm(struct reader *rd)
{
	unsigned i;

	for (i = 0; i < opt.nreaders; i++)
		while (atomic_load(&rd[i].nreads) < opt.warm)
			tl_sleep_us(POLL_US);
}

static int run_command(void)
{
	pid_t pid;
	int rc, status;

	rc = posix_spawnp(&pid, opt.cmd[0], NULL, NULL, opt.cmd, environ);
	if (rc) {
		tl_warn("cannot run %s: %s", opt.cmd[0], strerror(rc));
		return -1;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		tl_warn("%s failed (status 0x%x)", opt.cmd[0],
			(unsigned)status);
		return -1;
	}
	return 0;
}

/*
 * Key k must show gen=2 by t_done + deadline. Returns 0 if the first read
 * already did, else the time after t_done at which it did (ns), or
 * UINT64_MAX if it did not (or showed anything but gen=1 before).
 */
static uint64_t final_key(unsigned k, struct counts *c)
{
	uint64_t done = atomic_load(&t_done_ns), now;
	char path[4096], buf[VAL_CAP];
	bool first = true;
	size_t len;
	int rc, g;

	key_path(k, path, sizeof(path));
	for (;; first = false) {
		rc = tl_read_file(path, buf, sizeof(buf), &len);
		now = tl_now_ns();
		c->reads++;
		g = rc ? -1 : generation(k, buf, len);
		if (g == 2)
			return first ? 0 : now - done;
		if (g != 1) {
			tl_report("final b%06u: %s", k,
				  rc ? strerror(-rc) : "torn or foreign value");
			return UINT64_MAX;
		}
		if (now - done > opt.deadline_ms * 1000000u) {
			tl_report("final b%06u: still gen=1 %" PRIu64
				  " ms after "
				  "the bulk change",
				  k, opt.deadline_ms);
			return UINT64_MAX;
		}
		tl_sleep_us(POLL_US);
	}
}

struct final {
	unsigned checked;  /* keys read */
	unsigned bad;	   /* not at gen=2 by the deadline */
	unsigned lagging;  /* at gen=1 on the first final read */
	uint64_t worst_ns; /* when the last lagging key showed gen=2 */
	struct counts c;
};

/* Reads every touched key and every stride-th other key. */
static void final_check(struct final *f)
{
	unsigned k, stride = opt.nkeys / (opt.sample ? opt.sample : 1);
	uint64_t t;

	if (stride == 0)
		stride = 1;
	for (k = 0; k < opt.nkeys; k++) {
		if (!atomic_load(&touched[k]) && k % stride)
			continue;
		f->checked++;
		t = final_key(k, &f->c);
		if (t == UINT64_MAX)
			f->bad++;
		else if (t)
			f->lagging++;
		if (t != UINT64_MAX && t > f->worst_ns)
			f->worst_ns = t;
	}
}

/* ---- main ------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: bulk -d REGION_DIR -N keys [-H hot] "
			"[-r readers] [-w warm] [-a after] [-B bound_ms] "
			"[-t deadline_ms] [-L stall_ms] [-S sample] -- "
			"COMMAND [ARGS...]\n");
	exit(2);
}

static void parse_args(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "+d:N:H:r:w:a:B:t:L:S:")) != -1) {
		switch (c) {
		case 'd':
			opt.dir = optarg;
			break;
		case 'N':
			opt.nkeys = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'H':
			opt.hot = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'r':
			opt.nreaders = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'w':
			opt.warm = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'a':
			opt.after = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'B':
			opt.bound_ms = strtoull(optarg, NULL, 10);
			break;
		case 't':
			opt.deadline_ms = strtoull(optarg, NULL, 10);
			break;
		case 'L':
			opt.stall_ms = strtoull(optarg, NULL, 10);
			break;
		case 'S':
			opt.sample = (unsigned)strtoul(optarg, NULL, 10);
			break;
		default:
			usage();
		}
	}
	if (!opt.dir || !opt.nkeys || optind >= argc || !opt.nreaders ||
	    opt.nreaders > MAX_READERS || !opt.hot || opt.hot > opt.nkeys)
		usage();
	opt.cmd = argv + optind;
}

/*
 * How long after the commit a read still returned gen=1 (ns). The commit
 * time itself is not observable from here, but it precedes both the exit
 * of COMMAND (t_done) and the end of the first read that returned gen=2,
 * so the earlier of the two is an upper bound of it, and the result a
 * lower bound of the true delay (never an excuse for a late one).
 */
static uint64_t mixed_window(const struct counts *c)
{
	uint64_t commit = atomic_load(&t_done_ns);

	if (c->first_gen2_at && c->first_gen2_at < commit)
		commit = c->first_gen2_at;
	return c->last_gen1_at > commit ? c->last_gen1_at - commit : 0;
}

/* t - t0 in ms; negative before t0. */
static double rel_ms(uint64_t t, uint64_t t0)
{
	return ((double)t - (double)t0) / 1e6;
}

static void print_hist(const char *what, const struct tl_hist *h)
{
	printf("bulk: latency %s: reads=%" PRIu64 " mean_us=%" PRIu64
	       " p50_us<=%" PRIu64 " p99_us<=%" PRIu64 " max_us=%" PRIu64 "\n",
	       what, h->n, h->n ? h->sum_ns / h->n / 1000u : 0,
	       tl_hist_quantile_us(h, 0.5), tl_hist_quantile_us(h, 0.99),
	       h->max_ns / 1000u);
}

static void sum_readers(struct reader *rd, struct counts *c,
			struct tl_hist *all, struct tl_hist *during)
{
	unsigned i;

	for (i = 0; i < opt.nreaders; i++) {
		c->reads += rd[i].c.reads;
		c->gen1 += rd[i].c.gen1;
		c->gen2 += rd[i].c.gen2;
		c->torn += rd[i].c.torn;
		c->errors += rd[i].c.errors;
		c->backward += rd[i].c.backward;
		c->late_stale += rd[i].c.late_stale;
		c->stalls += rd[i].c.stalls;
		if (rd[i].c.last_gen1_at > c->last_gen1_at)
			c->last_gen1_at = rd[i].c.last_gen1_at;
		if (rd[i].c.first_gen2_at &&
		    (!c->first_gen2_at ||
		     rd[i].c.first_gen2_at < c->first_gen2_at))
			c->first_gen2_at = rd[i].c.first_gen2_at;
		tl_hist_merge(all, &rd[i].all);
		tl_hist_merge(during, &rd[i].during);
		free(rd[i].seen2);
	}
}

static void start_readers(struct reader *rd)
{
	unsigned i;

	for (i = 0; i < opt.nreaders; i++) {
		rd[i].rng = 0x9E3779B97F4A7C15ULL * (i + 1);
		rd[i].seen2 = calloc(opt.nkeys, 1);
		if (!rd[i].seen2 ||
		    pthread_create(&rd[i].tid, NULL, reader_main, &rd[i])) {
			tl_warn("cannot start readers");
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	static struct reader rd[MAX_READERS];
	struct tl_hist all = {0}, during = {0};
	struct counts c = {0};
	struct final f = {0};
	uint64_t t0, mixed;
	unsigned i;
	int crc;

	parse_args(argc, argv);
	touched = calloc(opt.nkeys, sizeof(*touched));
	if (!touched)
		return 2;
	start_readers(rd);
	wait_warm(rd);
	t0 = tl_now_ns();
	atomic_store(&t_start_ns, t0);
	crc = run_command();
	atomic_store(&t_done_ns, tl_now_ns());
	for (i = 0; i < opt.nreaders; i++)
		pthread_join(rd[i].tid, NULL);
	sum_readers(rd, &c, &all, &during);
	final_check(&f);
	free(touched);
	printf("bulk: command took %" PRIu64 " ms\n",
	       (atomic_load(&t_done_ns) - t0) / 1000000u);
	printf("bulk: reads=%" PRIu64 " gen1=%" PRIu64 " gen2=%" PRIu64
	       " torn=%" PRIu64 " errors=%" PRIu64 " backward=%" PRIu64
	       " late_stale=%" PRIu64 " stalls=%" PRIu64 "\n",
	       c.reads, c.gen1, c.gen2, c.torn, c.errors, c.backward,
	       c.late_stale, c.stalls);
	mixed = mixed_window(&c);
	printf("bulk: timeline (ms after COMMAND started): first gen=2 read "
	       "ended %.1f, last gen=1 read started %.1f, COMMAND exited "
	       "%.1f\n",
	       rel_ms(c.first_gen2_at, t0), rel_ms(c.last_gen1_at, t0),
	       rel_ms(atomic_load(&t_done_ns), t0));
	printf("bulk: last gen=1 read started %" PRIu64 " ms after the "
	       "commit (stated bound %" PRIu64 " ms)\n",
	       mixed / 1000000u, opt.bound_ms);
	print_hist("overall", &all);
	print_hist("during the bulk change", &during);
	printf("bulk: final check: %u keys read, %u still gen=1 at first "
	       "read (last visible %" PRIu64 " ms after the commit), %u "
	       "failed\n",
	       f.checked, f.lagging, f.worst_ns / 1000000u, f.bad);
	if (crc)
		return 2;
	return (c.torn || c.errors || c.backward || c.late_stale || c.stalls ||
		f.bad || mixed > opt.bound_ms * 1000000u)
		       ? 1
		       : 0;
}
