/*
 * kernel-check: the mixture of experts, Gemma-4's and step35's ops.  Shared
 * declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- the mixture of experts, Gemma-4's and step35's ops ------------------ */

/* ids[m][kk]: kk distinct experts of n_exp a row, at random. */
void
moe_ids(struct kc *k, int32_t *ids, int m, int kk, int n_exp)
{
	for (int r = 0; r < m; r++)
		for (int j = 0; j < kk; j++) {
			int e, dup;
			do {
				e = (int)(rnd(k) % (uint64_t)n_exp);
				dup = 0;
				for (int i = 0; i < j; i++)
					dup |= ids[r * kk + i] == e;
			} while (dup);
			ids[r * kk + j] = e;
		}
}

/* The stack b's expert e (of n_exp, type t) as a GPU weight of its own, from its host rows. */
static void
moe_slice(struct bpair *p, const struct bw *b, int t, int n_exp, int e, float scale,
    struct backend_weight *w)
{
	int64_t rows = b->c.ne1 / n_exp, ne0 = b->c.ne0;
	size_t rb = quant_row_size(t, ne0);

	bchk(p->g, backend_weight_init(p->g, w, t, ne0, rows, b->w + (size_t)e * rows * rb, scale));
}

/* Every expert of the stack b as a GPU weight of its own (moe_slice), freed by moe_slices_free. */
static struct backend_weight *
moe_slices(struct bpair *p, const struct bw *b, int t, int n_exp, float scale)
{
	struct backend_weight *w = xmalloc((size_t)n_exp * sizeof *w);

	for (int e = 0; e < n_exp; e++)
		moe_slice(p, b, t, n_exp, e, scale, &w[e]);
	return w;
}

static void
moe_slices_free(struct bpair *p, struct backend_weight *w, int n_exp)
{
	for (int e = 0; e < n_exp; e++)
		backend_weight_release(p->g, &w[e]);
	free(w);
}

/* The products' tolerance against the CPU (be_matmul's): the int8 path's numerics, else 2e-2. */
static double
moe_tol(int t)
{
	return gpu_can_matvec_q8_rows(t, 1) ? 1e-5 : 2e-2;
}

/*
 * The magnitude of a gated product's output act(g) * u, g = sg * (wg . x),
 * u = wu . x (fused_mags' bound: a slope of act up to 1.2, |act(g)| <= |g|
 * + 1) from the rows' sums of |w x|.
 */
static double
gated_mag(const float *gr, const float *ur, const float *x, int n, float sg)
{
	double ag = 0, au = 0, g = 0, u = 0;

	for (int e = 0; e < n; e++) {
		ag += fabs((double)gr[e] * x[e]) * fabs(sg);
		au += fabs((double)ur[e] * x[e]);
		g += (double)gr[e] * x[e] * sg;
		u += (double)ur[e] * x[e];
	}
	return 1.2 * ag * fabs(u) + (fabs(g) + 1) * au + 0.05 * ag * au + 1e-20;
}

/*
 * backend_moe_swiglu_limit (limit 0: backend_moe_swiglu) over m rows of n
 * (ldx = n + pad), kk of n_exp experts of nf rows each, type t (the gate
 * stack scaled by sg): the GPU against the CPU (the fused products'
 * magnitudes, be_matmul's tolerances), each slot against the GPU's own
 * one-row backend_matmul_swiglu (with a limit: two backend_matmul and
 * backend_swiglu_limit) with that expert's rows alone, bit for bit, and
 * each row alone against the m-row call, bit for bit.
 */
