/*
 * gpu: one CUDA device behind plain C.  A struct gpu owns a device, a
 * stream, a cuBLAS handle and a scratch buffer; every operation below is
 * queued on that stream (asynchronous: gpu_sync() waits and reports the
 * first error a kernel raised).  Pointers named d_* are device memory
 * from gpu_alloc(); activations are fp32, row-major, rows contiguous.
 *
 * Every function returns 0 (or a pointer) on success and -1 (or NULL) on
 * failure, keeping the reason for gpu_errmsg().  Nothing prints, nothing
 * exits.  A gpu is used by one thread at a time.
 */
#ifndef MEMRA_GPU_H
#define MEMRA_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gpu;		/* device, stream, cublasHandle_t, scratch: private to cuda/ */
struct gpu_graph;	/* an instantiated CUDA graph */

/* The most rows one gpu_matvec() launch takes (speculative verify, batched decode). */
#define GPU_MATVEC_MAX_ROWS 16

/*
 * Open device number dev (0 = the first).  NULL on failure, with the
 * reason in err (UTIL_ERRLEN bytes or more); no device present is a
 * failure ("no CUDA device").  gpu_close(NULL) is a no-op.
 */
struct gpu *gpu_open(int dev, char *err, size_t errlen);
void	gpu_close(struct gpu *g);

/* The reason for the last failure on g ("" when none). */
const char *gpu_errmsg(const struct gpu *g);

/* One line naming the device: "NVIDIA H200 sm_90 132 SMs 139.8 GiB". */
const char *gpu_name(const struct gpu *g);

/* Number of CUDA devices present (0 when none or no driver). */
int	gpu_count(void);

/* Device memory: gpu_alloc returns n bytes (zeroed, 256-byte aligned, with
 * 16 readable bytes of slack past the end) or NULL; gpu_free(g, NULL) is a
 * no-op.  Copies are queued on g's stream; host memory must stay valid
 * until gpu_sync(). */
void   *gpu_alloc(struct gpu *g, size_t n);
void	gpu_free(struct gpu *g, void *d);
/* Page-locked host memory (n bytes; the copies to and from it are DMA,
 * no staging), or NULL; gpu_host_free(g, NULL) is a no-op. */
void   *gpu_host_alloc(struct gpu *g, size_t n);
void	gpu_host_free(struct gpu *g, void *p);
/* The device's free and total memory in bytes (cudaMemGetInfo); 0 or -1. */
int	gpu_mem_info(struct gpu *g, size_t *free_b, size_t *total);
/* Make g's device the calling thread's current one (cudaSetDevice): a
 * thread that drives several devices calls it before each one's work. */
int	gpu_use(struct gpu *g);
int	gpu_upload(struct gpu *g, void *d_dst, const void *src, size_t n);
/* A weight's n bytes from host memory (pageable: mmap'd file bytes) to
 * d_dst, done on return: from 16 MiB on through two pinned staging buffers
 * the CPU fills in turn while the device copies out of the other. */
int	gpu_upload_weight(struct gpu *g, void *d_dst, const void *src, size_t n);
int	gpu_download(struct gpu *g, void *dst, const void *d_src, size_t n);
int	gpu_copy(struct gpu *g, void *d_dst, const void *d_src, size_t n);
int	gpu_memset(struct gpu *g, void *d, int byte, size_t n);

/* Wait for everything queued on g; -1 with the first asynchronous error. */
int	gpu_sync(struct gpu *g);

/*
 * Graphs: between gpu_graph_begin and gpu_graph_end the calls on g are
 * recorded, not run (no gpu_sync, upload from pageable memory or alloc in
 * between).  gpu_graph_end returns the instantiated graph or NULL;
 * gpu_graph_replay queues one replay on g's stream; the caller frees with
 * gpu_graph_free (NULL is a no-op).  A graph holds the scratch buffer it
 * was recorded with: make the largest gpu_matmul / gpu_attention call
 * (longest context) once before recording, or the scratch may move.
 */
int	gpu_graph_begin(struct gpu *g);
struct gpu_graph *gpu_graph_end(struct gpu *g);
int	gpu_graph_replay(struct gpu *g, struct gpu_graph *gr);
void	gpu_graph_free(struct gpu_graph *gr);
/* Stop recording and drop what was recorded (after a failed call in
 * between); g's error message stays. */
void	gpu_graph_abort(struct gpu *g);

/*
 * A number that changes whenever device memory of g is freed (gpu_free),
 * the scratch buffer moves or gpu_tune picks other kernels: a graph
 * recorded under another number may name memory that is gone.
 */
unsigned gpu_generation(const struct gpu *g);

/*
 * Programmatic dependent launch (sm_90 and later): on, each kernel may be
 * scheduled while the one before it still runs, and waits inside for that
 * one's end before it touches what it wrote (hides the gaps between the
 * small kernels of a decode step; results are the same bits).  On by
 * default where the device has it and the kernels were built for it
 * (compute_90 or later); gpu_pdl(g, 0) turns it off, 1 back on (a no-op
 * elsewhere).  Returns whether it is on now.  Changing it moves
 * gpu_generation: graphs recorded the other way are stale.
 */
int	gpu_pdl(struct gpu *g, int on);

/* Timing on g's stream: milliseconds between two marks (gpu_sync first). */
int	gpu_mark(struct gpu *g, int slot);		/* slot 0..7 */
int	gpu_elapsed(struct gpu *g, int from, int to, float *ms);

/*
 * Where the time goes (a benchmark aid, graphs off): between gpu_prof_begin
 * and gpu_prof_end every kernel launched on g's stream is timed by an event
 * after it, and its time (from the event before) added to the row of its
 * name; copies queued between two kernels count to the second.  begin
 * first queues a kernel that spins for spin_ms, so that the host queues the
 * work behind it and the device runs it back to back (not waiting on the
 * host).  end waits for the device; the rows (launch name, seconds,
 * launches, busiest first) stay until gpu_prof_reset.  At most
 * GPU_PROF_MARKS launches between a begin and its end.
 */
#define GPU_PROF_MARKS	8192
struct gpu_prof_row {
	const char *name;
	double	s;
	unsigned long n;
};
int	gpu_prof_begin(struct gpu *g, double spin_ms);
int	gpu_prof_end(struct gpu *g);
int	gpu_prof_rows(struct gpu *g, const struct gpu_prof_row **rows);
void	gpu_prof_reset(struct gpu *g);

/*
 * Benchmark seam for gpu_matvec: chunk = bytes of a weight row staged per
 * warp and step (256..2560, a multiple of 16; default 2560), unroll = octets
 * a lane overlaps (1 or 2; default 1).  Unrolling never changes a result;
 * the chunk may change the last bits of a product, never between values of m.
 */
int	gpu_tune(struct gpu *g, int chunk, int unroll);

