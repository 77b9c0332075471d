/*
 * The CPU backend against naive double-precision references, plus the
 * exactness contract: batch invariance and thread-count invariance, bit
 * for bit, and the chunked delta rule against the recurrent one.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"
#include "backend_cpu.h"
#include "backend_impl.h"	/* an ops table without one optional op */
#include "fexp.h"
#include "quant.h"
#include "sample.h"
#include "test.h"
#include "util.h"
#include "vision.h"

static struct backend *be1, *be3, *bes;	/* 1 thread, 3 threads, portable path */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static float
frand(void)	/* uniform in [-1, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *
rnd(size_t n, float scale)
{
	float *p = malloc(n * sizeof *p);

	for (size_t i = 0; i < n; i++)
		p[i] = frand() * scale;
	return p;
}

static float *
dup(const float *x, size_t n)
{
	float *p = malloc(n * sizeof *p);

	memcpy(p, x, n * sizeof *p);
	return p;
}

/* max |a - b| / (1 + |b|) */
static double
maxrel(const float *a, const double *b, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs(a[i] - b[i]) / (1 + fabs(b[i]));
		if (!(d <= m))
			m = d;
	}
	return m;
}

static int
same(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof *a) == 0;
}

static double
dsilu(double x)
{
	return x / (1 + exp(-x));
}

static double
dsigmoid(double x)
{
	return 1 / (1 + exp(-x));
}

/* --- weights of several types, made from floats --- */

struct wbuf {
	void	*data;
	float	*deq;		/* [ne1][ne0] what the weight decodes to */
};

static struct wbuf
make_weight(int type, int ne0, int ne1)
{
	struct wbuf w;
	size_t rs = quant_row_size(type, ne0);
	float *f = rnd((size_t)ne0 * ne1, 0.5f);
	char err[UTIL_ERRLEN];

	w.data = malloc(rs * ne1);
	w.deq = malloc((size_t)ne0 * ne1 * sizeof *w.deq);
	for (int r = 0; r < ne1; r++) {
		char *row = (char *)w.data + rs * r;

		if (quant_quantize_row(type, f + (size_t)r * ne0, row, ne0, err) != 0)
			printf("# quantize %s: %s\n", quant_name(type), err);
		quant_dequantize_row(type, row, w.deq + (size_t)r * ne0, ne0);
	}
	free(f);
	return w;
}

/* What the activation rows become before a dot with a weight of this type:
 * quantized types see x through their ggml vec_dot encoding. */
static float *
act_seen(int type, const float *x, int ne0, int m)
{
	int vt = quant_vec_dot_type(type);
	float *xs = dup(x, (size_t)m * ne0);
	void *q;

	if (type == QUANT_F32 || type == QUANT_F16 || type == QUANT_BF16)
		return xs;
	q = malloc(quant_row_size(vt, ne0));
	for (int r = 0; r < m; r++) {
		quant_quantize_act(type, x + (size_t)r * ne0, q, ne0);
		quant_dequantize_row(vt, q, xs + (size_t)r * ne0, ne0);
	}
	free(q);
	return xs;
}

static void
free_weight(struct wbuf *w)
{
	free(w->data);
	free(w->deq);
}

static void
ref_matmul(const float *W, const float *x, int ne0, int ne1, int m, float scale,
    double *y)
{
	for (int r = 0; r < m; r++)
		for (int j = 0; j < ne1; j++) {
			double s = 0;

			for (int i = 0; i < ne0; i++)
				s += (double)W[(size_t)j * ne0 + i] * x[(size_t)r * ne0 + i];
			y[(size_t)r * ne1 + j] = s * scale;
		}
}

TEST(opens_and_rejects_devices)
{
	char err[UTIL_ERRLEN];

	CHECK(backend_open("tpu", 1, err) == NULL);
	CHECK_EQ_STR(err, "backend: 'tpu': unknown device (cpu, cuda[:N])");
	CHECK(backend_open("cpu:fast", 1, err) == NULL);
	CHECK_EQ_STR(err, "backend: 'cpu:fast': unknown option (cpu, cpu:scalar, cpu:nofuse, cpu:copy)");
	CHECK(backend_open("cpu", -1, err) == NULL);
	CHECK_EQ_INT(backend_threads(be3), 3);
	CHECK_EQ_STR(backend_name(bes), "cpu-scalar");
	CHECK(backend_host(be1));
	backend_close(NULL);
}

/* cpu:copy: a device's weights on the CPU (a test seam): copied at init */
TEST(cpu_copy_holds_weights_as_a_device_does)
{
	char err[UTIL_ERRLEN];
	struct backend *bc = backend_open("cpu:copy", 2, err);
	float w[64], x[32], y0[2], y1[2];
	struct backend_weight bw;

	CHECK(bc != NULL);
	for (int i = 0; i < 64; i++)
		w[i] = (float)(i % 7) - 3.0f;
	for (int i = 0; i < 32; i++)
		x[i] = 0.25f * (float)(i % 5);
	CHECK(backend_weight_init(bc, &bw, QUANT_F32, 32, 2, w, 1) == 0);
	CHECK(bw.data != (const void *)w);
	CHECK(backend_matmul(bc, &bw, x, 32, y0, 2, 1) == 0);
	w[1] = 1000.0f;	/* the caller's bytes after init: not the weight's */
	CHECK(backend_matmul(bc, &bw, x, 32, y1, 2, 1) == 0);
	CHECK(memcmp(y0, y1, sizeof y0) == 0);
	backend_weight_release(bc, &bw);
	CHECK(backend_weight_init(bc, &bw, QUANT_F32, 32, 2, w, 1) == 0);
	CHECK(backend_matmul(bc, &bw, x, 32, y1, 2, 1) == 0);
	CHECK(y1[0] != y0[0] && y1[1] == y0[1]);	/* made again: the new bytes */
	backend_weight_release(bc, &bw);
	/* backend_weight_rows: row 1 replaced in the copy; rows past the weight refused */
	CHECK(backend_weight_init(bc, &bw, QUANT_F32, 32, 2, w, 1) == 0);
	w[33] = -500.0f;	/* (x[1] is not 0) */
	CHECK(backend_matmul(bc, &bw, x, 32, y0, 2, 1) == 0);
	CHECK(backend_weight_rows(bc, &bw, 1, 1, w + 32) == 0);
	CHECK(backend_matmul(bc, &bw, x, 32, y1, 2, 1) == 0);
	CHECK(y1[0] == y0[0] && y1[1] != y0[1]);
	CHECK(backend_weight_rows(bc, &bw, 1, 2, w) == -1);
	CHECK(strstr(backend_errmsg(bc), "weight rows: 2 from 1 of 2") != NULL);
	backend_weight_release(bc, &bw);
	backend_close(bc);
}

TEST(matmul_matches_reference_for_each_type_and_shape)
{
	static const int types[] = {
		QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_0, QUANT_Q4_1,
		QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_NVFP4, QUANT_MXFP4,
	};
	static const int shapes[][3] = {	/* ne0, ne1, m */
		{ 32, 1, 1 }, { 64, 7, 3 }, { 96, 17, 4 }, { 256, 40, 16 }, { 320, 9, 37 },
		{ 512, 13, 2 },
	};
	struct backend *bs[] = { be1, be3, bes };

	for (size_t t = 0; t < sizeof types / sizeof *types; t++)
		for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
			int ne0 = shapes[s][0], ne1 = shapes[s][1], m = shapes[s][2];
			struct wbuf wb;
			float *x, *xs, *y;
			double *ref;
			struct backend_weight w;

			if (quant_row_size(types[t], ne0) == 0)
				continue;	/* not a whole number of blocks */
			wb = make_weight(types[t], ne0, ne1);
			x = rnd((size_t)m * ne0, 1);
			xs = act_seen(types[t], x, ne0, m);
			y = malloc((size_t)m * ne1 * 4);
			ref = malloc((size_t)m * ne1 * sizeof *ref);
			ref_matmul(wb.deq, xs, ne0, ne1, m, 0.75f, ref);
			for (size_t b = 0; b < 3; b++) {
				CHECK(backend_weight_init(bs[b], &w, types[t], ne0, ne1, wb.data, 0.75f) == 0);
				CHECK(backend_matmul(bs[b], &w, x, ne0, y, ne1, m) == 0);
				/* Q8_1 activations (Q4_1) carry their block sums in f16:
				 * the dot differs from dequantize-then-dot by that rounding */
				double tol = types[t] == QUANT_Q4_1 ? 5e-3 : 1e-5;

				if (maxrel(y, ref, (size_t)m * ne1) > tol)
					FAILF("%s %dx%d m=%d on %s: maxrel %g", quant_name(types[t]),
					    ne1, ne0, m, backend_name(bs[b]), maxrel(y, ref, (size_t)m * ne1));
				backend_weight_release(bs[b], &w);
			}
			free_weight(&wb);
			free(x), free(xs), free(y), free(ref);
		}
}

static void
batch_invariance(int type, int ne0, int ne1, int m)
{
	struct wbuf wb = make_weight(type, ne0, ne1);
	float *x = rnd((size_t)m * ne0, 1);
	float *ym = malloc((size_t)m * ne1 * 4), *y1 = malloc(ne1 * 4), *y3 = malloc((size_t)m * ne1 * 4);
	struct backend_weight w, w3;

	CHECK(backend_weight_init(be1, &w, type, ne0, ne1, wb.data, 1) == 0);
	CHECK(backend_weight_init(be3, &w3, type, ne0, ne1, wb.data, 1) == 0);
	for (int mm = 1; mm <= m; mm += (mm < 16 ? 1 : 23)) {
		CHECK(backend_matmul(be1, &w, x, ne0, ym, ne1, mm) == 0);
		CHECK(backend_matmul(be3, &w3, x, ne0, y3, ne1, mm) == 0);
		CHECK(same(ym, y3, (size_t)mm * ne1));
		for (int r = 0; r < mm; r++) {
			CHECK(backend_matmul(be1, &w, x + r * ne0, ne0, y1, ne1, 1) == 0);
			if (!same(y1, ym + r * ne1, ne1))
				FAILF("%s: row %d of an %d-row product differs from the row alone",
				    quant_name(type), r, mm);
		}
	}
	backend_weight_release(be1, &w);
	backend_weight_release(be3, &w3);
	free_weight(&wb);
	free(x), free(ym), free(y1), free(y3);
}

/* m = 1..16, then 39: every group and tail of the multi-row and packed kernels. */
TEST(matmul_rows_are_batch_and_thread_invariant)
{
	static const int types[] = {
		QUANT_Q4_1, QUANT_Q8_0, QUANT_Q4_0, QUANT_Q5_0, QUANT_Q5_1, QUANT_IQ4_NL,
		QUANT_MXFP4, QUANT_Q5_K, QUANT_Q6_K, QUANT_IQ4_XS, QUANT_F16, QUANT_F32,
	};

	batch_invariance(QUANT_BF16, 200, 75, 40);
	batch_invariance(QUANT_Q4_K, 512, 75, 40);
	batch_invariance(QUANT_NVFP4, 320, 33, 17);
	for (size_t t = 0; t < sizeof types / sizeof *types; t++)
		batch_invariance(types[t], quant_traits(types[t])->blck >= 256 ? 768 : 576, 29, 40);
}

/* The fused gate/up product (silu(x.g) * x.u) of m rows: each row's bits alone. */
TEST(matmul_swiglu_rows_are_batch_invariant)
{
	static const int types[] = { QUANT_Q4_1, QUANT_Q8_0, QUANT_Q4_K, QUANT_BF16 };
	int n = 576, nff = 37, m = 19;

	for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
		int ty = types[t], n0 = quant_traits(ty)->blck >= 256 ? 768 : n;
		struct wbuf g = make_weight(ty, n0, nff), u = make_weight(ty, n0, nff);
		float *x = rnd((size_t)m * n0, 2), *ym = malloc((size_t)m * nff * 4), *y1 = malloc(nff * 4);
		struct backend_weight wg, wu;

		CHECK(backend_weight_init(be3, &wg, ty, n0, nff, g.data, 1) == 0);
		CHECK(backend_weight_init(be3, &wu, ty, n0, nff, u.data, 0.5f) == 0);
		for (int mm = 1; mm <= m; mm++) {
			CHECK(backend_matmul_swiglu(be3, &wg, &wu, x, mm, ym) == 0);
			for (int r = 0; r < mm; r++) {
				CHECK(backend_matmul_swiglu(be3, &wg, &wu, x + (size_t)r * n0, 1, y1) == 0);
				if (!same(y1, ym + (size_t)r * nff, nff))
					FAILF("%s: row %d of a %d-row swiglu product differs from the row alone",
					    quant_name(ty), r, mm);
			}
		}
		backend_weight_release(be3, &wg);
		backend_weight_release(be3, &wu);
		free_weight(&g), free_weight(&u);
		free(x), free(ym), free(y1);
	}
}

/*
 * The norm fused into several quantized products (q, k, v of one type,
 * then another type): the rows quantized and packed once serve each
 * product of their type, the same bits as each product alone.
 */
TEST(rmsnorm_matmul_shares_quantized_rows_bit_for_bit)
{
	static const int types[] = { QUANT_Q4_1, QUANT_Q4_1, QUANT_Q8_0, QUANT_Q8_0, QUANT_Q4_1 };
	int n = 576, ne1[] = { 40, 16, 24, 9, 33 }, m = 11;
	float *x = rnd((size_t)m * n, 2), *nw = rnd(n, 1), *t = malloc((size_t)m * n * 4);
	struct wbuf wb[5];
	struct backend_weight w[5];
	const struct backend_weight *W[5];
	float *Y[5], *y1 = malloc((size_t)m * 40 * 4);

	for (int i = 0; i < 5; i++) {
		wb[i] = make_weight(types[i], n, ne1[i]);
		CHECK(backend_weight_init(be3, &w[i], types[i], n, ne1[i], wb[i].data, 1) == 0);
		W[i] = &w[i], Y[i] = malloc((size_t)m * ne1[i] * 4);
	}
	for (int mm = 1; mm <= m; mm += 5) {
		CHECK(backend_rmsnorm_matmul(be3, x, mm, n, nw, 1e-5f, 5, W, Y) == 0);
		CHECK(backend_rmsnorm(be3, x, n, nw, t, n, mm, n, 1e-5f) == 0);
		for (int i = 0; i < 5; i++) {
			CHECK(backend_matmul(be1, &w[i], t, n, y1, ne1[i], mm) == 0);
			if (!same(y1, Y[i], (size_t)mm * ne1[i]))
				FAILF("%d rows: product %d (%s) differs from its own", mm, i,
				    quant_name(types[i]));
		}
	}
	for (int i = 0; i < 5; i++) {
		backend_weight_release(be3, &w[i]);
		free_weight(&wb[i]);
		free(Y[i]);
	}
	free(x), free(nw), free(t), free(y1);
}

TEST(fused_products_equal_their_parts_bit_for_bit)
{
	int n = 96, nff = 50, m = 5;
	struct wbuf g = make_weight(QUANT_F16, n, nff), u = make_weight(QUANT_F32, n, nff);
	float *x = rnd((size_t)m * n, 2), *nw = rnd(n, 1), *t = malloc((size_t)m * n * 4);
	float *a = malloc((size_t)m * nff * 4), *b = malloc((size_t)m * nff * 4);
	float *c = malloc((size_t)m * nff * 4), *d = malloc((size_t)m * nff * 4);
	struct backend_weight wg, wu;
	const struct backend_weight *W[2] = { &wg, &wu };
	float *Y[2] = { c, d };

	CHECK(backend_weight_init(be3, &wg, QUANT_F16, n, nff, g.data, 1) == 0);
	CHECK(backend_weight_init(be3, &wu, QUANT_F32, n, nff, u.data, 1) == 0);
	CHECK(backend_matmul_swiglu(be3, &wg, &wu, x, m, a) == 0);
	CHECK(backend_matmul(be3, &wg, x, n, b, nff, m) == 0);
	CHECK(backend_matmul(be3, &wu, x, n, c, nff, m) == 0);
	CHECK(backend_swiglu(be3, b, c, b, (size_t)m * nff) == 0);
	CHECK(same(a, b, (size_t)m * nff));

	CHECK(backend_rmsnorm(be3, x, n, nw, t, n, m, n, 1e-6f) == 0);
	CHECK(backend_matmul(be3, &wg, t, n, a, nff, m) == 0);
	CHECK(backend_matmul(be3, &wu, t, n, b, nff, m) == 0);
	CHECK(backend_rmsnorm_matmul(be3, x, m, n, nw, 1e-6f, 2, W, Y) == 0);
	CHECK(same(a, c, (size_t)m * nff));
	CHECK(same(b, d, (size_t)m * nff));
	{	/* the compositions backend.c makes for a backend without the fusions */
		char err[UTIL_ERRLEN];
		struct backend *nf = backend_open("cpu:nofuse", 2, err);
		struct backend_weight ng, nu;
		const struct backend_weight *NW[2] = { &ng, &nu };
		float *e = malloc((size_t)m * nff * 4), *f = malloc((size_t)m * nff * 4);
		float *NY[2] = { e, f };

		CHECK(nf != NULL);
		CHECK(backend_weight_init(nf, &ng, QUANT_F16, n, nff, g.data, 1) == 0);
		CHECK(backend_weight_init(nf, &nu, QUANT_F32, n, nff, u.data, 1) == 0);
		CHECK(backend_rmsnorm_matmul(nf, x, m, n, nw, 1e-6f, 2, NW, NY) == 0);
		CHECK(same(e, c, (size_t)m * nff));
		CHECK(same(f, d, (size_t)m * nff));
		CHECK(backend_matmul_swiglu(be3, &wg, &wu, x, m, a) == 0);
		CHECK(backend_matmul_swiglu(nf, &ng, &nu, x, m, e) == 0);
		CHECK(same(a, e, (size_t)m * nff));
		/* one type for both: the single-pass kernel */
		CHECK(backend_matmul_swiglu(be3, &wg, &wg, x, m, a) == 0);
		CHECK(backend_matmul_swiglu(nf, &ng, &ng, x, m, e) == 0);
		CHECK(same(a, e, (size_t)m * nff));
		backend_weight_release(nf, &ng);
		backend_weight_release(nf, &nu);
		backend_close(nf);
		free(e), free(f);
	}
	backend_weight_release(be3, &wg);
	backend_weight_release(be3, &wu);
	free_weight(&g), free_weight(&u);
	free(x), free(nw), free(t), free(a), free(b), free(c), free(d);
}

/*
 * The fused forms against the plain ops they name, bit for bit, on
 * shapes of one head and several, one row and several, and the types the
 * models use (the int8 path, NVFP4 with a scale, a float type).
 */
