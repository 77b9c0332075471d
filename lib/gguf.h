/*
 * gguf: the GGUF container (v2 and v3, little-endian): a strict reader over
 * mmap, memory or a stream, and a streaming writer.
 *
 * The reader follows ggml's gguf.cpp: strings are a uint64 length plus bytes
 * (no NUL), no nested arrays, no duplicate keys or tensor names, names
 * shorter than 64 bytes, at most 4 dims, `general.alignment` a UINT32 power
 * of two (default 32), and tensor offsets strictly contiguous: each one
 * equals the sum of the earlier tensors' sizes padded to the alignment.
 * It never reads outside the bytes it was given.  Kv and tensor indices are
 * int64_t in file order; lookups return -1 when absent.
 *
 * The writer keeps kv order, value types and n_dims exactly as given, so
 * reading a file written by llama.cpp and writing it back (gguf_writer_copy_kv,
 * gguf_writer_add_tensor with the same fields, the same bytes) reproduces it
 * byte for byte.  Values are little-endian: this module assumes a
 * little-endian host.
 */
#ifndef MEMRA_GGUF_H
#define MEMRA_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum gguf_type {
	GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2,
	GGUF_TYPE_INT16 = 3, GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5,
	GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7, GGUF_TYPE_STRING = 8,
	GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
	GGUF_TYPE_FLOAT64 = 12,
	GGUF_TYPE_COUNT = 13
};

#define GGUF_DEFAULT_ALIGNMENT	32
#define GGUF_MAX_DIMS		4
#define GGUF_MAX_NAME		64	/* names are shorter than this */

/* One tensor of the table, as read (or as given to the writer). */
struct gguf_tensor {
	char	name[GGUF_MAX_NAME];	/* NUL-terminated */
	int	type;			/* ggml type id (quant.h) */
	int	n_dims;			/* 0..4 as stored; ne[j] = 1 for j >= n_dims */
	int64_t	ne[GGUF_MAX_DIMS];	/* ne[0] is the contiguous (row) dimension */
	uint64_t offset;		/* from the start of the data section */
	uint64_t nbytes;		/* unpadded */
};

struct gguf;

/*
 * Open and validate a GGUF file: mmap'd when path is a regular file, read
 * as a stream when path is "-" (stdin) or a pipe.  Only the header is read;
 * tensor data is touched on demand.  NULL on failure with "path: why" in
 * err (UTIL_ERRLEN).  gguf_close frees (NULL is a no-op).
 */
struct gguf *gguf_open(const char *path, char *err);
/* The same over a stream the caller opened (and closes after gguf_close):
 * read forward only, tensor data through gguf_read_data. */
struct gguf *gguf_open_stream(FILE *fp, const char *name, char *err);
/* The same over len bytes at buf, which the caller keeps alive and
 * unchanged until gguf_close.  name is only used in messages. */
struct gguf *gguf_open_mem(const void *buf, size_t len, const char *name, char *err);
void	gguf_close(struct gguf *);

/* The reason of the last failed call on g. */
const char *gguf_errmsg(const struct gguf *);

uint32_t gguf_version(const struct gguf *);
size_t	gguf_alignment(const struct gguf *);
/* Absolute file offset of the data section, and its size (every tensor
 * padded to the alignment). */
uint64_t gguf_data_offset(const struct gguf *);
uint64_t gguf_data_size(const struct gguf *);
/* File size in bytes; 0 for a stream, where it is not known. */
uint64_t gguf_file_size(const struct gguf *);

/* --- key/value metadata --- */
int64_t	gguf_n_kv(const struct gguf *);
int64_t	gguf_find_key(const struct gguf *, const char *key);
const char *gguf_kv_key(const struct gguf *, int64_t i);	/* NUL-terminated */
int	gguf_kv_type(const struct gguf *, int64_t i);		/* enum gguf_type */
/* "uint8" ... "float64", "?" for an unknown id */
const char *gguf_type_name(int type);

/*
 * Typed scalar getters: 0, or -1 when kv i does not have exactly that type
 * (the reason in gguf_errmsg).  gguf_get_bool stores 0 or 1.
 */
int	gguf_get_u8(struct gguf *, int64_t i, uint8_t *out);
int	gguf_get_i8(struct gguf *, int64_t i, int8_t *out);
int	gguf_get_u16(struct gguf *, int64_t i, uint16_t *out);
int	gguf_get_i16(struct gguf *, int64_t i, int16_t *out);
int	gguf_get_u32(struct gguf *, int64_t i, uint32_t *out);
int	gguf_get_i32(struct gguf *, int64_t i, int32_t *out);
int	gguf_get_u64(struct gguf *, int64_t i, uint64_t *out);
int	gguf_get_i64(struct gguf *, int64_t i, int64_t *out);
int	gguf_get_f32(struct gguf *, int64_t i, float *out);
int	gguf_get_f64(struct gguf *, int64_t i, double *out);
int	gguf_get_bool(struct gguf *, int64_t i, int *out);
/* Any integer type, when its value fits int64_t (hparams are written as
 * uint32 by some converters and int32 by others). */
int	gguf_get_int(struct gguf *, int64_t i, int64_t *out);
/* The raw little-endian bytes of a numeric or bool scalar kv i (possibly
 * unaligned: memcpy them); NULL for strings and arrays. */
