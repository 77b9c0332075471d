/*
 * matvec_q8: the decode product on int8 activations (llama.cpp's MMVQ
 * idea): x is quantized once per call to Q8_0 blocks exactly as lib/quant's
 * quant_quantize_act does (d = amax/127 kept as fp16, q = round(x / d)),
 * then each block's integer dot runs on dp4a and is scaled as
 * quant_vec_dot scales it, so a product equals the CPU backend's up to
 * the order of the float sums.  Weights: Q8_0 and NVFP4 (against Q8_0
 * activations), Q4_1 and Q5_1 (against Q8_1: the same q plus s = d * sum q
 * as fp16).  One warp per weight row, lane l takes
 * blocks l, l+32, ...; every input row is summed by the same code in the
 * same order whatever m is (batch-invariant).
 */
#include "gpu_impl.cuh"

#include <cuda_fp16.h>

enum { Q8_T_Q4_1 = 3, Q8_T_Q5_1 = 7, Q8_T_Q8_0 = 8, Q8_T_NVFP4 = 40 };

/* ggml's ue4m3 scale times 0.5 (lib/quant's qi_ue4m3_half): exact. */
__device__ __forceinline__ float
ue4m3_half(unsigned x)
{
	int e = (x >> 3) & 0xF, man = x & 7;

	if (x == 0 || x == 0x7F)
		return 0.0f;
	float raw = e == 0 ? (float)man * 0x1p-9f : (1.0f + (float)man / 8.0f) * ldexpf(1.0f, e - 7);
	return raw * 0.5f;
}

/* kvalues_mxfp4 (e2m1 codes as integers, twice the value) of the low
 * nibbles of v's four bytes, packed as four int8 for dp4a.  Two byte
 * permutes over the table held in registers (magnitudes 0,1,2,3,4,6,8,12
 * and their negations), then bit 3 of each nibble picks the sign: a local
 * array indexed by data went to local memory (64-byte stack frame in the
 * m = 1, 2 instances, 10x slower). */
__device__ __forceinline__ int
fp4x4(uint32_t v)
{
	uint32_t q = v & 0x07070707u, t = q | q >> 4;
	uint32_t sel = (t & 0xFFu) | (t >> 8 & 0xFF00u);
	uint32_t pos = __byte_perm(0x03020100u, 0x0C080604u, sel);
	uint32_t neg = __byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, sel);
	uint32_t mask = (v >> 3 & 0x01010101u) * 0xFFu;

	return (int)((pos & ~mask) | (neg & mask));
}

/* One warp per 32-block of x: q[w][32], dx[w] (the fp16 scale as float),
 * sx[w] (Q8_1's fp16 d * sum q, when sx is not NULL). */
__global__ void
k_q8x(const float *x, int nb, int64_t total, int8_t *q, float *dx, float *sx)
{
	int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;

	if (w >= total)
		return;
	float v = x[w * 32 + lane], a = fabsf(v);
	for (int o = 16; o > 0; o >>= 1)
		a = fmaxf(a, __shfl_xor_sync(0xFFFFFFFFu, a, o));
	float d = __fdiv_rn(a, 127.0f);
	float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
	int qi = (int)(int8_t)roundf(__fmul_rn(v, id)), sum = qi;
	q[w * 32 + lane] = (int8_t)qi;
	for (int o = 16; o > 0; o >>= 1)
		sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
	if (lane == 0) {
		dx[w] = __half2float(__float2half_rn(d));
		if (sx != NULL)
			sx[w] = __half2float(__float2half_rn(__fmul_rn((float)sum, d)));
	}
}

