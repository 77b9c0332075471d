/*
 * model-batch: model_forward_batch against model_forward, for the tests.
 *   model-batch [-t threads] [-d device] [-b slots] MODEL SEQ...
 * SEQ is NGEN:ID,ID,...: a prompt and how many tokens to decode greedily
 * after it.  Every sequence is first decoded alone (prefill, then one
 * model_forward per token), then all of them again through slots
 * sequences decoded together by model_forward_batch (a slot takes the
 * next sequence as soon as its own ends).  Prints
 * "identical: S sequences, T decode steps, B at most together" when
 * every decode step's logits and ids are bit-identical, else the first
 * difference; on stderr "groups: G groups of at most R rows (a step holds
 * L here)", model_seqs_stats' count of the batched forwards' row groups
 * and the model's step rows.  Exit 0 identical, 1 different or failed, 2
 * misuse.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "state.h"
#include "util.h"

struct seq {
	int32_t	*ids;		/* [np] */
	int	np, ngen;
	float	*lg;		/* [ngen][n_vocab] alone */
	int32_t	*out;		/* [ngen] alone */
};

static int32_t
argmax(const float *x, int n)
{
	int32_t b = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

static int
parse_seq(struct seq *s, char *arg)
{
	char *colon = strchr(arg, ':'), *p, *save = NULL;
	int64_t v;

	if (colon == NULL)
		return -1;
	*colon = '\0';
	if (util_parse_i64(arg, 1, 4096, &v) != 0)
		return -1;
	s->ngen = (int)v;
	if ((s->ids = malloc(strlen(colon + 1) * sizeof *s->ids + sizeof *s->ids)) == NULL)
		return -1;
	for (p = strtok_r(colon + 1, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (util_parse_i64(p, 0, INT32_MAX, &v) != 0)
			return -1;
		s->ids[s->np++] = (int32_t)v;
	}
	return s->np > 0 ? 0 : -1;
}

/* Decode s alone: its logits after the prompt and after each token. */
static int
alone(struct model *md, struct state *st, struct seq *s, int nv, float *lg)
{
	if (state_reset(st) || model_forward(md, st, s->ids, s->np, MODEL_PREFILL, lg, NULL))
		return -1;
	for (int i = 0; i < s->ngen; i++) {
		memcpy(s->lg + (size_t)i * nv, lg, (size_t)nv * sizeof *lg);
		s->out[i] = argmax(lg, nv);
		if (i + 1 < s->ngen && model_forward(md, st, &s->out[i], 1, 0, lg, NULL))
			return -1;
	}
	return 0;
}

/*
 * Decode all ns sequences again, at most nb together: slot j holds
 * sequence cur[j] at step step[j], its next logits in row j of lg
 * ([nb][nv]); blg ([nb][nv]) takes the batch's rows.  Returns the steps
 * compared, -2 on a difference (printed), or -1 (the reason in md).
 */
static long
together(struct model *md, struct state **st, struct seq *s, int ns, int nb, int nv,
    float *lg, float *blg, int *most)
{
	int cur[nb], step[nb], rows[nb], next = 0, n;
	struct state *bst[nb];
	int32_t tok[nb];
	long steps = 0;

	for (int j = 0; j < nb; j++)
		cur[j] = -1;
	for (;;) {
		for (int j = 0; j < nb; j++)	/* refill: a new sequence is prefilled alone */
			if (cur[j] < 0 && next < ns) {
				cur[j] = next++, step[j] = 0;
				if (state_reset(st[j]) || model_forward(md, st[j], s[cur[j]].ids,
				    s[cur[j]].np, MODEL_PREFILL, lg + (size_t)j * nv, NULL))
					return -1;
			}
		n = 0;
		for (int j = 0; j < nb; j++) {	/* compare this step; the unfinished go on */
			struct seq *q;

			if (cur[j] < 0)
				continue;
			q = &s[cur[j]];
			if (memcmp(lg + (size_t)j * nv, q->lg + (size_t)step[j] * nv,
			    (size_t)nv * sizeof *lg) != 0 || argmax(lg + (size_t)j * nv, nv) !=
			    q->out[step[j]]) {
				printf("different: sequence %d step %d\n", cur[j] + 1, step[j]);
				return -2;
			}
			steps++;
			if (++step[j] == q->ngen) {
				cur[j] = -1;
				continue;
			}
			bst[n] = st[j], rows[n] = j, tok[n++] = q->out[step[j] - 1];
		}
		if (n == 0 && next == ns)
			return steps;
		if (n == 0)
			continue;
		*most = n > *most ? n : *most;
		if (model_forward_batch(md, bst, tok, n, blg, NULL) != 0)
			return -1;
		for (int r = 0; r < n; r++)
			memcpy(lg + (size_t)rows[r] * nv, blg + (size_t)r * nv, (size_t)nv * sizeof *lg);
	}
}

static int
run(const char *path, const char *dev, int nt, int nb, struct seq *s, int ns)
{
	char err[UTIL_ERRLEN];
	struct backend *be = backend_open(dev, nt, err);
	if (be != NULL && backend_graph_env(be, getenv("MEMRA_CUDA_GRAPH"), err) < 0)
		die(2, "MEMRA_CUDA_GRAPH: %s", err);
	if (be != NULL && backend_pdl_env(be, getenv("MEMRA_CUDA_PDL"), err) < 0)
		die(2, "MEMRA_CUDA_PDL: %s", err);
	if (be != NULL && backend_gemm_env(be, getenv("MEMRA_CUDA_GEMM"), err) < 0)
		die(2, "MEMRA_CUDA_GEMM: %s", err);
	struct model *md = be ? model_open(path, be, err) : NULL;
	struct state *st[nb];
	size_t nv = md ? (size_t)model_hparams(md)->n_vocab : 0;
	float *lg = md ? malloc(2 * nb * nv * sizeof *lg) : NULL;
	int rc = lg ? 0 : -1, nctx = 1, most = 0;
	long steps = 0;

	if (rc != 0)
		warnmsg("%s", md ? "out of memory" : err);
	for (int i = 0; i < ns; i++)
		nctx = s[i].np + s[i].ngen > nctx ? s[i].np + s[i].ngen : nctx;
	for (int j = 0; j < nb; j++)
		st[j] = NULL;
	for (int j = 0; rc == 0 && j < nb; j++)
		if ((st[j] = model_state_new(md, nctx, 0, err)) == NULL)
			rc = -1, warnmsg("%s", err);
	for (int i = 0; rc == 0 && i < ns; i++) {
		s[i].lg = malloc((size_t)s[i].ngen * nv * sizeof *lg);
		s[i].out = malloc((size_t)s[i].ngen * sizeof *s[i].out);
		if (s[i].lg == NULL || s[i].out == NULL)
			rc = -1, warnmsg("out of memory");
		else if (alone(md, st[0], &s[i], (int)nv, lg) != 0)
			rc = -1, warnmsg("%s: %s", path, model_errmsg(md));
	}
	if (rc == 0 && (steps = together(md, st, s, ns, nb, (int)nv, lg, lg + nb * nv,
	    &most)) < 0)
		rc = -1;
	if (steps == -1)
		warnmsg("%s: %s", path, model_errmsg(md));
	if (rc == 0) {
		struct model_seqs_stats qs;

		model_seqs_stats(md, &qs);
		printf("identical: %d sequences, %ld decode steps, %d at most together\n", ns, steps,
		    most);
		fprintf(stderr, "groups: %ld groups of at most %d rows (a step holds %d here)\n",
		    qs.groups, qs.most, model_step_rows(md));
	}
	for (int i = 0; i < ns; i++)
		free(s[i].lg), free(s[i].out);
	for (int j = 0; j < nb; j++)
		state_free(st[j]);
	free(lg);
	model_close(md);
	backend_close(be);
	return rc ? 1 : 0;
}

int
main(int argc, char *argv[])
{
	const char *dev = "cpu";
	int ch, nt = 0, nb = 4, ns, rc;
	int64_t v;
	struct seq *s;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "t:d:b:")) != -1) {
		switch (ch) {
		case 't':
			if (util_parse_i64(optarg, 0, 1024, &v) != 0)
				die(2, "bad thread count '%s'", optarg);
			nt = (int)v;
			break;
		case 'b':
			if (util_parse_i64(optarg, 1, 64, &v) != 0)
				die(2, "bad slot count '%s'", optarg);
			nb = (int)v;
			break;
		case 'd': dev = optarg; break;
		default: return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 2)
		die(2, "usage: model-batch [-t threads] [-d device] [-b slots] MODEL NGEN:ID,ID... ...");
	ns = argc - 1;
	if ((s = calloc(ns, sizeof *s)) == NULL)
		die(1, "out of memory");
	for (int i = 0; i < ns; i++)
		if (parse_seq(&s[i], argv[1 + i]) != 0)
			die(2, "bad sequence '%s' (NGEN:ID,ID,...)", argv[1 + i]);
	rc = run(argv[0], dev, nt, nb, s, ns);
	for (int i = 0; i < ns; i++)
		free(s[i].ids);
	free(s);
	return finish(rc);
}
