#include "spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "ranks.h"
#include "state.h"
#include "util.h"

_Static_assert(SPEC_KMAX + 1 <= BACKEND_ROWS_MIN,
    "a verify of SPEC_KMAX + 1 rows must keep each row's one-row bits");

enum { MTP_CHUNK = 32 };	/* prompt rows per MTP batch at prefill */
enum { CHAIN_MAX = 8 };		/* NextN blocks chained */

#define DRAFT_SEQ	0x8000000000000000ULL	/* draws of the draft, apart from the target's */

struct spec {
	struct model *m;
	struct state *st;
	struct sampler *smp;
	struct sample_params p;
	struct spec_stats stats;
	uint64_t seq;
	const struct ranks *r;	/* the masked draft head's d2t, or NULL */
	int64_t	nfix;		/* its rows the rank list fixes (learned slots follow) */
	int	K, n_ctx, nv, ne, cap;	/* cap: rows of mlg/hout */
	int	dv;		/* draft logits per row: r->n, or nv */
	int	pick;		/* greedy: the target's picks taken on the backend */
	int	dpick;		/* and the drafts' (full-vocabulary MTP head) */
	int	asst;		/* 1: a gemma4_assistant drafts over the trunk's K/V */
	/* a DFlash / DFlash2 block drafter (model_dflash): it drafts instead of the MTP head */
	const struct model_hparams *dh;	/* its hyper-parameters, or NULL */
	struct state *dst;	/* its context cache */
	int	dfl_len;	/* context rows in it: verified positions */
	int	tw;		/* floats of a row of taps: n_tap * n_embd */
	float	*vt;		/* [K+1][tw] the verify rows' taps */
	int32_t	*dcand;		/* [block-1][top k] DFlash2's candidates */
	float	*dlat;		/* [block-1][top k][top k] their edge scores */
	float	*dlg;		/* [block-1][dv] DFlash's draft logits */
	int32_t	*hist;		/* [n_ctx + K + 2] prompt and new tokens */
	int	n_hist;
	int	mtp_len;	/* MTP KV cache length: verified positions */
	int	last;		/* row of mlg/hout that drafts the next token */
	float	*vlg;		/* [K+1][nv] verify logits (pick: NULL) */
	int32_t	vid[SPEC_KMAX + 1];	/* pick: the verify rows' greedy ids */
	int32_t	tk[SPEC_KMAX + 1];	/* the verify rows: the last token, the drafts */
	int	pending;	/* drafts in tk that wait for their verify; -1: none */
	int32_t	*mid;		/* [cap] dpick: the MTP slots' greedy ids */
	float	*vh;		/* [K+1][ne] verify hidden */
	float	*mlg;		/* [cap][dv] MTP logits (dpick: NULL) */
	float	*full;		/* [nv] masked draft logits scattered (r != NULL) */
	float	*hout;		/* [cap][ne] MTP output hidden */
	float	*hl;		/* [ne] the chain's hidden */
	/* a chain of nb > 1 NextN blocks (step35): block b's slot i takes block b-1's output
	 * at slot i (block 0: the trunk's) and the token t[i+1+b] */
	int	nb;		/* blocks chained: min(n_mtp, K) */
	int	blen[CHAIN_MAX];	/* block b's cache: its verified slots (blen[0]: mtp_len) */
	float	*ob[CHAIN_MAX];	/* [cap+K+2][ne] block b's outputs: row 0 at slot blen[b]-1,
				 * then the rows after it */
	int32_t	*cid;		/* [cap+K+2] a chained step's greedy picks */
	float	*q;		/* [K][nv] draft distributions (temp > 0) */
	float	*pp;		/* [nv] target distribution (temp > 0) */
	float	*ph;		/* spec_prefill_logits: the last part's hidden rows [pm][ne]
				 * until spec_first, or NULL (a DFlash drafter's: pm 0, its
				 * context went in with the part) */
	int	pfrom, pm;
	char	err[UTIL_ERRLEN];
};

/* The DFlash drafter's cache and buffers (dh: its hyper-parameters). */
static int
dflash_new(struct spec *s, const struct model_hparams *dh, char *err)
{
	size_t b = dh->block - 1, k = dh->sel_topk;

	s->dh = dh;
	s->tw = dh->n_tap * s->ne;
	if ((s->dst = model_dflash_state(s->m, s->n_ctx, 0, err)) == NULL)
		return -1;
	if ((s->vt = malloc((size_t)(s->K + 1) * s->tw * sizeof *s->vt)) == NULL ||
	    (s->dcand = malloc((b * k + 1) * sizeof *s->dcand)) == NULL ||
	    (s->dlat = malloc((b * k * k + 1) * sizeof *s->dlat)) == NULL ||
	    (k == 0 && (s->dlg = model_host_alloc(s->m, b * s->dv)) == NULL))
		return util_err(err, "out of memory");
	return 0;
}

