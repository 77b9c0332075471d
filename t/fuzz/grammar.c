/*
 * libFuzzer target: the schema compiler must accept or refuse any bytes
 * safely (schemas are untrusted: response_format and tool parameters).
 * A schema that compiles is then walked: the input's bytes pick allowed
 * tokens of a small vocabulary under a shrinking budget; every pick must
 * be accepted, and the mask's count must match its bits.  The same schema
 * as a strict tool's parameters: the tool-call document in the xml form
 * (the input's first byte picks where it starts, and parallel calls) is
 * compiled and walked alike.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json.h"
#include "tokenizer.h"
#include "util.h"

static const char *const extra[] = {
	"{", "}", "{\"", "\":", "\",", "\"}", "true", "null", " ", "a", "é", "12", "-0.5e+1",
	"<tool_call>", "\n<function=", "t>\n", "<parameter=", ">\n", "\n</parameter>\n",
	"</function>\n</tool_call>", "<end>",
};
#define N_EXTRA	(int)(sizeof extra / sizeof extra[0])
#define N_VOCAB	(256 + N_EXTRA)

static struct grammar_vocab *
vocab(void)
{
	static struct grammar_vocab *v;
	static char sym[256][8];
	const char *tokens[N_VOCAB];
	int32_t types[N_VOCAB], stop = N_VOCAB - 1;
	struct tokenizer_spec sp = { 0 };
	struct tokenizer *tok;
	char err[UTIL_ERRLEN];

	if (v != NULL)
		return v;
	for (int b = 0; b < 256; b++) {
		snprintf(sym[b], sizeof sym[b], "<0x%02X>", b);
		tokens[b] = sym[b];
		types[b] = TOKENIZER_BYTE;
	}
	for (int i = 0; i < N_EXTRA; i++) {
		tokens[256 + i] = extra[i];
		types[256 + i] = TOKENIZER_NORMAL;
	}
	types[stop] = TOKENIZER_CONTROL;
	sp.model = TOKENIZER_BPE;
	sp.n_vocab = N_VOCAB;
	sp.tokens = tokens;
	sp.types = types;
	sp.bos = sp.unk = sp.pad = -1;
	sp.eos = stop;
	if ((tok = tokenizer_new(&sp, err)) == NULL)
		abort();
	v = grammar_vocab_new(tok, &stop, 1, err);
	tokenizer_free(tok);
	if (v == NULL)
		abort();
	return v;
}

static void
walk(struct grammar *g, const uint8_t *data, size_t size)
{
	struct grammar_state *s = grammar_state_new(g);
	uint32_t bits[(N_VOCAB + 31) / 32];
	int left = 48;

	for (size_t i = 0; s != NULL && left > 0 && !grammar_finished(s); i++, left--) {
		int n = grammar_mask(s, bits, N_VOCAB, left), k, t, seen = 0;
		for (t = 0; t < N_VOCAB; t++)
			seen += bits[t >> 5] >> (t & 31) & 1;
		if (n != seen)
			abort();
		if (n <= 0)
			break;
		k = size ? data[i % size] % n : 0;
		for (t = 0; !(bits[t >> 5] >> (t & 31) & 1) || k-- > 0; t++)
			;
		if (!grammar_allows(s, t) || grammar_accept(s, t) != 0)
			abort();
	}
	grammar_state_free(s);
}

/* The schema as strict tool t's parameters beside f (not strict). */
static void
calls(const struct json *j, const uint8_t *data, size_t size)
{
	struct grammar_tool t[2] = { { "t", j, 1 }, { "f", NULL, 0 } };
	struct grammar_calls cl = { GRAMMAR_CALLS_XML, data[0] % 3, 0, data[0] / 3 % 2,
	    data[0] / 6 % 2 };
	char err[UTIL_ERRLEN];
	struct grammar *g;
	int bad;

	if ((g = grammar_compile_calls(t, 2, &cl, vocab(), NULL, &bad, err)) != NULL) {
		walk(g, data, size);
		grammar_free(g);
	} else if ((err[0] != '#' || bad != 0) && strncmp(err, "grammar: out of memory", 22) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[UTIL_ERRLEN];
	struct json *j = json_parse((const char *)data, size, err);
	struct grammar *g;

	if (j == NULL)
		return 0;
	if ((g = grammar_compile(j, vocab(), NULL, err)) != NULL) {
		walk(g, data, size);
		grammar_free(g);
	} else if (err[0] != '#' && strncmp(err, "grammar: out of memory", 22) != 0)
		abort();	/* every refusal names its place */
	calls(j, data, size);
	json_free(j);
	return 0;
}
