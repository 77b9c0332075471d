/*
 * mv8-emu.h: the helpers tools/matvec-q8-emu.c, tools/matvec-q8tc-emu.c and
 * tools/matvec-qkt-emu.c share (not built by make: included by those three CPU models of the
 * decode products): a fixed random stream, dp4a, mv8_i2f, PTX prmt's
 * default mode, NVFP4's code and scale decodings (mv8_fp4pn, gpu_fp4x8,
 * mv8_ue4m3c2, mv8_ue4m3c2f), IQ4's grid decoding (gpu_iq4x8), Q4_0's and
 * Q5_0's (k_mv8t's mv8_q45; k_mv8's mv8_q4x16, mv8_q5x8, mv8_i2f4,
 * mv8_i2f5), a half block's words (mv8_ld16, mv8_hw), little-endian loads.  Keep it in step with
 * cuda/matvec_q8.cu and cuda/gpu_impl.cuh.
 */
#ifndef MEMRA_MV8_EMU_H
#define MEMRA_MV8_EMU_H
#include <stdint.h>
#include <string.h>
#include "quant.h"

static uint64_t rs = 88172645463325252ULL;
static inline uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static inline float unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }

static inline int dp4a(uint32_t a, uint32_t b, int c) { for (int k = 0; k < 4; k++) c += (int8_t)(a >> 8 * k) * (int8_t)(b >> 8 * k); return c; }
/* mv8_i2f: a dp4a sum started at 0x4B400000 as a float */
static inline float i2f(int t) { float f; memcpy(&f, &t, 4); return f - 12582912.0f; }
/* mv8_i2f4: a dp4a sum started at 0x49400000 (1.5 * 2^19) as a float, over 16 */
static inline float i2f4(int t) { float f; memcpy(&f, &t, 4); return f - 786432.0f; }
/* mv8_i2f5: a dp4a sum started at 0x49C00000 (1.5 * 2^20) as a float, over 8 */
static inline float i2f5(int t) { float f; memcpy(&f, &t, 4); return f - 1572864.0f; }
static inline float asf(int t) { float f; memcpy(&f, &t, 4); return f; }
static inline float asfu(uint32_t t) { float f; memcpy(&f, &t, 4); return f; }
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline float h2f(uint16_t h) { return quant_f16_to_f32(h); }

/* PTX prmt.b32, default mode: selector nibble bits 0..2 pick a byte of
 * {b, a}, bit 3 replicates its sign bit */
static inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t s)
{
	uint64_t t = (uint64_t)b << 32 | a;
	uint32_t r = 0;
	for (int k = 0; k < 4; k++) {
		unsigned n = s >> 4 * k & 0xF;
		uint32_t byte = (uint32_t)(t >> 8 * (n & 7)) & 0xFF;
		if (n & 8)
			byte = byte & 0x80 ? 0xFF : 0;
		r |= byte << 8 * k;
	}
	return r;
}

/* gpu_iq4x8 (cuda/gpu_impl.cuh), line for line, with its table words: the
 * IQ4 grid values of the 8 indices of word q (byte j: value j low nibble,
 * value j + 16 high), lo values 0..3, hi 16..19 of the word's */
static inline void iq4x8(uint32_t q, uint32_t *lo, uint32_t *hi)
{
	const uint32_t n0 = 0xBFAD9881u, n1 = 0xF6EADDCFu, p0 = 0x26190D01u, p1 = 0x71594535u;
	uint32_t x = q ^ 0x88888888u, s = (q >> 1 & 0x44444444u) | 0x32103210u;
	uint32_t a = prmt(prmt(n0, n1, q), prmt(p0, p1, x), s);
	uint32_t b = prmt(prmt(n0, n1, q >> 16), prmt(p0, p1, x >> 16), s >> 16);

	*lo = prmt(a, b, 0x6420u);
	*hi = prmt(a, b, 0x7531u);
}

/* mv8_q45: the int8 values of 4 qs bytes w of a Q4_0 or Q5_0 block, half
 * h: nibble h of each byte, Q5_0 with bit k of hb at bit 4 of byte k (one
 * multiply: the partial products on distinct bits), less 8 or 16 by a
 * byte bias (v + 0x78 or 0x70 < 256, then the sign bit flipped) */
static inline uint32_t q45(int t, uint32_t w, int h, uint32_t hb)
{
	uint32_t v = (w >> (4 * h)) & 0x0F0F0F0Fu;

	if (t == QUANT_Q5_0)
		v |= ((hb & 0xF) * 0x02040810u) & 0x10101010u;
	return (v + (t == QUANT_Q5_0 ? 0x70707070u : 0x78787878u)) ^ 0x80808080u;
}

/* mv8_ld16: the 16 bytes at p (2-byte aligned) by 4 aligned words from the
 * one holding p and the halfword of the last two, funnel shifts */
