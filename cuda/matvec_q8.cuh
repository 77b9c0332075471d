/*
 * matvec_q8.cuh: k_mv8's device code for a weight row (mv8_row) and what it
 * calls for Q8_0, Q4_0, Q5_0, Q4_1 and Q5_1 blocks (mv8_block, mv8_half,
 * mv8_hw and their decodes): the text cuda/matvec_q8.cu compiles for the
 * GPU and tools/matvec-q8-kern.cc runs lane by lane on the CPU against
 * tools/matvec-q8-emu.c's model.  The includer provides the types
 * (Q8_T_*), mv8_nv (NVFP4's sub-blocks, declared) and, on the host, the
 * CUDA intrinsics used here.
 */

/* Bytes of one 32-value weight block of type t (Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, IQ4_NL). */
__host__ __device__ constexpr int
mv8_block_bytes(int t)
{
	return t == Q8_T_Q8_0 ? 34 : t == Q8_T_Q5_1 ? 24 : t == Q8_T_Q5_0 ? 22 :
	    t == Q8_T_Q4_0 || t == Q8_T_IQ4_NL ? 18 : 20;
}

template <int T>
struct mv8_bs {
	enum { v = mv8_block_bytes(T) };
};

/* 1.5 * 2^23 as float bits: an int t (|t| < 2^22) added to them is the
 * float 1.5 * 2^23 + t exactly, so t as a float is that minus 1.5 * 2^23
 * (mv8_i2f): a float add instead of an int -> float conversion, which
 * runs at a quarter of the rate or less on the H200. */
#define MV8_MAGIC 0x4B400000u

/* The dp4a sum t as a float, t accumulated from MV8_MAGIC (exact). */
__device__ __forceinline__ float
mv8_i2f(int t)
{
	return __fadd_rn(__int_as_float(t), -12582912.0f);
}

/* 1.5 * 2^19 as float bits, whose last place is 2^-4: t (|t| < 2^22)
 * added to them is 1.5 * 2^19 + t / 16 exactly (mv8_i2f4), so a sum of
 * sixteenfold values (Q4_0's, mv8_hw) comes out as the plain sum. */
#define MV8_MAGIC4 0x49400000u

/* The dp4a sum t as a float over 16, t accumulated from MV8_MAGIC4 (exact). */
__device__ __forceinline__ float
mv8_i2f4(int t)
{
	return __fadd_rn(__int_as_float(t), -786432.0f);
}

/* 1.5 * 2^20 as float bits, whose last place is 2^-3: Q5_0's eightfold
 * values' sums (mv8_hw) over 8, as MV8_MAGIC4 does for Q4_0. */
#define MV8_MAGIC5 0x49C00000u

/* The dp4a sum t as a float over 8, t accumulated from MV8_MAGIC5 (exact). */
__device__ __forceinline__ float
mv8_i2f5(int t)
{
	return __fadd_rn(__int_as_float(t), -1572864.0f);
}

/* Q4_0's and Q5_0's words in tab (mv8_half, mv8_hw): the nibble mask in
 * x (an and with it and another op with an immediate are one
 * instruction, two immediates two; Q4_0 0xF0F0F0F0, Q5_0 0x78787878), the
 * sums' start in w (MV8_MAGIC4, MV8_MAGIC5); held in registers as
 * mv8_tab's, by nb >> 31 (0: nb a block count) where m may be a constant
 * (the experts' kernels; ptxas sees through a mov). */
template <int T>
__device__ __forceinline__ uint4
mv8_tab4(uint4 tab, int nb)
{
	unsigned z = (unsigned)nb >> 31;

	if (T == Q8_T_Q5_0)
		return make_uint4(0x78787878u | z, tab.y, tab.z, MV8_MAGIC5 | z);
	return make_uint4(0xF0F0F0F0u | z, tab.y, tab.z, MV8_MAGIC4 | z);
}

/* The dp4a sum of a block's 32 int8 weights (wq, 4 a word) with the 32
 * int8 values at xq (16-byte aligned), from s0 (mv8_block's rows). */
