/*
 * Tokenizer metadata for a converted checkpoint: tokenizer.json and
 * tokenizer_config.json -> tokenizer.ggml.*, following llama.cpp's
 * converter (get_vocab_base, gguf-py SpecialVocab) for byte-level BPE.
 */
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "safetensors_impl.h"
#include "util.h"

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5 };

/* HF pre-tokenizer Split regexes -> llama.cpp's tokenizer.ggml.pre */
static const struct { const char *re, *pre; } pres[] = {
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
	  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "qwen2" },
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
	  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "qwen35" },
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
	  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "llama-bpe" },
};

struct vocab {
	const char **s;		/* [n] token text */
	size_t	*len;		/* [n] */
	int32_t	*type;		/* [n] */
	int64_t	n;
};

/* The Split regex of the pre-tokenizer (alone or inside a Sequence), or NULL. */
static const char *
split_regex(const struct json *pt)
{
	const struct json *seq, *pat;
	size_t i;

	if (pt == NULL || pt->type != JSON_OBJECT)
		return NULL;
	if ((seq = json_get(pt, "pretokenizers")) != NULL && seq->type == JSON_ARRAY) {
		for (i = 0; i < seq->n; i++) {
			const char *r = split_regex(&seq->items[i]);

			if (r != NULL)
				return r;
		}
		return NULL;
	}
	pat = json_get(pt, "pattern");
	if (json_get_str(pt, "type") == NULL || strcmp(json_get_str(pt, "type"), "Split") != 0)
		return NULL;
	return pat ? json_get_str(pat, "Regex") : NULL;
}

static int
detect_pre(struct safetensors *st, const struct json *tj, const char **pre)
{
	const char *re = split_regex(json_get(tj, "pre_tokenizer"));
	size_t i;

	for (i = 0; re != NULL && i < sizeof pres / sizeof pres[0]; i++)
		if (strcmp(re, pres[i].re) == 0) {
			*pre = pres[i].pre;
			return 0;
		}
	return util_err(st->err, "tokenizer.json: pre-tokenizer regex %s%.200s%s is not one llama.cpp "
	    "names (qwen2, qwen35, llama-bpe)", re ? "'" : "", re ? re : "(none)", re ? "'" : "");
}

/* llama.cpp's does_token_look_special */
static int
looks_special(const char *t, size_t n)
{
	static const char *const set[] = { "<pad>", "<mask>", "<2mass>", "[@BOS@]" };
	size_t i;

	for (i = 0; i < 4; i++)
		if (strcmp(t, set[i]) == 0)
			return 1;
	if (n >= 4 && strncmp(t, "<|", 2) == 0 && strcmp(t + n - 2, "|>") == 0)
		return 1;
	if (n >= 8 && strncmp(t, "<\xef\xbd\x9c", 4) == 0 && strcmp(t + n - 4, "\xef\xbd\x9c>") == 0)
		return 1;
	return n >= 8 && strncmp(t, "<unused", 7) == 0 && t[n - 1] == '>';
}

/* user-defined tokens: U+2581 -> ' ' (llama.cpp pre-normalizes them) */
static int
set_user(struct safetensors *st, struct vocab *v, int64_t id, const char *t, size_t n)
{
	char *p = st_keep(st, malloc(n + 1));
	size_t i, j = 0;

	if (p == NULL)
		return util_err(st->err, "out of memory");
	for (i = 0; i < n; i++) {
		if (i + 2 < n && memcmp(t + i, "\xe2\x96\x81", 3) == 0) {
			p[j++] = ' ';
			i += 2;
		} else
			p[j++] = t[i];
	}
	p[j] = '\0';
	v->s[id] = p;
	v->len[id] = j;
	v->type[id] = TT_USER;
	return 0;
}

