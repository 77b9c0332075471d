/*
 * matvec-q8tc-emu: a CPU model of cuda/matvec_q8tc.cuh's k_mv8t against
 * one of cuda/matvec_q8.cu's k_mv8 (not built by make; the evidence, on
 * a machine without a GPU, that the tensor-core kernel gives k_mv8's
 * bits).  k_mv8: Q8_0, Q4_0 and Q5_0 two lanes a block (mv8_half, Q8_0's
 * default layout and Q4_0's, Q5_0's only one: lane l half l % 2 of blocks
 * l / 2, l / 2 + 16, ..., 4 word loads and a funnel shift from the word
 * holding the 16 bytes' first (mv8_ld16: Q8_0 the half's); Q4_0 five
 * aligned words from the one holding the block's first byte, nibble h less
 * 8 sixteenfold by one clamped funnel shift (mv8_q4x16), summed from 1.5 *
 * 2^19; Q5_0 its qs by five aligned words and a funnel shift, qh's bits
 * 16 h .. by multiplies, less 16 eightfold (mv8_q5x8), summed from 1.5 *
 * 2^20: mv8_hw, mv8_i2f4, mv8_i2f5) and NVFP4
 * (mv8_nv on the GPU layout: lane l sub-blocks l, l + 32 of each 64, then
 * of the last part those below its end; mv8_fp4pn and mv8_ue4m3c2 for a
 * launch of m <= 2 rows, gpu_fp4x8 and mv8_ue4m3c2f above), dp4a sums from
 * 0x4B400000, then mv8_store's xor butterfly and the per-tensor scale; as
 * tools/matvec-q8-emu.c models them (the helpers shared in tools/mv8-emu.h), m > 16 as
 * the launches of 16 that mv8_products makes.  k_mv8t thread by thread:
 * mvt_pick over a set of weights, mvt_copy's cp.async copies (16-byte
 * pieces for 16-byte aligned rows, else aligned words from the one
 * holding a chunk's first byte, the source size cutting the last) into a
 * ring of stages that starts as garbage, in the kernel's pipeline order;
 * mvt_step's fragments (Q8_0 by halfword pairs at a row's offset in its
 * slot, Q4_0 and Q5_0 likewise then mv8_q45, NVFP4 codes decoded by
 * gpu_fp4x8's low half), multiplied as PTX's
 * mma.m16n8k16 .s32.s8.s8.s32 defines its fragments (A: a0 row g, a1 row
 * g + 8, bytes k = 4 tg .. 4 tg + 3; B: b0 column g, rows 4 tg ..; C: c0,
 * c1 row g columns 2 tg, 2 tg + 1, c2, c3 row g + 8; g = lane / 4, tg =
 * lane % 4) from the accumulator 0x4B400000; the float steps (Q8_0 one
 * dw * dx a block for both halves; NVFP4 ws * S as fma(MAGIC + S, ws,
 * -MAGIC's value * ws)); mvt_store's chains to shared memory and the
 * butterfly's pairs.  Every output of rows x m is compared with k_mv8's
 * bit for bit, m = 1..32, on Q8_0, NVFP4, Q4_0 and Q5_0 shapes (tail
 * chunks, odd block counts: rows 2 mod 4 bytes; weights at 16-byte,
 * 4-byte and 2-byte aligned addresses), a set of three weights, a
 * per-tensor scale.
 * Also exhaustive: the NVFP4 product trick against ws * (float)S for every
 * scale byte and every S a sub-block can give.
 * The experts grouped (k_moe_mv8t beside k_moe_mv8g, cuda/matvec_q8.cu's
 * mv8_moe_run): moe_group_build's perm and tiles (bucket, first, count,
 * index in the bucket) as k_moe_group writes them, moe_gather's rows,
 * then k_moe_mv8t's blocks (a pair of one expert's tiles, up to 32 rows,
 * or a tile alone; the tiles it leaves by tc; the column tiles past the
 * rows skipped; NaN rows for bucket n_exp; the ring sized by
 * mvt_moe_smem) running the blocks above on the expert's rows and the
 * gathered rows, and k_moe_mv8g's tiles as k_mv8's lanes at the tile's
 * rows; every slot's row against k_moe_mv8's (k_mv8 at one row) bit for
 * bit and written exactly once, under tc 0, 1 and 9 (GPU_MOE_TC_OFF, _ALL,
 * _AUTO): Q8_0, NVFP4, Q4_0 and Q5_0 stacks routed with experts of 0, 1,
 * 5, 17, 32, 40, 16, 9 and 8 slots and 18 ill ids (Q4_0's and Q5_0's rows
 * of 704 among them), and 256 experts at random.
 * -p N perturbs the model (1: chains 0 and 2 swapped where their sums are
 * stored; 2: the butterfly's levels in the other order; 3: the units of
 * odd chunks feeding chain c ^ 4 instead of c; 4: k_moe_mv8t's block
 * taking the next tile whatever its expert; 5: its column tiles cut to
 * n / 8; 6: k_moe_mv8g taking a pair's second tile too; 7: k_mv8t's Q4_0
 * and Q5_0 fragments of half h taking nibble h ^ 1): each must fail.
 * (Relabelling every chain c as c ^ x for one x is no perturbation: the
 * butterfly gives the same bits, its adds being commutative.)
 * make check runs it as below, in a temporary directory (t/emu.bats):
 *   cc -O2 -ffp-contract=off -std=c11 -D_GNU_SOURCE -Ilib -o /tmp/emutc \
 *       tools/matvec-q8tc-emu.c lib/quant*.c lib/util.c -lm && /tmp/emutc
 *   /tmp/emutc -p 1   (and 2 .. 7: FAIL lines, exit 1)
 * Keep it in step with the kernels.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant.h"

enum { MAXM = 32, MAGIC = 0x4B400000, R = 16, NS = 3, WQ = 560, W4 = 304, W5 = 368, WN = 304,
	XS = 528, DS = 17 };
enum { T_Q8_0 = QUANT_Q8_0, T_NVFP4 = QUANT_NVFP4, T_Q4_0 = QUANT_Q4_0, T_Q5_0 = QUANT_Q5_0 };

/* the types k_mv8 takes by halves of blocks (mv8_halves), their block bytes,
 * and the rows' alignment mask (mvt_amask) */
