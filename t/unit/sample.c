/*
 * sample: each filter on small hand-computed distributions, the draw's
 * frequencies with fixed seeds, reproducibility keyed by (seed, seq,
 * pos), and speculative rejection sampling preserving the target.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fexp.h"
#include "sample.h"
#include "test.h"
#include "util.h"

static struct sampler *
mk(struct sample_params *p, int n)
{
	char err[UTIL_ERRLEN];
	struct sampler *s = sample_new(p, n, err);

	if (s == NULL)
		printf("# sample_new: %s\n", err);
	return s;
}

/* logits whose softmax is probs (normalised) */
static void
logits_of(const double *probs, int n, float *l)
{
	for (int i = 0; i < n; i++)
		l[i] = (float)log(probs[i]);
}

TEST(rng_is_a_pure_function_of_its_key)
{
	double sum = 0;

	CHECK(sample_uniform(1, 2, 3, 0) == sample_uniform(1, 2, 3, 0));
	CHECK(sample_uniform(1, 2, 3, 0) != sample_uniform(2, 2, 3, 0));
	CHECK(sample_uniform(1, 2, 3, 0) != sample_uniform(1, 3, 3, 0));
	CHECK(sample_uniform(1, 2, 3, 0) != sample_uniform(1, 2, 4, 0));
	CHECK(sample_uniform(1, 2, 3, 0) != sample_uniform(1, 2, 3, 1));
	for (int i = 0; i < 100000; i++) {
		double u = sample_uniform(7, 0, i, 0);

		CHECK(u >= 0 && u < 1);
		sum += u;
	}
	CHECK_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(greedy_is_the_argmax_lowest_id_on_ties)
{
	struct sample_params p;
	float l[5] = { 1, 4, 4, -INFINITY, NAN };
	struct sampler *s;

	sample_defaults(&p);
	CHECK(sample_plain_greedy(&p));
	p.repeat_penalty = 1.1f;	/* a penalty or a temperature: no plain argmax */
	CHECK(!sample_plain_greedy(&p));
	sample_defaults(&p);
	p.temp = 0.5f;
	CHECK(!sample_plain_greedy(&p));
	sample_defaults(&p);
	s = mk(&p, 5);
	CHECK_EQ_INT(sample_next(s, l, NULL, 0, 0, 0), 1);
	l[0] = l[1] = l[2] = NAN;
	CHECK_EQ_INT(sample_next(s, l, NULL, 0, 0, 0), -1);
	sample_free(s);
}

/* the definition, one scan: the largest finite logit, lowest id on ties */
static int
scan_argmax(const float *l, int n)
{
	int best = -1;

	for (int i = 0; i < n; i++)
		if (isfinite(l[i]) && (best < 0 || l[i] > l[best]))
			best = i;
	return best;
}

TEST(greedy_equals_the_one_scan_argmax_at_every_length_and_position)
{
	struct sample_params p;
	float l[37];
	const float odd[] = { NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 3, 3, -2 };

	sample_defaults(&p);
	for (int n = 1; n <= 37; n++) {	/* lengths around the 8-lane blocks */
		struct sampler *s = mk(&p, n);
		for (int seed = 0; seed < 200; seed++) {
			uint64_t z = (uint64_t)seed * 0x9e3779b97f4a7c15ULL + (uint64_t)n;
			for (int i = 0; i < n; i++) {	/* few distinct values: many ties */
				z = z * 6364136223846793005ULL + 1442695040888963407ULL;
				l[i] = odd[(z >> 33) % 8];
			}
			CHECK_EQ_INT(sample_next(s, l, NULL, 0, 0, 0), scan_argmax(l, n));
		}
		sample_free(s);
	}
}

TEST(draws_follow_the_distribution)
{
	struct sample_params p;
	double want[4] = { 0.1, 0.2, 0.3, 0.4 };
	float l[4];
	int count[4] = { 0 }, n = 100000;
	struct sampler *s;

	sample_defaults(&p);
	p.temp = 1;
	p.seed = 42;
	s = mk(&p, 4);
	logits_of(want, 4, l);
	for (int i = 0; i < n; i++)
		count[sample_next(s, l, NULL, 0, 0, i)]++;
	for (int i = 0; i < 4; i++)
		CHECK_NEAR((double)count[i] / n, want[i], 0.005);
	sample_free(s);
}

static void
probs_of(struct sample_params *p, const double *in, int n, const double *want)
{
	float l[16], pr[16];
	struct sampler *s = mk(p, n);

	logits_of(in, n, l);
	CHECK(sample_probs(s, l, NULL, 0, pr) == 0);
	for (int i = 0; i < n; i++)
		CHECK_NEAR(pr[i], want[i], 1e-6);
	sample_free(s);
}

/* the definition (sample.h): candidates fully sorted (logit / temp
 * descending, id ascending), top-k, integer weights, the top-p prefix,
 * the min-p floor, each kept p = w / the kept sum */
struct rc {
	int	id;
	float	l;
	uint64_t w;
};

static int
rc_cmp(const void *a, const void *b)
{
	const struct rc *x = a, *y = b;

	if (x->l != y->l)
		return x->l > y->l ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* The kept candidates of the row l[nv] under p into c[] (most likely
 * first), their weight into *kept; how many. */
static int
ref_kept(const struct sample_params *p, const float *l, int nv, struct rc *c, uint64_t *kept)
{
	uint64_t sum = 0;
	int n = 0, k = 0;

	for (int i = 0; i < nv; i++)
		if (isfinite(l[i]))
			c[n].id = i, c[n++].l = l[i] / p->temp;
	qsort(c, n, sizeof *c, rc_cmp);
	if (p->top_k > 0 && p->top_k < n)
		n = p->top_k;
	for (int i = 0; i < n; i++)
		sum += c[i].w = i == 0 ? SAMPLE_WONE : fexp_weight(c[i].l - c[0].l);
	if (p->top_p < 1) {
		double want = ceil((double)p->top_p * (double)sum), cum = 0;
		for (int i = 0; i < n; i++)
			if ((cum += (double)c[i].w) >= want) {	/* (exact: sums < 2^53 here) */
				n = i + 1;
				break;
			}
	}
	*kept = 0;
	for (int i = 0; i < n; i++)
		if ((double)c[i].w >= ceil((double)p->min_p * 0x1p44)) {
			c[k] = c[i];
			*kept += c[k++].w;
		}
	return k;
}

static void
ref_probs(const struct sample_params *p, const float *l, int nv, float *pr)
{
	struct rc c[300];
	uint64_t kept;
	int n = ref_kept(p, l, nv, c, &kept);

	memset(pr, 0, nv * sizeof *pr);
	for (int i = 0; i < n; i++)
		pr[c[i].id] = (float)((double)c[i].w / (double)kept);
}

/* The draw at uniform u: the first kept candidate whose running weight
 * passes floor(u * kept). */
static int
ref_draw(const struct sample_params *p, const float *l, int nv, double u)
{
	struct rc c[300];
	uint64_t kept, cum = 0, point;
	int n = ref_kept(p, l, nv, c, &kept);

	point = (uint64_t)floor(u * (double)kept);
	for (int i = 0; i < n; i++)
		if ((cum += c[i].w) > point)
			return c[i].id;
	return c[n - 1].id;
}

TEST(weights_are_exp_in_units_of_2_to_the_minus_44)
{
	double worst = 0;

	CHECK(fexp_weight(0.0f) == SAMPLE_WONE);
	CHECK(fexp_weight(-0.0f) == SAMPLE_WONE);
	CHECK(fexp_weight(-INFINITY) == 0);
	CHECK(fexp_weight(NAN) == 0);
	CHECK(fexp_weight(-31.0f) == 0);	/* exp(-31) * 2^44 = 0.6: truncated */
	CHECK(fexp_weight(-30.0f) == 1);	/* exp(-30) * 2^44 = 1.64 */
	for (float d = -30.0f; d <= 0; d += 0.01f) {
		double want = exp((double)d) * 0x1p44, got = (double)fexp_weight(d);
		if ((fabs(got - want) - 1) / want > worst)	/* 1: the truncation */
			worst = (fabs(got - want) - 1) / want;
	}
	CHECK(worst < 3e-7);
	printf("# largest relative error %.3g\n", worst);
	CHECK_EQ_INT((int)fexp_point(0.0, 10), 0);
	CHECK_EQ_INT((int)fexp_point(0.95, 10), 9);
	CHECK_EQ_INT((int)fexp_point(nextafter(1.0, 0.0), 3), 2);
	CHECK(fexp_point(nextafter(1.0, 0.0), ((uint64_t)1 << 62) + 1) ==
	    ((uint64_t)1 << 62) - 512);	/* (double)sum is 2^62 */
	CHECK_EQ_INT((int)fexp_point(1.0, 10), 9);	/* (the guard: u < 1) */
	CHECK(fexp_top_p(0.5f, 7) == 4 && fexp_top_p(0.5f, 8) == 4);
	CHECK(fexp_min_p(0.0f) == 0 && fexp_min_p(1.0f) == SAMPLE_WONE);
}

TEST(the_kept_set_is_a_full_sorts_bit_for_bit_on_ties_and_signed_zeros)
{
	const float odd[] = { -0.0f, 0.0f, 1.5f, 1.5f, -3, 2.25f, NAN, -INFINITY, 7, -7e3f };
	const int ks[] = { 0, 1, 3, 40, 299 };
	float l[300], pr[300], want[300];
	int n_diff = 0;

	for (int t = 0; t < 60; t++) {
		struct sample_params p;
		uint64_t z = 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1);
		int nv = 20 + 280 * (t % 2);

		sample_defaults(&p);
		p.temp = t % 3 == 0 ? 1.0f : t % 3 == 1 ? 0.7f : 1.3f;
		p.top_k = ks[t % 5];
		p.top_p = t % 4 == 0 ? 1.0f : 0.9f;
		p.min_p = t % 7 == 0 ? 0.05f : 0;
		for (int i = 0; i < nv; i++) {	/* few values: ties everywhere */
			z = z * 6364136223846793005ULL + 1442695040888963407ULL;
			l[i] = (z >> 60) < 10 ? odd[(z >> 60)] : (float)((int)(z >> 40 & 15) - 8) / 4;
		}
		struct sampler *s = mk(&p, nv);
		CHECK(sample_probs(s, l, NULL, 0, pr) == 0);
		ref_probs(&p, l, nv, want);
		CHECK(memcmp(pr, want, nv * sizeof *pr) == 0);
		for (int64_t pos = 0; pos < 50; pos++)
			n_diff += sample_next(s, l, NULL, 0, 3, pos) != ref_draw(&p, l, nv,
			    sample_uniform(p.seed, 3, pos, SAMPLE_STREAM_TOKEN));
		sample_free(s);
	}
	CHECK_EQ_INT(n_diff, 0);
	struct sample_params p;	/* -0 ties +0: the lower id is kept */
	float z2[2] = { -0.0f, 0.0f }, p2[2];
	sample_defaults(&p);
	p.temp = 1, p.top_k = 1;
	struct sampler *s = mk(&p, 2);
	CHECK(sample_probs(s, z2, NULL, 0, p2) == 0);
	CHECK(p2[0] == 1 && p2[1] == 0);
	sample_free(s);
}

TEST(each_filter_keeps_what_it_should)
{
	struct sample_params p;
	double in[4] = { 0.1, 0.2, 0.3, 0.4 };
	double t05[4] = { 0.01 / 0.3, 0.04 / 0.3, 0.09 / 0.3, 0.16 / 0.3 };
	double k2[4] = { 0, 0, 3.0 / 7, 4.0 / 7 };
	double p05[4] = { 0, 0, 3.0 / 7, 4.0 / 7 };
	double p06[4] = { 0, 0, 3.0 / 7, 4.0 / 7 };
	double mp[4] = { 0, 2.0 / 9, 3.0 / 9, 4.0 / 9 };
	double greedy[4] = { 0, 0, 0, 1 };

	sample_defaults(&p);
	p.temp = 1;
	probs_of(&p, in, 4, in);
	p.temp = 0.5f;
	probs_of(&p, in, 4, t05);
	p.temp = 1;
	p.top_k = 2;
	probs_of(&p, in, 4, k2);
	p.top_k = 0;
	p.top_p = 0.5f;
	probs_of(&p, in, 4, p05);
	p.top_p = 0.7f;	/* 0.4 + 0.3 reaches it: still two */
	probs_of(&p, in, 4, p06);
	p.top_p = 1;
	p.min_p = 0.45f;	/* keep p >= 0.18 */
	probs_of(&p, in, 4, mp);
	p.min_p = 0;
	p.temp = 0;
	probs_of(&p, in, 4, greedy);
}

TEST(penalties_apply_to_the_window_of_history)
{
	struct sample_params p;
	float l[4] = { 2, -1, 1.5f, 0 }, pr[4];
	int32_t hist[5] = { 1, 0, 3, 3, 0 };
	struct sampler *s;

	sample_defaults(&p);
	p.repeat_penalty = 2;
	s = mk(&p, 4);
	CHECK_EQ_INT(sample_next(s, l, hist, 5, 0, 0), 2);	/* 2 -> 1 < 1.5 */
	sample_free(s);
	p.repeat_penalty = 1;
	p.presence_penalty = 0.25f;
	p.frequency_penalty = 0.125f;
	p.temp = 1;
	s = mk(&p, 4);
	CHECK(sample_probs(s, l, hist, 5, pr) == 0);
	/* logits seen: 0 twice (2 - .25 - .25 = 1.5), 1 once (-1.375), 3 twice (-.5) */
	CHECK_NEAR(log(pr[0] / pr[2]), 0, 1e-6);
	CHECK_NEAR(log(pr[1] / pr[2]), -1.375 - 1.5, 1e-5);
	CHECK_NEAR(log(pr[3] / pr[2]), -0.5 - 1.5, 1e-5);
	sample_free(s);
	p.presence_penalty = 1;
	p.frequency_penalty = 0;
	p.penalty_last_n = 2;	/* sees 3, 0 only: 1 keeps its logit */
	s = mk(&p, 4);
	CHECK(sample_probs(s, l, hist, 5, pr) == 0);
	CHECK_NEAR(log(pr[1] / pr[2]), -1 - 1.5, 1e-5);
	CHECK_NEAR(log(pr[0] / pr[2]), 1 - 1.5, 1e-5);
	sample_free(s);
}

/*
 * Logprobs are log_softmax of the penalized row over the temperature (1
 * when greedy), whatever top-k or top-p keep; the top list is the
 * sampler's order (lower id on ties); a token of no finite logit is -inf.
 */
TEST(logprobs_are_the_penalized_log_softmax_over_the_temperature)
{
	struct sample_params p;
	float l[5] = { 2, -1, 1.5f, 2, -INFINITY }, lp, tlp[5];
	int32_t hist[1] = { 3 }, tid[5];
	double z = exp(2) + exp(-1) + exp(1.5) + exp(2);
	struct sampler *s;

	sample_defaults(&p);	/* greedy: the raw log-softmax */
	s = mk(&p, 5);
	CHECK_EQ_INT(sample_logprobs(s, l, hist, 1, 2, 3, &lp, tid, tlp), 3);
	CHECK_NEAR(lp, 1.5 - log(z), 1e-6);
	CHECK_EQ_INT(tid[0], 0);
	CHECK_EQ_INT(tid[1], 3);
	CHECK_EQ_INT(tid[2], 2);
	CHECK_NEAR(tlp[0], 2 - log(z), 1e-6);
	CHECK_NEAR(tlp[1], tlp[0], 0);
	CHECK_EQ_INT(sample_logprobs(s, l, hist, 1, 4, 9, &lp, tid, tlp), 4);	/* 4 finite */
	CHECK(isinf(lp) && lp < 0);
	CHECK_EQ_INT(tid[3], 1);
	sample_free(s);
	p.temp = 0.5f, p.top_k = 1, p.presence_penalty = 1;	/* 3 seen: 2 - 1 */
	s = mk(&p, 5);
	z = exp(4) + exp(-2) + exp(3) + exp(2);
	CHECK_EQ_INT(sample_logprobs(s, l, hist, 1, 3, 2, &lp, tid, tlp), 2);
	CHECK_NEAR(lp, 2 - log(z), 1e-5);
	CHECK_EQ_INT(tid[0], 0);
	CHECK_EQ_INT(tid[1], 2);
	CHECK_NEAR(tlp[1], 3 - log(z), 1e-5);
	CHECK_EQ_INT(sample_logprobs(s, l, hist, 1, 0, 0, &lp, tid, tlp), 0);
	for (int i = 0; i < 5; i++)
		l[i] = -INFINITY;
	CHECK_EQ_INT(sample_logprobs(s, l, hist, 1, 0, 2, &lp, tid, tlp), -1);
	sample_free(s);
}

/*
 * sample_window lists the window's distinct tokens once with their counts
 * (ids outside the vocabulary ignored), and fexp_penalty on them is the
 * whole of the penalties: the unpenalized sampler on that row gives the
 * penalized sampler's distribution and draws, bit for bit.
 */
TEST(the_window_and_fexp_penalty_are_the_penalties)
{
	enum { NV = 300 };
	struct sample_params p, q;
	float l[NV], lp[NV], pa[NV], pb[NV];
	int32_t hist[40], tok[40], cnt[40];
	uint64_t r = 99;
	int k, n_diff = 0;

	for (int i = 0; i < NV; i++) {
		r = r * 6364136223846793005ULL + 1442695040888963407ULL;
		l[i] = (float)((int)(r >> 40) % 1000) / 100.0f - 5.0f;
	}
	for (int i = 0; i < 40; i++)
		hist[i] = i % 9 == 4 ? -1 : i % 13 == 6 ? NV + 3 : (int32_t)((i * 7) % 23);
	l[hist[39]] = 0.0f, l[hist[38]] = -0.0f;
	sample_defaults(&p);
	p.temp = 0.9f, p.top_p = 0.95f, p.repeat_penalty = 1.3f;
	p.presence_penalty = 0.25f, p.frequency_penalty = 0.5f, p.penalty_last_n = 30, p.seed = 5;
	q = sample_unpenalized(&p);
	CHECK(sample_has_penalty(&p) && !sample_has_penalty(&q));
	struct sampler *sa = mk(&p, NV), *sb = mk(&q, NV);
	k = sample_window(sa, hist, 40, tok, cnt);
	int seen[NV] = { 0 }, total = 0;
	for (int i = 10; i < 40; i++)	/* the last 30 */
		if (hist[i] >= 0 && hist[i] < NV && seen[hist[i]]++ == 0)
			total++;
	CHECK_EQ_INT(k, total);
	for (int i = 0; i < k; i++)
		CHECK_EQ_INT(cnt[i], seen[tok[i]]);
	memcpy(lp, l, sizeof l);
	for (int i = 0; i < k; i++)
		lp[tok[i]] = fexp_penalty(lp[tok[i]], p.repeat_penalty, p.presence_penalty,
		    p.frequency_penalty, cnt[i]);
	CHECK(sample_probs(sa, l, hist, 40, pa) == 0);
	CHECK(sample_probs(sb, lp, NULL, 0, pb) == 0);
	CHECK(memcmp(pa, pb, sizeof pa) == 0);
	for (int64_t pos = 0; pos < 200; pos++)
		n_diff += sample_next(sa, l, hist, 40, 1, pos) != sample_next(sb, lp, NULL, 0, 1, pos);
	CHECK_EQ_INT(n_diff, 0);
	CHECK_EQ_INT(sample_window(sa, hist, 0, tok, cnt), 0);
	sample_free(sa), sample_free(sb);
}

TEST(runs_reproduce_by_seed_sequence_and_position)
{
	struct sample_params p;
	float l[64];
	int32_t a[32], b[32];
	struct sampler *s;
	int differ = 0;

	for (int i = 0; i < 64; i++)
		l[i] = (float)(i % 7) * 0.3f;
	sample_defaults(&p);
	p.temp = 1.3f;
	p.seed = 99;
	s = mk(&p, 64);
	for (int i = 0; i < 32; i++)
		a[i] = sample_next(s, l, NULL, 0, 5, i);
	for (int i = 31; i >= 0; i--) {	/* another order, other sequences between */
		sample_next(s, l, NULL, 0, 6, i);
		b[i] = sample_next(s, l, NULL, 0, 5, i);
	}
	CHECK(memcmp(a, b, sizeof a) == 0);
	for (int i = 0; i < 32; i++)
		differ += sample_next(s, l, NULL, 0, 6, i) != a[i];
	CHECK(differ > 10);
	sample_free(s);
}

TEST(rejection_sampling_preserves_the_target_distribution)
{
	struct sample_params p;
	float pt[4] = { 0.5f, 0.1f, 0.3f, 0.1f }, q[4] = { 0.1f, 0.6f, 0.1f, 0.2f };
	int count[4] = { 0 }, n = 100000, acc, n_acc = 0;
	struct sampler *s;

	sample_defaults(&p);
	p.temp = 1;
	p.seed = 3;
	s = mk(&p, 4);
	for (int i = 0; i < n; i++) {
		double u = sample_uniform(1234, 1, i, 0), c = 0;
		int d = 3;

		for (int k = 0; k < 4; k++)
			if (u < (c += q[k])) {
				d = k;
				break;
			}
		count[sample_accept(s, pt, q, d, 0, i, &acc)]++;
		n_acc += acc;
	}
	for (int i = 0; i < 4; i++)
		CHECK_NEAR((double)count[i] / n, pt[i], 0.006);
	/* expected acceptance: sum min(p, q) = 0.1 + 0.1 + 0.1 + 0.1 */
	CHECK_NEAR((double)n_acc / n, 0.4, 0.006);
	sample_free(s);
}

TEST(greedy_acceptance_is_exact_match)
{
	struct sample_params p;
	float pt[3] = { 0, 1, 0 }, q1[3] = { 0, 1, 0 }, q2[3] = { 0, 0, 1 };
	struct sampler *s;
	int acc;

	sample_defaults(&p);
	s = mk(&p, 3);
	for (int i = 0; i < 100; i++) {
		CHECK_EQ_INT(sample_accept(s, pt, q1, 1, 0, i, &acc), 1);
		CHECK_EQ_INT(acc, 1);
		CHECK_EQ_INT(sample_accept(s, pt, q2, 2, 0, i, &acc), 1);
		CHECK_EQ_INT(acc, 0);
	}
	sample_free(s);
}

static int
stop_on_7(void *ctx, int32_t tok)
{
	++*(int *)ctx;
	return tok == 7;
}

TEST(stops_on_ids_hook_and_limit)
{
	struct sample_params p;
	int32_t stops[2] = { 3, 5 };
	int calls = 0;
	struct sampler *s;

	sample_defaults(&p);
	p.stop_ids = stops;
	p.n_stop = 2;
	p.stop_fn = stop_on_7;
	p.stop_ctx = &calls;
	p.max_tokens = 10;
	s = mk(&p, 16);
	CHECK(sample_stop(s, 5, 1));
	CHECK(!sample_stop(s, 4, 1));
	CHECK(sample_stop(s, 7, 1));
	CHECK(sample_stop(s, 4, 10));
	CHECK(!sample_stop(s, 4, 9));
	CHECK_EQ_INT(calls, 4);
	sample_free(s);
}

/*
 * sample_top then sample_next_top draw what sample_next draws from the
 * whole row, at every top-k, temperature, top-p and min-p tried, on rows
 * with ties (also after the division by temp), signed zeros, NaN and
 * infinities, and rows with fewer finite values than k.
 */
TEST(the_top_k_alone_draws_what_the_whole_row_draws)
{
	enum { N = 3000 };
	static const float temps[] = { 0.3f, 0.7f, 1.0f, 1.7f };
	static const int ks[] = { 1, 2, 40, 1024 };
	float *x = malloc(N * sizeof *x), val[1024];
	int32_t id[1024];
	uint64_t *key = malloc(N * sizeof *key), r = 0x12345;
	int n_diff = 0, n_draw = 0;

	for (int row = 0; row < 24; row++) {
		int nf = row % 6 == 5 ? 30 : N;	/* then only 30 finite */

		for (int i = 0; i < N; i++) {
			r = r * 6364136223846793005ULL + 1442695040888963407ULL;
			x[i] = (float)((int)(r >> 40) % 64) / 8.0f - 4.0f;	/* many ties */
			if (i % 97 == 3)
				x[i] = 1.0f + (float)i * 1e-7f;	/* distinct, tie after / temp */
			if (i >= nf || i % 211 == 7)
				x[i] = i % 3 ? NAN : i % 2 ? INFINITY : -INFINITY;
		}
		x[17] = -0.0f, x[18] = 0.0f;
		for (int ti = 0; ti < 4; ti++)
			for (int ki = 0; ki < 4; ki++) {
				struct sample_params p;
				struct sampler *s;

				sample_defaults(&p);
				p.temp = temps[ti], p.top_k = ks[ki], p.seed = 7 + row;
				p.top_p = row % 3 == 0 ? 0.9f : 1.0f;
				p.min_p = row % 4 == 1 ? 0.05f : 0.0f;
				CHECK_EQ_INT(sample_top_k(&p), ks[ki]);
				if ((s = mk(&p, N)) == NULL)
					continue;
				int m = sample_top(x, N, p.top_k, p.temp, val, id, key), fin = 0;
				for (int i = 0; i < N; i++)
					fin += isfinite(x[i]) != 0;
				CHECK_EQ_INT(m, p.top_k < fin ? p.top_k : fin);
				for (int64_t pos = 0; pos < 8; pos++) {
					n_draw++;
					n_diff += sample_next_top(s, val, id, p.top_k, row, pos) !=
					    sample_next(s, x, NULL, 0, row, pos);
				}
				sample_free(s);
			}
	}
	CHECK_EQ_INT(n_diff, 0);
	printf("# %d draws, %d differ\n", n_draw, n_diff);
	free(x), free(key);
}

TEST(the_whole_row_draw_only_without_top_k_or_penalties)
{
	struct sample_params p;

	sample_defaults(&p);
	CHECK(!sample_row_draw(&p));	/* greedy */
	p.temp = 0.8f, p.top_p = 0.9f, p.min_p = 0.05f;
	CHECK(sample_row_draw(&p));
	p.top_k = 2000;			/* a top-k, even past backend_topk's */
	CHECK(!sample_row_draw(&p));
	p.top_k = 0, p.presence_penalty = 0.5f;
	CHECK(!sample_row_draw(&p));
}

TEST(top_k_alone_only_without_penalties_and_in_range)
{
	struct sample_params p;

	sample_defaults(&p);
	CHECK_EQ_INT(sample_top_k(&p), 0);	/* greedy */
	p.temp = 0.8f;
	CHECK_EQ_INT(sample_top_k(&p), 0);	/* no top-k: the whole row */
	p.top_k = 40;
	CHECK_EQ_INT(sample_top_k(&p), 40);
	p.top_k = SAMPLE_TOPK_MAX + 1;
	CHECK_EQ_INT(sample_top_k(&p), 0);
	p.top_k = 40, p.repeat_penalty = 1.1f;
	CHECK_EQ_INT(sample_top_k(&p), 0);
	p.repeat_penalty = 1, p.presence_penalty = 0.5f;
	CHECK_EQ_INT(sample_top_k(&p), 0);
}

TEST(out_of_range_parameters_are_refused)
{
	struct sample_params p;
	char err[UTIL_ERRLEN];

	sample_defaults(&p);
	p.temp = -1;
	CHECK(sample_new(&p, 4, err) == NULL);
	CHECK_EQ_STR(err, "sample: temperature -1 (want >= 0)");
	sample_defaults(&p);
	p.top_p = 0;
	CHECK(sample_new(&p, 4, err) == NULL);
	CHECK_EQ_STR(err, "sample: top-p 0 (want (0, 1])");
	sample_defaults(&p);
	p.min_p = 1.5f;
	CHECK(sample_new(&p, 4, err) == NULL);
	sample_defaults(&p);
	p.repeat_penalty = 0;
	CHECK(sample_new(&p, 4, err) == NULL);
	sample_defaults(&p);
	CHECK(sample_new(&p, 0, err) == NULL);
	sample_free(NULL);
}

int
main(void)
{
	RUN(rng_is_a_pure_function_of_its_key);
	RUN(greedy_is_the_argmax_lowest_id_on_ties);
	RUN(greedy_equals_the_one_scan_argmax_at_every_length_and_position);
	RUN(draws_follow_the_distribution);
	RUN(weights_are_exp_in_units_of_2_to_the_minus_44);
	RUN(the_kept_set_is_a_full_sorts_bit_for_bit_on_ties_and_signed_zeros);
	RUN(each_filter_keeps_what_it_should);
	RUN(penalties_apply_to_the_window_of_history);
	RUN(the_window_and_fexp_penalty_are_the_penalties);
	RUN(runs_reproduce_by_seed_sequence_and_position);
	RUN(rejection_sampling_preserves_the_target_distribution);
	RUN(greedy_acceptance_is_exact_match);
	RUN(stops_on_ids_hook_and_limit);
	RUN(the_top_k_alone_draws_what_the_whole_row_draws);
	RUN(the_whole_row_draw_only_without_top_k_or_penalties);
	RUN(top_k_alone_only_without_penalties_and_in_range);
	RUN(out_of_range_parameters_are_refused);
	RUN(logprobs_are_the_penalized_log_softmax_over_the_temperature);
	return test_summary();
}
