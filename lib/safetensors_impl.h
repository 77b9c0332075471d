/*
 * safetensors_impl: the handle's layout, shared by safetensors.c (files)
 * and safetensors_conv.c (the GGUF conversion plan and tokenizer).
 * Private to those two files.
 */
#ifndef MEMRA_SAFETENSORS_IMPL_H
#define MEMRA_SAFETENSORS_IMPL_H

#include "safetensors.h"
#include "util.h"

struct json;

/* row / column permutations of a planned tensor (safetensors_out.perm) */
enum {
	P_NONE,
	P_ROPE,		/* llama q/k rows: per head, (2, hd/2) -> (hd/2, 2); p0 = heads */
	P_VROWS,	/* V heads grouped -> tiled in rows [p0, p0 + p3*p1): p1 rows per head, p2 k heads, p3 v heads */
	P_VCOLS,	/* the same over the columns of each row (p0 = 0) */
	P_GATEUP,	/* fused experts [E][2 p0][ne0]: half p1 (0 gate, 1 up) of each */
};

/* the NVFP4 layout a checkpoint declares (safetensors.nvq) */
enum { ST_NV_NONE, ST_NV_CT, ST_NV_MO };

struct st_shard {
	char	*path;
	void	*map;		/* [len] bytes, mmapped when own */
	size_t	len;
	int	own;
	struct json *hdr;	/* parsed header; tensor names point into it */
};

struct st_byname {
	const char *name;
	size_t	i;		/* index into t */
};

struct safetensors {
	char	err[UTIL_ERRLEN];
	char	*dir;
	struct json *config;
	struct st_shard *shards;
	size_t	nshards, capshards;
	struct safetensors_tensor *t;	/* [nt] */
	size_t	nt, capt;
	struct st_byname *byname;	/* [nbyname] sorted by name */
	size_t	nbyname;
	/* the plan */
	char	arch[24];
	struct safetensors_out *out;	/* [nout] */
	size_t	nout, capout;
	struct safetensors_kv *kv;	/* [nkv] */
	size_t	nkv, capkv;
	int	nvq;		/* ST_NV_*: from quantization_config / hf_quant_config.json */
	struct json *tokjson[2];	/* tokenizer.json, tokenizer_config.json */
	void	**allocs;		/* freed at close: kv strings and arrays */
	size_t	nallocs, capallocs;
};

int	st_cmp_str(const void *, const void *);
char	*st_join(const char *dir, const char *name);
int	st_read_json(struct safetensors *, const char *name, struct json **out);
void	*st_keep(struct safetensors *, void *p);
void	st_plan_free(struct safetensors *);
int	st_kv_str(struct safetensors *, const char *key, const char *s, size_t n);
/* A u32 (0..UINT32_MAX, else an error naming it) or f32 kv under the architecture's
 * prefix ("qwen35.block_count"): 0, or -1 with st->err. */
int	st_kv_u32(struct safetensors *, const char *key, int64_t v);
int	st_kv_f32(struct safetensors *, const char *key, double v);
struct safetensors_kv *st_kv_add(struct safetensors *, const char *key, int type);
/* A new planned tensor named name (zeroed), or NULL: out of memory. */
struct safetensors_out *st_new_out(struct safetensors *, const char *name);
/* Sort the planned tensors as a converter writes them (token_embd, blk.0 .., output). */
void	st_sort_out(struct safetensors *);
/* 1 when config.json names a DFlash / DFlash2 / DSpark drafter (architectures). */
int	st_is_dflash(const struct safetensors *);
/* The plan of a DFlash / DFlash2 drafter (lib/safetensors_dflash.c); a DSpark one is an error. */
int	st_plan_dflash(struct safetensors *);
/* The plan of a gemma4 / gemma4_text checkpoint (lib/safetensors_gemma4.c). */
int	st_plan_gemma4(struct safetensors *);
/* The source row of planned row r, and the source column of column j. */
int64_t	st_src_row(const struct safetensors_out *, int64_t r);
int64_t	st_src_col(const struct safetensors_out *, int64_t j);
/* Element i of dtype dt at p as float into *v: 0, or -1 for a dtype with no float meaning. */
int	st_read_elem(const void *p, int dt, int64_t i, float *v);

/* NVFP4 checkpoints (lib/safetensors_nvfp4.c) */
/* Which layout the config declares, into st->nvq: 0, or -1 with st->err. */
int	st_nv_config(struct safetensors *);
/* 1: t holds NVFP4 codes (weight_packed, or ModelOpt's U8 weight). */
int	st_nv_weight(const struct safetensors *, const struct safetensors_tensor *t);
/* 1: t is a scale beside NVFP4 codes (no tensor of its own), 0 not, -1 with st->err. */
int	st_nv_aux(struct safetensors *, const struct safetensors_tensor *t);
/* o reads NVFP4 codes o->src: scales found and checked, ne[0] set.  0 or -1 with st->err. */
int	st_nv_attach(struct safetensors *, struct safetensors_out *o);
/* Expert e of stack o (srcs) is NVFP4 codes t: its scales found and checked.  0 or -1. */
int	st_nv_attach_expert(struct safetensors *, struct safetensors_out *o, int64_t e,
	    const struct safetensors_tensor *t);
/* Plan out[i]'s per-tensor scale "<name less .weight>.scale" when not 1 (F32 [1], or a
 * stack's F32 [n_exp]).  0 or -1. */
int	st_nv_scale_out(struct safetensors *, size_t i);
/* The scales of every NVFP4 stack, once its experts are all planned (then sorted).  0 or -1. */
int	st_nv_stacks(struct safetensors *);
/* Planned NVFP4 row r as GGUF NVFP4 blocks, ne[0] / 64 * 36 bytes into d. */
void	st_nv_row(const struct safetensors_out *, int64_t r, uint8_t *d);
/* The same row as float32 (times the per-tensor scale).  0 or -1 with err. */
int	st_nv_row_f32(const struct safetensors_out *, int64_t r, float *d, char *err);

#endif
