/*
 * kernel-check: the quantized products against quant_dequantize_row.  Shared
 * declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- quantized products ------------------------------------------------- */

/* A device copy of weight rows w as the kernels take them (NVFP4 in the
 * GPU layout). */
static void *
wput(struct kc *k, int t, const uint8_t *w, int64_t rows, int64_t ne0)
{
	void *d = dput(k, w, quant_row_size(t, ne0) * (size_t)rows);

	if (t == QUANT_NVFP4)
		gchk(k, gpu_nvfp4_pack(k->g, d, rows, ne0));
	return d;
}

void
wset_new(struct kc *k, struct wset *s, int t, int64_t rows, int64_t ne0)
{
	size_t n;

	s->t = t, s->rows = rows, s->ne0 = ne0;
	s->w = qrand(k, t, rows, ne0, &n);
	s->wf = qdeq(t, s->w, rows, ne0);
	s->dw = wput(k, t, s->w, rows, ne0);
}

void
wset_free(struct kc *k, struct wset *s)
{
	free(s->w);
	free(s->wf);
	gpu_free(k->g, s->dw);
}

/* 1 for the weight types the bf16 GEMM leaves on fp32 (not quantized). */
int
float_type(int t)
{
	return t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16;
}

/* f rounded to bf16 (nearest, ties to even; finite f), as a float. */
float
bf16_round(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u = (u + 0x7FFFu + (u >> 16 & 1)) & 0xFFFF0000u;
	memcpy(&f, &u, 4);
	return f;
}

/*
 * The bf16 GEMM's operands exactly (GPU_MMQ_BF16): ref[j][r] = the sum
 * of bf16(w) * bf16(x) in double, times scale; x row j as given or, when
 * t is not 0, as the CPU quantizes it for weights of type t
 * (quant_quantize_act, then its values q * d).
 */
static void
bf16_ref(const float *wf, int64_t rows, int64_t ne0, int t, const float *x, int m,
    double scale, double *ref)
{
	int tx = t ? quant_vec_dot_type(t) : 0;
	uint8_t *xq = t ? xmalloc(quant_row_size(tx, ne0)) : NULL;
	float *xh = xmalloc((size_t)ne0 * 4), *wb = xmalloc((size_t)(rows * ne0) * 4);

	for (int64_t i = 0; i < rows * ne0; i++)
		wb[i] = bf16_round(wf[i]);
	for (int j = 0; j < m; j++) {
		if (t == 0)
			memcpy(xh, x + (size_t)j * ne0, (size_t)ne0 * 4);
		else if (quant_quantize_act(t, x + (size_t)j * ne0, xq, ne0) != 0 ||
		    quant_dequantize_row(tx, xq, xh, ne0) != 0)
			die(1, "quant_quantize_act: type %s failed", quant_name(t));
		for (int64_t e = 0; e < ne0; e++)
			xh[e] = bf16_round(xh[e]);
		for (int64_t r = 0; r < rows; r++) {
			double a = 0;
			for (int64_t e = 0; e < ne0; e++)
				a += (double)wb[r * ne0 + e] * xh[e];
			ref[j * rows + r] = a * scale;
		}
	}
	free(xq), free(xh), free(wb);
}

/* gpu_matvec (m rows) or gpu_matmul (m > 16) against dot_ref; for m > 16
 * and quantized weights also gpu_matmul on bf16 operands (GPU_MMQ_BF16)
 * against bf16_ref. */
static void
check_product(struct kc *k, struct wset *s, int m, int with_scale)
{
	int64_t ny = (int64_t)m * s->rows;
	float *x = frand(k, m * s->ne0, -1, 1), *y = xmalloc((size_t)ny * 4);
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	float sc = 0.75f;
	float *dx = dput(k, x, (size_t)m * s->ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	float *ds = with_scale ? dput(k, &sc, 4) : NULL;
	char name[64], shape[64];

	if (m <= GPU_MATVEC_MAX_ROWS)
		gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx, m, dy, ds));
	else
		gchk(k, gpu_matmul(k->g, s->t, s->dw, s->rows, s->ne0, dx, m, dy, ds));
	dget(k, y, dy, (size_t)ny * 4);
	brk(k, y, ny);
	dot_ref(s->wf, x, s->rows, s->ne0, m, with_scale ? sc : 1.0, ref, mag);
	snprintf(name, sizeof name, "%s %s%s", m <= GPU_MATVEC_MAX_ROWS ? "matvec" : "matmul",
	    quant_name(s->t), with_scale ? "*s" : "");
	snprintf(shape, sizeof shape, "%lldx%lld m=%d", (long long)s->rows, (long long)s->ne0, m);
	close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	if (m > GPU_MATVEC_MAX_ROWS && !float_type(s->t)) {	/* quantized: bf16 operands */
		gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_BF16));
		gchk(k, gpu_matmul(k->g, s->t, s->dw, s->rows, s->ne0, dx, m, dy, ds));
		gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
		dget(k, y, dy, (size_t)ny * 4);
		brk(k, y, ny);
		bf16_ref(s->wf, s->rows, s->ne0, 0, x, m, with_scale ? sc : 1.0, ref);
		snprintf(name, sizeof name, "matmul %s%s bf16", quant_name(s->t),
		    with_scale ? "*s" : "");
		close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	}
	free(x), free(y), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, ds);
}

/* The 16-row product equals 16 one-row products and a 7-row product, bit for bit. */
static void
check_invariance(struct kc *k, struct wset *s)
{
	int M = GPU_MATVEC_MAX_ROWS;
	int64_t ny = (int64_t)M * s->rows;
	float *x = frand(k, M * s->ne0, -1, 1), *ya = xmalloc((size_t)ny * 4), *yb = xmalloc((size_t)ny * 4);
	float *dx = dput(k, x, (size_t)M * s->ne0 * 4);
	float *da = dput(k, NULL, (size_t)ny * 4), *db = dput(k, NULL, (size_t)ny * 4);
	char name[64], shape[64];

	gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx, M, da, NULL));
	for (int j = 0; j < M; j++)
		if (j < 3 || j >= 10)
			gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx + j * s->ne0,
			    1, db + j * s->rows, NULL));
	gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx + 3 * s->ne0, 7,
	    db + 3 * s->rows, NULL));
	dget(k, ya, da, (size_t)ny * 4);
	dget(k, yb, db, (size_t)ny * 4);
	brk(k, yb, ny);
	snprintf(name, sizeof name, "batch-invariant %s", quant_name(s->t));
	snprintf(shape, sizeof shape, "%lldx%lld m=16|1|7", (long long)s->rows, (long long)s->ne0);
	same_bits(k, name, shape, ya, yb, ny);
	/* the other unroll factor gives the same bits */
	gchk(k, gpu_tune(k->g, k->chunk, 3 - k->unroll));
	gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx, M, db, NULL));
	gchk(k, gpu_tune(k->g, k->chunk, k->unroll));
	dget(k, yb, db, (size_t)ny * 4);
	brk(k, yb, ny);
	snprintf(name, sizeof name, "unroll-invariant %s", quant_name(s->t));
	snprintf(shape, sizeof shape, "%lldx%lld m=16 U=%d|%d", (long long)s->rows,
	    (long long)s->ne0, k->unroll, 3 - k->unroll);
	same_bits(k, name, shape, ya, yb, ny);
	free(x), free(ya), free(yb);
	gpu_free(k->g, dx), gpu_free(k->g, da), gpu_free(k->g, db);
}

/* gpu_dequantize of the whole matrix and gpu_get_rows of a few rows. */
static void
check_dequant(struct kc *k, struct wset *s)
{
	int64_t nel = s->rows * s->ne0;
	int n = 5;
	int32_t ids[5] = { 0, (int32_t)(s->rows - 1), (int32_t)(s->rows / 2), 0, 1 % (int32_t)s->rows };
	float *y = xmalloc((size_t)nel * 4), *dy = dput(k, NULL, (size_t)nel * 4);
	double *ref = xmalloc((size_t)nel * 8);
	int32_t *dids = dput(k, ids, sizeof ids);
	char name[64], shape[64];

	gchk(k, gpu_dequantize(k->g, s->t, s->dw, s->rows, s->ne0, dy));
	dget(k, y, dy, (size_t)nel * 4);
	brk(k, y, nel);
	for (int64_t i = 0; i < nel; i++)
		ref[i] = s->wf[i];
	snprintf(name, sizeof name, "dequantize %s", quant_name(s->t));
	snprintf(shape, sizeof shape, "%lldx%lld", (long long)s->rows, (long long)s->ne0);
	close_to(k, name, shape, y, ref, NULL, nel, 0);
	gchk(k, gpu_get_rows(k->g, s->t, s->dw, s->ne0, dids, n, dy));
	dget(k, y, dy, (size_t)n * s->ne0 * 4);
	brk(k, y, n * s->ne0);
	for (int i = 0; i < n; i++)
		for (int64_t e = 0; e < s->ne0; e++)
			ref[i * s->ne0 + e] = s->wf[ids[i] * s->ne0 + e];
	snprintf(name, sizeof name, "get_rows %s", quant_name(s->t));
	snprintf(shape, sizeof shape, "%dx%lld of %lld", n, (long long)s->ne0, (long long)s->rows);
	close_to(k, name, shape, y, ref, NULL, n * s->ne0, 0);
	free(y), free(ref);
	gpu_free(k->g, dy), gpu_free(k->g, dids);
}

