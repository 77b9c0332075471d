/*
 * quant_avx2: AVX2+FMA(+F16C) dot products, compiled with a target
 * attribute so that the library still runs on any x86-64 (quant_dot.c
 * calls these only when the CPU has the features), and the AVX-512 VNNI
 * products of packed activation rows (quant_vec_dot_packed).  Other CPUs
 * get stubs that fall back to the portable code.
 */
#include "quant.h"
#include "quant_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float
hsum_ps(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* One half to float with F16C (exact, like qi_h2f). */
AVX2 static inline float
h2f(const uint8_t *p)
{
	return _cvtsh_ss(qi_rd16(p));
}

AVX2 static inline __m256
ld_f16(const uint8_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

AVX2 static inline __m256
ld_bf16(const uint8_t *p)
{
	__m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));

	return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}

/* F32/F16/BF16 weights against float x: 4 accumulators of 8. */
AVX2 static float
dot_plain(int t, int64_t n, const uint8_t *w, const float *x)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	float tail = 0.0f;
	int64_t i;

#define LDW(k) (t == QUANT_F32 ? _mm256_loadu_ps((const float *)w + (k)) : \
	t == QUANT_F16 ? ld_f16(w + 2 * (k)) : ld_bf16(w + 2 * (k)))
	for (i = 0; i + 32 <= n; i += 32) {
		a0 = _mm256_fmadd_ps(LDW(i), _mm256_loadu_ps(x + i), a0);
		a1 = _mm256_fmadd_ps(LDW(i + 8), _mm256_loadu_ps(x + i + 8), a1);
		a2 = _mm256_fmadd_ps(LDW(i + 16), _mm256_loadu_ps(x + i + 16), a2);
		a3 = _mm256_fmadd_ps(LDW(i + 24), _mm256_loadu_ps(x + i + 24), a3);
	}
	for (; i + 8 <= n; i += 8)
		a0 = _mm256_fmadd_ps(LDW(i), _mm256_loadu_ps(x + i), a0);
#undef LDW
	for (; i < n; i++) {
		float wv;

		if (t == QUANT_F32)
			memcpy(&wv, w + 4 * i, 4);
		else
			wv = t == QUANT_F16 ? h2f(w + 2 * i) : qi_bf2f(qi_rd16(w + 2 * i));
		tail += wv * x[i];
	}
	return hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

/* Signed bytes a . b, summed in pairs of pairs: 8 x int32. */
AVX2 static inline __m256i
dot_i8(__m256i a, __m256i b)
{
	__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));

	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* Unsigned bytes u . signed bytes b: 8 x int32. */
AVX2 static inline __m256i
dot_u8(__m256i u, __m256i b)
{
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, b), _mm256_set1_epi16(1));
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles, then high nibbles. */
AVX2 static inline __m256i
nibbles(const uint8_t *p)
{
	__m128i q = _mm_loadu_si128((const __m128i *)p);
	__m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);

	return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* The 5-bit values of a Q5_0/Q5_1 block: nibbles plus bit 4 from qh. */
AVX2 static inline __m256i
q5_bytes(const uint8_t *qh4, const uint8_t *qs)
{
	uint32_t qh;
	__m256i sh = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
	    0x0202020202020202, 0x0303030303030303);
	__m256i bits, m = _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFE);

	memcpy(&qh, qh4, 4);
	/* spread the 32 bits of qh over 32 bytes: byte j gets 0xFF if bit j */
	bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), sh);
	bits = _mm256_or_si256(bits, m);
	bits = _mm256_cmpeq_epi8(bits, _mm256_set1_epi64x(-1));
	return _mm256_or_si256(nibbles(qs), _mm256_and_si256(bits, _mm256_set1_epi8(0x10)));
}

/* The 32 values of a Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4 block as signed bytes,
 * and its scale. */
AVX2 static inline __attribute__((always_inline)) __m256i
block_i8(int t, const uint8_t *w, float *d)
{
	const __m128i kiq = _mm_loadu_si128((const __m128i *)qi_kvalues_iq4nl);
	const __m128i kfp = _mm_loadu_si128((const __m128i *)qi_kvalues_mxfp4);
	__m256i q;
	__m128i lo, hi;

	switch (t) {
	case QUANT_Q8_0:
		*d = h2f(w);
		return _mm256_loadu_si256((const __m256i *)(w + 2));
	case QUANT_Q4_0:
		*d = h2f(w);
		return _mm256_sub_epi8(nibbles(w + 2), _mm256_set1_epi8(8));
	case QUANT_Q5_0:
		*d = h2f(w);
		return _mm256_sub_epi8(q5_bytes(w + 2, w + 6), _mm256_set1_epi8(16));
	case QUANT_MXFP4:
		*d = qi_e8m0_half(w[0]);
		q = nibbles(w + 1);
		lo = _mm256_castsi256_si128(q);
		hi = _mm256_extracti128_si256(q, 1);
		return _mm256_set_m128i(_mm_shuffle_epi8(kfp, hi), _mm_shuffle_epi8(kfp, lo));
	default:	/* IQ4_NL */
		*d = h2f(w);
		q = nibbles(w + 2);
		lo = _mm256_castsi256_si128(q);
		hi = _mm256_extracti128_si256(q, 1);
		return _mm256_set_m128i(_mm_shuffle_epi8(kiq, hi), _mm_shuffle_epi8(kiq, lo));
	}
}

/* Those blocks against Q8_0.  Inlined per type so the switch folds away. */
AVX2 static inline __attribute__((always_inline)) float
vd_q8_0(int t, int64_t nb, const uint8_t *w, const uint8_t *xq)
{
	int bsz = quant_traits(t)->size;
	__m256 acc = _mm256_setzero_ps();
	int64_t i;

	for (i = 0; i < nb; i++, w += bsz, xq += 34) {
		float d;
		__m256i q = block_i8(t, w, &d);
		__m256i y = _mm256_loadu_si256((const __m256i *)(xq + 2));

		acc = _mm256_fmadd_ps(_mm256_set1_ps(d * h2f(xq)), _mm256_cvtepi32_ps(dot_i8(q, y)), acc);
	}
	return hsum_ps(acc);
}

/* 32 signed bytes . 32 floats, as 8 partial sums. */
AVX2 static inline __m256
dot_i8_f32(__m256i q, const float *x)
{
	__m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
	__m256 s;

	s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), _mm256_loadu_ps(x));
	s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))),
	    _mm256_loadu_ps(x + 8), s);
	s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), _mm256_loadu_ps(x + 16), s);
	return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))),
	    _mm256_loadu_ps(x + 24), s);
}

/* Those blocks against float x. */
AVX2 static inline __attribute__((always_inline)) float
df_q8_0(int t, int64_t nb, const uint8_t *w, const float *x)
{
	int bsz = quant_traits(t)->size;
	__m256 acc = _mm256_setzero_ps();
	int64_t i;

	for (i = 0; i < nb; i++, w += bsz, x += 32) {
		float d;
		__m256i q = block_i8(t, w, &d);

		acc = _mm256_fmadd_ps(_mm256_set1_ps(d), dot_i8_f32(q, x), acc);
	}
	return hsum_ps(acc);
}

/* The 4 UE4M3 scales of an NVFP4 block (qi_ue4m3_half, vectorized),
 * spread as [s0 x4, s1 x4] and [s2 x4, s3 x4] to match dot_i8's lanes. */
