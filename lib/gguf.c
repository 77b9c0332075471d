#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant.h"
#include "util.h"

#define MAX_STRING	(UINT64_C(1) << 30)	/* ggml's cap on one string */
#define MIN_KV_BYTES	13	/* key length, empty key, type, one byte of value */
#define MIN_TI_BYTES	24	/* name length, n_dims, type, offset */

struct kv {
	char	*key;		/* NUL-terminated copy */
	int	type;
	int	arr_type;	/* element type of an ARRAY */
	uint64_t n;		/* ARRAY element count */
	size_t	raw;		/* offset of the key's length prefix (verbatim copies) */
	size_t	off;		/* offset of the value (an array's first element) */
	size_t	end;		/* offset just past the value */
	size_t	*str;		/* [n] offsets of the string elements' length prefixes */
};

struct gguf {
	char	err[UTIL_ERRLEN];
	const uint8_t *buf;	/* file bytes [0, len): all of them, or what a stream gave so far */
	size_t	len;
	size_t	pos;		/* parse cursor */
	uint8_t	*own;		/* stream buffer (buf points here) */
	size_t	cap;
	void	*map;
	size_t	map_len;
	FILE	*fp;		/* stream source, NULL otherwise */
	int	close_fp;
	uint64_t fpos;		/* stream: bytes taken from fp */
	uint64_t fsize;		/* 0 for a stream */
	uint32_t version;
	size_t	align;
	uint64_t data_off, data_size;
	struct kv *kv;		/* [n_kv] */
	int64_t	n_kv;
	struct gguf_tensor *t;	/* [n_t] */
	int64_t	n_t;
};

