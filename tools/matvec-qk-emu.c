/*
 * matvec-qk-emu: a CPU model of cuda/matvec_qk.cu (not built by make; a
 * review aid for a machine without a GPU).  It replays the kernels lane by
 * lane (the Q8_K quantizer of gpu_q8k_block and k_mvk for 4 or 8 lanes per
 * super-block: the same byte offsets, word loads, bit twiddling, dp4a,
 * per-lane float terms and their order) on random Q4_K, Q5_K and Q6_K rows
 * of 1, 3, 4, 16 and 20 super-blocks (2-byte aligned Q6_K blocks
 * included) and compares the Q8_K bytes with quant_quantize_act and the
 * products with quant_vec_dot.  Keep it in step with the kernels.
 * make check runs it as below, in a temporary directory (t/emu.bats):
 *   cc -O1 -ffp-contract=off -std=c11 -D_GNU_SOURCE -Ilib -o /tmp/emu \
 *       tools/matvec-qk-emu.c lib/quant*.c lib/util.c -lm && /tmp/emu 4 && /tmp/emu 8
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant.h"

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static float unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }

static int dp4a(uint32_t a, uint32_t b, int c) { for (int k = 0; k < 4; k++) c += (int8_t)(a >> 8 * k) * (int8_t)(b >> 8 * k); return c; }
static uint32_t vsub4(uint32_t a, uint32_t b) { uint32_t r = 0; for (int k = 0; k < 4; k++) r |= ((((a >> 8 * k) & 0xFF) - ((b >> 8 * k) & 0xFF)) & 0xFF) << 8 * k; return r; }
/* the kernel's q6_sub32 (checked against vsub4 for every value in every byte in main) */
static uint32_t q6_sub32(uint32_t u) { return (u + 0x60606060u) ^ 0x80808080u; }
static uint32_t fshr(uint32_t lo, uint32_t hi, unsigned sh) { uint64_t v = (uint64_t)hi << 32 | lo; return (uint32_t)(v >> (sh & 31)); }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* quantizer: x[256] -> q, d, bs */
static void q8k(const float *x, int8_t *q, float *dk, int16_t *bs)
{
	float a[32], sv[32]; int ix[32];
	for (int l = 0; l < 32; l++) {
		a[l] = 0, sv[l] = 0, ix[l] = 1 << 30;
		for (int k = 0; k < 8; k++) { float v = x[l * 8 + k]; if (a[l] < fabsf(v)) a[l] = fabsf(v), sv[l] = v, ix[l] = l * 8 + k; }
	}
	for (int o = 16; o > 0; o >>= 1) {
		float na[32], ns[32]; int ni[32];
		for (int l = 0; l < 32; l++) {
			float a2 = a[l ^ o], s2 = sv[l ^ o]; int i2 = ix[l ^ o];
			na[l] = a[l], ns[l] = sv[l], ni[l] = ix[l];
			if (a2 > a[l] || (a2 == a[l] && i2 < ix[l])) na[l] = a2, ns[l] = s2, ni[l] = i2;
		}
		memcpy(a, na, sizeof a), memcpy(sv, ns, sizeof sv), memcpy(ix, ni, sizeof ix);
	}
	if (a[0] == 0.0f) { memset(q, 0, 256); memset(bs, 0, 32); *dk = 0; return; }
	volatile float is = -127.0f / sv[0];
	for (int j = 0; j < 256; j++) { float p = is * x[j]; int qi = (int)rintf(p); q[j] = (int8_t)(qi < 127 ? qi : 127); }
	for (int j = 0; j < 16; j++) { int s = 0; for (int k = 0; k < 16; k++) s += q[16 * j + k]; bs[j] = (int16_t)s; }
	*dk = 1.0f / is;
}

static void ld8(const uint8_t *base, size_t off, uint32_t *o)
{
	size_t a = off & ~(size_t)3; unsigned sh = (off & 2) * 8;
	uint32_t w0 = rd32(base + a), w1 = rd32(base + a + 4), w2 = sh ? rd32(base + a + 8) : 0;
	o[0] = fshr(w0, w1, sh); o[1] = sh ? fshr(w1, w2, sh) : w1;
}

static float h2f(uint16_t h) { return quant_f16_to_f32(h); }

