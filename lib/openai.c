#include "openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "json.h"
#include "util.h"

/* "{"id": ..., "object": ..., "created": ...[, "model": ...]" into fp. */
static void
head(FILE *fp, const struct openai_resp *r, int chunk, int model)
{
	fprintf(fp, "{\"id\": \"%s-%ld\", \"object\": \"%s\", \"created\": %ld",
	    r->chat ? "chatcmpl" : "cmpl", r->id, !r->chat ? "text_completion" : chunk ?
	    "chat.completion.chunk" : "chat.completion", r->created);
	if (model) {
		fputs(", \"model\": ", fp);
		json_put_str(fp, r->model, strlen(r->model), 0);
	}
}

/* A memstream into *b (*len) that begins the response object: NULL when out of memory. */
static FILE *
begin(char **b, size_t *len, const struct openai_resp *r, int chunk, int model)
{
	FILE *fp;

	*b = NULL;
	if ((fp = open_memstream(b, len)) != NULL)
		head(fp, r, chunk, model);
	return fp;
}

/* The memstream's text, or NULL when it failed. */
static char *
done(FILE *fp, char **b)
{
	if (fclose(fp) != 0 || *b == NULL) {
		free(*b);
		return NULL;
	}
	return *b;
}

static void
put_finish(FILE *fp, const char *finish)
{
	if (finish != NULL)
		fprintf(fp, ", \"finish_reason\": \"%s\"}]", finish);
	else
		fputs(", \"finish_reason\": null}]", fp);
}

char *
openai_chunk(const struct openai_resp *r, const char *key, const char *s, size_t n,
    const char *finish, size_t *len)
{
	char *b;
	FILE *fp = begin(&b, len, r, 1, 1);

	if (fp == NULL)
		return NULL;
	fputs(", \"choices\": [{\"index\": 0, ", fp);
	if (r->chat) {
		fputs("\"delta\": {", fp);
		if (key != NULL) {
			fprintf(fp, "\"%s\": ", key);
			json_put_str(fp, s, n, 0);
		}
		fputs("}", fp);
	} else {
		fputs("\"text\": ", fp);
		json_put_str(fp, s ? s : "", s ? n : 0, 0);
	}
	put_finish(fp, finish);
	fputs("}", fp);
	return done(fp, &b);
}

static void
put_ids(FILE *fp, const int32_t *ids, int n)
{
	fputs("\"text\": \"\", \"token_ids\": [", fp);
	for (int i = 0; i < n; i++)
		fprintf(fp, i ? ", %d" : "%d", ids[i]);
	fputs("]", fp);
}

char *
openai_chunk_ids(const struct openai_resp *r, const int32_t *ids, int n, size_t *len)
{
	char *b;
	FILE *fp = begin(&b, len, r, 1, 1);

	if (fp == NULL)
		return NULL;
	fputs(", \"choices\": [{\"index\": 0, ", fp);
	put_ids(fp, ids, n);
	put_finish(fp, NULL);
	fputs("}", fp);
	return done(fp, &b);
}

/* The calls of c, as "tool_calls": [...] (indexed: a chunk's form). */
static void
put_calls(FILE *fp, const struct openai_resp *r, const struct chat_reply *c, int indexed)
{
	fputs("\"tool_calls\": [", fp);
	for (size_t i = 0; i < c->ncalls; i++) {
		fputs(i ? ", {" : "{", fp);
		if (indexed)
			fprintf(fp, "\"index\": %zu, ", i);
		fprintf(fp, "\"id\": \"call_%ld_%zu\", \"type\": \"function\", \"function\": "
		    "{\"name\": ", r->id, i);
		json_put_str(fp, c->calls[i].name, strlen(c->calls[i].name), 0);
		fputs(", \"arguments\": ", fp);
		json_put_str(fp, c->calls[i].arguments, strlen(c->calls[i].arguments), 0);
		fputs("}}", fp);
	}
	fputs("]", fp);
}

char *
openai_chunk_tools(const struct openai_resp *r, const struct chat_reply *c, size_t *len)
{
	char *b;
	FILE *fp = begin(&b, len, r, 1, 1);

	if (fp == NULL)
		return NULL;
	fputs(", \"choices\": [{\"index\": 0, \"delta\": {", fp);
	put_calls(fp, r, c, 1);
	fputs("}", fp);
	put_finish(fp, NULL);
	fputs("}", fp);
	return done(fp, &b);
}

static void
put_usage(FILE *fp, const struct openai_resp *r, int completion_tokens)
{
	fprintf(fp, "\"usage\": {\"prompt_tokens\": %zu, \"completion_tokens\": %d, "
	    "\"total_tokens\": %zu, \"prompt_tokens_details\": {\"cached_tokens\": %zu}}",
	    r->prompt_tokens, completion_tokens, r->prompt_tokens + completion_tokens,
	    r->cached_tokens);
}

char *
openai_chunk_usage(const struct openai_resp *r, int completion_tokens, size_t *len)
{
	char *b;
	FILE *fp = begin(&b, len, r, 1, 0);

	if (fp == NULL)
		return NULL;
	fputs(", \"choices\": [], ", fp);
	put_usage(fp, r, completion_tokens);
	fputs("}", fp);
	return done(fp, &b);
}

/* A chat reply's message of text[n]; the finish it makes (tool calls). */
static const char *
put_message(FILE *fp, const struct openai_resp *r, const char *text, size_t n, int think,
    const char *finish)
{
	struct chat_reply c = { 0 };
	char err[UTIL_ERRLEN];

	fputs("\"message\": {\"role\": \"assistant\", \"content\": ", fp);
	if (chat_parse_reply(text, n, think, &c, err) != 0) {	/* as it is */
		json_put_str(fp, text, n, 0);
		fputs("}", fp);
		return finish;
	}
	if (c.ncalls > 0 && c.content[0] == '\0')
		fputs("null", fp);
	else if (c.ncalls == 0 && c.reasoning == NULL)	/* the text as generated */
		json_put_str(fp, text, n, 0);
	else
		json_put_str(fp, c.content, strlen(c.content), 0);
	if (c.reasoning != NULL) {
		fputs(", \"reasoning_content\": ", fp);
		json_put_str(fp, c.reasoning, strlen(c.reasoning), 0);
	}
	if (c.ncalls > 0) {
		fputs(", ", fp);
		put_calls(fp, r, &c, 0);
		finish = "tool_calls";
	}
	fputs("}", fp);
	chat_reply_free(&c);
	return finish;
}

char *
openai_reply(const struct openai_resp *r, const char *text, size_t n, int think,
    const int32_t *ids, int n_ids, int completion_tokens, const char *finish, size_t *len)
{
	char *b;
	FILE *fp = begin(&b, len, r, 0, 1);

	if (fp == NULL)
		return NULL;
	if (text == NULL)
		text = "", n = 0;
	fputs(", \"choices\": [{\"index\": 0, ", fp);
	if (ids != NULL)
		put_ids(fp, ids, n_ids);
	else if (!r->chat) {
		fputs("\"text\": ", fp);
		json_put_str(fp, text, n, 0);
	} else
		finish = put_message(fp, r, text, n, think, finish);
	fprintf(fp, ", \"finish_reason\": \"%s\"}], ", finish);
	put_usage(fp, r, completion_tokens);
	fputs("}", fp);
	return done(fp, &b);
}
