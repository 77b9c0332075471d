/*
 * model-nextn: each NextN (MTP) block's logits over a token sequence, for
 * the tests that compare them with a reference.
 *   model-nextn [-t threads] MODEL[+DRAFT] OUT ID...
 * A +DRAFT suffix attaches a draft GGUF (its blocks draft), and
 * MEMRA_FRSPEC_TRIM trims the heads, as run-spec takes them: a trimmed
 * head's logits are its rows' (model_draft_vocab a row, in rank order).
 * Runs the n ids through the trunk (one prefill), then block 0 over slots
 * 0..n-2 (slot i: the trunk's hidden row i and id i+1), block b over
 * slots 0..n-2-b (block b-1's output rows and id i+1+b), each block in
 * one batch, and writes every block's logits, block 0 first, as float32
 * (host byte order) rows to OUT ('-' is stdout).
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

/* The trunk, then each block on the previous one's output rows; the logits to fp. */
static int
blocks(struct model *md, struct state *st, const int32_t *ids, int n, FILE *fp)
{
	const struct model_hparams *hp = model_hparams(md);
	size_t ne = hp->n_embd, nv = model_draft_vocab(md);
	float *h = malloc(n * ne * sizeof *h), *o = malloc(n * ne * sizeof *o);
	float *lg = malloc(n * nv * sizeof *lg);
	int rc = h && o && lg ? model_forward(md, st, ids, n, MODEL_PREFILL, NULL, h) : -1;

	for (int b = 0; rc == 0 && b < hp->n_mtp && n - 1 - b > 0; b++) {
		float *t;

		if ((rc = model_mtp(md, st, b, 0, h, ids + 1 + b, n - 1 - b, lg, o)) == 0 &&
		    fwrite(lg, sizeof *lg, (n - 1 - b) * nv, fp) != (n - 1 - b) * nv)
			rc = -1;
		t = h, h = o, o = t;
	}
	free(h), free(o), free(lg);
	return rc;
}

int
main(int argc, char *argv[])
{
	char err[UTIL_ERRLEN];
	struct backend *be;
	struct model *md;
	struct state *st;
	struct model_options mo = { 0 };
	int ch, nt = 0, n, rc;
	int32_t *ids;
	FILE *fp;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "t:")) != -1) {
		if (ch != 't')
			return 2;
		nt = atoi(optarg);
	}
	argc -= optind, argv += optind;
	if (argc < 4)
		die(2, "usage: model-nextn [-t threads] MODEL OUT ID...");
	n = argc - 2;
	if ((ids = malloc(n * sizeof *ids)) == NULL)
		die(1, "out of memory");
	for (int i = 0; i < n; i++)
		ids[i] = atoi(argv[2 + i]);
	model_options_set(&mo, argv[0], NULL, NULL, getenv("MEMRA_FRSPEC_TRIM"), NULL);
	if ((be = backend_open("cpu", nt, err)) == NULL ||
	    (md = model_open_opts(argv[0], be, &mo, err)) == NULL ||
	    (st = model_state_new(md, n + 1, 0, err)) == NULL)
		die(1, "%s", err);
	if ((fp = strcmp(argv[1], "-") == 0 ? stdout : fopen(argv[1], "wb")) == NULL)
		die(1, "%s: cannot open", argv[1]);
	rc = blocks(md, st, ids, n, fp);
	if (rc != 0)
		warnmsg("%s: %s", argv[0], model_errmsg(md));
	if (fclose(fp) != 0)
		rc = -1;
	free(ids);
	state_free(st);
	model_close(md);
	backend_close(be);
	return rc ? 1 : 0;
}
