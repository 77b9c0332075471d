#include "ranks.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gguf.h"
#include "quant.h"
#include "util.h"

/* An id and where it was, for the repeat check. */
struct idpos {
	int32_t	id;
	int64_t	pos;
};

static int
cmp_idpos(const void *a, const void *b)
{
	const struct idpos *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* The first repeat in file order: *at its index, *first the earlier one. */
static int
find_repeat(const int32_t *ids, int64_t n, int64_t *at, int64_t *first, char *err)
{
	struct idpos *v = malloc((size_t)n * sizeof *v);

	if (v == NULL)
		return util_err(err, "out of memory");
	for (int64_t i = 0; i < n; i++)
		v[i] = (struct idpos){ ids[i], i };
	qsort(v, (size_t)n, sizeof *v, cmp_idpos);
	*at = -1;
	for (int64_t i = 1; i < n; i++)
		if (v[i].id == v[i - 1].id && (*at < 0 || v[i].pos < *at)) {
			*at = v[i].pos;
			*first = v[i - 1].pos;
		}
	free(v);
	return 0;
}

/* ranks_check, with positions counted from base (1 for lines, 0 for indices). */
static int
check_ids(const int32_t *ids, int64_t n, int64_t n_vocab, const char *what, int base,
    char *err)
{
	int64_t at = -1, first = 0;

	if (n < 1)
		return util_err(err, "no ids");
	for (int64_t i = 0; i < n; i++) {
		if (ids[i] < 0)
			return util_err(err, "%s %" PRId64 ": id %" PRId32 " is negative", what,
			    i + base, ids[i]);
		if (n_vocab > 0 && ids[i] >= n_vocab)
			return util_err(err, "%s %" PRId64 ": id %" PRId32 " is outside the "
			    "vocabulary (%" PRId64 " tokens)", what, i + base, ids[i], n_vocab);
	}
	if (find_repeat(ids, n, &at, &first, err) != 0)
		return -1;
	if (at >= 0)
		return util_err(err, "%s %" PRId64 ": id %" PRId32 " repeats %s %" PRId64, what,
		    at + base, ids[at], what, first + base);
	return 0;
}

int
ranks_check(const int32_t *ids, int64_t n, int64_t n_vocab, char *err)
{
	return check_ids(ids, n, n_vocab, "index", 0, err);
}

static struct ranks *
ranks_new(int32_t *ids, int64_t n, int64_t n_vocab)
{
	struct ranks *r = malloc(sizeof *r);

	if (r == NULL) {
		free(ids);
		return NULL;
	}
	*r = (struct ranks){ ids, n, n_vocab };
	return r;
}

void
ranks_free(struct ranks *r)
{
	if (r == NULL)
		return;
	free(r->ids);
	free(r);
}

/* One line [p, e) as an id: digits only, at most INT32_MAX. */
static int
parse_line(const char *p, const char *e, int64_t line, int32_t *out, char *err)
{
	int64_t v = 0;

	if (e > p && e[-1] == '\r')
		e--;
	if (p == e)
		return util_err(err, "line %" PRId64 ": blank line", line);
	for (const char *q = p; q < e; q++) {
		if (*q < '0' || *q > '9')
			return util_err(err, "line %" PRId64 ": not a token id: '%.*s'", line,
			    (int)(e - p > 40 ? 40 : e - p), p);
		v = v * 10 + (*q - '0');
		if (v > INT32_MAX)
			return util_err(err, "line %" PRId64 ": id '%.*s' is too large", line,
			    (int)(e - p > 40 ? 40 : e - p), p);
	}
	*out = (int32_t)v;
	return 0;
}

struct ranks *
ranks_parse_txt(const char *buf, size_t len, int64_t n_vocab, char *err)
{
	const char *p = buf, *end = buf + len;
	int64_t n = 0, cap = 0;
	int32_t *ids = NULL, *t;

	while (p < end) {
		const char *e = memchr(p, '\n', (size_t)(end - p));

		if (e == NULL)
			e = end;
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			if ((t = realloc(ids, (size_t)cap * sizeof *ids)) == NULL) {
				util_err(err, "out of memory");
				goto fail;
			}
			ids = t;
		}
		if (parse_line(p, e, n + 1, &ids[n], err) != 0)
			goto fail;
		n++;
		p = e + 1;
	}
	if (check_ids(ids, n, n_vocab, "line", 1, err) != 0)
		goto fail;
	return ranks_new(ids, n, n_vocab);
fail:
	free(ids);
	return NULL;
}

