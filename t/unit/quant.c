/*
 * lib/quant: the type table, scalar conversions, dequantize/quantize rows
 * and the dot products (both the portable and the AVX2 path where the CPU
 * has it).  Byte-for-byte agreement with ggml and gguf-py is t/quant.bats.
 */
#include "quant.h"
#include "quant_impl.h"
#include "util.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

/* splitmix64: a seeded stream of test values */
static uint64_t
rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static float
rnd_f(uint64_t *s)	/* uniform in [-1, 1) */
{
	return (float)((double)(rnd(s) >> 11) * 0x1p-52 - 1.0);
}

static float
rnd_normalish(uint64_t *s)
{
	return rnd_f(s) + rnd_f(s) + rnd_f(s);
}

/* gguf-py's GGML_QUANT_SIZES (gguf 0.x, constants.py), except Q8_1: gguf-py
 * says 40 bytes, ggml-common.h static_asserts 2 halves + 32 = 36. */
TEST(type_table_matches_ggml)
{
	static const struct { int id; const char *name; int blck, size; } want[] = {
		{ 0, "F32", 1, 4 }, { 1, "F16", 1, 2 }, { 2, "Q4_0", 32, 18 }, { 3, "Q4_1", 32, 20 },
		{ 6, "Q5_0", 32, 22 }, { 7, "Q5_1", 32, 24 }, { 8, "Q8_0", 32, 34 }, { 9, "Q8_1", 32, 36 },
		{ 10, "Q2_K", 256, 84 }, { 11, "Q3_K", 256, 110 }, { 12, "Q4_K", 256, 144 },
		{ 13, "Q5_K", 256, 176 }, { 14, "Q6_K", 256, 210 }, { 15, "Q8_K", 256, 292 },
		{ 16, "IQ2_XXS", 256, 66 }, { 17, "IQ2_XS", 256, 74 }, { 18, "IQ3_XXS", 256, 98 },
		{ 19, "IQ1_S", 256, 50 }, { 20, "IQ4_NL", 32, 18 }, { 21, "IQ3_S", 256, 110 },
		{ 22, "IQ2_S", 256, 82 }, { 23, "IQ4_XS", 256, 136 }, { 24, "I8", 1, 1 },
		{ 25, "I16", 1, 2 }, { 26, "I32", 1, 4 }, { 27, "I64", 1, 8 }, { 28, "F64", 1, 8 },
		{ 29, "IQ1_M", 256, 56 }, { 30, "BF16", 1, 2 }, { 34, "TQ1_0", 256, 54 },
		{ 35, "TQ2_0", 256, 66 }, { 39, "MXFP4", 32, 17 }, { 40, "NVFP4", 64, 36 },
		{ 41, "Q1_0", 128, 18 }, { 42, "Q2_0", 64, 18 },
	};
	static const int removed[] = { 4, 5, 31, 32, 33, 36, 37, 38 };
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct quant_traits *tr = quant_traits(want[i].id);

		CHECK(tr != NULL && !tr->removed && quant_valid(want[i].id));
		CHECK_EQ_STR(quant_name(want[i].id), want[i].name);
		CHECK_EQ_INT(tr->blck, want[i].blck);
		CHECK_EQ_INT(tr->size, want[i].size);
		CHECK_EQ_INT(quant_from_name(want[i].name), want[i].id);
	}
	for (i = 0; i < sizeof(removed) / sizeof(removed[0]); i++) {
		CHECK(quant_traits(removed[i])->removed);
		CHECK(!quant_valid(removed[i]));
		CHECK_EQ_INT(quant_row_size(removed[i], 32), 0);
		CHECK(!quant_can_dequantize(removed[i]));
	}
	CHECK(quant_traits(-1) == NULL && quant_traits(QUANT_TYPE_COUNT) == NULL);
	CHECK_EQ_STR(quant_name(99), "?");
	CHECK_EQ_INT(quant_from_name("q4_k"), QUANT_Q4_K);
	CHECK_EQ_INT(quant_from_name("Q4_2"), -1);
	CHECK_EQ_INT(quant_from_name("Q4_2 (removed)"), -1);
}

TEST(row_size)
{
	CHECK_EQ_INT(quant_row_size(QUANT_Q4_K, 4096), 16 * 144);
	CHECK_EQ_INT(quant_row_size(QUANT_NVFP4, 128), 72);
	CHECK_EQ_INT(quant_row_size(QUANT_NVFP4, 96), 0);
	CHECK_EQ_INT(quant_row_size(QUANT_F32, 3), 12);
	CHECK_EQ_INT(quant_row_size(QUANT_Q8_0, -32), 0);
	CHECK_EQ_INT(quant_row_size(QUANT_Q8_0, 0), 0);
}

