/*
 * seqs: a scheduler's step, one forward over the rows of many sequences.
 * model_forward_seqs against each sequence's own model_forward (logits,
 * hidden rows and greedy picks bit for bit, the states after it and after
 * a rollback), on the tiny fixtures of t/data/tiny and on model A
 * (../shared/models/A, or MEMRA_MODEL_A; skipped when it is not there);
 * then greedy speculative decoding of several sequences verified together
 * (spec_draft, one model_forward_seqs, spec_accept) against each decoded
 * alone with spec_round and against plain greedy decode, on model A.
 */
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"
#include "backend_impl.h"
#include "json.h"
#include "model.h"
#include "sample.h"
#include "spec.h"
#include "state.h"
#include "test.h"
#include "util.h"

#ifdef MEMRA_SAN
enum { N_SPECS = 3, N_NEW = 12 };	/* sanitizer builds: a taste */
#else
enum { N_SPECS = 6, N_NEW = 48 };
#endif

enum { NSEQ = 9, NSTEP = 3, NCTX = 64, NSNAP = 4 };

/*
 * The rows of the 9 sequences at each step: in steps of at most 16 rows
 * (the CUDA backend's; the tests run them on the CPU told so), 22 rows (a
 * group of exactly 16, then 6), 22 (15: the next 2 would pass 16, then 7),
 * 17 (14 + 3); in the CPU's steps of 32, each one group.
 */
static const int ROWS[NSTEP][NSEQ] = {
	{ 1, 4, 1, 3, 2, 4, 1, 4, 2 },
	{ 4, 2, 1, 4, 1, 3, 2, 4, 1 },
	{ 3, 1, 1, 2, 1, 4, 1, 1, 3 },
};

static struct backend *be;

/* The four copies of a sequence: seqs' logits (0) and picks (1), its own forward's (2, 3). */
struct quad {
	struct state *st[4][NSEQ];
};

static int32_t
tok_at(int i, int s, int j, int nv)
{
	return (int32_t)((i * 13 + s * 7 + j * 29 + 3) % nv);
}

/* The prompt of sequence i (2 + 3i tokens: each at its own position) into 4 states. */
static int
quad_new(struct model *md, struct quad *q)
{
	int nv = model_hparams(md)->n_vocab;

	for (int i = 0; i < NSEQ; i++) {
		int32_t p[2 + 3 * NSEQ];

		for (int c = 0; c < 4; c++)
			if ((q->st[c][i] = model_state_new(md, NCTX, NSNAP, NULL)) == NULL ||
			    state_reset(q->st[c][i]) != 0)
				return -1;
		for (int j = 0; j < 2 + 3 * i; j++)
			p[j] = (int32_t)((i * 31 + j * 17 + 5) % nv);
		if (model_forward(md, q->st[0][i], p, 2 + 3 * i, MODEL_PREFILL, NULL, NULL) != 0)
			return -1;
		for (int c = 1; c < 4; c++)
			if (state_copy(q->st[c][i], q->st[0][i]) != 0)
				return -1;
	}
	return 0;
}

static void
quad_free(struct quad *q)
{
	for (int c = 0; c < 4; c++)
		for (int i = 0; i < NSEQ; i++)
			state_free(q->st[c][i]);
}

/* n floats at x and y in backend memory hold the same bits. */
static int
same_mem(const float *x, const float *y, size_t n)
{
	float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
	int same = a && b && backend_read(be, a, x, n) == 0 && backend_read(be, b, y, n) == 0 &&
	    memcmp(a, b, n * sizeof *a) == 0;

	free(a), free(b);
	return same;
}