static const int type_size[GGUF_TYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
static const char *type_names[GGUF_TYPE_COUNT] = {
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
	"string", "array", "uint64", "int64", "float64",
};

const char *
gguf_type_name(int type)
{
	return type >= 0 && type < GGUF_TYPE_COUNT ? type_names[type] : "?";
}

static uint64_t
pad(uint64_t x, uint64_t n)
{
	return (x + n - 1) & ~(n - 1);
}

/* --- reading: the cursor --- */

/* Stream: read from fp until want more bytes lie past the cursor, or EOF. */
static void
fill(struct gguf *g, uint64_t want)
{
	while (g->len - g->pos < want) {
		size_t r, room;
		if (g->len == g->cap) {
			size_t nc = g->cap ? g->cap * 2 : 1 << 16;
			uint8_t *nb = nc > g->cap ? realloc(g->own, nc) : NULL;
			if (nb == NULL)
				return;
			g->own = nb;
			g->buf = nb;
			g->cap = nc;
		}
		room = g->cap - g->len;
		if ((r = fread(g->own + g->len, 1, room, g->fp)) == 0)
			return;
		g->len += r;
		g->fpos += r;
	}
}

static int
need(struct gguf *g, uint64_t n, const char *what)
{
	if (n <= g->len - g->pos)
		return 0;
	if (g->fp != NULL)
		fill(g, n);
	if (n <= g->len - g->pos)
		return 0;
	if (g->fp != NULL && ferror(g->fp))
		return util_err(g->err, "read: %s", strerror(errno));
	return util_err(g->err, "truncated file: %s needs %" PRIu64 " bytes at offset %zu, %zu left",
	    what, n, g->pos, g->len - g->pos);
}

/* count items of at least min bytes each must fit in what is left of the file */
static int
fits(struct gguf *g, uint64_t count, uint64_t min, const char *what)
{
	if (count > UINT64_MAX / min || (g->fp != NULL && count * min > MAX_STRING * 4))
		return util_err(g->err, "%s %" PRIu64 " is larger than the file can hold", what, count);
	if (g->fp != NULL)
		fill(g, count * min);
	if (count * min > g->len - g->pos)
		return util_err(g->err, "%s %" PRIu64 " is larger than the file can hold "
		    "(%zu bytes left at offset %zu)", what, count, g->len - g->pos, g->pos);
	return 0;
}

static int
rd(struct gguf *g, void *out, size_t n, const char *what)
{
	if (need(g, n, what) != 0)
		return -1;
	memcpy(out, g->buf + g->pos, n);
	g->pos += n;
	return 0;
}

/* A string: *off gets the offset of its bytes, *n their count. */
static int
rd_str(struct gguf *g, size_t *off, uint64_t *n, const char *what)
{
	if (rd(g, n, 8, what) != 0)
		return -1;
	if (*n > MAX_STRING)
		return util_err(g->err, "%s: string of %" PRIu64 " bytes at offset %zu is over the 1 GiB limit",
		    what, *n, g->pos - 8);
	if (need(g, *n, what) != 0)
		return -1;
	*off = g->pos;
	g->pos += *n;
	return 0;
}

/* --- reading: metadata --- */

static int
rd_value(struct gguf *g, struct kv *kv, int type)
{
	uint64_t n;
	size_t off;

	if (type == GGUF_TYPE_STRING)
		return rd_str(g, &off, &n, kv->key);
	if (type < 0 || type >= GGUF_TYPE_COUNT || type == GGUF_TYPE_ARRAY)
		return util_err(g->err, "key '%s' has invalid type %d", kv->key, type);
	if (need(g, type_size[type], kv->key) != 0)
		return -1;
	g->pos += type_size[type];
	return 0;
}

static int
rd_array(struct gguf *g, struct kv *kv)
{
	int32_t et;
	uint64_t n, j, len;
	size_t off;

	if (rd(g, &et, 4, kv->key) != 0 || rd(g, &n, 8, kv->key) != 0)
		return -1;
	if (et == GGUF_TYPE_ARRAY)
		return util_err(g->err, "key '%s' is a nested array", kv->key);
	if (et < 0 || et >= GGUF_TYPE_COUNT)
		return util_err(g->err, "key '%s' is an array of invalid type %d", kv->key, et);
	kv->arr_type = et;
	kv->n = n;
	kv->off = g->pos;
	if (fits(g, n, et == GGUF_TYPE_STRING ? 8 : type_size[et], "array count") != 0) {
		char why[UTIL_ERRLEN];
		memcpy(why, g->err, sizeof why);
		return util_err(g->err, "key '%s': %s", kv->key, why);
	}
	if (et != GGUF_TYPE_STRING) {
		g->pos += n * type_size[et];
		return 0;
	}
	if (n > 0 && (kv->str = malloc(n * sizeof *kv->str)) == NULL)
		return util_err(g->err, "key '%s': out of memory", kv->key);
	for (j = 0; j < n; j++) {
		kv->str[j] = g->pos;
		if (rd_str(g, &off, &len, kv->key) != 0)
			return -1;
	}
	return 0;
}

static int
has_key(const struct gguf *g, const char *key, size_t len)
{
	int64_t i;

	for (i = 0; i < g->n_kv; i++)
		if (strlen(g->kv[i].key) == len && memcmp(g->kv[i].key, key, len) == 0)
			return 1;
	return 0;
}

static int
rd_kv(struct gguf *g, int64_t i)
{
	struct kv *kv = &g->kv[i];
	size_t off;
	uint64_t n;
	int32_t type;

	kv->raw = g->pos;
	if (rd_str(g, &off, &n, "key") != 0)
		return -1;
	if (memchr(g->buf + off, 0, n) != NULL)
		return util_err(g->err, "key %" PRId64 " at offset %zu contains a NUL byte", i, kv->raw);
	if (has_key(g, (const char *)g->buf + off, n))
		return util_err(g->err, "duplicate key '%.*s'", (int)(n > 200 ? 200 : n), g->buf + off);
	if ((kv->key = malloc(n + 1)) == NULL)
		return util_err(g->err, "out of memory");
	memcpy(kv->key, g->buf + off, n);
	kv->key[n] = '\0';
	g->n_kv = i + 1;	/* from here on gguf_close frees it */
	if (rd(g, &type, 4, kv->key) != 0)
		return -1;
	kv->type = type;
	kv->off = g->pos;
	if (type == GGUF_TYPE_ARRAY ? rd_array(g, kv) : rd_value(g, kv, type))
		return -1;
	kv->end = g->pos;
	return 0;
}

static int
rd_alignment(struct gguf *g)
{
	int64_t i = gguf_find_key(g, "general.alignment");
	uint32_t a;

	g->align = GGUF_DEFAULT_ALIGNMENT;
	if (i < 0)
		return 0;
	if (g->kv[i].type != GGUF_TYPE_UINT32)
		return util_err(g->err, "key 'general.alignment' has type %s, expected uint32",
		    gguf_type_name(g->kv[i].type));
	memcpy(&a, g->buf + g->kv[i].off, 4);
	if (a == 0 || (a & (a - 1)) != 0)
		return util_err(g->err, "key 'general.alignment' is %" PRIu32 ", not a power of two", a);
	g->align = a;
	return 0;
}

/* --- reading: tensor infos --- */

int
gguf_nbytes(int type, int n_dims, const int64_t *ne, uint64_t *out)
{
	const struct quant_traits *q = quant_traits(type);
	int64_t rows = 1;
	uint64_t row;
	int j;

	if (!quant_valid(type) || n_dims < 0 || n_dims > GGUF_MAX_DIMS)
		return -1;
	for (j = 0; j < n_dims; j++)
		if (ne[j] < 0)
			return -1;
	if (n_dims > 0 && ne[0] % q->blck != 0)
		return -1;
	for (j = 1; j < n_dims; j++) {
		if (ne[j] != 0 && rows > INT64_MAX / ne[j])
			return -1;
		rows *= ne[j];
	}
	if (n_dims > 0 && ne[0] / q->blck > INT64_MAX / q->size)
		return -1;	/* the row size itself overflows */
	row = n_dims > 0 ? (uint64_t)(ne[0] / q->blck) * q->size : (uint64_t)q->size;
	if (rows != 0 && row > (uint64_t)INT64_MAX / rows)
		return -1;
	*out = row * rows;
	return 0;
}

static int
has_tensor(const struct gguf *g, const char *name)
{
	int64_t i;

	for (i = 0; i < g->n_t; i++)
		if (strcmp(g->t[i].name, name) == 0)
			return 1;
	return 0;
}

static int
rd_tensor(struct gguf *g, int64_t i)
{
	struct gguf_tensor *t = &g->t[i];
	uint32_t nd;
	int32_t type;
	size_t off;
	uint64_t n;
	int j;

	if (rd_str(g, &off, &n, "tensor name") != 0)
		return -1;
	if (n >= GGUF_MAX_NAME)
		return util_err(g->err, "tensor %" PRId64 " has a name of %" PRIu64 " bytes, the limit is %d",
		    i, n, GGUF_MAX_NAME - 1);
	memcpy(t->name, g->buf + off, n);
	t->name[n] = '\0';
	if (strlen(t->name) != n)
		return util_err(g->err, "tensor %" PRId64 " name contains a NUL byte", i);
	if (has_tensor(g, t->name))
		return util_err(g->err, "duplicate tensor '%s'", t->name);
	g->n_t = i + 1;
	if (rd(g, &nd, 4, t->name) != 0)
		return -1;
	if (nd > GGUF_MAX_DIMS)
		return util_err(g->err, "tensor '%s' has %" PRIu32 " dims, the limit is %d", t->name, nd, GGUF_MAX_DIMS);
	t->n_dims = nd;
	for (j = 0; j < GGUF_MAX_DIMS; j++) {
		t->ne[j] = 1;
		if (j < (int)nd && rd(g, &t->ne[j], 8, t->name) != 0)
			return -1;
		if (t->ne[j] < 0)
			return util_err(g->err, "tensor '%s' has negative dim ne[%d] = %" PRId64, t->name, j, t->ne[j]);
	}
	if (rd(g, &type, 4, t->name) != 0 || rd(g, &t->offset, 8, t->name) != 0)
		return -1;
	t->type = type;
	if (!quant_valid(type))
		return util_err(g->err, "tensor '%s' has unknown type %" PRId32, t->name, type);
	if (t->ne[0] % quant_traits(type)->blck != 0)
		return util_err(g->err, "tensor '%s' has ne[0] = %" PRId64 ", not a multiple of the %s block size %d",
		    t->name, t->ne[0], quant_name(type), quant_traits(type)->blck);
	if (gguf_nbytes(type, GGUF_MAX_DIMS, t->ne, &t->nbytes) != 0)
		return util_err(g->err, "tensor '%s' size overflows", t->name);
	return 0;
}

/* Strict contiguity: each offset is the padded end of the one before. */
static int
check_offsets(struct gguf *g)
{
	uint64_t size = 0, p;
	int64_t i;

	for (i = 0; i < g->n_t; i++) {
		const struct gguf_tensor *t = &g->t[i];
		if (t->offset != size)
			return util_err(g->err, "tensor '%s' has offset %" PRIu64 ", expected %" PRIu64
			    " (misaligned, overlapping or not contiguous)", t->name, t->offset, size);
		p = pad(t->nbytes, g->align);
		if (p < t->nbytes || size > UINT64_MAX - p || size + p > (uint64_t)INT64_MAX)
			return util_err(g->err, "tensor '%s': data size overflows", t->name);
		size += p;
	}
	g->data_size = size;
	g->data_off = pad(g->pos, g->align);
	if (g->fp == NULL && g->data_off > g->len)	/* ggml writes this padding even with no tensors */
		return util_err(g->err, "truncated file: the header's padding runs to offset %" PRIu64
		    ", file has %zu", g->data_off, g->len);
	if (g->fp == NULL && size > g->len - g->data_off)
		return util_err(g->err, "truncated file: data section needs %" PRIu64 " bytes at offset %"
		    PRIu64 ", file has %zu", size, g->data_off, g->len);
	return 0;
}

/* --- reading: open --- */

static int
rd_header(struct gguf *g)
{
	uint8_t m[4];
	int64_t n_t, n_kv, i;

	if (rd(g, m, 4, "magic") != 0)
		return -1;
	if (memcmp(m, "GGUF", 4) != 0)
		return util_err(g->err, "bad magic %02x %02x %02x %02x: not a GGUF file", m[0], m[1], m[2], m[3]);
	if (rd(g, &g->version, 4, "version") != 0)
		return -1;
	if (g->version != 0 && (g->version & 0xFFFF) == 0)
		return util_err(g->err, "unsupported version %#" PRIx32 ": a big-endian file", g->version);
	if (g->version < 2 || g->version > 3)
		return util_err(g->err, "unsupported version %" PRIu32 " (only 2 and 3 are read)", g->version);
	if (rd(g, &n_t, 8, "tensor count") != 0 || rd(g, &n_kv, 8, "kv count") != 0)
		return -1;
	if (n_t < 0 || n_kv < 0)
		return util_err(g->err, "negative count: %" PRId64 " tensors, %" PRId64 " kvs", n_t, n_kv);
	if (fits(g, n_kv, MIN_KV_BYTES, "kv count") != 0)
		return -1;
	if (n_kv > 0 && (g->kv = calloc(n_kv, sizeof *g->kv)) == NULL)
		return util_err(g->err, "out of memory");
	for (i = 0; i < n_kv; i++)
		if (rd_kv(g, i) != 0)
			return -1;
	if (fits(g, n_t, MIN_TI_BYTES, "tensor count") != 0)
		return -1;
	if (n_t > 0 && (g->t = calloc(n_t, sizeof *g->t)) == NULL)
		return util_err(g->err, "out of memory");
	for (i = 0; i < n_t; i++)
		if (rd_tensor(g, i) != 0)
			return -1;
	if (rd_alignment(g) != 0)
		return -1;
	return check_offsets(g);
}

/* Parse g's bytes; on failure close g and put "name: why" in err. */
static struct gguf *
finish_open(struct gguf *g, const char *name, char *err)
{
	if (rd_header(g) == 0)
		return g;
	util_err(err, "%s: %s", name, g->err);
	gguf_close(g);
	return NULL;
}

struct gguf *
gguf_open_mem(const void *buf, size_t len, const char *name, char *err)
{
	struct gguf *g = calloc(1, sizeof *g);

	if (g == NULL) {
		util_err(err, "%s: out of memory", name);
		return NULL;
	}
	g->buf = buf;
	g->len = len;
	g->fsize = len;
	return finish_open(g, name, err);
}

static struct gguf *
open_stream(FILE *fp, int close_fp, const char *name, char *err)
{
	struct gguf *g = calloc(1, sizeof *g);

	if (g == NULL) {
		util_err(err, "%s: out of memory", name);
		if (close_fp)
			fclose(fp);
		return NULL;
	}
	g->fp = fp;
	g->close_fp = close_fp;
	g->buf = (const uint8_t *)"";
	if ((g = finish_open(g, name, err)) != NULL && ferror(fp)) {
		util_err(err, "%s: %s", name, strerror(errno));
		gguf_close(g);
		return NULL;
	}
	return g;
}

struct gguf *
gguf_open_stream(FILE *fp, const char *name, char *err)
{
	return open_stream(fp, 0, name, err);
}

struct gguf *
gguf_open(const char *path, char *err)
{
	struct gguf *g;
	struct stat st;
	void *map;
	FILE *fp;
	int fd;

	if (strcmp(path, "-") == 0)
		return open_stream(stdin, 0, "<stdin>", err);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0) {
		util_err(err, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		if ((fp = fdopen(fd, "rb")) == NULL) {
			util_err(err, "%s: %s", path, strerror(errno));
			close(fd);
			return NULL;
		}
		return open_stream(fp, 1, path, err);
	}
	if (st.st_size == 0) {
		close(fd);
		return gguf_open_mem("", 0, path, err);
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		util_err(err, "%s: mmap: %s", path, strerror(errno));
		return NULL;
	}
	if ((g = calloc(1, sizeof *g)) == NULL) {
		munmap(map, st.st_size);
		util_err(err, "%s: out of memory", path);
		return NULL;
	}
	g->map = map;
	g->map_len = st.st_size;
	g->buf = map;
	g->len = g->fsize = st.st_size;
	return finish_open(g, path, err);
}

void
gguf_close(struct gguf *g)
{
	int64_t i;

	if (g == NULL)
		return;
	for (i = 0; i < g->n_kv; i++) {
		free(g->kv[i].key);
		free(g->kv[i].str);
	}
	free(g->kv);
	free(g->t);
	free(g->own);
	if (g->map != NULL)
		munmap(g->map, g->map_len);
	if (g->close_fp)
		fclose(g->fp);
	free(g);
}

/* --- reading: accessors --- */

const char *gguf_errmsg(const struct gguf *g) { return g->err; }
uint32_t gguf_version(const struct gguf *g) { return g->version; }
size_t gguf_alignment(const struct gguf *g) { return g->align; }
uint64_t gguf_data_offset(const struct gguf *g) { return g->data_off; }
uint64_t gguf_data_size(const struct gguf *g) { return g->data_size; }
uint64_t gguf_file_size(const struct gguf *g) { return g->fp != NULL ? 0 : g->fsize; }
int64_t gguf_n_kv(const struct gguf *g) { return g->n_kv; }
int64_t gguf_n_tensors(const struct gguf *g) { return g->n_t; }

int64_t
gguf_find_key(const struct gguf *g, const char *key)
{
	int64_t i;

	for (i = 0; i < g->n_kv; i++)
		if (strcmp(g->kv[i].key, key) == 0)
			return i;
	return -1;
}

const char *
gguf_kv_key(const struct gguf *g, int64_t i)
{
	return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

int
gguf_kv_type(const struct gguf *g, int64_t i)
{
	return i >= 0 && i < g->n_kv ? g->kv[i].type : -1;
}

/* kv i as a scalar of type want, or NULL with the reason in g->err */
static const uint8_t *
scalar(struct gguf *g, int64_t i, int want)
{
	if (i < 0 || i >= g->n_kv) {
		util_err(g->err, "no kv %" PRId64, i);
		return NULL;
	}
	if (g->kv[i].type != want) {
		util_err(g->err, "key '%s' has type %s, expected %s", g->kv[i].key,
		    gguf_type_name(g->kv[i].type), gguf_type_name(want));
		return NULL;
	}
	return g->buf + g->kv[i].off;
}

#define GETTER(fn, ctype, gtype) \
int \
fn(struct gguf *g, int64_t i, ctype *out) \
{ \
	const uint8_t *p = scalar(g, i, gtype); \
	if (p == NULL) \
		return -1; \
	memcpy(out, p, sizeof *out); \
	return 0; \
}
GETTER(gguf_get_u8, uint8_t, GGUF_TYPE_UINT8)
GETTER(gguf_get_i8, int8_t, GGUF_TYPE_INT8)
GETTER(gguf_get_u16, uint16_t, GGUF_TYPE_UINT16)
GETTER(gguf_get_i16, int16_t, GGUF_TYPE_INT16)
GETTER(gguf_get_u32, uint32_t, GGUF_TYPE_UINT32)
GETTER(gguf_get_i32, int32_t, GGUF_TYPE_INT32)
GETTER(gguf_get_u64, uint64_t, GGUF_TYPE_UINT64)
GETTER(gguf_get_i64, int64_t, GGUF_TYPE_INT64)
GETTER(gguf_get_f32, float, GGUF_TYPE_FLOAT32)
GETTER(gguf_get_f64, double, GGUF_TYPE_FLOAT64)

int
gguf_get_bool(struct gguf *g, int64_t i, int *out)
{
	const uint8_t *p = scalar(g, i, GGUF_TYPE_BOOL);

	if (p == NULL)
		return -1;
	*out = *p != 0;
	return 0;
}

/* An integer element of type t at p, as int64; -1 when it does not fit. */
static int
to_int(int t, const uint8_t *p, int64_t *out)
{
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
		uint64_t u64; int64_t i64; } v;

	memcpy(&v, p, type_size[t]);
	switch (t) {
	case GGUF_TYPE_UINT8: *out = v.u8; return 0;
	case GGUF_TYPE_INT8: *out = v.i8; return 0;
	case GGUF_TYPE_UINT16: *out = v.u16; return 0;
	case GGUF_TYPE_INT16: *out = v.i16; return 0;
	case GGUF_TYPE_UINT32: *out = v.u32; return 0;
	case GGUF_TYPE_INT32: *out = v.i32; return 0;
	case GGUF_TYPE_INT64: *out = v.i64; return 0;
	case GGUF_TYPE_UINT64:
		if (v.u64 > INT64_MAX)
			return -1;
		*out = (int64_t)v.u64;
		return 0;
	}
	return -1;
}

int
gguf_get_int(struct gguf *g, int64_t i, int64_t *out)
{
	if (i < 0 || i >= g->n_kv)
		return util_err(g->err, "no kv %" PRId64, i);
	if (g->kv[i].type >= GGUF_TYPE_COUNT || type_size[g->kv[i].type] == 0 ||
	    g->kv[i].type == GGUF_TYPE_FLOAT32 || g->kv[i].type == GGUF_TYPE_FLOAT64 ||
	    g->kv[i].type == GGUF_TYPE_BOOL)
		return util_err(g->err, "key '%s' has type %s, expected an integer", g->kv[i].key,
		    gguf_type_name(g->kv[i].type));
	if (to_int(g->kv[i].type, g->buf + g->kv[i].off, out) != 0)
		return util_err(g->err, "key '%s': value does not fit int64", g->kv[i].key);
	return 0;
}

const void *
gguf_kv_data(const struct gguf *g, int64_t i)
{
	int t = gguf_kv_type(g, i);

	return t >= 0 && t < GGUF_TYPE_COUNT && type_size[t] > 0 ? g->buf + g->kv[i].off : NULL;
}

static const char *
str_at(const struct gguf *g, size_t off, size_t *len)
{
	uint64_t n;

	memcpy(&n, g->buf + off, 8);
	if (len != NULL)
		*len = n;
	return (const char *)g->buf + off + 8;
}

const char *
gguf_get_str(struct gguf *g, int64_t i, size_t *len)
{
	return scalar(g, i, GGUF_TYPE_STRING) ? str_at(g, g->kv[i].off, len) : NULL;
}

int
gguf_arr_type(const struct gguf *g, int64_t i)
{
	return i >= 0 && i < g->n_kv && g->kv[i].type == GGUF_TYPE_ARRAY ? g->kv[i].arr_type : -1;
}

uint64_t
gguf_arr_n(const struct gguf *g, int64_t i)
{
	return gguf_arr_type(g, i) >= 0 ? g->kv[i].n : 0;
}

const void *
gguf_arr_data(const struct gguf *g, int64_t i)
{
	int t = gguf_arr_type(g, i);

	return t >= 0 && t != GGUF_TYPE_STRING ? g->buf + g->kv[i].off : NULL;
}

int
gguf_arr_get(struct gguf *g, int64_t i, uint64_t j, void *out)
{
	const uint8_t *p = gguf_arr_data(g, i);
	int t = gguf_arr_type(g, i);

	if (p == NULL)
		return util_err(g->err, "kv %" PRId64 " is not a numeric array", i);
	if (j >= g->kv[i].n)
		return util_err(g->err, "key '%s': index %" PRIu64 " out of range (%" PRIu64 " elements)",
		    g->kv[i].key, j, g->kv[i].n);
	memcpy(out, p + j * type_size[t], type_size[t]);
	return 0;
}

const char *
gguf_arr_str(struct gguf *g, int64_t i, uint64_t j, size_t *len)
{
	if (gguf_arr_type(g, i) != GGUF_TYPE_STRING) {
		util_err(g->err, "kv %" PRId64 " is not an array of strings", i);
		return NULL;
	}
	if (j >= g->kv[i].n) {
		util_err(g->err, "key '%s': index %" PRIu64 " out of range (%" PRIu64 " elements)",
		    g->kv[i].key, j, g->kv[i].n);
		return NULL;
	}
	return str_at(g, g->kv[i].str[j], len);
}

int64_t
gguf_find_tensor(const struct gguf *g, const char *name)
{
	int64_t i;

	for (i = 0; i < g->n_t; i++)
		if (strcmp(g->t[i].name, name) == 0)
			return i;
	return -1;
}

const struct gguf_tensor *
gguf_tensor(const struct gguf *g, int64_t i)
{
	return i >= 0 && i < g->n_t ? &g->t[i] : NULL;
}

const void *
gguf_tensor_data(const struct gguf *g, int64_t i)
{
	if (g->fp != NULL || i < 0 || i >= g->n_t)
		return NULL;
	return g->buf + g->data_off + g->t[i].offset;
}

int
gguf_read_data(struct gguf *g, uint64_t off, void *buf, size_t n)
{
	uint64_t at = g->data_off + off;
	uint8_t *dst = buf;
	size_t k, r;

	if (off > g->data_size || n > g->data_size - off)
		return util_err(g->err, "read of %zu bytes at data offset %" PRIu64 " is outside the data section",
		    n, off);
	if (g->fp == NULL) {
		memcpy(dst, g->buf + at, n);
		return 0;
	}
	if (at < g->len) {	/* the part the header read already buffered */
		k = g->len - at < n ? g->len - at : n;
		memcpy(dst, g->buf + at, k);
		dst += k, at += k, n -= k;
	}
	if (n > 0 && at < g->fpos)
		return util_err(g->err, "stream: cannot go back to data offset %" PRIu64, at - g->data_off);
	for (; g->fpos < at; g->fpos += r) {	/* skip forward */
		uint8_t skip[4096];
		k = at - g->fpos < sizeof skip ? at - g->fpos : sizeof skip;
		if ((r = fread(skip, 1, k, g->fp)) == 0)
			return util_err(g->err, "truncated file at offset %" PRIu64, g->fpos);
	}
	if (n > 0 && (r = fread(dst, 1, n, g->fp)) != n) {
		g->fpos += r;
		return util_err(g->err, "truncated file: data ends at offset %" PRIu64 ", %" PRIu64 " needed",
		    g->fpos, at + n);
	}
	g->fpos += n;
	return 0;
}

/* --- writer --- */

struct gguf_writer {
	char	err[UTIL_ERRLEN];
	FILE	*fp;
	int	failed;
	uint8_t	*kv;		/* the serialized kvs, in order */
	size_t	kv_len, kv_cap;
	char	**keys;		/* [n_kv] */
	int64_t	n_kv;
	uint32_t align;
	struct gguf_tensor *t;	/* [n_t] */
	int64_t	n_t, cap_t;
	int	header;		/* header written */
	int64_t	cur;		/* tensor being written */
	uint64_t done;		/* its bytes written so far */
};

static int
wfail(struct gguf_writer *w, const char *fmt, ...)
{
	va_list ap;

	if (!w->failed) {
		va_start(ap, fmt);
		vsnprintf(w->err, sizeof w->err, fmt, ap);
		va_end(ap);
	}
	w->failed = 1;
	return -1;
}

struct gguf_writer *
gguf_writer_new(FILE *fp)
{
	struct gguf_writer *w = calloc(1, sizeof *w);

	if (w != NULL) {
		w->fp = fp;
		w->align = GGUF_DEFAULT_ALIGNMENT;
	}
	return w;
}

void
gguf_writer_free(struct gguf_writer *w)
{
	int64_t i;

	if (w == NULL)
		return;
	for (i = 0; i < w->n_kv; i++)
		free(w->keys[i]);
	free(w->keys);
	free(w->kv);
	free(w->t);
	free(w);
}

const char *gguf_writer_errmsg(const struct gguf_writer *w) { return w->err; }

static int
kv_put(struct gguf_writer *w, const void *p, size_t n)
{
	if (n > w->kv_cap - w->kv_len) {
		size_t nc = w->kv_cap ? w->kv_cap : 4096;
		uint8_t *nb;
		while (nc - w->kv_len < n)
			if ((nc *= 2) < w->kv_cap)
				return wfail(w, "metadata too large");
		if ((nb = realloc(w->kv, nc)) == NULL)
			return wfail(w, "out of memory");
		w->kv = nb;
		w->kv_cap = nc;
	}
	memcpy(w->kv + w->kv_len, p, n);
	w->kv_len += n;
	return 0;
}

/* Start kv `key` of type `type`: checks, records the key, writes key and type. */
static int
kv_begin(struct gguf_writer *w, const char *key, int32_t type)
{
	uint64_t n = strlen(key);
	char **nk;
	int64_t i;

	if (w->failed)
		return -1;
	if (w->header)
		return wfail(w, "key '%s': the header is already written", key);
	for (i = 0; i < w->n_kv; i++)
		if (strcmp(w->keys[i], key) == 0)
			return wfail(w, "duplicate key '%s'", key);
	if ((nk = realloc(w->keys, (w->n_kv + 1) * sizeof *nk)) == NULL)
		return wfail(w, "out of memory");
	w->keys = nk;
	if ((nk[w->n_kv] = strdup(key)) == NULL)
		return wfail(w, "out of memory");
	w->n_kv++;
	return kv_put(w, &n, 8) || kv_put(w, key, n) || kv_put(w, &type, 4) ? -1 : 0;
}

static int
add_scalar(struct gguf_writer *w, const char *key, int type, const void *v)
{
	if (strcmp(key, "general.alignment") == 0) {
		uint32_t a;
		if (type != GGUF_TYPE_UINT32)
			return wfail(w, "key 'general.alignment' must be uint32");
		memcpy(&a, v, 4);
		if (a == 0 || (a & (a - 1)) != 0)
			return wfail(w, "key 'general.alignment' is %" PRIu32 ", not a power of two", a);
		w->align = a;
	}
	return kv_begin(w, key, type) || kv_put(w, v, type_size[type]) ? -1 : 0;
}

#define ADDER(fn, ctype, gtype) \
int \
fn(struct gguf_writer *w, const char *key, ctype v) \
{ \
	return add_scalar(w, key, gtype, &v); \
}
ADDER(gguf_writer_add_u8, uint8_t, GGUF_TYPE_UINT8)
ADDER(gguf_writer_add_i8, int8_t, GGUF_TYPE_INT8)
ADDER(gguf_writer_add_u16, uint16_t, GGUF_TYPE_UINT16)
ADDER(gguf_writer_add_i16, int16_t, GGUF_TYPE_INT16)
ADDER(gguf_writer_add_u32, uint32_t, GGUF_TYPE_UINT32)
ADDER(gguf_writer_add_i32, int32_t, GGUF_TYPE_INT32)
ADDER(gguf_writer_add_u64, uint64_t, GGUF_TYPE_UINT64)
ADDER(gguf_writer_add_i64, int64_t, GGUF_TYPE_INT64)
ADDER(gguf_writer_add_f32, float, GGUF_TYPE_FLOAT32)
ADDER(gguf_writer_add_f64, double, GGUF_TYPE_FLOAT64)

int
gguf_writer_add_bool(struct gguf_writer *w, const char *key, int v)
{
	uint8_t b = v != 0;

	return add_scalar(w, key, GGUF_TYPE_BOOL, &b);
}

int
gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment)
{
	return gguf_writer_add_u32(w, "general.alignment", alignment);
}

