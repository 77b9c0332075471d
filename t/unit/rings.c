/*
 * rings: Gemma-4's sliding-window caches kept as rings (model_ring_rows)
 * say what whole caches say.  On the CPU, t/data/gemma4/g4-dense (three
 * sliding layers of window 5 with 2 K/V heads of 16, two global ones of 2
 * of 32) with its assistant t/data/gemma4/g4-assistant, opened twice: R =
 * 32 rows a piece (rings of 5 + 32 - 1 = 36 rows in a state of 256
 * positions) and the default R = 512 (whole caches: 516 rows would be
 * more than 256).  The CPU's attention is row-invariant, so the pieces
 * change no bit and every logit of the two agrees bit for bit: a prompt
 * past the rings in one forward, greedy decode on, a verify batch rolled
 * back, sequences in a batch, an image block that a piece must not cut,
 * the assistant's drafts.  What a ring cannot do is refused with its
 * reason: going back past what it keeps, an image longer than a piece, R
 * changed after a state was made, a prefix block whose rows it has left.
 */
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"
#include "model.h"
#include "prefix.h"
#include "state.h"
#include "test.h"
#include "util.h"

#define CTX 256
#define NP 150		/* the prompt: past the rings' 36 rows four times over */

static struct backend *be;
static struct model *ring, *whole;	/* R = 32, R = 512 */
static int nv, ne;

static struct model *
open_g4(int R, char *err)
{
	struct model *m = model_open_opts("t/data/gemma4/g4-dense", be, &(struct model_options){
	    .draft = "t/data/gemma4/g4-assistant" }, err);

	if (m != NULL && R != MODEL_RING_ROWS && model_set_ring_rows(m, R) != 0) {
		snprintf(err, UTIL_ERRLEN, "%s", model_errmsg(m));
		model_close(m);
		return NULL;
	}
	return m;
}

static void
tokens(int32_t *t, int n, uint32_t seed)
{
	for (int i = 0; i < n; i++) {
		seed = seed * 1664525 + 1013904223;
		t[i] = (int32_t)((seed >> 8) % (uint32_t)nv);
	}
}

/* 1 when a and b hold the same n floats bit for bit. */
static int
same(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof *a) == 0;
}

/* The index of the largest of n. */
static int32_t
argmax(const float *x, int n)
{
	int32_t b = 0;

	for (int i = 1; i < n; i++)
		b = x[i] > x[b] ? i : b;
	return b;
}

/*
 * A state of 256 positions on R = 32 keeps its sliding caches as rings of
 * 36 rows (the last three of its five caches): its bytes count 36 rows for
 * them; at 36 positions or fewer there is no ring; the default R = 512
 * keeps whole caches at 256.  R is a step's rows at least and stays once a
 * state is made; model_ring_hold raises it to a forward that must be one
 * piece.
 */
TEST(rings_hold_the_window_and_a_piece)
{
	char err[UTIL_ERRLEN];
	struct state *st = model_state_new(ring, CTX, 0, err);
	const struct state_config *c = st != NULL ? state_config(st) : NULL;

	CHECK(st != NULL);
	if (st == NULL)
		return;
	CHECK_EQ_INT(model_ring_rows(ring), 32);
	CHECK_EQ_INT(model_ring_rows(whole), MODEL_RING_ROWS);
	CHECK(c->n_kv == 5 && c->n_ring == 3 && c->ring == 36 && c->window == 5);
	CHECK(!state_is_ring(c, 1) && state_is_ring(c, 2));
	CHECK_EQ_INT(model_state_bytes(ring, CTX, 0), 2 * 4 * (2 * 64 * CTX + 3 * 32 * 36));
	CHECK_EQ_INT(model_state_bytes(ring, 36, 0), 2 * 4 * (2 * 64 * 36 + 3 * 32 * 36));
	CHECK_EQ_INT(model_state_bytes(whole, CTX, 0), 2 * 4 * (2 * 64 * CTX + 3 * 32 * CTX));
	CHECK(model_set_ring_rows(ring, 64) == -1);
	CHECK_EQ_STR(model_errmsg(ring), "rings: its states are made with 32 rows a piece");
	CHECK(model_set_ring_rows(ring, 32) == 0);
	/* model_ring_hold: a forward of 32 rows is one piece already; 40 would need R
	 * changed under the states made; a fresh model's R grows to a 600-row image */
	CHECK(model_ring_hold(ring, 32) == 0 && model_ring_hold(ring, 40) == -1);
	state_free(st);
	{
		struct model *m = model_open("t/data/gemma4/g4-dense", be, err);

		CHECK(m != NULL && model_ring_hold(m, 100) == 0 &&
		    model_ring_rows(m) == MODEL_RING_ROWS);
		CHECK(m != NULL && model_ring_hold(m, 600) == 0 && model_ring_rows(m) == 600);
		model_close(m);
	}
}

