#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"
#include "ranks.h"
#include "sample.h"
#include "util.h"

/*
 * The forward passes, written once against the backend op table.  Every
 * op returns 0 or -1; a chain of them stops at the first failure and the
 * backend's reason becomes the model's.
 *
 * A block (attention, GDN, FFN) leaves its output in a->t and the next one
 * adds it into x as it starts (res: a->t, or NULL before the first block):
 * the residual add runs fused with the norm that follows it
 * (backend_add_rmsnorm_matmul); the trunk's last add is on its own.
 */

static int
fail(struct model *md)
{
	return util_err(md->err, "%s", backend_errmsg(md->be));
}

static int
wide(const struct model_hparams *hp)
{
	int w = hp->n_head * hp->head_dim * 2;

	if (hp->n_rec > 0) {
		int cd = model_conv_dim(hp);
		w = cd > w ? cd : w;
	}
	return w;
}

/* Activations for m rows (grown, never shrunk). */
int
model_act_reserve(struct model *md, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int cap = m > 16 ? m : 16, w = wide(hp), nv = hp->n_v_heads ? hp->n_v_heads : 1;
	/* logits rows: a step's at most (a prompt's forward reads its last row's only) */
	int lcap = cap < BACKEND_ROWS_MAX ? cap : BACKEND_ROWS_MAX;
	int ff = hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp;

	if (m <= a->cap)
		return 0;
	model_act_free(md);
	if ((a->x = backend_alloc(be, (size_t)cap * hp->n_embd)) == NULL ||
	    (a->xn = backend_alloc(be, (size_t)cap * hp->n_embd)) == NULL ||
	    (a->t = backend_alloc(be, (size_t)cap * hp->n_embd)) == NULL ||
	    (a->cat = backend_alloc(be, (size_t)cap * 2 * hp->n_embd)) == NULL ||
	    (a->q = backend_alloc(be, (size_t)cap * w)) == NULL ||
	    (a->y = backend_alloc(be, (size_t)cap * w)) == NULL ||
	    (a->z = backend_alloc(be, (size_t)cap * w)) == NULL ||
	    (a->o = backend_alloc(be, (size_t)cap * w)) == NULL ||
	    (a->a = backend_alloc(be, (size_t)cap * nv)) == NULL ||
	    (a->b = backend_alloc(be, (size_t)cap * nv)) == NULL ||
	    (a->f = backend_alloc(be, (size_t)cap * (ff > 0 ? ff : 1))) == NULL ||
	    (a->u = backend_alloc(be, (size_t)cap * (ff > 0 ? ff : 1))) == NULL ||
	    (a->logits = backend_alloc(be, (size_t)lcap * hp->n_vocab)) == NULL ||
	    (a->dpos = (int32_t *)backend_alloc(be, cap)) == NULL ||
	    (a->pos = malloc(cap * sizeof *a->pos)) == NULL ||
	    (a->hi = malloc(cap * sizeof *a->hi)) == NULL ||
	    (a->tok = malloc(cap * sizeof *a->tok)) == NULL ||
	    (hp->n_expert > 0 && hp->arch != MODEL_ARCH_GEMMA4 && model_moe_act(md, cap) != 0) ||
	    (md->ops->act != NULL && md->ops->act(md, cap) != 0) ||
	    (md->dfl != NULL && (md->taps = backend_alloc(be, (size_t)md->dfl->hp.n_tap * cap *
	    hp->n_embd)) == NULL))
		return util_err(md->err, "activations for %d rows: out of memory", m);
	a->cap = cap, a->lcap = lcap;
	return 0;
}

/* The logits buffer for a head of rows rows (grown, never shrunk). */
static int
logits_reserve(struct model *md, int rows)
{
	struct model_act *a = &md->act;

	if (rows <= a->lcap)
		return 0;
	backend_mfree(md->be, a->logits);
	a->lcap = 0;
	if ((a->logits = backend_alloc(md->be, (size_t)rows * md->hp.n_vocab)) == NULL)
		return util_err(md->err, "logits for %d rows: out of memory", rows);
	a->lcap = rows;
	return 0;
}

/* RoPE at a->pos, or at dpos (backend memory) when not NULL. */
static int
rope(struct model *md, float *x, int ldx, int n_head, int hs, int m, const int32_t *dpos)
{
	const struct model_hparams *hp = &md->hp;

	return dpos ? backend_rope_dpos(md->be, x, ldx, n_head, hs, m, dpos, hp->n_rot,
	    hp->rope_theta, hp->rope_mode) : backend_rope(md->be, x, ldx, n_head, hs, m,
	    md->act.pos, hp->n_rot, hp->rope_theta, hp->rope_mode);
}

/*
 * Attention's input side for m rows: x += res (not NULL), then q (a->q, [m][n_head][qs]), K and V
 * ([m][kv_dim], into the cache or into scratch) from norm(x), with the q/k norms, rope at a->pos
 * (dpos NULL) or dpos and, for an f16 cache, K and V rounded to half; with dpos, K and V then
 * go into the caches kc, vc (n_ctx rows) at dpos.  The norms, ropes and store are one op
 * (backend_qk_norm_rope) when the layer has both norms and the cache is f32.
 */
static int
attn_qkv(struct model *md, struct model_layer *L, float *K, float *V, int m, const int32_t *dpos,
    const float *res, float *kc, float *vc, int n_ctx)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int hd = hp->head_dim, nh = hp->n_head, kvd = hp->n_head_kv * hd;
	int qs = hp->attn_gated ? 2 * hd : hd;	/* head stride in q rows */
	const struct backend_weight *W[3] = { &L->q, &L->k, &L->v };
	float *Y[3] = { a->q, K, V };

	if (backend_add_rmsnorm_matmul(be, a->x, res, m, hp->n_embd, L->attn_norm, hp->eps, 3, W,
	    Y))
		return fail(md);
	if (L->q_norm && L->k_norm && !md->kv_f16) {
		struct backend_qkn qk = { nh, hp->n_head_kv, hd, qs, L->q_norm, L->k_norm, hp->eps,
		    hp->n_rot, hp->rope_mode, hp->rope_theta, 0, 0 };

		return backend_qk_norm_rope(be, &qk, a->q, K, V, m, dpos ? NULL : a->pos, dpos,
		    dpos ? kc : NULL, vc, n_ctx) ? fail(md) : 0;
	}
	if ((L->q_norm && backend_rmsnorm(be, a->q, qs, L->q_norm, a->q, qs, m * nh, hd, hp->eps)) ||
	    (L->k_norm && backend_rmsnorm(be, K, hd, L->k_norm, K, hd, m * hp->n_head_kv, hd,
	    hp->eps)) ||
	    rope(md, a->q, nh * qs, nh, qs, m, dpos) ||
	    rope(md, K, kvd, hp->n_head_kv, hd, m, dpos) ||
	    (md->kv_f16 && (backend_round_f16(be, K, kvd, m, kvd) ||
	    backend_round_f16(be, V, kvd, m, kvd))) ||
	    (dpos && backend_kv_store(be, kc, vc, K, V, kvd, m, dpos, n_ctx, 0)))
		return fail(md);
	return 0;
}

