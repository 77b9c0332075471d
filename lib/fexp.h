/*
 * fexp: float arithmetic the CPU and the CUDA kernels must round alike.
 *
 * exp(x) as ggml's vectorized CPU ops compute it (ggml_v_expf, the
 * form its AVX-512 build uses), one definition for the CPU backend and the
 * CUDA kernels so both round alike: x = n ln2 + b with n = round(x / ln2),
 * a degree-5 polynomial in b for 2^(x/ln2 - n), scaled by 2^n; |n| > 192
 * gives 0 or Inf.  Within 1.5 ulp of expf, but not equal to it; the
 * softmax of an F16 cache and ggml's SiLU need these bits.  Every product
 * that meets a sum is an explicit fmaf, so no compiler contraction can
 * change a rounding.
 */
#ifndef FEXP_H
#define FEXP_H

#include <math.h>
#include <stdint.h>
#ifndef __CUDACC__
#include <string.h>
#endif

#ifdef __CUDACC__
#define FEXP_FN static __host__ __device__ __forceinline__
#else
#define FEXP_FN static inline
#endif

/* A product no compiler may fuse into a following add (nvcc contracts
 * a * b + c by default; C11 mode does not). */
#ifdef __CUDA_ARCH__
#define FEXP_MUL(a, b) __fmul_rn(a, b)
#else
#define FEXP_MUL(a, b) ((a) * (b))
#endif

#ifndef __CUDACC__
/*
 * scalbnf(p, k) for p in [0.5, 2) and |k| <= 192 as products by powers of
 * two, only the last one rounding (so the same bits, subnormals and
 * overflow included), with no call into libm.  The C side only: CUDA
 * keeps its scalbnf.
 */
static inline float
fexp_scale(float p, int k)
{
	float f, post = 1.0f;
	uint32_t u;

	if (k < -126)
		k += 100, post = 0x1p-100f;
	else if (k > 127)
		k -= 100, post = 0x1p100f;
	u = (uint32_t)(k + 127) << 23;
	memcpy(&f, &u, 4);
	return p * f * post;
}
#endif

FEXP_FN float
fexp_ggml(float x)
{
	float z = fmaf(x, 0x1.715476p+0f, 0x1.8p23f), n = z - 0x1.8p23f;
	float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x)), u = b * b;
	float p = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
	    fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u, fmaf(0x1.ffffecp-1f, b, 1.0f));

	if (isnan(x))
		return x;
	if (fabsf(n) > 192.0f)
		return n <= 0.0f ? 0.0f : INFINITY;
#ifdef __CUDACC__
	return scalbnf(p, (int)n);
#else
	return fexp_scale(p, (int)n);
#endif
}

/*
 * The sampler's weight of a candidate d = z - z_top (<= 0) under the most
 * likely one (lib/sample.h): fexp_ggml(d) in units of 2^-44, truncated (the
 * product by 2^44 is exact, the conversion drops the fraction); 0 from
 * about d < -30.5 and for a NaN d, 2^44 at d >= 0.
 */
FEXP_FN uint64_t
fexp_weight(float d)
{
	float e = fexp_ggml(d) * 0x1p44f;

	return e >= 0x1p44f ? (uint64_t)1 << 44 : e > 0.0f ? (uint64_t)e : 0;
}

/* A logit l of a token seen count times in the sampler's penalty window
 * (lib/sample.h): l / repeat when positive else l * repeat, less
 * presence + frequency * count. */
FEXP_FN float
fexp_penalty(float l, float repeat, float presence, float frequency, int count)
{
	l = l > 0.0f ? l / repeat : FEXP_MUL(l, repeat);
	return l - (presence + FEXP_MUL(frequency, (float)count));
}

/* The sampler's top-p target over weights summing to sum: the kept prefix
 * is the shortest whose sum reaches ceil(top_p * sum) (double products). */
FEXP_FN uint64_t
fexp_top_p(float top_p, uint64_t sum)
{
	return (uint64_t)ceil((double)top_p * (double)sum);
}

/* The least weight min-p keeps: ceil(min_p * 2^44), the top one's times min_p. */
FEXP_FN uint64_t
fexp_min_p(float min_p)
{
	return (uint64_t)ceil((double)min_p * 0x1p44);
}

/* The point a draw u in [0, 1) picks in kept weights summing to sum (> 0):
 * floor(u * sum), at most sum - 1; the draw is the first candidate whose
 * running sum passes it. */
FEXP_FN uint64_t
fexp_point(double u, uint64_t sum)
{
	uint64_t r = (uint64_t)(u * (double)sum);

	return r < sum ? r : sum - 1;
}

#endif