/*
 * A prompt of 150 tokens in one forward (every row's logits), 40 greedy
 * steps, a verify batch of 6 rows kept to 2, and a truncation back 10:
 * the ring model's logits are the whole caches' bit for bit.  Back 40
 * (past 32 = 36 - 5 + 1) the ring refuses; the whole cache goes.
 */
TEST(a_ring_decodes_the_bits_of_a_whole_cache)
{
	char err[UTIL_ERRLEN];
	struct state *a = model_state_new(ring, CTX, 8, err), *b = model_state_new(whole, CTX, 8,
	    err);
	float *la = malloc((size_t)NP * nv * sizeof *la), *lb = malloc((size_t)NP * nv *
	    sizeof *lb);
	int32_t tok[NP], t, v[6];
	int differ = 0;

	CHECK(a != NULL && b != NULL && la != NULL && lb != NULL);
	if (a == NULL || b == NULL || la == NULL || lb == NULL)
		goto out;
	tokens(tok, NP, 7);
	CHECK(model_forward(ring, a, tok, NP, MODEL_LOGITS_ALL | MODEL_PREFILL, la, NULL) == 0);
	CHECK(model_forward(whole, b, tok, NP, MODEL_LOGITS_ALL | MODEL_PREFILL, lb, NULL) == 0);
	CHECK(same(la, lb, (size_t)NP * nv));
	for (int i = 0, p = NP - 1; i < 40; i++, p = 0) {
		t = argmax(la + (size_t)p * nv, nv);
		CHECK(model_forward(ring, a, &t, 1, 0, la, NULL) == 0);
		CHECK(model_forward(whole, b, &t, 1, 0, lb, NULL) == 0);
		differ += !same(la, lb, nv);
	}
	CHECK_EQ_INT(differ, 0);
	tokens(v, 6, 11);
	CHECK(model_forward(ring, a, v, 6, MODEL_VERIFY | MODEL_LOGITS_ALL, la, NULL) == 0);
	CHECK(model_forward(whole, b, v, 6, MODEL_VERIFY | MODEL_LOGITS_ALL, lb, NULL) == 0);
	CHECK(same(la, lb, 6 * (size_t)nv));
	CHECK(state_rollback(a, 2) == 0 && state_rollback(b, 2) == 0);
	CHECK(state_truncate(a, state_pos(a) - 40) == -1);
	CHECK_EQ_STR(state_errmsg(a), "state: truncate: back 40 positions from 192, past what its "
	    "rings of 36 rows keep (a window of 5 keys)");
	CHECK(state_truncate(a, state_pos(a) - 10) == 0 && state_truncate(b, state_pos(b) - 10) == 0);
	for (int i = 0; i < 5; i++) {
		CHECK(model_forward(ring, a, &v[i], 1, 0, la, NULL) == 0);
		CHECK(model_forward(whole, b, &v[i], 1, 0, lb, NULL) == 0);
		differ += !same(la, lb, nv);
	}
	CHECK_EQ_INT(differ, 0);
out:
	state_free(a), state_free(b);
	free(la), free(lb);
}

/*
 * Three sequences decoding together (model_forward_seqs), one of them past
 * its rings, give the whole caches' rows bit for bit.
 */
TEST(sequences_in_a_batch_over_rings)
{
	char err[UTIL_ERRLEN];
	struct state *a[3] = { 0 }, *b[3] = { 0 };
	int len[3] = { 100, 20, 3 }, rows[3] = { 2, 1, 3 };
	int32_t tok[NP], step[6];
	float *la = malloc(6 * (size_t)nv * sizeof *la), *lb = malloc(6 * (size_t)nv * sizeof *lb);
	int differ = 0;

	tokens(tok, NP, 3);
	tokens(step, 6, 5);
	for (int i = 0; i < 3; i++) {
		CHECK((a[i] = model_state_new(ring, CTX, 0, err)) != NULL &&
		    (b[i] = model_state_new(whole, CTX, 0, err)) != NULL);
		if (a[i] == NULL || b[i] == NULL || la == NULL || lb == NULL)
			goto out;
		CHECK(model_forward(ring, a[i], tok, len[i], MODEL_PREFILL, NULL, NULL) == 0);
		CHECK(model_forward(whole, b[i], tok, len[i], MODEL_PREFILL, NULL, NULL) == 0);
	}
	for (int k = 0; k < 12; k++) {
		CHECK(model_forward_seqs(ring, a, rows, 3, step, 0, la, NULL, NULL) == 0);
		CHECK(model_forward_seqs(whole, b, rows, 3, step, 0, lb, NULL, NULL) == 0);
		differ += !same(la, lb, 6 * (size_t)nv);
	}
	CHECK_EQ_INT(differ, 0);
	CHECK_EQ_INT(state_pos(a[0]), 124);
out:
	for (int i = 0; i < 3; i++)
		state_free(a[i]), state_free(b[i]);
	free(la), free(lb);
}

