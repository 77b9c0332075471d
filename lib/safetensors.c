#include "safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "quant.h"
#include "safetensors_impl.h"
#include "util.h"

#define HEADER_MAX	(100u << 20)	/* the safetensors crate's cap on the JSON header */

static const struct {
	const char *name;
	int	size;
	int	ggml;
} dtypes[SAFETENSORS_DTYPE_COUNT] = {
	[SAFETENSORS_BOOL] = { "BOOL", 1, -1 },
	[SAFETENSORS_U8] = { "U8", 1, -1 },
	[SAFETENSORS_I8] = { "I8", 1, QUANT_I8 },
	[SAFETENSORS_F8_E5M2] = { "F8_E5M2", 1, -1 },
	[SAFETENSORS_F8_E4M3] = { "F8_E4M3", 1, -1 },
	[SAFETENSORS_F8_E8M0] = { "F8_E8M0", 1, -1 },
	[SAFETENSORS_I16] = { "I16", 2, QUANT_I16 },
	[SAFETENSORS_U16] = { "U16", 2, -1 },
	[SAFETENSORS_F16] = { "F16", 2, QUANT_F16 },
	[SAFETENSORS_BF16] = { "BF16", 2, QUANT_BF16 },
	[SAFETENSORS_I32] = { "I32", 4, QUANT_I32 },
	[SAFETENSORS_U32] = { "U32", 4, -1 },
	[SAFETENSORS_F32] = { "F32", 4, QUANT_F32 },
	[SAFETENSORS_F64] = { "F64", 8, QUANT_F64 },
	[SAFETENSORS_I64] = { "I64", 8, QUANT_I64 },
	[SAFETENSORS_U64] = { "U64", 8, -1 },
};

const char *
safetensors_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < SAFETENSORS_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

