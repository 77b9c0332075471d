#include <stdlib.h>

#include "gguf.h"
#include "quant.h"
#include "test.h"
#include "util.h"

/* --- a raw byte builder, for files the writer would refuse to make --- */

struct buf {
	uint8_t	b[8192];
	size_t	n;
};

static void
put(struct buf *b, const void *p, size_t n)
{
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void u32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct buf *b, uint64_t v) { put(b, &v, 8); }

static void
str(struct buf *b, const char *s)
{
	u64(b, strlen(s));
	put(b, s, strlen(s));
}

static void
header(struct buf *b, uint32_t version, int64_t n_t, int64_t n_kv)
{
	b->n = 0;
	put(b, "GGUF", 4);
	u32(b, version);
	u64(b, n_t);
	u64(b, n_kv);
}

static void
kv_u32(struct buf *b, const char *key, uint32_t v)
{
	str(b, key);
	u32(b, GGUF_TYPE_UINT32);
	u32(b, v);
}

/* A 2-d tensor info. */
static void
tinfo(struct buf *b, const char *name, int64_t ne0, int64_t ne1, int type, uint64_t off)
{
	str(b, name);
	u32(b, 2);
	u64(b, ne0);
	u64(b, ne1);
	u32(b, type);
	u64(b, off);
}

/* Pad with zeros to a multiple of 32 and add n zero bytes of data. */
static void
data(struct buf *b, size_t n)
{
	size_t p = (b->n + 31) & ~(size_t)31;

	memset(b->b + b->n, 0, p - b->n + n);
	b->n = p + n;
}

/* Open b; when want is not NULL, expect failure with want in the message. */
static struct gguf *
open_buf(const struct buf *b, const char *want, char *err)
{
	struct gguf *g = gguf_open_mem(b->b, b->n, "mem", err);

	if (want == NULL && g == NULL)
		FAILF("open failed: %s", err);
	if (want != NULL && g != NULL)
		FAILF("open succeeded, want failure '%s'", want);
	if (want != NULL && g == NULL && strstr(err, want) == NULL)
		FAILF("message '%s' lacks '%s'", err, want);
	return g;
}

#define REJECT(b, want) do { char _e[UTIL_ERRLEN]; gguf_close(open_buf((b), (want), _e)); } while (0)

/* --- a file made by the writer, into memory --- */

static char *
write_sample(size_t *len, uint32_t align)
{
	static const int32_t arr[] = { -1, 2, 3 };
	static const char *strs[] = { "a", "", "ünï" };
	float f[12];
	uint16_t h[4] = { 0x3c00, 0xbc00, 0, 0x7c00 };	/* 1, -1, 0, +Inf as F16 */
	char *mem = NULL;
	FILE *fp = open_memstream(&mem, len);
	struct gguf_writer *w = gguf_writer_new(fp);
	int64_t ne[2] = { 4, 3 }, ne1[1] = { 4 };
	int i, rc = 0;

	for (i = 0; i < 12; i++)
		f[i] = i * 0.5f;
	rc |= gguf_writer_add_str(w, "general.architecture", "unit", 4);
	if (align != 32)
		rc |= gguf_writer_set_alignment(w, align);
	rc |= gguf_writer_add_u8(w, "k.u8", 250);
	rc |= gguf_writer_add_i8(w, "k.i8", -5);
	rc |= gguf_writer_add_u16(w, "k.u16", 65000);
	rc |= gguf_writer_add_i16(w, "k.i16", -300);
	rc |= gguf_writer_add_u32(w, "k.u32", 4000000000u);
	rc |= gguf_writer_add_i32(w, "k.i32", -7);
	rc |= gguf_writer_add_u64(w, "k.u64", UINT64_MAX);
	rc |= gguf_writer_add_i64(w, "k.i64", INT64_MIN);
	rc |= gguf_writer_add_f32(w, "k.f32", 0.25f);
	rc |= gguf_writer_add_f64(w, "k.f64", -1e300);
	rc |= gguf_writer_add_bool(w, "k.bool", 1);
	rc |= gguf_writer_add_arr(w, "k.arr", GGUF_TYPE_INT32, arr, 3);
	rc |= gguf_writer_add_arr_str(w, "k.strs", strs, NULL, 3);
	rc |= gguf_writer_add_tensor(w, "w", QUANT_F32, 2, ne);
	rc |= gguf_writer_add_tensor(w, "h", QUANT_F16, 1, ne1);
	rc |= gguf_writer_write_header(w);
	rc |= gguf_writer_write(w, f, 20);	/* in two pieces */
	rc |= gguf_writer_write(w, (char *)f + 20, 28);
	rc |= gguf_writer_write(w, h, 8);
	rc |= gguf_writer_finish(w);
	if (rc != 0)
		FAILF("writer: %s", gguf_writer_errmsg(w));
	gguf_writer_free(w);
	fclose(fp);
	return mem;
}

