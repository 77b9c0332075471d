/*
 * The conversion plan of a Gemma-4 text model (config.json model_type
 * gemma4_text, or gemma4 with text_config: Gemma4ForCausalLM's model.*
 * names or Gemma4ForConditionalGeneration's model.language_model.*) into
 * the GGUF tensors and metadata llama.cpp's converter writes for arch
 * gemma4 (conversion/gemma.py Gemma4Model, gguf-py's tensor map, as in
 * llama-cpp-python 0.3.36's vendor/llama.cpp): per-layer head sizes and
 * K/V heads from per_layer_config, the global layers' proportional RoPE
 * as a rope_freqs.weight of 1.0 (rotated) and 1e30 (not) factors, the
 * router's per_expert_scale as ffn_down_exps.scale, the fused experts
 * as ffn_gate_up_exps and ffn_down_exps.  Vision and audio towers are
 * skipped.
 */
#include "safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "safetensors_impl.h"
#include "util.h"

#define G4_MAX_LAYERS 512

struct g4 {
	int64_t	L, H, I, nh, nkv, hd, V, ctx, P, shared, E, K, Ie, swa_w;
	int64_t	hd_full, nkv_full;	/* the global layers' */
	int	dwide, moe, kv_arr, rot_full;
	int	asst;		/* gemma4_assistant: every layer reads the target's K/V */
	int64_t	Hb;		/* its backbone_hidden_size (the target's) */
	double	eps, cap, theta, theta_swa;
	int	swa[G4_MAX_LAYERS];
	int64_t	lhd[G4_MAX_LAYERS], lkv[G4_MAX_LAYERS], lff[G4_MAX_LAYERS];
};

static int
g4_int(struct safetensors *st, const char *key, int64_t def, int64_t lo, int64_t *out)
{
	const struct json *v = safetensors_hparam(st, key);

	*out = def;
	if (v == NULL || v->type == JSON_NULL)
		return 0;
	if (v->type == JSON_TRUE || v->type == JSON_FALSE) {
		*out = v->type == JSON_TRUE;
		return 0;
	}
	if (v->type != JSON_NUMBER || !v->is_int || v->i < lo || v->i > (int64_t)1 << 40)
		return util_err(st->err, "config.json: bad '%s'", key);
	*out = v->i;
	return 0;
}

static int
g4_num(const struct json *o, const char *key, double def, double *out, char *err)
{
	const struct json *v = o != NULL && o->type == JSON_OBJECT ? json_get(o, key) : NULL;

	*out = def;
	if (v == NULL || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_NUMBER)
		return util_err(err, "config.json: '%s' is not a number", key);
	*out = v->num;
	return 0;
}

/* rope_parameters: each layer type's theta, the global one's rotated pairs. */
static int
g4_rope(struct safetensors *st, struct g4 *g)
{
	const struct json *rp = safetensors_hparam(st, "rope_parameters"), *f, *s;
	double prf;
	const char *t;

	f = rp != NULL && rp->type == JSON_OBJECT ? json_get(rp, "full_attention") : NULL;
	s = rp != NULL && rp->type == JSON_OBJECT ? json_get(rp, "sliding_attention") : NULL;
	if (g4_num(f, "rope_theta", 1e6, &g->theta, st->err) != 0 ||
	    g4_num(f, "partial_rotary_factor", f == NULL ? 0.25 : 1.0, &prf, st->err) != 0 ||
	    g4_num(s, "rope_theta", 10000.0, &g->theta_swa, st->err) != 0)
		return -1;
	t = f != NULL && f->type == JSON_OBJECT ? json_get_str(f, "rope_type") : NULL;
	if (t != NULL && strcmp(t, "proportional") != 0 && strcmp(t, "default") != 0)
		return util_err(st->err, "config.json: full_attention rope_type '%s' is not "
		    "supported (proportional, default)", t);
	if (t != NULL && strcmp(t, "default") == 0)
		prf = 1.0;
	t = s != NULL && s->type == JSON_OBJECT ? json_get_str(s, "rope_type") : NULL;
	if (t != NULL && strcmp(t, "default") != 0)
		return util_err(st->err, "config.json: sliding_attention rope_type '%s' is not "
		    "supported (default)", t);
	g->rot_full = (int)(prf * (double)g->hd_full / 2);	/* pairs, as transformers floors */
	return 0;
}

