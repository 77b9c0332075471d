/*
 * quant-nvfp4: quantize a GGUF, or convert and quantize a Hugging Face
 * safetensors checkpoint, to GGUF with per-tensor type rules.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "quant.h"
#include "safetensors.h"
#include "util.h"

#define MAX_RULES 64
#define LLAMA_FTYPE_GUESSED 1024

struct rule {
	regex_t	re;
	const char *text;	/* "REGEX=TYPE" or "REGEX" as given */
	int	type;		/* output type; -1 for --keep */
};

struct opts {
	int	bulk;		/* --type */
	int	threads;
	int	dry_run, verbose, nomtp, progress;
	const char *pre;	/* --tokenizer-pre */
	struct rule rules[MAX_RULES];	/* --keep and --tensor-type, in order given */
	int	nrules;
};

/* One tensor of the input, in output order. */
struct tensor {
	const char *name;
	int	n_dims;
	int64_t	ne[4];
	int64_t	n_rows;
	int	src_type;	/* ggml type of the source bits; -1 when none (FP8, ...) */
	const char *src_name;	/* "BF16", "Q4_K", ... for the plan */
	const struct safetensors_out *hf;	/* HF input */
	const uint8_t *data;	/* GGUF input: the tensor's bytes */
	int	out_type;
	int	verbatim;	/* copy the source bytes */
	const char *why;	/* the rule that chose out_type */
	int	fallback;	/* out_type replaced one whose block does not divide ne[0] */
};

struct input {
	struct safetensors *st;
	struct gguf *g;
	char	*tmp;		/* stdin spooled to this file, unlinked after open */
	struct tensor *t;	/* [n] */
	size_t	n;
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [-nv] [-t threads] [--type type] [--tensor-type regex=type]\n"
	    "       [--keep regex] [--no-mtp] [--tokenizer-pre name] in out\n", prog);
	return status;
}

/* ---- input ---- */

