/*
 * lib/image's size policy and resize, lib/vision's prompt bookkeeping: the cases the
 * fixture images of t/vision.bats do not reach.
 */
#include "test.h"

#include "image.h"
#include "model.h"
#include "util.h"
#include "vision.h"

/* transformers' get_aspect_ratio_preserving_size for Gemma-4's patch 16, pool 3 and 280
 * tokens (2520 patches, sides multiples of 48); every size checked against transformers
 * 5.17's function */
TEST(fit_gemma4_sizes)
{
	char err[UTIL_ERRLEN];
	int w, h;

	CHECK(image_fit(1024, 768, 16, 3, 280, &w, &h, err) == 0);
	CHECK_EQ_INT(w, 912); CHECK_EQ_INT(h, 672);	/* 19 x 14 pooled: 266 tokens */
	CHECK(image_fit(512, 512, 16, 3, 280, &w, &h, err) == 0);
	CHECK_EQ_INT(w, 768); CHECK_EQ_INT(h, 768);	/* upscaled to fill: 256 tokens */
	CHECK(image_fit(1920, 1080, 16, 3, 280, &w, &h, err) == 0);
	CHECK_EQ_INT(w, 1056); CHECK_EQ_INT(h, 576);
	/* a side rounding to 0 takes one block, the other floor(ratio) blocks, at most 280 */
	CHECK(image_fit(4000, 10, 16, 3, 280, &w, &h, err) == 0);
	CHECK_EQ_INT(h, 48); CHECK_EQ_INT(w, 280 * 48);
	CHECK(image_fit(10, 300, 16, 3, 280, &w, &h, err) == 0);	/* no side at 0 */
	CHECK_EQ_INT(w, 144); CHECK_EQ_INT(h, 4368);
	CHECK(image_fit(3, 300, 16, 3, 280, &w, &h, err) == 0);
	CHECK_EQ_INT(w, 48); CHECK_EQ_INT(h, 8016);
	CHECK(image_fit(0, 300, 16, 3, 280, &w, &h, err) == -1);
}

/* a constant image stays constant through any resize (the weights sum to one) */
TEST(resize_constant)
{
	char err[UTIL_ERRLEN];
	uint8_t px[7 * 5 * 3];
	struct image in = { 7, 5, px }, out;

	memset(px, 200, sizeof px);
	CHECK(image_resize(&in, 48, 96, &out, err) == 0);
	for (int i = 0; i < 48 * 96 * 3; i++)
		if (out.rgb[i] != 200) {
			FAILF("byte %d is %d", i, out.rgb[i]);
			break;
		}
	image_free(&out);
	CHECK(image_resize(&in, 2, 1, &out, err) == 0);
	CHECK_EQ_INT(out.rgb[0], 200); CHECK_EQ_INT(out.rgb[5], 200);
	image_free(&out);
}

TEST(patches_order)
{
	uint8_t px[4 * 2 * 3];
	struct image img = { 4, 2, px };
	float out[2 * 12];

	for (int i = 0; i < 24; i++)
		px[i] = (uint8_t)i;
	image_patches(&img, 2, out);
	/* patch 0 is pixels (0,0) (1,0) (0,1) (1,1), channel fastest */
	CHECK(out[0] == 0 * (float)(1.0 / 255.0) && out[3] == 3 * (float)(1.0 / 255.0));
	CHECK(out[6] == 12 * (float)(1.0 / 255.0));
	CHECK(out[12] == 6 * (float)(1.0 / 255.0));	/* patch 1 starts at pixel (2,0) */
}

/* a prompt of 12 rows with images at rows 2..4 and 7..9 */
TEST(prompt_cut_keeps_images_whole)
{
	int32_t row[6] = { 2, 3, 4, 7, 8, 9 };
	float x[6] = { 0 };
	struct vision_prompt vp = { .n_rows = 6, .row = row, .x = x, .nt = 1, .bidir = 1 };
	struct model_embd e;

	CHECK_EQ_INT(vision_prompt_cut(&vp, 0, 1), 1);	/* text */
	CHECK_EQ_INT(vision_prompt_cut(&vp, 0, 3), 2);	/* stops before the image */
	CHECK_EQ_INT(vision_prompt_cut(&vp, 0, 5), 5);	/* ends with it */
	CHECK_EQ_INT(vision_prompt_cut(&vp, 2, 1), 3);	/* starts with it: all of it */
	CHECK_EQ_INT(vision_prompt_cut(&vp, 5, 4), 2);
	CHECK_EQ_INT(vision_prompt_cut(&vp, 0, 12), 12);
	vision_prompt_rows(&vp, 3, 6, &e);		/* rows 3..8 */
	CHECK_EQ_INT(e.n, 4);
	CHECK_EQ_INT(e.row[0] - e.base, 0); CHECK_EQ_INT(e.row[3] - e.base, 5);
	CHECK(e.x == x + 1 && e.bidir == 1);
}

int
main(void)
{
	RUN(fit_gemma4_sizes);
	RUN(resize_constant);
	RUN(patches_order);
	RUN(prompt_cut_keeps_images_whole);
	return test_summary();
}
