/*
 * openai: the response shapes the openai SDK reads, each parsed back as
 * JSON and checked member by member.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "chat.h"
#include "json.h"
#include "openai.h"
#include "schedule.h"
#include "tokenizer.h"
#include "test.h"
#include "util.h"

static const struct openai_resp chat = { 7, 1, "m\"x", 1700000000, 12, 8, 0, NULL, NULL };
static const struct openai_resp cmpl = { 8, 0, "m", 1700000001, 3, 0, 0, NULL, NULL };

/* Parse b[n] (freeing b); NULL (a failed check) when it is not one JSON object. */
static struct json *
parsed(char *b, size_t n)
{
	char err[UTIL_ERRLEN];
	struct json *j;

	CHECK(b != NULL);
	if (b == NULL)
		return NULL;
	CHECK_EQ_INT(strlen(b), n);
	j = json_parse(b, n, err);
	if (j == NULL)
		FAILF("not JSON (%s): %s", err, b);
	free(b);
	return j;
}

/* j = the JSON a call returns (its length through &n) */
#define PARSED(call) (b = (call), parsed(b, n))

/* choices[0] of j */
static const struct json *
choice(const struct json *j)
{
	const struct json *c = json_get(j, "choices");

	return c != NULL && c->type == JSON_ARRAY && c->n == 1 ? &c->items[0] : NULL;
}

TEST(a_chat_chunk_carries_its_delta_under_the_key_and_null_until_the_end)
{
	size_t n;
	char *b;
	struct json *j = PARSED(openai_chunk(&chat, "reasoning_content", "a\nb", 3, NULL, NULL, 0,
	    NULL, &n));
	const struct json *c = j ? choice(j) : NULL, *d = c ? json_get(c, "delta") : NULL;

	CHECK(d != NULL);
	if (d == NULL)
		return;
	CHECK_EQ_STR(json_get_str(j, "id"), "chatcmpl-7");
	CHECK_EQ_STR(json_get_str(j, "object"), "chat.completion.chunk");
	CHECK_EQ_STR(json_get_str(j, "model"), "m\"x");
	CHECK_EQ_STR(json_get_str(d, "reasoning_content"), "a\nb");
	CHECK(json_get(c, "finish_reason")->type == JSON_NULL);
	json_free(j);
	j = PARSED(openai_chunk(&chat, NULL, NULL, 0, NULL, NULL, 0, "length", &n));
	c = j ? choice(j) : NULL;
	CHECK(c != NULL && json_get(c, "delta")->type == JSON_OBJECT && json_get(c, "delta")->n == 0);
	CHECK(c != NULL && strcmp(json_get_str(c, "finish_reason"), "length") == 0);
	json_free(j);
}

TEST(a_completion_chunk_is_text_and_a_tokenless_one_its_ids)
{
	size_t n;
	char *b;
	int32_t ids[2] = { 5, 70000 };
	struct json *j = PARSED(openai_chunk(&cmpl, NULL, "hi", 2, NULL, NULL, 0, NULL, &n));
	const struct json *c = j ? choice(j) : NULL;

	CHECK(c != NULL && strcmp(json_get_str(c, "text"), "hi") == 0);
	CHECK(j != NULL && strcmp(json_get_str(j, "object"), "text_completion") == 0);
	json_free(j);
	j = PARSED(openai_chunk_ids(&cmpl, ids, 2, &n));
	c = j ? choice(j) : NULL;
	CHECK(c != NULL && strcmp(json_get_str(c, "text"), "") == 0);
	CHECK(c != NULL && json_get(c, "token_ids")->n == 2 &&
	    json_get(c, "token_ids")->items[1].num == 70000);
	json_free(j);
}

