/*
 * request: an OpenAI generation request made ready for the scheduler; see
 * request.h.
 */
#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json.h"
#include "media.h"
#include "prompt.h"
#include "sample.h"
#include "tokenizer.h"
#include "util.h"

int
request_parse(struct request *r, const struct json *body, int chat, int n_vocab, int max_n,
    char *err)
{
	struct sampler *smp;

	r->chat = chat;
	if (openai_request(body, chat, &r->q, err) != 0)
		return -1;
	if (r->q.n > max_n)
		return util_err(err, "'n': %d: more than the %d sessions this server runs at once",
		    r->q.n, max_n);
	if ((smp = sample_new(&r->q.sp, n_vocab, err)) == NULL)	/* out-of-range values are 400 */
		return -1;
	sample_free(smp);
	return 0;
}

void
request_free(struct request *r)
{
	openai_request_free(&r->q);
	grammar_free(r->grammar);
	free(r->ids), free(r->forced);
	r->grammar = NULL, r->ids = NULL, r->forced = NULL;
	r->types = (struct chat_types){ NULL, NULL };
}

/* The chat template's context of request body, parsed. */
static struct json *
chat_context(const struct json *body, const struct request *r, char *err)
{
	const struct json *m = json_get(body, "messages"), *t = json_get(body, "tools"),
	    *kw = json_get(body, "chat_template_kwargs");
	char *b = NULL;
	size_t bl = 0;
	FILE *fp;
	struct json *ctx;

	if (m == NULL || m->type != JSON_ARRAY || m->n == 0) {
		util_err(err, "'messages': a non-empty array is required");
		return NULL;
	}
	if (kw != NULL && kw->type != JSON_OBJECT && kw->type != JSON_NULL) {
		util_err(err, "'chat_template_kwargs': not an object");
		return NULL;
	}
	if ((fp = open_memstream(&b, &bl)) == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	fputs("{", fp);
	for (size_t i = 0; kw != NULL && kw->type == JSON_OBJECT && i < kw->n; i++) {
		json_put_str(fp, kw->keys[i], kw->keylens[i], 0);
		fputs(": ", fp);
		json_dump(fp, &kw->items[i], 0);
		fputs(", ", fp);
	}
	if (r->q.n_tools > 0) {	/* (none with tool_choice "none") */
		fputs("\"tools\": ", fp);
		json_dump(fp, t, 0);
		fputs(", ", fp);
	}
	fputs("\"messages\": ", fp);
	media_put_messages(fp, m);	/* image parts as {"type": "image"} */
	fputs("}", fp);
	fclose(fp);
	ctx = json_parse(b, bl, err);
	free(b);
	return ctx;
}

/*
 * tool_choice "required" or a named function: the text the reply is made
 * to begin with, after the prompt (text, as rendered): a tool call's
 * opening, in the template's form (<function=NAME> where the template
 * shows that form, else the JSON object's), closing an open think block
 * first.  NULL for "auto" and "none"; r->forced.
 */
static int
forced_call(struct request *r, const char *text, char *err)
{
	const char *name = r->q.tool_name, *think = r->think ? "</think>\n\n" : "";
	int xml = r->xml;
	char *f = NULL;
	int rc = 0;

	if (r->q.tool_choice == OPENAI_TOOLS_REQUIRED)
		rc = asprintf(&f, "%s<tool_call>\n", think);
	else if (r->q.tool_choice == OPENAI_TOOLS_NAMED && xml)
		rc = asprintf(&f, "%s<tool_call>\n<function=%s>\n", think, name);
	else if (r->q.tool_choice == OPENAI_TOOLS_NAMED) {
		char *b = NULL;
		size_t bl;
		FILE *fp = open_memstream(&b, &bl);

		if (fp != NULL) {
			json_put_str(fp, name, strlen(name), 0);
			fclose(fp);
			rc = asprintf(&f, "%s<tool_call>\n{\"name\": %s, \"arguments\": ", think, b);
		}
		free(b);
		rc = fp == NULL ? -1 : rc;
	}
	if (rc < 0)
		return util_err(err, "out of memory");
	r->forced = f;
	return 0;
}

/* The forced text's tokens after the prompt's: 0, or -1 with err. */
static int
force_tokens(struct request *r, const struct tokenizer *tok, char *err)
{
	size_t n;
	int32_t *f, *all;

	if (r->forced == NULL)
		return 0;
	if ((f = tokenizer_encode(tok, r->forced, strlen(r->forced), TOKENIZER_PARSE_SPECIAL, &n,
	    err)) == NULL)
		return -1;
	if ((all = realloc(r->ids, (r->n_ids + n) * sizeof *all)) == NULL) {
		free(f);
		return util_err(err, "out of memory");
	}
	memcpy(all + r->n_ids, f, n * sizeof *f);
	r->ids = all, r->n_ids += n;
	free(f);
	return 0;
}

/* The chat prompt of body into r; -1 with err. */
static int
chat_prompt(struct request *r, const struct json *body, const struct prompt *pr, char *err)
{
	struct json *ctx = chat_context(body, r, err);
	char *text = NULL;
	size_t tl;
	int rc;

	if (ctx == NULL)
		return -1;
	r->ids = prompt_encode_chat(pr, ctx, &text, &r->n_ids, err);
	json_free(ctx);
	if (r->ids == NULL)
		return -1;
	tl = strlen(text);
	while (tl > 0 && (text[tl - 1] == '\n' || text[tl - 1] == ' '))
		tl--;
	r->think = tl >= 7 && memcmp(text + tl - 7, "<think>", 7) == 0;
	r->xml = strstr(text, "<function=") != NULL;
	if (r->q.format != OPENAI_FORMAT_TEXT && r->think &&	/* the document is the content */
	    (r->forced = strdup("</think>\n\n")) == NULL)
		return free(text), util_err(err, "out of memory");
	rc = (r->forced == NULL && forced_call(r, text, err) != 0) ||
	    force_tokens(r, prompt_tokenizer(pr), err) != 0 ? -1 : 0;
	free(text);
	return rc;
}

int
request_prompt(struct request *r, const struct json *body, const struct prompt *pr,
    int n_vocab, const char *model, char *err)
{
	if (r->chat) {
		if (chat_prompt(r, body, pr, err) != 0)
			return -1;
	} else {
		const struct json *p = json_get(body, "prompt");

		if (p != NULL && p->type == JSON_ARRAY)	/* token ids, used as they are */
			r->ids = prompt_ids_json(p, n_vocab, &r->n_ids, err);
		else if (p == NULL || p->type != JSON_STRING)
			return util_err(err, "'prompt': a string or an array of token ids is required");
		else if (prompt_tokenizer(pr) == NULL)
			return util_err(err, "model '%s' has no tokenizer: give the prompt as token ids",
			    model);
		else
			r->ids = tokenizer_encode(prompt_tokenizer(pr), p->str, p->n,
			    TOKENIZER_ADD_SPECIAL | TOKENIZER_PARSE_SPECIAL, &r->n_ids, err);
		if (r->ids == NULL)
			return -1;
	}
	if (r->n_ids == 0)
		return util_err(err, "the prompt has no tokens");
	return 0;
}

/* Tools t's i-th function. */
static const struct json *
function(const struct json *t, size_t i)
{
	return json_get(&t->items[i], "function");
}

/* 1 when a tool of r is strict. */
static int
any_strict(const struct request *r)
{
	const struct json *t = r->q.tools, *s;

	for (size_t i = 0; t != NULL && i < t->n; i++)
		if ((s = json_get(function(t, i), "strict")) != NULL && s->type == JSON_TRUE)
			return 1;
	return 0;
}

/* 1 when r's tool calls have a grammar. */
static int
calls_grammar(const struct request *r)
{
	return r->q.n_tools > 0 && (r->q.tool_choice == OPENAI_TOOLS_REQUIRED ||
	    r->q.tool_choice == OPENAI_TOOLS_NAMED || any_strict(r));
}

int
request_format(const struct request *r, const struct tokenizer *tok, const char *model,
    char *err)
{
	int calls = calls_grammar(r);
	const char *what = calls ? "'tools'" : "'response_format'";

	if (r->q.format == OPENAI_FORMAT_TEXT && !calls)
		return 0;
	if (r->q.format != OPENAI_FORMAT_TEXT && calls)
		return util_err(err, "'response_format': not with %s", r->q.tool_choice ==
		    OPENAI_TOOLS_AUTO ? "strict tools" : "a 'tool_choice' that forces a call");
	if (tok == NULL)
		return util_err(err, "%s: model '%s' has no tokenizer", what, model);
	if (r->q.ignore_eos)
		return util_err(err, "'ignore_eos': not with %s (the %s ends the reply)", what,
		    calls ? "call" : "document");
	return 1;
}

/* The value of an XML call's parameter as r's grammar generated it. */
static char *
xml_value(void *arg, const char *fn, const char *key, size_t kn, const char *v, size_t vn)
{
	return grammar_call_value(arg, fn, key, kn, v, vn);
}

/* r's tool-call grammar from gc into r->grammar: 0, or -1 with err. */
static int
calls_grammar_get(struct request *r, struct grammar_cache *gc, char *err)
{
	const struct json *t = r->q.tools, *s;
	struct grammar_calls cl = { r->xml ? GRAMMAR_CALLS_XML : GRAMMAR_CALLS_JSON,
	    r->q.tool_choice == OPENAI_TOOLS_REQUIRED ? GRAMMAR_CALLS_REQUIRED :
	    r->q.tool_choice == OPENAI_TOOLS_NAMED ? GRAMMAR_CALLS_NAMED : GRAMMAR_CALLS_AUTO,
	    0, r->q.parallel_tool_calls, r->think };
	struct grammar_tool *gt = calloc(t->n, sizeof *gt);
	char why[UTIL_ERRLEN];
	int bad;

	if (gt == NULL)
		return util_err(err, "out of memory");
	for (size_t i = 0; i < t->n; i++) {
		gt[i].name = json_get_str(function(t, i), "name");
		gt[i].params = json_get(function(t, i), "parameters");
		if (gt[i].params != NULL && gt[i].params->type == JSON_NULL)
			gt[i].params = NULL;
		gt[i].strict = (s = json_get(function(t, i), "strict")) != NULL &&
		    s->type == JSON_TRUE;
		if (cl.start == GRAMMAR_CALLS_NAMED && strcmp(gt[i].name, r->q.tool_name) == 0)
			cl.named = (int)i;
	}
	r->grammar = grammar_cache_calls(gc, gt, (int)t->n, &cl, &bad, why);
	free(gt);
	if (r->grammar == NULL)
		return bad >= 0 ? util_err(err, "'tools[%d].function.parameters': %s", bad, why) :
		    util_err(err, "'tools': %s", why);
	if (r->xml)
		r->types = (struct chat_types){ xml_value, r->grammar };
	return 0;
}

int
request_grammar(struct request *r, struct grammar_cache *gc, char *err)
{
	char why[UTIL_ERRLEN];

	if (r->q.format == OPENAI_FORMAT_TEXT)
		return calls_grammar_get(r, gc, err);
	if ((r->grammar = grammar_cache_get(gc, r->q.schema, why)) == NULL)
		return util_err(err, "'response_format%s': %s", r->q.format ==
		    OPENAI_FORMAT_JSON_SCHEMA ? ".json_schema.schema" : "", why);
	return 0;
}

const struct chat_types *
request_types(const struct request *r)
{
	return r->types.value != NULL ? &r->types : NULL;
}
