/*
 * pipeline: the split of layers by bytes, the stage devices, the pipe
 * link, and a split model against the whole one: at every cut point (and
 * three stages) the prefill's, each decode step's, a batch of sequences'
 * (model_forward_seqs, verify and rollback) and the MTP head's logits,
 * hidden rows and greedy picks bit for bit, on the tiny fixtures of
 * t/data/tiny and on model A (skipped when it is not there); a forward
 * of many sequences run as micro-batches through the stages (waves with
 * two stages at work) bit for bit the whole model's; a prefix cache
 * keeping each stage's part of a split state.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_impl.h"
#include "model.h"
#include "pipeline.h"
#include "prefix.h"
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

/* Step `step` of the script on r: 0 prefill, 1..NDEC decode, then seqs, rollback, mtp
 * (and its chain). */
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
	/* then a draft chain of 3 after them: its picks into ids, its last hidden row into h */
	return model_mtp(r->md, r->st[0], 0, 0, r->h, tok, 2, r->lg, r->h + hp->n_embd * 2) ||
	    model_mtp_chain(r->md, r->st[0], 2, r->h + hp->n_embd * 3, tok[2], 3, r->ids, r->h);
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

enum { NMB = 24 };

/*
 * NMB sequences of md, each prefilled with a prompt of its own, then two
 * forwards of them all together: a verify of 1..4 rows each (logits and
 * hidden rows), rolled back, and a decode row each (picks).  Outputs into
 * lg[60][n_vocab], h[60][n_embd], ids[NMB].
 */
static int
many_seqs(struct model *md, float *lg, float *h, int32_t *ids, char *err)
{
	const struct model_hparams *hp = model_hparams(md);
	struct state *st[NMB] = { 0 };
	int32_t tok[64];
	int rows[NMB], one[NMB], rc = 0;

	for (int i = 0; i < NMB && rc == 0; i++) {
		for (int j = 0; j < 64; j++)
			tok[j] = (int32_t)((j * 31 + i * 17 + 3) % hp->n_vocab);
		rows[i] = 1 + i % 4, one[i] = 1;
		if ((st[i] = model_state_new(md, NCTX, NSNAP, err)) == NULL)
			rc = -1;
		else
			rc = model_forward(md, st[i], tok, 3 + i % 5, MODEL_PREFILL, NULL, NULL);
	}
	if (rc == 0)
		rc = model_forward_seqs(md, st, rows, NMB, tok, MODEL_VERIFY, lg, NULL, h);
	for (int i = 0; i < NMB && rc == 0; i++)
		rc = state_rollback(st[i], 1 + (i % 4) / 2);
	if (rc == 0)
		rc = model_forward_seqs(md, st, one, NMB, tok + 7, 0, NULL, ids, NULL);
	if (rc != 0 && err[0] == '\0')
		snprintf(err, UTIL_ERRLEN, "%s", model_errmsg(md));
	for (int i = 0; i < NMB; i++)
		state_free(st[i]);
	return rc;
}

