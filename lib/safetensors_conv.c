/*
 * The conversion plan: HF tensor names, shapes and values -> GGUF, as
 * llama.cpp's converter (convert_hf_to_gguf.py, conversion/qwen.py)
 * writes them, and the architecture's GGUF metadata.
 */
#include "safetensors.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "safetensors_impl.h"
#include "util.h"

enum { ARCH_LLAMA = 1, ARCH_QWEN35 = 2, ARCH_QWEN35MOE = 4, ARCH_STEP35 = 8 };
#define ARCH_Q35 (ARCH_QWEN35 | ARCH_QWEN35MOE)	/* the hybrid's shared tensors */

/* elementwise transforms */
enum { X_NONE, X_PLUS1, X_NEGEXP };

/* symbolic dimensions for the shape check */
enum {
	D_NONE, D_EMBD, D_EMBD2, D_FF, D_VOCAB, D_HQ, D_QO, D_KVO, D_HD,
	D_CONV, D_VDIM, D_NV, D_HV, D_KC, D_NEXP, D_FFSH, D_ONE, D_NHEAD
};

/* which V-head permutation a tensor takes (qwen35, n_k_heads != n_v_heads) */
enum { V_NONE, V_QKV, V_GATE, V_HEADS, V_CONV, V_COLS, V_VEC };

enum { K_ANY, K_FULL, K_LINEAR };	/* layer kind a tensor belongs to */

struct rule {
	const char *hf;		/* suffix after "model.layers.N." */
	const char *gguf;	/* suffix after "blk.N." */
	int	arch;		/* ARCH_* mask */
	int	kind;		/* K_* */
	int	ne0, ne1;	/* D_* */
	int	xform;
	int	vperm;		/* V_* */
	int	rope;		/* 1 q rows, 2 k rows (llama) */
	int	squeeze;
};

static const struct rule layer_rules[] = {
	{ "input_layernorm.weight", "attn_norm.weight", ARCH_LLAMA, K_ANY, D_EMBD, D_NONE, X_NONE, V_NONE, 0, 0 },
	{ "input_layernorm.weight", "attn_norm.weight", ARCH_Q35, K_ANY, D_EMBD, D_NONE, X_PLUS1, V_NONE, 0, 0 },
	{ "post_attention_layernorm.weight", "ffn_norm.weight", ARCH_LLAMA, K_ANY, D_EMBD, D_NONE, X_NONE, V_NONE, 0, 0 },
	{ "post_attention_layernorm.weight", "post_attention_norm.weight", ARCH_Q35, K_ANY, D_EMBD, D_NONE, X_PLUS1, V_NONE, 0, 0 },
	{ "self_attn.q_proj.weight", "attn_q.weight", ARCH_LLAMA, K_FULL, D_EMBD, D_HQ, X_NONE, V_NONE, 1, 0 },
	{ "self_attn.q_proj.weight", "attn_q.weight", ARCH_Q35, K_FULL, D_EMBD, D_QO, X_NONE, V_NONE, 0, 0 },
	{ "self_attn.k_proj.weight", "attn_k.weight", ARCH_LLAMA, K_FULL, D_EMBD, D_KVO, X_NONE, V_NONE, 2, 0 },
	{ "self_attn.k_proj.weight", "attn_k.weight", ARCH_Q35, K_FULL, D_EMBD, D_KVO, X_NONE, V_NONE, 0, 0 },
	{ "self_attn.v_proj.weight", "attn_v.weight", ARCH_LLAMA | ARCH_Q35, K_FULL, D_EMBD, D_KVO, X_NONE, V_NONE, 0, 0 },
	{ "self_attn.o_proj.weight", "attn_output.weight", ARCH_LLAMA | ARCH_Q35, K_FULL, D_HQ, D_EMBD, X_NONE, V_NONE, 0, 0 },
	{ "self_attn.q_norm.weight", "attn_q_norm.weight", ARCH_Q35, K_FULL, D_HD, D_NONE, X_PLUS1, V_NONE, 0, 0 },
	{ "self_attn.k_norm.weight", "attn_k_norm.weight", ARCH_Q35, K_FULL, D_HD, D_NONE, X_PLUS1, V_NONE, 0, 0 },
	{ "linear_attn.in_proj_qkv.weight", "attn_qkv.weight", ARCH_Q35, K_LINEAR, D_EMBD, D_CONV, X_NONE, V_QKV, 0, 0 },
	{ "linear_attn.in_proj_z.weight", "attn_gate.weight", ARCH_Q35, K_LINEAR, D_EMBD, D_VDIM, X_NONE, V_GATE, 0, 0 },
	{ "linear_attn.in_proj_b.weight", "ssm_beta.weight", ARCH_Q35, K_LINEAR, D_EMBD, D_NV, X_NONE, V_HEADS, 0, 0 },
	{ "linear_attn.in_proj_a.weight", "ssm_alpha.weight", ARCH_Q35, K_LINEAR, D_EMBD, D_NV, X_NONE, V_HEADS, 0, 0 },
	{ "linear_attn.out_proj.weight", "ssm_out.weight", ARCH_Q35, K_LINEAR, D_VDIM, D_EMBD, X_NONE, V_COLS, 0, 0 },
	{ "linear_attn.norm.weight", "ssm_norm.weight", ARCH_Q35, K_LINEAR, D_HV, D_NONE, X_NONE, V_NONE, 0, 0 },
	{ "linear_attn.A_log", "ssm_a", ARCH_Q35, K_LINEAR, D_NV, D_NONE, X_NEGEXP, V_VEC, 0, 0 },
	{ "linear_attn.dt_bias", "ssm_dt.bias", ARCH_Q35, K_LINEAR, D_NV, D_NONE, X_NONE, V_VEC, 0, 0 },
	{ "linear_attn.conv1d.weight", "ssm_conv1d.weight", ARCH_Q35, K_LINEAR, D_KC, D_CONV, X_NONE, V_CONV, 0, 1 },
	{ "mlp.gate_proj.weight", "ffn_gate.weight", ARCH_LLAMA | ARCH_QWEN35, K_ANY, D_EMBD, D_FF, X_NONE, V_NONE, 0, 0 },
	{ "mlp.up_proj.weight", "ffn_up.weight", ARCH_LLAMA | ARCH_QWEN35, K_ANY, D_EMBD, D_FF, X_NONE, V_NONE, 0, 0 },
	{ "mlp.down_proj.weight", "ffn_down.weight", ARCH_LLAMA | ARCH_QWEN35, K_ANY, D_FF, D_EMBD, X_NONE, V_NONE, 0, 0 },
	{ "mlp.gate.weight", "ffn_gate_inp.weight", ARCH_QWEN35MOE, K_ANY, D_EMBD, D_NEXP, X_NONE, V_NONE, 0, 0 },
	{ "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", ARCH_QWEN35MOE, K_ANY, D_EMBD, D_FFSH, X_NONE, V_NONE, 0, 0 },
	{ "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", ARCH_QWEN35MOE, K_ANY, D_EMBD, D_FFSH, X_NONE, V_NONE, 0, 0 },
	{ "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", ARCH_QWEN35MOE, K_ANY, D_FFSH, D_EMBD, X_NONE, V_NONE, 0, 0 },
	{ "mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", ARCH_QWEN35MOE, K_ANY, D_EMBD, D_ONE, X_NONE, V_NONE, 0, 0 },
};

/*
 * qwen35moe's routed experts: HF's per-expert tensors (the hub layout,
 * what save_pretrained writes) "mlp.experts.E.<hf>" stacked into one 3-D
 * GGUF tensor, or the fused module tensors (gate_up_proj [E][2 I][H],
 * down_proj [E][H][I]) split and renamed, as llama.cpp's converter does.
 */
struct exp_rule {
	const char *hf, *gguf;
	int	ne0, rows;	/* D_* of each expert's matrix */
};
static const struct exp_rule exp_rules[] = {
	{ "gate_proj.weight", "ffn_gate_exps.weight", D_EMBD, D_FF },
	{ "up_proj.weight", "ffn_up_exps.weight", D_EMBD, D_FF },
	{ "down_proj.weight", "ffn_down_exps.weight", D_FF, D_EMBD },
};

/* tensors outside the layers: full HF name -> GGUF name (blk.%d for the MTP block) */
static const struct rule global_rules[] = {
	{ "model.embed_tokens.weight", "token_embd.weight", ARCH_LLAMA | ARCH_Q35, K_ANY, D_EMBD, D_VOCAB, X_NONE, V_NONE, 0, 0 },
	{ "model.norm.weight", "output_norm.weight", ARCH_LLAMA, K_ANY, D_EMBD, D_NONE, X_NONE, V_NONE, 0, 0 },
	{ "model.norm.weight", "output_norm.weight", ARCH_Q35, K_ANY, D_EMBD, D_NONE, X_PLUS1, V_NONE, 0, 0 },
	{ "lm_head.weight", "output.weight", ARCH_LLAMA | ARCH_Q35, K_ANY, D_EMBD, D_VOCAB, X_NONE, V_NONE, 0, 0 },
	{ "mtp.fc.weight", "blk.%d.nextn.eh_proj.weight", ARCH_Q35, K_ANY, D_EMBD2, D_EMBD, X_NONE, V_NONE, 0, 0 },
	{ "mtp.pre_fc_norm_embedding.weight", "blk.%d.nextn.enorm.weight", ARCH_Q35, K_ANY, D_EMBD, D_NONE, X_PLUS1, V_NONE, 0, 0 },
	{ "mtp.pre_fc_norm_hidden.weight", "blk.%d.nextn.hnorm.weight", ARCH_Q35, K_ANY, D_EMBD, D_NONE, X_PLUS1, V_NONE, 0, 0 },
	{ "mtp.norm.weight", "blk.%d.nextn.shared_head_norm.weight", ARCH_Q35, K_ANY, D_EMBD, D_NONE, X_PLUS1, V_NONE, 0, 0 },
	{ "mtp.embed_tokens.weight", "blk.%d.nextn.embed_tokens.weight", ARCH_Q35, K_ANY, D_EMBD, D_VOCAB, X_NONE, V_NONE, 0, 0 },
};

