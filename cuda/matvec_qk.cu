/*
 * matvec_qk: the decode product of K-quant weights (Q4_K, Q5_K, Q6_K) on
 * int8 activations, as the CPU backend computes it (lib/quant_dot.c vd_k):
 * x quantized once per call to Q8_K blocks of 256 exactly as lib/quant's
 * quant_quantize_act does (q_q8_k: the first value of largest magnitude
 * max, iscale = -127 / max, q = min(127, round-half-even(iscale * x)),
 * d = 1 / iscale, bsums = sums of 16 quants), then for each super-block
 * the CPU's two integer terms
 *   isum = sum over sub-blocks s of sc[s] * (w_s . q_s)   (dp4a)
 *   msum = sum over 16-value groups k of m[k / 2] * bsums[k]   (Q4_K, Q5_K)
 * split over the lanes that share the block, each lane's part taking the
 * block's float term d*dy*isum - dmin*dy*msum in the CPU's operation
 * order (each product rounded once, no fused multiply-add).  Those terms
 * are summed per row in a fixed order that does not depend on m: equal to
 * quant_vec_dot up to the order of float sums, and batch-invariant bit for
 * bit (m = 1..GPU_MATVEC_MAX_ROWS).
 *
 * Layout of the quantized x on the device (the scratch of matvec_q8.cu):
 * q[n][ne0] int8, dk[n][ne0/256] float, bs[n][ne0/16] int16.
 *
 * Kernel: one warp per weight row, split into groups of L lanes (L = 4 or
 * 8: gpu_qk_lanes, gpu_tune_qk); group g of the 32 / L takes
 * super-blocks g, g + 32/L, ... of the row, two at a time, both loaded
 * before either is used.  The L lanes split a block: Q4_K/Q5_K lane i
 * reads the quant bytes 16i..16i+15 (and 16i+64..16i+79 when L = 4) with
 * 16-byte loads, so each load of a group reads 16 L contiguous bytes,
 * plus the 16-byte header (d, dmin, scales) every lane of the group loads
 * alike; Q6_K lane i reads 8 or 16 values' worth of ql
 * (two pieces) and qh from 4-byte words (its blocks of 210 bytes are only
 * 2-byte aligned).  Each lane adds the float term of its own integer
 * parts to its sum (no shuffle a block); at the end the lanes' sums are
 * added by a butterfly over the warp.  The two kernels give different
 * last bits; each is batch-invariant.
 */
#include "gpu_impl.cuh"

#include <cuda_fp16.h>

enum { QK_T_Q4_K = 12, QK_T_Q5_K = 13, QK_T_Q6_K = 14, QK_T_IQ4_XS = 23 };

/* Bytes of one super-block of type T. */
template <int T>
struct mvk_bs {
	enum { v = T == QK_T_Q4_K ? 144 : T == QK_T_Q5_K ? 176 : T == QK_T_IQ4_XS ? 136 : 210 };
};

/*
 * The pieces of a super-block lane i of an L-lane group covers (P = 8 / L
 * of them, p = 0..P-1), as (c, h) for Q4_K/Q5_K (quant bytes 32 c + 16 h
 * .. + 15 = 16 i + 64 p: values 16 h .. 16 h + 15 of sub-blocks 2c and
 * 2c + 1; a group's load p reads 16 L contiguous bytes) and as (n, sub)
 * for Q6_K (values 128 n + 32 t + 8 sub .. + 7, t = 0..3).
 */
__device__ __forceinline__ int
pc_c(int i, int p)
{
	return (i >> 1) + 2 * p;
}

__device__ __forceinline__ int
pc_h(int i)
{
	return i & 1;
}

template <int L>
__device__ __forceinline__ int
p6_n(int i)
{
	return L == 8 ? i >> 2 : i >> 1;
}

template <int L>
__device__ __forceinline__ int
p6_sub(int i, int p)
{
	return L == 8 ? i & 3 : 2 * (i & 1) + p;
}

/* The raw words of one super-block a lane needs (all loaded before use,
 * so a group's two blocks are in flight together). */
template <int L>
struct mvk_w {
	enum { P = 8 / L };
	int4	h;		/* Q4_K/Q5_K: d, dmin, scales[12] */
	int4	qs[P];		/* Q4_K/Q5_K: quant bytes of piece p */
	int4	qh[P];		/* Q5_K: high bits of positions 16 h .. 16 h + 15 */
	uint32_t a[P][2], b[P][2], c[P][2];	/* Q6_K: ql, ql + 32, qh of piece p */
	uint32_t s[2];		/* Q6_K: scales 8 n .. 8 n + 7 */
	unsigned short d;	/* Q6_K: d */
};

/* 8 bytes at a 2-byte aligned p, from aligned 4-byte words. */
__device__ __forceinline__ void
ld8(const uint8_t *p, uint32_t *o)
{
	const uint32_t *w = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
	unsigned sh = ((uintptr_t)p & 2) * 8;
	uint32_t w0 = __ldg(w), w1 = __ldg(w + 1), w2 = sh ? __ldg(w + 2) : 0;

	o[0] = __funnelshift_r(w0, w1, sh);
	o[1] = sh ? __funnelshift_r(w1, w2, sh) : w1;
}