void
be_moe_swiglu(struct kc *k, struct bpair *p, int t, int n_exp, int nf, int n, int m, int kk,
    int pad, float limit, float sg)
{
	struct bw wg, wu;
	int ldx = n + pad, ns = m * kk;
	float *x = frand(k, (int64_t)m * ldx, -1, 1);
	int32_t *ids = xmalloc((size_t)ns * 4);
	double *mag = xmalloc((size_t)ns * nf * 8);
	char shape[96], name[64];

	moe_ids(k, ids, m, kk, n_exp);
	bw_new(k, p, &wg, t, (int64_t)n_exp * nf, n, sg);
	bw_new(k, p, &wu, t, (int64_t)n_exp * nf, n, 1.0f);
	float *cx = bput(p->c, x, (size_t)m * ldx), *gx = bput(p->g, x, (size_t)m * ldx);
	float *cid = bput(p->c, (const float *)ids, ns), *gid = bput(p->g, (const float *)ids, ns);
	float *cf = bput(p->c, NULL, (size_t)ns * nf), *gf = bput(p->g, NULL, (size_t)ns * nf);
	BOTH(p, backend_moe_swiglu_limit(p->c, &wg.c, &wu.c, n_exp, cx, ldx, m, (const int32_t *)cid,
	    kk, limit, cf), backend_moe_swiglu_limit(p->g, &wg.g, &wu.g, n_exp, gx, ldx, m,
	    (const int32_t *)gid, kk, limit, gf));
	for (int s = 0; s < ns; s++)
		for (int i = 0; i < nf; i++) {
			size_t row = (size_t)ids[s] * nf + i;
			mag[(size_t)s * nf + i] = gated_mag(wg.wf + row * n, wu.wf + row * n,
			    x + (size_t)(s / kk) * ldx, n, sg);
		}
	snprintf(shape, sizeof shape, "%s %d of %d x %dx%d m=%d ld+%d%s", quant_name(t), kk, n_exp,
	    nf, n, m, pad, sg != 1.0f ? " *s" : "");
	if (limit > 0)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " L=%g", limit);
	float *hc = bget(p->c, cf, (size_t)ns * nf), *hg = bget(p->g, gf, (size_t)ns * nf);
	becmp(k, "be moe_swiglu", shape, hg, hc, mag, (int64_t)ns * nf, moe_tol(t));
	free(hg);

	/* each slot: its row's one-row product with its expert alone, on the GPU */
	struct backend_weight *eg = moe_slices(p, &wg, t, n_exp, sg), *eu = moe_slices(p, &wu, t,
	    n_exp, 1.0f);
	float *ref = bput(p->g, NULL, (size_t)ns * nf), *tg = bput(p->g, NULL, (size_t)nf);
	float *tu = bput(p->g, NULL, (size_t)nf);
	for (int s = 0; s < ns; s++) {
		const float *xr = gx + (size_t)(s / kk) * ldx;
		int e = ids[s];
		if (limit == 0) {
			bchk(p->g, backend_matmul_swiglu(p->g, &eg[e], &eu[e], xr, 1, ref + (size_t)s * nf));
			continue;
		}
		bchk(p->g, backend_matmul(p->g, &eg[e], xr, ldx, tg, nf, 1));
		bchk(p->g, backend_matmul(p->g, &eu[e], xr, ldx, tu, nf, 1));
		bchk(p->g, backend_swiglu_limit(p->g, tg, tu, ref + (size_t)s * nf, (size_t)nf, limit));
	}
	float *hr = bget(p->g, ref, (size_t)ns * nf);
	hg = bget(p->g, gf, (size_t)ns * nf);
	snprintf(name, sizeof name, "be moe_swiglu =1row");
	bsame(k, name, shape, hg, hr, (int64_t)ns * nf);
	free(hg);
	if (m > 1) {	/* each row alone */
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_moe_swiglu_limit(p->g, &wg.g, &wu.g, n_exp, gx + (size_t)r * ldx,
			    ldx, 1, (const int32_t *)gid + (size_t)r * kk, kk, limit,
			    ref + (size_t)r * kk * nf));
		float *h1 = bget(p->g, ref, (size_t)ns * nf);
		hg = bget(p->g, gf, (size_t)ns * nf);
		bsame(k, "be moe_swiglu m=1xm", shape, h1, hg, (int64_t)ns * nf);
		free(h1), free(hg);
	}
	moe_slices_free(p, eg, n_exp), moe_slices_free(p, eu, n_exp);
	free(hr), free(hc), free(x), free(ids), free(mag);
	backend_mfree(p->g, ref), backend_mfree(p->g, tg), backend_mfree(p->g, tu);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cid);
	backend_mfree(p->g, gid), backend_mfree(p->c, cf), backend_mfree(p->g, gf);
	bw_free(p, &wg), bw_free(p, &wu);
}

/*
 * backend_moe_ffn over m rows of n, kk of n_exp experts of nf (gate, up:
 * nf x n; down: n x nf), type t, limit lim, plus x's shared sum (xs 0:
 * none, 1: plain, 2: gated): the GPU's f and y bit for bit against its
 * backend_moe_swiglu_limit then backend_moe_down_add (or backend_moe_down),
 * and y against the CPU's (sum_j |w_j| sum |wd f| plus |xs|).
 */
void
be_moe_ffn(struct kc *k, struct bpair *p, int t, int n_exp, int nf, int n, int m, int kk,
    float lim, int xs)
{
	struct bw wg, wu, wd;
	int ns = m * kk;
	float *x = frand(k, (int64_t)m * n, -1, 1), *w = frand(k, ns, 0.05f, 1);
	float *sx = frand(k, (int64_t)m * n, -2, 2), *gt = frand(k, m, -3, 3);
	int32_t *ids = xmalloc((size_t)ns * 4);
	double *mag = xmalloc((size_t)m * n * 8);
	char shape[96];

	moe_ids(k, ids, m, kk, n_exp);
	bw_new(k, p, &wg, t, (int64_t)n_exp * nf, n, 1.0f);
	bw_new(k, p, &wu, t, (int64_t)n_exp * nf, n, 1.0f);
	bw_new(k, p, &wd, t, (int64_t)n_exp * n, nf, 1.0f);
	float *cx = bput(p->c, x, (size_t)m * n), *gx = bput(p->g, x, (size_t)m * n);
	float *cw = bput(p->c, w, ns), *gw = bput(p->g, w, ns);
	float *cid = bput(p->c, (const float *)ids, ns), *gid = bput(p->g, (const float *)ids, ns);
	float *cs = bput(p->c, sx, (size_t)m * n), *gs = bput(p->g, sx, (size_t)m * n);
	float *cg = bput(p->c, gt, m), *gg = bput(p->g, gt, m);
	float *cf = bput(p->c, NULL, (size_t)ns * nf), *gf = bput(p->g, NULL, (size_t)ns * nf);
	float *uf = bput(p->g, NULL, (size_t)ns * nf);
	float *cy = bput(p->c, NULL, (size_t)m * n), *gy = bput(p->g, NULL, (size_t)m * n);
	float *uy = bput(p->g, NULL, (size_t)m * n);
	const int32_t *ci = (const int32_t *)cid, *gi = (const int32_t *)gid;

	BOTH(p, backend_moe_ffn(p->c, &wg.c, &wu.c, &wd.c, n_exp, cx, n, m, ci, cw, kk, lim, cf,
	    xs ? cs : NULL, xs == 2 ? cg : NULL, 1, cy, n), backend_moe_ffn(p->g, &wg.g, &wu.g, &wd.g,
	    n_exp, gx, n, m, gi, gw, kk, lim, gf, xs ? gs : NULL, xs == 2 ? gg : NULL, 1, gy, n));
	bchk(p->g, backend_moe_swiglu_limit(p->g, &wg.g, &wu.g, n_exp, gx, n, m, gi, kk, lim, uf));
	bchk(p->g, xs ? backend_moe_down_add(p->g, &wd.g, n_exp, uf, m, gi, gw, kk, gs,
	    xs == 2 ? gg : NULL, 1, uy, n) : backend_moe_down(p->g, &wd.g, n_exp, uf, m, gi, gw,
	    kk, uy, n));
	snprintf(shape, sizeof shape, "%s %d of %d x %dx%d m=%d%s%s", quant_name(t), kk, n_exp, nf,
	    n, m, xs == 2 ? " +gated" : xs ? " +sum" : "", lim > 0 ? " L" : "");
	float *hf = bget(p->c, cf, (size_t)ns * nf);
	for (int r = 0; r < m; r++)
		for (int i = 0; i < n; i++) {
			double a = xs ? fabs((double)sx[(size_t)r * n + i]) : 0.0;
			for (int j = 0; j < kk; j++) {
				int s = r * kk + j;
				const float *wr = wd.wf + ((size_t)ids[s] * n + i) * nf;
				double d = 0;
				for (int c = 0; c < nf; c++)
					d += fabs((double)wr[c] * hf[(size_t)s * nf + c]);
				a += fabs((double)w[s]) * d;
			}
			mag[(size_t)r * n + i] = a + 1e-20;
		}
	float *hc = bget(p->c, cy, (size_t)m * n), *hg = bget(p->g, gy, (size_t)m * n);
	becmp(k, "be moe_ffn", shape, hg, hc, mag, (int64_t)m * n, moe_tol(t));
	free(hg);
	float *a = bget(p->g, gf, (size_t)ns * nf), *b = bget(p->g, uf, (size_t)ns * nf);
	bsame(k, "be moe_ffn f =plain", shape, a, b, (int64_t)ns * nf);
	free(a), free(b);
	a = bget(p->g, gy, (size_t)m * n), b = bget(p->g, uy, (size_t)m * n);
	bsame(k, "be moe_ffn =plain", shape, a, b, (int64_t)m * n);
	free(a), free(b), free(hf), free(hc);
	free(x), free(w), free(sx), free(gt), free(ids), free(mag);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cw);
	backend_mfree(p->g, gw), backend_mfree(p->c, cid), backend_mfree(p->g, gid);
	backend_mfree(p->c, cs), backend_mfree(p->g, gs), backend_mfree(p->c, cg);
	backend_mfree(p->g, gg), backend_mfree(p->c, cf), backend_mfree(p->g, gf);
	backend_mfree(p->g, uf), backend_mfree(p->c, cy), backend_mfree(p->g, gy);
	backend_mfree(p->g, uy);
	bw_free(p, &wg), bw_free(p, &wu), bw_free(p, &wd);
}