static void
fused_forms(int type, int m, int nh, int hd, int nff, float scale)
{
	int n = nh * hd;
	struct wbuf wa = make_weight(type, n, nff), wb = make_weight(type, n, nff);
	struct wbuf wd = make_weight(type, nff, n);
	struct backend_weight A, B, D;
	const struct backend_weight *W[2] = { &A, &B };
	float *x = rnd((size_t)m * n, 2), *t = rnd((size_t)m * n, 1), *nw = rnd(n, 1);
	float *hw = rnd(hd, 1), *z = rnd((size_t)m * n, 3), *gt = rnd((size_t)m * nh * 2 * hd, 4);
	float *x1 = dup(x, (size_t)m * n), *x2 = dup(x, (size_t)m * n);
	float *g1 = rnd((size_t)m * nff, 3), *u = rnd((size_t)m * nff, 2);
	float *g2 = dup(g1, (size_t)m * nff);
	float *a1 = malloc((size_t)m * nff * 4), *b1 = malloc((size_t)m * nff * 4);
	float *a2 = malloc((size_t)m * nff * 4), *b2 = malloc((size_t)m * nff * 4);
	float *y1 = malloc((size_t)m * n * 4), *y2 = malloc((size_t)m * n * 4);
	float *Y1[2] = { a1, b1 }, *Y2[2] = { a2, b2 };

	CHECK(backend_weight_init(be3, &A, type, n, nff, wa.data, scale) == 0);
	CHECK(backend_weight_init(be3, &B, type, n, nff, wb.data, 1) == 0);
	CHECK(backend_weight_init(be3, &D, type, nff, n, wd.data, scale) == 0);
	/* add + norm + products */
	CHECK(backend_add_rmsnorm_matmul(be3, x1, t, m, n, nw, 1e-6f, 2, W, Y1) == 0);
	CHECK(backend_add(be3, x2, t, (size_t)m * n) == 0);
	CHECK(backend_rmsnorm_matmul(be3, x2, m, n, nw, 1e-6f, 2, W, Y2) == 0);
	CHECK(same(x1, x2, (size_t)m * n));
	CHECK(same(a1, a2, (size_t)m * nff) && same(b1, b2, (size_t)m * nff));
	/* no residual: the norm and products alone, x untouched */
	CHECK(backend_add_rmsnorm_matmul(be3, x1, NULL, m, n, nw, 1e-6f, 1, W, Y1) == 0);
	CHECK(same(x1, x2, (size_t)m * n) && same(a1, a2, (size_t)m * nff));
	/* the norm closing a block, its add (a layer scalar too), the next norm and products */
	{
		float *wr = rnd(n, 5), *xa = dup(x, (size_t)m * n), *xb = dup(x, (size_t)m * n);
		float *ta = dup(t, (size_t)m * n), *tb = dup(t, (size_t)m * n);

		CHECK(backend_norm_residual_matmul(be3, xa, ta, wr, 0.5f, m, n, nw, 1e-6f, 2, W,
		    Y1) == 0);
		CHECK(backend_norm_residual(be3, xb, tb, wr, NULL, NULL, NULL, 1e-6f, 0.5f, m, n) == 0);
		CHECK(backend_rmsnorm_matmul(be3, xb, m, n, nw, 1e-6f, 2, W, Y2) == 0);
		CHECK(same(xa, xb, (size_t)m * n));
		CHECK(same(a1, a2, (size_t)m * nff) && same(b1, b2, (size_t)m * nff));
		free(wr), free(xa), free(xb), free(ta), free(tb);
	}
	/* the FFN block: add, norm, gate/up/SwiGLU, down; y may be t */
	{
		float *xa = dup(x, (size_t)m * n), *xb = dup(x, (size_t)m * n);
		float *xc = dup(x, (size_t)m * n), *tc = dup(t, (size_t)m * n);
		float *f1 = malloc((size_t)m * nff * 4), *f2 = malloc((size_t)m * nff * 4);
		float *us = malloc((size_t)m * nff * 4);

		CHECK(backend_ffn(be3, xa, t, m, n, nw, 1e-6f, &A, &B, &D, f1, us, y1) == 0);
		CHECK(backend_add(be3, xb, t, (size_t)m * n) == 0);
		CHECK(backend_rmsnorm(be3, xb, n, nw, y2, n, m, n, 1e-6f) == 0);
		CHECK(backend_matmul_swiglu(be3, &A, &B, y2, m, f2) == 0);
		CHECK(backend_matmul(be3, &D, f2, nff, y2, n, m) == 0);
		CHECK(same(xa, xb, (size_t)m * n) && same(f1, f2, (size_t)m * nff));
		CHECK(same(y1, y2, (size_t)m * n));
		CHECK(backend_ffn(be3, xc, tc, m, n, nw, 1e-6f, &A, &B, &D, f2, us, tc) == 0);
		CHECK(same(xc, xa, (size_t)m * n) && same(tc, y1, (size_t)m * n));
		free(xa), free(xb), free(xc), free(tc), free(f1), free(f2), free(us);
	}
	/* gated per-head norm + product (W: rows of nff, so the weight is B^T shaped: D) */
	CHECK(backend_rmsnorm_gated_matmul(be3, g1, u, nw, m, 1, nff, 1e-6f, &D, y1) == 0);
	CHECK(backend_rmsnorm_gated(be3, g2, u, nw, g2, m, nff, 1e-6f) == 0);
	CHECK(backend_matmul(be3, &D, g2, nff, y2, n, m) == 0);
	CHECK(same(g1, g2, (size_t)m * nff) && same(y1, y2, (size_t)m * n));
	CHECK(backend_rmsnorm_gated_matmul(be3, x1, z, hw, m, nh, hd, 1e-6f, &A, a1) == 0);
	CHECK(backend_rmsnorm_gated(be3, x2, z, hw, x2, m * nh, hd, 1e-6f) == 0);
	CHECK(backend_matmul(be3, &A, x2, n, a2, nff, m) == 0);
	CHECK(same(x1, x2, (size_t)m * n) && same(a1, a2, (size_t)m * nff));
	/* sigmoid gate (the second half of each head's 2 hd) + product */
	CHECK(backend_mul_sigmoid_matmul(be3, x1, gt + hd, 2 * hd, m, nh, hd, &A, a1) == 0);
	CHECK(backend_mul_sigmoid(be3, x2, hd, gt + hd, 2 * hd, m * nh, hd) == 0);
	CHECK(backend_matmul(be3, &A, x2, n, a2, nff, m) == 0);
	CHECK(same(x1, x2, (size_t)m * n) && same(a1, a2, (size_t)m * nff));
	backend_weight_release(be3, &A);
	backend_weight_release(be3, &B);
	backend_weight_release(be3, &D);
	free_weight(&wa), free_weight(&wb), free_weight(&wd);
	free(x), free(t), free(nw), free(hw), free(z), free(gt), free(x1), free(x2);
	free(g1), free(g2), free(u), free(a1), free(b1), free(a2), free(b2), free(y1), free(y2);
}

TEST(fused_forms_equal_the_ops_they_name_bit_for_bit)
{
	struct backend_weight w;
	struct wbuf wb = make_weight(QUANT_Q8_0, 64, 8);
	float x[128] = { 0 }, y[16];

	fused_forms(QUANT_Q8_0, 1, 4, 64, 96, 1);
	fused_forms(QUANT_Q8_0, 5, 2, 128, 64, 1);
	fused_forms(QUANT_NVFP4, 3, 2, 64, 128, 0.5f);
	fused_forms(QUANT_F16, 2, 3, 32, 40, 1);
	fused_forms(QUANT_Q4_K, 17, 1, 256, 256, 1);
	/* shapes that do not fit are refused before anything changes */
	CHECK(backend_weight_init(be3, &w, QUANT_Q8_0, 64, 8, wb.data, 1) == 0);
	CHECK(backend_rmsnorm_gated_matmul(be3, x, x, x, 1, 3, 32, 1e-6f, &w, y) == -1);
	CHECK(strstr(backend_errmsg(be3), "3 heads of 32") != NULL);
	CHECK(backend_mul_sigmoid_matmul(be3, x, x, 16, 1, 2, 32, &w, y) == -1);
	CHECK(backend_ffn(be3, x, NULL, 1, 64, x, 1e-6f, &w, &w, &w, y, y, y) == -1);
	CHECK(strstr(backend_errmsg(be3), "ffn: gate 8 x 64") != NULL);
	x[0] = 1;
	CHECK(backend_add_rmsnorm_matmul(be3, x, x + 64, 1, 32, NULL, 1e-6f, 1,
	    (const struct backend_weight *[]){ &w }, (float *[]){ y }) == -1);
	CHECK(x[0] == 1);
	backend_weight_release(be3, &w);
	free_weight(&wb);
}

TEST(embed_decodes_rows)
{
	struct wbuf wb = make_weight(QUANT_Q8_0, 64, 10);
	struct backend_weight w;
	int32_t ids[3] = { 9, 0, 9 }, bad = 10;
	float y[3 * 70];
	char err[UTIL_ERRLEN];

	CHECK(backend_weight_init(be3, &w, QUANT_Q8_0, 64, 10, wb.data, 1) == 0);
	CHECK(backend_embed(be3, &w, ids, 3, y, 70) == 0);
	CHECK(same(y, wb.deq + 9 * 64, 64));
	CHECK(same(y + 70, wb.deq, 64));
	CHECK(same(y + 140, wb.deq + 9 * 64, 64));
	CHECK(backend_embed(be3, &w, &bad, 1, y, 70) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "embed: token 10 outside [0, 10)");
	backend_weight_release(be3, &w);
	CHECK(backend_weight_init(be3, &w, QUANT_Q8_0, 40, 10, wb.data, 1) == -1);
	snprintf(err, sizeof err, "%s", backend_errmsg(be3));
	CHECK_EQ_STR(err, "weight: row length 40 is not a multiple of the 'Q8_0' block size");
	free_weight(&wb);
}

TEST(norms_and_elementwise_ops_match_reference)
{
	int rows = 7, n = 37, ld = 41;
	float *x = rnd((size_t)rows * ld, 3), *z = rnd((size_t)rows * n, 3), *w = rnd(n, 1);
	float *y = malloc((size_t)rows * ld * 4), *e = dup(x, (size_t)rows * n);
	double *ref = malloc((size_t)rows * ld * sizeof *ref), *rg = malloc((size_t)rows * n * sizeof *rg);

	for (int r = 0; r < rows; r++) {
		double ss = 0;

		for (int i = 0; i < n; i++)
			ss += (double)x[r * ld + i] * x[r * ld + i];
		ss = 1 / sqrt(ss / n + 1e-5);
		for (int i = 0; i < n; i++) {
			ref[r * ld + i] = x[r * ld + i] * ss * w[i];
			rg[r * n + i] = x[r * ld + i] * ss * w[i] * dsilu(z[r * n + i]);
		}
	}
	CHECK(backend_rmsnorm(be3, x, ld, w, y, ld, rows, n, 1e-5f) == 0);
	for (int r = 0; r < rows; r++)
		CHECK(maxrel(y + r * ld, ref + r * ld, n) < 1e-6);
	for (int r = 0; r < rows; r++)
		memcpy(y + r * n, x + r * ld, n * 4);
	CHECK(backend_rmsnorm_gated(be3, y, z, w, y, rows, n, 1e-5f) == 0);
	CHECK(maxrel(y, rg, (size_t)rows * n) < 1e-6);

	/* l2norm, then the activations and adds on e */
	CHECK(backend_l2norm(be3, x, ld, rows, n, 1e-6f) == 0);
	for (int r = 0; r < rows; r++) {
		double ss = 0;

		for (int i = 0; i < n; i++)
			ss += (double)x[r * ld + i] * x[r * ld + i];
		CHECK_NEAR(ss, 1.0, 1e-5);
	}
	for (int a = 0; a < 3; a++) {
		float *v = dup(e, (size_t)rows * n);

		CHECK(backend_act(be3, (enum backend_act)a, v, (size_t)rows * n) == 0);
		for (int i = 0; i < rows * n; i++) {
			double t = e[i], want = a == BACKEND_ACT_SILU ? dsilu(t) :
			    a == BACKEND_ACT_SIGMOID ? dsigmoid(t) : log1p(exp(t));
			CHECK_NEAR(v[i], want, 1e-6 * (1 + fabs(want)));
		}
		free(v);
	}
	CHECK(backend_act(be3, (enum backend_act)9, e, 1) == -1);
	memcpy(y, e, (size_t)rows * n * 4);
	CHECK(backend_add(be3, y, z, (size_t)rows * n) == 0);
	CHECK(y[5] == e[5] + z[5]);
	memcpy(y, e, (size_t)rows * n * 4);
	CHECK(backend_mul_sigmoid(be3, y, n, z, n, rows, n) == 0);
	CHECK_NEAR(y[11], e[11] * dsigmoid(z[11]), 1e-6);
	CHECK(backend_rmsnorm(be3, x, 3, w, y, ld, rows, n, 1e-5f) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "rmsnorm: row stride 3 < row length 37");
	free(x), free(z), free(w), free(y), free(e), free(ref), free(rg);
}

TEST(argmax_takes_the_lowest_index_on_ties)
{
	float x[3][5] = { { 1, 3, 3, -1, 2 }, { -5, -4, -4, -4.5f, -9 }, { -0.0f, 0, -1, -0.0f, -2 } };
	int32_t out[3];

	CHECK(backend_argmax(be3, &x[0][0], 5, 3, 5, out) == 0);
	CHECK_EQ_INT(out[0], 1);
	CHECK_EQ_INT(out[1], 1);
	CHECK_EQ_INT(out[2], 0);	/* -0 ties +0 */
}

TEST(argmax_picks_as_the_greedy_sampler_does)
{
	float x[4][6] = {
		{ NAN, 2, INFINITY, 5, 5, -INFINITY },	/* +inf and NaN never win */
		{ -INFINITY, NAN, INFINITY, -INFINITY, NAN, INFINITY },	/* none finite */
		{ -INFINITY, -INFINITY, -3e38f, NAN, -3e38f, 1e-45f },
		{ 7, NAN, 7, 7, 6, 7 },
	};
	int32_t out[4], want[4] = { 3, -1, 5, 0 };
	struct sample_params p;
	struct sampler *s;
	char err[UTIL_ERRLEN];

	sample_defaults(&p);
	CHECK((s = sample_new(&p, 6, err)) != NULL);
	CHECK(backend_argmax(be3, &x[0][0], 6, 4, 6, out) == 0);
	for (int r = 0; r < 4; r++) {
		CHECK_EQ_INT(out[r], want[r]);
		CHECK_EQ_INT(out[r], sample_next(s, x[r], NULL, 0, 0, 0));
	}
	sample_free(s);
}

/* backend_draw makes sample_next's draw; backend_penalize applies the
 * listed tokens' penalties and refuses a token outside the row or a
 * sampler that needs more than the row. */
TEST(draw_and_penalties_are_the_samplers)
{
	float x[6] = { 1.5f, -2, 0.25f, 3, -0.0f, 2.75f }, y[6];
	const int32_t tok[3] = { 3, 1, 4 }, cnt[3] = { 2, 1, 3 }, bad[1] = { 6 };
	int32_t hist[6] = { 3, 1, 4, 3, 4, 4 }, got;
	struct sample_params p;
	struct sampler *s;
	char err[UTIL_ERRLEN];

	sample_defaults(&p);
	p.temp = 0.9f, p.top_p = 0.9f, p.seed = 3;
	CHECK((s = sample_new(&p, 6, err)) != NULL);
	for (int pos = 0; pos < 20; pos++) {
		CHECK(backend_draw(be3, x, s, 2, pos, &got) == 0);
		CHECK_EQ_INT(got, sample_next(s, x, NULL, 0, 2, pos));
	}
	sample_free(s);
	memcpy(y, x, sizeof x);
	CHECK(backend_penalize(be3, y, 6, tok, cnt, 3, 1.5f, 0.5f, 0.25f) == 0);
	CHECK(y[3] == 3 / 1.5f - (0.5f + 0.25f * 2));
	CHECK(y[1] == -2 * 1.5f - (0.5f + 0.25f));
	CHECK(y[4] == -0.0f * 1.5f - (0.5f + 0.25f * 3));
	CHECK(y[0] == x[0] && y[2] == x[2] && y[5] == x[5]);
	p.repeat_penalty = 1.5f, p.presence_penalty = 0.5f, p.frequency_penalty = 0.25f;
	CHECK((s = sample_new(&p, 6, err)) != NULL);
	for (int pos = 0; pos < 20; pos++) {	/* the row penalized, then drawn */
		CHECK(backend_draw(be3, y, s, 2, pos, &got) == 0);
		CHECK_EQ_INT(got, sample_next(s, x, hist, 6, 2, pos));
	}
	CHECK(backend_penalize(be3, y, 6, bad, cnt, 1, 1.5f, 0, 0) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "penalize: token 6 of a row of 6");
	sample_free(s);
	p.top_k = 3;
	CHECK((s = sample_new(&p, 6, err)) != NULL);
	CHECK(backend_draw(be3, x, s, 2, 0, &got) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "draw: the sampler needs more than the row");
	sample_free(s);
}

/* backend_mask sets -inf where a bit is 0 and keeps every other value's
 * bits (NaN, -0, inf among them), in whole and partial words. */
TEST(mask_sets_minus_inf_where_a_bit_is_0_and_keeps_the_rest)
{
	enum { N = 77 };
	static const uint32_t pat[][3] = {
		{ 0, 0, 0 }, { 0xffffffffu, 0xffffffffu, 0xffffffffu },
		{ 0, 1u << 7, 0 }, { 0x5555aaaau, 0x0f0f0f0fu, 0x1fffu }, { 0, 0, 1u << 12 },
	};
	float x[N], y[N];
	uint32_t u;

	for (int i = 0; i < N; i++)
		x[i] = (float)(i * 37 % 11) - 5.25f;
	x[3] = NAN, x[40] = -0.0f, x[41] = INFINITY, x[70] = -INFINITY;
	for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
		memcpy(y, x, sizeof x);
		CHECK(backend_mask(be3, y, N, pat[p]) == 0);
		for (int t = 0; t < N; t++) {
			int on = pat[p][t / 32] >> (t % 32) & 1;
			uint32_t a, b;

			memcpy(&a, &y[t], 4), memcpy(&b, &x[t], 4);
			if (on ? a != b : !(isinf(y[t]) && y[t] < 0))
				FAILF("pattern %zu, token %d: bit %d, %g from %g", p, t, on, y[t], x[t]);
		}
	}
	CHECK(backend_has_mask(be3) && backend_has_mask(bes));
	u = 0;
	CHECK(backend_mask(be3, y, 0, &u) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "mask: bad shape 1 x 0");
}

/* backend_dconv on a hand-worked block: 2 rows of 4 channels in groups of 2, 2 taps, the
 * row before the first reading zero, the coefficients of the other side not read; the
 * output may not overlap the input. */
TEST(dconv_is_dflash2s_grouped_dynamic_causal_convolution)
{
	static const float x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, base[8] = { 1, 1, 1, 1, 2, 2, 2, 2 };
	/* row t: side 0's [tap][group], then side 1's (NaN: never read) */
	static const float dyn[16] = { 10, 20, 30, 40, NAN, NAN, NAN, NAN,
	    100, 200, 300, 400, NAN, NAN, NAN, NAN };
	static const float want[8] = { 11, 22, 63, 84, 807, 1210, 2613, 3216 };
	float y[8], z[8];

	CHECK(backend_has_dconv(be3));
	CHECK(backend_dconv(be3, x, 2, 4, dyn, 8, 2, 2, base, y) == 0);
	for (int i = 0; i < 8; i++)
		CHECK(y[i] == want[i]);
	CHECK(backend_dconv(bes, x + 4, 1, 4, dyn + 8, 8, 2, 2, base, z) == 0);
	for (int i = 0; i < 4; i++)	/* one row alone: its first tap only */
		CHECK(z[i] == (1 + dyn[8 + i / 2]) * x[4 + i]);
	memcpy(y, x, sizeof y);
	CHECK(backend_dconv(be3, y, 2, 4, dyn, 8, 2, 2, base, y + 4) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "dconv: output overlaps input");
	CHECK(backend_dconv(be3, x, 2, 4, dyn, 3, 2, 2, base, y) == -1);
}

TEST(rope_rotates_the_first_n_rot_dims_neox_style)
{
	int m = 3, nh = 2, hs = 24, nrot = 8, ldx = nh * hs;
	int32_t pos[3] = { 0, 5, 1000 };
	float *x = rnd((size_t)m * ldx, 1), *y = dup(x, (size_t)m * ldx);

	CHECK(backend_rope(be3, y, ldx, nh, hs, m, pos, nrot, 1e6f, BACKEND_ROPE_NEOX) == 0);
	for (int r = 0; r < m; r++)
		for (int h = 0; h < nh; h++) {
			const float *a = x + r * ldx + h * hs;
			const float *b = y + r * ldx + h * hs;

			for (int d = 0; d < nrot / 2; d++) {
				double th = pos[r] * pow(1e6, -2.0 * d / nrot);
				double c = cos(th), s = sin(th);

				CHECK_NEAR(b[d], a[d] * c - a[d + 4] * s, 2e-4);
				CHECK_NEAR(b[d + 4], a[d] * s + a[d + 4] * c, 2e-4);
			}
			CHECK(same(a + nrot, b + nrot, hs - nrot));	/* untouched past n_rot */
		}
	CHECK(backend_rope(be3, y, ldx, nh, hs, m, pos, 7, 1e6f, BACKEND_ROPE_NEOX) == -1);
	free(x), free(y);
}

TEST(rope_norm_mode_rotates_adjacent_pairs)
{
	int m = 2, nh = 3, hs = 16, nrot = 16, ldx = nh * hs;
	int32_t pos[2] = { 3, 77 };
	float *x = rnd((size_t)m * ldx, 1), *y = dup(x, (size_t)m * ldx);

	CHECK(backend_rope(be3, y, ldx, nh, hs, m, pos, nrot, 1e4f, BACKEND_ROPE_NORM) == 0);
	for (int r = 0; r < m; r++)
		for (int h = 0; h < nh; h++)
			for (int d = 0; d < nrot / 2; d++) {
				const float *a = x + r * ldx + h * hs + 2 * d;
				const float *b = y + r * ldx + h * hs + 2 * d;
				double th = pos[r] * pow(1e4, -2.0 * d / nrot);

				CHECK_NEAR(b[0], a[0] * cos(th) - a[1] * sin(th), 2e-5);
				CHECK_NEAR(b[1], a[0] * sin(th) + a[1] * cos(th), 2e-5);
			}
	CHECK(backend_rope(be3, y, ldx, nh, hs, m, pos, nrot, 1e4f, 2) == -1);
	free(x), free(y);
}

/* --- attention --- */

static float
half(double x)
{
	return quant_f16_to_f32(quant_f32_to_f16((float)x));
}

/* with a->kv_f16, q and the normalized softmax weights are rounded to half */
static void
ref_attention(const struct backend_attn *a, const float *q, int ldq, int qhs,
    const float *kc, const float *vc, int m, int p0, double *o)
{
	int hd = a->head_dim, kvd = a->n_kv_head * hd, grp = a->n_head / a->n_kv_head;
	double *s = malloc((p0 + m) * sizeof *s);

	for (int r = 0; r < m; r++)
		for (int h = 0; h < a->n_head; h++) {
			const float *qh = q + r * ldq + h * qhs;
			int n = p0 + r + 1, kh = h / grp;
			double mx = -1e300, sum = 0;

			for (int t = 0; t < n; t++) {
				s[t] = 0;
				for (int d = 0; d < hd; d++)
					s[t] += (double)(a->kv_f16 ? half(qh[d]) : qh[d]) *
					    kc[t * kvd + kh * hd + d];
				s[t] *= a->scale;
				mx = s[t] > mx ? s[t] : mx;
			}
			for (int t = 0; t < n; t++)
				sum += s[t] = exp(s[t] - mx);
			for (int d = 0; d < hd; d++) {
				double acc = 0;

				for (int t = 0; t < n; t++)
					acc += (a->kv_f16 ? half(s[t] / sum) * sum : s[t]) *
					    vc[t * kvd + kh * hd + d];
				o[(r * a->n_head + h) * hd + d] = acc / sum;
			}
		}
	free(s);
}