/* The file's RANKS_KEY_VOCAB, when it has one, must equal n_vocab. */
static int
check_vocab_key(struct gguf *g, int64_t n_vocab, char *err)
{
	int64_t k = gguf_find_key(g, RANKS_KEY_VOCAB), v;

	if (k < 0 || n_vocab <= 0)
		return 0;
	if (gguf_get_int(g, k, &v) != 0)
		return util_err(err, "key '%s' is not an integer", RANKS_KEY_VOCAB);
	if (v != n_vocab)
		return util_err(err, "ranks are for a vocabulary of %" PRId64 " tokens, the "
		    "model has %" PRId64, v, n_vocab);
	return 0;
}

/* Read the d2t tensor's elements (I32 or I64) as int32 ids. */
static int32_t *
read_d2t(struct gguf *g, const struct gguf_tensor *t, char *err)
{
	size_t es = t->type == QUANT_I64 ? 8 : 4, n = (size_t)t->ne[0];
	unsigned char *raw;
	int32_t *ids;

	if (t->ne[0] < 1 || t->ne[0] > INT32_MAX || t->nbytes != n * es) {
		util_err(err, "tensor 'd2t': %" PRId64 " elements in %" PRIu64 " bytes", t->ne[0],
		    t->nbytes);
		return NULL;
	}
	raw = malloc(n * es);
	ids = malloc(n * sizeof *ids);
	if (raw == NULL || ids == NULL) {
		util_err(err, "out of memory");
		goto fail;
	}
	if (gguf_read_data(g, t->offset, raw, n * es) != 0) {
		util_err(err, "tensor 'd2t': %s", gguf_errmsg(g));
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t v;

		if (es == 8) {
			memcpy(&v, raw + 8 * i, 8);
		} else {
			int32_t v32;

			memcpy(&v32, raw + 4 * i, 4);
			v = v32;
		}
		if (v < INT32_MIN || v > INT32_MAX) {
			util_err(err, "tensor 'd2t': index %zu: id %" PRId64 " is out of range", i, v);
			goto fail;
		}
		ids[i] = (int32_t)v;
	}
	free(raw);
	return ids;
fail:
	free(raw);
	free(ids);
	return NULL;
}

struct ranks *
ranks_from_gguf(struct gguf *g, int64_t n_vocab, char *err)
{
	int64_t i = gguf_find_tensor(g, "d2t");
	const struct gguf_tensor *t = i >= 0 ? gguf_tensor(g, i) : NULL;
	char why[UTIL_ERRLEN];
	int32_t *ids;

	if (t == NULL) {
		util_err(err, "no tensor 'd2t'");
		return NULL;
	}
	if (t->type != QUANT_I32 && t->type != QUANT_I64) {
		util_err(err, "tensor 'd2t': type %s, want I32 or I64", quant_name(t->type));
		return NULL;
	}
	if (t->n_dims != 1) {
		util_err(err, "tensor 'd2t': %d dims, want 1", t->n_dims);
		return NULL;
	}
	if (check_vocab_key(g, n_vocab, err) != 0)
		return NULL;
	if ((ids = read_d2t(g, t, err)) == NULL)
		return NULL;
	if (check_ids(ids, t->ne[0], n_vocab, "index", 0, why) != 0) {
		util_err(err, "tensor 'd2t': %s", why);
		free(ids);
		return NULL;
	}
	return ranks_new(ids, t->ne[0], n_vocab);
}

