#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learned.h"
#include "model_impl.h"
#include "quant.h"
#include "ranks.h"
#include "util.h"

/*
 * gemma4's forward (transformers 5.17's Gemma4TextModel, float32), behind
 * the model's op table (lib/model_impl.h).  Per layer:
 *
 *	h = x + post_attn_norm(attn(attn_norm(x)))
 *	y = post_ffn_norm(mlp(ffn_norm(h)))
 *	    with an MoE block: post_ffn_norm(post_ffn_norm_1(mlp(ffn_norm(h)))
 *	      + post_ffn_norm_2(experts(pre_ffn_norm_2(h), router(h))))
 *	x = h + y;  with PLE: x += pl_norm(proj(gelu(gate(x)) * pl_i))
 *	x *= layer_scalar
 *
 * Attention: q, k normed per head (with weights), v normed without one,
 * RoPE after the norms (sliding layers: rotate-half over the head; global
 * layers: "proportional", BACKEND_ROPE_PROP), scale 1, GQA; a sliding
 * layer sees its last n_swa keys.  A layer without k_proj's V (attn_v
 * absent: attention_k_eq_v) takes V from K's product before K's norm and
 * RoPE.  A KV-shared layer reads its source layer's cache and writes none.
 *
 * The state: every layer that makes K/V keeps a cache of its own, [n_ctx]
 * [nkv * hd] of its layer (model_kv_width), the global layers' first; a
 * sliding layer's is a ring of n_swa + R - 1 rows when that is fewer
 * (model_ring_rows: R = md->ring_rows), position p in row p % ring.  Its
 * attention then runs in pieces of at most R rows (g4_piece; with R set
 * the same pieces over a whole cache, so the bits do not depend on n_ctx):
 * each piece stores its K/V rows, then attends, so that a ring holds every
 * key the piece's rows see.
 */

static int
fail(struct model *md)
{
	return util_err(md->err, "%s", backend_errmsg(md->be));
}

static int
g4_act(struct model *md, int cap)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	size_t lp = (size_t)hp->n_layer * hp->n_pl;

	if ((a->g1 = backend_alloc(be, (size_t)cap * hp->n_embd)) == NULL ||
	    (hp->n_expert > 0 && model_moe_act(md, cap) != 0))
		return -1;
	if (hp->n_pl == 0)
		return 0;
	if ((a->ple = backend_alloc(be, cap * lp)) == NULL ||
	    (a->plp = backend_alloc(be, cap * lp)) == NULL ||
	    (a->pg = backend_alloc(be, (size_t)cap * hp->n_pl)) == NULL)
		return -1;
	return 0;
}

/* tok[m] with model_inject's rows as its pad token, in a->tok. */
static const int32_t *
g4_inject_tokens(struct model *md, const int32_t *tok, int m)
{
	struct model_act *a = &md->act;

	memcpy(a->tok, tok, (size_t)m * sizeof *tok);
	for (int i = 0; i < a->inj->n; i++)
		a->tok[a->inj->row[i] - a->inj->base] = a->inj->pad;
	return a->tok;
}

/* model_inject's rows over x: each run of consecutive rows in one write. */
static int
g4_inject_rows(struct model *md)
{
	const struct model_embd *e = md->act.inj;
	int ne = md->hp.n_embd;

	for (int i = 0, j; i < e->n; i = j) {
		for (j = i + 1; j < e->n && e->row[j] == e->row[j - 1] + 1; j++)
			;
		if (backend_write(md->be, md->act.x + (size_t)(e->row[i] - e->base) * ne,
		    e->x + (size_t)i * ne,
		    (size_t)(j - i) * ne))
			return -1;
	}
	return 0;
}

/*
 * x = embed(tok) * sqrt(n_embd), model_inject's rows as given; with PLE, a->plp = the per-layer inputs:
 * (norm(proj(x) / sqrt(n_embd)) + pl_embd(tok) * sqrt(n_pl)) / sqrt(2).
 */