int
gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *s, size_t len)
{
	uint64_t n = len;

	return kv_begin(w, key, GGUF_TYPE_STRING) || kv_put(w, &n, 8) || kv_put(w, s, len) ? -1 : 0;
}

int
gguf_writer_add_arr(struct gguf_writer *w, const char *key, int elem, const void *data, uint64_t n)
{
	int32_t et = elem;

	if (elem < 0 || elem >= GGUF_TYPE_COUNT || type_size[elem] == 0)
		return wfail(w, "key '%s': %s is not a numeric array type", key, gguf_type_name(elem));
	if (n > SIZE_MAX / 8)
		return wfail(w, "key '%s': array too large", key);
	return kv_begin(w, key, GGUF_TYPE_ARRAY) || kv_put(w, &et, 4) || kv_put(w, &n, 8) ||
	    kv_put(w, data, n * type_size[elem]) ? -1 : 0;
}

int
gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const char *const *s,
    const size_t *len, uint64_t n)
{
	int32_t et = GGUF_TYPE_STRING;
	uint64_t j, l;

	if (kv_begin(w, key, GGUF_TYPE_ARRAY) || kv_put(w, &et, 4) || kv_put(w, &n, 8))
		return -1;
	for (j = 0; j < n; j++) {
		l = len != NULL ? len[j] : strlen(s[j]);
		if (kv_put(w, &l, 8) || kv_put(w, s[j], l))
			return -1;
	}
	return 0;
}