/* dir split as sp against the whole: many_seqs bit for bit, and the pipeline's waves. */
static void
micro_equal(const char *dir, const struct model_split *sp)
{
	struct model_options mo = { .split = sp };
	char err[UTIL_ERRLEN] = "";
	struct model *w = model_open_opts(dir, be[0], NULL, err), *s = NULL;
	struct model_pp_stats ps;
	size_t nv, ne;
	float *lg[2], *h[2];
	int32_t ids[2][NMB];

	if (w == NULL || (s = model_open_opts(dir, be[0], &mo, err)) == NULL) {
		FAILF("%s: %s", dir, err);
		model_close(w);
		return;
	}
	nv = model_hparams(w)->n_vocab, ne = model_hparams(w)->n_embd;
	for (int i = 0; i < 2; i++)
		lg[i] = calloc(60 * nv, sizeof **lg), h[i] = calloc(60 * ne, sizeof **h);
	if (many_seqs(w, lg[0], h[0], ids[0], err) != 0 || many_seqs(s, lg[1], h[1], ids[1], err))
		FAILF("%s: %s", dir, err);
	else {
		CHECK(memcmp(lg[0], lg[1], 60 * nv * sizeof **lg) == 0);
		CHECK(memcmp(h[0], h[1], 60 * ne * sizeof **h) == 0);
		CHECK(memcmp(ids[0], ids[1], sizeof ids[0]) == 0);
	}
	/* a split model's steps are its stages' least (the whole one is on be[0] alone) */
	CHECK_EQ_INT(model_step_rows(w), backend_step_rows(be[0]));
	CHECK_EQ_INT(model_step_rows(s), backend_step_rows(be[1]));
	model_pp_stats(s, &ps);
	if (model_step_rows(s) == 16) {
		/* 60 rows in groups of whole sequences up to 16 rows: 4 micro-batches (15 rows
		 * each); 24 rows of one: 2 (16 and 8) */
		CHECK_EQ_INT(ps.forwards, 2);
		CHECK_EQ_INT(ps.microbatches, 6);
		CHECK_EQ_INT(ps.waves, (4 + sp->n - 1) + (2 + sp->n - 1));
		CHECK_EQ_INT(ps.busy_waves, sp->n == 2 ? 3 + 1 : 4 + 2);	/* 2 stages: n - 1 */
	} else {
		/* up to 32 rows: 60 rows are 2 micro-batches (31 and 29 rows); 24 rows of one are
		 * one, which no pipeline runs */
		CHECK_EQ_INT(model_step_rows(s), 32);
		CHECK_EQ_INT(ps.forwards, 1);
		CHECK_EQ_INT(ps.microbatches, 2);
		CHECK_EQ_INT(ps.waves, 2 + sp->n - 1);
		CHECK_EQ_INT(ps.busy_waves, sp->n - 1);
	}
	model_pp_stats(w, &ps);
	CHECK_EQ_INT(ps.forwards + ps.waves, 0);	/* a whole model has no pipeline */
	for (int i = 0; i < 2; i++)
		free(lg[i]), free(h[i]);
	model_close(w);
	model_close(s);
}

TEST(micro_batches_run_through_the_stages_as_a_pipeline_bit_for_bit)
{
	char dev[3][PIPELINE_DEVLEN] = { "cpu", "cpu", "cpu" };
	int first[2] = { 2, 3 };
	struct model_split sp = { 2, be, dev, first };
	const char *a = getenv("MEMRA_MODEL_A") ? getenv("MEMRA_MODEL_A") : "../shared/models/A";
	char cfg[1024];
	FILE *fp;

	/* every stage on the CPU's steps of 32 rows, then stage 1's backend told it takes 16
	 * (CUDA's): the split model's steps are 16 rows */
	for (int lim = 32; lim >= 16; lim -= 16) {
		be[1]->step_rows = lim;
		sp.n = 2, first[0] = 2, first[1] = 3, sp.first = first;
		micro_equal("t/data/tiny/q35-r2", &sp);
		sp.n = 3, first[0] = 1;
		micro_equal("t/data/tiny/q35-r2", &sp);
		sp.n = 2, first[0] = 1;
		micro_equal("t/data/tiny/llama-tiny", &sp);
		snprintf(cfg, sizeof cfg, "%s/config.json", a);
		if ((fp = fopen(cfg, "r")) != NULL) {	/* (the test above says when A is missing) */
			fclose(fp);
			sp.first = NULL;
			micro_equal(a, &sp);
		}
	}
	be[1]->step_rows = BACKEND_ROWS_MAX;
}

/*
 * The prompt tok[n] (n a multiple of 4) into st in chunks of 4, each
 * chunk's block stored into p after the one before (*last: the chain's end).
 */
static int
store_chunks(struct model *md, struct prefix *p, struct state *st, const int32_t *tok, int n,
    int *last)
{
	*last = -1;
	for (int end = 4; end <= n; end += 4)
		if (model_forward(md, st, tok + end - 4, 4, MODEL_PREFILL, NULL, NULL) != 0 ||
		    (*last = prefix_insert(p, *last, tok, NULL, end, st, 0)) < 0)
			return -1;
	return 0;
}

