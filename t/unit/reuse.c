/*
 * reuse: the scheduler's prefix cache and reuse pool on the qwen35 fixture
 * (../shared/models/A, or MEMRA_MODEL_A) on the CPU, and on Gemma-4's
 * rings (t/data/gemma4/g4-dense).  A reply served from
 * a cache hit or a parked conversation is the cold reply, token for token:
 * multi-turn conversations (speculative decoding on and off), short ones
 * under a chunk of 512 that resume at blocks of 64, a shared prefix under
 * concurrency, a cache and a pool too small for the load.
 * (Beside t/unit/schedule.c, which other work edits too.)
 */
#include <pthread.h>
#include <stdlib.h>

#include "backend.h"
#include "model.h"
#include "prefix.h"
#include "schedule.h"
#include "schedrun.h"
#include "test.h"
#include "util.h"

#define CHUNK 64
#define TURNS 6
#define NCONV 3
#define MAXGEN 16
#define MAXIDS 1000

static struct backend *be;
static struct model *ma;
static int chunk = CHUNK, block;	/* the scheduler's chunk and prefix block (0: its default) */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

struct notes {
	pthread_mutex_t mu;
	int	reuse, cold, tokens;
	int	rings;		/* cold notes that name the rings */
};
static struct notes notes = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0 };

static void
on_note(void *arg, const struct sched_note *n)
{
	struct notes *c = arg;

	pthread_mutex_lock(&c->mu);
	if (n->kind == SCHED_NOTE_REUSE)
		c->reuse++, c->tokens += n->tokens;
	else
		c->cold++;
	c->rings += n->why != NULL && strstr(n->why, "rings keep") != NULL;
	pthread_mutex_unlock(&c->mu);
}

static int32_t
rand_id(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (int32_t)(rng % (uint64_t)model_hparams(ma)->n_vocab);
}

/* A scheduler of `sessions` (K > 0: speculative, pinned) with the pool
 * (reuse) and a prefix cache of `blocks` units (prefix_unit_bytes: a block
 * and a snapshot where the block is the chunk), its worker running. */
static int
start(struct run *r, int sessions, int K, int reuse, int blocks)
{
	struct sched_config c;
	char err[UTIL_ERRLEN];

	sched_config_defaults(&c, be, MAXIDS + MAXGEN + 8, sessions);
	c.chunk = chunk, c.step_prefill = 2 * chunk, c.max_queue = 64, c.reserve = 0;
	c.block = block;
	c.reuse = reuse, c.note = on_note, c.note_arg = &notes;
	if ((r->s = sched_new(be, &c, err)) != NULL) {
		struct state *st = model_state_new(ma, 1, 0, err);

		int B = block ? block : chunk % 64 == 0 ? 64 : chunk;

		if (st != NULL)
			c.prefix_bytes = blocks * prefix_unit_bytes(state_config(st), NULL, B, chunk / B);
		state_free(st);
		sched_free(r->s);
		r->s = st != NULL ? sched_new(be, &c, err) : NULL;
	}
	if (r->s == NULL || (r->lane = sched_add_model(r->s, ma, K, K > 0, NULL, err)) < 0) {
		FAILF("%s", err);
		sched_free(r->s);
		return -1;
	}
	pthread_create(&r->w, NULL, worker, r->s);
	return 0;
}

static struct sched_seq *
submit(struct run *r, const int32_t *ids, int n)
{
	static const int32_t eos[] = { 0 };
	struct sched_req q = { .lane = r->lane, .ids = ids, .n_ids = n, .max_tokens = MAXGEN,
	    .stop = eos, .n_stop = 1 };
	char err[UTIL_ERRLEN];
	int full;
	struct sched_seq *h;

	sample_defaults(&q.sp);
	if ((h = sched_submit(r->s, &q, &full, err)) == NULL)
		FAILF("submit: %s", err);
	return h;
}

