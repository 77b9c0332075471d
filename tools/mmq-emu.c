/*
 * mmq-emu: a CPU model of cuda/mmq.cu's k_mmq2 (not built by make; a review
 * aid for a machine without a GPU).  It replays the kernel thread by thread
 * and lane by lane: mq2_fetch_w's word loads (Q8_0 from the word holding
 * a block's first byte; NVFP4 on the GPU layout that gpu_nvfp4_pack makes
 * from ggml's, modelled here by nvfp4_pack: half a block's code words and
 * the block's canonical scale bytes), mq2_store_w's decode into the shared
 * tile (gpu_fp4x8i's values, gpu_ue4m3c_half's scales), the
 * zero-filling copies of mq2_copy_x, both buffers in the pipeline's order
 * (step ks + 1 written while step ks is read; the tiles start as garbage),
 * the fragments each lane of mq2_mma loads (NVFP4's by ldmatrix),
 * multiplied as the PTX fragment layouts of mma m16n8k32 / m16n8k16 .s8
 * define them, the scale products by mma m16n8k4 .tf32 (the kernel's
 * TF32 = 1; TF32 = 0 multiplies, the same product; checked to be one
 * product of tf32-exact floats per output), the dp4a twin
 * mq2_dp4a, and the epilogue.  It compares both with a plain model of the
 * CPU's numerics (per (sub-)block: acc = fma((float)dot, dw * dx, acc), in
 * block order) bit for bit, and the model with quant_vec_dot within 1e-5
 * of the sum of the terms' magnitudes (another float order), on ragged
 * shapes.  Keep it in step with the kernel.
 * make check runs it as below, in a temporary directory (t/emu.bats):
 *   cc -O1 -ffp-contract=off -std=c11 -D_GNU_SOURCE -Ilib -o /tmp/mmq-emu \
 *       tools/mmq-emu.c lib/quant*.c lib/util.c -lm && /tmp/mmq-emu
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant.h"

enum { R = 64, N = 128, KI = 16, LD = 20, BIAS = 0x4B400000 };

struct buf { int w[R * LD]; int x[N * LD]; float ws[4 * R * 4]; float xd[2 * N * 4]; };

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static float unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint32_t fshrc(uint32_t lo, uint32_t hi, unsigned sh) { uint64_t v = (uint64_t)hi << 32 | lo; return sh >= 32 ? hi : (uint32_t)(v >> sh); }
static float i2f(int c) { float f; memcpy(&f, &c, 4); return f; }
static float fp4v(unsigned nib) { static const int kv[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 }; return (float)kv[nib & 15]; }
static int fp4x4(uint32_t v) { uint32_t r = 0; for (int k = 0; k < 4; k++) r |= ((uint32_t)(int)fp4v(v >> 8 * k) & 0xFF) << 8 * k; return (int)r; }
static float ue4m3_half(unsigned x) { return quant_ue4m3_to_f32((uint8_t)x) * 0.5f; }
/* gpu_fp4x8i's values: codes 0..3 of v (nibble k = value k) in lo, 4..7 in hi */
static void fp4x8(uint32_t v, int *lo, int *hi) { *lo = fp4x4(((v & 0xF) | (v >> 4 & 0xF) << 8 | (v >> 8 & 0xF) << 16 | (v >> 12 & 0xF) << 24)); *hi = fp4x4(((v >> 16 & 0xF) | (v >> 20 & 0xF) << 8 | (v >> 24 & 0xF) << 16 | (v >> 28 & 0xF) << 24)); }
/* gpu_ue4m3c_half: a canonical scale byte's fp16 bits c << 7, times 128 */
static float ue4m3c_half(unsigned c) { return quant_f16_to_f32((uint16_t)(c << 7)) * 128.0f; }

