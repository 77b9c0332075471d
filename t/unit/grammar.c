/* lib/grammar: the JSON automaton, schema features and refusals, token masks. */
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json.h"
#include "test.h"
#include "tokenizer.h"
#include "unicode.h"
#include "util.h"

/* Byte-level BPE: the 256 byte symbols (GPT-2 mapping), then these. */
static const char *const extra[] = {
	"{", "}", "{\"", "\":", "\",\"", "\"}", "true", "null", "Ġ{", "ĠĠ",
	"aÃ",		/* 'a' 0xC3: ends inside a character */
	"©b",		/* 0xA9 'b': starts inside one */
	"Ã©",		/* U+00E9 whole */
	"ab", "12", "\"a", "<|end|>",
};
#define N_EXTRA	(int)(sizeof extra / sizeof extra[0])
#define N_VOCAB	(256 + N_EXTRA)
#define T_END	(N_VOCAB - 1)

static int
tok_id(const char *text)
{
	for (int i = 0; i < N_EXTRA; i++)
		if (strcmp(extra[i], text) == 0)
			return 256 + i;
	return -1;
}

static struct tokenizer *
tiny(void)
{
	static char sym[256][4];
	const char *tokens[N_VOCAB];
	int32_t types[N_VOCAB];
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
	for (int i = 0; i < N_EXTRA; i++) {
		tokens[256 + i] = extra[i];
		types[256 + i] = TOKENIZER_NORMAL;
	}
	types[T_END] = TOKENIZER_CONTROL;
	sp.model = TOKENIZER_BPE;
	sp.byte_level = 1;
	sp.n_vocab = N_VOCAB;
	sp.tokens = tokens;
	sp.types = types;
	sp.bos = sp.unk = sp.pad = -1;
	sp.eos = T_END;
	return tokenizer_new(&sp, err);
}

static struct tokenizer *tk;
static struct grammar_vocab *voc;

/* The grammar of schema text (NULL: any object); NULL with err. */
static struct grammar *
G(const char *schema, int ws_max, char *err)
{
	struct grammar_options o;
	struct json *j = NULL;
	struct grammar *g;

	grammar_defaults(&o);
	if (ws_max >= 0)
		o.ws_max = ws_max;
	if (schema != NULL && (j = json_parse(schema, strlen(schema), err)) == NULL)
		return NULL;
	g = grammar_compile(j, voc, &o, err);
	json_free(j);
	return g;
}

/* 1: doc is a whole document; 0: a prefix only; -1: rejected. */
static int
verdict(struct grammar *g, const char *doc, size_t n)
{
	struct grammar_state *s = grammar_state_new(g);
	int r = grammar_feed(s, doc, n) != 0 ? -1 : grammar_done(s);

	grammar_state_free(s);
	return r;
}

#define ACCEPTS(g, doc) do { int _v = verdict(g, doc, strlen(doc)); \
	if (_v != 1) FAILF("'%s': %d, want a whole document", doc, _v); } while (0)
#define PREFIX(g, doc) do { int _v = verdict(g, doc, strlen(doc)); \
	if (_v != 0) FAILF("'%s': %d, want a prefix", doc, _v); } while (0)
#define REJECTS(g, doc) do { int _v = verdict(g, doc, strlen(doc)); \
	if (_v != -1) FAILF("'%s': %d, want rejected", doc, _v); } while (0)

TEST(any_object)
{
	char err[UTIL_ERRLEN];
	struct grammar *g = G(NULL, -1, err);

	CHECK(g != NULL);
	ACCEPTS(g, "{}");
	ACCEPTS(g, " {\"a\": [1, -2.5e+3, \"x\", true, false, null, {\"b\": {}}, []]}\n");
	ACCEPTS(g, "{\"\":0,\"k\":{\"x\":[[[]]]}}");
	PREFIX(g, "{\"a\":");
	PREFIX(g, "{\"a\":1");		/* the number may go on */
	PREFIX(g, "");
	REJECTS(g, "[]");
	REJECTS(g, "\"x\"");
	REJECTS(g, "{\"a\" 1}");
	REJECTS(g, "{\"a\":01}");
	REJECTS(g, "{\"a\":1,}");
	REJECTS(g, "{}x");
	REJECTS(g, "{}{}");
	REJECTS(g, "{a:1}");
	REJECTS(g, "{\"a\":tru}");
	REJECTS(g, "{\"a\":[1 2]}");
	grammar_free(g);
}

TEST(whitespace_is_bounded)
{
	char err[UTIL_ERRLEN], doc[160];
	struct grammar *g = G(NULL, -1, err), *g0 = G(NULL, 0, err);

	snprintf(doc, sizeof doc, "{%20s}", "");
	ACCEPTS(g, doc);
	snprintf(doc, sizeof doc, "{%21s}", "");
	REJECTS(g, doc);
	snprintf(doc, sizeof doc, "{%20s\"a\"%20s:%20s1%20s}%20s", "", "", "", "", "");
	ACCEPTS(g, doc);
	ACCEPTS(g0, "{\"a\":[1,{}]}");
	REJECTS(g0, "{ }");
	REJECTS(g0, " {}");
	REJECTS(g0, "{}\n");
	grammar_free(g);
	grammar_free(g0);
}