static int
g4_embed(struct model *md, const int32_t *tok, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int ne = hp->n_embd, P = hp->n_pl, lp = hp->n_layer * P;

	if (a->inj != NULL)	/* embedding rows: the pad token under them */
		tok = g4_inject_tokens(md, tok, m);
	if (backend_embed(be, &md->tok_embd, tok, m, a->x, ne) ||
	    backend_scale(be, a->x, (size_t)m * ne, (float)sqrt((double)ne)) ||
	    (a->inj != NULL && g4_inject_rows(md) != 0))
		return fail(md);
	if (P == 0)
		return 0;
	if (backend_embed(be, &md->pl_embd, tok, m, a->ple, lp) ||
	    backend_scale(be, a->ple, (size_t)m * lp, (float)sqrt((double)P)) ||
	    backend_matmul(be, &md->pl_model_proj, a->x, ne, a->plp, lp, m) ||
	    backend_scale(be, a->plp, (size_t)m * lp, (float)(1.0 / sqrt((double)ne))) ||
	    backend_rmsnorm(be, a->plp, P, md->pl_proj_norm, a->plp, P, m * hp->n_layer, P,
	    hp->eps) ||
	    backend_add(be, a->plp, a->ple, (size_t)m * lp) ||
	    backend_scale(be, a->plp, (size_t)m * lp, (float)(1.0 / sqrt(2.0))))
		return fail(md);
	return 0;
}

/* Layer L's RoPE of x's m rows of n heads (ld apart) at a->pos, or at dpos (backend memory). */
static int
g4_rope(struct model *md, struct model_layer *L, float *x, int ld, int n, int m,
    const int32_t *dpos)
{
	const struct model_hparams *hp = &md->hp;
	int rot = L->swa ? hp->n_rot_swa : hp->n_rot;
	int mode = L->swa ? BACKEND_ROPE_NEOX : hp->rope_mode;
	float th = L->swa ? hp->rope_theta_swa : hp->rope_theta;

	if (rot == 0)
		return 0;
	return dpos ? backend_rope_dpos(md->be, x, ld, n, L->hd, m, dpos, rot, th, mode) :
	    backend_rope(md->be, x, ld, n, L->hd, m, md->act.pos, rot, th, mode);
}

/* A layer's closing residual deferred by g4_ffn (on): x = (x + rmsnorm(a->t)
 * w) s, run by the next layer's g4_qkv with its own norm and products. */
struct g4_res {
	int	on;
	const float *w;
	float	s;
};

/*
 * The attention's input side of layer L over m rows: a->x normed
 * (attn_norm) into q (a->q [m][n_head * hd]) and with K, V (not NULL:
 * [m][kvd] rows, into a cache or scratch) this layer's K and V, the norm
 * and the products one backend_rmsnorm_matmul (the bits of the norm, then
 * each product); q and K normed per head and roped at a->pos, or at dpos
 * (backend memory) when not NULL, V normed; with dpos, K and V then stored
 * into the caches kc, vc (n_ctx rows).  The norms, ropes and store are one
 * backend_qk_norm_rope where the layer has K and V and a rope.  ring > 0:
 * the caches are rings of that many rows (the store's).  res on: the layer
 * before left its FFN's output in a->t (g4_ffn's deferred residual), added
 * into x first in the same op as the norm and products
 * (backend_norm_residual_matmul: its bits).
 */
static int
g4_qkv(struct model *md, const struct g4_res *res, struct model_layer *L, int m, float *K,
    float *V, const int32_t *dpos, float *kc, float *vc, int n_ctx, int ring)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int hd = L->hd, nh = hp->n_head, kvd = L->nkv * hd;
	int vown = K != NULL && L->v.data != NULL, nw = K == NULL ? 1 : vown ? 3 : 2;
	int rot = L->swa ? hp->n_rot_swa : hp->n_rot;
	const struct backend_weight *W[3] = { &L->q, &L->k, &L->v };
	float *Y[3] = { a->q, K, V };

	if ((res != NULL && res->on ? backend_norm_residual_matmul(be, a->x, a->t, res->w, res->s,
	    m, hp->n_embd, L->attn_norm, hp->eps, nw, W, Y) :
	    backend_rmsnorm_matmul(be, a->x, m, hp->n_embd, L->attn_norm, hp->eps, nw, W, Y)) ||
	    (!vown && K != NULL && backend_copy(be, V, K, (size_t)m * kvd)))
		return fail(md);
	if (K != NULL && rot > 0) {
		struct backend_qkn qk = { nh, L->nkv, hd, hd, L->q_norm, L->k_norm, hp->eps, rot,
		    L->swa ? BACKEND_ROPE_NEOX : hp->rope_mode,
		    L->swa ? hp->rope_theta_swa : hp->rope_theta, 1, ring };

		return backend_qk_norm_rope(be, &qk, a->q, K, V, m, dpos ? NULL : a->pos, dpos,
		    dpos ? kc : NULL, vc, n_ctx) ? fail(md) : 0;
	}
	if (backend_rmsnorm(be, a->q, hd, L->q_norm, a->q, hd, m * nh, hd, hp->eps) ||
	    g4_rope(md, L, a->q, nh * hd, nh, m, dpos))
		return fail(md);
	if (K == NULL)
		return 0;
	if (backend_rmsnorm(be, K, hd, L->k_norm, K, hd, m * L->nkv, hd, hp->eps) ||
	    backend_rmsnorm(be, V, hd, NULL, V, hd, m * L->nkv, hd, hp->eps) ||
	    g4_rope(md, L, K, kvd, L->nkv, m, dpos) ||
	    (dpos != NULL && backend_kv_store(be, kc, vc, K, V, kvd, m, dpos, n_ctx, ring)))
		return fail(md);
	return 0;
}