TEST(writes_and_reads_every_value_type)
{
	char err[UTIL_ERRLEN], *mem;
	size_t len, sl;
	struct gguf *g;
	uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32v; int32_t i32;
	uint64_t u64v; int64_t i64; float f32; double f64; int b;
	const char *s;

	mem = write_sample(&len, 32);
	g = gguf_open_mem(mem, len, "mem", err);
	CHECK(g != NULL);
	if (g == NULL) {
		printf("# %s\n", err);
		free(mem);
		return;
	}
	CHECK_EQ_INT(gguf_version(g), 3);
	CHECK_EQ_INT(gguf_n_kv(g), 14);
	CHECK_EQ_STR(gguf_kv_key(g, 0), "general.architecture");
	s = gguf_get_str(g, 0, &sl);
	CHECK(s != NULL && sl == 4 && memcmp(s, "unit", 4) == 0);
	CHECK(gguf_get_u8(g, gguf_find_key(g, "k.u8"), &u8) == 0 && u8 == 250);
	CHECK(gguf_get_i8(g, gguf_find_key(g, "k.i8"), &i8) == 0 && i8 == -5);
	CHECK(gguf_get_u16(g, gguf_find_key(g, "k.u16"), &u16) == 0 && u16 == 65000);
	CHECK(gguf_get_i16(g, gguf_find_key(g, "k.i16"), &i16) == 0 && i16 == -300);
	CHECK(gguf_get_u32(g, gguf_find_key(g, "k.u32"), &u32v) == 0 && u32v == 4000000000u);
	CHECK(gguf_get_i32(g, gguf_find_key(g, "k.i32"), &i32) == 0 && i32 == -7);
	CHECK(gguf_get_u64(g, gguf_find_key(g, "k.u64"), &u64v) == 0 && u64v == UINT64_MAX);
	CHECK(gguf_get_i64(g, gguf_find_key(g, "k.i64"), &i64) == 0 && i64 == INT64_MIN);
	CHECK(gguf_get_f32(g, gguf_find_key(g, "k.f32"), &f32) == 0 && f32 == 0.25f);
	CHECK(gguf_get_f64(g, gguf_find_key(g, "k.f64"), &f64) == 0 && f64 == -1e300);
	CHECK(gguf_get_bool(g, gguf_find_key(g, "k.bool"), &b) == 0 && b == 1);
	CHECK(gguf_get_int(g, gguf_find_key(g, "k.u32"), &i64) == 0 && i64 == 4000000000LL);
	CHECK(gguf_get_int(g, gguf_find_key(g, "k.u64"), &i64) == -1);	/* does not fit */
	CHECK(gguf_find_key(g, "absent") == -1);
	gguf_close(g);
	free(mem);
}

