/* lib/chat: the API around the renderer, its limits, and the reply parser. */
#include <stdlib.h>

#include "chat.h"
#include "json.h"
#include "test.h"
#include "util.h"

/* render template t with context JSON c; NULL on failure (reason in err) */
static char *
R(const char *t, const char *c, const struct chat_opts *o, char *err)
{
	struct json *j = c ? json_parse(c, strlen(c), err) : NULL;
	struct chat *ch = c == NULL || j != NULL ? chat_new(t, strlen(t), err) : NULL;
	char *out = NULL;

	if (ch != NULL)
		out = chat_render(ch, j, o, NULL, err);
	chat_free(ch);
	json_free(j);
	return out;
}

TEST(renders_with_transformers_defaults)
{
	char err[UTIL_ERRLEN], *s;

	s = R("{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ x }}",
	    "{\"x\": [1, 2.5, null, true, \"\\u00e9\"]}", NULL, err);
	CHECK_EQ_STR(s, "True True False [1, 2.5, None, True, '\xc3\xa9']");
	free(s);
	s = R("{{ 1 }}", NULL, NULL, err);	/* no context at all */
	CHECK_EQ_STR(s, "1");
	free(s);
	chat_free(NULL);
}

TEST(generation_prompt_option_overrides_the_context)
{
	struct chat_opts on = { .add_generation_prompt = 1 }, off = { .add_generation_prompt = 0 },
	    ctx = { .add_generation_prompt = -1 };
	char err[UTIL_ERRLEN], *a, *b, *c;
	const char *t = "{% if add_generation_prompt %}gen{% endif %}";

	a = R(t, "{\"add_generation_prompt\": false}", &on, err);
	b = R(t, "{\"add_generation_prompt\": true}", &off, err);
	c = R(t, "{\"add_generation_prompt\": true}", &ctx, err);
	CHECK_EQ_STR(a, "gen");
	CHECK_EQ_STR(b, "");
	CHECK_EQ_STR(c, "gen");
	free(a);
	free(b);
	free(c);
}

TEST(errors_name_the_template_line)
{
	char err[UTIL_ERRLEN];

	CHECK(R("a\nb\n{{ x | nosuch }}", "{}", NULL, err) == NULL);
	CHECK_EQ_STR(err, "template line 3: unsupported filter 'nosuch'");
	CHECK(R("{% if true %}\n{% for x in y %}\n", "{}", NULL, err) == NULL);
	CHECK_EQ_STR(err, "template line 2: unexpected end of template, expected 'endfor'");
	CHECK(R("\n\n\n{{ raise_exception('stop here') }}", "{}", NULL, err) == NULL);
	CHECK_EQ_STR(err, "template line 4: raise_exception: stop here");
	CHECK(R("{{ 'a' + 1 }}", "{}", NULL, err) == NULL);
	CHECK_EQ_STR(err, "template line 1: unsupported operand type(s) for +: 'str' and 'int'");
	CHECK(R("{{ x }}", "[1]", NULL, err) == NULL);
	CHECK_EQ_STR(err, "template context: not a JSON object");
}

TEST(limits_stop_hostile_templates)
{
	struct chat_opts small = { .add_generation_prompt = -1, .max_output = 100, .max_steps = 1000 };
	char err[UTIL_ERRLEN];

	CHECK(R("{% for i in range(200) %}xx{% endfor %}", "{}", &small, err) == NULL);
	CHECK(strstr(err, "output too large") != NULL);
	CHECK(R("{% for i in range(2000) %}{% endfor %}", "{}", &small, err) == NULL);
	CHECK(strstr(err, "runs too long") != NULL);
	CHECK(R("{{ range(1000000) }}", "{}", NULL, err) == NULL);
	CHECK(strstr(err, "range too big") != NULL);
	CHECK(R("{{ 'x' * 100000000000 }}", "{}", NULL, err) == NULL);
	CHECK(R("{{ 9223372036854775807 + 1 }}", "{}", NULL, err) == NULL);
	CHECK(strstr(err, "integer overflow") != NULL);
	char deep[4096];	/* {{ ((((...1...)))) }} */
	size_t n = 3;
	memcpy(deep, "{{ ", 3);
	for (int i = 0; i < 1000; i++)
		deep[n++] = '(';
	deep[n++] = '1';
	for (int i = 0; i < 1000; i++)
		deep[n++] = ')';
	memcpy(deep + n, " }}", 4);
	CHECK(R(deep, "{}", NULL, err) == NULL);
	CHECK(strstr(err, "nesting too deep") != NULL);
}

