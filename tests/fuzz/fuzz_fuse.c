/*
 * fuzz_fuse.c - libFuzzer target: the daemon's FUSE request handlers,
 * driven with arbitrary sequences of requests and no kernel. The real
 * handlers (rfs_ops, fs/ops.c) run in a real libfuse session whose I/O
 * is ours (fuse_session_custom_io): read() hands libfuse the next request
 * we built, writev() collects its replies. The daemon's state is set up
 * as main.c does (regions.ini, inode table, region table, a store in a
 * temporary directory), once for the whole run; the background threads
 * are not started.
 *
 * The input is a program: each step picks an operation (LOOKUP, FORGET,
 * GETATTR, SETATTR, MKNOD, MKDIR, UNLINK, RMDIR, RENAME, RENAME2, OPEN,
 * CREATE, READ, WRITE, FLUSH, RELEASE, FSYNC, OPENDIR, READDIR,
 * RELEASEDIR, FSYNCDIR, STATFS, SYMLINK, LINK, BATCH_FORGET) and its
 * arguments from the next bytes. The target plays the kernel's part
 * honestly - the only inputs a handler can get from a real kernel:
 * node ids the daemon handed out (by LOOKUP, CREATE, MKNOD...) and not
 * yet forgotten, FORGET counts within what was looked up, file handles
 * from OPEN/CREATE/OPENDIR not yet released (files and directories
 * apart), names of 1..255 bytes without '/' or NUL and not "." or "..";
 * everything else (names' bytes, flags, modes, offsets, sizes, data,
 * which node, which handle) comes from the input. At the end of each
 * input every handle is released and every lookup forgotten, as a kernel
 * does when the files are closed and the dentries dropped, and every key
 * is unlinked through the session (so that keys do not pile up and slow
 * every later input down).
 *
 * Checks: every request but FORGET gets exactly one reply, for its own
 * unique id, whose header is consistent (length, an errno in -4095..0);
 * a successful entry reply with node id 0 is a negative entry (cached
 * "no such name") and names no node. Plus whatever the sanitizers and the
 * daemon's own assertions find.
 */
/* The checks below are the target: keep them in release builds too. */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the fake kernel's I/O ------------------------------------------------ */

static struct fuse_session *se;
static struct fuse_buf fbuf;
static uint8_t req[1 << 18];
static size_t req_len;
static uint8_t rep[1 << 18];
static size_t rep_len;
static unsigned nreplies;
static uint64_t cur_unique;

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	size_t n = req_len;

	(void)fd;
	(void)userdata;
	assert(n && n <= len);
	memcpy(buf, req, n);
	req_len = 0;
	return (ssize_t)n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fuse_out_header oh;
	size_t total = 0, off = 0;
	int i;

	(void)fd;
	(void)userdata;
	for (i = 0; i < count; i++)
		total += iov[i].iov_len;
	assert(total >= sizeof(oh));
	for (i = 0; i < count; i++) { /* gather the first bytes */
		size_t n = iov[i].iov_len;

		if (off + n > sizeof(rep))
			n = sizeof(rep) - off;
		memcpy(rep + off, iov[i].iov_base, n);
		off += n;
	}
	memcpy(&oh, rep, sizeof(oh));
	assert(oh.len == total);
	if (oh.unique == 0)
		return (ssize_t)total; /* a notification (inval_inode, store) */
	assert(oh.unique == cur_unique);
	assert(oh.error <= 0 && oh.error > -4096);
	nreplies++;
	rep_len = off;
	return (ssize_t)total;
}

static const struct fuse_custom_io io = {.read = io_read, .writev = io_writev};

/* ---- the fuzz input ---------------------------------------------------- */

static const uint8_t *in;
static size_t in_left;

static uint64_t take(unsigned nbytes)
{
	uint64_t v = 0;

	while (nbytes--) {
		v = v << 8 | (in_left ? *in : 0);
		if (in_left) {
			in++;
			in_left--;
		}
	}
	return v;
}

/* ---- what the kernel knows --------------------------------------------- */

#define MAX_NODES   256
#define MAX_HANDLES 64

struct node {
	uint64_t id;
	uint64_t nlookup;
	bool dir;
};
static struct node nodes[MAX_NODES];
static unsigned nnodes;

struct fh {
	uint64_t fh;
	uint64_t ino;
	bool dir;
	bool writable;
};
static struct fh handles[MAX_HANDLES];
static unsigned nhandles;

