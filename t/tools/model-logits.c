/*
 * model-logits: the logits of every position of a token sequence, for the
 * tests that compare them with a reference.
 *   model-logits [-s] [-t threads] [-d device] [-k f32|f16] [-1 | -p N] [-v K] MODEL OUT ID...
 * Runs the ids through one prefill forward (-1: one token at a time; -p N:
 * the first N in one prefill, then one at a time, as a generation runs;
 * -k: the KV cache type; -v K: after the prefill, verify forwards of K rows
 * (MODEL_VERIFY), each but the last rolled back to keep K - 1, the next
 * starting at the row dropped) and writes [n_ids][n_vocab] float32 (host
 * byte order, a position's last computed row) to OUT ('-' is stdout).
 * -s: a line on stderr, "steps at backend positions: N" (model_steps_dpos).
 * MEMRA_HOST_POS=1 opens the model with model_options.host_pos (its steps
 * at the host's positions, never recorded: the A/B of the recorded steps).
 * Exit 0, 1 on a failure, 2 on misuse.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "state.h"
#include "util.h"

/* Verify forwards of K rows from ids[i] on, each but the last rolled back to keep K - 1. */
static int
verify_all(struct model *md, struct state *st, const int32_t *ids, int np, int i, int K,
    float *lg)
{
	size_t nv = (size_t)model_hparams(md)->n_vocab;

	while (i < np) {
		int k = np - i < K ? np - i : K;

		if (model_forward(md, st, ids + i, k, MODEL_VERIFY | MODEL_LOGITS_ALL, lg + i * nv,
		    NULL) != 0)
			return -1;
		if (k > 1 && i + k < np) {
			if (state_rollback(st, k - 1) != 0)
				return -1;
			i += k - 1;
		} else
			i += k;
	}
	return 0;
}

/* pre: rows of the first forward (np: all; 0: none, every row alone); K > 0: verify rows */
static int
forward_all(struct model *md, struct state *st, const int32_t *ids, int np,
    int pre, int K, float *lg)
{
	size_t nv = (size_t)model_hparams(md)->n_vocab;

	if (pre > 0 && model_forward(md, st, ids, pre, MODEL_PREFILL | MODEL_LOGITS_ALL,
	    lg, NULL) != 0)
		return -1;
	if (K > 0)
		return verify_all(md, st, ids, np, pre, K, lg);
	for (int i = pre; i < np; i++)
		if (model_forward(md, st, ids + i, 1, 0, lg + i * nv, NULL) != 0)
			return -1;
	return 0;
}

static int
run(const char *path, const char *out, const char *dev, int nt, int pre, int K, int say,
    const struct model_options *mo, const int32_t *ids, int np)
{
	char err[UTIL_ERRLEN];
	struct backend *be = backend_open(dev, nt, err);
	if (be != NULL && backend_gemm_env(be, getenv("MEMRA_CUDA_GEMM"), err) < 0)
		die(2, "MEMRA_CUDA_GEMM: %s", err);
	struct model *md = be ? model_open_opts(path, be, mo, err) : NULL;
	struct state *st = md ? model_state_new(md, np + 1, K, err) : NULL;
	size_t nv = md ? (size_t)model_hparams(md)->n_vocab : 0;
	float *lg = md ? malloc(np * nv * sizeof *lg) : NULL;
	FILE *fp = NULL;
	int rc = st && lg ? 0 : -1;

	if (rc != 0)
		warnmsg("%s", err);
	else if ((rc = forward_all(md, st, ids, np, pre < 0 ? np : pre, K, lg)) != 0)
		warnmsg("%s: %s", path, state_errmsg(st)[0] ? state_errmsg(st) : model_errmsg(md));
	else if ((fp = strcmp(out, "-") == 0 ? stdout : fopen(out, "wb")) == NULL)
		rc = -1, warnmsg("%s: cannot open", out);
	else if (fwrite(lg, sizeof *lg, np * nv, fp) != np * nv || fflush(fp) != 0)
		rc = -1, warnmsg("%s: write failed", out);
	if (fp && fp != stdout)
		fclose(fp);
	if (rc == 0 && say)
		fprintf(stderr, "steps at backend positions: %ld\n", model_steps_dpos(md));
	free(lg);
	state_free(st);
	model_close(md);
	backend_close(be);
	return rc ? 1 : 0;
}

int
main(int argc, char *argv[])
{
	const char *dev = "cpu";
	struct model_options mo = { 0 };
	int ch, nt = 0, pre = -1, np, K = 0, say = 0;	/* pre -1: all ids in one prefill */
	const char *hp = getenv("MEMRA_HOST_POS");
	int64_t v;
	int32_t *ids;

	prog = base_name(argv[0]);
	if (hp != NULL && strcmp(hp, "0") != 0 && strcmp(hp, "1") != 0)
		die(2, "MEMRA_HOST_POS: '%s': not 0 or 1", hp);
	mo.host_pos = hp != NULL && strcmp(hp, "1") == 0;
	while ((ch = getopt(argc, argv, "st:d:k:1p:v:")) != -1) {
		switch (ch) {
		case 't':
			if (util_parse_i64(optarg, 0, 1024, &v) != 0)
				die(2, "bad thread count '%s'", optarg);
			nt = (int)v;
			break;
		case 'd': dev = optarg; break;
		case 'k':
			if ((mo.kv_f16 = model_kv_type(optarg)) < 0)
				die(2, "bad KV cache type '%s'", optarg);
			break;
		case '1': pre = 0; break;
		case 's': say = 1; break;
		case 'v':
			if (util_parse_i64(optarg, 1, 64, &v) != 0)
				die(2, "bad verify rows '%s'", optarg);
			K = (int)v;
			break;
		case 'p':
			if (util_parse_i64(optarg, 1, INT32_MAX, &v) != 0)
				die(2, "bad prefill length '%s'", optarg);
			pre = (int)v;
			break;
		default: return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 3)
		die(2, "usage: model-logits [-s] [-t threads] [-d device] [-k f32|f16] [-1 | -p N] "
		    "[-v K] MODEL OUT ID...");
	np = argc - 2;
	if (pre > np)
		die(2, "prefill length %d exceeds the %d ids", pre, np);
	if ((ids = malloc(np * sizeof *ids)) == NULL)
		die(1, "out of memory");
	for (int i = 0; i < np; i++) {
		if (util_parse_i64(argv[2 + i], 0, INT32_MAX, &v) != 0)
			die(2, "bad token id '%s'", argv[2 + i]);
		ids[i] = (int32_t)v;
	}
	if (K > 0 && pre == 0)
		die(2, "-v takes a prefill (-p N or all ids), not -1");
	v = run(argv[0], argv[1], dev, nt, pre, K, say, &mo, ids, np);
	free(ids);
	return finish((int)v);
}
