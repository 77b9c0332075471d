/*
 * NVFP4 safetensors checkpoints: compressed-tensors "nvfp4-pack-quantized"
 * (llm-compressor) and NVIDIA ModelOpt NVFP4, read as GGUF NVFP4 (type 40)
 * rows with no requantization, as llama.cpp's converter repacks them.
 *
 * Per quantized Linear <p> [out][in]: FP4 codes two a byte, element 2k in
 * the low nibble ([out][in/2] U8: <p>.weight_packed, or ModelOpt's
 * <p>.weight), one E4M3 block scale per 16 inputs (<p>.weight_scale
 * [out][in/16]) and one float per tensor: compressed-tensors' divisor
 * <p>.weight_global_scale, ModelOpt's multiplier <p>.weight_scale_2.  A
 * GGUF block is 64 values: the 4 block scales with bit 7 cleared, then
 * 32 bytes where byte 8s+j holds value 16s+j (low) and 16s+j+8 (high).
 * The per-tensor multiplier s2 (1/global, rounded to float) becomes
 * "<name less .weight>.scale", F32 [1], applied after the matmul; a stack
 * of per-expert tensors keeps each expert's, F32 [n_exp].  The
 * activation scales (input_global_scale, input_scale) and ModelOpt's KV
 * scales are not used: weights only.
 */
#include "safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "quant.h"
#include "safetensors_impl.h"
#include "util.h"

/* tensors beside an NVFP4 weight that its rows consume or that go unused */
static const char *const aux_suffix[] = {
	".weight_scale", ".weight_global_scale", ".weight_scale_2", ".input_global_scale",
	".input_scale", ".weight_zero_point", ".k_scale", ".v_scale",
};

static int
ends(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && strcmp(s + n - m, suf) == 0;
}

/* A compressed-tensors config group's weights: 4-bit float, groups of 16. */
static int
ct_group(struct safetensors *st, const char *gname, const struct json *g)
{
	const struct json *w = g != NULL && g->type == JSON_OBJECT ? json_get(g, "weights") : NULL;
	const char *ty = w != NULL && w->type == JSON_OBJECT ? json_get_str(w, "type") : NULL;
	int64_t bits = 0, gs = 0;

	if (ty == NULL || strcmp(ty, "float") != 0 || json_get_i64(w, "num_bits", &bits) != 0 ||
	    json_get_i64(w, "group_size", &gs) != 0 || bits != 4 || gs != 16)
		return util_err(st->err, "config.json: quantization_config group '%s' is not NVFP4 "
		    "(weights: type float, num_bits 4, group_size 16)", gname);
	return 0;
}

/* compressed-tensors: format nvfp4-pack-quantized, or mixed-precision of such groups */
static int
ct_config(struct safetensors *st, const struct json *q)
{
	const char *fmt = json_get_str(q, "format"), *gf;
	const struct json *groups = json_get(q, "config_groups");
	size_t i;

	if (fmt == NULL || (strcmp(fmt, "nvfp4-pack-quantized") != 0 &&
	    strcmp(fmt, "mixed-precision") != 0))
		return 0;	/* another compressed-tensors format: not ours */
	if (groups == NULL || groups->type != JSON_OBJECT || groups->n == 0)
		return util_err(st->err, "config.json: quantization_config has no config_groups");
	for (i = 0; i < groups->n; i++) {
		gf = json_get_str(&groups->items[i], "format");
		if (strcmp(fmt, "mixed-precision") == 0 &&
		    (gf == NULL || strcmp(gf, "nvfp4-pack-quantized") != 0))
			return 0;
		if (ct_group(st, groups->keys[i], &groups->items[i]) != 0)
			return -1;
	}
	st->nvq = ST_NV_CT;
	return 0;
}

/* ModelOpt: quant_algo NVFP4 (config.json or hf_quant_config.json), group_size 16 */
static int
mo_config(struct safetensors *st, const struct json *q, const char *file)
{
	const char *algo = json_get_str(q, "quant_algo");
	int64_t gs = 16;

	if (algo == NULL || (strcmp(algo, "NVFP4") != 0 && strcmp(algo, "W4A16_NVFP4") != 0))
		return 0;
	if (json_get(q, "group_size") != NULL && (json_get_i64(q, "group_size", &gs) != 0 || gs != 16))
		return util_err(st->err, "%s: NVFP4 group_size is not 16", file);
	st->nvq = ST_NV_MO;
	return 0;
}

