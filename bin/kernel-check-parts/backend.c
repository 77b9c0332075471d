/*
 * kernel-check: the CUDA backend against the CPU backend, op by op.  Shared
 * declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- the CUDA backend against the CPU backend, op by op ---------------- */

/*
 * Both backends run the same op through lib/backend's table on the same
 * inputs; the CPU backend is the reference.  Tolerances are relative to
 * a magnitude: 1 + |ref| for the fp32 ops, sum |w x| for the products
 * (the CPU multiplies quantized weights with int8 activations, the GPU
 * with fp32 ones).
 */

float *
bput(struct backend *be, const float *h, size_t n)
{
	float *d = backend_alloc(be, n);

	if (d == NULL || (h != NULL && backend_write(be, d, h, n) != 0))
		die(1, "%s: %s", backend_name(be), backend_errmsg(be));
	return d;
}

float *
bget(struct backend *be, const float *d, size_t n)
{
	float *h = xmalloc(n * sizeof *h + 4);

	if (backend_read(be, h, d, n) != 0)
		die(1, "%s: %s", backend_name(be), backend_errmsg(be));
	return h;
}

void
bchk(struct backend *be, int rc)
{
	if (rc != 0)
		die(1, "%s: %s", backend_name(be), backend_errmsg(be));
}

/* The broken arm for these checks: one value far outside any tolerance. */
static void
bbrk(struct kc *k, float *v, int64_t n, double mag)
{
	if (k->brk && n > 0)
		v[n / 2] += (float)(1.0 + 4.0 * (mag + fabs(v[n / 2])));
}

/* got (the GPU's) against ref (the CPU's): |d| <= tol * (mag_i or 1 + |ref|). */
void
becmp(struct kc *k, const char *name, const char *shape, float *got, const float *ref,
    const double *mag, int64_t n, double tol)
{
	double maxd = 0, big = 0;
	int ok = 1;

	for (int64_t i = 0; i < n; i++)
		big = fmax(big, mag ? mag[i] : 1.0 + fabs(ref[i]));
	bbrk(k, got, n, big);
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		if (!(d <= tol * (mag ? mag[i] : 1.0 + fabs(ref[i]))))
			ok = 0;
		if (d > maxd || d != d)
			maxd = d;
	}
	report(k, name, shape, maxd, ok);
}

/* Bit-identical, with the broken arm. */
void
bsame(struct kc *k, const char *name, const char *shape, float *a, const float *b,
    int64_t n)
{
	bbrk(k, a, n, 1.0);
	same_bits(k, name, shape, a, b, n);
}

void
bw_new(struct kc *k, struct bpair *p, struct bw *b, int t, int64_t rows, int64_t ne0,
    float scale)
{
	size_t n;

	b->w = qrand(k, t, rows, ne0, &n);
	b->wf = qdeq(t, b->w, rows, ne0);
	bchk(p->c, backend_weight_init(p->c, &b->c, t, ne0, rows, b->w, scale));
	bchk(p->g, backend_weight_init(p->g, &b->g, t, ne0, rows, b->w, scale));
}

void
bw_free(struct bpair *p, struct bw *b)
{
	backend_weight_release(p->c, &b->c);
	backend_weight_release(p->g, &b->g);
	free(b->w), free(b->wf);
}

/* mag[j][r] = sum |w x| * |scale| of a product with strides. */
double *
bmag(const struct bw *b, const float *x, int ldx, int m, float scale)
{
	int64_t rows = b->c.ne1, ne0 = b->c.ne0;
	double *mag = xmalloc((size_t)m * rows * 8);

	for (int j = 0; j < m; j++)
		for (int64_t r = 0; r < rows; r++) {
			double a = 0;
			for (int64_t e = 0; e < ne0; e++)
				a += fabs((double)b->wf[r * ne0 + e] * x[(size_t)j * ldx + e]);
			mag[j * rows + r] = a * fabs(scale) + 1e-20;
		}
	return mag;
}

/*
 * backend_matmul, rows ldx / ldy apart (> row lengths: the strided paths);
 * past 16 rows with each prefill kernel (backend_gemm_set): int8, the
 * CPU's numerics for Q8_0 and NVFP4, and bf16 operands, within 2^-8 of
 * the magnitude (the rounding of both operands; 5e-3 with the CPU's int8
 * rounding of x) and 2e-2 (the others: Q8_K input on the CPU).
 */
void
be_matmul(struct kc *k, struct bpair *p, int t, int64_t rows, int64_t ne0, int m,
    int pad, float scale)
{
	struct bw b;
	int ldx = (int)ne0 + pad, ldy = (int)rows + pad;
	float *x = frand(k, (int64_t)m * ldx, -1, 1), *gy = NULL, *cy;
	float *cx = bput(p->c, x, (size_t)m * ldx), *gx = bput(p->g, x, (size_t)m * ldx);
	float *cyd = bput(p->c, NULL, (size_t)m * ldy), *gyd = bput(p->g, NULL, (size_t)m * ldy);
	double *mag, *m2;
	char name[64], shape[64];
	int nk = m > GPU_MATVEC_MAX_ROWS && !float_type(t) ? 2 : 1;

	bw_new(k, p, &b, t, rows, ne0, scale);
	bchk(p->c, backend_matmul(p->c, &b.c, cx, ldx, cyd, ldy, m));
	cy = bget(p->c, cyd, (size_t)m * ldy);
	mag = bmag(&b, x, ldx, m, scale);
	m2 = xmalloc((size_t)m * ldy * 8);
	for (int j = 0; j < m; j++)
		for (int i = 0; i < ldy; i++)
			m2[(size_t)j * ldy + i] = i < rows ? mag[j * rows + i] : 1.0;
	snprintf(shape, sizeof shape, "%lldx%lld m=%d ld+%d", (long long)rows, (long long)ne0, m, pad);
	for (int kind = 0; kind < nk; kind++) {
		/* int8-activation types: the same numerics as the CPU's quant_vec_dot */
		int q8 = gpu_can_matvec_q8_rows(t, m), bf = kind == 1;
		if (nk > 1)
			bchk(p->g, backend_gemm_set(p->g, kind ? BACKEND_GEMM_BF16 : BACKEND_GEMM_INT8));
		free(gy);
		bchk(p->g, backend_matmul(p->g, &b.g, gx, ldx, gyd, ldy, m));
		gy = bget(p->g, gyd, (size_t)m * ldy);
		snprintf(name, sizeof name, "be matmul %s%s%s", quant_name(t), scale != 1 ? "*s" : "",
		    bf ? " bf16" : q8 ? " i8" : "");
		becmp(k, name, shape, gy, cy, m2, (int64_t)m * ldy, bf ? (q8 ? 5e-3 : 2e-2) :
		    q8 ? 1e-5 : 2e-2);
	}
	if (nk > 1) {	/* bf16 through the weight's bf16 copy: made, then read; bf16's bits */
		float *y1, *y2;
		bchk(p->g, backend_gemm_set(p->g, BACKEND_GEMM_BF16_MIRROR));
		bchk(p->g, backend_matmul(p->g, &b.g, gx, ldx, gyd, ldy, m));
		y1 = bget(p->g, gyd, (size_t)m * ldy);
		bchk(p->g, backend_fill(p->g, gyd, -1.0f, (size_t)m * ldy));
		bchk(p->g, backend_matmul(p->g, &b.g, gx, ldx, gyd, ldy, m));
		y2 = bget(p->g, gyd, (size_t)m * ldy);
		snprintf(name, sizeof name, "be matmul %s%s bf16 copy", quant_name(t),
		    scale != 1 ? "*s" : "");
		bsame(k, name, shape, y1, gy, (int64_t)m * ldy);
		for (int j = 0; j < m; j++)	/* the fill stays between rows: nothing writes there */
			for (int i = (int)rows; i < ldy; i++)
				gy[(size_t)j * ldy + i] = -1.0f;
		snprintf(name, sizeof name, "be matmul %s%s bf16 copy again", quant_name(t),
		    scale != 1 ? "*s" : "");
		bsame(k, name, shape, y2, gy, (int64_t)m * ldy);
		free(y1), free(y2);
		bchk(p->g, backend_gemm_set(p->g, BACKEND_GEMM_DEFAULT));	/* (frees the copies) */
	}
	/* rows 0..m-1 of the m-row product == each row alone (m <= 16) */
	if (m > 1 && m <= GPU_MATVEC_MAX_ROWS) {
		float *one = xmalloc((size_t)m * ldy * 4 + 4);
		for (int j = 0; j < m; j++) {
			bchk(p->g, backend_matmul(p->g, &b.g, gx + (size_t)j * ldx, ldx,
			    gyd + (size_t)j * ldy, ldy, 1));
		}
		bchk(p->g, backend_read(p->g, one, gyd, (size_t)m * ldy));
		snprintf(name, sizeof name, "be matmul %s m=1xm", quant_name(t));
		bsame(k, name, shape, one, gy, (int64_t)m * ldy);
		free(one);
	}
	bw_free(p, &b);
	free(x), free(gy), free(cy), free(mag), free(m2);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx);
	backend_mfree(p->c, cyd), backend_mfree(p->g, gyd);
}

void
bop_new(struct kc *k, struct bpair *p, struct bop *o, int nbuf, const size_t *n,
    const float *lo, const float *hi)
{
	o->nin = nbuf;
	for (int i = 0; i < nbuf; i++) {
		o->n[i] = n[i];
		o->h[i] = frand(k, (int64_t)n[i], lo[i], hi[i]);
		o->c[i] = bput(p->c, o->h[i], n[i]);
		o->g[i] = bput(p->g, o->h[i], n[i]);
	}
}

/* Compare buffer i of both backends. */
void
bop_cmp(struct kc *k, struct bpair *p, struct bop *o, int i, const char *name,
    const char *shape, double tol)
{
	float *c = bget(p->c, o->c[i], o->n[i]), *g = bget(p->g, o->g[i], o->n[i]);

	becmp(k, name, shape, g, c, NULL, (int64_t)o->n[i], tol);
	free(c), free(g);
}

void
bop_free(struct bpair *p, struct bop *o)
{
	for (int i = 0; i < o->nin; i++) {
		free(o->h[i]);
		backend_mfree(p->c, o->c[i]);
		backend_mfree(p->g, o->g[i]);
	}
}

void
be_norms(struct kc *k, struct bpair *p, int rows, int n, int ld)
{
	size_t sz[] = { (size_t)rows * ld, (size_t)n, (size_t)rows * ld, (size_t)rows * n,
	    (size_t)rows * n };
	float lo[] = { -2, 0.5f, 0, -3, 0 }, hi[] = { 2, 1.5f, 0, 3, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 5, sz, lo, hi);
	snprintf(shape, sizeof shape, "%dx%d ld=%d", rows, n, ld);
	BOTH(p, backend_rmsnorm(p->c, o.c[0], ld, o.c[1], o.c[2], ld, rows, n, 1e-6f),
	    backend_rmsnorm(p->g, o.g[0], ld, o.g[1], o.g[2], ld, rows, n, 1e-6f));
	bop_cmp(k, p, &o, 2, "be rmsnorm", shape, 1e-5);
	BOTH(p, backend_rmsnorm_gated(p->c, o.c[0], o.c[3], o.c[1], o.c[4], rows, n, 1e-6f),
	    backend_rmsnorm_gated(p->g, o.g[0], o.g[3], o.g[1], o.g[4], rows, n, 1e-6f));
	bop_cmp(k, p, &o, 4, "be rmsnorm_gated", shape, 1e-5);
	BOTH(p, backend_l2norm(p->c, o.c[0], ld, rows, n, 1e-6f),
	    backend_l2norm(p->g, o.g[0], ld, rows, n, 1e-6f));
	bop_cmp(k, p, &o, 0, "be l2norm", shape, 1e-5);
	bop_free(p, &o);
}

