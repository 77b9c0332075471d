/*
 * matvec_q8: the decode product on int8 activations (llama.cpp's MMVQ
 * idea): x is quantized once per call to Q8_0 blocks exactly as lib/quant's
 * quant_quantize_act does (d = amax/127 kept as fp16, q = x * (127/amax)
 * rounded half to even, as ggml's x86 quantize_row_q8_0/q8_1),
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

/* ggml's ue4m3 scale times 0.5 (lib/quant's qi_ue4m3_half): exact.  A
 * normal value (1 + man/8) 2^(e-7) / 2 is built as float bits (exponent
 * e - 8, mantissa man << 20): ldexpf cost more than the block's dp4a. */
__device__ __forceinline__ float
ue4m3_half(unsigned x)
{
	unsigned e = (x >> 3) & 0xF, man = x & 7;

	if (x == 0 || x == 0x7F)
		return 0.0f;
	if (e == 0)
		return (float)man * 0x1p-10f;
	return __uint_as_float((e + 119) << 23 | man << 20);
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
	float id = a != 0.0f ? __fdiv_rn(127.0f, a) : 0.0f;
	int qi = (int)(int8_t)rintf(__fmul_rn(v, id)), sum = qi;
	q[w * 32 + lane] = (int8_t)qi;
	for (int o = 16; o > 0; o >>= 1)
		sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
	if (lane == 0) {
		dx[w] = __half2float(__float2half_rn(d));
		if (sx != NULL)
			sx[w] = __half2float(__float2half_rn(__fmul_rn((float)sum, d)));
	}
}

/* Bytes of one weight block of type T (NVFP4: 64 values, else 32). */
template <int T>
struct mv8_bs {
	enum { v = T == Q8_T_Q8_0 ? 34 : T == Q8_T_Q5_1 ? 24 : T == Q8_T_Q4_1 ? 20 : 36 };
};

