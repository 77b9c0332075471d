/*
 * mmq: the prefill product on int8 activations (n > 16 input rows) for
 * Q8_0 and NVFP4 weights, as a tiled GEMM.  Each output is the CPU's
 * sequence of float operations: per (sub-)block an exact integer dot, then
 * acc += (float)dot * (weight scale * input scale), (sub-)blocks in order,
 * as lib/quant's quant_vec_dot scales them.
 *
 * The kernel (k_mmq2): a block computes 64 weight rows x 128 input rows
 * in steps of 64 values through two shared buffers, the next step's
 * loads (weight words to registers, x by cp.async) in flight while the
 * tensor cores (mma.sync m16n8k32 s8 for Q8_0 blocks, m16n8k16 for NVFP4
 * sub-blocks) multiply this one; each warp 64 x 32.  Its dp4a twin gives
 * the same bits (the plain reference the fragment layouts are checked
 * against), and so does the first kernel (k_mmq: 64 x 64 tiles, steps of
 * 256 values, load then multiply), kept to time against.  So each weight
 * is read once per 128 input rows (the matvec kernel reads it once per
 * 16).  No atomics: a call's result depends only on its operands and on
 * n (not batch-invariant with the matvec kernel: other sum order, same
 * numerics).
 *
 * GPU_MMQ_BF16 (the CUDA backend's default, BACKEND_GEMM_BF16) leaves the
 * CPU's numerics for cuBLAS: x's int8 values times their scales and the
 * weights dequantized, each rounded to bf16, cublasGemmEx with fp32 sums on
 * tensor cores (2-3x the int8 kernel's speed on the 9B shapes, where the
 * per-block scale products bound it: bench/2026-12-01/2026-12-01-s8-cuda-notes.md).
 * gpu_gemm_bf16 serves gpu_matmul's other quantized types too.
 *
 * gpu_matmul_half (the vision towers' products, backend_matmul_half):
 * llama.cpp's rule for BF16 and F16 weights, x rounded to the weight's
 * type by k_half_of and the weight's 16-bit values as they are (or
 * rounded back, exactly, from the F32 rows the CUDA backend holds a weight
 * of rows not a multiple of 32 in), cublasGemmEx with fp32 sums on tensor
 * cores: the CPU's operands bit for bit, its sums in another order.
 */
#include "gpu_impl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

enum { MQ_Q8_0 = 8, MQ_NVFP4 = 40 };
enum {
	MQ_R = 64,		/* weight rows of a tile */
	MQ_N = 64,		/* input rows of a tile */
	MQ_K = 256,		/* values per step */
	MQ_KI = MQ_K / 4,	/* ints per row and step */
	MQ_LD = MQ_KI + 4,	/* row stride in ints (padded: no bank conflicts) */
	MQ_THREADS = 128,
};

/* (float)c for |c| < 2^22 without the slow conversion unit: exact. */
__device__ __forceinline__ float
mq_i2f(int c)
{
	return __fsub_rn(__int_as_float(c + 0x4B400000), 12582912.0f);
}

/* --- the first kernel: 64 x 64 tiles, steps of 256 values ------------- */

/* The tile in shared memory: int8 values as ints, rows MQ_LD ints apart;
 * ws: weight scale per row and sub-block (Q8_0: 8, NVFP4: 16 per step,
 * stride 17), xd: input scale per row and 32-block (8 per step, stride 9). */
struct mq_smem {
	int	w[MQ_R * MQ_LD];
	int	x[MQ_N * MQ_LD];
	float	ws[MQ_R * 17];
	float	xd[MQ_N * 9];
};

/* Decode step ks of weight rows r0.. into s (zeros past rows and ne0). */
template <int T>
__device__ __forceinline__ void
mq_load_w(struct mq_smem *s, const uint8_t *__restrict__ W, int64_t rows, int nbw,
    size_t rb, int64_t r0, int ks)
{
	if (T == MQ_Q8_0) {
		for (int it = threadIdx.x; it < MQ_R * 8; it += MQ_THREADS) {
			int r = it >> 3, b = it & 7, gb = ks * 8 + b;
			int v[8];
			float d = 0.0f;
			if (r0 + r < rows && gb < nbw) {
				const uint8_t *p = W + (size_t)(r0 + r) * rb + (size_t)gb * 34;
				if (((uintptr_t)p & 3) == 0) {	/* qs 2 bytes past a word */
					const uint32_t *pw = (const uint32_t *)p;
					uint32_t u[9];
#pragma unroll
					for (int i = 0; i < 9; i++)
						u[i] = __ldg(pw + i);
					d = __half2float(__ushort_as_half((unsigned short)(u[0] & 0xFFFF)));
#pragma unroll
					for (int i = 0; i < 8; i++)
						v[i] = (int)__funnelshift_r(u[i], u[i + 1], 16);
				} else {			/* qs on a word */
					const uint32_t *pw = (const uint32_t *)(p + 2);
					d = __half2float(__ushort_as_half(__ldg((const unsigned short *)p)));
#pragma unroll
					for (int i = 0; i < 8; i++)
						v[i] = (int)__ldg(pw + i);
				}
			} else {
#pragma unroll
				for (int i = 0; i < 8; i++)
					v[i] = 0;
			}
			int4 *dst = (int4 *)&s->w[r * MQ_LD + b * 8];
			dst[0] = make_int4(v[0], v[1], v[2], v[3]);
			dst[1] = make_int4(v[4], v[5], v[6], v[7]);
			s->ws[r * 17 + b] = d;
		}
	} else {
		for (int it = threadIdx.x; it < MQ_R * 4; it += MQ_THREADS) {
			int r = it >> 2, b = it & 3, gb = ks * 4 + b;
			int4 *dst = (int4 *)&s->w[r * MQ_LD + b * 16];
			if (r0 + r < rows && gb < nbw) {	/* the GPU layout (gpu_nvfp4_pack) */
				const uint8_t *rp = W + (size_t)(r0 + r) * rb;
				const uint32_t *pw = (const uint32_t *)(rp + (size_t)gb * 32);
				uint32_t sc = __ldg((const uint32_t *)(rp + (size_t)nbw * 32) + gb);
#pragma unroll
				for (int q = 0; q < 4; q++) {
					int4 v;
					gpu_fp4x8i(__ldg(pw + 2 * q), &v.x, &v.y);
					gpu_fp4x8i(__ldg(pw + 2 * q + 1), &v.z, &v.w);
					dst[q] = v;
					s->ws[r * 17 + b * 4 + q] = gpu_ue4m3c_half((sc >> (8 * q)) & 0xFF);
				}
			} else {
#pragma unroll
				for (int q = 0; q < 4; q++) {
					dst[q] = make_int4(0, 0, 0, 0);
					s->ws[r * 17 + b * 4 + q] = 0.0f;
				}
			}
		}
	}
}

