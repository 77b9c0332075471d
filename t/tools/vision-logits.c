/*
 * vision-logits: the logits of every position of a prompt with images, for the tests
 * that compare them with transformers (t/vision.bats).
 *   vision-logits [-t threads] [-s] [-e] [-m MAX_TOKENS] -i IMAGE [-i IMAGE ...] MODEL VISION OUT ID...
 * IDs are the prompt as the model sees it, each image as <|image> N x <|image|>
 * <image|>; the images (PNG or JPEG files, decoded and preprocessed by lib/image) are
 * encoded by the tower VISION (an HF checkpoint directory or an mmproj GGUF) and must
 * give those N soft tokens.  One prefill forward (-s: the text rows one at a time and
 * each image in one forward, as a token-by-token decode runs); writes
 * [n_ids][n_vocab] float32 to OUT ('-' is stdout); -e: the images' soft tokens instead,
 * [rows][n_embd_text] float32 in prompt order, no forward.  Exit 0, 1 on a failure, 2 on
 * misuse.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "state.h"
#include "tokenizer.h"
#include "util.h"
#include "vision.h"

#define MAX_IMAGES 16

/* ids[n] with each <|image> <|image|>... <image|> run back to one <|image|> marker. */
static size_t
markers(const struct vision_tokens *vt, const int32_t *ids, size_t n, int32_t *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (ids[i] == vt->boi && i + 1 < n && ids[i + 1] == vt->img) {
			while (i + 1 < n && ids[i + 1] == vt->img)
				i++;
			if (i + 1 < n && ids[i + 1] == vt->eoi)
				i++;
			out[o++] = vt->img;
		} else
			out[o++] = ids[i];
	}
	return o;
}

static int
forward(struct model *md, struct state *st, const struct vision_prompt *vp,
    const int32_t *ids, int n, int steps, float *lg)
{
	size_t nv = (size_t)model_hparams(md)->n_vocab;

	for (int r = 0; r < n;) {
		int m = steps ? vision_prompt_cut(vp, r, 1) : n;
		struct model_embd e;

		vision_prompt_rows(vp, r, m, &e);
		if ((e.n > 0 && model_inject(md, &e) != 0) ||
		    model_forward(md, st, ids + r, m, MODEL_PREFILL | MODEL_LOGITS_ALL,
		    lg + r * nv, NULL) != 0)
			return -1;
		r += m;
	}
	return 0;
}

int
main(int argc, char *argv[])
{
	const char *imgs[MAX_IMAGES];
	char err[UTIL_ERRLEN];
	int ch, nt = 0, n_img = 0, steps = 0, max = 0, soft = 0;
	int64_t v;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "t:sei:m:")) != -1) {
		switch (ch) {
		case 't': case 'm':
			if (util_parse_i64(optarg, 0, 4096, &v) != 0)
				die(2, "-%c %s: not a count", ch, optarg);
			*(ch == 't' ? &nt : &max) = (int)v;
			break;
		case 's': steps = 1; break;
		case 'e': soft = 1; break;
		case 'i':
			if (n_img == MAX_IMAGES)
				die(2, "more than %d images", MAX_IMAGES);
			imgs[n_img++] = optarg;
			break;
		default: die(2, "usage: vision-logits [-t N] [-s] [-e] [-m MAX] -i IMAGE... MODEL VISION OUT ID...");
		}
	}
	argc -= optind, argv += optind;
	if (argc < 4)
		die(2, "usage: vision-logits [-t N] [-s] [-e] [-m MAX] -i IMAGE... MODEL VISION OUT ID...");
	int n = argc - 3;
	int32_t *ids = malloc(n * sizeof *ids), *mk = malloc(n * sizeof *mk), *ex = NULL;
	for (int i = 0; i < n; i++) {
		if (util_parse_i64(argv[3 + i], 0, INT32_MAX, &v) != 0)
			die(2, "'%s': not a token id", argv[3 + i]);
		ids[i] = (int32_t)v;
	}
	struct backend *be = backend_open("cpu", nt, err);
	struct model *md = be ? model_open(argv[0], be, err) : NULL;
	struct vision *vis = md ? vision_open(argv[1], be, err) : NULL;
	struct tokenizer *tok = vis ? model_tokenizer(md, err) : NULL;
	struct vision_tokens vt;
	struct vision_image vi[MAX_IMAGES];
	struct vision_prompt vp;
	size_t n_ex;

	if (tok == NULL || vision_tokens(tok, &vt, err) != 0)
		die(1, "%s", err);
	for (int i = 0; i < n_img; i++) {
		size_t len;
		char *buf = util_read_file(imgs[i], &len, err);
		if (buf == NULL || vision_prepare(vis, buf, len, NULL, max, &vi[i], err) != 0)
			die(1, "%s: %s", imgs[i], err);
		free(buf);
	}
	size_t nm = markers(&vt, ids, n, mk);
	if (vision_prompt_build(vis, &vt, mk, nm, vi, n_img, &ex, &n_ex, &vp, err) != 0)
		die(1, "%s", err);
	if (n_ex != (size_t)n || memcmp(ex, ids, n * sizeof *ids) != 0)
		die(1, "the images give another prompt (%zu ids, not %d): a soft-token count "
		    "differs", n_ex, n);
	size_t nv = (size_t)model_hparams(md)->n_vocab;
	float *lg = malloc(n * nv * sizeof *lg);
	struct state *st = model_state_new(md, n + 1, 0, err);
	if (lg == NULL || st == NULL)
		die(1, "%s", err);
	if (!soft && forward(md, st, &vp, ids, n, steps, lg) != 0)
		die(1, "%s", model_errmsg(md));
	const float *out = soft ? vp.x : lg;
	size_t no = soft ? (size_t)vp.n_rows * vp.nt : n * nv;
	FILE *fp = strcmp(argv[2], "-") == 0 ? stdout : fopen(argv[2], "wb");
	if (fp == NULL || fwrite(out, sizeof *out, no, fp) != no || fflush(fp) != 0)
		die(1, "%s: write failed", argv[2]);
	if (fp != stdout)
		fclose(fp);
	for (int i = 0; i < n_img; i++)
		vision_image_free(&vi[i]);
	vision_prompt_free(&vp);
	state_free(st);
	free(lg), free(ids), free(mk), free(ex);
	tokenizer_free(tok);
	vision_close(vis);
	model_close(md);
	backend_close(be);
	return 0;
}