/* Copy stdin to a temporary file so it can be mapped like any GGUF. */
static char *
spool_stdin(char *err)
{
	const char *dir = getenv("TMPDIR");
	char *path = malloc(4096);
	char buf[1 << 16];
	size_t n;
	FILE *fp;
	int fd, bad;

	if (path == NULL) {
		util_err(err, "<stdin>: out of memory");
		return NULL;
	}
	snprintf(path, 4096, "%s/quant-nvfp4.XXXXXX", dir && *dir ? dir : "/tmp");
	if ((fd = mkstemp(path)) < 0 || (fp = fdopen(fd, "wb")) == NULL) {
		util_err(err, "<stdin>: %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd), unlink(path);
		free(path);
		return NULL;
	}
	while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
		if (fwrite(buf, 1, n, fp) != n)
			break;
	bad = ferror(stdin) || ferror(fp);
	if (fclose(fp) != 0 || bad) {
		util_err(err, "<stdin>: spooling to %s: %s", path, strerror(errno));
		unlink(path);
		free(path);
		return NULL;
	}
	return path;
}

static int
is_gguf_file(const char *path)
{
	char magic[4];
	FILE *fp = fopen(path, "rb");
	int yes;

	if (fp == NULL)
		return 0;
	yes = fread(magic, 1, 4, fp) == 4 && memcmp(magic, "GGUF", 4) == 0;
	fclose(fp);
	return yes;
}

static int
open_hf(struct input *in, const char *path, const struct opts *o, char *err)
{
	size_t i;

	if ((in->st = safetensors_open(path, err)) == NULL)
		return -1;
	if (safetensors_plan(in->st, o->nomtp) != 0 ||
	    safetensors_plan_tokenizer(in->st, o->pre) != 0) {
		const char *m = safetensors_errmsg(in->st);

		if (strncmp(m, path, strlen(path)) == 0)	/* already names the checkpoint */
			return util_err(err, "%s", m);
		return util_err(err, "%s: %s", path, m);
	}
	in->n = safetensors_out_count(in->st);
	if ((in->t = calloc(in->n ? in->n : 1, sizeof *in->t)) == NULL)
		return util_err(err, "out of memory");
	for (i = 0; i < in->n; i++) {
		const struct safetensors_out *so = safetensors_out(in->st, i);
		struct tensor *t = &in->t[i];

		t->name = so->name;
		t->n_dims = so->n_dims;
		memcpy(t->ne, so->ne, sizeof t->ne);
		t->n_rows = so->n_rows;
		t->src_type = so->nvfp4 ? QUANT_NVFP4 : safetensors_dtype_ggml(so->src_dtype);
		t->src_name = so->nvfp4 ? "NVFP4" : safetensors_dtype_name(so->src_dtype);
		t->hf = so;
	}
	return 0;
}

static int
open_gguf(struct input *in, const char *path, char *err)
{
	size_t i;

	if ((in->g = gguf_open(path, err)) == NULL)
		return -1;
	in->n = (size_t)gguf_n_tensors(in->g);
	if ((in->t = calloc(in->n ? in->n : 1, sizeof *in->t)) == NULL)
		return util_err(err, "out of memory");
	for (i = 0; i < in->n; i++) {
		const struct gguf_tensor *gt = gguf_tensor(in->g, (int64_t)i);
		struct tensor *t = &in->t[i];
		int d;

		t->name = gt->name;
		t->n_dims = gt->n_dims < 1 ? 1 : gt->n_dims;
		memcpy(t->ne, gt->ne, sizeof t->ne);
		for (d = 1, t->n_rows = 1; d < 4; d++)
			t->n_rows *= t->ne[d];
		t->src_type = gt->type;
		t->src_name = quant_name(gt->type);
		if ((t->data = gguf_tensor_data(in->g, (int64_t)i)) == NULL && gt->nbytes > 0)
			return util_err(err, "%s: tensor '%s': no data", path, t->name);
	}
	return 0;
}

static int
input_open(struct input *in, const char *path, const struct opts *o, char *err)
{
	struct stat sb;

	memset(in, 0, sizeof *in);
	if (strcmp(path, "-") == 0) {
		char why[UTIL_ERRLEN];
		int rc;

		if ((in->tmp = spool_stdin(err)) == NULL)
			return -1;
		rc = open_gguf(in, in->tmp, why);
		unlink(in->tmp);
		if (rc != 0)	/* name stdin, not the spool file */
			return util_err(err, "<stdin>%s", strchr(why, ':') ? strchr(why, ':') : why);
		return 0;
	}
	if (stat(path, &sb) != 0)
		return util_err(err, "%s: %s", path, strerror(errno));
	if (!S_ISDIR(sb.st_mode) && is_gguf_file(path))
		return open_gguf(in, path, err);
	return open_hf(in, path, o, err);
}

static void
input_close(struct input *in)
{
	safetensors_close(in->st);
	gguf_close(in->g);
	free(in->tmp);
	free(in->t);
}

/* ---- the plan ---- */

static int
ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && strcmp(s + n - m, suf) == 0;
}

static int
is_int(int type)
{
	return type == QUANT_I8 || type == QUANT_I16 || type == QUANT_I32 || type == QUANT_I64;
}

static int
is_float(int type)
{
	return type == QUANT_F32 || type == QUANT_F16 || type == QUANT_BF16;
}

/* The seed artifact's recipe: F32 for 1-D, norms, the conv and routers; Q5_K for embeddings and head; bulk for the rest. */
static int
default_type(const struct tensor *t, int bulk, const char **why)
{
	const char *n = t->name;

	if (t->n_rows == 1 || t->n_dims == 1) {
		*why = "1-D";
		return QUANT_F32;
	}
	if (ends_with(n, "norm.weight") || strstr(n, "ssm_conv1d") != NULL) {
		*why = ends_with(n, "norm.weight") ? "norm" : "conv";
		return QUANT_F32;
	}
	if (strstr(n, ".ffn_gate_inp") != NULL) {	/* as llama.cpp's converter keeps them */
		*why = "router";
		return QUANT_F32;
	}
	if (strcmp(n, "token_embd.weight") == 0 || strcmp(n, "output.weight") == 0 ||
	    ends_with(n, ".nextn.embed_tokens.weight") || ends_with(n, ".nextn.shared_head_head.weight")) {
		*why = "embd/output";
		return is_float(bulk) ? bulk : QUANT_Q5_K;
	}
	*why = "bulk";
	return bulk;
}

