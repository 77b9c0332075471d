/*
 * drafters: the scheduler speculating with the drafters that are not an
 * MTP head, on the CPU: Gemma-4's assistant (t/data/gemma4/g4-dense with
 * g4-assistant; its sliding layers' caches rings of 5 + 32 - 1 rows, t/unit/rings.c) and
 * the DFlash2 block drafter (model A, ../shared/models/A
 * or MEMRA_MODEL_A, with t/data/dflash/d2, its head trimmed to the tokens A
 * says most, so that some of the random drafter's drafts are accepted).
 *
 * Requests arrive staggered while others prefill and decode, greedy (some
 * with logprobs) and seeded-sampled: each reply is its plain decode's (the
 * request alone on a lane without drafts), token for token, whenever it
 * joins, with K pinned and by load.  With K pinned, the drafts the
 * sessions had accepted are, in all, those of a lone speculative decoder
 * (spec_round) on the same prompts cut the same way: the drafter's input
 * (the verify rows' hidden rows, or taps) comes out of the batched verify
 * as it does alone.  A DFlash2 conversation resumed from the reuse pool or
 * the prefix cache speculates on with the drafter's context rows, which
 * are a cold prefill's bits.  (Beside t/unit/schedule.c, which other work
 * edits too.)
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"
#include "model.h"
#include "prefix.h"
#include "schedule.h"
#include "schedrun.h"
#include "spec.h"
#include "test.h"
#include "tokenizer.h"
#include "util.h"

#define NREQ 14
#define MAXGEN 28
#define CTX 512
#define CHUNK 32

static struct backend *be;

struct req {
	int32_t	ids[300];
	int	n, max_tokens, sampled, logprobs;
	int32_t	plain[MAXGEN], got[MAXGEN];
	int	n_plain, n_got;
	long	drafted, accepted;	/* greedy: a lone spec_round's, K pinned */
};

struct fix {
	const char *name;
	struct model *m;
	int	K;		/* the drafts a round, pinned */
	struct req r[NREQ];
};

static struct sched_req
req_of(const struct req *r, int lane)
{
	static const int32_t stop[] = { 0 };	/* ignored: every reply runs to max_tokens */
	struct sched_req q = { .lane = lane, .ids = r->ids, .n_ids = r->n,
	    .max_tokens = r->max_tokens, .ignore_eos = 1, .stop = stop, .n_stop = 1,
	    .logprobs = r->logprobs };

	sample_defaults(&q.sp);
	if (r->sampled)
		q.sp.temp = 0.8f, q.sp.top_k = 20, q.sp.seed = 77 + r->n;
	return q;
}

/* A scheduler of `sessions` on m, K drafts (pinned when pin), with the
 * reuse pool when reuse and a prefix cache of `mib` MiB; its worker
 * running.  -1 (failed) when it cannot. */
static int
start_cached(struct run *r, struct model *m, int sessions, int K, int pin, int reuse, int mib)
{
	struct sched_config c;
	char err[UTIL_ERRLEN];

	sched_config_defaults(&c, be, CTX, sessions);
	c.chunk = CHUNK, c.step_prefill = 2 * CHUNK, c.max_queue = 2 * NREQ, c.reserve = 0;
	c.reuse = reuse, c.prefix_bytes = (size_t)mib << 20;
	if ((r->s = sched_new(be, &c, err)) == NULL ||
	    (r->lane = sched_add_model(r->s, m, K, pin, NULL, err)) < 0) {
		FAILF("%s", err);
		sched_free(r->s);
		return -1;
	}
	pthread_create(&r->w, NULL, worker, r->s);
	return 0;
}

static int
start(struct run *r, struct model *m, int sessions, int K, int pin, int reuse)
{
	return start_cached(r, m, sessions, K, pin, reuse, 0);
}

/* Every token of h into out[MAXGEN]; their count; h released. */
static int
collect(struct run *r, struct sched_seq *h, int32_t *out)
{
	int n = 0, fin;

	if (h == NULL)
		return -1;
	do
		n += sched_read(r->s, h, out + n, MAXGEN - n, &fin, -1);
	while (fin == SCHED_RUNNING && n < MAXGEN);
	if (fin == SCHED_ERROR)
		FAILF("session: %s", sched_seq_errmsg(h));
	sched_release(r->s, h);
	return n;
}

