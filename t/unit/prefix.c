/*
 * prefix: the prefix cache's bookkeeping on small made-up states (CPU
 * backend): chains found only where every token, the tag and the parent
 * match (with every key forced to collide too), the longest chain that
 * leaves a token and ends in a block with a snapshot, restore of rows,
 * recurrent state and position (caches narrower than kv_dim too, as
 * gemma4's), LRU eviction from a chain's end, pins, the pool of snapshots
 * (blocks of rows only between them, snapshots evicted from blocks that
 * stay, a block stored without one when none can go), and a budget that is
 * never exceeded.
 */
#include "backend.h"
#include "prefix.h"
#include "state.h"
#include "test.h"
#include "util.h"

#define BLK 4

static struct backend *be;
static const struct state_config shape = {
	.n_ctx = 64, .n_kv = 2, .kv_dim = 3, .n_rec = 2, .conv_dim = 5, .d_conv = 3,
	.n_v_heads = 2, .dk = 2, .dv = 3, .n_snap = 0,
};

/* A state at position n whose KV rows and recurrent state are functions of ids[0..n). */
static struct state *
state_of(const int32_t *ids, int n)
{
	char err[UTIL_ERRLEN];
	struct state *st = state_new(be, &shape, err);
	size_t rec = state_rec_floats(&shape);
	float *r = malloc(rec * sizeof *r);
	float h = 0;

	for (int p = 0; p < n; p++) {
		h = h * 0.5f + (float)ids[p];
		for (int i = 0; i < shape.n_kv; i++)
			for (int j = 0; j < shape.kv_dim; j++)
				state_k(st, i)[p * shape.kv_dim + j] = h + i + 0.1f * j,
				state_v(st, i)[p * shape.kv_dim + j] = -h - i;
	}
	for (size_t j = 0; j < rec; j++)
		r[j] = h + (float)j;
	state_rec_load(st, r);
	state_seek(st, n);
	free(r);
	return st;
}

/* 1 when a and b agree on KV rows [0, n), the recurrent state and the position. */
static int
same(struct state *a, struct state *b, int n)
{
	size_t rec = state_rec_floats(&shape);
	float *ra = malloc(rec * sizeof *ra), *rb = malloc(rec * sizeof *rb);
	int ok = state_pos(a) == state_pos(b);

	state_rec_save(a, ra), state_rec_save(b, rb);
	ok = ok && memcmp(ra, rb, rec * sizeof *ra) == 0;
	for (int i = 0; i < shape.n_kv; i++)
		ok = ok && memcmp(state_k(a, i), state_k(b, i), n * shape.kv_dim * sizeof(float)) == 0 &&
		    memcmp(state_v(a, i), state_v(b, i), n * shape.kv_dim * sizeof(float)) == 0;
	free(ra), free(rb);
	return ok;
}

static struct prefix *
cache(int blocks, uint64_t mask)
{
	char err[UTIL_ERRLEN];
	struct prefix_config pc = { BLK, blocks * prefix_block_bytes(&shape, NULL, BLK), mask, NULL, 0 };
	struct prefix *p = prefix_new(be, &shape, &pc, err);

	if (p == NULL)
		printf("# %s\n", err);
	return p;
}

/* Store every block of ids[0..n) (n a multiple of BLK) from its state; the last id. */
static int
store(struct prefix *p, const int32_t *ids, int n, int mtp)
{
	int last = -1;

	for (int end = BLK; end <= n; end += BLK) {
		struct state *st = state_of(ids, end);

		last = prefix_insert(p, last, ids, NULL, end, st, mtp ? PREFIX_MTP : 0);
		state_free(st);
		if (last < 0)
			return -1;
	}
	return last;
}