/* Copy step ks of input rows n0.. (int8 q[n][ne0], dx[n][nb]) into s. */
__device__ __forceinline__ void
mq_load_x(struct mq_smem *s, const int8_t *__restrict__ q, const float *__restrict__ dx,
    int64_t n, int nb, int64_t n0, int ks)
{
	for (int it = threadIdx.x; it < MQ_N * (MQ_KI / 4); it += MQ_THREADS) {
		int j = it / (MQ_KI / 4), c = it % (MQ_KI / 4);
		int xb = ks * 8 + c / 2;	/* 32-block of the int4's 16 values */
		int4 v = make_int4(0, 0, 0, 0);
		if (n0 + j < n && xb < nb)
			v = __ldg((const int4 *)(q + ((size_t)(n0 + j) * nb + xb) * 32) + (c & 1));
		*(int4 *)&s->x[j * MQ_LD + c * 4] = v;
	}
	for (int it = threadIdx.x; it < MQ_N * 8; it += MQ_THREADS) {
		int j = it >> 3, b = it & 7, xb = ks * 8 + b;
		s->xd[j * 9 + b] = n0 + j < n && xb < nb ? __ldg(dx + (size_t)(n0 + j) * nb + xb) : 0.0f;
	}
}

/*
 * One int8 tensor-core product into c[4] (accumulator input c0 in all four):
 * Q8_0's 32-value blocks by m16n8k32 (a[0..3], b[0..1]), NVFP4's 16-value
 * sub-blocks by m16n8k16 (a[0..1], b[0]).  Both kernels' fragments.
 */
template <int T>
__device__ __forceinline__ void
mq_mma_s8(const int *a, const int *b, int c0, int *c)
{
	if (T == MQ_Q8_0)
		asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
		    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
		    : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
		    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c0));
	else
		asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 "
		    "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
		    : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
		    : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c0));
}

/* acc += (float)c * (dw * dx), the CPU's per-block step. */
__device__ __forceinline__ float
mq_step(float acc, int c, float dw, float dx)
{
	return __fmaf_rn(mq_i2f(c), __fmul_rn(dw, dx), acc);
}

/*
 * Warp w's 32 x 32 part by mma.sync: weight rows (w & 1) * 32 + 16 mt + g
 * (+ 8), input rows (w >> 1) * 32 + 8 nt + 2 tg (+ 1), g = lane / 4,
 * tg = lane % 4 (the PTX fragment layouts of m16n8k32 / m16n8k16 .s8).
 */
template <int T>
__device__ __forceinline__ void
mq_mma(const struct mq_smem *s, float (*acc)[4][4])
{
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
	int rw = (w & 1) * 32, nw = (w >> 1) * 32;
	enum { NSB = T == MQ_Q8_0 ? 8 : 16, SBI = MQ_KI / NSB };

#pragma unroll 2
	for (int sb = 0; sb < NSB; sb++) {
		int k = sb * SBI, xb = T == MQ_Q8_0 ? sb : sb / 2;
		int a[2][4], b[4][2];
		float dwa[2], dwb[2], dx0[4], dx1[4];
#pragma unroll
		for (int mt = 0; mt < 2; mt++) {
			const int *ra = s->w + (rw + mt * 16 + g) * MQ_LD + k + tg;
			a[mt][0] = ra[0], a[mt][1] = ra[8 * MQ_LD];
			if (T == MQ_Q8_0)
				a[mt][2] = ra[4], a[mt][3] = ra[8 * MQ_LD + 4];
			dwa[mt] = s->ws[(rw + mt * 16 + g) * 17 + sb];
			dwb[mt] = s->ws[(rw + mt * 16 + g + 8) * 17 + sb];
		}
#pragma unroll
		for (int nt = 0; nt < 4; nt++) {
			const int *xr = s->x + (nw + nt * 8 + g) * MQ_LD + k + tg;
			b[nt][0] = xr[0];
			if (T == MQ_Q8_0)
				b[nt][1] = xr[4];
			dx0[nt] = s->xd[(nw + nt * 8 + 2 * tg) * 9 + xb];
			dx1[nt] = s->xd[(nw + nt * 8 + 2 * tg + 1) * 9 + xb];
		}
#pragma unroll
		for (int mt = 0; mt < 2; mt++)
#pragma unroll
			for (int nt = 0; nt < 4; nt++) {
				int c[4];
				mq_mma_s8<T>(a[mt], b[nt], 0, c);
				acc[mt][nt][0] = mq_step(acc[mt][nt][0], c[0], dwa[mt], dx0[nt]);
				acc[mt][nt][1] = mq_step(acc[mt][nt][1], c[1], dwa[mt], dx1[nt]);
				acc[mt][nt][2] = mq_step(acc[mt][nt][2], c[2], dwb[mt], dx0[nt]);
				acc[mt][nt][3] = mq_step(acc[mt][nt][3], c[3], dwb[mt], dx1[nt]);
			}
	}
}

/* Grid: x over tiles of input rows (neighbours share a weight tile in
 * L2), y over tiles of weight rows. */