static int halves(int t) { return t == T_Q8_0 || t == T_Q4_0 || t == T_Q5_0; }
static int bsz(int t) { return t == T_Q8_0 ? 34 : t == T_Q4_0 ? 18 : 22; }
static int amask(int t) { return t == T_NVFP4 ? 3 : 1; }
static size_t rowb(int t, int ne0) { return t == T_NVFP4 ? (size_t)(ne0 / 64) * 36 : (size_t)(ne0 / 32) * bsz(t); }

static int perturb;
static long nchk, nfail;

#include "mv8-emu.h"

/* x as the kernels see it: q[j][ne0], dx[j][nb] */
struct xin {
	int8_t	*q;
	float	*dx;
	int	nb;
};

/* --- k_mv8 -------------------------------------------------------------- */

/* mv8_half: half h of the Q8_0, Q4_0 or Q5_0 block at blk . the same half
 * of block b of input rows j0 .. j0 + mm - 1 (mv8_hw's words: Q8_0's 16
 * bytes, Q4_0's / Q5_0's qs by mv8_q45 with qh's halfword h) */
static void half(int t, const uint8_t *blk, int h, int b, const struct xin *X, int j0, int mm,
    float (*acc)[32], int l)
{
	uint32_t w[4];
	float dw;
	int nb = X->nb;

	hw16(t, blk, h, w, &dw);
	for (int j = j0; j < j0 + mm; j++) {
		size_t xi = (size_t)j * nb + b;
		const uint8_t *xq = (const uint8_t *)X->q + xi * 32 + 16 * h;
		int i = hstart(t);
		for (int k = 0; k < 4; k++)
			i = dp4a(w[k], rd32(xq + 4 * k), i);
		acc[j][l] = fmaf(hi2f(t, i), dw * X->dx[xi], acc[j][l]);
	}
}

/* mv8_nv: sub-blocks s and (two) s + 32 of the GPU-layout row wr */
static void nv(const uint8_t *wr, int nsub, int s, int two, const struct xin *X, int j0,
    int mm, float (*acc)[32], int l)
{
	int nb = X->nb;
	uint32_t c[4] = { 0, 0, 0, 0 }, p[8], n[8], w[8], sc;
	float ws[2];

	for (int k = 0; k < 1 + two; k++)
		for (int i = 0; i < 2; i++)
			c[2 * k + i] = rd32(wr + 8 * (size_t)(s + 32 * k) + 4 * i);
	sc = wr[8 * (size_t)nsub + s] | (two ? (uint32_t)wr[8 * (size_t)nsub + s + 32] << 8 : 0);
	if (mm <= 2)
		ue4m3c2(sc, ws);
	else
		ue4m3c2f(sc, ws);
	for (int i = 0; i < 4; i++)
		if (mm <= 2)
			fp4pn(c[i], &p[2 * i], &n[2 * i]);
		else
			fp4sel(c[i], &w[2 * i], &w[2 * i + 1]);
	for (int j = j0; j < j0 + mm; j++)
		for (int k = 0; k < 1 + two; k++) {
			int e = s + 32 * k, i = MAGIC, in = 0;
			const uint8_t *xq = (const uint8_t *)X->q + (size_t)j * nb * 32 + 16 * (size_t)e;
			for (int u = 0; u < 4; u++) {
				uint32_t a = rd32(xq + 4 * u);
				if (mm <= 2)
					i = dp4a(p[4 * k + u], a, i), in = dp4a(n[4 * k + u], a, in);
				else
					i = dp4a(w[4 * k + u], a, i);
			}
			acc[j][l] = fmaf(X->dx[(size_t)j * nb + e / 2], ws[k] * i2f(i - in), acc[j][l]);
		}
}

/* k_mv8 (the default: mv8_products' launches of at most 16 input rows) for
 * weight row wr and m input rows: y[j] */
static void mv8_ref(int t, const uint8_t *wr, const struct xin *X, int m, const float *scale,
    float *y)
{
	static float acc[MAXM][32];
	int nb = X->nb;

	memset(acc, 0, sizeof acc);
	for (int j0 = 0; j0 < m; j0 += 16) {
		int mm = m - j0 < 16 ? m - j0 : 16;
		for (int l = 0; l < 32; l++)
			if (t == T_NVFP4) {
				int nsub = 2 * nb, full = nsub & ~63, s = l;
				for (; s < full; s += 64)
					nv(wr, nsub, s, 1, X, j0, mm, acc, l);
				if (s < nsub)
					nv(wr, nsub, s, s + 32 < nsub, X, j0, mm, acc, l);
			} else
				for (int b = l >> 1; b < nb; b += 16)
					half(t, wr + (size_t)b * bsz(t), l & 1, b, X, j0, mm, acc, l);
	}
	for (int j = 0; j < m; j++) {	/* mv8_store: lane 0 after v += v of lane ^ o */
		float v[32], u[32];
		memcpy(v, acc[j], sizeof v);
		for (int o = 16; o > 0; o >>= 1) {
			for (int l = 0; l < 32; l++)
				u[l] = v[l] + v[l ^ o];
			memcpy(v, u, sizeof v);
		}
		y[j] = scale != NULL ? v[0] * *scale : v[0];
	}
}

/* --- k_mv8t ------------------------------------------------------------- */

/* cp.async: sz bytes at dst, the first n of them from src, the rest zeros */
static void cp(uint8_t *dst, const uint8_t *src, int sz, int n)
{
	if (n < 0 || n > sz || ((uintptr_t)src & (uintptr_t)(sz - 1)) || ((uintptr_t)dst & (uintptr_t)(sz - 1))) {
		fprintf(stderr, "cp.async: misaligned or bad size\n");
		abort();
	}
	memcpy(dst, src, (size_t)n);
	memset(dst + n, 0, (size_t)(sz - n));
}

/* one launch's operands (mv8_set and the kernel's parameters) */
struct launch {
	int	t, nb, m, a16, nw;
	size_t	rb;
	const uint8_t *W[4];
	float	*y[4];
	const float *scale[4];
	int64_t	rows[4];
	unsigned blk[5];
	const struct xin *X;
};

/* one block's work: weight rows r0.. (below rows) of W against input rows
 * 0 .. m - 1 of X, the stages laid out for mp input rows, column tiles nt
 * < ntl multiplied; row j's results into y[slot ? slot[j] : j][rows] */
struct job {
	const uint8_t *W;
	int64_t	rows, r0;
	const struct xin *X;
	int	m, mp, ntl;
	float	*y;
	const float *scale;
	const int32_t *slot;
	int	*cnt;		/* NULL, or a count of the writes to each y */
};