/* Attention's output side for m rows: the sigmoid gate (qwen35), the o product into a->t. */
static int
attn_out(struct model *md, struct model_layer *L, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	int hd = hp->head_dim, nh = hp->n_head, qs = hp->attn_gated ? 2 * hd : hd;

	if (hp->attn_gated ? backend_mul_sigmoid_matmul(md->be, a->o, a->q + hd, qs, m, nh, hd, &L->o,
	    a->t) : backend_matmul(md->be, &L->o, a->o, nh * hd, a->t, hp->n_embd, m))
		return fail(md);
	return 0;
}

/*
 * The attention's shape and numerics: llama follows llama.cpp's orders (backend_attn.ggml)
 * unless opened with plain_attn.
 */
static struct backend_attn
attn_params(const struct model *md, int batched)
{
	const struct model_hparams *hp = &md->hp;
	struct backend_attn at = { hp->n_head, hp->n_head_kv, hp->head_dim,
	    1.0f / sqrtf((float)hp->head_dim), md->kv_f16,
	    hp->arch == MODEL_ARCH_LLAMA && !md->plain_attn, batched, 0, NULL, 0 };

	return at;
}

/* The pending residual: x += a->t. */
static int
residual(struct model *md, int m)
{
	return backend_add(md->be, md->act.x, md->act.t, (size_t)m * md->hp.n_embd) ? fail(md) : 0;
}

/*
 * Gated (qwen35) or plain (llama) attention of layer L over m rows at p0 (x += res first; the
 * output in a->t).  With dpos
 * (p0 in backend memory) the same ops on the same memory at every step: K and V go through
 * scratch into the cache.  batched: the rows are a batch as llama.cpp would run it (see
 * backend_attn.batched).
 */
static int
attn_layer(struct model *md, struct model_layer *L, struct state *st, int p0, int m,
    int batched, const int32_t *dpos, const float *res)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	int hd = hp->head_dim, nh = hp->n_head, kvd = hp->n_head_kv * hd;
	int qs = hp->attn_gated ? 2 * hd : hd, n_ctx = state_config(st)->n_ctx;
	float *kc = state_k(st, L->cache), *vc = state_v(st, L->cache);
	struct backend_attn at = attn_params(md, batched);

	if (dpos != NULL) {
		if (attn_qkv(md, L, a->y, a->z, m, dpos, res, kc, vc, n_ctx))
			return -1;
		if (backend_attention_dpos(md->be, &at, a->q, nh * qs, qs, kc, vc, m, dpos, n_ctx,
		    a->o))
			return fail(md);
		return attn_out(md, L, m);
	}
	if (attn_qkv(md, L, kc + (size_t)p0 * kvd, vc + (size_t)p0 * kvd, m, NULL, res, NULL, NULL,
	    0))
		return -1;
	if (backend_attention(md->be, &at, a->q, nh * qs, qs, kc, vc, m, p0, a->o))
		return fail(md);
	return attn_out(md, L, m);
}

/* The Gated DeltaNet layer's output side for m rows: gated norm, out product into a->t. */
static int
gdn_out(struct model *md, struct model_layer *L, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;

	if (backend_rmsnorm_gated_matmul(md->be, a->o, a->z, L->ssm_norm, m, hp->n_v_heads, hp->dv,
	    hp->eps, &L->out, a->t))
		return fail(md);
	return 0;
}

/* Gated DeltaNet layer L over m rows (x += res first; the output in a->t). */
static int
gdn_layer(struct model *md, struct model_layer *L, struct state *st, int m, int flags,
    const float *res)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int cd = model_conv_dim(hp), snap = flags & MODEL_VERIFY;
	const struct backend_weight *W[4] = { &L->qkv, &L->gate, &L->beta, &L->alpha };
	float *Y[4] = { a->q, a->z, a->b, a->a };
	/* transformers' l2norm has its own eps (1e-6), llama.cpp's the RMSNorm one */
	struct backend_gdn g = { hp->n_k_heads, hp->n_v_heads, hp->dk, hp->dv, 1, md->hf_l2,
	    md->hf_l2 ? 1e-6f : hp->eps };
	float *S = state_ssm(st, L->cache);

	if (backend_add_rmsnorm_matmul(be, a->x, res, m, hp->n_embd, L->attn_norm, hp->eps, 4, W, Y) ||
	    backend_conv1d_silu(be, a->q, cd, m, cd, L->conv, hp->d_conv,
	    state_conv(st, L->cache), snap ? state_conv_snap(st, L->cache) : NULL, a->y))
		return fail(md);
	if ((flags & MODEL_PREFILL) && !snap ?
	    backend_gdn_chunk(be, &g, m, a->y, cd, a->a, a->b, L->ssm_a, L->dt_bias, S, a->o) :
	    backend_gdn_step(be, &g, m, a->y, cd, a->a, a->b, L->ssm_a, L->dt_bias, S,
	    snap ? state_ssm_snap(st, L->cache) : NULL, a->o))
		return fail(md);
	return gdn_out(md, L, m);
}

/*
 * The FFN of layer L: x += a->t (the block before it), the FFN's output into a->t.  A dense
 * SwiGLU here, a mixture of experts in lib/model_moe.c.
 */
static int
ffn(struct model *md, struct model_layer *L, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;

	if (hp->n_expert > 0)
		return model_moe_ffn(md, L, m);
	if (backend_ffn(md->be, a->x, a->t, m, hp->n_embd, L->post_norm, hp->eps, &L->ffn_gate,
	    &L->ffn_up, &L->ffn_down, a->f, a->u, a->t))
		return fail(md);
	return 0;
}

/* What the head hands the host instead of logits: each row's greedy
 * pick (k 0: id[rows]), its top k by the sampler's order (val and id
 * [rows][k]), or s's draw from the row (draw); a row's token mask put on
 * it first (mask), then s's penalties (npen), as sample_next takes a row
 * grammar_mask_logits masked. */
struct pick {
	const uint32_t *const *mask;	/* [rows]: a row's bits (NULL: none), or NULL */
	int	k;		/* > 0: the top k (val, id) */
	float	temp;
	float	*val;
	int32_t	*id;		/* [rows]: the greedy picks, or s's draw */
	int32_t	*did;		/* not NULL: the greedy picks into backend memory instead, */
	const int32_t *dmap;	/* mapped (backend_argmax_map over nmap columns) when not NULL */
	int	nmap;
	struct sampler *s;	/* the sampler whose penalties, draw these are */
	int	draw;		/* s's draw at (seq, pos) from the row */
	uint64_t seq;
	int64_t	pos;
	const int32_t *pen_tok, *pen_cnt;	/* [npen]: sample_window's */
	int	npen;
};

/* pk's penalties on the row x[n] (none when npen is 0). */
static int
pick_penalize(struct backend *be, float *x, int n, const struct pick *pk)
{
	const struct sample_params *p;

	if (pk->npen == 0)
		return 0;
	p = sample_params(pk->s);
	return backend_penalize(be, x, n, pk->pen_tok, pk->pen_cnt, pk->npen, p->repeat_penalty,
	    p->presence_penalty, p->frequency_penalty);
}

/* pk's token masks on the logits rows x[rows][n] (none when pk->mask is NULL). */
static int
pick_mask(struct backend *be, float *x, int rows, int n, const struct pick *pk)
{
	for (int r = 0; pk->mask != NULL && r < rows; r++)
		if (pk->mask[r] != NULL && backend_mask(be, x + (size_t)r * n, n, pk->mask[r]) != 0)
			return -1;
	return 0;
}

