/*
 * model: the qwen35 fixture (../shared/models/A, or MEMRA_MODEL_A)
 * against its float32 references (refs.json): last-position logits of
 * the prompt, greedy continuations, MTP logits; prefill against
 * token-by-token decode.  Skipped when the fixture is not there.  First,
 * on the tiny fixtures of t/data/tiny: model_options.plain_attn.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "json.h"
#include "model.h"
#include "ranks.h"
#include "sample.h"
#include "spec.h"
#include "state.h"
#include "test.h"
#include "util.h"

#ifdef MEMRA_SAN
enum { N_PROMPTS = 1, N_NEW = 12 };	/* sanitizer builds: a taste of each */
#else
enum { N_PROMPTS = 8, N_NEW = 64 };
#endif

static struct backend *be;
static struct model *md;
static struct json *refs;
static int nv;

static int32_t *
ids_of(const struct json *arr, int *n)
{
	int32_t *ids = malloc((arr->n + 1) * sizeof *ids);

	for (size_t i = 0; i < arr->n; i++)
		ids[i] = (int32_t)arr->items[i].i;
	*n = arr->n;
	return ids;
}

static int
argmax(const float *x, int n)
{
	int b = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

TEST(prompt_logits_match_the_reference)
{
	const struct json *a = json_get(refs, "a_last_position_logits");

	for (size_t p = 0; p < a->n && p < N_PROMPTS; p++) {
		const struct json *r = json_at(a, p), *want = json_get(r, "last_logits");
		int n;
		int32_t *ids = ids_of(json_get(r, "input_ids"), &n);
		float *lg = malloc(nv * sizeof *lg), *ld = malloc(nv * sizeof *ld);
		struct state *st = model_state_new(md, n + 8, 0, NULL);
		double md1 = 0, md2 = 0, mx = 0;

		CHECK(model_forward(md, st, ids, n, MODEL_PREFILL, lg, NULL) == 0);
		for (int i = 0; i < nv; i++) {
			double d = fabs(lg[i] - want->items[i].num);
			md1 = d > md1 ? d : md1;
			mx = fabs(want->items[i].num) > mx ? fabs(want->items[i].num) : mx;
		}
		/* the references keep 5 significant digits */
		if (md1 > 1e-4 * mx + 1e-4)
			FAILF("prompt %zu: max |logit - ref| %g (max |ref| %g)", p, md1, mx);
		CHECK_EQ_INT(argmax(lg, nv), json_at(json_get(r, "top5_ids"), 0)->i);
		if (p > 0)
			goto next;
		/* the same prompt one token at a time */
		CHECK(state_reset(st) == 0);
		for (int i = 0; i < n; i++)
			CHECK(model_forward(md, st, ids + i, 1, 0, ld, NULL) == 0);
		for (int i = 0; i < nv; i++)
			md2 = fabs(lg[i] - ld[i]) > md2 ? fabs(lg[i] - ld[i]) : md2;
		CHECK(md2 < 1e-3);
		CHECK_EQ_INT(argmax(ld, nv), argmax(lg, nv));
		printf("# prompt %zu: %d tokens, max diff vs ref %.3g, prefill vs decode %.3g\n",
		    p, n, md1, md2);
next:
		state_free(st);
		free(ids), free(lg), free(ld);
	}
}

TEST(greedy_continuations_match_the_reference)
{
	const struct json *b = json_get(refs, "b_greedy");

	for (size_t p = 0; p < b->n && p < N_PROMPTS; p++) {
		const struct json *r = json_at(b, p), *want = json_get(r, "new_ids");
		int n, first_bad = -1;
		int32_t *ids = ids_of(json_get(r, "input_ids"), &n), tok;
		float *lg = malloc(nv * sizeof *lg);
		struct state *st = model_state_new(md, n + 80, 0, NULL);

		CHECK(model_forward(md, st, ids, n, MODEL_PREFILL, lg, NULL) == 0);
		for (size_t i = 0; i < want->n && i < N_NEW; i++) {
			tok = argmax(lg, nv);
			if (tok != want->items[i].i && first_bad < 0)
				first_bad = i;
			CHECK(model_forward(md, st, &tok, 1, 0, lg, NULL) == 0);
		}
		if (first_bad >= 0)
			FAILF("prompt %zu: greedy token %d differs", p, first_bad);
		state_free(st);
		free(ids), free(lg);
	}
}

TEST(mtp_logits_match_the_reference)
{
	const struct json *a = json_get(refs, "a_last_position_logits");
	int ne = model_hparams(md)->n_embd;

	for (size_t p = 0; p < a->n && p < N_PROMPTS; p++) {
		const struct json *r = json_at(a, p), *want = json_get(r, "mtp_last_logits");
		int n;
		int32_t *ids = ids_of(json_get(r, "input_ids"), &n);
		float *h = malloc((size_t)n * ne * sizeof *h), *lg = malloc((size_t)n * nv * 4);
		struct state *st = model_state_new(md, n + 8, 0, NULL);
		double d = 0, mx = 0;
		int64_t next;

		CHECK(json_get_i64(r, "mtp_input_next_token", &next) == 0);
		CHECK(model_forward(md, st, ids, n, MODEL_PREFILL, NULL, h) == 0);
		/* slot t pairs h_t with token t+1; the last slot with the next token */
		memmove(ids, ids + 1, (n - 1) * sizeof *ids);
		ids[n - 1] = (int32_t)next;
		CHECK(model_mtp(md, st, 0, 0, h, ids, n, lg, NULL) == 0);
		for (int i = 0; i < nv; i++) {
			double e = fabs(lg[(size_t)(n - 1) * nv + i] - want->items[i].num);
			d = e > d ? e : d;
			mx = fabs(want->items[i].num) > mx ? fabs(want->items[i].num) : mx;
		}
		if (d > 1e-4 * mx + 1e-4)
			FAILF("prompt %zu: MTP max |logit - ref| %g", p, d);
		CHECK_EQ_INT(argmax(lg + (size_t)(n - 1) * nv, nv),
		    json_at(json_get(r, "mtp_top5_ids"), 0)->i);
		state_free(st);
		free(ids), free(h), free(lg);
	}
}

/*
 * model_forward_argmax, model_mtp_argmax and model_forward_batch_argmax
 * give the ids sample_next's greedy pick takes from the logits of
 * model_forward, model_mtp and model_forward_batch: the prefill's last
 * row, a verify of 4 rows, their MTP slots, a batch of two sequences.
 */
TEST(argmax_forwards_pick_what_the_greedy_sampler_picks)
{
	const struct json *r = json_at(json_get(refs, "a_last_position_logits"), 0);
	int n, ne = model_hparams(md)->n_embd;
	int32_t *ids = ids_of(json_get(r, "input_ids"), &n), got[4], want, ver[4] = { 0 };
	float *lg = malloc((size_t)4 * nv * sizeof *lg), *h = malloc((size_t)4 * ne * sizeof *h);
	struct state *sl = model_state_new(md, n + 8, 4, NULL), *si = model_state_new(md, n + 8, 4, NULL);
	struct sample_params p;
	struct sampler *smp;

	sample_defaults(&p);
	CHECK((smp = sample_new(&p, nv, NULL)) != NULL);
	CHECK(model_forward(md, sl, ids, n, MODEL_PREFILL, lg, NULL) == 0);
	CHECK(model_forward_argmax(md, si, ids, n, MODEL_PREFILL, got, NULL) == 0);
	CHECK_EQ_INT(got[0], sample_next(smp, lg, ids, n, 0, n));
	ver[0] = got[0];
	for (int i = 1; i < 4; i++)
		ver[i] = ids[i];
	CHECK(model_forward(md, sl, ver, 4, MODEL_LOGITS_ALL | MODEL_VERIFY, lg, h) == 0);
	CHECK(model_forward_argmax(md, si, ver, 4, MODEL_LOGITS_ALL | MODEL_VERIFY, got, NULL) == 0);
	for (int i = 0; i < 4; i++) {
		want = sample_next(smp, lg + (size_t)i * nv, ids, n, 0, n);
		if (got[i] != want)
			FAILF("verify row %d: picked %d, the sampler %d", i, got[i], want);
	}
	CHECK(model_mtp(md, sl, 0, 0, h, ver, 4, lg, NULL) == 0);
	CHECK(model_mtp_argmax(md, si, 0, 0, h, ver, 4, got, NULL) == 0);
	for (int i = 0; i < 4; i++) {
		want = sample_next(smp, lg + (size_t)i * nv, ids, n, 0, n);
		if (got[i] != want)
			FAILF("mtp slot %d: picked %d, the sampler %d", i, got[i], want);
	}
	/* two sequences in one batch: sl after the verify, si after the prefill */
	struct state *bl[2] = { sl, model_state_new(md, n + 8, 0, NULL) };
	struct state *bi[2] = { si, model_state_new(md, n + 8, 0, NULL) };
	CHECK(model_forward(md, bl[1], ids, n - 1, MODEL_PREFILL, NULL, NULL) == 0);
	CHECK(model_forward(md, bi[1], ids, n - 1, MODEL_PREFILL, NULL, NULL) == 0);
	CHECK(model_forward_batch(md, bl, ver + 1, 2, lg, NULL) == 0);
	CHECK(model_forward_batch_argmax(md, bi, ver + 1, 2, got, NULL) == 0);
	for (int i = 0; i < 2; i++) {
		want = sample_next(smp, lg + (size_t)i * nv, ids, n, 0, n);
		if (got[i] != want)
			FAILF("batch row %d: picked %d, the sampler %d", i, got[i], want);
	}
	state_free(bl[1]), state_free(bi[1]);
	sample_free(smp);
	state_free(sl), state_free(si);
	free(ids), free(lg), free(h);
}

/*
 * A step of MTP layer 0 of m at pos (token tok, hidden h, the next into
 * hout) on st, as model_mtp_chain's steps are defined: its greedy pick,
 * model_mtp_argmax's or with a masked head ranks_argmax's of the logits
 * (lg: model_draft_vocab floats).
 */
static int32_t
mtp_step(struct model *m, struct state *st, int pos, float *h, int32_t tok, float *lg)
{
	const struct ranks *r = model_draft_ranks(m, NULL, NULL);
	int32_t id = -2;

	if (r == NULL)
		CHECK(model_mtp_argmax(m, st, 0, pos, h, &tok, 1, &id, h) == 0);
	else {
		CHECK(model_mtp(m, st, 0, pos, h, &tok, 1, lg, h) == 0);
		id = ranks_argmax(r, lg);
	}
	return id;
}

/*
 * model_mtp_chain of n = 1..8 steps of m on each prompt gives the picks
 * and the last hidden row of n steps (mtp_step), bit for bit, and leaves
 * the MTP cache as they leave it (the step after reads it: the same
 * logits); with the chain off (backend_chain_set) the same again.
 */
static void
chain_check(struct model *m, const char *what)
{
	const struct json *a = json_get(refs, "a_last_position_logits");
	int ne = model_hparams(m)->n_embd, dv = model_draft_vocab(m);
	float *hs, *hc = malloc(ne * sizeof *hc);
	float *hp = malloc(ne * sizeof *hp), *lg = malloc((size_t)2 * dv * sizeof *lg);

	for (size_t p = 0; p < a->n && p < N_PROMPTS; p++) {
		int n;
		int32_t *ids = ids_of(json_get(json_at(a, p), "input_ids"), &n), first, got[8], want[8];
		struct state *sc = model_state_new(m, n + 16, 1, NULL);
		struct state *ss = model_state_new(m, n + 16, 1, NULL);

		hs = malloc((size_t)n * ne * sizeof *hs);
		if (sc == NULL || ss == NULL || hs == NULL) {
			FAILF("%s, prompt %zu: out of memory", what, p);
			break;
		}
		CHECK(model_forward_argmax(m, sc, ids, n, MODEL_PREFILL, &first, hs) == 0);
		/* the MTP cache of the prompt: slot i is h[i] with token i + 1 */
		CHECK(n < 2 || model_mtp(m, sc, 0, 0, hs, ids + 1, n - 1, NULL, NULL) == 0);
		CHECK(n < 2 || model_mtp(m, ss, 0, 0, hs, ids + 1, n - 1, NULL, NULL) == 0);
		for (int k = 1; k <= 8; k++) {
			for (int off = 0; off < 2; off++) {	/* chained, then the chain off */
				const char *o = off ? " (off)" : "";

				backend_chain_set(be, !off);
				memcpy(hc, hs + (size_t)(n - 1) * ne, ne * sizeof *hc);
				CHECK(model_mtp_chain(m, sc, n - 1, hc, first, k, got, hc) == 0);
				memcpy(hp, hs + (size_t)(n - 1) * ne, ne * sizeof *hp);
				for (int j = 0; j < k; j++)
					want[j] = mtp_step(m, ss, n - 1 + j, hp, j ? want[j - 1] : first,
					    lg);
				for (int j = 0; j < k; j++)
					if (got[j] != want[j])
						FAILF("%s, prompt %zu, %d steps%s: step %d picked %d, "
						    "the steps %d", what, p, k, o, j, got[j], want[j]);
				if (memcmp(hc, hp, ne * sizeof *hc) != 0)
					FAILF("%s, prompt %zu, %d steps%s: another last hidden row",
					    what, p, k, o);
				CHECK(model_mtp(m, sc, 0, n - 1 + k, hc, &got[k - 1], 1, lg, NULL) == 0);
				CHECK(model_mtp(m, ss, 0, n - 1 + k, hp, &want[k - 1], 1, lg + dv,
				    NULL) == 0);
				if (memcmp(lg, lg + dv, dv * sizeof *lg) != 0)
					FAILF("%s, prompt %zu, %d steps%s: the step after reads "
					    "another cache", what, p, k, o);
			}
		}
		backend_chain_set(be, 1);
		state_free(sc), state_free(ss);
		free(ids), free(hs);
	}
	free(hc), free(hp), free(lg);
}

TEST(mtp_chain_equals_the_steps)
{
	chain_check(md, "full head");
}

/*
 * The same with a masked head: A self-trimmed to 4096 rows in an order
 * that is not the ids' (8191, 8189, .. then 0, 2, ..), so a pick maps
 * its row back and its ties go to the lower id.
 */
TEST(mtp_chain_equals_the_steps_with_a_masked_head)
{
	char path[] = "/tmp/memra-chain-XXXXXX", err[UTIL_ERRLEN];
	struct model_options mo = { 0 };
	struct model *mm;
	int fd = mkstemp(path);
	FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;

	CHECK(fp != NULL);
	if (fp == NULL)
		return;
	for (int i = 0; i < 2048; i++)
		fprintf(fp, "%d\n", nv - 1 - 2 * i);
	for (int i = 0; i < 2048; i++)
		fprintf(fp, "%d\n", 2 * i);
	fclose(fp);
	mo.ranks = path;
	if ((mm = model_open_opts(test_model_a("model"), be, &mo, err)) == NULL)
		FAILF("%s", err);
	else {
		CHECK(model_draft_ranks(mm, NULL, NULL) != NULL);
		chain_check(mm, "masked head");
		model_close(mm);
	}
	unlink(path);
}

/*
 * model_forward_next picks what sample_next picks from model_forward's
 * logits, for each way it takes: greedy (the backend's argmax), top-k
 * (the backend's top k), top-p alone (the backend's draw), each with
 * penalties put on the row by the backend first, and a top-k past
 * SAMPLE_TOPK_MAX (the row read back).
 */
/* Two samplers of the same settings and seed (*sa the reference's, *sb the forward's). */
static void
twin_samplers(float temp, float top_p, float rep, float pres, float freq, int top_k,
    uint64_t seed, struct sampler **sa, struct sampler **sb)
{
	struct sample_params p;

	sample_defaults(&p);
	p.temp = temp, p.top_p = top_p, p.repeat_penalty = rep;
	p.presence_penalty = pres, p.frequency_penalty = freq;
	p.top_k = top_k, p.seed = seed;
	CHECK((*sa = sample_new(&p, nv, NULL)) != NULL);
	CHECK((*sb = sample_new(&p, nv, NULL)) != NULL);
}

TEST(forward_next_picks_what_the_sampler_picks_from_the_logits)
{
	const struct json *r = json_at(json_get(refs, "a_last_position_logits"), 1);
	int n;
	int32_t *ids = ids_of(json_get(r, "input_ids"), &n), *hist = malloc((n + 8) * sizeof *hist);
	float *lg = malloc(nv * sizeof *lg), *lh = malloc(nv * sizeof *lh);
	struct { float temp, top_p, rep, pres, freq; int top_k; } ps[] = {
		{ 0, 1, 1, 0, 0, 0 }, { 0.8f, 1, 1, 0, 0, 40 }, { 1.3f, 0.9f, 1, 0, 0, 5 },
		{ 0.7f, 0.9f, 1, 0, 0, 0 }, { 0.7f, 1, 1.3f, 0, 0, 40 }, { 0, 1, 1.3f, 0, 0, 0 },
		{ 0.9f, 0.95f, 1.2f, 0.5f, 0.3f, 0 }, { 0, 1, 1, 0.4f, 0.6f, 0 },
		{ 1.1f, 1, 1, 0, 0, 2000 }, { 0.8f, 1, 1.4f, 0, 0.2f, 2000 },
	};

	for (size_t c = 0; c < sizeof ps / sizeof ps[0]; c++) {
		struct sampler *sa = NULL, *sb = NULL;
		struct state *sl = model_state_new(md, n + 8, 0, NULL);
		struct state *sn = model_state_new(md, n + 8, 0, NULL);
		int32_t t = -1, want;

		twin_samplers(ps[c].temp, ps[c].top_p, ps[c].rep, ps[c].pres, ps[c].freq, ps[c].top_k,
		    11 + c, &sa, &sb);
		memcpy(hist, ids, n * sizeof *ids);
		CHECK(model_forward(md, sl, ids, n, MODEL_PREFILL, lg, NULL) == 0);
		CHECK(model_forward_next(md, sn, ids, n, MODEL_PREFILL, sb, hist, n, 3, n, lh, &t) == 0);
		for (int i = 0; i < 6; i++) {	/* the prompt, then 5 steps */
			want = sample_next(sa, lg, hist, n + i, 3, n + i);
			if (t != want)
				FAILF("case %zu step %d: picked %d, the sampler %d", c, i, t, want);
			hist[n + i] = want;
			if (i == 5)
				break;
			CHECK(model_forward(md, sl, &hist[n + i], 1, 0, lg, NULL) == 0);
			CHECK(model_forward_next(md, sn, &hist[n + i], 1, 0, sb, hist, n + i + 1, 3,
			    n + i + 1, lh, &t) == 0);
		}
		sample_free(sa), sample_free(sb);
		state_free(sl), state_free(sn);
	}
	free(ids), free(hist), free(lg), free(lh);
}

/* Step i's token mask of case c: about a third of the vocabulary, another
 * third each step; the host row lg masked by it too. */
static void
step_mask(uint32_t *bits, float *lg, int c, int i)
{
	memset(bits, 0, (nv + 31) / 32 * sizeof *bits);
	for (int t = 0; t < nv; t++)
		if ((t / 3 + t + c + i) % 3 == 0)
			bits[t / 32] |= 1u << (t % 32);
		else
			lg[t] = -INFINITY;
}

/*
 * model_forward_next_mask picks what sample_next picks from model_forward's
 * logits masked on the host, each way it takes (greedy, top-k, top-p
 * alone, a top-k past SAMPLE_TOPK_MAX), penalties after the mask: the
 * row masked where it is is the host's masked row.
 */
TEST(forward_next_mask_picks_what_the_sampler_picks_from_the_masked_row)
{
	const struct json *r = json_at(json_get(refs, "a_last_position_logits"), 1);
	int n;
	int32_t *ids = ids_of(json_get(r, "input_ids"), &n), *hist = malloc((n + 8) * sizeof *hist);
	float *lg = malloc(nv * sizeof *lg), *lh = malloc(nv * sizeof *lh);
	uint32_t *bits = malloc((nv + 31) / 32 * sizeof *bits);
	struct { float temp, top_p, rep; int top_k; } ps[] = {
		{ 0, 1, 1, 0 }, { 0.8f, 1, 1, 40 }, { 0.7f, 0.9f, 1, 0 }, { 0.9f, 0.95f, 1.3f, 0 },
		{ 0, 1, 1.3f, 0 }, { 1.1f, 1, 1, 2000 },
	};
	int differ = 0;

	for (size_t c = 0; c < sizeof ps / sizeof ps[0]; c++) {
		struct sampler *sa = NULL, *sb = NULL;
		struct state *sl = model_state_new(md, n + 8, 0, NULL);
		struct state *sn = model_state_new(md, n + 8, 0, NULL);
		int32_t t = -1, want;

		twin_samplers(ps[c].temp, ps[c].top_p, ps[c].rep, 0, 0, ps[c].top_k, 21 + c, &sa, &sb);
		memcpy(hist, ids, n * sizeof *ids);
		CHECK(model_forward(md, sl, ids, n, MODEL_PREFILL, lg, NULL) == 0);
		step_mask(bits, lg, c, 0);
		CHECK(model_forward_next_mask(md, sn, ids, n, MODEL_PREFILL, sb, hist, n, 3, n, bits,
		    lh, &t) == 0);
		for (int i = 0; i < 4; i++) {	/* the prompt, then 3 steps */
			want = sample_next(sa, lg, hist, n + i, 3, n + i);
			if (t != want || want < 0 || !(bits[want / 32] >> (want % 32) & 1))
				FAILF("case %zu step %d: picked %d, the sampler %d", c, i, t, want);
			hist[n + i] = want;
			if (i == 3)
				break;
			CHECK(model_forward(md, sl, &hist[n + i], 1, 0, lg, NULL) == 0);
			want = sample_next(sa, lg, hist, n + i + 1, 3, n + i + 1);
			step_mask(bits, lg, c, i + 1);
			differ += want != sample_next(sa, lg, hist, n + i + 1, 3, n + i + 1);
			CHECK(model_forward_next_mask(md, sn, &hist[n + i], 1, 0, sb, hist, n + i + 1,
			    3, n + i + 1, bits, lh, &t) == 0);
		}
		sample_free(sa), sample_free(sb);
		state_free(sl), state_free(sn);
	}
	CHECK(differ > 0);	/* the masks mattered */
	free(ids), free(hist), free(lg), free(lh), free(bits);
}

/*
 * Greedy speculative decoding through lib/spec, as the reference does it:
 * K_eff = min(K, left - 1) chained drafts a round (spec_round's limit).
 */
struct spec_run {
	int	accepted, rounds;
	int32_t	out[64];
};

static int
spec_decode(const int32_t *prompt, int n, int n_new, int K, struct spec_run *sr)
{
	char err[UTIL_ERRLEN];
	struct spec *s = spec_new(md, K, n + n_new + K + 2, NULL, 0, err);
	int gen = 1, r = 0;

	if (s == NULL || spec_prefill(s, prompt, n, &sr->out[0]) != 0) {
		printf("# spec: %s\n", s ? spec_errmsg(s) : err);
		spec_free(s);
		return -1;
	}
	while (gen < n_new && (r = spec_round(s, sr->out + gen, n_new - gen)) > 0)
		gen += r;
	sr->accepted = spec_stats(s)->accepted;
	sr->rounds = spec_stats(s)->rounds;
	spec_free(s);
	return r < 0 ? -1 : 0;
}

TEST(speculative_decoding_equals_greedy_with_the_reference_acceptance)
{
	const struct json *d = json_get(refs, "d_speculative");
	const struct json *g = json_get(d, "greedy_new_ids_all_prompts");
	const struct json *b = json_get(refs, "b_greedy");
	int np = N_PROMPTS < 2 ? N_PROMPTS : 2;

	for (int K = 1; K <= 4; K++) {
		const struct json *pk;
		char key[4];

		snprintf(key, sizeof key, "%d", K);
		pk = json_get(json_get(d, "per_K"), key);
		for (int p = 0; p < np; p++) {
			struct spec_run sr = { 0 };
			int n;
			int32_t *ids = ids_of(json_get(json_at(b, p), "input_ids"), &n);
			const struct json *want = json_at(g, p);

			CHECK(spec_decode(ids, n, N_NEW, K, &sr) == 0);
			for (int i = 0; i < N_NEW; i++)
				if (sr.out[i] != want->items[i].i) {
					FAILF("K=%d prompt %d: token %d differs from greedy", K, p, i);
					break;
				}
			if (N_NEW == 64) {
				CHECK_EQ_INT(sr.accepted, json_at(json_get(pk, "per_prompt_accepted"), p)->i);
				CHECK_EQ_INT(sr.rounds, json_at(json_get(pk, "per_prompt_rounds"), p)->i);
			}
			printf("# K=%d prompt %d: %d accepted in %d rounds\n", K, p, sr.accepted, sr.rounds);
			free(ids);
		}
	}
}

TEST(verify_rows_and_thread_counts_give_the_same_bits)
{
	const struct json *r = json_at(json_get(refs, "b_greedy"), 0);
	int n, K = 4;
	int32_t *ids = ids_of(json_get(r, "input_ids"), &n);
	float *one = malloc((size_t)K * nv * 4), *many = malloc((size_t)K * nv * 4);
	struct state *a = model_state_new(md, n + K, K, NULL), *b = model_state_new(md, n + K, K, NULL);
	char err[UTIL_ERRLEN];
	struct backend *be3 = backend_open("cpu", 3, err);
	struct model *m3 = model_open(getenv("MEMRA_MODEL_A") ? getenv("MEMRA_MODEL_A") :
	    "../shared/models/A", be3, err);
	struct state *c = m3 ? model_state_new(m3, n + K, K, NULL) : NULL;
	float *three = malloc((size_t)K * nv * 4);

	CHECK(c != NULL);
	/* the prompt minus its last K tokens, then those K: one at a time vs one verify batch */
	CHECK(model_forward(md, a, ids, n - K, MODEL_PREFILL, NULL, NULL) == 0);
	CHECK(model_forward(md, b, ids, n - K, MODEL_PREFILL, NULL, NULL) == 0);
	CHECK(model_forward(m3, c, ids, n - K, MODEL_PREFILL, NULL, NULL) == 0);
	for (int i = 0; i < K; i++)
		CHECK(model_forward(md, a, ids + n - K + i, 1, 0, one + (size_t)i * nv, NULL) == 0);
	CHECK(model_forward(md, b, ids + n - K, K, MODEL_VERIFY | MODEL_LOGITS_ALL, many, NULL) == 0);
	CHECK(memcmp(one, many, (size_t)K * nv * 4) == 0);
	CHECK(model_forward(m3, c, ids + n - K, K, MODEL_VERIFY | MODEL_LOGITS_ALL, three, NULL) == 0);
	CHECK(memcmp(three, many, (size_t)K * nv * 4) == 0);
	state_free(a), state_free(b), state_free(c);
	model_close(m3);
	backend_close(be3);
	free(ids), free(one), free(many), free(three);
}

/*
 * The last logits of a 24-token prefill and of the same prompt decoded
 * one token at a time, of dir opened with plain_attn = plain, into
 * pre and dec ([n_vocab] each, malloc'd; the caller frees).  n_vocab, or -1.
 */
static int
tiny_logits(const char *dir, int plain, float **pre, float **dec)
{
	enum { N = 24 };
	struct model_options mo = { .plain_attn = plain };
	char err[UTIL_ERRLEN];
	struct model *m = model_open_opts(dir, be, &mo, err);
	struct state *a, *b;
	int32_t ids[N];
	int n, rc = 0;

	if (m == NULL) {
		printf("# %s\n", err);
		return -1;
	}
	n = model_hparams(m)->n_vocab;
	for (int i = 0; i < N; i++)
		ids[i] = (i * 37 + 11) % n;
	*pre = malloc((size_t)n * 4), *dec = malloc((size_t)n * 4);
	a = model_state_new(m, N, 0, err), b = model_state_new(m, N, 0, err);
	if (a == NULL || b == NULL || model_forward(m, a, ids, N, MODEL_PREFILL, *pre, NULL) != 0)
		rc = -1;
	for (int i = 0; rc == 0 && i < N; i++)
		rc = model_forward(m, b, &ids[i], 1, 0, *dec, NULL);
	state_free(a), state_free(b);
	model_close(m);
	return rc ? -1 : n;
}

/* tiny_logits of dir opened both ways: p[0], d[0] llama.cpp's order, p[1],
 * d[1] plain_attn; n_vocab, or -1. */
static int
tiny_orders(const char *dir, float *p[2], float *d[2])
{
	int n = tiny_logits(dir, 0, &p[0], &d[0]);

	if (n <= 0 || tiny_logits(dir, 1, &p[1], &d[1]) != n)
		return -1;
	return n;
}

static double
maxrel(const float *a, const float *b, int n)
{
	double mx = 0;

	for (int i = 0; i < n; i++)
		mx = fmax(mx, fabs((double)a[i] - b[i]) / (1.0 + fabs((double)a[i])));
	return mx;
}

/*
 * A llama model sums its attention in llama.cpp's order unless opened
 * with plain_attn: the two differ by float order only (f32 weights: far
 * below 1e-4 relative, not zero, the same argmax), prefill and decode alike.
 */
TEST(plain_attn_moves_a_llama_model_by_float_order_only)
{
	float *p[2] = { 0 }, *d[2] = { 0 };
	int n = tiny_orders("t/data/tiny/llama-tiny", p, d);

	CHECK(n > 0);
	if (test_cur_failed)
		return;
	printf("# llama-tiny: plain against llama.cpp's order %.3g (prefill), %.3g (decode)\n",
	    maxrel(p[0], p[1], n), maxrel(d[0], d[1], n));
	CHECK(maxrel(p[0], p[1], n) > 0 && maxrel(p[0], p[1], n) < 1e-5);
	CHECK(maxrel(d[0], d[1], n) > 0 && maxrel(d[0], d[1], n) < 1e-5);
	CHECK_EQ_INT(argmax(p[1], n), argmax(p[0], n));
	CHECK_EQ_INT(argmax(d[1], n), argmax(d[0], n));
	free(p[0]), free(d[0]), free(p[1]), free(d[1]);
}

/* qwen35's attention is always the plain order: plain_attn changes no bit. */
TEST(plain_attn_leaves_qwen35_alone)
{
	float *p[2] = { 0 }, *d[2] = { 0 };
	int n = tiny_orders("t/data/tiny/q35-r2", p, d);

	CHECK(n > 0);
	if (test_cur_failed)
		return;
	CHECK(memcmp(p[0], p[1], (size_t)n * 4) == 0);
	CHECK(memcmp(d[0], d[1], (size_t)n * 4) == 0);
	free(p[0]), free(d[0]), free(p[1]), free(d[1]);
}

int
main(void)
{
	const char *dir;
	char err[UTIL_ERRLEN], path[1024];
	char *text;
	size_t len;

	if ((be = backend_open("cpu", 0, err)) == NULL) {
		printf("not ok model: %s\n", err);
		return 1;
	}
	RUN(plain_attn_moves_a_llama_model_by_float_order_only);
	RUN(plain_attn_leaves_qwen35_alone);
	if ((dir = test_model_a("model")) == NULL) {
		backend_close(be);
		return test_summary();
	}
	snprintf(path, sizeof path, "%s/refs.json", dir);
	if ((text = util_read_file(path, &len, err)) == NULL ||
	    (refs = json_parse(text, len, err)) == NULL ||
	    (md = model_open(dir, be, err)) == NULL) {
		printf("not ok model: %s\n", err);
		return 1;
	}
	free(text);
	nv = model_hparams(md)->n_vocab;
	RUN(prompt_logits_match_the_reference);
	RUN(mtp_logits_match_the_reference);
	RUN(argmax_forwards_pick_what_the_greedy_sampler_picks);
	RUN(mtp_chain_equals_the_steps);
	RUN(mtp_chain_equals_the_steps_with_a_masked_head);
	RUN(forward_next_picks_what_the_sampler_picks_from_the_logits);
	RUN(forward_next_mask_picks_what_the_sampler_picks_from_the_masked_row);
	RUN(verify_rows_and_thread_counts_give_the_same_bits);
	RUN(greedy_continuations_match_the_reference);
	RUN(speculative_decoding_equals_greedy_with_the_reference_acceptance);
	model_close(md);
	backend_close(be);
	json_free(refs);
	return test_summary();
}
