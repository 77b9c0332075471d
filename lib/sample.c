#include "sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fexp.h"
#include "util.h"

struct sample_cand {
	int32_t	id;
	float	logit;		/* z: the logit over temp */
	uint64_t w;		/* its weight (sample.h) */
	double	p;		/* w over the kept set's sum */
};

struct sampler {
	struct sample_params p;
	int	n_vocab;
	float	*logits;		/* [n_vocab] after penalties */
	struct sample_cand *cand;	/* [n_vocab] the kept set, most likely first */
	uint64_t *key, *tmp;		/* [n_vocab] order_key's, and radix scratch */
	int	n_cand;
	uint64_t sum;			/* the kept set's weight */
	int32_t	*count;			/* [n_vocab] zero between calls */
};

void
sample_defaults(struct sample_params *p)
{
	memset(p, 0, sizeof *p);
	p->top_p = 1;
	p->repeat_penalty = 1;
	p->penalty_last_n = 64;
}

static uint64_t
mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

double
sample_uniform(uint64_t seed, uint64_t seq, int64_t pos, unsigned stream)
{
	uint64_t h = mix(mix(mix(mix(seed) ^ seq) ^ (uint64_t)pos) ^ stream);

	return (h >> 11) * (1.0 / 9007199254740992.0);
}

static int
check_params(const struct sample_params *p, int n_vocab, char *err)
{
	if (n_vocab <= 0)
		return util_err(err, "sample: vocabulary of %d", n_vocab);
	if (!(p->temp >= 0) || !isfinite(p->temp))
		return util_err(err, "sample: temperature %g (want >= 0)", p->temp);
	if (p->top_k < 0)
		return util_err(err, "sample: top-k %d (want >= 0)", p->top_k);
	if (!(p->top_p > 0 && p->top_p <= 1))
		return util_err(err, "sample: top-p %g (want (0, 1])", p->top_p);
	if (!(p->min_p >= 0 && p->min_p <= 1))
		return util_err(err, "sample: min-p %g (want [0, 1])", p->min_p);
	if (!(p->repeat_penalty > 0) || !isfinite(p->repeat_penalty))
		return util_err(err, "sample: repeat penalty %g (want > 0)", p->repeat_penalty);
	if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
		return util_err(err, "sample: penalties must be finite");
	if (p->penalty_last_n < -1 || p->max_tokens < 0 || p->n_stop < 0 ||
	    (p->n_stop > 0 && p->stop_ids == NULL))
		return util_err(err, "sample: bad penalty window, token limit or stop list");
	return 0;
}

struct sampler *
sample_new(const struct sample_params *p, int n_vocab, char *err)
{
	struct sampler *s;

	if (check_params(p, n_vocab, err) != 0)
		return NULL;
	if ((s = calloc(1, sizeof *s)) == NULL ||
	    (s->logits = malloc(n_vocab * sizeof *s->logits)) == NULL ||
	    (s->cand = malloc(n_vocab * sizeof *s->cand)) == NULL ||
	    (s->key = malloc(n_vocab * sizeof *s->key)) == NULL ||
	    (s->tmp = malloc(n_vocab * sizeof *s->tmp)) == NULL ||
	    (s->count = calloc(n_vocab, sizeof *s->count)) == NULL) {
		sample_free(s);
		util_err(err, "sample: out of memory");
		return NULL;
	}
	s->p = *p;
	s->n_vocab = n_vocab;
	return s;
}

void
sample_free(struct sampler *s)
{
	if (s == NULL)
		return;
	free(s->logits);
	free(s->cand);
	free(s->key), free(s->tmp);
	free(s->count);
	free(s);
}

const struct sample_params *
sample_params(const struct sampler *s)
{
	return &s->p;
}

int
sample_vocab(const struct sampler *s)
{
	return s->n_vocab;
}

/* 1 when no penalty changes a logit */
static int
no_penalty(const struct sample_params *p)
{
	return p->repeat_penalty == 1 && p->presence_penalty == 0 && p->frequency_penalty == 0;
}

int
sample_plain_greedy(const struct sample_params *p)
{
	return p->temp == 0 && no_penalty(p);
}

int
sample_window(struct sampler *s, const int32_t *hist, int n_hist, int32_t *tok, int32_t *cnt)
{
	const struct sample_params *p = &s->p;
	int n = p->penalty_last_n < 0 || p->penalty_last_n > n_hist ? n_hist : p->penalty_last_n;
	int k = 0;

	for (int i = n_hist - n; i < n_hist; i++)
		if (hist[i] >= 0 && hist[i] < s->n_vocab)
			s->count[hist[i]]++;
	for (int i = n_hist - n; i < n_hist; i++) {
		int32_t t = hist[i];

		if (t < 0 || t >= s->n_vocab || s->count[t] == 0)
			continue;
		tok[k] = t, cnt[k++] = s->count[t];
		s->count[t] = 0;	/* once per token; all zero again at the end */
	}
	return k;
}