/* the stage layout of mvt_dim */
static int wst(int t) { return t == T_Q8_0 ? WQ : t == T_Q4_0 ? W4 : t == T_Q5_0 ? W5 : WN; }
static int ox(int t) { return R * wst(t); }
static int od(int t, int mp) { return ox(t) + mp * XS; }
static int stage(int t, int mp) { return od(t, mp) + mp * DS * 4; }

/* mvt_copy of chunk k of the job J into st, thread by thread */
static void copy(const struct launch *L, uint8_t *st, const struct job *J, int k)
{
	const uint8_t *W = J->W;
	int64_t r0 = J->r0, rows = J->rows;
	int mp = J->mp, t = L->t, nb = L->nb, m = J->m, nbk = nb - 16 * k < 16 ? nb - 16 * k : 16;
	int nr = rows - r0 < R ? (int)(rows - r0) : R, WS = wst(t);
	size_t rb = L->rb;

	for (int th = 0; th < 256; th++) {
		if (halves(t)) {
			int bs = bsz(t), nw = 4 * bs + 1, len = bs * nbk;
			if (L->a16)
				for (int it = th; it < nr * bs; it += 256) {
					int rr = it / bs, i = it % bs, n = len - 16 * i < 16 ? len - 16 * i : 16;
					const uint8_t *src = W + (size_t)(r0 + rr) * rb + (size_t)bs * 16 * k;
					if (n > 0)
						cp(st + rr * WS + 16 * i, src + 16 * i, 16, n);
				}
			else
				for (int it = th; it < nr * nw; it += 256) {
					int rr = it / nw, i = it % nw;
					const uint8_t *src = W + (size_t)(r0 + rr) * rb + (size_t)bs * 16 * k;
					int o = (int)((uintptr_t)src & 3), n = o + len - 4 * i < 4 ? o + len - 4 * i : 4;
					if (n > 0)
						cp(st + rr * WS + 4 * i, src - o + 4 * i, 4, n);
				}
		} else {
			int nsub = 2 * nb, nsk = 2 * nbk;
			if (L->a16)
				for (int it = th; it < nr * 18; it += 256) {
					int rr = it / 18, i = it % 18;
					const uint8_t *rp = W + (size_t)(r0 + rr) * rb;
					uint8_t *d = st + rr * WS;
					if (i < 16 && 16 * i < 8 * nsk)
						cp(d + 16 * i, rp + (size_t)256 * k + 16 * i, 16, 16);
					else if (i >= 16 && 16 * (i - 16) < nsk)
						cp(d + 256 + 16 * (i - 16), rp + (size_t)8 * nsub + 32 * k + 16 * (i - 16),
						    16, nsk - 16 * (i - 16) < 16 ? nsk - 16 * (i - 16) : 16);
				}
			else
				for (int it = th; it < nr * 72; it += 256) {
					int rr = it / 72, i = it % 72;
					const uint8_t *rp = W + (size_t)(r0 + rr) * rb;
					uint8_t *d = st + rr * WS;
					if (i < 64 && 4 * i < 8 * nsk)
						cp(d + 4 * i, rp + (size_t)256 * k + 4 * i, 4, 4);
					else if (i >= 64 && 4 * (i - 64) < nsk)
						cp(d + 256 + 4 * (i - 64), rp + (size_t)8 * nsub + 32 * k + 4 * (i - 64), 4, 4);
				}
		}
		for (int it = th; it < m * 32; it += 256) {
			int j = it >> 5, i = it & 31;
			if (i < 2 * nbk)
				cp(st + ox(t) + j * XS + 16 * i, (const uint8_t *)J->X->q +
				    ((size_t)j * nb + 16 * k) * 32 + 16 * i, 16, 16);
		}
		for (int it = th; it < m * 16; it += 256) {
			int j = it >> 4, i = it & 15;
			if (i < nbk)
				cp(st + od(t, mp) + (j * DS + i) * 4,
				    (const uint8_t *)(J->X->dx + (size_t)j * nb + 16 * k + i), 4, 4);
		}
	}
}

/* the mma's D = MAGIC + A B from the warp's fragments, back to each lane */
static void mma(uint32_t a[32][2], const uint32_t b[32], int c[32][4]) { mma_s8(a, b, c, MAGIC); }

/* lane's accumulators: acc[lane][u][nt][e] */
typedef float accs[4][4][4];