int
safetensors_dtype_size(int dtype)
{
	return dtype >= 0 && dtype < SAFETENSORS_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

int
safetensors_dtype_ggml(int dtype)
{
	return dtype >= 0 && dtype < SAFETENSORS_DTYPE_COUNT ? dtypes[dtype].ggml : -1;
}

static int
dtype_from_name(const char *s)
{
	int i;

	for (i = 0; i < SAFETENSORS_DTYPE_COUNT; i++)
		if (strcmp(s, dtypes[i].name) == 0)
			return i;
	return -1;
}

static int
cmp_offset(const void *a, const void *b)
{
	const struct safetensors_tensor *x = a, *y = b;
	const uint8_t *p = x->data, *q = y->data;

	if (p != q)
		return p < q ? -1 : 1;
	return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int
grow(void **p, size_t *cap, size_t need, size_t elsz)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	if ((q = realloc(*p, n * elsz)) == NULL)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}

/* shape: an array of non-negative integers; n_elem with overflow check */
static int
parse_shape(struct safetensors_tensor *t, const struct json *shape, char *why)
{
	uint64_t n = 1;
	size_t i;

	if (shape == NULL || shape->type != JSON_ARRAY)
		return util_err(why, "'shape' is not an array");
	if (shape->n > SAFETENSORS_MAX_DIMS)
		return util_err(why, "%zu dimensions (at most %d)", shape->n, SAFETENSORS_MAX_DIMS);
	t->n_dims = (int)shape->n;
	for (i = 0; i < shape->n; i++) {
		const struct json *d = &shape->items[i];

		if (d->type != JSON_NUMBER || !d->is_int || d->i < 0)
			return util_err(why, "shape[%zu] is not a non-negative integer", i);
		t->shape[i] = d->i;
		if (d->i != 0 && n > (uint64_t)INT64_MAX / (uint64_t)d->i)
			return util_err(why, "shape overflows");
		n *= (uint64_t)d->i;
	}
	t->n_elem = (int64_t)n;
	return 0;
}

/* One header entry: {"dtype": .., "shape": [..], "data_offsets": [b, e]}. */
static int
parse_entry(struct safetensors_tensor *t, const struct json *v, const uint8_t *data,
    uint64_t datalen, char *why)
{
	const struct json *off;
	const char *dt;
	uint64_t b, e;
	size_t i;
	int es;

	if (v->type != JSON_OBJECT)
		return util_err(why, "entry is not an object");
	for (i = 0; i < v->n; i++)
		if (strcmp(v->keys[i], "dtype") != 0 && strcmp(v->keys[i], "shape") != 0 &&
		    strcmp(v->keys[i], "data_offsets") != 0)
			return util_err(why, "unknown field '%s'", v->keys[i]);
	if (v->n != 3)
		return util_err(why, "needs exactly dtype, shape and data_offsets");
	if ((dt = json_get_str(v, "dtype")) == NULL)
		return util_err(why, "'dtype' is not a string");
	if ((t->dtype = dtype_from_name(dt)) < 0)
		return util_err(why, "unknown dtype '%s'", dt);
	if (parse_shape(t, json_get(v, "shape"), why) != 0)
		return -1;
	off = json_get(v, "data_offsets");
	if (off == NULL || off->type != JSON_ARRAY || off->n != 2 ||
	    off->items[0].type != JSON_NUMBER || !off->items[0].is_int || off->items[0].i < 0 ||
	    off->items[1].type != JSON_NUMBER || !off->items[1].is_int || off->items[1].i < 0)
		return util_err(why, "'data_offsets' is not two non-negative integers");
	b = (uint64_t)off->items[0].i;
	e = (uint64_t)off->items[1].i;
	if (b > e || e > datalen)
		return util_err(why, "data_offsets [%llu, %llu] outside the %llu data bytes",
		    (unsigned long long)b, (unsigned long long)e, (unsigned long long)datalen);
	es = dtypes[t->dtype].size;
	if ((uint64_t)t->n_elem > UINT64_MAX / (uint64_t)es)
		return util_err(why, "size overflows");
	t->nbytes = (uint64_t)t->n_elem * (uint64_t)es;
	if (e - b != t->nbytes)
		return util_err(why, "holds %llu bytes but shape and dtype need %llu",
		    (unsigned long long)(e - b), (unsigned long long)t->nbytes);
	t->data = data + b;
	return 0;
}

static int
check_metadata(const struct json *m, char *why)
{
	size_t i;

	if (m->type != JSON_OBJECT)
		return util_err(why, "'__metadata__' is not an object");
	for (i = 0; i < m->n; i++)
		if (m->items[i].type != JSON_STRING)
			return util_err(why, "'__metadata__.%s' is not a string", m->keys[i]);
	return 0;
}

/* The shard's tensors, sorted by offset, must tile the data exactly. */
static int
check_tiling(struct safetensors_tensor *t, size_t n, const uint8_t *data, uint64_t datalen,
    char *why)
{
	const uint8_t *at = data;
	size_t i;

	if (n > 0)
		qsort(t, n, sizeof *t, cmp_offset);
	for (i = 0; i < n; i++) {
		if ((const uint8_t *)t[i].data != at)
			return util_err(why, "tensor '%s' at data offset %llu, expected %llu "
			    "(tensors overlap or leave a gap)", t[i].name,
			    (unsigned long long)((const uint8_t *)t[i].data - data),
			    (unsigned long long)(at - data));
		at += t[i].nbytes;
	}
	if ((uint64_t)(at - data) != datalen)
		return util_err(why, "%llu data bytes after the last tensor",
		    (unsigned long long)(datalen - (uint64_t)(at - data)));
	return 0;
}

static int
has_dup_keys(const struct json *o, char *why)
{
	const char **k = malloc((o->n ? o->n : 1) * sizeof *k);
	size_t i;
	int rc = 0;

	if (k == NULL)
		return util_err(why, "out of memory");
	for (i = 0; i < o->n; i++)
		k[i] = o->keys[i];
	qsort(k, o->n, sizeof *k, st_cmp_str);
	for (i = 1; i < o->n && rc == 0; i++)
		if (strcmp(k[i - 1], k[i]) == 0)
			rc = util_err(why, "duplicate key '%s'", k[i]);
	free(k);
	return rc;
}

/*
 * Parse the header of buf[len] as shard number `shard` and append its
 * tensors to st->t.  why gets the reason (without the file name).
 */
static int
parse_shard(struct safetensors *st, struct st_shard *sh, int shard, char *why)
{
	const uint8_t *buf = sh->map;
	uint64_t hlen, datalen;
	struct json *h;
	size_t i, first = st->nt;

	if (sh->len < 8)
		return util_err(why, "truncated: %zu bytes, no header length", sh->len);
	hlen = 0;
	for (i = 0; i < 8; i++)
		hlen |= (uint64_t)buf[i] << (8 * i);
	if (hlen > sh->len - 8)
		return util_err(why, "header length %llu past the end of the file",
		    (unsigned long long)hlen);
	if (hlen > HEADER_MAX)
		return util_err(why, "header length %llu over the %u limit",
		    (unsigned long long)hlen, HEADER_MAX);
	if (hlen < 2 || buf[8] != '{')
		return util_err(why, "header does not start with '{'");
	if ((h = json_parse((const char *)buf + 8, hlen, why)) == NULL)
		return -1;
	sh->hdr = h;
	if (h->type != JSON_OBJECT)
		return util_err(why, "header is not an object");
	if (has_dup_keys(h, why) != 0)
		return -1;
	datalen = sh->len - 8 - hlen;
	for (i = 0; i < h->n; i++) {
		struct safetensors_tensor *t;
		char ewhy[UTIL_ERRLEN];

		if (strcmp(h->keys[i], "__metadata__") == 0) {
			if (check_metadata(&h->items[i], why) != 0)
				return -1;
			continue;
		}
		if (grow((void **)&st->t, &st->capt, st->nt + 1, sizeof *st->t) != 0)
			return util_err(why, "out of memory");
		t = &st->t[st->nt];
		memset(t, 0, sizeof *t);
		t->name = h->keys[i];
		t->shard = shard;
		if (parse_entry(t, &h->items[i], buf + 8 + hlen, datalen, ewhy) != 0)
			return util_err(why, "tensor '%s': %s", t->name, ewhy);
		if (strlen(t->name) != h->keylens[i])
			return util_err(why, "tensor name with a NUL byte");
		st->nt++;
	}
	if (st->nt == first)	/* no tensors: st->t may still be NULL */
		return check_tiling(NULL, 0, buf + 8 + hlen, datalen, why);
	return check_tiling(st->t + first, st->nt - first, buf + 8 + hlen, datalen, why);
}

int
st_cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int
cmp_by_name(const void *a, const void *b)
{
	const struct st_byname *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* Sort the name index; a name in two places is an error. */
static int
build_index(struct safetensors *st)
{
	size_t i;

	free(st->byname);
	if ((st->byname = malloc((st->nt ? st->nt : 1) * sizeof *st->byname)) == NULL)
		return util_err(st->err, "out of memory");
	for (i = 0; i < st->nt; i++) {
		st->byname[i].name = st->t[i].name;
		st->byname[i].i = i;
	}
	st->nbyname = st->nt;
	qsort(st->byname, st->nt, sizeof *st->byname, cmp_by_name);
	for (i = 1; i < st->nt; i++)
		if (strcmp(st->byname[i - 1].name, st->byname[i].name) == 0)
			return util_err(st->err, "tensor '%s' is in both '%s' and '%s'",
			    st->byname[i].name, st->shards[st->t[st->byname[i - 1].i].shard].path,
			    st->shards[st->t[st->byname[i].i].shard].path);
	return 0;
}

const struct safetensors_tensor *
safetensors_find(const struct safetensors *st, const char *name)
{
	size_t lo = 0, hi = st->nbyname;

	if (st->byname == NULL)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, st->byname[mid].name);

		if (c == 0)
			return &st->t[st->byname[mid].i];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

static struct safetensors *
st_new(char *err)
{
	struct safetensors *st = calloc(1, sizeof *st);

	if (st == NULL)
		util_err(err, "out of memory");
	return st;
}

struct safetensors *
safetensors_open_mem(const void *buf, size_t len, char *err)
{
	struct safetensors *st = st_new(err);
	char why[UTIL_ERRLEN];

	if (st == NULL)
		return NULL;
	if ((st->shards = calloc(1, sizeof *st->shards)) == NULL) {
		util_err(err, "out of memory");
		free(st);
		return NULL;
	}
	st->nshards = 1;
	st->shards[0].path = strdup("<memory>");
	st->shards[0].map = (void *)buf;
	st->shards[0].len = len;
	if (st->shards[0].path == NULL)
		util_err(why, "out of memory");
	if (st->shards[0].path == NULL || parse_shard(st, &st->shards[0], 0, why) != 0 ||
	    build_index(st) != 0) {
		util_err(err, "<memory>: %s", st->err[0] ? st->err : why);
		safetensors_close(st);
		return NULL;
	}
	return st;
}

/* mmap path as a new shard and parse it; -1 with st->err set. */
static int
add_shard(struct safetensors *st, const char *path)
{
	struct st_shard *sh;
	char why[UTIL_ERRLEN];
	struct stat sb;
	int fd;

	if (grow((void **)&st->shards, &st->capshards, st->nshards + 1, sizeof *st->shards) != 0)
		return util_err(st->err, "out of memory");
	sh = &st->shards[st->nshards];
	memset(sh, 0, sizeof *sh);
	if ((sh->path = strdup(path)) == NULL)
		return util_err(st->err, "out of memory");
	st->nshards++;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return util_err(st->err, "%s: %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return util_err(st->err, "%s: %s", path, S_ISREG(sb.st_mode) ? strerror(errno) :
		    "not a regular file");
	}
	sh->len = (size_t)sb.st_size;
	if (sh->len > 0) {
		sh->map = mmap(NULL, sh->len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (sh->map == MAP_FAILED) {
			sh->map = NULL;
			close(fd);
			return util_err(st->err, "%s: mmap: %s", path, strerror(errno));
		}
		sh->own = 1;
	}
	close(fd);
	if (parse_shard(st, sh, (int)(st->nshards - 1), why) != 0)
		return util_err(st->err, "%s: %s", path, why);
	return 0;
}

static void
drop_last_shard(struct safetensors *st, size_t nt_before)
{
	struct st_shard *sh = &st->shards[--st->nshards];

	if (sh->own)
		munmap(sh->map, sh->len);
	json_free(sh->hdr);
	free(sh->path);
	st->nt = nt_before;
}

void
safetensors_close(struct safetensors *st)
{
	size_t i;

	if (st == NULL)
		return;
	while (st->nshards > 0)
		drop_last_shard(st, st->nt);
	free(st->shards);
	free(st->t);
	free(st->byname);
	json_free(st->config);
	json_free(st->tokjson[0]);
	json_free(st->tokjson[1]);
	free(st->dir);
	st_plan_free(st);
	for (i = 0; i < st->nallocs; i++)
		free(st->allocs[i]);
	free(st->allocs);
	free(st);
}

const char *
safetensors_errmsg(const struct safetensors *st)
{
	return st->err;
}

size_t
safetensors_count(const struct safetensors *st)
{
	return st->nt;
}

const struct safetensors_tensor *
safetensors_at(const struct safetensors *st, size_t i)
{
	return i < st->nt ? &st->t[i] : NULL;
}

size_t
safetensors_shard_count(const struct safetensors *st)
{
	return st->nshards;
}

const char *
safetensors_shard_path(const struct safetensors *st, size_t i)
{
	return i < st->nshards ? st->shards[i].path : NULL;
}

const struct json *
safetensors_config(const struct safetensors *st)
{
	return st->config;
}

const struct json *
safetensors_hparam(const struct safetensors *st, const char *key)
{
	const struct json *tc, *v;

	if (st->config == NULL)
		return NULL;
	tc = json_get(st->config, "text_config");
	if (tc != NULL && tc->type == JSON_OBJECT && (v = json_get(tc, key)) != NULL)
		return v;
	return json_get(st->config, key);
}

/* A malloc'd "dir/name"; NULL on out of memory. */
char *
st_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);

	if (p != NULL)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

/* Read and parse dir/name into *out; a missing file leaves *out NULL and returns 0. */
int
st_read_json(struct safetensors *st, const char *name, struct json **out)
{
	char why[UTIL_ERRLEN];
	char *path = st_join(st->dir, name), *buf;
	size_t len;

	*out = NULL;
	if (path == NULL)
		return util_err(st->err, "out of memory");
	if (access(path, F_OK) != 0) {
		free(path);
		return 0;
	}
	if ((buf = util_read_file(path, &len, st->err)) == NULL) {
		free(path);
		return -1;
	}
	*out = json_parse(buf, len, why);
	free(buf);
	if (*out == NULL)
		util_err(st->err, "%s: %s", path, why);
	free(path);
	return *out == NULL ? -1 : 0;
}

static int
ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && strcmp(s + n - m, suf) == 0;
}

