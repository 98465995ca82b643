/*
 * log.c - the daemon's log: one line per event.
 *
 * Until the daemon detaches from its terminal every line goes to stderr
 * prefixed "regionfs: ", so a startup error is one clear line where the
 * operator typed the command. A daemonized regionfs logs to syslog
 * (facility daemon, ident "regionfs", with the pid); a foreground one (-f,
 * as under systemd, whose journal captures stderr) keeps stderr.
 *
 * Keys are user data: any byte but '/' and NUL. rfs_escape() makes them
 * safe for a log line (printable ASCII stays, everything else is \xNN), so
 * a key can neither forge a second line nor confuse a terminal.
 *
 * libfuse's own messages (mount errors, "fuse: ...") are routed through
 * the same function so they follow the same destination.
 *
 * Thread-safety: each line is formatted into a local buffer and written
 * with one write(2) (stderr) or one syslog(3) call, so lines from
 * concurrent threads never interleave. The mode flags are set before the
 * worker threads start and only read afterwards.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs.h"

#define LOG_LINE 2048

static atomic_bool use_syslog;
static atomic_bool debug_on;

void rfs_log_to_syslog(void)
{
	openlog("regionfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	atomic_store(&use_syslog, true);
}

void rfs_log_set_debug(bool on)
{
	atomic_store(&debug_on, on);
}

static int syslog_prio(enum rfs_log_level level)
{
	switch (level) {
	case RFS_LOG_ERR:
		return LOG_ERR;
	case RFS_LOG_WARNING:
		return LOG_WARNING;
	case RFS_LOG_NOTICE:
		return LOG_NOTICE;
	case RFS_LOG_INFO:
		return LOG_INFO;
	default:
		return LOG_DEBUG;
	}
}

static void __attribute__((format(printf, 2, 0)))
log_va(enum rfs_log_level level, const char *fmt, va_list ap)
{
	char line[LOG_LINE];
	size_t pre = 0;
	int n;

	if (level == RFS_LOG_DEBUG && !atomic_load(&debug_on))
		return;
	if (!atomic_load(&use_syslog)) {
		memcpy(line, "regionfs: ", 10);
		pre = 10;
	}
	n = vsnprintf(line + pre, sizeof(line) - pre - 1, fmt, ap);
	if (n < 0)
		return;
	n += pre;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	/* libfuse's messages end in '\n' already */
	while (n > (int)pre && line[n - 1] == '\n')
		n--;
	if (atomic_load(&use_syslog)) {
		line[n] = '\0';
		syslog(syslog_prio(level), "%s", line);
		return;
	}
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere left to report it */
	}
}

void rfs_log(enum rfs_log_level level, const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	log_va(level, fmt, ap);
	va_end(ap);
	errno = saved;
}

const char *rfs_escape(const void *key, size_t klen, char *buf)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *k = key;
	size_t i, o = 0;

	for (i = 0; i < klen; i++) {
		unsigned char c = k[i];

		if (o + 8 > RFS_ESC_LEN) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (c == '\\') {
			buf[o++] = '\\';
			buf[o++] = '\\';
		} else if (c >= 0x20 && c < 0x7f) {
			buf[o++] = c;
		} else {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		}
	}
	buf[o] = '\0';
	return buf;
}

static enum rfs_log_level from_fuse(enum fuse_log_level level)
{
	if (level <= FUSE_LOG_ERR)
		return RFS_LOG_ERR;
	if (level == FUSE_LOG_WARNING)
		return RFS_LOG_WARNING;
	if (level <= FUSE_LOG_INFO)
		return RFS_LOG_INFO;
	return RFS_LOG_DEBUG;
}

/*
 * libfuse sometimes builds one line from several calls (its "unknown
 * option(s)" message does): collect pieces per thread until a newline.
 */
static void __attribute__((format(printf, 2, 0)))
fuse_log_hook(enum fuse_log_level level, const char *fmt, va_list ap)
{
	static __thread char part[LOG_LINE];
	static __thread size_t plen;
	int n;

	n = vsnprintf(part + plen, sizeof(part) - plen, fmt, ap);
	if (n < 0)
		return;
	plen += (size_t)n < sizeof(part) - plen ? (size_t)n
						: sizeof(part) - plen - 1;
	if (plen && part[plen - 1] != '\n' && plen < sizeof(part) - 1)
		return;
	rfs_log(from_fuse(level), "%s", part);
	plen = 0;
	part[0] = '\0';
}

void rfs_log_capture_fuse(void)
{
	fuse_set_log_func(fuse_log_hook);
}
