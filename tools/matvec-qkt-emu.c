/*
 * matvec-qkt-emu: a CPU model of cuda/matvec_qkt.cuh's k_mvkt against
 * cuda/matvec_qk.cu's k_mvk, and for IQ4_XS against cuda/matvec_iq4.cu's
 * k_iq4 (not built by make; the evidence, on a machine without a GPU, that
 * the tensor-core kernel gives the CUDA-core kernels' bits).
 *
 * k_mvk (Q4_K, Q5_K; L = 4 or 8 lanes a super-block): lane (g, i) of a
 * row's warp, g = lane / L, i = lane % L, takes super-blocks g, g + 32 /
 * L, ... in order; for each, pieces p = 0 .. 8 / L - 1 (c = i / 2 + 2 p,
 * h = i % 2: quant bytes 32 c + 16 h .. + 15), dp4a sums sa, sb of the
 * two 16-value runs 4 c + h (low nibbles, sub-block 2 c) and 4 c + 2 + h
 * (high, 2 c + 1), is += sa sc0 + sb sc1, ms += m0 bsums[4 c + h] + m1
 * bsums[4 c + 2 + h]; then one float step a block, acc += (d dy) is -
 * (dmin dy) ms, each product rounded; at the end the butterfly xor 1, 2,
 * 4, 8, 16 (lane 0's).  Q6_K: lane i takes 8-value pieces (L = 8: n =
 * i / 4, sub = i % 4, values 128 n + 32 t + 8 sub .., t = 0..3) or two
 * (L = 4: the 16 values 128 n + 32 t + 16 h, n = i / 2, h = i % 2), is =
 * sum sc[t] (w . x), acc += (d dy) is.  Replayed as tools/matvec-qk-emu.c
 * replays it (its word loads, ld8's funnel shifts, q6_sub32 and dp4a), in
 * launches of at most 16 input rows.  IQ4_XS (k_iq4, 8 lanes only: L = 8
 * runs it): lane (g, i) takes sub-block i of super-blocks g, g + 4, ...,
 * its words by gpu_iq4x8 (mv8-emu.h's iq4x8), t by dp4a from the magic,
 * acc += (d dy) ((float)t (ls - 32)); the butterfly xor 1 .. 16.
 *
 * k_mvkt thread by thread: mvkt_copy's cp.async copies into a ring of
 * stages that starts as garbage, in the kernel's pipeline order;
 * mvkt_step's fragments per PTX's mma.m16n8k16 .s32.s8.s8.s32 (A: a0 row
 * g, a1 row g + 8, bytes k = 4 tg .. 4 tg + 3; B: b0 column g, rows 4
 * tg ..; C: c0, c1 row g columns 2 tg, 2 tg + 1, c2, c3 row g + 8; g =
 * lane / 4, tg = lane % 4) from an accumulator of 0, one mma a run; the
 * runs' S scaled and summed in integers per chain; the chain's float step
 * as k_mvk's; mvkt_store's chains to shared memory and the butterfly's
 * pairs.  Q6_K (mvkt_step6): rows copied by aligned words from the one
 * holding a chunk's first byte (cp.async's source size cutting the last),
 * read by halfword pairs at the row's offset in its slot, L = 8's 8-value
 * pieces by two mmas a run with A's other half zero.  IQ4_XS (mvkt_stepx):
 * rows copied by 8 bytes, chain ci of half eta sub-block 4 eta + ci, its
 * two runs (low nibbles, high) an mma each on iq4x8's words, is = (ls -
 * 32) (c0 + c1), acc += (d dy) (float)is.  Every output of rows x m is
 * compared with k_mvk's (k_iq4's) bit for bit, m = 1..32, Q4_K, Q5_K and
 * Q6_K at L = 4 and 8, IQ4_XS at 8, rows of 256, 512, 2048 and 5120
 * values (Q6_K and IQ4_XS also 768; 40 and 23 weight rows: a partial last
 * tile of 16), a per-tensor scale on one, weights from quant_quantize_row
 * and from random bytes (every 6-bit scale and min), and with the CPU
 * (quant_vec_dot) within 1e-5 of the sum of the terms' magnitudes (|d sc
 * q| + |dmin m|) |x|.  k_moe_mvkt (the experts grouped: tiles of up to 16
 * slots of one expert on the gathered rows, y by perm, NaN rows for ids
 * outside the stack) against k_mvk a slot at a time (k_moe_mvk; IQ4_XS
 * k_moe_iq4), check_moe's two stacks (IQ4_XS also a third of rows of 1280).
 *
 * -p N perturbs the model, each must fail: 1: chains 0 and 2 swapped
 * where their sums are stored; 2: the butterfly's levels in the other
 * order (16 .. 1, k_mv8's); 3: the float step as one fused multiply-add
 * (fma(d dy, is, -(dmin dy) ms)); 4: a float step a piece, not a block
 * (L = 4's two pieces; L = 8 has one: run with 4); 5: Q6_K at L = 8, the
 * runs' halves split after 4 values, not 8 (run with 8; swapping the two
 * halves would be no perturbation: chains 2 h and 2 h + 1 are lanes l and
 * l ^ 1, the butterfly's first pair); 6: IQ4_XS, a float step a run, not
 * a sub-block (run with 8).
 * -k (built with -DQKT_KERN and tools/matvec-qkt-kern.cc): the same
 * checks with k_mvkt and k_moe_mvkt as the kernel's own text runs them
 * (cuda/matvec_qkt.cuh's device code compiled for the host, its threads
 * as coroutines, cp.async landing at its wait) in place of this model,
 * against k_mvk's own text (matvec_qk.cu's mvk_row, lane by lane, then its
 * butterfly; IQ4_XS matvec_iq4.cu's xs_row), which must also equal
 * mvk_ref's replay everywhere.
 * make check runs it as below, in a temporary directory (t/emu.bats):
 *   cc -O2 -ffp-contract=off -std=c11 -D_GNU_SOURCE -Ilib -o /tmp/emukt \
 *       tools/matvec-qkt-emu.c lib/quant*.c lib/util.c -lm && /tmp/emukt 4 && /tmp/emukt 8
 *   /tmp/emukt 4 -p 1   (and 2, 3, 4; 8 with 1, 2, 3, 5, 6: FAIL lines, exit 1)
 *   g++ -O2 \
 *       -std=c++17 -ffp-contract=off -fno-strict-aliasing -Icuda -Ilib \
 *       -c -o /tmp/kern.o tools/matvec-qkt-kern.cc && cc ... -DQKT_KERN -o /tmp/emukk \
 *       tools/matvec-qkt-emu.c /tmp/kern.o lib/quant*.c lib/util.c -lm -lstdc++ &&
 *       /tmp/emukk 4 -k && /tmp/emukk 8 -k
 * Keep it in step with the kernels.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant.h"
#include "mv8-emu.h"

enum { MAXM = 32, R = 16, NS = 3, T_Q4_K = QUANT_Q4_K, T_Q5_K = QUANT_Q5_K, T_Q6_K = QUANT_Q6_K,
    T_IQ4_XS = QUANT_IQ4_XS };

static int16_t rds16(const uint8_t *p) { int16_t v; memcpy(&v, p, 2); return v; }
/* __fmul_rn etc.: one rounding each (volatile: no contraction, no excess precision) */
static float rmul(float a, float b) { volatile float r = a * b; return r; }
static float radd(float a, float b) { volatile float r = a + b; return r; }
static float rsub(float a, float b) { volatile float r = a - b; return r; }

static int L = 4, perturb;
static long nchk, nfail;

/* x as the kernels see it (the scratch of matvec_q8.cu): q[j][ne0],
 * dk[j][nb], bs[j][ne0 / 16] */
struct xin {
	int8_t	*q;
	float	*dk;
	int16_t	*bs;
	int	nb;
};

static int bsz(int t) { return t == T_Q4_K ? 144 : t == T_Q5_K ? 176 : t == T_IQ4_XS ? 136 : 210; }
static uint32_t fshr(uint32_t lo, uint32_t hi, unsigned sh) { uint64_t v = (uint64_t)hi << 32 | lo; return (uint32_t)(v >> (sh & 31)); }
/* k_mvk's q6_sub32: four 6-bit values less 32, as int8 */
static uint32_t q6_sub32(uint32_t u) { return (u + 0x60606060u) ^ 0x80808080u; }