static struct sched_seq *
submit(struct run *r, const struct req *q)
{
	struct sched_req sq = req_of(q, r->lane);
	char err[UTIL_ERRLEN];
	int full;
	struct sched_seq *h = sched_submit(r->s, &sq, &full, err);

	if (h == NULL)
		FAILF("submit: %s", err);
	return h;
}

/* Each request of f alone on a plain lane: its plain decode. */
static void
plain_alone(struct fix *f)
{
	struct run r;

	if (start(&r, f->m, 1, 0, 1, 0) != 0)
		return;
	for (int i = 0; i < NREQ; i++)
		f->r[i].n_plain = collect(&r, submit(&r, &f->r[i]), f->r[i].plain);
	run_stop(&r);
}

/*
 * Greedy request q alone on a speculative decoder of K drafts, its prompt
 * cut as the scheduler cuts it: its tokens must be its plain decode's;
 * the drafts made and accepted into q.
 */
static void
spec_alone(struct fix *f, struct req *q)
{
	char err[UTIL_ERRLEN];
	struct spec *sp = spec_new(f->m, f->K, CTX, NULL, 0, err);
	int32_t out[MAXGEN + SPEC_KMAX + 1];
	int n = 0, k;

	if (sp == NULL) {
		FAILF("%s: spec_new: %s", f->name, err);
		return;
	}
	for (int from = 0, to; from < q->n; from = to) {
		to = (from / CHUNK + 1) * CHUNK < q->n ? (from / CHUNK + 1) * CHUNK : q->n;
		if (spec_prefill_part(sp, q->ids, q->n, from, to, out) != 0) {
			FAILF("%s: prefill: %s", f->name, spec_errmsg(sp));
			goto out;
		}
	}
	for (n = 1; n < q->max_tokens; n += k)
		if ((k = spec_round(sp, out + n, q->max_tokens - n)) < 0) {
			FAILF("%s: round: %s", f->name, spec_errmsg(sp));
			goto out;
		}
	if (n != q->n_plain || memcmp(out, q->plain, n * sizeof *out) != 0)
		FAILF("%s: a lone speculative decode is not the plain one (%d prompt ids)", f->name,
		    q->n);
	q->drafted = spec_stats(sp)->drafted, q->accepted = spec_stats(sp)->accepted;
out:
	spec_free(sp);
}

/*
 * f's requests on a scheduler of 6 sessions, a new one after every step or
 * two while the earlier ones run: each reply its plain decode.  The
 * lane's stats into *st.
 */
static void
staggered(struct fix *f, int K, int pin, struct sched_stats *st)
{
	struct sched_seq *h[NREQ];
	struct run r;

	memset(st, 0, sizeof *st);
	if (start(&r, f->m, 6, K, pin, 0) != 0)
		return;
	for (int i = 0; i < NREQ; i++) {
		h[i] = submit(&r, &f->r[i]);
		f->r[i].n_got = 0;
		if (i % 3 == 2 && h[i - 2] != NULL) {	/* a token of an earlier one first */
			int fin;

			f->r[i - 2].n_got = sched_read(r.s, h[i - 2], f->r[i - 2].got, 1, &fin, -1);
		}
	}
	for (int i = 0; i < NREQ; i++) {
		struct req *q = &f->r[i];
		int n = collect(&r, h[i], q->got + q->n_got);

		if (n < 0)
			continue;
		q->n_got += n;
		if (q->n_got != q->n_plain || memcmp(q->got, q->plain, q->n_got * sizeof *q->got))
			FAILF("%s, K %d%s: request %d (%d prompt ids, %s): %d tokens, plain %d", f->name,
			    K, pin ? "" : " by load", i, q->n, q->sampled ? "sampled" : "greedy",
			    q->n_got, q->n_plain);
	}
	sched_stats(r.s, st);
	run_stop(&r);
}

/*
 * The contract on fixture f: plain decode alone, a lone speculative
 * decoder, then the scheduler with K pinned (the drafts accepted in all
 * are the lone decoders') and by load (up to K).
 */
