/*
 * backend_impl: what a backend implementation fills in.  Only backend
 * implementations (backend_cpu.c, later the CUDA adapter) include this;
 * forward passes see lib/backend.h alone.
 *
 * backend.c checks arguments before calling an op, so an implementation
 * may assume: pointers non-NULL where the contract needs them, m >= 1,
 * strides >= row widths, types supported.  An op slot left NULL in the
 * table is composed by backend.c from other ops (the fused ones:
 * rmsnorm_matmul, matmul_swiglu, add_rmsnorm_matmul, ffn,
 * rmsnorm_gated_matmul, mul_sigmoid_matmul, norm_residual, norm_residual_matmul), so a
 * backend implements a fusion only where it pays.
 */
#ifndef MEMRA_BACKEND_IMPL_H
#define MEMRA_BACKEND_IMPL_H

#include "backend.h"
#include "util.h"

struct backend_ops {
	void	(*close)(struct backend *);
	float	*(*alloc)(struct backend *, size_t n);
	void	(*mfree)(struct backend *, float *);
	int	(*write)(struct backend *, float *, const float *, size_t);
	int	(*read)(struct backend *, float *, const float *, size_t);
	int	(*copy)(struct backend *, float *, const float *, size_t);
	int	(*fill)(struct backend *, float *, float, size_t);
	int	(*sync)(struct backend *);
	/* w->type, ne0, ne1, row_size, scale are set and data is the
	 * caller's host pointer; the backend replaces data/priv as it likes */
	int	(*weight_init)(struct backend *, struct backend_weight *);
	void	(*weight_release)(struct backend *, struct backend_weight *);
	int	(*supports)(const struct backend *, int type);

