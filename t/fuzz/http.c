/* libFuzzer target: the HTTP request parser must accept or refuse any bytes safely. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_req req;
	struct http_limits lim = { .max_header = 4096, .max_body = 1 << 16 };
	char err[UTIL_ERRLEN];
	int status;
	long n = http_parse((const char *)data, size, &lim, &req, &status, err);

	if (n > 0) {
		if ((size_t)n > size || req.body_len > (size_t)n)
			abort();
		(void)http_header(&req, "content-type");
		for (size_t i = 0; i < req.nhdr; i++)
			if (strlen(req.hname[i]) == 0)
				abort();
	} else if (n < 0 && (status < 400 || status > 505))
		abort();
	return 0;
}
