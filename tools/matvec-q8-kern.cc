/*
 * matvec-q8-kern: cuda/matvec_q8.cuh's own device code (mv8_row and what
 * it calls: mv8_block, mv8_half, mv8_hw, mv8_ld16 and the decodes) run on
 * the CPU, lane by lane, then k_mv8's butterfly (mv8_store's order), for
 * tools/matvec-q8-emu.c's -k (not built by make): the kernel's text
 * against the C model of it, bit for bit.  Q8_0 by one lane a block or
 * two, Q4_0 and Q5_0 by two, Q4_1 and Q5_1 by one; every M of 1..16 (a
 * kernel instance reads M input rows and the caller stores the first m:
 * k_mv8 at M = m, k_moe_mv8g at the least power of two that holds m).
 * The weight words are read through the kernel's own pointer casts, so
 * a read below or past an allocation (ASan) or off its alignment
 * (UBSan's alignment check) is the kernel's.  The intrinsics: dp4a,
 * the funnel shifts (clamped and wrapped), fp16 by lib/quant, __fmaf_rn
 * by fmaf, the others rounded once (volatile floats, -ffp-contract=off).
 * NVFP4's sub-blocks (mv8_nv) stay in cuda/matvec_q8.cu and are not run
 * here.
 * Build (t/emu.bats), in a directory D:
 *   g++ -O2 -std=c++17 -ffp-contract=off -fno-strict-aliasing -Wno-unknown-pragmas \
 *       -Icuda -Ilib -c -o D/q8kern.o tools/matvec-q8-kern.cc
 * and link it with tools/matvec-q8-emu.c built with -DQ8_KERN.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "quant.h"
}

/* --- the CUDA the device code uses --------------------------------------- */

#include "kern-cuda.h"

/* matvec_q8.cu's, before it includes the file: its types and mv8_nv's
 * declaration (NVFP4, never instantiated here) */
enum { Q8_T_Q4_0 = 2, Q8_T_Q4_1 = 3, Q8_T_Q5_0 = 6, Q8_T_Q5_1 = 7, Q8_T_Q8_0 = 8,
	Q8_T_IQ4_NL = 20, Q8_T_IQ4_XS = 23, Q8_T_NVFP4 = 40 };
template <int M, int A, int LO = 0>
void mv8_nv(const uint8_t *wr, int nsub, int s, bool two, int nb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, float *acc, uint4 tab);
#include "matvec_q8.cuh"

/* --- the warp ------------------------------------------------------------ */

/* mv8_tab's words for m <= 16 (its or'ed m >> 5 is 0) */
static uint4
tab16(void)
{
	return make_uint4(0x03020100u, 0xFDFEFF00u, 0x32103210u, MV8_MAGIC);
}

/* k_mv8<T, M, L> for the weight row at wr: each lane's mv8_row, then
 * mv8_store's butterfly (lane l adds lane l ^ o's sum, o = 16 .. 1) for
 * the first m rows, lane 0's into y[j] */
template <int T, int L, int M>
static void
warp_run(const uint8_t *wr, int nb, const int8_t *q, const float *dx, const float *sx, int m,
    float *y)
{
	float acc[32][M];

	for (int l = 0; l < 32; l++)
		mv8_row<T, M, L, 0, 0>(wr, nb, q, dx, sx, l, tab16(), acc[l]);
	for (int j = 0; j < m && j < M; j++) {
		float v[32], u[32];
		for (int l = 0; l < 32; l++)
			v[l] = acc[l][j];
		for (int o = 16; o > 0; o >>= 1) {
			for (int l = 0; l < 32; l++)
				u[l] = __fadd_rn(v[l], v[l ^ o]);
			memcpy(v, u, sizeof v);
		}
		y[j] = v[0];
	}
}

typedef void (*warp_fn)(const uint8_t *, int, const int8_t *, const float *, const float *, int,
    float *);

template <int T, int L>
static warp_fn
warp_pick(int M)
{
	static const warp_fn f[16] = { warp_run<T, L, 1>, warp_run<T, L, 2>, warp_run<T, L, 3>,
	    warp_run<T, L, 4>, warp_run<T, L, 5>, warp_run<T, L, 6>, warp_run<T, L, 7>,
	    warp_run<T, L, 8>, warp_run<T, L, 9>, warp_run<T, L, 10>, warp_run<T, L, 11>,
	    warp_run<T, L, 12>, warp_run<T, L, 13>, warp_run<T, L, 14>, warp_run<T, L, 15>,
	    warp_run<T, L, 16> };

	return M >= 1 && M <= 16 ? f[M - 1] : NULL;
}

/*
 * kern_mv8: y[j] (j < m) = k_mv8's product of the weight row at wr (nb
 * blocks of type t, by L lanes a block) with input row j of q, dx, sx
 * (Q8_0 or Q8_1 blocks, nb a row), the kernel instance of M rows (m <= M:
 * rows m .. M - 1 read and dropped).  -1 for a type, L or M the kernel
 * has no instance of.
 */
extern "C" int
kern_mv8(int t, int L, int M, const uint8_t *wr, int nb, const int8_t *q, const float *dx,
    const float *sx, int m, float *y)
{
	warp_fn f = NULL;

	if (m < 1 || m > M)
		return -1;
	if (t == Q8_T_Q8_0)
		f = L == 2 ? warp_pick<Q8_T_Q8_0, 2>(M) : L == 1 ? warp_pick<Q8_T_Q8_0, 1>(M) : NULL;
	else if (t == Q8_T_Q4_0 && L == 2)
		f = warp_pick<Q8_T_Q4_0, 2>(M);
	else if (t == Q8_T_Q5_0 && L == 2)
		f = warp_pick<Q8_T_Q5_0, 2>(M);
	else if (t == Q8_T_Q4_1 && L == 1)
		f = warp_pick<Q8_T_Q4_1, 1>(M);
	else if (t == Q8_T_Q5_1 && L == 1)
		f = warp_pick<Q8_T_Q5_1, 1>(M);
	if (f == NULL)
		return -1;
	f(wr, nb, q, dx, sx, m, y);
	return 0;
}
