/*
 * listdir.c - lists a directory through readdir() and checks every name.
 *
 *   listdir DIR COUNT [PREFIX WIDTH]
 *
 * Reads DIR to the end twice (the second time after rewinddir()), skipping
 * "." and "..", and fails unless each pass returns exactly COUNT names with
 * none repeated. With PREFIX and WIDTH the names must be exactly PREFIX
 * followed by the numbers 0..COUNT-1 zero-padded to WIDTH digits (the
 * bulk-loaded keys of test_bigdir.sh), so a name that is lost, invented
 * or garbled between readdir batches is caught, not only a wrong count.
 *
 * Exit status: 0 when every check holds, 1 otherwise (with a message).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

struct names {
	char **v;   /* strdup()ed names */
	size_t n;   /* names held */
	size_t cap; /* slots allocated */
};

static void names_add(struct names *ns, const char *name)
{
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 1024;
		char **v = realloc(ns->v, cap * sizeof(*v));

		if (!v)
			tl_die("%s", "out of memory");
		ns->v = v;
		ns->cap = cap;
	}
	ns->v[ns->n] = strdup(name);
	if (!ns->v[ns->n])
		tl_die("%s", "out of memory");
	ns->n++;
}

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	memset(ns, 0, sizeof(*ns));
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One pass over the open directory into ns. */
static void read_all(DIR *d, const char *path, struct names *ns)
{
	struct dirent *de;

	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de)
			break;
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		names_add(ns, de->d_name);
	}
	if (errno)
		tl_die("readdir %s failed", path);
}

/* Sorts ns and checks count, uniqueness and (if prefix) exact names. */
static void check(struct names *ns, size_t count, const char *prefix, int width,
		  int pass)
{
	char want[512];

	qsort(ns->v, ns->n, sizeof(*ns->v), cmp_names);
	if (ns->n != count)
		tl_die("pass %d: %zu names, expected %zu", pass, ns->n, count);
	for (size_t i = 1; i < ns->n; i++) {
		if (strcmp(ns->v[i - 1], ns->v[i]) == 0)
			tl_die("name listed twice: %s", ns->v[i]);
	}
	if (!prefix)
		return;
	for (size_t i = 0; i < ns->n; i++) {
		snprintf(want, sizeof(want), "%s%0*zu", prefix, width, i);
		if (strcmp(ns->v[i], want) != 0)
			tl_die("name #%zu is '%s', expected '%s'", i, ns->v[i],
			       want);
	}
}

int main(int argc, char **argv)
{
	struct names ns = {0};
	double t0;
	const char *prefix = NULL;
	size_t count;
	int width = 0;
	DIR *d;

	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: listdir DIR COUNT [PREFIX WIDTH]\n");
		return 2;
	}
	count = strtoull(argv[2], NULL, 10);
	if (argc == 5) {
		prefix = argv[3];
		width = atoi(argv[4]);
	}
	d = opendir(argv[1]);
	if (!d)
		tl_die("cannot open %s", argv[1]);
	for (int pass = 1; pass <= 2; pass++) {
		t0 = tl_now_s();
		read_all(d, argv[1], &ns);
		check(&ns, count, prefix, width, pass);
		printf("listdir: pass %d: %zu unique names in %.3f s\n", pass,
		       ns.n, tl_now_s() - t0);
		names_free(&ns);
		rewinddir(d);
	}
	closedir(d);
	return 0;
}
