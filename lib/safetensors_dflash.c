/*
 * The conversion plan of a DFlash / DFlash2 block drafter (config.json
 * architectures DFlashDraftModel or DFlash2DraftModel, model_type qwen3,
 * as z-lab publishes them) into the GGUF tensors and metadata llama.cpp's
 * converter writes for arch dflash (conversion/qwen.py DFlashModel,
 * gguf-py's tensor map, as in llama-cpp-python 0.3.36's vendor/llama.cpp).
 *
 * The names carry no "model." prefix (one is dropped when present); the
 * selector's codebooks come with or without ".weight".  The norms are
 * Qwen3's plain RMSNorm (w * x / rms: no "+1").  dflash.target_layers are
 * the HF target_layer_ids + 1, as llama.cpp writes them: it taps a layer's
 * input, HF a layer's output (hidden_states[id + 1]).  A DSpark drafter
 * (a Markov head) is refused by name.
 */
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "safetensors_impl.h"
#include "util.h"

#define DF_MAX_LAYERS 64
#define DF_MAX_TAPS 64

struct df {
	int64_t	L, H, I, nh, nkv, hd, V, ctx, block, mask, ck, cg, R, topk, window;
	int64_t	taps[DF_MAX_TAPS], n_tap;
	int	v2;		/* DFlash2: the convs and the selector */
	int	causal;		/* -1: not in config.json */
	int	has_hd;
	int	swa[DF_MAX_LAYERS];
	double	eps, theta, mult, cap, escale;
};

/* symbolic dims of the rules */
enum { F_H = 1, F_I, F_Q, F_KV, F_TH, F_HD, F_CP, F_R, F_V };

struct df_rule {
	const char *hf, *gguf;	/* suffixes after "layers.N." (layer) or whole names */
	int	ne0, ne1;	/* F_*; ne1 0: a vector */
	int	v2;		/* 1: DFlash2 only */
};

static const struct df_rule df_layer[] = {
	{ "input_layernorm.weight", "attn_norm.weight", F_H, 0, 0 },
	{ "post_attention_layernorm.weight", "ffn_norm.weight", F_H, 0, 0 },
	{ "self_attn.q_proj.weight", "attn_q.weight", F_H, F_Q, 0 },
	{ "self_attn.k_proj.weight", "attn_k.weight", F_H, F_KV, 0 },
	{ "self_attn.v_proj.weight", "attn_v.weight", F_H, F_KV, 0 },
	{ "self_attn.o_proj.weight", "attn_output.weight", F_Q, F_H, 0 },
	{ "self_attn.q_norm.weight", "attn_q_norm.weight", F_HD, 0, 0 },
	{ "self_attn.k_norm.weight", "attn_k_norm.weight", F_HD, 0, 0 },
	{ "mlp.gate_proj.weight", "ffn_gate.weight", F_H, F_I, 0 },
	{ "mlp.up_proj.weight", "ffn_up.weight", F_H, F_I, 0 },
	{ "mlp.down_proj.weight", "ffn_down.weight", F_I, F_H, 0 },
	{ "attention_conv.kernel_projection.weight", "attn_conv_proj.weight", F_H, F_CP, 1 },
	{ "mlp_conv.kernel_projection.weight", "ffn_conv_proj.weight", F_H, F_CP, 1 },
	{ "attention_conv.base_kernel", "attn_conv_base", 0, 0, 1 },	/* 3-D, below */
	{ "mlp_conv.base_kernel", "ffn_conv_base", 0, 0, 1 },
};

static const struct df_rule df_global[] = {
	{ "fc.weight", "fc.weight", F_TH, F_H, 0 },
	{ "hidden_norm.weight", "enc.output_norm.weight", F_H, 0, 0 },
	{ "norm.weight", "output_norm.weight", F_H, 0, 0 },
	{ "candidate_selector.hidden_projection.weight", "selector_hidden.weight", F_H, F_R, 1 },
	{ "candidate_selector.predecessor_codebook", "selector_predecessor.weight", F_R, F_V, 1 },
	{ "candidate_selector.predecessor_codebook.weight", "selector_predecessor.weight", F_R, F_V, 1 },
	{ "candidate_selector.successor_codebook", "selector_successor.weight", F_R, F_V, 1 },
	{ "candidate_selector.successor_codebook.weight", "selector_successor.weight", F_R, F_V, 1 },
};