TEST(attention_matches_reference_and_decode_equals_prefill)
{
	struct backend_attn a = { 4, 2, 24, 0, 0, 0, 0, 0, NULL, 0 };
	int qhs = 48, ldq = 4 * 48, p0 = 5, m = 6, n_ctx = p0 + m, od = 4 * 24;
	float *q = rnd((size_t)m * ldq, 1), *kc = rnd((size_t)n_ctx * 48, 2);
	float *vc = rnd((size_t)n_ctx * 48, 1), *o = malloc((size_t)m * od * 4);
	float *o1 = malloc(od * 4), *o3 = malloc((size_t)m * od * 4);
	double *ref = malloc((size_t)m * od * sizeof *ref);

	a.scale = 1 / sqrtf(24);
	ref_attention(&a, q, ldq, qhs, kc, vc, m, p0, ref);
	CHECK(backend_attention(be1, &a, q, ldq, qhs, kc, vc, m, p0, o) == 0);
	CHECK(maxrel(o, ref, (size_t)m * od) < 1e-5);
	CHECK(backend_attention(be3, &a, q, ldq, qhs, kc, vc, m, p0, o3) == 0);
	CHECK(same(o, o3, (size_t)m * od));
	CHECK(backend_attention(bes, &a, q, ldq, qhs, kc, vc, m, p0, o3) == 0);
	CHECK(maxrel(o3, ref, (size_t)m * od) < 1e-5);
	for (int r = 0; r < m; r++) {
		CHECK(backend_attention(be3, &a, q + r * ldq, ldq, qhs, kc, vc, 1, p0 + r, o1) == 0);
		if (!same(o1, o + r * od, od))
			FAILF("row %d of a %d-row prefill differs from decoding it alone", r, m);
	}
	a.n_kv_head = 3;
	CHECK(backend_attention(be3, &a, q, ldq, qhs, kc, vc, m, p0, o) == -1);
	free(q), free(kc), free(vc), free(o), free(o1), free(o3), free(ref);
}

TEST(round_f16_keeps_what_a_half_cache_stores)
{
	float x[2][4] = { { 1.0f + 0x1p-11f, 1.0f + 0x1p-10f + 0x1p-11f, 65520.0f, -0x1p-25f },
	    { 0.1f, 65504.0f, 0x1p-24f, 7.0f } };

	CHECK(backend_round_f16(be3, &x[0][0], 4, 2, 3) == 0);
	CHECK(x[0][0] == 1.0f);				/* a tie goes to even */
	CHECK(x[0][1] == 1.0f + 0x1p-9f);		/* ... upward here */
	CHECK(isinf(x[0][2]) && x[0][2] > 0);		/* past half's range */
	CHECK(x[0][3] == -0x1p-25f);			/* column 3 is past n: untouched */
	CHECK(x[1][0] == 0.0999755859375f && x[1][1] == 65504.0f && x[1][2] == 0x1p-24f);
	CHECK(backend_kv_f16(be3) == 1);
	CHECK(backend_round_f16(be3, &x[0][0], 2, 2, 3) == -1);
}

TEST(attention_with_f16_cache_matches_reference_and_is_batch_invariant)
{
	struct backend_attn a = { 4, 2, 24, 0, 1, 0, 0, 0, NULL, 0 };
	int qhs = 48, ldq = 4 * 48, p0 = 7, m = 5, n_ctx = p0 + m, od = 4 * 24;
	float *q = rnd((size_t)m * ldq, 1), *kc = rnd((size_t)n_ctx * 48, 2);
	float *vc = rnd((size_t)n_ctx * 48, 1), *o = malloc((size_t)m * od * 4);
	float *o1 = malloc(od * 4), *o3 = malloc((size_t)m * od * 4);
	double *ref = malloc((size_t)m * od * sizeof *ref);

	a.scale = 1 / sqrtf(24);
	CHECK(backend_round_f16(be1, kc, 48, n_ctx, 48) == 0);
	CHECK(backend_round_f16(be1, vc, 48, n_ctx, 48) == 0);
	ref_attention(&a, q, ldq, qhs, kc, vc, m, p0, ref);
	CHECK(backend_attention(be1, &a, q, ldq, qhs, kc, vc, m, p0, o) == 0);
	CHECK(maxrel(o, ref, (size_t)m * od) < 1e-5);
	a.kv_f16 = 0;	/* the rounding of q and the weights shows */
	CHECK(backend_attention(be1, &a, q, ldq, qhs, kc, vc, m, p0, o3) == 0);
	CHECK(maxrel(o3, ref, (size_t)m * od) > 1e-4);
	a.kv_f16 = 1;
	CHECK(backend_attention(be3, &a, q, ldq, qhs, kc, vc, m, p0, o3) == 0);
	CHECK(same(o, o3, (size_t)m * od));
	CHECK(backend_attention(bes, &a, q, ldq, qhs, kc, vc, m, p0, o3) == 0);
	CHECK(maxrel(o3, ref, (size_t)m * od) < 1e-5);
	for (int r = 0; r < m; r++) {
		CHECK(backend_attention(be3, &a, q + r * ldq, ldq, qhs, kc, vc, 1, p0 + r, o1) == 0);
		if (!same(o1, o + r * od, od))
			FAILF("row %d of a %d-row prefill differs from decoding it alone", r, m);
	}
	free(q), free(kc), free(vc), free(o), free(o1), free(o3), free(ref);
}

/*
 * llama.cpp's attention orders (a->ggml: K q and V p summed in 16 or 64
 * lanes of fused chains, backend_cpu_dot_lanes and backend_cpu_lanes_total)
 * give the same bits on the AVX2 path as on the portable one, so llama
 * GGUFs compute alike on any x86-64.  Over 64 positions, head_dims
 * below, at and past 64 lanes (136: chains of two or three, and a tail),
 * both caches, both kernels' orders.
 */
TEST(ggml_attention_orders_are_the_same_bits_on_every_path)
{
	static const int hds[] = { 24, 64, 136 };

	for (int h = 0; h < 3; h++)
		for (int f16 = 0; f16 < 2; f16++)
			for (int bat = 0; bat < 2; bat++) {
				struct backend_attn a = { 4, 2, hds[h], 0, f16, 1, bat, 0, NULL, 0 };
				int hd = hds[h], kvd = 2 * hd, ldq = 4 * hd, p0 = 70, m = 5;
				int n_ctx = p0 + m, od = 4 * hd;
				float *q = rnd((size_t)m * ldq, 1), *kc = rnd((size_t)n_ctx * kvd, 2);
				float *vc = rnd((size_t)n_ctx * kvd, 1);
				float *o = malloc((size_t)m * od * 4), *os = malloc((size_t)m * od * 4);
				double *ref = malloc((size_t)m * od * sizeof *ref);

				a.scale = 1 / sqrtf((float)hd);
				if (f16) {
					CHECK(backend_round_f16(be1, kc, kvd, n_ctx, kvd) == 0);
					CHECK(backend_round_f16(be1, vc, kvd, n_ctx, kvd) == 0);
				}
				ref_attention(&a, q, ldq, hd, kc, vc, m, p0, ref);
				CHECK(backend_attention(be3, &a, q, ldq, hd, kc, vc, m, p0, o) == 0);
				CHECK(backend_attention(bes, &a, q, ldq, hd, kc, vc, m, p0, os) == 0);
				if (maxrel(o, ref, (size_t)m * od) > 1e-5)
					FAILF("head_dim %d f16 %d batched %d: maxrel %g", hd, f16, bat,
					    maxrel(o, ref, (size_t)m * od));
				if (!same(o, os, (size_t)m * od))
					FAILF("head_dim %d f16 %d batched %d: %s and %s differ", hd, f16,
					    bat, backend_name(be3), backend_name(bes));
				free(q), free(kc), free(vc), free(o), free(os), free(ref);
			}
}

/* The lanes' tree as backend_cpu.h states it, one scalar add at a time. */
static float
ref_lanes_total(float *acc, int w)
{
	if (w == 64)
		for (int l = 0; l < 16; l++) {
			acc[l] += acc[32 + l];
			acc[16 + l] += acc[48 + l];
			acc[l] += acc[16 + l];
		}
	for (int h = 8; h >= 1; h /= 2)
		for (int l = 0; l < h; l++)
			acc[l] += acc[l + h];
	return acc[0];
}

/*
 * The vector forms of the lanes' sums (lanes_total, the column totals of
 * V p, dot_lanes totalled in registers) against the scalar tree, bit for
 * bit: w = 16 and 64, columns 1..70 (every tail of the vector loops),
 * dot lengths with and without a tail, on the AVX2 and the portable path.
 */
TEST(lanes_sums_are_the_scalar_tree_bit_for_bit)
{
	float acc[64 * 70], cp[64 * 70], col[64], out[70];

	for (int w = 16; w <= 64; w += 48) {
		for (int k = 0; k < 20; k++) {
			float *x = rnd(w, (float)(k + 1));

			memcpy(acc, x, w * sizeof *x);
			memcpy(cp, x, w * sizeof *x);
			if (backend_cpu_lanes_total(acc, w) != ref_lanes_total(cp, w))
				FAILF("lanes_total w %d: not the scalar tree", w);
			free(x);
		}
		for (int n = 1; n <= 70; n++) {
			float *x = rnd((size_t)w * n, 3);

			for (int b = 0; b < 2; b++) {
				memcpy(acc, x, (size_t)w * n * sizeof *x);
				backend_cpu_lanes_cols((struct backend_cpu *)(b ? bes : be3), acc, w, n, out);
				for (int i = 0; i < n; i++) {
					for (int l = 0; l < w; l++)
						col[l] = x[(size_t)l * n + i];
					if (!same(&out[i], (float[]){ ref_lanes_total(col, w) }, 1))
						FAILF("lanes_cols w %d n %d on %s: column %d not the scalar tree",
						    w, n, backend_name(b ? bes : be3), i);
				}
			}
			free(x);
		}
		for (int n = w; n <= 3 * w; n += w) {	/* every key at once, as attention runs them */
			int nk = 37, hd = n;
			float *q = rnd(hd, 1), *k = rnd((size_t)nk * (hd + 5), 2), *p = rnd(nk, 1);
			float s3[37], ss[37], *y3 = calloc((size_t)w * hd, 4), *ys = calloc((size_t)w * hd, 4);

			backend_cpu_dot_lanes_rows((struct backend_cpu *)be3, q, k, hd + 5, nk, hd, w, 0.125f, s3);
			backend_cpu_dot_lanes_rows((struct backend_cpu *)bes, q, k, hd + 5, nk, hd, w, 0.125f, ss);
			for (int t = 0; t < nk; t++)
				if (s3[t] != ss[t] || s3[t] != backend_cpu_dot_lanes((struct backend_cpu *)bes, q,
				    k + (size_t)t * (hd + 5), hd, w) * 0.125f)
					FAILF("dot_lanes_rows w %d n %d: key %d not dot_lanes", w, n, t);
			backend_cpu_axpy_fma_lanes((struct backend_cpu *)be3, y3, w, hd, p, k, hd + 5, nk);
			backend_cpu_axpy_fma_lanes((struct backend_cpu *)bes, ys, w, hd, p, k, hd + 5, nk);
			if (!same(y3, ys, (size_t)w * hd))
				FAILF("axpy_fma_lanes w %d n %d: the paths differ", w, n);
			free(q), free(k), free(p), free(y3), free(ys);
		}
		for (int n = w - 3; n <= 3 * w + 5; n += w / 2 - 1) {
			float *a = rnd(n, 1), *b = rnd(n, 2), lanes[64] = { 0 }, want;

			for (int i = 0; i < n; i++)
				lanes[i % w] = fmaf(a[i], b[i], lanes[i % w]);
			want = ref_lanes_total(lanes, w);
			if (backend_cpu_dot_lanes((struct backend_cpu *)be3, a, b, n, w) != want ||
			    backend_cpu_dot_lanes((struct backend_cpu *)bes, a, b, n, w) != want)
				FAILF("dot_lanes w %d n %d: not the fused lanes and the scalar tree", w, n);
			free(a), free(b);
		}
	}
}

/*
 * ggml's exp on the CPU: fexp_scale is scalbnf bit for bit over fexp_ggml's
 * whole range of exponents (subnormal results and overflow included), and
 * the backend's exp (fmaf as instructions where the CPU has FMA) is
 * fexp_ggml compiled plainly, over a sweep of every 4099th float.
 */
TEST(expf_ggml_is_fexp_ggml_bit_for_bit)
{
	int bad = 0;

	for (int k = -192; k <= 192; k++)
		for (int i = 0; i < 64; i++) {
			float p = 0.5f + (float)i / 64 + (float)i * 0x1p-20f, a = fexp_scale(p, k),
			    b = scalbnf(p, k);

			if (!same(&a, &b, 1) && bad++ < 5)
				FAILF("fexp_scale(%a, %d) = %a, scalbnf %a", p, k, a, b);
		}
	for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {
		uint32_t v = (uint32_t)u;
		float x, a, b;

		memcpy(&x, &v, 4);
		a = backend_cpu_expf_ggml(x), b = fexp_ggml(x);
		if (!same(&a, &b, 1) && bad++ < 10)
			FAILF("expf_ggml(%a) = %a, fexp_ggml %a", x, a, b);
	}
}

/* What the CPU backend's expf_uf rests on: libm's expf is +0 below -104. */
TEST(expf_is_zero_below_minus_104)
{
	for (uint32_t v = 0xC2D00001u; v <= 0xFF800000u; v += 997) {	/* -104.00001 .. -inf */
		float x, e;

		memcpy(&x, &v, 4);
		e = expf(x);
		if (!same(&e, (float[]){ 0.0f }, 1)) {
			FAILF("expf(%a) = %a", x, e);
			break;
		}
	}
	CHECK(expf(-INFINITY) == 0.0f && !signbit(expf(-INFINITY)));
}

/*
 * The vector exp and SiLU (backend_cpu_expf_ggml_n, backend_cpu_silu_n)
 * against the one-element functions, bit for bit: every 4099th float (NaN,
 * infinities, subnormals, results past 2^127 and below 2^-126 included),
 * in runs of every length (the vector loop and its tail).
 */
TEST(vector_exp_and_silu_are_the_scalar_ones_bit_for_bit)
{
	enum { N = 4096 };
	static float x[N], e[N], si[N];
	int bad = 0;

	for (uint64_t u0 = 0; u0 < 0x100000000ull; u0 += (uint64_t)N * 4099) {
		int n = (int)(u0 / ((uint64_t)N * 4099) % 29) + N - 28;

		for (int i = 0; i < n; i++) {
			uint32_t v = (uint32_t)(u0 + (uint64_t)i * 4099);

			memcpy(&x[i], &v, 4);
		}
		x[0] = -87.0f, x[1] = 88.5f, x[2] = -104.0f, x[3] = 0x1p-140f;
		memcpy(e, x, n * sizeof *x), memcpy(si, x, n * sizeof *x);
		backend_cpu_expf_ggml_n(e, n);
		backend_cpu_silu_n(si, n);
		for (int i = 0; i < n; i++) {
			float a = backend_cpu_expf_ggml(x[i]), b = backend_cpu_silu(x[i]);

			if ((!same(&e[i], &a, 1) || !same(&si[i], &b, 1)) && bad++ < 10)
				FAILF("x %a: exp %a / %a, silu %a / %a (vector / scalar)", x[i], e[i], a,
				    si[i], b);
		}
	}
}

/* --- conv1d --- */

TEST(conv1d_matches_reference_and_carries_state)
{
	int nch = 19, dc = 4, m = 9, ldx = 23, ns = dc - 1;
	float *x = rnd((size_t)m * ldx, 1), *w = rnd((size_t)nch * dc, 1);
	float *st0 = rnd((size_t)ns * nch, 1), *st = dup(st0, (size_t)ns * nch);
	float *st2 = dup(st0, (size_t)ns * nch), *snap = malloc((size_t)m * ns * nch * 4);
	float *y = malloc((size_t)m * nch * 4), *y2 = malloc((size_t)m * nch * 4);
	double *ref = malloc((size_t)m * nch * sizeof *ref);

	for (int t = 0; t < m; t++)
		for (int c = 0; c < nch; c++) {
			double acc = 0;

			for (int k = 0; k < dc; k++) {
				int i = t + k;	/* index into [state ; x] */
				acc += (double)w[c * dc + k] *
				    (i < ns ? st0[i * nch + c] : x[(i - ns) * ldx + c]);
			}
			ref[t * nch + c] = dsilu(acc);
		}
	CHECK(backend_conv1d_silu(be3, x, ldx, m, nch, w, dc, st, snap, y) == 0);
	CHECK(maxrel(y, ref, (size_t)m * nch) < 1e-6);
	for (int k = 0; k < ns; k++)
		CHECK(same(st + k * nch, x + (m - ns + k) * ldx, nch));
	/* in two pieces: the same bits, and each snapshot is the state after its row */
	for (int t = 0; t < m; t++) {
		CHECK(backend_conv1d_silu(be1, x + t * ldx, ldx, 1, nch, w, dc, st2, NULL,
		    y2 + t * nch) == 0);
		if (!same(st2, snap + (size_t)t * ns * nch, (size_t)ns * nch))
			FAILF("snapshot %d is not the state after row %d", t, t);
	}
	CHECK(same(y, y2, (size_t)m * nch));
	CHECK(same(st, st2, (size_t)ns * nch));
	free(x), free(w), free(st0), free(st), free(st2), free(snap), free(y), free(y2), free(ref);
}

/* --- the gated delta rule --- */

struct gdn_case {
	struct backend_gdn g;
	int	m, ld;
	float	*qkv, *a, *b, *A, *dt;
};

static struct gdn_case
gdn_make(int nk, int nv, int dk, int dv, int tiled, int hf, int m)
{
	struct gdn_case c = { .g = { nk, nv, dk, dv, tiled, hf, 1e-6f }, .m = m };

	c.ld = 2 * nk * dk + nv * dv + 3;
	c.qkv = rnd((size_t)m * c.ld, 1);
	c.a = rnd((size_t)m * nv, 2);
	c.b = rnd((size_t)m * nv, 3);
	c.A = rnd(nv, 1);
	c.dt = rnd(nv, 1);
	for (int h = 0; h < nv; h++)
		c.A[h] = -expf(c.A[h]);
	return c;
}

static void
gdn_free(struct gdn_case *c)
{
	free(c->qkv), free(c->a), free(c->b), free(c->A), free(c->dt);
}

static void
ref_l2(const float *x, int n, int hf, double eps, double *y)
{
	double ss = 0, s;

	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	s = hf ? 1 / sqrt(ss + eps) : 1 / fmax(sqrt(ss), eps);
	for (int i = 0; i < n; i++)
		y[i] = x[i] * s;
}

static void
ref_gdn(const struct gdn_case *c, double *S, double *o)
{
	const struct backend_gdn *g = &c->g;
	int dk = g->dk, dv = g->dv, kd = g->n_k_heads * dk;
	double q[256], k[256], kv[256];

	for (int r = 0; r < c->m; r++)
		for (int h = 0; h < g->n_v_heads; h++) {
			int kh = g->v_tiled ? h % g->n_k_heads : h / (g->n_v_heads / g->n_k_heads);
			const float *row = c->qkv + r * c->ld, *v = row + 2 * kd + h * dv;
			double *Sh = S + h * dk * dv, at = c->a[r * g->n_v_heads + h] + c->dt[h];
			double beta = dsigmoid(c->b[r * g->n_v_heads + h]);
			double decay = exp(c->A[h] * (at > 20 ? at : log1p(exp(at))));

			ref_l2(row + kh * dk, dk, g->hf_l2, g->eps, q);
			ref_l2(row + kd + kh * dk, dk, g->hf_l2, g->eps, k);
			for (int j = 0; j < dv; j++) {
				kv[j] = 0;
				for (int i = 0; i < dk; i++)
					kv[j] += (Sh[i * dv + j] *= decay) * k[i];
			}
			for (int j = 0; j < dv; j++) {
				double d = beta * (v[j] - kv[j]), acc = 0;

				for (int i = 0; i < dk; i++) {
					Sh[i * dv + j] += k[i] * d;
					acc += Sh[i * dv + j] * q[i] / sqrt(dk);
				}
				o[(r * g->n_v_heads + h) * dv + j] = acc;
			}
		}
}