/*
 * NVFP4's GPU layout (gpu_nvfp4_pack, as tools/matvec-q8-emu.c's
 * nvfp4_pack) of a row of nbw blocks in ggml's: bytes [0, 32 nbw) the codes,
 * block b's 8 words at 32 b, word i value 8i + k in bits 4k..4k+3; bytes
 * [32 nbw, 36 nbw) the scales, block b's 4 at 32 nbw + 4 b as canonical
 * bytes (gpu_ue4m3c: ggml's 0x7F, its zero, as 0, bit 7 dropped).
 */
static void nvfp4_pack(const uint8_t *g, uint8_t *o, int nbw)
{
	for (int b = 0; b < nbw; b++) {
		const uint8_t *blk = g + 36 * (size_t)b, *qs = blk + 4;
		for (int e = 0; e < 64; e += 2) {
			int s = e / 16, j = e % 16;	/* values e, e + 1: low nibbles of qs[8s + j], or high ones */
			unsigned c0 = j < 8 ? qs[8 * s + j] & 0xF : qs[8 * s + j - 8] >> 4;
			unsigned c1 = j < 8 ? qs[8 * s + j + 1] & 0xF : qs[8 * s + j - 7] >> 4;
			o[32 * (size_t)b + e / 2] = (uint8_t)(c0 | c1 << 4);
		}
		for (int s = 0; s < 4; s++)
			o[32 * (size_t)nbw + 4 * (size_t)b + s] = (uint8_t)(blk[s] == 0x7F ? 0 : blk[s] & 0x7F);
	}
}
static int dp4a(int a, int b, int c) { for (int k = 0; k < 4; k++) c += (int8_t)(a >> 8 * k) * (int8_t)(b >> 8 * k); return c; }
static float stepp(float acc, int c, float p) { return fmaf(i2f(c) - 12582912.0f, p, acc); }
static float step(float acc, int c, float dw, float dx) { return stepp(acc, c, dw * dx); }

/* the plain model: y[j][r] by the CPU's per-(sub-)block operations */
static float model(int t, const uint8_t *w, const int8_t *q, const float *dx, int nb, double *mag)
{
	float acc = 0.0f;
	*mag = 0;
	for (int b = 0; b < nb; b++) {
		if (t == QUANT_Q8_0) {
			uint16_t h; memcpy(&h, w + b * 34, 2);
			int c = 0;
			for (int i = 0; i < 32; i++) c += (int8_t)w[b * 34 + 2 + i] * q[b * 32 + i];
			acc = fmaf((float)c, quant_f16_to_f32(h) * dx[b], acc);
			*mag += fabs((double)c * quant_f16_to_f32(h) * dx[b]);
		} else {
			const uint8_t *bl = w + (b / 2) * 36;
			for (int s = 2 * (b & 1); s < 2 * (b & 1) + 2; s++) {
				int c = 0;
				for (int i = 0; i < 16; i++) {
					uint8_t by = bl[4 + 8 * s + (i & 7)];
					c += (int)fp4v(i < 8 ? by : by >> 4) * q[(b / 2) * 64 + 16 * s + i];
				}
				acc = fmaf((float)c, ue4m3_half(bl[s]) * dx[b], acc);
				*mag += fabs((double)c * ue4m3_half(bl[s]) * dx[b]);
			}
		}
	}
	return acc;
}

