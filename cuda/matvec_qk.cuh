/*
 * k_mvk's device code (cuda/matvec_qk.cu): a super-block's bytes, the
 * pieces a lane reads and decodes, and mvk_row, one row's dot products
 * with the Q8_K input.  Device functions only: matvec_qk.cu includes it
 * after gpu_impl.cuh and its QK_T_* types, and tools/matvec-qkt-kern.cc
 * runs it on the CPU over a shim of its own (t/emu.bats), so no kernel
 * belongs here.
 */
#ifndef MEMRA_MATVEC_QK_CUH
#define MEMRA_MATVEC_QK_CUH

#include "q6p.cuh"

/* Bytes of one super-block of type T. */
template <int T>
struct mvk_bs {
	enum { v = T == QK_T_Q4_K ? 144 : T == QK_T_Q5_K ? 176 : T == QK_T_IQ4_XS ? 136 : 210 };
};

/*
 * The pieces of a super-block lane i of an L-lane group covers (P = 8 / L
 * of them, p = 0..P-1), as (c, h) for Q4_K/Q5_K (quant bytes 32 c + 16 h
 * .. + 15 = 16 i + 64 p: values 16 h .. 16 h + 15 of sub-blocks 2c and
 * 2c + 1; a group's load p reads 16 L contiguous bytes) and as (n, sub)
 * for Q6_K (values 128 n + 32 t + 8 sub .. + 7, t = 0..3).
 */
__device__ __forceinline__ int
pc_c(int i, int p)
{
	return (i >> 1) + 2 * p;
}

__device__ __forceinline__ int
pc_h(int i)
{
	return i & 1;
}

template <int L>
__device__ __forceinline__ int
p6_n(int i)
{
	return L == 8 ? i >> 2 : i >> 1;
}

template <int L>
__device__ __forceinline__ int
p6_sub(int i, int p)
{
	return L == 8 ? i & 3 : 2 * (i & 1) + p;
}

/* The raw words of one super-block a lane needs (all loaded before use,
 * so a group's two blocks are in flight together). */
template <int L>
struct mvk_w {
	enum { P = 8 / L };
	int4	h;		/* Q4_K/Q5_K: d, dmin, scales[12] */
	int4	qs[P];		/* Q4_K/Q5_K: quant bytes of piece p */
	int4	qh[P];		/* Q5_K: high bits of positions 16 h .. 16 h + 15 */
	uint32_t a[P][2], b[P][2], c[P][2];	/* Q6_K: ql, ql + 32, qh of piece p */
	uint32_t s[2];		/* Q6_K: scales 8 n .. 8 n + 7 */
	unsigned short d;	/* Q6_K: d */
};

/* 8 bytes at a 2-byte aligned p, from aligned 4-byte words. */
__device__ __forceinline__ void
ld8(const uint8_t *p, uint32_t *o)
{
	const uint32_t *w = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
	unsigned sh = ((uintptr_t)p & 2) * 8;
	uint32_t w0 = __ldg(w), w1 = __ldg(w + 1), w2 = sh ? __ldg(w + 2) : 0;

	o[0] = __funnelshift_r(w0, w1, sh);
	o[1] = sh ? __funnelshift_r(w1, w2, sh) : w1;
}

/* 8 bytes at byte off (even) of the shared words s, from the three aligned
 * words that hold them (the third read whatever the alignment: no branch,
 * and a stage's words go past every piece a lane reads): ld8 on a staged
 * copy (mvk_row_s). */
__device__ __forceinline__ void
ld8s(const uint32_t *s, int off, uint32_t *o)
{
	const uint32_t *w = s + (off >> 2);
	unsigned sh = (off & 2) * 8;
	uint32_t w0 = w[0], w1 = w[1], w2 = w[2];

	o[0] = __funnelshift_r(w0, w1, sh);
	o[1] = __funnelshift_r(w1, w2, sh);
}

/* A Q6_K block's parts: ql (128 bytes), qh (64), the 16 int8 scales, d
 * (f16), at these offsets of its 210 bytes. */
enum { Q6_QL = 0, Q6_QH = 128, Q6_SC = 192, Q6_D = 208 };

/* Where a Q6_K block's bytes are read: in place (the block at blk in
 * global memory, read-only loads), staged (the shared words s, the block
 * at byte off), or packed four blocks a group (q6_x4); get8<R>: 8 bytes at
 * o of part R, get2: d's 2 bytes. */
struct q6_in_place {
	const uint8_t *blk;