template <int T>
__global__ void __launch_bounds__(MQ_THREADS)
k_mmq(const uint8_t *__restrict__ W, int64_t rows, int nb, size_t rb,
    const int8_t *__restrict__ q, const float *__restrict__ dx, int64_t n, float *y,
    const float *scale)
{
	__shared__ struct mq_smem s;
	int64_t n0 = (int64_t)blockIdx.x * MQ_N, r0 = (int64_t)blockIdx.y * MQ_R;
	int nbw = T == MQ_NVFP4 ? nb / 2 : nb, nks = (nb + 7) / 8;
	float acc[2][4][4];

#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[mt][nt][e] = 0.0f;
	pdl_enter();
	for (int ks = 0; ks < nks; ks++) {
		__syncthreads();
		mq_load_w<T>(&s, W, rows, nbw, rb, r0, ks);
		mq_load_x(&s, q, dx, n, nb, n0, ks);
		__syncthreads();
		mq_mma<T>(&s, acc);
	}
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
	float sc = scale != NULL ? *scale : 1.0f;
#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int64_t r = r0 + (w & 1) * 32 + mt * 16 + g + (e >> 1) * 8;
				int64_t j = n0 + (w >> 1) * 32 + nt * 8 + 2 * tg + (e & 1);
				if (r < rows && j < n)
					y[j * rows + r] = scale != NULL ? __fmul_rn(acc[mt][nt][e], sc) :
					    acc[mt][nt][e];
			}
}

/* --- the kernel: 64 x 128 tiles, steps of 64 values, pipelined -------- */

/*
 * The pipelined kernel (the default): a block computes 64 weight rows x
 * 128 input rows, each warp 64 x 32 (16 mma per 32 values: half the
 * shared-memory loads per mma of a 32 x 32 warp), in steps of 64 values
 * through two shared buffers: while the warps multiply step ks, step ks + 1
 * is on its way (the weight words in registers, decoded into the other
 * buffer after the products; the int8 x and its scales by cp.async), one
 * barrier a step.  The integer dots start from 0x4B400000 (the mma's
 * accumulator input, the dp4a's first sum), so they come out as the float
 * 12582912 + dot and one subtraction converts them exactly (|dot| < 2^22).
 * The scale products dw * dx are exact in float (both scales are halves:
 * Q8_0's d, NVFP4's UE4M3 / 2, x's d rounded to half; 11 x 11 significant
 * bits, exponents far inside float's), so (TF32 = 1) the tensor cores
 * make them, a 16 x 8 tile of them by one mma m16n8k4 .tf32 (dw in column
 * 0 of A, dx in row 0 of B, zeros elsewhere: one product, exact in tf32),
 * instead of four multiplications a lane: the same floats as mq_step's
 * __fmul_rn (a zero's sign aside, which the sums cannot show: acc is never
 * -0), so the same float operations, in the same order.  The scales lie in
 * 4 slots, the scale in slot 0 and zeros in 1..3, so that lane (g, tg)
 * loads its fragment words (A[g][tg], B[tg][g]) as they are.
 */
enum {
	MQ2_R = 64,		/* weight rows of a tile */
	MQ2_N = 128,		/* input rows of a tile */
	MQ2_K = 64,		/* values per step */
	MQ2_KI = MQ2_K / 4,	/* ints per row and step */
	MQ2_LD = MQ2_KI + 4,	/* row stride in ints (no bank conflicts) */
	MQ2_BIAS = 0x4B400000,	/* the float 12582912 */
};

/* One step's tile: ws[sub-block][row][slot], xd[32-block][input][slot]
 * (slot 0 the scale, 1..3 zeros). */
struct mq2_buf {
	int	w[MQ2_R * MQ2_LD];
	int	x[MQ2_N * MQ2_LD];
	float	ws[4 * MQ2_R * 4];
	float	xd[2 * MQ2_N * 4];
};

/* acc += (float)dot * p for c = 0x4B400000 + dot, p = dw * dx (mq_step's
 * bits); mq2_step multiplies the scales itself. */
__device__ __forceinline__ float
mq2_stepp(float acc, int c, float p)
{
	return __fmaf_rn(__fsub_rn(__int_as_float(c), 12582912.0f), p, acc);
}

__device__ __forceinline__ float
mq2_step(float acc, int c, float dw, float dx)
{
	return mq2_stepp(acc, c, __fmul_rn(dw, dx));
}

/* A thread's weight words of one step: Q8_0 one block (9 words from the
 * word holding its first byte, sh = 0 or 16 bits in), NVFP4 half a block
 * (the scale word and two sub-blocks' 4 code words, the GPU layout). */
struct mq2_wreg {
	uint32_t	u[9];
	uint32_t	sh;
};

/* Load thread t's weight words of step ks (zeros past rows and ne0):
 * Q8_0 row t / 2, block 2 ks + t % 2; NVFP4 row t / 2, block ks, half t % 2. */
template <int T>
__device__ __forceinline__ void
mq2_fetch_w(struct mq2_wreg *f, const uint8_t *__restrict__ W, int64_t rows, int nbw,
    size_t rb, int64_t r0, int ks)
{
	int t = threadIdx.x, r = t >> 1, h = t & 1;
	enum { NU = T == MQ_Q8_0 ? 9 : 5 };

#pragma unroll
	for (int i = 0; i < NU; i++)
		f->u[i] = 0;
	f->sh = 0;
	if (T == MQ_Q8_0) {
		int gb = ks * 2 + h;
		if (r0 + r < rows && gb < nbw) {
			const uint8_t *p = W + (size_t)(r0 + r) * rb + (size_t)gb * 34;
			uint32_t sh = (uint32_t)(uintptr_t)p & 2;
			const uint32_t *pw = (const uint32_t *)(p - sh);
#pragma unroll
			for (int i = 0; i < 9; i++)
				f->u[i] = __ldg(pw + i);
			f->sh = sh * 8;
		}
	} else if (r0 + r < rows && ks < nbw) {
		const uint8_t *rp = W + (size_t)(r0 + r) * rb;
		const uint32_t *pw = (const uint32_t *)(rp + (size_t)ks * 32) + 4 * h;
		f->u[0] = __ldg((const uint32_t *)(rp + (size_t)nbw * 32) + ks);
#pragma unroll
		for (int i = 1; i < 5; i++)
			f->u[i] = __ldg(pw + i - 1);
	}
	/* the loads issued here, before the products (else nvcc sinks them) */
#pragma unroll
	for (int i = 0; i < NU; i++)
		asm volatile("" : : "r"(f->u[i]));
}

