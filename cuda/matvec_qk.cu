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
 * last bits; each is batch-invariant.  Q6_K at 8 lanes has a second way to
 * read its weights, the same bits (gpu_tune_qk_stage: MVK_STAGED,
 * mvk_row_s): each warp copies its row into shared memory with 4-byte
 * copies of contiguous words, and the lanes read their pieces from there.
 */
#include "gpu_impl.cuh"

#include <cuda_fp16.h>

/* (QK_T_Q6P: Q6_K packed four blocks a group, GPU_T_Q6K_PACKED) */
enum { QK_T_Q4_K = 12, QK_T_Q5_K = 13, QK_T_Q6_K = 14, QK_T_IQ4_XS = 23, QK_T_Q6P = 114 };

#include "matvec_qk.cuh"

/*
 * The products of a set of weights of type T (struct mv8_set, gpu_impl.cuh:
 * the blocks of weight i after those of the ones before it, 8 rows a
 * block as alone), each row's warp the lanes above: the same bits whatever
 * set a weight is in.  D: the blocks in flight a group, 2 or 4 (mvk_row),
 * or MVK_STAGED: each warp's row staged in shared memory (mvk_row_s: Q6_K
 * at 8 lanes; gpu_tune_qk_stage); the same bits every way.  T = QK_T_Q6P:
 * Q6_K packed four blocks a group (mvk_row_x4, D = 2's loop and order: its
 * bits).
 */
enum { MVK_STAGED = 0 };

template <int T, int M, int L, int D>
__global__ void __launch_bounds__(256)
k_mvk(const struct mv8_set S, int nb, size_t rowbytes, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, int m)
{
	enum { ST = D == MVK_STAGED };
	__shared__ uint32_t sm[ST ? 8 : 1][ST ? MVK_NS * mvk_stage<L>::W : 1];
	struct mv8_row R = mv8_pick(S);
	const uint8_t *W = R.W;
	int64_t r = R.r, rows = R.rows;
	float *y = R.y;
	const float *scale = R.scale;
	int lane = threadIdx.x & 31;
	float acc[M];

	if (r < rows)	/* its weight row's start towards L2 while the kernel before ends */
		pdl_prefetch(W + r * rowbytes, rowbytes, lane);
	pdl_enter();
	if (r >= rows)
		return;
	const uint8_t *wr = W + r * rowbytes;
	if constexpr (ST) {
		static_assert(T == QK_T_Q6_K && L == 8, "k_mvk: staged rows are Q6_K's at 8 lanes");
		mvk_row_s<M, L, MVK_NS>(sm[threadIdx.x >> 5], wr, nb, q, dk, bs, m, lane, acc);
	} else if constexpr (T == QK_T_Q6P)
		mvk_row_x4<M, L>(W, r * nb, nb, q, dk, bs, m, lane, acc);
	else	/* two or four blocks in flight a group: the same sums */
		mvk_row<T, M, L, D>(wr, nb, q, dk, bs, m, lane, acc);
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
	if constexpr (T == QK_T_Q6P)	/* expert e's row r: block (e rows + r) nb of the stack */
		mvk_row_x4<1, L>(W, (e * rows + r) * nb, nb, q + xr * nb * 256, dk + xr * nb,
		    bs + xr * nb * 16, 1, lane, acc);
	else
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
	return t == QK_T_Q4_K || t == QK_T_Q5_K || t == QK_T_Q6_K || t == QK_T_IQ4_XS ||
	    t == QK_T_Q6P;
}

/* The alignment less 1 the kernels here (and k_mvkt) need of a weight of
 * type t: Q4_K and Q5_K 16 bytes (16-byte loads and copies), Q6_K 4 (words),
 * IQ4_XS 8 (its blocks' own, as matvec_iq4.cu's; 8-byte copies), packed
 * Q6_K 8 (8-byte loads). */