static void node_add(uint64_t id, uint32_t mode)
{
	unsigned i;

	if (id == FUSE_ROOT_ID)
		return;
	for (i = 0; i < nnodes; i++)
		if (nodes[i].id == id) {
			nodes[i].nlookup++;
			return;
		}
	assert(nnodes < MAX_NODES); /* pruned before every step */
	nodes[nnodes++] =
		(struct node){.id = id, .nlookup = 1, .dir = S_ISDIR(mode)};
}

/* A node id to use: the root or one with lookups. */
static uint64_t pick_node(bool want_dir)
{
	unsigned n = (unsigned)take(1), i, seen = 0;

	if (n % 4 == 0 || !nnodes)
		return FUSE_ROOT_ID;
	for (i = 0; i < nnodes; i++)
		if (!want_dir || nodes[i].dir)
			seen++;
	if (!seen)
		return FUSE_ROOT_ID;
	n %= seen;
	for (i = 0; i < nnodes; i++)
		if ((!want_dir || nodes[i].dir) && n-- == 0)
			return nodes[i].id;
	return FUSE_ROOT_ID;
}

static int pick_handle(bool dir, bool need_write)
{
	unsigned n = (unsigned)take(1), i, seen = 0;

	for (i = 0; i < nhandles; i++)
		if (handles[i].dir == dir &&
		    (!need_write || handles[i].writable))
			seen++;
	if (!seen)
		return -1;
	n %= seen;
	for (i = 0; i < nhandles; i++)
		if (handles[i].dir == dir &&
		    (!need_write || handles[i].writable) && n-- == 0)
			return (int)i;
	return -1;
}

/* ---- requests ------------------------------------------------------------ */

/* Sends one request: header + up to three argument parts. True if it
 * got a reply (FORGETs get none). */
static bool send_req(uint32_t opcode, uint64_t nodeid, const void *a,
		     size_t alen, const void *b, size_t blen, const void *c,
		     size_t clen)
{
	struct fuse_in_header ih = {0};
	unsigned before = nreplies;

	ih.len = (uint32_t)(sizeof(ih) + alen + blen + clen);
	assert(ih.len <= sizeof(req));
	ih.opcode = opcode;
	ih.unique = ++cur_unique;
	ih.nodeid = nodeid;
	ih.uid = 0;
	ih.gid = 0;
	ih.pid = 4242;
	memcpy(req, &ih, sizeof(ih));
	if (alen)
		memcpy(req + sizeof(ih), a, alen);
	if (blen)
		memcpy(req + sizeof(ih) + alen, b, blen);
	if (clen)
		memcpy(req + sizeof(ih) + alen + blen, c, clen);
	req_len = ih.len;
	rep_len = 0;
	assert(fuse_session_receive_buf(se, &fbuf) == (int)ih.len);
	fuse_session_process_buf(se, &fbuf);
	assert(req_len == 0);
	if (opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET) {
		assert(nreplies == before);
		return false;
	}
	assert(nreplies == before + 1);
	if (getenv("FUZZ_FUSE_TRACE")) /* replaying one input by hand */
		fprintf(stderr, "op %u node %llu -> %d\n", opcode,
			(unsigned long long)nodeid,
			((const struct fuse_out_header *)rep)->error);
	return true;
}

static int32_t rep_error(void)
{
	struct fuse_out_header oh;

	memcpy(&oh, rep, sizeof(oh));
	return oh.error;
}

/* An entry reply: records the node. */
static void got_entry(void)
{
	struct fuse_entry_out e;

	if (rep_error() || rep_len < sizeof(struct fuse_out_header) + sizeof(e))
		return;
	memcpy(&e, rep + sizeof(struct fuse_out_header), sizeof(e));
	if (e.nodeid == 0)
		return; /* a negative entry: the kernel caches "no such key" */
	node_add(e.nodeid, e.attr.mode);
}

static void got_open(uint64_t ino, bool dir, bool writable, size_t at)
{
	struct fuse_open_out o;

	if (rep_error() || rep_len < at + sizeof(o))
		return;
	memcpy(&o, rep + at, sizeof(o));
	if (nhandles == MAX_HANDLES) { /* cannot happen: checked before */
		assert(0);
	}
	handles[nhandles++] = (struct fh){
		.fh = o.fh, .ino = ino, .dir = dir, .writable = writable};
}