template <int T, int L>
__device__ __forceinline__ void
mvk_load(const uint8_t *blk, int i, struct mvk_w<L> *w)
{
#pragma unroll
	for (int p = 0; p < 8 / L; p++) {
		if (T == QK_T_Q6_K) {
			int n = p6_n<L>(i), sub = p6_sub<L>(i, p);
			ld8(blk + 64 * n + 8 * sub, w->a[p]);
			ld8(blk + 64 * n + 32 + 8 * sub, w->b[p]);
			ld8(blk + 128 + 32 * n + 8 * sub, w->c[p]);
		} else {
			int c = pc_c(i, p), h = pc_h(i);
			w->qs[p] = __ldg((const int4 *)(blk + (T == QK_T_Q5_K ? 48 : 16) + 32 * c + 16 * h));
			if (T == QK_T_Q5_K)
				w->qh[p] = __ldg((const int4 *)(blk + 16 + 16 * h));
		}
	}
	if (T == QK_T_Q6_K) {
		ld8(blk + 192 + 8 * p6_n<L>(i), w->s);
		w->d = __ldg((const unsigned short *)(blk + 208));
	} else
		w->h = __ldg((const int4 *)blk);
}

/* Four 6-bit values u (bytes 0..63) less 32 each, as int8: u + 96 stays
 * below 256 (no carry into the next byte) and is 128 + (u - 32); flipping
 * bit 7 leaves u - 32 in two's complement.  Two instructions (__vsub4:
 * three). */
__device__ __forceinline__ int
q6_sub32(uint32_t u)
{
	return (int)((u + 0x60606060u) ^ 0x80808080u);
}

/* Q6_K: the 32 values (as 0..63 - 32) of piece p, t = 0..3 by 2 words. */
template <int L>
__device__ __forceinline__ void
q6_vals(const struct mvk_w<L> *w, int p, int v[4][2])
{
#pragma unroll
	for (int k = 0; k < 2; k++) {
		uint32_t a = w->a[p][k], bq = w->b[p][k], h = w->c[p][k];
		v[0][k] = q6_sub32((a & 0x0F0F0F0Fu) | (h & 0x03030303u) << 4);
		v[1][k] = q6_sub32((bq & 0x0F0F0F0Fu) | (h >> 2 & 0x03030303u) << 4);
		v[2][k] = q6_sub32((a >> 4 & 0x0F0F0F0Fu) | (h >> 4 & 0x03030303u) << 4);
		v[3][k] = q6_sub32((bq >> 4 & 0x0F0F0F0Fu) | (h >> 6 & 0x03030303u) << 4);
	}
}

/*
 * acc[j] += the float term of lane i's part of super-block b (words w)
 * against input row j; on = 0 (a block past the row's end) adds nothing.
 */