/* Layer il's per_layer_config entry (string keys), or NULL. */
static const struct json *
g4_layer_conf(struct safetensors *st, int64_t il)
{
	const struct json *plc = safetensors_hparam(st, "per_layer_config");
	char k[24];

	if (plc == NULL || plc->type != JSON_OBJECT)
		return NULL;
	snprintf(k, sizeof k, "%lld", (long long)il);
	return json_get(plc, k);
}

/* layer_types, and each layer's head size, K/V heads and MLP width. */
static int
g4_layers(struct safetensors *st, struct g4 *g)
{
	const struct json *lt = safetensors_hparam(st, "layer_types");
	int64_t ghd, gkv;

	if (g4_int(st, "global_head_dim", g->hd, 1, &ghd) != 0 ||
	    g4_int(st, "num_global_key_value_heads", 0, 1, &gkv) != 0)
		return -1;
	if (lt == NULL || lt->type != JSON_ARRAY || (int64_t)lt->n != g->L)
		return util_err(st->err, "config.json: 'layer_types' is not an array of %lld",
		    (long long)g->L);
	g->hd_full = 0;
	for (int64_t i = 0; i < g->L; i++) {
		const char *s = lt->items[i].type == JSON_STRING ? lt->items[i].str : "";
		const struct json *c = g4_layer_conf(st, i), *v;

		if (strcmp(s, "sliding_attention") != 0 && strcmp(s, "full_attention") != 0)
			return util_err(st->err, "config.json: layer_types[%lld] '%s' is unknown",
			    (long long)i, s);
		g->swa[i] = s[0] == 's';
		g->lhd[i] = g->swa[i] ? g->hd : ghd;
		g->lkv[i] = g->nkv;
		if (!g->swa[i] && gkv > 0 && safetensors_hparam(st, "per_layer_config") == NULL)
			g->lkv[i] = gkv, g->kv_arr = 1;
		if (c != NULL && c->type == JSON_OBJECT) {
			if ((v = json_get(c, "head_dim")) != NULL && v->type == JSON_NUMBER && v->is_int)
				g->lhd[i] = v->i;
			if ((v = json_get(c, "num_key_value_heads")) != NULL && v->type == JSON_NUMBER &&
			    v->is_int)
				g->lkv[i] = v->i, g->kv_arr |= !g->swa[i];
		}
		g->lff[i] = g->I * (g->dwide && i >= g->L - g->shared && g->shared > 0 ? 2 : 1);
		if (g->lhd[i] < 2 || g->lhd[i] % 2 || g->lkv[i] < 1 || g->nh % g->lkv[i] != 0 ||
		    (!g->swa[i] && g->hd_full && g->lhd[i] != g->hd_full))
			return util_err(st->err, "config.json: layer %lld: head size %lld, %lld K/V "
			    "heads", (long long)i, (long long)g->lhd[i], (long long)g->lkv[i]);
		if (!g->swa[i])
			g->hd_full = g->lhd[i], g->nkv_full = g->lkv[i];
	}
	if (g->hd_full == 0)
		return util_err(st->err, "config.json: no full_attention layer");
	return 0;
}

/*
 * gemma4_assistant (Gemma4AssistantConfig): every layer shares K/V (a
 * falsy num_kv_shared_layers becomes num_hidden_layers), no per-layer
 * inputs, no MoE, no double-wide MLP; backbone_hidden_size from the top.
 */
static int
asst_shape(struct safetensors *st, struct g4 *g)
{
	const struct json *v = json_get(st->config, "backbone_hidden_size");

	if (!g->asst)
		return 0;
	g->Hb = v == NULL ? 1536 : v->type == JSON_NUMBER && v->is_int && v->i > 0 ? v->i : -1;
	if (g->Hb < 0)
		return util_err(st->err, "config.json: bad 'backbone_hidden_size'");
	if (g->shared == 0)
		g->shared = g->L;
	if (g->shared != g->L || g->P != 0 || g->moe || g->dwide)
		return util_err(st->err, "config.json: a gemma4_assistant shares every layer's K/V "
		    "and has no per-layer inputs, MoE or double-wide MLP");
	return 0;
}