TEST(strings_and_utf8)
{
	char err[UTIL_ERRLEN];
	struct grammar *g = G("{\"type\": \"string\"}", -1, err);

	CHECK(g != NULL);
	ACCEPTS(g, "\"a\\n\\t\\\"\\\\\\/\\b\\f\\r\\u00e9\\uFFFF\"");
	ACCEPTS(g, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"");
	PREFIX(g, "\"\xf0\x9f\x98");
	REJECTS(g, "\"\\ud800\"");	/* surrogate escapes: raw UTF-8 instead */
	REJECTS(g, "\"\\uDC00\"");
	REJECTS(g, "\"\\x\"");
	REJECTS(g, "\"a\nb\"");		/* raw control character */
	REJECTS(g, "\"\xc3\x28\"");	/* a lead byte without its continuation */
	REJECTS(g, "\"\xc0\x80\"");	/* overlong */
	REJECTS(g, "\"\xe0\x80\x80\"");
	REJECTS(g, "\"\xed\xa0\x80\"");	/* a surrogate in UTF-8 */
	REJECTS(g, "\"\xf4\x90\x80\x80\"");	/* past U+10FFFF */
	REJECTS(g, "\"\xa9\"");		/* a lone continuation */
	grammar_free(g);
}

TEST(numbers)
{
	char err[UTIL_ERRLEN];
	struct grammar *g = G("{\"type\": \"number\"}", -1, err);
	struct grammar *gi = G("{\"type\": \"integer\"}", -1, err);

	ACCEPTS(g, "-0");
	ACCEPTS(g, "1.5e-7");
	ACCEPTS(g, "123456789012345.123456789012345E+99");
	REJECTS(g, "1234567890123456");	/* 16 digits */
	REJECTS(g, "1.1234567890123456");
	REJECTS(g, "1e100");
	REJECTS(g, "01");
	REJECTS(g, "+1");
	REJECTS(g, ".5");
	PREFIX(g, "1.");
	PREFIX(g, "1e");
	PREFIX(g, "-");
	ACCEPTS(gi, "-42");
	REJECTS(gi, "1.0");
	REJECTS(gi, "1e3");
	grammar_free(g);
	grammar_free(gi);
}

#define PERSON "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, " \
	"\"age\": {\"type\": \"integer\"}, \"nick\": {\"type\": [\"string\", \"null\"]}, " \
	"\"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"b\", 7, null]}, " \
	"\"minItems\": 1, \"maxItems\": 2}}, \"required\": [\"name\", \"age\", \"tags\"], " \
	"\"additionalProperties\": false}"

TEST(object_properties_in_order)
{
	char err[UTIL_ERRLEN];
	struct grammar *g = G(PERSON, -1, err);

	CHECK(g != NULL);
	if (g == NULL) {
		printf("# %s\n", err);
		return;
	}
	ACCEPTS(g, "{\"name\": \"x\", \"age\": 3, \"tags\": [\"a\"]}");
	ACCEPTS(g, "{\"name\":\"x\",\"age\":-3,\"nick\":null,\"tags\":[7,null]}");
	ACCEPTS(g, "{\"name\":\"x\",\"age\":3,\"nick\":\"y\",\"tags\":[\"b\",\"a\"]}");
	REJECTS(g, "{\"age\":3,\"name\":\"x\",\"tags\":[\"a\"]}");	/* order */
	REJECTS(g, "{\"name\":\"x\",\"tags\":[\"a\"]}");		/* age missing */
	REJECTS(g, "{\"name\":\"x\",\"age\":3}");			/* tags missing */
	REJECTS(g, "{\"name\":\"x\",\"age\":3,\"zzz\":1,\"tags\":[\"a\"]}");
	REJECTS(g, "{\"name\":\"x\",\"age\":3.5,\"tags\":[\"a\"]}");
	REJECTS(g, "{\"name\":\"x\",\"age\":3,\"tags\":[]}");	/* minItems */
	REJECTS(g, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\",\"a\",\"a\"]}");
	REJECTS(g, "{\"name\":\"x\",\"age\":3,\"tags\":[\"c\"]}");
	REJECTS(g, "{\"name\":\"x\",\"age\":3,\"tags\":[8]}");
	REJECTS(g, "{\"name\":\"x\",\"name\":\"x\",\"age\":3,\"tags\":[\"a\"]}");
	grammar_free(g);
}