/*
 * NVFP4 on the device: every function here that takes NVFP4 weights takes
 * them in the GPU layout, which gpu_nvfp4_pack makes in place from ggml's
 * (gpu_nvfp4_unpack undoes it).  A row of nb = ne0 / 64 blocks keeps its
 * 36 nb bytes and its place (row r at r * 36 nb: slices and lookups by row
 * are unchanged): first the codes, 32 bytes a block (block b's at 32 b, as
 * 8 words; word i holds values 8i .. 8i+7, value 8i+k in bits 4k .. 4k+3),
 * then the scales, 4 bytes a block (block b's four ue4m3 at 32 nb + 4 b,
 * byte s for values 16s .. 16s+15), canonical: ggml's 0x7F (its zero) is
 * 0 and bit 7 is dropped, so ggml's 0xFF (240) is 0x7F; unpacking gives
 * bytes of the same values back (0x7F as 0xFF).  The products read a
 * 16-value sub-block's codes as one 8-byte load where rows are 8-byte
 * aligned (nb even), a warp's lanes sub-blocks side by side (so their x
 * loads read contiguous bytes too), decode them with fewer instructions
 * than ggml's nibble order allows, and a scale by a shift and one
 * multiply.  Uses a
 * temporary buffer of up to 64 MiB.
 */
int	gpu_nvfp4_pack(struct gpu *g, void *d_w, int64_t rows, int64_t ne0);
int	gpu_nvfp4_unpack(struct gpu *g, void *d_w, int64_t rows, int64_t ne0);

/* 1 when gpu_matvec() and gpu_dequantize() take quant type t. */
int	gpu_can_matvec(int t);

/*
 * y[m][rows] = W[rows][ne0] . x[m][ne0] for m = 1..GPU_MATVEC_MAX_ROWS,
 * W of quant type t (ggml block layout, row after row, as in a GGUF file;
 * NVFP4 in the GPU layout).
 * ne0 must be a multiple of 256 (of 32 for F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/IQ4_NL,
 * 64 for NVFP4).  d_scale: NULL, or one device float that multiplies every
 * output (the NVFP4 per-tensor '.scale').  Batch-invariant: row r of the
 * result is the same bits for any m.
 */
int	gpu_matvec(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
	    const float *d_x, int m, float *d_y, const float *d_scale);

/*
 * The product on int8 activations (cuda/matvec_q8.cu, cuda/matvec_qk.cu,
 * cuda/matvec_iq4.cu): y[n][rows] = W . x[n], W of type Q8_0, NVFP4,
 * IQ4_NL, Q4_0 or Q5_0 (x as Q8_0 blocks), Q4_1, Q5_1 (x as Q8_1) or Q4_K,
 * Q5_K, Q6_K, IQ4_XS (x as Q8_K blocks of 256), W's bytes as in the file (NVFP4 in
 * the GPU layout), x quantized as lib/quant's quant_quantize_act does and
 * each block's (IQ4_XS: sub-block's) integer dot scaled as quant_vec_dot
 * scales it: equal to the CPU's int8 path up to the order of float sums.
 * Any n for Q8_0, NVFP4, IQ4_NL, Q4_1, Q5_1 (16 rows a launch, or the
 * GEMM) and IQ4_XS; n <= GPU_MATVEC_MAX_ROWS (or the step rows) for Q4_0,
 * Q5_0 and the K-quants (their prefill stays on gpu_matmul; the experts'
 * gpu_moe_matvec takes them at any n).  Batch-invariant for n <= 16 (IQ4_NL, Q4_1, Q5_1: for any
 * n, a row the same bits in every launch of 16), and up to the step rows
 * (gpu_tune_step_rows, K-quants too); past them (prefill) it takes
 * gpu_matmul_q8 for Q8_0 and NVFP4, and for IQ4_XS cuda/mmq_iq4.cu's
 * products by the kernel gpu_tune_mmq picks (see there).  Uses the scratch
 * buffer for the quantized x.  gpu_can_matvec_q8: 1 for those eleven;
 * gpu_can_matvec_q8_rows: 1 when gpu_matvec_q8 takes t for n input rows
 * at the default step rows (gpu_can_matvec_q8_step: at g's).
 */
int	gpu_can_matvec_q8(int t);
int	gpu_can_matvec_q8_rows(int t, int64_t n);
int	gpu_matvec_q8(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
	    const float *d_x, int64_t n, float *d_y, const float *d_scale);

/*
 * Benchmark and check seam for the K-quant products of gpu_matvec_q8:
 * lanes of a warp per super-block, 4 or 8, or 0 (the default) for each
 * type's own, gpu_qk_lanes(t): 8 for Q6_K, 4 for Q4_K and Q5_K, the faster
 * on the H200 (bench/2026-12-01/2026-12-01-s9-run4-*: Q6_K by 8 lanes 1.25-1.3x at
 * m = 1 and 1.3-2.2x at m = 4 on 4096x4096, 12288x4096 and 4096x12288;
 * Q4_K and Q5_K mixed, 4 lanes mostly ahead at m = 1).  Each is
 * batch-invariant; the two may differ in the last bits (another order of
 * the float sums).  A type keeps one form for every m.  IQ4_XS has one form
 * (gpu_qk_lanes 8: a lane a 32-value sub-block), which lanes leaves alone.
 */
int	gpu_qk_lanes(int t);
int	gpu_tune_qk(struct gpu *g, int lanes);

/*
 * Benchmark and check seam for the same kernel's loads: the super-blocks a
 * group of lanes has loaded before it uses the first, 2 (0, the default)
 * or 4, for products of up to 4 input rows (decode and short verifies;
 * more rows take 2).  The blocks are added in the same order either way,
 * so the bits are the same (kernel-check's "matvec i8 ... D=4" lines);
 * only the loads in flight differ (the Q6_K product reads about 55% of
 * the H100's peak on the 31B shape: bench/2026-12-07/2026-12-07-s31-notes.md).
 * IQ4_XS's kernel is not this one and keeps its loads.
 */
int	gpu_tune_qk_depth(struct gpu *g, int depth);
/*
 * Where the Q6_K decode product at 8 lanes a block (its default) reads its
 * weights: 0 (the default) in place, each lane's 26 bytes of a block in
 * narrow loads of its own (the blocks of 210 bytes are 2-byte aligned: a
 * warp's load touches eight lines); 1 from a copy in shared memory, each
 * warp copying its row 8 blocks at a time, three chunks in flight, with
 * 4-byte copies of contiguous words (a warp's copy reads 128 contiguous
 * bytes).  The sums and their order are the same: the same bits (kernel-check's
 * "matvec i8 Q6_K ... S=default" lines); gpu_tune_qk_depth has no effect
 * while it is 1.  On an H100 it is slower at one row (48.83 against 46.50
 * us on 21504x5376: kernel-check -b's "L=8 S" lines,
 * bench/2026-12-07/2026-12-07-s33-run1-kernel-check-bench-Q6_K-h100.log).
 */
int	gpu_tune_qk_stage(struct gpu *g, int on);
/*
 * Q6_K packed four blocks a group: blocks 4 G .. 4 G + 3 of a weight (rows
 * after rows) as the 840 bytes at 840 G, their four d (f16) first at 2 k,
 * then each block's other 208 bytes (ql, qh, scales, as in the file) at 8
 * + 208 k; every 8 bytes a lane of the product reads are then aligned
 * (cuda/matvec_qk.cuh q6_x4).  gpu_q6k_pack4: the nblk blocks at d_src (the
 * file's layout) as blocks blk0 .. blk0 + nblk - 1 of the packed weight at
 * d_dst (8-byte aligned, gpu_q6k_pack4_bytes(its blocks) bytes; the bytes
 * of other blocks, and those past the last block, untouched).
 * Asynchronous, on g's stream.
 */
