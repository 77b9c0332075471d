/*
 * backend: the op table a forward pass calls.
 *
 * A backend owns memory (host memory for the CPU backend, device memory
 * for CUDA) and runs ops on it.  Activations are float32 arrays in that
 * memory: backend_alloc returns a `float *` that the caller may offset
 * (x + r * ld) but must not dereference unless backend_host(be) says the
 * memory is host memory; backend_write/backend_read move data across.
 * Every op returns 0, or -1 with the reason in backend_errmsg(be).
 *
 * Shapes: a batch is m rows (tokens) of one sequence or several; an
 * activation is row-major [m][n] with a row stride ld (floats) >= n.
 * "Per-head" ops see a row of heads as rows of their own: rows = m *
 * n_head with ld = head stride, since heads are evenly spaced.
 *
 * Exactness contract (DESIGN.md): every op is batch-invariant (row i of
 * an m-row call is bit-identical to the same row computed alone, at the
 * same position for attention and the recurrent ops) and independent of
 * the number of threads.  Prefill-only forms (backend_gdn_chunk) agree to
 * float tolerance instead and must not be used for speculative verify.
 */
#ifndef MEMRA_BACKEND_H
#define MEMRA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

struct backend;

/*
 * Open a backend.  device: "cpu" (AVX2/FMA when the CPU has them),
 * "cpu:scalar" (the portable path only), "cpu:nofuse" (fused ops composed
 * from the plain ones, as for a backend without them; both for tests),
 * later "cuda[:N]".
 * n_threads: worker threads for the CPU backend, 0 = all cores.
 * Returns NULL with the reason in err (UTIL_ERRLEN).  backend_close frees;
 * close(NULL) is a no-op.  A backend is used by one caller thread at a time.
 */
struct backend *backend_open(const char *device, int n_threads, char *err);

/* The default device: "cuda" when built with CUDA and a GPU is present,
 * else "cpu" (DESIGN.md: default cuda where a GPU is present). */
const char *backend_default(void);

/* 1 when d names a device backend_open knows: cpu, cpu:MODE, cuda, cuda:N. */
int	backend_valid_device(const char *d);
void	backend_close(struct backend *);
const char *backend_errmsg(const struct backend *);
/* "cpu-avx2", "cpu-scalar", "cuda:0 (NVIDIA H200)", ... */
const char *backend_name(const struct backend *);
int	backend_threads(const struct backend *);
/* 1 when backend memory is host memory the caller may read and write. */
int	backend_host(const struct backend *);
/*
 * 1 when a prompt row's results are the same bits wherever the forward
 * around it was cut at a multiple of 64 (lib/schedule.h: the prefix cache
 * resumes a sequence inside a prefill chunk only then): the CPU backend.
 * 0 for the CUDA backend: there a prompt forward's rows take other bits
 * when its pieces differ (t/tools/prefix-exact -d cuda on model A, H200,
 * 2026-12-05: resumes at 576 and 1216 inside chunks of 512 differ in
 * 13-34% of the KV floats, at most 3.9e-6; cuBLAS's bf16 GEMM picks its
 * kernel by the number of rows, and which other kernel depends on the
 * piece was not yet measured), so a prefix cache on it resumes only at
 * multiples of the chunk, where every run cuts alike.
 */
int	backend_cut_exact(const struct backend *);

/*
 * The most rows a step may hold on this backend: a forward of decode rows
 * of many sessions and speculative verify rows (lib/model.h
 * model_forward_seqs packs them into groups of at most this many), whose
 * every op keeps each row's one-row bits for any number of rows up to it
 * (row-invariant: backend_matmul and the rest).  The CPU backend 32 (its
 * products are row-invariant at any m); CUDA 32 by default (its decode
 * kernels take a step of up to 32 rows, k_mv8t in one launch and the
 * others 16 rows a launch; a product of more takes a prompt's GEMM, other
 * bits), 16 after backend_rows_set(be, 16).  Always
 * BACKEND_ROWS_MIN..BACKEND_ROWS_MAX.
 */
int	backend_step_rows(const struct backend *);
/*
 * Sets backend_step_rows to rows (BACKEND_ROWS_MIN or BACKEND_ROWS_MAX) on
 * a backend that can take either (CUDA); a no-op returning 0 on one that
 * cannot (the CPU's are 32).  Only before a model or state is made on be
 * (their steps are packed by the value they were made with).  0, or -1
 * (an other value, or a step being recorded) with the reason.
 */
int	backend_rows_set(struct backend *, int rows);
/*
 * MEMRA_CUDA_STEP_ROWS's value v applied to be: NULL or "" leave the
 * default, "16" and "32" set that many (backend_rows_set).  0, or -1 for
 * any other value (err says why).  be NULL checks v only.
 */
int	backend_rows_env(struct backend *, const char *v, char *err);
/* The fewest and the most rows a step holds on any backend
 * (backend_step_rows); the most sizes a step's arrays. */
#define BACKEND_ROWS_MIN 16
#define BACKEND_ROWS_MAX 32

/* --- memory: n counts floats --- */

/* n zeroed floats of backend memory, or NULL; freed by backend_mfree. */
float	*backend_alloc(struct backend *, size_t n);
void	backend_mfree(struct backend *, float *);
/* host -> backend, backend -> host, backend -> backend (regions must not overlap) */
int	backend_write(struct backend *, float *dst, const float *src, size_t n);
int	backend_read(struct backend *, float *dst, const float *src, size_t n);
int	backend_copy(struct backend *, float *dst, const float *src, size_t n);
int	backend_fill(struct backend *, float *dst, float v, size_t n);
/* Wait for queued work (a no-op on the CPU). */
int	backend_sync(struct backend *);
/*
 * Make be the calling thread's current device (cudaSetDevice; a no-op on
 * the CPU): one thread that drives backends on several devices (pipeline
 * stages) calls it before each one's work.  0, or -1 with the reason.
 */
int	backend_use(struct backend *);
/*
 * n floats of host memory that backend_read fills fastest and
 * backend_write reads fastest (page-locked on a GPU, so a read of a
 * verify's logits is one DMA, not a copy through a staging buffer;
 * plain memory on the CPU), or NULL with the reason kept.  Callers
 * allocate their per-step logits and hidden rows here.  Freed by
 * backend_host_free (NULL is a no-op).
 */
float	*backend_host_alloc(struct backend *, size_t n);
void	backend_host_free(struct backend *, float *);

/*
 * The backend's memory in bytes: *free_b what an allocation may still get
 * (a GPU's free device memory; the CPU's: /proc/meminfo MemAvailable),
 * *total all of it.  0, or -1 with the reason kept.
 */
int	backend_mem_info(struct backend *, size_t *free_b, size_t *total);

/* --- weights --- */

/*
 * A matrix W[ne1][ne0] of a ggml type (enum quant_type): ne1 rows of
 * quant_row_size(type, ne0) bytes each.  Filled by backend_weight_init,
 * which either references data in place (CPU: the caller keeps it mapped
 * until backend_weight_release) or copies it to the device.  scale
 * multiplies every product (the NVFP4 `.scale` sidecar; 1 when none).
 */
struct backend_weight {
	int	type;		/* enum quant_type */
	int64_t	ne0;		/* row length: input features */
	int64_t	ne1;		/* rows: output features */
	size_t	row_size;	/* bytes per row */
	float	scale;
	const void *data;	/* [ne1][row_size] bytes, backend memory */
	void	*priv;		/* the backend's own (device copy, repacked layout) */
	/* a stack of n_escale experts: expert e's products times escale[e]
	 * ([n_escale] backend memory, the caller's) instead of scale; NULL for
	 * none (backend_weight_expert_scales) */
	const float *escale;
	int	n_escale;
};
int	backend_weight_init(struct backend *, struct backend_weight *w, int type,
	    int64_t ne0, int64_t ne1, const void *data, float scale);
