/*
 * state: positions, snapshots and rollback.  The rollback test runs a
 * tiny recurrent + attention layer through the backend and checks that a
 * speculative path (verify batches, partial acceptance, rollback) leaves
 * bit-identical outputs and state to plain one-token-at-a-time decode.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "state.h"
#include "test.h"
#include "util.h"

static struct backend *be;

static const struct state_config cfg = {
	.n_ctx = 16, .n_kv = 2, .kv_dim = 8, .n_rec = 1, .conv_dim = 3 * 8,
	.d_conv = 4, .n_v_heads = 1, .dk = 8, .dv = 8, .n_snap = 4,
};

enum { N = 12, CD = 24, KVD = 8, XTRA = 4 };	/* XTRA: rows drafted past the end */

static float xin[N + XTRA][CD + 2];	/* per row: conv input, alpha, beta */
static float w[CD * 4], ssm_a[1] = { -0.5f }, dt_bias[1] = { 0.1f };

/* One forward of m rows: conv + GDN into o[m][8], attention over cache 1 into a[m][8]. */
static int
layer(struct state *st, int r0, int m, int snap, float *o, float *a)
{
	static const struct backend_gdn g = { 1, 1, 8, 8, 0, 1, 1e-6f };
	static const struct backend_attn at = { 2, 1, 4, 0.5f, 0, 0, 0, 0, NULL, 0 };
	float y[5 * CD], al[5], bt[5];
	int p0 = m <= 5 ? state_push(st, m, snap) : -1;

	if (p0 < 0)
		return -1;
	for (int i = 0; i < m; i++) {
		al[i] = xin[r0 + i][CD];
		bt[i] = xin[r0 + i][CD + 1];
		/* K and V rows for position p0+i: the first 8 conv inputs */
		memcpy(state_k(st, 1) + (p0 + i) * KVD, xin[r0 + i], KVD * 4);
		memcpy(state_v(st, 1) + (p0 + i) * KVD, xin[r0 + i] + 8, KVD * 4);
	}
	if (backend_conv1d_silu(be, &xin[r0][0], CD + 2, m, CD, w, 4, state_conv(st, 0),
	    snap ? state_conv_snap(st, 0) : NULL, y) != 0 ||
	    backend_gdn_step(be, &g, m, y, CD, al, bt, ssm_a, dt_bias, state_ssm(st, 0),
	    snap ? state_ssm_snap(st, 0) : NULL, o) != 0)
		return -1;
	return backend_attention(be, &at, &xin[r0][16], CD + 2, 4, state_k(st, 1),
	    state_v(st, 1), m, p0, a);
}

static int
same_state(struct state *a, struct state *b)
{
	return memcmp(state_conv(a, 0), state_conv(b, 0), 3 * CD * 4) == 0 &&
	    memcmp(state_ssm(a, 0), state_ssm(b, 0), 64 * 4) == 0 &&
	    state_pos(a) == state_pos(b);
}

TEST(speculative_rollback_equals_plain_decode_bit_for_bit)
{
	char err[UTIL_ERRLEN];
	struct state *ref = state_new(be, &cfg, err), *st = state_new(be, &cfg, err);
	float ro[N][8], ra[N][8], o[N + XTRA][8], a[N + XTRA][8];
	/* (rows, snap, keep): prefill 5, verify 4 keep 2, verify 4 keep 4, verify 3 keep 1 */
	static const int plan[][3] = { { 5, 0, 5 }, { 4, 1, 2 }, { 4, 1, 4 }, { 3, 1, 1 } };
	int r = 0;

	CHECK(ref != NULL && st != NULL);
	for (int i = 0; i < N; i++)
		CHECK(layer(ref, i, 1, 0, ro[i], ra[i]) == 0);
	for (size_t p = 0; p < sizeof plan / sizeof *plan; p++) {
		int m = plan[p][0], keep = plan[p][2];

		CHECK(layer(st, r, m, plan[p][1], o[r], a[r]) == 0);
		if (plan[p][1])
			CHECK(state_rollback(st, keep) == 0);
		CHECK_EQ_INT(state_pos(st), r + keep);
		r += keep;
	}
	CHECK_EQ_INT(r, N);
	CHECK(memcmp(o, ro, sizeof ro) == 0);
	CHECK(memcmp(a, ra, sizeof ra) == 0);
	CHECK(same_state(st, ref));
	state_free(ref);
	state_free(st);
}

