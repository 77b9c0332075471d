/*
 * quant_dot: CPU dot products of a weight row with an activation row.
 * Portable C here; the AVX2+FMA versions live in quant_avx2.c and are
 * picked at run time.  Integer sums are exact; the float accumulation
 * order is fixed per path, so a row's result never depends on the caller.
 */
#include "quant.h"
#include "quant_impl.h"

#include <math.h>
#include <stdlib.h>

#include "util.h"

int
quant_vec_dot_type(int t)
{
	switch (t) {
	case QUANT_F32: case QUANT_F16: case QUANT_BF16:
		return QUANT_F32;
	case QUANT_Q4_0: case QUANT_Q5_0: case QUANT_Q8_0: case QUANT_IQ4_NL:
	case QUANT_MXFP4: case QUANT_NVFP4:
		return QUANT_Q8_0;
	case QUANT_Q4_1: case QUANT_Q5_1:
		return QUANT_Q8_1;
	case QUANT_Q2_K: case QUANT_Q3_K: case QUANT_Q4_K: case QUANT_Q5_K:
	case QUANT_Q6_K: case QUANT_IQ4_XS:
		return QUANT_Q8_K;
	default:
		return -1;
	}
}

/*
 * One Q8_0 (s == NULL) or Q8_1 block of activations as ggml's x86 CPU
 * backend quantizes them (quantize_row_q8_0/q8_1, its AVX path): the
 * inverse scale is 127/amax in one rounding (the _ref form's 1/(amax/127)
 * can differ in its last bit) and x*id is rounded half to even (_ref:
 * half away from zero).  Either difference moves a quant by one now and
 * then, which llama.cpp's logits feel.  qs: the 32 quants; s: their sum
 * times d, as fp16 (Q8_1).
 */
static void
act_q8(const float *x, uint8_t *d16, int8_t *qs, uint8_t *s16)
{
	float amax = 0.0f, d, id;
	int j, sum = 0;

	for (j = 0; j < 32; j++)
		amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
	d = amax / 127.0f;
	id = amax != 0.0f ? 127.0f / amax : 0.0f;
	qi_wr16(d16, qi_f2h(d));
	for (j = 0; j < 32; j++) {
		qs[j] = (int8_t)nearbyintf(x[j] * id);
		sum += qs[j];
	}
	if (s16 != NULL)
		qi_wr16(s16, qi_f2h(d * (float)sum));
}

static int has_avx2(void);

int
quant_quantize_act(int t, const float *x, void *xq, int64_t n)
{
	int at = quant_vec_dot_type(t);

	if (at < 0 || n < 0 || n % quant_traits(t)->blck != 0)
		return -1;
	if (has_avx2())
		quant_quantize_act_avx2(t, x, xq, n);
	else
		quant_quantize_act_portable(t, x, xq, n);
	return 0;
}

void
quant_quantize_act_portable(int t, const float *x, void *xq, int64_t n)
{
	int at = quant_vec_dot_type(t);
	const struct quant_traits *tr;
	uint8_t *y = xq;
	int64_t i;

	if (at == QUANT_F32) {
		memcpy(xq, x, (size_t)n * 4);
		return;
	}
	tr = quant_traits(at);
	for (i = 0; i < n / tr->blck; i++) {
		const float *xb = x + i * tr->blck;
		uint8_t *b = y + i * tr->size;

		if (at == QUANT_Q8_0)
			act_q8(xb, b, (int8_t *)(b + 2), NULL);
		else if (at == QUANT_Q8_1)
			act_q8(xb, b, (int8_t *)(b + 4), b + 2);
		else
			quant_quantize_block(at, xb, b);
	}
}

/* --- portable dot products, one per weight type --- */