/* llama-quantize's fallbacks for a row its block does not divide. */
TEST(fit_block)
{
	CHECK_EQ_INT(quant_fit_block(QUANT_Q4_K, 4096), QUANT_Q4_K);
	CHECK_EQ_INT(quant_fit_block(QUANT_Q4_K, 704), QUANT_Q5_0);
	CHECK_EQ_INT(quant_fit_block(QUANT_Q5_K, 2112), QUANT_Q5_1);
	CHECK_EQ_INT(quant_fit_block(QUANT_Q6_K, 96), QUANT_Q8_0);
	CHECK_EQ_INT(quant_fit_block(QUANT_NVFP4, 96), QUANT_Q8_0);
	CHECK_EQ_INT(quant_fit_block(QUANT_Q3_K, 128), QUANT_Q4_0);
	CHECK_EQ_INT(quant_fit_block(QUANT_IQ4_XS, 1280), QUANT_IQ4_XS);
	CHECK_EQ_INT(quant_fit_block(QUANT_IQ4_XS, 128), QUANT_IQ4_NL);
	CHECK_EQ_INT(quant_fit_block(QUANT_IQ2_XS, 160), QUANT_IQ4_NL);
	CHECK_EQ_INT(quant_fit_block(QUANT_Q4_K, 48), QUANT_F16);	/* Q5_0's 32 neither */
	CHECK_EQ_INT(quant_fit_block(QUANT_Q8_0, 48), QUANT_F16);
	CHECK_EQ_INT(quant_fit_block(QUANT_F32, 3), QUANT_F32);
}

/* Every finite half survives f16 -> f32 -> f16; every midpoint between two
 * neighbours rounds to the even one, and one ulp either side to the nearer. */
TEST(f16_exhaustive)
{
	uint32_t h;
	int bad = 0;

	for (h = 0; h < 0x10000 && bad < 5; h++) {
		float f = quant_f16_to_f32((uint16_t)h);
		uint16_t n;

		if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) {
			if (!isnan(f) || quant_f32_to_f16(f) != ((h & 0x8000) | 0x7E00))
				{ FAILF("NaN 0x%04x", (unsigned)h); bad++; }
			continue;
		}
		if (quant_f32_to_f16(f) != h)
			{ FAILF("round trip 0x%04x -> %g -> 0x%04x", (unsigned)h, f, quant_f32_to_f16(f)); bad++; }
		n = (uint16_t)(h + 1);
		if ((n & 0x7FFF) < 0x7C00 && (n & 0x8000) == (h & 0x8000)) {
			float g = quant_f16_to_f32(n), mid = (f + g) / 2;
			uint16_t even = (h & 1) ? n : (uint16_t)h;

			if (quant_f32_to_f16(mid) != even)
				{ FAILF("tie between 0x%04x and 0x%04x", (unsigned)h, (unsigned)n); bad++; }
			if (quant_f32_to_f16(nextafterf(mid, f)) != h || quant_f32_to_f16(nextafterf(mid, g)) != n)
				{ FAILF("near tie 0x%04x", (unsigned)h); bad++; }
		}
	}
	CHECK_EQ_INT(quant_f32_to_f16(65520.0f), 0x7C00);
	CHECK_EQ_INT(quant_f32_to_f16(nextafterf(65520.0f, 0)), 0x7BFF);
	CHECK_EQ_INT(quant_f32_to_f16(1e30f), 0x7C00);
	CHECK_EQ_INT(quant_f32_to_f16(-INFINITY), 0xFC00);
	CHECK_EQ_INT(quant_f32_to_f16(0x1p-25f), 0x0000);	/* tie to even: 0 */
	CHECK_EQ_INT(quant_f32_to_f16(nextafterf(0x1p-25f, 1)), 0x0001);
	CHECK_EQ_INT(quant_f32_to_f16(0x1.8p-24f), 0x0002);	/* tie to even: 2 */
	CHECK_EQ_INT(quant_f32_to_f16(1e-45f), 0x0000);
	CHECK_EQ_INT(quant_f32_to_f16(-0.0f), 0x8000);
	CHECK_EQ_INT(quant_f32_to_f16(-NAN), 0xFE00);
	CHECK(quant_f16_to_f32(0x0001) == 0x1p-24f);
	CHECK(quant_f16_to_f32(0x3C00) == 1.0f);
	CHECK(quant_f16_to_f32(0xFC00) == -INFINITY);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("f16c"))) static uint16_t
hw_f2h(float f)
{
	return (uint16_t)_cvtss_sh(f, 0);
}
#endif

/* Against the CPU's own F16C conversion (round to nearest even) on random
 * bit patterns, where the CPU has it. */
TEST(f16_matches_f16c)
{
#if defined(__x86_64__) && defined(__GNUC__)
	uint64_t s = 7;
	int i, bad = 0;

	if (!qi_cpu_has_f16c())
		return;
	for (i = 0; i < 2000000 && bad < 5; i++) {
		float f = qi_bits_f32((uint32_t)rnd(&s));

		if (isnan(f))
			continue;
		if (quant_f32_to_f16(f) != hw_f2h(f))
			{ FAILF("%a: 0x%04x, F16C 0x%04x", f, quant_f32_to_f16(f), hw_f2h(f)); bad++; }
	}
#endif
}