int
gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf *r, int64_t i)
{
	const struct kv *kv;
	size_t val;

	if (i < 0 || i >= r->n_kv)
		return wfail(w, "copy of kv %" PRId64 ": no such kv", i);
	kv = &r->kv[i];
	if (kv->type != GGUF_TYPE_ARRAY && kv->type != GGUF_TYPE_STRING)
		return add_scalar(w, kv->key, kv->type, r->buf + kv->off);
	val = kv->raw + 8 + strlen(kv->key) + 4;	/* past key and type */
	if (kv_begin(w, kv->key, kv->type) != 0)
		return -1;
	return kv_put(w, r->buf + val, kv->end - val);
}

int
gguf_writer_add_tensor(struct gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne)
{
	struct gguf_tensor *t;
	int64_t i;
	int j;

	if (w->failed)
		return -1;
	if (w->header)
		return wfail(w, "tensor '%s': the header is already written", name);
	if (strlen(name) >= GGUF_MAX_NAME)
		return wfail(w, "tensor '%.64s...': name longer than %d bytes", name, GGUF_MAX_NAME - 1);
	for (i = 0; i < w->n_t; i++)
		if (strcmp(w->t[i].name, name) == 0)
			return wfail(w, "duplicate tensor '%s'", name);
	if (n_dims < 0 || n_dims > GGUF_MAX_DIMS)
		return wfail(w, "tensor '%s': %d dims, the limit is %d", name, n_dims, GGUF_MAX_DIMS);
	if (w->n_t == w->cap_t) {
		int64_t nc = w->cap_t ? w->cap_t * 2 : 64;
		if ((t = realloc(w->t, nc * sizeof *t)) == NULL)
			return wfail(w, "out of memory");
		w->t = t;
		w->cap_t = nc;
	}
	t = &w->t[w->n_t];
	memset(t, 0, sizeof *t);
	strcpy(t->name, name);
	t->type = type;
	t->n_dims = n_dims;
	for (j = 0; j < GGUF_MAX_DIMS; j++)
		t->ne[j] = j < n_dims ? ne[j] : 1;
	if (gguf_nbytes(type, GGUF_MAX_DIMS, t->ne, &t->nbytes) != 0)
		return wfail(w, "tensor '%s': invalid type %d (%s) or shape", name, type, quant_name(type));
	w->n_t++;
	return 0;
}