TEST(reads_arrays_and_tensors)
{
	char err[UTIL_ERRLEN], *mem;
	size_t len, sl;
	struct gguf *g;
	const struct gguf_tensor *t;
	const float *w;
	int64_t k;
	int32_t e;
	const char *s;
	float f;

	mem = write_sample(&len, 32);
	if ((g = gguf_open_mem(mem, len, "mem", err)) == NULL) {
		FAILF("%s", err);
		free(mem);
		return;
	}
	k = gguf_find_key(g, "k.arr");
	CHECK_EQ_INT(gguf_arr_type(g, k), GGUF_TYPE_INT32);
	CHECK_EQ_INT(gguf_arr_n(g, k), 3);
	CHECK(gguf_arr_get(g, k, 2, &e) == 0 && e == 3);
	CHECK(gguf_arr_get(g, k, 3, &e) == -1);
	k = gguf_find_key(g, "k.strs");
	CHECK_EQ_INT(gguf_arr_n(g, k), 3);
	CHECK(gguf_arr_data(g, k) == NULL);
	s = gguf_arr_str(g, k, 1, &sl);
	CHECK(s != NULL && sl == 0);
	s = gguf_arr_str(g, k, 2, &sl);
	CHECK(s != NULL && sl == 5 && memcmp(s, "ünï", 5) == 0);
	CHECK_EQ_INT(gguf_n_tensors(g), 2);
	t = gguf_tensor(g, gguf_find_tensor(g, "h"));
	CHECK(t != NULL && t->type == QUANT_F16 && t->n_dims == 1 && t->ne[0] == 4 && t->ne[1] == 1);
	CHECK_EQ_INT(t->offset, 64);	/* 48 bytes of "w" padded to 32 */
	CHECK_EQ_INT(t->nbytes, 8);
	w = gguf_tensor_data(g, 0);
	CHECK(w != NULL && w[11] == 5.5f);
	CHECK(gguf_read_data(g, 4 * 3, &f, 4) == 0 && f == 1.5f);
	CHECK(gguf_read_data(g, gguf_data_size(g) - 2, &f, 4) == -1);
	CHECK_EQ_INT(gguf_data_offset(g) % 32, 0);
	CHECK_EQ_INT(gguf_data_size(g), 64 + 32);
	CHECK_EQ_INT(gguf_data_offset(g) + gguf_data_size(g), len);
	gguf_close(g);
	free(mem);
}

TEST(type_mismatch_fails_with_reason)
{
	char err[UTIL_ERRLEN], *mem;
	size_t len;
	struct gguf *g;
	uint32_t v;

	mem = write_sample(&len, 32);
	g = gguf_open_mem(mem, len, "mem", err);
	CHECK(g != NULL);
	if (g != NULL) {
		CHECK(gguf_get_u32(g, gguf_find_key(g, "k.i32"), &v) == -1);
		CHECK_EQ_STR(gguf_errmsg(g), "key 'k.i32' has type int32, expected uint32");
		CHECK(gguf_get_str(g, gguf_find_key(g, "k.u8"), NULL) == NULL);
		CHECK(gguf_get_u32(g, -1, &v) == -1);
		CHECK(gguf_arr_str(g, gguf_find_key(g, "k.arr"), 0, NULL) == NULL);
	}
	gguf_close(g);
	free(mem);
}

TEST(alignment_kv_sets_padding)
{
	char err[UTIL_ERRLEN], *mem;
	size_t len;
	struct gguf *g;

	mem = write_sample(&len, 128);
	g = gguf_open_mem(mem, len, "mem", err);
	CHECK(g != NULL);
	if (g != NULL) {
		CHECK_EQ_INT(gguf_alignment(g), 128);
		CHECK_EQ_INT(gguf_data_offset(g) % 128, 0);
		CHECK_EQ_INT(gguf_tensor(g, 1)->offset, 128);
		CHECK_EQ_INT(gguf_data_size(g), 256);
	}
	gguf_close(g);
	free(mem);
}