/* Decode the words of mq2_fetch_w into s: int8 values and scales. */
template <int T>
__device__ __forceinline__ void
mq2_store_w(const struct mq2_wreg *f, struct mq2_buf *s)
{
	int t = threadIdx.x, r = t >> 1, h = t & 1;

	if (T == MQ_Q8_0) {
		int v[8];
#pragma unroll
		for (int i = 0; i < 8; i++)
			v[i] = (int)__funnelshift_rc(f->u[i], f->u[i + 1], 16 + f->sh);
		int4 *dst = (int4 *)&s->w[r * MQ2_LD + h * 8];
		dst[0] = make_int4(v[0], v[1], v[2], v[3]);
		dst[1] = make_int4(v[4], v[5], v[6], v[7]);
		s->ws[(h * MQ2_R + r) * 4] =
		    __half2float(__ushort_as_half((unsigned short)(f->u[0] >> f->sh)));
	} else {
#pragma unroll
		for (int qq = 0; qq < 2; qq++) {
			int sb = 2 * h + qq;
			int4 v;
			gpu_fp4x8i(f->u[1 + 2 * qq], &v.x, &v.y);
			gpu_fp4x8i(f->u[2 + 2 * qq], &v.z, &v.w);
			*(int4 *)&s->w[r * MQ2_LD + sb * 4] = v;
			s->ws[(sb * MQ2_R + r) * 4] = gpu_ue4m3c_half((f->u[0] >> (8 * sb)) & 0xFF);
		}
	}
}

/* cp.async of 16 (4) bytes, zeros when !ok (src then only a valid address). */
__device__ __forceinline__ void
mq2_cp16(void *dst, const void *src, int ok)
{
	gpu_cp16(dst, src, ok ? 16 : 0);
}

__device__ __forceinline__ void
mq2_cp4(void *dst, const void *src, int ok)
{
	gpu_cp4(dst, src, ok ? 4 : 0);
}

/* Start copying step ks of input rows n0.. (int8 q[n][ne0], dx[n][nb])
 * into s: thread t the 16-byte pieces t % 4 of rows t / 4 + 32 i, and the
 * two scales of row t.  mq2_wait_x waits for them. */
__device__ __forceinline__ void
mq2_copy_x(struct mq2_buf *s, const int8_t *__restrict__ q, const float *__restrict__ dx,
    int64_t n, int nb, int64_t n0, int ks)
{
	int t = threadIdx.x, c = t & 3, xb = ks * 2 + (c >> 1);

#pragma unroll
	for (int i = 0; i < 4; i++) {
		int j = (t >> 2) + 32 * i;
		int ok = n0 + j < n && xb < nb;
		const int8_t *src = ok ? q + (size_t)(n0 + j) * nb * 32 + (size_t)ks * 64 + c * 16 : q;
		mq2_cp16(&s->x[j * MQ2_LD + c * 4], src, ok);
	}
#pragma unroll
	for (int b = 0; b < 2; b++) {
		int ok = n0 + t < n && ks * 2 + b < nb;
		const float *src = ok ? dx + (size_t)(n0 + t) * nb + ks * 2 + b : dx;
		mq2_cp4(&s->xd[(b * MQ2_N + t) * 4], src, ok);
	}
	asm volatile("cp.async.commit_group;");
}

__device__ __forceinline__ void
mq2_wait_x(void)
{
	asm volatile("cp.async.wait_group 0;" : : : "memory");
}

/* ldmatrix .x4: r[m] of lane i is int i % 4 of the 16-byte row i / 4 of
 * matrix m, the row whose address lane 8 m + i / 4 gives in p. */
__device__ __forceinline__ void
mq2_ldsm4(int *r, const int *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
	    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	    : "r"((unsigned)__cvta_generic_to_shared(p)));
}

/*
 * Warp w's 64 x 32 part of one step by mma.sync: weight rows 16 mt + g
 * (+ 8), input rows 32 w + 8 nt + 2 tg (+ 1), g = lane / 4, tg = lane % 4
 * (the PTX fragment layouts of m16n8k32 / m16n8k16 .s8, as mq_mma); NVFP4's
 * fragments by ldmatrix (lane 8 mi + rr gives row rr of matrix mi).
 */
