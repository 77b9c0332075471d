#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "unicode.h"
#include "util.h"

/* Pre-tokenizer passes: each splits every piece of the previous pass. */
enum pass {
	PASS_QWEN2,		/* qwen2 regex: letters, single digits */
	PASS_QWEN35,		/* qwen2 with combining marks in letter runs */
	PASS_LLAMA3,		/* qwen2 with \p{N}{1,3} */
	PASS_GPT2,		/* 's|'t|..| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
	PASS_DIGIT,		/* \p{N} */
	PASS_DIGITS,		/* \p{N}+ */
	PASS_PUNCT,		/* [\p{P}\$\+<=>\^~\|]+ */
	PASS_DIGIT3,		/* [0-9][0-9][0-9] */
	PASS_NEWLINES,		/* [^\n]+|\n+ (gemma4) */
	PASS_PUNCT_BT,		/* [\p{P}\$\+<=>\^~\|`]+ (falcon) */
	PASS_CRLF,		/* [\r\n] (deepseek) */
	PASS_SP_LETTERS,	/* \s?\p{L}+ (deepseek-coder) */
	PASS_SP_PUNCT,		/* \s?\p{P}+ (deepseek-coder) */
	PASS_CJK,		/* [\x{800}-\x{9FA5}\x{AC00}-\x{D7FF}]+ (deepseek) */
	PASS_DSL_LETTERS,	/* \s?[A-Za-z and a list of cased letters]+ (deepseek-llm) */
	PASS_DSL_PUNCT,		/* \s?[ASCII punctuation, fullwidth forms, quotes]+ (deepseek-llm) */
	PASS_TRAIL_SPACE,	/* \s+$ (deepseek-llm) */
	PASS_METASPACE		/* a word starts at each U+2581 (HF Metaspace split) */
};
#define MAX_PASSES 6

struct strmap {			/* token text -> id, open addressing */
	int32_t	*slot;		/* [cap] id or -1 */
	size_t	cap;		/* power of two */
};

struct merge {
	uint64_t key;		/* left id << 32 | right id; UINT64_MAX = empty */
	int32_t	rank;
	int32_t	id;		/* the merged token */
};

struct tokenizer {
	enum tokenizer_model model;
	int	byte_level;
	int	passes[MAX_PASSES], n_passes;
	size_t	n_vocab;
	char	*text_arena, *piece_arena;
	char	**text;		/* [n_vocab] token text, NUL-terminated */
	uint32_t *text_len;	/* [n_vocab] */
	char	**piece;	/* [n_vocab] decoded bytes */
	uint32_t *piece_len;	/* [n_vocab] */
	int32_t	*type;		/* [n_vocab] */
	uint8_t	*attr;		/* [n_vocab] */
	float	*score;		/* [n_vocab] */
	struct strmap vocab;
	struct merge *merge;	/* [merge_cap] */
	size_t	merge_cap;
	int32_t	byte_tok[256];	/* token of each byte: mapped char or <0xXX>; -1 */
	int32_t	*special;	/* added tokens by first byte, longest first */
	size_t	n_special, special_at[257];
	int32_t	bos, eos, unk, pad;
	int	add_bos, add_eos, add_space_prefix, ignore_merges, casefold;
	int	nfc;		/* NFC-normalize text fragments first */
	int	gemma4;		/* SPM-style BPE: spaces as U+2581, a run of
				   newlines that is a token stays whole */
	int	metaspace;	/* HF SPM-style BPE: spaces as U+2581; every token's
				   U+2581 decodes as a space */
	int	strip_space;	/* decode: drop the text's first space */
};

static int grow(void **p, size_t *cap, size_t need, size_t size);

/* --- hashing ----------------------------------------------------------- */

static uint64_t
hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	while (n--) {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ull;
	}
	return h;
}

static uint64_t
hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static size_t
pow2_at_least(size_t n)
{
	size_t c = 16;

	while (c < n)
		c <<= 1;
	return c;
}

int32_t
tokenizer_find(const struct tokenizer *tok, const char *s, size_t n)
{
	size_t m = tok->vocab.cap - 1, i = hash_bytes(s, n) & m;
	int32_t id;

	while ((id = tok->vocab.slot[i]) >= 0) {
		if (tok->text_len[id] == n && memcmp(tok->text[id], s, n) == 0)
			return id;
		i = (i + 1) & m;
	}
	return -1;
}

/* Insert id; when two ids share a text the later one wins, as in
 * llama.cpp's token_to_id and HF's added tokens over the model vocabulary. */
static void
strmap_put(struct tokenizer *tok, int32_t id)
{
	size_t m = tok->vocab.cap - 1;
	size_t i = hash_bytes(tok->text[id], tok->text_len[id]) & m;
	int32_t o;

	while ((o = tok->vocab.slot[i]) >= 0) {
		if (tok->text_len[o] == tok->text_len[id] &&
		    memcmp(tok->text[o], tok->text[id], tok->text_len[id]) == 0) {
			tok->vocab.slot[i] = id;	/* later ids win */
			return;
		}
		i = (i + 1) & m;
	}
	tok->vocab.slot[i] = id;
}

static const struct merge *
merge_find(const struct tokenizer *tok, int32_t l, int32_t r)
{
	uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
	size_t m = tok->merge_cap - 1, i = hash_u64(key) & m;

	for (; tok->merge[i].key != UINT64_MAX; i = (i + 1) & m)
		if (tok->merge[i].key == key)
			return &tok->merge[i];
	return NULL;
}

/* The first (lowest) rank of a pair wins, as HF and llama.cpp keep it. */
static void
merge_put(struct tokenizer *tok, int32_t l, int32_t r, int32_t rank, int32_t id)
{
	uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
	size_t m = tok->merge_cap - 1, i = hash_u64(key) & m;

	for (; tok->merge[i].key != UINT64_MAX; i = (i + 1) & m)
		if (tok->merge[i].key == key)
			return;
	tok->merge[i].key = key;
	tok->merge[i].rank = rank;
	tok->merge[i].id = id;
}

/* --- building ---------------------------------------------------------- */

/* GPT-2's byte <-> printable character mapping. */
static uint32_t
byte_to_cp(unsigned b)
{
	unsigned n = 0, c;

	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
		return b;
	for (c = 0; c < b; c++)
		if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174))
			n++;
	return 256 + n;
}

static int
cp_to_byte(uint32_t cp)
{
	unsigned b;

	if (cp < 256 && byte_to_cp(cp) == cp)
		return cp;
	if (cp < 256 || cp > 256 + 68)
		return -1;
	for (b = 0; b < 256; b++)
		if (byte_to_cp(b) == cp)
			return b;
	return -1;
}

