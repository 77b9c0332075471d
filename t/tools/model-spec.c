/*
 * model-spec: speculative greedy decoding with the MTP head against plain
 * greedy decoding, on any backend (the run-spec self-consistency gate
 * until run-spec lands).
 *   model-spec [-d device] [-g refdev] [-K kmax] [-n new] MODEL CASES
 * CASES: lines of prompt ids (the first tab-separated field; see
 * t/data/a-greedy.tsv).  For every prompt: plain greedy after a prefill,
 * then K = 1..kmax speculative runs (chained MTP drafts, one verify
 * forward of K+1 rows, rollback to the accepted prefix).  Prints one line
 * per K (prompts equal to greedy, drafted, accepted, rounds) and ends
 * "SELF-CONSISTENCY PASS" or "SELF-CONSISTENCY FAIL" (exit 1).
 * -g REFDEV: first compare plain greedy with REFDEV's (e.g. cpu): equal,
 * or differing first at a step whose top-2 margin on REFDEV is < 1e-3 (a
 * logged near-tie); "GREEDY ... PASS" or "FAIL" (exit 1).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "state.h"
#include "util.h"

enum { MAXNEW = 512, MAXK = 16 };

struct spec {
	struct model *md;
	int	nv, ne;
	long	accepted, drafted, rounds;
	int32_t	out[MAXNEW];
	float	margin[MAXNEW];	/* plain greedy: top-1 - top-2 of step i */
};

