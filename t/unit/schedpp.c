/*
 * schedpp: the serving step loop over model A (../shared/models/A, or
 * MEMRA_MODEL_A) split into two pipeline stages on the CPU (the pipe
 * link), against the same scheduler over the whole model.  Every reply is
 * the whole model's: 30 staggered requests at 24 sessions (a step's rows
 * are several micro-batches, run through the stages as a pipeline),
 * greedy and seeded-sampled, speculative decoding pinned, by load and off;
 * multi-turn conversations resumed from the reuse pool and the prefix
 * cache (tokens cached, each reply the whole model's cold one).  The
 * sessions' memory is counted stage by stage, the host once.
 * (Beside t/unit/schedule.c and reuse.c, whose whole-model tests these
 * follow.)
 */
#include <pthread.h>
#include <stdlib.h>

#include "backend.h"
#include "backend_impl.h"
#include "model.h"
#include "pipeline.h"
#include "prefix.h"
#include "schedule.h"
#include "schedrun.h"
#include "state.h"
#include "test.h"
#include "util.h"

#define NREQ 30
#define MAXGEN 40
#define CHUNK 64
#define TURNS 4
#define NCONV 3
#define MAXIDS 800

static struct backend *be[2];
static struct model *whole, *split;

struct req {
	int32_t	ids[500];
	int	n, max_tokens, sampled;
	int32_t	want[MAXGEN], got[MAXGEN];
	int	n_want, n_got, fin_want, fin_got;
};

static struct req reqs[NREQ];

/*
 * A scheduler of `sessions` over m (K > 0: pinned, K < 0: up to -K by
 * load), contexts of n_ctx, the pool (reuse) and a prefix cache of
 * `blocks` blocks, its worker running.
 */
static int
start(struct run *r, struct model *m, int sessions, int K, int n_ctx, int reuse, int blocks)
{
	struct sched_config c;
	struct state *st;
	char err[UTIL_ERRLEN];

	sched_config_defaults(&c, be[0], n_ctx, sessions);
	c.chunk = CHUNK, c.step_prefill = 8 * CHUNK, c.max_queue = NREQ, c.reserve = 0;
	c.reuse = reuse;
	if ((st = model_state_new(m, 1, 0, err)) == NULL) {
		FAILF("%s", err);
		return -1;
	}
	c.prefix_bytes = blocks * prefix_block_bytes_like(st, NULL, CHUNK);
	state_free(st);
	if ((r->s = sched_new(be[0], &c, err)) == NULL ||
	    (r->lane = sched_add_model(r->s, m, K < 0 ? -K : K, K > 0, NULL, err)) < 0) {
		FAILF("%s", err);
		sched_free(r->s);
		return -1;
	}
	pthread_create(&r->w, NULL, worker, r->s);
	return 0;
}

static struct sched_seq *
submit(struct run *r, const int32_t *ids, int n, int max_tokens, int sampled)
{
	static const int32_t stop_id[] = { 0 };
	struct sched_req q = { .lane = r->lane, .ids = ids, .n_ids = n, .max_tokens = max_tokens,
	    .stop = stop_id, .n_stop = 1 };
	char err[UTIL_ERRLEN];
	struct sched_seq *h;
	int full;

	sample_defaults(&q.sp);
	if (sampled)
		q.sp.temp = 0.9f, q.sp.top_k = 40, q.sp.seed = 77 + n;
	if ((h = sched_submit(r->s, &q, &full, err)) == NULL)
		FAILF("submit: %s", err);
	return h;
}

/* Every token of h into out[MAXGEN] (h released); their count, its end in *fin. */
static int
collect(struct run *r, struct sched_seq *h, int32_t *out, int *fin, int *cached)
{
	int n = 0;

	if (h == NULL)
		return -1;
	do
		n += sched_read(r->s, h, out + n, MAXGEN - n, fin, -1);
	while (*fin == SCHED_RUNNING && n < MAXGEN);
	if (cached != NULL)
		*cached = sched_seq_cached(r->s, h);
	sched_release(r->s, h);
	return n;
}

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static int32_t
rand_id(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (int32_t)(rng % (uint64_t)model_hparams(whole)->n_vocab);
}

/* Request i: 3..450 ids (some past several chunks), 12..39 new tokens, every fifth sampled. */
static void
make_reqs(void)
{
	for (int i = 0; i < NREQ; i++) {
		struct req *q = &reqs[i];

		q->n = i % 7 == 0 ? 300 + 50 * (i % 4) : 3 + (i * 37) % 120;
		for (int k = 0; k < q->n; k++)
			q->ids[k] = rand_id();
		q->max_tokens = 12 + (i * 7) % (MAXGEN - 12);
		q->sampled = i % 5 == 1;
	}
}