struct hp {
	int	arch;
	int64_t	n_layer, n_mtp, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx;
	int64_t	n_exp, n_exp_used, n_ff_shexp;	/* qwen35moe; n_ff is an expert's width */
	double	eps, theta, prf;
	int64_t	lk_heads, lv_heads, lk_dim, lv_dim, conv_k, interval;
	int32_t	sections[4];
	int	has_head_dim;
	int	kinds[1024];	/* K_FULL / K_LINEAR per trunk layer */
	/* step35 (step3p7's text model): per trunk layer */
	int	heads[1024];		/* query heads */
	unsigned char swa[1024];	/* 1: sliding-window attention */
	unsigned char sparse[1024];	/* 1: a mixture of experts, 0: a dense MLP */
	float	lim_exp[1024], lim_sh[1024];	/* SwiGLU limits (0: none) */
	int64_t	n_head_swa, window, n_ff_exp, n_nextn;
	int64_t	n_dropped;	/* NextN layers --no-mtp leaves out (after the trunk's) */
	double	theta_swa, prf_swa, scale, qpas;
};

/* step35 (lib/safetensors_conv.c, the end): hparams, tensors, completeness, metadata */
static int st_step35_hparams(struct safetensors *, struct hp *);
static int st_step35_map(struct safetensors *, const struct hp *, const struct safetensors_tensor *,
	    const char *);
static int st_step35_complete(struct safetensors *, const struct hp *);
static int st_step35_kv(struct safetensors *, const struct hp *);

static const char *
arch_name(int arch)
{
	return arch == ARCH_LLAMA ? "llama" : arch == ARCH_QWEN35 ? "qwen35" :
	    arch == ARCH_STEP35 ? "step35" : "qwen35moe";
}

static int64_t
dim(const struct hp *h, int d)
{
	switch (d) {
	case D_EMBD: return h->n_embd;
	case D_EMBD2: return 2 * h->n_embd;
	case D_FF: return h->n_ff;
	case D_VOCAB: return h->n_vocab;
	case D_HQ: return h->n_head * h->head_dim;
	case D_QO: return 2 * h->n_head * h->head_dim;
	case D_KVO: return h->n_head_kv * h->head_dim;
	case D_HD: return h->head_dim;
	case D_CONV: return 2 * h->lk_heads * h->lk_dim + h->lv_heads * h->lv_dim;
	case D_VDIM: return h->lv_heads * h->lv_dim;
	case D_NV: return h->lv_heads;
	case D_HV: return h->lv_dim;
	case D_KC: return h->conv_k;
	case D_NEXP: return h->n_exp;
	case D_FFSH: return h->n_ff_shexp;
	case D_ONE: return 1;
	case D_NHEAD: return h->n_head;
	}
	return 1;
}

/* ---- hyperparameters ---- */

/* An integer hparam: 0 found, 1 absent (def stored), -1 present but not an integer. */
static int
hp_int(struct safetensors *st, const char *key, int64_t def, int64_t *out)
{
	const struct json *v = safetensors_hparam(st, key);

	*out = def;
	if (v == NULL || v->type == JSON_NULL)
		return 1;
	if (v->type != JSON_NUMBER || !v->is_int)
		return util_err(st->err, "config.json: '%s' is not an integer", key);
	*out = v->i;
	return 0;
}

static int
hp_need(struct safetensors *st, const char *key, int64_t lo, int64_t *out)
{
	int rc = hp_int(st, key, 0, out);

	if (rc < 0)
		return -1;
	if (rc == 1)
		return util_err(st->err, "config.json: no '%s'", key);
	if (*out < lo || *out > (int64_t)1 << 40)
		return util_err(st->err, "config.json: '%s' = %lld out of range", key, (long long)*out);
	return 0;
}

/*
 * A number from rope_parameters / rope_scaling, else from hparams: the
 * nested value wins, as transformers 5 reads it (a config may carry both,
 * e.g. a stale top-level partial_rotary_factor 0.25 beside 0.5 nested).
 */
static int
hp_num(struct safetensors *st, const char *key, double def, double *out)
{
	static const char *const nests[] = { "rope_parameters", "rope_scaling" };
	const struct json *v = NULL;
	size_t i;

	for (i = 0; i < 2 && (v == NULL || v->type == JSON_NULL); i++) {
		const struct json *o = safetensors_hparam(st, nests[i]);

		v = o != NULL && o->type == JSON_OBJECT ? json_get(o, key) : NULL;
	}
	if (v == NULL || v->type == JSON_NULL)
		v = safetensors_hparam(st, key);
	*out = def;
	if (v == NULL || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_NUMBER)
		return util_err(st->err, "config.json: '%s' is not a number", key);
	*out = v->num;
	return 0;
}

static int
load_common(struct safetensors *st, struct hp *h)
{
	if (hp_need(st, "num_hidden_layers", 1, &h->n_layer) != 0 ||
	    hp_need(st, "hidden_size", 1, &h->n_embd) != 0 ||
	    hp_need(st, h->arch == ARCH_QWEN35MOE ? "moe_intermediate_size" : "intermediate_size",
	    1, &h->n_ff) != 0 ||
	    hp_need(st, "num_attention_heads", 1, &h->n_head) != 0 ||
	    hp_need(st, "vocab_size", 1, &h->n_vocab) != 0 ||
	    hp_int(st, "num_key_value_heads", h->n_head, &h->n_head_kv) < 0 ||
	    hp_int(st, "max_position_embeddings", 0, &h->n_ctx) < 0)
		return -1;
	if (h->n_layer > (int64_t)(sizeof h->kinds / sizeof h->kinds[0]) - 16)
		return util_err(st->err, "config.json: %lld layers is too many", (long long)h->n_layer);
	if (h->n_head_kv < 1 || h->n_head % h->n_head_kv != 0)
		return util_err(st->err, "config.json: %lld heads do not divide into %lld kv heads",
		    (long long)h->n_head, (long long)h->n_head_kv);
	h->has_head_dim = hp_int(st, "head_dim", h->n_embd / h->n_head, &h->head_dim) == 0;
	if (h->head_dim < 1 || h->head_dim > (int64_t)1 << 20)
		return util_err(st->err, "config.json: bad 'head_dim'");
	if (hp_num(st, "rms_norm_eps", 1e-6, &h->eps) != 0 ||
	    hp_num(st, "rope_theta", 10000.0, &h->theta) != 0)
		return -1;
	return 0;
}

static int
load_layer_kinds(struct safetensors *st, struct hp *h)
{
	const struct json *lt = safetensors_hparam(st, "layer_types");
	int64_t i;

	for (i = 0; i < h->n_layer; i++)
		h->kinds[i] = (i + 1) % h->interval == 0 ? K_FULL : K_LINEAR;
	if (lt == NULL || lt->type == JSON_NULL)
		return 0;
	if (lt->type != JSON_ARRAY || (int64_t)lt->n != h->n_layer)
		return util_err(st->err, "config.json: 'layer_types' is not an array of %lld",
		    (long long)h->n_layer);
	for (i = 0; i < h->n_layer; i++) {
		const char *s = lt->items[i].type == JSON_STRING ? lt->items[i].str : "";

		if (strcmp(s, "full_attention") == 0)
			h->kinds[i] = K_FULL;
		else if (strcmp(s, "linear_attention") == 0)
			h->kinds[i] = K_LINEAR;
		else
			return util_err(st->err, "config.json: layer_types[%lld] '%s' is unknown",
			    (long long)i, s);
		if (h->kinds[i] != ((i + 1) % h->interval == 0 ? K_FULL : K_LINEAR))
			return util_err(st->err, "config.json: layer_types[%lld] disagrees with "
			    "full_attention_interval %lld (GGUF has no per-layer key)",
			    (long long)i, (long long)h->interval);
	}
	return 0;
}

static int
load_sections(struct safetensors *st, struct hp *h)
{
	static const char *const nests[] = { "rope_parameters", "rope_scaling" };
	const struct json *v = NULL;
	size_t i;

	h->sections[0] = 11, h->sections[1] = 11, h->sections[2] = 10, h->sections[3] = 0;
	for (i = 0; i < 2 && v == NULL; i++) {
		const struct json *o = safetensors_hparam(st, nests[i]);

		v = o != NULL && o->type == JSON_OBJECT ? json_get(o, "mrope_section") : NULL;
	}
	if (v == NULL || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_ARRAY || v->n > 4)
		return util_err(st->err, "config.json: 'mrope_section' is not an array of at most 4");
	for (i = 0; i < 4; i++) {
		const struct json *e = i < v->n ? &v->items[i] : NULL;

		if (e != NULL && (e->type != JSON_NUMBER || !e->is_int || e->i < 0 || e->i > 1 << 20))
			return util_err(st->err, "config.json: bad 'mrope_section'");
		h->sections[i] = e ? (int32_t)e->i : 0;
	}
	return 0;
}

static int
load_qwen35(struct safetensors *st, struct hp *h)
{
	if (hp_need(st, "linear_num_key_heads", 1, &h->lk_heads) != 0 ||
	    hp_need(st, "linear_num_value_heads", 1, &h->lv_heads) != 0 ||
	    hp_need(st, "linear_key_head_dim", 1, &h->lk_dim) != 0 ||
	    hp_need(st, "linear_value_head_dim", 1, &h->lv_dim) != 0 ||
	    hp_need(st, "linear_conv_kernel_dim", 1, &h->conv_k) != 0 ||
	    hp_int(st, "full_attention_interval", 4, &h->interval) < 0 ||
	    hp_int(st, "mtp_num_hidden_layers", 0, &h->n_mtp) < 0)
		return -1;
	if (h->interval < 1 || h->n_mtp < 0 || h->n_mtp > 8)
		return util_err(st->err, "config.json: bad full_attention_interval or mtp_num_hidden_layers");
	if (h->lv_heads % h->lk_heads != 0)
		return util_err(st->err, "config.json: %lld value heads are not a multiple of %lld key heads",
		    (long long)h->lv_heads, (long long)h->lk_heads);
	if (hp_num(st, "partial_rotary_factor", 0.25, &h->prf) != 0 || load_sections(st, h) != 0)
		return -1;
	return load_layer_kinds(st, h);
}

/* qwen3_5_moe: every FFN routed (transformers 5.17 has no dense layers in it) */
static int
load_moe(struct safetensors *st, struct hp *h)
{
	if (hp_need(st, "num_experts", 1, &h->n_exp) != 0 ||
	    hp_need(st, "num_experts_per_tok", 1, &h->n_exp_used) != 0 ||
	    hp_need(st, "shared_expert_intermediate_size", 1, &h->n_ff_shexp) != 0)
		return -1;
	if (h->n_exp_used > h->n_exp)
		return util_err(st->err, "config.json: %lld experts a token of %lld",
		    (long long)h->n_exp_used, (long long)h->n_exp);
	return 0;
}