/* a and b hold the same sequence: position, the trunk's K and V rows before it, recurrent states. */
static int
same_state(const struct model_hparams *hp, struct state *a, struct state *b)
{
	const struct state_config *c = state_config(a);
	size_t kv = (size_t)state_pos(a) * c->kv_dim, cv = (size_t)(c->d_conv - 1) * c->conv_dim;

	if (state_pos(a) != state_pos(b))
		return 0;
	for (int i = 0; i < hp->n_full; i++)
		if (!same_mem(state_k(a, i), state_k(b, i), kv) ||
		    !same_mem(state_v(a, i), state_v(b, i), kv))
			return 0;
	for (int l = 0; l < c->n_rec; l++)
		if (!same_mem(state_conv(a, l), state_conv(b, l), cv) ||
		    !same_mem(state_ssm(a, l), state_ssm(b, l), (size_t)c->n_v_heads * c->dk * c->dv))
			return 0;
	return 1;
}

/* Outputs of one step: [0] model_forward_seqs's, [1] each sequence's own forward's. */
struct outs {
	float	*lg[2], *h[2];
	int32_t	ids[2][NSEQ * 16];
};

/*
 * Step s over the quad with flags: seqs on copies 0 (logits, hidden) and
 * 1 (picks), each sequence alone on 2 and 3.  0, or -1 when a call failed.
 */
static int
step(struct model *md, struct quad *q, int s, int flags, int32_t *tok, struct outs *o)
{
	const struct model_hparams *hp = model_hparams(md);
	int r = 0;

	for (int i = 0; i < NSEQ; i++)
		for (int j = 0; j < ROWS[s][i]; j++)
			tok[r++] = tok_at(i, s, j, hp->n_vocab);
	if (model_forward_seqs(md, q->st[0], ROWS[s], NSEQ, tok, flags, o->lg[0], NULL, o->h[0]) ||
	    model_forward_seqs(md, q->st[1], ROWS[s], NSEQ, tok, flags, NULL, o->ids[0], NULL)) {
		printf("# %s\n", model_errmsg(md));
		return -1;
	}
	r = 0;
	for (int i = 0; i < NSEQ; r += ROWS[s][i++])
		if (model_forward(md, q->st[2][i], tok + r, ROWS[s][i], flags | MODEL_LOGITS_ALL,
		    o->lg[1] + (size_t)r * hp->n_vocab, o->h[1] + (size_t)r * hp->n_embd) ||
		    model_forward_argmax(md, q->st[3][i], tok + r, ROWS[s][i],
		    flags | MODEL_LOGITS_ALL, o->ids[1] + r, NULL))
			return -1;
	return 0;
}

/* Step s's outputs agree bit for bit, row by row (named in the failure). */
static void
check_rows(const char *name, const struct model_hparams *hp, int s, int flags, struct outs *o)
{
	size_t nv = hp->n_vocab, ne = hp->n_embd;

	for (int i = 0, r = 0; i < NSEQ; i++)
		for (int j = 0; j < ROWS[s][i]; j++, r++) {
			if (memcmp(o->lg[0] + r * nv, o->lg[1] + r * nv, nv * sizeof(float)) != 0 ||
			    memcmp(o->h[0] + r * ne, o->h[1] + r * ne, ne * sizeof(float)) != 0)
				FAILF("%s flags %d step %d: sequence %d row %d: logits or hidden differ "
				    "from its own forward's", name, flags, s, i, j);
			if (o->ids[0][r] != o->ids[1][r] ||
			    o->ids[0][r] != sample_argmax(o->lg[1] + r * nv, nv))
				FAILF("%s flags %d step %d: sequence %d row %d: picked %d, alone %d",
				    name, flags, s, i, j, o->ids[0][r], o->ids[1][r]);
		}
}

/*
 * model_forward_seqs on md (named name) equals each sequence's own forward
 * at every step, without and with MODEL_VERIFY (each sequence rolled back
 * to 1 + (i + s) % rows after a verify step, on every copy).
 */
