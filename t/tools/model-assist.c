/*
 * model-assist: a gemma4 trunk's assistant drafter's steps after a prompt,
 * for the tests that compare them with transformers'.
 *   model-assist [-t threads] [-k steps] TRUNK DRAFT OUT ID...
 * Runs the ids through one prefill of TRUNK with the gemma4_assistant
 * DRAFT attached, takes the trunk's greedy token after them, then drafts
 * steps (4) tokens at the position after the prompt, each from the last
 * token and hidden state: writes each step's logits [steps][n_vocab]
 * float32 (host byte order) to OUT ('-' is stdout) and prints the
 * trunk's token, then each draft, on one line to stdout (stderr when
 * OUT is stdout).  Exit 0, 1 on a failure, 2 on misuse.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "state.h"
#include "util.h"

static int
drafts(struct model *md, struct state *st, const int32_t *ids, int np, int k, float *lg,
    int32_t *tok)
{
	const struct model_hparams *hp = model_hparams(md);
	float *h = malloc((size_t)np * hp->n_embd * sizeof *h);
	int rc = -1;

	if (h == NULL || model_forward_argmax(md, st, ids, np, MODEL_PREFILL, &tok[0], h) != 0)
		goto out;
	memmove(h, h + (size_t)(np - 1) * hp->n_embd, hp->n_embd * sizeof *h);
	for (int j = 0; j < k; j++)
		if (model_assist(md, st, np, h, tok[j], lg + (size_t)j * hp->n_vocab, &tok[j + 1],
		    h) != 0)
			goto out;
	rc = 0;
out:
	free(h);
	return rc;
}

int
main(int argc, char *argv[])
{
	struct model_options mo = { 0 };
	char err[UTIL_ERRLEN];
	int ch, nt = 0, k = 4, np;
	int64_t v;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "t:k:")) != -1) {
		switch (ch) {
		case 't': if (util_parse_i64(optarg, 1, 1024, &v) != 0) die(2, "bad -t"); nt = v; break;
		case 'k': if (util_parse_i64(optarg, 1, 64, &v) != 0) die(2, "bad -k"); k = v; break;
		default: die(2, "usage: model-assist [-t N] [-k steps] TRUNK DRAFT OUT ID...");
		}
	}
	argc -= optind, argv += optind;
	if (argc < 4)
		die(2, "usage: model-assist [-t N] [-k steps] TRUNK DRAFT OUT ID...");
	np = argc - 3;
	int32_t *ids = malloc(np * sizeof *ids), *tok = malloc((k + 1) * sizeof *tok);
	for (int i = 0; i < np; i++) {
		if (util_parse_i64(argv[3 + i], 0, INT32_MAX, &v) != 0)
			die(2, "bad id '%s'", argv[3 + i]);
		ids[i] = (int32_t)v;
	}
	mo.draft = argv[1];
	struct backend *be = backend_open("cpu", nt, err);
	struct model *md = be ? model_open_opts(argv[0], be, &mo, err) : NULL;
	if (md == NULL)
		die(1, "%s", err);
	struct state *st = model_state_new(md, np + 1, 0, err);
	size_t nv = model_hparams(md)->n_vocab;
	float *lg = malloc(k * nv * sizeof *lg);
	if (st == NULL)
		die(1, "%s", err);
	if (drafts(md, st, ids, np, k, lg, tok) != 0)
		die(1, "%s: %s", argv[0], model_errmsg(md));
	FILE *fp = strcmp(argv[2], "-") == 0 ? stdout : fopen(argv[2], "wb");
	if (fp == NULL || fwrite(lg, sizeof *lg, k * nv, fp) != k * nv || fflush(fp) != 0)
		die(1, "%s: write failed", argv[2]);
	for (int j = 0; j <= k; j++)
		fprintf(fp == stdout ? stderr : stdout, "%d%c", tok[j], j == k ? '\n' : ' ');
	if (fp != stdout)
		fclose(fp);
	free(lg), free(ids), free(tok);
	state_free(st);
	model_close(md);
	backend_close(be);
	return 0;
}
