/*
 * matvec: quantized weight rows on the device.  Decoding of ggml blocks
 * (32-element units, the CPU reference's arithmetic: separate multiplies
 * and adds, no fused multiply-add; NVFP4 in the GPU layout, made here by
 * gpu_nvfp4_pack), the batch-invariant matrix-vector product,
 * dequantization, embedding rows and the cuBLAS prefill product.
 */
#include "gpu_impl.cuh"

#include <cuda_bf16.h>

#include <cuda_fp16.h>

#include "q6p.cuh"

enum {
	T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q8_0 = 8, T_Q4_K = 12,
	T_Q5_K = 13, T_Q6_K = 14, T_IQ4_NL = 20, T_IQ4_XS = 23, T_BF16 = 30, T_NVFP4 = 40,
	T_Q6P = GPU_T_Q6K_PACKED	/* Q6_K packed four blocks a group (gpu_q6k_pack4) */
};

/* QK elements in BS bytes per block (F32/F16/BF16: 32-element pseudo-blocks),
 * CB of them contiguous (the block, or NVFP4's codes: its scales follow
 * the row's codes, gpu_nvfp4_pack). */
template <int T> struct qt;
template <> struct qt<T_F32>   { enum { QK = 32,  BS = 128, CB = 128 }; };
template <> struct qt<T_F16>   { enum { QK = 32,  BS = 64,  CB = 64 }; };
template <> struct qt<T_BF16>  { enum { QK = 32,  BS = 64,  CB = 64 }; };
template <> struct qt<T_Q8_0>  { enum { QK = 32,  BS = 34,  CB = 34 }; };
template <> struct qt<T_Q4_0>  { enum { QK = 32,  BS = 18,  CB = 18 }; };
template <> struct qt<T_Q4_1>  { enum { QK = 32,  BS = 20,  CB = 20 }; };
template <> struct qt<T_Q5_0>  { enum { QK = 32,  BS = 22,  CB = 22 }; };
template <> struct qt<T_NVFP4> { enum { QK = 64,  BS = 36,  CB = 32 }; };
template <> struct qt<T_Q4_K>  { enum { QK = 256, BS = 144, CB = 144 }; };
template <> struct qt<T_Q5_K>  { enum { QK = 256, BS = 176, CB = 176 }; };
template <> struct qt<T_Q6_K>  { enum { QK = 256, BS = 210, CB = 210 }; };
template <> struct qt<T_Q6P>   { enum { QK = 256, BS = 210, CB = 208 }; };
template <> struct qt<T_IQ4_NL> { enum { QK = 32, BS = 18, CB = 18 }; };
template <> struct qt<T_IQ4_XS> { enum { QK = 256, BS = 136, CB = 136 }; };

/* Block b of the row at rp (nblk blocks): its contiguous bytes, and *sc its
 * scales where they are apart (NVFP4: the 4 ue4m3). */
template <int T>
__device__ __forceinline__ const uint8_t *
blk_at(const uint8_t *rp, int64_t nblk, int64_t b, const uint8_t **sc)
{
	*sc = T == T_NVFP4 ? rp + nblk * 32 + b * 4 : NULL;
	return rp + b * qt<T>::CB;
}

__device__ __forceinline__ unsigned
rd16(const uint8_t *p)	/* p is 2-byte aligned in every block layout here */
{
	return *(const uint16_t *)p;
}

__device__ __forceinline__ float
h2f(unsigned h)
{
	return __half2float(__ushort_as_half((unsigned short)h));
}

__device__ __forceinline__ void
scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* The kvalue of e2m1 code n (twice its value: 0, 1, 2, 3, 4, 6, 8, 12,
 * negated when bit 3 is set, +0 for -0) by a byte permute: no table in
 * memory (a constant table indexed by data serializes a warp's reads). */
__device__ __forceinline__ float
kf(unsigned n)
{
	int m = (int)(__byte_perm(0x03020100u, 0x0C080604u, n & 7) & 0xFF);

	return (float)(n & 8 ? -m : m);
}

/* IQ4_NL's grid value of index n (0..15) as a float, by a byte permute of
 * the table's words (gpu_impl.cuh: GPU_IQ4_*), as kf does for e2m1. */
__device__ __forceinline__ float
kiq(unsigned n)
{
	unsigned v = __byte_perm(n & 8 ? GPU_IQ4_P0 : GPU_IQ4_N0, n & 8 ? GPU_IQ4_P1 : GPU_IQ4_N1,
	    n & 7);

	return (float)(int)(signed char)(v & 0xFF);
}

/* The 6-bit scale less 32 of sub-block u (0..7) of the IQ4_XS block at b
 * (scales_l nibble u of bytes 4.., 2 bits u of scales_h at 2). */
__device__ __forceinline__ int
iq4xs_scale(const uint8_t *b, int u)
{
	int ls = (int)(b[4 + u / 2] >> (4 * (u & 1)) & 0xF) | (int)(rd16(b + 2) >> (2 * u) & 3) << 4;

	return ls - 32;
}

/* w[0..32) = elements 32u .. 32u+31 of the block at b (NVFP4: its codes,
 * sc its scales). */
template <int T>
__device__ __forceinline__ void
unit_w(const uint8_t *b, const uint8_t *sc, int u, float w[32])
{
	if (T == T_F32) {
		const float4 *p = (const float4 *)b;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			float4 v = p[i];
			w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
		}
	} else if (T == T_F16 || T == T_BF16) {
#pragma unroll
		for (int i = 0; i < 16; i++) {
			unsigned v = ((const uint32_t *)b)[i];
			if (T == T_F16) {
				w[2 * i] = h2f(v & 0xFFFF);
				w[2 * i + 1] = h2f(v >> 16);
			} else {
				w[2 * i] = __uint_as_float(v << 16);
				w[2 * i + 1] = __uint_as_float(v & 0xFFFF0000u);
			}
		}
	} else if (T == T_Q8_0) {
		float d = h2f(rd16(b));
#pragma unroll
		for (int i = 0; i < 16; i++) {
			unsigned v = rd16(b + 2 + 2 * i);
			w[2 * i] = __fmul_rn((float)(int8_t)(v & 0xFF), d);
			w[2 * i + 1] = __fmul_rn((float)(int8_t)(v >> 8), d);
		}
	} else if (T == T_Q4_0 || T == T_Q4_1) {
		float d = h2f(rd16(b));
		float mn = T == T_Q4_1 ? h2f(rd16(b + 2)) : 0.0f;
		const uint8_t *qs = b + (T == T_Q4_1 ? 4 : 2);
#pragma unroll
		for (int i = 0; i < 8; i++) {
			unsigned v = rd16(qs + 2 * i);
#pragma unroll
			for (int k = 0; k < 2; k++) {
				unsigned x = (v >> (8 * k)) & 0xFF;
				if (T == T_Q4_0) {
					w[2 * i + k] = __fmul_rn((float)((int)(x & 0xF) - 8), d);
					w[2 * i + k + 16] = __fmul_rn((float)((int)(x >> 4) - 8), d);
				} else {
					w[2 * i + k] = __fadd_rn(__fmul_rn((float)(x & 0xF), d), mn);
					w[2 * i + k + 16] = __fadd_rn(__fmul_rn((float)(x >> 4), d), mn);
				}
			}
		}
	} else if (T == T_Q5_0) {
		/* d, qh (bit j: value j's bit 4), qs[16]: (v - 16) * d (lib/quant_deq.c) */
		float d = h2f(rd16(b));
		unsigned qh = rd16(b + 2) | rd16(b + 4) << 16;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			unsigned v = rd16(b + 6 + 2 * i);
#pragma unroll
			for (int k = 0; k < 2; k++) {
				int j = 2 * i + k;
				unsigned x = (v >> (8 * k)) & 0xFF;
				int lo = (int)((x & 0xF) | ((qh >> j) & 1) << 4);
				int hi = (int)((x >> 4) | ((qh >> (j + 16)) & 1) << 4);
				w[j] = __fmul_rn((float)(lo - 16), d);
				w[j + 16] = __fmul_rn((float)(hi - 16), d);
			}
		}
	} else if (T == T_NVFP4) {
#pragma unroll
		for (int i = 0; i < 4; i++) {	/* code words 4u + i: values 8i .. 8i+7 */
			float d = gpu_ue4m3c_half(sc[2 * u + i / 2]);
			unsigned v = ((const uint32_t *)b)[4 * u + i];
#pragma unroll
			for (int k = 0; k < 8; k++)
				w[8 * i + k] = __fmul_rn(kf((v >> (4 * k)) & 0xF), d);
		}
	} else if (T == T_Q4_K || T == T_Q5_K) {
		float d = h2f(rd16(b)), dmin = h2f(rd16(b + 2));
		int sc, m, c = u >> 1, hi = u & 1;
		scale_min_k4(u, b + 4, &sc, &m);
		float d1 = __fmul_rn(d, (float)sc), m1 = __fmul_rn(dmin, (float)m);
		const uint8_t *q = b + (T == T_Q4_K ? 16 : 48) + 32 * c;
		const uint8_t *qh = b + 16;
		unsigned bit = (hi ? 2u : 1u) << (2 * c);
#pragma unroll
		for (int i = 0; i < 8; i++) {
			unsigned v = *(const uint32_t *)(q + 4 * i);
			unsigned vh = T == T_Q5_K ? *(const uint32_t *)(qh + 4 * i) : 0;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				unsigned x = (v >> (8 * k)) & 0xFF;
				int qv = hi ? (int)(x >> 4) : (int)(x & 0xF);
				if (T == T_Q5_K)
					qv += ((vh >> (8 * k)) & bit) ? 16 : 0;
				w[4 * i + k] = __fsub_rn(__fmul_rn(d1, (float)qv), m1);
			}
		}
	} else if (T == T_Q6_K || T == T_Q6P) {	/* (packed: d at sc) */
		int h = u >> 2, qq = u & 3;
		const uint8_t *ql = b + 64 * h + 32 * (qq & 1);
		const uint8_t *qh = b + 128 + 32 * h;
		float d = h2f(rd16(T == T_Q6P ? sc : b + 208));
		const int8_t *s6 = (const int8_t *)(b + 192 + 8 * h) + 2 * qq;
		int nsh = 4 * (qq >> 1), hsh = 2 * qq;
		float ds0 = __fmul_rn(d, (float)s6[0]), ds1 = __fmul_rn(d, (float)s6[1]);
#pragma unroll
		for (int i = 0; i < 16; i++) {
			unsigned v = rd16(ql + 2 * i), vh = rd16(qh + 2 * i);
#pragma unroll
			for (int k = 0; k < 2; k++) {
				int l = 2 * i + k;
				int qv = (int)((((v >> (8 * k)) >> nsh) & 0xF) |
				    ((((vh >> (8 * k)) >> hsh) & 3) << 4)) - 32;
				w[l] = __fmul_rn(l < 16 ? ds0 : ds1, (float)qv);
			}
		}
	} else if (T == T_IQ4_NL || T == T_IQ4_XS) {
		/* IQ4_NL: d * value; IQ4_XS: (d * (ls - 32)) * value (lib/quant_deq.c) */
		float d = h2f(rd16(b));
		const uint8_t *qs = T == T_IQ4_NL ? b + 2 : b + 8 + 16 * u;
		if (T == T_IQ4_XS)
			d = __fmul_rn(d, (float)iq4xs_scale(b, u));
#pragma unroll
		for (int i = 0; i < 8; i++) {
			unsigned v = rd16(qs + 2 * i);
#pragma unroll
			for (int k = 0; k < 2; k++) {
				unsigned x = (v >> (8 * k)) & 0xFF;
				w[2 * i + k] = __fmul_rn(d, kiq(x & 0xF));
				w[2 * i + k + 16] = __fmul_rn(d, kiq(x >> 4));
			}
		}
	}
}


