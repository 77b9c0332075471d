#include <stdlib.h>

#include "json.h"
#include "quant.h"
#include "safetensors.h"
#include "test.h"
#include "util.h"

#ifndef DATA
#define DATA "t/data/st"
#endif

/* An in-memory file: 8-byte LE header length, hdr, then datalen bytes of 0x11. */
static unsigned char *
image(const char *hdr, size_t datalen, size_t *len)
{
	size_t h = strlen(hdr), i;
	unsigned char *b = malloc(8 + h + datalen + 1);

	for (i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)h >> (8 * i));
	memcpy(b + 8, hdr, h);
	memset(b + 8 + h, 0x11, datalen);
	*len = 8 + h + datalen;
	return b;
}

/* 1 when hdr + datalen parses; the reason lands in err otherwise. */
static int
parses(const char *hdr, size_t datalen, char *err)
{
	size_t len;
	unsigned char *b = image(hdr, datalen, &len);
	struct safetensors *st = safetensors_open_mem(b, len, err);
	int ok = st != NULL;

	safetensors_close(st);
	free(b);
	return ok;
}

TEST(parses_a_valid_header_in_offset_order)
{
	const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
	    "\"b\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[8,20]},"
	    "\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
	    "\"z\":{\"dtype\":\"BOOL\",\"shape\":[0,5],\"data_offsets\":[20,20]}}  ";
	char err[UTIL_ERRLEN];
	size_t len;
	unsigned char *b = image(h, 20, &len);
	struct safetensors *st = safetensors_open_mem(b, len, err);
	const struct safetensors_tensor *t;

	CHECK(st != NULL);
	if (st == NULL) {
		printf("#   %s\n", err);
		free(b);
		return;
	}
	CHECK_EQ_INT(safetensors_count(st), 3);
	CHECK_EQ_STR(safetensors_at(st, 0)->name, "a");	/* file-offset order */
	CHECK_EQ_STR(safetensors_at(st, 1)->name, "b");
	t = safetensors_find(st, "b");
	CHECK(t != NULL && t->dtype == SAFETENSORS_F16 && t->n_dims == 2 && t->shape[1] == 3);
	CHECK(t != NULL && t->n_elem == 6 && t->nbytes == 12);
	CHECK(t != NULL && (const unsigned char *)t->data == b + 8 + strlen(h) + 8);
	CHECK(safetensors_find(st, "z")->n_elem == 0);
	CHECK(safetensors_find(st, "__metadata__") == NULL);
	CHECK(safetensors_find(st, "c") == NULL);
	CHECK(safetensors_config(st) == NULL);
	safetensors_close(st);
	free(b);
}

TEST(rejects_malformed_headers_with_the_reason)
{
	static const struct { const char *hdr; size_t data; const char *why; } bad[] = {
		{ "[]", 0, "does not start with '{'" },
		{ "{\"a\":1}", 0, "entry is not an object" },
		{ "{\"a\":{\"dtype\":\"F17\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype 'F17'" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape[0]" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "shape[0]" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "need 8" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4, "outside the 4 data bytes" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "outside" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "4 data bytes after the last" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "expected 0" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "overlap" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "duplicate key 'a'" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "unknown field 'x'" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, "exactly" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, "overflows" },
		{ "{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,4]}}", 4, "size overflows" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "9 dimensions" },
		{ "{\"__metadata__\":{\"k\":1}}", 0, "'__metadata__.k' is not a string" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "line 1" },
	};
	char err[UTIL_ERRLEN];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		if (parses(bad[i].hdr, bad[i].data, err))
			FAILF("accepted bad header %zu: %s", i, bad[i].hdr);
		else if (strstr(err, bad[i].why) == NULL || strncmp(err, "<memory>: ", 10) != 0)
			FAILF("header %zu: error '%s' does not say '%s'", i, err, bad[i].why);
	}
}

TEST(rejects_truncated_files_and_huge_header_lengths)
{
	unsigned char b[16] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}' };
	char err[UTIL_ERRLEN];

	CHECK(safetensors_open_mem(b, 7, err) == NULL);
	CHECK(strstr(err, "truncated") != NULL);
	CHECK(safetensors_open_mem(b, 16, err) == NULL);
	CHECK(strstr(err, "past the end") != NULL);
	memset(b, 0, 8);
	b[0] = 2;
	{
		struct safetensors *st = safetensors_open_mem(b, 10, err);	/* "{}": no tensors */

		CHECK(st != NULL && safetensors_count(st) == 0);
		safetensors_close(st);
	}
}