/* k_mvk's ld8: 8 bytes at a 2-byte aligned p from aligned 4-byte words */
static void ld8(const uint8_t *p, uint32_t *o)
{
	const uint8_t *w = (const uint8_t *)((uintptr_t)p & ~(uintptr_t)3);
	unsigned sh = (unsigned)((uintptr_t)p & 2) * 8;
	uint32_t w0 = rd32(w), w1 = rd32(w + 4), w2 = sh ? rd32(w + 8) : 0;

	o[0] = fshr(w0, w1, sh);
	o[1] = sh ? fshr(w1, w2, sh) : w1;
}

/* k_mvk<Q6_K>'s integer part of lane i's piece of the block at blk
 * against the x block xq (mvk_block: q6_vals, dp4a) */
static int mvk6_is(const uint8_t *blk, int i, const uint8_t *xq)
{
	int n = L == 8 ? i >> 2 : i >> 1, hs = 8 * ((L == 8 ? i & 3 : 2 * (i & 1)) >> 1), is = 0;
	uint32_t S[2], sc4[4];

	ld8(blk + 192 + 8 * n, S);
	sc4[0] = (uint32_t)(int)(int8_t)(S[0] >> hs), sc4[1] = (uint32_t)(int)(int8_t)(S[0] >> (hs + 16));
	sc4[2] = (uint32_t)(int)(int8_t)(S[1] >> hs), sc4[3] = (uint32_t)(int)(int8_t)(S[1] >> (hs + 16));
	for (int p = 0; p < 8 / L; p++) {
		int sub = L == 8 ? i & 3 : 2 * (i & 1) + p;
		uint32_t A[2], B[2], C[2];
		ld8(blk + 64 * n + 8 * sub, A), ld8(blk + 64 * n + 32 + 8 * sub, B);
		ld8(blk + 128 + 32 * n + 8 * sub, C);
		for (int t = 0; t < 4; t++) {
			uint32_t v[2];
			for (int k = 0; k < 2; k++) {
				uint32_t a = A[k], bq = B[k], h = C[k];
				v[k] = t == 0 ? (a & 0x0F0F0F0Fu) | (h & 0x03030303u) << 4 :
				    t == 1 ? (bq & 0x0F0F0F0Fu) | (h >> 2 & 0x03030303u) << 4 :
				    t == 2 ? (a >> 4 & 0x0F0F0F0Fu) | (h >> 4 & 0x03030303u) << 4 :
				    (bq >> 4 & 0x0F0F0F0Fu) | (h >> 6 & 0x03030303u) << 4;
				v[k] = q6_sub32(v[k]);
			}
			const uint8_t *y = xq + 128 * n + 8 * sub + 32 * t;
			is += (int)sc4[t] * dp4a(v[1], rd32(y + 4), dp4a(v[0], rd32(y), 0));
		}
	}
	return is;
}

/* --- k_mvk -------------------------------------------------------------- */

/* k_mvk<T, M, L> on weight row wr for input rows j0 .. j0 + mm - 1 into
 * acc[j][lane] (one launch) */
static void mvk_launch(int T, const uint8_t *wr, const struct xin *X, int j0, int mm,
    float (*acc)[32])
{
	int nb = X->nb, NG = 32 / L, P = 8 / L, BS = bsz(T);
	int64_t ne0 = (int64_t)nb * 256;

	for (int b0 = 0; b0 < nb; b0 += 2 * NG)
		for (int half = 0; half < 2; half++) {
			if (half && !(b0 + NG < nb))
				continue;
			for (int lane = 0; lane < 32; lane++) {
				int g = lane / L, i = lane % L, b = b0 + g + NG * half;
				if (b >= nb)
					continue;	/* on = 0 */
				const uint8_t *blk = wr + (size_t)b * BS;
				if (T == T_IQ4_XS) {	/* k_iq4's xs_block: sub-block i */
					uint32_t hd = rd32(blk), hl = rd32(blk + 4), lo[4], hi[4];
					int ls = (int)(hl >> (4 * i) & 0xFu) | (int)(hd >> (16 + 2 * i) & 3u) << 4;
					float d = h2f((uint16_t)hd), fs = (float)(ls - 32);
					for (int k = 0; k < 4; k++)
						iq4x8(rd32(blk + 8 + 16 * i + 4 * k), &lo[k], &hi[k]);
					for (int j = j0; j < j0 + mm; j++) {
						const uint8_t *xq = (const uint8_t *)X->q + (size_t)j * ne0 + b * 256 +
						    32 * i;
						int t = 0x4B400000;	/* IQ_MAGIC */
						for (int k = 0; k < 4; k++)
							t = dp4a(lo[k], rd32(xq + 4 * k), t);
						for (int k = 0; k < 4; k++)
							t = dp4a(hi[k], rd32(xq + 16 + 4 * k), t);
						float dy = X->dk[(size_t)j * nb + b];
						acc[j][lane] = radd(acc[j][lane], rmul(rmul(d, dy), rmul(i2f(t), fs)));
					}
					continue;
				}
				if (T == T_Q6_K) {
					float d = h2f(rd16(blk + 208));
					for (int j = j0; j < j0 + mm; j++) {
						int is = mvk6_is(blk, i, (const uint8_t *)X->q + (size_t)j * ne0 + b * 256);
						float dy = X->dk[(size_t)j * nb + b];
						acc[j][lane] = radd(acc[j][lane], rmul(rmul(d, dy), (float)is));
					}
					continue;
				}
				uint32_t u0 = rd32(blk + 4), u1 = rd32(blk + 8), u2 = rd32(blk + 12);
				float d = h2f(rd16(blk)), dmin = h2f(rd16(blk + 2));
				int h = i & 1;
				for (int j = j0; j < j0 + mm; j++) {
					int is = 0, ms = 0;
					const int16_t *bj = X->bs + (size_t)j * (ne0 / 16) + b * 16 + h;
					for (int p = 0; p < P; p++) {
						int c = (i >> 1) + 2 * p, sh = 16 * (c & 1);
						uint32_t vs = c < 2 ? u0 & 0x3F3F3F3Fu :
						    (u2 & 0x0F0F0F0Fu) | (u0 >> 6 & 0x03030303u) << 4;
						uint32_t vm = c < 2 ? u1 & 0x3F3F3F3Fu :
						    (u2 >> 4 & 0x0F0F0F0Fu) | (u1 >> 6 & 0x03030303u) << 4;
						int sc0 = vs >> sh & 0xFF, sc1 = vs >> (sh + 8) & 0xFF;
						int m0 = vm >> sh & 0xFF, m1 = vm >> (sh + 8) & 0xFF;
						const uint8_t *qs = blk + (T == T_Q5_K ? 48 : 16) + 32 * c + 16 * h;
						const uint8_t *qh = blk + 16 + 16 * h;
						const uint8_t *xq = (const uint8_t *)X->q + (size_t)j * ne0 +
						    b * 256 + 64 * c + 16 * h;
						int sa = 0, sb = 0;
						for (int k = 0; k < 4; k++) {
							uint32_t w = rd32(qs + 4 * k), hw = rd32(qh + 4 * k);
							uint32_t l = w & 0x0F0F0F0Fu, u = w >> 4 & 0x0F0F0F0Fu;
							if (T == T_Q5_K) {
								l |= (hw >> (2 * c) & 0x01010101u) << 4;
								u |= (hw >> (2 * c + 1) & 0x01010101u) << 4;
							}
							sa = dp4a(l, rd32(xq + 4 * k), sa);
							sb = dp4a(u, rd32(xq + 32 + 4 * k), sb);
						}
						is += sa * sc0 + sb * sc1;
						ms += m0 * bj[4 * c] + m1 * bj[4 * c + 2];
					}
					float dy = X->dk[(size_t)j * nb + b];
					acc[j][lane] = radd(acc[j][lane], rsub(rmul(rmul(d, dy), (float)is),
					    rmul(rmul(dmin, dy), (float)ms)));
				}
			}
		}
}

/* k_mvk as mv8_products launches it (16 input rows a launch) for weight
 * row wr, m input rows: y[j] (lane 0 after the butterfly), times *scale */
static void mvk_ref(int T, const uint8_t *wr, const struct xin *X, int m, const float *scale,
    float *y)
{
	static float acc[MAXM][32];

	memset(acc, 0, sizeof acc);
	for (int j0 = 0; j0 < m; j0 += 16)
		mvk_launch(T, wr, X, j0, m - j0 < 16 ? m - j0 : 16, acc);
	for (int j = 0; j < m; j++) {
		float v[32], u[32];
		memcpy(v, acc[j], sizeof v);
		for (int o = 1; o < 32; o <<= 1) {
			for (int l = 0; l < 32; l++)
				u[l] = radd(v[l], v[l ^ o]);
			memcpy(v, u, sizeof v);
		}
		y[j] = scale != NULL ? rmul(v[0], *scale) : v[0];
	}
}

