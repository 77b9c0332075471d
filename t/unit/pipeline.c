/*
 * pipeline: the split of layers by bytes, the stage devices, the pipe
 * link, and a split model against the whole one: at every cut point (and
 * three stages) the prefill's, each decode step's, a batch of sequences'
 * (model_forward_seqs, verify and rollback) and the MTP head's logits,
 * hidden rows and greedy picks bit for bit, on the tiny fixtures of
 * t/data/tiny and on model A (skipped when it is not there).
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "pipeline.h"
#include "state.h"
#include "test.h"
#include "util.h"

enum { NCTX = 64, NSNAP = 4, NPROMPT = 11, NDEC = 4, NSEQ = 3 };

static struct backend *be[3];

TEST(the_split_balances_bytes_with_the_ends_on_their_stages)
{
	uint64_t w[8] = { 10, 10, 10, 10, 10, 10, 10, 10 }, big[4] = { 1, 1, 1, 100 };
	int first[3];
	char err[UTIL_ERRLEN];

	CHECK(pipeline_split(w, 8, 0, 0, 2, first, err) == 0);
	CHECK_EQ_INT(first[0], 4);
	CHECK(pipeline_split(w, 8, 20, 0, 2, first, err) == 0);	/* the embedding: stage 0 */
	CHECK_EQ_INT(first[0], 3);
	CHECK(pipeline_split(w, 8, 0, 20, 2, first, err) == 0);	/* the head: the last */
	CHECK_EQ_INT(first[0], 5);
	CHECK(pipeline_split(w, 8, 30, 0, 2, first, err) == 0);	/* 50 | 60 or 60 | 50 */
	CHECK_EQ_INT(first[0], 2);				/* ties: the earlier cut */
	CHECK(pipeline_split(w, 8, 0, 0, 3, first, err) == 0);
	CHECK(first[0] == 2 && first[1] == 5);
	CHECK(pipeline_split(big, 4, 0, 0, 2, first, err) == 0);
	CHECK_EQ_INT(first[0], 3);
	CHECK(pipeline_split(big, 4, 0, 0, 4, first, err) == 0);	/* a layer a stage */
	CHECK(first[0] == 1 && first[1] == 2 && first[2] == 3);
	CHECK(pipeline_split(w, 8, 0, 0, 9, first, err) == -1);
	CHECK(strstr(err, "9 stages for 8 layers") != NULL);
	CHECK(pipeline_split(w, 8, 0, 0, 1, first, err) == -1);
}

TEST(splits_and_devices_parse_and_refuse)
{
	char dev[4][PIPELINE_DEVLEN], err[UTIL_ERRLEN], tag[40];
	int first[3];

	CHECK(pipeline_parse_splits("3", 2, 8, first, err) == 0 && first[0] == 3);
	CHECK(pipeline_parse_splits("2,5", 3, 8, first, err) == 0 && first[1] == 5);
	CHECK(pipeline_parse_splits("5,2", 3, 8, first, err) == -1);
	CHECK(pipeline_parse_splits("0", 2, 8, first, err) == -1);
	CHECK(pipeline_parse_splits("8", 2, 8, first, err) == -1);
	CHECK(pipeline_parse_splits("3,", 2, 8, first, err) == -1);
	CHECK(pipeline_parse_splits("3", 3, 8, first, err) == -1);
	CHECK(pipeline_devices("0,1", 2, "cpu", dev, err) == 0);
	CHECK_EQ_STR(dev[0], "cuda:0");
	CHECK_EQ_STR(dev[1], "cuda:1");
	CHECK_EQ_STR(pipeline_dev_tag(dev[1], tag, sizeof tag), "dev1");
	CHECK(pipeline_devices("cpu,cpu:scalar", 2, "cpu", dev, err) == 0);
	CHECK_EQ_STR(dev[1], "cpu:scalar");
	CHECK_EQ_STR(pipeline_dev_tag(dev[0], tag, sizeof tag), "cpu");
	CHECK(pipeline_devices(NULL, 3, "cuda", dev, err) == 0);
	CHECK_EQ_STR(dev[2], "cuda:2");
	CHECK(pipeline_devices(NULL, 2, "cpu", dev, err) == 0);
	CHECK_EQ_STR(dev[1], "cpu");
	CHECK(pipeline_devices("0", 2, "cpu", dev, err) == -1);	/* one device, two stages */
	CHECK(strstr(err, "1 for 2 stages") != NULL);
	CHECK(pipeline_devices("0,1,2", 2, "cpu", dev, err) == -1);
	CHECK(pipeline_devices("0,gpu", 2, "cpu", dev, err) == -1);
	CHECK(pipeline_devices("0,,1", 3, "cpu", dev, err) == -1);
}