TEST(a_prefix_cache_keeps_each_stage_s_part_of_a_split_state)
{
	char dev[2][PIPELINE_DEVLEN] = { "cpu", "cpu" }, err[UTIL_ERRLEN] = "";
	int first[1] = { 2 };
	struct model_split sp = { 2, be, dev, first };
	struct model_options mo = { .split = &sp };
	struct model *w = model_open_opts("t/data/tiny/q35-r2", be[0], NULL, err);
	struct model *s = w ? model_open_opts("t/data/tiny/q35-r2", be[0], &mo, err) : NULL;
	struct state *a = NULL, *b = NULL, *c = NULL, *ws = NULL;
	struct prefix *p = NULL;
	int32_t tok[13];
	float *lg[3] = { 0 };
	int last = -1;

	if (s == NULL) {
		FAILF("%s", err);
		model_close(w);
		return;
	}
	for (int j = 0; j < 13; j++)
		tok[j] = (int32_t)((j * 41 + 7) % model_hparams(s)->n_vocab);
	a = model_state_new(s, NCTX, 0, err), b = model_state_new(s, NCTX, 0, err);
	c = model_state_new(s, NCTX, 0, err), ws = model_state_new(w, NCTX, 0, err);
	for (int i = 0; i < 3; i++)
		lg[i] = calloc(model_hparams(s)->n_vocab, sizeof **lg);
	CHECK(a && b && c && ws && state_parts(a) == 2 && state_parts(ws) == 1);
	/* the split's block holds the whole model's caches, cut by stage */
	CHECK_EQ_INT(prefix_block_bytes_like(a, NULL, 4), prefix_block_bytes(state_config(ws), NULL, 4));
	CHECK(state_backend(a) == NULL && state_backend(state_part(a, 1)) == be[1]);
	p = prefix_new_like(a, &(struct prefix_config){ 4, 8 * prefix_block_bytes_like(a, NULL, 4), 0,
	    NULL, 0 },
	    err);
	CHECK(p != NULL);
	if (p != NULL && a && b && c && ws) {
		CHECK(store_chunks(s, p, a, tok, 12, &last) == 0);
		CHECK_EQ_INT(prefix_lookup(p, tok, NULL, 13, 0, &last), 12);
		CHECK(prefix_restore(p, last, b) == 0);		/* b resumes where a is */
		CHECK_EQ_INT(state_pos(b), 12);
		CHECK(prefix_restore(p, last, ws) == -1);	/* a whole state: another shape */
		CHECK(prefix_insert(p, -1, tok, NULL, 4, ws, 0) == -1);
		/* the next token from a, from b and cold (c, the same chunks): the same bits */
		CHECK(store_chunks(s, p, c, tok, 12, &last) == 0);
		CHECK(model_forward(s, a, tok + 12, 1, 0, lg[0], NULL) == 0);
		CHECK(model_forward(s, b, tok + 12, 1, 0, lg[1], NULL) == 0);
		CHECK(model_forward(s, c, tok + 12, 1, 0, lg[2], NULL) == 0);
		CHECK(memcmp(lg[0], lg[1], model_hparams(s)->n_vocab * sizeof **lg) == 0);
		CHECK(memcmp(lg[0], lg[2], model_hparams(s)->n_vocab * sizeof **lg) == 0);
	}
	for (int i = 0; i < 3; i++)
		free(lg[i]);
	prefix_free(p);
	state_free(a), state_free(b), state_free(c), state_free(ws);
	model_close(s);
	model_close(w);
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
	RUN(micro_batches_run_through_the_stages_as_a_pipeline_bit_for_bit);
	RUN(a_prefix_cache_keeps_each_stage_s_part_of_a_split_state);
	for (int i = 0; i < 3; i++)
		backend_close(be[i]);
	return test_summary();
}