/* The sorted *.safetensors names of st->dir; caller frees each and the array. */
static char **
list_shards(struct safetensors *st, size_t *n)
{
	DIR *d = opendir(st->dir);
	struct dirent *e;
	char **v = NULL;
	size_t cap = 0;

	*n = 0;
	if (d == NULL) {
		util_err(st->err, "%s: %s", st->dir, strerror(errno));
		return NULL;
	}
	while ((e = readdir(d)) != NULL) {
		if (!ends_with(e->d_name, ".safetensors") || e->d_name[0] == '.')
			continue;
		if (grow((void **)&v, &cap, *n + 2, sizeof *v) != 0 ||
		    (v[*n] = strdup(e->d_name)) == NULL) {
			util_err(st->err, "out of memory");
			break;
		}
		(*n)++;
	}
	closedir(d);
	if (v == NULL && (v = calloc(1, sizeof *v)) == NULL)
		util_err(st->err, "out of memory");
	if (v != NULL)
		qsort(v, *n, sizeof *v, st_cmp_str);
	return v;
}

static int
listed(const struct json *wm, const char *file)
{
	size_t i;

	for (i = 0; i < wm->n; i++)
		if (strcmp(wm->items[i].str, file) == 0)
			return 1;
	return 0;
}

/* Open the files the index names, in sorted order. */
static int
open_indexed(struct safetensors *st, const struct json *wm, char **files, size_t nfiles)
{
	size_t i;

	for (i = 0; i < wm->n; i++) {
		const char *f = wm->items[i].type == JSON_STRING ? wm->items[i].str : NULL;

		if (f == NULL || f[0] == '\0' || strchr(f, '/') != NULL || f[0] == '.')
			return util_err(st->err, "%s/model.safetensors.index.json: weight_map['%s'] "
			    "is not a file name", st->dir, wm->keys[i]);
	}
	for (i = 0; i < nfiles; i++) {
		char *p;
		int rc;

		if (!listed(wm, files[i]))
			continue;
		if ((p = st_join(st->dir, files[i])) == NULL)
			return util_err(st->err, "out of memory");
		rc = add_shard(st, p);
		free(p);
		if (rc != 0)
			return -1;
	}
	return 0;
}