static int64_t
df_dim(const struct df *d, int k)
{
	switch (k) {
	case F_H: return d->H;
	case F_I: return d->I;
	case F_Q: return d->nh * d->hd;
	case F_KV: return d->nkv * d->hd;
	case F_TH: return d->n_tap * d->H;
	case F_HD: return d->hd;
	case F_CP: return 2 * d->ck * (d->H / d->cg);
	case F_R: return d->R;
	case F_V: return d->V;
	}
	return 1;
}

/* config.json's value of key, from dflash_config first, then the top level (the reference's _draft_value). */
static const struct json *
df_value(struct safetensors *st, const char *key)
{
	const struct json *c = safetensors_hparam(st, "dflash_config"), *v;

	v = c != NULL && c->type == JSON_OBJECT ? json_get(c, key) : NULL;
	return v != NULL && v->type != JSON_NULL ? v : safetensors_hparam(st, key);
}

static int
df_int(struct safetensors *st, const char *key, int64_t def, int64_t lo, int64_t *out)
{
	const struct json *v = df_value(st, key);

	*out = def;
	if (v == NULL || v->type == JSON_NULL) {
		if (def < lo)
			return util_err(st->err, "config.json: no '%s'", key);
		return 0;
	}
	if (v->type != JSON_NUMBER || !v->is_int || v->i < lo || v->i > (int64_t)1 << 40)
		return util_err(st->err, "config.json: bad '%s'", key);
	*out = v->i;
	return 0;
}

static int
df_num(struct safetensors *st, const char *key, double def, double *out)
{
	const struct json *v = df_value(st, key), *rp = safetensors_hparam(st, "rope_parameters");

	if (strcmp(key, "rope_theta") == 0 && rp != NULL && rp->type == JSON_OBJECT &&
	    json_get(rp, key) != NULL)
		v = json_get(rp, key);
	*out = def;
	if (v == NULL || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_NUMBER)
		return util_err(st->err, "config.json: '%s' is not a number", key);
	*out = v->num;
	return 0;
}

/* 1 when config.json's architectures name a, 0 when not. */
static int
df_arch_is(const struct safetensors *st, const char *a)
{
	const struct json *ar = safetensors_hparam((struct safetensors *)st, "architectures");

	for (size_t i = 0; ar != NULL && ar->type == JSON_ARRAY && i < ar->n; i++)
		if (ar->items[i].type == JSON_STRING && strcmp(ar->items[i].str, a) == 0)
			return 1;
	return 0;
}

int
st_is_dflash(const struct safetensors *st)
{
	static const char *const names[] = { "DFlashDraftModel", "DFlash2DraftModel",
		"Qwen3DSparkModel", "DSparkDraftModel", "DSparkSpeculator",
		"Lfm2DSparkDraftModel", "LingDSparkModel" };

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (df_arch_is(st, names[i]))
			return 1;
	return 0;
}

static int
df_layers(struct safetensors *st, struct df *d)
{
	const struct json *lt = safetensors_hparam(st, "layer_types"), *c = safetensors_hparam(st,
	    "is_causal"), *u = safetensors_hparam(st, "use_sliding_window");
	int use = u != NULL && u->type == JSON_TRUE;

	if (lt != NULL && lt->type != JSON_NULL && (lt->type != JSON_ARRAY || (int64_t)lt->n != d->L))
		return util_err(st->err, "config.json: 'layer_types' is not a list of %lld",
		    (long long)d->L);
	for (int64_t i = 0; lt != NULL && lt->type == JSON_ARRAY && i < d->L; i++) {
		const char *t = lt->items[i].type == JSON_STRING ? lt->items[i].str : "";

		if (strcmp(t, "sliding_attention") != 0 && strcmp(t, "full_attention") != 0)
			return util_err(st->err, "config.json: layer_types[%lld] '%s'", (long long)i, t);
		d->swa[i] = t[0] == 's';
	}
	d->causal = c == NULL || c->type == JSON_NULL ? -1 : c->type == JSON_TRUE;
	if (c != NULL && c->type != JSON_NULL && c->type != JSON_TRUE && c->type != JSON_FALSE)
		return util_err(st->err, "config.json: 'is_causal' is not true or false");
	if (df_int(st, "sliding_window", 0, 0, &d->window) != 0)
		return -1;
	if (!use || d->window == 0)	/* llama.cpp's converter writes no window then */
		memset(d->swa, 0, sizeof d->swa), d->window = 0;
	return 0;
}

