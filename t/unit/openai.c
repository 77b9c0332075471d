/*
 * openai: the response shapes the openai SDK reads, each parsed back as
 * JSON and checked member by member.
 */
#include <stdlib.h>

#include "chat.h"
#include "json.h"
#include "openai.h"
#include "test.h"
#include "util.h"

static const struct openai_resp chat = { 7, 1, "m\"x", 1700000000, 12, 8 };
static const struct openai_resp cmpl = { 8, 0, "m", 1700000001, 3, 0 };

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
	struct json *j = PARSED(openai_chunk(&chat, "reasoning_content", "a\nb", 3, NULL, &n));
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
	j = PARSED(openai_chunk(&chat, NULL, NULL, 0, "length", &n));
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
	struct json *j = PARSED(openai_chunk(&cmpl, NULL, "hi", 2, NULL, &n));
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
	struct json *j = PARSED(openai_reply(&chat, text, sizeof text - 1, 1, NULL, 0, 9, "stop",
	    &n));
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
	struct json *j = PARSED(openai_reply(&chat, "  x\n", 4, 0, NULL, 0, 2, "length", &n));
	const struct json *c = j ? choice(j) : NULL, *m = c ? json_get(c, "message") : NULL;

	CHECK(m != NULL && strcmp(json_get_str(m, "content"), "  x\n") == 0);
	CHECK(c != NULL && strcmp(json_get_str(c, "finish_reason"), "length") == 0);
	json_free(j);
	j = PARSED(openai_reply(&cmpl, NULL, 0, 0, (int32_t[]){ 1, 2, 3 }, 3, 3, "length", &n));
	c = j ? choice(j) : NULL;
	CHECK(c != NULL && json_get(c, "token_ids")->n == 3 && strcmp(json_get_str(c, "text"), "") == 0);
	json_free(j);
}

int
main(void)
{
	RUN(a_chat_chunk_carries_its_delta_under_the_key_and_null_until_the_end);
	RUN(a_completion_chunk_is_text_and_a_tokenless_one_its_ids);
	RUN(the_usage_chunk_has_no_choices_and_the_counts);
	RUN(a_chat_reply_splits_reasoning_and_tool_calls_from_the_content);
	RUN(a_plain_reply_is_the_text_as_generated);
	return test_summary();
}