/*
 * backend_weight_expert_scales: w is a stack of n experts (ne1 / n rows
 * each) whose products the MoE ops multiply by s[e] (backend memory, [n],
 * kept by the caller until w is released) instead of w->scale: llama.cpp's
 * per-expert NVFP4 `.scale` sidecar, (x . W_e^T) * s[e] in float.  The
 * plain products refuse such a weight.  0, or -1 (a backend without the
 * MoE ops, or rows that are not n experts).
 */
int	backend_weight_expert_scales(struct backend *, struct backend_weight *w, int n,
	    const float *s);
void	backend_weight_release(struct backend *, struct backend_weight *w);
/*
 * backend_weight_rows: rows r0 .. r0 + n - 1 of w become the n host rows
 * at src, of the type backend_weight_init took (a backend that reads the
 * caller's bytes in place copies only where src is not already them).
 * 0, or -1 with the reason (rows outside w, or a backend that holds w in
 * another type: the caller makes it again from its rows).
 */
int	backend_weight_rows(struct backend *, struct backend_weight *w, int64_t r0, int64_t n,
	    const void *src);
/* 1 when the backend can matmul/embed weights of this type. */
int	backend_supports(const struct backend *, int type);

/* --- ops --- */

/* y[i][0..ne0) = row ids[i] of w, dequantized (i < m; ids are host memory). */
int	backend_embed(struct backend *, const struct backend_weight *w,
	    const int32_t *ids, int m, float *y, int ldy);

/*
 * y = x / sqrt(mean(x^2) + eps) * w over rows of n (w: [n] backend memory,
 * NULL for none).  In place (y == x) is fine.
 */
int	backend_rmsnorm(struct backend *, const float *x, int ldx,
	    const float *w, float *y, int ldy, int rows, int n, float eps);

/* y = rmsnorm(x) * w * silu(z) over contiguous rows of n (GDN output norm). */
int	backend_rmsnorm_gated(struct backend *, const float *x, const float *z,
	    const float *w, float *y, int rows, int n, float eps);

/*
 * Y[m][ne1] = X[m][ne0] . W^T (times w->scale).  For m up to
 * backend_step_rows, row r of Y depends only on row r of X:
 * bit-identical for any such m and thread count (on the CPU for any m;
 * past it the CUDA backend runs a prompt's GEMM, backend_gemm_set).  y
 * must not overlap x.
 */
int	backend_matmul(struct backend *, const struct backend_weight *w,
	    const float *x, int ldx, float *y, int ldy, int m);

/*
 * The norm fused into the products that read it: t = rmsnorm(x[m][n]) *
 * nw, then y[i] = t . W[i]^T for i < nout (y[i] contiguous [m][W[i]->ne1]).
 * Equal bit for bit to backend_rmsnorm followed by backend_matmul.
 */
int	backend_rmsnorm_matmul(struct backend *, const float *x, int m, int n,
	    const float *nw, float eps, int nout,
	    const struct backend_weight *const *W, float *const *y);

/*
 * The fused forms below each equal, bit for bit, the sequence of plain ops
 * they name (backend.c composes them so for a backend without them, the
 * CPU backend included); a device backend runs each in fewer kernels.
 *
 * backend_add_rmsnorm_matmul: the residual add of one block and the norm
 * and products that open the next: x[m][n] += t[m][n] (t NULL: no add),
 * then backend_rmsnorm_matmul of x.  Equals backend_add then
 * backend_rmsnorm_matmul.
 */
int	backend_add_rmsnorm_matmul(struct backend *, float *x, const float *t, int m,
	    int n, const float *nw, float eps, int nout,
	    const struct backend_weight *const *W, float *const *y);

/*
 * The SwiGLU FFN block, opened by the residual add of the block before
 * it: x[m][n] += t (t NULL: no add); f[m][n_ff] = silu(xn . Wg^T) * (xn .
 * Wu^T) with xn = rmsnorm(x) * nw; y[m][n] = f . Wd^T.  u: [m][n_ff]
 * scratch.  y may be t (read first), must not overlap x, f or u.  Equals
 * backend_add, backend_rmsnorm into y, backend_matmul_swiglu into f,
 * backend_matmul into y.
 */
int	backend_ffn(struct backend *, float *x, const float *t, int m, int n,
	    const float *nw, float eps, const struct backend_weight *wg,
	    const struct backend_weight *wu, const struct backend_weight *wd, float *f,
	    float *u, float *y);

/*
 * The norms that close a block and its residual add (Gemma-4's post-FFN
 * side): u = rmsnorm(a[m][n]) * wa, plus rmsnorm(b[m][n]) * wb where b is
 * not NULL; then, w2 not NULL, u = rmsnorm(u) * w2; x[m][n] += u; then x
 * *= s where s != 1.  A NULL weight scales by nothing (backend_rmsnorm's).
 * a and b are spent: what they hold after the call is unspecified; x
 * overlaps neither.  Equals
 * backend_rmsnorm of a (and b) in place, backend_add(a, b),
 * backend_rmsnorm of a by w2 in place, backend_add(x, a) and
 * backend_scale(x, s).
 */
int	backend_norm_residual(struct backend *, float *x, float *a, const float *wa,
	    float *b, const float *wb, const float *w2, float eps, float s, int m, int n);

/*
 * The norm that closes a block, its residual add and the norm and products
 * that open the next (Gemma-4's post-attention side): x[m][n] = (x +
 * rmsnorm(a) * wa) * s (s = 1: no product), then backend_rmsnorm_matmul of
 * x.  a is spent (as backend_norm_residual's).  Equals
 * backend_norm_residual(x, a, wa, NULL, NULL, NULL, eps, s) then
 * backend_rmsnorm_matmul.
 */
int	backend_norm_residual_matmul(struct backend *, float *x, float *a, const float *wa,
	    float s, int m, int n, const float *nw, float eps, int nout,
	    const struct backend_weight *const *W, float *const *y);

/*
 * The residual add that closes a block and the norm that opens the next
 * (the mixture of experts' FFN: its router and experts read the norm):
 * x[m][n] += t, then y[m][n] = rmsnorm(x) * nw.  y overlaps neither x nor
 * t.  Equals backend_add then backend_rmsnorm.
 */
int	backend_add_rmsnorm(struct backend *, float *x, const float *t, const float *nw,
	    float *y, float eps, int m, int n);

/*
 * Two norms of one x[m][n] (Gemma-4's router input and its experts'):
 * y1 = rmsnorm(x) * w1, then y1 *= s1 where s1 != 1; y2 = rmsnorm(x) * w2.
 * y1 and y2 overlap neither x nor each other.  Equals backend_rmsnorm into
 * y1, backend_scale of y1, backend_rmsnorm into y2.
 */
int	backend_rmsnorm_pair(struct backend *, const float *x, const float *w1, float s1,
	    float *y1, const float *w2, float *y2, float eps, int m, int n);

/*
 * Gemma-4's MLP output side: g[m][w->ne0] = gelu_tanh(g) * u in place (u
 * the same shape), then y[m][w->ne1] = g . W^T.  Equals backend_geglu(g,
 * u -> g) then backend_matmul.
 */
int	backend_geglu_matmul(struct backend *, float *g, const float *u, int m,
	    const struct backend_weight *w, float *y);

/*
 * The Gated DeltaNet output side: x[m][nh*n], a row of nh heads of n, is
 * normed per head in place as backend_rmsnorm_gated(x, z, nw, x, m * nh,
 * n) does, then y[m][w->ne1] = x . W^T (w->ne0 == nh * n).  Equals the two.
 */
int	backend_rmsnorm_gated_matmul(struct backend *, float *x, const float *z,
	    const float *nw, int m, int nh, int n, float eps,
	    const struct backend_weight *w, float *y);