static void
check_chains(uint64_t mask)
{
	int32_t a[13] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 };
	int32_t b[13] = { 1, 2, 3, 4, 5, 6, 7, 9, 9, 10, 11, 12, 13 };	/* differs in block 1 */
	int32_t c[13] = { 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 };	/* differs in block 0 */
	struct prefix *p = cache(16, mask);
	struct state *st = state_new(be, &shape, (char[UTIL_ERRLEN]){ 0 }), *ref;
	int last;

	CHECK(p != NULL && store(p, a, 12, 0) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 0, &last), 12);	/* a token left */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 12, 0, &last), 8);	/* 12 would leave none */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 4, 0, &last), 0);
	CHECK_EQ_INT(last, -1);
	CHECK_EQ_INT(prefix_lookup(p, b, NULL, 13, 0, &last), 4);
	CHECK_EQ_INT(prefix_lookup(p, c, NULL, 13, 0, &last), 0);	/* a later block never matches alone */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 1, &last), 0);	/* no MTP rows */
	/* b's second block beside a's: both found, each by its own tokens */
	CHECK(store(p, b, 12, 1) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, b, NULL, 13, 0, &last), 12);
	CHECK_EQ_INT(prefix_lookup(p, b, NULL, 13, 1, &last), 12);	/* b stored its MTP rows */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 1, &last), 4);	/* a's first block is b's */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 0, &last), 12);
	CHECK(prefix_restore(p, last, st) == 0);
	ref = state_of(a, 12);
	CHECK(same(st, ref, 12));
	state_free(ref);
	prefix_free(p);
	state_free(st);
}

TEST(a_chain_is_found_by_every_token_and_restores_its_state)
{
	check_chains(0);
}

TEST(keys_forced_to_collide_never_give_a_wrong_chain)
{
	check_chains(0);	/* 64-bit keys */
	check_chains(1);	/* two keys in all */
	check_chains(~0ULL << 63);	/* one bit */
}

TEST(a_full_cache_evicts_the_least_recently_used_chain_end)
{
	int32_t a[9] = { 1, 1, 1, 1, 2, 2, 2, 2, 0 }, b[9] = { 3, 3, 3, 3, 4, 4, 4, 4, 0 };
	int32_t c[9] = { 5, 5, 5, 5, 6, 6, 6, 6, 0 };
	struct prefix *p = cache(4, 0);
	struct prefix_stats s;
	int last;

	CHECK(p != NULL);
	if (p == NULL)
		return;
	CHECK(store(p, a, 8, 0) >= 0 && store(p, b, 8, 0) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 9, 0, &last), 8);	/* a is now the newer */
	CHECK(store(p, c, 8, 0) >= 0);	/* evicts b's end, then b's start */
	prefix_stats(p, &s);
	CHECK_EQ_INT(s.blocks, 4);
	CHECK_EQ_INT(s.evictions, 2);
	CHECK_EQ_INT(prefix_lookup(p, b, NULL, 9, 0, &last), 0);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 9, 0, &last), 8);
	CHECK_EQ_INT(prefix_lookup(p, c, NULL, 9, 0, &last), 8);
	/* pinned chains stay; when nothing can go, nothing is stored */
	prefix_pin(p, last);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 9, 0, &last), 8);
	prefix_pin(p, last);
	CHECK_EQ_INT(store(p, b, 4, 0), -1);
	CHECK(strstr(prefix_errmsg(p), "full") != NULL);
	prefix_unpin(p, last);
	CHECK(store(p, b, 4, 0) >= 0);	/* a's end goes, c's stays pinned */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 9, 0, &last), 4);
	CHECK_EQ_INT(prefix_lookup(p, c, NULL, 9, 0, &last), 8);
	prefix_free(p);
}

TEST(the_budget_is_never_exceeded)
{
	struct prefix_stats s;
	struct prefix *p = cache(5, 0);
	uint64_t x = 88172645463325252ULL;
	char err[UTIL_ERRLEN];
	struct prefix_config tiny = { BLK, prefix_block_bytes(&shape, NULL, BLK) - 1, 0, NULL, 0 };

	CHECK(prefix_new(be, &shape, &tiny, err) == NULL && strstr(err, "holds no block"));
	CHECK(p != NULL);
	for (int i = 0; p != NULL && i < 200; i++) {
		int32_t ids[17];
		int n = BLK * (1 + i % 4), last;

		for (int k = 0; k < n + 1; k++)
			x ^= x << 13, x ^= x >> 7, x ^= x << 17, ids[k] = (int32_t)(x % 3);
		if (prefix_lookup(p, ids, NULL, n + 1, 0, &last) < n)
			store(p, ids, n, i % 2);
		prefix_stats(p, &s);
		if (s.bytes > s.budget || s.arena > s.budget || s.blocks > s.max_blocks) {
			FAILF("after %d requests: %zu bytes in %d blocks, %zu allocated, budget %zu",
			    i + 1, s.bytes, s.blocks, s.arena, s.budget);
			break;
		}
	}
	prefix_stats(p, &s);
	CHECK_EQ_INT(s.max_blocks, 5);
	CHECK(s.evictions > 0 && s.hits > 0);
	prefix_free(p);
}

