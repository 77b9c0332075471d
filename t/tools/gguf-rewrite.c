/*
 * gguf-rewrite [-t] IN OUT: read IN with the gguf reader and write it back
 * with the writer (every kv copied, every tensor in order, in 1 MiB chunks),
 * for the byte-identical round-trip tests.  OUT "-" is stdout.  -t rebuilds
 * every kv through the typed getters and adders instead of copying it.
 */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "util.h"

/* Kv i through the typed API: get it, add it back. */
/* An array through gguf_arr_str / gguf_arr_get. */
static int
typed_arr(struct gguf *r, struct gguf_writer *w, int64_t i)
{
	uint64_t j, n = gguf_arr_n(r, i);
	int et = gguf_arr_type(r, i), rc;
	const char **s = calloc(n + 1, sizeof *s);
	size_t *len = calloc(n + 1, sizeof *len);
	uint8_t *raw = calloc(n + 1, 8);

	if (s == NULL || len == NULL || raw == NULL)
		die(1, "out of memory");
	for (j = 0; j < n; j++) {
		if (et == GGUF_TYPE_STRING ? (s[j] = gguf_arr_str(r, i, j, &len[j])) == NULL :
		    gguf_arr_get(r, i, j, raw + j * 8) != 0)
			return -2;
	}
	if (et == GGUF_TYPE_STRING)
		rc = gguf_writer_add_arr_str(w, gguf_kv_key(r, i), s, len, n);
	else {
		static const int size[GGUF_TYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
		for (j = 0; j < n; j++)	/* pack the 8-byte slots to the element size */
			memmove(raw + j * size[et], raw + j * 8, size[et]);
		rc = gguf_writer_add_arr(w, gguf_kv_key(r, i), et, raw, n);
	}
	free(s);
	free(len);
	free(raw);
	return rc;
}

static int
typed_kv(struct gguf *r, struct gguf_writer *w, int64_t i)
{
	const char *k = gguf_kv_key(r, i), *s;
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
		uint64_t u64; int64_t i64; float f32; double f64; int b; } v;
	size_t len;

	switch (gguf_kv_type(r, i)) {
	case GGUF_TYPE_UINT8: return gguf_get_u8(r, i, &v.u8) ? -2 : gguf_writer_add_u8(w, k, v.u8);
	case GGUF_TYPE_INT8: return gguf_get_i8(r, i, &v.i8) ? -2 : gguf_writer_add_i8(w, k, v.i8);
	case GGUF_TYPE_UINT16: return gguf_get_u16(r, i, &v.u16) ? -2 : gguf_writer_add_u16(w, k, v.u16);
	case GGUF_TYPE_INT16: return gguf_get_i16(r, i, &v.i16) ? -2 : gguf_writer_add_i16(w, k, v.i16);
	case GGUF_TYPE_UINT32: return gguf_get_u32(r, i, &v.u32) ? -2 : gguf_writer_add_u32(w, k, v.u32);
	case GGUF_TYPE_INT32: return gguf_get_i32(r, i, &v.i32) ? -2 : gguf_writer_add_i32(w, k, v.i32);
	case GGUF_TYPE_UINT64: return gguf_get_u64(r, i, &v.u64) ? -2 : gguf_writer_add_u64(w, k, v.u64);
	case GGUF_TYPE_INT64: return gguf_get_i64(r, i, &v.i64) ? -2 : gguf_writer_add_i64(w, k, v.i64);
	case GGUF_TYPE_FLOAT32: return gguf_get_f32(r, i, &v.f32) ? -2 : gguf_writer_add_f32(w, k, v.f32);
	case GGUF_TYPE_FLOAT64: return gguf_get_f64(r, i, &v.f64) ? -2 : gguf_writer_add_f64(w, k, v.f64);
	case GGUF_TYPE_BOOL: return gguf_get_bool(r, i, &v.b) ? -2 : gguf_writer_add_bool(w, k, v.b);
	case GGUF_TYPE_STRING:
		return (s = gguf_get_str(r, i, &len)) == NULL ? -2 : gguf_writer_add_str(w, k, s, len);
	}
	return typed_arr(r, w, i);
}

static int
copy(struct gguf *r, struct gguf_writer *w, int typed)
{
	static uint8_t buf[1 << 20];
	int64_t i;
	int rc;

	for (i = 0; i < gguf_n_kv(r); i++) {
		if ((rc = typed ? typed_kv(r, w, i) : gguf_writer_copy_kv(w, r, i)) == -2)
			warnmsg("%s", gguf_errmsg(r));
		if (rc != 0)
			return rc;
	}
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

	int typed = argc > 1 && strcmp(argv[1], "-t") == 0;

	prog = "gguf-rewrite";
	argc -= typed;
	argv += typed;
	if (argc != 3)
		die(2, "usage: gguf-rewrite [-t] in.gguf out.gguf");
	if ((r = gguf_open(argv[1], err)) == NULL)
		die(1, "%s", err);
	if ((of = util_ofile_open(argv[2], err)) == NULL)
		die(1, "%s", err);
	w = gguf_writer_new(of->fp);
	if ((rc = copy(r, w, typed)) == -1)
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