AVX2 static inline void
nvfp4_scales(const uint8_t *w, __m256 *s01, __m256 *s23)
{
	uint32_t raw;
	__m128i x, e, mn;
	__m128 norm, sub, v;

	memcpy(&raw, w, 4);
	x = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)raw));
	e = _mm_and_si128(_mm_srli_epi32(x, 3), _mm_set1_epi32(0xF));
	mn = _mm_and_si128(x, _mm_set1_epi32(7));
	norm = _mm_castsi128_ps(_mm_or_si128(_mm_slli_epi32(_mm_add_epi32(e, _mm_set1_epi32(119)), 23),
	    _mm_slli_epi32(mn, 20)));
	sub = _mm_mul_ps(_mm_cvtepi32_ps(mn), _mm_set1_ps(0x1p-10f));
	v = _mm_blendv_ps(norm, sub, _mm_castsi128_ps(_mm_cmpeq_epi32(e, _mm_setzero_si128())));
	v = _mm_andnot_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(x, _mm_set1_epi32(0x7F))), v);
	*s01 = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
	*s23 = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3));
}

/* 16 bytes of an NVFP4 block (two 16-value sub-blocks, split halves) as
 * 32 signed bytes in element order. */
AVX2 static inline __m256i
nvfp4_i8(const uint8_t *qs)
{
	const __m128i kfp = _mm_loadu_si128((const __m128i *)qi_kvalues_mxfp4);
	const __m128i m4 = _mm_set1_epi8(0x0F);
	__m128i q = _mm_loadu_si128((const __m128i *)qs);
	__m128i lo = _mm_and_si128(q, m4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);

	/* sub-block 0: lo[0..7] hi[0..7]; sub-block 1: lo[8..15] hi[8..15] */
	return _mm256_set_m128i(_mm_shuffle_epi8(kfp, _mm_unpackhi_epi64(lo, hi)),
	    _mm_shuffle_epi8(kfp, _mm_unpacklo_epi64(lo, hi)));
}

/* NVFP4 against float x. */
AVX2 static float
df_nvfp4(int64_t nb, const uint8_t *w, const float *x)
{
	__m256 acc = _mm256_setzero_ps();
	int64_t i;
	int h;

	for (i = 0; i < nb; i++, w += 36) {
		__m256 s[2];

		nvfp4_scales(w, &s[0], &s[1]);
		for (h = 0; h < 2; h++, x += 32) {
			__m256i q = nvfp4_i8(w + 4 + 16 * h);
			__m128i a = _mm256_castsi256_si128(q), b = _mm256_extracti128_si256(q, 1);
			/* per 16 values: v . x, times that sub-block's scale */
			__m256 ta = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(a)), _mm256_loadu_ps(x));
			__m256 tb = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_loadu_ps(x + 16));

			ta = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(a, 8))),
			    _mm256_loadu_ps(x + 8), ta);
			tb = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8))),
			    _mm256_loadu_ps(x + 24), tb);
			acc = _mm256_fmadd_ps(_mm256_permute2f128_ps(s[h], s[h], 0x00), ta, acc);
			acc = _mm256_fmadd_ps(_mm256_permute2f128_ps(s[h], s[h], 0x11), tb, acc);
		}
	}
	return hsum_ps(acc);
}

/* NVFP4 against Q8_0: a 64-value block is two Q8_0 blocks. */
AVX2 static float
vd_nvfp4(int64_t nb, const uint8_t *w, const uint8_t *xq)
{
	__m256 acc = _mm256_setzero_ps();
	int64_t i;

	for (i = 0; i < nb; i++, w += 36, xq += 68) {
		__m256 s01, s23;
		__m256i y0 = _mm256_loadu_si256((const __m256i *)(xq + 2));
		__m256i y1 = _mm256_loadu_si256((const __m256i *)(xq + 36));

		nvfp4_scales(w, &s01, &s23);
		acc = _mm256_fmadd_ps(_mm256_mul_ps(s01, _mm256_set1_ps(h2f(xq))),
		    _mm256_cvtepi32_ps(dot_i8(nvfp4_i8(w + 4), y0)), acc);
		acc = _mm256_fmadd_ps(_mm256_mul_ps(s23, _mm256_set1_ps(h2f(xq + 34))),
		    _mm256_cvtepi32_ps(dot_i8(nvfp4_i8(w + 20), y1)), acc);
	}
	return hsum_ps(acc);
}

/* Q4_1/Q5_1 against Q8_1. */
AVX2 static inline __attribute__((always_inline)) float
vd_q8_1(int t, int64_t nb, const uint8_t *w, const uint8_t *xq)
{
	int bsz = quant_traits(t)->size;
	__m256 acc = _mm256_setzero_ps();
	float summ = 0.0f;
	int64_t i;

	for (i = 0; i < nb; i++, w += bsz, xq += 36) {
		__m256i y = _mm256_loadu_si256((const __m256i *)(xq + 4));
		__m256i q = t == QUANT_Q4_1 ? nibbles(w + 4) : q5_bytes(w + 4, w + 8);

		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w) * h2f(xq)),
		    _mm256_cvtepi32_ps(dot_u8(q, y)), acc);
		summ += h2f(w + 2) * h2f(xq + 2);
	}
	return hsum_ps(acc) + summ;
}

/* Q4_1/Q5_1 against float x: d * (v . x) + m * sum x per block. */
AVX2 static inline __attribute__((always_inline)) float
df_q8_1(int t, int64_t nb, const uint8_t *w, const float *x)
{
	int bsz = quant_traits(t)->size;
	__m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
	int64_t i;

	for (i = 0; i < nb; i++, w += bsz, x += 32) {
		__m256i q = t == QUANT_Q4_1 ? nibbles(w + 4) : q5_bytes(w + 4, w + 8);
		__m256 sx = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)),
		    _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)));

		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w)), dot_i8_f32(q, x), acc);
		accm = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w + 2)), sx, accm);
	}
	return hsum_ps(acc) + hsum_ps(accm);
}

/* The min term of Q4_K/Q5_K: sum over 8 sub-blocks of m[j] * (bsums[2j] + bsums[2j+1]). */
AVX2 static inline int
k_minsum(const uint8_t m[8], const uint8_t *y)
{
	__m256i bs = _mm256_loadu_si256((const __m256i *)(y + 260));
	__m128i m8 = _mm_loadl_epi64((const __m128i *)m);
	/* m0 m0 m1 m1 ... as 16 int16 */
	__m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
	__m256i p = _mm256_madd_epi16(bs, m16);
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));

	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
	return _mm_cvtsi128_si32(s);
}