/* --- k_mvkt ------------------------------------------------------------- */

/* cp.async: sz bytes at dst (both sz-aligned), the first n from src, the
 * rest zeros */
static void cpn(uint8_t *dst, const uint8_t *src, int sz, int n)
{
	if (((uintptr_t)src & (uintptr_t)(sz - 1)) || ((uintptr_t)dst & (uintptr_t)(sz - 1)) ||
	    n < 1 || n > sz) {
		fprintf(stderr, "cp.async: misaligned or bad size\n");
		abort();
	}
	memcpy(dst, src, (size_t)n);
	memset(dst + n, 0, (size_t)(sz - n));
}

static void cp(uint8_t *dst, const uint8_t *src, int sz) { cpn(dst, src, sz, sz); }

/* mvkt_dim: the shape of a launch of NT n-tiles at L lanes */
struct dim {
	int	NT, MP, CS, SL, CB, BS, RW, WST, NPC, OX, XS, OD, OB, STAGE, RED;
};

static struct dim mkdim(int T, int NT)
{
	struct dim D;

	D.NT = NT, D.MP = 8 * NT, D.CS = 8 / NT, D.SL = L == 8 ? 2 : 1, D.CB = D.CS / D.SL;
	D.BS = bsz(T);
	D.RW = T == T_Q6_K ? (D.CB * D.BS + 2 + 3) / 4 * 4 : D.CB * D.BS;
	D.WST = (D.RW + 15) / 16 * 16;
	if ((D.WST / 16) % 2 == 0)
		D.WST += 16;
	D.NPC = T == T_Q6_K ? D.RW / 4 : T == T_IQ4_XS ? D.RW / 8 : D.RW / 16;
	D.OX = R * D.WST;
	D.XS = D.CB * 256 + 16;
	D.OD = D.OX + D.MP * D.XS;
	D.OB = (D.OD + D.MP * D.CB * 4 + 15) / 16 * 16;
	D.STAGE = D.OB + (T == T_IQ4_XS ? 0 : D.MP * D.CB * 32);	/* (IQ4_XS: no bsums) */
	D.RED = 32 * R * (D.MP + 1) * 4;
	return D;
}

/* one launch's operands */
struct launch {
	int	T, nb, m;
	size_t	rb;
	const uint8_t *W;
	int64_t	rows;
	float	*y;
	const float *scale;
	const struct xin *X;
	const int32_t *perm;	/* k_moe_mvkt: y row of input j perm[j] (NULL: j) */
};

/* mvkt_copy of chunk k of block rows r0.. into st, thread by thread */
static void copy(const struct launch *Lc, const struct dim *D, uint8_t *st, int64_t r0, int k)
{
	int nb = Lc->nb, m = Lc->m, b0 = k * D->CB, nbk = nb - b0 < D->CB ? nb - b0 : D->CB;
	int nr = Lc->rows - r0 < R ? (int)(Lc->rows - r0) : R, np = nbk * D->BS / 16;
	const struct xin *X = Lc->X;

	for (int th = 0; th < 256; th++) {
		if (Lc->T == T_Q6_K)	/* words from the one holding the chunk's first byte */
			for (int it = th; it < nr * D->NPC; it += 256) {
				int rr = it / D->NPC, i = it % D->NPC, len = nbk * D->BS;
				const uint8_t *src = Lc->W + (size_t)(r0 + rr) * Lc->rb + (size_t)b0 * D->BS;
				int o = (int)((uintptr_t)src & 3), n = o + len - 4 * i < 4 ? o + len - 4 * i : 4;
				if (n > 0)
					cpn(st + rr * D->WST + 4 * i, src - o + 4 * i, 4, n);
			}
		else if (Lc->T == T_IQ4_XS)	/* 8 bytes a piece */
			for (int it = th; it < nr * D->NPC; it += 256) {
				int rr = it / D->NPC, i = it % D->NPC;
				if (i < nbk * D->BS / 8)
					cp(st + rr * D->WST + 8 * i, Lc->W + (size_t)(r0 + rr) * Lc->rb +
					    (size_t)b0 * D->BS + 8 * i, 8);
			}
		else
			for (int it = th; it < nr * D->NPC; it += 256) {
				int rr = it / D->NPC, i = it % D->NPC;
				if (i < np)
					cp(st + rr * D->WST + 16 * i, Lc->W + (size_t)(r0 + rr) * Lc->rb +
					    (size_t)b0 * D->BS + 16 * i, 16);
			}
		for (int it = th; it < m * 16 * D->CB; it += 256) {	/* x: 16 pieces a block */
			int j = it / (16 * D->CB), i = it % (16 * D->CB);
			if (i < 16 * nbk)
				cp(st + D->OX + j * D->XS + 16 * i, (const uint8_t *)X->q +
				    ((size_t)j * nb + b0) * 256 + 16 * i, 16);
		}
		for (int it = th; it < m * D->CB; it += 256) {	/* dy: a float a block */
			int j = it / D->CB, i = it % D->CB;
			if (i < nbk)
				cp(st + D->OD + (j * D->CB + i) * 4,
				    (const uint8_t *)(X->dk + (size_t)j * nb + b0 + i), 4);
		}
		for (int it = th; it < (Lc->T == T_Q6_K || Lc->T == T_IQ4_XS ? 0 : m * 2 * D->CB);
		    it += 256) {	/* bsums */
			int j = it / (2 * D->CB), i = it % (2 * D->CB);
			if (i < 2 * nbk)
				cp(st + D->OB + j * D->CB * 32 + 16 * i,
				    (const uint8_t *)(X->bs + ((size_t)j * nb + b0) * 16) + 16 * i, 16);
		}
	}
}

/* the mma's D = A B (from 0) from the warp's fragments, back to each lane */
static void mma(uint32_t a[32][2], const uint32_t b[32], int c[32][4]) { mma_s8(a, b, c, 0); }

/* a lane's accumulators: acc[slot][chain of the slice][e] */
typedef float accs[4][4][4];

/* scale byte s (0..7) of the packed 6-bit scales (or, mins 1: mins) of
 * the block header at blk (get_scale_min_k4, as mvkt_scales packs them) */
static int sc6(const uint8_t *blk, int s, int mins)
{
	uint32_t u0 = rd32(blk + 4), u1 = rd32(blk + 8), u2 = rd32(blk + 12);
	uint32_t lo = mins ? u1 : u0, v;

	if (s < 4)
		v = lo & 0x3F3F3F3Fu;
	else
		v = (mins ? u2 >> 4 : u2) & 0x0F0F0F0Fu, v |= (lo >> 6 & 0x03030303u) << 4;
	return (int)(v >> 8 * (s & 3) & 0xFF);
}

/* chain ci's float step: acc += (d dy) is - (dmin dy) ms; is, ms zeroed */
static void fstep(int is[32][4][4], int ms[32][4][4], float dd[32][4], float dm[32][4],
    accs *acc, int sl, int ci)
{
	for (int lane = 0; lane < 32; lane++)
		for (int e = 0; e < 4; e++) {
			float *a = &acc[lane][sl][ci][e];
			if (perturb == 3)
				*a = radd(*a, fmaf(dd[lane][e], (float)is[lane][ci][e],
				    -rmul(dm[lane][e], (float)ms[lane][ci][e])));
			else
				*a = radd(*a, rsub(rmul(dd[lane][e], (float)is[lane][ci][e]),
				    rmul(dm[lane][e], (float)ms[lane][ci][e])));
			is[lane][ci][e] = ms[lane][ci][e] = 0;
		}
}