__device__ __forceinline__ int
mv8_dot32(const int *wq, const int8_t *xq, int s0)
{
	const int4 *x4 = (const int4 *)xq;
	int4 a = x4[0], c = x4[1];
	int s = __dp4a(wq[0], a.x, s0);

	s = __dp4a(wq[1], a.y, s), s = __dp4a(wq[2], a.z, s);
	s = __dp4a(wq[3], a.w, s), s = __dp4a(wq[4], c.x, s);
	s = __dp4a(wq[5], c.y, s), s = __dp4a(wq[6], c.z, s);
	return __dp4a(wq[7], c.w, s);
}

/*
 * acc[j] += weight block b (bytes at blk) . block b of input row j, j <
 * M (the kernels are instances for every m = M: no test per row; a row's
 * code is the same in each).  tab: mv8_tab's words.  Q8_0, Q4_1, Q5_1
 * (NVFP4: mv8_nv).
 * The weight is decoded once for the M rows; a row then costs its x loads
 * (whole blocks as int4), the dp4a and per 32 values two or three float
 * operations: Q8_0 acc = fma(isum, dw * dx, acc) (dw * dx exact: two fp16
 * values); Q4_1/Q5_1 acc = fma(mw, sx, fma(isum, dw * dx, acc)).  The
 * integer sums start at MV8_MAGIC and become floats by mv8_i2f.
 */
template <int T, int M>
__device__ __forceinline__ void
mv8_block(const uint8_t *blk8, int b, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, const float *__restrict__ sx, float *acc, uint4 tab)
{
	static_assert(T != Q8_T_Q4_0 && T != Q8_T_Q5_0, "Q4_0, Q5_0: two lanes a block");
	if (T == Q8_T_Q8_0) {
		/* d (fp16), qs[32]; 2-byte aligned: 8 words from the word that
		 * holds d (from 2 bytes before the block when it is not 4-byte
		 * aligned: the same aligned word) joined by funnel shifts (16 bits
		 * aligned, 32 = the high word not), the last 4 bytes as two
		 * halves: 10 loads (17 halfword loads before) */
		unsigned o = (unsigned)((uintptr_t)blk8 & 2), sh = 16 + 8 * o;
		const uint32_t *p = (const uint32_t *)(blk8 - o);
		const uint16_t *h = (const uint16_t *)blk8;
		uint32_t P[8];
#pragma unroll
		for (int i = 0; i < 8; i++)
			P[i] = p[i];
		float dw = __half2float(__ushort_as_half((unsigned short)(P[0] >> (8 * o))));
		int wq[8];
#pragma unroll
		for (int i = 0; i < 7; i++)
			wq[i] = (int)__funnelshift_rc(P[i], P[i + 1], sh);
		wq[7] = (int)((unsigned)h[15] | (unsigned)h[16] << 16);
#pragma unroll
		for (int j = 0; j < M; j++) {
			size_t xi = (size_t)j * nb + b;
			int s = mv8_dot32(wq, q + xi * 32, (int)tab.w);
			acc[j] = __fmaf_rn(mv8_i2f(s), __fmul_rn(dw, dx[xi]), acc[j]);
		}
	} else {
		/* d, m (fp16), [qh (4 bytes) for Q5_1], qs[16]: values 0..15 or 0..31 */
		const uint32_t *blk = (const uint32_t *)blk8;
		uint32_t dm = blk[0], qh = T == Q8_T_Q5_1 ? blk[1] : 0;
		const uint32_t *qs = blk + (T == Q8_T_Q5_1 ? 2 : 1);
		float dw = __half2float(__ushort_as_half((unsigned short)(dm & 0xFFFF)));
		float mw = __half2float(__ushort_as_half((unsigned short)(dm >> 16)));
		int wq[8];
#pragma unroll
		for (int i = 0; i < 4; i++) {
			uint32_t v = qs[i], lo = v & 0x0F0F0F0Fu, hi = (v >> 4) & 0x0F0F0F0Fu;
			if (T == Q8_T_Q5_1) {	/* bit j of qh -> value j, bit j+16 -> value j+16 */
				/* 4 bits to bit 4 of each byte: the multiply's partial
				 * products land on distinct bits (no carries) */
				lo |= ((qh >> (4 * i) & 0xF) * 0x02040810u) & 0x10101010u;
				hi |= ((qh >> (4 * i + 16) & 0xF) * 0x02040810u) & 0x10101010u;
			}
			wq[i] = (int)lo;
			wq[4 + i] = (int)hi;
		}
#pragma unroll
		for (int j = 0; j < M; j++) {
			size_t xi = (size_t)j * nb + b;
			int s = mv8_dot32(wq, q + xi * 32, (int)tab.w);
			acc[j] = __fmaf_rn(mw, sx[xi],
			    __fmaf_rn(mv8_i2f(s), __fmul_rn(dw, dx[xi]), acc[j]));
		}
	}
}

