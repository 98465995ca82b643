/*
 * halfwriter.c - a writer caught in the middle, for test_sigterm.sh.
 *
 *   halfwriter FILE PART1 PART2
 *
 * Opens FILE (O_WRONLY|O_CREAT|O_TRUNC), writes the content of PART1 with
 * one descriptor and no close in between (a shell redirection would close
 * a duplicate, and every close() of a FUSE file is a FLUSH, which commits),
 * prints "half" and waits for a line on stdin. Then writes PART2, closes,
 * and prints "closed 0", or "write ERR" / "closed ERR" at the first error.
 * EOF on stdin instead of a line: exits without writing PART2 or closing
 * (the process exit closes FILE).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int copy(int fd, const char *path)
{
	char buf[65536];
	ssize_t n;
	int in = open(path, O_RDONLY);

	if (in < 0)
		return errno;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if (write(fd, buf, (size_t)n) != n) {
			close(in);
			return errno ? errno : EIO;
		}
	}
	close(in);
	return n < 0 ? errno : 0;
}

int main(int argc, char **argv)
{
	char line[64];
	int fd, e;

	if (argc != 4) {
		fprintf(stderr, "usage: halfwriter FILE PART1 PART2\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		printf("open %s\n", strerror(errno));
		return 1;
	}
	e = copy(fd, argv[2]);
	if (e) {
		printf("write %s\n", strerror(e));
		return 1;
	}
	printf("half\n");
	if (!fgets(line, sizeof(line), stdin))
		return 0;
	e = copy(fd, argv[3]);
	if (e) {
		printf("write %s\n", strerror(e));
		return 0;
	}
	printf(close(fd) ? "closed %s\n" : "closed 0\n", strerror(errno));
	return 0;
}