static int
argmax(const float *x, int n)
{
	int b = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

static float
margin(const float *x, int n, int b)
{
	float s = -1e30f;

	for (int i = 0; i < n; i++)
		if (i != b && x[i] > s)
			s = x[i];
	return x[b] - s;
}

/* K = 0: plain greedy; else speculative with up to K drafts a round. */
static int
decode(struct spec *s, const int32_t *prompt, int n, int n_new, int K)
{
	struct model *md = s->md;
	int nv = s->nv, ne = s->ne, gen = 0, mtp_len = n, last, rc = 0;
	size_t rows = (size_t)n + K + 1;
	char err[UTIL_ERRLEN];
	struct state *st = model_state_new(md, n + n_new + K + 2, K + 1, err);
	float *h = malloc(rows * ne * 4), *hout = malloc(rows * ne * 4);
	float *lg = malloc(rows * nv * 4), *hlast = malloc(ne * 4);
	int32_t *tk = malloc(rows * sizeof *tk), d[MAXK];

	if (st == NULL || !h || !hout || !lg || !hlast || !tk)
		die(1, "spec: %s", st ? "out of memory" : err);
	rc |= model_forward(md, st, prompt, n, MODEL_PREFILL, lg, K ? h : NULL);
	s->out[gen] = argmax(lg, nv);
	s->margin[gen] = margin(lg, nv, s->out[gen]);
	gen++;
	if (K > 0) {
		memcpy(tk, prompt + 1, (n - 1) * sizeof *tk);
		tk[n - 1] = s->out[0];
		rc |= model_mtp(md, st, 0, 0, h, tk, n, lg, hout);
	}
	last = n - 1;
	while (rc == 0 && gen < n_new) {
		int k = n_new - gen - 1 < K ? n_new - gen - 1 : K, acc = 0;

		if (k == 0) {
			rc |= model_forward(md, st, &s->out[gen - 1], 1, 0, lg, NULL);
			s->out[gen] = argmax(lg, nv);
			s->margin[gen] = margin(lg, nv, s->out[gen]);
			gen++;
			continue;
		}
		d[0] = argmax(lg + (size_t)last * nv, nv);
		memcpy(hlast, hout + (size_t)last * ne, ne * 4);
		for (int j = 1; j < k; j++) {
			rc |= model_mtp(md, st, 0, mtp_len + j - 1, hlast, &d[j - 1], 1, lg, hlast);
			d[j] = argmax(lg, nv);
		}
		tk[0] = s->out[gen - 1];
		memcpy(tk + 1, d, k * sizeof *tk);
		rc |= model_forward(md, st, tk, k + 1, MODEL_LOGITS_ALL | MODEL_VERIFY, lg, h);
		while (acc < k && d[acc] == argmax(lg + (size_t)acc * nv, nv))
			acc++;
		memcpy(s->out + gen, d, acc * sizeof *d);
		gen += acc;
		s->out[gen++] = argmax(lg + (size_t)acc * nv, nv);
		rc |= state_rollback(st, acc + 1);
		s->accepted += acc;
		s->drafted += k;
		s->rounds++;
		memcpy(tk, s->out + gen - acc - 1, (acc + 1) * sizeof *tk);
		rc |= model_mtp(md, st, 0, mtp_len, h, tk, acc + 1, lg, hout);
		mtp_len += acc + 1;
		last = acc;
	}
	if (rc != 0)
		warnmsg("%s", model_errmsg(md));
	state_free(st);
	free(h), free(hout), free(lg), free(hlast), free(tk);
	return rc;
}

static int32_t *
parse_ids(char *line, int *n)
{
	int32_t *ids = NULL;
	int cap = 0;
	char *tab = strchr(line, '\t'), *p = line, *end;

	if (tab != NULL)
		*tab = '\0';
	*n = 0;
	for (;;) {
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (*n == cap) {
			cap = cap ? 2 * cap : 256;
			if ((ids = realloc(ids, cap * sizeof *ids)) == NULL)
				die(1, "out of memory");
		}
		ids[(*n)++] = (int32_t)v;
		p = end;
	}
	return ids;
}

int
main(int argc, char *argv[])
{
	const char *dev = "cpu", *gdev = NULL;
	char err[UTIL_ERRLEN], line[65536];
	int ch, kmax = 8, n_new = 64, np = 0, fail = 0;
	int64_t v;
	int32_t greedy[MAXNEW];
	FILE *f;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "d:g:K:n:")) != -1) {
		switch (ch) {
		case 'd': dev = optarg; break;
		case 'g': gdev = optarg; break;
		case 'K':
			if (util_parse_i64(optarg, 1, MAXK - 1, &v) != 0)
				die(2, "bad K '%s'", optarg);
			kmax = (int)v;
			break;
		case 'n':
			if (util_parse_i64(optarg, 2, MAXNEW, &v) != 0)
				die(2, "bad count '%s'", optarg);
			n_new = (int)v;
			break;
		default: return 2;
		}
	}
	if (argc - optind != 2)
		die(2, "usage: model-spec [-d device] [-g refdev] [-K kmax] [-n new] MODEL CASES");
	struct backend *be = backend_open(dev, 0, err);
	if (be != NULL && backend_graph_env(be, getenv("MEMRA_CUDA_GRAPH"), err) < 0)
		die(2, "MEMRA_CUDA_GRAPH: %s", err);
	if (be != NULL && backend_pdl_env(be, getenv("MEMRA_CUDA_PDL"), err) < 0)
		die(2, "MEMRA_CUDA_PDL: %s", err);
	if (be != NULL && backend_gemm_env(be, getenv("MEMRA_CUDA_GEMM"), err) < 0)
		die(2, "MEMRA_CUDA_GEMM: %s", err);
	struct backend *gbe = NULL;
	struct spec s = { 0 }, g = { 0 };
	if (be == NULL || (s.md = model_open(argv[optind], be, err)) == NULL)
		die(1, "%s", err);
	if (gdev != NULL && ((gbe = backend_open(gdev, 0, err)) == NULL ||
	    (g.md = model_open(argv[optind], gbe, err)) == NULL))
		die(1, "%s", err);
	g.nv = s.nv = model_hparams(s.md)->n_vocab;
	g.ne = model_hparams(s.md)->n_embd;
	int gsame = 0, gtie = 0, gfail = 0;
	s.nv = model_hparams(s.md)->n_vocab;
	s.ne = model_hparams(s.md)->n_embd;
	if (model_hparams(s.md)->n_mtp < 1)
		die(1, "%s: no MTP layer", argv[optind]);
	if ((f = fopen(argv[optind + 1], "r")) == NULL)
		die(1, "%s: cannot open", argv[optind + 1]);
	int same[MAXK] = { 0 };
	long acc[MAXK] = { 0 }, dr[MAXK] = { 0 }, rd[MAXK] = { 0 };
	while (fgets(line, sizeof line, f) != NULL) {
		int n;
		int32_t *ids = parse_ids(line, &n);

		if (n == 0)
			continue;
		if (decode(&s, ids, n, n_new, 0) != 0)
			die(1, "greedy failed");
		memcpy(greedy, s.out, n_new * sizeof *greedy);
		if (gbe != NULL) {
			int i = 0;
			if (decode(&g, ids, n, n_new, 0) != 0)
				die(1, "greedy on %s failed", gdev);
			while (i < n_new && g.out[i] == s.out[i])
				i++;
			if (i == n_new)
				gsame++;
			else if (g.margin[i] < 1e-3f) {
				gtie++;
				printf("prompt %d: near-tie at step %d (%s margin %.3g): %d vs %d\n", np,
				    i, gdev, g.margin[i], s.out[i], g.out[i]);
			} else {
				gfail++;
				printf("prompt %d: differs at step %d (%s margin %.3g): %d vs %d\n", np,
				    i, gdev, g.margin[i], s.out[i], g.out[i]);
			}
		}
		for (int K = 1; K <= kmax; K++) {
			s.accepted = s.drafted = s.rounds = 0;
			if (decode(&s, ids, n, n_new, K) != 0)
				die(1, "K=%d failed", K);
			same[K] += memcmp(greedy, s.out, n_new * sizeof *greedy) == 0;
			acc[K] += s.accepted, dr[K] += s.drafted, rd[K] += s.rounds;
		}
		np++;
		free(ids);
	}
	fclose(f);
	printf("model-spec %s on %s: %d prompts x %d new ids\n", argv[optind], backend_name(be),
	    np, n_new);
	for (int K = 1; K <= kmax; K++) {
		printf("K=%d equal-greedy %d/%d drafted %ld accepted %ld rounds %ld rate %.3f\n",
		    K, same[K], np, dr[K], acc[K], rd[K], dr[K] ? (double)acc[K] / dr[K] : 0.0);
		fail |= same[K] != np;
	}
	printf("SELF-CONSISTENCY %s\n", fail ? "FAIL" : "PASS");
	if (gbe != NULL) {
		printf("GREEDY %s = %s: %d equal, %d near-ties, %d differ: %s\n", backend_name(be),
		    backend_name(gbe), gsame, gtie, gfail, gfail ? "FAIL" : "PASS");
		fail |= gfail != 0;
		model_close(g.md);
		backend_close(gbe);
	}
	model_close(s.md);
	backend_close(be);
	return finish(fail);
}