static void
gdn_check(int nk, int nv, int dk, int dv, int tiled, int hf, int m)
{
	struct gdn_case c = gdn_make(nk, nv, dk, dv, tiled, hf, m);
	size_t ss = (size_t)nv * dk * dv, os = (size_t)m * nv * dv;
	float *S0 = rnd(ss, 0.3f), *S = dup(S0, ss), *S1 = dup(S0, ss), *Sc = dup(S0, ss);
	float *o = malloc(os * 4), *o1 = malloc(os * 4), *oc = malloc(os * 4);
	float *snap = malloc(ss * m * 4);
	double *dS = malloc(ss * sizeof *dS), *ref = malloc(os * sizeof *ref);
	const struct backend_gdn *g = &c.g;

	for (size_t i = 0; i < ss; i++)
		dS[i] = S0[i];
	ref_gdn(&c, dS, ref);
	CHECK(backend_gdn_step(be3, g, m, c.qkv, c.ld, c.a, c.b, c.A, c.dt, S, snap, o) == 0);
	if (maxrel(o, ref, os) > 1e-4 || maxrel(S, dS, ss) > 1e-4)
		FAILF("step vs reference (%d/%d heads, %dx%d, tiled %d, hf %d): o %g S %g",
		    nk, nv, dk, dv, tiled, hf, maxrel(o, ref, os), maxrel(S, dS, ss));
	for (int r = 0; r < m; r++) {	/* one row at a time: the same bits */
		CHECK(backend_gdn_step(be1, g, 1, c.qkv + r * c.ld, c.ld, c.a + r * nv,
		    c.b + r * nv, c.A, c.dt, S1, NULL, o1 + r * nv * dv) == 0);
		if (!same(S1, snap + r * ss, ss))
			FAILF("snapshot %d is not the state after row %d", r, r);
	}
	CHECK(same(o, o1, os));
	CHECK(same(S, S1, ss));
	CHECK(backend_gdn_chunk(be3, g, m, c.qkv, c.ld, c.a, c.b, c.A, c.dt, Sc, oc) == 0);
	if (maxrel(oc, ref, os) > 1e-4 || maxrel(Sc, dS, ss) > 1e-4)
		FAILF("chunk vs reference (m %d): o %g S %g", m, maxrel(oc, ref, os),
		    maxrel(Sc, dS, ss));
	memcpy(S1, S0, ss * 4);
	CHECK(backend_gdn_chunk(be1, g, m, c.qkv, c.ld, c.a, c.b, c.A, c.dt, S1, o1) == 0);
	CHECK(same(o1, oc, os));	/* thread count does not matter */
	CHECK(same(S1, Sc, ss));
	free(S0), free(S), free(S1), free(Sc), free(o), free(o1), free(oc), free(snap);
	free(dS), free(ref);
	gdn_free(&c);
}

/*
 * The delta rule's row loops (backend_cpu_axpy_rows, decay_rows,
 * update_rows: the output kept in registers across the rows) against one
 * call a row, bit for bit: widths with and without 64-column blocks and
 * tails, on the AVX2 and the portable path.
 */
TEST(row_loops_are_one_call_a_row_bit_for_bit)
{
	static const int ns[] = { 5, 8, 12, 64, 72, 131 };
	struct backend *bs[] = { be3, bes };

	for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
		for (int b = 0; b < 2; b++) {
			const struct backend_cpu *c = (const struct backend_cpu *)bs[b];
			int n = ns[ni], k = 19;
			size_t ld = n + 3;
			float *x = rnd((size_t)k * ld, 1), *a = rnd(k, 1), *q = rnd(k, 1);
			float *y0 = rnd(n, 1), *y1 = dup(y0, n), *dl = rnd(n, 1);
			float *S0 = rnd((size_t)k * n, 1), *S1 = dup(S0, (size_t)k * n);

			backend_cpu_axpy_rows(c, y0, n, a, x, ld, k);
			for (int i = 0; i < k; i++)
				backend_cpu_axpy(c, y1, a[i], x + i * ld, n);
			if (!same(y0, y1, n))
				FAILF("axpy_rows n %d on %s", n, backend_name(bs[b]));
			backend_cpu_decay_rows(c, S0, k, n, 0.93f, y0, a);
			for (int i = 0; i < k; i++)
				backend_cpu_decay(c, S1 + (size_t)i * n, 0.93f, y1, a[i], n);
			if (!same(y0, y1, n) || !same(S0, S1, (size_t)k * n))
				FAILF("decay_rows n %d on %s", n, backend_name(bs[b]));
			backend_cpu_update_rows(c, S0, k, n, a, dl, y0, q);
			for (int i = 0; i < k; i++)
				backend_cpu_update(c, S1 + (size_t)i * n, a[i], dl, y1, q[i], n);
			if (!same(y0, y1, n) || !same(S0, S1, (size_t)k * n))
				FAILF("update_rows n %d on %s", n, backend_name(bs[b]));
			free(x), free(a), free(q), free(y0), free(y1), free(dl), free(S0), free(S1);
		}
}

TEST(gated_delta_rule_step_and_chunk_match_reference)
{
	gdn_check(2, 4, 8, 12, 0, 1, 70);
	gdn_check(2, 4, 8, 12, 1, 0, 70);
	gdn_check(1, 3, 16, 8, 0, 0, 1);
	gdn_check(3, 3, 32, 16, 0, 1, 64);
	gdn_check(2, 6, 16, 16, 1, 1, 150);
}

TEST(gated_delta_rule_rejects_bad_head_ratios)
{
	struct gdn_case c = gdn_make(2, 4, 8, 8, 0, 1, 1);
	float S[4 * 64], o[32];

	c.g.n_k_heads = 3;
	CHECK(backend_gdn_step(be3, &c.g, 1, c.qkv, c.ld, c.a, c.b, c.A, c.dt, S, NULL, o) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "gdn: 4 value heads over 3 key heads");
	gdn_free(&c);
}

/* --- many sequences a call (backend_*_seqs) --- */

enum { SQ_N = 5 };
static const int SQ_ROWS[SQ_N] = { 1, 4, 0, 3, 2 };	/* 10 rows, one sequence empty */

/*
 * One group through backend_conv1d_silu_seqs and backend_gdn_step_seqs on
 * be, against each sequence's own backend_conv1d_silu and backend_gdn_step
 * on ref: outputs, states and (snaps) snapshots bit for bit.
 */
static void
seqs_check(struct backend *be, struct backend *ref, int snaps, int nk, int nv, int dk, int dv)
{
	struct gdn_case c = gdn_make(nk, nv, dk, dv, 1, 1, 10);
	int cd = 2 * nk * dk + nv * dv, dc = 4, ns = dc - 1, m = 10;
	size_t ss = (size_t)nv * dk * dv, cs = (size_t)ns * cd, vd = (size_t)nv * dv;
	float *w = rnd((size_t)cd * dc, 1), *y[2], *o[2], *st[2][SQ_N], *S[2][SQ_N];
	float *csn[2][SQ_N], *gsn[2][SQ_N];
	struct backend_seq cq[SQ_N], gq[SQ_N];

	for (int k = 0; k < 2; k++) {
		y[k] = calloc((size_t)m * c.ld, 4), o[k] = calloc((size_t)m * vd, 4);
		for (int i = 0; i < SQ_N; i++) {
			if (k == 0) {
				st[0][i] = rnd(cs, 1), S[0][i] = rnd(ss, 0.3f);
			} else {
				st[1][i] = dup(st[0][i], cs), S[1][i] = dup(S[0][i], ss);
			}
			csn[k][i] = calloc((size_t)(SQ_ROWS[i] + 1) * cs, 4);
			gsn[k][i] = calloc((size_t)(SQ_ROWS[i] + 1) * ss, 4);
		}
	}
	for (int i = 0; i < SQ_N; i++) {
		cq[i] = (struct backend_seq){ SQ_ROWS[i], st[0][i], snaps ? csn[0][i] : NULL };
		gq[i] = (struct backend_seq){ SQ_ROWS[i], S[0][i], snaps ? gsn[0][i] : NULL };
	}
	CHECK(backend_conv1d_silu_seqs(be, c.qkv, c.ld, SQ_N, cq, cd, w, dc, y[0]) == 0);
	CHECK(backend_gdn_step_seqs(be, &c.g, SQ_N, gq, y[0], cd, c.a, c.b, c.A, c.dt, o[0]) == 0);
	for (int i = 0, r = 0; i < SQ_N; r += SQ_ROWS[i++]) {
		int k = SQ_ROWS[i];

		CHECK(backend_conv1d_silu(ref, c.qkv + r * c.ld, c.ld, k, cd, w, dc, st[1][i],
		    snaps ? csn[1][i] : NULL, y[1] + r * cd) == 0);
		CHECK(backend_gdn_step(ref, &c.g, k, y[1] + r * cd, cd, c.a + r * nv, c.b + r * nv,
		    c.A, c.dt, S[1][i], snaps ? gsn[1][i] : NULL, o[1] + r * vd) == 0);
	}
	if (!same(y[0], y[1], (size_t)m * cd) || !same(o[0], o[1], (size_t)m * vd))
		FAILF("seqs on %s (snaps %d, %dx%d): outputs differ", backend_name(be), snaps, dk,
		    dv);
	for (int i = 0; i < SQ_N; i++) {
		size_t k = (size_t)SQ_ROWS[i] + 1;	/* past the rows: untouched zeros */

		if (!same(st[0][i], st[1][i], cs) || !same(S[0][i], S[1][i], ss) ||
		    !same(csn[0][i], csn[1][i], k * cs) || !same(gsn[0][i], gsn[1][i], k * ss))
			FAILF("seqs on %s (snaps %d): sequence %d's state differs",
			    backend_name(be), snaps, i);
	}
	for (int k = 0; k < 2; k++) {
		free(y[k]), free(o[k]);
		for (int i = 0; i < SQ_N; i++)
			free(st[k][i]), free(S[k][i]), free(csn[k][i]), free(gsn[k][i]);
	}
	free(w);
	gdn_free(&c);
}

/* A _seqs op that refuses: which path a call took. */
static int
seqs_refused(struct backend *be, const struct backend_gdn *g, int n, const struct backend_seq *sq,
    const float *qkv, int ld, const float *a, const float *b, const float *ssm_a,
    const float *dt_bias, float *o)
{
	return util_err(be->err, "own form");
}

/* backend_per_seq_set: on, the _seqs calls take the per-sequence loop
 * even where the backend has its own form (its bits: seqs_check); off, the
 * own form again. */
TEST(per_seq_runs_the_seqs_ops_as_their_loops)
{
	struct backend_ops own = *be1->ops;
	char err[UTIL_ERRLEN];
	struct backend *b = backend_open("cpu", 1, err);
	struct gdn_case c = gdn_make(2, 4, 16, 12, 1, 1, 3);
	struct backend_seq sq[2];
	float *S[2], *o;
	int m = 3;

	CHECK(b != NULL);
	own.gdn_step_seqs = seqs_refused;
	b->ops = &own;
	S[0] = calloc((size_t)4 * 16 * 12, 4), S[1] = calloc((size_t)4 * 16 * 12, 4);
	o = calloc((size_t)m * 4 * 12, 4);
	sq[0] = (struct backend_seq){ 1, S[0], NULL }, sq[1] = (struct backend_seq){ 2, S[1], NULL };
	CHECK(backend_gdn_step_seqs(b, &c.g, 2, sq, c.qkv, c.ld, c.a, c.b, c.A, c.dt, o) != 0);
	CHECK_EQ_STR(backend_errmsg(b), "own form");
	backend_per_seq_set(b, 1);
	CHECK(backend_gdn_step_seqs(b, &c.g, 2, sq, c.qkv, c.ld, c.a, c.b, c.A, c.dt, o) == 0);
	seqs_check(b, be1, 1, 2, 4, 16, 12);
	backend_per_seq_set(b, 0);
	CHECK(backend_gdn_step_seqs(b, &c.g, 2, sq, c.qkv, c.ld, c.a, c.b, c.A, c.dt, o) != 0);
	free(S[0]), free(S[1]), free(o);
	gdn_free(&c);
	backend_close(b);
}

/*
 * Many sequences a call: the CPU's own gdn_step_seqs (3 threads, 1, the
 * portable path) and backend.c's loop (a table without the ops) give
 * each sequence's own calls' bits; bad groups are refused with the reason.
 */
TEST(seqs_ops_are_each_sequences_own_calls_bit_for_bit)
{
	struct backend_ops loop = *be1->ops;
	struct backend_seq sq[2] = { { 1, NULL, NULL }, { 1, NULL, NULL } };
	float st[12], x[8], w[8], y[8];
	char err[UTIL_ERRLEN];
	struct backend *b = backend_open("cpu", 2, err);

	CHECK(b != NULL);
	loop.gdn_step_seqs = NULL, loop.conv1d_silu_seqs = NULL;
	b->ops = &loop;
	for (int snaps = 0; snaps < 2; snaps++) {
		seqs_check(be3, be1, snaps, 2, 4, 16, 12);
		seqs_check(be1, be1, snaps, 1, 3, 8, 8);
		seqs_check(bes, bes, snaps, 2, 6, 16, 16);
		seqs_check(b, be1, snaps, 2, 4, 16, 12);
	}
	backend_close(b);
	CHECK(backend_conv1d_silu_seqs(be1, x, 2, 2, sq, 2, w, 3, y) == -1);
	CHECK_EQ_STR(backend_errmsg(be1), "conv1d: sequence 1: 1 rows, no state");
	sq[0].state = sq[1].state = st;
	CHECK(backend_conv1d_silu_seqs(be1, x, 2, 2, sq, 2, w, 3, y) == -1);
	CHECK_EQ_STR(backend_errmsg(be1), "conv1d: sequences 1 and 2 share a state");
	sq[1].state = st + 4, sq[1].rows = -1;
	CHECK(backend_conv1d_silu_seqs(be1, x, 2, 2, sq, 2, w, 3, y) == -1);
	CHECK_EQ_STR(backend_errmsg(be1), "conv1d: sequence 2: -1 rows");
	sq[1].rows = 0;
	CHECK(backend_conv1d_silu_seqs(be1, x, 2, 0, sq, 2, w, 3, y) == 0);
}

/*
 * backend_kv_store_seqs: each sequence's rows (1, 4, 0, 3, 2 of them) into
 * its caches at its own row, the rest of the caches untouched: the CPU's
 * copies, bit for bit as a copy of each.  Bad groups are refused.
 */
TEST(kv_store_seqs_puts_each_sequences_rows_at_its_position)
{
	enum { KVD = 6, CTX = 12 };
	static const int pos[SQ_N] = { 0, 3, 5, 9, 10 };
	float *k = rnd(10 * KVD, 1), *v = rnd(10 * KVD, 1), *kc[SQ_N], *vc[SQ_N], *k0, *v0;
	struct backend_kv_seq sq[SQ_N];

	for (int i = 0; i < SQ_N; i++) {
		kc[i] = rnd(CTX * KVD, 1), vc[i] = rnd(CTX * KVD, 1);
		sq[i] = (struct backend_kv_seq){ SQ_ROWS[i], pos[i], kc[i], vc[i] };
	}
	k0 = dup(kc[1], CTX * KVD), v0 = dup(vc[1], CTX * KVD);
	CHECK(backend_kv_store_seqs(be3, k, v, KVD, SQ_N, sq) == 0);
	for (int i = 0, r = 0; i < SQ_N; r += SQ_ROWS[i++]) {
		CHECK(same(kc[i] + pos[i] * KVD, k + r * KVD, (size_t)SQ_ROWS[i] * KVD));
		CHECK(same(vc[i] + pos[i] * KVD, v + r * KVD, (size_t)SQ_ROWS[i] * KVD));
	}
	CHECK(same(kc[1], k0, 3 * KVD) && same(vc[1] + 7 * KVD, v0 + 7 * KVD, 5 * KVD));
	sq[2].kc = NULL;
	CHECK(backend_kv_store_seqs(be3, k, v, KVD, SQ_N, sq) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "kv store: sequence 3: 0 rows at 5, no cache");
	sq[2].kc = kc[2], sq[3].pos = -1;
	CHECK(backend_kv_store_seqs(be3, k, v, KVD, SQ_N, sq) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "kv store: sequence 4: 3 rows at -1");
	for (int i = 0; i < SQ_N; i++)
		free(kc[i]), free(vc[i]);
	free(k), free(v), free(k0), free(v0);
}

/*
 * backend_attention_seqs: sequences of 1, 4, 0, 3 and 2 rows at their own
 * positions (grouped-query heads, a gated layout's head stride, an F16 cache in llama.cpp's
 * orders, whose bits depend on batched), bit for bit each sequence's own
 * backend_attention (batched for two rows or more only), in either
 * per-sequence mode.  Bad groups are refused.
 */
TEST(attention_seqs_equals_each_sequences_own_call)
{
	enum { NH = 4, NKV = 2, HD = 24, QHS = 2 * HD, LDQ = NH * QHS, OD = NH * HD, CTX = 40,
	    KVD = NKV * HD, M = 10 };
	static const int pos[SQ_N] = { 0, 30, 5, 19, 35 };
	struct backend_attn a = { NH, NKV, HD, 0.2f, 1, 1, 1, 0, NULL, 0 }, ai;
	float *q = rnd((size_t)M * LDQ, 1), *o = rnd((size_t)M * OD, 1), *o1, *kc[SQ_N],
	    *vc[SQ_N];
	struct backend_kv_seq sq[SQ_N];
	int32_t hi[4] = { 3, 4, 5, 6 };

	for (int i = 0; i < SQ_N; i++) {
		kc[i] = rnd(CTX * KVD, 1), vc[i] = rnd(CTX * KVD, 1);
		CHECK(backend_round_f16(be3, kc[i], KVD, CTX, KVD) == 0);
		CHECK(backend_round_f16(be3, vc[i], KVD, CTX, KVD) == 0);
		sq[i] = (struct backend_kv_seq){ SQ_ROWS[i], pos[i], kc[i], vc[i] };
	}
	o1 = dup(o, (size_t)M * OD);
	for (int i = 0, r = 0; i < SQ_N; r += SQ_ROWS[i++]) {
		ai = a, ai.batched = SQ_ROWS[i] >= 2;
		CHECK(backend_attention(be3, &ai, q + r * LDQ, LDQ, QHS, kc[i], vc[i], SQ_ROWS[i],
		    pos[i], o1 + r * OD) == 0);
	}
	for (int ps = 0; ps < 2; ps++) {
		float *o2 = dup(o, (size_t)M * OD);

		backend_per_seq_set(be3, ps);
		CHECK(backend_attention_seqs(be3, &a, SQ_N, sq, q, LDQ, QHS, o2) == 0);
		CHECK(same(o1, o2, (size_t)M * OD));
		free(o2);
	}
	backend_per_seq_set(be3, 0);
	/* batched rows are not one-row calls' bits: the flag reaches the rows of 2 or more */
	ai = a, ai.batched = 0;
	CHECK(backend_attention(be3, &ai, q + LDQ, LDQ, QHS, kc[1], vc[1], 4, 30, o) == 0);
	CHECK(!same(o, o1 + OD, 4 * OD));
	sq[2].vc = NULL;
	CHECK(backend_attention_seqs(be3, &a, SQ_N, sq, q, LDQ, QHS, o) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "attention: sequence 3: 0 rows at 5, no cache");
	sq[2].vc = vc[2], sq[4].pos = -2;
	CHECK(backend_attention_seqs(be3, &a, SQ_N, sq, q, LDQ, QHS, o) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "attention: sequence 5: 2 rows at -2");
	sq[4].pos = pos[4];
	CHECK(backend_attention_seqs(be3, &a, SQ_N, sq, q, NH * HD - 1, QHS, o) == -1);
	a.ggml = 0, a.kv_f16 = 0, a.batched = 0, a.hi = hi;
	CHECK(backend_attention_seqs(be3, &a, SQ_N, sq, q, LDQ, QHS, o) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "attention: rows that see later keys in a group of "
	    "sequences: not supported");
	a.hi = NULL;
	CHECK(backend_attention_seqs(be3, &a, -1, sq, q, LDQ, QHS, o) == -1);
	CHECK(backend_attention_seqs(be3, &a, 0, NULL, q, LDQ, QHS, o) == 0);
	for (int i = 0; i < SQ_N; i++)
		free(kc[i]), free(vc[i]);
	free(q), free(o), free(o1);
}

/* --- positions in backend memory, recorded steps --- */

/* d_pos as the model keeps it: int32 bits in backend_alloc'd floats */
static int32_t *
dpos_new(struct backend *be, int p0, int m)
{
	int32_t *d = (int32_t *)backend_alloc(be, (size_t)m), h[16];

	for (int r = 0; r < m; r++)
		h[r] = p0 + r;
	if (d != NULL && backend_write(be, (float *)d, (const float *)h, (size_t)m) != 0)
		return NULL;
	return d;
}