template <int T, int M, int L>
__device__ __forceinline__ void
mvk_block(const struct mvk_w<L> *w, int on, int64_t b, int i, int64_t ne0,
    const int8_t *__restrict__ q, const float *__restrict__ dk,
    const int16_t *__restrict__ bs, int m, float *acc)
{
	enum { P = 8 / L };

	if (T == QK_T_Q6_K) {
		/* scales 8n + (sub >> 1) + 2t: bytes (sub >> 1) + 2t of the 8 at 192 + 8n
		 * (sub >> 1 is the same for every piece of a lane) */
		int hs = 8 * (p6_sub<L>(i, 0) >> 1), sc[4], v[P][4][2];
		sc[0] = (int)(int8_t)(w->s[0] >> hs);
		sc[1] = (int)(int8_t)(w->s[0] >> (hs + 16));
		sc[2] = (int)(int8_t)(w->s[1] >> hs);
		sc[3] = (int)(int8_t)(w->s[1] >> (hs + 16));
#pragma unroll
		for (int p = 0; p < P; p++)
			q6_vals<L>(w, p, v[p]);
		float d = __half2float(__ushort_as_half(w->d));
#pragma unroll
		for (int j = 0; j < M; j++) {
			if (j >= m)
				break;
			int is = 0;
#pragma unroll
			for (int p = 0; p < P; p++) {
				const int8_t *xq = q + (size_t)j * ne0 + b * 256 + 128 * p6_n<L>(i) +
				    8 * p6_sub<L>(i, p);
#pragma unroll
				for (int t = 0; t < 4; t++) {
					int2 y = on ? *(const int2 *)(xq + 32 * t) : make_int2(0, 0);
					is += sc[t] * __dp4a(v[p][t][1], y.y, __dp4a(v[p][t][0], y.x, 0));
				}
			}
			if (on) {
				float dy = dk[(size_t)j * (ne0 / 256) + b];
				acc[j] = __fadd_rn(acc[j], __fmul_rn(__fmul_rn(d, dy), (float)is));
			}
		}
	} else {
		uint32_t u0 = (uint32_t)w->h.y, u1 = (uint32_t)w->h.z, u2 = (uint32_t)w->h.w;
		int h = pc_h(i), sc0[P], sc1[P], m0[P], m1[P], lo[P][4], hi[P][4];
#pragma unroll
		for (int p = 0; p < P; p++) {
			/* get_scale_min_k4 of sub-blocks 2c, 2c + 1 (lib/quant_impl.h
			 * qi_scale_min_k4_all) */
			int c = pc_c(i, p), sh = 16 * (c & 1);
			uint32_t vs = c < 2 ? u0 & 0x3F3F3F3Fu :
			    (u2 & 0x0F0F0F0Fu) | (u0 >> 6 & 0x03030303u) << 4;
			uint32_t vm = c < 2 ? u1 & 0x3F3F3F3Fu :
			    (u2 >> 4 & 0x0F0F0F0Fu) | (u1 >> 6 & 0x03030303u) << 4;
			sc0[p] = (int)(vs >> sh & 0xFF), sc1[p] = (int)(vs >> (sh + 8) & 0xFF);
			m0[p] = (int)(vm >> sh & 0xFF), m1[p] = (int)(vm >> (sh + 8) & 0xFF);
			uint32_t qw[4] = { (uint32_t)w->qs[p].x, (uint32_t)w->qs[p].y,
			    (uint32_t)w->qs[p].z, (uint32_t)w->qs[p].w };
			uint32_t hw[4] = { (uint32_t)w->qh[p].x, (uint32_t)w->qh[p].y,
			    (uint32_t)w->qh[p].z, (uint32_t)w->qh[p].w };
#pragma unroll
			for (int k = 0; k < 4; k++) {
				uint32_t l = qw[k] & 0x0F0F0F0Fu, u = qw[k] >> 4 & 0x0F0F0F0Fu;
				if (T == QK_T_Q5_K) {
					l |= (hw[k] >> (2 * c) & 0x01010101u) << 4;
					u |= (hw[k] >> (2 * c + 1) & 0x01010101u) << 4;
				}
				lo[p][k] = (int)l, hi[p][k] = (int)u;
			}
		}
		uint32_t dm = (uint32_t)w->h.x;
		float d = __half2float(__ushort_as_half((unsigned short)(dm & 0xFFFF)));
		float dmin = __half2float(__ushort_as_half((unsigned short)(dm >> 16)));
#pragma unroll
		for (int j = 0; j < M; j++) {
			if (j >= m)
				break;
			int is = 0, ms = 0;
			const int16_t *bj = bs + (size_t)j * (ne0 / 16) + b * 16 + h;
#pragma unroll
			for (int p = 0; p < P; p++) {
				int c = pc_c(i, p);
				const int8_t *xq = q + (size_t)j * ne0 + b * 256 + 64 * c + 16 * h;
				int4 ya = on ? *(const int4 *)xq : make_int4(0, 0, 0, 0);
				int4 yb = on ? *(const int4 *)(xq + 32) : make_int4(0, 0, 0, 0);
				int sa = __dp4a(lo[p][0], ya.x, 0), sb = __dp4a(hi[p][0], yb.x, 0);
				sa = __dp4a(lo[p][1], ya.y, sa), sb = __dp4a(hi[p][1], yb.y, sb);
				sa = __dp4a(lo[p][2], ya.z, sa), sb = __dp4a(hi[p][2], yb.z, sb);
				sa = __dp4a(lo[p][3], ya.w, sa), sb = __dp4a(hi[p][3], yb.w, sb);
				is += sa * sc0[p] + sb * sc1[p];
				if (on)
					ms += m0[p] * (int)bj[4 * c] + m1[p] * (int)bj[4 * c + 2];
			}
			if (on) {
				float dy = dk[(size_t)j * (ne0 / 256) + b];
				acc[j] = __fadd_rn(acc[j], __fsub_rn(__fmul_rn(__fmul_rn(d, dy), (float)is),
				    __fmul_rn(__fmul_rn(dmin, dy), (float)ms)));
			}
		}
	}
}

/*
 * One warp per weight row (the file comment), NG = 32 / L groups; group g
 * takes blocks g, g + NG, ..., two at a time (both loaded first), adding
 * them in block order; the lanes' sums are added by a butterfly over the
 * warp (xor 1, 2, 4, 8, 16).  mvk_row: k_mvk's loop as a function, each
 * lane's part of the sums of the weight row at wr with the m (<= M)
 * quantized input rows into acc[], for the experts' k_moe_mvk: the same
 * operations in the same order as k_mvk's (which keeps its own copy: its
 * code as it was measured), so an expert's one-row product is k_mvk<T, 1,
 * L>'s bit for bit (kernel-check's "be moe_* =1row").
 */
template <int T, int M, int L>
__device__ __forceinline__ void
mvk_row(const uint8_t *__restrict__ wr, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, int m, int lane, float *acc)
{
	enum { BS = mvk_bs<T>::v, NG = 32 / L };
	int g = lane / L, i = lane % L;
	int64_t ne0 = (int64_t)nb * 256;

#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	for (int b0 = 0; b0 < nb; b0 += 2 * NG) {
		struct mvk_w<L> w0, w1;
		int b = b0 + g, on0 = b < nb, on1 = b + NG < nb;
		if (on0)
			mvk_load<T, L>(wr + (size_t)b * BS, i, &w0);
		else
			w0 = mvk_w<L>();
		if (on1)
			mvk_load<T, L>(wr + (size_t)(b + NG) * BS, i, &w1);
		else
			w1 = mvk_w<L>();
		mvk_block<T, M, L>(&w0, on0, b, i, ne0, q, dk, bs, m, acc);
		if (b0 + NG < nb)	/* warp-uniform */
			mvk_block<T, M, L>(&w1, on1, b + NG, i, ne0, q, dk, bs, m, acc);
	}
}

/*
 * The products of a set of weights of type T (struct mv8_set, gpu_impl.cuh:
 * the blocks of weight i after those of the ones before it, 8 rows a
 * block as alone), each row's warp the lanes above: the same bits whatever
 * set a weight is in.
 */
