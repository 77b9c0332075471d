/* gpu_impl: what the cuda/*.cu files share; never included from C. */
#ifndef MEMRA_GPU_IMPL_CUH
#define MEMRA_GPU_IMPL_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdarg.h>
#include <stdio.h>
#include <utility>
#include "fexp.h"
#include "gpu.h"

#define GPU_ERRLEN 256
#define GPU_MARKS 8

struct gpu {
	int	dev;
	cudaStream_t stream;
	cublasHandle_t blas;
	void   *scratch;		/* scratch_size bytes of device memory */
	size_t	scratch_size;
	void   *gemm;			/* gemm_size bytes: the bf16 GEMM's operands */
	size_t	gemm_size;
	int	nsm;			/* multiprocessors */
	int	mv_chunk;		/* gpu_matvec: row bytes per warp step */
	int	mv_unroll;		/* gpu_matvec: octets a lane overlaps (1, 2) */
	int	mmq;			/* gpu_matvec_q8, n > 16: GPU_MMQ_* (gpu_tune_mmq) */
	int	qk_lanes;		/* K-quant products: lanes per super-block (0: gpu_qk_lanes) */
	int	qk_depth;		/* k_mvk: super-blocks in flight a group (0: 2; gpu_tune_qk_depth) */
	int	qk_stage;		/* k_mvk's Q6_K rows staged in shared memory (gpu_tune_qk_stage) */
	int	mv8;			/* int8 products, n <= 16: GPU_MV8_* (gpu_tune_mv8) */
	int	qkt;			/* K-quant products, n <= 32: GPU_QKT_* (gpu_tune_qkt) */
	int	step_rows;		/* decode kernels up to this many rows (gpu_tune_step_rows) */
	int	moe_group;		/* gpu_moe_matvec: GPU_MOE_GROUP_* (gpu_tune_moe_group) */
	int	moe_tc;			/* its grouped Q8_0 / NVFP4: GPU_MOE_TC_* (gpu_tune_moe_tc) */
	int	mirror;			/* bf16 GEMM: persistent bf16 weights (gpu_tune_mirror) */
	struct gpu_mirror *mir;		/* [nmir] of them (cap: cmir) */
	int	nmir, cmir;
	int	can_pdl;		/* sm_90 or later, and the kernels built for it */
	int	pdl;			/* launches programmatic (gpu_pdl) */
	unsigned gen;			/* bumped when device memory is freed or the scratch
					 * moves: a graph recorded before may be stale */
	cudaEvent_t mark[GPU_MARKS];
	void   *stage[2];		/* gpu_upload_weight's pinned buffers (GPU_STAGE bytes) */
	cudaEvent_t stage_ev[2];	/* the copy out of each done */
	struct gpu_prof *prof;		/* gpu_prof_*: NULL until the first begin */
	char	name[128];
	char	err[GPU_ERRLEN];
};

struct gpu_graph {
	cudaGraphExec_t exec;
};

/* Keep "what: why" on g; always returns -1. */
static inline int
gpu_fail(struct gpu *g, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->err, sizeof g->err, fmt, ap);
	va_end(ap);
	return -1;
}

/* A gpu_tune_* setting (a kernel choice) *field set to v, already checked:
 * graphs recorded before a change launched the other kernels, so they are
 * stale (gen).  Returns 0. */
static inline int
gpu_tune_set(struct gpu *g, int *field, int v)
{
	if (v != *field)
		g->gen++;
	*field = v;
	return 0;
}

/* A CUDA call that failed turns into -1 plus a message naming the call. */
#define GPU_CHECK(g, call) do {						\
	cudaError_t e_ = (call);					\
	if (e_ != cudaSuccess)						\
		return gpu_fail((g), "%s: %s", #call, cudaGetErrorString(e_)); \
} while (0)

/* Kernel f may take sh bytes of dynamic shared memory (past 48 KiB);
 * -1 with "what: sh bytes of shared memory: why". */
template <typename F>
static inline int
gpu_smem(struct gpu *g, F f, int sh, const char *what)
{
	cudaError_t e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, sh);

	return e == cudaSuccess ? 0 : gpu_fail(g, "%s: %d bytes of shared memory: %s", what, sh,
	    cudaGetErrorString(e));
}