/* Every token of h into out[MAXGEN]; their count; *cached its cached tokens. */
static int
collect(struct run *r, struct sched_seq *h, int32_t *out, int *cached)
{
	int n = 0, fin;

	if (h == NULL)
		return -1;
	do
		n += sched_read(r->s, h, out + n, MAXGEN - n, &fin, -1);
	while (fin == SCHED_RUNNING && n < MAXGEN);
	if (cached != NULL)
		*cached = sched_seq_cached(r->s, h);
	sched_release(r->s, h);
	return n;
}

/* Conversation c's turns: the prompt grows by the reply and a new message. */
struct conv {
	int32_t	ids[MAXIDS];
	int	n[TURNS];		/* prompt length of each turn */
	int32_t	reply[TURNS][MAXGEN];
	int	n_reply[TURNS];
};
static struct conv conv[NCONV], sconv[NCONV];

/* Cold replies of NCONV conversations into cv of TURNS turns: the first
 * prompt first + step c ids, each turn's prompt the one before, its reply
 * and 10..10 + spread - 1 new ids. */
static void
make_turns(struct conv *cv, int first, int step, int spread)
{
	struct run r;

	if (start(&r, 1, 0, 0, 0) != 0)
		return;
	for (int c = 0; c < NCONV; c++) {
		struct conv *v = &cv[c];
		int n = first + step * c;

		for (int k = 0; k < n; k++)
			v->ids[k] = rand_id();
		for (int t = 0; t < TURNS; t++) {
			v->n[t] = n;
			v->n_reply[t] = collect(&r, submit(&r, v->ids, n), v->reply[t], NULL);
			memcpy(v->ids + n, v->reply[t], v->n_reply[t] * sizeof *v->ids);
			n += v->n_reply[t];
			for (int k = 10 + (int)(rng % spread), e = n + k; n < e; n++)
				v->ids[n] = rand_id();
		}
	}
	run_stop(&r);
}

/* Cold replies of NCONV conversations of TURNS turns, 40 + 37 c ids first, each turn
 * 10..69 new ids. */
static void
make_convs(void)
{
	make_turns(conv, 40, 37, 60);
}

/* The conversations cv's turns interleaved on r: each reply the cold one;
 * the tokens it did not recompute, in all, and by conversation and turn
 * into got_cached (may be NULL). */
static long
replay_of(struct run *r, struct conv *cv, int got_cached[NCONV][TURNS])
{
	long cached_all = 0;
	int B = block ? block : chunk % 64 == 0 ? 64 : chunk;

	for (int t = 0; t < TURNS; t++)
		for (int c = 0; c < NCONV; c++) {
			struct conv *v = &cv[c];
			int32_t got[MAXGEN];
			int cached = 0, n = collect(r, submit(r, v->ids, v->n[t]), got, &cached);

			if (n != v->n_reply[t] || memcmp(got, v->reply[t], n * sizeof *got) != 0)
				FAILF("conversation %d turn %d (%d ids, %d cached): %d tokens, cold %d",
				    c, t, v->n[t], cached, n, v->n_reply[t]);
			if (cached % B != 0 || cached >= v->n[t])
				FAILF("turn %d: %d cached of %d", t, cached, v->n[t]);
			cached_all += cached;
			if (got_cached != NULL)
				got_cached[c][t] = cached;
		}
	return cached_all;
}

static long
replay(struct run *r)
{
	return replay_of(r, conv, NULL);
}

