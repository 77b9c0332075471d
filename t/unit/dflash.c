/*
 * dflash: the tiny DFlash2 drafter of t/data/dflash attached to model A
 * (../shared/models/A, or MEMRA_MODEL_A) against z-lab's reference
 * (t/data/dflash/refs.safetensors, tools/make-dflash-fixture.py): one
 * drafter forward given the reference taps (its rows, logits, each row's
 * candidates, the selector's edge scores and its greedy path), for d2
 * (a sliding layer of window 16, a full-attention one) and its variant w8
 * (both sliding, window 8); the trunk's own taps against transformers'
 * hidden states, the same drafter read from our GGUF conversion, and a
 * drafter that does not fit its trunk refused by name.  The context cache
 * whose sliding layers are rings drafts what one keeping every position
 * drafts, bit for bit, over contexts of several windows; the forward's
 * path for a device's memory (the CPU backend marked non-host) drafts what
 * the host path does, bit for bit.  Skipped without model A.
 */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"
#include "backend_impl.h"
#include "model.h"
#include "safetensors.h"
#include "state.h"
#include "test.h"
#include "util.h"

enum { P = 24, B = 8, K = 8, NE = 384, NV = 8192, NT = 2 };

static struct backend *be;
static struct safetensors *refs;
static const char *dir_a;
static char w8[] = "/tmp/memra-dflash-XXXXXX";	/* the w8 variant: its config, d2's weights */

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

/* The drafter's block at P given the reference taps, fed in two context passes (the first
 * of `cut` rows; 0: one pass). */