static const char *const dict[] = {
	"a",	    "b",  "c",	".regionfs", "stats", "config",	 "metrics.prom",
	"regions",  "k0", "k1", "k2",	     "k3",    ".hidden", "x y",
	"\xff\xfe",
};

/* A name the kernel could send (1..255 bytes, no '/', NUL, ".", ".."). */
static size_t pick_name(char *name)
{
	unsigned sel = (unsigned)take(1);
	size_t n, i;

	if (sel < 200) {
		const char *d = dict[sel % (sizeof(dict) / sizeof(dict[0]))];

		n = strlen(d);
		memcpy(name, d, n + 1);
		return n;
	}
	n = 1 + take(1) % 255;
	for (i = 0; i < n; i++) {
		char ch = (char)take(1);

		name[i] = ch == '/' || ch == 0 ? '_' : ch;
	}
	name[n] = 0;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		name[0] = '_';
	return n;
}

static void release_handle(int i)
{
	struct fh h = handles[i];

	if (h.dir) {
		struct fuse_release_in r = {.fh = h.fh};

		send_req(FUSE_RELEASEDIR, h.ino, &r, sizeof(r), NULL, 0, NULL,
			 0);
	} else {
		struct fuse_release_in r = {.fh = h.fh,
					    .flags = h.writable ? O_RDWR : 0};

		send_req(FUSE_RELEASE, h.ino, &r, sizeof(r), NULL, 0, NULL, 0);
	}
	handles[i] = handles[--nhandles];
}

static void forget_node(unsigned i, uint64_t n)
{
	struct fuse_forget_in f = {.nlookup = n};

	send_req(FUSE_FORGET, nodes[i].id, &f, sizeof(f), NULL, 0, NULL, 0);
	nodes[i].nlookup -= n;
	if (!nodes[i].nlookup)
		nodes[i] = nodes[--nnodes];
}