	template <int R>
	__device__ __forceinline__ void get8(int o, uint32_t *w) const { ld8(blk + (R + o), w); }
	__device__ __forceinline__ unsigned short
	get2(void) const { return __ldg((const unsigned short *)(blk + Q6_D)); }
};

struct q6_staged {
	const uint32_t *s;
	int off;

	template <int R>
	__device__ __forceinline__ void get8(int o, uint32_t *w) const { ld8s(s, off + R + o, w); }
	__device__ __forceinline__ unsigned short
	get2(void) const { return (unsigned short)(s[(off + Q6_D) >> 2] >> ((off + Q6_D) & 2) * 8); }
};

/*
 * Q6_K packed four blocks a group (gpu_q6k_pack4, q6p.cuh): block k of the
 * group at g.  The same bytes, every piece a lane reads 8-byte aligned: one
 * load where in place a 2-byte aligned block takes three words a piece.
 */
struct q6_x4 {
	const uint8_t *g;
	int k;

	template <int R>
	__device__ __forceinline__ void
	get8(int o, uint32_t *w) const
	{
		uint2 v = __ldg((const uint2 *)(g + q6p_body(k) + R + o));
		w[0] = v.x, w[1] = v.y;
	}
	__device__ __forceinline__ unsigned short
	get2(void) const { return __ldg((const unsigned short *)(g + q6p_d(k))); }
};

/* Lane i's words of a Q6_K super-block, read through src. */
template <int L, class S>
__device__ __forceinline__ void
q6_load(S src, int i, struct mvk_w<L> *w)
{
#pragma unroll
	for (int p = 0; p < 8 / L; p++) {
		int n = p6_n<L>(i), sub = p6_sub<L>(i, p);
		src.template get8<Q6_QL>(64 * n + 8 * sub, w->a[p]);
		src.template get8<Q6_QL>(64 * n + 32 + 8 * sub, w->b[p]);
		src.template get8<Q6_QH>(32 * n + 8 * sub, w->c[p]);
	}
	src.template get8<Q6_SC>(8 * p6_n<L>(i), w->s);
	w->d = src.get2();
}

template <int T, int L>
__device__ __forceinline__ void
mvk_load(const uint8_t *blk, int i, struct mvk_w<L> *w)
{
	if constexpr (T == QK_T_Q6_K)
		q6_load<L>(q6_in_place{ blk }, i, w);
	else {
#pragma unroll
		for (int p = 0; p < 8 / L; p++) {
			int c = pc_c(i, p), h = pc_h(i);
			w->qs[p] = __ldg((const int4 *)(blk + (T == QK_T_Q5_K ? 48 : 16) + 32 * c +
			    16 * h));
			if (T == QK_T_Q5_K)
				w->qh[p] = __ldg((const int4 *)(blk + 16 + 16 * h));
		}
		w->h = __ldg((const int4 *)blk);
	}
}

/* Four 6-bit values u (bytes 0..63) less 32 each, as int8: u + 96 stays
 * below 256 (no carry into the next byte) and is 128 + (u - 32); flipping
 * bit 7 leaves u - 32 in two's complement.  Two instructions (__vsub4:
 * three). */
__device__ __forceinline__ int
q6_sub32(uint32_t u)
{
	return (int)((u + 0x60606060u) ^ 0x80808080u);
}

/* Q6_K: the 32 values (as 0..63 - 32) of piece p, t = 0..3 by 2 words. */
template <int L>
__device__ __forceinline__ void
q6_vals(const struct mvk_w<L> *w, int p, int v[4][2])
{
#pragma unroll
	for (int k = 0; k < 2; k++) {
		uint32_t a = w->a[p][k], bq = w->b[p][k], h = w->c[p][k];
		v[0][k] = q6_sub32((a & 0x0F0F0F0Fu) | (h & 0x03030303u) << 4);
		v[1][k] = q6_sub32((bq & 0x0F0F0F0Fu) | (h >> 2 & 0x03030303u) << 4);
		v[2][k] = q6_sub32((a >> 4 & 0x0F0F0F0Fu) | (h >> 4 & 0x03030303u) << 4);
		v[3][k] = q6_sub32((bq >> 4 & 0x0F0F0F0Fu) | (h >> 6 & 0x03030303u) << 4);
	}
}

/*
 * acc[j] += the float term of lane i's part of super-block b (words w)
 * against input row j; on = 0 (a block past the row's end) adds nothing.
 */