static int L = 8;
static void mvk(int T, const uint8_t *W, size_t rowoff, int nb, const int8_t *q, const float *dk, const int16_t *bs, int m, float *y)
{
	int BS = T == 12 ? 144 : T == 13 ? 176 : 210; int64_t ne0 = (int64_t)nb * 256; int NG = 32 / L, P = 8 / L;
	float acc[32][16] = { { 0 } };
	for (int b0 = 0; b0 < nb; b0 += 2 * NG)
		for (int half = 0; half < 2; half++) {
			if (half && !(b0 + NG < nb)) continue;
			for (int j = 0; j < m; j++) {
				int isp[32], msp[32], on[32]; float dd[32], dmn[32];
				for (int lane = 0; lane < 32; lane++) {
					int g = lane / L, i = lane % L; int b = b0 + g + NG * half;
					on[lane] = b < nb; isp[lane] = msp[lane] = 0;
					if (!on[lane]) continue;
					size_t bo = rowoff + (size_t)b * BS; const uint8_t *blk = W + bo;
					if (T == 14) {
						int n = L == 8 ? i >> 2 : i >> 1;
						int hs = 8 * ((L == 8 ? i & 3 : 2 * (i & 1)) >> 1);
						uint32_t S[2]; ld8(W, bo + 192 + 8 * n, S);
						int sc[4];
						sc[0] = (int8_t)(S[0] >> hs); sc[1] = (int8_t)(S[0] >> (hs + 16));
						sc[2] = (int8_t)(S[1] >> hs); sc[3] = (int8_t)(S[1] >> (hs + 16));
						uint16_t dh; memcpy(&dh, blk + 208, 2); dd[lane] = h2f(dh);
						int is = 0;
						for (int p = 0; p < P; p++) {
							int sub = L == 8 ? i & 3 : 2 * (i & 1) + p;
							uint32_t A[2], B[2], C[2];
							ld8(W, bo + 64 * n + 8 * sub, A); ld8(W, bo + 64 * n + 32 + 8 * sub, B);
							ld8(W, bo + 128 + 32 * n + 8 * sub, C);
							uint32_t v[4][2];
							for (int k = 0; k < 2; k++) {
								uint32_t a = A[k], bq = B[k], h = C[k];
								v[0][k] = q6_sub32((a & 0x0F0F0F0Fu) | (h & 0x03030303u) << 4);
								v[1][k] = q6_sub32((bq & 0x0F0F0F0Fu) | (h >> 2 & 0x03030303u) << 4);
								v[2][k] = q6_sub32((a >> 4 & 0x0F0F0F0Fu) | (h >> 4 & 0x03030303u) << 4);
								v[3][k] = q6_sub32((bq >> 4 & 0x0F0F0F0Fu) | (h >> 6 & 0x03030303u) << 4);
							}
							const int8_t *xq = q + (size_t)j * ne0 + b * 256 + 128 * n + 8 * sub;
							for (int t = 0; t < 4; t++) { uint32_t y0 = rd32((const uint8_t *)xq + 32 * t), y1 = rd32((const uint8_t *)xq + 32 * t + 4);
								is += sc[t] * dp4a(v[t][1], y1, dp4a(v[t][0], y0, 0)); }
						}
						isp[lane] = is;
					} else {
						uint32_t u0 = rd32(blk + 4), u1 = rd32(blk + 8), u2 = rd32(blk + 12);
						int h = i & 1, is = 0, ms = 0;
						const int16_t *bj = bs + (size_t)j * (ne0 / 16) + b * 16 + h;
						for (int p = 0; p < P; p++) {
							int c = (i >> 1) + 2 * p;
							uint32_t vs = c < 2 ? u0 & 0x3F3F3F3Fu : (u2 & 0x0F0F0F0Fu) | (u0 >> 6 & 0x03030303u) << 4;
							uint32_t vm = c < 2 ? u1 & 0x3F3F3F3Fu : (u2 >> 4 & 0x0F0F0F0Fu) | (u1 >> 6 & 0x03030303u) << 4;
							int sh = 16 * (c & 1);
							int sc0 = vs >> sh & 0xFF, sc1 = vs >> (sh + 8) & 0xFF, m0 = vm >> sh & 0xFF, m1 = vm >> (sh + 8) & 0xFF;
							const uint8_t *qs = blk + (T == 13 ? 48 : 16) + 32 * c + 16 * h, *qh = blk + 16 + 16 * h;
							const int8_t *xq = q + (size_t)j * ne0 + b * 256 + 64 * c + 16 * h;
							int sa = 0, sb = 0;
							for (int k = 0; k < 4; k++) {
								uint32_t w = rd32(qs + 4 * k), hw = rd32(qh + 4 * k);
								uint32_t l = w & 0x0F0F0F0Fu, u = w >> 4 & 0x0F0F0F0Fu;
								if (T == 13) { l |= (hw >> (2 * c) & 0x01010101u) << 4; u |= (hw >> (2 * c + 1) & 0x01010101u) << 4; }
								sa = dp4a(l, rd32((const uint8_t *)xq + 4 * k), sa); sb = dp4a(u, rd32((const uint8_t *)xq + 32 + 4 * k), sb);
							}
							is += sa * sc0 + sb * sc1;
							ms += m0 * bj[4 * c] + m1 * bj[4 * c + 2];
						}
						isp[lane] = is;
						msp[lane] = ms;
						uint16_t dh, mh; memcpy(&dh, blk, 2); memcpy(&mh, blk + 2, 2); dd[lane] = h2f(dh); dmn[lane] = h2f(mh);
					}
				}
				for (int lane = 0; lane < 32; lane++) {
					if (!on[lane]) continue;
					int is = isp[lane], ms = msp[lane];	/* the lane's own parts */
					int b = b0 + lane / L + NG * half;
					float dy = dk[(size_t)j * nb + b];
					volatile float t1 = dd[lane] * dy; volatile float t2 = t1 * (float)is;
					if (T == 14) acc[lane][j] = acc[lane][j] + t2;
					else { volatile float t3 = dmn[lane] * dy; volatile float t4 = t3 * (float)ms; volatile float f = t2 - t4; acc[lane][j] = acc[lane][j] + f; }
				}
			}
		}
	/* butterfly over the warp: xor 1, 2, ... 16 */
	for (int j = 0; j < m; j++) {
		float v[32];
		for (int l = 0; l < 32; l++) v[l] = acc[l][j];
		for (int o = 1; o < 32; o <<= 1) { float nv[32]; for (int l = 0; l < 32; l++) { volatile float t = v[l] + v[l ^ o]; nv[l] = t; } memcpy(v, nv, sizeof v); }
		y[j] = v[0];
	}
}