/* Q4_K and Q5_K against Q8_K. */
AVX2 static float
vd_q45_k(int t, int64_t nb, const uint8_t *w, const uint8_t *y)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
	int bsz = quant_traits(t)->size, q5 = t == QUANT_Q5_K;
	__m256 acc = _mm256_setzero_ps();
	float accm = 0.0f;
	int64_t i;
	int c;

	for (i = 0; i < nb; i++, w += bsz, y += 292) {
		const uint8_t *q = w + (q5 ? 48 : 16);
		__m256i qh = _mm256_loadu_si256((const __m256i *)(w + 16));
		__m256i isum = _mm256_setzero_si256();
		float dy;
		uint8_t sc[8], m[8];

		memcpy(&dy, y, 4);
		qi_scale_min_k4_all(w + 4, sc, m);
		for (c = 0; c < 4; c++, q += 32) {
			__m256i b = _mm256_loadu_si256((const __m256i *)q);
			__m256i lo = _mm256_and_si256(b, m4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
			__m256i p1, p2;

			if (q5) {
				lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(
				    _mm256_srli_epi16(qh, 2 * c), one), 4));
				hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(
				    _mm256_srli_epi16(qh, 2 * c + 1), one), 4));
			}
			p1 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y + 4 + 64 * c)));
			p2 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 36 + 64 * c)));
			isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c])));
			isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p2, _mm256_set1_epi16(sc[2 * c + 1])));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w) * dy), _mm256_cvtepi32_ps(isum), acc);
		accm += h2f(w + 2) * dy * (float)k_minsum(m, y);
	}
	return hsum_ps(acc) - accm;
}

/* Q6_K against Q8_K: values 0..63 (bias 32 taken off with the q8 sums). */
AVX2 static float
vd_q6_k(int64_t nb, const uint8_t *w, const uint8_t *y)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
	const __m256i k32 = _mm256_set1_epi8(32);
	__m256 acc = _mm256_setzero_ps();
	int64_t i;
	int n, k;

	for (i = 0; i < nb; i++, w += 210, y += 292) {
		const uint8_t *ql = w, *qh = w + 128, *yq = y + 4;
		const int8_t *sc = (const int8_t *)(w + 192);
		__m256i isum = _mm256_setzero_si256();
		float dy;

		memcpy(&dy, y, 4);
		for (n = 0; n < 2; n++, ql += 64, qh += 32, sc += 8, yq += 128) {
			__m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
			__m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
			__m256i h = _mm256_loadu_si256((const __m256i *)qh);
			__m256i q[4];

			q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
			    _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
			q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
			    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
			q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
			    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
			q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
			    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
			for (k = 0; k < 4; k++) {
				__m256i yy = _mm256_loadu_si256((const __m256i *)(yq + 32 * k));
				__m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], yy),
				    _mm256_maddubs_epi16(k32, yy));
				__m256i s = _mm256_setr_m128i(_mm_set1_epi16(sc[2 * k]), _mm_set1_epi16(sc[2 * k + 1]));

				isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w + 208) * dy),
		    _mm256_cvtepi32_ps(isum), acc);
	}
	return hsum_ps(acc);
}

/*
 * Any K-quant (or IQ4_XS) block unpacked to 256 signed bytes in element
 * order, an integer scale and min per 16 values, and the float d, dmin:
 * value i stands for d * sc[i / 16] * v[i] - dmin * m[i / 16].
 */
struct kblock {
	int8_t	v[QK_K];
	int16_t	sc[16], m[16];
	float	d, dmin;
};

AVX2 static void
kunpack_q2_k(const uint8_t *w, struct kblock *k)
{
	const __m256i m3 = _mm256_set1_epi8(3);
	int n, j;

	for (j = 0; j < 16; j++)
		k->sc[j] = w[j] & 0xF, k->m[j] = w[j] >> 4;
	for (n = 0; n < 2; n++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(w + 16 + 32 * n));

		for (j = 0; j < 4; j++)
			_mm256_storeu_si256((__m256i *)(k->v + 128 * n + 32 * j),
			    _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3));
	}
	k->d = h2f(w + 80), k->dmin = h2f(w + 82);
}

AVX2 static void
kunpack_q3_k(const uint8_t *w, struct kblock *k)
{
	const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
	__m256i hm = _mm256_loadu_si256((const __m256i *)w);
	int8_t sc[16];
	int n, j;

	qi_q3k_scales(w + 96, sc);
	for (j = 0; j < 16; j++)
		k->sc[j] = sc[j], k->m[j] = 0;
	for (n = 0; n < 2; n++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(w + 32 + 32 * n));

		for (j = 0; j < 4; j++) {
			__m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
			__m256i h = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * n + j), one);

			/* v = lo - 4 + 4h */
			_mm256_storeu_si256((__m256i *)(k->v + 128 * n + 32 * j), _mm256_add_epi8(
			    _mm256_sub_epi8(lo, _mm256_set1_epi8(4)), _mm256_slli_epi16(h, 2)));
		}
	}
	k->d = h2f(w + 108), k->dmin = 0;
}

AVX2 static void
kunpack_q45_k(int t, const uint8_t *w, struct kblock *k)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
	const uint8_t *q = w + (t == QUANT_Q5_K ? 48 : 16);
	__m256i qh = _mm256_loadu_si256((const __m256i *)(w + 16));
	uint8_t sc[8], m[8];
	int c;

	qi_scale_min_k4_all(w + 4, sc, m);
	for (c = 0; c < 8; c++) {
		k->sc[2 * c] = k->sc[2 * c + 1] = sc[c];
		k->m[2 * c] = k->m[2 * c + 1] = m[c];
	}
	for (c = 0; c < 4; c++, q += 32) {
		__m256i b = _mm256_loadu_si256((const __m256i *)q);
		__m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);

		if (t == QUANT_Q5_K) {
			lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(
			    _mm256_srli_epi16(qh, 2 * c), one), 4));
			hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(
			    _mm256_srli_epi16(qh, 2 * c + 1), one), 4));
		}
		_mm256_storeu_si256((__m256i *)(k->v + 64 * c), lo);
		_mm256_storeu_si256((__m256i *)(k->v + 64 * c + 32), hi);
	}
	k->d = h2f(w), k->dmin = h2f(w + 2);
}

AVX2 static void
kunpack_q6_k(const uint8_t *w, struct kblock *k)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
	const __m256i k32 = _mm256_set1_epi8(32);
	const uint8_t *ql = w, *qh = w + 128;
	int n, j;

	for (j = 0; j < 16; j++)
		k->sc[j] = (int8_t)w[192 + j], k->m[j] = 0;
	for (n = 0; n < 2; n++, ql += 64, qh += 32) {
		__m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
		__m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
		__m256i h = _mm256_loadu_si256((const __m256i *)qh);
		__m256i q[4];

		q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
		    _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
		q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
		    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
		q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
		    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
		q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
		    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
		for (j = 0; j < 4; j++)
			_mm256_storeu_si256((__m256i *)(k->v + 128 * n + 32 * j), _mm256_sub_epi8(q[j], k32));
	}
	k->d = h2f(w + 208), k->dmin = 0;
}