template <int T, int M, int L>
__device__ __forceinline__ void
mvk_block(const struct mvk_w<L> *w, int on, int64_t b, int i, int64_t ne0,
    const int8_t *__restrict__ q, const float *__restrict__ dk,
    const int16_t *__restrict__ bs, int m, float *acc)
{
	enum { P = 8 / L };

	if (T == QK_T_Q6_K) {
		/* scales 8n + (sub >> 1) + 2t: bytes (sub >> 1) + 2t of the 8 at 192 + 8n
		 * (sub >> 1 is the same for every piece of a lane) */
		int hs = 8 * (p6_sub<L>(i, 0) >> 1), sc[4], v[P][4][2];
		sc[0] = (int)(int8_t)(w->s[0] >> hs);
		sc[1] = (int)(int8_t)(w->s[0] >> (hs + 16));
		sc[2] = (int)(int8_t)(w->s[1] >> hs);
		sc[3] = (int)(int8_t)(w->s[1] >> (hs + 16));
#pragma unroll
		for (int p = 0; p < P; p++)
			q6_vals<L>(w, p, v[p]);
		float d = __half2float(__ushort_as_half(w->d));
#pragma unroll
		for (int j = 0; j < M; j++) {
			if (j >= m)
				break;
			int is = 0;
#pragma unroll
			for (int p = 0; p < P; p++) {
				const int8_t *xq = q + (size_t)j * ne0 + b * 256 + 128 * p6_n<L>(i) +
				    8 * p6_sub<L>(i, p);
#pragma unroll
				for (int t = 0; t < 4; t++) {
					int2 y = on ? *(const int2 *)(xq + 32 * t) : make_int2(0, 0);
					is += sc[t] * __dp4a(v[p][t][1], y.y, __dp4a(v[p][t][0], y.x, 0));
				}
			}
			if (on) {
				float dy = dk[(size_t)j * (ne0 / 256) + b];
				acc[j] = __fadd_rn(acc[j], __fmul_rn(__fmul_rn(d, dy), (float)is));
			}
		}
	} else {
		uint32_t u0 = (uint32_t)w->h.y, u1 = (uint32_t)w->h.z, u2 = (uint32_t)w->h.w;
		int h = pc_h(i), sc0[P], sc1[P], m0[P], m1[P], lo[P][4], hi[P][4];
#pragma unroll
		for (int p = 0; p < P; p++) {
			/* get_scale_min_k4 of sub-blocks 2c, 2c + 1 (lib/quant_impl.h
			 * qi_scale_min_k4_all) */
			int c = pc_c(i, p), sh = 16 * (c & 1);
			uint32_t vs = c < 2 ? u0 & 0x3F3F3F3Fu :
			    (u2 & 0x0F0F0F0Fu) | (u0 >> 6 & 0x03030303u) << 4;
			uint32_t vm = c < 2 ? u1 & 0x3F3F3F3Fu :
			    (u2 >> 4 & 0x0F0F0F0Fu) | (u1 >> 6 & 0x03030303u) << 4;
			sc0[p] = (int)(vs >> sh & 0xFF), sc1[p] = (int)(vs >> (sh + 8) & 0xFF);
			m0[p] = (int)(vm >> sh & 0xFF), m1[p] = (int)(vm >> (sh + 8) & 0xFF);
			uint32_t qw[4] = { (uint32_t)w->qs[p].x, (uint32_t)w->qs[p].y,
			    (uint32_t)w->qs[p].z, (uint32_t)w->qs[p].w };
			uint32_t hw[4] = { (uint32_t)w->qh[p].x, (uint32_t)w->qh[p].y,
			    (uint32_t)w->qh[p].z, (uint32_t)w->qh[p].w };
#pragma unroll
			for (int k = 0; k < 4; k++) {
				uint32_t l = qw[k] & 0x0F0F0F0Fu, u = qw[k] >> 4 & 0x0F0F0F0Fu;
				if (T == QK_T_Q5_K) {
					l |= (hw[k] >> (2 * c) & 0x01010101u) << 4;
					u |= (hw[k] >> (2 * c + 1) & 0x01010101u) << 4;
				}
				lo[p][k] = (int)l, hi[p][k] = (int)u;
			}
		}
		uint32_t dm = (uint32_t)w->h.x;
		float d = __half2float(__ushort_as_half((unsigned short)(dm & 0xFFFF)));
		float dmin = __half2float(__ushort_as_half((unsigned short)(dm >> 16)));
#pragma unroll
		for (int j = 0; j < M; j++) {
			if (j >= m)
				break;
			int is = 0, ms = 0;
			const int16_t *bj = bs + (size_t)j * (ne0 / 16) + b * 16 + h;
#pragma unroll
			for (int p = 0; p < P; p++) {
				int c = pc_c(i, p);
				const int8_t *xq = q + (size_t)j * ne0 + b * 256 + 64 * c + 16 * h;
				int4 ya = on ? *(const int4 *)xq : make_int4(0, 0, 0, 0);
				int4 yb = on ? *(const int4 *)(xq + 32) : make_int4(0, 0, 0, 0);
				int sa = __dp4a(lo[p][0], ya.x, 0), sb = __dp4a(hi[p][0], yb.x, 0);
				sa = __dp4a(lo[p][1], ya.y, sa), sb = __dp4a(hi[p][1], yb.y, sb);
				sa = __dp4a(lo[p][2], ya.z, sa), sb = __dp4a(hi[p][2], yb.z, sb);
				sa = __dp4a(lo[p][3], ya.w, sa), sb = __dp4a(hi[p][3], yb.w, sb);
				is += sa * sc0[p] + sb * sc1[p];
				if (on)
					ms += m0[p] * (int)bj[4 * c] + m1[p] * (int)bj[4 * c + 2];
			}
			if (on) {
				float dy = dk[(size_t)j * (ne0 / 256) + b];
				acc[j] = __fadd_rn(acc[j], __fsub_rn(__fmul_rn(__fmul_rn(d, dy), (float)is),
				    __fmul_rn(__fmul_rn(dmin, dy), (float)ms)));
			}
		}
	}
}