static int
load_hparams(struct safetensors *st, struct hp *h, int nomtp)
{
	const char *mt;

	memset(h, 0, sizeof *h);
	if (st->config == NULL)
		return util_err(st->err, "%s: no config.json", st->dir ? st->dir : "<memory>");
	if ((mt = json_get_str(st->config, "model_type")) == NULL)
		return util_err(st->err, "config.json: no 'model_type'");
	if (strcmp(mt, "llama") == 0)
		h->arch = ARCH_LLAMA;
	else if (strcmp(mt, "qwen3_5_text") == 0 || strcmp(mt, "qwen3_5") == 0)
		h->arch = ARCH_QWEN35;
	else if (strcmp(mt, "qwen3_5_moe_text") == 0 || strcmp(mt, "qwen3_5_moe") == 0)
		h->arch = ARCH_QWEN35MOE;
	else if (strcmp(mt, "step3p7") == 0 || strcmp(mt, "step3p5") == 0)
		h->arch = ARCH_STEP35;
	else
		return util_err(st->err, "config.json: model_type '%s' is not supported "
		    "(llama, qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text, step3p7, "
		    "step3p5)", mt);
	if (h->arch == ARCH_STEP35) {	/* --no-mtp: a trunk as llama.cpp's --no-mtp writes it */
		if (st_step35_hparams(st, h) != 0)
			return -1;
		if (nomtp)
			h->n_dropped = h->n_nextn, h->n_nextn = h->n_mtp = 0;
		return 0;
	}
	if (load_common(st, h) != 0)
		return -1;
	if ((h->arch & ARCH_Q35) && load_qwen35(st, h) != 0)
		return -1;
	if (h->arch == ARCH_QWEN35MOE && load_moe(st, h) != 0)
		return -1;
	if (h->arch == ARCH_LLAMA) {
		h->interval = 1;
		load_layer_kinds(st, h);	/* every llama layer is K_FULL */
	}
	if (nomtp)
		h->n_mtp = 0;
	return 0;
}

/* ---- the tensor list ---- */

static const struct rule *
find_rule(const struct rule *r, size_t n, const char *hf, int arch)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((r[i].arch & arch) && strcmp(r[i].hf, hf) == 0)
			return &r[i];
	return NULL;
}

/*
 * The GGUF ne of a source tensor: its shape reversed, with size-1
 * dimensions dropped when the rule squeezes.  -1 when over 4 dims.
 */
static int
gguf_shape(const struct safetensors_tensor *t, int squeeze, int64_t ne[4])
{
	int i, n = 0;

	ne[0] = ne[1] = ne[2] = ne[3] = 1;
	for (i = t->n_dims - 1; i >= 0; i--) {
		if (squeeze && t->shape[i] == 1)
			continue;
		if (n == 4)
			return -1;
		ne[n++] = t->shape[i];
	}
	return n ? n : 1;
}

static void
set_vperm(struct safetensors_out *o, const struct hp *h, int v)
{
	int64_t kd = h->lk_heads * h->lk_dim;

	if (v == V_NONE || h->lk_heads == h->lv_heads)
		return;
	o->pb = v == V_HEADS || v == V_VEC ? 1 : h->lv_dim;
	o->perm = v == V_COLS || v == V_VEC ? P_VCOLS : P_VROWS;
	o->pa = v == V_QKV || v == V_CONV ? 2 * kd : 0;
}

/* quantization_config.weight_block_size, [128, 128] when absent */
static int
block_size(struct safetensors *st, int64_t bs[2])
{
	const struct json *q = safetensors_hparam(st, "quantization_config"), *b;

	bs[0] = bs[1] = 128;
	b = q != NULL && q->type == JSON_OBJECT ? json_get(q, "weight_block_size") : NULL;
	if (b == NULL || b->type == JSON_NULL)
		return 0;
	if (b->type != JSON_ARRAY || b->n != 2 || !b->items[0].is_int || !b->items[1].is_int ||
	    b->items[0].i < 1 || b->items[1].i < 1)
		return util_err(st->err, "config.json: bad quantization_config.weight_block_size");
	bs[0] = b->items[0].i;
	bs[1] = b->items[1].i;
	return 0;
}

/* An FP8 weight reads through its block scales: <name>_scale_inv, one per bs[0] x bs[1] block. */
static int
attach_scale(struct safetensors *st, struct safetensors_out *o)
{
	const struct safetensors_tensor *t = o->src, *sc;
	char name[512];

	snprintf(name, sizeof name, "%s_scale_inv", t->name);
	if ((sc = safetensors_find(st, name)) == NULL)
		return util_err(st->err, "tensor '%s': FP8 without a '%s' block scale", t->name, name);
	if (block_size(st, o->bs) != 0)
		return -1;
	if (t->n_dims != 2 || sc->n_dims != 2 || sc->shape[0] != (t->shape[0] + o->bs[0] - 1) / o->bs[0] ||
	    sc->shape[1] != (t->shape[1] + o->bs[1] - 1) / o->bs[1] ||
	    (sc->dtype != SAFETENSORS_F32 && sc->dtype != SAFETENSORS_BF16 && sc->dtype != SAFETENSORS_F16))
		return util_err(st->err, "tensor '%s': block scale '%s' is not a float [%lld, %lld]",
		    t->name, name, (long long)((t->shape[0] + o->bs[0] - 1) / o->bs[0]),
		    (long long)(t->n_dims == 2 ? (t->shape[1] + o->bs[1] - 1) / o->bs[1] : 0));
	o->scale = sc;
	o->verbatim = 0;
	return 0;
}

static int
add_out(struct safetensors *st, const struct hp *h, const struct safetensors_tensor *t,
    const struct rule *r, const char *name)
{
	struct safetensors_out *o;
	int64_t want[2] = { dim(h, r->ne0), r->ne1 == D_NONE ? 1 : dim(h, r->ne1) };
	int n;

	if (st->nout == st->capout) {
		size_t cap = st->capout ? 2 * st->capout : 64;
		void *p = realloc(st->out, cap * sizeof *st->out);

		if (p == NULL)
			return util_err(st->err, "out of memory");
		st->out = p;
		st->capout = cap;
	}
	o = &st->out[st->nout];
	memset(o, 0, sizeof *o);
	if (strlen(name) >= sizeof o->name)
		return util_err(st->err, "tensor '%s': GGUF name too long", t->name);
	strcpy(o->name, name);
	if ((n = gguf_shape(t, r->squeeze, o->ne)) < 0)
		return util_err(st->err, "tensor '%s': more than 4 dimensions", t->name);
	o->n_dims = n;
	if (st_nv_weight(st, t))
		o->ne[0] *= 2;	/* two FP4 values a byte */
	if (o->ne[0] != want[0] || o->ne[1] != want[1] || o->ne[2] != 1 || o->ne[3] != 1 ||
	    n != (r->ne1 == D_NONE ? 1 : 2))
		return util_err(st->err, "tensor '%s': GGUF shape {%lld, %lld, %lld, %lld}, "
		    "config.json implies {%lld, %lld}", t->name, (long long)o->ne[0],
		    (long long)o->ne[1], (long long)o->ne[2], (long long)o->ne[3],
		    (long long)want[0], (long long)want[1]);
	o->n_rows = o->ne[1] * o->ne[2] * o->ne[3];
	o->src = t;
	o->src_dtype = t->dtype;
	o->xform = r->xform;
	if (r->rope) {
		o->perm = P_ROPE;
		o->pa = r->rope == 1 ? h->n_head : h->n_head_kv;
	}
	set_vperm(o, h, r->vperm);
	o->pc = h->lk_heads;
	o->pd = h->lv_heads;
	o->verbatim = o->xform == X_NONE;
	if ((t->dtype == SAFETENSORS_F8_E4M3 || t->dtype == SAFETENSORS_F8_E5M2) &&
	    attach_scale(st, o) != 0)
		return -1;
	if (st_nv_weight(st, t) && st_nv_attach(st, o) != 0)
		return -1;
	st->nout++;
	return o->nvfp4 ? st_nv_scale_out(st, st->nout - 1) : 0;
}

/* HF name -> the name the rules know: drop the language-model prefix. 0 skip, 1 keep. */
static int
normalize(const char *hf, char *buf, size_t n)
{
	static const char *const skip[] = { "model.visual.", "visual.", "model.vision_tower.",
		"vision_tower.", "model.multi_modal_projector.", "mtp.visual.", "vision_model.",
		"model.vision_model.", "vit_large_projector.", "model.vit_large_projector." };
	size_t i;

	for (i = 0; i < sizeof skip / sizeof skip[0]; i++)
		if (strncmp(hf, skip[i], strlen(skip[i])) == 0)
			return 0;
	if (strncmp(hf, "model.language_model.", 21) == 0)
		snprintf(buf, n, "model.%s", hf + 21);
	else
		snprintf(buf, n, "%s", hf);
	return !(strstr(buf, "rotary_emb.inv_freq") != NULL);
}

/* "model.layers.N.rest" or "mtp.layers.N.rest" -> block and rest; 0 when not a layer name. */
static int
layer_of(const char *name, const struct hp *h, int64_t *blk, const char **rest, int *mtp)
{
	const char *p;
	char *end;
	long long n;

	if (strncmp(name, "model.layers.", 13) == 0)
		p = name + 13, *mtp = 0;
	else if (strncmp(name, "mtp.layers.", 11) == 0)
		p = name + 11, *mtp = 1;
	else
		return 0;
	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '.'))
		return -1;
	n = strtoll(p, &end, 10);
	if (*end != '.' || n < 0 || n >= (*mtp ? h->n_mtp : h->n_layer))
		return -1;
	*blk = *mtp ? h->n_layer + n : n;
	*rest = end + 1;
	return 1;
}

/* "<w>_scale_inv" beside an FP8 "<w>": consumed by w's rows, not a tensor of its own */
static int
is_used_scale(const struct safetensors *st, const struct safetensors_tensor *t)
{
	size_t n = strlen(t->name);
	char w[512];
	const struct safetensors_tensor *wt;

	if (n < 10 || n - 10 >= sizeof w || strcmp(t->name + n - 10, "_scale_inv") != 0)
		return 0;
	memcpy(w, t->name, n - 10);
	w[n - 10] = '\0';
	wt = safetensors_find(st, w);
	return wt != NULL && (wt->dtype == SAFETENSORS_F8_E4M3 || wt->dtype == SAFETENSORS_F8_E5M2);
}

/* A new planned tensor named name, zeroed. */
struct safetensors_out *
st_new_out(struct safetensors *st, const char *name)
{
	struct safetensors_out *o;

	if (st->nout == st->capout) {
		size_t cap = st->capout ? 2 * st->capout : 64;
		void *p = realloc(st->out, cap * sizeof *st->out);

		if (p == NULL)
			return NULL;
		st->out = p;
		st->capout = cap;
	}
	o = &st->out[st->nout++];
	memset(o, 0, sizeof *o);
	snprintf(o->name, sizeof o->name, "%s", name);
	return o;
}