/* Every weight_map entry must name a tensor found in that file. */
static int
check_weight_map(struct safetensors *st, const struct json *wm)
{
	size_t i;

	for (i = 0; i < wm->n; i++) {
		const struct safetensors_tensor *t = safetensors_find(st, wm->keys[i]);
		const char *p;

		if (t == NULL)
			return util_err(st->err, "%s/model.safetensors.index.json: tensor '%s' is in no "
			    "shard ('%s' missing?)", st->dir, wm->keys[i], wm->items[i].str);
		p = strrchr(st->shards[t->shard].path, '/');
		if (strcmp(p ? p + 1 : st->shards[t->shard].path, wm->items[i].str) != 0)
			return util_err(st->err, "%s/model.safetensors.index.json: tensor '%s' "
			    "is in '%s', not '%s'", st->dir, wm->keys[i],
			    st->shards[t->shard].path, wm->items[i].str);
	}
	return 0;
}

/* Files the index does not list: added unless they repeat a listed name. */
static int
open_unlisted(struct safetensors *st, const struct json *wm, char **files, size_t nfiles)
{
	size_t i, j;

	for (i = 0; i < nfiles; i++) {
		size_t nt0 = st->nt;
		int dup = 0, rc;
		char *p;

		if (wm != NULL && listed(wm, files[i]))
			continue;
		if ((p = st_join(st->dir, files[i])) == NULL)
			return util_err(st->err, "out of memory");
		rc = add_shard(st, p);
		free(p);
		if (rc != 0)
			return -1;
		for (j = nt0; j < st->nt && !dup; j++)
			dup = safetensors_find(st, st->t[j].name) != NULL;
		if (dup)
			drop_last_shard(st, nt0);
		else if (build_index(st) != 0)
			return -1;
	}
	return 0;
}