TEST(the_usage_chunk_has_no_choices_and_the_counts)
{
	size_t n;
	char *b;
	struct json *j = PARSED(openai_chunk_usage(&chat, 5, &n));
	const struct json *u = j ? json_get(j, "usage") : NULL;

	CHECK(j != NULL && json_get(j, "choices")->n == 0);
	CHECK(u != NULL && json_get(u, "prompt_tokens")->num == 12 &&
	    json_get(u, "completion_tokens")->num == 5 && json_get(u, "total_tokens")->num == 17);
	u = u != NULL ? json_get(u, "prompt_tokens_details") : NULL;
	CHECK(u != NULL && json_get(u, "cached_tokens") != NULL &&
	    json_get(u, "cached_tokens")->num == 8);
	json_free(j);
}

TEST(a_chat_reply_splits_reasoning_and_tool_calls_from_the_content)
{
	static const char text[] = "let me see</think>\n\n<tool_call>\n{\"name\": \"f\", "
	    "\"arguments\": {\"x\": 1}}\n</tool_call>";
	size_t n;
	char *b;
	struct openai_choice ch = { .text = text, .len = sizeof text - 1, .finish = "stop" };
	struct json *j = PARSED(openai_reply(&chat, &ch, 1, 1, 9, &n));
	const struct json *c = j ? choice(j) : NULL, *m = c ? json_get(c, "message") : NULL;
	const struct json *tc = m ? json_get(m, "tool_calls") : NULL;

	CHECK(tc != NULL && tc->n == 1);
	if (tc == NULL || tc->n != 1)
		return;
	CHECK_EQ_STR(json_get_str(j, "object"), "chat.completion");
	CHECK_EQ_STR(json_get_str(c, "finish_reason"), "tool_calls");
	CHECK(json_get(m, "content")->type == JSON_NULL);
	CHECK_EQ_STR(json_get_str(m, "reasoning_content"), "let me see");
	CHECK_EQ_STR(json_get_str(&tc->items[0], "id"), "call_7_0");
	CHECK_EQ_STR(json_get_str(json_get(&tc->items[0], "function"), "name"), "f");
	CHECK(json_get(json_get(j, "usage"), "completion_tokens")->num == 9);
	json_free(j);
}

TEST(a_plain_reply_is_the_text_as_generated)
{
	size_t n;
	char *b;
	struct openai_choice ch = { .text = "  x\n", .len = 4, .finish = "length" };
	struct json *j = PARSED(openai_reply(&chat, &ch, 1, 0, 2, &n));
	const struct json *c = j ? choice(j) : NULL, *m = c ? json_get(c, "message") : NULL;

	CHECK(m != NULL && strcmp(json_get_str(m, "content"), "  x\n") == 0);
	CHECK(c != NULL && strcmp(json_get_str(c, "finish_reason"), "length") == 0);
	json_free(j);
	ch = (struct openai_choice){ .ids = (int32_t[]){ 1, 2, 3 }, .n_ids = 3, .finish = "length" };
	j = PARSED(openai_reply(&cmpl, &ch, 1, 0, 3, &n));
	c = j ? choice(j) : NULL;
	CHECK(c != NULL && json_get(c, "token_ids")->n == 3 && strcmp(json_get_str(c, "text"), "") == 0);
	json_free(j);
}