/* acc[j] += weight block b (bytes at blk) . block(s) b of input row j. */
template <int T, int M>
__device__ __forceinline__ void
mv8_block(const uint8_t *blk8, int b, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, const float *__restrict__ sx, int m, float *acc)
{
	if (T == Q8_T_Q8_0) {
		const uint16_t *blk = (const uint16_t *)blk8;
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
	} else if (T == Q8_T_Q4_1 || T == Q8_T_Q5_1) {
		/* d, m (fp16), [qh (4 bytes) for Q5_1], qs[16]: values 0..15 or 0..31 */
		const uint32_t *blk = (const uint32_t *)blk8;
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
	} else {
		const uint32_t *blk = (const uint32_t *)blk8;
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

/* One warp per weight row; lane l takes weight blocks l, l+32, ... read in
 * place (any row length and alignment). */
template <int T, int M>
__global__ void __launch_bounds__(256)
k_mv8(const uint8_t *__restrict__ W, int64_t rows, int nb, size_t rowbytes,
    const int8_t *__restrict__ q, const float *__restrict__ dx, const float *__restrict__ sx,
    int m, float *y, const float *scale)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31, nbw = T == Q8_T_NVFP4 ? nb / 2 : nb;
	float acc[M];

	if (r >= rows)
		return;
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	const uint8_t *wr = W + r * rowbytes;
	for (int b = lane; b < nbw; b += 32)
		mv8_block<T, M>(wr + (size_t)b * mv8_bs<T>::v, b, nb, q, dx, sx, m, acc);
	mv8_store<M>(acc, m, rows, r, lane, y, scale);
}

/*
 * The same sums in the same order for rows of a multiple of 32 weight
 * blocks, 16-byte aligned: the warp copies MV8_CH blocks of its row at a
 * time into shared memory with 16-byte coalesced loads (a lane's block
 * read in place took 9..17 narrow loads, each touching nine lines), then
 * lane l takes blocks l and l + 32 of the chunk as k_mv8 does.  Where it
 * pays is measured (mv8_launch).
 */
#define MV8_CH 64

template <int T, int M>
__global__ void __launch_bounds__(256)
k_mv8s(const uint8_t *__restrict__ W, int64_t rows, int nb, size_t rowbytes,
    const int8_t *__restrict__ q, const float *__restrict__ dx, const float *__restrict__ sx,
    int m, float *y, const float *scale)
{
	enum { BS = mv8_bs<T>::v, N16 = MV8_CH * BS / 16, U = (N16 + 31) / 32 };
	__shared__ int4 sm[8][N16];
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31, nbw = T == Q8_T_NVFP4 ? nb / 2 : nb;
	int4 *buf = sm[threadIdx.x >> 5];
	float acc[M];

	if (r >= rows)
		return;
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	const int4 *wr = (const int4 *)(W + r * rowbytes);
	for (int c0 = 0; c0 < nbw; c0 += MV8_CH) {
		int nc = min(MV8_CH, nbw - c0), n16 = nc * BS / 16;
		const int4 *src = wr + (size_t)c0 * BS / 16;
		int4 t[U];
#pragma unroll
		for (int u = 0; u < U; u++)
			if (lane + 32 * u < n16)
				t[u] = __ldg(src + lane + 32 * u);
		__syncwarp();
#pragma unroll
		for (int u = 0; u < U; u++)
			if (lane + 32 * u < n16)
				buf[lane + 32 * u] = t[u];
		__syncwarp();
		for (int h = 0; h < nc; h += 32)
			mv8_block<T, M>((const uint8_t *)buf + (h + lane) * BS, c0 + h + lane, nb,
			    q, dx, sx, m, acc);
	}
	mv8_store<M>(acc, m, rows, r, lane, y, scale);
}

/*
 * The split layout (GPU_SPLIT, gpu_split): row r at r * rs bytes holds the
 * row's quants, qrow bytes, then its scales (Q8_0: the fp16 d of each
 * block; NVFP4: the 4 UE4M3 bytes of each block, one a 16-value
 * sub-block), ne0 / 16 bytes either way, then zeros to a multiple of 16:
 * rs = qrow + ne0 / 16 rounded up to 16, the original row's size when
 * ne0 is a multiple of 256.  The quants of a row are contiguous and
 * 16-byte aligned, so a warp reads them as consecutive 16-byte pieces.
 * Q8_0: the 32 int8 of each block in order.  NVFP4: the 8 nibble bytes of
 * each sub-block (byte i: value i low, value 8 + i high, as in the
 * block), in groups of 32 pieces (1024 values; the last group n <= 32):
 * piece l of a group of n holds its sub-blocks l and n + l, so that the
 * lanes' 16-byte loads of the int8 x for the two are contiguous too.
 */
static size_t
split_qrow(int t, int64_t ne0)
{
	return (size_t)(t == Q8_T_NVFP4 ? ne0 / 2 : ne0);
}

static size_t
split_rs(int t, int64_t ne0)
{
	return split_qrow(t, ne0) + ((size_t)ne0 / 16 + 15) / 16 * 16;
}

extern "C" size_t
gpu_split_size(int t, int64_t rows, int64_t ne0)
{
	if ((t != Q8_T_Q8_0 && t != Q8_T_NVFP4) || rows < 1 || ne0 < 1 ||
	    ne0 % (t == Q8_T_NVFP4 ? 64 : 32) != 0)
		return 0;
	return split_rs(t, ne0) * (size_t)rows;
}

/* NVFP4 sub-block sb of a row of np pieces: its piece and half (mvs_piece). */
__device__ __forceinline__ int
nv_piece(int sb, int np, int *half)
{
	int g = sb / 64, i = sb % 64, n = min(32, np - 32 * g);

	*half = i >= n;
	return 32 * g + (i >= n ? i - n : i);
}

/* NVFP4: one thread per sub-block i of row i / nsb: its 8 bytes and scale moved. */
__global__ void
k_split_nv(const uint8_t *__restrict__ src, int64_t nsub, int nsb, size_t qrow, size_t rs,
    uint8_t *__restrict__ dst)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= nsub)
		return;
	int64_t r = i / nsb;
	int sb = (int)(i % nsb), half;
	int piece = nv_piece(sb, (int)(qrow / 16), &half);
	const uint32_t *b = (const uint32_t *)(src + (i / 4) * 36);	/* 4-byte aligned */
	uint8_t *row = dst + r * rs;
	*(uint2 *)(row + (size_t)piece * 16 + half * 8) = make_uint2(b[1 + 2 * (sb % 4)],
	    b[2 + 2 * (sb % 4)]);
	row[qrow + sb] = (uint8_t)(b[0] >> (8 * (sb % 4)));
}

