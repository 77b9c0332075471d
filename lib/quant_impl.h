/*
 * quant_impl: what lib/quant*.c share and nothing else sees: block byte
 * offsets, the little-endian field loads, the scalar format conversions
 * and the small value tables of ggml's block formats.
 *
 * Blocks are read as bytes (no struct casts), so a row may start at any
 * address.  Layouts (ggml-common.h, all little-endian):
 *   Q4_0  d:f16 qs[16]                    Q4_1  d:f16 m:f16 qs[16]
 *   Q5_0  d:f16 qh[4] qs[16]              Q5_1  d:f16 m:f16 qh[4] qs[16]
 *   Q8_0  d:f16 qs[32]:i8                 Q8_1  d:f16 s:f16 qs[32]:i8
 *   Q2_K  scales[16] qs[64] d:f16 dmin:f16
 *   Q3_K  hmask[32] qs[64] scales[12] d:f16
 *   Q4_K  d:f16 dmin:f16 scales[12] qs[128]
 *   Q5_K  d:f16 dmin:f16 scales[12] qh[32] qs[128]
 *   Q6_K  ql[128] qh[64] scales[16]:i8 d:f16
 *   Q8_K  d:f32 qs[256]:i8 bsums[16]:i16
 *   IQ4_NL d:f16 qs[16]                   IQ4_XS d:f16 scales_h:u16 scales_l[4] qs[128]
 *   TQ1_0 qs[48] qh[4] d:f16              TQ2_0 qs[64] d:f16
 *   MXFP4 e:e8m0 qs[16]                   NVFP4 d[4]:ue4m3 qs[32]
 */
#ifndef MEMRA_QUANT_IMPL_H
#define MEMRA_QUANT_IMPL_H

#include "quant.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define QK_K 256

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

/* CPUID.1:ECX bit 29 (F16C); AVX state is checked with avx2 by the caller. */
static inline int
qi_cpu_has_f16c(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}
#endif

static inline uint16_t
qi_rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline void
qi_wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline uint32_t
qi_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float
qi_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* IEEE binary16 -> binary32, exact (subnormals, Inf, NaN payload kept). */
static inline float
qi_h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;

	if (e == 0x1F)
		return qi_bits_f32(sign | 0x7F800000 | m << 13);
	if (e == 0) {
		/* m * 2^-24, exact in float */
		float v = (float)m * 0x1p-24f;
		return sign ? -v : v;
	}
	return qi_bits_f32(sign | (e + 112) << 23 | m << 13);
}

/* binary32 -> binary16, round to nearest even; NaN -> sign | 0x7E00. */
static inline uint16_t
qi_f2h(float f)
{
	uint32_t x = qi_f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t e, m, shift, h, rem, half;

	x &= 0x7FFFFFFF;
	if (x > 0x7F800000)
		return sign | 0x7E00;
	if (x >= 0x477FF000)		/* >= 65520 rounds to Inf */
		return sign | 0x7C00;
	if (x >= 0x38800000) {		/* normal half */
		h = ((x >> 23) - 112) << 10 | (x & 0x7FFFFF) >> 13;
		rem = x & 0x1FFF;
		if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
			h++;
		return sign | (uint16_t)h;
	}
	if (x < 0x33000000)		/* <= 2^-25 (tie) rounds to 0 */
		return sign;
	e = x >> 23;
	m = (x & 0x7FFFFF) | 0x800000;
	shift = 126 - e;		/* 14..24: value is m >> shift ulps */
	h = m >> shift;
	rem = m & ((1u << shift) - 1);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (h & 1)))
		h++;
	return sign | (uint16_t)h;
}

static inline float
qi_bf2f(uint16_t h)
{
	return qi_bits_f32((uint32_t)h << 16);
}

/* ggml_compute_fp32_to_bf16: NaN made quiet, else round to nearest even. */
static inline uint16_t
qi_f2bf(float f)
{
	uint32_t u = qi_f32_bits(f);

	if ((u & 0x7FFFFFFF) > 0x7F800000)
		return (uint16_t)((u >> 16) | 64);
	return (uint16_t)((u + (0x7FFF + ((u >> 16) & 1))) >> 16);
}

/* ggml_e8m0_to_fp32_half: 2^(e-128), the bit pattern ggml builds. */
static inline float
qi_e8m0_half(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;

	return qi_bits_f32(bits);
}

/* ggml_e8m0_to_fp32: 2^(e-127); e = 0xFF is NaN. */
static inline float
qi_e8m0(uint8_t e)
{
	uint32_t bits = e == 0 ? 0x00400000u : (uint32_t)e << 23;

	return qi_bits_f32(bits);
}

/* ggml_ue4m3_to_fp32 (which includes the 0.5 of the kvalues_mxfp4
 * convention): 0 and 0x7F -> 0; exp 0: man * 2^-9; else (1 + man/8) *
 * 2^(exp-7); halved.  Built from bits (ggml uses ldexpf; same values). */
static inline float
qi_ue4m3_half(uint8_t x)
{
	uint32_t exp = (x >> 3) & 0xF, man = x & 7;

	if (x == 0 || x == 0x7F)
		return 0.0f;
	if (exp == 0)
		return (float)man * 0x1p-10f;
	return qi_bits_f32((exp + 119) << 23 | man << 20);
}

/* ggml_fp32_to_ue4m3: x <= 0 (and NaN) -> 0, clamped to 448, mantissa
 * rounded half up, subnormals rounded from x * 512. */