TEST(dtype_table)
{
	CHECK_EQ_STR(safetensors_dtype_name(SAFETENSORS_BF16), "BF16");
	CHECK_EQ_STR(safetensors_dtype_name(SAFETENSORS_F8_E4M3), "F8_E4M3");
	CHECK_EQ_STR(safetensors_dtype_name(-1), "?");
	CHECK_EQ_INT(safetensors_dtype_size(SAFETENSORS_F64), 8);
	CHECK_EQ_INT(safetensors_dtype_size(SAFETENSORS_DTYPE_COUNT), 0);
	CHECK_EQ_INT(safetensors_dtype_ggml(SAFETENSORS_BF16), QUANT_BF16);
	CHECK_EQ_INT(safetensors_dtype_ggml(SAFETENSORS_F8_E4M3), -1);
}

TEST(reads_a_file_with_metadata_scalars_and_empty_tensors)
{
	char err[UTIL_ERRLEN];
	struct safetensors *st = safetensors_open(DATA "/bf16.safetensors", err);
	const struct safetensors_tensor *w;

	CHECK(st != NULL);
	if (st == NULL)
		return;
	CHECK_EQ_INT(safetensors_count(st), 4);
	CHECK_EQ_INT(safetensors_find(st, "s")->n_dims, 0);
	CHECK_EQ_INT(safetensors_find(st, "s")->n_elem, 1);
	CHECK_EQ_INT(safetensors_find(st, "e")->nbytes, 0);
	w = safetensors_find(st, "w");
	CHECK(w != NULL && w->dtype == SAFETENSORS_BF16 && ((const uint16_t *)w->data)[1] == 0xc000);
	safetensors_close(st);
}

TEST(missing_paths_and_dirs_without_shards_fail)
{
	char err[UTIL_ERRLEN];

	CHECK(safetensors_open(DATA "/nonexistent", err) == NULL);
	CHECK(strstr(err, "nonexistent: No such file") != NULL);
	CHECK(safetensors_open("t/unit", err) == NULL);
	CHECK(strstr(err, "no .safetensors file") != NULL);
}

TEST(opens_sharded_released_checkpoint_with_unlisted_mtp_file)
{
	char err[UTIL_ERRLEN];
	struct safetensors *st = safetensors_open(DATA "/qwen35", err);
	const struct json *mt;

	CHECK(st != NULL);
	if (st == NULL) {
		printf("#   %s\n", err);
		return;
	}
	CHECK_EQ_INT(safetensors_shard_count(st), 3);
	CHECK(strstr(safetensors_shard_path(st, 2), "mtp.safetensors") != NULL);
	CHECK(safetensors_find(st, "mtp.fc.weight") != NULL);
	CHECK(safetensors_find(st, "model.language_model.layers.3.mlp.up_proj.weight")->shard == 1);
	mt = safetensors_hparam(st, "linear_num_value_heads");	/* from text_config */
	CHECK(mt != NULL && mt->i == 4);
	CHECK_EQ_STR(json_get_str(safetensors_config(st), "model_type"), "qwen3_5");
	safetensors_close(st);
}

static const struct safetensors_out *
out_named(const struct safetensors *st, const char *name)
{
	size_t i;

	for (i = 0; i < safetensors_out_count(st); i++)
		if (strcmp(safetensors_out(st, i)->name, name) == 0)
			return safetensors_out(st, i);
	return NULL;
}

static const struct safetensors_kv *
kv_named(const struct safetensors *st, const char *key)
{
	size_t i;

	for (i = 0; i < safetensors_kv_count(st); i++)
		if (strcmp(safetensors_kv(st, i)->key, key) == 0)
			return safetensors_kv(st, i);
	return NULL;
}