/* One iteration of mvk_row from block b0: FULL, every group's D blocks in
 * the row (no row-end tests); else the tests, a block past the end
 * adding nothing. */
template <int T, int M, int L, int D, int FULL>
__device__ __forceinline__ void
mvk_step(const uint8_t *__restrict__ wr, int b0, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, int m, int lane, float *acc)
{
	enum { BS = mvk_bs<T>::v, NG = 32 / L };
	struct mvk_w<L> w[D];
	int b = b0 + lane / L, i = lane % L;
	int64_t ne0 = (int64_t)nb * 256;

#pragma unroll
	for (int k = 0; k < D; k++) {
		if (FULL || b + k * NG < nb)
			mvk_load<T, L>(wr + (size_t)(b + k * NG) * BS, i, &w[k]);
		else
			w[k] = mvk_w<L>();
	}
#pragma unroll
	for (int k = 0; k < D; k++)
		if (FULL || k == 0 || b0 + k * NG < nb)	/* warp-uniform */
			mvk_block<T, M, L>(&w[k], FULL || b + k * NG < nb, b + k * NG, i, ne0, q, dk,
			    bs, m, acc);
}

/*
 * One warp per weight row (the file comment), NG = 32 / L groups; group g
 * takes blocks g, g + NG, ..., D at a time (all D loaded first: D = 2,
 * k_mvk's default, or 4, gpu_tune_qk_depth), adding them in block order
 * whatever D is, so D changes how many loads are in flight, never a bit;
 * the lanes' sums are added by a butterfly over the warp (xor 1, 2, 4, 8,
 * 16).  mvk_row: that loop, each lane's part of the sums of the weight row
 * at wr with the m (<= M) quantized input rows into acc[], for k_mvk (D 2
 * and 4) and the experts' k_moe_mvk alike, so an expert's one-row product
 * is k_mvk<T, 1, L>'s bit for bit (kernel-check's "be moe_* =1row").  The
 * iterations where every group has its D blocks run without the row-end
 * tests (no zeroed words, no predicated loads: 15-30% fewer instructions
 * a block-lane by tools/mv8-sass.py), the last with them; the same
 * operations in the same order either way.
 */
template <int T, int M, int L, int D = 2>
__device__ __forceinline__ void
mvk_row(const uint8_t *__restrict__ wr, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, int m, int lane, float *acc)
{
	enum { NG = 32 / L };

	static_assert(D == 2 || D == 4, "mvk_row: 2 or 4 blocks in flight a group");
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	int b0 = 0;
	for (; b0 + D * NG <= nb; b0 += D * NG)	/* every group's D blocks in the row */
		mvk_step<T, M, L, D, 1>(wr, b0, nb, q, dk, bs, m, lane, acc);
	if (b0 < nb)	/* the row's last blocks (warp-uniform) */
		mvk_step<T, M, L, D, 0>(wr, b0, nb, q, dk, bs, m, lane, acc);
}

