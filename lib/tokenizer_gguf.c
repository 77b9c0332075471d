/* tokenizer_from_gguf: the tokenizer.ggml.* metadata as a tokenizer_spec. */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "util.h"

struct gg {
	struct gguf *g;
	struct tokenizer_spec spec;
	char	**tokens;	/* [n_vocab] NUL-terminated copies */
	size_t	*lens;
	int32_t	*types;
	float	*scores;
	uint8_t	*attrs;		/* [n_vocab] TOKENIZER_LSTRIP|RSTRIP, or NULL */
	char	**merges;	/* [n_merges] */
	char	*pre;
	char	*err;
};

static int
gg_err(struct gg *x, const char *key, const char *why)
{
	return util_err(x->err, "'%s': %s", key, why);
}

static char *
dup_bytes(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (p != NULL) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

/* A string array into *out (NUL-terminated copies, lengths into lens). */
static int
gg_strings(struct gg *x, const char *key, char ***out, size_t **lens, size_t *n)
{
	int64_t k = gguf_find_key(x->g, key);
	uint64_t i, m;

	*n = 0;
	if (k < 0)
		return 0;
	if (gguf_arr_type(x->g, k) != GGUF_TYPE_STRING)
		return gg_err(x, key, "not an array of strings");
	m = gguf_arr_n(x->g, k);
	if ((*out = calloc(m + 1, sizeof(char *))) == NULL ||
	    (lens != NULL && (*lens = calloc(m + 1, sizeof(size_t))) == NULL))
		return gg_err(x, key, "out of memory");
	for (i = 0; i < m; i++) {
		size_t len;
		const char *s = gguf_arr_str(x->g, k, i, &len);
		if (s == NULL || ((*out)[i] = dup_bytes(s, len)) == NULL)
			return gg_err(x, key, s == NULL ? "unreadable string" : "out of memory");
		if (lens != NULL)
			(*lens)[i] = len;
		(*n)++;
	}
	return 0;
}

/* A numeric array of n elements of type want; NULL (no error) when absent. */
static int
gg_array(struct gg *x, const char *key, int want, size_t esz, size_t n, void **out)
{
	int64_t k = gguf_find_key(x->g, key);
	uint64_t i;

	*out = NULL;
	if (k < 0)
		return 0;
	if (gguf_arr_type(x->g, k) != want || gguf_arr_n(x->g, k) != n)
		return gg_err(x, key, "wrong element type or count");
	if ((*out = malloc(n * esz + 1)) == NULL)
		return gg_err(x, key, "out of memory");
	for (i = 0; i < n; i++)
		if (gguf_arr_get(x->g, k, i, (char *)*out + i * esz) < 0)
			return gg_err(x, key, "unreadable element");
	return 0;
}

static int
gg_id(struct gg *x, const char *key, int32_t *id)
{
	int64_t k = gguf_find_key(x->g, key), v;

	if (k < 0)
		return 0;
	if (gguf_get_int(x->g, k, &v) < 0)
		return gg_err(x, key, "not an integer");
	*id = v >= 0 && (uint64_t)v < x->spec.n_vocab ? (int32_t)v : -1;
	return 0;
}

static int
gg_bool(struct gg *x, const char *key, int *b)
{
	int64_t k = gguf_find_key(x->g, key);

	if (k >= 0 && gguf_get_bool(x->g, k, b) < 0)
		return gg_err(x, key, "not a bool");
	return 0;
}

/* llama.cpp's names of LLAMA_VOCAB_PRE_TYPE_LLAMA3 */
static int
is_llama3(const char *pre)
{
	static const char *const names[] = { "llama3", "llama-v3", "llama-bpe", "falcon3",
		"falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(pre, names[i]) == 0)
			return 1;
	return 0;
}

static int
gg_model(struct gg *x)
{
	int64_t k = gguf_find_key(x->g, "tokenizer.ggml.model");
	size_t mlen = 0, plen = 0;
	const char *m = k >= 0 ? gguf_get_str(x->g, k, &mlen) : NULL, *p;

	if (m == NULL)
		return gg_err(x, "tokenizer.ggml.model", "missing or not a string");
	k = gguf_find_key(x->g, "tokenizer.ggml.pre");
	p = k >= 0 ? gguf_get_str(x->g, k, &plen) : NULL;
	if ((x->pre = p ? dup_bytes(p, plen) : strdup("default")) == NULL)
		return gg_err(x, "tokenizer.ggml.pre", "out of memory");
	x->spec.pre = x->pre;
	/* llama.cpp's defaults per model, before the keys override them */
	if (mlen == 4 && memcmp(m, "gpt2", 4) == 0) {
		x->spec.model = TOKENIZER_BPE;
		x->spec.byte_level = strcmp(x->pre, "gemma4") != 0;
		x->spec.bos = x->spec.eos = 11;
		/* the llama3 pre-tokenizers add BOS unless add_bos_token says no,
		 * and emit a word that is a token whole */
		if (is_llama3(x->pre))
			x->spec.add_bos = x->spec.ignore_merges = 1;
		return 0;
	}
	if (mlen == 5 && memcmp(m, "llama", 5) == 0) {
		x->spec.model = TOKENIZER_SPM;
		x->spec.bos = 1;
		x->spec.eos = 2;
		x->spec.unk = 0;
		x->spec.add_bos = 1;
		x->spec.add_space_prefix = 1;
		return 0;
	}
	if (mlen == 6 && memcmp(m, "gemma4", 6) == 0) {
		/* BPE on raw UTF-8 with U+2581 for spaces, whatever pre says */
		free(x->pre);
		if ((x->pre = strdup("gemma4")) == NULL)
			return gg_err(x, "tokenizer.ggml.pre", "out of memory");
		x->spec.pre = x->pre;
		x->spec.model = TOKENIZER_BPE;
		return 0;
	}
	return util_err(x->err, "tokenizer model '%.*s' is not supported", (int)mlen, m);
}

/*
 * llama.cpp (llama-cpp-python 0.3.36's llama-vocab.cpp) marks tokens with
 * these texts control tokens whatever their token_type says (its
 * end-of-turn, end-of-generation and fill-in-the-middle detection by text),
 * so they are parsed only with special tokens on.
 */
#define FW "\xEF\xBD\x9C"	/* U+FF5C, DeepSeek's fullwidth bar */
#define LB "\xE2\x96\x81"	/* U+2581 */
static const char *const control_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
	"<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<" FW "end" LB "of" LB "sentence" FW ">",
	"<end_of_utterance>", "<|eom_id|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
	"</s>", "<eos>", "<turn|>", "<|tool_response>", "[e~[",
	"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<" FW "fim" LB "begin" FW ">",
	"<PRE>", LB "<PRE>", "<|code_prefix|>", "<|prefix|>",
	"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<" FW "fim" LB "hole" FW ">",
	"<SUF>", LB "<SUF>", "<|code_suffix|>", "<|suffix|>",
	"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<" FW "fim" LB "end" FW ">",
	"<MID>", LB "<MID>", "<|code_middle|>", "<|middle|>",
	"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
	"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
	"<|file_sep|>",
};
#undef FW
#undef LB

/* ... and these (gpt-oss) user-defined, parsed even with special tokens off. */
static const char *const user_texts[] = {
	"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>",
};

static int
text_in(const struct gg *x, size_t i, const char *const *list, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (x->lens[i] == strlen(list[k]) && memcmp(x->tokens[i], list[k], x->lens[i]) == 0)
			return 1;
	return 0;
}

/* The id of the token with text s, or -1. */
static int64_t
find_text(const struct gg *x, const char *s)
{
	size_t i, n = strlen(s);

	for (i = 0; i < x->spec.n_vocab; i++)
		if (x->lens[i] == n && memcmp(x->tokens[i], s, n) == 0)
			return (int64_t)i;
	return -1;
}

static void
gg_control_texts(struct gg *x)
{
	int64_t end, s, eos;
	size_t i;

	if (x->types == NULL)
		return;
	for (i = 0; i < x->spec.n_vocab; i++) {
		if (text_in(x, i, control_texts, sizeof(control_texts) / sizeof(control_texts[0])))
			x->types[i] = TOKENIZER_CONTROL;
		else if (text_in(x, i, user_texts, sizeof(user_texts) / sizeof(user_texts[0])))
			x->types[i] = TOKENIZER_USER_DEFINED;
	}
	/* o200k_harmony, solar-open: <|end|> is user-defined beside <|return|>
	 * and <|call|>, or beside <|call(s)|> and <|flush|> */
	if ((end = find_text(x, "<|end|>")) >= 0 &&
	    (find_text(x, "<|call|>") >= 0 || find_text(x, "<|calls|>") >= 0) &&
	    (find_text(x, "<|return|>") >= 0 || find_text(x, "<|flush|>") >= 0))
		x->types[end] = TOKENIZER_USER_DEFINED;
	/* gemma4, plamo: </s> is a normal token beside <|tool_response> or an
	 * end-of-sequence <|plamo:eos|> */
	eos = x->spec.eos;
	if ((s = find_text(x, "</s>")) >= 0 && (find_text(x, "<|tool_response>") >= 0 ||
	    (eos >= 0 && (size_t)eos < x->spec.n_vocab && strcmp(x->tokens[eos], "<|plamo:eos|>") == 0)))
		x->types[s] = TOKENIZER_NORMAL;
}

/*
 * llama.cpp strips the white space after every added token of a model whose
 * general.name holds "phi-3" or "phi3" (any case), except <unk>, <s> and
 * <|endoftext|>.
 */
static int
gg_phi3(struct gg *x)
{
	int64_t k = gguf_find_key(x->g, "general.name");
	size_t len = 0, i, j;
	const char *s = k >= 0 ? gguf_get_str(x->g, k, &len) : NULL;
	char name[256];

	if (s == NULL || x->types == NULL)
		return 0;
	for (i = 0; i < len && i + 1 < sizeof(name); i++)
		name[i] = s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i];
	name[i] = '\0';
	if (strstr(name, "phi-3") == NULL && strstr(name, "phi3") == NULL)
		return 0;
	if ((x->attrs = calloc(x->spec.n_vocab, 1)) == NULL)
		return gg_err(x, "general.name", "out of memory");
	for (j = 0; j < x->spec.n_vocab; j++)
		if ((x->types[j] == TOKENIZER_CONTROL || x->types[j] == TOKENIZER_USER_DEFINED ||
		    x->types[j] == TOKENIZER_UNKNOWN || strcmp(x->tokens[j], "</s>") == 0) &&
		    strcmp(x->tokens[j], "<unk>") != 0 && strcmp(x->tokens[j], "<s>") != 0 &&
		    strcmp(x->tokens[j], "<|endoftext|>") != 0)
			x->attrs[j] = TOKENIZER_RSTRIP;
	x->spec.attrs = x->attrs;
	return 0;
}