/*
 * backend_norm_residual (Gemma-4's post-FFN norms and residual add): the
 * GPU against the CPU within 1e-5 of x's scale, and against the GPU's own
 * plain ops in the order the contract names, bit for bit; with the second
 * input (b) or not, the closing norm (w2) or not, a scale or not, a NULL
 * weight.  Widths: 2816 (26B-A4B: one float4 a thread), 5376 (31B: two),
 * 16384 (four, 1024 threads), 1001 (not a multiple of 4: the plain
 * kernels).
 */
void
be_norm_residual(struct kc *k, struct bpair *p, int m, int n, int form)
{
	int two = form & 1, fin = form & 2, nullw = form & 4;
	float s = form & 8 ? 0.7071f : 1.0f;
	size_t mn = (size_t)m * n, sz[] = { mn, mn, mn, (size_t)n, (size_t)n, (size_t)n };
	float lo[] = { -3, -2, -2, 0.5f, 0.5f, 0.5f }, hi[] = { 3, 2, 2, 1.5f, 1.5f, 1.5f };
	struct bop o;
	char shape[96];
	float *ga2, *gb2, *gx2, *fused, *plain;

	bop_new(k, p, &o, 6, sz, lo, hi);
	snprintf(shape, sizeof shape, "m=%d n=%d%s%s%s%s", m, n, two ? " +b" : "",
	    fin ? " w2" : "", nullw ? " wa=NULL" : "", s != 1.0f ? " *s" : "");
	ga2 = bput(p->g, o.h[1], mn), gb2 = bput(p->g, o.h[2], mn), gx2 = bput(p->g, o.h[0], mn);
	BOTH(p, backend_norm_residual(p->c, o.c[0], o.c[1], nullw ? NULL : o.c[3],
	    two ? o.c[2] : NULL, o.c[4], fin ? o.c[5] : NULL, 1e-6f, s, m, n),
	    backend_norm_residual(p->g, o.g[0], o.g[1], nullw ? NULL : o.g[3],
	    two ? o.g[2] : NULL, o.g[4], fin ? o.g[5] : NULL, 1e-6f, s, m, n));
	fused = bget(p->g, o.g[0], mn);
	bchk(p->g, backend_rmsnorm(p->g, ga2, n, nullw ? NULL : o.g[3], ga2, n, m, n, 1e-6f));
	if (two) {
		bchk(p->g, backend_rmsnorm(p->g, gb2, n, o.g[4], gb2, n, m, n, 1e-6f));
		bchk(p->g, backend_add(p->g, ga2, gb2, mn));
	}
	if (fin)
		bchk(p->g, backend_rmsnorm(p->g, ga2, n, o.g[5], ga2, n, m, n, 1e-6f));
	bchk(p->g, backend_add(p->g, gx2, ga2, mn));
	if (s != 1.0f)
		bchk(p->g, backend_scale(p->g, gx2, mn, s));
	plain = bget(p->g, gx2, mn);
	bsame(k, "be norm_residual plain ops", shape, fused, plain, (int64_t)mn);
	bop_cmp(k, p, &o, 0, "be norm_residual", shape, 1e-5);
	free(fused), free(plain);
	backend_mfree(p->g, ga2), backend_mfree(p->g, gb2), backend_mfree(p->g, gx2);
	bop_free(p, &o);
}

/*
 * backend_add_rmsnorm (the MoE FFN's opening): x += t, y = rmsnorm(x) * w,
 * the GPU against the CPU (x exact: one add; y 1e-5) and against the GPU's
 * own add and rmsnorm bit for bit, rows of 2048 (35B-A3B), 4096 and 1001
 * (the plain kernels).
 */
/*
 * backend_rmsnorm_pair (Gemma-4's router and experts' inputs): the GPU
 * against the CPU (1e-5) and against the GPU's two rmsnorms and the scale,
 * bit for bit; rows of 2816 (26B-A4B), 5376 and 1001 (the plain kernels).
 */
void
be_rmsnorm_pair(struct kc *k, struct bpair *p, int m, int n, float s1)
{
	size_t mn = (size_t)m * n, sz[] = { mn, (size_t)n, (size_t)n, mn, mn };
	float lo[] = { -3, 0.5f, 0.5f, 0, 0 }, hi[] = { 3, 1.5f, 1.5f, 0, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 5, sz, lo, hi);
	snprintf(shape, sizeof shape, "m=%d n=%d *%g", m, n, s1);
	float *gy1 = bput(p->g, NULL, mn), *gy2 = bput(p->g, NULL, mn), *a, *b;
	BOTH(p, backend_rmsnorm_pair(p->c, o.c[0], o.c[1], s1, o.c[3], o.c[2], o.c[4], 1e-6f, m,
	    n), backend_rmsnorm_pair(p->g, o.g[0], o.g[1], s1, o.g[3], o.g[2], o.g[4], 1e-6f, m, n));
	bchk(p->g, backend_rmsnorm(p->g, o.g[0], n, o.g[1], gy1, n, m, n, 1e-6f));
	if (s1 != 1.0f)
		bchk(p->g, backend_scale(p->g, gy1, mn, s1));
	bchk(p->g, backend_rmsnorm(p->g, o.g[0], n, o.g[2], gy2, n, m, n, 1e-6f));
	for (int i = 0; i < 2; i++) {
		a = bget(p->g, o.g[3 + i], mn), b = bget(p->g, i ? gy2 : gy1, mn);
		bsame(k, i ? "be rmsnorm_pair y2=plain" : "be rmsnorm_pair y1=plain", shape, a, b,
		    (int64_t)mn);
		free(a), free(b);
		bop_cmp(k, p, &o, 3 + i, i ? "be rmsnorm_pair y2" : "be rmsnorm_pair y1", shape, 1e-5);
	}
	backend_mfree(p->g, gy1), backend_mfree(p->g, gy2);
	bop_free(p, &o);
}

void
be_add_rmsnorm(struct kc *k, struct bpair *p, int m, int n)
{
	size_t mn = (size_t)m * n, sz[] = { mn, mn, (size_t)n, mn };
	float lo[] = { -3, -2, 0.5f, 0 }, hi[] = { 3, 2, 1.5f, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 4, sz, lo, hi);
	snprintf(shape, sizeof shape, "m=%d n=%d", m, n);
	float *gx2 = bput(p->g, o.h[0], mn), *gy2 = bput(p->g, NULL, mn), *a, *b;
	BOTH(p, backend_add_rmsnorm(p->c, o.c[0], o.c[1], o.c[2], o.c[3], 1e-6f, m, n),
	    backend_add_rmsnorm(p->g, o.g[0], o.g[1], o.g[2], o.g[3], 1e-6f, m, n));
	bchk(p->g, backend_add(p->g, gx2, o.g[1], mn));
	bchk(p->g, backend_rmsnorm(p->g, gx2, n, o.g[2], gy2, n, m, n, 1e-6f));
	a = bget(p->g, o.g[3], mn), b = bget(p->g, gy2, mn);
	bsame(k, "be add_rmsnorm plain ops", shape, a, b, (int64_t)mn);
	free(a), free(b);
	a = bget(p->g, o.g[0], mn), b = bget(p->g, gx2, mn);
	bsame(k, "be add_rmsnorm x=plain", shape, a, b, (int64_t)mn);
	free(a), free(b);
	bop_cmp(k, p, &o, 0, "be add_rmsnorm x", shape, 0);
	bop_cmp(k, p, &o, 3, "be add_rmsnorm", shape, 1e-5);
	backend_mfree(p->g, gx2), backend_mfree(p->g, gy2);
	bop_free(p, &o);
}

void
be_elementwise(struct kc *k, struct bpair *p, int n)
{
	size_t sz[] = { (size_t)n, (size_t)n, (size_t)n };
	float lo[] = { -30, -4, 0 }, hi[] = { 30, 4, 0 };
	static const char *an[] = { "silu", "sigmoid", "softplus" };
	struct bop o;
	char shape[64], name[64];

	snprintf(shape, sizeof shape, "%d", n);
	for (int a = 0; a < 3; a++) {
		bop_new(k, p, &o, 3, sz, lo, hi);
		BOTH(p, backend_act(p->c, (enum backend_act)a, o.c[0], n),
		    backend_act(p->g, (enum backend_act)a, o.g[0], n));
		snprintf(name, sizeof name, "be act %s", an[a]);
		bop_cmp(k, p, &o, 0, name, shape, 1e-6);
		bop_free(p, &o);
	}
	bop_new(k, p, &o, 3, sz, lo, hi);
	BOTH(p, backend_swiglu(p->c, o.c[0], o.c[1], o.c[2], n),
	    backend_swiglu(p->g, o.g[0], o.g[1], o.g[2], n));
	bop_cmp(k, p, &o, 2, "be swiglu", shape, 1e-6);
	BOTH(p, backend_add(p->c, o.c[1], o.c[0], n), backend_add(p->g, o.g[1], o.g[0], n));
	bop_cmp(k, p, &o, 1, "be add", shape, 1e-6);
	BOTH(p, backend_mul_sigmoid(p->c, o.c[0], 64, o.c[1], 64, n / 64, 48),
	    backend_mul_sigmoid(p->g, o.g[0], 64, o.g[1], 64, n / 64, 48));
	bop_cmp(k, p, &o, 0, "be mul_sigmoid", shape, 1e-6);
	BOTH(p, backend_fill(p->c, o.c[2], 0.25f, n), backend_fill(p->g, o.g[2], 0.25f, n));
	bop_cmp(k, p, &o, 2, "be fill", shape, 0);
	BOTH(p, backend_copy(p->c, o.c[2], o.c[1], n), backend_copy(p->g, o.g[2], o.g[1], n));
	bop_cmp(k, p, &o, 2, "be copy", shape, 0);
	bop_free(p, &o);
}

void
be_rope(struct kc *k, struct bpair *p, int m, int nh, int hs, int n_rot, int mode, int p0)
{
	int ld = nh * hs + 8;
	size_t sz[] = { (size_t)m * ld };
	float lo[] = { -1 }, hi[] = { 1 };
	int32_t *pos = xmalloc((size_t)m * 4);
	struct bop o;
	char shape[64];

	for (int i = 0; i < m; i++)
		pos[i] = p0 + 37 * i;
	bop_new(k, p, &o, 1, sz, lo, hi);
	BOTH(p, backend_rope(p->c, o.c[0], ld, nh, hs, m, pos, n_rot, 1e7f, mode),
	    backend_rope(p->g, o.g[0], ld, nh, hs, m, pos, n_rot, 1e7f, mode));
	snprintf(shape, sizeof shape, "m=%d %dx%d rot=%d pos=%d", m, nh, hs, n_rot, p0);
	bop_cmp(k, p, &o, 0, mode & BACKEND_ROPE_PROP ? "be rope prop" :
	    mode == BACKEND_ROPE_NEOX ? "be rope neox" :
	    mode & BACKEND_ROPE_GGML ? "be rope norm ggml" : "be rope norm", shape, 2e-4);
	bop_free(p, &o);
	free(pos);
}