/* One iteration of mvk_row_x4 from block b0, its groups at G and G + gs
 * (block kk of each): FULL as mvk_step's. */
template <int M, int L, int FULL>
__device__ __forceinline__ void
mvk_step_x4(const uint8_t *G, int gs, int kk, int b0, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, int m, int lane, float *acc)
{
	enum { NG = 32 / L };
	struct mvk_w<L> w0, w1;
	int b = b0 + lane / L, i = lane % L, on0 = FULL || b < nb, on1 = FULL || b + NG < nb;
	int64_t ne0 = (int64_t)nb * 256;

	if (on0)
		q6_load<L>(q6_x4{ G, kk }, i, &w0);
	else
		w0 = mvk_w<L>();
	if (on1)
		q6_load<L>(q6_x4{ G + gs, kk }, i, &w1);
	else
		w1 = mvk_w<L>();
	mvk_block<QK_T_Q6_K, M, L>(&w0, on0, b, i, ne0, q, dk, bs, m, acc);
	if (FULL || b0 + NG < nb)	/* warp-uniform */
		mvk_block<QK_T_Q6_K, M, L>(&w1, on1, b + NG, i, ne0, q, dk, bs, m, acc);
}

/*
 * mvk_row_x4 (k_mvk's form for GPU_T_Q6K_PACKED, and the experts'):
 * k_mvk<QK_T_Q6_K, M, L, 2>'s loop, its operations in its order (so its
 * bits), on a weight W packed four blocks a group (q6_x4) whose row starts
 * at block rb0 of W (r nb).  A copy of that loop, not a shared one: with a
 * loader argument, k_mvk's loop moved 28 of matvec_qk.o's measured kernels
 * (tools/sass-same.py), and mvk_row's (its array of D blocks) moved the
 * experts' kernels and took this form at M = 4 from 252 to 334
 * instructions a block-lane (tools/mv8-sass.py).  The groups by a pointer
 * stepped along the row (a lane's blocks keep their place in a group),
 * not each block's address from its index; the iterations where every
 * group has both its blocks without the row-end tests, the last with them.
 */
template <int M, int L>
__device__ __forceinline__ void
mvk_row_x4(const uint8_t *__restrict__ W, int64_t rb0, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, int m, int lane, float *acc)
{
	enum { NG = 32 / L };
	int g = lane / L;

#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	/* the lane's blocks rb0 + g + 2 NG j (and + NG): one place in a group
	 * (NG a multiple of 4), the group GS bytes on for + NG */
	enum { GS = NG / 4 * Q6P_GROUP };
	const uint8_t *G = W + q6p_group(rb0 + g);
	int kk = (int)((rb0 + g) & 3), b0 = 0;
	for (; b0 + 2 * NG <= nb; b0 += 2 * NG, G += 2 * GS)	/* every group's two blocks */
		mvk_step_x4<M, L, 1>(G, GS, kk, b0, nb, q, dk, bs, m, lane, acc);
	if (b0 < nb)	/* the row's last blocks (warp-uniform) */
		mvk_step_x4<M, L, 0>(G, GS, kk, b0, nb, q, dk, bs, m, lane, acc);
}

/*
 * mvk_row_s (k_mvk's MVK_STAGED form): k_mvk's sums for Q6_K at 8 lanes a
 * block, in k_mvk's order (group g adds blocks g, g + NG, g + 2 NG, ... one
 * by one, so the bits are the default's), its words read from a copy in
 * shared memory.  k_mvk's lane
 * takes its 26 bytes of a block in narrow loads, each of a warp's touching
 * eight lines; here the warp copies a chunk of CH = 2 NG blocks of its row
 * (1680 bytes) at a time into one of NS stages of its words, 4-byte
 * cp.async copies from the aligned word holding the chunk's first byte (a
 * copy of the warp reads 128 contiguous bytes; none past the row's end, and
 * the word before a chunk is the row's or the row before's: the weight
 * starts at a word), NS - 1 chunks ahead of the one it adds.
 */
enum { MVK_NS = 3 };

template <int L>
struct mvk_stage {
	enum { NG = 32 / L, CH = 2 * NG, W = (CH * 210 + 3 + 3) / 4 };	/* words a stage */
};

#ifndef MVKT_HOST
__device__ __forceinline__ void
mvk_commit(void)
{
	asm volatile("cp.async.commit_group;");
}

