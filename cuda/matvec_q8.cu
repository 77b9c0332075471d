/*
 * matvec_q8: the decode product on int8 activations (llama.cpp's MMVQ
 * idea): x is quantized once per call to Q8_0 blocks exactly as lib/quant's
 * quant_quantize_act does (d = amax/127 kept as fp16, q = x * (127/amax)
 * rounded half to even, as ggml's x86 quantize_row_q8_0/q8_1),
 * then each block's integer dot runs on dp4a and is scaled as
 * quant_vec_dot scales it, so a product equals the CPU backend's up to
 * the order of the float sums.  Weights: Q8_0, NVFP4, Q4_0 and Q5_0
 * (against Q8_0 activations), Q4_1 and Q5_1 (against Q8_1: the same q plus
 * s = d * sum q as fp16).  One warp per weight row, lane l takes
 * blocks l, l+32, ... (Q8_0, Q4_0, Q5_0: half l % 2 of blocks l / 2, l / 2
 * + 16, ...); every input row is summed by the same code in the
 * same order whatever m is (batch-invariant).  The quantizing kernel may
 * run the op that makes x first (the residual add and RMSNorm, the gated
 * norm, SwiGLU, the sigmoid gate), with the arithmetic of that op's own
 * kernel, so that one launch replaces two or three.  K-quant weights
 * (Q4_K, Q5_K, Q6_K) and IQ4_XS take x as Q8_K blocks and
 * cuda/matvec_qk.cu's kernels (IQ4_XS: cuda/matvec_iq4.cu's, and for
 * prompts cuda/mmq_iq4.cu's), IQ4_NL the Q8_0 blocks and
 * cuda/matvec_iq4.cu's kernel (prompts too: 16 rows a launch): the host
 * code here quantizes x in every form its weights want.
 */
#include "gpu_impl.cuh"

#include <cuda_fp16.h>

enum { Q8_T_Q4_0 = 2, Q8_T_Q4_1 = 3, Q8_T_Q5_0 = 6, Q8_T_Q5_1 = 7, Q8_T_Q8_0 = 8,
	Q8_T_IQ4_NL = 20, Q8_T_IQ4_XS = 23, Q8_T_NVFP4 = 40 };

/* The types whose blocks two lanes take by halves (mv8_half): Q8_0 (under
 * its default layout), Q4_0 and Q5_0 (always); d (fp16) and integer values,
 * no min term.  Their rows are 2-byte aligned (blocks of 34, 18, 22). */
__host__ __device__ constexpr bool
mv8_halves(int t)
{
	return t == Q8_T_Q8_0 || t == Q8_T_Q4_0 || t == Q8_T_Q5_0;
}

/* The types of the tensor-core kernels (cuda/matvec_q8tc.cuh): NVFP4 and
 * the halves' types; and the mask of their rows' alignment (NVFP4 4 bytes,
 * read by words; the others 2, by halfwords). */
__host__ __device__ constexpr bool
mvt_type(int t)
{
	return t == Q8_T_NVFP4 || mv8_halves(t);
}

__host__ __device__ constexpr int
mvt_amask(int t)
{
	return t == Q8_T_NVFP4 ? 3 : 1;
}

/*
 * The Q8_0 (Q8_1 with sx) quantization of 32-block b of a row, whose
 * values o[0..3] are held by lanes 8k..8k+7 of a warp (8 lanes a block,
 * in order): the block's amax, d = amax / 127 and id = 127 /
 * amax as correctly rounded quotients, q = rint(o * id); lane 8k writes
 * dx[b] and sx[b] (sx: Q8_1's d * sum q, only when sx is not NULL).  All
 * 32 lanes call it (lanes of no block with zeros); st: this lane stores.
 */
__device__ __forceinline__ void
q8_block4(float4 o, int lane, bool st, char4 *qo, float *dx, float *sx, size_t b)
{
	float a = fmaxf(fmaxf(fabsf(o.x), fabsf(o.y)), fmaxf(fabsf(o.z), fabsf(o.w)));
#pragma unroll
	for (int m = 1; m < 8; m <<= 1)
		a = fmaxf(a, __shfl_xor_sync(0xFFFFFFFFu, a, m));
	float id = a != 0.0f ? __fdiv_rn(127.0f, a) : 0.0f;
	int q0 = (int)(int8_t)rintf(__fmul_rn(o.x, id));
	int q1 = (int)(int8_t)rintf(__fmul_rn(o.y, id));
	int q2 = (int)(int8_t)rintf(__fmul_rn(o.z, id));
	int q3 = (int)(int8_t)rintf(__fmul_rn(o.w, id));
	if (st)
		*qo = make_char4((signed char)q0, (signed char)q1, (signed char)q2, (signed char)q3);
	float dd = __fdiv_rn(a, 127.0f);
	if (sx != NULL) {	/* Q8_1 (uniform over the launch) */
		int sum = q0 + q1 + q2 + q3;
#pragma unroll
		for (int m = 1; m < 8; m <<= 1)
			sum += __shfl_xor_sync(0xFFFFFFFFu, sum, m);
		if (st && (lane & 7) == 0)
			sx[b] = __half2float(__float2half_rn(__fmul_rn((float)sum, dd)));
	}
	if (st && (lane & 7) == 0)
		dx[b] = __half2float(__float2half_rn(dd));
}

/*
 * 8 lanes per 32-block of x, 4 values a lane: q[w][32], dx[w] (the fp16
 * scale as float), sx[w] (Q8_1's fp16 d * sum q, when sx is not NULL), as
 * q8_block4 quantizes.  P, an op on x first (its result written
 * back to x): GPU_PRE_SWIGLU x = silu(x) * u, as ops.cu's k_binary;
 * GPU_PRE_GEGLU x = gelu_tanh(x) * u, as moe.cu's k_geglu;
 * GPU_PRE_SIGMOID x *= sigmoid(gate), the gate of element e at u[e / hd *
 * ldu + e % hd] (heads of hd, a multiple of 32), as k_sigmoid_mul.  x and u
 * are read and written as floats (any alignment), q as char4.
 */
template <int P>
__global__ void
k_q8x(float *x, const float *u, int hd, int64_t ldu, int64_t total, int8_t *q, float *dx,
    float *sx)
{
	int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, e = l * 4;
	bool in = l < total * 8;

	pdl_enter();
	if ((l & ~(int64_t)31) >= total * 8)	/* the whole warp past the end */
		return;
	float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	if (in) {
		const float *ue = u + e;
		if (P == GPU_PRE_SIGMOID) {	/* 32-bit division when it fits: no call */
			int64_t h = e <= INT32_MAX ? (int64_t)((unsigned)e / (unsigned)hd) : e / hd;
			ue = u + h * ldu + (e - h * hd);
		}
		v = make_float4(x[e], x[e + 1], x[e + 2], x[e + 3]);
		float4 b = P != 0 ? make_float4(ue[0], ue[1], ue[2], ue[3]) : v;
		/* a use of all eight here: the compiler would sink each load to its op,
		 * after the divisions before it (serial load latencies) */
		asm volatile("" : : "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "f"(b.x), "f"(b.y),
		    "f"(b.z), "f"(b.w));
		if (P == GPU_PRE_SWIGLU) {
			v.x = __fmul_rn(gpu_silu(v.x), b.x);
			v.y = __fmul_rn(gpu_silu(v.y), b.y);
			v.z = __fmul_rn(gpu_silu(v.z), b.z);
			v.w = __fmul_rn(gpu_silu(v.w), b.w);
		} else if (P == GPU_PRE_GEGLU) {
			v.x = __fmul_rn(gpu_gelu_tanh(v.x), b.x);
			v.y = __fmul_rn(gpu_gelu_tanh(v.y), b.y);
			v.z = __fmul_rn(gpu_gelu_tanh(v.z), b.z);
			v.w = __fmul_rn(gpu_gelu_tanh(v.w), b.w);
		} else if (P == GPU_PRE_SIGMOID) {	/* the 4 gates of one head */
			v.x = __fmul_rn(v.x, gpu_sigmoid(b.x));
			v.y = __fmul_rn(v.y, gpu_sigmoid(b.y));
			v.z = __fmul_rn(v.z, gpu_sigmoid(b.z));
			v.w = __fmul_rn(v.w, gpu_sigmoid(b.w));
		}
		if (P != 0)
			x[e] = v.x, x[e + 1] = v.y, x[e + 2] = v.z, x[e + 3] = v.w;
	}
	q8_block4(v, threadIdx.x & 31, in, (char4 *)q + l, dx, sx, (size_t)(l >> 3));
}

/* NVFP4's sub-blocks (below: mv8_row calls it). */
template <int M, int A, int LO = 0>
__device__ __forceinline__ void
mv8_nv(const uint8_t *wr, int nsub, int s, bool two, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, float *acc, uint4 tab);

#include "matvec_q8.cuh"

/* The low words of NVFP4's two tables (the high ones are immediates), its
 * selector base 0x32103210 and MV8_MAGIC (dp4a's first addend), held in
 * registers through the loop: or'ed with m >> 5 (0: m <= 16) so that the
 * compiler cannot fold them (it copied the constants into a register
 * before each use, 28 more instructions a block, and split an and-or in
 * two). */
__device__ __forceinline__ uint4
mv8_tab(int m)
{
	unsigned z = (unsigned)m >> 5, k = 0x32103210u | z;

	asm("mov.b32 %0, %1;" : "=r"(k) : "r"(k));	/* (else or'ed in after the and) */
	return make_uint4(0x03020100u | z, 0xFDFEFF00u | z, k, MV8_MAGIC | z);
}

/*
 * The 8 codes of a word of NVFP4's GPU layout (nibble k = value k) for
 * dp4a as two parts whose difference is their kvalues (e2m1 codes as
 * integers, twice the value): p[0] (values 0..3) and p[1] (4..7) the
 * positive codes' kvalues, n[0], n[1] the negative codes' magnitudes, 0
 * elsewhere.  One permute of the magnitude table (0,1,2,3,4,6,8,12) per
 * part with the codes themselves as the selector: a code's bit 3 (its
 * sign) makes prmt give the table byte's bit 7, 0, so v gives the positive
 * codes and v ^ 0x88888888 the negative ones.  7 instructions for 8 values
 * (gpu_fp4x8, one signed part: 11), for twice the dp4a: the decode of the
 * one- and two-row products.  tab: mv8_tab's words.
 */
