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
	QUANT_TYPE_COUNT = 42
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

#endif