static int
load_vocab(struct safetensors *st, const struct json *model, const struct json *added, struct vocab *v)
{
	const struct json *vo = json_get(model, "vocab");
	size_t i;

	if (vo == NULL || vo->type != JSON_OBJECT)
		return util_err(st->err, "tokenizer.json: no model.vocab object");
	for (i = 0; i < vo->n; i++) {
		const struct json *id = &vo->items[i];

		if (id->type != JSON_NUMBER || !id->is_int || id->i < 0 || id->i >= v->n)
			return util_err(st->err, "tokenizer.json: token id of '%.100s' is not in [0, %lld)",
			    vo->keys[i], (long long)v->n);
		v->s[id->i] = vo->keys[i];
		v->len[id->i] = vo->keylens[i];
		v->type[id->i] = TT_NORMAL;
	}
	for (i = 0; added != NULL && added->type == JSON_ARRAY && i < added->n; i++) {
		const struct json *a = &added->items[i], *c = json_get(a, "content");
		int64_t id;
		int special = 0;

		if (json_get_i64(a, "id", &id) != 0 || id < 0 || id >= v->n || c == NULL ||
		    c->type != JSON_STRING)
			return util_err(st->err, "tokenizer.json: added_tokens[%zu] has no valid id "
			    "and content", i);
		json_get_bool(a, "special", &special);
		if (special || looks_special(c->str, c->n)) {
			v->s[id] = c->str;
			v->len[id] = c->n;
			v->type[id] = TT_CONTROL;
		} else if (set_user(st, v, id, c->str, c->n) != 0)
			return -1;
	}
	return 0;
}

static int
fill_unused(struct safetensors *st, struct vocab *v)
{
	int64_t i;

	for (i = 0; i < v->n; i++) {
		char buf[32], *p;

		if (v->s[i] != NULL)
			continue;
		snprintf(buf, sizeof buf, "[PAD%lld]", (long long)i);
		if ((p = st_keep(st, strdup(buf))) == NULL)
			return util_err(st->err, "out of memory");
		v->s[i] = p;
		v->len[i] = strlen(p);
		v->type[i] = TT_UNUSED;
	}
	return 0;
}

static struct safetensors_kv *
kv_arr(struct safetensors *st, const char *key, int arr_type, uint64_t n)
{
	struct safetensors_kv *kv = st_kv_add(st, key, SAFETENSORS_KV_ARR);

	if (kv == NULL) {
		util_err(st->err, "out of memory");
		return NULL;
	}
	kv->arr_type = arr_type;
	kv->n = n;
	return kv;
}

/* "a b" from the pair [a, b], each ' ' inside a part written as U+0120 */
static int
join_pair(struct safetensors *st, const struct json *a, const struct json *b, const char **out,
    size_t *outlen)
{
	const struct json *part[2] = { a, b };
	char *p = st_keep(st, malloc(2 * (a->n + b->n) + 2));
	size_t i, j, k = 0;

	if (p == NULL)
		return util_err(st->err, "out of memory");
	for (j = 0; j < 2; j++) {
		if (j == 1)
			p[k++] = ' ';
		for (i = 0; i < part[j]->n; i++) {
			if (part[j]->str[i] == ' ') {
				p[k++] = (char)0xc4;	/* U+0120 */
				p[k++] = (char)0xa0;
			} else
				p[k++] = part[j]->str[i];
		}
	}
	p[k] = '\0';
	*out = p;
	*outlen = k;
	return 0;
}

/* Merges: "a b" strings, or [a, b] pairs joined by ' ' with spaces inside parts as U+0120. */
static int
add_merges(struct safetensors *st, const struct json *m)
{
	struct safetensors_kv *kv;
	const char **s;
	size_t *len, i;

	if (m == NULL || m->type != JSON_ARRAY)
		return util_err(st->err, "tokenizer.json: no model.merges array");
	s = st_keep(st, malloc((m->n + 1) * sizeof *s));
	len = st_keep(st, malloc((m->n + 1) * sizeof *len));
	if (s == NULL || len == NULL)
		return util_err(st->err, "out of memory");
	for (i = 0; i < m->n; i++) {
		const struct json *e = &m->items[i];

		if (e->type == JSON_STRING) {
			s[i] = e->str;
			len[i] = e->n;
			continue;
		}
		if (e->type != JSON_ARRAY || e->n != 2 || e->items[0].type != JSON_STRING ||
		    e->items[1].type != JSON_STRING)
			return util_err(st->err, "tokenizer.json: merges[%zu] is not a pair of strings", i);
		if (join_pair(st, &e->items[0], &e->items[1], &s[i], &len[i]) != 0)
			return -1;
	}
	if ((kv = kv_arr(st, "tokenizer.ggml.merges", SAFETENSORS_KV_STR, m->n)) == NULL)
		return -1;
	kv->strs = s;
	kv->strlens = len;
	return 0;
}