static struct backend_attn
g4_attn_params(const struct model *md, const struct model_layer *L)
{
	const struct model_act *a = &md->act;
	struct backend_attn at = { md->hp.n_head, L->nkv, L->hd, 1.0f, 0, 0, 0,
	    L->swa ? md->hp.n_swa : 0,
	    /* an image's rows see the whole image in the sliding layers only */
	    L->swa && a->inj != NULL && a->inj->bidir ? a->hi : NULL, 0 };

	return at;
}

/* The attention's output side: the o product into a->t (its post-attention
 * norm is g4_ffn's, in one op with the residual add). */
static int
g4_attn_out(struct model *md, struct model_layer *L, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;

	if (backend_matmul(md->be, &L->o, a->o, hp->n_head * L->hd, a->t, hp->n_embd, m))
		return fail(md);
	return 0;
}

/* The ring rows of layer L's cache in st, 0: a whole cache. */
static int
g4_ring(const struct model_layer *L, const struct state *st)
{
	const struct state_config *c = state_config(st);

	return state_is_ring(c, L->cache) ? c->ring : 0;
}

/*
 * The end of the piece of a sliding layer's attention that starts at row
 * r of n (rows at positions p..): at most R = md->ring_rows rows (a
 * global layer's, or with no R, all of them), cut before an image (rows
 * that see later keys: hi, host, the rows' own) that would run past the
 * piece.  -1 with md->err set for an image longer than R.
 */
static int
g4_piece(struct model *md, const struct model_layer *L, const int32_t *hi, int p, int r, int n)
{
	int R = L->swa ? md->ring_rows : 0, e = R > 0 && n - r > R ? r + R : n, b;

	if (e == n || hi == NULL || hi[e - 1] < p + e)
		return e;
	for (b = e - 1; b > r && hi[b - 1] == hi[e - 1]; b--)	/* to its first row */
		;
	if (b > r)
		return b;
	return util_err(md->err, "an image of %d rows: longer than the %d rows a sliding "
	    "layer's attention takes at once (model_set_ring_rows)", hi[e - 1] - (p + r) + 1, R);
}

/* K/V rows k, v ([n][kvd], scratch) of positions p.. into L's cache in st: a ring's split
 * at its wrap. */
static int
g4_store(struct model *md, const struct model_layer *L, struct state *st, const float *k,
    const float *v, int p, int n)
{
	const struct state_config *c = state_config(st);
	int kvd = L->nkv * L->hd;

	for (int r = 0, len; r < n; r += len) {
		size_t at = (size_t)state_kv_row(c, L->cache, p + r) * kvd;

		len = state_kv_rows(c, L->cache, p + r, n - r);
		if (backend_copy(md->be, state_k(st, L->cache) + at, k + (size_t)r * kvd,
		    (size_t)len * kvd) || backend_copy(md->be, state_v(st, L->cache) + at,
		    v + (size_t)r * kvd, (size_t)len * kvd))
			return fail(md);
	}
	return 0;
}

/*
 * Layer L's attention of n rows of one sequence at positions p.. (q, o:
 * rows ld apart) over its cache in st, piece by piece (g4_piece); k, v not
 * NULL: the rows' K/V (scratch), each piece's stored before it attends.
 * hi: the rows' own (backend_attn.hi), or NULL.
 */
static int
g4_attend(struct model *md, struct model_layer *L, struct state *st, const float *q, float *o,
    int ld, int p, int n, const float *k, const float *v, const int32_t *hi)
{
	struct backend_attn at = g4_attn_params(md, L);
	const int32_t *H = at.hi != NULL ? hi : NULL;
	int kvd = L->nkv * L->hd;

	at.ring = g4_ring(L, st);
	for (int r = 0, e; r < n; r = e) {
		if ((e = g4_piece(md, L, H, p, r, n)) < 0 ||
		    (k != NULL && g4_store(md, L, st, k + (size_t)r * kvd, v + (size_t)r * kvd,
		    p + r, e - r) != 0))
			return -1;
		at.hi = H != NULL ? H + r : NULL;
		if (backend_attention(md->be, &at, q + (size_t)r * ld, ld, L->hd,
		    state_k(st, L->cache), state_v(st, L->cache), e - r, p + r, o + (size_t)r * ld))
			return fail(md);
	}
	return 0;
}