TEST(enum_const_anyof_maps)
{
	char err[UTIL_ERRLEN];
	struct grammar *g = G("{\"anyOf\": [{\"type\": \"object\", \"properties\": {\"kind\": "
	    "{\"const\": \"a\"}, \"x\": {\"type\": \"integer\"}}, \"required\": [\"kind\", \"x\"]}, "
	    "{\"type\": \"object\", \"properties\": {\"kind\": {\"const\": \"b\"}, \"y\": "
	    "{\"type\": \"boolean\"}}, \"required\": [\"kind\", \"y\"]}, {\"type\": \"null\"}, "
	    "{\"enum\": [1, 12, [1, {\"k\": \"v\"}]]}]}", -1, err);
	struct grammar *m = G("{\"type\": \"object\", \"additionalProperties\": "
	    "{\"type\": \"integer\"}}", -1, err);
	struct grammar *e = G("{\"type\": \"object\", \"additionalProperties\": false}", -1, err);

	CHECK(g != NULL && m != NULL && e != NULL);
	ACCEPTS(g, "{\"kind\":\"a\",\"x\":1}");
	ACCEPTS(g, "{\"kind\":\"b\",\"y\":true}");
	ACCEPTS(g, "null");
	ACCEPTS(g, "1");
	ACCEPTS(g, "12");
	ACCEPTS(g, "[1,{\"k\":\"v\"}]");
	REJECTS(g, "{\"kind\":\"a\",\"y\":true}");
	REJECTS(g, "{\"kind\":\"c\",\"x\":1}");
	REJECTS(g, "13");
	REJECTS(g, "[1, {\"k\":\"v\"}]");	/* enum texts as json_dump spells them */
	ACCEPTS(m, "{\"any key\": 1, \"\xc3\xa9\": -2}");
	REJECTS(m, "{\"a\": \"x\"}");
	ACCEPTS(e, "{}");
	REJECTS(e, "{\"a\":1}");
	grammar_free(g);
	grammar_free(m);
	grammar_free(e);
}

TEST(recursive_refs)
{
	char err[UTIL_ERRLEN];
	struct grammar *g = G("{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": "
	    "{\"v\": {\"type\": \"integer\"}, \"kids\": {\"type\": \"array\", \"items\": "
	    "{\"$ref\": \"#/$defs/node\"}}}, \"required\": [\"v\", \"kids\"], "
	    "\"additionalProperties\": false}}, \"$ref\": \"#/$defs/node\"}", -1, err);
	struct grammar *l = G("{\"definitions\": {\"l\": {\"anyOf\": [{\"type\": \"null\"}, "
	    "{\"type\": \"object\", \"properties\": {\"next\": {\"$ref\": \"#/definitions/l\"}}, "
	    "\"required\": [\"next\"]}]}}, \"allOf\": [{\"$ref\": \"#/definitions/l\"}]}",
	    -1, err);

	CHECK(g != NULL && l != NULL);
	ACCEPTS(g, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]},{\"v\":3,\"kids\":[{\"v\":4,\"kids\":[]}]}]}");
	REJECTS(g, "{\"v\":1,\"kids\":[{\"v\":2}]}");
	ACCEPTS(l, "{\"next\":{\"next\":null}}");
	REJECTS(l, "{\"next\":{}}");
	grammar_free(g);
	grammar_free(l);
}

/* Schema s is refused with message want. */
static void
refused(const char *s, const char *want)
{
	char err[UTIL_ERRLEN] = "";
	struct grammar *g = G(s, -1, err);

	if (g != NULL || strcmp(err, want) != 0)
		FAILF("%s: got '%s', want '%s'", s, g ? "(compiled)" : err, want);
	grammar_free(g);
}

TEST(unsupported_features_are_refused_by_name)
{
	refused("{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", "
	    "\"pattern\": \"^a\"}}}", "#/properties/name: 'pattern' is not supported");
	refused("{\"type\": \"string\", \"format\": \"date-time\"}", "#: 'format' is not supported");
	refused("{\"type\": \"string\", \"minLength\": 1}", "#: 'minLength' is not supported");
	refused("{\"type\": \"integer\", \"minimum\": 1}", "#: 'minimum' is not supported");
	refused("{\"oneOf\": [{\"type\": \"string\"}]}", "#: 'oneOf' is not supported");
	refused("{\"type\": \"array\", \"items\": {\"type\": \"array\", \"uniqueItems\": true}}",
	    "#/items: 'uniqueItems' is not supported");
	refused("{\"anyOf\": [{\"type\": \"string\"}], \"type\": \"string\"}",
	    "#: 'anyOf' beside 'type' is not supported");
	refused("{\"allOf\": [{\"type\": \"string\"}, {\"type\": \"null\"}]}",
	    "#: 'allOf' of more than one schema is not supported");
	refused("{\"$ref\": \"http://x/y.json\"}",
	    "#: '$ref' 'http://x/y.json': only references into the schema ('#...') are supported");
	refused("{\"$ref\": \"#/$defs/none\"}", "#: '$ref' '#/$defs/none' is not found");
	refused("{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#\"}}, "
	    "\"required\": [\"a\"]}", "#: no finite document satisfies the schema");
	refused("{\"type\": \"object\", \"properties\": {}, \"required\": [\"a\"]}",
	    "#: 'required' names 'a', which is not in 'properties'");
	refused("{\"type\": \"strin\"}", "#: 'type' 'strin' is not a JSON Schema type");
	refused("{\"items\": [{}]}", "#: 'items' as an array is not supported");
	refused("{\"enum\": []}", "#: 'enum' is not a non-empty array");
	refused("{\"type\": \"integer\", \"enum\": [\"a\"]}",
	    "#: no finite document satisfies the schema");
	refused("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"$ref\": \"#/$defs/a\"}},"
	    " \"$ref\": \"#/$defs/a\"}", "#: no finite document satisfies the schema");
	refused("false", "#: no finite document satisfies the schema");
	refused("{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#/$defs/d\"}}, "
	    "\"$defs\": {\"d\": {\"type\": \"number\", \"multipleOf\": 2}}}",
	    "#/$defs/d: 'multipleOf' is not supported");
}

