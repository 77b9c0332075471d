/*
 * mmq_iq4: the prefill product of IQ4_XS weights on Q8_K activations (n >
 * 16 input rows), by the prefill kernel gpu_tune_mmq picks:
 *
 * GPU_MMQ_MMA (and MMAF, MMA1: this type has one tensor-core kernel) the
 * CPU's numerics as a tiled GEMM: per super-block of 256 and pair (weight
 * row, input row) the integer sum over its 8 sub-blocks s of (ls_s - 32)
 * times the exact dot of s's 32 int8 grid values with the input's 32 int8
 * quants, then acc = acc + (d * dy) * (float)isum, super-blocks in order:
 * lib/quant_dot.c's portable vd_k bit for bit (its AVX2 form sums in 8
 * lanes: the same up to the order of float sums), not the decode kernel's
 * order (matvec_iq4.cu's lanes add float terms per sub-block), so not
 * batch-invariant with it.  A block computes 64 weight rows x 64 input rows
 * a super-block at a time: the weights' 256 values a row decoded to int8
 * by gpu_iq4x8 (each of 8 threads of a row a sub-block: a row's 128 quant
 * bytes read by contiguous 16-byte pieces) with their sub-block scales, the
 * inputs' 256 quants a row, into shared memory; each warp 32 x 32 by
 * mma.sync m16n8k32 .s8 (the fragments of mmq.cu's first kernel) per
 * sub-block, the scale multiply-added in int32 (|isum| < 2^28).  GPU_MMQ_DP4A:
 * the same integer sums by dp4a (the same bits: the check of the fragments).
 *
 * GPU_MMQ_BF16 (the CUDA backend's default): the input's Q8_K values as
 * lib/quant dequantizes them (d * q in fp32) and the weights dequantized,
 * each rounded to bf16, cuBLAS with fp32 sums (mmq.cu's gpu_gemm_bf16,
 * with its weight copies under gpu_tune_mirror), as the Q8_0 and NVFP4
 * GEMMs do on bf16.
 *
 * GPU_MMQ_OFF: the decode kernel 16 rows a launch (each row the decode bits).
 */
#include "gpu_impl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

enum {
	XQ_R = 64,		/* weight rows of a tile */
	XQ_N = 64,		/* input rows of a tile */
	XQ_LD = 68,		/* ints a row in shared memory: 64, padded (no bank conflicts) */
	XQ_THREADS = 128,
	XQ_BS = 136,		/* bytes of an IQ4_XS super-block */
	XQ_TYPE = 23,		/* IQ4_XS's ggml type id */
};

/* One super-block's tile: w and x as int8 quads in value order, the weight
 * rows' sub-block scales less 32 (row r's at 9 r) and d, the inputs' d. */
struct xq_smem {
	int	w[XQ_R * XQ_LD];
	int	x[XQ_N * XQ_LD];
	int	sc[XQ_R * 9];
	float	d[XQ_R];
	float	dk[XQ_N];
};

/* Super-block ks of weight rows r0.. and input rows n0.. into s (zeros past
 * rows and n).  Thread t of a pass: weight row t / 8, sub-block t % 8. */
__device__ __forceinline__ void
xq_load(struct xq_smem *s, const uint8_t *__restrict__ W, int64_t rows, size_t rb, int64_t r0,
    const int8_t *__restrict__ q, const float *__restrict__ dk, int64_t n, int nb, int64_t n0,
    int ks)
{
	for (int it = threadIdx.x; it < XQ_R * 8; it += XQ_THREADS) {
		int r = it >> 3, sb = it & 7, v[8], sc = 0;
		float d = 0.0f;
		if (r0 + r < rows) {
			const uint8_t *blk = W + (size_t)(r0 + r) * rb + (size_t)ks * XQ_BS;
			uint2 h = __ldg((const uint2 *)blk);
			uint2 a = __ldg((const uint2 *)(blk + 8 + 16 * sb));
			uint2 b = __ldg((const uint2 *)(blk + 16 + 16 * sb));
			sc = ((int)(h.y >> (4 * sb) & 0xFu) | (int)(h.x >> (16 + 2 * sb) & 3u) << 4) - 32;
			d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xFFFFu)));
			gpu_iq4x8(a.x, &v[0], &v[4]);
			gpu_iq4x8(a.y, &v[1], &v[5]);
			gpu_iq4x8(b.x, &v[2], &v[6]);
			gpu_iq4x8(b.y, &v[3], &v[7]);
		} else {
#pragma unroll
			for (int i = 0; i < 8; i++)
				v[i] = 0;
		}
		int4 *dst = (int4 *)&s->w[r * XQ_LD + sb * 8];
		dst[0] = make_int4(v[0], v[1], v[2], v[3]);
		dst[1] = make_int4(v[4], v[5], v[6], v[7]);
		s->sc[r * 9 + sb] = sc;
		if (sb == 0)
			s->d[r] = d;
	}
	for (int it = threadIdx.x; it < XQ_N * 16; it += XQ_THREADS) {
		int j = it >> 4, c = it & 15;
		int4 v = make_int4(0, 0, 0, 0);
		if (n0 + j < n)
			v = __ldg((const int4 *)(q + ((size_t)(n0 + j) * nb + ks) * 256) + c);
		*(int4 *)&s->x[j * XQ_LD + c * 4] = v;
	}
	for (int j = threadIdx.x; j < XQ_N; j += XQ_THREADS)
		s->dk[j] = n0 + j < n ? __ldg(dk + (size_t)(n0 + j) * nb + ks) : 0.0f;
}