/*
 * backend_moe_geglu over m rows of n, kk of n_exp experts whose fused
 * stack has 2 nf rows each (gate then up), type t: the GPU against the
 * CPU, each slot against the GPU's one-row backend_matmul of its expert's
 * 2 nf rows then backend_geglu (bit for bit), each row alone (bit for bit).
 */
void
be_moe_geglu(struct kc *k, struct bpair *p, int t, int n_exp, int nf, int n, int m, int kk)
{
	struct bw wgu;
	int ns = m * kk;
	float *x = frand(k, (int64_t)m * n, -1, 1);
	int32_t *ids = xmalloc((size_t)ns * 4);
	double *mag = xmalloc((size_t)ns * nf * 8);
	char shape[96];

	moe_ids(k, ids, m, kk, n_exp);
	bw_new(k, p, &wgu, t, (int64_t)n_exp * 2 * nf, n, 1.0f);
	float *cx = bput(p->c, x, (size_t)m * n), *gx = bput(p->g, x, (size_t)m * n);
	float *cid = bput(p->c, (const float *)ids, ns), *gid = bput(p->g, (const float *)ids, ns);
	float *cf = bput(p->c, NULL, (size_t)ns * nf), *gf = bput(p->g, NULL, (size_t)ns * nf);
	BOTH(p, backend_moe_geglu(p->c, &wgu.c, n_exp, cx, n, m, (const int32_t *)cid, kk, cf),
	    backend_moe_geglu(p->g, &wgu.g, n_exp, gx, n, m, (const int32_t *)gid, kk, gf));
	for (int s = 0; s < ns; s++)
		for (int i = 0; i < nf; i++) {
			size_t g0 = (size_t)ids[s] * 2 * nf + i;
			mag[(size_t)s * nf + i] = gated_mag(wgu.wf + g0 * n, wgu.wf + (g0 + nf) * n,
			    x + (size_t)(s / kk) * n, n, 1.0f);
		}
	snprintf(shape, sizeof shape, "%s %d of %d x 2x%dx%d m=%d", quant_name(t), kk, n_exp, nf, n,
	    m);
	float *hc = bget(p->c, cf, (size_t)ns * nf), *hg = bget(p->g, gf, (size_t)ns * nf);
	becmp(k, "be moe_geglu", shape, hg, hc, mag, (int64_t)ns * nf, moe_tol(t));
	free(hg);

	struct backend_weight *ew = moe_slices(p, &wgu, t, n_exp, 1.0f);
	float *ref = bput(p->g, NULL, (size_t)ns * nf), *ty = bput(p->g, NULL, (size_t)2 * nf);
	for (int s = 0; s < ns; s++) {
		bchk(p->g, backend_matmul(p->g, &ew[ids[s]], gx + (size_t)(s / kk) * n, n, ty, 2 * nf, 1));
		bchk(p->g, backend_geglu(p->g, ty, 2 * nf, ty + nf, 2 * nf, ref + (size_t)s * nf, nf, 1,
		    nf));
	}
	float *hr = bget(p->g, ref, (size_t)ns * nf);
	hg = bget(p->g, gf, (size_t)ns * nf);
	bsame(k, "be moe_geglu =1row", shape, hg, hr, (int64_t)ns * nf);
	free(hg);
	if (m > 1) {
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_moe_geglu(p->g, &wgu.g, n_exp, gx + (size_t)r * n, n, 1,
			    (const int32_t *)gid + (size_t)r * kk, kk, ref + (size_t)r * kk * nf));
		float *h1 = bget(p->g, ref, (size_t)ns * nf);
		hg = bget(p->g, gf, (size_t)ns * nf);
		bsame(k, "be moe_geglu m=1xm", shape, h1, hg, (int64_t)ns * nf);
		free(h1), free(hg);
	}
	moe_slices_free(p, ew, n_exp);
	free(hr), free(hc), free(x), free(ids), free(mag);
	backend_mfree(p->g, ref), backend_mfree(p->g, ty);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cid);
	backend_mfree(p->g, gid), backend_mfree(p->c, cf), backend_mfree(p->g, gf);
	bw_free(p, &wgu);
}