int	gpu_q6k_pack4(struct gpu *g, void *d_dst, int64_t blk0, const void *d_src, int64_t nblk);
size_t	gpu_q6k_pack4_bytes(int64_t nblk);
/*
 * The type id the gpu_* calls take for a weight so packed (not a file
 * type: lib/quant has no such id; the CUDA backend's weights under
 * backend_q6k_pack_set): the int8 products (gpu_matvec_q8 and its sets and
 * fused forms: k_mvk at 8 lanes in launches of up to 16 rows, or under
 * gpu_tune_qkt k_mvkt at 8 lanes, the bits of Q6_K's default form; the
 * experts' gpu_moe_matvec, k_moe_mvkg whatever gpu_tune_qkt), gpu_get_rows,
 * gpu_dequantize*, and gpu_matmul (up to the step rows the int8 products,
 * then dequantized tiles).  Rows are no byte ranges in this layout: r rows
 * into the weight is block r nb (nb = ne0 / 256) from its start, and only
 * where r nb is a multiple of 4 does a pointer r nb 210 bytes on start a
 * weight of its own.  gpu_matvec (fp32 x) refuses it.
 */
#define GPU_T_Q6K_PACKED 114

/*
 * Benchmark and check seam for the Q4_K, Q5_K, Q6_K and IQ4_XS products of
 * gpu_matvec_q8 up to the step rows and of gpu_moe_matvec's experts
 * grouped by expert: GPU_QKT_OFF (the default: the
 * CUDA-core kernel, 16 input rows a launch), GPU_QKT_ON (the tensor-core
 * kernel of cuda/matvec_qkt.cuh for every m, up to 32 input rows a
 * launch) or GPU_QKT_AUTO (the tensor-core kernel from a type's few input
 * rows, matvec_qk.cu's qkt_auto_m: 3 for Q4_K and packed Q6_K, 5 for Q6_K,
 * 12 for Q5_K and IQ4_XS; up to 32 a launch past 16).  All three give the same bits (the
 * tensor-core kernel reproduces the CUDA-core one at the lanes gpu_tune_qk
 * picks, 4 or 8; IQ4_XS's one form at 8).  The grouped experts take it
 * under ON and AUTO alike; the per-slot experts and IQ4_XS's prompts (its
 * GEMM) as they are.  A graph recorded before a change is stale.
 */
enum { GPU_QKT_OFF = 0, GPU_QKT_ON = 1, GPU_QKT_AUTO = 2 };
int	gpu_tune_qkt(struct gpu *g, int how);

/*
 * Benchmark and check seam for the Q8_0, NVFP4, Q4_1, Q5_1, Q4_0 and Q5_0
 * products of gpu_matvec_q8 (n <= 16): GPU_MV8_AUTO (the default: weights
 * staged through shared memory where that was measured faster, else read in
 * place; Q8_0 and NVFP4 from 12 input rows by GPU_MV8_TC's kernel, the
 * same bits, where measured faster; Q4_0 and Q5_0 likewise, unmeasured),
 * GPU_MV8_PLACE (always in place, never
 * the tensor-core kernel: the reference kernel-check holds that one to)
 * or GPU_MV8_STAGED (staged
 * wherever the rows allow it: a multiple of 32 blocks, 16-byte aligned):
 * these three give the same bits.  GPU_MV8_LANE2: Q8_0 by two lanes a
 * block (loads of x closer together; the other types as GPU_MV8_AUTO),
 * batch-invariant too but another order of float sums (it may differ in
 * the last bits).  NVFP4 has one form (16-value sub-blocks, lane l taking
 * sub-blocks l and l + 32 of each 64), Q4_0 and Q5_0 one (two lanes a
 * block, as GPU_MV8_LANE2's Q8_0).  GPU_MV8_LOADS, for the bench's
 * bound alone: NVFP4's kernel at m = 1 or 4 with its loads as they are and
 * an xor fold in place of the arithmetic (the sums are garbage; NVFP4 at
 * another m fails; rows not 8-byte aligned and the other types run as
 * GPU_MV8_AUTO).  GPU_MV8_TC: Q8_0, Q4_0, Q5_0 (two lanes a block, the
 * default's layout) and NVFP4 by int8 tensor cores with the default's bits
 * (cuda/matvec_q8tc.cuh; rows less aligned than 2 bytes, NVFP4's than 4, by
 * the default's kernel), and, with the GEMM off (GPU_MMQ_OFF), up
 * to 32 input rows a launch where the others take 16 (the same bits as
 * launches of 16: batch-invariant); the other types as GPU_MV8_AUTO.
 */
enum { GPU_MV8_AUTO = 0, GPU_MV8_PLACE = 1, GPU_MV8_STAGED = 2, GPU_MV8_LANE2 = 3,
	GPU_MV8_LOADS = 4, GPU_MV8_TC = 5 };
int	gpu_tune_mv8(struct gpu *g, int how);

/*
 * The step-row limit: the most input rows (n, m) that the products and
 * attention still run by the batch-invariant decode kernels, where more
 * take the prompt kernels (the GEMMs of gpu_matmul and gpu_matmul_q8,
 * IQ4_XS's mmq_iq4.cu, flash attention), whose bits differ.  16
 * (GPU_MATVEC_MAX_ROWS, a gpu's default) or GPU_STEP_ROWS_MAX (the CUDA
 * backend's: backend_cuda_open sets it).  Above 16 the
 * decode kernels run in launches of at most 16 rows (their compile-time
 * bound), or of up to 32 by k_mv8t for Q8_0, NVFP4, Q4_0 and Q5_0 where
 * GPU_MV8_AUTO
 * takes it (and by k_mvkt for the K-quants where gpu_tune_qkt does):
 * gpu_matmul (n <= the limit: gpu_matvec 16 rows at a time),
 * gpu_matvec_q8 and its fused forms (n <= the limit: never the GEMM; the
 * K-quants and IQ4_XS 16 rows a launch), so a row has the bits of a
 * launch of <= 16 for every n up to the limit.  A graph recorded before
 * a change is stale.  gpu_can_matvec_q8_step: gpu_can_matvec_q8_rows
 * with the K-quants, Q4_0 and Q5_0 taken up to the limit.
 */
#define GPU_STEP_ROWS_MAX 32
int	gpu_tune_step_rows(struct gpu *g, int rows);
int	gpu_step_rows(const struct gpu *g);
int	gpu_can_matvec_q8_step(const struct gpu *g, int t, int64_t n);

/*
 * x[n][ne0] (ne0 a multiple of 256) quantized to Q8_K by the kernel
 * gpu_matvec_q8 uses for the K-quants, written to d_out in lib/quant's
 * block layout (n * ne0 / 256 blocks of 292 bytes: d f32, qs[256] int8,
 * bsums[16] int16): the check that it equals quant_quantize_act's bytes.
 * Uses the scratch buffer.
 */
int	gpu_quantize_q8k(struct gpu *g, const float *d_x, int64_t n, int64_t ne0, void *d_out);

/*
 * The prefill GEMM (cuda/mmq.cu) on activations already quantized as
 * gpu_matvec_q8 quantizes them: q[n][ne0] int8 (16-byte aligned), dx[n][ne0/32]
 * the block scales; y[n][rows] = W . x, W of type Q8_0 or NVFP4, each
 * (sub-)block's integer dot scaled as quant_vec_dot scales it (the CPU's
 * numerics; another order of float sums than the matvec kernel, so not
 * batch-invariant with it), scaled by *d_scale when not NULL.  Any n;
 * gpu_matvec_q8 and the two below take it for n > GPU_MATVEC_MAX_ROWS.
 * Deterministic (no atomics).  gpu_can_matmul_q8: 1 for Q8_0 and NVFP4.
 */
