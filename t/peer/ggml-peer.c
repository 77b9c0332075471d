/*
 * ggml-peer: ggml's own reference (de)quantizers behind the same interface
 * as build/t/tools/quant-cli, for byte-for-byte comparisons.  Built at test
 * time by t/peer/ggml-ref.sh against the ggml-quants.c that the
 * llama-cpp-python sdist vendors; nothing of ggml is kept in this tree.
 *   ggml-peer q TYPE <f32 >blocks      ggml-peer deq TYPE <blocks >f32
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-quants.h"

/* Shims for the few ggml.c symbols ggml-quants.c names on paths we never take. */
void
ggml_abort(const char *file, int line, const char *fmt, ...)
{
	fprintf(stderr, "ggml-peer: ggml_abort at %s:%d\n", file, line);
	abort();
}

size_t ggml_row_size(enum ggml_type t, int64_t n) { (void)t; (void)n; abort(); }
size_t ggml_type_size(enum ggml_type t) { (void)t; abort(); }
const char *ggml_type_name(enum ggml_type t) { (void)t; return "?"; }

typedef void qfn(const float *, void *, int64_t);
typedef void dfn(const void *, float *, int64_t);

static const struct peer {
	const char *name;
	int	blck, size;
	qfn	*q;
	dfn	*d;
} peers[] = {
#define P(n, b, s, q, d) { n, b, s, (qfn *)(q), (dfn *)(d) }
	P("Q4_0", 32, 18, quantize_row_q4_0_ref, dequantize_row_q4_0),
	P("Q4_1", 32, 20, quantize_row_q4_1_ref, dequantize_row_q4_1),
	P("Q5_0", 32, 22, quantize_row_q5_0_ref, dequantize_row_q5_0),
	P("Q5_1", 32, 24, quantize_row_q5_1_ref, dequantize_row_q5_1),
	P("Q8_0", 32, 34, quantize_row_q8_0_ref, dequantize_row_q8_0),
	P("Q8_1", 32, 36, quantize_row_q8_1_ref, NULL),
	P("Q2_K", 256, 84, quantize_row_q2_K_ref, dequantize_row_q2_K),
	P("Q3_K", 256, 110, quantize_row_q3_K_ref, dequantize_row_q3_K),
	P("Q4_K", 256, 144, quantize_row_q4_K_ref, dequantize_row_q4_K),
	P("Q5_K", 256, 176, quantize_row_q5_K_ref, dequantize_row_q5_K),
	P("Q6_K", 256, 210, quantize_row_q6_K_ref, dequantize_row_q6_K),
	P("Q8_K", 256, 292, quantize_row_q8_K_ref, dequantize_row_q8_K),
	P("IQ4_NL", 32, 18, NULL, dequantize_row_iq4_nl),
	P("IQ4_XS", 256, 136, NULL, dequantize_row_iq4_xs),
	P("TQ1_0", 256, 54, quantize_row_tq1_0_ref, dequantize_row_tq1_0),
	P("TQ2_0", 256, 66, quantize_row_tq2_0_ref, dequantize_row_tq2_0),
	P("MXFP4", 32, 17, quantize_row_mxfp4_ref, dequantize_row_mxfp4),
	P("NVFP4", 64, 36, quantize_row_nvfp4_ref, dequantize_row_nvfp4),
	P("Q1_0", 128, 18, quantize_row_q1_0_ref, dequantize_row_q1_0),
	P("Q2_0", 64, 18, quantize_row_q2_0_ref, dequantize_row_q2_0),
#undef P
};

static char *
slurp(size_t *len)
{
	size_t cap = 1 << 16, n = 0, r;
	char *buf = malloc(cap);

	while (buf && (r = fread(buf + n, 1, cap - n, stdin)) > 0)
		if ((n += r) == cap)
			buf = realloc(buf, cap *= 2);
	*len = n;
	return buf;
}

int
main(int argc, char *argv[])
{
	const struct peer *p = NULL;
	size_t i, len, nb;
	char *in;
	void *out;

	for (i = 0; argc == 3 && i < sizeof(peers) / sizeof(peers[0]); i++)
		if (strcmp(argv[2], peers[i].name) == 0)
			p = &peers[i];
	if (p == NULL || (strcmp(argv[1], "q") != 0 && strcmp(argv[1], "deq") != 0)) {
		fprintf(stderr, "usage: ggml-peer q|deq TYPE\n");
		return 2;
	}
	if ((in = slurp(&len)) == NULL)
		return 1;
	if (argv[1][0] == 'q') {
		if (p->q == NULL || len % (4 * p->blck))
			return 1;
		nb = len / 4 / p->blck;
		out = calloc(nb + 1, p->size);	/* zeroed: Q8_K leaves bsums of zero blocks alone */
		p->q((const float *)in, out, (int64_t)(nb * p->blck));
		fwrite(out, p->size, nb, stdout);
	} else {
		if (p->d == NULL || len % p->size)
			return 1;
		nb = len / p->size;
		out = calloc(nb * p->blck + 1, sizeof(float));
		p->d(in, out, (int64_t)(nb * p->blck));
		fwrite(out, sizeof(float), nb * p->blck, stdout);
	}
	free(in);
	free(out);
	return fclose(stdout) == 0 ? 0 : 1;
}
