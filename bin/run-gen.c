/*
 * run-gen: generate text with a model, after checking that the whole-prompt
 * forward and a token-by-token decode of the prompt agree (the argmax gate).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "chat.h"
#include "genopt.h"
#include "grammar.h"
#include "json.h"
#include "model.h"
#include "prompt.h"
#include "quant.h"
#include "ranks.h"
#include "sample.h"
#include "state.h"
#include "tokenizer.h"
#include "util.h"
#include "vision.h"

#define MAX_IMAGES 16

struct opts {
	struct genopt go;	/* what run-spec takes too */
	int	ids;
	int	text_tool;	/* 'k' --tokenize, 'd' --detokenize, 'p' --template; 0: generate */
	int	special;	/* --tokenize --special: control tokens in the text are tokens */
	int	json;		/* --json: the reply is a JSON object */
	const char *schema;	/* --json-schema FILE: ... valid under this schema */
	const char *image[MAX_IMAGES];	/* --image FILE, in order */
	int	n_image;
	const char *mmproj;	/* --mmproj FILE (else MEMRA_GEMMA_MMPROJ, else the model) */
	int	image_tokens;	/* --image-tokens N: an image's budget (0: the tower's) */
};

struct gen {
	struct backend *be;
	struct model *m;
	struct prompt *pr;
	const struct opts *o;
	int	nv;
	float	*lg;		/* [nv] logits, backend_host_alloc'd */
	struct grammar_vocab *gv;	/* --json, --json-schema: the vocabulary's trie */
	struct grammar *gr;	/* and the grammar replies keep to; NULL without */
	struct vision *vis;	/* --image: the tower */
	struct vision_tokens vt;
	struct vision_image img[MAX_IMAGES];
	struct vision_prompt vp;	/* the prompt's images (n_rows 0: none) */
};

struct req {		/* one request's settings: the command line's, then its JSON's */
	struct sample_params sp;
	int	n;		/* new tokens at most */
	int	ignore_eos;	/* stop tokens do not end it */
};

struct result {
	int32_t	*ids;		/* [n_gen] */
	int	n_gen, n_prompt;
	double	prefill_s, decode_s, ttft_s;
	int	n_img;		/* images in the prompt */
	double	vision_s;	/* their encoding by the tower, counted in ttft_s */
	const char *gate;
	int	complete;	/* with a grammar: the document ended whole; -1 without */
	char	*text;		/* --jsonl: the text (NULL: no tokenizer) */
	size_t	text_len;
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [--chat | --raw] [--ids] [--jsonl] [-n N] [--ignore-eos] [--temp T]\n"
	    "       [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S] [--ctx N]\n"
	    "       [-t N] [--device cpu|cuda[:N]] [--kv-type f32|f16] [--json | --json-schema FILE]\n"
	    "       [--pp-stages N [--pp-devices LIST] [--pp-splits LIST]]\n"
	    "       [--image FILE ... [--mmproj FILE] [--image-tokens N]] [-f FILE] model [prompt]\n"
	    "       %s --tokenize [--special] | --detokenize | --template [-f FILE] model [input]\n",
	    prog, prog);
	if (fp == stdout)
		fputs("  --chat               apply the model's chat template (default when it has one)\n"
		    "  --raw                send the text as is\n"
		    "  -n N                 new tokens at most (128)\n"
		    "  --ignore-eos         stop tokens do not end generation (N tokens)\n"
		    "  --temp T             sampling temperature; 0 is greedy (the default)\n"
		    "  --top-k K, --top-p P, --min-p P, --repeat-penalty R, --seed S\n"
		    "  --ctx N              context positions (default: prompt + N)\n"
		    "  -t N                 CPU threads (default: all cores)\n"
		    "  --device D           cpu, cuda or cuda:N (default: MEMRA_DEVICE, else cuda\n                       when a GPU is present, else cpu)\n"
		    "  --kv-type T          KV cache precision: f32 (default) or f16, llama.cpp's\n                       default cache (default: MEMRA_KV_TYPE, else f32)\n"
		    "  --pp-stages N        pipeline stages, a device each (default: MEMRA_PP_STAGES, 1)\n"
		    "  --pp-devices LIST    the stages' devices: 0,1 or cpu,cpu (MEMRA_PP_DEVICES)\n"
		    "  --pp-splits LIST     first layers of stages 1.. (default: by bytes; MEMRA_PP_SPLITS)\n"
		    "  --json               the reply is a JSON object (constrained decoding)\n"
		    "  --json-schema FILE   the reply is a JSON document valid under the JSON Schema\n"
		    "                       in FILE (OpenAI strict mode's subset; others refused)\n"
		    "  --image FILE         a PNG or JPEG image in the prompt (repeatable, in order):\n"
		    "                       chat prompts get the images before the text, raw ones\n"
		    "                       and --jsonl ones need a <|image|> (text or id) for each\n"
		    "  --mmproj FILE        the vision tower: an mmproj GGUF or HF checkpoint\n"
		    "                       (default: MEMRA_GEMMA_MMPROJ, else the model's own)\n"
		    "  --image-tokens N     soft tokens an image may take: 70, 140, 280, 560 or 1120\n"
		    "                       (default: the checkpoint's image processor's, else 280)\n"
		    "  --ids                print the generated token ids instead of text\n"
		    "  --jsonl              JSON requests on stdin, one JSON result per line;\n"
		    "                       {\"prompt\": \"text\"} or {\"prompt\": [token ids]}\n"
		    "  -f FILE              read the prompt from FILE ('-' is stdin)\n"
		    "  --tokenize           print the input text's token ids, one a line\n"
		    "  --special            --tokenize: special tokens in the text are tokens\n"
		    "  --detokenize         print the text of the input's token ids\n"
		    "  --template           print the chat template rendered with the input\n"
		    "                       JSON object {\"messages\": [...], ...}\n"
		    "  -h, --help           this text\n", fp);
	return status;
}