static struct safetensors_out *
find_out(struct safetensors *st, const char *name)
{
	for (size_t i = 0; i < st->nout; i++)
		if (strcmp(st->out[i].name, name) == 0)
			return &st->out[i];
	return NULL;
}

/* A 3-D GGUF tensor {ne0, rows, n_exp} of source t (dtype and values as they are). */
static struct safetensors_out *
stack_out(struct safetensors *st, const struct hp *h, const struct safetensors_tensor *t,
    const char *name, int64_t ne0, int64_t rows)
{
	struct safetensors_out *o = st_new_out(st, name);

	if (o == NULL) {
		util_err(st->err, "out of memory");
		return NULL;
	}
	o->n_dims = 3;
	o->ne[0] = ne0, o->ne[1] = rows, o->ne[2] = h->n_exp, o->ne[3] = 1;
	o->n_rows = rows * h->n_exp;
	o->src = t;
	o->src_dtype = t->dtype;
	o->verbatim = 1;
	if (t->dtype == SAFETENSORS_F8_E4M3 || t->dtype == SAFETENSORS_F8_E5M2) {
		util_err(st->err, "tensor '%s': FP8 experts are not supported", t->name);
		return NULL;
	}
	if (st_nv_weight(st, t) && t->n_dims != 2) {
		util_err(st->err, "tensor '%s': NVFP4 experts in one tensor are not supported "
		    "(one tensor an expert are)", t->name);
		return NULL;
	}
	return o;
}

/* The fused experts gate_up_proj [E][2 I][H] (into gate and up) or down_proj [E][H][I]. */
static int
map_fused(struct safetensors *st, const struct hp *h, const struct safetensors_tensor *t,
    int64_t blk, int down)
{
	int64_t E = h->n_exp, I = h->n_ff, H = h->n_embd;
	char name[64];

	if (st_nv_weight(st, t))
		return util_err(st->err, "tensor '%s': NVFP4 experts in one tensor are not supported "
		    "(one tensor an expert are)", t->name);
	if (t->n_dims != 3 || t->shape[0] != E || t->shape[1] != (down ? H : 2 * I) ||
	    t->shape[2] != (down ? I : H))
		return util_err(st->err, "tensor '%s': not [%lld, %lld, %lld] as config.json implies",
		    t->name, (long long)E, (long long)(down ? H : 2 * I), (long long)(down ? I : H));
	for (int half = 0; half < (down ? 1 : 2); half++) {
		struct safetensors_out *o;

		snprintf(name, sizeof name, "blk.%lld.%s", (long long)blk, exp_rules[down ? 2 : half].gguf);
		if (find_out(st, name) != NULL)
			return util_err(st->err, "tensor '%s': '%s' planned twice", t->name, name);
		if ((o = stack_out(st, h, t, name, down ? I : H, down ? H : I)) == NULL)
			return -1;
		if (!down)
			o->perm = P_GATEUP, o->pa = I, o->pb = half;
	}
	return 0;
}

/* "mlp.experts.<rest>" of layer blk: one expert's matrix into its stack, or a fused tensor. */
static int
map_expert(struct safetensors *st, const struct hp *h, const struct safetensors_tensor *t,
    int64_t blk, const char *rest)
{
	const struct exp_rule *r = NULL;
	struct safetensors_out *o;
	char name[64], *end;
	long long e;
	int nv = st_nv_weight(st, t);	/* NVFP4 codes: two values a byte */

	if (strcmp(rest, "gate_up_proj") == 0 || strcmp(rest, "down_proj") == 0)
		return map_fused(st, h, t, blk, rest[0] == 'd');
	e = strtoll(rest, &end, 10);
	if (end == rest || *end != '.' || e < 0 || e >= h->n_exp)
		return util_err(st->err, "tensor '%s': expert number out of range", t->name);
	for (size_t i = 0; i < sizeof exp_rules / sizeof exp_rules[0]; i++)
		if (strcmp(end + 1, exp_rules[i].hf) == 0)
			r = &exp_rules[i];
	if (r == NULL)
		return util_err(st->err, "tensor '%s' has no GGUF name for qwen35moe", t->name);
	if (t->n_dims != 2 || t->shape[0] != dim(h, r->rows) ||
	    t->shape[1] * (nv ? 2 : 1) != dim(h, r->ne0))
		return util_err(st->err, "tensor '%s': not [%lld, %lld] as config.json implies",
		    t->name, (long long)dim(h, r->rows), (long long)dim(h, r->ne0));
	snprintf(name, sizeof name, "blk.%lld.%s", (long long)blk, r->gguf);
	if ((o = find_out(st, name)) == NULL) {
		if ((o = stack_out(st, h, t, name, dim(h, r->ne0), dim(h, r->rows))) == NULL)
			return -1;
		o->src_rows = dim(h, r->rows);
		if ((o->srcs = st_keep(st, calloc(h->n_exp, sizeof *o->srcs))) == NULL)
			return util_err(st->err, "out of memory");
	}
	if (o->srcs == NULL || o->srcs[e] != NULL)
		return util_err(st->err, "tensor '%s': expert %lld given twice", t->name, e);
	if (t->dtype != o->src_dtype)
		return util_err(st->err, "tensor '%s': experts of different dtypes", t->name);
	o->srcs[e] = t;
	return nv ? st_nv_attach_expert(st, o, e, t) : 0;
}

static int
map_tensor(struct safetensors *st, const struct hp *h, const struct safetensors_tensor *t)
{
	char norm[512], gname[128];
	const struct rule *r;
	const char *rest;
	int64_t blk;
	int mtp, k;

	if (!normalize(t->name, norm, sizeof norm))
		return 0;
	if (is_used_scale(st, t))
		return 0;
	if ((k = st_nv_aux(st, t)) != 0)
		return k < 0 ? -1 : 0;
	if (strlen(norm) > 7 && strcmp(norm + strlen(norm) - 7, "_packed") == 0)
		norm[strlen(norm) - 7] = '\0';	/* compressed-tensors' NVFP4 codes */
	if (strncmp(norm, "mtp.", 4) == 0 && h->n_mtp == 0)
		return 0;
	if (h->arch == ARCH_STEP35)
		return st_step35_map(st, h, t, norm);
	if ((k = layer_of(norm, h, &blk, &rest, &mtp)) < 0)
		return util_err(st->err, "tensor '%s': layer number out of range", t->name);
	if (k == 1 && h->arch == ARCH_QWEN35MOE && strncmp(rest, "mlp.experts.", 12) == 0)
		return map_expert(st, h, t, blk, rest + 12);
	if (k == 1) {
		int kind = mtp ? K_FULL : h->kinds[blk];

		r = find_rule(layer_rules, sizeof layer_rules / sizeof layer_rules[0], rest, h->arch);
		if (r != NULL && r->kind != K_ANY && r->kind != kind)
			return util_err(st->err, "tensor '%s' in a %s layer", t->name,
			    kind == K_FULL ? "full-attention" : "linear-attention");
		snprintf(gname, sizeof gname, "blk.%lld.%s", (long long)blk, r ? r->gguf : "");
	} else {
		r = find_rule(global_rules, sizeof global_rules / sizeof global_rules[0], norm, h->arch);
		if (r != NULL)
			snprintf(gname, sizeof gname, r->gguf, (int)h->n_layer);
	}
	if (r == NULL)
		return util_err(st->err, "tensor '%s' has no GGUF name for %s", t->name,
		    arch_name(h->arch));
	return add_out(st, h, t, r, gname);
}

/* sort key: token_embd, blk.0 .. blk.N, output_norm, output; then by name */
static long long
group_of(const char *name)
{
	if (strncmp(name, "blk.", 4) == 0)
		return 1 + strtoll(name + 4, NULL, 10);
	if (strcmp(name, "token_embd.weight") == 0)
		return 0;
	if (strcmp(name, "output_norm.weight") == 0)
		return LLONG_MAX - 1;
	return LLONG_MAX;
}

static int
cmp_out(const void *a, const void *b)
{
	const struct safetensors_out *x = a, *y = b;
	long long gx = group_of(x->name), gy = group_of(y->name);

	if (gx != gy)
		return gx < gy ? -1 : 1;
	return strcmp(x->name, y->name);
}

void
st_sort_out(struct safetensors *st)
{
	if (st->nout > 0)
		qsort(st->out, st->nout, sizeof *st->out, cmp_out);
}

static int
planned(const struct safetensors *st, const char *name)
{
	size_t i;

	for (i = 0; i < st->nout; i++)
		if (strcmp(st->out[i].name, name) == 0)
			return 1;
	return 0;
}

static int
need(struct safetensors *st, const char *name)
{
	if (planned(st, name))
		return 0;
	return util_err(st->err, "no tensor for '%s' in the checkpoint", name);
}

/* A stack of per-expert sources has every expert. */
static int
full_stack(struct safetensors *st, const char *name, const struct hp *h)
{
	const struct safetensors_out *o = find_out(st, name);

	for (int64_t e = 0; o->srcs != NULL && e < h->n_exp; e++)
		if (o->srcs[e] == NULL)
			return util_err(st->err, "'%s': no tensor for expert %lld in the checkpoint",
			    name, (long long)e);
	return 0;
}

/* Every tensor the architecture's loader requires is planned. */
static int
check_complete(struct safetensors *st, const struct hp *h)
{
	char name[128];
	int64_t b;
	size_t i;

	if (need(st, "token_embd.weight") != 0 || need(st, "output_norm.weight") != 0)
		return -1;
	for (b = 0; b < h->n_layer + h->n_mtp; b++) {
		int kind = b < h->n_layer ? h->kinds[b] : K_FULL;

		for (i = 0; i < sizeof layer_rules / sizeof layer_rules[0]; i++) {
			const struct rule *r = &layer_rules[i];

			if (!(r->arch & h->arch) || (r->kind != K_ANY && r->kind != kind))
				continue;
			snprintf(name, sizeof name, "blk.%lld.%s", (long long)b, r->gguf);
			if (need(st, name) != 0)
				return -1;
		}
		for (i = 0; h->arch == ARCH_QWEN35MOE && i < sizeof exp_rules / sizeof exp_rules[0];
		    i++) {
			snprintf(name, sizeof name, "blk.%lld.%s", (long long)b, exp_rules[i].gguf);
			if (need(st, name) != 0 || full_stack(st, name, h) != 0)
				return -1;
		}
		if (b < h->n_layer)
			continue;
		snprintf(name, sizeof name, "blk.%lld.nextn.eh_proj.weight", (long long)b);
		if (b == h->n_layer && need(st, name) != 0)
			return -1;
	}
	return 0;
}