TEST(push_and_rollback_refuse_what_they_cannot_do)
{
	char err[UTIL_ERRLEN];
	struct state *st = state_new(be, &cfg, err);

	CHECK(state_push(st, 5, 1) == -1);
	CHECK_EQ_STR(state_errmsg(st), "state: 5 rows to snapshot, room for 4");
	CHECK(state_rollback(st, 1) == -1);
	CHECK_EQ_STR(state_errmsg(st), "state: rollback: the last batch kept no snapshots");
	CHECK_EQ_INT(state_push(st, 10, 0), 0);
	CHECK_EQ_INT(state_push(st, 3, 1), 10);
	CHECK(state_rollback(st, 0) == -1);
	CHECK(state_rollback(st, 4) == -1);
	CHECK(state_rollback(st, 3) == 0);
	CHECK(state_rollback(st, 3) == -1);	/* once per batch */
	CHECK(state_push(st, 4, 0) == -1);
	CHECK_EQ_STR(state_errmsg(st), "state: 4 rows at position 13 do not fit in a context of 16");
	CHECK(state_truncate(st, 2) == -1);
	CHECK(state_truncate(st, 13) == 0);
	CHECK(state_reset(st) == 0);
	CHECK_EQ_INT(state_pos(st), 0);
	CHECK(state_k(st, 2) == NULL);
	CHECK(state_ssm(st, 1) == NULL);
	state_free(st);
	state_free(NULL);
}

TEST(attention_only_states_truncate_and_copy)
{
	char err[UTIL_ERRLEN];
	struct state_config c = { .n_ctx = 8, .n_kv = 1, .kv_dim = 4 };
	struct state *a = state_new(be, &c, err), *b = state_new(be, &c, err);

	CHECK(a != NULL && b != NULL);
	CHECK(state_conv_snap(a, 0) == NULL);
	CHECK_EQ_INT(state_push(a, 6, 0), 0);
	for (int i = 0; i < 24; i++)
		state_k(a, 0)[i] = i;
	CHECK(state_truncate(a, 3) == 0);
	CHECK_EQ_INT(state_pos(a), 3);
	CHECK(state_copy(b, a) == 0);
	CHECK_EQ_INT(state_pos(b), 3);
	CHECK(memcmp(state_k(b, 0), state_k(a, 0), 12 * 4) == 0);
	c.n_ctx = 0;
	CHECK(state_new(be, &c, err) == NULL);
	CHECK_EQ_STR(err, "state: bad config (n_ctx 0, 1 caches, 0 recurrent layers, 0 snapshots)");
	state_free(a);
	state_free(b);
}

/*
 * Each set of buffers is one allocation: a device hands out memory in
 * pages (2 MiB on a GPU), and a buffer a cache wasted up to a page each
 * (a 60-layer model: 120 a session) past what the scheduler's fit counts.
 * The caches of K lie one after another, each at a multiple of 16 floats;
 * so do V's and the recurrent layers'.
 */
TEST(a_states_caches_are_one_allocation_a_set)
{
	char err[UTIL_ERRLEN];
	struct state_config c = { .n_ctx = 10, .n_kv = 3, .kv_dim = 6, .n_ring = 1, .ring = 3,
	    .n_rec = 2, .conv_dim = 8, .d_conv = 4, .n_v_heads = 2, .dk = 4, .dv = 4, .n_snap = 2 };
	struct state *s = state_new(be, &c, err);

	CHECK(s != NULL);
	if (s == NULL)
		return;
	/* 10 x 6 = 60 floats, rounded to 64; the ring's 3 x 6 = 18 to 32 */
	CHECK(state_k(s, 1) == state_k(s, 0) + 64 && state_k(s, 2) == state_k(s, 1) + 64);
	CHECK(state_v(s, 1) == state_v(s, 0) + 64 && state_v(s, 2) == state_v(s, 1) + 64);
	CHECK(state_conv(s, 1) == state_conv(s, 0) + 32);	/* (4 - 1) x 8 = 24 */
	CHECK(state_ssm(s, 1) == state_ssm(s, 0) + 32);	/* 2 x 4 x 4 */
	CHECK(state_conv_snap(s, 1) == state_conv_snap(s, 0) + 48);	/* 2 x 24 */
	CHECK(state_ssm_snap(s, 1) == state_ssm_snap(s, 0) + 64);
	CHECK_EQ_INT(state_bytes(&c), 4 * (2 * (2 * 60 + 18) + (24 + 32) * 2 * 3));
	state_free(s);
}