TEST(plans_qwen35_with_mtp_and_transforms)
{
	char err[UTIL_ERRLEN];
	struct safetensors *st = safetensors_open(DATA "/qwen35", err);
	const struct safetensors_out *o;
	float row[16], raw[4];
	uint16_t h[4];

	CHECK(st != NULL && safetensors_plan(st, 0) == 0);
	if (st == NULL)
		return;
	CHECK_EQ_STR(safetensors_arch(st), "qwen35");
	CHECK_EQ_STR(safetensors_out(st, 0)->name, "token_embd.weight");
	CHECK_EQ_STR(safetensors_out(st, safetensors_out_count(st) - 1)->name, "output.weight");
	CHECK(out_named(st, "blk.4.nextn.eh_proj.weight") != NULL);
	CHECK(out_named(st, "blk.4.attn_q.weight") != NULL);
	CHECK(kv_named(st, "qwen35.block_count")->v.u32 == 5);
	CHECK(kv_named(st, "qwen35.nextn_predict_layers")->v.u32 == 1);
	CHECK(kv_named(st, "qwen35.rope.dimension_count")->v.u32 == 4);
	CHECK(kv_named(st, "qwen35.rope.dimension_sections")->i32[1] == 1);
	o = out_named(st, "blk.0.ssm_conv1d.weight");	/* [32,1,4] squeezed to {4, 32} */
	CHECK(o != NULL && o->n_dims == 2 && o->ne[0] == 4 && o->ne[1] == 32 && o->verbatim);
	o = out_named(st, "blk.0.ssm_a");
	CHECK(o != NULL && !o->verbatim);
	CHECK(o != NULL && safetensors_read_rows(o, 0, 1, row, err) == 0);
	CHECK_NEAR(row[1], -expf(((2 % 97) + 38) / 64.0f - 0.5f), 1e-6);	/* tiled head 1 = HF head 2 */
	o = out_named(st, "blk.1.attn_norm.weight");	/* norm + 1 */
	CHECK(o != NULL && safetensors_read_rows(o, 0, 1, row, err) == 0);
	CHECK_NEAR(row[0], 1.0f + (0 + 5) / 64.0f - 0.5f, 1e-3);
	CHECK(o != NULL && safetensors_read_raw(o, 0, 1, h, err) == -1);
	CHECK(strstr(err, "transformed") != NULL);
	o = out_named(st, "blk.0.ssm_norm.weight");	/* linear_attn.norm: no + 1 */
	CHECK(o != NULL && safetensors_read_rows(o, 0, 1, raw, err) == 0);
	CHECK_NEAR(raw[0], 36 / 64.0 - 0.5, 1e-3);
	CHECK(o != NULL && safetensors_read_rows(o, 0, 2, raw, err) == -1);
	CHECK(strstr(err, "outside its 1 rows") != NULL);
	CHECK(out_named(st, "model.visual.patch_embed.weight") == NULL);
	CHECK(safetensors_plan(st, 1) == 0);	/* without MTP */
	CHECK(out_named(st, "blk.4.nextn.eh_proj.weight") == NULL);
	CHECK(kv_named(st, "qwen35.block_count")->v.u32 == 4);
	CHECK(kv_named(st, "qwen35.nextn_predict_layers") == NULL);
	safetensors_close(st);
}

TEST(raw_rows_equal_float_rows_for_every_verbatim_tensor)
{
	char err[UTIL_ERRLEN];
	struct safetensors *st = safetensors_open(DATA "/qwen35", err);
	size_t i;
	int checked = 0;

	CHECK(st != NULL && safetensors_plan(st, 0) == 0);
	for (i = 0; st != NULL && i < safetensors_out_count(st); i++) {
		const struct safetensors_out *o = safetensors_out(st, i);
		int64_t n = o->n_rows * o->ne[0], j;
		float *f = malloc((size_t)n * sizeof *f);
		uint16_t *h = malloc((size_t)n * 2);
		int ok = 1;

		if (!o->verbatim || o->src_dtype != SAFETENSORS_F16) {
			free(f), free(h);
			continue;
		}
		CHECK(safetensors_read_rows(o, 0, o->n_rows, f, err) == 0);
		CHECK(safetensors_read_raw(o, 0, o->n_rows, h, err) == 0);
		for (j = 0; j < n && ok; j++)
			ok = quant_f16_to_f32(h[j]) == f[j];
		if (!ok)
			FAILF("%s: raw and float rows differ", o->name);
		checked++;
		free(f), free(h);
	}
	CHECK(checked > 40);
	safetensors_close(st);
}

TEST(plans_llama_with_rope_row_permutation)
{
	char err[UTIL_ERRLEN];
	struct safetensors *st = safetensors_open(DATA "/llama", err);
	const struct safetensors_out *o;
	float r[16];
	size_t i;

	CHECK(st != NULL && safetensors_plan(st, 0) == 0);
	if (st == NULL)
		return;
	CHECK_EQ_STR(safetensors_arch(st), "llama");
	CHECK(out_named(st, "output.weight") == NULL);	/* tied */
	CHECK(out_named(st, "blk.1.ffn_norm.weight") != NULL);
	CHECK(kv_named(st, "llama.rope.dimension_count")->v.u32 == 4);
	CHECK(kv_named(st, "llama.vocab_size")->v.u32 == 300);
	for (i = 0; i < safetensors_out_count(st); i++)
		CHECK(strstr(safetensors_out(st, i)->name, "rotary") == NULL);
	/* head_dim 4: GGUF rows (0,1,2,3) of head 0 come from HF rows (0,2,1,3) */
	o = out_named(st, "blk.0.attn_q.weight");
	CHECK(o != NULL && safetensors_read_rows(o, 1, 1, r, err) == 0);
	CHECK_NEAR(r[0], ((2 * 16) % 97 + 7) / 64.0 - 0.5, 1e-6);
	safetensors_close(st);
}

