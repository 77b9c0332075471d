/*
 * matvec-q8-emu: a CPU model of cuda/matvec_q8.cu's k_mv8 / k_mv8s per-lane
 * arithmetic (not built by make; a review aid for a machine without a
 * GPU).  It replays mv8_block lane by lane for Q8_0, NVFP4, Q4_1 and Q5_1
 * (the same word loads (Q8_0's 2-byte aligned blocks by aligned words and
 * funnel shifts), byte permutes (prmt in its default mode, sign
 * replication included), dp4a (sums started at the float bits of 1.5 *
 * 2^23, then that subtracted: checked equal to the int -> float
 * conversion), fp16 scale tricks and float operation
 * order: fmaf where the kernel has __fmaf_rn, nothing else fused), then
 * the warp's butterfly, and compares each product with quant_vec_dot on
 * x quantized by quant_quantize_act, within kernel-check's tolerance
 * (1e-5 of sum |w x|).  Also exhaustive: mv8_ue4m3x4 against
 * quant_ue4m3_to_f32 / 2 for every byte in every position, mv8_fp4x8
 * against the e2m1 kvalues for every nibble in every position.  Rows of
 * 1..16 inputs give each row the same bits (the code per row does not
 * depend on m; checked here by replaying rows alone and together).
 * k_mv8s runs the same mv8_block on a shared-memory copy of the bytes:
 * the same model.  NVFP4 also by four and by two lanes a block
 * (GPU_MV8_LANE4, mv8_sub; GPU_MV8_LANE2, mv8_half), Q8_0 by two
 * (mv8_q8half, both alignments).
 * Keep it in step with the kernel.
 *   cc -O1 -ffp-contract=off -std=c11 -D_GNU_SOURCE -Ilib -o /tmp/emu8 \
 *       tools/matvec-q8-emu.c lib/quant*.c lib/util.c -lm && /tmp/emu8
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant.h"

enum { MAXM = 16 };

static int nmagic;	/* dp4a sums whose mv8_i2f is not (float) of the sum */

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static float unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }

static int dp4a(uint32_t a, uint32_t b, int c) { for (int k = 0; k < 4; k++) c += (int8_t)(a >> 8 * k) * (int8_t)(b >> 8 * k); return c; }
/* mv8_i2f: a dp4a sum started at 0x4B400000 as a float */
static float i2f(int t) { float f; memcpy(&f, &t, 4); return f - 12582912.0f; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static float h2f(uint16_t h) { return quant_f16_to_f32(h); }

/* PTX prmt.b32, default mode: selector nibble bits 0..2 pick a byte of
 * {b, a}, bit 3 replicates its sign bit */
static uint32_t prmt(uint32_t a, uint32_t b, uint32_t s)
{
	uint64_t t = (uint64_t)b << 32 | a;
	uint32_t r = 0;
	for (int k = 0; k < 4; k++) {
		unsigned n = s >> 4 * k & 0xF;
		uint32_t byte = (uint32_t)(t >> 8 * (n & 7)) & 0xFF;
		if (n & 8)
			byte = byte & 0x80 ? 0xFF : 0;
		r |= byte << 8 * k;
	}
	return r;
}

/* mv8_fp4x8 (tab: mv8_fp4tab's words) */
static void fp4x8(uint32_t v, int *lo, int *hi)
{
	uint32_t tx = 0x03020100u, ty = 0xFDFEFF00u;
	uint32_t c = v & 0x77777777u, s = (v >> 1 & 0x44444444u) | 0x32103210u;
	uint32_t p0 = prmt(prmt(tx, 0x0C080604u, c), prmt(ty, 0xF4F8FAFCu, c), s);
	c >>= 16, s >>= 16;
	uint32_t p1 = prmt(prmt(tx, 0x0C080604u, c), prmt(ty, 0xF4F8FAFCu, c), s);
	*lo = (int)prmt(p0, p1, 0x6420);
	*hi = (int)prmt(p0, p1, 0x7531);
}

/* mv8_ue4m3x4: the fp16 product by 128 is exact, so float(h) * 128 */
static void ue4m3x4(uint32_t sc, float *ws)
{
	uint32_t z = ~(((~sc & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | sc | 0x7F7F7F7Fu);
	uint32_t c = sc & 0x7F7F7F7Fu & ~(z - (z >> 7));
	uint32_t h01 = prmt(c, 0, 0x4140) << 7, h23 = prmt(c, 0, 0x4342) << 7;
	ws[0] = h2f((uint16_t)h01) * 128.0f, ws[1] = h2f((uint16_t)(h01 >> 16)) * 128.0f;
	ws[2] = h2f((uint16_t)h23) * 128.0f, ws[3] = h2f((uint16_t)(h23 >> 16)) * 128.0f;
}

/* x of m rows as the kernels see it: q[j][e], dx[j][block], sx[j][block] */
struct xin {
	int8_t	*q;
	float	*dx, *sx;
	int	nb;
};

/* mv8_block<T>: acc[j] += block b (bytes blk) . x rows j < m */
static void block(int t, const uint8_t *blk, int b, const struct xin *X, int m, float *acc)
{
	int nb = X->nb;

	if (t == QUANT_Q8_0) {
		/* 8 words from the aligned word holding d, funnel shifts, two halves */
		unsigned o = (unsigned)((uintptr_t)blk & 2), sh = 16 + 8 * o;
		uint32_t P[8], wq[8];
		for (int i = 0; i < 8; i++)
			P[i] = rd32(blk - o + 4 * i);
		float dw = h2f((uint16_t)(P[0] >> (8 * o)));
		for (int i = 0; i < 7; i++)
			wq[i] = (uint32_t)(((uint64_t)P[i + 1] << 32 | P[i]) >> sh);
		wq[7] = (uint32_t)rd16(blk + 30) | (uint32_t)rd16(blk + 32) << 16;
		for (int j = 0; j < m; j++) {
			const uint8_t *xq = (const uint8_t *)X->q + ((size_t)j * nb + b) * 32;
			int s = 0x4B400000;
			for (int i = 0; i < 8; i++)
				s = dp4a(wq[i], rd32(xq + 4 * i), s);
			acc[j] = fmaf(i2f(s), dw * X->dx[(size_t)j * nb + b], acc[j]);
		}
	} else if (t == QUANT_Q4_1 || t == QUANT_Q5_1) {
		uint32_t dm = rd32(blk), qh = t == QUANT_Q5_1 ? rd32(blk + 4) : 0;
		const uint8_t *qs = blk + (t == QUANT_Q5_1 ? 8 : 4);
		float dw = h2f((uint16_t)dm), mw = h2f((uint16_t)(dm >> 16));
		uint32_t wq[8];
		for (int i = 0; i < 4; i++) {
			uint32_t v = rd32(qs + 4 * i), lo = v & 0x0F0F0F0Fu, hi = (v >> 4) & 0x0F0F0F0Fu;
			if (t == QUANT_Q5_1) {
				/* 4 bits to bit 4 of each byte: the multiply's partial
				 * products land on distinct bits (no carries) */
				lo |= ((qh >> (4 * i) & 0xF) * 0x02040810u) & 0x10101010u;
				hi |= ((qh >> (4 * i + 16) & 0xF) * 0x02040810u) & 0x10101010u;
			}
			wq[i] = lo, wq[4 + i] = hi;
		}
		for (int j = 0; j < m; j++) {
			const uint8_t *xq = (const uint8_t *)X->q + ((size_t)j * nb + b) * 32;
			int s = 0x4B400000;
			for (int i = 0; i < 8; i++)
				s = dp4a(wq[i], rd32(xq + 4 * i), s);
			size_t xi = (size_t)j * nb + b;
			acc[j] = fmaf(mw, X->sx[xi], fmaf(i2f(s), dw * X->dx[xi], acc[j]));
		}
	} else {	/* NVFP4 */
		float ws[4];
		int w[16];
		ue4m3x4(rd32(blk), ws);
		for (int s = 0; s < 4; s++) {
			fp4x8(rd32(blk + 4 + 8 * s), &w[4 * s], &w[4 * s + 2]);
			fp4x8(rd32(blk + 8 + 8 * s), &w[4 * s + 1], &w[4 * s + 3]);
		}
		for (int j = 0; j < m; j++) {
			const uint8_t *xq = (const uint8_t *)X->q + ((size_t)j * nb + 2 * b) * 32;
			const float *d = X->dx + (size_t)j * nb + 2 * b;
			float tt[4];
			for (int s = 0; s < 4; s++) {
				int i0 = 0x4B400000, i1 = 0;
				for (int i = 0; i < 4; i++) {
					i0 = dp4a((uint32_t)w[4 * s + i], rd32(xq + 16 * s + 4 * i), i0);
					i1 = dp4a((uint32_t)w[4 * s + i], rd32(xq + 16 * s + 4 * i), i1);
				}
				tt[s] = i2f(i0);
				if (tt[s] != (float)i1)	/* the magic is exact */
					nmagic++;
			}
			float s01 = fmaf(ws[1], tt[1], ws[0] * tt[0]);
			float s23 = fmaf(ws[3], tt[3], ws[2] * tt[2]);
			acc[j] = fmaf(d[1], s23, fmaf(d[0], s01, acc[j]));
		}
	}
}

/* mv8_ue4m3 */
static float ue4m3(unsigned x)
{
	unsigned c = x == 0x7F ? 0 : x & 0x7F;
	return h2f((uint16_t)(c << 7)) * 128.0f;
}

/* mv8_sub: NVFP4 sub-block s of the block at blk (four lanes a block) */
static void sub(const uint8_t *blk, int s, int xs, const struct xin *X, int m, float *acc)
{
	int nb = X->nb, w[4];
	float ws = ue4m3(blk[s]);

	fp4x8(rd32(blk + 4 + 8 * s), &w[0], &w[2]);
	fp4x8(rd32(blk + 8 + 8 * s), &w[1], &w[3]);
	for (int j = 0; j < m; j++) {
		size_t xi = (size_t)j * nb + (xs >> 1);
		const uint8_t *xq = (const uint8_t *)X->q + xi * 32 + (xs & 1) * 16;
		int i = 0x4B400000;
		for (int k = 0; k < 4; k++)
			i = dp4a((uint32_t)w[k], rd32(xq + 4 * k), i);
		acc[j] = fmaf(X->dx[xi], ws * i2f(i), acc[j]);
	}
}

/* mv8_half: NVFP4 half h (sub-blocks 2h, 2h + 1) of the block at blk (two lanes a block) */
static void half(const uint8_t *blk, int h, int xb, const struct xin *X, int m, float *acc)
{
	int nb = X->nb, w[8];
	float ws[4];

	ue4m3x4((uint32_t)blk[2 * h] | (uint32_t)blk[2 * h + 1] << 8, ws);
	for (int s = 0; s < 2; s++) {
		fp4x8(rd32(blk + 4 + 16 * h + 8 * s), &w[4 * s], &w[4 * s + 2]);
		fp4x8(rd32(blk + 8 + 16 * h + 8 * s), &w[4 * s + 1], &w[4 * s + 3]);
	}
	for (int j = 0; j < m; j++) {
		size_t xi = (size_t)j * nb + xb;
		const uint8_t *xq = (const uint8_t *)X->q + xi * 32;
		float t[2];
		for (int s = 0; s < 2; s++) {
			int i = 0x4B400000;
			for (int k = 0; k < 4; k++)
				i = dp4a((uint32_t)w[4 * s + k], rd32(xq + 16 * s + 4 * k), i);
			t[s] = i2f(i);
		}
		acc[j] = fmaf(X->dx[xi], fmaf(ws[1], t[1], ws[0] * t[0]), acc[j]);
	}
}

/* mv8_q8half: Q8_0 half h of the block at blk (two lanes a block) */
static void q8half(const uint8_t *blk, int h, int b, const struct xin *X, int m, float *acc)
{
	const uint8_t *qs = blk + 2 + 16 * h;
	unsigned o = (unsigned)((uintptr_t)qs & 2);
	uint32_t P[4], e = rd16(qs + 14), w[4];
	float dw = h2f(rd16(blk));
	int nb = X->nb;

	for (int i = 0; i < 4; i++)
		P[i] = rd32(qs - o + 4 * i);
	for (int i = 0; i < 4; i++)
		w[i] = (uint32_t)(((uint64_t)(i < 3 ? P[i + 1] : e) << 32 | P[i]) >> (8 * o));
	for (int j = 0; j < m; j++) {
		size_t xi = (size_t)j * nb + b;
		const uint8_t *xq = (const uint8_t *)X->q + xi * 32 + 16 * h;
		int i = 0x4B400000;
		for (int k = 0; k < 4; k++)
			i = dp4a(w[k], rd32(xq + 4 * k), i);
		acc[j] = fmaf(i2f(i), dw * X->dx[xi], acc[j]);
	}
}

static int lanes = 1;	/* NVFP4 by 1, 2 (GPU_MV8_LANE2) or 4 (GPU_MV8_LANE4) lanes a block; Q8_0 1 or 2 */

/* k_mv8 for weight row w: 32 lanes, lane l blocks l, l + 32, ... (lane4:
 * sub-block l & 3 of blocks l / 4, l / 4 + 8, ...); then the butterfly
 * (mv8_store) */
static void warp(int t, const uint8_t *w, int bs, int nbw, const struct xin *X, int m, float *y)
{
	float acc[32][MAXM] = { { 0 } };

	for (int l = 0; l < 32; l++)
		if (lanes == 4 && t == QUANT_NVFP4)
			for (int b = l >> 2; b < nbw; b += 8)
				sub(w + (size_t)b * bs, l & 3, 4 * b + (l & 3), X, m, acc[l]);
		else if (lanes == 2 && t == QUANT_NVFP4)
			for (int b = l >> 1; b < nbw; b += 16)
				half(w + (size_t)b * bs, l & 1, 2 * b + (l & 1), X, m, acc[l]);
		else if (lanes == 2 && t == QUANT_Q8_0)
			for (int b = l >> 1; b < nbw; b += 16)
				q8half(w + (size_t)b * bs, l & 1, b, X, m, acc[l]);
		else
			for (int b = l; b < nbw; b += 32)
				block(t, w + (size_t)b * bs, b, X, m, acc[l]);
	for (int j = 0; j < m; j++) {
		float v[32], nv[32];
		for (int l = 0; l < 32; l++)
			v[l] = acc[l][j];
		for (int o = 16; o > 0; o >>= 1) {
			for (int l = 0; l < 32; l++)
				nv[l] = v[l] + v[l ^ o];
			memcpy(v, nv, sizeof v);
		}
		y[j] = v[0];
	}
}

static int nfail;

static void check(int cond, const char *what)
{
	if (!cond) {
		if (nfail < 20)
			printf("FAIL %s\n", what);
		nfail++;
	}
}

/* every byte in every position of the scale word; every nibble in every
 * position of a code word */
static void exhaustive(void)
{
	static const int kv[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
	char what[64];
	int n = 0;

	for (int pos = 0; pos < 4; pos++)
		for (unsigned x = 0; x < 256; x++) {
			uint32_t sc = (uint32_t)(rnd() & 0xFFFFFFFFu);
			sc = (sc & ~(0xFFu << 8 * pos)) | x << 8 * pos;
			float ws[4];
			ue4m3x4(sc, ws);
			for (int k = 0; k < 4; k++) {
				float want = quant_ue4m3_to_f32((uint8_t)(sc >> 8 * k)) * 0.5f;
				snprintf(what, sizeof what, "ue4m3 0x%08x byte %d", sc, k);
				check(memcmp(&want, &ws[k], 4) == 0, what), n++;
			}
		}
	for (int pos = 0; pos < 8; pos++)
		for (unsigned c = 0; c < 16; c++)
			for (int rep = 0; rep < 16; rep++) {
				uint32_t v = (uint32_t)(rnd() & 0xFFFFFFFFu);
				v = (v & ~(0xFu << 4 * pos)) | c << 4 * pos;
				int lo, hi;
				fp4x8(v, &lo, &hi);
				for (int k = 0; k < 4; k++) {
					int a = (int8_t)(lo >> 8 * k), b = (int8_t)(hi >> 8 * k);
					snprintf(what, sizeof what, "fp4x8 0x%08x value %d", v, k);
					check(a == kv[v >> 8 * k & 0xF] && b == kv[v >> (8 * k + 4) & 0xF], what);
					n++;
				}
			}
	printf("exhaustive: %d scale and code checks\n", n);
}

/*
 * rows x ne0 weights of type t (quantized random floats, or random bytes
 * when raw), m rows of x: every product within 1e-5 of sum |w x| of
 * quant_vec_dot, and each row alone the same bits as in the m-row call.
 */
static void products(int t, int rows, int ne0, int m, int raw, double *worst, int *count)
{
	int nb = ne0 / 32, blk = t == QUANT_NVFP4 ? 64 : 32, nbw = ne0 / blk;
	size_t rb = quant_row_size(t, ne0), xb = quant_row_size(quant_vec_dot_type(t), ne0);
	int bs = (int)(rb / nbw);
	uint8_t *w = malloc(rb * rows), *xq = malloc(xb * m);
	float *x = malloc(sizeof(float) * ne0 * m), *wf = malloc(sizeof(float) * ne0);
	float *xf = malloc(sizeof(float) * ne0 * m);
	struct xin X = { malloc((size_t)m * ne0), malloc(sizeof(float) * m * nb),
	    malloc(sizeof(float) * m * nb), nb };
	char what[96];

	for (int r = 0; r < rows; r++) {
		if (raw) {
			for (size_t i = 0; i < rb; i++)
				w[r * rb + i] = (uint8_t)rnd();
			if (t != QUANT_NVFP4)	/* finite fp16 scales */
				for (int b = 0; b < nbw; b++) {
					uint8_t *p = w + r * rb + (size_t)b * bs;
					p[1] &= 0x3B;
					if (t != QUANT_Q8_0)
						p[3] &= 0x3B;
				}
		} else {
			for (int i = 0; i < ne0; i++)
				x[i] = unif(-1, 1) * (i % 97 == 0 ? 8.0f : 1.0f);
			if (quant_quantize_row(t, x, w + r * rb, ne0, NULL) != 0)
				abort();
		}
	}
	for (int j = 0; j < m; j++) {
		float *xr = x + (size_t)j * ne0;
		for (int i = 0; i < ne0; i++)
			xr[i] = unif(-1, 1) * (j == 1 ? 1e-3f : 1.0f);
		if (quant_quantize_act(t, xr, xq + j * xb, ne0) != 0)
			abort();
		int xs = t == QUANT_Q8_0 || t == QUANT_NVFP4 ? 34 : 36, o = xs - 32;
		for (int b = 0; b < nb; b++) {
			const uint8_t *p = xq + j * xb + (size_t)b * xs;
			X.dx[j * nb + b] = h2f(rd16(p));
			X.sx[j * nb + b] = o == 4 ? h2f(rd16(p + 2)) : 0.0f;
			memcpy(X.q + (size_t)j * ne0 + b * 32, p + o, 32);
			for (int k = 0; k < 32; k++)
				xf[(size_t)j * ne0 + b * 32 + k] = X.dx[j * nb + b] * (float)X.q[(size_t)j * ne0 + b * 32 + k];
		}
	}
	for (int r = 0; r < rows; r++) {
		float y[MAXM], y1[MAXM];
		warp(t, w + r * rb, bs, nbw, &X, m, y);
		quant_dequantize_row(t, w + r * rb, wf, ne0);
		for (int j = 0; j < m; j++) {
			struct xin X1 = { X.q + (size_t)j * ne0, X.dx + j * nb, X.sx + j * nb, nb };
			warp(t, w + r * rb, bs, nbw, &X1, 1, y1 + j);
			double ref = quant_vec_dot(t, ne0, w + r * rb, xq + j * xb), mag = 0;
			for (int i = 0; i < ne0; i++)
				mag += fabs((double)wf[i] * xf[(size_t)j * ne0 + i]);
			if (t == QUANT_Q4_1 || t == QUANT_Q5_1)	/* the m * s terms */
				for (int b = 0; b < nb; b++)
					mag += fabs((double)h2f(rd16(w + r * rb + (size_t)b * bs + 2)) *
					    X.sx[j * nb + b]);
			double e = fabs(y[j] - ref) / (mag > 0 ? mag : 1);
			if (e > *worst)
				*worst = e;
			snprintf(what, sizeof what, "%s %dx%d m=%d%s row %d input %d: %g vs %g (%.2g of mag)",
			    quant_name(t), rows, ne0, m, raw ? " raw" : "", r, j, y[j], ref, e);
			check(e <= 1e-5 && !isnan(y[j]), what);
			snprintf(what, sizeof what, "%s %dx%d m=%d row %d input %d alone", quant_name(t),
			    rows, ne0, m, r, j);
			check(memcmp(&y[j], &y1[j], 4) == 0, what);
			(*count)++;
		}
	}
	free(w), free(xq), free(x), free(wf), free(xf), free(X.q), free(X.dx), free(X.sx);
}

int
main(void)
{
	static const int types[] = { QUANT_NVFP4, QUANT_Q8_0, QUANT_Q4_1, QUANT_Q5_1 };
	static const int shapes[][2] = { { 7, 64 }, { 5, 512 }, { 4, 4096 }, { 3, 4160 }, { 2, 12288 } };
	static const int ms[] = { 1, 2, 3, 4, 8, 16 };

	exhaustive();
	for (size_t ti = 0; ti < sizeof types / sizeof types[0] + 3; ti++) {
		/* then NVFP4 by four, two lanes, Q8_0 by two */
		int t = ti < 4 ? types[ti] : ti < 6 ? QUANT_NVFP4 : QUANT_Q8_0;
		double worst = 0;
		int count = 0;
		lanes = ti == 4 ? 4 : ti >= 5 ? 2 : 1;
		for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
			for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
				for (int raw = 0; raw < 2; raw++)
					products(t, shapes[si][0], shapes[si][1], ms[mi], raw,
					    &worst, &count);
		printf("%-5s%s %5d products, worst |y - quant_vec_dot| = %.3g of sum |w x|\n",
		    quant_name(t), lanes == 4 ? " lane4" : lanes == 2 ? " lane2" : "", count, worst);
	}
	for (unsigned x = 0; x < 256; x++) {	/* mv8_ue4m3, every byte */
		float a = ue4m3(x), b = quant_ue4m3_to_f32((uint8_t)x) * 0.5f;
		check(memcmp(&a, &b, 4) == 0, "mv8_ue4m3");
	}
	printf("NVFP4 dp4a sums whose magic conversion differs from (float): %d\n", nmagic);
	nfail += nmagic;
	printf("%s (%d failures)\n", nfail ? "FAILED" : "OK", nfail);
	return nfail != 0;
}