int
st_nv_config(struct safetensors *st)
{
	const struct json *q = st->config != NULL ? json_get(st->config, "quantization_config") : NULL;
	struct json *hq = NULL;
	const char *m;
	int rc = 0;

	st->nvq = ST_NV_NONE;
	if (q != NULL && q->type == JSON_OBJECT) {
		m = json_get_str(q, "quant_method");
		if (m != NULL && strcmp(m, "compressed-tensors") == 0)
			return ct_config(st, q);
		if (mo_config(st, q, "config.json") != 0 || st->nvq != ST_NV_NONE)
			return st->nvq != ST_NV_NONE ? 0 : -1;
	}
	if (st->dir == NULL || st_read_json(st, "hf_quant_config.json", &hq) != 0)
		return st->dir == NULL ? 0 : -1;
	if (hq != NULL) {
		const struct json *p = json_get(hq, "producer"), *qq = json_get(hq, "quantization");

		m = p != NULL && p->type == JSON_OBJECT ? json_get_str(p, "name") : NULL;
		if (m != NULL && strcmp(m, "modelopt") == 0 && qq != NULL && qq->type == JSON_OBJECT)
			rc = mo_config(st, qq, "hf_quant_config.json");
	}
	json_free(hq);
	return rc;
}

/* The NVFP4 codes of tensor t: 1 yes, 0 no. */
int
st_nv_weight(const struct safetensors *st, const struct safetensors_tensor *t)
{
	if (t->dtype != SAFETENSORS_U8)
		return 0;
	return ends(t->name, ".weight_packed") || (st->nvq == ST_NV_MO && ends(t->name, ".weight"));
}

/*
 * 1 when t is an NVFP4 side tensor (scales, activation and KV scales)
 * that no GGUF tensor of its own comes from, 0 when not, -1 with the
 * reason when it is one but the checkpoint declares no NVFP4.
 */
int
st_nv_aux(struct safetensors *st, const struct safetensors_tensor *t)
{
	size_t i;

	if (st->nvq == ST_NV_NONE && (ends(t->name, ".weight_packed") ||
	    ends(t->name, ".weight_global_scale") || ends(t->name, ".weight_scale_2")))
		return util_err(st->err, "tensor '%s': NVFP4, but neither config.json nor "
		    "hf_quant_config.json declares NVFP4", t->name);
	for (i = 0; i < sizeof aux_suffix / sizeof aux_suffix[0]; i++)
		if (ends(t->name, aux_suffix[i]))
			break;
	if (i == sizeof aux_suffix / sizeof aux_suffix[0])
		return 0;
	if (st->nvq == ST_NV_NONE)
		return t->dtype == SAFETENSORS_F8_E4M3 && t->n_dims == 2 ? util_err(st->err,
		    "tensor '%s': NVFP4 block scales, but neither config.json nor "
		    "hf_quant_config.json declares NVFP4", t->name) : 0;
	return 1;
}

/* The one float of tensor name (F32/BF16/F16, shape [] or [1]) into *v: 0, or -1 with err. */
static int
one_float(struct safetensors *st, const char *wname, const char *name, float *v)
{
	const struct safetensors_tensor *t = safetensors_find(st, name);
	float f;

	if (t == NULL)
		return util_err(st->err, "tensor '%s': NVFP4 without its per-tensor scale '%s'",
		    wname, name);
	if (t->n_elem != 1 || (t->dtype != SAFETENSORS_F32 && t->dtype != SAFETENSORS_BF16 &&
	    t->dtype != SAFETENSORS_F16))
		return util_err(st->err, "tensor '%s': '%s' is not one float", wname, name);
	if (st_read_elem(t->data, t->dtype, 0, &f) != 0 || !isfinite(f) || f <= 0)
		return util_err(st->err, "tensor '%s': '%s' is %g, not a positive number", wname,
		    name, (double)f);
	*v = f;
	return 0;
}

/*
 * NVFP4 codes t ([out][in/2] U8) of in values a row: its block scales
 * (checked) into *sc and its per-tensor multiplier into *s2.
 */