static int
kv_u32_key(struct safetensors *st, const char *key, int64_t v)
{
	struct safetensors_kv *kv = st_kv_add(st, key, SAFETENSORS_KV_U32);

	if (kv == NULL)
		return util_err(st->err, "out of memory");
	kv->v.u32 = (uint32_t)v;
	return 0;
}

/* The id of the added token whose content is s, or -1 (gguf-py looks only there). */
static int64_t
added_id(const struct json *added, const char *s)
{
	size_t i;
	int64_t id;

	for (i = 0; added != NULL && added->type == JSON_ARRAY && i < added->n; i++) {
		const char *c = json_get_str(&added->items[i], "content");

		if (c != NULL && strcmp(c, s) == 0 && json_get_i64(&added->items[i], "id", &id) == 0)
			return id;
	}
	return -1;
}

/* Special ids: tokenizer_config's <typ>_token looked up in added_tokens, else config.json's <typ>_token_id. */
static int
add_special_ids(struct safetensors *st, const struct json *tc, const struct json *added, int64_t n_vocab)
{
	static const char *const typ[] = { "bos", "eos", "unk", "sep", "pad", "cls", "mask" };
	static const char *const key[] = { "bos_token_id", "eos_token_id", "unknown_token_id",
		"seperator_token_id", "padding_token_id", "cls_token_id", "mask_token_id" };
	char k[64], gk[96];
	size_t i;

	for (i = 0; i < sizeof typ / sizeof typ[0]; i++) {
		const struct json *e;
		const char *content = NULL;
		int64_t id = -1;

		snprintf(k, sizeof k, "%s_token", typ[i]);
		e = tc ? json_get(tc, k) : NULL;
		if (e != NULL && e->type == JSON_STRING)
			content = e->str;
		else if (e != NULL && e->type == JSON_OBJECT)
			content = json_get_str(e, "content");
		if (content != NULL)
			id = added_id(added, content);
		snprintf(k, sizeof k, "%s_token_id", typ[i]);
		e = safetensors_hparam(st, k);
		if (id < 0 && e != NULL && e->type == JSON_NUMBER && e->is_int)
			id = e->i;
		if (id < 0 || id >= n_vocab)
			continue;
		snprintf(gk, sizeof gk, "tokenizer.ggml.%s", key[i]);
		if (kv_u32_key(st, gk, id) != 0)
			return -1;
	}
	return 0;
}

static int
add_flags(struct safetensors *st, const struct json *tc)
{
	static const char *const typ[] = { "bos", "eos", "sep" };
	char k[64];
	size_t i;

	for (i = 0; tc != NULL && i < sizeof typ / sizeof typ[0]; i++) {
		struct safetensors_kv *kv;
		int b;

		snprintf(k, sizeof k, "add_%s_token", typ[i]);
		if (json_get_bool(tc, k, &b) != 0)
			continue;
		snprintf(k, sizeof k, "tokenizer.ggml.add_%s_token", typ[i]);
		if ((kv = st_kv_add(st, k, SAFETENSORS_KV_BOOL)) == NULL)
			return util_err(st->err, "out of memory");
		kv->v.b = b;
	}
	return 0;
}