/*
 * The 16 bytes at p (2-byte aligned, o = p's offset in its aligned word:
 * the caller's, the same for each block of a lane) as 4 words: 4 aligned
 * words from the one holding p's first byte and the halfword of its last
 * two, joined by funnel shifts (0 or 16 bits).
 */
__device__ __forceinline__ void
mv8_ld16(const uint8_t *p8, unsigned o, uint32_t *w)
{
	const uint32_t *p = (const uint32_t *)(p8 - o);
	uint32_t P[4], e = ((const uint16_t *)p8)[7];

#pragma unroll
	for (int i = 0; i < 4; i++)
		P[i] = p[i];
#pragma unroll
	for (int i = 0; i < 4; i++)
		w[i] = __funnelshift_r(P[i], i < 3 ? P[i + 1] : e, 8 * o);
}

/*
 * Byte biases that make 4-bit (Q4_0: 0x78) or 5-bit (Q5_0: 0x70) values v
 * of a word the int8 values v - 8 or v - 16: (v + bias) ^ 0x80 a byte (v +
 * bias < 256: no carry between bytes).
 */
#define MV8_B4 0x78787878u
#define MV8_B5 0x70707070u

/*
 * The int8 values of 4 bytes of a Q4_0 or Q5_0 block's qs (word w), half h:
 * nibble h of each byte, Q5_0 with bit k of hb (its qh bits of those
 * values) at bit 4 of byte k (the multiply's partial products land on
 * distinct bits: no carries, as for Q5_1), less 8 or 16.  k_mv8t's
 * fragments (mvt_step) decode by it; mv8_hw by mv8_q4x16 and mv8_q5x8,
 * whose sums are these values' (sixteenfold and eightfold, scaled back).
 */
template <int T>
__device__ __forceinline__ uint32_t
mv8_q45(uint32_t w, int h, uint32_t hb)
{
	uint32_t v = (w >> (4 * h)) & 0x0F0F0F0Fu;

	if (T == Q8_T_Q5_0)
		v |= ((hb & 0xF) * 0x02040810u) & 0x10101010u;
	return (v + (T == Q8_T_Q5_0 ? MV8_B5 : MV8_B4)) ^ 0x80808080u;
}

/*
 * Sixteen times the int8 values (v - 8) of 4 bytes w of a Q4_0 block's qs,
 * their nibbles already at bits 4..7 of each byte (what is below is
 * masked off by mk, 0xF0F0F0F0): 16 v as a byte is v - 8's sixteenfold
 * with its sign bit flipped (16 v - 128 = 16 (v - 8)), one and-xor.
 */
__device__ __forceinline__ uint32_t
mv8_q4x16(uint32_t w, uint32_t mk)
{
	return (w & mk) ^ 0x80808080u;
}

/*
 * Eight times the int8 values (v - 16) of 4 values of a Q5_0 block: their
 * nibbles at bits 3..6 of each byte of w (what else is there masked off by
 * mk, 0x78787878), their qh bits flipped at bit 7 of the bytes of s (what
 * else is there dropped): 8 v as a byte is v - 16's eightfold with its
 * sign bit flipped (8 v - 128 = 8 (v - 16)).  Two instructions.
 */
__device__ __forceinline__ uint32_t
mv8_q5x8(uint32_t w, uint32_t s, uint32_t mk)
{
	return (w & mk) | (s & 0x80808080u);
}