__device__ __forceinline__ void
mv8_fp4pn(uint32_t v, uint4 tab, int *p, int *n)
{
	uint32_t u = v ^ 0x88888888u;

	p[0] = (int)gpu_prmt(tab.x, 0x0C080604u, v);
	p[1] = (int)gpu_prmt(tab.x, 0x0C080604u, v >> 16);
	n[0] = (int)gpu_prmt(tab.x, 0x0C080604u, u);
	n[1] = (int)gpu_prmt(tab.x, 0x0C080604u, u >> 16);
}

/*
 * Two canonical ue4m3 scales (the low bytes of sc, gpu_ue4m3c) as
 * gpu_ue4m3c_half gives them (ggml's value / 2): each byte b read as the
 * fp16 of bits b << 7 (ggml's value * 2^-8, exactly) and multiplied by 128
 * in fp16 (exact: at most 240).
 */
__device__ __forceinline__ void
mv8_ue4m3c2(uint32_t sc, float *ws)
{
	uint32_t h01 = __byte_perm(sc, 0, 0x4140) << 7;
	float2 f01 = __half22float2(__hmul2(*(const __half2 *)&h01,
	    __floats2half2_rn(128.0f, 128.0f)));

	ws[0] = f01.x, ws[1] = f01.y;
}

/*
 * mv8_ue4m3c2's values by fp32: byte b << 20 read as a float is the ue4m3
 * value * 2^-120 exactly (the same exponent and mantissa fields; e = 0 a
 * subnormal, m * 2^-129 against ue4m3's m * 2^-9), times 2^119 (exact).
 */
__device__ __forceinline__ void
mv8_ue4m3c2f(uint32_t sc, float *ws)
{
	ws[0] = __fmul_rn(__uint_as_float((sc & 0x7Fu) << 20), 0x1p119f);
	ws[1] = __fmul_rn(__uint_as_float((sc & 0x7F00u) << 12), 0x1p119f);
}

/* Lane 0 writes the warp's sums (a fixed butterfly) for the m input rows. */
template <int M>
__device__ __forceinline__ void
mv8_store(float *acc, int m, int64_t rows, int64_t r, int lane, float *y, const float *scale)
{
#pragma unroll
	for (int j = 0; j < M; j++) {
		if (j >= m)
			break;
		float v = acc[j];
		for (int o = 16; o > 0; o >>= 1)
			v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
		if (lane == 0)
			y[(size_t)j * rows + r] = scale != NULL ? __fmul_rn(v, *scale) : v;
	}
}

/*
 * NVFP4 (the GPU layout, gpu_nvfp4_pack: a row's codes in value order, 8
 * bytes a 16-value sub-block, then the sub-blocks' scales, a byte each):
 * acc[j] += sub-block s of the weight row at wr . the same 16 values of
 * input row j, then (two) sub-block s + 32 likewise: acc = fma(dx, ws * t,
 * acc) a sub-block, t its integer dot, ws its scale (ws * t exact: 4 and
 * 15 significant bits), dx the scale of the 32-block of x it lies in.
 * The lanes of a warp take sub-blocks c + lane and c + 32 + lane of each
 * chunk of 64 (1024 values, from sub-block c): each of their loads of x
 * (16 bytes a lane) reads 512 contiguous bytes, 4 L1 wavefronts (a lane
 * taking 32 contiguous values made it 8), and of codes 256.  M <= 2
 * decodes by mv8_fp4pn (t = the positive parts' dot - the negative
 * parts'), more rows by gpu_fp4x8 (half the dp4a): the same integer dots,
 * so the same bits for every m.  A: rows 8-byte aligned (a sub-block's
 * codes in one load).
 */
template <int M, int A, int LO>
__device__ __forceinline__ void
mv8_nv(const uint8_t *wr, int nsub, int s, bool two, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, float *acc, uint4 tab)
{
	const uint8_t *cp = wr + 8 * (size_t)s, *sp = wr + 8 * (size_t)nsub + s;
	uint32_t c[4] = { 0, 0, 0, 0 }, sc;
	float ws[2];

#pragma unroll
	for (int k = 0; k < 2; k++) {	/* sub-blocks s and s + 32: codes 256 bytes apart */
		const uint32_t *w = (const uint32_t *)(cp + 256 * k);
		if (k == 1 && !two)
			break;
		if (A && M <= 2)	/* past L1, which then keeps x (measured with a lane's
					 * 32 codes a load: bench/2026-12-02/2026-12-02-s10-run7-*) */
			asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
			    : "=r"(c[2 * k]), "=r"(c[2 * k + 1]) : "l"(w));
		else if (A) {
			uint2 u = *(const uint2 *)w;
			c[2 * k] = u.x, c[2 * k + 1] = u.y;
		} else
			c[2 * k] = w[0], c[2 * k + 1] = w[1];
	}
	sc = (uint32_t)sp[0] | (two ? (uint32_t)sp[32] << 8 : 0u);
	uint32_t f = 0;	/* LO: the loads' xor fold, in place of the arithmetic (a bound) */
	int p[8], n[8];	/* M <= 2: the positive and negative parts; else p the values */
	if constexpr (LO)
		f = c[0] ^ c[1] ^ c[2] ^ c[3] ^ sc;
	else {
		if (M <= 2)
			mv8_ue4m3c2(sc, ws);
		else	/* the same values by fp32 (the fp16 multiply measured slower here) */
			mv8_ue4m3c2f(sc, ws);
#pragma unroll
		for (int i = 0; i < 4; i++)
			if (M <= 2)
				mv8_fp4pn(c[i], tab, &p[2 * i], &n[2 * i]);
			else
				gpu_fp4x8(c[i], tab.x, tab.y, tab.z, &p[2 * i], &p[2 * i + 1]);
	}
#pragma unroll
	for (int j = 0; j < M; j++) {
		const int8_t *xr = q + (size_t)j * nb * 32;
#pragma unroll
		for (int k = 0; k < 2; k++) {
			if (k == 1 && !two)
				break;
			int e = s + 32 * k;	/* the sub-block: values 16 e .. */
			int4 a = *(const int4 *)(xr + 16 * (size_t)e);
			if constexpr (LO) {
				uint32_t h = f ^ (uint32_t)a.x ^ (uint32_t)a.y ^ (uint32_t)a.z ^
				    (uint32_t)a.w ^ __float_as_uint(dx[(size_t)j * nb + e / 2]);
				acc[j] = __uint_as_float(__float_as_uint(acc[j]) ^ (h & 0x807FFFFFu));
				continue;
			}
			int i = __dp4a(p[4 * k], a.x, (int)tab.w);
			i = __dp4a(p[4 * k + 1], a.y, i), i = __dp4a(p[4 * k + 2], a.z, i);
			i = __dp4a(p[4 * k + 3], a.w, i);
			if (M <= 2) {
				int in = __dp4a(n[4 * k], a.x, 0);
				in = __dp4a(n[4 * k + 1], a.y, in), in = __dp4a(n[4 * k + 2], a.z, in);
				i -= __dp4a(n[4 * k + 3], a.w, in);
			}
			acc[j] = __fmaf_rn(dx[(size_t)j * nb + e / 2], __fmul_rn(ws[k], mv8_i2f(i)),
			    acc[j]);
		}
	}
}

template <int T, int M, int L = 1, int A = 0, int LO = 0>
__global__ void __launch_bounds__(256, 4)
k_mv8(const struct mv8_set S, int nb, size_t rowbytes, const int8_t *__restrict__ q,
    const float *__restrict__ dx, const float *__restrict__ sx, int m)
{
	const struct mv8_row R = mv8_pick(S);
	const uint8_t *__restrict__ W = R.W;
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
	const uint4 tab = mv8_tab(m);
	mv8_row<T, M, L, A, LO>(W + r * rowbytes, nb, q, dx, sx, lane, tab, acc);
	mv8_store<M>(acc, m, rows, r, lane, y, scale);
}

/*
 * The experts' products (gpu_moe_matvec): the warp of row r of slot s =
 * s0 + blockIdx.y is k_mv8<T, 1, L, A>'s on quantized input row s / per
 * (its q, dx, sx) against expert ids[s]'s rows (ebytes apart), into
 * y[s][rows]: the bits of that one row's product with that expert alone.
 * An id outside [0, n_exp) gives NaN rows.
 */
template <int T, int L, int A>
__global__ void __launch_bounds__(256, 4)
k_moe_mv8(const uint8_t *__restrict__ W, size_t ebytes, size_t rowbytes, int nb, int64_t rows,
    int n_exp, const int32_t *__restrict__ ids, int s0, int per, const int8_t *__restrict__ q,
    const float *__restrict__ dx, const float *__restrict__ sx, float *y, const float *scale)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31, s = s0 + (int)blockIdx.y;
	float acc[1];

	pdl_enter();	/* the ids are an earlier kernel's */
	if (r >= rows)
		return;
	int e = ids[s];
	size_t xr = (size_t)(s / per);
	float *ys = y + (size_t)s * rows;
	if (e < 0 || e >= n_exp) {
		if (lane == 0)
			ys[r] = __int_as_float(0x7FC00000);
		return;
	}
	const uint4 tab = mv8_tab(1);
	mv8_row<T, 1, L, A, 0>(W + (size_t)e * ebytes + r * rowbytes, nb, q + xr * nb * 32,
	    dx + xr * nb, sx + xr * nb, lane, tab, acc);
	mv8_store<1>(acc, 1, rows, r, lane, ys, scale);
}

/*
 * The experts grouped (gpu_impl.cuh's moe_group): mv8_row at M (>= the
 * tile's n rows: mv8_block and mv8_nv take every one of M rows, so the
 * rows past n are the gathered rows after them, whose sums are dropped) on
 * the gathered rows at q, dx, sx against the weight row at wr, then
 * mv8_store's butterfly per row j < n into y[slot[j]][rows].  Row j's sums
 * are the same operations whatever M (the integer dots, then the float
 * steps in block order), and mv8_tab(n) is mv8_tab(1)'s words (n <= 16):
 * k_moe_mv8's bits.
 */
