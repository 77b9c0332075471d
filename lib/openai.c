#include "openai.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "json.h"
#include "schedule.h"
#include "tokenizer.h"
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

/* 1 when s[n] is UTF-8 through and through (no partial character). */
static int
utf8_whole(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t l = s[i] < 0x80 ? 1 : (s[i] & 0xe0) == 0xc0 ? 2 : (s[i] & 0xf0) == 0xe0 ? 3 :
		    (s[i] & 0xf8) == 0xf0 ? 4 : 0;

		if (l == 0 || i + l > n)
			return 0;
		for (size_t k = 1; k < l; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
		i += l;
	}
	return 1;
}

/* Token id's bytes as a JSON string (and *n their count). */
static void
put_token(FILE *fp, const struct openai_resp *r, int32_t id, size_t *n)
{
	const char *p = r->tok ? tokenizer_piece(r->tok, id, n) : NULL;

	if (p == NULL)
		p = "", *n = 0;
	json_put_str(fp, p, *n, !utf8_whole((const unsigned char *)p, *n));
}

static void
put_lp(FILE *fp, float lp)
{
	fprintf(fp, "%.9g", isfinite(lp) ? lp : -9999.0);
}

/* {"token", "logprob", "bytes"[, "top_logprobs": []]} of id */
static void
put_chat_token(FILE *fp, const struct openai_resp *r, int32_t id, float lp, int top)
{
	const char *p;
	size_t n;

	fputs("{\"token\": ", fp);
	put_token(fp, r, id, &n);
	fputs(", \"logprob\": ", fp);
	put_lp(fp, lp);
	fputs(", \"bytes\": [", fp);
	p = n ? tokenizer_piece(r->tok, id, &n) : "";
	for (size_t i = 0; i < n; i++)
		fprintf(fp, i ? ", %u" : "%u", (unsigned char)p[i]);
	fputs(top ? "], \"top_logprobs\": [" : "]", fp);
}

static void
put_lp_chat(FILE *fp, const struct openai_resp *r, const struct openai_lp *l)
{
	fputs("{\"content\": [", fp);
	for (int i = 0; i < l->n; i++) {
		const struct sched_logprob *p = &l->lp[i];

		fputs(i ? ", " : "", fp);
		put_chat_token(fp, r, l->ids[i], p->logprob, 1);
		for (int k = 0; k < p->n_top; k++) {
			fputs(k ? ", " : "", fp);
			put_chat_token(fp, r, p->top_id[k], p->top_lp[k], 0);
			fputs("}", fp);
		}
		fputs("]}", fp);
	}
	fputs("], \"refusal\": null}", fp);
}

static void
put_lp_cmpl(FILE *fp, const struct openai_resp *r, const struct openai_lp *l)
{
	size_t n, off = l->offset;

	fputs("{\"tokens\": [", fp);
	for (int i = 0; i < l->n; i++)
		fputs(i ? ", " : "", fp), put_token(fp, r, l->ids[i], &n);
	fputs("], \"token_logprobs\": [", fp);
	for (int i = 0; i < l->n; i++)
		fputs(i ? ", " : "", fp), put_lp(fp, l->lp[i].logprob);
	fputs("], \"top_logprobs\": [", fp);
	for (int i = 0; i < l->n; i++) {
		fputs(i ? ", {" : "{", fp);
		for (int k = 0; k < l->lp[i].n_top; k++) {
			fputs(k ? ", " : "", fp);
			put_token(fp, r, l->lp[i].top_id[k], &n);
			fputs(": ", fp);
			put_lp(fp, l->lp[i].top_lp[k]);
		}
		fputs("}", fp);
	}
	fputs("], \"text_offset\": [", fp);
	for (int i = 0; i < l->n; i++) {
		fprintf(fp, i ? ", %zu" : "%zu", off);
		if (r->tok != NULL && tokenizer_piece(r->tok, l->ids[i], &n) != NULL)
			off += n;
	}
	fputs("]}", fp);
}

/* ", "logprobs": ..." of lp (NULL: null) */
static void
put_logprobs(FILE *fp, const struct openai_resp *r, const struct openai_lp *lp)
{
	fputs(", \"logprobs\": ", fp);
	if (lp == NULL)
		fputs("null", fp);
	else if (r->chat)
		put_lp_chat(fp, r, lp);
	else
		put_lp_cmpl(fp, r, lp);
}

