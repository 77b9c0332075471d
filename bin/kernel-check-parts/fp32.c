/*
 * kernel-check: the gpu.h fp32 ops against double references.  Shared
 * declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- fp32 ops against double references ---------------------------------- */

static double
silu_d(double x)
{
	return x / (1.0 + exp(-x));
}

/* mode 0 plain (rows ld apart: the q half of q+gate rows), 1 no weight, 2 gated */
void
check_rmsnorm(struct kc *k, int rows, int d, int ld, int mode)
{
	float eps = 1e-6f;
	float *x = frand(k, (int64_t)rows * ld, -2, 2), *w = frand(k, d, 0.5f, 1.5f);
	float *z = frand(k, (int64_t)rows * d, -4, 4), *y = xmalloc((size_t)rows * d * 4);
	double *ref = xmalloc((size_t)rows * d * 8);
	float *dx = dput(k, x, (size_t)rows * ld * 4), *dw = dput(k, w, (size_t)d * 4);
	float *dz = dput(k, z, (size_t)rows * d * 4), *dy = dput(k, NULL, (size_t)rows * d * 4);
	char shape[64];

	if (mode == 2)
		gchk(k, gpu_rmsnorm_gated(k->g, dx, dz, dw, dy, rows, d, eps));
	else
		gchk(k, gpu_rmsnorm(k->g, dx, ld, mode ? NULL : dw, dy, d, rows, d, eps));
	dget(k, y, dy, (size_t)rows * d * 4);
	brk(k, y, (int64_t)rows * d);
	for (int r = 0; r < rows; r++) {
		double s = 0;
		for (int i = 0; i < d; i++)
			s += (double)x[r * ld + i] * x[r * ld + i];
		double sc = 1.0 / sqrt(s / d + eps);
		for (int i = 0; i < d; i++) {
			double v = x[r * ld + i] * sc * (mode == 1 ? 1.0 : w[i]);
			ref[r * d + i] = mode == 2 ? v * silu_d(z[r * d + i]) : v;
		}
	}
	snprintf(shape, sizeof shape, "%dx%d ld=%d", rows, d, ld);
	close_to(k, mode == 2 ? "rmsnorm gated" : mode ? "rmsnorm noweight" : "rmsnorm", shape,
	    y, ref, NULL, (int64_t)rows * d, 2e-6);
	free(x), free(w), free(z), free(y), free(ref);
	gpu_free(k->g, dx), gpu_free(k->g, dw), gpu_free(k->g, dz), gpu_free(k->g, dy);
}

void
check_l2norm(struct kc *k, int rows, int d)
{
	float eps = 1e-6f, *x = frand(k, (int64_t)rows * d, -1, 1), *y = xmalloc((size_t)rows * d * 4);
	double *ref = xmalloc((size_t)rows * d * 8);
	float *dx = dput(k, x, (size_t)rows * d * 4), *dy = dput(k, NULL, (size_t)rows * d * 4);
	char shape[64];

	for (int i = 0; i < d; i++)
		x[i] = 0.0f;	/* a zero row meets the eps floor */
	gchk(k, gpu_upload(k->g, dx, x, (size_t)rows * d * 4));
	gchk(k, gpu_l2norm(k->g, dx, d, dy, d, rows, d, eps));
	dget(k, y, dy, (size_t)rows * d * 4);
	brk(k, y, (int64_t)rows * d);
	for (int r = 0; r < rows; r++) {
		double s = 0;
		for (int i = 0; i < d; i++)
			s += (double)x[r * d + i] * x[r * d + i];
		double n = sqrt(s) > eps ? sqrt(s) : eps;
		for (int i = 0; i < d; i++)
			ref[r * d + i] = x[r * d + i] / n;
	}
	snprintf(shape, sizeof shape, "%dx%d", rows, d);
	close_to(k, "l2norm", shape, y, ref, NULL, (int64_t)rows * d, 2e-6);
	free(x), free(y), free(ref);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
}