/* Q8_0: one thread per weight block i of row i / nbw: its quants and scale moved. */
__global__ void
k_split_q8(const uint8_t *__restrict__ src, int64_t nblk, int nbw, size_t qrow, size_t rs,
    uint8_t *__restrict__ dst)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= nblk)
		return;
	int64_t r = i / nbw;
	int k = (int)(i % nbw);
	uint8_t *row = dst + r * rs;
	const uint16_t *b = (const uint16_t *)(src + i * 34);	/* 2-byte aligned: d, 32 int8 */
	uint32_t v[8];
#pragma unroll
	for (int j = 0; j < 8; j++)
		v[j] = (uint32_t)b[1 + 2 * j] | (uint32_t)b[2 + 2 * j] << 16;
	((uint16_t *)(row + qrow))[k] = b[0];
	int4 *q = (int4 *)(row + (size_t)k * 32);
	q[0] = make_int4((int)v[0], (int)v[1], (int)v[2], (int)v[3]);
	q[1] = make_int4((int)v[4], (int)v[5], (int)v[6], (int)v[7]);
}

extern "C" int
gpu_split(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, void *d_dst)
{
	size_t n = gpu_split_size(t, rows, ne0);

	if (n == 0)
		return gpu_fail(g, "split: type %d, %lld rows of %lld (Q8_0, NVFP4)", t,
		    (long long)rows, (long long)ne0);
	if (((uintptr_t)d_dst & 15) != 0 || ((uintptr_t)d_w & (t == Q8_T_NVFP4 ? 3 : 1)) != 0)
		return gpu_fail(g, "split: unaligned matrix");
	int nbw = (int)(ne0 / (t == Q8_T_NVFP4 ? 64 : 32));
	int64_t nblk = rows * nbw;
	size_t qrow = split_qrow(t, ne0), rs = split_rs(t, ne0);
	unsigned grid = (unsigned)((nblk + 255) / 256);
	GPU_CHECK(g, cudaMemsetAsync(d_dst, 0, n, g->stream));	/* the padding */
	if (t == Q8_T_Q8_0)
		k_split_q8<<<grid, 256, 0, g->stream>>>((const uint8_t *)d_w, nblk, nbw, qrow, rs,
		    (uint8_t *)d_dst);
	else
		k_split_nv<<<(unsigned)((4 * nblk + 255) / 256), 256, 0, g->stream>>>(
		    (const uint8_t *)d_w, 4 * nblk, 4 * nbw, qrow, rs, (uint8_t *)d_dst);
	GPU_LAUNCHED(g, "split");
	return 0;
}

__constant__ float c_kf8[16] = {	/* kvalues_mxfp4 as floats (cuda/matvec.cu's c_kf) */
	0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12
};

/* out[blockIdx.y][e] = element e of split row ids[blockIdx.y], dequantized
 * with the operations of cuda/matvec.cu's k_dequant (the same bits). */
template <int T>
__global__ void
k_split_rows(const uint8_t *__restrict__ W, int64_t ne0, size_t qrow, size_t rs,
    const int32_t *__restrict__ ids, float *out)
{
	int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (e >= ne0)
		return;
	const uint8_t *row = W + (size_t)ids[blockIdx.y] * rs;
	float v;
	if (T == Q8_T_Q8_0) {
		float d = __half2float(__ushort_as_half(((const uint16_t *)(row + qrow))[e / 32]));
		v = __fmul_rn((float)(int8_t)row[e], d);
	} else {
		int sb = (int)(e / 16), j = (int)(e % 16), half;
		int piece = nv_piece(sb, (int)(qrow / 16), &half);
		unsigned x = row[(size_t)piece * 16 + half * 8 + (j & 7)];
		float d = ue4m3_half(row[qrow + sb]);
		v = __fmul_rn(c_kf8[j < 8 ? x & 0xF : x >> 4], d);
	}
	out[(size_t)blockIdx.y * ne0 + e] = v;
}

