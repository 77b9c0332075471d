/*
 * backend_cuda_products.cu: the CUDA backend's norms and products (see
 * backend_cuda.cu for the whole).  A product runs on int8 activations
 * (gpu_matvec_q8) where its type takes them, the decode kernels up to the
 * step rows and the prompt GEMM beyond.  The fused forms (rmsnorm_matmul,
 * add_rmsnorm_matmul, ffn, rmsnorm_gated_matmul, mul_sigmoid_matmul,
 * geglu_matmul, mlp) run the op before a product in the kernel that quantizes
 * the product's input when every weight takes the int8 path, with the
 * plain ops' arithmetic (the same bits); otherwise as the plain ops.
 */
#include "backend_cuda.cuh"

static int
cu_rmsnorm(struct backend *be, const float *x, int ldx, const float *w, float *y,
    int ldy, int rows, int n, float eps)
{
	return gpu_rmsnorm(CB(be)->g, x, ldx, w, y, ldy, rows, n, eps) ?
	    gfail(be, "rmsnorm") : 0;
}

static int
cu_rmsnorm_gated(struct backend *be, const float *x, const float *z,
    const float *w, float *y, int rows, int n, float eps)
{
	return gpu_rmsnorm_gated(CB(be)->g, x, z, w, y, rows, n, eps) ?
	    gfail(be, "rmsnorm_gated") : 0;
}

const float *
wscale(const struct backend_weight *w)
{
	return CW(w)->d_scale;
}

/*
 * x's rows (ldx floats apart, n long) as the device products take them:
 * rows of np floats (np >= n; zeros after n), contiguous and 16-byte
 * aligned: x itself when it is so already, else a copy in c->pad.
 */
const float *
input_rows(struct backend *be, const float *x, int64_t ldx, int64_t n, int64_t np,
    int64_t rows)
{
	struct backend_cuda *c = CB(be);
	float *p;

	if (ldx == np && n == np && ((uintptr_t)x & 15) == 0)
		return x;
	if ((p = (float *)buf_get(be, &c->pad, (size_t)rows * np * 4)) == NULL)
		return NULL;
	if (np != n && gpu_memset(c->g, p, 0, (size_t)rows * np * 4) != 0) {
		gfail(be, "pad");
		return NULL;
	}
	return copy_rows(be, p, np, x, ldx, n, rows) ? NULL : p;
}

/* Y = X . W^T over contiguous operands: matvec up to the step rows (16 a
 * launch: gpu_matmul loops), cuBLAS beyond; a weight of padded rows
 * (cuda_weight.ne0p) takes X padded alike. */
static int
product(struct backend *be, const struct backend_weight *w, const float *x,
    float *y, int m)
{
	struct gpu *g = CB(be)->g;
	int64_t ne0 = CW(w)->ne0p;
	int rc;

	if (ne0 != w->ne0 && (x = input_rows(be, x, w->ne0, w->ne0, ne0, m)) == NULL)
		return -1;
	if (gpu_can_matvec_q8_step(g, w->type, m))	/* the CPU's numerics: int8 activations */
		rc = gpu_matvec_q8(g, w->type, w->data, w->ne1, ne0, x, m, y, wscale(w));
	else if (m <= GPU_MATVEC_MAX_ROWS)
		rc = gpu_matvec(g, w->type, w->data, w->ne1, ne0, x, m, y, wscale(w));
	else
		rc = gpu_matmul(g, w->type, w->data, w->ne1, ne0, x, m, y, wscale(w));
	return rc ? gfail(be, "matmul") : 0;
}

/* nout products of the same contiguous x: one quantization of x when every
 * weight takes the int8 path (bit-identical to nout product() calls). */