/* read -> write gives the same bytes */
static void
rewrite(struct gguf *g, char **out, size_t *len)
{
	FILE *fp = open_memstream(out, len);
	struct gguf_writer *w = gguf_writer_new(fp);
	int64_t i;
	int rc = 0;

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
	if (rc != 0)
		FAILF("rewrite: %s", gguf_writer_errmsg(w));
	gguf_writer_free(w);
	fclose(fp);
}

TEST(round_trip_is_byte_identical)
{
	char err[UTIL_ERRLEN], *mem, *again = NULL;
	size_t len, len2 = 0;
	struct gguf *g;
	uint32_t a;

	for (a = 32; a <= 64; a += 32) {
		mem = write_sample(&len, a);
		g = gguf_open_mem(mem, len, "mem", err);
		CHECK(g != NULL);
		if (g != NULL) {
			rewrite(g, &again, &len2);
			CHECK_EQ_INT(len2, len);
			CHECK(len2 == len && memcmp(mem, again, len) == 0);
			free(again);
		}
		gguf_close(g);
		free(mem);
	}
}

TEST(every_truncation_is_rejected)
{
	char err[UTIL_ERRLEN], *mem;
	size_t len, n;
	struct gguf *g;
	int bad = 0;

	mem = write_sample(&len, 32);
	for (n = 0; n < len; n++) {
		if ((g = gguf_open_mem(mem, n, "mem", err)) != NULL || (strstr(err, "truncated file") == NULL &&
		    strstr(err, "larger than the file can hold") == NULL)) {
			if (!bad++)
				FAILF("prefix of %zu bytes: %s", n, g ? "accepted" : err);
		}
		gguf_close(g);
	}
	free(mem);
}

TEST(rejects_bad_magic_and_versions)
{
	struct buf b;

	header(&b, 3, 0, 0);
	memcpy(b.b, "GGUG", 4);
	REJECT(&b, "mem: bad magic 47 47 55 47: not a GGUF file");
	header(&b, 1, 0, 0);
	REJECT(&b, "unsupported version 1");
	header(&b, 0, 0, 0);
	REJECT(&b, "unsupported version 0");
	header(&b, 4, 0, 0);
	REJECT(&b, "unsupported version 4");
	header(&b, 0x03000000, 0, 0);
	REJECT(&b, "big-endian");
	header(&b, 2, 0, 0);
	REJECT(&b, "truncated file: the header's padding runs to offset 32, file has 24");
	data(&b, 0);
	{
		char err[UTIL_ERRLEN];
		struct gguf *g = open_buf(&b, NULL, err);
		CHECK(g != NULL && gguf_version(g) == 2);
		gguf_close(g);
	}
}

TEST(rejects_bad_counts)
{
	struct buf b;

	header(&b, 3, -1, 0);
	REJECT(&b, "negative count");
	header(&b, 3, 0, 1000);
	kv_u32(&b, "a", 1);
	REJECT(&b, "kv count 1000 is larger than the file can hold");
	header(&b, 3, INT64_MAX, 0);
	REJECT(&b, "tensor count 9223372036854775807 is larger than the file can hold");
	header(&b, 3, 0, 1);
	str(&b, "arr");
	u32(&b, GGUF_TYPE_ARRAY);
	u32(&b, GGUF_TYPE_UINT64);
	u64(&b, UINT64_MAX / 4);
	REJECT(&b, "key 'arr': array count 4611686018427387903 is larger than the file can hold");
	header(&b, 3, 0, 1);
	u64(&b, UINT64_MAX);	/* a key length */
	data(&b, 64);
	REJECT(&b, "over the 1 GiB limit");
}