template <int T, int TF32>
__device__ __forceinline__ void
mq2_mma(const struct mq2_buf *s, float (*acc)[4][4])
{
	int lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3, nw = (threadIdx.x >> 5) * 32;
	int mi = lane >> 3, rr = lane & 7;
	enum { NSB = T == MQ_Q8_0 ? 2 : 4, SBI = MQ2_KI / NSB };

#pragma unroll
	for (int sb = 0; sb < NSB; sb++) {
		int k = sb * SBI, xb = T == MQ_Q8_0 ? sb : sb / 2;
		int a[4][4], b[4][2], f[4];
		float dw[4][2], dx[4][2];
		if (T == MQ_Q8_0) {	/* plain loads: by ldmatrix it spills at 168 registers */
#pragma unroll
			for (int mt = 0; mt < 4; mt++) {
				const int *ra = s->w + (mt * 16 + g) * MQ2_LD + k + tg;
				a[mt][0] = ra[0], a[mt][1] = ra[8 * MQ2_LD];
				a[mt][2] = ra[4], a[mt][3] = ra[8 * MQ2_LD + 4];
			}
#pragma unroll
			for (int nt = 0; nt < 4; nt++) {
				const int *xr = s->x + (nw + nt * 8 + g) * MQ2_LD + k + tg;
				b[nt][0] = xr[0], b[nt][1] = xr[4];
			}
		} else {
			/* a[mt], a[mt + 1]: rows g, g + 8 at ints tg */
#pragma unroll
			for (int mt = 0; mt < 4; mt += 2) {
				mq2_ldsm4(f, s->w + ((mt + (mi >> 1)) * 16 + (mi & 1) * 8 + rr) * MQ2_LD + k);
				a[mt][0] = f[0], a[mt][1] = f[1], a[mt + 1][0] = f[2], a[mt + 1][1] = f[3];
			}
			/* b[0..3]: input g at ints tg */
			mq2_ldsm4(f, s->x + (nw + mi * 8 + rr) * MQ2_LD + k);
#pragma unroll
			for (int nt = 0; nt < 4; nt++)
				b[nt][0] = f[nt];
		}
		/* TF32: dw[mt] = A[g][tg], A[g + 8][tg]; dx[nt][0] = B[tg][g];
		 * else dw[mt] the scales of rows g, g + 8, dx[nt] of inputs 2 tg (+ 1) */
#pragma unroll
		for (int mt = 0; mt < 4; mt++) {
			const float *p = s->ws + (sb * MQ2_R + mt * 16 + g) * 4;
			dw[mt][0] = p[TF32 ? tg : 0], dw[mt][1] = p[32 + (TF32 ? tg : 0)];
		}
#pragma unroll
		for (int nt = 0; nt < 4; nt++) {
			const float *p = s->xd + (xb * MQ2_N + nw + nt * 8) * 4;
			if (TF32)
				dx[nt][0] = p[g * 4 + tg];
			else
				dx[nt][0] = p[8 * tg], dx[nt][1] = p[8 * tg + 4];
		}
#pragma unroll
		for (int mt = 0; mt < 4; mt++)
#pragma unroll
			for (int nt = 0; nt < 4; nt++) {
				int c[4];
				mq_mma_s8<T>(a[mt], b[nt], MQ2_BIAS, c);
				float p0, p1, p2, p3;
				if (TF32)
					asm("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 "
					    "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
					    : "=f"(p0), "=f"(p1), "=f"(p2), "=f"(p3)
					    : "r"(__float_as_uint(dw[mt][0])), "r"(__float_as_uint(dw[mt][1])),
					      "r"(__float_as_uint(dx[nt][0])), "f"(0.0f));
				else
					p0 = __fmul_rn(dw[mt][0], dx[nt][0]), p1 = __fmul_rn(dw[mt][0], dx[nt][1]),
					p2 = __fmul_rn(dw[mt][1], dx[nt][0]), p3 = __fmul_rn(dw[mt][1], dx[nt][1]);
				acc[mt][nt][0] = mq2_stepp(acc[mt][nt][0], c[0], p0);
				acc[mt][nt][1] = mq2_stepp(acc[mt][nt][1], c[1], p1);
				acc[mt][nt][2] = mq2_stepp(acc[mt][nt][2], c[2], p2);
				acc[mt][nt][3] = mq2_stepp(acc[mt][nt][3], c[3], p3);
			}
	}
}

/* The same outputs (the same acc slots, the same bits) by dp4a. */
template <int T>
__device__ __forceinline__ void
mq2_dp4a(const struct mq2_buf *s, float (*acc)[4][4])
{
	int lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3, nw = (threadIdx.x >> 5) * 32;
	enum { NSB = T == MQ_Q8_0 ? 2 : 4, SBI = MQ2_KI / NSB };

	for (int sb = 0; sb < NSB; sb++) {
		int k = sb * SBI, xb = T == MQ_Q8_0 ? sb : sb / 2;
#pragma unroll
		for (int mt = 0; mt < 4; mt++)
#pragma unroll
			for (int nt = 0; nt < 4; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					int r = mt * 16 + g + (e >> 1) * 8, j = nw + nt * 8 + 2 * tg + (e & 1);
					const int *wr = s->w + r * MQ2_LD + k, *xr = s->x + j * MQ2_LD + k;
					int c = MQ2_BIAS;
#pragma unroll
					for (int i = 0; i < SBI; i++)
						c = __dp4a(wr[i], xr[i], c);
					acc[mt][nt][e] = mq2_step(acc[mt][nt][e], c,
					    s->ws[(sb * MQ2_R + r) * 4], s->xd[(xb * MQ2_N + j) * 4]);
				}
	}
}

/* Grid: x over tiles of input rows, y over tiles of weight rows.  K: 0
 * dp4a, 1 mma with the scale products by tf32 mma, 2 by multiplications. */