TEST(a_block_is_stored_only_where_its_chain_ends)
{
	int32_t a[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct prefix *p = cache(4, 0);
	struct state *st = state_of(a, 8);

	CHECK(prefix_insert(p, -1, a, NULL, 8, st, 0) == -1);	/* block 1 needs its parent */
	CHECK(prefix_insert(p, -1, a, NULL, 6, st, 0) == -1);	/* not a block end */
	state_free(st);
	st = state_of(a, 4);
	CHECK(prefix_insert(p, -1, a, NULL, 4, st, 0) >= 0);
	CHECK(prefix_insert(p, -1, a, NULL, 8, st, 0) == -1);	/* the state is at 4 */
	state_free(st);
	prefix_free(p);
}

/* A cache of `units` units of stride blocks and two snapshots each. */
static struct prefix *
cache_of(int units, int stride)
{
	char err[UTIL_ERRLEN];
	struct prefix_config pc = { BLK, units * prefix_unit_bytes(&shape, NULL, BLK, stride), 0,
	    NULL, stride };
	struct prefix *p = prefix_new(be, &shape, &pc, err);

	if (p == NULL)
		printf("# %s\n", err);
	return p;
}

/* Store ids[0..n)'s blocks as a prefill of forwards ending at each multiple of
 * every (in tokens) and at n: a snapshot there, rows only elsewhere; the last id. */
static int
store_cut(struct prefix *p, const int32_t *ids, int n, int every, int parent, int from)
{
	int last = parent;

	for (int end = from + BLK; end <= n; end += BLK) {
		int stop = end % every == 0 || end == n;
		struct state *st = state_of(ids, stop ? end : (end / every + 1) * every < n ?
		    (end / every + 1) * every : n);

		last = prefix_insert(p, last, ids, NULL, end, st, stop ? 0 : PREFIX_OPEN);
		state_free(st);
		if (last < 0)
			return -1;
	}
	return last;
}

TEST(snapshots_are_kept_only_where_a_forward_ended_and_cost_their_own_pool)
{
	int32_t a[41];
	struct prefix *p = cache_of(2, 4);
	struct state *st = state_new(be, &shape, (char[UTIL_ERRLEN]){ 0 }), *ref;
	struct prefix_stats s;
	size_t rb = 2 * BLK * shape.n_kv * shape.kv_dim * sizeof(float);
	size_t sb = state_rec_floats(&shape) * sizeof(float);
	int last;

	for (int i = 0; i < 41; i++)
		a[i] = 100 + i;
	CHECK(p != NULL);
	if (p == NULL)
		return;
	prefix_stats(p, &s);
	CHECK_EQ_INT(s.max_blocks, 8);
	CHECK_EQ_INT(s.max_snaps, 4);
	CHECK_EQ_INT((int)s.block_bytes, (int)rb);
	CHECK_EQ_INT((int)s.snap_bytes, (int)sb);
	CHECK(s.arena == 8 * rb + 4 * sb && s.arena <= s.budget);
	/* forwards [0, 16), [16, 28): snapshots at 16 and 28 only */
	CHECK(store_cut(p, a, 28, 16, -1, 0) >= 0);
	prefix_stats(p, &s);
	CHECK_EQ_INT(s.blocks, 7);
	CHECK_EQ_INT(s.snaps, 2);
	CHECK(s.bytes == 7 * rb + 2 * sb);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 29, 0, &last), 28);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 28, 0, &last), 16);	/* 24: rows only */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 16, 0, &last), 0);	/* 4, 8, 12: rows only */
	CHECK_EQ_INT(prefix_chain(p, a, NULL, 24, &last), 24);	/* the rows' chain */
	CHECK_EQ_INT(prefix_chain(p, a, NULL, 41, &last), 28);
	CHECK(prefix_restore(p, last, st) == 0);	/* its end has a snapshot */
	ref = state_of(a, 28);
	CHECK(same(st, ref, 28));
	state_free(ref);
	CHECK_EQ_INT(prefix_chain(p, a, NULL, 24, &last), 24);
	CHECK(prefix_restore(p, last, st) == -1);	/* no snapshot at 24 */
	CHECK(prefix_lookup(p, a, NULL, 17, 0, &last) == 16 && prefix_restore(p, last, st) == 0);
	ref = state_of(a, 16);
	CHECK(same(st, ref, 16));
	state_free(ref), state_free(st);
	prefix_free(p);
}