TEST(return_token_ids_lists_a_replys_ids_after_its_text_or_message_and_a_chunks_after_its_delta)
{
	size_t n;
	char *b;
	int32_t ids[3] = { 7, 8, 248000 };
	struct openai_choice ch = { .text = "ab", .len = 2, .tids = ids, .n_tids = 3,
	    .finish = "stop" };
	struct json *j = PARSED(openai_reply(&cmpl, &ch, 1, 0, 3, &n));
	const struct json *c = j ? choice(j) : NULL, *t = c ? json_get(c, "token_ids") : NULL;

	CHECK(c != NULL && strcmp(json_get_str(c, "text"), "ab") == 0);
	CHECK(t != NULL && t->n == 3 && t->items[0].num == 7 && t->items[2].num == 248000);
	json_free(j);
	j = PARSED(openai_reply(&chat, &ch, 1, 0, 3, &n));
	c = j ? choice(j) : NULL, t = c ? json_get(c, "token_ids") : NULL;
	CHECK(c != NULL && strcmp(json_get_str(json_get(c, "message"), "content"), "ab") == 0);
	CHECK(t != NULL && t->n == 3);
	json_free(j);
	j = PARSED(openai_chunk(&chat, "content", "a", 1, NULL, ids + 1, 2, NULL, &n));
	c = j ? choice(j) : NULL, t = c ? json_get(c, "token_ids") : NULL;
	CHECK(c != NULL && strcmp(json_get_str(json_get(c, "delta"), "content"), "a") == 0);
	CHECK(t != NULL && t->n == 2 && t->items[0].num == 8);
	json_free(j);
	j = PARSED(openai_chunk(&cmpl, NULL, "", 0, NULL, ids, 0, "stop", &n));	/* none since */
	c = j ? choice(j) : NULL, t = c ? json_get(c, "token_ids") : NULL;
	CHECK(t != NULL && t->type == JSON_ARRAY && t->n == 0);
	json_free(j);
	j = PARSED(openai_chunk(&cmpl, NULL, "x", 1, NULL, NULL, 0, NULL, &n));	/* not asked */
	c = j ? choice(j) : NULL;
	CHECK(c != NULL && json_get(c, "token_ids") == NULL);
	json_free(j);
}

/* A vocabulary of SPM pieces: "a", "▁b", "é", and the byte halves of é. */
static struct tokenizer *
tiny_tok(void)
{
	static const char *const tokens[] = { "<unk>", "a", "\xE2\x96\x81" "b", "\xC3\xA9", "<0xC3>",
	    "<0xA9>", "\"q\"" };
	static const int32_t types[] = { 2, 1, 1, 1, 6, 6, 1 };
	struct tokenizer_spec sp = { 0 };
	char err[UTIL_ERRLEN];

	sp.model = TOKENIZER_SPM, sp.n_vocab = 7, sp.tokens = tokens, sp.types = types;
	sp.bos = sp.eos = sp.pad = -1, sp.unk = 0;
	return tokenizer_new(&sp, err);
}

/* lp[3] of tokens 1, 2, 4 ("a", " b", the byte C3), two alternatives each */
static const int32_t lp_ids[3] = { 1, 2, 4 };
static const struct sched_logprob lp3[3] = {
	{ -0.25f, 2, { 1, 3 }, { -0.25f, -2 } },
	{ -1.5f, 2, { 6, 2 }, { -0.5f, -1.5f } },
	{ -INFINITY, 0, { 0 }, { 0 } },
};