/*
 * The attention output gate into the o product: x[m][nh*hd] (heads of hd)
 * gets x[r][h*hd + j] *= sigmoid(g[(r*nh + h)*ldg + j]) in place, as
 * backend_mul_sigmoid(x, hd, g, ldg, m * nh, hd) does, then y[m][w->ne1]
 * = x . W^T (w->ne0 == nh * hd).  Equals the two.
 */
int	backend_mul_sigmoid_matmul(struct backend *, float *x, const float *g, int ldg,
	    int m, int nh, int hd, const struct backend_weight *w, float *y);

/* y[m][n_ff] = silu(x . Wg^T) * (x . Wu^T): gate, up and SwiGLU in one op. */
int	backend_matmul_swiglu(struct backend *, const struct backend_weight *wg,
	    const struct backend_weight *wu, const float *x, int m, float *y);

/*
 * A SwiGLU MLP on rows already normed (the shared experts of qwen35moe and
 * step35, step35's dense layers, the DFlash2 drafter's): f[m][n_ff] =
 * silu(x . Wg^T) * (x . Wu^T)
 * (lim > 0: min(silu(g), lim) * clamp(u, -lim, lim), backend_swiglu_limit's),
 * then y[m][wd->ne1] = f . Wd^T; x rows of wg->ne0 floats, contiguous, u
 * [m][n_ff] scratch.  y overlaps none of x, f, u.  Equals
 * backend_matmul_swiglu into f (lim > 0: backend_matmul by wg into f and
 * by wu into u, then backend_swiglu_limit into f), then backend_matmul
 * into y; a device backend quantizes f for the down product in the
 * kernel that makes it.
 */
int	backend_mlp(struct backend *, const struct backend_weight *wg,
	    const struct backend_weight *wu, const struct backend_weight *wd, const float *x,
	    int m, float lim, float *f, float *u, float *y);

/* y[i] = silu(g[i]) * u[i], i < n (y may be g or u). */
int	backend_swiglu(struct backend *, const float *g, const float *u, float *y,
	    size_t n);

/*
 * RoPE, in place, on the first n_rot dims of each head, angle pos *
 * theta^(-2j/n_rot) for pair j < n_rot/2.  BACKEND_ROPE_NEOX pairs dims
 * (j, j + n_rot/2) (rotate-half: qwen, HF layouts); BACKEND_ROPE_NORM pairs
 * (2j, 2j+1) (ggml's mode 0: llama GGUFs, whose Q/K rows the converter
 * permuted).  Row r (r < m, at position pos[r], host memory) has n_head
 * heads at x + r*ldx + h*hs.
 *
 * Either mode may be or-ed with BACKEND_ROPE_GGML: the angles and the
 * rotation rounded as ggml's CPU rope rounds them (ts = theta^(-2/n_rot)
 * in float, pair j's angle pos * ts * ... * ts by j float products, and
 * x0 cos - x1 sin, x0 sin + x1 cos each with one fused multiply-add on
 * the x0 product, as llama.cpp's x86 build compiles them).  Without it:
 * 1 / theta^(2j/n_rot) times pos and plain products (PyTorch's rounding).
 *
 * BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP (gemma4's "proportional" RoPE of
 * its global layers; a backend_gemma backend): the pairs span the whole
 * head of hs dims, pair j = (j, j + hs/2) at angle pos * theta^(-2j/hs),
 * and only pairs j < n_rot/2 turn (the others' angle is 0: unchanged).
 */
enum backend_rope_mode {
	BACKEND_ROPE_NORM, BACKEND_ROPE_NEOX, BACKEND_ROPE_GGML = 4, BACKEND_ROPE_PROP = 8
};
int	backend_rope(struct backend *, float *x, int ldx, int n_head, int hs,
	    int m, const int32_t *pos, int n_rot, float theta, int mode);

/*
 * Causal attention of m query rows of one sequence at positions
 * p0..p0+m-1 against its KV cache kc, vc ([n_ctx][n_kv_head*head_dim],
 * already holding positions 0..p0+m-1).  Query head h of row r is at
 * q + r*ldq + h*qhs; it reads kv head h / (n_head/n_kv_head).
 * o: [m][n_head*head_dim].  Row r equals the same row decoded alone.
 */
struct backend_attn {
	int	n_head, n_kv_head, head_dim;
	float	scale;		/* usually 1/sqrt(head_dim) */
	int	kv_f16;		/* llama.cpp's F16 cache: kc, vc hold half-precision
				 * values (backend_round_f16), q and the softmax
				 * weights are rounded to half before their products */
	int	ggml;		/* the sums and exp of llama.cpp's CPU attention (the
				 * orders of its x86 AVX-512 kernels; the CPU backend
				 * only): for llama GGUFs, and always with kv_f16 */
	int	batched;	/* with ggml or kv_f16: the orders of llama.cpp's
				 * kernels for two or more rows (llamafile's sgemm),
				 * not its one-row ones.  Row r is the same in any
				 * batch either way, but its bits depend on this flag,
				 * as llama.cpp's prompt rows differ from decoded ones */
	int	window;		/* > 0: a sliding window (gemma4, step35): the query
				 * at position i sees keys j with i - window < j <= i
				 * only; 0: every earlier key.  Needs backend_window,
				 * and neither ggml nor kv_f16 */
	const int32_t *hi;	/* NULL: causal.  Else host [m]: row r (at position
				 * i = p0 + r) also sees the later keys up to hi[r]
				 * (i <= hi[r] < p0 + m: keys this call wrote), the
				 * window still bounding it below: an image's rows
				 * seeing the whole image (gemma4's bidirectional
				 * vision blocks; a vision tower's full attention with
				 * p0 0 and every hi m - 1).  Needs backend_attn_hi,
				 * neither ggml nor kv_f16, and no d_pos form */
	int	ring;		/* > 0: kc, vc are rings of ring rows, key j in row
				 * j % ring, holding every key the rows see (a
				 * sliding layer's cache that keeps its last ring
				 * positions: a DFlash drafter's context); needs a
				 * window of 1..ring keys (with hi: no row seeing
				 * more keys than the ring holds), backend_attn_hi,
				 * neither ggml nor kv_f16 (backend_attention_dpos
				 * takes it, without hi).  The same bits as the keys
				 * in rows of their own.  0: key j in row j */
};
int	backend_attention(struct backend *, const struct backend_attn *a,
	    const float *q, int ldq, int qhs, const float *kc, const float *vc,
	    int m, int p0, float *o);

/*
 * The longest head (backend_attn.head_dim) backend_attention takes on
 * be: 0 for any (the CPU), else its kernels' bound (the CUDA backend's
 * 256); backend_attention refuses longer heads with the reason, and a
 * model whose heads are longer refuses to load on be.
 */
int	backend_head_max(const struct backend *);

/*
 * Round x[r][j] (r < rows, j < n) to the nearest half-precision value, in
 * place (a value past half's range becomes +-Inf): what storing it in an
 * F16 KV cache keeps.  -1 on a backend without half-precision caches
 * (backend_kv_f16).
 */
int	backend_round_f16(struct backend *, float *x, int ldx, int rows, int n);

/*
 * The ops of a chain of steps whose tokens stay in backend memory (a
 * recorded MTP draft chain: each step's pick is the next step's input,
 * read back once at the end).  d_ids, d_out: int32 [m] in backend memory
 * (backend_alloc'd floats holding int32 bits).
 *
 * backend_embed_dev: backend_embed of the ids d_ids, read when the op
 * runs; an id < 0 (a pick that found no finite value) embeds row 0, so
 * that the chain runs on and its caller discards what follows it; an id
 * >= w->ne1 is the caller's error (not checked on a GPU).
 * backend_argmax_dev: backend_argmax with out in backend memory.
 * backend_argmax_map: a masked draft head's greedy pick, as ranks_argmax
 * (lib/ranks.h) takes it from a row: of x[r][0..n) the largest value that
 * is not NaN or -inf, ties to the lowest map id; d_out[r] = map[that
 * column], -1 when there is none.  d_map: int32 [n] in backend memory.
 * backend_dev_ids: 1 when the backend has the three (a host backend always).
 */