/* s->logits = logits with the penalties of the window of hist applied */
static void
penalize(struct sampler *s, const float *logits, const int32_t *hist, int n_hist)
{
	const struct sample_params *p = &s->p;
	int32_t *tok = (int32_t *)s->tmp, *cnt = tok + s->n_vocab;	/* (tmp: 8 bytes a token) */
	int k;

	memcpy(s->logits, logits, s->n_vocab * sizeof *s->logits);
	if (no_penalty(p))
		return;
	k = sample_window(s, hist, n_hist, tok, cnt);
	for (int i = 0; i < k; i++)
		s->logits[tok[i]] = fexp_penalty(s->logits[tok[i]], p->repeat_penalty,
		    p->presence_penalty, p->frequency_penalty, cnt[i]);
}

/*
 * The candidates' order, most likely first: logit descending, then id
 * ascending (+0 and -0 alike), as one integer: the smaller key first.  The
 * float's bits made monotone and inverted above, the id below.
 */
static uint64_t
order_key(float logit, int32_t id)
{
	uint32_t u;

	if (logit == 0)
		logit = 0;		/* -0 sorts as +0 */
	memcpy(&u, &logit, sizeof u);
	u = u & 0x80000000u ? ~u : u | 0x80000000u;	/* ascending with the float */
	return (uint64_t)~u << 32 | (uint32_t)id;
}

static int
cmp_key(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* k[0..n) ascending: LSD radix on the high 32 bits (11 + 11 + 10), stable,
 * so equal logits keep their ids ascending as they came in. */
static void
sort_keys(uint64_t *k, uint64_t *t, int n)
{
	static const int shift[3] = { 32, 43, 54 }, bits[3] = { 11, 11, 10 };

	for (int ps = 0; ps < 3; ps++) {
		int cnt[2049] = { 0 }, mask = (1 << bits[ps]) - 1;

		for (int i = 0; i < n; i++)
			cnt[(k[i] >> shift[ps] & mask) + 1]++;
		for (int d = 0; d < mask + 1; d++)
			cnt[d + 1] += cnt[d];
		for (int i = 0; i < n; i++)
			t[cnt[k[i] >> shift[ps] & mask]++] = k[i];
		memcpy(k, t, (size_t)n * sizeof *k);
	}
}

/* The kk smallest of the distinct keys k[0..n) in k[0..kk), any order
 * (quickselect, median of three). */
static void
select_keys(uint64_t *k, int n, int kk)
{
	int lo = 0, hi = n - 1;

	while (hi > lo) {
		uint64_t a = k[lo], b = k[lo + (hi - lo) / 2], c = k[hi], pv, x;
		int i = lo, j = hi;

		pv = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
		while (i <= j) {
			while (k[i] < pv)
				i++;
			while (k[j] > pv)
				j--;
			if (i <= j)
				x = k[i], k[i++] = k[j], k[j--] = x;
		}
		if (kk - 1 <= j)
			hi = j;
		else if (kk - 1 >= i)
			lo = i;
		else
			return;
	}
}

/* order_key of x[i] / temp for the finite x[i] (i < n) into key; how many. */
static int
finite_keys(const float *x, int n, float temp, uint64_t *key)
{
	int m = 0;

	for (int i = 0; i < n; i++)
		if (isfinite(x[i]))
			key[m++] = order_key(x[i] / temp, i);
	return m;
}

/* The min(k, n) smallest of the keys k[0..n) in order in key[0..): a full
 * sort's first k; how many. */
static int
top_keys(uint64_t *key, int n, int k)
{
	if (k < n) {
		select_keys(key, n, k);
		n = k;
	}
	qsort(key, n, sizeof *key, cmp_key);
	return n;
}

/*
 * Two passes: the maximum in 8 independent lanes (non-finite values read
 * as -inf; the compiler vectorizes it), then the first index equal to it;
 * the same pick as one scan with ">" (a +0 and a -0 compare equal either
 * way).
 */
int
sample_argmax(const float *x, int n)
{
	float lane[8] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY,
	    -INFINITY, -INFINITY, -INFINITY, -INFINITY }, m = -INFINITY;
	int i = 0;

	for (; i + 8 <= n; i += 8)
		for (int l = 0; l < 8; l++) {
			float v = fabsf(x[i + l]) < INFINITY ? x[i + l] : -INFINITY;
			lane[l] = v > lane[l] ? v : lane[l];
		}
	for (; i < n; i++)
		if (fabsf(x[i]) < INFINITY && x[i] > m)
			m = x[i];
	for (int l = 0; l < 8; l++)
		m = lane[l] > m ? lane[l] : m;
	if (m == -INFINITY)
		return -1;
	for (i = 0; x[i] != m; i++)
		;
	return i;
}