TEST(a_full_pool_of_snapshots_takes_the_least_recently_used_but_keeps_its_blocks)
{
	int32_t a[13], b[13], c[13];
	struct prefix *p = cache_of(1, 4);	/* 4 blocks, 2 snapshots */
	struct state *b4;
	struct prefix_stats s;
	int last, pa, pc;

	for (int i = 0; i < 13; i++)
		a[i] = 10 + i, b[i] = 50 + i, c[i] = 90 + i;
	CHECK(p != NULL);
	if (p == NULL)
		return;
	CHECK(store_cut(p, a, 8, 8, -1, 0) >= 0);	/* a snapshot at 8 only */
	CHECK(store_cut(p, b, 4, 4, -1, 0) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 0, &last), 8);	/* a is now the newer */
	CHECK(store_cut(p, c, 4, 4, -1, 0) >= 0);	/* takes b's snapshot */
	prefix_stats(p, &s);
	CHECK(s.blocks == 4 && s.snaps == 2 && s.snap_evictions == 1 && s.evictions == 0);
	CHECK_EQ_INT(prefix_lookup(p, b, NULL, 13, 0, &last), 0);
	CHECK_EQ_INT(prefix_chain(p, b, NULL, 4, &last), 4);	/* its rows stay */
	CHECK_EQ_INT(prefix_lookup(p, c, NULL, 13, 0, &last), 4);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 0, &last), 8);
	/* pinned snapshots stay: with both pinned, b's block gets none */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 0, &pa), 8);
	CHECK_EQ_INT(prefix_lookup(p, c, NULL, 13, 0, &pc), 4);
	prefix_pin(p, pa), prefix_pin(p, pc);
	b4 = state_of(b, 4);
	CHECK(prefix_insert(p, -1, b, NULL, 4, b4, 0) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, b, NULL, 13, 0, &last), 0);
	/* unpinned, c's goes to b, stored again where its prefill stopped */
	prefix_unpin(p, pc);
	CHECK(prefix_insert(p, -1, b, NULL, 4, b4, 0) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, b, NULL, 13, 0, &last), 4);
	CHECK_EQ_INT(prefix_lookup(p, c, NULL, 13, 0, &last), 0);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 0, &last), 8);
	CHECK(prefix_restore(p, pc, b4) == -1);	/* c's block: no snapshot to restore */
	prefix_unpin(p, pa);
	prefix_stats(p, &s);
	CHECK(s.snaps == 2 && s.snap_evictions == 2 && s.bytes <= s.budget);
	state_free(b4);
	prefix_free(p);
}

TEST(the_budget_holds_blocks_and_snapshots_together)
{
	struct prefix_stats s;
	struct prefix *p = cache_of(3, 4);
	uint64_t x = 88172645463325252ULL;
	char err[UTIL_ERRLEN];
	struct prefix_config tiny = { BLK, prefix_unit_bytes(&shape, NULL, BLK, 4) - 1, 0, NULL,
	    4 };

	CHECK(prefix_new(be, &shape, &tiny, err) == NULL && strstr(err, "holds no block"));
	CHECK(p != NULL);
	for (int i = 0; p != NULL && i < 300; i++) {
		int32_t ids[33];
		int n = BLK * (1 + i % 8), last;

		for (int k = 0; k < n + 1; k++)
			x ^= x << 13, x ^= x >> 7, x ^= x << 17, ids[k] = (int32_t)(x % 3);
		if (prefix_lookup(p, ids, NULL, n + 1, 0, &last) < n)
			store_cut(p, ids, n, i % 3 ? 16 : 4, -1, 0);
		prefix_stats(p, &s);
		if (s.bytes > s.budget || s.arena > s.budget || s.blocks > s.max_blocks ||
		    s.snaps > s.max_snaps || s.bytes != s.blocks * s.block_bytes +
		    s.snaps * s.snap_bytes) {
			FAILF("after %d requests: %zu bytes in %d blocks and %d snapshots, %zu "
			    "allocated, budget %zu", i + 1, s.bytes, s.blocks, s.snaps, s.arena,
			    s.budget);
			break;
		}
	}
	prefix_stats(p, &s);
	CHECK(s.max_blocks == 12 && s.max_snaps == 6);
	CHECK(s.evictions > 0 && s.hits > 0 && s.snap_evictions > 0);
	prefix_free(p);
}