/* A ue4m3 scale byte as the GPU layout holds it (cuda/gpu.h: canonical),
 * and the byte gpu_nvfp4_unpack gives for it: the checker's own reading
 * of gpu.h (the kernels' is cuda/gpu_impl.cuh's gpu_ue4m3c / gpu_ue4m3u),
 * so that a wrong definition there fails here. */
static int
ue4m3_canonical(int x)
{
	return x == 0x7F ? 0 : x & 0x7F;
}

static int
ue4m3_uncanonical(int c)
{
	return c == 0x7F ? 0xFF : c;
}

/*
 * gpu_nvfp4_pack against the GPU layout as gpu.h defines it, made here
 * from ggml's bytes (value v of a block: nibble v % 2 of code byte v / 2;
 * scales canonical), gpu_dequantize of the packed rows against the CPU's
 * dequantization of ggml's (every scale byte 0..255 among the blocks'
 * scales: ggml's zero 0x7F, bit 7 set, 0xFF, subnormals), and
 * gpu_nvfp4_unpack back to ggml's bytes, its scales as canonical bytes
 * of the same values (maxdiff: the bytes that differ).
 */
static void
check_nvfp4_layout(struct kc *k, int64_t rows, int64_t ne0)
{
	int64_t nb = ne0 / 64, nel = rows * ne0;
	size_t n, rb = (size_t)nb * 36;
	uint8_t *w = qrand(k, QUANT_NVFP4, rows, ne0, &n), *ref = xmalloc(n), *got = xmalloc(n);
	float *y = xmalloc((size_t)nel * 4), *wf;
	double *dref = xmalloc((size_t)nel * 8);
	char shape[64];

	for (int64_t i = 0; i < rows * nb * 4; i++) {	/* every scale byte, as far as there are scales */
		int64_t b = i / 4;
		w[(b / nb) * rb + (b % nb) * 36 + i % 4] = (uint8_t)(i % 256);
	}
	wf = qdeq(QUANT_NVFP4, w, rows, ne0);
	void *d = dput(k, w, n);
	float *dy = dput(k, NULL, (size_t)nel * 4);
	memset(ref, 0, n);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t b = 0; b < nb; b++) {
			const uint8_t *blk = w + r * rb + b * 36;
			uint8_t *code = ref + r * rb + b * 32;
			for (int s = 0; s < 4; s++)
				ref[r * rb + nb * 32 + b * 4 + s] = (uint8_t)ue4m3_canonical(blk[s]);
			for (int v = 0; v < 64; v++) {
				int q = blk[4 + 8 * (v / 16) + v % 8];
				code[v / 2] |= (uint8_t)(((v % 16 < 8 ? q : q >> 4) & 0xF) << (4 * (v % 2)));
			}
		}
	snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)ne0);
	for (int dir = 0; dir < 2; dir++) {
		size_t bad = 0;
		gchk(k, dir == 0 ? gpu_nvfp4_pack(k->g, d, rows, ne0) :
		    gpu_nvfp4_unpack(k->g, d, rows, ne0));
		dget(k, got, d, n);
		if (k->brk)
			got[n / 2] ^= 0x10;
		for (int64_t r = 0; dir == 1 && r < rows; r++)	/* ggml's bytes, canonical scales */
			for (int64_t b = 0; b < nb; b++)
				for (int s = 0; s < 4; s++) {
					uint8_t *x = w + r * rb + b * 36 + s;
					*x = (uint8_t)ue4m3_uncanonical(ue4m3_canonical(*x));
				}
		for (size_t i = 0; i < n; i++)
			bad += got[i] != (dir == 0 ? ref : w)[i];
		report(k, dir == 0 ? "nvfp4 pack" : "nvfp4 unpack", shape, (double)bad, bad == 0);
		if (dir == 0) {	/* the packed rows' values: the CPU's of ggml's */
			gchk(k, gpu_dequantize(k->g, QUANT_NVFP4, d, rows, ne0, dy));
			dget(k, y, dy, (size_t)nel * 4);
			brk(k, y, nel);
			for (int64_t i = 0; i < nel; i++)
				dref[i] = wf[i];
			close_to(k, "nvfp4 scales 0..255", shape, y, dref, NULL, nel, 0);
		}
	}
	free(w), free(ref), free(got), free(y), free(wf), free(dref);
	gpu_free(k->g, d), gpu_free(k->g, dy);
}

void
check_quant(struct kc *k)
{
	static const int64_t shapes[][2] = {
		{ 64, 256 }, { 257, 1024 }, { 1000, 4096 }, { 37, 5120 }, { 45, 320 },
	};
	static const int ms[] = { 1, 3, 16, 40 };

	for (int ti = 0; ti < NTYPES; ti++) {
		int t = mv_types[ti], qk = quant_traits(t)->blck < 32 ? 32 : quant_traits(t)->blck;
		for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
			struct wset s;
			if (shapes[si][1] % qk)
				continue;
			wset_new(k, &s, t, shapes[si][0], shapes[si][1]);
			for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
				if (ms[mi] <= 16 || si == 2)
					check_product(k, &s, ms[mi], 0);
			if (t == QUANT_NVFP4 && si == 1)
				check_product(k, &s, 3, 1);
			if (si == 2)
				check_invariance(k, &s);
			if (si == 1 || (t == QUANT_NVFP4 && si == 4))	/* (NVFP4: rows by words) */
				check_dequant(k, &s);
			wset_free(k, &s);
		}
	}
	check_nvfp4_layout(k, 3, 4096);	/* 192 blocks: every scale byte thrice */
	check_nvfp4_layout(k, 45, 320);
}

/*
 * The CPU's int8 numerics for s's weight on m rows of x: ref[j][r] =
 * quant_vec_dot(w[r], quant_quantize_act(x[j])) * scale, and mag (the
 * tolerance's scale) as dot_ref makes it.
 */
static void
i8_ref(const struct wset *s, const float *x, int m, double scale, double *ref, double *mag)
{
	int t = s->t;
	size_t rb = quant_row_size(t, s->ne0);
	uint8_t *xq = xmalloc(quant_row_size(quant_vec_dot_type(t), s->ne0));

	dot_ref(s->wf, x, s->rows, s->ne0, m, scale, ref, mag);
	for (int j = 0; j < m; j++) {
		if (quant_quantize_act(t, x + (size_t)j * s->ne0, xq, s->ne0) != 0)
			die(1, "quant_quantize_act: type %s failed", quant_name(t));
		for (int64_t r = 0; r < s->rows; r++)
			ref[j * s->rows + r] = (double)quant_vec_dot(t, s->ne0, s->w + r * rb, xq) *
			    scale;
	}
	free(xq);
}

/*
 * gpu_matvec_q8 for n > 16 (the GEMM of cuda/mmq.cu; IQ4_XS's of
 * cuda/mmq_iq4.cu, whose one tensor-core kernel serves mmaf and mma1 too)
 * against the CPU's int8 numerics (quant_quantize_act, quant_vec_dot), by
 * its kernels (mma, its dp4a twin, mma with the scale products by
 * multiplications, the first mma kernel); they give the same bits, and a
 * repeated call too.
 * The bf16 GEMM (GPU_MMQ_BF16) against the exact product of its rounded
 * operands (so within about 2^-8 of the magnitude of the CPU's numerics),
 * and through the weight's bf16 copy (gpu_tune_mirror) its bits again.
 */