/* mvt_step of warp w on chunk k in st (the column tiles nt < ntl) */
static void step(const struct launch *L, const uint8_t *st, int mp, int ntl, int k, int w,
    const int og[32][2], accs *acc)
{
	int t = L->t, WS = wst(t);

	for (int pi = 0; pi < 2; pi++) {
		int p = w + 8 * pi;
		if (16 * k + p >= L->nb)
			break;
		uint32_t a[2][32][2];
		float f0[32][2], f1[32][2], n0[32][2], n1[32][2];
		for (int lane = 0; lane < 32; lane++) {
			int g = lane >> 2, tg = lane & 3;
			const uint8_t *w0 = st + g * WS, *w1 = st + (g + 8) * WS;
			if (halves(t)) {
				int bs = bsz(t);
				const uint8_t *b0 = w0 + og[lane][0] + bs * p, *b1 = w1 + og[lane][1] + bs * p;
				f0[lane][0] = h2f(rd16(b0)), f1[lane][0] = h2f(rd16(b1));
				for (int h = 0; h < 2; h++) {
					/* Q8_0: the half's bytes 4 tg ..; Q4_0, Q5_0: qs[4 tg ..] by
					 * mv8_q45, nibble h (-p 7: the other half's), qh bits 16 h + 4 tg .. */
					int oq = t == T_Q8_0 ? 2 + 16 * h : t == T_Q5_0 ? 6 : 2;
					const uint8_t *q0 = b0 + oq + 4 * tg, *q1 = b1 + oq + 4 * tg;
					if (((uintptr_t)q0 & 1) || ((uintptr_t)q1 & 1) || ((uintptr_t)b0 & 1) ||
					    ((uintptr_t)b1 & 1))
						abort();	/* halfword loads */
					a[h][lane][0] = (uint32_t)rd16(q0) | (uint32_t)rd16(q0 + 2) << 16;
					a[h][lane][1] = (uint32_t)rd16(q1) | (uint32_t)rd16(q1 + 2) << 16;
					if (t != T_Q8_0) {
						int hn = perturb == 7 ? h ^ 1 : h;
						uint32_t h0 = t == T_Q5_0 ? ((uint32_t)rd16(b0 + 2) |
						    (uint32_t)rd16(b0 + 4) << 16) >> 4 * tg : 0;
						uint32_t h1 = t == T_Q5_0 ? ((uint32_t)rd16(b1 + 2) |
						    (uint32_t)rd16(b1 + 4) << 16) >> 4 * tg : 0;
						a[h][lane][0] = q45(t, a[h][lane][0], hn, h0 >> 16 * h);
						a[h][lane][1] = q45(t, a[h][lane][1], hn, h1 >> 16 * h);
					}
				}
			} else
				for (int h = 0; h < 2; h++) {
					int e = 2 * p + h;
					uint32_t lo, hi;
					uint32_t c0 = rd32(w0 + 8 * e + 4 * (tg >> 1)), c1 = rd32(w1 + 8 * e + 4 * (tg >> 1));
					fp4sel(c0 >> 16 * (tg & 1), &lo, &hi);
					a[h][lane][0] = lo;
					fp4sel(c1 >> 16 * (tg & 1), &lo, &hi);
					a[h][lane][1] = lo;
					f0[lane][h] = asfu(((uint32_t)w0[256 + e] & 0x7Fu) << 20) * 0x1p119f;
					f1[lane][h] = asfu(((uint32_t)w1[256 + e] & 0x7Fu) << 20) * 0x1p119f;
					n0[lane][h] = f0[lane][h] * -12582912.0f;
					n1[lane][h] = f1[lane][h] * -12582912.0f;
				}
		}
		for (int nt = 0; nt < ntl; nt++)
			for (int h = 0; h < 2; h++) {
				uint32_t b[32];
				int c[32][4];
				for (int lane = 0; lane < 32; lane++) {
					int g = lane >> 2, tg = lane & 3;
					b[lane] = rd32(st + ox(t) + (8 * nt + g) * XS + 32 * p + 4 * tg + 16 * h);
				}
				mma(a[h], b, c);
				for (int lane = 0; lane < 32; lane++) {
					int tg = lane & 3, u = 2 * pi + h;
					const float *ds = (const float *)(st + od(t, mp));
					float d0 = ds[(8 * nt + 2 * tg) * DS + p], d1 = ds[(8 * nt + 2 * tg + 1) * DS + p];
					float *ac = acc[lane][u][nt];
					if (halves(t)) {
						float pr[4] = { f0[lane][0] * d0, f0[lane][0] * d1, f1[lane][0] * d0,
						    f1[lane][0] * d1 };
						for (int e = 0; e < 4; e++)
							ac[e] = fmaf(i2f(c[lane][e]), pr[e], ac[e]);
					} else {
						ac[0] = fmaf(d0, fmaf(asf(c[lane][0]), f0[lane][h], n0[lane][h]), ac[0]);
						ac[1] = fmaf(d1, fmaf(asf(c[lane][1]), f0[lane][h], n0[lane][h]), ac[1]);
						ac[2] = fmaf(d0, fmaf(asf(c[lane][2]), f1[lane][h], n1[lane][h]), ac[2]);
						ac[3] = fmaf(d1, fmaf(asf(c[lane][3]), f1[lane][h], n1[lane][h]), ac[3]);
					}
				}
			}
	}
}

/* mvt_fold / mvt_store's butterfly: v[l] += v[l + o] */
static void fold(float *v, int o)
{
	for (int l = 0; l < o; l++)
		v[l] = v[l] + v[l + o];
}

/* a block's pipeline, steps and mvt_store on the job J (sm: garbage) */
static void run(const struct launch *L, const struct job *J, uint8_t *sm)
{
	int t = L->t, nb = L->nb, nch = (nb + 15) / 16, mp = J->mp;
	static accs acc[8][32];
	int og[8][32][2];
	const uint8_t *W = J->W;
	int64_t rows = J->rows, r0 = J->r0;

	memset(acc, 0, sizeof acc);
	for (int w = 0; w < 8; w++)
		for (int lane = 0; lane < 32; lane++) {
			int g = lane >> 2;
			og[w][lane][0] = og[w][lane][1] = 0;
			if (halves(t) && !L->a16) {
				og[w][lane][0] = (int)((uintptr_t)(W + (size_t)(r0 + g) * L->rb) & 3);
				og[w][lane][1] = (int)((uintptr_t)(W + (size_t)(r0 + g + 8) * L->rb) & 3);
			}
		}
	for (int s = 0; s < NS - 1; s++)
		if (s < nch)
			copy(L, sm + s * stage(t, mp), J, s);
	for (int k = 0; k < nch; k++) {
		if (k + NS - 1 < nch)
			copy(L, sm + (k + NS - 1) % NS * stage(t, mp), J, k + NS - 1);
		for (int w = 0; w < 8; w++)
			step(L, sm + k % NS * stage(t, mp), mp, J->ntl, k, w, og[w],
			    acc[perturb == 3 && (k & 1) ? w ^ 2 : w]);
	}
	/* mvt_store: red[c][row][mp + 1] over the ring, then the butterfly */
	float *red = (float *)sm;
	int ld = mp + 1;
	for (int w = 0; w < 8; w++)
		for (int lane = 0; lane < 32; lane++) {
			int g = lane >> 2, tg = lane & 3;
			for (int u = 0; u < 4; u++)
				for (int nt = 0; nt < mp / 8; nt++)
					for (int e = 0; e < 4; e++) {
						int c = 2 * w + 16 * (u >> 1) + (u & 1);
						if (perturb == 1 && (c == 0 || c == 2))
							c ^= 2;
						red[(c * R + g + 8 * (e >> 1)) * ld + 8 * nt + 2 * tg + (e & 1)] =
						    acc[w][lane][u][nt][e];
					}
		}
	for (int it = 0; it < R * J->m; it++) {
		int rr = it % R, j = it / R;
		float v[32];
		if (r0 + rr >= rows)
			continue;
		for (int c = 0; c < 32; c++)
			v[c] = red[(c * R + rr) * ld + j];
		if (perturb == 2)
			fold(v, 1), fold(v, 2), fold(v, 4), fold(v, 8), fold(v, 16);
		else
			fold(v, 16), fold(v, 8), fold(v, 4), fold(v, 2), fold(v, 1);
		size_t yi = (size_t)(J->slot != NULL ? J->slot[j] : j) * rows + r0 + rr;
		J->y[yi] = J->scale != NULL ? v[0] * *J->scale : v[0];
		if (J->cnt != NULL)
			J->cnt[yi]++;
	}
}

