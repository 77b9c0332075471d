/*
 * gguf-random: a random-weight GGUF with the tensor names, shapes and
 * types of a real model, laid out as llama.cpp's converter writes it
 * (speed of decode does not depend on the values), for the GPU
 * benchmarks against llama.cpp on the same file.
 *   gguf-random [-nV] [-p SHAPE] [-t TYPE] [-x TYPE] [-e TYPE] [-L N] OUT
 *   gguf-random -n [-p SHAPE] [-t TYPE] [-x TYPE] [-e TYPE] [-L N]
 *   gguf-random -h	(the usage and the shapes)
 * -p: the shape (default 9b):
 *   qwen35     9b = Qwen3.5-9B (32 layers of 4096, 8 of them full
 *              attention, GDN 16 key / 32 value heads of 128, attention
 *              16/4 heads of 256, FFN 12288, vocab 248320, one MTP layer);
 *              27b = Qwen3.8-27B as its NVFP4 serving GGUF lays it out
 *              with -t NVFP4 (64 layers of 5120, 16 of them full
 *              attention, GDN 16 key / 48 value heads of 128, attention
 *              24/4 heads of 256, FFN 17408, the MTP block at blk.64);
 *              tiny = a small one for tests; tiny-k80 the same with GDN
 *              key heads of 80 (no kernel size of the CUDA backend's own)
 *              and value heads of 64.
 *   qwen35moe  35b-a3b = Qwen3.5-35B-A3B (40 layers of 2048, 10 of them
 *              full attention, GDN 16 key / 32 value heads of 128,
 *              attention 16/2 heads of 256, 256 experts of 512, 8 a
 *              token, a shared expert of 512, vocab 248320, one MTP
 *              layer); tiny-moe for tests.
 *   gemma4     31b = Gemma-4 31B (60 layers of 5376, every 6th global:
 *              32 query heads; sliding 16 K/V heads of 256, window 1024;
 *              global 4 K/V heads of 512, K = V, a quarter of the dims
 *              rotated; GeGLU 21504, vocab 262144 tied, soft-cap 30);
 *              26b-a4b = Gemma-4 26B-A4B (30 layers of 2816, 16 query
 *              heads, sliding 8 K/V heads of 256, global 2 of 512,
 *              GeGLU 2112 beside 128 experts of 704, 8 a token);
 *              tiny-gemma4 (a MoE one) for tests.  Their vocabulary
 *              carries a Gemma-4-style chat template (image parts as
 *              <|image|>), as the converter copies the model's.
 *   gemma4-assistant
 *              31b-assistant = the 31B's gemma4_assistant drafter (an
 *              "MTP" drafter: every layer's queries attend to the
 *              target's K/V, no K/V of its own) as memra's HF -> GGUF
 *              plan (lib/safetensors_gemma4.c) names and shapes it, with
 *              Modular MAX's Gemma4AssistantConfig defaults for the 31B:
 *              4 layers of 1024 over a backbone of 5376, 32 query heads,
 *              sliding heads of 256 over the target's 16 K/V heads
 *              (window 1024, rope 1e4), global heads of 512 over its 4
 *              (attention_k_eq_v; rope 1e6, a quarter of the dims
 *              rotated, as the 31B), GeGLU 8192, vocab 262144, the head
 *              tied to its token table, pre_projection 2 x 5376 -> 1024
 *              and post_projection 1024 -> 5376; 470M parameters, as
 *              google/gemma-4-31B-it's assistant.  ASSUMED: layer_types
 *              [sliding, sliding, sliding, full] (the published
 *              config's layer_types were not found; 470M fits it, all
 *              global would be 520M).  tiny-gemma4-assistant = one of
 *              tiny-gemma4 (4 layers of 128 over its 256, its heads:
 *              4 queries, sliding 2 K/V of 64 (window 64), global 1 of
 *              128, GeGLU 256, vocab 1000).  A drafter fits only the
 *              trunk of its backbone width and vocabulary whose K/V
 *              head sizes per layer type are its queries' (the loader
 *              checks at attach).
 *   step35     196b-a11b = Step-3.7-Flash (45 layers of 4096, every 4th
 *              full attention with 64 query heads, the others sliding
 *              (window 512) with 96; 8 K/V heads of 128, a head-wise
 *              gate; 3 dense layers of 11264, then 288 sigmoid-routed
 *              experts of 1280, 8 a token, and a shared one of 1280;
 *              vocab 128896; no NextN blocks: the trunk file only);
 *              tiny-step for tests.
 *   dflash     dflash2-27b = Qwen3.8-27B-DFlash2, the DFlash2 block
 *              drafter of 27b (5 layers of 5120, all sliding (window
 *              2048, non-causal), 32/8 heads of 128, FFN 17408; taps of
 *              the trunk's layers 5, 19, 33, 47, 61 (target_layers 6,
 *              20, 34, 48, 62: llama.cpp taps a layer's input); block 8,
 *              conv kernel 2 over groups of 16, selector rank 256, top
 *              16, mask token 248070; 81 tensors, 1.92 G parameters);
 *              tiny-dflash2 = one of tiny (2 layers of 256, a sliding
 *              (window 16) then a full-attention one, 4/2 heads of 32,
 *              FFN 128, taps of layers 0 and 2, block 8, rank 32, top 8,
 *              mask token 990).  A drafter has no embedding or head (it
 *              reads its trunk's): it fits only the trunk of its hidden
 *              size, vocabulary (the codebooks' rows) and layer count.
 *              Laid out as llama.cpp's converter writes one (tensor
 *              order, names, ne, dflash.* keys; the 27B's
 *              rope.dimension_sections [64, 0, 0, 0] as it writes them
 *              for an M-RoPE target, and as the published GGUFs carry
 *              them since their revision of 2026-08-24 (third-party
 *              notes); t/data/dflash/llamacpp-header.txt is its
 *              conversion of a drafter of model A, whose config names no
 *              M-RoPE, as tiny-dflash2's is laid out).
 *   clip       31b-mmproj = gemma-4-31B-it's vision tower as llama.cpp's
 *              converter writes its mmproj GGUF (projector gemma4v: 27
 *              layers of 1152, 16 heads of 72, FFN 4304, patch 16, 2 x
 *              10240 position rows, pooling 3, std_bias / std_scale, the
 *              projection to 5376); 26b-mmproj the same tower projected to
 *              2816 (26B-A4B); tiny-mmproj (projected to 256: tiny-gemma4's
 *              width) for tests.  Weights F16, BF16 (the default) or F32
 *              (-t); the norms, the position tables and, but at F16, the
 *              patch embedding F32, as the converter keeps them.
 * -t: the matrices' type (Q8_0, NVFP4, IQ4_XS, ...; default Q8_0, BF16
 * for a drafter, as the published drafters are).  -x: the routed
 * experts' type (default: the -t type; e.g. -t Q8_0 -x IQ4_XS).  -e:
 * token_embd and output, or a drafter's selector codebooks (default: Q5_K
 * for NVFP4, else the -t type).  A row whose length the type's block does
 * not divide takes llama-quantize's fallback (Q5_K -> Q5_1, IQ4_XS ->
 * IQ4_NL, ...; see quant_fit_block).  Norms, ssm_a, dt bias, conv1d,
 * router biases and scales, rope_freqs and a drafter's conv bases are
 * F32.  -L N keeps the first N layers (the MTP
 * layer, where the shape has one, follows them; a tower's first N
 * blocks): a file of fewer layers for a shape that does not fit the disk
 * or GPU, whose speed is per layer, not the model's.  -n lists the
 * tensors (name, type, dims,
 * bytes) and their total count, parameters and bytes, writing nothing.
 * Weights are random bits with block scales of a sane size, so
 * activations stay finite for a while; values are not meaningful.  The
 * vocabulary is a stand-in that llama.cpp loads (llama-bench on the same
 * file; a drafter carries its trunk's, as the converter copies it; a
 * gemma4 or gemma4-assistant one has Gemma-4's image markers
 * (gemma4_markers) and a chat template (gemma4_template)); -V leaves it
 * out (no tokenizer.* metadata but a drafter's mask_token_id: a model
 * for token-id prompts only, as run-gen --jsonl {"prompt": [ids]} gives
 * them).
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "util.h"

enum { QWEN35, QWEN35MOE, GEMMA4, STEP35, DFLASH, GEMMA4A };

static const char *const arch_name[] = { "qwen35", "qwen35moe", "gemma4", "step35", "dflash",
	"gemma4-assistant" };

/*
 * The fewest layers -L keeps: a full-attention layer and, where the model
 * has them, a sliding one (llama.cpp fails a qwen35 trunk of GDN layers
 * only, and a gemma4 or step35 one without both kinds of layer).
 */