TEST(bf16)
{
	CHECK_EQ_INT(quant_f32_to_bf16(1.0f), 0x3F80);
	CHECK_EQ_INT(quant_f32_to_bf16(qi_bits_f32(0x3F808000)), 0x3F80);	/* tie, even */
	CHECK_EQ_INT(quant_f32_to_bf16(qi_bits_f32(0x3F818000)), 0x3F82);	/* tie, up to even */
	CHECK_EQ_INT(quant_f32_to_bf16(qi_bits_f32(0x3F808001)), 0x3F81);
	CHECK_EQ_INT(quant_f32_to_bf16(qi_bits_f32(0x7F7FFFFF)), 0x7F80);	/* max float -> Inf */
	CHECK_EQ_INT(quant_f32_to_bf16(INFINITY), 0x7F80);
	CHECK_EQ_INT(quant_f32_to_bf16(qi_bits_f32(0x7F800001)), 0x7FC0);	/* sNaN made quiet */
	CHECK_EQ_INT(quant_f32_to_bf16(qi_bits_f32(0xFFC12345)), 0xFFC1);
	CHECK_EQ_INT(quant_f32_to_bf16(qi_bits_f32(0x00012345)), 0x0001);	/* denormal kept */
	CHECK(quant_bf16_to_f32(0xC040) == -3.0f);
	CHECK(isnan(quant_bf16_to_f32(0x7FC0)));
}

TEST(ue4m3_and_e8m0)
{
	int c;

	CHECK(quant_ue4m3_to_f32(0x00) == 0.0f);
	CHECK(quant_ue4m3_to_f32(0x7F) == 0.0f);
	CHECK(quant_ue4m3_to_f32(0x38) == 1.0f);		/* exp 7, man 0 */
	CHECK(quant_ue4m3_to_f32(0x7E) == 448.0f);
	CHECK(quant_ue4m3_to_f32(0x01) == 0x1p-9f);
	CHECK(quant_ue4m3_to_f32(0xB8) == 1.0f);		/* sign bit ignored */
	/* ggml's encoder saturates exponent 15 (256..416) to 0x7E = 448 */
	for (c = 1; c < 0x7F; c++)
		if (quant_f32_to_ue4m3(quant_ue4m3_to_f32((uint8_t)c)) != (c < 0x78 ? c : 0x7E))
			FAILF("ue4m3 code 0x%02x encodes back to 0x%02x", c,
			    quant_f32_to_ue4m3(quant_ue4m3_to_f32((uint8_t)c)));
	CHECK_EQ_INT(quant_f32_to_ue4m3(1000.0f), 0x7E);
	CHECK_EQ_INT(quant_f32_to_ue4m3(-1.0f), 0);
	CHECK_EQ_INT(quant_f32_to_ue4m3(NAN), 0);
	CHECK_EQ_INT(quant_f32_to_ue4m3(0x1p-11f), 0);	/* below half the smallest step */
	CHECK_EQ_INT(quant_f32_to_ue4m3(1.0625f), 0x39);	/* halfway 1 .. 1.125 rounds up */
	CHECK(quant_e8m0_to_f32(127) == 1.0f);
	CHECK(quant_e8m0_to_f32(0) == 0x1p-127f);
	CHECK(quant_e8m0_to_f32(130) == 8.0f);
	CHECK(isinf(quant_e8m0_to_f32(255)));
}

/* Hand-made blocks, decoded by the formulas of ggml-quants.c. */
TEST(dequantize_known_blocks)
{
	uint8_t b[36] = { 0 };
	float y[64];
	int j;

	qi_wr16(b, 0x3C00);				/* Q4_0, d = 1 */
	for (j = 0; j < 16; j++)
		b[2 + j] = (uint8_t)(j | (15 - j) << 4);
	CHECK_EQ_INT(quant_dequantize_row(QUANT_Q4_0, b, y, 32), 0);
	CHECK(y[0] == -8 && y[15] == 7 && y[16] == 7 && y[31] == -8);

	memset(b, 0, sizeof(b));			/* NVFP4: split halves */
	b[0] = 0x38, b[1] = 0x40, b[2] = 0, b[3] = 0x7F;	/* scales 1, 2, 0, 0 */
	b[4] = 0x71;					/* elem 0: kv[1]=1, elem 8: kv[7]=12 */
	b[12] = 0x9F;					/* sub 1 elem 0: kv[15]=-12, elem 8: kv[9]=-1 */
	CHECK_EQ_INT(quant_dequantize_row(QUANT_NVFP4, b, y, 64), 0);
	CHECK(y[0] == 0.5f && y[8] == 6.0f && y[1] == 0.0f);
	CHECK(y[16] == -12.0f && y[24] == -1.0f);

	memset(b, 0, sizeof(b));			/* MXFP4: e = 128 -> d = 1 */
	b[0] = 128;
	b[1] = 0xF7;
	CHECK_EQ_INT(quant_dequantize_row(QUANT_MXFP4, b, y, 32), 0);
	CHECK(y[0] == 12.0f && y[16] == -12.0f);
}

TEST(dequantize_plain_types)
{
	uint8_t i8[2] = { 0x80, 0x7F };
	int16_t i16[2] = { -32768, 7 };
	int32_t i32[1] = { -123456 };
	int64_t i64[1] = { 1 << 24 };
	double f64[1] = { 0.1 };
	float y[2];

	CHECK(quant_dequantize_row(QUANT_I8, i8, y, 2) == 0 && y[0] == -128 && y[1] == 127);
	CHECK(quant_dequantize_row(QUANT_I16, i16, y, 2) == 0 && y[0] == -32768 && y[1] == 7);
	CHECK(quant_dequantize_row(QUANT_I32, i32, y, 1) == 0 && y[0] == -123456);
	CHECK(quant_dequantize_row(QUANT_I64, i64, y, 1) == 0 && y[0] == 16777216.0f);
	CHECK(quant_dequantize_row(QUANT_F64, f64, y, 1) == 0 && y[0] == 0.1f);
}