AVX2 static void
kunpack_iq4_xs(const uint8_t *w, struct kblock *k)
{
	const __m128i kiq = _mm_loadu_si128((const __m128i *)qi_kvalues_iq4nl);
	uint16_t sh = qi_rd16(w + 2);
	int ib;

	for (ib = 0; ib < 8; ib++) {
		__m256i q = nibbles(w + 8 + 16 * ib);
		__m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
		int ls = ((w[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);

		_mm256_storeu_si256((__m256i *)(k->v + 32 * ib),
		    _mm256_set_m128i(_mm_shuffle_epi8(kiq, hi), _mm_shuffle_epi8(kiq, lo)));
		k->sc[2 * ib] = k->sc[2 * ib + 1] = (int16_t)(ls - 32);
		k->m[2 * ib] = k->m[2 * ib + 1] = 0;
	}
	k->d = h2f(w), k->dmin = 0;
}

AVX2 static inline __attribute__((always_inline)) void
kunpack(int t, const uint8_t *w, struct kblock *k)
{
	switch (t) {
	case QUANT_Q2_K:	kunpack_q2_k(w, k); break;
	case QUANT_Q3_K:	kunpack_q3_k(w, k); break;
	case QUANT_Q4_K:
	case QUANT_Q5_K:	kunpack_q45_k(t, w, k); break;
	case QUANT_Q6_K:	kunpack_q6_k(w, k); break;
	default:		kunpack_iq4_xs(w, k); break;
	}
}

/* Unpacked K blocks against Q8_K (Q2_K, Q3_K, IQ4_XS). */
AVX2 static float
vd_kgeneric(int t, int64_t nb, const uint8_t *w, const uint8_t *y)
{
	int bsz = quant_traits(t)->size;
	__m256 acc = _mm256_setzero_ps();
	float accm = 0.0f;
	struct kblock k;
	int64_t i;
	int c;

	for (i = 0; i < nb; i++, w += bsz, y += 292) {
		__m256i isum = _mm256_setzero_si256();
		float dy;
		int msum = 0;

		memcpy(&dy, y, 4);
		kunpack(t, w, &k);
		for (c = 0; c < 8; c++) {
			__m256i v = _mm256_loadu_si256((const __m256i *)(k.v + 32 * c));
			__m256i yy = _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * c));
			__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(yy, v));
			__m256i s = _mm256_setr_m128i(_mm_set1_epi16(k.sc[2 * c]), _mm_set1_epi16(k.sc[2 * c + 1]));

			isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s));
		}
		if (k.dmin != 0.0f)
			for (c = 0; c < 16; c++)
				msum += k.m[c] * (int16_t)qi_rd16(y + 260 + 2 * c);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(k.d * dy), _mm256_cvtepi32_ps(isum), acc);
		accm += k.dmin * dy * (float)msum;
	}
	return hsum_ps(acc) - accm;
}

/* Unpacked K blocks against float x: per 16 values, d*sc * (v . x) - dmin*m * sum x. */
AVX2 static float
df_kgeneric(int t, int64_t nb, const uint8_t *w, const float *x)
{
	int bsz = quant_traits(t)->size;
	__m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
	struct kblock k;
	int64_t i;
	int g;

	for (i = 0; i < nb; i++, w += bsz) {
		kunpack(t, w, &k);
		for (g = 0; g < 16; g++, x += 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(k.v + 16 * g));
			__m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
			__m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), x0);

			s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8))), x1, s);
			acc = _mm256_fmadd_ps(_mm256_set1_ps(k.d * (float)k.sc[g]), s, acc);
			if (k.dmin != 0.0f)
				accm = _mm256_fmadd_ps(_mm256_set1_ps(k.dmin * (float)k.m[g]),
				    _mm256_add_ps(x0, x1), accm);
		}
	}
	return hsum_ps(acc) - hsum_ps(accm);
}

AVX2 float
quant_vec_dot_avx2(int t, int64_t n, const void *w, const void *xq)
{
	int64_t nb = n / quant_traits(t)->blck;

	switch (t) {
	case QUANT_F32: case QUANT_F16: case QUANT_BF16:
		return dot_plain(t, n, w, xq);
	case QUANT_Q8_0:	return vd_q8_0(QUANT_Q8_0, nb, w, xq);
	case QUANT_Q4_0:	return vd_q8_0(QUANT_Q4_0, nb, w, xq);
	case QUANT_Q5_0:	return vd_q8_0(QUANT_Q5_0, nb, w, xq);
	case QUANT_IQ4_NL:	return vd_q8_0(QUANT_IQ4_NL, nb, w, xq);
	case QUANT_MXFP4:	return vd_q8_0(QUANT_MXFP4, nb, w, xq);
	case QUANT_NVFP4:
		return vd_nvfp4(nb, w, xq);
	case QUANT_Q4_1:	return vd_q8_1(QUANT_Q4_1, nb, w, xq);
	case QUANT_Q5_1:	return vd_q8_1(QUANT_Q5_1, nb, w, xq);
	case QUANT_Q4_K: case QUANT_Q5_K:
		return vd_q45_k(t, nb, w, xq);
	case QUANT_Q6_K:
		return vd_q6_k(nb, w, xq);
	case QUANT_Q2_K: case QUANT_Q3_K: case QUANT_IQ4_XS:
		return vd_kgeneric(t, nb, w, xq);
	default:
		return quant_vec_dot_portable(t, n, w, xq);
	}
}

/* Quantized weights against float x: the common 32-value types directly,
 * others dequantized 1024 values at a time (whole blocks of every type). */
AVX2 float
quant_dot_f32_avx2(int t, int64_t n, const void *w, const float *x)
{
	const struct quant_traits *tr = quant_traits(t);
	const uint8_t *wb = w;
	float buf[1024], sum = 0.0f;
	int64_t i, m, nb = n / tr->blck;

	switch (t) {
	case QUANT_F32: case QUANT_F16: case QUANT_BF16:
		return dot_plain(t, n, w, x);
	case QUANT_Q8_0:	return df_q8_0(QUANT_Q8_0, nb, w, x);
	case QUANT_Q4_0:	return df_q8_0(QUANT_Q4_0, nb, w, x);
	case QUANT_Q5_0:	return df_q8_0(QUANT_Q5_0, nb, w, x);
	case QUANT_IQ4_NL:	return df_q8_0(QUANT_IQ4_NL, nb, w, x);
	case QUANT_MXFP4:	return df_q8_0(QUANT_MXFP4, nb, w, x);
	case QUANT_NVFP4:	return df_nvfp4(nb, w, x);
	case QUANT_Q4_1:	return df_q8_1(QUANT_Q4_1, nb, w, x);
	case QUANT_Q5_1:	return df_q8_1(QUANT_Q5_1, nb, w, x);
	case QUANT_Q2_K: case QUANT_Q3_K: case QUANT_Q4_K: case QUANT_Q5_K:
	case QUANT_Q6_K: case QUANT_IQ4_XS:
		return df_kgeneric(t, nb, w, x);
	}
	for (i = 0; i < n; i += m) {
		m = n - i < 1024 ? n - i : 1024;
		quant_dequantize_row(t, wb + i / tr->blck * tr->size, buf, m);
		sum += dot_plain(QUANT_F32, m, (const uint8_t *)buf, x + i);
	}
	return sum;
}

/*
 * Many activation rows against one weight row (quant_vec_dot_rows): each
 * weight block is loaded and unpacked once, then every row's accumulators
 * take the products the one-row function above takes, in its order, so
 * row r's result is that function's bit for bit.  What the rows share is
 * only what does not depend on the activations (the block's integers, its
 * absolute values, scale vectors); integer sums are exact, and each float
 * operation of a row is the one-row code's.  R rows a call (1..VR), R a
 * constant after inlining, so the accumulators stay in registers.
 */
enum { VR = 4 };