static int
plan_one(struct tensor *t, const struct opts *o, char *err)
{
	int i, want;

	if (t->hf != NULL && t->hf->nvfp4) {	/* the checkpoint's own blocks, never re-encoded */
		t->out_type = QUANT_NVFP4;
		t->verbatim = 1;
		t->why = "NVFP4 source";
		return 0;
	}
	t->out_type = -2;
	for (i = 0; i < o->nrules && t->out_type == -2; i++) {
		if (regexec(&o->rules[i].re, t->name, 0, NULL, 0) != 0)
			continue;
		t->why = o->rules[i].text;
		t->out_type = o->rules[i].type;
	}
	if (t->out_type == -1) {	/* --keep */
		if (t->src_type < 0)
			return util_err(err, "tensor '%s': --keep: %s has no GGUF type", t->name, t->src_name);
		t->out_type = t->src_type;
		t->verbatim = t->hf == NULL || t->hf->verbatim;
		if (!t->verbatim && !quant_can_quantize(t->out_type))
			return util_err(err, "tensor '%s': --keep: values are transformed and %s cannot be "
			    "re-encoded", t->name, t->src_name);
		return 0;
	}
	if (t->out_type == -2 && is_int(t->src_type)) {	/* ids (a d2t map), not weights */
		t->out_type = t->src_type;
		t->verbatim = 1;
		t->why = "integer";
		return 0;
	}
	if (t->out_type == -2)
		t->out_type = default_type(t, o->bulk, &t->why);
	want = t->out_type;
	t->out_type = quant_fit_block(want, t->ne[0]);
	t->fallback = t->out_type != want;
	if (t->src_type < 0 && t->hf == NULL)
		return util_err(err, "tensor '%s': unknown source type", t->name);
	if (t->hf == NULL && !quant_can_dequantize(t->src_type))
		return util_err(err, "tensor '%s': cannot dequantize %s (use --keep)", t->name, t->src_name);
	if (t->hf == NULL && t->src_type == t->out_type)
		t->verbatim = 1;	/* same type: the bytes are already the answer */
	return 0;
}

/* 1 when the GGUF input has a "<name less .weight>.scale" sidecar for t (NVFP4 per-tensor scale) */
static int
has_scale(const struct input *in, const struct tensor *t)
{
	char want[128];
	size_t i, n = strlen(t->name);

	if (in->g == NULL || !ends_with(t->name, ".weight") || n >= sizeof want)
		return 0;
	snprintf(want, sizeof want, "%.*s.scale", (int)(n - 7), t->name);
	for (i = 0; i < in->n; i++)
		if (strcmp(in->t[i].name, want) == 0)
			return 1;
	return 0;
}

static int
plan(struct input *in, const struct opts *o, char *err)
{
	size_t i;

	for (i = 0; i < in->n; i++) {
		struct tensor *t = &in->t[i];

		if (plan_one(t, o, err) != 0)
			return -1;
		if (!t->verbatim && has_scale(in, t))
			return util_err(err, "tensor '%s': has a .scale sidecar, which re-encoding would "
			    "drop (use --keep)", t->name);
	}
	return 0;
}

static size_t
out_bytes(const struct tensor *t)
{
	return quant_row_size(t->out_type, t->ne[0]) * (size_t)t->n_rows;
}

static void
print_plan(FILE *fp, const struct input *in)
{
	uint64_t total = 0;
	size_t i;

	fprintf(fp, "%-40s %-24s %-8s %-8s %12s  %s\n", "tensor", "shape", "from", "to", "bytes", "rule");
	for (i = 0; i < in->n; i++) {
		const struct tensor *t = &in->t[i];
		char shape[64];
		int d, k = 0;

		for (d = 0; d < t->n_dims; d++)
			k += snprintf(shape + k, sizeof shape - k, "%s%lld", d ? "x" : "", (long long)t->ne[d]);
		fprintf(fp, "%-40s %-24s %-8s %-8s %12zu  %s%s%s\n", t->name, shape, t->src_name,
		    quant_name(t->out_type), out_bytes(t), t->verbatim ? "copy " : "", t->why,
		    t->fallback ? " (block fallback)" : "");
		total += out_bytes(t);
	}
	fprintf(fp, "%zu tensors, %llu bytes of tensor data\n", in->n, (unsigned long long)total);
}

/* ---- quantizing one tensor, on threads ---- */

struct work {
	const struct tensor *t;
	uint8_t	*out;		/* [n_rows][row_bytes] */
	size_t	row_bytes;
	int64_t	chunk;		/* rows per grab */
	atomic_llong next;
	int	verbose;
	pthread_mutex_t mu;
	atomic_int failed;
	char	err[UTIL_ERRLEN];
	double	se, sr;		/* sum of squared error, of squared source (with -v) */
};

