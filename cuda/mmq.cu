/*
 * mmq: the prefill product on int8 activations (n > 16 input rows) for
 * Q8_0 and NVFP4 weights, as a tiled GEMM.  A thread block computes 64
 * weight rows x 64 input rows: per step it decodes 256 values of its 64
 * weight rows (Q8_0: 8 blocks; NVFP4: 4 blocks, 16 sub-blocks of 16) to
 * int8 in shared memory with their scales, copies the 64 input rows'
 * int8 values and block scales beside them, and each warp multiplies its
 * 32 x 32 part: per (sub-)block an exact integer dot, then acc +=
 * (float)dot * (weight scale * input scale), sub-blocks in order, as
 * lib/quant's quant_vec_dot scales them.  So each weight is read once per
 * 64 input rows (the matvec kernel reads it once per 16).
 *
 * Two inner products give the same bits: the tensor cores (mma.sync
 * m16n8k32 s8 for Q8_0 blocks, m16n8k16 for NVFP4 sub-blocks) and dp4a
 * (the plain reference, kept to check the fragment layouts against).  No
 * atomics: a call's result depends only on its operands and on n (not
 * batch-invariant with the matvec kernel: other sum order, same numerics).
 */
#include "gpu_impl.cuh"

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
			if (r0 + r < rows && gb < nbw) {
				const uint32_t *pw = (const uint32_t *)(W + (size_t)(r0 + r) * rb +
				    (size_t)gb * 36);
				uint32_t sc = __ldg(pw);
#pragma unroll
				for (int q = 0; q < 4; q++) {
					uint32_t lo = __ldg(pw + 1 + 2 * q), hi = __ldg(pw + 2 + 2 * q);
					dst[q] = make_int4(gpu_fp4x4(lo), gpu_fp4x4(hi), gpu_fp4x4(lo >> 4),
					    gpu_fp4x4(hi >> 4));
					s->ws[r * 17 + b * 4 + q] = gpu_ue4m3_half((sc >> (8 * q)) & 0xFF);
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
				int c0, c1, c2, c3;
				if (T == MQ_Q8_0)
					asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
					    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
					    : "=r"(c0), "=r"(c1), "=r"(c2), "=r"(c3)
					    : "r"(a[mt][0]), "r"(a[mt][1]), "r"(a[mt][2]), "r"(a[mt][3]),
					      "r"(b[nt][0]), "r"(b[nt][1]), "r"(0));
				else
					asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 "
					    "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
					    : "=r"(c0), "=r"(c1), "=r"(c2), "=r"(c3)
					    : "r"(a[mt][0]), "r"(a[mt][1]), "r"(b[nt][0]), "r"(0));
				acc[mt][nt][0] = mq_step(acc[mt][nt][0], c0, dwa[mt], dx0[nt]);
				acc[mt][nt][1] = mq_step(acc[mt][nt][1], c1, dwa[mt], dx1[nt]);
				acc[mt][nt][2] = mq_step(acc[mt][nt][2], c2, dwb[mt], dx0[nt]);
				acc[mt][nt][3] = mq_step(acc[mt][nt][3], c3, dwb[mt], dx1[nt]);
			}
	}
}

/* The same outputs (the same acc slots, the same bits) by dp4a. */
template <int T>
__device__ __forceinline__ void
mq_dp4a(const struct mq_smem *s, float (*acc)[4][4])
{
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
	int rw = (w & 1) * 32, nw = (w >> 1) * 32;
	enum { NSB = T == MQ_Q8_0 ? 8 : 16, SBI = MQ_KI / NSB };

	for (int sb = 0; sb < NSB; sb++) {
		int k = sb * SBI, xb = T == MQ_Q8_0 ? sb : sb / 2;
#pragma unroll
		for (int mt = 0; mt < 2; mt++)
#pragma unroll
			for (int nt = 0; nt < 4; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					int r = rw + mt * 16 + g + (e >> 1) * 8;
					int j = nw + nt * 8 + 2 * tg + (e & 1);
					const int *wr = s->w + r * MQ_LD + k, *xr = s->x + j * MQ_LD + k;
					int c = 0;
#pragma unroll
					for (int i = 0; i < SBI; i++)
						c = __dp4a(wr[i], xr[i], c);
					acc[mt][nt][e] = mq_step(acc[mt][nt][e], c,
					    s->ws[r * 17 + sb], s->xd[j * 9 + xb]);
				}
	}
}

/* Grid: x over tiles of input rows (neighbours share a weight tile in
 * L2), y over tiles of weight rows. */
template <int T, int MMA>
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
	for (int ks = 0; ks < nks; ks++) {
		__syncthreads();
		mq_load_w<T>(&s, W, rows, nbw, rb, r0, ks);
		mq_load_x(&s, q, dx, n, nb, n0, ks);
		__syncthreads();
		if (MMA)
			mq_mma<T>(&s, acc);
		else
			mq_dp4a<T>(&s, acc);
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

extern "C" int
gpu_can_matmul_q8(int t)
{
	return t == MQ_Q8_0 || t == MQ_NVFP4;
}

extern "C" int
gpu_tune_mmq(struct gpu *g, int kernel)
{
	if (kernel < GPU_MMQ_MMA || kernel > GPU_MMQ_OFF)
		return gpu_fail(g, "tune: mmq kernel %d (0..2)", kernel);
	if (kernel != g->mmq)
		g->gen++;	/* other kernels: recorded graphs are stale */
	g->mmq = kernel;
	return 0;
}

template <int T>
static void
mq_launch(struct gpu *g, dim3 grid, const uint8_t *W, int64_t rows, int nb, size_t rb,
    const int8_t *q, const float *dx, int64_t n, float *y, const float *scale)
{
	if (g->mmq == GPU_MMQ_DP4A)
		k_mmq<T, 0><<<grid, MQ_THREADS, 0, g->stream>>>(W, rows, nb, rb, q, dx, n, y, scale);
	else
		k_mmq<T, 1><<<grid, MQ_THREADS, 0, g->stream>>>(W, rows, nb, rb, q, dx, n, y, scale);
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
	dim3 grid((unsigned)((n + MQ_N - 1) / MQ_N), (unsigned)((rows + MQ_R - 1) / MQ_R));
	if (t == MQ_NVFP4)
		mq_launch<MQ_NVFP4>(g, grid, (const uint8_t *)d_w, rows, nb, rb, d_q, d_dx, n,
		    d_y, d_scale);
	else
		mq_launch<MQ_Q8_0>(g, grid, (const uint8_t *)d_w, rows, nb, rb, d_q, d_dx, n,
		    d_y, d_scale);
	GPU_LAUNCHED(g, "matmul_q8");
	return 0;
}