TEST(the_pipe_link_carries_the_floats_unchanged)
{
	char dev[2][PIPELINE_DEVLEN] = { "cpu", "cpu" }, err[UTIL_ERRLEN];
	struct pipeline_link *l = pipeline_link_open(be, dev, 2, err);
	size_t n = 300000;	/* past a pipe's buffer: the link pumps it through */
	float *src = backend_alloc(be[0], n), *dst = backend_alloc(be[1], n);

	CHECK(l != NULL && src != NULL && dst != NULL);
	if (l == NULL || src == NULL || dst == NULL)
		return;
	CHECK_EQ_STR(pipeline_link_kind(l), "pipe");
	for (size_t i = 0; i < n; i++)
		src[i] = (float)i * 0.37f - 1e5f;
	CHECK(pipeline_pass(l, 0, src, dst, n) == 0);
	CHECK(memcmp(src, dst, n * sizeof *src) == 0);
	CHECK(pipeline_pass(l, 1, src, dst, n) == -1);	/* no stage 2 */
	backend_mfree(be[0], src), backend_mfree(be[1], dst);
	pipeline_link_close(l);
	pipeline_link_close(NULL);
}

/* One of the two: the whole model (0) or the split one (1), with its sequences. */
struct run {
	struct model *md;
	struct state *st[NSEQ];
	float	*lg, *h;	/* [NCTX][n_vocab], [NCTX][n_embd] */
	int32_t	ids[NCTX];
};

static int
run_open(struct run *r, const char *dir, const struct model_split *sp, char *err)
{
	struct model_options mo = { .split = sp };

	memset(r, 0, sizeof *r);
	if ((r->md = model_open_opts(dir, be[0], &mo, err)) == NULL)
		return -1;
	for (int i = 0; i < NSEQ; i++)
		if ((r->st[i] = model_state_new(r->md, NCTX, NSNAP, err)) == NULL)
			return -1;
	r->lg = calloc((size_t)NCTX * model_hparams(r->md)->n_vocab, sizeof *r->lg);
	r->h = calloc((size_t)NCTX * model_hparams(r->md)->n_embd, sizeof *r->h);
	return r->lg && r->h ? 0 : util_err(err, "out of memory");
}

static void
run_close(struct run *r)
{
	for (int i = 0; i < NSEQ; i++)
		state_free(r->st[i]);
	free(r->lg), free(r->h);
	model_close(r->md);
}

/* Step `step` of the script on r: 0 prefill, 1..NDEC decode, then seqs, rollback, mtp. */
static int
run_step(struct run *r, int step, size_t *nl, size_t *nh)
{
	const struct model_hparams *hp = model_hparams(r->md);
	int32_t tok[NPROMPT + 8];
	int rows[NSEQ] = { 1, 3, 2 };

	for (int j = 0; j < NPROMPT + 8; j++)
		tok[j] = (int32_t)((j * 37 + step * 11 + 5) % hp->n_vocab);
	*nl = hp->n_vocab, *nh = hp->n_embd;
	if (step == 0) {	/* a prompt into every sequence */
		*nl *= NPROMPT, *nh *= NPROMPT;
		for (int i = 1; i < NSEQ; i++)
			if (model_forward(r->md, r->st[i], tok + i, NPROMPT - i, MODEL_PREFILL, NULL,
			    NULL) != 0)
				return -1;
		return model_forward(r->md, r->st[0], tok, NPROMPT,
		    MODEL_PREFILL | MODEL_LOGITS_ALL, r->lg, r->h);
	}
	if (step <= NDEC)
		return model_forward(r->md, r->st[0], tok, 1, 0, r->lg, r->h) ||
		    model_forward_argmax(r->md, r->st[1], tok + 1, 1, 0, r->ids, NULL);
	if (step == NDEC + 1) {	/* a verify of 6 rows over 3 sequences, rolled back */
		*nl *= 6, *nh *= 6;
		return model_forward_seqs(r->md, r->st, rows, NSEQ, tok, MODEL_VERIFY, r->lg, NULL,
		    r->h) || state_rollback(r->st[1], 2) || state_rollback(r->st[2], 1) ||
		    model_forward_seqs(r->md, r->st, rows, NSEQ, tok, 0, NULL, r->ids, NULL);
	}
	if (hp->n_mtp == 0)
		return model_forward_batch(r->md, r->st, tok, NSEQ, r->lg, r->h);
	*nl = (size_t)model_draft_vocab(r->md) * 2;
	return model_mtp(r->md, r->st[0], 0, 0, r->h, tok, 2, r->lg, r->h + hp->n_embd * 2);
}