/* Rows [r0, r0+n) of the source as float32. */
static int
src_rows(const struct tensor *t, int64_t r0, int64_t n, float *dst, char *err)
{
	size_t rb;
	int64_t i;

	if (t->hf != NULL)
		return safetensors_read_rows(t->hf, r0, n, dst, err);
	rb = quant_row_size(t->src_type, t->ne[0]);
	for (i = 0; i < n; i++)
		if (quant_dequantize_row(t->src_type, t->data + (size_t)(r0 + i) * rb,
		    dst + i * t->ne[0], t->ne[0]) != 0)
			return util_err(err, "tensor '%s': cannot dequantize %s", t->name, t->src_name);
	return 0;
}

static int
do_chunk(struct work *w, int64_t r0, int64_t n, float *x, float *y, double *se, double *sr)
{
	const struct tensor *t = w->t;
	int64_t i, j, ne0 = t->ne[0];
	char err[UTIL_ERRLEN];

	if (src_rows(t, r0, n, x, err) != 0)
		goto fail;
	for (i = 0; i < n; i++) {
		uint8_t *q = w->out + (size_t)(r0 + i) * w->row_bytes;

		if (quant_quantize_row(t->out_type, x + i * ne0, q, ne0, err) != 0)
			goto fail;
		if (!w->verbose)
			continue;
		if (quant_dequantize_row(t->out_type, q, y, ne0) != 0) {
			util_err(err, "cannot dequantize %s", quant_name(t->out_type));
			goto fail;
		}
		for (j = 0; j < ne0; j++) {
			double d = (double)y[j] - x[i * ne0 + j];

			*se += d * d;
			*sr += (double)x[i * ne0 + j] * x[i * ne0 + j];
		}
	}
	return 0;
fail:
	pthread_mutex_lock(&w->mu);
	if (!w->failed)
		util_err(w->err, "tensor '%s' row %lld: %s", t->name, (long long)r0, err);
	w->failed = 1;
	pthread_mutex_unlock(&w->mu);
	return -1;
}

static void *
worker(void *arg)
{
	struct work *w = arg;
	int64_t ne0 = w->t->ne[0];
	float *x = malloc((size_t)(w->chunk * ne0) * sizeof *x), *y = malloc((size_t)ne0 * sizeof *y);
	double se = 0, sr = 0;
	int64_t r0;

	if (x == NULL || y == NULL) {
		pthread_mutex_lock(&w->mu);
		util_err(w->err, "tensor '%s': out of memory", w->t->name);
		w->failed = 1;
		pthread_mutex_unlock(&w->mu);
	}
	while (x != NULL && y != NULL && !w->failed &&
	    (r0 = atomic_fetch_add(&w->next, w->chunk)) < w->t->n_rows) {
		int64_t n = w->t->n_rows - r0 < w->chunk ? w->t->n_rows - r0 : w->chunk;

		if (do_chunk(w, r0, n, x, y, &se, &sr) != 0)
			break;
	}
	pthread_mutex_lock(&w->mu);
	w->se += se;
	w->sr += sr;
	pthread_mutex_unlock(&w->mu);
	free(x);
	free(y);
	return NULL;
}

/* Quantize t into out[out_bytes(t)] on nthreads threads; rms error into *rms, *rel (with -v). */
static int
quantize_tensor(const struct tensor *t, uint8_t *out, int nthreads, int verbose, double *rms,
    double *rel, char *err)
{
	pthread_t th[256];
	struct work w;
	int i, n = 0;

	*rms = *rel = 0;
	if (t->n_rows <= 0 || t->ne[0] <= 0)	/* an empty tensor: nothing to quantize */
		return 0;
	memset(&w, 0, sizeof w);
	w.t = t;
	w.out = out;
	w.row_bytes = quant_row_size(t->out_type, t->ne[0]);
	w.chunk = t->ne[0] >= 65536 ? 1 : 65536 / t->ne[0];
	w.verbose = verbose;
	atomic_init(&w.next, 0);
	atomic_init(&w.failed, 0);
	pthread_mutex_init(&w.mu, NULL);
	if (nthreads > t->n_rows / w.chunk + 1)
		nthreads = (int)(t->n_rows / w.chunk + 1);
	for (i = 1; i < nthreads; i++, n++)
		if (pthread_create(&th[n], NULL, worker, &w) != 0)
			break;
	worker(&w);
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&w.mu);
	if (w.failed)
		return util_err(err, "%s", w.err);
	*rms = t->n_rows > 0 && t->ne[0] > 0 ? sqrt(w.se / (double)(t->n_rows * t->ne[0])) : 0;
	*rel = w.sr > 0 ? sqrt(w.se / w.sr) : 0;
	return 0;
}