TEST(plan_rejects_unknown_names_and_wrong_shapes)
{
	char err[UTIL_ERRLEN];
	size_t len;
	/* config.json-less image: plan needs a config */
	unsigned char *b = image("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &len);
	struct safetensors *st = safetensors_open_mem(b, len, err);

	CHECK(st != NULL && safetensors_plan(st, 0) == -1);
	CHECK(st != NULL && strstr(safetensors_errmsg(st), "no config.json") != NULL);
	safetensors_close(st);
	free(b);
}

/* A scratch checkpoint dir: config.json = cfg, model.safetensors = hdr + data; caller rm's. */
static char *
scratch(const char *cfg, const char *hdr, size_t datalen)
{
	static char dir[64];
	char path[128];
	unsigned char *b;
	size_t len;
	FILE *fp;

	snprintf(dir, sizeof dir, "/tmp/st-unit.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return NULL;
	snprintf(path, sizeof path, "%s/config.json", dir);
	fp = fopen(path, "w");
	fputs(cfg, fp);
	fclose(fp);
	b = image(hdr, datalen, &len);
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	fp = fopen(path, "wb");
	fwrite(b, 1, len, fp);
	fclose(fp);
	free(b);
	return dir;
}

static void
rmscratch(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("#   could not remove %s\n", dir);
}

#define LLAMA_CFG "{\"model_type\":\"llama\",\"hidden_size\":2,\"intermediate_size\":2," \
	"\"num_attention_heads\":1,\"num_hidden_layers\":1,\"vocab_size\":2}"
#define T(name, shape, a, b) "\"" name "\":{\"dtype\":\"F32\",\"shape\":" shape ",\"data_offsets\":[" #a "," #b "]}"

/* the plan's error for a one-file checkpoint; "" when it succeeds */
static void
plan_error(const char *cfg, const char *hdr, size_t datalen, char *out)
{
	char err[UTIL_ERRLEN];
	char *dir = scratch(cfg, hdr, datalen);
	struct safetensors *st = dir ? safetensors_open(dir, err) : NULL;

	out[0] = '\0';
	if (st == NULL)
		snprintf(out, UTIL_ERRLEN, "open: %.400s", dir ? err : "mkdtemp");
	else if (safetensors_plan(st, 0) != 0)
		snprintf(out, UTIL_ERRLEN, "%s", safetensors_errmsg(st));
	safetensors_close(st);
	if (dir)
		rmscratch(dir);
}

TEST(plan_names_the_offending_tensor)
{
	char e[UTIL_ERRLEN];
	const char *base = T("model.embed_tokens.weight", "[2,2]", 0, 16) "," T("model.norm.weight", "[2]", 16, 24);
	char hdr[2048];

	snprintf(hdr, sizeof hdr, "{%s," T("model.layers.0.self_attn.q_proj.weight", "[2,2]", 24, 40) "}", base);
	plan_error(LLAMA_CFG, hdr, 40, e);
	CHECK(strstr(e, "no tensor for 'blk.0.attn_norm.weight'") != NULL);
	snprintf(hdr, sizeof hdr, "{%s," T("model.layers.0.self_attn.q_proj.weight", "[3,2]", 24, 48) "}", base);
	plan_error(LLAMA_CFG, hdr, 48, e);
	CHECK(strstr(e, "tensor 'model.layers.0.self_attn.q_proj.weight': GGUF shape {2, 3, 1, 1}, "
	    "config.json implies {2, 2}") != NULL);
	snprintf(hdr, sizeof hdr, "{%s," T("model.layers.0.foo.weight", "[2]", 24, 32) "}", base);
	plan_error(LLAMA_CFG, hdr, 32, e);
	CHECK(strstr(e, "tensor 'model.layers.0.foo.weight' has no GGUF name for llama") != NULL);
	snprintf(hdr, sizeof hdr, "{%s," T("model.layers.1.mlp.up_proj.weight", "[2,2]", 24, 40) "}", base);
	plan_error(LLAMA_CFG, hdr, 40, e);
	CHECK(strstr(e, "layer number out of range") != NULL);
	snprintf(hdr, sizeof hdr, "{%s,\"model.layers.0.mlp.up_proj.weight\":{\"dtype\":\"F8_E4M3\","
	    "\"shape\":[2,2],\"data_offsets\":[24,28]}}", base);
	plan_error(LLAMA_CFG, hdr, 28, e);
	CHECK(strstr(e, "FP8 without a 'model.layers.0.mlp.up_proj.weight_scale_inv' block scale") != NULL);
	snprintf(hdr, sizeof hdr, "{%s}", base);
	plan_error("{\"model_type\":\"gpt9\"}", hdr, 24, e);
	CHECK(strstr(e, "model_type 'gpt9' is not supported") != NULL);
	plan_error("{\"model_type\":\"llama\",\"hidden_size\":2}", hdr, 24, e);
	CHECK(strstr(e, "config.json: no 'num_hidden_layers'") != NULL);
	plan_error("{\"model_type\":\"llama\"", hdr, 24, e);
	CHECK(strstr(e, "config.json: line 1") != NULL);
}

TEST(index_must_agree_with_the_shards)
{
	char err[UTIL_ERRLEN], path[128];
	char *dir = scratch(LLAMA_CFG, "{" T("a", "[1]", 0, 4) "}", 4);
	struct safetensors *st;
	FILE *fp;

	CHECK(dir != NULL);
	if (dir == NULL)
		return;
	snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
	fp = fopen(path, "w");
	fputs("{\"weight_map\":{\"a\":\"model.safetensors\",\"b\":\"model.safetensors\"}}", fp);
	fclose(fp);
	CHECK((st = safetensors_open(dir, err)) == NULL);
	CHECK(strstr(err, "tensor 'b' is in no shard") != NULL);
	fp = fopen(path, "w");
	fputs("{\"weight_map\":{\"a\":\"../x.safetensors\"}}", fp);
	fclose(fp);
	CHECK((st = safetensors_open(dir, err)) == NULL);
	CHECK(strstr(err, "is not a file name") != NULL);
	fp = fopen(path, "w");
	fputs("{\"weight_map\":{\"a\":\"model.safetensors\"}}", fp);
	fclose(fp);
	st = safetensors_open(dir, err);
	CHECK(st != NULL && safetensors_count(st) == 1);
	safetensors_close(st);
	rmscratch(dir);
}

TEST(tokenizer_needs_a_known_pre_tokenizer_or_a_name)
{
	char err[UTIL_ERRLEN], path[160], dir[64] = "/tmp/st-unit.XXXXXX", cmd[256];
	struct safetensors *st;
	FILE *fp;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(cmd, sizeof cmd, "cp " DATA "/llama/config.json " DATA "/llama/model.safetensors %s/", dir);
	CHECK(system(cmd) == 0);
	snprintf(path, sizeof path, "%s/tokenizer.json", dir);
	fp = fopen(path, "w");
	fputs("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]},"
	    "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x+\"}}}", fp);
	fclose(fp);
	st = safetensors_open(dir, err);
	CHECK(st != NULL);
	if (st != NULL) {
		CHECK(safetensors_plan_tokenizer(st, NULL) == -1);
		CHECK(strstr(safetensors_errmsg(st), "plan the checkpoint first") != NULL);
		CHECK(safetensors_plan(st, 0) == 0);
		CHECK(safetensors_plan_tokenizer(st, NULL) == -1);
		CHECK(strstr(safetensors_errmsg(st), "regex 'x+' is not one llama.cpp names") != NULL);
		CHECK(safetensors_plan_tokenizer(st, "custom") == 0);
		CHECK_EQ_STR(kv_named(st, "tokenizer.ggml.pre")->s, "custom");
		CHECK_EQ_STR(kv_named(st, "tokenizer.ggml.tokens")->strs[299], "[PAD299]");
		CHECK_EQ_INT(kv_named(st, "tokenizer.ggml.token_type")->i32[2], 5);
	}
	safetensors_close(st);
	rmscratch(dir);
}

int
main(void)
{
	RUN(parses_a_valid_header_in_offset_order);
	RUN(rejects_malformed_headers_with_the_reason);
	RUN(rejects_truncated_files_and_huge_header_lengths);
	RUN(dtype_table);
	RUN(reads_a_file_with_metadata_scalars_and_empty_tensors);
	RUN(missing_paths_and_dirs_without_shards_fail);
	RUN(opens_sharded_released_checkpoint_with_unlisted_mtp_file);
	RUN(plans_qwen35_with_mtp_and_transforms);
	RUN(raw_rows_equal_float_rows_for_every_verbatim_tensor);
	RUN(plans_llama_with_rope_row_permutation);
	RUN(plan_rejects_unknown_names_and_wrong_shapes);
	RUN(plan_names_the_offending_tensor);
	RUN(index_must_agree_with_the_shards);
	RUN(tokenizer_needs_a_known_pre_tokenizer_or_a_name);
	return test_summary();
}