static void
seqs_equal_own_forwards(const char *name, struct model *md)
{
	const struct model_hparams *hp = model_hparams(md);
	struct outs o;
	int32_t tok[NSEQ * 16];

	for (int k = 0; k < 2; k++) {
		o.lg[k] = malloc((size_t)NSEQ * 16 * hp->n_vocab * sizeof(float));
		o.h[k] = malloc((size_t)NSEQ * 16 * hp->n_embd * sizeof(float));
	}
	for (int flags = 0; flags <= MODEL_VERIFY; flags += MODEL_VERIFY) {
		struct quad q = { 0 };

		CHECK(quad_new(md, &q) == 0);
		for (int s = 0; s < NSTEP && !test_cur_failed; s++) {
			CHECK(step(md, &q, s, flags, tok, &o) == 0);
			if (test_cur_failed)
				break;
			check_rows(name, hp, s, flags, &o);
			for (int i = 0; i < NSEQ && flags; i++)
				for (int c = 0; c < 4; c++)
					CHECK(state_rollback(q.st[c][i], 1 + (i + s) % ROWS[s][i]) == 0);
			for (int i = 0; i < NSEQ; i++)
				if (!same_state(hp, q.st[0][i], q.st[2][i]) ||
				    !same_state(hp, q.st[1][i], q.st[3][i]))
					FAILF("%s flags %d step %d: sequence %d: state differs from its "
					    "own forward's", name, flags, s, i);
		}
		quad_free(&q);
	}
	for (int k = 0; k < 2; k++)
		free(o.lg[k]), free(o.h[k]);
}

/* A tiny fixture opened with kv_f16 = f16 (a llama model: llama.cpp's attention orders). */
static void
tiny(const char *dir, int f16)
{
	struct model_options mo = { .kv_f16 = f16 };
	char err[UTIL_ERRLEN], name[256];
	struct model *md = model_open_opts(dir, be, &mo, err);

	if (md == NULL) {
		FAILF("%s: %s", dir, err);
		return;
	}
	snprintf(name, sizeof name, "%s%s", dir, f16 ? " (f16 cache)" : "");
	seqs_equal_own_forwards(name, md);
	model_close(md);
}

TEST(sequences_in_one_forward_equal_their_own_forwards_on_the_tiny_models)
{
	for (int lim = BACKEND_ROWS_MAX; lim >= BACKEND_ROWS_MIN; lim -= 16) {
		be->step_rows = lim;	/* the CPU's steps, then CUDA's */
		tiny("t/data/tiny/q35-r2", 0);
		tiny("t/data/tiny/q35-r2", 1);
		tiny("t/data/tiny/q35-r1-tied", 0);
		tiny("t/data/tiny/llama-tiny", 0);
		tiny("t/data/tiny/llama-tiny", 1);
	}
	be->step_rows = BACKEND_ROWS_MAX;
}

/* Positions of the states in st[n]. */
static void
positions(struct state **st, int n, int *pos)
{
	for (int i = 0; i < n; i++)
		pos[i] = state_pos(st[i]);
}

/*
 * model_forward_seqs(rows, flags, logits, ids) on the quad's first
 * copies fails, with a message holding want, and moves no state.
 */
static void
refused(struct model *md, struct quad *q, const int *rows, int flags, int both, const char *want)
{
	const struct model_hparams *hp = model_hparams(md);
	int32_t tok[NSEQ * 20] = { 0 }, ids[NSEQ * 20];
	float *lg = malloc((size_t)NSEQ * 20 * hp->n_vocab * sizeof *lg);
	int before[NSEQ], after[NSEQ];

	positions(q->st[0], NSEQ, before);
	if (model_forward_seqs(md, q->st[0], rows, NSEQ, tok, flags, lg, both ? ids : NULL, NULL)
	    != -1)
		FAILF("a call that should fail (%s) ran", want);
	else if (strstr(model_errmsg(md), want) == NULL)
		FAILF("message '%s', want '%s' in it", model_errmsg(md), want);
	positions(q->st[0], NSEQ, after);
	if (memcmp(before, after, sizeof before) != 0)
		FAILF("a refused call (%s) moved a state", want);
	free(lg);
}

