/*
 * image-prep: lib/image's decode and Gemma-4 preprocessing of image files, for the
 * tests that compare them with transformers' image processor (t/vision.bats).
 *   image-prep [-d] [-p PATCH] [-k POOL] [-m MAX_TOKENS] [-o OUT.ppm] FILE...
 * One line a file: "NAME WxH -> W'xH' grid GWxGH tokens N sha256 HEX", the sha256 of
 * the resized RGB bytes (row-major, channel fastest); -o writes the last file's
 * resized image as a binary PPM; -d: "NAME WxH sha256 HEX" of the decoded image
 * instead (turned upright by its EXIF orientation, before any resize).  Defaults:
 * patch 16, pool 3, 280 tokens.  Exit 0, 1 on a failure (the file's line is "NAME
 * error: WHY"), 2 on misuse.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "image.h"
#include "sha256.h"
#include "util.h"

/* The decoded image of path: "NAME WxH sha256 HEX"; 0, or -1 (its line says why). */
static int
decoded(const char *path)
{
	char err[UTIL_ERRLEN], hex[65];
	struct image img = { 0 };
	struct sha256 h;
	size_t n;
	char *buf = util_read_file(path, &n, err);
	int rc = -1;

	if (buf == NULL || image_decode(buf, n, NULL, &img, err) != 0)
		printf("%s error: %s\n", base_name(path), err);
	else {
		sha256_init(&h);
		sha256_update(&h, img.rgb, (size_t)img.w * img.h * 3);
		sha256_hex(&h, hex);
		printf("%s %dx%d sha256 %s\n", base_name(path), img.w, img.h, hex);
		rc = 0;
	}
	free(buf);
	image_free(&img);
	return rc;
}

static int
prep(const char *path, int patch, int pool, int max, const char *ppm)
{
	char err[UTIL_ERRLEN], hex[65];
	struct image img = { 0 }, out = { 0 };
	struct sha256 h;
	size_t n;
	char *buf = util_read_file(path, &n, err);
	int tw, th, rc = -1;

	if (buf == NULL || image_decode(buf, n, NULL, &img, err) != 0 ||
	    image_fit(img.w, img.h, patch, pool, max, &tw, &th, err) != 0 ||
	    image_resize(&img, tw, th, &out, err) != 0) {
		printf("%s error: %s\n", base_name(path), err);
		goto done;
	}
	sha256_init(&h);
	sha256_update(&h, out.rgb, (size_t)out.w * out.h * 3);
	sha256_hex(&h, hex);
	printf("%s %dx%d -> %dx%d grid %dx%d tokens %d sha256 %s\n", base_name(path), img.w,
	    img.h, tw, th, tw / patch, th / patch, tw / patch * (th / patch) / (pool * pool), hex);
	if (ppm != NULL) {
		FILE *fp = fopen(ppm, "wb");
		if (fp == NULL || fprintf(fp, "P6\n%d %d\n255\n", out.w, out.h) < 0 ||
		    fwrite(out.rgb, 3, (size_t)out.w * out.h, fp) != (size_t)out.w * out.h ||
		    fclose(fp) != 0)
			goto done;
	}
	rc = 0;
done:
	free(buf);
	image_free(&img), image_free(&out);
	return rc;
}

int
main(int argc, char *argv[])
{
	int64_t v;
	int ch, patch = 16, pool = 3, max = 280, status = 0, dec = 0;
	const char *ppm = NULL;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "dp:k:m:o:")) != -1) {
		if (ch == 'o' || ch == 'd') {
			ppm = ch == 'o' ? optarg : ppm, dec |= ch == 'd';
			continue;
		}
		if (ch == '?' || util_parse_i64(optarg, 1, 4096, &v) != 0)
			die(2, "usage: image-prep [-d] [-p PATCH] [-k POOL] [-m MAX] [-o OUT.ppm] "
			    "FILE...");
		*(ch == 'p' ? &patch : ch == 'k' ? &pool : &max) = (int)v;
	}
	for (int i = optind; i < argc; i++)
		status |= (dec ? decoded(argv[i]) : prep(argv[i], patch, pool, max,
		    i == argc - 1 ? ppm : NULL)) != 0;
	return finish(status);
}