static void
put_finish(FILE *fp, const char *finish)
{
	if (finish != NULL)
		fprintf(fp, ", \"finish_reason\": \"%s\"}]", finish);
	else
		fputs(", \"finish_reason\": null}]", fp);
}

/* , "token_ids": [ids[n]] */
static void
put_id_list(FILE *fp, const int32_t *ids, int n)
{
	fputs(", \"token_ids\": [", fp);
	for (int i = 0; i < n; i++)
		fprintf(fp, i ? ", %d" : "%d", ids[i]);
	fputs("]", fp);
}

char *
openai_chunk(const struct openai_resp *r, const char *key, const char *s, size_t n,
    const struct openai_lp *lp, const int32_t *tids, int n_tids, const char *finish, size_t *len)
{
	char *b;
	FILE *fp = begin(&b, len, r, 1, 1);

	if (fp == NULL)
		return NULL;
	fprintf(fp, ", \"choices\": [{\"index\": %d, ", r->index);
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
	if (tids != NULL)
		put_id_list(fp, tids, n_tids);
	put_logprobs(fp, r, lp);
	put_finish(fp, finish);
	fputs("}", fp);
	return done(fp, &b);
}

static void
put_ids(FILE *fp, const int32_t *ids, int n)
{
	fputs("\"text\": \"\"", fp);
	put_id_list(fp, ids, n);
}

char *
openai_chunk_ids(const struct openai_resp *r, const int32_t *ids, int n, size_t *len)
{
	char *b;
	FILE *fp = begin(&b, len, r, 1, 1);

	if (fp == NULL)
		return NULL;
	fprintf(fp, ", \"choices\": [{\"index\": %d, ", r->index);
	put_ids(fp, ids, n);
	put_finish(fp, NULL);
	fputs("}", fp);
	return done(fp, &b);
}

/* "call_ID_N", or "call_ID_INDEX_N" past choice 0 */
static void
put_call_id(FILE *fp, const struct openai_resp *r, size_t i)
{
	if (r->index > 0)
		fprintf(fp, "\"call_%ld_%d_%zu\"", r->id, r->index, i);
	else
		fprintf(fp, "\"call_%ld_%zu\"", r->id, i);
}

/* The first max (0: all) calls of c, as "tool_calls": [...]. */
static void
put_calls(FILE *fp, const struct openai_resp *r, const struct chat_reply *c, size_t max)
{
	fputs("\"tool_calls\": [", fp);
	for (size_t i = 0; i < c->ncalls && (max == 0 || i < max); i++) {
		fputs(i ? ", {\"id\": " : "{\"id\": ", fp);
		put_call_id(fp, r, i);
		fputs(", \"type\": \"function\", \"function\": {\"name\": ", fp);
		json_put_str(fp, c->calls[i].name, strlen(c->calls[i].name), 0);
		fputs(", \"arguments\": ", fp);
		json_put_str(fp, c->calls[i].arguments, strlen(c->calls[i].arguments), 0);
		fputs("}}", fp);
	}
	fputs("]", fp);
}

