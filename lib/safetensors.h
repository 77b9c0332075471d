/*
 * safetensors: Hugging Face checkpoints (config.json + one or many
 * .safetensors shards) read over mmap, and their conversion to GGUF
 * names, shapes and values as llama.cpp's converter does it.
 *
 * Two layers.  The first is the files: every shard's header is parsed
 * strictly (dtype, shape, offsets inside the file, no overlap, no gap,
 * sizes that match, no overflow) and its tensors are listed by their HF
 * name.  The second is the conversion plan (safetensors_plan): for each
 * GGUF tensor the checkpoint becomes, its name, ne[] and source dtype,
 * and a reader that produces its rows one block at a time, so that a
 * converter never holds more than one tensor; plus the GGUF metadata
 * the architecture needs (safetensors_kv).  Supported architectures:
 * llama, and qwen35 (text-only qwen3_5_text and released qwen3_5 with
 * text_config) including its MTP block, qwen35moe, and step35
 * (step3p7's text model, step3p5; its NextN layers not yet), gemma4,
 * and the DFlash / DFlash2 block drafters (arch dflash: config.json
 * architectures DFlashDraftModel, DFlash2DraftModel; no tokenizer of
 * their own).
 */
#ifndef MEMRA_SAFETENSORS_H
#define MEMRA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

struct json;

/* Element types of the safetensors format. */
enum safetensors_dtype {
	SAFETENSORS_BOOL, SAFETENSORS_U8, SAFETENSORS_I8, SAFETENSORS_F8_E5M2,
	SAFETENSORS_F8_E4M3, SAFETENSORS_F8_E8M0, SAFETENSORS_I16, SAFETENSORS_U16,
	SAFETENSORS_F16, SAFETENSORS_BF16, SAFETENSORS_I32, SAFETENSORS_U32,
	SAFETENSORS_F32, SAFETENSORS_F64, SAFETENSORS_I64, SAFETENSORS_U64,
	SAFETENSORS_DTYPE_COUNT
};

#define SAFETENSORS_MAX_DIMS 8

/* One tensor of one shard, as the file states it (PyTorch order). */
struct safetensors_tensor {
	const char *name;	/* HF name, NUL-terminated */
	int	dtype;		/* enum safetensors_dtype */
	int	n_dims;		/* 0 (a scalar) .. SAFETENSORS_MAX_DIMS */
	int64_t	shape[SAFETENSORS_MAX_DIMS];	/* [n_dims], outermost first */
	int64_t	n_elem;		/* product of shape */
	const void *data;	/* nbytes, inside the mmap of its shard */
	uint64_t nbytes;
	int	shard;		/* index into the shard list */
};

struct safetensors;

/*
 * Open a checkpoint: a directory (config.json, model.safetensors or the
 * shards of model.safetensors.index.json, plus any other *.safetensors
 * there such as a separate mtp file; an unlisted file whose names
 * repeat listed ones is an alternative packing and is ignored) or a
 * single .safetensors file (config.json beside it is read if present).
 * Every shard is mmapped and its header checked.  NULL on failure with
 * "path: why" in err (UTIL_ERRLEN).  Close with safetensors_close.
 */
struct safetensors *safetensors_open(const char *path, char *err);

/*
 * Parse one safetensors image already in memory (len bytes, not copied:
 * buf must outlive the handle).  For tests and fuzzing; no config.
 */
struct safetensors *safetensors_open_mem(const void *buf, size_t len, char *err);

void	safetensors_close(struct safetensors *);

/* The reason for the last failure of a call on this handle. */
const char *safetensors_errmsg(const struct safetensors *);

/* Tensors of every shard, in shard then file-offset order. */
size_t	safetensors_count(const struct safetensors *);
const struct safetensors_tensor *safetensors_at(const struct safetensors *, size_t i);
/* The tensor of that HF name, or NULL. */
const struct safetensors_tensor *safetensors_find(const struct safetensors *, const char *name);

/* Shards: count, and each one's path ("<memory>" for open_mem). */
size_t	safetensors_shard_count(const struct safetensors *);
const char *safetensors_shard_path(const struct safetensors *, size_t i);

/* config.json (NULL when there is none).  Owned by the handle. */
const struct json *safetensors_config(const struct safetensors *);

/*
 * A hyperparameter: text_config.<key> when config.json nests one, else
 * the top-level <key>.  NULL when absent.
 */
const struct json *safetensors_hparam(const struct safetensors *, const char *key);

/* "BF16", ...; "?" when out of range.  Element size in bytes, 0 if out of range. */
const char *safetensors_dtype_name(int dtype);
int	safetensors_dtype_size(int dtype);
/* The ggml type (enum quant_type) holding the same bits, or -1 (FP8, U16..). */
int	safetensors_dtype_ggml(int dtype);

/* ---- conversion to GGUF ---- */

