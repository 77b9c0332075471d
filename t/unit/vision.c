/*
 * lib/vision's reserved working memory (vision_reserve): a tower that holds
 * the buffers of its largest image gives every image the soft tokens a
 * tower without them gives, bit for bit, whatever image ran in them before
 * and whether or not the image fits them; on the tiny random tower of
 * t/data/gemma4/g4-vision and its images.
 */
#include "test.h"

#include "backend.h"
#include "util.h"
#include "vision.h"

static const char *const fx = "t/data/gemma4/g4-vision";

/* Image file name of the fixture, prepared for budget soft tokens (0: the tower's). */
static void
prepare(const struct vision *v, const char *name, int budget, struct vision_image *img)
{
	char path[512], err[UTIL_ERRLEN];
	size_t n;
	char *buf;

	snprintf(path, sizeof path, "%s/images/%s", fx, name);
	buf = util_read_file(path, &n, err);
	if (buf == NULL || vision_prepare(v, buf, n, NULL, budget, img, err) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		exit(1);
	}
	free(buf);
}

/* img's soft tokens from v (malloc'd; NULL on failure, the reason printed). */
static float *
encode(struct vision *v, const struct vision_image *img)
{
	float *out = malloc((size_t)img->n_tok * vision_hparams(v)->n_embd_text * sizeof *out);

	if (out != NULL && vision_encode(v, img, out) != 0) {
		printf("#   encode: %s\n", vision_errmsg(v));
		free(out);
		out = NULL;
	}
	return out;
}

/*
 * A CPU backend and two towers of the fixture on it (*v[0], *v[1]); 0, or
 * -1 (counted as a failure) with whatever opened closed.
 */
static int
two_towers(struct backend **be, struct vision *v[2])
{
	char err[UTIL_ERRLEN];

	v[0] = v[1] = NULL;
	if ((*be = backend_open("cpu", 1, err)) == NULL) {
		FAILF("backend: %s", err);
		return -1;
	}
	if ((v[0] = vision_open(fx, *be, err)) == NULL || (v[1] = vision_open(fx, *be, err)) == NULL) {
		FAILF("%s: %s", fx, err);
		vision_close(v[0]), backend_close(*be);
		return -1;
	}
	return 0;
}

static void
close_towers(struct backend *be, struct vision *v[2])
{
	vision_close(v[0]), vision_close(v[1]);
	backend_close(be);
}

static int
same(const float *a, const float *b, const struct vision_image *img, int n_embd_text)
{
	return a != NULL && b != NULL &&
	    memcmp(a, b, (size_t)img->n_tok * n_embd_text * sizeof *a) == 0;
}

/*
 * Three images of three grids through a tower that reserved its budget, in
 * an order that leaves a larger image's rows in the buffers before a smaller
 * one, against each image alone through a tower that reserved nothing.
 */
TEST(a_reserved_tower_encodes_every_image_as_an_unreserved_one)
{
	static const char *const name[] = { "wide.png", "a.png", "b.jpg", "wide.png", "a.png" };
	struct backend *be;
	struct vision *v[2], *plain, *held;
	int nt;

	if (two_towers(&be, v) != 0)
		return;
	plain = v[0], held = v[1];
	nt = vision_hparams(plain)->n_embd_text;
	CHECK_EQ_INT(vision_reserve(held, 0), 0);
	CHECK_EQ_INT(vision_reserve(held, 0), 0);	/* again: kept, not grown */
	for (size_t i = 0; i < sizeof name / sizeof *name; i++) {
		struct vision_image img;
		float *a, *b;

		prepare(plain, name[i], 0, &img);
		a = encode(plain, &img), b = encode(held, &img);
		if (!same(a, b, &img, nt))
			FAILF("%s (%dx%d patches, image %zu): the reserved tower's soft tokens differ",
			    name[i], img.gw, img.gh, i);
		free(a), free(b);
		vision_image_free(&img);
	}
	close_towers(be, v);
}

/*
 * A tower that reserved a smaller budget than an image needs encodes it in
 * buffers of its own, and one that reserved 1 soft token still holds a grid
 * (a single pooled block); the budget's images come out the same.
 */
TEST(an_image_past_the_reserved_budget_gets_buffers_of_its_own)
{
	struct backend *be;
	struct vision *v[2], *plain, *small;
	struct vision_image big, little;
	float *a, *b;
	int nt;

	if (two_towers(&be, v) != 0)
		return;
	plain = v[0], small = v[1];
	nt = vision_hparams(plain)->n_embd_text;
	CHECK_EQ_INT(vision_reserve(small, 1), 0);
	prepare(plain, "a.png", 0, &big);
	prepare(plain, "a.png", 1, &little);
	CHECK_EQ_INT(little.n_tok, 1);
	CHECK(big.n_tok > little.n_tok);
	a = encode(plain, &big), b = encode(small, &big);
	CHECK(same(a, b, &big, nt));
	free(a), free(b);
	a = encode(plain, &little), b = encode(small, &little);
	CHECK(same(a, b, &little, nt));
	free(a), free(b);
	CHECK_EQ_INT(vision_reserve(small, 0), 0);	/* grown to the tower's own budget */
	a = encode(plain, &big), b = encode(small, &big);
	CHECK(same(a, b, &big, nt));
	free(a), free(b);
	vision_image_free(&big), vision_image_free(&little);
	close_towers(be, v);
}

int
main(void)
{
	RUN(a_reserved_tower_encodes_every_image_as_an_unreserved_one);
	RUN(an_image_past_the_reserved_budget_gets_buffers_of_its_own);
	return test_summary();
}
