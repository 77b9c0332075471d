/*
 * The chunked gated delta rule (prefill) in two kernels.  Per chunk of
 * GDNC_C rows, L of them (rows L.. of a partial chunk are zero: q = k = v =
 * beta = 0, gate 0), with q, k l2-normalised (q scaled by 1/sqrt(DKR), the key
 * head's size in memory; DK, the kernels', may be larger: rows DKR.. zero), beta
 * = sigmoid(b), gate g = ssm_a softplus(a + dt_bias), G_t = g_0 + .. + g_t,
 * the state S at the chunk start:
 *   A[i][c] = beta_i (k_i.k_c) e^(G_i - G_c)  (c < i; 0 elsewhere)
 *   P[t][c] = (q_t.k_c) e^(G_t - G_c)         (c <= t; 0 elsewhere)
 *   Tb      = (I + A)^-1 diag(beta)           (forward substitution)
 *   X[t]    = v_t - e^(G_t) k_t S
 *   Vn      = Tb X
 *   O[t]    = e^(G_t) q_t S + sum_c P[t][c] Vn[c]
 *   S       = e^(G_(L-1)) S + sum_t e^(G_(L-1) - G_t) k_t^T Vn[t]
 * which is the CPU's chunked form (lib/backend_cpu_seq.c: Vn = U - W S with
 * U = T diag(beta) V, W = T diag(beta e^G) K, T = (I + A)^-1) with T diag(beta)
 * applied to X instead of to V and K: the same S-dependent terms, the same
 * decay and beta, other roundings.
 *
 * k_gdn_prep, block (h, n) for value head h and chunk n, all chunks at once:
 * what does not depend on S (the norms, e^G, e^(G_(L-1) - G), P and Tb) to a
 * scratch of GDNC_PREP floats a (chunk, head).  k_gdn_chunk, block (h, c)
 * for head h and the state's columns c * GDNC_VS.., keeps its S[DK][GDNC_VS]
 * in shared memory and walks the chunks in order: K S and Q S, Tb X, O and
 * the update.
 *
 * Cost (DK = 128, 8 warps a block, fp32 FMA, no tensor cores).  k_gdn_prep
 * a block: A and P 2 x 64 x 64 x 128 x 10/16 FMA (the 16-row tiles above
 * the diagonal skipped), the solve 64 columns of chains of 64 rows on two
 * warps: ~12k cycles, all (chunk, head) blocks at once (256 for 512 rows of
 * the 9B shape, two a multiprocessor).  k_gdn_chunk a chunk and block: q, k,
 * P, Tb in (~100 KB from L2), K S and Q S 2 x 64 x 128 x 32, Tb X and P Vn
 * 64 x 64 x 32 each, the update 128 x 64 x 32: ~14k cycles, ~7 us, in
 * sequence over the chunks (32 heads x 4 blocks on 132 multiprocessors).
 *
 * The phases below run between barriers; each is a function of the thread
 * index so that tools/gdn-chunk-emu.cc replays them thread by thread on the
 * CPU (the same index math; keep the two in step).  Included by
 * cuda/backend_cuda_gdn.cu (the kernels) and the emulator.
 */
#ifndef MEMRA_GDN_CHUNK_CUH
#define MEMRA_GDN_CHUNK_CUH

#ifdef __CUDACC__
#define GDNC_HD __host__ __device__ __forceinline__
#define GDNC_UNROLL _Pragma("unroll")
#else
#define GDNC_HD static inline
#define GDNC_UNROLL
#endif

enum {
	GDNC_C = 64, GDNC_VS = 32, GDNC_NT = 256,	/* rows a chunk, columns a block, threads */
	GDNC_PREP = 2 * GDNC_C * GDNC_C + 4 * GDNC_C,	/* scratch floats a (chunk, head) */
};

struct gdnc_args {
	const float *qkv, *a, *b, *ssm_a, *dt_bias;
	float	*S, *o;
	float	*scr;		/* [chunks][nv][GDNC_PREP] */
	int	ld, m, nk, nv, dv, v_tiled, hf_l2;
	float	eps;
};