static void
contract(struct fix *f)
{
	struct sched_stats st;
	long drafted = 0, accepted = 0;

	plain_alone(f);
	for (int i = 0; i < NREQ; i++)
		if (!f->r[i].sampled) {
			spec_alone(f, &f->r[i]);
			drafted += f->r[i].drafted, accepted += f->r[i].accepted;
		}
	staggered(f, f->K, 1, &st);
	printf("# %s, K %d pinned: %ld rounds, %ld of %ld drafts accepted (alone: %ld of %ld)\n",
	    f->name, f->K, st.spec_rounds, st.accepted, st.drafted, accepted, drafted);
	CHECK(st.spec_rounds > 0 && accepted > 0);
	CHECK_EQ_INT(st.drafted, drafted);
	CHECK_EQ_INT(st.accepted, accepted);
	staggered(f, f->K, 0, &st);
	printf("# %s, K by load up to %d: %ld rounds, %ld of %ld drafts accepted\n", f->name, f->K,
	    st.spec_rounds, st.accepted, st.drafted);
	CHECK(st.spec_rounds > 0);	/* admissions explore while the lane counts few */
}

/* Request i's settings: 4..MAXGEN new tokens, every fourth sampled, and
 * every fourth greedy with its logprobs (its verify rows' picks drawn on
 * the host). */
static void
settings(struct req *r, int i)
{
	r->max_tokens = 4 + (i * 7) % (MAXGEN - 3);
	r->sampled = i % 4 == 3;
	r->logprobs = i % 4 == 2;
}

static struct fix g4 = { .name = "gemma4 assistant", .K = 3 };
static struct fix dfl = { .name = "DFlash2", .K = 7 };

/* g4's prompts: 2..200 ids of its 320, some past several chunks. */
static void
g4_reqs(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	for (int i = 0; i < NREQ; i++) {
		struct req *r = &g4.r[i];

		r->n = i % 5 == 0 ? 100 + 25 * (i % 4) : 2 + (i * 13) % 60;
		for (int k = 0; k < r->n; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			r->ids[k] = (int32_t)(x % 320);
		}
		settings(r, i);
	}
}

TEST(gemma4_assistant_in_the_batch_gives_the_plain_tokens)
{
	contract(&g4);
}

/*
 * A gemma4 state's caches are as wide as their layers' K/V rows: g4-dense's
 * sliding layers 2 heads of 16, its global 2 of 32 (layers 2 and 4, whose
 * caches come first), so a position costs 2 (K, V) x 4 bytes x (3 x 32 +
 * 2 x 64), not 5 x 64.
 */
TEST(gemma4_caches_are_as_wide_as_their_layers)
{
	int w[5] = { 64, 64, 32, 32, 32 };
	size_t per = model_state_bytes(g4.m, 2, 0) - model_state_bytes(g4.m, 1, 0);

	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(model_kv_width(g4.m, i), w[i]);
	CHECK_EQ_INT(model_kv_width(g4.m, 5), -1);
	CHECK_EQ_INT(per, 2 * 4 * (3 * 32 + 2 * 64));
}

TEST(dflash2_in_the_batch_gives_the_plain_tokens)
{
	contract(&dfl);
}

/* A lane measures the drafter's work at boot: the assistant a draft, DFlash a round. */
TEST(a_lane_measures_its_drafter_at_boot)
{
	struct sched_spec_cost c;
	struct run r;

	if (start(&r, g4.m, 2, 3, 0, 0) == 0) {
		sched_spec_costs(r.s, r.lane, &c);
		CHECK(c.draft > 0 && c.round == 0);
		CHECK(c.step_rows == model_step_rows(g4.m));
		CHECK(c.rows[1] > 0 && c.rows[c.step_rows] >= c.rows[1]);
		run_stop(&r);
	}
	if (dfl.m != NULL && start(&r, dfl.m, 2, 7, 0, 0) == 0) {
		sched_spec_costs(r.s, r.lane, &c);
		CHECK(c.draft == 0 && c.round > 0);
		run_stop(&r);
	}
}

/*
 * A conversation's turns, each the last one's prompt, its reply and 5 ids
 * of it again, on a lane with the reuse pool (reuse) or a prefix cache of
 * 16 MiB (else), another prompt of 200 ids between turns (in the slot the
 * turn left, when not parked): each reply its plain decode, each resumed
 * at a chunk boundary, and the drafts accepted in all a lone decoder's of
 * each whole prompt (the drafter's context rows below the boundary are the
 * parked session's or the cache's, the bits a cold prefill makes).
 */