static int
put(struct gguf_writer *w, const void *p, size_t n)
{
	if (n > 0 && fwrite(p, 1, n, w->fp) != n)
		return wfail(w, "write: %s", strerror(errno));
	return 0;
}

static int
put_zeros(struct gguf_writer *w, uint64_t n)
{
	static const uint8_t z[256];

	for (; n > sizeof z; n -= sizeof z)
		if (put(w, z, sizeof z) != 0)
			return -1;
	return put(w, z, n);
}

/* Tensors of zero bytes need no write: step over them. */
static void
skip_empty(struct gguf_writer *w)
{
	while (w->cur < w->n_t && w->t[w->cur].nbytes == 0)
		w->cur++;
}

int
gguf_writer_write_header(struct gguf_writer *w)
{
	static const uint32_t version = 3;
	uint64_t off = 0, pos = 24 + w->kv_len;
	int64_t i;

	if (w->failed)
		return -1;
	if (w->header)
		return wfail(w, "header written twice");
	if (put(w, "GGUF", 4) || put(w, &version, 4) || put(w, &w->n_t, 8) || put(w, &w->n_kv, 8) ||
	    put(w, w->kv, w->kv_len))
		return -1;
	for (i = 0; i < w->n_t; i++) {
		struct gguf_tensor *t = &w->t[i];
		uint64_t n = strlen(t->name);
		uint32_t nd = t->n_dims;
		int32_t type = t->type;
		t->offset = off;
		off += pad(t->nbytes, w->align);
		if (put(w, &n, 8) || put(w, t->name, n) || put(w, &nd, 4) ||
		    put(w, t->ne, 8 * (size_t)nd) || put(w, &type, 4) || put(w, &t->offset, 8))
			return -1;
		pos += 8 + n + 4 + 8 * nd + 4 + 8;
	}
	if (put_zeros(w, pad(pos, w->align) - pos) != 0)
		return -1;
	w->header = 1;
	skip_empty(w);
	return 0;
}

