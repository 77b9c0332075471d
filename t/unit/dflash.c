/*
 * dflash: the tiny DFlash2 drafter of t/data/dflash attached to model A
 * (../shared/models/A, or MEMRA_MODEL_A) against z-lab's reference
 * (t/data/dflash/refs.safetensors, tools/make-dflash-fixture.py): one
 * drafter forward given the reference taps (its rows, logits, each row's
 * candidates, the selector's edge scores and its greedy path), the
 * trunk's own taps against transformers' hidden states, the same drafter
 * read from our GGUF conversion, and a drafter that does not fit its
 * trunk refused by name.  Skipped without model A.
 */
#include <stdlib.h>

#include "backend.h"
#include "model.h"
#include "safetensors.h"
#include "state.h"
#include "test.h"
#include "util.h"

enum { P = 24, B = 8, K = 8, NE = 384, NV = 8192, NT = 2 };

static struct backend *be;
static struct safetensors *refs;
static const char *dir_a;

/* Reference tensor name as floats (F32) or ints (I32), n elements checked. */
static const void *
ref(const char *name, int64_t n)
{
	const struct safetensors_tensor *t = safetensors_find(refs, name);

	if (t == NULL || t->n_elem != n) {
		printf("#   refs.safetensors: '%s' missing or not %lld values\n", name, (long long)n);
		exit(1);
	}
	return t->data;
}

/* Model A with the fixture drafter at precision prec (NULL: the default). */
static struct model *
open_a(const char *drafter, const char *prec, char *err)
{
	struct model_options o = { .dflash = drafter, .dflash_prec = prec };

	return model_open_opts(dir_a, be, &o, err);
}

static double
max_diff(const float *a, const float *b, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = fabs(a[i] - b[i]) > m ? fabs(a[i] - b[i]) : m;
	return m;
}

/* The drafter's block at P given the reference taps, fed in two context passes. */
static int
draft_from_ref_taps(struct model *md, float *hidden, float *logits, int32_t *cand, float *lat)
{
	const float *taps = ref("taps", (int64_t)P * NT * NE);
	const int32_t *tok = ref("tokens", P + 1);
	struct state *ds = model_dflash_state(md, 64, NULL);
	struct model_dflash_out o = { hidden, logits, lat, cand };
	int rc = ds == NULL || model_dflash_context(md, ds, 0, taps, 10) != 0 ||
	    model_dflash_context(md, ds, 10, taps + (size_t)10 * NT * NE, P - 10) != 0 ||
	    model_dflash_draft(md, ds, P, tok[P], &o) != 0;

	if (rc)
		printf("#   %s\n", model_errmsg(md));
	state_free(ds);
	return rc ? -1 : 0;
}

/* The greedy walk over the lattice: row t's pick after the previous row's. */
static void
walk(const int32_t *cand, const float *lat, int32_t *path, float *scores)
{
	int prev = 0;

	for (int t = 0; t < B - 1; t++) {
		const float *row = lat + ((size_t)t * K + prev) * K;
		int best = 0;

		for (int b = 1; b < K; b++)
			best = row[b] > row[best] ? b : best;
		memcpy(scores + (size_t)t * K, row, K * sizeof *row);
		path[t] = cand[t * K + best];
		prev = best;
	}
}

static void
check_against_reference(struct model *md, double tol)
{
	float *hidden = malloc(B * NE * 4), *logits = malloc((size_t)(B - 1) * NV * 4);
	float *lat = malloc((B - 1) * K * K * 4), scores[(B - 1) * K];
	int32_t cand[(B - 1) * K], path[B - 1];

	CHECK(draft_from_ref_taps(md, hidden, logits, cand, lat) == 0);
	CHECK_NEAR(max_diff(hidden, ref("hidden", B * NE), B * NE), 0, tol);
	CHECK_NEAR(max_diff(logits, ref("logits", (B - 1) * NV), (size_t)(B - 1) * NV), 0, tol);
	CHECK(memcmp(cand, ref("cand", (B - 1) * K), sizeof cand) == 0);
	walk(cand, lat, path, scores);
	CHECK(memcmp(path, ref("path", B - 1), sizeof path) == 0);
	CHECK_NEAR(max_diff(scores, ref("scores", (B - 1) * K), (B - 1) * K), 0, tol);
	free(hidden), free(logits), free(lat);
}

TEST(drafter_forward_equals_the_reference_within_1e_4)
{
	char err[UTIL_ERRLEN];
	struct model *md = open_a("t/data/dflash/d2", "f32", err);

	CHECK(md != NULL);
	if (md == NULL) {
		printf("#   %s\n", err);
		return;
	}
	CHECK(model_dflash(md)->n_tap == NT && model_dflash(md)->taps[0] == 2 &&
	    model_dflash(md)->taps[1] == 5 && model_dflash(md)->block == B);
	check_against_reference(md, 1e-4);
	model_close(md);
}

TEST(drafter_from_our_gguf_conversion_is_the_same_drafter)
{
	char err[UTIL_ERRLEN];
	const char *gguf = getenv("DFLASH_GGUF");
	struct model *md = open_a(gguf, "f32", err);

	CHECK(md != NULL);
	if (md == NULL) {
		printf("#   %s\n", err);
		return;
	}
	/* the GGUF's target_layers are llama.cpp's, the HF ids + 1: read back as [2, 5] */
	CHECK(model_dflash(md)->taps[0] == 2 && model_dflash(md)->taps[1] == 5);
	check_against_reference(md, 1e-4);
	model_close(md);
}

