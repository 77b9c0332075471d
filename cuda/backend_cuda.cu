/*
 * backend_cuda: the op table of lib/backend.h on one CUDA device, over
 * cuda/gpu.h's kernels plus the small ones the table needs here (RoPE in
 * both modes with strides, conv1d with snapshots, the whole gated delta
 * rule step with its gates and norms, activations, fill).
 *
 * Memory is device memory (backend_host() == 0).  Weights are copied to
 * the device once at weight_init.  Every op is queued on the gpu's
 * stream; backend_read waits for it.  Row r of every op is computed by
 * the same code whether it runs alone or with others: Q8_0 and NVFP4
 * products run on int8 activations as the CPU backend's do
 * (gpu_matvec_q8, any m), K-quants (Q4_K, Q5_K, Q6_K) too for m <=
 * the gpu's step rows, other types through gpu_matvec for m <= the step
 * rows (batch-invariant) and cuBLAS beyond (prefill, the K-quants' too),
 * attention in chunks of rows that each see their own positions (flash
 * attention for a prompt of more than the step rows), the recurrent ops
 * row after row.  The step rows (gpu_tune_step_rows) are 32 on the
 * backend (GPU_STEP_ROWS_MAX; backend_rows_set: 16, GPU_MATVEC_MAX_ROWS,
 * the gpu's own default); either way a row of a step up to them runs the
 * decode kernels, 16 rows a launch (Q8_0 and NVFP4: up to 32 by k_mv8t),
 * with the bits it has alone.
 *
 * The fused forms (add_rmsnorm_matmul, ffn, rmsnorm_gated_matmul,
 * mul_sigmoid_matmul) run the op before a product in the kernel that
 * quantizes the product's input (gpu_rmsnorm_matvec_q8_ex,
 * gpu_matvec_q8_pre) when every weight takes the int8 path, with the
 * arithmetic of the plain ops' kernels (the same bits); otherwise as the
 * plain ops.  A decode step of the 9B shape launches about 160 kernels
 * fewer so.
 *
 * Recorded steps (backend_graph_*) are CUDA graphs made by stream
 * capture, one per key (CUDA_GRAPHS kept, least recently used dropped),
 * stale once gpu_generation moves (memory freed, scratch moved).  While
 * recording, nothing may allocate, free, synchronize or upload from host
 * memory: buf_get, gpu_scratch and rope_table refuse, the step fails,
 * and the caller runs it again without graphs.  Whether graphs are on,
 * why they went off and how many were recorded and replayed live in
 * be.graph (backend_graph_set, backend_graph_stats).
 */
#include "gpu_impl.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define _Noreturn [[noreturn]]	/* util.h is C11 */
extern "C" {
#include "backend_impl.h"
#include "quant.h"
}
#include "gdn_chunk.cuh"

struct cuda_buf {		/* a device buffer grown on demand, never shrunk */
	void	*p;
	size_t	n;
};

struct rope_table {		/* 1 / theta^(2i/dim), i < n_rot/2, on the device */
	float	theta;
	int	n_rot, dim;	/* dim: n_rot, or the head size (BACKEND_ROPE_PROP) */
	float	*d;
};

/*
 * A recorded step (backend_graph_*): its key, the graph, and the
 * gpu_generation it was recorded under (another one: stale).  seen: the
 * key's first step ran eagerly and sized the buffers; the next records.
 */
struct cuda_graph {
	unsigned char key[BACKEND_GRAPH_KEY];
	size_t	nkey;
	int	seen;
	struct gpu_graph *gr;
	unsigned gen;
	unsigned long used;		/* for least-recently-used eviction */
};

/* frequency tables a backend keeps: (theta, n_rot, dim) of every layer kind of every
 * model opened on it (kernel-check's model checks open a dozen on one backend) */
#define CUDA_ROPE_TABLES 128
#define CUDA_GRAPHS 32

struct backend_cuda {
	struct backend be;		/* first: (struct backend_cuda *)be */
	struct backend_ops ops;
	struct gpu *g;
	struct cuda_buf ids;		/* ids, positions, rope frequencies */
	struct cuda_buf t0, t1;		/* packed operands */
	struct cuda_buf gdn;		/* k_gdn_prep's scratch */
	struct cuda_buf topk;		/* gpu_topk's candidates: values, then ids */
	struct cuda_buf draw;		/* gpu_draw's scratch, then the id */
	struct cuda_buf pen;		/* gpu_penalize's tokens, then counts */
	struct cuda_buf mask;		/* gpu_mask's bits */
	struct cuda_buf pad;		/* a product's input rows, zero-padded (cuda_weight.ne0p) */
	struct cuda_buf moe;		/* the experts' products, slot by slot */
	int32_t	*h_idx;			/* pinned: argmax results */
	int	h_idx_n;
	struct rope_table rope[CUDA_ROPE_TABLES];
	int	n_rope;
	/* graphs: on, off and counted in be.graph; off for good after a failure */
	struct cuda_graph graph[CUDA_GRAPHS];
	struct cuda_graph *rec;		/* the entry being recorded, or NULL */
	unsigned long clock;
	struct backend_prof_row prof[256];	/* backend_prof_rows: gpu_prof's rows */
};

struct cuda_weight {
	void	*d;			/* [ne1][row_size] bytes */
	float	*d_f32;			/* [ne1][ne0] dequantized, for lookups; or NULL */
	float	*d_scale;		/* NULL when scale == 1 */
	int64_t	ne0p;			/* the device rows' length: ne0, or (F32 rows made
					 * from rows not a multiple of 32) ne0 rounded up
					 * to 32, zeros after ne0 */
	int	type0;			/* the weight's own type (w->type may be F32 now) */
};

static inline struct backend_cuda *
CB(struct backend *be)
{
	return (struct backend_cuda *)be;
}

/* The gpu's reason becomes the backend's; always -1. */
static int
gfail(struct backend *be, const char *op)
{
	return util_err(be->err, "%s: %s", op, gpu_errmsg(CB(be)->g));
}

static void *
buf_get(struct backend *be, struct cuda_buf *b, size_t n)
{
	if (n <= b->n)
		return b->p;
	if (gpu_capturing(CB(be)->g)) {	/* a recorded step allocates nothing */
		util_err(be->err, "scratch of %zu bytes while recording a graph (%zu held)", n,
		    b->n);
		return NULL;
	}
	gpu_free(CB(be)->g, b->p);
	b->n = 0;
	if ((b->p = gpu_alloc(CB(be)->g, n)) == NULL) {
		util_err(be->err, "scratch of %zu bytes: %s", n, gpu_errmsg(CB(be)->g));
		return NULL;
	}
	b->n = n;
	return b->p;
}

/* Rows of n floats from a stride of lds to one of ldd (queued). */
static int
copy_rows(struct backend *be, float *d, size_t ldd, const float *s, size_t lds,
    size_t n, size_t rows)
{
	cudaError_t e = cudaMemcpy2DAsync(d, ldd * 4, s, lds * 4, n * 4, rows,
	    cudaMemcpyDeviceToDevice, CB(be)->g->stream);

	if (e != cudaSuccess)
		return util_err(be->err, "copy: %s", cudaGetErrorString(e));
	return 0;
}

/* --- kernels ---------------------------------------------------------- */

__device__ __forceinline__ float
d_silu(float x)
{
	return gpu_silu(x);
}

__device__ __forceinline__ float
d_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

__device__ __forceinline__ float
d_softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

__global__ void
k_fill(float *d, float v, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < n)
		d[i] = v;
}

__global__ void
k_act(float *x, size_t n, int act)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= n)
		return;
	float v = x[i];
	x[i] = act == BACKEND_ACT_SILU ? d_silu(v) : act == BACKEND_ACT_SIGMOID ?
	    d_sigmoid(v) : d_softplus(v);
}

/*
 * The rotation of pair d (p[0], p[off]) at position a (a float): ts != 0
 * (BACKEND_ROPE_GGML): the angle a * ts * ... * ts by d float products and
 * the rotation with one fused multiply-add each, as the CPU backend rounds
 * them (cosf and sinf may still differ from its libm's); else the angle a
 * * inv[d] and plain products.
 */
__device__ __forceinline__ void
rope_pair(float *p, int off, float a, int d, const float *inv, float ts)
{
	if (ts != 0.0f)
		for (int j = 0; j < d; j++)
			a = __fmul_rn(a, ts);
	else
		a = __fmul_rn(a, inv[d]);
	float cs = cosf(a), sn = sinf(a), x0 = p[0], x1 = p[off];

	if (ts != 0.0f) {
		p[0] = __fmaf_rn(x0, cs, -__fmul_rn(x1, sn));
		p[off] = __fmaf_rn(x0, sn, __fmul_rn(x1, cs));
	} else {
		p[0] = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
		p[off] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
	}
}

/* One thread per pair d of head (blockIdx.x) of row blockIdx.y; inv: [n_rot/2];
 * off: the pair's second element's distance (n_rot/2, hs/2 for
 * BACKEND_ROPE_PROP, 1 for BACKEND_ROPE_NORM). */
__global__ void
k_rope(float *x, int ldx, int hs, const int32_t *pos, const float *inv, int half,
    int neox, int off, float ts)
{
	int d = threadIdx.x + blockIdx.z * blockDim.x, r = blockIdx.y;

	pdl_enter();
	if (d >= half)
		return;
	rope_pair(x + (size_t)r * ldx + (size_t)blockIdx.x * hs + (neox ? d : 2 * d), off,
	    (float)pos[r], d, inv, ts);
}

/* k_rope's ts: theta^(-2/n_rot) as the CPU backend computes it, or 0 without BACKEND_ROPE_GGML. */
static float
rope_ts(float theta, int n_rot, int mode)
{
	return mode & BACKEND_ROPE_GGML ? powf(theta, -2.0f / (float)n_rot) : 0.0f;
}

/* Row r of k and v (z = 0, 1) into its cache at row *pos + r; rows past n_ctx are dropped. */
__global__ void
k_kv_store(float *kc, float *vc, const float *k, const float *v, int kvd,
    const int32_t *pos, int n_ctx)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y, p;

	pdl_enter();
	p = *pos + r;
	if (j >= kvd || p < 0 || p >= n_ctx)
		return;
	if (blockIdx.z == 0)
		kc[(size_t)p * kvd + j] = k[(size_t)r * kvd + j];
	else
		vc[(size_t)p * kvd + j] = v[(size_t)r * kvd + j];
}

/*
 * backend_kv_store_seqs: block (j, r, 2 z + side) copies row r of sequence
 * z's keys (side 0) or values (1) into its cache at row pos + r; the
 * sequences by value (CU_KV_SEQS a launch: parameters under 4 KiB).
 */
#define CU_KV_SEQS 32

struct cu_kv_seq {
	float	*kc, *vc;
	int	r0, rows, pos;
};

struct cu_kv_seqs {
	struct cu_kv_seq s[CU_KV_SEQS];
};

__global__ void
k_kv_store_seqs(const float *k, const float *v, int kvd, struct cu_kv_seqs Q)
{
	const struct cu_kv_seq *q = &Q.s[blockIdx.z >> 1];
	int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	size_t from = (size_t)(q->r0 + r) * kvd + j, to = (size_t)(q->pos + r) * kvd + j;

	pdl_enter();
	if (j >= kvd || r >= q->rows)
		return;
	if ((blockIdx.z & 1) == 0)
		q->kc[to] = k[from];
	else
		q->vc[to] = v[from];
}

/*
 * backend_qk_norm_rope in one kernel: block (h, r) is q's head h of row r
 * (h < nh), k's head h - nh, or (kc or vnorm) v's head h - nh - nkv.  A
 * q or k head is normed as ops.cu's k_rmsnorm4<1> norms it
 * (norm_threads(hd / 4) threads, thread i float4 i: the same sums, the
 * same bits), kept in shared memory, its pairs rotated by rope_pair at
 * pos[r] as k_rope rotates them, and written back; a v head normed the
 * same way without a weight (vnorm) and written back, no rope; k's head
 * also into kc at row pos[0] + r and v's into vc, as k_kv_store stores
 * them (rows past n_ctx dropped).
 */
struct qkr_args {
	float	*q, *k, *kc, *vc, *v;
	const float *qn, *kn, *inv;
	const int32_t *pos;
	int	nh, nkv, hd, qhs, half, neox, n_ctx, vnorm;
	float	eps, ts;
};

/* One head of hd floats (float4 i a thread) normed as k_rmsnorm4<1> norms it, w NULL: no weight. */
__device__ __forceinline__ float4
qkr_norm(float4 v, const float4 *w, int i, bool in, int hd, float eps, double *red)
{
	float4 c = in && w != NULL ? w[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	double s = norm_sumsq_warp<1>(&v);
	float sc = rms_scale(norm_sumsq_block(s, red), hd, eps);

	v = make_float4(__fmul_rn(v.x, sc), __fmul_rn(v.y, sc), __fmul_rn(v.z, sc),
	    __fmul_rn(v.w, sc));
	if (w != NULL)
		v = make_float4(__fmul_rn(v.x, c.x), __fmul_rn(v.y, c.y), __fmul_rn(v.z, c.z),
		    __fmul_rn(v.w, c.w));
	return v;
}

__global__ void __launch_bounds__(1024)
k_qk_rope(struct qkr_args A)
{
	extern __shared__ float4 qkr_sm[];	/* the normed head, hd floats */
	__shared__ double red[32];
	int h = blockIdx.x, r = blockIdx.y, i = threadIdx.x, d4 = A.hd / 4;
	size_t kvd = (size_t)A.nkv * A.hd;
	bool in = i < d4;
	float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

	pdl_enter();
	if (h >= A.nh + A.nkv) {	/* v's head: normed (vnorm), into the cache (kc) */
		int p = A.pos[0] + r;
		size_t o = (size_t)(h - A.nh - A.nkv) * d4 + i;
		float4 *vr = (float4 *)(A.v + r * kvd);
		float4 v = in ? vr[o] : zero;
		if (A.vnorm) {
			v = qkr_norm(v, NULL, i, in, A.hd, A.eps, red);
			if (in)
				vr[o] = v;
		}
		if (in && A.kc != NULL && p >= 0 && p < A.n_ctx)
			((float4 *)(A.vc + (size_t)p * kvd))[o] = v;
		return;
	}
	bool isq = h < A.nh;
	float4 *x = (float4 *)(isq ? A.q + ((size_t)r * A.nh + h) * A.qhs :
	    A.k + r * kvd + (size_t)(h - A.nh) * A.hd);
	const float4 *w = (const float4 *)(isq ? A.qn : A.kn);
	float4 v = qkr_norm(in ? x[i] : zero, w, i, in, A.hd, A.eps, red);
	if (in)
		qkr_sm[i] = v;
	__syncthreads();
	float *f = (float *)qkr_sm;
	for (int d = i; d < A.half; d += blockDim.x)
		rope_pair(f + (A.neox ? d : 2 * d), A.neox ? A.half : 1, (float)A.pos[r], d, A.inv,
		    A.ts);
	__syncthreads();
	if (!in)
		return;
	x[i] = qkr_sm[i];
	if (!isq && A.kc != NULL) {
		int p = A.pos[0] + r;
		if (p >= 0 && p < A.n_ctx)
			((float4 *)(A.kc + (size_t)p * kvd + (size_t)(h - A.nh) * A.hd))[i] = qkr_sm[i];
	}
}

/* One thread per channel; the window of the last d_conv-1 inputs in registers. */
__device__ __forceinline__ void
conv_body(const float *x, int ldx, int m, int n_ch, const float *w, int dc,
    float *state, float *snap, float *y)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, ns = dc - 1;
	float win[16];

	pdl_enter();
	if (c >= n_ch)
		return;
	const float *wc = w + (size_t)c * dc;
	for (int k = 0; k < ns; k++)
		win[k] = state[(size_t)k * n_ch + c];
	for (int t = 0; t < m; t++) {
		float in = x[(size_t)t * ldx + c], acc = 0.0f;

		for (int k = 0; k < ns; k++)
			acc = __fadd_rn(acc, __fmul_rn(win[k], wc[k]));
		acc = __fadd_rn(acc, __fmul_rn(in, wc[ns]));
		y[(size_t)t * n_ch + c] = d_silu(acc);
		for (int k = 0; k + 1 < ns; k++)
			win[k] = win[k + 1];
		win[ns - 1] = in;
		if (snap != NULL)
			for (int k = 0; k < ns; k++)
				snap[((size_t)t * ns + k) * n_ch + c] = win[k];
	}
	for (int k = 0; k < ns; k++)
		state[(size_t)k * n_ch + c] = win[k];
}

