/*
 * sample: turn a row of logits into the next token.
 *
 * Order (as transformers applies its warpers): repetition, presence and
 * frequency penalties on the logits, then temperature, top-k, top-p,
 * min-p, and a draw from what is left.  temp 0 is greedy: the argmax
 * after penalties, lowest id on ties.
 *
 * The distribution is in integers, so that every backend draws the same
 * token from the same logits whatever order it sums in: the candidates,
 * ordered by z = logit / temp descending (then id ascending), weigh
 * w = fexp_weight(z - z_top) (lib/fexp.h: exp in units of 2^-44,
 * truncated; the most likely SAMPLE_WONE), a softmax's numerators.  Top-p
 * keeps the shortest prefix whose weight reaches fexp_top_p of the total,
 * min-p the candidates of that prefix with w >= fexp_min_p (min_p times
 * the top one's), and the draw is the first kept candidate whose running
 * weight passes fexp_point(u, kept weight).  A candidate exp(-30.5) under
 * the top one weighs 0 and is never drawn.
 *
 * Randomness is counter-based: every draw is a pure function of (seed,
 * sequence id, position, stream), so a sampled run is reproducible
 * whatever else is batched with it and in whatever order rows are
 * computed.  A sampler holds scratch only; one sampler serves one thread.
 */
#ifndef MEMRA_SAMPLE_H
#define MEMRA_SAMPLE_H

#include <stdint.h>

struct sample_params {
	float	temp;		/* 0: greedy */
	int	top_k;		/* 0: off */
	float	top_p;		/* 1: off; keep the smallest set with mass >= top_p */
	float	min_p;		/* 0: off; keep p >= min_p * p_max */
	float	repeat_penalty;	/* 1: off; a seen token's logit l becomes l>0 ? l/r : l*r */
	float	presence_penalty;	/* 0: off; l -= presence once a token was seen */
	float	frequency_penalty;	/* 0: off; l -= frequency * times seen */
	int	penalty_last_n;	/* history tokens the penalties look at; -1: all */
	uint64_t seed;
	int	max_tokens;	/* 0: unlimited */
	const int32_t *stop_ids;	/* [n_stop] tokens that end generation */
	int	n_stop;
	/* stop-string hook (the detokenizer's side): 1 ends generation after tok */
	int	(*stop_fn)(void *ctx, int32_t tok);
	void	*stop_ctx;
};

/* Greedy, no filters, no penalties, penalty_last_n 64, seed 0, no limit. */
void	sample_defaults(struct sample_params *);
/* 1 when p picks the plain argmax: temp 0 and no penalty changes a logit. */
int	sample_plain_greedy(const struct sample_params *p);
/*
 * The greedy pick of x[n]: the index of the largest finite value, the
 * lowest on ties (-0 ties +0), -1 when none is finite.
 */
int	sample_argmax(const float *x, int n);

enum sample_stream {	/* independent draws at one (seed, seq, pos) */
	SAMPLE_STREAM_TOKEN, SAMPLE_STREAM_ACCEPT, SAMPLE_STREAM_RESIDUAL,
};

/* The RNG: a uniform double in [0, 1), a pure function of its arguments. */
double	sample_uniform(uint64_t seed, uint64_t seq, int64_t pos, unsigned stream);

struct sampler;

/*
 * A sampler for n_vocab logits with params p (copied; stop_ids must stay
 * valid).  NULL with the reason in err (UTIL_ERRLEN) for out-of-range
 * parameters (temp < 0, top_p outside (0, 1], min_p outside [0, 1],
 * top_k < 0, repeat_penalty <= 0, ...).  sample_free(NULL) is a no-op.
 */
struct sampler *sample_new(const struct sample_params *p, int n_vocab, char *err);
void	sample_free(struct sampler *);
const struct sample_params *sample_params(const struct sampler *);
/* The vocabulary a sampler was made for: the length of a row it reads. */
int	sample_vocab(const struct sampler *);

/*
 * The next token for the row of logits [n_vocab] (host memory), given the
 * history hist[n_hist] (prompt and generated ids, for the penalties), for
 * sequence seq at position pos (the position the sampled token will take).
 * Returns a token id, or -1 when no logit is finite.
 */
int32_t	sample_next(struct sampler *, const float *logits, const int32_t *hist,
	    int n_hist, uint64_t seq, int64_t pos);

/*
 * The distribution sample_next draws from, as probs[n_vocab] (zero
 * outside the kept set; one-hot when greedy).  0, or -1 when no logit is
 * finite.
 */