static int
pre_passes(struct tokenizer *tok, const char *pre, char *err)
{
	static const struct {
		const char *name;
		int	passes[MAX_PASSES], n;
	} tab[] = {
		{ "default", { PASS_PUNCT, PASS_GPT2, PASS_DIGITS, PASS_DIGIT3 }, 4 },
		{ "gpt2", { PASS_GPT2 }, 1 },
		{ "gpt-2", { PASS_GPT2 }, 1 },
		{ "smollm", { PASS_DIGIT, PASS_GPT2 }, 2 },
		{ "starcoder", { PASS_DIGIT, PASS_GPT2 }, 2 },
		{ "refact", { PASS_DIGIT, PASS_GPT2 }, 2 },
		{ "command-r", { PASS_DIGIT, PASS_GPT2 }, 2 },
		{ "codeshell", { PASS_DIGIT, PASS_GPT2 }, 2 },
		{ "exaone", { PASS_DIGIT, PASS_GPT2 }, 2 },
		{ "minerva-7b", { PASS_DIGIT, PASS_GPT2 }, 2 },
		{ "mpt", { PASS_GPT2 }, 1 },
		{ "olmo", { PASS_GPT2 }, 1 },
		{ "jais", { PASS_GPT2 }, 1 },
		{ "qwen2", { PASS_QWEN2 }, 1 },
		{ "deepseek-r1-qwen", { PASS_QWEN2 }, 1 },
		{ "qwen35", { PASS_QWEN35 }, 1 },
		{ "llama3", { PASS_LLAMA3 }, 1 },
		{ "llama-bpe", { PASS_LLAMA3 }, 1 },
		{ "llama-v3", { PASS_LLAMA3 }, 1 },
		{ "falcon3", { PASS_LLAMA3 }, 1 },
		{ "falcon-h1", { PASS_LLAMA3 }, 1 },
		{ "pixtral", { PASS_LLAMA3 }, 1 },
		{ "midm-2.0", { PASS_LLAMA3 }, 1 },
		{ "lfm2", { PASS_LLAMA3 }, 1 },
		{ "jina-v5-nano", { PASS_LLAMA3 }, 1 },
		{ "gemma4", { PASS_NEWLINES }, 1 },
		{ "none", { 0 }, 0 },
		{ "metaspace", { PASS_METASPACE }, 1 },
		{ "falcon", { PASS_PUNCT_BT, PASS_GPT2, PASS_DIGIT3 }, 3 },
		{ "deepseek-coder", { PASS_CRLF, PASS_SP_LETTERS, PASS_SP_PUNCT, PASS_CJK,
		    PASS_DIGIT }, 5 },
		{ "deepseek-llm", { PASS_CRLF, PASS_DSL_LETTERS, PASS_DSL_PUNCT, PASS_TRAIL_SPACE,
		    PASS_CJK, PASS_DIGITS }, 6 },
	};
	size_t i;

	if (pre == NULL)
		pre = "default";
	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		if (strcmp(tab[i].name, pre) == 0) {
			memcpy(tok->passes, tab[i].passes, sizeof(tok->passes));
			tok->n_passes = tab[i].n;
			return 0;
		}
	}
	return util_err(err, "pre-tokenizer '%s' is not supported", pre);
}

static size_t
spec_len(const struct tokenizer_spec *sp, size_t i)
{
	return sp->token_lens ? sp->token_lens[i] : strlen(sp->tokens[i]);
}

/* The raw bytes a token stands for, written to out (room for len bytes). */
static size_t
make_piece(const struct tokenizer *tok, int32_t id, char *out)
{
	const char *s = tok->text[id];
	size_t n = tok->text_len[id], i = 0, o = 0, k;
	uint32_t cp;
	unsigned x;
	int b;

	/* HF decoders (Replace "▁" -> " ") see added tokens too; llama.cpp does not */
	if (!tok->metaspace && (tok->type[id] == TOKENIZER_CONTROL ||
	    tok->type[id] == TOKENIZER_USER_DEFINED || tok->type[id] == TOKENIZER_UNKNOWN)) {
		memcpy(out, s, n);
		return n;
	}
	if (tok->type[id] == TOKENIZER_BYTE && n == 6 && sscanf(s, "<0x%2X>", &x) == 1) {
		out[0] = (char)x;
		return 1;
	}
	while (i < n) {
		k = unicode_decode(s + i, n - i, &cp);
		if (tok->byte_level && (b = cp_to_byte(cp)) >= 0)
			out[o++] = (char)b;
		else if (!tok->byte_level && cp == 0x2581)
			out[o++] = ' ';
		else {
			memcpy(out + o, s + i, k);
			o += k;
		}
		i += k;
	}
	return o;
}

static int
copy_vocab(struct tokenizer *tok, const struct tokenizer_spec *sp, char *err)
{
	size_t i, total = 0, n = sp->n_vocab;
	char *p, *q;

	tok->text = calloc(n, sizeof(char *));
	tok->piece = calloc(n, sizeof(char *));
	tok->text_len = calloc(n, sizeof(uint32_t));
	tok->piece_len = calloc(n, sizeof(uint32_t));
	tok->type = calloc(n, sizeof(int32_t));
	tok->attr = calloc(n, 1);
	tok->score = calloc(n, sizeof(float));
	for (i = 0; i < n; i++)
		total += spec_len(sp, i) + 1;
	tok->text_arena = malloc(total + 1);
	tok->piece_arena = malloc(total + 1);
	tok->vocab.cap = pow2_at_least(2 * n);
	tok->vocab.slot = malloc(tok->vocab.cap * sizeof(int32_t));
	if (!tok->text || !tok->piece || !tok->text_len || !tok->piece_len || !tok->type ||
	    !tok->attr || !tok->score || !tok->text_arena || !tok->piece_arena || !tok->vocab.slot)
		return util_err(err, "tokenizer: out of memory");
	memset(tok->vocab.slot, 0xFF, tok->vocab.cap * sizeof(int32_t));
	p = tok->text_arena;
	q = tok->piece_arena;
	for (i = 0; i < n; i++) {
		size_t len = spec_len(sp, i);
		if (sp->tokens[i] == NULL)
			return util_err(err, "token %zu has no text", i);
		memcpy(p, sp->tokens[i], len);
		p[len] = '\0';
		tok->text[i] = p;
		tok->text_len[i] = len;
		p += len + 1;
		tok->type[i] = sp->types ? sp->types[i] : TOKENIZER_NORMAL;
		tok->attr[i] = sp->attrs ? sp->attrs[i] : 0;
		tok->score[i] = sp->scores ? sp->scores[i] : 0.0f;
		tok->piece[i] = q;
		tok->piece_len[i] = make_piece(tok, i, q);
		q[tok->piece_len[i]] = '\0';
		q += tok->piece_len[i] + 1;
		strmap_put(tok, i);
	}
	return 0;
}

static int
copy_merges(struct tokenizer *tok, const struct tokenizer_spec *sp, char *err)
{
	size_t i, cap = 0;
	char *buf = NULL;

	tok->merge_cap = pow2_at_least(2 * sp->n_merges);
	tok->merge = malloc(tok->merge_cap * sizeof(struct merge));
	if (tok->merge == NULL)
		return util_err(err, "tokenizer: out of memory");
	memset(tok->merge, 0xFF, tok->merge_cap * sizeof(struct merge));
	for (i = 0; i < sp->n_merges; i++) {
		const char *m = sp->merges[i], *sp1;
		size_t n = strlen(m), ln;
		int32_t l, r, id;

		sp1 = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
		if (sp1 == NULL) {
			free(buf);
			return util_err(err, "merge %zu '%s' is not 'left right'", i, m);
		}
		ln = sp1 - m;
		l = tokenizer_find(tok, m, ln);
		r = tokenizer_find(tok, sp1 + 1, n - ln - 1);
		if (l < 0 || r < 0)
			continue;	/* cannot apply: a part is no token */
		if (grow((void **)&buf, &cap, n, 1) < 0) {
			free(buf);
			return util_err(err, "tokenizer: out of memory");
		}
		memcpy(buf, m, ln);
		memcpy(buf + ln, sp1 + 1, n - ln - 1);
		if ((id = tokenizer_find(tok, buf, n - 1)) < 0)
			continue;
		merge_put(tok, l, r, (int32_t)i, id);
	}
	free(buf);
	return 0;
}

