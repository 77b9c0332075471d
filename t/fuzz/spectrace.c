/*
 * libFuzzer target: the acceptance trace parser (run-spec --trace-in) must
 * reject or accept any bytes safely, and what it accepts must write out as
 * a trace it reads back to the same text.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spectrace.h"
#include "util.h"

static char *
written(const struct spectrace *t, size_t *n)
{
	char *buf = NULL;
	FILE *fp = open_memstream(&buf, n);

	if (fp == NULL)
		return NULL;
	spectrace_write(t, fp);
	fclose(fp);
	return buf;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[UTIL_ERRLEN], *a, *b;
	struct spectrace *t = spectrace_parse((const char *)data, size, err), *u;
	size_t na = 0, nb = 0;

	if (t == NULL)
		return 0;
	if ((a = written(t, &na)) == NULL)
		abort();
	if ((u = spectrace_parse(a, na, err)) == NULL)
		abort();	/* what it wrote does not read back */
	if ((b = written(u, &nb)) == NULL || na != nb || memcmp(a, b, na) != 0)
		abort();	/* nor to the same text */
	free(a), free(b);
	spectrace_free(u), spectrace_free(t);
	return 0;
}