template <int T, int K>
__global__ void __launch_bounds__(MQ_THREADS, 3)
k_mmq2(const uint8_t *__restrict__ W, int64_t rows, int nb, size_t rb,
    const int8_t *__restrict__ q, const float *__restrict__ dx, int64_t n, float *y,
    const float *scale)
{
	__shared__ struct mq2_buf s[2];
	int64_t n0 = (int64_t)blockIdx.x * MQ2_N, r0 = (int64_t)blockIdx.y * MQ2_R;
	int nbw = T == MQ_NVFP4 ? nb / 2 : nb, nks = (nb + 1) / 2;
	struct mq2_wreg f;
	float acc[4][4][4];

#pragma unroll
	for (int mt = 0; mt < 4; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[mt][nt][e] = 0.0f;
	/* the scales' slots 1..3: zeros for good (the loads fill slot 0) */
	for (int i = threadIdx.x; i < 4 * MQ2_R * 4; i += MQ_THREADS)
		if (i & 3)
			s[0].ws[i] = s[1].ws[i] = 0.0f;
	for (int i = threadIdx.x; i < 2 * MQ2_N * 4; i += MQ_THREADS)
		if (i & 3)
			s[0].xd[i] = s[1].xd[i] = 0.0f;
	mq2_fetch_w<T>(&f, W, rows, nbw, rb, r0, 0);	/* weights: before the wait */
	pdl_enter();
	mq2_copy_x(&s[0], q, dx, n, nb, n0, 0);
	mq2_store_w<T>(&f, &s[0]);
	mq2_wait_x();
	__syncthreads();
	for (int ks = 0; ks < nks; ks++) {
		/* step ks + 1 on its way into the buffer step ks - 1 used */
		int more = ks + 1 < nks;
		if (more) {
			mq2_fetch_w<T>(&f, W, rows, nbw, rb, r0, ks + 1);
			mq2_copy_x(&s[(ks + 1) & 1], q, dx, n, nb, n0, ks + 1);
		}
		if (K == 0)
			mq2_dp4a<T>(&s[ks & 1], acc);
		else
			mq2_mma<T, K == 1>(&s[ks & 1], acc);
		if (more) {
			mq2_store_w<T>(&f, &s[(ks + 1) & 1]);
			mq2_wait_x();
		}
		__syncthreads();
	}
	int lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3, nw = (threadIdx.x >> 5) * 32;
	float sc = scale != NULL ? *scale : 1.0f;
#pragma unroll
	for (int mt = 0; mt < 4; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int64_t r = r0 + mt * 16 + g + (e >> 1) * 8;
				int64_t j = n0 + nw + nt * 8 + 2 * tg + (e & 1);
				if (r < rows && j < n)
					y[j * rows + r] = scale != NULL ? __fmul_rn(acc[mt][nt][e], sc) :
					    acc[mt][nt][e];
			}
}

extern "C" int
gpu_can_matmul_q8(int t)
{
	return t == MQ_Q8_0 || t == MQ_NVFP4;
}

extern "C" int
gpu_tune_mmq(struct gpu *g, int kernel)
{
	if (kernel < GPU_MMQ_MMA || kernel > GPU_MMQ_BF16)
		return gpu_fail(g, "tune: mmq kernel %d (0..5)", kernel);
	return gpu_tune_set(g, &g->mmq, kernel);
}

template <int T>
static void
mq_launch(struct gpu *g, dim3 grid, const uint8_t *W, int64_t rows, int nb, size_t rb,
    const int8_t *q, const float *dx, int64_t n, float *y, const float *scale)
{
	if (g->mmq == GPU_MMQ_MMA1) {
		dim3 grid1((unsigned)((n + MQ_N - 1) / MQ_N), (unsigned)((rows + MQ_R - 1) / MQ_R));
		gpu_launch(g, k_mmq<T>, grid1, MQ_THREADS, 0, W, rows, nb, rb, q, dx, n, y, scale);
	} else if (g->mmq == GPU_MMQ_DP4A)
		gpu_launch(g, k_mmq2<T, 0>, grid, MQ_THREADS, 0, W, rows, nb, rb, q, dx, n, y, scale);
	else if (g->mmq == GPU_MMQ_MMAF)
		gpu_launch(g, k_mmq2<T, 2>, grid, MQ_THREADS, 0, W, rows, nb, rb, q, dx, n, y, scale);
	else
		gpu_launch(g, k_mmq2<T, 1>, grid, MQ_THREADS, 0, W, rows, nb, rb, q, dx, n, y, scale);
}

/* --- GPU_MMQ_BF16: cuBLAS on bf16 operands ---------------------------- */

/* xb = bf16(q * dx) (nearest, ties to even; q * dx is exact in fp32), a
 * thread 4 values: the CPU's int8 activations rounded once more. */
__global__ void
k_q8_bf16(const int8_t *__restrict__ q, const float *__restrict__ dx, int64_t n4,
    uint16_t *__restrict__ xb)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= n4)
		return;
	char4 v = ((const char4 *)q)[i];
	float d = dx[i >> 3];
	__nv_bfloat162 a = __floats2bfloat162_rn(__fmul_rn((float)v.x, d), __fmul_rn((float)v.y, d));
	__nv_bfloat162 b = __floats2bfloat162_rn(__fmul_rn((float)v.z, d), __fmul_rn((float)v.w, d));
	((uint2 *)xb)[i] = make_uint2(*(const unsigned *)&a, *(const unsigned *)&b);
}

/* The weight rows a dequantized tile holds: 256 MiB of bf16 at most. */
static int64_t
bf_tile(int64_t rows, int64_t ne0)
{
	int64_t tile = ((int64_t)128 << 20) / ne0;

	return tile < 1 ? 1 : tile > rows ? rows : tile;
}

uint16_t *
gpu_bf16_operands(struct gpu *g, int64_t n, int64_t rows, int64_t ne0, uint16_t **wb)
{
	size_t xbytes = ((size_t)n * ne0 * 2 + 255) / 256 * 256;
	uint8_t *p;

	if (n > INT32_MAX || rows > INT32_MAX || ne0 > INT32_MAX || ne0 % 32 != 0) {
		gpu_fail(g, "gemm: bf16 operands of %lld x %lld and %lld x %lld", (long long)n,
		    (long long)ne0, (long long)rows, (long long)ne0);
		return NULL;
	}
	if ((p = (uint8_t *)gpu_scratch_gemm(g, xbytes + (size_t)bf_tile(rows, ne0) * ne0 * 2)) ==
	    NULL)
		return NULL;	/* (its message) */
	*wb = (uint16_t *)(p + xbytes);
	return (uint16_t *)p;
}

/*
 * Persistent bf16 copies of quantized weights (gpu_tune_mirror): a weight
 * the bf16 GEMM multiplies is dequantized once, by the kernel a call
 * dequantizes its tiles with (the same values), and the copy serves
 * every later call; it lives until the weight is freed
 * (gpu_free) or mirrors are turned off.  The weight must not change
 * meanwhile (the backend's weights do not).
 */
struct gpu_mirror {
	const void *w;		/* the weight */
	uint16_t *bf;		/* rows x ne0 bf16 */
	int64_t	rows, ne0;
	int	t;
};

void
gpu_mirror_drop(struct gpu *g, const void *w)
{
	for (int i = 0; i < g->nmir; i++)
		if (w == NULL || g->mir[i].w == w) {
			cudaFree(g->mir[i].bf);
			g->mir[i--] = g->mir[--g->nmir];
			g->gen++;	/* device memory freed: graphs reading it are stale */
		}
	if (w == NULL) {
		free(g->mir);
		g->mir = NULL, g->cmir = 0;
	}
}