static int
g4_hparams(struct safetensors *st, struct g4 *g)
{
	const struct json *cap = safetensors_hparam(st, "final_logit_softcapping");
	const char *mt;
	int64_t dw, moe;

	memset(g, 0, sizeof *g);
	g->asst = st->config != NULL && (mt = json_get_str(st->config, "model_type")) != NULL &&
	    strcmp(mt, "gemma4_assistant") == 0;
	if (g4_int(st, "num_hidden_layers", 0, 1, &g->L) || g4_int(st, "hidden_size", 0, 1, &g->H) ||
	    g4_int(st, "intermediate_size", 0, 1, &g->I) ||
	    g4_int(st, "num_attention_heads", 0, 1, &g->nh) ||
	    g4_int(st, "num_key_value_heads", g->nh, 1, &g->nkv) ||
	    g4_int(st, "head_dim", 256, 2, &g->hd) || g4_int(st, "vocab_size", 0, 1, &g->V) ||
	    g4_int(st, "max_position_embeddings", 131072, 0, &g->ctx) ||
	    g4_int(st, "hidden_size_per_layer_input", 0, 0, &g->P) ||
	    g4_int(st, "num_kv_shared_layers", 0, 0, &g->shared) ||
	    g4_int(st, "sliding_window", 512, 1, &g->swa_w) ||
	    g4_int(st, "use_double_wide_mlp", 0, 0, &dw) ||
	    g4_int(st, "enable_moe_block", 0, 0, &moe) ||
	    g4_num(st->config, "rms_norm_eps", 1e-6, &g->eps, st->err) ||
	    g4_num(json_get(st->config, "text_config"), "rms_norm_eps", g->eps, &g->eps, st->err))
		return -1;
	if (asst_shape(st, g) != 0)
		return -1;
	if (g->L < 1 || g->L > G4_MAX_LAYERS || g->H < 1 || g->I < 1 || g->nh < 1 || g->V < 1 ||
	    g->nh % g->nkv != 0 || g->shared > g->L || (g->shared == g->L && !g->asst))
		return util_err(st->err, "config.json: bad gemma4 shape");
	g->dwide = dw != 0, g->moe = moe != 0;
	g->cap = cap != NULL && cap->type == JSON_NUMBER ? cap->num : 0;
	if (g->moe && (g4_int(st, "num_experts", 0, 1, &g->E) || g4_int(st, "top_k_experts", 0, 1,
	    &g->K) || g4_int(st, "moe_intermediate_size", 0, 1, &g->Ie) || g->E < 1 ||
	    g->K < 1 || g->K > g->E || g->Ie < 1))
		return g->moe && st->err[0] ? -1 : util_err(st->err, "config.json: bad experts");
	return g4_layers(st, g) != 0 || g4_rope(st, g) != 0 ? -1 : 0;
}

/* ---- tensors ---- */

/* symbolic sizes of the rules */
enum { Z_NONE, Z_H, Z_V, Z_LP, Z_P, Z_ONE, Z_Q, Z_KV, Z_HD, Z_FF, Z_E, Z_2IE, Z_IE, Z_HB, Z_2HB };

static int64_t
g4_dim(const struct g4 *g, int64_t il, int z)
{
	switch (z) {
	case Z_H: return g->H;
	case Z_V: return g->V;
	case Z_LP: return g->L * g->P;
	case Z_P: return g->P;
	case Z_ONE: return 1;
	case Z_Q: return g->nh * g->lhd[il];
	case Z_KV: return g->lkv[il] * g->lhd[il];
	case Z_HD: return g->lhd[il];
	case Z_FF: return g->lff[il];
	case Z_E: return g->E;
	case Z_2IE: return 2 * g->Ie;
	case Z_IE: return g->Ie;
	case Z_HB: return g->Hb;
	case Z_2HB: return 2 * g->Hb;
	}
	return 1;
}

struct g4_rule {
	const char *hf, *gguf;
	int	ne[3];		/* Z_* in GGUF order */
	int	kv;		/* 1: K/V side of the attention (absent on shared layers) */
};