template <int T, int M>
__global__ void __launch_bounds__(256)
k_mv8(const uint8_t *__restrict__ W, int64_t rows, int nb, size_t rowbytes,
    const int8_t *__restrict__ q, const float *__restrict__ dx, const float *__restrict__ sx,
    int m, float *y, const float *scale)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	float acc[M];

	if (r >= rows)
		return;
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	const uint8_t *wr = W + r * rowbytes;
	if (T == Q8_T_Q8_0) {
		for (int b = lane; b < nb; b += 32) {
			const uint16_t *blk = (const uint16_t *)(wr + (size_t)b * 34);
			float dw = __half2float(__ushort_as_half(blk[0]));
			int wq[8];
#pragma unroll
			for (int i = 0; i < 8; i++)
				wq[i] = (int)((unsigned)blk[1 + 2 * i] | (unsigned)blk[2 + 2 * i] << 16);
#pragma unroll
			for (int j = 0; j < M; j++) {
				if (j >= m)
					break;
				const int4 *xq = (const int4 *)(q + ((size_t)j * nb + b) * 32);
				int4 a = xq[0], c = xq[1];
				int s = __dp4a(wq[0], a.x, 0);
				s = __dp4a(wq[1], a.y, s), s = __dp4a(wq[2], a.z, s);
				s = __dp4a(wq[3], a.w, s), s = __dp4a(wq[4], c.x, s);
				s = __dp4a(wq[5], c.y, s), s = __dp4a(wq[6], c.z, s);
				s = __dp4a(wq[7], c.w, s);
				acc[j] = __fadd_rn(acc[j], __fmul_rn((float)s,
				    __fmul_rn(dw, dx[(size_t)j * nb + b])));
			}
		}
	} else if (T == Q8_T_Q4_1 || T == Q8_T_Q5_1) {
		/* d, m (fp16), [qh (4 bytes) for Q5_1], qs[16]: values 0..15 or 0..31 */
		enum { BS = T == Q8_T_Q5_1 ? 24 : 20 };
		for (int b = lane; b < nb; b += 32) {
			const uint32_t *blk = (const uint32_t *)(wr + (size_t)b * BS);
			uint32_t dm = blk[0], qh = T == Q8_T_Q5_1 ? blk[1] : 0;
			const uint32_t *qs = blk + (T == Q8_T_Q5_1 ? 2 : 1);
			float dw = __half2float(__ushort_as_half((unsigned short)(dm & 0xFFFF)));
			float mw = __half2float(__ushort_as_half((unsigned short)(dm >> 16)));
			int wq[8];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				uint32_t v = qs[i], lo = v & 0x0F0F0F0Fu, hi = (v >> 4) & 0x0F0F0F0Fu;
				if (T == Q8_T_Q5_1) {	/* bit j of qh -> value j, bit j+16 -> value j+16 */
					uint32_t h0 = qh >> (4 * i), h1 = qh >> (4 * i + 16);
					lo |= ((h0 & 1) << 4) | ((h0 & 2) << 11) | ((h0 & 4) << 18) | ((h0 & 8) << 25);
					hi |= ((h1 & 1) << 4) | ((h1 & 2) << 11) | ((h1 & 4) << 18) | ((h1 & 8) << 25);
				}
				wq[i] = (int)lo;
				wq[4 + i] = (int)hi;
			}
#pragma unroll
			for (int j = 0; j < M; j++) {
				if (j >= m)
					break;
				const int4 *xq = (const int4 *)(q + ((size_t)j * nb + b) * 32);
				int4 a = xq[0], c = xq[1];
				int s = __dp4a(wq[0], a.x, 0);
				s = __dp4a(wq[1], a.y, s), s = __dp4a(wq[2], a.z, s);
				s = __dp4a(wq[3], a.w, s), s = __dp4a(wq[4], c.x, s);
				s = __dp4a(wq[5], c.y, s), s = __dp4a(wq[6], c.z, s);
				s = __dp4a(wq[7], c.w, s);
				size_t xi = (size_t)j * nb + b;
				acc[j] = __fadd_rn(acc[j], __fadd_rn(__fmul_rn(__fmul_rn(dw, dx[xi]),
				    (float)s), __fmul_rn(mw, sx[xi])));
			}
		}
	} else {
		for (int b = lane; b < nb / 2; b += 32) {
			const uint32_t *blk = (const uint32_t *)(wr + (size_t)b * 36);
			uint32_t sc = blk[0];
#pragma unroll
			for (int s = 0; s < 4; s++) {
				uint32_t lo = blk[1 + 2 * s], hi = blk[2 + 2 * s];
				float ws = ue4m3_half((sc >> (8 * s)) & 0xFF);
				int w0 = fp4x4(lo), w1 = fp4x4(hi), w2 = fp4x4(lo >> 4), w3 = fp4x4(hi >> 4);
				int xb = 2 * b + s / 2;
#pragma unroll
				for (int j = 0; j < M; j++) {
					if (j >= m)
						break;
					int4 a = *(const int4 *)(q + ((size_t)j * nb + xb) * 32 + (s & 1) * 16);
					int t = __dp4a(w0, a.x, 0);
					t = __dp4a(w1, a.y, t), t = __dp4a(w2, a.z, t), t = __dp4a(w3, a.w, t);
					acc[j] = __fadd_rn(acc[j], __fmul_rn((float)t,
					    __fmul_rn(ws, dx[(size_t)j * nb + xb])));
				}
			}
		}
	}
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

extern "C" int
gpu_can_matvec_q8(int t)
{
	return t == Q8_T_Q8_0 || t == Q8_T_NVFP4 || t == Q8_T_Q4_1 || t == Q8_T_Q5_1;
}