static void
conversation(int reuse)
{
	static struct req turn[3], other = { .n = 200, .max_tokens = 4 };
	struct sched_stats st;
	struct prefix_stats ps;
	struct run r;
	long drafted = 0, accepted = 0;
	int n = dfl.r[5].n;	/* past a few chunks */

	memcpy(turn[0].ids, dfl.r[5].ids, n * sizeof *turn[0].ids);
	for (int k = 0; k < other.n; k++)
		other.ids[k] = (int32_t)((k * 7919 + 31) % model_hparams(dfl.m)->n_vocab);
	for (int t = -1; t < 3; t++) {
		struct req *q = t < 0 ? &other : &turn[t];
		struct run p;

		q->n = n, q->max_tokens = 12;
		if (start(&p, dfl.m, 1, 0, 1, 0) != 0)
			return;
		q->n_plain = collect(&p, submit(&p, q), q->plain);
		run_stop(&p);
		spec_alone(&dfl, q);
		if (t < 0)
			continue;
		drafted += q->drafted, accepted += q->accepted;
		if (t == 2)
			break;
		memcpy(turn[t + 1].ids, q->ids, n * sizeof *q->ids);
		memcpy(turn[t + 1].ids + n, q->plain, q->n_plain * sizeof *q->ids);
		memcpy(turn[t + 1].ids + n + q->n_plain, q->ids, 5 * sizeof *q->ids);
		n += q->n_plain + 5;
	}
	if (start_cached(&r, dfl.m, 2, dfl.K, 1, reuse, reuse ? 0 : 16) != 0)
		return;
	for (int t = 0; t < 3; t++) {
		struct req *q = &turn[t];

		if (t > 0 && (other.n_got = collect(&r, submit(&r, &other), other.got)) != other.n_plain)
			FAILF("the other prompt: not its plain decode");
		q->n_got = collect(&r, submit(&r, q), q->got);
		if (q->n_got != q->n_plain || memcmp(q->got, q->plain, q->n_got * sizeof *q->got))
			FAILF("turn %d (%d prompt ids): not its plain decode", t, q->n);
	}
	sched_stats(r.s, &st);
	st.drafted -= 2 * other.drafted, st.accepted -= 2 * other.accepted;
	printf("# %s: %ld resumed, %ld cached tokens; %ld of %ld drafts accepted (alone: %ld of "
	    "%ld)\n", reuse ? "pool" : "prefix cache", st.reused, st.cached_tokens, st.accepted,
	    st.drafted, accepted, drafted);
	CHECK(st.cached_tokens >= 2 * CHUNK);
	CHECK_EQ_INT(st.reused, reuse ? 3 : 0);	/* the turns, the other prompt's rerun */
	CHECK(reuse || (sched_prefix_stats(r.s, r.lane, &ps) == 0 && ps.hits >= 2));
	CHECK_EQ_INT(st.drafted, drafted);
	CHECK_EQ_INT(st.accepted, accepted);
	run_stop(&r);
}

TEST(a_dflash2_conversation_resumed_from_the_pool_speculates_with_its_context)
{
	conversation(1);
}

TEST(a_dflash2_conversation_resumed_from_the_prefix_cache_speculates_with_its_context)
{
	conversation(0);
}

/* A speculative decoder of dfl's K on the n ids, its prompt cut at the multiples of CHUNK. */
static struct spec *
prefilled(const int32_t *ids, int n)
{
	char err[UTIL_ERRLEN];
	struct spec *sp = spec_new(dfl.m, dfl.K, CTX, NULL, 0, err);
	int32_t first;

	for (int from = 0, to; sp != NULL && from < n; from = to) {
		to = (from / CHUNK + 1) * CHUNK < n ? (from / CHUNK + 1) * CHUNK : n;
		if (spec_prefill_part(sp, ids, n, from, to, &first) != 0) {
			FAILF("prefill: %s", spec_errmsg(sp));
			spec_free(sp);
			return NULL;
		}
	}
	return sp;
}

/*
 * What the scheduler's DFlash prefix cache holds: the drafter's context
 * rows of another prompt's chunks, stored at its boundaries and restored
 * into another session's drafter state, are the rows a cold prefill of
 * this prompt makes, bit for bit: every row below the boundary of the
 * full-attention layer, the rows of its last ring positions of the
 * sliding layer's ring (the window's context and more).
 */
