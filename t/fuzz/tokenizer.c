/*
 * libFuzzer target: lib/tokenizer on untrusted bytes.  The first byte picks:
 *   0..127   the rest is text: encode (special tokens parsed or not) with a
 *            small byte-level BPE (NFC normalizer on), an SPM, a Gemma-4 and
 *            two HF SentencePiece-style BPE vocabularies (Prepend + Replace;
 *            Metaspace split, prepend "first"), decode the ids back whole and
 *            streamed, and check
 *            the two decodes agree; NFC of the text is checked idempotent;
 *            (64..127: the rest is also read as token ids, decoded by each
 *            vocabulary whole and streamed, special tokens kept or skipped);
 *   128..255 the rest is a tokenizer.json: load it (via a temporary file),
 *            then encode and decode a fixed text with whatever loaded.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer.h"
#include "unicode.h"
#include "util.h"

static struct tokenizer *
small_bpe(void)
{
	static char sym[256][4];
	const char *tokens[262], *merges[] = { "a a", "a b", "aa b", "Ġ a", "Ġ Ġ" };
	int32_t types[262];
	struct tokenizer_spec sp = { 0 };
	char err[UTIL_ERRLEN];
	unsigned b, n = 0;

	for (b = 0; b < 256; b++) {
		unsigned cp = b;
		if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174))
			cp = 256 + n++;
		sym[b][unicode_encode(cp, sym[b])] = '\0';
		tokens[b] = sym[b];
		types[b] = TOKENIZER_NORMAL;
	}
	tokens[256] = "aa", tokens[257] = "ab", tokens[258] = "aab", tokens[259] = "Ġa";
	tokens[260] = "<|x|>", tokens[261] = "ĠĠ";
	types[256] = types[257] = types[258] = types[259] = types[261] = TOKENIZER_NORMAL;
	types[260] = TOKENIZER_CONTROL;
	sp.model = TOKENIZER_BPE;
	sp.pre = "qwen35";
	sp.byte_level = 1;
	sp.n_vocab = 262;
	sp.tokens = tokens;
	sp.types = types;
	sp.n_merges = 5;
	sp.merges = merges;
	sp.bos = sp.eos = sp.unk = sp.pad = -1;
	sp.nfc = 1;
	return tokenizer_new(&sp, err);
}

/* Gemma-4 (pre "gemma4"), or HF SentencePiece-style BPE (metaspace, pre
 * "none" or "metaspace", a prefix mode): raw UTF-8 BPE, U+2581 for spaces,
 * <0xXX> for the rest. */
static struct tokenizer *
small_gemma4(const char *pre, int metaspace, int prefix)
{
	static char bytes[256][8];
	const char *tokens[256 + 8], *merges[] = { "a b", "\xE2\x96\x81 a", "\xE2\x96\x81 \xE2\x96\x81" };
	int32_t types[256 + 8];
	struct tokenizer_spec sp = { 0 };
	char err[UTIL_ERRLEN];
	size_t i;

	for (i = 0; i < 256; i++) {
		snprintf(bytes[i], sizeof(bytes[i]), "<0x%02X>", (unsigned)i);
		tokens[i] = bytes[i];
		types[i] = TOKENIZER_BYTE;
	}
	tokens[256] = "<bos>", tokens[257] = "a", tokens[258] = "b", tokens[259] = "ab";
	tokens[260] = "\xE2\x96\x81", tokens[261] = "\xE2\x96\x81" "a", tokens[262] = "\n\n";
	tokens[263] = "\xE2\x96\x81\xE2\x96\x81";
	for (i = 256; i < 264; i++)
		types[i] = i == 256 ? TOKENIZER_CONTROL : TOKENIZER_NORMAL;
	sp.model = TOKENIZER_BPE;
	sp.pre = pre;
	sp.metaspace = metaspace;
	sp.add_space_prefix = prefix;
	sp.strip_space = metaspace;
	sp.n_vocab = 264;
	sp.tokens = tokens;
	sp.types = types;
	sp.n_merges = 3;
	sp.merges = merges;
	sp.bos = 256, sp.eos = sp.unk = sp.pad = -1;
	sp.add_bos = 1;
	return tokenizer_new(&sp, err);
}

/* NFC is idempotent: normalizing its output changes nothing. */
static void
nfc_twice(const char *s, size_t n)
{
	uint32_t *cp = malloc((n + 1) * sizeof(uint32_t));
	uint32_t *a = malloc((n + 1) * UNICODE_NFD_MAX * sizeof(uint32_t));
	uint32_t *b = malloc((n + 1) * UNICODE_NFD_MAX * UNICODE_NFD_MAX * sizeof(uint32_t));
	size_t i, k, m = 0, na, nb;

	if (cp && a && b) {
		for (i = 0; i < n; i += k)
			k = unicode_decode(s + i, n - i, &cp[m++]);
		na = unicode_nfc(cp, m, a);
		nb = unicode_nfc(a, na, b);
		if (na > m * UNICODE_NFD_MAX || na != nb || memcmp(a, b, na * sizeof(uint32_t)) != 0)
			abort();
	}
	free(cp);
	free(a);
	free(b);
}

