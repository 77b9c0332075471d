/*
 * matvec_iq4: the decode products of IQ4_XS and IQ4_NL weights on int8
 * activations, as the CPU backend computes them.  Both read ggml's bytes
 * as they are in the file (no layout of the GPU's own: gpu_iq4x8 turns a
 * word of a sub-block's 4-bit indices into int8 grid values in 16
 * instructions for 8 values, two more than the same indices in value
 * order would take, and the blocks are 8-byte aligned (IQ4_XS) or 2-byte
 * aligned (IQ4_NL) as they are).
 *
 * IQ4_XS (super-blocks of 256: d fp16, scales_h u16, scales_l[4], qs[128];
 * sub-block s of 32 values: qs[16 s .. 16 s + 15], scale ls - 32 with ls
 * the 6 bits of scales_l and scales_h): x quantized to Q8_K as for the
 * K-quants (matvec_qk.cu's qk_quantize: lib/quant's quant_quantize_act
 * bit for bit), then lib/quant_dot.c's vd_k: per super-block the integer
 * sum over sub-blocks s of (ls_s - 32) * (w_s . q_s), scaled by d * dy.
 * The 8 lanes of a super-block take a sub-block each, and each lane adds
 * its part's float term (d * dy) * (float)((ls - 32) * t) (t the dp4a
 * dot, exact; |(ls - 32) t| < 2^24, so the float is exact too) to its
 * sum, as matvec_qk.cu's K-quant lanes do: equal to quant_vec_dot up to
 * the order of float sums.  A warp a weight row, 4 groups of 8 lanes;
 * group g takes super-blocks g, g + 4, ..., two at a time (both loaded
 * first, in block order); lane i of a group reads its sub-block's 16 quant
 * bytes as two 8-byte loads (a group's load reads 128 contiguous bytes in
 * two instructions) and the block's 8-byte header, and input row j's 32
 * values as two 16-byte loads.  The lanes' sums are added by a butterfly
 * over the warp (xor 1, 2, 4, 8, 16), so a row's sum is the same
 * operations in the same order for every m (batch-invariant).
 *
 * IQ4_NL (blocks of 32: d fp16, qs[16]): x quantized to Q8_0 as the Q8_0
 * weights take it (matvec_q8.cu's k_q8x), then as vd_q8_0: per block the
 * integer dot t times both scales, acc = fma(t, d * dx, acc) (d * dx exact:
 * two fp16 values), as matvec_q8.cu's Q8_0 lanes do.  A warp a weight
 * row, lane l blocks l, l + 32, ... (two in flight), the lanes' sums by a
 * butterfly (xor 16, 8, 4, 2, 1).
 *
 * The experts' kernels (gpu_moe_matvec) run a slot's row by the same row
 * function and butterfly as the one-row product (M = 1): an expert's
 * product of one input row is its one-row product bit for bit.
 *
 * Under gpu_tune_qkt (GPU_QKT_ON, GPU_QKT_AUTO) matvec_qk.cu sends IQ4_XS's
 * products of up to 32 rows and its experts grouped by expert to
 * matvec_qkt.cuh's int8 tensor-core kernel instead, which keeps these
 * lanes as chains and gives their bits (mvkt_stepx); keep the two in step.
 */
#include "gpu_impl.cuh"

#include <cuda_fp16.h>

#include "matvec_iq4.cuh"

/* v summed over the warp by the butterfly xor 1, 2, 4, 8, 16. */
__device__ __forceinline__ float
xs_sum(float v)
{
#pragma unroll
	for (int o = 1; o < 32; o <<= 1)
		v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
	return v;
}

/* --- IQ4_NL ------------------------------------------------------------ */

/* The 5 aligned words that hold the 18-byte block at blk (2-byte aligned):
 * from blk itself or from the 2 bytes before it (o = 2). */
struct nl_w {
	uint32_t p[5];
	unsigned o;
};

__device__ __forceinline__ void
nl_load(const uint8_t *blk, struct nl_w *w)
{
	unsigned o = (unsigned)((uintptr_t)blk & 2);
	const uint32_t *p = (const uint32_t *)(blk - o);

#pragma unroll
	for (int k = 0; k < 5; k++)
		w->p[k] = __ldg(p + k);
	w->o = o;
}

/*
 * acc[j] += the block b (words w) . block b of input row j < m: t its
 * integer dot, acc = fma(t, d * dx_j, acc).  The quant words from the
 * block's byte 2 on: the funnel shift of two loaded words by 16 + 8 o bits
 * (32, clamped: the high word itself).
 */