/* After a launch: a bad configuration shows here, a fault at gpu_sync. */
#define GPU_LAUNCHED(g, what) do {					\
	cudaError_t e_ = cudaGetLastError();				\
	if (e_ != cudaSuccess)						\
		return gpu_fail((g), "%s: %s", (what), cudaGetErrorString(e_)); \
	if ((g)->prof != NULL && gpu_prof_mark((g), (what)) != 0)	\
		return -1;						\
} while (0)

/* 1 when gpu_launch's launches are programmatic: g->pdl and not profiling
 * (gpu_prof times kernels that run one after another). */
int	gpu_launch_pdl(const struct gpu *g);

/*
 * Kernel k on g's stream: grid, block, dynamic shared memory smem, then
 * k's arguments (converted to its parameters' types as <<<>>> converts
 * them).  With g->pdl on (gpu_pdl) and gpu_prof off, the
 * launch is a programmatic dependent launch: k may start while the kernel
 * before it in the stream still runs, so k must pdl_wait() in every block
 * before it reads what an earlier kernel wrote and before it writes
 * anything (see pdl_wait).  While the stream is being recorded the
 * dependency becomes a programmatic edge of the graph (CUDA 12.3 and
 * later).  After a copy, a memset or an event record the launch waits for
 * it as a plain one does; after a cuBLAS kernel k may start early, and its
 * pdl_wait returns once that kernel has ended.  A bad
 * configuration shows at GPU_LAUNCHED, as a <<<>>> launch's does.
 */
template <typename... P, typename... A>
static inline void
gpu_launch(struct gpu *g, void (*k)(P...), dim3 grid, dim3 block, size_t smem, A &&...args)
{
	cudaLaunchAttribute at[1];
	cudaLaunchConfig_t c = {};

	c.gridDim = grid;
	c.blockDim = block;
	c.dynamicSmemBytes = smem;
	c.stream = g->stream;
	if (gpu_launch_pdl(g)) {
		at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		at[0].val.programmaticStreamSerializationAllowed = 1;
		c.attrs = at;
		c.numAttrs = 1;
	}
	cudaLaunchKernelEx(&c, k, std::forward<A>(args)...);	/* its error: cudaGetLastError */
}

/*
 * The device half of gpu_launch's programmatic launches.  pdl_wait: until
 * the kernel before this one in the stream has finished and its writes
 * are visible (at once when the launch was plain; nothing below sm_90).
 * Every block of every kernel calls it on every path, exits included:
 * before its first read of memory an earlier kernel wrote, and before its
 * first global write (the kernel before may still read that memory).
 * Since a kernel cannot finish before its own wait has returned, kernel N
 * ending means N-1 has ended, and so on back: the wait covers every
 * earlier kernel.  Before it a kernel reads only weights (written by host
 * copies, which a launch waits for in full, never by a kernel): k_mmq2's
 * first weight step, loaded to registers.  pdl_trigger: the kernel after
 * this one may be scheduled (once every block of this one has called it
 * or exited); it still waits for this one's end in its own pdl_wait.
 * pdl_enter: both, the start of most kernels.
 */
__device__ __forceinline__ void
pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" : : : "memory");
#endif
}

__device__ __forceinline__ void
pdl_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" : : : "memory");
#endif
}

__device__ __forceinline__ void
pdl_enter(void)
{
	pdl_wait();
	pdl_trigger();
}

/*
 * Before pdl_wait: ask L2 for the first MEMRA_PDL_PREFETCH bytes of the n
 * at p (a warp's weight row), the 128-byte lines from the one holding p,
 * lane l of the warp taking lines l, l + 32, ...  A hint: no register or
 * L1 holds the data, and L2 is where every write lands, so it is safe
 * even on memory a kernel still writes (it would only waste the
 * bandwidth).  Off by default (0 bytes): on the H200 whole rows cost more
 * than they gave (9B decode 302.2 against 328.9 tok/s Q8_0, 399.2 against
 * 406.2 NVFP4, A B B A of the two builds, bench/2026-12-01/2026-12-01-s6-run3-*; the
 * ~4200 warps of a product's first wave asking for rows of 12288 want
 * 55 MB, more than L2, and the products keep the memory busy anyway).
 * A build with MEMRA_PDL_PREFETCH=2048 (the first unrolled step of the
 * product loops, 8.6 MB in all) is tools/gpu-run.sh's GPU_RUN_PF_ABBA:
 * 9B decode 332.5 against 330.6 tok/s Q8_0, 449.4 against 465.7 NVFP4
 * (bench/2026-12-02/2026-12-02-s11-run5-*), so still off.
 */