static const int min_layers[] = { 4, 4, 6, 2, 1, 4 };

/*
 * A model's shape.  hd, n_kv: the full-attention layers' head size and
 * K/V heads; the sliding layers' (gemma4, step35) in *_swa.  n_rot: the
 * full layers' rotated dims.
 */
struct shape {
	const char *name;
	int	arch;
	int	n_embd, n_layer, n_ff, n_head, n_kv, hd, n_rot, vocab;
	int	nk, nv, dk, dv;			/* qwen35*: GDN key / value heads, sizes (dv 0: dk) */
	int	n_exp, n_used, ff_exp, ff_sh;	/* experts, a token, widths (shared: 0 none) */
	int	n_head_swa, n_kv_swa, hd_swa, swa;	/* sliding layers, window */
	int	n_dense;			/* step35: leading dense layers */
	/* dflash: block, conv kernel and group, selector rank and top k, mask token, context */
	int	block, conv_k, conv_g, sel_rank, sel_topk, mask_id, n_ctx;
	int	n_tap, taps[5];		/* target_layers: the trunk layers whose input is read */
	unsigned swa_mask;		/* bit il: layer il sliding (window swa) */
	int	n_bb;			/* gemma4-assistant: its target's width */
	int	mrope;			/* the trunk is M-RoPE: rope.dimension_sections [hd/2, 0...] */
};

/* A shape's GDN value head size: dv, or dk where it gives none. */
#define gdn_dv(s) ((s)->dv ? (s)->dv : (s)->dk)

#define QWEN_GDN(k, v)	.nk = k, .nv = v, .dk = 128
static const struct shape shapes[] = {
	{ "9b", QWEN35, 4096, 32, 12288, 16, 4, 256, 64, 248320, QWEN_GDN(16, 32) },
	{ "27b", QWEN35, 5120, 64, 17408, 24, 4, 256, 64, 248320, QWEN_GDN(16, 48) },
	{ "tiny", QWEN35, 256, 4, 512, 4, 2, 64, 16, 1000, .nk = 2, .nv = 4, .dk = 64 },
	/* GDN key heads of 80 (a trained model's): the CUDA backend's padded kernels */
	{ "tiny-k80", QWEN35, 256, 4, 512, 4, 2, 64, 16, 1000, .nk = 2, .nv = 4, .dk = 80,
	    .dv = 64 },
	{ "35b-a3b", QWEN35MOE, 2048, 40, 0, 16, 2, 256, 64, 248320, QWEN_GDN(16, 32),
	    .n_exp = 256, .n_used = 8, .ff_exp = 512, .ff_sh = 512 },
	{ "tiny-moe", QWEN35MOE, 256, 4, 0, 4, 2, 64, 16, 1000, .nk = 2, .nv = 4, .dk = 64,
	    .n_exp = 8, .n_used = 2, .ff_exp = 128, .ff_sh = 128 },
	{ "31b", GEMMA4, 5376, 60, 21504, 32, 4, 512, 128, 262144,
	    .n_head_swa = 32, .n_kv_swa = 16, .hd_swa = 256, .swa = 1024 },
	{ "26b-a4b", GEMMA4, 2816, 30, 2112, 16, 2, 512, 128, 262144,
	    .n_exp = 128, .n_used = 8, .ff_exp = 704,
	    .n_head_swa = 16, .n_kv_swa = 8, .hd_swa = 256, .swa = 1024 },
	{ "tiny-gemma4", GEMMA4, 256, 6, 512, 4, 1, 128, 32, 1000,
	    .n_exp = 8, .n_used = 2, .ff_exp = 96,
	    .n_head_swa = 4, .n_kv_swa = 2, .hd_swa = 64, .swa = 64 },
	{ "196b-a11b", STEP35, 4096, 45, 11264, 64, 8, 128, 128, 128896,
	    .n_exp = 288, .n_used = 8, .ff_exp = 1280, .ff_sh = 1280,
	    .n_head_swa = 96, .n_kv_swa = 8, .hd_swa = 128, .swa = 512, .n_dense = 3 },
	{ "tiny-step", STEP35, 256, 5, 512, 4, 2, 64, 64, 1000,
	    .n_exp = 8, .n_used = 2, .ff_exp = 128, .ff_sh = 128,
	    .n_head_swa = 6, .n_kv_swa = 2, .hd_swa = 64, .swa = 64, .n_dense = 1 },
	{ "dflash2-27b", DFLASH, 5120, 5, 17408, 32, 8, 128, 128, 248320, .swa = 2048,
	    .block = 8, .conv_k = 2, .conv_g = 16, .sel_rank = 256, .sel_topk = 16,
	    .mask_id = 248070, .n_ctx = 262144, .n_tap = 5, .taps = { 6, 20, 34, 48, 62 },
	    .swa_mask = 0x1F, .mrope = 1 },
	{ "tiny-dflash2", DFLASH, 256, 2, 128, 4, 2, 32, 32, 1000, .swa = 16,
	    .block = 8, .conv_k = 2, .conv_g = 16, .sel_rank = 32, .sel_topk = 8,
	    .mask_id = 990, .n_ctx = 4096, .n_tap = 2, .taps = { 1, 3 }, .swa_mask = 0x1 },
	/* layer_types ASSUMED [s, s, s, full] (swa_mask 0x7): see the head of this file */
	{ "31b-assistant", GEMMA4A, 1024, 4, 8192, 32, 4, 512, 128, 262144,
	    .n_head_swa = 32, .n_kv_swa = 16, .hd_swa = 256, .swa = 1024, .swa_mask = 0x7,
	    .n_bb = 5376 },
	{ "tiny-gemma4-assistant", GEMMA4A, 128, 4, 256, 4, 1, 128, 32, 1000,
	    .n_head_swa = 4, .n_kv_swa = 2, .hd_swa = 64, .swa = 64, .swa_mask = 0x7,
	    .n_bb = 256 },
};
#define SHAPE_LIST "9b, 27b, tiny, tiny-k80, 35b-a3b, tiny-moe, 31b, 26b-a4b, tiny-gemma4, " \
	"196b-a11b, tiny-step, dflash2-27b, tiny-dflash2, 31b-assistant, tiny-gemma4-assistant"

/*
 * A Gemma-4 vision tower (-p NAME-mmproj), llama.cpp's gemma4v mmproj
 * (conversion/gemma.py Gemma4VisionAudioModel; the large towers' geometry
 * from transformers' convert_gemma4_weights.py): n_head heads of
 * n_embd / n_head, n_pos rows of each position table, n_text the
 * projection's width (the text model's hidden size).
 */
struct mmproj {
	const char *name;
	int	n_embd, n_ff, n_layer, n_head, patch, n_pos, n_text;
};

static const struct mmproj mmprojs[] = {
	{ "31b-mmproj", 1152, 4304, 27, 16, 16, 10240, 5376 },
	{ "26b-mmproj", 1152, 4304, 27, 16, 16, 10240, 2816 },
	{ "tiny-mmproj", 64, 128, 2, 4, 16, 10240, 256 },
};
#define MMPROJ_LIST "31b-mmproj, 26b-mmproj, tiny-mmproj"
#define USAGE "usage: gguf-random [-hnV] [-p SHAPE] [-t TYPE] [-x TYPE] [-e TYPE] [-L N] OUT (-n: no OUT)"