/*
 * be_moe_down's backend_moe_down_add: its down side plus x [m][ne] (a gate
 * NULL: step35's sum) or plus sigmoid(g[r]) x (qwen35moe's gated shared
 * expert), the rows' pads as the plain op's (y starts as its result, hc on
 * the CPU): the GPU against the CPU (mag plus |x|), and bit for bit against
 * the GPU's backend_moe_down then backend_add or backend_add_gated.
 */
static void
moe_down_add_check(struct kc *k, struct bpair *p, const struct bw *wd, int n_exp, int ne, int m,
    int kk, int ldy, const float *cf, const float *gf, const float *cw, const float *gw,
    const float *cid, const float *gid, const float *hc, const double *mag, const char *shape,
    int t)
{
	float *x = frand(k, (int64_t)m * ne, -2, 2), *gt = frand(k, m, -3, 3);
	float *cx = bput(p->c, x, (size_t)m * ne), *gx = bput(p->g, x, (size_t)m * ne);
	float *cg = bput(p->c, gt, m), *gg = bput(p->g, gt, m);
	double *mx = xmalloc((size_t)m * ldy * 8);

	for (int r = 0; r < m; r++)
		for (int i = 0; i < ldy; i++)
			mx[(size_t)r * ldy + i] = mag[(size_t)r * ldy + i] + (i < ne ?
			    fabs((double)x[(size_t)r * ne + i]) : 0.0);
	for (int gi = 0; gi < 2; gi++) {
		float *cy = bput(p->c, hc, (size_t)m * ldy), *gy = bput(p->g, hc, (size_t)m * ldy);
		float *uy = bput(p->g, hc, (size_t)m * ldy);
		BOTH(p, backend_moe_down_add(p->c, &wd->c, n_exp, cf, m, (const int32_t *)cid, cw, kk,
		    cx, gi ? cg : NULL, 1, cy, ldy), backend_moe_down_add(p->g, &wd->g, n_exp, gf, m,
		    (const int32_t *)gid, gw, kk, gx, gi ? gg : NULL, 1, gy, ldy));
		bchk(p->g, backend_moe_down(p->g, &wd->g, n_exp, gf, m, (const int32_t *)gid, gw, kk,
		    uy, ldy));
		if (gi)
			bchk(p->g, backend_add_gated(p->g, uy, ldy, gx, ne, gg, 1, m, ne));
		else
			for (int r = 0; r < m; r++)
				bchk(p->g, backend_add(p->g, uy + (size_t)r * ldy, gx + (size_t)r * ne,
				    (size_t)ne));
		float *hcy = bget(p->c, cy, (size_t)m * ldy), *hgy = bget(p->g, gy, (size_t)m * ldy);
		float *huy = bget(p->g, uy, (size_t)m * ldy);
		becmp(k, gi ? "be moe_down_add gated" : "be moe_down_add", shape, hgy, hcy, mx,
		    (int64_t)m * ldy, moe_tol(t));
		free(hgy);
		hgy = bget(p->g, gy, (size_t)m * ldy);
		bsame(k, gi ? "be moe_down_add gated =plain" : "be moe_down_add =plain", shape, hgy,
		    huy, (int64_t)m * ldy);
		free(hcy), free(hgy), free(huy);
		backend_mfree(p->c, cy), backend_mfree(p->g, gy), backend_mfree(p->g, uy);
	}
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cg);
	backend_mfree(p->g, gg);
	free(x), free(gt), free(mx);
}

/*
 * backend_moe_down over m rows, kk of n_exp experts of ne rows of nf each
 * (type t, scale sd), into rows ldy = ne + pad: the GPU against the CPU
 * (magnitude sum_j |w_j| sum |wd f|), against the GPU's one-row
 * backend_matmul of each slot with its expert alone summed here in the
 * op's order (w_0 d_0 + w_1 d_1 + ..., each product and sum rounded to
 * float: C11 contracts nothing), bit for bit, and each row alone, bit for
 * bit.
 */
