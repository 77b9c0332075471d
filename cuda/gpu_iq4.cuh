/*
 * IQ4_NL's grid as permute tables and gpu_iq4x8, the grid values of 8
 * indices by gpu_prmt (cuda/gpu_impl.cuh includes it after gpu_prmt;
 * tools/matvec-qkt-kern.cc runs it on the CPU over its own gpu_prmt).
 */
#ifndef MEMRA_GPU_IQ4_CUH
#define MEMRA_GPU_IQ4_CUH

/*
 * IQ4_NL's grid (lib/quant_impl.h's qi_kvalues_iq4nl: -127, -104, -83,
 * -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113) as int8 bytes,
 * entry n at byte n % 4 of word n / 4: the negative half in GPU_IQ4_N0,
 * N1, the positive half in GPU_IQ4_P0, P1.
 */
#define GPU_IQ4_N0 0xBFAD9881u
#define GPU_IQ4_N1 0xF6EADDCFu
#define GPU_IQ4_P0 0x26190D01u
#define GPU_IQ4_P1 0x71594535u

/*
 * The grid values of the 8 indices of a word q of ggml's IQ4 quants (IQ4_NL
 * and IQ4_XS alike: bytes 4k .. 4k+3 of a 32-value (sub-)block's 16, byte
 * j's low nibble the index of value j, its high nibble of value j + 16) as
 * int8 for dp4a: *lo values 4k .. 4k+3, *hi values 4k+16 .. 4k+19.  Per 4
 * indices (q's nibbles in their order: low and high of a byte, then the
 * next byte's) a permute of the negative half by the indices themselves
 * (bit 3 set there: gpu_prmt's sign replication, a byte not taken), one of
 * the positive half by the indices ^ 8, a third taking the negative or the
 * positive byte by bit 3 (selector 0x3210 + 4 * bit 3); then two permutes
 * put the low nibbles' values and the high nibbles' in value order.
 * 16 instructions for 8 values.
 */
__device__ __forceinline__ void
gpu_iq4x8(uint32_t q, int *lo, int *hi)
{
	uint32_t x = q ^ 0x88888888u, s = (q >> 1 & 0x44444444u) | 0x32103210u;
	uint32_t a = gpu_prmt(gpu_prmt(GPU_IQ4_N0, GPU_IQ4_N1, q),
	    gpu_prmt(GPU_IQ4_P0, GPU_IQ4_P1, x), s);
	uint32_t b = gpu_prmt(gpu_prmt(GPU_IQ4_N0, GPU_IQ4_N1, q >> 16),
	    gpu_prmt(GPU_IQ4_P0, GPU_IQ4_P1, x >> 16), s >> 16);

	*lo = (int)gpu_prmt(a, b, 0x6420u);	/* a: values 4k, 4k+16, 4k+1, 4k+17; b: +2, +3 */
	*hi = (int)gpu_prmt(a, b, 0x7531u);
}

#endif