static int
nv_source(struct safetensors *st, const struct safetensors_tensor *t, int64_t in,
    const struct safetensors_tensor **sc, float *s2)
{
	char base[512], name[560];
	size_t n = strlen(t->name) - (ends(t->name, ".weight_packed") ? 14 : 7);
	float g;

	if (n >= sizeof base || t->n_dims != 2)
		return util_err(st->err, "tensor '%s': NVFP4 codes are not a matrix", t->name);
	memcpy(base, t->name, n);
	base[n] = '\0';
	if (in % 64 != 0)
		return util_err(st->err, "tensor '%s': rows of %lld values; GGUF's NVFP4 needs a "
		    "multiple of 64", t->name, (long long)in);
	snprintf(name, sizeof name, "%s.weight_scale", base);
	if ((*sc = safetensors_find(st, name)) == NULL)
		return util_err(st->err, "tensor '%s': NVFP4 without its block scale '%s'", t->name,
		    name);
	if ((*sc)->dtype != SAFETENSORS_F8_E4M3 || (*sc)->n_dims != 2 ||
	    (*sc)->shape[0] != t->shape[0] || (*sc)->shape[1] != in / 16)
		return util_err(st->err, "tensor '%s': block scale '%s' is %s [%lld, %lld], want "
		    "F8_E4M3 [%lld, %lld]", t->name, name, safetensors_dtype_name((*sc)->dtype),
		    (long long)(*sc)->shape[0], (long long)((*sc)->n_dims > 1 ? (*sc)->shape[1] : 0),
		    (long long)t->shape[0], (long long)(in / 16));
	if (st->nvq == ST_NV_CT) {
		snprintf(name, sizeof name, "%s.weight_global_scale", base);
		if (one_float(st, t->name, name, &g) != 0)
			return -1;
		*s2 = 1.0f / g;	/* llama.cpp: 1.0 / scale in float32 */
		return 0;
	}
	snprintf(name, sizeof name, "%s.weight_scale_2", base);
	return one_float(st, t->name, name, s2);
}

/*
 * Planned tensor o reads NVFP4 source t: check its block scales and
 * per-tensor scale, and set o's GGUF row length (2 values a byte).
 */
int
st_nv_attach(struct safetensors *st, struct safetensors_out *o)
{
	const struct safetensors_tensor *t = o->src;
	int64_t in = t->n_dims == 2 ? 2 * t->shape[1] : 0;

	if (t->n_dims != 2)
		return util_err(st->err, "tensor '%s': NVFP4 codes are not a matrix", t->name);
	if (o->xform != 0 || (o->perm != P_NONE && o->perm != P_ROPE &&
	    o->perm != P_VROWS && o->perm != P_VCOLS) || (o->perm == P_VCOLS && o->pb % 16 != 0))
		return util_err(st->err, "tensor '%s': NVFP4 where the conversion changes values",
		    t->name);
	if (nv_source(st, t, in, &o->scale, &o->s2) != 0)
		return -1;
	o->ne[0] = in;
	o->nvfp4 = 1;
	o->verbatim = 1;
	return 0;
}

int
st_nv_attach_expert(struct safetensors *st, struct safetensors_out *o, int64_t e,
    const struct safetensors_tensor *t)
{
	if (t->n_dims != 2 || 2 * t->shape[1] != o->ne[0] || t->shape[0] != o->src_rows)
		return util_err(st->err, "tensor '%s': not [%lld, %lld] NVFP4 codes as config.json "
		    "implies", t->name, (long long)o->src_rows, (long long)(o->ne[0] / 2));
	if (o->nv_scales == NULL) {
		o->nv_scales = st_keep(st, calloc((size_t)o->ne[2], sizeof *o->nv_scales));
		o->nv_s2 = st_keep(st, calloc((size_t)o->ne[2], sizeof *o->nv_s2));
		if (o->nv_scales == NULL || o->nv_s2 == NULL)
			return util_err(st->err, "out of memory");
	}
	if (nv_source(st, t, o->ne[0], &o->nv_scales[e], &o->nv_s2[e]) != 0)
		return -1;
	o->nvfp4 = 1;
	o->verbatim = 1;
	return 0;
}

/*
 * The per-tensor multiplier of planned NVFP4 tensor i as its own planned
 * tensor "<name less .weight>.scale": F32 [1], or F32 [n_exp] of a stack's
 * experts; none when every value is 1.
 */
