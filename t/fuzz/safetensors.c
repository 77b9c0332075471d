/* libFuzzer target: any bytes as a safetensors file must be rejected or parsed safely,
 * and a parsed file's tensors must lie inside the input. */
#include <stdint.h>
#include <stdlib.h>

#include "safetensors.h"
#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[UTIL_ERRLEN];
	struct safetensors *st = safetensors_open_mem(data, size, err);
	size_t i;

	if (st == NULL)
		return 0;
	for (i = 0; i < safetensors_count(st); i++) {
		const struct safetensors_tensor *t = safetensors_at(st, i);
		const uint8_t *p = t->data;

		if (p < data || p + t->nbytes > data + size || safetensors_find(st, t->name) != t)
			abort();
	}
	safetensors_close(st);
	return 0;
}