/* --- octets: what the product decodes --------------------------------- */

/* 2^23 + byte k of v, as a float: exact, one PRMT (no int-to-float unit). */
__device__ __forceinline__ float
bytef(unsigned v, int k)
{
	return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7440 | k));
}

/* q[0..8) = bytes of lo, hi minus off, exactly. */
__device__ __forceinline__ void
bytes8(unsigned lo, unsigned hi, float off, float q[8])
{
#pragma unroll
	for (int k = 0; k < 4; k++) {
		q[k] = bytef(lo, k) - (8388608.0f + off);
		q[k + 4] = bytef(hi, k) - (8388608.0f + off);
	}
}

__device__ __forceinline__ unsigned
rd32u(const uint8_t *p)	/* a 4-byte word at a 2-byte aligned address */
{
	return rd16(p) | rd16(p + 2) << 16;
}

/*
 * Octet o of the block at b: elements 8o .. 8o+7 are a * q[e] + c.  The
 * product sums a * (q . x) + c * sum(x) per octet; the order of those
 * operations never depends on how many input rows share the launch.
 */
template <int T>
__device__ __forceinline__ void
oct_q(const uint8_t *b, const uint8_t *sc, int o, float q[8], float *a, float *c)
{
	*c = 0.0f;
	if (T == T_F32) {
		float4 u = ((const float4 *)b)[2 * o], v = ((const float4 *)b)[2 * o + 1];
		q[0] = u.x, q[1] = u.y, q[2] = u.z, q[3] = u.w;
		q[4] = v.x, q[5] = v.y, q[6] = v.z, q[7] = v.w;
		*a = 1.0f;
	} else if (T == T_F16 || T == T_BF16) {
		uint4 u = ((const uint4 *)b)[o];
		unsigned w[4] = { u.x, u.y, u.z, u.w };
#pragma unroll
		for (int i = 0; i < 4; i++) {
			if (T == T_F16) {
				q[2 * i] = h2f(w[i] & 0xFFFF);
				q[2 * i + 1] = h2f(w[i] >> 16);
			} else {
				q[2 * i] = __uint_as_float(w[i] << 16);
				q[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
			}
		}
		*a = 1.0f;
	} else if (T == T_Q8_0) {
		const uint8_t *p = b + 2 + 8 * o;
		bytes8(rd32u(p) ^ 0x80808080u, rd32u(p + 4) ^ 0x80808080u, 128.0f, q);
		*a = h2f(rd16(b));
	} else if (T == T_Q4_0 || T == T_Q4_1) {
		const uint8_t *p = b + (T == T_Q4_1 ? 4 : 2) + 8 * (o & 1);
		int sh = 4 * (o >> 1);
		bytes8((rd32u(p) >> sh) & 0x0F0F0F0Fu, (rd32u(p + 4) >> sh) & 0x0F0F0F0Fu,
		    T == T_Q4_0 ? 8.0f : 0.0f, q);
		*a = h2f(rd16(b));
		if (T == T_Q4_1)
			*c = h2f(rd16(b + 2));
	} else if (T == T_Q5_0) {
		/* octet o: values 8o .. 8o+7, nibble o / 2 of qs[8 (o % 2) ..], qh bits 8o .. */
		const uint8_t *p = b + 6 + 8 * (o & 1);
		int sh = 4 * (o >> 1);
		unsigned hb = (rd32u(b + 2) >> (8 * o)) & 0xFF;
		unsigned lo = ((rd32u(p) >> sh) & 0x0F0F0F0Fu) |
		    (((hb & 0xF) * 0x02040810u) & 0x10101010u);
		unsigned hw = ((rd32u(p + 4) >> sh) & 0x0F0F0F0Fu) |
		    (((hb >> 4) * 0x02040810u) & 0x10101010u);
		bytes8(lo, hw, 16.0f, q);
		*a = h2f(rd16(b));
	} else if (T == T_NVFP4) {
		unsigned v = ((const uint32_t *)b)[o];	/* code word o: values 8o .. 8o+7 */
#pragma unroll
		for (int k = 0; k < 8; k++) {
			unsigned x = (v >> (4 * k)) & 0xF;
			/* |E2M1| x2 by a nibble table, the sign from bit 3 */
			unsigned mag = (0xC8643210u >> (4 * (x & 7))) & 0xF;
			float f = __uint_as_float(0x4B000000u | mag) - 8388608.0f;
			q[k] = __uint_as_float(__float_as_uint(f) | ((x & 8) << 28));
		}
		*a = gpu_ue4m3c_half(sc[o >> 1]);
	} else if (T == T_Q4_K || T == T_Q5_K) {
		int u = o >> 2, ch = u >> 1, hi = u & 1, l0 = 8 * (o & 3), sc, m;
		const uint32_t *p = (const uint32_t *)(b + (T == T_Q4_K ? 16 : 48) + 32 * ch + l0);
		unsigned lo = (p[0] >> (4 * hi)) & 0x0F0F0F0Fu, hw = (p[1] >> (4 * hi)) & 0x0F0F0F0Fu;
		if (T == T_Q5_K) {
			const uint32_t *ph = (const uint32_t *)(b + 16 + l0);
			int bit = 2 * ch + hi;
			lo |= ((ph[0] >> bit) & 0x01010101u) << 4;
			hw |= ((ph[1] >> bit) & 0x01010101u) << 4;
		}
		bytes8(lo, hw, 0.0f, q);
		scale_min_k4(u, b + 4, &sc, &m);
		*a = __fmul_rn(h2f(rd16(b)), (float)sc);
		*c = -__fmul_rn(h2f(rd16(b + 2)), (float)m);
	} else if (T == T_Q6_K) {
		int u = o >> 2, h = u >> 2, qq = u & 3, l0 = 8 * (o & 3);
		const uint8_t *ql = b + 64 * h + 32 * (qq & 1) + l0, *qh = b + 128 + 32 * h + l0;
		int nsh = 4 * (qq >> 1), hsh = 2 * qq;
		unsigned lo = ((rd32u(ql) >> nsh) & 0x0F0F0F0Fu) | (((rd32u(qh) >> hsh) & 0x03030303u) << 4);
		unsigned hw = ((rd32u(ql + 4) >> nsh) & 0x0F0F0F0Fu) | (((rd32u(qh + 4) >> hsh) & 0x03030303u) << 4);
		bytes8(lo, hw, 32.0f, q);
		*a = __fmul_rn(h2f(rd16(b + 208)), (float)((const int8_t *)b)[192 + 8 * h + 2 * qq + (l0 >> 4)]);
	} else if (T == T_IQ4_NL || T == T_IQ4_XS) {
		/* octet o % 4 of (sub-)block u: the low nibbles of quant bytes 0..7
		 * or 8..15, then the high ones (values 16..31) */
		int u = T == T_IQ4_XS ? o >> 2 : 0, j = o & 3;
		const uint8_t *p = b + (T == T_IQ4_NL ? 2 : 8 + 16 * u) + 8 * (j & 1);
		int sh = 4 * (j >> 1);
		unsigned lo = rd32u(p) >> sh, hw = rd32u(p + 4) >> sh;
#pragma unroll
		for (int k = 0; k < 4; k++) {
			q[k] = kiq((lo >> (8 * k)) & 0xF);
			q[k + 4] = kiq((hw >> (8 * k)) & 0xF);
		}
		*a = h2f(rd16(b));
		if (T == T_IQ4_XS)
			*a = __fmul_rn(*a, (float)iq4xs_scale(b, u));
	}
}

/* --- the product ------------------------------------------------------ */

#define MV_WARPS 4
#define MV_CHUNK 2560	/* bytes of one row staged per warp per stage */

__device__ __forceinline__ void
cp_async16(void *smem, const void *gmem)
{
	unsigned s = (unsigned)__cvta_generic_to_shared(smem);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}

__device__ __forceinline__ void
cp_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ void
cp_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

/* Stage blocks [b0, b1) of row rp into buf (their contiguous bytes: NVFP4's
 * codes); returns the offset of b0 in buf. */
template <int T>
__device__ __forceinline__ int
mv_issue(const uint8_t *rp, int b0, int b1, uint8_t *buf, int lane)
{
	const uint8_t *s = rp + (size_t)b0 * qt<T>::CB, *e = rp + (size_t)b1 * qt<T>::CB;
	const uint8_t *a0 = (const uint8_t *)((uintptr_t)s & ~(uintptr_t)15);
	int n16 = (int)((e - a0 + 15) >> 4);

	for (int i = lane; i < n16; i += 32)
		cp_async16(buf + 16 * i, a0 + 16 * i);
	return (int)(s - a0);
}

/*
 * One warp per weight row; the row streams through shared memory in
 * chunks of whole blocks (16-byte cp.async, two stages).  Lane l takes the
 * 8-element octets l, l+32, ... of each chunk in order (so a warp reads 1 KB
 * of x in one coalesced sweep) and keeps one sum per input row; a fixed
 * butterfly adds the lanes.  Nothing in a row's
 * order of operations depends on m.
 *
 * mv_row: the sums of the weight row at rp (nblk blocks, bpc a chunk) with
 * the m (<= MAXM) input rows x + j * ne0, into acc[] of every lane; sm:
 * the warp's two stages.  k_matvec (and the experts' k_moe_mv, one input
 * row a slot, and k_moe_mvg, a tile's rows) run it, so an expert's product
 * of one row is gpu_matvec's.
 */
template <int T, int MAXM, int ILP>
__device__ __forceinline__ void
mv_row(const uint8_t *__restrict__ rp, int nblk, int bpc, int64_t ne0,
    const float *__restrict__ x, int m, uint8_t (*sm)[MV_CHUNK + 16], int lane, float *acc)
{
	enum { OPB = qt<T>::QK / 8 };
	int nch = (nblk + bpc - 1) / bpc;
	int off0, off1 = 0;
#pragma unroll
	for (int j = 0; j < MAXM; j++)
		acc[j] = 0.0f;
	off0 = mv_issue<T>(rp, 0, min(bpc, nblk), sm[0], lane);
	cp_commit();
	for (int c = 0; c < nch; c++) {
		int b0 = c * bpc, nb = min(bpc, nblk - b0), st = c & 1;
		if (c + 1 < nch) {
			int b1 = b0 + bpc;
			int o = mv_issue<T>(rp, b1, min(b1 + bpc, nblk), sm[st ^ 1], lane);
			if (st)
				off0 = o;
			else
				off1 = o;
			cp_commit();
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		__syncwarp();
		const uint8_t *base = sm[st] + (st ? off1 : off0);
#pragma unroll ILP
		for (int o = lane; o < nb * OPB; o += 32) {
			int blk = o / OPB, oi = o % OPB;
			float q[8], a, cc;
			const uint8_t *sc;
			blk_at<T>(rp, nblk, b0 + blk, &sc);	/* (NVFP4's scales, read in place) */
			oct_q<T>(base + blk * qt<T>::CB, sc, oi, q, &a, &cc);
			int64_t e0 = (int64_t)(b0 + blk) * qt<T>::QK + 8 * oi;
#pragma unroll
			for (int j = 0; j < MAXM; j++) {
				if (j >= m)
					break;
				const float4 *xp = (const float4 *)(x + j * ne0 + e0);
				float4 u = __ldg(xp), v = __ldg(xp + 1);
				float s = __fmul_rn(q[0], u.x);
				s = __fmaf_rn(q[1], u.y, s);
				s = __fmaf_rn(q[2], u.z, s);
				s = __fmaf_rn(q[3], u.w, s);
				s = __fmaf_rn(q[4], v.x, s);
				s = __fmaf_rn(q[5], v.y, s);
				s = __fmaf_rn(q[6], v.z, s);
				s = __fmaf_rn(q[7], v.w, s);
				s = __fmul_rn(a, s);
				if (T == T_Q4_1 || T == T_Q4_K || T == T_Q5_K) {
					float sx = __fadd_rn(__fadd_rn(__fadd_rn(u.x, u.y), __fadd_rn(u.z, u.w)),
					    __fadd_rn(__fadd_rn(v.x, v.y), __fadd_rn(v.z, v.w)));
					s = __fmaf_rn(cc, sx, s);
				}
				acc[j] = __fadd_rn(acc[j], s);
			}
		}
		__syncwarp();
	}
#pragma unroll
	for (int j = 0; j < MAXM; j++) {
		float v = acc[j];
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
		acc[j] = v;
	}
}

template <int T, int MAXM, int ILP>
__global__ void __launch_bounds__(32 * MV_WARPS)
k_matvec(const uint8_t *__restrict__ W, size_t rowbytes, int nblk, int bpc,
    int64_t rows, int64_t ne0, const float *__restrict__ x, int m,
    float *__restrict__ y, const float *__restrict__ scale)
{
	__shared__ __align__(16) uint8_t sm[MV_WARPS][2][MV_CHUNK + 16];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int64_t row = (int64_t)blockIdx.x * MV_WARPS + warp;
	float acc[MAXM];

	if (row < rows)	/* its weight row's start towards L2 while the kernel before ends */
		pdl_prefetch(W + row * rowbytes, rowbytes, lane);
	pdl_enter();
	if (row >= rows)
		return;
	mv_row<T, MAXM, ILP>(W + row * rowbytes, nblk, bpc, ne0, x, m, sm[warp], lane, acc);
	if (lane == 0) {
		float s = scale ? *scale : 1.0f;
#pragma unroll
		for (int j = 0; j < MAXM; j++)
			if (j < m)
				y[j * rows + row] = scale ? __fmul_rn(acc[j], s) : acc[j];
	}
}

/*
 * The mixture of experts' products (gpu_moe_matvec): block (b, slot
 * s0 + blockIdx.y) is k_matvec's block b of one input row, x + (s / per) *
 * ldx, against expert ids[s]'s rows (the stack's rows e * rows ..,
 * ebytes apart), into y[s][rows]: the bits of k_matvec<T, 1> on that row
 * and that expert alone.  An id outside [0, n_exp) gives NaN rows.
 */
template <int T, int ILP>
__global__ void __launch_bounds__(32 * MV_WARPS)
k_moe_mv(const uint8_t *__restrict__ W, size_t ebytes, size_t rowbytes, int nblk, int bpc,
    int64_t rows, int64_t ne0, int n_exp, const int32_t *__restrict__ ids, int s0, int per,
    const float *__restrict__ x, int64_t ldx, float *__restrict__ y,
    const float *__restrict__ scale)
{
	__shared__ __align__(16) uint8_t sm[MV_WARPS][2][MV_CHUNK + 16];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, s = s0 + (int)blockIdx.y;
	int64_t row = (int64_t)blockIdx.x * MV_WARPS + warp;
	float acc[1];

	pdl_enter();	/* the ids are an earlier kernel's */
	if (row >= rows)
		return;
	int e = ids[s];
	float *yr = y + (size_t)s * rows + row;
	if (e < 0 || e >= n_exp) {
		if (lane == 0)
			*yr = __int_as_float(0x7FC00000);
		return;
	}
	mv_row<T, 1, ILP>(W + (size_t)e * ebytes + row * rowbytes, nblk, bpc, ne0,
	    x + (size_t)(s / per) * ldx, 1, sm[warp], lane, acc);
	if (lane == 0)
		*yr = scale ? __fmul_rn(acc[0], *scale) : acc[0];
}

template <int T, int MAXM>
static int
mv_launch(struct gpu *g, const void *w, int64_t rows, int64_t ne0, const float *x,
    int m, float *y, const float *scale)
{
	int nblk = (int)(ne0 / qt<T>::QK);
	int bpc = max(1, g->mv_chunk / (int)qt<T>::CB);
	int nch = (nblk + bpc - 1) / bpc;
	size_t rowbytes = (size_t)nblk * qt<T>::BS;

	bpc = (nblk + nch - 1) / nch;	/* even chunks */
	dim3 grid((unsigned)((rows + MV_WARPS - 1) / MV_WARPS));
	if (g->mv_unroll == 2)
		gpu_launch(g, k_matvec<T, MAXM, 2>, grid, 32 * MV_WARPS, 0, (const uint8_t *)w,
		    rowbytes, nblk, bpc, rows, ne0, x, m, y, scale);
	else
		gpu_launch(g, k_matvec<T, MAXM, 1>, grid, 32 * MV_WARPS, 0, (const uint8_t *)w,
		    rowbytes, nblk, bpc, rows, ne0, x, m, y, scale);
	GPU_LAUNCHED(g, "matvec");
	return 0;
}

template <int T>
static int
mv_type(struct gpu *g, const void *w, int64_t rows, int64_t ne0, const float *x,
    int m, float *y, const float *scale)
{
	if (ne0 % qt<T>::QK != 0 || (qt<T>::QK < 256 && ne0 % 32 != 0))
		return gpu_fail(g, "matvec: row length %lld is not a multiple of %d",
		    (long long)ne0, (int)qt<T>::QK);
	if (m <= 1)
		return mv_launch<T, 1>(g, w, rows, ne0, x, m, y, scale);
	if (m <= 2)
		return mv_launch<T, 2>(g, w, rows, ne0, x, m, y, scale);
	if (m <= 4)
		return mv_launch<T, 4>(g, w, rows, ne0, x, m, y, scale);
	if (m <= 8)
		return mv_launch<T, 8>(g, w, rows, ne0, x, m, y, scale);
	return mv_launch<T, 16>(g, w, rows, ne0, x, m, y, scale);
}

extern "C" int
gpu_tune(struct gpu *g, int chunk, int unroll)
{
	if (chunk < 256 || chunk > MV_CHUNK || chunk % 16)
		return gpu_fail(g, "tune: chunk of %d bytes (256..%d, a multiple of 16)", chunk, MV_CHUNK);
	if (unroll != 1 && unroll != 2)
		return gpu_fail(g, "tune: unroll %d (1 or 2)", unroll);
	if (chunk != g->mv_chunk || unroll != g->mv_unroll)
		g->gen++;	/* other kernels: recorded graphs are stale */
	g->mv_chunk = chunk;
	g->mv_unroll = unroll;
	return 0;
}

extern "C" int
gpu_can_matvec(int t)
{
	switch (t) {
	case T_F32: case T_F16: case T_BF16: case T_Q8_0: case T_Q4_0:
	case T_Q4_1: case T_Q5_0: case T_NVFP4: case T_Q4_K: case T_Q5_K: case T_Q6_K:
	case T_IQ4_NL: case T_IQ4_XS:
		return 1;
	default:
		return 0;
	}
}

#define DISPATCH(t, FN, ...) do {					\
	switch (t) {							\
	case T_F32:   return FN<T_F32>(__VA_ARGS__);			\
	case T_F16:   return FN<T_F16>(__VA_ARGS__);			\
	case T_BF16:  return FN<T_BF16>(__VA_ARGS__);			\
	case T_Q8_0:  return FN<T_Q8_0>(__VA_ARGS__);			\
	case T_Q4_0:  return FN<T_Q4_0>(__VA_ARGS__);			\
	case T_Q4_1:  return FN<T_Q4_1>(__VA_ARGS__);			\
	case T_Q5_0:  return FN<T_Q5_0>(__VA_ARGS__);			\
	case T_NVFP4: return FN<T_NVFP4>(__VA_ARGS__);			\
	case T_Q4_K:  return FN<T_Q4_K>(__VA_ARGS__);			\
	case T_Q5_K:  return FN<T_Q5_K>(__VA_ARGS__);			\
	case T_Q6_K:  return FN<T_Q6_K>(__VA_ARGS__);			\
	case T_IQ4_NL: return FN<T_IQ4_NL>(__VA_ARGS__);		\
	case T_IQ4_XS: return FN<T_IQ4_XS>(__VA_ARGS__);		\
	default:      return gpu_fail(g, "type %d: not supported on the GPU", (t)); \
	}								\
} while (0)

extern "C" int
gpu_matvec(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
    const float *d_x, int m, float *d_y, const float *d_scale)
{
	if (m < 1 || m > GPU_MATVEC_MAX_ROWS)
		return gpu_fail(g, "matvec: %d input rows (1..%d)", m, GPU_MATVEC_MAX_ROWS);
	if (rows < 1 || ne0 < 1)
		return gpu_fail(g, "matvec: empty matrix %lldx%lld", (long long)rows, (long long)ne0);
	DISPATCH(t, mv_type, g, d_w, rows, ne0, d_x, m, d_y, d_scale);
}

/* k_moe_mv over slots [0, ns), launches of at most 65535 slots (the grid's y). */
template <int T>
static int
mv_moe_type(struct gpu *g, const void *w, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *ids, int ns, int per, const float *x, int64_t ldx, float *y,
    const float *scale)
{
	if (ne0 % qt<T>::QK != 0 || (qt<T>::QK < 256 && ne0 % 32 != 0))
		return gpu_fail(g, "moe matvec: row length %lld is not a multiple of %d",
		    (long long)ne0, (int)qt<T>::QK);
	/* mv_launch's geometry for one input row: the same chunks, the same bits */
	int nblk = (int)(ne0 / qt<T>::QK);
	int bpc = max(1, g->mv_chunk / (int)qt<T>::CB);
	int nch = (nblk + bpc - 1) / bpc;
	size_t rowbytes = (size_t)nblk * qt<T>::BS, ebytes = rowbytes * (size_t)rows;

	bpc = (nblk + nch - 1) / nch;
	for (int s0 = 0; s0 < ns; s0 += 65535) {
		dim3 grid((unsigned)((rows + MV_WARPS - 1) / MV_WARPS), (unsigned)min(ns - s0, 65535));
		if (g->mv_unroll == 2)
			gpu_launch(g, k_moe_mv<T, 2>, grid, 32 * MV_WARPS, 0, (const uint8_t *)w, ebytes,
			    rowbytes, nblk, bpc, rows, ne0, n_exp, ids, s0, per, x, ldx, y, scale);
		else
			gpu_launch(g, k_moe_mv<T, 1>, grid, 32 * MV_WARPS, 0, (const uint8_t *)w, ebytes,
			    rowbytes, nblk, bpc, rows, ne0, n_exp, ids, s0, per, x, ldx, y, scale);
		GPU_LAUNCHED(g, "moe matvec");
	}
	return 0;
}

int
gpu_moe_mv_f(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *d_ids, int ns, int per, const float *d_x, int64_t ldx, float *d_y,
    const float *d_scale)
{
	if (rows < 1 || ne0 < 1 || n_exp < 1 || ns < 1 || per < 1 || ldx < ne0 || ldx % 4 != 0 ||
	    ((uintptr_t)d_x & 15) != 0)
		return gpu_fail(g, "moe matvec: %d experts of %lldx%lld, %d slots (%d a row), row "
		    "stride %lld, or unaligned", n_exp, (long long)rows, (long long)ne0, ns, per,
		    (long long)ldx);
	DISPATCH(t, mv_moe_type, g, d_w, rows, ne0, n_exp, d_ids, ns, per, d_x, ldx, d_y,
	    d_scale);
}

/*
 * The experts grouped (gpu_impl.cuh's moe_group): block (b, tile t0 +
 * blockIdx.y) is k_matvec's block b of the tile's n gathered input rows
 * (rows f .. f + n - 1 of xg, ne0 floats apart) against expert e's rows,
 * mv_row at M = GPU_MOE_MT, row j into y[perm[f + j]][rows]: row j's sums
 * do not depend on M or m (k_matvec's rows), so each is k_moe_mv's bits.
 * An empty tile writes nothing; bucket n_exp NaN rows.
 */
template <int T, int ILP>
__global__ void __launch_bounds__(32 * MV_WARPS)
k_moe_mvg(const uint8_t *__restrict__ W, size_t ebytes, size_t rowbytes, int nblk, int bpc,
    int64_t rows, int64_t ne0, int n_exp, const int4 *__restrict__ tile, int t0,
    const int32_t *__restrict__ perm, const float *__restrict__ xg, float *__restrict__ y,
    const float *__restrict__ scale)
{
	__shared__ __align__(16) uint8_t sm[MV_WARPS][2][MV_CHUNK + 16];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int64_t row = (int64_t)blockIdx.x * MV_WARPS + warp;
	float acc[GPU_MOE_MT];

	pdl_enter();	/* the tiles and the gathered rows are earlier kernels' */
	if (row >= rows)
		return;
	int e, f, n;
	if (!moe_tile(tile, t0, perm, n_exp, rows, row, lane, y, &e, &f, &n))
		return;
	mv_row<T, GPU_MOE_MT, ILP>(W + (size_t)e * ebytes + row * rowbytes, nblk, bpc, ne0,
	    xg + (size_t)f * ne0, n, sm[warp], lane, acc);
	if (lane == 0) {
#pragma unroll
		for (int j = 0; j < GPU_MOE_MT; j++)
			if (j < n)
				y[(size_t)perm[f + j] * rows + row] = scale ? __fmul_rn(acc[j], *scale) :
				    acc[j];
	}
}

/* k_moe_mvg over the tiles, launches of at most 65535 (the grid's y). */
template <int T>
static int
mv_moe_grouped(struct gpu *g, const void *w, int64_t rows, int64_t ne0, int n_exp,
    const struct moe_group *G, const float *xg, float *y, const float *scale)
{
	if (ne0 % qt<T>::QK != 0 || (qt<T>::QK < 256 && ne0 % 32 != 0))
		return gpu_fail(g, "moe matvec: row length %lld is not a multiple of %d",
		    (long long)ne0, (int)qt<T>::QK);
	/* mv_moe_type's geometry: the same chunks, the same bits */
	int nblk = (int)(ne0 / qt<T>::QK);
	int bpc = max(1, g->mv_chunk / (int)qt<T>::CB);
	int nch = (nblk + bpc - 1) / bpc;
	size_t rowbytes = (size_t)nblk * qt<T>::BS, ebytes = rowbytes * (size_t)rows;

	bpc = (nblk + nch - 1) / nch;
	for (int t0 = 0; t0 < G->nt; t0 += 65535) {
		dim3 grid((unsigned)((rows + MV_WARPS - 1) / MV_WARPS),
		    (unsigned)min(G->nt - t0, 65535));
		if (g->mv_unroll == 2)
			gpu_launch(g, k_moe_mvg<T, 2>, grid, 32 * MV_WARPS, 0, (const uint8_t *)w,
			    ebytes, rowbytes, nblk, bpc, rows, ne0, n_exp, G->tile, t0, G->perm, xg, y,
			    scale);
		else
			gpu_launch(g, k_moe_mvg<T, 1>, grid, 32 * MV_WARPS, 0, (const uint8_t *)w,
			    ebytes, rowbytes, nblk, bpc, rows, ne0, n_exp, G->tile, t0, G->perm, xg, y,
			    scale);
		GPU_LAUNCHED(g, "moe matvec grouped");
	}
	return 0;
}

/* gpu_moe_mv_f grouped: the slots grouped by expert and their input rows
 * (ldx floats apart) gathered in that order into the scratch (ne0 floats
 * apart), then k_moe_mvg. */
int
gpu_moe_mv_fg(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *d_ids, int ns, int per, const float *d_x, int64_t ldx, float *d_y,
    const float *d_scale)
{
	struct moe_group G;

	/* (the gather copies rows of ne0 floats: x's rows contiguous, as
	 * gpu_moe_matvec has them) */
	if (rows < 1 || ne0 < 1 || n_exp < 1 || ns < 1 || per < 1 || ldx != ne0 || ldx % 4 != 0 ||
	    ((uintptr_t)d_x & 15) != 0)
		return gpu_fail(g, "moe matvec grouped: %d experts of %lldx%lld, %d slots (%d a "
		    "row), row stride %lld, or unaligned", n_exp, (long long)rows, (long long)ne0, ns,
		    per, (long long)ldx);
	if (!gpu_can_matvec(t))
		return gpu_fail(g, "type %d: not supported on the GPU", t);
	size_t gb = (moe_group_bytes(ns, n_exp) + 255) / 256 * 256;
	uint8_t *p = (uint8_t *)gpu_scratch(g, gb + ((size_t)ns + GPU_MOE_MT) * ne0 * 4 + 256);
	if (p == NULL)
		return -1;
	float *xg = (float *)(p + gb);
	const void *src[1] = { d_x };
	void *dst[1] = { xg };
	size_t rb[1] = { (size_t)ne0 * 4 };
	if (moe_group_build(g, d_ids, ns, n_exp, p, &G) ||
	    moe_gather(g, &G, ns, per, 1, src, dst, rb))
		return -1;
	DISPATCH(t, mv_moe_grouped, g, d_w, rows, ne0, n_exp, &G, xg, d_y, d_scale);
}

/* --- dequantization --------------------------------------------------- */

/* The 32 values of unit u (of upr a row) of the rows at src (rowbytes
 * apart) from row r0 into w: unit u % upr of row r0 + u / upr, or of row
 * ids[blockIdx.y] (then u < upr, r0 0).  T_Q6P: block (r0 + r) nb + b of
 * the packed weight at src (r0 in the kernels' arguments: a row is no byte
 * range there). */
template <int T>
__device__ __forceinline__ void
dq_unit(const uint8_t *__restrict__ src, size_t rowbytes, int64_t r0, int64_t upr, int64_t u,
    const int32_t *__restrict__ ids, float w[32])
{
	enum { UPB = qt<T>::QK / 32 };
	int64_t r = ids != NULL ? ids[blockIdx.y] : u / upr, ur = ids != NULL ? u : u - r * upr;
	const uint8_t *sc, *b;

	r = r < 0 ? 0 : r;	/* a failed pick (-1) of a chain: row 0 (gpu_get_rows) */
	if constexpr (T == T_Q6P) {
		int64_t blk = (r0 + r) * (upr / UPB) + ur / UPB;
		const uint8_t *g = src + q6p_group(blk);
		sc = g + q6p_d((int)(blk & 3)), b = g + q6p_body((int)(blk & 3));
	} else
		b = blk_at<T>(src + (r0 + r) * rowbytes, upr / UPB, ur / UPB, &sc);
	unit_w<T>(b, sc, (int)(ur % UPB), w);
}

/* One thread per 32-element unit of units (upr a row); blockIdx.y picks
 * a row of ids (or none). */
template <int T>
__global__ void
k_dequant(const uint8_t *__restrict__ src, size_t rowbytes, int64_t r0, int64_t upr,
    int64_t units, const int32_t *__restrict__ ids, float *__restrict__ dst)
{
	int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	float w[32];

	pdl_enter();
	if (u >= units)
		return;
	dq_unit<T>(src, rowbytes, r0, upr, u, ids, w);
	if (ids != NULL)
		dst += (int64_t)blockIdx.y * upr * 32;
	float4 *o = (float4 *)(dst + 32 * u);
#pragma unroll
	for (int i = 0; i < 8; i++)
		o[i] = make_float4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
}

/* A unit's 32 values rounded to bf16 (nearest, ties to even) into o[0..4). */
__device__ __forceinline__ void
bf16_unit(uint4 *o, const float w[32])
{
#pragma unroll
	for (int i = 0; i < 4; i++) {
		unsigned h[4];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			__nv_bfloat162 b = __floats2bfloat162_rn(w[8 * i + 2 * k], w[8 * i + 2 * k + 1]);
			h[k] = *(const unsigned *)&b;
		}
		o[i] = make_uint4(h[0], h[1], h[2], h[3]);
	}
}