TEST(trunk_taps_are_the_tapped_layers_outputs_of_every_row)
{
	char err[UTIL_ERRLEN];
	struct model *md = open_a("t/data/dflash/d2", "f32", err);
	struct state *st = md ? model_state_new(md, 64, 0, NULL) : NULL;
	float *taps = malloc((size_t)P * NT * NE * 4), *part = malloc((size_t)P * NT * NE * 4);
	const float *want = ref("taps", (int64_t)P * NT * NE);
	const int32_t *tok = ref("tokens", P + 1);

	CHECK(st != NULL);
	if (st == NULL)
		goto out;
	/* prefill, then decode: each forward's rows are tapped */
	CHECK(model_forward(md, st, tok, P, MODEL_PREFILL, NULL, NULL) == 0);
	CHECK(model_taps(md, taps, P) == 0);
	CHECK_NEAR(max_diff(taps, want, (size_t)P * NT * NE), 0, 2e-3);
	CHECK(model_taps(md, taps, P + 1) != 0);	/* no more rows than the forward ran */
	state_reset(st);
	CHECK(model_forward(md, st, tok, P - 3, MODEL_PREFILL, NULL, NULL) == 0);
	CHECK(model_taps(md, part, P - 3) == 0);
	for (int i = P - 3; i < P; i++) {
		CHECK(model_forward(md, st, tok + i, 1, 0, NULL, NULL) == 0);
		CHECK(model_taps(md, part + (size_t)i * NT * NE, 1) == 0);
	}
	CHECK_NEAR(max_diff(part, want, (size_t)P * NT * NE), 0, 2e-3);
out:
	state_free(st);
	model_close(md);
	free(taps), free(part);
}

TEST(quantized_drafters_load_and_draft)
{
	/* MEMRA_DFLASH_PREC: q4 is the default; the coarser the type, the more the logits move */
	static const char *const precs[] = { "q4", NULL, "q8", "bf16", "keep" };
	static const double tol[] = { 3, 3, 0.5, 0.1, 0.1 };
	float *lg[5];

	for (int i = 0; i < 5; i++) {
		char err[UTIL_ERRLEN];
		struct model *md = open_a("t/data/dflash/d2", precs[i], err);
		float *lat = malloc((B - 1) * K * K * 4);
		int32_t cand[(B - 1) * K];

		lg[i] = calloc((size_t)(B - 1) * NV, 4);
		CHECK(md != NULL);
		CHECK(md != NULL && draft_from_ref_taps(md, NULL, lg[i], cand, lat) == 0);
		CHECK_NEAR(max_diff(lg[i], ref("logits", (B - 1) * NV), (size_t)(B - 1) * NV), 0,
		    tol[i]);
		model_close(md);
		free(lat);
	}
	CHECK(memcmp(lg[0], lg[1], (size_t)(B - 1) * NV * 4) == 0);
	CHECK(max_diff(lg[0], lg[2], (size_t)(B - 1) * NV) > 0);
	for (int i = 0; i < 5; i++)
		free(lg[i]);
	CHECK(model_dflash_prec("q5") == -2 && model_dflash_prec("keep") == -1);
}

TEST(a_drafter_that_does_not_fit_its_trunk_is_refused_by_name)
{
	char err[UTIL_ERRLEN];

	/* model A itself is no drafter */
	CHECK(open_a(dir_a, "f32", err) == NULL);
	CHECK(strstr(err, "not a DFlash drafter") != NULL);
	/* a tiny qwen35 trunk of another hidden size */
	CHECK(model_open_opts("t/data/tiny/q35-r2", be, &(struct model_options){
	    .dflash = "t/data/dflash/d2", .dflash_prec = "f32" }, err) == NULL);
	CHECK(strstr(err, "drafts for a trunk of hidden size 384") != NULL);
	CHECK(model_open_opts(dir_a, be, &(struct model_options){ .dflash = "t/data/dflash/d2",
	    .draft = "x.gguf" }, err) == NULL);
	CHECK(strstr(err, "two spec programs never coexist") != NULL);
}

int
main(void)
{
	char err[UTIL_ERRLEN];

	if ((be = backend_open("cpu", 2, err)) == NULL ||
	    (refs = safetensors_open("t/data/dflash/refs.safetensors", err)) == NULL) {
		printf("not ok dflash: %s\n", err);
		return 1;
	}
	if ((dir_a = test_model_a("dflash")) != NULL) {
		RUN(drafter_forward_equals_the_reference_within_1e_4);
		if (getenv("DFLASH_GGUF") != NULL)	/* t/dflash.bats converts the drafter */
			RUN(drafter_from_our_gguf_conversion_is_the_same_drafter);
		RUN(trunk_taps_are_the_tapped_layers_outputs_of_every_row);
		RUN(quantized_drafters_load_and_draft);
		RUN(a_drafter_that_does_not_fit_its_trunk_is_refused_by_name);
	}
	safetensors_close(refs);
	backend_close(be);
	return test_summary();
}