static int
draft_from_ref_taps(struct model *md, int cut, float *hidden, float *logits, int32_t *cand,
    float *lat)
{
	const float *taps = ref("taps", (int64_t)P * NT * NE);
	const int32_t *tok = ref("tokens", P + 1);
	struct state *ds = model_dflash_state(md, 64, 0, NULL);
	struct model_dflash_out o = { hidden, logits, lat, cand };
	int rc = ds == NULL || model_dflash_context(md, ds, 0, taps, cut) != 0 ||
	    model_dflash_context(md, ds, cut, taps + (size_t)cut * NT * NE, P - cut) != 0 ||
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

/* The reference tensor pre + name (pre "w8." for the variant's). */
static const void *
vref(const char *pre, const char *name, int64_t n)
{
	char k[64];

	snprintf(k, sizeof k, "%s%s", pre, name);
	return ref(k, n);
}

/* md's block against the reference's (pre: its tensors' prefix; the variant has no
 * logits of its own: its rows stand for them), context fed in parts cut at `cut`. */
static void
check_against_reference(struct model *md, double tol, const char *pre, int cut)
{
	float *hidden = malloc(B * NE * 4), *logits = malloc((size_t)(B - 1) * NV * 4);
	float *lat = malloc((B - 1) * K * K * 4), scores[(B - 1) * K];
	int32_t cand[(B - 1) * K], path[B - 1];

	CHECK(draft_from_ref_taps(md, cut, hidden, logits, cand, lat) == 0);
	CHECK_NEAR(max_diff(hidden, vref(pre, "hidden", B * NE), B * NE), 0, tol);
	if (pre[0] == '\0')
		CHECK_NEAR(max_diff(logits, ref("logits", (B - 1) * NV), (size_t)(B - 1) * NV), 0,
		    tol);
	CHECK(memcmp(cand, vref(pre, "cand", (B - 1) * K), sizeof cand) == 0);
	walk(cand, lat, path, scores);
	CHECK(memcmp(path, vref(pre, "path", B - 1), sizeof path) == 0);
	CHECK_NEAR(max_diff(scores, vref(pre, "scores", (B - 1) * K), (B - 1) * K), 0, tol);
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
	check_against_reference(md, 1e-4, "", 10);
	model_close(md);
}

/* The variant: every layer sliding, a window of 8 (rings of 15 rows); its 24 context
 * rows in one pass, the 9 no ring keeps never run. */
TEST(w8_drafter_forward_equals_the_reference_within_1e_4)
{
	char err[UTIL_ERRLEN];
	struct model *md = open_a(w8, "f32", err);
	struct state_config c;

	CHECK(md != NULL);
	if (md == NULL) {
		printf("#   %s\n", err);
		return;
	}
	CHECK(model_dflash(md)->n_swa == 8);
	CHECK(model_dflash_state_shape(md, 64, &c) == 0 && c.n_ring == 2 && c.ring == 15);
	check_against_reference(md, 1e-4, "w8.", 0);
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
	check_against_reference(md, 1e-4, "", 10);
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
		CHECK(md != NULL && draft_from_ref_taps(md, 10, NULL, lg[i], cand, lat) == 0);
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

/* Made-up taps of positions p0.. (m rows): values in [-2, 2), a function of the position. */
static void
taps_of(int p0, int m, float *t)
{
	for (int r = 0; r < m; r++) {
		uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(p0 + r + 1);

		for (int i = 0; i < NT * NE; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			t[(size_t)r * NT * NE + i] = (float)(x >> 40) / (1 << 24) * 4 - 2;
		}
	}
}

/* Rows of positions [from, to) of every ring of rs against those of ws (which keeps every
 * position): the floats that differ. */
static long
ring_rows_differ(struct state *rs, struct state *ws, int from, int to)
{
	const struct state_config *c = state_config(rs);
	long d = 0;

	for (int i = c->n_kv - c->n_ring; i < c->n_kv; i++)
		for (int p = from > 0 ? from : 0; p < to; p++) {
			size_t r = (size_t)state_kv_row(c, i, p) * c->kv_dim, w = (size_t)p * c->kv_dim;

			d += memcmp(state_k(rs, i) + r, state_k(ws, i) + w, c->kv_dim * 4) != 0;
			d += memcmp(state_v(rs, i) + r, state_v(ws, i) + w, c->kv_dim * 4) != 0;
		}
	return d;
}

/*
 * A speculative run's drafter on md (n_ring rings): context parts of 1..40
 * rows (one longer than a ring), a draft after each (its block's rows
 * written over the ring's oldest), up to 256 positions (16 windows of 16,
 * 32 of 8), on the ring cache and on one keeping every position, the same
 * taps: each draft's rows, logits, candidates and edge scores the same
 * bits, and before each draft the rings hold the rows of the window's
 * context (ring - block positions) as the whole cache does.
 */
static void
ring_against_whole(struct model *md, int n_ring)
{
	enum { CTX = 256 };
	static const int parts[] = { 1, 3, 40, 1, 2, 8, 32, 5, 1, 7, 2 };
	struct state *rs = model_dflash_state(md, CTX, 0, NULL), *ws = model_dflash_state(md, CTX, 1,
	    NULL);
	float *t = malloc((size_t)40 * NT * NE * 4), *h[2], *lg[2], *lat[2];
	int32_t cand[2][(B - 1) * K];
	long differ = 0, rows = 0;
	int len = 0, drafts = 0;

	for (int j = 0; j < 2; j++)
		h[j] = malloc(B * NE * 4), lg[j] = malloc((size_t)(B - 1) * NV * 4),
		lat[j] = malloc((B - 1) * K * K * 4);
	CHECK(rs != NULL && ws != NULL);
	if (rs == NULL || ws == NULL)
		goto out;
	CHECK_EQ_INT(state_config(rs)->n_ring, n_ring);
	CHECK_EQ_INT(state_config(ws)->n_ring, 0);
	for (int i = 0; len + parts[i % 11] <= CTX; i++) {
		int m = parts[i % 11];
		int32_t anchor = (int32_t)((len * 7919L + 13) % NV);

		taps_of(len, m, t);
		CHECK(model_dflash_context(md, rs, len, t, m) == 0);
		CHECK(model_dflash_context(md, ws, len, t, m) == 0);
		len += m;
		rows += ring_rows_differ(rs, ws, len - state_config(rs)->ring + B, len);
		for (int j = 0; j < 2; j++) {
			struct model_dflash_out o = { h[j], lg[j], lat[j], cand[j] };

			CHECK(model_dflash_draft(md, j ? ws : rs, len, anchor, &o) == 0);
		}
		differ += memcmp(h[0], h[1], B * NE * 4) != 0;
		differ += memcmp(lg[0], lg[1], (size_t)(B - 1) * NV * 4) != 0;
		differ += memcmp(lat[0], lat[1], (B - 1) * K * K * 4) != 0;
		differ += memcmp(cand[0], cand[1], sizeof cand[0]) != 0;
		drafts++;
	}
	printf("#   %d drafts over %d positions, rings of %d rows in %d layers\n", drafts, len,
	    state_config(rs)->ring, n_ring);
	CHECK(len > 240 && drafts > 20);
	CHECK_EQ_INT(differ, 0);
	CHECK_EQ_INT(rows, 0);
out:
	state_free(rs), state_free(ws), free(t);
	for (int j = 0; j < 2; j++)
		free(h[j]), free(lg[j]), free(lat[j]);
}

/*
 * A backend whose memory is not the host's takes the forward's other path:
 * the convolutions the op alone, the selector over logits and gates read
 * back and codebook rows embedded then read back.  The CPU backend marked
 * non-host (its memory the host's all the same) drafts on that path what the
 * host path drafts, bit for bit: hidden rows, logits, candidates, edge scores.
 */
TEST(the_device_path_drafts_what_the_host_path_does_bit_for_bit)
{
	static const char *const dr[] = { "t/data/dflash/d2", w8 };
	char err[UTIL_ERRLEN];
	struct backend *dv = backend_open("cpu", 2, err);

	CHECK(dv != NULL);
	if (dv == NULL)
		return;
	dv->host = 0;
	for (int i = 0; i < 2; i++) {
		struct model *mh = open_a(dr[i], "q8", err), *md;
		float *h[2], *lg[2], *lat[2];
		int32_t cand[2][(B - 1) * K];
		struct model_options o = { .dflash = dr[i], .dflash_prec = "q8" };

		md = model_open_opts(dir_a, dv, &o, err);
		CHECK(mh != NULL && md != NULL);
		if (mh == NULL || md == NULL) {
			printf("#   %s\n", err);
			model_close(mh);
			break;
		}
		for (int j = 0; j < 2; j++)
			h[j] = malloc(B * NE * 4), lg[j] = malloc((size_t)(B - 1) * NV * 4),
			lat[j] = malloc((B - 1) * K * K * 4);
		CHECK(draft_from_ref_taps(mh, 7, h[0], lg[0], cand[0], lat[0]) == 0);
		CHECK(draft_from_ref_taps(md, 7, h[1], lg[1], cand[1], lat[1]) == 0);
		CHECK(memcmp(h[0], h[1], B * NE * 4) == 0);
		CHECK(memcmp(lg[0], lg[1], (size_t)(B - 1) * NV * 4) == 0);
		CHECK(memcmp(lat[0], lat[1], (B - 1) * K * K * 4) == 0);
		CHECK(memcmp(cand[0], cand[1], sizeof cand[0]) == 0);
		for (int j = 0; j < 2; j++)
			free(h[j]), free(lg[j]), free(lat[j]);
		model_close(mh), model_close(md);
	}
	backend_close(dv);
}

TEST(the_ring_drafts_what_every_position_kept_drafts_bit_for_bit)
{
	char err[UTIL_ERRLEN];
	struct model *d2 = open_a("t/data/dflash/d2", "f32", err), *v = open_a(w8, "q4", err);

	CHECK(d2 != NULL && v != NULL);
	if (d2 != NULL)
		ring_against_whole(d2, 1);	/* the sliding layer's; the full one's whole */
	if (v != NULL)
		ring_against_whole(v, 2);
	model_close(d2), model_close(v);
}

/* What the cache takes: a ring a sliding layer whatever the context, the full layer's
 * rows a position; no ring where it would hold as much as every position. */
TEST(the_context_cache_is_a_ring_a_sliding_layer)
{
	char err[UTIL_ERRLEN];
	struct model *d2 = open_a("t/data/dflash/d2", "f32", err), *v = open_a(w8, "f32", err);
	size_t row = 2 * 32 * sizeof(float);	/* K and V of one head of 32 */
	struct state_config c;
	struct state *st;

	CHECK(d2 != NULL && v != NULL);
	if (d2 == NULL || v == NULL)
		goto out;
	CHECK(model_dflash_state_bytes(d2, 262144) == ((262144 + B) + (16 - 1 + B)) * row);
	CHECK(model_dflash_state_bytes(v, 262144) == 2 * (8 - 1 + B) * row);
	CHECK(model_dflash_state_bytes(v, 8) == 2 * (8 - 1 + B) * row);
	CHECK(model_dflash_state_bytes(v, 7) == 2 * (7 + B) * row);	/* 15 rows: no ring */
	CHECK(model_dflash_state_shape(v, 7, &c) == 0 && c.n_ring == 0);
	CHECK(model_dflash_state_shape(d2, 100, &c) == 0 && c.n_ring == 1 && c.ring == 23);
	st = model_dflash_state(d2, 100, 1, err);
	CHECK(st != NULL && state_config(st)->n_ring == 0 &&
	    state_bytes(state_config(st)) == 2 * (100 + B) * row);
	state_free(st);
out:
	model_close(d2), model_close(v);
}

/* The w8 variant's directory: its config beside a link to d2's weights; 0, or -1. */
static int
make_w8(void)
{
	char src[PATH_MAX], dst[PATH_MAX + 32], buf[4096];
	FILE *in, *out;
	size_t n;

	if (mkdtemp(w8) == NULL || realpath("t/data/dflash/d2/model.safetensors", src) == NULL)
		return -1;
	snprintf(dst, sizeof dst, "%s/model.safetensors", w8);
	if (symlink(src, dst) != 0)
		return -1;
	snprintf(dst, sizeof dst, "%s/config.json", w8);
	if ((in = fopen("t/data/dflash/w8/config.json", "r")) == NULL)
		return -1;
	if ((out = fopen(dst, "w")) == NULL) {
		fclose(in);
		return -1;
	}
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		fwrite(buf, 1, n, out);
	fclose(in);
	return fclose(out) == 0 ? 0 : -1;
}

static void
remove_w8(void)
{
	char p[PATH_MAX + 32];

	snprintf(p, sizeof p, "%s/model.safetensors", w8), unlink(p);
	snprintf(p, sizeof p, "%s/config.json", w8), unlink(p);
	rmdir(w8);
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
		if (make_w8() != 0) {
			printf("not ok w8: %s\n", w8);
			return 1;
		}
		RUN(drafter_forward_equals_the_reference_within_1e_4);
		RUN(w8_drafter_forward_equals_the_reference_within_1e_4);
		if (getenv("DFLASH_GGUF") != NULL)	/* t/dflash.bats converts the drafter */
			RUN(drafter_from_our_gguf_conversion_is_the_same_drafter);
		RUN(trunk_taps_are_the_tapped_layers_outputs_of_every_row);
		RUN(quantized_drafters_load_and_draft);
		RUN(a_drafter_that_does_not_fit_its_trunk_is_refused_by_name);
		RUN(the_device_path_drafts_what_the_host_path_does_bit_for_bit);
		RUN(the_ring_drafts_what_every_position_kept_drafts_bit_for_bit);
		RUN(the_context_cache_is_a_ring_a_sliding_layer);
		remove_w8();
	}
	safetensors_close(refs);
	backend_close(be);
	return test_summary();
}