/* Each request alone on the whole model: the replies to match. */
static void
run_whole_solo(void)
{
	struct run r;

	if (start(&r, whole, 1, 0, 1024, 0, 0) != 0)
		return;
	for (int i = 0; i < NREQ; i++) {
		struct req *q = &reqs[i];

		q->n_want = collect(&r, submit(&r, q->ids, q->n, q->max_tokens, q->sampled), q->want,
		    &q->fin_want, NULL);
	}
	run_stop(&r);
}

/* All requests on the split model, 24 sessions, one arriving every step or so. */
static void
run_split_together(int K, const char *what)
{
	struct sched_seq *h[NREQ];
	struct run r;

	if (start(&r, split, 24, K, 1024, 1, 32) != 0)
		return;
	for (int i = 0; i < NREQ; i++) {
		h[i] = submit(&r, reqs[i].ids, reqs[i].n, reqs[i].max_tokens, reqs[i].sampled);
		if (i % 3 == 2 && h[i - 2] != NULL) {	/* a token of an earlier one first */
			int fin;

			reqs[i - 2].n_got = sched_read(r.s, h[i - 2], reqs[i - 2].got, 1, &fin, -1);
		}
	}
	for (int i = 0; i < NREQ; i++) {
		struct req *q = &reqs[i];
		int n = h[i] != NULL ? collect(&r, h[i], q->got + q->n_got, &q->fin_got, NULL) : -1;

		q->n_got += n;
		if (n < 0 || q->n_got != q->n_want || q->fin_got != q->fin_want ||
		    memcmp(q->got, q->want, q->n_want * sizeof *q->got) != 0)
			FAILF("%s: request %d (%d ids, %s): %d tokens (end %d), the whole model's %d "
			    "(end %d)", what, i, q->n, q->sampled ? "sampled" : "greedy", q->n_got,
			    q->fin_got, q->n_want, q->fin_want);
		q->n_got = 0;
	}
	run_stop(&r);
}

/* run_split_together(K), and the pipeline's counts meanwhile into d. */
static void
run_counted(int K, const char *what, struct model_pp_stats *d)
{
	struct model_pp_stats a, b;

	model_pp_stats(split, &a);
	run_split_together(K, what);
	model_pp_stats(split, &b);
	d->forwards = b.forwards - a.forwards, d->microbatches = b.microbatches - a.microbatches;
	d->waves = b.waves - a.waves, d->busy_waves = b.busy_waves - a.busy_waves;
	printf("# %s: %ld forwards of %ld micro-batches, %ld of %ld waves with both stages at "
	    "work\n", what, d->forwards, d->microbatches, d->busy_waves, d->waves);
}

TEST(staggered_requests_on_a_split_model_give_the_whole_model_s_replies)
{
	struct model_pp_stats d;
	int keep = be[1]->step_rows;

	run_whole_solo();
	/* stage 1's backend told it takes steps of 16 rows (CUDA's): the split model's
	 * steps are its stages' least (the whole model, on be[0] alone, keeps the CPU's 32),
	 * so 24 sessions' decode rows are two micro-batches */
	be[1]->step_rows = 16;
	CHECK_EQ_INT(model_step_rows(split), 16);
	CHECK_EQ_INT(model_step_rows(whole), 32);
	run_counted(0, "plain", &d);
	/* up to 24 sessions' decode rows: two micro-batches, both stages at work in a wave */
	CHECK(d.forwards > 0 && d.busy_waves == d.microbatches - d.forwards);
	run_counted(3, "K=3 pinned", &d);
	CHECK(d.forwards > 0 && d.busy_waves == d.microbatches - d.forwards);
	run_counted(-3, "K<=3 by load", &d);
	be[1]->step_rows = keep;
}

/* Conversation c's turns: each prompt the one before, its reply and new ids. */
struct conv {
	int32_t	ids[MAXIDS];
	int	n[TURNS];
	int32_t	reply[TURNS][MAXGEN];
	int	n_reply[TURNS];
};
static struct conv conv[NCONV];

/* The conversations' cold replies on the whole model, one session, nothing reused. */
static void
make_convs(void)
{
	struct run r;
	int fin;

	if (start(&r, whole, 1, 0, MAXIDS + MAXGEN + 8, 0, 0) != 0)
		return;
	for (int c = 0; c < NCONV; c++) {
		struct conv *v = &conv[c];
		int n = 50 + 41 * c;

		for (int k = 0; k < n; k++)
			v->ids[k] = rand_id();
		for (int t = 0; t < TURNS; t++) {
			v->n[t] = n;
			v->n_reply[t] = collect(&r, submit(&r, v->ids, n, 12, 0), v->reply[t], &fin,
			    NULL);
			memcpy(v->ids + n, v->reply[t], v->n_reply[t] * sizeof *v->ids);
			n += v->n_reply[t];
			for (int k = 20 + (int)(rng % 60), e = n + k; n < e; n++)
				v->ids[n] = rand_id();
		}
	}
	run_stop(&r);
}