/*
 * An image block of 20 rows at rows 25..44 of a forward of 100 (its rows
 * see each other in the sliding layers): the ring model's pieces end at 25
 * (not inside the image), then 57 and 89, and every row's logits are the
 * whole caches'.  An image of 40 rows, longer than a piece, is refused.
 */
TEST(a_piece_never_cuts_an_image)
{
	char err[UTIL_ERRLEN];
	struct state *a = model_state_new(ring, CTX, 0, err), *b = model_state_new(whole, CTX, 0,
	    err);
	int32_t tok[100], row[40];
	float *x = malloc(40 * (size_t)ne * sizeof *x);
	float *la = malloc(100 * (size_t)nv * sizeof *la), *lb = malloc(100 * (size_t)nv *
	    sizeof *lb);
	uint32_t r = 99;

	CHECK(a != NULL && b != NULL && x != NULL && la != NULL && lb != NULL);
	if (a == NULL || b == NULL || x == NULL || la == NULL || lb == NULL)
		goto out;
	tokens(tok, 100, 13);
	for (int i = 0; i < 40 * ne; i++)
		x[i] = ((r = r * 1664525 + 1013904223) >> 8) / 8388608.0f - 1;
	for (int i = 0; i < 40; i++)
		row[i] = 25 + i;
	CHECK(model_forward(ring, a, tok, 10, MODEL_PREFILL, NULL, NULL) == 0);
	CHECK(model_forward(whole, b, tok, 10, MODEL_PREFILL, NULL, NULL) == 0);
	for (int k = 0; k < 2; k++) {
		struct model *m = k ? whole : ring;
		struct model_embd e = { 20, row, 0, x, 3, 1 };

		CHECK(model_inject(m, &e) == 0);
		CHECK(model_forward(m, k ? b : a, tok, 100, MODEL_PREFILL | MODEL_LOGITS_ALL,
		    k ? lb : la, NULL) == 0);
	}
	CHECK(same(la, lb, 100 * (size_t)nv));
	{
		struct model_embd e = { 40, row, 0, x, 3, 1 };

		CHECK(model_inject(ring, &e) == 0);
		CHECK(model_forward(ring, a, tok, 100, MODEL_PREFILL, NULL, NULL) == -1);
		CHECK_EQ_STR(model_errmsg(ring), "an image of 40 rows: longer than the 32 rows a "
		    "sliding layer's attention takes at once (model_set_ring_rows)");
	}
out:
	state_free(a), state_free(b);
	free(x), free(la), free(lb);
}

/*
 * The assistant drafting over a ring (its sliding layers read the last 6
 * keys before the position) drafts the whole caches' logits, three drafts
 * a round; a draft further back than the ring keeps is refused.
 */
TEST(the_assistant_drafts_over_rings)
{
	char err[UTIL_ERRLEN];
	struct state *a = model_state_new(ring, CTX, 0, err), *b = model_state_new(whole, CTX, 0,
	    err);
	int32_t tok[NP], ta, tb;
	int dv = model_draft_vocab(ring);
	float *h = malloc((size_t)NP * ne * sizeof *h), *ha = malloc(ne * sizeof *ha),
	    *hb = malloc(ne * sizeof *hb), *la = malloc(dv * sizeof *la), *lb = malloc(dv *
	    sizeof *lb);

	CHECK(a != NULL && b != NULL && h != NULL && ha != NULL && hb != NULL && la != NULL &&
	    lb != NULL && dv == model_draft_vocab(whole));
	if (a == NULL || b == NULL || h == NULL || ha == NULL || hb == NULL || la == NULL ||
	    lb == NULL)
		goto out;
	tokens(tok, NP, 17);
	CHECK(model_forward(ring, a, tok, NP, MODEL_PREFILL, NULL, h) == 0);
	CHECK(model_forward(whole, b, tok, NP, MODEL_PREFILL, NULL, NULL) == 0);
	memcpy(ha, h + (size_t)(NP - 1) * ne, ne * sizeof *ha);
	memcpy(hb, ha, ne * sizeof *hb);
	ta = tb = tok[0];
	for (int k = 0; k < 3; k++) {
		CHECK(model_assist(ring, a, NP, ha, ta, la, &ta, ha) == 0);
		CHECK(model_assist(whole, b, NP, hb, tb, lb, &tb, hb) == 0);
		CHECK(same(la, lb, dv) && same(ha, hb, ne) && ta == tb);
	}
	CHECK(model_assist(ring, a, NP - 40, ha, ta, la, NULL, ha) == -1);
	CHECK_EQ_STR(model_errmsg(ring), "assist: a draft at 110 over rings of 36 rows at 150");
out:
	state_free(a), state_free(b);
	free(h), free(ha), free(hb), free(la), free(lb);
}

