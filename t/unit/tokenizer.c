/* lib/tokenizer and lib/unicode on tiny built-in vocabularies. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tokenizer.h"
#include "unicode.h"
#include "util.h"

/* Byte-level BPE: the 256 byte symbols (GPT-2 mapping), then "aa", "ab",
 * "aab", "Ġa", and the control token "<|x|>" (id 260..264). */
static struct tokenizer *
tiny_bpe(const char *pre)
{
	static char sym[256][4];
	const char *tokens[265];
	int32_t types[265];
	const char *merges[] = { "a a", "a b", "aa b", "Ġ a" };
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
	tokens[256] = "aa";
	tokens[257] = "ab";
	tokens[258] = "aab";
	tokens[259] = "Ġa";
	tokens[260] = "<|x|>";
	for (b = 256; b < 265; b++)
		types[b] = TOKENIZER_NORMAL;
	types[260] = TOKENIZER_CONTROL;
	for (b = 261; b < 265; b++) {
		tokens[b] = b == 261 ? "<u>" : b == 262 ? "unused1" : b == 263 ? "unused2" : "unused3";
		types[b] = b == 261 ? TOKENIZER_USER_DEFINED : TOKENIZER_UNUSED;
	}
	sp.model = TOKENIZER_BPE;
	sp.pre = pre;
	sp.byte_level = 1;
	sp.n_vocab = 265;
	sp.tokens = tokens;
	sp.types = types;
	sp.n_merges = 4;
	sp.merges = merges;
	sp.bos = sp.eos = sp.unk = sp.pad = -1;
	return tokenizer_new(&sp, err);
}

static int
encode_is(const struct tokenizer *tok, const char *s, unsigned flags, const int32_t *want, size_t n)
{
	char err[UTIL_ERRLEN];
	size_t got_n;
	int32_t *got = tokenizer_encode(tok, s, strlen(s), flags, &got_n, err);
	int ok = got != NULL && got_n == n && memcmp(got, want, n * sizeof(int32_t)) == 0;

	if (!ok && got != NULL) {
		size_t i;
		printf("#   encode(\"%s\") =", s);
		for (i = 0; i < got_n; i++)
			printf(" %d", got[i]);
		printf("\n");
	}
	free(got);
	return ok;
}

TEST(bpe_merges_lowest_rank_leftmost)
{
	struct tokenizer *tok = tiny_bpe("gpt2");
	static const int32_t aaa[] = { 256, 'a' }, aab[] = { 258 }, sp_aa[] = { ' ', 256 };

	CHECK(tok != NULL);
	CHECK(encode_is(tok, "aaa", 0, aaa, 2));	/* "a a" first, leftmost */
	CHECK(encode_is(tok, "aab", 0, aab, 1));	/* aa + b, not a + ab */
	CHECK(encode_is(tok, " aa", 0, sp_aa, 2));	/* "a a" (rank 0) beats "Ġ a" (rank 3) */
	tokenizer_free(tok);
}

TEST(control_tokens_need_parse_special_user_defined_do_not)
{
	struct tokenizer *tok = tiny_bpe("gpt2");
	static const int32_t parsed[] = { 'a', 260, 'b' }, user[] = { 261 };
	char err[UTIL_ERRLEN];
	size_t n;
	int32_t *ids;

	CHECK(encode_is(tok, "a<|x|>b", TOKENIZER_PARSE_SPECIAL, parsed, 3));
	ids = tokenizer_encode(tok, "a<|x|>b", 7, 0, &n, err);
	CHECK(ids != NULL && n > 3);
	free(ids);
	CHECK(encode_is(tok, "<u>", 0, user, 1));
	tokenizer_free(tok);
}

TEST(stream_holds_back_partial_characters)
{
	struct tokenizer *tok = tiny_bpe("gpt2");
	struct tokenizer_stream *st = tokenizer_stream_new(tok, 0);
	const unsigned char e[] = { 0xF0, 0x9F, 0x98, 0x80 };	/* U+1F600 */
	const char *p;
	size_t len, i;

	for (i = 0; i < 3; i++) {
		p = tokenizer_stream_push(st, e[i], &len);
		CHECK(p != NULL && len == 0);
	}
	p = tokenizer_stream_push(st, e[3], &len);
	CHECK(p != NULL && len == 4 && memcmp(p, e, 4) == 0);
	/* a lead byte then a letter: the lead alone becomes U+FFFD, then 'a' */
	tokenizer_stream_push(st, 0xE2, &len);
	CHECK(len == 0);
	p = tokenizer_stream_push(st, 'a', &len);
	CHECK(len == 4 && memcmp(p, "\xEF\xBF\xBD" "a", 4) == 0);
	tokenizer_stream_push(st, 0xC3, &len);
	p = tokenizer_stream_flush(st, &len);
	CHECK(len == 3 && memcmp(p, "\xEF\xBF\xBD", 3) == 0);
	CHECK(tokenizer_stream_push(st, 265, &len) == NULL);
	tokenizer_stream_free(st);
	tokenizer_free(tok);
}

TEST(decode_rejects_out_of_range_ids)
{
	struct tokenizer *tok = tiny_bpe("gpt2");
	int32_t ids[] = { 'a', 9999 };
	char err[UTIL_ERRLEN];
	size_t len;

	CHECK(tokenizer_decode(tok, ids, 2, 0, &len, err) == NULL);
	CHECK_EQ_STR(err, "token id 9999 is out of range (vocabulary of 265)");
	tokenizer_free(tok);
}

