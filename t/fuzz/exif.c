/*
 * libFuzzer target: the EXIF orientation reader of lib/image (a JPEG's joined Exif
 * segments: a TIFF header and directories of untrusted offsets and counts) and the
 * XMP one must take any bytes, and answer within their ranges.
 */
#include <stdint.h>
#include <stdlib.h>

#include "image.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int o = image_exif_orientation(data, size), x = image_xmp_orientation(data, size);

	if (o < -2 || o > 8 || x < -1 || x > 9)
		abort();
	return 0;
}
