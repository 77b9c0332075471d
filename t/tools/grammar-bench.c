/*
 * grammar-bench: microseconds per grammar mask on a real vocabulary.
 *   grammar-bench TOKENIZER [SCHEMA]
 * TOKENIZER: a tokenizer.json, or a model (GGUF, HF dir); SCHEMA: a JSON
 * Schema file (default: any JSON object).  For each state of a few
 * document prefixes: the first mask (the trie walk: the cache is cold),
 * a cached one, one put on a row of logits, and closing ones (left =
 * distance + 1..8: the first walks, the others read the cached
 * deltas); TSV on stdout.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json.h"
#include "model.h"
#include "tokenizer.h"
#include "util.h"

static struct tokenizer *
load(const char *path, char *err)
{
	size_t n = strlen(path);
	struct model *m;
	struct tokenizer *tok;

	if (n > 5 && strcmp(path + n - 5, ".json") == 0)
		return tokenizer_from_json(path, err);
	if ((m = model_open_text(path, err)) == NULL)
		return NULL;
	tok = model_tokenizer(m, err);
	model_close_text(m);
	return tok;
}

static void
bench(struct grammar *g, const char *label, const char *prefix, int nv)
{
	struct grammar_state *s = grammar_state_new(g);
	uint32_t *bits = malloc((nv + 31) / 32 * sizeof *bits);
	float *lg = malloc(nv * sizeof *lg);
	double t0, cold, hot, lgt, closing, closing2;
	int reps = 200, n;

	if (grammar_feed(s, prefix, strlen(prefix)) != 0) {
		fprintf(stderr, "grammar-bench: '%s' rejected\n", prefix);
		exit(1);
	}
	t0 = util_now();
	n = grammar_mask(s, bits, nv, -1);
	cold = util_now() - t0;
	t0 = util_now();
	for (int i = 0; i < reps; i++)
		grammar_mask(s, bits, nv, -1);
	hot = (util_now() - t0) / reps;
	t0 = util_now();
	for (int i = 0; i < reps; i++) {
		memset(lg, 0, nv * sizeof *lg);
		grammar_mask_logits(s, lg, nv, -1);
	}
	lgt = (util_now() - t0) / reps;
	t0 = util_now();
	grammar_mask(s, bits, nv, grammar_distance(s) + 1);
	closing = util_now() - t0;
	t0 = util_now();
	for (int i = 0; i < reps; i++)
		grammar_mask(s, bits, nv, grammar_distance(s) + 1 + i % 8);
	closing2 = (util_now() - t0) / reps;
	printf("%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\n", nv, label, n, cold * 1e6,
	    hot * 1e6, lgt * 1e6, closing * 1e6, closing2 * 1e6);
	free(bits);
	free(lg);
	grammar_state_free(s);
}

int
main(int argc, char *argv[])
{
	static const char *const any[][2] = {
		{ "start", "" }, { "after-key", "{\"a\"" }, { "in-number", "{\"a\": 12" },
		{ "in-string", "{\"a\": \"xy" }, { "nested-string", "{\"a\": [{\"b\": [1, {\"c\": \"" },
		{ "in-key", "{\"a\": 1, \"b" },
	};
	char err[UTIL_ERRLEN];
	struct tokenizer *tok;
	struct grammar_vocab *v;
	struct grammar *g;
	struct json *schema = NULL;
	int32_t eos;
	double t0;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: grammar-bench tokenizer [schema]\n");
		return 2;
	}
	if ((tok = load(argv[1], err)) == NULL) {
		fprintf(stderr, "grammar-bench: %s: %s\n", argv[1], err);
		return 1;
	}
	if (argc == 3) {
		size_t len;
		char *text = util_read_file(argv[2], &len, err);
		if (text == NULL || (schema = json_parse(text, len, err)) == NULL) {
			fprintf(stderr, "grammar-bench: %s: %s\n", argv[2], err);
			return 1;
		}
		free(text);
	}
	eos = tokenizer_eos(tok);
	t0 = util_now();
	if ((v = grammar_vocab_new(tok, &eos, eos >= 0, err)) == NULL ||
	    (g = grammar_compile(schema, v, NULL, err)) == NULL) {
		fprintf(stderr, "grammar-bench: %s\n", err);
		return 1;
	}
	fprintf(stderr, "vocab %zu tokens: trie and grammar in %.1f ms\n", grammar_vocab_size(v),
	    (util_now() - t0) * 1e3);
	printf("n_vocab\tstate\tallowed\tcold_us\tcached_us\tlogits_us\tclosing_cold_us\tclosing_cached_us\n");
	for (size_t i = 0; i < sizeof any / sizeof any[0] && schema == NULL; i++)
		bench(g, any[i][0], any[i][1], grammar_vocab_size(v));
	if (schema != NULL)
		for (int i = 3; i < argc + 1 && i < 4; i++)
			bench(g, "schema-start", "", grammar_vocab_size(v));
	grammar_free(g);
	grammar_vocab_free(v);
	json_free(schema);
	tokenizer_free(tok);
	return 0;
}