TEST(rejects_bad_metadata)
{
	struct buf b;

	header(&b, 3, 0, 2);
	kv_u32(&b, "a", 1);
	kv_u32(&b, "a", 2);
	REJECT(&b, "duplicate key 'a'");
	header(&b, 3, 0, 1);
	str(&b, "nest");
	u32(&b, GGUF_TYPE_ARRAY);
	u32(&b, GGUF_TYPE_ARRAY);
	u64(&b, 1);
	REJECT(&b, "key 'nest' is a nested array");
	header(&b, 3, 0, 1);
	str(&b, "t");
	u32(&b, 13);
	u32(&b, 0);
	REJECT(&b, "key 't' has invalid type 13");
	header(&b, 3, 0, 1);
	kv_u32(&b, "general.alignment", 48);
	REJECT(&b, "key 'general.alignment' is 48, not a power of two");
	header(&b, 3, 0, 1);
	str(&b, "general.alignment");
	u32(&b, GGUF_TYPE_UINT64);
	u64(&b, 64);
	REJECT(&b, "key 'general.alignment' has type uint64, expected uint32");
	header(&b, 3, 0, 1);
	u64(&b, 3);
	put(&b, "a\0b", 3);
	u32(&b, GGUF_TYPE_UINT8);
	put(&b, "x", 1);
	REJECT(&b, "contains a NUL byte");
}

TEST(rejects_bad_tensor_infos)
{
	struct buf b;

	header(&b, 3, 1, 0);
	tinfo(&b, "t", 4, 1, 99, 0);
	data(&b, 16);
	REJECT(&b, "tensor 't' has unknown type 99");
	header(&b, 3, 1, 0);
	tinfo(&b, "t", 32, 1, 4, 0);	/* Q4_2: removed */
	data(&b, 32);
	REJECT(&b, "tensor 't' has unknown type 4");
	header(&b, 3, 1, 0);
	tinfo(&b, "t", 16, 1, QUANT_Q8_0, 0);
	data(&b, 34);
	REJECT(&b, "ne[0] = 16, not a multiple of the Q8_0 block size 32");
	header(&b, 3, 1, 0);
	tinfo(&b, "t", -4, 1, QUANT_F32, 0);
	REJECT(&b, "negative dim");
	header(&b, 3, 1, 0);
	tinfo(&b, "t", INT64_MAX, 4, QUANT_F32, 0);
	REJECT(&b, "tensor 't' size overflows");
	header(&b, 3, 1, 0);
	tinfo(&b, "a-name-that-is-sixty-four-bytes-long-which-is-one-over-the-limit", 4, 1, QUANT_F32, 0);
	REJECT(&b, "name of 64 bytes, the limit is 63");
	header(&b, 3, 1, 0);
	str(&b, "t");
	u32(&b, 5);
	data(&b, 64);
	REJECT(&b, "tensor 't' has 5 dims, the limit is 4");
	header(&b, 3, 2, 0);
	tinfo(&b, "t", 4, 1, QUANT_F32, 0);
	tinfo(&b, "t", 4, 1, QUANT_F32, 32);
	data(&b, 64);
	REJECT(&b, "duplicate tensor 't'");
}

TEST(rejects_offsets_that_are_not_contiguous)
{
	struct buf b;
	char err[UTIL_ERRLEN];
	struct gguf *g;

	header(&b, 3, 2, 0);	/* the good layout first */
	tinfo(&b, "a", 4, 1, QUANT_F32, 0);
	tinfo(&b, "b", 4, 1, QUANT_F32, 32);
	data(&b, 64);
	g = open_buf(&b, NULL, err);
	gguf_close(g);
	b.n -= 1;
	REJECT(&b, "truncated file: data section needs 64 bytes");
	header(&b, 3, 2, 0);
	tinfo(&b, "a", 4, 1, QUANT_F32, 0);
	tinfo(&b, "b", 4, 1, QUANT_F32, 16);	/* misaligned, overlaps a's padding */
	data(&b, 48);
	REJECT(&b, "tensor 'b' has offset 16, expected 32");
	header(&b, 3, 2, 0);
	tinfo(&b, "a", 4, 1, QUANT_F32, 0);
	tinfo(&b, "b", 4, 1, QUANT_F32, 0);	/* overlapping */
	data(&b, 48);
	REJECT(&b, "tensor 'b' has offset 0, expected 32");
	header(&b, 3, 1, 0);
	tinfo(&b, "a", 4, 1, QUANT_F32, 64);	/* a gap */
	data(&b, 96);
	REJECT(&b, "tensor 'a' has offset 64, expected 0");
}