extern "C" int
gpu_tune_mirror(struct gpu *g, int on)
{
	if (on != 0 && on != 1)
		return gpu_fail(g, "tune: bf16 weight copies %d (0, 1)", on);
	if (!on && g->nmir > 0) {
		cudaStreamSynchronize(g->stream);	/* (a GEMM may still read one) */
		gpu_mirror_drop(g, NULL);
	}
	if (on != g->mirror)
		g->gen++;	/* other reads of the weights: recorded graphs are stale */
	g->mirror = on;
	return 0;
}

extern "C" int
gpu_mirrors(const struct gpu *g, size_t *bytes)
{
	size_t b = 0;

	for (int i = 0; i < g->nmir; i++)
		b += (size_t)g->mir[i].rows * g->mir[i].ne0 * 2;
	if (bytes != NULL)
		*bytes = b;
	return g->nmir;
}

/* W's copy, made now when it has none (one dequantize over every row: a
 * value does not depend on the launch it is in); NULL (the caller
 * dequantizes a tile at a time as without copies) when the device has no
 * room for it. */
static const uint16_t *
mirror_of(struct gpu *g, int t, const void *W, int64_t rows, int64_t ne0)
{
	struct gpu_mirror *m;
	uint16_t *bf = NULL;

	for (int i = 0; i < g->nmir; i++)
		if (g->mir[i].w == W && g->mir[i].t == t && g->mir[i].rows == rows &&
		    g->mir[i].ne0 == ne0)
			return g->mir[i].bf;
	if (gpu_capturing(g))
		return NULL;	/* (no allocation while a graph is recorded) */
	gpu_mirror_drop(g, W);	/* (another shape at the same address) */
	if (g->nmir == g->cmir) {
		int c = g->cmir ? 2 * g->cmir : 64;
		if ((m = (struct gpu_mirror *)realloc(g->mir, (size_t)c * sizeof *m)) == NULL)
			return NULL;
		g->mir = m, g->cmir = c;
	}
	if (cudaMalloc(&bf, (size_t)rows * ne0 * 2) != cudaSuccess) {
		cudaGetLastError();	/* no room: this call goes without */
		return NULL;
	}
	if (gpu_dequantize_bf16(g, t, W, rows, ne0, bf) != 0) {
		cudaStreamSynchronize(g->stream);
		cudaFree(bf);
		return NULL;
	}
	m = &g->mir[g->nmir++];
	m->w = W, m->bf = bf, m->rows = rows, m->ne0 = ne0, m->t = t;
	return bf;
}

int
gpu_gemm_bf16(struct gpu *g, int t, const void *W, int64_t rows, int64_t ne0,
    const uint16_t *xb, uint16_t *wb, int64_t n, float *y, const float *scale)
{
	const float one = 1.0f, zero = 0.0f;
	int64_t tile = bf_tile(rows, ne0);
	const uint16_t *mb = g->mirror ? mirror_of(g, t, W, rows, ne0) : NULL;
	int rc = 0;

	cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH);	/* tensor cores (bf16: no TF32 here) */
	for (int64_t r0 = 0; rc == 0 && r0 < rows; r0 += tile) {
		int64_t nr = rows - r0 < tile ? rows - r0 : tile;
		/* the tile's bf16 rows: the copy's, or dequantized now */
		const uint16_t *a = mb != NULL ? mb + (size_t)r0 * ne0 : wb;
		if (mb == NULL && (rc = gpu_dequantize_rows_bf16(g, t, W, r0, nr, ne0, wb)) != 0)
			break;
		cublasStatus_t st = cublasGemmEx(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)nr, (int)n,
		    (int)ne0, &one, a, CUDA_R_16BF, (int)ne0, xb, CUDA_R_16BF, (int)ne0, &zero,
		    y + r0, CUDA_R_32F, (int)rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
		if (st != CUBLAS_STATUS_SUCCESS)
			rc = gpu_fail(g, "cublasGemmEx: status %d", (int)st);
		else if (g->prof != NULL)
			rc = gpu_prof_mark(g, "cublas bf16 gemm");
	}
	cublasSetMathMode(g->blas, CUBLAS_PEDANTIC_MATH);
	return rc == 0 && scale != NULL ? gpu_scale(g, y, n * rows, scale) : rc;
}

/* --- the vision towers' products on half operands (gpu_matmul_half) --- */

enum { MH_F32 = 0, MH_F16 = 1, MH_BF16 = 30 };	/* ggml's type numbers */

/* dst = src rounded to f16 (F16 1) or bf16 (0), nearest, ties to even, as
 * lib/quant's quant_f32_to_f16 / quant_f32_to_bf16 (ggml's conversions;
 * a NaN stays a NaN): a thread 2 values. */
template <int F16>
__global__ void
k_half_of(const float *__restrict__ src, int64_t n2, unsigned *__restrict__ dst)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < n2) {
		float2 v = ((const float2 *)src)[i];
		if (F16) {
			__half2 h = __floats2half2_rn(v.x, v.y);
			dst[i] = *(const unsigned *)&h;
		} else {
			__nv_bfloat162 b = __floats2bfloat162_rn(v.x, v.y);
			dst[i] = *(const unsigned *)&b;
		}
	}
}

/* n floats (even) at src rounded to f16 (f16 1) or bf16 into dst, queued;
 * what names the launch (profiles, errors).  gpu_matmul's bf16 operands
 * (cuda/matvec.cu) too. */
int
gpu_half_of(struct gpu *g, int f16, const float *src, int64_t n, uint16_t *dst, const char *what)
{
	int64_t n2 = n / 2;
	unsigned blocks = (unsigned)((n2 + 255) / 256);

	if (f16)
		gpu_launch(g, k_half_of<1>, blocks, 256, 0, src, n2, (unsigned *)dst);
	else
		gpu_launch(g, k_half_of<0>, blocks, 256, 0, src, n2, (unsigned *)dst);
	GPU_LAUNCHED(g, what);
	return 0;
}