/* k_dequant's values rounded to bf16 (nearest, ties to even), a thread a
 * 32-element unit. */
template <int T>
__global__ void
k_dequant_bf16(const uint8_t *__restrict__ src, size_t rowbytes, int64_t r0, int64_t upr,
    int64_t units, uint16_t *__restrict__ dst)
{
	int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	float w[32];

	pdl_enter();
	if (u >= units)
		return;
	dq_unit<T>(src, rowbytes, r0, upr, u, NULL, w);
	bf16_unit((uint4 *)(dst + 32 * u), w);
}

/* Rows of ne0 elements of type T as dequantized values: rows of the
 * table (ids: n of them, else n rows from row r0), fp32 or bf16. */
template <int T>
static int
dq_type(struct gpu *g, const void *src, int64_t r0, int64_t ne0, const int32_t *ids, int64_t n,
    float *dst, uint16_t *dst16)
{
	int64_t upr = ne0 / 32, units = ids != NULL ? upr : n * upr;
	size_t rowbytes = (size_t)(ne0 / qt<T>::QK) * qt<T>::BS;

	if (ne0 < 1 || ne0 % qt<T>::QK != 0 || ne0 % 32 != 0)
		return gpu_fail(g, "dequantize: rows of %lld elements are not whole blocks of %d",
		    (long long)ne0, (int)qt<T>::QK);
	if (n < 1 || (units + 255) / 256 > INT32_MAX)
		return gpu_fail(g, "dequantize: %lld rows of %lld", (long long)n, (long long)ne0);
	dim3 grid((unsigned)((units + 255) / 256), ids ? (unsigned)n : 1);
	if (dst16 != NULL) {
		gpu_launch(g, k_dequant_bf16<T>, grid, 256, 0, (const uint8_t *)src, rowbytes, r0,
		    upr, units, dst16);
		GPU_LAUNCHED(g, "dequantize bf16");
	} else {
		gpu_launch(g, k_dequant<T>, grid, 256, 0, (const uint8_t *)src, rowbytes, r0, upr,
		    units, ids, dst);
		GPU_LAUNCHED(g, "dequantize");
	}
	return 0;
}