/* ---- output ---- */

/* llama_ftype of a bulk type (llama.h); GUESSED for the rest */
static uint32_t
file_type(int bulk)
{
	switch (bulk) {
	case QUANT_F32: return 0;
	case QUANT_F16: return 1;
	case QUANT_Q4_0: return 2;
	case QUANT_Q4_1: return 3;
	case QUANT_Q8_0: return 7;
	case QUANT_Q5_0: return 8;
	case QUANT_Q5_1: return 9;
	case QUANT_Q2_K: return 10;
	case QUANT_Q3_K: return 12;	/* Q3_K_M */
	case QUANT_Q4_K: return 15;	/* Q4_K_M */
	case QUANT_Q5_K: return 17;	/* Q5_K_M */
	case QUANT_Q6_K: return 18;
	case QUANT_BF16: return 32;
	case QUANT_MXFP4: return 38;
	case QUANT_NVFP4: return 39;
	}
	return LLAMA_FTYPE_GUESSED;
}

static int
put_hf_kv(struct gguf_writer *w, const struct safetensors_kv *kv)
{
	switch (kv->type) {
	case SAFETENSORS_KV_U32: return gguf_writer_add_u32(w, kv->key, kv->v.u32);
	case SAFETENSORS_KV_I32: return gguf_writer_add_i32(w, kv->key, kv->v.i32);
	case SAFETENSORS_KV_F32: return gguf_writer_add_f32(w, kv->key, kv->v.f32);
	case SAFETENSORS_KV_BOOL: return gguf_writer_add_bool(w, kv->key, kv->v.b);
	case SAFETENSORS_KV_STR: return gguf_writer_add_str(w, kv->key, kv->s, kv->slen);
	}
	switch (kv->arr_type) {
	case SAFETENSORS_KV_I32: return gguf_writer_add_arr(w, kv->key, GGUF_TYPE_INT32, kv->i32, kv->n);
	case SAFETENSORS_KV_F32: return gguf_writer_add_arr(w, kv->key, GGUF_TYPE_FLOAT32, kv->f32, kv->n);
	case SAFETENSORS_KV_BOOL: return gguf_writer_add_arr(w, kv->key, GGUF_TYPE_BOOL, kv->u8, kv->n);
	}
	return gguf_writer_add_arr_str(w, kv->key, kv->strs, kv->strlens, kv->n);
}

/* Metadata: the input's (a GGUF's, or the HF plan's), general.file_type set. */
static int
put_kvs(struct gguf_writer *w, const struct input *in, const struct opts *o)
{
	int have_ft = 0;
	int64_t i;

	if (in->g != NULL) {
		for (i = 0; i < gguf_n_kv(in->g); i++) {
			if (strcmp(gguf_kv_key(in->g, i), "general.file_type") == 0) {
				have_ft = 1;
				if (gguf_writer_add_u32(w, "general.file_type", file_type(o->bulk)) != 0)
					return -1;
			} else if (gguf_writer_copy_kv(w, in->g, i) != 0)
				return -1;
		}
	} else {
		for (i = 0; i < (int64_t)safetensors_kv_count(in->st); i++)
			if (put_hf_kv(w, safetensors_kv(in->st, (size_t)i)) != 0)
				return -1;
		if (gguf_writer_add_u32(w, "general.quantization_version", 2) != 0)
			return -1;
	}
	if (!have_ft && gguf_writer_add_u32(w, "general.file_type", file_type(o->bulk)) != 0)
		return -1;
	return 0;
}