__global__ void
k_conv(const float *x, int ldx, int m, int n_ch, const float *w, int dc,
    float *state, float *snap, float *y)
{
	conv_body(x, ldx, m, n_ch, w, dc, state, snap, y);
}

/*
 * The sequences of a group (backend_*_seqs), by value in the launch's
 * parameters (no upload: a recorded step may hold them): sequence z's
 * first row r0 in the row operands, its rows m, its state and snapshots.
 * CU_SEQS a launch keeps the parameters under 4 KiB.
 */
#define CU_SEQS 32

struct cu_seq {
	float	*state, *snap;
	int	r0, m;
};

struct cu_seqs {
	struct cu_seq s[CU_SEQS];
};

/* k_conv over sequence blockIdx.z of Q: its rows, its state, the same code. */
__global__ void
k_conv_seqs(const float *x, int ldx, int n_ch, const float *w, int dc, float *y,
    struct cu_seqs Q)
{
	const struct cu_seq *q = &Q.s[blockIdx.z];

	conv_body(x + (size_t)q->r0 * ldx, ldx, q->m, n_ch, w, dc, q->state, q->snap,
	    y + (size_t)q->r0 * n_ch);
}

/*
 * k_conv with the window in registers (NS = d_conv - 1 taps of history)
 * and the rows in chunks of CONV_ROWS, one thread per (channel, chunk):
 * a chunk's window starts from the inputs before it (the state before
 * row 0), and each output is k_conv's sum in k_conv's order (the same
 * bits).  The state is written here when one chunk covers the rows
 * (its thread read the old state first), else by k_conv_state after.
 */
#define CONV_ROWS 16

template <int NS>
__device__ __forceinline__ void
conv_r_body(const float *x, int ldx, int m, int n_ch, const float *w, float *state,
    float *snap, float *y, int own_state)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, t0 = blockIdx.y * CONV_ROWS;
	int t1 = min(m, t0 + CONV_ROWS);
	float win[NS], wc[NS + 1];

	pdl_enter();
	if (c >= n_ch)
		return;
#pragma unroll
	for (int k = 0; k <= NS; k++)
		wc[k] = w[(size_t)c * (NS + 1) + k];
#pragma unroll
	for (int k = 0; k < NS; k++) {	/* the input at time t0 - NS + k */
		int tau = t0 - NS + k;
		win[k] = tau >= 0 ? x[(size_t)tau * ldx + c] : state[(size_t)(tau + NS) * n_ch + c];
	}
	for (int t = t0; t < t1; t++) {
		float in = x[(size_t)t * ldx + c], acc = 0.0f;
#pragma unroll
		for (int k = 0; k < NS; k++)
			acc = __fadd_rn(acc, __fmul_rn(win[k], wc[k]));
		acc = __fadd_rn(acc, __fmul_rn(in, wc[NS]));
		y[(size_t)t * n_ch + c] = d_silu(acc);
#pragma unroll
		for (int k = 0; k + 1 < NS; k++)
			win[k] = win[k + 1];
		win[NS - 1] = in;
		if (snap != NULL)
#pragma unroll
			for (int k = 0; k < NS; k++)
				snap[((size_t)t * NS + k) * n_ch + c] = win[k];
	}
	if (own_state)
#pragma unroll
		for (int k = 0; k < NS; k++)
			state[(size_t)k * n_ch + c] = win[k];
}

template <int NS>
__global__ void
k_conv_r(const float *x, int ldx, int m, int n_ch, const float *w, float *state,
    float *snap, float *y, int own_state)
{
	conv_r_body<NS>(x, ldx, m, n_ch, w, state, snap, y, own_state);
}

/* The rows' chunks of sequence z: k_conv_r's launch for it alone has this many. */
__device__ __forceinline__ int
conv_chunks(int m)
{
	return (m + CONV_ROWS - 1) / CONV_ROWS;
}

/*
 * k_conv_r over sequence blockIdx.z of Q, chunk blockIdx.y (a block past
 * its chunks does nothing): the block its own launch would run.
 */
template <int NS>
__global__ void
k_conv_r_seqs(const float *x, int ldx, int n_ch, const float *w, float *y, struct cu_seqs Q)
{
	const struct cu_seq *q = &Q.s[blockIdx.z];
	int nc = conv_chunks(q->m);

	if ((int)blockIdx.y >= nc) {
		pdl_enter();
		return;
	}
	conv_r_body<NS>(x + (size_t)q->r0 * ldx, ldx, q->m, n_ch, w, q->state, q->snap,
	    y + (size_t)q->r0 * n_ch, nc == 1);
}

/* The state after m rows: the inputs at times m - NS .. m - 1 (old state before 0). */
template <int NS>
__device__ __forceinline__ void
conv_state_body(const float *x, int ldx, int m, int n_ch, float *state)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	float v[NS];

	pdl_enter();
	if (c >= n_ch)
		return;
#pragma unroll
	for (int k = 0; k < NS; k++) {
		int tau = m - NS + k;
		v[k] = tau >= 0 ? x[(size_t)tau * ldx + c] : state[(size_t)(tau + NS) * n_ch + c];
	}
#pragma unroll
	for (int k = 0; k < NS; k++)
		state[(size_t)k * n_ch + c] = v[k];
}

template <int NS>
__global__ void
k_conv_state(const float *x, int ldx, int m, int n_ch, float *state)
{
	conv_state_body<NS>(x, ldx, m, n_ch, state);
}

/* k_conv_state for sequence blockIdx.z of Q when k_conv_r_seqs left its state (two
 * chunks or more), else nothing. */
template <int NS>
__global__ void
k_conv_state_seqs(const float *x, int ldx, int n_ch, struct cu_seqs Q)
{
	const struct cu_seq *q = &Q.s[blockIdx.z];

	if (conv_chunks(q->m) < 2) {
		pdl_enter();
		return;
	}
	conv_state_body<NS>(x + (size_t)q->r0 * ldx, ldx, q->m, n_ch, q->state);
}

struct gdn_args {
	const float *qkv, *a, *b, *ssm_a, *dt_bias;
	float	*S, *snap, *o;
	int	ld, m, nk, nv, dv, v_tiled, hf_l2;
	float	eps;
};

/* Sum over the block (a multiple of 32 threads); every thread gets it. */
__device__ float
bsum(float v, float *red)
{
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
	__syncthreads();
	if (lane == 0)
		red[wp] = v;
	__syncthreads();
	v = 0.0f;
	for (int i = 0; i < nw; i++)	/* fixed order */
		v += red[i];
	return v;
}

/* bsum of two values at once (each the same bits as its own bsum), two barriers. */
__device__ float2
bsum2(float v, float w, float (*red)[33])
{
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	for (int o = 16; o > 0; o >>= 1) {
		v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
		w += __shfl_xor_sync(0xFFFFFFFFu, w, o);
	}
	__syncthreads();
	if (lane == 0)
		red[0][wp] = v, red[1][wp] = w;
	__syncthreads();
	v = 0.0f, w = 0.0f;
	for (int i = 0; i < nw; i++)	/* fixed order */
		v += red[0][i], w += red[1][i];
	return make_float2(v, w);
}

/*
 * The gated delta rule, rows in order: block (h, c) is value head h,
 * columns c * GDN_COLS .. of its state S[h][DK][dv].  A column's DK rows are
 * split over GDN_G lanes of one warp (lane = group * GDN_CW + column), each
 * holding DK / GDN_G of them in registers; the column's two dot products
 * are summed per lane in row order, then over the groups by a fixed
 * butterfly, so every lane of a column gets the same bits whatever m is.
 * Splitting the columns over blocks puts nv * dv / GDN_CW warps on the
 * state (one block per head left most multiprocessors idle).
 */
#define GDN_COLS 32		/* columns a block */
#define GDN_G 4			/* lanes a column */
#define GDN_CW (32 / GDN_G)	/* columns a warp */
#define GDN_DK_REG 128		/* the longest key head kept in registers */

template <int DK>
__device__ __forceinline__ void
gdn_body(const struct gdn_args &A)
{
	enum { R = DK / GDN_G };
	__shared__ float sq[2][DK], sk[2][DK], red[2][33];	/* q, k: by the row's parity */
	int h = blockIdx.x, tid = threadIdx.x, lane = tid & 31, grp = lane / GDN_CW;
	int j = blockIdx.y * GDN_COLS + (tid >> 5) * GDN_CW + lane % GDN_CW, dv = A.dv;
	int kh = A.v_tiled ? h % A.nk : h / (A.nv / A.nk), i0 = grp * R;
	size_t hsz = (size_t)DK * dv, kd = (size_t)A.nk * DK;
	float *Sh = A.S + h * hsz, s[R];
	bool own = j < dv, mine = tid < DK;	/* DK <= the block: one q, k element a thread */
	float nx_q = 0.0f, nx_k = 0.0f, nx_v = 0.0f, nx_a = 0.0f, nx_b = 0.0f;

	pdl_enter();
#pragma unroll
	for (int u = 0; u < R; u++)
		s[u] = own ? Sh[(size_t)(i0 + u) * dv + j] : 0.0f;
	if (A.m > 0) {
		nx_q = mine ? A.qkv[(size_t)kh * DK + tid] : 0.0f;
		nx_k = mine ? A.qkv[kd + (size_t)kh * DK + tid] : 0.0f;
		nx_v = own ? A.qkv[2 * kd + (size_t)h * dv + j] : 0.0f;
		nx_a = A.a[h], nx_b = A.b[h];
	}
	for (int r = 0; r < A.m; r++) {
		/* this row's inputs were loaded during the last row; load the next's now */
		float q = nx_q, k = nx_k, v = nx_v, ra = nx_a, rb = nx_b;
		if (r + 1 < A.m) {
			const float *nrow = A.qkv + (size_t)(r + 1) * A.ld;
			nx_q = mine ? nrow[(size_t)kh * DK + tid] : 0.0f;
			nx_k = mine ? nrow[kd + (size_t)kh * DK + tid] : 0.0f;
			nx_v = own ? nrow[2 * kd + (size_t)h * dv + j] : 0.0f;
			nx_a = A.a[(size_t)(r + 1) * A.nv + h], nx_b = A.b[(size_t)(r + 1) * A.nv + h];
		}
		float pq = 0.0f, pk = 0.0f;
		int pb = r & 1;

		if (mine) {
			sq[pb][tid] = q;
			sk[pb][tid] = k;
			pq = __fmaf_rn(q, q, pq);
			pk = __fmaf_rn(k, k, pk);
		}
		float2 ss = bsum2(pq, pk, red);	/* its barriers publish sq, sk */
		float ssq = ss.x, ssk = ss.y;
		float nq, nk;
		if (A.hf_l2) {
			nq = 1.0f / sqrtf(ssq + A.eps);
			nk = 1.0f / sqrtf(ssk + A.eps);
		} else {
			nq = 1.0f / fmaxf(sqrtf(ssq), A.eps);
			nk = 1.0f / fmaxf(sqrtf(ssk), A.eps);
		}
		nq = __fmul_rn(nq, 1.0f / sqrtf((float)DK));
		float beta = d_sigmoid(rb);
		float gate = __fmul_rn(A.ssm_a[h], d_softplus(__fadd_rn(ra, A.dt_bias[h])));
		float decay = expf(gate);
		float kv = 0.0f, o = 0.0f;
#pragma unroll
		for (int u = 0; u < R; u++) {
			s[u] = __fmul_rn(s[u], decay);
			kv = __fmaf_rn(s[u], __fmul_rn(sk[pb][i0 + u], nk), kv);
		}
		for (int x = GDN_CW; x < 32; x <<= 1)
			kv = __fadd_rn(kv, __shfl_xor_sync(0xFFFFFFFFu, kv, x));
		float dl = __fmul_rn(beta, __fsub_rn(v, kv));
#pragma unroll
		for (int u = 0; u < R; u++) {
			s[u] = __fmaf_rn(__fmul_rn(sk[pb][i0 + u], nk), dl, s[u]);
			o = __fmaf_rn(s[u], __fmul_rn(sq[pb][i0 + u], nq), o);
		}
		for (int x = GDN_CW; x < 32; x <<= 1)
			o = __fadd_rn(o, __shfl_xor_sync(0xFFFFFFFFu, o, x));
		if (own && grp == 0)
			A.o[(size_t)r * A.nv * dv + (size_t)h * dv + j] = o;
		if (own && A.snap != NULL) {
			float *sn = A.snap + (size_t)r * A.nv * hsz + h * hsz;
#pragma unroll
			for (int u = 0; u < R; u++)
				sn[(size_t)(i0 + u) * dv + j] = s[u];
		}
	}
	if (own) {
#pragma unroll
		for (int u = 0; u < R; u++)
			Sh[(size_t)(i0 + u) * dv + j] = s[u];
	}
}

template <int DK>
__global__ void __launch_bounds__(GDN_COLS * GDN_G)
k_gdn(struct gdn_args A)
{
	gdn_body<DK>(A);
}

/* k_gdn over sequence blockIdx.z of Q: its rows of qkv, a, b and o, its S and
 * snapshots, the same code (a sequence of no rows does nothing). */
template <int DK>
__global__ void __launch_bounds__(GDN_COLS * GDN_G)
k_gdn_seqs(struct gdn_args A, struct cu_seqs Q)
{
	const struct cu_seq *q = &Q.s[blockIdx.z];
	size_t r0 = (size_t)q->r0;

	if (q->m == 0) {
		pdl_enter();
		return;
	}
	A.qkv += r0 * A.ld;
	A.a += r0 * A.nv;
	A.b += r0 * A.nv;
	A.o += r0 * A.nv * A.dv;
	A.S = q->state;
	A.snap = q->snap;
	A.m = q->m;
	gdn_body<DK>(A);
}

/*
 * gdn_body for a key head of dk rows in registers of DK (dk <= DK, DK a
 * multiple of 16): rows dk .. DK of a lane's registers are never loaded,
 * summed or stored (each lane's sums skip them), and q, k, the state and
 * its snapshots are laid out by dk.  The same arithmetic as gdn_body's, kept
 * apart so that the sizes gdn_body serves keep their machine code (a
 * runtime size threaded through one body changed their register
 * allocation).  Its arguments: gdn_args and the key head's size.
 */
struct gdn_pargs : gdn_args {
	int	dk;
};