#ifndef MEMRA_PDL_PREFETCH
#define MEMRA_PDL_PREFETCH 0
#endif

__device__ __forceinline__ void
pdl_prefetch(const void *p, size_t n, int lane)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && MEMRA_PDL_PREFETCH > 0
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)127;
	uintptr_t e = (uintptr_t)p + (n < (size_t)MEMRA_PDL_PREFETCH ? n : (size_t)MEMRA_PDL_PREFETCH);

	for (a += (uintptr_t)lane * 128; a < e; a += 32 * 128)
		asm volatile("prefetch.global.L2 [%0];" : : "l"(a));
#endif
}

/* gpu_prof: an event after a launch named what (a string literal), while on. */
int	gpu_prof_mark(struct gpu *g, const char *what);

/* Scratch of at least n bytes (grown outside graph capture only): the
 * quantized x of the products, and apart from it the bf16 GEMM's operands. */
void   *gpu_scratch(struct gpu *g, size_t n);
void   *gpu_scratch_gemm(struct gpu *g, size_t n);

/*
 * mmq.cu, for matvec.cu: the bf16 GEMM.  gpu_bf16_operands: the gemm
 * scratch for x (n rows of ne0 bf16, returned) and a tile of W (*wb);
 * gpu_gemm_bf16: y[n][rows] = W . x with W (rows of type t, read through
 * gpu_dequantize_rows_bf16) dequantized to bf16 a tile at a time into wb (with g->mirror: read from
 * W's persistent bf16 copy, made by the first call), cublasGemmEx with
 * fp32 sums on tensor cores, then y *= *scale when scale is not NULL.
 * gpu_mirror_drop: frees the copy of the weight at w (gpu_free calls it;
 * all of them when w is NULL).
 */
uint16_t *gpu_bf16_operands(struct gpu *g, int64_t n, int64_t rows, int64_t ne0, uint16_t **wb);
/* mmq.cu: dst = the n floats (even) at src rounded to f16 (f16 1) or bf16,
 * nearest, ties to even, queued; what names the launch. */
int	gpu_half_of(struct gpu *g, int f16, const float *src, int64_t n, uint16_t *dst,
	    const char *what);
/* matvec.cu: y[0..n) *= *s (a weight's scale), queued (the fp32 and bf16 GEMMs'). */
int	gpu_scale(struct gpu *g, float *y, int64_t n, const float *s);
int	gpu_gemm_bf16(struct gpu *g, int t, const void *W, int64_t rows, int64_t ne0,
	    const uint16_t *xb, uint16_t *wb, int64_t n, float *y, const float *scale);
void	gpu_mirror_drop(struct gpu *g, const void *w);

/*
 * Up to MV8_SET weights of one type and row length in one launch (the
 * products of one normed x: q, k, v; GDN's four; gate and up): weight i
 * takes blocks blk[i] .. blk[i+1]-1, 8 rows a block as if launched alone,
 * so every row is the same bits as in a launch of its own (matvec_q8.cu's
 * k_mv8 and k_mv8t, matvec_qk.cu's k_mvk).
 */
#define MV8_SET 4

struct mv8_set {
	const uint8_t *W[MV8_SET];	/* [rows][rowbytes] */
	float	*y[MV8_SET];		/* [m][rows] */
	const float *scale[MV8_SET];	/* NULL or one float */
	int64_t	rows[MV8_SET];
	unsigned blk[MV8_SET + 1];	/* blk[nw]: the grid */
	int	nw;
};

/* The weight of block blockIdx.x and the row of this warp in it (static
 * indexing only: the set stays in the parameter bank). */
struct mv8_row {
	const uint8_t *W;
	float	*y;
	const float *scale;
	int64_t	rows, r;
};

/* The weight of block blockIdx.x; *b0 its first block (R.r unset). */
__device__ __forceinline__ struct mv8_row
mv8_weight(const struct mv8_set &S, unsigned *b0)
{
	struct mv8_row R = { S.W[0], S.y[0], S.scale[0], S.rows[0], 0 };

	*b0 = 0;
#pragma unroll
	for (int k = 1; k < MV8_SET; k++)
		if (k < S.nw && blockIdx.x >= S.blk[k]) {
			R.W = S.W[k], R.y = S.y[k], R.scale = S.scale[k], R.rows = S.rows[k];
			*b0 = S.blk[k];
		}
	return R;
}