static const struct g4_rule g4_global[] = {
	{ "model.embed_tokens.weight", "token_embd.weight", { Z_H, Z_V }, 0 },
	{ "model.norm.weight", "output_norm.weight", { Z_H }, 0 },
	{ "lm_head.weight", "output.weight", { Z_H, Z_V }, 0 },
	{ "model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight", { Z_LP, Z_V }, 0 },
	{ "model.per_layer_model_projection.weight", "per_layer_model_proj.weight", { Z_H, Z_LP }, 0 },
	{ "model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight", { Z_P }, 0 },
	/* gemma4_assistant */
	{ "pre_projection.weight", "nextn.pre_projection.weight", { Z_2HB, Z_H }, 0 },
	{ "post_projection.weight", "nextn.post_projection.weight", { Z_H, Z_HB }, 0 },
};

static const struct g4_rule g4_layer[] = {
	{ "input_layernorm.weight", "attn_norm.weight", { Z_H }, 0 },
	{ "post_attention_layernorm.weight", "post_attention_norm.weight", { Z_H }, 0 },
	{ "pre_feedforward_layernorm.weight", "ffn_norm.weight", { Z_H }, 0 },
	{ "post_feedforward_layernorm.weight", "post_ffw_norm.weight", { Z_H }, 0 },
	{ "pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight", { Z_H }, 0 },
	{ "post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight", { Z_H }, 0 },
	{ "post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight", { Z_H }, 0 },
	{ "layer_scalar", "layer_output_scale.weight", { Z_ONE }, 0 },
	{ "self_attn.q_proj.weight", "attn_q.weight", { Z_H, Z_Q }, 0 },
	{ "self_attn.k_proj.weight", "attn_k.weight", { Z_H, Z_KV }, 1 },
	{ "self_attn.v_proj.weight", "attn_v.weight", { Z_H, Z_KV }, 1 },
	{ "self_attn.o_proj.weight", "attn_output.weight", { Z_Q, Z_H }, 0 },
	{ "self_attn.q_norm.weight", "attn_q_norm.weight", { Z_HD }, 0 },
	{ "self_attn.k_norm.weight", "attn_k_norm.weight", { Z_HD }, 1 },
	{ "mlp.gate_proj.weight", "ffn_gate.weight", { Z_H, Z_FF }, 0 },
	{ "mlp.up_proj.weight", "ffn_up.weight", { Z_H, Z_FF }, 0 },
	{ "mlp.down_proj.weight", "ffn_down.weight", { Z_FF, Z_H }, 0 },
	{ "router.proj.weight", "ffn_gate_inp.weight", { Z_H, Z_E }, 0 },
	{ "router.scale", "ffn_gate_inp.scale", { Z_H }, 0 },
	{ "router.per_expert_scale", "ffn_down_exps.scale", { Z_E }, 0 },
	{ "experts.gate_up_proj", "ffn_gate_up_exps.weight", { Z_H, Z_2IE, Z_E }, 0 },
	{ "experts.down_proj", "ffn_down_exps.weight", { Z_IE, Z_H, Z_E }, 0 },
	{ "per_layer_input_gate.weight", "inp_gate.weight", { Z_H, Z_P }, 0 },
	{ "per_layer_projection.weight", "proj.weight", { Z_P, Z_H }, 0 },
	{ "post_per_layer_input_norm.weight", "post_norm.weight", { Z_H }, 0 },
};

/* A planned tensor of source t (values as they are) named name, its GGUF shape checked. */
static int
g4_out(struct safetensors *st, const struct g4 *g, const struct safetensors_tensor *t,
    const struct g4_rule *r, int64_t il, const char *name)
{
	struct safetensors_out *o;
	int64_t want[3];
	int n = 0;

	for (int d = 0; d < 3; d++)
		if (r->ne[d] != Z_NONE)
			want[n++] = g4_dim(g, il, r->ne[d]);
	if (t->n_dims != n)
		goto shape;
	for (int d = 0; d < n; d++)
		if (t->shape[n - 1 - d] != want[d])
			goto shape;
	if (t->dtype == SAFETENSORS_F8_E4M3 || t->dtype == SAFETENSORS_F8_E5M2)
		return util_err(st->err, "tensor '%s': FP8 gemma4 weights are not supported", t->name);
	if ((o = st_new_out(st, name)) == NULL)
		return util_err(st->err, "out of memory");
	o->n_dims = n;
	o->ne[0] = want[0], o->ne[1] = n > 1 ? want[1] : 1, o->ne[2] = n > 2 ? want[2] : 1;
	o->ne[3] = 1;
	o->n_rows = o->ne[1] * o->ne[2];
	o->src = t;
	o->src_dtype = t->dtype;
	o->verbatim = 1;
	return 0;
shape:
	return util_err(st->err, "tensor '%s': not the shape config.json implies for '%s'",
	    t->name, name);
}