/* mvkt_step of warp w on chunk k (stage st), into its lanes' slot sl */
static void step(const struct launch *Lc, const struct dim *D, const uint8_t *st, int k, int w,
    int sl, accs *acc)
{
	int nt = w / D->CS, cs = w % D->CS, s = k * D->CS + cs, bl = cs / D->SL, eta = cs % D->SL;
	int P = 8 / L, QS = Lc->T == T_Q5_K ? 48 : 16;

	if (s >= Lc->nb * D->SL)	/* the warp's slice past the row's end */
		return;
	int is[32][4][4], ms[32][4][4];
	float dd[32][4], dm[32][4];
	memset(is, 0, sizeof is), memset(ms, 0, sizeof ms);
	for (int lane = 0; lane < 32; lane++) {
		int g = lane >> 2, tg = lane & 3;
		for (int e = 0; e < 4; e++) {
			const uint8_t *wb = st + (g + 8 * (e >> 1)) * D->WST + bl * D->BS;
			int j = 8 * nt + 2 * tg + (e & 1);
			float dy;
			memcpy(&dy, st + D->OD + (j * D->CB + bl) * 4, 4);
			dd[lane][e] = rmul(h2f(rd16(wb)), dy);
			dm[lane][e] = rmul(h2f(rd16(wb + 2)), dy);
		}
	}
	for (int ci = 0; ci < 4; ci++) {
		int i = 4 * eta + ci, h = i & 1;
		for (int p = 0; p < P; p++) {
			int c = (i >> 1) + 2 * p;
			if (perturb == 4 && p > 0)	/* a step a piece */
				fstep(is, ms, dd, dm, acc, sl, ci);
			for (int ab = 0; ab < 2; ab++) {
				int kk = 4 * c + 2 * ab + h;	/* the run */
				uint32_t a[32][2], b[32];
				int cc[32][4];
				for (int lane = 0; lane < 32; lane++) {
					int g = lane >> 2, tg = lane & 3;
					for (int rh = 0; rh < 2; rh++) {
						const uint8_t *wb = st + (g + 8 * rh) * D->WST + bl * D->BS;
						uint32_t q = rd32(wb + QS + 32 * c + 16 * h + 4 * tg);
						uint32_t v = q >> 4 * ab & 0x0F0F0F0Fu;
						if (Lc->T == T_Q5_K)
							v |= (rd32(wb + 16 + 16 * h + 4 * tg) >> (2 * c + ab) &
							    0x01010101u) << 4;
						a[lane][rh] = v;
					}
					b[lane] = rd32(st + D->OX + (8 * nt + g) * D->XS + bl * 256 + 16 * kk +
					    4 * tg);
				}
				mma(a, b, cc);
				for (int lane = 0; lane < 32; lane++) {
					int g = lane >> 2, tg = lane & 3;
					for (int e = 0; e < 4; e++) {
						const uint8_t *wb = st + (g + 8 * (e >> 1)) * D->WST + bl * D->BS;
						int j = 8 * nt + 2 * tg + (e & 1);
						int bsum = rds16(st + D->OB + ((j * D->CB + bl) * 16 + kk) * 2);
						is[lane][ci][e] += sc6(wb, 2 * c + ab, 0) * cc[lane][e];
						ms[lane][ci][e] += sc6(wb, 2 * c + ab, 1) * bsum;
					}
				}
			}
		}
		fstep(is, ms, dd, dm, acc, sl, ci);
	}
}

/* mvkt_lw: 4 bytes at a 2-byte aligned shared address, by halfwords */
static uint32_t lw(const uint8_t *p)
{
	if ((uintptr_t)p & 1)
		abort();
	return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16;
}

/* mvkt_q6: quarter t's 4 values from ql words qa, qb and qh word qh */
static uint32_t q6v(uint32_t qa, uint32_t qb, uint32_t qh, int t)
{
	return q6_sub32(((t & 1 ? qb : qa) >> 4 * (t >> 1) & 0x0F0F0F0Fu) | (qh >> 2 * t & 0x03030303u) << 4);
}

/* mvkt_step6 of warp w on chunk k (Q6_K), rows' addresses mod 4 ra[row] */
static void step6(const struct launch *Lc, const struct dim *D, const uint8_t *st, int k, int w,
    int sl, const int *ra, accs *acc)
{
	int nt = w / D->CS, cs = w % D->CS, bl = cs / D->SL, eta = cs % D->SL;
	int sh = 2 * (k * D->CB & 1);

	if (k * D->CS + cs >= Lc->nb * D->SL)
		return;
	for (int cp_ = 0; cp_ < (L == 8 ? 2 : 4); cp_++) {
		int n = L == 8 ? eta : cp_ >> 1, h = L == 8 ? cp_ : cp_ & 1;
		int il[32][4], ih[32][4];
		memset(il, 0, sizeof il), memset(ih, 0, sizeof ih);
		for (int t = 0; t < 4; t++) {
			uint32_t lo[32][2], hi[32][2], b[32];
			int cl[32][4], ch[32][4];
			for (int lane = 0; lane < 32; lane++) {
				int g = lane >> 2, tg = lane & 3, o = 64 * n + 16 * h + 4 * tg;
				for (int rh = 0; rh < 2; rh++) {
					int row = g + 8 * rh;
					const uint8_t *pb = st + row * D->WST + ((ra[row] + sh) & 3) + 210 * bl;
					uint32_t A = q6v(lw(pb + o), lw(pb + o + 32), lw(pb + 128 + 32 * n + 16 * h + 4 * tg), t);
					int low = perturb == 5 ? tg < 1 : tg < 2;
					lo[lane][rh] = L == 8 ? (low ? A : 0) : A;
					hi[lane][rh] = low ? 0 : A;
				}
				b[lane] = rd32(st + D->OX + (8 * nt + g) * D->XS + bl * 256 + 128 * n + 32 * t + 16 * h + 4 * tg);
			}
			mma(lo, b, cl);
			if (L == 8)
				mma(hi, b, ch);
			for (int lane = 0; lane < 32; lane++) {
				int g = lane >> 2;
				for (int e = 0; e < 4; e++) {
					int row = g + 8 * (e >> 1);
					const uint8_t *pb = st + row * D->WST + ((ra[row] + sh) & 3) + 210 * bl;
					int sc = (int8_t)pb[192 + 8 * n + 2 * t + h];
					il[lane][e] += sc * cl[lane][e];
					if (L == 8)
						ih[lane][e] += sc * ch[lane][e];
				}
			}
		}
		for (int lane = 0; lane < 32; lane++) {
			int g = lane >> 2, tg = lane & 3;
			for (int e = 0; e < 4; e++) {
				int row = g + 8 * (e >> 1), j = 8 * nt + 2 * tg + (e & 1);
				const uint8_t *pb = st + row * D->WST + ((ra[row] + sh) & 3) + 210 * bl;
				float dy, dd;
				memcpy(&dy, st + D->OD + (j * D->CB + bl) * 4, 4);
				dd = rmul(h2f(rd16(pb + 208)), dy);
				for (int u = 0; u < (L == 8 ? 2 : 1); u++) {
					float *a = &acc[lane][sl][L == 8 ? 2 * cp_ + u : cp_][e];
					float is = (float)(u ? ih[lane][e] : il[lane][e]);
					*a = perturb == 3 ? fmaf(dd, is, *a) : radd(*a, rmul(dd, is));
				}
			}
		}
	}
}

/* mvkt_stepx of warp w on chunk k (IQ4_XS, L = 8): chain ci sub-block i
 * = 4 eta + ci of the half, its runs (low nibbles, high) an mma each, the
 * scale ls - 32 of the row's header (scales_l byte i / 2, nibble i % 2;
 * bits 2 i of scales_h), acc += (d dy) (float)((ls - 32) (c0 + c1)) */
static void stepx(const struct launch *Lc, const struct dim *D, const uint8_t *st, int k, int w,
    int sl, accs *acc)
{
	int nt = w / D->CS, cs = w % D->CS, bl = cs / 2, eta = cs % 2;

	if (k * D->CS + cs >= Lc->nb * 2)
		return;
	for (int ci = 0; ci < 4; ci++) {
		int i = 4 * eta + ci, c[2][32][4];
		for (int r = 0; r < 2; r++) {
			uint32_t a[32][2], b[32];
			for (int lane = 0; lane < 32; lane++) {
				int g = lane >> 2, tg = lane & 3;
				for (int rh = 0; rh < 2; rh++) {
					const uint8_t *wb = st + (g + 8 * rh) * D->WST + bl * 136;
					uint32_t lo, hi;
					iq4x8(rd32(wb + 8 + 16 * i + 4 * tg), &lo, &hi);
					a[lane][rh] = r ? hi : lo;
				}
				b[lane] = rd32(st + D->OX + (8 * nt + g) * D->XS + bl * 256 + 32 * i + 16 * r +
				    4 * tg);
			}
			mma(a, b, c[r]);
		}
		for (int lane = 0; lane < 32; lane++) {
			int g = lane >> 2, tg = lane & 3;
			for (int e = 0; e < 4; e++) {
				const uint8_t *wb = st + (g + 8 * (e >> 1)) * D->WST + bl * 136;
				int j = 8 * nt + 2 * tg + (e & 1);
				int sc = ((wb[4 + i / 2] >> 4 * (i % 2) & 0xF) | (rd16(wb + 2) >> 2 * i & 3) << 4) - 32;
				float dy, dd, *a = &acc[lane][sl][ci][e];
				memcpy(&dy, st + D->OD + (j * D->CB + bl) * 4, 4);
				dd = rmul(h2f(rd16(wb)), dy);
				if (perturb == 6) {	/* a float step a run */
					*a = radd(*a, rmul(dd, (float)(sc * c[0][lane][e])));
					*a = radd(*a, rmul(dd, (float)(sc * c[1][lane][e])));
				} else if (perturb == 3)
					*a = fmaf(dd, (float)(sc * (c[0][lane][e] + c[1][lane][e])), *a);
				else
					*a = radd(*a, rmul(dd, (float)(sc * (c[0][lane][e] + c[1][lane][e]))));
			}
		}
	}
}

