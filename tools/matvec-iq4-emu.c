/*
 * matvec-iq4-emu: a CPU model of cuda/matvec_iq4.cu and cuda/mmq_iq4.cu
 * (not built by make; a review aid for a machine without a GPU).  It
 * replays gpu_iq4x8 (cuda/gpu_impl.cuh; prmt.b32 in its default mode: a
 * selector nibble with bit 3 set gives the chosen byte's bit 7 in all 8
 * bits), the IQ4_XS decode kernel lane by lane (8 lanes a super-block, group
 * g of 8 taking blocks g, g + 4, ... two at a time, the header and quant
 * words as loaded, dp4a from the magic, the per-lane float terms, the
 * butterfly xor 1..16), the IQ4_NL decode kernel (a lane a block, 5 aligned
 * words from the block or from 2 bytes before it, funnel shifts, fma steps,
 * the butterfly xor 16..1) and the IQ4_XS prefill GEMM's sums (a
 * super-block's integer sum of scaled sub-block dots, then (d * dy) *
 * (float)isum), on rows lib/quant quantizes from random values: IQ4_XS of
 * 1, 3, 4, 5, 16 and 44 super-blocks, IQ4_NL of 1, 12 and 129 blocks (rows
 * 2 mod 4 bytes apart: both word alignments), 1, 5 and 16 input rows.  It
 * compares the grid's words with qi_kvalues_iq4nl, gpu_iq4x8 with the table
 * on 2^24 words, the decode products with quant_vec_dot (within 1e-5 of 1 +
 * |y|; x as quant_quantize_act quantizes it, the device quantizers being the
 * K-quants' and Q8_0's), each row of an m-row product with the same row
 * alone (bit for bit), and the GEMM's sums with quant_vec_dot_portable (bit
 * for bit).  Keep it in step with the kernels.
 * make check runs it as below, in a temporary directory (t/emu.bats):
 *   cc -O1 -ffp-contract=off -std=c11 -D_GNU_SOURCE -Ilib -o /tmp/emu \
 *       tools/matvec-iq4-emu.c lib/quant*.c lib/util.c -lm && /tmp/emu
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant.h"
#include "quant_impl.h"

/* cuda/gpu_impl.cuh's table words */
#define GPU_IQ4_N0 0xBFAD9881u
#define GPU_IQ4_N1 0xF6EADDCFu
#define GPU_IQ4_P0 0x26190D01u
#define GPU_IQ4_P1 0x71594535u
#define IQ_MAGIC 0x4B400000

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static float unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }

static int dp4a(uint32_t a, uint32_t b, int c) { for (int k = 0; k < 4; k++) c += (int8_t)(a >> 8 * k) * (int8_t)(b >> 8 * k); return c; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
/* __funnelshift_rc: (hi:lo) >> min(sh, 32) */
static uint32_t fshrc(uint32_t lo, uint32_t hi, unsigned sh) { uint64_t v = (uint64_t)hi << 32 | lo; return (uint32_t)(v >> (sh < 32 ? sh : 32)); }
static float h2f(uint32_t h) { return quant_f16_to_f32((uint16_t)h); }
static float bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* prmt.b32 d, a, b, c in its default mode */
static uint32_t prmt(uint32_t a, uint32_t b, uint32_t c)
{
	uint64_t x = (uint64_t)b << 32 | a;
	uint32_t r = 0;

	for (int i = 0; i < 4; i++) {
		unsigned n = c >> 4 * i & 0xF, byte = (unsigned)(x >> 8 * (n & 7)) & 0xFF;
		if (n & 8)
			byte = byte & 0x80 ? 0xFF : 0;
		r |= byte << 8 * i;
	}
	return r;
}

/* gpu_iq4x8, line for line */
static void iq4x8(uint32_t q, int *lo, int *hi)
{
	uint32_t x = q ^ 0x88888888u, s = (q >> 1 & 0x44444444u) | 0x32103210u;
	uint32_t a = prmt(prmt(GPU_IQ4_N0, GPU_IQ4_N1, q), prmt(GPU_IQ4_P0, GPU_IQ4_P1, x), s);
	uint32_t b = prmt(prmt(GPU_IQ4_N0, GPU_IQ4_N1, q >> 16), prmt(GPU_IQ4_P0, GPU_IQ4_P1, x >> 16), s >> 16);

	*lo = (int)prmt(a, b, 0x6420u);
	*hi = (int)prmt(a, b, 0x7531u);
}

/* matvec_iq4.cu's k_iq4xs for m rows: q[m][ne0], dk[m][nb] */
static void xs_emu(const uint8_t *wr, int nb, const int8_t *q, const float *dk, int m, float *y)
{
	static float acc[32][16];
	int64_t ne0 = (int64_t)nb * 256;

	memset(acc, 0, sizeof acc);
	for (int b0 = 0; b0 < nb; b0 += 8)
		for (int lane = 0; lane < 32; lane++)
			for (int half = 0; half < 2; half++) {	/* xs_row: block b, then b + 4 */
				int g = lane >> 3, i = lane & 7, b = b0 + g + 4 * half, lo[4], hi[4];
				if (b >= nb)
					continue;
				const uint8_t *blk = wr + (size_t)b * 136;
				uint32_t hd = rd32(blk), hl = rd32(blk + 4);
				uint32_t qw[4] = { rd32(blk + 8 + 16 * i), rd32(blk + 12 + 16 * i),
				    rd32(blk + 16 + 16 * i), rd32(blk + 20 + 16 * i) };
				int ls = (int)(hl >> (4 * i) & 0xFu) | (int)(hd >> (16 + 2 * i) & 3u) << 4;
				float d = h2f(hd & 0xFFFFu), fs = (float)(ls - 32);
				for (int k = 0; k < 4; k++)
					iq4x8(qw[k], &lo[k], &hi[k]);
				for (int j = 0; j < m; j++) {
					const uint8_t *xq = (const uint8_t *)(q + (size_t)j * ne0 + b * 256 + 32 * i);
					int t = IQ_MAGIC;
					for (int k = 0; k < 4; k++)
						t = dp4a((uint32_t)lo[k], rd32(xq + 4 * k), t);
					for (int k = 0; k < 4; k++)
						t = dp4a((uint32_t)hi[k], rd32(xq + 16 + 4 * k), t);
					volatile float ft = bits((uint32_t)t) - 12582912.0f;
					volatile float p1 = d * dk[(size_t)j * nb + b], p2 = ft * fs, p3 = p1 * p2;
					acc[lane][j] = acc[lane][j] + p3;
				}
			}
	for (int j = 0; j < m; j++) {	/* xs_sum: xor 1, 2, 4, 8, 16 */
		float v[32], nv[32];
		for (int l = 0; l < 32; l++)
			v[l] = acc[l][j];
		for (int o = 1; o < 32; o <<= 1) {
			for (int l = 0; l < 32; l++) { volatile float t = v[l] + v[l ^ o]; nv[l] = t; }
			memcpy(v, nv, sizeof v);
		}
		y[j] = v[0];
	}
}

/* matvec_iq4.cu's k_iq4nl for m rows; wr at byte offset off of a 16-aligned base */
static void nl_emu(const uint8_t *base, size_t off, int nb, const int8_t *q, const float *dx, int m,
    float *y)
{
	static float acc[32][16];

	memset(acc, 0, sizeof acc);
	for (int lane = 0; lane < 32; lane++)
		for (int b = lane; b < nb; b += 64)
			for (int half = 0; half < 2; half++) {
				int bb = b + 32 * half, lo[4], hi[4];
				if (bb >= nb)
					continue;
				size_t a = off + (size_t)bb * 18;
				unsigned o = (unsigned)(a & 2), sh = 16 + 8 * o;
				uint32_t p[5];
				for (int k = 0; k < 5; k++)
					p[k] = rd32(base + a - o + 4 * k);
				float d = h2f(p[0] >> (8 * o) & 0xFFFFu);
				for (int k = 0; k < 4; k++)
					iq4x8(fshrc(p[k], p[k + 1], sh), &lo[k], &hi[k]);
				for (int j = 0; j < m; j++) {
					size_t xi = (size_t)j * nb + bb;
					const uint8_t *xq = (const uint8_t *)(q + xi * 32);
					int t = IQ_MAGIC;
					for (int k = 0; k < 4; k++)
						t = dp4a((uint32_t)lo[k], rd32(xq + 4 * k), t);
					for (int k = 0; k < 4; k++)
						t = dp4a((uint32_t)hi[k], rd32(xq + 16 + 4 * k), t);
					volatile float ft = bits((uint32_t)t) - 12582912.0f, pd = d * dx[xi];
					acc[lane][j] = fmaf(ft, pd, acc[lane][j]);
				}
			}
	for (int j = 0; j < m; j++) {	/* nl_sum: xor 16, 8, 4, 2, 1 */
		float v[32], nv[32];
		for (int l = 0; l < 32; l++)
			v[l] = acc[l][j];
		for (int o = 16; o > 0; o >>= 1) {
			for (int l = 0; l < 32; l++) { volatile float t = v[l] + v[l ^ o]; nv[l] = t; }
			memcpy(v, nv, sizeof v);
		}
		y[j] = v[0];
	}
}

/* mmq_iq4.cu's sums of one (weight row, input row): xq_load's decode and
 * scales, xq_mma's integer sums (the dp4a twin's), its float step */
static float gemm_emu(const uint8_t *wr, int nb, const int8_t *q, const float *dk)
{
	float acc = 0.0f;

	for (int ks = 0; ks < nb; ks++) {
		const uint8_t *blk = wr + (size_t)ks * 136;
		uint32_t hx = rd32(blk), hy = rd32(blk + 4);
		int is = 0;
		for (int sb = 0; sb < 8; sb++) {
			int v[8], c = 0;
			int sc = ((int)(hy >> (4 * sb) & 0xFu) | (int)(hx >> (16 + 2 * sb) & 3u) << 4) - 32;
			iq4x8(rd32(blk + 8 + 16 * sb), &v[0], &v[4]);
			iq4x8(rd32(blk + 12 + 16 * sb), &v[1], &v[5]);
			iq4x8(rd32(blk + 16 + 16 * sb), &v[2], &v[6]);
			iq4x8(rd32(blk + 20 + 16 * sb), &v[3], &v[7]);
			for (int i = 0; i < 8; i++)
				c = dp4a((uint32_t)v[i], rd32((const uint8_t *)(q + ks * 256 + sb * 32 + 4 * i)), c);
			is += sc * c;
		}
		volatile float p1 = h2f(hx & 0xFFFFu) * dk[ks], p2 = p1 * (float)is;
		acc = acc + p2;
	}
	return acc;
}

static int bad;

static void
check(const char *what, double got, double want, double tol)
{
	double rel = fabs(got - want) / (1 + fabs(want));

	if (!(rel <= tol)) {
		printf("%s: %.9g against %.9g (rel %.3g)\n", what, got, want, rel);
		bad++;
	}
}

/* x[m][ne0] as Q8_K rows: q, dk (quant_quantize_act's bytes: d f32, qs[256], bsums[16]) */
static void q8k_rows(const float *x, int m, int64_t ne0, int8_t *q, float *dk)
{
	int nb = (int)(ne0 / 256);
	uint8_t *b = malloc((size_t)nb * 292);

	for (int j = 0; j < m; j++) {
		quant_quantize_act(QUANT_IQ4_XS, x + (size_t)j * ne0, b, ne0);
		for (int k = 0; k < nb; k++) {
			memcpy(dk + (size_t)j * nb + k, b + 292 * k, 4);
			memcpy(q + (size_t)j * ne0 + 256 * k, b + 292 * k + 4, 256);
		}
	}
	free(b);
}

/* x[m][ne0] as Q8_0 rows: q, dx (d fp16, qs[32] a block) */
static void q80_rows(const float *x, int m, int64_t ne0, int8_t *q, float *dx)
{
	int nb = (int)(ne0 / 32);
	uint8_t *b = malloc((size_t)nb * 34);

	for (int j = 0; j < m; j++) {
		quant_quantize_act(QUANT_IQ4_NL, x + (size_t)j * ne0, b, ne0);
		for (int k = 0; k < nb; k++) {
			uint16_t h;
			memcpy(&h, b + 34 * k, 2);
			dx[(size_t)j * nb + k] = h2f(h);
			memcpy(q + (size_t)j * ne0 + 32 * k, b + 34 * k + 2, 32);
		}
	}
	free(b);
}

static void run(int t, int nb, int m)
{
	int blk = t == QUANT_IQ4_XS ? 256 : 32, rows = 5;
	int64_t ne0 = (int64_t)nb * blk;
	size_t rb = quant_row_size(t, ne0), wxq = quant_row_size(quant_vec_dot_type(t), ne0);
	uint8_t *W = aligned_alloc(16, (rb * rows + 64 + 15) / 16 * 16), *xq = malloc(wxq);
	float *wf = malloc(ne0 * 4), *x = malloc((size_t)m * ne0 * 4), *dk = malloc((size_t)m * ne0 / 32 * 4);
	int8_t *q = malloc((size_t)m * ne0);
	char what[96];

	for (int r = 0; r < rows; r++) {
		for (int64_t e = 0; e < ne0; e++)
			wf[e] = unif(-1, 1) * (e % 97 == 0 ? 8.0f : 1.0f);
		quant_quantize_row(t, wf, W + r * rb, ne0, NULL);
	}
	for (int64_t i = 0; i < m * ne0; i++)
		x[i] = unif(-1, 1);
	if (t == QUANT_IQ4_XS)
		q8k_rows(x, m, ne0, q, dk);
	else
		q80_rows(x, m, ne0, q, dk);
	for (int r = 0; r < rows; r++) {
		float y[16], y1[1];
		if (t == QUANT_IQ4_XS)
			xs_emu(W + r * rb, nb, q, dk, m, y);
		else
			nl_emu(W, r * rb, nb, q, dk, m, y);
		for (int j = 0; j < m; j++) {
			quant_quantize_act(t, x + (size_t)j * ne0, xq, ne0);
			float c = quant_vec_dot(t, ne0, W + r * rb, xq);
			snprintf(what, sizeof what, "%s nb=%d m=%d row %d input %d", quant_name(t), nb, m, r, j);
			check(what, y[j], c, 1e-5);
			/* the same row alone: the same bits */
			if (t == QUANT_IQ4_XS)
				xs_emu(W + r * rb, nb, q + (size_t)j * ne0, dk + (size_t)j * nb, 1, y1);
			else
				nl_emu(W, r * rb, nb, q + (size_t)j * ne0, dk + (size_t)j * (ne0 / 32), 1, y1);
			if (memcmp(&y1[0], &y[j], 4) != 0) {
				printf("%s: %.9g alone, %.9g in %d rows\n", what, y1[0], y[j], m);
				bad++;
			}
			if (t == QUANT_IQ4_XS) {	/* the GEMM: the portable vd_k's bits */
				float gm = gemm_emu(W + r * rb, nb, q + (size_t)j * ne0, dk + (size_t)j * nb);
				float pc = quant_vec_dot_portable(t, ne0, W + r * rb, xq);
				if (memcmp(&gm, &pc, 4) != 0) {
					printf("%s: GEMM %.9g, portable vd_k %.9g\n", what, gm, pc);
					bad++;
				}
				check(what, gm, c, 1e-5);
			}
		}
	}
	free(W), free(xq), free(wf), free(x), free(dk), free(q);
}

int main(void)
{
	static const int xs[] = { 1, 3, 4, 5, 16, 44 }, nl[] = { 1, 12, 129 }, ms[] = { 1, 5, 16 };
	uint32_t w[4] = { GPU_IQ4_N0, GPU_IQ4_N1, GPU_IQ4_P0, GPU_IQ4_P1 };

	for (int n = 0; n < 16; n++)
		if ((int8_t)(w[n / 4] >> 8 * (n % 4)) != qi_kvalues_iq4nl[n]) {
			printf("table word %d byte %d: %d, qi_kvalues_iq4nl %d\n", n / 4, n % 4,
			    (int8_t)(w[n / 4] >> 8 * (n % 4)), qi_kvalues_iq4nl[n]);
			bad++;
		}
	for (uint32_t i = 0; i < (1u << 24); i++) {
		uint32_t q = i < 65536 ? i * 0x10001u : (uint32_t)rnd();
		int lo, hi;
		iq4x8(q, &lo, &hi);
		for (int k = 0; k < 4; k++) {
			unsigned byte = q >> 8 * k & 0xFF;
			if ((int8_t)(lo >> 8 * k) != qi_kvalues_iq4nl[byte & 0xF] ||
			    (int8_t)(hi >> 8 * k) != qi_kvalues_iq4nl[byte >> 4]) {
				if (bad++ < 5)
					printf("iq4x8 %08x byte %d wrong\n", q, k);
			}
		}
	}
	for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
		for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++)
			run(QUANT_IQ4_XS, xs[i], ms[k]);
	for (size_t i = 0; i < sizeof nl / sizeof nl[0]; i++)
		for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++)
			run(QUANT_IQ4_NL, nl[i], ms[k]);
	printf("%s\n", bad ? "BAD" : "ALL OK");
	return bad != 0;
}