/* The elements of a block of type t as dequantized here (dq_any's types),
 * 0 for any other type. */
static int
dq_qk(int t)
{
	switch (t) {
	case T_F32: case T_F16: case T_BF16: case T_Q8_0: case T_Q4_0: case T_Q4_1: case T_Q5_0:
	case T_IQ4_NL:
		return 32;
	case T_NVFP4:
		return 64;
	case T_Q4_K: case T_Q5_K: case T_Q6_K: case T_IQ4_XS: case T_Q6P:
		return 256;
	default:
		return 0;
	}
}

/* dq_type of type t: the products' types (DISPATCH) and packed Q6_K, whose
 * only fp32-free readers these are. */
static int
dq_any(struct gpu *g, int t, const void *src, int64_t r0, int64_t ne0, const int32_t *ids,
    int64_t n, float *dst, uint16_t *dst16)
{
	if (t == T_Q6P)
		return dq_type<T_Q6P>(g, src, r0, ne0, ids, n, dst, dst16);
	DISPATCH(t, dq_type, g, src, r0, ne0, ids, n, dst, dst16);
}

extern "C" int
gpu_dequantize_rows(struct gpu *g, int t, const void *d_src, int64_t r0, int64_t rows, int64_t ne0,
    float *d_dst)
{
	return dq_any(g, t, d_src, r0, ne0, NULL, rows, d_dst, NULL);
}

