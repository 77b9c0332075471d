/*
 * matvec-q8-emu: a CPU model of cuda/matvec_q8.cu's k_mv8 / k_mv8s per-lane
 * arithmetic (not built by make; a review aid for a machine without a
 * GPU).  It replays the lanes' products for Q8_0 (mv8_block, one lane a
 * block; mv8_half, two lanes a block, GPU_MV8_LANE2, both alignments),
 * Q4_1 and Q5_1 (mv8_block), Q4_0 and Q5_0 (mv8_half: two lanes a block;
 * Q4_0 the block by five aligned words, values sixteenfold by one clamped
 * funnel shift and mv8_q4x16, summed from 1.5 * 2^19; Q5_0 qs by five
 * aligned words and a funnel shift, qh by a multiply, values eightfold by
 * mv8_q5x8, summed from 1.5 * 2^20: mv8_hw, mv8_i2f4, mv8_i2f5) and NVFP4
 * (mv8_nv: by 16-value sub-blocks on
 * the GPU layout that gpu_nvfp4_pack makes from ggml's, modelled here by
 * nvfp4_pack; lane l: sub-blocks l and l + 32 of each chunk of 64, then of
 * the last part those below its end; the codes decoded by mv8_fp4pn for
 * m <= 2, by gpu_fp4x8 for more) with the
 * same word loads (Q8_0's 2-byte aligned blocks by aligned words and
 * funnel shifts), byte permutes (prmt in its default mode, sign
 * replication included), dp4a (sums started at the float bits of 1.5 *
 * 2^23, then that subtracted: checked equal to the int -> float
 * conversion), fp16 scale tricks and float operation order: fmaf where
 * the kernel has __fmaf_rn, nothing else fused), then the warp's
 * butterfly, and compares each product with quant_vec_dot on x quantized
 * by quant_quantize_act (NVFP4: on the ggml-layout row), within
 * kernel-check's tolerance (1e-5 of sum |w x|).  Also exhaustive:
 * mv8_ue4m3c2 and mv8_ue4m3c2f on the canonical bytes of the GPU layout
 * against quant_ue4m3_to_f32 / 2 for every byte in both positions, mv8_fp4pn (p - n)
 * and gpu_fp4x8 against the e2m1 kvalues for every code in every nibble
 * of a word, mv8_q45 against q - 8 (Q4_0) and q - 16 (Q5_0) for every
 * value in every byte of a word, both halves (k_mv8t's decode); k_mv8's
 * Q4_0 words against 16 (q - 8) and its d, and its Q5_0 words against 8 (q
 * - 16), for every value (qh bit included) in every position of a block at
 * both offsets in a word, both halves, and mv8_i2f4 and mv8_i2f5 against
 * t / 16 and t / 8 for every sum |t| < 2^22.  NVFP4 rows: packing then unpacking (nvfp4_unpack) gives the
 * row back (its scales as canonical bytes of the same values), and each
 * sub-block's float sum is the plain kvalue dot's.
 * Rows of 1..16 inputs give each row the same bits (the code per row does
 * not depend on m, NVFP4's two decodes give the same integer sums;
 * checked here by replaying rows alone and together).
 * k_mv8s runs the same mv8_block on a shared-memory copy of the bytes:
 * the same model.
 * Keep it in step with the kernel.
 * Built with -DQ8_KERN and tools/matvec-q8-kern.cc, every product of
 * those types but NVFP4 is also run by the kernel's own text
 * (cuda/matvec_q8.cuh's mv8_row, lane by lane, and the butterfly) at M = m
 * and at the least power of two M >= m, and must give these bits.
 * make check runs it as below, in a temporary directory (t/emu.bats):
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

#include "mv8-emu.h"

/* x of m rows as the kernels see it: q[j][e], dx[j][block], sx[j][block] */
struct xin {
	int8_t	*q;
	float	*dx, *sx;
	int	nb;
};

/* mv8_block<T> (Q8_0, Q4_1, Q5_1): acc[j] += block b (bytes blk) . x rows j < m */
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
	} else {	/* Q4_1, Q5_1 */
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
	}
}