template <int DK>
__device__ __forceinline__ void
gdn_pad_body(const struct gdn_pargs &A)
{
	enum { R = DK / GDN_G };
	__shared__ float sq[2][DK], sk[2][DK], red[2][33];	/* q, k: by the row's parity */
	int dk = A.dk;
	int h = blockIdx.x, tid = threadIdx.x, lane = tid & 31, grp = lane / GDN_CW;
	int j = blockIdx.y * GDN_COLS + (tid >> 5) * GDN_CW + lane % GDN_CW, dv = A.dv;
	int kh = A.v_tiled ? h % A.nk : h / (A.nv / A.nk), i0 = grp * R;
	size_t hsz = (size_t)dk * dv, kd = (size_t)A.nk * dk;
	float *Sh = A.S + h * hsz, s[R];
	bool own = j < dv, mine = tid < dk;	/* DK <= the block: one q, k element a thread */
	float nx_q = 0.0f, nx_k = 0.0f, nx_v = 0.0f, nx_a = 0.0f, nx_b = 0.0f;

	pdl_enter();
#pragma unroll
	for (int u = 0; u < R; u++)
		s[u] = own && i0 + u < dk ? Sh[(size_t)(i0 + u) * dv + j] : 0.0f;
	if (A.m > 0) {
		nx_q = mine ? A.qkv[(size_t)kh * dk + tid] : 0.0f;
		nx_k = mine ? A.qkv[kd + (size_t)kh * dk + tid] : 0.0f;
		nx_v = own ? A.qkv[2 * kd + (size_t)h * dv + j] : 0.0f;
		nx_a = A.a[h], nx_b = A.b[h];
	}
	for (int r = 0; r < A.m; r++) {
		/* this row's inputs were loaded during the last row; load the next's now */
		float q = nx_q, k = nx_k, v = nx_v, ra = nx_a, rb = nx_b;
		if (r + 1 < A.m) {
			const float *nrow = A.qkv + (size_t)(r + 1) * A.ld;
			nx_q = mine ? nrow[(size_t)kh * dk + tid] : 0.0f;
			nx_k = mine ? nrow[kd + (size_t)kh * dk + tid] : 0.0f;
			nx_v = own ? nrow[2 * kd + (size_t)h * dv + j] : 0.0f;
			nx_a = A.a[(size_t)(r + 1) * A.nv + h], nx_b = A.b[(size_t)(r + 1) * A.nv + h];
		}
		float pq = 0.0f, pk = 0.0f;
		int pb = r & 1;

		if (mine) {
			sq[pb][tid] = q;
			sk[pb][tid] = k;
			pq = __fmaf_rn(q, q, pq);
			pk = __fmaf_rn(k, k, pk);
		}
		float2 ss = bsum2(pq, pk, red);	/* its barriers publish sq, sk */
		float ssq = ss.x, ssk = ss.y;
		float nq, nk;
		if (A.hf_l2) {
			nq = 1.0f / sqrtf(ssq + A.eps);
			nk = 1.0f / sqrtf(ssk + A.eps);
		} else {
			nq = 1.0f / fmaxf(sqrtf(ssq), A.eps);
			nk = 1.0f / fmaxf(sqrtf(ssk), A.eps);
		}
		nq = __fmul_rn(nq, 1.0f / sqrtf((float)dk));
		float beta = d_sigmoid(rb);
		float gate = __fmul_rn(A.ssm_a[h], d_softplus(__fadd_rn(ra, A.dt_bias[h])));
		float decay = expf(gate);
		float kv = 0.0f, o = 0.0f;
#pragma unroll
		for (int u = 0; u < R; u++) {
			if (i0 + u >= dk)
				continue;
			s[u] = __fmul_rn(s[u], decay);
			kv = __fmaf_rn(s[u], __fmul_rn(sk[pb][i0 + u], nk), kv);
		}
		for (int x = GDN_CW; x < 32; x <<= 1)
			kv = __fadd_rn(kv, __shfl_xor_sync(0xFFFFFFFFu, kv, x));
		float dl = __fmul_rn(beta, __fsub_rn(v, kv));
#pragma unroll
		for (int u = 0; u < R; u++) {
			if (i0 + u >= dk)
				continue;
			s[u] = __fmaf_rn(__fmul_rn(sk[pb][i0 + u], nk), dl, s[u]);
			o = __fmaf_rn(s[u], __fmul_rn(sq[pb][i0 + u], nq), o);
		}
		for (int x = GDN_CW; x < 32; x <<= 1)
			o = __fadd_rn(o, __shfl_xor_sync(0xFFFFFFFFu, o, x));
		if (own && grp == 0)
			A.o[(size_t)r * A.nv * dv + (size_t)h * dv + j] = o;
		if (own && A.snap != NULL) {
			float *sn = A.snap + (size_t)r * A.nv * hsz + h * hsz;
#pragma unroll
			for (int u = 0; u < R; u++)
				if (i0 + u < dk)
					sn[(size_t)(i0 + u) * dv + j] = s[u];
		}
	}
	if (own) {
#pragma unroll
		for (int u = 0; u < R; u++)
			if (i0 + u < dk)
				Sh[(size_t)(i0 + u) * dv + j] = s[u];
	}
}

/*
 * Key heads past GDN_DK_REG (no model seen has them; the CPU takes them):
 * block (h, c) is value head h, columns c * GDN_COLS * GDN_G .., a thread
 * a column, its state read from and written back to memory every row
 * (twice read, once written) and q, k read where they lie (every thread
 * the same address: broadcast); each column's sums in row order.  Slow but
 * any size; the same code whatever m and whatever the call's other rows.
 */
__device__ __forceinline__ void
gdn_wide_body(const struct gdn_args &A, int dk)
{
	__shared__ float red[2][33];
	int h = blockIdx.x, tid = threadIdx.x, dv = A.dv;
	int j = blockIdx.y * blockDim.x + tid;
	int kh = A.v_tiled ? h % A.nk : h / (A.nv / A.nk);
	size_t hsz = (size_t)dk * dv, kd = (size_t)A.nk * dk;
	float *Sh = A.S + h * hsz;
	bool own = j < dv;

	pdl_enter();
	for (int r = 0; r < A.m; r++) {
		const float *row = A.qkv + (size_t)r * A.ld;
		const float *qr = row + (size_t)kh * dk, *kr = row + kd + (size_t)kh * dk;
		float pq = 0.0f, pk = 0.0f;

		for (int i = tid; i < dk; i += blockDim.x) {
			pq = __fmaf_rn(qr[i], qr[i], pq);
			pk = __fmaf_rn(kr[i], kr[i], pk);
		}
		float2 ss = bsum2(pq, pk, red);
		float nq, nk;
		if (A.hf_l2) {
			nq = 1.0f / sqrtf(ss.x + A.eps);
			nk = 1.0f / sqrtf(ss.y + A.eps);
		} else {
			nq = 1.0f / fmaxf(sqrtf(ss.x), A.eps);
			nk = 1.0f / fmaxf(sqrtf(ss.y), A.eps);
		}
		nq = __fmul_rn(nq, 1.0f / sqrtf((float)dk));
		if (!own)
			continue;
		float beta = d_sigmoid(A.b[(size_t)r * A.nv + h]);
		float gate = __fmul_rn(A.ssm_a[h], d_softplus(__fadd_rn(A.a[(size_t)r * A.nv + h],
		    A.dt_bias[h])));
		float decay = expf(gate), kv = 0.0f, o = 0.0f;
		float *sn = A.snap != NULL ? A.snap + (size_t)r * A.nv * hsz + h * hsz : NULL;

		for (int i = 0; i < dk; i++)
			kv = __fmaf_rn(__fmul_rn(Sh[(size_t)i * dv + j], decay),
			    __fmul_rn(kr[i], nk), kv);
		float dl = __fmul_rn(beta, __fsub_rn(row[2 * kd + (size_t)h * dv + j], kv));
		for (int i = 0; i < dk; i++) {
			float *p = Sh + (size_t)i * dv + j;
			float s = __fmaf_rn(__fmul_rn(kr[i], nk), dl, __fmul_rn(*p, decay));

			*p = s;
			o = __fmaf_rn(s, __fmul_rn(qr[i], nq), o);
			if (sn != NULL)
				sn[(size_t)i * dv + j] = s;
		}
		A.o[(size_t)r * A.nv * dv + (size_t)h * dv + j] = o;
	}
}

/* k_gdn for a key head of A.dk <= DK rows (DK a multiple of 16, <= GDN_DK_REG). */
template <int DK>
__global__ void __launch_bounds__(GDN_COLS * GDN_G)
k_gdn_pad(struct gdn_pargs A)
{
	gdn_pad_body<DK>(A);
}

/* Key heads past GDN_DK_REG: GDN_COLS * GDN_G threads, a column each. */
__global__ void __launch_bounds__(GDN_COLS * GDN_G)
k_gdn_wide(struct gdn_args A, int dk)
{
	gdn_wide_body(A, dk);
}

/* A's rows of qkv, a, b and o, its S, snapshots and row count made sequence
 * blockIdx.z of Q's; false (after pdl_enter) when it has no rows. */
__device__ __forceinline__ bool
gdn_seq_of(struct gdn_args &A, const struct cu_seqs &Q)
{
	const struct cu_seq *q = &Q.s[blockIdx.z];
	size_t r0 = (size_t)q->r0;

	if (q->m == 0) {
		pdl_enter();
		return false;
	}
	A.qkv += r0 * A.ld;
	A.a += r0 * A.nv;
	A.b += r0 * A.nv;
	A.o += r0 * A.nv * A.dv;
	A.S = q->state;
	A.snap = q->snap;
	A.m = q->m;
	return true;
}

/* k_gdn_pad and k_gdn_wide over sequence blockIdx.z of Q, as k_gdn_seqs. */
template <int DK>
__global__ void __launch_bounds__(GDN_COLS * GDN_G)
k_gdn_pad_seqs(struct gdn_pargs A, struct cu_seqs Q)
{
	if (gdn_seq_of(A, Q))
		gdn_pad_body<DK>(A);
}

__global__ void __launch_bounds__(GDN_COLS * GDN_G)
k_gdn_wide_seqs(struct gdn_args A, struct cu_seqs Q, int dk)
{
	if (gdn_seq_of(A, Q))
		gdn_wide_body(A, dk);
}

/* --- memory ----------------------------------------------------------- */

static void
cu_close(struct backend *be)
{
	struct backend_cuda *c = CB(be);

	if (c->rec != NULL)
		gpu_graph_abort(c->g);
	for (int i = 0; i < CUDA_GRAPHS; i++)
		gpu_graph_free(c->graph[i].gr);
	for (int i = 0; i < c->n_rope; i++)
		gpu_free(c->g, c->rope[i].d);
	gpu_free(c->g, c->ids.p);
	gpu_free(c->g, c->t0.p);
	gpu_free(c->g, c->t1.p);
	gpu_free(c->g, c->gdn.p);
	gpu_free(c->g, c->topk.p);
	gpu_free(c->g, c->draw.p);
	gpu_free(c->g, c->pen.p);
	gpu_free(c->g, c->mask.p);
	gpu_free(c->g, c->pad.p);
	gpu_free(c->g, c->moe.p);
	if (c->h_idx != NULL)
		cudaFreeHost(c->h_idx);
	gpu_close(c->g);
	free(c);
}

static float *
cu_alloc(struct backend *be, size_t n)
{
	return (float *)gpu_alloc(CB(be)->g, n * sizeof(float));
}

static void
cu_mfree(struct backend *be, float *p)
{
	gpu_free(CB(be)->g, p);
}

static float *
cu_host_alloc(struct backend *be, size_t n)
{
	float *p = (float *)gpu_host_alloc(CB(be)->g, n * sizeof(float));

	if (p == NULL)
		gfail(be, "host alloc");
	return p;
}

static int
cu_mem_info(struct backend *be, size_t *free_b, size_t *total)
{
	return gpu_mem_info(CB(be)->g, free_b, total) ? gfail(be, "memory info") : 0;
}

static void
cu_host_free(struct backend *be, float *p)
{
	gpu_host_free(CB(be)->g, p);
}

static int
cu_write(struct backend *be, float *dst, const float *src, size_t n)
{
	return gpu_upload(CB(be)->g, dst, src, n * 4) ? gfail(be, "write") : 0;
}

static int
cu_read(struct backend *be, float *dst, const float *src, size_t n)
{
	if (gpu_download(CB(be)->g, dst, src, n * 4) || gpu_sync(CB(be)->g))
		return gfail(be, "read");
	return 0;
}

static int
cu_copy(struct backend *be, float *dst, const float *src, size_t n)
{
	return gpu_copy(CB(be)->g, dst, src, n * 4) ? gfail(be, "copy") : 0;
}

static unsigned
nblk(size_t n, unsigned b)
{
	return (unsigned)((n + b - 1) / b);
}

static int
launched(struct backend *be, const char *op)
{
	cudaError_t e = cudaGetLastError();

	if (e != cudaSuccess)
		return util_err(be->err, "%s: %s", op, cudaGetErrorString(e));
	if (CB(be)->g->prof != NULL && gpu_prof_mark(CB(be)->g, op) != 0)	/* backend_prof */
		return gfail(be, op);
	return 0;
}

static int
cu_fill(struct backend *be, float *dst, float v, size_t n)
{
	gpu_launch(CB(be)->g, k_fill, nblk(n, 256), 256, 0, dst, v, n);
	return launched(be, "fill");
}

static int
cu_sync(struct backend *be)
{
	return gpu_sync(CB(be)->g) ? gfail(be, "sync") : 0;
}

/* Small host arrays (ids, positions, frequencies) to the device, queued. */
static void *
put_small(struct backend *be, const void *h, size_t n)
{
	void *d = buf_get(be, &CB(be)->ids, n);

	if (d != NULL && gpu_upload(CB(be)->g, d, h, n) != 0) {
		gfail(be, "upload");
		return NULL;
	}
	return d;
}

/* --- weights ---------------------------------------------------------- */

/* Types the GPU kernels lack but the CPU dequantizes are held as F32. */
static int
cu_supports(const struct backend *be, int type)
{
	return gpu_can_matvec(type) || quant_can_dequantize(type);
}

/* w's host rows dequantized to F32 rows of np floats, zeros after ne0 (malloc'd), or NULL. */
static float *
dequant_host(struct backend *be, const struct backend_weight *w, int64_t np)
{
	float *f = (float *)calloc((size_t)np * w->ne1, sizeof *f);

	if (f == NULL) {
		util_err(be->err, "weight: out of memory");
		return NULL;
	}
	for (int64_t r = 0; r < w->ne1; r++)
		if (quant_dequantize_row(w->type, (const uint8_t *)w->data + r * w->row_size,
		    f + r * np, w->ne0) != 0) {
			util_err(be->err, "weight: type '%s' does not dequantize",
			    quant_name(w->type));
			free(f);
			return NULL;
		}
	return f;
}

static void *
upload(struct backend *be, const void *h, size_t n)
{
	struct gpu *g = CB(be)->g;
	void *d = gpu_alloc(g, n);

	if (d == NULL || gpu_upload_weight(g, d, h, n) != 0) {
		util_err(be->err, "weight: %zu bytes: %s", n, gpu_errmsg(g));
		gpu_free(g, d);
		return NULL;
	}
	return d;
}

/*
 * The weight's bytes go to the device as they are when a GPU product
 * takes the type (NVFP4 then into the GPU layout, gpu_nvfp4_pack); a type
 * without gpu_matvec / gpu_get_rows also gets an F32 copy (for embedding
 * lookups, and for products when no kernel takes the type at all: then the
 * weight becomes F32).  Rows whose length is not a multiple of 32 (F32,
 * F16 and BF16 ones: the quantized types' blocks are whole) become F32
 * rows of ne0p, the length rounded up, zeros after ne0: the products read
 * their input zero-padded likewise (product, input_rows), so the padding
 * adds exact zeros, and the lookups copy ne0 of each row.
 */
static int cu_weight_init(struct backend *, struct backend_weight *);

/*
 * backend_weight_rows: the rows uploaded in place where the device holds
 * the weight's own bytes (NVFP4's then packed to the GPU layout, row by
 * row as gpu_nvfp4_pack does), a bf16 mirror of it dropped (made again
 * when a prompt needs it); a weight held as F32 (no GPU product of its
 * type, or rows padded) or with an F32 copy for lookups cannot.
 */
static int
cu_weight_rows(struct backend *be, struct backend_weight *w, int64_t r0, int64_t n,
    const void *src)
{
	struct cuda_weight *cw = (struct cuda_weight *)w->priv;
	struct gpu *g = CB(be)->g;
	char *d;

	if (cw == NULL || w->type != cw->type0 || cw->ne0p != w->ne0 || cw->d_f32 != NULL)
		return util_err(be->err, "weight rows: the device holds this '%s' weight as %s",
		    quant_name(cw != NULL ? cw->type0 : w->type), cw != NULL && cw->d_f32 != NULL ?
		    "its bytes and F32" : quant_name(w->type));
	gpu_mirror_drop(g, cw->d);
	d = (char *)cw->d + (size_t)r0 * w->row_size;
	if (gpu_upload(g, d, src, (size_t)n * w->row_size) != 0 ||
	    (w->type == QUANT_NVFP4 && gpu_nvfp4_pack(g, d, n, w->ne0) != 0))
		return gfail(be, "weight rows");
	return 0;
}

static int
cu_weight_init(struct backend *be, struct backend_weight *w)
{
	struct cuda_weight *cw = (struct cuda_weight *)calloc(1, sizeof *cw);
	int64_t np = (w->ne0 + 31) / 32 * 32;
	int mv = gpu_can_matvec(w->type) && np == w->ne0, q8 = gpu_can_matvec_q8(w->type);
	float *f = NULL;

	if (cw == NULL)
		return util_err(be->err, "weight: out of memory");
	cw->type0 = w->type;
	q8 = q8 && np == w->ne0;
	cw->ne0p = mv || q8 ? w->ne0 : np;
	if (!mv && ((f = dequant_host(be, w, cw->ne0p)) == NULL ||
	    (cw->d_f32 = (float *)upload(be, f, (size_t)cw->ne0p * w->ne1 * 4)) == NULL)) {
		if (f != NULL && !q8 && !gpu_can_matvec(w->type))	/* why so many bytes */
			util_err(be->err, "weight: type '%s' has no GPU product and is held as F32 "
			    "(%zu bytes): %s", quant_name(w->type), (size_t)cw->ne0p * w->ne1 * 4,
			    gpu_errmsg(CB(be)->g));
		goto fail;
	}
	if ((mv || q8) && (cw->d = upload(be, w->data, w->row_size * (size_t)w->ne1)) == NULL)
		goto fail;
	if ((mv || q8) && w->type == QUANT_NVFP4 &&
	    gpu_nvfp4_pack(CB(be)->g, cw->d, w->ne1, w->ne0) != 0) {
		gfail(be, "weight: NVFP4 layout");
		goto fail;
	}
	if (w->scale != 1.0f && (cw->d_scale = (float *)upload(be, &w->scale, 4)) == NULL)
		goto fail;
	free(f);
	if (!mv && !q8) {
		w->type = QUANT_F32;
		w->row_size = (size_t)cw->ne0p * 4;
		cw->d = cw->d_f32;
		cw->d_f32 = NULL;
	}
	w->data = cw->d;
	w->priv = cw;
	return 0;
fail:
	free(f);
	gpu_free(CB(be)->g, cw->d_f32);
	gpu_free(CB(be)->g, cw->d);
	free(cw);
	return -1;
}