int	gpu_can_matmul_q8(int t);
int	gpu_matmul_q8(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
	    const int8_t *d_q, const float *d_dx, int64_t n, float *d_y, const float *d_scale);

/*
 * The prefill products' kernel, gpu_matmul_q8's: GPU_MMQ_MMA (the default,
 * tensor cores), GPU_MMQ_DP4A (the same bits by dp4a), GPU_MMQ_OFF
 * (n > 16 runs the matvec kernel 16 rows at a time, as before),
 * GPU_MMQ_MMA1 (the first tensor-core kernel, unpipelined 64 x 64 tiles)
 * or GPU_MMQ_MMAF (GPU_MMQ_MMA with the scale products by multiplications
 * instead of tf32 mma): all give the same bits; kept to time against.
 * GPU_MMQ_BF16: not the CPU's numerics but cuBLAS on bf16 operands, the
 * int8 x's values (q times its block's scale) and the weights, each
 * rounded to bf16, with fp32 sums on tensor cores; it also moves
 * gpu_matmul of the other quantized types from fp32 to bf16 operands, and
 * a prompt's experts (gpu_moe_matvec) to a bf16 GEMM of their own.
 * IQ4_XS's prefill in gpu_matvec_q8 (x as Q8_K, cuda/mmq_iq4.cu) takes the
 * same kinds: MMA, MMAF and MMA1 its one tensor-core GEMM (the CPU's
 * numerics: per super-block the integer sum of the sub-blocks' scaled
 * dots, then (d * dy) times it, as quant_vec_dot's portable code), DP4A
 * its twin (the same bits), OFF the decode kernel 16 rows at a time, BF16
 * cuBLAS on bf16 operands (x's values d * q as lib/quant dequantizes Q8_K).
 */
enum {
	GPU_MMQ_MMA = 0, GPU_MMQ_DP4A = 1, GPU_MMQ_OFF = 2, GPU_MMQ_MMA1 = 3, GPU_MMQ_MMAF = 4,
	GPU_MMQ_BF16 = 5
};
int	gpu_tune_mmq(struct gpu *g, int kernel);
/*
 * GPU_MMQ_BF16 (and gpu_matmul's bf16 path) with on = 1: each quantized
 * weight the bf16 GEMM multiplies is dequantized to bf16 once, by the
 * first call, into a copy of its own (2 bytes a weight) that later calls
 * read instead of dequantizing a tile at a time: the same bits.  The copy
 * lives until gpu_free of the weight or on = 0 (which frees them all); a
 * weight must not be written while it has one.  Without room for a copy
 * a call dequantizes as before.  gpu_mirrors: the copies and (bytes) their
 * device memory.
 */
int	gpu_tune_mirror(struct gpu *g, int on);
int	gpu_mirrors(const struct gpu *g, size_t *bytes);

/*
 * nw products of the same x (the projections after one RMSNorm, gate and
 * up): x quantized once, then product i is gpu_matvec_q8(t[i], d_w[i],
 * rows[i], ...) into d_y[i], scaled by d_scale[i] (d_scale or an entry may
 * be NULL).  Bit-identical to nw gpu_matvec_q8 calls, in fewer launches:
 * one quantization, and for n <= 16 up to four weights of one type that
 * follow each other in one product launch (each row computed as alone).
 */
int	gpu_matvec_q8_multi(struct gpu *g, int nw, const int *t, const void *const *d_w,
	    const int64_t *rows, int64_t ne0, const float *d_x, int64_t n, float *const *d_y,
	    const float *const *d_scale);

/*
 * gpu_matvec_q8_multi of RMSNorm(x) (weight d_nw, not NULL): the norm and
 * the quantization of x run as one kernel (with a K-quant among the
 * weights the kernel also writes the normed x to scratch, and Q8_0/Q8_1
 * weights beside them get a second quantization kernel), bit-identical to
 * gpu_rmsnorm then gpu_matvec_q8_multi.  ne0 at most 16384; d_x and d_nw 16-byte
 * aligned, else -1 (the caller takes the two calls).  Batch-invariant.
 */
int	gpu_rmsnorm_matvec_q8_multi(struct gpu *g, const float *d_x, const float *d_nw,
	    float eps, int nw, const int *t, const void *const *d_w, const int64_t *rows,
	    int64_t ne0, int64_t n, float *const *d_y, const float *const *d_scale);
/*
 * gpu_rmsnorm_matvec_q8_multi with the op before the norm or after it in
 * the same kernel, each bit-identical to the kernels it replaces: d_t not
 * NULL: x += t first, the sum written back to x (gpu_add, the residual
 * add); d_z not NULL: each row of d (a head; d divides ne0) is normed on
 * its own and multiplied by silu(z) as gpu_rmsnorm_gated does, the result
 * written to x.  Without d_z, d == ne0.  d a multiple of 32, at most
 * 16384; d_x, d_t, d_z, d_nw 16-byte aligned; else -1.
 */
int	gpu_rmsnorm_matvec_q8_ex(struct gpu *g, float *d_x, const float *d_t,
	    const float *d_z, const float *d_nw, int64_t d, float eps, int nw, const int *t,
	    const void *const *d_w, const int64_t *rows, int64_t ne0, int64_t n,
	    float *const *d_y, const float *const *d_scale);
/*
 * gpu_rmsnorm_matvec_q8_multi of x after x = (x + rmsnorm(a) * wa) * s in
 * the same kernel (wa NULL: no weight; s 1: no product), x written back:
 * bit-identical to gpu_norm_residual (a and wa alone) then
 * gpu_rmsnorm_matvec_q8_multi.  a is read only.  ne0 a multiple of 32, at
 * most 16384; d_x, d_a, d_wa, d_nw 16-byte aligned; else -1.
 */
int	gpu_norm_residual_matvec_q8(struct gpu *g, float *d_x, const float *d_a,
	    const float *d_wa, float s, const float *d_nw, float eps, int nw, const int *t,
	    const void *const *d_w, const int64_t *rows, int64_t ne0, int64_t n,
	    float *const *d_y, const float *const *d_scale);
/*
 * gpu_matvec_q8 of x after an elementwise op that the quantizing kernel
 * runs first (the result written back to x, bit-identical to the op's own
 * kernel): GPU_PRE_SWIGLU x = silu(x) * u (u [n][ne0], gpu_swiglu);
 * GPU_PRE_GEGLU x = gelu_tanh(x) * u (u [n][ne0], gpu_geglu's);
 * GPU_PRE_SIGMOID x *= sigmoid(gate), x [n][ne0] a row of heads of hd (a
 * multiple of 32 dividing ne0), the gate of head row h (of all n * ne0 /
 * hd) at u + h * ldu (gpu_sigmoid_mul).  hd, ldu unused for SWIGLU and GEGLU.
 * The K-quants and IQ4_XS (Q8_K activations) take SWIGLU and GEGLU.
 */