static int
argmax(const float *x, int n)
{
	int b = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

/*
 * The argmax gate: the prompt token by token in a second state, its last
 * logits against the prefill's lp.  Returns the verdict.
 */
static const char *
gate(struct gen *g, const int32_t *ids, int n, const float *lp, char *err)
{
	struct state *st = model_state_new(g->m, n, 0, err);
	float *ld = malloc(g->nv * sizeof *ld), maxd = 0;
	const char *v = NULL;
	int ap, ad;

	if (st == NULL || ld == NULL) {
		if (st != NULL)
			util_err(err, "out of memory");
		goto out;
	}
	for (int i = 0, k; i < n; i += k) {
		struct model_embd e;

		k = vision_prompt_cut(&g->vp, i, 1);	/* an image in one forward */
		vision_prompt_rows(&g->vp, i, k, &e);
		if ((e.n > 0 && model_inject(g->m, &e) != 0) ||
		    model_forward(g->m, st, ids + i, k, 0, ld, NULL) != 0) {
			util_err(err, "%s", model_errmsg(g->m));
			goto out;
		}
	}
	for (int i = 0; i < g->nv; i++)
		if (fabsf(lp[i] - ld[i]) > maxd || isnan(lp[i] - ld[i]))
			maxd = isnan(lp[i] - ld[i]) ? INFINITY : fabsf(lp[i] - ld[i]);
	ap = argmax(lp, g->nv), ad = argmax(ld, g->nv);
	v = ap == ad ? "MATCH" : lp[ap] - lp[ad] <= 2 * maxd ? "NEAR-TIE" : "MISMATCH";
	fprintf(stderr, "prefill argmax=%d decode argmax=%d maxdiff=%.3g %s\n", ap, ad, maxd, v);
out:
	state_free(st);
	free(ld);
	return v;
}

static int
is_stop(const int32_t *stop, int n_stop, int32_t t)
{
	for (int i = 0; i < n_stop; i++)
		if (stop[i] == t)
			return 1;
	return 0;
}

/* Sample and feed tokens after the prefill's logits lg; text to out (none
 * when the model has no tokenizer). */
static int
decode(struct gen *g, struct state *st, struct sampler *smp, int32_t *hist, int n,
    const struct req *q, float *lg, FILE *out, struct result *r, char *err)
{
	int n_stop, ctx = state_config(st)->n_ctx, n_new = q->n;
	const int32_t *stop = prompt_stop_ids(g->pr, &n_stop);
	const struct tokenizer *tok = prompt_tokenizer(g->pr);
	struct tokenizer_stream *ts = tok != NULL ? tokenizer_stream_new(tok, 0) : NULL;
	double t0 = util_now();
	const char *s;
	size_t len;
	int rc = 0;
	int32_t t = -1;	/* the first from the prefill's logits, then model_forward_next's */

	if (tok != NULL && ts == NULL)
		return util_err(err, "out of memory");
	if (ts == NULL)
		out = NULL;
	while (r->n_gen < n_new) {
		if (r->n_gen == 0 && (t = sample_next(smp, lg, hist, n, 0, n)) < 0) {
			rc = util_err(err, "position %d: no finite logit", n);
			break;
		}
		if (r->n_gen == 0)
			r->ttft_s = r->prefill_s + util_now() - t0;
		if (!q->ignore_eos && is_stop(stop, n_stop, t))
			break;
		hist[n + r->n_gen] = r->ids[r->n_gen] = t;
		r->n_gen++;
		if (out != NULL && (s = tokenizer_stream_push(ts, t, &len)) != NULL && len > 0) {
			fwrite(s, 1, len, out);
			if (!g->o->go.jsonl)
				fflush(out);
		}
		if (r->n_gen == n_new || n + r->n_gen >= ctx)
			break;
		int32_t nt;
		if (model_forward_next(g->m, st, &t, 1, 0, smp, hist, n + r->n_gen, 0, n + r->n_gen,
		    lg, &nt) != 0) {
			rc = util_err(err, "%s", model_errmsg(g->m));
			break;
		}
		t = nt;
	}
	if (out != NULL && (s = tokenizer_stream_flush(ts, &len)) != NULL && len > 0)
		fwrite(s, 1, len, out);
	tokenizer_stream_free(ts);
	r->decode_s = util_now() - t0;
	return rc;
}

/* One token of a masked decode: the mask on lg, then the sampler's pick
 * (-1 with err when the grammar allows none). */
static int32_t
pick_masked(struct gen *g, struct grammar_state *gs, struct sampler *smp, const int32_t *hist,
    int at, int left, float *lg, char *err)
{
	int32_t t;

	if (grammar_mask_logits(gs, lg, g->nv, left) < 0) {
		util_err(err, "out of memory");
		return -1;
	}
	if ((t = sample_next(smp, lg, hist, at, 0, at)) < 0)
		util_err(err, "position %d: no token the grammar allows", at);
	else if (!grammar_finished(gs) && grammar_accept(gs, t) != 0)
		t = util_err(err, "position %d: token %d outside the grammar", at, t);
	return t;
}

/* decode with the grammar's mask on each row of logits (on the host,
 * before sampling: greedy is the argmax of the masked row); near the end
 * of the budget the mask closes the document (grammar_mask's left). */
static int
decode_masked(struct gen *g, struct state *st, struct sampler *smp, int32_t *hist, int n,
    const struct req *q, float *lg, FILE *out, struct result *r, char *err)
{
	int n_stop, ctx = state_config(st)->n_ctx, rc = -1;
	const int32_t *stop = prompt_stop_ids(g->pr, &n_stop);
	struct tokenizer_stream *ts = tokenizer_stream_new(prompt_tokenizer(g->pr), 0);
	struct grammar_state *gs = grammar_state_new(g->gr);
	double t0 = util_now();
	const char *s;
	size_t len;
	int32_t t;

	if (ts == NULL || gs == NULL) {
		util_err(err, "out of memory");
		goto out;
	}
	for (;;) {
		int at = n + r->n_gen, left = q->n - r->n_gen < ctx - at ? q->n - r->n_gen : ctx - at;
		if (r->n_gen > 0 && model_forward(g->m, st, &t, 1, 0, lg, NULL) != 0) {
			util_err(err, "%s", model_errmsg(g->m));
			goto out;
		}
		if ((t = pick_masked(g, gs, smp, hist, at, left, lg, err)) < 0)
			goto out;
		if (r->n_gen == 0)
			r->ttft_s = r->prefill_s + util_now() - t0;
		if (is_stop(stop, n_stop, t))
			break;
		hist[at] = r->ids[r->n_gen++] = t;
		if (out != NULL && (s = tokenizer_stream_push(ts, t, &len)) != NULL && len > 0) {
			fwrite(s, 1, len, out);
			if (!g->o->go.jsonl)
				fflush(out);
		}
		if (r->n_gen == q->n || at + 1 >= ctx)
			break;
	}
	rc = 0;
out:
	if (out != NULL && ts != NULL && (s = tokenizer_stream_flush(ts, &len)) != NULL && len > 0)
		fwrite(s, 1, len, out);
	r->complete = gs != NULL && (grammar_finished(gs) || grammar_done(gs));
	tokenizer_stream_free(ts);
	grammar_state_free(gs);
	r->decode_s = util_now() - t0;
	return rc;
}

/* One request: the prompt's n ids to r (text streamed to out when not NULL). */
static int
generate(struct gen *g, const int32_t *ids, size_t n, const struct req *q, FILE *out,
    struct result *r, char *err)
{
	int32_t *hist = NULL;
	int ctx, rc = -1, n_new = q->n;
	struct state *st = NULL;
	struct sampler *smp = NULL;
	float *lg = g->lg;
	double t0;

	r->n_prompt = n;
	if (n == 0) {
		util_err(err, "the prompt has no tokens");
		goto out;
	}
	ctx = g->o->go.ctx ? g->o->go.ctx : (int)n + n_new;
	if ((int)n >= ctx) {
		util_err(err, "prompt of %zu tokens: does not fit in a context of %d", n, ctx);
		goto out;
	}
	if ((st = model_state_new(g->m, ctx, 0, err)) == NULL ||
	    (smp = sample_new(&q->sp, g->nv, err)) == NULL ||
	    (hist = malloc((size_t)(ctx + 1) * sizeof *hist)) == NULL ||
	    (r->ids = malloc((size_t)(n_new + 1) * sizeof *r->ids)) == NULL)
		goto out;
	memcpy(hist, ids, n * sizeof *ids);
	t0 = util_now();
	struct model_embd e;
	vision_prompt_rows(&g->vp, 0, (int)n, &e);
	if ((e.n > 0 && model_inject(g->m, &e) != 0) ||
	    model_forward(g->m, st, ids, n, MODEL_PREFILL, lg, NULL) != 0) {
		util_err(err, "%s", model_errmsg(g->m));
		goto out;
	}
	r->prefill_s = util_now() - t0;
	if ((r->gate = gate(g, ids, n, lg, err)) == NULL)
		goto out;
	if (strcmp(r->gate, "MISMATCH") == 0) {
		util_err(err, "argmax gate: MISMATCH");
		goto out;
	}
	rc = g->gr != NULL ? decode_masked(g, st, smp, hist, n, q, lg, out, r, err) :
	    decode(g, st, smp, hist, n, q, lg, out, r, err);
	r->ttft_s += r->vision_s;	/* the prompt's images went through the tower first */
out:
	if (rc != 0 && err[0] == '\0')
		util_err(err, "out of memory");
	state_free(st);
	sample_free(smp);
	free(hist);
	return rc;
}

static void
stats(const struct result *r)
{
	fprintf(stderr, "prompt tokens=%d prefill %.1f tok/s, decode %.1f tok/s (%d tokens), "
	    "time to first token %.3f s", r->n_prompt,
	    r->prefill_s > 0 ? r->n_prompt / r->prefill_s : 0.0,
	    r->decode_s > 0 ? r->n_gen / r->decode_s : 0.0, r->n_gen, r->ttft_s);
	if (r->n_img > 0)
		fprintf(stderr, " (%.3f s of it the vision tower, %d image%s)", r->vision_s,
		    r->n_img, r->n_img > 1 ? "s" : "");
	fputc('\n', stderr);
}

static void
print_ids(FILE *fp, const struct result *r, const char *sep)
{
	for (int i = 0; i < r->n_gen; i++)
		fprintf(fp, "%s%d", i ? sep : "", r->ids[i]);
}

/* ids[n] with each image marker expanded and the images encoded into g->vp
 * (the previous prompt's freed), the encoding's time into r; malloc'd
 * [*n_out], or NULL with err. */
static int32_t *
with_images(struct gen *g, const int32_t *ids, size_t n, size_t *n_out, struct result *r,
    char *err)
{
	double t0 = util_now();
	int32_t *out;

	vision_prompt_free(&g->vp);
	if (vision_prompt_build(g->vis, &g->vt, ids, n, g->img, g->o->n_image, &out, n_out,
	    &g->vp, err) != 0)
		return NULL;
	r->n_img = g->o->n_image, r->vision_s = util_now() - t0;
	return out;
}

/*
 * The ids of text with the images: a chat prompt's user message holds the
 * images (a {"type": "image"} part each, as transformers' processors take
 * them) and then the text; a raw text carries a <|image|> for each.  Each
 * marker expanded and the images encoded into g->vp.
 */
static int32_t *
image_prompt(struct gen *g, const char *text, size_t len, size_t *n, struct result *r,
    char *err)
{
	char *buf = NULL;
	size_t blen = 0, nm;
	FILE *fp;
	struct json *ctx = NULL;
	int32_t *mk = NULL, *ids = NULL;

	if (!prompt_is_chat(g->pr))
		mk = prompt_encode(g->pr, text, len, &nm, err);
	else if ((fp = open_memstream(&buf, &blen)) != NULL) {
		fputs("{\"messages\": [{\"role\": \"user\", \"content\": [", fp);
		for (int i = 0; i < g->o->n_image; i++)
			fputs("{\"type\": \"image\"}, ", fp);
		fputs("{\"type\": \"text\", \"text\": ", fp);
		json_put_str(fp, text, len, 0);
		fputs("}]}]}", fp);
		if (fclose(fp) == 0 && (ctx = json_parse(buf, blen, err)) != NULL)
			mk = prompt_encode_chat(g->pr, ctx, NULL, &nm, err);
	}
	if (mk != NULL)
		ids = with_images(g, mk, nm, n, r, err);
	if (mk == NULL && err[0] == '\0')
		util_err(err, "out of memory");
	json_free(ctx);
	free(buf), free(mk);
	return ids;
}

static int
one(struct gen *g, const char *text, size_t len)
{
	struct req q = { g->o->go.sp, g->o->go.n, g->o->go.ignore_eos };
	struct result r = { 0 };
	char err[UTIL_ERRLEN] = "";
	size_t n;
	int32_t *ids = g->vis != NULL ? image_prompt(g, text, len, &n, &r, err) :
	    prompt_encode(g->pr, text, len, &n, err);
	int rc = ids == NULL ? -1 : generate(g, ids, n, &q, g->o->ids ? NULL : stdout, &r, err);

	if (rc == 0) {
		if (g->o->ids)
			print_ids(stdout, &r, " ");
		putchar('\n');
		fflush(stdout);		/* the text's line ends before the stats line */
		stats(&r);
		if (g->gr != NULL && !r.complete)
			warnmsg("the reply stopped at %d tokens: the JSON document is not complete",
			    r.n_gen);
	} else
		warnmsg("%s", err);
	free(r.ids), free(ids);
	return rc == 0 ? 0 : 1;
}

/* A request's prompt: a string the prompt maker encodes, or token ids as
 * they are; malloc'd [*n], or NULL with err. */
static int32_t *
request_prompt(const struct gen *g, const struct json *q, size_t *n, char *err)
{
	const struct json *p = json_get(q, "prompt");

	if (p != NULL && p->type == JSON_ARRAY)
		return prompt_ids_json(p, g->nv, n, err);
	if (p == NULL || p->type != JSON_STRING) {
		util_err(err, "request has no \"prompt\" string or array of token ids");
		return NULL;
	}
	return prompt_encode(g->pr, p->str, p->n, n, err);
}

/* A request's fields over the command line's. */
static int
request_params(const struct json *j, const struct opts *o, struct req *q, char *err)
{
	struct sample_params *sp = &q->sp;
	double v;
	int64_t i;

	*sp = o->go.sp;
	q->n = o->go.n;
	q->ignore_eos = o->go.ignore_eos;
	if (j->type != JSON_OBJECT)
		return util_err(err, "request is not a JSON object");
	if (json_get_i64(j, "n", &i) == 0) {
		if (i < 1 || i > 1000000)
			return util_err(err, "\"n\" %lld: out of range 1..1000000", (long long)i);
		q->n = i;
	}
	if (json_get(j, "ignore_eos") != NULL &&
	    json_get_bool(j, "ignore_eos", &q->ignore_eos) != 0)
		return util_err(err, "\"ignore_eos\": not true or false");
	if (json_get_num(j, "temp", &v) == 0 || json_get_num(j, "temperature", &v) == 0)
		sp->temp = v;
	if (json_get_i64(j, "top_k", &i) == 0)
		sp->top_k = i;
	if (json_get_num(j, "top_p", &v) == 0)
		sp->top_p = v;
	if (json_get_num(j, "min_p", &v) == 0)
		sp->min_p = v;
	if (json_get_num(j, "repeat_penalty", &v) == 0)
		sp->repeat_penalty = v;
	if (json_get_i64(j, "seed", &i) == 0)
		sp->seed = i;
	return 0;
}

/* The result line: "text" only where the model has a tokenizer */
static void
put_result(FILE *fp, const struct result *r)
{
	fputc('{', fp);
	if (r->text != NULL) {
		fputs("\"text\": ", fp);
		json_put_str(fp, r->text, r->text_len, 0);
		fputs(", ", fp);
	}
	fputs("\"ids\": [", fp);
	print_ids(fp, r, ", ");
	if (r->complete >= 0)
		fprintf(fp, "], \"complete\": %s", r->complete ? "true" : "false");
	else
		fputc(']', fp);
	fprintf(fp, ", \"prompt_tokens\": %d, \"gate\": \"%s\", \"prefill_s\": %.6f, "
	    "\"decode_s\": %.6f, \"ttft_s\": %.6f", r->n_prompt, r->gate, r->prefill_s,
	    r->decode_s, r->ttft_s);
	if (r->n_img > 0)
		fprintf(fp, ", \"vision_s\": %.6f", r->vision_s);
	fputs("}\n", fp);
}

/* One request line of len bytes to r; 0, or -1 with err. */
static int
request(struct gen *g, const char *line, size_t len, struct result *r, char *err)
{
	struct json *j = json_parse(line, len, err);
	int32_t *ids = NULL;
	FILE *mem = NULL;
	struct req q;
	size_t n;
	int rc = -1;

	if (j == NULL || request_params(j, g->o, &q, err) != 0 ||
	    (ids = request_prompt(g, j, &n, err)) == NULL)
		goto out;
	if (g->vis != NULL) {	/* the request's prompt holds a marker for each --image */
		int32_t *ex = with_images(g, ids, n, &n, r, err);
		free(ids);
		if ((ids = ex) == NULL)
			goto out;
	}
	if (prompt_tokenizer(g->pr) != NULL &&
	    (mem = open_memstream(&r->text, &r->text_len)) == NULL) {
		util_err(err, "out of memory");
		goto out;
	}
	rc = generate(g, ids, n, &q, mem, r, err);
	if (mem != NULL && fclose(mem) != 0 && rc == 0)
		rc = util_err(err, "out of memory");
out:
	json_free(j);
	free(ids);
	return rc;
}

/* One JSON result per request line; a bad request fails its line only. */
static int
jsonl(struct gen *g)
{
	char *line = NULL, err[UTIL_ERRLEN];
	size_t cap = 0;
	ssize_t len;
	int status = 0, lineno = 0;

	while ((len = getline(&line, &cap, stdin)) > 0) {
		struct result r = { .complete = g->gr != NULL ? 0 : -1 };

		lineno++;
		if (strspn(line, " \t\r\n") == (size_t)len)
			continue;
		err[0] = '\0';
		if (request(g, line, len, &r, err) == 0) {
			put_result(stdout, &r);
			fflush(stdout);
			stats(&r);
		} else {
			warnmsg("stdin: line %d: %s", lineno, err[0] ? err : "out of memory");
			status = 1;
		}
		free(r.ids), free(r.text);
	}
	free(line);
	return status;
}

/* --- the text tools: the tokenizer and the chat template, no weights --- */

/* --tokenize: ids one a line */
static int
tokenize(const struct tokenizer *tok, const struct opts *o, const char *text, size_t len,
    char *err)
{
	size_t n;
	int32_t *ids = tokenizer_encode(tok, text, len, o->special ? TOKENIZER_PARSE_SPECIAL : 0,
	    &n, err);

	if (ids == NULL)
		return -1;
	for (size_t i = 0; i < n; i++)
		printf("%d\n", ids[i]);
	free(ids);
	return 0;
}

/* --detokenize: whitespace-separated ids to their text, as it is */
static int
detokenize(const struct tokenizer *tok, char *text, char *err)
{
	size_t n = 0, cap = 0, len;
	int32_t *ids = NULL;
	char *tok_s, *save = NULL, *out;
	int64_t v;
	int rc = -1;

	for (tok_s = strtok_r(text, " \t\r\n", &save); tok_s != NULL;
	    tok_s = strtok_r(NULL, " \t\r\n", &save)) {
		if (util_parse_i64(tok_s, 0, INT32_MAX, &v) != 0) {
			util_err(err, "'%.40s': not a token id", tok_s);
			goto out;
		}
		if (n == cap) {
			int32_t *p = realloc(ids, (cap = cap ? 2 * cap : 256) * sizeof *ids);
			if (p == NULL) {
				util_err(err, "out of memory");
				goto out;
			}
			ids = p;
		}
		ids[n++] = (int32_t)v;
	}
	if ((out = tokenizer_decode(tok, ids, n, 0, &len, err)) == NULL)
		goto out;
	fwrite(out, 1, len, stdout);
	free(out);
	rc = 0;
out:
	free(ids);
	return rc;
}

/* ctx with bos_token and eos_token from tok where it lacks them, as
 * transformers passes the special tokens; the JSON text, malloc'd */
static char *
with_special_tokens(const struct json *ctx, const struct tokenizer *tok, size_t *len)
{
	static const char *const key[] = { "bos_token", "eos_token" };
	char *buf = NULL, *body = NULL;
	size_t blen = 0, bodylen = 0;
	FILE *fp = open_memstream(&body, &bodylen);

	if (fp == NULL)
		return NULL;
	json_dump(fp, ctx, 1);
	if (fclose(fp) != 0 || (fp = open_memstream(&buf, &blen)) == NULL) {
		free(body);
		return NULL;
	}
	fputc('{', fp);
	for (int k = 0; k < 2; k++) {
		int32_t id = k == 0 ? tokenizer_bos(tok) : tokenizer_eos(tok);
		const char *s = id >= 0 ? tokenizer_token(tok, id) : NULL;

		if (s == NULL || json_get(ctx, key[k]) != NULL)
			continue;
		fprintf(fp, "\"%s\": ", key[k]);
		json_put_str(fp, s, strlen(s), 0);
		fputs(", ", fp);
	}
	fputs(ctx->n ? body + 1 : "}", fp);
	free(body);
	if (fclose(fp) != 0) {
		free(buf);
		return NULL;
	}
	*len = blen;
	return buf;
}

/* --template: the chat template rendered with the JSON object read */
static int
render_template(struct model *md, const struct tokenizer *tok, const char *text, size_t len,
    char *err)
{
	struct json *in = json_parse(text, len, err), *ctx = NULL;
	struct chat_opts co = { .add_generation_prompt = -1 };
	char *tmpl = NULL, *s = NULL, *out = NULL;
	struct chat *c = NULL;
	size_t n;
	int rc = -1;

	if (in == NULL) {
		char e2[UTIL_ERRLEN];
		snprintf(e2, sizeof e2, "%s", err);
		util_err(err, "input: %s", e2);
		return -1;
	}
	if (in->type != JSON_OBJECT) {
		util_err(err, "input: not a JSON object");
		goto out;
	}
	if ((tmpl = model_chat_template(md, err)) == NULL) {
		if (err[0] == '\0')
			util_err(err, "%s: no chat template", model_path(md));
		goto out;
	}
	if ((c = chat_new(tmpl, strlen(tmpl), err)) == NULL ||
	    (s = with_special_tokens(in, tok, &n)) == NULL ||
	    (ctx = json_parse(s, n, err)) == NULL ||
	    (out = chat_render(c, ctx, &co, &n, err)) == NULL) {
		if (err[0] == '\0')
			util_err(err, "out of memory");
		goto out;
	}
	fwrite(out, 1, n, stdout);
	rc = 0;
out:
	free(out), free(s), free(tmpl);
	chat_free(c);
	json_free(ctx);
	json_free(in);
	return rc;
}

/* --tokenize, --detokenize, --template on model path; 0 or 1 */
static int
text_tool(const struct opts *o, const char *path, char *text, size_t len)
{
	char err[UTIL_ERRLEN] = "";
	struct model *md = model_open_text(path, err);
	struct tokenizer *tok = NULL;
	int rc = -1;

	if (md == NULL)
		die(1, "%s", err);
	if ((tok = model_tokenizer(md, err)) != NULL) {
		err[0] = '\0';
		rc = o->text_tool == 'k' ? tokenize(tok, o, text, len, err) :
		    o->text_tool == 'D' ? detokenize(tok, text, err) :
		    render_template(md, tok, text, len, err);
	} else if (err[0] == '\0')
		util_err(err, "%s: no tokenizer", model_path(md));
	if (rc != 0)
		warnmsg("%s", err[0] ? err : "out of memory");
	tokenizer_free(tok);
	model_close_text(md);
	return rc == 0 ? 0 : 1;
}

/* --json, --json-schema FILE: the grammar every reply keeps to. */
static int
grammar_setup(struct gen *g, const char *model, char *err)
{
	const struct tokenizer *tok = prompt_tokenizer(g->pr);
	struct json *schema = NULL;
	char *text = NULL, e2[UTIL_ERRLEN];
	const int32_t *stop;
	size_t len;
	int n_stop;

	if (tok == NULL)
		return util_err(err, "%s: no tokenizer: --json needs one", model);
	stop = prompt_stop_ids(g->pr, &n_stop);
	if (g->o->schema != NULL) {
		if ((text = util_read_file(g->o->schema, &len, e2)) == NULL)
			return util_err(err, "%s", e2);
		if ((schema = json_parse(text, len, e2)) == NULL) {
			free(text);
			return util_err(err, "%s: %s", g->o->schema, e2);
		}
	}
	if ((g->gv = grammar_vocab_new(tok, stop, n_stop, e2)) != NULL)
		g->gr = grammar_compile(schema, g->gv, NULL, e2);
	json_free(schema);
	free(text);
	if (g->gr == NULL)
		return util_err(err, "%s: %s", g->o->schema ? g->o->schema : "--json", e2);
	fprintf(stderr, "[grammar] %s: replies keep to it (%zu tokens, stop ids %d)\n",
	    g->o->schema ? g->o->schema : "any JSON object", grammar_vocab_size(g->gv), n_stop);
	return 0;
}

static int
parse(int argc, char *argv[], struct opts *o)
{
	static const struct option own[] = {
		{ "ids", no_argument, NULL, 'I' }, { "help", no_argument, NULL, 'h' },
		{ "tokenize", no_argument, NULL, 'k' }, { "detokenize", no_argument, NULL, 'D' },
		{ "template", no_argument, NULL, 'p' }, { "special", no_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'J' }, { "json-schema", required_argument, NULL, 'G' },
		{ "image", required_argument, NULL, 'M' }, { "mmproj", required_argument, NULL, 'P' },
		{ "image-tokens", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	struct option lopts[GENOPT_MAXOPTS];
	char err[UTIL_ERRLEN];
	int ch, r;

	if (genopt_longopts(GENOPT_FILTERS | GENOPT_CTX, own, lopts) != 0)
		return -1;
	while ((ch = getopt_long(argc, argv, GENOPT_SHORT "h", lopts, NULL)) != -1) {
		switch (ch) {
		case 'I': o->ids = 1; break;
		case 'h': exit(usage(stdout, 0));
		case 'k': case 'D': case 'p':
			if (o->text_tool && o->text_tool != ch) {
				warnmsg("--tokenize, --detokenize and --template exclude each other");
				return -1;
			}
			o->text_tool = ch;
			break;
		case 'S': o->special = 1; break;
		case 'J': o->json = 1; break;
		case 'G': o->schema = optarg; break;
		case 'M':
			if (o->n_image == MAX_IMAGES) {
				warnmsg("--image: more than %d images", MAX_IMAGES);
				return -1;
			}
			o->image[o->n_image++] = optarg;
			break;
		case 'P': o->mmproj = optarg; break;
		case 'T':
			if (strcmp(optarg, "70") && strcmp(optarg, "140") && strcmp(optarg, "280") &&
			    strcmp(optarg, "560") && strcmp(optarg, "1120")) {
				warnmsg("--image-tokens %s: not 70, 140, 280, 560 or 1120", optarg);
				return -1;
			}
			o->image_tokens = atoi(optarg);
			break;
		default:
			if ((r = genopt_set(&o->go, ch, optarg, err)) < 0)
				warnmsg("%s: %s", argv[optind - 1], err);
			if (r <= 0)
				return -1;
		}
	}
	return 0;
}

/*
 * --image: the tower (--mmproj, MEMRA_GEMMA_MMPROJ, else the model's own checkpoint),
 * its proof line, the vocabulary's image markers and the images prepared.
 */
static int
vision_setup(struct gen *g, const char *model, char *err)
{
	const char *src = g->o->mmproj ? g->o->mmproj : getenv("MEMRA_GEMMA_MMPROJ") &&
	    *getenv("MEMRA_GEMMA_MMPROJ") ? getenv("MEMRA_GEMMA_MMPROJ") : model;
	const struct tokenizer *tok = prompt_tokenizer(g->pr);
	const struct vision_hparams *hp;
	char e2[UTIL_ERRLEN];

	if (tok == NULL)
		return util_err(err, "%s: no tokenizer: --image needs one", model);
	if ((g->vis = vision_open(src, g->be, err)) == NULL)
		return -1;
	hp = vision_hparams(g->vis);
	if (hp->n_embd_text != model_hparams(g->m)->n_embd)
		return util_err(err, "%s: a tower for a text width of %d, the model's is %d", src,
		    hp->n_embd_text, model_hparams(g->m)->n_embd);
	if (vision_tokens(tok, &g->vt, e2) != 0)
		return util_err(err, "%s: %s", model, e2);
	fprintf(stderr, "[vision] gemma4 tower: %d layers, hidden %d, patch %d, pool %d, %d soft "
	    "tokens an image at most, image rows %s (%s)\n", hp->n_layer, hp->n_embd, hp->patch,
	    hp->pool, g->o->image_tokens ? g->o->image_tokens : hp->max_tokens, hp->bidir ? "bidirectional" : "causal", src);
	for (int i = 0; i < g->o->n_image; i++) {
		size_t len;
		char *buf = util_read_file(g->o->image[i], &len, e2);

		if (buf == NULL)
			return util_err(err, "%s", e2);
		if (vision_prepare(g->vis, buf, len, NULL, g->o->image_tokens, &g->img[i], e2) != 0) {
			free(buf);
			return util_err(err, "%s: %s", g->o->image[i], e2);
		}
		free(buf);
		fprintf(stderr, "[vision] %s: %dx%d -> %dx%d, %d soft tokens\n", g->o->image[i],
		    g->img[i].w, g->img[i].h, g->img[i].rw, g->img[i].rh, g->img[i].n_tok);
		/* an image's rows lie in one piece of a sliding layer's attention */
		if (model_ring_hold(g->m, g->img[i].n_tok) != 0)
			return util_err(err, "%s: %s", model, model_errmsg(g->m));
	}
	return 0;
}

/* The split's boot proof lines on stderr (none for a whole model). */
static void
pp_lines(const struct model *m)
{
	char line[512];

	for (int i = 0; model_pp_line(m, i, line, sizeof line) == 0; i++)
		fprintf(stderr, "%s\n", line);
}

int
main(int argc, char *argv[])
{
	struct opts o = { 0 };
	struct gen g = { .o = &o };
	struct model_options mo = { 0 };
	struct backend *be[PIPELINE_MAX_STAGES];
	struct model_split sp;
	char err[UTIL_ERRLEN], line[256], *text = NULL;
	size_t len = 0;
	int status, graph_stats = 0, rc;

	prog = base_name(argv[0]);
	genopt_init(&o.go, 128);
	if (parse(argc, argv, &o) != 0)
		return usage(stderr, 2);
	argc -= optind;
	argv += optind;
	if ((o.text_tool && o.go.jsonl) || (o.special && o.text_tool != 'k') ||
	    !genopt_operands(&o.go, argc))
		return usage(stderr, 2);
	if ((o.n_image || o.mmproj || o.image_tokens) && (o.text_tool || !o.n_image)) {
		warnmsg("--image goes with prompts (not the text tools); --mmproj and "
		    "--image-tokens with --image");
		return usage(stderr, 2);
	}
	if ((o.json || o.schema) && (o.text_tool || o.go.ignore_eos || (o.json && o.schema))) {
		warnmsg("--json and --json-schema exclude each other, --ignore-eos and the text tools");
		return usage(stderr, 2);
	}
	if (genopt_check(&o.go, &mo.kv_f16, err) != 0)
		die(2, "%s", err);
	if (genopt_text(&o.go, argc == 2 ? argv[1] : NULL, &text, &len, err) != 0)
		die(1, "%s", err);
	if (o.text_tool) {
		status = text_tool(&o, argv[0], text, len);
		free(text);
		return finish(status);
	}
	if ((rc = genopt_open(&o.go, be, &graph_stats, err)) != 0)
		die(rc == -2 ? 2 : 1, "%s", err);
	g.be = be[0];
	genopt_split(&o.go, be, &sp);
	mo.split = o.go.n_stage > 1 ? &sp : NULL;
	model_options_set(&mo, argv[0], NULL, getenv("MEMRA_MTP_DRAFT"),
	    getenv("MEMRA_FRSPEC_TRIM"), getenv("MEMRA_FULL_PREC"));
	if (mo.draft != NULL)
		fprintf(stderr, "[mtp-draft] loading external MTP draft: %s\n", mo.draft);
	if ((g.m = model_open_opts(argv[0], g.be, &mo, err)) == NULL)
		die(1, "%s", err);
	pp_lines(g.m);
	if (model_attach_line(g.m, line, sizeof line) == 0)
		fprintf(stderr, "%s\n", line);
	if ((g.pr = prompt_new(g.m, o.go.mode, err)) == NULL)
		die(1, "%s: %s", argv[0], err);
	if (prompt_tokenizer(g.pr) == NULL && !o.go.jsonl)
		die(1, "%s: no tokenizer: give prompts as token ids (--jsonl {\"prompt\": [ids]})",
		    argv[0]);
	g.nv = model_hparams(g.m)->n_vocab;
	if ((o.json || o.schema) && grammar_setup(&g, argv[0], err) != 0)
		die(1, "%s", err);
	if (o.n_image > 0 && vision_setup(&g, argv[0], err) != 0)
		die(1, "%s", err);
	if ((g.lg = model_host_alloc(g.m, g.nv)) == NULL)
		die(1, "%s", model_errmsg(g.m));
	status = o.go.jsonl ? jsonl(&g) : one(&g, text, len);
	free(text);
	grammar_free(g.gr);
	grammar_vocab_free(g.gv);
	for (int i = 0; i < o.n_image; i++)
		vision_image_free(&g.img[i]);
	vision_prompt_free(&g.vp);
	vision_close(g.vis);
	model_host_free(g.m, g.lg);
	prompt_free(g.pr);
	model_close(g.m);
	if (backend_graph_note(g.be, graph_stats, err, sizeof err) != NULL)
		warnmsg("cuda graph: %s", err);
	for (int s = 0; s < o.go.n_stage; s++)
		backend_close(be[s]);
	return finish(status);
}
