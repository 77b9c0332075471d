/*
 * st-dump CHECKPOINT [OUTDIR]: print the conversion plan of a safetensors
 * checkpoint (KVs, then one line per GGUF tensor: name, ne, source dtype,
 * verbatim flag) and, with OUTDIR, write each tensor's float32 values to
 * OUTDIR/<gguf name>.f32, read in blocks of a few rows as a converter would.
 * --nomtp plans without the MTP block; --tokenizer adds tokenizer.ggml.*;
 * --kvjson prints only the metadata, as one JSON object (arrays in full).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "safetensors.h"
#include "util.h"

static void
print_kv(const struct safetensors_kv *kv)
{
	uint64_t i;

	printf("kv\t%s\t", kv->key);
	switch (kv->type) {
	case SAFETENSORS_KV_U32: printf("u32\t%u\n", kv->v.u32); return;
	case SAFETENSORS_KV_I32: printf("i32\t%d\n", kv->v.i32); return;
	case SAFETENSORS_KV_F32: printf("f32\t%.9g\n", kv->v.f32); return;
	case SAFETENSORS_KV_BOOL: printf("bool\t%d\n", kv->v.b); return;
	case SAFETENSORS_KV_STR: printf("str\t%zu\n", kv->slen); return;
	}
	printf("arr\t%llu", (unsigned long long)kv->n);
	for (i = 0; i < kv->n && i < 8; i++) {
		if (kv->arr_type == SAFETENSORS_KV_I32)
			printf("\t%d", kv->i32[i]);
		else if (kv->arr_type == SAFETENSORS_KV_F32)
			printf("\t%g", kv->f32[i]);
		else
			printf("\t%zu", kv->strlens[i]);
	}
	printf("\n");
}

static void
put_kv_json(const struct safetensors_kv *kv)
{
	uint64_t i;

	switch (kv->type) {
	case SAFETENSORS_KV_U32: printf("%u", kv->v.u32); return;
	case SAFETENSORS_KV_I32: printf("%d", kv->v.i32); return;
	case SAFETENSORS_KV_F32: printf("%.9g", kv->v.f32); return;
	case SAFETENSORS_KV_BOOL: printf(kv->v.b ? "true" : "false"); return;
	case SAFETENSORS_KV_STR: json_put_str(stdout, kv->s, kv->slen, 0); return;
	}
	printf("[");
	for (i = 0; i < kv->n; i++) {
		if (i)
			printf(",");
		if (kv->arr_type == SAFETENSORS_KV_I32)
			printf("%d", kv->i32[i]);
		else if (kv->arr_type == SAFETENSORS_KV_F32)
			printf("%.9g", kv->f32[i]);
		else
			json_put_str(stdout, kv->strs[i], kv->strlens[i], 0);
	}
	printf("]");
}

static int
dump(const struct safetensors_out *o, const char *dir, char *err)
{
	char path[1024];
	int64_t r, blk = 3;
	float *buf = malloc((size_t)(o->ne[0] * blk) * sizeof *buf);
	FILE *fp;
	int rc = 0;

	snprintf(path, sizeof path, "%s/%s.f32", dir, o->name);
	if (buf == NULL || (fp = fopen(path, "wb")) == NULL) {
		free(buf);
		return util_err(err, "%s: cannot write", path);
	}
	for (r = 0; r < o->n_rows && rc == 0; r += blk) {
		int64_t n = o->n_rows - r < blk ? o->n_rows - r : blk;

		rc = safetensors_read_rows(o, r, n, buf, err);
		if (rc == 0 && fwrite(buf, sizeof *buf, (size_t)(n * o->ne[0]), fp) != (size_t)(n * o->ne[0]))
			rc = util_err(err, "%s: write failed", path);
	}
	fclose(fp);
	free(buf);
	return rc;
}

int
main(int argc, char *argv[])
{
	char err[UTIL_ERRLEN];
	struct safetensors *st;
	int nomtp = 0, tok = 0, kvjson = 0;
	size_t i;

	while (argc > 1 && argv[1][0] == '-' && argv[1][1] == '-') {
		if (strcmp(argv[1], "--nomtp") == 0)
			nomtp = 1;
		else if (strcmp(argv[1], "--tokenizer") == 0)
			tok = 1;
		else if (strcmp(argv[1], "--kvjson") == 0)
			kvjson = 1;
		argc--, argv++;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: st-dump [--nomtp] [--tokenizer] CHECKPOINT [OUTDIR]\n");
		return 2;
	}
	if ((st = safetensors_open(argv[1], err)) == NULL) {
		fprintf(stderr, "st-dump: %s\n", err);
		return 1;
	}
	if (safetensors_plan(st, nomtp) != 0 || (tok && safetensors_plan_tokenizer(st, NULL) != 0)) {
		fprintf(stderr, "st-dump: %s\n", safetensors_errmsg(st));
		safetensors_close(st);
		return 1;
	}
	if (kvjson) {
		printf("{");
		for (i = 0; i < safetensors_kv_count(st); i++) {
			printf(i ? ",\n" : "\n");
			json_put_str(stdout, safetensors_kv(st, i)->key, strlen(safetensors_kv(st, i)->key), 0);
			printf(": ");
			put_kv_json(safetensors_kv(st, i));
		}
		printf("\n}\n");
		safetensors_close(st);
		return 0;
	}
	printf("arch\t%s\n", safetensors_arch(st));
	for (i = 0; i < safetensors_kv_count(st); i++)
		print_kv(safetensors_kv(st, i));
	for (i = 0; i < safetensors_out_count(st); i++) {
		const struct safetensors_out *o = safetensors_out(st, i);

		printf("tensor\t%s\t%d\t%lld\t%lld\t%lld\t%lld\t%s\t%d\t%s\n", o->name, o->n_dims,
		    (long long)o->ne[0], (long long)o->ne[1], (long long)o->ne[2], (long long)o->ne[3],
		    safetensors_dtype_name(o->src_dtype), o->verbatim, o->src != NULL ? o->src->name : "-");
		if (argc > 2 && dump(o, argv[2], err) != 0) {
			fprintf(stderr, "st-dump: %s\n", err);
			safetensors_close(st);
			return 1;
		}
	}
	safetensors_close(st);
	return 0;
}