/* one block of k_mvkt: rows r0 .. r0 + 15 */
static void block(const struct launch *Lc, const struct dim *D, unsigned bx, uint8_t *sm)
{
	int nb = Lc->nb, nch = (nb + D->CB - 1) / D->CB, LD = D->MP + 1;
	int64_t r0 = (int64_t)bx * R;
	static accs acc[8][32];
	int ra[R];	/* mvkt_rows' ra0, ra8: the rows' addresses mod 4 */

	for (int rr = 0; rr < R; rr++)
		ra[rr] = (int)((uintptr_t)(Lc->W + (size_t)(r0 + rr) * Lc->rb) & 3);
	memset(acc, 0, sizeof acc);
	for (int s = 0; s < NS - 1; s++)
		if (s < nch)
			copy(Lc, D, sm + s * D->STAGE, r0, s);
	for (int k0 = 0; k0 < nch; k0 += D->NT)
		for (int sl = 0; sl < D->NT; sl++) {
			int k = k0 + sl;
			if (k >= nch)
				break;
			if (k + NS - 1 < nch)
				copy(Lc, D, sm + (k + NS - 1) % NS * D->STAGE, r0, k + NS - 1);
			for (int w = 0; w < 8; w++)
				if (Lc->T == T_Q6_K)
					step6(Lc, D, sm + k % NS * D->STAGE, k, w, sl, ra, acc[w]);
				else if (Lc->T == T_IQ4_XS)
					stepx(Lc, D, sm + k % NS * D->STAGE, k, w, sl, acc[w]);
				else
					step(Lc, D, sm + k % NS * D->STAGE, k, w, sl, acc[w]);
		}
	/* mvkt_store: red[c][row][MP + 1] over the ring, then the butterfly */
	float *red = (float *)sm;
	for (int w = 0; w < 8; w++) {
		int nt = w / D->CS, cs = w % D->CS;
		for (int lane = 0; lane < 32; lane++) {
			int g = lane >> 2, tg = lane & 3;
			for (int sl = 0; sl < D->NT; sl++)
				for (int ci = 0; ci < 4; ci++)
					for (int e = 0; e < 4; e++) {
						int c = 4 * (cs + D->CS * sl) + ci;
						if (perturb == 1 && (c == 0 || c == 2))
							c ^= 2;
						red[(c * R + g + 8 * (e >> 1)) * LD + 8 * nt + 2 * tg + (e & 1)] =
						    acc[w][lane][sl][ci][e];
					}
		}
	}
	for (int it = 0; it < R * Lc->m; it++) {
		int rr = it % R, j = it / R;
		float v[32];
		if (r0 + rr >= Lc->rows)
			continue;
		for (int c = 0; c < 32; c++)
			v[c] = red[(c * R + rr) * LD + j];
		if (perturb == 2)
			for (int o = 16; o > 0; o >>= 1)
				for (int l = 0; l < o; l++)
					v[l] = radd(v[l], v[l + o]);
		else
			for (int o = 1; o < 32; o <<= 1)
				for (int l = 0; l < 32; l += 2 * o)
					v[l] = radd(v[l], v[l + o]);
		size_t yr = Lc->perm != NULL ? (size_t)Lc->perm[j] : (size_t)j;
		Lc->y[yr * Lc->rows + r0 + rr] = Lc->scale != NULL ? rmul(v[0], *Lc->scale) : v[0];
	}
}

/* the launch: mvkt_launch's NT, then every block (shared memory garbage at
 * the start of each) */
#ifdef QKT_KERN
/* tools/matvec-qkt-kern.cc: the kernel's own device code */
void kern_mvkt(int T, int L, const uint8_t *W, int64_t rows, int nb, size_t rb, const int8_t *q,
    const float *dk, const int16_t *bs, int m, const int32_t *perm, float *y, const float *scale,
    uint64_t (*rnd)(void));
void kern_moe(int T, int L, const uint8_t *W, size_t ebytes, int64_t rows, int nb, size_t rb,
    int n_exp, const int *tile, int nt, const int32_t *perm, const int8_t *q, const float *dk,
    const int16_t *bs, float *y, const float *scale, uint64_t (*rnd)(void));
void kern_mvk(int T, int L, int D, const uint8_t *wr, int nb, const int8_t *q, const float *dk,
    const int16_t *bs, int m, const float *scale, float *y);
void kern_mvks(const uint8_t *wr, int nb, const int8_t *q, const float *dk, const int16_t *bs,
    int m, const float *scale, float *y, uint64_t (*rnd)(void), int early);
void kern_mvkx4(const uint8_t *W, int64_t rb0, int nb, const int8_t *q, const float *dk,
    const int16_t *bs, int m, const float *scale, float *y);
#endif
enum { KERN_Q6P = 114 };	/* GPU_T_Q6K_PACKED (cuda/gpu.h): kern_mvkt's T for packed Q6_K */
static int kern;	/* -k: the kernels' own text, not these models */
static long nhand;	/* -k: outputs where mvk_ref differs from k_mvk's text */
static long ndeep;	/* -k: outputs where k_mvk's text four blocks deep differs from two */
static long nstage;	/* -k: outputs where mvk_row_s's text differs from k_mvk's */
static long nx4;	/* -k: outputs where mvk_row_x4's text differs from k_mvk's */
static long nx4t;	/* -k: outputs where k_mvkt's text on packed Q6_K differs from k_mvk's */

#ifdef QKT_KERN
/* -k: m outputs got against want, bit for bit: each that differs counted in
 * *n, the first three said ("FAIL WHAT: want, got") */
static void same_out(const float *want, const float *got, int m, long *n, const char *what)
{
	for (int j = 0; j < m; j++)
		if (memcmp(&want[j], &got[j], 4) != 0) {
			if (*n < 3)
				printf("FAIL %s: %.9g, %.9g\n", what, want[j], got[j]);
			(*n)++;
		}
}
#endif

/* the reference: mvk_ref, or (-k) k_mvk's text, checked against mvk_ref,
 * and its four-blocks-in-flight form (gpu_tune_qk_depth 4) against it */
static void ref(int T, const uint8_t *wr, const struct xin *X, int m, const float *scale,
    float *y)
{
	mvk_ref(T, wr, X, m, scale, y);
#ifdef QKT_KERN
	if (kern) {
		float h[MAXM], y4[MAXM];
		char what[64];
		memcpy(h, y, sizeof(float) * m);
		kern_mvk(T, L, 2, wr, X->nb, X->q, X->dk, X->bs, m, scale, y);
		snprintf(what, sizeof what, "%s L=%d: mvk_ref, k_mvk's text", quant_name(T), L);
		same_out(h, y, m, &nhand, what);
		kern_mvk(T, L, 4, wr, X->nb, X->q, X->dk, X->bs, m, scale, y4);
		snprintf(what, sizeof what, "%s L=%d: k_mvk's text, four blocks deep", quant_name(T), L);
		same_out(y, y4, m, &ndeep, what);
	}
#endif
}

static void mvkt(const struct launch *Lc)
{
#ifdef QKT_KERN
	if (kern) {
		kern_mvkt(Lc->T, L, Lc->W, Lc->rows, Lc->nb, Lc->rb, Lc->X->q, Lc->X->dk, Lc->X->bs,
		    Lc->m, Lc->perm, Lc->y, Lc->scale, rnd);
		return;
	}
#endif
	int nt = Lc->m <= 8 ? 1 : Lc->m <= 16 ? 2 : 4;
	struct dim D = mkdim(Lc->T, nt);
	size_t sz = (size_t)NS * D.STAGE > (size_t)D.RED ? (size_t)NS * D.STAGE : (size_t)D.RED;
	uint8_t *sm = aligned_alloc(16, sz + 16);

	if (D.STAGE % 16 || D.OX % 16 || D.OD % 16 || D.OB % 16 || D.XS % 16) {
		fprintf(stderr, "mvkt: stage layout not 16-byte aligned\n");
		abort();
	}
	for (unsigned bx = 0; bx < (unsigned)((Lc->rows + R - 1) / R); bx++) {
		for (size_t i = 0; i < sz; i++)
			sm[i] = (uint8_t)rnd();
		block(Lc, &D, bx, sm);
	}
	free(sm);
}