void
check_mmq(struct kc *k, int t, int64_t rows, int64_t ne0, int n, int with_scale)
{
	struct wset s;
	int64_t ny = (int64_t)n * rows;
	float *x = frand(k, n * ne0, -1, 1), sc = 0.75f, *y[6];
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	double *rbf = xmalloc((size_t)ny * 8);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	float *dx = dput(k, x, (size_t)n * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	float *ds = with_scale ? dput(k, &sc, 4) : NULL;
	i8_ref(&s, x, n, with_scale ? sc : 1.0, ref, mag);
	bf16_ref(s.wf, rows, ne0, t, x, n, with_scale ? sc : 1.0, rbf);
	snprintf(shape, sizeof shape, "%lldx%lld m=%d", (long long)rows, (long long)ne0, n);
	for (int i = 0; i < 6; i++) {
		static const int kerns[] = { GPU_MMQ_MMA, GPU_MMQ_MMA, GPU_MMQ_DP4A, GPU_MMQ_MMA1,
		    GPU_MMQ_MMAF, GPU_MMQ_BF16 };
		int kern = kerns[i];
		y[i] = xmalloc((size_t)ny * 4);
		gchk(k, gpu_tune_mmq(k->g, kern));
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, n, dy, ds));
		dget(k, y[i], dy, (size_t)ny * 4);
	}
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	/* y[a] = y[b] bit for bit; each comparison breaks its b side only, and a
	 * side is broken only after its last use as a */
	static const struct { int a, b; const char *what; } same[] = {
		{ 0, 4, "mma=mmaf" }, { 0, 3, "mma=mma1" }, { 1, 2, "mma=dp4a" }, { 0, 1, "repeat" },
	};
	for (size_t c = 0; c < sizeof same / sizeof same[0]; c++) {
		brk(k, y[same[c].b], ny);
		snprintf(name, sizeof name, "mmq %s %s", quant_name(t), same[c].what);
		same_bits(k, name, shape, y[same[c].a], y[same[c].b], ny);
	}
	brk(k, y[0], ny);
	snprintf(name, sizeof name, "mmq %s%s", quant_name(t), with_scale ? "*s" : "");
	close_to(k, name, shape, y[0], ref, mag, ny, 1e-5);
	/* the weight's bf16 copy (gpu_tune_mirror): made by the first call, read by
	 * the second, bf16's bits both times, and there (gpu_mirrors) after each */
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_BF16));
	gchk(k, gpu_tune_mirror(k->g, 1));
	for (int pass = 0; pass < 2; pass++) {
		float *ym = xmalloc((size_t)ny * 4);
		size_t bytes = 0;
		gchk(k, gpu_memset(k->g, dy, 0xFF, (size_t)ny * 4));	/* NaN where nothing writes */
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, n, dy, ds));
		dget(k, ym, dy, (size_t)ny * 4);
		int made = gpu_mirrors(k->g, &bytes) == 1 && bytes == (size_t)(rows * ne0) * 2;
		brk(k, ym, ny);
		snprintf(name, sizeof name, "mmq %s%s bf16 copy%s", quant_name(t),
		    with_scale ? "*s" : "", pass ? " again" : "");
		if (made)
			same_bits(k, name, shape, ym, y[5], ny);
		else
			report(k, name, "(no copy made)", 0, 0);
		free(ym);
	}
	gchk(k, gpu_tune_mirror(k->g, 0));
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	brk(k, y[5], ny);
	snprintf(name, sizeof name, "mmq %s%s bf16", quant_name(t), with_scale ? "*s" : "");
	close_to(k, name, shape, y[5], rbf, mag, ny, 1e-5);
	for (int i = 0; i < 6; i++)
		free(y[i]);
	free(x), free(ref), free(mag), free(rbf);
	gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, ds);
	wset_free(k, &s);
}

/*
 * check_qk's product of weight s again, with a tuning that must not change
 * a bit (set(g, on) around the call; set NULL: the defaults as they stand),
 * against y, bit for bit: the line "matvec i8 TYPE WHAT".
 */
static void
qk_again(struct kc *k, const struct wset *s, const float *dx, int m, float *dy, const float *y,
    int (*set)(struct gpu *, int), int on, const char *what, const char *shape)
{
	int64_t ny = (int64_t)m * s->rows;
	float *y2 = xmalloc((size_t)ny * 4);
	char name[96];

	if (set != NULL)
		gchk(k, set(k->g, on));
	gchk(k, gpu_matvec_q8(k->g, s->t, s->dw, s->rows, s->ne0, dx, m, dy, NULL));
	if (set != NULL)
		gchk(k, set(k->g, 0));
	dget(k, y2, dy, (size_t)ny * 4);
	brk(k, y2, ny);
	snprintf(name, sizeof name, "matvec i8 %s %s", quant_name(s->t), what);
	same_bits(k, name, shape, y, y2, ny);
	free(y2);
}

/*
 * The K-quant decode products on Q8_K activations (cuda/matvec_qk.cu, by
 * the kernel of `lanes` lanes per super-block) against the CPU's int8
 * numerics (quant_quantize_act, quant_vec_dot) for m input rows, and the
 * m-row product against one-row products (rows 0..2 and 10..15 alone,
 * 3..9 as a 7-row call) bit for bit when m is 16; up to 4 rows, the kernel
 * with four blocks in flight a group (gpu_tune_qk_depth 4) against the
 * default's two, bit for bit; Q6_K at 8 lanes, its rows staged in shared
 * memory (gpu_tune_qk_stage 1) against in place, bit for bit.
 */
static void
check_qk(struct kc *k, int t, int64_t rows, int64_t ne0, int m, int lanes)
{
	struct wset s;
	int64_t ny = (int64_t)m * rows;
	float *x = frand(k, m * ne0, -1, 1), *y = xmalloc((size_t)ny * 4);
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	gchk(k, gpu_tune_qk(k->g, lanes));
	gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, m, dy, NULL));
	dget(k, y, dy, (size_t)ny * 4);
	i8_ref(&s, x, m, 1.0, ref, mag);
	snprintf(shape, sizeof shape, "%lldx%lld m=%d L=%d", (long long)rows, (long long)ne0, m, lanes);
	snprintf(name, sizeof name, "matvec i8 %s", quant_name(t));
	if (m == GPU_MATVEC_MAX_ROWS) {
		float *y1 = xmalloc((size_t)ny * 4), *d1 = dput(k, NULL, (size_t)ny * 4);
		for (int j = 0; j < m; j++)
			if (j < 3 || j >= 10)
				gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + j * ne0, 1,
				    d1 + j * rows, NULL));
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + 3 * ne0, 7, d1 + 3 * rows, NULL));
		dget(k, y1, d1, (size_t)ny * 4);
		brk(k, y1, ny);
		char bn[64], bsh[64];
		snprintf(bn, sizeof bn, "batch-invariant i8 %s", quant_name(t));
		snprintf(bsh, sizeof bsh, "%lldx%lld m=16|1|7 L=%d", (long long)rows, (long long)ne0,
		    lanes);
		same_bits(k, bn, bsh, y, y1, ny);
		free(y1);
		gpu_free(k->g, d1);
	}
	if (m <= 4)	/* the loads four blocks deep: the same sums */
		qk_again(k, &s, dx, m, dy, y, gpu_tune_qk_depth, 4, "D=4=D=2", shape);
	if (t == QUANT_Q6_K && lanes == 8)	/* the rows staged: the same sums */
		qk_again(k, &s, dx, m, dy, y, gpu_tune_qk_stage, 1, "S=default", shape);
	gchk(k, gpu_tune_qk(k->g, 0));
	if (lanes == gpu_qk_lanes(t)) {	/* the default is this type's form */
		snprintf(name, sizeof name, "L=%d=default", lanes);
		qk_again(k, &s, dx, m, dy, y, NULL, 0, name, shape);
		snprintf(name, sizeof name, "matvec i8 %s L=%d=default", quant_name(t), lanes);
	}
	brk(k, y, ny);
	close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	free(x), free(y), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

/* Device bf16 values (n) as floats (exact), for same_bits. */
static float *
bf16_floats(struct kc *k, const uint16_t *d, int64_t n)
{
	uint16_t *h = xmalloc((size_t)n * 2);
	float *f = xmalloc((size_t)n * 4);

	dget(k, h, d, (size_t)n * 2);
	for (int64_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)h[i] << 16;
		memcpy(f + i, &u, 4);
	}
	free(h);
	return f;
}

/* y[a] = y[b] bit for bit, n values of device buffers a and b: the line
 * "q6k packed WHAT". */
static void
pk_same(struct kc *k, const char *what, const char *shape, const float *da, const float *db,
    int64_t n)
{
	float *a = xmalloc((size_t)n * 4), *b = xmalloc((size_t)n * 4);
	char name[64];

	dget(k, a, da, (size_t)n * 4);
	dget(k, b, db, (size_t)n * 4);
	brk(k, b, n);
	snprintf(name, sizeof name, "q6k packed %s", what);
	same_bits(k, name, shape, a, b, n);
	free(a), free(b);
}

/*
 * A Q6_K weight packed four blocks a group (gpu_q6k_pack4 in two calls, the
 * second from a block inside a group) read as GPU_T_Q6K_PACKED, against the
 * same weight in the file's layout, bit for bit: the int8 products (m = 1,
 * 3, 16: k_mvk's default form at 8 lanes; m = 1, 5, 16, 32: k_mvkt's, its
 * n-tiles 1, 1, 2 and 4), gpu_matmul of 3 rows (the int8
 * products) and of 40 (dequantized tiles, fp32 and bf16 operands),
 * dequantize (every row; rows from 1 by gpu_dequantize_rows and its bf16
 * form), get_rows, and with n_exp experts (rows a multiple of it) the
 * experts' products, slots grouped by expert and not, and a prompt's by
 * the bf16 GEMM.  The lines "q6k packed WHAT".
 */