static int
products(struct backend *be, int nout, const struct backend_weight *const *W,
    const float *x, float *const *y, int m)
{
	enum { NMAX = 8 };
	int t[NMAX];
	const void *d[NMAX];
	int64_t rows[NMAX];
	const float *sc[NMAX];
	int all = nout <= NMAX;

	for (int i = 0; all && i < nout; i++) {
		all = gpu_can_matvec_q8_step(CB(be)->g, W[i]->type, m) && W[i]->ne0 == W[0]->ne0;
		t[i] = W[i]->type, d[i] = W[i]->data, rows[i] = W[i]->ne1, sc[i] = wscale(W[i]);
	}
	if (!all) {
		for (int i = 0; i < nout; i++)
			if (product(be, W[i], x, y[i], m) != 0)
				return -1;
		return 0;
	}
	return gpu_matvec_q8_multi(CB(be)->g, nout, t, d, rows, W[0]->ne0, x, m, y, sc) ?
	    gfail(be, "matmul") : 0;
}

static int
cu_matmul(struct backend *be, const struct backend_weight *w, const float *x,
    int ldx, float *y, int ldy, int m)
{
	struct backend_cuda *c = CB(be);
	const float *xi = x;
	float *yo = y;

	if (ldx != w->ne0) {
		float *t = (float *)buf_get(be, &c->t0, (size_t)m * w->ne0 * 4);
		if (t == NULL || copy_rows(be, t, w->ne0, x, ldx, w->ne0, m))
			return -1;
		xi = t;
	}
	if (ldy != w->ne1 && (yo = (float *)buf_get(be, &c->t1, (size_t)m * w->ne1 * 4)) == NULL)
		return -1;
	if (product(be, w, xi, yo, m) != 0)
		return -1;
	return yo == y ? 0 : copy_rows(be, y, ldy, yo, w->ne1, w->ne1, m);
}

/*
 * backend_matmul_half: a weight made from BF16 (F16) rows (cuda_weight.type0;
 * held in its type, or as F32 rows of ne0p) through gpu_matmul_half on
 * operands of that type, for any m (the tower's products: not row-invariant);
 * any other weight as backend_matmul.
 */
static int
cu_matmul_half(struct backend *be, const struct backend_weight *w, const float *x,
    int ldx, float *y, int ldy, int m)
{
	struct backend_cuda *c = CB(be);
	const struct cuda_weight *cw = CW(w);
	const float *xi;
	float *yo = y;

	if (cw->type0 != QUANT_BF16 && cw->type0 != QUANT_F16)
		return cu_matmul(be, w, x, ldx, y, ldy, m);
	if ((xi = input_rows(be, x, ldx, w->ne0, cw->ne0p, m)) == NULL)
		return -1;
	if (ldy != w->ne1 && (yo = (float *)buf_get(be, &c->t1, (size_t)m * w->ne1 * 4)) == NULL)
		return -1;
	if (gpu_matmul_half(c->g, w->type, cw->type0, w->data, w->ne1, cw->ne0p, xi, m, yo,
	    wscale(w)) != 0)
		return gfail(be, "matmul_half");
	return yo == y ? 0 : copy_rows(be, y, ldy, yo, w->ne1, w->ne1, m);
}

#define FUSE_MAX 8	/* products after one fused norm */

/* The weight types whose products of m rows the fused forms
 * (gpu_rmsnorm_matvec_q8_ex, gpu_matvec_q8_pre) quantize x for: Q8_0 and
 * Q8_1 blocks (Q4_0 and Q5_0 up to the step rows). */
static int
fusable_type(struct gpu *g, int t, int64_t m)
{
	return gpu_can_matvec_q8_step(g, t, m) && (t == QUANT_Q8_0 || t == QUANT_NVFP4 ||
	    t == QUANT_Q4_1 || t == QUANT_Q5_1 || t == QUANT_Q4_0 || t == QUANT_Q5_0);
}

/* 1 when gpu_matvec_q8_pre takes SWIGLU or GEGLU before a product of type
 * t: fusable_type's, and the types on Q8_K activations (packed Q6_K too). */
static int
pre_fusable(struct gpu *g, int t, int64_t m)
{
	return fusable_type(g, t, m) || (gpu_can_matvec_q8_step(g, t, m) && (t == QUANT_Q4_K ||
	    t == QUANT_Q5_K || t == QUANT_Q6_K || t == QUANT_IQ4_XS || t == GPU_T_Q6K_PACKED));
}