/*
 * The int8 weights of half h (values 16 h .. 16 h + 15) of the Q8_0, Q4_0
 * or Q5_0 block at blk8 (2-byte aligned; al its offset in its aligned
 * word, 0 or 2) as 4 words, value 16 h + 4 i + k in byte k of w[i], and
 * *dw its scale.  Q8_0: the half's 16 bytes by mv8_ld16 (they start at
 * al ^ 2 in a word).  Q5_0: nibble h of qs[0..15] | bit 16 h + j of qh at
 * bit 4, - 16 (qh's halfword h alone), eightfold (mv8_q5x8 with mk;
 * summed from MV8_MAGIC5, the sums come out as v - 16's exactly), qs by
 * five aligned words and one funnel shift a word that also puts the
 * nibbles at bits 3..6 (the window and the shift as the code says: up to
 * 2 bytes past the block read), the qh bits by one multiply a word: 5
 * instructions a word where mv8_ld16 and mv8_q45 take 9.  Q4_0: nibble h of
 * qs[0..15] - 8, sixteenfold (mv8_q4x16 with mk, mv8_tab4's x; mv8_half
 * sums them from MV8_MAGIC4, so the sums come out as v - 8's exactly),
 * the block's 18 bytes by five aligned words from the one holding its
 * first (2 bytes before the block or after it read too: inside that word,
 * so inside the allocation, which gpu_alloc pads): d from the first
 * word's halfword al / 2, qs word i by one clamped funnel shift of words
 * i, i + 1 that also moves nibble 0 up for h = 0 (16 + 8 al - 4 bits; 32
 * takes word i + 1 whole).  2 instructions a word where mv8_ld16 and
 * mv8_q45 take 5 (k_mv8 at one row: 58 a block against 101), one load
 * fewer.  Q4_0's and Q5_0's sums are v - 8's and v - 16's, so k_mv8t's
 * bits (mv8_q45) still.
 */
template <int T>
__device__ __forceinline__ void
mv8_hw(const uint8_t *blk8, int h, unsigned al, uint32_t mk, uint32_t *w, float *dw)
{
	if (T == Q8_T_Q4_0) {
		const uint32_t *p = (const uint32_t *)(blk8 - al);
		uint32_t P[5];
		unsigned fs = 12u + 4u * (unsigned)h + 8u * al;

#pragma unroll
		for (int i = 0; i < 5; i++)
			P[i] = p[i];
		*dw = __half2float(__ushort_as_half((unsigned short)(P[0] >> 8 * al)));
#pragma unroll
		for (int i = 0; i < 4; i++)
			w[i] = mv8_q4x16(__funnelshift_rc(P[i], P[i + 1], fs), mk);
		return;
	}
	*dw = __half2float(__ushort_as_half(*(const unsigned short *)blk8));
	if (T == Q8_T_Q8_0) {
		mv8_ld16(blk8 + 2 + 16 * h, al ^ 2, w);
		return;
	}
	/* Q5_0: qs at aq = al ^ 2 in a word; the window from qs - aq, or a word
	 * before that (aq 0, h 0: the nibbles move up 3, so word i - 1's top
	 * bits come in below, masked off); its fifth word word i + 1's stand-in
	 * where nothing of it is kept (aq 0, h 1: word 3 again, no read past
	 * the block) */
	unsigned aq = al ^ 2, back = aq == 0 && h == 0 ? 4u : 0u;
	const uint32_t *p = (const uint32_t *)(blk8 + 6 - aq - back);
	unsigned fs = 8u * (aq + back) + 4u * (unsigned)h - 3u;	/* (h 1: + 1; h 0: - 3) */
	uint32_t P[5], qhh = ((const uint16_t *)blk8)[1 + h] ^ 0xFFFFu;	/* (flipped) */
	uint32_t hq[4] = { qhh & 0xFu, qhh & 0xF0u, qhh >> 8 & 0xFu, qhh >> 12 };

#pragma unroll
	for (int i = 0; i < 4; i++)
		P[i] = p[i];
	P[4] = p[aq == 0 && h ? 3 : 4];
#pragma unroll
	for (int i = 0; i < 4; i++)
		w[i] = mv8_q5x8(__funnelshift_r(P[i], P[i + 1], fs), hq[i] * (i == 1 ?
		    0x01020408u : 0x10204080u), mk);
}