static void
multi_turn_of(struct conv *cv, int K, int reuse, int blocks)
{
	struct run r;
	struct sched_stats st;
	struct prefix_stats ps;
	long cached;

	notes.reuse = notes.cold = notes.tokens = notes.rings = 0;
	if (start(&r, NCONV + 1, K, reuse, blocks) != 0)
		return;
	cached = replay_of(&r, cv, NULL);
	sched_stats(r.s, &st);
	CHECK(cached > 0);
	CHECK_EQ_INT(st.cached_tokens, cached);
	CHECK_EQ_INT(st.reused, notes.reuse);
	if (reuse && !blocks)
		CHECK(st.reused > 0 && notes.tokens == cached);
	if (!reuse)
		CHECK_EQ_INT(st.reused, 0);
	if (blocks) {
		CHECK(sched_prefix_stats(r.s, r.lane, &ps) == 0);
		CHECK(ps.inserts > 0 && ps.bytes <= ps.budget);
	} else
		CHECK(sched_prefix_stats(r.s, r.lane, &ps) == -1);
	if (K > 0)
		CHECK(st.spec_rounds > 0);
	run_stop(&r);
}

static void
multi_turn(int K, int reuse, int blocks)
{
	multi_turn_of(conv, K, reuse, blocks);
}

TEST(every_turn_from_the_pool_is_the_cold_reply)
{
	multi_turn(0, 1, 0);
}

TEST(every_turn_from_the_prefix_cache_is_the_cold_reply)
{
	multi_turn(0, 0, 64);
}

TEST(every_turn_from_both_is_the_cold_reply)
{
	multi_turn(0, 1, 64);
}

TEST(speculative_turns_from_the_pool_and_the_cache_are_the_cold_replies)
{
	multi_turn(3, 1, 0);
	multi_turn(3, 0, 64);
	multi_turn(3, 1, 64);
}

/* Cold replies of NCONV short conversations (every prompt under 512 ids)
 * on a scheduler of chunks of 512 and blocks of 64, neither reuse on: the
 * first prompt 70 + 30 c ids, each turn the reply and 10..39 new ids. */
static void
make_short(void)
{
	chunk = 512, block = 64;
	make_turns(sconv, 70, 30, 30);
	chunk = CHUNK, block = 0;
}

/* The short conversations from the pool, the cache or both (K > 0:
 * speculative): every reply the cold one, and from the second turn on
 * each turn resumes at the block of 64 its last prompt's prefill ended at
 * (with a chunk of 512, nothing before blocks of 64). */
static void
short_chat(int K, int reuse, int units)
{
	struct run r;
	int cached[NCONV][TURNS];
	struct sched_stats st;

	chunk = 512, block = 64;
	if (start(&r, NCONV + 1, K, reuse, units) == 0) {
		CHECK(replay_of(&r, sconv, cached) > 0);
		for (int c = 0; c < NCONV; c++)
			for (int t = 1; t < TURNS; t++) {
				int L = (sconv[c].n[t - 1] - 1) / 64 * 64;

				CHECK(sconv[c].n[t] < 512);
				if (cached[c][t] < L)
					FAILF("conversation %d turn %d: %d cached, %d resumable", c, t,
					    cached[c][t], L);
			}
		sched_stats(r.s, &st);
		if (K > 0)
			CHECK(st.spec_rounds > 0);
		run_stop(&r);
	}
	chunk = CHUNK, block = 0;
}

TEST(short_turns_resume_at_blocks_of_64_and_give_the_cold_replies)
{
	short_chat(0, 1, 0);
	short_chat(0, 0, 4);
	short_chat(0, 1, 4);
	short_chat(3, 1, 0);
	short_chat(3, 0, 4);
}

TEST(both_off_nothing_is_reused)
{
	struct run r;
	struct sched_stats st;

	if (start(&r, 2, 0, 0, 0) != 0)
		return;
	CHECK_EQ_INT(replay(&r), 0);
	sched_stats(r.s, &st);
	CHECK_EQ_INT(st.cached_tokens, 0);
	CHECK_EQ_INT(st.reused, 0);
	run_stop(&r);
}

/* 12 requests of one 200-id prefix and their own 8..30 ids, 4 at a time,
 * after the prefix was served once: each the cold reply, each a hit. */