/* one block of k_mv8t: blockIdx bx (mvt_pick, then run) */
static void block(const struct launch *L, unsigned bx, uint8_t *sm, int mp)
{
	int wi = 0;
	struct job J;

	for (int k = 1; k < L->nw; k++)
		if (bx >= L->blk[k])
			wi = k;
	J.W = L->W[wi], J.rows = L->rows[wi], J.r0 = (int64_t)(bx - L->blk[wi]) * R;
	J.X = L->X, J.m = L->m, J.mp = mp, J.ntl = mp / 8;
	J.y = L->y[wi], J.scale = L->scale[wi], J.slot = NULL, J.cnt = NULL;
	run(L, &J, sm);
}

/* the launch: mvt_launch's tiles and a16, then every block (shared memory
 * garbage at the start of each) */
static void mv8t(struct launch *L)
{
	int mp = 8 * ((L->m + 7) / 8);
	size_t sz = (size_t)NS * stage(L->t, mp), red = (size_t)32 * R * (mp + 1) * 4;
	uintptr_t or_ = L->rb;
	uint8_t *sm = aligned_alloc(16, (sz > red ? sz : red) + 16);

	L->blk[0] = 0;
	for (int i = 0; i < L->nw; i++) {
		or_ |= (uintptr_t)L->W[i];
		L->blk[i + 1] = L->blk[i] + (unsigned)((L->rows[i] + R - 1) / R);
	}
	if (or_ & amask(L->t)) {
		fprintf(stderr, "mv8t: rows less aligned than the kernel takes\n");
		abort();
	}
	L->a16 = (or_ & 15) == 0;
	for (unsigned bx = 0; bx < L->blk[L->nw]; bx++) {
		for (size_t i = 0; i < (sz > red ? sz : red); i++)
			sm[i] = (uint8_t)rnd();
		block(L, bx, sm, mp);
	}
	free(sm);
}

/* --- checks ------------------------------------------------------------- */

/* rows x ne0 random weights of type t (Q8_0, Q4_0, Q5_0 from quantized
 * floats, some blocks all zero, Q4_0's and Q5_0's every third row random
 * bytes with finite scales; NVFP4 random GPU-layout bytes with canonical
 * scales, some zero) at offset off from a 16-byte aligned buffer */
static uint8_t *weights(int t, int64_t rows, int ne0, int off, uint8_t **base)
{
	size_t rb = rowb(t, ne0);
	uint8_t *b = aligned_alloc(16, rb * rows + 64), *w = b + off;
	float *x = malloc(sizeof(float) * ne0);

	for (size_t i = 0; i < rb * rows + 64; i++)
		b[i] = (uint8_t)rnd();
	for (int64_t r = 0; r < rows; r++)
		if (halves(t) && t != T_Q8_0 && r % 3 == 2) {
			for (int b = 0; b < ne0 / 32; b++)	/* random bytes, finite fp16 d */
				w[r * rb + (size_t)b * bsz(t) + 1] &= 0x3B;
		} else if (halves(t)) {
			for (int i = 0; i < ne0; i++)
				x[i] = unif(-1, 1) * (i % 97 == 0 ? 8.0f : 1.0f) * (i / 32 % 11 == 3 ? 0.0f : 1.0f);
			if (quant_quantize_row(t, x, w + r * rb, ne0, NULL) != 0)
				abort();
		} else {
			int nsub = ne0 / 16;
			for (int s = 0; s < nsub; s++) {
				unsigned c = (unsigned)(rnd() % 0x7F);
				w[r * rb + 8 * (size_t)nsub + s] = (uint8_t)(rnd() % 9 == 0 ? 0 : c);
			}
		}
	free(x);
	*base = b;
	return w;
}

/* m input rows of ne0 quantized as k_q8x does (quant_quantize_act's Q8_0);
 * row 1 small, row 2 with zero blocks */
static void inputs(int ne0, int m, struct xin *X)
{
	int nb = ne0 / 32;
	float *x = malloc(sizeof(float) * ne0);
	uint8_t *xq = malloc((size_t)nb * 34);

	X->nb = nb;
	X->q = aligned_alloc(16, (size_t)m * ne0);
	X->dx = malloc(sizeof(float) * m * nb);
	for (int j = 0; j < m; j++) {
		for (int i = 0; i < ne0; i++)
			x[i] = unif(-1, 1) * (j == 1 ? 1e-3f : 1.0f) * (j == 2 && i / 32 % 5 == 1 ? 0.0f : 1.0f);
		if (quant_quantize_act(QUANT_Q8_0, x, xq, ne0) != 0)
			abort();
		for (int b = 0; b < nb; b++) {
			X->dx[j * nb + b] = h2f(rd16(xq + 34 * b));
			memcpy(X->q + (size_t)j * ne0 + 32 * b, xq + 34 * b + 2, 32);
		}
	}
	free(x), free(xq);
}

/*
 * A set of nw weights of type t (rows[i] x ne0, at offset off) against m
 * input rows: k_mv8t's outputs against mv8_ref's, bit for bit.
 */
static void check_set(int t, int nw, const int64_t *rows, int ne0, int off, int m,
    const float *scale, const struct xin *X)
{
	struct launch L;
	uint8_t *base[4];
	long bad = 0;

	memset(&L, 0, sizeof L);
	L.t = t, L.nb = ne0 / 32, L.m = m, L.nw = nw, L.X = X;
	L.rb = rowb(t, ne0);
	for (int i = 0; i < nw; i++) {
		L.W[i] = weights(t, rows[i], ne0, off, &base[i]);
		L.rows[i] = rows[i];
		L.y[i] = malloc(sizeof(float) * m * rows[i]);
		L.scale[i] = i == 1 ? scale : NULL;
	}
	mv8t(&L);
	for (int i = 0; i < nw; i++) {
		for (int64_t r = 0; r < rows[i]; r++) {
			float y[MAXM];
			mv8_ref(t, L.W[i] + r * L.rb, X, m, L.scale[i], y);
			for (int j = 0; j < m; j++) {
				float got = L.y[i][(size_t)j * rows[i] + r];
				nchk++;
				if (memcmp(&got, &y[j], 4) != 0) {
					if (bad < 3)
						printf("FAIL %s %lldx%d off %d m=%d weight %d row %lld input %d: "
						    "%.9g != %.9g\n", quant_name(t),
						    (long long)rows[i], ne0, off, m, i, (long long)r, j, got, y[j]);
					bad++;
				}
			}
		}
		free(L.y[i]), free(base[i]);
	}
	nfail += bad;
}