struct ranks *
ranks_load(const char *path, int64_t n_vocab, char *err)
{
	char why[UTIL_ERRLEN];
	struct ranks *r = NULL;
	struct gguf *g;
	size_t len;
	char *buf = util_read_file(path, &len, err);

	if (buf == NULL)
		return NULL;
	if (len >= 4 && memcmp(buf, "GGUF", 4) == 0) {
		if ((g = gguf_open_mem(buf, len, path, err)) != NULL) {
			if ((r = ranks_from_gguf(g, n_vocab, why)) == NULL)
				util_err(err, "%s: %s", path, why);
			gguf_close(g);
		}
	} else if ((r = ranks_parse_txt(buf, len, n_vocab, why)) == NULL) {
		util_err(err, "%s: %s", path, why);
	}
	free(buf);
	return r;
}

int
ranks_write_txt(const char *path, const int32_t *ids, int64_t n, char *err)
{
	struct util_ofile *f = util_ofile_open(path, err);

	if (f == NULL)
		return -1;
	for (int64_t i = 0; i < n; i++)
		fprintf(f->fp, "%" PRId32 "\n", ids[i]);
	if (ferror(f->fp)) {
		util_err(err, "%s: write error", path);
		util_ofile_abort(f);
		return -1;
	}
	return util_ofile_commit(f, err);
}

int
ranks_write_gguf(const char *path, const int32_t *ids, int64_t n, int64_t n_vocab,
    char *err)
{
	struct util_ofile *f = util_ofile_open(path, err);
	struct gguf_writer *w;
	int64_t ne[1] = { n };
	int rc;

	if (f == NULL)
		return -1;
	if ((w = gguf_writer_new(f->fp)) == NULL) {
		util_ofile_abort(f);
		return util_err(err, "%s: out of memory", path);
	}
	rc = gguf_writer_set_alignment(w, GGUF_DEFAULT_ALIGNMENT);
	if (rc == 0 && n_vocab > 0)
		rc = gguf_writer_add_u32(w, RANKS_KEY_VOCAB, (uint32_t)n_vocab);
	if (rc == 0)
		rc = gguf_writer_add_tensor(w, "d2t", QUANT_I32, 1, ne);
	if (rc == 0)
		rc = gguf_writer_write_header(w);
	if (rc == 0)
		rc = gguf_writer_write(w, ids, (size_t)n * sizeof *ids);
	if (rc == 0)
		rc = gguf_writer_finish(w);
	if (rc != 0) {
		util_err(err, "%s: %s", path, gguf_writer_errmsg(w));
		gguf_writer_free(w);
		util_ofile_abort(f);
		return -1;
	}
	gguf_writer_free(w);
	return util_ofile_commit(f, err);
}

int
ranks_gather(void *dst, const void *src, size_t row_size, int64_t n_src,
    const int32_t *ids, int64_t i0, int64_t m, char *err)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	if (i0 < 0 || m < 0)
		return util_err(err, "gather: bad range %" PRId64 "+%" PRId64, i0, m);
	for (int64_t k = 0; k < m; k++) {
		int32_t id = ids[i0 + k];

		if (id < 0 || id >= n_src)
			return util_err(err, "gather: id %" PRId32 " is not a row of a %" PRId64
			    "-row weight", id, n_src);
		memcpy(d + (size_t)k * row_size, s + (size_t)id * row_size, row_size);
	}
	return 0;
}

