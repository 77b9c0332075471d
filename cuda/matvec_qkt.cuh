/*
 * matvec_qkt: k_mvk's products of Q4_K, Q5_K and Q6_K weights by int8
 * tensor cores, with k_mvk's bits, and k_iq4<IQ4_XS>'s (matvec_iq4.cu)
 * likewise (included by cuda/matvec_qk.cu after k_mvk; gpu_tune_qkt picks
 * it).
 *
 * What k_mvk computes (the file comment there): lane (g, i) of a weight
 * row's warp, g = lane / L, i = lane % L, takes super-blocks g, g + 32 /
 * L, ... in order, and of each the pieces p = 0 .. 8 / L - 1 (c = i / 2
 * + 2 p, h = i % 2): the 16-value runs 4 c + h (sub-block 2 c, the low
 * nibbles of quant bytes 32 c + 16 h ..) and 4 c + 2 + h (sub-block 2 c +
 * 1, the high nibbles), whose exact integer sums
 *   is = sum sc[sub] (w . x over the run),  ms = sum m[sub] bsums[run]
 * take one float step a block, acc += (d dy) is - (dmin dy) ms, every
 * product rounded (no fma); then the butterfly over the warp (v += v of
 * lane ^ 1, 2, 4, 8, 16; lane 0's) and the per-tensor scale.  Here a lane
 * of k_mvk is a chain of each (weight row, input row), its steps kept in
 * that order; only the runs' dots come from elsewhere: one mma.sync
 * m16n8k16 .s32.s8.s8.s32 a run for 16 weight rows x 8 input rows, from
 * 0 (an integer sum is exact in any order: the same is and ms).
 *
 * A block of 8 warps takes 16 weight rows (one m16 tile) and the m input
 * rows (NT n-tiles of 8; m <= 32: NT 1, 2 or 4).  The chains come in 8
 * sets of 4, set s holding k_mvk's lanes 4 s .. 4 s + 3: for L = 4 the
 * lanes of group s, whose step is a whole super-block (4 chains x 2
 * pieces x 2 runs: 16 runs); for L = 8 half h = s % 2 of group s / 2,
 * whose step is half a super-block (runs 8 h .. 8 h + 7: 4 chains x 2
 * runs).  That step of a set is a slice: slice v of a row is super-block v
 * (L = 4) or half v % 2 of super-block v / 2 (L = 8), and belongs to set
 * v % 8.  Warp w takes n-tile nt = w / CS and, of the CS = 8 / NT slices
 * of each chunk, slice cs = w % CS: chunk k holds slices k CS .. k CS +
 * CS - 1 (CB = CS or CS / 2 super-blocks), so in chunk k warp w steps the
 * chains of set (k % NT) CS + cs, in slot k % NT of its accumulators
 * acc[NT][4 chains][4]: NT sets of 4 chains of its n-tile, 16 NT floats a
 * lane through the whole row, every chain's steps in block order.  Lane
 * (gq = lane / 4, tg = lane % 4) holds, per PTX's m16n8k16 .s8 fragments,
 * A words of rows gq and gq + 8 at values 4 tg .. 4 tg + 3 of the run, the
 * B word of input 8 nt + gq at the same values, and C of rows gq, gq + 8
 * x inputs 8 nt + 2 tg, + 1.  The chunks come through a ring of QKT_NS
 * shared-memory stages by cp.async (16 weight rows' CB super-blocks as
 * they are, x's int8 values, scales dy and bsums), QKT_NS - 1 chunks in
 * flight while one is multiplied, one barrier a chunk; the x of a stage
 * is 16 KiB (L = 4) or 8 KiB (L = 8) whatever NT.  At the end each
 * chain's sum goes to shared memory and one thread per (row, input) adds
 * the 32 in the butterfly's pairs: k_mvk's bits for every row, whatever m
 * and NT (the columns of an mma are independent).
 * tools/matvec-qkt-emu.c models it thread by thread against k_mvk.
 *
 * Q6_K (mvkt_step6 there): is alone, acc += (d dy) is; at L = 4 a lane's
 * two 8-value pieces of a quarter are one 16-value run (an mma each), at
 * L = 8 they are a run's halves, two chains: two mmas a run, each with
 * A's other half zero.  Rows: Q4_K and Q5_K 16-byte aligned (qk_products
 * checks the weight; their rows are multiples of 16 bytes), copied by 16
 * bytes; Q6_K 4-byte aligned weights, rows of 210 nb bytes (2-byte
 * aligned), copied by aligned words from the one holding a chunk's first
 * byte (cp.async's source size cutting the last) and read by halfwords.
 *
 * IQ4_XS (mvkt_stepx; L = 8 only, its one form): k_iq4's lane (g, i), g =
 * lane / 8, takes sub-block i of super-blocks g, g + 4, ... in order, one
 * float step a block, acc += (d dy) ((float)t (ls - 32)) with t the
 * sub-block's exact dot (t (ls - 32) < 2^24 in magnitude: exact as a
 * float, so the same as (d dy) (float)is, is = (ls - 32) t in integers);
 * the butterfly xor 1 .. 16 and the scale as k_mvk's.  That is k_mvk's
 * chain structure at L = 8 (lane 8 g + i, blocks g mod 4): a slice is half
 * eta of a super-block, chain ci sub-block 4 eta + ci, whose two 16-value
 * runs (the low nibbles of its 16 quant bytes, then the high) are an mma
 * each, the A words by gpu_iq4x8 (word tg of the sub-block: lo values 4 tg
 * .. of run 0, hi of run 1).  Rows of 136 nb bytes, 8-byte aligned
 * (qk_products checks the weight), copied by 8 bytes.
 */

