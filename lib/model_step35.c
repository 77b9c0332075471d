#include "model.h"

#include <math.h>

#include "model_impl.h"
#include "util.h"

/*
 * step35: Step-3.5/3.7 Flash's trunk (transformers 5.17's Step3p7TextModel,
 * llama.cpp's step35 graph), behind the model's op table (lib/model_impl.h)
 * and written against the backend's:
 *
 *	xn = rmsnorm(x) * attn_norm
 *	q, k = rmsnorm per head (q_norm, k_norm), then RoPE (NeoX pairs) on the
 *	    layer's first n_rot dims at its theta (full and sliding layers differ)
 *	o = attention over the layer's window (0: all), n_head query heads of
 *	    the layer's own count, scale attn_scale (1 / sqrt(head_dim))
 *	o_h *= sigmoid(attn_gate . xn)_h (head-wise), x += attn_output . o
 *	xn = rmsnorm(x) * ffn_norm, then a dense SwiGLU, or
 *	    p = sigmoid(router . xn) (fp32); top k of p + exp_probs_b; weights
 *	    p / sum * expert_weights_scale; routed experts + the shared one
 *	each SwiGLU min(silu(g), L) * clamp(u, -L, L) with its layer's limit
 *	(swiglu_clamp_exp for the routed experts, _shexp for the shared one
 *	and the dense MLP; 0: none), x += the FFN
 *
 * The norms carry the HF "+1" folded in (GGUF's convention).  The gate's
 * logits live in a->cat (free outside the MTP path; n_head <= 2 n_embd).
 */

static int
fail(struct model *md)
{
	return util_err(md->err, "%s", backend_errmsg(md->be));
}

/*
 * q, K (a->y), V (a->z) and the gate's logits (a->cat) of m rows; q and K
 * normed and roped at a->pos, or (dpos not NULL: a recorded step) at dpos,
 * K and V then stored into the caches kc, vc (n_ctx rows) at dpos.
 */
static int
qkv(struct model *md, struct model_layer *L, int m, const float *res, const int32_t *dpos,
    float *kc, float *vc, int n_ctx)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int hd = hp->head_dim, nh = L->n_head, nkv = hp->n_head_kv, kvd = nkv * hd;
	const struct backend_weight *W[4] = { &L->q, &L->k, &L->v, &L->g };
	float *Y[4] = { a->q, a->y, a->z, a->cat };
	struct backend_qkn qk = { nh, nkv, hd, hd, L->q_norm, L->k_norm, hp->eps, L->n_rot,
	    hp->rope_mode, L->theta, 0, 0 };

	if (backend_add_rmsnorm_matmul(be, a->x, res, m, hp->n_embd, L->attn_norm, hp->eps,
	    L->g.data != NULL ? 4 : 3, W, Y))
		return fail(md);
	if (L->q_norm != NULL && L->k_norm != NULL)
		return backend_qk_norm_rope(be, &qk, a->q, a->y, a->z, m, dpos ? NULL : a->pos,
		    dpos, dpos ? kc : NULL, vc, n_ctx) ? fail(md) : 0;
	if ((L->q_norm && backend_rmsnorm(be, a->q, hd, L->q_norm, a->q, hd, m * nh, hd,
	    hp->eps)) ||
	    (L->k_norm && backend_rmsnorm(be, a->y, hd, L->k_norm, a->y, hd, m * nkv, hd,
	    hp->eps)))
		return fail(md);
	if (dpos ? backend_rope_dpos(be, a->q, nh * hd, nh, hd, m, dpos, L->n_rot, L->theta,
	    hp->rope_mode) || backend_rope_dpos(be, a->y, kvd, nkv, hd, m, dpos, L->n_rot,
	    L->theta, hp->rope_mode) || backend_kv_store(be, kc, vc, a->y, a->z, kvd, m, dpos,
	    n_ctx, 0) :
	    backend_rope(be, a->q, nh * hd, nh, hd, m, a->pos, L->n_rot, L->theta, hp->rope_mode) ||
	    backend_rope(be, a->y, kvd, nkv, hd, m, a->pos, L->n_rot, L->theta, hp->rope_mode))
		return fail(md);
	return 0;
}

/* Layer L's output side: the head-wise gate, the o product into a->t. */
static int
attn_out(struct model *md, struct model_layer *L, int m)
{
	struct model_act *a = &md->act;
	int nh = L->n_head, hd = md->hp.head_dim, qd = nh * hd;

	if ((L->g.data != NULL && backend_head_gate(md->be, a->o, qd, a->cat, nh, m, nh, hd)) ||
	    backend_matmul(md->be, &L->o, a->o, qd, a->t, md->hp.n_embd, m))
		return fail(md);
	return 0;
}

static struct backend_attn
attn_params(const struct model *md, const struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	int hd = hp->head_dim;
	struct backend_attn at = { L->n_head, hp->n_head_kv, hd, hp->attn_scale > 0 ?
	    hp->attn_scale : 1.0f / sqrtf((float)hd), 0, 0, 0, L->swa ? hp->n_swa : 0, NULL, 0 };

	return at;
}

/*
 * Layer L's attention over m rows of st at dpos (backend memory: a
 * recorded step; x += res first), the same ops at every position: K and V
 * through scratch into the cache.  Its output in a->t.
 */