/*
 * Caches of different widths (kv_w: gemma4's sliding and global layers):
 * each as large as its own rows, the bytes counting each; a copy takes
 * each cache's rows written at its width, rings save theirs; a width
 * outside 1..kv_dim is refused.
 */
TEST(caches_of_their_own_widths)
{
	char err[UTIL_ERRLEN];
	int kw[3] = { 8, 4, 2 }, bad[3] = { 8, 9, 2 };
	struct state_config c = { .n_ctx = 10, .n_kv = 3, .kv_dim = 8, .n_ring = 1, .ring = 4,
	    .kv_w = kw };
	struct state *a = state_new(be, &c, err), *b = state_new(be, &c, err);

	CHECK(a != NULL && b != NULL);
	if (a == NULL || b == NULL)
		goto out;
	/* 10 x 8 = 80 floats (rounded to 80), 10 x 4 = 40 (48), the ring's 4 x 2 = 8 */
	CHECK(state_k(a, 1) == state_k(a, 0) + 80 && state_k(a, 2) == state_k(a, 1) + 48);
	CHECK_EQ_INT(state_bytes(&c), 4 * 2 * (80 + 40 + 8));
	CHECK_EQ_INT(state_ring_floats(&c), 2 * 4 * 2);
	for (int p = 0; p < 6; p++)
		for (int i = 0; i < 3; i++)
			for (int j = 0; j < kw[i]; j++)
				state_k(a, i)[state_kv_row(&c, i, p) * kw[i] + j] = 100 * i + 10 * p + j,
				state_v(a, i)[state_kv_row(&c, i, p) * kw[i] + j] = -(100 * i + 10 * p + j);
	CHECK(state_seek(a, 6) == 0 && state_copy(b, a) == 0);
	CHECK(state_k(b, 0)[5 * 8 + 7] == 57 && state_v(b, 1)[5 * 4 + 3] == -153);
	CHECK(state_k(b, 2)[(5 % 4) * 2 + 1] == 251 && state_v(b, 2)[(4 % 4) * 2] == -240);
	c.kv_w = bad;
	CHECK(state_new(be, &c, err) == NULL && strstr(err, "cache 1: rows of 9 floats") != NULL);
out:
	state_free(a);
	state_free(b);
}

/*
 * Rings (a sliding layer's cache): the last n_ring caches hold ring rows,
 * position p in row p % ring; the bytes count ring rows for them; a span
 * of positions wraps once; save and load copy every ring row; a copy
 * takes the rows written; a bad ring is refused.
 */
TEST(ring_caches_keep_their_last_positions_in_rows_mod_ring)
{
	char err[UTIL_ERRLEN];
	struct state_config c = { .n_ctx = 100, .n_kv = 3, .kv_dim = 4, .n_ring = 2, .ring = 6 };
	struct state *a = state_new(be, &c, err), *b = state_new(be, &c, err);
	size_t nf = state_ring_floats(&c);
	float *snap = malloc(nf * sizeof *snap);

	CHECK(a != NULL && b != NULL);
	if (a == NULL || b == NULL)
		goto out;
	CHECK_EQ_INT(state_bytes(&c), (100 + 2 * 6) * 4 * 2 * 4);
	CHECK_EQ_INT(nf, 2 * 6 * 4 * 2);
	CHECK(!state_is_ring(&c, 0) && state_is_ring(&c, 1) && state_is_ring(&c, 2));
	CHECK(state_is_ring(&c, 3) == 0);
	CHECK_EQ_INT(state_kv_row(&c, 0, 17), 17);
	CHECK_EQ_INT(state_kv_row(&c, 1, 17), 5);
	CHECK_EQ_INT(state_kv_rows(&c, 0, 17, 9), 9);
	CHECK_EQ_INT(state_kv_rows(&c, 2, 17, 9), 1);	/* row 5, then from row 0 */
	CHECK_EQ_INT(state_kv_rows(&c, 2, 12, 6), 6);
	for (int p = 0; p < 20; p++)	/* positions 0..19: the rings keep 14..19 */
		for (int i = 0; i < 3; i++)
			for (int j = 0; j < 4; j++)
				state_k(a, i)[state_kv_row(&c, i, p) * 4 + j] = p * 10 + i,
				state_v(a, i)[state_kv_row(&c, i, p) * 4 + j] = -p;
	CHECK(state_seek(a, 20) == 0);
	for (int p = 14; p < 20; p++)
		CHECK(state_k(a, 2)[(p % 6) * 4] == p * 10 + 2 && state_v(a, 1)[(p % 6) * 4] == -p);
	CHECK(state_ring_save(a, snap) == 0);
	CHECK(state_copy(b, a) == 0 && state_pos(b) == 20);
	CHECK(memcmp(state_k(b, 0), state_k(a, 0), 20 * 4 * 4) == 0);
	CHECK(memcmp(state_v(b, 2), state_v(a, 2), 6 * 4 * 4) == 0);
	for (int i = 1; i < 3; i++)
		memset(state_k(b, i), 0, 6 * 4 * 4), memset(state_v(b, i), 0, 6 * 4 * 4);
	CHECK(state_ring_load(b, snap) == 0);
	for (int i = 1; i < 3; i++)
		CHECK(memcmp(state_k(b, i), state_k(a, i), 6 * 4 * 4) == 0 &&
		    memcmp(state_v(b, i), state_v(a, i), 6 * 4 * 4) == 0);
	c.ring = 0;
	CHECK(state_new(be, &c, err) == NULL);
	CHECK_EQ_STR(err, "state: 2 of 3 caches rings of 0 rows");
	c.ring = 6, c.n_ring = 4;
	CHECK(state_new(be, &c, err) == NULL);
out:
	state_free(a), state_free(b);
	free(snap);
}