/*
 * backend_qk_norm_rope on m rows of nh q heads (stride qhs) and nkv k heads
 * of hd at p0: at backend positions with the store into caches of m + p0 +
 * 2 rows (dev), or into rings of ring rows (ring > 0, with dev: position j
 * in row j % ring), else at host positions (37 apart); with vnorm v's heads
 * normed too (Gemma-4's).  The GPU against the CPU (the norm's and the
 * rope's tolerances) and against the GPU's own norms, ropes and store, bit
 * for bit; q, k (v with vnorm) and both caches.
 */
void
be_qkrope(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int qhs, int n_rot,
    int mode, int p0, int dev, int vnorm, int ring)
{
	int kvd = nkv * hd, n_ctx = p0 + m + 2, rows = ring > 0 ? ring : n_ctx;
	size_t sz[] = { (size_t)m * nh * qhs, (size_t)m * kvd, (size_t)m * kvd, (size_t)hd,
	    (size_t)hd, (size_t)rows * kvd, (size_t)rows * kvd };
	float lo[] = { -2, -2, -2, 0.5f, 0.5f, -1, -1 }, hi[] = { 2, 2, 2, 1.5f, 1.5f, 1, 1 };
	int32_t *pos = xmalloc((size_t)m * 4);
	struct bop o;
	char shape[96], name[64];
	const char *const what[] = { "q", "k", vnorm ? "v" : "", "", "", "kc", "vc" };

	for (int i = 0; i < m; i++)
		pos[i] = dev ? p0 + i : p0 + 37 * i;
	bop_new(k, p, &o, 7, sz, lo, hi);
	float *dc = bput(p->c, (const float *)pos, (size_t)m), *dg = bput(p->g, (const float *)pos,
	    (size_t)m);
	float *u[7];	/* the GPU's plain ops on copies of the inputs */
	for (int i = 0; i < 7; i++)
		u[i] = bput(p->g, o.h[i], o.n[i]);
	struct backend_qkn ac = { nh, nkv, hd, qhs, o.c[3], o.c[4], 1e-6f, n_rot, mode, 1e6f,
	    vnorm, ring };
	struct backend_qkn ag = ac;
	ag.qn = o.g[3], ag.kn = o.g[4];
	BOTH(p, backend_qk_norm_rope(p->c, &ac, o.c[0], o.c[1], o.c[2], m, dev ? NULL : pos,
	    dev ? (const int32_t *)dc : NULL, dev ? o.c[5] : NULL, o.c[6], n_ctx),
	    backend_qk_norm_rope(p->g, &ag, o.g[0], o.g[1], o.g[2], m, dev ? NULL : pos,
	    dev ? (const int32_t *)dg : NULL, dev ? o.g[5] : NULL, o.g[6], n_ctx));
	bchk(p->g, backend_rmsnorm(p->g, u[0], qhs, u[3], u[0], qhs, m * nh, hd, 1e-6f));
	bchk(p->g, backend_rmsnorm(p->g, u[1], hd, u[4], u[1], hd, m * nkv, hd, 1e-6f));
	if (vnorm)
		bchk(p->g, backend_rmsnorm(p->g, u[2], hd, NULL, u[2], hd, m * nkv, hd, 1e-6f));
	if (dev) {
		bchk(p->g, backend_rope_dpos(p->g, u[0], nh * qhs, nh, qhs, m, (const int32_t *)dg,
		    n_rot, 1e6f, mode));
		bchk(p->g, backend_rope_dpos(p->g, u[1], kvd, nkv, hd, m, (const int32_t *)dg,
		    n_rot, 1e6f, mode));
		bchk(p->g, backend_kv_store(p->g, u[5], u[6], u[1], u[2], kvd, m,
		    (const int32_t *)dg, n_ctx, ring));
	} else {
		bchk(p->g, backend_rope(p->g, u[0], nh * qhs, nh, qhs, m, pos, n_rot, 1e6f, mode));
		bchk(p->g, backend_rope(p->g, u[1], kvd, nkv, hd, m, pos, n_rot, 1e6f, mode));
	}
	snprintf(shape, sizeof shape, "m=%d %d+%dx%d/%d rot=%d%s pos=%d%s%s", m, nh, nkv, hd,
	    qhs, n_rot, (mode & ~BACKEND_ROPE_GGML) == BACKEND_ROPE_NEOX ? " neox" :
	    mode & BACKEND_ROPE_GGML ? " ggml" : "", p0, dev ? " dev" : "", vnorm ? " vnorm" : "");
	if (ring > 0)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " ring=%d", ring);
	for (int i = 0; i < 7; i++) {
		if (what[i][0] == '\0' || (!dev && i >= 5))
			continue;
		snprintf(name, sizeof name, "be qk_norm_rope %s", what[i]);
		bop_cmp(k, p, &o, i, name, shape, 2e-4);
		float *a = bget(p->g, o.g[i], o.n[i]), *b = bget(p->g, u[i], o.n[i]);
		snprintf(name, sizeof name, "be qk_norm_rope %s=ops", what[i]);
		bsame(k, name, shape, a, b, (int64_t)o.n[i]);
		free(a), free(b);
	}
	for (int i = 0; i < 7; i++)
		backend_mfree(p->g, u[i]);
	backend_mfree(p->c, dc), backend_mfree(p->g, dg);
	bop_free(p, &o);
	free(pos);
}

/*
 * Attention with the qwen35 q layout (query ; gate per head): m rows at
 * p0, with a sliding window of win keys (0: none).  Each row alone at its
 * own position: the same bits up to 16 rows (verify); past them a prompt's
 * flash attention (its windowed form too) within float tolerance.  Up to 16 rows (decode,
 * verify: a recorded step's attention), the positions in backend memory
 * (backend_attention_dpos, caches of 70 rows more: splits past the rows)
 * give the host form's bits, with a window or without.
 */
void
be_attention(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0, int win)
{
	int qhs = 2 * hd, ldq = nh * qhs, kvd = nkv * hd, n = p0 + m;
	size_t sz[] = { (size_t)m * ldq, (size_t)n * kvd, (size_t)n * kvd, (size_t)m * nh * hd };
	float lo[] = { -1, -1, -1, 0 }, hi[] = { 1, 1, 1, 0 };
	struct backend_attn a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 0, win, NULL, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 4, sz, lo, hi);
	BOTH(p, backend_attention(p->c, &a, o.c[0], ldq, qhs, o.c[1], o.c[2], m, p0, o.c[3]),
	    backend_attention(p->g, &a, o.g[0], ldq, qhs, o.g[1], o.g[2], m, p0, o.g[3]));
	snprintf(shape, sizeof shape, "m=%d h=%d/%d hd=%d p0=%d", m, nh, nkv, hd, p0);
	if (win)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " win=%d", win);
	bop_cmp(k, p, &o, 3, "be attention", shape, 1e-4);
	if (m > 1) {	/* each row alone, at its own position (decode) */
		float *all = bget(p->g, o.g[3], o.n[3]), *one;
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_attention(p->g, &a, o.g[0] + (size_t)r * ldq, ldq, qhs,
			    o.g[1], o.g[2], 1, p0 + r, o.g[3] + (size_t)r * nh * hd));
		one = bget(p->g, o.g[3], o.n[3]);
		if (m <= GPU_MATVEC_MAX_ROWS)	/* verify: bit for bit */
			bsame(k, "be attention m=1xm", shape, one, all, (int64_t)o.n[3]);
		else		/* a prompt (flash attention): its own order */
			becmp(k, "be attention 1xm", shape, all, one, NULL, (int64_t)o.n[3], 1e-4);
		free(all), free(one);
	}
	if (m <= GPU_MATVEC_MAX_ROWS) {	/* positions in backend memory, caches of n + 70 */
		int32_t *pos = xmalloc((size_t)m * 4);
		float *kc = bput(p->g, NULL, (size_t)(n + 70) * kvd), *vc = bput(p->g, NULL,
		    (size_t)(n + 70) * kvd), *dp, *h, *d;
		for (int r = 0; r < m; r++)
			pos[r] = p0 + r;
		dp = bput(p->g, (const float *)pos, (size_t)m);
		bchk(p->g, backend_copy(p->g, kc, o.g[1], (size_t)n * kvd));
		bchk(p->g, backend_copy(p->g, vc, o.g[2], (size_t)n * kvd));
		bchk(p->g, backend_attention(p->g, &a, o.g[0], ldq, qhs, o.g[1], o.g[2], m, p0, o.g[3]));
		h = bget(p->g, o.g[3], o.n[3]);
		bchk(p->g, backend_attention_dpos(p->g, &a, o.g[0], ldq, qhs, kc, vc, m,
		    (const int32_t *)dp, n + 70, o.g[3]));
		d = bget(p->g, o.g[3], o.n[3]);
		bsame(k, "be attention dpos=host", shape, d, h, (int64_t)o.n[3]);
		free(h), free(d), free(pos);
		backend_mfree(p->g, kc), backend_mfree(p->g, vc), backend_mfree(p->g, dp);
	}
	bop_free(p, &o);
}

/*
 * Attention with rows that see later keys (backend_attn.hi): m rows at p0,
 * rows b0 .. b0 + nb - 1 an image block whose rows see the whole block,
 * the others causal; a sliding window of win keys (0: none).  The GPU
 * against the CPU, and its rows the same bits when the block's rows and
 * those before it run alone (a call of b0 + nb rows) and the rows after it
 * in a call of their own: a row's bits never depend on the rows beside it.
 */
void
be_attention_hi(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0,
    int b0, int nb, int win)
{
	int ld = nh * hd, kvd = nkv * hd, n = p0 + m, m1 = b0 + nb;
	size_t sz[] = { (size_t)m * ld, (size_t)n * kvd, (size_t)n * kvd, (size_t)m * ld };
	float lo[] = { -1, -1, -1, 0 }, hi[] = { 1, 1, 1, 0 };
	int32_t *top = xmalloc((size_t)m * 4);
	struct backend_attn a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 0, win, top, 0 };
	struct bop o;
	char shape[96];

	for (int r = 0; r < m; r++)
		top[r] = r >= b0 && r < m1 ? p0 + m1 - 1 : p0 + r;
	bop_new(k, p, &o, 4, sz, lo, hi);
	BOTH(p, backend_attention(p->c, &a, o.c[0], ld, hd, o.c[1], o.c[2], m, p0, o.c[3]),
	    backend_attention(p->g, &a, o.g[0], ld, hd, o.g[1], o.g[2], m, p0, o.g[3]));
	snprintf(shape, sizeof shape, "m=%d h=%d/%d hd=%d p0=%d block=%d+%d", m, nh, nkv, hd, p0,
	    b0, nb);
	if (win)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " win=%d", win);
	bop_cmp(k, p, &o, 3, "be attention hi", shape, 1e-4);
	float *all = bget(p->g, o.g[3], o.n[3]), *part;
	bchk(p->g, backend_fill(p->g, o.g[3], 0.0f, o.n[3]));
	bchk(p->g, backend_attention(p->g, &a, o.g[0], ld, hd, o.g[1], o.g[2], m1, p0, o.g[3]));
	if (m1 < m) {		/* the rows after the block: causal, at p0 + m1 */
		a.hi = top + m1;
		bchk(p->g, backend_attention(p->g, &a, o.g[0] + (size_t)m1 * ld, ld, hd, o.g[1],
		    o.g[2], m - m1, p0 + m1, o.g[3] + (size_t)m1 * ld));
	}
	part = bget(p->g, o.g[3], o.n[3]);
	bsame(k, "be attention hi parts", shape, part, all, (int64_t)o.n[3]);
	free(all), free(part), free(top);
	bop_free(p, &o);
}