static float
dot_f32_c(int64_t n, const float *w, const float *x)
{
	float acc[8] = { 0 };
	int64_t i;
	int k;

	for (i = 0; i + 8 <= n; i += 8)
		for (k = 0; k < 8; k++)
			acc[k] += w[i + k] * x[i + k];
	for (k = 0; i < n; i++, k++)
		acc[k] += w[i] * x[i];
	return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/*
 * The sums of the 32-value types in the AVX2 code's order (quant_avx2.c,
 * itself ggml's x86 vec_dot order), so both paths give the same bits: 8
 * lanes, lane k a chain of fused multiply-adds of (block scale) times the
 * integer sum of the block's values 4k..4k+3, lanes added as its hsum.
 */
static float
lanes8_total(const float *a)
{
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static void
lanes8_block(float *acc, float s, const int *v, const int8_t *q)
{
	for (int k = 0; k < 8; k++) {
		int isum = 0;

		for (int j = 4 * k; j < 4 * k + 4; j++)
			isum += v[j] * q[j];
		acc[k] = fmaf(s, (float)isum, acc[k]);
	}
}

/* Against Q8_0 activations: groups of 32 values (16 for NVFP4) with one
 * scale each; a group's integer dot times both scales. */
static float
vd_q8_0(int t, int64_t n, const uint8_t *w, const uint8_t *xq)
{
	const struct quant_traits *tr = quant_traits(t);
	int g = t == QUANT_NVFP4 ? 16 : 32, v[64], j, k;
	float ws[4], sum = 0.0f, acc[8] = { 0 };
	int64_t i;

	if (tr->blck == 32) {	/* NVFP4 (64) keeps its own order: not a ggml type */
		for (i = 0; i < n; i += 32, w += tr->size, xq += 34) {
			quant_block_ints(t, w, v, ws);
			lanes8_block(acc, ws[0] * qi_h2f(qi_rd16(xq)), v, (const int8_t *)(xq + 2));
		}
		return lanes8_total(acc);
	}
	for (i = 0; i < n; i += tr->blck, w += tr->size) {
		quant_block_ints(t, w, v, ws);
		for (j = 0; j < tr->blck / g; j++) {
			int64_t e = i + j * g;
			const uint8_t *q8 = xq + e / 32 * 34 + 2 + e % 32;
			int isum = 0;

			for (k = 0; k < g; k++)
				isum += v[j * g + k] * (int8_t)q8[k];
			sum += (float)isum * (ws[j] * qi_h2f(qi_rd16(xq + e / 32 * 34)));
		}
	}
	return sum;
}

/* Q4_1/Q5_1 against Q8_1: d * dy * isum in lanes, plus the sum of m * s
 * (s = dy * sum of qs) in block order. */
static float
vd_q8_1(int t, int64_t nb, const uint8_t *w, const uint8_t *xq)
{
	int bsz = quant_traits(t)->size, v[64];
	float summ = 0.0f, ws[4], acc[8] = { 0 };
	int64_t i;

	for (i = 0; i < nb; i++, w += bsz, xq += 36) {
		quant_block_ints(t, w, v, ws);
		lanes8_block(acc, ws[0] * qi_h2f(qi_rd16(xq)), v, (const int8_t *)(xq + 4));
		summ += ws[1] * qi_h2f(qi_rd16(xq + 2));
	}
	return lanes8_total(acc) + summ;
}

/* K-quants and IQ4_XS against Q8_K: integer sums per sub-block. */
static float
vd_k(int t, int64_t nb, const uint8_t *w, const uint8_t *xq)
{
	int bsz = quant_traits(t)->size, v[QK_K], j, k;
	float sum = 0.0f;
	int64_t i;

	for (i = 0; i < nb; i++, w += bsz, xq += 292) {
		struct qi_kscales ks;
		float dy;
		int isum = 0, msum = 0;

		memcpy(&dy, xq, 4);
		quant_kblock_ints(t, w, v, &ks);
		for (j = 0; j < ks.nsub; j++) {
			int per = QK_K / ks.nsub, s = 0;

			for (k = 0; k < per; k++)
				s += v[j * per + k] * (int8_t)xq[4 + j * per + k];
			isum += s * ks.sc[j];
		}
		if (ks.has_min)
			for (j = 0; j < 16; j++)
				msum += ks.m[j * ks.nsub / 16] * (int16_t)qi_rd16(xq + 260 + 2 * j);
		sum += ks.d * dy * (float)isum - ks.dmin * dy * (float)msum;
	}
	return sum;
}

float
quant_vec_dot_portable(int t, int64_t n, const void *w, const void *xq)
{
	int64_t nb = n / quant_traits(t)->blck;

	switch (quant_vec_dot_type(t)) {
	case QUANT_F32:	return quant_dot_f32_portable(t, n, w, xq);
	case QUANT_Q8_0: return vd_q8_0(t, n, w, xq);
	case QUANT_Q8_1: return vd_q8_1(t, nb, w, xq);
	case QUANT_Q8_K: return vd_k(t, nb, w, xq);
	default:	return NAN;
	}
}

float
quant_dot_f32_portable(int t, int64_t n, const void *w, const float *x)
{
	const struct quant_traits *tr = quant_traits(t);
	const uint8_t *wb = w;
	float buf[1024], sum = 0.0f;
	int64_t i, m;

	if (t == QUANT_F32)
		return dot_f32_c(n, w, x);
	for (i = 0; i < n; i += m) {
		m = n - i < 1024 ? n - i : 1024;
		quant_dequantize_row(t, wb + i / tr->blck * tr->size, buf, m);
		sum += dot_f32_c(m, buf, x + i);
	}
	return sum;
}

/*
 * AVX2 + FMA + F16C, decided once at load time: CPUID traps to the
 * hypervisor on virtual machines (tens of microseconds), far too slow per
 * call.  Written once by the constructor before main, only read after:
 * no state shared mutably between threads.  (clang's __builtin_cpu_supports
 * has no "f16c": CPUID.1:ECX bit 29 is read instead.)
 */
static int cpu_avx2, cpu_avx512;

__attribute__((constructor)) static void
detect_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	cpu_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && qi_cpu_has_f16c();
	cpu_avx512 = cpu_avx2 && __builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512vnni");
#endif
}

static inline int
has_avx2(void)
{
	return cpu_avx2;
}

const char *
quant_dot_impl(void)
{
	return has_avx2() ? "avx2" : "portable";
}

static int
dot_ok(int t, int64_t n)
{
	return quant_vec_dot_type(t) >= 0 && n >= 0 && n % quant_traits(t)->blck == 0;
}

float
quant_vec_dot(int t, int64_t n, const void *w, const void *xq)
{
	if (!dot_ok(t, n))
		return NAN;
	if (has_avx2())
		return quant_vec_dot_avx2(t, n, w, xq);
	return quant_vec_dot_portable(t, n, w, xq);
}

void
quant_vec_dot_rows(int t, int64_t n, const void *w, const void *xq, size_t ldxq, int m,
    float *out)
{
	const uint8_t *x = xq;
	int r;

	if (!dot_ok(t, n)) {
		for (r = 0; r < m; r++)
			out[r] = NAN;
		return;
	}
	if (has_avx2()) {
		quant_vec_dot_rows_avx2(t, n, w, xq, ldxq, m, out);
		return;
	}
	for (r = 0; r < m; r++)
		out[r] = quant_vec_dot_portable(t, n, w, x + r * ldxq);
}

size_t
quant_pack_size(int t, int64_t n, int m)
{
	if (!cpu_avx512 || m < 1 || !dot_ok(t, n))
		return 0;
	return quant_pack_bytes(t, n, m);
}

void
quant_vec_dot_packed(int t, int64_t n, const void *w, const void *pk, int m, float *out)
{
	quant_vec_dot_packed_avx512(t, n, w, pk, m, out);
}

float
quant_dot_f32(int t, int64_t n, const void *w, const float *x)
{
	if (!dot_ok(t, n))
		return NAN;
	if (has_avx2())
		return quant_dot_f32_avx2(t, n, w, x);
	return quant_dot_f32_portable(t, n, w, x);
}