TEST(a_shared_prefix_hits_under_concurrency)
{
	static int32_t ids[12][240];
	int32_t cold[12][MAXGEN], got[MAXGEN];
	int n[12], nc[12];
	struct run r;
	struct sched_seq *h[12];

	for (int i = 0; i < 12; i++) {
		n[i] = 200 + 8 + (int)(rng % 23);
		for (int k = 0; k < n[i]; k++)
			ids[i][k] = k < 200 ? ids[0][k] : rand_id();
		if (i == 0)
			for (int k = 0; k < 200; k++)
				ids[0][k] = rand_id();
	}
	if (start(&r, 1, 0, 0, 0) != 0)
		return;
	for (int i = 0; i < 12; i++)
		nc[i] = collect(&r, submit(&r, ids[i], n[i]), cold[i], NULL);
	run_stop(&r);
	if (start(&r, 4, 0, 0, 16) != 0)
		return;
	collect(&r, submit(&r, ids[0], n[0]), got, NULL);
	for (int i = 0; i < 12; i++)
		h[i] = submit(&r, ids[i], n[i]);
	for (int i = 0; i < 12; i++) {
		int cached, k = collect(&r, h[i], got, &cached);

		if (k != nc[i] || memcmp(got, cold[i], k * sizeof *got) != 0)
			FAILF("request %d: not the cold reply", i);
		CHECK_EQ_INT(cached, 192);	/* 200 ids: three chunks of 64 */
	}
	run_stop(&r);
}

/* More conversations than slots and a cache of 6 blocks: parked states
 * are taken back, blocks evicted; every reply stays the cold one and the
 * cache never holds more than its budget. */
TEST(eviction_under_pressure_keeps_the_replies)
{
	struct run r;
	struct prefix_stats ps;
	struct sched_stats st;

	long cached;

	if (start(&r, 2, 0, 1, 6) != 0)
		return;
	cached = replay(&r);
	sched_stats(r.s, &st);
	CHECK(sched_prefix_stats(r.s, r.lane, &ps) == 0);
	printf("# %ld cached, %ld reused, %ld hits, %ld evictions\n", cached, st.reused, ps.hits, ps.evictions);
	CHECK(cached > 0);
	CHECK(ps.evictions > 0 && ps.bytes <= ps.budget && ps.arena <= ps.budget);
	CHECK(ps.blocks <= 6);
	CHECK(st.parked <= 2);
	run_stop(&r);
}

/* ids[from..n) through st in MODEL_PREFILL chunks ending at multiples of
 * `cut` (the last at n); the last row's logits into lg. */
static int
prefill_cut(struct state *st, const int32_t *ids, int from, int n, int cut, float *lg)
{
	for (int to; from < n; from = to) {
		to = (from / cut + 1) * cut < n ? (from / cut + 1) * cut : n;
		if (model_forward(ma, st, ids + from, to - from, MODEL_PREFILL, lg, NULL) != 0)
			return -1;
	}
	return 0;
}

/* Floats of a and b that differ: KV rows [0, n), recurrent state, logits. */
static long
differ(struct state *a, struct state *b, const float *la, const float *lb, int n)
{
	const struct state_config *c = state_config(a);
	size_t rec = state_rec_floats(c), kv = (size_t)n * c->kv_dim;
	float *ra = malloc(rec * sizeof *ra), *rb = malloc(rec * sizeof *rb);
	long d = state_pos(a) != state_pos(b);

	state_rec_save(a, ra), state_rec_save(b, rb);
	for (size_t j = 0; j < rec; j++)
		d += memcmp(&ra[j], &rb[j], sizeof *ra) != 0;
	for (int i = 0; i < c->n_kv - model_hparams(ma)->n_mtp; i++)	/* the trunk's caches */
		for (size_t j = 0; j < kv; j++)
			d += memcmp(&state_k(a, i)[j], &state_k(b, i)[j], sizeof(float)) != 0 ||
			    memcmp(&state_v(a, i)[j], &state_v(b, i)[j], sizeof(float)) != 0;
	for (int j = 0; j < model_hparams(ma)->n_vocab; j++)
		d += memcmp(&la[j], &lb[j], sizeof *la) != 0;
	free(ra), free(rb);
	return d;
}