/* The turns interleaved on the split model (K drafts, the pool, a cache of
 * blocks): each the whole model's cold reply; cached tokens in all. */
static long
replay_split(int K, int reuse, int blocks)
{
	struct run r;
	struct sched_stats st;
	long all = 0;

	if (start(&r, split, NCONV + 1, K, MAXIDS + MAXGEN + 8, reuse, blocks) != 0)
		return -1;
	for (int t = 0; t < TURNS; t++)
		for (int c = 0; c < NCONV; c++) {
			struct conv *v = &conv[c];
			int32_t got[MAXGEN];
			int cached = 0, fin, n = collect(&r, submit(&r, v->ids, v->n[t], 12, 0), got,
			    &fin, &cached);

			if (n != v->n_reply[t] || memcmp(got, v->reply[t], n * sizeof *got) != 0)
				FAILF("K %d, pool %d, %d blocks: conversation %d turn %d (%d cached): "
				    "not the whole model's cold reply", K, reuse, blocks, c, t, cached);
			if (cached % CHUNK != 0 || cached >= v->n[t])
				FAILF("turn %d: %d cached of %d", t, cached, v->n[t]);
			all += cached;
		}
	sched_stats(r.s, &st);
	CHECK_EQ_INT(st.cached_tokens, all);
	if (reuse && blocks == 0)
		CHECK(st.reused > 0);
	run_stop(&r);
	return all;
}

TEST(split_turns_from_the_pool_and_the_prefix_cache_are_the_whole_model_s_cold_replies)
{
	make_convs();
	CHECK(replay_split(0, 1, 0) > 0);	/* the pool alone */
	CHECK(replay_split(0, 0, 64) > 0);	/* the cache alone */
	CHECK(replay_split(3, 1, 64) > 0);	/* both, speculative (the MTP rows cached) */
}

TEST(a_split_model_s_sessions_are_counted_stage_by_stage)
{
	struct sched_config c;
	struct sched_fit fw, fs;
	struct sched *s;
	char err[UTIL_ERRLEN];

	sched_config_defaults(&c, be[0], 4096, 4);
	c.reserve = 0;
	if ((s = sched_new(be[0], &c, err)) == NULL) {
		FAILF("%s", err);
		return;
	}
	CHECK(sched_fit(s, whole, 3, &fw, err) == 0 && sched_fit(s, split, 3, &fs, err) == 0);
	CHECK_EQ_INT(fw.n_dev, 1);
	CHECK_EQ_INT(fs.n_dev, 1);		/* two CPU stages: the host's memory, once */
	CHECK_EQ_INT(fs.dev[0].stages, 3);
	CHECK_EQ_STR(fs.dev[0].name, "cpu");
	CHECK_EQ_INT(fs.session, fw.session);	/* the whole model's caches, cut by stage */
	CHECK_EQ_INT(fs.session, model_stage_state_bytes(split, 0, 4096, 4) +
	    model_stage_state_bytes(split, 1, 4096, 4));
	CHECK(model_stage_state_bytes(split, 0, 4096, 4) > 0 &&
	    model_stage_state_bytes(split, 1, 4096, 4) > 0);
	CHECK(fs.fit == fs.dev[0].fit && fs.avail == fs.dev[0].avail);
	sched_free(s);
	sched_config_defaults(&c, be[0], 1 << 24, 4096);
	if ((s = sched_new(be[0], &c, err)) == NULL)
		return;
	CHECK(sched_add_model(s, split, 0, 1, NULL, err) < 0);	/* does not fit: says what does */
	CHECK(strstr(err, "4096 sessions of ctx 16777216 need") != NULL && strstr(err, "at most"));
	sched_free(s);
}

int
main(void)
{
	char err[UTIL_ERRLEN], dev[2][PIPELINE_DEVLEN] = { "cpu", "cpu" };
	struct model_split sp = { 2, be, dev, NULL };
	struct model_options mo = { .split = &sp };
	const char *dir;

	for (int i = 0; i < 2; i++)
		if ((be[i] = backend_open("cpu", 0, err)) == NULL) {
			printf("not ok backend: %s\n", err);
			return 1;
		}
	if ((dir = test_model_a("schedpp")) == NULL)
		return test_summary();
	if ((whole = model_open(dir, be[0], err)) == NULL ||
	    (split = model_open_opts(dir, be[0], &mo, err)) == NULL) {
		printf("not ok schedpp: %s\n", err);
		return 1;
	}
	make_reqs();
	RUN(a_split_model_s_sessions_are_counted_stage_by_stage);
	RUN(staggered_requests_on_a_split_model_give_the_whole_model_s_replies);
	RUN(split_turns_from_the_pool_and_the_prefix_cache_are_the_whole_model_s_cold_replies);
	model_close(split), model_close(whole);
	backend_close(be[0]), backend_close(be[1]);
	return test_summary();
}