enum {
	QKT_R = 16,		/* weight rows a block (the mma's m) */
	QKT_NS = 3,		/* stages in the ring */
	QKT_THREADS = 256,
	QKT_MAX_M = 32,		/* input rows a launch */
	QKT_PB = 216,		/* packed Q6_K: a block's stage bytes (its 208, its group's four d) */
};

/* A launch's geometry and a stage's bytes: the weights (16 rows, slots
 * WST apart: 4 mod 8 words, so rows gq fall on distinct bank quads), x's
 * int8 values (MP rows XS apart, likewise), x's dy[MP][CB] and
 * bsums[MP][CB][16]; after the loop the 32 chains' sums, [c][row][MP + 1]. */
template <int T, int L, int NT>
struct qkt_dim {
	enum {
		MP = 8 * NT,
		CS = 8 / NT,		/* slices a chunk: warps a n-tile */
		SL = L == 8 ? 2 : 1,	/* slices a super-block */
		CB = CS / SL,		/* super-blocks a chunk */
		BS = mvk_bs<T>::v,
		/* a row's chunk as copied (Q6_K: from the word holding its first
		 * byte, 2 bytes before it at most; packed Q6_K: QKT_PB bytes a
		 * block), its slot: 16 W0 / 16 odd */
		RW = T == QK_T_Q6_K ? (CB * BS + 2 + 3) / 4 * 4 : T == QK_T_Q6P ? CB * QKT_PB :
		    CB * BS,
		W0 = (RW + 15) / 16 * 16,
		WST = (W0 / 16) % 2 ? W0 : W0 + 16,
		/* pieces of it: words (Q6_K), 8 bytes (IQ4_XS, packed Q6_K), 16 bytes */
		NPC = T == QK_T_Q6_K ? RW / 4 : T == QK_T_IQ4_XS || T == QK_T_Q6P ? RW / 8 : RW / 16,
		OX = QKT_R * WST,
		XS = CB * 256 + 16,
		OD = OX + MP * XS,
		OB = (OD + MP * CB * 4 + 15) / 16 * 16,
		STAGE = OB + (T == QK_T_IQ4_XS ? 0 : MP * CB * 32),	/* (IQ4_XS: no bsums) */
		RED = 32 * QKT_R * (MP + 1) * 4,
		SMEM = QKT_NS * STAGE > RED ? QKT_NS * STAGE : RED,
	};
};

/*
 * Start copying chunk k (super-blocks CB k ..) of weight rows r0.. (those
 * below rows) and of the m input rows into stage st.  Nothing past the
 * row's end is read; what a stage holds there (and for weight rows >=
 * rows, input rows >= m) feeds only sums that are never stored.
 */
template <int T, int L, int NT>
__device__ __forceinline__ void
mvkt_copy(uint8_t *st, const uint8_t *__restrict__ W, size_t rb, int64_t r0, int64_t rows,
    int nb, const int8_t *__restrict__ q, const float *__restrict__ dk,
    const int16_t *__restrict__ bs, int m, int k)
{
	typedef qkt_dim<T, L, NT> D;
	int t = threadIdx.x, b0 = k * D::CB, nbk = min((int)D::CB, nb - b0);
	int nr = (int)min((int64_t)QKT_R, rows - r0), np = nbk * D::BS / 16;

	if (T == QK_T_Q6_K) {	/* aligned words from the one holding the chunk's first byte */
		int len = nbk * D::BS;
		for (int it = t; it < nr * D::NPC; it += QKT_THREADS) {
			int rr = it / D::NPC, i = it % D::NPC;
			const uint8_t *src = W + (size_t)(r0 + rr) * rb + (size_t)b0 * D::BS;
			int o = (int)((uintptr_t)src & 3), n = min(4, o + len - 4 * i);
			if (n > 0)
				gpu_cp4(st + rr * D::WST + 4 * i, src - o + 4 * i, n);
		}
	} else if (T == QK_T_Q6P) {	/* block bl of the chunk: its 208 bytes, its group's d */
		for (int it = t; it < nr * D::NPC; it += QKT_THREADS) {
			int rr = it / D::NPC, i = it % D::NPC, bl = i / (QKT_PB / 8), p = i % (QKT_PB / 8);
			int64_t blk = (r0 + rr) * nb + b0 + bl;
			if (bl < nbk)
				gpu_cp8(st + rr * D::WST + QKT_PB * bl + 8 * p, W + q6p_group(blk) +
				    (p < 26 ? q6p_body((int)(blk & 3)) + 8 * p : 0), 8);
		}
	} else if (T == QK_T_IQ4_XS)	/* 8-byte aligned rows and chunks */
		for (int it = t; it < nr * D::NPC; it += QKT_THREADS) {
			int rr = it / D::NPC, i = it % D::NPC;
			if (i < nbk * D::BS / 8)
				gpu_cp8(st + rr * D::WST + 8 * i, W + (size_t)(r0 + rr) * rb +
				    (size_t)b0 * D::BS + 8 * i, 8);
		}
	else
		for (int it = t; it < nr * D::NPC; it += QKT_THREADS) {
			int rr = it / D::NPC, i = it % D::NPC;
			if (i < np)
				gpu_cp16(st + rr * D::WST + 16 * i, W + (size_t)(r0 + rr) * rb +
				    (size_t)b0 * D::BS + 16 * i, 16);
		}
	for (int it = t; it < m * 16 * D::CB; it += QKT_THREADS) {	/* x: 16 pieces a block */
		int j = it / (16 * D::CB), i = it % (16 * D::CB);
		if (i < 16 * nbk)
			gpu_cp16(st + D::OX + j * D::XS + 16 * i, q + ((size_t)j * nb + b0) * 256 +
			    16 * i, 16);
	}
	for (int it = t; it < m * D::CB; it += QKT_THREADS) {	/* dy: a float a block */
		int j = it / D::CB, i = it % D::CB;
		if (i < nbk)
			gpu_cp4(st + D::OD + (j * D::CB + i) * 4, dk + (size_t)j * nb + b0 + i, 4);
	}
	for (int it = t; it < (T == QK_T_Q6_K || T == QK_T_Q6P || T == QK_T_IQ4_XS ? 0 :
	    m * 2 * D::CB);
	    it += QKT_THREADS) {	/* bsums (Q4_K, Q5_K) */
		int j = it / (2 * D::CB), i = it % (2 * D::CB);
		if (i < 2 * nbk)
			gpu_cp16(st + D::OB + j * D::CB * 32 + 16 * i, bs + ((size_t)j * nb + b0) * 16 +
			    8 * i, 16);
	}
}