TEST(dequantize_refuses)
{
	uint8_t b[512] = { 0 };
	float y[512];

	y[0] = 42.0f;
	CHECK_EQ_INT(quant_dequantize_row(QUANT_Q4_K, b, y, 255), -1);
	CHECK_EQ_INT(quant_dequantize_row(QUANT_Q8_0, b, y, -32), -1);
	CHECK_EQ_INT(quant_dequantize_row(QUANT_IQ2_XXS, b, y, 256), -1);
	CHECK_EQ_INT(quant_dequantize_row(4, b, y, 32), -1);
	CHECK_EQ_INT(quant_dequantize_row(QUANT_TYPE_COUNT, b, y, 32), -1);
	CHECK_EQ_INT(quant_dequantize_row(-1, b, y, 32), -1);
	CHECK(y[0] == 42.0f);
	CHECK_EQ_INT(quant_dequantize_row(QUANT_Q4_K, b, y, 0), 0);
}

/* A row of n elements; kind 0 normal-ish, 1 with zero blocks, 2 scaled by
 * 10^[-2, 2] (inside every format's range: NVFP4 has no tensor scale here). */
static void
make_row(float *x, int64_t n, uint64_t seed, int kind)
{
	uint64_t s = seed;
	float scale = kind == 2 ? powf(10.0f, 2 * rnd_f(&s)) : 1.0f;
	int64_t i;

	for (i = 0; i < n; i++) {
		x[i] = rnd_normalish(&s) * scale;
		if (kind == 1 && (i / 64) % 3 == 1)
			x[i] = 0.0f;
	}
}

static const int quant_types[] = {
	QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1,
	QUANT_Q8_0, QUANT_Q8_1, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q8_K, QUANT_MXFP4,
	QUANT_NVFP4, QUANT_Q1_0, QUANT_Q2_0, QUANT_TQ1_0, QUANT_TQ2_0, QUANT_IQ4_NL, QUANT_IQ4_XS,
};

/* Worst error of a round trip, relative to the row's max |x|, per type. */
static double
max_rel_err(int t)
{
	switch (t) {
	case QUANT_F32:	return 0;
	case QUANT_F16:	return 1e-3;	/* relative to each value, checked below */
	case QUANT_BF16: return 8e-3;
	case QUANT_Q8_0: case QUANT_Q8_1: case QUANT_Q8_K: return 1.0 / 127;
	case QUANT_Q6_K: return 0.04;
	case QUANT_Q5_0: case QUANT_Q5_1: case QUANT_Q5_K: return 0.07;
	case QUANT_Q4_0: case QUANT_Q4_1: case QUANT_Q4_K: return 0.14;
	case QUANT_IQ4_NL: case QUANT_IQ4_XS: return 0.2;
	case QUANT_MXFP4: case QUANT_NVFP4: return 0.34;
	default:	return 2.1;	/* Q1_0, Q2_0, TQ*: signs and levels only */
	}
}

TEST(quantize_round_trips)
{
	enum { N = 4096 };
	static float x[N], y[N];
	static uint8_t q[N * 4 + 64];
	char err[UTIL_ERRLEN];
	size_t k;
	int seed, kind;

	for (k = 0; k < sizeof(quant_types) / sizeof(quant_types[0]); k++) {
		int t = quant_types[k];

		for (seed = 0; seed < 8; seed++)
			for (kind = 0; kind < 3; kind++) {
				float amax = 0;
				int64_t i;

				make_row(x, N, 1000 * seed + kind, kind);
				for (i = 0; i < N; i++)
					amax = fmaxf(amax, fabsf(x[i]));
				if (quant_quantize_row(t, x, q, N, err) != 0) {
					FAILF("%s: %s", quant_name(t), err);
					continue;
				}
				CHECK_EQ_INT(quant_dequantize_row(t, q, y, N), 0);
				for (i = 0; i < N; i++) {
					double e = fabs((double)y[i] - x[i]);
					double lim = t == QUANT_F16 || t == QUANT_BF16 ?
					    max_rel_err(t) * fabs(x[i]) + 0x1p-25 : max_rel_err(t) * amax;

					if (e > lim) {
						FAILF("%s seed %d kind %d: x[%lld] = %g came back %g",
						    quant_name(t), seed, kind, (long long)i, x[i], y[i]);
						break;
					}
				}
			}
	}
}

TEST(quantize_is_deterministic_per_block)
{
	static float x[1024];
	static uint8_t a[1024 * 4], b[1024 * 4];
	size_t k;

	make_row(x, 1024, 5, 0);
	for (k = 0; k < sizeof(quant_types) / sizeof(quant_types[0]); k++) {
		int t = quant_types[k], blck = quant_traits(t)->blck;
		size_t bs = quant_row_size(t, blck);
		int64_t off = (int64_t)blck * 2;

		/* a block quantizes the same alone as inside a row */
		CHECK_EQ_INT(quant_quantize_row(t, x, a, 1024, NULL), 0);
		CHECK_EQ_INT(quant_quantize_row(t, x + off, b, blck, NULL), 0);
		if (memcmp(a + 2 * bs, b, bs) != 0)
			FAILF("%s: block 2 differs alone", quant_name(t));
	}
}