/*
 * A ring case's operands: m query rows of ld, n keys and values of kvd in
 * rows of their own (the GPU's gkl, gvl) and their last ring in a ring
 * (position j in row j % ring) on both backends (ck, cv; gk, gv), outputs
 * co, go.
 */
struct ringop {
	float	*q, *kl, *vl, *kr, *vr;		/* host */
	float	*cq, *ck, *cv, *co, *gq, *gk, *gv, *go, *gkl, *gvl;
	size_t	no;				/* the outputs' floats */
};

static void
ringop_new(struct kc *k, struct bpair *p, int m, int ld, int n, int kvd, int ring,
    struct ringop *o)
{
	o->no = (size_t)m * ld;
	o->q = frand(k, (int64_t)m * ld, -1, 1);
	o->kl = frand(k, (int64_t)n * kvd, -1, 1), o->vl = frand(k, (int64_t)n * kvd, -1, 1);
	o->kr = frand(k, (int64_t)ring * kvd, -1, 1), o->vr = frand(k, (int64_t)ring * kvd, -1, 1);
	for (int j = n - ring; j < n; j++) {	/* the last ring keys, j in row j % ring */
		memcpy(o->kr + (size_t)(j % ring) * kvd, o->kl + (size_t)j * kvd,
		    kvd * sizeof *o->kr);
		memcpy(o->vr + (size_t)(j % ring) * kvd, o->vl + (size_t)j * kvd,
		    kvd * sizeof *o->vr);
	}
	o->cq = bput(p->c, o->q, o->no), o->ck = bput(p->c, o->kr, (size_t)ring * kvd);
	o->cv = bput(p->c, o->vr, (size_t)ring * kvd), o->co = bput(p->c, NULL, o->no);
	o->gq = bput(p->g, o->q, o->no), o->gk = bput(p->g, o->kr, (size_t)ring * kvd);
	o->gv = bput(p->g, o->vr, (size_t)ring * kvd), o->go = bput(p->g, NULL, o->no);
	o->gkl = bput(p->g, o->kl, (size_t)n * kvd), o->gvl = bput(p->g, o->vl, (size_t)n * kvd);
}

static void
ringop_free(struct bpair *p, struct ringop *o)
{
	float *c[] = { o->cq, o->ck, o->cv, o->co }, *g[] = { o->gq, o->gk, o->gv, o->go, o->gkl,
	    o->gvl };

	for (size_t i = 0; i < sizeof c / sizeof *c; i++)
		backend_mfree(p->c, c[i]);
	for (size_t i = 0; i < sizeof g / sizeof *g; i++)
		backend_mfree(p->g, g[i]);
	free(o->q), free(o->kl), free(o->vl), free(o->kr), free(o->vr);
}

/*
 * Attention a (a ring) over o's rows at p0 on both backends: the GPU
 * against the CPU within 1e-4 (name), then against the GPU's own
 * attention over the keys in rows of their own, bit for bit (name
 * "=rows"); the GPU's result (host, malloc'd; o->go is spoiled).
 */
static float *
ring_vs_rows(struct kc *k, struct bpair *p, const struct backend_attn *a, struct ringop *o,
    int m, int p0, const char *name, const char *shape)
{
	struct backend_attn al = *a;
	int ld = a->n_head * a->head_dim, hd = a->head_dim;
	char what[64];
	float *c, *g, *lin;

	BOTH(p, backend_attention(p->c, a, o->cq, ld, hd, o->ck, o->cv, m, p0, o->co),
	    backend_attention(p->g, a, o->gq, ld, hd, o->gk, o->gv, m, p0, o->go));
	c = bget(p->c, o->co, o->no), g = bget(p->g, o->go, o->no);
	becmp(k, name, shape, g, c, NULL, (int64_t)o->no, 1e-4);
	free(g);
	g = bget(p->g, o->go, o->no);	/* unbroken: becmp's broken arm spoiled the copy */
	al.ring = 0;
	bchk(p->g, backend_attention(p->g, &al, o->gq, ld, hd, o->gkl, o->gvl, m, p0, o->go));
	lin = bget(p->g, o->go, o->no);
	snprintf(what, sizeof what, "%s=rows", name);
	bsame(k, what, shape, lin, g, (int64_t)o->no);
	free(c), free(lin);
	return g;
}

/*
 * An image block over a ring (Gemma-4's sliding layers with bidirectional
 * image rows): m rows at p0, rows b0 .. b0 + nb - 1 seeing the whole
 * block, a window of win keys, the caches rings of win + m - 1 rows holding
 * the call's keys (p0 past the ring: they wrap).  The GPU against the CPU
 * over the same ring, and against its own attention over the keys in rows
 * of their own, bit for bit.
 */
void
be_attention_hi_ring(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0,
    int b0, int nb, int win)
{
	int n = p0 + m, ring = win + m - 1;
	int32_t *top = xmalloc((size_t)m * 4);
	struct backend_attn a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 0, win, top, ring };
	struct ringop o;
	char shape[112];

	if (n <= ring || b0 + nb > m)
		die(1, "be_attention_hi_ring: %d rows at %d, block %d+%d, window %d", m, p0, b0, nb,
		    win);
	for (int r = 0; r < m; r++)
		top[r] = r >= b0 && r < b0 + nb ? p0 + b0 + nb - 1 : p0 + r;
	ringop_new(k, p, m, nh * hd, n, nkv * hd, ring, &o);
	snprintf(shape, sizeof shape, "m=%d h=%d/%d hd=%d p0=%d block=%d+%d win=%d ring=%d", m,
	    nh, nkv, hd, p0, b0, nb, win, ring);
	free(ring_vs_rows(k, p, &a, &o, m, p0, "be attention hi ring", shape));
	ringop_free(p, &o);
	free(top);
}

/*
 * Attention over a ring cache (backend_attn.ring): m rows at p0 with a
 * window of win keys, keys in ring rows (position j in row j % ring; p0 +
 * m past ring, so they wrap; ring >= m + win - 1 holds every key the rows
 * see).  The GPU against the CPU; its own attention over the same keys in
 * rows of their own bit for bit (the same kernel, another row for each
 * position); at positions in backend memory (backend_attention_dpos: a
 * recorded step's) the host form's bits; each row alone at its own
 * position bit for bit up to 16 rows (decode, verify), past them within
 * 1e-4 (a prompt's flash prefill kernel, over the ring when it holds the
 * call's keys: its own sums), and at positions in backend memory likewise.
 */
void
be_attention_ring(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0,
    int win, int ring)
{
	int ld = nh * hd, n = p0 + m;
	struct backend_attn a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 0, win, NULL, ring };
	int32_t *pos = xmalloc((size_t)m * 4);
	struct ringop o;
	char shape[96];
	float *g, *d, *one, *dp;

	if (ring < m + win - 1 || n <= ring)
		die(1, "be_attention_ring: a ring of %d for %d rows at %d, window %d", ring, m, p0,
		    win);
	ringop_new(k, p, m, ld, n, nkv * hd, ring, &o);
	snprintf(shape, sizeof shape, "m=%d h=%d/%d hd=%d p0=%d win=%d ring=%d", m, nh, nkv, hd,
	    p0, win, ring);
	g = ring_vs_rows(k, p, &a, &o, m, p0, "be attention ring", shape);
	/* positions in backend memory (a recorded step's), a context of n + 70 */
	for (int r = 0; r < m; r++)
		pos[r] = p0 + r;
	dp = bput(p->g, (const float *)pos, (size_t)m);
	bchk(p->g, backend_fill(p->g, o.go, 0.0f, o.no));
	bchk(p->g, backend_attention_dpos(p->g, &a, o.gq, ld, hd, o.gk, o.gv, m,
	    (const int32_t *)dp, n + 70, o.go));
	d = bget(p->g, o.go, o.no);
	/* a recorded step's rows (up to 16: the split kernel either way) bit for bit; past
	 * them the host form is a prompt's flash prefill, the device form still the split
	 * kernel (no step has so many rows): their sums differ in order */
	if (m <= GPU_MATVEC_MAX_ROWS)
		bsame(k, "be attention ring dpos=host", shape, d, g, (int64_t)o.no);
	else
		becmp(k, "be attention ring dpos host", shape, d, g, NULL, (int64_t)o.no, 1e-4);
	bchk(p->g, backend_fill(p->g, o.go, 0.0f, o.no));
	for (int r = 0; r < m; r++)	/* each row alone (decode) */
		bchk(p->g, backend_attention(p->g, &a, o.gq + (size_t)r * ld, ld, hd, o.gk, o.gv, 1,
		    p0 + r, o.go + (size_t)r * ld));
	one = bget(p->g, o.go, o.no);
	if (m <= GPU_MATVEC_MAX_ROWS)
		bsame(k, "be attention ring m=1xm", shape, one, g, (int64_t)o.no);
	else
		becmp(k, "be attention ring 1xm", shape, g, one, NULL, (int64_t)o.no, 1e-4);
	free(g), free(d), free(one), free(pos);
	backend_mfree(p->g, dp);
	ringop_free(p, &o);
}

/*
 * backend_clamp on n values with NaN, +-inf, -0 and the bounds themselves
 * among them, within [lo, hi] and one-sided (-FLT_MAX, FLT_MAX: Gemma-4's
 * towers' unbounded sides): the same bits as the CPU's.
 */
void
be_clamp(struct kc *k, struct bpair *p, int n)
{
	static const float b[][2] = { { -1.0f, 1.5f }, { -FLT_MAX, 2.0f }, { -0.5f, FLT_MAX },
	    { 0.0f, 0.0f } };
	float *x = frand(k, n, -4, 4), *c, *g;
	char shape[64];

	if (n < 16)
		die(1, "be_clamp: %d values (16 at least)", n);
	x[1] = NAN, x[3] = INFINITY, x[5] = -INFINITY, x[7] = -0.0f, x[9] = 1.5f, x[11] = -1.0f;
	x[n - 1] = -NAN;
	for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
		float *cx = bput(p->c, x, n), *gx = bput(p->g, x, n);
		BOTH(p, backend_clamp(p->c, cx, n, b[i][0], b[i][1]),
		    backend_clamp(p->g, gx, n, b[i][0], b[i][1]));
		c = bget(p->c, cx, n), g = bget(p->g, gx, n);
		snprintf(shape, sizeof shape, "%d [%g, %g]", n, b[i][0], b[i][1]);
		bsame(k, "be clamp", shape, g, c, n);
		free(c), free(g);
		backend_mfree(p->c, cx), backend_mfree(p->g, gx);
	}
	free(x);
}

/*
 * backend_matmul_half, the vision towers' products: a BF16 (F16) weight
 * takes x rounded to its type on both backends (the CPU's float dot, the
 * GPU's cublasGemmEx on 16-bit operands), so the two see the same
 * operands and differ by the order of fp32 sums alone: within 1e-5 of
 * sum |w x|.  Skipping the rounding moves a product by about 3e-3
 * (BF16) or 4e-4 (F16) over sqrt(ne0) of that, past the bound at these
 * rows.  Rows ldx / ldy apart; m from one row to a prompt's GEMM; rows of
 * 4304 (the towers' FFN: not a multiple of 32, so the CUDA backend holds
 * the weight as F32 rows, rounded back to 16 bits a tile at a time).  An
 * F32 weight: the GPU's backend_matmul bit for bit.
 */