#ifndef MVKT_HOST
/* c = the 16 x 8 int8 product of a (rows gq, gq + 8) and b (input gq) at
 * one run: mma.sync m16n8k16 .s32.s8.s8.s32 from 0. */
__device__ __forceinline__ void
mvkt_mma(const uint32_t *a, uint32_t b, int *c)
{
	asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 "
	    "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
	    : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(b), "r"(0));
}

/* cp.async's groups: commit, wait for all but the newest QKT_NS - 2, for all. */
__device__ __forceinline__ void
mvkt_commit(void)
{
	asm volatile("cp.async.commit_group;");
}

__device__ __forceinline__ void
mvkt_wait(void)
{
	asm volatile("cp.async.wait_group %0;" : : "n"(QKT_NS - 2) : "memory");
}

__device__ __forceinline__ void
mvkt_wait_all(void)
{
	asm volatile("cp.async.wait_all;" : : : "memory");
}
#endif	/* (tools/matvec-qkt-kern.cc: the host's, warp by warp) */

/* The 6-bit scales (mins = 0) or mins (1) of sub-blocks 4 hi .. 4 hi + 3,
 * a byte each, from the header words u0, u1, u2 (bytes 4..15 of a block):
 * k_mvk's get_scale_min_k4. */
__device__ __forceinline__ uint32_t
mvkt_sc4(uint32_t u0, uint32_t u1, uint32_t u2, int mins, int hi)
{
	uint32_t lo = mins ? u1 : u0;

	if (!hi)
		return lo & 0x3F3F3F3Fu;
	return ((mins ? u2 >> 4 : u2) & 0x0F0F0F0Fu) | (lo >> 6 & 0x03030303u) << 4;
}

/*
 * Warp w's slice of chunk k (stage st; nsl slices a row), the step of its
 * set's 4 chains (acc: the slot's [chain][e], e as C's registers: rows gq,
 * gq, gq + 8, gq + 8; inputs 2 tg, 2 tg + 1 of the n-tile).  For each
 * chain its runs' mma sums scaled and added in integers, then k_mvk's
 * float step.
 */