static void
check_q6k_packed(struct kc *k, int64_t rows, int64_t ne0, int n_exp)
{
	enum { M = 40 };
	static const int ms[] = { 1, 3, 16 }, mt[] = { 1, 5, 16, 32 };
	struct wset s;
	int64_t nb = ne0 / 256, nblk = rows * nb, h = nblk / 2 | 1, nel = rows * ne0;
	int32_t ids[5] = { 0, (int32_t)(rows - 1), (int32_t)(rows / 2), 0, 1 };
	float *x = frand(k, M * ne0, -1, 1);
	char shape[64], what[48];

	wset_new(k, &s, QUANT_Q6_K, rows, ne0);
	void *px = dput(k, NULL, gpu_q6k_pack4_bytes(nblk));
	float *dx = dput(k, x, (size_t)M * ne0 * 4), *da = dput(k, NULL, (size_t)M * rows * 4);
	float *db = dput(k, NULL, (size_t)M * rows * 4);
	int32_t *dids = dput(k, ids, sizeof ids);
	const int P = GPU_T_Q6K_PACKED;

	gchk(k, gpu_q6k_pack4(k->g, px, 0, s.dw, h));
	gchk(k, gpu_q6k_pack4(k->g, px, h, (const uint8_t *)s.dw + h * 210, nblk - h));
	snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)ne0);
	gchk(k, gpu_tune_qk(k->g, 8));
	for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
		gchk(k, gpu_matvec_q8(k->g, QUANT_Q6_K, s.dw, rows, ne0, dx, ms[i], da, NULL));
		gchk(k, gpu_matvec_q8(k->g, P, px, rows, ne0, dx, ms[i], db, NULL));
		snprintf(what, sizeof what, "matvec i8 m=%d", ms[i]);
		pk_same(k, what, shape, da, db, ms[i] * rows);
	}
	gchk(k, gpu_tune_qkt(k->g, GPU_QKT_ON));	/* k_mvkt: n-tiles 1, 1, 2, 4 */
	gchk(k, gpu_tune_step_rows(k->g, GPU_STEP_ROWS_MAX));	/* (32 rows a launch) */
	for (size_t i = 0; i < sizeof mt / sizeof mt[0]; i++) {
		gchk(k, gpu_matvec_q8(k->g, QUANT_Q6_K, s.dw, rows, ne0, dx, mt[i], da, NULL));
		gchk(k, gpu_matvec_q8(k->g, P, px, rows, ne0, dx, mt[i], db, NULL));
		snprintf(what, sizeof what, "matvec i8 tc m=%d", mt[i]);
		pk_same(k, what, shape, da, db, mt[i] * rows);
	}
	gchk(k, gpu_tune_qkt(k->g, GPU_QKT_OFF));
	gchk(k, gpu_tune_step_rows(k->g, GPU_MATVEC_MAX_ROWS));
	gchk(k, gpu_tune_qk(k->g, 0));
	gchk(k, gpu_matvec_q8(k->g, QUANT_Q6_K, s.dw, rows, ne0, dx, 3, da, NULL));
	gchk(k, gpu_matmul(k->g, P, px, rows, ne0, dx, 3, db, NULL));
	pk_same(k, "matmul m=3", shape, da, db, 3 * rows);
	for (int bf = 0; bf < 2; bf++) {
		gchk(k, gpu_tune_mmq(k->g, bf ? GPU_MMQ_BF16 : GPU_MMQ_MMA));
		gchk(k, gpu_matmul(k->g, QUANT_Q6_K, s.dw, rows, ne0, dx, M, da, NULL));
		gchk(k, gpu_matmul(k->g, P, px, rows, ne0, dx, M, db, NULL));
		pk_same(k, bf ? "matmul m=40 bf16" : "matmul m=40", shape, da, db, M * rows);
	}
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	float *dq = dput(k, NULL, (size_t)nel * 4), *dp = dput(k, NULL, (size_t)nel * 4);
	gchk(k, gpu_dequantize(k->g, QUANT_Q6_K, s.dw, rows, ne0, dq));
	gchk(k, gpu_dequantize(k->g, P, px, rows, ne0, dp));
	pk_same(k, "dequantize", shape, dq, dp, nel);
	gchk(k, gpu_dequantize_rows(k->g, P, px, 1, rows - 1, ne0, dp));
	pk_same(k, "dequantize rows 1..", shape, dq + ne0, dp, nel - ne0);
	uint16_t *hq = (uint16_t *)dq, *hp = (uint16_t *)dp;
	gchk(k, gpu_dequantize_rows_bf16(k->g, QUANT_Q6_K, s.dw, 1, rows - 1, ne0, hq));
	gchk(k, gpu_dequantize_rows_bf16(k->g, P, px, 1, rows - 1, ne0, hp));
	float *fq = bf16_floats(k, hq, nel - ne0), *fp = bf16_floats(k, hp, nel - ne0);
	brk(k, fp, nel - ne0);
	same_bits(k, "q6k packed dequantize bf16 rows 1..", shape, fq, fp, nel - ne0);
	free(fq), free(fp);
	gchk(k, gpu_get_rows(k->g, QUANT_Q6_K, s.dw, ne0, dids, 5, dq));
	gchk(k, gpu_get_rows(k->g, P, px, ne0, dids, 5, dp));
	pk_same(k, "get_rows", shape, dq, dp, 5 * ne0);
	if (n_exp > 1 && rows % n_exp == 0) {	/* slot s of input row s / 2 to expert eid[s] */
		int32_t eid[6] = { n_exp - 1, 0, 1 % n_exp, n_exp - 1, 0, n_exp - 1 };
		int32_t *de = dput(k, eid, sizeof eid);
		int64_t er = rows / n_exp;
		for (int gm = 0; gm < 2; gm++) {
			gchk(k, gpu_tune_moe_group(k->g, gm ? GPU_MOE_GROUP_ALL : GPU_MOE_GROUP_OFF));
			gchk(k, gpu_moe_matvec(k->g, QUANT_Q6_K, s.dw, er, ne0, n_exp, de, 6, 2, dx, 3,
			    da, NULL));
			gchk(k, gpu_moe_matvec(k->g, P, px, er, ne0, n_exp, de, 6, 2, dx, 3, db, NULL));
			snprintf(what, sizeof what, "moe %d experts%s", n_exp, gm ? " grouped" : "");
			pk_same(k, what, shape, da, db, 6 * er);
		}
		gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_AUTO));
		gpu_free(k->g, de);
		/* a prompt's (M rows, 2 slots each) by the bf16 GEMM */
		int32_t pid[2 * M];
		for (int i = 0; i < 2 * M; i++)
			pid[i] = (int32_t)((7 * i + i / 5) % n_exp);
		de = dput(k, pid, sizeof pid);
		gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_BF16));
		gchk(k, gpu_moe_matvec(k->g, QUANT_Q6_K, s.dw, er, ne0, n_exp, de, 2 * M, 2, dx, M,
		    da, NULL));
		gchk(k, gpu_moe_matvec(k->g, P, px, er, ne0, n_exp, de, 2 * M, 2, dx, M, db, NULL));
		gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
		snprintf(what, sizeof what, "moe %d experts gemm m=%d", n_exp, M);
		pk_same(k, what, shape, da, db, 2 * M * er);
		gpu_free(k->g, de);
	}
	free(x);
	gpu_free(k->g, px), gpu_free(k->g, dx), gpu_free(k->g, da), gpu_free(k->g, db);
	gpu_free(k->g, dq), gpu_free(k->g, dp), gpu_free(k->g, dids);
	wset_free(k, &s);
}

/*
 * x quantized to Q8_K on the device (gpu_quantize_q8k) against
 * quant_quantize_act's bytes: random blocks, an all-zero block, a block
 * whose largest magnitude comes twice with both signs (the first wins),
 * one of large values (x 1000), one of tiny ones (x 1e-30).
 */
