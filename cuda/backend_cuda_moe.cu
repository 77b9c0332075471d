/*
 * backend_cuda_moe.cu: the CUDA backend's mixture-of-experts ops (routing,
 * the experts' products slot by slot, their gated sums) and the other ops
 * of the MoE families: Gemma-4's GeGLU and soft-capping, step35's limited
 * SwiGLU, head gate and dynamic conv (see backend_cuda.cu for the whole).
 */
#include "backend_cuda.cuh"

/* --- the mixture of experts, Gemma-4's and step35's ops ----------------- */

/*
 * The experts' products: Y[ns][w->ne1 / n_exp] with slot s's row the
 * product of input row s / per (of nx rows of x, ldx floats apart) with
 * expert ids[s] of the stack w, each the bits of that row's product with
 * that expert alone (gpu_moe_matvec), for any ns: the slots grouped by
 * expert (backend_moe_group_set; the default where they share experts)
 * run the decode kernels' row functions on up to 16 of an expert's slots
 * at once, whose rows have the one-row bits, so no slot's sums depend on
 * which or how many rows share its expert.  A prompt's (nx more than a
 * step's rows) under the bf16 GEMM kind: gpu_moe_matvec's bf16 GEMM, whose
 * slots' rows depend on their own operands alone too.  moe_products_n: of
 * nw (1 or 2) stacks of one type and shape into Y[i], by one
 * gpu_moe_matvecs.
 */
static int
moe_products_n(struct backend *be, int nw, const struct backend_weight *const *w, int n_exp,
    const float *x, int ldx, int nx, int per, const int32_t *ids, int ns, float *const *Y)
{
	const float *xr = input_rows(be, x, ldx, w[0]->ne0, CW(w[0])->ne0p, nx);
	const void *W[2] = { w[0]->data, nw > 1 ? w[1]->data : NULL };
	const float *S[2] = { wscale(w[0]), nw > 1 ? wscale(w[1]) : NULL };

	if (xr == NULL)
		return -1;
	if (gpu_moe_matvecs(CB(be)->g, w[0]->type, nw, W, w[0]->ne1 / n_exp, CW(w[0])->ne0p,
	    n_exp, ids, ns, per, xr, nx, Y, S) != 0)
		return gfail(be, "moe");
	return 0;
}

static int
moe_products(struct backend *be, const struct backend_weight *w, int n_exp, const float *x,
    int ldx, int nx, int per, const int32_t *ids, int ns, float *Y)
{
	return moe_products_n(be, 1, &w, n_exp, x, ldx, nx, per, ids, ns, &Y);
}

/* moe_products of two stacks on the same x and ids (gate and up) into Y0
 * and Y1: in one gpu_moe_matvecs where they share a type and shape (x
 * quantized, or a prompt's rows gathered, once), else one call each. */
static int
moe_products2(struct backend *be, const struct backend_weight *w0,
    const struct backend_weight *w1, int n_exp, const float *x, int ldx, int nx, int per,
    const int32_t *ids, int ns, float *Y0, float *Y1)
{
	const struct backend_weight *w[2] = { w0, w1 };
	float *Y[2] = { Y0, Y1 };

	if (w0->type != w1->type || w0->ne0 != w1->ne0 || w0->ne1 != w1->ne1 ||
	    CW(w0)->ne0p != CW(w1)->ne0p)
		return moe_products(be, w0, n_exp, x, ldx, nx, per, ids, ns, Y0) ||
		    moe_products(be, w1, n_exp, x, ldx, nx, per, ids, ns, Y1) ? -1 : 0;
	return moe_products_n(be, 2, w, n_exp, x, ldx, nx, per, ids, ns, Y);
}

static int
cu_moe_route(struct backend *be, const float *x, int ldx, int m, int n, int k, int32_t *ids,
    float *w)
{
	return gpu_moe_route(CB(be)->g, GPU_ROUTE_SOFTMAX, x, ldx, m, n, k, NULL, 0, 1.0f, NULL, ids,
	    w) ? gfail(be, "moe_route") : 0;
}

