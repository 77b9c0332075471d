/*
 * gguf-split [-c COUNT] N IN PREFIX: split IN into N parts PREFIX-00001-of-0000N.gguf
 * ... the way llama.cpp's gguf-split --split does: the first part gets
 * every kv of IN, then each part split.no (uint16, from 0), split.count
 * (uint16, N) and split.tensors.count (int32, IN's tensor count); the
 * tensors go in file order, about n/N to a part, the first parts taking
 * the remainder.  -c COUNT writes COUNT as split.tensors.count instead.
 * For the split-set loading tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "util.h"

/* Write part k of n with tensors [t0, t1) of r to name. */
static int
part(struct gguf *r, int k, int n, int64_t t0, int64_t t1, int32_t count, const char *name)
{
	char err[UTIL_ERRLEN];
	struct util_ofile *of = util_ofile_open(name, err);
	struct gguf_writer *w;
	int64_t i;
	int rc = 0;

	if (of == NULL)
		die(1, "%s", err);
	w = gguf_writer_new(of->fp);
	for (i = 0; k == 0 && i < gguf_n_kv(r) && rc == 0; i++)
		rc = gguf_writer_copy_kv(w, r, i);
	if (rc == 0)
		rc = gguf_writer_add_u16(w, "split.no", (uint16_t)k) ||
		    gguf_writer_add_u16(w, "split.count", (uint16_t)n) ||
		    gguf_writer_add_i32(w, "split.tensors.count", count);
	for (i = t0; i < t1 && rc == 0; i++) {
		const struct gguf_tensor *t = gguf_tensor(r, i);
		rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
	}
	if (rc == 0)
		rc = gguf_writer_write_header(w);
	for (i = t0; i < t1 && rc == 0; i++)
		rc = gguf_writer_write(w, gguf_tensor_data(r, i), gguf_tensor(r, i)->nbytes);
	if (rc == 0)
		rc = gguf_writer_finish(w);
	if (rc != 0) {
		warnmsg("%s: %s", name, gguf_writer_errmsg(w));
		util_ofile_abort(of);
		return -1;
	}
	gguf_writer_free(w);
	if (util_ofile_commit(of, err) != 0)
		die(1, "%s", err);
	return 0;
}

int
main(int argc, char *argv[])
{
	char err[UTIL_ERRLEN], name[4096];
	struct gguf *r;
	int64_t nt, t0 = 0;
	int32_t count = -1;
	int n;

	prog = "gguf-split";
	if (argc > 2 && strcmp(argv[1], "-c") == 0) {
		count = atoi(argv[2]);
		argc -= 2;
		argv += 2;
	}
	if (argc != 4 || (n = atoi(argv[1])) < 1 || n > 99999)
		die(2, "usage: gguf-split [-c count] N in.gguf prefix");
	if ((r = gguf_open(argv[2], err)) == NULL)
		die(1, "%s", err);
	if (gguf_tensor_data(r, 0) == NULL && gguf_n_tensors(r) > 0)
		die(1, "%s: not mapped", argv[2]);
	nt = gguf_n_tensors(r);
	if (count < 0)
		count = (int32_t)nt;
	for (int k = 0; k < n; k++) {
		int64_t t1 = t0 + nt / n + (k < nt % n);

		if ((size_t)snprintf(name, sizeof name, "%s-%05d-of-%05d.gguf", argv[3], k + 1, n)
		    >= sizeof name)
			die(2, "%s: name too long", argv[3]);
		if (part(r, k, n, t0, t1, count, name) != 0)
			return 1;
		t0 = t1;
	}
	gguf_close(r);
	return 0;
}
