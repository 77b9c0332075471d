/*
 * Prefill attention (m > GPU_MATVEC_MAX_ROWS rows at a host position p0):
 * flash attention in fp32, one kernel, no split of the positions.
 *
 * The query vectors of one KV head kvh are numbered i = row * G + g (G =
 * nh / nkv query heads share a KV head; head kvh * G + g).  Block (tile,
 * kvh) takes BQ of them, i0 = tile * BQ.., Q in shared memory for the whole
 * block; it walks the positions 0 .. p0 + (last row of the tile) in tiles of
 * APF_BK: S = Q K^T scaled and masked (position > p0 + row: -inf) to
 * pt[k][q], the running max m and the rescale alpha = e^(m_old - m_new) per
 * vector, p = e^(s - m_new) in place, then acc = alpha acc + p V and l =
 * alpha l + sum p.  The end: out = acc / l.  Every vector sees position 0
 * in the first tile, so m is finite from then on (masked scores give p = 0,
 * alpha = 1).  With a sliding window (window > 0: the row at position i
 * sees i - window < j <= i) the block starts at the tile of its first
 * row's first position (apf_j0: a multiple of APF_BK) and positions before
 * a row's window are masked too; a vector whose window starts in a later
 * tile sees nothing in the first (apf_sexp: p = 0, alpha = 1, m stays
 * -inf), so each row's sums are the same tiles and the same steps in any
 * block.  K and V tiles have a buffer each, filled by cp.async while
 * the block computes: V while the scores of its tile are made, the next K
 * while P V runs; four barriers a tile.
 *
 * Threads NT = 4 BQ.  Scores: thread (qg = tid / 16, kg = tid % 16) takes
 * vectors 4 qg .. 4 qg + 3 and positions kg, kg + 16 of the tile, an FMA
 * chain over d in order (float4 reads of Q and K rows, rows LD = HDP + 4
 * floats apart: a warp's 16 K rows hit every bank twice, its two Q rows
 * broadcast).  Softmax: thread (q = tid / 4, part = tid % 4) reads the
 * tile's 32 scores of vector q (the four of a quad the same: the same max),
 * then, a __syncwarp later, writes p at positions part, part + 4, ..; part 0
 * keeps m (two copies by
 * tile parity: the quad reads the old while part 0 writes the new) and
 * alpha.  P V: thread (qg = tid / 16, dg = tid % 16) owns vectors 4 qg ..
 * 4 qg + 3, columns 64 c + 4 dg .. + 3 (c < HDP / 64) in registers; per
 * position one float4 of p (pt rows of BQ + 8 floats) and HDP / 64 float4s
 * of V (a warp's 16 lanes read 256 contiguous bytes).  l is summed by every
 * thread of the vectors from the p it reads (the same order everywhere).
 *
 * hd <= HDP (64, 128, 256, 512), hd a multiple of 4 (float4s; the causal
 * callers take multiples of 32): columns hd.. of Q and K are zero in shared
 * memory (they add nothing to a score) and columns hd.. of the output are
 * not written.  full: every row sees every key of the call, positions
 * < p0 + m, not only those up to its own (a vision tower's attention over
 * the whole image: its rows all see the last; the tiles each block walks
 * are then every block's).  The order of the sums differs from the
 * decode kernel's (k_attn_split: splits of 64 positions, warps, a combine):
 * a prefill row agrees with the same row decoded alone within float
 * tolerance, not bit for bit.
 *
 * Cost (the 9B shape: hd 256, 16 query heads on 4 KV heads, 512 rows at
 * position 0).  2048 vectors a KV head, 64 blocks of 32 each, 256 blocks of
 * 128 threads (156 registers, 103 KB: two a multiprocessor, all resident).
 * A tile a thread: 4 x 2 x 256 FMA of scores for 64 x 6 float4 reads of
 * shared memory, 32 x 4 x 16 FMA of P V for 32 x 5; the longest block 16
 * tiles.  2.1 GFLOP a
 * layer, 32 us at the H200's fp32 FMA peak: an estimate, not a measurement
 * (kernel-check -b prints one).  Heads of 512 (Gemma-4's global layers):
 * BQ 32 only, 199 KB of shared memory (one block a multiprocessor), 128
 * accumulators a thread; not measured.
 *
 * The phases below run between barriers; each is a function of the thread
 * index so that tools/attn-prefill-emu.cc replays them thread by thread on
 * the CPU (the same index math; keep the two in step).  Included by
 * cuda/ops.cu (the kernel) and the emulator.
 */