/* The 32-value types (Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4) against Q8_0: vd_q8_0's sums. */
AVX2 static inline __attribute__((always_inline)) void
vr_q8_0(int t, int64_t nb, const uint8_t *w, const uint8_t *xq, size_t ldx, int R, float *out)
{
	const __m256i one = _mm256_set1_epi16(1);
	int bsz = quant_traits(t)->size, r;
	__m256 acc[VR];
	int64_t i;

	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		acc[r] = _mm256_setzero_ps();
	for (i = 0; i < nb; i++, w += bsz, xq += 34) {
		float d;
		__m256i q = block_i8(t, w, &d), aq = _mm256_sign_epi8(q, q);

		_Pragma("GCC unroll 4")
		for (r = 0; r < R; r++) {
			const uint8_t *x = xq + r * ldx;
			__m256i y = _mm256_loadu_si256((const __m256i *)(x + 2));
			__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(y, q)), one);

			acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * h2f(x)), _mm256_cvtepi32_ps(p), acc[r]);
		}
	}
	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		out[r] = hsum_ps(acc[r]);
}

/*
 * Q4_1/Q5_1 against Q8_1: vd_q8_1's sums.  The block's (d, m) and each
 * row's (d, s) are read as f16 pairs, so one multiply makes both d * dy
 * and m * s (the one-row code's two products); lane 1 of sm[r] is its summ.
 */
AVX2 static inline __attribute__((always_inline)) void
vr_q8_1(int t, int64_t nb, const uint8_t *w, const uint8_t *xq, size_t ldx, int R, float *out)
{
	int bsz = quant_traits(t)->size, r;
	__m256 acc[VR];
	__m128 sm[VR];
	int64_t i;

	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		acc[r] = _mm256_setzero_ps(), sm[r] = _mm_setzero_ps();
	for (i = 0; i < nb; i++, w += bsz, xq += 36) {
		__m256i q = t == QUANT_Q4_1 ? nibbles(w + 4) : q5_bytes(w + 4, w + 8);
		uint32_t u;
		__m128 dm;

		memcpy(&u, w, 4);
		dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)u));
		_Pragma("GCC unroll 4")
		for (r = 0; r < R; r++) {
			const uint8_t *x = xq + r * ldx;
			__m128 p;

			memcpy(&u, x, 4);
			p = _mm_mul_ps(dm, _mm_cvtph_ps(_mm_cvtsi32_si128((int)u)));
			acc[r] = _mm256_fmadd_ps(_mm256_broadcastss_ps(p), _mm256_cvtepi32_ps(dot_u8(q,
			    _mm256_loadu_si256((const __m256i *)(x + 4)))), acc[r]);
			sm[r] = _mm_add_ps(sm[r], p);
		}
	}
	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		out[r] = hsum_ps(acc[r]) + _mm_cvtss_f32(_mm_movehdup_ps(sm[r]));
}

/* k_minsum with the mins already spread to 16 x int16 (m0 m0 m1 m1 ...). */
AVX2 static inline int
k_minsum16(__m256i m16, const uint8_t *y)
{
	__m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(y + 260)), m16);
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));

	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
	return _mm_cvtsi128_si32(s);
}

/* Q4_K/Q5_K against Q8_K: vd_q45_k's sums; the block unpacked once into v. */
AVX2 static inline __attribute__((always_inline)) void
vr_q45_k(int t, int64_t nb, const uint8_t *w, const uint8_t *xq, size_t ldx, int R, float *out)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
	int bsz = quant_traits(t)->size, q5 = t == QUANT_Q5_K, r, c;
	__m256 acc[VR];
	float accm[VR];
	int64_t i;

	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		acc[r] = _mm256_setzero_ps(), accm[r] = 0.0f;
	for (i = 0; i < nb; i++, w += bsz, xq += 292) {
		const uint8_t *q = w + (q5 ? 48 : 16);
		__m256i qh = _mm256_loadu_si256((const __m256i *)(w + 16)), v[8], s[8], m16;
		float d = h2f(w), dmin = h2f(w + 2);
		uint8_t sc[8], m[8];

		qi_scale_min_k4_all(w + 4, sc, m);
		m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)m),
		    _mm_loadl_epi64((const __m128i *)m)));
		for (c = 0; c < 4; c++, q += 32) {
			__m256i b = _mm256_loadu_si256((const __m256i *)q);
			__m256i lo = _mm256_and_si256(b, m4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);

			if (q5) {
				lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(
				    _mm256_srli_epi16(qh, 2 * c), one), 4));
				hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(
				    _mm256_srli_epi16(qh, 2 * c + 1), one), 4));
			}
			v[2 * c] = lo, v[2 * c + 1] = hi;
			s[2 * c] = _mm256_set1_epi16(sc[2 * c]);
			s[2 * c + 1] = _mm256_set1_epi16(sc[2 * c + 1]);
		}
		_Pragma("GCC unroll 4")
		for (r = 0; r < R; r++) {
			const uint8_t *y = xq + r * ldx;
			__m256i isum = _mm256_setzero_si256();
			float dy;

			memcpy(&dy, y, 4);
			for (c = 0; c < 8; c++)
				isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(v[c],
				    _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * c))), s[c]));
			acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), _mm256_cvtepi32_ps(isum), acc[r]);
			accm[r] += dmin * dy * (float)k_minsum16(m16, y);
		}
	}
	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		out[r] = hsum_ps(acc[r]) - accm[r];
}

/* Q6_K against Q8_K: vd_q6_k's sums; the block unpacked once into v. */
AVX2 static inline __attribute__((always_inline)) void
vr_q6_k(int64_t nb, const uint8_t *w, const uint8_t *xq, size_t ldx, int R, float *out)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
	const __m256i k32 = _mm256_set1_epi8(32);
	__m256 acc[VR];
	int64_t i;
	int r, n, k;

	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		acc[r] = _mm256_setzero_ps();
	for (i = 0; i < nb; i++, w += 210, xq += 292) {
		const uint8_t *ql = w, *qh = w + 128;
		const int8_t *sc = (const int8_t *)(w + 192);
		__m256i v[8], s[8];
		float d = h2f(w + 208);

		for (n = 0; n < 2; n++, ql += 64, qh += 32) {
			__m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
			__m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
			__m256i h = _mm256_loadu_si256((const __m256i *)qh);

			v[4 * n] = _mm256_or_si256(_mm256_and_si256(l0, m4),
			    _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
			v[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
			    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
			v[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
			    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
			v[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
			    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
			for (k = 0; k < 4; k++)
				s[4 * n + k] = _mm256_setr_m128i(_mm_set1_epi16(sc[8 * n + 2 * k]),
				    _mm_set1_epi16(sc[8 * n + 2 * k + 1]));
		}
		_Pragma("GCC unroll 4")
		for (r = 0; r < R; r++) {
			const uint8_t *y = xq + r * ldx;
			__m256i isum = _mm256_setzero_si256();
			float dy;

			memcpy(&dy, y, 4);
			for (k = 0; k < 8; k++) {
				__m256i yy = _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * k));
				__m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(v[k], yy),
				    _mm256_maddubs_epi16(k32, yy));

				isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s[k]));
			}
			acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), _mm256_cvtepi32_ps(isum), acc[r]);
		}
	}
	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		out[r] = hsum_ps(acc[r]);
}