const void *gguf_kv_data(const struct gguf *, int64_t i);
/* A STRING value: its bytes (not NUL-terminated) and length; NULL on a
 * type mismatch.  The pointer lives as long as g. */
const char *gguf_get_str(struct gguf *, int64_t i, size_t *len);

/* ARRAY values: element type and count (-1 and 0 when kv i is not an array). */
int	gguf_arr_type(const struct gguf *, int64_t i);
uint64_t gguf_arr_n(const struct gguf *, int64_t i);
/* The raw little-endian elements of a numeric array (possibly unaligned:
 * memcpy them), NULL for arrays of strings and non-arrays. */
const void *gguf_arr_data(const struct gguf *, int64_t i);
/* Element j of a numeric array, copied into out (the element's size);
 * -1 when i is not a numeric array or j is out of range. */
int	gguf_arr_get(struct gguf *, int64_t i, uint64_t j, void *out);
/* Element j of an array of strings, as gguf_get_str. */
const char *gguf_arr_str(struct gguf *, int64_t i, uint64_t j, size_t *len);

/* --- tensors --- */
int64_t	gguf_n_tensors(const struct gguf *);
int64_t	gguf_find_tensor(const struct gguf *, const char *name);
/* Tensor i, NULL when out of range.  Lives as long as g. */
const struct gguf_tensor *gguf_tensor(const struct gguf *, int64_t i);
/* Tensor i's bytes in the mapping; NULL for a stream (use gguf_read_data). */
const void *gguf_tensor_data(const struct gguf *, int64_t i);
/*
 * Copy n bytes of the data section at offset off into buf.  Works on every
 * reader; a stream only moves forward (off below what was already consumed
 * fails).  -1 when the range is outside the data section or the file ends
 * early ("truncated file").
 */
int	gguf_read_data(struct gguf *, uint64_t off, void *buf, size_t n);

/* Bytes of a tensor of type t and shape ne[n_dims] into *out: 0, or -1 when
 * the type is not valid, ne[0] is not a multiple of its block size, a dim is
 * negative, or the size overflows int64. */
int	gguf_nbytes(int type, int n_dims, const int64_t *ne, uint64_t *out);

/* --- writer --- */
struct gguf_writer;

/*
 * A writer to fp (a util_ofile's fp for atomic files); version 3.  Add kvs
 * and tensor infos, then gguf_writer_write_header, then every tensor's
 * bytes in order through gguf_writer_write (as many calls per tensor as
 * you like; the padding is written for you), then gguf_writer_finish.
 * The caller closes fp.  Every call returns 0, or -1 with the reason in
 * gguf_writer_errmsg; after a failure the writer refuses further work.
 */
struct gguf_writer *gguf_writer_new(FILE *fp);
void	gguf_writer_free(struct gguf_writer *);
const char *gguf_writer_errmsg(const struct gguf_writer *);

/* Add a kv in order; duplicates are refused.  A `general.alignment` kv
 * (UINT32, power of two) sets the alignment; set_alignment adds that kv. */
int	gguf_writer_set_alignment(struct gguf_writer *, uint32_t alignment);
int	gguf_writer_add_u8(struct gguf_writer *, const char *key, uint8_t v);
int	gguf_writer_add_i8(struct gguf_writer *, const char *key, int8_t v);
int	gguf_writer_add_u16(struct gguf_writer *, const char *key, uint16_t v);
int	gguf_writer_add_i16(struct gguf_writer *, const char *key, int16_t v);
int	gguf_writer_add_u32(struct gguf_writer *, const char *key, uint32_t v);
int	gguf_writer_add_i32(struct gguf_writer *, const char *key, int32_t v);
int	gguf_writer_add_u64(struct gguf_writer *, const char *key, uint64_t v);
int	gguf_writer_add_i64(struct gguf_writer *, const char *key, int64_t v);
int	gguf_writer_add_f32(struct gguf_writer *, const char *key, float v);
int	gguf_writer_add_f64(struct gguf_writer *, const char *key, double v);
int	gguf_writer_add_bool(struct gguf_writer *, const char *key, int v);
int	gguf_writer_add_str(struct gguf_writer *, const char *key, const char *s, size_t len);
/* An array of n numeric elements of type elem (raw little-endian bytes). */
int	gguf_writer_add_arr(struct gguf_writer *, const char *key, int elem,
	    const void *data, uint64_t n);
/* An array of n strings; len[j] their lengths, or len NULL for C strings. */
int	gguf_writer_add_arr_str(struct gguf_writer *, const char *key,
	    const char *const *s, const size_t *len, uint64_t n);
/* Copy kv i of r verbatim (same key, type and bytes). */
int	gguf_writer_copy_kv(struct gguf_writer *, const struct gguf *r, int64_t i);

/* Add a tensor info; its offset follows the previous tensor's padded end. */
int	gguf_writer_add_tensor(struct gguf_writer *, const char *name, int type,
	    int n_dims, const int64_t *ne);
int	gguf_writer_write_header(struct gguf_writer *);
/* The next n bytes of the current tensor; n may not run past its end. */
int	gguf_writer_write(struct gguf_writer *, const void *buf, size_t n);
/* Fails unless every tensor was written in full; flushes fp. */
int	gguf_writer_finish(struct gguf_writer *);

#endif
