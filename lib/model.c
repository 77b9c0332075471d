#include "model.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "hub.h"
#include "learned.h"
#include "model_impl.h"
#include "quant.h"
#include "ranks.h"
#include "safetensors.h"
#include "spec.h"
#include "util.h"

/*
 * Loading: hyper-parameters from GGUF-style metadata and weights by GGUF
 * name, here from an HF checkpoint through the safetensors conversion
 * plan (a GGUF source will feed the same binding).
 */

struct src {
	struct safetensors *st;	/* one of the two */
	struct gguf *gg;	/* the metadata */
	struct gguf **parts;	/* [n_parts] where the tensors are; n_parts 0: gg */
	int	n_parts;
	const char *arch;
	char	archbuf[32];
	const char *path;	/* a draft's, named in its errors */
	int64_t	nx_rows;	/* step35: rows of the NextN blocks' heads (0: n_vocab) */
};

/* One GGUF-named tensor of the source. */
struct src_tensor {
	int	type;		/* ggml type of data */
	int64_t	ne0, n_rows;
	const void *data;	/* GGUF: the mapped rows; NULL: read through out */
	const struct safetensors_out *out;
};

static const struct safetensors_kv *
st_kv(struct src *s, const char *k)
{
	for (size_t i = 0; i < safetensors_kv_count(s->st); i++)
		if (strcmp(safetensors_kv(s->st, i)->key, k) == 0)
			return safetensors_kv(s->st, i);
	return NULL;
}

/* "<arch>.<key>" as an integer, or def when absent */
static int
src_int(struct src *s, const char *key, int def)
{
	char k[128];
	const struct safetensors_kv *kv;
	int64_t i, v;

	snprintf(k, sizeof k, "%s.%s", s->arch, key);
	if (s->gg != NULL)
		return (i = gguf_find_key(s->gg, k)) >= 0 && gguf_get_int(s->gg, i, &v) == 0 ?
		    (int)v : def;
	if ((kv = st_kv(s, k)) == NULL)
		return def;
	return kv->type == SAFETENSORS_KV_I32 ? kv->v.i32 : (int)kv->v.u32;
}

static float
src_float(struct src *s, const char *key, float def)
{
	char k[128];
	const struct safetensors_kv *kv;
	int64_t i;
	float v;

	snprintf(k, sizeof k, "%s.%s", s->arch, key);
	if (s->gg != NULL)
		return (i = gguf_find_key(s->gg, k)) >= 0 && gguf_get_f32(s->gg, i, &v) == 0 ?
		    v : def;
	kv = st_kv(s, k);
	return kv != NULL && kv->type == SAFETENSORS_KV_F32 ? kv->v.f32 : def;
}

/*
 * "<arch>.<key>" element j as a number (llama.cpp's get_key_or_arr: a
 * scalar is every layer's), into *out: 0, or 1 (def stored) when absent.
 */
static int
src_elem(struct src *s, const char *key, int j, double def, double *out)
{
	char k[128];
	const struct safetensors_kv *kv;
	int64_t i;

	*out = def;
	snprintf(k, sizeof k, "%s.%s", s->arch, key);
	if (s->gg != NULL) {
		union { uint8_t b; int32_t i32; uint32_t u32; float f; } v;
		int t = gguf_arr_type(s->gg, (i = gguf_find_key(s->gg, k)));
		float f;
		int64_t n;

		if (i < 0)
			return 1;
		if (t < 0)
			return gguf_get_f32(s->gg, i, &f) == 0 ? (*out = f, 0) :
			    gguf_get_int(s->gg, i, &n) == 0 ? (*out = (double)n, 0) :
			    gguf_get_bool(s->gg, i, &v.i32) == 0 ? (*out = v.i32, 0) : 1;
		if ((uint64_t)j >= gguf_arr_n(s->gg, i) || gguf_arr_get(s->gg, i, j, &v) != 0)
			return 1;
		*out = t == GGUF_TYPE_FLOAT32 ? v.f : t == GGUF_TYPE_BOOL ? v.b :
		    t == GGUF_TYPE_INT32 ? v.i32 : t == GGUF_TYPE_UINT32 ? (double)v.u32 : def;
		return 0;
	}
	if ((kv = st_kv(s, k)) == NULL)
		return 1;
	if (kv->type == SAFETENSORS_KV_ARR)
		return (uint64_t)j >= kv->n ? 1 : (*out = kv->arr_type == SAFETENSORS_KV_F32 ?
		    kv->f32[j] : kv->arr_type == SAFETENSORS_KV_BOOL ? kv->u8[j] != 0 :
		    kv->i32[j], 0);
	*out = kv->type == SAFETENSORS_KV_F32 ? kv->v.f32 : kv->type == SAFETENSORS_KV_I32 ?
	    kv->v.i32 : kv->type == SAFETENSORS_KV_BOOL ? kv->v.b : (double)kv->v.u32;
	return 0;
}

/* 0 and *t filled, or -1 when the source has no such tensor */
static int
src_tensor(struct src *s, const char *name, struct src_tensor *t)
{
	memset(t, 0, sizeof *t);
	for (int p = 0; s->gg != NULL && p < (s->n_parts > 0 ? s->n_parts : 1); p++) {
		struct gguf *gg = s->n_parts > 0 ? s->parts[p] : s->gg;
		int64_t i = gguf_find_tensor(gg, name);
		const struct gguf_tensor *g;

		if (i < 0)
			continue;
		if ((t->data = gguf_tensor_data(gg, i)) == NULL)
			return -1;
		g = gguf_tensor(gg, i);
		t->type = g->type;
		t->ne0 = g->ne[0];
		t->n_rows = g->ne[1] * g->ne[2] * g->ne[3];
		return 0;
	}
	if (s->gg != NULL)
		return -1;
	for (size_t i = 0; i < safetensors_out_count(s->st); i++)
		if (strcmp(safetensors_out(s->st, i)->name, name) == 0) {
			t->out = safetensors_out(s->st, i);
			t->ne0 = t->out->ne[0];
			t->n_rows = t->out->n_rows;
			t->type = t->out->nvfp4 ? QUANT_NVFP4 : t->out->verbatim ?
			    safetensors_dtype_ggml(t->out->src_dtype) : -1;
			return 0;
		}
	return -1;
}

/* The arch name, from general.architecture or the conversion plan. */
static const char *
src_arch(struct src *s)
{
	int64_t i;
	const char *a;
	size_t n;

	if (s->st != NULL)
		return safetensors_arch(s->st);
	i = gguf_find_key(s->gg, "general.architecture");
	if (i < 0 || (a = gguf_get_str(s->gg, i, &n)) == NULL || n >= sizeof s->archbuf)
		return NULL;
	memcpy(s->archbuf, a, n);
	s->archbuf[n] = '\0';
	return s->archbuf;
}

int
model_conv_dim(const struct model_hparams *hp)
{
	return 2 * hp->n_k_heads * hp->dk + hp->n_v_heads * hp->dv;
}

/*
 * qwen35moe's experts (llama.cpp's keys and defaults: an expert's width
 * n_ff / n_expert_used, the shared one's n_ff, when their keys are absent).
 */
static int
read_moe(struct model *md, struct src *s)
{
	struct model_hparams *hp = &md->hp;

	hp->n_expert = src_int(s, "expert_count", 0);
	hp->n_expert_used = src_int(s, "expert_used_count", 0);
	if (hp->n_expert < 1 || hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert)
		return util_err(md->err, "bad experts (%d, %d used a token)", hp->n_expert,
		    hp->n_expert_used);
	hp->n_ff_exp = src_int(s, "expert_feed_forward_length", hp->n_ff / hp->n_expert_used);
	hp->n_ff_shexp = src_int(s, "expert_shared_feed_forward_length", hp->n_ff);
	if (hp->n_ff_exp <= 0 || hp->n_ff_shexp < 0)
		return util_err(md->err, "bad expert widths (%d, shared %d)", hp->n_ff_exp,
		    hp->n_ff_shexp);
	return 0;
}

/* step35's rotated dims and RoPE bases, full and sliding layers (read_step35). */
struct step35_rope {
	double	rot, rot_swa, theta_swa;
	int	kvh;		/* layer 0's K/V heads: every layer's */
};

/* Layer il's attention, RoPE and FFN limits from s (its entries of the per-layer arrays). */
static int
step35_layer(struct model *md, struct src *s, int il, struct step35_rope *r)
{
	struct model_hparams *hp = &md->hp;
	struct model_layer *L = &md->layers[il];
	double h, hk, swa, le, ls;

	src_elem(s, "attention.head_count", il, 0, &h);
	src_elem(s, "attention.head_count_kv", il, h, &hk);
	src_elem(s, "attention.sliding_window_pattern", il, 0, &swa);
	src_elem(s, "swiglu_clamp_exp", il, 0, &le);
	src_elem(s, "swiglu_clamp_shexp", il, 0, &ls);
	L->n_head = (int)h;
	L->swa = swa != 0;
	L->n_rot = swa != 0 ? (int)r->rot_swa : (int)r->rot / 2;
	L->theta = swa != 0 ? (float)r->theta_swa : hp->rope_theta;
	L->lim_exp = (float)le, L->lim_sh = (float)ls;
	if (il == 0)
		r->kvh = (int)hk;
	if (L->n_head < 1 || (int)hk != r->kvh || r->kvh < 1 || L->n_head % r->kvh ||
	    L->n_rot < 2 || L->n_rot > hp->head_dim || L->n_rot % 2 ||
	    (swa != 0 && hp->n_swa < 1) || le < 0 || ls < 0)
		return util_err(md->err, "layer %d: bad attention (%d heads over %d, %d rope "
		    "dims, window %d)", il, L->n_head, (int)hk, L->n_rot, L->swa ? hp->n_swa : 0);
	hp->n_head = L->n_head > hp->n_head ? L->n_head : hp->n_head;
	return 0;
}

/*
 * step35's per-layer attention, RoPE and FFN limits (llama.cpp's keys and
 * semantics: full layers rotate rope.dimension_count / 2 dims at
 * rope.freq_base, sliding ones rope.dimension_count_swa (else
 * dimension_count) at rope.freq_base_swa; routed experts' weights
 * renormalised unless expert_weights_norm says false).  The NextN layers
 * (nextn_predict_layers, after the trunk's) take the arrays' entries past
 * the trunk's, as llama.cpp's converter writes them.
 */
static int
read_step35(struct model *md, struct src *s)
{
	struct model_hparams *hp = &md->hp;
	struct step35_rope r = { 0 };
	double v, win;

	hp->rope_mode = BACKEND_ROPE_NEOX;
	hp->qk_norm = 1;
	src_elem(s, "rope.dimension_count", 0, hp->head_dim, &r.rot);
	src_elem(s, "rope.dimension_count_swa", 0, r.rot, &r.rot_swa);
	src_elem(s, "rope.freq_base_swa", 0, hp->rope_theta, &r.theta_swa);
	src_elem(s, "attention.sliding_window", 0, 0, &win);
	hp->n_swa = (int)win;
	src_elem(s, "expert_weights_scale", 0, 1, &v);
	hp->exp_scale = (float)v;
	src_elem(s, "expert_weights_norm", 0, 1, &v);
	hp->exp_norm = v != 0;
	if (src_elem(s, "attention.scale", 0, 0, &v) == 0)
		hp->attn_scale = (float)v;
	hp->n_head = 0;
	for (int il = 0; il < hp->n_layer + hp->n_mtp; il++)
		if (step35_layer(md, s, il, &r) != 0)
			return -1;
	hp->n_head_kv = r.kvh;
	hp->n_rot = hp->head_dim;	/* each layer's own in L->n_rot */
	if (hp->n_head > 2 * hp->n_embd)	/* the gate's logits live in a->cat */
		return util_err(md->err, "%d heads: more than 2 x %d", hp->n_head, hp->n_embd);
	return read_moe(md, s);
}

/*
 * A GGUF's per-layer "<arch>.attention.recurrent_layers" (llama.cpp's
 * converter writes it from layer_types) must say what the interval
 * says: the forward knows the interval's pattern only.
 */
static int
check_recurrent(struct model *md, struct src *s)
{
	const struct model_hparams *hp = &md->hp;
	char k[128];
	int64_t i;

	if (s->gg == NULL || hp->arch == MODEL_ARCH_LLAMA)
		return 0;
	snprintf(k, sizeof k, "%s.attention.recurrent_layers", s->arch);
	if ((i = gguf_find_key(s->gg, k)) < 0)
		return 0;
	if (gguf_arr_n(s->gg, i) < (uint64_t)hp->n_layer)
		return util_err(md->err, "'%s' has %llu values for %d layers", k,
		    (unsigned long long)gguf_arr_n(s->gg, i), hp->n_layer);
	for (int il = 0; il < hp->n_layer; il++) {
		uint8_t v = 0;

		if (gguf_arr_get(s->gg, i, il, &v) != 0 ||
		    (v != 0) != ((il + 1) % hp->full_interval != 0))
			return util_err(md->err, "'%s' disagrees with full_attention_interval %d "
			    "at layer %d", k, hp->full_interval, il);
	}
	return 0;
}

/* src_elem as an int: element i, the scalar whatever i, or def when absent. */
static int
src_int_at(struct src *s, const char *key, int i, int def)
{
	double v;

	src_elem(s, key, i, def, &v);
	return (int)v;
}

/* The rotated dims of gemma4's global layers: 2 x the leading 1.0 factors of rope_freqs. */
static int
rope_freqs_rot(struct model *md, struct src *s, int hd)
{
	struct src_tensor t;
	int64_t n, j;
	float *v;
	int rc;

	if (src_tensor(s, "rope_freqs.weight", &t) != 0)
		return hd;
	n = t.ne0 * t.n_rows;
	if (n != hd / 2 || (v = malloc(n * sizeof *v)) == NULL)
		return util_err(md->err, "tensor 'rope_freqs.weight': %lld values, want %d",
		    (long long)n, hd / 2);
	rc = t.data != NULL ? quant_dequantize_row(t.type, t.data, v, n) :
	    safetensors_read_rows(t.out, 0, t.n_rows, v, md->err);
	for (j = 0; rc == 0 && j < n && v[j] == 1.0f; j++)
		;
	free(v);
	return rc != 0 ? util_err(md->err, "tensor 'rope_freqs.weight' unreadable") : 2 * (int)j;
}

/*
 * gemma4's hyper-parameters (llama.cpp's keys: conversion/gemma.py,
 * src/models/gemma4.cpp): the global layers' head size, K/V heads and
 * rope; the sliding ones' as *_swa; per-layer values from arrays.
 */