int	backend_embed_dev(struct backend *, const struct backend_weight *w,
	    const int32_t *d_ids, int m, float *y, int ldy);
int	backend_argmax_dev(struct backend *, const float *x, int ldx, int m, int n,
	    int32_t *d_out);
int	backend_argmax_map(struct backend *, const float *x, int ldx, int m, int n,
	    const int32_t *d_map, int32_t *d_out);
int	backend_dev_ids(const struct backend *);

/*
 * Whether a model's MTP draft chain (model_mtp_chain) runs chained on be
 * (its picks left in backend memory, recorded as one unit where steps
 * are recorded), on by default, or step by step (backend_chain_set(be,
 * 0): each pick read back, as model_mtp_argmax); the same bits either
 * way.  backend_chain: 1 when on.  backend_chain_env: MEMRA_CUDA_MTP_CHAIN's
 * value v applied to be (NULL, "" or "1" on, "0" off): 0, or -1 for any
 * other value (err says why); be NULL checks v only.
 */
void	backend_chain_set(struct backend *, int on);
int	backend_chain(const struct backend *);
int	backend_chain_env(struct backend *, const char *v, char *err);

/* 1 when the backend implements backend_attn.kv_f16 and backend_round_f16. */
int	backend_kv_f16(const struct backend *);

/*
 * The position-dependent ops of a decode step with the positions in
 * backend memory, read when the op runs rather than when it is queued, so
 * that a recorded step (backend_graph_*) replays at any position.  d_pos:
 * int32 [m] in backend memory (backend_alloc'd floats holding int32
 * bits, filled with backend_write), d_pos[r] = d_pos[0] + r.  Each equals
 * its host-position form bit for bit.
 *
 * backend_rope_dpos: backend_rope at positions d_pos.
 * backend_kv_store: K, V rows k[m][kvd], v[m][kvd] (contiguous) into the
 * caches kc, vc ([n_ctx][kvd]) at rows d_pos[0]..d_pos[0]+m-1; ring > 0:
 * caches that are rings of ring rows (m <= ring), position p in row
 * p % ring (backend_attn.ring's), n_ctx still bounding the positions.
 * backend_attention_dpos: backend_attention at p0 = d_pos[0] of a context
 * of n_ctx positions (p0 + m <= n_ctx): caches of n_ctx rows, or with
 * a->ring rings of that many (no a->hi).
 */
int	backend_rope_dpos(struct backend *, float *x, int ldx, int n_head, int hs,
	    int m, const int32_t *d_pos, int n_rot, float theta, int mode);
int	backend_kv_store(struct backend *, float *kc, float *vc, const float *k,
	    const float *v, int kvd, int m, const int32_t *d_pos, int n_ctx, int ring);
int	backend_attention_dpos(struct backend *, const struct backend_attn *a,
	    const float *q, int ldq, int qhs, const float *kc, const float *vc,
	    int m, const int32_t *d_pos, int n_ctx, float *o);

/*
 * Attention's query and key heads after their products, as one op: q's
 * n_head heads (head h of row r at q + (r*n_head + h)*qhs) normed in
 * place as backend_rmsnorm(q, qhs, qn, q, qhs, m*n_head, head_dim) norms
 * them, k's ([m][kvd], kvd = n_kv_head*head_dim) as backend_rmsnorm(k,
 * head_dim, kn, k, head_dim, m*n_kv_head, head_dim); with v_norm, v's
 * ([m][kvd]) too, without a weight (Gemma-4's), as backend_rmsnorm(v,
 * head_dim, NULL, v, head_dim, m*n_kv_head, head_dim); then q and k roped
 * as backend_rope does at pos (host memory) or, pos NULL, as
 * backend_rope_dpos does at d_pos; then, kc not NULL (with d_pos), k's
 * rows and v's stored into the caches as backend_kv_store stores them
 * (n_ctx positions, rings of ring rows when ring > 0).  Equals those ops in
 * that order, bit for bit.
 */
struct backend_qkn {
	int	n_head, n_kv_head, head_dim;
	int	qhs;		/* q's head stride (>= head_dim) */
	const float *qn, *kn;	/* the norms' weights, [head_dim] each */
	float	eps;
	int	n_rot, mode;	/* backend_rope's */
	float	theta;
	int	v_norm;		/* 1: v normed in place (v not NULL) */
	int	ring;		/* > 0: kc, vc are rings of ring rows (the store's) */
};
int	backend_qk_norm_rope(struct backend *, const struct backend_qkn *a, float *q,
	    float *k, float *v, int m, const int32_t *pos, const int32_t *d_pos,
	    float *kc, float *vc, int n_ctx);

/*
 * Recorded steps (CUDA graphs): ops queued on the same memory step after
 * step (whatever changes between steps read from backend memory, as the
 * _dpos ops do) are recorded once and then replayed as one unit:
 *
 *	r = backend_graph_replay(be, key, n);		(-1: fail)
 *	if (r == 0) {
 *		rec = backend_graph_begin(be, key, n);	(-1: fail)
 *		rc = <queue the ops>;
 *		if (rec == 1 && backend_graph_end(be, rc) != 0)
 *			rc = <queue the ops>;		(nothing ran)
 *	}
 *
 * key: n <= BACKEND_GRAPH_KEY bytes naming the ops and the memory they
 * use: the same key must mean the same op calls with the same arguments.
 * backend_graph_replay: 1 when the ops recorded under key were queued
 * again; 0 when there is no recording to replay (none yet, or a stale
 * one: backend memory was freed or moved since) and the caller queues the
 * ops.  backend_graph_begin: 1 when the ops that follow are recorded
 * (not run) until backend_graph_end; 0 when they simply run: a backend
 * without graphs, graphs off, or the first step under a key (it sizes
 * the scratch buffers the recording will use).  backend_graph_end(be,
 * failed): stops recording; unless failed (an op returned -1), keeps the
 * recording under key and queues it once: 0.  -1 when failed or when
 * the recording could not be made: nothing ran, graphs are off on be from
 * then on (the CUDA backend prints one warning line naming the reason),
 * and the caller queues the ops again.
 */
#define BACKEND_GRAPH_KEY 64
int	backend_graph_replay(struct backend *, const void *key, size_t n);
int	backend_graph_begin(struct backend *, const void *key, size_t n);
int	backend_graph_end(struct backend *, int failed);

/*
 * Whether steps are recorded, and what came of it.  on: recording is on
 * (a backend that records starts with it on; backend_graph_set(be, 0)
 * turns it off, 1 back on unless a failure turned it off for good).
 * why: the failure that turned it off ("" if none); the caller decides
 * whether and where to say it.
 */
struct backend_graph_stats {
	int		on;
	unsigned long	recorded, replayed, stale;
	char		why[512];
};
void	backend_graph_set(struct backend *, int on);
const struct backend_graph_stats *backend_graph_stats(const struct backend *);
/*
 * MEMRA_CUDA_GRAPH's value v applied to be: NULL, "" or "1" leave
 * recording on, "0" turns it off, "stats" leaves it on and asks for the
 * counts at the end.  Returns 1 for "stats", 0 otherwise, -1 for any
 * other value (err says why).  be NULL checks v only.
 */
int	backend_graph_env(struct backend *, const char *v, char *err);
/*
 * Programmatic dependent launch (the CUDA backend on sm_90 and later):
 * on, each kernel of a step may be scheduled while the one before it
 * still runs, waiting inside for that one's end before it touches what
 * it wrote; it hides the gaps between kernels, and every result stays the
 * same bits.  On by default where the device has it.  backend_pdl_set(be,
 * on): 1 when it is on now, 0 when off (always 0 on the CPU and on older
 * GPUs: a no-op), -1 while a step is being recorded (backend_graph_begin
 * .. _end), with the reason.  Steps recorded the other way are recorded
 * anew (never replayed).
 */