/* mv8_weight, and the row of this warp (8 a block of 256 threads). */
__device__ __forceinline__ struct mv8_row
mv8_pick(const struct mv8_set &S)
{
	unsigned b0;
	struct mv8_row R = mv8_weight(S, &b0);

	R.r = ((int64_t)(blockIdx.x - b0) * blockDim.x + threadIdx.x) >> 5;
	return R;
}

/*
 * matvec_qk.cu, for matvec_q8.cu: qk_type(t) is 1 for the types on Q8_K
 * activations: Q4_K, Q5_K, Q6_K and IQ4_XS; qk_quantize writes x[n][ne0]
 * (ne0 a multiple of 256) as Q8_K: q[n][ne0] (16-byte aligned),
 * dk[n][ne0/256], bs[n][ne0/16]; qk_products is the products of m <=
 * qk_group(g, t, m) of those rows with S.nw such weights W (IQ4_XS:
 * matvec_iq4.cu's, or k_mvkt's where gpu_tune_qkt takes it);
 * qk_group: the rows a launch of type t takes in a product of n rows, 32
 * where gpu_tune_qkt's tensor-core kernel takes them, else
 * GPU_MATVEC_MAX_ROWS.
 */
int	qk_type(int t);
int	qk_group(const struct gpu *g, int t, int64_t n);
int	qk_quantize(struct gpu *g, const float *d_x, int64_t n, int64_t ne0, int8_t *q,
	    float *dk, int16_t *bs);
/* qk_quantize after GPU_PRE_SWIGLU or GPU_PRE_GEGLU on x by u, written back to x. */
int	qk_quantize_pre(struct gpu *g, int pre, float *d_x, const float *d_u, int64_t n,
	    int64_t ne0, int8_t *q, float *dk, int16_t *bs);
/* (S.y offset to the rows, S.blk unset: one launch of k_mvk where it takes
 * the set, the bits of a launch each; else k_mvkt or k_iq4 one by one) */
int	qk_products(struct gpu *g, int t, struct mv8_set S, int64_t ne0, const int8_t *q,
	    const float *dk, const int16_t *bs, int m);

/*
 * The experts' products of gpu_moe_matvec (cuda/matvec_q8.cu), by family:
 * qk_moe_product (matvec_qk.cu) for the K-quants on Q8_K rows q, dk, bs
 * (input row i's at q + i * ne0, dk + i * ne0 / 256, bs + i * ne0 / 16),
 * gpu_moe_mv_f (matvec.cu) for the fp32 path (gpu_matvec's types) on x
 * rows ldx floats apart (16-byte aligned).  Slot s < ns: input row s /
 * per, expert ids[s] (rows e * rows ..), into y[s][rows].
 */
int	qk_moe_product(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
	    int n_exp, const int32_t *d_ids, int ns, int per, const int8_t *q, const float *dk,
	    const int16_t *bs, float *d_y, const float *d_scale);
int	gpu_moe_mv_f(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
	    const int32_t *d_ids, int ns, int per, const float *d_x, int64_t ldx, float *d_y,
	    const float *d_scale);

/*
 * The grouped form of those products (gpu_moe_matvec with g->moe_group):
 * the slots sorted by expert on the device (no read-back: a recorded graph
 * replays any routing), their input rows gathered in that order, then a
 * block per (weight rows, tile) runs the family's row function of the
 * decode kernels (mv_row, mv8_row, mvk_row, the iq4 rows) once for the
 * tile's up to GPU_MOE_MT rows, so a weight row is read once a tile, not
 * once a slot (Q8_0 and NVFP4 also by k_mv8t's tensor-core steps on a
 * pair of one expert's tiles, k_moe_mv8t: gpu_tune_moe_tc).  Row j of
 * such an M-row call is the bits of a one-row call (each row's sums have
 * their own accumulators, in an order that does not depend on M or on
 * the other rows), so a slot's row is the per-slot kernels' bit for bit.
 *
 * moe_group_build (cuda/moe.cu): from ids[ns] (bucket ids[s], or n_exp for
 * an id outside [0, n_exp)), into mem (moe_group_bytes(ns, n_exp)):
 * perm[ns + GPU_MOE_MT], the slots in bucket order (slot order within a
 * bucket), the last GPU_MOE_MT 0; tile[nt] (bucket, first, count, i) with
 * 1 <= count <= GPU_MOE_MT for the used ones in bucket order (i: the
 * tile's index in its bucket, first = the bucket's first + i GPU_MOE_MT;
 * every tile but a bucket's last holds GPU_MOE_MT), (0, 0, 0, 0)
 * after; nt = moe_group_tiles(ns, n_exp), a bound the grids take (blocks
 * of an empty tile exit).  n_exp <= GPU_MOE_GROUP_EXPERTS.  moe_gather:
 * for each of the na <= 3 arrays of rows (rb[a] bytes, a multiple of 4),
 * dst row i = src row perm[i] / per for i < ns + GPU_MOE_MT.
 */