TEST(dflash2_context_rows_from_the_prefix_cache_are_the_cold_ones_bit_for_bit)
{
	int32_t a[150], b[170];
	char err[UTIL_ERRLEN];
	struct spec *sa, *sb = NULL, *sc = NULL;
	struct prefix *p = NULL;
	struct state_config c;
	long differ = 0;
	int last = -1, nv = model_hparams(dfl.m)->n_vocab;

	for (int k = 0; k < 170; k++)
		b[k] = (int32_t)((k * 104729 + 7) % nv);
	for (int k = 0; k < 150; k++)
		a[k] = k < 128 ? b[k] : 11 + k;
	if ((sa = prefilled(a, 128)) == NULL || (sb = prefilled(b, 32)) == NULL)
		goto out;
	c = *state_config(spec_drafter_state(sa));
	CHECK(c.n_ring == 1 && c.ring == 16 - 1 + 8);	/* d2's sliding layer: window 16, block 8 */
	p = prefix_new(be, &c, &(struct prefix_config){ CHUNK, 8 * prefix_block_bytes(&c, NULL, CHUNK),
	    0, NULL, 0 },
	    err);
	CHECK(p != NULL);
	for (int end = CHUNK, id = -1; p != NULL && end <= 128; end += CHUNK) {	/* b's blocks */
		if (end > CHUNK)
			spec_free(sb), sb = prefilled(b, end);
		CHECK(sb != NULL && state_seek(spec_drafter_state(sb), end) == 0 &&
		    (id = prefix_insert(p, id, b, NULL, end, spec_drafter_state(sb), 0)) >= 0);
	}
	if (p == NULL || (sc = prefilled(b + 140, 20)) == NULL)	/* rows of another prompt */
		goto out;
	CHECK_EQ_INT(prefix_lookup(p, a, NULL, 150, 0, &last), 128);
	if (prefix_restore(p, last, spec_drafter_state(sc)) != 0)
		FAILF("restore: %s", prefix_errmsg(p));
	for (int i = 0; i < c.n_kv; i++)
		for (int pos = state_is_ring(&c, i) ? 128 - c.ring : 0; pos < 128; pos++) {
			size_t r = (size_t)state_kv_row(&c, i, pos) * c.kv_dim;

			differ += memcmp(state_k(spec_drafter_state(sa), i) + r,
			    state_k(spec_drafter_state(sc), i) + r, c.kv_dim * sizeof(float)) != 0 ||
			    memcmp(state_v(spec_drafter_state(sa), i) + r,
			    state_v(spec_drafter_state(sc), i) + r, c.kv_dim * sizeof(float)) != 0;
		}
	CHECK_EQ_INT(differ, 0);
out:
	prefix_free(p);
	spec_free(sa), spec_free(sb), spec_free(sc);
}

/* Floats of the rings of a and b (alike shaped) that differ, over the positions [end -
 * ring, end). */
static long
rings_differ(struct state *a, struct state *b, int end)
{
	const struct state_config *c = state_config(a);
	long d = 0;

	for (int i = c->n_kv - c->n_ring; i < c->n_kv; i++)
		for (int pos = end - c->ring; pos < end; pos++) {
			size_t r = (size_t)state_kv_row(c, i, pos) * c->kv_dim;

			d += memcmp(state_k(a, i) + r, state_k(b, i) + r, c->kv_dim * sizeof(float)) ||
			    memcmp(state_v(a, i) + r, state_v(b, i) + r, c->kv_dim * sizeof(float));
		}
	return d;
}

/*
 * What the scheduler's reuse pool keeps of a DFlash drafter: its rings at
 * the prompt's last chunk boundary (a parked session decodes on past it,
 * its ring rows of the positions before the boundary overwritten), copied
 * back when a conversation resumes there, are the rings of a cold prefill
 * up to the boundary, bit for bit.
 */