template <int T, int M, int L>
__global__ void __launch_bounds__(256)
k_mvk(const struct mv8_set S, int nb, size_t rowbytes, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, int m)
{
	enum { BS = mvk_bs<T>::v, NG = 32 / L };
	struct mv8_row R = mv8_pick(S);
	const uint8_t *W = R.W;
	int64_t r = R.r, rows = R.rows;
	float *y = R.y;
	const float *scale = R.scale;
	int lane = threadIdx.x & 31, g = lane / L, i = lane % L;
	int64_t ne0 = (int64_t)nb * 256;
	float acc[M];

	if (r < rows)	/* its weight row's start towards L2 while the kernel before ends */
		pdl_prefetch(W + r * rowbytes, rowbytes, lane);
	pdl_enter();
	if (r >= rows)
		return;
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	const uint8_t *wr = W + r * rowbytes;
	for (int b0 = 0; b0 < nb; b0 += 2 * NG) {
		struct mvk_w<L> w0, w1;
		int b = b0 + g, on0 = b < nb, on1 = b + NG < nb;
		if (on0)
			mvk_load<T, L>(wr + (size_t)b * BS, i, &w0);
		else
			w0 = mvk_w<L>();
		if (on1)
			mvk_load<T, L>(wr + (size_t)(b + NG) * BS, i, &w1);
		else
			w1 = mvk_w<L>();
		mvk_block<T, M, L>(&w0, on0, b, i, ne0, q, dk, bs, m, acc);
		if (b0 + NG < nb)	/* warp-uniform */
			mvk_block<T, M, L>(&w1, on1, b + NG, i, ne0, q, dk, bs, m, acc);
	}
#pragma unroll
	for (int j = 0; j < M; j++) {
		if (j >= m)
			break;
		float v = acc[j];
		for (int o = 1; o < 32; o <<= 1)
			v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
		if (lane == 0)
			y[(size_t)j * rows + r] = scale != NULL ? __fmul_rn(v, *scale) : v;
	}
}

/*
 * The experts' products (gpu_moe_matvec): the warp of row r of slot s =
 * s0 + blockIdx.y is k_mvk<T, 1, L>'s on input row s / per (q, dk, bs of
 * that row) against expert ids[s]'s rows (ebytes apart), into y[s][rows].
 * An id outside [0, n_exp) gives NaN rows.
 */
template <int T, int L>
__global__ void __launch_bounds__(256)
k_moe_mvk(const uint8_t *__restrict__ W, size_t ebytes, int64_t rows, int nb, size_t rowbytes,
    int n_exp, const int32_t *__restrict__ ids, int s0, int per, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, float *y, const float *scale)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31, s = s0 + (int)blockIdx.y;
	float acc[1];

	pdl_enter();	/* the ids are an earlier kernel's */
	if (r >= rows)
		return;
	int e = ids[s];
	size_t xr = (size_t)(s / per);
	float *yr = y + (size_t)s * rows + r;
	if (e < 0 || e >= n_exp) {
		if (lane == 0)
			*yr = __int_as_float(0x7FC00000);
		return;
	}
	mvk_row<T, 1, L>(W + (size_t)e * ebytes + r * rowbytes, nb, q + xr * nb * 256,
	    dk + xr * nb, bs + xr * nb * 16, 1, lane, acc);
	float v = acc[0];
	for (int o = 1; o < 32; o <<= 1)
		v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
	if (lane == 0)
		*yr = scale != NULL ? __fmul_rn(v, *scale) : v;
}

#include "matvec_qkt.cuh"

/* One warp per 256-block of x: q, dk and the 16 bsums (gpu_q8k_block). */
__global__ void
k_q8kx(const float *x, int64_t total, int8_t *q, float *dk, int16_t *bs)
{
	int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;

	pdl_enter();
	if (w >= total)
		return;
	gpu_q8k_block(x + w * 256, threadIdx.x & 31, q + w * 256, dk + w, bs + w * 16);
}

/*
 * k_q8kx after an elementwise op on x, its result written back to x (lane
 * l's own 8 values, then quantized by the same lane): GPU_PRE_SWIGLU x =
 * silu(x) * u as ops.cu's k_binary, GPU_PRE_GEGLU x = gelu_tanh(x) * u as
 * moe.cu's k_geglu; bit-identical to that kernel, then k_q8kx.
 */
template <int P>
__global__ void
k_q8kx_pre(float *x, const float *u, int64_t total, int8_t *q, float *dk, int16_t *bs)
{
	int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;

	pdl_enter();
	if (w >= total)
		return;
	float *xb = x + w * 256 + lane * 8;
	const float *ub = u + w * 256 + lane * 8;
#pragma unroll
	for (int k = 0; k < 8; k++)
		xb[k] = P == GPU_PRE_GEGLU ? __fmul_rn(gpu_gelu_tanh(xb[k]), ub[k]) :
		    __fmul_rn(gpu_silu(xb[k]), ub[k]);
	gpu_q8k_block(x + w * 256, lane, q + w * 256, dk + w, bs + w * 16);
}

/* The types on Q8_K activations: the K-quants here, IQ4_XS (matvec_iq4.cu). */
int
qk_type(int t)
{
	return t == QK_T_Q4_K || t == QK_T_Q5_K || t == QK_T_Q6_K || t == QK_T_IQ4_XS;
}

/* The alignment less 1 the kernels here (and k_mvkt) need of a weight of
 * type t: Q4_K and Q5_K 16 bytes (16-byte loads and copies), Q6_K 4 (words),
 * IQ4_XS 8 (its blocks' own, as matvec_iq4.cu's; 8-byte copies). */
static uintptr_t
qk_align(int t)
{
	return t == QK_T_Q6_K ? 3 : t == QK_T_IQ4_XS ? 7 : 15;
}