static void
check_q8k(struct kc *k, int n, int64_t ne0)
{
	int64_t nel = (int64_t)n * ne0, nblk = nel / 256;
	size_t nb = (size_t)nblk * 292;
	float *x = frand(k, nel, -1, 1);
	uint8_t *cpu = xmalloc(nb), *got = xmalloc(nb);
	char shape[64];
	int64_t ndiff = 0;

	for (int i = 0; i < 256 && nblk > 4; i++) {
		x[256 + i] = 0.0f;		/* block 1: zeros */
		x[512 + i] *= 0.5f;		/* block 2: -0.75 at 5, then 0.75 at 100 */
		x[768 + i] *= 1000.0f;		/* block 3: large */
		x[1024 + i] *= 1e-30f;		/* block 4: tiny */
	}
	if (nblk > 4)
		x[512 + 5] = -0.75f, x[512 + 100] = 0.75f;
	float *dx = dput(k, x, (size_t)nel * 4);
	uint8_t *dq = dput(k, NULL, nb);
	gchk(k, gpu_quantize_q8k(k->g, dx, n, ne0, dq));
	dget(k, got, dq, nb);
	for (int j = 0; j < n; j++)
		if (quant_quantize_act(QUANT_Q4_K, x + (size_t)j * ne0, cpu + (size_t)j * (ne0 / 256) * 292,
		    ne0) != 0)
			die(1, "quant_quantize_act: Q8_K failed");
	if (k->brk)
		got[nb / 2] ^= 1;
	for (size_t i = 0; i < nb; i++)
		ndiff += cpu[i] != got[i];
	snprintf(shape, sizeof shape, "%dx%lld bytes", n, (long long)ne0);
	report(k, "quantize Q8_K", shape, (double)ndiff, ndiff == 0);
	free(x), free(cpu), free(got);
	gpu_free(k->g, dx), gpu_free(k->g, dq);
}

/*
 * One x for weights of mixed types (the first ntyp of ts: x quantized as
 * Q8_0 and as Q8_K when both kinds are there): gpu_matvec_q8_multi and
 * the fused gpu_rmsnorm_matvec_q8_multi against gpu_matvec_q8 of each
 * weight alone (of gpu_rmsnorm's output), bit for bit.  check_qk_multi:
 * Q4_K, Q8_0, Q6_K, Q5_K; ntyp = 1: Q4_K alone (the fused kernel writes no
 * normed row out).  check_iq4_multi: IQ4_XS, Q8_0, IQ4_NL, Q6_K.
 */
static void
check_multi(struct kc *k, int m, int64_t ne0, int ntyp, const int *ts)
{
	static const int64_t rs[4] = { 300, 129, 77, 256 };
	struct wset s[4];
	int t[4];
	const void *dw[4];
	int64_t rows[4], ny = 0, off[4];
	float *x = frand(k, m * ne0, -1, 1), *nw = frand(k, ne0, 0.5f, 1.5f);
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dnw = dput(k, nw, (size_t)ne0 * 4);
	float *dn = dput(k, NULL, (size_t)m * ne0 * 4);
	char shape[64];

	for (int i = 0; i < ntyp; i++) {
		wset_new(k, &s[i], ts[i], rs[i], ne0);
		t[i] = ts[i], dw[i] = s[i].dw, rows[i] = rs[i], off[i] = ny;
		ny += (int64_t)m * rs[i];
	}
	float *da = dput(k, NULL, (size_t)ny * 4), *db = dput(k, NULL, (size_t)ny * 4);
	float *ya = xmalloc((size_t)ny * 4), *yb = xmalloc((size_t)ny * 4);
	float *Y[4];
	snprintf(shape, sizeof shape, "%d types%s m=%d ne0=%lld", ntyp,
	    ts[0] == QUANT_IQ4_XS ? " from IQ4_XS" : "", m, (long long)ne0);
	for (int f = 0; f < 2; f++) {
		const float *xin = f ? dn : dx;
		for (int i = 0; i < ntyp; i++)
			Y[i] = da + off[i];
		if (f) {
			gchk(k, gpu_rmsnorm(k->g, dx, ne0, dnw, dn, ne0, m, (int)ne0, 1e-6f));
			gchk(k, gpu_rmsnorm_matvec_q8_multi(k->g, dx, dnw, 1e-6f, ntyp, t, dw, rows,
			    ne0, m, Y, NULL));
		} else
			gchk(k, gpu_matvec_q8_multi(k->g, ntyp, t, dw, rows, ne0, dx, m, Y, NULL));
		for (int i = 0; i < ntyp; i++)
			gchk(k, gpu_matvec_q8(k->g, t[i], dw[i], rows[i], ne0, xin, m, db + off[i], NULL));
		dget(k, ya, da, (size_t)ny * 4);
		dget(k, yb, db, (size_t)ny * 4);
		brk(k, ya, ny);
		same_bits(k, f ? "rmsnorm_matvec_q8 mixed=each" : "matvec_q8_multi mixed=each",
		    shape, ya, yb, ny);
	}
	for (int i = 0; i < ntyp; i++)
		wset_free(k, &s[i]);
	free(x), free(nw), free(ya), free(yb);
	gpu_free(k->g, dx), gpu_free(k->g, dnw), gpu_free(k->g, dn);
	gpu_free(k->g, da), gpu_free(k->g, db);
}

static void
check_qk_multi(struct kc *k, int m, int64_t ne0, int ntyp)
{
	static const int ts[4] = { QUANT_Q4_K, QUANT_Q8_0, QUANT_Q6_K, QUANT_Q5_K };

	check_multi(k, m, ne0, ntyp, ts);
}

/*
 * Weights of one K-quant type that follow each other share a launch of
 * k_mvk (mv8_set): three Q4_K then a Q6_K, two Q5_K then two Q6_K, each
 * against its own call bit for bit (check_multi, plain and fused with the
 * norm), and at m rows the launches counted ("matvec_q8k sets", the count
 * as its maxdiff): 2, one a run of a type.  L: the lanes (gpu_tune_qk; 0
 * the default).
 */
static void
check_qk_set(struct kc *k, int m, int64_t ne0, int L)
{
	static const int ta[4] = { QUANT_Q4_K, QUANT_Q4_K, QUANT_Q4_K, QUANT_Q6_K };
	static const int tb[4] = { QUANT_Q5_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q6_K };
	static const int64_t rs[4] = { 300, 129, 77, 256 };

	gchk(k, gpu_tune_qk(k->g, L));
	for (int s = 0; s < 2; s++) {
		const int *ts = s ? tb : ta;
		struct wset w[4];
		const void *dw[4];
		int t[4];
		int64_t ny = 0;
		float *x = frand(k, m * ne0, -1, 1), *dx = dput(k, x, (size_t)m * ne0 * 4), *Y[4];
		char shape[96];

		check_multi(k, m, ne0, 4, ts);
		for (int i = 0; i < 4; i++) {
			wset_new(k, &w[i], ts[i], rs[i], ne0);
			t[i] = ts[i], dw[i] = w[i].dw, ny += (int64_t)m * rs[i];
		}
		float *dy = dput(k, NULL, (size_t)ny * 4);
		for (int i = 0, o = 0; i < 4; o += m * (int)rs[i], i++)
			Y[i] = dy + o;
		gpu_prof_reset(k->g);
		gchk(k, gpu_prof_begin(k->g, 0));
		gchk(k, gpu_matvec_q8_multi(k->g, 4, t, dw, rs, ne0, dx, m, Y, NULL));
		gchk(k, gpu_prof_end(k->g));
		unsigned long n = prof_launches(k, "matvec_q8k");
		gpu_prof_reset(k->g);
		snprintf(shape, sizeof shape, "%s x%d, %s x%d m=%d ne0=%lld L=%d",
		    quant_name(ts[0]), s ? 2 : 3, quant_name(ts[3]), s ? 2 : 1, m, (long long)ne0, L);
		report(k, "matvec_q8k sets", shape, (double)n, n == 2 && !k->brk);
		for (int i = 0; i < 4; i++)
			wset_free(k, &w[i]);
		free(x);
		gpu_free(k->g, dx), gpu_free(k->g, dy);
	}
	gchk(k, gpu_tune_qk(k->g, 0));
}

static void
check_q45_multi(struct kc *k, int m, int64_t ne0, int ntyp)
{
	static const int ts[4] = { QUANT_Q4_0, QUANT_Q8_0, QUANT_Q5_0, QUANT_Q6_K };

	check_multi(k, m, ne0, ntyp, ts);
}

static void
check_iq4_multi(struct kc *k, int m, int64_t ne0, int ntyp)
{
	static const int ts[4] = { QUANT_IQ4_XS, QUANT_Q8_0, QUANT_IQ4_NL, QUANT_Q6_K };

	check_multi(k, m, ne0, ntyp, ts);
}

/*
 * The int8 products of Q8_0, NVFP4, Q4_1 and Q5_1 (n <= 16) with the
 * weights read in place and staged through shared memory
 * (gpu_tune_mv8) against the default choice, bit for bit.
 */
static void
check_mv8_staged(struct kc *k, int t, int64_t rows, int64_t ne0, int m)
{
	struct wset s;
	int64_t ny = (int64_t)m * rows;
	float *x = frand(k, m * ne0, -1, 1), *y[3];
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	for (int i = 0; i < 3; i++) {	/* GPU_MV8_AUTO, _PLACE, _STAGED */
		y[i] = xmalloc((size_t)ny * 4);
		gchk(k, gpu_tune_mv8(k->g, i));
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, m, dy, NULL));
		dget(k, y[i], dy, (size_t)ny * 4);
	}
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
	snprintf(shape, sizeof shape, "%lldx%lld m=%d", (long long)rows, (long long)ne0, m);
	brk(k, y[1], ny);
	snprintf(name, sizeof name, "matvec i8 %s place=default", quant_name(t));
	same_bits(k, name, shape, y[0], y[1], ny);
	brk(k, y[2], ny);
	snprintf(name, sizeof name, "matvec i8 %s staged=default", quant_name(t));
	same_bits(k, name, shape, y[0], y[2], ny);
	free(x), free(y[0]), free(y[1]), free(y[2]);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