struct spec *
spec_new(struct model *m, int K, int n_ctx, const struct sample_params *p, uint64_t seq,
    char *err)
{
	const struct model_hparams *hp = model_hparams(m);
	struct spec *s;
	size_t nv = hp->n_vocab, ne = hp->n_embd, cap = K + 1 > MTP_CHUNK ? K + 1 : MTP_CHUNK;

	const struct model_hparams *dh = model_dflash(m);

	if (hp->n_mtp < 1 && !model_has_assist(m) && dh == NULL) {
		util_err(err, "model has no MTP head or assistant drafter to draft with");
		return NULL;
	}
	if (K < 1 || K > SPEC_KMAX || n_ctx < 2 || (dh != NULL && K > dh->block - 1)) {
		util_err(err, "K %d: out of range 1..%d", K, dh != NULL ? dh->block - 1 : SPEC_KMAX);
		return NULL;
	}
	if ((s = calloc(1, sizeof *s)) == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	s->m = m, s->K = K, s->n_ctx = n_ctx, s->nv = nv, s->ne = ne, s->cap = cap, s->seq = seq;
	s->pending = -1;
	s->asst = model_has_assist(m);
	s->r = model_draft_ranks(m, NULL, NULL);
	s->nfix = model_draft_fixed(m);
	s->dv = model_draft_vocab(m);
	if (p != NULL)
		s->p = *p;
	else
		sample_defaults(&s->p);
	s->pick = sample_plain_greedy(&s->p);
	s->dpick = s->pick && s->r == NULL;	/* ranks_argmax breaks ties by target id */
	s->hist = malloc((size_t)(n_ctx + K + 2) * sizeof *s->hist);
	/* what the backend writes; picks on the backend read no logits */
	s->vlg = s->pick ? NULL : model_host_alloc(m, (size_t)(K + 1) * nv);
	s->vh = model_host_alloc(m, (size_t)(K + 1) * ne);
	s->mlg = s->dpick ? NULL : model_host_alloc(m, (size_t)cap * s->dv);
	s->full = malloc(nv * sizeof(float));
	s->hout = model_host_alloc(m, (size_t)cap * ne);
	s->hl = malloc(ne * sizeof(float));
	s->q = malloc(K * nv * sizeof(float));
	s->pp = malloc(nv * sizeof(float));
	s->mid = malloc(cap * sizeof *s->mid);
	s->nb = dh != NULL ? 1 : hp->n_mtp < K ? hp->n_mtp : K;
	s->nb = s->nb > CHAIN_MAX ? CHAIN_MAX : s->nb;
	s->cid = malloc((cap + K + 2) * sizeof *s->cid);
	for (int b = 0; b < s->nb && s->nb > 1; b++)
		if ((s->ob[b] = calloc((cap + K + 2) * ne, sizeof(float))) == NULL)
			s->cid = (free(s->cid), NULL);
	if (s->mid == NULL || s->cid == NULL || s->hist == NULL || (!s->pick && s->vlg == NULL) || s->vh == NULL ||
	    (!s->dpick && s->mlg == NULL) ||
	    s->hout == NULL || s->full == NULL || s->hl == NULL || s->q == NULL || s->pp == NULL) {
		util_err(err, "out of memory");
		spec_free(s);
		return NULL;
	}
	if ((s->smp = sample_new(&s->p, nv, err)) == NULL ||
	    (s->st = model_state_new(m, n_ctx, K + 1, err)) == NULL ||
	    (dh != NULL && dflash_new(s, dh, err) != 0)) {
		spec_free(s);
		return NULL;
	}
	return s;
}

void
spec_free(struct spec *s)
{
	if (s == NULL)
		return;
	state_free(s->st);
	state_free(s->dst);
	free(s->vt), free(s->dcand), free(s->dlat);
	model_host_free(s->m, s->dlg);
	sample_free(s->smp);
	model_host_free(s->m, s->vlg), model_host_free(s->m, s->vh);
	model_host_free(s->m, s->mlg), model_host_free(s->m, s->hout);
	free(s->hist), free(s->mid), free(s->cid);
	for (int b = 0; b < CHAIN_MAX; b++)
		free(s->ob[b]);
	free(s->hl), free(s->q), free(s->pp), free(s->full), free(s->ph);
	free(s);
}

const char *
spec_errmsg(const struct spec *s)
{
	return s->err;
}

const struct spec_stats *
spec_stats(const struct spec *s)
{
	return &s->stats;
}

void
spec_stats_reset(struct spec *s)
{
	memset(&s->stats, 0, sizeof s->stats);
}

static int
fail_model(struct spec *s)
{
	util_err(s->err, "%s", model_errmsg(s->m));
	return -1;
}

/* The next token at position pos from a row of logits, given hist[n]. */
static int32_t
next(struct spec *s, const float *lg, int n, uint64_t seq)
{
	int32_t t = sample_next(s->smp, lg, s->hist, n, seq, n);

	if (t < 0)
		util_err(s->err, "position %d: no finite logit", n);
	return t;
}

/* Block b's output row at slot i (the carry row 0 is slot blen[b] - 1; base: blen[b] then). */
static float *
chain_row(struct spec *s, int b, int base, int i)
{
	return s->ob[b] + (size_t)(i - base + 1) * s->ne;
}

/*
 * The chain's blocks 1.. brought up to what block 0's c new rows (its
 * outputs in hout) and the known tokens allow: block b's slots up to
 * min(blen[b-1], n_hist - 1 - b), their inputs block b-1's outputs;
 * then each block's last output is its carry row.
 */
static int
chain_append(struct spec *s, int c)
{
	int old[CHAIN_MAX], r[CHAIN_MAX];

	memcpy(s->ob[0] + s->ne, s->hout, (size_t)c * s->ne * sizeof(float));
	old[0] = s->mtp_len - c, r[0] = c;
	for (int b = 1; b < s->nb; b++) {
		int tgt = s->n_hist - 1 - b < s->blen[b - 1] ? s->n_hist - 1 - b : s->blen[b - 1];

		old[b] = s->blen[b], r[b] = tgt > old[b] ? tgt - old[b] : 0;
		if (r[b] > 0 && model_mtp(s->m, s->st, b, old[b], chain_row(s, b - 1, old[b - 1],
		    old[b]), s->hist + old[b] + 1 + b, r[b], NULL, s->ob[b] + s->ne) != 0)
			return fail_model(s);
		s->blen[b] += r[b];
	}
	for (int b = 0; b < s->nb; b++)
		if (r[b] > 0)
			memcpy(s->ob[b], s->ob[b] + (size_t)r[b] * s->ne, s->ne * sizeof(float));
	return 0;
}

/*
 * MTP slots for rows 0..m-1 of hidden h (trunk rows at the MTP cache's
 * next positions), each with the token that followed it; the last row's
 * logits and output become the next draft's.
 */
static int
mtp_append(struct spec *s, const float *h, const int32_t *tok, int m)
{
	if (s->dh != NULL) {	/* h: the taps of the rows, the drafter's context */
		if (model_dflash_context(s->m, s->dst, s->dfl_len, h, m) != 0)
			return fail_model(s);
		s->dfl_len += m;
		return 0;
	}
	if (s->asst) {	/* no cache of its own: the last row's hidden drafts next */
		memcpy(s->hout, h + (size_t)(m - 1) * s->ne, s->ne * sizeof *s->hout);
		s->mtp_len += m;
		s->last = 0;
		return 0;
	}
	for (int i = 0; i < m; i += s->cap) {
		int c = m - i < s->cap ? m - i : s->cap;

		if ((s->dpick ? model_mtp_argmax(s->m, s->st, 0, s->mtp_len, h + (size_t)i * s->ne,
		    tok + i, c, s->mid, s->hout) : model_mtp(s->m, s->st, 0, s->mtp_len,
		    h + (size_t)i * s->ne, tok + i, c, s->mlg, s->hout)) != 0)
			return fail_model(s);
		s->mtp_len += c;
		s->blen[0] = s->mtp_len;
		s->last = c - 1;
		if (s->nb > 1 && chain_append(s, c) != 0)
			return -1;
	}
	return 0;
}

/* Zero the chain: blocks 1.. at slot base - b (their carries unknown: zero). */
static void
chain_reset(struct spec *s, int base)
{
	for (int b = 0; b < s->nb && s->nb > 1; b++) {
		s->blen[b] = base - b > 0 ? base - b : 0;
		memset(s->ob[b], 0, s->ne * sizeof(float));
	}
}

/*
 * Rows [from, to) of the prompt: the last part's first token drawn here
 * into *first, or (lg) the last row's logits into lg and the part's hidden
 * rows kept for spec_first.
 */
static int
prefill(struct spec *s, const int32_t *prompt, int n, int from, int to, int32_t *first,
    float *lg)
{
	float *h;
	int m = to - from, last = to == n, rc = -1;

	if (n < 1 || n + 1 > s->n_ctx || from < 0 || to <= from || to > n ||
	    (from > 0 && (s->n_hist != n || state_pos(s->st) != from)))
		return util_err(s->err, "prompt rows %d..%d of %d: not the next part of a prompt "
		    "the context of %d holds", from, to, n, s->n_ctx);
	if ((h = malloc((size_t)m * (s->dh ? s->tw : s->ne) * sizeof *h)) == NULL)	/* once a part: page-locking */
		return util_err(s->err, "out of memory");	/* it costs more than it saves */
	free(s->ph), s->ph = NULL;
	if (from == 0) {
		state_reset(s->st);
		s->mtp_len = s->dfl_len = 0;
		chain_reset(s, 0);
		s->pending = -1;
		memcpy(s->hist, prompt, n * sizeof *prompt);
		s->n_hist = n;
	}
	if (lg == NULL)
		lg = s->vlg;
	else if (last) {	/* the caller draws the first token: spec_first */
		if (model_forward(s->m, s->st, prompt + from, m, MODEL_PREFILL, lg, h) != 0 ||
		    (s->dh != NULL && model_taps(s->m, h, m) != 0)) {	/* the drafter's context */
			free(h);
			return fail_model(s);
		}
		/* a DFlash drafter's context needs no next token: in now, as the prompt's part
		 * ends (a block or a ring saved at its end holds it) */
		if (s->dh != NULL && mtp_append(s, h, NULL, m) != 0) {
			free(h);
			return -1;
		}
		s->ph = h, s->pfrom = from, s->pm = s->dh != NULL ? 0 : m;
		return 0;
	}
	if ((!last ? model_forward(s->m, s->st, prompt + from, m, MODEL_PREFILL, NULL, h) :
	    s->pick ? model_forward_argmax(s->m, s->st, prompt + from, m, MODEL_PREFILL, first, h) :
	    model_forward(s->m, s->st, prompt + from, m, MODEL_PREFILL, lg, h)) != 0) {
		fail_model(s);
		goto out;
	}
	if (last && s->pick && *first < 0) {
		util_err(s->err, "position %d: no finite logit", n);
		goto out;
	}
	if (s->dh != NULL && model_taps(s->m, h, m) != 0) {	/* the drafter's context */
		fail_model(s);
		goto out;
	}
	if (last && !s->pick && (*first = next(s, lg, n, s->seq)) < 0)
		goto out;
	if (last) {
		s->hist[s->n_hist++] = *first;
		model_assist_learn(s->m, first, 1);
	}
	rc = mtp_append(s, h, s->hist + from + 1, m);
out:
	free(h);
	return rc;
}

int
spec_prefill_part(struct spec *s, const int32_t *prompt, int n, int from, int to,
    int32_t *first)
{
	return prefill(s, prompt, n, from, to, first, NULL);
}

int
spec_prefill_logits(struct spec *s, const int32_t *prompt, int n, int from, int to, float *lg)
{
	return prefill(s, prompt, n, from, to, NULL, lg);
}

int
spec_first(struct spec *s, int32_t first)
{
	int rc;

	if (s->ph == NULL)
		return util_err(s->err, "spec_first: no prompt waits for its first token");
	if (first < 0 || first >= s->nv)
		rc = util_err(s->err, "spec_first: token %d: out of range", first);
	else {
		s->hist[s->n_hist++] = first;
		model_assist_learn(s->m, &first, 1);
		rc = mtp_append(s, s->ph, s->hist + s->pfrom + 1, s->pm);
	}
	free(s->ph), s->ph = NULL;
	return rc;
}

int
spec_resume(struct spec *s, const int32_t *prompt, int n, int from)
{
	if (n < 1 || n + 1 > s->n_ctx || from < 1 || from >= n || state_pos(s->st) != from)
		return util_err(s->err, "resume at row %d of a prompt of %d: the state is at %d",
		    from, n, state_pos(s->st));
	memcpy(s->hist, prompt, n * sizeof *prompt);
	s->n_hist = n;
	s->mtp_len = s->dfl_len = from;
	free(s->ph), s->ph = NULL;
	chain_reset(s, from);
	s->blen[0] = from;
	s->pending = -1;
	return 0;
}

int
spec_prefill(struct spec *s, const int32_t *prompt, int n, int32_t *first)
{
	return spec_prefill_part(s, prompt, n, 0, n, first);
}

/* Draw a token from the distribution q[nv] with the uniform u. */
static int32_t
draw(const float *q, int nv, double u)
{
	double c = 0, tot = 0;
	int32_t last = -1;

	for (int i = 0; i < nv; i++)
		tot += q[i];
	for (int i = 0; i < nv; i++) {
		if (q[i] <= 0)
			continue;
		last = i;
		if ((c += q[i]) > u * tot)
			return i;
	}
	return last;
}

/*
 * Draft logits lg as full-vocabulary logits: lg itself, or a masked
 * head's scattered onto the canvas (-inf off the rank list); fixed: only
 * the rows the rank list fixes, not the learned slots after them.
 */
static const float *
full_logits(struct spec *s, const float *lg, int fixed)
{
	struct ranks r;

	if (s->r == NULL)
		return lg;
	r = *s->r;
	if (fixed)
		r.n = s->nfix;
	ranks_scatter(&r, lg, s->full, s->nv);
	return s->full;
}

/*
 * Draft step j >= 1 of a chain (hist holds drafts 0..j-1): block j over
 * its slots from blen[j] to the last verified one (block j-1's outputs
 * there, the tokens j+1 on), or past the last block, block nb-1 on its
 * own last output one slot further (row *o of its outputs).  The last
 * row's pick in *id (dpick) or logits in *lg.
 */
static int
chain_step(struct spec *s, int j, int *o, int32_t *id, const float **lg)
{
	int b = j < s->nb ? j : s->nb - 1, p, r;
	const float *in;
	float *out;

	if (j < s->nb) {
		p = s->blen[b], r = s->n_hist - 1 - p;
		in = chain_row(s, b - 1, s->blen[b - 1], p), out = s->ob[b] + s->ne, *o = r;
	} else {
		p = s->n_hist - 1 + j - s->nb, r = 1;
		in = s->ob[b] + (size_t)*o * s->ne, out = s->ob[b] + (size_t)++*o * s->ne;
	}
	if ((s->dpick ? model_mtp_argmax(s->m, s->st, b, p, in, s->hist + p + 1 + b, r, s->cid,
	    out) : model_mtp(s->m, s->st, b, p, in, s->hist + p + 1 + b, r, s->mlg, out)) != 0)
		return fail_model(s);
	*id = s->dpick ? s->cid[r - 1] : -1;
	*lg = s->dpick ? NULL : s->mlg + (size_t)(r - 1) * s->dv;
	return 0;
}

/*
 * Draft token j at position n + j from the draft logits lg into *d.  A
 * sampled draft (temp > 0) draws from the rank list's rows alone: its q
 * moves which token the rejection sampling keeps, and the learned slots,
 * which change with what the model served before, must not.
 */
static int
draft_pick(struct spec *s, const float *lg, int n, int j, int32_t *d)
{
	if (s->r != NULL && s->pick) {
		if ((*d = ranks_argmax(s->r, lg)) < 0)
			return util_err(s->err, "position %d: no finite draft logit", n + j);
	} else if (s->p.temp == 0) {
		if ((*d = next(s, full_logits(s, lg, 0), n + j, s->seq ^ DRAFT_SEQ)) < 0)
			return -1;
	} else {
		float *q = s->q + (size_t)j * s->nv;

		if (sample_probs(s->smp, full_logits(s, lg, 1), s->hist, n + j, q) != 0)
			return util_err(s->err, "position %d: no finite draft logit", n + j);
		*d = draw(q, s->nv, sample_uniform(s->p.seed, s->seq ^ DRAFT_SEQ, n + j,
		    SAMPLE_STREAM_TOKEN));
	}
	return 0;
}

/*
 * The assistant's k drafts into d: each step feeds the last token (the
 * last emitted one, then its own draft) and the hidden before it, at the
 * one position n - 1 of the last emitted token, over the trunk's K/V of
 * the positions before it.
 */
static int
draft_assist(struct spec *s, int32_t *d, int k)
{
	int n = s->n_hist;

	memcpy(s->hl, s->hout, s->ne * sizeof *s->hl);
	for (int j = 0; j < k; j++) {
		int32_t t = j == 0 ? s->hist[n - 1] : d[j - 1];

		if (model_assist(s->m, s->st, n - 1, s->hl, t, s->dpick ? NULL : s->mlg,
		    s->dpick ? &d[j] : NULL, s->hl) != 0)
			return fail_model(s);
		if (s->dpick && d[j] < 0)
			return util_err(s->err, "position %d: no finite draft logit", n + j);
		if (!s->dpick && draft_pick(s, s->mlg, n, j, &d[j]) != 0)
			return -1;
		s->hist[n + j] = d[j];
	}
	return 0;
}

/*
 * DFlash2's candidate q row j (the softmax of the edge scores row[kk] at
 * the temperature) onto the vocabulary in s->q, and the draw from it.
 */
static int
selector_draw(struct spec *s, const float *row, const int32_t *cand, int kk, int n, int j)
{
	float *q = s->q + (size_t)j * s->nv, mx = row[0];
	double tot = 0, u, c = 0;
	int b = 0;

	for (int i = 1; i < kk; i++)
		mx = row[i] > mx ? row[i] : mx;
	memset(q, 0, s->nv * sizeof *q);
	for (int i = 0; i < kk; i++)
		tot += (q[cand[i]] = expf((row[i] - mx) / s->p.temp));
	for (int i = 0; i < kk; i++)
		q[cand[i]] = (float)(q[cand[i]] / tot);
	u = sample_uniform(s->p.seed, s->seq ^ DRAFT_SEQ, n + j, SAMPLE_STREAM_TOKEN);
	for (b = 0; b < kk - 1 && (c += q[cand[b]]) <= u; b++)
		;
	return b;
}

/*
 * The DFlash drafter's k drafts into d: one forward over [anchor, mask x
 * (block - 1)] at the anchor's position n - 1 (the last emitted token,
 * not yet run by the trunk), then DFlash2's walk over its lattice from
 * the anchor (greedy: each row's best edge after the previous pick;
 * temp > 0: a draw from the softmax of that row's edges, q kept for the
 * verify), or DFlash's picks from its logits as the MTP head's are.
 */
static int
draft_dflash(struct spec *s, int32_t *d, int k)
{
	int n = s->n_hist, kk = s->dh->sel_topk, prev = 0;
	struct model_dflash_out o = { NULL, s->dlg, s->dlat, s->dcand };

	if (s->dfl_len != n - 1)
		return util_err(s->err, "DFlash: context of %d rows for an anchor at %d", s->dfl_len,
		    n - 1);
	if (model_dflash_draft(s->m, s->dst, n - 1, s->hist[n - 1], &o) != 0)
		return fail_model(s);
	for (int j = 0; j < k; j++) {
		const float *row = s->dlat + ((size_t)j * kk + prev) * kk;
		int b = 0;

		if (kk == 0 && draft_pick(s, s->dlg + (size_t)j * s->dv, n, j, &d[j]) != 0)
			return -1;
		if (kk > 0 && s->p.temp > 0)
			b = selector_draw(s, row, s->dcand + (size_t)j * kk, kk, n, j);
		for (int i = 1; kk > 0 && s->p.temp == 0 && i < kk; i++)
			b = row[i] > row[b] ? i : b;
		if (kk > 0)
			d[j] = s->dcand[(size_t)j * kk + b], prev = b;
		s->hist[n + j] = d[j];
	}
	return 0;
}

/*
 * The greedy drafts of MTP layer 0 alone: the first is the append's pick
 * (a masked head's from its logits row, ranks_argmax), the k - 1 after it
 * one chain (model_mtp_chain: each pick stays on the backend as the next
 * step's token, one read of them all).
 */
static int
draft_chain(struct spec *s, int32_t *d, int k)
{
	int n = s->n_hist;

	if (k < 1)
		return 0;
	if (s->dpick)
		d[0] = s->mid[s->last];
	else if (draft_pick(s, s->mlg + (size_t)s->last * s->dv, n, 0, &d[0]) != 0)
		return -1;
	if (k > 1 && d[0] >= 0 && model_mtp_chain(s->m, s->st, s->mtp_len,
	    s->hout + (size_t)s->last * s->ne, d[0], k - 1, d + 1, NULL) != 0)
		return fail_model(s);
	for (int j = 0; j < k; j++) {
		if (d[j] < 0)
			return util_err(s->err, "position %d: no finite draft logit", n + j);
		s->hist[n + j] = d[j];
	}
	return 0;
}

/* Draft k tokens into d (hist gets them past n_hist, tentatively). */
static int
draft(struct spec *s, int32_t *d, int k)
{
	int n = s->n_hist, o = 0;

	if (s->dh != NULL)
		return draft_dflash(s, d, k);
	if (s->asst)
		return draft_assist(s, d, k);
	if (s->pick && s->nb < 2)	/* greedy: dpick, or a masked head's ranks_argmax */
		return draft_chain(s, d, k);
	memcpy(s->hl, s->hout + (size_t)s->last * s->ne, s->ne * sizeof *s->hl);
	for (int j = 0; j < k; j++) {
		const float *lg = NULL;

		if (s->nb > 1 && j > 0) {	/* the chain's next block */
			if (chain_step(s, j, &o, &d[j], &lg) != 0)
				return -1;
			if (s->dpick && d[j] < 0)
				return util_err(s->err, "position %d: no finite draft logit", n + j);
			if (s->dpick) {
				s->hist[n + j] = d[j];
				continue;
			}
		} else if (s->dpick) {	/* a block chain's first (j 0): the append's pick */
			d[j] = s->mid[s->last];
			if (d[j] < 0)
				return util_err(s->err, "position %d: no finite draft logit", n + j);
			s->hist[n + j] = d[j];
			continue;
		}
		if (s->nb < 2 || j == 0) {	/* else lg is chain_step's */
			if (j > 0 && model_mtp(s->m, s->st, 0, s->mtp_len + j - 1, s->hl, &d[j - 1],
			    1, s->mlg, s->hl) != 0)
				return fail_model(s);
			lg = j == 0 ? s->mlg + (size_t)s->last * s->dv : s->mlg;
		}
		if (draft_pick(s, lg, n, j, &d[j]) != 0)
			return -1;
		s->hist[n + j] = d[j];
	}
	return 0;
}

/*
 * Judge the drafts d[k] against the verify rows (pick: their greedy picks
 * vid[k+1], else s->vlg): out gets the accepted prefix and the token after
 * it; returns how many drafts were accepted, or -1.
 */
static int
judge(struct spec *s, const int32_t *d, int k, const int32_t *vid, int32_t *out)
{
	int n = s->n_hist, acc = 0;

	for (; acc < k; acc++) {
		const float *lg = s->pick ? NULL : s->vlg + (size_t)acc * s->nv;
		int32_t t;
		int ok;

		if (s->pick) {
			if ((t = vid[acc]) < 0)
				return util_err(s->err, "position %d: no finite logit", n + acc);
			ok = t == d[acc];
		} else if (s->p.temp == 0) {
			if ((t = next(s, lg, n + acc, s->seq)) < 0)
				return -1;
			ok = t == d[acc];
		} else {
			if (sample_probs(s->smp, lg, s->hist, n + acc, s->pp) != 0)
				return util_err(s->err, "position %d: no finite logit", n + acc);
			t = sample_accept(s->smp, s->pp, s->q + (size_t)acc * s->nv, d[acc],
			    s->seq, n + acc, &ok);
			if (t < 0)
				return util_err(s->err, "position %d: no token to accept", n + acc);
		}
		out[acc] = t;
		if (!ok)
			return acc;
	}
	if (s->pick && (out[k] = vid[k]) < 0)
		return util_err(s->err, "position %d: no finite logit", n + k);
	if (!s->pick && (out[k] = next(s, s->vlg + (size_t)k * s->nv, n + k, s->seq)) < 0)
		return -1;
	return k;
}

/*
 * A round's first half: the verify rows into tk (the last emitted token,
 * then up to min(K, limit-1) drafts that fit in the context); returns how
 * many drafts, or -1.
 */
static int
round_draft(struct spec *s, int limit, int32_t *tk)
{
	int n = s->n_hist, k = s->K;

	if (limit < 1 || n < 1 || n + 1 > s->n_ctx)
		return util_err(s->err, "position %d: context of %d is full", n, s->n_ctx);
	if (k > limit - 1)
		k = limit - 1;
	if (k > s->n_ctx - n - 1)
		k = s->n_ctx - n - 1;
	tk[0] = s->hist[n - 1];
	return draft(s, tk + 1, k) != 0 ? -1 : k;
}

/*
 * The acceptance forced to force (0..k) drafts whatever the judge said
 * (nat): out gets the first force drafts and the greedy pick of the row
 * after them.  0, or -1.
 */
static int
force_accept(struct spec *s, const int32_t *d, int k, const int32_t *vid, int force, int nat,
    int32_t *out)
{
	if (force < 0 || force > k)
		return util_err(s->err, "a forced acceptance of %d drafts of %d", force, k);
	if (force > nat && vid[force] < 0)
		return util_err(s->err, "position %d: no finite logit", s->n_hist + force);
	memcpy(out, d, force * sizeof *out);
	out[force] = vid[force];
	return 0;
}

/*
 * A round's second half, after the verify of tk[k+1] (pick: greedy picks
 * vid[k+1], else logits s->vlg; hidden vh[k+1][ne]): the accepted tokens
 * into out (force >= 0, greedy picks only: that many drafts, the judge's
 * count into *nat), the state rolled back to them, the stats and the MTP
 * cache brought up to them; returns how many tokens, or -1.
 */
static int
round_accept(struct spec *s, const int32_t *tk, int k, const int32_t *vid, const float *vh,
    int32_t *out, int force, int *nat)
{
	int n = s->n_hist, acc;

	if ((acc = judge(s, tk + 1, k, vid, out)) < 0)
		return -1;
	if (nat != NULL)
		*nat = acc;
	if (force >= 0 && force_accept(s, tk + 1, k, vid, force, acc, out) != 0)
		return -1;
	acc = force >= 0 ? force : acc;
	if (state_rollback(s->st, acc + 1) != 0)
		return util_err(s->err, "rollback to %d rows failed", acc + 1);
	memcpy(s->hist + n, out, (acc + 1) * sizeof *out);
	s->n_hist = n + acc + 1;
	model_assist_learn(s->m, out, acc + 1);
	s->stats.rounds += k > 0;	/* a plain step is no round */
	s->stats.drafted += k;
	s->stats.accepted += acc;
	for (int j = 0; j < k; j++) {
		s->stats.tried[j]++;
		s->stats.depth[j] += j < acc;
	}
	if (mtp_append(s, vh, out, acc + 1) != 0)
		return -1;
	return acc + 1;
}

/* The phases are for the plain greedy picks a caller's forward gives. */
static int
greedy_only(struct spec *s, const char *what)
{
	if (s->pick)
		return 0;
	return util_err(s->err, "%s: greedy decoding only (temp %g%s)", what, s->p.temp,
	    s->p.temp == 0 ? " with penalties" : "");
}

int
spec_draft(struct spec *s, int limit, int32_t *rows)
{
	int k;

	if (greedy_only(s, "spec_draft") != 0)
		return -1;
	if (s->pending >= 0)
		return util_err(s->err, "spec_draft: the last draft waits for spec_accept");
	if ((k = round_draft(s, limit, s->tk)) < 0)
		return -1;
	s->pending = k;
	memcpy(rows, s->tk, (k + 1) * sizeof *rows);
	return k + 1;
}

struct state *
spec_state(struct spec *s)
{
	return s->st;
}

struct state *
spec_drafter_state(struct spec *s)
{
	return s->dst;
}

int
spec_accept(struct spec *s, const int32_t *ids, const float *hidden, int32_t *out)
{
	int k = s->pending;

	if (greedy_only(s, "spec_accept") != 0)
		return -1;
	if (k < 0)
		return util_err(s->err, "spec_accept: no draft (spec_draft first)");
	s->pending = -1;
	return round_accept(s, s->tk, k, ids, hidden, out, -1, NULL);
}

/* A greedy round: the phases, with the verify here (force: round_accept's). */
static int
round_greedy(struct spec *s, int32_t *out, int limit, int force, int *nat)
{
	int32_t tk[SPEC_KMAX + 1];
	int m;

	if ((m = spec_draft(s, limit, tk)) < 0)
		return -1;
	s->pending = -1;
	if (model_forward_argmax(s->m, s->st, tk, m, MODEL_LOGITS_ALL | MODEL_VERIFY, s->vid,
	    s->vh) != 0 || (s->dh != NULL && model_taps(s->m, s->vt, m) != 0))
		return fail_model(s);
	return round_accept(s, s->tk, m - 1, s->vid, s->dh != NULL ? s->vt : s->vh, out, force,
	    nat);
}

int
spec_round(struct spec *s, int32_t *out, int limit)
{
	int32_t tk[SPEC_KMAX + 1];
	int k;

	model_assist_sync(s->m);	/* a round is a step: the learned slots change between */
	if (s->pick)
		return round_greedy(s, out, limit, -1, NULL);
	if ((k = round_draft(s, limit, tk)) < 0)
		return -1;
	if (model_forward(s->m, s->st, tk, k + 1, MODEL_LOGITS_ALL | MODEL_VERIFY, s->vlg, s->vh) != 0 ||
	    (s->dh != NULL && model_taps(s->m, s->vt, k + 1) != 0))
		return fail_model(s);
	return round_accept(s, tk, k, NULL, s->dh != NULL ? s->vt : s->vh, out, -1, NULL);
}

int
spec_round_forced(struct spec *s, int32_t *out, int limit, int acc, int *natural)
{
	if (greedy_only(s, "spec_round_forced") != 0)
		return -1;
	if (acc < 0 || acc > limit - 1 || acc > s->K)
		return util_err(s->err, "a forced acceptance of %d drafts: out of range 0..%d", acc,
		    limit - 1 < s->K ? limit - 1 : s->K);
	model_assist_sync(s->m);
	return round_greedy(s, out, limit, acc, natural);
}