template <int T, int L, int NT>
__device__ __forceinline__ void
mvkt_step(const uint8_t *st, int nsl, int k, float (*acc)[4])
{
	typedef qkt_dim<T, L, NT> D;
	enum { P = 8 / L, QS = T == QK_T_Q5_K ? 48 : 16 };
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gq = lane >> 2, tg = lane & 3;
	int nt = w / D::CS, cs = w % D::CS, bl = cs / D::SL, eta = D::SL == 2 ? cs & 1 : 0;

	if (k * D::CS + cs >= nsl)	/* the warp's slice past the row's end */
		return;
	/* chain ci of the slice is k_mvk's lane i = 4 eta + ci of its group:
	 * pieces c = 2 eta + cr, cr = ci / 2 + 2 p; the offsets of 2 eta here */
	const uint8_t *w0 = st + gq * D::WST + bl * D::BS, *w1 = w0 + 8 * D::WST;
	const uint8_t *v0 = w0 + QS + 64 * eta, *v1 = w1 + QS + 64 * eta;
	const float *ds = (const float *)(st + D::OD);
	int j0 = 8 * nt + 2 * tg;
	const int16_t *bq0 = (const int16_t *)(st + D::OB) + (j0 * D::CB + bl) * 16 + 8 * eta;
	const int16_t *bq1 = bq0 + D::CB * 16;
	const uint8_t *xb = st + D::OX + (8 * nt + gq) * D::XS + bl * 256 + 128 * eta + 4 * tg;
	float dy0 = ds[j0 * D::CB + bl], dy1 = ds[(j0 + 1) * D::CB + bl];
	uint32_t h0 = *(const uint32_t *)w0, h1 = *(const uint32_t *)w1;
	float d0 = __half2float(__ushort_as_half((unsigned short)(h0 & 0xFFFF)));
	float n0 = __half2float(__ushort_as_half((unsigned short)(h0 >> 16)));
	float d1 = __half2float(__ushort_as_half((unsigned short)(h1 & 0xFFFF)));
	float n1 = __half2float(__ushort_as_half((unsigned short)(h1 >> 16)));
	float dd[4] = { __fmul_rn(d0, dy0), __fmul_rn(d0, dy1), __fmul_rn(d1, dy0),
	    __fmul_rn(d1, dy1) };
	float dm[4] = { __fmul_rn(n0, dy0), __fmul_rn(n0, dy1), __fmul_rn(n1, dy0),
	    __fmul_rn(n1, dy1) };
	/* scales and mins of rows gq (0), gq + 8 (1): [u] sub-blocks 4 u .. 4 u + 3
	 * (L = 8: [0] those of half eta, its four) */
	uint32_t S0[2], S1[2], M0[2], M1[2];
	{
		uint32_t a0 = *(const uint32_t *)(w0 + 4), a1 = *(const uint32_t *)(w0 + 8);
		uint32_t a2 = *(const uint32_t *)(w0 + 12), c0 = *(const uint32_t *)(w1 + 4);
		uint32_t c1 = *(const uint32_t *)(w1 + 8), c2 = *(const uint32_t *)(w1 + 12);
#pragma unroll
		for (int u = 0; u < 2; u++) {
			int hi = L == 8 ? eta : u;
			S0[u] = mvkt_sc4(a0, a1, a2, 0, hi), M0[u] = mvkt_sc4(a0, a1, a2, 1, hi);
			S1[u] = mvkt_sc4(c0, c1, c2, 0, hi), M1[u] = mvkt_sc4(c0, c1, c2, 1, hi);
		}
	}

#pragma unroll
	for (int ci = 0; ci < 4; ci++) {
		int h = ci & 1, is[4] = { 0, 0, 0, 0 }, ms[4] = { 0, 0, 0, 0 };
#pragma unroll
		for (int p = 0; p < P; p++) {
			int cr = (ci >> 1) + 2 * p, u = cr >> 1;
			uint32_t q0 = *(const uint32_t *)(v0 + 32 * cr + 16 * h + 4 * tg);
			uint32_t q1 = *(const uint32_t *)(v1 + 32 * cr + 16 * h + 4 * tg);
			uint32_t e0 = 0, e1 = 0;
			if (T == QK_T_Q5_K) {	/* the high bits of sub-blocks 2 c, 2 c + 1 */
				e0 = *(const uint32_t *)(w0 + 16 + 16 * h + 4 * tg) >> (4 * eta + 2 * cr);
				e1 = *(const uint32_t *)(w1 + 16 + 16 * h + 4 * tg) >> (4 * eta + 2 * cr);
			}
#pragma unroll
			for (int ab = 0; ab < 2; ab++) {
				int kk = 4 * cr + 2 * ab + h, sb = 8 * ((2 * cr + ab) & 3), cc[4];
				uint32_t a[2] = { q0 >> 4 * ab & 0x0F0F0F0Fu, q1 >> 4 * ab & 0x0F0F0F0Fu };
				if (T == QK_T_Q5_K) {
					a[0] |= (e0 >> ab & 0x01010101u) << 4;
					a[1] |= (e1 >> ab & 0x01010101u) << 4;
				}
				mvkt_mma(a, *(const uint32_t *)(xb + 16 * kk), cc);
				int sc0 = (int)(S0[u] >> sb & 0xFF), sc1 = (int)(S1[u] >> sb & 0xFF);
				int mn0 = (int)(M0[u] >> sb & 0xFF), mn1 = (int)(M1[u] >> sb & 0xFF);
				int x0 = bq0[kk], x1 = bq1[kk];
				is[0] += sc0 * cc[0], is[1] += sc0 * cc[1];
				is[2] += sc1 * cc[2], is[3] += sc1 * cc[3];
				ms[0] += mn0 * x0, ms[1] += mn0 * x1;
				ms[2] += mn1 * x0, ms[3] += mn1 * x1;
			}
		}
#pragma unroll
		for (int e = 0; e < 4; e++)
			acc[ci][e] = __fadd_rn(acc[ci][e], __fsub_rn(__fmul_rn(dd[e], (float)is[e]),
			    __fmul_rn(dm[e], (float)ms[e])));
	}
}

/* 4 bytes at a 2-byte aligned shared address (T = QK_T_Q6P: 4-byte aligned, one load). */
template <int T = QK_T_Q6_K>
__device__ __forceinline__ uint32_t
mvkt_lw(const uint8_t *p)
{
	const uint16_t *h = (const uint16_t *)p;

	if constexpr (T == QK_T_Q6P)
		return *(const uint32_t *)p;
	return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}

/* Q6_K: the 4 values (as 0..63 - 32, int8) of quarter t at ql words qa
 * (bytes 64 n + l), qb (64 n + 32 + l) and qh word qh (128 + 32 n + l):
 * dequantize_row_q6_K's q1 .. q4, as k_mvk's q6_vals. */
__device__ __forceinline__ uint32_t
mvkt_q6(uint32_t qa, uint32_t qb, uint32_t qh, int t)
{
	return (uint32_t)q6_sub32(((t & 1 ? qb : qa) >> 4 * (t >> 1) & 0x0F0F0F0Fu) |
	    (qh >> 2 * t & 0x03030303u) << 4);
}

/*
 * mvkt_step for Q6_K (k_mvk's lanes there: L = 8 lane i = 4 n + sub takes
 * the 8 values 128 n + 32 t + 8 sub .. of quarter t = 0..3, scale byte 2 t
 * + sub / 2 of the 8 at 192 + 8 n; L = 4 lane i = 2 n + h the 16 values
 * 128 n + 32 t + 16 h .., scale byte 2 t + h; is = sum sc[t] (w . x),
 * then acc += (d dy) is).  A slice: L = 4 a super-block (chain ci = lane
 * ci of the group: n = ci / 2, h = ci % 2, one mma a run); L = 8 half n =
 * eta (chain ci = sub: run h = ci / 2 of each quarter, its values 8 (ci %
 * 2) .. + 7: two mmas a run, A's other half zeros, tg < 2 holding values
 * 0..7).  The rows' bytes are 2-byte aligned in the stage: a block of row
 * gq starts og0 = (ra0 + 210 b0) % 4 bytes into the row's slot (ra0: the
 * row's address mod 4, b0 = CB k the chunk's first block), + 210 bl.
 * Packed (T = QK_T_Q6P, mvkt_copy): block bl at QKT_PB bl of the slot, its
 * 208 bytes then its group's four d, its own at 2 ((ra0 + b0 + bl) % 4)
 * (ra0: the row's first block's place in its group).
 */