static const struct g4_rule *
g4_find(const struct g4_rule *r, size_t n, const char *hf)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(r[i].hf, hf) == 0)
			return &r[i];
	return NULL;
}

static int
g4_map(struct safetensors *st, const struct g4 *g, const struct safetensors_tensor *t)
{
	static const char *const skip[] = { "model.vision_tower.", "model.audio_tower.",
		"model.embed_vision.", "model.embed_audio.", "vision_tower.", "audio_tower." };
	const struct g4_rule *r;
	const char *hf = t->name;
	char norm[512], name[96], *end;
	long long il;

	for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
		if (strncmp(hf, skip[i], strlen(skip[i])) == 0)
			return 0;
	if (g->asst && strncmp(hf, "masked_embedding.", 17) == 0)
		return 0;	/* the centroid head: llama.cpp's converter drops it too */

	if (strncmp(hf, "model.language_model.", 21) == 0)
		snprintf(norm, sizeof norm, "model.%s", hf + 21);
	else
		snprintf(norm, sizeof norm, "%s", hf);
	if (strncmp(norm, "model.layers.", 13) != 0) {
		if ((r = g4_find(g4_global, sizeof g4_global / sizeof g4_global[0], norm)) == NULL ||
		    (!g->asst && strncmp(r->gguf, "nextn.", 6) == 0))
			return util_err(st->err, "tensor '%s' has no GGUF name for %s", hf, st->arch);
		return g4_out(st, g, t, r, 0, r->gguf);
	}
	il = strtoll(norm + 13, &end, 10);
	if (end == norm + 13 || *end != '.' || il < 0 || il >= g->L)
		return util_err(st->err, "tensor '%s': layer number out of range", hf);
	if ((r = g4_find(g4_layer, sizeof g4_layer / sizeof g4_layer[0], end + 1)) == NULL) {
		if (strcmp(end + 1, "self_attn.v_norm.weight") == 0)
			return 0;	/* v_norm has no weight in 5.17; an older save's is unused */
		return util_err(st->err, "tensor '%s' has no GGUF name for gemma4", hf);
	}
	if (r->kv && il >= g->L - g->shared)
		return 0;	/* a shared layer's K/V weights: unused (transformers ignores them) */
	snprintf(name, sizeof name, "blk.%lld.%s", il, r->gguf);
	return g4_out(st, g, t, r, il, name);
}

/* rope_freqs.weight: 1.0 for the global layers' rotated pairs, 1e30 for the rest. */
static int
g4_rope_freqs(struct safetensors *st, const struct g4 *g)
{
	struct safetensors_out *o = st_new_out(st, "rope_freqs.weight");
	int64_t n = g->hd_full / 2;
	float *v = st_keep(st, malloc(n * sizeof *v));

	if (o == NULL || v == NULL)
		return util_err(st->err, "out of memory");
	for (int64_t j = 0; j < n; j++)
		v[j] = j < g->rot_full ? 1.0f : 1e30f;
	o->n_dims = 1;
	o->ne[0] = n, o->ne[1] = o->ne[2] = o->ne[3] = 1;
	o->n_rows = 1;
	o->src_dtype = SAFETENSORS_F32;
	o->synth = v;
	o->verbatim = 1;
	return 0;
}

/* ---- metadata ---- */