TEST(dpos_ops_equal_their_host_position_forms_bit_for_bit)
{
	struct backend_attn a = { 4, 2, 24, 0.2f, 0, 0, 0, 0, NULL, 0 };
	int m = 3, p0 = 5, n_ctx = 9, kvd = 48, qhs = 48, ldq = 4 * 48, od = 4 * 24;
	int32_t pos[3] = { 5, 6, 7 }, *d = dpos_new(be3, p0, m);
	float *x = rnd((size_t)m * ldq, 1), *y = dup(x, (size_t)m * ldq);
	float *k = rnd((size_t)m * kvd, 1), *v = rnd((size_t)m * kvd, 1);
	float *kc = rnd((size_t)n_ctx * kvd, 1), *vc = rnd((size_t)n_ctx * kvd, 1);
	float *kc0 = dup(kc, (size_t)n_ctx * kvd), *o = malloc((size_t)m * od * 4);
	float *o1 = malloc((size_t)m * od * 4);

	CHECK(d != NULL);
	for (int mode = BACKEND_ROPE_NORM; mode <= BACKEND_ROPE_NEOX; mode++) {
		CHECK(backend_rope(be3, x, ldq, 4, qhs, m, pos, 16, 1e4f, mode) == 0);
		CHECK(backend_rope_dpos(be3, y, ldq, 4, qhs, m, d, 16, 1e4f, mode) == 0);
		CHECK(same(x, y, (size_t)m * ldq));
	}
	CHECK(backend_kv_store(be3, kc, vc, k, v, kvd, m, d, n_ctx, 0) == 0);
	CHECK(same(kc, kc0, (size_t)p0 * kvd));		/* rows before p0 untouched */
	CHECK(same(kc + p0 * kvd, k, (size_t)m * kvd) && same(vc + p0 * kvd, v, (size_t)m * kvd));
	CHECK(same(kc + (p0 + m) * kvd, kc0 + (p0 + m) * kvd, (size_t)(n_ctx - p0 - m) * kvd));
	CHECK(backend_attention(be3, &a, x, ldq, qhs, kc, vc, m, p0, o) == 0);
	CHECK(backend_attention_dpos(be3, &a, x, ldq, qhs, kc, vc, m, d, n_ctx, o1) == 0);
	CHECK(same(o, o1, (size_t)m * od));
	/* rows past the cache are refused, not written */
	CHECK(backend_kv_store(be3, kc, vc, k, v, kvd, m, d, p0 + m - 1, 0) == -1);
	CHECK_EQ_STR(backend_errmsg(be3), "kv_store: rows 5..7 of 7");
	CHECK(backend_attention_dpos(be3, &a, x, ldq, qhs, kc, vc, m, d, p0 + 2, o1) == -1);
	backend_mfree(be3, (float *)d);
	free(x), free(y), free(k), free(v), free(kc), free(vc), free(kc0), free(o), free(o1);
}

/*
 * backend_qk_norm_rope is the q/k norms (and with v_norm v's, weightless),
 * the ropes and the store, in that order: at host positions (no store) and
 * at backend positions with the store, for both rope modes; and it refuses
 * what those ops refuse.
 */
static void
qk_norm_rope_case(int mode, int dev, int vnorm)
{
	int nh = 4, nkv = 2, hd = 32, qhs = 64, m = 3, p0 = 4, n_ctx = 8, kvd = nkv * hd;
	int32_t pos[3] = { 4, 5, 6 }, *d = dev ? dpos_new(be3, p0, m) : NULL;
	struct backend_qkn a = { nh, nkv, hd, qhs, NULL, NULL, 1e-6f, 16, mode, 1e4f, 0, 0 };
	float *qn = rnd(hd, 1), *kn = rnd(hd, 1);
	float *q1 = rnd((size_t)m * nh * qhs, 2), *q2 = dup(q1, (size_t)m * nh * qhs);
	float *k1 = rnd((size_t)m * kvd, 2), *k2 = dup(k1, (size_t)m * kvd);
	float *v = rnd((size_t)m * kvd, 1), *v2 = dup(v, (size_t)m * kvd);
	float *kc1 = rnd((size_t)n_ctx * kvd, 1), *kc2 = dup(kc1, (size_t)n_ctx * kvd);
	float *vc1 = rnd((size_t)n_ctx * kvd, 1), *vc2 = dup(vc1, (size_t)n_ctx * kvd);

	a.qn = qn, a.kn = kn, a.v_norm = vnorm;
	CHECK(!dev || d != NULL);
	CHECK(backend_qk_norm_rope(be3, &a, q1, k1, v, m, dev ? NULL : pos, d, dev ? kc1 : NULL,
	    vc1, n_ctx) == 0);
	CHECK(backend_rmsnorm(be3, q2, qhs, qn, q2, qhs, m * nh, hd, 1e-6f) == 0);
	CHECK(backend_rmsnorm(be3, k2, hd, kn, k2, hd, m * nkv, hd, 1e-6f) == 0);
	if (vnorm)
		CHECK(backend_rmsnorm(be3, v2, hd, NULL, v2, hd, m * nkv, hd, 1e-6f) == 0);
	CHECK(backend_rope(be3, q2, nh * qhs, nh, qhs, m, pos, 16, 1e4f, mode) == 0);
	CHECK(backend_rope(be3, k2, kvd, nkv, hd, m, pos, 16, 1e4f, mode) == 0);
	if (dev)
		CHECK(backend_kv_store(be3, kc2, vc2, k2, v2, kvd, m, d, n_ctx, 0) == 0);
	CHECK(same(q1, q2, (size_t)m * nh * qhs) && same(k1, k2, (size_t)m * kvd));
	CHECK(same(v, v2, (size_t)m * kvd));
	CHECK(same(kc1, kc2, (size_t)n_ctx * kvd) && same(vc1, vc2, (size_t)n_ctx * kvd));
	if (dev)	/* the store happened: row p0 of the cache is k's first row */
		CHECK(same(kc1 + (size_t)p0 * kvd, k1, (size_t)kvd));
	backend_mfree(be3, (float *)d);
	free(qn), free(kn), free(q1), free(q2), free(k1), free(k2), free(v), free(v2);
	free(kc1), free(kc2), free(vc1), free(vc2);
}

TEST(qk_norm_rope_equals_the_norms_ropes_and_store_bit_for_bit)
{
	float w[32] = { 0 }, x[256] = { 0 };
	int32_t pos[1] = { 0 };
	struct backend_qkn a = { 2, 1, 32, 32, w, w, 1e-6f, 16, BACKEND_ROPE_NEOX, 1e4f, 0, 0 };

	for (int mode = BACKEND_ROPE_NORM; mode <= BACKEND_ROPE_NEOX; mode++)
		for (int vn = 0; vn < 2; vn++) {
			qk_norm_rope_case(mode, 0, vn);
			qk_norm_rope_case(mode, 1, vn);
		}
	qk_norm_rope_case(BACKEND_ROPE_NORM | BACKEND_ROPE_GGML, 1, 0);
	/* positions in one memory, a store only at backend positions, shapes ropes refuse */
	CHECK(backend_qk_norm_rope(be3, &a, x, x, x, 1, pos, pos, NULL, NULL, 0) == -1);
	CHECK(strstr(backend_errmsg(be3), "positions in host or backend memory") != NULL);
	CHECK(backend_qk_norm_rope(be3, &a, x, x, x, 1, pos, NULL, x, x, 4) == -1);
	CHECK(backend_qk_norm_rope(be3, &a, x, x, x, 2, NULL, pos, x, x, 1) == -1);
	a.n_rot = 48;
	CHECK(backend_qk_norm_rope(be3, &a, x, x, x, 1, pos, NULL, NULL, NULL, 0) == -1);
	CHECK(strstr(backend_errmsg(be3), "rope: bad shape") != NULL);
	a.n_rot = 16, a.kn = NULL;
	CHECK(backend_qk_norm_rope(be3, &a, x, x, x, 1, pos, NULL, NULL, NULL, 0) == -1);
	CHECK(strstr(backend_errmsg(be3), "a norm or v missing") != NULL);
	a.kn = w, a.v_norm = 1;
	CHECK(backend_qk_norm_rope(be3, &a, x, x, NULL, 1, pos, NULL, NULL, NULL, 0) == -1);
	CHECK(strstr(backend_errmsg(be3), "a norm or v missing") != NULL);
}

TEST(cpu_backend_records_no_graphs)
{
	uint64_t key[2] = { 1, 2 };

	CHECK_EQ_INT(backend_graph_replay(be3, key, sizeof key), 0);	/* nothing to replay */
	CHECK_EQ_INT(backend_graph_begin(be3, key, sizeof key), 0);	/* the ops just run */
	CHECK_EQ_INT(backend_graph_replay(be3, key, sizeof key), 0);
	CHECK_EQ_INT(backend_graph_end(be3, 0), -1);
	CHECK_EQ_INT(backend_graph_begin(be3, key, 0), -1);
	CHECK_EQ_INT(backend_graph_replay(be3, key, BACKEND_GRAPH_KEY + 1), -1);
	CHECK_EQ_INT(backend_graph_stats(be3)->on, 0);
	backend_graph_set(be3, 1);	/* a backend without graphs cannot turn them on */
	CHECK_EQ_INT(backend_graph_stats(be3)->on, 0);
}

TEST(memra_cuda_graph_values_are_0_1_or_stats)
{
	char err[UTIL_ERRLEN], buf[UTIL_ERRLEN];

	CHECK_EQ_INT(backend_graph_env(be3, NULL, err), 0);
	CHECK_EQ_INT(backend_graph_env(be3, "", err), 0);
	CHECK_EQ_INT(backend_graph_env(be3, "1", err), 0);
	CHECK_EQ_INT(backend_graph_env(be3, "0", err), 0);
	CHECK_EQ_INT(backend_graph_env(be3, "stats", err), 1);
	CHECK_EQ_INT(backend_graph_env(be3, "yes", err), -1);
	CHECK_EQ_STR(err, "'yes': not 0, 1 or stats");
	CHECK(backend_graph_note(be3, 0, buf, sizeof buf) == NULL);	/* nothing to say */
	CHECK_EQ_STR(backend_graph_note(be3, 1, buf, sizeof buf),
	    "0 recorded, 0 replayed, 0 stale (graphs off)");
}

TEST(pdl_is_a_no_op_on_the_cpu_and_memra_cuda_pdl_is_0_or_1)
{
	char err[UTIL_ERRLEN];

	CHECK_EQ_INT(backend_pdl_set(be3, 1), 0);	/* the CPU launches nothing: off */
	CHECK_EQ_INT(backend_pdl_set(be3, 0), 0);
	CHECK_EQ_INT(backend_pdl_env(be3, NULL, err), 0);
	CHECK_EQ_INT(backend_pdl_env(be3, "", err), 0);
	CHECK_EQ_INT(backend_pdl_env(be3, "1", err), 0);
	CHECK_EQ_INT(backend_pdl_env(be3, "0", err), 0);
	CHECK_EQ_INT(backend_pdl_env(NULL, "0", err), 0);	/* be NULL: the value checked only */
	CHECK_EQ_INT(backend_pdl_env(NULL, "on", err), -1);
	CHECK_EQ_STR(err, "'on': not 0 or 1");
	CHECK_EQ_INT(backend_pdl_env(be3, "stats", err), -1);
	CHECK_EQ_STR(err, "'stats': not 0 or 1");
}

TEST(gemm_is_a_no_op_on_the_cpu_and_memra_cuda_gemm_is_int8_bf16_or_bf16_mirror)
{
	char err[UTIL_ERRLEN];

	CHECK_EQ_INT(backend_gemm_set(be3, BACKEND_GEMM_BF16), 0);	/* one kind: its own */
	CHECK_EQ_INT(backend_gemm_set(be3, BACKEND_GEMM_BF16_MIRROR), 0);
	CHECK_EQ_INT(backend_gemm_set(be3, BACKEND_GEMM_INT8), 0);
	CHECK_EQ_INT(backend_gemm_env(be3, NULL, err), 0);
	CHECK_EQ_INT(backend_gemm_env(be3, "", err), 0);
	CHECK_EQ_INT(backend_gemm_env(be3, "int8", err), 0);
	CHECK_EQ_INT(backend_gemm_env(be3, "bf16", err), 0);
	CHECK_EQ_INT(backend_gemm_env(be3, "bf16-mirror", err), 0);
	CHECK_EQ_INT(backend_gemm_env(NULL, "bf16", err), 0);	/* be NULL: the value checked only */
	CHECK_EQ_INT(backend_gemm_env(NULL, "fp16", err), -1);
	CHECK_EQ_STR(err, "'fp16': not int8, bf16 or bf16-mirror");
	CHECK_EQ_INT(backend_gemm_env(be3, "BF16", err), -1);
	CHECK_EQ_STR(err, "'BF16': not int8, bf16 or bf16-mirror");
	CHECK_EQ_INT(backend_gemm_env(NULL, "bf16-mirror ", err), -1);
}

/* bf16 of f, nearest with ties to even (what the GPU's __float2bfloat16_rn gives). */
static float
to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u = (u + 0x7fffu + ((u >> 16) & 1)) & 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}

/* y[m][ne1] of weight deq rows against inputs xs, each operand through r (or as is). */
static void
ref_product(const float *deq, const float *xs, int ne0, int ne1, int m, int round, float *y)
{
	for (int r = 0; r < m; r++)
		for (int j = 0; j < ne1; j++) {
			double s = 0;
			for (int i = 0; i < ne0; i++) {
				float a = deq[(size_t)j * ne0 + i], b = xs[(size_t)r * ne0 + i];
				s += (double)(round ? to_bf16(a) : a) * (round ? to_bf16(b) : b);
			}
			y[(size_t)r * ne1 + j] = (float)s;
		}
}

/*
 * backend_cpu_gemm_emulate: past its rows, the CUDA backend's prompt numerics by
 * kind (bf16: Q8_0 on its int8 inputs' values and Q4_K, Q5_0 on the inputs, both
 * rounded with the weights to bf16; int8: Q8_0 as the CPU's own, Q4_K and Q5_0 in
 * float: cuda/matvec.cu's dequantized tiles); up to its rows, and with it off, the
 * CPU's own bits.
 */
TEST(gemm_emulation_is_the_gpus_prompt_numerics_past_its_rows)
{
	enum { NE0 = 256, NE1 = 24, M = 40, ROWS = 32 };
	static const int types[] = { QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_0 };

	for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
		struct wbuf wb = make_weight(types[t], NE0, NE1);
		float *x = rnd((size_t)M * NE0, 1), *xs = act_seen(types[t], x, NE0, M);
		float *own = malloc((size_t)M * NE1 * 4), *y = malloc((size_t)M * NE1 * 4);
		float *ref = malloc((size_t)M * NE1 * 4);
		struct backend_weight w;

		CHECK(backend_weight_init(be3, &w, types[t], NE0, NE1, wb.data, 1) == 0);
		CHECK(backend_matmul(be3, &w, x, NE0, own, NE1, M) == 0);
		for (int kind = 0; kind < 2; kind++) {
			CHECK(backend_cpu_gemm_emulate(be3, kind ? BACKEND_GEMM_BF16 :
			    BACKEND_GEMM_INT8, ROWS) == 0);
			CHECK(backend_matmul(be3, &w, x, NE0, y, NE1, ROWS) == 0);	/* a step */
			CHECK(same(y, own, (size_t)ROWS * NE1));
			CHECK(backend_matmul(be3, &w, x, NE0, y, NE1, M) == 0);	/* a prompt */
			if (types[t] == QUANT_Q8_0 && kind == 0) {
				CHECK(same(y, own, (size_t)M * NE1));	/* the int8 GEMM: the CPU's */
				continue;
			}
			/* bf16: Q8_0's int8 values (xs), the others' inputs; int8: those in float */
			ref_product(wb.deq, types[t] == QUANT_Q8_0 ? xs : x, NE0, NE1, M, kind, ref);
			CHECK(same(y, ref, (size_t)M * NE1));
			CHECK(!same(y, own, (size_t)M * NE1));
		}
		CHECK(backend_cpu_gemm_emulate(be3, -1, 1) == 0);	/* off: the CPU's own */
		CHECK(backend_matmul(be3, &w, x, NE0, y, NE1, M) == 0);
		CHECK(same(y, own, (size_t)M * NE1));
		backend_weight_release(be3, &w);
		free_weight(&wb);
		free(x), free(xs), free(own), free(y), free(ref);
	}
	CHECK_EQ_INT(backend_cpu_gemm_emulate(be3, 7, 32), -1);
	CHECK_EQ_STR(backend_errmsg(be3), "gemm emulation: kind 7");
	CHECK_EQ_INT(backend_cpu_gemm_emulate(be3, BACKEND_GEMM_BF16, 0), -1);
}

TEST(step_rows_stay_32_on_the_cpu_and_memra_cuda_step_rows_is_16_or_32)
{
	char err[UTIL_ERRLEN];

	CHECK_EQ_INT(backend_step_rows(be3), BACKEND_ROWS_MAX);
	CHECK_EQ_INT(backend_rows_set(be3, BACKEND_ROWS_MIN), 0);	/* a no-op here */
	CHECK_EQ_INT(backend_step_rows(be3), BACKEND_ROWS_MAX);
	CHECK_EQ_INT(backend_rows_set(be3, 24), -1);
	CHECK_EQ_STR(backend_errmsg(be3), "step rows 24: not 16 or 32");
	CHECK_EQ_INT(backend_rows_env(be3, NULL, err), 0);
	CHECK_EQ_INT(backend_rows_env(be3, "", err), 0);
	CHECK_EQ_INT(backend_rows_env(be3, "16", err), 0);
	CHECK_EQ_INT(backend_rows_env(be3, "32", err), 0);
	CHECK_EQ_INT(backend_step_rows(be3), BACKEND_ROWS_MAX);
	CHECK_EQ_INT(backend_rows_env(NULL, "16", err), 0);	/* be NULL: the value checked only */
	CHECK_EQ_INT(backend_rows_env(NULL, "64", err), -1);
	CHECK_EQ_STR(err, "'64': not 16 or 32");
	CHECK_EQ_INT(backend_rows_env(be3, "016", err), -1);
	CHECK_EQ_STR(err, "'016': not 16 or 32");
}

TEST(memra_cuda_moe_group_is_0_1_all_or_cc_and_a_no_op_on_the_cpu)
{
	char err[UTIL_ERRLEN];

	CHECK_EQ_INT(backend_moe_group_set(be3, BACKEND_MOE_GROUP_OFF), 0);	/* no-ops here */
	CHECK_EQ_INT(backend_moe_group_set(be3, BACKEND_MOE_GROUP_ALL), 0);
	CHECK_EQ_INT(backend_moe_group_set(be3, BACKEND_MOE_GROUP_CC), 0);
	CHECK_EQ_INT(backend_moe_group_set(be3, 4), -1);
	CHECK_EQ_STR(backend_errmsg(be3), "moe group: mode 4 (0, 1, 2 or 3)");
	CHECK_EQ_INT(backend_moe_group_env(be3, NULL, err), 0);
	CHECK_EQ_INT(backend_moe_group_env(be3, "", err), 0);
	CHECK_EQ_INT(backend_moe_group_env(be3, "0", err), 0);
	CHECK_EQ_INT(backend_moe_group_env(be3, "1", err), 0);
	CHECK_EQ_INT(backend_moe_group_env(be3, "all", err), 0);
	CHECK_EQ_INT(backend_moe_group_env(be3, "cc", err), 0);
	CHECK_EQ_INT(backend_moe_group_env(NULL, "all", err), 0);	/* be NULL: checked only */
	CHECK_EQ_INT(backend_moe_group_env(NULL, "2", err), -1);
	CHECK_EQ_STR(err, "'2': not 0, 1, all or cc");
	CHECK_EQ_INT(backend_moe_group_env(be3, "ALL", err), -1);
	CHECK_EQ_STR(err, "'ALL': not 0, 1, all or cc");
	CHECK_EQ_INT(backend_moe_group_env(be3, "tc", err), -1);
	CHECK_EQ_STR(err, "'tc': not 0, 1, all or cc");
}

TEST(host_memory_takes_what_backend_read_writes)
{
	float *d = backend_alloc(be3, 1000), *h = backend_host_alloc(be3, 1000), v[1000];

	CHECK(d != NULL && h != NULL);
	for (int i = 0; i < 1000; i++)
		v[i] = (float)i * 0.5f - 7;
	CHECK_EQ_INT(backend_write(be3, d, v, 1000), 0);
	CHECK_EQ_INT(backend_read(be3, h, d, 1000), 0);
	CHECK(memcmp(h, v, sizeof v) == 0);
	backend_host_free(be3, h);
	backend_host_free(be3, NULL);	/* a no-op */
	backend_mfree(be3, d);
}

/* --- the mixture of experts --- */

TEST(moe_route_is_softmax_top_k_renormalised_lowest_id_on_ties)
{
	/* ties: experts 1, 2, 3 and 5 share the top value; the lowest ids win
	 * (torch.topk's CPU order among equal values is another: 3, 5) */
	float x[3][8] = { { 0.1f, 0.3f, 0.3f, 0.3f, 0.0f, 0.3f, -1, -2 },
			  { 0, 0, 0, 0, 0, 0, 0, 0 } };
	int32_t ids[3 * 3];
	float w[3 * 3];
	double p[8], sum = 0, top = 0;

	for (int i = 0; i < 8; i++)
		x[2][i] = frand() * 4;
	CHECK(backend_moe_route(be1, &x[0][0], 8, 3, 8, 3, ids, w) == 0);
	CHECK_EQ_INT(ids[0], 1);
	CHECK_EQ_INT(ids[1], 2);
	CHECK_EQ_INT(ids[2], 3);
	CHECK_NEAR(w[0], 1.0 / 3, 1e-7);
	CHECK_NEAR(w[2], 1.0 / 3, 1e-7);
	CHECK_EQ_INT(ids[3], 0);	/* all equal: 0, 1, 2 */
	CHECK_EQ_INT(ids[4], 1);
	CHECK_EQ_INT(ids[5], 2);
	/* a random row against a double softmax, its top 3, renormalised */
	for (int i = 0; i < 8; i++)
		sum += p[i] = exp(x[2][i]);
	for (int j = 0; j < 3; j++) {
		int e = ids[6 + j];

		for (int i = 0; i < 8; i++)	/* nothing left out is larger */
			CHECK(p[i] <= p[e] || i == ids[6] || i == ids[7] || i == ids[8]);
		top += p[e];
	}
	for (int j = 0; j < 3; j++)
		CHECK_NEAR(w[6 + j], p[ids[6 + j]] / top, 1e-6);
	CHECK(w[6] >= w[7] && w[7] >= w[8]);
	/* top 1: the weight is 1 */
	CHECK(backend_moe_route(be1, &x[2][0], 8, 1, 8, 1, ids, w) == 0);
	CHECK(w[0] == 1.0f);
	CHECK(backend_moe_route(be1, &x[2][0], 8, 1, 8, 9, ids, w) == -1);
	CHECK(backend_moe_route(be1, &x[2][0], 8, 1, 8, 0, ids, w) == -1);
}