template <int T, int L, int NT>
__device__ __forceinline__ void
mvkt_step6(const uint8_t *st, int nsl, int k, int ra0, int ra8, float (*acc)[4])
{
	typedef qkt_dim<T, L, NT> D;
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gq = lane >> 2, tg = lane & 3;
	int nt = w / D::CS, cs = w % D::CS, bl = cs / D::SL, eta = D::SL == 2 ? cs & 1 : 0;

	if (k * D::CS + cs >= nsl)	/* the warp's slice past the row's end */
		return;
	const uint8_t *p0, *p1, *h0, *h1;	/* the rows' blocks, their d */
	if constexpr (T == QK_T_Q6P) {
		int b = k * D::CB + bl;
		p0 = st + gq * D::WST + QKT_PB * bl, p1 = p0 + 8 * D::WST;
		h0 = p0 + 208 + 2 * ((ra0 + b) & 3), h1 = p1 + 208 + 2 * ((ra8 + b) & 3);
	} else {
		int sh = 2 * (k * D::CB & 1);
		p0 = st + gq * D::WST + ((ra0 + sh) & 3) + 210 * bl;
		p1 = st + (gq + 8) * D::WST + ((ra8 + sh) & 3) + 210 * bl;
		h0 = p0 + 208, h1 = p1 + 208;
	}
	const float *ds = (const float *)(st + D::OD);
	int j0 = 8 * nt + 2 * tg;
	const uint8_t *xb = st + D::OX + (8 * nt + gq) * D::XS + bl * 256 + 4 * tg;
	float dy0 = ds[j0 * D::CB + bl], dy1 = ds[(j0 + 1) * D::CB + bl];
	float d0 = __half2float(__ushort_as_half(*(const unsigned short *)h0));
	float d1 = __half2float(__ushort_as_half(*(const unsigned short *)h1));
	float dd[4] = { __fmul_rn(d0, dy0), __fmul_rn(d0, dy1), __fmul_rn(d1, dy0),
	    __fmul_rn(d1, dy1) };

#pragma unroll
	for (int cp = 0; cp < (L == 8 ? 2 : 4); cp++) {
		/* L = 8: run h = cp of half eta, chains 2 cp, 2 cp + 1; L = 4: chain cp */
		int n = L == 8 ? eta : cp >> 1, h = L == 8 ? cp : cp & 1;
		int o = 64 * n + 16 * h + 4 * tg;
		uint32_t qa0 = mvkt_lw<T>(p0 + o), qb0 = mvkt_lw<T>(p0 + o + 32);
		uint32_t qa1 = mvkt_lw<T>(p1 + o), qb1 = mvkt_lw<T>(p1 + o + 32);
		uint32_t qh0 = mvkt_lw<T>(p0 + 128 + 32 * n + 16 * h + 4 * tg);
		uint32_t qh1 = mvkt_lw<T>(p1 + 128 + 32 * n + 16 * h + 4 * tg);
		uint32_t s0[2] = { mvkt_lw<T>(p0 + 192 + 8 * n), mvkt_lw<T>(p0 + 196 + 8 * n) };
		uint32_t s1[2] = { mvkt_lw<T>(p1 + 192 + 8 * n), mvkt_lw<T>(p1 + 196 + 8 * n) };
		int il[4] = { 0, 0, 0, 0 }, ih[4] = { 0, 0, 0, 0 };
#pragma unroll
		for (int t = 0; t < 4; t++) {
			uint32_t A0 = mvkt_q6(qa0, qb0, qh0, t), A1 = mvkt_q6(qa1, qb1, qh1, t);
			uint32_t bw = *(const uint32_t *)(xb + 128 * n + 32 * t + 16 * h);
			int sb = 8 * ((2 * t + h) & 3), cl[4], ch[4];
			int sc0 = (int)(int8_t)(s0[t >> 1] >> sb), sc1 = (int)(int8_t)(s1[t >> 1] >> sb);
			if (L == 8) {
				uint32_t lo[2] = { tg < 2 ? A0 : 0u, tg < 2 ? A1 : 0u };
				uint32_t hi[2] = { tg < 2 ? 0u : A0, tg < 2 ? 0u : A1 };
				mvkt_mma(lo, bw, cl);
				mvkt_mma(hi, bw, ch);
				ih[0] += sc0 * ch[0], ih[1] += sc0 * ch[1];
				ih[2] += sc1 * ch[2], ih[3] += sc1 * ch[3];
			} else {
				uint32_t a[2] = { A0, A1 };
				mvkt_mma(a, bw, cl);
			}
			il[0] += sc0 * cl[0], il[1] += sc0 * cl[1];
			il[2] += sc1 * cl[2], il[3] += sc1 * cl[3];
		}
#pragma unroll
		for (int e = 0; e < 4; e++) {
			if (L == 8) {
				acc[2 * cp][e] = __fadd_rn(acc[2 * cp][e], __fmul_rn(dd[e], (float)il[e]));
				acc[2 * cp + 1][e] = __fadd_rn(acc[2 * cp + 1][e],
				    __fmul_rn(dd[e], (float)ih[e]));
			} else
				acc[cp][e] = __fadd_rn(acc[cp][e], __fmul_rn(dd[e], (float)il[e]));
		}
	}
}