void
st_plan_free(struct safetensors *st)
{
	free(st->out);
	free(st->kv);
	st->out = NULL;
	st->kv = NULL;
	st->nout = st->capout = st->nkv = st->capkv = 0;
	st->arch[0] = '\0';
}

/* ---- metadata ---- */

struct safetensors_kv *
st_kv_add(struct safetensors *st, const char *key, int type)
{
	struct safetensors_kv *kv;

	if (st->nkv == st->capkv) {
		size_t cap = st->capkv ? 2 * st->capkv : 32;
		void *p = realloc(st->kv, cap * sizeof *st->kv);

		if (p == NULL)
			return NULL;
		st->kv = p;
		st->capkv = cap;
	}
	kv = &st->kv[st->nkv];
	memset(kv, 0, sizeof *kv);
	if ((kv->key = st_keep(st, strdup(key))) == NULL)
		return NULL;
	kv->type = type;
	st->nkv++;
	return kv;
}

int
st_kv_u32(struct safetensors *st, const char *key, int64_t v)
{
	char k[128];
	struct safetensors_kv *kv;

	snprintf(k, sizeof k, "%s.%s", st->arch, key);
	if (v < 0 || v > UINT32_MAX)
		return util_err(st->err, "metadata '%s' = %lld out of range", k, (long long)v);
	if ((kv = st_kv_add(st, k, SAFETENSORS_KV_U32)) == NULL)
		return util_err(st->err, "out of memory");
	kv->v.u32 = (uint32_t)v;
	return 0;
}

int
st_kv_f32(struct safetensors *st, const char *key, double v)
{
	char k[128];
	struct safetensors_kv *kv;

	snprintf(k, sizeof k, "%s.%s", st->arch, key);
	if ((kv = st_kv_add(st, k, SAFETENSORS_KV_F32)) == NULL)
		return util_err(st->err, "out of memory");
	kv->v.f32 = (float)v;
	return 0;
}

int
st_kv_str(struct safetensors *st, const char *key, const char *s, size_t n)
{
	struct safetensors_kv *kv = st_kv_add(st, key, SAFETENSORS_KV_STR);
	char *p = malloc(n + 1);

	if (kv == NULL || (kv->s = st_keep(st, p)) == NULL)
		return util_err(st->err, "out of memory");
	memcpy(p, s, n);
	p[n] = '\0';
	kv->slen = n;
	return 0;
}

static int
kv_common(struct safetensors *st, const struct hp *h)
{
	const char *base = st->dir ? strrchr(st->dir, '/') : NULL;
	const char *name = base ? base + 1 : st->dir ? st->dir : "model";

	if (st_kv_str(st, "general.architecture", st->arch, strlen(st->arch)) != 0 ||
	    st_kv_str(st, "general.name", name, strlen(name)) != 0)
		return -1;
	if (st_kv_u32(st, "block_count", h->n_layer + h->n_mtp) != 0 ||
	    st_kv_u32(st, "context_length", h->n_ctx) != 0 ||
	    st_kv_u32(st, "embedding_length", h->n_embd) != 0 ||
	    (h->arch != ARCH_QWEN35MOE && st_kv_u32(st, "feed_forward_length", h->n_ff) != 0) ||
	    (h->arch != ARCH_STEP35 && (st_kv_u32(st, "attention.head_count", h->n_head) != 0 ||
	    st_kv_u32(st, "attention.head_count_kv", h->n_head_kv) != 0)) ||
	    st_kv_f32(st, "rope.freq_base", h->theta) != 0 ||
	    st_kv_f32(st, "attention.layer_norm_rms_epsilon", h->eps) != 0)
		return -1;
	if (h->has_head_dim && (st_kv_u32(st, "attention.key_length", h->head_dim) != 0 ||
	    st_kv_u32(st, "attention.value_length", h->head_dim) != 0))
		return -1;
	return 0;
}

static int
kv_llama(struct safetensors *st, const struct hp *h)
{
	return st_kv_u32(st, "vocab_size", h->n_vocab) != 0 ||
	    st_kv_u32(st, "rope.dimension_count", h->head_dim) != 0 ? -1 : 0;
}

static int
kv_qwen35(struct safetensors *st, const struct hp *h)
{
	struct safetensors_kv *kv;
	int32_t *sec;

	if (st_kv_u32(st, "rope.dimension_count", (int64_t)(h->head_dim * h->prf)) != 0)
		return -1;
	char key[64];

	snprintf(key, sizeof key, "%s.rope.dimension_sections", st->arch);
	if ((kv = st_kv_add(st, key, SAFETENSORS_KV_ARR)) == NULL ||
	    (sec = st_keep(st, malloc(sizeof h->sections))) == NULL)
		return util_err(st->err, "out of memory");
	memcpy(sec, h->sections, sizeof h->sections);
	kv->arr_type = SAFETENSORS_KV_I32;
	kv->n = 4;
	kv->i32 = sec;
	if (st_kv_u32(st, "ssm.conv_kernel", h->conv_k) != 0 ||
	    st_kv_u32(st, "ssm.state_size", h->lk_dim) != 0 ||
	    st_kv_u32(st, "ssm.group_count", h->lk_heads) != 0 ||
	    st_kv_u32(st, "ssm.time_step_rank", h->lv_heads) != 0 ||
	    st_kv_u32(st, "ssm.inner_size", h->lv_heads * h->lv_dim) != 0 ||
	    st_kv_u32(st, "full_attention_interval", h->interval) != 0)
		return -1;
	if (h->n_mtp > 0 && st_kv_u32(st, "nextn_predict_layers", h->n_mtp) != 0)
		return -1;
	if (h->arch == ARCH_QWEN35MOE && (st_kv_u32(st, "expert_count", h->n_exp) != 0 ||
	    st_kv_u32(st, "expert_used_count", h->n_exp_used) != 0 ||
	    st_kv_u32(st, "expert_feed_forward_length", h->n_ff) != 0 ||
	    st_kv_u32(st, "expert_shared_feed_forward_length", h->n_ff_shexp) != 0))
		return -1;
	return 0;
}

int
safetensors_plan(struct safetensors *st, int nomtp)
{
	struct hp *h = calloc(1, sizeof *h);
	const char *mt;
	size_t i;
	int rc = -1;

	st_plan_free(st);
	if (h == NULL)
		return util_err(st->err, "out of memory");
	if (st->config != NULL && (mt = json_get_str(st->config, "model_type")) != NULL &&
	    (strcmp(mt, "gemma4_text") == 0 || strcmp(mt, "gemma4") == 0 ||
	    strcmp(mt, "gemma4_assistant") == 0)) {
		free(h);
		if ((rc = st_plan_gemma4(st)) != 0)
			st_plan_free(st);
		return rc;
	}
	if (st->config != NULL && st_is_dflash(st)) {
		free(h);
		if ((rc = st_plan_dflash(st)) != 0)
			st_plan_free(st);
		return rc;
	}
	if (load_hparams(st, h, nomtp) != 0 || st_nv_config(st) != 0)
		goto out;
	snprintf(st->arch, sizeof st->arch, "%s", arch_name(h->arch));
	for (i = 0; i < st->nbyname; i++)
		if (map_tensor(st, h, &st->t[st->byname[i].i]) != 0)
			goto out;
	st_sort_out(st);
	if (h->arch == ARCH_STEP35) {
		rc = st_step35_complete(st, h) != 0 || kv_common(st, h) != 0 ||
		    st_step35_kv(st, h) != 0 ? -1 : 0;
		goto out;
	}
	if (check_complete(st, h) != 0 || st_nv_stacks(st) != 0 || kv_common(st, h) != 0)
		goto out;
	rc = h->arch == ARCH_LLAMA ? kv_llama(st, h) : kv_qwen35(st, h);
out:
	free(h);
	if (rc != 0)
		st_plan_free(st);
	return rc;
}

const char *
safetensors_arch(const struct safetensors *st)
{
	return st->arch;
}

size_t
safetensors_out_count(const struct safetensors *st)
{
	return st->nout;
}

const struct safetensors_out *
safetensors_out(const struct safetensors *st, size_t i)
{
	return i < st->nout ? &st->out[i] : NULL;
}

size_t
safetensors_kv_count(const struct safetensors *st)
{
	return st->nkv;
}

const struct safetensors_kv *
safetensors_kv(const struct safetensors *st, size_t i)
{
	return i < st->nkv ? &st->kv[i] : NULL;
}

/* ---- reading rows ---- */

/* V head t of the tiled order comes from head (t % nk) * (nv / nk) + t / nk of HF's grouped order */
static int64_t
vsrc(int64_t x, int64_t off, int64_t hs, int64_t nk, int64_t nv)
{
	int64_t q, t, d;

	if (x < off || x >= off + nv * hs)
		return x;
	q = x - off;
	t = q / hs;
	d = q % hs;
	return off + ((t % nk) * (nv / nk) + t / nk) * hs + d;
}

int64_t
st_src_row(const struct safetensors_out *o, int64_t r)
{
	if (o->perm == P_GATEUP)	/* expert r / pa's half pb, row r % pa */
		return (r / o->pa) * 2 * o->pa + o->pb * o->pa + r % o->pa;
	if (o->perm == P_ROPE) {
		int64_t hd = o->ne[1] / o->pa, h = r / hd, w = r % hd;

		return h * hd + (w % 2) * (hd / 2) + w / 2;
	}
	if (o->perm == P_VROWS)
		return vsrc(r, o->pa, o->pb, o->pc, o->pd);
	return r;
}

int64_t
st_src_col(const struct safetensors_out *o, int64_t j)
{
	return o->perm == P_VCOLS ? vsrc(j, 0, o->pb, o->pc, o->pd) : j;
}

static float
h2f(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
	float f;

	if (e == 0) {
		f = ldexpf((float)m, -24);
		return s ? -f : f;
	}
	if (e == 31)
		bits = s | 0x7f800000u | (m << 13);
	else
		bits = s | ((e + 112) << 23) | (m << 13);
	memcpy(&f, &bits, 4);
	return f;
}

static float
e4m3(uint8_t b)
{
	int s = b >> 7, e = (b >> 3) & 0xf, m = b & 7;
	float f;

	if ((b & 0x7f) == 0x7f)
		return NAN;
	f = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + m / 8.0f, e - 7);
	return s ? -f : f;
}