/*
 * Attention of layer L over m rows of one sequence at p0 into a->t: K and
 * V made in the cache's rows where they lie in one run (a whole cache, or
 * a ring's single piece that does not wrap), else through scratch (a->y,
 * a->z) piece by piece (g4_attend).  With dpos (p0 in backend memory: a
 * recorded step, one piece: its rows are at most BACKEND_ROWS_MAX <= R)
 * the same ops at every position: K and V through scratch into the cache.
 * res: g4_qkv's.
 */
static int
g4_attn(struct model *md, const struct g4_res *res, struct model_layer *L,
    struct state *st, int p0, int m, const int32_t *dpos)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int kvd = L->nkv * L->hd, ld = hp->n_head * L->hd, n_ctx = state_config(st)->n_ctx;
	int ring = g4_ring(L, st);
	float *kc = state_k(st, L->cache), *vc = state_v(st, L->cache);
	int inplace = !dpos && (ring == 0 || (m <= md->ring_rows && p0 % ring + m <= ring));
	size_t row = ring > 0 ? (size_t)(p0 % ring) * kvd : (size_t)p0 * kvd;
	float *K = !L->kv_own ? NULL : inplace ? kc + row : a->y;
	float *V = !L->kv_own ? NULL : inplace ? vc + row : a->z;

	if (g4_qkv(md, res, L, m, K, V, dpos, kc, vc, n_ctx, ring))
		return fail(md);
	if (dpos != NULL) {
		struct backend_attn at = g4_attn_params(md, L);

		at.ring = ring;
		if (backend_attention_dpos(be, &at, a->q, ld, L->hd, kc, vc, m, dpos, n_ctx, a->o))
			return fail(md);
	} else if (g4_attend(md, L, st, a->q, a->o, ld, p0, m, inplace ? NULL : K,
	    inplace ? NULL : V, a->hi) != 0)
		return -1;
	return g4_attn_out(md, L, m);
}

/* The MoE block beside the MLP: a->sh = experts(h), h = x (g4_ffn norms it). */
static int
g4_moe(struct model *md, struct model_layer *L, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int ne = hp->n_embd, n = hp->n_expert, k = hp->n_expert_used;

	/* the router's input (into a->t, free here) and the experts' (a->xn): one op */
	if (backend_rmsnorm_pair(be, a->x, L->router_scale, (float)(1.0 / sqrt((double)ne)), a->t,
	    L->ffn_pre_norm_2, a->xn, hp->eps, m, ne) ||
	    backend_matmul(be, &L->router, a->t, ne, a->rl, n, m) ||
	    (L->exp_scale != NULL ? backend_moe_route_scale(be, a->rl, n, m, n, k, L->exp_scale,
	    a->rid, a->rw) : backend_moe_route(be, a->rl, n, m, n, k, a->rid, a->rw)) ||
	    backend_moe_geglu(be, &L->exp_gate_up, n, a->xn, ne, m, a->rid, k, a->ef) ||
	    backend_moe_down(be, &L->exp_down, n, a->ef, m, a->rid, a->rw, k, a->sh, ne))
		return fail(md);
	return 0;
}

/*
 * The FFN side of layer L (x += post_norm(a->t) first, a->t the attention's
 * o product, in one backend_norm_residual_matmul with the FFN's norm and
 * gate and up products), its output added into x; PLE and
 * the layer scalar.  The output's norms, the add and (without PLE) the scalar
 * are one backend_norm_residual: x += post_ffn_norm(y), y the MLP's output,
 * or with experts post_ffn_norm_1(MLP) + post_ffn_norm_2(experts).  res
 * not NULL (another layer follows): a dense layer without PLE leaves y in
 * a->t and its norm_residual's weight and scale in *res (on), the next
 * layer's g4_qkv's to run.
 */
