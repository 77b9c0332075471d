/*
 * model-greedy: greedy ids from a model, for the tests.
 *   model-greedy [-t threads] [-d device] [-p] MODEL N ID...
 * Feeds the prompt ids one token at a time (-p: in one prefill forward),
 * then prints N greedy ids on one line.  Exit 0, 1 on a failure, 2 on
 * misuse.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "model.h"
#include "state.h"
#include "util.h"

static int
argmax(const float *x, int n)
{
	int b = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

static int
run(const char *path, const char *dev, int nt, int prefill, int n, int32_t *ids, int np)
{
	char err[UTIL_ERRLEN];
	struct backend *be = backend_open(dev, nt, err);
	if (be != NULL && backend_graph_env(be, getenv("MEMRA_CUDA_GRAPH"), err) < 0)
		die(2, "MEMRA_CUDA_GRAPH: %s", err);
	if (be != NULL && backend_pdl_env(be, getenv("MEMRA_CUDA_PDL"), err) < 0)
		die(2, "MEMRA_CUDA_PDL: %s", err);
	if (be != NULL && backend_gemm_env(be, getenv("MEMRA_CUDA_GEMM"), err) < 0)
		die(2, "MEMRA_CUDA_GEMM: %s", err);
	if (be != NULL && backend_qkt_env(be, getenv("MEMRA_CUDA_QKT"), err) < 0)
		die(2, "MEMRA_CUDA_QKT: %s", err);
	struct model *md = be ? model_open(path, be, err) : NULL;
	struct state *st = md ? model_state_new(md, np + n + 1, 0, err) : NULL;
	float *lg = md ? malloc(model_hparams(md)->n_vocab * sizeof *lg) : NULL;
	int rc = st && lg ? 0 : -1, nv = md ? model_hparams(md)->n_vocab : 0;

	if (rc != 0)
		warnmsg("%s", err);
	for (int i = 0; rc == 0 && i < np; i += prefill ? np : 1)
		if ((rc = model_forward(md, st, ids + i, prefill ? np : 1,
		    prefill ? MODEL_PREFILL : 0, lg, NULL)) != 0)
			warnmsg("%s: %s", path, model_errmsg(md));
	for (int i = 0; rc == 0 && i < n; i++) {
		int32_t t = argmax(lg, nv);

		printf("%s%d", i ? " " : "", t);
		if (i + 1 < n && (rc = model_forward(md, st, &t, 1, 0, lg, NULL)) != 0)
			warnmsg("%s: %s", path, model_errmsg(md));
	}
	if (rc == 0)
		printf("\n");
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
	int ch, nt = 0, prefill = 0, np;
	int64_t v, n;
	int32_t *ids;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "t:d:p")) != -1) {
		switch (ch) {
		case 't':
			if (util_parse_i64(optarg, 0, 1024, &v) != 0)
				die(2, "bad thread count '%s'", optarg);
			nt = (int)v;
			break;
		case 'd': dev = optarg; break;
		case 'p': prefill = 1; break;
		default: return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 3 || util_parse_i64(argv[1], 1, 100000, &n) != 0)
		die(2, "usage: model-greedy [-t threads] [-d device] [-p] MODEL N ID...");
	np = argc - 2;
	if ((ids = malloc(np * sizeof *ids)) == NULL)
		die(1, "out of memory");
	for (int i = 0; i < np; i++) {
		if (util_parse_i64(argv[2 + i], 0, INT32_MAX, &v) != 0)
			die(2, "bad token id '%s'", argv[2 + i]);
		ids[i] = (int32_t)v;
	}
	v = run(argv[0], dev, nt, prefill, (int)n, ids, np);
	free(ids);
	return finish((int)v);
}
