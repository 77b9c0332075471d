/*
 * libFuzzer target: a revision listing (first byte even) or a trees/ cache
 * file (odd), then every kind of selection over what parsed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"
#include "util.h"

static void
select_all(const struct hub_listing *l)
{
	static const char *specs[] = { "hf:o/r:gguf", "hf:o/r:-00001-of-", "hf:o/r", "hfds:o/d:*.json*",
	    "hf:o/r/a-00002-of-00003.gguf" };
	char *inc[] = { "*.gguf", "sub/" };
	struct hub_opts o;
	struct hub_spec s;
	char err[UTIL_ERRLEN];
	size_t i, *sel, n;
	long first;

	hub_opts_init(&o);
	o.include = inc, o.ninclude = 2;
	for (i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		if (hub_spec_parse(&s, specs[i], err) != 0)
			__builtin_trap();
		if (hub_select(l, &s, &o, &sel, &n, &first, err) == 0 && (n == 0 || first >= (long)n))
			__builtin_trap();
		free(sel);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hub_listing l;
	char err[UTIL_ERRLEN];

	if (size < 1)
		return 0;
	if (hub_listing_parse(&l, (const char *)data + 1, size - 1, data[0] & 1, err) == 0)
		select_all(&l);
	hub_listing_free(&l);
	return 0;
}