static int
g4_ffn(struct model *md, struct model_layer *L, int il, int m, struct g4_res *res)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int ne = hp->n_embd, P = hp->n_pl, moe = hp->n_expert > 0;
	float s = P > 0 ? 1.0f : L->out_scale;	/* the scalar with the add (PLE: after it) */
	float *y = moe ? a->g1 : a->t, *Y[2] = { a->f, a->u };
	const struct backend_weight *W[2] = { &L->ffn_gate, &L->ffn_up };

	/* x += post_norm(t) (the attention's output), then ffn_norm(x) into the gate and up
	 * products (one fused op: their bits) */
	if (backend_norm_residual_matmul(be, a->x, a->t, L->post_norm, 1.0f, m, ne, L->ffn_norm,
	    hp->eps, 2, W, Y) ||
	    backend_geglu_matmul(be, a->f, a->u, m, &L->ffn_down, y))
		return fail(md);
	if (moe && g4_moe(md, L, m) != 0)
		return fail(md);
	if (res != NULL && !moe && P == 0) {	/* y is a->t */
		*res = (struct g4_res){ 1, L->ffn_post_norm, s };
		return 0;
	}
	if (moe ? backend_norm_residual(be, a->x, y, L->ffn_post_norm_1, a->sh,
	    L->ffn_post_norm_2, L->ffn_post_norm, hp->eps, s, m, ne) :
	    backend_norm_residual(be, a->x, y, L->ffn_post_norm, NULL, NULL, NULL, hp->eps, s, m,
	    ne))
		return fail(md);
	if (P > 0 && (backend_matmul(be, &L->pl_gate, a->x, ne, a->pg, P, m) ||
	    backend_geglu(be, a->pg, P, a->plp + (size_t)il * P, hp->n_layer * P, a->pg, P, m, P) ||
	    backend_matmul(be, &L->pl_proj, a->pg, P, a->t, ne, m) ||
	    backend_rmsnorm(be, a->t, ne, L->pl_norm, a->t, ne, m, ne, hp->eps) ||
	    backend_add(be, a->x, a->t, (size_t)m * ne)))
		return fail(md);
	if (P > 0 && L->out_scale != 1.0f && backend_scale(be, a->x, (size_t)m * ne, L->out_scale))
		return fail(md);
	return 0;
}

/* g4_ffn of layer il after its attention took res: res spent, and refilled
 * where g4_ffn defers (never on the last layer: it finishes its own). */
static int
g4_ffn_defer(struct model *md, struct model_layer *L, int il, int m, struct g4_res *res)
{
	res->on = 0;
	return g4_ffn(md, L, il, m, il + 1 < md->hp.n_layer ? res : NULL);
}

/* The trunk over m rows of one sequence at p0 (a->pos), or at dpos (a recorded step). */
static int
g4_layers(struct model *md, struct state *st, int p0, int m, int flags, const int32_t *dpos)
{
	struct g4_res res = { 0, NULL, 1.0f };	/* a residual g4_ffn deferred */

	for (int il = 0; il < md->hp.n_layer; il++) {
		struct model_layer *L = &md->layers[il];

		if (g4_attn(md, &res, L, st, p0, m, dpos) != 0 || g4_ffn_defer(md, L, il, m, &res))
			return -1;
	}
	return 0;
}

/*
 * The attention of layer L over a group of sequences: the products over
 * every row at once, K and V through scratch (a->y, a->z) into each
 * sequence's cache at its positions, attention per sequence (g4_attend:
 * piece by piece as one sequence's forward).
 */
static int
g4_attn_seqs(struct model *md, const struct g4_res *res, struct model_layer *L,
    const struct model_seqs *g)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	int hd = L->hd, nh = hp->n_head, kvd = L->nkv * hd;

	if (g4_qkv(md, res, L, g->m, L->kv_own ? a->y : NULL, L->kv_own ? a->z : NULL, NULL,
	    NULL, NULL, 0, 0))
		return fail(md);
	for (int i = 0, r = 0; i < g->n; r += model_seq_rows(g, i++)) {
		int k = model_seq_rows(g, i), p = a->pos[r];

		if (g4_attend(md, L, g->st[i], a->q + (size_t)r * nh * hd, a->o + (size_t)r * nh * hd,
		    nh * hd, p, k, L->kv_own ? a->y + (size_t)r * kvd : NULL,
		    L->kv_own ? a->z + (size_t)r * kvd : NULL, NULL) != 0)
			return -1;
	}
	return g4_attn_out(md, L, g->m);
}

static int
g4_layers_seqs(struct model *md, const struct model_seqs *g)
{
	struct g4_res res = { 0, NULL, 1.0f };	/* as g4_layers' */

	for (int il = 0; il < md->hp.n_layer; il++) {
		struct model_layer *L = &md->layers[il];

		if (g4_attn_seqs(md, &res, L, g) != 0 || g4_ffn_defer(md, L, il, g->m, &res))
			return -1;
	}
	return 0;
}

