/*
 * libFuzzer target: any bytes are a row of some type to lib/quant.  The
 * first byte picks the type; the rest, cut to whole blocks, is dequantized
 * and dotted (both paths) with an activation made from the same bytes;
 * the floats, if finite, are quantized back.  Nothing may crash or read
 * past the row.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct quant_traits *tr;
	int t, at, i;
	int64_t n;
	size_t nb;
	float *y, *x;
	void *xq, *q, *w;
	char err[UTIL_ERRLEN];

	if (size < 1)
		return 0;
	t = data[0] % QUANT_TYPE_COUNT;
	if (!quant_valid(t) || !quant_can_dequantize(t))
		return 0;
	tr = quant_traits(t);
	nb = (size - 1) / tr->size;
	if (nb > 64)
		nb = 64;
	n = (int64_t)nb * tr->blck;
	if (n == 0)
		return 0;
	/* an exact-size copy, so ASan sees any read past the row */
	w = malloc(nb * tr->size);
	y = malloc(n * sizeof(float));
	x = malloc(n * sizeof(float));
	q = malloc(quant_row_size(t, n) + 1);
	xq = malloc(n * 4 + 512);
	memcpy(w, data + 1, nb * tr->size);
	if (quant_dequantize_row(t, w, y, n) != 0)
		abort();
	for (i = 0; i < n; i++)
		x[i] = (float)((data[1 + i % (size - 1)] & 0x7F) - 64) / 16.0f;
	if ((at = quant_vec_dot_type(t)) >= 0) {
		if (quant_quantize_act(t, x, xq, n) != 0)
			abort();
		(void)quant_vec_dot(t, n, w, xq);
		(void)quant_dot_f32(t, n, w, x);
	}
	if (quant_can_quantize(t))
		(void)quant_quantize_row(t, y, q, n, err);
	free(w);
	free(y);
	free(x);
	free(q);
	free(xq);
	return 0;
}