TEST(quantize_rejects)
{
	float x[256] = { 0 };
	uint8_t q[1024];
	char err[UTIL_ERRLEN];

	memset(q, 0xAB, sizeof(q));
	x[7] = NAN;
	CHECK_EQ_INT(quant_quantize_row(QUANT_Q4_K, x, q, 256, err), -1);
	CHECK_EQ_STR(err, "quantize: element 7 is NaN");
	x[7] = -INFINITY;
	CHECK_EQ_INT(quant_quantize_row(QUANT_F16, x, q, 256, err), -1);
	CHECK_EQ_STR(err, "quantize: element 7 is infinite");
	CHECK(q[0] == 0xAB);
	x[7] = 0;
	CHECK_EQ_INT(quant_quantize_row(QUANT_Q4_K, x, q, 128, err), -1);
	CHECK_EQ_STR(err, "quantize: 128 elements are not whole blocks of 256 for 'Q4_K'");
	CHECK_EQ_INT(quant_quantize_row(QUANT_IQ2_XXS, x, q, 256, err), -1);
	CHECK_EQ_STR(err, "quantize: type 'IQ2_XXS' is not supported");
	CHECK_EQ_INT(quant_quantize_row(5, x, q, 256, NULL), -1);
	CHECK(!quant_can_quantize(QUANT_Q2_K) && quant_can_quantize(QUANT_NVFP4));
	CHECK(quant_can_quantize(QUANT_IQ4_NL) && quant_can_quantize(QUANT_IQ4_XS));
	/* denormals and zeros are fine */
	x[0] = 1e-40f, x[1] = -1e-45f;
	CHECK_EQ_INT(quant_quantize_row(QUANT_Q8_0, x, q, 256, err), 0);
}

/* A weight row: quantized floats where we can, else random bytes with sane scales. */
static void
make_weights(int t, uint8_t *w, int64_t n, uint64_t seed)
{
	const struct quant_traits *tr = quant_traits(t);
	static float x[8192];
	uint64_t s = seed;
	int64_t i, nb = n / tr->blck;

	if (quant_can_quantize(t)) {
		make_row(x, n, seed, (int)(seed % 3));
		quant_quantize_row(t, x, w, n, NULL);
		return;
	}
	for (i = 0; i < (int64_t)quant_row_size(t, n); i++)
		w[i] = (uint8_t)rnd(&s);
	for (i = 0; i < nb; i++) {
		uint8_t *b = w + i * tr->size;

		switch (t) {
		case QUANT_Q2_K:
			qi_wr16(b + 80, quant_f32_to_f16(rnd_f(&s) * 0.01f));
			qi_wr16(b + 82, quant_f32_to_f16(rnd_f(&s) * 0.01f));
			break;
		case QUANT_Q3_K:
			qi_wr16(b + 108, quant_f32_to_f16(rnd_f(&s) * 0.01f));
			break;
		default:	/* IQ4_NL, IQ4_XS */
			qi_wr16(b, quant_f32_to_f16(rnd_f(&s) * 0.01f));
			break;
		}
	}
}

static const int dot_types[] = {
	QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1,
	QUANT_Q8_0, QUANT_Q2_K, QUANT_Q3_K, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_IQ4_NL,
	QUANT_IQ4_XS, QUANT_MXFP4, QUANT_NVFP4,
};

static int
close_enough(double got, double want, double mag)
{
	return fabs(got - want) <= 2e-5 * mag + 1e-30;
}

/* Against Q8_1 the min term uses the block's stored s = f16(d * sum qs),
 * as ggml's does, not the exact sum: sum (w - m) x + m s per block. */
static double
q8_1_want(int t, int64_t n, const uint8_t *w, const float *wd, const uint8_t *xq, const float *xd)
{
	int bsz = quant_traits(t)->size;
	double want = 0;
	int64_t b, j;

	for (b = 0; b < n / 32; b++) {
		double m = quant_f16_to_f32(qi_rd16(w + b * bsz + 2));

		for (j = 0; j < 32; j++)
			want += ((double)wd[32 * b + j] - m) * xd[32 * b + j];
		want += m * quant_f16_to_f32(qi_rd16(xq + 36 * b + 2));
	}
	return want;
}

/* quant_vec_dot and quant_dot_f32 (and both internal paths) against the
 * double-precision dot of the dequantized operands, over many sizes and seeds. */