void
be_matmul_half(struct kc *k, struct bpair *p, int t, int64_t rows, int64_t ne0, int m, int pad)
{
	struct bw b;
	int ldx = (int)ne0 + pad, ldy = (int)rows + pad;
	size_t ny = (size_t)m * ldy;
	float *x = frand(k, (int64_t)m * ldx, -1, 1), *cy, *gy;
	float *cx = bput(p->c, x, (size_t)m * ldx), *gx = bput(p->g, x, (size_t)m * ldx);
	float *cyd = bput(p->c, NULL, ny), *gyd = bput(p->g, NULL, ny);
	double *mag, *m2 = xmalloc(ny * 8);
	char name[64], shape[64];

	bw_new(k, p, &b, t, rows, ne0, 1.0f);
	bchk(p->g, backend_matmul_half(p->g, &b.g, gx, ldx, gyd, ldy, m));
	gy = bget(p->g, gyd, ny);
	snprintf(shape, sizeof shape, "%lldx%lld m=%d ld+%d", (long long)rows, (long long)ne0, m,
	    pad);
	snprintf(name, sizeof name, "be matmul_half %s%s", quant_name(t),
	    t == QUANT_F32 ? " =matmul" : "");
	if (t == QUANT_F32) {	/* the reference: the GPU's own plain product */
		bchk(p->g, backend_fill(p->g, gyd, -1.0f, ny));
		bchk(p->g, backend_matmul(p->g, &b.g, gx, ldx, gyd, ldy, m));
		cy = bget(p->g, gyd, ny);
		for (int j = 0; j < m; j++)	/* (the fill stays between rows) */
			for (int i = (int)rows; i < ldy; i++)
				cy[(size_t)j * ldy + i] = 0.0f;
	} else {
		bchk(p->c, backend_matmul_half(p->c, &b.c, cx, ldx, cyd, ldy, m));
		cy = bget(p->c, cyd, ny);
	}
	mag = bmag(&b, x, ldx, m, 1.0f);
	for (int j = 0; j < m; j++)
		for (int i = 0; i < ldy; i++)
			m2[(size_t)j * ldy + i] = i < rows ? mag[j * rows + i] : 1.0;
	if (t == QUANT_F32)
		bsame(k, name, shape, gy, cy, (int64_t)ny);
	else
		becmp(k, name, shape, gy, cy, m2, (int64_t)ny, 1e-5);
	bw_free(p, &b);
	free(x), free(cy), free(gy), free(mag), free(m2);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx);
	backend_mfree(p->c, cyd), backend_mfree(p->g, gyd);
}

/*
 * backend_dconv, DFlash2's grouped dynamic causal convolution: m rows of n
 * channels, K taps, groups of g channels, the coefficients of side `side`
 * of rows 2 K n/g wide (the drafter's layout); the same order on both,
 * so bit for bit.
 */
void
be_dconv(struct kc *k, struct bpair *p, int m, int n, int K, int g, int side)
{
	int ldd = 2 * K * (n / g);
	float *x = frand(k, (size_t)m * n, -3, 3), *dyn = frand(k, (size_t)m * ldd, -1, 1);
	float *base = frand(k, (size_t)K * n, -1, 1), *c, *gy;
	float *cx = bput(p->c, x, (size_t)m * n), *gx = bput(p->g, x, (size_t)m * n);
	float *cd = bput(p->c, dyn, (size_t)m * ldd), *gd = bput(p->g, dyn, (size_t)m * ldd);
	float *cb = bput(p->c, base, (size_t)K * n), *gb = bput(p->g, base, (size_t)K * n);
	float *cyd = bput(p->c, NULL, (size_t)m * n), *gyd = bput(p->g, NULL, (size_t)m * n);
	size_t off = (size_t)side * K * (n / g);
	char shape[64];

	x[n / 2] = -0.0f;
	BOTH(p, backend_dconv(p->c, cx, m, n, cd + off, ldd, K, g, cb, cyd),
	    backend_dconv(p->g, gx, m, n, gd + off, ldd, K, g, gb, gyd));
	c = bget(p->c, cyd, (size_t)m * n), gy = bget(p->g, gyd, (size_t)m * n);
	snprintf(shape, sizeof shape, "%dx%d K=%d group=%d side %d", m, n, K, g, side);
	bsame(k, "be dconv", shape, gy, c, (int64_t)m * n);
	free(c), free(gy), free(x), free(dyn), free(base);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cd);
	backend_mfree(p->g, gd), backend_mfree(p->c, cb), backend_mfree(p->g, gb);
	backend_mfree(p->c, cyd), backend_mfree(p->g, gyd);
}

void
be_conv(struct kc *k, struct bpair *p, int m, int n_ch, int dc)
{
	int ld = n_ch + 16, ns = dc - 1;
	size_t sz[] = { (size_t)m * ld, (size_t)n_ch * dc, (size_t)ns * n_ch,
	    (size_t)m * ns * n_ch, (size_t)m * n_ch };
	float lo[] = { -2, -1, -1, 0, 0 }, hi[] = { 2, 1, 1, 0, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 5, sz, lo, hi);
	BOTH(p, backend_conv1d_silu(p->c, o.c[0], ld, m, n_ch, o.c[1], dc, o.c[2], o.c[3], o.c[4]),
	    backend_conv1d_silu(p->g, o.g[0], ld, m, n_ch, o.g[1], dc, o.g[2], o.g[3], o.g[4]));
	snprintf(shape, sizeof shape, "m=%d ch=%d k=%d", m, n_ch, dc);
	bop_cmp(k, p, &o, 4, "be conv1d_silu", shape, 1e-5);
	bop_cmp(k, p, &o, 2, "be conv1d state", shape, 0);
	bop_cmp(k, p, &o, 3, "be conv1d snap", shape, 0);
	bop_free(p, &o);
}

void
be_gdn(struct kc *k, struct bpair *p, int m, int nk, int nv, int dk, int dv, int tiled,
    int hf, int chunk)
{
	int ld = 2 * nk * dk + nv * dv + 8;
	size_t hs = (size_t)nv * dk * dv;
	size_t sz[] = { (size_t)m * ld, (size_t)m * nv, (size_t)m * nv, (size_t)nv, (size_t)nv,
	    hs, (size_t)m * hs, (size_t)m * nv * dv };
	float lo[] = { -1, -3, -3, -2, -1, -0.5f, 0, 0 }, hi[] = { 1, 3, 3, -0.1f, 1, 0.5f, 0, 0 };
	struct backend_gdn g = { nk, nv, dk, dv, tiled, hf, 1e-6f };
	struct bop o;
	char shape[64], name[64];

	bop_new(k, p, &o, 8, sz, lo, hi);
	float *S0 = bget(p->g, o.g[5], hs);
	if (chunk)
		BOTH(p, backend_gdn_chunk(p->c, &g, m, o.c[0], ld, o.c[1], o.c[2], o.c[3], o.c[4],
		    o.c[5], o.c[7]), backend_gdn_chunk(p->g, &g, m, o.g[0], ld, o.g[1], o.g[2],
		    o.g[3], o.g[4], o.g[5], o.g[7]));
	else
		BOTH(p, backend_gdn_step(p->c, &g, m, o.c[0], ld, o.c[1], o.c[2], o.c[3], o.c[4],
		    o.c[5], o.c[6], o.c[7]), backend_gdn_step(p->g, &g, m, o.g[0], ld, o.g[1],
		    o.g[2], o.g[3], o.g[4], o.g[5], o.g[6], o.g[7]));
	snprintf(shape, sizeof shape, "m=%d k%dx%d v%dx%d %s%s", m, nk, dk, nv, dv,
	    tiled ? "tiled" : "grouped", hf ? " hf" : "");
	snprintf(name, sizeof name, "be gdn_%s out", chunk ? "chunk" : "step");
	bop_cmp(k, p, &o, 7, name, shape, chunk ? 1e-3 : 1e-4);
	snprintf(name, sizeof name, "be gdn_%s state", chunk ? "chunk" : "step");
	bop_cmp(k, p, &o, 5, name, shape, chunk ? 1e-3 : 1e-4);
	if (!chunk) {
		bop_cmp(k, p, &o, 6, "be gdn_step snap", shape, 1e-4);
		/* the m-row step == m one-row steps from the same state */
		float *all = bget(p->g, o.g[7], o.n[7]), *sall = bget(p->g, o.g[5], hs), *one, *s1;
		bchk(p->g, backend_write(p->g, o.g[5], S0, hs));
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_gdn_step(p->g, &g, 1, o.g[0] + (size_t)r * ld, ld,
			    o.g[1] + (size_t)r * nv, o.g[2] + (size_t)r * nv, o.g[3], o.g[4], o.g[5],
			    NULL, o.g[7] + (size_t)r * nv * dv));
		one = bget(p->g, o.g[7], o.n[7]);
		s1 = bget(p->g, o.g[5], hs);
		bsame(k, "be gdn_step m=1xm", shape, one, all, (int64_t)o.n[7]);
		bsame(k, "be gdn_step state 1xm", shape, s1, sall, (int64_t)hs);
		free(all), free(sall), free(one), free(s1);
	}
	free(S0);
	bop_free(p, &o);
}

/*
 * A group of n sequences through backend_conv1d_silu_seqs then
 * backend_gdn_step_seqs (a Gated DeltaNet layer of model_forward_seqs):
 * sequence i has rows[i] rows (pat 0: 1..4 mixed; 1: one each; 2: as 0
 * but sequence 1 (0 when alone) has 20, past k_conv_r's chunk), its own conv
 * state and S, and with snaps its own snapshots.  The GPU's group against
 * its own calls one sequence at a time from the same states, bit for bit
 * (outputs, states, snapshots), and against the CPU's group within
 * be_conv's and be_gdn's tolerances.
 */
struct seqs_case {
	int	n, m, cd, ld, nv, vd, dc, *rows;
	size_t	hs, cs;		/* a sequence's S, conv state */
	float	*h[9];		/* x, w, a, b, ssm_a, dt_bias, conv states, S: host inputs */
};

enum { SQ_X, SQ_W, SQ_A, SQ_B, SQ_SA, SQ_DT, SQ_C, SQ_S, SQ_IN,
	SQ_Y = SQ_IN, SQ_O, SQ_CSN, SQ_SSN, SQ_ALL };

static size_t
seqs_size(const struct seqs_case *q, int i)
{
	switch (i) {
	case SQ_X: return (size_t)q->m * q->ld;
	case SQ_W: return (size_t)q->cd * q->dc;
	case SQ_A: case SQ_B: return (size_t)q->m * q->nv;
	case SQ_SA: case SQ_DT: return (size_t)q->nv;
	case SQ_C: return (size_t)q->n * q->cs;
	case SQ_S: return (size_t)q->n * q->hs;
	case SQ_Y: return (size_t)q->m * q->cd;
	case SQ_O: return (size_t)q->m * q->vd;
	case SQ_CSN: return (size_t)q->m * q->cs;
	default: return (size_t)q->m * q->hs;
	}
}

/* The group on be: its buffers b[SQ_ALL] (inputs written afresh), one call each
 * (seqs) or a call a sequence. */