#define GPU_MOE_MT 16			/* slots a tile: the decode kernels' GPU_MATVEC_MAX_ROWS */
struct moe_group {
	int32_t *perm;
	int4   *tile;
	int	nt;
};
/*
 * A grouped kernel's tile t0 + blockIdx.y for weight row row: its bucket,
 * first sorted slot and count into *e, *f, *n; 0 when the block is done
 * with it (an empty tile, or bucket n_exp, whose slots' rows lane 0 fills
 * with NaN).
 */
__device__ __forceinline__ int
moe_tile(const int4 *__restrict__ tile, int t0, const int32_t *__restrict__ perm, int n_exp,
    int64_t rows, int64_t row, int lane, float *y, int *e, int *f, int *n)
{
	int4 tl = tile[t0 + (int)blockIdx.y];

	*e = tl.x, *f = tl.y, *n = tl.z;
	if (*n == 0)
		return 0;
	if (*e < 0 || *e >= n_exp) {
		if (lane == 0)
			for (int j = 0; j < *n; j++)
				y[(size_t)perm[*f + j] * rows + row] = __int_as_float(0x7FC00000);
		return 0;
	}
	return 1;
}
size_t	moe_group_bytes(int ns, int n_exp);
int	moe_group_tiles(int ns, int n_exp);
int	moe_group_build(struct gpu *g, const int32_t *d_ids, int ns, int n_exp, void *mem,
	    struct moe_group *G);
int	moe_gather(struct gpu *g, const struct moe_group *G, int ns, int per, int na,
	    const void *const *src, void *const *dst, const size_t *rb);
/* The grouped kernels by family (matvec.cu, matvec_q8.cu, matvec_qk.cu,
 * matvec_iq4.cu): slot perm[tile.first + j]'s row into y, input row j of
 * the tile at row tile.first + j of the gathered rows. */
int	gpu_moe_mv_fg(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
	    const int32_t *d_ids, int ns, int per, const float *d_x, int64_t ldx, float *d_y,
	    const float *d_scale);
int	qk_moe_grouped(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
	    int n_exp, const struct moe_group *G, const int8_t *q, const float *dk,
	    const int16_t *bs, float *d_y, const float *d_scale);
int	iq4_moe_grouped(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
	    int n_exp, const struct moe_group *G, const int8_t *q, const float *d, float *d_y,
	    const float *d_scale);
/* The experts' prompt GEMM on bf16 operands (matvec.cu): moe_gemm_takes
 * says whether gpu_moe_matvec hands a call to moe_gemm (GPU_MMQ_BF16, nx
 * more than g->step_rows, a quantized type, rows of whole 64-value steps). */
int	moe_gemm_takes(const struct gpu *g, int t, int64_t ne0, int64_t nx, int n_exp);
int	moe_gemm(struct gpu *g, int t, int nw, const void *const *d_w, int64_t rows,
	    int64_t ne0, int n_exp, const int32_t *d_ids, int ns, int per, const float *d_x,
	    float *const *d_y, const float *const *d_scale);

/*
 * matvec_iq4.cu: the IQ4 products on int8 activations.  iq4xs_product:
 * IQ4_XS weights on m <= GPU_MATVEC_MAX_ROWS Q8_K rows (q, dk as
 * qk_quantize writes them; qk_products passes IQ4_XS here);
 * iq4xs_moe_product: qk_moe_product's experts for IQ4_XS.  iq4nl_product:
 * IQ4_NL weights on m <= GPU_MATVEC_MAX_ROWS Q8_0 rows (q[m][ne0], dx[m][ne0
 * / 32], matvec_q8.cu's k_q8x); iq4nl_moe_product: the experts, input row i
 * at q + i * ne0, dx + i * ne0 / 32.
 */
int	iq4xs_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, const int8_t *q,
	    const float *dk, int m, float *d_y, const float *d_scale);