#ifndef MEMRA_ATTN_PREFILL_CUH
#define MEMRA_ATTN_PREFILL_CUH

#ifdef __CUDACC__
#define APF_HD __device__ __forceinline__
#define APF_UNROLL _Pragma("unroll")
#define APF_UNROLL2 _Pragma("unroll 2")
#define APF_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define APF_MUL(a, b) __fmul_rn((a), (b))
#define APF_ADD(a, b) __fadd_rn((a), (b))
#else
#define APF_HD static inline
#define APF_UNROLL
#define APF_UNROLL2
#define APF_FMA(a, b, c) fmaf((a), (b), (c))
#define APF_MUL(a, b) ((a) * (b))
#define APF_ADD(a, b) ((a) + (b))
#endif

enum { APF_BK = 32 };	/* positions a tile */

struct apf_args {
	const float *q;		/* [m][nh][hd] */
	const float *K, *V;	/* [p0 + m ..][nkv][hd] */
	float	*o;		/* [m][nh][hd] */
	int	m, nh, nkv, hd, p0;
	float	scale;
	int	full;		/* every row sees positions < p0 + m; else causal */
	int	window;		/* > 0 (causal only): the row at position i sees keys
				 * j with i - window < j <= i only; 0: every earlier */
	int	ring;		/* > 0 (with a window): K, V are rings of ring rows,
				 * position j in row j % ring; 0: in row j */
};

template <int HDP, int BQ>
struct apf_dim {
	enum {
		NT = 4 * BQ, NC = HDP / 64, LD = HDP + 4, LDP = BQ + 8,
		/* q[BQ][LD], k, v [APF_BK][LD], pt[APF_BK][LDP], m[2][BQ], alpha[BQ] */
		FLOATS = BQ * LD + 2 * APF_BK * LD + APF_BK * LDP + 3 * BQ,
		LOADS = APF_BK * HDP / 4 / NT,	/* float4s a thread a K or V tile */
	};
};

struct apf_sh {
	float	*q, *k, *v, *pt, *m, *alpha;
};

/* Per thread between the phases: its P V accumulators and l. */
template <int HDP>
struct apf_acc {
	float	o[4][HDP / 16];
	float	l[4];
};

template <int HDP, int BQ>
APF_HD void
apf_carve(float *base, apf_sh *s)
{
	typedef apf_dim<HDP, BQ> D;

	s->q = base;
	s->k = s->q + BQ * D::LD;
	s->v = s->k + APF_BK * D::LD;
	s->pt = s->v + APF_BK * D::LD;
	s->m = s->pt + APF_BK * D::LDP;
	s->alpha = s->m + 2 * BQ;
}

/* The row of vector i of the tile (vectors past the last count as the last row's). */
APF_HD int
apf_row(const apf_args &A, int i)
{
	int G = A.nh / A.nkv, n = A.m * G;

	return (i < n ? i : n - 1) / G;
}

/* The last position row r sees: its own, or with full the call's last. */
APF_HD int
apf_last(const apf_args &A, int r)
{
	return A.full ? A.p0 + A.m - 1 : A.p0 + r;
}

/* The first position row r sees: 0, or with a window its window's first. */
APF_HD int
apf_first(const apf_args &A, int r)
{
	int f = A.p0 + r - A.window + 1;

	return A.window > 0 && f > 0 ? f : 0;
}

/* Positions the block at vector i0 sees: 0 .. the last its last row sees. */
template <int BQ>
APF_HD int
apf_npos(const apf_args &A, int i0)
{
	return apf_last(A, apf_row(A, i0 + BQ - 1)) + 1;
}

/* The block's first tile: the one holding the first position its first row
 * sees (tiles at multiples of APF_BK, whatever the block: a row's sums are
 * the same tiles in any block). */
APF_HD int
apf_j0(const apf_args &A, int i0)
{
	return apf_first(A, apf_row(A, i0)) / APF_BK * APF_BK;
}

/* Q of the tile to shared memory (zeros past hd and past the last vector), m = -inf. */
template <int HDP, int BQ>
APF_HD void
apf_load_q(const apf_args &A, const apf_sh &s, int kvh, int i0, int tid)
{
	typedef apf_dim<HDP, BQ> D;
	int G = A.nh / A.nkv, n = A.m * G;

	for (int x = tid; x < BQ * HDP / 4; x += D::NT) {
		int v = x / (HDP / 4), c = x % (HDP / 4) * 4, i = i0 + v;
		float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		if (i < n && c < A.hd)
			f = *(const float4 *)(A.q + ((size_t)(i / G) * A.nh + kvh * G + i % G) *
			    A.hd + c);
		*(float4 *)(s.q + v * D::LD + c) = f;
	}
	if (tid < BQ)
		s.m[tid] = -INFINITY;
}