static void
cu_weight_release(struct backend *be, struct backend_weight *w)
{
	struct cuda_weight *cw = (struct cuda_weight *)w->priv;

	if (cw != NULL) {
		gpu_free(CB(be)->g, cw->d);
		gpu_free(CB(be)->g, cw->d_f32);
		gpu_free(CB(be)->g, cw->d_scale);
		free(cw);
	}
}

/* --- ops -------------------------------------------------------------- */

static const struct cuda_weight *
CW(const struct backend_weight *w)
{
	return (const struct cuda_weight *)w->priv;
}

/* cu_embed of ids already on the device (gpu_get_rows embeds a negative id as row 0). */
static int
cu_embed_dev(struct backend *be, const struct backend_weight *w, const int32_t *d_ids,
    int m, float *y, int ldy)
{
	struct backend_cuda *c = CB(be);
	const struct cuda_weight *cw = CW(w);
	int64_t np = cw->ne0p;
	float *out = y;

	if ((ldy != w->ne0 || np != w->ne0) &&
	    (out = (float *)buf_get(be, &c->t1, (size_t)m * np * 4)) == NULL)
		return -1;
	if (gpu_get_rows(c->g, cw->d_f32 ? QUANT_F32 : w->type, cw->d_f32 ? cw->d_f32 : w->data,
	    np, d_ids, m, out) != 0)
		return gfail(be, "embed");
	return out == y ? 0 : copy_rows(be, y, ldy, out, np, w->ne0, m);
}

/* backend_embed: the ids to the device, then cu_embed_dev. */
static int
cu_embed(struct backend *be, const struct backend_weight *w, const int32_t *ids,
    int m, float *y, int ldy)
{
	int32_t *d_ids = (int32_t *)put_small(be, ids, (size_t)m * 4);

	return d_ids == NULL ? -1 : cu_embed_dev(be, w, d_ids, m, y, ldy);
}

static int
cu_rmsnorm(struct backend *be, const float *x, int ldx, const float *w, float *y,
    int ldy, int rows, int n, float eps)
{
	return gpu_rmsnorm(CB(be)->g, x, ldx, w, y, ldy, rows, n, eps) ?
	    gfail(be, "rmsnorm") : 0;
}

static int
cu_rmsnorm_gated(struct backend *be, const float *x, const float *z,
    const float *w, float *y, int rows, int n, float eps)
{
	return gpu_rmsnorm_gated(CB(be)->g, x, z, w, y, rows, n, eps) ?
	    gfail(be, "rmsnorm_gated") : 0;
}

static const float *
wscale(const struct backend_weight *w)
{
	return ((struct cuda_weight *)w->priv)->d_scale;
}

/*
 * x's rows (ldx floats apart, n long) as the device products take them:
 * rows of np floats (np >= n; zeros after n), contiguous and 16-byte
 * aligned: x itself when it is so already, else a copy in c->pad.
 */
static const float *
input_rows(struct backend *be, const float *x, int64_t ldx, int64_t n, int64_t np,
    int64_t rows)
{
	struct backend_cuda *c = CB(be);
	float *p;

	if (ldx == np && n == np && ((uintptr_t)x & 15) == 0)
		return x;
	if ((p = (float *)buf_get(be, &c->pad, (size_t)rows * np * 4)) == NULL)
		return NULL;
	if (np != n && gpu_memset(c->g, p, 0, (size_t)rows * np * 4) != 0) {
		gfail(be, "pad");
		return NULL;
	}
	return copy_rows(be, p, np, x, ldx, n, rows) ? NULL : p;
}

/* Y = X . W^T over contiguous operands: matvec up to the step rows (16 a
 * launch: gpu_matmul loops), cuBLAS beyond; a weight of padded rows
 * (cuda_weight.ne0p) takes X padded alike. */
static int
product(struct backend *be, const struct backend_weight *w, const float *x,
    float *y, int m)
{
	struct gpu *g = CB(be)->g;
	int64_t ne0 = CW(w)->ne0p;
	int rc;

	if (ne0 != w->ne0 && (x = input_rows(be, x, w->ne0, w->ne0, ne0, m)) == NULL)
		return -1;
	if (gpu_can_matvec_q8_step(g, w->type, m))	/* the CPU's numerics: int8 activations */
		rc = gpu_matvec_q8(g, w->type, w->data, w->ne1, ne0, x, m, y, wscale(w));
	else if (m <= GPU_MATVEC_MAX_ROWS)
		rc = gpu_matvec(g, w->type, w->data, w->ne1, ne0, x, m, y, wscale(w));
	else
		rc = gpu_matmul(g, w->type, w->data, w->ne1, ne0, x, m, y, wscale(w));
	return rc ? gfail(be, "matmul") : 0;
}

/* nout products of the same contiguous x: one quantization of x when every
 * weight takes the int8 path (bit-identical to nout product() calls). */
static int
products(struct backend *be, int nout, const struct backend_weight *const *W,
    const float *x, float *const *y, int m)
{
	enum { NMAX = 8 };
	int t[NMAX];
	const void *d[NMAX];
	int64_t rows[NMAX];
	const float *sc[NMAX];
	int all = nout <= NMAX;

	for (int i = 0; all && i < nout; i++) {
		all = gpu_can_matvec_q8_step(CB(be)->g, W[i]->type, m) && W[i]->ne0 == W[0]->ne0;
		t[i] = W[i]->type, d[i] = W[i]->data, rows[i] = W[i]->ne1, sc[i] = wscale(W[i]);
	}
	if (!all) {
		for (int i = 0; i < nout; i++)
			if (product(be, W[i], x, y[i], m) != 0)
				return -1;
		return 0;
	}
	return gpu_matvec_q8_multi(CB(be)->g, nout, t, d, rows, W[0]->ne0, x, m, y, sc) ?
	    gfail(be, "matmul") : 0;
}

static int
cu_matmul(struct backend *be, const struct backend_weight *w, const float *x,
    int ldx, float *y, int ldy, int m)
{
	struct backend_cuda *c = CB(be);
	const float *xi = x;
	float *yo = y;

	if (ldx != w->ne0) {
		float *t = (float *)buf_get(be, &c->t0, (size_t)m * w->ne0 * 4);
		if (t == NULL || copy_rows(be, t, w->ne0, x, ldx, w->ne0, m))
			return -1;
		xi = t;
	}
	if (ldy != w->ne1 && (yo = (float *)buf_get(be, &c->t1, (size_t)m * w->ne1 * 4)) == NULL)
		return -1;
	if (product(be, w, xi, yo, m) != 0)
		return -1;
	return yo == y ? 0 : copy_rows(be, y, ldy, yo, w->ne1, w->ne1, m);
}

/*
 * backend_matmul_half: a weight made from BF16 (F16) rows (cuda_weight.type0;
 * held in its type, or as F32 rows of ne0p) through gpu_matmul_half on
 * operands of that type, for any m (the tower's products: not row-invariant);
 * any other weight as backend_matmul.
 */
static int
cu_matmul_half(struct backend *be, const struct backend_weight *w, const float *x,
    int ldx, float *y, int ldy, int m)
{
	struct backend_cuda *c = CB(be);
	const struct cuda_weight *cw = CW(w);
	const float *xi;
	float *yo = y;

	if (cw->type0 != QUANT_BF16 && cw->type0 != QUANT_F16)
		return cu_matmul(be, w, x, ldx, y, ldy, m);
	if ((xi = input_rows(be, x, ldx, w->ne0, cw->ne0p, m)) == NULL)
		return -1;
	if (ldy != w->ne1 && (yo = (float *)buf_get(be, &c->t1, (size_t)m * w->ne1 * 4)) == NULL)
		return -1;
	if (gpu_matmul_half(c->g, w->type, cw->type0, w->data, w->ne1, cw->ne0p, xi, m, yo,
	    wscale(w)) != 0)
		return gfail(be, "matmul_half");
	return yo == y ? 0 : copy_rows(be, y, ldy, yo, w->ne1, w->ne1, m);
}

#define FUSE_MAX 8	/* products after one fused norm */

/* The weight types whose products of m rows the fused forms
 * (gpu_rmsnorm_matvec_q8_ex, gpu_matvec_q8_pre) quantize x for: Q8_0 and
 * Q8_1 blocks (Q4_0 and Q5_0 up to the step rows). */
static int
fusable_type(struct gpu *g, int t, int64_t m)
{
	return gpu_can_matvec_q8_step(g, t, m) && (t == QUANT_Q8_0 || t == QUANT_NVFP4 ||
	    t == QUANT_Q4_1 || t == QUANT_Q5_1 || t == QUANT_Q4_0 || t == QUANT_Q5_0);
}

/* 1 when gpu_matvec_q8_pre takes SWIGLU or GEGLU before a product of type
 * t: fusable_type's, and the types on Q8_K activations. */
static int
pre_fusable(struct gpu *g, int t, int64_t m)
{
	return fusable_type(g, t, m) || (gpu_can_matvec_q8_step(g, t, m) && (t == QUANT_Q4_K ||
	    t == QUANT_Q5_K || t == QUANT_Q6_K || t == QUANT_IQ4_XS));
}

/* The products' arguments (tp, d, rows, sc) when the norm, with rows of
 * nd, can run fused into their quantization: every weight on the int8
 * path (only fusable_type ones with ex) with rows of ne0, the norm's
 * operands 16-byte aligned (the kernel loads float4s, as gpu_rmsnorm's
 * does only then).  0 when it cannot. */
static int
norm_fusable(struct backend *be, int ex, int nout, const struct backend_weight *const *W,
    int64_t ne0, int nd, int64_t m, const void *const *al, int nal, int *tp, const void **d,
    int64_t *rows, const float **sc)
{
	struct gpu *g = CB(be)->g;
	int ok = nout >= 1 && nout <= FUSE_MAX && nd % 32 == 0 && nd <= 16384 && ne0 % nd == 0;

	for (int i = 0; ok && i < nal; i++)
		ok = al[i] != NULL && ((uintptr_t)al[i] & 15) == 0;
	for (int i = 0; ok && i < nout; i++) {
		ok = (ex ? fusable_type(g, W[i]->type, m) :
		    gpu_can_matvec_q8_step(g, W[i]->type, m)) && W[i]->ne0 == ne0;
		tp[i] = W[i]->type, d[i] = W[i]->data, rows[i] = W[i]->ne1, sc[i] = wscale(W[i]);
	}
	return ok;
}

static int
cu_rmsnorm_matmul(struct backend *be, const float *x, int m, int n,
    const float *nw, float eps, int nout, const struct backend_weight *const *W,
    float *const *y)
{
	int tp[FUSE_MAX];
	const void *d[FUSE_MAX], *al[] = { x, nw };
	int64_t rows[FUSE_MAX];
	const float *sc[FUSE_MAX];

	if (norm_fusable(be, 0, nout, W, n, n, m, al, 2, tp, d, rows, sc))	/* norm + quantization */
		return gpu_rmsnorm_matvec_q8_multi(CB(be)->g, x, nw, eps, nout, tp, d, rows, n,
		    m, y, sc) ? gfail(be, "rmsnorm_matmul") : 0;
	float *t = (float *)buf_get(be, &CB(be)->t0, (size_t)m * n * 4);

	if (t == NULL || cu_rmsnorm(be, x, n, nw, t, n, m, n, eps))
		return -1;
	return products(be, nout, W, t, y, m);
}

/* x += t, norm, quantization in one kernel; else cu_add, then cu_rmsnorm_matmul. */
static int
cu_add_rmsnorm_matmul(struct backend *be, float *x, const float *t, int m, int n,
    const float *nw, float eps, int nout, const struct backend_weight *const *W,
    float *const *y)
{
	int tp[FUSE_MAX];
	const void *d[FUSE_MAX], *al[] = { x, t, nw };
	int64_t rows[FUSE_MAX];
	const float *sc[FUSE_MAX];

	if (norm_fusable(be, 1, nout, W, n, n, m, al, 3, tp, d, rows, sc))
		return gpu_rmsnorm_matvec_q8_ex(CB(be)->g, x, t, NULL, nw, n, eps, nout, tp, d, rows,
		    n, m, y, sc) ? gfail(be, "add_rmsnorm_matmul") : 0;
	if (gpu_add(CB(be)->g, x, t, x, (int64_t)m * n) != 0)
		return gfail(be, "add");
	return cu_rmsnorm_matmul(be, x, m, n, nw, eps, nout, W, y);
}

static int cu_matmul_swiglu(struct backend *, const struct backend_weight *,
    const struct backend_weight *, const float *, int, float *);

/*
 * The FFN in four kernels: the add, norm and quantization; gate and up in
 * one launch; SwiGLU in the kernel that quantizes the down product's
 * input; the down product.  Else the plain add and norm, then (a down of
 * a type pre_fusable takes: the K-quants) gate and up, SwiGLU in the down
 * product's quantization, the product; else the plain ops.
 */
static int
cu_ffn(struct backend *be, float *x, const float *t, int m, int n, const float *nw,
    float eps, const struct backend_weight *wg, const struct backend_weight *wu,
    const struct backend_weight *wd, float *f, float *u, float *y)
{
	struct gpu *g = CB(be)->g;
	const struct backend_weight *W[2] = { wg, wu };
	float *Y[2] = { f, u };
	int tp[2];
	const void *d[2], *al[] = { x, nw, t };
	int64_t rows[2];
	const float *sc[2];

	if (fusable_type(g, wd->type, m) &&
	    norm_fusable(be, 1, 2, W, n, n, m, al, t != NULL ? 3 : 2, tp, d, rows, sc)) {
		if (gpu_rmsnorm_matvec_q8_ex(g, x, t, NULL, nw, n, eps, 2, tp, d, rows, n, m, Y, sc) ||
		    gpu_matvec_q8_pre(g, GPU_PRE_SWIGLU, f, u, 0, 0, wd->type, wd->data, wd->ne1,
		    wd->ne0, m, y, wscale(wd)))
			return gfail(be, "ffn");
		return 0;
	}
	if (t != NULL && gpu_add(g, x, t, x, (int64_t)m * n) != 0)
		return gfail(be, "add");
	if (cu_rmsnorm(be, x, n, nw, y, n, m, n, eps))
		return -1;
	if (pre_fusable(g, wd->type, m) && CW(wd)->ne0p == wd->ne0) {	/* SwiGLU in the quantization */
		if (products(be, 2, W, y, Y, m) != 0)
			return -1;
		return gpu_matvec_q8_pre(g, GPU_PRE_SWIGLU, f, u, 0, 0, wd->type, wd->data, wd->ne1,
		    wd->ne0, m, y, wscale(wd)) ? gfail(be, "ffn") : 0;
	}
	if (cu_matmul_swiglu(be, wg, wu, y, m, f))
		return -1;
	return product(be, wd, f, y, m);
}

/* The gated norm per head, quantization in one kernel; else the two ops. */
static int
cu_rmsnorm_gated_matmul(struct backend *be, float *x, const float *z, const float *nw,
    int m, int nh, int n, float eps, const struct backend_weight *w, float *y)
{
	int tp;
	const void *d, *al[] = { x, z, nw };
	int64_t rows;
	const float *sc;
	const struct backend_weight *W[1] = { w };

	if (norm_fusable(be, 1, 1, W, (int64_t)nh * n, n, m, al, 3, &tp, &d, &rows, &sc))
		return gpu_rmsnorm_matvec_q8_ex(CB(be)->g, x, NULL, z, nw, n, eps, 1, &tp, &d, &rows,
		    (int64_t)nh * n, m, &y, &sc) ? gfail(be, "rmsnorm_gated_matmul") : 0;
	if (gpu_rmsnorm_gated(CB(be)->g, x, z, nw, x, m * nh, n, eps) != 0)
		return gfail(be, "rmsnorm_gated");
	return product(be, w, x, y, m);
}

static int cu_mul_sigmoid(struct backend *, float *, int, const float *, int, int, int);