/*
 * NVFP4's GPU layout (gpu_nvfp4_pack) of a row of nbw blocks in ggml's
 * (36 bytes: 4 ue4m3 scales, byte s sub-block s (values 16s..16s+15),
 * then qs[32], qs[8s + j] holding value 16s + j in its low nibble and
 * 16s + j + 8 in its high one), the same size: bytes [0, 32 nbw) the
 * codes, block b's at 32 b as 8 little-endian words, word i holding value
 * 8i + k in bits 4k..4k+3; bytes [32 nbw, 36 nbw) the scales, block b's 4
 * bytes at 32 nbw + 4 b as in ggml's.  g and o do not overlap.
 */
static void nvfp4_pack(const uint8_t *g, uint8_t *o, int nbw)
{
	for (int b = 0; b < nbw; b++) {
		const uint8_t *blk = g + 36 * (size_t)b, *qs = blk + 4;
		for (int i = 0; i < 8; i++) {
			uint32_t w = 0;
			for (int k = 0; k < 8; k++) {
				int e = 8 * i + k, s = e / 16, j = e % 16;
				unsigned c = j < 8 ? qs[8 * s + j] & 0xF : qs[8 * s + j - 8] >> 4;
				w |= (uint32_t)c << 4 * k;
			}
			for (int k = 0; k < 4; k++)
				o[32 * (size_t)b + 4 * i + k] = (uint8_t)(w >> 8 * k);
		}
		for (int s = 0; s < 4; s++)
			o[32 * (size_t)nbw + 4 * (size_t)b + s] = (uint8_t)ue4m3c(blk[s]);
	}
}

/* its inverse: ggml's layout from the GPU layout */
static void nvfp4_unpack(const uint8_t *o, uint8_t *g, int nbw)
{
	for (int b = 0; b < nbw; b++) {
		uint8_t *blk = g + 36 * (size_t)b, *qs = blk + 4;
		for (int s = 0; s < 4; s++)
			blk[s] = (uint8_t)ue4m3u(o[32 * (size_t)nbw + 4 * (size_t)b + s]);
		memset(qs, 0, 32);
		for (int e = 0; e < 64; e++) {
			const uint8_t *wp = o + 32 * (size_t)b + 4 * (e / 8);
			uint32_t w = wp[0] | (uint32_t)wp[1] << 8 | (uint32_t)wp[2] << 16 |
			    (uint32_t)wp[3] << 24;
			unsigned c = w >> 4 * (e % 8) & 0xF;
			int s = e / 16, j = e % 16;
			qs[8 * s + j % 8] |= (uint8_t)(c << 4 * (j / 8));
		}
	}
}

/*
 * mv8_nv: NVFP4 sub-block s of the GPU-layout row wr (its 2 code words at
 * 8 s, its scale byte at 8 nsub + s), then (two) sub-block s + 32 . the
 * same 16 values of input row j: acc = fma(dx, ws * t, acc) each, dx that
 * of the 32-block of x it lies in.  m <= 2: mv8_fp4pn, t = (MAGIC + p . x)
 * - n . x; else gpu_fp4x8, one chain.  Each t is also checked against the
 * plain kvalue dot (nmagic).
 */
