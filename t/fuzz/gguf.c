/*
 * libFuzzer target: the GGUF reader must accept or reject any bytes without
 * reading out of bounds, and whatever it accepts must survive a rewrite:
 * read -> write -> read gives the same kvs and tensors, and writing that
 * again gives the same bytes.  The stream reader must agree with it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "util.h"

/* Touch every value through the public getters. */
static void
walk(struct gguf *g)
{
	uint8_t tmp[8];
	size_t len;
	int64_t i;
	uint64_t j;

	for (i = 0; i < gguf_n_kv(g); i++) {
		(void)gguf_kv_key(g, i);
		(void)gguf_kv_data(g, i);
		(void)gguf_get_str(g, i, &len);
		(void)gguf_get_int(g, i, (int64_t *)tmp);
		for (j = 0; j < gguf_arr_n(g, i) && j < 64; j++) {
			if (gguf_arr_type(g, i) == GGUF_TYPE_STRING)
				(void)gguf_arr_str(g, i, j, &len);
			else
				(void)gguf_arr_get(g, i, j, tmp);
		}
	}
	for (i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		const uint8_t *d = gguf_tensor_data(g, i);
		volatile uint8_t sink = 0;
		if (t->nbytes > 0)
			sink ^= d[0] ^ d[t->nbytes - 1];
		(void)sink;
	}
}

static char *
rewrite(struct gguf *g, size_t *len)
{
	char *mem = NULL;
	FILE *fp = open_memstream(&mem, len);
	struct gguf_writer *w;
	int64_t i;
	int rc = 0;

	if (fp == NULL)
		abort();
	w = gguf_writer_new(fp);
	for (i = 0; i < gguf_n_kv(g); i++)
		rc |= gguf_writer_copy_kv(w, g, i);
	for (i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		rc |= gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
	}
	rc |= gguf_writer_write_header(w);
	for (i = 0; i < gguf_n_tensors(g); i++)
		rc |= gguf_writer_write(w, gguf_tensor_data(g, i), gguf_tensor(g, i)->nbytes);
	rc |= gguf_writer_finish(w);
	if (rc != 0) {
		fprintf(stderr, "rewrite of an accepted file failed: %s\n", gguf_writer_errmsg(w));
		abort();
	}
	gguf_writer_free(w);
	fclose(fp);
	return mem;
}

/*
 * The stream reader must agree with the memory reader: it accepts whatever
 * memory accepts, with the same tables and the same tensor bytes, and it
 * rejects only what memory rejects (memory also sees the file's end).
 */
static void
stream_agrees(const uint8_t *data, size_t size, struct gguf *m)
{
	char err[UTIL_ERRLEN];
	FILE *fp = fmemopen((void *)data, size, "rb");
	struct gguf *s;
	uint8_t *buf;
	int64_t i;

	if (fp == NULL)
		return;	/* fmemopen refuses size 0 */
	s = gguf_open_stream(fp, "stream", err);
	if (s == NULL && m != NULL)
		abort();
	if (s != NULL && m != NULL) {
		if (gguf_n_kv(s) != gguf_n_kv(m) || gguf_n_tensors(s) != gguf_n_tensors(m) ||
		    gguf_data_offset(s) != gguf_data_offset(m) || gguf_data_size(s) != gguf_data_size(m))
			abort();
		for (i = 0; i < gguf_n_tensors(m); i++) {
			const struct gguf_tensor *t = gguf_tensor(m, i);
			if ((buf = malloc(t->nbytes + 1)) == NULL)
				abort();
			if (gguf_read_data(s, t->offset, buf, t->nbytes) != 0 ||
			    memcmp(buf, gguf_tensor_data(m, i), t->nbytes) != 0)
				abort();
			free(buf);
		}
	}
	gguf_close(s);
	fclose(fp);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[UTIL_ERRLEN];
	struct gguf *g = gguf_open_mem(data, size, "fuzz", err), *g2;
	char *a, *b;
	size_t na, nb;

	stream_agrees(data, size, g);
	if (g == NULL)
		return 0;
	walk(g);
	a = rewrite(g, &na);
	if ((g2 = gguf_open_mem(a, na, "rewrite", err)) == NULL) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	if (gguf_n_kv(g2) != gguf_n_kv(g) || gguf_n_tensors(g2) != gguf_n_tensors(g))
		abort();
	b = rewrite(g2, &nb);
	if (na != nb || memcmp(a, b, na) != 0)
		abort();
	free(b);
	gguf_close(g2);
	free(a);
	gguf_close(g);
	return 0;
}
