/*
 * fexp: exp(x) as ggml's vectorized CPU ops compute it (ggml_v_expf, the
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

#ifdef __CUDACC__
#define FEXP_FN static __host__ __device__ __forceinline__
#else
#define FEXP_FN static inline
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
	return scalbnf(p, (int)n);
}

#endif