/* The picks of rows logit rows of nv (lg, backend memory) as pk asks: a
 * draw, the top k, a masked head's mapped argmax, the argmax into backend
 * memory, or into pk->id. */
static int
pick_rows(struct backend *be, float *lg, int nv, int rows, const struct pick *pk)
{
	if (pk->draw)
		return backend_draw(be, lg, pk->s, pk->seq, pk->pos, pk->id);
	if (pk->k)
		return backend_topk(be, lg, nv, rows, nv, pk->k, pk->temp, pk->val, pk->id);
	if (pk->dmap)
		return backend_argmax_map(be, lg, nv, rows, pk->nmap, pk->dmap, pk->did);
	if (pk->did)
		return backend_argmax_dev(be, lg, nv, rows, nv, pk->did);
	return backend_argmax(be, lg, nv, rows, nv, pk->id);
}

/*
 * xn = norm(x) (w: the head norm); logits (over hw's rows) of the last
 * `rows` rows to the host, or (pk) only their picks.
 */
static int
head(struct model *md, const float *w, const struct backend_weight *hw, int m, int rows,
    float *logits, const struct pick *pk, float *hidden)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	size_t ne = hp->n_embd;

	if ((logits || pk) && logits_reserve(md, rows) != 0)
		return -1;
	/* the head's product queued before the first read waits for the GPU */
	if (backend_rmsnorm(be, a->x, ne, w, a->xn, ne, m, ne, hp->eps) ||
	    ((logits || pk) && backend_matmul(be, hw, a->xn + (m - rows) * ne, ne, a->logits,
	    (int)hw->ne1, rows)) ||
	    ((logits || pk) && md->ops->logits != NULL && md->ops->logits(md, rows) != 0) ||
	    (pk && pick_mask(be, a->logits, rows, (int)hw->ne1, pk)) ||
	    (pk && pick_penalize(be, a->logits, (int)hw->ne1, pk)) ||
	    (pk && pick_rows(be, a->logits, (int)hw->ne1, rows, pk)) ||
	    (hidden && backend_read(be, hidden, md->ops->prenorm ? a->x : a->xn, m * ne)) ||
	    (logits && backend_read(be, logits, a->logits, (size_t)rows * hw->ne1)))
		return fail(md);
	return 0;
}

/* The trunk's layers over m rows at p0 (dpos: p0 in backend memory, or NULL); x += out. */
static int
trunk(struct model *md, struct state *st, int p0, int m, int flags, const int32_t *dpos)
{
	for (int il = md->l0; il < md->l1; il++) {
		struct model_layer *L = &md->layers[il];
		const float *res = il > md->l0 ? md->act.t : NULL;

		if ((L->rec ? gdn_layer(md, L, st, m, flags, res) :
		    attn_layer(md, L, st, p0, m, m >= 2 && !(flags & MODEL_VERIFY), dpos, res)) ||
		    ffn(md, L, m) || (md->dfl != NULL && model_dflash_tap(md, il, m)))
			return -1;
	}
	md->tap_rows = m;
	return md->l1 > md->l0 ? residual(md, m) : 0;
}

/*
 * A step (decode, verify): the layers read p0 from a->dpos, so they queue the same ops on the
 * same memory at every position, and the backend may replay them as one recording (CUDA graph)
 * keyed by what they depend on: the model, the state, m and the snapshots.
 */
static int
layers_step(struct model *md, struct state *st, int p0, int m, int flags)
{
	uint64_t key[3] = { (uintptr_t)md, (uintptr_t)st,
	    (uint64_t)m << 1 | ((flags & MODEL_VERIFY) != 0) };
	int rc, rec;

	if (md->ops->host_pos || md->host_pos)	/* ops queued at a->pos: nothing to replay */
		return md->ops->layers(md, st, p0, m, flags, NULL);
	md->steps_dpos++;
	if ((rc = backend_graph_replay(md->be, key, sizeof key)) != 0)
		return rc < 0 ? fail(md) : 0;
	if ((rec = backend_graph_begin(md->be, key, sizeof key)) < 0)
		return fail(md);
	rc = md->ops->layers(md, st, p0, m, flags, md->act.dpos);
	if (rec && backend_graph_end(md->be, rc != 0) != 0)	/* nothing ran: again, unrecorded */
		rc = md->ops->layers(md, st, p0, m, flags, md->act.dpos);
	return rc;
}


/* a->x = the embeddings of tok[m]: the token table's rows, or the architecture's own. */
static int
embed(struct model *md, const int32_t *tok, int m)
{
	if (md->ops->embed != NULL)
		return md->ops->embed(md, tok, m);
	if (backend_embed(md->be, &md->tok_embd, tok, m, md->act.x, md->hp.n_embd) != 0)
		return fail(md);
	return 0;
}

/*
 * Stage failures: a split model keeps its stage's reason ("stage 1: ...");
 * a whole model (sm == md) has it already.  Always -1.
 */
static int
stage_fail(struct model *md, int s, const struct model *sm)
{
	if (sm != md)
		util_err(md->err, "stage %d: %s", s, sm->err);
	return -1;
}

/* Every stage's activations for m rows, or -1 with md->err. */
static int
stages_reserve(struct model *md, int m)
{
	for (int s = 0; s < model_stages(md); s++) {
		struct model *sm = model_stage(md, s);

		if (backend_use(sm->be) != 0 || model_act_reserve(sm, m) != 0)
			return stage_fail(md, s, sm);
	}
	return 0;
}

int
model_reserve(struct model *md, int m)
{
	return stages_reserve(md, m);
}

int
model_reserved(const struct model *md)
{
	int rows = INT_MAX;

	for (int s = 0; s < model_stages(md); s++) {
		const struct model *sm = model_stage(md, s);

		rows = sm->act.cap < rows ? sm->act.cap : rows;
	}
	return rows;
}

/*
 * Stage s's input rows: the embeddings of tok[m] on the first stage, the
 * previous stage's output x passed over the link on the others.
 */
/* Stage s-1's output rows x[m] over the link into stage s's x (stage s's device current). */
static int
stage_pass(struct model *md, int s, int m)
{
	struct model *sm = model_stage(md, s), *prev = model_stage(md, s - 1);

	if (backend_use(sm->be) != 0)
		return util_err(md->err, "stage %d: %s", s, backend_errmsg(sm->be));
	if (pipeline_pass(md->link, s - 1, prev->act.x, sm->act.x, (size_t)m * md->hp.n_embd))
		return util_err(md->err, "stage %d to %d: %s", s - 1, s,
		    pipeline_link_errmsg(md->link));
	return 0;
}

static int
stage_input(struct model *md, int s, const int32_t *tok, int m)
{
	struct model *sm = model_stage(md, s);

	if (s == 0)
		return embed(sm, tok, m) != 0 ? stage_fail(md, s, sm) : 0;
	return stage_pass(md, s, m);
}

/* Stage s over m rows of one sequence at p0 (its part of st): its input, then its layers. */
static int
stage_forward(struct model *md, int s, struct state *st, const int32_t *tok, int p0, int m,
    int flags, int step)
{
	struct model *sm = model_stage(md, s);
	struct state *ss = state_part(st, s);

	if (backend_use(sm->be) != 0)
		return util_err(md->err, "stage %d: %s", s, backend_errmsg(sm->be));
	for (int i = 0; i < m; i++)
		sm->act.pos[i] = p0 + i;
	if (step && backend_write(sm->be, (float *)sm->act.dpos, (const float *)sm->act.pos,
	    (size_t)m)) {
		fail(sm);
		return stage_fail(md, s, sm);
	}
	if (stage_input(md, s, tok, m) != 0)
		return -1;
	if (step ? layers_step(sm, ss, p0, m, flags) : sm->ops->layers(sm, ss, p0, m, flags, NULL))
		return stage_fail(md, s, sm);
	return 0;
}

