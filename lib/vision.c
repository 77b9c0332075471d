#include "vision.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gguf.h"
#include "image.h"
#include "json.h"
#include "model.h"
#include "quant.h"
#include "safetensors.h"
#include "sha256.h"
#include "tokenizer.h"
#include "util.h"

/*
 * Loading: every tensor is looked up by its GGUF name (llama.cpp's mmproj)
 * or the HF name it converts from; matrices are bound in place in their
 * own type (the source stays open), vectors and the two tables that need
 * another layout (the patch embedding of a GGUF, stored as a conv kernel;
 * the position tables) are made float32 on the host.
 */

enum { V_Q, V_K, V_V, V_O, V_GATE, V_UP, V_DOWN, V_NLIN };
static const char *const lin_gguf[V_NLIN] = { "attn_q", "attn_k", "attn_v", "attn_out",
	"ffn_gate", "ffn_up", "ffn_down" };
static const char *const lin_hf[V_NLIN] = { "self_attn.q_proj", "self_attn.k_proj",
	"self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj" };
enum { N_IN, N_POST_ATTN, N_PRE_FFN, N_POST_FFN, N_Q, N_K, N_NORMS };
static const char *const norm_gguf[N_NORMS] = { "ln1", "attn_post_norm", "ln2",
	"ffn_post_norm", "attn_q_norm", "attn_k_norm" };
static const char *const norm_hf[N_NORMS] = { "input_layernorm", "post_attention_layernorm",
	"pre_feedforward_layernorm", "post_feedforward_layernorm", "self_attn.q_norm",
	"self_attn.k_norm" };

struct vact;

struct vision_layer {
	struct backend_weight w[V_NLIN];
	float	clip[V_NLIN][4];	/* input min, max, output min, max */
	float	*norm[N_NORMS];		/* backend memory */
};

struct vision {
	struct vision_hparams hp;
	struct backend *be;
	struct safetensors *st;
	struct gguf *gg;
	struct backend_weight patch;	/* [n_embd][patch^2 * 3], HF's (py, px, c) order */
	struct backend_weight pos;	/* [2 n_pos][n_embd]: x rows, then y rows */
	struct backend_weight proj;	/* [n_embd_text][n_embd] */
	void	*patch_host;		/* a GGUF's, reordered (NULL: in place) */
	float	*pos_host;		/* the tables in float32 */
	float	*std_bias, *std_scale;	/* host [n_embd], NULL without */
	struct vision_layer *layers;
	struct vact *ws;		/* the working buffers vision_reserve keeps, or NULL */
	char	err[UTIL_ERRLEN];
};

/* A tensor of the source: its ggml type, shape (GGUF order) and bytes. */
struct vt {
	const void *data;
	int	type;
	int	n_dims;
	int64_t	ne[4];
};

static int
find_st(struct vision *v, const char *hf, struct vt *t)
{
	const struct safetensors_tensor *s = safetensors_find(v->st, hf);

	if (s == NULL)
		return 0;
	if ((t->type = safetensors_dtype_ggml(s->dtype)) < 0 || s->n_dims > 4)
		return util_err(v->err, "tensor '%s': %s of %d dims", hf,
		    safetensors_dtype_name(s->dtype), s->n_dims);
	t->data = s->data, t->n_dims = s->n_dims;
	for (int d = 0; d < 4; d++)
		t->ne[d] = d < s->n_dims ? s->shape[s->n_dims - 1 - d] : 1;
	return 1;
}

static int
find_gg(struct vision *v, const char *name, struct vt *t)
{
	int64_t i = gguf_find_tensor(v->gg, name);
	const struct gguf_tensor *g;

	if (i < 0)
		return 0;
	g = gguf_tensor(v->gg, i);
	if ((t->data = gguf_tensor_data(v->gg, i)) == NULL)
		return util_err(v->err, "tensor '%s': %s", name, gguf_errmsg(v->gg));
	t->type = g->type, t->n_dims = g->n_dims;
	memcpy(t->ne, g->ne, sizeof t->ne);
	return 1;
}

/* The tensor gguf_name / hf_name: 1 found, 0 absent (an error when required), -1. */
static int
find(struct vision *v, const char *gname, const char *hname, int required, struct vt *t)
{
	int rc = v->gg != NULL ? find_gg(v, gname, t) : find_st(v, hname, t);

	if (rc == 0 && required)
		return util_err(v->err, "tensor '%s' missing", v->gg != NULL ? gname : hname);
	return rc;
}