/* The verbatim bytes of t, a block of rows at a time. */
static int
copy_tensor(struct gguf_writer *w, const struct tensor *t, char *err)
{
	size_t rb = quant_row_size(t->out_type, t->ne[0]);
	int64_t r, step = rb >= (1 << 20) ? 1 : (1 << 20) / (int64_t)rb;
	uint8_t *buf;

	if (t->hf == NULL)
		return gguf_writer_write(w, t->data, out_bytes(t)) == 0 ? 0 :
		    util_err(err, "%s", gguf_writer_errmsg(w));
	if ((buf = malloc((size_t)step * rb)) == NULL)
		return util_err(err, "out of memory");
	for (r = 0; r < t->n_rows; r += step) {
		int64_t n = t->n_rows - r < step ? t->n_rows - r : step;

		if (safetensors_read_raw(t->hf, r, n, buf, err) != 0 ||
		    (gguf_writer_write(w, buf, (size_t)n * rb) != 0 &&
		    util_err(err, "%s", gguf_writer_errmsg(w)))) {
			free(buf);
			return -1;
		}
	}
	free(buf);
	return 0;
}

/* Drop the source pages of t from memory once written: the mappings stay, RSS stays one tensor. */
static void
release_source(const struct tensor *t)
{
	long pg = sysconf(_SC_PAGESIZE);
	const uint8_t *p = t->hf ? (t->hf->src ? t->hf->src->data : NULL) : t->data;
	uint64_t n = t->hf ? (t->hf->src ? t->hf->src->nbytes : 0) :
	    (uint64_t)quant_row_size(t->src_type, t->ne[0]) * t->n_rows;
	uintptr_t a = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1), b = ((uintptr_t)p + n) & ~(uintptr_t)(pg - 1);

	if (p != NULL && pg > 0 && b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

static int
write_tensor(struct gguf_writer *w, const struct tensor *t, const struct opts *o, char *err)
{
	double rms = 0, rel = 0;
	uint8_t *buf;
	int rc;

	if (t->verbatim) {
		if (o->verbose)
			fprintf(stderr, "%s: %-40s %-6s copied\n", prog, t->name, quant_name(t->out_type));
		return copy_tensor(w, t, err);
	}
	if ((buf = malloc(out_bytes(t) ? out_bytes(t) : 1)) == NULL)
		return util_err(err, "tensor '%s': out of memory for %zu bytes", t->name, out_bytes(t));
	rc = quantize_tensor(t, buf, o->threads, o->verbose, &rms, &rel, err);
	if (rc == 0 && gguf_writer_write(w, buf, out_bytes(t)) != 0)
		rc = util_err(err, "%s", gguf_writer_errmsg(w));
	free(buf);
	if (rc == 0 && o->verbose)
		fprintf(stderr, "%s: %-40s %-6s -> %-6s rms error %.4g (relative %.4g)\n", prog, t->name,
		    t->src_name, quant_name(t->out_type), rms, rel);
	return rc;
}

static int
write_all(struct util_ofile *f, const struct input *in, const struct opts *o, char *err)
{
	struct gguf_writer *w = gguf_writer_new(f->fp);
	struct util_progress pr;
	uint64_t done = 0, total = 0;
	size_t i;
	int rc = -1;

	if (w == NULL)
		return util_err(err, "out of memory");
	if (put_kvs(w, in, o) != 0)
		goto werr;
	for (i = 0; i < in->n; i++) {
		const struct tensor *t = &in->t[i];

		if (gguf_writer_add_tensor(w, t->name, t->out_type, t->n_dims, t->ne) != 0)
			goto werr;
		total += out_bytes(t);
	}
	if (gguf_writer_write_header(w) != 0)
		goto werr;
	util_progress_begin(&pr, o->progress, "quantizing");
	for (i = 0; i < in->n; i++) {
		if (write_tensor(w, &in->t[i], o, err) != 0)
			goto out;
		release_source(&in->t[i]);
		done += out_bytes(&in->t[i]);
		util_progress(&pr, done, total);
	}
	util_progress_end(&pr);
	if (gguf_writer_finish(w) != 0)
		goto werr;
	rc = 0;
	goto out;
werr:
	util_err(err, "%s", gguf_writer_errmsg(w));
out:
	gguf_writer_free(w);
	return rc;
}

/* ---- main ---- */

static int
run(const char *inpath, const char *outpath, const struct opts *o)
{
	char err[UTIL_ERRLEN];
	struct util_ofile *f;
	struct input in;
	int rc = 1;

	if (input_open(&in, inpath, o, err) != 0 || plan(&in, o, err) != 0) {
		warnmsg("%s", err);
		input_close(&in);
		return 1;
	}
	if (o->dry_run) {
		print_plan(stdout, &in);
		input_close(&in);
		return 0;
	}
	if ((f = util_ofile_open(outpath, err)) == NULL) {
		warnmsg("%s", err);
	} else if (write_all(f, &in, o, err) != 0) {
		warnmsg("%s: %s", outpath, err);
		util_ofile_abort(f);
	} else if (util_ofile_commit(f, err) != 0) {
		warnmsg("%s", err);
	} else
		rc = 0;
	input_close(&in);
	return rc;
}

/* "REGEX=TYPE" (type >= 0 wanted) or "REGEX" (--keep) into a rule; -1 on misuse. */
static int
add_rule(struct opts *o, const char *arg, int keep)
{
	struct rule *r = &o->rules[o->nrules];
	char *re = strdup(arg), *eq;
	int rc;

	if (o->nrules == MAX_RULES || re == NULL) {
		warnmsg("too many --keep / --tensor-type rules (at most %d)", MAX_RULES);
		free(re);
		return -1;
	}
	r->text = arg;
	r->type = -1;
	if (!keep) {
		if ((eq = strrchr(re, '=')) == NULL) {
			warnmsg("--tensor-type '%s': not REGEX=TYPE", arg);
			free(re);
			return -1;
		}
		*eq = '\0';
		r->type = quant_from_name(eq + 1);
		if (r->type < 0 || !quant_can_quantize(r->type)) {
			warnmsg("--tensor-type '%s': '%s' is not a type quant-nvfp4 can write", arg, eq + 1);
			free(re);
			return -1;
		}
	}
	if ((rc = regcomp(&r->re, re, REG_EXTENDED | REG_NOSUB)) != 0) {
		char buf[256];

		regerror(rc, &r->re, buf, sizeof buf);
		warnmsg("'%s': %s", re, buf);
		free(re);
		return -1;
	}
	free(re);
	o->nrules++;
	return 0;
}

static int
parse_type(const char *s, int *out)
{
	int t = quant_from_name(s);

	if (t < 0 || !quant_can_quantize(t)) {
		warnmsg("--type '%s': not a type quant-nvfp4 can write", s);
		return -1;
	}
	*out = t;
	return 0;
}

int
main(int argc, char *argv[])
{
	enum { O_TYPE = 256, O_TTYPE, O_KEEP, O_NOMTP, O_PRE };
	static const struct option lopts[] = {
		{ "threads", required_argument, NULL, 't' }, { "type", required_argument, NULL, O_TYPE },
		{ "tensor-type", required_argument, NULL, O_TTYPE }, { "keep", required_argument, NULL, O_KEEP },
		{ "dry-run", no_argument, NULL, 'n' }, { "verbose", no_argument, NULL, 'v' },
		{ "no-mtp", no_argument, NULL, O_NOMTP }, { "tokenizer-pre", required_argument, NULL, O_PRE },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	static struct opts o;
	int64_t v;
	int ch, rc, i;

	prog = base_name(argv[0]);
	o.bulk = QUANT_NVFP4;
	o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (o.threads < 1 || o.threads > 256)
		o.threads = o.threads < 1 ? 1 : 256;
	while ((ch = getopt_long(argc, argv, "t:nvh", lopts, NULL)) != -1) {
		switch (ch) {
		case 't':
			if (util_parse_i64(optarg, 1, 256, &v) != 0) {
				warnmsg("-t '%s': not a thread count in [1, 256]", optarg);
				return usage(stderr, 2);
			}
			o.threads = (int)v;
			break;
		case O_TYPE: if (parse_type(optarg, &o.bulk) != 0) return usage(stderr, 2); break;
		case O_TTYPE: if (add_rule(&o, optarg, 0) != 0) return usage(stderr, 2); break;
		case O_KEEP: if (add_rule(&o, optarg, 1) != 0) return usage(stderr, 2); break;
		case O_NOMTP: o.nomtp = 1; break;
		case O_PRE: o.pre = optarg; break;
		case 'n': o.dry_run = 1; break;
		case 'v': o.verbose = 1; break;
		case 'h': return usage(stdout, 0);
		default: return usage(stderr, 2);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 2 - o.dry_run && argc != 2)
		return usage(stderr, 2);
	o.progress = !o.verbose && isatty(2);
	rc = run(argv[0], argc > 1 ? argv[1] : "-", &o);
	for (i = 0; i < o.nrules; i++)
		regfree(&o.rules[i].re);
	return finish(rc);
}