/*
 * The prefix cache takes a block from a ring only while its rows are still
 * there: after a 32-row forward the block [0, 32) goes in and comes back
 * bit for bit; after a forward of 100 rows (the ring keeps 64..99) the
 * same block is refused with the reason, and no block is stored.
 */
TEST(the_prefix_cache_takes_no_rows_a_ring_has_left)
{
	char err[UTIL_ERRLEN];
	struct state *a = model_state_new(ring, CTX, 0, err), *b = model_state_new(ring, CTX, 0,
	    err);
	const struct state_config *c = a != NULL ? state_config(a) : NULL;
	int w[5], id;
	struct prefix *p = NULL;
	struct prefix_stats ps;
	int32_t tok[100];

	CHECK(a != NULL && b != NULL);
	if (a == NULL || b == NULL)
		goto out;
	for (int i = 0; i < 5; i++)
		w[i] = model_kv_width(ring, i);
	p = prefix_new(be, c, &(struct prefix_config){ 32, 4 * prefix_block_bytes(c, w, 32), 0,
	    w, 0 }, err);
	CHECK(p != NULL);
	if (p == NULL)
		goto out;
	tokens(tok, 100, 23);
	CHECK(model_forward(ring, a, tok, 32, MODEL_PREFILL, NULL, NULL) == 0);
	CHECK((id = prefix_insert(p, -1, tok, NULL, 32, a, 0)) >= 0);
	CHECK(prefix_restore(p, id, b) == 0 && state_pos(b) == 32);
	for (int i = 2; i < 5; i++)	/* the rings' rows 0..31 */
		CHECK(same(state_k(a, i), state_k(b, i), 32 * (size_t)w[i]) &&
		    same(state_v(a, i), state_v(b, i), 32 * (size_t)w[i]));
	prefix_free(p);
	p = prefix_new(be, c, &(struct prefix_config){ 32, 4 * prefix_block_bytes(c, w, 32), 0,
	    w, 0 }, err);
	CHECK(p != NULL && state_reset(a) == 0);
	if (p == NULL)
		goto out;
	CHECK(model_forward(ring, a, tok, 100, MODEL_PREFILL, NULL, NULL) == 0);
	CHECK(prefix_insert(p, -1, tok, NULL, 32, a, PREFIX_OPEN) == -1);
	CHECK_EQ_STR(prefix_errmsg(p), "prefix cache: the block that ends at 32: its rows left "
	    "the rings (at 100, rings of 36 rows)");
	prefix_stats(p, &ps);
	CHECK_EQ_INT(ps.blocks, 0);
out:
	prefix_free(p);
	state_free(a), state_free(b);
}

int
main(void)
{
	char err[UTIL_ERRLEN];

	if ((be = backend_open("cpu", 2, err)) == NULL || (ring = open_g4(32, err)) == NULL ||
	    (whole = open_g4(MODEL_RING_ROWS, err)) == NULL) {
		printf("not ok open: %s\n", err);
		return 1;
	}
	nv = model_hparams(ring)->n_vocab, ne = model_hparams(ring)->n_embd;
	RUN(rings_hold_the_window_and_a_piece);
	RUN(a_ring_decodes_the_bits_of_a_whole_cache);
	RUN(sequences_in_a_batch_over_rings);
	RUN(a_piece_never_cuts_an_image);
	RUN(the_assistant_drafts_over_rings);
	RUN(the_prefix_cache_takes_no_rows_a_ring_has_left);
	model_close(ring), model_close(whole);
	backend_close(be);
	return test_summary();
}