/* The final logit soft-cap. */
static int
g4_logits(struct model *md, int rows)
{
	const struct model_hparams *hp = &md->hp;

	if (hp->softcap > 0 && backend_softcap(md->be, md->act.logits,
	    (size_t)rows * md->output.ne1, hp->softcap))
		return fail(md);
	return 0;
}

const struct model_arch_ops model_arch_gemma4 = {
	.act = g4_act, .embed = g4_embed, .layers = g4_layers, .layers_seqs = g4_layers_seqs,
	.logits = g4_logits, .inject = 1,
};

/* A gemma4_assistant runs only as its trunk's drafter (model_assist). */
static int
g4a_refuse(struct model *md, struct state *st, int p0, int m, int flags, const int32_t *dpos)
{
	return util_err(md->err, "a gemma4_assistant drafts for a gemma4 trunk only "
	    "(attach it with +draft, --draft or MEMRA_DRAFT)");
}

static int
g4a_refuse_seqs(struct model *md, const struct model_seqs *g)
{
	return g4a_refuse(md, NULL, 0, 0, 0, NULL);
}

/* host_pos: its layers only refuse, so a step of it is never recorded (a failed
 * recording would turn the backend's graphs off) */
const struct model_arch_ops model_arch_gemma4a = {
	.act = g4_act, .embed = g4_embed, .layers = g4a_refuse, .layers_seqs = g4a_refuse_seqs,
	.host_pos = 1,
};

int
model_has_assist(const struct model *md)
{
	return md->asst != NULL;
}

/*
 * The assistant A's input: x = pre_projection([embed(tok) * sqrt(n_embd) ;
 * h]) with the trunk md's token table and width.
 */
static int
g4a_input(struct model *md, struct model *A, const float *h, int32_t tok)
{
	struct backend *be = md->be;
	int ne = md->hp.n_embd;
	float *cat = md->act.cat;	/* [2 ne] */

	if (backend_embed(be, &md->tok_embd, &tok, 1, cat, 2 * ne) ||
	    backend_scale(be, cat, ne, (float)sqrt((double)ne)) ||
	    backend_write(be, cat + ne, h, ne) ||
	    backend_matmul(be, &A->pre_proj, cat, 2 * ne, A->act.x, A->hp.n_embd, 1))
		return fail(md);
	return 0;
}

/* A's layer L at pos: Q-only attention over st's K/V of positions < pos, then its FFN. */
static int
g4a_layer(struct model *A, struct model_layer *L, int il, struct state *st, int pos)
{
	const struct model_hparams *hp = &A->hp;
	struct model_act *a = &A->act;
	struct backend_attn at = g4_attn_params(A, L);

	/* the window as transformers' flipped bidirectional mask draws it: the last
	 * n_swa + 1 keys, the query standing at the last key's position pos - 1; a
	 * ring holds them while the state is at most R - 2 positions past pos */
	at.window = L->swa ? hp->n_swa + 1 : 0;
	at.ring = g4_ring(L, st);
	if (at.ring > 0 && state_pos(st) - pos > at.ring - at.window)
		return util_err(A->err, "a draft at %d over rings of %d rows at %d", pos, at.ring,
		    state_pos(st));
	if (g4_qkv(A, NULL, L, 1, NULL, NULL, NULL, NULL, NULL, 0, 0) ||
	    backend_attention(A->be, &at, a->q, hp->n_head * L->hd, L->hd, state_k(st, L->cache),
	    state_v(st, L->cache), 1, pos - 1, a->o))
		return fail(A);
	return g4_attn_out(A, L, 1) != 0 || g4_ffn(A, L, il, 1, NULL) != 0 ? -1 : 0;
}

/* A's head: logits (or the pick id) of norm(x), and hout = post_projection(norm(x)). */
static int
g4a_head(struct model *md, struct model *A, float *logits, int32_t *id, float *hout)
{
	struct backend *be = md->be;
	struct model_act *a = &A->act;
	const struct backend_weight *hw = A->draft_head.data != NULL ? &A->draft_head : &A->output;
	/* a head with learned slots holds rows for all of them: the filled ones count */
	int na = A->hp.n_embd, nh = (int)hw->ne1;
	int nv = hw == &A->draft_head && A->draft_ranks != NULL ? (int)A->draft_ranks->n : nh;

	if (backend_rmsnorm(be, a->x, na, A->output_norm, a->xn, na, 1, na, A->hp.eps) ||
	    backend_matmul(be, hw, a->xn, na, a->logits, nh, 1) ||
	    backend_matmul(be, &A->post_proj, a->xn, na, md->act.t, md->hp.n_embd, 1) ||
	    (id != NULL && backend_argmax(be, a->logits, nv, 1, nv, id)) ||
	    (logits != NULL && backend_read(be, logits, a->logits, nv)) ||
	    backend_read(be, hout, md->act.t, md->hp.n_embd))
		return fail(md);
	return 0;
}