/* Angles as ggml's rope cache makes them: pos * ts^i by repeated float products. */
void
check_rope(struct kc *k, int n, int heads, int hd, int ld, int n_rot, int maxpos)
{
	float base = 1e7f, ts = powf(base, -2.0f / (float)n_rot);
	int64_t nel = (int64_t)n * heads * ld;
	float *x = frand(k, nel, -1, 1), *y = xmalloc((size_t)nel * 4);
	double *ref = xmalloc((size_t)nel * 8);
	int32_t *pos = xmalloc((size_t)n * 4);
	char shape[64];

	for (int t = 0; t < n; t++)
		pos[t] = t == 0 ? maxpos : (int32_t)(rnd(k) % (uint64_t)(maxpos + 1));
	float *dx = dput(k, x, (size_t)nel * 4);
	int32_t *dp = dput(k, pos, (size_t)n * 4);
	gchk(k, gpu_rope_neox(k->g, dx, n, heads, ld, n_rot, dp, base));
	dget(k, y, dx, (size_t)nel * 4);
	brk(k, y, nel);
	for (int64_t i = 0; i < nel; i++)
		ref[i] = x[i];
	for (int t = 0; t < n; t++)
		for (int h = 0; h < heads; h++) {
			float *p = x + ((int64_t)t * heads + h) * ld, th = (float)pos[t];
			double *r = ref + ((int64_t)t * heads + h) * ld;
			for (int i = 0; i < n_rot / 2; i++, th *= ts) {
				r[i] = p[i] * cos(th) - p[i + n_rot / 2] * sin(th);
				r[i + n_rot / 2] = p[i] * sin(th) + p[i + n_rot / 2] * cos(th);
			}
		}
	(void)hd;
	snprintf(shape, sizeof shape, "%dx%dx%d rot=%d pos<=%d", n, heads, ld, n_rot, maxpos);
	close_to(k, "rope neox", shape, y, ref, NULL, nel, 2e-6);
	free(x), free(y), free(ref), free(pos);
	gpu_free(k->g, dx), gpu_free(k->g, dp);
}

/* op 0 swiglu, 1 add, 2 sigmoid_mul (rows of d in rows of 2d: the gate half) */
void
check_elementwise(struct kc *k, int op, int rows, int d)
{
	static const char *names[] = { "swiglu", "add", "sigmoid_mul" };
	int64_t n = (int64_t)rows * d, na = op == 2 ? 2 * n : n;
	float *a = frand(k, na, -6, 6), *b = frand(k, n, -3, 3), *y = xmalloc((size_t)n * 4);
	double *ref = xmalloc((size_t)n * 8);
	float *da = dput(k, a, (size_t)na * 4), *db = dput(k, b, (size_t)n * 4);
	float *dy = dput(k, NULL, (size_t)n * 4);
	char shape[64];

	if (op == 0)
		gchk(k, gpu_swiglu(k->g, da, db, dy, n));
	else if (op == 1)
		gchk(k, gpu_add(k->g, da, db, dy, n));
	else	/* x = b, gate = second half of each 2d row of a */
		gchk(k, gpu_sigmoid_mul(k->g, db, d, da + d, 2 * d, dy, d, rows, d));
	dget(k, y, dy, (size_t)n * 4);
	brk(k, y, n);
	for (int r = 0; r < rows; r++)
		for (int i = 0; i < d; i++) {
			int64_t j = (int64_t)r * d + i;
			if (op == 0)
				ref[j] = silu_d(a[j]) * b[j];
			else if (op == 1)
				ref[j] = (double)a[j] + b[j];
			else
				ref[j] = b[j] / (1.0 + exp(-(double)a[(int64_t)r * 2 * d + d + i]));
		}
	snprintf(shape, sizeof shape, "%dx%d", rows, d);
	close_to(k, names[op], shape, y, ref, NULL, n, 2e-6);
	free(a), free(b), free(y), free(ref);
	gpu_free(k->g, da), gpu_free(k->g, db), gpu_free(k->g, dy);
}