enum { GPU_PRE_SWIGLU = 1, GPU_PRE_SIGMOID = 2, GPU_PRE_GEGLU = 3 };
int	gpu_matvec_q8_pre(struct gpu *g, int pre, float *d_x, const float *d_u, int hd,
	    int64_t ldu, int t, const void *d_w, int64_t rows, int64_t ne0, int64_t n,
	    float *d_y, const float *d_scale);

/*
 * Dense product for prefill: y[n][rows] = W[rows][ne0] . x[n][ne0] for any n,
 * W dequantized to fp32 tiles in scratch and multiplied with cuBLAS
 * (fp32 compute); under GPU_MMQ_BF16, quantized W (not F32, F16, BF16)
 * and x rounded to bf16 (nearest, ties to even) and multiplied on tensor
 * cores (fp32 sums).
 * n <= GPU_MATVEC_MAX_ROWS uses gpu_matvec instead; a type with no
 * gpu_matvec kernel (gpu_can_matvec 0: Q5_1, GPU_T_Q6K_PACKED) takes
 * gpu_matvec_q8 as far as that goes (gpu_can_matvec_q8_step).
 */
int	gpu_matmul(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
	    const float *d_x, int64_t n, float *d_y, const float *d_scale);

/*
 * The product of a half-precision weight as llama.cpp takes it (the vision
 * towers', lib/backend.h backend_matmul_half): y[n][rows] = W . x with x
 * rounded to ht (T_BF16 30 or T_F16 1: ggml's type numbers; nearest, ties
 * to even, as lib/quant's quant_f32_to_bf16 / quant_f32_to_f16) and W of
 * type t, either ht itself (used in place) or F32 holding values of ht
 * (rounded to ht a tile at a time: exactly), cublasGemmEx on ht operands
 * with fp32 sums (CUBLAS_COMPUTE_32F, tensor cores) into fp32 y, for any
 * n >= 1; then y *= *d_scale when not NULL.  ne0 a multiple of 32, d_w
 * 16-byte and d_x 8-byte aligned.  Not batch-invariant: cuBLAS picks its
 * kernel by n.  0, or -1 with the reason.
 */
int	gpu_matmul_half(struct gpu *g, int t, int ht, const void *d_w, int64_t rows,
	    int64_t ne0, const float *d_x, int64_t n, float *d_y, const float *d_scale);

/* Dequantize rows rows of ne0 elements of type t (ne0 a multiple of the
 * block) to fp32, d_dst[rows][ne0]. */
int	gpu_dequantize(struct gpu *g, int t, const void *d_src, int64_t rows, int64_t ne0,
	    float *d_dst);
/* The same values rounded to bf16 (to nearest, ties to even), as uint16_t
 * bit patterns; d_dst 16-byte aligned. */
int	gpu_dequantize_bf16(struct gpu *g, int t, const void *d_src, int64_t rows, int64_t ne0,
	    uint16_t *d_dst);
/* Both of rows r0 .. r0 + rows - 1 of the weight that starts at d_src: a
 * packed Q6_K's rows are no byte ranges (GPU_T_Q6K_PACKED); gpu_matmul's
 * tiles. */
int	gpu_dequantize_rows(struct gpu *g, int t, const void *d_src, int64_t r0, int64_t rows,
	    int64_t ne0, float *d_dst);
int	gpu_dequantize_rows_bf16(struct gpu *g, int t, const void *d_src, int64_t r0,
	    int64_t rows, int64_t ne0, uint16_t *d_dst);

/* Embedding lookup: out[i][ne0] = dequantize(table row ids[i]) for i < n;
 * d_ids holds n int32 row numbers (< n_rows, not checked on the device; a
 * negative one, a chain's failed pick, reads row 0). */
int	gpu_get_rows(struct gpu *g, int t, const void *d_table, int64_t ne0,
	    const int32_t *d_ids, int n, float *d_out);

/*
 * RMSNorm of rows rows of d elements: y = x / sqrt(mean(x^2) + eps) * w.
 * Rows are ldx / ldy floats apart (in place allowed); w is NULL or [d].
 * Per-head norm: rows = tokens * heads, d = head_dim.  The gated form
 * multiplies by silu(z) after the weight (x, z, y contiguous [rows][d]).
 */
int	gpu_rmsnorm(struct gpu *g, const float *d_x, int64_t ldx, const float *d_w,
	    float *d_y, int64_t ldy, int rows, int d, float eps);
int	gpu_rmsnorm_gated(struct gpu *g, const float *d_x, const float *d_z,
	    const float *d_w, float *d_y, int rows, int d, float eps);

/*
 * lib/backend.h's backend_norm_residual on rows rows of d (all contiguous):
 * u = rmsnorm(a) * wa (+ rmsnorm(b) * wb), u = rmsnorm(u) * w2 (w2 not
 * NULL), x += u, x *= s (s != 1), in one kernel of a block a row where d,
 * the pointers and d / 4 suit gpu_rmsnorm's float4 kernel (d <= 16384),
 * with its bits: each norm's sum as that kernel's, each step one rounding;
 * else as the plain kernels (a and b normed in place).
 */
/* backend_add_rmsnorm: x += t, y = rmsnorm(x) * w (rows rows of d, contiguous),
 * one kernel where the rows suit gpu_rmsnorm's float4 kernel, its bits. */
int	gpu_add_rmsnorm(struct gpu *g, float *d_x, const float *d_t, const float *d_w,
	    float *d_y, float eps, int rows, int d);
/* backend_rmsnorm_pair: y1 = rmsnorm(x) * w1 (* s1 where s1 != 1), y2 =
 * rmsnorm(x) * w2, one kernel where the rows suit gpu_rmsnorm's float4
 * kernel (its bits: one sum for both), else the plain kernels. */
int	gpu_rmsnorm_pair(struct gpu *g, const float *d_x, const float *d_w1, float s1, float *d_y1,
	    const float *d_w2, float *d_y2, float eps, int rows, int d);
int	gpu_norm_residual(struct gpu *g, float *d_x, float *d_a, const float *d_wa,
	    float *d_b, const float *d_wb, const float *d_w2, float eps, float s, int rows,
	    int d);

/* L2 norm of each row: y = x / max(sqrt(sum x^2), eps) (sum in double). */
int	gpu_l2norm(struct gpu *g, const float *d_x, int64_t ldx, float *d_y,
	    int64_t ldy, int rows, int d, float eps);

/*
 * NeoX RoPE in place on x[n][heads][ld] (each head's first n_rot of
 * head_dim dims; ld = floats between heads): for i < n_rot/2, the pair
 * (i, i + n_rot/2) turns by pos[t] * base^(-2i/n_rot).  d_pos: n int32.
 */
int	gpu_rope_neox(struct gpu *g, float *d_x, int n, int heads, int64_t ld,
	    int n_rot, const int32_t *d_pos, float base);

/* Elementwise on n floats: out = silu(gate) * up; out = a + b; out = x * sigmoid(gate). */
int	gpu_swiglu(struct gpu *g, const float *d_gate, const float *d_up, float *d_out, int64_t n);
int	gpu_add(struct gpu *g, const float *d_a, const float *d_b, float *d_out, int64_t n);

/* out[r][j] = x[r][j] * sigmoid(gate[r][j]) for rows rows of d, rows ldx /
 * ldg / ldo floats apart (the gate half of a q+gate projection). */
