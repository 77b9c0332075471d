/* lib/model: opening a GGUF source, one file or a split set */
#include "model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model_impl.h"
#include "util.h"

/*
 * A split set as llama.cpp's gguf-split writes it: N files
 * PREFIX-00001-of-0000N.gguf ..., each with split.no (uint16, from 0),
 * split.count (uint16, N) and split.tensors.count (int32, the set's total);
 * the first carries all the metadata, every part carries its own tensors.
 */
#define SPLIT_NO	"split.no"
#define SPLIT_COUNT	"split.count"
#define SPLIT_TENSORS	"split.tensors.count"
#define SPLIT_MAX	99999		/* the name has five digits */

/* The integer kv key of g into *v: 1 found, 0 absent, -1 not an integer
 * (the reason in err). */
static int
split_key(struct gguf *g, const char *name, const char *key, int64_t *v, char *err)
{
	int64_t i = gguf_find_key(g, key);

	if (i < 0)
		return 0;
	if (gguf_get_int(g, i, v) != 0) {
		util_err(err, "%s: '%s': %s", name, key, gguf_errmsg(g));
		return -1;
	}
	return 1;
}

/* Part k's name into buf from path, the name of part no of n. */
static int
split_name(const char *path, int no, int n, int k, char *buf, size_t len, char *err)
{
	char tail[32];
	size_t pl = strlen(path), tl;

	tl = (size_t)snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", no + 1, n);
	if (pl <= tl || strcmp(path + pl - tl, tail) != 0)
		return util_err(err, "%s: split part %d of %d is not named PREFIX%s", path,
		    no + 1, n, tail);
	if ((size_t)snprintf(buf, len, "%.*s-%05d-of-%05d.gguf", (int)(pl - tl), path,
	    k + 1, n) >= len)
		return util_err(err, "%s: name too long", path);
	return 0;
}

/* Open part k of n at name and check its split keys. */
static struct gguf *
split_part(const char *name, int k, int n, char *err)
{
	struct gguf *g = gguf_open(name, err);
	int64_t no, cnt;
	int r;

	if (g == NULL)
		return NULL;
	if ((r = split_key(g, name, SPLIT_COUNT, &cnt, err)) < 0 ||
	    (r > 0 && (r = split_key(g, name, SPLIT_NO, &no, err)) < 0))
		goto fail;
	if (r == 0) {
		util_err(err, "%s: not a split part (no '%s' or '%s')", name, SPLIT_COUNT,
		    SPLIT_NO);
		goto fail;
	}
	if (cnt != n) {
		util_err(err, "%s: '%s' is %" PRId64 ", expected %d", name, SPLIT_COUNT, cnt, n);
		goto fail;
	}
	if (no != k) {
		util_err(err, "%s: '%s' is %" PRId64 ", expected %d", name, SPLIT_NO, no, k);
		goto fail;
	}
	return g;
fail:
	gguf_close(g);
	return NULL;
}

/* Every part of the set path (part no of n, open as g) into md->parts. */
static int
open_parts(struct model *md, const char *path, struct gguf *g, int no, int n, char *err)
{
	char name[4096];
	int64_t want, have = 0;
	int r;

	if ((md->parts = calloc((size_t)n, sizeof *md->parts)) == NULL) {
		gguf_close(g);
		return util_err(err, "%s: out of memory", path);
	}
	md->n_parts = n;
	md->parts[no] = g;
	for (int k = 0; k < n; k++) {
		if (k != no && (split_name(path, no, n, k, name, sizeof name, err) != 0 ||
		    (md->parts[k] = split_part(name, k, n, err)) == NULL))
			return -1;
		have += gguf_n_tensors(md->parts[k]);
	}
	md->gg = md->parts[0];
	split_name(path, no, n, 0, name, sizeof name, err);
	if ((r = split_key(md->gg, name, SPLIT_TENSORS, &want, err)) <= 0)
		return r < 0 ? -1 : util_err(err, "%s: no '%s'", name, SPLIT_TENSORS);
	if (want != have)
		return util_err(err, "%s: '%s' is %" PRId64 " but the %d parts hold %" PRId64
		    " tensors", name, SPLIT_TENSORS, want, n, have);
	return 0;
}

int
model_gguf_open(struct model *md, const char *path, char *err)
{
	struct gguf *g = gguf_open(path, err);
	int64_t n = 0, no = 0;
	int r;

	if (g == NULL)
		return -1;
	if ((r = split_key(g, path, SPLIT_COUNT, &n, err)) < 0)
		goto fail;
	if (r == 0 || n == 1) {		/* one file (a set of one is a plain file) */
		md->gg = g;
		return 0;
	}
	if (n < 1 || n > SPLIT_MAX) {
		util_err(err, "%s: '%s' is %" PRId64 ", not 1..%d", path, SPLIT_COUNT, n, SPLIT_MAX);
		goto fail;
	}
	if ((r = split_key(g, path, SPLIT_NO, &no, err)) <= 0) {
		if (r == 0)
			util_err(err, "%s: '%s' without '%s'", path, SPLIT_COUNT, SPLIT_NO);
		goto fail;
	}
	if (no < 0 || no >= n) {
		util_err(err, "%s: '%s' is %" PRId64 ", not 0..%" PRId64, path, SPLIT_NO, no, n - 1);
		goto fail;
	}
	return open_parts(md, path, g, (int)no, (int)n, err);
fail:
	gguf_close(g);
	return -1;
}

void
model_gguf_close(struct model *md)
{
	if (md->parts == NULL)
		gguf_close(md->gg);
	for (int k = 0; k < md->n_parts; k++)
		gguf_close(md->parts[k]);
	free(md->parts);
	md->parts = NULL;
	md->n_parts = 0;
	md->gg = NULL;
}
