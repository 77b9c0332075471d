/*
 * quant: ggml tensor types.  The type table (every id up to NVFP4 = 40,
 * removed ids included, as errors), CPU reference dequantize/quantize of
 * rows, exact to ggml's definitions, and CPU dot products.
 */
#ifndef MEMRA_QUANT_H
#define MEMRA_QUANT_H

#include <stddef.h>
#include <stdint.h>

enum quant_type {
	QUANT_F32 = 0, QUANT_F16 = 1, QUANT_Q4_0 = 2, QUANT_Q4_1 = 3,
	QUANT_Q5_0 = 6, QUANT_Q5_1 = 7, QUANT_Q8_0 = 8, QUANT_Q8_1 = 9,
	QUANT_Q2_K = 10, QUANT_Q3_K = 11, QUANT_Q4_K = 12, QUANT_Q5_K = 13,
	QUANT_Q6_K = 14, QUANT_Q8_K = 15, QUANT_IQ2_XXS = 16, QUANT_IQ2_XS = 17,
	QUANT_IQ3_XXS = 18, QUANT_IQ1_S = 19, QUANT_IQ4_NL = 20, QUANT_IQ3_S = 21,
	QUANT_IQ2_S = 22, QUANT_IQ4_XS = 23, QUANT_I8 = 24, QUANT_I16 = 25,
	QUANT_I32 = 26, QUANT_I64 = 27, QUANT_F64 = 28, QUANT_IQ1_M = 29,
	QUANT_BF16 = 30, QUANT_TQ1_0 = 34, QUANT_TQ2_0 = 35, QUANT_MXFP4 = 39,
	QUANT_NVFP4 = 40, QUANT_Q1_0 = 41,
	QUANT_Q2_0 = 42, QUANT_TYPE_COUNT = 43
};

struct quant_traits {
	const char *name;	/* ggml's name: "Q4_K", "NVFP4", ... */
	int	blck;		/* elements per block */
	int	size;		/* bytes per block */
	int	removed;	/* an id ggml no longer defines: never valid in a file */
};

/*
 * The traits of type id t.  NULL when t is outside [0, QUANT_TYPE_COUNT);
 * removed ids (4, 5, 31-33, 36-38) return traits with removed = 1 and
 * blck = size = 0 and a name like "Q4_2 (removed)".
 */
const struct quant_traits *quant_traits(int t);

/* 1 when t is a type a tensor may have (known and not removed). */
int	quant_valid(int t);

/* ggml's name of t, or "?" */
const char *quant_name(int t);

/* The id of a type name, case-insensitive ("q4_k", "NVFP4"); -1 if unknown. */
int	quant_from_name(const char *name);

/* Bytes for n elements of type t: n / blck * size.  0 when t is not valid
 * or n is not a multiple of the block size. */
size_t	quant_row_size(int t, int64_t n);

/*
 * A type whose block divides a row of n elements, as llama-quantize's
 * tensor_type_fallback picks it: t itself when its block divides n, else
 * Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K Q3_K Q2_0 TQ1_0 TQ2_0 ->
 * Q4_0, the IQ1-IQ3 types and IQ4_XS -> IQ4_NL; NVFP4 and MXFP4 (which
 * llama-quantize refuses) -> Q8_0; F16 when that block does not divide n
 * either, or for any other type.
 */
int	quant_fit_block(int t, int64_t n);

/*
 * Scalar conversions, exact to ggml's.  f32_to_f16 rounds to nearest even
 * (overflow to Inf, NaN to sign|0x7E00); f32_to_bf16 rounds to nearest even
 * and makes a NaN quiet (ggml_compute_fp32_to_bf16).  ue4m3 is NVFP4's
 * unsigned E4M3 scale (bit 7 ignored; 0 and 0x7F decode to 0); f32_to_ue4m3
 * is ggml_fp32_to_ue4m3 (x <= 0 or NaN -> 0, clamped to 448).  e8m0 is
 * MXFP4's power-of-two scale, 2^(e-127) (0xFF -> Inf, as ggml).
 */
float	quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);
float	quant_bf16_to_f32(uint16_t h);
uint16_t quant_f32_to_bf16(float f);
float	quant_ue4m3_to_f32(uint8_t x);
uint8_t	quant_f32_to_ue4m3(float x);
float	quant_e8m0_to_f32(uint8_t e);

/* 1 when quant_dequantize_row supports type t. */
int	quant_can_dequantize(int t);

/*
 * Decode n elements of type t at src into dst (CPU reference, exact to
 * ggml's dequantize_row_*): F32 F16 BF16 F64 I8 I16 I32 I64, Q4_0 Q4_1
 * Q5_0 Q5_1 Q8_0 Q8_1, Q2_K..Q8_K, IQ4_NL IQ4_XS, TQ1_0 TQ2_0, MXFP4 NVFP4,
 * Q1_0 Q2_0 (not the IQ1/IQ2/IQ3 grid types).  src needs no alignment.  NVFP4's per-tensor `.scale` sidecar is not
 * applied here.  Returns 0, or -1 for an unsupported type or n not a
 * multiple of the block size (dst untouched).
 */