int main(int argc, char **argv)
{
	if (argc > 1) L = atoi(argv[1]);
	printf("L=%d\n", L);
	int types[3] = { QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K }; int nbs[] = { 1, 3, 4, 16, 20 };
	int bad = 0, nq = 0;
	for (uint32_t u = 0; u < 64; u++)	/* q6_sub32 = vsub4(., 32) for every value in every byte */
		for (int k = 0; k < 4; k++) {
			uint32_t w = u << 8 * k | 0x3F201F00u >> (8 * ((k + 1) & 3)) & ~(0xFFu << 8 * k);
			w &= 0x3F3F3F3Fu;
			if (q6_sub32(w) != vsub4(w, 0x20202020u)) {
				printf("q6_sub32 %08x: %08x, vsub4 %08x\n", w, q6_sub32(w), vsub4(w, 0x20202020u));
				bad++;
			}
		}
	for (int ti = 0; ti < 3; ti++) for (int ni = 0; ni < 5; ni++) {
		int T = types[ti], nb = nbs[ni], rows = 9, m = 3; int64_t ne0 = nb * 256;
		size_t rb = quant_row_size(T, ne0);
		uint8_t *W = calloc(rb * rows + 64, 1);
		float *wf = malloc(ne0 * 4);
		for (int r = 0; r < rows; r++) { for (int e = 0; e < ne0; e++) wf[e] = unif(-1, 1); quant_quantize_row(T, wf, W + r * rb, ne0, NULL); }
		float *x = malloc(m * ne0 * 4); for (int i = 0; i < m * ne0; i++) x[i] = unif(-1, 1);
		if (nb >= 2) { for (int i = 0; i < 256; i++) x[256 + i] = i == 7 ? -2.0f : i == 9 ? 2.0f : x[256 + i]; }
		int8_t *q = malloc(m * ne0); float *dk = malloc(m * nb * 4); int16_t *bs = malloc(m * ne0 / 16 * 2);
		uint8_t *xq = malloc(quant_row_size(QUANT_Q8_K, ne0)), *mine = malloc(292 * nb);
		for (int j = 0; j < m; j++) {
			for (int b = 0; b < nb; b++) q8k(x + j * ne0 + b * 256, q + j * ne0 + b * 256, dk + j * nb + b, bs + j * ne0 / 16 + b * 16);
			quant_quantize_act(T, x + j * ne0, xq, ne0);
			for (int b = 0; b < nb; b++) { memcpy(mine + 292 * b, dk + j * nb + b, 4); memcpy(mine + 292 * b + 4, q + j * ne0 + 256 * b, 256); memcpy(mine + 292 * b + 260, bs + j * ne0 / 16 + 16 * b, 32); }
			if (memcmp(mine, xq, 292 * nb)) { printf("Q8_K bytes differ nb=%d j=%d\n", nb, j); bad++; }
			nq++;
		}
		double maxrel = 0;
		for (int r = 0; r < rows; r++) {
			float y[16];
			mvk(T, W, r * rb, nb, q, dk, bs, m, y);
			for (int j = 0; j < m; j++) {
				quant_quantize_act(T, x + j * ne0, xq, ne0);
				float c = quant_vec_dot(T, ne0, W + r * rb, xq);
				double rel = fabs((double)y[j] - c) / (1 + fabs(c));
				if (rel > maxrel) maxrel = rel;
			}
		}
		printf("%s nb=%d maxrel=%.3g %s\n", quant_name(T), nb, maxrel, maxrel < 1e-5 ? "OK" : "FAIL");
		bad += maxrel >= 1e-5;
		free(W), free(wf), free(x), free(q), free(dk), free(bs), free(xq), free(mine);
	}
	printf("%s (%d quantizations compared)\n", bad ? "BAD" : "ALL OK", nq);
	return bad != 0;
}
