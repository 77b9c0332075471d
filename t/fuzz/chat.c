/*
 * libFuzzer target: a chat template from the input, rendered with a fixed
 * conversation (system prompt, tools, tool calls, tool results, reasoning),
 * and the same bytes through the reply parser.  Nothing may crash, hang or
 * grow without bound: the limits are small here.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "json.h"
#include "util.h"

static const char ctx_text[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nhm\\n</think>\\n\\nok\", \"reasoning_content\": \"r\","
    "  \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
    "   \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"content\": \"sunny\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"and \\u00e9?\"}, {\"type\": \"image\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\":"
    "   {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}],"
    " \"bos_token\": \"<bos>\", \"enable_thinking\": false, \"add_generation_prompt\": true}";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct json *ctx;
	struct chat_opts o = { .add_generation_prompt = -1, .max_output = 1 << 20, .max_steps = 20000 };
	char err[UTIL_ERRLEN];
	struct chat *c;
	struct chat_reply r;

	if (ctx == NULL && (ctx = json_parse(ctx_text, sizeof ctx_text - 1, err)) == NULL)
		abort();
	if ((c = chat_new((const char *)data, size, err)) != NULL) {
		char *out = chat_render(c, ctx, &o, NULL, err);
		free(out);
		chat_free(c);
	}
	if (chat_parse_reply((const char *)data, size, size % 2, &r, err) == 0)
		chat_reply_free(&r);
	return 0;
}