TEST(chat_logprobs_are_openais_content_list_with_bytes_and_top_logprobs)
{
	struct openai_resp r = chat;
	struct openai_lp l = { lp_ids, lp3, 3, 0 };
	size_t n;
	char *b;
	struct json *j;
	const struct json *c, *lc, *t;

	r.tok = tiny_tok(), r.index = 2;
	j = PARSED(openai_chunk(&r, "content", "a b", 3, &l, NULL, 0, NULL, &n));
	c = j ? choice(j) : NULL;
	lc = c ? json_get(json_get(c, "logprobs"), "content") : NULL;
	CHECK(lc != NULL && lc->n == 3);
	if (lc == NULL || lc->n != 3)
		goto out;
	CHECK_EQ_INT(json_get(c, "index")->i, 2);
	CHECK(json_get(json_get(c, "logprobs"), "refusal")->type == JSON_NULL);
	CHECK_EQ_STR(json_get_str(&lc->items[0], "token"), "a");
	CHECK_NEAR(json_get(&lc->items[0], "logprob")->num, -0.25, 0);
	CHECK_EQ_STR(json_get_str(&lc->items[1], "token"), " b");
	CHECK(json_get(&lc->items[1], "bytes")->n == 2 &&
	    json_get(&lc->items[1], "bytes")->items[0].i == ' ');
	t = json_get(&lc->items[1], "top_logprobs");
	CHECK(t != NULL && t->n == 2 && strcmp(json_get_str(&t->items[0], "token"), "\"q\"") == 0);
	CHECK(t != NULL && t->n == 2 && json_get(&t->items[1], "top_logprobs") == NULL);
	/* a byte that is no character alone: its bytes exact, its token escaped; -inf as -9999 */
	CHECK(json_get(&lc->items[2], "bytes")->n == 1 &&
	    json_get(&lc->items[2], "bytes")->items[0].i == 0xC3);
	CHECK_NEAR(json_get(&lc->items[2], "logprob")->num, -9999, 0);
	CHECK(json_get(&lc->items[2], "top_logprobs")->n == 0);
	json_free(j);
	j = PARSED(openai_chunk(&r, "content", "a", 1, NULL, NULL, 0, NULL, &n));	/* not asked for */
	CHECK(j != NULL && json_get(choice(j), "logprobs")->type == JSON_NULL);
out:
	json_free(j);
	tokenizer_free((struct tokenizer *)r.tok);
}

TEST(completion_logprobs_are_tokens_token_logprobs_top_logprobs_and_offsets)
{
	struct openai_resp r = cmpl;
	struct openai_choice ch[2] = {
		{ .text = "a b", .len = 3, .finish = "length", .want_lp = 1,
		  .lp = { lp_ids, lp3, 2, 10 } },
		{ .text = "x", .len = 1, .finish = "stop", .want_lp = 1 },
	};
	size_t n;
	char *b;
	struct json *j;
	const struct json *cs, *l;

	r.tok = tiny_tok();
	j = PARSED(openai_reply(&r, ch, 2, 0, 7, &n));
	cs = j ? json_get(j, "choices") : NULL;
	CHECK(cs != NULL && cs->n == 2);
	if (cs == NULL || cs->n != 2)
		goto out;
	l = json_get(&cs->items[0], "logprobs");
	CHECK_EQ_STR(json_at(json_get(l, "tokens"), 1)->str, " b");
	CHECK_NEAR(json_at(json_get(l, "token_logprobs"), 1)->num, -1.5, 0);
	CHECK_NEAR(json_get(json_at(json_get(l, "top_logprobs"), 0), "\xC3\xA9")->num, -2, 0);
	CHECK_EQ_INT(json_at(json_get(l, "text_offset"), 0)->i, 10);
	CHECK_EQ_INT(json_at(json_get(l, "text_offset"), 1)->i, 11);
	CHECK_EQ_INT(json_get(&cs->items[1], "index")->i, 1);
	CHECK_EQ_STR(json_get_str(&cs->items[1], "finish_reason"), "stop");
	CHECK(json_get(json_get(&cs->items[1], "logprobs"), "tokens")->n == 0);
	CHECK_EQ_INT(json_get(json_get(j, "usage"), "completion_tokens")->i, 7);
out:
	json_free(j);
	tokenizer_free((struct tokenizer *)r.tok);
}