static inline void ld16(const uint8_t *p, uint32_t *w)
{
	unsigned o = (unsigned)((uintptr_t)p & 2);
	uint32_t P[4], e = rd16(p + 14);

	for (int i = 0; i < 4; i++)
		P[i] = rd32(p - o + 4 * i);
	for (int i = 0; i < 4; i++)
		w[i] = (uint32_t)(((uint64_t)(i < 3 ? P[i + 1] : e) << 32 | P[i]) >> (8 * o));
}

/* __funnelshift_rc: hi:lo shifted right by min(s, 32), the low word */
static inline uint32_t funnel_rc(uint32_t lo, uint32_t hi, unsigned s)
{
	return (uint32_t)(((uint64_t)hi << 32 | lo) >> (s < 32 ? s : 32));
}

/* __funnelshift_r: hi:lo shifted right by s % 32, the low word */
static inline uint32_t funnel_r(uint32_t lo, uint32_t hi, unsigned s)
{
	return (uint32_t)(((uint64_t)hi << 32 | lo) >> (s & 31));
}

/* mv8_q4x16: sixteen times the int8 values v - 8 of 4 bytes whose nibbles
 * v are at bits 4..7 */
static inline uint32_t q4x16(uint32_t w) { return (w & 0xF0F0F0F0u) ^ 0x80808080u; }

/* mv8_q5x8: eight times the int8 values v - 16 of 4 values whose nibbles
 * are at bits 3..6 of w's bytes and whose qh bits, flipped, at bit 7 of s's */
static inline uint32_t q5x8(uint32_t w, uint32_t s)
{
	return (w & 0x78787878u) | (s & 0x80808080u);
}

/* mv8_hw: the int8 words of half h of the Q8_0, Q4_0 or Q5_0 block at blk,
 * and its d as a float (Q8_0's 16 bytes by mv8_ld16; Q4_0: the block by
 * five aligned words from the one holding its first byte (al = blk's offset in it: 0 or 2; 2 bytes
 * before the block or past it read too), d from the first word's halfword
 * al / 2, qs word i by a clamped funnel shift of words i, i + 1 by 16 +
 * 8 al - 4 (1 - h) bits, mv8_q4x16: sixteenfold values, summed from
 * 0x49400000; Q5_0: qs by five aligned words from qs - aq (aq: qs's offset
 * in a word), or a word before that for aq 0 and h 0, the fifth word the
 * fourth again for aq 0 and h 1, word i by a funnel shift of words i, i + 1
 * by 8 (aq + back) + 1 (h 1) or - 3 (h 0) bits: nibble h at bits 3..6; qh's
 * halfword h flipped, its bits 4 i .. 4 i + 3 at bit 7 of word i's bytes by
 * one multiply (0x10204080; word 1: 0x01020408 on bits 4..7 in place),
 * mv8_q5x8: eightfold values, summed from 0x49C00000) */
static inline void hw16(int t, const uint8_t *blk, int h, uint32_t w[4], float *dw)
{
	uint32_t qhh = t == QUANT_Q5_0 ? rd16(blk + 2 + 2 * h) : 0;

	if (t == QUANT_Q5_0) {
		unsigned aq = (unsigned)((uintptr_t)(blk + 6) & 2), back = aq == 0 && h == 0 ? 4 : 0;
		unsigned fs = 8 * (aq + back) + 4 * (unsigned)h - 3;
		const uint8_t *p = blk + 6 - aq - back;
		uint32_t P[5], nq = qhh ^ 0xFFFFu;
		uint32_t hq[4] = { nq & 0xF, nq & 0xF0, nq >> 8 & 0xF, nq >> 12 };
		for (int i = 0; i < 4; i++)
			P[i] = rd32(p + 4 * i);
		P[4] = rd32(p + 4 * (aq == 0 && h ? 3 : 4));
		*dw = h2f(rd16(blk));
		for (int i = 0; i < 4; i++)
			w[i] = q5x8(funnel_r(P[i], P[i + 1], fs),
			    hq[i] * (i == 1 ? 0x01020408u : 0x10204080u));
		return;
	}
	if (t == QUANT_Q4_0) {
		unsigned al = (unsigned)((uintptr_t)blk & 2), fs = 12 + 4 * (unsigned)h + 8 * al;
		uint32_t P[5];
		for (int i = 0; i < 5; i++)
			P[i] = rd32(blk - al + 4 * i);
		*dw = h2f((uint16_t)(P[0] >> 8 * al));
		for (int i = 0; i < 4; i++)
			w[i] = q4x16(funnel_rc(P[i], P[i + 1], fs));
		return;
	}
	*dw = h2f(rd16(blk));
	ld16(blk + 2 + 16 * h, w);	/* Q8_0 */
}

/* mv8_half's dp4a start and its sum as a float: Q4_0's sixteenfold values
 * from 0x49400000 (mv8_i2f4), Q5_0's eightfold from 0x49C00000 (mv8_i2f5),
 * Q8_0's from 0x4B400000 (mv8_i2f) */
