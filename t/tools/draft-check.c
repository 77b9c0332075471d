/*
 * draft-check: the external-draft attach check on real files, for the tests.
 *   draft-check TRUNK DRAFT
 * Opens TRUNK as a model (CPU), DRAFT as a GGUF, runs ranks_from_draft with
 * the trunk's geometry and prints "draft fits: blk.N, head_vocab=N".  Exit 0,
 * 1 when the draft does not fit (the reason on stderr), 2 on misuse.
 */
#include <stdio.h>

#include "backend.h"
#include "gguf.h"
#include "model.h"
#include "ranks.h"
#include "util.h"

int
main(int argc, char *argv[])
{
	char err[UTIL_ERRLEN];
	struct backend *be;
	struct model *md = NULL;
	struct gguf *g = NULL;
	struct ranks *r = NULL;
	const struct model_hparams *hp;

	prog = base_name(argv[0]);
	if (argc != 3)
		die(2, "usage: draft-check TRUNK DRAFT");
	if ((be = backend_open("cpu", 1, err)) == NULL || (md = model_open(argv[1], be, err)) == NULL ||
	    (g = gguf_open(argv[2], err)) == NULL)
		die(1, "%s", err);
	hp = model_hparams(md);
	r = ranks_from_draft(g, hp->arch == MODEL_ARCH_QWEN35 ? "qwen35" :
	    hp->arch == MODEL_ARCH_QWEN35MOE ? "qwen35moe" : "llama", hp->n_embd,
	    hp->n_vocab, hp->n_layer, err);
	if (r != NULL)
		printf("draft fits: blk.%d, head_vocab=%lld\n", hp->n_layer, (long long)r->n);
	else
		warnmsg("%s: %s", argv[2], err);
	ranks_free(r);
	gguf_close(g);
	model_close(md);
	backend_close(be);
	return finish(r != NULL ? 0 : 1);
}