int	backend_pdl_set(struct backend *, int on);
/*
 * MEMRA_CUDA_PDL's value v applied to be: NULL, "" or "1" leave it as it
 * is (on where the device has it), "0" turns it off.  0, or -1 for any
 * other value (err says why).  be NULL checks v only.
 */
int	backend_pdl_env(struct backend *, const char *v, char *err);
/*
 * The kernel of a product of more than backend_step_rows rows (a prompt's
 * prefill) on the CUDA backend.  BACKEND_GEMM_INT8: the CPU backend's
 * numerics for Q8_0, NVFP4 and IQ4_XS weights (the input quantized to int8
 * as the CPU quantizes it, each block's integer dot scaled and summed in
 * the CPU's order, on tensor cores; IQ4_NL, Q4_1 and Q5_1 by the decode
 * kernel 16 rows at a time), fp32 operands for every other type.
 * BACKEND_GEMM_BF16: for quantized weights, the same int8 input's values
 * (or the input, for the other quantized types) and the dequantized
 * weights, each rounded to bf16, multiplied on tensor cores with fp32
 * sums (within about 2^-8 of the magnitude of the first; faster); F32,
 * F16 and BF16 weights keep fp32 operands.  Products of up to
 * backend_step_rows rows (decode, speculative verify) are the same
 * bits either way.  The experts' products of a prompt (backend_moe_*, m
 * more than backend_step_rows) follow the kind too: BACKEND_GEMM_BF16
 * (and _MIRROR, without a copy) bf16 operands, the input itself rounded
 * for every quantized type; BACKEND_GEMM_INT8 the decode kernels' bits.
 * BACKEND_GEMM_BF16_MIRROR: BACKEND_GEMM_BF16's bits,
 * with each quantized weight dequantized to bf16 once, by the first prompt
 * that multiplies it, into a copy kept for later prompts (2 bytes a
 * weight of device memory; a weight the device has no room for is
 * dequantized each time, as BACKEND_GEMM_BF16 does).  backend_gemm_set: 0,
 * or -1 while a step is being recorded (a no-op on the CPU).
 */
enum { BACKEND_GEMM_INT8 = 0, BACKEND_GEMM_BF16 = 1, BACKEND_GEMM_BF16_MIRROR = 2 };
int	backend_gemm_set(struct backend *, int kind);
/*
 * MEMRA_CUDA_GEMM's value v applied to be: NULL or "" leave the default
 * (BACKEND_GEMM_DEFAULT), "int8", "bf16" and "bf16-mirror" pick that
 * kind.  0, or -1 for any other value (err says why).  be NULL checks v
 * only.
 */
#define BACKEND_GEMM_DEFAULT BACKEND_GEMM_BF16
int	backend_gemm_env(struct backend *, const char *v, char *err);
/*
 * How the CUDA backend runs the experts' products (backend_moe_swiglu and
 * the rest), the same bits every way: BACKEND_MOE_GROUP_OFF a kernel
 * block per slot (row x picked expert), each reading its expert's whole
 * matrix; BACKEND_MOE_GROUP_ALL the slots sorted by expert on the device
 * and each weight row read once for up to 16 slots of its expert;
 * BACKEND_MOE_GROUP_AUTO (the default) grouped where a call's slots share
 * experts (a prompt, a wide step), per slot elsewhere (a decode row's k
 * experts are distinct), Q8_0 and NVFP4 experts by the int8 tensor cores
 * for an expert's runs of 9 slots or more (up to 32 a weight row's read);
 * BACKEND_MOE_GROUP_CC BACKEND_MOE_GROUP_AUTO without the tensor cores
 * (the CUDA-core kernels on up to 16 slots, as before them: the A/B of
 * the prompt kernels).  backend_moe_group_set: 0, or -1 (another mode, or
 * a step being recorded) with the reason; a no-op on the CPU.
 */
enum { BACKEND_MOE_GROUP_OFF = 0, BACKEND_MOE_GROUP_AUTO = 1, BACKEND_MOE_GROUP_ALL = 2,
	BACKEND_MOE_GROUP_CC = 3 };
int	backend_moe_group_set(struct backend *, int mode);
/*
 * MEMRA_CUDA_MOE_GROUP's value v applied to be: NULL, "" or "1" leave the
 * default (BACKEND_MOE_GROUP_AUTO), "0" sets BACKEND_MOE_GROUP_OFF, "all"
 * BACKEND_MOE_GROUP_ALL, "cc" BACKEND_MOE_GROUP_CC.  0, or -1 for any other
 * value (err says why).  be NULL checks v only.
 */
int	backend_moe_group_env(struct backend *, const char *v, char *err);
/*
 * How the CUDA backend runs the K-quant (Q4_K, Q5_K, Q6_K) and IQ4_XS
 * products of up to backend_step_rows rows and its experts' products grouped by expert,
 * the same bits every way: BACKEND_QKT_OFF the CUDA-core kernels,
 * BACKEND_QKT_ON the int8 tensor-core kernels of cuda/matvec_qkt.cuh (one
 * launch of up to 32 rows), BACKEND_QKT_AUTO (the default) those from 12
 * rows (the grouped experts always).  backend_qkt_set: 0, or -1 (another
 * mode, or a step being recorded) with the reason; a no-op on the CPU.
 * backend_qkt_env: MEMRA_CUDA_QKT's value v applied to be: NULL or "" leave
 * the default, "0" sets BACKEND_QKT_OFF, "1" BACKEND_QKT_ON, "auto"
 * BACKEND_QKT_AUTO; 0, or -1 for any other value (err says why); be NULL
 * checks v only.
 */
enum { BACKEND_QKT_OFF = 0, BACKEND_QKT_ON = 1, BACKEND_QKT_AUTO = 2 };
int	backend_qkt_set(struct backend *, int mode);
int	backend_qkt_env(struct backend *, const char *v, char *err);
/*
 * Where the CUDA backend's Q6_K decode products (CUDA cores, 8 lanes a
 * block: up to 16 rows) read their weights: on = 1 from each row staged in
 * shared memory, 0 (the default) in place; the same bits either way
 * (gpu_tune_qk_stage).  backend_qk_stage_set: 0, or -1 (a step being
 * recorded) with the reason; a no-op on the CPU.  backend_qk_stage_env:
 * MEMRA_CUDA_QK_STAGE's value v applied to be: NULL or "" leave the
 * default, "0" or "1" set it; 0, or -1 for any other value (err says why);
 * be NULL checks v only.
 */
int	backend_qk_stage_set(struct backend *, int on);
int	backend_qk_stage_env(struct backend *, const char *v, char *err);
/*
 * How the CUDA backend lays out the Q6_K weights initialized after the
 * call: on = 1 (its default) packed four blocks a group (gpu_q6k_pack4:
 * the same bytes, each piece its decode product reads 8-byte aligned; the
 * tensor-core form from 3 rows, matvec_qk.cu's qkt_auto_m), 0 as in the
 * file.  The same bits either way.  On an H100 at the 31B shape the
 * one-row product is 1.19x as fast (bench/2026-12-07/2026-12-07-s33-notes.md)
 * and the tensor-core form 1.2-1.3x (2026-12-07-s34-notes.md).
 * backend_q6k_pack_set: 0 (a no-op on the CPU); weights loaded before keep
 * theirs.  backend_q6k_pack: 1 when Q6_K weights initialized now are packed
 * (never on the CPU).  backend_q6k_pack_env: MEMRA_CUDA_Q6K_PACK's value v
 * applied to be: NULL or "" leave the default, "0" or "1" set it; 0, or -1
 * for any other value (err says why); be NULL checks v only.
 */
