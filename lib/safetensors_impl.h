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
struct safetensors_kv *st_kv_add(struct safetensors *, const char *key, int type);
/* A new planned tensor named name (zeroed), or NULL: out of memory. */
struct safetensors_out *st_new_out(struct safetensors *, const char *name);
/* Sort the planned tensors as a converter writes them (token_embd, blk.0 .., output). */
void	st_sort_out(struct safetensors *);
/* The plan of a gemma4 / gemma4_text checkpoint (lib/safetensors_gemma4.c). */
int	st_plan_gemma4(struct safetensors *);

#endif