/* backend_moe_route_scale: the per-expert scale in the router's kernel. */
static int
cu_moe_route_scale(struct backend *be, const float *x, int ldx, int m, int n, int k,
    const float *s, int32_t *ids, float *w)
{
	return gpu_moe_route(CB(be)->g, GPU_ROUTE_SOFTMAX, x, ldx, m, n, k, NULL, 0, 1.0f, s, ids,
	    w) ? gfail(be, "moe_route") : 0;
}

static int
cu_moe_route_sigmoid(struct backend *be, const float *x, int ldx, int m, int n, int k,
    const float *bias, int norm, float scale, int32_t *ids, float *w)
{
	return gpu_moe_route(CB(be)->g, GPU_ROUTE_SIGMOID, x, ldx, m, n, k, bias, norm, scale, NULL,
	    ids, w) ? gfail(be, "moe_route_sigmoid") : 0;
}

/* Gate and up products per slot (c->moe), then silu(g) * u (limit: clamped) into f. */
static int
cu_moe_swiglu(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, int n_exp, const float *x, int ldx, int m,
    const int32_t *ids, int k, float limit, float *f)
{
	int64_t nf = wg->ne1 / n_exp, ns = (int64_t)m * k;
	float *G = (float *)buf_get(be, &CB(be)->moe, (size_t)(2 * ns * nf) * 4);

	if (G == NULL || ns > INT32_MAX ||
	    moe_products2(be, wg, wu, n_exp, x, ldx, m, k, ids, (int)ns, G, G + ns * nf))
		return -1;
	return gpu_moe_act(CB(be)->g, GPU_MOE_SWIGLU, G, G + ns * nf, ns, nf, limit, f) ?
	    gfail(be, "moe_swiglu") : 0;
}

/* Each slot's gate and up rows in one product (c->moe), then gelu_tanh(g) * u into f. */
static int
cu_moe_geglu(struct backend *be, const struct backend_weight *wgu, int n_exp, const float *x,
    int ldx, int m, const int32_t *ids, int k, float *f)
{
	int64_t nf = wgu->ne1 / n_exp / 2, ns = (int64_t)m * k;
	float *Y = (float *)buf_get(be, &CB(be)->moe, (size_t)(2 * ns * nf) * 4);

	if (Y == NULL || ns > INT32_MAX ||
	    moe_products(be, wgu, n_exp, x, ldx, m, k, ids, (int)ns, Y))
		return -1;
	return gpu_moe_act(CB(be)->g, GPU_MOE_GEGLU, Y, NULL, ns, nf, 0.0f, f) ?
	    gfail(be, "moe_geglu") : 0;
}

/* The down product per slot (c->moe), then the weighted sum of each row's
 * k into y, and (x not NULL) x or its gated form added in the same kernel
 * (backend_moe_down_add). */
static int
cu_moe_down_add(struct backend *be, const struct backend_weight *wd, int n_exp,
    const float *f, int m, const int32_t *ids, const float *w, int k, const float *x,
    const float *gt, int ldg, float *y, int ldy)
{
	int64_t ne = wd->ne1 / n_exp, ns = (int64_t)m * k;
	float *D = (float *)buf_get(be, &CB(be)->moe, (size_t)(ns * ne) * 4);

	if (D == NULL || ns > INT32_MAX ||
	    moe_products(be, wd, n_exp, f, (int)wd->ne0, (int)ns, 1, ids, (int)ns, D))
		return -1;
	return gpu_moe_combine_add(CB(be)->g, D, m, k, ne, w, y, ldy, x, gt, ldg) ?
	    gfail(be, "moe_down") : 0;
}

/*
 * backend_moe_ffn: the gate products into f and the up products beside the
 * down products' rows (c->moe), the pair in one gpu_moe_matvecs where the
 * stacks match; then, without a limit, the down products with SwiGLU in
 * the kernel that quantizes their input (gpu_moe_matvec_pre: its result
 * written to f) and the weighted sum (and xs); else gpu_moe_act and
 * cu_moe_down_add.  moe_swiglu's and moe_down_add's bits.
 */