/*
 * Warp w's 32 x 32 part of one super-block: weight rows (w & 1) * 32 + 16
 * mt + g (+ 8), input rows (w >> 1) * 32 + 8 nt + 2 tg (+ 1), g = lane / 4,
 * tg = lane % 4 (the PTX fragment layouts of m16n8k32 .s8); is[mt][nt][e]
 * += (ls - 32) * dot per sub-block (K = 1 mma, 0 dp4a: the same sums),
 * then acc += (d * dy) * (float)is.
 */
template <int K>
__device__ __forceinline__ void
xq_mma(const struct xq_smem *s, float (*acc)[4][4])
{
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
	int rw = (w & 1) * 32, nw = (w >> 1) * 32;
	int is[2][4][4];

#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				is[mt][nt][e] = 0;
#pragma unroll 2
	for (int sb = 0; sb < 8; sb++) {
		int k = sb * 8, sa[2], sc8[2];
#pragma unroll
		for (int mt = 0; mt < 2; mt++) {
			sa[mt] = s->sc[(rw + mt * 16 + g) * 9 + sb];
			sc8[mt] = s->sc[(rw + mt * 16 + g + 8) * 9 + sb];
		}
		if (K) {
			int a[2][4], b[4][2];
#pragma unroll
			for (int mt = 0; mt < 2; mt++) {
				const int *ra = s->w + (rw + mt * 16 + g) * XQ_LD + k + tg;
				a[mt][0] = ra[0], a[mt][1] = ra[8 * XQ_LD];
				a[mt][2] = ra[4], a[mt][3] = ra[8 * XQ_LD + 4];
			}
#pragma unroll
			for (int nt = 0; nt < 4; nt++) {
				const int *xr = s->x + (nw + nt * 8 + g) * XQ_LD + k + tg;
				b[nt][0] = xr[0], b[nt][1] = xr[4];
			}
#pragma unroll
			for (int mt = 0; mt < 2; mt++)
#pragma unroll
				for (int nt = 0; nt < 4; nt++) {
					int c[4];
					asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
					    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
					    : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
					    : "r"(a[mt][0]), "r"(a[mt][1]), "r"(a[mt][2]), "r"(a[mt][3]),
					      "r"(b[nt][0]), "r"(b[nt][1]), "r"(0));
					is[mt][nt][0] += sa[mt] * c[0], is[mt][nt][1] += sa[mt] * c[1];
					is[mt][nt][2] += sc8[mt] * c[2], is[mt][nt][3] += sc8[mt] * c[3];
				}
		} else {
#pragma unroll
			for (int mt = 0; mt < 2; mt++)
#pragma unroll
				for (int nt = 0; nt < 4; nt++)
#pragma unroll
					for (int e = 0; e < 4; e++) {
						int r = rw + mt * 16 + g + (e >> 1) * 8, j = nw + nt * 8 + 2 * tg + (e & 1);
						const int *wr = s->w + r * XQ_LD + k, *xr = s->x + j * XQ_LD + k;
						int c = 0;
#pragma unroll
						for (int i = 0; i < 8; i++)
							c = __dp4a(wr[i], xr[i], c);
						is[mt][nt][e] += (e >> 1 ? sc8[mt] : sa[mt]) * c;
					}
		}
	}
#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int r = rw + mt * 16 + g + (e >> 1) * 8, j = nw + nt * 8 + 2 * tg + (e & 1);
				acc[mt][nt][e] = __fadd_rn(acc[mt][nt][e], __fmul_rn(__fmul_rn(s->d[r], s->dk[j]),
				    __int2float_rn(is[mt][nt][e])));
			}
}

/* Grid: x over tiles of input rows (neighbours share a weight tile in L2),
 * y over tiles of weight rows. */