/*
 * Two lanes a block: Q8_0 by GPU_MV8_LANE2, NVFP4, Q4_0 and Q5_0 always
 * (how: GPU_MV8_AUTO; NVFP4's 16 rows decode by gpu_fp4x8, one by
 * mv8_fp4pn): against the CPU's int8 numerics within 1e-5, and 16 rows
 * against one-row calls bit for bit.
 */
static void
check_mv8_lanes(struct kc *k, int t, int how, int64_t rows, int64_t ne0)
{
	struct wset s;
	int m = GPU_MATVEC_MAX_ROWS;
	int64_t ny = (int64_t)m * rows;
	float *x = frand(k, m * ne0, -1, 1), *y = xmalloc((size_t)ny * 4);
	float *y1 = xmalloc((size_t)ny * 4);
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	const char *ln = "lane2";
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	gchk(k, gpu_tune_mv8(k->g, how));
	gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, m, dy, NULL));
	dget(k, y, dy, (size_t)ny * 4);
	for (int j = 0; j < m; j++)
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + j * ne0, 1, dy + j * rows, NULL));
	dget(k, y1, dy, (size_t)ny * 4);
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
	i8_ref(&s, x, m, 1.0, ref, mag);
	snprintf(shape, sizeof shape, "%lldx%lld m=16|1", (long long)rows, (long long)ne0);
	brk(k, y1, ny);
	snprintf(name, sizeof name, "batch-invariant i8 %s %s", quant_name(t), ln);
	same_bits(k, name, shape, y, y1, ny);
	brk(k, y, ny);
	snprintf(name, sizeof name, "matvec i8 %s %s", quant_name(t), ln);
	close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	free(x), free(y), free(y1), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

/*
 * y of the m input rows at dx by gpu_matvec_q8 under the int8 product form
 * how: one call under GPU_MV8_TC (with the GEMM off: past 16 rows one
 * launch of k_mv8t), another form (GPU_MV8_PLACE: k_mv8 alone) as calls of
 * at most 16 rows (past 16: two launches, as the decode step's groups).
 */
static void
mv8_form(struct kc *k, int how, int t, const void *dw, int64_t rows, int64_t ne0,
    const float *dx, int m, float *dy, float *y)
{
	gchk(k, gpu_tune_mv8(k->g, how));
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_OFF));
	if (how == GPU_MV8_TC)
		gchk(k, gpu_matvec_q8(k->g, t, dw, rows, ne0, dx, m, dy, NULL));
	else
		for (int j = 0; j < m; j += GPU_MATVEC_MAX_ROWS)
			gchk(k, gpu_matvec_q8(k->g, t, dw, rows, ne0, dx + (size_t)j * ne0,
			    m - j < GPU_MATVEC_MAX_ROWS ? m - j : GPU_MATVEC_MAX_ROWS,
			    dy + (size_t)j * rows, NULL));
	dget(k, y, dy, (size_t)m * rows * 4);
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
}

/*
 * The tensor-core form (GPU_MV8_TC, cuda/matvec_q8tc.cuh) of Q8_0, NVFP4,
 * Q4_0 and Q5_0 against k_mv8 (GPU_MV8_PLACE: the default's kernel below
 * 12 rows) bit for bit, m = 1, 2, 3, 7, 8, 9, 15,
 * 16 and 17..32 (the default in launches of 16 and the rest), the weight
 * at off bytes past an aligned address (0: 16-byte aligned rows where the
 * row bytes allow it; Q8_0, Q4_0, Q5_0 2, NVFP4 4: copied by words; a few m).
 */
static void
check_mv8_tc(struct kc *k, int t, int64_t rows, int64_t ne0, int off)
{
	static const int ms[] = { 1, 2, 3, 7, 8, 9, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
	    26, 27, 28, 29, 30, 31, 32 };
	static const int mo[] = { 1, 9, 16, 17, 32 };
	enum { M = 32 };
	struct wset s;
	size_t nw = quant_row_size(t, ne0) * (size_t)rows;
	float *x = frand(k, (int64_t)M * ne0, -1, 1), *ya = xmalloc((size_t)M * rows * 4);
	float *yb = xmalloc((size_t)M * rows * 4);
	float *dx = dput(k, x, (size_t)M * ne0 * 4), *dy = dput(k, NULL, (size_t)M * rows * 4);
	uint8_t *dbuf = NULL;
	const void *dw;
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	dw = s.dw;
	if (off) {	/* the same bytes (NVFP4: packed) at an offset */
		dbuf = dput(k, NULL, nw + 16);
		gchk(k, gpu_copy(k->g, dbuf + off, s.dw, nw));
		dw = dbuf + off;
	}
	snprintf(name, sizeof name, "matvec i8 %s tc=default", quant_name(t));
	for (size_t i = 0; i < (off ? sizeof mo / sizeof mo[0] : sizeof ms / sizeof ms[0]); i++) {
		int m = off ? mo[i] : ms[i];
		mv8_form(k, GPU_MV8_PLACE, t, dw, rows, ne0, dx, m, dy, ya);
		mv8_form(k, GPU_MV8_TC, t, dw, rows, ne0, dx, m, dy, yb);
		snprintf(shape, sizeof shape, "%lldx%lld%s%.0d m=%d", (long long)rows,
		    (long long)ne0, off ? " +" : "", off, m);
		brk(k, yb, (int64_t)m * rows);
		same_bits(k, name, shape, ya, yb, (int64_t)m * rows);
	}
	free(x), free(ya), free(yb);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	if (dbuf != NULL)
		gpu_free(k->g, dbuf);
	wset_free(k, &s);
}

/*
 * GPU_MV8_TC on a set of three weights of type t in one call
 * (gpu_matvec_q8_multi: one launch of k_mv8t for m <= 32 with the GEMM
 * off), each with its per-tensor scale, against k_mv8 (GPU_MV8_PLACE, 16
 * rows a launch) bit for bit.
 */
static void
check_mv8_tc_set(struct kc *k, int t, int64_t ne0, int m)
{
	static const int64_t rs[3] = { 300, 129, 77 };
	struct wset s[3];
	int ts[3] = { t, t, t };
	const void *dw[3];
	const float *dsc[3];
	float *Y[3], sc[3] = { 0.37f, 1.0f, 2.5f };
	int64_t ny = 0, off[3];
	float *x = frand(k, (int64_t)m * ne0, -1, 1), *dx = dput(k, x, (size_t)m * ne0 * 4);
	float *dscale = dput(k, sc, sizeof sc);
	char name[64], shape[64];

	for (int i = 0; i < 3; i++) {
		wset_new(k, &s[i], t, rs[i], ne0);
		dw[i] = s[i].dw, dsc[i] = dscale + i, off[i] = ny;
		ny += (int64_t)m * rs[i];
	}
	float *dy = dput(k, NULL, (size_t)ny * 4), *y[2];
	for (int f = 0; f < 2; f++) {
		y[f] = xmalloc((size_t)ny * 4);
		for (int i = 0; i < 3; i++)
			Y[i] = dy + off[i];
		gchk(k, gpu_tune_mv8(k->g, f ? GPU_MV8_TC : GPU_MV8_PLACE));
		gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_OFF));
		gchk(k, gpu_matvec_q8_multi(k->g, 3, ts, dw, rs, ne0, dx, m, Y, dsc));
		dget(k, y[f], dy, (size_t)ny * 4);
	}
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
	snprintf(shape, sizeof shape, "3 weights scaled m=%d ne0=%lld", m, (long long)ne0);
	snprintf(name, sizeof name, "matvec_q8_multi %s tc", quant_name(t));
	brk(k, y[1], ny);
	same_bits(k, name, shape, y[0], y[1], ny);
	for (int i = 0; i < 3; i++)
		wset_free(k, &s[i]);
	free(x), free(y[0]), free(y[1]);
	gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, dscale);
}

/*
 * y of the m input rows at dx by gpu_matvec_q8 for K-quant weights at the
 * step rows of the CUDA backend (32) under the tensor-core form how
 * (gpu_tune_qkt) and lanes L: GPU_QKT_OFF k_mvk in launches of 16,
 * GPU_QKT_ON k_mvkt in one launch, GPU_QKT_AUTO k_mvk below the type's
 * rows (matvec_qk.cu's qkt_auto_m: 3, 5 or 12) and k_mvkt from there, in
 * one launch.
 */