/* 1 when SwiGLU can run in the kernel that quantizes the down product's
 * input (gpu_matvec_q8_pre) for w at m rows: fusable_type's, or the types
 * on Q8_K activations with unpadded rows. */
static int
swiglu_fusable(struct gpu *g, const struct backend_weight *w, int64_t m)
{
	return fusable_type(g, w->type, m) || (pre_fusable(g, w->type, m) &&
	    CW(w)->ne0p == w->ne0);
}

/* The products' arguments (tp, d, rows, sc) when the norm, with rows of
 * nd, can run fused into their quantization: every weight on the int8
 * path (how = NORM_ADD, x += t first: pre_fusable's types, x quantized as
 * Q8_0 or Q8_K; NORM_GATED, the gated norm: fusable_type's, Q8_0 alone)
 * with rows of ne0, the norm's operands 16-byte aligned (the kernel loads
 * float4s, as gpu_rmsnorm's does only then).  0 when it cannot. */
enum { NORM_PLAIN, NORM_ADD, NORM_GATED };

static int
norm_fusable(struct backend *be, int how, int nout, const struct backend_weight *const *W,
    int64_t ne0, int nd, int64_t m, const void *const *al, int nal, int *tp, const void **d,
    int64_t *rows, const float **sc)
{
	struct gpu *g = CB(be)->g;
	int ok = nout >= 1 && nout <= FUSE_MAX && nd % 32 == 0 && nd <= 16384 && ne0 % nd == 0;

	for (int i = 0; ok && i < nal; i++)
		ok = al[i] != NULL && ((uintptr_t)al[i] & 15) == 0;
	for (int i = 0; ok && i < nout; i++) {
		int t = W[i]->type;
		ok = (how == NORM_GATED ? fusable_type(g, t, m) : how == NORM_ADD ?
		    pre_fusable(g, t, m) : gpu_can_matvec_q8_step(g, t, m)) && W[i]->ne0 == ne0;
		tp[i] = W[i]->type, d[i] = W[i]->data, rows[i] = W[i]->ne1, sc[i] = wscale(W[i]);
	}
	return ok;
}

static int
cu_rmsnorm_matmul(struct backend *be, const float *x, int m, int n,
    const float *nw, float eps, int nout, const struct backend_weight *const *W,
    float *const *y)
{
	int tp[FUSE_MAX];
	const void *d[FUSE_MAX], *al[] = { x, nw };
	int64_t rows[FUSE_MAX];
	const float *sc[FUSE_MAX];

	/* norm + quantization */
	if (norm_fusable(be, NORM_PLAIN, nout, W, n, n, m, al, 2, tp, d, rows, sc))
		return gpu_rmsnorm_matvec_q8_multi(CB(be)->g, x, nw, eps, nout, tp, d, rows, n,
		    m, y, sc) ? gfail(be, "rmsnorm_matmul") : 0;
	float *t = (float *)buf_get(be, &CB(be)->t0, (size_t)m * n * 4);

	if (t == NULL || cu_rmsnorm(be, x, n, nw, t, n, m, n, eps))
		return -1;
	return products(be, nout, W, t, y, m);
}

/* x += t, norm, quantization in one kernel; else cu_add, then cu_rmsnorm_matmul. */
static int
cu_add_rmsnorm_matmul(struct backend *be, float *x, const float *t, int m, int n,
    const float *nw, float eps, int nout, const struct backend_weight *const *W,
    float *const *y)
{
	int tp[FUSE_MAX];
	const void *d[FUSE_MAX], *al[] = { x, t, nw };
	int64_t rows[FUSE_MAX];
	const float *sc[FUSE_MAX];

	if (norm_fusable(be, NORM_ADD, nout, W, n, n, m, al, 3, tp, d, rows, sc))
		return gpu_rmsnorm_matvec_q8_ex(CB(be)->g, x, t, NULL, nw, n, eps, nout, tp, d, rows,
		    n, m, y, sc) ? gfail(be, "add_rmsnorm_matmul") : 0;
	if (gpu_add(CB(be)->g, x, t, x, (int64_t)m * n) != 0)
		return gfail(be, "add");
	return cu_rmsnorm_matmul(be, x, m, n, nw, eps, nout, W, y);
}