/* Q2_K, Q3_K, IQ4_XS against Q8_K: vd_kgeneric's sums; |v| and the scale vectors shared. */
AVX2 static inline __attribute__((always_inline)) void
vr_kgeneric(int t, int64_t nb, const uint8_t *w, const uint8_t *xq, size_t ldx, int R, float *out)
{
	int bsz = quant_traits(t)->size, r, c;
	__m256 acc[VR];
	float accm[VR];
	struct kblock k;
	int64_t i;

	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		acc[r] = _mm256_setzero_ps(), accm[r] = 0.0f;
	for (i = 0; i < nb; i++, w += bsz, xq += 292) {
		__m256i v[8], av[8], s[8];

		kunpack(t, w, &k);
		for (c = 0; c < 8; c++) {
			v[c] = _mm256_loadu_si256((const __m256i *)(k.v + 32 * c));
			av[c] = _mm256_sign_epi8(v[c], v[c]);
			s[c] = _mm256_setr_m128i(_mm_set1_epi16(k.sc[2 * c]), _mm_set1_epi16(k.sc[2 * c + 1]));
		}
		_Pragma("GCC unroll 4")
		for (r = 0; r < R; r++) {
			const uint8_t *y = xq + r * ldx;
			__m256i isum = _mm256_setzero_si256();
			float dy;
			int msum = 0;

			memcpy(&dy, y, 4);
			for (c = 0; c < 8; c++) {
				__m256i yy = _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * c));

				isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(av[c],
				    _mm256_sign_epi8(yy, v[c])), s[c]));
			}
			if (k.dmin != 0.0f)
				for (c = 0; c < 16; c++)
					msum += k.m[c] * (int16_t)qi_rd16(y + 260 + 2 * c);
			acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(k.d * dy), _mm256_cvtepi32_ps(isum), acc[r]);
			accm[r] += k.dmin * dy * (float)msum;
		}
	}
	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		out[r] = hsum_ps(acc[r]) - accm[r];
}

/* NVFP4 against Q8_0: vd_nvfp4's sums; the block's scales and values shared. */
AVX2 static inline __attribute__((always_inline)) void
vr_nvfp4(int64_t nb, const uint8_t *w, const uint8_t *xq, size_t ldx, int R, float *out)
{
	__m256 acc[VR];
	int64_t i;
	int r;

	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		acc[r] = _mm256_setzero_ps();
	for (i = 0; i < nb; i++, w += 36, xq += 68) {
		__m256 s01, s23;
		__m256i q0 = nvfp4_i8(w + 4), q1 = nvfp4_i8(w + 20);

		nvfp4_scales(w, &s01, &s23);
		_Pragma("GCC unroll 4")
		for (r = 0; r < R; r++) {
			const uint8_t *x = xq + r * ldx;
			__m256i y0 = _mm256_loadu_si256((const __m256i *)(x + 2));
			__m256i y1 = _mm256_loadu_si256((const __m256i *)(x + 36));

			acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(s01, _mm256_set1_ps(h2f(x))),
			    _mm256_cvtepi32_ps(dot_i8(q0, y0)), acc[r]);
			acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(s23, _mm256_set1_ps(h2f(x + 34))),
			    _mm256_cvtepi32_ps(dot_i8(q1, y1)), acc[r]);
		}
	}
	_Pragma("GCC unroll 4")
	for (r = 0; r < R; r++)
		out[r] = hsum_ps(acc[r]);
}

/*
 * One kernel per type: rows in groups of VR, the rest (1..VR-1) by a
 * kernel made for that many, each its own constant R.
 */
#define VR_DEFINE(name, call) \
AVX2 static void \
name(int64_t nb, const uint8_t *w, const uint8_t *xq, size_t ldx, int m, float *out) \
{ \
	for (; m >= VR; m -= VR, xq += VR * ldx, out += VR) \
		call(VR); \
	switch (m) { \
	case 3:	call(3); break; \
	case 2:	call(2); break; \
	case 1:	call(1); break; \
	} \
}
#define C_Q8_0(R)	vr_q8_0(QUANT_Q8_0, nb, w, xq, ldx, R, out)
#define C_Q4_0(R)	vr_q8_0(QUANT_Q4_0, nb, w, xq, ldx, R, out)
#define C_Q5_0(R)	vr_q8_0(QUANT_Q5_0, nb, w, xq, ldx, R, out)
#define C_IQ4_NL(R)	vr_q8_0(QUANT_IQ4_NL, nb, w, xq, ldx, R, out)
#define C_MXFP4(R)	vr_q8_0(QUANT_MXFP4, nb, w, xq, ldx, R, out)
#define C_Q4_1(R)	vr_q8_1(QUANT_Q4_1, nb, w, xq, ldx, R, out)
#define C_Q5_1(R)	vr_q8_1(QUANT_Q5_1, nb, w, xq, ldx, R, out)
#define C_Q4_K(R)	vr_q45_k(QUANT_Q4_K, nb, w, xq, ldx, R, out)
#define C_Q5_K(R)	vr_q45_k(QUANT_Q5_K, nb, w, xq, ldx, R, out)
#define C_Q6_K(R)	vr_q6_k(nb, w, xq, ldx, R, out)
#define C_Q2_K(R)	vr_kgeneric(QUANT_Q2_K, nb, w, xq, ldx, R, out)
#define C_Q3_K(R)	vr_kgeneric(QUANT_Q3_K, nb, w, xq, ldx, R, out)
#define C_IQ4_XS(R)	vr_kgeneric(QUANT_IQ4_XS, nb, w, xq, ldx, R, out)
#define C_NVFP4(R)	vr_nvfp4(nb, w, xq, ldx, R, out)
VR_DEFINE(rows_q8_0, C_Q8_0)
VR_DEFINE(rows_q4_0, C_Q4_0)
VR_DEFINE(rows_q5_0, C_Q5_0)
VR_DEFINE(rows_iq4_nl, C_IQ4_NL)
VR_DEFINE(rows_mxfp4, C_MXFP4)
VR_DEFINE(rows_q4_1, C_Q4_1)
VR_DEFINE(rows_q5_1, C_Q5_1)
VR_DEFINE(rows_q4_k, C_Q4_K)
VR_DEFINE(rows_q5_k, C_Q5_K)
VR_DEFINE(rows_q6_k, C_Q6_K)
VR_DEFINE(rows_q2_k, C_Q2_K)
VR_DEFINE(rows_q3_k, C_Q3_K)
VR_DEFINE(rows_iq4_xs, C_IQ4_XS)
VR_DEFINE(rows_nvfp4, C_NVFP4)