static int
bit(const uint32_t *bits, int t)
{
	return bits[t >> 5] >> (t & 31) & 1;
}

/* The mask of s equals grammar_allows of each token (twice: the second
 * from the cache). */
static int
mask_is_exact(struct grammar_state *s, const char *where)
{
	uint32_t bits[(N_VOCAB + 31) / 32];

	for (int pass = 0; pass < 2; pass++) {
		int n = grammar_mask(s, bits, N_VOCAB, -1), count = 0;
		for (int t = 0; t < N_VOCAB; t++) {
			if (bit(bits, t) != grammar_allows(s, t)) {
				FAILF("after '%s': token %d: mask %d, allows %d", where, t, bit(bits, t),
				    grammar_allows(s, t));
				return 0;
			}
			count += bit(bits, t);
		}
		if (n != count) {
			FAILF("after '%s': mask says %d allowed, has %d", where, n, count);
			return 0;
		}
	}
	return 1;
}

TEST(masks_equal_token_by_token_walks)
{
	static const char *const docs[] = {
		"{\"a\": [1, -2.5e+3, \"x\xc3\xa9\\u00e9\", true, null, {\"b\": {}}]}",
		" {\"ab\":\"a\xc3\xa9\xf0\x9f\x98\x80\\n\", \"12\": 12}",
	};
	char err[UTIL_ERRLEN];
	struct grammar *g = G(NULL, 2, err), *p = G(PERSON, -1, err);
	struct grammar_state *s;

	CHECK(g != NULL && p != NULL);
	for (size_t d = 0; d < 3; d++) {
		const char *doc = d < 2 ? docs[d] :
		    "{\"name\": \"x\", \"age\": 3, \"nick\": null, \"tags\": [\"a\", 7]}";
		s = grammar_state_new(d < 2 ? g : p);
		for (size_t i = 0; i <= strlen(doc); i++) {
			char where[128];
			snprintf(where, sizeof where, "%.*s", (int)i, doc);
			if (!mask_is_exact(s, where))
				break;
			if (i < strlen(doc) && grammar_feed(s, doc + i, 1) != 0) {
				FAILF("'%s' then '%c' rejected", where, doc[i]);
				break;
			}
		}
		CHECK(grammar_done(s));
		grammar_state_free(s);
	}
	grammar_free(g);
	grammar_free(p);
}

TEST(masks_of_multibyte_and_partial_utf8_tokens)
{
	char err[UTIL_ERRLEN];
	struct grammar *g = G(NULL, -1, err);
	struct grammar_state *s = grammar_state_new(g), *snap = grammar_state_new(g);
	uint32_t bits[(N_VOCAB + 31) / 32];

	CHECK(grammar_mask(s, bits, N_VOCAB, -1) > 0);
	CHECK(bit(bits, tok_id("{")) && bit(bits, tok_id("{\"")) && bit(bits, tok_id("Ġ{")));
	CHECK(!bit(bits, tok_id("}")) && !bit(bits, '[') && !bit(bits, tok_id("true")));
	CHECK(!bit(bits, T_END));
	CHECK(grammar_accept(s, tok_id("{\"")) == 0);
	CHECK(grammar_accept(s, tok_id("ab")) == 0);
	CHECK(grammar_accept(s, tok_id("\":")) == 0);
	CHECK(grammar_accept(s, '"') == 0);
	grammar_mask(s, bits, N_VOCAB, -1);
	CHECK(bit(bits, tok_id("aÃ")) && bit(bits, tok_id("Ã©")) && !bit(bits, tok_id("©b")));
	CHECK(grammar_accept(s, tok_id("aÃ")) == 0);		/* inside a character now */
	grammar_mask(s, bits, N_VOCAB, -1);
	CHECK(bit(bits, tok_id("©b")) && bit(bits, 0xA9));
	CHECK(!bit(bits, 'b') && !bit(bits, tok_id("\"}")) && !bit(bits, tok_id("Ã©")));
	CHECK(grammar_accept(s, 'b') == -1);			/* refused, state kept */
	grammar_state_copy(snap, s);
	CHECK(grammar_accept(s, tok_id("©b")) == 0);
	CHECK(grammar_accept(s, tok_id("\"}")) == 0);
	CHECK(grammar_done(s));
	grammar_mask(s, bits, N_VOCAB, -1);
	CHECK(bit(bits, T_END) && bit(bits, ' ') && !bit(bits, '}'));
	CHECK(grammar_accept(s, T_END) == 0 && grammar_finished(s));
	CHECK(grammar_mask(s, bits, N_VOCAB, -1) == 0);
	grammar_state_copy(s, snap);				/* roll back */
	CHECK(!grammar_finished(s) && grammar_allows(s, tok_id("©b")) && !grammar_allows(s, 'b'));
	CHECK(!grammar_allows(s, T_END) && !grammar_allows(s, -1) && !grammar_allows(s, N_VOCAB));
	/* logits rows past the vocabulary are never allowed */
	{
		float lg[N_VOCAB + 5];
		for (int i = 0; i < N_VOCAB + 5; i++)
			lg[i] = 1;
		int n = grammar_mask_logits(s, lg, N_VOCAB + 5, -1);
		CHECK(n >= 2 && lg[tok_id("©b")] == 1 && isinf(lg['b']) && isinf(lg[N_VOCAB + 4]));
	}
	grammar_state_free(s);
	grammar_state_free(snap);
	grammar_free(g);
}