int	gpu_sigmoid_mul(struct gpu *g, const float *d_x, int64_t ldx, const float *d_gate,
	    int64_t ldg, float *d_out, int64_t ldo, int rows, int d);

/*
 * Causal depthwise conv1d with state, then SiLU, over T new tokens:
 * x[T][C], w[C][K] (ggml ssm_conv1d, ne0 = K), state[K-1][C] (the last K-1
 * inputs, oldest first; updated in place), out[T][C].  K <= 8.
 */
int	gpu_conv1d_silu(struct gpu *g, const float *d_x, int T, int C, int K,
	    const float *d_w, float *d_state, float *d_out);

/*
 * Gated delta rule, T tokens in sequence (decode: T = 1).  State
 * S[hv][sk][sv] fp32, updated in place.  q, k [T][hk][sk] (already
 * L2-normed), v [T][hv][sv], g [T][hv] (log decay), beta [T][hv] (already
 * sigmoid), out [T][hv][sv].  V head h uses K head h % hk.  Per token:
 * kv = S^T k; delta = (v - e^g kv) beta; S = e^g S + k delta^T;
 * out = S^T q * scale.  Any sk and sv: sk 64 or 128 with sv <= 256 keep
 * the state in registers, any other shape reads and writes it in memory
 * each token (slow; no model calls this: backend_cuda_gdn.cu has its own).
 */
int	gpu_gdn_step(struct gpu *g, float *d_S, const float *d_q, const float *d_k,
	    const float *d_v, const float *d_g, const float *d_beta, float *d_out,
	    int T, int hk, int hv, int sk, int sv, float scale);

/* The longest head every attention function below takes (Gemma-4's global
 * layers: 512; its sliding ones and every other model: 256 or less). */
#define GPU_HEAD_MAX 512

/*
 * Attention of nq query rows over a KV cache (split-K flash-decoding).
 * q[nq][nh][hd], cache K, V [n_ctx][nkv][hd] (positions 0.. filled),
 * query t sees positions 0..pos0+t (causal); head h uses kv head
 * h / (nh / nkv).  out[nq][nh][hd].  hd <= GPU_HEAD_MAX, nq <=
 * GPU_MATVEC_MAX_ROWS.
 * Splits of 64 positions, one block each (scratch: nq * nh * splits *
 * (hd + 2) floats).
 */
int	gpu_attention(struct gpu *g, const float *d_q, const float *d_k, const float *d_v,
	    float *d_out, int nq, int nh, int nkv, int hd, int pos0, float scale);

/*
 * gpu_attention at pos0 = *d_pos (one int32 in device memory, read when
 * the kernels run: a recorded graph replays at any position).  n_ctx: the
 * cache's rows (pos0 + nq <= n_ctx); the grid covers all of them and the
 * blocks past pos0 + nq stop at once.  Bit-identical to gpu_attention at
 * the same position.
 */
int	gpu_attention_dpos(struct gpu *g, const float *d_q, const float *d_k, const float *d_v,
	    float *d_out, int nq, int nh, int nkv, int hd, const int32_t *d_pos, int n_ctx,
	    float scale);

/*
 * gpu_attention's result for a prompt (nq rows, any number) at pos0, by
 * flash attention (cuda/attn_prefill.cuh): blocks of 32 or 64 query vectors
 * of one KV head, K and V tiles in shared memory, no scratch.  hd a
 * multiple of 4, 4..GPU_HEAD_MAX (past 256: 199 KB of shared memory, a
 * block a multiprocessor); the pointers 16-byte aligned.  Its own order of
 * sums: a row agrees with gpu_attention's within float tolerance, not bit
 * for bit (decode and verify stay on gpu_attention).  full: every row sees
 * every key of the call (positions < pos0 + nq: a vision tower's whole
 * image), not causal.  window > 0 (causal only): a sliding window, the row
 * at position i sees the keys j with i - window < j <= i (gemma4's and
 * step35's sliding layers); each block walks only its rows' windows, and a
 * row's sums do not depend on the block or the call it is in.  ring > 0
 * (with a window, window + nq - 1 <= ring): d_k, d_v are rings of ring
 * rows, position j in row j % ring, the same bits as in row j.
 */
int	gpu_attention_prefill(struct gpu *g, const float *d_q, const float *d_k,
	    const float *d_v, float *d_out, int nq, int nh, int nkv, int hd, int pos0,
	    float scale, int full, int window, int ring);

/*
 * gpu_attention (d_pos NULL, at pos0) or gpu_attention_dpos (at *d_pos,
 * a context of n_ctx positions) with a sliding window: window > 0, the
 * query at position i sees the keys j with i - window < j <= i only (0:
 * all before it, the two functions above).  The same kernels: a split of
 * 64 positions sums only the positions it holds inside the window, the
 * splits before it stop at once; each row the same bits in any batch.
 * ring > 0 (window 1..ring): position j is in row j % ring of d_k and d_v,
 * the same bits as in row j.
 */
int	gpu_attention_window(struct gpu *g, const float *d_q, const float *d_k, const float *d_v,
	    float *d_out, int nq, int nh, int nkv, int hd, int pos0, const int32_t *d_pos,
	    int n_ctx, float scale, int window, int ring);

/*
 * gpu_attention_window at pos0 (window 0: none) with the rows' last keys
 * and a ring cache (lib/backend.h's backend_attn.hi and .ring): d_hi NULL,
 * or query t also sees the later keys up to d_hi[t] (device memory, nq
 * int32, pos0 + t <= d_hi[t] < n_keys; n_keys >= pos0 + nq sizes the
 * splits), the window still bounding it below; ring > 0: position j is in
 * row j % ring of d_k and d_v (a window of 1..ring).  The same kernels and
 * splits: a row's bits are those of its keys in any batch, and those of
 * the same keys in rows of their own.
 */
int	gpu_attention_hi(struct gpu *g, const float *d_q, const float *d_k, const float *d_v,
	    float *d_out, int nq, int nh, int nkv, int hd, int pos0, float scale, int window,
	    const int32_t *d_hi, int n_keys, int ring);

/*
 * gpu_attention (d_pos NULL) of n sequences in two launches each
 * GPU_ATT_SEQS of them: sequence i's rows (1..GPU_MATVEC_MAX_ROWS, or 0:
 * none) of d_q and d_out ([rows][nh*hd], contiguous) follow sequence
 * i-1's, at positions pos0 .., against its caches k and v.  Bit for bit
 * each sequence's own gpu_attention call at its rows' addresses, when
 * the alignment of d_q's rows, k and v over a launch gives the kernels
 * each call would pick (the caller checks: 16 bytes, 8, or less).
 */
#define GPU_ATT_SEQS 32
struct gpu_att_seq {
	const float *k, *v;
	int	rows, pos0;
};
int	gpu_attention_seqs(struct gpu *g, const float *d_q, float *d_out, int n,
	    const struct gpu_att_seq *sq, int nh, int nkv, int hd, float scale);

