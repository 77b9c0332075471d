/*
 * Corpus replayer: feeds every file named (directories are walked one level)
 * to LLVMFuzzerTestOneInput, so the kept crashers and seeds run under the
 * sanitizers with any compiler.  Exit 0 when every input returns.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
one(const char *path)
{
	char err[UTIL_ERRLEN];
	size_t n;
	char *buf = util_read_file(path, &n, err);

	if (buf == NULL) {
		fprintf(stderr, "replay: %s\n", err);
		return 1;
	}
	LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
	free(buf);
	return 0;
}

int
main(int argc, char *argv[])
{
	int i, rc = 0, n = 0;

	for (i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;
		char path[4096];

		if (stat(argv[i], &st) != 0)
			continue;
		if (!S_ISDIR(st.st_mode)) {
			rc |= one(argv[i]);
			n++;
			continue;
		}
		if ((d = opendir(argv[i])) == NULL)
			continue;
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				rc |= one(path);
				n++;
			}
		}
		closedir(d);
	}
	printf("replayed %d inputs\n", n);
	return rc;
}
