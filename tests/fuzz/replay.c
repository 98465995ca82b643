/*
 * replay.c - runs a libFuzzer target's function on files, without
 * libFuzzer: the normal test suite replays the seed corpus and every
 * crash input kept as a regression (tests/fuzz/corpus/NAME/) this way.
 *
 *   replay FILE|DIR...
 *
 * Exit status 0 if every input ran (a failed assertion aborts).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return -1;
	}
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int i, n = 0;

	for (i = 1; i < argc; i++) {
		struct stat sb;
		struct dirent *de;
		DIR *d;

		if (stat(argv[i], &sb) || !S_ISDIR(sb.st_mode)) {
			if (run_file(argv[i])) {
				perror(argv[i]);
				return 1;
			}
			n++;
			continue;
		}
		d = opendir(argv[i]);
		if (!d) {
			perror(argv[i]);
			return 1;
		}
		while ((de = readdir(d))) {
			char p[4096];

			if (de->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s", argv[i], de->d_name);
			if (run_file(p)) {
				perror(p);
				closedir(d);
				return 1;
			}
			n++;
		}
		closedir(d);
	}
	printf("replayed %d inputs\n", n);
	return n ? 0 : 1;
}