/* element i of a row of dtype dt as float */
static float
elem(const uint8_t *p, int dt, int64_t i)
{
	union { uint16_t u16; uint32_t u32; uint64_t u64; float f; double d; int16_t i16;
		int32_t i32; int64_t i64; } v;
	int es = safetensors_dtype_size(dt);

	memcpy(&v, p + i * es, (size_t)es);
	switch (dt) {
	case SAFETENSORS_F32: return v.f;
	case SAFETENSORS_F16: return h2f(v.u16);
	case SAFETENSORS_BF16: v.u32 = (uint32_t)v.u16 << 16; return v.f;
	case SAFETENSORS_F64: return (float)v.d;
	case SAFETENSORS_BOOL: case SAFETENSORS_U8: return (float)p[i];
	case SAFETENSORS_I8: return (float)(int8_t)p[i];
	case SAFETENSORS_I16: return (float)v.i16;
	case SAFETENSORS_U16: return (float)v.u16;
	case SAFETENSORS_I32: return (float)v.i32;
	case SAFETENSORS_U32: return (float)v.u32;
	case SAFETENSORS_I64: return (float)v.i64;
	case SAFETENSORS_U64: return (float)v.u64;
	case SAFETENSORS_F8_E4M3: return e4m3(p[i]);
	case SAFETENSORS_F8_E5M2: return h2f((uint16_t)(p[i] << 8));
	case SAFETENSORS_F8_E8M0: return p[i] == 0xff ? NAN : ldexpf(1.0f, p[i] - 127);
	}
	return NAN;
}

int
st_read_elem(const void *p, int dt, int64_t i, float *v)
{
	if (dt < 0 || dt >= SAFETENSORS_DTYPE_COUNT)
		return -1;
	*v = elem(p, dt, i);
	return 0;
}

/* n elements of dtype dt at s as float, the common types without a call per element */
static void
convert_row(const uint8_t *s, int dt, float *d, int64_t n)
{
	int64_t j;

	if (dt == SAFETENSORS_F32) {
		memcpy(d, s, (size_t)n * sizeof *d);
	} else if (dt == SAFETENSORS_BF16) {
		for (j = 0; j < n; j++) {
			uint32_t u = (uint32_t)(s[2 * j] | s[2 * j + 1] << 8) << 16;

			memcpy(&d[j], &u, 4);
		}
	} else if (dt == SAFETENSORS_F16) {
		for (j = 0; j < n; j++)
			d[j] = h2f((uint16_t)(s[2 * j] | s[2 * j + 1] << 8));
	} else {
		for (j = 0; j < n; j++)
			d[j] = elem(s, dt, j);
	}
}

/* The source bytes of planned row r (before any column permutation). */
static const uint8_t *
row_bytes(const struct safetensors_out *o, int64_t r)
{
	size_t rb = (size_t)o->ne[0] * safetensors_dtype_size(o->src_dtype);

	if (o->synth != NULL)
		return (const uint8_t *)(o->synth + r * o->ne[0]);

	if (o->srcs != NULL)
		return (const uint8_t *)o->srcs[r / o->src_rows]->data + (size_t)(r % o->src_rows) * rb;
	return (const uint8_t *)o->src->data + (size_t)st_src_row(o, r) * rb;
}

static int
check_range(const struct safetensors_out *o, int64_t row0, int64_t nrows, char *err)
{
	if (row0 < 0 || nrows < 0 || row0 > o->n_rows || nrows > o->n_rows - row0)
		return util_err(err, "tensor '%s': rows [%lld, %lld) outside its %lld rows", o->name,
		    (long long)row0, (long long)(row0 + nrows), (long long)o->n_rows);
	return 0;
}

/* d[j] *= the block scale of source row sr and d's source column */
static void
apply_scale(const struct safetensors_out *o, int64_t sr, float *d)
{
	const uint8_t *sc = o->scale->data;
	int64_t j, n0 = o->ne[0], ncb = o->scale->shape[1];
	int es = safetensors_dtype_size(o->scale->dtype);

	sc += (sr / o->bs[0]) * ncb * es;
	for (j = 0; j < n0; j++) {
		int64_t sj = o->perm == P_VCOLS ? vsrc(j, 0, o->pb, o->pc, o->pd) : j;

		d[j] *= elem(sc, o->scale->dtype, sj / o->bs[1]);
	}
}

int
safetensors_read_rows(const struct safetensors_out *o, int64_t row0, int64_t nrows,
    float *dst, char *err)
{
	int64_t r, j, n0 = o->ne[0];

	if (check_range(o, row0, nrows, err) != 0)
		return -1;
	for (r = 0; o->nvfp4 && r < nrows; r++)
		if (st_nv_row_f32(o, row0 + r, dst + r * n0, err) != 0)
			return -1;
	for (r = 0; !o->nvfp4 && r < nrows; r++) {
		const uint8_t *s = row_bytes(o, row0 + r);
		float *d = dst + r * n0;

		if (o->perm == P_VCOLS)
			for (j = 0; j < n0; j++)
				d[j] = elem(s, o->src_dtype, vsrc(j, 0, o->pb, o->pc, o->pd));
		else
			convert_row(s, o->src_dtype, d, n0);
		if (o->scale != NULL)
			apply_scale(o, st_src_row(o, row0 + r), d);
		if (o->xform == X_PLUS1)
			for (j = 0; j < n0; j++)
				d[j] += 1.0f;
		else if (o->xform == X_NEGEXP)
			for (j = 0; j < n0; j++)
				d[j] = -expf(d[j]);
	}
	return 0;
}

int
safetensors_read_raw(const struct safetensors_out *o, int64_t row0, int64_t nrows,
    void *dst, char *err)
{
	int64_t r, j, n0 = o->ne[0];
	size_t es = (size_t)safetensors_dtype_size(o->src_dtype);

	if (!o->verbatim)
		return util_err(err, "tensor '%s': values are transformed, not copied", o->name);
	if (check_range(o, row0, nrows, err) != 0)
		return -1;
	for (r = 0; o->nvfp4 && r < nrows; r++)
		st_nv_row(o, row0 + r, (uint8_t *)dst + r * (n0 / 64) * 36);
	for (r = 0; !o->nvfp4 && r < nrows; r++) {
		const uint8_t *s = row_bytes(o, row0 + r);
		uint8_t *d = (uint8_t *)dst + r * n0 * es;

		if (o->perm != P_VCOLS) {
			memcpy(d, s, (size_t)n0 * es);
			continue;
		}
		for (j = 0; j < n0; j++)
			memcpy(d + j * es, s + vsrc(j, 0, o->pb, o->pc, o->pd) * es, es);
	}
	return 0;
}

/* ---- step35: step3p7's text model (Step-3.5/3.7 Flash) ----
 *
 * transformers 5.17's Step3p7TextConfig and the hub layout save_pretrained
 * writes; GGUF names and metadata as llama.cpp's converter (conversion/
 * step3.py, Step35Model) writes them: every norm "+1", router_bias as
 * exp_probs_b.bias, the stacked experts [E][I][H] as {H, I, E}.  The
 * NextN layers (model.layers.N.. past num_hidden_layers, num_nextn_predict_layers
 * of them) follow the trunk as blocks N.. (block_count counts them, the
 * per-layer arrays have an entry each) with their blk.N.nextn.* tensors:
 * enorm, hnorm, eh_proj, shared_head.norm and the block's own head
 * shared_head.output (or .head; a "transformer." infix is dropped); a
 * block's embed_tokens copy is the trunk's and is left out.
 */

enum { S_ALL, S_DENSE, S_SPARSE };	/* which layers a tensor belongs to */

struct srule {
	const char *hf, *gguf;
	int	which;		/* S_* */
	int	ne0, ne1;	/* D_*, plus the per-layer D_HQL / D_HL below */
	int	plus1;
};
enum { D_HQL = 100, D_HL, D_FFE };

static const struct srule step35_rules[] = {
	{ "input_layernorm.weight", "attn_norm.weight", S_ALL, D_EMBD, D_NONE, 1 },
	{ "post_attention_layernorm.weight", "ffn_norm.weight", S_ALL, D_EMBD, D_NONE, 1 },
	{ "self_attn.q_proj.weight", "attn_q.weight", S_ALL, D_EMBD, D_HQL, 0 },
	{ "self_attn.k_proj.weight", "attn_k.weight", S_ALL, D_EMBD, D_KVO, 0 },
	{ "self_attn.v_proj.weight", "attn_v.weight", S_ALL, D_EMBD, D_KVO, 0 },
	{ "self_attn.o_proj.weight", "attn_output.weight", S_ALL, D_HQL, D_EMBD, 0 },
	{ "self_attn.q_norm.weight", "attn_q_norm.weight", S_ALL, D_HD, D_NONE, 1 },
	{ "self_attn.k_norm.weight", "attn_k_norm.weight", S_ALL, D_HD, D_NONE, 1 },
	{ "self_attn.g_proj.weight", "attn_gate.weight", S_ALL, D_EMBD, D_HL, 0 },
	{ "mlp.gate_proj.weight", "ffn_gate.weight", S_DENSE, D_EMBD, D_FF, 0 },
	{ "mlp.up_proj.weight", "ffn_up.weight", S_DENSE, D_EMBD, D_FF, 0 },
	{ "mlp.down_proj.weight", "ffn_down.weight", S_DENSE, D_FF, D_EMBD, 0 },
	{ "moe.gate.weight", "ffn_gate_inp.weight", S_SPARSE, D_EMBD, D_NEXP, 0 },
	{ "moe.router_bias", "exp_probs_b.bias", S_SPARSE, D_NEXP, D_NONE, 0 },
	{ "share_expert.gate_proj.weight", "ffn_gate_shexp.weight", S_SPARSE, D_EMBD, D_FFSH, 0 },
	{ "share_expert.up_proj.weight", "ffn_up_shexp.weight", S_SPARSE, D_EMBD, D_FFSH, 0 },
	{ "share_expert.down_proj.weight", "ffn_down_shexp.weight", S_SPARSE, D_FFSH, D_EMBD, 0 },
	/* the stacked experts [E][rows][ne0] */
	{ "moe.gate_proj.weight", "ffn_gate_exps.weight", S_SPARSE, D_EMBD, D_FFE, 0 },
	{ "moe.up_proj.weight", "ffn_up_exps.weight", S_SPARSE, D_EMBD, D_FFE, 0 },
	{ "moe.down_proj.weight", "ffn_down_exps.weight", S_SPARSE, D_FFE, D_EMBD, 0 },
};
#define STEP35_NEXPS 3	/* the last rules: 3-D expert stacks */