TEST(dots_match_dequantized_dots)
{
	enum { NMAX = 8192 };
	static uint8_t w[NMAX * 4], xq[NMAX * 4 + 512];
	static float x[NMAX], wd[NMAX], xd[NMAX];
	static const int nblocks[] = { 1, 2, 3, 5, 8, 16, 24 };
	int avx2 = strcmp(quant_dot_impl(), "avx2") == 0;
	size_t k, ni;
	int seed, bad = 0;

	for (k = 0; k < sizeof(dot_types) / sizeof(dot_types[0]); k++) {
		int t = dot_types[k], at = quant_vec_dot_type(t);
		int unit = quant_traits(t)->blck < 256 ? 256 : quant_traits(t)->blck;

		for (ni = 0; ni < sizeof(nblocks) / sizeof(nblocks[0]); ni++)
			for (seed = 0; seed < 6 && bad < 10; seed++) {
				int64_t n = (int64_t)unit * nblocks[ni], i;
				double want = 0, mag = 0, wantf = 0, magf = 0;
				float got[6];
				int j;

				if (t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16)
					n += 8 * seed + seed % 2;	/* odd tails for the plain types */
				make_weights(t, w, n, 77 * seed + ni);
				make_row(x, n, 31 * seed + 1000 + ni, seed % 3);
				quant_dequantize_row(t, w, wd, n);
				CHECK_EQ_INT(quant_quantize_act(t, x, xq, n), 0);
				quant_dequantize_row(at, xq, xd, n);
				for (i = 0; i < n; i++) {
					want += (double)wd[i] * xd[i], mag += fabs((double)wd[i] * xd[i]);
					wantf += (double)wd[i] * x[i], magf += fabs((double)wd[i] * x[i]);
				}
				if (at == QUANT_Q8_1)
					want = q8_1_want(t, n, w, wd, xq, xd);
				got[0] = quant_vec_dot(t, n, w, xq);
				got[1] = quant_vec_dot_portable(t, n, w, xq);
				got[2] = avx2 ? quant_vec_dot_avx2(t, n, w, xq) : got[1];
				got[3] = quant_dot_f32(t, n, w, x);
				got[4] = quant_dot_f32_portable(t, n, w, x);
				got[5] = avx2 ? quant_dot_f32_avx2(t, n, w, x) : got[4];
				for (j = 0; j < 6; j++)
					if (!close_enough(got[j], j < 3 ? want : wantf, j < 3 ? mag : magf)) {
						FAILF("%s n %lld seed %d path %d: %.9g, want %.9g (mag %g)",
						    quant_name(t), (long long)n, seed, j, got[j],
						    j < 3 ? want : wantf, j < 3 ? mag : magf);
						bad++;
					}
				/* same inputs, same bits */
				if (quant_vec_dot(t, n, w, xq) != got[0] || quant_dot_f32(t, n, w, x) != got[3])
					{ FAILF("%s: not deterministic", quant_name(t)); bad++; }
			}
	}
}

/*
 * The 32-value types against Q8_0/Q8_1 (the products of llama GGUFs, whose
 * sums follow ggml's x86 order) give the same bits on the portable and the
 * AVX2 path, so a model computes alike with and without AVX2.
 */
TEST(dots_of_32_value_types_are_the_same_bits_on_both_paths)
{
	static uint8_t w[8192 * 2], xq[8192 * 2];
	static float x[8192];
	static const int types[] = {
		QUANT_Q8_0, QUANT_Q4_0, QUANT_Q5_0, QUANT_IQ4_NL, QUANT_MXFP4, QUANT_Q4_1, QUANT_Q5_1,
	};
	static const int64_t ns[] = { 32, 96, 576, 1536, 8192 };

	if (strcmp(quant_dot_impl(), "avx2") != 0) {
		printf("# no AVX2 here: the portable path only\n");
		return;
	}
	for (size_t k = 0; k < sizeof types / sizeof *types; k++)
		for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
			for (int seed = 0; seed < 3; seed++) {
				int t = types[k];
				int64_t n = ns[i];
				float a, b;

				make_weights(t, w, n, 11 * seed + i);
				make_row(x, n, 7 * seed + 500 + i, seed);
				CHECK_EQ_INT(quant_quantize_act(t, x, xq, n), 0);
				a = quant_vec_dot_portable(t, n, w, xq);
				b = quant_vec_dot_avx2(t, n, w, xq);
				if (memcmp(&a, &b, sizeof a) != 0)
					FAILF("%s n %lld seed %d: portable %.9g, avx2 %.9g", quant_name(t),
					    (long long)n, seed, a, b);
			}
}

/*
 * quant_vec_dot_rows against quant_vec_dot one row at a time, bit for bit,
 * for every type with a dot: m = 1..16 rows and a few past (every tail of
 * the kernels' row groups), odd numbers of blocks, rows of their own
 * values (one all zero, one scaled up) at an odd stride.  On AVX2 the
 * multi-row kernels are checked against the one-row AVX2 kernels too, and
 * with AVX-512 VNNI the packed rows' products (quant_vec_dot_packed).
 */