/* From doc, always the allowed token of lowest id under the closing
 * policy with left tokens: the document ends within them. */
static void
closes(struct grammar *g, const char *doc, int left)
{
	struct grammar_state *s = grammar_state_new(g);
	uint32_t bits[(N_VOCAB + 31) / 32];
	int d;

	CHECK(grammar_feed(s, doc, strlen(doc)) == 0);
	d = grammar_distance(s);
	for (; left > 0 && !grammar_finished(s); left--) {
		int t = 0;
		if (grammar_mask(s, bits, N_VOCAB, left) <= 0)
			break;
		while (!bit(bits, t))
			t++;
		CHECK(grammar_accept(s, t) == 0);
		if (grammar_done(s) && left > 1) {	/* the stop token is allowed now */
			CHECK(grammar_mask(s, bits, N_VOCAB, left - 1) > 0 && bit(bits, T_END));
			break;
		}
	}
	if (!grammar_done(s) && !grammar_finished(s))
		FAILF("'%s' (distance %d): not closed, %d bytes short", doc, d, grammar_distance(s));
	grammar_state_free(s);
}

TEST(closing_policy_ends_the_document_within_max_tokens)
{
	char err[UTIL_ERRLEN];
	struct grammar *g = G(NULL, -1, err), *p = G(PERSON, -1, err);
	struct grammar_state *s = grammar_state_new(p);

	closes(g, "{\"a\": [[1, {\"b\": \"x\xc3", 9);
	closes(g, "{\"a\": [[1, {\"b\": \"x\xc3", 12);
	closes(g, "{\"a\": \"\\u00", 6);
	closes(g, "", 2);
	closes(p, "{\"name\": \"x", 64);
	closes(p, "{\"name\": \"x", grammar_distance(s) + 1);
	CHECK(grammar_feed(s, "{\"name\": \"x", 11) == 0);
	closes(p, "{\"name\": \"x", grammar_distance(s));
	CHECK_EQ_INT(grammar_distance(s), strlen("\",\"age\":0,\"tags\":[7]}"));
	grammar_state_free(s);
	grammar_free(g);
	grammar_free(p);
}

/* A parsed schema (the caller frees), NULL on a bad text. */
static struct json *
J(const char *text)
{
	char err[UTIL_ERRLEN];

	return json_parse(text, strlen(text), err);
}

TEST(the_cache_hands_out_one_grammar_a_schema_and_a_dropped_one_lives_on)
{
	char err[UTIL_ERRLEN];
	struct grammar_cache *c = grammar_cache_new(voc, 2);
	struct json *a = J("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": "
	    "\"integer\"}}, \"required\": [\"a\"]}");
	struct json *a2 = J("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
	    "\"integer\"}},\"required\":[\"a\"]}");
	struct json *b = J("{\"type\": \"array\", \"items\": {\"type\": \"boolean\"}}");
	struct json *bad = J("{\"type\": \"string\", \"pattern\": \"x\"}");
	struct grammar *g1, *g2, *g3, *g4, *g5;
	struct grammar_state *st;

	CHECK(c != NULL && a != NULL && a2 != NULL && b != NULL && bad != NULL);
	g1 = grammar_cache_get(c, a, err);
	g2 = grammar_cache_get(c, a2, err);	/* the same schema spaced otherwise */
	CHECK(g1 != NULL && g1 == g2);
	g3 = grammar_cache_get(c, b, err);
	g4 = grammar_cache_get(c, NULL, err);	/* any object: a drops out (least used) */
	CHECK(g3 != NULL && g4 != NULL && g3 != g1 && g4 != g3);
	CHECK(grammar_cache_get(c, bad, err) == NULL);
	CHECK(strstr(err, "'pattern' is not supported") != NULL);
	grammar_free(g2);
	grammar_cache_free(c);	/* g1, g3, g4 still held here */
	st = grammar_state_new(g1);
	CHECK(st != NULL && grammar_feed(st, "{\"a\": 12}", 9) == 0 && grammar_done(st));
	grammar_state_free(st);
	g5 = grammar_retain(g3);
	grammar_free(g3);
	CHECK(verdict(g5, "[true, false]", 13) == 1);
	grammar_free(g5), grammar_free(g1), grammar_free(g4);
	json_free(a), json_free(a2), json_free(b), json_free(bad);
}


/* --- tool-call documents --- */