/*
 * A mixture of experts (lib/backend.h's backend_moe_*): the stacked
 * experts' products, the routers, the activations and the weighted sum.
 *
 * gpu_moe_matvec: y[s][rows] = W_e . x[s / per] for slots s < ns, e =
 * ids[s] (int32, device memory, read when the kernels run: a recorded
 * graph replays any routing), W a stack of n_exp experts of rows rows each
 * (expert e's are rows e * rows .. of d_w: type t, laid out as gpu_matvec
 * and gpu_matvec_q8 take it), x[nx][ne0] contiguous, 16-byte aligned.
 * Slot s's row is the bits of the one-row product of x[s / per] with
 * expert e alone (gpu_matvec_q8 for its types, gpu_matvec for the others)
 * whatever ns and the other slots are: batch-invariant, slot by slot or
 * grouped by expert (gpu_tune_moe_group).  Under GPU_MMQ_BF16 with nx
 * more than gpu_step_rows input rows (a prompt), a quantized type
 * (Q8_0, Q4_0, Q4_1, Q5_0, NVFP4, the K-quants, packed Q6_K, IQ4_NL,
 * IQ4_XS) and rows a multiple of 64: the prompt GEMM instead (matvec.cu's
 * k_moe_gemm), x and the dequantized weights rounded to bf16, fp32 sums
 * on tensor cores: other bits, but still each slot's row a function of its
 * own x row and expert alone.  An id outside [0, n_exp) gives a NaN row.
 * Uses the scratch buffer (the quantized x; grouped: the slots' order,
 * tiles and gathered input rows too; the GEMM: the order, tiles and the
 * gathered bf16 rows).
 */
int	gpu_moe_matvec(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
	    int n_exp, const int32_t *d_ids, int ns, int per, const float *d_x, int64_t nx,
	    float *d_y, const float *d_scale);
/*
 * gpu_moe_matvecs: gpu_moe_matvec for nw stacks d_w[k] of one type and
 * shape (an FFN's gate and up) on the same x and ids, each into d_y[k] with
 * its d_scale[k]: each the bits of its own gpu_moe_matvec, the quantized x
 * (or the prompt GEMM's bf16 rows), the grouping and the gathered rows made
 * once for all.
 */
int	gpu_moe_matvecs(struct gpu *g, int t, int nw, const void *const *d_w, int64_t rows,
	    int64_t ne0, int n_exp, const int32_t *d_ids, int ns, int per, const float *d_x,
	    int64_t nx, float *const *d_y, const float *const *d_scale);

/*
 * gpu_moe_matvec_pre: x = silu(x) * u first (GPU_PRE_SWIGLU: x, u [nx][ne0]
 * contiguous; the result written back to x, gpu_moe_act's bits), then
 * gpu_moe_matvec of x: the op in the kernel that quantizes x where the
 * weights take int8 activations of one form (gpu_matvec_q8_pre's), else
 * gpu_moe_act's own kernel first.  The same bits either way.
 */
int	gpu_moe_matvec_pre(struct gpu *g, int pre, float *d_x, const float *d_u, int t,
	    const void *d_w, int64_t rows, int64_t ne0, int n_exp, const int32_t *d_ids, int ns,
	    int per, int64_t nx, float *d_y, const float *d_scale);

/*
 * gpu_tune_moe_group: how gpu_moe_matvec runs the slots, the same bits
 * each way (the grouped kernels run the per-slot kernels' row functions at
 * 16 rows; cuda/gpu_impl.cuh's moe_group): GPU_MOE_GROUP_OFF a block per
 * (slot, weight rows), each slot reading its expert's whole matrix;
 * GPU_MOE_GROUP_ALL the slots sorted by expert on the device and a block
 * per (tile of up to 16 slots of one expert, weight rows), a weight row
 * read once a tile (Q8_0, NVFP4, Q4_0, Q5_0: up to 32 slots, gpu_tune_moe_tc);
 * GPU_MOE_GROUP_AUTO (a gpu's default) grouped where a call's slots share
 * experts (at least 2 input rows and max(n_exp, 64) slots), per slot
 * elsewhere; a stack of more than GPU_MOE_GROUP_EXPERTS experts per slot
 * always.  A graph recorded before a change is stale.
 * 0, or -1 for another mode.
 */
enum { GPU_MOE_GROUP_OFF, GPU_MOE_GROUP_AUTO, GPU_MOE_GROUP_ALL };
#define GPU_MOE_GROUP_EXPERTS 4096	/* (the buckets' counts in shared memory) */
int	gpu_tune_moe_group(struct gpu *g, int mode);

/*
 * gpu_tune_moe_tc: which kernels the grouped products of Q8_0 (two lanes a
 * block, the default layout), Q4_0, Q5_0 and NVFP4 experts run, the same bits each way
 * (cuda/matvec_q8tc.cuh's k_moe_mv8t, the tensor-core kernel of
 * GPU_MV8_TC on up to 32 of one expert's rows, against matvec_q8.cu's
 * k_moe_mv8g on up to 16): GPU_MOE_TC_OFF k_moe_mv8g for every tile;
 * GPU_MOE_TC_ALL k_moe_mv8t for every tile; GPU_MOE_TC_AUTO (a gpu's
 * default) k_moe_mv8t for an expert's rows in runs of 9 or more, k_moe_mv8g
 * for fewer.  Rows less aligned than k_mv8t takes (2 bytes, NVFP4 4)
 * and the other types take k_moe_mv8g (or their family's kernel) every
 * way.  A graph recorded before a change is stale.  0, or -1 for another
 * mode.
 */
enum { GPU_MOE_TC_OFF, GPU_MOE_TC_AUTO, GPU_MOE_TC_ALL };
int	gpu_tune_moe_tc(struct gpu *g, int mode);

/*
 * gpu_moe_route: for row r < m of x (rows ldx floats apart, n <= 4096
 * experts), the router's picks into ids[r][k] (int32) and weights into
 * w[r][k], in lib/backend_cpu_moe.c's order of operations.
 * GPU_ROUTE_SOFTMAX: p = softmax(x[r]) (exp(x - max) by expf, summed in
 * index order, each divided by the sum), the k largest p (the lower id on
 * ties), weights p / (their sum in pick order); bias, norm and scale
 * unused.  GPU_ROUTE_SIGMOID: p = sigmoid(x[r]), the k largest p + bias
 * (bias: [n] device floats, NULL for none), weights (norm ? p / their sum
 * : p) * scale.  Then, d_es not NULL, each weight times d_es[its id] (n
 * device floats: gpu_moe_scale's product, fused).  A pick that finds no
 * key (NaN keys) is id -1 with a NaN weight.
 */
enum { GPU_ROUTE_SOFTMAX = 0, GPU_ROUTE_SIGMOID = 1 };
int	gpu_moe_route(struct gpu *g, int mode, const float *d_x, int64_t ldx, int m, int n, int k,
	    const float *d_bias, int norm, float scale, const float *d_es, int32_t *d_ids,
	    float *d_w);
/* y[r][i] = sum over j < k, in order, of w[r][j] * d[r*k + j][i] (each
 * product and sum rounded), i < n, y's rows ldy floats apart. */
int	gpu_moe_combine(struct gpu *g, const float *d_d, int m, int k, int64_t n, const float *d_w,
	    float *d_y, int64_t ldy);
/* gpu_moe_combine, then (d_x not NULL) y[r][i] += x[r][i] (d_g NULL: gpu_add's sum)
 * or += sigmoid(g[r * ldg]) * x[r][i] (gpu_add_gated's), x [m][n]: those
 * kernels' bits, in the one kernel. */
int	gpu_moe_combine_add(struct gpu *g, const float *d_d, int m, int k, int64_t n,
	    const float *d_w, float *d_y, int64_t ldy, const float *d_x, const float *d_g,
	    int64_t ldg);