TEST(dot_rows_are_the_one_row_dots_bit_for_bit)
{
	enum { MMAX = 23, NMAX = 4608 };
	static uint8_t w[NMAX * 4], xq[MMAX * (NMAX * 4 + 8)];
	static float x[NMAX];
	static const int nblocks[] = { 1, 3, 7, 18 };
	int avx2 = strcmp(quant_dot_impl(), "avx2") == 0, bad = 0, packed = 0;
	size_t psz;

	for (size_t k = 0; k < sizeof(dot_types) / sizeof(dot_types[0]); k++)
		for (size_t ni = 0; ni < sizeof nblocks / sizeof *nblocks; ni++) {
			int t = dot_types[k], at = quant_vec_dot_type(t);
			int64_t n = (int64_t)quant_traits(t)->blck * nblocks[ni];
			size_t ldx = quant_row_size(at, n) + 3;	/* odd: rows unaligned */

			if (n < 32)	/* F32/F16/BF16: odd tails past the vector loops; */
				n = 32 * n + 5, ldx = quant_row_size(at, n) + 4;	/* float rows */
			make_weights(t, w, n, 901 + 13 * k + ni);
			for (int r = 0; r < MMAX; r++) {
				make_row(x, n, 7000 + 31 * r + ni, r % 3);
				if (r == 5)
					memset(x, 0, n * sizeof *x);
				CHECK_EQ_INT(quant_quantize_act(t, x, xq + r * ldx, n), 0);
			}
			for (int m = 1; m <= MMAX && bad < 10; m += m < 16 ? 1 : 7) {
				float got[MMAX], one, one2;

				quant_vec_dot_rows(t, n, w, xq, ldx, m, got);
				for (int r = 0; r < m; r++) {
					one = quant_vec_dot(t, n, w, xq + r * ldx);
					one2 = avx2 ? quant_vec_dot_avx2(t, n, w, xq + r * ldx) : one;
					if (memcmp(&got[r], &one, 4) != 0 || memcmp(&one, &one2, 4) != 0) {
						FAILF("%s n %lld: row %d of %d rows %.9g, alone %.9g",
						    quant_name(t), (long long)n, r, m, got[r], one);
						bad++;
					}
				}
				if (avx2) {
					float got2[MMAX];

					quant_vec_dot_rows_avx2(t, n, w, xq, ldx, m, got2);
					if (memcmp(got, got2, (size_t)m * 4) != 0) {
						FAILF("%s n %lld m %d: the AVX2 rows differ", quant_name(t),
						    (long long)n, m);
						bad++;
					}
				}
				if ((psz = quant_pack_size(t, n, m)) > 0) {
					float got3[MMAX];
					uint8_t *pk = malloc(psz);

					packed++;
					quant_pack(t, n, xq, ldx, m, pk);
					quant_vec_dot_packed(t, n, w, pk, m, got3);
					for (int r = 0; r < m; r++)
						if (memcmp(&got3[r], &got[r], 4) != 0) {
							FAILF("%s n %lld: packed row %d of %d rows %.9g, alone %.9g",
							    quant_name(t), (long long)n, r, m, got3[r], got[r]);
							bad++;
						}
					free(pk);
				}
			}
		}
	if (packed == 0)
		printf("# no AVX-512 VNNI here: no packed products to check\n");
}

/* The activations' quantization: the AVX2 path writes the portable path's bytes. */
TEST(act_quantization_is_the_same_bytes_on_both_paths)
{
	static const int types[] = { QUANT_Q8_0, QUANT_Q4_1, QUANT_Q4_K, QUANT_BF16 };
	static float x[4096];
	static uint8_t a[4096 * 4 + 64], b[4096 * 4 + 64];

	if (strcmp(quant_dot_impl(), "avx2") != 0) {
		printf("# no AVX2 here: the portable path only\n");
		return;
	}
	for (size_t k = 0; k < sizeof types / sizeof *types; k++)
		for (int seed = 0; seed < 24; seed++) {
			int t = types[k];
			int64_t n = 256 * (1 + seed % 16);
			size_t sz = quant_row_size(quant_vec_dot_type(t), n);

			make_row(x, n, 1234 + 17 * seed, seed % 3);
			if (seed % 4 == 3)	/* tiny, huge and exactly representable values */
				for (int64_t i = 0; i < n; i += 5)
					x[i] = i % 3 ? ldexpf(x[i], seed - 40) : (float)(i % 255) - 127.0f;
			memset(a, 0xAB, sz), memset(b, 0xCD, sz);
			quant_quantize_act_portable(t, x, a, n);
			quant_quantize_act_avx2(t, x, b, n);
			if (memcmp(a, b, sz) != 0)
				FAILF("%s n %lld seed %d: the paths differ", quant_name(t), (long long)n, seed);
		}
}

TEST(dot_refuses)
{
	uint8_t w[1024] = { 0 };
	float x[256] = { 0 };

	CHECK(isnan(quant_vec_dot(QUANT_Q4_K, 128, w, w)));
	CHECK(isnan(quant_dot_f32(QUANT_IQ2_XXS, 256, w, x)));
	CHECK(isnan(quant_dot_f32(QUANT_Q8_1, 256, w, x)));
	CHECK_EQ_INT(quant_vec_dot_type(QUANT_Q8_K), -1);
	CHECK_EQ_INT(quant_vec_dot_type(QUANT_Q4_1), QUANT_Q8_1);
	CHECK_EQ_INT(quant_vec_dot_type(QUANT_NVFP4), QUANT_Q8_0);
	CHECK_EQ_INT(quant_vec_dot_type(QUANT_IQ4_XS), QUANT_Q8_K);
	CHECK_EQ_INT(quant_quantize_act(QUANT_Q4_K, x, w, 100), -1);
	CHECK(quant_vec_dot(QUANT_Q4_0, 0, w, w) == 0.0f);
	x[0] = x[1] = 0.0f;
	quant_vec_dot_rows(QUANT_Q4_K, 128, w, w, 0, 2, x);
	CHECK(isnan(x[0]) && isnan(x[1]));
}