struct gen {
	struct gguf_writer *w;
	const struct shape *s;
	const struct mmproj *mp;	/* -p NAME-mmproj: a vision tower (s unused) */
	int	nl;		/* trunk layers written (-L) */
	int	mt, xt, et;	/* matrix, expert, embedding/output types */
	uint64_t rng;
	int	pass;		/* 0: tensor infos, 1: data */
	int	dry;		/* -n: list, write nothing */
	int	no_vocab;	/* -V */
	int64_t	n_tensors, n_params;
	uint64_t n_bytes;
	uint8_t	*pool;		/* random bytes */
	char	err[UTIL_ERRLEN];
};

enum { POOL = 1 << 24 };

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* Offsets of fp16 scales in a block of t, -1 ended. */
static const int *
halves(int t)
{
	static const int d0[] = { 0, -1 }, d01[] = { 0, 2, -1 }, q6k[] = { 208, -1 },
	    none[] = { -1 };

	switch (t) {
	case QUANT_Q8_0: case QUANT_Q4_0: case QUANT_Q5_0: case QUANT_IQ4_NL:
	case QUANT_IQ4_XS: return d0;
	case QUANT_Q4_1: case QUANT_Q5_1: case QUANT_Q4_K: case QUANT_Q5_K: return d01;
	case QUANT_Q6_K: return q6k;
	default: return none;
	}
}

static int
is_float(int t)
{
	return t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16;
}

/* A float tensor's rows: val, or small noise when val == 0 (f[i] for rope_freqs). */
static int
float_rows(struct gen *g, int type, int64_t ne0, int64_t rows, float val, const float *f)
{
	size_t rb = quant_row_size(type, ne0);
	float *x = malloc(ne0 * sizeof *x);
	void *o = malloc(rb);
	int rc = x == NULL || o == NULL ? -1 : 0;

	for (int64_t r = 0; rc == 0 && r < rows; r++) {
		for (int64_t i = 0; i < ne0; i++)
			x[i] = f != NULL ? f[r * ne0 + i] : val != 0 ? val :
			    (float)((int64_t)(rnd(&g->rng) >> 40) - (1 << 23)) / (float)(1 << 23) * 0.1f;
		rc = quant_quantize_row(type, x, o, ne0, g->err) || gguf_writer_write(g->w, o, rb) ?
		    -1 : 0;
	}
	free(x), free(o);
	return rc;
}

/*
 * One tensor of ne0 x ne1 x ne2 (ne2 > 1: a stack of experts): its info in
 * pass 0 (or its line of the -n listing), its bytes in pass 1.  A
 * quantized type whose block does not divide ne0 takes the fallback.
 */
static int
tensor3(struct gen *g, const char *name, int type, int64_t ne0, int64_t ne1, int64_t ne2,
    const float *f, float val)
{
	int64_t ne[3] = { ne0, ne1, ne2 };
	int nd = ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1;
	const struct quant_traits *tr;
	size_t rb, n, done = 0;
	uint16_t h;

	type = quant_fit_block(type, ne0);
	tr = quant_traits(type);
	rb = quant_row_size(type, ne0), n = rb * (size_t)(ne1 * ne2);
	if (g->pass == 0) {
		g->n_tensors++, g->n_params += ne0 * ne1 * ne2, g->n_bytes += n;
		if (!g->dry)
			return gguf_writer_add_tensor(g->w, name, type, nd, ne);
		printf("%s\t%s\t%" PRId64, name, quant_name(type), ne0);
		for (int i = 1; i < nd; i++)
			printf("x%" PRId64, ne[i]);
		printf("\t%zu\n", n);
		return 0;
	}
	if (is_float(type))
		return float_rows(g, type, ne0, ne1 * ne2, val, f);
	h = quant_f32_to_f16(1.0f / (16.0f * sqrtf((float)ne0)));
	while (done < n) {
		size_t cmax = POOL / tr->size * tr->size;	/* whole blocks per write */
		size_t c = n - done < cmax ? n - done : cmax;
		size_t off = (size_t)(rnd(&g->rng) % 4096) * tr->size;	/* a block boundary */
		uint8_t *p = g->pool + off;
		if (off + c > (size_t)POOL + 4096 * (size_t)tr->size)
			p = g->pool;
		for (size_t b = 0; b + tr->size <= c; b += tr->size) {
			for (const int *o = halves(type); *o >= 0; o++)
				memcpy(p + b + *o, &h, 2);
			if (type == QUANT_NVFP4)
				memset(p + b, 0x28, 4);
			if (type == QUANT_IQ4_XS)	/* every sub-block's scale 33 - 32 = 1 */
				memcpy(p + b + 2, "\xAA\xAA\x11\x11\x11\x11", 6);
		}
		if (gguf_writer_write(g->w, p, c) != 0)
			return -1;
		done += c;
	}
	return 0;
}

static int
tensor(struct gen *g, const char *name, int type, int64_t ne0, int64_t ne1, float val)
{
	return tensor3(g, name, type, ne0, ne1, 1, NULL, val);
}

#define T(name, ...)	do { if (tensor(g, name, __VA_ARGS__)) return -1; } while (0)
#define T3(name, ...)	do { if (tensor3(g, name, __VA_ARGS__, NULL, 0)) return -1; } while (0)
#define NM(x)		(snprintf(n, sizeof n, "blk.%d.%s", il, x), n)

/* The routed experts beside a router; gate and up apart (qwen35moe, step35) or fused (gemma4). */
static int
experts(struct gen *g, int il, int fused)
{
	const struct shape *s = g->s;
	int e = s->n_embd, f = s->ff_exp, x = g->xt;
	char n[128];

	T(NM("ffn_gate_inp.weight"), QUANT_F32, e, s->n_exp, 0);	/* llama-quantize keeps it */
	if (fused)
		T3(NM("ffn_gate_up_exps.weight"), x, e, 2 * f, s->n_exp);
	else {
		T3(NM("ffn_gate_exps.weight"), x, e, f, s->n_exp);
		T3(NM("ffn_up_exps.weight"), x, e, f, s->n_exp);
	}
	T3(NM("ffn_down_exps.weight"), x, f, e, s->n_exp);
	return 0;
}

/* A SwiGLU / GeGLU MLP of width ff; sfx "" or "_shexp". */
static int
mlp(struct gen *g, int il, int ff, const char *sfx)
{
	int e = g->s->n_embd;
	char n[128], k[64];

#define K(x) (snprintf(k, sizeof k, "%s%s.weight", x, sfx), NM(k))
	T(K("ffn_gate"), g->mt, e, ff, 0);
	T(K("ffn_up"), g->mt, e, ff, 0);
	T(K("ffn_down"), g->mt, ff, e, 0);
#undef K
	return 0;
}