template <int T>
static int
mv8_launch(struct gpu *g, const void *w, int64_t rows, int nb, size_t rb, const int8_t *q,
    const float *dx, const float *sx, int m, float *y, const float *scale)
{
	unsigned grid = (unsigned)((rows + 7) / 8);
	const uint8_t *W = (const uint8_t *)w;

	if (m <= 1)
		k_mv8<T, 1><<<grid, 256, 0, g->stream>>>(W, rows, nb, rb, q, dx, sx, m, y, scale);
	else if (m <= 2)
		k_mv8<T, 2><<<grid, 256, 0, g->stream>>>(W, rows, nb, rb, q, dx, sx, m, y, scale);
	else if (m <= 4)
		k_mv8<T, 4><<<grid, 256, 0, g->stream>>>(W, rows, nb, rb, q, dx, sx, m, y, scale);
	else if (m <= 8)
		k_mv8<T, 8><<<grid, 256, 0, g->stream>>>(W, rows, nb, rb, q, dx, sx, m, y, scale);
	else
		k_mv8<T, 16><<<grid, 256, 0, g->stream>>>(W, rows, nb, rb, q, dx, sx, m, y, scale);
	GPU_LAUNCHED(g, "matvec_q8");
	return 0;
}

/* Row bytes of a Q8-path weight of ne0 columns. */
static size_t
mv8_rowbytes(int t, int64_t ne0)
{
	if (t == Q8_T_NVFP4)
		return (size_t)(ne0 / 64) * 36;
	return (size_t)(ne0 / 32) * (t == Q8_T_Q8_0 ? 34 : t == Q8_T_Q5_1 ? 24 : 20);
}

extern "C" int
gpu_matvec_q8_multi(struct gpu *g, int nw, const int *t, const void *const *d_w,
    const int64_t *rows, int64_t ne0, const float *d_x, int64_t n, float *const *d_y,
    const float *const *d_scale)
{
	int nb = (int)(ne0 / 32), q81 = 0;
	size_t qn = (size_t)n * ne0, need;
	int8_t *q;
	float *dx, *sx;

	for (int i = 0; i < nw; i++) {
		if (!gpu_can_matvec_q8(t[i]))
			return gpu_fail(g, "matvec_q8: type %d (Q8_0, NVFP4, Q4_1, Q5_1)", t[i]);
		if (n < 1 || rows[i] < 1 || ne0 % (t[i] == Q8_T_NVFP4 ? 64 : 32) != 0)
			return gpu_fail(g, "matvec_q8: %lld rows of %lld, %lld inputs",
			    (long long)rows[i], (long long)ne0, (long long)n);
		q81 |= t[i] == Q8_T_Q4_1 || t[i] == Q8_T_Q5_1;
	}
	need = qn + 2 * (size_t)n * nb * sizeof(float) + 512;
	if ((q = (int8_t *)gpu_scratch(g, need)) == NULL)
		return -1;
	dx = (float *)(q + (qn + 255) / 256 * 256);
	sx = dx + ((size_t)n * nb + 63) / 64 * 64;
	int64_t total = n * nb;
	k_q8x<<<(unsigned)((total * 32 + 255) / 256), 256, 0, g->stream>>>(d_x, nb, total, q, dx,
	    q81 ? sx : NULL);
	GPU_LAUNCHED(g, "matvec_q8 quantize");
	for (int i = 0; i < nw; i++) {
		size_t rb = mv8_rowbytes(t[i], ne0);
		for (int64_t r0 = 0; r0 < n; r0 += GPU_MATVEC_MAX_ROWS) {
			int m = n - r0 < GPU_MATVEC_MAX_ROWS ? (int)(n - r0) : GPU_MATVEC_MAX_ROWS;
			const int8_t *qr = q + (size_t)r0 * ne0;
			const float *dr = dx + (size_t)r0 * nb, *sr = sx + (size_t)r0 * nb;
			float *yr = d_y[i] + (size_t)r0 * rows[i];
			const float *sc = d_scale != NULL ? d_scale[i] : NULL;
			int rc;
			switch (t[i]) {
			case Q8_T_NVFP4: rc = mv8_launch<Q8_T_NVFP4>(g, d_w[i], rows[i], nb, rb, qr, dr, sr, m, yr, sc); break;
			case Q8_T_Q4_1: rc = mv8_launch<Q8_T_Q4_1>(g, d_w[i], rows[i], nb, rb, qr, dr, sr, m, yr, sc); break;
			case Q8_T_Q5_1: rc = mv8_launch<Q8_T_Q5_1>(g, d_w[i], rows[i], nb, rb, qr, dr, sr, m, yr, sc); break;
			default: rc = mv8_launch<Q8_T_Q8_0>(g, d_w[i], rows[i], nb, rb, qr, dr, sr, m, yr, sc); break;
			}
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

extern "C" int
gpu_matvec_q8(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
    const float *d_x, int64_t n, float *d_y, const float *d_scale)
{
	return gpu_matvec_q8_multi(g, 1, &t, &d_w, &rows, ne0, d_x, n, &d_y, &d_scale);
}