/* Tags t[3] for 12 tokens: block 1 tagged x (0: zero), the others zero. */
static void
tags_of(struct prefix_tag *t, int x)
{
	memset(t, 0, 3 * sizeof *t);
	for (int i = 0; x != 0 && i < (int)sizeof t[1].b; i++)
		t[1].b[i] = (uint8_t)(x * 31 + i);
}

static void
check_tags(uint64_t mask)
{
	int32_t a[13] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 };
	struct prefix_tag x[3], y[3], z[3];
	struct prefix *p = cache(16, mask);
	struct state *st = NULL, *ref = state_of(a, 12);
	int last = -1;

	tags_of(x, 1), tags_of(y, 2), tags_of(z, 0);
	for (int end = 4; p != NULL && end <= 12; end += 4) {
		state_free(st);
		st = state_of(a, end);
		last = prefix_insert(p, last, a, &x[end / 4 - 1], end, st, 0);
		CHECK(last >= 0);
	}
	CHECK_EQ_INT(prefix_lookup(p, a, x, 13, 0, &last), 12);
	CHECK_EQ_INT(prefix_lookup(p, a, y, 13, 0, &last), 4);	/* another image in block 1 */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 0, &last), 4);	/* no image there */
	CHECK_EQ_INT(prefix_lookup(p, a, z, 13, 0, &last), 4);	/* zero tags are no tags */
	/* the same tokens under another tag: a block of its own beside x's */
	CHECK_EQ_INT(prefix_lookup(p, a, y, 5, 0, &last), 4);
	state_free(st);
	st = state_of(a, 8);
	CHECK(prefix_insert(p, last, a, &y[1], 8, st, 0) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, a, y, 13, 0, &last), 8);
	CHECK_EQ_INT(prefix_lookup(p, a, x, 13, 0, &last), 12);
	CHECK(prefix_restore(p, last, st) == 0 && same(st, ref, 12));
	state_free(st), state_free(ref);
	prefix_free(p);
}

TEST(a_blocks_tag_is_part_of_its_key)
{
	check_tags(0);
	check_tags(1);		/* every key the same */
}

TEST(an_open_block_holds_its_rows_for_the_chain_but_is_no_place_to_resume)
{
	int32_t a[13] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 };
	struct prefix *p = cache(8, 0);
	struct state *s4 = state_of(a, 4), *s8 = state_of(a, 8), *s12 = state_of(a, 12);
	struct state *st = state_of(a, 0);
	int b0, b1, last;

	CHECK(p != NULL);
	if (p == NULL)
		return;
	CHECK((b0 = prefix_insert(p, -1, a, NULL, 4, s4, 0)) >= 0);
	CHECK(prefix_insert(p, b0, a, NULL, 8, s4, PREFIX_OPEN) == -1);	/* before its end */
	CHECK(prefix_insert(p, b0, a, NULL, 8, s12, 0) == -1);	/* past it, not open */
	CHECK((b1 = prefix_insert(p, b0, a, NULL, 8, s12, PREFIX_OPEN)) >= 0);
	CHECK(prefix_insert(p, b1, a, NULL, 12, s12, 0) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 0, &last), 12);
	CHECK(prefix_restore(p, last, st) == 0 && same(st, s12, 12));	/* rows through b1 */
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 12, 0, &last), 4);	/* not at b1's end */
	CHECK_EQ_INT(last, b0);
	/* stored again where a prefill stopped at its end: resumable there */
	CHECK_EQ_INT(prefix_insert(p, b0, a, NULL, 8, s8, 0), b1);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 12, 0, &last), 8);
	CHECK(prefix_restore(p, last, st) == 0 && same(st, s8, 8));
	state_free(s4), state_free(s8), state_free(s12), state_free(st);
	prefix_free(p);
}

