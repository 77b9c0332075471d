/*
 * gguf-rewrite IN OUT: read IN with the gguf reader and write it back with
 * the writer (every kv copied, every tensor in order, in 1 MiB chunks), for
 * the byte-identical round-trip tests.  OUT "-" is stdout.
 */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "util.h"

static int
copy(struct gguf *r, struct gguf_writer *w)
{
	static uint8_t buf[1 << 20];
	int64_t i;

	for (i = 0; i < gguf_n_kv(r); i++)
		if (gguf_writer_copy_kv(w, r, i) != 0)
			return -1;
	for (i = 0; i < gguf_n_tensors(r); i++) {
		const struct gguf_tensor *t = gguf_tensor(r, i);
		if (gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne) != 0)
			return -1;
	}
	if (gguf_writer_write_header(w) != 0)
		return -1;
	for (i = 0; i < gguf_n_tensors(r); i++) {
		const struct gguf_tensor *t = gguf_tensor(r, i);
		uint64_t off;
		for (off = 0; off < t->nbytes; off += sizeof buf) {
			size_t n = t->nbytes - off < sizeof buf ? t->nbytes - off : sizeof buf;
			if (gguf_read_data(r, t->offset + off, buf, n) != 0) {
				warnmsg("%s", gguf_errmsg(r));
				return -2;
			}
			if (gguf_writer_write(w, buf, n) != 0)
				return -1;
		}
	}
	return gguf_writer_finish(w);
}

int
main(int argc, char *argv[])
{
	char err[UTIL_ERRLEN];
	struct util_ofile *of;
	struct gguf_writer *w;
	struct gguf *r;
	int rc;

	prog = "gguf-rewrite";
	if (argc != 3)
		die(2, "usage: gguf-rewrite in.gguf out.gguf");
	if ((r = gguf_open(argv[1], err)) == NULL)
		die(1, "%s", err);
	if ((of = util_ofile_open(argv[2], err)) == NULL)
		die(1, "%s", err);
	w = gguf_writer_new(of->fp);
	if ((rc = copy(r, w)) == -1)
		warnmsg("%s: %s", argv[2], gguf_writer_errmsg(w));
	if (rc != 0) {
		util_ofile_abort(of);
		return 1;
	}
	if (util_ofile_commit(of, err) != 0)
		die(1, "%s", err);
	gguf_writer_free(w);
	gguf_close(r);
	return 0;
}
