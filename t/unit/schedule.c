/*
 * schedule: the serving step loop on the qwen35 fixture (../shared/models/A,
 * or MEMRA_MODEL_A) on the CPU.  A reply never depends on what else runs:
 * 30 requests with staggered arrivals, greedy and seeded-sampled, long
 * prompts cut into chunks over many steps, each give exactly the tokens of
 * their run alone; speculative decoding on or off, the same greedy tokens.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"
#include "model.h"
#include "schedule.h"
#include "spec.h"
#include "test.h"
#include "util.h"

#define NREQ 30
#define MAXGEN 24

static struct backend *be;
static struct model *ma;

struct req {
	int32_t	ids[700];
	int	n, max_tokens, sampled, ignore_eos;
	int32_t	solo[MAXGEN], got[MAXGEN];
	int	n_solo, n_got, fin_solo, fin_got;
};

static struct req reqs[NREQ];

/* Request i: a prompt of 3..650 ids (some past several chunks), greedy or
 * seeded-sampled, 4..MAXGEN new tokens. */
static void
make_reqs(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	int nv = model_hparams(ma)->n_vocab;

	for (int i = 0; i < NREQ; i++) {
		struct req *r = &reqs[i];

		r->n = i % 7 == 0 ? 300 + 50 * (i % 4) : 3 + (i * 37) % 120;
		for (int k = 0; k < r->n; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			r->ids[k] = (int32_t)(x % (uint64_t)nv);
		}
		r->max_tokens = 4 + (i * 5) % (MAXGEN - 4);
		r->sampled = i % 3 == 1;
		r->ignore_eos = i % 2;
	}
}

static struct sched_req
req_of(struct req *r, int lane)
{
	static const int32_t stop[] = { 0 };	/* an id that ends a reply, unless ignored */
	struct sched_req q = { .lane = lane, .ids = r->ids, .n_ids = r->n,
	    .max_tokens = r->max_tokens, .ignore_eos = r->ignore_eos, .stop = stop, .n_stop = 1 };

	sample_defaults(&q.sp);
	if (r->sampled)
		q.sp.temp = 0.9f, q.sp.top_k = 40, q.sp.seed = 1234 + r->n;
	return q;
}

static struct sched *
new_sched(int sessions, int K, int *lane)
{
	struct sched_config c;
	struct sched *s;
	char err[UTIL_ERRLEN];

	sched_config_defaults(&c, be, 1024, sessions);
	c.chunk = 64, c.step_prefill = 128, c.max_queue = NREQ;
	c.reserve = 0;
	if ((s = sched_new(be, &c, err)) == NULL || (*lane = sched_add_model(s, ma, K < 0 ? -K : K, K > 0, NULL, err)) < 0) {
		printf("# %s\n", err);
		sched_free(s);
		return NULL;
	}
	return s;
}

static void *
worker(void *arg)
{
	struct sched *s = arg;

	while (sched_wait(s) == 0)
		sched_step(s);
	return NULL;
}

/* A scheduler of `sessions` with its worker thread running, or NULL. */
static struct sched *
start(int sessions, int K, int *lane, pthread_t *w)
{
	struct sched *s = new_sched(sessions, K, lane);

	CHECK(s != NULL);
	if (s != NULL)
		pthread_create(w, NULL, worker, s);
	return s;
}

static void
stop(struct sched *s, pthread_t w)
{
	sched_shutdown(s);
	pthread_join(w, NULL);
	sched_free(s);
}

/* Every token of q into out; its count. */
static int
read_all(struct sched *s, struct sched_seq *q, int32_t *out, int *fin)
{
	int n = 0, got;

	do
		got = sched_read(s, q, out + n, MAXGEN - n, fin, -1), n += got;
	while (*fin == SCHED_RUNNING && n < MAXGEN);
	return n;
}

