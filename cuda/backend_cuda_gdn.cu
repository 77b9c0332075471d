/*
 * backend_cuda_gdn.cu: the CUDA backend's recurrent layers: the causal
 * conv1d with its state and snapshots, and the gated delta rule, a step
 * at a time (gdn_step.cuh's kernels) or chunked for a prompt
 * (gdn_chunk.cuh), row after row as the CPU backend runs them (see
 * backend_cuda.cu for the whole).
 */
#include "backend_cuda.cuh"
#include "gdn_chunk.cuh"
#include "gdn_step.cuh"

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


/* conv1d and the gated delta rule: into the op table (backend_cuda_open). */
void
cu_ops_gdn(struct backend_ops *o)
{
	o->conv1d_silu = cu_conv1d_silu;
	o->gdn_step = cu_gdn_step;
	o->gdn_chunk = cu_gdn_chunk;
	o->conv1d_silu_seqs = cu_conv1d_silu_seqs;
	o->gdn_step_seqs = cu_gdn_step_seqs;
}