/*
 * What a step cannot be is refused before any state moves: a sequence of
 * more than a step's rows (a prompt: 32 on the CPU, 16 where the backend
 * says so), more rows to verify than its snapshots,
 * past its context, two sequences on one state, logits and picks both,
 * a prompt's flag.  The bad sequence is the last, past a whole group.
 */
TEST(what_a_step_cannot_be_is_refused_before_any_state_moves)
{
	char err[UTIL_ERRLEN];
	struct model *md = model_open("t/data/tiny/q35-r2", be, err);
	struct quad q = { 0 };
	int rows[NSEQ] = { 4, 4, 4, 4, 1, 1, 1, 1, 1 };
	struct state *keep;
	static const int32_t two[2] = { 5, 7 };

	CHECK(md != NULL && quad_new(md, &q) == 0);
	if (test_cur_failed)
		return;
	rows[NSEQ - 1] = 33;
	refused(md, &q, rows, 0, 0, "33 rows (a step has 1..32;");
	be->step_rows = 16;
	rows[NSEQ - 1] = 17;
	refused(md, &q, rows, 0, 0, "17 rows (a step has 1..16;");
	be->step_rows = BACKEND_ROWS_MAX;
	rows[NSEQ - 1] = 0;
	refused(md, &q, rows, 0, 0, "0 rows");
	rows[NSEQ - 1] = NSNAP + 1;
	refused(md, &q, rows, MODEL_VERIFY, 0, "snapshots for 4");
	keep = q.st[0][NSEQ - 1];	/* 2 rows at position 2 of 3 */
	q.st[0][NSEQ - 1] = model_state_new(md, 3, NSNAP, NULL);
	CHECK(model_forward(md, q.st[0][NSEQ - 1], two, 2, MODEL_PREFILL, NULL, NULL) == 0);
	rows[NSEQ - 1] = 2;
	refused(md, &q, rows, 0, 0, "context of 3 is full");
	state_free(q.st[0][NSEQ - 1]);
	rows[NSEQ - 1] = 1;
	q.st[0][NSEQ - 1] = q.st[0][2];
	refused(md, &q, rows, 0, 0, "share a state");
	q.st[0][NSEQ - 1] = keep;
	refused(md, &q, rows, 0, 1, "not both");
	refused(md, &q, rows, MODEL_PREFILL, 0, "a prompt runs alone");
	quad_free(&q);
	model_close(md);
}

/* Model A, its refs.json and the greedy prompts (b_greedy), or NULL after a skip. */
static struct model *md_a;
static struct json *refs;

TEST(sequences_in_one_forward_equal_their_own_forwards_on_model_a)
{
	seqs_equal_own_forwards("A", md_a);
	be->step_rows = 16;	/* groups of 16, as on CUDA */
	seqs_equal_own_forwards("A", md_a);
	be->step_rows = BACKEND_ROWS_MAX;
}

static int32_t *
prompt(int p, int *n)
{
	const struct json *a = json_get(json_at(json_get(refs, "b_greedy"), p), "input_ids");
	int32_t *ids = malloc(a->n * sizeof *ids);

	for (size_t i = 0; i < a->n; i++)
		ids[i] = (int32_t)a->items[i].i;
	*n = (int)a->n;
	return ids;
}

/* Speculative sequence j: its K, its number of new tokens, its tokens and stats. */
struct seq {
	struct spec *s;
	int	K, n_new, gen;
	long	accepted, rounds;
	int32_t	out[N_NEW];
};

static int
seq_start(struct seq *q, int j)
{
	char err[UTIL_ERRLEN];
	int n, rc;
	int32_t *ids = prompt(j, &n);

	q->K = j % 2 ? 2 : 3, q->n_new = N_NEW - 5 * j, q->gen = 1;
	if ((q->s = spec_new(md_a, q->K, n + N_NEW + 8, NULL, j, err)) == NULL) {
		printf("# %s\n", err);
		free(ids);
		return -1;
	}
	rc = spec_prefill(q->s, ids, n, &q->out[0]);
	free(ids);
	return rc;
}