/* mq2_fetch_w + mq2_store_w of thread t, step ks */
static void wtile(int t, struct buf *s, const uint8_t *W, int64_t rows, int nbw, size_t rb, int64_t r0, int ks)
{
	int r = t >> 1, h = t & 1;
	uint32_t u[9] = { 0 }, sh = 0;
	if (t == -1) return;
	if (nbw < 0) {	/* NVFP4: nbw passed negated */
		nbw = -nbw;
		if (r0 + r < rows && ks < nbw) {	/* the GPU layout: block ks's scale word, half h's codes */
			const uint8_t *rp = W + (size_t)(r0 + r) * rb;
			u[0] = rd32(rp + (size_t)nbw * 32 + 4 * (size_t)ks);
			for (int i = 1; i < 5; i++) u[i] = rd32(rp + (size_t)ks * 32 + 16 * h + 4 * (i - 1));
		}
		for (int qq = 0; qq < 2; qq++) {	/* gpu_fp4x8i: word i values 8i.. in order */
			int sb = 2 * h + qq;
			int *d = &s->w[r * LD + sb * 4];
			fp4x8(u[1 + 2 * qq], &d[0], &d[1]), fp4x8(u[2 + 2 * qq], &d[2], &d[3]);
			s->ws[(sb * R + r) * 4] = ue4m3c_half((u[0] >> (8 * sb)) & 0xFF);
		}
		return;
	}
	int gb = ks * 2 + h;
	if (r0 + r < rows && gb < nbw) {
		const uint8_t *p = W + (size_t)(r0 + r) * rb + (size_t)gb * 34;
		uint32_t a = (uint32_t)(uintptr_t)p & 2;
		for (int i = 0; i < 9; i++) u[i] = rd32(p - a + 4 * i);
		sh = a * 8;
	}
	for (int i = 0; i < 8; i++) s->w[r * LD + h * 8 + i] = (int)fshrc(u[i], u[i + 1], 16 + sh);
	uint16_t hb = (uint16_t)(u[0] >> sh);
	s->ws[(h * R + r) * 4] = quant_f16_to_f32(hb);
}

/* mq2_copy_x of thread t, step ks */
static void xtile(int t, struct buf *s, const int8_t *q, const float *dx, int64_t n, int nb, int64_t n0, int ks)
{
	int c = t & 3, xb = ks * 2 + (c >> 1);
	for (int i = 0; i < 4; i++) {
		int j = (t >> 2) + 32 * i, ok = n0 + j < n && xb < nb;
		uint8_t z[16] = { 0 };
		memcpy(&s->x[j * LD + c * 4], ok ? (const void *)(q + (size_t)(n0 + j) * nb * 32 + (size_t)ks * 64 + c * 16) : z, 16);
	}
	for (int b = 0; b < 2; b++) {
		int ok = n0 + t < n && ks * 2 + b < nb;
		s->xd[(b * N + t) * 4] = ok ? dx[(size_t)(n0 + t) * nb + ks * 2 + b] : 0.0f;
	}
}

/* ldmatrix .m8n8.x4 .b16: lane i's r[m] is int i % 4 of the 16 bytes at
 * the address lane 8 m + i / 4 gives (each 16-byte aligned in the tile) */
static void ldsm4(int r[32][4], const int *ad[32])
{
	for (int lane = 0; lane < 32; lane++) {
		if ((uintptr_t)ad[lane] % 16) { printf("ldmatrix: unaligned row\n"); exit(1); }
		for (int m = 0; m < 4; m++) r[lane][m] = ad[8 * m + lane / 4][lane % 4];
	}
}