int
model_inject(struct model *md, const struct model_embd *e)
{
	md->inj = NULL;
	if (e == NULL)
		return 0;	/* rows given and not taken: dropped */
	if (!md->ops->inject || model_stages(md) > 1)
		return util_err(md->err, "embedding rows (an image's): not for this model%s",
		    model_stages(md) > 1 ? " split in stages" : "'s architecture");
	if (e->n < 0 || (e->n > 0 && (e->row == NULL || e->x == NULL)))
		return util_err(md->err, "embedding rows: %d rows without their data", e->n);
	for (int i = 1; i < e->n; i++)
		if (e->row[i] <= e->row[i - 1])
			return util_err(md->err, "embedding rows: row %d after row %d", e->row[i],
			    e->row[i - 1]);
	if (e->n > 0 && e->row[0] < e->base)
		return util_err(md->err, "embedding rows: row %d before %d", e->row[0], e->base);
	md->inj = e;
	return 0;
}

/*
 * The pending embedding rows of a forward of m rows at p0 into the
 * activations (a->inj, and a->hi for bidir blocks: each row's last key).
 */
static int
inject_rows(struct model *md, const struct model_embd *e, int p0, int m)
{
	struct model_act *a = &md->act;

	if (e->n > 0 && e->row[e->n - 1] - e->base >= m)
		return util_err(md->err, "embedding rows: row %d of a forward of %d",
		    e->row[e->n - 1] - e->base, m);
	for (int r = 0; r < m; r++)
		a->hi[r] = p0 + r;
	for (int i = e->n - 1, end = -1; e->bidir && i >= 0; i--) {
		if (i == e->n - 1 || e->row[i + 1] != e->row[i] + 1)
			end = e->row[i] - e->base;
		a->hi[e->row[i] - e->base] = p0 + end;
	}
	a->inj = e;
	return 0;
}

static int
forward(struct model *md, struct state *st, const int32_t *tok, int m, int flags,
    float *logits, const struct pick *pk, float *hidden)
{
	const struct model_embd *e = md->inj;
	/* a step (layers_step) holds at most model_step_rows rows; more, or MODEL_PREFILL,
	 * is a prompt.  A step's products keep each row's one-row bits. */
	int p0, step = m <= model_step_rows(md) && !(flags & MODEL_PREFILL) && e == NULL;
	int n = model_stages(md), rc = -1;
	struct model *lm = model_last(md);

	md->inj = NULL;
	if (m < 1)
		return util_err(md->err, "forward: %d rows", m);
	if (stages_reserve(md, m) != 0)
		return -1;
	if ((p0 = state_push(st, m, flags & MODEL_VERIFY)) < 0)
		return util_err(md->err, "forward: %s", state_errmsg(st));
	if (e != NULL && inject_rows(md, e, p0, m) != 0)
		return -1;
	for (int s = 0; s < n; s++)
		if (stage_forward(md, s, st, tok, p0, m, flags, step) != 0)
			goto out;
	if (head(lm, lm->output_norm, &lm->output, m, flags & MODEL_LOGITS_ALL ? m : 1, logits,
	    pk, hidden) != 0) {
		stage_fail(md, n - 1, lm);
		goto out;
	}
	rc = 0;
out:
	md->act.inj = NULL;
	return rc;
}

int
model_forward(struct model *md, struct state *st, const int32_t *tok, int m,
    int flags, float *logits, float *hidden)
{
	return forward(md, st, tok, m, flags, logits, NULL, hidden);
}

int
model_forward_argmax(struct model *md, struct state *st, const int32_t *tok, int m,
    int flags, int32_t *ids, float *hidden)
{
	struct pick pk = { .id = ids };

	return forward(md, st, tok, m, flags, NULL, &pk, hidden);
}

/*
 * pk's penalties: the window of hist[n_hist] as sample_window gives it, to
 * put on the row before the pick (none when pk->s has no penalty).
 */
static int
pick_penalties(struct model *md, const int32_t *hist, int n_hist, struct pick *pk)
{
	if (!sample_has_penalty(sample_params(pk->s)))
		return 0;
	if (n_hist > md->pen_cap) {
		int32_t *t = realloc(md->pen, 2 * (size_t)n_hist * sizeof *t);
		if (t == NULL)
			return util_err(md->err, "forward: out of memory");
		md->pen = t, md->pen_cap = n_hist;
	}
	pk->pen_tok = md->pen, pk->pen_cnt = md->pen + md->pen_cap;
	pk->npen = sample_window(pk->s, hist, n_hist, md->pen, md->pen + md->pen_cap);
	return 0;
}

/* Room for a top-k pick's candidates (kept: a token must not allocate). */
static int
pick_room(struct model *md)
{
	if (md->pick_id != NULL)
		return 0;
	free(md->pick_val);
	if ((md->pick_val = malloc(SAMPLE_TOPK_MAX * sizeof *md->pick_val)) == NULL ||
	    (md->pick_id = malloc(SAMPLE_TOPK_MAX * sizeof *md->pick_id)) == NULL)
		return util_err(md->err, "forward: out of memory");
	return 0;
}

/* The mask bits on the host row lg[n] (backend_mask's rule). */
static void
mask_host(float *lg, int n, const uint32_t *bits)
{
	for (int t = 0; t < n; t++)
		if (!(bits[t / 32] >> (t % 32) & 1))
			lg[t] = -INFINITY;
}

int
model_can_mask(const struct model *md)
{
	return backend_has_mask(model_last((struct model *)md)->be);
}

int
model_forward_next(struct model *md, struct state *st, const int32_t *tok, int m, int flags,
    struct sampler *s, const int32_t *hist, int n_hist, uint64_t seq, int64_t pos,
    float *lg, int32_t *next)
{
	return model_forward_next_mask(md, st, tok, m, flags, s, hist, n_hist, seq, pos, NULL,
	    lg, next);
}