/*
 * mvkt_step for IQ4_XS (the file comment; L = 8): slice half eta of block
 * bl, chain ci k_iq4's lane i = 4 eta + ci of its group, sub-block i of
 * rows gq and gq + 8: its 6-bit scale ls (scales_l nibble i, 2 bits of
 * scales_h) and word tg of its 16 quant bytes, by gpu_iq4x8 the A words of
 * run 0 (lo) and run 1 (hi); is = (ls - 32) (c0 + c1), then k_iq4's float
 * step acc += (d dy) (float)is.
 */
template <int NT>
__device__ __forceinline__ void
mvkt_stepx(const uint8_t *st, int nsl, int k, float (*acc)[4])
{
	typedef qkt_dim<QK_T_IQ4_XS, 8, NT> D;
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gq = lane >> 2, tg = lane & 3;
	int nt = w / D::CS, cs = w % D::CS, bl = cs / 2, eta = cs & 1;

	if (k * D::CS + cs >= nsl)	/* the warp's slice past the row's end */
		return;
	const uint8_t *w0 = st + gq * D::WST + bl * D::BS, *w1 = w0 + 8 * D::WST;
	const float *ds = (const float *)(st + D::OD);
	int j0 = 8 * nt + 2 * tg;
	const uint8_t *xb = st + D::OX + (8 * nt + gq) * D::XS + bl * 256 + 128 * eta + 4 * tg;
	float dy0 = ds[j0 * D::CB + bl], dy1 = ds[(j0 + 1) * D::CB + bl];
	/* the headers: d | scales_h << 16, scales_l */
	uint32_t h0 = *(const uint32_t *)w0, h1 = *(const uint32_t *)w1;
	uint32_t l0 = *(const uint32_t *)(w0 + 4), l1 = *(const uint32_t *)(w1 + 4);
	float d0 = __half2float(__ushort_as_half((unsigned short)(h0 & 0xFFFF)));
	float d1 = __half2float(__ushort_as_half((unsigned short)(h1 & 0xFFFF)));
	float dd[4] = { __fmul_rn(d0, dy0), __fmul_rn(d0, dy1), __fmul_rn(d1, dy0),
	    __fmul_rn(d1, dy1) };

#pragma unroll
	for (int ci = 0; ci < 4; ci++) {
		int i = 4 * eta + ci, lo[2], hi[2], c0[4], c1[4];
		int s0 = ((int)(l0 >> 4 * i & 0xFu) | (int)(h0 >> (16 + 2 * i) & 3u) << 4) - 32;
		int s1 = ((int)(l1 >> 4 * i & 0xFu) | (int)(h1 >> (16 + 2 * i) & 3u) << 4) - 32;
		gpu_iq4x8(*(const uint32_t *)(w0 + 8 + 16 * i + 4 * tg), &lo[0], &hi[0]);
		gpu_iq4x8(*(const uint32_t *)(w1 + 8 + 16 * i + 4 * tg), &lo[1], &hi[1]);
		uint32_t a0[2] = { (uint32_t)lo[0], (uint32_t)lo[1] };
		uint32_t a1[2] = { (uint32_t)hi[0], (uint32_t)hi[1] };
		mvkt_mma(a0, *(const uint32_t *)(xb + 32 * ci), c0);
		mvkt_mma(a1, *(const uint32_t *)(xb + 32 * ci + 16), c1);
		int is[4] = { s0 * (c0[0] + c1[0]), s0 * (c0[1] + c1[1]), s1 * (c0[2] + c1[2]),
		    s1 * (c0[3] + c1[3]) };
#pragma unroll
		for (int e = 0; e < 4; e++)
			acc[ci][e] = __fadd_rn(acc[ci][e], __fmul_rn(dd[e], (float)is[e]));
	}
}

/*
 * The chains' sums to shared memory red[c][row][MP + 1] (chain c: k_mvk's
 * lane c), then y[yrow(j)][r0 + rr] for the block's rows below rows and j
 * < m: the 32 chains added in k_mvk's butterfly's pairs (v[l] += v[l + o]
 * for l a multiple of 2 o, o = 1, 2, 4, 8, 16), times the per-tensor
 * scale; yrow(j) = perm[j] when perm is not NULL, else j.  After the
 * ring's last reads (the caller's barrier).
 */
template <int T, int L, int NT>
__device__ __forceinline__ void
mvkt_store(float *red, float (*acc)[4][4], int64_t r0, int64_t rows, int m,
    const int32_t *perm, float *y, const float *scale)
{
	typedef qkt_dim<T, L, NT> D;
	enum { LD = D::MP + 1 };
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gq = lane >> 2, tg = lane & 3;
	int nt = w / D::CS, cs = w % D::CS;

#pragma unroll
	for (int sl = 0; sl < NT; sl++)
#pragma unroll
		for (int ci = 0; ci < 4; ci++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int c = 4 * (cs + D::CS * sl) + ci;
				red[(c * QKT_R + gq + 8 * (e >> 1)) * LD + 8 * nt + 2 * tg + (e & 1)] =
				    acc[sl][ci][e];
			}
	__syncthreads();
	for (int it = threadIdx.x; it < QKT_R * m; it += QKT_THREADS) {
		int rr = it % QKT_R, j = it / QKT_R;
		float v[32];
		if (r0 + rr >= rows)
			continue;
#pragma unroll
		for (int c = 0; c < 32; c++)
			v[c] = red[(c * QKT_R + rr) * LD + j];
#pragma unroll
		for (int o = 1; o < 32; o <<= 1)
#pragma unroll
			for (int l = 0; l < 32; l += 2 * o)
				v[l] = __fadd_rn(v[l], v[l + o]);
		size_t yr = perm != NULL ? (size_t)perm[j] : (size_t)j;
		y[yr * rows + r0 + rr] = scale != NULL ? __fmul_rn(v[0], *scale) : v[0];
	}
}