static inline int hstart(int t)
{
	return t == QUANT_Q4_0 ? 0x49400000 : t == QUANT_Q5_0 ? 0x49C00000 : 0x4B400000;
}
static inline float hi2f(int t, int s) { return t == QUANT_Q4_0 ? i2f4(s) : t == QUANT_Q5_0 ? i2f5(s) : i2f(s); }

/* the e2m1 kvalues (twice the value) of the 16 codes */
static const int kv[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* mv8_fp4pn: the codes of v (nibble k = value k) as positive parts p[0]
 * (values 0..3), p[1] (4..7), the positive codes' kvalues, and negative
 * parts n[0], n[1], the negative codes' magnitudes: kvalues = p - n,
 * bytewise */
static inline void fp4pn(uint32_t v, uint32_t *p, uint32_t *n)
{
	uint32_t tx = 0x03020100u, u = v ^ 0x88888888u;

	p[0] = prmt(tx, 0x0C080604u, v), p[1] = prmt(tx, 0x0C080604u, v >> 16);
	n[0] = prmt(tx, 0x0C080604u, u), n[1] = prmt(tx, 0x0C080604u, u >> 16);
}

/* gpu_fp4x8 (tp, tn, sb: mv8_tab's x, y, z): the kvalues of the codes of
 * v, lo values 0..3, hi 4..7 */
static inline void fp4sel(uint32_t v, uint32_t *lo, uint32_t *hi)
{
	uint32_t tx = 0x03020100u, ty = 0xFDFEFF00u;
	uint32_t c = v & 0x77777777u, s = (v >> 1 & 0x44444444u) | 0x32103210u;

	*lo = prmt(prmt(tx, 0x0C080604u, c), prmt(ty, 0xF4F8FAFCu, c), s);
	c >>= 16, s >>= 16;
	*hi = prmt(prmt(tx, 0x0C080604u, c), prmt(ty, 0xF4F8FAFCu, c), s);
}

/* canonical scale bytes (gpu_ue4m3c) and back (gpu_nvfp4_unpack) */
static inline unsigned ue4m3c(unsigned x) { return x == 0x7F ? 0 : x & 0x7F; }
static inline unsigned ue4m3u(unsigned c) { return c == 0x7F ? 0xFF : c; }

/* mv8_ue4m3c2: two canonical bytes, the fp16 of b << 7 times 128 (exact) */
static inline void ue4m3c2(uint32_t sc, float *ws)
{
	uint32_t h01 = prmt(sc, 0, 0x4140) << 7;
	ws[0] = h2f((uint16_t)h01) * 128.0f, ws[1] = h2f((uint16_t)(h01 >> 16)) * 128.0f;
}

/* mv8_ue4m3c2f (m >= 3): the same pair by fp32, b << 20 as a float times 2^119 */
static inline void ue4m3c2f(uint32_t sc, float *ws)
{
	uint32_t a = (sc & 0x7Fu) << 20, b = (sc & 0x7F00u) << 12;
	float fa, fb;

	memcpy(&fa, &a, 4), memcpy(&fb, &b, 4);
	ws[0] = fa * 0x1p119f, ws[1] = fb * 0x1p119f;
}

/*
 * PTX mma.sync m16n8k16 .s32.s8.s8.s32 from a warp's fragments: lane (g =
 * lane / 4, tg = lane % 4) holds A's rows g and g + 8 at values 4 tg ..
 * 4 tg + 3 (a[lane][0], a[lane][1]), B's column g at the same values
 * (b[lane]) and gets D's rows g, g + 8 x columns 2 tg, 2 tg + 1 (c[lane][e],
 * e as the C registers), D = c0 + A B (the tensor-core emulators
 * matvec-q8tc-emu: c0 MAGIC, matvec-qkt-emu: 0).
 */
static inline void
mma_s8(uint32_t a[32][2], const uint32_t b[32], int c[32][4], int64_t c0)
{
	int A[16][16], B[16][8];

	for (int lane = 0; lane < 32; lane++) {
		int g = lane >> 2, tg = lane & 3;
		for (int i = 0; i < 4; i++) {
			A[g][4 * tg + i] = (int8_t)(a[lane][0] >> 8 * i);
			A[g + 8][4 * tg + i] = (int8_t)(a[lane][1] >> 8 * i);
			B[4 * tg + i][g] = (int8_t)(b[lane] >> 8 * i);
		}
	}
	for (int lane = 0; lane < 32; lane++) {
		int g = lane >> 2, tg = lane & 3;
		for (int e = 0; e < 4; e++) {
			int r = g + 8 * (e >> 1), n = 2 * tg + (e & 1);
			int64_t s = c0;
			for (int kk = 0; kk < 16; kk++)
				s += A[r][kk] * B[kk][n];
			c[lane][e] = (int)s;
		}
	}
}

#endif