static int
read_gemma4(struct model *md, struct src *s)
{
	struct model_hparams *hp = &md->hp;
	int ff = 0, kvf = 0, kvs = 0, nfull = 0;

	hp->rope_mode = BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP;
	hp->qk_norm = 1;
	hp->n_swa = src_int(s, "attention.sliding_window", 0);
	hp->head_dim_swa = src_int(s, "attention.key_length_swa", hp->head_dim);
	hp->n_rot_swa = src_int(s, "rope.dimension_count_swa", hp->head_dim_swa);
	hp->rope_theta_swa = src_float(s, "rope.freq_base_swa", 10000);
	hp->n_kv_shared = src_int(s, "attention.shared_kv_layers", 0);
	if (hp->arch == MODEL_ARCH_GEMMA4A)
		hp->n_kv_shared = hp->n_layer;	/* it reads its target's K/V only */
	hp->n_pl = src_int(s, "embedding_length_per_layer_input", 0);
	hp->softcap = src_float(s, "final_logit_softcapping", 0);
	hp->n_expert = src_int(s, "expert_count", 0);
	hp->n_expert_used = src_int(s, "expert_used_count", 0);
	hp->n_ff_exp = src_int(s, "expert_feed_forward_length", 0);
	for (int il = 0; il < hp->n_layer; il++) {
		int swa = src_int_at(s, "attention.sliding_window_pattern", il, 0);
		int kv = src_int_at(s, "attention.head_count_kv", il, hp->n_head);
		int f = src_int_at(s, "feed_forward_length", il, 0);

		ff = f > ff ? f : ff;
		*(swa ? &kvs : &kvf) = kv;
		nfull += !swa;
	}
	hp->n_ff = ff;
	hp->n_head_kv = kvf ? kvf : hp->n_head;
	hp->n_head_kv_swa = kvs ? kvs : hp->n_head;
	if ((hp->n_rot = rope_freqs_rot(md, s, hp->head_dim)) < 0)
		return -1;
	if (hp->n_embd <= 0 || hp->n_ff <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 ||
	    hp->head_dim <= 0 || hp->head_dim % 2 || hp->head_dim_swa <= 0 ||
	    hp->n_rot_swa <= 0 || hp->n_rot_swa > hp->head_dim_swa || hp->n_rot_swa % 2 ||
	    hp->n_rot > hp->head_dim || hp->n_swa < 0 || hp->n_kv_shared < 0 ||
	    (hp->n_kv_shared >= hp->n_layer && hp->arch != MODEL_ARCH_GEMMA4A) || hp->n_pl < 0 ||
	    (hp->arch == MODEL_ARCH_GEMMA4A && (hp->n_bb <= 0 || hp->n_pl || hp->n_expert)) || hp->softcap < 0 || nfull == 0 ||
	    (hp->n_expert > 0 && (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert ||
	    hp->n_ff_exp <= 0)))
		return util_err(md->err, "bad gemma4 hyper-parameters (%d layers, %d embd, %d heads, "
		    "head dims %d and %d, %d shared)", hp->n_layer, hp->n_embd, hp->n_head,
		    hp->head_dim, hp->head_dim_swa, hp->n_kv_shared);
	return 0;
}

/* A key without the architecture's prefix ("tokenizer.ggml.mask_token_id") as an integer, or def. */
static int
src_raw_int(struct src *s, const char *key, int def)
{
	const struct safetensors_kv *kv;
	int64_t i, v;

	if (s->gg != NULL)
		return (i = gguf_find_key(s->gg, key)) >= 0 && gguf_get_int(s->gg, i, &v) == 0 ?
		    (int)v : def;
	if ((kv = st_kv(s, key)) == NULL)
		return def;
	return kv->type == SAFETENSORS_KV_I32 ? kv->v.i32 : (int)kv->v.u32;
}

/* Elements of the array "<arch>.<key>" (0 when absent or not an array). */
static int64_t
src_arr_n(struct src *s, const char *key)
{
	const struct safetensors_kv *kv;
	char k[128];
	int64_t i;

	snprintf(k, sizeof k, "%s.%s", s->arch, key);
	if (s->gg != NULL)
		return (i = gguf_find_key(s->gg, k)) >= 0 && gguf_arr_type(s->gg, i) >= 0 ?
		    (int64_t)gguf_arr_n(s->gg, i) : 0;
	return (kv = st_kv(s, k)) != NULL && kv->type == SAFETENSORS_KV_ARR ? (int64_t)kv->n : 0;
}

/*
 * A DFlash / DFlash2 drafter's hyper-parameters (llama.cpp's keys:
 * conversion/qwen.py DFlashModel, src/models/dflash.cpp).  What it does
 * not run is refused by name: a DSpark Markov head, a DeepSeek-V4 DSpark
 * backbone, a draft with an embedding or head of its own.
 */
static int
read_dflash(struct model *md, struct src *s)
{
	struct model_hparams *hp = &md->hp;
	struct src_tensor t;
	int64_t nt = src_arr_n(s, "target_layers");
	double c;

	hp->arch = MODEL_ARCH_DFLASH;
	if (src_tensor(s, "markov_w1.weight", &t) == 0)
		return util_err(md->err, "a DSpark drafter (markov_w1: a Markov head over the "
		    "block): not supported (DFlash and DFlash2 drafters are)");
	if (src_int(s, "hyper_connection_count", 0) > 0)
		return util_err(md->err, "a DeepSeek-V4 DSpark drafter: not supported");
	if (src_tensor(s, "token_embd.weight", &t) == 0 || src_tensor(s, "output.weight", &t) == 0 ||
	    src_tensor(s, "d2t", &t) == 0)
		return util_err(md->err, "a DFlash drafter with an embedding, head or d2t of its "
		    "own: not supported (it reads its trunk's)");
	hp->n_embd = src_int(s, "embedding_length", 0);
	hp->n_ff = src_int(s, "feed_forward_length", 0);
	hp->n_layer = src_int(s, "block_count", 0);
	hp->n_ctx_train = src_int(s, "context_length", 0);
	hp->n_head = src_int(s, "attention.head_count", 0);
	hp->n_head_kv = src_int(s, "attention.head_count_kv", hp->n_head);
	hp->head_dim = src_int(s, "attention.key_length", hp->n_head ? hp->n_embd / hp->n_head : 0);
	hp->n_rot = src_int(s, "rope.dimension_count", hp->head_dim);
	hp->rope_theta = src_float(s, "rope.freq_base", 10000);
	hp->rope_mode = BACKEND_ROPE_NEOX;
	hp->qk_norm = 1;
	hp->eps = src_float(s, "attention.layer_norm_rms_epsilon", 1e-6f);
	hp->block = src_int(s, "block_size", 16);
	hp->mask_id = src_raw_int(s, "tokenizer.ggml.mask_token_id", -1);
	hp->causal = src_elem(s, "attention.causal", 0, 0, &c) == 0 && c != 0;
	hp->n_swa = src_int(s, "attention.sliding_window", 0);
	hp->conv_k = src_int(s, "conv_kernel_size", 0);
	hp->conv_g = src_int(s, "conv_group_size", 0);
	hp->sel_rank = src_int(s, "selector_rank", 0);
	hp->sel_topk = src_int(s, "selector_top_k", 0);
	hp->logit_scale = src_float(s, "logit_scale", 0);
	hp->logit_scale = hp->logit_scale != 0 ? hp->logit_scale : 1;
	hp->softcap = src_float(s, "final_logit_softcapping", 0);
	hp->emb_scale = src_float(s, "embedding_scale", 0);
	hp->emb_scale = hp->emb_scale != 0 ? hp->emb_scale : 1;
	hp->n_tap = (int)nt;
	for (int j = 0; j < hp->n_tap && j < MODEL_DFLASH_TAPS; j++)
		hp->taps[j] = src_int_at(s, "target_layers", j, 0) - 1;
	if (src_tensor(s, "selector_predecessor.weight", &t) == 0)
		hp->n_vocab = (int)t.n_rows;
	if (hp->n_embd <= 0 || hp->n_ff <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 ||
	    hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv || hp->head_dim <= 0 ||
	    hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 || hp->block < 2 ||
	    hp->mask_id < 0 || hp->n_swa < 0 || nt < 1 || nt > MODEL_DFLASH_TAPS)
		return util_err(md->err, "bad DFlash hyper-parameters (%d layers, %d embd, %d heads "
		    "over %d, head dim %d, block %d, mask token %d, %lld target layers)",
		    hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim, hp->block,
		    hp->mask_id, (long long)nt);
	for (int j = 0; j < hp->n_tap; j++)
		if (hp->taps[j] < 0)
			return util_err(md->err, "dflash.target_layers[%d] = 0: the embeddings (a "
			    "layer's input, llama.cpp's numbering) cannot be tapped", j);
	if (hp->sel_topk > 0 && (hp->conv_k <= 0 || hp->conv_g <= 0 || hp->sel_rank <= 0 ||
	    hp->n_embd % hp->conv_g != 0 || hp->n_vocab < hp->sel_topk))
		return util_err(md->err, "DFlash2: bad conv / selector hyper-parameters (kernel "
		    "%d, group %d, rank %d, top %d)", hp->conv_k, hp->conv_g, hp->sel_rank,
		    hp->sel_topk);
	if (hp->sel_topk <= 0)
		hp->conv_k = hp->conv_g = hp->sel_rank = hp->sel_topk = 0;
	return 0;
}