template <int T, int M, int L, int A>
__device__ __forceinline__ void
mv8_grows(const uint8_t *__restrict__ wr, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, const float *__restrict__ sx, int n, int64_t rows, int64_t r,
    int lane, const int32_t *__restrict__ slot, float *y, const float *scale)
{
	float acc[M];

	mv8_row<T, M, L, A, 0>(wr, nb, q, dx, sx, lane, mv8_tab(n), acc);
#pragma unroll
	for (int j = 0; j < M; j++) {
		if (j >= n)
			break;
		float v = acc[j];
		for (int o = 16; o > 0; o >>= 1)
			v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
		if (lane == 0)
			y[(size_t)slot[j] * rows + r] = scale != NULL ? __fmul_rn(v, *scale) : v;
	}
}

/* The warp of row r of tile t0 + blockIdx.y (bucket e, first f, count n):
 * mv8_grows at the least M of 1, 2, 4, 8, 16 that holds n.  An empty tile
 * writes nothing; bucket n_exp NaN rows.  tc > 0: k_moe_mv8t runs beside
 * it with that bound, and the tiles it takes (a pair's second, or a count
 * of tc or more) are left to it. */
template <int T, int L, int A>
__global__ void __launch_bounds__(256, 4)
k_moe_mv8g(const uint8_t *__restrict__ W, size_t ebytes, size_t rowbytes, int nb, int64_t rows,
    int n_exp, const int4 *__restrict__ tile, int t0, const int32_t *__restrict__ perm,
    const int8_t *__restrict__ q, const float *__restrict__ dx, const float *__restrict__ sx,
    float *y, const float *scale, int tc)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;

	pdl_enter();	/* the tiles and the gathered rows are earlier kernels' */
	if (r >= rows)
		return;
	if (tc > 0) {
		int4 tl = tile[t0 + (int)blockIdx.y];
		if ((tl.w & 1) || tl.z >= tc)
			return;
	}
	int e, f, n;
	if (!moe_tile(tile, t0, perm, n_exp, rows, r, lane, y, &e, &f, &n))
		return;
	const int32_t *slot = perm + f;
	const uint8_t *wr = W + (size_t)e * ebytes + r * rowbytes;
	const int8_t *qf = q + (size_t)f * nb * 32;
	const float *df = dx + (size_t)f * nb, *sf = sx + (size_t)f * nb;
	if (n <= 1)
		mv8_grows<T, 1, L, A>(wr, nb, qf, df, sf, n, rows, r, lane, slot, y, scale);
	else if (n <= 2)
		mv8_grows<T, 2, L, A>(wr, nb, qf, df, sf, n, rows, r, lane, slot, y, scale);
	else if (n <= 4)
		mv8_grows<T, 4, L, A>(wr, nb, qf, df, sf, n, rows, r, lane, slot, y, scale);
	else if (n <= 8)
		mv8_grows<T, 8, L, A>(wr, nb, qf, df, sf, n, rows, r, lane, slot, y, scale);
	else
		mv8_grows<T, GPU_MOE_MT, L, A>(wr, nb, qf, df, sf, n, rows, r, lane, slot, y, scale);
}

/*
 * The same sums in the same order for rows of a multiple of 32 weight
 * blocks, 16-byte aligned: the warp copies MV8_CH blocks of its row at a
 * time into shared memory with 16-byte coalesced copies (cp.async: no
 * register holds them on the way; a lane's block read in place takes 9 or
 * 10 narrow loads, each touching nine lines), then lane l takes blocks l
 * and l + 32 of the chunk as k_mv8 does.  Where it pays is measured
 * (mv8_launch).
 */
#define MV8_CH 64

template <int T, int M>
__global__ void __launch_bounds__(256, 4)
k_mv8s(const struct mv8_set S, int nb, size_t rowbytes, const int8_t *__restrict__ q,
    const float *__restrict__ dx, const float *__restrict__ sx, int m)
{
	enum { BS = mv8_bs<T>::v, N16 = MV8_CH * BS / 16, U = (N16 + 31) / 32 };
	__shared__ int4 sm[8][N16];
	const struct mv8_row R = mv8_pick(S);
	const uint8_t *__restrict__ W = R.W;
	int64_t r = R.r, rows = R.rows;
	float *y = R.y;
	const float *scale = R.scale;
	int lane = threadIdx.x & 31, nbw = nb;	/* (not NVFP4) */
	int4 *buf = sm[threadIdx.x >> 5];
	float acc[M];

	if (r < rows)	/* its weight row's start towards L2 while the kernel before ends */
		pdl_prefetch(W + r * rowbytes, rowbytes, lane);
	pdl_enter();
	if (r >= rows)
		return;
	const uint4 tab = mv8_tab(m);
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	const int4 *wr = (const int4 *)(W + r * rowbytes);
	for (int c0 = 0; c0 < nbw; c0 += MV8_CH) {
		int nc = min(MV8_CH, nbw - c0), n16 = nc * BS / 16;
		const int4 *src = wr + (size_t)c0 * BS / 16;
		__syncwarp();	/* the last chunk read */
#if __CUDA_ARCH__ >= 800
#pragma unroll
		for (int u = 0; u < U; u++)	/* copies that hold no register */
			if (lane + 32 * u < n16)
				asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" : :
				    "r"((unsigned)__cvta_generic_to_shared(buf + lane + 32 * u)),
				    "l"(src + lane + 32 * u) : "memory");
		asm volatile("cp.async.wait_all;" : : : "memory");
#else
#pragma unroll
		for (int u = 0; u < U; u++)
			if (lane + 32 * u < n16)
				buf[lane + 32 * u] = __ldg(src + lane + 32 * u);
#endif
		__syncwarp();
		for (int h = 0; h < nc; h += 32)
			mv8_block<T, M>((const uint8_t *)buf + (h + lane) * BS, c0 + h + lane, nb,
			    q, dx, sx, acc, tab);
	}
	mv8_store<M>(acc, m, rows, r, lane, y, scale);
}

#include "matvec_q8tc.cuh"

extern "C" int
gpu_tune_mv8(struct gpu *g, int how)
{
	if (how < GPU_MV8_AUTO || how > GPU_MV8_TC)
		return gpu_fail(g, "tune: int8 product kernel %d (0..5)", how);
	return gpu_tune_set(g, &g->mv8, how);
}

extern "C" int
gpu_can_matvec_q8(int t)
{
	return t == Q8_T_Q8_0 || t == Q8_T_NVFP4 || t == Q8_T_Q4_1 || t == Q8_T_Q5_1 ||
	    t == Q8_T_IQ4_NL || t == Q8_T_Q4_0 || t == Q8_T_Q5_0 || qk_type(t);
}

/* (Q4_0 and Q5_0, as the K-quants: up to the step rows, their prompts on
 * gpu_matmul's dequantized tiles through cuBLAS; no int8 GEMM takes them,
 * and the decode kernel's launches of 16 over a prompt would read the
 * weight n / 16 times) */
extern "C" int
gpu_can_matvec_q8_rows(int t, int64_t n)
{
	return gpu_can_matvec_q8(t) && n >= 1 && ((!qk_type(t) && t != Q8_T_Q4_0 &&
	    t != Q8_T_Q5_0) || t == Q8_T_IQ4_XS || n <= GPU_MATVEC_MAX_ROWS);
}

extern "C" int
gpu_can_matvec_q8_step(const struct gpu *g, int t, int64_t n)
{
	return gpu_can_matvec_q8_rows(t, n) || (gpu_can_matvec_q8(t) && n >= 1 &&
	    n <= g->step_rows);
}

/*
 * The step-row limit (gpu.h).  The backend's (lib/backend.h's contract:
 * a row of a step has the same bits in every step of up to that many
 * rows) is this value: the CUDA backend opens at 32, kernel-check's
 * "rows32" lines holding each op at 32 to its rows run one by one at 16
 * (H100, 2026-12-05: all 180 bit for bit).
 */
extern "C" int
gpu_tune_step_rows(struct gpu *g, int rows)
{
	static_assert(GPU_STEP_ROWS_MAX <= MVT_MAX_M, "k_mv8t takes a step in one launch");
	if (rows != GPU_MATVEC_MAX_ROWS && rows != GPU_STEP_ROWS_MAX)
		return gpu_fail(g, "tune: step rows %d (%d or %d)", rows, GPU_MATVEC_MAX_ROWS,
		    GPU_STEP_ROWS_MAX);
	return gpu_tune_set(g, &g->step_rows, rows);
}

extern "C" int
gpu_step_rows(const struct gpu *g)
{
	return g->step_rows;
}

/* Q8_0's lanes a block by default: 1 or 2 (GPU_MV8_LANE2's form).  Two,
 * from the H200's bench i8 lines (bench/2026-12-01/2026-12-01-s5-run9-*): m = 1 17.4
 * / 17.6 us on 12288x4096 / 4096x12288 (one lane 17.0 / 17.6), m = 4 22.9 /
 * 21.2 (28.6 / 26.7).  One layout for every m: batch invariance.  NVFP4
 * has one form, by sub-blocks on the GPU layout (mv8_nv). */
#define MV8_Q8_0_LANES 2