/*
 * The row loop of a block: the ring, the chunks' steps (unrolled by NT:
 * slot k % NT a compile-time index), the store.  W: the weight (rows of
 * rb bytes, nb super-blocks), r0 the block's first row; q, dk, bs the m
 * input rows (the scratch's layout).
 */
template <int T, int L, int NT>
__device__ __forceinline__ void
mvkt_rows(uint8_t *sm, const uint8_t *__restrict__ W, size_t rb, int64_t r0, int64_t rows,
    int nb, const int8_t *__restrict__ q, const float *__restrict__ dk,
    const int16_t *__restrict__ bs, int m, const int32_t *perm, float *y, const float *scale)
{
	typedef qkt_dim<T, L, NT> D;
	static_assert((T != QK_T_IQ4_XS && T != QK_T_Q6P) || L == 8,
	    "k_mvkt: IQ4_XS and packed Q6_K at 8 lanes, their one form");
	int nch = (nb + D::CB - 1) / D::CB, nsl = nb * D::SL, gq = (threadIdx.x & 31) >> 2;
	/* Q6_K's offsets: its rows' addresses mod 4; packed, their first blocks' mod 4 */
	int ra0 = T == QK_T_Q6P ? (int)((r0 + gq) * nb & 3) :
	    (int)((uintptr_t)(W + (size_t)(r0 + gq) * rb) & 3);
	int ra8 = T == QK_T_Q6P ? (int)((r0 + gq + 8) * nb & 3) :
	    (int)((uintptr_t)(W + (size_t)(r0 + gq + 8) * rb) & 3);
	float acc[NT][4][4];

#pragma unroll
	for (int sl = 0; sl < NT; sl++)
#pragma unroll
		for (int ci = 0; ci < 4; ci++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[sl][ci][e] = 0.0f;
#pragma unroll
	for (int s = 0; s < QKT_NS - 1; s++) {
		if (s < nch)
			mvkt_copy<T, L, NT>(sm + s * D::STAGE, W, rb, r0, rows, nb, q, dk, bs, m, s);
		mvkt_commit();
	}
	for (int k0 = 0; k0 < nch; k0 += NT) {
#pragma unroll
		for (int sl = 0; sl < NT; sl++) {
			int k = k0 + sl;
			if (k >= nch)	/* block-uniform */
				break;
			mvkt_wait();
			__syncthreads();	/* chunk k landed; chunk k - 1's stage read by all */
			if (k + QKT_NS - 1 < nch)
				mvkt_copy<T, L, NT>(sm + (k + QKT_NS - 1) % QKT_NS * D::STAGE, W, rb, r0,
				    rows, nb, q, dk, bs, m, k + QKT_NS - 1);
			mvkt_commit();
			if constexpr (T == QK_T_Q6_K || T == QK_T_Q6P)
				mvkt_step6<T, L, NT>(sm + k % QKT_NS * D::STAGE, nsl, k, ra0, ra8,
				    acc[sl]);
			else if constexpr (T == QK_T_IQ4_XS)
				mvkt_stepx<NT>(sm + k % QKT_NS * D::STAGE, nsl, k, acc[sl]);
			else
				mvkt_step<T, L, NT>(sm + k % QKT_NS * D::STAGE, nsl, k, acc[sl]);
		}
	}
	mvkt_wait_all();
	__syncthreads();	/* the ring's last reads before red overwrites it */
	mvkt_store<T, L, NT>((float *)sm, acc, r0, rows, m, perm, y, scale);
}

/*
 * The experts grouped (gpu_impl.cuh's moe_group), by tensor cores: block
 * (x, t0 + blockIdx.y) takes rows 16 x .. of tile t = t0 + blockIdx.y's
 * expert e (first f, count n <= GPU_MOE_MT) and, when t is the first of a
 * pair (its index in the bucket even) and the bucket goes on in tile t +
 * 1, that tile's rows too (they follow on: a bucket's tiles but its last
 * hold GPU_MOE_MT), as k_moe_mv8t pairs them: a weight row is read once
 * for up to 32 input rows; a pair's second tile is left to its first's
 * block.  On the gathered Q8_K rows f .. f + n - 1 into y[perm[f + j]][rows]
 * (mvkt_rows with NT 1 for n <= 8, 2 for n <= 16, else 4): k_moe_mvkg's
 * bits (k_mvk's at L for each row, whatever m).  An empty tile writes
 * nothing; bucket n_exp (the ids outside [0, n_exp)) NaN rows.  nt: the
 * tiles there are (tile t + 1 read only below it).  mvkt_moe_block: a
 * block's work (sm its shared memory), after pdl_enter.
 */
template <int T, int L>
__device__ __forceinline__ void
mvkt_moe_block(uint8_t *sm, const uint8_t *__restrict__ W, size_t ebytes, int64_t rows, int nb,
    size_t rb, int n_exp, const int4 *__restrict__ tile, int t0, int nt,
    const int32_t *__restrict__ perm, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, float *y, const float *scale)
{
	static_assert(2 * GPU_MOE_MT <= QKT_MAX_M, "k_moe_mvkt: a pair of tiles in one block");
	int64_t r0 = (int64_t)blockIdx.x * QKT_R;
	int t = t0 + (int)blockIdx.y;
	int4 tl = tile[t];
	int e = tl.x, f = tl.y, n = tl.z;
	if (n == 0 || (tl.w & 1))	/* empty; a pair's second */
		return;
	if (n == GPU_MOE_MT && t + 1 < nt) {
		int4 t2 = tile[t + 1];
		if (t2.z > 0 && t2.x == e)
			n += t2.z;
	}
	if (e < 0 || e >= n_exp) {
		for (int it = threadIdx.x; it < QKT_R * n; it += QKT_THREADS)
			if (r0 + it % QKT_R < rows)
				y[(size_t)perm[f + it / QKT_R] * rows + r0 + it % QKT_R] =
				    __int_as_float(0x7FC00000);
		return;
	}
	const uint8_t *We = W + (size_t)e * ebytes;
	const int8_t *qf = q + (size_t)f * nb * 256;
	const float *df = dk + (size_t)f * nb;
	const int16_t *bf = bs + (size_t)f * nb * 16;
	if (n <= 8)	/* block-uniform */
		mvkt_rows<T, L, 1>(sm, We, rb, r0, rows, nb, qf, df, bf, n, perm + f, y, scale);
	else if (n <= 16)
		mvkt_rows<T, L, 2>(sm, We, rb, r0, rows, nb, qf, df, bf, n, perm + f, y, scale);
	else
		mvkt_rows<T, L, 4>(sm, We, rb, r0, rows, nb, qf, df, bf, n, perm + f, y, scale);
}

#ifndef MVKT_HOST
/* The dense kernel: one block per 16 rows of W, m <= 8 NT input rows. */
template <int T, int L, int NT>
__global__ void __launch_bounds__(QKT_THREADS, NT == 1 ? 2 : 1)
k_mvkt(const uint8_t *__restrict__ W, int64_t rows, int nb, size_t rb,
    const int8_t *__restrict__ q, const float *__restrict__ dk, const int16_t *__restrict__ bs,
    int m, float *y, const float *scale)
{
	extern __shared__ int4 qkt_sm[];

	pdl_enter();
	mvkt_rows<T, L, NT>((uint8_t *)qkt_sm, W, rb, (int64_t)blockIdx.x * QKT_R, rows, nb, q, dk,
	    bs, m, NULL, y, scale);
}

template <int T, int L, int NT>
static int
mvkt_run(struct gpu *g, const uint8_t *W, int64_t rows, int nb, size_t rb, const int8_t *q,
    const float *dk, const int16_t *bs, int m, float *y, const float *scale)
{
	int sh = qkt_dim<T, L, NT>::SMEM;

	if (gpu_smem(g, k_mvkt<T, L, NT>, sh, "matvec_q8k tc") != 0)
		return -1;
	gpu_launch(g, k_mvkt<T, L, NT>, (unsigned)((rows + QKT_R - 1) / QKT_R), QKT_THREADS,
	    (size_t)sh, W, rows, nb, rb, q, dk, bs, m, y, scale);
	GPU_LAUNCHED(g, "matvec_q8k tc");
	return 0;
}

/* k_mvkt for m <= QKT_MAX_M input rows (qk_products' checks done). */
template <int T, int L>
static int
mvkt_launch(struct gpu *g, const void *w, int64_t rows, int nb, const int8_t *q,
    const float *dk, const int16_t *bs, int m, float *y, const float *scale)
{
	const uint8_t *W = (const uint8_t *)w;
	size_t rb = (size_t)nb * mvk_bs<T>::v;

	if (m <= 8)
		return mvkt_run<T, L, 1>(g, W, rows, nb, rb, q, dk, bs, m, y, scale);
	if (m <= 16)
		return mvkt_run<T, L, 2>(g, W, rows, nb, rb, q, dk, bs, m, y, scale);
	return mvkt_run<T, L, 4>(g, W, rows, nb, rb, q, dk, bs, m, y, scale);
}

template <int T, int L>
__global__ void __launch_bounds__(QKT_THREADS, 1)
k_moe_mvkt(const uint8_t *__restrict__ W, size_t ebytes, int64_t rows, int nb, size_t rb,
    int n_exp, const int4 *__restrict__ tile, int t0, int nt, const int32_t *__restrict__ perm,
    const int8_t *__restrict__ q, const float *__restrict__ dk,
    const int16_t *__restrict__ bs, float *y, const float *scale)
{
	extern __shared__ int4 qkt_sm[];

	pdl_enter();	/* the tiles and the gathered rows are earlier kernels' */
	mvkt_moe_block<T, L>((uint8_t *)qkt_sm, W, ebytes, rows, nb, rb, n_exp, tile, t0, nt, perm,
	    q, dk, bs, y, scale);
}

/* k_moe_mvkt on the grouped rows (qk_moe_grouped's checks done). */
template <int T, int L>
static int
mvkt_moe_grouped(struct gpu *g, const void *w, int64_t rows, int nb, int n_exp,
    const struct moe_group *G, const int8_t *q, const float *dk, const int16_t *bs,
    float *y, const float *scale)
{
	size_t rb = (size_t)nb * mvk_bs<T>::v;
	int s1 = qkt_dim<T, L, 1>::SMEM, s2 = qkt_dim<T, L, 2>::SMEM, sh = s1 > s2 ? s1 : s2;

	if (qkt_dim<T, L, 4>::SMEM > sh)	/* (a pair of tiles) */
		sh = qkt_dim<T, L, 4>::SMEM;

	if (gpu_smem(g, k_moe_mvkt<T, L>, sh, "matvec_q8k tc") != 0)
		return -1;
	for (int t0 = 0; t0 < G->nt; t0 += 65535) {
		dim3 grid((unsigned)((rows + QKT_R - 1) / QKT_R), (unsigned)min(G->nt - t0, 65535));
		gpu_launch(g, k_moe_mvkt<T, L>, grid, QKT_THREADS, (size_t)sh, (const uint8_t *)w,
		    rb * (size_t)rows, rows, nb, rb, n_exp, G->tile, t0, G->nt, G->perm, q, dk, bs,
		    y, scale);
		GPU_LAUNCHED(g, "moe matvec_q8k grouped tc");
	}
	return 0;
}
#endif	/* MVKT_HOST */