int
model_forward_next_mask(struct model *md, struct state *st, const int32_t *tok, int m,
    int flags, struct sampler *s, const int32_t *hist, int n_hist, uint64_t seq, int64_t pos,
    const uint32_t *mask, float *lg, int32_t *next)
{
	const struct sample_params *p = sample_params(s);
	const struct sample_params q = sample_unpenalized(p);	/* once the row has them */
	enum { GREEDY, TOP_K, DRAW, HOST } how = sample_plain_greedy(&q) ? GREEDY :
	    sample_top_k(&q) ? TOP_K : sample_row_draw(&q) ? DRAW : HOST;
	struct pick pk = { .mask = mask ? &mask : NULL, .k = sample_top_k(&q), .temp = p->temp,
	    .id = next, .s = s, .draw = how == DRAW, .seq = seq, .pos = pos };

	flags &= ~MODEL_LOGITS_ALL;
	if (mask != NULL && !model_can_mask(md))
		return util_err(md->err, "forward: a token mask: not on backend '%s'",
		    backend_name(model_last(md)->be));
	if (how == HOST) {		/* a top-k past SAMPLE_TOPK_MAX: the row read back */
		if (forward(md, st, tok, m, flags, lg, NULL, NULL) != 0)
			return -1;
		if (mask != NULL)
			mask_host(lg, (int)model_last(md)->output.ne1, mask);
		*next = sample_next(s, lg, hist, n_hist, seq, pos);
	} else {			/* the pick where the logits are */
		if (pick_penalties(md, hist, n_hist, &pk) != 0 ||
		    (how == TOP_K && pick_room(md) != 0))
			return -1;
		if (how == DRAW && sample_vocab(s) != model_last(md)->output.ne1)
			return util_err(md->err, "forward: a sampler of %d for %lld logits",
			    sample_vocab(s), (long long)model_last(md)->output.ne1);
		if (how == TOP_K)
			pk.val = md->pick_val, pk.id = md->pick_id;
		if (forward(md, st, tok, m, flags, NULL, &pk, NULL) != 0)
			return -1;
		if (how == TOP_K)
			*next = sample_next_top(s, pk.val, pk.id, pk.k, seq, pos);
	}
	if (*next < 0)
		return util_err(md->err, "position %lld: no finite logit", (long long)pos);
	return 0;
}

/* MTP layer L's head over its m slots: its own, the masked draft head or the output. */
static int
mtp_head(struct model *md, struct model_layer *L, int m, float *logits, const struct pick *pk,
    float *hout)
{
	return head(md, L->head_norm ? L->head_norm : md->output_norm,
	    L->head.data != NULL ? &L->head : md->draft_head.data != NULL ? &md->draft_head :
	    &md->output, m, m, logits, pk, hout);
}

/*
 * MTP layer L over m slots whose token rows are in a->cat (embedded) and
 * hidden rows at hb (backend memory): cat = [enorm(embedding) ; hnorm(h)],
 * x = eh_proj . cat, the layer at p0 (or at dpos, backend memory: not with
 * an ops->mtp_block, whose models chain_ok keeps off the chain), its head.
 * mtp's and the chain's steps (chain_step).
 */
static int
mtp_body(struct model *md, struct model_layer *L, struct state *st, int p0, int m,
    const float *hb, const int32_t *dpos, float *logits, const struct pick *pk, float *hout)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int ne = hp->n_embd;

	if (backend_rmsnorm(be, a->cat, 2 * ne, L->enorm, a->cat, 2 * ne, m, ne, hp->eps) ||
	    backend_rmsnorm(be, hb, ne, L->hnorm, a->cat + ne, 2 * ne, m, ne, hp->eps) ||
	    backend_matmul(be, &L->eh_proj, a->cat, 2 * ne, a->x, ne, m))
		return fail(md);
	if (md->ops->mtp_block != NULL ? md->ops->mtp_block(md, L, st, p0, m) :
	    attn_layer(md, L, st, p0, m, 0, dpos, NULL) || ffn(md, L, m) || residual(md, m))
		return -1;
	return mtp_head(md, L, m, logits, pk, hout);
}

static int
mtp(struct model *md, struct state *st, int k, int p0, const float *h,
    const int32_t *tok, int m, float *logits, const struct pick *pk, float *hout)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	struct model_layer *L;
	int ne = hp->n_embd;

	if (k < 0 || k >= hp->n_mtp)
		return util_err(md->err, "mtp: layer %d of %d", k, hp->n_mtp);
	if (m < 1 || p0 < 0 || p0 + m > state_config(st)->n_ctx)
		return util_err(md->err, "mtp: %d slots at %d do not fit", m, p0);
	if (model_act_reserve(md, m) != 0)
		return -1;
	L = &md->layers[hp->n_layer + k];
	for (int i = 0; i < m; i++)
		a->pos[i] = p0 + i;
	if (backend_embed(be, &md->tok_embd, tok, m, a->cat, 2 * ne) ||
	    backend_write(be, a->t, h, (size_t)m * ne))
		return fail(md);
	return mtp_body(md, L, st, p0, m, a->t, NULL, logits, pk, hout);
}

/* The MTP layers on a split model's last stage, with its part of st. */
static int
mtp_stage(struct model *md, struct state *st, int k, int p0, const float *h,
    const int32_t *tok, int m, float *logits, const struct pick *pk, float *hout)
{
	struct model *lm = model_last(md);
	int n = model_stages(md);

	if (lm == md)
		return mtp(md, st, k, p0, h, tok, m, logits, pk, hout);
	if (backend_use(lm->be) != 0)
		return util_err(md->err, "stage %d: %s", n - 1, backend_errmsg(lm->be));
	if (mtp(lm, state_part(st, n - 1), k, p0, h, tok, m, logits, pk, hout) != 0)
		return stage_fail(md, n - 1, lm);
	return 0;
}

int
model_mtp(struct model *md, struct state *st, int k, int p0, const float *h,
    const int32_t *tok, int m, float *logits, float *hout)
{
	return mtp_stage(md, st, k, p0, h, tok, m, logits, NULL, hout);
}

int
model_mtp_argmax(struct model *md, struct state *st, int k, int p0, const float *h,
    const int32_t *tok, int m, int32_t *ids, float *hout)
{
	struct pick pk = { .id = ids };

	return mtp_stage(md, st, k, p0, h, tok, m, NULL, &pk, hout);
}

/*
 * model_mtp_chain's memory (act.chain, act.chost; see model_impl.h): the
 * positions of a chain of n at [MODEL_CHAIN_MAX - n, MODEL_CHAIN_MAX), so
 * that they, h and the first token are one span; after the activations.
 */
static int
chain_mem(struct model *md)
{
	struct model_act *a = &md->act;
	const struct ranks *r = model_draft_ranks(md, NULL, NULL);
	size_t n = 2 * MODEL_CHAIN_MAX + md->hp.n_embd + 1;

	if (a->chain != NULL)
		return 0;
	if ((a->chain = backend_alloc(md->be, n)) == NULL ||
	    (a->chost = backend_host_alloc(md->be, n)) == NULL ||
	    (r != NULL && ((a->cmap = (int32_t *)backend_alloc(md->be, r->n)) == NULL ||
	    (a->clg = backend_host_alloc(md->be, model_draft_vocab(md))) == NULL)))
		return util_err(md->err, "mtp chain: out of memory");
	if (r != NULL && backend_write(md->be, (float *)a->cmap, (const float *)r->ids, r->n))
		return fail(md);
	return 0;
}

/*
 * Step j of a chain of n in c (chain_mem's layout): MTP layer 0 over one
 * slot at c's position j, token j of c (the step before's pick), hidden
 * c's h (j 0) or the step before's head output (a->xn); its pick into
 * token j + 1 of c.  mtp()'s ops, with the positions and the token read
 * from backend memory.
 */
static int
chain_step(struct model *md, struct state *st, float *c, int n, int j)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	struct model_layer *L = &md->layers[hp->n_layer];
	int ne = hp->n_embd;
	int32_t *pos = (int32_t *)c + MODEL_CHAIN_MAX - n + j;
	int32_t *tok = (int32_t *)(c + MODEL_CHAIN_MAX + ne) + j;
	const struct ranks *r = model_draft_ranks(md, NULL, NULL);
	struct pick pk = { .did = tok + 1, .dmap = r ? a->cmap : NULL, .nmap = r ? r->n : 0 };

	if (backend_embed_dev(be, &md->tok_embd, tok, 1, a->cat, 2 * ne) != 0)
		return fail(md);
	return mtp_body(md, L, st, 0, 1, j > 0 ? a->xn : c + MODEL_CHAIN_MAX, pos, NULL, &pk, NULL);
}