static void nv(const uint8_t *wr, int nsub, int s, int two, const struct xin *X, int m,
    float *acc)
{
	int nb = X->nb;
	uint32_t c[4] = { 0, 0, 0, 0 }, p[8], n[8], w[8], sc;
	float ws[2];

	for (int k = 0; k < 1 + two; k++)	/* sub-blocks s and s + 32 */
		for (int i = 0; i < 2; i++)
			c[2 * k + i] = rd32(wr + 8 * (size_t)(s + 32 * k) + 4 * i);
	sc = wr[8 * (size_t)nsub + s] | (two ? (uint32_t)wr[8 * (size_t)nsub + s + 32] << 8 : 0);
	if (m <= 2)
		ue4m3c2(sc, ws);
	else
		ue4m3c2f(sc, ws);
	for (int i = 0; i < 4; i++)
		if (m <= 2)
			fp4pn(c[i], &p[2 * i], &n[2 * i]);
		else
			fp4sel(c[i], &w[2 * i], &w[2 * i + 1]);
	for (int j = 0; j < m; j++)
		for (int k = 0; k < 1 + two; k++) {
			int e = s + 32 * k, i = 0x4B400000, in = 0, plain = 0;
			const uint8_t *xq = (const uint8_t *)X->q + (size_t)j * nb * 32 + 16 * (size_t)e;
			for (int u = 0; u < 4; u++) {
				uint32_t a = rd32(xq + 4 * u);
				if (m <= 2)
					i = dp4a(p[4 * k + u], a, i), in = dp4a(n[4 * k + u], a, in);
				else
					i = dp4a(w[4 * k + u], a, i);
			}
			float t = i2f(i - in);
			for (int v = 0; v < 16; v++)
				plain += kv[c[2 * k + v / 8] >> 4 * (v % 8) & 0xF] * (int8_t)xq[v];
			if (t != (float)plain)
				nmagic++;
			acc[j] = fmaf(X->dx[(size_t)j * nb + e / 2], ws[k] * t, acc[j]);
		}
}

/* mv8_half: half h of the Q8_0, Q4_0 or Q5_0 block at blk (two lanes a
 * block; mv8_hw: Q8_0's 16 bytes, Q4_0's / Q5_0's 16 qs bytes decoded by
 * mv8_q45, Q5_0 with qh's halfword h) */
static void half(int t, const uint8_t *blk, int h, int b, const struct xin *X, int m,
    float *acc)
{
	uint32_t w[4];
	float dw;
	int nb = X->nb;

	hw16(t, blk, h, w, &dw);
	for (int j = 0; j < m; j++) {
		size_t xi = (size_t)j * nb + b;
		const uint8_t *xq = (const uint8_t *)X->q + xi * 32 + 16 * h;
		int i = hstart(t);
		for (int k = 0; k < 4; k++)
			i = dp4a(w[k], rd32(xq + 4 * k), i);
		acc[j] = fmaf(hi2f(t, i), dw * X->dx[xi], acc[j]);
	}
}

static int lanes = 1;	/* Q8_0 by 1 or 2 (GPU_MV8_LANE2) lanes a block (Q4_0, Q5_0: 2) */

/* k_mv8 for weight row w: 32 lanes, lane l blocks l, l + 32, ... (two
 * lanes a block: half l & 1 of blocks l / 2, l / 2 + 16, ...); then the
 * butterfly (mv8_store).  NVFP4: w in the GPU layout (mv8_nv: sub-blocks
 * l, l + 32 of each 64, then of the last part those below its end). */