template <int T>
static int
mv8_launch_k(struct gpu *g, const struct mv8_set &S, int nb, size_t rb, const int8_t *q,
    const float *dx, const float *sx, int m)
{
	unsigned grid = S.blk[S.nw];
	int al = 1;

	for (int i = 0; i < S.nw; i++)
		al &= ((uintptr_t)S.W[i] & 15) == 0;
	if constexpr (T == Q8_T_NVFP4) {
		int a8 = al && rb % 8 == 0;	/* a sub-block's codes by one 8-byte load */
		if (g->mv8 == GPU_MV8_LOADS && a8) {	/* the bench's bound: m = 1, 4 */
			if (m == 1)
				gpu_launch(g, k_mv8<T, 1, 2, 1, 1>, grid, 256, 0, S, nb, rb, q, dx, sx, m);
			else if (m == 4)
				gpu_launch(g, k_mv8<T, 4, 2, 1, 1>, grid, 256, 0, S, nb, rb, q, dx, sx, m);
			else
				return gpu_fail(g, "matvec_q8: loads only for m = 1 or 4");
			GPU_LAUNCHED(g, "matvec_q8");
			return 0;
		}
#define MV8_M(M_) case M_: if (a8) \
		gpu_launch(g, k_mv8<T, M_, 2, 1>, grid, 256, 0, S, nb, rb, q, dx, sx, m); \
	else \
		gpu_launch(g, k_mv8<T, M_, 2, 0>, grid, 256, 0, S, nb, rb, q, dx, sx, m); \
	break
		switch (m) {
		MV8_M(1); MV8_M(2); MV8_M(3); MV8_M(4); MV8_M(5); MV8_M(6); MV8_M(7); MV8_M(8);
		MV8_M(9); MV8_M(10); MV8_M(11); MV8_M(12); MV8_M(13); MV8_M(14); MV8_M(15);
		default: MV8_M(16);
		}
#undef MV8_M
	} else if constexpr (T == Q8_T_Q4_0 || T == Q8_T_Q5_0) {	/* two lanes a block */
#define MV8_M(M_) case M_: \
		gpu_launch(g, k_mv8<T, M_, 2>, grid, 256, 0, S, nb, rb, q, dx, sx, m); break
		switch (m) {
		MV8_M(1); MV8_M(2); MV8_M(3); MV8_M(4); MV8_M(5); MV8_M(6); MV8_M(7); MV8_M(8);
		MV8_M(9); MV8_M(10); MV8_M(11); MV8_M(12); MV8_M(13); MV8_M(14); MV8_M(15);
		default: MV8_M(16);
		}
#undef MV8_M
	} else {
		/* Staged rows by default where measured faster on the H200 (9B-shape
		 * random GGUFs, before session 5's cheaper decode): Q8_0 with m =
		 * 2..8 (K=3 verify 8.17 vs 8.32 ms).  In place: m = 1 (Q8_0 decode
		 * 180 vs 173 tok/s) and m = 9..16 (staged, Q8_0 prefill fell from
		 * 1015 to 650 tok/s and the K=8 verify from 13.0 to 16.3 ms).
		 * gpu_tune_mv8 forces either.  Both give the same bits. */
		int can = nb % 32 == 0 && al && rb % 16 == 0;
		int ln = T == Q8_T_Q8_0 ? (g->mv8 == GPU_MV8_LANE2 ? 2 : MV8_Q8_0_LANES) : 1;
		int st = ln == 1 && (g->mv8 == GPU_MV8_STAGED ? can : g->mv8 == GPU_MV8_PLACE ? 0 :
		    T == Q8_T_Q8_0 && m > 1 && m <= 8 && can);	/* (AUTO, and LANE2 for Q8_0) */
#define MV8_M(M_) case M_: if (st) \
		gpu_launch(g, k_mv8s<T, M_>, grid, 256, 0, S, nb, rb, q, dx, sx, m); \
	else if (ln == 2) \
		gpu_launch(g, k_mv8<T, M_, T == Q8_T_Q8_0 ? 2 : 1>, grid, 256, 0, S, nb, rb, q, dx, \
		    sx, m); \
	else \
		gpu_launch(g, k_mv8<T, M_>, grid, 256, 0, S, nb, rb, q, dx, sx, m); \
	break
		switch (m) {
		MV8_M(1); MV8_M(2); MV8_M(3); MV8_M(4); MV8_M(5); MV8_M(6); MV8_M(7); MV8_M(8);
		MV8_M(9); MV8_M(10); MV8_M(11); MV8_M(12); MV8_M(13); MV8_M(14); MV8_M(15);
		default: MV8_M(16);
		}
#undef MV8_M
	}
	GPU_LAUNCHED(g, "matvec_q8");
	return 0;
}

/*
 * From this many input rows GPU_MV8_AUTO takes k_mv8t for Q8_0, NVFP4,
 * Q4_0 and Q5_0 (the same bits as k_mv8: kernel-check's "tc=default" lines, 186 of them
 * bit for bit on the H200 of 2026-12-05).  There, per product (bench i8tc,
 * 12288x4096 and 4096x12288): m = 8 0.95-1.10x k_mv8's speed, m = 16
 * 1.29-1.44x, m = 32 (one launch against two of 16) 1.81-2.39x; m = 1 and 4
 * 0.29-0.75x.  12: past the m = 8 break-even, not measured between (Q4_0
 * and Q5_0 take Q8_0's bound, unmeasured).
 */
#define MVT_AUTO_M 12

/* 1 when k_mv8t takes the set S (its rows' alignment: Q8_0, Q4_0, Q5_0 2
 * bytes, NVFP4 4: mvt_amask). */
template <int T>
static int
mvt_takes(const struct mv8_set &S, size_t rb)
{
	uintptr_t o = rb;

	for (int i = 0; i < S.nw; i++)
		o |= (uintptr_t)S.W[i];
	return (o & mvt_amask(T)) == 0;
}

/*
 * The products of the set S for m input rows: k_mv8 / k_mv8s as
 * mv8_launch_k picks them (m <= 16), or k_mv8t for Q8_0, Q4_0, Q5_0 (whose
 * layout, two lanes a block, it reproduces) and NVFP4: under GPU_MV8_TC
 * (m <= 32), and under GPU_MV8_AUTO from MVT_AUTO_M rows where the rows'
 * alignment lets it (the same bits either way).
 */
template <int T>
static int
mv8_launch(struct gpu *g, const struct mv8_set &S, int nb, size_t rb, const int8_t *q,
    const float *dx, const float *sx, int m)
{
	static_assert(MV8_Q8_0_LANES == 2, "k_mv8t reproduces Q8_0's two-lane layout");
	if constexpr (mvt_type(T))
		if (g->mv8 == GPU_MV8_TC || (g->mv8 == GPU_MV8_AUTO && m >= MVT_AUTO_M &&
		    mvt_takes<T>(S, rb)))
			return mvt_launch<T>(g, S, nb, rb, q, dx, m);
	return mv8_launch_k<T>(g, S, nb, rb, q, dx, sx, m);
}

/*
 * Input rows a launch of weight type t (at d_w, rows of rb bytes) takes
 * in a product of n rows: 32 by k_mv8t (Q8_0, NVFP4, Q4_0, Q5_0:
 * GPU_MV8_TC, or GPU_MV8_AUTO for 17..step_rows rows where k_mv8t takes
 * the rows' alignment, mvt_takes'), else 16.
 */
static int
mv8_group(const struct gpu *g, int t, int64_t n, const void *d_w, size_t rb)
{
	if (!mvt_type(t))
		return GPU_MATVEC_MAX_ROWS;
	if (g->mv8 == GPU_MV8_TC)
		return MVT_MAX_M;
	return g->mv8 == GPU_MV8_AUTO && n > GPU_MATVEC_MAX_ROWS && n <= g->step_rows &&
	    (((uintptr_t)d_w | rb) & mvt_amask(t)) == 0 ? MVT_MAX_M : GPU_MATVEC_MAX_ROWS;
}

/* Row bytes of a Q8-path weight of ne0 columns. */
static size_t
mv8_rowbytes(int t, int64_t ne0)
{
	if (t == Q8_T_NVFP4)
		return (size_t)(ne0 / 64) * 36;
	return (size_t)(ne0 / 32) * mv8_block_bytes(t);
}

/* x quantized for the products: Q8_0/Q8_1 (q, dx, sx) and Q8_K (kq, kd, kb,
 * when a K-quant is among the weights); xn: RMSNorm(x) (the fused call
 * with a K-quant). */
struct mv8_x {
	int8_t	*q, *kq;
	float	*dx, *sx, *kd, *xn;
	int16_t	*kb;
};

/* The layout of the scratch for n rows of ne0 quantized (with the Q8_K
 * form when qk, room for the normed x when norm) from p, 256-byte aligned
 * pieces: its size; X's pointers (when X is not NULL). */
static size_t
mv8_layout(uint8_t *p, int64_t n, int64_t ne0, int qk, int norm, struct mv8_x *X)
{
	size_t qn = (size_t)n * ne0, nb = (size_t)(ne0 / 32), a = 256;
	size_t o1 = (qn + a - 1) / a * a, o2 = o1 + (n * nb * 4 + a - 1) / a * a;
	size_t o3 = o2 + (n * nb * 4 + a - 1) / a * a, o4 = o3, o5 = o3, o6 = o3, end = o3;

	if (qk) {
		o4 = o3 + (qn + a - 1) / a * a;
		o5 = o4 + ((size_t)n * (ne0 / 256) * 4 + a - 1) / a * a;
		o6 = end = o5 + (qn / 8 + a - 1) / a * a;
	}
	if (norm)
		end = o6 + qn * 4;
	if (X != NULL) {
		X->q = (int8_t *)p, X->dx = (float *)(p + o1), X->sx = (float *)(p + o2);
		X->kq = qk ? (int8_t *)(p + o3) : NULL;
		X->kd = qk ? (float *)(p + o4) : NULL;
		X->kb = qk ? (int16_t *)(p + o5) : NULL;
		X->xn = norm ? (float *)(p + o6) : NULL;
	}
	return (end + a - 1) / a * a;
}

/* The scratch for n rows of ne0 quantized, as mv8_layout lays it out. */
static int
mv8_scratch(struct gpu *g, int64_t n, int64_t ne0, int qk, int norm, struct mv8_x *X)
{
	uint8_t *p;

	if ((p = (uint8_t *)gpu_scratch(g, mv8_layout(NULL, n, ne0, qk, norm, NULL) + 256)) ==
	    NULL)
		return -1;
	mv8_layout(p, n, ne0, qk, norm, X);
	return 0;
}

/* Check the nw weights; *q81: one of them takes Q8_1 activations, *q80:
 * Q8_0 or Q8_1, *qk: Q8_K. */