int	iq4xs_moe_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
	    const int32_t *d_ids, int ns, int per, const int8_t *q, const float *dk, float *d_y,
	    const float *d_scale);
/*
 * mmq_iq4.cu: the product of IQ4_XS weights on n > GPU_MATVEC_MAX_ROWS Q8_K
 * rows (q, dk as qk_quantize writes them) by the prefill kernel g->mmq
 * names: the tiled int8 GEMM (the CPU's numerics), its dp4a twin, cuBLAS on
 * bf16 operands, or (GPU_MMQ_OFF) iq4xs_product 16 rows at a time.
 */
int	iq4xs_matmul(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, const int8_t *q,
	    const float *dk, int64_t n, float *d_y, const float *d_scale);
int	iq4nl_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, const int8_t *q,
	    const float *dx, int m, float *d_y, const float *d_scale);
int	iq4nl_moe_product(struct gpu *g, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
	    const int32_t *d_ids, int ns, int per, const int8_t *q, const float *dx, float *d_y,
	    const float *d_scale);

/* 1 while g's stream is being recorded into a graph. */
static inline int
gpu_capturing(struct gpu *g)
{
	cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;

	if (cudaStreamIsCapturing(g->stream, &st) != cudaSuccess) {
		cudaGetLastError();
		return 1;	/* unknown: as if recording, nothing unsafe happens */
	}
	return st != cudaStreamCaptureStatusNone;
}

/*
 * 1 / sqrt(mean + eps) from ss, the sum of the row's float squares x*x
 * added in double, as the CPU backend (and ggml's rms_norm) computes it:
 * the mean rounded to float once.  A double sum rounded to float is the
 * same in almost any order, so the scale is the CPU's but in rare ties.
 */
__device__ __forceinline__ float
rms_scale(double ss, int d, float eps)
{
	return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn((float)(ss / (double)d), eps)));
}

/*
 * The row-per-block norms (ops.cu's k_rmsnorm4, matvec_q8.cu's
 * k_rmsnorm_q8x) share their geometry and their double sum, so that the
 * fused kernel's scale is the plain kernel's bit for bit: a row of d4
 * float4s over norm_threads(d4) threads, thread i holding the norm_vec(d4)
 * float4s i, i + blockDim.x, ... (one for rows up to 4096 floats: the
 * per-element work is not serial); its squares summed in that order in
 * double, a butterfly over the warp (norm_sumsq_warp), then after one
 * barrier every warp sums the warps' sums in the same butterfly, lane l
 * taking warp l's (norm_sumsq_block).
 */
static inline int
norm_vec(int d4)
{
	return d4 <= 1024 ? 1 : d4 <= 2048 ? 2 : 4;
}

/* Threads of a row of d4 float4s (a multiple of 32, at most 1024 for d4 <= 4096). */
static inline int
norm_threads(int d4)
{
	int v = norm_vec(d4);

	return ((d4 + v - 1) / v + 31) / 32 * 32;
}