char *
openai_chunk_call(const struct openai_resp *r, const struct chat_call *c, size_t i, int head,
    size_t *len)
{
	char *b;
	FILE *fp = begin(&b, len, r, 1, 1);

	if (fp == NULL)
		return NULL;
	fprintf(fp, ", \"choices\": [{\"index\": %d, \"delta\": {\"tool_calls\": [{\"index\": %zu, ",
	    r->index, i);
	if (head) {
		fputs("\"id\": ", fp);
		put_call_id(fp, r, i);
		fputs(", \"type\": \"function\", \"function\": {\"name\": ", fp);
		json_put_str(fp, c->name, strlen(c->name), 0);
		fputs(", \"arguments\": \"\"}}]}", fp);
	} else {
		fputs("\"function\": {\"arguments\": ", fp);
		json_put_str(fp, c->arguments, strlen(c->arguments), 0);
		fputs("}}]}", fp);
	}
	fputs(", \"logprobs\": null", fp);
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

/* A chat reply's message of choice c; the finish it makes (tool calls). */
static const char *
put_message(FILE *fp, const struct openai_resp *r, const struct openai_choice *ch, int think)
{
	struct chat_reply c = { 0 };
	const char *text = ch->text ? ch->text : "", *finish = ch->finish;
	size_t n = ch->text ? ch->len : 0;
	char err[UTIL_ERRLEN];

	fputs("\"message\": {\"role\": \"assistant\", \"content\": ", fp);
	if (chat_parse_reply_typed(text, n, think, r->types, &c, err) != 0) {	/* as it is */
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
		put_calls(fp, r, &c, ch->max_calls);
		if (strcmp(finish, "length") != 0)	/* cut: as far as it came */
			finish = "tool_calls";
	}
	fputs("}", fp);
	chat_reply_free(&c);
	return finish;
}

char *
openai_reply(const struct openai_resp *r, const struct openai_choice *c, int n, int think,
    int completion_tokens, size_t *len)
{
	struct openai_resp ri = *r;
	char *b;
	FILE *fp = begin(&b, len, r, 0, 1);

	if (fp == NULL)
		return NULL;
	fputs(", \"choices\": [", fp);
	for (int i = 0; i < n; i++) {
		const char *finish = c[i].finish;

		ri.index = i;
		fprintf(fp, "%s{\"index\": %d, ", i ? ", " : "", i);
		if (c[i].ids != NULL)
			put_ids(fp, c[i].ids, c[i].n_ids);
		else if (!r->chat) {
			fputs("\"text\": ", fp);
			json_put_str(fp, c[i].text ? c[i].text : "", c[i].text ? c[i].len : 0, 0);
		} else
			finish = put_message(fp, &ri, &c[i], think);
		if (c[i].ids == NULL && c[i].tids != NULL)
			put_id_list(fp, c[i].tids, c[i].n_tids);
		put_logprobs(fp, r, c[i].want_lp ? &c[i].lp : NULL);
		fprintf(fp, ", \"finish_reason\": \"%s\"}", finish);
	}
	fputs("], ", fp);
	put_usage(fp, r, completion_tokens);
	fputs("}", fp);
	return done(fp, &b);
}

/* --- requests --- */

/* q[key] is there and not null. */
static const struct json *
field(const struct json *q, const char *key)
{
	const struct json *v = json_get(q, key);

	return v != NULL && v->type != JSON_NULL ? v : NULL;
}

/* q[key], a number in [lo, hi], into *out (absent or null: untouched). */
static int
get_num(const struct json *q, const char *key, double lo, double hi, float *out, char *err)
{
	const struct json *v = field(q, key);

	if (v == NULL)
		return 0;
	if (v->type != JSON_NUMBER)
		return util_err(err, "'%s': not a number", key);
	if (!(v->num >= lo && v->num <= hi))
		return util_err(err, "'%s': %g: out of range %g..%g", key, v->num, lo, hi);
	*out = (float)v->num;
	return 0;
}

/* q[key], an integer in [lo, hi], into *out (absent or null: untouched). */
static int
get_int(const struct json *q, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err)
{
	const struct json *v = field(q, key);

	if (v == NULL)
		return 0;
	if (v->type != JSON_NUMBER || !v->is_int)
		return util_err(err, "'%s': not an integer", key);
	if (v->i < lo || v->i > hi)
		return util_err(err, "'%s': %lld: out of range %lld..%lld", key, (long long)v->i,
		    (long long)lo, (long long)hi);
	*out = v->i;
	return 0;
}

/* q[key], a boolean, into *out (absent or null: untouched). */
static int
get_bool(const struct json *q, const char *key, int *out, char *err)
{
	const struct json *v = field(q, key);

	if (v == NULL)
		return 0;
	if (v->type != JSON_TRUE && v->type != JSON_FALSE)
		return util_err(err, "'%s': not a boolean", key);
	*out = v->type == JSON_TRUE;
	return 0;
}

/* The sampling fields. */
static int
req_sampling(const struct json *q, struct openai_req *r, char *err)
{
	int64_t i = 0;

	if (get_num(q, "temperature", 0, 2, &r->sp.temp, err) != 0 ||
	    get_num(q, "top_p", 0, 1, &r->sp.top_p, err) != 0 ||
	    get_num(q, "min_p", 0, 1, &r->sp.min_p, err) != 0 ||
	    get_num(q, "presence_penalty", -2, 2, &r->sp.presence_penalty, err) != 0 ||
	    get_num(q, "frequency_penalty", -2, 2, &r->sp.frequency_penalty, err) != 0 ||
	    get_num(q, "repetition_penalty", 0x1p-20, 100, &r->sp.repeat_penalty, err) != 0)
		return -1;
	if (field(q, "top_p") != NULL && r->sp.top_p == 0)
		return util_err(err, "'top_p': 0: out of range (0, 1]");
	if (get_int(q, "top_k", 0, 1 << 30, &i, err) != 0)
		return -1;
	r->sp.top_k = (int)i;
	i = (int64_t)r->sp.seed;
	if (get_int(q, "seed", INT64_MIN, INT64_MAX, &i, err) != 0)
		return -1;
	r->sp.seed = (uint64_t)i;
	return 0;
}

/* max_tokens, max_completion_tokens (it wins), n, logprobs. */
static int
req_counts(const struct json *q, struct openai_req *r, char *err)
{
	int64_t i = 0, n = 1;

	if (get_int(q, "max_tokens", 1, INT32_MAX, &i, err) != 0 ||
	    get_int(q, "max_completion_tokens", 1, INT32_MAX, &i, err) != 0 ||
	    get_int(q, "n", 1, OPENAI_N_MAX, &n, err) != 0)
		return -1;
	r->max_tokens = (int)i, r->n = (int)n;
	if (r->chat) {
		i = 0;
		if (get_bool(q, "logprobs", &r->logprobs, err) != 0 ||
		    get_int(q, "top_logprobs", 0, OPENAI_TOP_MAX, &i, err) != 0)
			return -1;
		if (field(q, "top_logprobs") != NULL && !r->logprobs)
			return util_err(err, "'top_logprobs': needs 'logprobs': true");
		r->top_logprobs = (int)i;
	} else if (field(q, "logprobs") != NULL) {
		if (get_int(q, "logprobs", 0, OPENAI_TOP_MAX, &i, err) != 0)
			return -1;
		r->logprobs = 1, r->top_logprobs = (int)i;
	}
	if (get_int(q, "best_of", r->n, r->n, &n, err) != 0)	/* only as many as n */
		return -1;
	return 0;
}

/* stop: a string or up to OPENAI_MAX_STOPS of them, none empty. */
static int
req_stop(const struct json *q, struct openai_req *r, char *err)
{
	const struct json *v = field(q, "stop");
	size_t n = v == NULL ? 0 : v->type == JSON_ARRAY ? v->n : 1;

	if (v == NULL)
		return 0;
	if ((v->type != JSON_STRING && v->type != JSON_ARRAY) || n > OPENAI_MAX_STOPS)
		return util_err(err, "'stop': a string or up to %d strings", OPENAI_MAX_STOPS);
	for (size_t k = 0; k < n; k++) {
		const struct json *s = v->type == JSON_ARRAY ? &v->items[k] : v;

		if (s->type != JSON_STRING || s->n == 0)
			return util_err(err, "'stop': not a list of non-empty strings");
		if ((r->stop[r->n_stop++] = strndup(s->str, s->n)) == NULL)
			return util_err(err, "out of memory");
	}
	return 0;
}

/* stream, stream_options, ignore_eos, return_token_ids, and what serve does not do. */
static int
req_flags(const struct json *q, struct openai_req *r, char *err)
{
	const struct json *so = field(q, "stream_options"), *lb = field(q, "logit_bias");
	int echo = 0;

	if (get_bool(q, "stream", &r->stream, err) != 0 ||
	    get_bool(q, "ignore_eos", &r->ignore_eos, err) != 0 ||
	    get_bool(q, "return_token_ids", &r->return_token_ids, err) != 0 ||
	    (!r->chat && get_bool(q, "echo", &echo, err) != 0))
		return -1;
	if (so != NULL && so->type != JSON_OBJECT)
		return util_err(err, "'stream_options': not an object");
	if (so != NULL && !r->stream)
		return util_err(err, "'stream_options': only with 'stream': true");
	if (so != NULL && get_bool(so, "include_usage", &r->include_usage, err) != 0)
		return util_err(err, "'stream_options.include_usage': not a boolean");
	if (echo)
		return util_err(err, "'echo': not supported");
	if (lb != NULL && (lb->type != JSON_OBJECT || lb->n > 0))
		return util_err(err, "'logit_bias': not supported");
	if (!r->chat && field(q, "suffix") != NULL)
		return util_err(err, "'suffix': not supported");
	return 0;
}

/* 1 when tool t is {"type": "function", "function": {"name": "..."}}. */
static int
tool_ok(const struct json *t)
{
	const char *type = json_get_str(t, "type");
	const struct json *f = json_get(t, "function");

	return type != NULL && strcmp(type, "function") == 0 && f != NULL &&
	    f->type == JSON_OBJECT && json_get_str(f, "name") != NULL;
}

/* tool_choice named: the function's name when it is a tool of tools[]; NULL otherwise. */
static const char *
named_tool(const struct json *c, const struct json *tools)
{
	const char *name = tool_ok(c) ? json_get_str(json_get(c, "function"), "name") : NULL;

	for (size_t i = 0; name != NULL && tools != NULL && i < tools->n; i++)
		if (strcmp(json_get_str(json_get(&tools->items[i], "function"), "name"), name) == 0)
			return name;
	return NULL;
}

static int schema_name_ok(const char *s, size_t n);

/* tools[i]: a function of a name as OpenAI takes it, given once, "strict" a
 * boolean, "parameters" an object: 0, or -1 with err. */
static int
tool_check(const struct json *t, size_t i, char *err)
{
	const struct json *f = json_get(&t->items[i], "function"), *p;
	const char *name;
	int strict;

	if (!tool_ok(&t->items[i]))
		return util_err(err, "'tools[%zu]': not {\"type\": \"function\", \"function\": "
		    "{\"name\": ...}}", i);
	name = json_get_str(f, "name");
	if (!schema_name_ok(name, strlen(name)))
		return util_err(err, "'tools[%zu].function.name': not a name of 1 to 64 letters, "
		    "digits, '_' or '-'", i);
	for (size_t k = 0; k < i; k++)
		if (strcmp(json_get_str(json_get(&t->items[k], "function"), "name"), name) == 0)
			return util_err(err, "'tools[%zu].function.name': '%s' is tools[%zu]'s too",
			    i, name, k);
	if (get_bool(f, "strict", &strict, err) != 0)
		return util_err(err, "'tools[%zu].function.strict': not a boolean", i);
	if ((p = json_get(f, "parameters")) != NULL && p->type != JSON_OBJECT &&
	    p->type != JSON_NULL)
		return util_err(err, "'tools[%zu].function.parameters': not a JSON Schema (an "
		    "object)", i);
	return 0;
}

/* tools, tool_choice, parallel_tool_calls. */
static int
req_tools(const struct json *q, struct openai_req *r, char *err)
{
	const struct json *t = field(q, "tools"), *c = field(q, "tool_choice");
	static const char *const names[] = { "auto", "none", "required" };

	if (get_bool(q, "parallel_tool_calls", &r->parallel_tool_calls, err) != 0)
		return -1;
	if (t != NULL && t->type != JSON_ARRAY)
		return util_err(err, "'tools': not an array");
	for (size_t i = 0; t != NULL && i < t->n; i++)
		if (tool_check(t, i, err) != 0)
			return -1;
	r->tools = t;
	r->n_tools = t != NULL ? (int)t->n : 0;
	if (c != NULL && c->type == JSON_STRING) {
		int k = 0;

		while (k < 3 && strcmp(c->str, names[k]) != 0)
			k++;
		if (k == 3)
			return util_err(err, "'tool_choice': '%s': not auto, none, required or a "
			    "function", c->str);
		r->tool_choice = k == 0 ? OPENAI_TOOLS_AUTO : k == 1 ? OPENAI_TOOLS_NONE :
		    OPENAI_TOOLS_REQUIRED;
	} else if (c != NULL) {
		const char *name = c->type == JSON_OBJECT ? named_tool(c, t) : NULL;

		if (name == NULL)
			return util_err(err, "'tool_choice': not auto, none, required or "
			    "{\"type\": \"function\", \"function\": {\"name\": NAME}} of a tool given");
		r->tool_choice = OPENAI_TOOLS_NAMED;
		if ((r->tool_name = strdup(name)) == NULL)
			return util_err(err, "out of memory");
	}
	if (r->tool_choice == OPENAI_TOOLS_REQUIRED && r->n_tools == 0)
		return util_err(err, "'tool_choice': 'required' without 'tools'");
	if (r->tool_choice == OPENAI_TOOLS_NONE)
		r->n_tools = 0;
	return 0;
}

/* 1 when s[n] is a json_schema name as OpenAI takes it: a-z, A-Z, 0-9, _ and -, 64 at most. */
static int
schema_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

/* response_format: {"type": "text" | "json_object"}, or {"type": "json_schema",
 * "json_schema": {"name": NAME, "schema": {...}, "strict": bool, "description": ...}}. */
static int
req_format(const struct json *q, struct openai_req *r, char *err)
{
	const struct json *f = field(q, "response_format"), *js, *name, *sc;
	const char *type = f != NULL && f->type == JSON_OBJECT ? json_get_str(f, "type") : NULL;
	int strict = 0;

	if (f == NULL)
		return 0;
	if (type == NULL)
		return util_err(err, "'response_format': not {\"type\": \"text\" | \"json_object\" | "
		    "\"json_schema\"}");
	if (strcmp(type, "text") == 0)
		return 0;
	if (strcmp(type, "json_object") == 0) {
		r->format = OPENAI_FORMAT_JSON_OBJECT;
		return 0;
	}
	if (strcmp(type, "json_schema") != 0)
		return util_err(err, "'response_format.type': '%s': not text, json_object or "
		    "json_schema", type);
	if ((js = json_get(f, "json_schema")) == NULL || js->type != JSON_OBJECT)
		return util_err(err, "'response_format.json_schema': not an object");
	name = json_get(js, "name");
	if (name == NULL || name->type != JSON_STRING || !schema_name_ok(name->str, name->n))
		return util_err(err, "'response_format.json_schema.name': not a name of 1 to 64 "
		    "letters, digits, '_' or '-'");
	if (get_bool(js, "strict", &strict, err) != 0)
		return util_err(err, "'response_format.json_schema.strict': not a boolean");
	sc = json_get(js, "schema");
	if (sc != NULL && sc->type != JSON_OBJECT && sc->type != JSON_TRUE &&
	    sc->type != JSON_FALSE)
		return util_err(err, "'response_format.json_schema.schema': not a JSON Schema "
		    "(an object)");
	r->format = OPENAI_FORMAT_JSON_SCHEMA, r->schema = sc;
	return 0;
}

int
openai_request(const struct json *q, int chat, struct openai_req *r, char *err)
{
	memset(r, 0, sizeof *r);
	r->chat = chat, r->n = 1, r->parallel_tool_calls = 1;
	sample_defaults(&r->sp);
	r->sp.temp = 1;
	r->sp.penalty_last_n = -1;
	if (req_sampling(q, r, err) != 0 || req_counts(q, r, err) != 0 ||
	    req_stop(q, r, err) != 0 || req_flags(q, r, err) != 0 ||
	    req_format(q, r, err) != 0 || (chat && req_tools(q, r, err) != 0))
		return -1;
	return 0;
}

void
openai_request_free(struct openai_req *r)
{
	for (int i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r->tool_name);
	r->n_stop = 0, r->tool_name = NULL;
}

char *
openai_error(int status, const char *msg, size_t *len)
{
	char *b = NULL;
	FILE *fp = open_memstream(&b, len);
	const char *type = status == 401 ? "authentication_error" : status >= 500 ?
	    "server_error" : status == 404 ? "not_found_error" : "invalid_request_error";

	if (fp == NULL)
		return NULL;
	fputs("{\"error\": {\"message\": ", fp);
	json_put_str(fp, msg, strlen(msg), 0);
	fprintf(fp, ", \"type\": \"%s\", \"code\": %d}}\n", type, status);
	return done(fp, &b);
}

char *
openai_error_code(const char *msg, const char *type, const char *code, size_t *len)
{
	char *b = NULL;
	FILE *fp = open_memstream(&b, len);

	if (fp == NULL)
		return NULL;
	fputs("{\"error\": {\"message\": ", fp);
	json_put_str(fp, msg, strlen(msg), 0);
	fprintf(fp, ", \"type\": \"%s\", \"param\": null, \"code\": \"%s\"}}\n", type, code);
	return done(fp, &b);
}

char *
openai_models(const char *const *names, int n, size_t *len)
{
	char *b = NULL;
	FILE *fp = open_memstream(&b, len);

	if (fp == NULL)
		return NULL;
	fputs("{\"object\": \"list\", \"data\": [", fp);
	for (int i = 0; i < n; i++) {
		fputs(i ? ", {\"id\": " : "{\"id\": ", fp);
		json_put_str(fp, names[i], strlen(names[i]), 0);
		fputs(", \"object\": \"model\", \"created\": 0, \"owned_by\": \"memra\"}", fp);
	}
	fputs("]}\n", fp);
	return done(fp, &b);
}