TEST(parses_qwen35_tool_calls_and_thinking)
{
	const char *t = "I should look it up.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n"
	    "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n"
	    "<tool_call>\n<function=ping>\n</function>\n</tool_call>";
	struct chat_reply r;
	char err[UTIL_ERRLEN];

	CHECK(chat_parse_reply(t, strlen(t), 1, &r, err) == 0);
	CHECK_EQ_STR(r.reasoning, "I should look it up.");
	CHECK_EQ_STR(r.content, "Let me check.");
	CHECK_EQ_INT(r.ncalls, 2);
	CHECK_EQ_STR(r.calls[0].name, "get_weather");
	CHECK_EQ_STR(r.calls[0].arguments, "{\"city\":\"Paris\",\"days\":2}");
	CHECK_EQ_STR(r.calls[1].name, "ping");
	CHECK_EQ_STR(r.calls[1].arguments, "{}");
	chat_reply_free(&r);
}

TEST(parses_json_tool_calls_and_plain_replies)
{
	const char *t = "<think>\nhmm\n</think>\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x y\", \"n\": [1, 2]}}\n</tool_call>";
	struct chat_reply r;
	char err[UTIL_ERRLEN];

	CHECK(chat_parse_reply(t, strlen(t), 0, &r, err) == 0);
	CHECK_EQ_STR(r.reasoning, "hmm");
	CHECK_EQ_STR(r.content, "");
	CHECK_EQ_INT(r.ncalls, 1);
	CHECK_EQ_STR(r.calls[0].name, "search");
	CHECK_EQ_STR(r.calls[0].arguments, "{\"q\":\"x y\",\"n\":[1,2]}");
	chat_reply_free(&r);

	CHECK(chat_parse_reply("  just text \n", 13, 0, &r, err) == 0);
	CHECK(r.reasoning == NULL);
	CHECK_EQ_STR(r.content, "just text");
	CHECK_EQ_INT(r.ncalls, 0);
	chat_reply_free(&r);

	CHECK(chat_parse_reply("still thinking", 14, 1, &r, err) == 0);	/* cut inside <think> */
	CHECK_EQ_STR(r.reasoning, "still thinking");
	CHECK_EQ_STR(r.content, "");
	chat_reply_free(&r);
}

/* A typing callback: city is a string, the rest as it parses. */
static char *
city_str(void *arg, const char *fn, const char *key, size_t kn, const char *v, size_t vn)
{
	char *b;

	(*(int *)arg)++;
	if (strcmp(fn, "get_weather") != 0 || kn != 4 || memcmp(key, "city", 4) != 0)
		return NULL;
	if ((b = malloc(vn + 3)) != NULL)
		snprintf(b, vn + 3, "\"%.*s\"", (int)vn, v);
	return b;
}

TEST(xml_values_typed_by_a_callback)
{
	const char *t = "<tool_call>\n<function=get_weather>\n<parameter=city>\n12345\n</parameter>\n"
	    "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>";
	int calls = 0;
	struct chat_types ty = { city_str, &calls };
	struct chat_reply r;
	char err[UTIL_ERRLEN];

	CHECK(chat_parse_reply(t, strlen(t), 0, &r, err) == 0 && r.ncalls == 1);
	CHECK_EQ_STR(r.calls[0].arguments, "{\"city\":12345,\"days\":2}");
	chat_reply_free(&r);
	CHECK(chat_parse_reply_typed(t, strlen(t), 0, &ty, &r, err) == 0 && r.ncalls == 1);
	CHECK_EQ_STR(r.calls[0].arguments, "{\"city\":\"12345\",\"days\":2}");
	CHECK_EQ_INT(calls, 2);
	chat_reply_free(&r);
}

TEST(rejects_broken_tool_calls)
{
	struct chat_reply r;
	char err[UTIL_ERRLEN];

	CHECK(chat_parse_reply("<tool_call>{\"name\": 1}</tool_call>", 35, 0, &r, err) < 0);
	CHECK(chat_parse_reply("<tool_call>{\"name\": \"x\"", 23, 0, &r, err) < 0);
	CHECK(strstr(err, "</tool_call>") != NULL);
	CHECK(chat_parse_reply("<tool_call>not json</tool_call>", 31, 0, &r, err) < 0);
}

int
main(void)
{
	RUN(renders_with_transformers_defaults);
	RUN(generation_prompt_option_overrides_the_context);
	RUN(errors_name_the_template_line);
	RUN(limits_stop_hostile_templates);
	RUN(parses_qwen35_tool_calls_and_thinking);
	RUN(parses_json_tool_calls_and_plain_replies);
	RUN(xml_values_typed_by_a_callback);
	RUN(rejects_broken_tool_calls);
	return test_summary();
}
