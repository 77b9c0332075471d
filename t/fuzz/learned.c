/* libFuzzer target: the .learned file parser (MEMRA_GEMMA_TRIM_ADAPT's slots). */
#include <stdint.h>

#include "learned.h"
#include "ranks.h"
#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int32_t ids[] = { 0, 1, 2, 3, 5, 8, 13, 21 };
	struct ranks r = { (int32_t *)ids, 8, 1000 };
	char err[UTIL_ERRLEN];
	int lines;

	for (int n = 1; n <= 64; n *= 8) {	/* fewer slots than lines, and more */
		struct learned *l = learned_new(n, &r, 1000, err);

		if (l == NULL)
			return 0;
		if (learned_parse(l, (const char *)data, size, &lines, err) == 0) {
			int32_t t[] = { 4, 999, 4, 7 };

			learned_observe(l, t, 4);
		}
		learned_free(l);
	}
	return 0;
}