void
check_conv1d(struct kc *k, int T, int C, int K)
{
	float *x = frand(k, (int64_t)T * C, -2, 2), *w = frand(k, (int64_t)C * K, -1, 1);
	float *st = frand(k, (int64_t)(K - 1) * C, -2, 2), *y = xmalloc((size_t)T * C * 4);
	float *st2 = xmalloc((size_t)(K - 1) * C * 4), *both = xmalloc((size_t)(T + K - 1) * C * 4);
	double *ref = xmalloc((size_t)(T + K - 1) * C * 8);
	float *dx = dput(k, x, (size_t)T * C * 4), *dw = dput(k, w, (size_t)C * K * 4);
	float *ds = dput(k, st, (size_t)(K - 1) * C * 4), *dy = dput(k, NULL, (size_t)T * C * 4);
	char shape[64];

	gchk(k, gpu_conv1d_silu(k->g, dx, T, C, K, dw, ds, dy));
	dget(k, y, dy, (size_t)T * C * 4);
	dget(k, st2, ds, (size_t)(K - 1) * C * 4);
	/* inputs in order: the state's K-1, then the T new ones */
	memcpy(both, st, (size_t)(K - 1) * C * 4);
	memcpy(both + (K - 1) * C, x, (size_t)T * C * 4);
	for (int t = 0; t < T; t++)
		for (int c = 0; c < C; c++) {
			double s = 0;
			for (int j = 0; j < K; j++)
				s += (double)both[(int64_t)(t + j) * C + c] * w[(int64_t)c * K + j];
			ref[(int64_t)t * C + c] = silu_d(s);
		}
	brk(k, y, (int64_t)T * C);
	snprintf(shape, sizeof shape, "T=%d C=%d K=%d", T, C, K);
	close_to(k, "conv1d silu", shape, y, ref, NULL, (int64_t)T * C, 2e-6);
	for (int64_t i = 0; i < (int64_t)(K - 1) * C; i++)
		ref[i] = both[(int64_t)T * C + i];
	brk(k, st2, (int64_t)(K - 1) * C);
	close_to(k, "conv1d state", shape, st2, ref, NULL, (int64_t)(K - 1) * C, 0);
	free(x), free(w), free(st), free(y), free(st2), free(both), free(ref);
	gpu_free(k->g, dx), gpu_free(k->g, dw), gpu_free(k->g, ds), gpu_free(k->g, dy);
}

static void
l2rows(float *v, int64_t rows, int d)
{
	for (int64_t r = 0; r < rows; r++) {
		double s = 0;
		for (int i = 0; i < d; i++)
			s += (double)v[r * d + i] * v[r * d + i];
		for (int i = 0; i < d; i++)
			v[r * d + i] = (float)(v[r * d + i] / sqrt(s));
	}
}

/* T steps of the gated delta rule; checks the outputs and the new state. */
void
check_gdn(struct kc *k, int T, int hk, int hv, int sk, int sv)
{
	int64_t ns = (int64_t)hv * sk * sv, nq = (int64_t)T * hk * sk, no = (int64_t)T * hv * sv;
	float *S = frand(k, ns, -0.5f, 0.5f), *q = frand(k, nq, -1, 1), *kk = frand(k, nq, -1, 1);
	float *v = frand(k, no, -1, 1), *gl = frand(k, (int64_t)T * hv, -1.5f, 0);
	float *beta = frand(k, (int64_t)T * hv, 0, 1), *o = xmalloc((size_t)no * 4), *S2 = xmalloc((size_t)ns * 4);
	double *Sd = xmalloc((size_t)ns * 8), *ref = xmalloc((size_t)no * 8), scale = 1.0 / sqrt(sk);
	char shape[64];

	l2rows(q, (int64_t)T * hk, sk);
	l2rows(kk, (int64_t)T * hk, sk);
	float *dS = dput(k, S, (size_t)ns * 4), *dq = dput(k, q, (size_t)nq * 4), *dk = dput(k, kk, (size_t)nq * 4);
	float *dv = dput(k, v, (size_t)no * 4), *dg = dput(k, gl, (size_t)T * hv * 4);
	float *db = dput(k, beta, (size_t)T * hv * 4), *dout = dput(k, NULL, (size_t)no * 4);
	gchk(k, gpu_gdn_step(k->g, dS, dq, dk, dv, dg, db, dout, T, hk, hv, sk, sv, (float)scale));
	dget(k, o, dout, (size_t)no * 4);
	dget(k, S2, dS, (size_t)ns * 4);
	for (int64_t i = 0; i < ns; i++)
		Sd[i] = S[i];
	for (int t = 0; t < T; t++)
		for (int h = 0; h < hv; h++) {
			double *s = Sd + (int64_t)h * sk * sv, eg = exp((double)gl[t * hv + h]);
			const float *kt = kk + ((int64_t)t * hk + h % hk) * sk, *qt = q + ((int64_t)t * hk + h % hk) * sk;
			for (int j = 0; j < sv; j++) {
				double kv = 0, out = 0;
				for (int i = 0; i < sk; i++)
					kv += s[(int64_t)i * sv + j] * kt[i];
				double dl = (v[((int64_t)t * hv + h) * sv + j] - eg * kv) * beta[t * hv + h];
				for (int i = 0; i < sk; i++) {
					s[(int64_t)i * sv + j] = eg * s[(int64_t)i * sv + j] + kt[i] * dl;
					out += s[(int64_t)i * sv + j] * qt[i];
				}
				ref[((int64_t)t * hv + h) * sv + j] = out * scale;
			}
		}
	brk(k, o, no);
	snprintf(shape, sizeof shape, "T=%d hk=%d hv=%d %dx%d", T, hk, hv, sk, sv);
	close_to(k, "gdn out", shape, o, ref, NULL, no, 1e-5);
	brk(k, S2, ns);
	close_to(k, "gdn state", shape, S2, Sd, NULL, ns, 1e-5);
	free(S), free(q), free(kk), free(v), free(gl), free(beta), free(o), free(S2), free(Sd), free(ref);
	gpu_free(k->g, dS), gpu_free(k->g, dq), gpu_free(k->g, dk), gpu_free(k->g, dv);
	gpu_free(k->g, dg), gpu_free(k->g, db), gpu_free(k->g, dout);
}