/* The GEMMs of gpu_matmul_half: W a tile at a time (in place: one tile). */
static int
half_gemm(struct gpu *g, int t, int ht, const void *d_w, int64_t rows, int64_t ne0,
    const uint16_t *xb, uint16_t *wb, int64_t tile, int64_t n, float *d_y)
{
	const float one = 1.0f, zero = 0.0f;
	cudaDataType_t dt = ht == MH_F16 ? CUDA_R_16F : CUDA_R_16BF;
	int rc = 0;

	cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH);	/* tensor cores */
	for (int64_t r0 = 0; rc == 0 && r0 < rows; r0 += tile) {
		int64_t nr = rows - r0 < tile ? rows - r0 : tile;
		const uint16_t *a = t == ht ? (const uint16_t *)d_w + (size_t)r0 * ne0 : wb;
		/* F32 rows hold values of ht (their weight's own): exact in it */
		if (t != ht && (rc = gpu_half_of(g, ht == MH_F16, (const float *)d_w +
		    (size_t)r0 * ne0, nr * ne0, wb, "matmul_half round")) != 0)
			break;
		cublasStatus_t st = cublasGemmEx(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)nr, (int)n,
		    (int)ne0, &one, a, dt, (int)ne0, xb, dt, (int)ne0, &zero, d_y + r0, CUDA_R_32F,
		    (int)rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
		if (st != CUBLAS_STATUS_SUCCESS)
			rc = gpu_fail(g, "cublasGemmEx: status %d", (int)st);
		else if (g->prof != NULL)
			rc = gpu_prof_mark(g, ht == MH_F16 ? "cublas f16 gemm" : "cublas bf16 gemm");
	}
	cublasSetMathMode(g->blas, CUBLAS_PEDANTIC_MATH);
	return rc;
}

extern "C" int
gpu_matmul_half(struct gpu *g, int t, int ht, const void *d_w, int64_t rows, int64_t ne0,
    const float *d_x, int64_t n, float *d_y, const float *d_scale)
{
	int64_t tile = t == ht ? rows : bf_tile(rows, ne0);
	size_t xbytes = ((size_t)n * ne0 * 2 + 255) / 256 * 256;
	uint8_t *p;

	if ((ht != MH_F16 && ht != MH_BF16) || (t != ht && t != MH_F32))
		return gpu_fail(g, "matmul_half: weights of type %d on operands of type %d", t, ht);
	if (n < 1 || rows < 1 || n > INT32_MAX || rows > INT32_MAX || ne0 > INT32_MAX ||
	    ne0 % 32 != 0 || (n * ne0 / 2 + 255) / 256 > INT32_MAX || ((uintptr_t)d_w & 15) ||
	    ((uintptr_t)d_x & 7))
		return gpu_fail(g, "matmul_half: %lld rows of %lld, %lld inputs, or unaligned",
		    (long long)rows, (long long)ne0, (long long)n);
	if ((p = (uint8_t *)gpu_scratch_gemm(g, xbytes + (t == ht ? 0 :
	    (size_t)tile * ne0 * 2))) == NULL)
		return -1;	/* (its message) */
	if (gpu_half_of(g, ht == MH_F16, d_x, n * ne0, (uint16_t *)p, "matmul_half round") != 0 ||
	    half_gemm(g, t, ht, d_w, rows, ne0, (const uint16_t *)p, (uint16_t *)(p + xbytes), tile,
	    n, d_y) != 0)
		return -1;
	return d_scale != NULL ? gpu_scale(g, d_y, n * rows, d_scale) : 0;
}

/* y = W . x on bf16 operands, x from q and dx by k_q8_bf16. */
static int
mq_bf16(struct gpu *g, int t, const uint8_t *W, int64_t rows, int64_t ne0,
    const int8_t *q, const float *dx, int64_t n, float *y, const float *scale)
{
	uint16_t *wb, *xb = gpu_bf16_operands(g, n, rows, ne0, &wb);
	int64_t n4 = n * ne0 / 4;

	if (xb == NULL)
		return -1;
	gpu_launch(g, k_q8_bf16, (unsigned)((n4 + 255) / 256), 256, 0, q, dx, n4, xb);
	GPU_LAUNCHED(g, "matmul_q8 bf16 x");
	return gpu_gemm_bf16(g, t, W, rows, ne0, xb, wb, n, y, scale);
}

extern "C" int
gpu_matmul_q8(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
    const int8_t *d_q, const float *d_dx, int64_t n, float *d_y, const float *d_scale)
{
	int nb = (int)(ne0 / 32);
	size_t rb = t == MQ_NVFP4 ? (size_t)(ne0 / 64) * 36 : (size_t)nb * 34;

	if (!gpu_can_matmul_q8(t))
		return gpu_fail(g, "matmul_q8: type %d (Q8_0, NVFP4)", t);
	if (n < 1 || rows < 1 || ne0 % (t == MQ_NVFP4 ? 64 : 32) != 0 || ne0 > INT32_MAX ||
	    (n + MQ_N - 1) / MQ_N > INT32_MAX || (rows + MQ_R - 1) / MQ_R > 65535 ||
	    ((uintptr_t)d_w & 3) || ((uintptr_t)d_q & 15))
		return gpu_fail(g, "matmul_q8: %lld rows of %lld, %lld inputs, or unaligned",
		    (long long)rows, (long long)ne0, (long long)n);
	if (g->mmq == GPU_MMQ_BF16)
		return mq_bf16(g, t, (const uint8_t *)d_w, rows, ne0, d_q, d_dx, n, d_y, d_scale);
	dim3 grid((unsigned)((n + MQ2_N - 1) / MQ2_N), (unsigned)((rows + MQ2_R - 1) / MQ2_R));
	if (t == MQ_NVFP4)
		mq_launch<MQ_NVFP4>(g, grid, (const uint8_t *)d_w, rows, nb, rb, d_q, d_dx, n,
		    d_y, d_scale);
	else
		mq_launch<MQ_Q8_0>(g, grid, (const uint8_t *)d_w, rows, nb, rb, d_q, d_dx, n,
		    d_y, d_scale);
	GPU_LAUNCHED(g, "matmul_q8");
	return 0;
}