int
gpu_split_get_rows(struct gpu *g, int t, const void *d_table, int64_t ne0,
    const int32_t *d_ids, int n, float *d_out)
{
	if (gpu_split_size(t, 1, ne0) == 0 || n < 1 || n > 65535)
		return gpu_fail(g, "get_rows: split type %d, %d rows of %lld", t, n,
		    (long long)ne0);
	dim3 grid((unsigned)((ne0 + 255) / 256), (unsigned)n);
	const uint8_t *W = (const uint8_t *)d_table;
	size_t qrow = split_qrow(t, ne0), rs = split_rs(t, ne0);
	if (t == Q8_T_Q8_0)
		k_split_rows<Q8_T_Q8_0><<<grid, 256, 0, g->stream>>>(W, ne0, qrow, rs, d_ids, d_out);
	else
		k_split_rows<Q8_T_NVFP4><<<grid, 256, 0, g->stream>>>(W, ne0, qrow, rs, d_ids, d_out);
	GPU_LAUNCHED(g, "get_rows split");
	return 0;
}

/*
 * The decode product over split rows.  One warp per weight row; the row's
 * quants are np 16-byte pieces (Q8_0: half a block; NVFP4: two 16-value
 * sub-blocks, sa and sb) and lane l takes pieces l, l + 32, ..., U of
 * them loaded (with their scales) before the first is used: each load
 * instruction of the warp reads 512 contiguous bytes of weights, and of x
 * (int8, 16 bytes a lane: one per piece for Q8_0, two for NVFP4).  Q8_0:
 * the two halves of a block sit in lanes 2i, 2i + 1, their integer sums
 * are added by one shuffle and the even lane adds (float)s * (dw * dx) as
 * k_mv8 does; NVFP4: a lane adds each of its two sub-blocks' terms as
 * k_mv8 does.  Only the order of the float sums differs from k_mv8's, and
 * it is the same for every m (batch-invariant).
 */
template <int T, int M>
__device__ __forceinline__ void
mvs_piece(int4 w, uint32_t sc, int p, int sa, int sb, bool ok, bool even, int nb, int64_t ne0,
    const int8_t *__restrict__ q, const float *__restrict__ dx, int m, float *acc)
{
	if (T == Q8_T_Q8_0) {
		float dw = __half2float(__ushort_as_half((unsigned short)sc));
		int b = p >> 1;
#pragma unroll
		for (int j = 0; j < M; j++) {
			if (j >= m)
				break;
			int s = 0;
			if (ok) {
				int4 a = *(const int4 *)(q + (size_t)j * ne0 + (size_t)p * 16);
				s = __dp4a(w.x, a.x, 0);
				s = __dp4a(w.y, a.y, s), s = __dp4a(w.z, a.z, s);
				s = __dp4a(w.w, a.w, s);
			}
			s += __shfl_xor_sync(0xFFFFFFFFu, s, 1);
			if (ok && even)
				acc[j] = __fadd_rn(acc[j], __fmul_rn((float)s,
				    __fmul_rn(dw, dx[(size_t)j * nb + b])));
		}
	} else {
		if (!ok)
			return;
		float ws0 = ue4m3_half(sc & 0xFF), ws1 = ue4m3_half(sc >> 8 & 0xFF);
		int w0 = fp4x4((uint32_t)w.x), w1 = fp4x4((uint32_t)w.y);
		int w2 = fp4x4((uint32_t)w.x >> 4), w3 = fp4x4((uint32_t)w.y >> 4);
		int w4 = fp4x4((uint32_t)w.z), w5 = fp4x4((uint32_t)w.w);
		int w6 = fp4x4((uint32_t)w.z >> 4), w7 = fp4x4((uint32_t)w.w >> 4);
#pragma unroll
		for (int j = 0; j < M; j++) {
			if (j >= m)
				break;
			const int8_t *xj = q + (size_t)j * ne0;
			int4 a = *(const int4 *)(xj + (size_t)sa * 16), c = *(const int4 *)(xj + (size_t)sb * 16);
			float da = dx[(size_t)j * nb + sa / 2], db = dx[(size_t)j * nb + sb / 2];
			int t0 = __dp4a(w0, a.x, 0);
			t0 = __dp4a(w1, a.y, t0), t0 = __dp4a(w2, a.z, t0), t0 = __dp4a(w3, a.w, t0);
			int t1 = __dp4a(w4, c.x, 0);
			t1 = __dp4a(w5, c.y, t1), t1 = __dp4a(w6, c.z, t1), t1 = __dp4a(w7, c.w, t1);
			acc[j] = __fadd_rn(acc[j], __fmul_rn((float)t0, __fmul_rn(ws0, da)));
			acc[j] = __fadd_rn(acc[j], __fmul_rn((float)t1, __fmul_rn(ws1, db)));
		}
	}
}