/* The sum of the squares of v[0..V-1] over the warp, in every lane. */
template <int V>
__device__ __forceinline__ double
norm_sumsq_warp(const float4 *v)
{
	double s = (double)__fmul_rn(v[0].x, v[0].x);	/* 0 + it: the same bits */

#pragma unroll
	for (int u = 0; u < V; u++) {
		if (u > 0)
			s += (double)__fmul_rn(v[u].x, v[u].x);
		s += (double)__fmul_rn(v[u].y, v[u].y);
		s += (double)__fmul_rn(v[u].z, v[u].z);
		s += (double)__fmul_rn(v[u].w, v[u].w);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
	return s;
}

/* The block's sum of the warps' sums s, in every thread (red: 32 doubles). */
__device__ __forceinline__ double
norm_sumsq_block(double s, double *red)
{
	int lane = threadIdx.x & 31;

	if (blockDim.x == 32)	/* what the second butterfly gives: s + 0 */
		return s;
	if (lane == 0)
		red[threadIdx.x >> 5] = s;
	__syncthreads();
	s = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.0;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
	return s;
}

/*
 * One row's norm of v (norm_vec's V float4s a thread, zero past the row)
 * times c (w not NULL) in place, as k_rmsnorm4 computes it: its sum, its
 * scale, its two roundings.  red: 32 doubles of the block's own.
 */
template <int V>
__device__ __forceinline__ void
norm_row4(float4 *v, const float4 *c, const float *w, int d, float eps, double *red)
{
	float sc = rms_scale(norm_sumsq_block(norm_sumsq_warp<V>(v), red), d, eps);

#pragma unroll
	for (int u = 0; u < V; u++) {
		v[u] = make_float4(__fmul_rn(v[u].x, sc), __fmul_rn(v[u].y, sc),
		    __fmul_rn(v[u].z, sc), __fmul_rn(v[u].w, sc));
		if (w != NULL)
			v[u] = make_float4(__fmul_rn(v[u].x, c[u].x), __fmul_rn(v[u].y, c[u].y),
			    __fmul_rn(v[u].z, c[u].z), __fmul_rn(v[u].w, c[u].w));
	}
}

/*
 * NVFP4's scales in the GPU layout are canonical ue4m3 bytes
 * (gpu_nvfp4_pack): ggml's 0x7F (its zero) is 0 and bit 7 is dropped (so
 * 0xFF, 240 in ggml, is 0x7F).  gpu_ue4m3c of ggml's byte x is that byte,
 * gpu_ue4m3u of a canonical byte c a ggml byte of the same value
 * (gpu_nvfp4_unpack: 0x7F back as 0xFF, the rest as they are);
 * gpu_ue4m3c_half(c) = ggml's value of x times 0.5 (lib/quant's
 * qi_ue4m3_half): c << 7 as fp16 bits is ggml's value * 2^-8 exactly
 * (ue4m3 and fp16 share the mantissa and subnormal forms), times 128.
 */
__host__ __device__ __forceinline__ unsigned
gpu_ue4m3c(unsigned x)
{
	return x == 0x7F ? 0 : x & 0x7F;
}

__host__ __device__ __forceinline__ unsigned
gpu_ue4m3u(unsigned c)
{
	return c == 0x7F ? 0xFF : c;
}

__device__ __forceinline__ float
gpu_ue4m3c_half(unsigned c)
{
	return __fmul_rn(__half2float(__ushort_as_half((unsigned short)(c << 7))), 128.0f);
}

/* prmt.b32 in its default mode, as is: __byte_perm masks each selector
 * nibble to 3 bits first (one more instruction, and no sign replication:
 * a nibble with bit 3 set gives the chosen byte's bit 7 in all 8 bits). */
__device__ __forceinline__ uint32_t
gpu_prmt(uint32_t a, uint32_t b, uint32_t s)
{
	uint32_t r;

	asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
	return r;
}

/*
 * The kvalues (e2m1 codes as integers, twice the value) of the 8 codes of
 * a word of NVFP4's GPU layout (nibble k = value k, gpu_nvfp4_pack) as int8
 * for dp4a: *lo values 0..3, *hi values 4..7.  Per 4 codes a permute over
 * the magnitudes (0,1,2,3,4,6,8,12) and one over their negations, then a
 * third picks by the sign (selector 0x3210 + 4 * sign): 11 instructions
 * for 8 values.  tp, tn: the low words of the two tables (0x03020100,
 * 0xFDFEFF00), sb the selector base 0x32103210, from registers where the
 * caller can keep them there (the high words are immediates).  A local
 * array indexed by data went to local memory (10x slower).
 */
__device__ __forceinline__ void
gpu_fp4x8(uint32_t v, uint32_t tp, uint32_t tn, uint32_t sb, int *lo, int *hi)
{
	uint32_t c = v & 0x77777777u, s = (v >> 1 & 0x44444444u) | sb;

	*lo = (int)gpu_prmt(gpu_prmt(tp, 0x0C080604u, c), gpu_prmt(tn, 0xF4F8FAFCu, c), s);
	c >>= 16, s >>= 16;
	*hi = (int)gpu_prmt(gpu_prmt(tp, 0x0C080604u, c), gpu_prmt(tn, 0xF4F8FAFCu, c), s);
}

/* gpu_fp4x8 with its table words as immediates (where the compiler keeps
 * them in registers itself). */
__device__ __forceinline__ void
gpu_fp4x8i(uint32_t v, int *lo, int *hi)
{
	gpu_fp4x8(v, 0x03020100u, 0xFDFEFF00u, 0x32103210u, lo, hi);
}

/*
 * cp.async of 16 (8, 4) bytes from global src to shared dst, of which the
 * first n (0..16, 0..8, 0..4) are read and the rest written as zeros (n =
 * 0: src need only be a valid address).  src and dst aligned to the size.
 * 16 bytes bypass L1 (.cg), 8 and 4 cannot (.ca).  cp.async.wait_group /
 * wait_all before the data is read.
 */
__device__ __forceinline__ void
gpu_cp16(void *dst, const void *src, int n)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
	    : : "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(n));
}