static int cu_matmul_swiglu(struct backend *, const struct backend_weight *,
    const struct backend_weight *, const float *, int, float *);

/*
 * The FFN in four kernels: the add, norm and quantization; gate and up in
 * one launch; SwiGLU in the kernel that quantizes the down product's
 * input; the down product.  Else (gate and up not all of norm_fusable's
 * types) the plain add and norm, then gate and up, SwiGLU in the down
 * product's quantization, the product; else (a down of another type) the
 * plain ops.
 */
static int
cu_ffn(struct backend *be, float *x, const float *t, int m, int n, const float *nw,
    float eps, const struct backend_weight *wg, const struct backend_weight *wu,
    const struct backend_weight *wd, float *f, float *u, float *y)
{
	struct gpu *g = CB(be)->g;
	const struct backend_weight *W[2] = { wg, wu };
	float *Y[2] = { f, u };
	int tp[2];
	const void *d[2], *al[] = { x, nw, t };
	int64_t rows[2];
	const float *sc[2];
	int pre = swiglu_fusable(g, wd, m);	/* SwiGLU in the down product's quantization */

	if (pre && norm_fusable(be, NORM_ADD, 2, W, n, n, m, al, t != NULL ? 3 : 2, tp, d, rows,
	    sc)) {
		if (gpu_rmsnorm_matvec_q8_ex(g, x, t, NULL, nw, n, eps, 2, tp, d, rows, n, m, Y, sc) ||
		    gpu_matvec_q8_pre(g, GPU_PRE_SWIGLU, f, u, 0, 0, wd->type, wd->data, wd->ne1,
		    wd->ne0, m, y, wscale(wd)))
			return gfail(be, "ffn");
		return 0;
	}
	if (t != NULL && gpu_add(g, x, t, x, (int64_t)m * n) != 0)
		return gfail(be, "add");
	if (cu_rmsnorm(be, x, n, nw, y, n, m, n, eps))
		return -1;
	if (pre) {
		if (products(be, 2, W, y, Y, m) != 0)
			return -1;
		return gpu_matvec_q8_pre(g, GPU_PRE_SWIGLU, f, u, 0, 0, wd->type, wd->data, wd->ne1,
		    wd->ne0, m, y, wscale(wd)) ? gfail(be, "ffn") : 0;
	}
	if (cu_matmul_swiglu(be, wg, wu, y, m, f))
		return -1;
	return product(be, wd, f, y, m);
}

/* The gated norm per head, quantization in one kernel; else the two ops. */
static int
cu_rmsnorm_gated_matmul(struct backend *be, float *x, const float *z, const float *nw,
    int m, int nh, int n, float eps, const struct backend_weight *w, float *y)
{
	int tp;
	const void *d, *al[] = { x, z, nw };
	int64_t rows;
	const float *sc;
	const struct backend_weight *W[1] = { w };

	if (norm_fusable(be, NORM_GATED, 1, W, (int64_t)nh * n, n, m, al, 3, &tp, &d, &rows,
	    &sc))
		return gpu_rmsnorm_matvec_q8_ex(CB(be)->g, x, NULL, z, nw, n, eps, 1, &tp, &d, &rows,
		    (int64_t)nh * n, m, &y, &sc) ? gfail(be, "rmsnorm_gated_matmul") : 0;
	if (gpu_rmsnorm_gated(CB(be)->g, x, z, nw, x, m * nh, n, eps) != 0)
		return gfail(be, "rmsnorm_gated");
	return product(be, w, x, y, m);
}

static int cu_mul_sigmoid(struct backend *, float *, int, const float *, int, int, int);