static int
chain_steps(struct model *md, struct state *st, float *c, int n)
{
	for (int j = 0; j < n; j++)
		if (chain_step(md, st, c, n, j) != 0)
			return -1;
	return 0;
}

/* Whether md (a whole model or the last stage) runs model_mtp_chain chained. */
static int
chain_ok(const struct model *md)
{
	return md->ops->mtp_block == NULL && !md->ops->host_pos && !md->ops->prenorm &&
	    backend_chain(md->be) && backend_dev_ids(md->be);
}

/* model_mtp_chain chained on md (chain_ok), its state st: one write, the
 * steps (replayed when recorded), one read. */
static int
chain_run(struct model *md, struct state *st, int p0, const float *h, int32_t tok, int n,
    int32_t *ids, float *hout)
{
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int ne = md->hp.n_embd, cm = MODEL_CHAIN_MAX, rc, rec;
	uint64_t key[4] = { (uintptr_t)md, (uintptr_t)st, (uint64_t)n,
	    0x6e69616863707466ULL };	/* "mtpchain": not a layers_step key */
	int32_t *hc;

	if (model_act_reserve(md, 1) != 0 || chain_mem(md) != 0)
		return -1;
	hc = (int32_t *)a->chost;
	for (int j = 0; j < n; j++)
		hc[cm - n + j] = p0 + j;
	memcpy(a->chost + cm, h, (size_t)ne * sizeof *h);
	hc[cm + ne] = tok;
	if (backend_write(be, a->chain + cm - n, a->chost + cm - n, (size_t)n + ne + 1) != 0 ||
	    (rc = backend_graph_replay(be, key, sizeof key)) < 0)
		return fail(md);
	if (rc == 0) {
		if ((rec = backend_graph_begin(be, key, sizeof key)) < 0)
			return fail(md);
		rc = chain_steps(md, st, a->chain, n);
		if (rec && backend_graph_end(be, rc != 0) != 0)	/* nothing ran: again */
			rc = chain_steps(md, st, a->chain, n);
		if (rc != 0)
			return -1;
	}
	if (backend_read(be, a->chost + cm + ne + 1, a->chain + cm + ne + 1, (size_t)n) != 0 ||
	    (hout != NULL && backend_read(be, hout, a->xn, (size_t)ne) != 0))
		return fail(md);
	memcpy(ids, hc + cm + ne + 1, (size_t)n * sizeof *ids);
	return 0;
}

/* model_mtp_chain step by step (model_mtp_argmax), the hidden rows through
 * host scratch (act.chost's h). */
static int
chain_host(struct model *md, struct state *st, int p0, const float *h, int32_t tok, int n,
    int32_t *ids, float *hout)
{
	struct model *lm = model_last(md);
	const struct ranks *r = model_draft_ranks(md, NULL, NULL);
	int ne = md->hp.n_embd;
	float *hs;

	if (backend_use(lm->be) != 0)
		return util_err(md->err, "%s", backend_errmsg(lm->be));
	if (model_act_reserve(lm, 1) != 0 || chain_mem(lm) != 0)
		return lm != md ? util_err(md->err, "%s", lm->err) : -1;
	hs = lm->act.chost + MODEL_CHAIN_MAX;
	if (hs != h)
		memmove(hs, h, (size_t)ne * sizeof *h);
	for (int j = 0; j < n; j++) {
		const int32_t *t = j > 0 ? &ids[j - 1] : &tok;

		if (r == NULL ? model_mtp_argmax(md, st, 0, p0 + j, hs, t, 1, &ids[j], hs) :
		    model_mtp(md, st, 0, p0 + j, hs, t, 1, lm->act.clg, hs))
			return -1;
		if (r != NULL)
			ids[j] = ranks_argmax(r, lm->act.clg);
		if (ids[j] < 0)
			break;	/* no token to go on with */
	}
	if (hout != NULL)
		memcpy(hout, hs, (size_t)ne * sizeof *hout);
	return 0;
}

int
model_mtp_chain(struct model *md, struct state *st, int p0, const float *h, int32_t tok,
    int n, int32_t *ids, float *hout)
{
	struct model *lm = model_last(md);
	int ns = model_stages(md), rc;

	if (n < 1 || n > MODEL_CHAIN_MAX)
		return util_err(md->err, "mtp chain: %d steps (1..%d)", n, MODEL_CHAIN_MAX);
	if (md->hp.n_mtp < 1)
		return util_err(md->err, "mtp: layer 0 of %d", md->hp.n_mtp);
	if (p0 < 0 || p0 + n > state_config(st)->n_ctx)
		return util_err(md->err, "mtp: %d slots at %d do not fit", n, p0);
	if (tok < 0 || tok >= lm->tok_embd.ne1)
		return util_err(md->err, "mtp chain: token %d outside [0, %lld)", tok,
		    (long long)lm->tok_embd.ne1);
	if (!chain_ok(lm))
		rc = chain_host(md, st, p0, h, tok, n, ids, hout);
	else if (backend_use(lm->be) != 0)
		return util_err(md->err, "stage %d: %s", ns - 1, backend_errmsg(lm->be));
	else if ((rc = chain_run(lm, ns > 1 ? state_part(st, ns - 1) : st, p0, h, tok, n, ids,
	    hout)) != 0)
		return stage_fail(md, ns - 1, lm);
	for (int j = 1; rc == 0 && j < n; j++)	/* past a failed pick: nothing */
		ids[j] = ids[j - 1] < 0 ? -1 : ids[j];
	return rc;
}

int
model_seq_rows(const struct model_seqs *g, int i)
{
	return g->rows != NULL ? g->rows[i] : 1;
}

/*
 * model_forward_seqs's attention of layer L: the products over all the
 * group's rows at once, K and V through scratch (a->y, a->z) into each
 * sequence's cache at its own positions (one backend_kv_store_seqs), then
 * every sequence's attention as its own forward runs it (one
 * backend_attention_seqs; batched: two or more rows, not a verify).
 */
static int
attn_layer_seqs(struct model *md, struct model_layer *L, const struct model_seqs *g,
    const float *res)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int hd = hp->head_dim, nh = hp->n_head, kvd = hp->n_head_kv * hd;
	int qs = hp->attn_gated ? 2 * hd : hd;
	struct backend_kv_seq kv[BACKEND_ROWS_MAX];
	struct backend_attn at = attn_params(md, !g->verify);	/* (and 2 rows or more) */

	if (g->n > BACKEND_ROWS_MAX)	/* (seqs_check: a row each at least) */
		return util_err(md->err, "forward: %d sequences in a group", g->n);
	for (int i = 0, r = 0; i < g->n; r += model_seq_rows(g, i++))
		kv[i] = (struct backend_kv_seq){ model_seq_rows(g, i), a->pos[r],
		    state_k(g->st[i], L->cache), state_v(g->st[i], L->cache) };
	if (attn_qkv(md, L, a->y, a->z, g->m, NULL, res, NULL, NULL, 0))
		return -1;
	if (backend_kv_store_seqs(be, a->y, a->z, kvd, g->n, kv))
		return fail(md);
	if (backend_attention_seqs(be, &at, g->n, kv, a->q, nh * qs, qs, a->o))
		return fail(md);
	return attn_out(md, L, g->m);
}