/*
 * gpu_attention (pf 0) or gpu_attention_prefill (pf 1; pf 2 its full mode,
 * every row seeing every key of the call) against attention in double;
 * win > 0 (pf 1): gpu_attention_prefill's sliding window, the row at
 * position i seeing the keys j with i - win < j <= i.
 */
void
check_attention_win(struct kc *k, int nq, int nh, int nkv, int hd, int pos0, int pf, int win)
{
	int np = pos0 + nq, grp = nh / nkv;
	int64_t nkvel = (int64_t)np * nkv * hd, nqel = (int64_t)nq * nh * hd;
	float *q = frand(k, nqel, -1, 1), *K = frand(k, nkvel, -1, 1), *V = frand(k, nkvel, -1, 1);
	float *o = xmalloc((size_t)nqel * 4), scale = 1.0f / sqrtf((float)hd) * 2.0f;
	double *ref = xmalloc((size_t)nqel * 8), *p = xmalloc((size_t)np * 8);
	float *dq = dput(k, q, (size_t)nqel * 4), *dK = dput(k, K, (size_t)nkvel * 4);
	float *dV = dput(k, V, (size_t)nkvel * 4), *dO = dput(k, NULL, (size_t)nqel * 4);
	char shape[64];

	gchk(k, pf ? gpu_attention_prefill(k->g, dq, dK, dV, dO, nq, nh, nkv, hd, pos0, scale,
	    pf == 2, win, 0) : gpu_attention(k->g, dq, dK, dV, dO, nq, nh, nkv, hd, pos0, scale));
	dget(k, o, dO, (size_t)nqel * 4);
	for (int t = 0; t < nq; t++)
		for (int h = 0; h < nh; h++) {
			const float *qh = q + ((int64_t)t * nh + h) * hd;
			int kvh = h / grp, n = pf == 2 ? np : pos0 + t + 1;
			int j0 = win > 0 && pos0 + t - win + 1 > 0 ? pos0 + t - win + 1 : 0;
			double mx = -INFINITY, l = 0;
			for (int j = j0; j < n; j++) {
				double s = 0;
				for (int i = 0; i < hd; i++)
					s += (double)qh[i] * K[((int64_t)j * nkv + kvh) * hd + i];
				p[j] = s * scale;
				mx = p[j] > mx ? p[j] : mx;
			}
			for (int j = j0; j < n; j++)
				l += p[j] = exp(p[j] - mx);
			for (int i = 0; i < hd; i++) {
				double s = 0;
				for (int j = j0; j < n; j++)
					s += p[j] * V[((int64_t)j * nkv + kvh) * hd + i];
				ref[((int64_t)t * nh + h) * hd + i] = s / l;
			}
		}
	brk(k, o, nqel);
	snprintf(shape, sizeof shape, "nq=%d h=%d/%d hd=%d pos0=%d", nq, nh, nkv, hd, pos0);
	if (win > 0)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " window=%d", win);
	close_to(k, pf == 2 ? "attention prefill full" : pf && win ? "attention prefill window" :
	    pf ? "attention prefill" : "attention", shape, o, ref, NULL, nqel, 1e-5);
	free(q), free(K), free(V), free(o), free(ref), free(p);
	gpu_free(k->g, dq), gpu_free(k->g, dK), gpu_free(k->g, dV), gpu_free(k->g, dO);
}