static void
qk_form(struct kc *k, int how, int lanes, int t, const void *dw, int64_t rows, int64_t ne0,
    const float *dx, int m, float *dy, float *y)
{
	gchk(k, gpu_tune_step_rows(k->g, GPU_STEP_ROWS_MAX));
	gchk(k, gpu_tune_qk(k->g, lanes));
	gchk(k, gpu_tune_qkt(k->g, how));
	gchk(k, gpu_matvec_q8(k->g, t, dw, rows, ne0, dx, m, dy, NULL));
	dget(k, y, dy, (size_t)m * rows * 4);
	gchk(k, gpu_tune_qkt(k->g, GPU_QKT_OFF));
	gchk(k, gpu_tune_qk(k->g, 0));
	gchk(k, gpu_tune_step_rows(k->g, GPU_MATVEC_MAX_ROWS));
}

/*
 * The tensor-core form of the K-quant and IQ4_XS decode products
 * (GPU_QKT_ON, cuda/matvec_qkt.cuh) against k_mvk (IQ4_XS: matvec_iq4.cu's
 * k_iq4; GPU_QKT_OFF, launches of 16) bit for bit at lanes L (4 and 8:
 * k_mvkt reproduces each; IQ4_XS 8, its one form), m = 1, 2, 3, 7, 8, 9,
 * 15, 16, 17, 24, 31, 32; GPU_QKT_AUTO at 11, 12 and 20 rows the same
 * bits; at 1, 9 and 32 rows within 1e-5 of the CPU's int8 products.
 */
static void
check_qk_tc(struct kc *k, int t, int64_t rows, int64_t ne0, int lanes)
{
	static const int ms[] = { 1, 2, 3, 7, 8, 9, 11, 12, 15, 16, 17, 20, 24, 31, 32 };
	enum { M = 32 };
	struct wset s;
	float *x = frand(k, (int64_t)M * ne0, -1, 1), *ya = xmalloc((size_t)M * rows * 4);
	float *yb = xmalloc((size_t)M * rows * 4);
	float *dx = dput(k, x, (size_t)M * ne0 * 4), *dy = dput(k, NULL, (size_t)M * rows * 4);
	double *ref = xmalloc((size_t)M * rows * 8), *mag = xmalloc((size_t)M * rows * 8);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
		int m = ms[i], au = m == 11 || m == 12 || m == 20;
		int64_t ny = (int64_t)m * rows;
		qk_form(k, GPU_QKT_OFF, lanes, t, s.dw, rows, ne0, dx, m, dy, ya);
		qk_form(k, au ? GPU_QKT_AUTO : GPU_QKT_ON, lanes, t, s.dw, rows, ne0, dx, m, dy, yb);
		snprintf(name, sizeof name, "matvec i8 %s tc%s=mvk", quant_name(t), au ? " auto" : "");
		snprintf(shape, sizeof shape, "%lldx%lld m=%d L=%d", (long long)rows, (long long)ne0,
		    m, lanes);
		brk(k, yb, ny);
		same_bits(k, name, shape, ya, yb, ny);
		if (m == 1 || m == 9 || m == 32) {
			qk_form(k, GPU_QKT_ON, lanes, t, s.dw, rows, ne0, dx, m, dy, yb);
			i8_ref(&s, x, m, 1.0, ref, mag);
			snprintf(name, sizeof name, "matvec i8 %s tc", quant_name(t));
			brk(k, yb, ny);
			close_to(k, name, shape, yb, ref, mag, ny, 1e-5);
		}
	}
	free(x), free(ya), free(yb), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

static void
check_qk_tc_all(struct kc *k)
{
	/* rows of 1, 2, 8 and 20 super-blocks (Q6_K also 3: rows 2-byte aligned,
	 * an odd count; IQ4_XS also 3: rows 8-byte aligned); 300 rows: a part
	 * tile of 12; IQ4_XS at 8 lanes alone (its one form) */
	static const int64_t sh[][2] = { { 300, 256 }, { 45, 512 }, { 300, 2048 }, { 70, 5120 },
	    { 57, 768 } };
	static const int ts[] = { QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_IQ4_XS };

	for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
		int odd = ts[ti] == QUANT_Q6_K || ts[ti] == QUANT_IQ4_XS;	/* (768: odd rows) */
		for (size_t si = 0; si < sizeof sh / sizeof sh[0] - !odd; si++)
			for (int lanes = ts[ti] == QUANT_IQ4_XS ? 8 : 4; lanes <= 8; lanes += 4)
				check_qk_tc(k, ts[ti], sh[si][0], sh[si][1], lanes);
	}
}

static void
check_mv8_tc_all(struct kc *k)
{
	/* Q8_0: 128 blocks, 25 (odd rows 2-byte aligned), 10; NVFP4:
	 * check_mv8_lanes' shapes; then weights off an aligned address */
	static const int64_t q8[][2] = { { 300, 4096 }, { 257, 800 }, { 45, 320 } };
	static const int64_t nv[][2] = { { 300, 4096 }, { 257, 768 }, { 45, 320 }, { 70, 448 } };

	for (size_t i = 0; i < sizeof q8 / sizeof q8[0]; i++)
		check_mv8_tc(k, QUANT_Q8_0, q8[i][0], q8[i][1], 0);
	for (size_t i = 0; i < sizeof nv / sizeof nv[0]; i++)
		check_mv8_tc(k, QUANT_NVFP4, nv[i][0], nv[i][1], 0);
	check_mv8_tc(k, QUANT_Q8_0, 300, 4096, 2);
	check_mv8_tc(k, QUANT_NVFP4, 300, 4096, 4);
	for (int m = 1; m <= 32; m += 10) {	/* 1, 11, 21, 31 */
		check_mv8_tc_set(k, QUANT_Q8_0, 4096, m);
		check_mv8_tc_set(k, QUANT_NVFP4, 4096, m);
	}
	/* Q4_0 and Q5_0: Q8_0's shapes (rows 2 mod 4 bytes at 25 blocks), the
	 * 26B-A4B's rows of 704 (22 blocks: a chunk and a tail), off by 2; past
	 * 16 rows gpu_matvec_q8 takes them up to the step rows only (as the
	 * K-quants: the backend opens at 32) */
	gchk(k, gpu_tune_step_rows(k->g, GPU_STEP_ROWS_MAX));
	for (int t = QUANT_Q4_0; t <= QUANT_Q5_0; t += QUANT_Q5_0 - QUANT_Q4_0) {
		for (size_t i = 0; i < sizeof q8 / sizeof q8[0]; i++)
			check_mv8_tc(k, t, q8[i][0], q8[i][1], 0);
		check_mv8_tc(k, t, 300, 704, 0);
		check_mv8_tc(k, t, 300, 4096, 2);
		for (int m = 1; m <= 32; m += 10)
			check_mv8_tc_set(k, t, 4096, m);
	}
	gchk(k, gpu_tune_step_rows(k->g, GPU_MATVEC_MAX_ROWS));
}

/*
 * The IQ4 products on int8 activations (cuda/matvec_iq4.cu: IQ4_XS on Q8_K
 * rows, IQ4_NL on Q8_0 rows) against the CPU's int8 numerics
 * (quant_quantize_act, quant_vec_dot) within 1e-5 for m input rows (past
 * 16: IQ4_NL's launches of 16, IQ4_XS's under GPU_MMQ_OFF), and the m-row
 * product against one-row products bit for bit: at m = 16 rows 0..2 and
 * 10..15 alone and 3..9 as one 7-row call (as check_qk), past 16 every row
 * alone.
 */
void
check_iq4(struct kc *k, int t, int64_t rows, int64_t ne0, int m)
{
	struct wset s;
	int64_t ny = (int64_t)m * rows;
	float *x = frand(k, m * ne0, -1, 1), *y = xmalloc((size_t)ny * 4);
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, m, dy, NULL));
	dget(k, y, dy, (size_t)ny * 4);
	i8_ref(&s, x, m, 1.0, ref, mag);
	snprintf(shape, sizeof shape, "%lldx%lld m=%d", (long long)rows, (long long)ne0, m);
	if (m >= GPU_MATVEC_MAX_ROWS) {
		float *y1 = xmalloc((size_t)ny * 4), *d1 = dput(k, NULL, (size_t)ny * 4);
		for (int j = 0; j < m; j++)
			if (m > GPU_MATVEC_MAX_ROWS || j < 3 || j >= 10)
				gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + j * ne0, 1,
				    d1 + j * rows, NULL));
		if (m == GPU_MATVEC_MAX_ROWS)
			gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + 3 * ne0, 7, d1 + 3 * rows,
			    NULL));
		dget(k, y1, d1, (size_t)ny * 4);
		brk(k, y1, ny);
		char bn[64], bsh[64];
		snprintf(bn, sizeof bn, "batch-invariant i8 %s", quant_name(t));
		if (m == GPU_MATVEC_MAX_ROWS)
			snprintf(bsh, sizeof bsh, "%lldx%lld m=16|1|7", (long long)rows, (long long)ne0);
		else
			snprintf(bsh, sizeof bsh, "%lldx%lld m=%d|1", (long long)rows, (long long)ne0, m);
		same_bits(k, bn, bsh, y, y1, ny);
		free(y1);
		gpu_free(k->g, d1);
	}
	brk(k, y, ny);
	snprintf(name, sizeof name, "matvec i8 %s", quant_name(t));
	close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	free(x), free(y), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