template <int K>
__global__ void __launch_bounds__(XQ_THREADS)
k_mmq_iq4xs(const uint8_t *__restrict__ W, int64_t rows, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dk, int64_t n, float *y, const float *scale)
{
	__shared__ struct xq_smem s;
	int64_t n0 = (int64_t)blockIdx.x * XQ_N, r0 = (int64_t)blockIdx.y * XQ_R;
	size_t rb = (size_t)nb * XQ_BS;
	float acc[2][4][4];

#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[mt][nt][e] = 0.0f;
	pdl_enter();
	for (int ks = 0; ks < nb; ks++) {
		__syncthreads();	/* the last super-block read */
		xq_load(&s, W, rows, rb, r0, q, dk, n, nb, n0, ks);
		__syncthreads();
		xq_mma<K>(&s, acc);
	}
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int64_t r = r0 + (w & 1) * 32 + mt * 16 + g + (e >> 1) * 8;
				int64_t j = n0 + (w >> 1) * 32 + nt * 8 + 2 * tg + (e & 1);
				if (r < rows && j < n)
					y[j * rows + r] = scale != NULL ? __fmul_rn(acc[mt][nt][e], *scale) :
					    acc[mt][nt][e];
			}
}

/* xb = bf16(dk * q) (nearest, ties to even; dk * q rounded to fp32 first,
 * as lib/quant's Q8_K dequantization), a thread 4 values. */
__global__ void
k_q8k_bf16(const int8_t *__restrict__ q, const float *__restrict__ dk, int64_t n4,
    uint16_t *__restrict__ xb)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= n4)
		return;
	char4 v = ((const char4 *)q)[i];
	float d = dk[i >> 6];	/* 64 threads a block of 256 */
	__nv_bfloat162 a = __floats2bfloat162_rn(__fmul_rn(d, (float)v.x), __fmul_rn(d, (float)v.y));
	__nv_bfloat162 b = __floats2bfloat162_rn(__fmul_rn(d, (float)v.z), __fmul_rn(d, (float)v.w));
	((uint2 *)xb)[i] = make_uint2(*(const unsigned *)&a, *(const unsigned *)&b);
}

int
iq4xs_matmul(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, const int8_t *q,
    const float *dk, int64_t n, float *d_y, const float *d_scale)
{
	int nb = (int)(ne0 / 256);

	if (n < 1 || rows < 1 || ne0 % 256 != 0 || ne0 < 256 || ne0 > INT32_MAX ||
	    (n + XQ_N - 1) / XQ_N > INT32_MAX || (rows + XQ_R - 1) / XQ_R > 65535 ||
	    ((uintptr_t)d_w & 7) || ((uintptr_t)q & 15))
		return gpu_fail(g, "matmul_q8k: IQ4_XS, %lld rows of %lld, %lld inputs, or unaligned",
		    (long long)rows, (long long)ne0, (long long)n);
	if (g->mmq == GPU_MMQ_OFF) {	/* the decode kernel, 16 rows a launch */
		for (int64_t r0 = 0; r0 < n; r0 += GPU_MATVEC_MAX_ROWS) {
			int m = n - r0 < GPU_MATVEC_MAX_ROWS ? (int)(n - r0) : GPU_MATVEC_MAX_ROWS;
			if (iq4xs_product(g, d_w, rows, ne0, q + (size_t)r0 * ne0, dk + (size_t)r0 * nb, m,
			    d_y + (size_t)r0 * rows, d_scale) != 0)
				return -1;
		}
		return 0;
	}
	if (g->mmq == GPU_MMQ_BF16) {
		uint16_t *wb, *xb = gpu_bf16_operands(g, n, rows, ne0, &wb);
		int64_t n4 = n * ne0 / 4;
		if (xb == NULL)
			return -1;
		gpu_launch(g, k_q8k_bf16, (unsigned)((n4 + 255) / 256), 256, 0, q, dk, n4, xb);
		GPU_LAUNCHED(g, "matmul_q8k bf16 x");
		return gpu_gemm_bf16(g, XQ_TYPE, d_w, rows, ne0, xb, wb, n, d_y, d_scale);
	}
	dim3 grid((unsigned)((n + XQ_N - 1) / XQ_N), (unsigned)((rows + XQ_R - 1) / XQ_R));
	if (g->mmq == GPU_MMQ_DP4A)
		gpu_launch(g, k_mmq_iq4xs<0>, grid, XQ_THREADS, 0, (const uint8_t *)d_w, rows, nb, q, dk,
		    n, d_y, d_scale);
	else
		gpu_launch(g, k_mmq_iq4xs<1>, grid, XQ_THREADS, 0, (const uint8_t *)d_w, rows, nb, q, dk,
		    n, d_y, d_scale);
	GPU_LAUNCHED(g, "matmul_iq4xs");
	return 0;
}