int
qk_quantize(struct gpu *g, const float *d_x, int64_t n, int64_t ne0, int8_t *q, float *dk,
    int16_t *bs)
{
	int64_t total = n * (ne0 / 256);

	if (ne0 % 256 != 0 || n < 1)
		return gpu_fail(g, "quantize_q8k: %lld rows of %lld (a multiple of 256)",
		    (long long)n, (long long)ne0);
	gpu_launch(g, k_q8kx, (unsigned)((total * 32 + 255) / 256), 256, 0, d_x, total, q, dk, bs);
	GPU_LAUNCHED(g, "quantize_q8k");
	return 0;
}

int
qk_quantize_pre(struct gpu *g, int pre, float *d_x, const float *d_u, int64_t n, int64_t ne0,
    int8_t *q, float *dk, int16_t *bs)
{
	int64_t total = n * (ne0 / 256);
	unsigned nblk = (unsigned)((total * 32 + 255) / 256);

	if (ne0 % 256 != 0 || n < 1 || (pre != GPU_PRE_SWIGLU && pre != GPU_PRE_GEGLU))
		return gpu_fail(g, "quantize_q8k: op %d, %lld rows of %lld (a multiple of 256)", pre,
		    (long long)n, (long long)ne0);
	if (pre == GPU_PRE_GEGLU)
		gpu_launch(g, k_q8kx_pre<GPU_PRE_GEGLU>, nblk, 256, 0, d_x, d_u, total, q, dk, bs);
	else
		gpu_launch(g, k_q8kx_pre<GPU_PRE_SWIGLU>, nblk, 256, 0, d_x, d_u, total, q, dk, bs);
	GPU_LAUNCHED(g, "matvec_q8 quantize");
	return 0;
}

/* k_mvk over the set S (S.blk made here). */
template <int T, int L>
static int
mvk_launch(struct gpu *g, struct mv8_set S, int nb, const int8_t *q, const float *dk,
    const int16_t *bs, int m)
{
	size_t rb = (size_t)nb * mvk_bs<T>::v;

	S.blk[0] = 0;
	for (int k = 0; k < S.nw; k++)
		S.blk[k + 1] = S.blk[k] + (unsigned)((S.rows[k] + 7) / 8);
	unsigned grid = S.blk[S.nw];
	if (m <= 1)
		gpu_launch(g, k_mvk<T, 1, L>, grid, 256, 0, S, nb, rb, q, dk, bs, m);
	else if (m <= 2)
		gpu_launch(g, k_mvk<T, 2, L>, grid, 256, 0, S, nb, rb, q, dk, bs, m);
	else if (m <= 4)
		gpu_launch(g, k_mvk<T, 4, L>, grid, 256, 0, S, nb, rb, q, dk, bs, m);
	else if (m <= 8)
		gpu_launch(g, k_mvk<T, 8, L>, grid, 256, 0, S, nb, rb, q, dk, bs, m);
	else
		gpu_launch(g, k_mvk<T, 16, L>, grid, 256, 0, S, nb, rb, q, dk, bs, m);
	GPU_LAUNCHED(g, "matvec_q8k");
	return 0;
}


extern "C" int
gpu_qk_lanes(int t)
{
	return t == QK_T_Q6_K || t == QK_T_IQ4_XS ? 8 : 4;	/* (IQ4_XS: its one form) */
}

extern "C" int
gpu_tune_qk(struct gpu *g, int lanes)
{
	if (lanes != 0 && lanes != 4 && lanes != 8)
		return gpu_fail(g, "tune: K-quant lanes per block %d (0, 4 or 8)", lanes);
	if (lanes != g->qk_lanes)
		g->gen++;	/* other kernels: recorded graphs are stale */
	g->qk_lanes = lanes;
	return 0;
}

/*
 * From this many input rows GPU_QKT_AUTO takes k_mvkt for Q4_K, Q5_K, Q6_K
 * and IQ4_XS (k_mv8t's MVT_AUTO_M for Q8_0 and NVFP4; k_mvkt's speed
 * against k_mvk's and k_iq4's not yet measured: the device's bench i8tc
 * lines settle it).
 */
#define QKT_AUTO_M 12

/* 1 when k_mvkt takes a product of m rows of type t (gpu_tune_qkt): every
 * type on Q8_K activations. */
static int
qkt_takes(const struct gpu *g, int t, int m)
{
	if (!qk_type(t))
		return 0;
	return g->qkt == GPU_QKT_ON || (g->qkt == GPU_QKT_AUTO && m >= QKT_AUTO_M);
}

int
qk_group(const struct gpu *g, int t, int64_t n)
{
	if (!qk_type(t))
		return GPU_MATVEC_MAX_ROWS;
	if (g->qkt == GPU_QKT_ON)
		return QKT_MAX_M;
	return g->qkt == GPU_QKT_AUTO && n > GPU_MATVEC_MAX_ROWS && n <= g->step_rows ?
	    QKT_MAX_M : GPU_MATVEC_MAX_ROWS;
}

extern "C" int
gpu_tune_qkt(struct gpu *g, int how)
{
	static_assert(GPU_STEP_ROWS_MAX <= QKT_MAX_M, "k_mvkt takes a step in one launch");
	if (how != GPU_QKT_OFF && how != GPU_QKT_ON && how != GPU_QKT_AUTO)
		return gpu_fail(g, "tune: K-quant tensor-core form %d (0, 1 or 2)", how);
	if (how != g->qkt)
		g->gen++;	/* other kernels: recorded graphs are stale */
	g->qkt = how;
	return 0;
}