/*
 * Gemma-4 with rings: g4-dense and its assistant (t/data/gemma4) on chunks
 * of 32, its sliding layers' caches rings of 5 + 32 - 1 rows
 * (model_set_ring_rows 32; t/unit/rings.c).  Multi-turn conversations
 * from the pool, the prefix cache or both, plain and speculative, give
 * the cold replies.  A parked conversation that ran more than 32
 * positions past its point (its prompt's tail after the last block, then
 * its reply) is not resumed from the pool: its note names the rings, and
 * the turn comes from the cache or runs cold.
 */
TEST(gemma4_turns_over_rings_are_the_cold_replies)
{
	static struct conv gconv[NCONV];
	struct model *keep = ma;
	char err[UTIL_ERRLEN];

	if ((ma = model_open_opts("t/data/gemma4/g4-dense", be, &(struct model_options){
	    .draft = "t/data/gemma4/g4-assistant" }, err)) == NULL ||
	    model_set_ring_rows(ma, 32) != 0) {
		FAILF("g4-dense: %s", ma == NULL ? err : model_errmsg(ma));
		model_close(ma);
		ma = keep;
		return;
	}
	chunk = 32;
	make_turns(gconv, 40, 37, 60);
	multi_turn_of(gconv, 0, 1, 0);
	printf("# gemma4 pool: %d resumed, %d cold (%d past the rings)\n", notes.reuse,
	    notes.cold, notes.rings);
	CHECK(notes.rings > 0);
	multi_turn_of(gconv, 0, 0, 64);
	multi_turn_of(gconv, 0, 1, 64);
	multi_turn_of(gconv, 3, 1, 64);
	model_close(ma);
	ma = keep, chunk = CHUNK;
}

/* A prompt resumed from blocks another prompt stored gives the cold
 * state and logits bit for bit; cut elsewhere, it would not (the check
 * sees last bits). */
TEST(a_restored_state_is_the_cold_state_bit_for_bit)
{
	int32_t a[300], b[260];
	int nv = model_hparams(ma)->n_vocab, last;
	float *l1 = malloc(nv * sizeof *l1), *l2 = malloc(nv * sizeof *l2);
	char err[UTIL_ERRLEN];
	struct state *s1 = model_state_new(ma, 512, 0, err), *s2 = model_state_new(ma, 512, 0, err);
	struct prefix_config pc = { CHUNK, 8 * prefix_block_bytes(state_config(s1), NULL, CHUNK), 0,
	    NULL, 0 };
	struct prefix *p = prefix_new(be, state_config(s1), &pc, err);

	for (int k = 0; k < 300; k++)
		a[k] = rand_id();
	for (int k = 0; k < 260; k++)
		b[k] = k < 200 ? a[k] : rand_id();
	CHECK(p != NULL && prefill_cut(s1, a, 0, 300, CHUNK, l1) == 0);
	for (int end = CHUNK, id = -1; end <= 256; end += CHUNK)	/* b's blocks, as its prefill passes them */
		CHECK(prefill_cut(s2, b, end - CHUNK, end, CHUNK, l2) == 0 &&
		    (id = prefix_insert(p, id, b, NULL, end, s2, 0)) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 300, 0, &last), 192);
	CHECK(prefix_restore(p, last, s2) == 0 && prefill_cut(s2, a, 192, 300, CHUNK, l2) == 0);
	CHECK_EQ_INT(differ(s1, s2, l1, l2, 300), 0);
	state_reset(s2);
	CHECK(prefill_cut(s2, a, 0, 100, 100, l2) == 0 && prefill_cut(s2, a, 100, 300, CHUNK, l2) == 0);
	CHECK(differ(s1, s2, l1, l2, 300) > 0);	/* a cut at 100: other bits */
	prefix_free(p);
	state_free(s1), state_free(s2);
	free(l1), free(l2);
}

