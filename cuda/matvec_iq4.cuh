/*
 * The IQ4_XS / IQ4_NL block sizes and k_iq4's device code for one IQ4_XS
 * row (xs_row and what it calls; cuda/matvec_iq4.cu).  Device functions
 * only: matvec_iq4.cu includes it after gpu_impl.cuh, and
 * tools/matvec-qkt-kern.cc runs it on the CPU (t/emu.bats), so no kernel
 * belongs here.
 */
#ifndef MEMRA_MATVEC_IQ4_CUH
#define MEMRA_MATVEC_IQ4_CUH

enum { XS_BS = 136, NL_BS = 18 };

/* 1.5 * 2^23 as float bits: a dp4a chain started from them holds the float
 * 12582912 + t exactly (|t| < 2^22), and one subtraction gives (float)t. */
#define IQ_MAGIC 0x4B400000

__device__ __forceinline__ float
iq_i2f(int c)
{
	return __fsub_rn(__int_as_float(c), 12582912.0f);
}

/* --- IQ4_XS ------------------------------------------------------------ */

/* The words of one super-block a lane needs: the header (d | scales_h <<
 * 16, scales_l) and its sub-block's 16 quant bytes. */
struct xs_w {
	uint2	h, a, b;
};

__device__ __forceinline__ void
xs_load(const uint8_t *blk, int i, struct xs_w *w)
{
	w->h = __ldg((const uint2 *)blk);
	w->a = __ldg((const uint2 *)(blk + 8 + 16 * i));
	w->b = __ldg((const uint2 *)(blk + 16 + 16 * i));
}

/*
 * acc[j] += lane i's part of super-block b (words w) against input row j
 * < m: (d * dy_j) * (float)((ls - 32) * t_j), t_j the dot of sub-block i
 * with the same 32 values of row j.
 */
template <int M>
__device__ __forceinline__ void
xs_block(const struct xs_w *w, int64_t b, int i, int64_t ne0, const int8_t *__restrict__ q,
    const float *__restrict__ dk, int m, float *acc)
{
	uint32_t hd = w->h.x, hl = w->h.y;
	/* scales_l byte i / 2, nibble i % 2 (bits 4 i of the word), and 2 bits of scales_h */
	int ls = (int)(hl >> (4 * i) & 0xFu) | (int)(hd >> (16 + 2 * i) & 3u) << 4;
	float d = __half2float(__ushort_as_half((unsigned short)(hd & 0xFFFFu)));
	float fs = (float)(ls - 32);	/* exact: |ls - 32| <= 32 */
	uint32_t qw[4] = { w->a.x, w->a.y, w->b.x, w->b.y };
	int lo[4], hi[4];

#pragma unroll
	for (int k = 0; k < 4; k++)
		gpu_iq4x8(qw[k], &lo[k], &hi[k]);
#pragma unroll
	for (int j = 0; j < M; j++) {
		if (j >= m)
			break;
		const int8_t *xq = q + (size_t)j * ne0 + b * 256 + 32 * i;
		int4 ya = *(const int4 *)xq, yb = *(const int4 *)(xq + 16);
		int t = __dp4a(lo[0], ya.x, IQ_MAGIC);
		t = __dp4a(lo[1], ya.y, t), t = __dp4a(lo[2], ya.z, t), t = __dp4a(lo[3], ya.w, t);
		t = __dp4a(hi[0], yb.x, t), t = __dp4a(hi[1], yb.y, t), t = __dp4a(hi[2], yb.z, t);
		t = __dp4a(hi[3], yb.w, t);
		float dy = dk[(size_t)j * (ne0 / 256) + b];
		/* (float)t * fs: the exact (float)((ls - 32) * t) */
		acc[j] = __fadd_rn(acc[j], __fmul_rn(__fmul_rn(d, dy), __fmul_rn(iq_i2f(t), fs)));
	}
}

/* One iteration of xs_row from block b0: FULL, every group's two blocks in
 * the row (no row-end tests); else a block past the end skipped. */
template <int M, int FULL>
__device__ __forceinline__ void
xs_step(const uint8_t *__restrict__ wr, int b0, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dk, int m, int lane, float *acc)
{
	struct xs_w w0, w1;
	int b = b0 + (lane >> 3), i = lane & 7, on0 = FULL || b < nb, on1 = FULL || b + 4 < nb;
	int64_t ne0 = (int64_t)nb * 256;

	if (on0)
		xs_load(wr + (size_t)b * XS_BS, i, &w0);
	if (on1)
		xs_load(wr + (size_t)(b + 4) * XS_BS, i, &w1);
	if (on0)
		xs_block<M>(&w0, b, i, ne0, q, dk, m, acc);
	if (on1)
		xs_block<M>(&w1, b + 4, i, ne0, q, dk, m, acc);
}

/*
 * acc[j] (zeroed here) = lane's part of the sums of the weight row at wr
 * (nb super-blocks) with the m (<= M) Q8_K input rows; the file comment's
 * order: group g = lane / 8 blocks g, g + 4, ..., two at a time (the
 * iterations where every group has both without the row-end tests).
 */
template <int M>
__device__ __forceinline__ void
xs_row(const uint8_t *__restrict__ wr, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dk, int m, int lane, float *acc)
{
	int b0 = 0;

#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	for (; b0 + 8 <= nb; b0 += 8)	/* every group's two blocks in the row */
		xs_step<M, 1>(wr, b0, nb, q, dk, m, lane, acc);
	if (b0 < nb)	/* the row's last blocks */
		xs_step<M, 0>(wr, b0, nb, q, dk, m, lane, acc);
}

#endif
