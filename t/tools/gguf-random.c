/*
 * gguf-random: a random-weight qwen35 GGUF with the tensor names, shapes
 * and types of a real model (speed of decode does not depend on the
 * values), for the GPU benchmarks.
 *   gguf-random [-V] [-p 9b|27b|tiny] [-t TYPE] [-e TYPE] OUT
 * -p: the shape: 9b = Qwen3.5-9B (32 layers of 4096, 8 of them full
 * attention, GDN 16 key / 32 value heads of 128, attention 16/4 heads of
 * 256, FFN 12288, vocab 248320, one MTP layer); 27b = Qwen3.8-27B as
 * its NVFP4 serving GGUF lays it out with -t NVFP4 (64 layers of 5120, 16
 * of them full attention, GDN 16 key / 48 value heads of 128, attention
 * 24/4 heads of 256, FFN 17408, the MTP block at blk.64); tiny = a small
 * one for tests.  -t: the matrices' type (Q8_0, NVFP4, ...; default Q8_0).  -e:
 * token_embd and output (default: Q5_K for NVFP4, else the -t type).
 * Norms, ssm_a, dt bias and conv1d are F32.  Weights are random bits
 * with block scales of a sane size, so activations stay finite for a
 * while; values are not meaningful.  The vocabulary is a stand-in that
 * llama.cpp loads (llama-bench on the same file); -V leaves it out (no
 * tokenizer.ggml.* metadata: a model for token-id prompts only, as
 * run-gen --jsonl {"prompt": [ids]} gives them).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "util.h"

struct shape {
	const char *name;
	int	n_embd, n_layer, n_ff, n_head, n_kv, hd, n_rot, nk, nv, dk, vocab;
};

static const struct shape shapes[] = {
	{ "9b", 4096, 32, 12288, 16, 4, 256, 64, 16, 32, 128, 248320 },
	{ "27b", 5120, 64, 17408, 24, 4, 256, 64, 16, 48, 128, 248320 },
	{ "tiny", 256, 4, 512, 4, 2, 64, 16, 2, 4, 64, 1000 },
};

struct gen {
	struct gguf_writer *w;
	const struct shape *s;
	int	mt, et;		/* matrix type, embedding/output type */
	uint64_t rng;
	int	pass;		/* 0: tensor infos, 1: data */
	int	no_vocab;	/* -V */
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
	case QUANT_Q8_0: case QUANT_Q4_0: case QUANT_Q5_0: return d0;
	case QUANT_Q4_1: case QUANT_Q5_1: case QUANT_Q4_K: case QUANT_Q5_K: return d01;
	case QUANT_Q6_K: return q6k;
	default: return none;
	}
}

/* One tensor: its info in pass 0, its bytes in pass 1. */
static int
tensor(struct gen *g, const char *name, int type, int64_t ne0, int64_t ne1, float val)
{
	int64_t ne[2] = { ne0, ne1 };
	size_t rb = quant_row_size(type, ne0), n = rb * (size_t)ne1, done = 0;
	const struct quant_traits *tr = quant_traits(type);

	if (g->pass == 0)
		return gguf_writer_add_tensor(g->w, name, type, ne1 > 1 ? 2 : 1, ne);
	if (type == QUANT_F32) {
		float *f = malloc(n);
		if (f == NULL)
			return -1;
		for (int64_t i = 0; i < ne0 * ne1; i++)	/* val, or small noise when val == 0 */
			f[i] = val != 0 ? val : (float)((int64_t)(rnd(&g->rng) >> 40) - (1 << 23)) /
			    (float)(1 << 23) * 0.1f;
		int rc = gguf_writer_write(g->w, f, n);
		free(f);
		return rc;
	}
	uint16_t h = quant_f32_to_f16(1.0f / (16.0f * sqrtf((float)ne0)));
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
		}
		if (gguf_writer_write(g->w, p, c) != 0)
			return -1;
		done += c;
	}
	return 0;
}

#define T(name, ...) do { if (tensor(g, name, __VA_ARGS__)) return -1; } while (0)

static int
layer(struct gen *g, int il, int full, int mtp)
{
	const struct shape *s = g->s;
	int e = s->n_embd, mt = g->mt, vd = s->nv * s->dk, cd = 2 * s->nk * s->dk + vd;
	char n[128];

#define NM(x) (snprintf(n, sizeof n, "blk.%d.%s", il, x), n)
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
		T(NM("ssm_norm.weight"), QUANT_F32, s->dk, 1, 1.0f);
		T(NM("ssm_out.weight"), mt, vd, e, 0);
	}
	T(NM("post_attention_norm.weight"), QUANT_F32, e, 1, 1.0f);
	T(NM("ffn_gate.weight"), mt, e, s->n_ff, 0);
	T(NM("ffn_up.weight"), mt, e, s->n_ff, 0);
	T(NM("ffn_down.weight"), mt, s->n_ff, e, 0);
	if (mtp) {
		T(NM("nextn.eh_proj.weight"), mt, 2 * e, e, 0);
		T(NM("nextn.enorm.weight"), QUANT_F32, e, 1, 1.0f);
		T(NM("nextn.hnorm.weight"), QUANT_F32, e, 1, 1.0f);
		T(NM("nextn.shared_head_norm.weight"), QUANT_F32, e, 1, 1.0f);
	}
#undef NM
	return 0;
}

