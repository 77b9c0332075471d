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

#define LOWER_BLOCK "\xE2\x96\x81"	/* U+2581, SentencePiece's space */

struct hf {
	const char *path;
	struct tokenizer_spec spec;
	int	prepend;	/* normalizer Prepend("▁") */
	int	byte_fallback;	/* model.byte_fallback */
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

/* Metaspace(replacement "▁", prepend_scheme, split): SentencePiece-style BPE. */
static int
hf_metaspace(struct hf *h, const struct json *pt)
{
	const char *r = json_get_str(pt, "replacement"), *scheme = json_get_str(pt, "prepend_scheme");
	int split = 1, add = 1;

	if (r == NULL || strcmp(r, LOWER_BLOCK) != 0)
		return hf_err(h, "pre_tokenizer 'Metaspace' with a replacement other than '\u2581' "
		    "is not supported");
	if (h->prepend)
		return hf_err(h, "pre_tokenizer 'Metaspace' after a Prepend normalizer is not supported");
	json_get_bool(pt, "split", &split);
	if (scheme == NULL) {	/* the older form */
		json_get_bool(pt, "add_prefix_space", &add);
		scheme = add ? "always" : "never";
	}
	if (strcmp(scheme, "always") == 0)
		h->spec.add_space_prefix = TOKENIZER_PREFIX_UNLESS_SPACE;
	else if (strcmp(scheme, "first") == 0)
		h->spec.add_space_prefix = TOKENIZER_PREFIX_FIRST;
	else if (strcmp(scheme, "never") != 0)
		return util_err(h->err, "%s: Metaspace prepend_scheme '%s' is not supported", h->path,
		    scheme);
	h->spec.metaspace = 1;
	h->spec.byte_level = 0;
	h->spec.pre = split ? "metaspace" : "none";
	return 0;
}

/* Recognize the pre-tokenizer: sets spec.pre, byte_level, casefold. */
static int
hf_pre(struct hf *h, const struct json *pt)
{
	const struct json *seq, *a, *b, *pat;
	const char *re, *beh;
	size_t i;

	if (is_type(pt, "Metaspace"))
		return hf_metaspace(h, pt);
	if (h->spec.metaspace || h->prepend) {	/* Llama-2, Gemma: normalizer only */
		if (pt != NULL && pt->type != JSON_NULL)
			return util_err(h->err, "%s: pre_tokenizer '%s' after a Replace(' ', '\u2581') "
			    "normalizer is not supported", h->path,
			    json_get_str(pt, "type") ? json_get_str(pt, "type") : "?");
		if (!h->spec.metaspace)
			return hf_err(h, "normalizer 'Prepend' without Replace(' ', '\u2581') is not "
			    "supported");
		h->spec.pre = "none";
		h->spec.add_space_prefix = h->prepend ? TOKENIZER_PREFIX_ALWAYS : 0;
		return 0;
	}
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
	json_get_bool(m, "byte_fallback", &h->byte_fallback);
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

/*
 * HF matches an added token with "normalized": true in the normalized text,
 * its content normalized too; with Replace(" ", "▁") that is the raw text's
 * match only for a content without spaces or U+2581, and Prepend changes
 * every content.
 */
static int
hf_added_normalized(struct hf *h, const struct json *t, const struct json *c)
{
	int norm = 1;

	json_get_bool(t, "normalized", &norm);
	if (!norm || !(h->spec.metaspace || h->prepend))
		return 0;
	if (h->prepend || memchr(c->str, ' ', c->n) != NULL || strstr(c->str, LOWER_BLOCK) != NULL)
		return util_err(h->err, "%s: added token '%s' with normalized true is not supported "
		    "with a Prepend('\u2581') or Replace(' ', '\u2581') normalizer", h->path, c->str);
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
		if (hf_added_normalized(h, t, c) < 0)
			return -1;
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

/* Replace(" ", "▁") of SentencePiece-style tokenizers; 0 for other Replaces. */
static int
is_space_replace(const struct json *j, const char *from, const char *to)
{
	const struct json *pat = json_get(j, "pattern");
	const char *f = pat ? json_get_str(pat, "String") : NULL, *c = json_get_str(j, "content");

	return is_type(j, "Replace") && f != NULL && c != NULL && strcmp(f, from) == 0 &&
	    strcmp(c, to) == 0;
}

/* The normalizer: none, NFC, Replace(" ", "▁"), Prepend("▁"), or a Sequence of them. */
static int
hf_normalizer(struct hf *h, const struct json *nz)
{
	const struct json *seq;
	const char *pre;
	size_t i;

	if (nz == NULL || nz->type == JSON_NULL)
		return 0;
	if (is_type(nz, "NFC")) {
		h->spec.nfc = 1;
		return 0;
	}
	if (is_space_replace(nz, " ", LOWER_BLOCK)) {
		h->spec.metaspace = 1;
		return 0;
	}
	if (is_type(nz, "Prepend") && (pre = json_get_str(nz, "prepend")) != NULL &&
	    strcmp(pre, LOWER_BLOCK) == 0) {
		h->prepend = 1;
		return 0;
	}
	if (is_type(nz, "Replace") || is_type(nz, "Prepend"))
		return util_err(h->err, "%s: normalizer '%s' other than %s is not supported", h->path,
		    json_get_str(nz, "type"), is_type(nz, "Replace") ? "Replace(' ', '\u2581')" :
		    "Prepend('\u2581')");
	if (!is_type(nz, "Sequence") || (seq = json_get(nz, "normalizers")) == NULL ||
	    seq->type != JSON_ARRAY)
		return util_err(h->err, "%s: normalizer '%s' is not supported", h->path,
		    json_get_str(nz, "type") ? json_get_str(nz, "type") : "?");
	for (i = 0; i < seq->n; i++)
		if (hf_normalizer(h, json_at(seq, i)) < 0)
			return -1;
	return 0;
}

/*
 * SentencePiece-style BPE decodes with Sequence[Replace("▁", " "),
 * ByteFallback, Fuse] and maybe Strip(" ", 1, 0); byte-level BPE with
 * ByteLevel (or nothing).
 */
static int
hf_decoder(struct hf *h, const struct json *d)
{
	static const char *const want[] = { "Replace", "ByteFallback", "Fuse", "Strip" };
	const struct json *seq, *e;
	int64_t start = -1, stop = -1;
	const char *c;
	size_t i;

	if (!h->spec.metaspace) {
		if (d != NULL && d->type != JSON_NULL && !is_type(d, "ByteLevel"))
			return util_err(h->err, "%s: decoder '%s' is not supported", h->path,
			    json_get_str(d, "type") ? json_get_str(d, "type") : "?");
		return 0;
	}
	if (!is_type(d, "Sequence") || (seq = json_get(d, "decoders")) == NULL ||
	    seq->type != JSON_ARRAY || seq->n < 3 || seq->n > 4)
		return util_err(h->err, "%s: decoder '%s' is not supported (SentencePiece-style BPE: "
		    "Sequence[Replace, ByteFallback, Fuse, Strip])", h->path,
		    d && json_get_str(d, "type") ? json_get_str(d, "type") : "null");
	for (i = 0; i < seq->n; i++) {
		e = json_at(seq, i);
		if (!is_type(e, want[i]) || (i == 0 && !is_space_replace(e, LOWER_BLOCK, " ")))
			return util_err(h->err, "%s: decoder '%s' at %zu of the Sequence is not supported",
			    h->path, json_get_str(e, "type") ? json_get_str(e, "type") : "?", i);
	}
	if (seq->n == 4) {
		e = json_at(seq, 3);
		c = json_get_str(e, "content");
		if (c == NULL || strcmp(c, " ") != 0 || json_get_i64(e, "start", &start) < 0 ||
		    json_get_i64(e, "stop", &stop) < 0 || start != 1 || stop != 0)
			return hf_err(h, "decoder 'Strip' other than Strip(' ', 1, 0) is not supported");
		h->spec.strip_space = 1;
	}
	return 0;
}

/* The byte of a token <0xXX> (two upper-case hex digits), or -1. */
static int
byte_token(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *hi, *lo;

	if (strlen(s) != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>' || s[3] == '\0' ||
	    s[4] == '\0' || (hi = strchr(hex, s[3])) == NULL || (lo = strchr(hex, s[4])) == NULL)
		return -1;
	return (int)((hi - hex) * 16 + (lo - hex));
}

/* SentencePiece-style BPE needs every byte token <0x00>..<0xFF> (they decode as bytes). */
static int
hf_bytes(struct hf *h)
{
	unsigned char seen[256] = { 0 };
	int b;
	size_t i;

	if (!h->spec.metaspace)
		return 0;
	if (!h->byte_fallback)
		return hf_err(h, "SentencePiece-style BPE without byte_fallback is not supported");
	for (i = 0; i < h->spec.n_vocab; i++) {
		if (h->types[i] != TOKENIZER_NORMAL || (b = byte_token(h->tokens[i])) < 0)
			continue;
		h->types[i] = TOKENIZER_BYTE;
		seen[b] = 1;
	}
	for (b = 0; b < 256; b++)
		if (!seen[b])
			return util_err(h->err, "%s: byte_fallback without the byte token '<0x%02X>' is "
			    "not supported", h->path, (unsigned)b);
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
	    hf_pre(h, json_get(root, "pre_tokenizer")) < 0 || hf_bytes(h) < 0 ||
	    hf_decoder(h, json_get(root, "decoder")) < 0)
		return -1;
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