extern "C" int
gpu_dequantize_rows_bf16(struct gpu *g, int t, const void *d_src, int64_t r0, int64_t rows,
    int64_t ne0, uint16_t *d_dst)
{
	return dq_any(g, t, d_src, r0, ne0, NULL, rows, NULL, d_dst);
}

extern "C" int
gpu_dequantize(struct gpu *g, int t, const void *d_src, int64_t rows, int64_t ne0,
    float *d_dst)
{
	return gpu_dequantize_rows(g, t, d_src, 0, rows, ne0, d_dst);
}

extern "C" int
gpu_dequantize_bf16(struct gpu *g, int t, const void *d_src, int64_t rows, int64_t ne0,
    uint16_t *d_dst)
{
	return gpu_dequantize_rows_bf16(g, t, d_src, 0, rows, ne0, d_dst);
}

extern "C" int
gpu_get_rows(struct gpu *g, int t, const void *d_table, int64_t ne0,
    const int32_t *d_ids, int n, float *d_out)
{
	if (n < 1 || n > 65535)
		return gpu_fail(g, "get_rows: %d rows (1..65535)", n);
	return dq_any(g, t, d_table, 0, ne0, d_ids, n, d_out, NULL);
}

/* --- the experts' prompt GEMM (gpu_moe_matvec under GPU_MMQ_BF16) ----- */