static int
df_taps(struct safetensors *st, struct df *d)
{
	const struct json *t = df_value(st, "target_layer_ids");

	if (t == NULL || t->type != JSON_ARRAY || t->n < 1 || t->n > DF_MAX_TAPS)
		return util_err(st->err, "config.json: no 'target_layer_ids' list (1..%d ids)",
		    DF_MAX_TAPS);
	for (size_t i = 0; i < t->n; i++) {
		if (t->items[i].type != JSON_NUMBER || !t->items[i].is_int || t->items[i].i < 0 ||
		    t->items[i].i > 1 << 20)
			return util_err(st->err, "config.json: target_layer_ids[%zu] is not a layer",
			    i);
		d->taps[i] = t->items[i].i;
	}
	d->n_tap = t->n;
	return 0;
}

static int
df_hparams(struct safetensors *st, struct df *d)
{
	const struct json *pt = safetensors_hparam(st, "projector_type");

	if (!df_arch_is(st, "DFlashDraftModel") && !df_arch_is(st, "DFlash2DraftModel"))
		return util_err(st->err, "config.json: a DSpark drafter (a Markov head over "
		    "the block): not supported (DFlash and DFlash2 drafters are)");
	if (pt != NULL && pt->type == JSON_STRING && strcmp(pt->str, "dspark") == 0)
		return util_err(st->err, "config.json: projector_type 'dspark': a DSpark "
		    "drafter is not supported (DFlash and DFlash2 drafters are)");
	d->v2 = df_arch_is(st, "DFlash2DraftModel");
	if (df_int(st, "num_hidden_layers", -1, 1, &d->L) != 0 ||
	    df_int(st, "hidden_size", -1, 1, &d->H) != 0 ||
	    df_int(st, "intermediate_size", -1, 1, &d->I) != 0 ||
	    df_int(st, "num_attention_heads", -1, 1, &d->nh) != 0 ||
	    df_int(st, "num_key_value_heads", d->nh, 1, &d->nkv) != 0 ||
	    df_int(st, "vocab_size", -1, 1, &d->V) != 0 ||
	    df_int(st, "max_position_embeddings", 0, 0, &d->ctx) != 0 ||
	    df_int(st, "block_size", 16, 2, &d->block) != 0 ||
	    df_int(st, "mask_token_id", -1, 0, &d->mask) != 0 ||
	    df_num(st, "rms_norm_eps", 1e-6, &d->eps) != 0 ||
	    df_num(st, "rope_theta", 10000.0, &d->theta) != 0 ||
	    df_num(st, "output_multiplier", 0, &d->mult) != 0 ||
	    df_num(st, "final_logit_softcapping", 0, &d->cap) != 0 ||
	    df_num(st, "input_embedding_scale", 0, &d->escale) != 0 ||
	    df_taps(st, d) != 0)
		return -1;
	if (d->L > DF_MAX_LAYERS)
		return util_err(st->err, "config.json: %lld layers is too many", (long long)d->L);
	if (d->nh % d->nkv != 0 || d->mask >= d->V)
		return util_err(st->err, "config.json: %lld heads over %lld kv heads, mask token "
		    "%lld of %lld", (long long)d->nh, (long long)d->nkv, (long long)d->mask,
		    (long long)d->V);
	d->has_hd = df_int(st, "head_dim", d->H / d->nh, 1, &d->hd) == 0 &&
	    safetensors_hparam(st, "head_dim") != NULL;
	if (d->v2 && (df_int(st, "conv_kernel_size", -1, 1, &d->ck) != 0 ||
	    df_int(st, "conv_group_size", -1, 1, &d->cg) != 0 ||
	    df_int(st, "selector_rank", -1, 1, &d->R) != 0 ||
	    df_int(st, "selector_top_k", -1, 1, &d->topk) != 0))
		return -1;
	if (d->v2 && d->H % d->cg != 0)
		return util_err(st->err, "config.json: hidden size %lld is not groups of "
		    "conv_group_size %lld", (long long)d->H, (long long)d->cg);
	return df_layers(st, d);
}

