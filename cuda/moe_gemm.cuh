/*
 * k_moe_gemm's device code (cuda/matvec.cu, gpu_moe_matvec's prompt GEMM):
 * its tiles, steps and block.  Device functions only: matvec.cu includes
 * it after what it calls (dq_unit, bf16_unit, gpu_cp16, pdl_enter and the
 * PTX wrappers mg_ldsm4, mg_mma, mg_commit, mg_wait_all), and
 * tools/moe-gemm-kern.cc runs it on the CPU over a shim of its own
 * (t/emu.bats), so no kernel belongs here.
 */
#ifndef MEMRA_MOE_GEMM_CUH
#define MEMRA_MOE_GEMM_CUH

/*
 * A prompt's expert products on bf16 operands, as gpu_matmul's bf16 path
 * multiplies a dense weight: each weight value dq_unit's, rounded to bf16
 * (k_dequant_bf16's bits), times x rounded to bf16, with fp32 sums on
 * tensor cores (mma.sync m16n8k16 .bf16, 16 values a step, the steps in
 * order along the row).  The slots grouped by expert (moe_group_build);
 * their x rows gathered as bf16 (k_moe_xg); then block (x, t0 +
 * blockIdx.y) takes weight rows 64 x .. of tile t's expert and the slots
 * of up to four of its tiles (t the first of them: its index in the
 * bucket a multiple of 4, every tile before a bucket's last full), the
 * weights dequantized into shared memory 64 values a step by its own
 * threads (a thread a 32-value unit), x by cp.async, two buffers: the
 * next step's loads while this one is multiplied.  Warp w holds rows 16 w
 * .. 16 w + 15 against up to 64 slots (eight n-tiles, those past the
 * slots skipped).  Each output's sums depend only on its weight row and
 * its x row (an mma's columns are independent and the k order is fixed):
 * the same bits whatever the other slots, their count or their order.
 * An id outside [0, n_exp) gives a NaN row.
 */
enum { MG_BM = 64, MG_BN = 4 * GPU_MOE_MT, MG_BK = 64, MG_LD = MG_BK + 8, MG_THREADS = 128 };

/* Step kb's weights into ws: this thread's unit (row tid / 2, unit tid % 2
 * of the step) of expert row er (< rows: ok), as bf16. */
template <int T>
__device__ __forceinline__ void
mg_wstep(uint16_t (*ws)[MG_LD], const uint8_t *__restrict__ W, size_t rowbytes, int64_t er,
    int64_t upr, int64_t kb, int ok)
{
	int tid = threadIdx.x, wr = tid >> 1, wu = tid & 1;
	uint4 *o = (uint4 *)&ws[wr][32 * wu];
	float w[32];

	if (!ok) {
#pragma unroll
		for (int i = 0; i < 4; i++)
			o[i] = make_uint4(0, 0, 0, 0);
		return;
	}
	dq_unit<T>(W, rowbytes, er, upr, 2 * kb + wu, NULL, w);
	bf16_unit(o, w);
}

/* Step kb's x into xs by cp.async: MG_BN gathered rows from xf (ne0 apart). */
__device__ __forceinline__ void
mg_xstep(uint16_t (*xs)[MG_LD], const uint16_t *__restrict__ xf, int64_t ne0, int64_t kb)
{
	for (int c = threadIdx.x; c < MG_BN * MG_BK / 8; c += MG_THREADS) {
		int j = c / (MG_BK / 8), p = c % (MG_BK / 8);
		gpu_cp16(&xs[j][8 * p], xf + (size_t)j * ne0 + kb * MG_BK + 8 * p, 16);
	}
	mg_commit();
}

/* k_moe_gemm's block (its shared memory ws, xs: two buffers each). */
template <int T>
__device__ __forceinline__ void
mg_block(uint16_t (*ws)[MG_BM][MG_LD], uint16_t (*xs)[MG_BN][MG_LD],
    const uint8_t *__restrict__ W, size_t rowbytes, int64_t rows, int64_t ne0, int n_exp,
    const int4 *__restrict__ tile, int t0, int nt, const int32_t *__restrict__ perm,
    const uint16_t *__restrict__ xg, float *y, const float *scale)
{
	int tid = threadIdx.x, lane = tid & 31, wp = tid >> 5, t = t0 + (int)blockIdx.y;
	int64_t r0 = (int64_t)blockIdx.x * MG_BM;

	pdl_enter();	/* the tiles and the gathered rows are earlier kernels' */
	int4 tl = tile[t];
	int e = tl.x, f = tl.y, n = tl.z;
	if (n == 0 || tl.w % 4 != 0)	/* empty, or a first tile's block takes it */
		return;
	for (int j = 1; j < 4 && n == j * GPU_MOE_MT && t + j < nt; j++) {
		int4 tj = tile[t + j];
		if (tj.z == 0 || tj.x != e)
			break;
		n += tj.z;
	}
	if (e < 0 || e >= n_exp) {
		for (int it = tid; it < MG_BM * n; it += MG_THREADS)
			if (r0 + it % MG_BM < rows)
				y[(size_t)perm[f + it / MG_BM] * rows + r0 + it % MG_BM] =
				    __int_as_float(0x7FC00000);
		return;
	}
	int64_t upr = ne0 / 32, nk = ne0 / MG_BK, wrow = r0 + (tid >> 1);
	int wok = wrow < rows;
	int64_t er = (int64_t)e * rows + wrow;	/* the stack's row (dq_unit's r0) */
	const uint16_t *xf = xg + (size_t)f * ne0;
	float acc[8][4];

#pragma unroll
	for (int j = 0; j < 8; j++)
#pragma unroll
		for (int i = 0; i < 4; i++)
			acc[j][i] = 0.0f;
	mg_xstep(xs[0], xf, ne0, 0);
	mg_wstep<T>(ws[0], W, rowbytes, er, upr, 0, wok);
	mg_wait_all();
	__syncthreads();
	for (int64_t kb = 0; kb < nk; kb++) {
		int cur = (int)(kb & 1);
		if (kb + 1 < nk)
			mg_xstep(xs[cur ^ 1], xf, ne0, kb + 1);
#pragma unroll
		for (int kk = 0; kk < MG_BK; kk += 16) {
			unsigned a[4];
			mg_ldsm4(a, &ws[cur][16 * wp + (lane & 15)][kk + (lane >> 4) * 8]);
#pragma unroll
			for (int j = 0; j < 8; j += 2) {
				if (8 * j >= n)	/* warp-uniform */
					break;
				unsigned b[4];
				mg_ldsm4(b, &xs[cur][8 * j + (lane & 7) + (lane >> 4) * 8]
				    [kk + ((lane >> 3) & 1) * 8]);
				mg_mma(acc[j], a, b[0], b[1]);
				mg_mma(acc[j + 1], a, b[2], b[3]);
			}
		}
		if (kb + 1 < nk)
			mg_wstep<T>(ws[cur ^ 1], W, rowbytes, er, upr, kb + 1, wok);
		mg_wait_all();
		__syncthreads();
	}
	int gq = lane >> 2, tg = lane & 3;
#pragma unroll
	for (int j = 0; j < 8; j++)
#pragma unroll
		for (int i = 0; i < 4; i++) {
			int col = 8 * j + 2 * tg + (i & 1);
			int64_t r = r0 + 16 * wp + gq + 8 * (i >> 1);
			if (col < n && r < rows)
				y[(size_t)perm[f + col] * rows + r] = scale != NULL ?
				    __fmul_rn(acc[j][i], *scale) : acc[j][i];
		}
}

#endif