int	backend_q6k_pack_set(struct backend *, int on);
int	backend_q6k_pack(const struct backend *);
int	backend_q6k_pack_env(struct backend *, const char *v, char *err);
/*
 * On the CPU backend only, for checks (kernel-check's model lines): its
 * products of more than rows rows computed with the numerics of the CUDA
 * backend's prompt kernels of kind (BACKEND_GEMM_*: for bf16, the GPU's
 * operands rounded to bf16; for int8, the K-quants' and Q4_0's float
 * products), emulated in double sums (slow); kind -1 turns it off (the
 * CPU's own numerics, the default).  0, or -1 (not the CPU backend, a
 * bad kind or rows < 1) with the reason.  Unlike backend_gemm_set, which
 * MEMRA_CUDA_GEMM drives and the CPU ignores.
 */
int	backend_cpu_gemm_emulate(struct backend *, int kind, int rows);
/*
 * The line a tool prints about recorded steps when it ends, into buf
 * (n bytes): the failure that turned recording off, and with stats the
 * counts.  Returns buf, or NULL when there is nothing to say.
 */
const char *backend_graph_note(const struct backend *, int stats, char *buf, size_t n);

/*
 * Where the device's time goes (a benchmark aid, not for serving): with
 * recording off (backend_graph_set(be, 0)), the ops queued between
 * backend_prof_begin and backend_prof_end are timed kernel by kernel on the
 * device and summed per kernel name; begin queues BACKEND_PROF_SPIN_S of
 * device work ahead of them, so they run back to back, not waiting on the
 * host that queues them.  begin: -1 when the backend cannot
 * (the CPU backend; recording on), with the reason.  rows: the sums since
 * the backend opened (or the last reset), busiest first; returns how many.
 */
struct backend_prof_row {
	const char	*name;		/* the kernel's name as the backend calls it */
	double		s;		/* device seconds, summed */
	unsigned long	n;		/* launches */
};
#define BACKEND_PROF_SPIN_S 0.020	/* begin's spin ahead of the ops (host timing: subtract it) */
int	backend_prof_begin(struct backend *);
int	backend_prof_end(struct backend *);
int	backend_prof_rows(struct backend *, const struct backend_prof_row **rows);
void	backend_prof_reset(struct backend *);

/*
 * A mixture of experts.  A stack of n_exp experts is one backend_weight of
 * n_exp * rows rows (GGUF's 3-D ffn_{gate,up,down}_exps {ne0, rows,
 * n_exp}, contiguous): expert e's matrix is rows e*rows .. e*rows+rows-1,
 * rows = w->ne1 / n_exp.  ids: int32 [m][k] in backend memory
 * (backend_alloc'd floats holding int32 bits), so that a routed step
 * stays where its data is (on a GPU, graph-capturable).  A row's results
 * depend on that row alone (batch-invariant): each slot's products are
 * the bits of backend_matmul (backend_matmul_swiglu) of that one row with
 * the expert's matrix, for m up to backend_step_rows; past it (a prompt)
 * under BACKEND_GEMM_BF16 the CUDA backend multiplies a quantized expert
 * on bf16 operands (x and the dequantized weights rounded to bf16, fp32
 * sums), still each slot's row a function of its own row and expert.
 *
 * backend_moe_route: the router.  For row r < m of the router's logits
 * x[r][0..n) (stride ldx, n experts), p = softmax(x[r]) in float32; the k
 * (1 <= k <= n) largest p, largest first (ties: the lower expert id
 * first; torch.topk's order among equal values is unspecified), their
 * expert ids into ids[r][k] and their weights renormalised to sum to 1
 * (p_j / (p_0 + ... + p_{k-1}), summed in that order) into w[r][k]
 * (backend memory).  A pick that finds no p left (NaN logits) is id -1
 * with a NaN weight, the sum over the others.
 *
 * backend_moe_swiglu: the experts' gate and up products: for row r < m,
 * slot j < k, e = ids[r][j]: f[r*k + j][0..n_ff) = silu(x[r] . Wg_e^T) *
 * (x[r] . Wu_e^T), n_ff = wg->ne1 / n_exp.  f must not overlap x.
 *
 * backend_moe_down: the experts' down products, weighted and summed:
 * y[r][i] = sum over j < k, in order, of w[r][j] * (f[r*k + j] . Wd_e^T)[i]
 * with e = ids[r][j] (each product and each sum rounded to float), i <
 * wd->ne1 / n_exp.  y [m][ldy] must not overlap f.
 *
 * backend_add_gated: the shared expert's gate: y[r][i] += sigmoid(g[r *
 * ldg]) * x[r][i] (the product rounded, then the sum), r < m, i < n.
 *
 * backend_moe: 1 when the backend implements the four.
 */
int	backend_moe(const struct backend *);
int	backend_moe_route(struct backend *, const float *x, int ldx, int m, int n, int k,
	    int32_t *ids, float *w);
int	backend_moe_swiglu(struct backend *, const struct backend_weight *wg,
	    const struct backend_weight *wu, int n_exp, const float *x, int ldx, int m,
	    const int32_t *ids, int k, float *f);
int	backend_moe_down(struct backend *, const struct backend_weight *wd, int n_exp,
	    const float *f, int m, const int32_t *ids, const float *w, int k, float *y,
	    int ldy);
int	backend_add_gated(struct backend *, float *y, int ldy, const float *x, int ldx,
	    const float *g, int ldg, int m, int n);
/*
 * The routed experts' down side and the shared expert's sum in one op:
 * backend_moe_down into y, then y[r][i] += x[r][i] (x [m][n] contiguous, n
 * = wd->ne1 / n_exp; g NULL: backend_add's sum, step35's) or += sigmoid(g[r
 * * ldg]) * x[r][i] (backend_add_gated's, qwen35moe's).  Equals the two
 * ops bit for bit; a device backend adds in the kernel that sums the
 * experts.  x overlaps neither f nor y.
 */
int	backend_moe_down_add(struct backend *, const struct backend_weight *wd, int n_exp,
	    const float *f, int m, const int32_t *ids, const float *w, int k, const float *x,
	    const float *g, int ldg, float *y, int ldy);
/*
 * The routed experts' whole FFN: backend_moe_swiglu_limit (limit lim, 0:
 * backend_moe_swiglu) of x into f [m * k][n_ff], then backend_moe_down_add
 * of f with xs, g, ldg into y (xs NULL: backend_moe_down).  Equals the two
 * ops bit for bit; a device backend runs SwiGLU in the kernel that
 * quantizes the down products' input where it can.
 */
int	backend_moe_ffn(struct backend *, const struct backend_weight *wg,
	    const struct backend_weight *wu, const struct backend_weight *wd, int n_exp,
	    const float *x, int ldx, int m, const int32_t *ids, const float *w, int k, float lim,
	    float *f, const float *xs, const float *g, int ldg, float *y, int ldy);

/*
 * Gemma-4's ops (transformers' Gemma4TextModel numerics, float32):
 *
 * backend_geglu: y[r][i] = gelu_tanh(g[r][i]) * u[r][i], r < rows, i < n,
 * with gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * (PyTorch's gelu(approximate="tanh") order).  y may be g or u.
 *
 * backend_softcap: x = cap * tanh(x / cap), n floats in place (the final
 * logit soft-capping: the quotient, tanh and product each rounded).
 *
 * backend_scale: x *= s, n floats in place.
 *
 * backend_moe_geglu: backend_moe_swiglu with GELU (tanh) and a fused
 * stack: expert e's matrix of wgu (n_exp experts of 2 n_ff rows each) is
 * its gate rows [0, n_ff) then its up rows [n_ff, 2 n_ff) (HF's
 * gate_up_proj, GGUF's ffn_gate_up_exps); f[r*k + j][0..n_ff) =
 * gelu_tanh(x[r] . G_e^T) * (x[r] . U_e^T), e = ids[r][j].
 *
 * backend_moe_scale: w[r][j] *= s[ids[r][j]] for r < m, j < k (the
 * router's per-expert scale on the renormalised weights; s: [n_exp]
 * backend memory); an id -1 (backend_moe_route's pick that found no key)
 * keeps its NaN weight.  backend_moe_route_scale: backend_moe_route, then
 * backend_moe_scale by s, in one op (bit for bit those two).
 *
 * backend_gemma: 1 when the backend implements these.
 */
