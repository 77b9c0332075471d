#include "prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "json.h"
#include "model.h"
#include "tokenizer.h"
#include "util.h"

static const char *const end_tokens[] = {
	"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<end_of_turn>",
	"<|end|>", "</s>",
};

struct prompt {
	struct model *m;
	struct tokenizer *tok;	/* NULL: the model has none, ids only */
	struct chat *chat;	/* NULL: raw */
	int32_t	stop[16];
	int	n_stop;
};

static void
add_stop(struct prompt *p, int32_t id)
{
	if (id < 0 || p->n_stop == (int)(sizeof p->stop / sizeof p->stop[0]))
		return;
	for (int i = 0; i < p->n_stop; i++)
		if (p->stop[i] == id)
			return;
	p->stop[p->n_stop++] = id;
}

static int
find_stops(struct prompt *p, struct model *m)
{
	int32_t ids[8];
	int n = model_stop_ids(m, ids, 8);

	for (int i = 0; i < n; i++)
		add_stop(p, ids[i]);
	if (p->tok == NULL)
		return 0;
	add_stop(p, tokenizer_eos(p->tok));
	for (size_t i = 0; i < sizeof end_tokens / sizeof end_tokens[0]; i++) {
		int32_t id = tokenizer_find(p->tok, end_tokens[i], strlen(end_tokens[i]));

		if (id >= 0 && tokenizer_is_control(p->tok, id))
			add_stop(p, id);
	}
	return 0;
}

struct prompt *
prompt_new(struct model *m, enum prompt_mode mode, char *err)
{
	struct prompt *p = calloc(1, sizeof *p);
	char *tmpl = NULL;

	if (p == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	p->m = m;
	if ((p->tok = model_tokenizer(m, err)) == NULL && err[0] != '\0')
		goto fail;
	if (p->tok == NULL && mode == PROMPT_CHAT) {
		util_err(err, "no tokenizer, so no chat template to apply");
		goto fail;
	}
	if (p->tok != NULL && mode != PROMPT_RAW) {
		tmpl = model_chat_template(m, err);
		if (tmpl == NULL && err[0] != '\0')
			goto fail;
		if (tmpl == NULL && mode == PROMPT_CHAT) {
			util_err(err, "%s: model has no chat template", model_path(m));
			goto fail;
		}
		if (tmpl != NULL && (p->chat = chat_new(tmpl, strlen(tmpl), err)) == NULL)
			goto fail;
	}
	free(tmpl);
	find_stops(p, m);
	return p;
fail:
	free(tmpl);
	prompt_free(p);
	return NULL;
}

void
prompt_free(struct prompt *p)
{
	if (p == NULL)
		return;
	tokenizer_free(p->tok);
	chat_free(p->chat);
	free(p);
}

int
prompt_is_chat(const struct prompt *p)
{
	return p->chat != NULL;
}

const struct tokenizer *
prompt_tokenizer(const struct prompt *p)
{
	return p->tok;
}

const int32_t *
prompt_stop_ids(const struct prompt *p, int *n)
{
	*n = p->n_stop;
	return p->stop;
}

/* {"messages": [{"role": "user", "content": text}]} rendered */
static char *
render(const struct prompt *p, const char *text, size_t len, size_t *out_len, char *err)
{
	char *buf = NULL, *out;
	size_t blen = 0;
	FILE *fp = open_memstream(&buf, &blen);
	struct json *ctx;
	struct chat_opts o = { .add_generation_prompt = 1 };

	if (fp == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	fputs("{\"messages\": [{\"role\": \"user\", \"content\": ", fp);
	json_put_str(fp, text, len, 0);
	fputs("}]}", fp);
	if (fclose(fp) != 0) {
		free(buf);
		util_err(err, "out of memory");
		return NULL;
	}
	ctx = json_parse(buf, blen, err);
	free(buf);
	if (ctx == NULL)
		return NULL;
	out = chat_render(p->chat, ctx, &o, out_len, err);
	json_free(ctx);
	return out;
}

int32_t *
prompt_encode(const struct prompt *p, const char *text, size_t len, size_t *n, char *err)
{
	char *r;
	int32_t *ids;

	if (p->tok == NULL) {
		util_err(err, "%s: no tokenizer: give the prompt as token ids", model_path(p->m));
		return NULL;
	}
	if (p->chat == NULL)
		return tokenizer_encode(p->tok, text, len,
		    TOKENIZER_ADD_SPECIAL | TOKENIZER_PARSE_SPECIAL, n, err);
	if ((r = render(p, text, len, &len, err)) == NULL)
		return NULL;
	ids = tokenizer_encode(p->tok, r, len, TOKENIZER_PARSE_SPECIAL, n, err);
	free(r);
	return ids;
}

int32_t *
prompt_encode_chat(const struct prompt *p, const struct json *ctx, char **text, size_t *n,
    char *err)
{
	struct chat_opts o = { .add_generation_prompt = 1 };
	size_t len;
	char *r;
	int32_t *ids;

	if (p->chat == NULL) {
		util_err(err, "the model has no chat template");
		return NULL;
	}
	if ((r = chat_render(p->chat, ctx, &o, &len, err)) == NULL)
		return NULL;
	ids = tokenizer_encode(p->tok, r, len, TOKENIZER_PARSE_SPECIAL, n, err);
	if (text != NULL && ids != NULL)
		*text = r;
	else
		free(r);
	return ids;
}

/* A JSON value for a message: a number's literal, else its type */
static const char *
what(const struct json *j)
{
	static const char *const names[] = { "null", "false", "true", "number", "a string",
	    "an array", "an object" };

	return j->type == JSON_NUMBER ? j->str : names[j->type];
}

int32_t *
prompt_ids_json(const struct json *arr, int32_t n_vocab, size_t *n, char *err)
{
	int32_t *ids;

	if (arr == NULL || arr->type != JSON_ARRAY) {
		util_err(err, "\"prompt\": not an array of token ids");
		return NULL;
	}
	if (arr->n == 0) {
		util_err(err, "\"prompt\": an empty array of token ids");
		return NULL;
	}
	if ((ids = malloc(arr->n * sizeof *ids)) == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < arr->n; i++) {
		const struct json *v = &arr->items[i];

		if (v->type != JSON_NUMBER || !v->is_int) {
			util_err(err, "\"prompt\"[%zu]: %.40s is not an integer token id", i,
			    what(v));
			free(ids);
			return NULL;
		}
		if (v->i < 0 || v->i >= n_vocab) {
			util_err(err, "\"prompt\"[%zu]: id %lld is outside the vocabulary "
			    "(%d tokens)", i, (long long)v->i, (int)n_vocab);
			free(ids);
			return NULL;
		}
		ids[i] = (int32_t)v->i;
	}
	*n = arr->n;
	return ids;
}