/* A (chunk, head)'s scratch: P, Tb [C][C], the scales of q and k, e^G,
 * e^(G_(L-1) - G) [C]. */
struct gdnc_part {
	float	*P, *Tb, *nq, *nk, *eG, *eD;
};

GDNC_HD struct gdnc_part
gdnc_part_of(const struct gdnc_args &A, int n, int h)
{
	struct gdnc_part pt;
	float *p = A.scr + ((size_t)n * A.nv + h) * GDNC_PREP;

	pt.P = p, p += GDNC_C * GDNC_C;
	pt.Tb = p, p += GDNC_C * GDNC_C;
	pt.nq = p, p += GDNC_C;
	pt.nk = p, p += GDNC_C;
	pt.eG = p, p += GDNC_C;
	pt.eD = p;
	return pt;
}

/* A block's shared memory (floats): row strides LQ (q, k) and LA (A, P, Tb)
 * are multiples of 4 for float4 loads, 4 banks apart a row.  k_gdn_prep
 * uses q, k, A and the [C] rows; k_gdn_chunk q, k, S, P, Tb, X, V, eG, eD. */
struct gdnc_sh {
	float	*q, *k;		/* [C][LQ] normalised */
	float	*S;		/* [DK][VS] the state's columns */
	float	*A, *P, *Tb;	/* [C][LA] */
	float	*X, *V;		/* [C][VS]: X, Vn */
	float	*gt, *G, *beta, *nq, *nk, *eG, *eD;	/* [C] */
};

template <int DK>
struct gdnc_dim {
	enum {
		LQ = DK + 4, LA = GDNC_C + 4,
		PREP_FLOATS = 2 * GDNC_C * LQ + GDNC_C * LA + 7 * GDNC_C,
		FLOATS = 2 * GDNC_C * LQ + DK * GDNC_VS + 2 * GDNC_C * LA +
		    2 * GDNC_C * GDNC_VS + 2 * GDNC_C,
	};
};

template <int DK>
GDNC_HD void
gdnc_carve_prep(float *p, struct gdnc_sh *s)
{
	enum { C = GDNC_C, LQ = gdnc_dim<DK>::LQ, LA = gdnc_dim<DK>::LA };

	s->S = s->P = s->Tb = s->X = s->V = 0;
	s->q = p, p += C * LQ;
	s->k = p, p += C * LQ;
	s->A = p, p += C * LA;
	s->gt = p, p += C;
	s->G = p, p += C;
	s->beta = p, p += C;
	s->nq = p, p += C;
	s->nk = p, p += C;
	s->eG = p, p += C;
	s->eD = p;
}

template <int DK>
GDNC_HD void
gdnc_carve(float *p, struct gdnc_sh *s)
{
	enum { C = GDNC_C, LQ = gdnc_dim<DK>::LQ, LA = gdnc_dim<DK>::LA };

	s->A = s->gt = s->G = s->beta = s->nq = s->nk = 0;
	s->q = p, p += C * LQ;
	s->k = p, p += C * LQ;
	s->S = p, p += DK * GDNC_VS;
	s->P = p, p += C * LA;
	s->Tb = p, p += C * LA;
	s->X = p, p += C * GDNC_VS;
	s->V = p, p += C * GDNC_VS;
	s->eG = p, p += C;
	s->eD = p;
}

GDNC_HD float
gdnc_dot4(float4 a, float4 b, float acc)
{
	acc = fmaf(a.x, b.x, acc);
	acc = fmaf(a.y, b.y, acc);
	acc = fmaf(a.z, b.z, acc);
	return fmaf(a.w, b.w, acc);
}

GDNC_HD float
gdnc_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

GDNC_HD float
gdnc_softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

/* Floats d .. d + 3 of a key head of DKR (a multiple of 4) at p, as the
 * kernel's DK: zero past DKR (not read: past it lie other heads or the row's
 * end), a plain 16-byte load when DKR is DK. */
