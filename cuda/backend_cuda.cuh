/*
 * backend_cuda.cuh: what the CUDA backend's files share, private to them.
 * backend_cuda.cu holds the table (open, close, memory, weights, the small
 * ops, recorded steps, profiling and the tuning switches) and fills it from
 * each family's file through its cu_ops_* setter:
 *   backend_cuda_products.cu  the norms and products, plain and fused
 *   backend_cuda_attn.cu      RoPE, the KV cache, qk_norm_rope, attention
 *   backend_cuda_gdn.cu       conv1d and the gated delta rule (gdn_step.cuh,
 *                             gdn_chunk.cuh hold its kernels)
 *   backend_cuda_moe.cu       the experts, Gemma-4's and step35's ops
 * Every op function stays static in its file; what crosses files is below.
 */
#ifndef MEMRA_BACKEND_CUDA_CUH
#define MEMRA_BACKEND_CUDA_CUH
#include "gpu_impl.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define _Noreturn [[noreturn]]	/* util.h is C11 */
extern "C" {
#include "backend_impl.h"
#include "quant.h"
}

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


static inline const struct cuda_weight *
CW(const struct backend_weight *w)
{
	return (const struct cuda_weight *)w->priv;
}


/* Blocks of b threads for n items. */
static inline unsigned
nblk(size_t n, unsigned b)
{
	return (unsigned)((n + b - 1) / b);
}

/* backend_cuda.cu: errors, scratch, copies and launches. */
int	gfail(struct backend *be, const char *op);
void	*buf_get(struct backend *be, struct cuda_buf *b, size_t n);
int	copy_rows(struct backend *be, float *d, size_t ldd, const float *s, size_t lds,
	    size_t n, size_t rows);
int	launched(struct backend *be, const char *op);
void	*put_small(struct backend *be, const void *h, size_t n);
void	*upload(struct backend *be, const void *h, size_t n);

/* backend_cuda_products.cu: a weight's scale and a product's input rows. */
const float *wscale(const struct backend_weight *w);
const float *input_rows(struct backend *be, const float *x, int64_t ldx, int64_t n, int64_t np,
	    int64_t rows);

/* Each family's ops into the table. */
void	cu_ops_products(struct backend_ops *o);
void	cu_ops_attn(struct backend_ops *o);
void	cu_ops_gdn(struct backend_ops *o);
void	cu_ops_moe(struct backend_ops *o);

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


#endif