/* A NextN block's own tensors (its head is the trunk's). */
static int
nextn(struct gen *g, int il)
{
	int e = g->s->n_embd;
	char n[128];

	T(NM("nextn.eh_proj.weight"), g->mt, 2 * e, e, 0);
	T(NM("nextn.enorm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("nextn.hnorm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("nextn.shared_head_norm.weight"), QUANT_F32, e, 1, 1.0f);
	return 0;
}

/* qwen35 / qwen35moe: layer il, full attention or GDN, a dense or MoE FFN, + NextN when mtp. */
static int
qwen35_layer(struct gen *g, int il, int full, int mtp)
{
	const struct shape *s = g->s;
	int e = s->n_embd, mt = g->mt, vd = s->nv * gdn_dv(s), cd = 2 * s->nk * s->dk + vd;
	char n[128];

	T(NM("attn_norm.weight"), QUANT_F32, e, 1, 1.0f);
	if (full) {
		T(NM("attn_q.weight"), mt, e, 2 * s->n_head * s->hd, 0);
		T(NM("attn_k.weight"), mt, e, s->n_kv * s->hd, 0);
		T(NM("attn_v.weight"), mt, e, s->n_kv * s->hd, 0);
		T(NM("attn_output.weight"), mt, s->n_head * s->hd, e, 0);
		T(NM("attn_q_norm.weight"), QUANT_F32, s->hd, 1, 1.0f);
		T(NM("attn_k_norm.weight"), QUANT_F32, s->hd, 1, 1.0f);
	} else {
		T(NM("attn_qkv.weight"), mt, e, cd, 0);
		T(NM("attn_gate.weight"), mt, e, vd, 0);
		T(NM("ssm_alpha.weight"), mt, e, s->nv, 0);
		T(NM("ssm_beta.weight"), mt, e, s->nv, 0);
		T(NM("ssm_a"), QUANT_F32, s->nv, 1, -0.5f);
		T(NM("ssm_dt.bias"), QUANT_F32, s->nv, 1, 0.5f);
		T(NM("ssm_conv1d.weight"), QUANT_F32, 4, cd, 0);
		T(NM("ssm_norm.weight"), QUANT_F32, gdn_dv(s), 1, 1.0f);
		T(NM("ssm_out.weight"), mt, vd, e, 0);
	}
	T(NM("post_attention_norm.weight"), QUANT_F32, e, 1, 1.0f);
	if (s->n_exp == 0 ? mlp(g, il, s->n_ff, "") :
	    experts(g, il, 0) || mlp(g, il, s->ff_sh, "_shexp"))
		return -1;
	if (s->n_exp > 0)
		T(NM("ffn_gate_inp_shexp.weight"), QUANT_F32, e, 1, 0);
	return mtp ? nextn(g, il) : 0;
}

static int
qwen35_tensors(struct gen *g)
{
	const struct shape *s = g->s;

	T("token_embd.weight", g->et, s->n_embd, s->vocab, 0);
	for (int il = 0; il <= g->nl; il++)	/* the last one: MTP */
		if (qwen35_layer(g, il, il == g->nl || (il + 1) % 4 == 0, il == g->nl))
			return -1;
	T("output_norm.weight", QUANT_F32, s->n_embd, 1, 1.0f);
	T("output.weight", g->et, s->n_embd, s->vocab, 0);
	return 0;
}

/* gemma4: a sliding layer unless every 6th (as the released 26B and 31B lay them out). */
static int
gemma4_swa(int il)
{
	return (il + 1) % 6 != 0;
}

static int
gemma4_layer(struct gen *g, int il)
{
	const struct shape *s = g->s;
	int e = s->n_embd, mt = g->mt, swa = gemma4_swa(il);
	int hd = swa ? s->hd_swa : s->hd, kv = (swa ? s->n_kv_swa : s->n_kv) * hd;
	char n[128];

	T(NM("attn_norm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("attn_q.weight"), mt, e, s->n_head * hd, 0);
	T(NM("attn_k.weight"), mt, e, kv, 0);
	if (swa)	/* the global layers' V is their K (attention_k_eq_v) */
		T(NM("attn_v.weight"), mt, e, kv, 0);
	T(NM("attn_output.weight"), mt, s->n_head * hd, e, 0);
	T(NM("attn_q_norm.weight"), QUANT_F32, hd, 1, 1.0f);
	T(NM("attn_k_norm.weight"), QUANT_F32, hd, 1, 1.0f);
	T(NM("post_attention_norm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("layer_output_scale.weight"), QUANT_F32, 1, 1, 1.0f);
	T(NM("ffn_norm.weight"), QUANT_F32, e, 1, 1.0f);
	if (mlp(g, il, s->n_ff, ""))
		return -1;
	T(NM("post_ffw_norm.weight"), QUANT_F32, e, 1, 1.0f);
	if (s->n_exp == 0)
		return 0;
	if (experts(g, il, 1))
		return -1;
	T(NM("ffn_gate_inp.scale"), QUANT_F32, e, 1, 1.0f);
	T(NM("ffn_down_exps.scale"), QUANT_F32, s->n_exp, 1, 1.0f);
	T(NM("pre_ffw_norm_2.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("post_ffw_norm_1.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("post_ffw_norm_2.weight"), QUANT_F32, e, 1, 1.0f);
	return 0;
}

/*
 * rope_freqs: the global layers' proportional RoPE as llama.cpp's
 * converter writes it, 1 for each rotated pair, 1e30 (no rotation) for the
 * rest (gemma4's and its assistant's).
 */
static int
gemma4_rope_freqs(struct gen *g)
{
	const struct shape *s = g->s;
	float *f = malloc(s->hd / 2 * sizeof *f);
	int rc;

	if (f == NULL)
		return -1;
	for (int i = 0; i < s->hd / 2; i++)
		f[i] = i < s->n_rot / 2 ? 1.0f : 1e30f;
	rc = tensor3(g, "rope_freqs.weight", QUANT_F32, s->hd / 2, 1, 1, f, 0);
	free(f);
	return rc;
}

/* gemma4's tensors: rope_freqs, the output the token table (tied). */
static int
gemma4_tensors(struct gen *g)
{
	const struct shape *s = g->s;

	if (gemma4_rope_freqs(g) != 0)
		return -1;
	T("token_embd.weight", g->et, s->n_embd, s->vocab, 0);
	for (int il = 0; il < g->nl; il++)
		if (gemma4_layer(g, il))
			return -1;
	T("output_norm.weight", QUANT_F32, s->n_embd, 1, 1.0f);
	return 0;
}

/*
 * A gemma4-assistant layer: Q-only attention (no K, V or K norm: every
 * layer reads its target's), the GeGLU MLP, the plan's names sorted.
 */
static int
asst_layer(struct gen *g, int il)
{
	const struct shape *s = g->s;
	int e = s->n_embd, mt = g->mt, swa = s->swa_mask >> il & 1;
	int hd = swa ? s->hd_swa : s->hd, q = s->n_head * hd;
	char n[128];

	T(NM("attn_norm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("attn_output.weight"), mt, q, e, 0);
	T(NM("attn_q.weight"), mt, e, q, 0);
	T(NM("attn_q_norm.weight"), QUANT_F32, hd, 1, 1.0f);
	T(NM("ffn_down.weight"), mt, s->n_ff, e, 0);
	T(NM("ffn_gate.weight"), mt, e, s->n_ff, 0);
	T(NM("ffn_norm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("ffn_up.weight"), mt, e, s->n_ff, 0);
	T(NM("layer_output_scale.weight"), QUANT_F32, 1, 1, 1.0f);
	T(NM("post_attention_norm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("post_ffw_norm.weight"), QUANT_F32, e, 1, 1.0f);
	return 0;
}

/*
 * A gemma4-assistant in the plan's order (st_sort_out: the token table,
 * the layers, output_norm, then the rest by name): its head is its token
 * table (tied); pre_projection [n_embd][2 n_bb] takes the target's
 * embedding and hidden state, post_projection [n_bb][n_embd] gives the
 * next step's; rope_freqs as gemma4's.
 */
static int
asst_tensors(struct gen *g)
{
	const struct shape *s = g->s;

	T("token_embd.weight", g->et, s->n_embd, s->vocab, 0);
	for (int il = 0; il < g->nl; il++)
		if (asst_layer(g, il))
			return -1;
	T("output_norm.weight", QUANT_F32, s->n_embd, 1, 1.0f);
	T("nextn.post_projection.weight", g->mt, s->n_embd, s->n_bb, 0);
	T("nextn.pre_projection.weight", g->mt, 2 * s->n_bb, s->n_embd, 0);
	return gemma4_rope_freqs(g);
}

/* step35: full attention on every 4th layer from the first, sliding on the others. */
static int
step35_swa(int il)
{
	return il % 4 != 0;
}

static int
step35_layer(struct gen *g, int il)
{
	const struct shape *s = g->s;
	int e = s->n_embd, mt = g->mt, swa = step35_swa(il);
	int nh = swa ? s->n_head_swa : s->n_head, kv = (swa ? s->n_kv_swa : s->n_kv) * s->hd;
	char n[128];

	T(NM("attn_norm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("attn_q.weight"), mt, e, nh * s->hd, 0);
	T(NM("attn_k.weight"), mt, e, kv, 0);
	T(NM("attn_v.weight"), mt, e, kv, 0);
	T(NM("attn_output.weight"), mt, nh * s->hd, e, 0);
	T(NM("attn_gate.weight"), mt, e, nh, 0);
	T(NM("attn_q_norm.weight"), QUANT_F32, s->hd, 1, 1.0f);
	T(NM("attn_k_norm.weight"), QUANT_F32, s->hd, 1, 1.0f);
	T(NM("ffn_norm.weight"), QUANT_F32, e, 1, 1.0f);
	if (il < s->n_dense)
		return mlp(g, il, s->n_ff, "");
	if (experts(g, il, 0))
		return -1;
	T(NM("exp_probs_b.bias"), QUANT_F32, s->n_exp, 1, 0);
	return mlp(g, il, s->ff_sh, "_shexp");
}

static int
step35_tensors(struct gen *g)
{
	const struct shape *s = g->s;

	T("token_embd.weight", g->et, s->n_embd, s->vocab, 0);
	for (int il = 0; il < g->nl; il++)
		if (step35_layer(g, il))
			return -1;
	T("output_norm.weight", QUANT_F32, s->n_embd, 1, 1.0f);
	T("output.weight", g->et, s->n_embd, s->vocab, 0);
	return 0;
}

/*
 * A DFlash2 convolution's base kernel, ne {n_embd, conv_k, 2} (side,
 * tap, channel): tap 0 one, the later taps small noise, so each side
 * starts near the identity (values in pass 1 only).
 */
static int
conv_base(struct gen *g, const char *name)
{
	const struct shape *s = g->s;
	size_t n = 2 * (size_t)s->conv_k * s->n_embd;
	float *f = NULL;
	int rc;

	if (g->pass == 1 && (f = malloc(n * sizeof *f)) == NULL)
		return -1;
	for (size_t i = 0; f != NULL && i < n; i++)
		f[i] = i / s->n_embd % s->conv_k == 0 ? 1.0f :
		    (float)((int64_t)(rnd(&g->rng) >> 40) - (1 << 23)) / (float)(1 << 23) * 0.1f;
	rc = tensor3(g, name, QUANT_F32, s->n_embd, s->conv_k, 2, f, 0);
	free(f);
	return rc;
}

/* A drafter layer, its tensors in the converter's order (the HF names sorted). */
static int
dflash_layer(struct gen *g, int il)
{
	const struct shape *s = g->s;
	int e = s->n_embd, mt = g->mt, qd = s->n_head * s->hd, kvd = s->n_kv * s->hd;
	int cp = 2 * s->conv_k * (e / s->conv_g);
	char n[128];

	if (conv_base(g, NM("attn_conv_base")))
		return -1;
	T(NM("attn_conv_proj.weight"), mt, e, cp, 0);
	T(NM("attn_norm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("ffn_down.weight"), mt, s->n_ff, e, 0);
	T(NM("ffn_gate.weight"), mt, e, s->n_ff, 0);
	T(NM("ffn_up.weight"), mt, e, s->n_ff, 0);
	if (conv_base(g, NM("ffn_conv_base")))
		return -1;
	T(NM("ffn_conv_proj.weight"), mt, e, cp, 0);
	T(NM("ffn_norm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("attn_k_norm.weight"), QUANT_F32, s->hd, 1, 1.0f);
	T(NM("attn_k.weight"), mt, e, kvd, 0);
	T(NM("attn_output.weight"), mt, qd, e, 0);
	T(NM("attn_q_norm.weight"), QUANT_F32, s->hd, 1, 1.0f);
	T(NM("attn_q.weight"), mt, e, qd, 0);
	T(NM("attn_v.weight"), mt, e, kvd, 0);
	return 0;
}

/*
 * A DFlash2 drafter: the selector (its hidden projection, the codebooks
 * of the trunk's vocabulary), fc over the taps and its norm, the layers,
 * the final norm; no token_embd or output (the trunk's).
 */
static int
dflash_tensors(struct gen *g)
{
	const struct shape *s = g->s;
	int e = s->n_embd;

	T("selector_hidden.weight", g->mt, e, s->sel_rank, 0);
	T("selector_predecessor.weight", g->et, s->sel_rank, s->vocab, 0);
	T("selector_successor.weight", g->et, s->sel_rank, s->vocab, 0);
	T("fc.weight", g->mt, s->n_tap * e, e, 0);
	T("enc.output_norm.weight", QUANT_F32, e, 1, 1.0f);
	for (int il = 0; il < g->nl; il++)
		if (dflash_layer(g, il))
			return -1;
	T("output_norm.weight", QUANT_F32, e, 1, 1.0f);
	return 0;
}
#undef NM

/*
 * An mmproj tensor of nd dims ne (ne[nd..3] = 1), every one a float type:
 * its info (or -n line) in pass 0, its rows in pass 1 (val; 0: noise).
 */
static int
mtensor(struct gen *g, const char *name, int type, int nd, const int64_t *ne, float val)
{
	int64_t rows = ne[1] * ne[2] * ne[3];
	size_t n = quant_row_size(type, ne[0]) * (size_t)rows;

	if (g->pass == 1)
		return float_rows(g, type, ne[0], rows, val, NULL);
	g->n_tensors++, g->n_params += ne[0] * rows, g->n_bytes += n;
	if (!g->dry)
		return gguf_writer_add_tensor(g->w, name, type, nd, ne);
	printf("%s\t%s\t%" PRId64, name, quant_name(type), ne[0]);
	for (int i = 1; i < nd; i++)
		printf("x%" PRId64, ne[i]);
	printf("\t%zu\n", n);
	return 0;
}

#define MT(name, type, val, nd, ...)	do { const int64_t ne_[4] = { __VA_ARGS__ }; \
	if (mtensor(g, name, type, nd, ne_, val)) return -1; } while (0)
#define VM(x)	(snprintf(n, sizeof n, "v.blk.%d.%s", il, x), n)

/* A tower block: llama.cpp's names (13 tensors, no biases, no clamp bounds: the large towers'). */
static int
mmproj_layer(struct gen *g, int il)
{
	const struct mmproj *p = g->mp;
	int64_t e = p->n_embd, f = p->n_ff, hd = p->n_embd / p->n_head;
	int mt = g->mt;
	char n[128];

	MT(VM("ln1.weight"), QUANT_F32, 1.0f, 1, e, 1, 1, 1);
	MT(VM("attn_q.weight"), mt, 0, 2, e, e, 1, 1);
	MT(VM("attn_k.weight"), mt, 0, 2, e, e, 1, 1);
	MT(VM("attn_v.weight"), mt, 0, 2, e, e, 1, 1);
	MT(VM("attn_q_norm.weight"), QUANT_F32, 1.0f, 1, hd, 1, 1, 1);
	MT(VM("attn_k_norm.weight"), QUANT_F32, 1.0f, 1, hd, 1, 1, 1);
	MT(VM("attn_out.weight"), mt, 0, 2, e, e, 1, 1);
	MT(VM("attn_post_norm.weight"), QUANT_F32, 1.0f, 1, e, 1, 1, 1);
	MT(VM("ln2.weight"), QUANT_F32, 1.0f, 1, e, 1, 1, 1);
	MT(VM("ffn_gate.weight"), mt, 0, 2, e, f, 1, 1);
	MT(VM("ffn_up.weight"), mt, 0, 2, e, f, 1, 1);
	MT(VM("ffn_down.weight"), mt, 0, 2, f, e, 1, 1);
	MT(VM("ffn_post_norm.weight"), QUANT_F32, 1.0f, 1, e, 1, 1, 1);
	return 0;
}

/*
 * The tower's tensors: the projection [n_text][n_embd]; the patch
 * embedding as the converter's conv kernel ne [p, p, 3, n_embd] (F16 in
 * an F16 file, else F32); the position tables ne [n_embd, n_pos, 2] (x
 * rows, then y), F32; std_bias (noise), std_scale (1); the blocks.
 */
static int
mmproj_tensors(struct gen *g)
{
	const struct mmproj *p = g->mp;
	int64_t e = p->n_embd;

	MT("mm.input_projection.weight", g->mt, 0, 2, e, p->n_text, 1, 1);
	MT("v.patch_embd.weight", g->mt == QUANT_F16 ? QUANT_F16 : QUANT_F32, 0, 4,
	    p->patch, p->patch, 3, e);
	MT("v.position_embd.weight", QUANT_F32, 0, 3, e, p->n_pos, 2, 1);
	MT("v.std_bias", QUANT_F32, 0, 1, e, 1, 1, 1);
	MT("v.std_scale", QUANT_F32, 1.0f, 1, e, 1, 1, 1);
	for (int il = 0; il < g->nl; il++)
		if (mmproj_layer(g, il))
			return -1;
	return 0;
}
#undef VM
#undef MT

static int
tensors(struct gen *g)
{
	if (g->mp != NULL)
		return mmproj_tensors(g);
	switch (g->s->arch) {
	case GEMMA4: return gemma4_tensors(g);
	case STEP35: return step35_tensors(g);
	case DFLASH: return dflash_tensors(g);
	case GEMMA4A: return asst_tensors(g);
	default: return qwen35_tensors(g);
	}
}

/*
 * Gemma-4's image markers in a gemma4 stand-in vocabulary, control tokens
 * (run-gen --image and serve find them by name): at Gemma-4's own ids
 * (<|image> 255999, <|image|> 258880, <image|> 258882) in a vocabulary
 * that holds them, else the three ids below the last one (eos).
 */
static int
gemma4_markers(int n, char **tok, int32_t *type)
{
	static const char *const m[3] = { "<|image>", "<|image|>", "<image|>" };
	static const int id[3] = { 255999, 258880, 258882 };

	for (int i = 0; i < 3; i++) {
		int k = n > id[2] + 1 ? id[i] : n - 4 + i;

		free(tok[k]);
		if ((tok[k] = strdup(m[i])) == NULL)
			return -1;
		type[k] = 3;	/* control */
	}
	return 0;
}

/*
 * A Gemma-4-style chat template (t/data/gemma4/g4-vision's: turns, image
 * parts as <|image|> on lines of their own) in a gemma4 or assistant
 * vocabulary, as the converter copies the model's: serve's chat and its
 * images (MEMRA_GEMMA_VISION) need one.  Its turn markers are plain text
 * to the stand-in vocabulary.
 */
static const char gemma4_template[] =
	"{{- bos_token -}}\n"
	"{%- for message in messages -%}\n"
	"{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
	"{{- '<|turn>' + role + '\\n' -}}\n"
	"{%- if message['content'] is string -%}\n"
	"{{- message['content'] | trim -}}\n"
	"{%- else -%}\n"
	"{%- for item in message['content'] -%}\n"
	"{%- if item['type'] == 'text' -%}\n"
	"{{- item['text'] | trim -}}\n"
	"{%- elif item['type'] == 'image' -%}\n"
	"{{- '\\n\\n<|image|>\\n\\n' -}}\n"
	"{%- endif -%}\n"
	"{%- endfor -%}\n"
	"{%- endif -%}\n"
	"{{- '<turn|>\\n' -}}\n"
	"{%- endfor -%}\n"
	"{%- if add_generation_prompt -%}\n"
	"{{- '<|turn>model\\n' -}}\n"
	"{%- endif -%}\n";

/*
 * A byte-level BPE vocabulary llama.cpp loads (gpt2 model, qwen35 split):
 * the 256 byte tokens of GPT-2's byte mapping, then "<r N>" fillers up to
 * the vocabulary size, no merges.  Only the ids matter to a benchmark, so
 * every architecture gets this one (its own tokenizer is no part of speed).
 */
static int
vocab(struct gen *g)
{
	int n = g->s->vocab, rc = -1;
	char **tok = calloc(n, sizeof *tok);
	int32_t *type = malloc(n * sizeof *type), eos = n - 1;
	int gemma = g->s->arch == GEMMA4 || g->s->arch == GEMMA4A;

	for (int i = 0, nb = 0; tok != NULL && type != NULL && i < n; i++) {
		char b[16];
		type[i] = 1;
		if (i < 256) {	/* byte i as GPT-2 maps it, in UTF-8 */
			int printable = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174;
			unsigned cp = printable ? (unsigned)i : 256u + (unsigned)nb++;
			if (cp < 0x80)
				b[0] = (char)cp, b[1] = 0;
			else
				b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), b[2] = 0;
		} else
			snprintf(b, sizeof b, "<r %d>", i);
		if ((tok[i] = strdup(b)) == NULL)
			goto out;
	}
	if (tok != NULL && type != NULL && gemma && gemma4_markers(n, tok, type))
		goto out;
	if (tok != NULL && type != NULL)
		rc = gguf_writer_add_str(g->w, "tokenizer.ggml.model", "gpt2", 4) ||
		    gguf_writer_add_str(g->w, "tokenizer.ggml.pre", "qwen35", 6) ||
		    gguf_writer_add_arr_str(g->w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, n) ||
		    gguf_writer_add_arr(g->w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, n) ||
		    gguf_writer_add_arr_str(g->w, "tokenizer.ggml.merges", NULL, NULL, 0) ||
		    gguf_writer_add_u32(g->w, "tokenizer.ggml.eos_token_id", (uint32_t)eos) ||
		    (gemma && gguf_writer_add_str(g->w, "tokenizer.chat_template", gemma4_template,
		    strlen(gemma4_template))) ? -1 : 0;
out:
	for (int i = 0; tok != NULL && i < n; i++)
		free(tok[i]);
	free(tok), free(type);
	return rc;
}

/* "<arch>.<key>" into the writer. */
static const char *
key(struct gen *g, const char *k)
{
	static char b[128];

	snprintf(b, sizeof b, "%s.%s", arch_name[g->s->arch], k);
	return b;
}

static int
u32(struct gen *g, const char *k, uint32_t v)
{
	return gguf_writer_add_u32(g->w, key(g, k), v);
}

static int
f32(struct gen *g, const char *k, float v)
{
	return gguf_writer_add_f32(g->w, key(g, k), v);
}

/* A per-layer array over the trunk's layers: f(il) as INT32 or BOOL. */
static int
per_layer(struct gen *g, const char *k, int elem, int (*f)(const struct shape *, int))
{
	int32_t v[1024];
	uint8_t b[1024];

	for (int il = 0; il < g->nl; il++)
		v[il] = f(g->s, il), b[il] = (uint8_t)(v[il] != 0);
	return gguf_writer_add_arr(g->w, key(g, k), elem, elem == GGUF_TYPE_BOOL ?
	    (const void *)b : (const void *)v, (uint64_t)g->nl);
}

static int gemma4_swa_at(const struct shape *s, int il) { (void)s; return gemma4_swa(il); }
static int mask_swa_at(const struct shape *s, int il) { return (int)(s->swa_mask >> il & 1); }
static int step35_swa_at(const struct shape *s, int il) { (void)s; return step35_swa(il); }

static int
gemma4_kv_at(const struct shape *s, int il)
{
	return gemma4_swa(il) ? s->n_kv_swa : s->n_kv;
}

static int
asst_kv_at(const struct shape *s, int il)
{
	return s->swa_mask >> il & 1 ? s->n_kv_swa : s->n_kv;
}

static int
step35_head_at(const struct shape *s, int il)
{
	return step35_swa(il) ? s->n_head_swa : s->n_head;
}

static int
step35_kv_at(const struct shape *s, int il)
{
	return step35_swa(il) ? s->n_kv_swa : s->n_kv;
}

/* The experts' keys (expert_shared_feed_forward_length where there is a shared one). */
static int
moe_kvs(struct gen *g)
{
	const struct shape *s = g->s;

	return u32(g, "expert_count", s->n_exp) || u32(g, "expert_used_count", s->n_used) ||
	    u32(g, "expert_feed_forward_length", s->ff_exp) ||
	    (s->ff_sh > 0 && u32(g, "expert_shared_feed_forward_length", s->ff_sh)) ? -1 : 0;
}

static int
qwen35_kvs(struct gen *g)
{
	const struct shape *s = g->s;
	int32_t sec[4] = { 11, 11, 10, 0 };

	return u32(g, "block_count", g->nl + 1) ||
	    u32(g, "context_length", 262144) ||
	    u32(g, "embedding_length", s->n_embd) ||
	    (s->n_exp == 0 ? u32(g, "feed_forward_length", s->n_ff) : moe_kvs(g)) ||
	    u32(g, "attention.head_count", s->n_head) ||
	    u32(g, "attention.head_count_kv", s->n_kv) ||
	    f32(g, "rope.freq_base", 1e7f) ||
	    f32(g, "attention.layer_norm_rms_epsilon", 1e-6f) ||
	    u32(g, "attention.key_length", s->hd) ||
	    u32(g, "attention.value_length", s->hd) ||
	    u32(g, "rope.dimension_count", s->n_rot) ||
	    gguf_writer_add_arr(g->w, key(g, "rope.dimension_sections"), GGUF_TYPE_INT32, sec, 4) ||
	    u32(g, "ssm.conv_kernel", 4) ||
	    u32(g, "ssm.state_size", s->dk) ||
	    u32(g, "ssm.group_count", s->nk) ||
	    u32(g, "ssm.time_step_rank", s->nv) ||
	    u32(g, "ssm.inner_size", s->nv * gdn_dv(s)) ||
	    u32(g, "full_attention_interval", 4) ||
	    u32(g, "nextn_predict_layers", 1) ? -1 : 0;
}

/* gemma4 (llama.cpp's keys: conversion/gemma.py; no per-layer inputs, no shared K/V). */
static int
gemma4_kvs(struct gen *g)
{
	const struct shape *s = g->s;

	return u32(g, "block_count", g->nl) ||
	    u32(g, "context_length", 262144) ||
	    u32(g, "embedding_length", s->n_embd) ||
	    u32(g, "feed_forward_length", s->n_ff) ||
	    u32(g, "attention.head_count", s->n_head) ||
	    per_layer(g, "attention.head_count_kv", GGUF_TYPE_INT32, gemma4_kv_at) ||
	    f32(g, "rope.freq_base", 1e6f) ||
	    f32(g, "rope.freq_base_swa", 1e4f) ||
	    f32(g, "attention.layer_norm_rms_epsilon", 1e-6f) ||
	    (s->n_exp > 0 && moe_kvs(g)) ||
	    u32(g, "attention.key_length", s->hd) ||
	    u32(g, "attention.value_length", s->hd) ||
	    f32(g, "final_logit_softcapping", 30.0f) ||
	    u32(g, "attention.sliding_window", s->swa) ||
	    u32(g, "attention.shared_kv_layers", 0) ||
	    u32(g, "embedding_length_per_layer_input", 0) ||
	    per_layer(g, "attention.sliding_window_pattern", GGUF_TYPE_BOOL, gemma4_swa_at) ||
	    u32(g, "attention.key_length_swa", s->hd_swa) ||
	    u32(g, "attention.value_length_swa", s->hd_swa) ||
	    u32(g, "rope.dimension_count", s->hd) ||
	    u32(g, "rope.dimension_count_swa", s->hd_swa) ? -1 : 0;
}

/*
 * gemma4-assistant: the plan's keys in its order (g4_kvs): per-layer K/V
 * heads (its target's, which the global layers' differ from), every
 * layer's K/V shared, no per-layer inputs, no soft-cap (a drafter's
 * logits have none), then its backbone width and its layers as nextn ones.
 */
static int
asst_kvs(struct gen *g)
{
	const struct shape *s = g->s;

	return u32(g, "block_count", g->nl) ||
	    u32(g, "context_length", 262144) ||
	    u32(g, "embedding_length", s->n_embd) ||
	    u32(g, "feed_forward_length", s->n_ff) ||
	    u32(g, "attention.head_count", s->n_head) ||
	    per_layer(g, "attention.head_count_kv", GGUF_TYPE_INT32, asst_kv_at) ||
	    f32(g, "rope.freq_base", 1e6f) ||
	    f32(g, "rope.freq_base_swa", 1e4f) ||
	    f32(g, "attention.layer_norm_rms_epsilon", 1e-6f) ||
	    u32(g, "attention.key_length", s->hd) ||
	    u32(g, "attention.value_length", s->hd) ||
	    u32(g, "attention.key_length_swa", s->hd_swa) ||
	    u32(g, "attention.value_length_swa", s->hd_swa) ||
	    u32(g, "rope.dimension_count", s->hd) ||
	    u32(g, "rope.dimension_count_swa", s->hd_swa) ||
	    u32(g, "attention.sliding_window", s->swa) ||
	    u32(g, "attention.shared_kv_layers", g->nl) ||
	    u32(g, "embedding_length_per_layer_input", 0) ||
	    per_layer(g, "attention.sliding_window_pattern", GGUF_TYPE_BOOL, mask_swa_at) ||
	    u32(g, "embedding_length_out", s->n_bb) ||
	    u32(g, "nextn_predict_layers", g->nl) ? -1 : 0;
}

/*
 * step35 (llama.cpp's keys: conversion/step.py): per-layer head counts
 * and window pattern; full layers rotate rope.dimension_count / 2 dims.
 * No NextN blocks, so nextn_predict_layers is left out.
 */
static int
step35_kvs(struct gen *g)
{
	const struct shape *s = g->s;

	return u32(g, "block_count", g->nl) ||
	    u32(g, "context_length", 262144) ||
	    u32(g, "embedding_length", s->n_embd) ||
	    u32(g, "feed_forward_length", s->n_ff) ||
	    per_layer(g, "attention.head_count", GGUF_TYPE_INT32, step35_head_at) ||
	    per_layer(g, "attention.head_count_kv", GGUF_TYPE_INT32, step35_kv_at) ||
	    f32(g, "rope.freq_base", 5e6f) ||
	    f32(g, "rope.freq_base_swa", 1e4f) ||
	    f32(g, "attention.layer_norm_rms_epsilon", 1e-5f) ||
	    moe_kvs(g) ||
	    u32(g, "attention.key_length", s->hd) ||
	    u32(g, "attention.value_length", s->hd) ||
	    u32(g, "rope.dimension_count", s->n_rot) ||
	    u32(g, "attention.sliding_window", s->swa) ||
	    per_layer(g, "attention.sliding_window_pattern", GGUF_TYPE_BOOL, step35_swa_at) ||
	    u32(g, "leading_dense_block_count", s->n_dense) ? -1 : 0;
}

/*
 * dflash (llama.cpp's keys: conversion/qwen.py DFlashModel), in its order:
 * non-causal, the taps as target_layers, the window and its per-layer
 * pattern, the degenerate sections of an M-RoPE target, the mask token.
 */
static int
dflash_kvs(struct gen *g)
{
	const struct shape *s = g->s;
	int32_t sec[4] = { s->hd / 2, 0, 0, 0 };

	return u32(g, "block_count", g->nl) ||
	    u32(g, "context_length", s->n_ctx) ||
	    u32(g, "embedding_length", s->n_embd) ||
	    u32(g, "feed_forward_length", s->n_ff) ||
	    u32(g, "attention.head_count", s->n_head) ||
	    u32(g, "attention.head_count_kv", s->n_kv) ||
	    gguf_writer_add_bool(g->w, key(g, "attention.causal"), 0) ||
	    f32(g, "rope.freq_base", 1e7f) ||
	    f32(g, "attention.layer_norm_rms_epsilon", 1e-6f) ||
	    u32(g, "attention.key_length", s->hd) ||
	    u32(g, "attention.value_length", s->hd) ||
	    u32(g, "block_size", s->block) ||
	    u32(g, "conv_kernel_size", s->conv_k) ||
	    u32(g, "conv_group_size", s->conv_g) ||
	    u32(g, "selector_rank", s->sel_rank) ||
	    u32(g, "selector_top_k", s->sel_topk) ||
	    gguf_writer_add_arr(g->w, key(g, "target_layers"), GGUF_TYPE_INT32, s->taps,
	    (uint64_t)s->n_tap) ||
	    u32(g, "attention.sliding_window", s->swa) ||
	    per_layer(g, "attention.sliding_window_pattern", GGUF_TYPE_BOOL, mask_swa_at) ||
	    (s->mrope && gguf_writer_add_arr(g->w, key(g, "rope.dimension_sections"),
	    GGUF_TYPE_INT32, sec, 4)) ||
	    gguf_writer_add_u32(g->w, "tokenizer.ggml.mask_token_id", (uint32_t)s->mask_id) ? -1 : 0;
}

/*
 * The tower's keys, those llama.cpp's converter writes (MmprojModel and
 * Gemma4VisionAudioModel): no clip.use_gelu, the image size a dummy 224,
 * mean 0 and std 1 (Gemma-4's processor does not normalize).
 */
static int
mmproj_kvs(struct gen *g)
{
	const struct mmproj *p = g->mp;
	static const float mean[3] = { 0, 0, 0 }, std[3] = { 1, 1, 1 };
	uint32_t ft = g->mt == QUANT_F32 ? 0 : g->mt == QUANT_F16 ? 1 : 32;	/* llama_ftype */
	struct gguf_writer *w = g->w;

	return gguf_writer_add_str(w, "general.architecture", "clip", 4) ||
	    gguf_writer_add_str(w, "general.type", "mmproj", 6) ||
	    gguf_writer_add_str(w, "general.name", "random", 6) ||
	    gguf_writer_add_u32(w, "general.file_type", ft) ||
	    gguf_writer_add_bool(w, "clip.has_vision_encoder", 1) ||
	    gguf_writer_add_u32(w, "clip.vision.projection_dim", (uint32_t)p->n_text) ||
	    gguf_writer_add_u32(w, "clip.vision.image_size", 224) ||
	    gguf_writer_add_u32(w, "clip.vision.patch_size", (uint32_t)p->patch) ||
	    gguf_writer_add_u32(w, "clip.vision.embedding_length", (uint32_t)p->n_embd) ||
	    gguf_writer_add_u32(w, "clip.vision.feed_forward_length", (uint32_t)p->n_ff) ||
	    gguf_writer_add_u32(w, "clip.vision.block_count", (uint32_t)g->nl) ||
	    gguf_writer_add_u32(w, "clip.vision.attention.head_count", (uint32_t)p->n_head) ||
	    gguf_writer_add_arr(w, "clip.vision.image_mean", GGUF_TYPE_FLOAT32, mean, 3) ||
	    gguf_writer_add_arr(w, "clip.vision.image_std", GGUF_TYPE_FLOAT32, std, 3) ||
	    gguf_writer_add_str(w, "clip.vision.projector_type", "gemma4v", 7) ||
	    gguf_writer_add_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f) ||
	    gguf_writer_add_u32(w, "general.quantization_version", 2) ? -1 : 0;
}

static int
kvs(struct gen *g)
{
	const char *a;

	if (g->mp != NULL)
		return mmproj_kvs(g);
	a = arch_name[g->s->arch];

	if (gguf_writer_add_str(g->w, "general.architecture", a, strlen(a)) ||
	    gguf_writer_add_str(g->w, "general.name", "random", 6) ||
	    (g->s->arch == GEMMA4 ? gemma4_kvs(g) : g->s->arch == STEP35 ? step35_kvs(g) :
	    g->s->arch == DFLASH ? dflash_kvs(g) : g->s->arch == GEMMA4A ? asst_kvs(g) :
	    qwen35_kvs(g)))
		return -1;
	return !g->no_vocab && vocab(g) ? -1 : 0;
}

static int
type_opt(int ch, const char *arg)
{
	int t = quant_from_name(arg);

	if (t < 0 || !quant_valid(t))
		die(2, "-%c '%s': not a type name", ch, arg);
	return t;
}

/* A trunk's -L and types: the shape's layers by default, the types' defaults. */
static void
trunk_opts(struct gen *g)
{
	if (g->mt < 0)
		g->mt = g->s->arch == DFLASH || g->s->arch == GEMMA4A ? QUANT_BF16 : QUANT_Q8_0;
	if (g->nl > g->s->n_layer)
		die(2, "-L %d: shape %s has %d layers", g->nl, g->s->name, g->s->n_layer);
	if (g->nl < 0)
		g->nl = g->s->n_layer;
	if (g->nl < min_layers[g->s->arch])
		die(2, "-L %d: a %s file needs -L %d or more (a full-attention layer%s)", g->nl,
		    arch_name[g->s->arch], min_layers[g->s->arch],
		    g->s->swa > 0 ? " and a sliding one" : "");
	if (g->et < 0)
		g->et = g->mt == QUANT_NVFP4 ? QUANT_Q5_K : g->mt;
	if (g->xt < 0)
		g->xt = g->mt;
}

/* A tower's -L (its first N blocks) and -t (F16, BF16 or F32; BF16 by
 * default, as the checkpoints hold it); -x, -e and -V are a trunk's. */
static void
mmproj_opts(struct gen *g)
{
	const struct mmproj *p = g->mp;

	if (g->xt >= 0 || g->et >= 0 || g->no_vocab)
		die(2, "-x, -e and -V are a trunk's: %s is a vision tower", p->name);
	if (g->mt < 0)
		g->mt = QUANT_BF16;
	if (!is_float(g->mt))
		die(2, "-t %s: a vision tower's weights are F16, BF16 or F32", quant_name(g->mt));
	if (g->nl > p->n_layer)
		die(2, "-L %d: shape %s has %d layers", g->nl, p->name, p->n_layer);
	if (g->nl < 0)
		g->nl = p->n_layer;
}

int
main(int argc, char *argv[])
{
	struct gen g = { .s = &shapes[0], .mt = -1, .xt = -1, .et = -1,
	    .rng = 0x9E3779B97F4A7C15ULL, .nl = -1 };
	struct util_ofile *of;
	char *end;
	long v;
	int ch;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "hnVp:t:x:e:L:")) != -1) {
		switch (ch) {
		case 'h':
			printf("%s\nshapes: %s, %s (the head of t/tools/gguf-random.c says what each "
			    "is)\n", USAGE, SHAPE_LIST, MMPROJ_LIST);
			return finish(0);
		case 'n': g.dry = 1; break;
		case 'V': g.no_vocab = 1; break;
		case 'p':
			g.s = NULL, g.mp = NULL;
			for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
				if (strcmp(optarg, shapes[i].name) == 0)
					g.s = &shapes[i];
			for (size_t i = 0; i < sizeof mmprojs / sizeof mmprojs[0]; i++)
				if (strcmp(optarg, mmprojs[i].name) == 0)
					g.mp = &mmprojs[i];
			if (g.s == NULL && g.mp == NULL)
				die(2, "-p '%s': not a shape (%s, %s)", optarg, SHAPE_LIST, MMPROJ_LIST);
			break;
		case 't': g.mt = type_opt(ch, optarg); break;
		case 'x': g.xt = type_opt(ch, optarg); break;
		case 'e': g.et = type_opt(ch, optarg); break;
		case 'L':
			v = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || v < 1 || v > 1000)
				die(2, "-L '%s': not a layer count", optarg);
			g.nl = (int)v;
			break;
		default: return 2;
		}
	}
	if (argc - optind != !g.dry)
		die(2, USAGE);
	if (g.mp != NULL)
		mmproj_opts(&g);
	else
		trunk_opts(&g);
	if (g.dry) {
		if (tensors(&g) != 0)
			die(1, "out of memory");
		printf("tensors %" PRId64 " params %" PRId64 " bytes %" PRIu64 "\n", g.n_tensors,
		    g.n_params, g.n_bytes);
		return finish(0);
	}
	if ((g.pool = malloc(POOL + 4096 * 256)) == NULL)
		die(1, "out of memory");
	for (size_t i = 0; i < POOL + 4096 * 256; i++)
		g.pool[i] = (uint8_t)(rnd(&g.rng) >> 56);
	if ((of = util_ofile_open(argv[optind], g.err)) == NULL)
		die(1, "%s", g.err);
	if ((g.w = gguf_writer_new(of->fp)) == NULL || kvs(&g) || tensors(&g) ||
	    gguf_writer_write_header(g.w) || (g.pass = 1, tensors(&g)) ||
	    gguf_writer_finish(g.w)) {
		warnmsg("%s: %s", argv[optind], g.w ? gguf_writer_errmsg(g.w) : "out of memory");
		util_ofile_abort(of);
		return finish(1);
	}
	gguf_writer_free(g.w);
	free(g.pool);
	if (util_ofile_commit(of, g.err) != 0)
		die(1, "%s", g.err);
	return finish(0);
}