/* The greedy pick over l (the logits, penalized or not): the largest finite
 * logit, lowest id on ties; -1 if none. */
static int
greedy(struct sampler *s, const float *l)
{
	int best = sample_argmax(l, s->n_vocab);

	if (best < 0)
		return -1;
	s->cand[0].id = best;
	s->cand[0].logit = l[best];
	s->cand[0].w = SAMPLE_WONE;
	s->cand[0].p = 1;
	s->n_cand = 1;
	s->sum = SAMPLE_WONE;
	return 0;
}

/*
 * s->cand[0..n) (n > 0: the candidates, most likely first, logits over
 * temp) weighed and cut to the set to draw from (sample.h): the weights,
 * the top-p prefix, the min-p floor; p = w / the kept sum.
 */
static int
keep(struct sampler *s, int n)
{
	const struct sample_params *p = &s->p;
	struct sample_cand *c = s->cand;
	uint64_t sum = 0, cum = 0, least = fexp_min_p(p->min_p);
	int k = 0;

	for (int i = 0; i < n; i++)
		sum += c[i].w = i ? fexp_weight(c[i].logit - c[0].logit) : SAMPLE_WONE;
	if (p->top_p < 1) {
		uint64_t target = fexp_top_p(p->top_p, sum);

		for (int i = 0; i < n; i++)
			if ((cum += c[i].w) >= target) {
				n = i + 1;
				break;
			}
	}
	sum = 0;
	for (int i = 0; i < n; i++)
		if (c[i].w >= least) {
			c[k] = c[i];
			sum += c[k++].w;
		}
	for (int i = 0; i < k; i++)
		c[i].p = (double)c[i].w / (double)sum;
	s->n_cand = k;
	s->sum = sum;
	return 0;
}

/* s->cand[0..n_cand): the distribution to draw from, most likely first */
static int
build(struct sampler *s, const float *logits, const int32_t *hist, int n_hist)
{
	const struct sample_params *p = &s->p;
	int n = 0;

	if (sample_plain_greedy(p))
		return greedy(s, logits);	/* no copy: nothing changes a logit */
	penalize(s, logits, hist, n_hist);
	if (p->temp == 0)
		return greedy(s, s->logits);
	if ((n = finite_keys(s->logits, s->n_vocab, p->temp, s->key)) == 0)
		return -1;
	if (p->top_k > 0 && p->top_k < n)
		n = top_keys(s->key, n, p->top_k);
	else
		sort_keys(s->key, s->tmp, n);	/* the ids came in ascending */
	for (int i = 0; i < n; i++) {
		int32_t id = (int32_t)(uint32_t)s->key[i];

		s->cand[i].id = id;
		s->cand[i].logit = s->logits[id] / p->temp;
	}
	return keep(s, n);
}

/* The draw from s->cand[0..n_cand) at (seq, pos): the first candidate
 * whose running weight passes fexp_point of the stream's uniform. */
static int32_t
draw_cand(struct sampler *s, uint64_t seq, int64_t pos)
{
	uint64_t r, cum = 0;

	if (s->n_cand == 1)
		return s->cand[0].id;
	r = fexp_point(sample_uniform(s->p.seed, seq, pos, SAMPLE_STREAM_TOKEN), s->sum);
	for (int i = 0; i < s->n_cand; i++)
		if ((cum += s->cand[i].w) > r)
			return s->cand[i].id;
	return s->cand[s->n_cand - 1].id;	/* (not reached: r < sum) */
}

int32_t
sample_next(struct sampler *s, const float *logits, const int32_t *hist,
    int n_hist, uint64_t seq, int64_t pos)
{
	return build(s, logits, hist, n_hist) != 0 ? -1 : draw_cand(s, seq, pos);
}

int
sample_top(const float *x, int n, int k, float temp, float *val, int32_t *id, uint64_t *key)
{
	int m = top_keys(key, finite_keys(x, n, temp, key), k);

	for (int i = 0; i < k; i++) {
		id[i] = i < m ? (int32_t)(uint32_t)key[i] : -1;
		val[i] = i < m ? x[id[i]] : NAN;
	}
	return m;
}