#define WEATHER "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, " \
	"\"days\": {\"type\": \"integer\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}, " \
	"\"note\": {\"type\": [\"string\", \"null\"]}}, \"required\": [\"city\", \"days\"]}"

/* The calls of get_weather (strict, WEATHER) and f2 (not strict) in form, from start. */
static struct grammar *
C(int form, int start, int parallel, int think, struct json **pj, char *err)
{
	struct grammar_tool t[2] = { { "get_weather", NULL, 1 }, { "f2", NULL, 0 } };
	struct grammar_calls cl = { form, start, 0, parallel, think };
	int bad;

	*pj = J(WEATHER);
	t[0].params = *pj;
	return grammar_compile_calls(t, 2, &cl, voc, NULL, &bad, err);
}

#define XCALL(args) "<function=get_weather>\n" args "</function>\n</tool_call>"
#define XP(k, v) "<parameter=" k ">\n" v "\n</parameter>\n"

/*
 * grammar_mask's bits (the device path's mask) are the finite set
 * grammar_mask_logits leaves of a finite row, the closing rule's too, for
 * rows shorter and longer than the vocabulary and none a multiple of 32.
 */
static void
bits_are_the_finite_set(struct grammar_state *s, const char *where)
{
	static const int rows[] = { N_VOCAB, N_VOCAB + 5, N_VOCAB - 3, 40 };
	int lefts[] = { -1, 1, 2, 3, grammar_distance(s) + 1, grammar_distance(s) + 4, 1000 };

	for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
		for (size_t k = 0; k < sizeof lefts / sizeof lefts[0]; k++) {
			uint32_t bits[(N_VOCAB + 5 + 31) / 32];
			float lg[N_VOCAB + 5];
			int n = rows[r], nb, nl, bad = -1;

			for (int t = 0; t < n; t++)
				lg[t] = (float)((t * 7919) % 211) - 100.5f;
			nb = grammar_mask(s, bits, n, lefts[k]);
			nl = grammar_mask_logits(s, lg, n, lefts[k]);
			for (int t = 0; t < n && bad < 0; t++)
				if (bit(bits, t) != isfinite(lg[t]) ||
				    (bit(bits, t) && lg[t] != (float)((t * 7919) % 211) - 100.5f))
					bad = t;
			for (int t = n; t < ((n + 31) & ~31) && bad < 0; t++)
				if (bit(bits, t))
					bad = t;
			if (nb != nl || bad >= 0) {
				FAILF("after '%s', row %d, left %d: counts %d %d, token %d differs", where,
				    n, lefts[k], nb, nl, bad);
				return;
			}
		}
}

TEST(mask_bits_are_the_finite_set_of_mask_logits)
{
	static const char *const docs[] = {
		"{\"a\": [1, -2.5e+3, \"x\xc3\xa9\", true, null, {\"b\": {}}]}",
		"{\"name\": \"x\", \"age\": 3, \"nick\": null, \"tags\": [\"a\", 7]}",
	};
	char err[UTIL_ERRLEN];
	struct json *pj = NULL;
	struct grammar *gs[3] = { G(NULL, 2, err), G(PERSON, -1, err),
	    C(GRAMMAR_CALLS_XML, GRAMMAR_CALLS_REQUIRED, 0, 0, &pj, err) };
	const char *doc[3] = { docs[0], docs[1],
	    XCALL(XP("city", "Paris") XP("days", "3")) };

	for (int i = 0; i < 3; i++) {
		struct grammar_state *s;

		CHECK(gs[i] != NULL);
		if (gs[i] == NULL || (s = grammar_state_new(gs[i])) == NULL)
			continue;
		for (size_t b = 0; b <= strlen(doc[i]); b++) {
			char where[160];

			snprintf(where, sizeof where, "%.*s", (int)b, doc[i]);
			bits_are_the_finite_set(s, where);
			if (b < strlen(doc[i]) && grammar_feed(s, doc[i] + b, 1) != 0) {
				FAILF("'%s' then '%c' rejected", where, doc[i][b]);
				break;
			}
		}
		CHECK(grammar_accept(s, T_END) == 0);	/* finished: nothing allowed */
		bits_are_the_finite_set(s, "the stop");
		grammar_state_free(s);
		grammar_free(gs[i]);
	}
	json_free(pj);
}