/* A weight of type t for m inputs (tc: k_mvkt takes them): its shape and alignment. */
static int
qk_check(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int m, int tc)
{
	if (!qk_type(t) || ne0 % 256 != 0 || rows < 1 || m < 1 ||
	    m > (tc ? QKT_MAX_M : GPU_MATVEC_MAX_ROWS))
		return gpu_fail(g, "matvec_q8k: type %d, %lld rows of %lld, %d inputs", t,
		    (long long)rows, (long long)ne0, m);
	if (((uintptr_t)d_w & qk_align(t)) != 0)
		return gpu_fail(g, "matvec_q8k: weights not aligned");
	return 0;
}

/* One weight where no set is taken: k_mvkt (tc), or IQ4_XS's k_iq4. */
static int
qk_one(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, const int8_t *q,
    const float *dk, const int16_t *bs, int m, float *d_y, const float *d_scale, int tc)
{
	int nb = (int)(ne0 / 256);

	if (t == QK_T_IQ4_XS && !tc)
		return iq4xs_product(g, d_w, rows, ne0, q, dk, m, d_y, d_scale);
	if (qk_check(g, t, d_w, rows, ne0, m, tc) != 0)
		return -1;
	if (t == QK_T_IQ4_XS)	/* (its one form: 8 lanes whatever g->qk_lanes) */
		return mvkt_launch<QK_T_IQ4_XS, 8>(g, d_w, rows, nb, q, dk, bs, m, d_y, d_scale);
	int l8 = (g->qk_lanes ? g->qk_lanes : gpu_qk_lanes(t)) == 8;
	switch (t) {
	case QK_T_Q4_K:
		return l8 ? mvkt_launch<QK_T_Q4_K, 8>(g, d_w, rows, nb, q, dk, bs, m, d_y, d_scale) :
		    mvkt_launch<QK_T_Q4_K, 4>(g, d_w, rows, nb, q, dk, bs, m, d_y, d_scale);
	case QK_T_Q5_K:
		return l8 ? mvkt_launch<QK_T_Q5_K, 8>(g, d_w, rows, nb, q, dk, bs, m, d_y, d_scale) :
		    mvkt_launch<QK_T_Q5_K, 4>(g, d_w, rows, nb, q, dk, bs, m, d_y, d_scale);
	default:
		return l8 ? mvkt_launch<QK_T_Q6_K, 8>(g, d_w, rows, nb, q, dk, bs, m, d_y, d_scale) :
		    mvkt_launch<QK_T_Q6_K, 4>(g, d_w, rows, nb, q, dk, bs, m, d_y, d_scale);
	}
}

int
qk_products(struct gpu *g, int t, struct mv8_set S, int64_t ne0, const int8_t *q,
    const float *dk, const int16_t *bs, int m)
{
	int nb = (int)(ne0 / 256), tc = qkt_takes(g, t, m);

	if (S.nw < 1 || S.nw > MV8_SET)
		return gpu_fail(g, "matvec_q8k: a set of %d weights", S.nw);
	if (tc || t == QK_T_IQ4_XS) {
		for (int k = 0; k < S.nw; k++)
			if (qk_one(g, t, S.W[k], S.rows[k], ne0, q, dk, bs, m, S.y[k], S.scale[k],
			    tc) != 0)
				return -1;
		return 0;
	}
	for (int k = 0; k < S.nw; k++)
		if (qk_check(g, t, S.W[k], S.rows[k], ne0, m, 0) != 0)
			return -1;
	int l8 = (g->qk_lanes ? g->qk_lanes : gpu_qk_lanes(t)) == 8;
	switch (t) {
	case QK_T_Q4_K:
		return l8 ? mvk_launch<QK_T_Q4_K, 8>(g, S, nb, q, dk, bs, m) :
		    mvk_launch<QK_T_Q4_K, 4>(g, S, nb, q, dk, bs, m);
	case QK_T_Q5_K:
		return l8 ? mvk_launch<QK_T_Q5_K, 8>(g, S, nb, q, dk, bs, m) :
		    mvk_launch<QK_T_Q5_K, 4>(g, S, nb, q, dk, bs, m);
	default:
		return l8 ? mvk_launch<QK_T_Q6_K, 8>(g, S, nb, q, dk, bs, m) :
		    mvk_launch<QK_T_Q6_K, 4>(g, S, nb, q, dk, bs, m);
	}
}

template <int T, int L>
static int
mvk_moe_launch(struct gpu *g, const void *w, int64_t rows, int nb, int n_exp,
    const int32_t *ids, int ns, int per, const int8_t *q, const float *dk, const int16_t *bs,
    float *y, const float *scale)
{
	size_t rb = (size_t)nb * mvk_bs<T>::v;

	for (int s0 = 0; s0 < ns; s0 += 65535) {
		dim3 grid((unsigned)((rows + 7) / 8), (unsigned)min(ns - s0, 65535));
		gpu_launch(g, k_moe_mvk<T, L>, grid, 256, 0, (const uint8_t *)w, rb * (size_t)rows,
		    rows, nb, rb, n_exp, ids, s0, per, q, dk, bs, y, scale);
		GPU_LAUNCHED(g, "moe matvec_q8k");
	}
	return 0;
}

