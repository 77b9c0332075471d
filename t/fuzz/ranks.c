/* libFuzzer target: the .txt rank-list parser and the .gguf d2t reader. */
#include <stdint.h>

#include "gguf.h"
#include "ranks.h"
#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[UTIL_ERRLEN];
	struct gguf *g;

	ranks_free(ranks_parse_txt((const char *)data, size, 0, err));
	ranks_free(ranks_parse_txt((const char *)data, size, 1000, err));
	if ((g = gguf_open_mem(data, size, "fuzz", err)) != NULL) {
		ranks_free(ranks_from_gguf(g, 1000, err));
		gguf_close(g);
	}
	return 0;
}