int
sample_top_k(const struct sample_params *p)
{
	return p->temp > 0 && no_penalty(p) && p->top_k > 0 && p->top_k <= SAMPLE_TOPK_MAX ?
	    p->top_k : 0;
}

struct sample_params
sample_unpenalized(const struct sample_params *p)
{
	struct sample_params q = *p;

	q.repeat_penalty = 1, q.presence_penalty = 0, q.frequency_penalty = 0;
	return q;
}

int
sample_has_penalty(const struct sample_params *p)
{
	return !no_penalty(p);
}

int
sample_row_draw(const struct sample_params *p)
{
	return p->temp > 0 && no_penalty(p) && p->top_k == 0;
}

int32_t
sample_next_top(struct sampler *s, const float *val, const int32_t *id, int n, uint64_t seq,
    int64_t pos)
{
	int m = 0;

	while (m < n && id[m] >= 0) {
		s->cand[m].id = id[m];
		s->cand[m].logit = val[m] / s->p.temp;
		m++;
	}
	if (m == 0 || keep(s, m) != 0)
		return -1;
	return draw_cand(s, seq, pos);
}

int
sample_probs(struct sampler *s, const float *logits, const int32_t *hist,
    int n_hist, float *probs)
{
	if (build(s, logits, hist, n_hist) != 0)
		return -1;
	memset(probs, 0, s->n_vocab * sizeof *probs);
	for (int i = 0; i < s->n_cand; i++)
		probs[s->cand[i].id] = (float)s->cand[i].p;
	return 0;
}

int
sample_logprobs(struct sampler *s, const float *logits, const int32_t *hist, int n_hist,
    int32_t tok, int k, float *lp, int32_t *top_id, float *top_lp)
{
	float t = s->p.temp > 0 ? s->p.temp : 1;
	double mx = -INFINITY, sum = 0, lse;
	int m;

	penalize(s, logits, hist, n_hist);
	for (int i = 0; i < s->n_vocab; i++)
		if (isfinite(s->logits[i]) && s->logits[i] / t > mx)
			mx = s->logits[i] / t;
	if (mx == -INFINITY)
		return -1;
	for (int i = 0; i < s->n_vocab; i++)
		if (isfinite(s->logits[i]))
			sum += exp(s->logits[i] / t - mx);
	lse = mx + log(sum);
	*lp = tok >= 0 && tok < s->n_vocab && isfinite(s->logits[tok]) ?
	    (float)(s->logits[tok] / t - lse) : -INFINITY;
	if (k <= 0)
		return 0;
	m = top_keys(s->key, finite_keys(s->logits, s->n_vocab, t, s->key), k);
	for (int i = 0; i < m; i++) {
		top_id[i] = (int32_t)(uint32_t)s->key[i];
		top_lp[i] = (float)(s->logits[top_id[i]] / t - lse);
	}
	return m;
}

/* a draw from max(0, p - q) (q NULL: from p) in id order, with u in [0, 1) */
static int32_t
draw_residual(int n, const float *p, const float *q, double u)
{
	double sum = 0, cum = 0;
	int last = -1;

	for (int i = 0; i < n; i++) {
		double r = q ? p[i] - q[i] : p[i];

		if (r > 0) {
			sum += r;
			last = i;
		}
	}
	if (last < 0)
		return q ? draw_residual(n, p, NULL, u) : 0;
	u *= sum;
	for (int i = 0; i <= last; i++) {
		double r = q ? p[i] - q[i] : p[i];

		if (r > 0 && u < (cum += r))
			return i;
	}
	return last;
}

int32_t
sample_accept(struct sampler *s, const float *p, const float *q, int32_t d,
    uint64_t seq, int64_t pos, int *accepted)
{
	double u = sample_uniform(s->p.seed, seq, pos, SAMPLE_STREAM_ACCEPT);

	*accepted = 0;
	if (d >= 0 && d < s->n_vocab && p[d] > 0 &&
	    (q[d] <= 0 || u * q[d] < p[d])) {
		*accepted = 1;
		return d;
	}
	u = sample_uniform(s->p.seed, seq, pos, SAMPLE_STREAM_RESIDUAL);
	return draw_residual(s->n_vocab, p, q, u);
}

int
sample_stop(const struct sampler *s, int32_t tok, int n_generated)
{
	for (int i = 0; i < s->p.n_stop; i++)
		if (s->p.stop_ids[i] == tok)
			return 1;
	if (s->p.stop_fn != NULL && s->p.stop_fn(s->p.stop_ctx, tok))
		return 1;
	return s->p.max_tokens > 0 && n_generated >= s->p.max_tokens;
}