static int
open_dir(struct safetensors *st)
{
	struct json *idx = NULL;
	const struct json *wm = NULL;
	char **files;
	size_t nfiles, i;
	int rc = -1;

	if (st_read_json(st, "config.json", &st->config) != 0)
		return -1;
	if (st_read_json(st, "model.safetensors.index.json", &idx) != 0)
		return -1;
	if (idx != NULL) {
		wm = json_get(idx, "weight_map");
		if (wm == NULL || wm->type != JSON_OBJECT) {
			util_err(st->err, "%s/model.safetensors.index.json: no 'weight_map' object",
			    st->dir);
			json_free(idx);
			return -1;
		}
	}
	if ((files = list_shards(st, &nfiles)) == NULL) {
		json_free(idx);
		return -1;
	}
	if (nfiles == 0)
		util_err(st->err, "%s: no .safetensors file", st->dir);
	else if (wm == NULL || (open_indexed(st, wm, files, nfiles) == 0 && build_index(st) == 0 &&
	    check_weight_map(st, wm) == 0))
		rc = open_unlisted(st, wm, files, nfiles);
	if (rc == 0)
		rc = build_index(st);
	for (i = 0; i < nfiles; i++)
		free(files[i]);
	free(files);
	json_free(idx);
	return rc;
}