static void step(void)
{
	static uint8_t buf[1 << 17];
	char name[256], name2[256];
	unsigned op = (unsigned)take(1) % 25;
	uint64_t ino;
	size_t n, n2;
	int h;

	switch (op) {
	case 0: /* LOOKUP */
		ino = pick_node(true);
		n = pick_name(name);
		if (send_req(FUSE_LOOKUP, ino, name, n + 1, NULL, 0, NULL, 0))
			got_entry();
		break;
	case 1: /* FORGET */
		if (nnodes) {
			unsigned i = (unsigned)take(1) % nnodes;

			forget_node(i, 1 + take(1) % nodes[i].nlookup);
		}
		break;
	case 2: { /* GETATTR */
		struct fuse_getattr_in g = {0};

		h = pick_handle(false, false);
		if (h >= 0 && take(1) & 1) {
			g.getattr_flags = FUSE_GETATTR_FH;
			g.fh = handles[h].fh;
			ino = handles[h].ino;
		} else {
			ino = pick_node(false);
		}
		send_req(FUSE_GETATTR, ino, &g, sizeof(g), NULL, 0, NULL, 0);
		break;
	}
	case 3: { /* SETATTR */
		struct fuse_setattr_in s = {0};

		s.valid = (uint32_t)take(2) &
			  (FATTR_MODE | FATTR_UID | FATTR_GID | FATTR_SIZE |
			   FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW |
			   FATTR_MTIME_NOW | FATTR_CTIME);
		s.size = take(3);
		s.mode = (uint32_t)take(2);
		s.uid = (uint32_t)take(1);
		s.gid = (uint32_t)take(1);
		s.mtime = take(4);
		h = pick_handle(false, false);
		if (h >= 0 && take(1) & 1) {
			s.valid |= FATTR_FH;
			s.fh = handles[h].fh;
			ino = handles[h].ino;
		} else {
			ino = pick_node(false);
		}
		send_req(FUSE_SETATTR, ino, &s, sizeof(s), NULL, 0, NULL, 0);
		break;
	}
	case 4: { /* MKNOD */
		struct fuse_mknod_in m = {.mode = (uint32_t)take(2),
					  .umask = 022};

		ino = pick_node(true);
		n = pick_name(name);
		if (take(1) & 1)
			m.mode = S_IFREG | (m.mode & 0777);
		if (send_req(FUSE_MKNOD, ino, &m, sizeof(m), name, n + 1, NULL,
			     0))
			got_entry();
		break;
	}
	case 5: { /* MKDIR */
		struct fuse_mkdir_in m = {.mode = (uint32_t)take(2) & 07777,
					  .umask = 022};

		ino = pick_node(true);
		n = pick_name(name);
		if (send_req(FUSE_MKDIR, ino, &m, sizeof(m), name, n + 1, NULL,
			     0))
			got_entry();
		break;
	}
	case 6: /* UNLINK */
	case 7: /* RMDIR */
		ino = pick_node(true);
		n = pick_name(name);
		send_req(op == 6 ? FUSE_UNLINK : FUSE_RMDIR, ino, name, n + 1,
			 NULL, 0, NULL, 0);
		break;
	case 8: { /* RENAME */
		struct fuse_rename_in r;

		ino = pick_node(true);
		r.newdir = pick_node(true);
		n = pick_name(name);
		n2 = pick_name(name2);
		send_req(FUSE_RENAME, ino, &r, sizeof(r), name, n + 1, name2,
			 n2 + 1);
		break;
	}
	case 9: { /* RENAME2 */
		struct fuse_rename2_in r = {0};
		static const uint32_t fl[] = {0, RENAME_NOREPLACE,
					      RENAME_EXCHANGE, RENAME_WHITEOUT};

		ino = pick_node(true);
		r.newdir = pick_node(true);
		r.flags = fl[take(1) % 4];
		n = pick_name(name);
		n2 = pick_name(name2);
		send_req(FUSE_RENAME2, ino, &r, sizeof(r), name, n + 1, name2,
			 n2 + 1);
		break;
	}
	case 10: { /* OPEN */
		static const uint32_t acc[] = {O_RDONLY, O_WRONLY, O_RDWR};
		struct fuse_open_in o = {0};

		if (nhandles >= MAX_HANDLES)
			break;
		o.flags = acc[take(1) % 3];
		o.flags |= (uint32_t)take(1) & (O_TRUNC | O_APPEND);
		ino = pick_node(false);
		if (send_req(FUSE_OPEN, ino, &o, sizeof(o), NULL, 0, NULL, 0))
			got_open(ino, false, (o.flags & O_ACCMODE) != O_RDONLY,
				 sizeof(struct fuse_out_header));
		break;
	}
	case 11: { /* CREATE */
		struct fuse_create_in c = {0};

		if (nhandles >= MAX_HANDLES)
			break;
		c.flags = O_CREAT | ((take(1) & 1) ? O_RDWR : O_WRONLY);
		c.flags |= (uint32_t)take(1) & (O_TRUNC | O_EXCL | O_APPEND);
		c.mode = S_IFREG | ((uint32_t)take(2) & 07777);
		c.umask = 022;
		ino = pick_node(true);
		n = pick_name(name);
		if (send_req(FUSE_CREATE, ino, &c, sizeof(c), name, n + 1, NULL,
			     0) &&
		    !rep_error()) {
			struct fuse_entry_out e;

			assert(rep_len >= sizeof(struct fuse_out_header) +
						  sizeof(e) +
						  sizeof(struct fuse_open_out));
			memcpy(&e, rep + sizeof(struct fuse_out_header),
			       sizeof(e));
			got_entry();
			got_open(e.nodeid, false, true,
				 sizeof(struct fuse_out_header) + sizeof(e));
		}
		break;
	}
	case 12: { /* READ */
		struct fuse_read_in r = {0};

		h = pick_handle(false, false);
		if (h < 0)
			break;
		r.fh = handles[h].fh;
		r.offset = take(3);
		r.size = 1 + (uint32_t)take(2) % (128 * 1024);
		send_req(FUSE_READ, handles[h].ino, &r, sizeof(r), NULL, 0,
			 NULL, 0);
		break;
	}
	case 13: { /* WRITE */
		struct fuse_write_in w = {0};

		h = pick_handle(false, true);
		if (h < 0)
			break;
		w.fh = handles[h].fh;
		w.offset = take(3);
		n = take(1) % 64;
		if (take(1) == 0xff)
			n = 65536 + take(1) * 256; /* a big one */
		memset(buf, (int)take(1), n);
		w.size = (uint32_t)n;
		send_req(FUSE_WRITE, handles[h].ino, &w, sizeof(w), buf, n,
			 NULL, 0);
		break;
	}
	case 14:   /* FLUSH */
	case 16: { /* FSYNC */
		h = pick_handle(false, false);
		if (h < 0)
			break;
		if (op == 14) {
			struct fuse_flush_in f = {.fh = handles[h].fh};

			send_req(FUSE_FLUSH, handles[h].ino, &f, sizeof(f),
				 NULL, 0, NULL, 0);
		} else {
			struct fuse_fsync_in f = {
				.fh = handles[h].fh,
				.fsync_flags = (uint32_t)take(1) & 1};

			send_req(FUSE_FSYNC, handles[h].ino, &f, sizeof(f),
				 NULL, 0, NULL, 0);
		}
		break;
	}
	case 15: /* RELEASE */
		h = pick_handle(false, false);
		if (h >= 0)
			release_handle(h);
		break;
	case 17: { /* OPENDIR */
		struct fuse_open_in o = {0};

		if (nhandles >= MAX_HANDLES)
			break;
		ino = pick_node(true);
		if (send_req(FUSE_OPENDIR, ino, &o, sizeof(o), NULL, 0, NULL,
			     0))
			got_open(ino, true, false,
				 sizeof(struct fuse_out_header));
		break;
	}
	case 18: { /* READDIR */
		struct fuse_read_in r = {0};

		h = pick_handle(true, false);
		if (h < 0)
			break;
		r.fh = handles[h].fh;
		r.offset = take(1) & 0x80 ? take(8) : take(1);
		r.size = 1 + (uint32_t)take(2) % 65536;
		send_req(FUSE_READDIR, handles[h].ino, &r, sizeof(r), NULL, 0,
			 NULL, 0);
		break;
	}
	case 19: /* RELEASEDIR */
		h = pick_handle(true, false);
		if (h >= 0)
			release_handle(h);
		break;
	case 20: { /* FSYNCDIR */
		struct fuse_fsync_in f = {0};

		h = pick_handle(true, false);
		if (h < 0)
			break;
		f.fh = handles[h].fh;
		send_req(FUSE_FSYNCDIR, handles[h].ino, &f, sizeof(f), NULL, 0,
			 NULL, 0);
		break;
	}
	case 21: /* STATFS */
		send_req(FUSE_STATFS, pick_node(false), NULL, 0, NULL, 0, NULL,
			 0);
		break;
	case 22: /* SYMLINK */
		ino = pick_node(true);
		n = pick_name(name);
		n2 = pick_name(name2);
		if (send_req(FUSE_SYMLINK, ino, name, n + 1, name2, n2 + 1,
			     NULL, 0))
			got_entry();
		break;
	case 23: { /* LINK */
		struct fuse_link_in l = {.oldnodeid = pick_node(false)};

		ino = pick_node(true);
		n = pick_name(name);
		if (send_req(FUSE_LINK, ino, &l, sizeof(l), name, n + 1, NULL,
			     0))
			got_entry();
		break;
	}
	default: { /* BATCH_FORGET of up to 4 nodes */
		struct fuse_batch_forget_in b = {0};
		struct fuse_forget_one one[4];
		unsigned k, i;

		for (k = 0; k < 4 && k < nnodes; k++) {
			i = (unsigned)take(1) % nnodes;
			if (nodes[i].nlookup == 0)
				break;
			one[k].nodeid = nodes[i].id;
			one[k].nlookup = 1;
			nodes[i].nlookup--; /* removed below */
		}
		if (!k)
			break;
		b.count = k;
		send_req(FUSE_BATCH_FORGET, 0, &b, sizeof(b), one,
			 k * sizeof(one[0]), NULL, 0);
		for (i = 0; i < nnodes;)
			if (!nodes[i].nlookup)
				nodes[i] = nodes[--nnodes];
			else
				i++;
		break;
	}
	}
	/* keep room: the kernel would evict dentries too */
	while (nnodes > MAX_NODES - 4)
		forget_node(0, nodes[0].nlookup);
}