void
check_iq4_all(struct kc *k)
{
	/* IQ4_XS: nb = 1 (one group of a warp busy), 3 (odd: the second block of
	 * a pair missing), 4, 5 (Step-3.5's expert rows of 1280), 16, 20, 44
	 * (its dense FFN's 11264), rows past whole 8-warp CTAs, a wide head
	 * scaled down (as check_qk_all); IQ4_NL: rows of one block, of 12 (384:
	 * what model A's rows fall back to), of 129 (rows 2 mod 4 bytes: the
	 * loads from 2 bytes before a block), and prompts (launches of 16) */
	static const int64_t xs[][3] = {
		{ 64, 256, 1 }, { 257, 768, 3 }, { 37, 1024, 2 }, { 1000, 4096, 1 },
		{ 1000, 4096, 16 }, { 45, 5120, 5 }, { 129, 11264, 4 }, { 4096, 1280, 1 },
		{ 257, 768, 16 }, { 24832, 2048, 1 }, { 24832, 2048, 4 },
	};
	static const int64_t nl[][3] = {
		{ 64, 32, 1 }, { 257, 384, 3 }, { 1000, 4096, 1 }, { 1000, 4096, 16 },
		{ 45, 4128, 16 }, { 300, 384, 7 }, { 37, 1024, 40 }, { 70, 352, 17 },
	};

	for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
		check_iq4(k, QUANT_IQ4_XS, xs[i][0], xs[i][1], (int)xs[i][2]);
	for (int m = 1; m <= GPU_MATVEC_MAX_ROWS; m++)	/* every row count of a decode step */
		check_iq4(k, QUANT_IQ4_XS, 300, 1280, m);
	for (size_t i = 0; i < sizeof nl / sizeof nl[0]; i++)
		check_iq4(k, QUANT_IQ4_NL, nl[i][0], nl[i][1], (int)nl[i][2]);
	/* IQ4_XS prompts with the GEMM off: the decode kernel 16 rows a launch */
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_OFF));
	check_iq4(k, QUANT_IQ4_XS, 257, 768, 40);
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	/* one x for IQ4_XS (Q8_K), Q8_0 and IQ4_NL (Q8_0), Q6_K: plain and fused with the norm */
	check_iq4_multi(k, 1, 1024, 4);
	check_iq4_multi(k, 5, 4096, 4);
	check_iq4_multi(k, 3, 4096, 1);
	check_iq4_multi(k, 2, 5120, 3);
	check_iq4_multi(k, 1, 12288, 4);
}

void
check_qk_all(struct kc *k)
{
	/* nb = 1 (one group of a warp busy), 3 (odd: Q6_K blocks 2-byte
	 * aligned), 4, 16, 20 (past the 8-block step; at 2 rows, past the
	 * 16-block step of four blocks in flight at 8 lanes), 48 (three such
	 * steps at 8 lanes, one and a half at 4), 21 (Gemma-4 31B's width:
	 * Q6_K rows of 4410 bytes, every other one 2-byte aligned) and 25 (the
	 * staged Q6_K rows' three stages of 8 blocks wrapping, a block left),
	 * rows past whole 8-warp CTAs, a wide head scaled down (248320x4096 /
	 * 10 x 2) */
	static const int64_t sh[][3] = {
		{ 64, 256, 1 }, { 257, 768, 3 }, { 37, 1024, 2 }, { 1000, 4096, 1 },
		{ 1000, 4096, 16 }, { 45, 5120, 5 }, { 300, 2048, 8 }, { 24832, 2048, 1 },
		{ 24832, 2048, 4 }, { 45, 5120, 2 }, { 300, 12288, 1 }, { 37, 5376, 1 },
		{ 37, 5376, 16 }, { 70, 6400, 4 },
	};
	static const int ts[] = { QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K };

	check_q8k(k, 3, 2048);
	check_q8k(k, 1, 256);
	for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
		for (size_t si = 0; si < sizeof sh / sizeof sh[0]; si++)
			check_qk(k, ts[ti], sh[si][0], sh[si][1], (int)sh[si][2], gpu_qk_lanes(ts[ti]));
		/* the other kernel (the bench's alternative) on a few shapes */
		for (size_t si = 1; si < 5; si++)
			check_qk(k, ts[ti], sh[si][0], sh[si][1], (int)sh[si][2],
			    12 - gpu_qk_lanes(ts[ti]));
	}
	check_qk_multi(k, 1, 1024, 4);
	check_qk_multi(k, 5, 4096, 4);
	/* packed Q6_K: 5 blocks a row (rows start inside groups, the last
	 * group short; experts of 37 rows), Gemma-4 31B's 21 */
	check_q6k_packed(k, 111, 1280, 3);
	check_q6k_packed(k, 37, 5376, 1);
	/* the norm's geometries: 1024 threads, 2 and 4 float4s a thread, rows past shared memory */
	check_qk_multi(k, 3, 4096, 1);
	check_qk_multi(k, 2, 5120, 4);
	check_qk_multi(k, 2, 5120, 1);
	check_qk_multi(k, 1, 12288, 4);
	check_qk_multi(k, 1, 12288, 1);
	check_qk_set(k, 1, 4096, 0);	/* decode */
	check_qk_set(k, 4, 2816, 0);	/* a K=3 verify, 26B-A4B's rows */
	check_qk_set(k, 16, 2048, 8);	/* the most k_mvk takes, the other lanes */
	check_qk_set(k, 3, 4096, 4);
	gchk(k, gpu_tune_qk_stage(k->g, 1));	/* the Q6_K weights of a set staged */
	check_qk_set(k, 1, 5376, 0);
	check_qk_set(k, 4, 2816, 0);
	gchk(k, gpu_tune_qk_stage(k->g, 0));
	/* rows of 64 and 128 weight blocks (staged: 32 a lane step); m 1, 3, 16
	 * (NVFP4 has one form) */
	static const int t8[] = { QUANT_Q8_0, QUANT_Q4_1, QUANT_Q5_1 };
	for (size_t ti = 0; ti < sizeof t8 / sizeof t8[0]; ti++) {
		check_mv8_staged(k, t8[ti], 300, 4096, 1);
		check_mv8_staged(k, t8[ti], 257, 8192, 3);
		check_mv8_staged(k, t8[ti], 45, 4096, 16);
	}
	/* NVFP4: codes by 8-byte loads (rows of 64 blocks, four whole chunks of
	 * 64 sub-blocks; 12: a part chunk, lanes past the row idle) and by
	 * words (5 and 7 blocks: rows 4-byte aligned, part chunks) */
	check_mv8_lanes(k, QUANT_NVFP4, GPU_MV8_AUTO, 300, 4096);
	check_mv8_lanes(k, QUANT_NVFP4, GPU_MV8_AUTO, 257, 768);
	check_mv8_lanes(k, QUANT_NVFP4, GPU_MV8_AUTO, 45, 320);
	check_mv8_lanes(k, QUANT_NVFP4, GPU_MV8_AUTO, 70, 448);
	check_mv8_lanes(k, QUANT_Q8_0, GPU_MV8_LANE2, 300, 4096);
	check_mv8_lanes(k, QUANT_Q8_0, GPU_MV8_LANE2, 257, 800);	/* 25 blocks: odd rows 2-byte aligned */
	/* Q4_0 and Q5_0 (two lanes a block, their one form): rows of 128 blocks,
	 * 25 (2 mod 4 bytes), 22 (the 26B-A4B's down experts' 704), 1; one x for
	 * them with Q8_0 and Q6_K (Q8_0 and Q8_K blocks), plain and fused */
	for (int t = QUANT_Q4_0; t <= QUANT_Q5_0; t += QUANT_Q5_0 - QUANT_Q4_0) {
		check_mv8_lanes(k, t, GPU_MV8_AUTO, 300, 4096);
		check_mv8_lanes(k, t, GPU_MV8_AUTO, 257, 800);
		check_mv8_lanes(k, t, GPU_MV8_AUTO, 2816, 704);
		check_mv8_lanes(k, t, GPU_MV8_AUTO, 64, 32);
	}
	check_q45_multi(k, 3, 704, 3);
	check_q45_multi(k, 4, 2048, 4);
	check_q45_multi(k, 16, 4096, 2);
	check_mv8_tc_all(k);
	check_qk_tc_all(k);
}

#endif	/* MEMRA_HAVE_CUDA */
