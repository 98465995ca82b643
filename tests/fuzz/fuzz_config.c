/*
 * fuzz_config.c - libFuzzer target: the regions.ini parser and validator
 * (config_parse_string), and the formatter on what it accepts. Whatever
 * the input, parsing must not crash, leak or read out of bounds; an
 * accepted file must format each region so that the text parses back to
 * the same settings; a refused one must say "NAME:..." in its message.
 *
 * Built with libFuzzer by -Dfuzz=true (clang), and always as a replay
 * program (replay.c) that runs every file of the seed corpus and of the
 * regression directory through this function in the normal test suite.
 */
/* The checks below are the target: keep them in release builds too. */
#undef NDEBUG
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[CONFIG_ERR_LEN], buf[2048], ini[4096];
	struct config *c = NULL, *back = NULL;
	char *text;
	size_t i;

	if (size > 1 << 20)
		return 0;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0'; /* the parser takes a C string */
	if (config_parse_string(text, "f.ini", &c, err, sizeof(err)) != 0) {
		assert(c == NULL);
		assert(strncmp(err, "f.ini", 5) == 0);
		free(text);
		return 0;
	}
	for (i = 0; i < c->nregions; i++) {
		size_t n =
			config_format_region(&c->regions[i], buf, sizeof(buf));
		size_t o = 0;
		char *line = buf, *nl;

		assert(n < sizeof(buf));
		/* "name X\nkey value\n..." -> "[X]\nkey = value\n..." */
		while ((nl = strchr(line, '\n'))) {
			char *sp = strchr(line, ' ');

			*nl = '\0';
			assert(sp && sp < nl);
			*sp = '\0';
			if (strcmp(line, "name") == 0)
				o += (size_t)snprintf(ini + o, sizeof(ini) - o,
						      "[%s]\n", sp + 1);
			else
				o += (size_t)snprintf(ini + o, sizeof(ini) - o,
						      "%s = %s\n", line,
						      sp + 1);
			line = nl + 1;
		}
		assert(o < sizeof(ini));
		assert(config_parse_string(ini, "back.ini", &back, err,
					   sizeof(err)) == 0);
		assert(back->nregions == 1);
		assert(!strcmp(back->regions[0].name, c->regions[i].name));
		assert(!memcmp(&back->regions[0].lim, &c->regions[i].lim,
			       sizeof(back->regions[0].lim)));
		assert(back->regions[0].mode == c->regions[i].mode &&
		       back->regions[0].owner == c->regions[i].owner &&
		       back->regions[0].read_only == c->regions[i].read_only);
		config_free(back);
		back = NULL;
	}
	config_free(c);
	free(text);
	return 0;
}
