/*
 * q6p: the layout of a Q6_K weight packed four blocks a group
 * (GPU_T_Q6K_PACKED, cuda/gpu.h): block blk is block k = blk & 3 of group
 * blk >> 2 (Q6P_GROUP bytes from the weight's start a group), its d at
 * q6p_d(k) and its 208 bytes of ql, qh and scales (as in the file) at
 * q6p_body(k) of the group.  The one reading of the layout for its writer
 * (matvec_qk.cu's k_q6k_pack4) and its readers (matvec_qk.cuh's q6_x4,
 * matvec.cu's dequantize); device functions only, so
 * tools/matvec-qkt-kern.cc's shim compiles it too.
 */
#ifndef MEMRA_Q6P_CUH
#define MEMRA_Q6P_CUH

enum { Q6P_GROUP = 840 };	/* four d, then the four blocks' 208 bytes */

__device__ __forceinline__ size_t
q6p_group(int64_t blk)
{
	return (size_t)(blk >> 2) * Q6P_GROUP;
}

__device__ __forceinline__ int
q6p_body(int k)
{
	return 8 + 208 * k;
}

__device__ __forceinline__ int
q6p_d(int k)
{
	return 2 * k;
}

#endif