/* ws * (float)S (k_mv8) against fma(MAGIC + S as a float, ws, -12582912 ws)
 * for every canonical scale byte and every |S| <= 16 * 12 * 127; ws = 0
 * with S < 0 gives +0 for -0, which acc = fma(dx, ., acc) cannot show (acc
 * is never -0: it starts at +0), checked as such */
static void exhaustive(void)
{
	long n = 0, bad = 0;

	for (uint32_t b = 0; b < 128; b++) {
		float ws = asfu(b << 20) * 0x1p119f, nws = ws * -12582912.0f;
		for (int s = -24384; s <= 24384; s++) {
			float want = ws * (float)s, got = fmaf(asf(MAGIC + s), ws, nws);
			n++;
			if (memcmp(&want, &got, 4) != 0) {
				float acc = 0.0f, d = unif(0, 1);
				float a = fmaf(d, want, acc), c = fmaf(d, got, acc);
				if (!(want == 0.0f && got == 0.0f && memcmp(&a, &c, 4) == 0))
					bad++;
			}
		}
	}
	printf("exhaustive: %ld NVFP4 scale x dot products, %ld differ\n", n, bad);
	nchk += n, nfail += bad;
}

/* --- k_moe_mv8t beside k_moe_mv8g over moe_group_build's tiles ---------- */

enum { MT = 16 };	/* GPU_MOE_MT */

/* moe_group_build's output (k_moe_group, in its order): perm[ns + MT], the
 * slots by bucket (ids[s], or n_exp for an id outside [0, n_exp)), slot
 * order within one, then MT zeros; tile[nt] (bucket, first, count, index in
 * the bucket) in bucket order, MT slots a tile but a bucket's last, then
 * (0, 0, 0, 0) up to moe_group_tiles' nt */
struct grp {
	int32_t	*perm;
	int	(*tile)[4];
	int	nt;
};

static void group_build(const int32_t *ids, int ns, int n_exp, struct grp *G)
{
	int nbk = n_exp + 1, *cnt = calloc((size_t)nbk, sizeof(int));
	int *cur = malloc(sizeof(int) * nbk);
	int64_t nt = ((int64_t)ns + MT - 1) / MT + n_exp + 1;
	int off = 0, toff = 0;

	G->nt = (int)(nt < ns ? nt : ns);
	G->perm = calloc((size_t)ns + MT, 4);
	G->tile = calloc((size_t)G->nt, sizeof *G->tile);
	for (int s = 0; s < ns; s++)
		cnt[ids[s] >= 0 && ids[s] < n_exp ? ids[s] : n_exp]++;
	for (int b = 0; b < nbk; b++) {
		for (int f = 0; f < cnt[b]; f += MT) {
			if (toff >= G->nt)
				abort();
			G->tile[toff][0] = b, G->tile[toff][1] = off + f;
			G->tile[toff][2] = cnt[b] - f < MT ? cnt[b] - f : MT, G->tile[toff][3] = f / MT;
			toff++;
		}
		cur[b] = off;
		off += cnt[b];
	}
	for (int s = 0; s < ns; s++)
		G->perm[cur[ids[s] >= 0 && ids[s] < n_exp ? ids[s] : n_exp]++] = s;
	free(cnt), free(cur);
}

/* one grouped call's operands: a stack of n_exp experts of rows rows at
 * W (ebytes apart), ns slots over input rows X (per a row), routed by ids */
struct moe {
	int	t, ne0, n_exp, ns, per, off;
	int64_t	rows;
	size_t	rb;
	const uint8_t *W;
	const int32_t *ids;
	const struct xin *X;
	const float *scale;
};

/* k_moe_mv8t's blocks (x: weight rows 16 x, y: tile ty) with bound tc */
static void moe_tc(const struct moe *M, const struct grp *G, const struct xin *XG, int tc,
    float *y, int *cnt)
{
	struct launch L;
	int nb = M->ne0 / 32, nch = (nb + 15) / 16;
	size_t st = (size_t)(nch < NS ? nch : NS) * stage(M->t, 32), red = (size_t)32 * R * 33 * 4;
	size_t sz = st > red ? st : red;	/* mvt_moe_smem */
	uint8_t *sm = aligned_alloc(16, sz + 16);

	memset(&L, 0, sizeof L);
	L.t = M->t, L.nb = nb, L.rb = M->rb, L.a16 = (((uintptr_t)M->W | M->rb) & 15) == 0;
	for (int ty = 0; ty < G->nt; ty++)
		for (int64_t bx = 0; bx < (M->rows + R - 1) / R; bx++) {
			const int *tl = G->tile[ty];
			int e = tl[0], f = tl[1], n = tl[2];
			if (n == 0 || (tl[3] & 1) || n < tc)
				continue;
			if (n == MT && ty + 1 < G->nt) {
				const int *t2 = G->tile[ty + 1];
				if (t2[2] > 0 && (t2[0] == e || perturb == 4))
					n += t2[2];
			}
			const int32_t *slot = G->perm + f;
			if (e < 0 || e >= M->n_exp) {
				for (int it = 0; it < R * n; it++)
					if (bx * R + it % R < M->rows) {
						size_t yi = (size_t)slot[it / R] * M->rows + bx * R + it % R;
						uint32_t nan = 0x7FC00000u;
						memcpy(&y[yi], &nan, 4);
						cnt[yi]++;
					}
				continue;
			}
			struct xin Xf = { XG->q + (size_t)f * nb * 32, XG->dx + (size_t)f * nb, nb };
			struct job J = { M->W + (size_t)e * M->rows * M->rb, M->rows, bx * R, &Xf, n, 32,
			    perturb == 5 ? n / 8 : (n + 7) / 8, y, M->scale, slot, cnt };
			for (size_t i = 0; i < sz; i++)
				sm[i] = (uint8_t)rnd();
			run(&L, &J, sm);
		}
	free(sm);
}

