/*
 * lib/tower: a server's vision tower on a backend of its own.  On the CPU
 * with t/data/gemma4/g4-vision (a tiny Gemma-4 with a vision tower), g4-h512
 * (a text model of another width) and g4-dense (its width, no image
 * markers): the tower opens with its own budget and takes no device memory
 * on the CPU; it fits its own model (the image markers found) and refuses
 * one of another width and one without the markers, naming why; a
 * request's images through it are media_prompt's, bit for bit; a missing
 * tower or device is refused with the reason.
 */
#include "test.h"

#include "backend.h"
#include "media.h"
#include "model.h"
#include "prompt.h"
#include "tower.h"
#include "util.h"
#include "vision.h"

static const char *const fx = "t/data/gemma4/g4-vision";
static const char *const narrow = "t/data/gemma4/g4-h512", *const dense = "t/data/gemma4/g4-dense";

static struct tower *
open_cpu(const char *src, char *err)
{
	struct tower_config c = { src, "cpu", 1, 0, NULL, NULL };

	return tower_open(&c, err);
}

TEST(a_tower_opens_on_the_cpu_with_its_own_budget_and_no_device_memory)
{
	char err[UTIL_ERRLEN];
	struct tower *t = open_cpu(fx, err);

	CHECK(t != NULL);
	if (t == NULL)
		return;
	CHECK(tower_host(t));
	CHECK_EQ_INT(tower_took(t), 0);
	CHECK_EQ_INT(tower_image_tokens(t), vision_hparams(tower_vision(t))->max_tokens);
	CHECK_EQ_STR(tower_src(t), fx);
	tower_close(t);
	tower_close(NULL);
}

TEST(a_tower_fits_its_own_model_and_refuses_another_width_or_no_markers)
{
	const char *const path[3] = { fx, narrow, dense };
	char err[UTIL_ERRLEN], want[UTIL_ERRLEN];
	struct backend *be = backend_open("cpu", 1, err);
	struct tower *t = open_cpu(fx, err);
	struct model *m[3] = { NULL };
	struct prompt *pr[3] = { NULL };
	struct vision_tokens vt = { -1, -1, -1, -1 };
	int ok = t != NULL && be != NULL;

	for (int i = 0; ok && i < 3; i++)
		ok = (m[i] = model_open(path[i], be, err)) != NULL &&
		    (pr[i] = prompt_new(m[i], PROMPT_AUTO, err)) != NULL;
	CHECK(ok);
	if (ok) {
		CHECK_EQ_INT(tower_fits(t, "g", m[0], pr[0], &vt, err), 0);
		CHECK(vt.boi >= 0 && vt.img >= 0 && vt.eoi >= 0);
		CHECK_EQ_INT(tower_fits(t, "n", m[1], pr[1], &vt, err), -1);
		snprintf(want, sizeof want, "%s: a tower for a text width of %d, model 'n' has %d",
		    fx, vision_hparams(tower_vision(t))->n_embd_text, model_hparams(m[1])->n_embd);
		CHECK_EQ_STR(err, want);
		CHECK_EQ_INT(tower_fits(t, "d", m[2], pr[2], &vt, err), -1);
		CHECK_EQ_STR(err, "model 'd': the vocabulary has no '<|image>' token");
	}
	for (int i = 0; i < 3; i++)
		prompt_free(pr[i]), model_close(m[i]);
	tower_close(t);
	backend_close(be);
}

/* The prompt [id 2, img, id 3] with a.png: the tower's rows are media_prompt's on its vision. */
TEST(a_requests_images_through_the_tower_are_media_prompts)
{
	char err[UTIL_ERRLEN], path[256];
	struct backend *be = backend_open("cpu", 1, err);
	struct tower *t = open_cpu(fx, err);
	struct model *m = be ? model_open(fx, be, err) : NULL;
	struct prompt *pr = m ? prompt_new(m, PROMPT_AUTO, err) : NULL;
	struct vision_tokens vt;
	struct vision_prompt a = { 0 }, b = { 0 };
	struct media_image im = { NULL, 0, "messages[0].content[0]" };
	struct media md = { 1, &im, 0 };
	int32_t ids[3] = { 2, 0, 3 }, *oa = NULL, *ob = NULL;
	size_t na = 0, nb = 0;

	CHECK(t != NULL && pr != NULL);
	snprintf(path, sizeof path, "%s/images/a.png", fx);
	im.data = (unsigned char *)util_read_file(path, &im.n, err);
	CHECK(im.data != NULL);
	if (t == NULL || pr == NULL || im.data == NULL ||
	    tower_fits(t, "g", m, pr, &vt, err) != 0)
		goto out;
	md.bytes = im.n, ids[1] = vt.img;
	CHECK_EQ_INT(tower_prompt(t, &md, &vt, ids, 3, &oa, &na, &a, err), 0);
	CHECK_EQ_INT(media_prompt(&md, tower_vision(t), &vt, NULL, 0, ids, 3, &ob, &nb, &b, err),
	    0);
	CHECK(na == nb && na > 3 && oa != NULL && ob != NULL &&
	    memcmp(oa, ob, na * sizeof *oa) == 0);
	CHECK(a.n_rows == b.n_rows && a.n_rows > 0 && a.x != NULL && b.x != NULL &&
	    memcmp(a.x, b.x, (size_t)a.n_rows * a.nt * sizeof *a.x) == 0);
out:
	free(oa), free(ob), free(im.data);
	vision_prompt_free(&a), vision_prompt_free(&b);
	prompt_free(pr), model_close(m), tower_close(t);
	backend_close(be);
}

TEST(a_missing_tower_or_device_is_refused_with_the_reason)
{
	char err[UTIL_ERRLEN];
	struct tower_config c = { fx, "nowhere", 1, 0, NULL, NULL };

	CHECK(open_cpu("/nonexistent-tower", err) == NULL);
	CHECK(strstr(err, "/nonexistent-tower") != NULL);
	CHECK(tower_open(&c, err) == NULL);
	CHECK(err[0] != '\0');
}

int
main(void)
{
	RUN(a_tower_opens_on_the_cpu_with_its_own_budget_and_no_device_memory);
	RUN(a_tower_fits_its_own_model_and_refuses_another_width_or_no_markers);
	RUN(a_requests_images_through_the_tower_are_media_prompts);
	RUN(a_missing_tower_or_device_is_refused_with_the_reason);
	return test_summary();
}