void
be_moe_down(struct kc *k, struct bpair *p, int t, int n_exp, int ne, int nf, int m, int kk,
    int pad, float sd)
{
	struct bw wd;
	int ns = m * kk, ldy = ne + pad;
	float *f = frand(k, (int64_t)ns * nf, -1, 1), *w = frand(k, ns, 0.05f, 1);
	int32_t *ids = xmalloc((size_t)ns * 4);
	double *mag = xmalloc((size_t)m * ldy * 8);
	char shape[96];

	moe_ids(k, ids, m, kk, n_exp);
	bw_new(k, p, &wd, t, (int64_t)n_exp * ne, nf, sd);
	float *cf = bput(p->c, f, (size_t)ns * nf), *gf = bput(p->g, f, (size_t)ns * nf);
	float *cw = bput(p->c, w, ns), *gw = bput(p->g, w, ns);
	float *cid = bput(p->c, (const float *)ids, ns), *gid = bput(p->g, (const float *)ids, ns);
	float *cy = bput(p->c, NULL, (size_t)m * ldy), *gy = bput(p->g, NULL, (size_t)m * ldy);
	BOTH(p, backend_moe_down(p->c, &wd.c, n_exp, cf, m, (const int32_t *)cid, cw, kk, cy, ldy),
	    backend_moe_down(p->g, &wd.g, n_exp, gf, m, (const int32_t *)gid, gw, kk, gy, ldy));
	for (int r = 0; r < m; r++)
		for (int i = 0; i < ldy; i++) {
			double a = 0;
			for (int j = 0; j < kk && i < ne; j++) {
				int s = r * kk + j;
				const float *wr = wd.wf + ((size_t)ids[s] * ne + i) * nf;
				double d = 0;
				for (int c = 0; c < nf; c++)
					d += fabs((double)wr[c] * f[(size_t)s * nf + c]);
				a += fabs((double)w[s]) * d * fabs(sd);
			}
			mag[(size_t)r * ldy + i] = i < ne ? a + 1e-20 : 1.0;
		}
	snprintf(shape, sizeof shape, "%s %d of %d x %dx%d m=%d ld+%d%s", quant_name(t), kk, n_exp,
	    ne, nf, m, pad, sd != 1.0f ? " *s" : "");
	float *hc = bget(p->c, cy, (size_t)m * ldy), *hg = bget(p->g, gy, (size_t)m * ldy);
	becmp(k, "be moe_down", shape, hg, hc, mag, (int64_t)m * ldy, moe_tol(t));
	free(hg);

	struct backend_weight *ew = moe_slices(p, &wd, t, n_exp, sd);
	float *dd = bput(p->g, NULL, (size_t)ns * ne), *yref = xmalloc((size_t)m * ldy * 4 + 4);
	for (int s = 0; s < ns; s++)
		bchk(p->g, backend_matmul(p->g, &ew[ids[s]], gf + (size_t)s * nf, nf,
		    dd + (size_t)s * ne, ne, 1));
	float *hd = bget(p->g, dd, (size_t)ns * ne);
	for (int r = 0; r < m; r++)
		for (int i = 0; i < ldy; i++) {
			float acc = 0.0f;
			for (int j = 0; j < kk && i < ne; j++) {
				int s = r * kk + j;
				float v = w[s] * hd[(size_t)s * ne + i];
				acc = j == 0 ? v : acc + v;
			}
			yref[(size_t)r * ldy + i] = acc;
		}
	hg = bget(p->g, gy, (size_t)m * ldy);
	bsame(k, "be moe_down =1row", shape, hg, yref, (int64_t)m * ldy);
	free(hg);
	if (m > 1) {
		float *g1 = bput(p->g, NULL, (size_t)m * ldy);
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_moe_down(p->g, &wd.g, n_exp, gf + (size_t)r * kk * nf, 1,
			    (const int32_t *)gid + (size_t)r * kk, gw + (size_t)r * kk, kk,
			    g1 + (size_t)r * ldy, ldy));
		float *h1 = bget(p->g, g1, (size_t)m * ldy);
		hg = bget(p->g, gy, (size_t)m * ldy);
		bsame(k, "be moe_down m=1xm", shape, h1, hg, (int64_t)m * ldy);
		free(h1), free(hg);
		backend_mfree(p->g, g1);
	}
	moe_down_add_check(k, p, &wd, n_exp, ne, m, kk, ldy, cf, gf, cw, gw, cid, gid, hc, mag,
	    shape, t);
	moe_slices_free(p, ew, n_exp);
	free(hd), free(yref), free(hc), free(f), free(w), free(ids), free(mag);
	backend_mfree(p->g, dd);
	backend_mfree(p->c, cf), backend_mfree(p->g, gf), backend_mfree(p->c, cw);
	backend_mfree(p->g, gw), backend_mfree(p->c, cid), backend_mfree(p->g, gid);
	backend_mfree(p->c, cy), backend_mfree(p->g, gy);
	bw_free(p, &wd);
}

/* The router's key of expert i of the row x (n), in double: softmax p, or sigmoid p + bias. */
static double
route_key(const float *x, int n, int i, int sig, const float *bias)
{
	double mx = x[0], sum = 0;

	if (sig)
		return 1.0 / (1.0 + exp(-(double)x[i])) + (bias ? bias[i] : 0.0);
	for (int j = 1; j < n; j++)
		mx = x[j] > mx ? x[j] : mx;
	for (int j = 0; j < n; j++)
		sum += exp((double)x[j] - mx);
	return exp((double)x[i] - mx) / sum;
}

/*
 * The routers, backend_moe_route (sig 0) and backend_moe_route_sigmoid
 * (sig 1: bias or not, norm, scale), over m rows of n experts (ldx = n +
 * 3), top kk: the GPU's picks the CPU's, except where the two picks' keys
 * (in double) are within 1e-6 of each other (a tie at float precision:
 * CUDA's expf is not the C library's; that row's weights are then not
 * compared); the weights within 1e-5 of 1 + |w|; each row alone the
 * m-row call's picks and weights bit for bit.
 */