template <int T, int M, int U>
__global__ void __launch_bounds__(256)
k_mvs(const uint8_t *__restrict__ W, int64_t rows, int nb, size_t qrow, size_t rs,
    const int8_t *__restrict__ q, const float *__restrict__ dx, int m, float *y,
    const float *scale)
{
	int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31, np = (int)(qrow / 16);
	int64_t ne0 = (int64_t)nb * 32;
	float acc[M];

	if (r >= rows)
		return;
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	const int4 *wq = (const int4 *)(W + (size_t)r * rs);
	const uint8_t *ws = W + (size_t)r * rs + qrow;
	for (int p0 = 0; p0 < np; p0 += 32 * U) {
		int4 w[U];
		uint32_t sc[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			int base = p0 + 32 * u, p = base + lane, n = min(32, np - base);
			if (p < np) {
				w[u] = __ldg(wq + p);
				if (T == Q8_T_Q8_0)
					sc[u] = __ldg((const unsigned short *)ws + (p >> 1));
				else	/* the scale bytes of sub-blocks sa, sb (mvs_piece) */
					sc[u] = (uint32_t)__ldg(ws + 2 * base + lane) |
					    (uint32_t)__ldg(ws + 2 * base + n + lane) << 8;
			} else {
				w[u] = make_int4(0, 0, 0, 0);
				sc[u] = 0;
			}
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			if (p0 + 32 * u >= np)	/* the whole warp is past the row */
				break;
			int base = p0 + 32 * u, p = base + lane, n = min(32, np - base);
			mvs_piece<T, M>(w[u], sc[u], p, 2 * base + lane, 2 * base + n + lane, p < np,
			    (lane & 1) == 0, nb, ne0, q, dx, m, acc);
		}
	}
	mv8_store<M>(acc, m, rows, r, lane, y, scale);
}

template <int T, int U>
static void
mvs_launch_u(struct gpu *g, const uint8_t *W, int64_t rows, int nb, size_t qrow, size_t rs,
    const int8_t *q, const float *dx, int m, float *y, const float *scale)
{
	unsigned grid = (unsigned)((rows + 7) / 8);

	if (m <= 1)
		k_mvs<T, 1, U><<<grid, 256, 0, g->stream>>>(W, rows, nb, qrow, rs, q, dx, m, y, scale);
	else if (m <= 2)
		k_mvs<T, 2, U><<<grid, 256, 0, g->stream>>>(W, rows, nb, qrow, rs, q, dx, m, y, scale);
	else if (m <= 4)
		k_mvs<T, 4, U><<<grid, 256, 0, g->stream>>>(W, rows, nb, qrow, rs, q, dx, m, y, scale);
	else if (m <= 8)
		k_mvs<T, 8, U><<<grid, 256, 0, g->stream>>>(W, rows, nb, qrow, rs, q, dx, m, y, scale);
	else
		k_mvs<T, 16, U><<<grid, 256, 0, g->stream>>>(W, rows, nb, qrow, rs, q, dx, m, y, scale);
}

template <int T>
static int
mvs_launch(struct gpu *g, const void *w, int64_t rows, int nb, const int8_t *q,
    const float *dx, int m, float *y, const float *scale)
{
	const uint8_t *W = (const uint8_t *)w;
	int64_t ne0 = (int64_t)nb * 32;
	size_t qrow = split_qrow(T, ne0), rs = split_rs(T, ne0);

	if (((uintptr_t)W & 15) != 0)
		return gpu_fail(g, "matvec_q8: split matrix not 16-byte aligned");
	if (g->mvs_unroll == 4)
		mvs_launch_u<T, 4>(g, W, rows, nb, qrow, rs, q, dx, m, y, scale);
	else
		mvs_launch_u<T, 8>(g, W, rows, nb, qrow, rs, q, dx, m, y, scale);
	GPU_LAUNCHED(g, "matvec_q8 split");
	return 0;
}

