/*
 * libFuzzer target: image decoding (PNG, JPEG) and Gemma-4's preprocessing must
 * accept or reject any bytes safely: decode within small limits, then the size
 * policy, the resize and the patches of what decoded.
 */
#include <stdint.h>
#include <stdlib.h>

#include "image.h"
#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct image_limits lim = { 2048, 1 << 20 };
	char err[UTIL_ERRLEN];
	struct image img, out;
	int tw, th;

	if (image_decode(data, size, &lim, &img, err) != 0)
		return 0;
	if (image_fit(img.w, img.h, 4, 3, 70, &tw, &th, err) == 0 &&
	    image_resize(&img, tw, th, &out, err) == 0) {
		float *px = malloc((size_t)tw * th * 3 * sizeof *px);

		if (px != NULL)
			image_patches(&out, 4, px);
		free(px);
		image_free(&out);
	}
	image_free(&img);
	return 0;
}