/* The sigmoid gate in the kernel that quantizes the product's input; else the two ops. */
static int
cu_mul_sigmoid_matmul(struct backend *be, float *x, const float *g, int ldg, int m, int nh,
    int hd, const struct backend_weight *w, float *y)
{
	if (fusable_type(CB(be)->g, w->type, m) && hd % 32 == 0)
		return gpu_matvec_q8_pre(CB(be)->g, GPU_PRE_SIGMOID, x, g, hd, ldg, w->type, w->data,
		    w->ne1, w->ne0, m, y, wscale(w)) ? gfail(be, "mul_sigmoid_matmul") : 0;
	if (cu_mul_sigmoid(be, x, hd, g, ldg, m * nh, hd) != 0)
		return -1;
	return product(be, w, x, y, m);
}

static int
cu_matmul_swiglu(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, const float *x, int m, float *y)
{
	size_t n = (size_t)m * wg->ne1;
	float *u = (float *)buf_get(be, &CB(be)->t1, n * 4);
	const struct backend_weight *W[2] = { wg, wu };
	float *Y[2] = { y, u };

	if (u == NULL || products(be, 2, W, x, Y, m))
		return -1;
	return gpu_swiglu(CB(be)->g, y, u, y, n) ? gfail(be, "swiglu") : 0;
}

static int
cu_swiglu(struct backend *be, const float *g, const float *u, float *y, size_t n)
{
	return gpu_swiglu(CB(be)->g, g, u, y, n) ? gfail(be, "swiglu") : 0;
}

/* The frequencies 1 / theta^(2i/dim), i < n_rot/2, of (theta, n_rot, dim) on
 * the device, as the CPU backend computes them (dim: n_rot, or the head
 * size for BACKEND_ROPE_PROP); made once, outside any recording. */
static const float *
rope_table(struct backend *be, float theta, int n_rot, int dim)
{
	struct backend_cuda *c = CB(be);
	struct rope_table *t;
	int half = n_rot / 2;
	float *h;

	for (int i = 0; i < c->n_rope; i++)
		if (c->rope[i].theta == theta && c->rope[i].n_rot == n_rot && c->rope[i].dim == dim)
			return c->rope[i].d;
	if (c->n_rope == CUDA_ROPE_TABLES) {
		util_err(be->err, "rope: more than %d frequency tables", CUDA_ROPE_TABLES);
		return NULL;
	}
	if (gpu_capturing(c->g)) {
		util_err(be->err, "rope: frequency table made while recording a graph");
		return NULL;
	}
	if ((h = (float *)malloc((size_t)half * 4)) == NULL) {
		util_err(be->err, "rope: out of memory");
		return NULL;
	}
	for (int i = 0; i < half; i++)	/* as the CPU backend computes them */
		h[i] = 1.0f / powf(theta, (float)(2 * i) / (float)dim);
	t = &c->rope[c->n_rope];
	t->d = (float *)upload(be, h, (size_t)half * 4);
	free(h);
	if (t->d == NULL)
		return NULL;
	t->theta = theta, t->n_rot = n_rot, t->dim = dim;
	c->n_rope++;
	return t->d;
}

/* The rotated dims' span of a mode: the head for BACKEND_ROPE_PROP, else n_rot. */
static int
rope_dim(int mode, int hs, int n_rot)
{
	return mode & BACKEND_ROPE_PROP ? hs : n_rot;
}

/* k_rope over m rows at positions pos (device memory), frequencies inv (rope_table). */
static int
rope_launch(struct backend *be, float *x, int ldx, int n_head, int hs, int m,
    const int32_t *pos, const float *inv, int n_rot, float theta, int mode)
{
	int half = n_rot / 2, neox = (mode & ~(BACKEND_ROPE_GGML | BACKEND_ROPE_PROP)) ==
	    BACKEND_ROPE_NEOX;
	unsigned nt = half < 128 ? (unsigned)(half + 31) / 32 * 32 : 128;
	dim3 grid(n_head, m, nblk(half, nt));

	gpu_launch(CB(be)->g, k_rope, grid, nt, 0, x, ldx, hs, pos, inv, half, neox,
	    neox ? rope_dim(mode, hs, n_rot) / 2 : 1, rope_ts(theta, n_rot, mode));
	return launched(be, "rope");
}

static int
cu_rope(struct backend *be, float *x, int ldx, int n_head, int hs, int m,
    const int32_t *pos, int n_rot, float theta, int mode)
{
	/* first: it may upload and sync */
	const float *inv = rope_table(be, theta, n_rot, rope_dim(mode, hs, n_rot));
	const int32_t *d = inv ? (const int32_t *)put_small(be, pos, (size_t)m * 4) : NULL;

	return d == NULL ? -1 : rope_launch(be, x, ldx, n_head, hs, m, d, inv, n_rot, theta, mode);
}

static int
cu_rope_dpos(struct backend *be, float *x, int ldx, int n_head, int hs, int m,
    const int32_t *d_pos, int n_rot, float theta, int mode)
{
	const float *inv = rope_table(be, theta, n_rot, rope_dim(mode, hs, n_rot));

	return inv == NULL ? -1 : rope_launch(be, x, ldx, n_head, hs, m, d_pos, inv, n_rot,
	    theta, mode);
}

static int
cu_kv_store(struct backend *be, float *kc, float *vc, const float *k, const float *v,
    int kvd, int m, const int32_t *d_pos, int n_ctx)
{
	gpu_launch(CB(be)->g, k_kv_store, dim3(nblk(kvd, 256), m, 2), 256, 0, kc, vc, k, v,
	    kvd, d_pos, n_ctx);
	return launched(be, "kv_store");
}

static int
cu_kv_store_seqs(struct backend *be, const float *k, const float *v, int kvd, int n,
    const struct backend_kv_seq *sq)
{
	struct cu_kv_seqs Q;

	for (int i0 = 0, r0 = 0; i0 < n; i0 += CU_KV_SEQS) {
		int i1 = n - i0 < CU_KV_SEQS ? n : i0 + CU_KV_SEQS, most = 0;

		for (int i = i0; i < i1; i++) {
			Q.s[i - i0] = (struct cu_kv_seq){ sq[i].kc, sq[i].vc, r0, sq[i].rows,
			    sq[i].pos };
			r0 += sq[i].rows;
			most = sq[i].rows > most ? sq[i].rows : most;
		}
		if (most == 0)
			continue;
		gpu_launch(CB(be)->g, k_kv_store_seqs, dim3(nblk(kvd, 256), most, 2 * (i1 - i0)),
		    256, 0, k, v, kvd, Q);
		if (launched(be, "kv store seqs") != 0)
			return -1;
	}
	return 0;
}

/*
 * k_qk_rope when the heads fit it (every operand it reads or writes
 * 16-byte aligned, hd and qhs multiples of 4, one float4 a thread: the
 * conditions under which cu_rmsnorm takes k_rmsnorm4<1>; not
 * BACKEND_ROPE_PROP, whose pairs span the head stride as backend_rope
 * sees it); else the norms, ropes and store one by one.
 */
static int
cu_qk_norm_rope(struct backend *be, const struct backend_qkn *a, float *q, float *k,
    float *v, int m, const int32_t *pos, const int32_t *d_pos, float *kc, float *vc,
    int n_ctx)
{
	int hd = a->head_dim, nh = a->n_head, nkv = a->n_kv_head, kvd = nkv * hd;
	int vb = kc != NULL || a->v_norm;	/* v's heads have blocks */
	/* (NULL counts as aligned; v is touched only with the store or its norm) */
	const void *al[] = { q, k, a->qn, a->kn, kc, vc, vb ? v : NULL };
	int ok = hd % 4 == 0 && a->qhs % 4 == 0 && norm_vec(hd / 4) == 1 &&
	    !(a->mode & BACKEND_ROPE_PROP);

	for (size_t i = 0; ok && i < sizeof al / sizeof al[0]; i++)
		ok = ((uintptr_t)al[i] & 15) == 0;
	/* first: they may upload and sync */
	const float *inv = rope_table(be, a->theta, a->n_rot, rope_dim(a->mode, hd, a->n_rot));
	const float *qinv = rope_table(be, a->theta, a->n_rot, rope_dim(a->mode, a->qhs, a->n_rot));
	if (inv == NULL || qinv == NULL)
		return -1;
	if (pos != NULL && (d_pos = (const int32_t *)put_small(be, pos, (size_t)m * 4)) == NULL)
		return -1;
	if (!ok) {
		if (cu_rmsnorm(be, q, a->qhs, a->qn, q, a->qhs, m * nh, hd, a->eps) ||
		    cu_rmsnorm(be, k, hd, a->kn, k, hd, m * nkv, hd, a->eps) ||
		    (a->v_norm && cu_rmsnorm(be, v, hd, NULL, v, hd, m * nkv, hd, a->eps)) ||
		    rope_launch(be, q, nh * a->qhs, nh, a->qhs, m, d_pos, qinv, a->n_rot, a->theta,
		    a->mode) || rope_launch(be, k, kvd, nkv, hd, m, d_pos, inv, a->n_rot, a->theta,
		    a->mode))
			return -1;
		return kc != NULL ? cu_kv_store(be, kc, vc, k, v, kvd, m, d_pos, n_ctx) : 0;
	}
	struct qkr_args A = { q, k, kc, vc, v, a->qn, a->kn, inv, d_pos, nh, nkv, hd, a->qhs,
	    a->n_rot / 2, (a->mode & ~BACKEND_ROPE_GGML) == BACKEND_ROPE_NEOX, n_ctx, a->v_norm,
	    a->eps, rope_ts(a->theta, a->n_rot, a->mode) };
	dim3 grid((unsigned)(nh + nkv + (vb ? nkv : 0)), (unsigned)m);

	gpu_launch(CB(be)->g, k_qk_rope, grid, norm_threads(hd / 4), (size_t)hd * 4, A);
	return launched(be, "qk_norm_rope");
}

/* The longest head the attention kernels take (gpu.h's GPU_HEAD_MAX, 512:
 * Gemma-4's global layers): backend_head_max. */
#define CUDA_HEAD_MAX GPU_HEAD_MAX

static int
cu_head_max(const struct backend *be)
{
	return CUDA_HEAD_MAX;
}

/* backend_attn_hi: the split-K kernel honours hi and ring (gpu_attention_hi). */
static int
cu_attn_hi(const struct backend *be)
{
	return 1;
}

/* The keys rows r0 .. r0 + nq - 1 at p0 see: up to the last hi[r] (hi NULL: the last row's). */
static int
attn_keys(const int32_t *hi, int p0, int r0, int nq)
{
	int n = p0 + r0 + nq;

	for (int r = r0; hi != NULL && r < r0 + nq; r++)
		n = hi[r] + 1 > n ? hi[r] + 1 : n;
	return n;
}

/* Rows r0 .. r0 + nq - 1 of attend's call (at p0, d_pos NULL) by the split-K kernel
 * with a->hi (d_hi: its copy in device memory) and a->ring. */
static int
attend_hi(struct backend *be, const struct backend_attn *a, const float *qp, const float *kc,
    const float *vc, int r0, int nq, int p0, const int32_t *d_hi, float *o)
{
	size_t off = (size_t)r0 * a->n_head * a->head_dim;

	return gpu_attention_hi(CB(be)->g, qp + off, kc, vc, o + off, nq, a->n_head,
	    a->n_kv_head, a->head_dim, p0 + r0, a->scale, a->window, d_hi ? d_hi + r0 : NULL,
	    attn_keys(a->hi, p0, r0, nq), a->ring);
}

/* m rows of nh query heads of hd (qhs apart in a row, rows ldq apart) packed
 * into the backend's t0 scratch, rows nh hd apart; NULL when that fails. */
static const float *
q_packed(struct backend *be, const float *q, int ldq, int qhs, int m, int nh, int hd)
{
	float *t = (float *)buf_get(be, &CB(be)->t0, (size_t)m * nh * hd * 4);

	if (t == NULL)
		return NULL;
	if (ldq == nh * qhs)
		return copy_rows(be, t, hd, q, qhs, hd, (size_t)m * nh) ? NULL : t;
	for (int r = 0; r < m; r++)
		if (copy_rows(be, t + (size_t)r * nh * hd, hd, q + (size_t)r * ldq, qhs, hd, nh))
			return NULL;
	return t;
}

/* 1 when every one of the m rows at p0 sees the call's last key (hi[r] = p0 + m - 1). */
static int
hi_full(const int32_t *hi, int m, int p0)
{
	for (int r = 0; hi != NULL && r < m; r++)
		if (hi[r] != p0 + m - 1)
			return 0;
	return hi != NULL;
}

/*
 * Attention at p0, or at *d_pos when d_pos is not NULL (caches of n_ctx
 * rows); a prompt of more than the step rows at p0 by gpu_attention_prefill
 * (heads a multiple of 32), a sliding window's too (a->window > 0: the
 * kernel walks each block's windows only); with a->hi or a->ring by the
 * split-K kernel 16 rows at a time (gpu_attention_hi), save one a->hi of
 * rows that all see the call's last key (a vision tower's whole image, no
 * window): gpu_attention_prefill's full mode then, heads a multiple of 4
 * (the 31B tower's are 72).
 */
static int
attend(struct backend *be, const struct backend_attn *a, const float *q, int ldq, int qhs,
    const float *kc, const float *vc, int m, int p0, const int32_t *d_pos, int n_ctx,
    float *o)
{
	struct backend_cuda *c = CB(be);
	int nh = a->n_head, hd = a->head_dim, full = hi_full(a->hi, m, p0);
	const float *qp = q;
	const int32_t *d_hi = NULL;

	if ((qhs != hd || ldq != nh * hd) && (qp = q_packed(be, q, ldq, qhs, m, nh, hd)) == NULL)
		return -1;
	/* a prompt: flash attention (its own order; decode and verify, m <= the
	 * step rows, keep the split-K kernel's, whose rows are batch-invariant) */
	if (d_pos == NULL && m > gpu_step_rows(c->g) && hd <= GPU_HEAD_MAX &&
	    (hd % 32 == 0 || (full && hd % 4 == 0)) && (a->window == 0 || a->hi == NULL) &&
	    (a->hi == NULL || full) && a->ring == 0 &&
	    (((uintptr_t)qp | (uintptr_t)kc | (uintptr_t)vc | (uintptr_t)o) & 15) == 0) {
		if (gpu_attention_prefill(c->g, qp, kc, vc, o, m, nh, a->n_kv_head, hd, p0,
		    a->scale, full, a->window) != 0)
			return gfail(be, "attention");
		return 0;
	}
	if (a->hi != NULL && (d_hi = (const int32_t *)put_small(be, a->hi, (size_t)m * 4)) == NULL)
		return -1;
	for (int r0 = 0; r0 < m; r0 += GPU_MATVEC_MAX_ROWS) {
		int nq = m - r0 < GPU_MATVEC_MAX_ROWS ? m - r0 : GPU_MATVEC_MAX_ROWS, rc;
		size_t off = (size_t)r0 * nh * hd;
		if (a->hi != NULL || a->ring > 0)	/* d_pos NULL: backend.c refuses them */
			rc = attend_hi(be, a, qp, kc, vc, r0, nq, p0, d_hi, o);
		else if (a->window > 0)	/* d_pos[r0] = d_pos[0] + r0 */
			rc = gpu_attention_window(c->g, qp + off, kc, vc, o + off, nq, nh,
			    a->n_kv_head, hd, p0 + r0, d_pos != NULL ? d_pos + r0 : NULL, n_ctx,
			    a->scale, a->window);
		else if (d_pos != NULL)
			rc = gpu_attention_dpos(c->g, qp + off, kc, vc, o + off, nq, nh, a->n_kv_head,
			    hd, d_pos + r0, n_ctx, a->scale);
		else
			rc = gpu_attention(c->g, qp + off, kc, vc, o + off, nq, nh, a->n_kv_head, hd,
			    p0 + r0, a->scale);
		if (rc != 0)
			return gfail(be, "attention");
	}
	return 0;
}

static int
cu_attention(struct backend *be, const struct backend_attn *a, const float *q,
    int ldq, int qhs, const float *kc, const float *vc, int m, int p0, float *o)
{
	return attend(be, a, q, ldq, qhs, kc, vc, m, p0, NULL, 0, o);
}

static int
cu_attention_dpos(struct backend *be, const struct backend_attn *a, const float *q,
    int ldq, int qhs, const float *kc, const float *vc, int m, const int32_t *d_pos,
    int n_ctx, float *o)
{
	return attend(be, a, q, ldq, qhs, kc, vc, m, 0, d_pos, n_ctx, o);
}

/* The alignment class the split-K kernel's loads depend on: 16 bytes, 8, less. */
static int
att_align(uintptr_t p)
{
	return (p & 15) == 0 ? 0 : (p & 7) == 0 ? 1 : 2;
}