int
ranks_head_init(struct backend *be, struct backend_weight *w, void **buf,
    const struct ranks *r, int type, int64_t ne0, int64_t n_src,
    const void *src, float scale, char *err)
{
	size_t rs = quant_row_size(type, ne0);
	void *b;

	*buf = NULL;
	if (rs == 0)
		return util_err(err, "head: type %s cannot hold rows of %" PRId64, quant_name(type),
		    ne0);
	if ((b = malloc(rs * (size_t)r->n)) == NULL)
		return util_err(err, "head: out of memory");
	if (ranks_gather(b, src, rs, n_src, r->ids, 0, r->n, err) != 0) {
		free(b);
		return -1;
	}
	if (backend_weight_init(be, w, type, ne0, r->n, b, scale) != 0) {
		util_err(err, "head: %s", backend_errmsg(be));
		free(b);
		return -1;
	}
	*buf = b;
	return 0;
}

/* Tensor name's rows/columns: 0 when it is [rows][cols], else -1 with err. */
static int
want_shape(struct gguf *d, const char *name, int64_t cols, int64_t rows, char *err)
{
	int64_t i = gguf_find_tensor(d, name);
	const struct gguf_tensor *t = i >= 0 ? gguf_tensor(d, i) : NULL;

	if (t == NULL)
		return util_err(err, "draft has no tensor '%s'", name);
	if (t->ne[0] != cols || (rows >= 0 && t->ne[1] != rows))
		return util_err(err, "draft tensor '%s' is %" PRId64 " x %" PRId64 ", want %" PRId64
		    " x %" PRId64, name, t->ne[1], t->ne[0], rows >= 0 ? rows : t->ne[1], cols);
	return 0;
}

struct ranks *
ranks_from_draft(struct gguf *d, const char *arch, int64_t n_embd, int64_t n_vocab,
    int64_t block, char *err)
{
	char key[128], name[GGUF_MAX_NAME];
	int64_t k = gguf_find_key(d, "general.architecture"), v;
	size_t len = 0;
	const char *s = k >= 0 ? gguf_get_str(d, k, &len) : NULL;
	struct ranks *r;

	if (s == NULL || len != strlen(arch) || memcmp(s, arch, len) != 0) {
		util_err(err, "draft is not a '%s' model (general.architecture)", arch);
		return NULL;
	}
	snprintf(key, sizeof key, "%s.embedding_length", arch);
	if ((k = gguf_find_key(d, key)) < 0 || gguf_get_int(d, k, &v) != 0 || v != n_embd) {
		util_err(err, "draft hidden size (%s) is not the trunk's %" PRId64, key, n_embd);
		return NULL;
	}
	snprintf(name, sizeof name, "blk.%" PRId64 ".nextn.eh_proj.weight", block);
	if (gguf_find_tensor(d, name) < 0) {
		util_err(err, "draft has no MTP block blk.%" PRId64 " (tensor '%s')", block, name);
		return NULL;
	}
	if (want_shape(d, "token_embd.weight", n_embd, n_vocab, err) != 0 ||
	    (r = ranks_from_gguf(d, n_vocab, err)) == NULL)
		return NULL;
	if (want_shape(d, "output.weight", n_embd, r->n, err) != 0) {
		ranks_free(r);
		return NULL;
	}
	return r;
}

int32_t
ranks_target(const struct ranks *r, int64_t d)
{
	return d >= 0 && d < r->n ? r->ids[d] : -1;
}

int32_t
ranks_argmax(const struct ranks *r, const float *logits)
{
	int64_t b = -1;

	for (int64_t i = 0; i < r->n; i++) {
		if (isnan(logits[i]) || logits[i] == -INFINITY)
			continue;
		if (b < 0 || logits[i] > logits[b] || (logits[i] == logits[b] && r->ids[i] < r->ids[b]))
			b = i;
	}
	return b < 0 ? -1 : r->ids[b];
}

int
ranks_scatter(const struct ranks *r, const float *logits, float *full, int64_t n_vocab)
{
	for (int64_t i = 0; i < n_vocab; i++)
		full[i] = -INFINITY;
	for (int64_t i = 0; i < r->n; i++) {
		if (r->ids[i] >= n_vocab)
			return -1;
		full[r->ids[i]] = logits[i];
	}
	return 0;
}