template <int M>
__device__ __forceinline__ void
nl_block(const struct nl_w *w, int b, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, int m, float *acc)
{
	unsigned sh = 16 + 8 * w->o;
	float d = __half2float(__ushort_as_half((unsigned short)(w->p[0] >> (8 * w->o))));
	int lo[4], hi[4];

#pragma unroll
	for (int k = 0; k < 4; k++)
		gpu_iq4x8(__funnelshift_rc(w->p[k], w->p[k + 1], sh), &lo[k], &hi[k]);
#pragma unroll
	for (int j = 0; j < M; j++) {
		if (j >= m)
			break;
		size_t xi = (size_t)j * nb + b;
		const int4 *xq = (const int4 *)(q + xi * 32);
		int4 ya = xq[0], yb = xq[1];
		int t = __dp4a(lo[0], ya.x, IQ_MAGIC);
		t = __dp4a(lo[1], ya.y, t), t = __dp4a(lo[2], ya.z, t), t = __dp4a(lo[3], ya.w, t);
		t = __dp4a(hi[0], yb.x, t), t = __dp4a(hi[1], yb.y, t), t = __dp4a(hi[2], yb.z, t);
		t = __dp4a(hi[3], yb.w, t);
		acc[j] = __fmaf_rn(iq_i2f(t), __fmul_rn(d, dx[xi]), acc[j]);
	}
}

/* acc[j] (zeroed here) = lane's part of the weight row at wr (nb blocks)
 * . input row j: blocks lane, lane + 32, ..., two loaded at a time. */
template <int M>
__device__ __forceinline__ void
nl_row(const uint8_t *__restrict__ wr, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, int m, int lane, float *acc)
{
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	for (int b = lane; b < nb; b += 64) {
		struct nl_w w0, w1;
		int on1 = b + 32 < nb;
		nl_load(wr + (size_t)b * NL_BS, &w0);
		if (on1)
			nl_load(wr + (size_t)(b + 32) * NL_BS, &w1);
		nl_block<M>(&w0, b, nb, q, dx, m, acc);
		if (on1)
			nl_block<M>(&w1, b + 32, nb, q, dx, m, acc);
	}
}

/* v summed over the warp by the butterfly xor 16, 8, 4, 2, 1. */
__device__ __forceinline__ float
nl_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
	return v;
}

/* --- both: the kernels and their launches -------------------------------- */

/* A type's row function, butterfly, block and checks (T: 23 IQ4_XS on Q8_K
 * rows x (q, d = dk), 20 IQ4_NL on Q8_0 rows (q, d = dx)). */
template <int T> struct iq4;

template <> struct iq4<23> {
	enum { QK = 256, BS = XS_BS, ALIGN = 8 };
	static constexpr const char *name = "matvec_q8k: IQ4_XS";
	static constexpr const char *kname = "matvec_iq4xs", *mname = "moe matvec_iq4xs";
	static constexpr const char *gname = "moe matvec_iq4xs grouped";
	template <int M>
	static __device__ __forceinline__ void
	row(const uint8_t *wr, int nb, const int8_t *q, const float *d, int m, int lane,
	    float *acc)
	{
		xs_row<M>(wr, nb, q, d, m, lane, acc);
	}
	static __device__ __forceinline__ float sum(float v) { return xs_sum(v); }
};

template <> struct iq4<20> {
	enum { QK = 32, BS = NL_BS, ALIGN = 2 };
	static constexpr const char *name = "matvec_q8: IQ4_NL";
	static constexpr const char *kname = "matvec_iq4nl", *mname = "moe matvec_iq4nl";
	static constexpr const char *gname = "moe matvec_iq4nl grouped";
	template <int M>
	static __device__ __forceinline__ void
	row(const uint8_t *wr, int nb, const int8_t *q, const float *d, int m, int lane,
	    float *acc)
	{
		nl_row<M>(wr, nb, q, d, m, lane, acc);
	}
	static __device__ __forceinline__ float sum(float v) { return nl_sum(v); }
};

/* One warp per weight row r: y[j][r] for the m <= M input rows. */
template <int T, int M>
__global__ void __launch_bounds__(256)
k_iq4(const uint8_t *__restrict__ W, int64_t rows, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ d, int m, float *y, const float *scale)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	size_t rb = (size_t)nb * iq4<T>::BS;
	float acc[M];

	if (r < rows)	/* its weight row's start towards L2 while the kernel before ends */
		pdl_prefetch(W + r * rb, rb, lane);
	pdl_enter();
	if (r >= rows)
		return;
	/* (m as a constant where M = 1: ptxas spilled 8 bytes with it unknown) */
	iq4<T>::template row<M>(W + r * rb, nb, q, d, M == 1 ? 1 : m, lane, acc);