/* --- checks ------------------------------------------------------------- */

/* rows of type t: quantized random floats, or (rbytes) random bytes with
 * finite fp16 d and dmin (every 6-bit scale and min, every quant) */
static uint8_t *weights(int t, int64_t rows, int ne0, int rbytes)
{
	size_t rb = quant_row_size(t, ne0);
	uint8_t *w = aligned_alloc(16, (rb * rows + 31) / 16 * 16);	/* (a multiple of 16: C11's rule) */
	float *x = malloc(sizeof(float) * ne0);

	for (int64_t r = 0; r < rows; r++)
		if (rbytes) {
			for (size_t i = 0; i < rb; i++)
				w[r * rb + i] = (uint8_t)rnd();
			for (int b = 0; b < ne0 / 256; b++) {
				uint8_t *blk = w + r * rb + (size_t)b * bsz(t);
				uint16_t d = (uint16_t)((0x1000 + rnd() % 0x2000) | (rnd() & 1) << 15);
				uint16_t dm = (uint16_t)(0x1000 + rnd() % 0x2000);
				if (t == T_Q6_K)
					memcpy(blk + 208, &d, 2);
				else if (t == T_IQ4_XS)	/* (scales_h, scales_l: every 6-bit scale) */
					memcpy(blk, &d, 2);
				else
					memcpy(blk, &d, 2), memcpy(blk + 2, &dm, 2);
			}
		} else {
			for (int i = 0; i < ne0; i++)
				x[i] = unif(-1, 1) * (i % 89 == 0 ? 6.0f : 1.0f) + (i / 256 % 3 == 1 ? 0.4f : 0.0f);
			if (quant_quantize_row(t, x, w + r * rb, ne0, NULL) != 0)
				abort();
		}
	free(x);
	return w;
}

/* m input rows of ne0 quantized to Q8_K as quant_quantize_act does (k_q8kx
 * gives the same bytes: tools/matvec-qk-emu.c); row 1 small, row 2 with
 * zero blocks, row 3 with a large value */
static void inputs(int t, int ne0, int m, struct xin *X)
{
	int nb = ne0 / 256;
	float *x = malloc(sizeof(float) * ne0);
	uint8_t *xq = malloc(quant_row_size(QUANT_Q8_K, ne0));

	X->nb = nb;
	X->q = aligned_alloc(16, (size_t)m * ne0);
	X->dk = aligned_alloc(16, (sizeof(float) * m * nb + 31) / 16 * 16);
	X->bs = aligned_alloc(16, (size_t)m * ne0 / 16 * 2 + 16);
	for (int j = 0; j < m; j++) {
		for (int i = 0; i < ne0; i++)
			x[i] = unif(-1, 1) * (j == 1 ? 1e-3f : 1.0f) *
			    (j == 2 && i / 256 % 2 == 1 ? 0.0f : 1.0f) * (j == 3 && i == 77 ? 40.0f : 1.0f);
		if (quant_quantize_act(t, x, xq, ne0) != 0)
			abort();
		for (int b = 0; b < nb; b++) {
			memcpy(X->dk + j * nb + b, xq + 292 * b, 4);
			memcpy(X->q + (size_t)j * ne0 + 256 * b, xq + 292 * b + 4, 256);
			memcpy(X->bs + (size_t)j * ne0 / 16 + 16 * b, xq + 292 * b + 260, 32);
		}
	}
	free(x), free(xq);
}

/* sum over the row wr of (|d sc q| + |dmin m|) |x| for the Q8_K row xq:
 * the scale of the float sums' rounding (the row dequantized with dmin
 * 0, then with d 0) */
static double mag_row(int t, const uint8_t *wr, int ne0, const uint8_t *xq)
{
	size_t rb = quant_row_size(t, ne0);
	uint8_t *w = malloc(rb);
	float *a = malloc(sizeof(float) * ne0), *b = malloc(sizeof(float) * ne0);
	double s = 0;

	for (int z = 0; z < 2; z++) {
		memcpy(w, wr, rb);
		for (int k = 0; k < ne0 / 256 && (t != T_IQ4_XS || z); k++)	/* Q6_K, IQ4_XS: no dmin (b all 0) */
			memset(w + (size_t)k * bsz(t) + (t == T_Q6_K ? 208 * z : t == T_IQ4_XS ? 0 :
			    2 * (1 - z)), 0, 2);
		quant_dequantize_row(t, w, z ? b : a, ne0);
	}
	for (int i = 0; i < ne0; i++) {
		float dk;
		memcpy(&dk, xq + 292 * (i / 256), 4);
		s += (fabs(a[i]) + fabs(b[i])) * fabs((double)dk * (int8_t)xq[292 * (i / 256) + 4 + i % 256]);
	}
	free(w), free(a), free(b);
	return s;
}

#ifdef QKT_KERN
/* -k: k_mvk's text four blocks in flight against two on rows of 48
 * super-blocks (three of the deep form's 16-block steps at 8 lanes, one and
 * a half of its 32 at 4: every block of a step and a partial step), 1, 3
 * and 16 input rows, bit for bit */
static void check_depth(int t)
{
	enum { ROWS = 6, NE0 = 12288 };
	size_t rb = quant_row_size(t, NE0);
	uint8_t *w = weights(t, ROWS, NE0, 0);
	static const int ms[] = { 1, 3, 16 };
	float y2[16], y4[16];
	char what[64];
	struct xin X;
	long f0 = ndeep;

	inputs(t, NE0, 16, &X);
	for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
		for (int r = 0; r < ROWS; r++) {
			kern_mvk(t, L, 2, w + r * rb, X.nb, X.q, X.dk, X.bs, ms[mi], NULL, y2);
			kern_mvk(t, L, 4, w + r * rb, X.nb, X.q, X.dk, X.bs, ms[mi], NULL, y4);
			snprintf(what, sizeof what, "%s L=%d %d: k_mvk's text, four blocks deep",
			    quant_name(t), L, NE0);
			same_out(y2, y4, ms[mi], &ndeep, what);
			nchk += ms[mi];
		}
	printf("%s L=%d %d: k_mvk's text four blocks deep, m = 1, 3, 16: %s\n", quant_name(t), L,
	    NE0, ndeep == f0 ? "same bits" : "DIFFER");
	free(w), free(X.q), free(X.dk), free(X.bs);
}
#endif

#ifdef QKT_KERN
/* Q6_K's nblk blocks w packed four a group, as gpu_q6k_pack4 documents it
 * (cuda/gpu.h; written here from that text, not from the kernel): 840
 * bytes a group, the four d first at 2 k, each block's other 208 bytes at
 * 8 + 208 k, zero past nblk; a buffer of exactly that size */
static uint8_t *
pack4(const uint8_t *w, int64_t nblk)
{
	int64_t ng = (nblk + 3) / 4;
	uint8_t *o = calloc((size_t)ng, 840);

	for (int64_t b = 0; b < nblk; b++) {
		uint8_t *g = o + b / 4 * 840;
		int k = (int)(b % 4);
		memcpy(g + 2 * k, w + b * 210 + 208, 2);
		memcpy(g + 8 + 208 * k, w + b * 210, 208);
	}
	return o;
}

/* -k: mvk_row_s's text (Q6_K rows at 8 lanes, read from a staged copy: chunks
 * of 8 super-blocks, three stages) against k_mvk's, bit for bit, on rows
 * of 5, 8, 9, 21 (rows of 4410 bytes: every other one 2-byte aligned), 25
 * (the stages wrapping) and 48 super-blocks, 1, 3 and 16 input rows, the
 * copies landing at their waits (a read before its wait is caught) and at
 * their issue (a stage refilled while a lane reads it); each weight a
 * buffer of its own bytes, no slack (under ASan: nothing past a row's end
 * is read); and mvk_row_x4's text on the same weights packed four blocks a
 * group (pack4: rows of odd lengths start inside a group), bit for bit */