/* Each request alone on a scheduler of one session. */
static void
run_solo(int K)
{
	int lane, full;
	char err[UTIL_ERRLEN];
	pthread_t w;
	struct sched *s = start(1, K, &lane, &w);

	if (s == NULL)
		return;
	for (int i = 0; i < NREQ; i++) {
		struct req *r = &reqs[i];
		struct sched_req q = req_of(r, lane);
		struct sched_seq *h = sched_submit(s, &q, &full, err);

		CHECK(h != NULL);
		if (h == NULL)
			continue;
		r->n_solo = read_all(s, h, r->solo, &r->fin_solo);
		sched_release(s, h);
	}
	stop(s, w);
}

/* All requests on one scheduler of 8 sessions: a new one arrives after
 * every step or two, while the earlier ones prefill and decode. */
static struct sched_stats
run_together(int K)
{
	struct sched_stats st = { 0 };
	int lane, full;
	char err[UTIL_ERRLEN];
	struct sched_seq *h[NREQ];
	pthread_t w;
	struct sched *s = start(8, K, &lane, &w);

	if (s == NULL)
		return st;
	for (int i = 0; i < NREQ; i++) {
		struct sched_req q = req_of(&reqs[i], lane);

		h[i] = sched_submit(s, &q, &full, err);
		CHECK(h[i] != NULL);
		if (i % 3 == 2 && h[i - 2] != NULL) {	/* wait for a token of an earlier one */
			int fin;

			reqs[i - 2].n_got = sched_read(s, h[i - 2], reqs[i - 2].got, 1, &fin, -1);
		}
	}
	for (int i = 0; i < NREQ; i++) {
		struct req *r = &reqs[i];

		if (h[i] == NULL)
			continue;
		r->n_got += read_all(s, h[i], r->got + r->n_got, &r->fin_got);
		sched_release(s, h[i]);
	}
	sched_stats(s, &st);
	stop(s, w);
	return st;
}

static void
check_same(const char *what)
{
	for (int i = 0; i < NREQ; i++) {
		struct req *r = &reqs[i];

		if (r->n_got != r->n_solo || memcmp(r->got, r->solo, r->n_solo * sizeof *r->got) != 0 ||
		    r->fin_got != r->fin_solo)
			FAILF("%s: request %d (%d prompt ids, %s): %d tokens (end %d), alone %d "
			    "(end %d), first difference at %d", what, i, r->n, r->sampled ? "sampled" :
			    "greedy", r->n_got, r->fin_got, r->n_solo, r->fin_solo,
			    (int)(r->n_got < r->n_solo ? r->n_got : r->n_solo));
		r->n_got = 0;
	}
}

TEST(thirty_staggered_requests_each_give_their_solo_tokens)
{
	run_solo(0);
	for (int i = 0; i < NREQ; i++)
		CHECK(reqs[i].n_solo >= 1);
	struct sched_stats st;

	st = run_together(0);
	check_same("plain, 8 sessions");
	CHECK_EQ_INT(st.spec_rounds, 0);
	CHECK(st.prefill_tokens > 0 && st.tokens > 0);
}

/* The by-K counts add up to the totals, and no round drafted more than K. */
static void
check_by_k(const struct sched_stats *st, int K)
{
	long r = 0, d = 0, a = 0;

	for (int k = 1; k <= SPEC_KMAX; k++) {
		r += st->rounds_k[k], d += k * st->rounds_k[k], a += st->accepted_k[k];
		if (k > K)
			CHECK_EQ_INT(st->rounds_k[k], 0);
	}
	CHECK_EQ_INT(r, st->spec_rounds);
	CHECK_EQ_INT(d, st->drafted);
	CHECK_EQ_INT(a, st->accepted);
}

TEST(speculative_decoding_in_the_batch_gives_the_plain_tokens)
{
	struct sched_stats st;

	/* the greedy sessions drafted and A's trained head had drafts accepted:
	 * the verify rows really went through the shared forward */
	st = run_together(3);
	check_same("K=3, 8 sessions");
	CHECK(st.spec_rounds > 0 && st.accepted > 0 && st.accepted < st.drafted);
	check_by_k(&st, 3);
	st = run_together(1);
	check_same("K=1, 8 sessions");
	CHECK(st.spec_rounds > 0 && st.accepted > 0);
	check_by_k(&st, 1);
	CHECK_EQ_INT(st.rounds_k[1], st.spec_rounds);
	printf("# K=1: %ld rounds, %ld of %ld drafts accepted\n", st.spec_rounds, st.accepted,
	    st.drafted);
	/* up to 3 drafts, as many as the lane's measured costs find pay */
	st = run_together(-3);
	check_same("K by load, 8 sessions");
	printf("# K<=3 by load: %ld rounds, %ld of %ld drafts accepted\n", st.spec_rounds,
	    st.accepted, st.drafted);
	CHECK(st.spec_rounds > 0);	/* a depth not yet measured is tried now and then */
	check_by_k(&st, 3);
}

