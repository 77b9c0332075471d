/*
 * image: PNG and JPEG images decoded to 8-bit RGB (libpng, libjpeg-turbo)
 * and made into what a vision tower takes, as transformers' image
 * processors make it: the size a patch budget allows (Gemma-4's
 * aspect-ratio-preserving policy), the resize (torchvision's antialiased
 * bicubic on uint8 images), the rescale to [0, 1] and the patches.
 *
 * Decoding follows transformers' load_image (image_utils: PIL's
 * ImageOps.exif_transpose, then image.convert("RGB")): a JPEG is turned
 * upright as its EXIF orientation says (image_exif_orientation; where its
 * EXIF has none, its XMP's tiff:Orientation); palette and gray images are
 * expanded, an alpha channel is dropped (not composited), 16-bit samples
 * keep their high byte, no gamma or colour profile is applied.  A PNG's
 * EXIF (eXIf, or in text chunks) is not read.  CMYK JPEGs are refused.
 */
#ifndef MEMRA_IMAGE_H
#define MEMRA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

struct image {
	int	w, h;
	uint8_t	*rgb;		/* [h][w][3] */
};

/* The largest image image_decode accepts: a side, and all its pixels. */
struct image_limits {
	int	max_side;
	int64_t	max_pixels;
};
#define IMAGE_MAX_SIDE		16384
#define IMAGE_MAX_PIXELS	(64 * 1024 * 1024)

/*
 * Decode n bytes of a PNG or JPEG file (told apart by their signatures)
 * into *img (image_free frees it).  lim NULL: IMAGE_MAX_SIDE and
 * IMAGE_MAX_PIXELS.  An image past the limits is refused from its header,
 * before any pixel is allocated.  0, or -1 with the reason in err
 * (UTIL_ERRLEN), *img then empty: "not a PNG or JPEG image", "image of
 * WxH: larger than ...", "PNG: ..." / "JPEG: ..." for a damaged or
 * truncated file.
 */
int	image_decode(const void *buf, size_t n, const struct image_limits *lim,
	    struct image *img, char *err);
void	image_free(struct image *);

/*
 * The EXIF orientation of an EXIF block p[n] (a JPEG's APP1 Exif
 * segments, "Exif\0\0" then a TIFF header and directories), as Pillow 13
 * reads it (Image.getexif): up to two "Exif\0\0" skipped, a classic TIFF
 * header (II or MM), the first entry of tag 274 in IFD0 that loads (a type
 * Pillow reads, its data within the block; a truncated out-of-line value
 * ends the directory), its first value.  1..8: the orientation (a value
 * equal to that number, an integer, float or fraction); 0: an entry whose
 * value is none of them (bytes, text, another number); -1: no entry (an
 * empty block too); -2: no TIFF header (a BigTIFF one too: Pillow raises).
 * Any bytes are safe.
 */
int	image_exif_orientation(const void *p, size_t n);

/*
 * The orientation an XMP packet p[n] gives, as Pillow reads it where the
 * EXIF has none: the digit of its first tiff:Orientation="D or
 * tiff:Orientation>D (0..9), or -1 when there is none.
 */
int	image_xmp_orientation(const void *p, size_t n);

/*
 * Gemma-4's target size for a w x h image (transformers'
 * get_aspect_ratio_preserving_size): the largest size of sides divisible
 * by patch * pool whose patches number at most max_tokens * pool^2,
 * scaled from w x h keeping its aspect ratio (upscaling small images); a
 * side that rounds to zero becomes patch * pool, the other then
 * min(floor(ratio) * patch * pool, max_tokens * patch * pool).  *tw, *th;
 * 0, or -1 with err when both sides round to zero or the result is past
 * the budget (as transformers raises).
 */
int	image_fit(int w, int h, int patch, int pool, int max_tokens, int *tw, int *th,
	    char *err);

/*
 * in resized to w x h into *out (malloc'd; image_free), as torchvision's
 * resize(antialias=True, BICUBIC) does a uint8 image on the CPU: PyTorch's
 * separable filter (Keys cubic, a = -0.5, widened by the scale when
 * downsampling) with weights rounded to int16 at the precision the
 * largest allows, the horizontal pass (when the width changes) into a
 * uint8 image, then the vertical one, each sum rounded and clamped to
 * 0..255.  A side that does not change is not filtered.  0, or -1 with
 * err (out of memory).
 */
int	image_resize(const struct image *in, int w, int h, struct image *out, char *err);

/*
 * The patches of img (w and h multiples of patch) as the processor's
 * pixel_values hold them: patch rows outer, each patch [py][px][c]
 * (channel fastest), every value the byte times float(1/255).  out:
 * [(h/patch) * (w/patch)][patch * patch * 3].
 */
void	image_patches(const struct image *img, int patch, float *out);

#endif