static int
read_hparams(struct model *md, struct src *s)
{
	struct model_hparams *hp = &md->hp;
	struct src_tensor emb, out;
	int total = src_int(s, "block_count", 0);

	if (s->arch == NULL)
		return util_err(md->err, "no architecture named");
	if (strcmp(s->arch, "qwen35") == 0)
		hp->arch = MODEL_ARCH_QWEN35;
	else if (strcmp(s->arch, "qwen35moe") == 0)
		hp->arch = MODEL_ARCH_QWEN35MOE;
	else if (strcmp(s->arch, "llama") == 0)
		hp->arch = MODEL_ARCH_LLAMA;
	else if (strcmp(s->arch, "gemma4") == 0)
		hp->arch = MODEL_ARCH_GEMMA4;
	else if (strcmp(s->arch, "step35") == 0)
		hp->arch = MODEL_ARCH_STEP35;
	else if (strcmp(s->arch, "gemma4-assistant") == 0)
		hp->arch = MODEL_ARCH_GEMMA4A;
	else if (strcmp(s->arch, "dflash") == 0)
		return read_dflash(md, s);
	else
		return util_err(md->err, "architecture '%s' not supported", s->arch);
	if (src_tensor(s, "token_embd.weight", &emb) != 0)
		return util_err(md->err, "tensor 'token_embd.weight' missing");
	hp->n_vocab = emb.n_rows;
	hp->n_embd = src_int(s, "embedding_length", 0);
	hp->n_ff = src_int(s, "feed_forward_length", 0);
	hp->n_ctx_train = src_int(s, "context_length", 0);
	hp->n_mtp = src_int(s, "nextn_predict_layers", 0);
	hp->n_layer = total - hp->n_mtp;
	hp->n_head = src_int(s, "attention.head_count", 0);
	hp->n_head_kv = src_int(s, "attention.head_count_kv", hp->n_head);
	if (hp->arch == MODEL_ARCH_STEP35)	/* per-layer arrays: read_step35 */
		hp->n_head = hp->n_head_kv = 1;
	hp->head_dim = src_int(s, "attention.key_length",
	    hp->n_head ? hp->n_embd / hp->n_head : 0);
	hp->n_rot = src_int(s, "rope.dimension_count", hp->head_dim);
	hp->rope_theta = src_float(s, "rope.freq_base", 10000);
	hp->eps = src_float(s, "attention.layer_norm_rms_epsilon", 1e-6f);
	hp->tied = src_tensor(s, "output.weight", &out) != 0;
	if (hp->arch == MODEL_ARCH_GEMMA4A) {	/* every layer is a nextn one: none is MTP */
		hp->n_layer = total, hp->n_mtp = 0;
		hp->n_bb = src_int(s, "embedding_length_out", 0);
	}
	if (hp->arch == MODEL_ARCH_GEMMA4 || hp->arch == MODEL_ARCH_GEMMA4A)
		return read_gemma4(md, s);
	if (hp->arch == MODEL_ARCH_STEP35) {
		hp->rope_mode = BACKEND_ROPE_NEOX;
	} else if (hp->arch != MODEL_ARCH_LLAMA) {
		hp->rope_mode = BACKEND_ROPE_NEOX;
		hp->attn_gated = hp->qk_norm = 1;
		hp->full_interval = src_int(s, "full_attention_interval", 4);
		hp->d_conv = src_int(s, "ssm.conv_kernel", 0);
		hp->dk = src_int(s, "ssm.state_size", 0);
		hp->n_k_heads = src_int(s, "ssm.group_count", 0);
		hp->n_v_heads = src_int(s, "ssm.time_step_rank", 0);
		hp->dv = hp->n_v_heads ? src_int(s, "ssm.inner_size", 0) / hp->n_v_heads : 0;
	} else	/* llama GGUFs: llama.cpp's numerics are the reference */
		hp->rope_mode = BACKEND_ROPE_NORM | BACKEND_ROPE_GGML;
	if (hp->arch == MODEL_ARCH_QWEN35MOE && read_moe(md, s) != 0)
		return -1;
	if (hp->n_embd <= 0 || (hp->n_ff <= 0 && hp->n_expert == 0) || hp->n_layer <= 0 ||
	    hp->n_mtp < 0 ||
	    hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv ||
	    hp->head_dim <= 0 || hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
		return util_err(md->err, "bad hyper-parameters (%d layers, %d embd, %d heads "
		    "over %d, head dim %d, rope dims %d)", hp->n_layer, hp->n_embd, hp->n_head,
		    hp->n_head_kv, hp->head_dim, hp->n_rot);
	if (hp->arch != MODEL_ARCH_LLAMA && hp->arch != MODEL_ARCH_STEP35 &&
	    (hp->full_interval <= 0 || hp->d_conv < 2 ||
	    hp->dk <= 0 || hp->dv <= 0 || hp->n_k_heads <= 0 || hp->n_v_heads <= 0 ||
	    hp->n_v_heads % hp->n_k_heads))
		return util_err(md->err, "bad recurrent hyper-parameters");
	return check_recurrent(md, s);
}

static void *
keep_host(struct model *md, void *p)
{
	void **nb;

	if (p == NULL || (nb = realloc(md->hbuf, (md->n_hbuf + 1) * sizeof *nb)) == NULL) {
		free(p);
		return NULL;
	}
	md->hbuf = nb;
	md->hbuf[md->n_hbuf++] = p;
	return p;
}

/*
 * The per-tensor scale sidecar of NVFP4 matrix name ("<name minus
 * .weight>.scale") into *v ([*n] floats, the caller frees): none (1), one
 * value, or with n_exp > 1 one for each expert of a stack (all equal read
 * as one).  0, or -1 with md->err: another count, or unreadable.
 */
static int
src_scales(struct model *md, struct src *s, const char *name, int n_exp, float **v, int *n)
{
	struct src_tensor t;
	char sc[96];
	size_t len = strlen(name);
	int64_t k, c;
	int rc;

	*n = 1;
	if ((*v = malloc((n_exp > 1 ? n_exp : 1) * sizeof **v)) == NULL)
		return util_err(md->err, "tensor '%s': out of memory", name);
	(*v)[0] = 1;
	snprintf(sc, sizeof sc, "%.*s.scale", (int)(len > 7 ? len - 7 : 0), name);
	if (len < 7 || strcmp(name + len - 7, ".weight") != 0 || src_tensor(s, sc, &t) != 0)
		return 0;
	c = t.ne0 * t.n_rows;
	if (c != 1 && (n_exp < 2 || c != n_exp))
		return util_err(md->err, "tensor '%s' has %lld values, want %s%d", sc, (long long)c,
		    n_exp > 1 ? "1 or one an expert, " : "", n_exp > 1 ? n_exp : 1);
	rc = t.data != NULL ? quant_dequantize_row(t.type, t.data, *v, c) :
	    safetensors_read_rows(t.out, 0, t.n_rows, *v, md->err);
	if (rc != 0)
		return t.data != NULL ? util_err(md->err, "tensor '%s': cannot decode type '%s'", sc,
		    quant_name(t.type)) : -1;
	for (k = 1; k < c && (*v)[k] == (*v)[0]; k++)
		;
	*n = k == c ? 1 : (int)c;
	return 0;
}

/* n floats of host h into backend memory the model keeps (*d). */
static int
keep_device(struct model *md, const float *h, int64_t n, float **d)
{
	float **nb = realloc(md->dbuf, (md->n_dbuf + 1) * sizeof *nb);

	if (nb == NULL)
		return util_err(md->err, "out of memory");
	md->dbuf = nb;
	if ((*d = backend_alloc(md->be, n)) == NULL)
		return util_err(md->err, "%s", backend_errmsg(md->be));
	md->dbuf[md->n_dbuf++] = *d;
	return backend_write(md->be, *d, h, n) ? util_err(md->err, "%s", backend_errmsg(md->be)) :
	    0;
}

/* w's product scale: sv[0], or one an expert of its stack (n > 1). */
static int
set_scale(struct model *md, const char *name, struct backend_weight *w, const float *sv, int n)
{
	float *d = NULL;

	if (n == 1)
		return 0;
	if (keep_device(md, sv, n, &d) != 0)
		return -1;
	if (backend_weight_expert_scales(md->be, w, n, d) != 0)
		return util_err(md->err, "tensor '%s': %s", name, backend_errmsg(md->be));
	return 0;
}

/*
 * A matrix [ne1][ne0] by name into w; *host and *host_type (each when not
 * NULL) get its host bytes (mapped or read) and their type.  scaled 0: no NVFP4 `.scale` sidecar; else the
 * experts of the stack (1: a plain matrix), one scale each allowed.
 * Absent and optional: 0, w left empty.
 */
static int
load_matrix_ex(struct model *md, struct src *s, const char *name, int optional,
    int64_t ne0, int64_t ne1, struct backend_weight *w, const void **host, int *host_type,
    int scaled)
{
	struct src_tensor t;
	int type, ns = 1, rc;
	float *sv = NULL;
	char *buf;

	if (src_tensor(s, name, &t) != 0)
		return optional ? 0 : util_err(md->err, "tensor '%s' missing", name);
	if (t.ne0 != ne0 || t.n_rows != ne1)
		return util_err(md->err, "tensor '%s' is %lld x %lld, want %lld x %lld", name,
		    (long long)t.n_rows, (long long)t.ne0, (long long)ne1, (long long)ne0);
	if (md->dry_run) {
		*md->meter += quant_row_size(t.type >= 0 ? t.type : QUANT_F32, ne0) * ne1;
		return 0;
	}
	md->wbytes += quant_row_size(t.type >= 0 ? t.type : QUANT_F32, ne0) * ne1;
	if (host != NULL)
		*host = t.data;
	if (host_type != NULL)
		*host_type = t.type;
	if (scaled && src_scales(md, s, name, scaled, &sv, &ns) != 0) {
		free(sv);
		return -1;
	}
	if (t.data != NULL) {	/* mapped: the backend reads or uploads it as it is */
		rc = backend_weight_init(md->be, w, t.type, ne0, ne1, t.data,
		    sv != NULL && ns == 1 ? sv[0] : 1.0f) ? util_err(md->err, "tensor '%s': %s", name,
		    backend_errmsg(md->be)) : set_scale(md, name, w, sv, ns);
		free(sv);
		return rc;
	}
	type = t.type >= 0 && backend_supports(md->be, t.type) ? t.type : QUANT_F32;
	if ((buf = keep_host(md, malloc(quant_row_size(type, ne0) * ne1))) == NULL) {
		free(sv);
		return util_err(md->err, "tensor '%s': out of memory", name);
	}
	if ((type == QUANT_F32 ? safetensors_read_rows(t.out, 0, ne1, (float *)buf, md->err) :
	    safetensors_read_raw(t.out, 0, ne1, buf, md->err)) != 0) {
		free(sv);
		return -1;
	}
	if (host != NULL)
		*host = buf;
	if (host_type != NULL)
		*host_type = type;
	/* F32 rows of an NVFP4 tensor already carry its per-tensor (per-expert) scale */
	if (type == QUANT_F32 && sv != NULL) {
		ns = 1;
		sv[0] = 1.0f;
	}
	rc = backend_weight_init(md->be, w, type, ne0, ne1, buf,
	    sv != NULL && ns == 1 ? sv[0] : 1.0f) ? util_err(md->err, "tensor '%s': %s", name,
	    backend_errmsg(md->be)) : set_scale(md, name, w, sv, ns);
	free(sv);
	return rc;
}

static int
load_matrix_host(struct model *md, struct src *s, const char *name, int optional,
    int64_t ne0, int64_t ne1, struct backend_weight *w, const void **host, int *host_type)
{
	return load_matrix_ex(md, s, name, optional, ne0, ne1, w, host, host_type, 1);
}

static int
load_matrix(struct model *md, struct src *s, const char *name, int optional,
    int64_t ne0, int64_t ne1, struct backend_weight *w)
{
	return load_matrix_host(md, s, name, optional, ne0, ne1, w, NULL, NULL);
}

/* n floats by name into backend memory (*out); absent and optional: NULL. */
static int
load_vector(struct model *md, struct src *s, const char *name, int optional,
    int64_t n, float **out)
{
	struct src_tensor t;
	float *h, *d, **nb;
	int rc;

	*out = NULL;
	if (src_tensor(s, name, &t) != 0)
		return optional ? 0 : util_err(md->err, "tensor '%s' missing", name);
	if (t.ne0 * t.n_rows != n)
		return util_err(md->err, "tensor '%s' has %lld values, want %lld", name,
		    (long long)(t.ne0 * t.n_rows), (long long)n);
	if (md->dry_run) {
		*md->meter += n * sizeof(float);
		return 0;
	}
	md->wbytes += n * sizeof(float);
	if ((h = malloc(n * sizeof *h)) == NULL ||
	    (nb = realloc(md->dbuf, (md->n_dbuf + 1) * sizeof *nb)) == NULL) {
		free(h);
		return util_err(md->err, "tensor '%s': out of memory", name);
	}
	md->dbuf = nb;
	rc = t.data != NULL ? quant_dequantize_row(t.type, t.data, h, n) :
	    safetensors_read_rows(t.out, 0, t.n_rows, h, md->err);
	if (rc != 0 && t.data != NULL)
		util_err(md->err, "tensor '%s': cannot decode type '%s'", name, quant_name(t.type));
	if (rc != 0 || (d = backend_alloc(md->be, n)) == NULL) {
		free(h);
		return rc != 0 ? -1 : util_err(md->err, "%s", backend_errmsg(md->be));
	}
	md->dbuf[md->n_dbuf++] = d;
	*out = d;
	rc = backend_write(md->be, d, h, n);
	free(h);
	return rc ? util_err(md->err, "%s", backend_errmsg(md->be)) : 0;
}

#define NAME(buf, il, suffix) (snprintf(buf, sizeof buf, "blk.%d.%s", il, suffix), buf)

static int
bind_attention(struct model *md, struct src *s, int il, struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	int qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;
	char b[96];

	return load_matrix(md, s, NAME(b, il, "attn_q.weight"), 0, hp->n_embd,
	    (int64_t)qd * (hp->attn_gated ? 2 : 1), &L->q) ||
	    load_matrix(md, s, NAME(b, il, "attn_k.weight"), 0, hp->n_embd, kvd, &L->k) ||
	    load_matrix(md, s, NAME(b, il, "attn_v.weight"), 0, hp->n_embd, kvd, &L->v) ||
	    load_matrix(md, s, NAME(b, il, "attn_output.weight"), 0, qd, hp->n_embd, &L->o) ||
	    load_vector(md, s, NAME(b, il, "attn_q_norm.weight"), !hp->qk_norm,
	    hp->head_dim, &L->q_norm) ||
	    load_vector(md, s, NAME(b, il, "attn_k_norm.weight"), !hp->qk_norm,
	    hp->head_dim, &L->k_norm) ? -1 : 0;
}

static int
bind_gdn(struct model *md, struct src *s, int il, struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	int vd = hp->n_v_heads * hp->dv, cd = model_conv_dim(hp);
	char b[96];

	return load_matrix(md, s, NAME(b, il, "attn_qkv.weight"), 0, hp->n_embd, cd, &L->qkv) ||
	    load_matrix(md, s, NAME(b, il, "attn_gate.weight"), 0, hp->n_embd, vd, &L->gate) ||
	    load_matrix(md, s, NAME(b, il, "ssm_beta.weight"), 0, hp->n_embd, hp->n_v_heads,
	    &L->beta) ||
	    load_matrix(md, s, NAME(b, il, "ssm_alpha.weight"), 0, hp->n_embd, hp->n_v_heads,
	    &L->alpha) ||
	    load_matrix(md, s, NAME(b, il, "ssm_out.weight"), 0, vd, hp->n_embd, &L->out) ||
	    load_vector(md, s, NAME(b, il, "ssm_conv1d.weight"), 0, (int64_t)cd * hp->d_conv,
	    &L->conv) ||
	    load_vector(md, s, NAME(b, il, "ssm_a"), 0, hp->n_v_heads, &L->ssm_a) ||
	    load_vector(md, s, NAME(b, il, "ssm_dt.bias"), 0, hp->n_v_heads, &L->dt_bias) ||
	    load_vector(md, s, NAME(b, il, "ssm_norm.weight"), 0, hp->dv, &L->ssm_norm) ? -1 : 0;
}

static int
bind_ffn(struct model *md, struct src *s, int il, struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	char b[96];

	return load_matrix(md, s, NAME(b, il, "ffn_gate.weight"), 0, hp->n_embd, hp->n_ff,
	    &L->ffn_gate) ||
	    load_matrix(md, s, NAME(b, il, "ffn_up.weight"), 0, hp->n_embd, hp->n_ff, &L->ffn_up) ||
	    load_matrix(md, s, NAME(b, il, "ffn_down.weight"), 0, hp->n_ff, hp->n_embd,
	    &L->ffn_down) ? -1 : 0;
}

/*
 * A stack of experts by name (ne0 x rows x n_expert).  Its NVFP4 `.scale`
 * sidecar may hold one value an expert (llama.cpp's converter): each
 * expert's products are then times its own, as llama.cpp's
 * build_lora_mm_id multiplies them.
 */
static int
load_experts(struct model *md, struct src *s, const char *name, int64_t ne0, int64_t rows,
    struct backend_weight *w)
{
	return load_matrix_ex(md, s, name, 0, ne0, rows * md->hp.n_expert, w, NULL, NULL,
	    md->hp.n_expert);
}

/* qwen35moe's FFN: the router, the stacked experts, the shared expert and its gate. */
static int
bind_moe(struct model *md, struct src *s, int il, struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	int ne = hp->n_embd, fe = hp->n_ff_exp, fs = hp->n_ff_shexp;
	char b[96];

	if (src_tensor(s, NAME(b, il, "ffn_gate_up_exps.weight"), &(struct src_tensor){ 0 }) == 0)
		return util_err(md->err, "tensor '%s': fused gate and up experts are not supported",
		    b);
	if (load_matrix(md, s, NAME(b, il, "ffn_gate_inp.weight"), 0, ne, hp->n_expert,
	    &L->router) ||
	    load_experts(md, s, NAME(b, il, "ffn_gate_exps.weight"), ne, fe, &L->exp_gate) ||
	    load_experts(md, s, NAME(b, il, "ffn_up_exps.weight"), ne, fe, &L->exp_up) ||
	    load_experts(md, s, NAME(b, il, "ffn_down_exps.weight"), fe, ne, &L->exp_down) ||
	    load_matrix(md, s, NAME(b, il, "ffn_up_shexp.weight"), 1, ne, fs, &L->sh_up))
		return -1;
	if (L->sh_up.data == NULL)	/* no shared expert */
		return 0;
	return load_matrix(md, s, NAME(b, il, "ffn_gate_shexp.weight"), 0, ne, fs, &L->sh_gate) ||
	    load_matrix(md, s, NAME(b, il, "ffn_down_shexp.weight"), 0, fs, ne, &L->sh_down) ||
	    load_matrix(md, s, NAME(b, il, "ffn_gate_inp_shexp.weight"), 0, ne, 1, &L->sh_inp) ?
	    -1 : 0;
}

/*
 * A NextN block's own tensors: enorm, hnorm, eh_proj, and its head's norm
 * and rows when it has them (else the trunk's); the head's host bytes are
 * kept for a self-trim.  A block's own embedding (llama.cpp's optional
 * nextn.embed_tokens) is refused: the blocks here embed with the trunk's.
 */
static int
bind_nextn(struct model *md, struct src *s, int il, struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	struct src_tensor t;
	char b[96];

	if (src_tensor(s, NAME(b, il, "nextn.embed_tokens.weight"), &t) == 0)
		return util_err(md->err, "tensor '%s': a NextN block's own embedding is not "
		    "supported", b);
	return load_matrix(md, s, NAME(b, il, "nextn.eh_proj.weight"), 0, 2 * hp->n_embd,
	    hp->n_embd, &L->eh_proj) ||
	    load_vector(md, s, NAME(b, il, "nextn.enorm.weight"), 0, hp->n_embd, &L->enorm) ||
	    load_vector(md, s, NAME(b, il, "nextn.hnorm.weight"), 0, hp->n_embd, &L->hnorm) ||
	    load_vector(md, s, NAME(b, il, "nextn.shared_head_norm.weight"), 1, hp->n_embd,
	    &L->head_norm) ||
	    load_matrix_host(md, s, NAME(b, il, "nextn.shared_head_head.weight"), 1, hp->n_embd,
	    s->nx_rows > 0 ? s->nx_rows : hp->n_vocab, &L->head, &L->head_host,
	    &L->head_type) ? -1 : 0;
}

/* A step35 layer: its attention with the head-wise gate, a dense or MoE FFN. */
static int
bind_step35(struct model *md, struct src *s, int il, struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	int ne = hp->n_embd, qd = L->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;
	int fe = hp->n_ff_exp, fs = hp->n_ff_shexp;
	struct src_tensor t;
	char b[96];

	L->sparse = src_tensor(s, NAME(b, il, "ffn_gate_inp.weight"), &t) == 0;
	if (load_vector(md, s, NAME(b, il, "attn_norm.weight"), 0, ne, &L->attn_norm) ||
	    load_vector(md, s, NAME(b, il, "ffn_norm.weight"), 0, ne, &L->post_norm) ||
	    load_matrix(md, s, NAME(b, il, "attn_q.weight"), 0, ne, qd, &L->q) ||
	    load_matrix(md, s, NAME(b, il, "attn_k.weight"), 0, ne, kvd, &L->k) ||
	    load_matrix(md, s, NAME(b, il, "attn_v.weight"), 0, ne, kvd, &L->v) ||
	    load_matrix(md, s, NAME(b, il, "attn_output.weight"), 0, qd, ne, &L->o) ||
	    load_matrix(md, s, NAME(b, il, "attn_gate.weight"), 1, ne, L->n_head, &L->g) ||
	    load_vector(md, s, NAME(b, il, "attn_q_norm.weight"), 1, hp->head_dim, &L->q_norm) ||
	    load_vector(md, s, NAME(b, il, "attn_k_norm.weight"), 1, hp->head_dim, &L->k_norm))
		return -1;
	if (il >= hp->n_layer && bind_nextn(md, s, il, L) != 0)
		return -1;
	if (!L->sparse)
		return bind_ffn(md, s, il, L);
	return load_matrix(md, s, NAME(b, il, "ffn_gate_inp.weight"), 0, ne, hp->n_expert,
	    &L->router) ||
	    load_vector(md, s, NAME(b, il, "exp_probs_b.bias"), 1, hp->n_expert, &L->exp_bias) ||
	    load_experts(md, s, NAME(b, il, "ffn_gate_exps.weight"), ne, fe, &L->exp_gate) ||
	    load_experts(md, s, NAME(b, il, "ffn_up_exps.weight"), ne, fe, &L->exp_up) ||
	    load_experts(md, s, NAME(b, il, "ffn_down_exps.weight"), fe, ne, &L->exp_down) ||
	    load_matrix(md, s, NAME(b, il, "ffn_gate_shexp.weight"), 0, ne, fs, &L->sh_gate) ||
	    load_matrix(md, s, NAME(b, il, "ffn_up_shexp.weight"), 0, ne, fs, &L->sh_up) ||
	    load_matrix(md, s, NAME(b, il, "ffn_down_shexp.weight"), 0, fs, ne, &L->sh_down) ?
	    -1 : 0;
}

static int
bind_layer(struct model *md, struct src *s, int il)
{
	const struct model_hparams *hp = &md->hp;
	struct model_layer *L = &md->layers[il];
	int mtp = il >= hp->n_layer;
	char b[96];

	if (hp->arch == MODEL_ARCH_STEP35)
		return bind_step35(md, s, il, L);
	if (load_vector(md, s, NAME(b, il, "attn_norm.weight"), 0, hp->n_embd, &L->attn_norm) ||
	    load_vector(md, s, NAME(b, il, hp->arch == MODEL_ARCH_LLAMA ? "ffn_norm.weight" :
	    "post_attention_norm.weight"), 0, hp->n_embd, &L->post_norm) ||
	    (L->rec ? bind_gdn(md, s, il, L) : bind_attention(md, s, il, L)) ||
	    (hp->n_expert > 0 ? bind_moe(md, s, il, L) : bind_ffn(md, s, il, L)))
		return -1;
	if (!mtp)
		return 0;
	return load_matrix(md, s, NAME(b, il, "nextn.eh_proj.weight"), 0, 2 * hp->n_embd,
	    hp->n_embd, &L->eh_proj) ||
	    load_vector(md, s, NAME(b, il, "nextn.enorm.weight"), 0, hp->n_embd, &L->enorm) ||
	    load_vector(md, s, NAME(b, il, "nextn.hnorm.weight"), 0, hp->n_embd, &L->hnorm) ||
	    load_vector(md, s, NAME(b, il, "nextn.shared_head_norm.weight"), 1, hp->n_embd,
	    &L->head_norm) ? -1 : 0;
}

/* A one-value tensor by name into *v on the host; absent and optional: *v = def. */
static int
load_scalar(struct model *md, struct src *s, const char *name, int optional, float def,
    float *v)
{
	float *d;

	*v = def;
	if (load_vector(md, s, name, optional, 1, &d) != 0)
		return -1;
	if (d != NULL && backend_read(md->be, v, d, 1) != 0)
		return util_err(md->err, "%s", backend_errmsg(md->be));
	return 0;
}

/* gemma4's attention: q always, K and V on a layer that makes its own (V absent: K = V). */
static int
bind_gemma4_attn(struct model *md, struct src *s, int il, struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	int qd = hp->n_head * L->hd, kvd = L->nkv * L->hd;
	char b[96];

	if (load_matrix(md, s, NAME(b, il, "attn_q.weight"), 0, hp->n_embd, qd, &L->q) ||
	    load_matrix(md, s, NAME(b, il, "attn_output.weight"), 0, qd, hp->n_embd, &L->o) ||
	    load_vector(md, s, NAME(b, il, "attn_q_norm.weight"), 0, L->hd, &L->q_norm) ||
	    load_vector(md, s, NAME(b, il, "post_attention_norm.weight"), 0, hp->n_embd,
	    &L->post_norm))
		return -1;
	if (!L->kv_own)
		return 0;
	return load_matrix(md, s, NAME(b, il, "attn_k.weight"), 0, hp->n_embd, kvd, &L->k) ||
	    load_matrix(md, s, NAME(b, il, "attn_v.weight"), 1, hp->n_embd, kvd, &L->v) ||
	    load_vector(md, s, NAME(b, il, "attn_k_norm.weight"), 0, L->hd, &L->k_norm) ? -1 : 0;
}

/* gemma4's MoE block beside the MLP: router, fused gate+up experts, down experts, norms. */
static int
bind_gemma4_moe(struct model *md, struct src *s, int il, struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	int ne = hp->n_embd, fe = hp->n_ff_exp, E = hp->n_expert;
	char b[96];

	if (src_tensor(s, NAME(b, il, "ffn_gate_exps.weight"), &(struct src_tensor){ 0 }) == 0)
		return util_err(md->err, "tensor '%s': gemma4 experts apart from their "
		    "ffn_gate_up_exps are not supported", b);
	/* ffn_gate_inp.scale and ffn_down_exps.scale are the router's vectors, not NVFP4 scales */
	return load_matrix_ex(md, s, NAME(b, il, "ffn_gate_inp.weight"), 0, ne, E, &L->router, NULL,
	    NULL, 0) ||
	    load_vector(md, s, NAME(b, il, "ffn_gate_inp.scale"), 0, ne, &L->router_scale) ||
	    load_matrix_ex(md, s, NAME(b, il, "ffn_gate_up_exps.weight"), 0, ne,
	    (int64_t)2 * fe * E, &L->exp_gate_up, NULL, NULL, E) ||
	    load_matrix_ex(md, s, NAME(b, il, "ffn_down_exps.weight"), 0, fe, (int64_t)ne * E,
	    &L->exp_down, NULL, NULL, 0) ||
	    load_vector(md, s, NAME(b, il, "ffn_down_exps.scale"), 1, E, &L->exp_scale) ||
	    load_vector(md, s, NAME(b, il, "pre_ffw_norm_2.weight"), 0, ne, &L->ffn_pre_norm_2) ||
	    load_vector(md, s, NAME(b, il, "post_ffw_norm_1.weight"), 0, ne, &L->ffn_post_norm_1) ||
	    load_vector(md, s, NAME(b, il, "post_ffw_norm_2.weight"), 0, ne, &L->ffn_post_norm_2) ?
	    -1 : 0;
}

/* A gemma4 layer (llama.cpp's tensor names, src/models/gemma4.cpp). */
static int
bind_gemma4_layer(struct model *md, struct src *s, int il)
{
	const struct model_hparams *hp = &md->hp;
	struct model_layer *L = &md->layers[il];
	int ne = hp->n_embd;
	char b[96];

	if (load_vector(md, s, NAME(b, il, "attn_norm.weight"), 0, ne, &L->attn_norm) ||
	    bind_gemma4_attn(md, s, il, L) ||
	    load_vector(md, s, NAME(b, il, "ffn_norm.weight"), 0, ne, &L->ffn_norm) ||
	    load_matrix(md, s, NAME(b, il, "ffn_gate.weight"), 0, ne, L->n_ff, &L->ffn_gate) ||
	    load_matrix(md, s, NAME(b, il, "ffn_up.weight"), 0, ne, L->n_ff, &L->ffn_up) ||
	    load_matrix(md, s, NAME(b, il, "ffn_down.weight"), 0, L->n_ff, ne, &L->ffn_down) ||
	    load_vector(md, s, NAME(b, il, "post_ffw_norm.weight"), 0, ne, &L->ffn_post_norm) ||
	    load_scalar(md, s, NAME(b, il, "layer_output_scale.weight"), 1, 1.0f, &L->out_scale) ||
	    (hp->n_expert > 0 && bind_gemma4_moe(md, s, il, L)))
		return -1;
	if (hp->n_pl == 0)
		return 0;
	return load_matrix(md, s, NAME(b, il, "inp_gate.weight"), 0, ne, hp->n_pl, &L->pl_gate) ||
	    load_matrix(md, s, NAME(b, il, "proj.weight"), 0, hp->n_pl, ne, &L->pl_proj) ||
	    load_vector(md, s, NAME(b, il, "post_norm.weight"), 0, ne, &L->pl_norm) ? -1 : 0;
}

/*
 * gemma4's layer shapes and caches: a layer before the shared ones makes
 * its own K/V (a cache of its own: the global layers' first, then the
 * sliding ones', which a state may keep as its last caches, the rings); a
 * shared one (the last n_kv_shared) reads the cache of the last earlier
 * layer of its kind (sliding or global), as transformers'
 * store_full_length_kv picks it.
 */
static int
plan_gemma4(struct model *md, struct src *s)
{
	struct model_hparams *hp = &md->hp;
	int first = hp->n_layer - hp->n_kv_shared;

	for (int il = 0; il < hp->n_layer; il++)	/* the kinds first: the caches' order */
		md->layers[il].swa = src_int_at(s, "attention.sliding_window_pattern", il, 0);
	for (int swa = 0; swa < 2; swa++)
		for (int il = 0; il < first; il++)
			if (md->layers[il].swa == swa)
				md->layers[il].cache = hp->n_full++;
	for (int il = 0; il < hp->n_layer; il++) {
		struct model_layer *L = &md->layers[il];

		L->hd = L->swa ? hp->head_dim_swa : hp->head_dim;
		L->nkv = src_int_at(s, "attention.head_count_kv", il, hp->n_head);
		L->n_ff = src_int_at(s, "feed_forward_length", il, hp->n_ff);
		L->kv_own = il < first;
		if (L->nkv < 1 || hp->n_head % L->nkv != 0 || L->n_ff < 1)
			return util_err(md->err, "layer %d: %d K/V heads of %d, MLP width %d", il,
			    L->nkv, hp->n_head, L->n_ff);
		if (L->kv_own)
			continue;
		L->cache = -1;
		if (hp->arch == MODEL_ARCH_GEMMA4A)
			continue;	/* the target's: model_assist_attach */
		for (int j = first - 1; j >= 0 && L->cache < 0; j--)
			if (md->layers[j].swa == L->swa && md->layers[j].hd == L->hd &&
			    md->layers[j].nkv == L->nkv)
				L->cache = md->layers[j].cache;
		if (L->cache < 0)
			return util_err(md->err, "layer %d shares K/V, but no earlier %s layer "
			    "of its shape makes them", il, L->swa ? "sliding" : "global");
	}
	return 0;
}

/* gemma4's weights: the token table, the per-layer inputs, the layers. */
static int
bind_gemma4(struct model *md, struct src *s)
{
	struct model_hparams *hp = &md->hp;
	int64_t lp = (int64_t)hp->n_layer * hp->n_pl;

	md->ops = hp->arch == MODEL_ARCH_GEMMA4A ? &model_arch_gemma4a : &model_arch_gemma4;
	if (plan_gemma4(md, s) != 0 ||
	    load_matrix_host(md, s, "token_embd.weight", 0, hp->n_embd, hp->n_vocab,
	    &md->tok_embd, &md->head_host, &md->head_type) ||
	    (!hp->tied && load_matrix_host(md, s, "output.weight", 0, hp->n_embd, hp->n_vocab,
	    &md->output, &md->head_host, &md->head_type)) ||
	    load_vector(md, s, "output_norm.weight", 0, hp->n_embd, &md->output_norm))
		return -1;
	if (hp->tied)
		md->output = md->tok_embd;
	if (hp->n_pl > 0 && (load_matrix(md, s, "per_layer_token_embd.weight", 0, lp,
	    hp->n_vocab, &md->pl_embd) ||
	    load_matrix(md, s, "per_layer_model_proj.weight", 0, hp->n_embd, lp,
	    &md->pl_model_proj) ||
	    load_vector(md, s, "per_layer_proj_norm.weight", 0, hp->n_pl, &md->pl_proj_norm)))
		return -1;
	for (int il = 0; il < hp->n_layer; il++)
		if (bind_gemma4_layer(md, s, il) != 0)
			return -1;
	if (hp->arch != MODEL_ARCH_GEMMA4A)
		return 0;
	return load_matrix(md, s, "nextn.pre_projection.weight", 0, 2 * hp->n_bb, hp->n_embd,
	    &md->pre_proj) ||
	    load_matrix(md, s, "nextn.post_projection.weight", 0, hp->n_embd, hp->n_bb,
	    &md->post_proj) ? -1 : 0;
}

/*
 * A DFlash drafter's product matrix [ne1][ne0] as md->dfl_type (MEMRA_DFLASH_PREC):
 * a float source read as float32 and quantized row by row; a quantized one,
 * or dfl_type -1, as it is.
 */
static int
load_matrix_prec(struct model *md, struct src *s, const char *name, int64_t ne0, int64_t ne1,
    struct backend_weight *w)
{
	struct src_tensor t;
	int type = md->dfl_type;
	size_t rs = quant_row_size(type, ne0), srs;
	float *row;
	char *buf;
	int rc = 0;

	if (type < 0 || md->dry_run || src_tensor(s, name, &t) != 0 || (t.type >= 0 &&
	    t.type != QUANT_F32 && t.type != QUANT_F16 && t.type != QUANT_BF16))
		return load_matrix(md, s, name, 0, ne0, ne1, w);
	if (t.ne0 != ne0 || t.n_rows != ne1)
		return util_err(md->err, "tensor '%s' is %lld x %lld, want %lld x %lld", name,
		    (long long)t.n_rows, (long long)t.ne0, (long long)ne1, (long long)ne0);
	if (rs == 0)
		return util_err(md->err, "tensor '%s': rows of %lld do not make %s blocks of %d "
		    "(MEMRA_DFLASH_PREC)", name, (long long)ne0, quant_name(type),
		    quant_traits(type)->blck);
	srs = t.data != NULL ? quant_row_size(t.type, ne0) : 0;
	if ((buf = keep_host(md, malloc(rs * ne1))) == NULL || (row = malloc(ne0 * sizeof *row)) == NULL)
		return util_err(md->err, "tensor '%s': out of memory", name);
	for (int64_t r = 0; rc == 0 && r < ne1; r++) {
		rc = t.data != NULL ? quant_dequantize_row(t.type, (const char *)t.data + r * srs, row,
		    ne0) : safetensors_read_rows(t.out, r, 1, row, md->err);
		if (rc == 0 && type == QUANT_F32)
			memcpy(buf + r * rs, row, rs);
		else if (rc == 0)
			rc = quant_quantize_row(type, row, buf + r * rs, ne0, md->err);
	}
	free(row);
	if (rc != 0)
		return util_err(md->err, "tensor '%s': %s", name, md->err[0] ? md->err : "unreadable");
	md->wbytes += rs * ne1;
	if (backend_weight_init(md->be, w, type, ne0, ne1, buf, 1.0f) != 0)
		return util_err(md->err, "tensor '%s': %s", name, backend_errmsg(md->be));
	return 0;
}

/* A DFlash drafter layer: Qwen3's attention and FFN, DFlash2's convolutions around each. */
static int
bind_dflash_layer(struct model *md, struct src *s, int il)
{
	const struct model_hparams *hp = &md->hp;
	struct model_layer *L = &md->layers[il];
	int ne = hp->n_embd, qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;
	int64_t cp = 2 * (int64_t)hp->conv_k * (hp->conv_g ? ne / hp->conv_g : 0);
	char b[96];

	L->swa = src_int_at(s, "attention.sliding_window_pattern", il, 0) && hp->n_swa > 0;
	L->cache = md->hp.n_full++;
	if (load_vector(md, s, NAME(b, il, "attn_norm.weight"), 0, ne, &L->attn_norm) ||
	    load_vector(md, s, NAME(b, il, "ffn_norm.weight"), 0, ne, &L->post_norm) ||
	    load_matrix_prec(md, s, NAME(b, il, "attn_q.weight"), ne, qd, &L->q) ||
	    load_matrix_prec(md, s, NAME(b, il, "attn_k.weight"), ne, kvd, &L->k) ||
	    load_matrix_prec(md, s, NAME(b, il, "attn_v.weight"), ne, kvd, &L->v) ||
	    load_matrix_prec(md, s, NAME(b, il, "attn_output.weight"), qd, ne, &L->o) ||
	    load_vector(md, s, NAME(b, il, "attn_q_norm.weight"), 0, hp->head_dim, &L->q_norm) ||
	    load_vector(md, s, NAME(b, il, "attn_k_norm.weight"), 0, hp->head_dim, &L->k_norm) ||
	    load_matrix_prec(md, s, NAME(b, il, "ffn_gate.weight"), ne, hp->n_ff, &L->ffn_gate) ||
	    load_matrix_prec(md, s, NAME(b, il, "ffn_up.weight"), ne, hp->n_ff, &L->ffn_up) ||
	    load_matrix_prec(md, s, NAME(b, il, "ffn_down.weight"), hp->n_ff, ne, &L->ffn_down))
		return -1;
	if (hp->sel_topk == 0)
		return 0;
	return load_matrix_prec(md, s, NAME(b, il, "attn_conv_proj.weight"), ne, cp,
	    &L->conv_proj[0]) ||
	    load_matrix_prec(md, s, NAME(b, il, "ffn_conv_proj.weight"), ne, cp, &L->conv_proj[1]) ||
	    load_vector(md, s, NAME(b, il, "attn_conv_base"), 0, 2 * hp->conv_k * ne,
	    &L->conv_base[0]) ||
	    load_vector(md, s, NAME(b, il, "ffn_conv_base"), 0, 2 * hp->conv_k * ne,
	    &L->conv_base[1]) ? -1 : 0;
}

/* A DFlash drafter's weights: fc and its norm, the layers, the final norm, the selector. */
static int
bind_dflash(struct model *md, struct src *s)
{
	struct model_hparams *hp = &md->hp;

	if ((md->layers = calloc(hp->n_layer, sizeof *md->layers)) == NULL)
		return util_err(md->err, "out of memory");
	if (load_matrix_prec(md, s, "fc.weight", (int64_t)hp->n_tap * hp->n_embd, hp->n_embd,
	    &md->fc) ||
	    load_vector(md, s, "enc.output_norm.weight", 0, hp->n_embd, &md->enc_norm) ||
	    load_vector(md, s, "output_norm.weight", 0, hp->n_embd, &md->output_norm))
		return -1;
	for (int il = 0; il < hp->n_layer; il++)
		if (bind_dflash_layer(md, s, il) != 0)
			return -1;
	/* the caches: the full-attention layers' first, then the sliding ones' (the rings of
	 * model_dflash_state are a state's last caches) */
	for (int swa = 0, c = 0; swa < 2; swa++)
		for (int il = 0; il < hp->n_layer; il++)
			if (md->layers[il].swa == swa)
				md->layers[il].cache = c++;
	if (hp->sel_topk == 0)
		return 0;
	return load_matrix(md, s, "selector_hidden.weight", 0, hp->n_embd, hp->sel_rank,
	    &md->sel_hidden) ||
	    load_matrix(md, s, "selector_predecessor.weight", 0, hp->sel_rank, hp->n_vocab,
	    &md->sel_prev) ||
	    load_matrix(md, s, "selector_successor.weight", 0, hp->sel_rank, hp->n_vocab,
	    &md->sel_next) ? -1 : 0;
}

/* Layer kinds and their cache / state indices. */
static void
plan_layers(struct model *md)
{
	struct model_hparams *hp = &md->hp;

	for (int il = 0; il < hp->n_layer + hp->n_mtp; il++) {
		struct model_layer *L = &md->layers[il];

		L->rec = hp->arch != MODEL_ARCH_LLAMA && hp->arch != MODEL_ARCH_STEP35 &&
		    il < hp->n_layer &&
		    (il + 1) % hp->full_interval != 0;
		L->cache = L->rec ? hp->n_rec++ : hp->n_full++;
		/* a stage's state holds its own layers' caches, in the same order */
		if (md->part)
			L->cache = !model_owns(md, il) ? -1 : L->rec ? md->n_rec_own++ :
			    md->n_kv_own++;
	}
	hp->n_full -= hp->n_mtp;	/* MTP caches come after the trunk's */
}

int
model_owns(const struct model *md, int il)
{
	return il < md->hp.n_layer ? il >= md->l0 && il < md->l1 : md->last;
}

/* The stage's range settled now that n_layer is known (l1 -1: to the end). */
static int
plan_range(struct model *md)
{
	const struct model_hparams *hp = &md->hp;

	if (!md->part) {
		md->l0 = 0, md->l1 = hp->n_layer, md->first = md->last = 1;
		return 0;
	}
	if (md->l1 < 0)
		md->l1 = hp->n_layer;
	if (md->l0 < 0 || md->l0 >= md->l1 || md->l1 > hp->n_layer)
		return util_err(md->err, "pipeline: a stage of layers %d..%d: the model has "
		    "layers 0..%d", md->l0, md->l1 - 1, hp->n_layer - 1);
	if (hp->arch == MODEL_ARCH_GEMMA4)
		return util_err(md->err, "pipeline: architecture 'gemma4' does not split yet "
		    "(its per-layer inputs are made for every layer at the embedding)");
	return 0;
}

/* A dry bind's bucket: layer il's, or (il < 0) the embedding's (-1) or the head's (-2). */
static void
meter(struct model *md, int il)
{
	const struct model_hparams *hp = &md->hp;

	if (md->dry_run)
		md->meter = &md->dry[il >= 0 ? il : hp->n_layer + hp->n_mtp - 1 - il];
}

/* The embedding, the output head and its norm, as far as this stage has them. */
static int
bind_ends(struct model *md, struct src *s)
{
	const struct model_hparams *hp = &md->hp;
	int embd = md->first || (md->last && (hp->tied || hp->n_mtp > 0));

	meter(md, -1);
	if (embd && load_matrix_host(md, s, "token_embd.weight", 0, hp->n_embd, hp->n_vocab,
	    &md->tok_embd, &md->head_host, &md->head_type))
		return -1;
	meter(md, -2);
	if (md->last && ((!hp->tied && load_matrix_host(md, s, "output.weight", 0, hp->n_embd,
	    hp->n_vocab, &md->output, &md->head_host, &md->head_type)) ||
	    load_vector(md, s, "output_norm.weight", 0, hp->n_embd, &md->output_norm)))
		return -1;
	if (hp->tied)
		md->output = md->tok_embd;	/* shared, released once */
	return 0;
}

/*
 * Attention heads longer than the backend takes (backend_head_max: the
 * CUDA kernels' 512, Gemma-4's global layers' size): refused by name
 * before any weight is read.
 */
static int
heads_fit(struct model *md)
{
	const struct model_hparams *hp = &md->hp;
	int max = backend_head_max(md->be), hd = hp->head_dim;

	if (hp->arch == MODEL_ARCH_GEMMA4 || hp->arch == MODEL_ARCH_GEMMA4A)
		hd = hd > hp->head_dim_swa ? hd : hp->head_dim_swa;
	if (max <= 0 || hd <= max)
		return 0;
	return util_err(md->err, "attention heads of %d: backend '%s' takes at most %d "
	    "(use --device cpu)", hd, backend_name(md->be), max);
}

/* md->err prefixed with "draft 'path': " (-1). */
static int
draft_err(struct model *md, const char *path)
{
	char e[UTIL_ERRLEN];

	memcpy(e, md->err, sizeof e);
	return util_err(md->err, "draft '%s': %s", path, e);
}

/* The layers, n of them, and a dry run's meters. */
static int
alloc_layers(struct model *md, int n)
{
	if ((md->layers = calloc(n, sizeof *md->layers)) == NULL ||
	    (md->dry_run && (md->dry = calloc(n + 2, sizeof *md->dry)) == NULL))
		return util_err(md->err, "out of memory");
	return 0;
}

/*
 * The draft's blocks (its hyper-parameters dh) for the trunk md: its
 * hidden size, its vocabulary and the layer its blocks follow are the
 * trunk's, or -1 with the first that differs in err.
 */
static int
step35_draft_shape(const struct model_hparams *hp, const struct model_hparams *dh, char *err)
{
	if (dh->n_mtp < 1)
		return util_err(err, "no NextN blocks (step35.nextn_predict_layers is absent or 0)");
	if (dh->n_embd != hp->n_embd)
		return util_err(err, "step35.embedding_length %d, the trunk's %d", dh->n_embd,
		    hp->n_embd);
	if (dh->n_vocab != hp->n_vocab)
		return util_err(err, "token_embd.weight has %d rows, the trunk's vocabulary %d",
		    dh->n_vocab, hp->n_vocab);
	if (dh->n_layer != hp->n_layer)
		return util_err(err, "its NextN blocks start at blk.%d (block_count %d less "
		    "nextn_predict_layers %d), the trunk has %d layers", dh->n_layer,
		    dh->n_layer + dh->n_mtp, dh->n_mtp, hp->n_layer);
	return 0;
}

/*
 * An attached step35 draft's hyper-parameters and layers, read as they
 * would be for a model of its own, into a scratch model (hp and layers
 * only: the caller frees dm->layers and dm), once its shape fits the
 * trunk md's.  NULL with md->err.
 */
static struct model *
step35_draft_read(struct model *md, struct src *ds)
{
	struct model *dm = calloc(1, sizeof *dm);
	int rc;

	if (dm == NULL) {
		util_err(md->err, "out of memory");
		return NULL;
	}
	rc = read_hparams(dm, ds);
	if (rc == 0)
		rc = step35_draft_shape(&md->hp, &dm->hp, dm->err);
	if (rc == 0 && (dm->layers = calloc(dm->hp.n_layer + dm->hp.n_mtp,
	    sizeof *dm->layers)) == NULL)
		rc = util_err(dm->err, "out of memory");
	if (rc == 0 && read_step35(dm, ds) != 0)
		rc = -1;
	if (rc != 0) {
		util_err(md->err, "draft '%s': %s", ds->path, dm->err);
		free(dm->layers), free(dm);
		return NULL;
	}
	return dm;
}

/* A field of a struct that a draft's blocks share with their trunk: its key, where, and kind. */
struct shared_field {
	const char *key;	/* after "step35." */
	size_t	off;
	int	is_float;
};

#define HPF(key, f, fl)	{ key, offsetof(struct model_hparams, f), fl }
static const struct shared_field step35_hp_fields[] = {
	HPF("feed_forward_length", n_ff, 0), HPF("attention.key_length", head_dim, 0),
	HPF("attention.head_count_kv", n_head_kv, 0),
	HPF("attention.layer_norm_rms_epsilon", eps, 1),
	HPF("attention.sliding_window", n_swa, 0), HPF("attention.scale", attn_scale, 1),
	HPF("rope.freq_base", rope_theta, 1), HPF("expert_count", n_expert, 0),
	HPF("expert_used_count", n_expert_used, 0),
	HPF("expert_feed_forward_length", n_ff_exp, 0),
	HPF("expert_shared_feed_forward_length", n_ff_shexp, 0),
	HPF("expert_weights_scale", exp_scale, 1), HPF("expert_weights_norm", exp_norm, 0),
};
#undef HPF

#define LF(key, f, fl)	{ key, offsetof(struct model_layer, f), fl }
static const struct shared_field step35_layer_fields[] = {
	LF("attention.head_count", n_head, 0), LF("attention.sliding_window_pattern", swa, 0),
	LF("rotated dims (rope.dimension_count)", n_rot, 0),
	LF("rope base (rope.freq_base)", theta, 1), LF("swiglu_clamp_exp", lim_exp, 1),
	LF("swiglu_clamp_shexp", lim_sh, 1),
};
#undef LF

static double
field(const void *base, const struct shared_field *f)
{
	const char *p = (const char *)base + f->off;

	return f->is_float ? *(const float *)p : *(const int *)p;
}

/* The first of fields f[n] where a and b differ, or NULL. */
static const struct shared_field *
differs(const void *a, const void *b, const struct shared_field *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (field(a, &f[i]) != field(b, &f[i]))
			return &f[i];
	return NULL;
}

/*
 * Does the draft dm fit the trunk md (its hyper-parameters and trunk
 * layers read)?  The hyper-parameters the blocks share with the trunk and
 * the draft's entries for the trunk's layers must be the trunk's: -1 with
 * md->err naming the first that differs.
 */
static int
step35_draft_fits(struct model *md, const struct model *dm, const char *path)
{
	const struct model_hparams *hp = &md->hp;
	const struct shared_field *f;
	size_t nl = sizeof step35_layer_fields / sizeof step35_layer_fields[0];

	if ((f = differs(hp, &dm->hp, step35_hp_fields, sizeof step35_hp_fields /
	    sizeof step35_hp_fields[0])) != NULL)
		return util_err(md->err, "draft '%s': step35.%s %g, the trunk's %g", path, f->key,
		    field(&dm->hp, f), field(hp, f));
	for (int il = 0; il < hp->n_layer; il++)
		if ((f = differs(&md->layers[il], &dm->layers[il], step35_layer_fields, nl)) != NULL)
			return util_err(md->err, "draft '%s': layer %d: %s %g, the trunk's %g", path,
			    il, f->key, field(&dm->layers[il], f), field(&md->layers[il], f));
	return 0;
}

/*
 * step35's layers with the draft ds attached: the trunk's from s (its own
 * NextN blocks, if any, are not read), the NextN blocks the draft's (their
 * count and per-layer values here, their weights in bind), once the draft
 * fits the trunk.
 */
static int
step35_attach(struct model *md, struct src *s, struct src *ds)
{
	struct model_hparams *hp = &md->hp;
	struct model *dm = step35_draft_read(md, ds);
	int rc;

	if (dm == NULL)
		return -1;
	hp->n_mtp = 0;
	rc = alloc_layers(md, hp->n_layer + dm->hp.n_mtp) != 0 || read_step35(md, s) != 0 ||
	    step35_draft_fits(md, dm, ds->path) != 0 ? -1 : 0;
	if (rc == 0) {
		hp->n_mtp = dm->hp.n_mtp;
		for (int il = hp->n_layer; il < hp->n_layer + hp->n_mtp; il++)
			md->layers[il] = dm->layers[il];
		hp->n_head = dm->hp.n_head > hp->n_head ? dm->hp.n_head : hp->n_head;
	}
	free(dm->layers), free(dm);
	return rc;
}

/* The layers, the trunk's and its MTP / NextN blocks (ds's when a draft is attached). */
static int
plan_blocks(struct model *md, struct src *s, struct src *ds)
{
	struct model_hparams *hp = &md->hp;

	if (hp->arch == MODEL_ARCH_STEP35 && ds != NULL)
		return step35_attach(md, s, ds);
	if (ds != NULL)
		hp->n_mtp = 1;	/* qwen35's draft: one MTP layer, whatever the trunk has */
	if (alloc_layers(md, hp->n_layer + hp->n_mtp) != 0)
		return -1;
	return hp->arch == MODEL_ARCH_STEP35 ? read_step35(md, s) : 0;
}

/*
 * Bind the weights; with a draft source ds, the MTP layers come from it:
 * qwen35's one (blk.<n_layer>, whatever the trunk has), step35's NextN
 * blocks (as many as the draft has).
 */
static int
bind(struct model *md, struct src *s, struct src *ds)
{
	struct model_hparams *hp = &md->hp;

	if (read_hparams(md, s) != 0 || plan_range(md) != 0 || heads_fit(md) != 0)
		return -1;
	if (hp->arch == MODEL_ARCH_DFLASH) {
		if (ds != NULL || md->part)
			return util_err(md->err, "a DFlash drafter takes no MTP draft and does not "
			    "split");
		return bind_dflash(md, s);
	}
	if (hp->arch == MODEL_ARCH_GEMMA4 || hp->arch == MODEL_ARCH_GEMMA4A) {
		if (ds != NULL)
			return util_err(md->err, "gemma4: an MTP draft GGUF does not fit a gemma4 trunk");
		if ((md->layers = calloc(hp->n_layer, sizeof *md->layers)) == NULL)
			return util_err(md->err, "out of memory");
		return bind_gemma4(md, s);
	}
	md->ops = hp->arch == MODEL_ARCH_STEP35 ? &model_arch_step35 : &model_arch_qwen35;
	if (plan_blocks(md, s, ds) != 0)
		return -1;
	plan_layers(md);
	if (bind_ends(md, s) != 0)
		return -1;
	for (int il = 0; il < hp->n_layer + hp->n_mtp; il++) {
		struct src *ls = ds != NULL && il >= hp->n_layer ? ds : s;

		meter(md, il);
		if (model_owns(md, il) && bind_layer(md, ls, il) != 0)
			return ls == ds ? draft_err(md, ds->path) : -1;
	}
	return 0;
}

/* A step35 NextN block's own head trimmed to md->draft_ranks (its rows gathered). */
static int
trim_block_head(struct model *md, struct model_layer *L)
{
	const struct model_hparams *hp = &md->hp;
	struct backend_weight w = { 0 };
	char e[UTIL_ERRLEN];
	void *buf;

	if (L->head_host == NULL)
		return util_err(md->err, "frspec trim: no host copy of a NextN block's head");
	if (ranks_head_init(md->be, &w, &buf, md->draft_ranks, L->head_type, hp->n_embd,
	    hp->n_vocab, L->head_host, L->head.scale, e) != 0)
		return util_err(md->err, "frspec trim: %s", e);
	backend_weight_release(md->be, &L->head);
	L->head = w, L->head_buf = buf;
	return 0;
}

/*
 * MEMRA_FRSPEC_TRIM: gather the rank list's rows of the heads that draft:
 * each step35 NextN block's own, and the trunk's own head (main
 * output.weight) unless every block has one.
 */
static int
self_trim(struct model *md, const char *path)
{
	const struct model_hparams *hp = &md->hp;
	char e[UTIL_ERRLEN];
	int all = hp->n_mtp > 0;

	if (md->draft_ranks != NULL)	/* a step35 draft that trim-head trimmed */
		return util_err(md->err, "frspec trim: the draft's heads are trimmed already (its "
		    "d2t): give the rank list or the trimmed draft, not both");
	if ((md->draft_ranks = ranks_load(path, hp->n_vocab, e)) == NULL)
		return util_err(md->err, "frspec trim: %s", e);
	md->draft_self = 1;
	for (int il = hp->n_layer; il < hp->n_layer + hp->n_mtp; il++) {
		if (md->layers[il].head.data == NULL)
			all = 0;
		else if (trim_block_head(md, &md->layers[il]) != 0)
			return -1;
	}
	if (all)
		return 0;
	if (md->head_host == NULL)
		return util_err(md->err, "frspec trim: no host copy of the head");
	if (ranks_head_init(md->be, &md->draft_head, &md->draft_buf, md->draft_ranks,
	    md->head_type, hp->n_embd, hp->n_vocab, md->head_host, md->output.scale, e) != 0)
		return util_err(md->err, "frspec trim: %s", e);
	return 0;
}

/*
 * The external draft's heads beyond step35's blocks' own: qwen35's
 * output.weight (rows in d2t order); a trimmed step35 draft's, when one
 * of its blocks has no head of its own (an untrimmed one's blocks without
 * draft through the trunk's head).
 */
static int
draft_head(struct model *md, struct src *ds, const char *path)
{
	const struct model_hparams *hp = &md->hp;
	int need = hp->arch != MODEL_ARCH_STEP35;
	struct src_tensor t;
	char b[96];

	md->draft_ext = 1;
	if (hp->arch == MODEL_ARCH_STEP35) {
		md->draft_nx = hp->n_mtp;
		for (int il = hp->n_layer; il < hp->n_layer + hp->n_mtp; il++)
			need |= md->draft_ranks != NULL &&
			    src_tensor(ds, NAME(b, il, "nextn.shared_head_head.weight"), &t) != 0;
	}
	if (need && load_matrix_host(md, ds, "output.weight", 0, hp->n_embd, md->draft_ranks->n,
	    &md->draft_head, NULL, &md->draft_type) != 0)
		return draft_err(md, path);
	return 0;
}

/*
 * A step35 draft's architecture, and its d2t when it has one (trim-head's
 * draft: every head trimmed to those rows); without, its heads are whole.
 * -1 with why.
 */
static int
step35_draft_ranks(struct model *md, struct src *ds, char *why)
{
	if (ds->arch == NULL || strcmp(ds->arch, "step35") != 0)
		return util_err(why, "draft is not a 'step35' model (general.architecture)");
	if (gguf_find_tensor(ds->gg, "d2t") < 0)
		return 0;
	if ((md->draft_ranks = ranks_from_gguf(ds->gg, md->hp.n_vocab, why)) == NULL)
		return -1;
	ds->nx_rows = md->draft_ranks->n;
	return 0;
}

/*
 * Open the draft GGUF and check it fits the trunk s (its hyper-parameters
 * are read here, then cleared for bind; a step35 draft's blocks are
 * checked against the trunk's layers in bind).  -1 with "file: why" in err.
 */
static int
open_draft(struct model *md, struct src *s, const char *path, struct src *ds, char *err)
{
	char why[UTIL_ERRLEN];
	int total;

	if ((md->dg = gguf_open(path, err)) == NULL)
		return -1;
	ds->gg = md->dg;
	ds->arch = src_arch(ds);
	ds->path = path;
	if (read_hparams(md, s) != 0)
		return util_err(err, "%s: %s", md->path, md->err);
	if (md->hp.arch == MODEL_ARCH_STEP35) {
		if (step35_draft_ranks(md, ds, why) != 0)
			return util_err(err, "%s: %s", path, why);
	} else {
		total = src_int(s, "block_count", 0);
		if ((md->draft_ranks = ranks_from_draft(md->dg, s->arch, md->hp.n_embd,
		    md->hp.n_vocab, total - md->hp.n_mtp, why)) == NULL)
			return util_err(err, "%s: %s", path, why);
	}
	memset(&md->hp, 0, sizeof md->hp);
	return 0;
}

/*
 * The trunk's layer whose K/V the assistant's layer L reads: the trunk's
 * last layer of L's kind (transformers' shared_kv_states hold the last
 * non-shared layer's of each type; a shared layer's cache is its source's).
 */
static const struct model_layer *
assist_source(const struct model *md, const struct model_layer *L)
{
	for (int il = md->hp.n_layer - 1; il >= 0; il--)
		if (md->layers[il].swa == L->swa)
			return &md->layers[il];
	return NULL;
}

/*
 * A drafter for the gemma4 trunk md: open the gemma4_assistant at path,
 * check it fits, bind each of its layers to the trunk's cache it reads
 * and, with ranks, trim its head to them, with adapt > 0 learned slots
 * after them.  -1 with md->err set.
 */
static int
assist_attach(struct model *md, const char *path, const char *ranks, int adapt)
{
	const struct model_hparams *hp = &md->hp;
	struct model *A;
	char e[UTIL_ERRLEN];

	if ((md->asst = A = model_open(path, md->be, e)) == NULL)
		return util_err(md->err, "draft %s", e);
	if (A->hp.arch != MODEL_ARCH_GEMMA4A)
		return util_err(md->err, "draft '%s': not a gemma4_assistant (a gemma4 trunk "
		    "drafts with its assistant only)", path);
	if (A->hp.n_bb != hp->n_embd || A->hp.n_vocab != hp->n_vocab)
		return util_err(md->err, "draft '%s': drafts for a trunk of hidden size %d and "
		    "%d tokens, not this one's %d and %d", path, A->hp.n_bb, A->hp.n_vocab,
		    hp->n_embd, hp->n_vocab);
	for (int il = 0; il < A->hp.n_layer; il++) {
		struct model_layer *L = &A->layers[il];
		const struct model_layer *T = assist_source(md, L);

		if (T == NULL || T->hd != L->hd || A->hp.n_head % T->nkv != 0)
			return util_err(md->err, "draft '%s': layer %d (%s, %d heads of %d) does "
			    "not fit the trunk's %s K/V (%d heads of %d)", path, il,
			    L->swa ? "sliding" : "global", A->hp.n_head, L->hd,
			    L->swa ? "sliding" : "global", T ? T->nkv : 0, T ? T->hd : 0);
		L->cache = T->cache, L->nkv = T->nkv;
	}
	if (ranks != NULL && self_trim(A, ranks) != 0)
		return util_err(md->err, "draft '%s': %s", path, A->err);
	if (adapt > 0 && model_assist_adapt(A, ranks, adapt) != 0)
		return util_err(md->err, "draft '%s': %s", path, A->err);
	return 0;
}

/* model_attach_line of a trunk with its assistant (r: the trimmed head's ranks, or NULL). */
static int
assist_line(const struct model *md, const struct ranks *r, int type, char *buf, size_t n)
{
	const struct model *A = md->asst;
	int k = snprintf(buf, n, "[gemma-draft] assistant drafter: %d layers, hidden %d over the "
	    "trunk's K/V, ", A->hp.n_layer, A->hp.n_embd);

	if (k < 0 || (size_t)k >= n)
		return 0;
	if (r == NULL)
		snprintf(buf + k, n - k, "full head (%d rows)", A->hp.n_vocab);
	else
		snprintf(buf + k, n - k, "head trimmed to %lld rows (%s, d2t map)",
		    (long long)r->n, quant_name(type));
	return 0;
}

/*
 * A DFlash drafter for the trunk md: open it (its products as
 * o->dflash_prec says) and check that it fits: the trunk runs the tapped
 * forward (qwen35, qwen35moe, llama; whole, on a backend with the
 * drafter's ops: backend_window, _attn_hi, DFlash2's _dconv), the hidden
 * size, the vocabulary and the mask token agree, and every tap is a trunk
 * layer before the last.  -1 with md->err set.
 */
static int
dflash_attach(struct model *md, const char *path, const struct model_options *o)
{
	const struct model_hparams *hp = &md->hp, *dh;
	struct model_options d = { .dflash_prec = o->dflash_prec };
	char e[UTIL_ERRLEN];

	if (hp->arch != MODEL_ARCH_QWEN35 && hp->arch != MODEL_ARCH_QWEN35MOE &&
	    hp->arch != MODEL_ARCH_LLAMA)
		return util_err(md->err, "DFlash drafter '%s': attaches to a qwen35, qwen35moe or "
		    "llama trunk only", path);
	if (o->split != NULL || md->part)
		return util_err(md->err, "DFlash drafter '%s': a pipeline split is not supported",
		    path);
	if (!backend_window(md->be) || !backend_attn_hi(md->be))
		return util_err(md->err, "DFlash drafter '%s': backend '%s' cannot run it (its "
		    "attention needs a sliding window over a ring: --device cpu)", path,
		    backend_name(md->be));
	if ((md->dfl = model_open_opts(path, md->be, &d, e)) == NULL)
		return util_err(md->err, "DFlash drafter %s", e);
	dh = &md->dfl->hp;
	if (dh->conv_k > 0 && !backend_has_dconv(md->be))
		return util_err(md->err, "DFlash drafter '%s': backend '%s' cannot run DFlash2's "
		    "convolutions (--device cpu)", path, backend_name(md->be));
	if (dh->arch != MODEL_ARCH_DFLASH)
		return util_err(md->err, "DFlash drafter '%s': not a DFlash drafter (architecture "
		    "'%s')", path, dh->arch == MODEL_ARCH_QWEN35 ? "qwen35" : "another");
	if (dh->n_embd != hp->n_embd || (dh->n_vocab != 0 && dh->n_vocab != hp->n_vocab) ||
	    dh->mask_id >= hp->n_vocab)
		return util_err(md->err, "DFlash drafter '%s': drafts for a trunk of hidden size "
		    "%d and %d tokens (mask token %d), not this one's %d and %d", path, dh->n_embd,
		    dh->n_vocab ? dh->n_vocab : hp->n_vocab, dh->mask_id, hp->n_embd, hp->n_vocab);
	if (md->draft_ranks != NULL && md->draft_ranks->n < dh->sel_topk)
		return util_err(md->err, "DFlash drafter '%s': its selector takes the top %d of the "
		    "head, trimmed to %lld rows", path, dh->sel_topk, (long long)md->draft_ranks->n);
	if (dh->block - 1 > SPEC_KMAX)
		return util_err(md->err, "DFlash drafter '%s': a block of %d is more than a verify "
		    "takes (%d)", path, dh->block, SPEC_KMAX + 1);
	for (int j = 0; j < dh->n_tap; j++)
		if (dh->taps[j] >= hp->n_layer - 1)
			return util_err(md->err, "DFlash drafter '%s': reads trunk layer %d, but "
			    "the trunk has layers 0..%d and its last one's output is no tap (HF "
			    "ids; GGUF target_layers are those + 1)", path, dh->taps[j],
			    hp->n_layer - 1);
	if ((md->dfl_path = strdup(path)) == NULL)
		return util_err(md->err, "out of memory");
	return 0;
}

/* 1 when path is a file that starts with the GGUF magic */
static int
is_gguf(const char *path)
{
	char magic[4] = { 0 };
	FILE *fp = fopen(path, "rb");
	int yes;

	if (fp == NULL)
		return 0;
	yes = fread(magic, 1, 4, fp) == 4 && memcmp(magic, "GGUF", 4) == 0;
	fclose(fp);
	return yes;
}

static int
open_source(struct model *md, const char *path, struct src *s, char *err)
{
	if (is_gguf(path)) {
		if (model_gguf_open(md, path, err) != 0)
			return -1;
		s->gg = md->gg;		/* the weights stay mapped */
		s->parts = md->parts;
		s->n_parts = md->n_parts;
		md->hf_l2 = 0;
	} else {
		if ((s->st = safetensors_open(path, err)) == NULL)
			return -1;
		if (safetensors_plan(s->st, 0) != 0)
			return util_err(err, "%s: %s", path, safetensors_errmsg(s->st));
		md->hf_l2 = 1;
	}
	s->arch = src_arch(s);
	return 0;
}

struct model *
model_open(const char *path, struct backend *be, char *err)
{
	return model_open_opts(path, be, NULL, err);
}

/* What of a model open_one binds: a stage's layers, or a dry run's bytes. */
struct part {
	int	part;		/* 1: a stage (model.part) */
	int	l0, l1;		/* l1 -1: to the last layer */
	int	first, last;
	int	dry_run;
};

/*
 * Each cache's row width into md->kv_w (model_kv_width) when they differ
 * (gemma4's sliding layers 16 K/V heads of 256, global 4 of 512 on the
 * 31B): each cache as large as its own rows, not the widest one's.  NULL
 * when every cache is as wide (a stage of a split model keeps the widest).
 */
static int
kv_widths(struct model *md)
{
	int n = md->n_kv_own, same = 1;

	for (int i = 1; i < n; i++)
		same = same && model_kv_width(md, i) == model_kv_width(md, 0);
	if (same)
		return 0;
	if ((md->kv_w = calloc(n, sizeof *md->kv_w)) == NULL)
		return util_err(md->err, "out of memory");
	for (int i = 0; i < n; i++)
		md->kv_w[i] = model_kv_width(md, i);
	return 0;
}

static struct model *
open_one(const char *path, struct backend *be, const struct model_options *o,
    const struct part *pt, char *err)
{
	struct model *md = calloc(1, sizeof *md);
	struct src s = { 0 }, ds = { 0 };
	char *dpath = NULL, *tpath = NULL;	/* resolved hf: specs */
	const char *draft = o != NULL && o->draft != NULL && o->draft[0] ? o->draft : NULL;
	const char *trim = o != NULL && !o->full_prec && o->ranks != NULL && o->ranks[0] ?
	    o->ranks : NULL;
	const char *dfl = o != NULL && o->dflash != NULL && o->dflash[0] ? o->dflash : NULL;
	char *fpath = NULL;
	int g4;

	if (md == NULL) {
		util_err(err, "%s: out of memory", path);
		return NULL;
	}
	md->be = be;
	if (pt != NULL) {
		md->part = pt->part, md->l0 = pt->l0, md->l1 = pt->l1;
		md->first = pt->first, md->last = pt->last, md->dry_run = pt->dry_run;
		trim = md->dry_run ? NULL : trim;
	}
	if (o != NULL && o->kv_f16 && !backend_kv_f16(be)) {
		util_err(err, "%s: kv type 'f16': backend '%s' has no f16 KV cache", path,
		    backend_name(be));
		goto fail;
	}
	md->kv_f16 = o != NULL && o->kv_f16;
	md->plain_attn = o != NULL && o->plain_attn;
	md->host_pos = o != NULL && o->host_pos;
	if ((md->dfl_type = model_dflash_prec(o != NULL ? o->dflash_prec : NULL)) < -1) {
		util_err(err, "%s: MEMRA_DFLASH_PREC '%s': not q4, q8, bf16, f32 or keep", path,
		    o->dflash_prec);
		goto fail;
	}
	if (dfl != NULL && draft != NULL) {
		util_err(err, "%s: a DFlash drafter and an MTP draft (%s): two spec programs never "
		    "coexist", path, draft);
		goto fail;
	}
	if ((md->path = hub_is_spec(path) ? hub_path(path, NULL, err) : strdup(path)) == NULL) {
		if (!hub_is_spec(path))
			util_err(err, "%s: out of memory", path);
		goto fail;
	}
	path = md->path;
	/* the draft and the rank list may be hf: specs too */
	if ((draft != NULL && hub_is_spec(draft) && (draft = dpath = hub_path(draft, NULL, err)) == NULL) ||
	    (trim != NULL && hub_is_spec(trim) && (trim = tpath = hub_path(trim, NULL, err)) == NULL) ||
	    (dfl != NULL && hub_is_spec(dfl) && (dfl = fpath = hub_path(dfl, NULL, err)) == NULL))
		goto fail;
	if (open_source(md, path, &s, err) != 0)
		goto fail;
	if (s.arch != NULL && strcmp(s.arch, "qwen35moe") == 0 && !backend_moe(be)) {
		util_err(err, "%s: architecture 'qwen35moe': backend '%s' has no "
		    "mixture-of-experts ops yet (use --device cpu)", path, backend_name(be));
		goto fail;
	}
	if (s.arch != NULL && strncmp(s.arch, "gemma4", 6) == 0 && !backend_gemma(be)) {
		util_err(err, "%s: architecture '%s': backend '%s' has no Gemma-4 ops yet "
		    "(use --device cpu)", path, s.arch, backend_name(be));
		goto fail;
	}
	if (s.arch != NULL && strcmp(s.arch, "step35") == 0 && !backend_step35(be)) {
		util_err(err, "%s: architecture 'step35': backend '%s' has no step35 ops yet "
		    "(sliding-window attention, sigmoid routing, SwiGLU limits; use --device cpu)",
		    path, backend_name(be));
		goto fail;
	}
	g4 = s.arch != NULL && strcmp(s.arch, "gemma4") == 0;
	if (draft != NULL && !g4 && open_draft(md, &s, draft, &ds, err) != 0)
		goto fail;
	if (draft != NULL && !g4 && (md->draft_path = strdup(draft)) == NULL) {
		util_err(err, "%s: out of memory", path);
		goto fail;
	}
	if (g4 && draft == NULL && o != NULL && o->asst_ranks != NULL && o->asst_ranks[0]) {
		util_err(err, "%s: a drafter's rank list without a drafter (MEMRA_DRAFT)", path);
		goto fail;
	}
	if (o != NULL && o->asst_adapt > 0 && !o->full_prec && (!g4 || draft == NULL ||
	    o->asst_ranks == NULL || !o->asst_ranks[0])) {
		util_err(err, "%s: learned draft slots (MEMRA_GEMMA_TRIM_ADAPT) need a gemma4 "
		    "trunk's assistant drafter (MEMRA_DRAFT) with its head trimmed "
		    "(MEMRA_GEMMA_DRAFT_RANKS)", path);
		goto fail;
	}
	if (bind(md, &s, draft != NULL && !g4 ? &ds : NULL) != 0 ||
	    (draft != NULL && !g4 && draft_head(md, &ds, draft) != 0) ||
	    (draft != NULL && g4 && assist_attach(md, draft, o->full_prec ? NULL :
	    o->asst_ranks, o->full_prec ? 0 : o->asst_adapt) != 0) ||
	    (trim != NULL && (draft == NULL || !g4) && self_trim(md, trim) != 0) ||
	    (dfl != NULL && dflash_attach(md, dfl, o) != 0)) {
		util_err(err, "%s: %s", path, md->err);
		goto fail;
	}
	if (!md->part) {	/* the state holds every cache */
		md->n_kv_own = md->hp.n_full + md->hp.n_mtp, md->n_rec_own = md->hp.n_rec;
		/* gemma4's rings (model_ring_rows): where every sliding layer reads its own */
		if (md->hp.arch == MODEL_ARCH_GEMMA4 && md->hp.n_kv_shared == 0 &&
		    md->hp.n_swa > 0 && backend_window(md->be) && backend_attn_hi(md->be))
			md->ring_rows = MODEL_RING_ROWS;
		if (kv_widths(md) != 0) {
			util_err(err, "%s: %s", path, md->err);
			goto fail;
		}
	}
	safetensors_close(s.st);	/* its weights were read into memory of ours */
	free(dpath);
	free(tpath);
	free(fpath);
	return md;
fail:
	safetensors_close(s.st);
	free(dpath);
	free(tpath);
	free(fpath);
	model_close(md);
	return NULL;
}

/*
 * The split by bytes: a dry bind of the whole model counts each layer's
 * weights, the embedding's and the head's, and pipeline_split cuts.
 */
static int
split_by_bytes(const char *path, struct backend *be, const struct model_options *o, int k,
    int *first, char *err)
{
	struct part pt = { 1, 0, -1, 1, 1, 1 };
	struct model *dm = open_one(path, be, o, &pt, err);
	const struct model_hparams *hp;
	char why[UTIL_ERRLEN];
	uint64_t h0, h1;
	int rc;

	if (dm == NULL)
		return -1;
	hp = &dm->hp;
	h0 = dm->dry[hp->n_layer + hp->n_mtp];
	h1 = dm->dry[hp->n_layer + hp->n_mtp + 1] + (hp->tied || hp->n_mtp > 0 ? h0 : 0);
	for (int i = hp->n_layer; i < hp->n_layer + hp->n_mtp; i++)
		h1 += dm->dry[i];
	if ((rc = pipeline_split(dm->dry, hp->n_layer, h0, h1, k, first, why)) != 0)
		util_err(err, "%s: %s", path, why);
	model_close(dm);
	return rc;
}

/* Open stage s of split sp (its layers from first[]) on its own backend. */
static struct model *
open_stage(const char *path, const struct model_options *o, const int *first, int s,
    char *err)
{
	const struct model_split *sp = o->split;
	struct model_options so = *o;
	struct part pt = { 1, s > 0 ? first[s - 1] : 0, s < sp->n - 1 ? first[s] : -1, s == 0,
	    s == sp->n - 1, 0 };
	char why[UTIL_ERRLEN];
	struct model *md;

	so.split = NULL;
	if (!pt.last)	/* the draft head and its MTP layer live on the last stage */
		so.draft = NULL, so.ranks = NULL;
	if (backend_use(sp->be[s]) != 0) {
		util_err(err, "%s: stage %d: %s", path, s, backend_errmsg(sp->be[s]));
		return NULL;
	}
	if ((md = open_one(path, sp->be[s], &so, &pt, why)) == NULL)
		util_err(err, "stage %d (%s): %s", s, sp->dev[s], why);
	return md;
}

/*
 * A split model: a model per stage, and this one over them with the
 * whole model's hyper-parameters, the text side (tokenizer, template)
 * and the link.
 */
static struct model *
open_split(const char *path, const struct model_options *o, char *err)
{
	const struct model_split *sp = o->split;
	struct model *md = calloc(1, sizeof *md);
	int first[PIPELINE_MAX_STAGES];

	if (md == NULL || (md->stage = calloc(sp->n, sizeof *md->stage)) == NULL ||
	    (md->dev = calloc(sp->n, sizeof *md->dev)) == NULL) {
		util_err(err, "%s: out of memory", path);
		goto fail;
	}
	md->n_stage = sp->n;
	memcpy(md->dev, sp->dev, sp->n * sizeof *md->dev);
	if ((md->path = hub_is_spec(path) ? hub_path(path, NULL, err) : strdup(path)) == NULL) {
		if (!hub_is_spec(path))
			util_err(err, "%s: out of memory", path);
		goto fail;
	}
	if (sp->first != NULL)
		memcpy(first, sp->first, (sp->n - 1) * sizeof *first);
	else if (split_by_bytes(md->path, sp->be[0], o, sp->n, first, err) != 0)
		goto fail;
	for (int s = 0; s < sp->n; s++)
		if ((md->stage[s] = open_stage(md->path, o, first, s, err)) == NULL)
			goto fail;
	md->hp = md->stage[sp->n - 1]->hp;
	md->be = md->stage[sp->n - 1]->be;
	md->n_kv_own = md->hp.n_full + md->hp.n_mtp, md->n_rec_own = md->hp.n_rec;
	md->first = md->last = 1, md->l1 = md->hp.n_layer;
	if ((is_gguf(md->path) && model_gguf_open(md, md->path, err) != 0) ||
	    (md->link = pipeline_link_open(sp->be, sp->dev, sp->n, err)) == NULL)
		goto fail;
	return md;
fail:
	model_close(md);
	return NULL;
}

struct model *
model_open_opts(const char *path, struct backend *be, const struct model_options *o,
    char *err)
{
	if (o == NULL || o->split == NULL)
		return open_one(path, be, o, NULL, err);
	if (o->split->n < 2 || o->split->n > PIPELINE_MAX_STAGES || o->split->be[0] != be) {
		util_err(err, "%s: pipeline: %d stages (2..%d), stage 0 on the model's backend",
		    path, o->split->n, PIPELINE_MAX_STAGES);
		return NULL;
	}
	return open_split(path, o, err);
}

struct model *
model_stage(const struct model *md, int s)
{
	return md->stage != NULL ? md->stage[s] : (struct model *)md;
}

struct model *
model_last(const struct model *md)
{
	return md->stage != NULL ? md->stage[md->n_stage - 1] : (struct model *)md;
}

int
model_stages(const struct model *md)
{
	return md->stage != NULL ? md->n_stage : 1;
}

struct backend *
model_stage_backend(const struct model *md, int s)
{
	return s < 0 || s >= model_stages(md) ? NULL : model_stage(md, s)->be;
}

const char *
model_stage_device(const struct model *md, int s)
{
	return md->stage != NULL && s >= 0 && s < md->n_stage ? md->dev[s] : NULL;
}

int
model_step_rows(const struct model *md)
{
	int most = BACKEND_ROWS_MAX;

	for (int s = 0; s < model_stages(md); s++) {
		int r = backend_step_rows(model_stage_backend(md, s));

		most = r < most ? r : most;
	}
	return most;
}

void
model_seqs_stats(const struct model *md, struct model_seqs_stats *st)
{
	*st = md->sqs;
}

long
model_steps_dpos(const struct model *md)
{
	long n = 0;

	for (int s = 0; s < model_stages(md); s++)
		n += model_stage(md, s)->steps_dpos;
	return n;
}

void
model_pp_stats(const struct model *md, struct model_pp_stats *st)
{
	*st = md->pps;
}

/* What stage s holds beside its layers: " + embedding", " + head", both. */
static const char *
stage_ends(const struct model *sm)
{
	return sm->first && sm->last ? " + embedding + head" : sm->first ? " + embedding" :
	    sm->last ? (sm->hp.n_mtp > 0 ? " + head + mtp" : " + head") : "";
}

int
model_pp_line(const struct model *md, int i, char *buf, size_t n)
{
	char tag[PIPELINE_DEVLEN + 8];
	size_t len = 0;

	buf[0] = '\0';
	if (md->stage == NULL || i < 0 || i > md->n_stage + 1)
		return -1;
	if (i == 0) {
		len = snprintf(buf, n, "[pp] cross-device transport:");
		for (int s = 0; s < md->n_stage && len < n; s++)
			len += snprintf(buf + len, n - len, " stage%d=%s", s,
			    pipeline_dev_tag(md->dev[s], tag, sizeof tag));
	} else if (i == 1) {
		snprintf(buf, n, "[pp] link: %s", strcmp(pipeline_link_kind(md->link), "nccl") == 0 ?
		    "nccl (send/recv between the stages' streams)" :
		    "pipe (stand-in: the rows through the host and a pipe)");
	} else {
		const struct model *sm = md->stage[i - 2];
		size_t fb = 0, tb = 0;

		backend_use(sm->be);
		backend_mem_info(sm->be, &fb, &tb);
		snprintf(buf, n, "[pp] stage%d: %s (%s) layers %d-%d%s, weights %.1f MiB, "
		    "free %.1f MiB", i - 2, pipeline_dev_tag(md->dev[i - 2], tag, sizeof tag),
		    backend_name(sm->be), sm->l0, sm->l1 - 1, stage_ends(sm),
		    sm->wbytes / 1048576.0, fb / 1048576.0);
	}
	return 0;
}

const struct ranks *
model_draft_ranks(const struct model *md, int *type, int *external)
{
	md = model_last(md);
	if (md->asst != NULL)
		md = md->asst;
	if (md->draft_ranks == NULL)
		return NULL;
	if (type != NULL)	/* the trimmed rows' type as the file holds them (a device's
				 * copy may be F32): the head's, else the first NextN block's */
		*type = md->draft_head.data == NULL && md->hp.n_mtp >= 1 ?
		    md->layers[md->hp.n_layer].head_type : md->draft_ext && !md->draft_self ?
		    md->draft_type : md->head_type;
	if (external != NULL)
		*external = md->draft_ext && !md->draft_self;
	return md->draft_ranks;
}

int
model_draft_vocab(const struct model *md)
{
	md = model_last(md);
	if (md->asst != NULL)
		md = md->asst;
	if (md->learned != NULL)
		return (int)md->n_fixed + learned_slots(md->learned);
	return md->draft_ranks != NULL ? (int)md->draft_ranks->n : md->hp.n_vocab;
}

int64_t
model_draft_fixed(const struct model *md)
{
	md = model_last(md);
	if (md->asst != NULL)
		md = md->asst;
	if (md->draft_ranks == NULL)
		return 0;
	return md->learned != NULL ? md->n_fixed : md->draft_ranks->n;
}

void
model_act_free(struct model *md)
{
	struct model_act *a = &md->act;
	float *bufs[] = { a->x, a->xn, a->t, a->cat, a->q, a->y, a->z, a->o, a->a, a->b,
	    a->f, a->u, a->logits, (float *)a->dpos, a->rl, a->rw, (float *)a->rid, a->ef,
	    a->sh, a->sg, a->g1, a->ple, a->plp, a->pg };

	for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
		backend_mfree(md->be, bufs[i]);
	free(a->pos), free(a->hi), free(a->tok);
	backend_mfree(md->be, a->chain), backend_mfree(md->be, (float *)a->cmap);
	backend_host_free(md->be, a->chost), backend_host_free(md->be, a->clg);
	memset(a, 0, sizeof *a);
	backend_mfree(md->be, md->taps);
	md->taps = NULL;
}

enum { LAYER_WEIGHTS = 28 };

/* Layer L's weights into ws[LAYER_WEIGHTS] (those it lacks have data NULL). */
static void
layer_weights(struct model_layer *L, struct backend_weight **ws)
{
	struct backend_weight *all[LAYER_WEIGHTS] = { &L->q, &L->k, &L->v, &L->o, &L->qkv,
	    &L->gate, &L->beta, &L->alpha, &L->out, &L->ffn_gate, &L->ffn_up, &L->ffn_down,
	    &L->eh_proj, &L->router, &L->exp_gate, &L->exp_up, &L->exp_down, &L->sh_gate,
	    &L->sh_up, &L->sh_down, &L->sh_inp, &L->exp_gate_up, &L->pl_gate, &L->pl_proj, &L->g,
	    &L->head, &L->conv_proj[0], &L->conv_proj[1] };

	memcpy(ws, all, sizeof all);
}

static void
release_layer(struct model *md, struct model_layer *L)
{
	struct backend_weight *ws[LAYER_WEIGHTS];

	layer_weights(L, ws);
	for (size_t i = 0; i < LAYER_WEIGHTS; i++)
		backend_weight_release(md->be, ws[i]);
}

/* 1 when w is there and its product quantizes its input (an int8 type). */
static int
int8_product(const struct backend_weight *w)
{
	int at = w->data != NULL ? quant_vec_dot_type(w->type) : -1;

	return at >= 0 && at != QUANT_F32;
}

int
model_int8_weights(const struct model *md)
{
	struct backend_weight *ws[LAYER_WEIGHTS];
	int n = 0;

	for (int il = 0; md->layers != NULL && il < md->hp.n_layer + md->hp.n_mtp; il++) {
		layer_weights(&md->layers[il], ws);
		for (size_t i = 0; i < LAYER_WEIGHTS; i++)
			n += int8_product(ws[i]);
	}
	return n + int8_product(&md->output);
}

void
model_close(struct model *md)
{
	if (md == NULL)
		return;
	for (int s = 0; md->stage != NULL && s < md->n_stage; s++)
		if (md->stage[s] != NULL && backend_use(md->stage[s]->be) == 0)
			model_close(md->stage[s]);
	free(md->stage);
	free(md->dev);
	free(md->dry);
	free(md->kv_w);
	pipeline_link_close(md->link);
	model_close(md->asst);
	model_close(md->dfl);
	model_dflash_free(md);
	free(md->dfl_path);
	model_act_free(md);
	free(md->pick_val), free(md->pick_id), free(md->pen);
	for (int il = 0; md->layers != NULL && il < md->hp.n_layer + md->hp.n_mtp; il++) {
		release_layer(md, &md->layers[il]);
		free(md->layers[il].head_buf);
	}
	backend_weight_release(md->be, &md->draft_head);
	backend_weight_release(md->be, &md->fc);
	backend_weight_release(md->be, &md->sel_hidden);
	backend_weight_release(md->be, &md->sel_prev);
	backend_weight_release(md->be, &md->sel_next);
	free(md->draft_buf);
	ranks_free(md->draft_ranks);
	learned_free(md->learned);
	free(md->learned_path), free(md->learned_ids);
	if (!md->hp.tied)
		backend_weight_release(md->be, &md->output);
	backend_weight_release(md->be, &md->tok_embd);
	backend_weight_release(md->be, &md->pl_embd);
	backend_weight_release(md->be, &md->pl_model_proj);
	backend_weight_release(md->be, &md->pre_proj);
	backend_weight_release(md->be, &md->post_proj);
	for (int i = 0; i < md->n_dbuf; i++)
		backend_mfree(md->be, md->dbuf[i]);
	for (int i = 0; i < md->n_hbuf; i++)
		free(md->hbuf[i]);
	free(md->dbuf);
	free(md->hbuf);
	free(md->layers);
	free(md->path);
	free(md->draft_path);
	model_gguf_close(md);
	gguf_close(md->dg);
	free(md);
}

const char *
model_errmsg(const struct model *md)
{
	return md->err;
}

const struct model_hparams *
model_hparams(const struct model *md)
{
	return &md->hp;
}

float *
model_host_alloc(struct model *md, size_t n)
{
	float *p = backend_host_alloc(md->be, n);

	if (p == NULL)
		util_err(md->err, "%s", backend_errmsg(md->be));
	return p;
}

void
model_host_free(struct model *md, float *p)
{
	backend_host_free(md->be, p);
}

/* The widest K/V row of any cache (gemma4's layers differ: each cache is
 * [n_ctx][its own width], model_kv_width). */
static int
model_kv_dim(const struct model *md)
{
	const struct model_hparams *hp = &md->hp;
	int w = hp->n_head_kv * hp->head_dim;

	for (int il = 0; hp->arch == MODEL_ARCH_GEMMA4 && il < hp->n_layer; il++)
		if (md->layers[il].nkv * md->layers[il].hd > w)
			w = md->layers[il].nkv * md->layers[il].hd;
	return w;
}

int
model_kv_width(const struct model *md, int i)
{
	for (int st = 0; md->stage != NULL && st < md->n_stage; st++) {	/* stage by stage */
		if (i < md->stage[st]->n_kv_own)
			return model_kv_width(md->stage[st], i);
		i -= md->stage[st]->n_kv_own;
	}
	if (md->stage != NULL || i < 0 || i >= md->n_kv_own)
		return -1;
	for (int il = 0; md->hp.arch == MODEL_ARCH_GEMMA4 && il < md->hp.n_layer; il++)
		if (md->layers[il].kv_own && md->layers[il].cache == i)
			return md->layers[il].nkv * md->layers[il].hd;
	return model_kv_dim(md);
}

static struct state_config
state_shape(const struct model *md, int n_ctx, int n_snap)
{
	const struct model_hparams *hp = &md->hp;
	struct state_config c = {
		.n_ctx = n_ctx, .n_kv = md->n_kv_own,
		.kv_dim = model_kv_dim(md), .n_rec = md->n_rec_own,
		.conv_dim = md->n_rec_own ? model_conv_dim(hp) : 0, .d_conv = hp->d_conv,
		.n_v_heads = hp->n_v_heads, .dk = hp->dk, .dv = hp->dv, .n_snap = n_snap,
		.kv_w = md->stage == NULL ? md->kv_w : NULL,
	};
	int ring = hp->n_swa + md->ring_rows - 1;

	/* gemma4's sliding caches (the last: plan_gemma4) as rings, when fewer rows */
	for (int il = 0; md->ring_rows > 0 && n_ctx > ring && il < hp->n_layer; il++)
		c.n_ring += md->layers[il].kv_own && md->layers[il].swa;
	if (c.n_ring > 0)
		c.ring = ring, c.window = hp->n_swa;
	return c;
}

void
model_state_shape(const struct model *md, int n_ctx, int n_snap, struct state_config *c)
{
	*c = state_shape(md, n_ctx, n_snap);
}

int
model_ring_rows(const struct model *md)
{
	return md->ring_rows;
}

int
model_set_ring_rows(struct model *md, int r)
{
	if (md->ring_rows == 0)
		return util_err(md->err, "rings: this model keeps whole caches (only a gemma4 "
		    "with sliding layers of their own, unsplit, on a backend whose attention "
		    "takes rings)");
	if (r < BACKEND_ROWS_MAX)
		return util_err(md->err, "rings: %d rows a piece (%d or more: a step's)", r,
		    BACKEND_ROWS_MAX);
	if (md->states_made && r != md->ring_rows)
		return util_err(md->err, "rings: its states are made with %d rows a piece",
		    md->ring_rows);
	md->ring_rows = r;
	return 0;
}

int
model_ring_hold(struct model *md, int n)
{
	return md->ring_rows > 0 && n > md->ring_rows ? model_set_ring_rows(md, n) : 0;
}

size_t
model_state_bytes(const struct model *md, int n_ctx, int n_snap)
{
	struct state_config c = state_shape(md, n_ctx, n_snap);
	size_t b = 0;

	if (md->stage == NULL)
		return state_bytes(&c);
	for (int s = 0; s < md->n_stage; s++)
		b += model_state_bytes(md->stage[s], n_ctx, n_snap);
	return b;
}

size_t
model_stage_state_bytes(const struct model *md, int s, int n_ctx, int n_snap)
{
	if (s < 0 || s >= model_stages(md))
		return 0;
	return model_state_bytes(model_stage(md, s), n_ctx, n_snap);
}

/* A split model's state: each stage's part on its device, under one state. */
static struct state *
state_new_stages(struct model *md, int n_ctx, int n_snap, char *err)
{
	struct state_config c = state_shape(md, n_ctx, n_snap);
	struct state *part[PIPELINE_MAX_STAGES];

	for (int s = 0; s < md->n_stage; s++) {
		struct state_config sc = state_shape(md->stage[s], n_ctx, n_snap);

		if (backend_use(md->stage[s]->be) != 0) {
			util_err(err, "stage %d: %s", s, backend_errmsg(md->stage[s]->be));
			part[s] = NULL;
		} else
			part[s] = state_new(md->stage[s]->be, &sc, err);
		if (part[s] == NULL) {
			while (s-- > 0)
				state_free(part[s]);
			return NULL;
		}
	}
	return state_new_split(part, md->n_stage, &c, err);
}

struct state *
model_state_new(struct model *md, int n_ctx, int n_snap, char *err)
{
	struct state_config c = state_shape(md, n_ctx, n_snap);

	md->states_made = 1;
	if (md->stage != NULL)
		return state_new_stages(md, n_ctx, n_snap, err);
	return state_new(md->be, &c, err);
}

/*
 * model_attach_line of a step35 model (its last stage md): an attached
 * NextN draft, its heads whole or trimmed (by trim-head or at load), or
 * the embedded blocks' heads self-trimmed.  -1: nothing attached.
 */
static int
nextn_line(const struct model *md, const struct ranks *r, int type, char *buf, size_t n)
{
	const struct model_hparams *hp = &md->hp;
	int k;

	if (md->draft_nx == 0 && r == NULL)
		return -1;
	if (md->draft_nx == 0) {
		snprintf(buf, n, "[frspec-trim] self-trimmed heads: %lld rows of the NextN blocks' "
		    "own heads, blk.%d-%d (%s)%s", (long long)r->n, hp->n_layer,
		    hp->n_layer + hp->n_mtp - 1, quant_name(type),
		    md->draft_head.data != NULL ? " and of main output.weight" : "");
		return 0;
	}
	k = snprintf(buf, n, "[mtp-draft] external NextN draft: blk.%d-%d (%d blocks), ",
	    hp->n_layer, hp->n_layer + hp->n_mtp - 1, hp->n_mtp);
	if (k < 0 || (size_t)k >= n)
		return 0;
	if (r == NULL)
		snprintf(buf + k, n - k, "full heads (%d rows)", hp->n_vocab);
	else
		snprintf(buf + k, n - k, "heads %s to %lld rows (%s, d2t map)", md->draft_self ?
		    "self-trimmed" : "trimmed", (long long)r->n, quant_name(type));
	return 0;
}

int
model_attach_line(const struct model *md, char *buf, size_t n)
{
	int type, ext;
	const struct ranks *r = model_draft_ranks(md, &type, &ext);

	if (n > 0)
		buf[0] = '\0';
	if (md->asst != NULL)
		return assist_line(md, r, type, buf, n);
	if (model_last(md)->hp.arch == MODEL_ARCH_STEP35)
		return nextn_line(model_last(md), r, type, buf, n);
	if (r == NULL)
		return -1;
	if (ext)
		snprintf(buf, n, "[mtp-draft] external draft head: blk.%d, source=output.weight, head_vocab=%lld "
		    "(trimmed, d2t map)", md->hp.n_layer, (long long)r->n);
	else
		snprintf(buf, n, "[frspec-trim] self-trimmed head: %lld rows of main output.weight "
		    "(%s)", (long long)r->n, quant_name(type));
	return 0;
}

char *
model_spec_draft(char *spec)
{
	char *plus = strrchr(spec, '+');

	if (plus == NULL || access(spec, F_OK) == 0)
		return NULL;
	*plus = '\0';
	return plus + 1;
}

void
model_options_set(struct model_options *mo, char *spec, const char *flag_draft,
    const char *env_draft, const char *ranks, const char *full_prec)
{
	const char *d = model_spec_draft(spec);

	if (d == NULL)
		d = flag_draft != NULL ? flag_draft : env_draft;
	mo->draft = d != NULL && d[0] ? d : NULL;
	mo->ranks = ranks != NULL && ranks[0] ? ranks : NULL;
	mo->full_prec = full_prec != NULL && strcmp(full_prec, "1") == 0;
}

int
model_kv_type(const char *name)
{
	if (name == NULL || strcmp(name, "f32") == 0)
		return 0;
	return strcmp(name, "f16") == 0 ? 1 : -1;
}