extern "C" int
gpu_tune_split(struct gpu *g, int unroll)
{
	if (unroll != 4 && unroll != 8)
		return gpu_fail(g, "tune: split unroll %d (4 or 8)", unroll);
	if (unroll != (g->mvs_unroll == 4 ? 4 : 8))
		g->gen++;	/* other kernels: recorded graphs are stale */
	g->mvs_unroll = unroll;
	return 0;
}

extern "C" int
gpu_can_matvec_q8(int t)
{
	if (t & GPU_SPLIT)
		return (t & ~GPU_SPLIT) == Q8_T_Q8_0 || (t & ~GPU_SPLIT) == Q8_T_NVFP4;
	return t == Q8_T_Q8_0 || t == Q8_T_NVFP4 || t == Q8_T_Q4_1 || t == Q8_T_Q5_1;
}

template <int T>
static int
mv8_launch(struct gpu *g, const void *w, int64_t rows, int nb, size_t rb, const int8_t *q,
    const float *dx, const float *sx, int m, float *y, const float *scale)
{
	unsigned grid = (unsigned)((rows + 7) / 8);
	const uint8_t *W = (const uint8_t *)w;
	int nbw = T == Q8_T_NVFP4 ? nb / 2 : nb;

	/* Staged rows, where measured faster on the H200 (9B-shape random
	 * GGUFs): Q8_0 with m = 2..8 (K=3 verify 8.17 vs 8.32 ms).  In place:
	 * m = 1 (Q8_0 decode 180 vs 173 tok/s), m = 9..16 (staged, Q8_0
	 * prefill fell from 1015 to 650 tok/s and the K=8 verify from 13.0 to
	 * 16.3 ms) and NVFP4 at every m.  Both kernels give the same bits. */
	if (T == Q8_T_Q8_0 && m > 1 && m <= 8 && nbw % 32 == 0 && ((uintptr_t)W & 15) == 0 &&
	    rb % 16 == 0) {
		if (m <= 2)
			k_mv8s<T, 2><<<grid, 256, 0, g->stream>>>(W, rows, nb, rb, q, dx, sx, m, y, scale);
		else if (m <= 4)
			k_mv8s<T, 4><<<grid, 256, 0, g->stream>>>(W, rows, nb, rb, q, dx, sx, m, y, scale);
		else
			k_mv8s<T, 8><<<grid, 256, 0, g->stream>>>(W, rows, nb, rb, q, dx, sx, m, y, scale);
		GPU_LAUNCHED(g, "matvec_q8");
		return 0;
	}
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

/* The scratch for n rows of ne0 quantized: q, dx, sx (NULL sx: not needed). */
static int
mv8_scratch(struct gpu *g, int64_t n, int64_t ne0, int8_t **q, float **dx, float **sx)
{
	size_t qn = (size_t)n * ne0, nb = (size_t)(ne0 / 32);
	size_t need = qn + 2 * (size_t)n * nb * sizeof(float) + 512;

	if ((*q = (int8_t *)gpu_scratch(g, need)) == NULL)
		return -1;
	*dx = (float *)(*q + (qn + 255) / 256 * 256);
	*sx = *dx + ((size_t)n * nb + 63) / 64 * 64;
	return 0;
}

/* Check the nw weights; *q81: one of them takes Q8_1 activations. */
static int
mv8_types(struct gpu *g, int nw, const int *t, const int64_t *rows, int64_t ne0,
    int64_t n, int *q81)
{
	*q81 = 0;
	for (int i = 0; i < nw; i++) {
		if (!gpu_can_matvec_q8(t[i]))
			return gpu_fail(g, "matvec_q8: type %d (Q8_0, NVFP4, Q4_1, Q5_1)", t[i]);
		if (n < 1 || rows[i] < 1 || ne0 % ((t[i] & ~GPU_SPLIT) == Q8_T_NVFP4 ? 64 : 32) != 0)
			return gpu_fail(g, "matvec_q8: %lld rows of %lld, %lld inputs",
			    (long long)rows[i], (long long)ne0, (long long)n);
		*q81 |= t[i] == Q8_T_Q4_1 || t[i] == Q8_T_Q5_1;
	}
	return 0;
}

/* The nw products of the quantized x (q, dx, sx). */
static int
mv8_products(struct gpu *g, int nw, const int *t, const void *const *d_w,
    const int64_t *rows, int64_t ne0, const int8_t *q, const float *dx, const float *sx,
    int64_t n, float *const *d_y, const float *const *d_scale)
{
	int nb = (int)(ne0 / 32);

	for (int i = 0; i < nw; i++) {
		size_t rb = mv8_rowbytes(t[i] & ~GPU_SPLIT, ne0);
		for (int64_t r0 = 0; r0 < n; r0 += GPU_MATVEC_MAX_ROWS) {
			int m = n - r0 < GPU_MATVEC_MAX_ROWS ? (int)(n - r0) : GPU_MATVEC_MAX_ROWS;
			const int8_t *qr = q + (size_t)r0 * ne0;
			const float *dr = dx + (size_t)r0 * nb, *sr = sx + (size_t)r0 * nb;
			float *yr = d_y[i] + (size_t)r0 * rows[i];
			const float *sc = d_scale != NULL ? d_scale[i] : NULL;
			int rc;
			switch (t[i]) {
			case Q8_T_NVFP4 | GPU_SPLIT: rc = mvs_launch<Q8_T_NVFP4>(g, d_w[i], rows[i], nb, qr, dr, m, yr, sc); break;
			case Q8_T_Q8_0 | GPU_SPLIT: rc = mvs_launch<Q8_T_Q8_0>(g, d_w[i], rows[i], nb, qr, dr, m, yr, sc); break;
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
gpu_matvec_q8_multi(struct gpu *g, int nw, const int *t, const void *const *d_w,
    const int64_t *rows, int64_t ne0, const float *d_x, int64_t n, float *const *d_y,
    const float *const *d_scale)
{
	int nb = (int)(ne0 / 32), q81;
	int8_t *q;
	float *dx, *sx;

	if (mv8_types(g, nw, t, rows, ne0, n, &q81) || mv8_scratch(g, n, ne0, &q, &dx, &sx))
		return -1;
	int64_t total = n * nb;
	k_q8x<<<(unsigned)((total * 32 + 255) / 256), 256, 0, g->stream>>>(d_x, nb, total, q, dx,
	    q81 ? sx : NULL);
	GPU_LAUNCHED(g, "matvec_q8 quantize");
	return mv8_products(g, nw, t, d_w, rows, ne0, q, dx, sx, n, d_y, d_scale);
}

#define RQ_VEC 4	/* float4s a thread holds in k_rmsnorm_q8x */

/*
 * RMSNorm of row blockIdx.x (weight w) and its quantization in one pass:
 * y = x * (1 / sqrt(mean(x^2) + eps)) * w exactly as cuda/ops.cu's
 * k_rmsnorm4 computes it (same sum order), then each 32-block quantized
 * as k_q8x does (8 lanes, 4 values each).  Bit-identical to the two.
 */
__global__ void __launch_bounds__(1024)
k_rmsnorm_q8x(const float *x, const float *w, int d, float eps, int8_t *q, float *dx,
    float *sx)
{
	__shared__ double red[33];
	const float4 *xr = (const float4 *)(x + (size_t)blockIdx.x * d);
	int d4 = d / 4, nb = d / 32, lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
	float4 v[RQ_VEC];
	double s = 0.0;

#pragma unroll
	for (int u = 0; u < RQ_VEC; u++) {
		int i = threadIdx.x + u * blockDim.x;
		v[u] = i < d4 ? xr[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	}
#pragma unroll
	for (int u = 0; u < RQ_VEC; u++) {
		s += (double)__fmul_rn(v[u].x, v[u].x);
		s += (double)__fmul_rn(v[u].y, v[u].y);
		s += (double)__fmul_rn(v[u].z, v[u].z);
		s += (double)__fmul_rn(v[u].w, v[u].w);
	}
	/* block sum as ops.cu's block_sum: butterfly, then warp 0 over the warps */
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
	__syncthreads();
	if (lane == 0)
		red[wp] = s;
	__syncthreads();
	if (wp == 0) {
		s = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.0;
		for (int o = 16; o > 0; o >>= 1)
			s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
		if (lane == 0)
			red[32] = s;
	}
	__syncthreads();
	float sc = rms_scale(red[32], d, eps);
#pragma unroll
	for (int u = 0; u < RQ_VEC; u++) {
		int i = threadIdx.x + u * blockDim.x;
		if (i - lane >= d4)	/* the whole warp is out (lanes past d4 add zeros) */
			break;
		float4 c = i < d4 ? ((const float4 *)w)[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		float4 o = make_float4(__fmul_rn(__fmul_rn(v[u].x, sc), c.x),
		    __fmul_rn(__fmul_rn(v[u].y, sc), c.y), __fmul_rn(__fmul_rn(v[u].z, sc), c.z),
		    __fmul_rn(__fmul_rn(v[u].w, sc), c.w));
		float a = fmaxf(fmaxf(fabsf(o.x), fabsf(o.y)), fmaxf(fabsf(o.z), fabsf(o.w)));
		for (int m = 1; m < 8; m <<= 1)
			a = fmaxf(a, __shfl_xor_sync(0xFFFFFFFFu, a, m));
		float dd = __fdiv_rn(a, 127.0f);
		float id = a != 0.0f ? __fdiv_rn(127.0f, a) : 0.0f;
		int q0 = (int)(int8_t)rintf(__fmul_rn(o.x, id));
		int q1 = (int)(int8_t)rintf(__fmul_rn(o.y, id));
		int q2 = (int)(int8_t)rintf(__fmul_rn(o.z, id));
		int q3 = (int)(int8_t)rintf(__fmul_rn(o.w, id));
		int sum = q0 + q1 + q2 + q3;
		for (int m = 1; m < 8; m <<= 1)
			sum += __shfl_xor_sync(0xFFFFFFFFu, sum, m);
		if (i < d4) {
			char4 c4 = make_char4((signed char)q0, (signed char)q1, (signed char)q2,
			    (signed char)q3);
			((char4 *)(q + (size_t)blockIdx.x * d))[i] = c4;
			if ((threadIdx.x & 7) == 0) {
				size_t bi = (size_t)blockIdx.x * nb + i / 8;
				dx[bi] = __half2float(__float2half_rn(dd));
				if (sx != NULL)
					sx[bi] = __half2float(__float2half_rn(__fmul_rn((float)sum, dd)));
			}
		}
	}
}

extern "C" int
gpu_rmsnorm_matvec_q8_multi(struct gpu *g, const float *d_x, const float *d_nw, float eps,
    int nw, const int *t, const void *const *d_w, const int64_t *rows, int64_t ne0,
    int64_t n, float *const *d_y, const float *const *d_scale)
{
	int d4 = (int)(ne0 / 4), nt = ((d4 + RQ_VEC - 1) / RQ_VEC + 31) / 32 * 32, q81;
	int8_t *q;
	float *dx, *sx;

	if (mv8_types(g, nw, t, rows, ne0, n, &q81))
		return -1;
	if (d_nw == NULL || nt > 1024 || ((uintptr_t)d_x & 15) || ((uintptr_t)d_nw & 15) ||
	    n > INT32_MAX)
		return gpu_fail(g, "rmsnorm_matvec_q8: rows of %lld (at most %d), or unaligned",
		    (long long)ne0, 1024 * 4 * RQ_VEC);
	if (mv8_scratch(g, n, ne0, &q, &dx, &sx))
		return -1;
	k_rmsnorm_q8x<<<(unsigned)n, nt, 0, g->stream>>>(d_x, d_nw, (int)ne0, eps, q, dx,
	    q81 ? sx : NULL);
	GPU_LAUNCHED(g, "rmsnorm_matvec_q8 quantize");
	return mv8_products(g, nw, t, d_w, rows, ne0, q, dx, sx, n, d_y, d_scale);
}

extern "C" int
gpu_matvec_q8(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
    const float *d_x, int64_t n, float *d_y, const float *d_scale)
{
	return gpu_matvec_q8_multi(g, 1, &t, &d_w, &rows, ne0, d_x, n, &d_y, &d_scale);
}