/* A thread's float4s of a K or V tile at position j0 to dst (s.k or s.v;
 * zeros past npos and hd; position j from row j, or j % A.ring in a ring),
 * cp.async on the GPU (apf_wait, then a barrier, before it is read). */
template <int HDP, int BQ>
APF_HD void
apf_copy(const apf_args &A, const float *src, float *dst, int kvh, int j0, int npos,
    int tid)
{
	typedef apf_dim<HDP, BQ> D;
	enum { KS = D::NT / (HDP / 4) };	/* rows apart a thread's float4s are */
	int k0 = tid / (HDP / 4), c = tid % (HDP / 4) * 4;
	size_t ld = (size_t)A.nkv * A.hd;
	const float *g0 = src + (size_t)kvh * A.hd + c;
	float *d0 = dst + k0 * D::LD + c;

	APF_UNROLL
	for (int u = 0; u < D::LOADS; u++) {
		int j = j0 + k0 + u * KS, ok = j < npos && c < A.hd;
		const float *g = ok ? g0 + (size_t)(A.ring > 0 ? j % A.ring : j) * ld : src;
		float *d = d0 + u * KS * D::LD;
#ifdef __CUDACC__
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::
		    "r"((unsigned)__cvta_generic_to_shared(d)), "l"(g), "r"(ok ? 16 : 0) : "memory");
#else
		for (int e = 0; e < 4; e++)
			d[e] = ok ? g[e] : 0.0f;
#endif
	}
}