TEST(a_released_session_leaves_the_others_intact)
{
	int lane, full, fin;
	char err[UTIL_ERRLEN];
	struct sched_seq *h[6];
	pthread_t w;
	struct sched *s = start(4, 0, &lane, &w);

	if (s == NULL)
		return;
	for (int i = 0; i < 6; i++) {
		struct sched_req q = req_of(&reqs[i], lane);

		h[i] = sched_submit(s, &q, &full, err);
	}
	reqs[3].n_got = sched_read(s, h[3], reqs[3].got, 1, &fin, -1);
	sched_release(s, h[3]);	/* gone after one token */
	sched_release(s, h[5]);	/* gone while queued */
	for (int i = 0; i < 5; i++) {
		if (i == 3)
			continue;
		reqs[i].n_got = read_all(s, h[i], reqs[i].got, &reqs[i].fin_got);
		sched_release(s, h[i]);
		CHECK_EQ_INT(reqs[i].n_got, reqs[i].n_solo);
		CHECK(memcmp(reqs[i].got, reqs[i].solo, reqs[i].n_solo * 4) == 0);
		reqs[i].n_got = 0;
	}
	stop(s, w);
}

TEST(past_the_sessions_and_the_queue_a_request_is_refused_as_busy)
{
	struct sched_config c;
	struct sched *s;
	struct sched_seq *h[4];
	char err[UTIL_ERRLEN];
	int lane, full = 0;

	sched_config_defaults(&c, be, 256, 2);
	c.max_queue = 1, c.chunk = 32, c.step_prefill = 32, c.reserve = 0;
	s = sched_new(be, &c, err);
	CHECK(s != NULL);
	if (s == NULL || (lane = sched_add_model(s, ma, 0, 1, NULL, err)) < 0)
		return;
	for (int i = 0; i < 3; i++) {	/* no worker: they stay admitted or queued */
		struct sched_req q = req_of(&reqs[i + 1], lane);

		h[i] = sched_submit(s, &q, &full, err);
		CHECK(h[i] != NULL && !full);
	}
	{
		struct sched_req q = req_of(&reqs[4], lane);

		h[3] = sched_submit(s, &q, &full, err);
		CHECK(h[3] == NULL && full == 1);
		CHECK(strstr(err, "busy") != NULL);
		q.n_ids = 256;	/* does not fit: not busy, wrong */
		CHECK(sched_submit(s, &q, &full, err) == NULL && full == 0);
	}
	{
		struct sched_stats st;

		sched_stats(s, &st);
		CHECK_EQ_INT(st.refused, 1);
		CHECK_EQ_INT(st.running + st.queued, 3);
	}
	for (int i = 0; i < 3; i++)
		sched_release(s, h[i]);
	sched_free(s);
}

TEST(a_session_budget_that_cannot_fit_is_refused_naming_what_fits)
{
	struct sched_config c;
	struct sched *s;
	struct sched_fit f;
	char err[UTIL_ERRLEN];
	size_t fr, tot;

	CHECK(backend_mem_info(be, &fr, &tot) == 0);
	sched_config_defaults(&c, be, 1 << 20, 4096);
	s = sched_new(be, &c, err);
	CHECK(s != NULL);
	if (s == NULL)
		return;
	CHECK(sched_fit(s, ma, 0, &f, err) == 0);
	CHECK(f.session == model_state_bytes(ma, 1 << 20, 1));
	CHECK(f.fit < 4096);
	/* max_ctx: the longest multiple of 256 at which 4096 sessions fit */
	CHECK(f.max_ctx % 256 == 0);
	CHECK(model_state_bytes(ma, f.max_ctx, 1) * 4096 <= f.avail || f.max_ctx == 0);
	CHECK(model_state_bytes(ma, f.max_ctx + 256, 1) * 4096 > f.avail);
	CHECK(sched_add_model(s, ma, 0, 1, NULL, err) < 0);
	CHECK(strstr(err, "4096 sessions of ctx 1048576") != NULL);
	CHECK(strstr(err, "at most") != NULL);
	sched_free(s);
}