/* Sequence j decoded alone with spec_round. */
static int
seq_alone(struct seq *q, int j)
{
	int r = 0;

	if (seq_start(q, j) != 0)
		return -1;
	while (q->gen < q->n_new && (r = spec_round(q->s, q->out + q->gen, q->n_new - q->gen)) > 0)
		q->gen += r;
	q->accepted = spec_stats(q->s)->accepted, q->rounds = spec_stats(q->s)->rounds;
	spec_free(q->s);
	return r < 0 ? -1 : 0;
}

/*
 * One step of the sequences still running: spec_draft for each, one
 * model_forward_seqs over all their rows, spec_accept for each.
 * Returns the rows it verified (0: none left), or -1.
 */
static int
seqs_round(struct seq *q, int nq, int32_t *tok, int32_t *ids, float *h)
{
	struct state *st[N_SPECS];
	int rows[N_SPECS], who[N_SPECS], n = 0, r = 0, ne = model_hparams(md_a)->n_embd;

	for (int j = 0; j < nq; j++) {
		if (q[j].gen >= q[j].n_new)
			continue;
		if ((rows[n] = spec_draft(q[j].s, q[j].n_new - q[j].gen, tok + r)) < 0)
			return -1;
		st[n] = spec_state(q[j].s), who[n] = j, r += rows[n++];
	}
	if (n == 0)
		return 0;
	if (model_forward_seqs(md_a, st, rows, n, tok, MODEL_VERIFY, NULL, ids, h) != 0)
		return -1;
	for (int i = 0, o = 0; i < n; o += rows[i++]) {
		struct seq *p = &q[who[i]];
		int got = spec_accept(p->s, ids + o, h + (size_t)o * ne, p->out + p->gen);

		if (got < 1 || got > rows[i])
			return -1;
		p->gen += got;
	}
	return r;
}

/* Plain greedy decode of prompt j: n_new tokens into out. */
static int
greedy(int j, int n_new, int32_t *out)
{
	int n, rc;
	int32_t *ids = prompt(j, &n);
	struct state *st = model_state_new(md_a, n + n_new, 0, NULL);

	rc = st == NULL || state_reset(st) != 0 ||
	    model_forward_argmax(md_a, st, ids, n, MODEL_PREFILL, &out[0], NULL) != 0;
	for (int i = 1; rc == 0 && i < n_new; i++)
		rc = model_forward_argmax(md_a, st, &out[i - 1], 1, 0, &out[i], NULL);
	state_free(st);
	free(ids);
	return rc ? -1 : 0;
}

/*
 * Greedy speculative sequences of different prompts, K 3 and 2 and
 * lengths, verified together a step at a time (more than 16 rows at
 * first: the forward's groups split them), each emit exactly the tokens
 * of the same sequence decoded alone with spec_round (its acceptance
 * too) and those of plain greedy decode.
 */
TEST(speculative_sequences_verified_together_emit_their_own_tokens)
{
	struct seq tog[N_SPECS] = { 0 }, alone[N_SPECS] = { 0 };
	int ne = model_hparams(md_a)->n_embd, r = 0, most = 0, steps = 0;
	int32_t tok[N_SPECS * 4], ids[N_SPECS * 4], want[N_NEW];
	float *h = malloc((size_t)N_SPECS * 4 * ne * sizeof *h);

	for (int j = 0; j < N_SPECS; j++)
		CHECK(seq_start(&tog[j], j) == 0 && seq_alone(&alone[j], j) == 0);
	while (!test_cur_failed && (r = seqs_round(tog, N_SPECS, tok, ids, h)) > 0)
		most = r > most ? r : most, steps++;
	CHECK(r == 0);
	for (int j = 0; j < N_SPECS && !test_cur_failed; j++) {
		struct seq *t = &tog[j], *a = &alone[j];

		CHECK(greedy(j, t->n_new, want) == 0);
		CHECK_EQ_INT(t->gen, t->n_new);
		for (int i = 0; i < t->n_new; i++)
			if (t->out[i] != a->out[i] || t->out[i] != want[i]) {
				FAILF("sequence %d token %d: %d together, %d alone, %d greedy", j, i,
				    t->out[i], a->out[i], want[i]);
				break;
			}
		CHECK_EQ_INT(spec_stats(t->s)->accepted, a->accepted);
		CHECK_EQ_INT(spec_stats(t->s)->rounds, a->rounds);
		printf("# sequence %d (K=%d, %d tokens): %ld accepted in %ld rounds\n", j, t->K,
		    t->n_new, a->accepted, a->rounds);
	}
	printf("# %d steps, at most %d rows together\n", steps, most);
	CHECK(most > 16 || N_SPECS < 6);
	for (int j = 0; j < N_SPECS; j++)
		spec_free(tog[j].s);
	free(h);
}