TEST(a_streamed_tool_call_is_its_head_then_its_arguments)
{
	struct chat_call c = { "get_weather", "{\"city\": \"Paris\"}" };
	struct openai_resp r = chat;
	size_t n;
	char *b;
	struct json *j;
	const struct json *tc, *f;

	j = PARSED(openai_chunk_call(&chat, &c, 1, 1, &n));
	tc = j ? json_at(json_get(json_get(choice(j), "delta"), "tool_calls"), 0) : NULL;
	f = tc ? json_get(tc, "function") : NULL;
	CHECK(f != NULL);
	if (f == NULL)
		return;
	CHECK_EQ_INT(json_get(tc, "index")->i, 1);
	CHECK_EQ_STR(json_get_str(tc, "id"), "call_7_1");
	CHECK_EQ_STR(json_get_str(tc, "type"), "function");
	CHECK_EQ_STR(json_get_str(f, "name"), "get_weather");
	CHECK_EQ_STR(json_get_str(f, "arguments"), "");
	json_free(j);
	r.index = 3;
	j = PARSED(openai_chunk_call(&r, &c, 1, 0, &n));
	tc = j ? json_at(json_get(json_get(choice(j), "delta"), "tool_calls"), 0) : NULL;
	CHECK(tc != NULL && json_get(tc, "id") == NULL && json_get(tc, "type") == NULL);
	CHECK(tc != NULL && json_get(json_get(tc, "function"), "name") == NULL);
	CHECK(tc != NULL && strcmp(json_get_str(json_get(tc, "function"), "arguments"),
	    c.arguments) == 0);
	CHECK(j != NULL && json_get(choice(j), "index")->i == 3);
	json_free(j);
}

/* openai_request on the JSON text q: its return, and err. */
static int
req(const char *q, int is_chat, struct openai_req *r, char *err)
{
	struct json *j = json_parse(q, strlen(q), err);
	int rc = j ? openai_request(j, is_chat, r, err) : -2;

	json_free(j);
	return rc;
}

/* q is refused for chat (or completions), with message want */
#define REFUSED(q, chat, want) do { \
	struct openai_req r_; \
	CHECK_EQ_INT(req(q, chat, &r_, err), -1); \
	CHECK_EQ_STR(err, want); \
	openai_request_free(&r_); \
} while (0)

TEST(a_request_field_of_the_wrong_type_or_range_is_refused_by_name)
{
	char err[UTIL_ERRLEN];

	REFUSED("{\"temperature\": \"hot\"}", 1, "'temperature': not a number");
	REFUSED("{\"temperature\": 2.5}", 1, "'temperature': 2.5: out of range 0..2");
	REFUSED("{\"top_p\": 0}", 1, "'top_p': 0: out of range (0, 1]");
	REFUSED("{\"top_p\": true}", 0, "'top_p': not a number");
	REFUSED("{\"presence_penalty\": -3}", 1, "'presence_penalty': -3: out of range -2..2");
	REFUSED("{\"frequency_penalty\": [1]}", 1, "'frequency_penalty': not a number");
	REFUSED("{\"max_tokens\": 0}", 1, "'max_tokens': 0: out of range 1..2147483647");
	REFUSED("{\"max_completion_tokens\": 1.5}", 1, "'max_completion_tokens': not an integer");
	REFUSED("{\"n\": 0}", 1, "'n': 0: out of range 1..128");
	REFUSED("{\"n\": \"2\"}", 0, "'n': not an integer");
	REFUSED("{\"seed\": 1e3}", 1, "'seed': not an integer");
	REFUSED("{\"top_k\": -3}", 0, "'top_k': -3: out of range 0..1073741824");
	REFUSED("{\"stop\": 3}", 1, "'stop': a string or up to 4 strings");
	REFUSED("{\"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", 1, "'stop': a string or up to 4 strings");
	REFUSED("{\"stop\": \"\"}", 1, "'stop': not a list of non-empty strings");
	REFUSED("{\"stop\": [\"a\", 1]}", 0, "'stop': not a list of non-empty strings");
	REFUSED("{\"stream\": \"yes\"}", 1, "'stream': not a boolean");
	REFUSED("{\"return_token_ids\": 1}", 0, "'return_token_ids': not a boolean");
	REFUSED("{\"stream_options\": {\"include_usage\": true}}", 1,
	    "'stream_options': only with 'stream': true");
	REFUSED("{\"stream\": true, \"stream_options\": 1}", 1, "'stream_options': not an object");
	REFUSED("{\"stream\": true, \"stream_options\": {\"include_usage\": 1}}", 1,
	    "'stream_options.include_usage': not a boolean");
	REFUSED("{\"logprobs\": 1}", 1, "'logprobs': not a boolean");
	REFUSED("{\"logprobs\": true, \"top_logprobs\": 21}", 1, "'top_logprobs': 21: out of range 0..20");
	REFUSED("{\"top_logprobs\": 2}", 1, "'top_logprobs': needs 'logprobs': true");
	REFUSED("{\"logprobs\": true}", 0, "'logprobs': not an integer");
	REFUSED("{\"logprobs\": 21}", 0, "'logprobs': 21: out of range 0..20");
	REFUSED("{\"ignore_eos\": 3}", 0, "'ignore_eos': not a boolean");
	REFUSED("{\"echo\": true}", 0, "'echo': not supported");
	REFUSED("{\"best_of\": 2}", 0, "'best_of': 2: out of range 1..1");
	REFUSED("{\"logit_bias\": {\"5\": 10}}", 1, "'logit_bias': not supported");
	REFUSED("{\"parallel_tool_calls\": 0}", 1, "'parallel_tool_calls': not a boolean");
	REFUSED("{\"tools\": {}}", 1, "'tools': not an array");
	REFUSED("{\"tools\": [{\"type\": \"function\"}]}", 1,
	    "'tools[0]': not {\"type\": \"function\", \"function\": {\"name\": ...}}");
	REFUSED("{\"tool_choice\": \"any\"}", 1,
	    "'tool_choice': 'any': not auto, none, required or a function");
	REFUSED("{\"tool_choice\": \"required\"}", 1, "'tool_choice': 'required' without 'tools'");
	REFUSED("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], "
	    "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}}", 1,
	    "'tool_choice': not auto, none, required or {\"type\": \"function\", \"function\": "
	    "{\"name\": NAME}} of a tool given");
}

