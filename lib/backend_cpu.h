/*
 * backend_cpu: the CPU backend's private parts, shared by backend_cpu.c
 * (pool, memory, weights, dense ops) and backend_cpu_seq.c (the
 * sequence ops: rope, attention, conv1d, the gated delta rule).  Not part
 * of any contract: include backend.h to use a backend.
 *
 * Exactness: every output element is computed by one function call in a
 * fixed order, whoever runs it; work is split by output rows (or heads,
 * channels) over the pool, so neither m nor the thread count changes a
 * bit.  The dot product (backend_cpu_dot) is chosen once at open
 * (AVX2+FMA or the portable one) and used everywhere.
 */
#ifndef MEMRA_BACKEND_CPU_H
#define MEMRA_BACKEND_CPU_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend_impl.h"

/* fn runs items [i0, i1) on thread tid (0 = the caller) */
typedef void backend_cpu_fn(void *ctx, int64_t i0, int64_t i1, int tid);

struct backend_cpu_scratch {
	float	*p;
	size_t	n;
};

struct backend_cpu_worker {
	struct backend_cpu *c;
	int	tid;
};

/* An allocation cpu_alloc made as an anonymous mapping: its bytes. */
struct backend_cpu_map {
	void	*p;
	size_t	n;
};

struct backend_cpu {
	struct backend be;		/* first: (struct backend_cpu *)be */
	struct backend_ops ops;		/* be.ops points here */
	float	(*dot)(const float *, const float *, int64_t);
	int	avx2;			/* the AVX2+FMA paths are on */
	int	avx512;			/* and AVX-512F: float products of many rows */
	int	f16c;			/* F16 rows through F16C */
	int	nt;			/* threads, caller included */
	pthread_t *th;			/* [nt - 1] */
	struct backend_cpu_worker *wk;	/* [nt - 1], ids 1..nt-1 */
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	atomic_uint gen;		/* job number, bumped per job */
	atomic_int busy;		/* workers still in the job */
	atomic_int quit;
	backend_cpu_fn *fn;		/* the job */
	void	*ctx;
	int64_t	n, chunk;
	atomic_llong next;
	atomic_int oom;			/* a scratch allocation failed in the job */
	struct backend_cpu_scratch *scr;	/* [nt], one per thread */
	struct backend_cpu_scratch tmp;	/* the caller's, between ops */
	struct backend_cpu_scratch xq;	/* the caller's: quantized activations */
	struct backend_cpu_scratch pk;	/* the caller's: those packed (quant_pack) */
	struct backend_cpu_scratch moe;	/* the caller's: the MoE ops' gathered rows */
	struct backend_cpu_scratch emu;	/* the caller's: backend_cpu_emu_mm's inputs */
	int	emu_kind, emu_rows;	/* backend_cpu_gemm_emulate (kind -1: off) */
	struct backend_cpu_map *map;	/* [n_map] the allocations that are mappings */
	int	n_map, cap_map;
	pthread_mutex_t map_mu;
};

/* Run fn over [0, n) in chunks of `chunk` items on every thread; returns
 * -1 (out of memory) if a scratch allocation failed meanwhile. */
int	backend_cpu_run(struct backend_cpu *, int64_t n, int64_t chunk,
	    backend_cpu_fn *fn, void *ctx);
/* Thread tid's scratch of at least n floats (contents undefined), or
 * NULL after flagging the job out of memory. */
float	*backend_cpu_scratch(struct backend_cpu *, int tid, size_t n);

/* Vector loops: y += a x; r *= d, acc += r k; r += k dl, acc += r q. */
void	backend_cpu_axpy(const struct backend_cpu *, float *y, float a,
	    const float *x, int64_t n);
/* y = fma(a, x, y) elementwise: one rounding on every path. */
void	backend_cpu_axpy_fma(const struct backend_cpu *, float *y, float a,
	    const float *x, int64_t n);