/*
 * Unlinks every key of the regions through the session, so that inputs
 * do not pile keys up (listings and the store would slow down for good).
 */
static char *keys[4096];
static size_t nkeys;

static int collect(void *ctx, const void *key, size_t klen,
		   const struct store_meta *meta)
{
	(void)ctx;
	(void)meta;
	if (nkeys == sizeof(keys) / sizeof(keys[0]))
		return 1;
	keys[nkeys] = strndup(key, klen);
	assert(keys[nkeys]);
	nkeys++;
	return 0;
}

static void wipe(void)
{
	static const char *const regions[] = {"a", "b"};
	struct fuse_entry_out e;
	size_t r, i;

	for (r = 0; r < 2; r++) {
		nkeys = 0;
		assert(store_list(rfs.st, regions[r], NULL, 0, SIZE_MAX,
				  collect, NULL) >= 0);
		if (!nkeys)
			continue;
		send_req(FUSE_LOOKUP, FUSE_ROOT_ID, regions[r],
			 strlen(regions[r]) + 1, NULL, 0, NULL, 0);
		assert(rep_error() == 0);
		memcpy(&e, rep + sizeof(struct fuse_out_header), sizeof(e));
		for (i = 0; i < nkeys; i++) {
			send_req(FUSE_UNLINK, e.nodeid, keys[i],
				 strlen(keys[i]) + 1, NULL, 0, NULL, 0);
			free(keys[i]);
		}
		node_add(e.nodeid, e.attr.mode);
		forget_node(nnodes - 1, nodes[nnodes - 1].nlookup);
	}
}