void
be_moe_route(struct kc *k, struct bpair *p, int n, int kk, int m, int sig, int with_bias,
    int norm, float scale)
{
	int ldx = n + 3, ns = m * kk, ndiff = 0, bad = 0;
	float *x = frand(k, (int64_t)m * ldx, -4, 4);
	float *bias = sig && with_bias ? frand(k, n, -0.1f, 0.1f) : NULL;
	float *cx = bput(p->c, x, (size_t)m * ldx), *gx = bput(p->g, x, (size_t)m * ldx);
	float *cb = bias ? bput(p->c, bias, n) : NULL, *gb = bias ? bput(p->g, bias, n) : NULL;
	float *cid = bput(p->c, NULL, ns), *gid = bput(p->g, NULL, ns);
	float *cw = bput(p->c, NULL, ns), *gw = bput(p->g, NULL, ns);
	char shape[96], name[64];

	if (sig)
		BOTH(p, backend_moe_route_sigmoid(p->c, cx, ldx, m, n, kk, cb, norm, scale,
		    (int32_t *)cid, cw), backend_moe_route_sigmoid(p->g, gx, ldx, m, n, kk, gb, norm,
		    scale, (int32_t *)gid, gw));
	else
		BOTH(p, backend_moe_route(p->c, cx, ldx, m, n, kk, (int32_t *)cid, cw),
		    backend_moe_route(p->g, gx, ldx, m, n, kk, (int32_t *)gid, gw));
	int32_t *ic = (int32_t *)bget(p->c, cid, ns), *ig = (int32_t *)bget(p->g, gid, ns);
	float *wc = bget(p->c, cw, ns), *wg = bget(p->g, gw, ns);
	for (int r = 0; r < m; r++) {
		int tie = 0;
		for (int j = 0; j < kk; j++) {
			int s = r * kk + j;
			if (ic[s] == ig[s])
				continue;
			ndiff++;
			if (ig[s] < 0 || ig[s] >= n) {
				bad = 1;
				continue;
			}
			double a = route_key(x + (size_t)r * ldx, n, ic[s], sig, bias);
			double b = route_key(x + (size_t)r * ldx, n, ig[s], sig, bias);
			if (fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b)))
				tie = 1;
			else
				bad = 1;
		}
		for (int j = 0; tie && j < kk; j++)	/* a tie's row: its weights are another's */
			wg[r * kk + j] = wc[r * kk + j];
	}
	snprintf(shape, sizeof shape, "top %d of %d m=%d%s%s", kk, n, m, sig && bias ? " bias" : "",
	    sig ? (norm ? " norm" : " no-norm") : "");
	if (sig)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " *%g", scale);
	snprintf(name, sizeof name, "be moe_route%s ids", sig ? "_sigmoid" : "");
	report(k, name, shape, ndiff, !bad && !k->brk);
	snprintf(name, sizeof name, "be moe_route%s w", sig ? "_sigmoid" : "");
	becmp(k, name, shape, wg, wc, NULL, ns, 1e-5);
	if (m > 1) {	/* each row alone */
		float *gid1 = bput(p->g, NULL, ns), *gw1 = bput(p->g, NULL, ns);
		for (int r = 0; r < m; r++) {
			float *xr = gx + (size_t)r * ldx, *wr = gw1 + (size_t)r * kk;
			int32_t *ir = (int32_t *)gid1 + (size_t)r * kk;
			bchk(p->g, sig ? backend_moe_route_sigmoid(p->g, xr, ldx, 1, n, kk, gb, norm, scale,
			    ir, wr) : backend_moe_route(p->g, xr, ldx, 1, n, kk, ir, wr));
		}
		int32_t *i1 = (int32_t *)bget(p->g, gid1, ns), *im = (int32_t *)bget(p->g, gid, ns);
		float *w1 = bget(p->g, gw1, ns), *wm = bget(p->g, gw, ns);
		int d = memcmp(i1, im, (size_t)ns * 4) != 0;
		snprintf(name, sizeof name, "be moe_route%s ids m=1xm", sig ? "_sigmoid" : "");
		report(k, name, shape, d, !d && !k->brk);
		snprintf(name, sizeof name, "be moe_route%s w m=1xm", sig ? "_sigmoid" : "");
		bsame(k, name, shape, w1, wm, ns);
		free(i1), free(im), free(w1), free(wm);
		backend_mfree(p->g, gid1), backend_mfree(p->g, gw1);
	}
	if (!sig) {	/* Gemma-4's per-expert scale fused: the route, then moe_scale */
		float *es = frand(k, n, 0.5f, 1.5f), *ges = bput(p->g, es, n);
		float *gid2 = bput(p->g, NULL, ns), *gw2 = bput(p->g, NULL, ns);
		bchk(p->g, backend_moe_route_scale(p->g, gx, ldx, m, n, kk, ges, (int32_t *)gid2,
		    gw2));
		bchk(p->g, backend_moe_scale(p->g, gw, (int32_t *)gid, m, kk, ges, n));
		int32_t *i2 = (int32_t *)bget(p->g, gid2, ns), *im = (int32_t *)bget(p->g, gid, ns);
		float *w2 = bget(p->g, gw2, ns), *wm = bget(p->g, gw, ns);
		int d = memcmp(i2, im, (size_t)ns * 4) != 0;
		report(k, "be moe_route_scale ids=plain", shape, d, !d && !k->brk);
		bsame(k, "be moe_route_scale w=plain", shape, w2, wm, ns);
		free(es), free(i2), free(im), free(w2), free(wm);
		backend_mfree(p->g, ges), backend_mfree(p->g, gid2), backend_mfree(p->g, gw2);
	}
	free(ic), free(ig), free(wc), free(wg), free(x), free(bias);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cb);
	backend_mfree(p->g, gb), backend_mfree(p->c, cid), backend_mfree(p->g, gid);
	backend_mfree(p->c, cw), backend_mfree(p->g, gw);
}

/*
 * The small ops of the three architectures on rows rows of n (strided: ld
 * = n + 5): backend_add_gated (the shared expert's gate), backend_geglu,
 * backend_softcap, backend_scale and backend_moe_scale (exact: one
 * product), backend_swiglu_limit (with a limit and without),
 * backend_head_gate; the GPU against the CPU, 1e-6 of 1 + |ref| (CUDA's
 * expf and tanhf against the C library's) or bit for bit.
 */