/* k_moe_mv8g's tiles (tc > 0: those k_moe_mv8t leaves), each weight row by
 * k_mv8's lanes at the tile's rows (mv8_grows at M >= n: the same
 * operations as mv8_ref at n, NVFP4's decode by mv8_fp4pn iff n <= 2) */
static void moe_cc(const struct moe *M, const struct grp *G, const struct xin *XG, int tc,
    float *y, int *cnt)
{
	int nb = M->ne0 / 32;

	for (int ty = 0; ty < G->nt; ty++) {
		const int *tl = G->tile[ty];
		int e = tl[0], f = tl[1], n = tl[2];
		if (tc > 0 && ((perturb != 6 && (tl[3] & 1)) || n >= tc))
			continue;
		for (int64_t r = 0; r < M->rows; r++) {
			float v[MT];
			if (n == 0)
				break;
			if (e < 0 || e >= M->n_exp) {
				uint32_t nan = 0x7FC00000u;
				for (int j = 0; j < n; j++)
					memcpy(&v[j], &nan, 4);
			} else {
				struct xin Xf = { XG->q + (size_t)f * nb * 32, XG->dx + (size_t)f * nb, nb };
				mv8_ref(M->t, M->W + ((size_t)e * M->rows + r) * M->rb, &Xf, n, M->scale, v);
			}
			for (int j = 0; j < n; j++) {
				size_t yi = (size_t)G->perm[f + j] * M->rows + r;
				y[yi] = v[j], cnt[yi]++;
			}
		}
	}
}

/*
 * The grouped products of the call M under each of GPU_MOE_TC_OFF (tc 0),
 * _ALL (1) and _AUTO (MVT_MOE_N, 9) against k_moe_mv8's (k_mv8's at one
 * row: slot s alone with its expert; NaN rows for an ill id), bit for bit,
 * every output written once.
 */
static void check_moe(const struct moe *M, const char *what)
{
	static const int tcs[] = { 0, 1, 9 };
	int ns = M->ns, nb = M->ne0 / 32;
	size_t ny = (size_t)ns * M->rows;
	float *ref = malloc(ny * 4), *y = malloc(ny * 4);
	int *cnt = malloc(ny * sizeof(int));
	struct grp G;
	struct xin XG;

	for (int s = 0; s < ns; s++)	/* k_moe_mv8 */
		for (int64_t r = 0; r < M->rows; r++) {
			int e = M->ids[s];
			struct xin Xs = { M->X->q + (size_t)(s / M->per) * M->ne0,
			    M->X->dx + (size_t)(s / M->per) * nb, nb };
			uint32_t nan = 0x7FC00000u;
			if (e < 0 || e >= M->n_exp)
				memcpy(&ref[(size_t)s * M->rows + r], &nan, 4);
			else
				mv8_ref(M->t, M->W + ((size_t)e * M->rows + r) * M->rb, &Xs, 1, M->scale,
				    &ref[(size_t)s * M->rows + r]);
		}
	group_build(M->ids, ns, M->n_exp, &G);
	XG.nb = nb;	/* moe_gather: row i = input row perm[i] / per, i < ns + MT */
	XG.q = aligned_alloc(16, ((size_t)ns + MT) * M->ne0);
	XG.dx = malloc(sizeof(float) * ((size_t)ns + MT) * nb);
	for (int i = 0; i < ns + MT; i++) {
		memcpy(XG.q + (size_t)i * M->ne0, M->X->q + (size_t)(G.perm[i] / M->per) * M->ne0,
		    (size_t)M->ne0);
		memcpy(XG.dx + (size_t)i * nb, M->X->dx + (size_t)(G.perm[i] / M->per) * nb,
		    sizeof(float) * nb);
	}
	for (size_t k = 0; k < sizeof tcs / sizeof tcs[0]; k++) {
		long bad = 0, nw = 0;
		memset(y, 0xFF, ny * 4);	/* no row left from before */
		memset(cnt, 0, ny * sizeof(int));
		if (tcs[k] > 0)
			moe_tc(M, &G, &XG, tcs[k], y, cnt);
		if (tcs[k] != 1)
			moe_cc(M, &G, &XG, tcs[k], y, cnt);
		for (size_t i = 0; i < ny; i++) {
			nchk++;
			if (memcmp(&y[i], &ref[i], 4) != 0 || cnt[i] != 1) {
				if (bad < 3)
					printf("FAIL %s tc=%d: slot %zu row %zu: %.9g != %.9g (%d writes)\n",
					    what, tcs[k], i / M->rows, i % M->rows, y[i], ref[i], cnt[i]);
				bad++;
			}
			nw += cnt[i];
		}
		printf("%s tc=%d: %zu outputs, %ld writes: %s\n", what, tcs[k], ny, nw,
		    bad ? "DIFFER" : "same bits");
		nfail += bad;
	}
	free(G.perm), free(G.tile), free(XG.q), free(XG.dx), free(ref), free(y), free(cnt);
}

/* ids of the skewed routing: experts 0..8 with 0, 1, 5, 17, 32, 40, 16, 9
 * and 8 slots, 18 ill ids (-1, n_exp, INT32_MIN, INT32_MAX: 2 tiles of NaN
 * rows), shuffled; ns = 146 */
static int32_t *skewed(int *ns, int *n_exp)
{
	static const int cnt[] = { 0, 1, 5, 17, 32, 40, 16, 9, 8 };
	const int32_t bad[] = { -1, 9, INT32_MIN, INT32_MAX };
	int n = 0;
	int32_t *ids = malloc(sizeof(int32_t) * 146);

	for (int e = 0; e < 9; e++)
		for (int i = 0; i < cnt[e]; i++)
			ids[n++] = e;
	for (int i = 0; i < 18; i++)
		ids[n++] = bad[i % 4];
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(rnd() % (uint64_t)(i + 1));
		int32_t v = ids[i];
		ids[i] = ids[j], ids[j] = v;
	}
	*ns = n, *n_exp = 9;
	return ids;
}

/* the grouped calls: Q8_0, NVFP4, Q4_0 and Q5_0 stacks of the skewed
 * routing (2 slots a row) at rows of one chunk and a tail, of whole chunks
 * past the ring, of fewer than 16 weight rows; 16-byte aligned and not
 * (Q8_0, Q4_0, Q5_0 rows 2 mod 4 bytes; Q4_0's and Q5_0's of 704, the
 * 26B-A4B's down experts); scaled and not; then 256 experts at random (8
 * a row, 256 rows) */