/* The Q8_K activation carries bsums = sums of 16 quants, which the K dots use. */
TEST(q8_k_bsums)
{
	static float x[512];
	static uint8_t q[2 * 292];
	int b, j, k;

	make_row(x, 512, 9, 2);
	CHECK_EQ_INT(quant_quantize_row(QUANT_Q8_K, x, q, 512, NULL), 0);
	for (b = 0; b < 2; b++)
		for (j = 0; j < 16; j++) {
			int s = 0;

			for (k = 0; k < 16; k++)
				s += (int8_t)q[b * 292 + 4 + 16 * j + k];
			CHECK_EQ_INT((int16_t)qi_rd16(q + b * 292 + 260 + 2 * j), s);
		}
}

/* Many threads dotting the same rows get the single-thread bits: nothing
 * in the dot products is shared and mutable. */
enum { TH_N = 4096, TH_ROWS = 8, TH_THREADS = 4 };
static const int th_types[] = { QUANT_Q4_K, QUANT_Q8_0, QUANT_NVFP4, QUANT_BF16, QUANT_Q6_K };
static uint8_t th_w[5][TH_ROWS][TH_N * 2], th_xq[5][TH_N * 4];
static float th_x[TH_N], th_want[5][TH_ROWS][2];

static void *
th_run(void *arg)
{
	long bad = 0;
	int rep, k, r;

	(void)arg;
	for (rep = 0; rep < 50; rep++)
		for (k = 0; k < 5; k++)
			for (r = 0; r < TH_ROWS; r++) {
				int t = th_types[k];

				bad += quant_vec_dot(t, TH_N, th_w[k][r], th_xq[k]) != th_want[k][r][0];
				bad += quant_dot_f32(t, TH_N, th_w[k][r], th_x) != th_want[k][r][1];
			}
	return (void *)bad;
}

TEST(dots_from_many_threads)
{
	pthread_t th[TH_THREADS];
	int k, r, i;

	make_row(th_x, TH_N, 4242, 0);
	for (k = 0; k < 5; k++) {
		int t = th_types[k];

		CHECK_EQ_INT(quant_quantize_act(t, th_x, th_xq[k], TH_N), 0);
		for (r = 0; r < TH_ROWS; r++) {
			make_weights(t, th_w[k][r], TH_N, 100 * k + r);
			th_want[k][r][0] = quant_vec_dot(t, TH_N, th_w[k][r], th_xq[k]);
			th_want[k][r][1] = quant_dot_f32(t, TH_N, th_w[k][r], th_x);
		}
	}
	for (i = 0; i < TH_THREADS; i++)
		CHECK(pthread_create(&th[i], NULL, th_run, NULL) == 0);
	for (i = 0; i < TH_THREADS; i++) {
		void *bad;

		CHECK(pthread_join(th[i], &bad) == 0);
		CHECK_EQ_INT((long)bad, 0);
	}
}

#ifdef MEMRA_SAN
/*
 * Under the sanitizers (the CPU kernels' own loads unchecked, UTIL_SAN_HOT):
 * util_san_range passes a range of one allocation and stops the process
 * with ASan's report at the same range one byte longer, short (checked
 * whole) and long (its ends).  Each call in a child of its own.
 */
TEST(san_range_stops_at_a_range_past_its_allocation)
{
	static const size_t ns[] = { 100, (size_t)1 << 20 };

	for (int i = 0; i < 2; i++)
		for (int past = 0; past < 2; past++) {
			int st = -1;
			pid_t pid = fork();

			if (pid == 0) {
				char *p = malloc(ns[i]);
				int fd = open("/dev/null", O_WRONLY);

				if (p == NULL || fd < 0 || dup2(fd, 2) < 0)
					_exit(3);
				util_san_range(p, ns[i] + (size_t)past);
				free(p);
				_exit(0);
			}
			CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
			CHECK(WIFEXITED(st));
			if (past)
				CHECK(WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3);
			else
				CHECK_EQ_INT(WEXITSTATUS(st), 0);
		}
}
#endif

int
main(void)
{
	printf("# dot products: %s\n", quant_dot_impl());
#ifdef MEMRA_SAN
	RUN(san_range_stops_at_a_range_past_its_allocation);
#endif
	RUN(type_table_matches_ggml);
	RUN(row_size);
	RUN(fit_block);
	RUN(f16_exhaustive);
	RUN(f16_matches_f16c);
	RUN(bf16);
	RUN(ue4m3_and_e8m0);
	RUN(dequantize_known_blocks);
	RUN(dequantize_plain_types);
	RUN(dequantize_refuses);
	RUN(quantize_round_trips);
	RUN(quantize_is_deterministic_per_block);
	RUN(quantize_rejects);
	RUN(dots_match_dequantized_dots);
	RUN(dots_of_32_value_types_are_the_same_bits_on_both_paths);
	RUN(dot_rows_are_the_one_row_dots_bit_for_bit);
	RUN(act_quantization_is_the_same_bytes_on_both_paths);
	RUN(dot_refuses);
	RUN(q8_k_bsums);
	RUN(dots_from_many_threads);
	return test_summary();
}