/*
 * backend_attention_seqs: when every sequence's own call would take the
 * plain split-K kernel (no window or ring, at most GPU_MATVEC_MAX_ROWS
 * rows and not past the step rows) with the loads the group's pointers
 * give, q repacked once for the group (as each call repacks its rows) and
 * gpu_attention_seqs' two launches a GPU_ATT_SEQS sequences; otherwise
 * each sequence's attend.  The bits are the calls' either way (the CUDA
 * kernels read neither ggml nor batched).
 */
static int
cu_attention_seqs(struct backend *be, const struct backend_attn *a, int n,
    const struct backend_kv_seq *sq, const float *q, int ldq, int qhs, float *o)
{
	struct backend_cuda *c = CB(be);
	int nh = a->n_head, hd = a->head_dim, m = 0, plain = a->window == 0 && a->ring == 0;
	int repack = qhs != hd || ldq != nh * hd, cls = -1;
	size_t od = (size_t)nh * hd;
	struct gpu_att_seq gs[BACKEND_ROWS_MAX];
	const float *qp = q;

	for (int i = 0; i < n; i++) {
		if (sq[i].rows > GPU_MATVEC_MAX_ROWS || sq[i].rows > gpu_step_rows(c->g))
			plain = 0;
		m += sq[i].rows;
	}
	if (plain && repack && (qp = q_packed(be, q, ldq, qhs, m, nh, hd)) == NULL)
		return -1;
	/* each sequence's own call: its q at t0 (repacked) or at its rows; the group's:
	 * every row's, k and v: one class for all, or the loads may differ */
	uintptr_t all = 0;
	for (int i = 0, r = 0; plain && i < n; r += sq[i++].rows) {
		uintptr_t kv = (uintptr_t)sq[i].kc | (uintptr_t)sq[i].vc;
		uintptr_t own = kv | (repack ? (uintptr_t)qp : (uintptr_t)(q + (size_t)r * ldq));

		if (sq[i].rows == 0)
			continue;
		all |= kv | (uintptr_t)(qp + (size_t)r * od);
		if (cls < 0)
			cls = att_align(own);
		else if (att_align(own) != cls)
			plain = 0;
	}
	if (plain && cls >= 0 && att_align(all) != cls)
		plain = 0;
	if (!plain) {
		for (int i = 0, r = 0; i < n; r += sq[i++].rows)
			if (sq[i].rows > 0 && attend(be, a, q + (size_t)r * ldq, ldq, qhs, sq[i].kc,
			    sq[i].vc, sq[i].rows, sq[i].pos, NULL, 0, o + r * od) != 0)
				return -1;
		return 0;
	}
	for (int i0 = 0, r0 = 0; i0 < n; i0 += BACKEND_ROWS_MAX) {
		int i1 = n - i0 < BACKEND_ROWS_MAX ? n : i0 + BACKEND_ROWS_MAX, rows = 0;

		for (int i = i0; i < i1; i++) {
			gs[i - i0] = (struct gpu_att_seq){ sq[i].kc, sq[i].vc, sq[i].rows, sq[i].pos };
			rows += sq[i].rows;
		}
		if (gpu_attention_seqs(c->g, qp + (size_t)r0 * od, o + (size_t)r0 * od, i1 - i0, gs,
		    nh, a->n_kv_head, hd, a->scale) != 0)
			return gfail(be, "attention");
		r0 += rows;
	}
	return 0;
}

static int
cu_mul_sigmoid(struct backend *be, float *x, int ldx, const float *g, int ldg,
    int rows, int n)
{
	struct gpu *gp = CB(be)->g;

	for (int r0 = 0; r0 < rows; r0 += 65535) {
		int nr = rows - r0 < 65535 ? rows - r0 : 65535;
		float *xr = x + (size_t)r0 * ldx;
		if (gpu_sigmoid_mul(gp, xr, ldx, g + (size_t)r0 * ldg, ldg, xr, ldx, nr, n))
			return gfail(be, "mul_sigmoid");
	}
	return 0;
}

template <int NS>
static int
conv_r(struct backend *be, const float *x, int ldx, int m, int n_ch, const float *w,
    float *state, float *snap, float *y)
{
	struct gpu *g = CB(be)->g;
	unsigned nc = (unsigned)((m + CONV_ROWS - 1) / CONV_ROWS);

	gpu_launch(g, k_conv_r<NS>, dim3(nblk(n_ch, 128), nc), 128, 0, x, ldx, m, n_ch, w, state,
	    snap, y, nc == 1);
	if (launched(be, "conv1d") != 0)
		return -1;
	if (nc > 1) {
		gpu_launch(g, k_conv_state<NS>, nblk(n_ch, 128), 128, 0, x, ldx, m, n_ch, state);
		return launched(be, "conv1d state");
	}
	return 0;
}

static int
cu_conv1d_silu(struct backend *be, const float *x, int ldx, int m, int n_ch,
    const float *w, int d_conv, float *state, float *snap, float *y)
{
	if (d_conv > 17)
		return util_err(be->err, "conv1d: kernel size %d > 17", d_conv);
	switch (d_conv) {	/* the window in registers; other sizes below */
	case 2: return conv_r<1>(be, x, ldx, m, n_ch, w, state, snap, y);
	case 3: return conv_r<2>(be, x, ldx, m, n_ch, w, state, snap, y);
	case 4: return conv_r<3>(be, x, ldx, m, n_ch, w, state, snap, y);
	case 5: return conv_r<4>(be, x, ldx, m, n_ch, w, state, snap, y);
	}
	gpu_launch(CB(be)->g, k_conv, nblk(n_ch, 128), 128, 0, x, ldx, m, n_ch, w, d_conv,
	    state, snap, y);
	return launched(be, "conv1d");
}

/*
 * One launch of the delta rule's kernel for key heads of g->dk over the
 * blocks (head, columns, z): k_gdn<dk> (Q NULL) or k_gdn_seqs<dk> (Q, grid.z
 * its sequences) at 16, 32, 64 and 128; at other sizes up to GDN_DK_REG the
 * masked k_gdn_pad<DK> / k_gdn_pad_seqs<DK>, DK the next multiple of 16 up
 * (the registers of DK rows, dk of them used); past it k_gdn_wide /
 * k_gdn_wide_seqs.  UNRUN on a GPU: the padded and wide kernels were
 * compiled for sm_90 with none to run them (kernel-check's 'be gdn' arms at
 * dk 20, 48, 80, 96, 100, 160, 300 prove them there); tools/gdn-step-emu.cc
 * runs their text on the CPU (the indexing, masks and orders of sums).
 */
#define GDN_PAD(DK)	(Q != NULL ? gpu_launch(gg, k_gdn_pad_seqs<DK>, nb, nt, 0, P, *Q) : \
			    gpu_launch(gg, k_gdn_pad<DK>, nb, nt, 0, P))
#define GDN_REG(DK)	(Q != NULL ? gpu_launch(gg, k_gdn_seqs<DK>, nb, nt, 0, A, *Q) : \
			    gpu_launch(gg, k_gdn<DK>, nb, nt, 0, A))

static void
gdn_launch(struct backend *be, const struct backend_gdn *g, const struct gdn_args &A,
    const struct cu_seqs *Q, unsigned nz)
{
	struct gpu *gg = CB(be)->g;
	int dk = g->dk, wide = dk > GDN_DK_REG;
	struct gdn_pargs P = { A, dk };
	dim3 nt(GDN_COLS * GDN_G);
	unsigned cols = wide ? GDN_COLS * GDN_G : GDN_COLS;
	dim3 nb((unsigned)g->n_v_heads, (unsigned)((g->dv + cols - 1) / cols), nz);

	switch (wide ? 0 : dk) {
	case 0:
		if (Q != NULL)
			gpu_launch(gg, k_gdn_wide_seqs, nb, nt, 0, A, *Q, dk);
		else
			gpu_launch(gg, k_gdn_wide, nb, nt, 0, A, dk);
		break;
	case 16: GDN_REG(16); break;
	case 32: GDN_REG(32); break;
	case 64: GDN_REG(64); break;
	case 128: GDN_REG(128); break;
	default:
		switch ((dk + 15) / 16) {
		case 1: GDN_PAD(16); break;
		case 2: GDN_PAD(32); break;
		case 3: GDN_PAD(48); break;
		case 4: GDN_PAD(64); break;
		case 5: GDN_PAD(80); break;
		case 6: GDN_PAD(96); break;
		case 7: GDN_PAD(112); break;
		default: GDN_PAD(128); break;
		}
	}
}

#undef GDN_PAD
#undef GDN_REG

/* The sizes the kernels take: any key head (backend.c has checked dk, dv > 0),
 * value heads up to the grid's 65535 blocks of columns. */
static int
gdn_bad(struct backend *be, const struct backend_gdn *g)
{
	if (g->dv > 65535 * GDN_COLS)
		return util_err(be->err, "gdn: value head size %d > %d", g->dv,
		    65535 * GDN_COLS);
	return 0;
}

static int
gdn_run(struct backend *be, const struct backend_gdn *g, int m, const float *qkv,
    int ld, const float *a, const float *b, const float *ssm_a,
    const float *dt_bias, float *S, float *snap, float *o)
{
	struct gdn_args A = { qkv, a, b, ssm_a, dt_bias, S, snap, o, ld, m, g->n_k_heads,
	    g->n_v_heads, g->dv, g->v_tiled, g->hf_l2, g->eps };

	if (gdn_bad(be, g) != 0)
		return -1;
	gdn_launch(be, g, A, NULL, 1);
	return launched(be, "gdn");
}

static int
cu_gdn_step(struct backend *be, const struct backend_gdn *g, int m,
    const float *qkv, int ld, const float *a, const float *b,
    const float *ssm_a, const float *dt_bias, float *S, float *snap, float *o)
{
	return gdn_run(be, g, m, qkv, ld, a, b, ssm_a, dt_bias, S, snap, o);
}

/*
 * The _seqs forms: sequences sq[0..n) in launches of CU_SEQS (grid.z the
 * sequence), each block running the code its own sequence's launch runs
 * (the same bits).  fill: Q from sq[i0..i1), *r0 the first's row (moved
 * past the last's); the most rows a sequence of them has.
 */
static int
seqs_fill(struct cu_seqs *Q, const struct backend_seq *sq, int i0, int i1, int *r0)
{
	int most = 0;

	for (int i = i0; i < i1; i++) {
		Q->s[i - i0] = (struct cu_seq){ sq[i].state, sq[i].snap, *r0, sq[i].rows };
		*r0 += sq[i].rows;
		most = sq[i].rows > most ? sq[i].rows : most;
	}
	return most;
}

template <int NS>
static int
conv_r_seqs(struct backend *be, const float *x, int ldx, int n_ch, const float *w, float *y,
    const struct cu_seqs *Q, int nq, int most)
{
	struct gpu *g = CB(be)->g;
	unsigned nc = (unsigned)((most + CONV_ROWS - 1) / CONV_ROWS);

	gpu_launch(g, k_conv_r_seqs<NS>, dim3(nblk(n_ch, 128), nc, nq), 128, 0, x, ldx, n_ch, w,
	    y, *Q);
	if (launched(be, "conv1d seqs") != 0)
		return -1;
	if (nc > 1) {
		gpu_launch(g, k_conv_state_seqs<NS>, dim3(nblk(n_ch, 128), 1, nq), 128, 0, x, ldx,
		    n_ch, *Q);
		return launched(be, "conv1d seqs state");
	}
	return 0;
}

static int
cu_conv1d_silu_seqs(struct backend *be, const float *x, int ldx, int n,
    const struct backend_seq *sq, int n_ch, const float *w, int d_conv, float *y)
{
	struct cu_seqs Q;
	int rc = 0;

	if (d_conv > 17)
		return util_err(be->err, "conv1d: kernel size %d > 17", d_conv);
	for (int i0 = 0, r0 = 0; i0 < n && rc == 0; i0 += CU_SEQS) {
		int i1 = n - i0 < CU_SEQS ? n : i0 + CU_SEQS, nq = i1 - i0;
		int most = seqs_fill(&Q, sq, i0, i1, &r0);

		switch (most > 0 ? d_conv : 0) {	/* as cu_conv1d_silu; 0: no rows */
		case 0: break;
		case 2: rc = conv_r_seqs<1>(be, x, ldx, n_ch, w, y, &Q, nq, most); break;
		case 3: rc = conv_r_seqs<2>(be, x, ldx, n_ch, w, y, &Q, nq, most); break;
		case 4: rc = conv_r_seqs<3>(be, x, ldx, n_ch, w, y, &Q, nq, most); break;
		case 5: rc = conv_r_seqs<4>(be, x, ldx, n_ch, w, y, &Q, nq, most); break;
		default:
			gpu_launch(CB(be)->g, k_conv_seqs, dim3(nblk(n_ch, 128), 1, nq), 128, 0, x,
			    ldx, n_ch, w, d_conv, y, Q);
			rc = launched(be, "conv1d seqs");
		}
	}
	return rc;
}

static int
cu_gdn_step_seqs(struct backend *be, const struct backend_gdn *g, int n,
    const struct backend_seq *sq, const float *qkv, int ld, const float *a, const float *b,
    const float *ssm_a, const float *dt_bias, float *o)
{
	struct gdn_args A = { qkv, a, b, ssm_a, dt_bias, NULL, NULL, o, ld, 0, g->n_k_heads,
	    g->n_v_heads, g->dv, g->v_tiled, g->hf_l2, g->eps };
	struct cu_seqs Q;

	if (gdn_bad(be, g) != 0)
		return -1;
	for (int i0 = 0, r0 = 0; i0 < n; i0 += CU_SEQS) {
		int i1 = n - i0 < CU_SEQS ? n : i0 + CU_SEQS;

		if (seqs_fill(&Q, sq, i0, i1, &r0) == 0)	/* no rows */
			continue;
		gdn_launch(be, g, A, &Q, (unsigned)(i1 - i0));
		if (launched(be, "gdn seqs") != 0)
			return -1;
	}
	return 0;
}

/*
 * The chunked form (cuda/gdn_chunk.cuh has the math): k_gdn_prep, block
 * (h, n) for value head h and chunk n, what does not depend on the state, to
 * the scratch; k_gdn_chunk, block (h, c) for head h and the state's columns
 * c * GDNC_VS .., the chunks in order, the state in shared memory the whole
 * way.  GDNC_NT threads; the phases run between barriers.
 */
template <int DK, int DKR = DK>
__global__ void __launch_bounds__(GDNC_NT)
k_gdn_prep(struct gdnc_args A)
{
	extern __shared__ float4 gdnc_mem[];
	struct gdnc_sh s;
	int h = blockIdx.x, n = blockIdx.y, tid = threadIdx.x, t0 = n * GDNC_C;
	int kh = A.v_tiled ? h % A.nk : h / (A.nv / A.nk);
	int L = A.m - t0 < GDNC_C ? A.m - t0 : GDNC_C;
	struct gdnc_part pt = gdnc_part_of(A, n, h);

	pdl_enter();
	gdnc_carve_prep<DK>((float *)gdnc_mem, &s);
	gdnc_load<DK, DKR>(A, s, h, kh, t0, L, tid);
	__syncthreads();
	gdnc_norm<DK, DKR>(A, s, tid);
	__syncthreads();
	gdnc_scale<DK>(s, L, tid);
	__syncthreads();
	gdnc_prep_prod<DK>(s, pt, tid);
	__syncthreads();
	if (tid < GDNC_C)
		gdnc_prep_solve(s, pt, tid);
}

template <int DK, int DKR = DK>
__global__ void __launch_bounds__(GDNC_NT, 1)
k_gdn_chunk(struct gdnc_args A)
{
	extern __shared__ float4 gdnc_mem[];
	struct gdnc_sh s;
	int h = blockIdx.x, j0 = blockIdx.y * GDNC_VS, tid = threadIdx.x;
	int kh = A.v_tiled ? h % A.nk : h / (A.nv / A.nk);
	float *Sh = A.S + (size_t)h * DKR * A.dv, ys[8];

	pdl_enter();
	gdnc_carve<DK>((float *)gdnc_mem, &s);
	for (int i = tid; i < DK * GDNC_VS; i += GDNC_NT)
		if constexpr (DKR == DK)
			s.S[i] = Sh[(size_t)(i / GDNC_VS) * A.dv + j0 + i % GDNC_VS];
		else	/* the padding's rows zero */
			s.S[i] = i < DKR * GDNC_VS ? Sh[(size_t)(i / GDNC_VS) * A.dv + j0 +
			    i % GDNC_VS] : 0.0f;
	for (int t0 = 0; t0 < A.m; t0 += GDNC_C) {
		int L = A.m - t0 < GDNC_C ? A.m - t0 : GDNC_C;

		__syncthreads();	/* S loaded; the last chunk's q, k, P, V read */
		gdnc_mload<DK, DKR>(A, s, gdnc_part_of(A, t0 / GDNC_C, h), kh, t0, L, tid);
		__syncthreads();
		gdnc_ksqs<DK, DKR>(A, s, h, j0, t0, L, tid, ys);
		__syncthreads();
		gdnc_tx(s, tid);
		__syncthreads();
		gdnc_out<DK>(A, s, h, j0, t0, L, tid, ys);
	}
	__syncthreads();
	for (int i = tid; i < DKR * GDNC_VS; i += GDNC_NT)
		Sh[(size_t)(i / GDNC_VS) * A.dv + j0 + i % GDNC_VS] = s.S[i];
}