/* The sigmoid gate in the kernel that quantizes the product's input; else the two ops. */
static int
cu_mul_sigmoid_matmul(struct backend *be, float *x, const float *g, int ldg, int m, int nh,
    int hd, const struct backend_weight *w, float *y)
{
	if (fusable_type(CB(be)->g, w->type, m) && hd % 32 == 0)
		return gpu_matvec_q8_pre(CB(be)->g, GPU_PRE_SIGMOID, x, g, hd, ldg, w->type, w->data,
		    w->ne1, w->ne0, m, y, wscale(w)) ? gfail(be, "mul_sigmoid_matmul") : 0;
	if (cu_mul_sigmoid(be, x, hd, g, ldg, m * nh, hd) != 0)
		return -1;
	return product(be, w, x, y, m);
}

static int
cu_matmul_swiglu(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, const float *x, int m, float *y)
{
	size_t n = (size_t)m * wg->ne1;
	float *u = (float *)buf_get(be, &CB(be)->t1, n * 4);
	const struct backend_weight *W[2] = { wg, wu };
	float *Y[2] = { y, u };

	if (u == NULL || products(be, 2, W, x, Y, m))
		return -1;
	return gpu_swiglu(CB(be)->g, y, u, y, n) ? gfail(be, "swiglu") : 0;
}

static int
cu_swiglu(struct backend *be, const float *g, const float *u, float *y, size_t n)
{
	return gpu_swiglu(CB(be)->g, g, u, y, n) ? gfail(be, "swiglu") : 0;
}

static int
cu_mul_sigmoid(struct backend *be, float *x, int ldx, const float *g, int ldg,
    int rows, int n)
{
	struct gpu *gp = CB(be)->g;

	for (int r0 = 0; r0 < rows; r0 += 65535) {
		int nr = rows - r0 < 65535 ? rows - r0 : 65535;
		float *xr = x + (size_t)r0 * ldx;
		if (gpu_sigmoid_mul(gp, xr, ldx, g + (size_t)r0 * ldg, ldg, xr, ldx, nr, n))
			return gfail(be, "mul_sigmoid");
	}
	return 0;
}

static int
cu_geglu(struct backend *be, const float *g, int ldg, const float *u, int ldu, float *y,
    int ldy, int rows, int n)
{
	return gpu_geglu(CB(be)->g, g, ldg, u, ldu, y, ldy, rows, n) ? gfail(be, "geglu") : 0;
}

/* GeGLU in the kernel that quantizes the down product's input (a type
 * pre_fusable takes); else the two ops. */
static int
cu_geglu_matmul(struct backend *be, float *g, const float *u, int m,
    const struct backend_weight *w, float *y)
{
	int n = (int)w->ne0;

	if (pre_fusable(CB(be)->g, w->type, m) && CW(w)->ne0p == w->ne0)
		return gpu_matvec_q8_pre(CB(be)->g, GPU_PRE_GEGLU, g, u, 0, 0, w->type, w->data,
		    w->ne1, w->ne0, m, y, wscale(w)) ? gfail(be, "geglu_matmul") : 0;
	if (cu_geglu(be, g, n, u, n, g, n, m, n) != 0)
		return -1;
	return product(be, w, g, y, m);
}

/*
 * backend_mlp: gate and up in one launch (x quantized once); without a
 * limit, SwiGLU in the kernel that quantizes the down product's input
 * (swiglu_fusable, as cu_ffn), else the activation's
 * own kernel (gpu_swiglu, or gpu_swiglu_limit with lim > 0), then the down
 * product.
 */
static int
cu_mlp(struct backend *be, const struct backend_weight *wg, const struct backend_weight *wu,
    const struct backend_weight *wd, const float *x, int m, float lim, float *f, float *u,
    float *y)
{
	struct gpu *g = CB(be)->g;
	const struct backend_weight *W[2] = { wg, wu };
	float *Y[2] = { f, u };
	int64_t n = (int64_t)m * wg->ne1;

	if (products(be, 2, W, x, Y, m) != 0)
		return -1;
	if (lim == 0.0f && swiglu_fusable(g, wd, m))
		return gpu_matvec_q8_pre(g, GPU_PRE_SWIGLU, f, u, 0, 0, wd->type, wd->data, wd->ne1,
		    wd->ne0, m, y, wscale(wd)) ? gfail(be, "mlp") : 0;
	if (lim > 0.0f ? gpu_swiglu_limit(g, f, u, f, n, lim) : gpu_swiglu(g, f, u, f, n))
		return gfail(be, "mlp");
	return product(be, wd, f, y, m);
}