static int64_t
vt_nelem(const struct vt *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* t's values as float32 (n of them), into host memory dst. */
static int
vt_f32(struct vision *v, const struct vt *t, const char *what, float *dst, int64_t n)
{
	if (vt_nelem(t) != n)
		return util_err(v->err, "tensor '%s': %lld values, want %lld", what,
		    (long long)vt_nelem(t), (long long)n);
	if (t->type != 0 && !quant_can_dequantize(t->type))
		return util_err(v->err, "tensor '%s': type %s", what, quant_name(t->type));
	for (int64_t r = 0; r < n / t->ne[0]; r++)
		if (quant_dequantize_row(t->type, (const char *)t->data + r *
		    quant_row_size(t->type, t->ne[0]), dst + r * t->ne[0], t->ne[0]) != 0)
			return util_err(v->err, "tensor '%s': cannot read", what);
	return 0;
}

/* A vector of n floats into backend memory (*out), or NULL when absent and optional. */
static int
load_vec(struct vision *v, const char *gname, const char *hname, int64_t n, int required,
    float **out)
{
	struct vt t;
	float *h;
	int rc = find(v, gname, hname, required, &t);

	*out = NULL;
	if (rc <= 0)
		return rc;
	if ((h = malloc(n * sizeof *h)) == NULL)
		return util_err(v->err, "out of memory");
	if (vt_f32(v, &t, v->gg ? gname : hname, h, n) != 0 ||
	    (*out = backend_alloc(v->be, n)) == NULL || backend_write(v->be, *out, h, n) != 0) {
		free(h);
		return v->err[0] ? -1 : util_err(v->err, "%s", backend_errmsg(v->be));
	}
	free(h);
	return 1;
}

/* A matrix [rows][cols] bound in place. */
static int
load_mat(struct vision *v, const char *gname, const char *hname, int64_t cols, int64_t rows,
    struct backend_weight *w)
{
	struct vt t;

	if (find(v, gname, hname, 1, &t) < 0)
		return -1;
	if (t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != 1 || t.ne[3] != 1)
		return util_err(v->err, "tensor '%s': %lldx%lld, want %lldx%lld",
		    v->gg ? gname : hname, (long long)t.ne[0], (long long)t.ne[1], (long long)cols,
		    (long long)rows);
	if (backend_weight_init(v->be, w, t.type, cols, rows, t.data, 1.0f) != 0)
		return util_err(v->err, "tensor '%s': %s", v->gg ? gname : hname,
		    backend_errmsg(v->be));
	v->hp.half |= t.type == QUANT_BF16 || t.type == QUANT_F16;
	return 0;
}

/* A clipped linear's four bounds (absent: +-FLT_MAX, as llama.cpp's loader). */
static int
load_clip(struct vision *v, int il, int k, float c[4])
{
	static const char *const sfx[4] = { "input_min", "input_max", "output_min", "output_max" };
	char g[96], h[160];

	for (int i = 0; i < 4; i++) {
		struct vt t;
		int rc;

		snprintf(g, sizeof g, "v.blk.%d.%s.%s", il, lin_gguf[k], sfx[i]);
		snprintf(h, sizeof h, "model.vision_tower.encoder.layers.%d.%s.%s", il, lin_hf[k],
		    sfx[i]);
		c[i] = i % 2 ? FLT_MAX : -FLT_MAX;
		if ((rc = find(v, g, h, 0, &t)) < 0 ||
		    (rc == 1 && vt_f32(v, &t, v->gg ? g : h, &c[i], 1) != 0))
			return -1;
		v->hp.clipped |= rc;
	}
	return 0;
}

static int
load_layer(struct vision *v, int il)
{
	const struct vision_hparams *hp = &v->hp;
	struct vision_layer *L = &v->layers[il];
	int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
	int64_t in[V_NLIN] = { hp->n_embd, hp->n_embd, hp->n_embd, qd, hp->n_embd, hp->n_embd,
	    hp->n_ff };
	int64_t out[V_NLIN] = { qd, kvd, kvd, hp->n_embd, hp->n_ff, hp->n_ff, hp->n_embd };
	char g[96], h[160];

	for (int k = 0; k < V_NLIN; k++) {
		snprintf(g, sizeof g, "v.blk.%d.%s.weight", il, lin_gguf[k]);
		snprintf(h, sizeof h, "model.vision_tower.encoder.layers.%d.%s.linear.weight", il,
		    lin_hf[k]);
		if (load_mat(v, g, h, in[k], out[k], &L->w[k]) != 0 || load_clip(v, il, k, L->clip[k]))
			return -1;
	}
	for (int k = 0; k < N_NORMS; k++) {
		snprintf(g, sizeof g, "v.blk.%d.%s.weight", il, norm_gguf[k]);
		snprintf(h, sizeof h, "model.vision_tower.encoder.layers.%d.%s.weight", il,
		    norm_hf[k]);
		if (load_vec(v, g, h, k >= N_Q ? hp->head_dim : hp->n_embd, 1, &L->norm[k]) < 0)
			return -1;
	}
	return 0;
}

/* The patch embedding: HF's [n_embd][p p 3] as it is; a GGUF's conv kernel
 * [n_embd][3][p][p] back to (py, px, c) order: an F16 or BF16 kernel's
 * values moved as they are (so its product stays a half one,
 * backend_matmul_half), any other type's in float32. */
static int
load_patch(struct vision *v)
{
	const struct vision_hparams *hp = &v->hp;
	int p = hp->patch, pd = p * p * 3, half;
	size_t n = (size_t)hp->n_embd * pd, es;
	struct vt t;
	char *k;

	if (v->gg == NULL)
		return load_mat(v, "", "model.vision_tower.patch_embedder.input_proj.weight", pd,
		    hp->n_embd, &v->patch);
	if (find(v, "v.patch_embd.weight", "", 1, &t) < 0)
		return -1;
	if (t.ne[0] != p || t.ne[1] != p || t.ne[2] != 3 || t.ne[3] != hp->n_embd)
		return util_err(v->err, "tensor 'v.patch_embd.weight': not [%d][3][%d][%d]",
		    hp->n_embd, p, p);
	half = t.type == QUANT_F16 || t.type == QUANT_BF16;
	es = half ? 2 : sizeof(float);
	if ((k = malloc(n * es)) == NULL || (v->patch_host = malloc(n * es)) == NULL) {
		free(k);
		return util_err(v->err, "out of memory");
	}
	if (half)
		memcpy(k, t.data, n * es);
	else if (vt_f32(v, &t, "v.patch_embd.weight", (float *)k, (int64_t)n) != 0) {
		free(k);
		return -1;
	}
	for (int o = 0; o < hp->n_embd; o++)
		for (int c = 0; c < 3; c++)
			for (int i = 0; i < p * p; i++)
				memcpy((char *)v->patch_host + ((size_t)o * pd + i * 3 + c) * es,
				    k + (((size_t)o * 3 + c) * p * p + i) * es, es);
	free(k);
	v->hp.half |= half;
	if (backend_weight_init(v->be, &v->patch, half ? t.type : QUANT_F32, pd, hp->n_embd,
	    v->patch_host, 1.0f) != 0)
		return util_err(v->err, "v.patch_embd.weight: %s", backend_errmsg(v->be));
	return 0;
}

/* The position tables [2][n_pos][n_embd] in float32 (n_pos from the tensor). */
static int
load_pos(struct vision *v)
{
	struct vision_hparams *hp = &v->hp;
	const char *g = "v.position_embd.weight";
	const char *h = "model.vision_tower.patch_embedder.position_embedding_table";
	struct vt t;

	if (find(v, g, h, 1, &t) < 0)
		return -1;
	if (t.ne[0] != hp->n_embd || t.ne[2] != 2 || t.ne[3] != 1 || t.ne[1] < 1 ||
	    t.ne[1] > (1 << 20))
		return util_err(v->err, "tensor '%s': not [2][n][%d]", v->gg ? g : h, hp->n_embd);
	if (hp->n_pos != 0 && hp->n_pos != t.ne[1])
		return util_err(v->err, "tensor '%s': %lld positions, config %d", v->gg ? g : h,
		    (long long)t.ne[1], hp->n_pos);
	hp->n_pos = (int)t.ne[1];
	if ((v->pos_host = malloc((size_t)vt_nelem(&t) * sizeof *v->pos_host)) == NULL)
		return util_err(v->err, "out of memory");
	if (vt_f32(v, &t, v->gg ? g : h, v->pos_host, vt_nelem(&t)) != 0)
		return -1;
	if (backend_weight_init(v->be, &v->pos, 0, hp->n_embd, 2 * (int64_t)hp->n_pos, v->pos_host,
	    1.0f) != 0)
		return util_err(v->err, "%s: %s", v->gg ? g : h, backend_errmsg(v->be));
	return 0;
}

/* std_bias, std_scale into host float32 (both or neither). */
static int
load_std(struct vision *v)
{
	const char *g[2] = { "v.std_bias", "v.std_scale" };
	const char *h[2] = { "model.vision_tower.std_bias", "model.vision_tower.std_scale" };
	float **out[2] = { &v->std_bias, &v->std_scale };
	int n = v->hp.n_embd, got = 0;

	for (int i = 0; i < 2; i++) {
		struct vt t;
		int rc = find(v, g[i], h[i], v->hp.standardize, &t);

		if (rc < 0)
			return -1;
		if (rc == 0)
			continue;
		got++;
		if ((*out[i] = malloc(n * sizeof **out[i])) == NULL)
			return util_err(v->err, "out of memory");
		if (vt_f32(v, &t, v->gg ? g[i] : h[i], *out[i], n) != 0)
			return -1;
	}
	if (got == 1)
		return util_err(v->err, "std_bias without std_scale, or the other way");
	v->hp.standardize = got == 2;
	return 0;
}

static int
load_weights(struct vision *v)
{
	const struct vision_hparams *hp = &v->hp;

	if ((v->layers = calloc(hp->n_layer, sizeof *v->layers)) == NULL)
		return util_err(v->err, "out of memory");
	if (load_patch(v) != 0 || load_pos(v) != 0 || load_std(v) != 0 ||
	    load_mat(v, "mm.input_projection.weight", "model.embed_vision.embedding_projection.weight",
	    hp->n_embd, hp->n_embd_text, &v->proj) != 0)
		return -1;
	for (int il = 0; il < hp->n_layer; il++)
		if (load_layer(v, il) != 0)
			return -1;
	return 0;
}

/* --- hyperparameters --- */

static int
cfg_int(struct vision *v, const struct json *o, const char *key, int dflt, int *out)
{
	int64_t x;

	if (json_get(o, key) == NULL && dflt >= 0) {
		*out = dflt;
		return 0;
	}
	if (json_get_i64(o, key, &x) != 0 || x < 1 || x > (1 << 20))
		return util_err(v->err, "config.json: vision_config.%s: missing or out of range", key);
	*out = (int)x;
	return 0;
}

/* max_soft_tokens of the checkpoint's image processor (preprocessor_config.json, or
 * processor_config.json's image_processor), 280 when it has neither. */
static int
processor_tokens(struct vision *v, const char *dir)
{
	static const char *const files[2] = { "preprocessor_config.json", "processor_config.json" };
	char path[4096], e[UTIL_ERRLEN];
	int64_t x;

	v->hp.max_tokens = 280;
	for (int i = 0; i < 2; i++) {
		size_t n;
		char *text;
		struct json *j;
		const struct json *o;

		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		if ((text = util_read_file(path, &n, e)) == NULL)
			continue;
		j = json_parse(text, n, e);
		free(text);
		if (j == NULL)
			return util_err(v->err, "%s: %s", files[i], e);
		o = json_get(j, "image_processor") != NULL ? json_get(j, "image_processor") : j;
		if (json_get_i64(o, "max_soft_tokens", &x) == 0)
			v->hp.max_tokens = x >= 1 && x <= 1 << 16 ? (int)x : -1;
		json_free(j);
		if (v->hp.max_tokens < 0)
			return util_err(v->err, "%s: max_soft_tokens out of range", files[i]);
		return 0;
	}
	return 0;
}

const char *
vision_config_why(const struct json *c)
{
	const struct json *vc = c != NULL ? json_get(c, "vision_config") : NULL;
	const char *mt = c != NULL ? json_get_str(c, "model_type") : NULL;

	if (vc == NULL || vc->type != JSON_OBJECT)
		return "config.json has no vision_config";
	if (json_get(c, "text_config") == NULL || mt == NULL || strcmp(mt, "gemma4") != 0)
		return "config.json: not a gemma4 model with a text_config";
	return NULL;
}

static int
hf_hparams(struct vision *v, const char *dir)
{
	struct vision_hparams *hp = &v->hp;
	const struct json *c = safetensors_config(v->st), *vc, *tc, *rp;
	const char *act, *bidir, *why;
	double th = 100, eps = 1e-6;
	int clip = 0, std = 0;

	if ((why = vision_config_why(c)) != NULL)
		return util_err(v->err, "%s", why);
	vc = json_get(c, "vision_config"), tc = json_get(c, "text_config");
	if (cfg_int(v, vc, "hidden_size", -1, &hp->n_embd) || cfg_int(v, vc, "intermediate_size", -1,
	    &hp->n_ff) || cfg_int(v, vc, "num_hidden_layers", -1, &hp->n_layer) ||
	    cfg_int(v, vc, "num_attention_heads", -1, &hp->n_head) ||
	    cfg_int(v, vc, "num_key_value_heads", hp->n_head, &hp->n_head_kv) ||
	    cfg_int(v, vc, "head_dim", hp->n_embd / hp->n_head, &hp->head_dim) ||
	    cfg_int(v, vc, "patch_size", 16, &hp->patch) ||
	    cfg_int(v, vc, "pooling_kernel_size", 3, &hp->pool) ||
	    cfg_int(v, vc, "position_embedding_size", 10240, &hp->n_pos) ||
	    cfg_int(v, tc, "hidden_size", -1, &hp->n_embd_text))
		return -1;
	if ((act = json_get_str(vc, "hidden_activation")) != NULL &&
	    strcmp(act, "gelu_pytorch_tanh") != 0)
		return util_err(v->err, "config.json: vision_config.hidden_activation '%s'", act);
	if ((rp = json_get(vc, "rope_parameters")) != NULL)
		json_get_num(rp, "rope_theta", &th);
	json_get_num(vc, "rms_norm_eps", &eps);
	json_get_bool(vc, "use_clipped_linears", &clip);
	json_get_bool(vc, "standardize", &std);
	hp->theta = (float)th, hp->eps = (float)eps, hp->standardize = std;
	bidir = json_get_str(tc, "use_bidirectional_attention");
	hp->bidir = bidir != NULL && strcmp(bidir, "vision") == 0;
	return processor_tokens(v, dir);
}

static int
gg_u32(struct vision *v, const char *key, int required, int *out)
{
	int64_t i = gguf_find_key(v->gg, key), x;

	if (i < 0 && !required)
		return 0;
	if (i < 0 || gguf_get_int(v->gg, i, &x) != 0 || x < 1 || x > (1 << 20))
		return util_err(v->err, "'%s': missing or out of range", key);
	*out = (int)x;
	return 0;
}

static int
gguf_hparams(struct vision *v)
{
	struct vision_hparams *hp = &v->hp;
	int64_t i = gguf_find_key(v->gg, "clip.projector_type");
	const char *pt;
	size_t n;

	if (i < 0)
		i = gguf_find_key(v->gg, "clip.vision.projector_type");
	if (i < 0 || (pt = gguf_get_str(v->gg, i, &n)) == NULL)
		return util_err(v->err, "no clip projector type: not an mmproj GGUF");
	if (n != 7 || memcmp(pt, "gemma4v", 7) != 0)
		return util_err(v->err, "projector type '%.*s': only gemma4v (Gemma-4's tower)",
		    (int)(n < 64 ? n : 64), pt);
	hp->pool = 3, hp->theta = 100, hp->eps = 1e-6f, hp->max_tokens = 280, hp->gguf = 1;
	if (gg_u32(v, "clip.vision.embedding_length", 1, &hp->n_embd) ||
	    gg_u32(v, "clip.vision.feed_forward_length", 1, &hp->n_ff) ||
	    gg_u32(v, "clip.vision.block_count", 1, &hp->n_layer) ||
	    gg_u32(v, "clip.vision.attention.head_count", 1, &hp->n_head) ||
	    gg_u32(v, "clip.vision.patch_size", 1, &hp->patch) ||
	    gg_u32(v, "clip.vision.projection_dim", 1, &hp->n_embd_text) ||
	    gg_u32(v, "clip.vision.projector.scale_factor", 0, &hp->pool))
		return -1;
	if ((i = gguf_find_key(v->gg, "clip.vision.attention.layer_norm_epsilon")) >= 0 &&
	    gguf_get_f32(v->gg, i, &hp->eps) != 0)
		return util_err(v->err, "clip.vision.attention.layer_norm_epsilon: not a float");
	hp->n_head_kv = hp->n_head, hp->head_dim = hp->n_embd / hp->n_head;
	hp->bidir = hp->n_embd_text != 1536 && hp->n_embd_text != 2560;
	hp->standardize = gguf_find_tensor(v->gg, "v.std_bias") >= 0;
	return 0;
}

static int
check_hparams(struct vision *v)
{
	const struct vision_hparams *hp = &v->hp;

	if (hp->head_dim % 4 != 0 || hp->n_head % hp->n_head_kv != 0)
		return util_err(v->err, "%d heads of %d over %d K/V heads: not a Gemma-4 tower",
		    hp->n_head, hp->head_dim, hp->n_head_kv);
	if (backend_head_max(v->be) > 0 && hp->head_dim > backend_head_max(v->be))
		return util_err(v->err, "heads of %d: backend '%s' attends heads of up to %d",
		    hp->head_dim, backend_name(v->be), backend_head_max(v->be));
	return 0;
}

struct vision *
vision_open(const char *path, struct backend *be, char *err)
{
	struct vision *v = calloc(1, sizeof *v);
	size_t n = strlen(path);
	int rc;

	if (v == NULL) {
		util_err(err, "%s: out of memory", path);
		return NULL;
	}
	v->be = be;
	/* the tower's ops: full attention (hi), GELU-tanh gating, the clipped linears'
	 * clamp, products on half operands */
	if (!backend_attn_hi(be) || !backend_gemma(be) || !backend_has_clamp(be) ||
	    !backend_has_matmul_half(be)) {
		util_err(err, "%s: backend '%s' lacks the vision tower's ops (attention rows that "
		    "see later keys, Gemma-4's, clamp, half products)", path, backend_name(be));
		free(v);
		return NULL;
	}
	if (n > 5 && strcmp(path + n - 5, ".gguf") == 0)
		rc = (v->gg = gguf_open(path, err)) == NULL ? -2 : gguf_hparams(v);
	else
		rc = (v->st = safetensors_open(path, err)) == NULL ? -2 : hf_hparams(v, path);
	if (rc == 0)
		rc = check_hparams(v) != 0 || load_weights(v) != 0 ? -1 : 0;
	if (rc == -1)
		util_err(err, "%s: %s", path, v->err);
	if (rc != 0) {
		vision_close(v);
		return NULL;
	}
	v->err[0] = '\0';
	return v;
}

/*
 * An encode's working buffers: m patch rows (of cap allocated), and the
 * projector's n_tok rows when vision_reserve made them (pd, po; else NULL).
 */
struct vact {
	int	m, cap;
	float	*x, *h, *t, *q, *k, *v, *o, *f, *u;
	int32_t	*px, *py, *hi;		/* host [m] */
	int32_t	*ix, *iy;		/* host [m]: position table rows */
	int	n_tok;
	float	*pd, *po;		/* [n_tok][n_embd], [n_tok][n_embd_text] */
};

static void
vact_free(struct backend *be, struct vact *a)
{
	float *b[] = { a->x, a->h, a->t, a->q, a->k, a->v, a->o, a->f, a->u, a->pd, a->po };

	for (size_t i = 0; i < sizeof b / sizeof *b; i++)
		backend_mfree(be, b[i]);
	free(a->px), free(a->py), free(a->hi), free(a->ix), free(a->iy);
}

void
vision_close(struct vision *v)
{
	if (v == NULL)
		return;
	for (int il = 0; v->layers != NULL && il < v->hp.n_layer; il++) {
		for (int k = 0; k < V_NLIN; k++)
			backend_weight_release(v->be, &v->layers[il].w[k]);
		for (int k = 0; k < N_NORMS; k++)
			backend_mfree(v->be, v->layers[il].norm[k]);
	}
	backend_weight_release(v->be, &v->patch);
	backend_weight_release(v->be, &v->pos);
	backend_weight_release(v->be, &v->proj);
	if (v->ws != NULL)
		vact_free(v->be, v->ws);
	free(v->ws), free(v->layers);
	free(v->patch_host), free(v->pos_host), free(v->std_bias), free(v->std_scale);
	safetensors_close(v->st);
	gguf_close(v->gg);
	free(v);
}

const struct vision_hparams *
vision_hparams(const struct vision *v)
{
	return &v->hp;
}

const char *
vision_errmsg(const struct vision *v)
{
	return v->err;
}

/* --- images --- */

/*
 * 0 when img, fit to vi->rw x vi->rh for budget soft tokens, has a patch
 * grid the position tables hold (each side at most n_pos); else -1 with
 * the sizes and the budget in err.  A side past them has no learned
 * position: transformers' Gemma4VisionPatchEmbedder looks the index up
 * with F.embedding, which raises IndexError, and llama.cpp's gemma4v
 * ggml_get_rows asserts on the CPU; so the image is refused before the
 * resize.  (A tower's own tables hold 10240 a side, past the 3 x 1120 a
 * budget of 1120 can ask; g4-vision's 224 hold its budget of 70's 210.)
 */
static int
fits_tables(const struct vision *v, const struct image *img, const struct vision_image *vi,
    int budget, char *err)
{
	const struct vision_hparams *hp = &v->hp;
	int gw = vi->rw / hp->patch, gh = vi->rh / hp->patch;

	if (gw <= hp->n_pos && gh <= hp->n_pos)
		return 0;
	return util_err(err, "image of %dx%d: %dx%d for %d soft tokens is %dx%d patches, past "
	    "the tower's %d positions a side", img->w, img->h, vi->rw, vi->rh, budget, gw, gh,
	    hp->n_pos);
}

int
vision_prepare(const struct vision *v, const void *buf, size_t n,
    const struct image_limits *lim, int max_tokens, struct vision_image *vi, char *err)
{
	const struct vision_hparams *hp = &v->hp;
	struct image img, rs;
	int p = hp->patch, budget = max_tokens > 0 ? max_tokens : hp->max_tokens;
	struct sha256 h;

	memset(vi, 0, sizeof *vi);
	if (image_decode(buf, n, lim, &img, err) != 0)
		return -1;
	sha256_init(&h);
	sha256_update(&h, buf, n);
	sha256_final(&h, vi->sha256);
	vi->w = img.w, vi->h = img.h;
	if (image_fit(img.w, img.h, p, hp->pool, budget, &vi->rw, &vi->rh, err) != 0 ||
	    fits_tables(v, &img, vi, budget, err) != 0 ||
	    image_resize(&img, vi->rw, vi->rh, &rs, err) != 0) {
		image_free(&img);
		return -1;
	}
	image_free(&img);
	vi->gw = vi->rw / p, vi->gh = vi->rh / p;
	vi->n_tok = vi->gw * vi->gh / (hp->pool * hp->pool);
	if ((vi->px = malloc((size_t)vi->gw * vi->gh * p * p * 3 * sizeof *vi->px)) == NULL) {
		image_free(&rs);
		return util_err(err, "image of %dx%d: out of memory", vi->rw, vi->rh);
	}
	image_patches(&rs, p, vi->px);
	image_free(&rs);
	return 0;
}

void
vision_image_free(struct vision_image *vi)
{
	if (vi == NULL)
		return;
	free(vi->px);
	memset(vi, 0, sizeof *vi);
}

/* --- the tower --- */

/* Activations for m patches (backend memory) and the host side. */
static int
vact_new(struct vision *v, int m, struct vact *a)
{
	const struct vision_hparams *hp = &v->hp;
	size_t ne = hp->n_embd, qd = (size_t)hp->n_head * hp->head_dim;
	size_t kvd = (size_t)hp->n_head_kv * hp->head_dim, pd = (size_t)hp->patch * hp->patch * 3;
	size_t wide = ne > pd ? ne : pd;

	memset(a, 0, sizeof *a);
	a->m = a->cap = m;
	if ((a->x = backend_alloc(v->be, m * ne)) == NULL ||
	    (a->h = backend_alloc(v->be, m * wide)) == NULL ||
	    (a->t = backend_alloc(v->be, m * ne)) == NULL ||
	    (a->q = backend_alloc(v->be, m * qd)) == NULL ||
	    (a->k = backend_alloc(v->be, m * kvd)) == NULL ||
	    (a->v = backend_alloc(v->be, m * kvd)) == NULL ||
	    (a->o = backend_alloc(v->be, m * qd)) == NULL ||
	    (a->f = backend_alloc(v->be, m * (size_t)hp->n_ff)) == NULL ||
	    (a->u = backend_alloc(v->be, m * (size_t)hp->n_ff)) == NULL ||
	    (a->px = malloc(m * sizeof *a->px)) == NULL || (a->py = malloc(m * sizeof *a->py)) == NULL ||
	    (a->hi = malloc(m * sizeof *a->hi)) == NULL || (a->ix = malloc(m * sizeof *a->ix)) == NULL ||
	    (a->iy = malloc(m * sizeof *a->iy)) == NULL) {
		vact_free(v->be, a);
		return util_err(v->err, "encode: %d patches: out of memory", m);
	}
	return 0;
}

static int
fail(struct vision *v)
{
	return util_err(v->err, "%s", backend_errmsg(v->be));
}

/*
 * y[m][out] = W_k . clamp(x) clamped (a clipped linear; plain without bounds).  x is
 * clamped in place when it has bounds (its callers pass a copy they may spoil).
 */
static int
linear(struct vision *v, const struct vision_layer *L, int k, float *x, int ldx, float *y,
    int m)
{
	const struct backend_weight *w = &L->w[k];
	const float *c = L->clip[k];
	size_t n = (size_t)m * w->ne1;

	if ((c[0] != -FLT_MAX || c[1] != FLT_MAX) &&
	    backend_clamp(v->be, x, (size_t)m * ldx, c[0], c[1]))
		return fail(v);
	if (backend_matmul_half(v->be, w, x, ldx, y, (int)w->ne1, m) ||
	    ((c[2] != -FLT_MAX || c[3] != FLT_MAX) && backend_clamp(v->be, y, n, c[2], c[3])))
		return fail(v);
	return 0;
}

/* A clipped linear of h (kept: a copy in t when its input bounds would change it). */
static int
linear_of(struct vision *v, const struct vision_layer *L, int k, float *h, float *t, int ld,
    float *y, int m)
{
	if (L->clip[k][0] == -FLT_MAX && L->clip[k][1] == FLT_MAX)
		return linear(v, L, k, h, ld, y, m);
	if (backend_copy(v->be, t, h, (size_t)m * ld))
		return fail(v);
	return linear(v, L, k, t, ld, y, m);
}

/* 2-D RoPE of m rows of nh heads of hd at x: the first half by column, the second by row. */
static int
rope2d(struct vision *v, float *x, int nh, const struct vact *a)
{
	const struct vision_hparams *hp = &v->hp;
	int hd = hp->head_dim, ld = nh * hd;

	if (backend_rope(v->be, x, ld, nh, hd, a->m, a->px, hd / 2, hp->theta, BACKEND_ROPE_NEOX) ||
	    backend_rope(v->be, x + hd / 2, ld, nh, hd, a->m, a->py, hd / 2, hp->theta,
	    BACKEND_ROPE_NEOX))
		return fail(v);
	return 0;
}

static int
attention(struct vision *v, const struct vision_layer *L, struct vact *a)
{
	const struct vision_hparams *hp = &v->hp;
	struct backend *be = v->be;
	int m = a->m, ne = hp->n_embd, hd = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv;
	struct backend_attn at = { nh, nkv, hd, 1.0f, 0, 0, 0, 0, a->hi, 0 };

	if (backend_rmsnorm(be, a->x, ne, L->norm[N_IN], a->h, ne, m, ne, hp->eps))
		return fail(v);
	if (linear_of(v, L, V_Q, a->h, a->t, ne, a->q, m) ||
	    linear_of(v, L, V_K, a->h, a->t, ne, a->k, m) ||
	    linear_of(v, L, V_V, a->h, a->t, ne, a->v, m))
		return -1;
	if (backend_rmsnorm(be, a->q, hd, L->norm[N_Q], a->q, hd, m * nh, hd, hp->eps) ||
	    backend_rmsnorm(be, a->k, hd, L->norm[N_K], a->k, hd, m * nkv, hd, hp->eps) ||
	    backend_rmsnorm(be, a->v, hd, NULL, a->v, hd, m * nkv, hd, hp->eps) ||
	    rope2d(v, a->q, nh, a) || rope2d(v, a->k, nkv, a) ||
	    backend_attention(be, &at, a->q, nh * hd, hd, a->k, a->v, m, 0, a->o))
		return fail(v);
	if (linear(v, L, V_O, a->o, nh * hd, a->t, m) ||
	    backend_rmsnorm(be, a->t, ne, L->norm[N_POST_ATTN], a->t, ne, m, ne, hp->eps) ||
	    backend_add(be, a->x, a->t, (size_t)m * ne))
		return v->err[0] ? -1 : fail(v);
	return 0;
}

static int
ffn(struct vision *v, const struct vision_layer *L, struct vact *a)
{
	const struct vision_hparams *hp = &v->hp;
	struct backend *be = v->be;
	int m = a->m, ne = hp->n_embd, nf = hp->n_ff;

	if (backend_rmsnorm(be, a->x, ne, L->norm[N_PRE_FFN], a->h, ne, m, ne, hp->eps))
		return fail(v);
	if (linear_of(v, L, V_GATE, a->h, a->t, ne, a->f, m) ||
	    linear_of(v, L, V_UP, a->h, a->t, ne, a->u, m))
		return -1;
	if (backend_geglu(be, a->f, nf, a->u, nf, a->f, nf, m, nf))
		return fail(v);
	if (linear(v, L, V_DOWN, a->f, nf, a->t, m) ||
	    backend_rmsnorm(be, a->t, ne, L->norm[N_POST_FFN], a->t, ne, m, ne, hp->eps) ||
	    backend_add(be, a->x, a->t, (size_t)m * ne))
		return v->err[0] ? -1 : fail(v);
	return 0;
}

/* x = W_patch . 2(p - 0.5) + pos_x[col] + pos_y[row]; the positions of the patches. */
static int
embed(struct vision *v, const struct vision_image *img, struct vact *a)
{
	const struct vision_hparams *hp = &v->hp;
	struct backend *be = v->be;
	size_t pd = (size_t)hp->patch * hp->patch * 3, n = (size_t)a->m * pd;
	int ne = hp->n_embd;
	float *in = malloc(n * sizeof *in);

	if (in == NULL)
		return util_err(v->err, "encode: out of memory");
	for (size_t i = 0; i < n; i++)
		in[i] = 2 * (img->px[i] - 0.5f);
	for (int r = 0; r < a->m; r++) {
		a->px[r] = a->ix[r] = r % img->gw, a->py[r] = r / img->gw;
		a->iy[r] = hp->n_pos + a->py[r], a->hi[r] = a->m - 1;
	}
	if (backend_write(be, a->h, in, n) || backend_matmul_half(be, &v->patch, a->h, (int)pd, a->x,
	    ne, a->m) || backend_embed(be, &v->pos, a->ix, a->m, a->t, ne) ||
	    backend_embed(be, &v->pos, a->iy, a->m, a->h, ne) ||
	    backend_add(be, a->t, a->h, (size_t)a->m * ne) ||
	    backend_add(be, a->x, a->t, (size_t)a->m * ne)) {
		free(in);
		return fail(v);
	}
	free(in);
	return 0;
}

/*
 * The pooled soft tokens of the tower's output x (host [m][n]) into y (host
 * [n_tok][n]): the mean of each pool x pool block (weights float(1/pool^2) summed
 * in patch order), times sqrt(n), standardized.
 */
static void
pool(const struct vision *v, const struct vision_image *img, const float *x, float *y)
{
	const struct vision_hparams *hp = &v->hp;
	int n = hp->n_embd, k = hp->pool, ow = img->gw / k;
	float w = 1.0f / (float)(k * k), s = (float)sqrt((double)n);

	memset(y, 0, (size_t)img->n_tok * n * sizeof *y);
	for (int r = 0; r < img->gw * img->gh; r++) {
		float *o = y + (size_t)((r / img->gw / k) * ow + (r % img->gw) / k) * n;
		for (int i = 0; i < n; i++)
			o[i] += w * x[(size_t)r * n + i];
	}
	for (size_t t = 0; t < (size_t)img->n_tok; t++)
		for (int i = 0; i < n; i++) {
			float *o = y + t * n + i;
			*o *= s;
			if (v->std_bias != NULL)
				*o = (*o - v->std_bias[i]) * v->std_scale[i];
		}
}

/* The projector over the pooled rows y (host [n_tok][n_embd]): norm, projection, to out. */
static int
project(struct vision *v, const float *y, int n_tok, float *out)
{
	const struct vision_hparams *hp = &v->hp;
	struct backend *be = v->be;
	int ne = hp->n_embd, nt = hp->n_embd_text, own = v->ws == NULL || v->ws->n_tok < n_tok;
	float *d = own ? backend_alloc(be, (size_t)n_tok * ne) : v->ws->pd;
	float *o = own ? backend_alloc(be, (size_t)n_tok * nt) : v->ws->po;
	int rc = -1;

	if (d == NULL || o == NULL)
		util_err(v->err, "encode: out of memory");
	else if (backend_write(be, d, y, (size_t)n_tok * ne) ||
	    backend_rmsnorm(be, d, ne, NULL, d, ne, n_tok, ne, hp->eps) ||
	    backend_matmul_half(be, &v->proj, d, ne, o, nt, n_tok) ||
	    backend_read(be, out, o, (size_t)n_tok * nt))
		fail(v);
	else
		rc = 0;
	if (own)
		backend_mfree(be, d), backend_mfree(be, o);
	return rc;
}

static int
check_image(struct vision *v, const struct vision_image *img)
{
	const struct vision_hparams *hp = &v->hp;

	if (img->gw < 1 || img->gh < 1 || img->gw % hp->pool || img->gh % hp->pool)
		return util_err(v->err, "encode: a grid of %dx%d patches: not in blocks of %d",
		    img->gw, img->gh, hp->pool);
	if (img->gw > hp->n_pos || img->gh > hp->n_pos)
		return util_err(v->err, "encode: a grid of %dx%d patches: the position tables "
		    "have %d", img->gw, img->gh, hp->n_pos);
	return 0;
}

/* The embedding and stages - 1 attention / feed-forward halves of layers
 * into x (host [m][n_embd]). */
static int
trunk(struct vision *v, const struct vision_image *img, int stages, float *x)
{
	int m = img->gw * img->gh, rc = -1, own = v->ws == NULL || v->ws->cap < m;
	struct vact mine, *a = own ? &mine : v->ws;

	if (check_image(v, img) != 0 || (own && vact_new(v, m, a) != 0))
		return -1;
	a->m = m;
	if (embed(v, img, a) != 0)
		goto out;
	for (int s = 1; s <= stages; s++) {
		const struct vision_layer *L = &v->layers[(s - 1) / 2];
		if ((s % 2 ? attention(v, L, a) : ffn(v, L, a)) != 0)
			goto out;
	}
	if (backend_read(v->be, x, a->x, (size_t)m * v->hp.n_embd))
		fail(v);
	else
		rc = 0;
out:
	if (own)
		vact_free(v->be, a);
	return rc;
}

int
vision_hidden(struct vision *v, const struct vision_image *img, int stages, float *x)
{
	v->err[0] = '\0';
	if (stages < 0 || stages > 2 * v->hp.n_layer)
		return util_err(v->err, "hidden: stage %d of 0..%d", stages, 2 * v->hp.n_layer);
	return trunk(v, img, stages, x);
}

int
vision_encode(struct vision *v, const struct vision_image *img, float *out)
{
	const struct vision_hparams *hp = &v->hp;
	size_t m = (size_t)img->gw * img->gh;
	float *x = malloc(m * hp->n_embd * sizeof *x);
	float *y = malloc((size_t)img->n_tok * hp->n_embd * sizeof *y);
	int rc = -1;

	v->err[0] = '\0';
	if (x == NULL || y == NULL)
		util_err(v->err, "encode: out of memory");
	else if (trunk(v, img, 2 * hp->n_layer, x) == 0) {
		pool(v, img, x, y);
		rc = project(v, y, img->n_tok, out);
	}
	free(x), free(y);
	return rc;
}

/*
 * The largest patch grid a budget of max_tokens soft tokens allows inside
 * the position tables, the squarest of them: every image prepared for the
 * budget has a grid of at most its patches (image_fit keeps a grid's
 * pooled blocks within the budget, fits_tables its sides within n_pos).
 */
static void
largest_grid(const struct vision_hparams *hp, int max_tokens, int *tw, int *th)
{
	int side = hp->n_pos / hp->pool;

	*tw = *th = 0;
	for (int h = 1; h <= side && h <= max_tokens; h++) {
		int w = max_tokens / h < side ? max_tokens / h : side;

		if (w * h > *tw * *th || (w * h == *tw * *th && abs(w - h) < abs(*tw - *th)))
			*tw = w, *th = h;
	}
}

int
vision_reserve(struct vision *v, int max_tokens)
{
	const struct vision_hparams *hp = &v->hp;
	struct vision_image img = { 0 };
	struct vact *a;
	float *out = NULL;
	int tw, th, rc = -1;

	v->err[0] = '\0';
	if (max_tokens <= 0)
		max_tokens = hp->max_tokens;
	largest_grid(hp, max_tokens, &tw, &th);
	if (tw < 1)
		return util_err(v->err, "reserve: %d soft tokens: no patch grid in the tower's %d "
		    "positions a side", max_tokens, hp->n_pos);
	if (v->ws != NULL && v->ws->cap >= tw * th * hp->pool * hp->pool &&
	    v->ws->n_tok >= tw * th)
		return 0;
	if ((a = calloc(1, sizeof *a)) == NULL)
		return util_err(v->err, "reserve: out of memory");
	if (vact_new(v, tw * th * hp->pool * hp->pool, a) != 0) {
		free(a);
		return -1;
	}
	a->n_tok = tw * th;
	if ((a->pd = backend_alloc(v->be, (size_t)a->n_tok * hp->n_embd)) == NULL ||
	    (a->po = backend_alloc(v->be, (size_t)a->n_tok * hp->n_embd_text)) == NULL) {
		vact_free(v->be, a), free(a);
		return util_err(v->err, "reserve: %d soft tokens: out of memory", max_tokens);
	}
	if (v->ws != NULL)
		vact_free(v->be, v->ws), free(v->ws);
	v->ws = a;
	if (backend_host(v->be))
		return 0;
	/* one encode of the largest grid: the backend's own buffers grow to it now */
	img.gw = tw * hp->pool, img.gh = th * hp->pool, img.n_tok = tw * th;
	img.w = img.rw = img.gw * hp->patch, img.h = img.rh = img.gh * hp->patch;
	img.px = calloc((size_t)img.gw * img.gh * hp->patch * hp->patch * 3, sizeof *img.px);
	out = malloc((size_t)img.n_tok * hp->n_embd_text * sizeof *out);
	if (img.px == NULL || out == NULL)
		util_err(v->err, "reserve: out of memory");
	else
		rc = vision_encode(v, &img, out);
	free(img.px), free(out);
	return rc;
}

/* --- a prompt's images --- */

int
vision_tokens(const struct tokenizer *tok, struct vision_tokens *vt, char *err)
{
	static const char *const s[3] = { "<|image>", "<|image|>", "<image|>" };
	int32_t *id[3] = { &vt->boi, &vt->img, &vt->eoi };

	for (int i = 0; i < 3; i++)
		if ((*id[i] = tokenizer_find(tok, s[i], strlen(s[i]))) < 0)
			return util_err(err, "the vocabulary has no '%s' token", s[i]);
	vt->pad = tokenizer_find(tok, "<pad>", 5);
	if (vt->pad < 0)
		vt->pad = 0;
	return 0;
}

void
vision_prompt_free(struct vision_prompt *vp)
{
	if (vp == NULL)
		return;
	free(vp->row), free(vp->x), free(vp->img);
	memset(vp, 0, sizeof *vp);
}

/* The expanded ids of ids[n] (markers checked by the caller) into out, rows into vp->row. */
static size_t
expand(const struct vision_tokens *vt, const int32_t *ids, size_t n,
    const struct vision_image *imgs, int32_t *out, struct vision_prompt *vp)
{
	size_t o = 0;
	int k = 0, r = 0;

	for (size_t i = 0; i < n; i++) {
		if (ids[i] != vt->img) {
			out[o++] = ids[i];
			continue;
		}
		out[o++] = vt->boi;
		vp->img[k].row = (int32_t)o, vp->img[k].n = imgs[k].n_tok;
		memcpy(vp->img[k].sha256, imgs[k].sha256, sizeof vp->img[k].sha256);
		for (int t = 0; t < imgs[k].n_tok; t++)
			vp->row[r++] = (int32_t)o, out[o++] = vt->img;
		out[o++] = vt->eoi;
		k++;
	}
	return o;
}

int
vision_prompt_build(struct vision *v, const struct vision_tokens *vt, const int32_t *ids,
    size_t n, const struct vision_image *imgs, int n_img, int32_t **out, size_t *n_out,
    struct vision_prompt *vp, char *err)
{
	size_t marks = 0, rows = 0, nt = v->hp.n_embd_text;

	memset(vp, 0, sizeof *vp);
	*out = NULL;
	for (size_t i = 0; i < n; i++)
		marks += ids[i] == vt->img;
	if (marks != (size_t)n_img)
		return util_err(err, "the prompt has %zu image markers for %d images", marks, n_img);
	for (int i = 0; i < n_img; i++)
		rows += imgs[i].n_tok;
	vp->n_rows = (int)rows, vp->bidir = v->hp.bidir, vp->pad = vt->pad, vp->nt = (int)nt;
	vp->n_img = n_img;
	if ((*out = malloc((n + rows + 2 * (size_t)n_img) * sizeof **out)) == NULL ||
	    (vp->row = malloc((rows + 1) * sizeof *vp->row)) == NULL ||
	    (vp->x = malloc((rows + 1) * nt * sizeof *vp->x)) == NULL ||
	    (vp->img = malloc(((size_t)n_img + 1) * sizeof *vp->img)) == NULL) {
		free(*out), *out = NULL;
		vision_prompt_free(vp);
		return util_err(err, "%zu image rows: out of memory", rows);
	}
	*n_out = expand(vt, ids, n, imgs, *out, vp);
	for (int i = 0, r = 0; i < n_img; r += imgs[i++].n_tok)
		if (vision_encode(v, &imgs[i], vp->x + (size_t)r * nt) != 0) {
			util_err(err, "image %d: %s", i + 1, v->err);
			free(*out), *out = NULL;
			vision_prompt_free(vp);
			return -1;
		}
	return 0;
}

/* The first of vp's rows at or past r. */
static int
first_row(const struct vision_prompt *vp, int r)
{
	int lo = 0, hi = vp->n_rows;

	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (vp->row[mid] < r)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void
vision_prompt_rows(const struct vision_prompt *vp, int r0, int m, struct model_embd *e)
{
	int a = first_row(vp, r0), b = first_row(vp, r0 + m);

	e->n = b - a, e->base = r0;
	e->row = vp->row + a, e->x = vp->x + (size_t)a * vp->nt;
	e->pad = vp->pad, e->bidir = vp->bidir;
}

int
vision_prompt_cut(const struct vision_prompt *vp, int r0, int m)
{
	int a = first_row(vp, r0 + m - 1), s, e;

	/* the block holding row r0 + m - 1 (if it is an image row) and its ends */
	if (a >= vp->n_rows || vp->row[a] != r0 + m - 1 || a + 1 >= vp->n_rows ||
	    vp->row[a + 1] != r0 + m)
		return m;	/* the cut falls after an image's last row, or outside images */
	for (s = a; s > 0 && vp->row[s - 1] == vp->row[s] - 1; s--)
		;
	for (e = a; e + 1 < vp->n_rows && vp->row[e + 1] == vp->row[e] + 1; e++)
		;
	if (vp->row[s] > r0)
		return vp->row[s] - r0;	/* stop before the image */
	return vp->row[e] + 1 - r0;	/* the image starts at r0: all of it */
}