/* The planned tensor of rule r for source t (GGUF name gname). */
static int
df_out(struct safetensors *st, const struct df *d, const struct df_rule *r,
    const struct safetensors_tensor *t, const char *gname)
{
	struct safetensors_out *o;
	int conv = r->ne0 == 0;
	int64_t want[3] = { conv ? d->H : df_dim(d, r->ne0), conv ? d->ck : r->ne1 ? df_dim(d,
	    r->ne1) : 1, conv ? 2 : 1 };
	int nd = conv ? 3 : r->ne1 ? 2 : 1;

	if (t->n_dims != nd)
		return util_err(st->err, "tensor '%s': %d dimensions, want %d", t->name, t->n_dims,
		    nd);
	for (int i = 0; i < nd; i++)
		if (t->shape[nd - 1 - i] != want[i])
			return util_err(st->err, "tensor '%s': dimension %d is %lld, config.json "
			    "implies %lld", t->name, nd - 1 - i, (long long)t->shape[nd - 1 - i],
			    (long long)want[i]);
	if (t->dtype != SAFETENSORS_F32 && t->dtype != SAFETENSORS_F16 &&
	    t->dtype != SAFETENSORS_BF16)
		return util_err(st->err, "tensor '%s': dtype %s (F32, F16 or BF16 only)", t->name,
		    safetensors_dtype_name(t->dtype));
	for (size_t i = 0; i < safetensors_out_count(st); i++)
		if (strcmp(safetensors_out(st, i)->name, gname) == 0)
			return util_err(st->err, "tensor '%s': '%s' given twice", t->name, gname);
	if ((o = st_new_out(st, gname)) == NULL)
		return util_err(st->err, "out of memory");
	o->n_dims = nd;
	o->ne[0] = want[0], o->ne[1] = want[1], o->ne[2] = want[2], o->ne[3] = 1;
	o->n_rows = want[1] * want[2];
	o->src = t;
	o->src_dtype = t->dtype;
	o->verbatim = 1;
	return 0;
}

static int
df_map(struct safetensors *st, const struct df *d, const struct safetensors_tensor *t)
{
	const char *n = strncmp(t->name, "model.", 6) == 0 ? t->name + 6 : t->name;
	const struct df_rule *r = NULL, *tab = df_global;
	size_t nr = sizeof df_global / sizeof df_global[0];
	char gname[64], *end;
	long long il = -1;

	if (strstr(n, "rotary_emb.inv_freq") != NULL)
		return 0;
	if (strncmp(n, "layers.", 7) == 0) {
		il = strtoll(n + 7, &end, 10);
		if (end == n + 7 || *end != '.' || il < 0 || il >= d->L)
			return util_err(st->err, "tensor '%s': layer number out of range", t->name);
		n = end + 1, tab = df_layer, nr = sizeof df_layer / sizeof df_layer[0];
	}
	for (size_t i = 0; i < nr; i++)
		if (strcmp(tab[i].hf, n) == 0 && (!tab[i].v2 || d->v2))
			r = &tab[i];
	if (r == NULL)
		return util_err(st->err, "tensor '%s' has no GGUF name for a %s drafter%s", t->name,
		    d->v2 ? "DFlash2" : "DFlash", strstr(n, "markov") ? " (a DSpark Markov head "
		    "is not supported)" : strstr(n, "embed_tokens") || strstr(n, "lm_head") ?
		    " (one with its own embedding or head is not supported)" : "");
	if (il >= 0)
		snprintf(gname, sizeof gname, "blk.%lld.%s", il, r->gguf);
	else
		snprintf(gname, sizeof gname, "%s", r->gguf);
	return df_out(st, d, r, t, gname);
}

static int
df_complete(struct safetensors *st, const struct df *d)
{
	char name[96];

	for (int64_t il = -1; il < d->L; il++) {
		const struct df_rule *tab = il < 0 ? df_global : df_layer;
		size_t nr = il < 0 ? sizeof df_global / sizeof df_global[0] :
		    sizeof df_layer / sizeof df_layer[0];
		size_t i, j;

		for (i = 0; i < nr; i++) {
			if (tab[i].v2 && !d->v2)
				continue;
			if (il < 0)
				snprintf(name, sizeof name, "%s", tab[i].gguf);
			else
				snprintf(name, sizeof name, "blk.%lld.%s", (long long)il, tab[i].gguf);
			for (j = 0; j < safetensors_out_count(st); j++)
				if (strcmp(safetensors_out(st, j)->name, name) == 0)
					break;
			if (j == safetensors_out_count(st))
				return util_err(st->err, "no tensor for '%s' in the checkpoint", name);
		}
	}
	return 0;
}

static int
df_kv_arr(struct safetensors *st, const char *key, int type, int64_t n, const void *v)
{
	struct safetensors_kv *kv;
	char k[128];
	void *p;
	size_t es = type == SAFETENSORS_KV_BOOL ? 1 : 4;

	snprintf(k, sizeof k, "%s.%s", st->arch, key);
	if ((kv = st_kv_add(st, k, SAFETENSORS_KV_ARR)) == NULL ||
	    (p = st_keep(st, malloc((size_t)n * es))) == NULL)
		return util_err(st->err, "out of memory");
	memcpy(p, v, (size_t)n * es);
	kv->arr_type = type;
	kv->n = (uint64_t)n;
	if (type == SAFETENSORS_KV_BOOL)
		kv->u8 = p;
	else
		kv->i32 = p;
	return 0;
}