/* mq2_mma (mma = 1) or mq2_dp4a of warp w, all lanes */
static void warp(int T, int mma, int w, const struct buf *s, float acc[32][4][4][4])
{
	int nw = w * 32, q8 = T == QUANT_Q8_0, NSB = q8 ? 2 : 4, SBI = KI / NSB;
	for (int sb = 0; sb < NSB; sb++) {
		int k = sb * SBI, xb = q8 ? sb : sb / 2;
		if (!mma) {
			for (int lane = 0; lane < 32; lane++) {
				int g = lane >> 2, tg = lane & 3;
				for (int mt = 0; mt < 4; mt++) for (int nt = 0; nt < 4; nt++) for (int e = 0; e < 4; e++) {
					int r = mt * 16 + g + (e >> 1) * 8, j = nw + nt * 8 + 2 * tg + (e & 1), c = BIAS;
					for (int i = 0; i < SBI; i++) c = dp4a(s->w[r * LD + k + i], s->x[j * LD + k + i], c);
					acc[lane][mt][nt][e] = step(acc[lane][mt][nt][e], c, s->ws[(sb * R + r) * 4], s->xd[(xb * N + j) * 4]);
				}
			}
			continue;
		}
		int a[32][4][4], b[32][4][2], f[32][4]; float dw[32][4][2], dxv[32][4];
		const int *ad[32];
		if (q8) {	/* plain loads */
			for (int lane = 0; lane < 32; lane++) {
				int g = lane >> 2, tg = lane & 3;
				for (int mt = 0; mt < 4; mt++) {
					const int *ra = s->w + (mt * 16 + g) * LD + k + tg;
					a[lane][mt][0] = ra[0], a[lane][mt][1] = ra[8 * LD], a[lane][mt][2] = ra[4], a[lane][mt][3] = ra[8 * LD + 4];
				}
				for (int nt = 0; nt < 4; nt++) {
					const int *xr = s->x + (nw + nt * 8 + g) * LD + k + tg;
					b[lane][nt][0] = xr[0], b[lane][nt][1] = xr[4];
				}
			}
		} else {
			for (int mt = 0; mt < 4; mt += 2) {
				for (int lane = 0; lane < 32; lane++) { int mi = lane >> 3, rr = lane & 7; ad[lane] = s->w + ((mt + (mi >> 1)) * 16 + (mi & 1) * 8 + rr) * LD + k; }
				ldsm4(f, ad);
				for (int lane = 0; lane < 32; lane++) a[lane][mt][0] = f[lane][0], a[lane][mt][1] = f[lane][1], a[lane][mt + 1][0] = f[lane][2], a[lane][mt + 1][1] = f[lane][3];
			}
			for (int lane = 0; lane < 32; lane++) { int mi = lane >> 3, rr = lane & 7; ad[lane] = s->x + (nw + mi * 8 + rr) * LD + k; }
			ldsm4(f, ad);
			for (int lane = 0; lane < 32; lane++) for (int nt = 0; nt < 4; nt++) b[lane][nt][0] = f[lane][nt], b[lane][nt][1] = 0;
			for (int lane = 0; lane < 32; lane++) for (int mt = 0; mt < 4; mt++) a[lane][mt][2] = a[lane][mt][3] = 0;
		}
		for (int lane = 0; lane < 32; lane++) {
			int g = lane >> 2, tg = lane & 3;
			for (int mt = 0; mt < 4; mt++) {
				const float *p = s->ws + (sb * R + mt * 16 + g) * 4;
				dw[lane][mt][0] = p[tg], dw[lane][mt][1] = p[32 + tg];
			}
			for (int nt = 0; nt < 4; nt++) dxv[lane][nt] = s->xd[(xb * N + nw + nt * 8) * 4 + g * 4 + tg];
		}
		for (int mt = 0; mt < 4; mt++) for (int nt = 0; nt < 4; nt++) {
			/* the PTX layouts: A[16][K] row, B[K][8] col, D[16][8] */
			int8_t A[16][32] = { { 0 } }, B[32][8] = { { 0 } }; int D[16][8], K = q8 ? 32 : 16;
			for (int lane = 0; lane < 32; lane++) {
				int g = lane >> 2, tg = lane & 3;
				for (int i = 0; i < 4; i++) {
					A[g][4 * tg + i] = (int8_t)(a[lane][mt][0] >> 8 * i);
					A[g + 8][4 * tg + i] = (int8_t)(a[lane][mt][1] >> 8 * i);
					B[4 * tg + i][g] = (int8_t)(b[lane][nt][0] >> 8 * i);
					if (q8) {
						A[g][16 + 4 * tg + i] = (int8_t)(a[lane][mt][2] >> 8 * i);
						A[g + 8][16 + 4 * tg + i] = (int8_t)(a[lane][mt][3] >> 8 * i);
						B[16 + 4 * tg + i][g] = (int8_t)(b[lane][nt][1] >> 8 * i);
					}
				}
			}
			for (int m = 0; m < 16; m++) for (int nn = 0; nn < 8; nn++) {
				D[m][nn] = BIAS;
				for (int kk = 0; kk < K; kk++) D[m][nn] += A[m][kk] * B[kk][nn];
			}
			/* mma m16n8k4 .tf32: FA[16][4] row, FB[4][8] col, P = FA FB + 0 */
			float FA[16][4], FB[4][8], P[16][8];
			for (int lane = 0; lane < 32; lane++) {
				int g = lane >> 2, tg = lane & 3;
				FA[g][tg] = dw[lane][mt][0], FA[g + 8][tg] = dw[lane][mt][1], FB[tg][g] = dxv[lane][nt];
			}
			for (int m = 0; m < 16; m++) for (int nn = 0; nn < 8; nn++) {
				double v = 0, nz = 0;
				for (int kk = 0; kk < 4; kk++) {
					float ta = FA[m][kk], tb = FB[kk][nn];
					uint32_t ua, ub; memcpy(&ua, &ta, 4); memcpy(&ub, &tb, 4);
					if ((ua | ub) & 0x1FFF) { printf("tf32: bits past tf32's 10\n"); exit(1); }
					v += (double)ta * tb, nz += ta != 0 && tb != 0;
				}
				if (nz > 1) { printf("tf32: two products in one sum\n"); exit(1); }
				P[m][nn] = (float)v;
			}
			for (int lane = 0; lane < 32; lane++) {
				int g = lane >> 2, tg = lane & 3;
				float *ac = acc[lane][mt][nt];
				ac[0] = stepp(ac[0], D[g][2 * tg], P[g][2 * tg]);
				ac[1] = stepp(ac[1], D[g][2 * tg + 1], P[g][2 * tg + 1]);
				ac[2] = stepp(ac[2], D[g + 8][2 * tg], P[g + 8][2 * tg]);
				ac[3] = stepp(ac[3], D[g + 8][2 * tg + 1], P[g + 8][2 * tg + 1]);
			}
		}
	}
}