static inline uint8_t
qi_f2ue4m3(float x)
{
	uint32_t bits;
	int e, man;

	if (!(x > 0.0f))
		return 0;
	if (x > 448.0f)
		x = 448.0f;
	bits = qi_f32_bits(x);
	e = (int)((bits >> 23) & 0xFF) - 127 + 7;
	if (e <= 0) {
		man = (int)(x * 512.0f + 0.5f);
		if (man > 7)
			man = 7;
		return man < 1 ? 0 : (uint8_t)man;
	}
	if (e >= 15)
		return 0x7E;
	man = (int)((bits >> 20) & 7) + (int)((bits >> 19) & 1);
	if (man > 7) {
		man = 0;
		if (++e >= 15)
			return 0x7E;
	}
	return (uint8_t)(e << 3 | man);
}

/* Round to nearest (ties to even) for |f| < 2^22, the way ggml does it:
 * add 1.5 * 2^23 and read the low mantissa bits. */
static inline int
qi_nearest_int(float f)
{
	float v = f + 12582912.0f;
	int32_t i;

	memcpy(&i, &v, 4);
	return (i & 0x007FFFFF) - 0x00400000;
}

/* E2M1 values doubled (ggml's kvalues_mxfp4) and IQ4_NL's non-linear grid. */
static const int8_t qi_kvalues_mxfp4[16] = {
	0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};
static const int8_t qi_kvalues_iq4nl[16] = {
	-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* get_scale_min_k4: the 6-bit scale and min of sub-block j of a Q4_K/Q5_K block. */
static inline void
qi_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* All 8 (scale, min) pairs of get_scale_min_k4 at once, without branches. */
static inline void
qi_scale_min_k4_all(const uint8_t *q, uint8_t sc[8], uint8_t m[8])
{
	uint32_t u[3], v[4];

	memcpy(u, q, 12);
	v[0] = u[0] & 0x3F3F3F3F;
	v[1] = (u[2] & 0x0F0F0F0F) | ((u[0] >> 6 & 0x03030303) << 4);
	v[2] = u[1] & 0x3F3F3F3F;
	v[3] = (u[2] >> 4 & 0x0F0F0F0F) | ((u[1] >> 6 & 0x03030303) << 4);
	memcpy(sc, v, 8);
	memcpy(m, v + 2, 8);
}

/* Q3_K's 16 signed 6-bit scales (bias 32 removed) from its 12 bytes. */
static inline void
qi_q3k_scales(const uint8_t *s12, int8_t out[16])
{
	uint32_t aux[4], tmp;
	const uint32_t km1 = 0x03030303, km2 = 0x0f0f0f0f;
	int i;

	memcpy(aux, s12, 12);
	tmp = aux[2];
	aux[2] = ((aux[0] >> 4) & km2) | (((tmp >> 4) & km1) << 4);
	aux[3] = ((aux[1] >> 4) & km2) | (((tmp >> 6) & km1) << 4);
	aux[0] = (aux[0] & km2) | (((tmp >> 0) & km1) << 4);
	aux[1] = (aux[1] & km2) | (((tmp >> 2) & km1) << 4);
	for (i = 0; i < 16; i++)
		out[i] = (int8_t)(((const uint8_t *)aux)[i] - 32);
}

/* The scales of a K-quant (or IQ4_XS) block: nsub sub-blocks of
 * QK_K / nsub values; value i of sub-block j stands for d * sc[j] * v - dmin * m[j]. */
struct qi_kscales {
	float	d, dmin;
	int	nsub, has_min;
	int	sc[16], m[16];
};

/* quant_deq.c: a block's values as integers in element order, and its
 * float scales (ws[0] = d; ws[1] = m for Q4_1/Q5_1; ws[0..3] for NVFP4's
 * 16-value groups). */
void	quant_block_ints(int t, const uint8_t *b, int *v, float *ws);
void	quant_kblock_ints(int t, const uint8_t *b, int *v, struct qi_kscales *ks);

/* quant_q.c: one block of type t (Q8_0, Q8_1 or Q8_K for activations). */
void	quant_quantize_block(int t, const float *x, uint8_t *b);

/* quant_dot.c (portable) and quant_avx2.c: exported for the unit tests,
 * which check both paths on one machine.  Arguments already checked. */
float	quant_vec_dot_portable(int t, int64_t n, const void *w, const void *xq);
float	quant_dot_f32_portable(int t, int64_t n, const void *w, const float *x);
float	quant_vec_dot_avx2(int t, int64_t n, const void *w, const void *xq);
float	quant_dot_f32_avx2(int t, int64_t n, const void *w, const float *x);
void	quant_vec_dot_rows_avx2(int t, int64_t n, const void *w, const void *xq, size_t ldxq,
	    int m, float *out);
void	quant_quantize_act_portable(int t, const float *x, void *xq, int64_t n);
/* quant_avx2.c: the packed rows' bytes for t (0: no packed kernel for t)
 * and the AVX-512 VNNI kernel (quant_vec_dot_packed's, arguments checked). */
size_t	quant_pack_bytes(int t, int64_t n, int m);
void	quant_vec_dot_packed_avx512(int t, int64_t n, const void *w, const void *pk, int m,
	    float *out);
void	quant_quantize_act_avx2(int t, const float *x, void *xq, int64_t n);

#endif