static void
seqs_run(struct backend *be, const struct seqs_case *q, const struct backend_gdn *g,
    float **b, int snaps, int seqs)
{
	struct backend_seq cq[64], gq[64];

	for (int i = 0; i < SQ_IN; i++)
		bchk(be, backend_write(be, b[i], q->h[i], seqs_size(q, i)));
	for (int i = SQ_IN; i < SQ_ALL; i++)
		bchk(be, backend_fill(be, b[i], 0.0f, seqs_size(q, i)));
	for (int i = 0, r = 0; i < q->n; r += q->rows[i++]) {
		cq[i] = (struct backend_seq){ q->rows[i], b[SQ_C] + i * q->cs,
		    snaps ? b[SQ_CSN] + r * q->cs : NULL };
		gq[i] = (struct backend_seq){ q->rows[i], b[SQ_S] + i * q->hs,
		    snaps ? b[SQ_SSN] + r * q->hs : NULL };
	}
	if (seqs) {
		bchk(be, backend_conv1d_silu_seqs(be, b[SQ_X], q->ld, q->n, cq, q->cd, b[SQ_W],
		    q->dc, b[SQ_Y]));
		bchk(be, backend_gdn_step_seqs(be, g, q->n, gq, b[SQ_Y], q->cd, b[SQ_A], b[SQ_B],
		    b[SQ_SA], b[SQ_DT], b[SQ_O]));
		return;
	}
	for (int i = 0, r = 0; i < q->n; r += q->rows[i++]) {
		bchk(be, backend_conv1d_silu(be, b[SQ_X] + r * q->ld, q->ld, q->rows[i], q->cd,
		    b[SQ_W], q->dc, cq[i].state, cq[i].snap, b[SQ_Y] + r * q->cd));
		bchk(be, backend_gdn_step(be, g, q->rows[i], b[SQ_Y] + r * q->cd, q->cd,
		    b[SQ_A] + r * q->nv, b[SQ_B] + r * q->nv, b[SQ_SA], b[SQ_DT], gq[i].state,
		    gq[i].snap, b[SQ_O] + r * q->vd));
	}
}

void
be_seqs(struct kc *k, struct bpair *p, int n, int pat, int nk, int nv, int dk, int dv,
    int dc, int snaps)
{
	static const char *const nm[SQ_ALL] = { [SQ_C] = "be conv1d seqs state",
	    [SQ_S] = "be gdn_step seqs state", [SQ_Y] = "be conv1d seqs",
	    [SQ_O] = "be gdn_step seqs", [SQ_CSN] = "be conv1d seqs snap",
	    [SQ_SSN] = "be gdn_step seqs snap" };
	static const float lo[SQ_IN] = { -2, -1, -3, -3, -2, -1, -1, -0.5f };
	static const float hi[SQ_IN] = { 2, 1, 3, 3, -0.1f, 1, 1, 0.5f };
	struct seqs_case q = { .n = n, .cd = 2 * nk * dk + nv * dv, .nv = nv, .vd = nv * dv,
	    .dc = dc };
	struct backend_gdn g = { nk, nv, dk, dv, 1, 0, 1e-6f };
	float *c[SQ_ALL], *gs[SQ_ALL], *g1[SQ_ALL];
	char shape[64], name[64];

	if (n < 1 || n > 64)
		die(1, "be_seqs: %d sequences (1..64)", n);
	q.rows = xmalloc((size_t)n * sizeof *q.rows);
	for (int i = 0; i < n; i++) {
		q.rows[i] = pat == 1 ? 1 : 1 + (i * 5 + n) % 4;
		if (pat == 2 && i == (n > 1))
			q.rows[i] = 20;
		q.m += q.rows[i];
	}
	q.ld = q.cd + 16, q.hs = (size_t)nv * dk * dv, q.cs = (size_t)(dc - 1) * q.cd;
	for (int i = 0; i < SQ_IN; i++)
		q.h[i] = frand(k, (int64_t)seqs_size(&q, i), lo[i], hi[i]);
	for (int i = 0; i < SQ_ALL; i++) {
		c[i] = bput(p->c, NULL, seqs_size(&q, i));
		gs[i] = bput(p->g, NULL, seqs_size(&q, i));
		g1[i] = bput(p->g, NULL, seqs_size(&q, i));
	}
	seqs_run(p->c, &q, &g, c, snaps, 1);
	seqs_run(p->g, &q, &g, gs, snaps, 1);
	seqs_run(p->g, &q, &g, g1, snaps, 0);
	snprintf(shape, sizeof shape, "n=%d m=%d k%dx%d v%dx%d conv %d%s", n, q.m, nk, dk, nv,
	    dv, dc, snaps ? " snap" : "");
	for (int i = SQ_C; i < SQ_ALL; i++) {
		size_t sz = seqs_size(&q, i);
		float *a, *b;

		if (!snaps && (i == SQ_CSN || i == SQ_SSN))
			continue;
		a = bget(p->g, gs[i], sz), b = bget(p->g, g1[i], sz);
		bsame(k, nm[i], shape, a, b, (int64_t)sz);
		free(a), free(b);
		a = bget(p->g, gs[i], sz), b = bget(p->c, c[i], sz);
		snprintf(name, sizeof name, "%s cpu", nm[i]);
		becmp(k, name, shape, a, b, NULL, (int64_t)sz, i == SQ_C || i == SQ_CSN ? 0 :
		    i == SQ_Y ? 1e-5 : 1e-4);
		free(a), free(b);
	}
	for (int i = 0; i < SQ_ALL; i++) {
		if (i < SQ_IN)
			free(q.h[i]);
		backend_mfree(p->c, c[i]), backend_mfree(p->g, gs[i]), backend_mfree(p->g, g1[i]);
	}
	free(q.rows);
}

/*
 * backend_kv_store_seqs: n sequences of rows 1..4 (mixed) or one each, rows
 * kvd wide, each into caches of its own (64 rows, random: the rows not
 * stored must stay) at its own row.  The GPU's call against its own
 * backend_copy pairs a sequence at a time and against the CPU's call, bit
 * for bit, the whole caches.
 */
/* The n sequences' key and value caches of cs floats each on be, one after another. */
static float *
kv_caches(struct backend *be, float *(*cache)[2], int n, size_t cs)
{
	float *all = xmalloc((size_t)n * 2 * cs * 4);

	for (int i = 0; i < n; i++)
		for (int s = 0; s < 2; s++)
			bchk(be, backend_read(be, all + (size_t)(2 * i + s) * cs, cache[i][s], cs));
	return all;
}

void
be_kv_seqs(struct kc *k, struct bpair *p, int n, int ones, int kvd)
{
	enum { CTX = 64 };
	struct backend_kv_seq sq[3][64];
	struct backend *be[3] = { p->c, p->g, p->g };
	float *kv[3][2], *cache[3][64][2], *h[2], *hc;
	size_t cs = (size_t)CTX * kvd;
	int m = 0;
	char shape[64];

	if (n < 1 || n > 64)
		die(1, "be_kv_seqs: %d sequences (1..64)", n);
	for (int i = 0; i < n; i++) {
		sq[0][i].rows = ones ? 1 : 1 + (i * 5 + n) % 4;
		sq[0][i].pos = (i * 7) % (CTX - 4);
		m += sq[0][i].rows;
	}
	h[0] = frand(k, (int64_t)m * kvd, -1, 1), h[1] = frand(k, (int64_t)m * kvd, -1, 1);
	hc = frand(k, (int64_t)cs, -2, 2);
	for (int b = 0; b < 3; b++) {
		for (int s = 0; s < 2; s++)
			kv[b][s] = bput(be[b], h[s], (size_t)m * kvd);
		for (int i = 0; i < n; i++) {
			cache[b][i][0] = bput(be[b], hc, cs), cache[b][i][1] = bput(be[b], hc, cs);
			sq[b][i] = (struct backend_kv_seq){ sq[0][i].rows, sq[0][i].pos,
			    cache[b][i][0], cache[b][i][1] };
		}
	}
	bchk(p->c, backend_kv_store_seqs(p->c, kv[0][0], kv[0][1], kvd, n, sq[0]));
	bchk(p->g, backend_kv_store_seqs(p->g, kv[1][0], kv[1][1], kvd, n, sq[1]));
	for (int i = 0, r = 0; i < n; r += sq[2][i++].rows)
		for (int s = 0; s < 2; s++)
			bchk(p->g, backend_copy(p->g, cache[2][i][s] + (size_t)sq[2][i].pos * kvd,
			    kv[2][s] + (size_t)r * kvd, (size_t)sq[2][i].rows * kvd));
	snprintf(shape, sizeof shape, "n=%d m=%d kvd=%d", n, m, kvd);
	float *got = kv_caches(be[1], cache[1], n, cs), *own = kv_caches(be[2], cache[2], n, cs);
	float *cpu = kv_caches(be[0], cache[0], n, cs);
	bsame(k, "be kv_store seqs", shape, got, own, (int64_t)n * 2 * cs);
	free(got);
	got = kv_caches(be[1], cache[1], n, cs);	/* unbroken */
	bsame(k, "be kv_store seqs cpu", shape, got, cpu, (int64_t)n * 2 * cs);
	free(got), free(own), free(cpu);
	for (int b = 0; b < 3; b++) {
		backend_mfree(be[b], kv[b][0]), backend_mfree(be[b], kv[b][1]);
		for (int i = 0; i < n; i++)
			backend_mfree(be[b], cache[b][i][0]), backend_mfree(be[b], cache[b][i][1]);
	}
	free(h[0]), free(h[1]), free(hc);
}

/*
 * backend_attention_seqs (model_forward_seqs's attention): n sequences of
 * rows 1..4 (mixed) or one each, at positions 0..1000 differing by
 * sequence, each against caches of its own, q in the gated layout (query ;
 * gate per head: the group's repack).  The GPU's call against its own
 * backend_attention a sequence, bit for bit, and against the CPU's call
 * within the attention tolerance.
 */
void
be_attention_seqs(struct kc *k, struct bpair *p, int n, int ones, int nh, int nkv, int hd)
{
	int qhs = 2 * hd, ldq = nh * qhs, kvd = nkv * hd, od = nh * hd, m = 0;
	struct backend_attn a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 1, 0, NULL, 0 };
	struct backend_kv_seq sq[2][64];
	struct backend *be[2] = { p->c, p->g };
	float *hq, *q[2], *o[3], *got, *own, *cpu;
	char shape[80];

	if (n < 1 || n > 64)
		die(1, "be_attention_seqs: %d sequences (1..64)", n);
	for (int i = 0; i < n; i++) {
		sq[0][i].rows = ones ? 1 : 1 + (i * 5 + n) % 4;
		sq[0][i].pos = i == 1 ? 0 : (i * 389 + 7 * n) % 1001;
		m += sq[0][i].rows;
	}
	hq = frand(k, (int64_t)m * ldq, -1, 1);
	for (int i = 0; i < n; i++) {
		size_t cs = (size_t)(sq[0][i].pos + sq[0][i].rows) * kvd;
		float *hk = frand(k, (int64_t)cs, -1, 1), *hv = frand(k, (int64_t)cs, -1, 1);

		for (int b = 0; b < 2; b++)
			sq[b][i] = (struct backend_kv_seq){ sq[0][i].rows, sq[0][i].pos,
			    bput(be[b], hk, cs), bput(be[b], hv, cs) };
		free(hk), free(hv);
	}
	for (int b = 0; b < 2; b++)
		q[b] = bput(be[b], hq, (size_t)m * ldq);
	o[0] = bput(p->c, NULL, (size_t)m * od);
	o[1] = bput(p->g, NULL, (size_t)m * od), o[2] = bput(p->g, NULL, (size_t)m * od);
	bchk(p->c, backend_attention_seqs(p->c, &a, n, sq[0], q[0], ldq, qhs, o[0]));
	bchk(p->g, backend_attention_seqs(p->g, &a, n, sq[1], q[1], ldq, qhs, o[1]));
	for (int i = 0, r = 0; i < n; r += sq[1][i++].rows) {
		struct backend_attn ai = a;

		ai.batched = sq[1][i].rows >= 2;
		bchk(p->g, backend_attention(p->g, &ai, q[1] + (size_t)r * ldq, ldq, qhs,
		    sq[1][i].kc, sq[1][i].vc, sq[1][i].rows, sq[1][i].pos, o[2] + (size_t)r * od));
	}
	snprintf(shape, sizeof shape, "n=%d m=%d h=%d/%d hd=%d", n, m, nh, nkv, hd);
	got = bget(p->g, o[1], (size_t)m * od), own = bget(p->g, o[2], (size_t)m * od);
	cpu = bget(p->c, o[0], (size_t)m * od);
	bsame(k, "be attention seqs", shape, got, own, (int64_t)m * od);
	free(got);
	got = bget(p->g, o[1], (size_t)m * od);		/* unbroken */
	becmp(k, "be attention seqs cpu", shape, got, cpu, NULL, (int64_t)m * od, 1e-4);
	free(got), free(own), free(cpu), free(hq);
	for (int b = 0; b < 2; b++) {
		backend_mfree(be[b], q[b]);
		for (int i = 0; i < n; i++)
			backend_mfree(be[b], sq[b][i].kc), backend_mfree(be[b], sq[b][i].vc);
	}
	backend_mfree(p->c, o[0]), backend_mfree(p->g, o[1]), backend_mfree(p->g, o[2]);
}