/* A NextN block's own tensors (gguf NULL: left out). */
static const struct srule nextn_rules[] = {
	{ "enorm.weight", "nextn.enorm.weight", S_ALL, D_EMBD, D_NONE, 1 },
	{ "hnorm.weight", "nextn.hnorm.weight", S_ALL, D_EMBD, D_NONE, 1 },
	{ "eh_proj.weight", "nextn.eh_proj.weight", S_ALL, D_EMBD2, D_EMBD, 0 },
	{ "shared_head.norm.weight", "nextn.shared_head_norm.weight", S_ALL, D_EMBD, D_NONE, 1 },
	{ "shared_head.output.weight", "nextn.shared_head_head.weight", S_ALL, D_EMBD, D_VOCAB, 0 },
	{ "shared_head.head.weight", "nextn.shared_head_head.weight", S_ALL, D_EMBD, D_VOCAB, 0 },
	{ "embed_tokens.weight", NULL, S_ALL, D_EMBD, D_VOCAB, 0 },
};

static int64_t
sdim(const struct hp *h, int64_t il, int d)
{
	switch (d) {
	case D_HQL: return h->heads[il] * h->head_dim;
	case D_HL: return h->heads[il];
	case D_FFE: return h->n_ff_exp;
	}
	return dim(h, d);
}

/*
 * A per-layer array of numbers (null entries 0) into v[n]; absent: all def.
 * The entries past need (the NextN layers') may be missing: def.
 */
static int
s_list(struct safetensors *st, const char *key, int64_t n, int64_t need, float def, float *v)
{
	const struct json *a = safetensors_hparam(st, key);

	for (int64_t i = 0; i < n; i++)
		v[i] = def;
	if (a == NULL || a->type == JSON_NULL)
		return 0;
	if (a->type != JSON_ARRAY || (int64_t)a->n < need)
		return util_err(st->err, "config.json: '%s' is not an array of %lld", key,
		    (long long)need);
	if ((int64_t)a->n < n)
		n = need;
	for (int64_t i = 0; i < n; i++) {
		const struct json *e = &a->items[i];

		if (e->type != JSON_NULL && e->type != JSON_NUMBER)
			return util_err(st->err, "config.json: '%s'[%lld] is not a number", key,
			    (long long)i);
		v[i] = e->type == JSON_NUMBER ? (float)e->num : 0.0f;
	}
	return 0;
}

/* rope_parameters[type].key, else the legacy per-layer list's entry for layer il, else def. */
static double
s_rope(struct safetensors *st, const char *type, const char *key, const char *legacy, int64_t il,
    double def)
{
	const struct json *rp = safetensors_hparam(st, "rope_parameters"), *o, *v;

	o = rp != NULL && rp->type == JSON_OBJECT ? json_get(rp, type) : NULL;
	v = o != NULL && o->type == JSON_OBJECT ? json_get(o, key) : NULL;
	if (v != NULL && v->type == JSON_NUMBER)
		return v->num;
	if (il < 0)
		return def;
	v = safetensors_hparam(st, legacy);
	if (v != NULL && v->type == JSON_NUMBER)
		return v->num;
	if (v != NULL && v->type == JSON_ARRAY && (int64_t)v->n > il &&
	    v->items[il].type == JSON_NUMBER)
		return v->items[il].num;
	return def;
}

/* Entry i of a list of strings, else entry i - n of its NextN list (mkey), else NULL. */
static const char *
s_str(struct safetensors *st, const char *key, const char *mkey, int64_t n, int64_t i)
{
	const struct json *a = safetensors_hparam(st, key);

	if (i >= n && (a == NULL || a->type != JSON_ARRAY || (int64_t)a->n <= i))
		a = safetensors_hparam(st, mkey), i -= n;
	return a != NULL && a->type == JSON_ARRAY && (int64_t)a->n > i &&
	    a->items[i].type == JSON_STRING ? a->items[i].str : NULL;
}

/*
 * layer_types and the MLP kinds (mlp_layer_types, or legacy moe_layers_enum),
 * the NextN layers' too: the legacy lists padded past the trunk, or
 * transformers' mtp_layer_types / mtp_mlp_layer_types; else full attention
 * and a dense MLP (llama.cpp's defaults).
 */
static int
s_kinds(struct safetensors *st, struct hp *h)
{
	const struct json *en = safetensors_hparam(st, "moe_layers_enum");

	for (int64_t i = 0; i < h->n_layer + h->n_nextn; i++) {
		const char *s = s_str(st, "layer_types", "mtp_layer_types", h->n_layer, i);
		const char *m = s_str(st, "mlp_layer_types", "mtp_mlp_layer_types", h->n_layer, i);

		if (s == NULL)
			s = "full_attention";

		if (strcmp(s, "sliding_attention") != 0 && strcmp(s, "full_attention") != 0)
			return util_err(st->err, "config.json: layer_types[%lld] '%s' is not "
			    "supported", (long long)i, s);
		h->swa[i] = s[0] == 's';
		h->heads[i] = (int)(h->swa[i] ? h->n_head_swa : h->n_head);
		if (m != NULL)
			h->sparse[i] = strcmp(m, "sparse") == 0;
		else if (en != NULL && en->type == JSON_STRING) {
			char pat[32];

			snprintf(pat, sizeof pat, ",%lld,", (long long)i);
			h->sparse[i] = 0;
			for (const char *p = en->str; *p; p++)	/* "3,4,5": a match at a boundary */
				if ((p == en->str || p[-1] == ',') &&
				    strncmp(p, pat + 1, strlen(pat + 1) - 1) == 0 &&
				    (p[strlen(pat + 1) - 1] == ',' || p[strlen(pat + 1) - 1] == '\0'))
					h->sparse[i] = 1;
		} else
			h->sparse[i] = i >= 3 && i < h->n_layer;
	}
	return 0;
}

/* The first layer of each kind gives its RoPE (as transformers reads them). */
static int
s_rope_all(struct safetensors *st, struct hp *h)
{
	int64_t f = -1, w = -1;

	for (int64_t i = 0; i < h->n_layer; i++)
		if (h->swa[i] ? w < 0 : f < 0)
			*(h->swa[i] ? &w : &f) = i;
	h->theta = s_rope(st, "full_attention", "rope_theta", "rope_theta", f, 10000.0);
	h->prf = s_rope(st, "full_attention", "partial_rotary_factor", "partial_rotary_factors", f,
	    1.0);
	h->theta_swa = s_rope(st, "sliding_attention", "rope_theta", "rope_theta", w, h->theta);
	h->prf_swa = s_rope(st, "sliding_attention", "partial_rotary_factor",
	    "partial_rotary_factors", w, 1.0);
	if (f < 0)	/* no full layer: llama.cpp's keys still need its entry */
		h->theta = h->theta_swa, h->prf = h->prf_swa / 2;
	if ((int64_t)(h->head_dim * h->prf) % 2 || (int64_t)(h->head_dim * h->prf_swa) % 2 ||
	    h->prf <= 0 || h->prf > 1 || h->prf_swa <= 0 || h->prf_swa > 1)
		return util_err(st->err, "config.json: partial rotary factors %g, %g of head_dim "
		    "%lld", h->prf, h->prf_swa, (long long)h->head_dim);
	return 0;
}

static int
s_int2(struct safetensors *st, const char *a, const char *b, int64_t def, int64_t *out)
{
	int rc = hp_int(st, a, def, out);

	return rc == 1 ? hp_int(st, b, def, out) : rc;
}

static int
st_step35_hparams(struct safetensors *st, struct hp *h)
{
	const struct json *ao = safetensors_hparam(st, "attention_other_setting");

	if (hp_need(st, "num_hidden_layers", 1, &h->n_layer) != 0 ||
	    hp_need(st, "hidden_size", 1, &h->n_embd) != 0 ||
	    hp_need(st, "intermediate_size", 1, &h->n_ff) != 0 ||
	    hp_need(st, "num_attention_heads", 1, &h->n_head) != 0 ||
	    hp_need(st, "vocab_size", 1, &h->n_vocab) != 0 ||
	    s_int2(st, "num_key_value_heads", "num_attention_groups", h->n_head, &h->n_head_kv) < 0 ||
	    hp_int(st, "max_position_embeddings", 0, &h->n_ctx) < 0 ||
	    hp_int(st, "num_sliding_attention_heads", h->n_head, &h->n_head_swa) < 0 ||
	    hp_int(st, "sliding_window", 0, &h->window) < 0 ||
	    s_int2(st, "n_routed_experts", "moe_num_experts", 0, &h->n_exp) < 0 ||
	    s_int2(st, "num_experts_per_tok", "moe_top_k", 0, &h->n_exp_used) < 0 ||
	    hp_int(st, "moe_intermediate_size", 0, &h->n_ff_exp) < 0 ||
	    s_int2(st, "share_expert_dim", "share_expert_dims", 0, &h->n_ff_shexp) < 0 ||
	    s_int2(st, "num_nextn_predict_layers", "num_mtp_layers", 0, &h->n_nextn) < 0)
		return -1;
	if (ao != NULL && ao->type == JSON_OBJECT && safetensors_hparam(st,
	    "num_sliding_attention_heads") == NULL && json_get(ao, "num_attention_heads") != NULL &&
	    json_get(ao, "num_attention_heads")->is_int)
		h->n_head_swa = json_get(ao, "num_attention_heads")->i;
	h->has_head_dim = 1;
	if (hp_int(st, "head_dim", h->n_embd / h->n_head, &h->head_dim) < 0 ||
	    hp_num(st, "rms_norm_eps", 1e-5, &h->eps) != 0 ||
	    hp_num(st, "moe_router_scaling_factor", 1.0, &h->scale) != 0 ||
	    hp_num(st, "query_pre_attn_scalar", (double)h->head_dim, &h->qpas) != 0)
		return -1;
	if (h->n_layer > 1000 || h->n_nextn < 0 || h->n_nextn > 8 || h->head_dim < 2 || h->n_head_kv < 1 || h->n_head % h->n_head_kv ||
	    h->n_head_swa < 1 || h->n_head_swa % h->n_head_kv || h->qpas <= 0)
		return util_err(st->err, "config.json: bad step3p7 attention shape");
	if (s_kinds(st, h) != 0 || s_rope_all(st, h) != 0 ||
	    s_list(st, "swiglu_limits", h->n_layer + h->n_nextn, h->n_layer, 0, h->lim_exp) != 0 ||
	    s_list(st, "swiglu_limits_shared", h->n_layer + h->n_nextn, h->n_layer, 0,
	    h->lim_sh) != 0)
		return -1;
	h->n_mtp = h->n_nextn;	/* block_count counts them */
	for (int64_t i = 0; i < h->n_layer + h->n_nextn; i++)
		if (h->sparse[i] && (h->n_exp < 1 || h->n_exp_used < 1 || h->n_exp_used > h->n_exp ||
		    h->n_ff_exp < 1 || h->n_ff_shexp < 1))
			return util_err(st->err, "config.json: bad experts (%lld, %lld a token, "
			    "widths %lld, shared %lld)", (long long)h->n_exp,
			    (long long)h->n_exp_used, (long long)h->n_ff_exp, (long long)h->n_ff_shexp);
	return 0;
}