/* tokenizer_config's chat_template (a string, or the "default" of a list), else chat_template.jinja */
static int
add_chat_template(struct safetensors *st, const struct json *tc)
{
	const struct json *t = tc ? json_get(tc, "chat_template") : NULL;
	size_t i, len;
	char *path, *buf;
	int rc;

	if (t != NULL && t->type == JSON_STRING)
		return st_kv_str(st, "tokenizer.chat_template", t->str, t->n);
	for (i = 0; t != NULL && t->type == JSON_ARRAY && i < t->n; i++) {
		const char *name = json_get_str(&t->items[i], "name");
		const struct json *tt = json_get(&t->items[i], "template");

		if (name && strcmp(name, "default") == 0 && tt && tt->type == JSON_STRING)
			return st_kv_str(st, "tokenizer.chat_template", tt->str, tt->n);
	}
	if ((path = st_join(st->dir, "chat_template.jinja")) == NULL)
		return util_err(st->err, "out of memory");
	if (access(path, F_OK) != 0) {
		free(path);
		return 0;
	}
	buf = util_read_file(path, &len, st->err);
	free(path);
	if (buf == NULL)
		return -1;
	rc = st_kv_str(st, "tokenizer.chat_template", buf, len);
	free(buf);
	return rc;
}

static int
add_vocab(struct safetensors *st, const struct json *tj, int64_t n_vocab)
{
	struct vocab v = { 0 };
	struct safetensors_kv *kv;

	v.n = n_vocab;
	v.s = st_keep(st, calloc((size_t)n_vocab, sizeof *v.s));
	v.len = st_keep(st, calloc((size_t)n_vocab, sizeof *v.len));
	v.type = st_keep(st, calloc((size_t)n_vocab, sizeof *v.type));
	if (v.s == NULL || v.len == NULL || v.type == NULL)
		return util_err(st->err, "out of memory");
	if (load_vocab(st, json_get(tj, "model"), json_get(tj, "added_tokens"), &v) != 0 ||
	    fill_unused(st, &v) != 0)
		return -1;
	if ((kv = kv_arr(st, "tokenizer.ggml.tokens", SAFETENSORS_KV_STR, (uint64_t)n_vocab)) == NULL)
		return -1;
	kv->strs = v.s;
	kv->strlens = v.len;
	if ((kv = kv_arr(st, "tokenizer.ggml.token_type", SAFETENSORS_KV_I32, (uint64_t)n_vocab)) == NULL)
		return -1;
	kv->i32 = v.type;
	return 0;
}

int
safetensors_plan_tokenizer(struct safetensors *st, const char *pre)
{
	const struct json *tj, *tc, *model, *nv;
	const char *mt;

	if (st->nkv == 0)
		return util_err(st->err, "tokenizer: plan the checkpoint first");
	if (st->tokjson[0] == NULL && (st_read_json(st, "tokenizer.json", &st->tokjson[0]) != 0 ||
	    st_read_json(st, "tokenizer_config.json", &st->tokjson[1]) != 0))
		return -1;
	if ((tj = st->tokjson[0]) == NULL && strcmp(st->arch, "dflash") == 0)
		return 0;	/* a drafter's vocabulary is its target's */
	if (tj == NULL)
		return util_err(st->err, "%s: no tokenizer.json", st->dir);
	tc = st->tokjson[1];
	model = json_get(tj, "model");
	mt = model ? json_get_str(model, "type") : NULL;
	if (mt == NULL || strcmp(mt, "BPE") != 0)
		return util_err(st->err, "tokenizer.json: model type '%s' is not BPE", mt ? mt : "?");
	nv = safetensors_hparam(st, "vocab_size");
	if (nv == NULL || nv->type != JSON_NUMBER || !nv->is_int || nv->i < 1 || nv->i > 1 << 26)
		return util_err(st->err, "config.json: bad 'vocab_size'");
	if (pre == NULL && detect_pre(st, tj, &pre) != 0)
		return -1;
	if (st_kv_str(st, "tokenizer.ggml.model", "gpt2", 4) != 0 ||
	    st_kv_str(st, "tokenizer.ggml.pre", pre, strlen(pre)) != 0 ||
	    add_vocab(st, tj, nv->i) != 0 || add_merges(st, json_get(model, "merges")) != 0 ||
	    add_special_ids(st, tc, json_get(tj, "added_tokens"), nv->i) != 0 ||
	    add_flags(st, tc) != 0 || add_chat_template(st, tc) != 0)
		return -1;
	return 0;
}