static struct tokenizer *
small_spm(void)
{
	const char *tokens[] = { "<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "ab",
		"\xE2\x96\x81" "a", "<0xC3>", "<0xA9>", "<0xFF>" };
	int32_t types[] = { 2, 3, 3, 1, 1, 1, 1, 1, 6, 6, 6 };
	float scores[] = { 0, 0, 0, -1, -2, -2, -3, -4, 0, 0, 0 };
	struct tokenizer_spec sp = { 0 };
	char err[UTIL_ERRLEN];

	sp.model = TOKENIZER_SPM;
	sp.n_vocab = 11;
	sp.tokens = tokens;
	sp.types = types;
	sp.scores = scores;
	sp.bos = 1, sp.eos = 2, sp.unk = 0, sp.pad = -1;
	sp.add_bos = 1, sp.add_space_prefix = 1;
	return tokenizer_new(&sp, err);
}

/* Decode ids[0..k) whole and streamed (flags), and check the two agree. */
static void
decode_both(const struct tokenizer *tok, const int32_t *ids, size_t k, unsigned flags)
{
	char err[UTIL_ERRLEN];
	size_t len = 0, i, o = 0, piece;
	struct tokenizer_stream *st;
	char *text, *cat;
	const char *p;

	text = tokenizer_decode(tok, ids, k, flags, &len, err);
	st = tokenizer_stream_new(tok, flags);
	cat = malloc(len + 1);
	for (i = 0; text && st && cat && i <= k; i++) {
		p = i < k ? tokenizer_stream_push(st, ids[i], &piece) : tokenizer_stream_flush(st, &piece);
		if (p == NULL || o + piece > len)
			abort();	/* the stream must add up to the whole decode */
		memcpy(cat + o, p, piece);
		o += piece;
	}
	if (text && cat && (o != len || memcmp(cat, text, len) != 0))
		abort();
	free(cat);
	tokenizer_stream_free(st);
	free(text);
}

static void
roundtrip(const struct tokenizer *tok, const char *s, size_t n, unsigned flags)
{
	char err[UTIL_ERRLEN];
	size_t k;
	int32_t *ids = tokenizer_encode(tok, s, n, flags, &k, err);

	if (ids == NULL)
		return;
	decode_both(tok, ids, k, 0);
	free(ids);
}

/* Arbitrary ids (two bytes each, modulo the vocabulary): byte-token runs
 * that are no UTF-8, control tokens kept or skipped. */
static void
random_ids(const struct tokenizer *tok, const uint8_t *d, size_t n, unsigned flags)
{
	int32_t ids[512];
	size_t k, v = tokenizer_n_vocab(tok);

	for (k = 0; k < n / 2 && k < 512; k++)
		ids[k] = (int32_t)((d[2 * k] | (unsigned)d[2 * k + 1] << 8) % v);
	decode_both(tok, ids, k, flags);
}

static void
load_json(const uint8_t *data, size_t size)
{
	char path[] = "/tmp/fuzz-tokenizer-XXXXXX", err[UTIL_ERRLEN];
	int fd = mkstemp(path);
	struct tokenizer *tok;
	const char *text = "Hello, world! it's 123 \xF0\x9F\x98\x80 <|endoftext|>";

	if (fd < 0)
		return;
	if (write(fd, data, size) == (ssize_t)size) {
		close(fd);
		if ((tok = tokenizer_from_json(path, err)) != NULL) {
			roundtrip(tok, text, strlen(text), TOKENIZER_PARSE_SPECIAL | TOKENIZER_ADD_SPECIAL);
			tokenizer_free(tok);
		}
	} else
		close(fd);
	unlink(path);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tokenizer *bpe, *spm, *g4, *ms[2];

	if (size == 0)
		return 0;
	if (data[0] >= 128) {
		load_json(data + 1, size - 1);
		return 0;
	}
	if (bpe == NULL && ((bpe = small_bpe()) == NULL || (spm = small_spm()) == NULL ||
	    (g4 = small_gemma4("gemma4", 0, 0)) == NULL ||
	    (ms[0] = small_gemma4("none", 1, TOKENIZER_PREFIX_ALWAYS)) == NULL ||
	    (ms[1] = small_gemma4("metaspace", 1, TOKENIZER_PREFIX_FIRST)) == NULL))
		abort();
	roundtrip(bpe, (const char *)data + 1, size - 1, data[0] & 1 ? TOKENIZER_PARSE_SPECIAL : 0);
	roundtrip(spm, (const char *)data + 1, size - 1, TOKENIZER_ADD_SPECIAL);
	roundtrip(g4, (const char *)data + 1, size - 1, TOKENIZER_ADD_SPECIAL | TOKENIZER_PARSE_SPECIAL);
	roundtrip(ms[data[0] & 1], (const char *)data + 1, size - 1, TOKENIZER_PARSE_SPECIAL);
	if (data[0] >= 64) {
		unsigned skip = data[0] & 2 ? TOKENIZER_SKIP_SPECIAL : 0;
		random_ids(bpe, data + 1, size - 1, skip);
		random_ids(spm, data + 1, size - 1, skip);
		random_ids(g4, data + 1, size - 1, skip);
		random_ids(ms[0], data + 1, size - 1, skip);
		random_ids(ms[1], data + 1, size - 1, skip);
	}
	nfc_twice((const char *)data + 1, size - 1);
	return 0;
}
