/*
 * The gated delta rule a step at a time: k_gdn (the key head in
 * registers, dk 16 / 32 / 64 / 128), k_gdn_pad (other sizes up to
 * GDN_DK_REG, masked), k_gdn_wide (past it), and their _seqs forms over
 * the sequences of a group (struct cu_seqs, here too).  Included by
 * cuda/backend_cuda_gdn.cu (gdn_launch picks the kernel) after
 * backend_cuda.cuh (d_sigmoid, d_softplus, pdl_enter), and by
 * tools/gdn-step-emu.cc, which runs this text on the CPU over a shim of
 * its own: keep what it uses within that shim.
 */
#ifndef MEMRA_GDN_STEP_CUH
#define MEMRA_GDN_STEP_CUH

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

#endif