int
model_assist(struct model *md, struct state *st, int pos, const float *h, int32_t tok,
    float *logits, int32_t *id, float *hout)
{
	struct model *A = md->asst;

	if (A == NULL)
		return util_err(md->err, "assist: no gemma4_assistant attached");
	if (pos < 1 || pos > state_pos(st) || tok < 0 || tok >= md->hp.n_vocab)
		return util_err(md->err, "assist: token %d at %d over a state at %d", tok, pos,
		    state_pos(st));
	if (model_act_reserve(md, 1) != 0 || model_act_reserve(A, 1) != 0)
		return A->err[0] && !md->err[0] ? util_err(md->err, "%s", A->err) : -1;
	A->act.pos[0] = pos;
	if (g4a_input(md, A, h, tok) != 0)
		return -1;
	for (int il = 0; il < A->hp.n_layer; il++)
		if (g4a_layer(A, &A->layers[il], il, st, pos) != 0)
			return util_err(md->err, "assist: %s", A->err);
	return g4a_head(md, A, logits, id, hout);
}

/*
 * A's head made again from its host rows (draft_buf), all the rows it
 * holds (the rank list's and every slot's): a device's is uploaded anew
 * whole, the CPU's reads them in place.  The new one is made before the
 * old is released; failing, the old stays (its rows may then lag the
 * list's ids: drafts, never the output, see it) and -1.
 */
static int
g4a_remake(struct model *A)
{
	struct backend_weight *w = &A->draft_head, nw;

	if (backend_weight_init(A->be, &nw, A->head_type, w->ne0, w->ne1, A->draft_buf,
	    w->scale) != 0)
		return -1;
	backend_weight_release(A->be, w);
	*w = nw;
	return 0;
}

/*
 * The learned slots' rows of A's head up to the slots' set: the rows of
 * the slots whose token changed gathered from the full head, the list's
 * ids with them, and the filled slots counted (the head holds a row for
 * every slot from the start: g4a_adapt_room).  Rows are the host copy's
 * type's (A->head_type: a device's weight may hold another type or
 * layout).  Each changed row goes to the head by backend_weight_rows (a
 * copy only where the head holds its own: a device's); a backend that
 * cannot makes the head again whole, and a failed upload leaves the slots'
 * version unseen and the copy stale, so the next sync tries again.
 */
static void
g4a_sync(struct model *A)
{
	struct backend_weight *w = &A->draft_head;
	struct ranks *r = A->draft_ranks;
	size_t rs = quant_row_size(A->head_type, w->ne0);
	int n = learned_copy(A->learned, A->learned_ids, &A->learned_ver);

	if (n < 0)
		return;
	for (int i = 0; i < n; i++) {
		int64_t row = A->n_fixed + i;
		int32_t t = A->learned_ids[i];

		if (row < r->n && r->ids[row] == t)
			continue;
		r->ids[row] = t;
		memcpy((char *)A->draft_buf + row * rs, (const char *)A->head_host + t * rs, rs);
		if (!A->learned_stale && backend_weight_rows(A->be, w, row, 1,
		    (const char *)A->draft_buf + row * rs) != 0)
			A->learned_stale = 1;
	}
	if (A->learned_stale && g4a_remake(A) != 0) {
		A->learned_ver = 0;	/* a change was copied: its version is past 0 */
		return;
	}
	r->n = A->n_fixed + n;
	A->learned_stale = 0;
}