TEST(xml_calls_required_names_and_strict_arguments)
{
	char err[UTIL_ERRLEN];
	struct json *j;
	struct grammar *g = C(GRAMMAR_CALLS_XML, GRAMMAR_CALLS_REQUIRED, 0, 0, &j, err);
	struct grammar_state *s;

	CHECK(g != NULL);
	if (g == NULL) {
		printf("#   %s\n", err);
		return;
	}
	ACCEPTS(g, XCALL(XP("city", "Paris") XP("days", "3")));
	ACCEPTS(g, XCALL(XP("city", "New\nYork, \"NY\" {") XP("days", "-12") XP("unit", "f")));
	ACCEPTS(g, XCALL(XP("city", "") XP("days", "0") XP("note", "null")));
	ACCEPTS(g, XCALL(XP("city", "x") XP("days", "1") XP("note", "any text")) "\n");
	ACCEPTS(g, "<function=f2>\n<parameter=x>\nwhatever\n</parameter>\n</function>\n</tool_call>");
	ACCEPTS(g, "<function=f2>\n</function>\n</tool_call>");
	PREFIX(g, "<function=get_weather>\n" XP("city", "Paris") XP("days", "3") "</func");
	PREFIX(g, "<function=get_weather>\n<parameter=city>\nPa");
	REJECTS(g, XCALL(XP("city", "Paris")));			/* days is required */
	REJECTS(g, XCALL(XP("days", "3") XP("city", "Paris")));	/* in order */
	REJECTS(g, XCALL(XP("city", "Paris") XP("days", "three")));
	REJECTS(g, XCALL(XP("city", "Paris") XP("days", "3") XP("unit", "k")));
	REJECTS(g, XCALL(XP("city", "Paris") XP("days", "3") XP("wind", "3")));
	REJECTS(g, XCALL(XP("city", "a</tool_call>") XP("days", "3")));
	REJECTS(g, "<function=get_weathe>\n");
	REJECTS(g, "<function=nope>\n");
	REJECTS(g, "<function=f2>\n<parameter=x>\n</tool_call>");
	REJECTS(g, XCALL(XP("city", "P") XP("days", "3")) "\n<tool_call>");	/* not parallel */
	s = grammar_state_new(g);
	CHECK(grammar_feed(s, XCALL(XP("city", "P") XP("days", "3")), 
	    strlen(XCALL(XP("city", "P") XP("days", "3")))) == 0);
	CHECK(grammar_done(s) && grammar_ended(s));
	grammar_state_free(s);
	grammar_free(g);
	json_free(j);
}

TEST(xml_calls_auto_text_think_and_parallel)
{
	char err[UTIL_ERRLEN];
	struct json *j, *j2;
	struct grammar *g = C(GRAMMAR_CALLS_XML, GRAMMAR_CALLS_AUTO, 1, 1, &j, err);
	struct grammar *r = C(GRAMMAR_CALLS_XML, GRAMMAR_CALLS_REQUIRED, 1, 0, &j2, err);
	struct grammar_state *s;
	const char *one = XCALL(XP("city", "P") XP("days", "3"));

	CHECK(g != NULL && r != NULL);
	if (g == NULL || r == NULL)
		return;
	ACCEPTS(g, "");
	ACCEPTS(g, "I think <tool_call> is a tag");	/* inside the think block */
	ACCEPTS(g, "hmm</think>\n\nThe weather is fine.");
	ACCEPTS(g, "hmm</think>\n\n<tool_call>\n<function=f2>\n</function>\n</tool_call>");
	ACCEPTS(g, "</think>Let me look.<tool_call>\n" XCALL(XP("city", "P") XP("days", "3"))
	    "\n<tool_call>\n<function=f2>\n</function>\n</tool_call>\n");
	REJECTS(g, "</think>x<tool_call>\n<function=nope>");
	REJECTS(g, "</think>x<tool_call>\n" XCALL(XP("city", "P") XP("days", "3")) "more text");
	PREFIX(g, "</think>x<tool_call>\n<function=get_weather>\n");
	ACCEPTS(r, XCALL(XP("city", "P") XP("days", "3")) "\n<tool_call>\n" XCALL(XP("city", "Q")
	    XP("days", "4")));
	s = grammar_state_new(r);
	CHECK(grammar_feed(s, one, strlen(one)) == 0);
	CHECK(grammar_done(s) && !grammar_ended(s));	/* another call may follow */
	grammar_state_free(s);
	s = grammar_state_new(g);
	CHECK(grammar_feed(s, "a</think>b", 10) == 0 && grammar_done(s) && !grammar_ended(s));
	CHECK_EQ_INT(grammar_distance(s), 0);
	CHECK(grammar_feed(s, "<tool_call>\n<function=get_weather>\n", 35) == 0);
	CHECK(!grammar_done(s) && grammar_distance(s) > 0);
	grammar_state_free(s);
	grammar_free(g), grammar_free(r);
	json_free(j), json_free(j2);
}

TEST(json_calls_named_and_required)
{
	char err[UTIL_ERRLEN];
	struct json *j, *j2;
	struct grammar *n = C(GRAMMAR_CALLS_JSON, GRAMMAR_CALLS_NAMED, 0, 0, &j, err);
	struct grammar *r = C(GRAMMAR_CALLS_JSON, GRAMMAR_CALLS_REQUIRED, 0, 0, &j2, err);

	CHECK(n != NULL && r != NULL);
	if (n == NULL || r == NULL) {
		printf("#   %s\n", err);
		return;
	}
	ACCEPTS(n, "{\"city\": \"Paris\", \"days\": 3}}\n</tool_call>");
	ACCEPTS(n, "{\"city\": \"12\", \"days\": 3, \"note\": null}}\n</tool_call>");
	REJECTS(n, "{\"city\": \"Paris\"}}\n</tool_call>");
	REJECTS(n, "{\"city\": 12, \"days\": 3}}");
	ACCEPTS(r, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"days\": 1}}\n"
	    "</tool_call>");
	ACCEPTS(r, "{\"name\": \"f2\", \"arguments\": {\"x\": [1, {}]}}\n</tool_call>");
	REJECTS(r, "{\"name\": \"f3\"");
	REJECTS(r, "{\"name\": \"f2\", \"arguments\": [1]");
	grammar_free(n), grammar_free(r);
	json_free(j), json_free(j2);
}

