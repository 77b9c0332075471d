/*
 * quant-cli: the peer tests' handle on lib/quant.
 *   quant-cli deq TYPE   <blocks  >f32     dequantize stdin as rows of TYPE
 *   quant-cli q TYPE     <f32     >blocks  quantize stdin (little-endian f32)
 *   quant-cli act TYPE   <f32     >blocks  quantize activations for TYPE's dot
 *   quant-cli dot TYPE N <w ++ x  >text    dot of N-element row w with f32 x,
 *                                          both paths (vec_dot and dot_f32)
 * TYPE is a ggml type name.  Exit 0 done, 1 failed, 2 misused.
 */
#include "quant.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s deq|q|act TYPE <in >out\n"
	    "       %s dot TYPE N <w-then-x\n", prog, prog);
	return status;
}

static int
run_deq(int t, const char *buf, size_t len)
{
	const struct quant_traits *tr = quant_traits(t);
	int64_t n;
	float *y;

	if (len % tr->size != 0)
		die(1, "input is %zu bytes, not a multiple of %d", len, tr->size);
	n = (int64_t)(len / tr->size) * tr->blck;
	if ((y = malloc(n * sizeof(float) + 1)) == NULL)
		die(1, "out of memory");
	if (quant_dequantize_row(t, buf, y, n) != 0)
		die(1, "cannot dequantize '%s'", quant_name(t));
	fwrite(y, sizeof(float), n, stdout);
	free(y);
	return 0;
}

static int
run_q(int t, const char *buf, size_t len, int act)
{
	char err[UTIL_ERRLEN];
	int64_t n = (int64_t)(len / sizeof(float));
	int qt = act ? quant_vec_dot_type(t) : t;
	size_t sz;
	float *x;
	void *y;

	if (qt < 0)
		die(1, "'%s' has no dot product", quant_name(t));
	if ((sz = quant_row_size(qt, n)) == 0 && n != 0)
		die(1, "%lld elements are not whole blocks of '%s'", (long long)n, quant_name(qt));
	if ((x = malloc(len + 1)) == NULL || (y = malloc(sz + 1)) == NULL)
		die(1, "out of memory");
	memcpy(x, buf, len);
	if (act)
		quant_quantize_act(t, x, y, n);
	else if (quant_quantize_row(t, x, y, n, err) != 0)
		die(1, "%s", err);
	fwrite(y, 1, sz, stdout);
	free(x);
	free(y);
	return 0;
}

static int
run_dot(int t, int64_t n, const char *buf, size_t len)
{
	size_t wsz = quant_row_size(t, n);
	int qt = quant_vec_dot_type(t);
	float *x;
	void *xq;

	if (wsz == 0 || qt < 0 || len != wsz + n * sizeof(float))
		die(1, "want %zu + %lld * 4 bytes of input", wsz, (long long)n);
	if ((x = malloc(n * sizeof(float))) == NULL || (xq = malloc(quant_row_size(qt, n))) == NULL)
		die(1, "out of memory");
	memcpy(x, buf + wsz, n * sizeof(float));
	quant_quantize_act(t, x, xq, n);
	printf("vec_dot %.9g\n", quant_vec_dot(t, n, buf, xq));
	printf("dot_f32 %.9g\n", quant_dot_f32(t, n, buf, x));
	free(x);
	free(xq);
	return 0;
}

int
main(int argc, char *argv[])
{
	char err[UTIL_ERRLEN], *buf;
	size_t len;
	int64_t n = 0;
	int t, st;

	prog = base_name(argv[0]);
	if (argc < 3)
		return usage(stderr, 2);
	if ((t = quant_from_name(argv[2])) < 0) {
		warnmsg("unknown type '%s'", argv[2]);
		return 2;
	}
	if (strcmp(argv[1], "dot") == 0 && (argc != 4 || util_parse_i64(argv[3], 1, INT64_MAX / 8, &n) != 0))
		return usage(stderr, 2);
	if ((buf = util_read_file("-", &len, err)) == NULL)
		die(1, "%s", err);
	if (strcmp(argv[1], "deq") == 0)
		st = run_deq(t, buf, len);
	else if (strcmp(argv[1], "q") == 0)
		st = run_q(t, buf, len, 0);
	else if (strcmp(argv[1], "act") == 0)
		st = run_q(t, buf, len, 1);
	else if (strcmp(argv[1], "dot") == 0)
		st = run_dot(t, n, buf, len);
	else
		st = usage(stderr, 2);
	free(buf);
	return finish(st);
}