static void moe_checks(void)
{
	static const int sh[][4] = {	/* type, rows, ne0, offset */
		{ T_Q8_0, 37, 800, 0 }, { T_Q8_0, 37, 800, 2 }, { T_Q8_0, 20, 4096, 0 },
		{ T_Q8_0, 8, 544, 2 }, { T_NVFP4, 37, 768, 0 }, { T_NVFP4, 37, 768, 4 },
		{ T_NVFP4, 20, 2112, 0 }, { T_NVFP4, 8, 448, 4 }, { T_Q4_0, 37, 704, 0 },
		{ T_Q4_0, 20, 800, 2 }, { T_Q5_0, 37, 704, 0 }, { T_Q5_0, 20, 4128, 2 },
	};
	static const int rt[][2] = {	/* type, ne0 of the random routing */
		{ T_Q8_0, 288 }, { T_NVFP4, 256 }, { T_Q4_0, 704 }, { T_Q5_0, 288 },
	};
	float scale = 0.3779f;
	int ns, n_exp;
	int32_t *ids = skewed(&ns, &n_exp);

	for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
		struct moe M;
		struct xin X;
		uint8_t *base;
		char what[96];
		M.t = sh[i][0], M.rows = sh[i][1], M.ne0 = sh[i][2];
		M.off = sh[i][3], M.n_exp = n_exp, M.ns = ns, M.per = 2, M.ids = ids;
		M.rb = rowb(M.t, M.ne0);
		M.scale = i % 2 ? &scale : NULL;
		M.W = weights(M.t, (int64_t)n_exp * M.rows, M.ne0, M.off, &base);
		inputs(M.ne0, ns / M.per, &X);
		M.X = &X;
		snprintf(what, sizeof what, "moe %s %d x %lldx%d off %d%s skewed", quant_name(M.t),
		    n_exp, (long long)M.rows, M.ne0, M.off, M.scale ? " *s" : "");
		check_moe(&M, what);
		free(base), free(X.q), free(X.dx);
	}
	free(ids);
	for (size_t ti = 0; ti < sizeof rt / sizeof rt[0]; ti++) {
		/* the 35B-A3B's routing (256 experts, 8 a row), small rows */
		struct moe M;
		struct xin X;
		uint8_t *base;
		char what[96];
		int32_t *rids = malloc(sizeof(int32_t) * 2048);
		for (int s = 0; s < 2048; s++)
			rids[s] = (int32_t)(rnd() % 256);
		M.t = rt[ti][0], M.rows = 16, M.ne0 = rt[ti][1], M.off = 0;
		M.n_exp = 256, M.ns = 2048, M.per = 8, M.ids = rids, M.scale = NULL;
		M.rb = rowb(M.t, M.ne0);
		M.W = weights(M.t, (int64_t)256 * M.rows, M.ne0, 0, &base);
		inputs(M.ne0, 256, &X);
		M.X = &X;
		snprintf(what, sizeof what, "moe %s 256 x 16x%d random 2048/8", quant_name(M.t),
		    M.ne0);
		check_moe(&M, what);
		free(base), free(X.q), free(X.dx), free(rids);
	}
}

int main(int argc, char **argv)
{
	static const int ms_big[] = { 1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32 };
	/* Q8_0, Q4_0, Q5_0: 128 blocks (whole chunks), 25 (odd: rows 2 mod 4),
	 * 10, 129 (a tail chunk of one block); NVFP4: 4096, 768 (a half chunk),
	 * 320, 448 */
	static const int tys[] = { T_Q8_0, T_NVFP4, T_Q4_0, T_Q5_0 };
	static const int q8[][2] = { { 300, 4096 }, { 257, 800 }, { 45, 320 }, { 20, 4128 } };
	static const int nv4[][2] = { { 300, 4096 }, { 257, 768 }, { 45, 320 }, { 70, 448 } };
	static const int offq[] = { 0, 2, 4 }, offn[] = { 0, 4, 8 };
	float scale = 0.3779f;
	struct xin X;

	if (argc == 3 && strcmp(argv[1], "-p") == 0 && (perturb = atoi(argv[2])) >= 1 &&
	    perturb <= 7)
		;
	else if (argc != 1) {
		fprintf(stderr, "usage: %s [-p 1|2|3|4|5|6|7]\n", argv[0]);
		return 2;
	}
	if (perturb == 0)
		exhaustive();
	moe_checks();
	for (size_t ti = 0; ti < sizeof tys / sizeof tys[0]; ti++) {
		int t = tys[ti], nv = t == T_NVFP4;
		const int *off = nv ? offn : offq;
		for (int si = 0; si < 4; si++) {
			int64_t rows = nv ? nv4[si][0] : q8[si][0];
			int ne0 = nv ? nv4[si][1] : q8[si][1];
			long f0 = nfail;
			inputs(ne0, MAXM, &X);
			for (int oi = 0; oi < 3; oi++)
				for (int m = 1; m <= MAXM; m++) {
					int big = 1;
					if (si == 0) {
						big = 0;
						for (size_t i = 0; i < sizeof ms_big / sizeof ms_big[0]; i++)
							big |= ms_big[i] == m;
					}
					if (!big || (perturb && m != 9))
						continue;
					check_set(t, 1, &rows, ne0, off[oi], m, NULL, &X);
				}
			printf("%s %lldx%d: m = 1..32, offsets %d %d %d: %s\n", quant_name(t),
			    (long long)rows, ne0, off[0], off[1], off[2],
			    nfail == f0 ? "same bits" : "DIFFER");
			free(X.q), free(X.dx);
		}
		/* a set of three weights (one launch), the second scaled */
		static const int64_t set[3] = { 45, 17, 33 };
		inputs(nv ? 768 : 800, MAXM, &X);
		for (int m = 1; m <= MAXM; m += 7) {
			long f0 = nfail;
			check_set(t, 3, set, nv ? 768 : 800, nv ? 4 : 2, m, &scale, &X);
			printf("%s set of 3 (45, 17, 33 rows), one scaled, m=%d: %s\n", quant_name(t),
			    m, nfail == f0 ? "same bits" : "DIFFER");
		}
		free(X.q), free(X.dx);
	}
	printf("%ld checks, %ld failed%s\n", nchk, nfail, perturb ? " (perturbed model)" : "");
	return nfail != 0;
}