/* A state at position n whose cache i holds rows of width w[i] (gemma4's layout):
 * row p of cache i at p * w[i], each value a function of ids[0..p], i and the column. */
static struct state *
narrow_of(const int32_t *ids, int n, const int *w)
{
	struct state *st = state_new(be, &shape, (char[UTIL_ERRLEN]){ 0 });
	float h = 0;

	for (int p = 0; p < n; p++) {
		h = h * 0.5f + (float)ids[p];
		for (int i = 0; i < shape.n_kv; i++)
			for (int j = 0; j < w[i]; j++)
				state_k(st, i)[p * w[i] + j] = h + 10 * i + 0.1f * j,
				state_v(st, i)[p * w[i] + j] = -h - 10 * i - 0.1f * j;
	}
	state_seek(st, n);
	return st;
}

TEST(caches_narrower_than_kv_dim_keep_their_own_rows)
{
	static const int w[2] = { 1, 3 };	/* cache 0 one float a row, cache 1 kv_dim */
	int32_t a[13] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 };
	struct prefix_config pc = { BLK, 4 * prefix_block_bytes(&shape, w, BLK), 0, w, 0 };
	struct prefix *p = prefix_new(be, &shape, &pc, (char[UTIL_ERRLEN]){ 0 });
	struct state *ref = narrow_of(a, 12, w), *st = state_new(be, &shape, (char[UTIL_ERRLEN]){ 0 });
	struct prefix_stats ps;
	int last = -1, bad = 0;

	CHECK(p != NULL && prefix_block_bytes(&shape, w, BLK) < prefix_block_bytes(&shape, NULL,
	    BLK));
	for (int end = BLK; p != NULL && end <= 12; end += BLK) {
		struct state *s = narrow_of(a, end, w);

		last = prefix_insert(p, last, a, NULL, end, s, 0);
		state_free(s);
	}
	/* the slot held another sequence's rows before: they must not come back */
	for (int i = 0; i < shape.n_kv; i++)
		for (int j = 0; j < shape.n_ctx * shape.kv_dim; j++)
			state_k(st, i)[j] = state_v(st, i)[j] = 99;
	CHECK(last >= 0 && prefix_lookup(p, a, NULL, 13, 0, &last) == 12);
	CHECK(prefix_restore(p, last, st) == 0);
	for (int i = 0; i < shape.n_kv; i++)
		bad |= memcmp(state_k(st, i), state_k(ref, i), 12 * w[i] * sizeof(float)) != 0 ||
		    memcmp(state_v(st, i), state_v(ref, i), 12 * w[i] * sizeof(float)) != 0;
	CHECK(!bad);
	prefix_stats(p, &ps);
	CHECK_EQ_INT((int)(ps.block_bytes + ps.snap_bytes), (int)prefix_block_bytes(&shape, w, BLK));
	CHECK_EQ_INT((int)ps.snap_bytes, (int)(state_rec_floats(&shape) * sizeof(float)));
	CHECK(prefix_new(be, &shape, &(struct prefix_config){ BLK, pc.budget, 0,
	    (const int[2]){ 1, 4 }, 0 }, (char[UTIL_ERRLEN]){ 0 }) == NULL);	/* wider than kv_dim */
	state_free(ref), state_free(st);
	prefix_free(p);
}

/* A state shaped c at position n, each position's rows written as a forward writes them
 * (a ring keeps the last ring): functions of ids[0..p]. */
static struct state *
ring_state_of(const struct state_config *c, const int32_t *ids, int n)
{
	struct state *st = state_new(be, c, (char[UTIL_ERRLEN]){ 0 });
	float h = 0;

	for (int p = 0; st != NULL && p < n; p++) {
		h = h * 0.5f + (float)ids[p];
		for (int i = 0; i < c->n_kv; i++)
			for (int j = 0; j < c->kv_dim; j++) {
				int r = state_kv_row(c, i, p) * c->kv_dim + j;

				state_k(st, i)[r] = h + i + 0.1f * j, state_v(st, i)[r] = -h - i - p;
			}
	}
	if (st != NULL)
		state_seek(st, n);
	return st;
}