int	backend_gemma(const struct backend *);
int	backend_geglu(struct backend *, const float *g, int ldg, const float *u, int ldu,
	    float *y, int ldy, int rows, int n);
int	backend_softcap(struct backend *, float *x, size_t n, float cap);
int	backend_scale(struct backend *, float *x, size_t n, float s);
int	backend_moe_geglu(struct backend *, const struct backend_weight *wgu, int n_exp,
	    const float *x, int ldx, int m, const int32_t *ids, int k, float *f);
int	backend_moe_scale(struct backend *, float *w, const int32_t *ids, int m, int k,
	    const float *s, int n_exp);
int	backend_moe_route_scale(struct backend *, const float *x, int ldx, int m, int n, int k,
	    const float *s, int32_t *ids, float *w);

/*
 * step35's variants (Step-3.5/3.7 Flash; transformers' Step3p7 classes).
 *
 * backend_moe_route_sigmoid: the sigmoid router.  For row r < m, p =
 * sigmoid(x[r][0..n)) in float32; the k experts with the largest p + bias
 * (bias: [n] backend memory, NULL for none: the correction bias picks,
 * it never weighs), largest first, ties to the lower id, into ids[r][k];
 * their weights p_j (without the bias) into w[r][k], with norm divided by
 * their sum (p_0 + ... + p_{k-1}, in that order), then each times scale
 * (the routed scaling factor).
 *
 * backend_moe_swiglu_limit: backend_moe_swiglu with SwiGLU limit L > 0:
 * f = min(silu(x . Wg_e^T), L) * clamp(x . Wu_e^T, -L, L); L 0 is
 * backend_moe_swiglu, bit for bit.
 *
 * backend_swiglu_limit: y[i] = min(silu(g[i]), L) * clamp(u[i], -L, L),
 * i < n (L 0: backend_swiglu); y may be g or u.
 *
 * backend_head_gate: the head-wise attention gate: x[r][h*hd + j] *=
 * sigmoid(g[r*ldg + h]) for r < m, h < nh, j < hd (x's row stride ldx).
 *
 * backend_step35: 1 when the backend implements these and the MoE ops.
 */
int	backend_step35(const struct backend *);
int	backend_moe_route_sigmoid(struct backend *, const float *x, int ldx, int m, int n,
	    int k, const float *bias, int norm, float scale, int32_t *ids, float *w);
int	backend_moe_swiglu_limit(struct backend *, const struct backend_weight *wg,
	    const struct backend_weight *wu, int n_exp, const float *x, int ldx, int m,
	    const int32_t *ids, int k, float limit, float *f);
int	backend_swiglu_limit(struct backend *, const float *g, const float *u, float *y,
	    size_t n, float limit);
int	backend_head_gate(struct backend *, float *x, int ldx, const float *g, int ldg, int m,
	    int nh, int hd);

/* 1 when the backend's attention honours backend_attn.window: one with
 * Gemma-4's or step35's ops. */
int	backend_window(const struct backend *);

/* 1 when the backend's attention honours backend_attn.hi and .ring (the
 * CPU's and the CUDA backend's). */
int	backend_attn_hi(const struct backend *);

/*
 * x = min(max(x, lo), hi), n floats in place (torch.clamp: NaN stays NaN):
 * the clipped linears of Gemma-4's vision and audio towers (the CPU's and
 * the CUDA backend's; -1 on a backend without it).
 */
int	backend_clamp(struct backend *, float *x, size_t n, float lo, float hi);
/* 1 when the backend has backend_clamp. */
int	backend_has_clamp(const struct backend *);

/*
 * backend_matmul_half: Y[m][ne1] = X[m][ne0] . W^T (times w->scale) as
 * llama.cpp multiplies a half-precision weight: for a BF16 (F16) weight
 * each activation is first rounded to BF16 (F16), to nearest, ties to
 * even (ggml's conversion to the weight's vec_dot_type; lib/quant's
 * quant_f32_to_bf16 / quant_f32_to_f16), and the products, exact in
 * float, are summed in float.  Weights of any other type (F32 among
 * them) as backend_matmul.  Gemma-4's vision towers' products: on CUDA
 * these are tensor-core GEMMs on 16-bit operands (cublasGemmEx, fp32
 * sums) for any m, so unlike backend_matmul a row's bits there depend
 * on m; on the CPU row r depends on row r alone.  x is not changed.
 * 0, or -1 with the reason (a backend without it: backend_has_matmul_half).
 */
int	backend_matmul_half(struct backend *, const struct backend_weight *w,
	    const float *x, int ldx, float *y, int ldy, int m);
/* 1 when the backend has backend_matmul_half (the CPU's and the CUDA backend's). */
int	backend_has_matmul_half(const struct backend *);

/*
 * DFlash2's grouped dynamic causal convolution over m rows of n channels
 * (rows n apart): y[t][c] = the sum over taps o < K, o <= t of
 * base[o][c] * x[t - o][c] and dyn[t][o][c / group] * x[t - o][c], in
 * that order per tap (acc = acc + base term, then acc = acc + dynamic
 * term, from acc = 0; each product rounded, no fused multiply-add): the
 * CPU's order, z-lab's.  dyn: row t's K x (n / group) coefficients at
 * dyn + t * ldd; base: [K][n]; y must not overlap x.  -1 on a backend
 * without it (backend_has_dconv 0).
 */
int	backend_dconv(struct backend *, const float *x, int m, int n, const float *dyn,
	    int ldd, int K, int group, const float *base, float *y);
/* 1 when the backend has backend_dconv (the CPU's and the CUDA backend's), else 0. */
int	backend_has_dconv(const struct backend *);

/* x[r][j] *= sigmoid(g[r][j]) for r < rows, j < n (the attention output gate). */
int	backend_mul_sigmoid(struct backend *, float *x, int ldx, const float *g,
	    int ldg, int rows, int n);

/*
 * Causal depthwise conv1d + SiLU over m rows of n_ch channels, with state:
 * in = [state (the last d_conv-1 inputs) ; x], y[t][c] = silu(sum_k
 * in[t+k][c] * w[c][k]).  state: [d_conv-1][n_ch], updated to the last
 * d_conv-1 inputs.  snap: NULL, or [m][d_conv-1][n_ch] receiving the state
 * after each row (speculative rollback).  y: [m][n_ch], not overlapping x.
 */
int	backend_conv1d_silu(struct backend *, const float *x, int ldx, int m,
	    int n_ch, const float *w, int d_conv, float *state, float *snap,
	    float *y);

/*
 * The gated delta rule (Gated DeltaNet mixer core), whole step in one op.
 * Input row r: qkv[r] = [q (n_k_heads*dk) ; k (n_k_heads*dk) ; v (n_v_heads*dv)]
 * after conv+SiLU, a[r][n_v] = alpha.x, b[r][n_v] = beta.x.  Per value head h
 * (key head kh = v_tiled ? h % n_k : h / (n_v/n_k)):
 *   q, k = l2norm(q), l2norm(k); q *= 1/sqrt(dk); beta = sigmoid(b);
 *   g = ssm_a[h] * softplus(a + dt_bias[h])  (ssm_a = -exp(A_log));
 *   S = exp(g) S; d = beta (v - S^T k); S += k d^T; o = S^T q.
 * S: [n_v][dk][dv] fp32 state, updated.  o: [m][n_v*dv].
 * l2norm: hf_l2 ? x * rsqrt(sum x^2 + eps) : x / max(sqrt(sum x^2), eps).
 */
