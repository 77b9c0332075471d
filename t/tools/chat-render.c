/*
 * chat-render: render a chat template with a JSON context, for the peer
 * test (t/chat.bats) and the reference script tools/chat-render.py.
 *   chat-render TEMPLATE [CONTEXT.json]   (context "-" or absent: stdin)
 * The output goes to stdout as it is; errors to stderr, exit 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include "chat.h"
#include "json.h"
#include "util.h"

int
main(int argc, char *argv[])
{
	char err[UTIL_ERRLEN];
	size_t tn, cn, on;
	char *tmpl, *ctxs, *out;
	struct json *ctx;
	struct chat *c;

	prog = base_name(argv[0]);
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s template [context.json]\n", prog);
		return 2;
	}
	if ((tmpl = util_read_file(argv[1], &tn, err)) == NULL)
		die(1, "%s", err);
	if ((ctxs = util_read_file(argc > 2 ? argv[2] : "-", &cn, err)) == NULL)
		die(1, "%s", err);
	if ((ctx = json_parse(ctxs, cn, err)) == NULL)
		die(1, "context: %s", err);
	if ((c = chat_new(tmpl, tn, err)) == NULL)
		die(1, "%s: %s", argv[1], err);
	if ((out = chat_render(c, ctx, NULL, &on, err)) == NULL)
		die(1, "%s: %s", argv[1], err);
	fwrite(out, 1, on, stdout);
	free(out);
	chat_free(c);
	json_free(ctx);
	free(ctxs);
	free(tmpl);
	return finish(0);
}
