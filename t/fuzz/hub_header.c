/* libFuzzer target: response header lines from a hub (or anything posing as one). */
#include <stdint.h>
#include <string.h>

#include "hub.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *nl;
	struct hub_meta m;

	hub_meta_reset(&m);
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		nl = nl != NULL ? nl + 1 : end;
		hub_meta_header(&m, p, (size_t)(nl - p));
		p = nl;
	}
	/* every field stays a terminated string within its buffer */
	if (strlen(m.commit) >= sizeof m.commit || strlen(m.etag) >= sizeof m.etag ||
	    strlen(m.linked_etag) >= sizeof m.linked_etag || strlen(m.error_code) >= sizeof m.error_code)
		__builtin_trap();
	return 0;
}