TEST(a_request_takes_openais_defaults_and_ignores_fields_it_does_not_know)
{
	char err[UTIL_ERRLEN];
	struct openai_req r;

	CHECK_EQ_INT(req("{\"model\": \"m\", \"user\": \"u\", \"metadata\": {}, \"nonsense\": [1]}", 1,
	    &r, err), 0);
	CHECK(r.n == 1 && r.max_tokens == 0 && !r.stream && !r.logprobs && r.parallel_tool_calls);
	CHECK(r.sp.temp == 1 && r.sp.top_p == 1 && r.sp.penalty_last_n == -1);
	CHECK(r.tool_choice == OPENAI_TOOLS_AUTO && r.n_tools == 0);
	openai_request_free(&r);
	CHECK_EQ_INT(req("{\"temperature\": null, \"max_tokens\": 5, \"max_completion_tokens\": 7, "
	    "\"n\": 3, \"seed\": -1, \"stop\": [\"x\", \"yy\"], \"logprobs\": true, "
	    "\"top_logprobs\": 4, \"stream\": true, \"stream_options\": {\"include_usage\": true}}",
	    1, &r, err), 0);
	CHECK(r.max_tokens == 7 && r.n == 3 && r.sp.seed == UINT64_MAX && r.n_stop == 2);
	CHECK(r.n_stop == 2 && strcmp(r.stop[1], "yy") == 0);
	CHECK(r.logprobs && r.top_logprobs == 4 && r.stream && r.include_usage);
	openai_request_free(&r);
	CHECK_EQ_INT(req("{\"logprobs\": 0, \"best_of\": 1}", 0, &r, err), 0);	/* the token's alone */
	CHECK(r.logprobs == 1 && r.top_logprobs == 0);
	openai_request_free(&r);
}