static void check_stage(void)
{
	static const int nbs[] = { 5, 8, 9, 21, 25, 48 }, ms[] = { 1, 3, 16 };
	enum { ROWS = 3 };
	float y2[16], ys[16];
	char what[80];
	long f0 = nstage;

	for (size_t ni = 0; ni < sizeof nbs / sizeof nbs[0]; ni++) {
		int ne0 = 256 * nbs[ni];
		size_t rb = quant_row_size(T_Q6_K, ne0);
		uint8_t *w0 = weights(T_Q6_K, ROWS, ne0, ni % 2), *w = malloc(rb * ROWS);
		struct xin X;

		memcpy(w, w0, rb * ROWS);
		uint8_t *wx = pack4(w, (int64_t)ROWS * nbs[ni]);
		inputs(T_Q6_K, ne0, 16, &X);
		for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
			for (int r = 0; r < ROWS; r++) {
				kern_mvk(T_Q6_K, 8, 2, w + r * rb, X.nb, X.q, X.dk, X.bs, ms[mi], NULL, y2);
				kern_mvkx4(wx, (int64_t)r * X.nb, X.nb, X.q, X.dk, X.bs, ms[mi], NULL, ys);
				snprintf(what, sizeof what, "Q6_K %d row %d: k_mvk's text, packed", ne0, r);
				same_out(y2, ys, ms[mi], &nx4, what);
				nchk += ms[mi];
				for (int early = 0; early < 2; early++) {
					kern_mvks(w + r * rb, X.nb, X.q, X.dk, X.bs, ms[mi], NULL, ys, rnd,
					    early);
					snprintf(what, sizeof what, "Q6_K %d row %d%s: k_mvk's text, staged",
					    ne0, r, early ? " (copies landing early)" : "");
					same_out(y2, ys, ms[mi], &nstage, what);
					nchk += ms[mi];
				}
			}
		free(w0), free(w), free(wx), free(X.q), free(X.dk), free(X.bs);
	}
	printf("Q6_K L=8: mvk_row_s's text (rows staged), rows of 5 to 48 super-blocks, m = 1, 3, 16: "
	    "%s\n", nstage == f0 ? "same bits" : "DIFFER");
	printf("Q6_K L=8: mvk_row_x4's text (weights packed four blocks a group), the same rows: "
	    "%s\n", nx4 == 0 ? "same bits" : "DIFFER");
}

/* -k: k_mvkt's text on Q6_K packed four blocks a group (pack4) against
 * k_mvk's on the file's layout, bit for bit: 19 rows (a block of 16, both
 * of its row halves, then 3) of 5, 9 and 21 super-blocks (each row's first
 * block at every place in a group), m = 1, 3, 8, 9, 16, 17, 32 (n-tiles 1,
 * 2, 4; chunks of 4, 2, 1 blocks), shared memory garbage first; the
 * weights a buffer of exactly pack4's size (ASan: nothing read past it) */
static void check_q6p_tc(void)
{
	static const int nbs[] = { 5, 9, 21 }, ms[] = { 1, 3, 8, 9, 16, 17, 32 };
	enum { ROWS = 19 };
	float *y = malloc(sizeof(float) * 32 * ROWS), *yt = malloc(sizeof(float) * 32 * ROWS);
	char what[80];

	for (size_t ni = 0; ni < sizeof nbs / sizeof nbs[0]; ni++) {
		int ne0 = 256 * nbs[ni];
		size_t rb = quant_row_size(T_Q6_K, ne0);
		uint8_t *w = weights(T_Q6_K, ROWS, ne0, ni % 2);
		uint8_t *wx = pack4(w, (int64_t)ROWS * nbs[ni]);
		struct xin X;

		inputs(T_Q6_K, ne0, 32, &X);
		for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
			int m = ms[mi];
			float yr[32];
			for (int r = 0; r < ROWS; r++) {
				kern_mvk(T_Q6_K, 8, 2, w + r * rb, X.nb, X.q, X.dk, X.bs, m, NULL, yr);
				for (int j = 0; j < m; j++)
					y[j * ROWS + r] = yr[j];
			}
			kern_mvkt(KERN_Q6P, 8, wx, ROWS, X.nb, 0, X.q, X.dk, X.bs, m, NULL, yt, NULL,
			    rnd);
			snprintf(what, sizeof what, "Q6_K %d m=%d: k_mvk's text, k_mvkt's packed", ne0, m);
			same_out(y, yt, m * ROWS, &nx4t, what);
			nchk += m * ROWS;
		}
		free(w), free(wx), free(X.q), free(X.dk), free(X.bs);
	}
	printf("Q6_K L=8: k_mvkt's text on weights packed four blocks a group, 19 rows of 5 to 21 "
	    "super-blocks, m = 1..32: %s\n", nx4t == 0 ? "same bits" : "DIFFER");
	free(y), free(yt);
}
#endif

/* k_mvkt's rows x m outputs against k_mvk's (bit for bit) and the CPU's */
static void check(int t, int64_t rows, int ne0, int m, int rbytes, const float *scale,
    const struct xin *X, double *maxrel)
{
	struct launch Lc;
	long bad = 0;
	uint8_t *xq = malloc(quant_row_size(QUANT_Q8_K, ne0));

	memset(&Lc, 0, sizeof Lc);
	Lc.T = t, Lc.nb = ne0 / 256, Lc.m = m, Lc.X = X, Lc.rows = rows, Lc.scale = scale;
	Lc.rb = quant_row_size(t, ne0);
	Lc.W = weights(t, rows, ne0, rbytes);
	Lc.y = malloc(sizeof(float) * m * rows);
	mvkt(&Lc);
	for (int64_t r = 0; r < rows; r++) {
		float y[MAXM];
		ref(t, Lc.W + r * Lc.rb, X, m, scale, y);
		for (int j = 0; j < m; j++) {
			float got = Lc.y[(size_t)j * rows + r];
			nchk++;
			if (memcmp(&got, &y[j], 4) != 0) {
				if (bad < 3)
					printf("FAIL %s L=%d %lldx%d m=%d%s row %lld input %d: %.9g != %.9g\n",
					    quant_name(t), L, (long long)rows, ne0, m, rbytes ? " bytes" : "",
					    (long long)r, j, got, y[j]);
				bad++;
			}
			if (!rbytes && scale == NULL && j < 4) {	/* the CPU's sum */
				for (int b = 0; b < Lc.nb; b++) {
					memcpy(xq + 292 * b, X->dk + j * Lc.nb + b, 4);
					memcpy(xq + 292 * b + 4, X->q + (size_t)j * ne0 + 256 * b, 256);
					memcpy(xq + 292 * b + 260, X->bs + (size_t)j * ne0 / 16 + 16 * b, 32);
				}
				float c = quant_vec_dot(t, ne0, Lc.W + r * Lc.rb, xq);
				double rel = fabs((double)got - c) / mag_row(t, Lc.W + r * Lc.rb, ne0, xq);
				if (rel > *maxrel)
					*maxrel = rel;
			}
		}
	}
	nfail += bad;
	free((void *)Lc.W), free(Lc.y), free(xq);
}

/*
 * The experts grouped (k_moe_mvkt): n_exp experts of rows x ne0, nx input
 * rows of per slots each routed at random (a few ids outside [0, n_exp)),
 * the slots in bucket order (expert by expert, slot order within; the bad
 * ids last), tiles of up to 16 slots of a bucket, the Q8_K rows gathered
 * in that order; each tile's blocks as k_moe_mvkt runs them (mvkt_rows on
 * the expert's rows, m = the tile's count, y by perm; NaN rows for the bad
 * bucket; with -k its own mvkt_moe_block, a pair of a bucket's tiles in
 * one block of m up to 32) against k_mvk one slot at a time (k_moe_mvk:
 * k_mvk<T, 1, L>).
 */