/* The buffers of A's slots: the list's ids and the head's rows grown to hold them. */
static int
g4a_adapt_room(struct model *A, int slots)
{
	struct backend_weight *w = &A->draft_head, was = *w;
	struct ranks *r = A->draft_ranks;
	size_t cap = (size_t)(r->n + slots), rs = quant_row_size(A->head_type, was.ne0);
	int32_t *ids = realloc(r->ids, cap * sizeof *ids);
	void *buf = NULL;

	if (ids != NULL)
		r->ids = ids;
	backend_weight_release(A->be, w);	/* its rows move */
	if (ids != NULL && (buf = realloc(A->draft_buf, cap * rs)) != NULL)
		A->draft_buf = buf;
	if (buf == NULL || (A->learned_ids = malloc(slots * sizeof *ids)) == NULL)
		return util_err(A->err, "learned draft slots: out of memory");
	A->n_fixed = r->n;
	/* a row for every slot (zeros until it fills: its logit never read),
	 * so a slot that fills or changes replaces a row, never the head */
	memset((char *)A->draft_buf + (size_t)r->n * rs, 0, (size_t)slots * rs);
	if (backend_weight_init(A->be, w, A->head_type, was.ne0, (int64_t)cap, A->draft_buf,
	    was.scale) != 0)
		return util_err(A->err, "learned draft slots: %s", backend_errmsg(A->be));
	return 0;
}

int
model_assist_adapt(struct model *A, const char *ranks, int n)
{
	size_t len = strlen(ranks) + sizeof ".learned";
	char e[UTIL_ERRLEN];
	int rc;

	if (strcmp(ranks, "-") == 0)
		return util_err(A->err, "learned draft slots (MEMRA_GEMMA_TRIM_ADAPT): the rank "
		    "list is stdin, with no place for its .learned file beside it");
	if (A->head_host == NULL)
		return util_err(A->err, "learned draft slots: no host copy of the head");
	if ((A->learned = learned_new(n, A->draft_ranks, A->hp.n_vocab, e)) == NULL)
		return util_err(A->err, "learned draft slots (MEMRA_GEMMA_TRIM_ADAPT): %s", e);
	if ((A->learned_path = malloc(len)) == NULL)
		return util_err(A->err, "learned draft slots: out of memory");
	snprintf(A->learned_path, len, "%s.learned", ranks);
	if ((rc = learned_load(A->learned, A->learned_path, &A->learned_lines, e)) < 0)
		return util_err(A->err, "learned draft slots (MEMRA_GEMMA_TRIM_ADAPT): %s", e);
	if (rc == 1)
		A->learned_lines = -1;
	A->learned_asked = n;
	if (g4a_adapt_room(A, learned_slots(A->learned)) != 0)
		return -1;
	g4a_sync(A);
	return 0;
}

void
model_assist_learn(struct model *md, const int32_t *tok, int n)
{
	if (md->asst != NULL && md->asst->learned != NULL)
		learned_observe(md->asst->learned, tok, n);
}

void
model_assist_sync(struct model *md)
{
	if (md->asst != NULL && md->asst->learned != NULL)
		g4a_sync(md->asst);
}

int
model_assist_save(struct model *md, int at_exit, int *n_written, char *err)
{
	struct model *A = md->asst;

	*n_written = 0;
	if (A == NULL || A->learned == NULL || (!at_exit && !learned_due(A->learned,
	    util_now())))
		return 0;
	return learned_save(A->learned, A->learned_path, n_written, err);
}

const char *
model_assist_learned_path(const struct model *md)
{
	return md->asst != NULL && md->asst->learned != NULL ? md->asst->learned_path : NULL;
}

int
model_assist_adapt_line(const struct model *md, char *buf, size_t n)
{
	const struct model *A = md->asst;
	struct learned *l = A != NULL ? A->learned : NULL;
	const struct backend_weight *o;
	char from[64] = "";
	int k, got;

	if (n > 0)
		buf[0] = '\0';
	if (l == NULL)
		return -1;
	o = &A->output;
	got = learned_filled(l);
	if (A->learned_lines > got)
		snprintf(from, sizeof from, " (the strongest %d of its %d)", got, A->learned_lines);
	k = snprintf(buf, n, "[gemma-draft] trim adapt: %d learned slots after the %lld ranks%s, ",
	    learned_slots(l), (long long)A->n_fixed, learned_slots(l) < A->learned_asked ?
	    " (all the tokens outside them)" : "");
	if (k < 0 || (size_t)k >= n)
		return 0;
	if (A->learned_lines < 0)
		k += snprintf(buf + k, n - k, "none learned yet (no %s)", A->learned_path);
	else
		k += snprintf(buf + k, n - k, "%d from %s%s", got, A->learned_path, from);
	if (k < 0 || (size_t)k >= n)
		return 0;
	snprintf(buf + k, n - k, "; the full head's %lld rows stay in memory for them (%s, "
	    "%.2f MiB), the slots' rows %.2f MiB", (long long)o->ne1, quant_name(o->type),
	    (double)o->row_size * o->ne1 / 1048576.0,
	    (double)A->draft_head.row_size * learned_slots(l) / 1048576.0);
	return 0;
}