/* Four 8x8 b16 matrices from shared memory (lane l the address of row l % 8 of matrix l / 8). */
__device__ __forceinline__ void
mg_ldsm4(unsigned r[4], const uint16_t *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
	    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	    : "r"((unsigned)__cvta_generic_to_shared(p)));
}

__device__ __forceinline__ void
mg_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
	    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
	    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void
mg_commit(void)
{
	asm volatile("cp.async.commit_group;");
}

__device__ __forceinline__ void
mg_wait_all(void)
{
	asm volatile("cp.async.wait_all;");
}

#include "moe_gemm.cuh"

/* xg row i = x row perm[i] / per rounded to bf16 for i < ns + GPU_MOE_MT
 * (perm's tail: row 0), zeros to row n; a thread two values of a row,
 * blockIdx.y the rows i = y, y + gridDim.y, ... */
__global__ void
k_moe_xg(const float *__restrict__ x, int64_t ne0, const int32_t *__restrict__ perm, int ns,
    int per, int64_t n, unsigned *__restrict__ xg)
{
	int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, h = ne0 / 2;

	pdl_enter();	/* perm is an earlier kernel's */
	if (c >= h)
		return;
	for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
		unsigned v = 0;
		if (i < (int64_t)ns + GPU_MOE_MT) {
			float2 p = ((const float2 *)(x + (size_t)(perm[i] / per) * ne0))[c];
			__nv_bfloat162 b = __floats2bfloat162_rn(p.x, p.y);
			v = *(const unsigned *)&b;
		}
		xg[(size_t)i * h + c] = v;
	}
}