#pragma unroll
	for (int j = 0; j < M; j++) {
		if (j >= m)
			break;
		float v = iq4<T>::sum(acc[j]);
		if (lane == 0)
			y[(size_t)j * rows + r] = scale != NULL ? __fmul_rn(v, *scale) : v;
	}
}

/*
 * The experts: the warp of row r of slot s = s0 + blockIdx.y is
 * k_iq4<T, 1>'s on input row s / per against expert ids[s]'s rows (ebytes
 * apart), into y[s][rows].  An id outside [0, n_exp) gives NaN.
 */
template <int T>
__global__ void __launch_bounds__(256)
k_moe_iq4(const uint8_t *__restrict__ W, size_t ebytes, int64_t rows, int nb, int n_exp,
    const int32_t *__restrict__ ids, int s0, int per, const int8_t *__restrict__ q,
    const float *__restrict__ d, float *y, const float *scale)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31, s = s0 + (int)blockIdx.y;
	size_t rb = (size_t)nb * iq4<T>::BS;
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
	iq4<T>::template row<1>(W + (size_t)e * ebytes + r * rb, nb, q + xr * nb * iq4<T>::QK,
	    d + xr * nb, 1, lane, acc);
	float v = iq4<T>::sum(acc[0]);
	if (lane == 0)
		*yr = scale != NULL ? __fmul_rn(v, *scale) : v;
}

template <int T>
static int
iq4_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, const int8_t *q,
    const float *d, int m, float *d_y, const float *d_scale)
{
	const int qk = iq4<T>::QK;
	int nb = (int)(ne0 / qk);
	unsigned grid = (unsigned)((rows + 7) / 8);
	const uint8_t *W = (const uint8_t *)d_w;

	if (ne0 % qk != 0 || ne0 < qk || ne0 / qk > INT32_MAX || rows < 1 || m < 1 ||
	    m > GPU_MATVEC_MAX_ROWS || (rows + 7) / 8 > INT32_MAX)
		return gpu_fail(g, "%s, %lld rows of %lld, %d inputs", iq4<T>::name,
		    (long long)rows, (long long)ne0, m);
	if (((uintptr_t)d_w & (iq4<T>::ALIGN - 1)) != 0)
		return gpu_fail(g, "%s weights not %d-byte aligned", iq4<T>::name,
		    (int)iq4<T>::ALIGN);
	if (m <= 1)
		gpu_launch(g, k_iq4<T, 1>, grid, 256, 0, W, rows, nb, q, d, m, d_y, d_scale);
	else if (m <= 2)
		gpu_launch(g, k_iq4<T, 2>, grid, 256, 0, W, rows, nb, q, d, m, d_y, d_scale);
	else if (m <= 4)
		gpu_launch(g, k_iq4<T, 4>, grid, 256, 0, W, rows, nb, q, d, m, d_y, d_scale);
	else if (m <= 8)
		gpu_launch(g, k_iq4<T, 8>, grid, 256, 0, W, rows, nb, q, d, m, d_y, d_scale);
	else
		gpu_launch(g, k_iq4<T, 16>, grid, 256, 0, W, rows, nb, q, d, m, d_y, d_scale);
	GPU_LAUNCHED(g, iq4<T>::kname);
	return 0;
}

template <int T>
static int
iq4_moe_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *d_ids, int ns, int per, const int8_t *q, const float *d, float *d_y,
    const float *d_scale)
{
	const int qk = iq4<T>::QK;
	int nb = (int)(ne0 / qk);
	size_t rb = (size_t)nb * iq4<T>::BS;

	if (ne0 % qk != 0 || ne0 < qk || ne0 / qk > INT32_MAX || rows < 1 || n_exp < 1 ||
	    ns < 1 || per < 1 || (rows + 7) / 8 > INT32_MAX)
		return gpu_fail(g, "moe %s, %d experts of %lldx%lld, %d slots", iq4<T>::name, n_exp,
		    (long long)rows, (long long)ne0, ns);
	if (((uintptr_t)d_w & (iq4<T>::ALIGN - 1)) != 0)
		return gpu_fail(g, "moe %s weights not %d-byte aligned", iq4<T>::name,
		    (int)iq4<T>::ALIGN);
	for (int s0 = 0; s0 < ns; s0 += 65535) {
		dim3 grid((unsigned)((rows + 7) / 8), (unsigned)min(ns - s0, 65535));
		gpu_launch(g, k_moe_iq4<T>, grid, 256, 0, (const uint8_t *)d_w, rb * (size_t)rows,
		    rows, nb, n_exp, d_ids, s0, per, q, d, d_y, d_scale);
		GPU_LAUNCHED(g, iq4<T>::mname);
	}
	return 0;
}