static int
attention_dpos(struct model *md, struct model_layer *L, struct state *st, int m,
    const float *res, const int32_t *dpos)
{
	struct model_act *a = &md->act;
	int qd = L->n_head * md->hp.head_dim, n_ctx = state_config(st)->n_ctx;
	float *kc = state_k(st, L->cache), *vc = state_v(st, L->cache);
	struct backend_attn at = attn_params(md, L);

	if (qkv(md, L, m, res, dpos, kc, vc, n_ctx) != 0)
		return -1;
	if (backend_attention_dpos(md->be, &at, a->q, qd, at.head_dim, kc, vc, m, dpos, n_ctx,
	    a->o))
		return fail(md);
	return attn_out(md, L, m);
}

/* Layer L's attention over group g's rows (x += res first); its output in a->t. */
static int
attention(struct model *md, struct model_layer *L, const struct model_seqs *g, const float *res)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int hd = hp->head_dim, nh = L->n_head, kvd = hp->n_head_kv * hd, qd = nh * hd;
	struct backend_attn at = attn_params(md, L);

	if (qkv(md, L, g->m, res, NULL, NULL, NULL, 0) != 0)
		return -1;
	for (int i = 0, r = 0; i < g->n; r += model_seq_rows(g, i++)) {
		float *kc = state_k(g->st[i], L->cache), *vc = state_v(g->st[i], L->cache);
		int k = model_seq_rows(g, i), p = a->pos[r];

		if (backend_copy(be, kc + (size_t)p * kvd, a->y + (size_t)r * kvd, (size_t)k * kvd) ||
		    backend_copy(be, vc + (size_t)p * kvd, a->z + (size_t)r * kvd, (size_t)k * kvd) ||
		    backend_attention(be, &at, a->q + (size_t)r * qd, qd, hd, kc, vc, k, p,
		    a->o + (size_t)r * qd))
			return fail(md);
	}
	return attn_out(md, L, g->m);
}

/* A SwiGLU MLP of xn (m rows) with limit lim into y [m][n_embd]. */
static int
swiglu(struct model *md, const struct backend_weight *wg, const struct backend_weight *wu,
    const struct backend_weight *wd, float lim, int m, float *y)
{
	struct model_act *a = &md->act;

	return backend_mlp(md->be, wg, wu, wd, a->xn, m, lim, a->f, a->u, y) ? fail(md) : 0;
}

/* Layer L's FFN (x += a->t first): dense, or routed experts plus the shared one; into a->t. */
static int
ffn(struct model *md, struct model_layer *L, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int ne = hp->n_embd, E = hp->n_expert, k = hp->n_expert_used;

	if (backend_add_rmsnorm(be, a->x, a->t, L->post_norm, a->xn, hp->eps, m, ne))
		return fail(md);
	if (!L->sparse)
		return swiglu(md, &L->ffn_gate, &L->ffn_up, &L->ffn_down, L->lim_sh, m, a->t);
	if (swiglu(md, &L->sh_gate, &L->sh_up, &L->sh_down, L->lim_sh, m, a->sh) != 0)
		return -1;
	if (backend_matmul(be, &L->router, a->xn, ne, a->rl, E, m) ||
	    backend_moe_route_sigmoid(be, a->rl, E, m, E, k, L->exp_bias, hp->exp_norm,
	    hp->exp_scale, a->rid, a->rw) ||
	    backend_moe_ffn(be, &L->exp_gate, &L->exp_up, &L->exp_down, E, a->xn, ne, m, a->rid,
	    a->rw, k, L->lim_exp, a->ef, a->sh, NULL, 0, a->t, ne))
		return fail(md);
	return 0;
}

/*
 * The trunk over group g's rows, a->pos holding each row's position and x
 * the embeddings; x ends as its output.  dpos (one sequence, a recorded
 * step): the positions in backend memory.  Attention keeps no snapshots:
 * a verify's rollback is the cache's length.
 */
static int
trunk(struct model *md, const struct model_seqs *g, const int32_t *dpos)
{
	if (md->kv_f16)
		return util_err(md->err, "step35: an f16 KV cache is not supported yet");
	for (int il = md->l0; il < md->l1; il++) {
		struct model_layer *L = &md->layers[il];
		const float *res = il > md->l0 ? md->act.t : NULL;

		if ((dpos ? attention_dpos(md, L, g->st[0], g->m, res, dpos) :
		    attention(md, L, g, res)) != 0 || ffn(md, L, g->m) != 0)
			return -1;
	}
	if (md->l1 > md->l0 && backend_add(md->be, md->act.x, md->act.t,
	    (size_t)g->m * md->hp.n_embd))
		return fail(md);
	return 0;
}

static int
step35_layers_seqs(struct model *md, const struct model_seqs *g)
{
	return trunk(md, g, NULL);
}

/* The trunk over m rows of one sequence at p0 (a->pos), or at dpos (a recorded step). */
static int
step35_layers(struct model *md, struct state *st, int p0, int m, int flags, const int32_t *dpos)
{
	struct model_seqs g = { &st, &m, 1, m, (flags & MODEL_VERIFY) != 0 };

	return trunk(md, &g, dpos);
}

/* A NextN block over m rows of st at p0 (a->pos): x ends as its output, before the head norm. */
static int
step35_mtp_block(struct model *md, struct model_layer *L, struct state *st, int p0, int m)
{
	struct model_seqs g = { &st, &m, 1, m, 0 };

	if (attention(md, L, &g, NULL) != 0 || ffn(md, L, m) != 0)
		return -1;
	return backend_add(md->be, md->act.x, md->act.t, (size_t)m * md->hp.n_embd) ? fail(md) : 0;
}

const struct model_arch_ops model_arch_step35 = {
	.layers = step35_layers, .layers_seqs = step35_layers_seqs,
	.mtp_block = step35_mtp_block, .prenorm = 1,
};