/* The GEMM (moe_gemm.cuh's comment): block (x, t0 + blockIdx.y). */
template <int T>
__global__ void __launch_bounds__(MG_THREADS, 4)
k_moe_gemm(const uint8_t *__restrict__ W, size_t rowbytes, int64_t rows, int64_t ne0, int n_exp,
    const int4 *__restrict__ tile, int t0, int nt, const int32_t *__restrict__ perm,
    const uint16_t *__restrict__ xg, float *y, const float *scale)
{
	__shared__ __align__(16) uint16_t ws[2][MG_BM][MG_LD], xs[2][MG_BN][MG_LD];

	mg_block<T>(ws, xs, W, rowbytes, rows, ne0, n_exp, tile, t0, nt, perm, xg, y, scale);
}

template <int T>
static int
mg_type(struct gpu *g, const void *w, int64_t rows, int64_t ne0, int n_exp,
    const struct moe_group *G, const uint16_t *xg, float *y, const float *scale)
{
	size_t rowbytes = (size_t)(ne0 / qt<T>::QK) * qt<T>::BS;

	for (int t0 = 0; t0 < G->nt; t0 += 65535) {
		dim3 grid((unsigned)((rows + MG_BM - 1) / MG_BM), (unsigned)min(G->nt - t0, 65535));
		gpu_launch(g, k_moe_gemm<T>, grid, MG_THREADS, 0, (const uint8_t *)w, rowbytes,
		    rows, ne0, n_exp, G->tile, t0, G->nt, G->perm, xg, y, scale);
		GPU_LAUNCHED(g, "moe gemm bf16");
	}
	return 0;
}

/* One stack's GEMM by type (the float types never come here: moe_gemm_takes). */
static int
mg_one(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0, int n_exp,
    const struct moe_group *G, const uint16_t *xg, float *d_y, const float *d_scale)
{
	if (t == T_Q6P)
		return mg_type<T_Q6P>(g, d_w, rows, ne0, n_exp, G, xg, d_y, d_scale);
	DISPATCH(t, mg_type, g, d_w, rows, ne0, n_exp, G, xg, d_y, d_scale);
}

/* Whether gpu_moe_matvec takes the prompt GEMM: GPU_MMQ_BF16, more input
 * rows than a step, a quantized type dq_unit reads, rows of whole steps,
 * experts the grouping takes. */
int
moe_gemm_takes(const struct gpu *g, int t, int64_t ne0, int64_t nx, int n_exp)
{
	int qk = dq_qk(t);	/* (F32, F16, BF16: fp32 operands, gpu_matmul's rule) */

	return qk > 0 && t != T_F32 && t != T_F16 && t != T_BF16 && g->mmq == GPU_MMQ_BF16 &&
	    nx > g->step_rows && ne0 % MG_BK == 0 && ne0 % qk == 0 &&
	    n_exp <= GPU_MOE_GROUP_EXPERTS;
}

/* gpu_moe_matvec's prompt GEMM (moe_gemm_takes said so): the grouping,
 * the bf16 rows (made once for the nw stacks d_w[k] of one type and shape),
 * the kernel for each into d_y[k]; the scratch holds the first two. */
int
moe_gemm(struct gpu *g, int t, int nw, const void *const *d_w, int64_t rows, int64_t ne0,
    int n_exp, const int32_t *d_ids, int ns, int per, const float *d_x, float *const *d_y,
    const float *const *d_scale)
{
	struct moe_group G;
	int64_t nr = (int64_t)ns + MG_BN;	/* a block reads MG_BN rows from its first */
	size_t gb = (moe_group_bytes(ns, n_exp) + 255) / 256 * 256;
	uint8_t *p = (uint8_t *)gpu_scratch(g, gb + (size_t)nr * ne0 * 2);

	if (p == NULL || moe_group_build(g, d_ids, ns, n_exp, p, &G) != 0)
		return -1;
	uint16_t *xg = (uint16_t *)(p + gb);
	dim3 grid((unsigned)((ne0 / 2 + 127) / 128), (unsigned)min(nr, (int64_t)65535));
	gpu_launch(g, k_moe_xg, grid, 128, 0, d_x, ne0, G.perm, ns, per, nr, (unsigned *)xg);
	GPU_LAUNCHED(g, "moe gather bf16");
	for (int k = 0; k < nw; k++)
		if (mg_one(g, t, d_w[k], rows, ne0, n_exp, &G, xg, d_y[k], d_scale[k]) != 0)
			return -1;
	return 0;
}

/* --- NVFP4's GPU layout ------------------------------------------------ */

/*
 * Block i of rows of nb blocks between ggml's layout (g) and the GPU's
 * (p, gpu_nvfp4_pack), one thread a block: value v of the block is ggml's
 * nibble (v % 16 >= 8) of byte 8 (v / 16) + v % 8 of qs, and nibble v % 8
 * of code word v / 8; scales canonical (gpu_ue4m3c) in p, back to bytes of
 * the same values in g (0x7F there the canonical 0x7F, 240).  TO_GPU: g ->
 * p, else p -> g.
 */
template <int TO_GPU>
__global__ void
k_nvfp4_layout(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst, int64_t nblk,
    int64_t nb)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= nblk)
		return;
	int64_t r = i / nb, b = i - r * nb;
	size_t row = (size_t)r * nb * 36;
	const uint32_t *gw = (const uint32_t *)(src + row + (TO_GPU ? b * 36 : b * 32));
	uint32_t in[9], out[9];

#pragma unroll
	for (int k = 0; k < 8; k++)
		in[k] = gw[k];
	in[8] = TO_GPU ? gw[8] : *(const uint32_t *)(src + row + nb * 32 + b * 4);