/* The thread's apf_copy done (a barrier then publishes it). */
APF_HD void
apf_wait(void)
{
#ifdef __CUDACC__
	asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

/* S = Q K^T scale, masked, to pt[k][q]. */
template <int HDP, int BQ>
APF_HD void
apf_scores(const apf_args &A, const apf_sh &s, int i0, int j0, int tid)
{
	typedef apf_dim<HDP, BQ> D;
	int qg = tid / 16, kg = tid % 16;
	float sc[4][2];

	APF_UNROLL
	for (int i = 0; i < 4; i++)
		sc[i][0] = sc[i][1] = 0.0f;
	/* unrolled twice (no spill; once more spills at HDP 256) */
#ifdef __CUDACC__
#pragma unroll 2
#endif
	for (int d = 0; d < HDP; d += 4) {
		float4 a[4], b[2];
		APF_UNROLL
		for (int i = 0; i < 4; i++)
			a[i] = *(const float4 *)(s.q + (4 * qg + i) * D::LD + d);
		APF_UNROLL
		for (int j = 0; j < 2; j++)
			b[j] = *(const float4 *)(s.k + (kg + 16 * j) * D::LD + d);
		APF_UNROLL
		for (int i = 0; i < 4; i++)
			APF_UNROLL
			for (int j = 0; j < 2; j++) {
				float t = APF_FMA(a[i].x, b[j].x, sc[i][j]);
				t = APF_FMA(a[i].y, b[j].y, t);
				t = APF_FMA(a[i].z, b[j].z, t);
				sc[i][j] = APF_FMA(a[i].w, b[j].w, t);
			}
	}
	APF_UNROLL
	for (int j = 0; j < 2; j++) {
		int pos = j0 + kg + 16 * j;
		float v[4];
		APF_UNROLL
		for (int i = 0; i < 4; i++) {
			int r = apf_row(A, i0 + 4 * qg + i);
			v[i] = pos <= apf_last(A, r) && pos >= apf_first(A, r) ?
			    APF_MUL(sc[i][j], A.scale) : -INFINITY;
		}
		*(float4 *)(s.pt + (kg + 16 * j) * D::LDP + 4 * qg) =
		    make_float4(v[0], v[1], v[2], v[3]);
	}
}

/* Tile t's max of vector q (the quad's four threads alike; they read all of pt's column q). */
template <int HDP, int BQ>
APF_HD float
apf_smax(const apf_sh &s, int t, int tid)
{
	typedef apf_dim<HDP, BQ> D;
	int q = tid / 4;
	float mn = s.m[(t & 1) * BQ + q];

	for (int k = 0; k < APF_BK; k++)
		mn = fmaxf(mn, s.pt[k * D::LDP + q]);
	return mn;
}

/* After the quad's apf_smax (a __syncwarp apart): p = e^(s - mn) in place at
 * positions part, part + 4, ..; part 0 keeps the new m and alpha.  A vector
 * that has seen no position yet (mn -inf: tiles before its window) gets p
 * = 0 and alpha = 1: its acc and l stay 0, and its first tile with a
 * position scales them by e^-inf = 0, as a block that starts there does. */
template <int HDP, int BQ>
APF_HD void
apf_sexp(const apf_sh &s, int t, int tid, float mn)
{
	typedef apf_dim<HDP, BQ> D;
	int q = tid / 4, part = tid % 4;

	APF_UNROLL
	for (int j = 0; j < APF_BK / 4; j++) {
		float *p = s.pt + (part + 4 * j) * D::LDP + q;
		*p = mn == -INFINITY ? 0.0f : expf(*p - mn);
	}
	if (part == 0) {
		s.m[((t + 1) & 1) * BQ + q] = mn;
		s.alpha[q] = mn == -INFINITY ? 1.0f : expf(s.m[(t & 1) * BQ + q] - mn);
	}
}

template <int HDP>
APF_HD void
apf_acc_zero(apf_acc<HDP> &r)
{
	APF_UNROLL
	for (int i = 0; i < 4; i++) {
		r.l[i] = 0.0f;
		APF_UNROLL
		for (int c = 0; c < HDP / 16; c++)
			r.o[i][c] = 0.0f;
	}
}

/* acc = alpha acc + p V, l = alpha l + sum p: the thread's 4 vectors x HDP / 16 columns. */
template <int HDP, int BQ>
APF_HD void
apf_pv(const apf_sh &s, int tid, apf_acc<HDP> &r)
{
	typedef apf_dim<HDP, BQ> D;
	int qg = tid / 16, dg = tid % 16;

	APF_UNROLL
	for (int i = 0; i < 4; i++) {
		float al = s.alpha[4 * qg + i];
		r.l[i] = APF_MUL(r.l[i], al);
		APF_UNROLL
		for (int c = 0; c < HDP / 16; c++)
			r.o[i][c] = APF_MUL(r.o[i][c], al);
	}
	APF_UNROLL2
	for (int k = 0; k < APF_BK; k++) {
		float4 p = *(const float4 *)(s.pt + k * D::LDP + 4 * qg);
		float pv[4] = { p.x, p.y, p.z, p.w };
		APF_UNROLL
		for (int c = 0; c < D::NC; c++) {
			float4 v = *(const float4 *)(s.v + k * D::LD + 64 * c + 4 * dg);
			APF_UNROLL
			for (int i = 0; i < 4; i++) {
				r.o[i][4 * c] = APF_FMA(pv[i], v.x, r.o[i][4 * c]);
				r.o[i][4 * c + 1] = APF_FMA(pv[i], v.y, r.o[i][4 * c + 1]);
				r.o[i][4 * c + 2] = APF_FMA(pv[i], v.z, r.o[i][4 * c + 2]);
				r.o[i][4 * c + 3] = APF_FMA(pv[i], v.w, r.o[i][4 * c + 3]);
			}
		}
		APF_UNROLL
		for (int i = 0; i < 4; i++)
			r.l[i] = APF_ADD(r.l[i], pv[i]);
	}
}

/* out = acc / l for the thread's vectors (those of the tile that exist) and columns < hd. */
template <int HDP, int BQ>
APF_HD void
apf_out(const apf_args &A, int kvh, int i0, int tid, const apf_acc<HDP> &r)
{
	typedef apf_dim<HDP, BQ> D;
	int qg = tid / 16, dg = tid % 16, G = A.nh / A.nkv;

	APF_UNROLL
	for (int i = 0; i < 4; i++) {
		int v = i0 + 4 * qg + i;
		if (v >= A.m * G)
			break;
		float *o = A.o + ((size_t)(v / G) * A.nh + kvh * G + v % G) * A.hd;
		APF_UNROLL
		for (int c = 0; c < D::NC; c++)
			if (64 * c + 4 * dg < A.hd)
				*(float4 *)(o + 64 * c + 4 * dg) = make_float4(
				    r.o[i][4 * c] / r.l[i], r.o[i][4 * c + 1] / r.l[i],
				    r.o[i][4 * c + 2] / r.l[i], r.o[i][4 * c + 3] / r.l[i]);
	}
}

#endif