static uintptr_t
qk_align(int t)
{
	return t == QK_T_Q6_K ? 3 : t == QK_T_IQ4_XS || t == QK_T_Q6P ? 7 : 15;
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

typedef void (*mvk_fn)(const struct mv8_set, int, size_t, const int8_t *, const float *,
    const int16_t *, int);

/* k_mvk's form for up to M rows as g's tuning has it: Q6_K at 8 lanes its
 * rows staged (gpu_tune_qk_stage), up to 4 rows (decode and short
 * verifies) four blocks in flight (gpu_tune_qk_depth), else two. */
template <int T, int M, int L>
static mvk_fn
mvk_form(const struct gpu *g)
{
	if constexpr (T != QK_T_Q6P) {	/* (packed Q6_K: its one form) */
		if constexpr (T == QK_T_Q6_K && L == 8)
			if (g->qk_stage)
				return k_mvk<T, M, L, MVK_STAGED>;
		if constexpr (M <= 4)
			if (g->qk_depth == 4)
				return k_mvk<T, M, L, 4>;
	}
	return k_mvk<T, M, L, 2>;
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
		gpu_launch(g, mvk_form<T, 1, L>(g), grid, 256, 0, S, nb, rb, q, dk, bs, m);
	else if (m <= 2)
		gpu_launch(g, mvk_form<T, 2, L>(g), grid, 256, 0, S, nb, rb, q, dk, bs, m);
	else if (m <= 4)
		gpu_launch(g, mvk_form<T, 4, L>(g), grid, 256, 0, S, nb, rb, q, dk, bs, m);
	else if (m <= 8)
		gpu_launch(g, mvk_form<T, 8, L>(g), grid, 256, 0, S, nb, rb, q, dk, bs, m);
	else
		gpu_launch(g, mvk_form<T, 16, L>(g), grid, 256, 0, S, nb, rb, q, dk, bs, m);
	GPU_LAUNCHED(g, "matvec_q8k");
	return 0;
}


extern "C" int
gpu_qk_lanes(int t)
{
	return t == QK_T_Q6_K || t == QK_T_IQ4_XS || t == QK_T_Q6P ? 8 : 4;	/* (IQ4_XS, Q6P: one form) */
}

extern "C" int
gpu_tune_qk(struct gpu *g, int lanes)
{
	if (lanes != 0 && lanes != 4 && lanes != 8)
		return gpu_fail(g, "tune: K-quant lanes per block %d (0, 4 or 8)", lanes);
	return gpu_tune_set(g, &g->qk_lanes, lanes);
}

/* k_mvk's blocks in flight a group of lanes: 0 (its default, 2), 2 or 4
 * (up to 4 input rows; more take 2): the same bits either way (mvk_row). */
extern "C" int
gpu_tune_qk_depth(struct gpu *g, int depth)
{
	if (depth != 0 && depth != 2 && depth != 4)
		return gpu_fail(g, "tune: K-quant blocks in flight %d (0, 2 or 4)", depth);
	return gpu_tune_set(g, &g->qk_depth, depth);
}

/* k_mvk's Q6_K rows at 8 lanes a block read from a copy in shared memory
 * (1: MVK_STAGED) or in place (0, the default): the same bits either way. */
extern "C" int
gpu_tune_qk_stage(struct gpu *g, int on)
{
	if (on != 0 && on != 1)
		return gpu_fail(g, "tune: K-quant rows staged %d (0 or 1)", on);
	return gpu_tune_set(g, &g->qk_stage, on);
}

/*
 * From this many input rows GPU_QKT_AUTO takes k_mvkt for a weight of type
 * t (k_mv8t's MVT_AUTO_M for Q8_0 and NVFP4): where kernel-check's bench
 * i8tc lines have k_mvkt at least as fast as k_mvk on every shape they
 * time (an H100, bench/2026-12-07/2026-12-07-s34-notes.md): Q4_K from 3
 * rows (1.30x, 1.77x; at 2, 0.92x on 12288x4096), Q6_K in place from 5
 * (at 4, 0.92x on 21504x5376), packed Q6_K from 3 (1.00x to 1.18x; at 2,
 * 0.67x to 0.83x).  Q5_K and IQ4_XS, not timed there: 12.
 */
static int
qkt_auto_m(int t)
{
	switch (t) {
	case QK_T_Q4_K:
	case QK_T_Q6P:
		return 3;
	case QK_T_Q6_K:
		return 5;
	default:
		return 12;
	}
}

/* 1 when k_mvkt takes a product of m rows of type t (gpu_tune_qkt): every
 * type on Q8_K activations. */
static int
qkt_takes(const struct gpu *g, int t, int m)
{
	if (!qk_type(t))
		return 0;
	return g->qkt == GPU_QKT_ON || (g->qkt == GPU_QKT_AUTO && m >= qkt_auto_m(t));
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
	return gpu_tune_set(g, &g->qkt, how);
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
	if (t == QK_T_IQ4_XS)	/* (their one form: 8 lanes whatever g->qk_lanes) */
		return mvkt_launch<QK_T_IQ4_XS, 8>(g, d_w, rows, nb, q, dk, bs, m, d_y, d_scale);
	if (t == QK_T_Q6P)
		return mvkt_launch<QK_T_Q6P, 8>(g, d_w, rows, nb, q, dk, bs, m, d_y, d_scale);
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
	if (t == QK_T_Q6P)	/* (its one form: 8 lanes whatever g->qk_lanes) */
		return mvk_launch<QK_T_Q6P, 8>(g, S, nb, q, dk, bs, m);
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
	if (t == QK_T_Q6P)
		return mvk_moe_launch<QK_T_Q6P, 8>(g, d_w, rows, nb, n_exp, d_ids, ns, per, q, dk, bs,
		    d_y, d_scale);
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
	if constexpr (T == QK_T_Q6P)
		mvk_row_x4<GPU_MOE_MT, L>(W, (e * rows + r) * nb, nb, q + (size_t)f * nb * 256,
		    dk + (size_t)f * nb, bs + (size_t)f * nb * 16, n, lane, acc);
	else
		mvk_row<T, GPU_MOE_MT, L>(W + (size_t)e * ebytes + r * rowbytes, nb,
		    q + (size_t)f * nb * 256, dk + (size_t)f * nb, bs + (size_t)f * nb * 16, n, lane,
		    acc);
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
	if (t == QK_T_Q6P)	/* (k_moe_mvkg alone, whatever g->qkt) */
		return mvk_moe_grouped<QK_T_Q6P, 8>(g, d_w, rows, nb, n_exp, G, q, dk, bs, d_y,
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

/* nblk Q6_K blocks at src (the file's layout) as blocks blk0 .. of the
 * weight at dst packed four a group (q6_x4, matvec_qk.cuh), one thread per
 * source byte. */
__global__ void
k_q6k_pack4(uint8_t *__restrict__ dst, int64_t blk0, const uint8_t *__restrict__ src,
    int64_t nblk)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= nblk * 210)
		return;
	int64_t b = blk0 + i / 210;
	int o = (int)(i % 210), k = (int)(b & 3);
	dst[q6p_group(b) + (o < Q6_D ? q6p_body(k) + o : q6p_d(k) + o - Q6_D)] = src[i];
}

extern "C" size_t
gpu_q6k_pack4_bytes(int64_t nblk)
{
	return (size_t)((nblk + 3) / 4) * Q6P_GROUP;
}

extern "C" int
gpu_q6k_pack4(struct gpu *g, void *d_dst, int64_t blk0, const void *d_src, int64_t nblk)
{
	if (nblk < 1 || blk0 < 0 || ((uintptr_t)d_dst & 7) != 0)
		return gpu_fail(g, "q6k pack4: %lld blocks from block %lld, to %p (8-byte aligned)",
		    (long long)nblk, (long long)blk0, d_dst);
	gpu_launch(g, k_q6k_pack4, (unsigned)((nblk * 210 + 255) / 256), 256, 0, (uint8_t *)d_dst,
	    blk0, (const uint8_t *)d_src, nblk);
	GPU_LAUNCHED(g, "q6k pack4");
	return 0;
}