TEST(unknown_pre_tokenizer_is_an_error)
{
	struct tokenizer_spec sp = { 0 };
	const char *tokens[] = { "a" };
	char err[UTIL_ERRLEN];

	sp.model = TOKENIZER_BPE;
	sp.pre = "nonesuch";
	sp.n_vocab = 1;
	sp.tokens = tokens;
	CHECK(tokenizer_new(&sp, err) == NULL);
	CHECK_EQ_STR(err, "pre-tokenizer 'nonesuch' is not supported");
}

/* SPM: ▁ a b ab ▁a and <0xC3> <0xA9>; scores favour "ab" over "▁a". */
TEST(spm_highest_score_and_byte_fallback)
{
	const char *tokens[] = { "<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "ab",
		"\xE2\x96\x81" "a", "xx", "<0xC3>", "<0xA9>" };
	int32_t types[] = { 2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6 };
	float scores[] = { 0, 0, 0, -1, -2, -2, -3, -4, -5, 0, 0 };
	struct tokenizer_spec sp = { 0 };
	struct tokenizer *tok;
	char err[UTIL_ERRLEN];
	static const int32_t ab[] = { 1, 3, 6 }, e[] = { 1, 7, 9, 10 };
	size_t len;
	char *s;

	sp.model = TOKENIZER_SPM;
	sp.n_vocab = 11;
	sp.tokens = tokens;
	sp.types = types;
	sp.scores = scores;
	sp.bos = 1;
	sp.eos = 2;
	sp.unk = 0;
	sp.pad = -1;
	sp.add_bos = 1;
	sp.add_space_prefix = 1;
	tok = tokenizer_new(&sp, err);
	CHECK(tok != NULL);
	CHECK(encode_is(tok, "ab", TOKENIZER_ADD_SPECIAL, ab, 3));	/* ab (-3) before ▁a (-4) */
	CHECK(encode_is(tok, "a\xC3\xA9", TOKENIZER_ADD_SPECIAL, e, 4));	/* é: byte fallback */
	s = tokenizer_decode(tok, e + 1, 3, 0, &len, err);
	CHECK(s != NULL && strcmp(s, "a\xC3\xA9") == 0);	/* the prefix space is dropped */
	free(s);
	tokenizer_free(tok);
}

/* Merges of pieces of any length apply: "a" doubled to 1,024 bytes. */
TEST(bpe_merges_long_pieces)
{
	static char text[12][1025], merge[11][2050], more[1024 + 512 + 2];
	const char *tokens[12], *merges[11];
	struct tokenizer_spec sp = { 0 };
	struct tokenizer *tok;
	char err[UTIL_ERRLEN];
	static const int32_t whole[] = { 10 }, rest[] = { 10, 9, 0 };
	size_t k;

	for (k = 0; k < 11; k++) {
		memset(text[k], 'a', (size_t)1 << k);
		tokens[k] = text[k];
		if (k > 0) {
			snprintf(merge[k - 1], sizeof(merge[k - 1]), "%s %s", text[k - 1], text[k - 1]);
			merges[k - 1] = merge[k - 1];
		}
	}
	tokens[11] = "<0x61>";
	sp.model = TOKENIZER_BPE;
	sp.pre = "none";
	sp.n_vocab = 12;
	sp.tokens = tokens;
	sp.n_merges = 10;
	sp.merges = merges;
	sp.bos = sp.eos = sp.unk = sp.pad = -1;
	tok = tokenizer_new(&sp, err);
	CHECK(tok != NULL);
	CHECK(encode_is(tok, text[10], 0, whole, 1));
	memset(more, 'a', 1024 + 512 + 1);
	CHECK(encode_is(tok, more, 0, rest, 3));
	tokenizer_free(tok);
}

TEST(utf8_maximal_subparts)
{
	uint32_t cp;

	CHECK_EQ_INT(unicode_decode("\xE2\x82\xAC", 3, &cp), 3);
	CHECK_EQ_INT(cp, 0x20AC);
	CHECK_EQ_INT(unicode_decode("\xF0\x9F\x98", 3, &cp), 3);	/* truncated: one U+FFFD */
	CHECK_EQ_INT(cp, UNICODE_REPLACEMENT);
	CHECK_EQ_INT(unicode_decode("\xE0\x80", 2, &cp), 1);	/* E0 needs A0..BF next */
	CHECK_EQ_INT(unicode_decode("\xED\xA0\x80", 3, &cp), 1);	/* surrogate */
	CHECK_EQ_INT(unicode_decode("\xC0\xAF", 2, &cp), 1);	/* overlong lead */
	CHECK_EQ_INT(unicode_decode("\xF4\x90", 2, &cp), 1);	/* beyond U+10FFFF */
	CHECK(unicode_incomplete("\xF0\x9F", 2));
	CHECK(!unicode_incomplete("\xF0\x20", 2));
	CHECK(!unicode_incomplete("a", 1));
	CHECK_EQ_INT(unicode_flags('a'), UNICODE_L);
	CHECK_EQ_INT(unicode_flags(0x0301), UNICODE_M);
	CHECK_EQ_INT(unicode_flags(0x3000), UNICODE_SPACE);
	CHECK_EQ_INT(unicode_flags(0x110000), 0);
}

int
main(void)
{
	RUN(bpe_merges_lowest_rank_leftmost);
	RUN(control_tokens_need_parse_special_user_defined_do_not);
	RUN(stream_holds_back_partial_characters);
	RUN(decode_rejects_out_of_range_ids);
	RUN(unknown_pre_tokenizer_is_an_error);
	RUN(spm_highest_score_and_byte_fallback);
	RUN(bpe_merges_long_pieces);
	RUN(utf8_maximal_subparts);
	return test_summary();
}