/* A per-layer array: int32 values of a (bool: 0/1 of swa). */
static int
g4_arr(struct safetensors *st, const char *key, const struct g4 *g, const int64_t *a)
{
	char k[128];
	struct safetensors_kv *kv;

	snprintf(k, sizeof k, "%s.%s", st->arch, key);
	if ((kv = st_kv_add(st, k, SAFETENSORS_KV_ARR)) == NULL)
		return util_err(st->err, "out of memory");
	kv->n = (uint64_t)g->L;
	if (a == NULL) {
		uint8_t *b = st_keep(st, malloc(g->L));

		if (b == NULL)
			return util_err(st->err, "out of memory");
		for (int64_t i = 0; i < g->L; i++)
			b[i] = (uint8_t)g->swa[i];
		kv->arr_type = SAFETENSORS_KV_BOOL, kv->u8 = b;
		return 0;
	}
	int32_t *v = st_keep(st, malloc(g->L * sizeof *v));

	if (v == NULL)
		return util_err(st->err, "out of memory");
	for (int64_t i = 0; i < g->L; i++)
		v[i] = (int32_t)a[i];
	kv->arr_type = SAFETENSORS_KV_I32, kv->i32 = v;
	return 0;
}

static int
g4_kvs(struct safetensors *st, const struct g4 *g)
{
	const char *base = st->dir ? strrchr(st->dir, '/') : NULL;
	const char *name = base ? base + 1 : st->dir ? st->dir : "model";

	if (st_kv_str(st, "general.architecture", st->arch, strlen(st->arch)) != 0 ||
	    st_kv_str(st, "general.name", name, strlen(name)) != 0 ||
	    st_kv_u32(st, "block_count", g->L) || st_kv_u32(st, "context_length", g->ctx) ||
	    st_kv_u32(st, "embedding_length", g->H) ||
	    (g->dwide ? g4_arr(st, "feed_forward_length", g, g->lff) :
	    st_kv_u32(st, "feed_forward_length", g->I)) ||
	    st_kv_u32(st, "attention.head_count", g->nh) ||
	    (g->kv_arr ? g4_arr(st, "attention.head_count_kv", g, g->lkv) :
	    st_kv_u32(st, "attention.head_count_kv", g->nkv)) ||
	    st_kv_f32(st, "rope.freq_base", g->theta) || st_kv_f32(st, "rope.freq_base_swa", g->theta_swa) ||
	    st_kv_f32(st, "attention.layer_norm_rms_epsilon", g->eps) ||
	    st_kv_u32(st, "attention.key_length", g->hd_full) ||
	    st_kv_u32(st, "attention.value_length", g->hd_full) ||
	    st_kv_u32(st, "attention.key_length_swa", g->hd) ||
	    st_kv_u32(st, "attention.value_length_swa", g->hd) ||
	    st_kv_u32(st, "rope.dimension_count", g->hd_full) ||
	    st_kv_u32(st, "rope.dimension_count_swa", g->hd) ||
	    st_kv_u32(st, "attention.sliding_window", g->swa_w) ||
	    st_kv_u32(st, "attention.shared_kv_layers", g->shared) ||
	    st_kv_u32(st, "embedding_length_per_layer_input", g->P) ||
	    g4_arr(st, "attention.sliding_window_pattern", g, NULL) ||
	    (g->cap > 0 && st_kv_f32(st, "final_logit_softcapping", g->cap)))
		return -1;
	if (g->asst && (st_kv_u32(st, "embedding_length_out", g->Hb) ||
	    st_kv_u32(st, "nextn_predict_layers", g->L)))
		return -1;
	if (g->moe && (st_kv_u32(st, "expert_count", g->E) || st_kv_u32(st, "expert_used_count", g->K) ||
	    st_kv_u32(st, "expert_feed_forward_length", g->Ie)))
		return -1;
	return 0;
}

int
st_plan_gemma4(struct safetensors *st)
{
	struct g4 *g = calloc(1, sizeof *g);
	int rc = -1;

	if (g == NULL)
		return util_err(st->err, "out of memory");
	if (g4_hparams(st, g) != 0)
		goto out;
	snprintf(st->arch, sizeof st->arch, "%s", g->asst ? "gemma4-assistant" : "gemma4");
	for (size_t i = 0; i < st->nbyname; i++)
		if (g4_map(st, g, &st->t[st->byname[i].i]) != 0)
			goto out;
	if (g4_rope_freqs(st, g) != 0)
		goto out;
	st_sort_out(st);
	rc = g4_kvs(st, g);
out:
	free(g);
	return rc;
}