static int
cmp_special(const void *a, const void *b, void *arg)
{
	const struct tokenizer *tok = arg;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	unsigned char fx = tok->text[x][0], fy = tok->text[y][0];

	if (fx != fy)
		return fx < fy ? -1 : 1;
	if (tok->text_len[x] != tok->text_len[y])
		return tok->text_len[x] > tok->text_len[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Tokens split out of the text before pre-tokenizing (llama.cpp's
 * special-token cache): control, user-defined and unknown ones. */
static int
is_added(const struct tokenizer *tok, size_t i)
{
	int t = tok->type[i];

	return (t == TOKENIZER_CONTROL || t == TOKENIZER_USER_DEFINED || t == TOKENIZER_UNKNOWN) &&
	    tok->text_len[i] > 0;
}

static int
index_specials(struct tokenizer *tok, char *err)
{
	size_t i, n = 0, k;

	for (i = 0; i < tok->n_vocab; i++)
		if (is_added(tok, i))
			n++;
	tok->special = malloc((n + 1) * sizeof(int32_t));
	if (tok->special == NULL)
		return util_err(err, "tokenizer: out of memory");
	for (i = 0, k = 0; i < tok->n_vocab; i++)
		if (is_added(tok, i))
			tok->special[k++] = i;
	tok->n_special = n;
	qsort_r(tok->special, n, sizeof(int32_t), cmp_special, tok);
	for (i = 0, k = 0; i <= 256; i++) {
		while (k < n && (unsigned char)tok->text[tok->special[k]][0] < i)
			k++;
		tok->special_at[i] = k;
	}
	return 0;
}

static void
index_bytes(struct tokenizer *tok)
{
	char buf[8];
	unsigned b;

	for (b = 0; b < 256; b++) {
		if (tok->model == TOKENIZER_BPE && tok->byte_level) {
			size_t n = unicode_encode(byte_to_cp(b), buf);
			tok->byte_tok[b] = tokenizer_find(tok, buf, n);
		} else {
			snprintf(buf, sizeof(buf), "<0x%02X>", b);
			tok->byte_tok[b] = tokenizer_find(tok, buf, 6);
		}
	}
}

struct tokenizer *
tokenizer_new(const struct tokenizer_spec *sp, char *err)
{
	struct tokenizer *tok = calloc(1, sizeof(*tok));

	if (tok == NULL) {
		util_err(err, "tokenizer: out of memory");
		return NULL;
	}
	tok->model = sp->model;
	tok->byte_level = sp->model == TOKENIZER_BPE && sp->byte_level;
	tok->n_vocab = sp->n_vocab;
	tok->bos = sp->bos;
	tok->eos = sp->eos;
	tok->unk = sp->unk;
	tok->pad = sp->pad;
	tok->add_bos = sp->add_bos;
	tok->add_eos = sp->add_eos;
	tok->add_space_prefix = sp->add_space_prefix;
	tok->ignore_merges = sp->ignore_merges;
	tok->casefold = sp->casefold_contractions;
	tok->nfc = sp->nfc;
	tok->gemma4 = sp->model == TOKENIZER_BPE && sp->pre != NULL && strcmp(sp->pre, "gemma4") == 0;
	tok->metaspace = sp->model == TOKENIZER_BPE && !sp->byte_level && sp->metaspace;
	tok->strip_space = sp->strip_space || (sp->model == TOKENIZER_SPM && sp->add_space_prefix);
	if (sp->n_vocab == 0 || sp->n_vocab > INT32_MAX) {
		util_err(err, "vocabulary of %zu tokens", sp->n_vocab);
		goto fail;
	}
	if ((sp->model == TOKENIZER_BPE && pre_passes(tok, sp->pre, err) < 0) ||
	    copy_vocab(tok, sp, err) < 0 || copy_merges(tok, sp, err) < 0 ||
	    index_specials(tok, err) < 0)
		goto fail;
	index_bytes(tok);
	return tok;
fail:
	tokenizer_free(tok);
	return NULL;
}

void
tokenizer_free(struct tokenizer *tok)
{
	if (tok == NULL)
		return;
	free(tok->text_arena);
	free(tok->piece_arena);
	free(tok->text);
	free(tok->text_len);
	free(tok->piece);
	free(tok->piece_len);
	free(tok->type);
	free(tok->attr);
	free(tok->score);
	free(tok->vocab.slot);
	free(tok->merge);
	free(tok->special);
	free(tok);
}

/* --- accessors --------------------------------------------------------- */

size_t
tokenizer_n_vocab(const struct tokenizer *tok)
{
	return tok->n_vocab;
}

int32_t
tokenizer_bos(const struct tokenizer *tok)
{
	return tok->bos;
}

int32_t
tokenizer_eos(const struct tokenizer *tok)
{
	return tok->eos;
}

const char *
tokenizer_token(const struct tokenizer *tok, int32_t id)
{
	return id >= 0 && (size_t)id < tok->n_vocab ? tok->text[id] : NULL;
}

int
tokenizer_type(const struct tokenizer *tok, int32_t id)
{
	return id >= 0 && (size_t)id < tok->n_vocab ? tok->type[id] : -1;
}

int
tokenizer_is_control(const struct tokenizer *tok, int32_t id)
{
	return tokenizer_type(tok, id) == TOKENIZER_CONTROL;
}

const char *
tokenizer_piece(const struct tokenizer *tok, int32_t id, size_t *len)
{
	if (id < 0 || (size_t)id >= tok->n_vocab)
		return NULL;
	*len = tok->piece_len[id];
	return tok->piece[id];
}

/* --- pre-tokenizer ----------------------------------------------------- */

/* A text fragment decoded to code points (ill-formed UTF-8 repaired). */
struct text {
	uint32_t *cp;		/* [n] */
	uint8_t	*fl;		/* [n] unicode_flags */
	size_t	*off;		/* [n + 1] byte offset of each code point in buf */
	char	*buf;		/* the repaired UTF-8 */
	size_t	n, cap, bufcap;
};

/* ASCII lower case; with casefold also U+017F and U+212A, which Unicode
 * simple case folding maps to 's' and 'k' (HF's (?i:...) sees them). */
static uint32_t
fold(uint32_t c, int casefold)
{
	if (c >= 'A' && c <= 'Z')
		return c + 32;
	if (casefold && c == 0x17F)
		return 's';
	if (casefold && c == 0x212A)
		return 'k';
	return c;
}

/* 's 't 're 've 'm 'll 'd; ci: 0 exact, 1 ASCII case-insensitive, 2 HF case folding */
static size_t
match_contraction(const struct text *t, size_t i, size_t end, int ci)
{
	uint32_t c1, c2;

	if (t->cp[i] != '\'' || i + 1 >= end)
		return 0;
	c1 = ci ? fold(t->cp[i + 1], ci == 2) : t->cp[i + 1];
	if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
		return 2;
	if (i + 2 >= end)
		return 0;
	c2 = ci ? fold(t->cp[i + 2], ci == 2) : t->cp[i + 2];
	if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
		return 3;
	return 0;
}

static size_t
run(const struct text *t, size_t i, size_t end, unsigned any, unsigned none)
{
	while (i < end && (t->fl[i] & any) && !(t->fl[i] & none))
		i++;
	return i;
}

/* Whitespace at i: \s*[\r\n]+ | \s+(?!\S) | \s+ */
static size_t
match_space(const struct text *t, size_t i, size_t end, int crlf)
{
	size_t e = run(t, i, end, UNICODE_SPACE, 0), k;

	if (crlf)
		for (k = e; k > i; k--)
			if (t->cp[k - 1] == '\r' || t->cp[k - 1] == '\n')
				return k - i;
	if (e == end || e - i < 2)
		return e - i;
	return e - i - 1;
}

static int
is_crlf(uint32_t c)
{
	return c == '\r' || c == '\n';
}

/* qwen2 / qwen35 / llama3:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?LET+|\p{N}{1,ndig}| ?[^\s LET \p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+   where LET is \p{L} (qwen35: [\p{L}\p{M}]) */
static size_t
match_qwen(const struct text *t, size_t i, size_t end, unsigned let, size_t ndig, int ci)
{
	unsigned f = t->fl[i], other = UNICODE_SPACE | UNICODE_N | let;
	size_t k, j;

	if ((k = match_contraction(t, i, end, ci)) > 0)
		return k;
	if (f & let)
		return run(t, i, end, let, 0) - i;
	if (!is_crlf(t->cp[i]) && !(f & (UNICODE_L | UNICODE_N)) && i + 1 < end &&
	    (t->fl[i + 1] & let))
		return run(t, i + 1, end, let, 0) - i;
	if (f & UNICODE_N) {
		for (k = i + 1; k < end && k - i < ndig && (t->fl[k] & UNICODE_N); k++)
			;
		return k - i;
	}
	j = t->cp[i] == ' ' && i + 1 < end && !(t->fl[i + 1] & other) ? i + 1 : i;
	if (!(t->fl[j] & other)) {
		for (k = j + 1; k < end && !(t->fl[k] & other); k++)
			;
		while (k < end && is_crlf(t->cp[k]))
			k++;
		return k - i;
	}
	return match_space(t, i, end, 1);
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t
match_gpt2(const struct text *t, size_t i, size_t end)
{
	unsigned other = UNICODE_SPACE | UNICODE_L | UNICODE_N;
	size_t k, j;

	if ((k = match_contraction(t, i, end, 0)) > 0)
		return k;
	j = t->cp[i] == ' ' && i + 1 < end ? i + 1 : i;
	if (t->fl[j] & UNICODE_L)
		return run(t, j, end, UNICODE_L, 0) - i;
	if (t->fl[j] & UNICODE_N)
		return run(t, j, end, UNICODE_N, 0) - i;
	if (!(t->fl[j] & other)) {
		for (k = j + 1; k < end && !(t->fl[k] & other); k++)
			;
		return k - i;
	}
	return match_space(t, i, end, 0);
}

static int
is_punct_sym(const struct text *t, size_t i)
{
	uint32_t c = t->cp[i];

	return (t->fl[i] & UNICODE_P) || c == '$' || c == '+' || c == '<' || c == '=' ||
	    c == '>' || c == '^' || c == '~' || c == '|';
}

static int
is_ascii_digit(uint32_t c)
{
	return c >= '0' && c <= '9';
}

/* The letter class of llama.cpp's deepseek-llm pattern \s?[A-Za-zµÀ-Ö...]+
 * (llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM), as code point ranges. */
static const uint32_t dsl_letters[][2] = {
	{ 0x0041, 0x005A }, { 0x0061, 0x007A }, { 0x00B5, 0x00B5 }, { 0x00C0, 0x00D6 },
	{ 0x00D8, 0x00F6 }, { 0x00F8, 0x01BA }, { 0x01BC, 0x01BF }, { 0x01C4, 0x0293 },
	{ 0x0295, 0x02AF }, { 0x0370, 0x0373 }, { 0x0376, 0x0377 }, { 0x037B, 0x037D },
	{ 0x037F, 0x037F }, { 0x0386, 0x0386 }, { 0x0388, 0x038A }, { 0x038C, 0x038C },
	{ 0x038E, 0x03A1 }, { 0x03A3, 0x03F5 }, { 0x03F7, 0x0481 }, { 0x048A, 0x052F },
	{ 0x0531, 0x0556 }, { 0x10A0, 0x10C5 }, { 0x13A0, 0x13F5 }, { 0x13F8, 0x13FD },
	{ 0x1C90, 0x1CBA }, { 0x1CBD, 0x1CBF }, { 0x1D00, 0x1D2B }, { 0x1D6B, 0x1D77 },
	{ 0x1D79, 0x1D9A }, { 0x1E00, 0x1F15 }, { 0x1F18, 0x1F1D }, { 0x1F20, 0x1F45 },
	{ 0x1F48, 0x1F4D }, { 0x1F50, 0x1F57 }, { 0x1F59, 0x1F59 }, { 0x1F5B, 0x1F5B },
	{ 0x1F5D, 0x1F5D }, { 0x1F5F, 0x1F7D }, { 0x1F80, 0x1FB4 }, { 0x1FB6, 0x1FBC },
	{ 0x1FBE, 0x1FBE }, { 0x1FC2, 0x1FC4 }, { 0x1FC6, 0x1FCC }, { 0x1FD0, 0x1FD3 },
	{ 0x1FD6, 0x1FDB }, { 0x1FE0, 0x1FEC }, { 0x1FF2, 0x1FF4 }, { 0x1FF6, 0x1FFC },
	{ 0x2102, 0x2102 }, { 0x2107, 0x2107 }, { 0x210A, 0x2113 }, { 0x2115, 0x2115 },
	{ 0x2119, 0x211D }, { 0x2124, 0x2124 }, { 0x2126, 0x2126 }, { 0x2128, 0x2128 },
	{ 0x212A, 0x212D }, { 0x212F, 0x2134 }, { 0x2139, 0x2139 }, { 0x213C, 0x213F },
	{ 0x2145, 0x2149 }, { 0x214E, 0x214E }, { 0x2183, 0x2184 }, { 0x2C00, 0x2C7B },
	{ 0x2C7E, 0x2CE4 }, { 0x2CEB, 0x2CEE }, { 0x2CF2, 0x2CF3 }, { 0xA640, 0xA66D },
	{ 0xA680, 0xA69B }, { 0xA722, 0xA76F }, { 0xA771, 0xA787 }, { 0xA78B, 0xA78E },
	{ 0xAB70, 0xABBF }, { 0xFB00, 0xFB06 }, { 0xFB13, 0xFB17 }, { 0xFF21, 0xFF3A },
	{ 0xFF41, 0xFF5A }, { 0x10400, 0x1044F }, { 0x104B0, 0x104D3 }, { 0x104D8, 0x104FB },
	{ 0x10C80, 0x10CB2 }, { 0x10CC0, 0x10CF2 }, { 0x118A0, 0x118DF }, { 0x1E900, 0x1E943 },
};

/* Character classes of the split patterns, code point i of t. */
enum cls { CLS_L, CLS_P, CLS_CJK, CLS_DSL_LETTER, CLS_DSL_PUNCT };

static int
in_class(const struct text *t, size_t i, enum cls c)
{
	uint32_t cp = t->cp[i];
	size_t lo = 0, hi = sizeof(dsl_letters) / sizeof(dsl_letters[0]), mid;

	switch (c) {
	case CLS_L:
		return (t->fl[i] & UNICODE_L) != 0;
	case CLS_P:
		return (t->fl[i] & UNICODE_P) != 0;
	case CLS_CJK:	/* llama.cpp's std::wregex sees white space as \v */
		return ((cp >= 0x800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF)) &&
		    !(t->fl[i] & UNICODE_SPACE);
	case CLS_DSL_PUNCT:	/* !-/ :-~ ！-／ ：-～ ‘-‟ 　-。 (U+3000 is \s) */
		return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x7E) ||
		    (cp >= 0xFF01 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF5E) ||
		    (cp >= 0x2018 && cp <= 0x201F) || cp == 0x3001 || cp == 0x3002;
	case CLS_DSL_LETTER:
		while (lo < hi) {
			mid = lo + (hi - lo) / 2;
			if (cp < dsl_letters[mid][0])
				hi = mid;
			else if (cp > dsl_letters[mid][1])
				lo = mid + 1;
			else
				return 1;
		}
		return 0;
	}
	return 0;
}

static size_t
class_run(const struct text *t, size_t i, size_t end, enum cls c)
{
	while (i < end && in_class(t, i, c))
		i++;
	return i;
}

/* \s?C+ at i */
static size_t
match_space_class(const struct text *t, size_t i, size_t end, enum cls c)
{
	if ((t->fl[i] & UNICODE_SPACE) && i + 1 < end && in_class(t, i + 1, c))
		return class_run(t, i + 1, end, c) - i;
	return class_run(t, i, end, c) - i;
}

/* Length of the match of pass at i (0: none; the position joins a gap). */
static size_t
match_at(const struct tokenizer *tok, int pass, const struct text *t, size_t i, size_t end)
{
	size_t k;
	int ci = tok->casefold ? 2 : 1;

	switch (pass) {
	case PASS_QWEN2:
		return match_qwen(t, i, end, UNICODE_L, 1, ci);
	case PASS_QWEN35:
		return match_qwen(t, i, end, UNICODE_L | UNICODE_M, 1, ci);
	case PASS_LLAMA3:
		return match_qwen(t, i, end, UNICODE_L, 3, ci);
	case PASS_GPT2:
		return match_gpt2(t, i, end);
	case PASS_DIGIT:
		return (t->fl[i] & UNICODE_N) ? 1 : 0;
	case PASS_DIGITS:
		return run(t, i, end, UNICODE_N, 0) - i;
	case PASS_PUNCT:
		for (k = i; k < end && is_punct_sym(t, k); k++)
			;
		return k - i;
	case PASS_DIGIT3:
		return i + 2 < end && is_ascii_digit(t->cp[i]) && is_ascii_digit(t->cp[i + 1]) &&
		    is_ascii_digit(t->cp[i + 2]) ? 3 : 0;
	case PASS_NEWLINES:
		for (k = i; k < end && (t->cp[k] == '\n') == (t->cp[i] == '\n'); k++)
			;
		return k - i;
	case PASS_PUNCT_BT:
		for (k = i; k < end && (is_punct_sym(t, k) || t->cp[k] == '`'); k++)
			;
		return k - i;
	case PASS_CRLF:
		return is_crlf(t->cp[i]);
	case PASS_SP_LETTERS:
		return match_space_class(t, i, end, CLS_L);
	case PASS_SP_PUNCT:
		return match_space_class(t, i, end, CLS_P);
	case PASS_CJK:
		return class_run(t, i, end, CLS_CJK) - i;
	case PASS_DSL_LETTERS:
		return match_space_class(t, i, end, CLS_DSL_LETTER);
	case PASS_DSL_PUNCT:
		return match_space_class(t, i, end, CLS_DSL_PUNCT);
	case PASS_TRAIL_SPACE:	/* split_span finds it from the end */
		return 0;
	case PASS_METASPACE:
		if (t->cp[i] != 0x2581)
			return 0;
		for (k = i + 1; k < end && t->cp[k] != 0x2581; k++)
			;
		return k - i;
	}
	return 1;
}

/* --- encoding ---------------------------------------------------------- */

struct sym {
	int32_t	id;
	int32_t	prev, next;
	uint32_t start, len;	/* bytes of the word */
};

struct cand {			/* a pair that may merge */
	double	score;		/* BPE: rank (lower first); SPM: -score */
	int32_t	left, right;
	int32_t	id;		/* BPE: merged id; SPM: byte size of the pair */
};

struct span {
	size_t	a, b;
};

struct work {
	const struct tokenizer *tok;
	int32_t	*out;
	size_t	n_out, cap_out;
	struct text t;
	struct span *sp[2];
	size_t	n_sp[2], cap_sp[2];
	struct sym *sym;
	size_t	cap_sym;
	struct cand *heap;
	size_t	n_heap, cap_heap;
	char	*word;		/* SPM text / byte-level mapped word */
	size_t	cap_word;
	uint32_t *ncp;		/* NFC code points */
	char	*norm;		/* NFC text */
	char	*esc;		/* gemma4, metaspace: text with spaces as U+2581 */
	size_t	cap_ncp, cap_norm, cap_esc;
	int	oom;
};

static int
grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	if ((q = realloc(*p, c * size)) == NULL)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static void
emit(struct work *w, int32_t id)
{
	if (grow((void **)&w->out, &w->cap_out, w->n_out + 1, sizeof(int32_t)) < 0) {
		w->oom = 1;
		return;
	}
	w->out[w->n_out++] = id;
}

/* Room for n code points (+1 for the end offset). */
static int
text_reserve(struct text *t, size_t n)
{
	void *p;

	if (n + 1 <= t->cap)
		return 0;
	if ((p = realloc(t->cp, (n + 1) * sizeof(uint32_t))) == NULL)
		return -1;
	t->cp = p;
	if ((p = realloc(t->fl, n + 1)) == NULL)
		return -1;
	t->fl = p;
	if ((p = realloc(t->off, (n + 1) * sizeof(size_t))) == NULL)
		return -1;
	t->off = p;
	t->cap = n + 1;
	return 0;
}

/* Decode s[0..n) into w->t, repairing ill-formed UTF-8. */
static int
text_load(struct work *w, const char *s, size_t n)
{
	struct text *t = &w->t;
	size_t i = 0, o = 0, k;
	uint32_t cp;

	if (grow((void **)&t->buf, &t->bufcap, 3 * n + 1, 1) < 0 || text_reserve(t, n) < 0)
		return -1;
	t->n = 0;
	while (i < n) {
		k = unicode_decode(s + i, n - i, &cp);
		t->cp[t->n] = cp;
		t->fl[t->n] = unicode_flags(cp);
		t->off[t->n] = o;
		if (cp == UNICODE_REPLACEMENT)
			o += unicode_encode(cp, t->buf + o);
		else {
			memcpy(t->buf + o, s + i, k);
			o += k;
		}
		t->n++;
		i += k;
	}
	t->off[t->n] = o;
	return 0;
}

static int
span_push(struct work *w, int k, size_t a, size_t b)
{
	if (grow((void **)&w->sp[k], &w->cap_sp[k], w->n_sp[k] + 1, sizeof(struct span)) < 0)
		return -1;
	w->sp[k][w->n_sp[k]].a = a;
	w->sp[k][w->n_sp[k]].b = b;
	w->n_sp[k]++;
	return 0;
}

/* Split [a, b) by pass into w->sp[k]: matches and the gaps between them. */
static int
split_span(struct work *w, int pass, size_t a, size_t b, int k)
{
	size_t i = a, gap = a, m;

	if (pass == PASS_TRAIL_SPACE) {
		for (i = b; i > a && (w->t.fl[i - 1] & UNICODE_SPACE); i--)
			;
		if ((a < i && span_push(w, k, a, i) < 0) || (i < b && span_push(w, k, i, b) < 0))
			return -1;
		return 0;
	}
	while (i < b) {
		if ((m = match_at(w->tok, pass, &w->t, i, b)) == 0) {
			i++;
			continue;
		}
		if (gap < i && span_push(w, k, gap, i) < 0)
			return -1;
		if (span_push(w, k, i, i + m) < 0)
			return -1;
		i += m;
		gap = i;
	}
	if (gap < b && span_push(w, k, gap, b) < 0)
		return -1;
	return 0;
}

/* Run every pass; the words end up in w->sp[*which]. */
static int
pretokenize(struct work *w, int *which)
{
	const struct tokenizer *tok = w->tok;
	int p, cur = 0;
	size_t j;

	w->n_sp[0] = 0;
	if (span_push(w, 0, 0, w->t.n) < 0)
		return -1;
	for (p = 0; p < tok->n_passes; p++) {
		w->n_sp[!cur] = 0;
		for (j = 0; j < w->n_sp[cur]; j++)
			if (split_span(w, tok->passes[p], w->sp[cur][j].a, w->sp[cur][j].b, !cur) < 0)
				return -1;
		cur = !cur;
	}
	*which = cur;
	return 0;
}

/* Min-heap of candidates by (score, left). */
static int
cand_less(const struct cand *x, const struct cand *y)
{
	return x->score < y->score || (x->score == y->score && x->left < y->left);
}

static void
heap_push(struct work *w, struct cand c)
{
	size_t i, p;

	if (grow((void **)&w->heap, &w->cap_heap, w->n_heap + 1, sizeof(struct cand)) < 0) {
		w->oom = 1;
		return;
	}
	i = w->n_heap++;
	while (i > 0 && cand_less(&c, &w->heap[p = (i - 1) / 2])) {
		w->heap[i] = w->heap[p];
		i = p;
	}
	w->heap[i] = c;
}

static struct cand
heap_pop(struct work *w)
{
	struct cand top = w->heap[0], last = w->heap[--w->n_heap];
	size_t i = 0, c, n = w->n_heap;

	while ((c = 2 * i + 1) < n) {
		if (c + 1 < n && cand_less(&w->heap[c + 1], &w->heap[c]))
			c++;
		if (!cand_less(&w->heap[c], &last))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	if (n > 0)
		w->heap[i] = last;
	return top;
}

static int
sym_push(struct work *w, size_t *n, int32_t id, uint32_t start, uint32_t len)
{
	if (grow((void **)&w->sym, &w->cap_sym, *n + 1, sizeof(struct sym)) < 0)
		return -1;
	w->sym[*n].id = id;
	w->sym[*n].prev = (int32_t)*n - 1;
	w->sym[*n].next = -1;
	w->sym[*n].start = start;
	w->sym[*n].len = len;
	if (*n > 0)
		w->sym[*n - 1].next = (int32_t)*n;
	(*n)++;
	return 0;
}

/* Initial symbols of a BPE word: a token per byte (byte-level) or per
 * character, with <0xXX> byte fallback, else unk, else dropped (as HF). */
static int
bpe_symbols(struct work *w, const char *s, size_t n, size_t *nsym)
{
	const struct tokenizer *tok = w->tok;
	size_t i = 0, k, b;
	uint32_t cp;
	int32_t id;

	*nsym = 0;
	while (i < n) {
		if (tok->byte_level) {
			id = tok->byte_tok[(unsigned char)s[i]];
			if (id < 0)
				id = tok->unk;
			if (id >= 0 && sym_push(w, nsym, id, i, 1) < 0)
				return -1;
			i++;
			continue;
		}
		k = unicode_decode(s + i, n - i, &cp);
		if ((id = tokenizer_find(tok, s + i, k)) >= 0) {
			if (sym_push(w, nsym, id, i, k) < 0)
				return -1;
		} else {
			for (b = 0; b < k; b++) {
				id = tok->byte_tok[(unsigned char)s[i + b]];
				if (id < 0)
					id = tok->unk;
				if (id >= 0 && sym_push(w, nsym, id, i + b, 1) < 0)
					return -1;
			}
		}
		i += k;
	}
	return 0;
}

static void
bpe_candidate(struct work *w, int32_t left)
{
	int32_t right = w->sym[left].next;
	const struct merge *m;
	struct cand c;

	if (right < 0 || (m = merge_find(w->tok, w->sym[left].id, w->sym[right].id)) == NULL)
		return;
	c.score = m->rank;
	c.left = left;
	c.right = right;
	c.id = m->id;
	heap_push(w, c);
}

/* ignore_merges: a word that is a token as a whole; -1 if not. */
static int32_t
bpe_whole(struct work *w, const char *s, size_t n)
{
	size_t i, o = 0;

	if (!w->tok->byte_level)
		return tokenizer_find(w->tok, s, n);
	if (grow((void **)&w->word, &w->cap_word, 2 * n + 1, 1) < 0)
		return -1;
	for (i = 0; i < n; i++)
		o += unicode_encode(byte_to_cp((unsigned char)s[i]), w->word + o);
	return tokenizer_find(w->tok, w->word, o);
}

static int
bpe_word(struct work *w, const char *s, size_t n)
{
	size_t nsym, i;
	int32_t id, j;
	struct cand c;

	for (i = 0; w->tok->gemma4 && i < n && s[i] == '\n'; i++)
		;
	if ((w->tok->ignore_merges || (n > 0 && i == n)) && (id = bpe_whole(w, s, n)) >= 0) {
		emit(w, id);
		return 0;
	}
	if (bpe_symbols(w, s, n, &nsym) < 0)
		return -1;
	w->n_heap = 0;
	for (i = 0; i + 1 < nsym; i++)
		bpe_candidate(w, i);
	while (w->n_heap > 0) {
		const struct merge *m;
		struct sym *l, *r;

		c = heap_pop(w);
		l = &w->sym[c.left];
		if (l->len == 0 || l->next != c.right)
			continue;
		r = &w->sym[c.right];
		m = merge_find(w->tok, l->id, r->id);
		if (m == NULL || m->id != c.id)
			continue;
		l->id = c.id;
		l->len += r->len;
		r->len = 0;
		l->next = r->next;
		if (r->next >= 0)
			w->sym[r->next].prev = c.left;
		if (l->prev >= 0)
			bpe_candidate(w, l->prev);
		bpe_candidate(w, c.left);
	}
	for (j = nsym > 0 ? 0 : -1; j >= 0; j = w->sym[j].next)
		emit(w, w->sym[j].id);
	return w->oom ? -1 : 0;
}

/* SPM: a pair whose concatenation is a token may merge, highest score first. */
static void
spm_candidate(struct work *w, const char *s, int32_t left)
{
	int32_t right = left >= 0 ? w->sym[left].next : -1, id;
	struct cand c;

	if (right < 0)
		return;
	id = tokenizer_find(w->tok, s + w->sym[left].start, w->sym[left].len + w->sym[right].len);
	if (id < 0)
		return;
	c.score = -(double)w->tok->score[id];
	c.left = left;
	c.right = right;
	c.id = (int32_t)(w->sym[left].len + w->sym[right].len);
	heap_push(w, c);
}

/* A final SPM symbol: its token, or its bytes as <0xXX>, or unk. */
static void
spm_emit(struct work *w, const char *s, size_t n)
{
	int32_t id = tokenizer_find(w->tok, s, n);
	size_t i;

	if (id >= 0) {
		emit(w, id);
		return;
	}
	for (i = 0; i < n; i++) {
		id = w->tok->byte_tok[(unsigned char)s[i]];
		if (id < 0)
			id = w->tok->unk;
		if (id >= 0)
			emit(w, id);
	}
}

/* SPM on s[0..n) (spaces already escaped to U+2581). */
static int
spm_text(struct work *w, const char *s, size_t n)
{
	size_t nsym = 0, i = 0, k;
	uint32_t cp;
	int32_t j;
	struct cand c;

	while (i < n) {
		k = unicode_decode(s + i, n - i, &cp);
		if (sym_push(w, &nsym, -1, i, k) < 0)
			return -1;
		i += k;
	}
	w->n_heap = 0;
	for (i = 0; i + 1 < nsym; i++)
		spm_candidate(w, s, i);
	while (w->n_heap > 0) {
		struct sym *l, *r;

		c = heap_pop(w);
		l = &w->sym[c.left];
		r = &w->sym[c.right];
		if (l->len == 0 || r->len == 0 || l->len + r->len != (uint32_t)c.id)
			continue;
		l->len += r->len;
		r->len = 0;
		l->next = r->next;
		if (r->next >= 0)
			w->sym[r->next].prev = c.left;
		spm_candidate(w, s, l->prev);
		spm_candidate(w, s, c.left);
	}
	for (j = nsym > 0 ? 0 : -1; j >= 0; j = w->sym[j].next)
		spm_emit(w, s + w->sym[j].start, w->sym[j].len);
	return w->oom ? -1 : 0;
}

/* The NFC of s[0..n) into w->norm (*s, *n updated); ASCII is left alone. */
static int
normalize(struct work *w, const char **s, size_t *n)
{
	size_t i, m, o = 0;

	for (i = 0; i < *n && (unsigned char)(*s)[i] < 0x80; i++)
		;
	if (i == *n)
		return 0;
	if (text_load(w, *s, *n) < 0 ||
	    grow((void **)&w->ncp, &w->cap_ncp, UNICODE_NFD_MAX * w->t.n + 1, sizeof(uint32_t)) < 0 ||
	    grow((void **)&w->norm, &w->cap_norm, 4 * UNICODE_NFD_MAX * w->t.n + 1, 1) < 0)
		return -1;
	m = unicode_nfc(w->t.cp, w->t.n, w->ncp);
	for (i = 0; i < m; i++)
		o += unicode_encode(w->ncp[i], w->norm + o);
	*s = w->norm;
	*n = o;
	return 0;
}

/* A fragment of plain text (no added tokens in it). */
static int
encode_fragment(struct work *w, const char *s, size_t n, int space_prefix)
{
	const struct tokenizer *tok = w->tok;
	size_t i, o = 0;
	int which;

	if (tok->nfc && normalize(w, &s, &n) < 0)
		return -1;
	if (tok->gemma4 || tok->metaspace) {
		if (grow((void **)&w->esc, &w->cap_esc, 3 * n + 4, 1) < 0)
			return -1;
		if (tok->metaspace && space_prefix) {
			memcpy(w->esc, "\xE2\x96\x81", 3);
			o = 3;
		}
		for (i = 0; i < n; i++) {
			if (s[i] == ' ') {
				memcpy(w->esc + o, "\xE2\x96\x81", 3);
				o += 3;
			} else
				w->esc[o++] = s[i];
		}
		s = w->esc;
		n = o;
	}
	if (tok->model == TOKENIZER_SPM) {
		if (text_load(w, s, n) < 0 ||
		    grow((void **)&w->word, &w->cap_word, 3 * w->t.off[w->t.n] + 4, 1) < 0)
			return -1;
		if (space_prefix) {
			memcpy(w->word, "\xE2\x96\x81", 3);
			o = 3;
		}
		for (i = 0; i < w->t.off[w->t.n]; i++) {
			if (w->t.buf[i] == ' ') {
				memcpy(w->word + o, "\xE2\x96\x81", 3);
				o += 3;
			} else
				w->word[o++] = w->t.buf[i];
		}
		return o > 0 ? spm_text(w, w->word, o) : 0;
	}
	if (text_load(w, s, n) < 0 || pretokenize(w, &which) < 0)
		return -1;
	for (i = 0; i < w->n_sp[which]; i++) {
		size_t a = w->t.off[w->sp[which][i].a], b = w->t.off[w->sp[which][i].b];
		if (bpe_word(w, w->t.buf + a, b - a) < 0)
			return -1;
	}
	return 0;
}

/* The longest added token at s[0..n), or -1. */
static int32_t
match_special(const struct tokenizer *tok, const char *s, size_t n, unsigned flags)
{
	size_t f = (unsigned char)s[0], k;

	for (k = tok->special_at[f]; k < tok->special_at[f + 1]; k++) {
		int32_t id = tok->special[k];
		if (tok->text_len[id] <= n && memcmp(tok->text[id], s, tok->text_len[id]) == 0 &&
		    ((flags & TOKENIZER_PARSE_SPECIAL) || tok->type[id] == TOKENIZER_USER_DEFINED))
			return id;
	}
	return -1;
}

static int
is_ws_byte(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/*
 * Whether the fragment s[a..b) of the text gets a U+2581 in front: SPM and
 * TOKENIZER_PREFIX_ALWAYS every fragment (llama.cpp; HF Prepend), _UNLESS_SPACE
 * one that does not start with a space or U+2581 already (HF Metaspace
 * "always"), _FIRST only the fragment at the start of the text (HF "first").
 */
static int
fragment_prefix(const struct tokenizer *tok, const char *s, size_t a, size_t b)
{
	int sp = s[a] == ' ' || (b - a >= 3 && memcmp(s + a, "\xE2\x96\x81", 3) == 0);

	if (tok->model == TOKENIZER_SPM)
		return tok->add_space_prefix != 0;
	switch (tok->add_space_prefix) {
	case TOKENIZER_PREFIX_ALWAYS:
		return 1;
	case TOKENIZER_PREFIX_UNLESS_SPACE:
		return !sp;
	case TOKENIZER_PREFIX_FIRST:
		return a == 0 && !sp;
	}
	return 0;
}

static int
encode_all(struct work *w, const char *s, size_t n, unsigned flags)
{
	const struct tokenizer *tok = w->tok;
	size_t pos = 0, start = 0, end;
	int32_t id;

	if ((flags & TOKENIZER_ADD_SPECIAL) && tok->add_bos && tok->bos >= 0)
		emit(w, tok->bos);
	while (pos < n) {
		if (tok->n_special == 0 || (id = match_special(tok, s + pos, n - pos, flags)) < 0) {
			pos++;
			continue;
		}
		end = pos;
		if (tok->attr[id] & TOKENIZER_LSTRIP)
			while (end > start && is_ws_byte(s[end - 1]))
				end--;
		/* llama.cpp: the SPM space prefix goes before every fragment
		 * (each follows the start of the text or an added token) */
		if (end > start && encode_fragment(w, s + start, end - start,
		    fragment_prefix(tok, s, start, end)) < 0)
			return -1;
		emit(w, id);
		pos += tok->text_len[id];
		if (tok->attr[id] & TOKENIZER_RSTRIP)
			while (pos < n && is_ws_byte(s[pos]))
				pos++;
		start = pos;
	}
	if (n > start && encode_fragment(w, s + start, n - start,
	    fragment_prefix(tok, s, start, n)) < 0)
		return -1;
	if ((flags & TOKENIZER_ADD_SPECIAL) && tok->add_eos && tok->eos >= 0)
		emit(w, tok->eos);
	return w->oom ? -1 : 0;
}

int32_t *
tokenizer_encode(const struct tokenizer *tok, const char *s, size_t n, unsigned flags,
    size_t *n_out, char *err)
{
	struct work w;
	int rc;

	if (tok == NULL) {
		util_err(err, "no tokenizer");
		return NULL;
	}
	memset(&w, 0, sizeof(w));
	w.tok = tok;
	rc = encode_all(&w, s, n, flags);
	if (rc == 0 && w.out == NULL && (w.out = malloc(sizeof(int32_t))) == NULL)
		rc = -1;
	free(w.t.cp);
	free(w.t.fl);
	free(w.t.off);
	free(w.t.buf);
	free(w.sp[0]);
	free(w.sp[1]);
	free(w.sym);
	free(w.heap);
	free(w.word);
	free(w.ncp);
	free(w.norm);
	free(w.esc);
	if (rc < 0) {
		free(w.out);
		util_err(err, "tokenizer: out of memory");
		return NULL;
	}
	*n_out = w.n_out;
	return w.out;
}

/* --- decoding ---------------------------------------------------------- */

struct tokenizer_stream {
	const struct tokenizer *tok;
	unsigned flags;
	int	started;	/* a byte went out: no more leading-space strip */
	char	pend[4];	/* bytes of an unfinished character */
	size_t	n_pend;
	char	*buf;
	size_t	cap;
	char	*run;		/* metaspace: bytes of a run of <0xXX> tokens */
	size_t	n_run, cap_run;
	char	*tmp;		/* metaspace: the run's text, then a piece */
	size_t	cap_tmp;
};

struct tokenizer_stream *
tokenizer_stream_new(const struct tokenizer *tok, unsigned flags)
{
	struct tokenizer_stream *st = calloc(1, sizeof(*st));

	if (st != NULL) {
		st->tok = tok;
		st->flags = flags;
	}
	return st;
}

void
tokenizer_stream_free(struct tokenizer_stream *st)
{
	if (st == NULL)
		return;
	free(st->buf);
	free(st->run);
	free(st->tmp);
	free(st);
}

/* Append the lossy UTF-8 of in[0..n) to st->buf at *o; an unfinished
 * character at the end goes to st->pend unless flushing. */
static void
stream_bytes(struct tokenizer_stream *st, const char *in, size_t n, size_t *o, int flush)
{
	size_t i = 0, k;
	uint32_t cp;

	while (i < n) {
		if (!flush && unicode_incomplete(in + i, n - i)) {
			memcpy(st->pend, in + i, n - i);
			st->n_pend = n - i;
			return;
		}
		k = unicode_decode(in + i, n - i, &cp);
		if (cp == UNICODE_REPLACEMENT)
			*o += unicode_encode(cp, st->buf + *o);
		else {
			memcpy(st->buf + *o, in + i, k);
			*o += k;
		}
		i += k;
	}
}

/* Pieces of ids (SPM with a space prefix drops the text's first space). */
static const char *
stream_feed(struct tokenizer_stream *st, const char *p, size_t n, int flush, size_t *len)
{
	size_t o = 0, m = st->n_pend + n;
	char *in;

	/* an input byte makes at most 3 output bytes (U+FFFD) */
	if (grow((void **)&st->buf, &st->cap, 4 * m + 8, 1) < 0)
		return NULL;
	if (!st->started && n > 0 && st->tok->strip_space && p[0] == ' ') {
		p++;
		n--;
		m--;
		st->started = 1;	/* one space only, if the next piece starts with one too */
	}
	if (n > 0)
		st->started = 1;
	/* the pending bytes and the new piece, lined up after the output room */
	in = st->buf + st->cap - m;
	memmove(in, st->pend, st->n_pend);
	memcpy(in + st->n_pend, p, n);
	st->n_pend = 0;
	stream_bytes(st, in, m, &o, flush);
	st->buf[o] = '\0';
	*len = o;
	return st->buf;
}

/*
 * HF's ByteFallback decoder: a run of byte tokens is its bytes when they are
 * well-formed UTF-8 as a whole, else one U+FFFD per byte token.  The run's
 * text and then p[0..n) go to the stream together.
 */
static const char *
stream_run_then(struct tokenizer_stream *st, const char *p, size_t n, int flush, size_t *len)
{
	size_t i = 0, k, o = 0;
	uint32_t cp;
	int ok = 1;

	while (i < st->n_run && ok) {
		k = unicode_decode(st->run + i, st->n_run - i, &cp);
		ok = cp != UNICODE_REPLACEMENT || (k == 3 && memcmp(st->run + i, "\xEF\xBF\xBD", 3) == 0);
		i += k;
	}
	if (grow((void **)&st->tmp, &st->cap_tmp, 3 * st->n_run + n + 1, 1) < 0)
		return NULL;
	if (ok && st->n_run > 0) {
		memcpy(st->tmp, st->run, st->n_run);
		o = st->n_run;
	} else if (!ok)
		for (i = 0; i < st->n_run; i++)
			o += unicode_encode(UNICODE_REPLACEMENT, st->tmp + o);
	memcpy(st->tmp + o, p, n);
	st->n_run = 0;
	return stream_feed(st, st->tmp, o + n, flush, len);
}

const char *
tokenizer_stream_push(struct tokenizer_stream *st, int32_t id, size_t *len)
{
	const struct tokenizer *tok = st->tok;

	if (id < 0 || (size_t)id >= tok->n_vocab)
		return NULL;
	if ((st->flags & TOKENIZER_SKIP_SPECIAL) && tok->type[id] == TOKENIZER_CONTROL)
		return stream_feed(st, "", 0, 0, len);
	if (!tok->metaspace)
		return stream_feed(st, tok->piece[id], tok->piece_len[id], 0, len);
	if (tok->type[id] == TOKENIZER_BYTE) {
		if (grow((void **)&st->run, &st->cap_run, st->n_run + 1, 1) < 0)
			return NULL;
		st->run[st->n_run++] = tok->piece[id][0];
		return stream_feed(st, "", 0, 0, len);
	}
	return stream_run_then(st, tok->piece[id], tok->piece_len[id], 0, len);
}

const char *
tokenizer_stream_flush(struct tokenizer_stream *st, size_t *len)
{
	const char *r = st->tok->metaspace ? stream_run_then(st, "", 0, 1, len) :
	    stream_feed(st, "", 0, 1, len);

	st->started = 0;
	return r;
}

char *
tokenizer_decode(const struct tokenizer *tok, const int32_t *ids, size_t n, unsigned flags,
    size_t *len, char *err)
{
	struct tokenizer_stream *st = tokenizer_stream_new(tok, flags);
	char *out = NULL;
	size_t cap = 0, o = 0, k, i;
	const char *p;

	if (st == NULL)
		goto oom;
	for (i = 0; i <= n; i++) {
		if (i < n && (ids[i] < 0 || (size_t)ids[i] >= tok->n_vocab)) {
			util_err(err, "token id %ld is out of range (vocabulary of %zu)",
			    (long)ids[i], tok->n_vocab);
			free(out);
			tokenizer_stream_free(st);
			return NULL;
		}
		p = i < n ? tokenizer_stream_push(st, ids[i], &k) : tokenizer_stream_flush(st, &k);
		if (p == NULL || grow((void **)&out, &cap, o + k + 1, 1) < 0)
			goto oom;
		memcpy(out + o, p, k);
		o += k;
	}
	tokenizer_stream_free(st);
	if (out == NULL && (out = malloc(1)) == NULL)
		goto oom;
	out[o] = '\0';
	*len = o;
	return out;
oom:
	free(out);
	tokenizer_stream_free(st);
	util_err(err, "tokenizer: out of memory");
	return NULL;
}