static void warp(int t, const uint8_t *w, int bs, int nbw, const struct xin *X, int m, float *y)
{
	float acc[32][MAXM] = { { 0 } };

	for (int l = 0; l < 32; l++)
		if (t == QUANT_NVFP4) {
			int nsub = 2 * X->nb, full = nsub & ~63, s = l;
			for (; s < full; s += 64)
				nv(w, nsub, s, 1, X, m, acc[l]);
			if (s < nsub)
				nv(w, nsub, s, s + 32 < nsub, X, m, acc[l]);
		} else if ((lanes == 2 && t == QUANT_Q8_0) || t == QUANT_Q4_0 || t == QUANT_Q5_0)
			for (int b = l >> 1; b < nbw; b += 16)
				half(t, w + (size_t)b * bs, l & 1, b, X, m, acc[l]);
		else
			for (int b = l; b < nbw; b += 32)
				block(t, w + (size_t)b * bs, b, X, m, acc[l]);
	for (int j = 0; j < m; j++) {
		float v[32], u[32];
		for (int l = 0; l < 32; l++)
			v[l] = acc[l][j];
		for (int o = 16; o > 0; o >>= 1) {
			for (int l = 0; l < 32; l++)
				u[l] = v[l] + v[l ^ o];
			memcpy(v, u, sizeof v);
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

#ifdef Q8_KERN
/* tools/matvec-q8-kern.cc: cuda/matvec_q8.cuh's text, k_mv8's warp */
int kern_mv8(int t, int L, int M, const uint8_t *wr, int nb, const int8_t *q, const float *dx,
    const float *sx, int m, float *y);

static int nkern;	/* products of the kernel's text compared with warp()'s */

/* The kernel's text for the row at w, at M = m (k_mv8) and at the least
 * power of two M >= m (k_moe_mv8g's rows), the same bits as y (warp()) */
static void kern_check(int t, const uint8_t *w, const struct xin *X, int m, const float *y,
    int rows, int ne0, int r)
{
	int L = t == QUANT_Q4_0 || t == QUANT_Q5_0 || (t == QUANT_Q8_0 && lanes == 2) ? 2 : 1;
	int p2 = 1;
	char what[96];

	while (p2 < m)
		p2 *= 2;
	for (int M = m; ; M = p2) {
		float yk[MAXM];
		int rc = kern_mv8(t, L, M, w, X->nb, X->q, X->dx, X->sx, m, yk);
		snprintf(what, sizeof what, "%s L=%d %dx%d row %d m=%d: k_mv8's text at M=%d%s",
		    quant_name(t), L, rows, ne0, r, m, M, rc ? " has no instance" : " differs");
		check(rc == 0 && memcmp(yk, y, sizeof(float) * m) == 0, what), nkern++;
		if (M == p2)
			break;
	}
}
#endif

/* every byte in every position of the scale word; every code in every
 * nibble of a code word (the other nibbles random), both decodes */
static void exhaustive(void)
{
	char what[64];
	int n = 0;

	for (int pos = 0; pos < 2; pos++)	/* canonical bytes, the pair mv8_ue4m3c2 reads */
		for (unsigned x = 0; x < 256; x++) {
			uint32_t o = ue4m3c((unsigned)(rnd() & 0xFF)), sc = pos ? o | ue4m3c(x) << 8 :
			    ue4m3c(x) | o << 8;
			float ws[2], want = quant_ue4m3_to_f32((uint8_t)x) * 0.5f;
			ue4m3c2(sc, ws);
			snprintf(what, sizeof what, "ue4m3c 0x%02x byte %d", x, pos);
			check(memcmp(&want, &ws[pos], 4) == 0, what), n++;
			ue4m3c2f(sc, ws);
			snprintf(what, sizeof what, "ue4m3c (fp32) 0x%02x byte %d", x, pos);
			check(memcmp(&want, &ws[pos], 4) == 0, what), n++;
			check(ue4m3u(ue4m3c(x)) == x || quant_ue4m3_to_f32((uint8_t)ue4m3u(ue4m3c(x))) ==
			    quant_ue4m3_to_f32((uint8_t)x), what), n++;
		}
	for (int pos = 0; pos < 8; pos++)
		for (unsigned c = 0; c < 16; c++)
			for (int rep = 0; rep < 16; rep++) {
				uint32_t v = (uint32_t)(rnd() & 0xFFFFFFFFu), p[2], q[2], w[2];
				v = (v & ~(0xFu << 4 * pos)) | c << 4 * pos;
				fp4pn(v, p, q);
				fp4sel(v, &w[0], &w[1]);
				for (int k = 0; k < 8; k++) {
					int want = kv[v >> 4 * k & 0xF], sh = 8 * (k & 3);
					int pk = (int8_t)(p[k >> 2] >> sh), nk = (int8_t)(q[k >> 2] >> sh);
					snprintf(what, sizeof what, "mv8_fp4pn 0x%08x value %d", v, k);
					check(pk - nk == want, what), n++;
					snprintf(what, sizeof what, "gpu_fp4x8 0x%08x value %d", v, k);
					check((int8_t)(w[k >> 2] >> sh) == want, what), n++;
				}
			}
	for (int t = QUANT_Q4_0; t <= QUANT_Q5_0; t += QUANT_Q5_0 - QUANT_Q4_0)
		for (int pos = 0; pos < 4; pos++)
			for (unsigned v = 0; v < (t == QUANT_Q5_0 ? 32u : 16u); v++)
				for (int h = 0; h < 2; h++) {
					uint32_t w = (uint32_t)(rnd() & 0xFFFFFFFFu), hb = (uint32_t)(rnd() & 0xF);
					w = (w & ~(0xFu << (8 * pos + 4 * h))) | (v & 0xF) << (8 * pos + 4 * h);
					hb = (hb & ~(1u << pos)) | (v >> 4) << pos;
					uint32_t got = q45(t, w, h, hb);
					for (int k = 0; k < 4; k++) {
						int q = (int)(w >> (8 * k + 4 * h) & 0xF);
						if (t == QUANT_Q5_0)
							q |= (int)(hb >> k & 1) << 4;
						snprintf(what, sizeof what, "mv8_q45 %s 0x%08x h %d byte %d",
						    quant_name(t), w, h, k);
						check((int8_t)(got >> 8 * k) == q - (t == QUANT_Q5_0 ? 16 : 8), what);
						n++;
					}
				}
	/* k_mv8's Q4_0 (mv8_hw): every nibble in every qs byte of a block at
	 * both word offsets, both halves, gives 16 (q - 8) and the block's d */
	for (int al = 0; al <= 2; al += 2)
		for (int pos = 0; pos < 16; pos++)
			for (unsigned v = 0; v < 16; v++)
				for (int h = 0; h < 2; h++) {
					_Alignas(16) uint8_t buf[28];
					uint8_t *blk = buf + 4 + al;
					uint32_t w[4];
					float dw;
					for (int i = 0; i < 28; i++)
						buf[i] = (uint8_t)rnd();
					blk[1] &= 0x3B;
					blk[2 + pos] = (uint8_t)((blk[2 + pos] & ~(0xF << 4 * h)) |
					    v << 4 * h);
					hw16(QUANT_Q4_0, blk, h, w, &dw);
					float d = h2f(rd16(blk));
					snprintf(what, sizeof what, "mv8_hw Q4_0 offset %d h %d d", al, h);
					check(memcmp(&dw, &d, 4) == 0, what), n++;
					for (int k = 0; k < 16; k++) {
						int q = blk[2 + k] >> 4 * h & 0xF;
						snprintf(what, sizeof what, "mv8_hw Q4_0 offset %d h %d "
						    "value %d", al, h, k);
						check((int8_t)(w[k / 4] >> 8 * (k % 4)) == 16 * (q - 8),
						    what), n++;
					}
				}
	/* k_mv8's Q5_0: every value (nibble and qh bit) at every position of a
	 * block at both offsets in a word, both halves, gives 8 (q - 16) */
	for (int al = 0; al <= 2; al += 2)
		for (int pos = 0; pos < 16; pos++)
			for (unsigned v = 0; v < 32; v++)
				for (int h = 0; h < 2; h++) {
					_Alignas(16) uint8_t buf[36];
					uint8_t *blk = buf + 8 + al;
					uint32_t w[4], qh;
					float dw;
					for (int i = 0; i < 36; i++)
						buf[i] = (uint8_t)rnd();
					blk[1] &= 0x3B;
					blk[6 + pos] = (uint8_t)((blk[6 + pos] & ~(0xF << 4 * h)) |
					    (v & 0xF) << 4 * h);
					qh = rd32(blk + 2);
					qh = (qh & ~(1u << (16 * h + pos))) | (v >> 4) << (16 * h + pos);
					memcpy(blk + 2, &qh, 4);
					hw16(QUANT_Q5_0, blk, h, w, &dw);
					for (int k = 0; k < 16; k++) {
						int q = (blk[6 + k] >> 4 * h & 0xF) |
						    (int)(qh >> (16 * h + k) & 1) << 4;
						snprintf(what, sizeof what, "mv8_hw Q5_0 offset %d h %d "
						    "value %d", al, h, k);
						check((int8_t)(w[k / 4] >> 8 * (k % 4)) == 8 * (q - 16),
						    what), n++;
					}
				}
	/* mv8_i2f4, mv8_i2f5: every sum a sixteenfold or eightfold dp4a chain
	 * can give, over 16 and over 8 */
	for (int t = -(1 << 22); t < 1 << 22; t++)
		if (i2f4(0x49400000 + t) != (float)t / 16 || i2f5(0x49C00000 + t) != (float)t / 8) {
			snprintf(what, sizeof what, "mv8_i2f4 / mv8_i2f5 %d", t);
			check(0, what);
			break;
		}
	n++;
	printf("exhaustive: %d scale and code checks\n", n);
}

/*
 * rows x ne0 weights of type t (quantized random floats, or random bytes
 * when raw), m rows of x: every product within 1e-5 of sum |w x| of
 * quant_vec_dot, and each row alone the same bits as in the m-row call.
 * NVFP4: the kernel's rows are the GPU layout of w (nvfp4_pack; unpacked
 * back to w's bytes).
 */
static int nrows;	/* NVFP4 rows packed and unpacked */

static void products(int t, int rows, int ne0, int m, int raw, double *worst, int *count)
{
	int nb = ne0 / 32, blk = t == QUANT_NVFP4 ? 64 : 32, nbw = ne0 / blk;
	size_t rb = quant_row_size(t, ne0), xb = quant_row_size(quant_vec_dot_type(t), ne0);
	int bs = (int)(rb / nbw);
	/* (wp, the rows the kernels read: to the end of the aligned word that
	 * holds their last byte, no further (Q4_0's and Q5_0's words read up to
	 * 2 bytes past a block, inside that word; gpu_alloc pads by 16), which
	 * ASan holds the -k build's kernel text and the model to) */
	size_t wpn = (rb * rows + 3) & ~(size_t)3;
	uint8_t *w = malloc(rb * rows + 16), *xq = malloc(xb * m), *wp = malloc(wpn);
	uint8_t *wu = malloc(rb);
	float *x = malloc(sizeof(float) * ne0 * m), *wf = malloc(sizeof(float) * ne0);
	float *xf = malloc(sizeof(float) * ne0 * m);
	/* (MAXM rows: a kernel instance of more rows than m reads the rest) */
	struct xin X = { malloc((size_t)MAXM * ne0), malloc(sizeof(float) * MAXM * nb),
	    malloc(sizeof(float) * MAXM * nb), nb };
	char what[96];

	for (int r = 0; r < rows; r++) {
		if (raw) {
			for (size_t i = 0; i < rb; i++)
				w[r * rb + i] = (uint8_t)rnd();
			if (t != QUANT_NVFP4)	/* finite fp16 scales */
				for (int b = 0; b < nbw; b++) {
					uint8_t *p = w + r * rb + (size_t)b * bs;
					p[1] &= 0x3B;
					if (t == QUANT_Q4_1 || t == QUANT_Q5_1)
						p[3] &= 0x3B;
				}
		} else {
			for (int i = 0; i < ne0; i++)
				x[i] = unif(-1, 1) * (i % 97 == 0 ? 8.0f : 1.0f);
			if (quant_quantize_row(t, x, w + r * rb, ne0, NULL) != 0)
				abort();
		}
	}
	if (t == QUANT_NVFP4)
		for (int r = 0; r < rows; r++) {
			nvfp4_pack(w + r * rb, wp + r * rb, nbw);
			nvfp4_unpack(wp + r * rb, wu, nbw);
			for (int b = 0; b < nbw; b++)	/* the scales come back canonical */
				for (int s = 0; s < 4; s++) {
					uint8_t *x = w + r * rb + 36 * (size_t)b + s;
					*x = (uint8_t)ue4m3u(ue4m3c(*x));
				}
			snprintf(what, sizeof what, "NVFP4 %dx%d%s row %d packed and unpacked",
			    rows, ne0, raw ? " raw" : "", r);
			check(memcmp(wu, w + r * rb, rb) == 0, what), nrows++;
		}
	else
		memcpy(wp, w, rb * rows);
	for (size_t i = rb * rows; i < wpn; i++)	/* read, not kept */
		wp[i] = (uint8_t)rnd();
	for (int j = 0; j < m; j++) {
		float *xr = x + (size_t)j * ne0;
		for (int i = 0; i < ne0; i++)
			xr[i] = unif(-1, 1) * (j == 1 ? 1e-3f : 1.0f);
		if (quant_quantize_act(t, xr, xq + j * xb, ne0) != 0)
			abort();
		int xs = t == QUANT_Q4_1 || t == QUANT_Q5_1 ? 36 : 34, o = xs - 32;
		for (int b = 0; b < nb; b++) {
			const uint8_t *p = xq + j * xb + (size_t)b * xs;
			X.dx[j * nb + b] = h2f(rd16(p));
			X.sx[j * nb + b] = o == 4 ? h2f(rd16(p + 2)) : 0.0f;
			memcpy(X.q + (size_t)j * ne0 + b * 32, p + o, 32);
			for (int k = 0; k < 32; k++)
				xf[(size_t)j * ne0 + b * 32 + k] = X.dx[j * nb + b] * (float)X.q[(size_t)j * ne0 + b * 32 + k];
		}
	}
	for (size_t i = (size_t)m * ne0; i < (size_t)MAXM * ne0; i++)	/* rows read, dropped */
		X.q[i] = (int8_t)rnd();
	for (int i = m * nb; i < MAXM * nb; i++)
		X.dx[i] = unif(-1, 1), X.sx[i] = unif(-1, 1);
	for (int r = 0; r < rows; r++) {
		float y[MAXM], y1[MAXM];
		warp(t, wp + r * rb, bs, nbw, &X, m, y);
#ifdef Q8_KERN
		if (t != QUANT_NVFP4)
			kern_check(t, wp + r * rb, &X, m, y, rows, ne0, r);
#endif
		quant_dequantize_row(t, w + r * rb, wf, ne0);
		for (int j = 0; j < m; j++) {
			struct xin X1 = { X.q + (size_t)j * ne0, X.dx + j * nb, X.sx + j * nb, nb };
			warp(t, wp + r * rb, bs, nbw, &X1, 1, y1 + j);
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
	free(w), free(wp), free(wu), free(xq), free(x), free(wf), free(xf), free(X.q), free(X.dx), free(X.sx);
}

int
main(void)
{
	/* Q8_0 by one lane, then by two (4) */
	static const int types[] = { QUANT_NVFP4, QUANT_Q8_0, QUANT_Q4_1, QUANT_Q5_1, QUANT_Q8_0,
	    QUANT_Q4_0, QUANT_Q5_0 };
	/* (5 x 224: rows of 7 blocks, every other row 2 bytes off a word for
	 * Q4_0 and Q5_0; not NVFP4's, whose blocks are 64) */
	static const int shapes[][2] = { { 7, 64 }, { 5, 224 }, { 5, 512 }, { 4, 4096 }, { 3, 4160 },
	    { 2, 12288 } };

	exhaustive();
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		int t = types[ti];
		double worst = 0;
		int count = 0;
		lanes = ti == 4 ? 2 : 1;
		for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
			for (int m = 1; m <= MAXM && (t != QUANT_NVFP4 || shapes[si][1] % 64 == 0); m++)
				for (int raw = 0; raw < 2; raw++)
					products(t, shapes[si][0], shapes[si][1], m, raw, &worst, &count);
		printf("%-5s%s %5d products, worst |y - quant_vec_dot| = %.3g of sum |w x|\n",
		    quant_name(t), t == QUANT_NVFP4 ? " (GPU layout, mv8_nv)" : lanes == 2 ||
		    t == QUANT_Q4_0 || t == QUANT_Q5_0 ? " lane2" : "", count, worst);
	}
#ifdef Q8_KERN
	printf("k_mv8's text (cuda/matvec_q8.cuh) against the model: %d products\n", nkern);
#endif
	printf("NVFP4 rows packed and unpacked: %d\n", nrows);
	printf("NVFP4 sub-block sums differing from (float) of the plain kvalue dot: %d\n", nmagic);
	nfail += nmagic;
	printf("%s (%d failures)\n", nfail ? "FAILED" : "OK", nfail);
	return nfail != 0;
}