/* backend_cpu_axpy(y, a[i], x + i ldx, n) for i = 0..k-1 in order, the same bits
 * (y kept in registers between the rows where it can). */
void	backend_cpu_axpy_rows(const struct backend_cpu *, float *y, int64_t n, const float *a,
	    const float *x, size_t ldx, int k);
/* axpy_fma of rows x + t ldx times a[t] into row t % w of acc [w][n], t < nk in order. */
void	backend_cpu_axpy_fma_lanes(const struct backend_cpu *, float *acc, int w, int64_t n,
	    const float *a, const float *x, size_t ldx, int nk);
/*
 * llama.cpp's attention sums (its x86 AVX-512 build).  Lanes: element i of
 * a sum goes to lane i % w, each lane a chain of fused multiply-adds in
 * order, then the lanes are added in a fixed tree.  w = 16 is llamafile's
 * sgemm (a batch of rows): lanes added pairwise 16 -> 8 -> 4 -> 2 -> 1.
 * w = 64 is ggml_vec_dot_f32/f16 (one row): four accumulators of 16 lanes,
 * 0+2 and 1+3, then those two, then the 16 lanes as before.
 * lanes_total: acc [w] holds the lanes (overwritten); returns the total.
 * lanes_cols: acc [w][n] holds n sums' lanes, sum i in column i
 * (overwritten); out[i] = lanes_total of column i, bit for bit.
 * dot_lanes: sum of a[i] b[i], i < n, so formed; same bits on every path.
 */
float	backend_cpu_lanes_total(float *acc, int w);
void	backend_cpu_lanes_cols(const struct backend_cpu *, float *acc, int w, int n, float *out);
float	backend_cpu_dot_lanes(const struct backend_cpu *, const float *a,
	    const float *b, int64_t n, int w);
/* s[t] = dot_lanes(a, b + t ldb, n, w) * scale for t < nk (the same bits). */
void	backend_cpu_dot_lanes_rows(const struct backend_cpu *, const float *a,
	    const float *b, size_t ldb, int nk, int64_t n, int w, float scale, float *s);
/*
 * max: the largest of x[0..n) as `mx = x[i] > mx ? x[i] : mx` from -inf
 * finds it (NaN skipped, a zero maximum the first zero's sign).
 * affine: x[i] = (x[i] + b) * a, each element so rounded (a = 1: x + b;
 * b = -0: x * a, exactly).
 */
float	backend_cpu_max(const struct backend_cpu *, const float *x, int64_t n);
void	backend_cpu_affine(const struct backend_cpu *, float *x, int64_t n, float a, float b);
/* decay / update over the k rows of S [k][n] in order (row i with kk[i], q[i]):
 * the same bits as one call a row. */
void	backend_cpu_decay_rows(const struct backend_cpu *, float *S, int k, int64_t n, float d,
	    float *acc, const float *kk);
void	backend_cpu_update_rows(const struct backend_cpu *, float *S, int k, int64_t n,
	    const float *kk, const float *dl, float *acc, const float *q);
void	backend_cpu_decay(const struct backend_cpu *, float *r, float d, float *acc,
	    float k, int64_t n);
void	backend_cpu_update(const struct backend_cpu *, float *r, float k,
	    const float *dl, float *acc, float q, int64_t n);

float	backend_cpu_silu(float x);
float	backend_cpu_expf_ggml(float x);
/* x[i] = backend_cpu_silu(x[i]) / backend_cpu_expf_ggml(x[i]), i < n, the same bits. */
void	backend_cpu_silu_n(float *x, int64_t n);
/*
 * The product y = x.w (with wu: silu(x.w) * (x.wu)) of m rows as the CUDA
 * backend computes it under backend_cpu_gemm_emulate's kind, when that is
 * on, m is past its rows and the GPU's numerics differ from the CPU's for
 * w's type (lib/backend_cpu_emu.c): 1 done, 0 not (the CPU's own product
 * then), -1 out of memory.  xq: x quantized for w's type (mm_prepare).
 */