/* backend_add_rmsnorm: one kernel (gpu_add_rmsnorm, the add's and the norm's bits). */
static int
cu_add_rmsnorm(struct backend *be, float *x, const float *t, const float *nw, float *y,
    float eps, int m, int n)
{
	return gpu_add_rmsnorm(CB(be)->g, x, t, nw, y, eps, m, n) ? gfail(be, "add_rmsnorm") : 0;
}

/* backend_rmsnorm_pair: one kernel (gpu_rmsnorm_pair, the plain kernels' bits). */
static int
cu_rmsnorm_pair(struct backend *be, const float *x, const float *w1, float s1, float *y1,
    const float *w2, float *y2, float eps, int m, int n)
{
	return gpu_rmsnorm_pair(CB(be)->g, x, w1, s1, y1, w2, y2, eps, m, n) ?
	    gfail(be, "rmsnorm_pair") : 0;
}

/* backend_norm_residual: one kernel a step (gpu_norm_residual, the plain kernels' bits). */
static int
cu_norm_residual(struct backend *be, float *x, float *a, const float *wa, float *b,
    const float *wb, const float *w2, float eps, float s, int m, int n)
{
	return gpu_norm_residual(CB(be)->g, x, a, wa, b, wb, w2, eps, s, m, n) ?
	    gfail(be, "norm_residual") : 0;
}

/* backend_norm_residual_matmul: the norm, the add, the next norm and the quantization in
 * one kernel (gpu_norm_residual_matvec_q8, their bits); else the two ops. */
static int
cu_norm_residual_matmul(struct backend *be, float *x, float *a, const float *wa, float s,
    int m, int n, const float *nw, float eps, int nout, const struct backend_weight *const *W,
    float *const *y)
{
	int tp[FUSE_MAX];
	const void *d[FUSE_MAX], *al[] = { x, a, nw, wa };
	int64_t rows[FUSE_MAX];
	const float *sc[FUSE_MAX];

	if (norm_fusable(be, NORM_ADD, nout, W, n, n, m, al, wa != NULL ? 4 : 3, tp, d, rows, sc))
		return gpu_norm_residual_matvec_q8(CB(be)->g, x, a, wa, s, nw, eps, nout, tp, d,
		    rows, n, m, y, sc) ? gfail(be, "norm_residual_matmul") : 0;
	if (cu_norm_residual(be, x, a, wa, NULL, NULL, NULL, eps, s, m, n) != 0)
		return -1;
	return cu_rmsnorm_matmul(be, x, m, n, nw, eps, nout, W, y);
}


/* The norms and products: into the op table (backend_cuda_open). */
void
cu_ops_products(struct backend_ops *o)
{
	o->rmsnorm = cu_rmsnorm;
	o->rmsnorm_gated = cu_rmsnorm_gated;
	o->matmul = cu_matmul;
	o->rmsnorm_matmul = cu_rmsnorm_matmul;
	o->matmul_swiglu = cu_matmul_swiglu;
	o->swiglu = cu_swiglu;
	o->mul_sigmoid = cu_mul_sigmoid;
	o->add_rmsnorm_matmul = cu_add_rmsnorm_matmul;
	o->ffn = cu_ffn;
	o->rmsnorm_gated_matmul = cu_rmsnorm_gated_matmul;
	o->mul_sigmoid_matmul = cu_mul_sigmoid_matmul;
	o->geglu = cu_geglu;
	o->matmul_half = cu_matmul_half;
	o->norm_residual = cu_norm_residual;
	o->norm_residual_matmul = cu_norm_residual_matmul;
	o->add_rmsnorm = cu_add_rmsnorm;
	o->rmsnorm_pair = cu_rmsnorm_pair;
	o->geglu_matmul = cu_geglu_matmul;
	o->mlp = cu_mlp;
}