AVX2 void
quant_vec_dot_rows_avx2(int t, int64_t n, const void *w, const void *xq, size_t ldx, int m,
    float *out)
{
	int64_t nb = n / quant_traits(t)->blck;
	const uint8_t *x = xq;

	if (m == 1 && t != QUANT_Q4_1 && t != QUANT_Q5_1) {	/* the one-row kernels are faster */
		out[0] = quant_vec_dot_avx2(t, n, w, xq);
		return;
	}
	switch (t) {
	case QUANT_Q8_0:	rows_q8_0(nb, w, x, ldx, m, out); return;
	case QUANT_Q4_0:	rows_q4_0(nb, w, x, ldx, m, out); return;
	case QUANT_Q5_0:	rows_q5_0(nb, w, x, ldx, m, out); return;
	case QUANT_IQ4_NL:	rows_iq4_nl(nb, w, x, ldx, m, out); return;
	case QUANT_MXFP4:	rows_mxfp4(nb, w, x, ldx, m, out); return;
	case QUANT_Q4_1:	rows_q4_1(nb, w, x, ldx, m, out); return;
	case QUANT_Q5_1:	rows_q5_1(nb, w, x, ldx, m, out); return;
	case QUANT_Q4_K:	rows_q4_k(nb, w, x, ldx, m, out); return;
	case QUANT_Q5_K:	rows_q5_k(nb, w, x, ldx, m, out); return;
	case QUANT_Q6_K:	rows_q6_k(nb, w, x, ldx, m, out); return;
	case QUANT_Q2_K:	rows_q2_k(nb, w, x, ldx, m, out); return;
	case QUANT_Q3_K:	rows_q3_k(nb, w, x, ldx, m, out); return;
	case QUANT_IQ4_XS:	rows_iq4_xs(nb, w, x, ldx, m, out); return;
	case QUANT_NVFP4:	rows_nvfp4(nb, w, x, ldx, m, out); return;
	}
	for (int r = 0; r < m; r++)
		out[r] = quant_vec_dot_avx2(t, n, w, x + r * ldx);
}

/*
 * One Q8_0 (s16 NULL) or Q8_1 block of activations, act_q8's bits
 * (quant_dot.c): the max of |x| (order free), d = amax / 127 and
 * id = 127 / amax each one division, x * id rounded half to even by
 * the conversion (MXCSR's default, as nearbyintf), and the exact sum.
 */
AVX2 static void
act_q8(const float *x, uint8_t *d16, int8_t *qs, uint8_t *s16)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 v[4], mx;
	__m128 m4;
	__m256i q[4], p;
	float amax, id;
	int j;

	for (j = 0; j < 4; j++)
		v[j] = _mm256_loadu_ps(x + 8 * j);
	mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
	    _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
	m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
	m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
	m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
	amax = _mm_cvtss_f32(m4);
	id = amax != 0.0f ? 127.0f / amax : 0.0f;
	qi_wr16(d16, qi_f2h(amax / 127.0f));
	for (j = 0; j < 4; j++)
		q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], _mm256_set1_ps(id)));
	if (s16 != NULL) {
		__m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
		__m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));

		h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
		h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
		qi_wr16(s16, qi_f2h(amax / 127.0f * (float)_mm_cvtsi128_si32(h)));
	}
	/* 32 x int32 -> 32 x int8 in order (the packs work per 128-bit lane) */
	p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
	p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	_mm256_storeu_si256((__m256i *)qs, p);
}

AVX2 void
quant_quantize_act_avx2(int t, const float *x, void *xq, int64_t n)
{
	int at = quant_vec_dot_type(t);
	uint8_t *y = xq;
	int64_t i;

	if (at != QUANT_Q8_0 && at != QUANT_Q8_1) {
		quant_quantize_act_portable(t, x, xq, n);
		return;
	}
	for (i = 0; i < n / 32; i++, x += 32)
		if (at == QUANT_Q8_0)
			act_q8(x, y + 34 * i, (int8_t *)(y + 34 * i + 2), NULL);
		else
			act_q8(x, y + 36 * i, (int8_t *)(y + 36 * i + 4), y + 36 * i + 2);
}

/*
 * Packed activation rows (quant_pack, quant_vec_dot_packed) for AVX-512
 * VNNI: one 512-bit register carries two rows' 8 lanes, so each of the
 * one-row kernel's 256-bit steps runs for two rows at once, lane for lane
 * the same operation.  Rows go in groups of 8 (4 pairs); a group is nb
 * blocks of PK_STRIDE(at) bytes:
 *   [0, 256)    pair p's quants: row 2p's 32 bytes, then row 2p+1's
 *               (Q8_0: each plus 128, as unsigned bytes)
 *   [256, 512)  pair p's scales d as floats, each 8 times
 *   [512, 544)  Q8_1 only: the 8 rows' s as floats
 * A row past m is zeros.  The integer sums: vpdpbusd adds the products
 * of 4 unsigned by 4 signed bytes into an int32 lane, as maddubs then
 * madd do (no 16-bit saturation can happen with these values); against
 * Q8_0 the activations go in as y + 128 and the sum starts from -128
 * times the sum of the 4 weights, so it is the sum of q y.
 */
enum { PK_ROWS = 8 };
#define PK_STRIDE(at) ((at) == QUANT_Q8_1 ? 544 : 512)
#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

static int
quant_pack_type(int t)
{
	switch (t) {
	case QUANT_Q8_0: case QUANT_Q4_0: case QUANT_Q5_0: case QUANT_IQ4_NL: case QUANT_MXFP4:
	case QUANT_Q4_1: case QUANT_Q5_1:
		return quant_vec_dot_type(t);
	default:
		return -1;
	}
}

size_t
quant_pack_bytes(int t, int64_t n, int m)
{
	int at = quant_pack_type(t);

	return at < 0 ? 0 : (size_t)(m + PK_ROWS - 1) / PK_ROWS * (size_t)(n / 32) * PK_STRIDE(at);
}

/* Row r (< 8) of a group: block i of xq into the packed block pb. */
static void
pack_block(int at, const uint8_t *xb, int r, uint8_t *pb)
{
	int p = r / 2, h = r % 2, j;
	const uint8_t *q = xb + (at == QUANT_Q8_1 ? 4 : 2);
	float d = qi_h2f(qi_rd16(xb)), *dv = (float *)(void *)(pb + 256 + 64 * p + 32 * h);

	for (j = 0; j < 32; j++)
		pb[64 * p + 32 * h + j] = at == QUANT_Q8_1 ? q[j] : q[j] ^ 0x80;
	for (j = 0; j < 8; j++)
		dv[j] = d;
	if (at == QUANT_Q8_1) {
		float sv = qi_h2f(qi_rd16(xb + 2));

		memcpy(pb + 512 + 4 * r, &sv, 4);
	}
}

void
quant_pack(int t, int64_t n, const void *xq, size_t ldxq, int m, void *pk)
{
	int at = quant_pack_type(t), bsz = at == QUANT_Q8_1 ? 36 : 34, stride = PK_STRIDE(at);
	int64_t nb = n / 32, i;
	uint8_t *o = pk;

	memset(pk, 0, quant_pack_bytes(t, n, m));	/* a Q8_0 row of zeros: 128s */
	if (at == QUANT_Q8_0)
		for (size_t b = 0; b < (size_t)((m + PK_ROWS - 1) / PK_ROWS) * nb; b++)
			memset(o + b * stride, 0x80, 256);
	for (int g = 0; g < m; g += PK_ROWS, o += nb * stride)
		for (int r = g; r < m && r < g + PK_ROWS; r++)
			for (i = 0; i < nb; i++)
				pack_block(at, (const uint8_t *)xq + r * ldxq + i * bsz, r - g,
				    o + i * stride);
}