enum { GDNC_PIECE = 1024 };	/* rows a pair of launches: bounds the scratch */

template <int DK, int DKR = DK>
static int
gdn_chunk_run(struct backend *be, const struct gdnc_args *A0)
{
	size_t shp = gdnc_dim<DK>::PREP_FLOATS * sizeof(float);
	size_t shm = gdnc_dim<DK>::FLOATS * sizeof(float);
	int pm = A0->m < GDNC_PIECE ? A0->m : GDNC_PIECE, nv = A0->nv;
	struct gpu *g = CB(be)->g;
	cudaError_t e;
	struct gdnc_args A = *A0;

	A.scr = (float *)buf_get(be, &CB(be)->gdn,
	    (size_t)(pm + GDNC_C - 1) / GDNC_C * nv * GDNC_PREP * sizeof(float));
	if (A.scr == NULL)
		return -1;
	if ((e = cudaFuncSetAttribute(k_gdn_prep<DK, DKR>,
	    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shp)) != cudaSuccess ||
	    (e = cudaFuncSetAttribute(k_gdn_chunk<DK, DKR>,
	    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm)) != cudaSuccess) {
		(void)cudaGetLastError();
		return util_err(be->err, "gdn chunk: %zu bytes of shared memory: %s", shm,
		    cudaGetErrorString(e));
	}
	for (int r0 = 0; r0 < A0->m; r0 += GDNC_PIECE) {
		A.m = A0->m - r0 < GDNC_PIECE ? A0->m - r0 : GDNC_PIECE;
		A.qkv = A0->qkv + (size_t)r0 * A0->ld;
		A.a = A0->a + (size_t)r0 * nv;
		A.b = A0->b + (size_t)r0 * nv;
		A.o = A0->o + (size_t)r0 * nv * A0->dv;
		gpu_launch(g, k_gdn_prep<DK, DKR>, dim3((unsigned)nv, (unsigned)((A.m + GDNC_C - 1) /
		    GDNC_C)), GDNC_NT, shp, A);
		if (launched(be, "gdn prep") != 0)
			return -1;
		gpu_launch(g, k_gdn_chunk<DK, DKR>, dim3((unsigned)nv, (unsigned)(A.dv / GDNC_VS)),
		    GDNC_NT, shm, A);
		if (launched(be, "gdn chunk") != 0)
			return -1;
	}
	return 0;
}

/*
 * Prefill: the chunked kernel for m >= GDNC_C rows, key heads of 64 or 128
 * (the Qwen3.5 shapes) or 80 (a trained model's: the kernels of 96 with the
 * rows 80 .. 96 zero, gdnc_pad; UNRUN on a GPU as yet, tools/gdn-chunk-emu.cc
 * runs it on the CPU), value heads a multiple of GDNC_VS and rows of q, k
 * 16-byte aligned; fewer rows (one partial chunk's work is most of a whole
 * one's) and other shapes take the recurrent form, exact.  So a model of
 * other key heads prefills row by row through gdn_launch's kernels: right,
 * but slower than the chunked form.
 */
static int
cu_gdn_chunk(struct backend *be, const struct backend_gdn *g, int m,
    const float *qkv, int ld, const float *a, const float *b,
    const float *ssm_a, const float *dt_bias, float *S, float *o)
{
	struct gdnc_args A = { qkv, a, b, ssm_a, dt_bias, S, o, NULL, ld, m, g->n_k_heads,
	    g->n_v_heads, g->dv, g->v_tiled, g->hf_l2, g->eps };

	if (m >= GDNC_C && g->dv % GDNC_VS == 0 && ld % 4 == 0 && (uintptr_t)qkv % 16 == 0) {
		if (g->dk == 128)
			return gdn_chunk_run<128>(be, &A);
		if (g->dk == 64)
			return gdn_chunk_run<64>(be, &A);
		if (g->dk == 80)
			return gdn_chunk_run<96, 80>(be, &A);
	}
	return gdn_run(be, g, m, qkv, ld, a, b, ssm_a, dt_bias, S, NULL, o);
}

static int
cu_l2norm(struct backend *be, float *x, int ldx, int rows, int n, float eps)
{
	return gpu_l2norm(CB(be)->g, x, ldx, x, ldx, rows, n, eps) ? gfail(be, "l2norm") : 0;
}

static int
cu_act(struct backend *be, enum backend_act act, float *x, size_t n)
{
	gpu_launch(CB(be)->g, k_act, nblk(n, 256), 256, 0, x, n, (int)act);
	return launched(be, "act");
}

static int
cu_add(struct backend *be, float *y, const float *x, size_t n)
{
	return gpu_add(CB(be)->g, y, x, y, n) ? gfail(be, "add") : 0;
}

static int
cu_argmax(struct backend *be, const float *x, int ldx, int m, int n, int32_t *out)
{
	struct backend_cuda *c = CB(be);
	int32_t *d = (int32_t *)buf_get(be, &c->ids, (size_t)m * 4);

	if (d == NULL)
		return -1;
	if (ldx == n) {
		if (gpu_argmax(c->g, x, m, n, d) != 0)
			return gfail(be, "argmax");
	} else {
		for (int r = 0; r < m; r++)
			if (gpu_argmax(c->g, x + (size_t)r * ldx, 1, n, d + r) != 0)
				return gfail(be, "argmax");
	}
	if (gpu_download(c->g, out, d, (size_t)m * 4) || gpu_sync(c->g))
		return gfail(be, "argmax");
	return 0;
}

/* cu_argmax's picks left on the device, queued (nothing waits). */
static int
cu_argmax_dev(struct backend *be, const float *x, int ldx, int m, int n, int32_t *d_out)
{
	struct backend_cuda *c = CB(be);

	if (ldx == n)
		return gpu_argmax(c->g, x, m, n, d_out) != 0 ? gfail(be, "argmax") : 0;
	for (int r = 0; r < m; r++)
		if (gpu_argmax(c->g, x + (size_t)r * ldx, 1, n, d_out + r) != 0)
			return gfail(be, "argmax");
	return 0;
}

static int
cu_argmax_map(struct backend *be, const float *x, int ldx, int m, int n, const int32_t *d_map,
    int32_t *d_out)
{
	return gpu_argmax_map(CB(be)->g, x, ldx, m, n, d_map, d_out) ? gfail(be, "argmax") : 0;
}

static_assert(GPU_TOPK_MAX == BACKEND_TOPK_MAX, "gpu_topk takes what backend_topk may ask");

static int
cu_topk(struct backend *be, const float *x, int ldx, int m, int n, int k, float temp,
    float *val, int32_t *id)
{
	struct backend_cuda *c = CB(be);
	size_t nk = (size_t)m * k;
	float *d = (float *)buf_get(be, &c->topk, nk * 8 + gpu_topk_scratch(m, k));

	if (d == NULL)
		return -1;
	if (gpu_topk(c->g, x, m, ldx, n, k, temp, d, (int32_t *)(d + nk), d + 2 * nk) != 0 ||
	    gpu_download(c->g, val, d, nk * 4) || gpu_download(c->g, id, d + nk, nk * 4) ||
	    gpu_sync(c->g))
		return gfail(be, "topk");
	return 0;
}

static int
cu_draw(struct backend *be, const float *x, int n, float temp, float top_p, float min_p,
    double u, int32_t *out)
{
	struct backend_cuda *c = CB(be);
	size_t sc = gpu_draw_scratch();
	char *d = (char *)buf_get(be, &c->draw, sc + 8);

	if (d == NULL)
		return -1;
	if (gpu_draw(c->g, x, n, temp, top_p, min_p, u, (int32_t *)(d + sc), d) != 0 ||
	    gpu_download(c->g, out, d + sc, 4) || gpu_sync(c->g))
		return gfail(be, "draw");
	return 0;
}

static int
cu_penalize(struct backend *be, float *x, const int32_t *tok, const int32_t *cnt, int k,
    float repeat, float presence, float frequency)
{
	struct backend_cuda *c = CB(be);
	int32_t *d = (int32_t *)buf_get(be, &c->pen, (size_t)k * 8);

	if (d == NULL)
		return -1;
	if (gpu_upload(c->g, d, tok, (size_t)k * 4) || gpu_upload(c->g, d + k, cnt, (size_t)k * 4) ||
	    gpu_penalize(c->g, x, d, d + k, k, repeat, presence, frequency) != 0)
		return gfail(be, "penalize");
	return 0;
}

/* The bits go up on the stream (queued before the kernel that reads them;
 * a pageable source is copied before gpu_upload returns), then the kernel. */
static int
cu_mask(struct backend *be, float *x, int n, const uint32_t *bits)
{
	struct backend_cuda *c = CB(be);
	size_t words = ((size_t)n + 31) / 32;
	uint32_t *d = (uint32_t *)buf_get(be, &c->mask, words * 4);

	if (d == NULL)
		return -1;
	if (gpu_upload(c->g, d, bits, words * 4) || gpu_mask(c->g, x, n, d) != 0)
		return gfail(be, "mask");
	return 0;
}

/* --- the mixture of experts, Gemma-4's and step35's ops ----------------- */

/*
 * The experts' products: Y[ns][w->ne1 / n_exp] with slot s's row the
 * product of input row s / per (of nx rows of x, ldx floats apart) with
 * expert ids[s] of the stack w, each the bits of that row's product with
 * that expert alone (gpu_moe_matvec), for any ns: the slots grouped by
 * expert (backend_moe_group_set; the default where they share experts)
 * run the decode kernels' row functions on up to 16 of an expert's slots
 * at once, whose rows have the one-row bits, so no slot's sums depend on
 * which or how many rows share its expert.
 */
static int
moe_products(struct backend *be, const struct backend_weight *w, int n_exp, const float *x,
    int ldx, int nx, int per, const int32_t *ids, int ns, float *Y)
{
	const float *xr = input_rows(be, x, ldx, w->ne0, CW(w)->ne0p, nx);

	if (xr == NULL)
		return -1;
	if (gpu_moe_matvec(CB(be)->g, w->type, w->data, w->ne1 / n_exp, CW(w)->ne0p, n_exp, ids,
	    ns, per, xr, nx, Y, wscale(w)) != 0)
		return gfail(be, "moe");
	return 0;
}

static int
cu_moe_route(struct backend *be, const float *x, int ldx, int m, int n, int k, int32_t *ids,
    float *w)
{
	return gpu_moe_route(CB(be)->g, GPU_ROUTE_SOFTMAX, x, ldx, m, n, k, NULL, 0, 1.0f, NULL, ids,
	    w) ? gfail(be, "moe_route") : 0;
}

/* backend_moe_route_scale: the per-expert scale in the router's kernel. */
static int
cu_moe_route_scale(struct backend *be, const float *x, int ldx, int m, int n, int k,
    const float *s, int32_t *ids, float *w)
{
	return gpu_moe_route(CB(be)->g, GPU_ROUTE_SOFTMAX, x, ldx, m, n, k, NULL, 0, 1.0f, s, ids,
	    w) ? gfail(be, "moe_route") : 0;
}

static int
cu_moe_route_sigmoid(struct backend *be, const float *x, int ldx, int m, int n, int k,
    const float *bias, int norm, float scale, int32_t *ids, float *w)
{
	return gpu_moe_route(CB(be)->g, GPU_ROUTE_SIGMOID, x, ldx, m, n, k, bias, norm, scale, NULL,
	    ids, w) ? gfail(be, "moe_route_sigmoid") : 0;
}

/* Gate and up products per slot (c->moe), then silu(g) * u (limit: clamped) into f. */
static int
cu_moe_swiglu(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, int n_exp, const float *x, int ldx, int m,
    const int32_t *ids, int k, float limit, float *f)
{
	int64_t nf = wg->ne1 / n_exp, ns = (int64_t)m * k;
	float *G = (float *)buf_get(be, &CB(be)->moe, (size_t)(2 * ns * nf) * 4);

	if (G == NULL || ns > INT32_MAX ||
	    moe_products(be, wg, n_exp, x, ldx, m, k, ids, (int)ns, G) ||
	    moe_products(be, wu, n_exp, x, ldx, m, k, ids, (int)ns, G + ns * nf))
		return -1;
	return gpu_moe_act(CB(be)->g, GPU_MOE_SWIGLU, G, G + ns * nf, ns, nf, limit, f) ?
	    gfail(be, "moe_swiglu") : 0;
}

/* Each slot's gate and up rows in one product (c->moe), then gelu_tanh(g) * u into f. */
static int
cu_moe_geglu(struct backend *be, const struct backend_weight *wgu, int n_exp, const float *x,
    int ldx, int m, const int32_t *ids, int k, float *f)
{
	int64_t nf = wgu->ne1 / n_exp / 2, ns = (int64_t)m * k;
	float *Y = (float *)buf_get(be, &CB(be)->moe, (size_t)(2 * ns * nf) * 4);

	if (Y == NULL || ns > INT32_MAX ||
	    moe_products(be, wgu, n_exp, x, ldx, m, k, ids, (int)ns, Y))
		return -1;
	return gpu_moe_act(CB(be)->g, GPU_MOE_GEGLU, Y, NULL, ns, nf, 0.0f, f) ?
	    gfail(be, "moe_geglu") : 0;
}

/* The down product per slot (c->moe), then the weighted sum of each row's k into y. */
static int
cu_moe_down(struct backend *be, const struct backend_weight *wd, int n_exp, const float *f,
    int m, const int32_t *ids, const float *w, int k, float *y, int ldy)
{
	int64_t ne = wd->ne1 / n_exp, ns = (int64_t)m * k;
	float *D = (float *)buf_get(be, &CB(be)->moe, (size_t)(ns * ne) * 4);

	if (D == NULL || ns > INT32_MAX ||
	    moe_products(be, wd, n_exp, f, (int)wd->ne0, (int)ns, 1, ids, (int)ns, D))
		return -1;
	return gpu_moe_combine(CB(be)->g, D, m, k, ne, w, y, ldy) ? gfail(be, "moe_down") : 0;
}

static int
cu_add_gated(struct backend *be, float *y, int ldy, const float *x, int ldx, const float *g,
    int ldg, int m, int n)
{
	return gpu_add_gated(CB(be)->g, y, ldy, x, ldx, g, ldg, m, n) ? gfail(be, "add_gated") : 0;
}

static int
cu_geglu(struct backend *be, const float *g, int ldg, const float *u, int ldu, float *y,
    int ldy, int rows, int n)
{
	return gpu_geglu(CB(be)->g, g, ldg, u, ldu, y, ldy, rows, n) ? gfail(be, "geglu") : 0;
}

/* GeGLU in the kernel that quantizes the down product's input (a type
 * pre_fusable takes); else the two ops. */
static int
cu_geglu_matmul(struct backend *be, float *g, const float *u, int m,
    const struct backend_weight *w, float *y)
{
	int n = (int)w->ne0;

	if (pre_fusable(CB(be)->g, w->type, m) && CW(w)->ne0p == w->ne0)
		return gpu_matvec_q8_pre(CB(be)->g, GPU_PRE_GEGLU, g, u, 0, 0, w->type, w->data,
		    w->ne1, w->ne0, m, y, wscale(w)) ? gfail(be, "geglu_matmul") : 0;
	if (cu_geglu(be, g, n, u, n, g, n, m, n) != 0)
		return -1;
	return product(be, w, g, y, m);
}

static int
cu_softcap(struct backend *be, float *x, size_t n, float cap)
{
	return gpu_softcap(CB(be)->g, x, (int64_t)n, cap) ? gfail(be, "softcap") : 0;
}

/* backend_add_rmsnorm: one kernel (gpu_add_rmsnorm, the add's and the norm's bits). */
static int
cu_add_rmsnorm(struct backend *be, float *x, const float *t, const float *nw, float *y,
    float eps, int m, int n)
{
	return gpu_add_rmsnorm(CB(be)->g, x, t, nw, y, eps, m, n) ? gfail(be, "add_rmsnorm") : 0;
}