static void check_moe(int t, int n_exp, int64_t rows, int ne0, int nx, int per)
{
	int ns = nx * per, nb = ne0 / 256, nt = 0;
	size_t rb = quant_row_size(t, ne0);
	struct xin X, G;
	uint8_t *W = weights(t, n_exp * rows, ne0, 0);
	int32_t *ids = malloc(sizeof(int32_t) * ns), *perm = malloc(sizeof(int32_t) * ns);
	int (*tile)[4] = malloc(sizeof(int[4]) * ns);
	float *y = malloc(sizeof(float) * ns * rows);
	long bad = 0;

	inputs(t, ne0, nx, &X);
	for (int s = 0; s < ns; s++)
		ids[s] = s % 17 == 5 ? (s % 2 ? -1 : n_exp) : (int32_t)(rnd() % (uint64_t)n_exp);
	for (int e = 0, np = 0; e <= n_exp; e++) {	/* bucket n_exp: the bad ids */
		int f = np;
		for (int s = 0; s < ns; s++)
			if (ids[s] == e || (e == n_exp && (ids[s] < 0 || ids[s] >= n_exp)))
				perm[np++] = s;
		for (int i = f; i < np; i += 16) {
			tile[nt][0] = e, tile[nt][1] = i, tile[nt][2] = np - i < 16 ? np - i : 16;
			tile[nt][3] = (i - f) / 16;	/* its index in the bucket: pairs */
			nt++;
		}
	}
	G.nb = nb;	/* moe_gather: row i of G is x row perm[i] / per */
	G.q = aligned_alloc(16, (size_t)ns * ne0);
	G.dk = aligned_alloc(16, (sizeof(float) * ns * nb + 31) / 16 * 16);
	G.bs = aligned_alloc(16, (size_t)ns * ne0 / 16 * 2 + 16);
	for (int i = 0; i < ns; i++) {
		int xr = perm[i] / per;
		memcpy(G.q + (size_t)i * ne0, X.q + (size_t)xr * ne0, ne0);
		memcpy(G.dk + (size_t)i * nb, X.dk + (size_t)xr * nb, sizeof(float) * nb);
		memcpy(G.bs + (size_t)i * ne0 / 16, X.bs + (size_t)xr * ne0 / 16, ne0 / 8);
	}
	for (size_t i = 0; i < (size_t)ns * rows; i++)
		y[i] = 12345.0f;	/* gpu_memset: no row left from before */
#ifdef QKT_KERN
	if (kern) {	/* k_moe_mvkt's blocks, its tiles and NaN rows included */
		int *t4 = malloc(sizeof(int) * 4 * nt);
		for (int ti = 0; ti < nt; ti++)
			t4[4 * ti] = tile[ti][0], t4[4 * ti + 1] = tile[ti][1],
			t4[4 * ti + 2] = tile[ti][2], t4[4 * ti + 3] = tile[ti][3];
		kern_moe(t, L, W, (size_t)rows * rb, rows, nb, rb, n_exp, t4, nt, perm, G.q, G.dk,
		    G.bs, y, NULL, rnd);
		free(t4);
	}
#endif
	for (int ti = 0; ti < (kern ? 0 : nt); ti++) {
		int e = tile[ti][0], f = tile[ti][1], n = tile[ti][2];
		if (e == n_exp) {
			for (int j = 0; j < n; j++)
				for (int64_t r = 0; r < rows; r++)
					y[(size_t)perm[f + j] * rows + r] = NAN;
			continue;
		}
		struct xin T = { G.q + (size_t)f * ne0, G.dk + (size_t)f * nb,
		    G.bs + (size_t)f * ne0 / 16, nb };
		struct launch Lc = { t, nb, n, rb, W + (size_t)e * rows * rb, rows, y, NULL, &T,
		    perm + f };
		mvkt(&Lc);
	}
	for (int s = 0; s < ns; s++) {
		int e = ids[s];
		struct xin X1 = { X.q + (size_t)(s / per) * ne0, X.dk + (size_t)(s / per) * nb,
		    X.bs + (size_t)(s / per) * ne0 / 16, nb };
		for (int64_t r = 0; r < rows; r++) {
			float want, got = y[(size_t)s * rows + r];
			nchk++;
			if (e < 0 || e >= n_exp) {
				bad += !isnan(got);
				continue;
			}
			ref(t, W + ((size_t)e * rows + r) * rb, &X1, 1, NULL, &want);
			if (memcmp(&got, &want, 4) != 0) {
				if (bad < 3)
					printf("FAIL moe %s L=%d slot %d expert %d row %lld: %.9g != %.9g\n",
					    quant_name(t), L, s, e, (long long)r, got, want);
				bad++;
			}
		}
	}
	printf("%s L=%d moe: %d experts of %lldx%d, %d slots (%d a row), %d tiles: %s\n",
	    quant_name(t), L, n_exp, (long long)rows, ne0, ns, per, nt, bad ? "DIFFER" : "same bits");
	nfail += bad;
	free(W), free(ids), free(perm), free(tile), free(y);
	free(X.q), free(X.dk), free(X.bs), free(G.q), free(G.dk), free(G.bs);
}

int main(int argc, char **argv)
{
	/* rows of 1, 2, 8, 20 super-blocks (Q6_K also 3: odd rows 2 mod 4 bytes
	 * with an odd chunk count; IQ4_XS also 3: odd rows 8 mod 16 bytes) */
	static const int ne0s[] = { 256, 512, 2048, 5120, 768 };
	static const int ts[] = { T_Q4_K, T_Q5_K, T_Q6_K, T_IQ4_XS };
	float scale = 0.3779f;
	int nts;

	if (argc >= 2)
		L = atoi(argv[1]);
	if (argc == 4 && strcmp(argv[2], "-p") == 0)
		perturb = atoi(argv[3]);
#ifdef QKT_KERN
	kern = argc == 3 && strcmp(argv[2], "-k") == 0;
#endif
	if ((L != 4 && L != 8) || (argc != 2 && argc != 4 && !kern) || (argc == 4 && perturb < 1)) {
		fprintf(stderr, "usage: %s 4|8 [-p 1|2|3|4|5|6 | -k]\n", argv[0]);
		return 2;
	}
	nts = L == 8 ? 4 : 3;	/* IQ4_XS: its one form, 8 lanes */
	for (int ti = 0; ti < nts; ti++)
		for (int ni = 0; ni < (ts[ti] == T_Q6_K || ts[ti] == T_IQ4_XS ? 5 : 4); ni++) {
			int t = ts[ti], ne0 = ne0s[ni];
			long f0 = nfail;
			double maxrel = 0;
			struct xin X;
			inputs(t, ne0, MAXM, &X);
			for (int m = 1; m <= MAXM; m++) {
				if (perturb && m != 3 && m != 13 && m != 27)
					continue;
				/* 40 rows: tiles of 16, 16, 8; 23 (ne0 512, 2048) of random bytes */
				check(t, 40, ne0, m, 0, NULL, &X, &maxrel);
				if ((ni == 1 || ni == 2) && m % 5 == 1)
					check(t, 23, ne0, m, 1, m == 11 ? &scale : NULL, &X, &maxrel);
			}
			printf("%s L=%d %d: m = 1..32: %s, CPU maxrel %.3g %s\n", quant_name(t), L, ne0,
			    nfail == f0 ? "same bits" : "DIFFER", maxrel, maxrel < 1e-5 ? "ok" : "FAIL");
			if (maxrel >= 1e-5)
				nfail++;
			free(X.q), free(X.dk), free(X.bs);
		}
	/* the experts grouped: 12 of 23 x 512, 5 of 40 x 2048 (tiles of 1..16),
	 * 2 of 23 x 512 with about 40 slots each (pairs of tiles: 32 rows a
	 * block, then a lone tile); IQ4_XS also 6 of 24 x 1280 (Step's rows of 5
	 * super-blocks: experts and rows 8 mod 16 bytes) */
	for (int ti = 0; ti < nts; ti++) {
		check_moe(ts[ti], 12, 23, 512, 30, 4);
		check_moe(ts[ti], 5, 40, 2048, 24, 2);
		check_moe(ts[ti], 2, 23, 512, 40, 2);
	}
	if (nts > 3)
		check_moe(T_IQ4_XS, 6, 24, 1280, 20, 4);
#ifdef QKT_KERN
	for (int ti = 0; kern && ti < 3; ti++)	/* (IQ4_XS: its one kernel, not k_mvk) */
		check_depth(ts[ti]);
	if (kern && L == 8) {	/* (mvk_row_s, packed Q6_K: 8 lanes only) */
		check_stage();
		check_q6p_tc();
	}
#endif
	if (kern) {
		if (L == 8) {
			printf("mvk_row_x4's text, Q6_K weights packed against in place: %ld outputs "
			    "differ\n", nx4);
			printf("k_mvkt's text, Q6_K weights packed against k_mvk's in place: %ld outputs "
			    "differ\n", nx4t);
			printf("mvk_row_s's text, Q6_K rows staged against in place: %ld outputs differ\n",
			    nstage);
		}
		printf("k_mvk's text, four blocks in flight against two: %ld outputs differ\n",
		    ndeep);
		printf("mvk_ref against k_mvk's text: %ld outputs differ\n", nhand);
	}
	nfail += nhand + ndeep + nstage + nx4 + nx4t;
	printf("%ld checks, %ld failed%s\n", nchk, nfail, perturb ? " (perturbed model)" :
	    kern ? " (the kernels' text)" : "");
	return nfail != 0;
}