TEST(dflash2_rings_from_the_pool_are_the_cold_ones_bit_for_bit)
{
	int32_t a[100], out[16 + SPEC_KMAX + 1];
	char err[UTIL_ERRLEN];
	struct spec *sp = spec_new(dfl.m, dfl.K, CTX, NULL, 0, err), *cold;
	struct state *ds = sp != NULL ? spec_drafter_state(sp) : NULL;
	float *snap = NULL;
	int n = 1, k;

	for (int i = 0; i < 100; i++)
		a[i] = (int32_t)((i * 7919 + 5) % model_hparams(dfl.m)->n_vocab);
	cold = prefilled(a, 96);
	CHECK(sp != NULL && cold != NULL && state_config(ds)->n_ring == 1);
	if (sp == NULL || cold == NULL || state_config(ds)->n_ring != 1)
		goto out;
	snap = malloc(state_ring_floats(state_config(ds)) * sizeof *snap);
	for (int from = 0, to; from < 100; from = to) {	/* the rings saved at boundary 96 */
		to = from + CHUNK < 100 ? from + CHUNK : 100;
		CHECK(spec_prefill_part(sp, a, 100, from, to, out) == 0);
		if (to == 96)
			CHECK(state_ring_save(ds, snap) == 0);
	}
	for (; n < 16; n += k)	/* decoded on: the ring moved past the boundary */
		if ((k = spec_round(sp, out + n, 16 - n)) < 0)
			break;
	CHECK(n >= 16);
	CHECK(rings_differ(ds, spec_drafter_state(cold), 96) > 0);
	CHECK(state_ring_load(ds, snap) == 0);
	CHECK_EQ_INT(rings_differ(ds, spec_drafter_state(cold), 96), 0);
out:
	free(snap);
	spec_free(sp), spec_free(cold);
}

/*
 * A prompt whose last part leaves the first token to the caller (a session
 * with logprobs, spec_prefill_logits): the drafter's context rows of that
 * part are in as the part ends, before spec_first, so a block or ring the
 * scheduler saves at a boundary that is the prompt's end holds them.
 */
TEST(dflash2_context_of_a_host_picked_prompt_is_in_at_its_end)
{
	int32_t a[64];
	char err[UTIL_ERRLEN];
	struct spec *sp = spec_new(dfl.m, dfl.K, CTX, NULL, 0, err), *cold;
	float *lg = malloc((size_t)model_hparams(dfl.m)->n_vocab * sizeof *lg);
	struct state_config c;
	long differ = 0;

	for (int i = 0; i < 64; i++)
		a[i] = (int32_t)((i * 104729 + 3) % model_hparams(dfl.m)->n_vocab);
	cold = prefilled(a, 64);
	CHECK(sp != NULL && cold != NULL && lg != NULL);
	if (sp == NULL || cold == NULL || lg == NULL)
		goto out;
	CHECK(spec_prefill_part(sp, a, 64, 0, CHUNK, NULL) == 0);
	CHECK(spec_prefill_logits(sp, a, 64, CHUNK, 64, lg) == 0);
	c = *state_config(spec_drafter_state(sp));
	for (int i = 0; i < c.n_kv; i++)
		for (int pos = state_is_ring(&c, i) ? 64 - c.ring : 0; pos < 64; pos++) {
			size_t r = (size_t)state_kv_row(&c, i, pos) * c.kv_dim;

			differ += memcmp(state_k(spec_drafter_state(sp), i) + r,
			    state_k(spec_drafter_state(cold), i) + r, c.kv_dim * sizeof(float)) != 0;
		}
	CHECK_EQ_INT(differ, 0);
	CHECK(spec_first(sp, 7) == 0);
out:
	free(lg);
	spec_free(sp), spec_free(cold);
}

/* The 8 tokens most frequent in t[n] (ties: the lower id), padded with the lowest others. */
static void
most_frequent(const int32_t *t, int n, int32_t *top)
{
	for (int k = 0; k < 8; k++) {
		int best = -1, bc = 0;

		for (int i = 0; i < n; i++) {
			int c = 0, taken = 0;

			for (int j = 0; j < k; j++)
				taken |= top[j] == t[i];
			for (int j = 0; j < n && !taken; j++)
				c += t[j] == t[i];
			if (!taken && (c > bc || (c == bc && c > 0 && t[i] < best)))
				best = t[i], bc = c;
		}
		for (int v = 0; best < 0; v++) {	/* fewer than 8 distinct */
			int taken = 0;

			for (int j = 0; j < k; j++)
				taken |= top[j] == v;
			if (!taken)
				best = v;
		}
		top[k] = best;
	}
}

/*
 * Model A's prompts: "def fibonacci(n):" and the first tokens of its plain
 * continuation, some after 90..150 other ids (past a few chunks); A's
 * head trimmed to the 8 tokens most frequent in that continuation (the
 * drafter's selector takes 8), one a line, into the file ranks.
 */