/* k_mmq2 over the whole grid */
static void kernel(int T, int mma, const uint8_t *W, int64_t rows, int nb, size_t rb, const int8_t *q, const float *dx, int64_t n, float *y)
{
	int nbw = T == QUANT_NVFP4 ? -(nb / 2) : nb, nks = (nb + 1) / 2;
	static _Alignas(16) struct buf s[2];
	static float acc[4][32][4][4][4];
	for (int64_t r0 = 0; r0 < rows; r0 += R)
		for (int64_t n0 = 0; n0 < n; n0 += N) {
			memset(s, 0xA5, sizeof s);	/* garbage: a slot read before written shows */
			for (int i = 0; i < 4 * R * 4; i++) if (i & 3) s[0].ws[i] = s[1].ws[i] = 0.0f;
			for (int i = 0; i < 2 * N * 4; i++) if (i & 3) s[0].xd[i] = s[1].xd[i] = 0.0f;
			memset(acc, 0, sizeof acc);
			for (int t = 0; t < 128; t++) xtile(t, &s[0], q, dx, n, nb, n0, 0), wtile(t, &s[0], W, rows, nbw, rb, r0, 0);
			for (int ks = 0; ks < nks; ks++) {
				int more = ks + 1 < nks;
				if (more)
					for (int t = 0; t < 128; t++) xtile(t, &s[(ks + 1) & 1], q, dx, n, nb, n0, ks + 1);
				for (int w = 0; w < 4; w++) warp(T, mma, w, &s[ks & 1], acc[w]);
				if (more)
					for (int t = 0; t < 128; t++) wtile(t, &s[(ks + 1) & 1], W, rows, nbw, rb, r0, ks + 1);
			}
			for (int w = 0; w < 4; w++) for (int lane = 0; lane < 32; lane++) {
				int g = lane >> 2, tg = lane & 3;
				for (int mt = 0; mt < 4; mt++) for (int nt = 0; nt < 4; nt++) for (int e = 0; e < 4; e++) {
					int64_t r = r0 + mt * 16 + g + (e >> 1) * 8, j = n0 + w * 32 + nt * 8 + 2 * tg + (e & 1);
					if (r < rows && j < n) y[j * rows + r] = acc[w][lane][mt][nt][e];
				}
			}
		}
}