static int
mv8_types(struct gpu *g, int nw, const int *t, const int64_t *rows, int64_t ne0,
    int64_t n, int *q81, int *q80, int *qk)
{
	*q81 = *q80 = *qk = 0;
	for (int i = 0; i < nw; i++) {
		if (!gpu_can_matvec_q8(t[i]))
			return gpu_fail(g, "matvec_q8: type %d (Q8_0, NVFP4, Q4_0, Q4_1, Q5_0, "
			    "Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K, IQ4_XS)", t[i]);
		int blk = qk_type(t[i]) ? 256 : t[i] == Q8_T_NVFP4 ? 64 : 32;
		if (!gpu_can_matvec_q8_step(g, t[i], n) || rows[i] < 1 || ne0 % blk != 0)
			return gpu_fail(g, "matvec_q8: %lld rows of %lld, %lld inputs",
			    (long long)rows[i], (long long)ne0, (long long)n);
		*q81 |= t[i] == Q8_T_Q4_1 || t[i] == Q8_T_Q5_1;
		*qk |= qk_type(t[i]);
		*q80 |= !qk_type(t[i]);
	}
	return 0;
}

/*
 * The nw products of the quantized x: for up to 16 rows,
 * weights of one type that follow each other share a launch (mv8_set; the
 * K-quants' k_mvk too);
 * for more, each takes the GEMM or launches of 16 rows.  Under
 * GPU_MV8_TC, Q8_0 and NVFP4 take 32 rows where 16 are said here (the
 * GEMM still takes n > 16 unless GPU_MMQ_OFF): the same bits, fewer
 * launches.  Up to g->step_rows rows never take a GEMM: launches of 16
 * (the K-quants and IQ4_XS too), or of up to 32 where mv8_group says so.
 */
