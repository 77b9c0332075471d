/*
 * request: a generation request's checks and its token-id prompt, without
 * a model (the chat template's prompts are t/serve.bats's).
 */
#include <stdlib.h>

#include "json.h"
#include "request.h"
#include "test.h"
#include "util.h"

/* body parsed into r (chat or completions, n at most 4, 100 tokens); its rc. */
static int
parse(const char *body, int chat, struct request *r, struct json **j, char *err)
{
	*r = (struct request){ 0 };
	*j = json_parse(body, strlen(body), err);
	CHECK(*j != NULL);
	return *j != NULL ? request_parse(r, *j, chat, 100, 4, err) : -1;
}

TEST(parse_checks_n_against_the_sessions_and_sampling_against_the_vocabulary)
{
	struct request r;
	struct json *j;
	char err[UTIL_ERRLEN];

	CHECK_EQ_INT(parse("{\"prompt\": \"x\", \"n\": 5}", 0, &r, &j, err), -1);
	CHECK_EQ_STR(err, "'n': 5: more than the 4 sessions this server runs at once");
	request_free(&r), json_free(j);
	CHECK_EQ_INT(parse("{\"prompt\": \"x\", \"n\": 4, \"temperature\": 0}", 0, &r, &j, err), 0);
	CHECK_EQ_INT(r.q.n, 4);
	CHECK_EQ_INT(r.chat, 0);
	request_free(&r), json_free(j);
}

TEST(a_response_format_needs_a_tokenizer_and_no_forced_call)
{
	struct request r;
	struct json *j;
	char err[UTIL_ERRLEN];
	const struct tokenizer *tok = (const struct tokenizer *)&r;	/* any non-NULL */

	CHECK_EQ_INT(parse("{\"prompt\": \"x\"}", 0, &r, &j, err), 0);
	CHECK_EQ_INT(request_format(&r, NULL, "m", err), 0);	/* text: no grammar */
	request_free(&r), json_free(j);
	CHECK_EQ_INT(parse("{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_object\"}}", 0,
	    &r, &j, err), 0);
	CHECK_EQ_INT(request_format(&r, NULL, "m", err), -1);
	CHECK_EQ_STR(err, "'response_format': model 'm' has no tokenizer");
	CHECK_EQ_INT(request_format(&r, tok, "m", err), 1);
	request_free(&r), json_free(j);
	CHECK_EQ_INT(parse("{\"prompt\": \"x\", \"ignore_eos\": true, \"response_format\": "
	    "{\"type\": \"json_object\"}}", 0, &r, &j, err), 0);
	CHECK_EQ_INT(request_format(&r, tok, "m", err), -1);
	CHECK(strncmp(err, "'ignore_eos': not with 'response_format'", 40) == 0);
	request_free(&r), json_free(j);
}

#define TOOL(name, extra) "{\"type\": \"function\", \"function\": {\"name\": \"" name "\"" extra "}}"
#define MSGS "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]"

/* request_format of chat body: its rc (err set). */
static int
format_of(const char *body, char *err)
{
	const struct tokenizer *tok = (const struct tokenizer *)&err;	/* any non-NULL */
	struct request r;
	struct json *j;
	int rc = parse(body, 1, &r, &j, err);

	if (rc == 0)
		rc = request_format(&r, tok, "m", err);
	request_free(&r), json_free(j);
	return rc;
}

TEST(tools_need_a_grammar_when_a_call_is_forced_or_a_tool_is_strict)
{
	char err[UTIL_ERRLEN];

	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", "") "]}", err), 0);
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", ", \"strict\": false") "]}",
	    err), 0);
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", ", \"strict\": true") "]}",
	    err), 1);
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", ", \"strict\": true") "], "
	    "\"tool_choice\": \"none\"}", err), 0);
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", "") "], \"tool_choice\": "
	    "\"required\"}", err), 1);
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", "") "], \"tool_choice\": "
	    "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}}", err), 1);
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", ", \"strict\": true") "], "
	    "\"response_format\": {\"type\": \"json_object\"}}", err), -1);
	CHECK_EQ_STR(err, "'response_format': not with strict tools");
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", "") "], \"tool_choice\": "
	    "\"required\", \"ignore_eos\": true}", err), -1);
	CHECK_EQ_STR(err, "'ignore_eos': not with 'tools' (the call ends the reply)");
}

TEST(tool_names_are_openai_names_given_once_strict_a_boolean)
{
	char err[UTIL_ERRLEN];

	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("a b", "") "]}", err), -1);
	CHECK_EQ_STR(err, "'tools[0].function.name': not a name of 1 to 64 letters, digits, '_' "
	    "or '-'");
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", "") ", " TOOL("g", "") ", "
	    TOOL("f", "") "]}", err), -1);
	CHECK_EQ_STR(err, "'tools[2].function.name': 'f' is tools[0]'s too");
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", ", \"strict\": 1") "]}", err),
	    -1);
	CHECK_EQ_STR(err, "'tools[0].function.strict': not a boolean");
	CHECK_EQ_INT(format_of("{" MSGS ", \"tools\": [" TOOL("f", ", \"parameters\": []") "]}",
	    err), -1);
	CHECK_EQ_STR(err, "'tools[0].function.parameters': not a JSON Schema (an object)");
}

TEST(a_completions_prompt_of_ids_is_used_as_it_is)
{
	struct request r;
	struct json *j;
	char err[UTIL_ERRLEN];

	CHECK_EQ_INT(parse("{\"prompt\": [3, 1, 4]}", 0, &r, &j, err), 0);
	CHECK_EQ_INT(request_prompt(&r, j, NULL, 100, "m", err), 0);
	CHECK(r.n_ids == 3 && r.ids[0] == 3 && r.ids[2] == 4);
	CHECK(r.forced == NULL && r.think == 0);
	request_free(&r), json_free(j);
	CHECK_EQ_INT(parse("{\"prompt\": [3, 100]}", 0, &r, &j, err), 0);
	CHECK_EQ_INT(request_prompt(&r, j, NULL, 100, "m", err), -1);
	request_free(&r), json_free(j);
	CHECK_EQ_INT(parse("{\"prompt\": 7}", 0, &r, &j, err), 0);
	CHECK_EQ_INT(request_prompt(&r, j, NULL, 100, "m", err), -1);
	CHECK_EQ_STR(err, "'prompt': a string or an array of token ids is required");
	request_free(&r), json_free(j);
}

int
main(void)
{
	RUN(parse_checks_n_against_the_sessions_and_sampling_against_the_vocabulary);
	RUN(a_response_format_needs_a_tokenizer_and_no_forced_call);
	RUN(tools_need_a_grammar_when_a_call_is_forced_or_a_tool_is_strict);
	RUN(tool_names_are_openai_names_given_once_strict_a_boolean);
	RUN(a_completions_prompt_of_ids_is_used_as_it_is);
	return test_summary();
}