/* backend_rmsnorm_pair: one kernel (gpu_rmsnorm_pair, the plain kernels' bits). */
static int
cu_rmsnorm_pair(struct backend *be, const float *x, const float *w1, float s1, float *y1,
    const float *w2, float *y2, float eps, int m, int n)
{
	return gpu_rmsnorm_pair(CB(be)->g, x, w1, s1, y1, w2, y2, eps, m, n) ?
	    gfail(be, "rmsnorm_pair") : 0;
}

/* backend_norm_residual: one kernel a step (gpu_norm_residual, the plain kernels' bits). */
static int
cu_norm_residual(struct backend *be, float *x, float *a, const float *wa, float *b,
    const float *wb, const float *w2, float eps, float s, int m, int n)
{
	return gpu_norm_residual(CB(be)->g, x, a, wa, b, wb, w2, eps, s, m, n) ?
	    gfail(be, "norm_residual") : 0;
}

static int
cu_scale(struct backend *be, float *x, size_t n, float s)
{
	return gpu_mul_scalar(CB(be)->g, x, (int64_t)n, s) ? gfail(be, "scale") : 0;
}

static int
cu_clamp(struct backend *be, float *x, size_t n, float lo, float hi)
{
	return gpu_clamp(CB(be)->g, x, (int64_t)n, lo, hi) ? gfail(be, "clamp") : 0;
}

static int
cu_dconv(struct backend *be, const float *x, int m, int n, const float *dyn, int ldd, int K,
    int group, const float *base, float *y)
{
	return gpu_dconv(CB(be)->g, x, m, n, dyn, ldd, K, group, base, y) ? gfail(be, "dconv") : 0;
}

static int
cu_moe_scale(struct backend *be, float *w, const int32_t *ids, int m, int k, const float *s)
{
	return gpu_moe_scale(CB(be)->g, w, ids, (int64_t)m * k, s) ? gfail(be, "moe_scale") : 0;
}

static int
cu_swiglu_limit(struct backend *be, const float *g, const float *u, float *y, size_t n,
    float limit)
{
	return gpu_swiglu_limit(CB(be)->g, g, u, y, (int64_t)n, limit) ?
	    gfail(be, "swiglu_limit") : 0;
}

static int
cu_head_gate(struct backend *be, float *x, int ldx, const float *g, int ldg, int m, int nh,
    int hd)
{
	return gpu_head_gate(CB(be)->g, x, ldx, g, ldg, m, nh, hd) ? gfail(be, "head_gate") : 0;
}

/* --- recorded steps (backend_graph_*) ---------------------------------- */

/* Graphs off for good, keeping the first reason (backend_graph_stats). */
static void
graphs_off(struct backend *be, const char *why)
{
	if (be->graph.why[0] == '\0')
		snprintf(be->graph.why, sizeof be->graph.why, "%s", why);
	be->graph.on = 0;
}

static struct cuda_graph *
graph_find(struct backend_cuda *c, const void *key, size_t n)
{
	for (int i = 0; i < CUDA_GRAPHS; i++)
		if (c->graph[i].nkey == n && memcmp(c->graph[i].key, key, n) == 0)
			return &c->graph[i];
	return NULL;
}

/* A free entry, or the least recently used one emptied. */
static struct cuda_graph *
graph_slot(struct backend_cuda *c)
{
	struct cuda_graph *e = &c->graph[0];

	for (int i = 0; i < CUDA_GRAPHS; i++) {
		if (c->graph[i].nkey == 0)
			return &c->graph[i];
		if (c->graph[i].used < e->used)
			e = &c->graph[i];
	}
	gpu_graph_free(e->gr);
	memset(e, 0, sizeof *e);
	return e;
}

static int
cu_graph_replay(struct backend *be, const void *key, size_t n)
{
	struct backend_cuda *c = CB(be);
	struct cuda_graph *e;

	if (!be->graph.on || c->rec != NULL || (e = graph_find(c, key, n)) == NULL || e->gr == NULL)
		return 0;
	if (e->gen != gpu_generation(c->g)) {	/* memory it names may be gone: record anew */
		gpu_graph_free(e->gr);
		e->gr = NULL;
		e->seen = 0;
		be->graph.stale++;
		return 0;
	}
	if (gpu_graph_replay(c->g, e->gr) != 0)
		return gfail(be, "graph");
	e->used = ++c->clock;
	be->graph.replayed++;
	return 1;
}

static int
cu_graph_begin(struct backend *be, const void *key, size_t n)
{
	struct backend_cuda *c = CB(be);
	struct cuda_graph *e;

	if (!be->graph.on)
		return 0;
	if (c->rec != NULL)
		return util_err(be->err, "graph: already recording");
	if ((e = graph_find(c, key, n)) == NULL) {	/* first step under key: runs as is */
		e = graph_slot(c);
		memcpy(e->key, key, n);
		e->nkey = n;
		e->seen = 1;
		e->used = ++c->clock;
		return 0;
	}
	e->used = ++c->clock;
	if (!e->seen) {
		e->seen = 1;
		return 0;
	}
	gpu_graph_free(e->gr);
	e->gr = NULL;
	if (gpu_graph_begin(c->g) != 0) {
		graphs_off(be, gpu_errmsg(c->g));
		return 0;
	}
	e->gen = gpu_generation(c->g);
	c->rec = e;
	return 1;
}

static int
cu_graph_end(struct backend *be, int failed)
{
	struct backend_cuda *c = CB(be);
	struct cuda_graph *e = c->rec;
	struct gpu_graph *gr;
	char why[UTIL_ERRLEN];

	if (e == NULL)
		return util_err(be->err, "graph: not recording");
	c->rec = NULL;
	if (failed || e->gen != gpu_generation(c->g)) {
		snprintf(why, sizeof why, "recording a step: %s", failed ? be->err :
		    "device memory freed while recording");
		gpu_graph_abort(c->g);
		graphs_off(be, why);
		return util_err(be->err, "%s", why);
	}
	if ((gr = gpu_graph_end(c->g)) == NULL || gpu_graph_replay(c->g, gr) != 0) {
		snprintf(why, sizeof why, "%s", gpu_errmsg(c->g));
		gpu_graph_free(gr);
		cudaGetLastError();
		graphs_off(be, why);
		return util_err(be->err, "graph: %s", why);
	}
	e->gr = gr;
	be->graph.recorded++;
	return 0;
}

/* backend_prof_*: gpu_prof, BACKEND_PROF_SPIN_S of spin ahead of the ops. */
static int
cu_prof_begin(struct backend *be)
{
	return gpu_prof_begin(CB(be)->g, BACKEND_PROF_SPIN_S * 1e3) ? gfail(be, "prof") : 0;
}

static int
cu_prof_end(struct backend *be)
{
	return gpu_prof_end(CB(be)->g) ? gfail(be, "prof") : 0;
}

static int
cu_prof_rows(struct backend *be, const struct backend_prof_row **rows)
{
	const struct gpu_prof_row *r;
	int n = gpu_prof_rows(CB(be)->g, &r), max = (int)(sizeof CB(be)->prof / sizeof CB(be)->prof[0]);

	n = n < max ? n : max;
	for (int i = 0; i < n; i++) {
		CB(be)->prof[i].name = r[i].name;
		CB(be)->prof[i].s = r[i].s;
		CB(be)->prof[i].n = r[i].n;
	}
	*rows = CB(be)->prof;
	return n;
}

static void
cu_prof_reset(struct backend *be)
{
	gpu_prof_reset(CB(be)->g);
}

/* backend_pdl_set: gpu_pdl, refused while a step is being recorded (the
 * generation it moves would end the recording as stale). */
static int
cu_pdl_set(struct backend *be, int on)
{
	if (CB(be)->rec != NULL)
		return util_err(be->err, "pdl: switched while recording a graph");
	return gpu_pdl(CB(be)->g, on);
}

/* backend_gemm_set: the prefill products' kernel (gpu_tune_mmq) and the
 * weights' bf16 copies (gpu_tune_mirror), refused while a step is being
 * recorded. */
static int
cu_gemm_set(struct backend *be, int kind)
{
	struct gpu *g = CB(be)->g;

	if (CB(be)->rec != NULL)
		return util_err(be->err, "gemm: switched while recording a graph");
	if (kind != BACKEND_GEMM_INT8 && kind != BACKEND_GEMM_BF16 &&
	    kind != BACKEND_GEMM_BF16_MIRROR)
		return util_err(be->err, "gemm: kind %d (int8, bf16 or bf16-mirror)", kind);
	return gpu_tune_mmq(g, kind == BACKEND_GEMM_INT8 ? GPU_MMQ_MMA : GPU_MMQ_BF16) ||
	    gpu_tune_mirror(g, kind == BACKEND_GEMM_BF16_MIRROR) ? gfail(be, "gemm") : 0;
}

/* backend_rows_set: gpu_tune_step_rows and the backend's step rows, refused
 * while a step is being recorded. */
static int
cu_rows_set(struct backend *be, int rows)
{
	if (CB(be)->rec != NULL)
		return util_err(be->err, "step rows: switched while recording a graph");
	if (gpu_tune_step_rows(CB(be)->g, rows) != 0)
		return gfail(be, "step rows");
	be->step_rows = gpu_step_rows(CB(be)->g);
	return 0;
}

/* backend_moe_group_set: gpu_tune_moe_group and gpu_tune_moe_tc (off for
 * BACKEND_MOE_GROUP_CC), refused while a step is being recorded. */
static int
cu_moe_group_set(struct backend *be, int mode)
{
	if (CB(be)->rec != NULL)
		return util_err(be->err, "moe group: switched while recording a graph");
	return gpu_tune_moe_group(CB(be)->g, mode == BACKEND_MOE_GROUP_OFF ? GPU_MOE_GROUP_OFF :
	    mode == BACKEND_MOE_GROUP_ALL ? GPU_MOE_GROUP_ALL : GPU_MOE_GROUP_AUTO) ||
	    gpu_tune_moe_tc(CB(be)->g, mode == BACKEND_MOE_GROUP_CC ? GPU_MOE_TC_OFF :
	    GPU_MOE_TC_AUTO) ? gfail(be, "moe group") : 0;
}

/* backend_qkt_set: gpu_tune_qkt, refused while a step is being recorded. */
static int
cu_qkt_set(struct backend *be, int mode)
{
	if (CB(be)->rec != NULL)
		return util_err(be->err, "qkt: switched while recording a graph");
	return gpu_tune_qkt(CB(be)->g, mode == BACKEND_QKT_ON ? GPU_QKT_ON :
	    mode == BACKEND_QKT_AUTO ? GPU_QKT_AUTO : GPU_QKT_OFF) ? gfail(be, "qkt") : 0;
}

static int
cu_use(struct backend *be)
{
	return gpu_use(CB(be)->g) ? gfail(be, "use") : 0;
}

extern "C" struct gpu *
backend_cuda_gpu(struct backend *be)
{
	return be->ops->close == cu_close ? CB(be)->g : NULL;
}

static const struct backend_ops cuda_ops = {
	cu_close, cu_alloc, cu_mfree, cu_write, cu_read, cu_copy, cu_fill, cu_sync,
	cu_weight_init, cu_weight_release, cu_supports,
	cu_embed, cu_rmsnorm, cu_rmsnorm_gated, cu_matmul, cu_rmsnorm_matmul,
	cu_matmul_swiglu, cu_swiglu, cu_rope, cu_attention, cu_mul_sigmoid,
	cu_conv1d_silu, cu_gdn_step, cu_gdn_chunk, cu_l2norm, cu_act, cu_add, cu_argmax,
	NULL,	/* round_f16: no half-precision KV cache */
	cu_rope_dpos, cu_kv_store, cu_attention_dpos,
	cu_graph_replay, cu_graph_begin, cu_graph_end,
	cu_add_rmsnorm_matmul, cu_ffn, cu_rmsnorm_gated_matmul, cu_mul_sigmoid_matmul,
	cu_prof_begin, cu_prof_end, cu_prof_rows, cu_prof_reset,
	cu_host_alloc, cu_host_free,
	cu_pdl_set,
	cu_topk,
	cu_draw,
	cu_penalize,
	cu_gemm_set,
	cu_qk_norm_rope,
	cu_mem_info,
};

extern "C" struct backend *
backend_cuda_open(const char *opts, int n_threads, char *err)
{
	struct backend_cuda *c;
	long dev = 0;
	char *end;

	if (opts != NULL && *opts != '\0') {
		dev = strtol(opts, &end, 10);
		if (*end != '\0' || dev < 0 || dev > 255) {
			util_err(err, "backend: 'cuda:%s': bad device number", opts);
			return NULL;
		}
	}
	if ((c = (struct backend_cuda *)calloc(1, sizeof *c)) == NULL) {
		util_err(err, "backend: out of memory");
		return NULL;
	}
	if ((c->g = gpu_open((int)dev, err, UTIL_ERRLEN)) == NULL) {
		free(c);
		return NULL;
	}
	if (gpu_tune_mmq(c->g, BACKEND_GEMM_DEFAULT == BACKEND_GEMM_BF16 ? GPU_MMQ_BF16 :
	    GPU_MMQ_MMA) != 0) {
		util_err(err, "backend: %s", gpu_errmsg(c->g));
		gpu_close(c->g);
		free(c);
		return NULL;
	}
	c->ops = cuda_ops;
	c->ops.use = cu_use;
	c->ops.moe_route = cu_moe_route;
	c->ops.moe_swiglu = cu_moe_swiglu;
	c->ops.moe_down = cu_moe_down;
	c->ops.add_gated = cu_add_gated;
	c->ops.geglu = cu_geglu;
	c->ops.softcap = cu_softcap;
	c->ops.scale = cu_scale;
	c->ops.moe_geglu = cu_moe_geglu;
	c->ops.moe_scale = cu_moe_scale;
	c->ops.moe_route_sigmoid = cu_moe_route_sigmoid;
	c->ops.swiglu_limit = cu_swiglu_limit;
	c->ops.head_gate = cu_head_gate;
	c->ops.head_max = cu_head_max;
	c->ops.clamp = cu_clamp;
	c->ops.matmul_half = cu_matmul_half;
	c->ops.attn_hi = cu_attn_hi;
	c->ops.mask = cu_mask;
	c->ops.dconv = cu_dconv;
	c->ops.conv1d_silu_seqs = cu_conv1d_silu_seqs;
	c->ops.gdn_step_seqs = cu_gdn_step_seqs;
	c->ops.kv_store_seqs = cu_kv_store_seqs;
	c->ops.attention_seqs = cu_attention_seqs;
	c->ops.embed_dev = cu_embed_dev;
	c->ops.argmax_dev = cu_argmax_dev;
	c->ops.argmax_map = cu_argmax_map;
	c->ops.norm_residual = cu_norm_residual;
	c->ops.add_rmsnorm = cu_add_rmsnorm;
	c->ops.rmsnorm_pair = cu_rmsnorm_pair;
	c->ops.geglu_matmul = cu_geglu_matmul;
	c->ops.moe_route_scale = cu_moe_route_scale;
	c->ops.weight_rows = cu_weight_rows;
	c->be.ops = &c->ops;
	c->be.impl = c;
	c->be.n_threads = 1;
	c->be.host = 0;
	c->be.cut_exact = 0;	/* (backend_cut_exact: the prefix cache resumes at chunks) */
	/* backend_step_rows: cu_matmul takes the decode kernels for a product of up to
	 * gpu_step_rows rows (k_mv8t takes 32 for Q8_0 and NVFP4 in one launch, the other
	 * types launches of 16) and attention's decode path in pieces of 16, each row with
	 * its one-row bits (kernel-check's "rows32" lines, bit for bit); a product of more
	 * takes the prompt GEMM (other bits).  32 by default (backend_rows_set: 16). */
	c->ops.rows_set = cu_rows_set;
	c->ops.moe_group_set = cu_moe_group_set;
	c->ops.qkt_set = cu_qkt_set;
	/* K-quant and IQ4_XS products on tensor cores from 12 rows (the same
	 * bits: kernel-check's tc=mvk lines): session 25's H100, 512-token
	 * prefill 1.38x (26B-A4B Q4_K), 1.87x (35B-A3B Q4_K), 1.32x (196B-A11B's
	 * IQ4_XS experts), decode unchanged (bench/2026-12-06, s25) */
	if (gpu_tune_step_rows(c->g, GPU_STEP_ROWS_MAX) != 0 ||
	    gpu_tune_qkt(c->g, GPU_QKT_AUTO) != 0) {
		util_err(err, "backend: %s", gpu_errmsg(c->g));
		gpu_close(c->g);
		free(c);
		return NULL;
	}
	c->be.step_rows = gpu_step_rows(c->g);
	snprintf(c->be.name, sizeof c->be.name, "cuda:%ld (%s)", dev, gpu_name(c->g));
	return &c->be;
}
