/* tokenizer_from_json: an HF tokenizer.json (+ tokenizer_config.json) as a tokenizer_spec. */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"
#include "util.h"

/* The Split regexes we implement by hand, as HF writes them (and as
 * llama.cpp's converter rewrites their case-insensitive group). */
static const struct {
	const char *regex;
	const char *pre;
	int	casefold;
} hf_regex[] = {
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  "qwen2", 1 },
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  "qwen35", 1 },
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  "llama3", 1 },
	{ "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  "qwen2", 0 },
	{ "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  "qwen35", 0 },
};

struct hf {
	const char *path;
	struct tokenizer_spec spec;
	char	**tokens;	/* [n_vocab], owned */
	int32_t	*types;
	uint8_t	*attrs;
	char	**merges;	/* [n_merges], owned */
	char	*err;
};

static int
hf_err(struct hf *h, const char *why)
{
	return util_err(h->err, "%s: %s", h->path, why);
}

static int
is_type(const struct json *j, const char *type)
{
	const char *t = j ? json_get_str(j, "type") : NULL;

	return t != NULL && strcmp(t, type) == 0;
}

static int
is_bytelevel(const struct json *j, int use_regex)
{
	int v = 1, a = 0;

	if (!is_type(j, "ByteLevel"))
		return 0;
	json_get_bool(j, "use_regex", &v);
	json_get_bool(j, "add_prefix_space", &a);
	return v == use_regex && !a;
}

/* Recognize the pre-tokenizer: sets spec.pre, byte_level, casefold. */
static int
hf_pre(struct hf *h, const struct json *pt)
{
	const struct json *seq, *a, *b, *pat;
	const char *re, *beh;
	size_t i;

	h->spec.byte_level = 1;
	if (is_bytelevel(pt, 1)) {
		h->spec.pre = "gpt2";
		return 0;
	}
	if (!is_type(pt, "Sequence") || (seq = json_get(pt, "pretokenizers")) == NULL ||
	    seq->n != 2)
		return hf_err(h, "pre_tokenizer is not supported");
	a = json_at(seq, 0);
	b = json_at(seq, 1);
	if (is_type(a, "Digits") && is_bytelevel(b, 1)) {
		int ind = 0;
		json_get_bool(a, "individual_digits", &ind);
		if (!ind)
			return hf_err(h, "Digits pre-tokenizer without individual_digits is not supported");
		h->spec.pre = "smollm";
		return 0;
	}
	if (!is_type(a, "Split") || !is_bytelevel(b, 0) || (pat = json_get(a, "pattern")) == NULL ||
	    (re = json_get_str(pat, "Regex")) == NULL || (beh = json_get_str(a, "behavior")) == NULL ||
	    strcmp(beh, "Isolated") != 0)
		return hf_err(h, "pre_tokenizer is not supported");
	for (i = 0; i < sizeof(hf_regex) / sizeof(hf_regex[0]); i++) {
		if (strcmp(hf_regex[i].regex, re) == 0) {
			h->spec.pre = hf_regex[i].pre;
			h->spec.casefold_contractions = hf_regex[i].casefold;
			return 0;
		}
	}
	return util_err(h->err, "%s: pre-tokenizer regex '%s' is not supported", h->path, re);
}

static int
hf_model_checks(struct hf *h, const struct json *m)
{
	const struct json *v;
	const char *s;

	if (!is_type(m, "BPE"))
		return hf_err(h, "model type is not supported (BPE only)");
	if ((v = json_get(m, "dropout")) != NULL && v->type != JSON_NULL)
		return hf_err(h, "BPE dropout is not supported");
	if ((s = json_get_str(m, "continuing_subword_prefix")) != NULL && *s)
		return hf_err(h, "continuing_subword_prefix is not supported");
	if ((s = json_get_str(m, "end_of_word_suffix")) != NULL && *s)
		return hf_err(h, "end_of_word_suffix is not supported");
	json_get_bool(m, "ignore_merges", &h->spec.ignore_merges);
	return 0;
}

static int
hf_set_token(struct hf *h, int64_t id, const char *s, size_t n, int32_t type)
{
	if (id < 0 || (size_t)id >= h->spec.n_vocab)
		return hf_err(h, "token id out of range");
	free(h->tokens[id]);
	if ((h->tokens[id] = malloc(n + 1)) == NULL)
		return hf_err(h, "out of memory");
	memcpy(h->tokens[id], s, n);
	h->tokens[id][n] = '\0';
	h->types[id] = type;
	return 0;
}

static int
hf_vocab(struct hf *h, const struct json *vocab, const struct json *added)
{
	size_t i, n = 0;
	int64_t id;

	for (i = 0; i < vocab->n; i++)
		if (vocab->items[i].is_int && vocab->items[i].i >= (int64_t)n)
			n = vocab->items[i].i + 1;
	for (i = 0; added && i < added->n; i++)
		if (json_get_i64(&added->items[i], "id", &id) == 0 && id >= (int64_t)n)
			n = id + 1;
	if (n == 0 || n > (1u << 24))
		return hf_err(h, "vocabulary size out of range");
	h->spec.n_vocab = n;
	h->tokens = calloc(n, sizeof(char *));
	h->types = malloc(n * sizeof(int32_t));
	h->attrs = calloc(n, 1);
	if (!h->tokens || !h->types || !h->attrs)
		return hf_err(h, "out of memory");
	for (i = 0; i < n; i++)
		h->types[i] = TOKENIZER_UNUSED;
	for (i = 0; i < vocab->n; i++) {
		if (!vocab->items[i].is_int)
			return hf_err(h, "vocab id is not an integer");
		if (hf_set_token(h, vocab->items[i].i, vocab->keys[i], vocab->keylens[i],
		    TOKENIZER_NORMAL) < 0)
			return -1;
	}
	for (i = 0; added && i < added->n; i++) {
		const struct json *t = &added->items[i], *c = json_get(t, "content");
		int sp = 0, l = 0, r = 0, sw = 0;
		if (json_get_i64(t, "id", &id) < 0 || c == NULL || c->type != JSON_STRING)
			return hf_err(h, "added token without id or content");
		json_get_bool(t, "special", &sp);
		json_get_bool(t, "lstrip", &l);
		json_get_bool(t, "rstrip", &r);
		json_get_bool(t, "single_word", &sw);
		if (sw)
			return hf_err(h, "single_word added tokens are not supported");
		if (hf_set_token(h, id, c->str, c->n, sp ? TOKENIZER_CONTROL : TOKENIZER_USER_DEFINED) < 0)
			return -1;
		h->attrs[id] = (l ? TOKENIZER_LSTRIP : 0) | (r ? TOKENIZER_RSTRIP : 0);
	}
	for (i = 0; i < n; i++)
		if (h->tokens[i] == NULL && (h->tokens[i] = strdup("")) == NULL)
			return hf_err(h, "out of memory");
	return 0;
}

static int
hf_merges(struct hf *h, const struct json *merges)
{
	size_t i;

	if (merges == NULL || merges->type != JSON_ARRAY)
		return hf_err(h, "BPE model has no merges");
	if ((h->merges = calloc(merges->n + 1, sizeof(char *))) == NULL)
		return hf_err(h, "out of memory");
	h->spec.n_merges = merges->n;
	for (i = 0; i < merges->n; i++) {
		const struct json *m = &merges->items[i];
		if (m->type == JSON_STRING)
			h->merges[i] = strdup(m->str);
		else if (m->type == JSON_ARRAY && m->n == 2 && m->items[0].type == JSON_STRING &&
		    m->items[1].type == JSON_STRING) {
			size_t a = m->items[0].n, b = m->items[1].n;
			if ((h->merges[i] = malloc(a + b + 2)) != NULL) {
				memcpy(h->merges[i], m->items[0].str, a);
				h->merges[i][a] = ' ';
				memcpy(h->merges[i] + a + 1, m->items[1].str, b + 1);
			}
		} else
			return hf_err(h, "merge is neither 'a b' nor [a, b]");
		if (h->merges[i] == NULL)
			return hf_err(h, "out of memory");
	}
	return 0;
}

/* The id of a token named by tokenizer_config.json (a string or {content}). */
static int32_t
config_token(struct hf *h, const struct json *cfg, const char *key)
{
	const struct json *v = cfg ? json_get(cfg, key) : NULL;
	const char *s = NULL;
	size_t i;

	if (v != NULL && v->type == JSON_STRING)
		s = v->str;
	else if (v != NULL && v->type == JSON_OBJECT)
		s = json_get_str(v, "content");
	for (i = 0; s != NULL && i < h->spec.n_vocab; i++)
		if (strcmp(h->tokens[i], s) == 0)
			return (int32_t)i;
	return -1;
}

/* BOS/EOS from a TemplateProcessing post-processor's "single" template. */
static int
hf_post(struct hf *h, const struct json *pp)
{
	const struct json *single;
	size_t i;

	if (pp == NULL || pp->type == JSON_NULL || is_type(pp, "ByteLevel"))
		return 0;
	if (!is_type(pp, "TemplateProcessing") || (single = json_get(pp, "single")) == NULL)
		return hf_err(h, "post_processor is not supported");
	for (i = 0; i < single->n; i++) {
		const struct json *st = json_get(&single->items[i], "SpecialToken");
		const char *name = st ? json_get_str(st, "id") : NULL;
		size_t k;
		if (name == NULL)
			continue;
		for (k = 0; k < h->spec.n_vocab && strcmp(h->tokens[k], name) != 0; k++)
			;
		if (k == h->spec.n_vocab)
			return hf_err(h, "post_processor names an unknown token");
		if (i == 0) {
			h->spec.add_bos = 1;
			h->spec.bos = k;
		} else {
			h->spec.add_eos = 1;
			h->spec.eos = k;
		}
	}
	return 0;
}

/* The normalizer: none, NFC, or a Sequence of NFC. */
static int
hf_normalizer(struct hf *h, const struct json *nz)
{
	const struct json *seq;
	size_t i;

	if (nz == NULL || nz->type == JSON_NULL)
		return 0;
	if (is_type(nz, "NFC")) {
		h->spec.nfc = 1;
		return 0;
	}
	if (!is_type(nz, "Sequence") || (seq = json_get(nz, "normalizers")) == NULL ||
	    seq->type != JSON_ARRAY)
		return util_err(h->err, "%s: normalizer '%s' is not supported", h->path,
		    json_get_str(nz, "type") ? json_get_str(nz, "type") : "?");
	for (i = 0; i < seq->n; i++)
		if (hf_normalizer(h, json_at(seq, i)) < 0)
			return -1;
	return 0;
}

static int
hf_build(struct hf *h, const struct json *root, const struct json *cfg)
{
	const struct json *m = json_get(root, "model"), *v;

	h->spec.model = TOKENIZER_BPE;
	h->spec.bos = h->spec.eos = h->spec.unk = h->spec.pad = -1;
	if (hf_normalizer(h, json_get(root, "normalizer")) < 0)
		return -1;
	if (m == NULL || hf_model_checks(h, m) < 0)
		return m == NULL ? hf_err(h, "no model") : -1;
	if ((v = json_get(m, "vocab")) == NULL || v->type != JSON_OBJECT)
		return hf_err(h, "BPE model has no vocab");
	if (hf_vocab(h, v, json_get(root, "added_tokens")) < 0 || hf_merges(h, json_get(m, "merges")) < 0 ||
	    hf_pre(h, json_get(root, "pre_tokenizer")) < 0)
		return -1;
	if ((v = json_get(root, "decoder")) != NULL && v->type != JSON_NULL && !is_type(v, "ByteLevel"))
		return hf_err(h, "decoder is not supported");
	h->spec.bos = config_token(h, cfg, "bos_token");
	h->spec.eos = config_token(h, cfg, "eos_token");
	h->spec.pad = config_token(h, cfg, "pad_token");
	h->spec.unk = config_token(h, cfg, "unk_token");
	if (hf_post(h, json_get(root, "post_processor")) < 0)
		return -1;
	h->spec.tokens = (const char *const *)h->tokens;
	h->spec.types = h->types;
	h->spec.attrs = h->attrs;
	h->spec.merges = (const char *const *)h->merges;
	return 0;
}

static struct json *
read_json(const char *path, char *err)
{
	char e[UTIL_ERRLEN];
	size_t len;
	char *buf = util_read_file(path, &len, err);
	struct json *j;

	if (buf == NULL)
		return NULL;
	if ((j = json_parse(buf, len, e)) == NULL)
		util_err(err, "%s: %s", path, e);
	free(buf);
	return j;
}

struct tokenizer *
tokenizer_from_json(const char *path, char *err)
{
	struct hf h;
	struct stat st;
	struct json *root = NULL, *cfg = NULL;
	struct tokenizer *tok = NULL;
	char *file = NULL, *cfgfile = NULL, *slash;
	size_t i, n = strlen(path);

	memset(&h, 0, sizeof(h));
	h.err = err;
	if ((file = malloc(n + 32)) == NULL || (cfgfile = malloc(n + 32)) == NULL) {
		util_err(err, "tokenizer: out of memory");
		goto out;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(file, n + 32, "%s/tokenizer.json", path);
		snprintf(cfgfile, n + 32, "%s/tokenizer_config.json", path);
	} else {
		snprintf(file, n + 32, "%s", path);
		snprintf(cfgfile, n + 32, "%s", path);
		slash = strrchr(cfgfile, '/');
		snprintf(slash ? slash + 1 : cfgfile, n + 32 - (slash ? slash + 1 - cfgfile : 0),
		    "tokenizer_config.json");
	}
	h.path = file;
	if ((root = read_json(file, err)) == NULL)
		goto out;
	if (stat(cfgfile, &st) == 0 && (cfg = read_json(cfgfile, err)) == NULL)
		goto out;
	if (hf_build(&h, root, cfg) == 0)
		tok = tokenizer_new(&h.spec, err);
out:
	for (i = 0; h.tokens && i < h.spec.n_vocab; i++)
		free(h.tokens[i]);
	for (i = 0; h.merges && i < h.spec.n_merges; i++)
		free(h.merges[i]);
	free(h.tokens);
	free(h.types);
	free(h.attrs);
	free(h.merges);
	json_free(root);
	json_free(cfg);
	free(file);
	free(cfgfile);
	return tok;
}
