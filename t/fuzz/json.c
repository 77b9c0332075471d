/* libFuzzer target: the JSON parser must reject or accept any bytes safely. */
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[UTIL_ERRLEN];
	struct json *j = json_parse((const char *)data, size, err);

	if (j != NULL) {
		FILE *fp = fopen("/dev/null", "w");
		if (fp != NULL) {
			json_dump(fp, j, 1);
			fclose(fp);
		}
		json_free(j);
	}
	return 0;
}