/* The stacked experts [E][rows][ne0] as {ne0, rows, E}. */
static int
s_stack(struct safetensors *st, const struct hp *h, const struct safetensors_tensor *t,
    int64_t il, const struct srule *r, const char *name)
{
	int64_t ne0 = sdim(h, il, r->ne0), rows = sdim(h, il, r->ne1);

	if (t->n_dims != 3 || t->shape[0] != h->n_exp || t->shape[1] != rows || t->shape[2] != ne0)
		return util_err(st->err, "tensor '%s': not [%lld, %lld, %lld] as config.json implies",
		    t->name, (long long)h->n_exp, (long long)rows, (long long)ne0);
	return stack_out(st, h, t, name, ne0, rows) != NULL ? 0 : -1;
}

static int s_layer_map(struct safetensors *, const struct hp *, const struct safetensors_tensor *,
	    long long, const char *);

/* A NextN layer's tensor: its own (nextn_rules), else its decoder block's. */
static int
s_nextn_map(struct safetensors *st, const struct hp *h, const struct safetensors_tensor *t,
    long long il, const char *rest)
{
	char gname[96];

	if (strncmp(rest, "transformer.", 12) == 0)
		rest += 12;
	for (size_t i = 0; i < sizeof nextn_rules / sizeof nextn_rules[0]; i++) {
		const struct srule *r = &nextn_rules[i];
		struct rule q = { r->hf, r->gguf, ARCH_STEP35, K_ANY, r->ne0, r->ne1,
		    r->plus1 ? X_PLUS1 : X_NONE, V_NONE, 0, 0 };

		if (strcmp(rest, r->hf) != 0)
			continue;
		if (r->gguf == NULL)
			return 0;
		snprintf(gname, sizeof gname, "blk.%lld.%s", il, r->gguf);
		return add_out(st, h, t, &q, gname);
	}
	return s_layer_map(st, h, t, il, rest);
}

static int
st_step35_map(struct safetensors *st, const struct hp *h, const struct safetensors_tensor *t,
    const char *norm)
{
	const char *rest;
	char *end;
	long long il;

	for (size_t i = 0; i < sizeof global_rules / sizeof global_rules[0]; i++)
		if ((global_rules[i].arch & ARCH_QWEN35) && strncmp(norm, "mtp.", 4) != 0 &&
		    strcmp(global_rules[i].hf, norm) == 0)
			return add_out(st, h, t, &global_rules[i], global_rules[i].gguf);
	if (strncmp(norm, "model.layers.", 13) != 0)
		return util_err(st->err, "tensor '%s' has no GGUF name for step35", t->name);
	il = strtoll(norm + 13, &end, 10);
	if (end == norm + 13 || *end != '.' || il < 0 ||
	    il >= h->n_layer + h->n_nextn + h->n_dropped)
		return util_err(st->err, "tensor '%s': layer number out of range", t->name);
	if (il >= h->n_layer + h->n_nextn)	/* a NextN layer --no-mtp leaves out */
		return 0;
	rest = end + 1;
	return il >= h->n_layer ? s_nextn_map(st, h, t, il, rest) : s_layer_map(st, h, t, il, rest);
}

/* Layer il's decoder-block tensor (rest: its name past "model.layers.il."). */
static int
s_layer_map(struct safetensors *st, const struct hp *h, const struct safetensors_tensor *t,
    long long il, const char *rest)
{
	size_t nr = sizeof step35_rules / sizeof step35_rules[0];
	char gname[96];

	for (size_t i = 0; i < nr; i++) {
		const struct srule *r = &step35_rules[i];
		struct rule q = { r->hf, r->gguf, ARCH_STEP35, K_ANY, D_EMBD, D_NONE,
		    r->plus1 ? X_PLUS1 : X_NONE, V_NONE, 0, 0 };

		if (strcmp(rest, r->hf) != 0)
			continue;
		if (r->which != S_ALL && (r->which == S_SPARSE) != h->sparse[il])
			return util_err(st->err, "tensor '%s' in a %s layer", t->name,
			    h->sparse[il] ? "sparse" : "dense");
		snprintf(gname, sizeof gname, "blk.%lld.%s", il, r->gguf);
		if (i >= nr - STEP35_NEXPS)
			return s_stack(st, h, t, il, r, gname);
		/* add_out checks the shape against dim(): the per-layer dims resolved here */
		struct hp *hl = (struct hp *)h;
		int64_t keep = hl->n_head;

		hl->n_head = h->heads[il];
		q.ne0 = r->ne0 == D_HQL ? D_HQ : r->ne0 == D_FFE ? D_FF : r->ne0;
		q.ne1 = r->ne1 == D_HQL ? D_HQ : r->ne1 == D_HL ? D_NHEAD : r->ne1;
		int rc = add_out(st, h, t, &q, gname);

		hl->n_head = keep;
		return rc;
	}
	return util_err(st->err, "tensor '%s' has no GGUF name for step35", t->name);
}

static int
st_step35_complete(struct safetensors *st, const struct hp *h)
{
	char name[128];

	if (need(st, "token_embd.weight") != 0 || need(st, "output_norm.weight") != 0 ||
	    need(st, "output.weight") != 0)
		return -1;
	for (int64_t b = 0; b < h->n_layer + h->n_nextn; b++) {
		for (size_t i = 0; i < sizeof step35_rules / sizeof step35_rules[0]; i++) {
			const struct srule *r = &step35_rules[i];

			if (r->which != S_ALL && (r->which == S_SPARSE) != h->sparse[b])
				continue;
			snprintf(name, sizeof name, "blk.%lld.%s", (long long)b, r->gguf);
			if (need(st, name) != 0)
				return -1;
		}
		for (size_t i = 0; b >= h->n_layer && i < 3; i++) {	/* enorm, hnorm, eh_proj */
			snprintf(name, sizeof name, "blk.%lld.%s", (long long)b, nextn_rules[i].gguf);
			if (need(st, name) != 0)
				return -1;
		}
	}
	return 0;
}

static int
s_kv_arr(struct safetensors *st, const char *key, int type, int64_t n, const void *v)
{
	struct safetensors_kv *kv;
	char k[128];
	size_t es = type == SAFETENSORS_KV_BOOL ? 1 : 4;
	void *p;

	snprintf(k, sizeof k, "%s.%s", st->arch, key);
	if ((kv = st_kv_add(st, k, SAFETENSORS_KV_ARR)) == NULL ||
	    (p = st_keep(st, malloc((size_t)n * es))) == NULL)
		return util_err(st->err, "out of memory");
	memcpy(p, v, (size_t)n * es);
	kv->arr_type = type;
	kv->n = (uint64_t)n;
	if (type == SAFETENSORS_KV_F32)
		kv->f32 = p;
	else if (type == SAFETENSORS_KV_BOOL)
		kv->u8 = p;
	else
		kv->i32 = p;
	return 0;
}

static int
st_step35_kv(struct safetensors *st, const struct hp *h)
{
	int64_t n = h->n_layer + h->n_nextn, lead = 0;	/* the arrays: an entry a block */
	int32_t *heads = st_keep(st, malloc(n * sizeof *heads));
	int32_t *kvh = st_keep(st, malloc(n * sizeof *kvh));

	if (heads == NULL || kvh == NULL)
		return util_err(st->err, "out of memory");
	for (int64_t i = 0; i < n; i++)
		heads[i] = h->heads[i], kvh[i] = (int32_t)h->n_head_kv;
	while (lead < h->n_layer && !h->sparse[lead])
		lead++;
	if (s_kv_arr(st, "attention.head_count", SAFETENSORS_KV_I32, n, heads) != 0 ||
	    s_kv_arr(st, "attention.head_count_kv", SAFETENSORS_KV_I32, n, kvh) != 0 ||
	    s_kv_arr(st, "attention.sliding_window_pattern", SAFETENSORS_KV_BOOL, n, h->swa) != 0 ||
	    (h->n_nextn > 0 && st_kv_u32(st, "nextn_predict_layers", h->n_nextn) != 0) ||
	    st_kv_u32(st, "attention.sliding_window", h->window) != 0 ||
	    /* llama.cpp: full layers rotate dimension_count / 2, sliding ones _swa */
	    st_kv_u32(st, "rope.dimension_count", 2 * (int64_t)(h->head_dim * h->prf)) != 0 ||
	    st_kv_u32(st, "rope.dimension_count_swa", (int64_t)(h->head_dim * h->prf_swa)) != 0 ||
	    st_kv_f32(st, "rope.freq_base_swa", h->theta_swa) != 0 ||
	    st_kv_u32(st, "expert_count", h->n_exp) != 0 ||
	    st_kv_u32(st, "expert_used_count", h->n_exp_used) != 0 ||
	    st_kv_u32(st, "expert_feed_forward_length", h->n_ff_exp) != 0 ||
	    st_kv_u32(st, "expert_shared_feed_forward_length", h->n_ff_shexp) != 0 ||
	    st_kv_f32(st, "expert_weights_scale", h->scale) != 0 ||
	    st_kv_u32(st, "leading_dense_block_count", lead) != 0 ||
	    s_kv_arr(st, "swiglu_clamp_exp", SAFETENSORS_KV_F32, n, h->lim_exp) != 0 ||
	    s_kv_arr(st, "swiglu_clamp_shexp", SAFETENSORS_KV_F32, n, h->lim_sh) != 0)
		return -1;
	struct safetensors_kv *kv;
	char k[128];

	snprintf(k, sizeof k, "%s.expert_weights_norm", st->arch);
	if ((kv = st_kv_add(st, k, SAFETENSORS_KV_BOOL)) == NULL)
		return util_err(st->err, "out of memory");
	kv->v.b = 1;	/* transformers always renormalises the chosen weights */
	if (h->qpas != (double)h->head_dim &&
	    st_kv_f32(st, "attention.scale", 1.0 / sqrt(h->qpas)) != 0)
		return -1;
	return 0;
}