/* Costs where each row past the first adds `extra` of a one-row step. */
static struct sched_spec_cost
costs(double extra, double draft, double accept)
{
	struct sched_spec_cost c = { .draft = draft };

	for (int m = 1; m <= BACKEND_ROWS_INVARIANT; m++)
		c.rows[m] = 1 + extra * (m - 1);
	for (int j = 0; j < SPEC_KMAX; j++)
		c.accept[j] = accept;
	return c;
}

TEST(speculation_runs_where_the_measured_costs_say_it_pays)
{
	struct sched_spec_cost free_rows = costs(0, 0, 0.5), linear = costs(1, 0, 0.9);
	struct sched_spec_cost gpu = costs(0.13, 0.02, 0.7);	/* ~1.4x a step for 4 rows */

	CHECK_EQ_INT(sched_spec_k(&free_rows, 3, 1), 3);	/* rows cost nothing: all drafts */
	CHECK_EQ_INT(sched_spec_k(&free_rows, 3, 4), 3);	/* 4 x 4 rows: still one group */
	CHECK_EQ_INT(sched_spec_k(&free_rows, 3, 8), 1);	/* 8 x 2 rows fill the group */
	CHECK_EQ_INT(sched_spec_k(&free_rows, 3, 16), 0);	/* another group would be a pass */
	CHECK_EQ_INT(sched_spec_k(&linear, 3, 1), 0);	/* a row a pass: never pays */
	CHECK_EQ_INT(sched_spec_k(&gpu, 3, 1), 3);
	CHECK(sched_spec_k(&gpu, 3, 16) == 0);
	CHECK_EQ_INT(sched_spec_k(&gpu, 0, 1), 0);	/* K = 0: plain */
	gpu.accept[0] = 0.05;	/* a head that rarely hits */
	CHECK_EQ_INT(sched_spec_k(&gpu, 3, 1), 0);
	gpu.draft = 10;	/* drafts that cost more than steps */
	gpu.accept[0] = 0.9;
	CHECK_EQ_INT(sched_spec_k(&gpu, 3, 1), 0);
}

TEST(a_lane_measures_its_steps_at_boot_and_counts_its_acceptance)
{
	struct sched_spec_cost c;
	int lane;
	pthread_t w;
	struct sched *s = start(2, -3, &lane, &w);

	if (s == NULL)
		return;
	sched_spec_costs(s, lane, &c);
	for (int m = 1; m <= BACKEND_ROWS_INVARIANT; m++)
		CHECK(c.rows[m] > 0 && (m == 1 || c.rows[m] >= c.rows[m - 1]));
	CHECK(c.draft > 0);
	CHECK_NEAR(c.accept[0], 0.5, 0);	/* nothing counted yet */
	stop(s, w);
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
	RUN(speculation_runs_where_the_measured_costs_say_it_pays);
	if ((dir = test_model_a("schedule")) == NULL) {
		backend_close(be);
		return test_summary();
	}
	if ((ma = model_open(dir, be, err)) == NULL) {
		printf("not ok schedule: %s\n", err);
		return 1;
	}
	make_reqs();
	RUN(thirty_staggered_requests_each_give_their_solo_tokens);
	RUN(speculative_decoding_in_the_batch_gives_the_plain_tokens);
	RUN(a_released_session_leaves_the_others_intact);
	RUN(past_the_sessions_and_the_queue_a_request_is_refused_as_busy);
	RUN(a_session_budget_that_cannot_fit_is_refused_naming_what_fits);
	RUN(a_lane_measures_its_steps_at_boot_and_counts_its_acceptance);
	model_close(ma);
	backend_close(be);
	return test_summary();
}