static int
cu_moe_ffn(struct backend *be, const struct backend_weight *wg, const struct backend_weight *wu,
    const struct backend_weight *wd, int n_exp, const float *x, int ldx, int m,
    const int32_t *ids, const float *w, int k, float lim, float *f, const float *xs,
    const float *gt, int ldg, float *y, int ldy)
{
	struct gpu *g = CB(be)->g;
	int64_t nf = wg->ne1 / n_exp, ne = wd->ne1 / n_exp, ns = (int64_t)m * k;
	float *U = (float *)buf_get(be, &CB(be)->moe, (size_t)(ns * nf + ns * ne) * 4), *D;

	if (U == NULL || ns > INT32_MAX ||
	    moe_products2(be, wg, wu, n_exp, x, ldx, m, k, ids, (int)ns, f, U))
		return -1;
	/* the plain order: a limit, or rows the down products take padded or copied */
	if (lim != 0.0f || CW(wd)->ne0p != wd->ne0 || (((uintptr_t)f | (uintptr_t)U) & 15) != 0)
		return gpu_moe_act(g, GPU_MOE_SWIGLU, f, U, ns, nf, lim, f) ? gfail(be, "moe_ffn") :
		    cu_moe_down_add(be, wd, n_exp, f, m, ids, w, k, xs, gt, ldg, y, ldy);
	D = U + ns * nf;
	if (gpu_moe_matvec_pre(g, GPU_PRE_SWIGLU, f, U, wd->type, wd->data, ne, wd->ne0, n_exp, ids,
	    (int)ns, 1, ns, D, wscale(wd)) != 0 ||
	    gpu_moe_combine_add(g, D, m, k, ne, w, y, ldy, xs, gt, ldg) != 0)
		return gfail(be, "moe_ffn");
	return 0;
}

static int
cu_moe_down(struct backend *be, const struct backend_weight *wd, int n_exp, const float *f,
    int m, const int32_t *ids, const float *w, int k, float *y, int ldy)
{
	return cu_moe_down_add(be, wd, n_exp, f, m, ids, w, k, NULL, NULL, 0, y, ldy);
}

static int
cu_add_gated(struct backend *be, float *y, int ldy, const float *x, int ldx, const float *g,
    int ldg, int m, int n)
{
	return gpu_add_gated(CB(be)->g, y, ldy, x, ldx, g, ldg, m, n) ? gfail(be, "add_gated") : 0;
}

static int
cu_dconv(struct backend *be, const float *x, int m, int n, const float *dyn, int ldd, int K,
    int group, const float *base, float *y)
{
	return gpu_dconv(CB(be)->g, x, m, n, dyn, ldd, K, group, base, y) ? gfail(be, "dconv") : 0;
}

static int
cu_moe_scale(struct backend *be, float *w, const int32_t *ids, int m, int k, const float *s)
{
	return gpu_moe_scale(CB(be)->g, w, ids, (int64_t)m * k, s) ? gfail(be, "moe_scale") : 0;
}

static int
cu_swiglu_limit(struct backend *be, const float *g, const float *u, float *y, size_t n,
    float limit)
{
	return gpu_swiglu_limit(CB(be)->g, g, u, y, (int64_t)n, limit) ?
	    gfail(be, "swiglu_limit") : 0;
}

static int
cu_head_gate(struct backend *be, float *x, int ldx, const float *g, int ldg, int m, int nh,
    int hd)
{
	return gpu_head_gate(CB(be)->g, x, ldx, g, ldg, m, nh, hd) ? gfail(be, "head_gate") : 0;
}


/* The experts' and their models' ops: into the op table (backend_cuda_open). */
void
cu_ops_moe(struct backend_ops *o)
{
	o->moe_route = cu_moe_route;
	o->moe_swiglu = cu_moe_swiglu;
	o->moe_down = cu_moe_down;
	o->moe_down_add = cu_moe_down_add;
	o->moe_ffn = cu_moe_ffn;
	o->add_gated = cu_add_gated;
	o->moe_geglu = cu_moe_geglu;
	o->moe_scale = cu_moe_scale;
	o->moe_route_sigmoid = cu_moe_route_sigmoid;
	o->swiglu_limit = cu_swiglu_limit;
	o->head_gate = cu_head_gate;
	o->dconv = cu_dconv;
	o->moe_route_scale = cu_moe_route_scale;
}
