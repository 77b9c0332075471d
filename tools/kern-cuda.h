/*
 * kern-cuda.h: the CUDA that kernels' own device code uses, as host C++,
 * for the CPU runs of that code (tools/matvec-qkt-kern.cc, moe-gemm-kern,
 * matvec-q8-kern, moe-route-kern; not built by make): the qualifiers as
 * nothing, the vector types and their make_ functions,
 * threadIdx and blockIdx (a runner sets them), the float operations
 * rounded once each (volatile floats; build with -ffp-contract=off),
 * __fmaf_rn by fmaf, dp4a, the funnel shifts (wrapped and clamped), __ldg,
 * min, pdl_enter; with lib/quant.h included first, fp16 by its
 * quant_f16_to_f32.  Collectives (barriers, shuffles, mma) are each
 * runner's own (tools/kern-coro.h).
 */
#ifndef MEMRA_KERN_CUDA_H
#define MEMRA_KERN_CUDA_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define __host__
#define __device__
#define __global__
#define __shared__
#define __forceinline__ inline
#define __restrict__ __restrict

struct int2 { int x, y; };
struct uint2 { unsigned x, y; };
struct int4 { int x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
struct idx3 { unsigned x, y, z; };

/* the running thread's (set by the runner) */
static idx3 threadIdx __attribute__((unused)), blockIdx __attribute__((unused));

static inline int2 make_int2(int x, int y) { return int2{ x, y }; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{ x, y, z, w }; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
	return uint4{ x, y, z, w };
}

static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }

static inline int __dp4a(int a, int b, int c)
{
	for (int k = 0; k < 4; k++)
		c += (int8_t)((uint32_t)a >> 8 * k) * (int8_t)((uint32_t)b >> 8 * k);
	return c;
}

/* hi:lo shifted right by sh % 32 (__funnelshift_r), by min(sh, 32)
 * (__funnelshift_rc): the low word */
static inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, unsigned sh)
{
	return (uint32_t)(((uint64_t)hi << 32 | lo) >> (sh & 31));
}
static inline uint32_t __funnelshift_rc(uint32_t lo, uint32_t hi, unsigned sh)
{
	return (uint32_t)(((uint64_t)hi << 32 | lo) >> (sh < 32 ? sh : 32));
}

template <typename V>
static inline V __ldg(const V *p) { return *p; }
template <typename A, typename B>
static inline A min(A a, B b) { return a < (A)b ? a : (A)b; }
static inline void pdl_enter(void) {}

#ifdef MEMRA_QUANT_H
struct half_ { unsigned short u; };
static inline half_ __ushort_as_half(unsigned short u) { return half_{ u }; }
static inline float __half2float(half_ h) { return quant_f16_to_f32(h.u); }
#endif

#endif