/* backend_geglu_matmul is backend_geglu in place, then backend_matmul, bit for bit. */
TEST(geglu_matmul_is_the_geglu_then_the_product)
{
	enum { M = 2, N = 64, NO = 24 };
	struct wbuf wb = make_weight(QUANT_Q8_0, N, NO);
	struct backend_weight W;
	float *g1 = rnd(M * N, 3), *g2 = dup(g1, M * N), *u = rnd(M * N, 1);
	float *y1 = malloc(M * NO * 4), *y2 = malloc(M * NO * 4);

	CHECK(backend_weight_init(be1, &W, QUANT_Q8_0, N, NO, wb.data, 1.0f) == 0);
	CHECK(backend_geglu_matmul(be1, g1, u, M, &W, y1) == 0);
	CHECK(backend_geglu(be1, g2, N, u, N, g2, N, M, N) == 0);
	CHECK(backend_matmul(be1, &W, g2, N, y2, NO, M) == 0);
	CHECK(same(g1, g2, M * N) && same(y1, y2, M * NO));
	CHECK(backend_geglu_matmul(be1, g1, u, -1, &W, y1) == -1);
	backend_weight_release(be1, &W);
	free_weight(&wb);
	free(g1), free(g2), free(u), free(y1), free(y2);
}

/*
 * backend_mlp is the gate and up products, SwiGLU (with a limit: its
 * clamps), then the down product, bit for bit; without a limit also
 * backend_swiglu_limit's at 0 (step35's layers without a clamp, which
 * called it so before).  Gate and up of two types (two passes on the CPU).
 * Mismatched shapes, a negative limit and negative rows are refused.
 */
TEST(mlp_is_the_products_the_activation_then_the_down_product)
{
	enum { M = 3, N = 64, NF = 96 };
	struct wbuf gb = make_weight(QUANT_Q8_0, N, NF), ub = make_weight(QUANT_F16, N, NF);
	struct wbuf db = make_weight(QUANT_Q8_0, NF, N);
	struct backend_weight wg, wu, wd;
	float *x = rnd(M * N, 2), *f1 = malloc(M * NF * 4), *u1 = malloc(M * NF * 4);
	float *f2 = malloc(M * NF * 4), *u2 = malloc(M * NF * 4), *y1 = malloc(M * N * 4);
	float *y2 = malloc(M * N * 4), *y3 = malloc(M * N * 4);

	CHECK(backend_weight_init(be1, &wg, QUANT_Q8_0, N, NF, gb.data, 1.0f) == 0);
	CHECK(backend_weight_init(be1, &wu, QUANT_F16, N, NF, ub.data, 1.0f) == 0);
	CHECK(backend_weight_init(be1, &wd, QUANT_Q8_0, NF, N, db.data, 1.0f) == 0);
	for (int li = 0; li < 2; li++) {
		float lim = li ? 1.25f : 0.0f;

		CHECK(backend_mlp(be1, &wg, &wu, &wd, x, M, lim, f1, u1, y1) == 0);
		CHECK(backend_matmul(be1, &wg, x, N, f2, NF, M) == 0);
		CHECK(backend_matmul(be1, &wu, x, N, u2, NF, M) == 0);
		if (li)
			CHECK(backend_swiglu_limit(be1, f2, u2, f2, M * NF, lim) == 0);
		else
			CHECK(backend_swiglu(be1, f2, u2, f2, M * NF) == 0);
		CHECK(backend_matmul(be1, &wd, f2, NF, y2, N, M) == 0);
		CHECK(same(f1, f2, M * NF) && same(y1, y2, M * N));
		if (!li) {	/* the unclamped limit's op: the same bits */
			CHECK(backend_matmul(be1, &wu, x, N, u2, NF, M) == 0);
			CHECK(backend_matmul(be1, &wg, x, N, f2, NF, M) == 0);
			CHECK(backend_swiglu_limit(be1, f2, u2, f2, M * NF, 0.0f) == 0);
			CHECK(backend_matmul(be1, &wd, f2, NF, y3, N, M) == 0);
			CHECK(same(y1, y3, M * N));
		}
	}
	CHECK(backend_mlp(be1, &wg, &wu, &wg, x, M, 0.0f, f1, u1, y1) == -1);	/* down's shape */
	CHECK(backend_mlp(be1, &wg, &wd, &wd, x, M, 0.0f, f1, u1, y1) == -1);	/* up's shape */
	CHECK(backend_mlp(be1, &wg, &wu, &wd, x, M, -1.0f, f1, u1, y1) == -1);
	CHECK(backend_mlp(be1, &wg, &wu, &wd, x, -1, 0.0f, f1, u1, y1) == -1);
	backend_weight_release(be1, &wg);
	backend_weight_release(be1, &wu);
	backend_weight_release(be1, &wd);
	free_weight(&gb), free_weight(&ub), free_weight(&db);
	free(x), free(f1), free(u1), free(f2), free(u2), free(y1), free(y2), free(y3);
}

/* backend_rmsnorm_pair is two backend_rmsnorm of x, the first scaled, bit for bit. */
TEST(rmsnorm_pair_is_two_norms_of_one_row)
{
	enum { M = 2, N = 48 };
	float *x = rnd(M * N, 2), *w1 = rnd(N, 1), *w2 = rnd(N, 1);
	float *a1 = malloc(M * N * 4), *b1 = malloc(M * N * 4), *a2 = malloc(M * N * 4);
	float *b2 = malloc(M * N * 4);

	for (int sc = 0; sc < 2; sc++) {
		float s = sc ? 0.125f : 1.0f;

		CHECK(backend_rmsnorm_pair(be1, x, w1, s, a1, w2, b1, 1e-6f, M, N) == 0);
		CHECK(backend_rmsnorm(be1, x, N, w1, a2, N, M, N, 1e-6f) == 0);
		if (sc)
			CHECK(backend_scale(be1, a2, M * N, s) == 0);
		CHECK(backend_rmsnorm(be1, x, N, w2, b2, N, M, N, 1e-6f) == 0);
		CHECK(same(a1, a2, M * N) && same(b1, b2, M * N));
	}
	CHECK(backend_rmsnorm_pair(be1, x, w1, 1, a1, w2, b1, 1e-6f, M, 0) == -1);
	free(x), free(w1), free(w2), free(a1), free(b1), free(a2), free(b2);
}

/* backend_add_rmsnorm is backend_add, then backend_rmsnorm of the sum, bit for bit. */
TEST(add_rmsnorm_is_the_add_then_the_norm)
{
	enum { M = 3, N = 40 };
	float *x1 = rnd(M * N, 2), *x2 = dup(x1, M * N), *t = rnd(M * N, 1), *w = rnd(N, 1);
	float *y1 = malloc(M * N * sizeof *y1), *y2 = malloc(M * N * sizeof *y2);

	CHECK(backend_add_rmsnorm(be1, x1, t, w, y1, 1e-6f, M, N) == 0);
	CHECK(backend_add(be1, x2, t, M * N) == 0);
	CHECK(backend_rmsnorm(be1, x2, N, w, y2, N, M, N, 1e-6f) == 0);
	CHECK(same(x1, x2, M * N) && same(y1, y2, M * N));
	CHECK(backend_add_rmsnorm(be1, x1, t, w, y1, 1e-6f, M, 0) == -1);
	free(x1), free(x2), free(t), free(w), free(y1), free(y2);
}

/*
 * backend_moe_route_scale is the route, then the per-expert scale, bit for
 * bit; a row of NaN logits picks nothing: ids -1, NaN weights, and the
 * scale reads no s[-1] (the sanitizer build would see it).
 */
TEST(moe_route_scale_is_the_route_then_the_scale)
{
	float x[2][8], s[8], w1[6], w2[6];
	int32_t i1[6], i2[6];

	for (int i = 0; i < 8; i++)
		x[0][i] = frand() * 4, x[1][i] = NAN, s[i] = 0.5f + frand();
	CHECK(backend_moe_route_scale(be1, &x[0][0], 8, 1, 8, 3, s, i1, w1) == 0);
	CHECK(backend_moe_route(be1, &x[0][0], 8, 1, 8, 3, i2, w2) == 0);
	CHECK(backend_moe_scale(be1, w2, i2, 1, 3, s, 8) == 0);
	CHECK(memcmp(i1, i2, 3 * sizeof *i1) == 0 && same(w1, w2, 3));
	CHECK(backend_moe_route_scale(be1, &x[0][0], 8, 2, 8, 3, s, i1, w1) == 0);
	for (int j = 3; j < 6; j++)
		CHECK(i1[j] == -1 && isnan(w1[j]));
	CHECK(backend_moe_route_scale(be1, &x[0][0], 8, 1, 8, 9, s, i1, w1) == -1);
}

/* gemma4's ops: GELU (tanh) gates, soft-cap, scale, per-expert scale, against doubles. */
TEST(gemma_elementwise_ops_match_reference)
{
	float g[2][5], u[2][5], y[2][4], x[6] = { -40, -3, 0, 0.5f, 3, 40 };
	float w[4] = { 1, 2, 3, 4 }, s[3] = { 0.5f, 2, 4 };
	int32_t ids[4] = { 2, 0, 1, 2 };

	CHECK(backend_gemma(be1) == 1);
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < 5; i++)
			g[r][i] = frand() * 4, u[r][i] = frand();
	CHECK(backend_geglu(be1, &g[0][0], 5, &u[0][0], 5, &y[0][0], 4, 2, 4) == 0);
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < 4; i++) {
			double v = g[r][i];
			double ge = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));

			CHECK_NEAR(y[r][i], ge * u[r][i], 1e-6);
		}
	CHECK(backend_softcap(be1, x, 6, 30) == 0);
	CHECK_NEAR(x[0], 30 * tanh(-40.0 / 30), 1e-5);
	CHECK(x[2] == 0);
	CHECK_NEAR(x[4], 30 * tanh(3.0 / 30), 1e-6);
	CHECK(backend_softcap(be1, x, 6, 0) == -1);
	CHECK(backend_scale(be1, w, 4, 0.5f) == 0 && w[3] == 2.0f);
	CHECK(backend_moe_scale(be1, w, ids, 2, 2, s, 3) == 0);
	CHECK(w[0] == 2.0f && w[1] == 0.5f && w[2] == 3.0f && w[3] == 8.0f);
}

/*
 * backend_norm_residual is Gemma-4's post-FFN side: x += rmsnorm(rmsnorm(a) *
 * wa + rmsnorm(b) * wb) * w2, then x *= s; each form near that formula in
 * double and bit for bit the plain ops it names (a and b spent); bad shapes
 * refused.
 */
TEST(norm_residual_is_the_post_ffn_norms_and_residual_add)
{
	enum { M = 3, N = 48 };
	float *x = rnd(M * N, 2), *a = rnd(M * N, 3), *b = rnd(M * N, 1);
	float *wa = rnd(N, 1), *wb = rnd(N, 1), *w2 = rnd(N, 1);

	for (int form = 0; form < 8; form++) {
		int two = form & 1, fin = form & 2;
		float s = form & 4 ? 0.25f : 1.0f;
		float *x1 = dup(x, M * N), *a1 = dup(a, M * N), *b1 = dup(b, M * N);
		float *x2 = dup(x, M * N), *a2 = dup(a, M * N), *b2 = dup(b, M * N);

		CHECK(backend_norm_residual(be1, x1, a1, wa, two ? b1 : NULL, wb, fin ? w2 : NULL,
		    1e-6f, s, M, N) == 0);
		for (int r = 0; r < M; r++) {
			double u[N], sa = 0, sb = 0, su = 0;

			for (int i = 0; i < N; i++)
				sa += (double)a[r * N + i] * a[r * N + i],
				sb += (double)b[r * N + i] * b[r * N + i];
			for (int i = 0; i < N; i++) {
				u[i] = a[r * N + i] / sqrt(sa / N + 1e-6) * wa[i];
				if (two)
					u[i] += b[r * N + i] / sqrt(sb / N + 1e-6) * wb[i];
				su += u[i] * u[i];
			}
			for (int i = 0; i < N; i++) {
				double v = fin ? u[i] / sqrt(su / N + 1e-6) * w2[i] : u[i];

				CHECK_NEAR(x1[r * N + i], (x[r * N + i] + v) * s, 1e-5);
			}
		}
		CHECK(backend_rmsnorm(be1, a2, N, wa, a2, N, M, N, 1e-6f) == 0);
		if (two)
			CHECK(backend_rmsnorm(be1, b2, N, wb, b2, N, M, N, 1e-6f) == 0 &&
			    backend_add(be1, a2, b2, M * N) == 0);
		if (fin)
			CHECK(backend_rmsnorm(be1, a2, N, w2, a2, N, M, N, 1e-6f) == 0);
		CHECK(backend_add(be1, x2, a2, M * N) == 0);
		if (s != 1.0f)
			CHECK(backend_scale(be1, x2, M * N, s) == 0);
		CHECK(same(x1, x2, M * N));
		free(x1), free(a1), free(b1), free(x2), free(a2), free(b2);
	}
	CHECK(backend_norm_residual(be1, x, a, wa, NULL, NULL, NULL, 1e-6f, 1, M, 0) == -1);
	CHECK(strstr(backend_errmsg(be1), "norm_residual: bad shape") != NULL);
	free(x), free(a), free(b), free(wa), free(wb), free(w2);
}

/*
 * A sliding window (gemma4, step35) is attention over the last window keys
 * only, key j kept for the query at i when j > i - window: the same bits as
 * a cache that starts at the window, on one thread or three; decode equals
 * prefill.
 */
TEST(windowed_attention_sees_the_last_window_keys)
{
	struct backend_attn a = { 4, 2, 16, 0.3f, 0, 0, 0, 3, NULL, 0 }, full = a;
	int m = 7, kvd = 32, ldq = 64;
	float *q = rnd((size_t)m * ldq, 1), *kc = rnd((size_t)m * kvd, 1);
	float *vc = rnd((size_t)m * kvd, 1), o[7][64], o1[64], ref[64];

	full.window = 0;
	CHECK(backend_attention(be3, &a, q, ldq, 16, kc, vc, m, 0, &o[0][0]) == 0);
	for (int r = 0; r < m; r++) {
		int lo = r + 1 > 3 ? r + 1 - 3 : 0;

		/* the window's keys alone, as a cache that starts at lo */
		CHECK(backend_attention(be1, &full, q + (size_t)r * ldq, ldq, 16,
		    kc + (size_t)lo * kvd, vc + (size_t)lo * kvd, 1, r - lo, ref) == 0);
		CHECK(backend_attention(be1, &a, q + (size_t)r * ldq, ldq, 16, kc, vc, 1, r, o1) == 0);
		for (int i = 0; i < 64; i++) {
			CHECK(o[r][i] == ref[i]);
			CHECK(o1[i] == o[r][i]);
		}
	}
	a.ggml = 1;
	CHECK(backend_attention(be1, &a, q, ldq, 16, kc, vc, m, 0, &o[0][0]) == -1);
	a.ggml = 0, a.window = -1;
	CHECK(backend_attention(be1, &a, q, ldq, 16, kc, vc, m, 0, &o[0][0]) == -1);
	free(q), free(kc), free(vc);
}

/*
 * A ring cache (a DFlash drafter's sliding layer): key j in row j % ring,
 * the ring holding the keys its rows see.  The same bits as a whole cache
 * with the window on the same path (one thread, three, the portable one),
 * one row or two at a time, whichever row the window starts in; a
 * ring without a window, with a window wider than it, with a row that
 * sees later keys than it holds or with llama.cpp's orders is refused (at
 * positions in backend memory: ring_caches_at_backend_positions_...; rows
 * that see later keys: an_image_block_over_a_ring_...).
 */
TEST(a_ring_cache_attends_as_the_whole_cache_does)
{
	enum { N = 40, KVD = 32, LDQ = 64, R = 7 };
	struct backend_attn a = { 4, 2, 16, 0.3f, 0, 0, 0, 5, NULL, R }, whole = a;
	float *q = rnd(2 * LDQ, 1), *kc = rnd((size_t)N * KVD, 1), *vc = rnd((size_t)N * KVD, 1);
	float rk[R * KVD], rv[R * KVD], o[2][64], ref[2][64];
	struct backend *bs[] = { be1, be3, bes };
	int32_t hi[2] = { 0, 1 }, d[1] = { 0 };
	long differ = 0;

	whole.ring = 0;
	for (int p = 0; p + 1 < N; p++) {
		int m = 1 + p % 2;	/* rows p, p + 1 alike every other time */

		for (int j = p + m - R > 0 ? p + m - R : 0; j < p + m; j++)
			memcpy(rk + (j % R) * KVD, kc + (size_t)j * KVD, sizeof rk / R),
			memcpy(rv + (j % R) * KVD, vc + (size_t)j * KVD, sizeof rv / R);
		for (int b = 0; b < 3; b++) {
			CHECK(backend_attention(bs[b], &whole, q, LDQ, 16, kc, vc, m, p, &ref[0][0]) == 0);
			CHECK(backend_attention(bs[b], &a, q, LDQ, 16, rk, rv, m, p, &o[0][0]) == 0);
			differ += memcmp(o, ref, m * sizeof o[0]) != 0;
		}
	}
	CHECK_EQ_INT(differ, 0);
	a.window = 0;
	CHECK(backend_attention(be1, &a, q, LDQ, 16, rk, rv, 1, 3, &o[0][0]) == -1);
	a.window = R + 1;
	CHECK(backend_attention(be1, &a, q, LDQ, 16, rk, rv, 1, 3, &o[0][0]) == -1);
	a.window = 5, a.hi = hi, hi[0] = 1, hi[1] = 1;	/* row 0 sees 0..1: in a ring of 2, not 1 */
	a.ring = 1, a.window = 1;
	CHECK(backend_attention(be1, &a, q, LDQ, 16, rk, rv, 2, 0, &o[0][0]) == -1);
	CHECK(strstr(backend_errmsg(be1), "more than a ring of 1 rows holds") != NULL);
	a.ring = R, a.window = 5;
	a.hi = NULL, a.ggml = 1;
	CHECK(backend_attention(be1, &a, q, LDQ, 16, rk, rv, 1, 3, &o[0][0]) == -1);
	a.ggml = 0, a.ring = -1;
	CHECK(backend_attention(be1, &a, q, LDQ, 16, rk, rv, 1, 3, &o[0][0]) == -1);
	a.ring = R, a.hi = hi;
	CHECK(backend_attention_dpos(be1, &a, q, LDQ, 16, rk, rv, 1, d, R, &o[0][0]) == -1);
	free(q), free(kc), free(vc);
}

/*
 * An image's rows over a ring (Gemma-4's sliding layers, whose image rows
 * see the whole image): rows that see later keys (backend_attn.hi), an
 * image block of 4 rows amid causal rows, windows of 5, over a ring of
 * window + rows - 1 that the call's keys were stored into: the whole
 * cache's bits on the three CPU paths, at every position from 0 to past
 * the ring's fourth wrap.
 */
TEST(an_image_block_over_a_ring_attends_as_over_the_whole_cache)
{
	enum { N = 40, KVD = 32, LDQ = 64, M = 6, W = 5, R = W + M - 1 };
	struct backend_attn a = { 4, 2, 16, 0.3f, 0, 0, 0, W, NULL, R }, whole = a;
	float *q = rnd(M * LDQ, 1), *kc = rnd((size_t)N * KVD, 1), *vc = rnd((size_t)N * KVD, 1);
	float rk[R * KVD], rv[R * KVD], o[M * LDQ], ref[M * LDQ];
	struct backend *bs[] = { be1, be3, bes };
	int32_t hi[M];
	long differ = 0;

	whole.ring = 0;
	for (int p = 0; p + M <= N; p++) {
		for (int r = 0; r < M; r++)	/* rows 1..4 an image: each sees row 4 */
			hi[r] = r >= 1 && r <= 4 ? p + 4 : p + r;
		a.hi = whole.hi = hi;
		for (int j = p + M - R > 0 ? p + M - R : 0; j < p + M; j++)
			memcpy(rk + (j % R) * KVD, kc + (size_t)j * KVD, KVD * sizeof *rk),
			memcpy(rv + (j % R) * KVD, vc + (size_t)j * KVD, KVD * sizeof *rv);
		for (int b = 0; b < 3; b++) {
			CHECK(backend_attention(bs[b], &whole, q, LDQ, 16, kc, vc, M, p, ref) == 0);
			CHECK(backend_attention(bs[b], &a, q, LDQ, 16, rk, rv, M, p, o) == 0);
			differ += memcmp(o, ref, sizeof o) != 0;
		}
	}
	CHECK_EQ_INT(differ, 0);
	free(q), free(kc), free(vc);
}

/*
 * Rings at positions in backend memory (a recorded decode step of a
 * sliding layer whose cache is a ring): backend_kv_store and
 * backend_qk_norm_rope's store put position p in row p % ring, a store of
 * two rows across the ring's end in its last row and its first, and
 * backend_attention_dpos over the ring gives backend_attention's bits at
 * the host position, which are the whole cache's; a ring shorter than the
 * rows stored is refused.
 */