int	sample_probs(struct sampler *, const float *logits, const int32_t *hist,
	    int n_hist, float *probs);

/*
 * The log-probabilities a draw of sampler s sees, before its truncation:
 * log_softmax(l / t) of the row logits[n_vocab] with the penalties of
 * hist[n_hist] applied (l), t the temperature (1 when greedy).  *lp gets
 * token tok's (-inf when its logit is not finite), top_id[k] and
 * top_lp[k] the k likeliest tokens' (as the sampler orders them: most
 * likely first, the lower id on ties).  Returns how many of those there
 * are (min(k, finite logits)), or -1 when no logit is finite.
 */
int	sample_logprobs(struct sampler *, const float *logits, const int32_t *hist, int n_hist,
	    int32_t tok, int k, float *lp, int32_t *top_id, float *top_lp);

/*
 * Speculative rejection sampling at (seq, pos): the draft proposed token
 * d from its distribution q[n_vocab]; p[n_vocab] is the target's (both as
 * sample_probs gives them).  Accepts d with probability min(1, p[d]/q[d]),
 * else draws from normalize(max(0, p - q)); the result is distributed as
 * p.  Sets *accepted and returns the token to emit.  With one-hot
 * (greedy) p and q this is exact-match acceptance.
 */
int32_t	sample_accept(struct sampler *, const float *p, const float *q, int32_t d,
	    uint64_t seq, int64_t pos, int *accepted);

/*
 * The penalties of a draw for the history hist[n_hist] (prompt and
 * generated ids): the distinct tokens of its window (the last
 * penalty_last_n ids, all with -1; ids outside the vocabulary ignored),
 * each once with its count there, into tok[] and cnt[] (room for the
 * window's length); how many.  Each such token's logit l becomes
 * fexp_penalty(l, repeat, presence, frequency, count) (lib/fexp.h: l / r
 * when positive else l * r, less presence + frequency * count) before
 * anything else, as sample_next applies them; a backend can apply them
 * where the logits are (backend_penalize).
 */
int	sample_window(struct sampler *, const int32_t *hist, int n_hist, int32_t *tok,
	    int32_t *cnt);
/* 1 when a penalty of p changes a logit. */
int	sample_has_penalty(const struct sample_params *p);
/* p without its penalties: what picks from a row they were applied to. */
struct sample_params sample_unpenalized(const struct sample_params *p);

/* The weight of the most likely candidate (exp(0) in units of 2^-44). */
#define SAMPLE_WONE	((uint64_t)1 << 44)

/*
 * 1 when p draws from the whole row with nothing else moving a logit
 * (temp > 0, no top-k, no penalty): then a backend can make sample_next's
 * draw where the row is (backend_draw; of sample_unpenalized once the
 * penalties are on the row).
 */
int	sample_row_draw(const struct sample_params *p);

/* The most candidates a top-k pick takes from elsewhere (backend_topk). */
#define SAMPLE_TOPK_MAX	1024

/*
 * The top of a row as the sampler orders it: of the finite x[i] (i < n),
 * the k with the largest x[i] / temp (IEEE float division; -0 as +0; the
 * lower i first on ties), most likely first, into val[k] (x[i] itself)
 * and id[k]; past the row's finite values id -1 and val NaN.  Returns how
 * many (min(k, finite values)).  key: scratch of n.  temp > 0, k > 0.
 */
int	sample_top(const float *x, int n, int k, float temp, float *val, int32_t *id,
	    uint64_t *key);

/*
 * k when p draws from the top k alone with nothing else moving a logit
 * (temp > 0, 0 < top_k = k <= SAMPLE_TOPK_MAX, no penalty), else 0: then
 * sample_next_top on sample_top's output of the row (or a backend's
 * equal, backend_topk) picks what sample_next picks from the row.
 */
int	sample_top_k(const struct sample_params *p);

/*
 * sample_next from a row's top candidates val[n], id[n] as sample_top
 * gives them (n = sample_top_k; the ids -1 past the row's finite
 * values).  -1 when there is none.
 */
int32_t	sample_next_top(struct sampler *, const float *val, const int32_t *id, int n,
	    uint64_t seq, int64_t pos);

/* 1 when generation ends with tok as the n_generated-th new token:
 * a stop id, the stop hook, or max_tokens reached. */
int	sample_stop(const struct sampler *, int32_t tok, int n_generated);

#endif