	int	(*embed)(struct backend *, const struct backend_weight *,
		    const int32_t *, int, float *, int);
	int	(*rmsnorm)(struct backend *, const float *, int, const float *,
		    float *, int, int, int, float);
	int	(*rmsnorm_gated)(struct backend *, const float *, const float *,
		    const float *, float *, int, int, float);
	int	(*matmul)(struct backend *, const struct backend_weight *,
		    const float *, int, float *, int, int);
	int	(*rmsnorm_matmul)(struct backend *, const float *, int, int,
		    const float *, float, int, const struct backend_weight *const *,
		    float *const *);		/* optional */
	int	(*matmul_swiglu)(struct backend *, const struct backend_weight *,
		    const struct backend_weight *, const float *, int, float *);	/* optional */
	int	(*swiglu)(struct backend *, const float *, const float *, float *,
		    size_t);
	int	(*rope)(struct backend *, float *, int, int, int, int,
		    const int32_t *, int, float, int);
	int	(*attention)(struct backend *, const struct backend_attn *,
		    const float *, int, int, const float *, const float *, int,
		    int, float *);
	int	(*mul_sigmoid)(struct backend *, float *, int, const float *, int,
		    int, int);
	int	(*conv1d_silu)(struct backend *, const float *, int, int, int,
		    const float *, int, float *, float *, float *);
	int	(*gdn_step)(struct backend *, const struct backend_gdn *, int,
		    const float *, int, const float *, const float *,
		    const float *, const float *, float *, float *, float *);
	int	(*gdn_chunk)(struct backend *, const struct backend_gdn *, int,
		    const float *, int, const float *, const float *,
		    const float *, const float *, float *, float *);
	int	(*l2norm)(struct backend *, float *, int, int, int, float);
	int	(*act)(struct backend *, enum backend_act, float *, size_t);
	int	(*add)(struct backend *, float *, const float *, size_t);
	int	(*argmax)(struct backend *, const float *, int, int, int, int32_t *);
	/* optional, last so positional tables leave it NULL: without it the
	 * backend has no half-precision KV cache (backend_attn.kv_f16) */
	int	(*round_f16)(struct backend *, float *, int, int, int);
	/* optional, positions in backend memory: without them a host backend
	 * reads the position and calls rope / copy / attention */
	int	(*rope_dpos)(struct backend *, float *, int, int, int, int,
		    const int32_t *, int, float, int);
	int	(*kv_store)(struct backend *, float *, float *, const float *,
		    const float *, int, int, const int32_t *, int, int);
	int	(*attention_dpos)(struct backend *, const struct backend_attn *,
		    const float *, int, int, const float *, const float *, int,
		    const int32_t *, int, float *);
	/* optional, recorded steps (backend_graph_*): NULL records nothing */
	int	(*graph_replay)(struct backend *, const void *, size_t);
	int	(*graph_begin)(struct backend *, const void *, size_t);
	int	(*graph_end)(struct backend *, int);
	/* optional, fused forms: without them backend.c composes the plain ops */
	int	(*add_rmsnorm_matmul)(struct backend *, float *, const float *, int, int,
		    const float *, float, int, const struct backend_weight *const *,
		    float *const *);
	int	(*ffn)(struct backend *, float *, const float *, int, int, const float *,
		    float, const struct backend_weight *, const struct backend_weight *,
		    const struct backend_weight *, float *, float *, float *);
	int	(*rmsnorm_gated_matmul)(struct backend *, float *, const float *,
		    const float *, int, int, int, float, const struct backend_weight *,
		    float *);
	int	(*mul_sigmoid_matmul)(struct backend *, float *, const float *, int, int,
		    int, int, const struct backend_weight *, float *);
	/* optional, backend_prof_*: NULL cannot profile */
	int	(*prof_begin)(struct backend *);
	int	(*prof_end)(struct backend *);
	int	(*prof_rows)(struct backend *, const struct backend_prof_row **);
	void	(*prof_reset)(struct backend *);
	/* optional, backend_host_alloc: NULL gives plain host memory */
	float	*(*host_alloc)(struct backend *, size_t n);
	void	(*host_free)(struct backend *, float *);
	/* optional, backend_pdl_set: NULL launches plainly */
	int	(*pdl_set)(struct backend *, int);
	/* optional, backend_topk: NULL reads the rows back and picks on the host */
	int	(*topk)(struct backend *, const float *, int, int, int, int, float, float *,
		    int32_t *);
	/* optional, backend_draw (temp, top_p, min_p, u): NULL reads the row
	 * back and draws on the host */
	int	(*draw)(struct backend *, const float *, int, float, float, float, double,
		    int32_t *);
	/* optional, backend_penalize: NULL reads the row back, applies them
	 * and writes it */
	int	(*penalize)(struct backend *, float *, const int32_t *, const int32_t *, int,
		    float, float, float);
	/* optional, backend_gemm_set: NULL has one kind */
	int	(*gemm_set)(struct backend *, int);
	/* optional, backend_qk_norm_rope: NULL runs the norms, ropes and store */
	int	(*qk_norm_rope)(struct backend *, const struct backend_qkn *, float *, float *,
		    float *, int, const int32_t *, const int32_t *, float *, float *, int);
	/* optional, backend_mem_info: NULL is host memory (the machine's) */
	int	(*mem_info)(struct backend *, size_t *, size_t *);
	/* optional, the mixture of experts (backend_moe_*, backend_add_gated):
	 * NULL cannot run one (backend_moe is 0) */
	int	(*moe_route)(struct backend *, const float *, int, int, int, int, int32_t *,
		    float *);
	int	(*moe_swiglu)(struct backend *, const struct backend_weight *,
		    const struct backend_weight *, int, const float *, int, int,
		    const int32_t *, int, float, float *);
	int	(*moe_down)(struct backend *, const struct backend_weight *, int, const float *,
		    int, const int32_t *, const float *, int, float *, int);
	int	(*add_gated)(struct backend *, float *, int, const float *, int, const float *,
		    int, int, int);
	/* optional, fused: backend_moe_down_add (NULL: moe_down, then add or add_gated) */
	int	(*moe_down_add)(struct backend *, const struct backend_weight *, int,
		    const float *, int, const int32_t *, const float *, int, const float *,
		    const float *, int, float *, int);
	/* optional, fused: backend_moe_ffn (NULL: moe_swiglu, then moe_down_add) */
	int	(*moe_ffn)(struct backend *, const struct backend_weight *,
		    const struct backend_weight *, const struct backend_weight *, int,
		    const float *, int, int, const int32_t *, const float *, int, float, float *,
		    const float *, const float *, int, float *, int);
	/* optional, Gemma-4's ops (backend_gemma): NULL cannot run one; a
	 * backend with them (or step35's) honours backend_attn.window */
	int	(*geglu)(struct backend *, const float *, int, const float *, int, float *,
		    int, int, int);
	int	(*softcap)(struct backend *, float *, size_t, float);
	int	(*scale)(struct backend *, float *, size_t, float);
	int	(*moe_geglu)(struct backend *, const struct backend_weight *, int,
		    const float *, int, int, const int32_t *, int, float *);
	int	(*moe_scale)(struct backend *, float *, const int32_t *, int, int,
		    const float *);
	/* optional, step35's ops (backend_moe_route_sigmoid, backend_swiglu_limit,
	 * backend_head_gate): NULL cannot run them (backend_step35 is 0); a
	 * backend with them honours backend_attn.window */
	int	(*moe_route_sigmoid)(struct backend *, const float *, int, int, int, int,
		    const float *, int, float, int32_t *, float *);
	int	(*swiglu_limit)(struct backend *, const float *, const float *, float *, size_t,
		    float);
	int	(*head_gate)(struct backend *, float *, int, const float *, int, int, int, int);
	/* optional, backend_use: NULL has nothing to make current */
	int	(*use)(struct backend *);
	/* optional, the vision towers' backend_clamp: NULL has none */
	int	(*clamp)(struct backend *, float *, size_t, float, float);
	/* optional, backend_head_max: NULL attends with heads of any size */
	int	(*head_max)(const struct backend *);
	/* optional, backend_rows_set: NULL keeps the step rows it opened with */
	int	(*rows_set)(struct backend *, int);
	/* optional, backend_attn_hi: 1 when attention honours backend_attn.hi and
	 * .ring; NULL honours neither */
	int	(*attn_hi)(const struct backend *);
	/* optional, backend_mask: NULL cannot (backend_has_mask 0) */
	int	(*mask)(struct backend *, float *, int, const uint32_t *);
	/* optional, backend_dconv: NULL cannot (backend_has_dconv 0) */
	int	(*dconv)(struct backend *, const float *, int, int, const float *, int, int, int,
		    const float *, float *);
	/* optional, backend_moe_group_set: NULL has one way */
	int	(*moe_group_set)(struct backend *, int);
	/* optional, backend_qkt_set: NULL has one way */
	int	(*qkt_set)(struct backend *, int);
	/* optional, backend_qk_stage_set: NULL has one way */
	int	(*qk_stage_set)(struct backend *, int);
	/* optional, backend_q6k_pack_set: NULL has one layout */
	int	(*q6k_pack_set)(struct backend *, int);
	/* optional, backend_*_seqs: NULL loops over the sequences */
	int	(*conv1d_silu_seqs)(struct backend *, const float *, int, int,
		    const struct backend_seq *, int, const float *, int, float *);
	int	(*gdn_step_seqs)(struct backend *, const struct backend_gdn *, int,
		    const struct backend_seq *, const float *, int, const float *,
		    const float *, const float *, const float *, float *);
	int	(*kv_store_seqs)(struct backend *, const float *, const float *, int, int,
		    const struct backend_kv_seq *);
	int	(*attention_seqs)(struct backend *, const struct backend_attn *, int,
		    const struct backend_kv_seq *, const float *, int, int, float *);
	/* optional, the vision towers' backend_matmul_half: NULL has none */
	int	(*matmul_half)(struct backend *, const struct backend_weight *,
		    const float *, int, float *, int, int);
	/* optional, ids in backend memory (backend_embed_dev, backend_argmax_dev):
	 * NULL, a host backend runs embed / argmax on them, another has none */
	int	(*embed_dev)(struct backend *, const struct backend_weight *,
		    const int32_t *, int, float *, int);
	int	(*argmax_dev)(struct backend *, const float *, int, int, int, int32_t *);
	int	(*argmax_map)(struct backend *, const float *, int, int, int, const int32_t *,
		    int32_t *);
	/* optional, fused: backend_norm_residual (NULL: composed, see above) */
	int	(*norm_residual)(struct backend *, float *, float *, const float *, float *,
		    const float *, const float *, float, float, int, int);
	/* optional, fused: backend_norm_residual_matmul (NULL: the two ops) */
	int	(*norm_residual_matmul)(struct backend *, float *, float *, const float *, float,
		    int, int, const float *, float, int, const struct backend_weight *const *,
		    float *const *);
	/* optional, fused: backend_add_rmsnorm (NULL: add, then rmsnorm) */
	int	(*add_rmsnorm)(struct backend *, float *, const float *, const float *, float *,
		    float, int, int);
	/* optional, fused: backend_rmsnorm_pair (NULL: rmsnorm, scale, rmsnorm) */
	int	(*rmsnorm_pair)(struct backend *, const float *, const float *, float, float *,
		    const float *, float *, float, int, int);
	/* optional, fused: backend_geglu_matmul (NULL: geglu, then matmul) */
	int	(*geglu_matmul)(struct backend *, float *, const float *, int,
		    const struct backend_weight *, float *);
	/* optional, backend_weight_rows: NULL cannot (its callers make the weight again) */
	int	(*weight_rows)(struct backend *, struct backend_weight *, int64_t, int64_t,
		    const void *);
	/* optional, fused: backend_moe_route_scale (NULL: moe_route, then moe_scale) */
	int	(*moe_route_scale)(struct backend *, const float *, int, int, int, int,
		    const float *, int32_t *, float *);
	/* optional, fused: backend_mlp (NULL: matmul_swiglu or the products and
	 * swiglu_limit, then matmul) */
	int	(*mlp)(struct backend *, const struct backend_weight *,
		    const struct backend_weight *, const struct backend_weight *, const float *,
		    int, float, float *, float *, float *);
};