#pragma unroll
	for (int k = 0; k < 9; k++)
		out[k] = 0;
#pragma unroll
	for (int v = 0; v < 64; v++) {
		int gb = 8 * (v / 16) + v % 8, gsh = 4 * (v % 16 >= 8);	/* ggml: qs byte, nibble */
		int pw = v / 8, psh = 4 * (v % 8);				/* GPU: word, nibble */
		if (TO_GPU) {	/* in: scales, qs[0..31] as words 0..8 */
			uint32_t x = (in[1 + gb / 4] >> (8 * (gb % 4) + gsh)) & 0xF;
			out[pw] |= x << psh;
		} else {	/* in: codes words 0..7, scales */
			uint32_t x = (in[pw] >> psh) & 0xF;
			out[1 + gb / 4] |= x << (8 * (gb % 4) + gsh);
		}
	}
	uint32_t *ow;
	if (TO_GPU) {
		ow = (uint32_t *)(dst + row + b * 32);
#pragma unroll
		for (int k = 0; k < 8; k++)
			ow[k] = out[k];
		uint32_t sc = 0;
#pragma unroll
		for (int s = 0; s < 4; s++)
			sc |= gpu_ue4m3c(in[0] >> (8 * s) & 0xFF) << (8 * s);
		*(uint32_t *)(dst + row + nb * 32 + b * 4) = sc;
	} else {
		ow = (uint32_t *)(dst + row + b * 36);
		ow[0] = 0;
#pragma unroll
		for (int s = 0; s < 4; s++)
			ow[0] |= gpu_ue4m3u(in[8] >> (8 * s) & 0xFF) << (8 * s);
#pragma unroll
		for (int k = 1; k < 9; k++)
			ow[k] = out[k];
	}
}

static int
nvfp4_layout(struct gpu *g, void *d_w, int64_t rows, int64_t ne0, int to_gpu)
{
	enum { TMP = 64 << 20 };
	int64_t nb = ne0 / 64;
	size_t rb = (size_t)nb * 36;

	if (rows < 1 || ne0 < 64 || ne0 % 64 != 0 || ((uintptr_t)d_w & 3))
		return gpu_fail(g, "nvfp4 layout: %lld rows of %lld, or unaligned", (long long)rows,
		    (long long)ne0);
	int64_t chunk = (int64_t)(TMP / rb) > 0 ? (int64_t)(TMP / rb) : 1;
	if (chunk > rows)
		chunk = rows;
	uint8_t *tmp = (uint8_t *)gpu_alloc(g, (size_t)chunk * rb);
	int rc = tmp == NULL ? -1 : 0;
	for (int64_t r0 = 0; rc == 0 && r0 < rows; r0 += chunk) {
		int64_t nr = rows - r0 < chunk ? rows - r0 : chunk, n = nr * nb;
		uint8_t *w = (uint8_t *)d_w + (size_t)r0 * rb;
		if ((rc = gpu_copy(g, tmp, w, (size_t)nr * rb)) != 0)
			break;
		if (to_gpu)
			gpu_launch(g, k_nvfp4_layout<1>, (unsigned)((n + 255) / 256), 256, 0,
			    (const uint8_t *)tmp, w, n, nb);
		else
			gpu_launch(g, k_nvfp4_layout<0>, (unsigned)((n + 255) / 256), 256, 0,
			    (const uint8_t *)tmp, w, n, nb);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			rc = gpu_fail(g, "nvfp4 layout: %s", cudaGetErrorString(e));
	}
	gpu_free(g, tmp);	/* (waits for the kernels) */
	return rc;
}

extern "C" int
gpu_nvfp4_pack(struct gpu *g, void *d_w, int64_t rows, int64_t ne0)
{
	return nvfp4_layout(g, d_w, rows, ne0, 1);
}

extern "C" int
gpu_nvfp4_unpack(struct gpu *g, void *d_w, int64_t rows, int64_t ne0)
{
	return nvfp4_layout(g, d_w, rows, ne0, 0);
}

/* --- prefill: dequantized tiles through cuBLAS ------------------------ */

__global__ void
k_scale(float *y, int64_t n, const float *s)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < n)
		y[i] = __fmul_rn(y[i], *s);
}

int
gpu_scale(struct gpu *g, float *y, int64_t n, const float *s)
{
	gpu_launch(g, k_scale, (unsigned)((n + 255) / 256), 256, 0, y, n, s);
	GPU_LAUNCHED(g, "matmul scale");
	return 0;
}

extern "C" int
gpu_matmul(struct gpu *g, int t, const void *d_w, int64_t rows, int64_t ne0,
    const float *d_x, int64_t n, float *d_y, const float *d_scale)
{
	const float one = 1.0f, zero = 0.0f;
	int qk = dq_qk(t);
	int64_t tile, r0;
	float *wt;

	if (!gpu_can_matvec(t) && gpu_can_matvec_q8_step(g, t, n))	/* (no fp32-x kernel) */
		return gpu_matvec_q8(g, t, d_w, rows, ne0, d_x, n, d_y, d_scale);
	if (n >= 1 && n <= GPU_MATVEC_MAX_ROWS)
		return gpu_matvec(g, t, d_w, rows, ne0, d_x, (int)n, d_y, d_scale);
	if (n >= 1 && n <= g->step_rows) {	/* a step (gpu_tune_step_rows): 16 rows a launch */
		for (int64_t r0 = 0; r0 < n; r0 += GPU_MATVEC_MAX_ROWS)
			if (gpu_matvec(g, t, d_w, rows, ne0, d_x + (size_t)r0 * ne0,
			    n - r0 < GPU_MATVEC_MAX_ROWS ? (int)(n - r0) : GPU_MATVEC_MAX_ROWS,
			    d_y + (size_t)r0 * rows, d_scale) != 0)
				return -1;
		return 0;
	}
	if (n < 1)
		return gpu_fail(g, "matmul: %lld input rows", (long long)n);
	if (qk == 0 || ne0 % qk != 0)	/* (the tiles read rows of whole blocks) */
		return gpu_fail(g, "matmul: type %d with rows of %lld", t, (long long)ne0);
	if (g->mmq == GPU_MMQ_BF16 && t != T_F32 && t != T_F16 && t != T_BF16) {
		/* quantized weights: bf16 operands on tensor cores (the CPU
		 * rounds x to int8 for these, coarser) */
		uint16_t *wb, *xb = gpu_bf16_operands(g, n, rows, ne0, &wb);
		if (xb == NULL || gpu_half_of(g, 0, d_x, n * ne0, xb, "matmul bf16 x") != 0)
			return -1;
		return gpu_gemm_bf16(g, t, d_w, rows, ne0, xb, wb, n, d_y, d_scale);
	}
	tile = ((int64_t)64 << 20) / (ne0 * 4);	/* 256 MiB of fp32 weights */
	if (tile < 1)
		tile = 1;
	if (tile > rows)
		tile = rows;
	if ((wt = (float *)gpu_scratch(g, (size_t)tile * ne0 * 4)) == NULL)
		return -1;
	for (r0 = 0; r0 < rows; r0 += tile) {
		int64_t nr = rows - r0 < tile ? rows - r0 : tile;
		if (gpu_dequantize_rows(g, t, d_w, r0, nr, ne0, wt) != 0)
			return -1;
		cublasStatus_t s = cublasSgemm(g->blas, CUBLAS_OP_T, CUBLAS_OP_N,
		    (int)nr, (int)n, (int)ne0, &one, wt, (int)ne0, d_x, (int)ne0,
		    &zero, d_y + r0, (int)rows);
		if (s != CUBLAS_STATUS_SUCCESS)
			return gpu_fail(g, "cublasSgemm: status %d", (int)s);
		if (g->prof != NULL && gpu_prof_mark(g, "cublas sgemm") != 0)
			return -1;
	}
	return d_scale != NULL ? gpu_scale(g, d_y, n * rows, d_scale) : 0;
}