/*
 * Two lanes a block (Q8_0 by GPU_MV8_LANE2 and its default, Q4_0 and Q5_0
 * always): acc[j] += half h (16 values) of the weight block at blk . the
 * same half of block b of input row j, acc = fma(isum, dw * dx, acc) a
 * half (dw * dx exact: two fp16 values); isum from tab.w (MV8_MAGIC; for
 * Q4_0 MV8_MAGIC4, its sixteenfold values' sum over 16; for Q5_0
 * MV8_MAGIC5, its eightfold values' over 8; both within 2^22 at 16 x 128
 * x 127); al, tab.x: mv8_hw's al and mk.
 */
template <int T, int M>
__device__ __forceinline__ void
mv8_half(const uint8_t *blk8, int h, unsigned al, int b, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, float *acc, uint4 tab)
{
	uint32_t w[4];
	float dw;

	mv8_hw<T>(blk8, h, al, tab.x, w, &dw);
#pragma unroll
	for (int j = 0; j < M; j++) {
		size_t xi = (size_t)j * nb + b;
		int4 a = *(const int4 *)(q + xi * 32 + 16 * h);
		int i = __dp4a((int)w[0], a.x, (int)tab.w);
		i = __dp4a((int)w[1], a.y, i), i = __dp4a((int)w[2], a.z, i);
		i = __dp4a((int)w[3], a.w, i);
		acc[j] = __fmaf_rn(T == Q8_T_Q4_0 ? mv8_i2f4(i) : T == Q8_T_Q5_0 ? mv8_i2f5(i) :
		    mv8_i2f(i), __fmul_rn(dw, dx[xi]), acc[j]);
	}
}

/* One warp per weight row; lane l takes weight blocks l, l+32, ... read in
 * place (any row length and alignment); m == M input rows.  L = 2: Q8_0,
 * Q4_0, Q5_0 by two lanes a block, lane l half l % 2 of blocks l / 2, l / 2
 * + 16, ... (mv8_half); NVFP4 (always L = 2) by 16-value sub-blocks, lane l
 * sub-blocks l and l + 32 of each 64 (mv8_nv; A: rows 8-byte aligned).
 * mv8_row: acc[j] (zeroed here) += the weight row at wr . input row j;
 * k_mv8 and the experts' k_moe_mv8 (one input row a slot) run it. */
template <int T, int M, int L, int A, int LO>
__device__ __forceinline__ void
mv8_row(const uint8_t *__restrict__ wr, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, const float *__restrict__ sx, int lane, uint4 tab, float *acc)
{
#pragma unroll
	for (int j = 0; j < M; j++)
		acc[j] = 0.0f;
	if constexpr (T == Q8_T_NVFP4) {	/* chunks of 64 sub-blocks, then the last part */
		int nsub = 2 * nb, full = nsub & ~63, s = lane;
#pragma unroll (M <= 2 ? 2 : 1)
		for (; s < full; s += 64)
			mv8_nv<M, A, LO>(wr, nsub, s, true, nb, q, dx, acc, tab);
		if (s < nsub)
			mv8_nv<M, A, LO>(wr, nsub, s, s + 32 < nsub, nb, q, dx, acc, tab);
	} else if constexpr (L == 2) {
		int h = lane & 1;
		/* (a lane's blocks are 16 apart, 16 blocks a multiple of 4 bytes) */
		unsigned al = (unsigned)((uintptr_t)(wr + (size_t)(lane >> 1) * mv8_bs<T>::v) & 2);
		if constexpr (T == Q8_T_Q4_0 || T == Q8_T_Q5_0)
			tab = mv8_tab4<T>(tab, nb);
#pragma unroll (M <= 2 ? 2 : 1)
		for (int b = lane >> 1; b < nb; b += 16)
			mv8_half<T, M>(wr + (size_t)b * mv8_bs<T>::v, h, al, b, nb, q, dx, acc,
			    tab);
	} else {
#pragma unroll (M <= 2 ? 2 : 1)	/* two blocks' loads in flight (decode: bound by bytes) */
		for (int b = lane; b < nb; b += 32)
			mv8_block<T, M>(wr + (size_t)b * mv8_bs<T>::v, b, nb, q, dx, sx, acc, tab);
	}
}