/*
 * f[s][i] (s < ns, i < nf): GPU_MOE_SWIGLU silu(a[s][i]) * b[s][i], with
 * limit L > 0 min(silu(a), L) * clamp(b, -L, L); GPU_MOE_GEGLU
 * gelu_tanh(a[s][i]) * a[s][nf + i] (a's rows 2 nf long, b unused).
 */
enum { GPU_MOE_SWIGLU = 0, GPU_MOE_GEGLU = 1 };
int	gpu_moe_act(struct gpu *g, int act, const float *d_a, const float *d_b, int64_t ns,
	    int64_t nf, float limit, float *d_f);
/* w[i] *= s[ids[i]], i < n (the per-expert scale on the routing weights; an id -1 left). */
int	gpu_moe_scale(struct gpu *g, float *d_w, const int32_t *d_ids, int64_t n, const float *d_s);
/* y[r][i] += sigmoid(g[r * ldg]) * x[r][i] (the shared expert's gate), r < rows, i < n. */
int	gpu_add_gated(struct gpu *g, float *d_y, int64_t ldy, const float *d_x, int64_t ldx,
	    const float *d_g, int64_t ldg, int rows, int64_t n);

/*
 * Gemma-4's and step35's elementwise ops (lib/backend.h's backend_geglu,
 * _softcap, _scale, _swiglu_limit, _head_gate; cuda/moe.cu): y[r][i] =
 * gelu_tanh(g[r][i]) * u[r][i] (strided rows, y may be g or u); x = cap *
 * tanh(x / cap); x *= s; y = min(silu(g), L) * clamp(u, -L, L) (L 0:
 * silu(g) * u); x[r][h hd + i] *= sigmoid(g[r ldg + h]).
 */
int	gpu_geglu(struct gpu *g, const float *d_g, int64_t ldg, const float *d_u, int64_t ldu,
	    float *d_y, int64_t ldy, int rows, int64_t n);
int	gpu_softcap(struct gpu *g, float *d_x, int64_t n, float cap);
int	gpu_mul_scalar(struct gpu *g, float *d_x, int64_t n, float s);
/* x = x < lo ? lo : x > hi ? hi : x (backend_clamp: NaN stays NaN). */
int	gpu_clamp(struct gpu *g, float *d_x, int64_t n, float lo, float hi);
/* DFlash2's grouped dynamic causal convolution (backend_dconv: its order, bit for bit):
 * y[t][c] = sum over o < K, o <= t of base[o][c] x[t-o][c] + dyn[t][o][c / group] x[t-o][c]
 * (dyn rows ldd apart); y not overlapping x. */
int	gpu_dconv(struct gpu *g, const float *d_x, int m, int n, const float *d_dyn, int64_t ldd,
	    int K, int group, const float *d_base, float *d_y);
int	gpu_swiglu_limit(struct gpu *g, const float *d_g, const float *d_u, float *d_y, int64_t n,
	    float limit);
int	gpu_head_gate(struct gpu *g, float *d_x, int64_t ldx, const float *d_g, int64_t ldg,
	    int rows, int nh, int hd);

/* idx[r] = the index of the largest finite value of x[r][0..n) (the
 * first on ties, -0 = +0), -1 when none is finite. */
int	gpu_argmax(struct gpu *g, const float *d_x, int rows, int64_t n, int32_t *d_idx);
/* out[r] = map[i] for the i of the largest x[r][i] (r < rows, rows ldx
 * apart, i < n) that is not NaN or -inf, ties to the lowest map[i]; -1
 * when none (lib/ranks.c ranks_argmax's pick, a masked draft head's). */
int	gpu_argmax_map(struct gpu *g, const float *d_x, int64_t ldx, int rows, int n,
	    const int32_t *d_map, int32_t *d_out);

/* The most candidates gpu_topk takes a row. */
#define GPU_TOPK_MAX	1024

/*
 * Row r of x (rows ldx floats apart, n used): of its finite values, the
 * k (1..GPU_TOPK_MAX) with the largest x[i] / temp (IEEE division, -0 as
 * +0; the lower i first on ties), most likely first, into val[r][k]
 * (x[i] itself) and id[r][k]; past the row's finite values id -1 and
 * val NaN: lib/sample.c's sample_top.  scratch: gpu_topk_scratch(rows,
 * k) bytes of device memory, 8-byte aligned.
 */
int	gpu_topk(struct gpu *g, const float *d_x, int rows, int64_t ldx, int64_t n, int k,
	    float temp, float *d_val, int32_t *d_id, void *d_scratch);
size_t	gpu_topk_scratch(int rows, int k);

/*
 * *id = the draw lib/sample.c's sample_next makes from the row x[n] with
 * temp > 0, top_p, min_p and no top-k (a draw's penalties put on x
 * before, gpu_penalize), for the uniform u in
 * [0, 1) (sample_uniform's, of the token stream): the same id, bit for bit
 * (the sampler's integer weights, lib/sample.h); -1 when no value is
 * finite.  id is device memory.  scratch: gpu_draw_scratch() bytes of
 * device memory, 8-byte aligned.
 */
int	gpu_draw(struct gpu *g, const float *d_x, int64_t n, float temp, float top_p,
	    float min_p, double u, int32_t *d_id, void *d_scratch);
size_t	gpu_draw_scratch(void);

/*
 * x[tok[i]] = fexp_penalty(x[tok[i]], repeat, presence, frequency, cnt[i])
 * for i < k (lib/fexp.h; the tokens distinct and inside x; tok, cnt
 * device memory): a draw's penalties as lib/sample.c applies them.
 */
int	gpu_penalize(struct gpu *g, float *d_x, const int32_t *d_tok, const int32_t *d_cnt,
	    int k, float repeat, float presence, float frequency);

/*
 * x[t] = -INFINITY for each t < n whose bit in bits is 0 (bit t % 32 of
 * word t / 32; bits device memory, (n + 31) / 32 words), every other
 * value untouched: a grammar's token mask (lib/grammar.h's grammar_mask)
 * on a logits row.
 */
int	gpu_mask(struct gpu *g, float *d_x, int64_t n, const uint32_t *d_bits);

/*
 * NCCL between n devices driven by one thread (cuda/nccl.cu; lib/pipeline's
 * link): rank s is g[s], its stream the one its sends and receives queue
 * on.  gpu_nccl_open makes the communicators (ncclCommInitAll); NULL with
 * the reason in err, also "built without NCCL" when the build found no
 * nccl.h.  A group (gpu_nccl_group(nc, 1) ... gpu_nccl_group(nc, 0)) holds
 * the sends and receives of one exchange.  Counts are floats.
 */
struct gpu_nccl;
struct gpu_nccl *gpu_nccl_open(struct gpu **g, int n, char *err, size_t errlen);
void	gpu_nccl_close(struct gpu_nccl *);
const char *gpu_nccl_errmsg(const struct gpu_nccl *);
int	gpu_nccl_group(struct gpu_nccl *, int begin);
int	gpu_nccl_send(struct gpu_nccl *, int rank, const float *d_src, size_t n, int peer);
int	gpu_nccl_recv(struct gpu_nccl *, int rank, float *d_dst, size_t n, int peer);

#ifdef __cplusplus
}
#endif
#endif