/* One GGUF tensor the checkpoint converts to. */
struct safetensors_out {
	char	name[64];	/* GGUF name: "blk.3.attn_q.weight" */
	int	n_dims;		/* 1..4 */
	int64_t	ne[4];		/* GGUF order: ne[0] is the row length; unused dims 1 */
	int64_t	n_rows;		/* ne[1]*ne[2]*ne[3] */
	int	src_dtype;	/* enum safetensors_dtype of the source */
	int	verbatim;	/* 1: the values are the source's unchanged (rows may be
				   reordered): safetensors_read_raw may copy them */
	const struct safetensors_tensor *src;	/* the (first) source */
	/* a stack of sources (qwen35moe's per-expert tensors), NULL for one:
	 * row r is row r % src_rows of srcs[r / src_rows] */
	const struct safetensors_tensor **srcs;
	int64_t	src_rows;
	const float *synth;	/* [n_rows][ne[0]] F32 values of the plan's own, src NULL
				   (gemma4's rope_freqs.weight) */
	/* private to safetensors.c: how rows and values are transformed */
	int	xform;		/* elementwise op */
	int	perm;		/* row / column permutation kind */
	int64_t	pa, pb, pc, pd;	/* permutation parameters */
	const struct safetensors_tensor *scale;	/* FP8 weights: the block scales
				   (<name>_scale_inv, [ceil(rows/bs[0])][ceil(cols/bs[1])]) */
	int64_t	bs[2];		/* their block size, rows and columns */
	/* NVFP4 weights (compressed-tensors or ModelOpt): read_raw gives GGUF
	 * NVFP4 rows (type 40, ne[0] / 64 blocks of 36 bytes, no requantization);
	 * read_rows gives their values times s2, the per-tensor multiplier that
	 * the plan also holds as "<name less .weight>.scale" (F32 [1], absent
	 * when s2 is 1), as llama.cpp's converter writes it */
	int	nvfp4;
	float	s2;
	/* a stack of NVFP4 experts (srcs): expert e's block scales and its own
	 * multiplier s2 (s2 above unused); the plan's "<name less .weight>.scale"
	 * is then F32 [n_exp], absent when every one is 1 */
	const struct safetensors_tensor **nv_scales;
	float	*nv_s2;
};

/*
 * Build the conversion plan from config.json's model_type (llama,
 * qwen3_5_text, qwen3_5, qwen3_5_moe_text, qwen3_5_moe): the GGUF tensor
 * list and metadata (qwen35moe's per-expert tensors stacked into
 * ffn_{gate,up,down}_exps, as llama.cpp's converter writes them).  FP8
 * weights with block scales (<name>_scale_inv, quantization_config
 * weight_block_size, default 128x128) read as their scaled values.  The HF
 * names must all be known (vision towers are skipped); an unknown name,
 * a missing required tensor or a shape that disagrees with config.json
 * is an error.  nomtp = 1 leaves out the MTP block.  0, or -1 with
 * safetensors_errmsg set.  Calling it again rebuilds the plan.
 */
int	safetensors_plan(struct safetensors *, int nomtp);

/* The GGUF architecture name of the plan ("llama", "qwen35", "qwen35moe", "dflash", ...). */
const char *safetensors_arch(const struct safetensors *);

/* The planned tensors, in GGUF order (token_embd, blk.0.., output_norm, output). */
size_t	safetensors_out_count(const struct safetensors *);
const struct safetensors_out *safetensors_out(const struct safetensors *, size_t i);

/*
 * Rows row0 .. row0+nrows-1 of a planned tensor as float32 into
 * dst[nrows][ne[0]], transforms applied.  Reentrant: threads may read
 * rows of the same or different tensors at once.  0, or -1 with the
 * reason in err (UTIL_ERRLEN) for a range outside the tensor or a
 * source dtype with no float meaning.
 */
int	safetensors_read_rows(const struct safetensors_out *, int64_t row0, int64_t nrows,
	    float *dst, char *err);

/*
 * The same rows as raw source bytes (ne[0]*dtype size per row) into dst;
 * only for out->verbatim tensors.  0 or -1 with err.
 */
int	safetensors_read_raw(const struct safetensors_out *, int64_t row0, int64_t nrows,
	    void *dst, char *err);

/* GGUF value types used by safetensors_kv (the same ids as GGUF's). */
enum safetensors_kvtype {
	SAFETENSORS_KV_U32 = 4, SAFETENSORS_KV_I32 = 5, SAFETENSORS_KV_F32 = 6,
	SAFETENSORS_KV_BOOL = 7, SAFETENSORS_KV_STR = 8, SAFETENSORS_KV_ARR = 9
};

/* One GGUF metadata pair of the plan.  Scalars in v; strings in s/slen;
 * arrays: arr_type (I32/F32/BOOL/STR) and n elements in i32/f32/u8/strs. */
struct safetensors_kv {
	const char *key;
	int	type;
	int	arr_type;
	union { uint32_t u32; int32_t i32; float f32; int b; } v;
	const char *s;
	size_t	slen;
	uint64_t n;
	const int32_t *i32;	/* [n] */
	const float *f32;	/* [n] */
	const uint8_t *u8;	/* [n] BOOL arrays, 0 or 1 */
	const char *const *strs;	/* [n], each NUL-terminated */
	const size_t *strlens;	/* [n] */
};

/* The planned metadata, in the order a converter writes it. */
size_t	safetensors_kv_count(const struct safetensors *);
const struct safetensors_kv *safetensors_kv(const struct safetensors *, size_t i);

/*
 * Add the tokenizer metadata read from tokenizer.json and
 * tokenizer_config.json beside config.json, as llama.cpp's converter
 * does for byte-level BPE: tokenizer.ggml.model "gpt2", .pre (pre NULL
 * detects it from the pre-tokenizer regex: qwen2, qwen35, llama-bpe),
 * .tokens and .token_type (vocab_size entries: normal 1, control 3,
 * user-defined 4, unused 5 for ids the tokenizer lacks), .merges, the
 * special token ids, add_bos_token / add_eos_token, and
 * tokenizer.chat_template.  Call after safetensors_plan.  0, or -1 with
 * safetensors_errmsg set (no tokenizer.json is an error, but for a
 * dflash drafter, whose vocabulary is its target's: then nothing is added).
 */
int	safetensors_plan_tokenizer(struct safetensors *, const char *pre);

#endif