struct backend {
	const struct backend_ops *ops;
	void	*impl;			/* the implementation's own state */
	int	n_threads;
	int	host;			/* memory is host memory */
	int	cut_exact;		/* backend_cut_exact */
	int	step_rows;		/* backend_step_rows: 1..BACKEND_ROWS_MAX */
	int	per_seq;		/* backend_per_seq_set: the _seqs ops as loops */
	int	chain_off;		/* backend_chain_set(be, 0) */
	int	q6k_pack;		/* backend_q6k_pack (set by the op of one that packs) */
	char	name[64];
	char	err[UTIL_ERRLEN];
	struct backend_graph_stats graph;	/* kept by the recording backend */
	void	*topk_buf;		/* host scratch of topk, draw, penalize without their op */
	size_t	topk_cap;		/* its bytes */
};

/* The CPU backend; opts is what follows "cpu:" ("" or "scalar"). */
struct backend *backend_cpu_open(const char *opts, int n_threads, char *err);
/* The CUDA backend (cuda/backend_cuda.cu, MEMRA_HAVE_CUDA builds); opts is
 * what follows "cuda:" ("" for device 0). */
struct backend *backend_cuda_open(const char *opts, int n_threads, char *err);
struct gpu;
/* The GPU of a CUDA backend (lib/pipeline's NCCL link), NULL for another backend. */
struct gpu *backend_cuda_gpu(struct backend *);

#endif
