#include "model.h"

#include "model_impl.h"
#include "util.h"

/*
 * The mixture-of-experts FFN (qwen35moe; transformers'
 * Qwen3_5MoeSparseMoeBlock, llama.cpp's build_moe_ffn with a softmax
 * gate and normalised weights, plus the shared expert):
 *
 *	xn = rmsnorm(x) * post_norm
 *	p = softmax(router . xn) over every expert, in float32
 *	the top n_expert_used of p, their weights renormalised to sum to 1
 *	y = sum_j w_j * down_j(silu(gate_j . xn) * (up_j . xn))
 *	  + sigmoid(gate_inp_shexp . xn) * down_s(silu(gate_s . xn) * (up_s . xn))
 *
 * Written against the backend's MoE ops (lib/backend.h): the expert ids
 * stay in backend memory, so a routed step records and replays like any
 * other.
 */

static int
fail(struct model *md)
{
	return util_err(md->err, "%s", backend_errmsg(md->be));
}

int
model_moe_act(struct model *md, int cap)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	size_t k = hp->n_expert_used;

	if ((a->rl = backend_alloc(be, (size_t)cap * hp->n_expert)) == NULL ||
	    (a->rw = backend_alloc(be, (size_t)cap * k)) == NULL ||
	    (a->rid = (int32_t *)backend_alloc(be, (size_t)cap * k)) == NULL ||
	    (a->ef = backend_alloc(be, (size_t)cap * k * hp->n_ff_exp)) == NULL ||
	    (a->sh = backend_alloc(be, (size_t)cap * hp->n_embd)) == NULL ||
	    (a->sg = backend_alloc(be, (size_t)cap)) == NULL)
		return -1;
	return 0;
}

/* The shared expert of xn (m rows) into a->sh and its gate's logit into
 * a->sg (backend_moe_down_add adds the gated sum). */
static int
shared(struct model *md, struct model_layer *L, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int ne = hp->n_embd;

	if (backend_mlp(be, &L->sh_gate, &L->sh_up, &L->sh_down, a->xn, m, 0.0f, a->f, a->u,
	    a->sh) ||
	    backend_matmul(be, &L->sh_inp, a->xn, ne, a->sg, 1, m))
		return fail(md);
	return 0;
}

int
model_moe_ffn(struct model *md, struct model_layer *L, int m)
{
	const struct model_hparams *hp = &md->hp;
	struct model_act *a = &md->act;
	struct backend *be = md->be;
	int ne = hp->n_embd, n = hp->n_expert, k = hp->n_expert_used, sh = L->sh_up.data != NULL;

	if (backend_add_rmsnorm(be, a->x, a->t, L->post_norm, a->xn, hp->eps, m, ne))
		return fail(md);
	if (sh && shared(md, L, m) != 0)
		return -1;
	/* the experts, their weighted sum plus the gated shared expert's */
	if (backend_matmul(be, &L->router, a->xn, ne, a->rl, n, m) ||
	    backend_moe_route(be, a->rl, n, m, n, k, a->rid, a->rw) ||
	    backend_moe_ffn(be, &L->exp_gate, &L->exp_up, &L->exp_down, n, a->xn, ne, m, a->rid,
	    a->rw, k, 0.0f, a->ef, sh ? a->sh : NULL, a->sg, 1, a->t, ne))
		return fail(md);
	return 0;
}