struct safetensors *
safetensors_open(const char *path, char *err)
{
	struct safetensors *st = st_new(err);
	struct stat sb;
	int rc;

	if (st == NULL)
		return NULL;
	if (stat(path, &sb) != 0) {
		util_err(err, "%s: %s", path, strerror(errno));
		free(st);
		return NULL;
	}
	if (S_ISDIR(sb.st_mode)) {
		size_t n = strlen(path);

		while (n > 1 && path[n - 1] == '/')	/* "A/" is "A": general.name comes from it */
			n--;
		st->dir = strndup(path, n);
		rc = st->dir ? open_dir(st) : util_err(st->err, "out of memory");
	} else {
		const char *slash = strrchr(path, '/');

		st->dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
		rc = st->dir == NULL ? util_err(st->err, "out of memory") :
		    st_read_json(st, "config.json", &st->config);
		if (rc == 0)
			rc = add_shard(st, path);
		if (rc == 0)
			rc = build_index(st);
	}
	if (rc != 0) {
		util_err(err, "%s", st->err);
		safetensors_close(st);
		return NULL;
	}
	return st;
}

/* Keep p until close; returns p, or NULL (p freed) when out of memory. */
void *
st_keep(struct safetensors *st, void *p)
{
	if (p == NULL)
		return NULL;
	if (grow((void **)&st->allocs, &st->capallocs, st->nallocs + 1, sizeof *st->allocs) != 0) {
		free(p);
		return NULL;
	}
	st->allocs[st->nallocs++] = p;
	return p;
}