static int
mv8_products(struct gpu *g, int nw, const int *t, const void *const *d_w,
    const int64_t *rows, int64_t ne0, const struct mv8_x *X, int64_t n, float *const *d_y,
    const float *const *d_scale)
{
	int nb = (int)(ne0 / 32);
	const int8_t *q = X->q;
	const float *dx = X->dx, *sx = X->sx;

	for (int i = 0, j; i < nw; i = j) {
		size_t rb = mv8_rowbytes(t[i], ne0);
		if (t[i] == Q8_T_IQ4_XS && n > g->step_rows) {	/* prefill: mmq_iq4.cu */
			j = i + 1;
			if (iq4xs_matmul(g, d_w[i], rows[i], ne0, X->kq, X->kd, n, d_y[i],
			    d_scale != NULL ? d_scale[i] : NULL) != 0)
				return -1;
			continue;
		}
		if (qk_type(t[i])) {	/* n <= g->step_rows (mv8_types): qk_group's rows a launch, */
			int kg = qk_group(g, t[i], n);	/* weights of one type that follow each other a set */
			for (j = i + 1; j < nw && j - i < MV8_SET && t[j] == t[i]; j++)
				;
			for (int64_t r0 = 0; r0 < n; r0 += kg) {
				struct mv8_set S;
				memset(&S, 0, sizeof S);
				S.nw = j - i;
				for (int k = 0; k < S.nw; k++) {
					S.W[k] = (const uint8_t *)d_w[i + k], S.rows[k] = rows[i + k];
					S.y[k] = d_y[i + k] + (size_t)r0 * rows[i + k];
					S.scale[k] = d_scale != NULL ? d_scale[i + k] : NULL;
				}
				if (qk_products(g, t[i], S, ne0, X->kq + (size_t)r0 * ne0,
				    X->kd + (size_t)r0 * (ne0 / 256), X->kb + (size_t)r0 * (ne0 / 16),
				    n - r0 < kg ? (int)(n - r0) : kg) != 0)
					return -1;
			}
			continue;
		}
		if (t[i] == Q8_T_IQ4_NL) {	/* matvec_iq4.cu's kernel, 16 rows a launch */
			j = i + 1;
			for (int64_t r0 = 0; r0 < n; r0 += GPU_MATVEC_MAX_ROWS)
				if (iq4nl_product(g, d_w[i], rows[i], ne0, q + (size_t)r0 * ne0,
				    dx + (size_t)r0 * nb, n - r0 < GPU_MATVEC_MAX_ROWS ? (int)(n - r0) :
				    GPU_MATVEC_MAX_ROWS, d_y[i] + (size_t)r0 * rows[i],
				    d_scale != NULL ? d_scale[i] : NULL) != 0)
					return -1;
			continue;
		}
		int grp = mv8_group(g, t[i], n, d_w[i], rb);
		for (j = i + 1; n <= grp && j < nw && j - i < MV8_SET && t[j] == t[i] &&
		    mv8_group(g, t[j], n, d_w[j], rb) == grp; j++)
			;
		if (n > g->step_rows && g->mmq != GPU_MMQ_OFF && gpu_can_matmul_q8(t[i])) {
			j = i + 1;	/* one weight a GEMM (GPU_MV8_TC may have set more) */
			if (gpu_matmul_q8(g, t[i], d_w[i], rows[i], ne0, q, dx, n, d_y[i],
			    d_scale != NULL ? d_scale[i] : NULL) != 0)
				return -1;
			continue;	/* prefill: the GEMM (cuda/mmq.cu) */
		}
		for (int64_t r0 = 0; r0 < n; r0 += grp) {
			int m = n - r0 < grp ? (int)(n - r0) : grp;
			const int8_t *qr = q + (size_t)r0 * ne0;
			const float *dr = dx + (size_t)r0 * nb, *sr = sx + (size_t)r0 * nb;
			struct mv8_set S;
			int rc;
			memset(&S, 0, sizeof S);
			S.nw = j - i;
			for (int k = 0; k < S.nw; k++) {
				S.W[k] = (const uint8_t *)d_w[i + k];
				S.y[k] = d_y[i + k] + (size_t)r0 * rows[i + k];
				S.scale[k] = d_scale != NULL ? d_scale[i + k] : NULL;
				S.rows[k] = rows[i + k];
				S.blk[k + 1] = S.blk[k] + (unsigned)((rows[i + k] + 7) / 8);
			}
			switch (t[i]) {
			case Q8_T_NVFP4: rc = mv8_launch<Q8_T_NVFP4>(g, S, nb, rb, qr, dr, sr, m); break;
			case Q8_T_Q4_1: rc = mv8_launch<Q8_T_Q4_1>(g, S, nb, rb, qr, dr, sr, m); break;
			case Q8_T_Q5_1: rc = mv8_launch<Q8_T_Q5_1>(g, S, nb, rb, qr, dr, sr, m); break;
			case Q8_T_Q4_0: rc = mv8_launch<Q8_T_Q4_0>(g, S, nb, rb, qr, dr, sr, m);
				break;
			case Q8_T_Q5_0: rc = mv8_launch<Q8_T_Q5_0>(g, S, nb, rb, qr, dr, sr, m);
				break;
			default: rc = mv8_launch<Q8_T_Q8_0>(g, S, nb, rb, qr, dr, sr, m); break;
			}
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

/* x quantized in the forms the weights take (q80: Q8_0, with sx for q81; qk:
 * Q8_K); pre (GPU_PRE_SWIGLU or GPU_PRE_GEGLU, 0 none: a caller of one
 * weight type, so one form) the op on x by u first, its result written
 * back to x (k_q8x's and k_q8kx_pre's). */
static int
mv8_quantize(struct gpu *g, int pre, const float *d_x, const float *d_u, int64_t n,
    int64_t ne0, int q80, int q81, int qk, struct mv8_x *X)
{
	int64_t total = n * (ne0 / 32);
	unsigned nblk = (unsigned)((total * 8 + 255) / 256);
	float *x = (float *)d_x;

	if (q80) {
		if (pre == GPU_PRE_SWIGLU)
			gpu_launch(g, k_q8x<GPU_PRE_SWIGLU>, nblk, 256, 0, x, d_u, 1, 0, total, X->q,
			    X->dx, q81 ? X->sx : NULL);
		else if (pre == GPU_PRE_GEGLU)
			gpu_launch(g, k_q8x<GPU_PRE_GEGLU>, nblk, 256, 0, x, d_u, 1, 0, total, X->q,
			    X->dx, q81 ? X->sx : NULL);
		else
			gpu_launch(g, k_q8x<0>, nblk, 256, 0, x, (const float *)NULL, 1, 0, total, X->q,
			    X->dx, q81 ? X->sx : NULL);
		GPU_LAUNCHED(g, "matvec_q8 quantize");
	}
	if (!qk)
		return 0;
	return pre ? qk_quantize_pre(g, pre, x, d_u, n, ne0, X->kq, X->kd, X->kb) :
	    qk_quantize(g, d_x, n, ne0, X->kq, X->kd, X->kb);
}

extern "C" int
gpu_matvec_q8_multi(struct gpu *g, int nw, const int *t, const void *const *d_w,
    const int64_t *rows, int64_t ne0, const float *d_x, int64_t n, float *const *d_y,
    const float *const *d_scale)
{
	int q81, q80, qk;
	struct mv8_x X;

	if (mv8_types(g, nw, t, rows, ne0, n, &q81, &q80, &qk) ||
	    mv8_scratch(g, n, ne0, qk, 0, &X) ||
	    mv8_quantize(g, 0, d_x, NULL, n, ne0, q80, q81, qk, &X))
		return -1;
	return mv8_products(g, nw, t, d_w, rows, ne0, &X, n, d_y, d_scale);
}

extern "C" int
gpu_matvec_q8_pre(struct gpu *g, int pre, float *d_x, const float *d_u, int hd, int64_t ldu,
    int t, const void *d_w, int64_t rows, int64_t ne0, int64_t n, float *d_y,
    const float *d_scale)
{
	int nb = (int)(ne0 / 32), q81, q80, qk;
	struct mv8_x X;

	if (pre != GPU_PRE_SWIGLU && pre != GPU_PRE_SIGMOID && pre != GPU_PRE_GEGLU)
		return gpu_fail(g, "matvec_q8: op %d before the product", pre);
	if (pre == GPU_PRE_SIGMOID && (hd < 32 || hd % 32 != 0 || ne0 % hd != 0 || ldu < hd))
		return gpu_fail(g, "matvec_q8: gate heads of %d in rows of %lld", hd, (long long)ne0);
	if (mv8_types(g, 1, &t, &rows, ne0, n, &q81, &q80, &qk))
		return -1;
	if (qk && pre == GPU_PRE_SIGMOID)	/* (x to Q8_K after the op: no head gate there) */
		return gpu_fail(g, "matvec_q8: type %d: no gate before a K-quant product", t);
	if (mv8_scratch(g, n, ne0, qk, 0, &X))
		return -1;
	if (pre != GPU_PRE_SIGMOID) {
		if (mv8_quantize(g, pre, d_x, d_u, n, ne0, q80, q81, qk, &X) != 0)
			return -1;
	} else {
		int64_t total = n * nb;
		gpu_launch(g, k_q8x<GPU_PRE_SIGMOID>, (unsigned)((total * 8 + 255) / 256), 256, 0,
		    d_x, d_u, hd, ldu, total, X.q, X.dx, q81 ? X.sx : NULL);
		GPU_LAUNCHED(g, "matvec_q8 quantize");
	}
	return mv8_products(g, 1, &t, &d_w, &rows, ne0, &X, n, &d_y, &d_scale);
}

/*
 * RMSNorm of row blockIdx.x (weight w) and its quantization in one pass:
 * y = x * (1 / sqrt(mean(x^2) + eps)) * w exactly as cuda/ops.cu's
 * k_rmsnorm4 computes it (its geometry and norm_sumsq_*: the same sum
 * order), then each 32-block quantized as k_q8x does (q8_block4: 8 lanes,
 * 4 values each).  Bit-identical to the two.  Every load (x, t, w, z) is
 * issued first and silu(z) computed before the sum's one barrier; a thread
 * holds V = norm_vec(d / 4) float4s (one up to d = 4096).
 * t not NULL: x += t first (as ops.cu's k_binary adds), the sum written
 * back to x; tn = 1: t normed first (times tw where not NULL) and the sum
 * times ts where ts != 1, x = (x + rmsnorm(t) tw) ts as k_norm_residual
 * computes it (norm_row4: the same geometry, its own reduction).  z not
 * NULL (never with tn): y *= silu(z) as k_rmsnorm4's gated form, y
 * written to x.  Rows are contiguous (a row of d may be a head of a
 * longer row: the blocks of 32 follow on; heads of 128 are blocks of one
 * warp, no barrier at all).
 * K = 1: the normed row is kept in shared memory (d <= RQ_SM, the launch
 * giving d floats of it) and written to xn (when not NULL; always for
 * longer rows, which it is read back from), and after a barrier each warp
 * quantizes 256-blocks of it to Q8_K as k_q8kx does (q, dx = the block's
 * d, kb = its bsums): bit-identical to gpu_rmsnorm then k_q8kx.
 */
#define RQ_SM 8192	/* K = 1: rows of at most this many floats held in shared memory */

template <int K, int V>
__global__ void __launch_bounds__(1024)
k_rmsnorm_q8x(float *x, const float *t, int tn, const float *tw, float ts, const float *z,
    const float *w, int d, float eps, int8_t *q, float *dx, float *sx, float *xn, int16_t *kb)
{
	__shared__ double red[32], tred[32];
	extern __shared__ float4 rq_sm[];	/* K = 1, d <= RQ_SM: the normed row */
	size_t r = blockIdx.x;
	float4 *xr = (float4 *)(x + r * d);
	int d4 = d / 4, lane = threadIdx.x & 31;
	/* g: z's row, or (tn, never with z) t's norm weight */
	float4 v[V], c[V], g[V], b[V], zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	const float *gp = z != NULL ? z + r * d : tn ? tw : NULL;

	pdl_enter();	/* before every read: the norm's weight too */
#pragma unroll
	for (int u = 0; u < V; u++) {	/* every load first (x is written below) */
		int i = threadIdx.x + u * blockDim.x;
		v[u] = i < d4 ? xr[i] : zero;
		c[u] = i < d4 ? ((const float4 *)w)[i] : zero;
		g[u] = gp != NULL && i < d4 ? ((const float4 *)gp)[i] : zero;
		b[u] = t != NULL && i < d4 ? ((const float4 *)(t + r * d))[i] : zero;
	}
	if (t != NULL && tn)	/* block-uniform */
		norm_row4<V>(b, g, tw, d, eps, tred);
#pragma unroll
	for (int u = 0; u < V; u++) {
		int i = threadIdx.x + u * blockDim.x;
		if (t != NULL && i < d4) {
			v[u] = make_float4(__fadd_rn(v[u].x, b[u].x), __fadd_rn(v[u].y, b[u].y),
			    __fadd_rn(v[u].z, b[u].z), __fadd_rn(v[u].w, b[u].w));
			if (ts != 1.0f)
				v[u] = make_float4(__fmul_rn(v[u].x, ts), __fmul_rn(v[u].y, ts),
				    __fmul_rn(v[u].z, ts), __fmul_rn(v[u].w, ts));
			xr[i] = v[u];
		}
	}
	double s = norm_sumsq_warp<V>(v);
#pragma unroll
	for (int u = 0; u < V; u++)	/* while other warps reach the barrier */
		if (z != NULL)
			g[u] = make_float4(gpu_silu(g[u].x), gpu_silu(g[u].y), gpu_silu(g[u].z),
			    gpu_silu(g[u].w));
	float sc = rms_scale(norm_sumsq_block(s, red), d, eps);
#pragma unroll
	for (int u = 0; u < V; u++) {
		int i = threadIdx.x + u * blockDim.x;
		bool in = i < d4;
		float4 o = make_float4(__fmul_rn(__fmul_rn(v[u].x, sc), c[u].x),
		    __fmul_rn(__fmul_rn(v[u].y, sc), c[u].y), __fmul_rn(__fmul_rn(v[u].z, sc), c[u].z),
		    __fmul_rn(__fmul_rn(v[u].w, sc), c[u].w));
		if (z != NULL) {
			o.x = __fmul_rn(o.x, g[u].x), o.y = __fmul_rn(o.y, g[u].y);
			o.z = __fmul_rn(o.z, g[u].z), o.w = __fmul_rn(o.w, g[u].w);
			if (in)
				xr[i] = o;
		}
		if (K) {
			if (in && xn != NULL)
				((float4 *)(xn + r * d))[i] = o;
			if (in && d <= RQ_SM)
				rq_sm[i] = o;
			continue;
		}
		/* lanes past d4 hold zeros: whole 8-lane groups (d4 % 8 == 0) */
		q8_block4(o, lane, in, (char4 *)(q + r * d) + i, dx, sx, r * (d / 32) + i / 8);
	}
	if (K) {
		int nk = d / 256;
		__syncthreads();	/* the row written by the whole block */
		for (int b = threadIdx.x >> 5; b < nk; b += blockDim.x >> 5) {
			size_t o = r * d + (size_t)b * 256;
			if (d <= RQ_SM)	/* shared loads, not generic ones */
				gpu_q8k_block((const float *)rq_sm + b * 256, lane, q + o,
				    dx + r * nk + b, kb + o / 16);
			else
				gpu_q8k_block(xn + o, lane, q + o, dx + r * nk + b, kb + o / 16);
		}
	}
}

/* The op before the norm (k_rmsnorm_q8x's t, tn, tw, ts). */
struct rq_pre {
	const float *t, *tw;
	int tn;
	float ts;
};

/*
 * k_rmsnorm_q8x<K, V> of nr rows of d (V = norm_vec(d / 4)); K = 1: xn
 * NULL when the normed row is not wanted (and d <= RQ_SM: kept in shared
 * memory alone).
 */
template <int K>
static void
rq8x_launch(struct gpu *g, int64_t nr, float *x, struct rq_pre P, const float *z,
    const float *w, int d, float eps, int8_t *q, float *dx, float *sx, float *xn, int16_t *kb,
    float *xn_spill)
{
	int d4 = d / 4, nt = norm_threads(d4);
	size_t sm = K && d <= RQ_SM ? (size_t)d * 4 : 0;

	if (K && d > RQ_SM)
		xn = xn_spill;
	if (norm_vec(d4) == 1)
		gpu_launch(g, k_rmsnorm_q8x<K, 1>, (unsigned)nr, nt, sm, x, P.t, P.tn, P.tw, P.ts, z,
		    w, d, eps, q, dx, sx, xn, kb);
	else if (norm_vec(d4) == 2)
		gpu_launch(g, k_rmsnorm_q8x<K, 2>, (unsigned)nr, nt, sm, x, P.t, P.tn, P.tw, P.ts, z,
		    w, d, eps, q, dx, sx, xn, kb);
	else
		gpu_launch(g, k_rmsnorm_q8x<K, 4>, (unsigned)nr, nt, sm, x, P.t, P.tn, P.tw, P.ts, z,
		    w, d, eps, q, dx, sx, xn, kb);
}

/* gpu_rmsnorm_matvec_q8_ex with the op before the norm P (gpu_norm_residual_matvec_q8's). */
static int
rq_products(struct gpu *g, float *d_x, struct rq_pre P, const float *d_z, const float *d_nw,
    int64_t d, float eps, int nw, const int *t, const void *const *d_w, const int64_t *rows,
    int64_t ne0, int64_t n, float *const *d_y, const float *const *d_scale)
{
	int nt = d > 0 && d <= 4 * 4096 ? norm_threads((int)(d / 4)) : 2048, q81, q80, qk;
	int64_t nr = d > 0 ? n * (ne0 / d) : 0;	/* rows of d */
	struct mv8_x X;

	if (mv8_types(g, nw, t, rows, ne0, n, &q81, &q80, &qk))
		return -1;
	if (qk && d_z != NULL)
		return gpu_fail(g, "rmsnorm_matvec_q8: no gated norm before a K-quant product");
	if (d_nw == NULL || d < 32 || d % 32 != 0 || ne0 % d != 0 || (d_z == NULL && d != ne0) ||
	    nt > 1024 || ((uintptr_t)d_x & 15) || ((uintptr_t)d_nw & 15) ||
	    ((uintptr_t)P.t & 15) || ((uintptr_t)d_z & 15) || ((uintptr_t)P.tw & 15) ||
	    nr > INT32_MAX)
		return gpu_fail(g, "rmsnorm_matvec_q8: norm rows of %lld in rows of %lld (at most "
		    "%d), or unaligned", (long long)d, (long long)ne0, 4 * 4096);
	if (mv8_scratch(g, n, ne0, qk, qk, &X))
		return -1;
	if (qk) {	/* Q8_K: the norm written out and quantized; Q8_0 of it too if wanted */
		rq8x_launch<1>(g, nr, d_x, P, NULL, d_nw, (int)d, eps, X.kq, X.kd, NULL,
		    q80 ? X.xn : NULL, X.kb, X.xn);
		GPU_LAUNCHED(g, "rmsnorm_matvec_q8 quantize q8k");
		if (q80 && mv8_quantize(g, 0, X.xn, NULL, n, ne0, 1, q81, 0, &X) != 0)
			return -1;
	} else {
		rq8x_launch<0>(g, nr, d_x, P, d_z, d_nw, (int)d, eps, X.q, X.dx,
		    q81 ? X.sx : NULL, NULL, NULL, NULL);
		GPU_LAUNCHED(g, "rmsnorm_matvec_q8 quantize");
	}
	return mv8_products(g, nw, t, d_w, rows, ne0, &X, n, d_y, d_scale);
}

extern "C" int
gpu_rmsnorm_matvec_q8_ex(struct gpu *g, float *d_x, const float *d_t, const float *d_z,
    const float *d_nw, int64_t d, float eps, int nw, const int *t, const void *const *d_w,
    const int64_t *rows, int64_t ne0, int64_t n, float *const *d_y,
    const float *const *d_scale)
{
	struct rq_pre P = { d_t, NULL, 0, 1.0f };

	return rq_products(g, d_x, P, d_z, d_nw, d, eps, nw, t, d_w, rows, ne0, n, d_y, d_scale);
}

extern "C" int
gpu_norm_residual_matvec_q8(struct gpu *g, float *d_x, const float *d_a, const float *d_wa,
    float s, const float *d_nw, float eps, int nw, const int *t, const void *const *d_w,
    const int64_t *rows, int64_t ne0, int64_t n, float *const *d_y,
    const float *const *d_scale)
{
	struct rq_pre P = { d_a, d_wa, 1, s };

	if (d_a == NULL)
		return gpu_fail(g, "norm_residual_matvec_q8: no residual");
	return rq_products(g, d_x, P, NULL, d_nw, ne0, eps, nw, t, d_w, rows, ne0, n, d_y,
	    d_scale);
}

extern "C" int
gpu_rmsnorm_matvec_q8_multi(struct gpu *g, const float *d_x, const float *d_nw, float eps,
    int nw, const int *t, const void *const *d_w, const int64_t *rows, int64_t ne0,
    int64_t n, float *const *d_y, const float *const *d_scale)
{
	/* without t and z the kernel writes nothing to x */
	return gpu_rmsnorm_matvec_q8_ex(g, (float *)d_x, NULL, NULL, d_nw, ne0, eps, nw, t, d_w,
	    rows, ne0, n, d_y, d_scale);
}

extern "C" int
gpu_matvec_q8(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
    const float *d_x, int64_t n, float *d_y, const float *d_scale)
{
	return gpu_matvec_q8_multi(g, 1, &t, &d_w, &rows, ne0, d_x, n, &d_y, &d_scale);
}

/* k_moe_mv8 over slots [0, ns), launches of at most 65535 slots (the grid's y). */
template <int T, int L, int A>
static int
mv8_moe_launch(struct gpu *g, const void *w, int64_t rows, int nb, size_t rb, int n_exp,
    const int32_t *ids, int ns, int per, const struct mv8_x *X, float *y, const float *scale)
{
	for (int s0 = 0; s0 < ns; s0 += 65535) {
		dim3 grid((unsigned)((rows + 7) / 8), (unsigned)min(ns - s0, 65535));
		gpu_launch(g, k_moe_mv8<T, L, A>, grid, 256, 0, (const uint8_t *)w, rb * (size_t)rows,
		    rb, nb, rows, n_exp, ids, s0, per, (const int8_t *)X->q, (const float *)X->dx,
		    (const float *)X->sx, y, scale);
		GPU_LAUNCHED(g, "moe matvec_q8");
	}
	return 0;
}

/* k_moe_mv8g over the tiles (tc > 0: those k_moe_mv8t leaves it),
 * launches of at most 65535 (the grid's y). */
template <int T, int L, int A>
static int
mv8_moe_grouped(struct gpu *g, const void *w, int64_t rows, int nb, size_t rb, int n_exp,
    const struct moe_group *G, const struct mv8_x *X, float *y, const float *scale, int tc)
{
	for (int t0 = 0; t0 < G->nt; t0 += 65535) {
		dim3 grid((unsigned)((rows + 7) / 8), (unsigned)min(G->nt - t0, 65535));
		gpu_launch(g, k_moe_mv8g<T, L, A>, grid, 256, 0, (const uint8_t *)w,
		    rb * (size_t)rows, rb, nb, rows, n_exp, G->tile, t0, G->perm,
		    (const int8_t *)X->q, (const float *)X->dx, (const float *)X->sx, y, scale, tc);
		GPU_LAUNCHED(g, "moe matvec_q8 grouped");
	}
	return 0;
}

/*
 * The least rows a pair of tiles (a bucket's tiles 2 i and 2 i + 1, or
 * its last alone) takes k_moe_mv8t at under GPU_MOE_TC_AUTO: a tile of
 * more than 8 runs k_moe_mv8g at M = 16, against which k_mv8t at 16 rows
 * was 1.29-1.44x (kernel-check's bench i8tc on the H200, the dense
 * products: m = 8 0.95-1.10x, m = 1 and 4 0.29-0.75x).  Reasoned from
 * those, not measured on the experts.
 */
#define MVT_MOE_N 9

/* The bound tc of k_moe_mv8t's tiles for weights of type T (lanes L) at w,
 * rows of rb bytes, under g->moe_tc; 0: k_moe_mv8g takes them all (another
 * type, Q8_0 by one lane a block, rows less aligned than mvt_launch's).
 * Q4_0 and Q5_0 take Q8_0's bound MVT_MOE_N (unmeasured for them). */
template <int T, int L>
static int
mvt_moe_tc(const struct gpu *g, const void *w, size_t rb)
{
	if (!(T == Q8_T_NVFP4 || (mv8_halves(T) && L == 2)) || g->moe_tc == GPU_MOE_TC_OFF ||
	    (((uintptr_t)w | rb) & mvt_amask(T)) != 0)
		return 0;
	return g->moe_tc == GPU_MOE_TC_ALL ? 1 : MVT_MOE_N;
}

/* k_moe_mv8t over the tiles (those of pairs of tc rows or more), launches
 * of at most 65535 (the grid's y). */
template <int T>
static int
mvt_moe_grouped(struct gpu *g, const void *w, int64_t rows, int nb, size_t rb, int n_exp,
    const struct moe_group *G, const struct mv8_x *X, float *y, const float *scale, int tc)
{
	int sh = mvt_moe_smem<T>(nb), a16 = (((uintptr_t)w | rb) & 15) == 0;

	if (gpu_smem(g, k_moe_mv8t<T>, sh, "moe matvec_q8 tc") != 0)
		return -1;
	for (int t0 = 0; t0 < G->nt; t0 += 65535) {
		dim3 grid((unsigned)((rows + MVT_R - 1) / MVT_R), (unsigned)min(G->nt - t0, 65535));
		gpu_launch(g, k_moe_mv8t<T>, grid, MVT_THREADS, (size_t)sh, (const uint8_t *)w,
		    rb * (size_t)rows, rb, nb, rows, n_exp, (const int4 *)G->tile, t0, G->nt,
		    (const int32_t *)G->perm, (const int8_t *)X->q, (const float *)X->dx, y, scale,
		    a16, tc);
		GPU_LAUNCHED(g, "moe matvec_q8 tc");
	}
	return 0;
}

/* The per-slot kernels (G NULL: mv8_moe_launch) or the grouped ones on the
 * gathered rows X (mv8_moe_grouped, and for Q8_0, NVFP4, Q4_0 and Q5_0
 * mvt_moe_grouped where mvt_moe_tc says), for type t with lanes L and rows
 * aligned (A) as the one-row product takes them. */
template <int T, int L, int A>
static int
mv8_moe_run(struct gpu *g, const void *w, int64_t rows, int nb, size_t rb, int n_exp,
    const int32_t *ids, int ns, int per, const struct moe_group *G, const struct mv8_x *X,
    float *y, const float *scale)
{
	if (G != NULL) {
		int tc = mvt_moe_tc<T, L>(g, w, rb);
		if constexpr (mvt_type(T))
			if (tc > 0 && mvt_moe_grouped<T>(g, w, rows, nb, rb, n_exp, G, X, y, scale,
			    tc) != 0)
				return -1;
		if (tc == 1)	/* every tile k_moe_mv8t's */
			return 0;
		return mv8_moe_grouped<T, L, A>(g, w, rows, nb, rb, n_exp, G, X, y, scale, tc);
	}
	return mv8_moe_launch<T, L, A>(g, w, rows, nb, rb, n_exp, ids, ns, per, X, y, scale);
}

/* One stack's products on the quantized x (X; grouped: G and the gathered
 * rows XP): moe_q8's kernels by family. */
static int
moe_q8_run(struct gpu *g, int t, int qk, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *d_ids, int ns, int per, const struct moe_group *G, const struct mv8_x *X,
    const struct mv8_x *XP, float *d_y, const float *d_scale)
{
	int nb = (int)(ne0 / 32);
	size_t rb = mv8_rowbytes(t, ne0);

	if (qk)
		return G != NULL ? qk_moe_grouped(g, t, d_w, rows, ne0, n_exp, G, XP->kq, XP->kd,
		    XP->kb, d_y, d_scale) : qk_moe_product(g, t, d_w, rows, ne0, n_exp, d_ids, ns,
		    per, X->kq, X->kd, X->kb, d_y, d_scale);
	if (t == Q8_T_IQ4_NL)
		return G != NULL ? iq4_moe_grouped(g, t, d_w, rows, ne0, n_exp, G, XP->q, XP->dx,
		    d_y, d_scale) : iq4nl_moe_product(g, d_w, rows, ne0, n_exp, d_ids, ns, per, X->q,
		    X->dx, d_y, d_scale);
#define MOE_RUN(T, L, A) mv8_moe_run<T, L, A>(g, d_w, rows, nb, rb, n_exp, d_ids, ns, per, G, \
    XP, d_y, d_scale)
	switch (t) {
	case Q8_T_NVFP4:
		if (((uintptr_t)d_w & 15) == 0 && rb % 8 == 0)
			return MOE_RUN(Q8_T_NVFP4, 2, 1);
		return MOE_RUN(Q8_T_NVFP4, 2, 0);
	case Q8_T_Q4_1:
		return MOE_RUN(Q8_T_Q4_1, 1, 0);
	case Q8_T_Q5_1:
		return MOE_RUN(Q8_T_Q5_1, 1, 0);
	case Q8_T_Q4_0:
		return MOE_RUN(Q8_T_Q4_0, 2, 0);
	case Q8_T_Q5_0:
		return MOE_RUN(Q8_T_Q5_0, 2, 0);
	default:
		if ((g->mv8 == GPU_MV8_LANE2 ? 2 : MV8_Q8_0_LANES) == 2)
			return MOE_RUN(Q8_T_Q8_0, 2, 0);
		return MOE_RUN(Q8_T_Q8_0, 1, 0);
	}
#undef MOE_RUN
}

/*
 * The experts' int8 products: x quantized as gpu_matvec_q8 quantizes it
 * (each row on its own: the same bytes as a one-row call's), then each
 * slot by the kernel and the lanes mv8_launch takes for one row (Q8_0:
 * MV8_Q8_0_LANES or GPU_MV8_LANE2's two; Q4_0 and Q5_0 two; the staged
 * form gives the same bits as the in-place one), K-quants and IQ4_XS by qk_moe_product, IQ4_NL
 * by iq4nl_moe_product (cuda/matvec_iq4.cu).  grouped: the slots grouped
 * by expert first (moe_group_build), the quantized rows gathered in that
 * order into the scratch after x's (moe_gather), and each family's grouped
 * kernel on them: the same bits.  The nw stacks d_w[k] (of one type and
 * shape: gate and up) share the quantized x, the grouping and the
 * gathered rows (made once), each into its d_y[k].
 */
static int
moe_q8(struct gpu *g, int t, int nw, const void *const *d_w, int64_t rows, int64_t ne0,
    int n_exp, const int32_t *d_ids, int ns, int per, const float *d_x, int64_t nx,
    float *const *d_y, const float *const *d_scale, int grouped, int pre, const float *d_u)
{
	int q81, q80, qk, nb = (int)(ne0 / 32);
	struct mv8_x X, XG;
	struct moe_group grp, *G = NULL;
	const struct mv8_x *XP = &X;

	if (mv8_types(g, 1, &t, &rows, ne0, 1, &q81, &q80, &qk))
		return -1;
	if (grouped) {
		size_t x0 = mv8_layout(NULL, nx, ne0, qk, 0, NULL);
		size_t gb = (moe_group_bytes(ns, n_exp) + 255) / 256 * 256;
		size_t x1 = mv8_layout(NULL, (int64_t)ns + GPU_MOE_MT, ne0, qk, 0, NULL);
		uint8_t *p = (uint8_t *)gpu_scratch(g, x0 + gb + x1 + 256);
		if (p == NULL)
			return -1;
		mv8_layout(p, nx, ne0, qk, 0, &X);
		mv8_layout(p + x0 + gb, (int64_t)ns + GPU_MOE_MT, ne0, qk, 0, &XG);
		if (mv8_quantize(g, pre, d_x, d_u, nx, ne0, q80, q81, qk, &X) ||
		    moe_group_build(g, d_ids, ns, n_exp, p + x0, &grp))
			return -1;
		const void *src[3];
		void *dst[3];
		size_t rbs[3];
		int na;
		if (qk) {
			src[0] = X.kq, src[1] = X.kd, src[2] = X.kb;
			dst[0] = XG.kq, dst[1] = XG.kd, dst[2] = XG.kb;
			rbs[0] = (size_t)ne0, rbs[1] = (size_t)(ne0 / 256) * 4;
			rbs[2] = (size_t)(ne0 / 16) * 2, na = 3;
		} else {
			src[0] = X.q, src[1] = X.dx, src[2] = X.sx;
			dst[0] = XG.q, dst[1] = XG.dx, dst[2] = XG.sx;
			rbs[0] = (size_t)ne0, rbs[1] = rbs[2] = (size_t)nb * 4, na = q81 ? 3 : 2;
		}
		if (moe_gather(g, &grp, ns, per, na, src, dst, rbs))
			return -1;
		G = &grp, XP = &XG;
	} else if (mv8_scratch(g, nx, ne0, qk, 0, &X) ||
	    mv8_quantize(g, pre, d_x, d_u, nx, ne0, q80, q81, qk, &X))
		return -1;
	for (int k = 0; k < nw; k++)
		if (moe_q8_run(g, t, qk, d_w[k], rows, ne0, n_exp, d_ids, ns, per, G, &X, XP, d_y[k],
		    d_scale[k]) != 0)
			return -1;
	return 0;
}

/*
 * Whether gpu_moe_matvec groups the slots by expert (g->moe_group):
 * GPU_MOE_GROUP_OFF never, GPU_MOE_GROUP_ALL always (kernel-check's
 * comparison), GPU_MOE_GROUP_AUTO where slots share experts enough to pay
 * for the grouping's two more kernels (and a third of a microsecond of
 * warp 0's placement a 32 slots): nx >= 2 input rows (one row's k picks are
 * k distinct experts: nothing shared) and ns >= max(n_exp, 64) slots
 * (random picks then share an expert 1.58 slots each or more; fewer slots
 * save too little of the weights' bytes).  Reasoned, not measured: the
 * device's A/B (MEMRA_CUDA_MOE_GROUP) settles it.  Either way the same
 * bits.  n_exp <= GPU_MOE_GROUP_EXPERTS.
 */
static int
moe_use_group(const struct gpu *g, int ns, int64_t nx, int n_exp)
{
	if (n_exp > GPU_MOE_GROUP_EXPERTS || g->moe_group == GPU_MOE_GROUP_OFF)
		return 0;
	return g->moe_group == GPU_MOE_GROUP_ALL || (nx >= 2 && ns >= max(n_exp, 64));
}

extern "C" int
gpu_tune_moe_group(struct gpu *g, int mode)
{
	if (mode != GPU_MOE_GROUP_OFF && mode != GPU_MOE_GROUP_AUTO && mode != GPU_MOE_GROUP_ALL)
		return gpu_fail(g, "tune: moe group mode %d (0, 1 or 2)", mode);
	return gpu_tune_set(g, &g->moe_group, mode);
}

extern "C" int
gpu_tune_moe_tc(struct gpu *g, int mode)
{
	if (mode != GPU_MOE_TC_OFF && mode != GPU_MOE_TC_AUTO && mode != GPU_MOE_TC_ALL)
		return gpu_fail(g, "tune: moe tc mode %d (0, 1 or 2)", mode);
	return gpu_tune_set(g, &g->moe_tc, mode);
}

extern "C" int
gpu_moe_matvecs(struct gpu *g, int t, int nw, const void *const *d_w, int64_t rows,
    int64_t ne0, int n_exp, const int32_t *d_ids, int ns, int per, const float *d_x, int64_t nx,
    float *const *d_y, const float *const *d_scale)
{
	if (nw < 1 || rows < 1 || ne0 < 1 || n_exp < 1 || ns < 1 || per < 1 ||
	    nx < (ns + per - 1) / per)
		return gpu_fail(g, "moe matvec: %d stacks of %d experts of %lldx%lld, %d slots (%d a "
		    "row) over %lld rows", nw, n_exp, (long long)rows, (long long)ne0, ns, per,
		    (long long)nx);
	if (moe_gemm_takes(g, t, ne0, nx, n_exp))	/* a prompt's: bf16 operands */
		return moe_gemm(g, t, nw, d_w, rows, ne0, n_exp, d_ids, ns, per, d_x, d_y, d_scale);
	int grouped = moe_use_group(g, ns, nx, n_exp);
	if (gpu_can_matvec_q8(t))
		return moe_q8(g, t, nw, d_w, rows, ne0, n_exp, d_ids, ns, per, d_x, nx, d_y,
		    d_scale, grouped, 0, NULL);
	for (int k = 0; k < nw; k++)	/* (fp32 x: nothing to share) */
		if ((grouped ? gpu_moe_mv_fg : gpu_moe_mv_f)(g, t, d_w[k], rows, ne0, n_exp, d_ids,
		    ns, per, d_x, ne0, d_y[k], d_scale[k]) != 0)
			return -1;
	return 0;
}

extern "C" int
gpu_moe_matvec_pre(struct gpu *g, int pre, float *d_x, const float *d_u, int t,
    const void *d_w, int64_t rows, int64_t ne0, int n_exp, const int32_t *d_ids, int ns,
    int per, int64_t nx, float *d_y, const float *d_scale)
{
	if (pre != GPU_PRE_SWIGLU || rows < 1 || ne0 < 1 || n_exp < 1 || ns < 1 || per < 1 ||
	    nx < (ns + per - 1) / per)
		return gpu_fail(g, "moe matvec: op %d first, %d experts of %lldx%lld, %d slots (%d "
		    "a row) over %lld rows", pre, n_exp, (long long)rows, (long long)ne0, ns, per,
		    (long long)nx);
	/* the op in the kernel that quantizes x (moe_q8's; not the prompt GEMM's bf16
	 * rows, nor the float types) */
	if (!moe_gemm_takes(g, t, ne0, nx, n_exp) && gpu_can_matvec_q8(t))
		return moe_q8(g, t, 1, &d_w, rows, ne0, n_exp, d_ids, ns, per, d_x, nx, &d_y, &d_scale,
		    moe_use_group(g, ns, nx, n_exp), pre, d_u);
	if (gpu_moe_act(g, GPU_MOE_SWIGLU, d_x, d_u, nx, ne0, 0.0f, d_x) != 0)
		return -1;
	return gpu_moe_matvec(g, t, d_w, rows, ne0, n_exp, d_ids, ns, per, d_x, nx, d_y,
	    d_scale);
}

extern "C" int
gpu_moe_matvec(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *d_ids, int ns, int per, const float *d_x, int64_t nx, float *d_y,
    const float *d_scale)
{
	return gpu_moe_matvecs(g, t, 1, &d_w, rows, ne0, n_exp, d_ids, ns, per, d_x, nx, &d_y,
	    &d_scale);
}