int
qk_moe_product(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *d_ids, int ns, int per, const int8_t *q, const float *dk,
    const int16_t *bs, float *d_y, const float *d_scale)
{
	int nb = (int)(ne0 / 256);

	if (t == QK_T_IQ4_XS)
		return iq4xs_moe_product(g, d_w, rows, ne0, n_exp, d_ids, ns, per, q, dk, d_y,
		    d_scale);
	if (!qk_type(t) || ne0 % 256 != 0 || rows < 1 || n_exp < 1 || ns < 1 || per < 1)
		return gpu_fail(g, "moe matvec_q8k: type %d, %d experts of %lldx%lld, %d slots", t,
		    n_exp, (long long)rows, (long long)ne0, ns);
	/* qk_products': an expert's rows are rows of the stack, aligned as they are there */
	if (((uintptr_t)d_w & qk_align(t)) != 0)
		return gpu_fail(g, "moe matvec_q8k: weights not aligned");
	int l8 = (g->qk_lanes ? g->qk_lanes : gpu_qk_lanes(t)) == 8;
	switch (t) {
	case QK_T_Q4_K:
		return l8 ? mvk_moe_launch<QK_T_Q4_K, 8>(g, d_w, rows, nb, n_exp, d_ids, ns, per, q,
		    dk, bs, d_y, d_scale) : mvk_moe_launch<QK_T_Q4_K, 4>(g, d_w, rows, nb, n_exp,
		    d_ids, ns, per, q, dk, bs, d_y, d_scale);
	case QK_T_Q5_K:
		return l8 ? mvk_moe_launch<QK_T_Q5_K, 8>(g, d_w, rows, nb, n_exp, d_ids, ns, per, q,
		    dk, bs, d_y, d_scale) : mvk_moe_launch<QK_T_Q5_K, 4>(g, d_w, rows, nb, n_exp,
		    d_ids, ns, per, q, dk, bs, d_y, d_scale);
	default:
		return l8 ? mvk_moe_launch<QK_T_Q6_K, 8>(g, d_w, rows, nb, n_exp, d_ids, ns, per, q,
		    dk, bs, d_y, d_scale) : mvk_moe_launch<QK_T_Q6_K, 4>(g, d_w, rows, nb, n_exp,
		    d_ids, ns, per, q, dk, bs, d_y, d_scale);
	}
}

/*
 * The experts grouped (gpu_impl.cuh's moe_group): the warp of row r of
 * tile t0 + blockIdx.y (bucket e, first f, count n) runs mvk_row<T,
 * GPU_MOE_MT, L> on the n gathered Q8_K rows f .. f + n - 1 against
 * expert e's row r, then k_moe_mvk's butterfly per row j into y[perm[f +
 * j]][rows]: slot perm[f + j]'s row of k_moe_mvk bit for bit (mvk_block's
 * sums of row j do not depend on M or m).  An empty tile writes nothing;
 * bucket n_exp (the ids outside [0, n_exp)) NaN rows.
 */
template <int T, int L>
__global__ void __launch_bounds__(256)
k_moe_mvkg(const uint8_t *__restrict__ W, size_t ebytes, int64_t rows, int nb, size_t rowbytes,
    int n_exp, const int4 *__restrict__ tile, int t0, const int32_t *__restrict__ perm,
    const int8_t *__restrict__ q, const float *__restrict__ dk,
    const int16_t *__restrict__ bs, float *y, const float *scale)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	float acc[GPU_MOE_MT];

	pdl_enter();	/* the tiles and the gathered rows are earlier kernels' */
	if (r >= rows)
		return;
	int e, f, n;
	if (!moe_tile(tile, t0, perm, n_exp, rows, r, lane, y, &e, &f, &n))
		return;
	mvk_row<T, GPU_MOE_MT, L>(W + (size_t)e * ebytes + r * rowbytes, nb,
	    q + (size_t)f * nb * 256, dk + (size_t)f * nb, bs + (size_t)f * nb * 16, n, lane, acc);
#pragma unroll
	for (int j = 0; j < GPU_MOE_MT; j++) {
		if (j >= n)
			break;
		float v = acc[j];
		for (int o = 1; o < 32; o <<= 1)
			v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
		if (lane == 0)
			y[(size_t)perm[f + j] * rows + r] = scale != NULL ? __fmul_rn(v, *scale) : v;
	}
}

template <int T, int L>
static int
mvk_moe_grouped(struct gpu *g, const void *w, int64_t rows, int nb, int n_exp,
    const struct moe_group *G, const int8_t *q, const float *dk, const int16_t *bs,
    float *y, const float *scale)
{
	size_t rb = (size_t)nb * mvk_bs<T>::v;

	for (int t0 = 0; t0 < G->nt; t0 += 65535) {
		dim3 grid((unsigned)((rows + 7) / 8), (unsigned)min(G->nt - t0, 65535));
		gpu_launch(g, k_moe_mvkg<T, L>, grid, 256, 0, (const uint8_t *)w, rb * (size_t)rows,
		    rows, nb, rb, n_exp, G->tile, t0, G->perm, q, dk, bs, y, scale);
		GPU_LAUNCHED(g, "moe matvec_q8k grouped");
	}
	return 0;
}

/* qk_moe_product's checks and lanes, on the grouped rows (IQ4_XS: matvec_iq4.cu's);
 * Q4_K, Q5_K, Q6_K and IQ4_XS (its 8 lanes) by k_moe_mvkt under GPU_QKT_ON and
 * GPU_QKT_AUTO (the same bits). */