/* Floats of a and b that differ: rows [0, n) of the whole caches, the rows of a ring's
 * last ring positions before n. */
static long
ring_differ(const struct state_config *c, struct state *a, struct state *b, int n)
{
	long d = 0;

	for (int i = 0; i < c->n_kv; i++)
		for (int p = state_is_ring(c, i) && n > c->ring ? n - c->ring : 0; p < n; p++)
			for (int j = 0; j < c->kv_dim; j++) {
				int r = state_kv_row(c, i, p) * c->kv_dim + j;

				d += state_k(a, i)[r] != state_k(b, i)[r];
				d += state_v(a, i)[r] != state_v(b, i)[r];
			}
	return d;
}

/*
 * Ring caches (a DFlash drafter's sliding layers) beside a whole one: a
 * block keeps a ring's positions among its last ring before its end (its
 * bytes count them), and restoring a chain over a state that held another
 * prompt fills each ring with the last ring positions before the chain's
 * end, as a cold run's ring holds them: rings shorter than a block, as
 * long, spanning two blocks, three, and longer than the chain.
 */
TEST(a_restored_chain_fills_each_ring_with_its_last_positions)
{
	static const int rings[] = { 3, 4, 6, 11, 20 };
	int32_t a[13] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 }, b[13];

	for (int k = 0; k < 13; k++)
		b[k] = 40 + k;
	for (size_t t = 0; t < sizeof rings / sizeof *rings; t++) {
		struct state_config c = { .n_ctx = 64, .n_kv = 3, .kv_dim = 3, .n_ring = 2,
		    .ring = rings[t] };
		int kept = rings[t] < BLK ? rings[t] : BLK, last = -1;
		struct prefix_config pc = { BLK, 8 * prefix_block_bytes(&c, NULL, BLK), 0, NULL, 0 };
		struct prefix *p = prefix_new(be, &c, &pc, (char[UTIL_ERRLEN]){ 0 });
		struct state *st = ring_state_of(&c, b, 13), *cold = ring_state_of(&c, a, 12);

		CHECK_EQ_INT(prefix_block_bytes(&c, NULL, BLK), 2 * 3 * (BLK + 2 * kept) * sizeof(float));
		CHECK(p != NULL && st != NULL && cold != NULL);
		if (p == NULL || st == NULL || cold == NULL)
			goto next;
		for (int end = BLK; end <= 12 && last >= -1; end += BLK) {
			struct state *e = ring_state_of(&c, a, end);

			last = e != NULL ? prefix_insert(p, last, a, NULL, end, e, 0) : -2;
			state_free(e);
		}
		CHECK_EQ_INT(prefix_lookup(p, a, NULL, 13, 0, &last), 12);
		CHECK(prefix_restore(p, last, st) == 0 && state_pos(st) == 12);
		if (ring_differ(&c, st, cold, 12) != 0)
			FAILF("ring of %d: the restored rows are not the cold run's", rings[t]);
next:
		prefix_free(p);
		state_free(st), state_free(cold);
	}
}

int
main(void)
{
	char err[UTIL_ERRLEN];

	if ((be = backend_open("cpu", 1, err)) == NULL) {
		printf("not ok backend: %s\n", err);
		return 1;
	}
	RUN(a_chain_is_found_by_every_token_and_restores_its_state);
	RUN(keys_forced_to_collide_never_give_a_wrong_chain);
	RUN(a_full_cache_evicts_the_least_recently_used_chain_end);
	RUN(the_budget_is_never_exceeded);
	RUN(a_block_is_stored_only_where_its_chain_ends);
	RUN(snapshots_are_kept_only_where_a_forward_ended_and_cost_their_own_pool);
	RUN(a_full_pool_of_snapshots_takes_the_least_recently_used_but_keeps_its_blocks);
	RUN(the_budget_holds_blocks_and_snapshots_together);
	RUN(a_blocks_tag_is_part_of_its_key);
	RUN(an_open_block_holds_its_rows_for_the_chain_but_is_no_place_to_resume);
	RUN(caches_narrower_than_kv_dim_keep_their_own_rows);
	RUN(a_restored_chain_fills_each_ring_with_its_last_positions);
	backend_close(be);
	return test_summary();
}