int
st_nv_scale_out(struct safetensors *st, size_t i)
{
	struct safetensors_out *o;
	char name[64];
	const float *s2 = st->out[i].nv_s2 != NULL ? st->out[i].nv_s2 : &st->out[i].s2;
	int64_t k, n = st->out[i].nv_s2 != NULL ? st->out[i].ne[2] : 1;
	size_t len = strlen(st->out[i].name);
	float *v;

	for (k = 0; k < n && s2[k] == 1.0f; k++)
		;
	if (k == n)
		return 0;
	if (len < 7 || !ends(st->out[i].name, ".weight"))
		return util_err(st->err, "tensor '%s': NVFP4 under a name without .weight",
		    st->out[i].name);
	snprintf(name, sizeof name, "%.*s.scale", (int)(len - 7), st->out[i].name);
	if ((v = st_keep(st, malloc((size_t)n * sizeof *v))) == NULL)
		return util_err(st->err, "out of memory");
	memcpy(v, s2, (size_t)n * sizeof *v);	/* before st_new_out moves st->out */
	if ((o = st_new_out(st, name)) == NULL)
		return util_err(st->err, "out of memory");
	o->n_dims = 1;
	o->ne[0] = n;
	o->ne[1] = o->ne[2] = o->ne[3] = 1;
	o->n_rows = 1;
	o->src_dtype = SAFETENSORS_F32;
	o->synth = v;
	o->verbatim = 1;
	return 0;
}

int
st_nv_stacks(struct safetensors *st)
{
	size_t i, n = st->nout;
	int64_t e;

	for (i = 0; i < n; i++) {
		const struct safetensors_out *o = &st->out[i];

		for (e = 0; o->nv_scales != NULL && e < o->ne[2]; e++)
			if (o->srcs == NULL || o->srcs[e] == NULL || o->nv_scales[e] == NULL)
				return util_err(st->err, "'%s': expert %lld is not NVFP4 like the "
				    "others", o->name, (long long)e);
		if (o->nv_s2 != NULL && st_nv_scale_out(st, i) != 0)
			return -1;
	}
	if (st->nout != n)
		st_sort_out(st);
	return 0;
}

/* Planned NVFP4 row r as GGUF NVFP4 blocks (ne[0] / 64 of 36 bytes) into d. */
void
st_nv_row(const struct safetensors_out *o, int64_t r, uint8_t *d)
{
	int64_t e = o->nv_scales != NULL ? r / o->src_rows : 0, ng = o->ne[0] / 16, b, s, j;
	int64_t sr = o->nv_scales != NULL ? r % o->src_rows : st_src_row(o, r);
	const struct safetensors_tensor *src = o->nv_scales != NULL ? o->srcs[e] : o->src;
	const struct safetensors_tensor *sct = o->nv_scales != NULL ? o->nv_scales[e] : o->scale;
	const uint8_t *codes = (const uint8_t *)src->data + sr * (o->ne[0] / 2);
	const uint8_t *scales = (const uint8_t *)sct->data + sr * ng;

	for (b = 0; b < ng / 4; b++, d += 36)
		for (s = 0; s < 4; s++) {
			int64_t sg = st_src_col(o, 16 * (4 * b + s)) / 16;
			const uint8_t *c = codes + 8 * sg;	/* 16 values, 2 a byte */

			d[s] = scales[sg] & 0x7f;	/* UE4M3: bit 7 ignored, as llama.cpp */
			for (j = 0; j < 8; j++) {
				uint8_t lo = j % 2 ? c[j / 2] >> 4 : c[j / 2] & 15;
				uint8_t hi = j % 2 ? c[4 + j / 2] >> 4 : c[4 + j / 2] & 15;

				d[4 + 8 * s + j] = (uint8_t)(lo | hi << 4);
			}
		}
}

/* Planned NVFP4 row r as float32: the GGUF blocks dequantized, times s2 (its expert's). */
int
st_nv_row_f32(const struct safetensors_out *o, int64_t r, float *d, char *err)
{
	uint8_t *blk = malloc((size_t)(o->ne[0] / 64) * 36);
	float s2 = o->nv_s2 != NULL ? o->nv_s2[r / o->src_rows] : o->s2;
	int64_t j;

	if (blk == NULL)
		return util_err(err, "out of memory");
	st_nv_row(o, r, blk);
	if (quant_dequantize_row(QUANT_NVFP4, blk, d, o->ne[0]) != 0) {
		free(blk);
		return util_err(err, "tensor '%s': cannot decode NVFP4", o->name);
	}
	free(blk);
	if (s2 != 1.0f)
		for (j = 0; j < o->ne[0]; j++)
			d[j] *= s2;
	return 0;
}