int
gguf_writer_write(struct gguf_writer *w, const void *buf, size_t n)
{
	const struct gguf_tensor *t;

	if (w->failed)
		return -1;
	if (!w->header)
		return wfail(w, "tensor data before the header");
	if (n == 0)
		return 0;
	if (w->cur >= w->n_t)
		return wfail(w, "%zu bytes written past the last tensor", n);
	t = &w->t[w->cur];
	if (n > t->nbytes - w->done)
		return wfail(w, "tensor '%s': %zu bytes written with %" PRIu64 " left", t->name, n,
		    t->nbytes - w->done);
	if (put(w, buf, n) != 0)
		return -1;
	if ((w->done += n) < t->nbytes)
		return 0;
	if (put_zeros(w, pad(t->nbytes, w->align) - t->nbytes) != 0)
		return -1;
	w->cur++;
	w->done = 0;
	skip_empty(w);
	return 0;
}

int
gguf_writer_finish(struct gguf_writer *w)
{
	if (w->failed)
		return -1;
	if (!w->header)
		return wfail(w, "finish before the header");
	if (w->cur < w->n_t)
		return wfail(w, "tensor '%s': %" PRIu64 " of %" PRIu64 " bytes written", w->t[w->cur].name,
		    w->done, w->t[w->cur].nbytes);
	if (fflush(w->fp) != 0)
		return wfail(w, "write: %s", strerror(errno));
	return 0;
}