TEST(xml_values_typed_by_the_schema)
{
	char err[UTIL_ERRLEN];
	struct json *j;
	struct grammar *g = C(GRAMMAR_CALLS_XML, GRAMMAR_CALLS_REQUIRED, 0, 0, &j, err);
	struct { const char *k, *v, *want; } c[] = {
		{ "city", "12345", "\"12345\"" }, { "city", "a \"q\"\n", "\"a \\\"q\\\"\\n\"" },
		{ "days", "3", "3" }, { "days", "x", NULL }, { "unit", "c", "\"c\"" },
		{ "note", "null", "null" }, { "note", "nullx", "\"nullx\"" }, { "wind", "3", NULL },
	};
	char *v;

	CHECK(g != NULL);
	for (size_t i = 0; g != NULL && i < sizeof c / sizeof c[0]; i++) {
		v = grammar_call_value(g, "get_weather", c[i].k, strlen(c[i].k), c[i].v,
		    strlen(c[i].v));
		if (c[i].want == NULL)
			CHECK(v == NULL);
		else
			CHECK_EQ_STR(v, c[i].want);
		free(v);
	}
	CHECK(g == NULL || grammar_call_value(g, "f2", "x", 1, "1", 1) == NULL);
	grammar_free(g);
	json_free(j);
}

TEST(calls_refusals_name_the_tool_and_the_keyword)
{
	char err[UTIL_ERRLEN];
	struct json *a = J("{\"type\": \"object\", \"properties\": {\"c\": {\"type\": \"string\", "
	    "\"pattern\": \"x\"}}}"), *m = J("{\"type\": \"object\"}"),
	    *k = J("{\"type\": \"object\", \"properties\": {\"a>b\": {}}}");
	struct grammar_tool t[2] = { { "ok", NULL, 0 }, { "bad", a, 1 } };
	struct grammar_calls cl = { GRAMMAR_CALLS_XML, GRAMMAR_CALLS_REQUIRED, 0, 0, 0 };
	int bad;

	CHECK(grammar_compile_calls(t, 2, &cl, voc, NULL, &bad, err) == NULL);
	CHECK_EQ_INT(bad, 1);
	CHECK_EQ_STR(err, "#/properties/c: 'pattern' is not supported");
	t[1].params = m;
	CHECK(grammar_compile_calls(t, 2, &cl, voc, NULL, &bad, err) == NULL && bad == 1);
	CHECK(strstr(err, "an object with 'properties'") != NULL);
	cl.form = GRAMMAR_CALLS_JSON;	/* a map is fine as a JSON value */
	struct grammar *g = grammar_compile_calls(t, 2, &cl, voc, NULL, &bad, err);
	CHECK(g != NULL);
	grammar_free(g);
	cl.form = GRAMMAR_CALLS_XML;
	t[1].params = k;
	CHECK(grammar_compile_calls(t, 2, &cl, voc, NULL, &bad, err) == NULL && bad == 1);
	CHECK(strstr(err, "'a>b'") != NULL);
	t[1].name = "ok";
	t[1].strict = 0;
	CHECK(grammar_compile_calls(t, 2, &cl, voc, NULL, &bad, err) == NULL && bad == -1);
	CHECK(strstr(err, "'ok': a name given twice") != NULL);
	t[1].name = "a b";
	CHECK(grammar_compile_calls(t, 2, &cl, voc, NULL, &bad, err) == NULL && bad == -1);
	json_free(a), json_free(m), json_free(k);
}

int
main(void)
{
	char err[UTIL_ERRLEN];
	int32_t stop = T_END;

	if ((tk = tiny()) == NULL || (voc = grammar_vocab_new(tk, &stop, 1, err)) == NULL) {
		printf("not ok setup\n");
		return 1;
	}
	RUN(any_object);
	RUN(whitespace_is_bounded);
	RUN(strings_and_utf8);
	RUN(numbers);
	RUN(object_properties_in_order);
	RUN(enum_const_anyof_maps);
	RUN(recursive_refs);
	RUN(unsupported_features_are_refused_by_name);
	RUN(masks_equal_token_by_token_walks);
	RUN(masks_of_multibyte_and_partial_utf8_tokens);
	RUN(closing_policy_ends_the_document_within_max_tokens);
	RUN(mask_bits_are_the_finite_set_of_mask_logits);
	RUN(the_cache_hands_out_one_grammar_a_schema_and_a_dropped_one_lives_on);
	RUN(xml_calls_required_names_and_strict_arguments);
	RUN(xml_calls_auto_text_think_and_parallel);
	RUN(json_calls_named_and_required);
	RUN(xml_values_typed_by_the_schema);
	RUN(calls_refusals_name_the_tool_and_the_keyword);
	grammar_vocab_free(voc);
	tokenizer_free(tk);
	return test_summary();
}