static int run(int t, int64_t rows, int64_t ne0, int64_t n, int off)
{
	size_t rb = quant_row_size(t, ne0), xb = quant_row_size(QUANT_Q8_0, ne0);
	int nb = (int)(ne0 / 32), bad = 0;
	uint8_t *wall = malloc(rb * rows + 8 + off), *W = wall + off, *xq = malloc(xb * n);
	uint8_t *G = malloc(rb * rows);	/* ggml's layout: the model's and quant_vec_dot's */
	int8_t *q = malloc(n * ne0); float *dx = malloc(n * nb * 4), *x = malloc(ne0 * 4);
	float *y[2] = { malloc(n * rows * 4), malloc(n * rows * 4) };
	double maxd = 0;
	for (int64_t r = 0; r < rows; r++) {
		float sc = unif(0.01f, 2.0f);
		for (int64_t i = 0; i < ne0; i++) x[i] = unif(-1, 1) * sc;
		if (quant_quantize_row(t, x, G + r * rb, ne0, NULL) != 0) return 1;
		if (t == QUANT_NVFP4)
			nvfp4_pack(G + r * rb, W + r * rb, nb / 2);
		else
			memcpy(W + r * rb, G + r * rb, rb);
	}
	memset(W + rb * rows, 0x5A, 8);
	for (int64_t j = 0; j < n; j++) {
		for (int64_t i = 0; i < ne0; i++) x[i] = unif(-1, 1);
		quant_quantize_act(t, x, xq + j * xb, ne0);
		for (int b = 0; b < nb; b++) {
			uint16_t h; memcpy(&h, xq + j * xb + b * 34, 2);
			dx[j * nb + b] = quant_f16_to_f32(h);
			memcpy(q + j * ne0 + b * 32, xq + j * xb + b * 34 + 2, 32);
		}
	}
	for (int mma = 0; mma < 2; mma++) {
		for (int64_t i = 0; i < n * rows; i++) y[mma][i] = NAN;
		kernel(t, mma, W, rows, nb, rb, q, dx, n, y[mma]);
	}
	for (int64_t j = 0; j < n; j++)
		for (int64_t r = 0; r < rows; r++) {
			double mag;
			float m = model(t, G + r * rb, q + j * ne0, dx + j * nb, nb, &mag);
			float c = quant_vec_dot(t, ne0, G + r * rb, xq + j * xb);
			double d = fabs((double)m - c) / (mag + 1e-30);
			maxd = d > maxd ? d : maxd;
			for (int k = 0; k < 2; k++)
				if (memcmp(&m, &y[k][j * rows + r], 4) != 0 && bad++ < 5)
					printf("  %s row %lld input %lld: %.9g, model %.9g\n", k ? "mma" : "dp4a", (long long)r, (long long)j, y[k][j * rows + r], m);
		}
	printf("%-5s %5lldx%-5lld n=%-4lld +%d  %s  model vs quant_vec_dot %.3g\n", t == QUANT_Q8_0 ? "Q8_0" : "NVFP4",
	    (long long)rows, (long long)ne0, (long long)n, off, bad ? "FAIL" : "mma = dp4a = model", maxd);
	free(wall), free(G), free(xq), free(q), free(dx), free(x), free(y[0]), free(y[1]);
	return bad > 0 || maxd > 1e-5;
}

int main(void)
{
	static const int64_t sh[][4] = { { 300, 512, 17, 0 }, { 130, 4128, 257, 0 }, { 70, 352, 130, 4 },
	    { 45, 320, 33, 0 }, { 64, 1024, 128, 0 }, { 129, 416, 300, 0 } };
	int bad = 0;
	for (int ti = 0; ti < 2; ti++)
		for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
			int t = ti ? QUANT_NVFP4 : QUANT_Q8_0;
			int64_t ne0 = t == QUANT_NVFP4 ? sh[i][1] / 64 * 64 : sh[i][1];
			bad |= run(t, sh[i][0], ne0, sh[i][2], (int)sh[i][3]);
		}
	printf(bad ? "FAILED\n" : "ALL OK\n");
	return bad;
}