static int
tensors(struct gen *g)
{
	const struct shape *s = g->s;

	T("token_embd.weight", g->et, s->n_embd, s->vocab, 0);
	for (int il = 0; il <= s->n_layer; il++)	/* the last one: MTP */
		if (layer(g, il, il == s->n_layer || (il + 1) % 4 == 0, il == s->n_layer))
			return -1;
	T("output_norm.weight", QUANT_F32, s->n_embd, 1, 1.0f);
	T("output.weight", g->et, s->n_embd, s->vocab, 0);
	return 0;
}

/*
 * A byte-level BPE vocabulary llama.cpp loads (gpt2 model, qwen35 split):
 * the 256 byte tokens of GPT-2's byte mapping, then "<r N>" fillers up to
 * the vocabulary size, no merges.  Only the ids matter to a benchmark.
 */
static int
vocab(struct gen *g)
{
	int n = g->s->vocab, rc = -1;
	char **tok = calloc(n, sizeof *tok);
	int32_t *type = malloc(n * sizeof *type), eos = n - 1;

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
	if (tok != NULL && type != NULL)
		rc = gguf_writer_add_str(g->w, "tokenizer.ggml.model", "gpt2", 4) ||
		    gguf_writer_add_str(g->w, "tokenizer.ggml.pre", "qwen35", 6) ||
		    gguf_writer_add_arr_str(g->w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, n) ||
		    gguf_writer_add_arr(g->w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, n) ||
		    gguf_writer_add_arr_str(g->w, "tokenizer.ggml.merges", NULL, NULL, 0) ||
		    gguf_writer_add_u32(g->w, "tokenizer.ggml.eos_token_id", (uint32_t)eos) ? -1 : 0;
out:
	for (int i = 0; tok != NULL && i < n; i++)
		free(tok[i]);
	free(tok), free(type);
	return rc;
}

static int
kvs(struct gen *g)
{
	const struct shape *s = g->s;
	struct gguf_writer *w = g->w;
	int32_t sec[4] = { 11, 11, 10, 0 };
	const char *a = "qwen35";

	return gguf_writer_add_str(w, "general.architecture", a, strlen(a)) ||
	    gguf_writer_add_str(w, "general.name", "random", 6) ||
	    gguf_writer_add_u32(w, "qwen35.block_count", s->n_layer + 1) ||
	    gguf_writer_add_u32(w, "qwen35.context_length", 262144) ||
	    gguf_writer_add_u32(w, "qwen35.embedding_length", s->n_embd) ||
	    gguf_writer_add_u32(w, "qwen35.feed_forward_length", s->n_ff) ||
	    gguf_writer_add_u32(w, "qwen35.attention.head_count", s->n_head) ||
	    gguf_writer_add_u32(w, "qwen35.attention.head_count_kv", s->n_kv) ||
	    gguf_writer_add_f32(w, "qwen35.rope.freq_base", 1e7f) ||
	    gguf_writer_add_f32(w, "qwen35.attention.layer_norm_rms_epsilon", 1e-6f) ||
	    gguf_writer_add_u32(w, "qwen35.attention.key_length", s->hd) ||
	    gguf_writer_add_u32(w, "qwen35.attention.value_length", s->hd) ||
	    gguf_writer_add_u32(w, "qwen35.rope.dimension_count", s->n_rot) ||
	    gguf_writer_add_arr(w, "qwen35.rope.dimension_sections", GGUF_TYPE_INT32, sec, 4) ||
	    gguf_writer_add_u32(w, "qwen35.ssm.conv_kernel", 4) ||
	    gguf_writer_add_u32(w, "qwen35.ssm.state_size", s->dk) ||
	    gguf_writer_add_u32(w, "qwen35.ssm.group_count", s->nk) ||
	    gguf_writer_add_u32(w, "qwen35.ssm.time_step_rank", s->nv) ||
	    gguf_writer_add_u32(w, "qwen35.ssm.inner_size", s->nv * s->dk) ||
	    gguf_writer_add_u32(w, "qwen35.full_attention_interval", 4) ||
	    gguf_writer_add_u32(w, "qwen35.nextn_predict_layers", 1) ||
	    (!g->no_vocab && vocab(g)) ? -1 : 0;
}

int
main(int argc, char *argv[])
{
	struct gen g = { .s = &shapes[0], .mt = QUANT_Q8_0, .et = -1, .rng = 0x9E3779B97F4A7C15ULL };
	struct util_ofile *of;
	int ch;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "Vp:t:e:")) != -1) {
		switch (ch) {
		case 'V': g.no_vocab = 1; break;
		case 'p':
			g.s = NULL;
			for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
				if (strcmp(optarg, shapes[i].name) == 0)
					g.s = &shapes[i];
			if (g.s == NULL)
				die(2, "-p '%s': not a shape (9b, 27b, tiny)", optarg);
			break;
		case 't':
		case 'e': {
			int t = quant_from_name(optarg);
			if (t < 0 || !quant_valid(t))
				die(2, "-%c '%s': not a type name", ch, optarg);
			*(ch == 't' ? &g.mt : &g.et) = t;
			break;
		}
		default: return 2;
		}
	}
	if (argc - optind != 1)
		die(2, "usage: gguf-random [-V] [-p 9b|27b|tiny] [-t TYPE] [-e TYPE] OUT");
	if (g.et < 0)
		g.et = g.mt == QUANT_NVFP4 ? QUANT_Q5_K : g.mt;
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