int
qk_moe_grouped(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const struct moe_group *G, const int8_t *q, const float *dk, const int16_t *bs,
    float *d_y, const float *d_scale)
{
	int nb = (int)(ne0 / 256);

	if (t == QK_T_IQ4_XS && g->qkt == GPU_QKT_OFF)
		return iq4_moe_grouped(g, t, d_w, rows, ne0, n_exp, G, q, dk, d_y, d_scale);
	if (!qk_type(t) || ne0 % 256 != 0 || rows < 1 || n_exp < 1)
		return gpu_fail(g, "moe matvec_q8k: type %d, %d experts of %lldx%lld", t, n_exp,
		    (long long)rows, (long long)ne0);
	if (((uintptr_t)d_w & qk_align(t)) != 0)
		return gpu_fail(g, "moe matvec_q8k: weights not aligned");
	if (t == QK_T_IQ4_XS)	/* tiles of up to 16 rows: k_moe_mvkt */
		return mvkt_moe_grouped<QK_T_IQ4_XS, 8>(g, d_w, rows, nb, n_exp, G, q, dk, bs, d_y,
		    d_scale);
	int l8 = (g->qk_lanes ? g->qk_lanes : gpu_qk_lanes(t)) == 8;
	if (g->qkt != GPU_QKT_OFF && t == QK_T_Q4_K)	/* tiles of up to 16 rows: k_moe_mvkt */
		return l8 ? mvkt_moe_grouped<QK_T_Q4_K, 8>(g, d_w, rows, nb, n_exp, G, q, dk, bs,
		    d_y, d_scale) : mvkt_moe_grouped<QK_T_Q4_K, 4>(g, d_w, rows, nb, n_exp, G, q, dk,
		    bs, d_y, d_scale);
	if (g->qkt != GPU_QKT_OFF && t == QK_T_Q5_K)
		return l8 ? mvkt_moe_grouped<QK_T_Q5_K, 8>(g, d_w, rows, nb, n_exp, G, q, dk, bs,
		    d_y, d_scale) : mvkt_moe_grouped<QK_T_Q5_K, 4>(g, d_w, rows, nb, n_exp, G, q, dk,
		    bs, d_y, d_scale);
	if (g->qkt != GPU_QKT_OFF && t == QK_T_Q6_K)
		return l8 ? mvkt_moe_grouped<QK_T_Q6_K, 8>(g, d_w, rows, nb, n_exp, G, q, dk, bs,
		    d_y, d_scale) : mvkt_moe_grouped<QK_T_Q6_K, 4>(g, d_w, rows, nb, n_exp, G, q, dk,
		    bs, d_y, d_scale);
	switch (t) {
	case QK_T_Q4_K:
		return l8 ? mvk_moe_grouped<QK_T_Q4_K, 8>(g, d_w, rows, nb, n_exp, G, q, dk, bs, d_y,
		    d_scale) : mvk_moe_grouped<QK_T_Q4_K, 4>(g, d_w, rows, nb, n_exp, G, q, dk, bs,
		    d_y, d_scale);
	case QK_T_Q5_K:
		return l8 ? mvk_moe_grouped<QK_T_Q5_K, 8>(g, d_w, rows, nb, n_exp, G, q, dk, bs, d_y,
		    d_scale) : mvk_moe_grouped<QK_T_Q5_K, 4>(g, d_w, rows, nb, n_exp, G, q, dk, bs,
		    d_y, d_scale);
	default:
		return l8 ? mvk_moe_grouped<QK_T_Q6_K, 8>(g, d_w, rows, nb, n_exp, G, q, dk, bs, d_y,
		    d_scale) : mvk_moe_grouped<QK_T_Q6_K, 4>(g, d_w, rows, nb, n_exp, G, q, dk, bs,
		    d_y, d_scale);
	}
}

/* The Q8_K blocks of lib/quant (d f32, qs[256], bsums[16] int16, 292
 * bytes) from the device layout, one thread per output byte. */
__global__ void
k_q8k_pack(const int8_t *q, const float *dk, const int16_t *bs, int64_t nblk, uint8_t *out)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= nblk * 292)
		return;
	int64_t b = i / 292;
	int o = (int)(i % 292);
	uint8_t v;
	if (o < 4)
		v = (uint8_t)(__float_as_uint(dk[b]) >> (8 * o));
	else if (o < 260)
		v = (uint8_t)q[b * 256 + o - 4];
	else
		v = (uint8_t)((uint16_t)bs[b * 16 + (o - 260) / 2] >> (8 * ((o - 260) % 2)));
	out[i] = v;
}

extern "C" int
gpu_quantize_q8k(struct gpu *g, const float *d_x, int64_t n, int64_t ne0, void *d_out)
{
	int64_t nblk = n * (ne0 / 256);
	size_t qn = (size_t)n * ne0;
	int8_t *q;

	if (ne0 % 256 != 0 || n < 1)
		return gpu_fail(g, "quantize_q8k: %lld rows of %lld (a multiple of 256)",
		    (long long)n, (long long)ne0);
	if ((q = (int8_t *)gpu_scratch(g, qn + (size_t)nblk * 4 + qn / 8 + 512)) == NULL)
		return -1;
	float *dk = (float *)(q + (qn + 255) / 256 * 256);
	int16_t *bs = (int16_t *)(dk + ((size_t)nblk + 63) / 64 * 64);
	if (qk_quantize(g, d_x, n, ne0, q, dk, bs) != 0)
		return -1;
	gpu_launch(g, k_q8k_pack, (unsigned)((nblk * 292 + 255) / 256), 256, 0, q, dk, bs, nblk,
	    (uint8_t *)d_out);
	GPU_LAUNCHED(g, "quantize_q8k pack");
	return 0;
}