/* model_forward_seqs's Gated DeltaNet layer: products over the group,
 * the conv and the recurrence of every sequence, each with its state
 * (and, to verify, its snapshots), in one call each (backend_*_seqs). */
static int
gdn_layer_seqs(struct model *md, struct model_layer *L, const struct model_seqs *g,
    const float *res)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int cd = model_conv_dim(hp), nv = hp->n_v_heads;
	const struct backend_weight *W[4] = { &L->qkv, &L->gate, &L->beta, &L->alpha };
	float *Y[4] = { a->q, a->z, a->b, a->a };
	struct backend_gdn gd = { hp->n_k_heads, nv, hp->dk, hp->dv, 1, md->hf_l2,
	    md->hf_l2 ? 1e-6f : hp->eps };
	struct backend_seq cs[BACKEND_ROWS_MAX], ss[BACKEND_ROWS_MAX];

	if (g->n > BACKEND_ROWS_MAX)	/* (seqs_check: a row each at least) */
		return util_err(md->err, "forward: %d sequences in a group", g->n);
	for (int i = 0; i < g->n; i++) {
		struct state *st = g->st[i];

		cs[i] = (struct backend_seq){ model_seq_rows(g, i), state_conv(st, L->cache),
		    g->verify ? state_conv_snap(st, L->cache) : NULL };
		ss[i] = (struct backend_seq){ cs[i].rows, state_ssm(st, L->cache),
		    g->verify ? state_ssm_snap(st, L->cache) : NULL };
	}
	if (backend_add_rmsnorm_matmul(be, a->x, res, g->m, hp->n_embd, L->attn_norm, hp->eps, 4, W,
	    Y) ||
	    backend_conv1d_silu_seqs(be, a->q, cd, g->n, cs, cd, L->conv, hp->d_conv, a->y) ||
	    backend_gdn_step_seqs(be, &gd, g->n, ss, a->y, cd, a->a, a->b, L->ssm_a, L->dt_bias,
	    a->o))
		return fail(md);
	return gdn_out(md, L, g->m);
}

/*
 * The n states can each take their rows (rows NULL: one each): distinct,
 * of this model, at most a step's rows, room left in the context and, to
 * verify, in the snapshots.  Checked before any state moves.
 */
static int
seqs_check(struct model *md, struct state **st, const int *rows, int n, int flags)
{
	const struct model_hparams *hp = &md->hp;
	int most = model_step_rows(md);

	if (n < 1)
		return util_err(md->err, "forward: %d sequences", n);
	if (flags & ~(MODEL_LOGITS_ALL | MODEL_VERIFY))
		return util_err(md->err, "forward: sequences: flags %#x (a prompt runs alone)", flags);
	for (int i = 0; i < n; i++) {
		const struct state_config *c = state_config(st[i]);
		int k = rows != NULL ? rows[i] : 1;

		for (int j = 0; j < i; j++)
			if (st[j] == st[i])
				return util_err(md->err, "forward: sequences %d and %d share a state",
				    j + 1, i + 1);
		if (c->n_kv != hp->n_full + hp->n_mtp || c->n_rec != hp->n_rec)
			return util_err(md->err, "forward: sequence %d: state of another model", i + 1);
		if (k < 1 || k > most)
			return util_err(md->err, "forward: sequence %d: %d rows (a step has 1..%d; "
			    "a prompt runs alone)", i + 1, k, most);
		if (k > c->n_ctx - state_pos(st[i]))
			return util_err(md->err, "forward: sequence %d: context of %d is full", i + 1,
			    c->n_ctx);
		if ((flags & MODEL_VERIFY) && k > c->n_snap)
			return util_err(md->err, "forward: sequence %d: %d rows to verify, "
			    "snapshots for %d", i + 1, k, c->n_snap);
	}
	return 0;
}

/* The trunk over group g's rows (llama, qwen35, qwen35moe); x += out. */
static int
trunk_seqs(struct model *md, const struct model_seqs *g)
{
	for (int il = md->l0; il < md->l1; il++) {
		struct model_layer *L = &md->layers[il];
		const float *res = il > md->l0 ? md->act.t : NULL;

		if ((L->rec ? gdn_layer_seqs(md, L, g, res) : attn_layer_seqs(md, L, g, res)) ||
		    ffn(md, L, g->m) || (md->dfl != NULL && model_dflash_tap(md, il, g->m)))
			return -1;
	}
	md->tap_rows = g->m;	/* the group's rows, as trunk keeps a forward's */
	return md->l1 > md->l0 ? residual(md, g->m) : 0;
}

const struct model_arch_ops model_arch_qwen35 = {
	.layers = trunk, .layers_seqs = trunk_seqs,
};

/* Push each state of group g (seqs_check passed), its rows' positions into pos[g->m]. */
static int
seqs_push(struct model *md, const struct model_seqs *g, int32_t *pos)
{
	for (int i = 0, r = 0; i < g->n; i++) {
		int k = model_seq_rows(g, i), p0 = state_push(g->st[i], k, g->verify);

		if (p0 < 0)
			return util_err(md->err, "forward: sequence %d: %s", i + 1,
			    state_errmsg(g->st[i]));
		for (int j = 0; j < k; j++)
			pos[r++] = p0 + j;
	}
	return 0;
}

/*
 * A micro-batch of model_forward_seqs: a group of whole sequences, at most
 * model_step_rows rows, from row r of the forward, and where its outputs
 * go.
 */
struct micro {
	struct model_seqs g;
	int	r;
	int32_t	pos[BACKEND_ROWS_MAX];	/* its rows' positions */
	float	*logits, *hidden, *taps;	/* at its rows, or NULL */
	struct pick pk;
	int	has_pk;
};

/*
 * Stage s's work on micro-batch mb, its input there already (stage 0: the
 * tokens tok[mb->g.m]): the embeddings on stage 0, the layers over the
 * stage's parts of the states, and on the last stage the head (and the
 * DFlash drafter's taps) into mb's outputs.
 */
static int
micro_stage(struct model *md, int s, const struct micro *mb, const int32_t *tok)
{
	struct model *sm = model_stage(md, s), *lm = model_last(md);
	struct state *part[BACKEND_ROWS_MAX];	/* a sequence has a row at least */
	struct model_seqs gs = mb->g;
	int m = mb->g.m;

	for (int i = 0; i < gs.n; i++)
		part[i] = state_part(mb->g.st[i], s);
	gs.st = part;
	if (backend_use(sm->be) != 0)
		return util_err(md->err, "stage %d: %s", s, backend_errmsg(sm->be));
	memcpy(sm->act.pos, mb->pos, m * sizeof *mb->pos);
	if ((s == 0 && embed(sm, tok, m) != 0) || sm->ops->layers_seqs(sm, &gs) != 0)
		return stage_fail(md, s, sm);
	if (sm != lm)
		return 0;
	if (head(lm, lm->output_norm, &lm->output, m, m, mb->logits, mb->has_pk ? &mb->pk : NULL,
	    mb->hidden) != 0 || (mb->taps != NULL && model_taps(lm, mb->taps, m) != 0))
		return stage_fail(md, s, lm);
	return 0;
}