/*
 * The phases are greedy-only and in order: a sampled decoder's spec_draft
 * and spec_accept fail with a message, so do spec_accept before a draft
 * and a second spec_draft before its spec_accept.
 */
TEST(the_phases_refuse_sampling_and_run_in_order)
{
	struct sample_params p;
	char err[UTIL_ERRLEN];
	struct spec *s;
	int32_t ids[4] = { 0 }, rows[4], first;
	int n;
	int32_t *pr = prompt(0, &n);
	float *h = calloc((size_t)4 * model_hparams(md_a)->n_embd, sizeof *h);

	sample_defaults(&p);
	p.temp = 0.8f;
	CHECK((s = spec_new(md_a, 3, n + 16, &p, 0, err)) != NULL);
	CHECK(spec_prefill(s, pr, n, &first) == 0);
	CHECK(spec_draft(s, 8, rows) == -1);
	CHECK(strstr(spec_errmsg(s), "greedy decoding only") != NULL);
	CHECK(spec_accept(s, ids, h, rows) == -1);
	spec_free(s);
	CHECK((s = spec_new(md_a, 3, n + 16, NULL, 0, err)) != NULL);
	CHECK(spec_prefill(s, pr, n, &first) == 0);
	CHECK(spec_accept(s, ids, h, rows) == -1);
	CHECK(strstr(spec_errmsg(s), "no draft") != NULL);
	CHECK_EQ_INT(spec_draft(s, 8, rows), 4);
	CHECK_EQ_INT(rows[0], first);
	CHECK(spec_draft(s, 8, rows) == -1);
	CHECK(strstr(spec_errmsg(s), "waits for spec_accept") != NULL);
	spec_free(s);
	free(pr), free(h);
}

int
main(void)
{
	const char *dir;
	char err[UTIL_ERRLEN], path[1024];
	char *text;
	size_t len;

	if ((be = backend_open("cpu", 0, err)) == NULL) {
		printf("not ok seqs: %s\n", err);
		return 1;
	}
	RUN(sequences_in_one_forward_equal_their_own_forwards_on_the_tiny_models);
	RUN(what_a_step_cannot_be_is_refused_before_any_state_moves);
	if ((dir = test_model_a("seqs")) == NULL) {
		backend_close(be);
		return test_summary();
	}
	snprintf(path, sizeof path, "%s/refs.json", dir);
	if ((text = util_read_file(path, &len, err)) == NULL ||
	    (refs = json_parse(text, len, err)) == NULL ||
	    (md_a = model_open(dir, be, err)) == NULL) {
		printf("not ok seqs: %s\n", err);
		return 1;
	}
	free(text);
	RUN(sequences_in_one_forward_equal_their_own_forwards_on_model_a);
	RUN(speculative_sequences_verified_together_emit_their_own_tokens);
	RUN(the_phases_refuse_sampling_and_run_in_order);
	model_close(md_a);
	backend_close(be);
	json_free(refs);
	return test_summary();
}