/* All but the newest N committed groups of this lane's copies landed. */
template <int N>
__device__ __forceinline__ void
mvk_wait(void)
{
	asm volatile("cp.async.wait_group %0;" : : "n"(N) : "memory");
}

/* A stage's address in the shared window (converted once, not a copy at a
 * time), k words on, and a 4-byte cp.async of n bytes into it. */
typedef unsigned mvk_sptr;

__device__ __forceinline__ mvk_sptr
mvk_sp(uint32_t *p, int k)
{
	return (unsigned)__cvta_generic_to_shared(p) + 4 * k;
}

__device__ __forceinline__ void
mvk_cp4(mvk_sptr d, int k, const void *src, int n)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
	    : : "r"(d + 4 * k), "l"(src), "r"(n));
}
#endif	/* (tools/matvec-qkt-kern.cc: the host's) */

/* Start copying chunk c of the Q6_K row wr (nb blocks) into the stage at
 * d: bytes 4 k .. 4 k + 3 of the words from the one holding the chunk's
 * first byte (k = lane, lane + 32, ...; the last word's own bytes only), so
 * that byte lands at byte (its address & 3) of the stage. */
template <int L>
__device__ __forceinline__ void
mvk_copy_s(mvk_sptr d, const uint8_t *__restrict__ wr, int nb, int c, int lane)
{
	enum { CH = mvk_stage<L>::CH, W = mvk_stage<L>::W };
	const uint8_t *src = wr + (size_t)c * CH * 210;
	int o = (int)((uintptr_t)src & 3), n = o + min((int)CH, nb - c * CH) * 210;
	int nw = n >> 2, tail = n & 3;
	const uint8_t *s0 = src - o + 4 * lane;

#pragma unroll
	for (int u = 0; u < (W + 31) / 32; u++)
		if (lane + 32 * u < nw)
			mvk_cp4(d, lane + 32 * u, s0 + 128 * u, 4);
	if (tail != 0 && lane == (nw & 31))
		mvk_cp4(d, nw, src - o + 4 * nw, tail);
}

/* Each lane's part of the sums of the Q6_K row at wr with the m (<= M)
 * input rows into acc[] (k_mvk<QK_T_Q6_K, M, L, 2>'s), through buf: the
 * warp's NS stages of mvk_stage<L>::W words. */
template <int M, int L, int NS>
__device__ __forceinline__ void
mvk_row_s(uint32_t *buf, const uint8_t *__restrict__ wr, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dk, const int16_t *__restrict__ bs, int m, int lane, float *acc)
{
	enum { NG = mvk_stage<L>::NG, CH = mvk_stage<L>::CH, W = mvk_stage<L>::W };
	int g = lane / L, i = lane % L, nch = (nb + CH - 1) / CH;
	int64_t ne0 = (int64_t)nb * 256;

	static_assert(NS >= 2, "mvk_row_s: a stage to add and one to fill");
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
#pragma unroll
	for (int c = 0; c < NS - 1; c++) {
		if (c < nch)
			mvk_copy_s<L>(mvk_sp(buf, c * W), wr, nb, c, lane);
		mvk_commit();	/* (empty groups too: the count stays the same) */
	}
	for (int c = 0; c < nch; c++) {
		__syncwarp();	/* chunk c - 1's stage read by every lane: refilled below */
		if (c + NS - 1 < nch)
			mvk_copy_s<L>(mvk_sp(buf, (c + NS - 1) % NS * W), wr, nb, c + NS - 1, lane);
		mvk_commit();
		mvk_wait<NS - 1>();	/* this lane's copies of chunk c landed */
		__syncwarp();		/* and every lane's */
		const uint32_t *st = buf + c % NS * W;
		int off = (int)((uintptr_t)(wr + (size_t)c * CH * 210) & 3) + g * 210;
		int b = c * CH + g;
		/* (shared memory's latency is short: a block's words are read just
		 * before they are used, not both blocks' first) */
#pragma unroll
		for (int h = 0; h < 2; h++) {
			struct mvk_w<L> w;
			int on = b + h * NG < nb;
			if (h == 1 && c * CH + NG >= nb)	/* warp-uniform */
				break;
			if (on)
				q6_load<L>(q6_staged{ st, off + h * NG * 210 }, i, &w);
			else
				w = mvk_w<L>();
			mvk_block<QK_T_Q6_K, M, L>(&w, on, b + h * NG, i, ne0, q, dk, bs, m, acc);
		}
	}
}

#endif