/*
 * The micro-batches mb[n] through the stages, wave after wave (model.h):
 * in wave t, first each stage's output of the wave before passed on to
 * the next stage (the last stage's first, so that a stage's rows go on
 * before it takes new ones), then stage s's work on micro-batch t - s,
 * stage 0's first.  A whole model is one stage: its micro-batches one
 * after another.
 */
static int
seqs_pipeline(struct model *md, struct micro *mb, int n, const int32_t *tok)
{
	int k = model_stages(md);
	long busy = 0;

	for (int t = 0; t < n + k - 1; t++) {
		int at = 0;	/* stages at work in this wave */

		for (int s = k - 1; s >= 1; s--)
			if (t - s >= 0 && t - s < n && stage_pass(md, s, mb[t - s].g.m) != 0)
				return -1;
		for (int s = 0; s < k; s++) {
			if (t - s < 0 || t - s >= n)
				continue;
			if (micro_stage(md, s, &mb[t - s], tok + mb[t - s].r) != 0)
				return -1;
			at++;
		}
		busy += at > 1;
	}
	if (k > 1 && n > 1)
		md->pps.forwards++, md->pps.microbatches += n, md->pps.waves += n + k - 1,
		    md->pps.busy_waves += busy;
	return 0;
}

/*
 * Cut n sequences (rows NULL: one row each) into micro-batches mb[]: whole
 * sequences packed greedily into groups of up to model_step_rows rows,
 * each with its outputs' places; their states pushed.  How many, or -1
 * with md->err.
 */
static int
seqs_cut(struct model *md, struct state **st, const int *rows, int n, int verify,
    float *logits, const struct pick *pk, float *hidden, float *taps, struct micro *mb)
{
	const struct model_hparams *hp = &md->hp;
	size_t tw = md->dfl != NULL ? (size_t)md->dfl->hp.n_tap * hp->n_embd : 0;
	int nmb = 0, most = model_step_rows(md);

	for (int i = 0, r = 0; i < n; i += mb[nmb++].g.n) {
		struct micro *u = &mb[nmb];
		struct model_seqs *g = &u->g;

		memset(u, 0, sizeof *u);
		g->st = st + i, g->rows = rows != NULL ? rows + i : NULL, g->verify = verify;
		for (g->n = 0, g->m = 0; i + g->n < n &&
		    g->m + model_seq_rows(g, g->n) <= most; g->n++)
			g->m += model_seq_rows(g, g->n);
		u->r = r;
		u->logits = logits ? logits + (size_t)r * hp->n_vocab : NULL;
		u->hidden = hidden ? hidden + (size_t)r * hp->n_embd : NULL;
		u->taps = taps ? taps + (size_t)r * tw : NULL;
		if ((u->has_pk = pk != NULL))
			u->pk = *pk, u->pk.id = pk->id + (size_t)r * (pk->k ? pk->k : 1),
			    u->pk.val = pk->val ? pk->val + (size_t)r * pk->k : NULL,
			    u->pk.mask = pk->mask ? pk->mask + r : NULL;
		if (seqs_push(md, g, u->pos) != 0)
			return -1;
		r += g->m;
	}
	return nmb;
}

/*
 * model_forward_seqs (rows NULL: one row each), whole sequences packed
 * greedily into groups of up to model_step_rows rows: a product of more
 * rows may take another kernel (the CUDA backend's prefill GEMM), whose
 * rows are not the one-row products' bits; up to it every backend keeps
 * them (each stage's backend_step_rows).  The groups are the micro-batches of a split model's
 * pipeline (seqs_pipeline).
 */
static int
forward_seqs(struct model *md, struct state **st, const int *rows, int n, const int32_t *tok,
    int flags, float *logits, const struct pick *pk, float *hidden, float *taps)
{
	struct micro *mb;
	int nmb, rc;

	if (md->inj != NULL) {
		md->inj = NULL;
		return util_err(md->err, "forward: sequences: embedding rows go with one prompt");
	}
	if (seqs_check(md, st, rows, n, flags) != 0)
		return -1;
	/* one sequence is a step of its own: the same ops, through the recorded
	 * step (CUDA graphs) that a lone decode or verify replays */
	if (taps != NULL && md->dfl == NULL)
		return util_err(md->err, "forward: taps: no DFlash drafter attached");
	if (n == 1) {
		int m = model_seq_rows(&(struct model_seqs){ .rows = rows }, 0);

		if (forward(md, st[0], tok, m, flags | MODEL_LOGITS_ALL, logits, pk, hidden) ||
		    (taps != NULL && model_taps(md, taps, m)))
			return -1;
		md->sqs.forwards++, md->sqs.groups++, md->sqs.last = m;
		md->sqs.most = m > md->sqs.most ? m : md->sqs.most;
		return 0;
	}
	if ((mb = malloc((size_t)n * sizeof *mb)) == NULL)
		return util_err(md->err, "forward: %d sequences: out of memory", n);
	rc = stages_reserve(md, model_step_rows(md)) != 0 ||
	    (nmb = seqs_cut(md, st, rows, n, (flags & MODEL_VERIFY) != 0, logits, pk, hidden, taps,
	    mb)) < 0 || seqs_pipeline(md, mb, nmb, tok) != 0 ? -1 : 0;
	if (rc == 0)
		md->sqs.forwards++, md->sqs.groups += nmb, md->sqs.last = 0;
	for (int i = 0; rc == 0 && i < nmb; i++)
		md->sqs.last = mb[i].g.m > md->sqs.last ? mb[i].g.m : md->sqs.last;
	if (rc == 0 && md->sqs.last > md->sqs.most)
		md->sqs.most = md->sqs.last;
	free(mb);
	return rc;
}

int
model_forward_seqs(struct model *md, struct state **st, const int *rows, int n,
    const int32_t *tok, int flags, float *logits, int32_t *ids, float *hidden)
{
	struct pick pk = { .id = ids };

	if (rows == NULL)
		return util_err(md->err, "forward: sequences without their rows");
	if (logits != NULL && ids != NULL)
		return util_err(md->err, "forward: sequences: logits or ids, not both");
	return forward_seqs(md, st, rows, n, tok, flags, logits, ids ? &pk : NULL, hidden, NULL);
}

int
model_forward_seqs_taps(struct model *md, struct state **st, const int *rows, int n,
    const int32_t *tok, int flags, float *logits, int32_t *ids, const uint32_t *const *mask,
    float *hidden, float *taps)
{
	struct pick pk = { .mask = mask, .id = ids };

	if (rows == NULL)
		return util_err(md->err, "forward: sequences without their rows");
	if (logits != NULL && ids != NULL)
		return util_err(md->err, "forward: sequences: logits or ids, not both");
	if (mask != NULL && (ids == NULL || !model_can_mask(md)))
		return util_err(md->err, "forward: sequences: token masks %s",
		    ids == NULL ? "without ids" : "not on this backend");
	return forward_seqs(md, st, rows, n, tok, flags, logits, ids ? &pk : NULL, hidden, taps);
}

int
model_forward_batch(struct model *md, struct state **st, const int32_t *tok, int n,
    float *logits, float *hidden)
{
	return forward_seqs(md, st, NULL, n, tok, 0, logits, NULL, hidden, NULL);
}

int
model_forward_batch_argmax(struct model *md, struct state **st, const int32_t *tok, int n,
    int32_t *ids, float *hidden)
{
	struct pick pk = { .id = ids };

	return forward_seqs(md, st, NULL, n, tok, 0, NULL, &pk, hidden, NULL);
}