TEST(writer_refuses_misuse)
{
	char *mem = NULL;
	size_t len;
	FILE *fp = open_memstream(&mem, &len);
	struct gguf_writer *w = gguf_writer_new(fp);
	int64_t ne[1] = { 8 };
	float f[8] = { 0 };

	CHECK(gguf_writer_add_u32(w, "a", 1) == 0);
	CHECK(gguf_writer_add_u32(w, "a", 2) == -1);
	CHECK_EQ_STR(gguf_writer_errmsg(w), "duplicate key 'a'");
	CHECK(gguf_writer_add_u32(w, "b", 1) == -1);	/* a failed writer stays failed */
	gguf_writer_free(w);

	w = gguf_writer_new(fp);
	CHECK(gguf_writer_set_alignment(w, 24) == -1);
	CHECK_EQ_STR(gguf_writer_errmsg(w), "key 'general.alignment' is 24, not a power of two");
	gguf_writer_free(w);

	w = gguf_writer_new(fp);
	CHECK(gguf_writer_add_tensor(w, "q", QUANT_Q8_0, 1, ne) == -1);
	gguf_writer_free(w);

	w = gguf_writer_new(fp);
	CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 1, ne) == 0);
	CHECK(gguf_writer_write(w, f, 4) == -1);	/* before the header */
	gguf_writer_free(w);

	w = gguf_writer_new(fp);
	CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 1, ne) == 0);
	CHECK(gguf_writer_write_header(w) == 0);
	CHECK(gguf_writer_write(w, f, 16) == 0);
	CHECK(gguf_writer_finish(w) == -1);
	CHECK_EQ_STR(gguf_writer_errmsg(w), "tensor 't': 16 of 32 bytes written");
	gguf_writer_free(w);

	w = gguf_writer_new(fp);
	CHECK(gguf_writer_add_tensor(w, "t", QUANT_F32, 1, ne) == 0);
	CHECK(gguf_writer_write_header(w) == 0);
	CHECK(gguf_writer_write(w, f, 36) == -1);
	CHECK_EQ_STR(gguf_writer_errmsg(w), "tensor 't': 36 bytes written with 32 left");
	gguf_writer_free(w);
	gguf_writer_free(NULL);
	gguf_close(NULL);
	fclose(fp);
	free(mem);
}

TEST(nbytes_follows_the_block_sizes)
{
	int64_t ne[4] = { 256, 3, 2, 1 };
	uint64_t n;

	CHECK(gguf_nbytes(QUANT_Q4_K, 4, ne, &n) == 0 && n == 144 * 6);
	CHECK(gguf_nbytes(QUANT_F16, 2, ne, &n) == 0 && n == 2 * 256 * 3);
	ne[0] = 100;
	CHECK(gguf_nbytes(QUANT_Q4_K, 4, ne, &n) == -1);
	CHECK(gguf_nbytes(5, 4, ne, &n) == -1);
}

int
main(void)
{
	RUN(writes_and_reads_every_value_type);
	RUN(reads_arrays_and_tensors);
	RUN(type_mismatch_fails_with_reason);
	RUN(alignment_kv_sets_padding);
	RUN(round_trip_is_byte_identical);
	RUN(every_truncation_is_rejected);
	RUN(rejects_bad_magic_and_versions);
	RUN(rejects_bad_counts);
	RUN(rejects_bad_metadata);
	RUN(rejects_bad_tensor_infos);
	RUN(rejects_offsets_that_are_not_contiguous);
	RUN(writer_refuses_misuse);
	RUN(nbytes_follows_the_block_sizes);
	return test_summary();
}