template <int DK, int DKR>
GDNC_HD float4
gdnc_pad(const float *p, int d)
{
	if constexpr (DKR == DK)
		return *(const float4 *)(p + d);
	else
		return d < DKR ? *(const float4 *)(p + d) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

/* k_gdn_prep, phase 1: the chunk's q, k rows (zero past L), beta and gate;
 * qkv and ld are 16-byte aligned (the caller checks).  DKR: the key head's
 * size in memory (a multiple of 4), the rows DKR .. DK zero (gdnc_pad). */
template <int DK, int DKR = DK>
GDNC_HD void
gdnc_load(const struct gdnc_args &A, const struct gdnc_sh &s, int h, int kh, int t0,
    int L, int tid)
{
	enum { LQ = gdnc_dim<DK>::LQ };
	size_t kd = (size_t)A.nk * DKR;

	GDNC_UNROLL	/* every load in flight at once, 16 bytes each, no branches */
	for (int e = 0; e < GDNC_C * DK / 4 / GDNC_NT; e++) {
		int i = tid + e * GDNC_NT, t = i / (DK / 4), d = i % (DK / 4) * 4;
		const float *row = A.qkv + (size_t)(t0 + (t < L ? t : L - 1)) * A.ld;
		float4 q = gdnc_pad<DK, DKR>(row + (size_t)kh * DKR, d);
		float4 k = gdnc_pad<DK, DKR>(row + kd + (size_t)kh * DKR, d);
		float z = t < L ? 1.0f : 0.0f;

		q.x *= z, q.y *= z, q.z *= z, q.w *= z;
		k.x *= z, k.y *= z, k.z *= z, k.w *= z;
		*(float4 *)(s.q + t * LQ + d) = q;
		*(float4 *)(s.k + t * LQ + d) = k;
	}
	if (tid < GDNC_C) {
		int t = tid;
		float beta = 0.0f, g = 0.0f;

		if (t < L) {
			size_t r = (size_t)(t0 + t) * A.nv + h;
			beta = gdnc_sigmoid(A.b[r]);
			g = A.ssm_a[h] * gdnc_softplus(A.a[r] + A.dt_bias[h]);
		}
		s.beta[t] = beta;
		s.gt[t] = g;
	}
}

/* k_gdn_prep, phase 2: the l2 scales of q (times 1/sqrt(DKR)) and k a row; G = cumsum(g). */
template <int DK, int DKR = DK>
GDNC_HD void
gdnc_norm(const struct gdnc_args &A, const struct gdnc_sh &s, int tid)
{
	enum { LQ = gdnc_dim<DK>::LQ };

	if (tid < 2 * GDNC_C) {
		int t = tid % GDNC_C;
		const float *x = (tid < GDNC_C ? s.q : s.k) + t * LQ;
		float ss = 0.0f, sc;

		for (int e = 0; e < DK; e++) {	/* rotated by t: rows 4 banks apart */
			int d = (e + t) % DK;
			ss = fmaf(x[d], x[d], ss);
		}
		if (A.hf_l2)
			sc = 1.0f / sqrtf(ss + A.eps);
		else
			sc = 1.0f / fmaxf(sqrtf(ss), A.eps);
		if (tid < GDNC_C)
			s.nq[t] = sc * (1.0f / sqrtf((float)DKR));
		else
			s.nk[t] = sc;
	} else if (tid == 2 * GDNC_C) {
		float G = 0.0f;

		for (int t = 0; t < GDNC_C; t++)
			s.G[t] = G = G + s.gt[t];
	}
}

/* k_gdn_prep, phase 3: q, k scaled; e^G and e^(G_(L-1) - G) a row. */
template <int DK>
GDNC_HD void
gdnc_scale(const struct gdnc_sh &s, int L, int tid)
{
	enum { LQ = gdnc_dim<DK>::LQ };

	for (int i = tid; i < GDNC_C * DK; i += GDNC_NT) {
		int t = i / DK, d = i % DK;

		s.q[t * LQ + d] *= s.nq[t];
		s.k[t * LQ + d] *= s.nk[t];
	}
	if (tid < GDNC_C) {
		s.eG[tid] = expf(s.G[tid]);
		s.eD[tid] = expf(s.G[L - 1] - s.G[tid]);
	}
}

/*
 * k_gdn_prep, phase 4: A to shared memory and P to the scratch (thread
 * (ty, tx) = (tid / 16, tid % 16): rows ty + 16 r, columns tx + 16 c, c <= r,
 * the rest 0); the row scales and decays to the scratch.
 */
template <int DK>
GDNC_HD void
gdnc_prep_prod(const struct gdnc_sh &s, const struct gdnc_part &pt, int tid)
{
	enum { LQ = gdnc_dim<DK>::LQ, LA = gdnc_dim<DK>::LA, C = GDNC_C };
	int ty = tid / 16, tx = tid % 16;
	float kk[4][4], qk[4][4];

	GDNC_UNROLL
	for (int r = 0; r < 4; r++)
		GDNC_UNROLL
		for (int c = 0; c < 4; c++)
			kk[r][c] = 0.0f, qk[r][c] = 0.0f;
	for (int d = 0; d < DK; d += 4) {
		float4 ki[4], qi[4], kc[4];

		GDNC_UNROLL
		for (int r = 0; r < 4; r++) {
			ki[r] = *(const float4 *)(s.k + (ty + 16 * r) * LQ + d);
			qi[r] = *(const float4 *)(s.q + (ty + 16 * r) * LQ + d);
			kc[r] = *(const float4 *)(s.k + (tx + 16 * r) * LQ + d);
		}
		GDNC_UNROLL
		for (int r = 0; r < 4; r++)
			GDNC_UNROLL
			for (int c = 0; c <= r; c++) {
				kk[r][c] = gdnc_dot4(ki[r], kc[c], kk[r][c]);
				qk[r][c] = gdnc_dot4(qi[r], kc[c], qk[r][c]);
			}
	}
	GDNC_UNROLL
	for (int r = 0; r < 4; r++)
		GDNC_UNROLL
		for (int c = 0; c < 4; c++) {
			int i = ty + 16 * r, cc = tx + 16 * c;
			float e = c <= r && cc <= i ? expf(s.G[i] - s.G[cc]) : 0.0f;

			s.A[i * LA + cc] = c <= r && cc < i ? s.beta[i] * kk[r][c] * e : 0.0f;
			pt.P[i * C + cc] = c <= r && cc <= i ? qk[r][c] * e : 0.0f;
		}
	if (tid < C) {
		pt.nq[tid] = s.nq[tid];
		pt.nk[tid] = s.nk[tid];
		pt.eG[tid] = s.eG[tid];
		pt.eD[tid] = s.eD[tid];
	}
}

/*
 * k_gdn_prep, phase 5 (threads 0..63, column c = tid): column c of
 * (I + A)^-1 by rows (0 above the diagonal), times beta_c, to the scratch;
 * A[i][l] is 0 for l >= i, so the float4 steps may run past i.
 */
GDNC_HD void
gdnc_prep_solve(const struct gdnc_sh &s, const struct gdnc_part &pt, int c)
{
	enum { C = GDNC_C, LA = C + 4 };
	float vn[C], beta = s.beta[c];

	GDNC_UNROLL
	for (int i = 0; i < C; i++)
		vn[i] = 0.0f;
	GDNC_UNROLL
	for (int i = 0; i < C; i++) {
		float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;

		GDNC_UNROLL
		for (int l = 0; l < i; l += 4) {	/* four chains of i / 4 */
			float4 a = *(const float4 *)(s.A + i * LA + l);

			p0 = fmaf(a.x, vn[l], p0);
			p1 = fmaf(a.y, vn[l + 1], p1);
			p2 = fmaf(a.z, vn[l + 2], p2);
			p3 = fmaf(a.w, vn[l + 3], p3);
		}
		vn[i] = (i == c ? 1.0f : 0.0f) - ((p0 + p1) + (p2 + p3));
	}
	GDNC_UNROLL	/* no stores in the loop: the next row's loads may start early */
	for (int i = 0; i < C; i++)
		pt.Tb[i * C + c] = vn[i] * beta;
}

/*
 * k_gdn_chunk, phase 1: the chunk's q, k rows scaled (zero past L), P, Tb,
 * e^G, e^(G_(L-1) - G) from the scratch.
 */
template <int DK, int DKR = DK>
GDNC_HD void
gdnc_mload(const struct gdnc_args &A, const struct gdnc_sh &s, const struct gdnc_part &pt,
    int kh, int t0, int L, int tid)
{
	enum { LQ = gdnc_dim<DK>::LQ, LA = gdnc_dim<DK>::LA, C = GDNC_C };
	size_t kd = (size_t)A.nk * DKR;

	GDNC_UNROLL	/* every load in flight at once, 16 bytes each, no branches */
	for (int e = 0; e < C * DK / 4 / GDNC_NT; e++) {
		int i = tid + e * GDNC_NT, t = i / (DK / 4), d = i % (DK / 4) * 4;
		const float *row = A.qkv + (size_t)(t0 + (t < L ? t : L - 1)) * A.ld;
		float4 q = gdnc_pad<DK, DKR>(row + (size_t)kh * DKR, d);
		float4 k = gdnc_pad<DK, DKR>(row + kd + (size_t)kh * DKR, d);
		float sq = t < L ? pt.nq[t] : 0.0f, sk = t < L ? pt.nk[t] : 0.0f;

		q.x *= sq, q.y *= sq, q.z *= sq, q.w *= sq;
		k.x *= sk, k.y *= sk, k.z *= sk, k.w *= sk;
		*(float4 *)(s.q + t * LQ + d) = q;
		*(float4 *)(s.k + t * LQ + d) = k;
	}
	GDNC_UNROLL
	for (int e = 0; e < C * C / 4 / GDNC_NT; e++) {
		int i = tid + e * GDNC_NT, t = i / (C / 4), c = i % (C / 4) * 4;

		*(float4 *)(s.P + t * LA + c) = *(const float4 *)(pt.P + t * C + c);
		*(float4 *)(s.Tb + t * LA + c) = *(const float4 *)(pt.Tb + t * C + c);
	}
	if (tid < C) {
		s.eG[tid] = pt.eG[tid];
		s.eD[tid] = pt.eD[tid];
	}
}

/*
 * k_gdn_chunk, phase 2: X = v - e^G K S and ys = e^G Q S (thread (w, j) =
 * (tid / 32, tid % 32): rows w + 8 u, column j; ys stays in the thread's
 * registers for phase 4).
 */
template <int DK, int DKR = DK>
GDNC_HD void
gdnc_ksqs(const struct gdnc_args &A, const struct gdnc_sh &s, int h, int j0, int t0,
    int L, int tid, float ys[8])
{
	enum { LQ = gdnc_dim<DK>::LQ, VS = GDNC_VS };
	int w = tid / 32, j = tid % 32;
	float xs[8], v[8];

	GDNC_UNROLL	/* the v column's loads first, used last */
	for (int u = 0; u < 8; u++) {
		int t = w + 8 * u;

		v[u] = A.qkv[(size_t)(t0 + (t < L ? t : L - 1)) * A.ld + 2 * (size_t)A.nk * DKR +
		    (size_t)h * A.dv + j0 + j];
		v[u] = t < L ? v[u] : 0.0f;
	}
	GDNC_UNROLL
	for (int u = 0; u < 8; u++)
		xs[u] = 0.0f, ys[u] = 0.0f;
	for (int d = 0; d < DK; d += 4) {
		float4 sd = make_float4(s.S[d * VS + j], s.S[(d + 1) * VS + j],
		    s.S[(d + 2) * VS + j], s.S[(d + 3) * VS + j]);

		GDNC_UNROLL
		for (int u = 0; u < 8; u++) {
			int t = w + 8 * u;
			xs[u] = gdnc_dot4(*(const float4 *)(s.k + t * LQ + d), sd, xs[u]);
			ys[u] = gdnc_dot4(*(const float4 *)(s.q + t * LQ + d), sd, ys[u]);
		}
	}
	GDNC_UNROLL
	for (int u = 0; u < 8; u++) {
		int t = w + 8 * u;

		s.X[t * VS + j] = v[u] - s.eG[t] * xs[u];
		ys[u] *= s.eG[t];
	}
}

/*
 * acc[u] += row w + 8u of M (rows of la floats) . column j of the GDNC_C x
 * GDNC_VS matrix S, four columns of M at a time (phases 3 and 4).
 */
GDNC_HD void
gdnc_rows8(const float *M, int la, const float *S, int j, int w, float acc[8])
{
	for (int c = 0; c < GDNC_C; c += 4) {
		float4 x = make_float4(S[c * GDNC_VS + j], S[(c + 1) * GDNC_VS + j],
		    S[(c + 2) * GDNC_VS + j], S[(c + 3) * GDNC_VS + j]);

		GDNC_UNROLL
		for (int u = 0; u < 8; u++)
			acc[u] = gdnc_dot4(*(const float4 *)(M + (w + 8 * u) * la + c), x, acc[u]);
	}
}

/* k_gdn_chunk, phase 3: Vn = Tb X (thread (w, j) as in phase 2; Tb is 0
 * above the diagonal). */
GDNC_HD void
gdnc_tx(const struct gdnc_sh &s, int tid)
{
	enum { LA = GDNC_C + 4, VS = GDNC_VS };
	int w = tid / 32, j = tid % 32;
	float vn[8];

	GDNC_UNROLL
	for (int u = 0; u < 8; u++)
		vn[u] = 0.0f;
	gdnc_rows8(s.Tb, LA, s.X, j, w, vn);
	GDNC_UNROLL
	for (int u = 0; u < 8; u++)
		s.V[(w + 8 * u) * VS + j] = vn[u];
}

/*
 * k_gdn_chunk, phase 4: O = ys + P Vn for rows < L (thread (w, j) as in phase 2) and
 * S = e^(G_(L-1)) S + K^T diag(eD) Vn (thread (w, j): rows w * DK / 8 ..
 * of column j; each thread reads and writes only its own S).
 */
template <int DK>
GDNC_HD void
gdnc_out(const struct gdnc_args &A, const struct gdnc_sh &s, int h, int j0, int t0,
    int L, int tid, const float ys[8])
{
	enum { LQ = gdnc_dim<DK>::LQ, LA = gdnc_dim<DK>::LA, VS = GDNC_VS, RD = DK / 8 };
	int w = tid / 32, j = tid % 32, d0 = w * RD;
	float os[8], sn[RD], eL = s.eG[L - 1];

	GDNC_UNROLL
	for (int u = 0; u < 8; u++)
		os[u] = ys[u];
	gdnc_rows8(s.P, LA, s.V, j, w, os);
	GDNC_UNROLL
	for (int u = 0; u < 8; u++) {
		int t = w + 8 * u;

		if (t < L)
			A.o[(size_t)(t0 + t) * A.nv * A.dv + (size_t)h * A.dv + j0 + j] = os[u];
	}

	GDNC_UNROLL
	for (int i = 0; i < RD; i++)
		sn[i] = s.S[(d0 + i) * VS + j] * eL;
	for (int t = 0; t < GDNC_C; t++) {
		float xv = s.V[t * VS + j] * s.eD[t];

		GDNC_UNROLL
		for (int i = 0; i < RD; i += 4) {
			float4 kt = *(const float4 *)(s.k + t * LQ + d0 + i);

			sn[i] = fmaf(kt.x, xv, sn[i]);
			sn[i + 1] = fmaf(kt.y, xv, sn[i + 1]);
			sn[i + 2] = fmaf(kt.z, xv, sn[i + 2]);
			sn[i + 3] = fmaf(kt.w, xv, sn[i + 3]);
		}
	}
	GDNC_UNROLL
	for (int i = 0; i < RD; i++)
		s.S[(d0 + i) * VS + j] = sn[i];
}

#endif