TEST(tool_choice_is_auto_none_required_or_a_named_tool)
{
	static const char tools[] = "\"tools\": [{\"type\": \"function\", \"function\": "
	    "{\"name\": \"f\"}}, {\"type\": \"function\", \"function\": {\"name\": \"g\"}}]";
	char err[UTIL_ERRLEN], q[512];
	struct openai_req r;

	snprintf(q, sizeof q, "{%s}", tools);
	CHECK(req(q, 1, &r, err) == 0 && r.tool_choice == OPENAI_TOOLS_AUTO && r.n_tools == 2);
	openai_request_free(&r);
	snprintf(q, sizeof q, "{%s, \"tool_choice\": \"none\"}", tools);
	CHECK(req(q, 1, &r, err) == 0 && r.tool_choice == OPENAI_TOOLS_NONE && r.n_tools == 0);
	openai_request_free(&r);
	snprintf(q, sizeof q, "{%s, \"tool_choice\": \"required\", \"parallel_tool_calls\": false}",
	    tools);
	CHECK(req(q, 1, &r, err) == 0 && r.tool_choice == OPENAI_TOOLS_REQUIRED &&
	    !r.parallel_tool_calls);
	openai_request_free(&r);
	snprintf(q, sizeof q, "{%s, \"tool_choice\": {\"type\": \"function\", \"function\": "
	    "{\"name\": \"g\"}}}", tools);
	CHECK(req(q, 1, &r, err) == 0 && r.tool_choice == OPENAI_TOOLS_NAMED &&
	    r.tool_name != NULL && strcmp(r.tool_name, "g") == 0);
	openai_request_free(&r);
}

TEST(errors_and_the_model_list_are_openais_bodies_byte_for_byte)
{
	size_t n;
	char *b = openai_error(503, "busy \"now\"", &n);

	CHECK_EQ_STR(b, "{\"error\": {\"message\": \"busy \\\"now\\\"\", \"type\": \"server_error\", "
	    "\"code\": 503}}\n");
	CHECK_EQ_INT(n, b ? strlen(b) : 0);
	free(b);
	b = openai_error(404, "x", &n);
	CHECK(b != NULL && strstr(b, "\"not_found_error\"") != NULL);
	free(b);
	b = openai_error_code("no key", "invalid_request_error", "invalid_api_key", &n);
	CHECK_EQ_STR(b, "{\"error\": {\"message\": \"no key\", \"type\": \"invalid_request_error\", "
	    "\"param\": null, \"code\": \"invalid_api_key\"}}\n");
	free(b);
	b = openai_models((const char *[]){ "a", "b" }, 2, &n);
	CHECK_EQ_STR(b, "{\"object\": \"list\", \"data\": [{\"id\": \"a\", \"object\": \"model\", "
	    "\"created\": 0, \"owned_by\": \"memra\"}, {\"id\": \"b\", \"object\": \"model\", "
	    "\"created\": 0, \"owned_by\": \"memra\"}]}\n");
	free(b);
}

int
main(void)
{
	RUN(a_chat_chunk_carries_its_delta_under_the_key_and_null_until_the_end);
	RUN(a_completion_chunk_is_text_and_a_tokenless_one_its_ids);
	RUN(the_usage_chunk_has_no_choices_and_the_counts);
	RUN(a_chat_reply_splits_reasoning_and_tool_calls_from_the_content);
	RUN(a_plain_reply_is_the_text_as_generated);
	RUN(return_token_ids_lists_a_replys_ids_after_its_text_or_message_and_a_chunks_after_its_delta);
	RUN(chat_logprobs_are_openais_content_list_with_bytes_and_top_logprobs);
	RUN(completion_logprobs_are_tokens_token_logprobs_top_logprobs_and_offsets);
	RUN(a_streamed_tool_call_is_its_head_then_its_arguments);
	RUN(a_request_field_of_the_wrong_type_or_range_is_refused_by_name);
	RUN(a_request_takes_openais_defaults_and_ignores_fields_it_does_not_know);
	RUN(tool_choice_is_auto_none_required_or_a_named_tool);
	RUN(errors_and_the_model_list_are_openais_bodies_byte_for_byte);
	return test_summary();
}