static int
gg_build(struct gg *x)
{
	size_t n, nm;

	x->spec.bos = x->spec.eos = x->spec.unk = x->spec.pad = -1;
	if (gg_model(x) < 0 || gg_strings(x, "tokenizer.ggml.tokens", &x->tokens, &x->lens, &n) < 0)
		return -1;
	if (n == 0)
		return gg_err(x, "tokenizer.ggml.tokens", "missing or empty");
	x->spec.n_vocab = n;
	if (x->spec.bos >= (int32_t)n)
		x->spec.bos = x->spec.eos = -1;
	if (gg_array(x, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, 4, n, (void **)&x->types) < 0 ||
	    gg_array(x, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, 4, n, (void **)&x->scores) < 0 ||
	    gg_strings(x, "tokenizer.ggml.merges", &x->merges, NULL, &nm) < 0)
		return -1;
	/* as llama.cpp: the key must be there for BPE; an empty list is a
	 * vocabulary without merges (gguf-random's stand-in) */
	if (x->spec.model == TOKENIZER_BPE && gguf_find_key(x->g, "tokenizer.ggml.merges") < 0)
		return gg_err(x, "tokenizer.ggml.merges", "missing for a BPE vocabulary");
	if (gg_id(x, "tokenizer.ggml.bos_token_id", &x->spec.bos) < 0 ||
	    gg_id(x, "tokenizer.ggml.eos_token_id", &x->spec.eos) < 0 ||
	    gg_id(x, "tokenizer.ggml.unknown_token_id", &x->spec.unk) < 0 ||
	    gg_id(x, "tokenizer.ggml.padding_token_id", &x->spec.pad) < 0 ||
	    gg_bool(x, "tokenizer.ggml.add_bos_token", &x->spec.add_bos) < 0 ||
	    gg_bool(x, "tokenizer.ggml.add_eos_token", &x->spec.add_eos) < 0 ||
	    gg_bool(x, "tokenizer.ggml.add_space_prefix", &x->spec.add_space_prefix) < 0)
		return -1;
	/* llama.cpp: Gemma 4 always adds BOS (add_space_prefix is SPM's only) */
	if (x->spec.pre != NULL && strcmp(x->spec.pre, "gemma4") == 0) {
		x->spec.add_bos = 1;
		x->spec.add_space_prefix = 0;
	}
	gg_control_texts(x);
	if (gg_phi3(x) < 0)
		return -1;
	x->spec.tokens = (const char *const *)x->tokens;
	x->spec.token_lens = x->lens;
	x->spec.types = x->types;
	x->spec.scores = x->scores;
	x->spec.n_merges = nm;
	x->spec.merges = (const char *const *)x->merges;
	return 0;
}

struct tokenizer *
tokenizer_from_gguf(struct gguf *g, char *err)
{
	struct gg x;
	struct tokenizer *tok = NULL;
	size_t i;

	memset(&x, 0, sizeof(x));
	x.g = g;
	x.err = err;
	if (gg_build(&x) == 0)
		tok = tokenizer_new(&x.spec, err);
	for (i = 0; x.tokens && x.tokens[i]; i++)
		free(x.tokens[i]);
	for (i = 0; x.merges && x.merges[i]; i++)
		free(x.merges[i]);
	free(x.tokens);
	free(x.lens);
	free(x.types);
	free(x.scores);
	free(x.attrs);
	free(x.merges);
	free(x.pre);
	return tok;
}