int	quant_dequantize_row(int type, const void *src, float *dst, int64_t n);

/* 1 when quant_quantize_row supports type t. */
int	quant_can_quantize(int t);

/*
 * Encode n floats at src as type t into dst (quant_row_size(t, n) bytes),
 * bit-identical to ggml's quantize_row_*_ref: F32 F16 BF16, Q4_0 Q4_1 Q5_0
 * Q5_1 Q8_0 Q8_1, Q4_K Q5_K Q6_K Q8_K, IQ4_NL IQ4_XS, TQ1_0 TQ2_0, MXFP4, NVFP4,
 * Q1_0 Q2_0 (identical when ggml is built without floating-point
 * contraction; see t/peer/ggml-ref.sh).  Denormals, zeros and huge finite
 * values are encoded as ggml encodes them.  Returns 0, or -1 with the reason in
 * err[UTIL_ERRLEN] (may be NULL) for an unsupported type, n not a multiple
 * of the block size, or a NaN/Inf element (dst untouched).
 */
int	quant_quantize_row(int type, const float *src, void *dst, int64_t n, char *err);

/*
 * Dot products of one weight row w (n elements of type t) with an
 * activation row, as ggml's CPU backend computes them.
 *
 * Quantized-activation path: quant_vec_dot_type(t) names the activation
 * type (Q8_0 for Q4_0 Q5_0 Q8_0 IQ4_NL MXFP4 NVFP4; Q8_1 for Q4_1 Q5_1;
 * Q8_K for Q2_K..Q6_K and IQ4_XS; F32 for F32 F16 BF16, whose activations
 * stay float (ggml converts them to F16/BF16; we keep full precision);
 * -1 when t has no dot).  quant_quantize_act(t, x, xq, n) writes x as that
 * type into xq (quant_row_size(quant_vec_dot_type(t), n) bytes; ggml's
 * quantize_row_q8_*_ref, no NaN check: activations are trusted), once per
 * activation row, and quant_vec_dot(t, n, w, xq) returns sum_i w[i]*xq[i].
 *
 * Float-activation path: quant_dot_f32(t, n, w, x) = sum_i w[i]*x[i].
 *
 * AVX2+FMA+F16C code is chosen once at load time where the CPU has it,
 * portable C otherwise (quant_dot_impl says which).  A row's result
 * depends only on (t, n, w, activation): the same reduction order whatever
 * the caller or the other rows, so batched and single-row calls agree bit
 * for bit.  No shared mutable state: safe from many threads.  n must be a
 * multiple of the block size and t have a dot; otherwise quant_vec_dot
 * and quant_dot_f32 return NaN and quant_quantize_act returns -1.
 */
int	quant_vec_dot_type(int t);
int	quant_quantize_act(int t, const float *x, void *xq, int64_t n);
float	quant_vec_dot(int t, int64_t n, const void *w, const void *xq);
float	quant_dot_f32(int t, int64_t n, const void *w, const float *x);

/*
 * quant_vec_dot of one weight row w with m activation rows at once: row r
 * at xq + r * ldxq bytes (as quant_quantize_act wrote it), its dot into
 * out[r].  Each out[r] is quant_vec_dot(t, n, w, xq + r * ldxq) bit for
 * bit: the rows share the weight's loads and unpacking, never a sum, so a
 * batch of rows costs less than its rows one by one and computes the same.
 * m >= 1; where quant_vec_dot would return NaN, every out[r] is NaN.
 */
void	quant_vec_dot_rows(int t, int64_t n, const void *w, const void *xq, size_t ldxq,
	    int m, float *out);

/*
 * Products of many rows, faster still where the CPU has AVX-512 VNNI: the
 * m activation rows (as quant_vec_dot_rows takes them) are laid out once
 * by quant_pack into quant_pack_size(t, n, m) bytes at pk, then
 * quant_vec_dot_packed(t, n, w, pk, m, out) puts in out[r] the bits of
 * quant_vec_dot(t, n, w, row r) for any weight row w of t.  Two rows share
 * each 512-bit step, lane for lane the one-row kernel's.  quant_pack_size
 * is 0 where there is no such kernel for t on this CPU (use
 * quant_vec_dot_rows); otherwise m >= 1 and n whole blocks.
 */
size_t	quant_pack_size(int t, int64_t n, int m);
void	quant_pack(int t, int64_t n, const void *xq, size_t ldxq, int m, void *pk);
void	quant_vec_dot_packed(int t, int64_t n, const void *w, const void *pk, int m,
	    float *out);

/* Which dot product code runs here: "avx2" or "portable". */
const char *quant_dot_impl(void);

#endif
