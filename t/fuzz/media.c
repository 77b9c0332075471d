/*
 * libFuzzer target: a chat request's messages with image parts.  The bytes are
 * a request body; its "messages" go through media_parse (data: URIs, base64,
 * the limits) and media_put_messages, whose text must parse as JSON again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "json.h"
#include "media.h"
#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct media_limits lim = { 3, 4096, 6000 };
	char err[UTIL_ERRLEN], *b = NULL;
	size_t bl = 0;
	struct json *j = json_parse((const char *)data, size, err), *k;
	struct media md;
	FILE *fp;

	if (j == NULL)
		return 0;
	if (media_parse(json_get(j, "messages"), &lim, &md, err) == 0) {
		size_t all = 0;

		for (int i = 0; i < md.n; i++)
			all += md.img[i].n;
		if (md.n > lim.max_images || all != md.bytes || all > lim.request_bytes)
			abort();
	}
	media_free(&md);
	if ((fp = open_memstream(&b, &bl)) != NULL) {
		media_put_messages(fp, json_get(j, "messages"));
		if (fclose(fp) == 0 && json_get(j, "messages") != NULL) {
			if ((k = json_parse(b, bl, err)) == NULL)
				abort();	/* what the template gets must be JSON */
			json_free(k);
		}
		free(b);
	}
	json_free(j);
	return 0;
}