TEST(ring_caches_at_backend_positions_store_and_attend_as_at_host_positions)
{
	enum { N = 40, NH = 4, NKV = 2, HD = 16, KVD = NKV * HD, LDQ = NH * HD, R = 7 };
	struct backend_attn a = { NH, NKV, HD, 0.3f, 0, 0, 0, 5, NULL, R }, whole = a;
	struct backend_qkn qk = { NH, NKV, HD, HD, NULL, NULL, 1e-6f, 8, BACKEND_ROPE_NEOX, 1e4f,
	    1, R };
	float *q = rnd(2 * LDQ, 1), *kl = rnd((size_t)N * KVD, 1), *vl = rnd((size_t)N * KVD, 1);
	float *qn = rnd(HD, 1), *kn = rnd(HD, 1);
	float rk[R * KVD], rv[R * KVD], want_k[R * KVD], want_v[R * KVD];
	float qk_k[R * KVD], qk_v[R * KVD], o[2 * LDQ], ref[2 * LDQ], x[2 * LDQ], y[2 * KVD];
	float z[2 * KVD];
	long differ = 0;

	whole.ring = 0, qk.qn = qn, qk.kn = kn;
	memset(rk, 0, sizeof rk), memset(rv, 0, sizeof rv);
	memcpy(want_k, rk, sizeof rk), memcpy(want_v, rv, sizeof rv);
	memcpy(qk_k, rk, sizeof rk), memcpy(qk_v, rv, sizeof rv);
	for (int p = 0; p + 2 <= N; p += 1 + p % 2) {
		int m = 1 + p % 2, d[2] = { p, p + 1 }, pos[2] = { p, p + 1 };

		/* the store: rows p .. p + m - 1 (two across the end when p % R is R - 1) */
		CHECK(backend_kv_store(be3, rk, rv, kl + (size_t)p * KVD, vl + (size_t)p * KVD, KVD,
		    m, d, N, R) == 0);
		for (int j = p; j < p + m; j++)
			memcpy(want_k + (j % R) * KVD, kl + (size_t)j * KVD, KVD * sizeof *rk),
			memcpy(want_v + (j % R) * KVD, vl + (size_t)j * KVD, KVD * sizeof *rv);
		differ += memcmp(rk, want_k, sizeof rk) != 0 || memcmp(rv, want_v, sizeof rv) != 0;
		/* qk_norm_rope's store: the normed, roped rows into the ring at the same rows */
		memcpy(x, q, (size_t)m * LDQ * sizeof *x);
		memcpy(y, kl + (size_t)p * KVD, (size_t)m * KVD * sizeof *y);
		memcpy(z, vl + (size_t)p * KVD, (size_t)m * KVD * sizeof *z);
		CHECK(backend_qk_norm_rope(be3, &qk, x, y, z, m, NULL, d, qk_k, qk_v, N) == 0);
		for (int r = 0; r < m; r++)
			differ += memcmp(qk_k + ((p + r) % R) * KVD, y + r * KVD, KVD * sizeof *y) != 0 ||
			    memcmp(qk_v + ((p + r) % R) * KVD, z + r * KVD, KVD * sizeof *z) != 0;
		(void)pos;
		/* attention over the ring at d_pos: the host position's bits, the whole cache's */
		CHECK(backend_attention_dpos(be3, &a, q, LDQ, HD, rk, rv, m, d, N, o) == 0);
		CHECK(backend_attention(be3, &whole, q, LDQ, HD, kl, vl, m, p, ref) == 0);
		differ += memcmp(o, ref, (size_t)m * LDQ * sizeof *o) != 0;
		CHECK(backend_attention(be3, &a, q, LDQ, HD, rk, rv, m, p, ref) == 0);
		differ += memcmp(o, ref, (size_t)m * LDQ * sizeof *o) != 0;
	}
	CHECK_EQ_INT(differ, 0);
	{
		int d[2] = { 9, 10 };

		CHECK(backend_kv_store(be3, rk, rv, kl, vl, KVD, 2, d, N, 1) == -1);
		CHECK(strstr(backend_errmsg(be3), "a ring of 1") != NULL);
		CHECK(backend_kv_store(be3, rk, rv, kl, vl, KVD, 2, d, N, -1) == -1);
		qk.ring = 1;
		CHECK(backend_qk_norm_rope(be3, &qk, x, y, z, 2, NULL, d, qk_k, qk_v, N) == -1);
		CHECK(backend_attention_dpos(be3, &a, q, LDQ, HD, rk, rv, 2, d, 10, o) == -1);
	}
	free(q), free(kl), free(vl), free(qn), free(kn);
}

/*
 * backend_clamp is torch.clamp (NaN stays NaN, infinities to the bounds,
 * one-sided with -FLT_MAX or FLT_MAX), and backend_attn_hi is its own
 * capability: a table without attn_hi refuses rows that see later keys
 * and rings but clamps; one without clamp refuses to clamp but attends
 * (backend_has_clamp says which).
 */
TEST(clamp_and_attn_hi_are_separate_ops)
{
	float x[6] = { NAN, INFINITY, -INFINITY, -0.0f, 0.75f, -3.0f };
	struct backend_ops no_hi = *be1->ops, no_clamp = *be1->ops;
	struct backend b = *be1;
	struct backend_attn a = { 4, 2, 16, 0.3f, 0, 0, 0, 0, NULL, 0 };
	float *q = rnd(2 * 64, 1), *kc = rnd(2 * 32, 1), *vc = rnd(2 * 32, 1), o[2][64];
	int32_t hi[2] = { 1, 1 };

	CHECK(backend_attn_hi(be1) == 1 && backend_has_clamp(be1) == 1);
	CHECK(backend_clamp(be1, x, 6, -1.0f, 0.5f) == 0);
	CHECK(isnan(x[0]) && x[1] == 0.5f && x[2] == -1.0f && x[3] == 0 && signbit(x[3]));
	CHECK(x[4] == 0.5f && x[5] == -1.0f);
	CHECK(backend_clamp(be1, x + 1, 5, -FLT_MAX, 0.25f) == 0 && x[1] == 0.25f && x[2] == -1.0f);
	no_hi.attn_hi = NULL, no_clamp.clamp = NULL;
	b.ops = &no_hi;
	CHECK(backend_attn_hi(&b) == 0);
	a.hi = hi;
	CHECK(backend_attention(&b, &a, q, 64, 16, kc, vc, 2, 0, &o[0][0]) == -1);
	CHECK(strstr(backend_errmsg(&b), "rows that see later keys") != NULL);
	a.hi = NULL, a.window = 2, a.ring = 2;
	CHECK(backend_attention(&b, &a, q, 64, 16, kc, vc, 1, 3, &o[0][0]) == -1);
	CHECK(strstr(backend_errmsg(&b), "rings of 2 rows") != NULL);
	CHECK(backend_clamp(&b, x, 6, -1.0f, 1.0f) == 0 && backend_has_clamp(&b) == 1);
	b.ops = &no_clamp;
	CHECK(backend_attn_hi(&b) == 1 && backend_has_clamp(&b) == 0);
	CHECK(backend_clamp(&b, x, 6, -1.0f, 1.0f) == -1);
	CHECK(strstr(backend_errmsg(&b), "clamp: not on backend") != NULL);
	a.hi = hi, a.window = 0, a.ring = 0;
	CHECK(backend_attention(be1, &a, q, 64, 16, kc, vc, 2, 0, &o[0][0]) == 0);
	free(q), free(kc), free(vc);
}

/*
 * The vision tower opens on a backend by its ops, not its name: on the
 * CPU's table, and not on one without clamp, attn_hi, Gemma-4's geglu or
 * the half products (each refused with the reason).  vision_hparams.half
 * says whether a matrix is BF16 / F16: not in g4-vision's F32 tower, in its
 * mmproj-bf16.gguf and mmproj-f16.gguf.
 */
TEST(vision_tower_opens_on_a_backend_with_its_ops_only)
{
	static const char *const fx = "t/data/gemma4/g4-vision";
	struct backend_ops ops[4] = { *be1->ops, *be1->ops, *be1->ops, *be1->ops };
	struct backend b = *be1;
	struct vision *v;
	char err[UTIL_ERRLEN];

	CHECK((v = vision_open(fx, be1, err)) != NULL);
	CHECK(vision_hparams(v)->half == 0);	/* F32: no half products */
	vision_close(v);
	for (int i = 0; i < 2; i++) {		/* its BF16 and F16 renditions */
		char f[128];
		snprintf(f, sizeof f, "%s/mmproj-%s.gguf", fx, i ? "f16" : "bf16");
		CHECK((v = vision_open(f, be1, err)) != NULL);
		CHECK(v != NULL && vision_hparams(v)->half == 1);
		vision_close(v);
	}
	ops[0].clamp = NULL, ops[1].attn_hi = NULL, ops[2].geglu = NULL;
	ops[3].matmul_half = NULL;
	for (int i = 0; i < 4; i++) {
		b.ops = &ops[i];
		CHECK(vision_open(fx, &b, err) == NULL);
		CHECK(strstr(err, "lacks the vision tower's ops") != NULL);
	}
}

/*
 * backend_matmul_half, llama.cpp's product of a half weight: the
 * activations rounded to the weight's type (nearest, ties to even) first.
 * With a weight of ones, one row is the sum of x as rounded: 1 + 2^-9
 * rounds to 1 in BF16 (below half an ulp), 1 + 2^-8 (a tie) to the even
 * 1, 1 + 3 * 2^-8 (a tie) to the even 1 + 2^-6; in F16 1 + 2^-12 to 1
 * and 1 + 3 * 2^-11 to 1 + 2^-9.  Random rows: the double sum of the
 * rounded operands within float order (1e-6 of sum |w x|), x untouched,
 * rows ldx / ldy apart, every thread count and the portable path bit for
 * bit, each row's bits its own; F32 weights: backend_matmul's bits.  A
 * backend without the op refuses it by name.
 */
static void
half_ones(int type, const float *xv, int n, double want)
{
	uint16_t one[4];
	float y = 0;
	struct backend_weight w;

	for (int i = 0; i < 4; i++)
		one[i] = type == QUANT_BF16 ? quant_f32_to_bf16(1.0f) : quant_f32_to_f16(1.0f);
	CHECK(backend_weight_init(be1, &w, type, n, 1, one, 1) == 0);
	CHECK(backend_matmul_half(be1, &w, xv, n, &y, 1, 1) == 0);
	if ((double)y != want)
		FAILF("%s: sum of the rounded row %.9g, want %.9g", quant_name(type), y, want);
	backend_weight_release(be1, &w);
}

static void
half_random(int type, int ne0, int ne1, int m)
{
	struct wbuf wb = make_weight(type, ne0, ne1);
	int ldx = ne0 + 3, ldy = ne1 + 5;
	float *x = rnd((size_t)m * ldx, 1), *x0 = dup(x, (size_t)m * ldx);
	float *xr = malloc((size_t)m * ne0 * sizeof *xr), *y[3], *y1 = malloc(ne1 * 4);
	double *ref = malloc((size_t)m * ne1 * sizeof *ref), *mag = malloc((size_t)m * ne1 * 8);
	struct backend *bs[] = { be1, be3, bes };
	struct backend_weight w[3];

	for (int r = 0; r < m; r++)
		for (int i = 0; i < ne0; i++) {
			float v = x[(size_t)r * ldx + i];
			xr[(size_t)r * ne0 + i] = type == QUANT_BF16 ? quant_bf16_to_f32(quant_f32_to_bf16(v)) :
			    type == QUANT_F16 ? quant_f16_to_f32(quant_f32_to_f16(v)) : v;
		}
	ref_matmul(wb.deq, xr, ne0, ne1, m, 1, ref);
	for (int r = 0; r < m; r++)
		for (int j = 0; j < ne1; j++) {
			double a = 0;
			for (int i = 0; i < ne0; i++)
				a += fabs((double)wb.deq[(size_t)j * ne0 + i] * xr[(size_t)r * ne0 + i]);
			mag[(size_t)r * ne1 + j] = a + 1e-30;
		}
	for (int b = 0; b < 3; b++) {
		int bad = 0;

		y[b] = malloc((size_t)m * ldy * 4);
		CHECK(backend_weight_init(bs[b], &w[b], type, ne0, ne1, wb.data, 1) == 0);
		CHECK(backend_matmul_half(bs[b], &w[b], x, ldx, y[b], ldy, m) == 0);
		CHECK(same(x, x0, (size_t)m * ldx));
		for (int r = 0; r < m; r++)
			for (int j = 0; j < ne1; j++)
				if (!(fabs(y[b][(size_t)r * ldy + j] - ref[(size_t)r * ne1 + j]) <=
				    1e-6 * mag[(size_t)r * ne1 + j]) && bad++ == 0)
					FAILF("%s %dx%d on %s: [%d][%d] %.9g, want %.9g", quant_name(type),
					    ne1, ne0, backend_name(bs[b]), r, j, y[b][(size_t)r * ldy + j],
					    ref[(size_t)r * ne1 + j]);
	}
	for (int r = 0; r < m; r++) {
		CHECK(same(y[0] + (size_t)r * ldy, y[1] + (size_t)r * ldy, ne1));
		CHECK(backend_matmul_half(be1, &w[0], x + (size_t)r * ldx, ldx, y1, ne1, 1) == 0);
		CHECK(same(y1, y[0] + (size_t)r * ldy, ne1));
	}
	if (type == QUANT_F32) {	/* backend_matmul's bits */
		CHECK(backend_matmul(be1, &w[0], x, ldx, y[1], ldy, m) == 0);
		for (int r = 0; r < m; r++)
			CHECK(same(y[0] + (size_t)r * ldy, y[1] + (size_t)r * ldy, ne1));
	}
	for (int b = 0; b < 3; b++)
		backend_weight_release(bs[b], &w[b]), free(y[b]);
	free_weight(&wb);
	free(x), free(x0), free(xr), free(y1), free(ref), free(mag);
}

TEST(matmul_half_rounds_activations_to_the_weights_type)
{
	const float b[4] = { 1.0f + 0x1p-9f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.0f };
	const float h[4] = { 1.0f + 0x1p-12f, 1.0f + 3 * 0x1p-11f, 0.5f, 0.25f };
	struct backend_ops none = *be1->ops;
	struct backend nb = *be1;
	struct backend_weight w;
	float one = 1.0f, y;

	half_ones(QUANT_BF16, b, 4, 1.0 + 1.0 + (1.0 + 0x1p-6) - 2.0);
	half_ones(QUANT_F16, h, 4, 1.0 + (1.0 + 0x1p-9) + 0.5 + 0.25);
	half_random(QUANT_BF16, 200, 37, 19);
	half_random(QUANT_F16, 200, 37, 19);
	half_random(QUANT_BF16, 4304 / 8, 9, 5);	/* rows of a multiple of 16, not 32 */
	half_random(QUANT_F32, 96, 17, 4);
	CHECK(backend_has_matmul_half(be1) == 1);
	none.matmul_half = NULL, nb.ops = &none;
	CHECK(backend_has_matmul_half(&nb) == 0);
	CHECK(backend_weight_init(be1, &w, QUANT_F32, 1, 1, &one, 1) == 0);
	CHECK(backend_matmul_half(&nb, &w, &one, 1, &y, 1, 1) == -1);
	CHECK(strstr(backend_errmsg(&nb), "matmul_half: not on backend") != NULL);
	backend_weight_release(be1, &w);
}

/* Proportional RoPE: pairs (j, j + hs/2) at theta^(-2j/hs) for j < n_rot/2, the rest untouched. */
TEST(proportional_rope_turns_the_first_pairs_over_the_whole_head)
{
	float x[2][32], x0[2][32];
	int32_t pos[2] = { 3, 11 };

	for (int r = 0; r < 2; r++)
		for (int i = 0; i < 32; i++)
			x0[r][i] = x[r][i] = frand();
	CHECK(backend_rope(be1, &x[0][0], 32, 1, 32, 2, pos, 8,
	    1e6f, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP) == 0);
	for (int r = 0; r < 2; r++)
		for (int j = 0; j < 16; j++) {
			double th = j < 4 ? pos[r] * pow(1e6, -2.0 * j / 32) : 0;
			double a = x0[r][j], b = x0[r][j + 16];

			CHECK_NEAR(x[r][j], a * cos(th) - b * sin(th), 1e-5);
			CHECK_NEAR(x[r][j + 16], a * sin(th) + b * cos(th), 1e-5);
			if (j >= 4)
				CHECK(x[r][j] == x0[r][j] && x[r][j + 16] == x0[r][j + 16]);
		}
}

/* Expert e of a stack as a weight of its own (what each slot's product uses). */
static struct backend_weight
expert_of(const struct backend_weight *w, int n_exp, int e)
{
	struct backend_weight v = *w;

	v.ne1 = w->ne1 / n_exp;
	v.data = (const char *)w->data + (size_t)e * v.ne1 * w->row_size;
	return v;
}

static void
moe_products_case(struct backend *be, int type)
{
	enum { E = 5, M = 7, K = 2, H = 64, I = 64 };
	struct wbuf g = make_weight(type, H, E * I), u = make_weight(type, H, E * I),
	    d = make_weight(type, I, E * H);
	struct backend_weight wg, wu, wd;
	int32_t ids[M * K] = { 0, 4, 4, 0, 2, 3, 3, 2, 1, 1, 4, 3, 0, 2 };
	float *x = rnd((size_t)M * H, 1), *w = rnd(M * K, 1);
	float f[M * K][I], y[M][H], one[I], dn[K][H];
	int ok = 1;

	CHECK(backend_weight_init(be, &wg, type, H, E * I, g.data, 1) == 0);
	CHECK(backend_weight_init(be, &wu, type, H, E * I, u.data, 1) == 0);
	CHECK(backend_weight_init(be, &wd, type, I, E * H, d.data, 1) == 0);
	for (int s = 0; s < M * K; s++)
		w[s] = fabsf(w[s]);
	CHECK(backend_moe_swiglu(be, &wg, &wu, E, x, H, M, ids, K, &f[0][0]) == 0);
	for (int s = 0; s < M * K; s++) {
		struct backend_weight eg = expert_of(&wg, E, ids[s]), eu = expert_of(&wu, E, ids[s]);

		CHECK(backend_matmul_swiglu(be, &eg, &eu, x + (size_t)(s / K) * H, 1, one) == 0);
		ok &= same(one, f[s], I);
	}
	CHECK(ok);
	CHECK(backend_moe_down(be, &wd, E, &f[0][0], M, ids, w, K, &y[0][0], H) == 0);
	for (int r = 0; r < M; r++) {
		for (int j = 0; j < K; j++) {
			struct backend_weight ed = expert_of(&wd, E, ids[r * K + j]);

			CHECK(backend_matmul(be, &ed, f[r * K + j], I, dn[j], H, 1) == 0);
		}
		for (int i = 0; i < H; i++) {
			float v0 = w[r * K] * dn[0][i], v1 = w[r * K + 1] * dn[1][i];

			ok &= y[r][i] == v0 + v1;
		}
	}
	CHECK(ok);
	ids[3] = E;	/* an id out of range is an error, not a read past the stack */
	CHECK(backend_moe_down(be, &wd, E, &f[0][0], M, ids, w, K, &y[0][0], H) == -1);
	backend_weight_release(be, &wg), backend_weight_release(be, &wu);
	backend_weight_release(be, &wd);
	free_weight(&g), free_weight(&u), free_weight(&d);
	free(x), free(w);
}

TEST(moe_products_are_each_experts_one_row_products_bit_for_bit)
{
	static const int types[] = { QUANT_F32, QUANT_F16, QUANT_Q8_0, QUANT_NVFP4 };

	for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
		moe_products_case(be1, types[t]);
		moe_products_case(be3, types[t]);
		moe_products_case(bes, types[t]);
	}
}

/* Expert e of a stack with a scale each, as a weight of its own with that scale. */
static struct backend_weight
scaled_expert(const struct backend_weight *w, int n_exp, int e)
{
	struct backend_weight v = expert_of(w, n_exp, e);

	v.scale = w->escale[e];
	v.escale = NULL;
	v.n_escale = 0;
	return v;
}

/*
 * A scale an expert (the NVFP4 .scale sidecar of a stack, llama.cpp's
 * per-expert vector): each slot's product is its expert's one-row product
 * with that expert's scale, bit for bit; the plain products refuse the
 * stack, and a count that is not the stack's is an error.
 */