void
be_arch_small(struct kc *k, struct bpair *p, int rows, int n)
{
	int ld = n + 5, nh = 4, hd = n / 4, kk = 3, ne = 7;
	size_t sz[] = { (size_t)rows * ld, (size_t)rows * ld, (size_t)rows * ld, (size_t)rows * ld,
	    (size_t)rows * kk, (size_t)ne };
	float lo[] = { -3, -3, -6, -40, 0, 0.5f }, hi[] = { 3, 3, 6, 40, 1, 2 };
	int32_t *ids = xmalloc((size_t)rows * kk * 4);
	struct bop o;
	char shape[64];

	moe_ids(k, ids, rows, kk, ne);
	float *cid = bput(p->c, (const float *)ids, (size_t)rows * kk);
	float *gid = bput(p->g, (const float *)ids, (size_t)rows * kk);
	snprintf(shape, sizeof shape, "%dx%d ld=%d", rows, n, ld);
	bop_new(k, p, &o, 6, sz, lo, hi);
	BOTH(p, backend_add_gated(p->c, o.c[0], ld, o.c[1], ld, o.c[2], ld, rows, n),
	    backend_add_gated(p->g, o.g[0], ld, o.g[1], ld, o.g[2], ld, rows, n));
	bop_cmp(k, p, &o, 0, "be add_gated", shape, 1e-6);
	BOTH(p, backend_geglu(p->c, o.c[2], ld, o.c[1], ld, o.c[1], ld, rows, n),
	    backend_geglu(p->g, o.g[2], ld, o.g[1], ld, o.g[1], ld, rows, n));
	bop_cmp(k, p, &o, 1, "be geglu", shape, 1e-6);
	BOTH(p, backend_softcap(p->c, o.c[3], o.n[3], 30.0f), backend_softcap(p->g, o.g[3], o.n[3],
	    30.0f));
	bop_cmp(k, p, &o, 3, "be softcap", shape, 1e-6);
	BOTH(p, backend_scale(p->c, o.c[2], o.n[2], 0.1767767f), backend_scale(p->g, o.g[2], o.n[2],
	    0.1767767f));
	bop_cmp(k, p, &o, 2, "be scale", shape, 0);
	BOTH(p, backend_moe_scale(p->c, o.c[4], (const int32_t *)cid, rows, kk, o.c[5], ne),
	    backend_moe_scale(p->g, o.g[4], (const int32_t *)gid, rows, kk, o.g[5], ne));
	bop_cmp(k, p, &o, 4, "be moe_scale", shape, 0);
	for (int l = 0; l < 2; l++) {
		size_t nn = (size_t)rows * ld;
		BOTH(p, backend_swiglu_limit(p->c, o.c[2], o.c[1], o.c[0], nn, l ? 0.35f : 0.0f),
		    backend_swiglu_limit(p->g, o.g[2], o.g[1], o.g[0], nn, l ? 0.35f : 0.0f));
		bop_cmp(k, p, &o, 0, l ? "be swiglu_limit L=0.35" : "be swiglu_limit L=0", shape,
		    1e-6);
	}
	BOTH(p, backend_head_gate(p->c, o.c[1], ld, o.c[2], ld, rows, nh, hd),
	    backend_head_gate(p->g, o.g[1], ld, o.g[2], ld, rows, nh, hd));
	bop_cmp(k, p, &o, 1, "be head_gate", shape, 1e-6);
	bop_free(p, &o);
	free(ids);
	backend_mfree(p->c, cid), backend_mfree(p->g, gid);
}

/*
 * Rows whose length is not a multiple of 32 (the tiny fixtures' widths:
 * the CUDA backend holds them as zero-padded F32): lookups of rows of
 * such a table, bit for bit.
 */
void
be_odd_rows(struct kc *k, struct bpair *p, int t, int ne0)
{
	struct bw b;
	int32_t ids[4] = { 7, 0, 49, 7 };
	int ld = ne0 + 6;
	float *cy = bput(p->c, NULL, 4 * ld), *gy = bput(p->g, NULL, 4 * ld), *hc, *hg;
	char name[64], shape[64];

	bw_new(k, p, &b, t, 50, ne0, 1.0f);
	BOTH(p, backend_embed(p->c, &b.c, ids, 4, cy, ld), backend_embed(p->g, &b.g, ids, 4, gy, ld));
	hc = bget(p->c, cy, 4 * ld), hg = bget(p->g, gy, 4 * ld);
	snprintf(name, sizeof name, "be embed %s", quant_name(t));
	snprintf(shape, sizeof shape, "4 of 50x%d ld=%d", ne0, ld);
	becmp(k, name, shape, hg, hc, NULL, 4 * ld, 0);
	free(hc), free(hg);
	bw_free(p, &b);
	backend_mfree(p->c, cy), backend_mfree(p->g, gy);
}

/* Pattern pat of a token mask over n tokens into bits[(n + 31) / 32]. */
static void
mask_bits(struct kc *k, uint32_t *bits, int n, int pat)
{
	size_t words = ((size_t)n + 31) / 32;

	for (size_t i = 0; i < words; i++)
		bits[i] = pat == 0 ? (uint32_t)rnd(k) : pat == 3 ? 0xffffffffu : 0;
	for (int t = 0; pat == 5 && t < n; t++)
		if (rnd(k) % 64 == 0)
			bits[t / 32] |= 1u << (t % 32);
	if (pat == 1 || pat == 2)
		bits[(pat == 1 ? n - 1 : n / 2) / 32] |= 1u << ((pat == 1 ? n - 1 : n / 2) % 32);
}

/*
 * backend_mask (a grammar's token mask, lib/grammar.h): the GPU's masked
 * row against the CPU's and the definition (-inf where the bit is 0, the
 * value's bits elsewhere), bit for bit, then the argmax and a draw (temp
 * 0.8, top-p 0.95) from each: masks random, all 0 but the last token,
 * all 0 but the middle one, all 1, all 0, one in 64; rows of a real
 * vocabulary, of one not a multiple of 32 and of 77, holding -0, NaN and
 * -inf.
 */
