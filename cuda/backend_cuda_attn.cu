/*
 * backend_cuda_attn.cu: the CUDA backend's RoPE (both modes, strided),
 * the KV cache stores, qk_norm_rope in one kernel, and attention: the
 * decode path in chunks of rows that each see their own positions, flash
 * attention for a prompt of more than the step rows (see backend_cuda.cu
 * for the whole).
 */
#include "backend_cuda.cuh"

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

/* Row r of k and v (z = 0, 1) into its cache at row *pos + r, in a ring (ring > 0) at row
 * (*pos + r) % ring; positions past n_ctx are dropped. */
__global__ void
k_kv_store(float *kc, float *vc, const float *k, const float *v, int kvd,
    const int32_t *pos, int n_ctx, int ring)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y, p;

	pdl_enter();
	p = *pos + r;
	if (j >= kvd || p < 0 || p >= n_ctx)
		return;
	if (ring > 0)
		p %= ring;
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
 * them (positions past n_ctx dropped; in a ring, ring > 0, at row
 * (pos[0] + r) % ring).
 */
struct qkr_args {
	float	*q, *k, *kc, *vc, *v;
	const float *qn, *kn, *inv;
	const int32_t *pos;
	int	nh, nkv, hd, qhs, half, neox, n_ctx, vnorm, ring;
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
			((float4 *)(A.vc + (size_t)(A.ring > 0 ? p % A.ring : p) * kvd))[o] = v;
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
			((float4 *)(A.kc + (size_t)(A.ring > 0 ? p % A.ring : p) * kvd +
			    (size_t)(h - A.nh) * A.hd))[i] = qkr_sm[i];
	}
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
    int kvd, int m, const int32_t *d_pos, int n_ctx, int ring)
{
	gpu_launch(CB(be)->g, k_kv_store, dim3(nblk(kvd, 256), m, 2), 256, 0, kc, vc, k, v,
	    kvd, d_pos, n_ctx, ring);
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
		if (be->ops->rmsnorm(be, q, a->qhs, a->qn, q, a->qhs, m * nh, hd, a->eps) ||
		    be->ops->rmsnorm(be, k, hd, a->kn, k, hd, m * nkv, hd, a->eps) ||
		    (a->v_norm && be->ops->rmsnorm(be, v, hd, NULL, v, hd, m * nkv, hd, a->eps)) ||
		    rope_launch(be, q, nh * a->qhs, nh, a->qhs, m, d_pos, qinv, a->n_rot, a->theta,
		    a->mode) || rope_launch(be, k, kvd, nkv, hd, m, d_pos, inv, a->n_rot, a->theta,
		    a->mode))
			return -1;
		return kc != NULL ? cu_kv_store(be, kc, vc, k, v, kvd, m, d_pos, n_ctx, a->ring) :
		    0;
	}
	struct qkr_args A = { q, k, kc, vc, v, a->qn, a->kn, inv, d_pos, nh, nkv, hd, a->qhs,
	    a->n_rot / 2, (a->mode & ~BACKEND_ROPE_GGML) == BACKEND_ROPE_NEOX, n_ctx, a->v_norm,
	    a->ring, a->eps, rope_ts(a->theta, a->n_rot, a->mode) };
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
 * Attention at p0, or at *d_pos when d_pos is not NULL (a context of n_ctx
 * positions); a prompt of more than the step rows at p0 by
 * gpu_attention_prefill (heads a multiple of 32), a sliding window's too
 * (a->window > 0: the kernel walks each block's windows only), over a ring
 * (a->ring) when the ring holds every key of the call (window + m - 1
 * rows); with a->hi, or a ring at p0 otherwise, by the split-K kernel 16
 * rows at a time (gpu_attention_hi), save one a->hi of rows that all see
 * the call's last key (a vision tower's whole image, no window):
 * gpu_attention_prefill's full mode then, heads a multiple of 4 (the 31B
 * tower's are 72); a ring at d_pos by the split-K kernel's window form.
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
	    (a->hi == NULL || full) && (a->ring == 0 || a->window + m - 1 <= a->ring) &&
	    (((uintptr_t)qp | (uintptr_t)kc | (uintptr_t)vc | (uintptr_t)o) & 15) == 0) {
		if (gpu_attention_prefill(c->g, qp, kc, vc, o, m, nh, a->n_kv_head, hd, p0,
		    a->scale, full, a->window, a->ring) != 0)
			return gfail(be, "attention");
		return 0;
	}
	if (a->hi != NULL && (d_hi = (const int32_t *)put_small(be, a->hi, (size_t)m * 4)) == NULL)
		return -1;
	for (int r0 = 0; r0 < m; r0 += GPU_MATVEC_MAX_ROWS) {
		int nq = m - r0 < GPU_MATVEC_MAX_ROWS ? m - r0 : GPU_MATVEC_MAX_ROWS, rc;
		size_t off = (size_t)r0 * nh * hd;
		if (a->hi != NULL || (a->ring > 0 && d_pos == NULL))	/* hi: d_pos NULL */
			rc = attend_hi(be, a, qp, kc, vc, r0, nq, p0, d_hi, o);
		else if (a->window > 0)	/* d_pos[r0] = d_pos[0] + r0; a ring has a window */
			rc = gpu_attention_window(c->g, qp + off, kc, vc, o + off, nq, nh,
			    a->n_kv_head, hd, p0 + r0, d_pos != NULL ? d_pos + r0 : NULL, n_ctx,
			    a->scale, a->window, a->ring);
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


/* RoPE, the KV cache and attention: into the op table (backend_cuda_open). */
void
cu_ops_attn(struct backend_ops *o)
{
	o->rope = cu_rope;
	o->attention = cu_attention;
	o->rope_dpos = cu_rope_dpos;
	o->kv_store = cu_kv_store;
	o->attention_dpos = cu_attention_dpos;
	o->qk_norm_rope = cu_qk_norm_rope;
	o->head_max = cu_head_max;
	o->attn_hi = cu_attn_hi;
	o->kv_store_seqs = cu_kv_store_seqs;
	o->attention_seqs = cu_attention_seqs;
}