/* ---- set-up ---------------------------------------------------------------- */

static char dir[] = "/tmp/fuzz_fuse.XXXXXX";
static char ini[64], db[64];

static void cleanup(void)
{
	static const char *const files[] = {"f.db", "f.db-wal", "f.db-shm",
					    "f.db-reserve", "regions.ini"};
	char p[96];
	size_t i;

	if (se) {
		fuse_session_destroy(se);
		se = NULL;
	}
	rfs_handles_shutdown();
	store_close(rfs.st);
	rfs.st = NULL;
	rfs_state_fini();
	rfs_inode_fini();
	free(fbuf.mem);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		unlink(p);
	}
	rmdir(dir);
}

static void setup(void)
{
	static const char regions[] = "[defaults]\n"
				      "max_entries = 64\n"
				      "max_bytes = 1M\n"
				      "max_value_size = 256K\n"
				      "stripes = 1\n"
				      "[a]\n"
				      "[b]\n"
				      "max_value_size = 1K\n"
				      "[c]\n"
				      "read_only = true\n";
	static char arg0[] = "fuzz_fuse";
	char *argv[] = {arg0, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	char err[CONFIG_ERR_LEN];
	struct config *c;
	struct fuse_init_in init = {0};
	FILE *f;
	int fd;

	if (!mkdtemp(dir))
		abort();
	snprintf(ini, sizeof(ini), "%s/regions.ini", dir);
	snprintf(db, sizeof(db), "%s/f.db", dir);
	f = fopen(ini, "w");
	if (!f || fputs(regions, f) < 0 || fclose(f))
		abort();
	rfs.uid = getuid();
	rfs.gid = getgid();
	rfs.db_path = db;
	rfs.config_path = ini;
	stat(ini, &rfs.config_st);
	clock_gettime(CLOCK_REALTIME, &rfs.mount_time);
	if (config_load(ini, &c, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	if (rfs_inode_init() || rfs_state_init(c))
		abort();
	config_free(c);
	if (store_open(db, NULL, &rfs.st))
		abort();
	se = fuse_session_new(&args, &rfs_ops, sizeof(rfs_ops), NULL);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (!se || fd < 0 || fuse_session_custom_io(se, &io, fd))
		abort();
	fuse_opt_free_args(&args);
	rfs.se = se;
	/*
	 * The checks want every reply before the next request: a write
	 * handle's RELEASE reply may otherwise wait for a later OPEN
	 * (fs/linger.c; test_stats.sh covers it), so it is answered at once,
	 * as after an unmount.
	 */
	rfs_linger_stop();
	atexit(cleanup);
	init.major = FUSE_KERNEL_VERSION;
	init.minor = 31;
	init.max_readahead = 128 * 1024;
	init.flags = FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC |
		     FUSE_EXPORT_SUPPORT | FUSE_DONT_MASK |
		     FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO |
		     FUSE_PARALLEL_DIROPS;
	send_req(FUSE_INIT, 0, &init, sizeof(init), NULL, 0, NULL, 0);
	assert(rep_error() == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned steps = 0;

	if (!se)
		setup();
	in = data;
	in_left = size;
	while (in_left && steps++ < 200)
		step();
	/* the process closes its files; the kernel drops its dentries */
	while (nhandles)
		release_handle((int)nhandles - 1);
	while (nnodes)
		forget_node(nnodes - 1, nodes[nnodes - 1].nlookup);
	wipe();
	return 0;
}