/* Every step of dir split as sp bit-identical to the whole model's. */
static void
split_equals_whole(const char *dir, const struct model_split *sp, const char *what)
{
	struct run w, s;
	char err[UTIL_ERRLEN];

	if (run_open(&w, dir, NULL, err) != 0 || run_open(&s, dir, sp, err) != 0) {
		FAILF("%s %s: %s", dir, what, err);
		run_close(&w);
		return;
	}
	CHECK_EQ_INT(model_stages(s.md), sp->n);
	for (int step = 0; step <= NDEC + 2; step++) {
		size_t nl, nh;

		if (run_step(&w, step, &nl, &nh) != 0 || run_step(&s, step, &nl, &nh) != 0) {
			FAILF("%s %s step %d: %s / %s", dir, what, step, model_errmsg(w.md),
			    model_errmsg(s.md));
			break;
		}
		if (memcmp(w.lg, s.lg, nl * sizeof *w.lg) != 0 ||
		    memcmp(w.h, s.h, nh * sizeof *w.h) != 0 ||
		    memcmp(w.ids, s.ids, sizeof w.ids) != 0)
			FAILF("%s %s step %d: the split's floats differ", dir, what, step);
		for (int i = 0; i < NSEQ; i++)
			CHECK_EQ_INT(state_pos(s.st[i]), state_pos(w.st[i]));
	}
	run_close(&w);
	run_close(&s);
}

/* dir split in two at every cut point, in three, and by bytes. */
static void
every_cut(const char *dir, int n_layer)
{
	char dev[3][PIPELINE_DEVLEN] = { "cpu", "cpu", "cpu" }, what[64];
	struct model_split sp = { 2, be, dev, NULL };
	int first[2];

	for (int c = 1; c < n_layer; c++) {
		first[0] = c, sp.first = first;
		snprintf(what, sizeof what, "cut at %d", c);
		split_equals_whole(dir, &sp, what);
	}
	if (n_layer >= 3) {
		sp.n = 3, first[0] = 1, first[1] = n_layer - 1;
		split_equals_whole(dir, &sp, "three stages");
	}
	sp.n = 2, sp.first = NULL;
	split_equals_whole(dir, &sp, "by bytes");
}

TEST(a_split_llama_equals_the_whole_one_at_every_cut)
{
	every_cut("t/data/tiny/llama-tiny", 2);
}

TEST(a_split_qwen35_equals_the_whole_one_at_every_cut)
{
	every_cut("t/data/tiny/q35-r2", 4);
	every_cut("t/data/tiny/q35-r1-tied", 4);
}

TEST(a_split_model_a_equals_the_whole_one_at_every_cut)
{
	const char *a = test_model_a("a_split_model_a_equals_the_whole_one_at_every_cut");

	if (a != NULL)
		every_cut(a, 8);
}

TEST(the_boot_lines_name_each_stage)
{
	char dev[2][PIPELINE_DEVLEN] = { "cpu", "cpu" }, err[UTIL_ERRLEN], line[256];
	int first[1] = { 3 };
	struct model_split sp = { 2, be, dev, first };
	struct model_options mo = { .split = &sp };
	struct model *md = model_open_opts("t/data/tiny/q35-r2", be[0], &mo, err);

	CHECK(md != NULL);
	if (md == NULL)
		return;
	CHECK(model_pp_line(md, 0, line, sizeof line) == 0);
	CHECK_EQ_STR(line, "[pp] cross-device transport: stage0=cpu stage1=cpu");
	CHECK(model_pp_line(md, 1, line, sizeof line) == 0);
	CHECK(strncmp(line, "[pp] link: pipe", 15) == 0);
	CHECK(model_pp_line(md, 2, line, sizeof line) == 0);
	CHECK(strstr(line, "[pp] stage0: cpu (") == line && strstr(line, "layers 0-2 + embedding,"));
	CHECK(model_pp_line(md, 3, line, sizeof line) == 0);
	CHECK(strstr(line, "layers 3-3 + head") != NULL);
	CHECK(model_pp_line(md, 4, line, sizeof line) == -1);
	model_close(md);
	sp.be = (struct backend *[]){ be[1], be[0] };
	CHECK(model_open_opts("t/data/tiny/q35-r2", be[0], &mo, err) == NULL);	/* not be[0] */
	sp.be = be, first[0] = 4;
	CHECK(model_open_opts("t/data/tiny/q35-r2", be[0], &mo, err) == NULL);	/* no layers */
	CHECK(strstr(err, "stage 1") != NULL);
}

int
main(void)
{
	char err[UTIL_ERRLEN];

	for (int i = 0; i < 3; i++)
		if ((be[i] = backend_open("cpu", 2, err)) == NULL) {
			fprintf(stderr, "pipeline: %s\n", err);
			return 1;
		}
	RUN(the_split_balances_bytes_with_the_ends_on_their_stages);
	RUN(splits_and_devices_parse_and_refuse);
	RUN(the_pipe_link_carries_the_floats_unchanged);
	RUN(a_split_llama_equals_the_whole_one_at_every_cut);
	RUN(a_split_qwen35_equals_the_whole_one_at_every_cut);
	RUN(a_split_model_a_equals_the_whole_one_at_every_cut);
	RUN(the_boot_lines_name_each_stage);
	for (int i = 0; i < 3; i++)
		backend_close(be[i]);
	return test_summary();
}