static int
dfl_reqs(struct model *a, const char *ranks)
{
	static const char text[] = "def fibonacci(n):";
	char err[UTIL_ERRLEN];
	struct tokenizer *tok = model_tokenizer(a, err);
	struct fix base = { .name = "A", .m = a };
	struct req *b = &base.r[0];
	struct run r;
	int32_t *ids, top[8];
	size_t n = 0;
	int nv = model_hparams(a)->n_vocab;
	uint64_t x = 0x2545f4914f6cdd1dULL;
	FILE *fp;

	if (tok == NULL || (ids = tokenizer_encode(tok, text, sizeof text - 1, 0, &n, err)) == NULL) {
		FAILF("tokenizer: %s", err);
		tokenizer_free(tok);
		return -1;
	}
	tokenizer_free(tok);
	memcpy(b->ids, ids, n * sizeof *ids);
	b->n = (int)n, b->max_tokens = MAXGEN;
	free(ids);
	if (start(&r, a, 1, 0, 1, 0) != 0)
		return -1;
	b->n_plain = collect(&r, submit(&r, b), b->plain);
	run_stop(&r);
	for (int i = 0; i < NREQ && b->n_plain > 0; i++) {
		struct req *q = &dfl.r[i];
		int pre = i % 6 == 5 ? 90 + (15 * i) % 60 : 0, j = (i * 5) % b->n_plain;

		for (int k = 0; k < pre; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			q->ids[k] = (int32_t)(x % (uint64_t)nv);
		}
		memcpy(q->ids + pre, b->ids, n * sizeof *q->ids);
		memcpy(q->ids + pre + n, b->plain, j * sizeof *q->ids);
		q->n = pre + (int)n + j;
		settings(q, i);
	}
	most_frequent(b->plain, b->n_plain, top);
	if (b->n_plain < 1 || (fp = fopen(ranks, "w")) == NULL)
		return -1;
	for (int k = 0; k < 8; k++)
		fprintf(fp, "%d\n", top[k]);
	return fclose(fp);
}

int
main(void)
{
	char err[UTIL_ERRLEN], ranks[] = "/tmp/memra-drafters-XXXXXX";
	const char *dir;
	struct model *a;
	int fd;

	if ((be = backend_open("cpu", 0, err)) == NULL) {
		printf("not ok backend: %s\n", err);
		return 1;
	}
	if ((g4.m = model_open_opts("t/data/gemma4/g4-dense", be, &(struct model_options){
	    .draft = "t/data/gemma4/g4-assistant" }, err)) == NULL ||
	    model_set_ring_rows(g4.m, CHUNK) != 0) {
		printf("not ok gemma4 assistant: %s\n", g4.m == NULL ? err : model_errmsg(g4.m));
		return 1;
	}
	g4_reqs();
	RUN(gemma4_assistant_in_the_batch_gives_the_plain_tokens);
	RUN(gemma4_caches_are_as_wide_as_their_layers);
	if ((dir = test_model_a("drafters")) != NULL) {
		if ((a = model_open(dir, be, err)) == NULL || (fd = mkstemp(ranks)) < 0) {
			printf("not ok model A: %s\n", a == NULL ? err : "mkstemp");
			return 1;
		}
		close(fd);
		if (dfl_reqs(a, ranks) != 0 || (dfl.m = model_open_opts(dir, be,
		    &(struct model_options){ .dflash = "t/data/dflash/d2", .ranks = ranks }, err)) ==
		    NULL) {
			printf("not ok DFlash2 drafter: %s\n", err);
			unlink(ranks);
			return 1;
		}
		unlink(ranks);
		model_close(a);
		RUN(dflash2_in_the_batch_gives_the_plain_tokens);
		RUN(a_dflash2_conversation_resumed_from_the_pool_speculates_with_its_context);
		RUN(a_dflash2_conversation_resumed_from_the_prefix_cache_speculates_with_its_context);
		RUN(dflash2_context_rows_from_the_prefix_cache_are_the_cold_ones_bit_for_bit);
		RUN(dflash2_rings_from_the_pool_are_the_cold_ones_bit_for_bit);
		RUN(dflash2_context_of_a_host_picked_prompt_is_in_at_its_end);
	}
	RUN(a_lane_measures_its_drafter_at_boot);
	model_close(g4.m), model_close(dfl.m);
	backend_close(be);
	return test_summary();
}