/*
 * The experts grouped (gpu_impl.cuh's moe_group): the warp of row r of
 * tile t0 + blockIdx.y (bucket e, first f, count n) runs the type's row
 * function at M = GPU_MOE_MT on the n gathered rows f .. f + n - 1 against
 * expert e's row r, each row's sum by the type's butterfly into y[perm[f +
 * j]][rows]: k_moe_iq4's bits for each slot (row j's sums do not depend on
 * M or m).  An empty tile writes nothing; bucket n_exp NaN rows.
 */
template <int T>
__global__ void __launch_bounds__(256)
k_moe_iq4g(const uint8_t *__restrict__ W, size_t ebytes, int64_t rows, int nb, int n_exp,
    const int4 *__restrict__ tile, int t0, const int32_t *__restrict__ perm,
    const int8_t *__restrict__ q, const float *__restrict__ d, float *y, const float *scale)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	size_t rb = (size_t)nb * iq4<T>::BS;
	float acc[GPU_MOE_MT];

	pdl_enter();	/* the tiles and the gathered rows are earlier kernels' */
	if (r >= rows)
		return;
	int e, f, n;
	if (!moe_tile(tile, t0, perm, n_exp, rows, r, lane, y, &e, &f, &n))
		return;
	iq4<T>::template row<GPU_MOE_MT>(W + (size_t)e * ebytes + r * rb, nb,
	    q + (size_t)f * nb * iq4<T>::QK, d + (size_t)f * nb, n, lane, acc);
#pragma unroll
	for (int j = 0; j < GPU_MOE_MT; j++) {
		if (j >= n)
			break;
		float v = iq4<T>::sum(acc[j]);
		if (lane == 0)
			y[(size_t)perm[f + j] * rows + r] = scale != NULL ? __fmul_rn(v, *scale) : v;
	}
}

template <int T>
static int
iq4_grouped(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const struct moe_group *G, const int8_t *q, const float *d, float *d_y,
    const float *d_scale)
{
	const int qk = iq4<T>::QK;
	int nb = (int)(ne0 / qk);
	size_t rb = (size_t)nb * iq4<T>::BS;

	if (ne0 % qk != 0 || ne0 < qk || ne0 / qk > INT32_MAX || rows < 1 || n_exp < 1 ||
	    (rows + 7) / 8 > INT32_MAX)
		return gpu_fail(g, "moe %s, %d experts of %lldx%lld", iq4<T>::name, n_exp,
		    (long long)rows, (long long)ne0);
	if (((uintptr_t)d_w & (iq4<T>::ALIGN - 1)) != 0)
		return gpu_fail(g, "moe %s weights not %d-byte aligned", iq4<T>::name,
		    (int)iq4<T>::ALIGN);
	for (int t0 = 0; t0 < G->nt; t0 += 65535) {
		dim3 grid((unsigned)((rows + 7) / 8), (unsigned)min(G->nt - t0, 65535));
		gpu_launch(g, k_moe_iq4g<T>, grid, 256, 0, (const uint8_t *)d_w, rb * (size_t)rows,
		    rows, nb, n_exp, G->tile, t0, G->perm, q, d, d_y, d_scale);
		GPU_LAUNCHED(g, iq4<T>::gname);
	}
	return 0;
}

int
iq4_moe_grouped(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const struct moe_group *G, const int8_t *q, const float *d, float *d_y,
    const float *d_scale)
{
	if (t == 23)
		return iq4_grouped<23>(g, d_w, rows, ne0, n_exp, G, q, d, d_y, d_scale);
	if (t == 20)
		return iq4_grouped<20>(g, d_w, rows, ne0, n_exp, G, q, d, d_y, d_scale);
	return gpu_fail(g, "moe iq4 grouped: type %d", t);
}

int
iq4xs_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, const int8_t *q,
    const float *dk, int m, float *d_y, const float *d_scale)
{
	return iq4_product<23>(g, d_w, rows, ne0, q, dk, m, d_y, d_scale);
}

int
iq4xs_moe_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *d_ids, int ns, int per, const int8_t *q, const float *dk, float *d_y,
    const float *d_scale)
{
	return iq4_moe_product<23>(g, d_w, rows, ne0, n_exp, d_ids, ns, per, q, dk, d_y, d_scale);
}

int
iq4nl_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, const int8_t *q,
    const float *dx, int m, float *d_y, const float *d_scale)
{
	return iq4_product<20>(g, d_w, rows, ne0, q, dx, m, d_y, d_scale);
}

int
iq4nl_moe_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *d_ids, int ns, int per, const int8_t *q, const float *dx, float *d_y,
    const float *d_scale)
{
	return iq4_moe_product<20>(g, d_w, rows, ne0, n_exp, d_ids, ns, per, q, dx, d_y, d_scale);
}