/*
 * Going back with rings: a ring of 6 rows under a window of 3 keys keeps
 * the window before any position at most 6 - 3 + 1 = 4 back, so truncating
 * from 20 to 16 works and to 15 is refused with the reason; a state
 * without rings goes back anywhere; a window wider than the ring is
 * refused.
 */
TEST(rings_go_back_only_as_far_as_they_keep_the_window)
{
	char err[UTIL_ERRLEN];
	struct state_config c = { .n_ctx = 100, .n_kv = 2, .kv_dim = 4, .n_ring = 1, .ring = 6,
	    .window = 3 };
	struct state *a = state_new(be, &c, err);

	CHECK(a != NULL);
	if (a == NULL)
		return;
	CHECK(state_seek(a, 20) == 0);
	CHECK(state_back(a, 16) && state_back(a, 20) && !state_back(a, 15) && !state_back(a, 21));
	CHECK(state_truncate(a, 15) == -1);
	CHECK_EQ_STR(state_errmsg(a), "state: truncate: back 5 positions from 20, past what its "
	    "rings of 6 rows keep (a window of 3 keys)");
	CHECK(state_pos(a) == 20 && state_truncate(a, 16) == 0 && state_pos(a) == 16);
	state_free(a);
	c.n_ring = 0, c.ring = 0;
	CHECK((a = state_new(be, &c, err)) != NULL && state_seek(a, 20) == 0 && state_back(a, 0) &&
	    state_truncate(a, 1) == 0);
	state_free(a);
	c.n_ring = 1, c.ring = 6, c.window = 7;
	CHECK(state_new(be, &c, err) == NULL);
	CHECK_EQ_STR(err, "state: rings of 6 rows, a window of 7 keys");
}

int
main(void)
{
	char err[UTIL_ERRLEN];
	uint32_t r = 12345;

	if ((be = backend_open("cpu", 2, err)) == NULL) {
		printf("not ok open: %s\n", err);
		return 1;
	}
	for (size_t i = 0; i < sizeof xin / sizeof xin[0][0]; i++)
		(&xin[0][0])[i] = ((r = r * 1664525 + 1013904223) >> 8) / 8388608.0f - 1;
	for (size_t i = 0; i < sizeof w / sizeof *w; i++)
		w[i] = ((r = r * 1664525 + 1013904223) >> 8) / 8388608.0f - 1;
	RUN(speculative_rollback_equals_plain_decode_bit_for_bit);
	RUN(push_and_rollback_refuse_what_they_cannot_do);
	RUN(attention_only_states_truncate_and_copy);
	RUN(ring_caches_keep_their_last_positions_in_rows_mod_ring);
	RUN(rings_go_back_only_as_far_as_they_keep_the_window);
	RUN(a_states_caches_are_one_allocation_a_set);
	RUN(caches_of_their_own_widths);
	backend_close(be);
	return test_summary();
}