__device__ __forceinline__ void
gpu_cp4(void *dst, const void *src, int n)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
	    : : "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(n));
}

__device__ __forceinline__ void
gpu_cp8(void *dst, const void *src, int n)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;"
	    : : "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(n));
}

#include "gpu_iq4.cuh"

/*
 * One 256-value block of x quantized to Q8_K by a warp, as lib/quant's
 * q_q8_k: max = the first value of largest magnitude (a (magnitude,
 * index) butterfly, the lower index winning ties; NaN never wins),
 * iscale = -127 / max, q = min(127, round-half-even(iscale * x)), d =
 * 1 / iscale, bsums = the sums of 16 quants; an all-zero block gives
 * zeros.  Lane l reads x[8l..8l+7] (plain loads: x may have been written
 * by the same block) and writes q[8l..8l+7] (q 8-byte aligned).
 */
__device__ __forceinline__ void
gpu_q8k_block(const float *x, int lane, int8_t *q, float *d, int16_t *bsums)
{
	const float *xb = x + lane * 8;
	float v[8], a = 0.0f, sv = 0.0f;
	int ix = 1 << 30;

#pragma unroll
	for (int k = 0; k < 8; k++) {
		v[k] = xb[k];
		if (a < fabsf(v[k]))
			a = fabsf(v[k]), sv = v[k], ix = lane * 8 + k;
	}
	for (int o = 16; o > 0; o >>= 1) {
		float a2 = __shfl_xor_sync(0xFFFFFFFFu, a, o);
		float s2 = __shfl_xor_sync(0xFFFFFFFFu, sv, o);
		int i2 = __shfl_xor_sync(0xFFFFFFFFu, ix, o);
		if (a2 > a || (a2 == a && i2 < ix))
			a = a2, sv = s2, ix = i2;
	}
	float is = a != 0.0f ? __fdiv_rn(-127.0f, sv) : 0.0f;
	int s = 0;
	uint32_t p[2] = { 0, 0 };
#pragma unroll
	for (int k = 0; k < 8; k++) {
		int qi = a != 0.0f ? min(127, (int)rintf(__fmul_rn(is, v[k]))) : 0;
		s += qi;
		p[k / 4] |= (uint32_t)(qi & 0xFF) << (8 * (k % 4));
	}
	*(int2 *)(q + lane * 8) = make_int2((int)p[0], (int)p[1]);
	s += __shfl_xor_sync(0xFFFFFFFFu, s, 1);
	if ((lane & 1) == 0)
		bsums[lane / 2] = (int16_t)s;
	if (lane == 0)
		*d = a != 0.0f ? __fdiv_rn(1.0f, is) : 0.0f;
}

/* gelu(x) with PyTorch's tanh approximation in lib/backend_cpu_gemma.c's order. */
__device__ __forceinline__ float
gpu_gelu_tanh(float x)
{
	const float beta = (float)(1.41421356237309504880 * 1.12837916709551257390 * 0.5);
	const float kappa = 0.044715f;
	float inner = __fmul_rn(beta, __fadd_rn(x, __fmul_rn(kappa, __fmul_rn(__fmul_rn(x, x), x))));

	return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(inner)));
}

/*
 * exp as ggml's vectorized CPU ops compute it (lib/fexp.h, the one
 * definition the CPU backend's backend_cpu_expf_ggml uses too), and SiLU
 * x / (1 + exp(-x)) with it, as the CPU backend's backend_cpu_silu: the
 * same bits on both.
 */
__device__ __forceinline__ float
gpu_expf_ggml(float x)
{
	return fexp_ggml(x);
}

__device__ __forceinline__ float
gpu_silu(float x)
{
	return __fdiv_rn(x, __fadd_rn(1.0f, gpu_expf_ggml(__fsub_rn(0.0f, x))));
}

/* The attention output gate's sigmoid, 1 / (1 + expf(-x)), its add and
 * division rounded explicitly so that every kernel using it (ops.cu's
 * k_sigmoid_mul, matvec_q8.cu's fused gate) gets the same bits whatever
 * the compiler contracts around expf. */
__device__ __forceinline__ float
gpu_sigmoid(float x)
{
	return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
}

#endif