static int
df_kv_bool(struct safetensors *st, const char *key, int v)
{
	struct safetensors_kv *kv;
	char k[128];

	snprintf(k, sizeof k, "%s.%s", st->arch, key);
	if ((kv = st_kv_add(st, k, SAFETENSORS_KV_BOOL)) == NULL)
		return util_err(st->err, "out of memory");
	kv->v.b = v;
	return 0;
}

/* The metadata llama.cpp's DFlashModel writes, in its order (the tokenizer's but the mask id left out). */
static int
df_kv(struct safetensors *st, const struct df *d)
{
	const char *base = st->dir ? strrchr(st->dir, '/') : NULL;
	const char *name = base ? base + 1 : st->dir ? st->dir : "model";
	int32_t taps[DF_MAX_TAPS];
	uint8_t swa[DF_MAX_LAYERS];
	struct safetensors_kv *kv;

	for (int64_t i = 0; i < d->n_tap; i++)
		taps[i] = (int32_t)(d->taps[i] + 1);	/* llama.cpp's: the tapped layer's input */
	for (int64_t i = 0; i < d->L; i++)
		swa[i] = (uint8_t)d->swa[i];
	if (st_kv_str(st, "general.architecture", st->arch, strlen(st->arch)) != 0 ||
	    st_kv_str(st, "general.name", name, strlen(name)) != 0 ||
	    st_kv_u32(st, "block_count", d->L) != 0 || st_kv_u32(st, "context_length", d->ctx) != 0 ||
	    st_kv_u32(st, "embedding_length", d->H) != 0 ||
	    st_kv_u32(st, "feed_forward_length", d->I) != 0 ||
	    st_kv_u32(st, "attention.head_count", d->nh) != 0 ||
	    st_kv_u32(st, "attention.head_count_kv", d->nkv) != 0 ||
	    (d->causal >= 0 && df_kv_bool(st, "attention.causal", d->causal) != 0) ||
	    st_kv_f32(st, "rope.freq_base", d->theta) != 0 ||
	    st_kv_f32(st, "attention.layer_norm_rms_epsilon", d->eps) != 0 ||
	    (d->has_hd && (st_kv_u32(st, "attention.key_length", d->hd) != 0 ||
	    st_kv_u32(st, "attention.value_length", d->hd) != 0)) ||
	    st_kv_u32(st, "block_size", d->block) != 0 ||
	    (d->v2 && (st_kv_u32(st, "conv_kernel_size", d->ck) != 0 ||
	    st_kv_u32(st, "conv_group_size", d->cg) != 0 ||
	    st_kv_u32(st, "selector_rank", d->R) != 0 ||
	    st_kv_u32(st, "selector_top_k", d->topk) != 0)) ||
	    (d->mult != 0 && st_kv_f32(st, "logit_scale", d->mult) != 0) ||
	    (d->cap > 0 && st_kv_f32(st, "final_logit_softcapping", d->cap) != 0) ||
	    (d->escale != 0 && st_kv_f32(st, "embedding_scale", d->escale) != 0) ||
	    df_kv_arr(st, "target_layers", SAFETENSORS_KV_I32, d->n_tap, taps) != 0 ||
	    (d->window > 0 && (st_kv_u32(st, "attention.sliding_window", d->window) != 0 ||
	    df_kv_arr(st, "attention.sliding_window_pattern", SAFETENSORS_KV_BOOL, d->L, swa) != 0)))
		return -1;
	if ((kv = st_kv_add(st, "tokenizer.ggml.mask_token_id", SAFETENSORS_KV_U32)) == NULL)
		return util_err(st->err, "out of memory");
	kv->v.u32 = (uint32_t)d->mask;
	return 0;
}

int
st_plan_dflash(struct safetensors *st)
{
	struct df *d = calloc(1, sizeof *d);
	int rc = -1;

	if (d == NULL)
		return util_err(st->err, "out of memory");
	if (df_hparams(st, d) != 0)
		goto out;
	snprintf(st->arch, sizeof st->arch, "dflash");
	for (size_t i = 0; i < st->nbyname; i++)
		if (df_map(st, d, &st->t[st->byname[i].i]) != 0)
			goto out;
	st_sort_out(st);
	rc = df_complete(st, d) != 0 || df_kv(st, d) != 0 ? -1 : 0;
out:
	free(d);
	return rc;
}