/* A prompt resumed at a snapshot inside a chunk (another prompt's last
 * block of 64) gives the bits of its cold prefill (cut at 512-chunks and
 * its own last block): the one cut more, at a multiple of 64, changes
 * nothing. */
TEST(a_resume_inside_a_chunk_is_the_cold_state_bit_for_bit)
{
	int32_t a[300], b[200];
	int nv = model_hparams(ma)->n_vocab, last;
	float *l1 = malloc(nv * sizeof *l1), *l2 = malloc(nv * sizeof *l2);
	char err[UTIL_ERRLEN];
	struct state *s1 = model_state_new(ma, 512, 0, err), *s2 = model_state_new(ma, 512, 0, err);
	struct prefix_config pc = { 64, 2 * prefix_unit_bytes(state_config(s1), NULL, 64, 8), 0,
	    NULL, 8 };
	struct prefix *p = prefix_new(be, state_config(s1), &pc, err);

	for (int k = 0; k < 300; k++)
		a[k] = rand_id();
	for (int k = 0; k < 200; k++)
		b[k] = k < 195 ? a[k] : rand_id();
	/* a cold: [0, 256) (its L), [256, 300) */
	CHECK(p != NULL && prefill_cut(s1, a, 0, 256, 512, l1) == 0 &&
	    prefill_cut(s1, a, 256, 300, 512, l1) == 0);
	/* b cold: [0, 192) (its L), [192, 200): blocks 0..2 open but the last */
	CHECK(prefill_cut(s2, b, 0, 192, 512, l2) == 0);
	for (int end = 64, id = -1; p != NULL && end <= 192; end += 64)
		CHECK((id = prefix_insert(p, id, b, NULL, end, s2, end < 192 ? PREFIX_OPEN : 0)) >= 0);
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 300, 0, &last), 192);
	/* a resumed: [192, 256), [256, 300) */
	CHECK(prefix_restore(p, last, s2) == 0 && prefill_cut(s2, a, 192, 256, 512, l2) == 0 &&
	    prefill_cut(s2, a, 256, 300, 512, l2) == 0);
	CHECK_EQ_INT(differ(s1, s2, l1, l2, 300), 0);
	prefix_free(p);
	state_free(s1), state_free(s2);
	free(l1), free(l2);
}

int
main(void)
{
	char err[UTIL_ERRLEN];
	const char *dir;

	if ((be = backend_open("cpu", 0, err)) == NULL) {
		printf("not ok backend: %s\n", err);
		return 1;
	}
	RUN(gemma4_turns_over_rings_are_the_cold_replies);
	if ((dir = test_model_a("reuse")) == NULL) {
		backend_close(be);
		return test_summary();
	}
	if ((ma = model_open(dir, be, err)) == NULL) {
		printf("not ok reuse: %s\n", err);
		return 1;
	}
	RUN(a_restored_state_is_the_cold_state_bit_for_bit);
	RUN(a_resume_inside_a_chunk_is_the_cold_state_bit_for_bit);
	make_convs();
	make_short();
	RUN(every_turn_from_the_pool_is_the_cold_reply);
	RUN(every_turn_from_the_prefix_cache_is_the_cold_reply);
	RUN(every_turn_from_both_is_the_cold_reply);
	RUN(speculative_turns_from_the_pool_and_the_cache_are_the_cold_replies);
	RUN(short_turns_resume_at_blocks_of_64_and_give_the_cold_replies);
	RUN(both_off_nothing_is_reused);
	RUN(a_shared_prefix_hits_under_concurrency);
	RUN(eviction_under_pressure_keeps_the_replies);
	model_close(ma);
	backend_close(be);
	return test_summary();
}