struct backend_gdn {
	int	n_k_heads, n_v_heads, dk, dv;
	int	v_tiled;	/* 1: GGUF (llama.cpp) head order, 0: HF grouped order */
	int	hf_l2;
	float	eps;
};
/*
 * Recurrent form: rows in order; row r is bit-identical to stepping it
 * alone.  snap: NULL or [m][n_v*dk*dv], the state after each row.
 */
int	backend_gdn_step(struct backend *, const struct backend_gdn *g, int m,
	    const float *qkv, int ldqkv, const float *a, const float *b,
	    const float *ssm_a, const float *dt_bias, float *S, float *snap,
	    float *o);
/*
 * One sequence of a group (backend_conv1d_silu_seqs, backend_gdn_step_seqs):
 * its rows (>= 0), consecutive after the previous sequence's in every row
 * operand, and its own state and snapshots in backend memory, as the
 * one-sequence op takes them (state: the conv window or S; snap: NULL or
 * [rows][...] after each row).
 */
struct backend_seq {
	int	rows;
	float	*state, *snap;
};
/*
 * backend_conv1d_silu over n sequences in one call: sequence i's rows of x
 * and y follow sequence i-1's, each with its own state and snapshots.
 * Bit for bit what n calls of backend_conv1d_silu give (a backend without
 * its own form makes them).  sq: host memory; the states distinct.
 */
int	backend_conv1d_silu_seqs(struct backend *, const float *x, int ldx, int n,
	    const struct backend_seq *sq, int n_ch, const float *w, int d_conv, float *y);
/*
 * backend_gdn_step over n sequences in one call, likewise: sequence i's
 * rows of qkv, a, b and o follow sequence i-1's; S and snap its own.  Bit
 * for bit what n calls of backend_gdn_step give.
 */
int	backend_gdn_step_seqs(struct backend *, const struct backend_gdn *g, int n,
	    const struct backend_seq *sq, const float *qkv, int ldqkv, const float *a,
	    const float *b, const float *ssm_a, const float *dt_bias, float *o);
/*
 * One sequence of backend_kv_store_seqs: its rows, the cache row its first
 * goes to, its key and value caches (backend memory, rows of kvd floats).
 */
struct backend_kv_seq {
	int	rows, pos;
	float	*kc, *vc;
};
/*
 * Each sequence's rows of k and v (rows kvd apart; sequence i's after
 * sequence i-1's) into its caches at rows pos .. pos + rows - 1: what a
 * backend_copy of its keys and one of its values do, for n sequences in
 * one call (a backend without its own form makes the copies).
 */
int	backend_kv_store_seqs(struct backend *, const float *k, const float *v, int kvd,
	    int n, const struct backend_kv_seq *sq);
/*
 * backend_attention over n sequences in one call: sequence i's rows of q
 * (ldq apart, heads qhs apart) and of o (n_head*head_dim apart) follow
 * sequence i-1's; sq[i].rows of them at positions sq[i].pos .., against its
 * caches sq[i].kc, sq[i].vc (already holding its keys up to its last row).
 * Bit for bit what n calls of backend_attention give, sequence i's with a
 * copy of a whose batched is a->batched && sq[i].rows >= 2 (one row is
 * never a batch: the flag of a model's step for its one-row and its longer
 * sequences alike).  a->hi: NULL (a row's later keys are one call's).  A
 * backend without its own form makes the n calls.
 */
int	backend_attention_seqs(struct backend *, const struct backend_attn *a, int n,
	    const struct backend_kv_seq *sq, const float *q, int ldq, int qhs, float *o);
/*
 * on: the four _seqs ops above run as their per-sequence loops even on a
 * backend with its own forms (the same bits; a benchmark's A/B: model-bench
 * -s); off (the default): its own forms.
 */
void	backend_per_seq_set(struct backend *, int on);
/* Chunked form for prefill: same contract as step to float tolerance. */
int	backend_gdn_chunk(struct backend *, const struct backend_gdn *g, int m,
	    const float *qkv, int ldqkv, const float *a, const float *b,
	    const float *ssm_a, const float *dt_bias, float *S, float *o);

/* x /= max(sqrt(sum x^2), eps) over rows of n, in place (ggml_l2_norm). */
int	backend_l2norm(struct backend *, float *x, int ldx, int rows, int n,
	    float eps);

enum backend_act {
	BACKEND_ACT_SILU, BACKEND_ACT_SIGMOID, BACKEND_ACT_SOFTPLUS,
};
/* x = act(x), n floats, in place. */
int	backend_act(struct backend *, enum backend_act act, float *x, size_t n);

/* y += x, n floats (the residual add). */
int	backend_add(struct backend *, float *y, const float *x, size_t n);

/*
 * out[r] = the index of the largest finite value of x[r][0..n), the
 * lowest index on ties (-0 ties +0), -1 when none is finite: the greedy
 * pick of sample_next (lib/sample.h), taken where x is.  out is host
 * memory.
 */
int	backend_argmax(struct backend *, const float *x, int ldx, int m, int n,
	    int32_t *out);

/* The most candidates backend_topk takes a row (SAMPLE_TOPK_MAX). */
#define BACKEND_TOPK_MAX	1024

/*
 * The sampler's top k of each row, taken where x is: of the finite
 * x[r][0..n), the k (1..BACKEND_TOPK_MAX) with the largest x / temp
 * (temp > 0), most likely first, into val[r][k] and id[r][k] (host
 * memory), exactly as sample_top gives them (lib/sample.h; id -1 past a
 * row's finite values), so that sample_next_top draws from them what
 * sample_next draws from the row.
 */
int	backend_topk(struct backend *, const float *x, int ldx, int m, int n, int k,
	    float temp, float *val, int32_t *id);

struct sampler;

/*
 * The token sampler s draws from the row x (sample_vocab(s) floats) for
 * sequence seq at position pos, made where x is: sample_next's draw, bit
 * for bit (the integer weights of lib/sample.h), from a row whose
 * penalties, if s has any, are on it already (backend_penalize).  s must
 * draw from the whole row (sample_row_draw of sample_unpenalized).  *out
 * (host) gets the id, -1 when no value is finite.  A backend without a
 * draw of its own reads the row back and calls sample_next.
 */
int	backend_draw(struct backend *, const float *x, struct sampler *s, uint64_t seq,
	    int64_t pos, int32_t *out);

/*
 * A draw's penalties on the row x[n], where it is: x[tok[i]] =
 * fexp_penalty(x[tok[i]], repeat, presence, frequency, cnt[i]) for i < k
 * (lib/fexp.h), the tokens distinct and in [0, n) (sample_window gives
 * them; tok and cnt host memory): the logits sample_next penalizes, bit
 * for bit.
 */
int	backend_penalize(struct backend *, float *x, int n, const int32_t *tok,
	    const int32_t *cnt, int k, float repeat, float presence, float frequency);

/*
 * A token mask on the row x[n], where it is: x[t] = -INFINITY for each t
 * whose bit in bits is 0 (bit t % 32 of word t / 32; (n + 31) / 32 words of
 * pageable host memory, malloc's, free to reuse on return), every other
 * value untouched, its bits kept: grammar_mask's allowed set on a logits row, the row
 * grammar_mask_logits makes on the host, bit for bit.  -1 on a backend
 * without it (backend_has_mask 0: the caller reads the row back and masks
 * it there).
 */
int	backend_mask(struct backend *, float *x, int n, const uint32_t *bits);
/* 1 when the backend masks rows where they are (backend_mask), else 0. */
int	backend_has_mask(const struct backend *);

#endif