void
be_mask(struct kc *k, struct bpair *p)
{
	static const int ns[] = { 248320, 151669, 77 };
	static const char *const pname[] = { "random", "last only", "middle only", "all",
	    "none", "1 in 64" };

	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		int n = ns[i];
		uint32_t *bits = xmalloc(((size_t)n + 31) / 32 * 4);
		float *x = frand(k, n, -8, 8);
		struct sample_params sp;
		struct sampler *sm;
		char err[UTIL_ERRLEN], shape[64];

		x[n / 3] = -0.0f, x[n / 5] = NAN, x[n / 7] = -INFINITY;
		sample_defaults(&sp);
		sp.temp = 0.8f, sp.top_p = 0.95f, sp.seed = 5;
		if ((sm = sample_new(&sp, n, err)) == NULL)
			die(1, "be mask: %s", err);
		for (int pat = 0; pat < 6; pat++) {
			float *cy = bput(p->c, x, n), *gy = bput(p->g, x, n), *rc, *rg;
			int32_t ac, ag, dc, dg;
			double d = 0;

			mask_bits(k, bits, n, pat);
			BOTH(p, backend_mask(p->c, cy, n, bits), backend_mask(p->g, gy, n, bits));
			rc = bget(p->c, cy, n);
			rg = bget(p->g, gy, n);
			if (k->brk)
				rg[n / 2] = isinf(rg[n / 2]) ? 0.0f : -INFINITY;
			for (int t = 0; t < n; t++) {	/* tokens off the definition or the CPU's */
				float want = bits[t / 32] >> (t % 32) & 1 ? x[t] : -INFINITY;
				d += memcmp(&rc[t], &want, 4) != 0 || memcmp(&rg[t], &rc[t], 4) != 0;
			}
			snprintf(shape, sizeof shape, "%d %s", n, pname[pat]);
			report(k, "be mask", shape, d, d == 0);
			BOTH(p, backend_argmax(p->c, cy, n, 1, n, &ac),
			    backend_argmax(p->g, gy, n, 1, n, &ag));
			BOTH(p, backend_draw(p->c, cy, sm, 3, pat, &dc),
			    backend_draw(p->g, gy, sm, 3, pat, &dg));
			int any = 0;	/* a finite value let through ("1 in 64" of 77 may have none) */
			for (int t = 0; t < n && !any; t++)
				any = (bits[t / 32] >> (t % 32) & 1) && isfinite(x[t]);
			d = ac != ag || dc != dg || ac != sample_argmax(rc, n) ||
			    !any != (ac < 0 && dc < 0);
			if (k->brk)
				d = 1;
			report(k, "be mask picks", shape, d, d == 0);
			free(rc), free(rg);
			backend_mfree(p->c, cy), backend_mfree(p->g, gy);
		}
		sample_free(sm);
		free(bits), free(x);
	}
}

/* backend_head_max's bound: a head one longer is refused, with the reason (not run). */
void
be_head_max(struct kc *k, struct bpair *p)
{
	int hd = backend_head_max(p->g) + 1, ok;
	struct backend_attn a = { 2, 1, hd, 1.0f, 0, 0, 0, 0, NULL, 0 };
	float *q = bput(p->g, NULL, (size_t)2 * hd), *kv = bput(p->g, NULL, (size_t)hd);
	float *o = bput(p->g, NULL, (size_t)2 * hd);
	char shape[64];

	ok = hd > 1 && backend_attention(p->g, &a, q, 2 * hd, hd, kv, kv, 1, 0, o) == -1 &&
	    strstr(backend_errmsg(p->g), "at most") != NULL;
	snprintf(shape, sizeof shape, "hd=%d", hd);
	report(k, "be attention refuses", shape, !ok, ok && !k->brk);
	backend_mfree(p->g, q), backend_mfree(p->g, kv), backend_mfree(p->g, o);
}

/*
 * What a model GGUF's matrices (tensors of 2 dimensions and more) are
 * multiplied by on the GPU: one line "== weights TYPE n how, ..." (i8: a
 * product on int8 activations, the CPU's numerics; f32: the fp32-x
 * product; f32 copy: no GPU kernel, held as F32).  Then, when the file has
 * IQ4 weights (IQ4_XS, IQ4_NL: cuda/matvec_iq4.cu), check_iq4 at each of
 * their distinct shapes (at most 8, rows capped at 4096) on random weights
 * of that shape, for 1, 5 and 16 input rows.  An HF directory: nothing.
 */
void
be_model_types(struct kc *k, const char *path)
{
	enum { NSH = 8 };
	char err[UTIL_ERRLEN], line[512];
	int64_t cnt[QUANT_TYPE_COUNT] = { 0 }, sh[NSH][3];
	int nsh = 0, n = 0;
	struct gguf *gf = gguf_open(path, err);

	if (gf == NULL)
		return;	/* (a directory; a file that does not open fails in be_model) */
	for (int64_t i = 0; i < gguf_n_tensors(gf); i++) {
		const struct gguf_tensor *t = gguf_tensor(gf, i);
		int j;
		if (t->n_dims < 2 || t->type < 0 || t->type >= QUANT_TYPE_COUNT)
			continue;
		cnt[t->type]++;
		if (t->type != QUANT_IQ4_XS && t->type != QUANT_IQ4_NL)
			continue;
		for (j = 0; j < nsh && !(sh[j][0] == t->type && sh[j][2] == t->ne[0]); j++)
			;
		if (j == nsh && nsh < NSH) {
			sh[nsh][0] = t->type, sh[nsh][1] = t->ne[1] < 4096 ? t->ne[1] : 4096;
			sh[nsh++][2] = t->ne[0];
		}
	}
	gguf_close(gf);
	snprintf(line, sizeof line, "== weights");
	for (int t = 0; t < QUANT_TYPE_COUNT; t++)
		if (cnt[t] > 0 && strlen(line) + 64 < sizeof line)
			snprintf(line + strlen(line), sizeof line - strlen(line), "%s %s %lld %s",
			    n++ ? "," : "", quant_name(t), (long long)cnt[t],
			    gpu_can_matvec_q8(t) ? "i8" : gpu_can_matvec(t) ? "f32" : "f32 copy");
	printf("%s\n", line);
	fflush(stdout);
	for (int j = 0; j < nsh; j++)
		for (int m = 1; m <= GPU_MATVEC_MAX_ROWS; m += m == 1 ? 4 : 11)	/* 1, 5, 16 */
			check_iq4(k, (int)sh[j][0], sh[j][1], sh[j][2], m);
}

#endif	/* MEMRA_HAVE_CUDA */