static void
moe_scaled_case(struct backend *be, int type)
{
	enum { E = 5, M = 7, K = 2, H = 64, I = 64 };
	struct wbuf g = make_weight(type, H, E * I), u = make_weight(type, H, E * I),
	    d = make_weight(type, I, E * H);
	struct backend_weight wg, wu, wd;
	int32_t ids[M * K] = { 0, 4, 4, 0, 2, 3, 3, 2, 1, 1, 4, 3, 0, 2 };
	float *x = rnd((size_t)M * H, 1), *w = rnd(M * K, 1), *sc = backend_alloc(be, 3 * E);
	float f[M * K][I], f1[M * K][I], y[M][H], one[I], dn[K][H], h[3 * E];
	int ok = 1;

	for (int i = 0; i < 3 * E; i++)
		h[i] = 0.3f + 0.7f * (float)i;
	CHECK(sc != NULL && backend_write(be, sc, h, 3 * E) == 0);
	CHECK(backend_weight_init(be, &wg, type, H, E * I, g.data, 1) == 0);
	CHECK(backend_weight_init(be, &wu, type, H, E * I, u.data, 1) == 0);
	CHECK(backend_weight_init(be, &wd, type, I, E * H, d.data, 1) == 0);
	CHECK(backend_moe_swiglu(be, &wg, &wu, E, x, H, M, ids, K, &f1[0][0]) == 0);
	CHECK(backend_weight_expert_scales(be, &wg, 3, sc) == -1);	/* 320 rows, not 3 experts */
	CHECK(backend_weight_expert_scales(be, &wg, E, sc) == 0);
	CHECK(backend_weight_expert_scales(be, &wu, E, sc + E) == 0);
	CHECK(backend_weight_expert_scales(be, &wd, E, sc + 2 * E) == 0);
	for (int s = 0; s < M * K; s++)
		w[s] = fabsf(w[s]);
	CHECK(backend_moe_swiglu(be, &wg, &wu, E, x, H, M, ids, K, &f[0][0]) == 0);
	CHECK(!same(&f[0][0], &f1[0][0], (size_t)M * K * I));	/* the scales count */
	for (int s = 0; s < M * K; s++) {
		struct backend_weight eg = scaled_expert(&wg, E, ids[s]);
		struct backend_weight eu = scaled_expert(&wu, E, ids[s]);

		CHECK(backend_matmul_swiglu(be, &eg, &eu, x + (size_t)(s / K) * H, 1, one) == 0);
		ok &= same(one, f[s], I);
	}
	CHECK(ok);
	CHECK(backend_moe_down(be, &wd, E, &f[0][0], M, ids, w, K, &y[0][0], H) == 0);
	for (int r = 0; r < M; r++) {
		for (int j = 0; j < K; j++) {
			struct backend_weight ed = scaled_expert(&wd, E, ids[r * K + j]);

			CHECK(backend_matmul(be, &ed, f[r * K + j], I, dn[j], H, 1) == 0);
		}
		for (int i = 0; i < H; i++)
			ok &= y[r][i] == w[r * K] * dn[0][i] + w[r * K + 1] * dn[1][i];
	}
	CHECK(ok);
	CHECK(backend_matmul(be, &wd, f[0], I, y[0], H, 1) == -1);	/* a plain product */
	CHECK(backend_moe_down(be, &wd, 1, &f[0][0], M, ids, w, K, &y[0][0], H) == -1);
	backend_weight_release(be, &wg), backend_weight_release(be, &wu);
	backend_weight_release(be, &wd);
	free_weight(&g), free_weight(&u), free_weight(&d);
	backend_mfree(be, sc);
	free(x), free(w);
}

TEST(moe_products_take_each_experts_own_scale)
{
	static const int types[] = { QUANT_F32, QUANT_Q8_0, QUANT_NVFP4 };

	for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
		moe_scaled_case(be1, types[t]);
		moe_scaled_case(be3, types[t]);
		moe_scaled_case(bes, types[t]);
	}
}

TEST(add_gated_adds_the_sigmoid_gated_rows)
{
	float y[3][5], y0[3][5], x[3][5], g[3][2];

	for (int r = 0; r < 3; r++) {
		g[r][0] = frand() * 3, g[r][1] = 99;
		for (int i = 0; i < 5; i++)
			y[r][i] = y0[r][i] = frand(), x[r][i] = frand();
	}
	CHECK(backend_add_gated(be3, &y[0][0], 5, &x[0][0], 5, &g[0][0], 2, 3, 5) == 0);
	for (int r = 0; r < 3; r++)
		for (int i = 0; i < 5; i++)
			CHECK_NEAR(y[r][i], y0[r][i] + dsigmoid(g[r][0]) * x[r][i], 1e-6);
	CHECK(backend_moe(be1) == 1);
}

/*
 * backend_moe_down_add is backend_moe_down, then backend_add_gated of x by
 * g (qwen35moe's shared expert) or backend_add of x (g NULL: step35's), bit
 * for bit, into contiguous rows and rows with a pad; a gate stride under 1
 * with a gate and more picks than experts are refused.
 */
TEST(moe_down_add_is_the_down_side_then_the_shared_experts_sum)
{
	enum { E = 4, M = 3, K = 2, H = 64, I = 32, LD = H + 3 };
	struct wbuf d = make_weight(QUANT_Q8_0, I, E * H);
	struct backend_weight wd;
	int32_t ids[M * K] = { 0, 3, 2, 1, 3, 2 };
	float *f = rnd((size_t)M * K * I, 1), *w = rnd(M * K, 1), *x = rnd((size_t)M * H, 2);
	float *g = rnd(2 * M, 3), *y1 = malloc((size_t)M * LD * 4), *y2 = malloc((size_t)M * LD * 4);

	CHECK(backend_weight_init(be1, &wd, QUANT_Q8_0, I, E * H, d.data, 1) == 0);
	for (int gi = 0; gi < 2; gi++)
		for (int ld = H; ld <= LD; ld += LD - H) {
			for (int i = 0; i < M * LD; i++)
				y1[i] = y2[i] = 7.0f;	/* (the pad is left) */
			CHECK(backend_moe_down_add(be1, &wd, E, f, M, ids, w, K, x, gi ? g : NULL, 2,
			    y1, ld) == 0);
			CHECK(backend_moe_down(be1, &wd, E, f, M, ids, w, K, y2, ld) == 0);
			if (gi)
				CHECK(backend_add_gated(be1, y2, ld, x, H, g, 2, M, H) == 0);
			else
				for (int r = 0; r < M; r++)
					CHECK(backend_add(be1, y2 + (size_t)r * ld, x + (size_t)r * H, H) == 0);
			CHECK(same(y1, y2, (size_t)M * LD));
		}
	CHECK(backend_moe_down_add(be1, &wd, E, f, M, ids, w, K, x, g, 0, y1, H) == -1);
	CHECK(backend_moe_down_add(be1, &wd, E, f, M, ids, w, E + 1, x, g, 2, y1, H) == -1);
	backend_weight_release(be1, &wd);
	free_weight(&d);
	free(f), free(w), free(x), free(g), free(y1), free(y2);
}

/*
 * backend_moe_ffn is backend_moe_swiglu_limit, then backend_moe_down_add
 * (or backend_moe_down without a shared sum), bit for bit: with and
 * without a limit, the shared sum plain and gated; a pick count past the
 * experts is refused.
 */
TEST(moe_ffn_is_the_experts_swiglu_then_their_down_side)
{
	enum { E = 4, M = 3, K = 2, H = 64, I = 32 };
	struct wbuf gb = make_weight(QUANT_Q8_0, H, E * I), ub = make_weight(QUANT_Q8_0, H, E * I);
	struct wbuf db = make_weight(QUANT_Q8_0, I, E * H);
	struct backend_weight wg, wu, wd;
	int32_t ids[M * K] = { 0, 3, 2, 1, 3, 2 };
	float *x = rnd((size_t)M * H, 1), *w = rnd(M * K, 1), *xs = rnd((size_t)M * H, 2);
	float *g = rnd(M, 3), *f1 = malloc((size_t)M * K * I * 4), *f2 = malloc((size_t)M * K * I * 4);
	float *y1 = malloc((size_t)M * H * 4), *y2 = malloc((size_t)M * H * 4);

	CHECK(backend_weight_init(be1, &wg, QUANT_Q8_0, H, E * I, gb.data, 1) == 0);
	CHECK(backend_weight_init(be1, &wu, QUANT_Q8_0, H, E * I, ub.data, 1) == 0);
	CHECK(backend_weight_init(be1, &wd, QUANT_Q8_0, I, E * H, db.data, 1) == 0);
	for (int li = 0; li < 2; li++)
		for (int xi = 0; xi < 3; xi++) {
			float lim = li ? 0.5f : 0.0f;
			const float *sx = xi ? xs : NULL, *sg = xi == 2 ? g : NULL;

			CHECK(backend_moe_ffn(be1, &wg, &wu, &wd, E, x, H, M, ids, w, K, lim, f1, sx, sg,
			    1, y1, H) == 0);
			CHECK(backend_moe_swiglu_limit(be1, &wg, &wu, E, x, H, M, ids, K, lim, f2) == 0);
			CHECK(sx != NULL ? backend_moe_down_add(be1, &wd, E, f2, M, ids, w, K, sx, sg, 1,
			    y2, H) == 0 : backend_moe_down(be1, &wd, E, f2, M, ids, w, K, y2, H) == 0);
			CHECK(same(f1, f2, (size_t)M * K * I) && same(y1, y2, (size_t)M * H));
		}
	CHECK(backend_moe_ffn(be1, &wg, &wu, &wd, E, x, H, M, ids, w, E + 1, 0.0f, f1, NULL, NULL,
	    0, y1, H) == -1);
	backend_weight_release(be1, &wg), backend_weight_release(be1, &wu);
	backend_weight_release(be1, &wd);
	free_weight(&gb), free_weight(&ub), free_weight(&db);
	free(x), free(w), free(xs), free(g), free(f1), free(f2), free(y1), free(y2);
}

/* --- step35's ops --- */

TEST(moe_route_sigmoid_picks_by_biased_score_and_weighs_unbiased)
{
	/* expert 4 has the lowest logit but a bias that lifts it into the top 2;
	 * its weight is its own sigmoid, not the biased score */
	float x[2][6] = { { 2.0f, 1.0f, 0.5f, 0.0f, -3.0f, 1.0f }, { 0, 0, 0, 0, 0, 0 } };
	float bias[6] = { 0, 0, 0, 0, 5.0f, 0 };
	int32_t ids[2 * 3];
	float w[2 * 3];
	double p0 = dsigmoid(2.0), p4 = dsigmoid(-3.0), p1 = dsigmoid(1.0);

	CHECK(backend_moe_route_sigmoid(be1, &x[0][0], 6, 1, 6, 2, bias, 1, 1.0f, ids, w) == 0);
	CHECK_EQ_INT(ids[0], 4);	/* 5 + sigmoid(-3) is the largest score */
	CHECK_EQ_INT(ids[1], 0);
	CHECK_NEAR(w[0], p4 / (p4 + p0), 1e-6);
	CHECK_NEAR(w[1], p0 / (p4 + p0), 1e-6);
	/* no bias, top 3, ties (experts 1 and 5) to the lower id; scaled, not renormalised */
	CHECK(backend_moe_route_sigmoid(be3, &x[0][0], 6, 1, 6, 3, NULL, 0, 2.5f, ids, w) == 0);
	CHECK_EQ_INT(ids[0], 0);
	CHECK_EQ_INT(ids[1], 1);
	CHECK_EQ_INT(ids[2], 5);
	CHECK_NEAR(w[0], 2.5 * p0, 1e-6);
	CHECK_NEAR(w[2], 2.5 * p1, 1e-6);
	/* renormalised and scaled: the weights sum to the scale; all equal: ids 0, 1, 2 */
	CHECK(backend_moe_route_sigmoid(be1, &x[1][0], 6, 1, 6, 3, NULL, 1, 3.0f, ids + 3, w + 3)
	    == 0);
	CHECK_EQ_INT(ids[3], 0);
	CHECK_EQ_INT(ids[5], 2);
	CHECK_NEAR(w[3] + w[4] + w[5], 3.0, 1e-6);
	CHECK(backend_moe_route_sigmoid(be1, &x[0][0], 6, 1, 6, 7, NULL, 1, 1, ids, w) == -1);
	CHECK(backend_step35(be1) == 1);
}

TEST(swiglu_limit_clamps_the_gate_above_and_up_both_ways)
{
	float g[6] = { 3.0f, -2.0f, 0.1f, 5.0f, 0.0f, -0.5f }, u[6] = { 2.0f, -4.0f, 0.2f, -0.1f,
	    1.0f, 9.0f }, y[6], y0[6];

	CHECK(backend_swiglu_limit(be1, g, u, y, 6, 0.5f) == 0);
	for (int i = 0; i < 6; i++) {
		double a = g[i] * dsigmoid(g[i]), b = u[i];

		a = a > 0.5 ? 0.5 : a;
		b = b > 0.5 ? 0.5 : b < -0.5 ? -0.5 : b;
		CHECK_NEAR(y[i], a * b, 1e-6);
	}
	CHECK(backend_swiglu_limit(be1, g, u, y, 6, 0) == 0);	/* 0: the plain SwiGLU */
	CHECK(backend_swiglu(be1, g, u, y0, 6) == 0);
	CHECK(same(y, y0, 6));
	CHECK(backend_swiglu_limit(be1, g, u, y, 6, -1) == -1);
}

static void
moe_limit_case(struct backend *be, int type)
{
	enum { E = 4, M = 5, K = 2, H = 64, I = 32 };
	struct wbuf g = make_weight(type, H, E * I), u = make_weight(type, H, E * I);
	struct backend_weight wg, wu;
	int32_t ids[M * K] = { 0, 3, 3, 1, 2, 0, 1, 1, 3, 2 };
	float *x = rnd((size_t)M * H, 4);
	float f[M * K][I], f0[M * K][I], gi[I], ui[I], one[I];
	int ok = 1;

	CHECK(backend_weight_init(be, &wg, type, H, E * I, g.data, 1) == 0);
	CHECK(backend_weight_init(be, &wu, type, H, E * I, u.data, 1) == 0);
	CHECK(backend_moe_swiglu_limit(be, &wg, &wu, E, x, H, M, ids, K, 0, &f[0][0]) == 0);
	CHECK(backend_moe_swiglu(be, &wg, &wu, E, x, H, M, ids, K, &f0[0][0]) == 0);
	CHECK(same(&f[0][0], &f0[0][0], (size_t)M * K * I));	/* limit 0: the plain op */
	CHECK(backend_moe_swiglu_limit(be, &wg, &wu, E, x, H, M, ids, K, 0.25f, &f[0][0]) == 0);
	for (int s = 0; s < M * K; s++) {
		struct backend_weight eg = expert_of(&wg, E, ids[s]), eu = expert_of(&wu, E, ids[s]);

		CHECK(backend_matmul(be, &eg, x + (size_t)(s / K) * H, H, gi, I, 1) == 0);
		CHECK(backend_matmul(be, &eu, x + (size_t)(s / K) * H, H, ui, I, 1) == 0);
		CHECK(backend_swiglu_limit(be, gi, ui, one, I, 0.25f) == 0);
		ok &= same(one, f[s], I);
		for (int i = 0; i < I; i++)
			ok &= fabsf(f[s][i]) <= 0.2785f * 0.25f;	/* silu >= -0.2785 */
	}
	CHECK(ok);
	backend_weight_release(be, &wg), backend_weight_release(be, &wu);
	free_weight(&g), free_weight(&u);
	free(x);
}

TEST(moe_swiglu_limit_is_each_experts_clamped_one_row_products_bit_for_bit)
{
	static const int types[] = { QUANT_F32, QUANT_Q8_0 };

	for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
		moe_limit_case(be1, types[t]);
		moe_limit_case(be3, types[t]);
		moe_limit_case(bes, types[t]);
	}
}

TEST(head_gate_scales_each_head_by_its_sigmoid)
{
	enum { M = 3, NH = 4, HD = 5 };
	float x[M][NH * HD], x0[M][NH * HD], g[M][NH + 1];

	for (int r = 0; r < M; r++) {
		for (int h = 0; h <= NH; h++)
			g[r][h] = frand() * 3;
		for (int i = 0; i < NH * HD; i++)
			x[r][i] = x0[r][i] = frand();
	}
	CHECK(backend_head_gate(be3, &x[0][0], NH * HD, &g[0][0], NH + 1, M, NH, HD) == 0);
	for (int r = 0; r < M; r++)
		for (int i = 0; i < NH * HD; i++)
			CHECK_NEAR(x[r][i], x0[r][i] * dsigmoid(g[r][i / HD]), 1e-6);
}

int
main(void)
{
	char err[UTIL_ERRLEN];

	if ((be1 = backend_open("cpu", 1, err)) == NULL ||
	    (be3 = backend_open("cpu", 3, err)) == NULL ||
	    (bes = backend_open("cpu:scalar", 2, err)) == NULL) {
		printf("not ok open: %s\n", err);
		return 1;
	}
	RUN(opens_and_rejects_devices);
	RUN(cpu_copy_holds_weights_as_a_device_does);
	RUN(matmul_matches_reference_for_each_type_and_shape);
	RUN(matmul_rows_are_batch_and_thread_invariant);
	RUN(matmul_swiglu_rows_are_batch_invariant);
	RUN(fused_products_equal_their_parts_bit_for_bit);
	RUN(rmsnorm_matmul_shares_quantized_rows_bit_for_bit);
	RUN(fused_forms_equal_the_ops_they_name_bit_for_bit);
	RUN(embed_decodes_rows);
	RUN(norms_and_elementwise_ops_match_reference);
	RUN(argmax_takes_the_lowest_index_on_ties);
	RUN(argmax_picks_as_the_greedy_sampler_does);
	RUN(draw_and_penalties_are_the_samplers);
	RUN(rope_rotates_the_first_n_rot_dims_neox_style);
	RUN(rope_norm_mode_rotates_adjacent_pairs);
	RUN(attention_matches_reference_and_decode_equals_prefill);
	RUN(round_f16_keeps_what_a_half_cache_stores);
	RUN(attention_with_f16_cache_matches_reference_and_is_batch_invariant);
	RUN(ggml_attention_orders_are_the_same_bits_on_every_path);
	RUN(lanes_sums_are_the_scalar_tree_bit_for_bit);
	RUN(expf_ggml_is_fexp_ggml_bit_for_bit);
	RUN(vector_exp_and_silu_are_the_scalar_ones_bit_for_bit);
	RUN(expf_is_zero_below_minus_104);
	RUN(conv1d_matches_reference_and_carries_state);
	RUN(gated_delta_rule_step_and_chunk_match_reference);
	RUN(row_loops_are_one_call_a_row_bit_for_bit);
	RUN(gated_delta_rule_rejects_bad_head_ratios);
	RUN(seqs_ops_are_each_sequences_own_calls_bit_for_bit);
	RUN(per_seq_runs_the_seqs_ops_as_their_loops);
	RUN(kv_store_seqs_puts_each_sequences_rows_at_its_position);
	RUN(attention_seqs_equals_each_sequences_own_call);
	RUN(dpos_ops_equal_their_host_position_forms_bit_for_bit);
	RUN(qk_norm_rope_equals_the_norms_ropes_and_store_bit_for_bit);
	RUN(cpu_backend_records_no_graphs);
	RUN(memra_cuda_graph_values_are_0_1_or_stats);
	RUN(pdl_is_a_no_op_on_the_cpu_and_memra_cuda_pdl_is_0_or_1);
	RUN(gemm_is_a_no_op_on_the_cpu_and_memra_cuda_gemm_is_int8_bf16_or_bf16_mirror);
	RUN(step_rows_stay_32_on_the_cpu_and_memra_cuda_step_rows_is_16_or_32);
	RUN(memra_cuda_moe_group_is_0_1_all_or_cc_and_a_no_op_on_the_cpu);
	RUN(gemm_emulation_is_the_gpus_prompt_numerics_past_its_rows);
	RUN(host_memory_takes_what_backend_read_writes);
	RUN(moe_route_is_softmax_top_k_renormalised_lowest_id_on_ties);
	RUN(moe_products_are_each_experts_one_row_products_bit_for_bit);
	RUN(moe_products_take_each_experts_own_scale);
	RUN(add_gated_adds_the_sigmoid_gated_rows);
	RUN(gemma_elementwise_ops_match_reference);
	RUN(norm_residual_is_the_post_ffn_norms_and_residual_add);
	RUN(moe_route_scale_is_the_route_then_the_scale);
	RUN(add_rmsnorm_is_the_add_then_the_norm);
	RUN(rmsnorm_pair_is_two_norms_of_one_row);
	RUN(geglu_matmul_is_the_geglu_then_the_product);
	RUN(mlp_is_the_products_the_activation_then_the_down_product);
	RUN(moe_down_add_is_the_down_side_then_the_shared_experts_sum);
	RUN(moe_ffn_is_the_experts_swiglu_then_their_down_side);
	RUN(windowed_attention_sees_the_last_window_keys);
	RUN(a_ring_cache_attends_as_the_whole_cache_does);
	RUN(an_image_block_over_a_ring_attends_as_over_the_whole_cache);
	RUN(ring_caches_at_backend_positions_store_and_attend_as_at_host_positions);
	RUN(clamp_and_attn_hi_are_separate_ops);
	RUN(vision_tower_opens_on_a_backend_with_its_ops_only);
	RUN(matmul_half_rounds_activations_to_the_weights_type);
	RUN(proportional_rope_turns_the_first_pairs_over_the_whole_head);
	RUN(moe_route_sigmoid_picks_by_biased_score_and_weighs_unbiased);
	RUN(swiglu_limit_clamps_the_gate_above_and_up_both_ways);
	RUN(moe_swiglu_limit_is_each_experts_clamped_one_row_products_bit_for_bit);
	RUN(head_gate_scales_each_head_by_its_sigmoid);
	RUN(mask_sets_minus_inf_where_a_bit_is_0_and_keeps_the_rest);
	RUN(dconv_is_dflash2s_grouped_dynamic_causal_convolution);
	backend_close(be1);
	backend_close(be3);
	backend_close(bes);
	return test_summary();
}