void
check_attention(struct kc *k, int nq, int nh, int nkv, int hd, int pos0, int pf)
{
	check_attention_win(k, nq, nh, nkv, hd, pos0, pf, 0);
}

/*
 * gpu_upload_weight (a weight's file bytes to the device: from 16 MiB on
 * through two pinned buffers in turn) of n floats: the device's copy
 * downloaded equals the host's bit for bit.
 */
void
check_upload_weight(struct kc *k, int64_t n)
{
	float *h = frand(k, n, -1, 1), *o = xmalloc((size_t)n * sizeof *o);
	void *d = gpu_alloc(k->g, (size_t)n * 4);
	char shape[64];

	if (d == NULL)
		die(1, "gpu: %s", gpu_errmsg(k->g));
	gchk(k, gpu_upload_weight(k->g, d, h, (size_t)n * 4));
	dget(k, o, d, (size_t)n * 4);
	brk(k, o, n);
	snprintf(shape, sizeof shape, "%lld bytes", (long long)n * 4);
	same_bits(k, "upload weight", shape, o, h, n);
	free(h), free(o);
	gpu_free(k->g, d);
}

void
check_argmax(struct kc *k, int rows, int64_t n)
{
	float *x = frand(k, rows * n, -10, 10);
	int32_t *idx = xmalloc((size_t)rows * 4), *dI;
	double maxd = 0;
	int ok = 1;
	char shape[64];

	for (int r = 0; r < rows; r++) {	/* ties: the first index wins */
		int64_t a = (int64_t)(rnd(k) % (uint64_t)n), b = (int64_t)(rnd(k) % (uint64_t)n);
		x[r * n + a] = x[r * n + b] = 11.0f + (float)(r % 3);
		/* NaN and +inf above them never win (sample_next's greedy pick) */
		x[r * n + rnd(k) % (uint64_t)n] = NAN;
		x[r * n + rnd(k) % (uint64_t)n] = INFINITY;
	}
	for (int64_t i = 0; i < n; i++)	/* the last row: none finite, -1 */
		x[(rows - 1) * n + i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
	float *dx = dput(k, x, (size_t)rows * n * 4);
	dI = dput(k, NULL, (size_t)rows * 4);
	gchk(k, gpu_argmax(k->g, dx, rows, n, dI));
	dget(k, idx, dI, (size_t)rows * 4);
	if (k->brk)
		idx[rows / 2] ^= 1;
	for (int r = 0; r < rows; r++) {
		int64_t best = -1;
		for (int64_t i = 0; i < n; i++)
			if (isfinite(x[r * n + i]) && (best < 0 || x[r * n + i] > x[r * n + best]))
				best = i;
		if (idx[r] != best) {
			ok = 0;
			maxd = 1;
		}
	}
	snprintf(shape, sizeof shape, "%dx%lld", rows, (long long)n);
	report(k, "argmax", shape, maxd, ok);
	free(x), free(idx);
	gpu_free(k->g, dx), gpu_free(k->g, dI);
}

/*
 * A row of n (values in -10..10) where the sampler's kernels meet their
 * edges: pairs of equal values among the top (nties), 9.5 and its
 * successor (one value once divided by 3), NaN and both infinities, top
 * first, and a -0 beside a +0.
 */
static void
edge_row(struct kc *k, float *xr, int64_t n, int nties, float top)
{
	for (int i = 0; i < nties && i < n; i++) {
		int64_t a = (int64_t)(rnd(k) % (uint64_t)n), b = (int64_t)(rnd(k) % (uint64_t)n);
		xr[a] = xr[b] = 9.0f + (float)(i % 7) * 0.125f;
	}
	xr[rnd(k) % (uint64_t)n] = 9.5f;
	xr[rnd(k) % (uint64_t)n] = nextafterf(9.5f, 20.0f);
	xr[rnd(k) % (uint64_t)n] = NAN;
	xr[rnd(k) % (uint64_t)n] = INFINITY;
	xr[rnd(k) % (uint64_t)n] = -INFINITY;
	xr[0] = top, xr[1] = -0.0f, xr[2] = 0.0f;
}

/*
 * gpu_topk against lib/sample.c's sample_top, ids and values bit for bit:
 * rows of n with ties (two values equal, and values that tie only after
 * the division by temp), a -0 beside a +0, NaN and infinities above the
 * rest, and a last row with fewer finite values than k (ids -1, NaN).
 */
void
check_topk(struct kc *k, int rows, int64_t n, int kk, float temp)
{
	float *x = frand(k, rows * n, -10, 10), *val = xmalloc((size_t)rows * kk * 4);
	float *rv = xmalloc((size_t)kk * 4), *dv;
	int32_t *id = xmalloc((size_t)rows * kk * 4), *rid = xmalloc((size_t)kk * 4), *dI;
	uint64_t *key = xmalloc((size_t)n * 8);
	double bad = 0;
	char shape[64];

	for (int r = 0; r < rows; r++)
		edge_row(k, x + r * n, n, 3 * kk, 12.0f);
	for (int64_t i = kk / 2; i < n; i++)	/* the last row: kk / 2 finite */
		x[(rows - 1) * n + i] = i % 2 ? NAN : -INFINITY;
	float *dx = dput(k, x, (size_t)rows * n * 4);
	void *sc = dput(k, NULL, gpu_topk_scratch(rows, kk));
	dv = dput(k, NULL, (size_t)rows * kk * 4);
	dI = dput(k, NULL, (size_t)rows * kk * 4);
	gchk(k, gpu_topk(k->g, dx, rows, n, n, kk, temp, dv, dI, sc));
	dget(k, val, dv, (size_t)rows * kk * 4);
	dget(k, id, dI, (size_t)rows * kk * 4);
	if (k->brk)
		id[kk / 2] ^= 1;
	for (int r = 0; r < rows; r++) {
		sample_top(x + r * n, (int)n, kk, temp, rv, rid, key);
		if (memcmp(rid, id + r * kk, (size_t)kk * 4) != 0 ||
		    memcmp(rv, val + r * kk, (size_t)kk * 4) != 0)
			bad = 1;
	}
	snprintf(shape, sizeof shape, "%dx%lld k=%d temp=%g", rows, (long long)n, kk, temp);
	report(k, "topk", shape, bad, bad == 0);
	free(x), free(val), free(rv), free(id), free(rid), free(key);
	gpu_free(k->g, dx), gpu_free(k->g, dv), gpu_free(k->g, dI), gpu_free(k->g, sc);
}

/*
 * gpu_draw against lib/sample.c's sample_next from the same row: the same
 * id at every position tried (its uniform: sample_uniform of the token
 * stream), on rows with ties among the top, values that tie only after
 * the division by temp, a -0 beside a +0, NaN and infinities, under
 * top-p and min-p and neither; a last row without a finite value.
 */
void
check_draw(struct kc *k, int64_t n, float temp, float top_p, float min_p, int npos)
{
	float *x = frand(k, n, -10, 10), *dx;
	void *sc = dput(k, NULL, gpu_draw_scratch());
	int32_t *dI = (int32_t *)dput(k, NULL, 4), got, want;
	struct sample_params p;
	struct sampler *s;
	char shape[96], err[UTIL_ERRLEN];
	int bad = 0;

	edge_row(k, x, n, 40, 10.5f);
	sample_defaults(&p);
	p.temp = temp, p.top_p = top_p, p.min_p = min_p, p.seed = rnd(k);
	if ((s = sample_new(&p, (int)n, err)) == NULL)
		die(1, "draw: %s", err);
	dx = dput(k, x, (size_t)n * 4);
	for (int pos = 0; pos <= npos; pos++) {
		if (pos == npos) {	/* nothing finite */
			for (int64_t i = 0; i < n; i++)
				x[i] = i % 2 ? NAN : -INFINITY;
			gpu_free(k->g, dx);
			dx = dput(k, x, (size_t)n * 4);
		}
		gchk(k, gpu_draw(k->g, dx, n, temp, top_p, min_p,
		    sample_uniform(p.seed, 5, pos, SAMPLE_STREAM_TOKEN), dI, sc));
		dget(k, &got, dI, 4);
		want = sample_next(s, x, NULL, 0, 5, pos);
		if (k->brk && pos == 0)
			got ^= 1;
		bad += got != want;
	}
	snprintf(shape, sizeof shape, "%lld temp=%g top-p=%g min-p=%g x%d", (long long)n,
	    (double)temp, (double)top_p, (double)min_p, npos + 1);
	report(k, "draw", shape, bad, bad == 0);
	sample_free(s);
	free(x);
	gpu_free(k->g, dx), gpu_free(k->g, sc), gpu_free(k->g, dI);
}

/*
 * gpu_penalize against the definition (lib/sample.h: a token of the window
 * seen c times, l -> (l > 0 ? l / r : l * r) - (presence + frequency * c))
 * on a row with positive, negative, zero and non-finite logits among the
 * penalized ones, bit for bit; then the picks after it: the argmax at
 * temperature 0 and gpu_draw at 0.8 (top-p 0.9) on the penalized row
 * against sample_next with the history, at every position tried.
 */
void
check_penalize(struct kc *k, int64_t n, int nhist, int window, float rep, float pres, float freq)
{
	float *x = frand(k, n, -8, 8), *want = xmalloc((size_t)n * 4), *got = xmalloc((size_t)n * 4);
	int32_t *hist = xmalloc((size_t)nhist * 4), *pen = xmalloc((size_t)nhist * 8), id, wid;
	void *sc = dput(k, NULL, gpu_draw_scratch());
	int32_t *dI = (int32_t *)dput(k, NULL, 4), *dp;
	struct sample_params p;
	struct sampler *s;
	char shape[96], err[UTIL_ERRLEN];
	double bad = 0;
	int np, badpick = 0;

	for (int i = 0; i < nhist; i++)		/* repeats: ids from a small range */
		hist[i] = (int32_t)(rnd(k) % (uint64_t)(i % 3 ? 40 : n));
	x[hist[nhist - 1]] = 0.0f, x[hist[nhist - 2]] = -0.0f;
	x[hist[nhist - 3]] = NAN, x[hist[nhist - 4]] = -INFINITY, x[hist[nhist - 5]] = 9.75f;
	sample_defaults(&p);
	p.repeat_penalty = rep, p.presence_penalty = pres, p.frequency_penalty = freq;
	p.penalty_last_n = window, p.seed = rnd(k);
	if ((s = sample_new(&p, (int)n, err)) == NULL)
		die(1, "penalize: %s", err);
	np = sample_window(s, hist, nhist, pen, pen + nhist);	/* tokens, then counts */
	memcpy(want, x, (size_t)n * 4);
	for (int i = 0; i < np; i++) {		/* the definition */
		float l = want[pen[i]], c = (float)pen[nhist + i];
		volatile float pr = freq * c;	/* (no contraction into the add) */
		want[pen[i]] = (l > 0 ? l / rep : l * rep) - (pres + pr);
	}
	float *dx = dput(k, x, (size_t)n * 4);
	dp = (int32_t *)dput(k, pen, (size_t)nhist * 8);
	gchk(k, gpu_penalize(k->g, dx, dp, dp + nhist, np, rep, pres, freq));
	dget(k, got, dx, (size_t)n * 4);
	if (k->brk)
		got[pen[0]] += 1.0f;
	for (int64_t i = 0; i < n; i++)	/* the same bits (any NaN for a NaN) */
		bad += !(isnan(got[i]) && isnan(want[i])) && memcmp(&got[i], &want[i], 4) != 0;
	snprintf(shape, sizeof shape, "%lld window %d of %d (%d tokens) r=%g p=%g f=%g",
	    (long long)n, window, nhist, np, (double)rep, (double)pres, (double)freq);
	report(k, "penalize", shape, bad, bad == 0);
	gchk(k, gpu_argmax(k->g, dx, 1, n, dI));	/* temperature 0 with the penalties */
	dget(k, &id, dI, 4);
	badpick += id != sample_next(s, x, hist, nhist, 3, 0);
	sample_free(s);
	p.temp = 0.8f, p.top_p = 0.9f;
	if ((s = sample_new(&p, (int)n, err)) == NULL)
		die(1, "penalize: %s", err);
	for (int pos = 0; pos < 16; pos++) {
		gchk(k, gpu_draw(k->g, dx, n, p.temp, p.top_p, p.min_p,
		    sample_uniform(p.seed, 3, pos, SAMPLE_STREAM_TOKEN), dI, sc));
		dget(k, &id, dI, 4);
		wid = sample_next(s, x, hist, nhist, 3, pos);
		if (k->brk && pos == 0)
			id ^= 1;
		badpick += id != wid;
	}
	report(k, "penalized picks", shape, badpick, badpick == 0);
	sample_free(s);
	free(x), free(want), free(got), free(hist), free(pen);
	gpu_free(k->g, dx), gpu_free(k->g, dp), gpu_free(k->g, sc), gpu_free(k->g, dI);
}

#endif	/* MEMRA_HAVE_CUDA */