/* Magnitudes for the fused products: sum |w t| of the normed input (mn)
 * and, for y = silu(x.Wg) * (x.Wu), the first-order error bound. */
void
fused_mags(const struct bw *wg, const struct bw *wu, const float *x, const float *nw,
    int m, int n, int nff, double *mn, double *my)
{
	double *t = xmalloc((size_t)n * 8);

	for (int j = 0; j < m; j++) {
		const float *xr = x + (size_t)j * n;
		double ss = 0;
		for (int e = 0; e < n; e++)
			ss += (double)xr[e] * xr[e];
		double sc = 1.0 / sqrt(ss / n + 1e-6);
		for (int e = 0; e < n; e++)
			t[e] = xr[e] * sc * nw[e];
		for (int i = 0; i < nff; i++) {
			const float *gr = wg->wf + (size_t)i * n, *ur = wu->wf + (size_t)i * n;
			double an = 0, ag = 0, au = 0, g = 0, u = 0;
			for (int e = 0; e < n; e++) {
				an += fabs(ur[e] * t[e]);
				ag += fabs(gr[e] * xr[e]);
				au += fabs(ur[e] * xr[e]);
				g += (double)gr[e] * xr[e];
				u += (double)ur[e] * xr[e];
			}
			mn[(size_t)j * nff + i] = an + 1e-20;
			my[(size_t)j * nff + i] = 1.1 * ag * fabs(u) + (fabs(g) + 1) * au +
			    0.05 * ag * au + 1e-20;
		}
	}
	free(t);
}

void
be_fused(struct kc *k, struct bpair *p, int t, int m, int n, int nff)
{
	struct bw wg, wu;
	size_t sz[] = { (size_t)m * n, (size_t)n, (size_t)m * nff, (size_t)m * nff,
	    (size_t)m * nff };
	float lo[] = { -1, 0.5f, 0, 0, 0 }, hi[] = { 1, 1.5f, 0, 0, 0 };
	double *mn = xmalloc((size_t)m * nff * 8), *my = xmalloc((size_t)m * nff * 8);
	struct bop o;
	char shape[64], name[64];

	bw_new(k, p, &wg, t, nff, n, 1.0f);
	bw_new(k, p, &wu, t, nff, n, 1.0f);
	bop_new(k, p, &o, 5, sz, lo, hi);
	fused_mags(&wg, &wu, o.h[0], o.h[1], m, n, nff, mn, my);
	const struct backend_weight *Wc[2] = { &wg.c, &wu.c }, *Wg[2] = { &wg.g, &wu.g };
	float *Yc[2] = { o.c[2], o.c[3] }, *Yg[2] = { o.g[2], o.g[3] };
	BOTH(p, backend_rmsnorm_matmul(p->c, o.c[0], m, n, o.c[1], 1e-6f, 2, Wc, Yc),
	    backend_rmsnorm_matmul(p->g, o.g[0], m, n, o.g[1], 1e-6f, 2, Wg, Yg));
	snprintf(shape, sizeof shape, "m=%d %dx%d", m, nff, n);
	snprintf(name, sizeof name, "be rmsnorm_matmul %s", quant_name(t));
	float *c = bget(p->c, o.c[3], o.n[3]), *g = bget(p->g, o.g[3], o.n[3]);
	becmp(k, name, shape, g, c, mn, (int64_t)o.n[3], 2e-2);
	free(c), free(g);
	BOTH(p, backend_matmul_swiglu(p->c, &wg.c, &wu.c, o.c[0], m, o.c[4]),
	    backend_matmul_swiglu(p->g, &wg.g, &wu.g, o.g[0], m, o.g[4]));
	snprintf(name, sizeof name, "be matmul_swiglu %s", quant_name(t));
	c = bget(p->c, o.c[4], o.n[4]), g = bget(p->g, o.g[4], o.n[4]);
	becmp(k, name, shape, g, c, my, (int64_t)o.n[4], 2e-2);
	free(c), free(g), free(mn), free(my);
	bop_free(p, &o);
	bw_free(p, &wg), bw_free(p, &wu);
}

/*
 * backend_argmax_map (a masked head's pick in a chain) on 3 rows of 300:
 * the rows' maxima tie (twice, -0 with +0 in the second), the third holds
 * NaN and +inf, against ranks_argmax on the host with a map that runs
 * down (so the lower id is the later column).
 */
static void
be_argmax_map(struct kc *k, struct bpair *p)
{
	enum { R = 3, N = 300 };
	float x[R * N];
	int32_t map[N], want[R], oc[R], og[R];
	struct ranks rk = { map, N, 0 };
	double d = 0;

	for (int i = 0; i < N; i++) {
		map[i] = 5000 - 7 * i;
		x[i] = (float)((i * 37) % 101) - 60;	/* 40 at 3 columns */
		x[N + i] = i == 20 ? -0.0f : i == 250 ? 0.0f : -1.0f - i;
		x[2 * N + i] = i == 7 ? NAN : i == 99 ? INFINITY : (float)i;
	}
	for (int r = 0; r < R; r++)
		want[r] = ranks_argmax(&rk, x + r * N);
	float *xc = bput(p->c, x, R * N), *xg = bput(p->g, x, R * N);
	float *mc = bput(p->c, (const float *)map, N), *mg = bput(p->g, (const float *)map, N);
	float *dc = bput(p->c, NULL, R), *dg = bput(p->g, NULL, R), *hc, *hg;

	BOTH(p, backend_argmax_map(p->c, xc, N, R, N, (const int32_t *)mc, (int32_t *)dc),
	    backend_argmax_map(p->g, xg, N, R, N, (const int32_t *)mg, (int32_t *)dg));
	hc = bget(p->c, dc, R), hg = bget(p->g, dg, R);
	memcpy(oc, hc, sizeof oc), memcpy(og, hg, sizeof og);
	d = memcmp(oc, want, sizeof oc) != 0 || memcmp(og, want, sizeof og) != 0;
	if (k->brk)
		d = 1;
	report(k, "be argmax_map", "3x300, ties, NaN, +inf", d, d == 0);
	free(hc), free(hg);
	backend_mfree(p->c, xc), backend_mfree(p->g, xg), backend_mfree(p->c, mc);
	backend_mfree(p->g, mg), backend_mfree(p->c, dc), backend_mfree(p->g, dg);
}

/*
 * The chain's ops (backend_embed_dev, backend_argmax_dev) on b's rows: ids
 * from backend memory, one of them a failed pick (-1: row 0), must give
 * the rows backend_embed gave for ids (hc, CPU; ids[1] is 0), and their
 * picks into backend memory the picks ic of backend_argmax.
 */
static void
be_dev_ids(struct kc *k, struct bpair *p, struct bw *b, const float *hc, int ld,
    const int32_t *ic)
{
	int32_t di[5] = { 3, -1, 999, 3, 512 }, oc[5], og[5];
	float *dc = bput(p->c, (const float *)di, 5), *dg = bput(p->g, (const float *)di, 5);
	float *yc = bput(p->c, NULL, 5 * ld), *yg = bput(p->g, NULL, 5 * ld), *ec, *eg, *pc, *pg;
	double d = 0;

	BOTH(p, backend_embed_dev(p->c, &b->c, (const int32_t *)dc, 5, yc, ld),
	    backend_embed_dev(p->g, &b->g, (const int32_t *)dg, 5, yg, ld));
	ec = bget(p->c, yc, 5 * ld), eg = bget(p->g, yg, 5 * ld);
	for (int i = 0; i < 5; i++)	/* the pad past 256 is never written: not compared */
		d += memcmp(ec + (size_t)i * ld, hc + (size_t)i * ld, 256 * 4) != 0 ||
		    memcmp(eg + (size_t)i * ld, hc + (size_t)i * ld, 256 * 4) != 0;
	if (k->brk)
		d = 1;
	report(k, "be embed_dev", "5 of 1000x256, id -1", d, d == 0);
	BOTH(p, backend_argmax_dev(p->c, yc, ld, 5, 256, (int32_t *)dc),
	    backend_argmax_dev(p->g, yg, ld, 5, 256, (int32_t *)dg));
	pc = bget(p->c, dc, 5), pg = bget(p->g, dg, 5);
	memcpy(oc, pc, sizeof oc), memcpy(og, pg, sizeof og);
	d = memcmp(oc, ic, sizeof oc) != 0 || memcmp(og, ic, sizeof og) != 0;
	if (k->brk)
		d = 1;
	report(k, "be argmax_dev", "5x256 ld=288", d, d == 0);
	free(pc), free(pg);
	be_argmax_map(k, p);
	free(ec), free(eg);
	backend_mfree(p->c, dc), backend_mfree(p->g, dg);
	backend_mfree(p->c, yc), backend_mfree(p->g, yg);
}