/* 1 when be is a CPU backend (backend_cpu_open's). */
int	backend_cpu_is(const struct backend *be);
int	backend_cpu_emu_mm(struct backend_cpu *, const struct backend_weight *w,
	    const struct backend_weight *wu, const float *x, int ldx, const char *xq,
	    size_t xq_size, float *y, int ldy, int m);
void	backend_cpu_expf_ggml_n(float *x, int64_t n);
float	backend_cpu_sigmoid(float x);
float	backend_cpu_softplus(float x);

/* The dense products (the MoE ops run them on each expert's rows). */
int	backend_cpu_matmul(struct backend *, const struct backend_weight *, const float *,
	    int, float *, int, int);
int	backend_cpu_matmul_swiglu(struct backend *, const struct backend_weight *,
	    const struct backend_weight *, const float *, int, float *);

/* The mixture of experts (backend_cpu_moe.c). */
int	backend_cpu_moe_route(struct backend *, const float *, int, int, int, int, int32_t *,
	    float *);
int	backend_cpu_moe_swiglu(struct backend *, const struct backend_weight *,
	    const struct backend_weight *, int, const float *, int, int, const int32_t *, int,
	    float, float *);
/* step35's (backend_cpu_moe.c) */
int	backend_cpu_moe_route_sigmoid(struct backend *, const float *, int, int, int, int,
	    const float *, int, float, int32_t *, float *);
int	backend_cpu_swiglu_limit(struct backend *, const float *, const float *, float *, size_t,
	    float);
void	backend_cpu_swiglu_limit_rows(const float *, const float *, float *, size_t, float);
int	backend_cpu_head_gate(struct backend *, float *, int, const float *, int, int, int, int);
int	backend_cpu_moe_down(struct backend *, const struct backend_weight *, int,
	    const float *, int, const int32_t *, const float *, int, float *, int);
int	backend_cpu_add_gated(struct backend *, float *, int, const float *, int,
	    const float *, int, int, int);
int	backend_cpu_moe_geglu(struct backend *, const struct backend_weight *, int,
	    const float *, int, int, const int32_t *, int, float *);

/* Gemma-4's ops (backend_cpu_gemma.c). */
float	backend_cpu_gelu_tanh(float x);
int	backend_cpu_geglu(struct backend *, const float *, int, const float *, int, float *,
	    int, int, int);
int	backend_cpu_softcap(struct backend *, float *, size_t, float);
int	backend_cpu_scale(struct backend *, float *, size_t, float);
int	backend_cpu_clamp(struct backend *, float *, size_t, float, float);
int	backend_cpu_matmul_half(struct backend *, const struct backend_weight *, const float *,
	    int, float *, int, int);
int	backend_cpu_moe_scale(struct backend *, float *, const int32_t *, int, int,
	    const float *);

int	backend_cpu_rope(struct backend *, float *, int, int, int, int,
	    const int32_t *, int, float, int);
int	backend_cpu_round_f16(struct backend *, float *, int, int, int);
int	backend_cpu_attention(struct backend *, const struct backend_attn *,
	    const float *, int, int, const float *, const float *, int, int,
	    float *);
int	backend_cpu_conv1d_silu(struct backend *, const float *, int, int, int,
	    const float *, int, float *, float *, float *);
int	backend_cpu_gdn_step_seqs(struct backend *, const struct backend_gdn *, int,
	    const struct backend_seq *, const float *, int, const float *, const float *,
	    const float *, const float *, float *);
int	backend_cpu_gdn_step(struct backend *, const struct backend_gdn *, int,
	    const float *, int, const float *, const float *, const float *,
	    const float *, float *, float *, float *);
int	backend_cpu_gdn_chunk(struct backend *, const struct backend_gdn *, int,
	    const float *, int, const float *, const float *, const float *,
	    const float *, float *, float *);

#endif