/* The one-row kernel's final sum of 8 lanes (hsum_ps) for both halves of a. */
AVX512 static inline void
hsum2(__m512 a, float *lo, float *hi)
{
	*lo = hsum_ps(_mm512_castps512_ps256(a));
	*hi = hsum_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

/* Q4_1/Q5_1 against P pairs of Q8_1 rows: vd_q8_1's sums. */
AVX512 static inline __attribute__((always_inline)) void
vp_q8_1(int t, int64_t nb, const uint8_t *w, const uint8_t *pk, int P, float *out)
{
	int bsz = quant_traits(t)->size, p;
	__m512 acc[PK_ROWS / 2];
	__m256 sm = _mm256_setzero_ps();
	int64_t i;

	_Pragma("GCC unroll 4")
	for (p = 0; p < P; p++)
		acc[p] = _mm512_setzero_ps();
	for (i = 0; i < nb; i++, w += bsz, pk += 544) {
		__m256i q = t == QUANT_Q4_1 ? nibbles(w + 4) : q5_bytes(w + 4, w + 8);
		__m512i qz = _mm512_inserti64x4(_mm512_castsi256_si512(q), q, 1);
		uint32_t u;
		__m128 dm;
		__m512 dz;

		memcpy(&u, w, 4);
		dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)u));	/* d, m */
		dz = _mm512_broadcastss_ps(dm);
		_Pragma("GCC unroll 4")
		for (p = 0; p < P; p++) {
			__m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qz,
			    _mm512_loadu_si512((const void *)(pk + 64 * p)));
			__m512 sc = _mm512_mul_ps(dz, _mm512_loadu_ps((const float *)(const void *)
			    (pk + 256 + 64 * p)));

			acc[p] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(is), acc[p]);
		}
		sm = _mm256_add_ps(sm, _mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dm)),
		    _mm256_loadu_ps((const float *)(const void *)(pk + 512))));
	}
	{
		float s8[8], lo, hi;

		_mm256_storeu_ps(s8, sm);
		_Pragma("GCC unroll 4")
		for (p = 0; p < P; p++) {
			hsum2(acc[p], &lo, &hi);
			out[2 * p] = lo + s8[2 * p];
			out[2 * p + 1] = hi + s8[2 * p + 1];
		}
	}
}

/* The 32-value types against P pairs of Q8_0 rows: vd_q8_0's sums. */
AVX512 static inline __attribute__((always_inline)) void
vp_q8_0(int t, int64_t nb, const uint8_t *w, const uint8_t *pk, int P, float *out)
{
	int bsz = quant_traits(t)->size, p;
	__m512 acc[PK_ROWS / 2];
	int64_t i;

	_Pragma("GCC unroll 4")
	for (p = 0; p < P; p++)
		acc[p] = _mm512_setzero_ps();
	for (i = 0; i < nb; i++, w += bsz, pk += 512) {
		float d;
		__m256i q = block_i8(t, w, &d);
		__m512i qz = _mm512_inserti64x4(_mm512_castsi256_si512(q), q, 1);
		__m512i s0 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(
		    _mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), qz));
		__m512 dz = _mm512_set1_ps(d);

		_Pragma("GCC unroll 4")
		for (p = 0; p < P; p++) {
			__m512i is = _mm512_dpbusd_epi32(s0,
			    _mm512_loadu_si512((const void *)(pk + 64 * p)), qz);
			__m512 sc = _mm512_mul_ps(dz, _mm512_loadu_ps((const float *)(const void *)
			    (pk + 256 + 64 * p)));

			acc[p] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(is), acc[p]);
		}
	}
	_Pragma("GCC unroll 4")
	for (p = 0; p < P; p++)
		hsum2(acc[p], &out[2 * p], &out[2 * p + 1]);
}

/* Groups of 8 rows, the last of 1..4 pairs, each pair count its own constant. */
#define VP_DEFINE(name, call, stride) \
AVX512 static void \
name(int64_t nb, const uint8_t *w, const uint8_t *pk, int m, float *out) \
{ \
	float o[PK_ROWS]; \
	for (; m > 0; m -= PK_ROWS, pk += nb * (stride), out += PK_ROWS) { \
		switch (m >= PK_ROWS ? 4 : (m + 1) / 2) { \
		case 4:	call(4); break; \
		case 3:	call(3); break; \
		case 2:	call(2); break; \
		default: call(1); break; \
		} \
		memcpy(out, o, (size_t)(m < PK_ROWS ? m : PK_ROWS) * sizeof *o); \
	} \
}
#define P_Q8_0(P)	vp_q8_0(QUANT_Q8_0, nb, w, pk, P, o)
#define P_Q4_0(P)	vp_q8_0(QUANT_Q4_0, nb, w, pk, P, o)
#define P_Q5_0(P)	vp_q8_0(QUANT_Q5_0, nb, w, pk, P, o)
#define P_IQ4_NL(P)	vp_q8_0(QUANT_IQ4_NL, nb, w, pk, P, o)
#define P_MXFP4(P)	vp_q8_0(QUANT_MXFP4, nb, w, pk, P, o)
#define P_Q4_1(P)	vp_q8_1(QUANT_Q4_1, nb, w, pk, P, o)
#define P_Q5_1(P)	vp_q8_1(QUANT_Q5_1, nb, w, pk, P, o)
VP_DEFINE(packed_q8_0, P_Q8_0, 512)
VP_DEFINE(packed_q4_0, P_Q4_0, 512)
VP_DEFINE(packed_q5_0, P_Q5_0, 512)
VP_DEFINE(packed_iq4_nl, P_IQ4_NL, 512)
VP_DEFINE(packed_mxfp4, P_MXFP4, 512)
VP_DEFINE(packed_q4_1, P_Q4_1, 544)
VP_DEFINE(packed_q5_1, P_Q5_1, 544)

AVX512 void
quant_vec_dot_packed_avx512(int t, int64_t n, const void *w, const void *pk, int m, float *out)
{
	int64_t nb = n / 32;

	switch (t) {
	case QUANT_Q8_0:	packed_q8_0(nb, w, pk, m, out); break;
	case QUANT_Q4_0:	packed_q4_0(nb, w, pk, m, out); break;
	case QUANT_Q5_0:	packed_q5_0(nb, w, pk, m, out); break;
	case QUANT_IQ4_NL:	packed_iq4_nl(nb, w, pk, m, out); break;
	case QUANT_MXFP4:	packed_mxfp4(nb, w, pk, m, out); break;
	case QUANT_Q4_1:	packed_q4_1(nb, w, pk, m, out); break;
	case QUANT_Q5_1:	packed_q5_1(nb, w, pk, m, out); break;
	}
}

#else

size_t
quant_pack_bytes(int t, int64_t n, int m)
{
	return 0;
}

void
quant_pack(int t, int64_t n, const void *xq, size_t ldxq, int m, void *pk)
{
}

void
quant_vec_dot_packed_avx512(int t, int64_t n, const void *w, const void *pk, int m, float *out)
{
}

void
quant_quantize_act_avx2(int t, const float *x, void *xq, int64_t n)
{
	quant_quantize_act_portable(t, x, xq, n);
}

float
quant_vec_dot_avx2(int t, int64_t n, const void *w, const void *xq)
{
	return quant_vec_dot_portable(t, n, w, xq);
}

float
quant_dot_f32_avx2(int t, int64_t n, const void *w, const float *x)
{
	return quant_dot_f32_portable(t, n, w, x);
}

void
quant_vec_dot_rows_avx2(int t, int64_t n, const void *w, const void *xq, size_t ldx, int m,
    float *out)
{
	for (int r = 0; r < m; r++)
		out[r] = quant_vec_dot_portable(t, n, w, (const uint8_t *)xq + r * ldx);
}

#endif