void
be_embed_argmax(struct kc *k, struct bpair *p, int t)
{
	struct bw b;
	int32_t ids[5] = { 3, 0, 999, 3, 512 }, ic[5], ig[5];
	int ld = 256 + 32;
	float *cy = bput(p->c, NULL, 5 * ld), *gy = bput(p->g, NULL, 5 * ld), *hc, *hg;
	char name[64];
	double d = 0;

	bw_new(k, p, &b, t, 1000, 256, 1.0f);
	BOTH(p, backend_embed(p->c, &b.c, ids, 5, cy, ld), backend_embed(p->g, &b.g, ids, 5, gy, ld));
	hc = bget(p->c, cy, 5 * ld);
	hg = bget(p->g, gy, 5 * ld);
	snprintf(name, sizeof name, "be embed %s", quant_name(t));
	becmp(k, name, "5 of 1000x256 ld=288", hg, hc, NULL, 5 * ld, 0);
	BOTH(p, backend_argmax(p->c, cy, ld, 5, 256, ic), backend_argmax(p->g, gy, ld, 5, 256, ig));
	for (int i = 0; i < 5; i++)
		d = fmax(d, ic[i] != ig[i]);
	if (k->brk)
		d = 1;
	report(k, "be argmax", "5x256 ld=288", d, d == 0);
	be_dev_ids(k, p, &b, hc, ld, ic);
	{	/* the top 20 of each row at temperature 0.9 */
		float vc[5 * 20], vg[5 * 20];
		int32_t tc[5 * 20], tg[5 * 20];

		BOTH(p, backend_topk(p->c, cy, ld, 5, 256, 20, 0.9f, vc, tc),
		    backend_topk(p->g, gy, ld, 5, 256, 20, 0.9f, vg, tg));
		d = memcmp(tc, tg, sizeof tc) != 0 || memcmp(vc, vg, sizeof vc) != 0;
		if (k->brk)
			d = 1;
		report(k, "be topk", "5x256 ld=288 k=20", d, d == 0);
	}
	{	/* a draw from the first row at temperature 0.9, top-p 0.95 */
		struct sample_params sp;
		struct sampler *sm;
		char err[UTIL_ERRLEN];
		int32_t dc, dg;

		sample_defaults(&sp);
		sp.temp = 0.9f, sp.top_p = 0.95f, sp.seed = 11;
		if ((sm = sample_new(&sp, 256, err)) == NULL)
			die(1, "be draw: %s", err);
		d = 0;
		for (int pos = 0; pos < 16; pos++) {
			BOTH(p, backend_draw(p->c, cy, sm, 2, pos, &dc),
			    backend_draw(p->g, gy, sm, 2, pos, &dg));
			d += dc != dg;
		}
		if (k->brk)
			d = 1;
		report(k, "be draw", "256 temp=0.9 top-p=0.95 x16", d, d == 0);
		sample_free(sm);
	}
	{	/* penalties on the second row, then its bits */
		const int32_t tok[4] = { 3, 200, 17, 0 }, cnt[4] = { 1, 4, 2, 7 };
		float *rc, *rg;

		BOTH(p, backend_penalize(p->c, cy + ld, 256, tok, cnt, 4, 1.25f, 0.5f, 0.125f),
		    backend_penalize(p->g, gy + ld, 256, tok, cnt, 4, 1.25f, 0.5f, 0.125f));
		rc = bget(p->c, cy + ld, 256);
		rg = bget(p->g, gy + ld, 256);
		d = 0;
		for (int i = 0; i < 256; i++)
			d += !(isnan(rc[i]) && isnan(rg[i])) && memcmp(&rc[i], &rg[i], 4) != 0;
		if (k->brk)
			d = 1;
		report(k, "be penalize", "256, 4 tokens", d, d == 0);
		free(rc), free(rg);
	}
	free(hc), free(hg);
	backend_mfree(p->c, cy), backend_mfree(p->g, gy);
	bw_free(p, &b);
}

/*
 * The last logits of a prefill of np tokens and (ng > 0) ng greedy ids
 * after them, on both backends (MODEL given).  np = 8: the fixed prompt;
 * longer prompts (the prompt GEMMs past the step rows, with the kind
 * backend_gemm_set picked, and the CPU computing those products with the
 * GPU's numerics of that kind, backend_cpu_gemm_emulate, set by the
 * caller; gemm: its name for the line) repeat it with the position added.
 *
 * The tolerances come from the CPU's own noise (cpu_noise: a 40-token
 * prompt's prefill against the same prompt one token at a time, the
 * decode path, and against the prefill with the plain attention order;
 * the larger of the two).  All are right; they differ by float order
 * alone, and on weights that take int8 activations an order difference
 * that flips one activation's rounding moves the logits far more than it
 * does in float (on SmolLM2's Q4_1 the CPU's two attention orders alone
 * move them by 0.48 here, up to 1.2 on other prompts), and the K-quants'
 * prefill product runs in float (cuBLAS) on the GPU, not on int8
 * activations.  On SmolLM2's Q4_1 the CPU's prefill and steps give the
 * same bits (batch-invariant attention, no delta rule), so the attention
 * order is its noise (-n: 0.21 relative, 0.48 absolute).  The
 * GPU's logits must be within noise_tol, max(1e-2, 3 x that noise), of
 * the CPU's prefill, relative to 1 + |logit| (at most 1: the broken arm
 * adds 4; at least INT8_LOGITS_TOL on a model with int8-activation
 * products); and its greedy ids may
 * leave the CPU's only at a step where the CPU's top-2 margin is below
 * noise_near, max(1e-3, 3 x the noise's largest logit difference, 2 x the
 * prefill logits' largest difference just measured): a near-tie at the
 * precision the two backends have just shown.
 * The exact checks of such a model are the GPU's argmax gate and its
 * greedy ids against llama.cpp's goldens (gpu-run.sh).
 */
void
be_model(struct kc *k, struct bpair *p, const char *path, int np, int ng, struct noise *nz,
    const char *gemm, int ring)
{
	enum { NPMAX = 64, NGMAX = 16 };
	struct backend *be[2] = { p->c, p->g };
	int32_t out[2][NGMAX], prompt[NPMAX];
	float *lg[2] = { NULL, NULL };
	double mag = 0, gap = 0, margin[NGMAX];
	char err[UTIL_ERRLEN], shape[128];
	int nv = 0, div = -1;

	np = np < NPMAX ? np : NPMAX, ng = ng < NGMAX ? ng : NGMAX;
	if (!nz->done)	/* the CPU's noise, once per model */
		cpu_noise(p->c, path, nz);
	for (int b = 0; b < 2; b++) {
		struct model *md = model_open(path, be[b], err);
		struct state *st;
		if (md == NULL)
			die(1, "%s", err);
		if (b == 0 && ring > 0 && model_ring_rows(md) == 0) {	/* no rings: no line */
			model_close(md);
			return;
		}
		if (ring > 0 && model_set_ring_rows(md, ring) != 0)
			die(1, "%s", model_errmsg(md));
		/* with rings, a context past them (a gemma4's window + ring - 1 rows) */
		if ((st = model_state_new(md, ring > 0 ? 4 * (np + NGMAX) : np + NGMAX + 1, 0,
		    err)) == NULL)
			die(1, "%s", err);
		if (ring > 0 && state_config(st)->n_ring == 0)
			die(1, "%s: no rings at %d rows a piece", path, ring);
		nv = model_hparams(md)->n_vocab;
		if (b == 0)	/* the prompt in the model's vocabulary, once it is open */
			model_prompt(prompt, np, nv);
		lg[b] = xmalloc((size_t)nv * 4);
		float *first = xmalloc((size_t)nv * 4);
		if (model_forward(md, st, prompt, np, MODEL_PREFILL, first, NULL) != 0)
			die(1, "%s: %s", backend_name(be[b]), model_errmsg(md));
		memcpy(lg[b], first, (size_t)nv * 4);
		for (int i = 0; i < ng; i++) {
			int32_t t = 0;
			for (int j = 1; j < nv; j++)
				if (first[j] > first[t])
					t = j;
			out[b][i] = t;
			if (b == 0) {	/* the CPU's top-2 margin at this step */
				float s = -INFINITY;
				for (int j = 0; j < nv; j++)
					if (j != t && first[j] > s)
						s = first[j];
				margin[i] = first[t] - s;
			}
			if (i + 1 < ng && model_forward(md, st, &t, 1, 0, first, NULL) != 0)
				die(1, "%s: %s", backend_name(be[b]), model_errmsg(md));
		}
		free(first);
		state_free(st);
		model_close(md);
	}
	for (int j = 0; j < nv; j++) {
		mag = fmax(mag, fabs((double)lg[0][j]));
		gap = fmax(gap, fabs((double)lg[1][j] - lg[0][j]));
	}
	for (int i = ng - 1; i >= 0; i--)
		if (out[0][i] != out[1][i])
			div = i;
	snprintf(shape, sizeof shape, "prefill %d%s, logits of %d (cpu noise %.2g: order %.2g, "
	    "steps %.2g)", np, gemm, nv, nz->rel, nz->order_rel, nz->steps_rel);
	bbrk(k, lg[1], nv, mag);
	/* a prompt GEMM's line: the CPU ran its products with the GPU's numerics
	 * (backend_cpu_gemm_emulate; the bf16 GEMM's rounding moves a random fixture's
	 * logits by up to 0.59, g4-nvfp4 on an H100 and in the CPU's emulation alike) */
	becmp(k, "model prefill logits", shape, lg[1], lg[0], NULL, nv, noise_tol(nz));
	if (ng > 0) {
		double near = noise_near(nz, gap), mm = 1e30;
		for (int i = 0; i < ng; i++)
			mm = fmin(mm, margin[i]);
		if (div < 0)
			snprintf(shape, sizeof shape, "prefill %d%s, greedy %d (cpu min margin %.3g)",
			    np, gemm, ng, mm);
		else
			snprintf(shape, sizeof shape, "prefill %d%s, greedy %d, left at %d (cpu margin "
			    "%.3g, near %.3g)", np, gemm, ng, div, margin[div], near);
		report(k, "model greedy cpu=cuda", shape, div < 0 ? 0 : 1,
		    (div < 0 || margin[div] < near) && !k->brk);
	}
	free(lg[0]), free(lg[1]);
}

/*
 * The logits of a prefill of 8 tokens, 3 decode steps (the first run as
 * is, the second recorded, the third replayed: backend_graph_*) and a K=3
 * verify (4 rows, every row's logits) on the GPU backend, into lg
 * (8 * n_vocab floats, allocated here; *nv: n_vocab).  Returns
 * backend_pdl_set(be, pdl): whether it ran with PDL on.
 */
static int
pdl_run(struct backend *be, const char *path, int pdl, float **lg, int *pnv)
{
	int32_t prompt[8], ver[4] = { 11, 12, 13, 14 };
	char err[UTIL_ERRLEN];
	struct model *md;
	struct state *st;
	int nv, on;

	if ((on = backend_pdl_set(be, pdl)) < 0)
		die(1, "%s: %s", backend_name(be), backend_errmsg(be));
	if ((md = model_open(path, be, err)) == NULL ||
	    (st = model_state_new(md, 8 + 3 + 4 + 1, 4, err)) == NULL)
		die(1, "%s", err);
	*pnv = nv = model_hparams(md)->n_vocab;
	*lg = xmalloc((size_t)8 * nv * 4);
	model_prompt(prompt, 8, nv);
	if (model_forward(md, st, prompt, 8, MODEL_PREFILL, *lg, NULL) != 0)
		die(1, "%s: %s", backend_name(be), model_errmsg(md));
	for (int i = 0; i < 3; i++) {
		int32_t t = 1 + 5 * i;
		if (model_forward(md, st, &t, 1, 0, *lg + (size_t)(1 + i) * nv, NULL) != 0)
			die(1, "%s: %s", backend_name(be), model_errmsg(md));
	}
	if (model_forward(md, st, ver, 4, MODEL_LOGITS_ALL | MODEL_VERIFY, *lg + (size_t)4 * nv,
	    NULL) != 0)
		die(1, "%s: %s", backend_name(be), model_errmsg(md));
	state_free(st);
	model_close(md);
	return on;
}

/*
 * Programmatic dependent launch changes when kernels start, never what
 * they compute: the logits of pdl_run with it on and off, bit for bit
 * (with it unavailable, below sm_90, both runs are plain launches).
 */
void
be_pdl(struct kc *k, struct bpair *p, const char *path)
{
	float *on = NULL, *off = NULL;
	char shape[128];
	int nv = 0, pdl = pdl_run(p->g, path, 1, &on, &nv);

	pdl_run(p->g, path, 0, &off, &nv);
	if (backend_pdl_set(p->g, 1) < 0)	/* back to the default for what follows */
		die(1, "%s: %s", backend_name(p->g), backend_errmsg(p->g));
	snprintf(shape, sizeof shape, "prefill 8, 3 decode, K=3 verify; logits of %d%s", nv,
	    pdl ? "" : " (pdl unavailable)");
	bsame(k, "model pdl on=off", shape, on, off, (int64_t)8 * nv);
	free(on), free(off);
}

#endif	/* MEMRA_HAVE_CUDA */
