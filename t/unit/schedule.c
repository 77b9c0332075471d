/*
 * schedule: the serving step loop on the qwen35 fixture (../shared/models/A,
 * or MEMRA_MODEL_A) on the CPU.  A reply never depends on what else runs:
 * 30 requests with staggered arrivals, greedy and seeded-sampled, long
 * prompts cut into chunks over many steps, each give exactly the tokens of
 * their run alone; speculative decoding on or off, the same greedy tokens.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "backend_impl.h"
#include "grammar.h"
#include "model.h"
#include "prefix.h"
#include "schedule.h"
#include "schedrun.h"
#include "spec.h"
#include "state.h"
#include "test.h"
#include "tokenizer.h"
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
	c.chunk = 1536;	/* more rows than any forward before this one */
	c.step_prefill = c.step_prefill > c.chunk ? c.step_prefill : c.chunk;
	CHECK(model_reserved(ma) < c.chunk);
	s = sched_new(be, &c, err);
	CHECK(s != NULL);
	if (s == NULL)
		return;
	CHECK(sched_fit(s, ma, 0, &f, err) == 0);
	/* the free memory it counted is after a prompt chunk's activations */
	CHECK(model_reserved(ma) >= c.chunk);
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
	struct sched_spec_cost c = { .step_rows = 16, .draft = draft };

	for (int m = 1; m <= BACKEND_ROWS_MAX; m++)
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
	CHECK_EQ_INT(c.step_rows, 32);	/* the CPU's steps */
	for (int m = 1; m <= c.step_rows; m++)
		CHECK(c.rows[m] > 0 && (m == 1 || c.rows[m] >= c.rows[m - 1]));
	CHECK(c.draft > 0);
	CHECK_NEAR(c.accept[0], 0.5, 0);	/* nothing counted yet */
	stop(s, w);
}

/* Every token of q and its logprobs into out, lp; its count. */
static int
read_all_lp(struct sched *s, struct sched_seq *q, int32_t *out, struct sched_logprob *lp,
    int *fin)
{
	int n = 0, got;

	do
		got = sched_read_lp(s, q, out + n, lp + n, MAXGEN - n, fin, -1), n += got;
	while (*fin == SCHED_RUNNING && n < MAXGEN);
	return n;
}

/* The logprob of token t in the row lg[nv]: log_softmax, in double. */
static double
ref_logprob(const float *lg, int nv, int32_t t)
{
	double mx = -INFINITY, sum = 0;

	for (int i = 0; i < nv; i++)
		mx = lg[i] > mx ? lg[i] : mx;
	for (int i = 0; i < nv; i++)
		sum += exp(lg[i] - mx);
	return lg[t] - mx - log(sum);
}

/* Request r's greedy tokens got[n] re-run one by one on a state of its own:
 * each got[j]'s logprob against lp[j]'s. */
static void
check_greedy_logprobs(const struct req *r, const int32_t *got, const struct sched_logprob *lp,
    int n)
{
	char err[UTIL_ERRLEN];
	int nv = model_hparams(ma)->n_vocab;
	struct state *st = model_state_new(ma, 1024, 1, err);
	float *lg = malloc((size_t)nv * sizeof *lg);

	CHECK(st != NULL && lg != NULL);
	if (st != NULL && lg != NULL && model_forward(ma, st, r->ids, r->n, MODEL_PREFILL, lg,
	    NULL) == 0)
		for (int j = 0; j < n; j++) {
			CHECK_NEAR(lp[j].logprob, ref_logprob(lg, nv, got[j]), 1e-3);
			if (j + 1 < n && model_forward(ma, st, &got[j], 1, 0, lg, NULL) != 0)
				FAILF("forward: %s", model_errmsg(ma));
		}
	state_free(st);
	free(lg);
}

/* lp[n] of tokens t[n] hold together: k alternatives, most likely first,
 * the token among them when greedy, every logprob <= 0. */
static void
check_logprob_shape(const int32_t *t, const struct sched_logprob *lp, int n, int k, int greedy)
{
	for (int j = 0; j < n; j++) {
		CHECK_EQ_INT(lp[j].n_top, k);
		CHECK(lp[j].logprob <= 0 && lp[j].logprob <= lp[j].top_lp[0]);
		for (int i = 1; i < lp[j].n_top; i++)
			CHECK(lp[j].top_lp[i] <= lp[j].top_lp[i - 1]);
		if (greedy) {
			CHECK_EQ_INT(lp[j].top_id[0], t[j]);
			CHECK(lp[j].logprob == lp[j].top_lp[0]);
		}
	}
}

/*
 * A session that asks for logprobs gets the tokens it gets without them
 * (greedy ones on a speculative lane too), and each token's logprob is
 * the log-softmax of the row it was drawn from, as a plain forward gives it.
 */
TEST(logprobs_come_with_the_tokens_a_session_gets_without_them)
{
	int lane, full, fin, n[6] = { 0 };
	char err[UTIL_ERRLEN];
	struct sched_seq *h[6];
	struct sched_logprob lp[6][MAXGEN];
	int32_t got[6][MAXGEN];
	pthread_t w;
	struct sched *s = start(4, 3, &lane, &w);

	if (s == NULL)
		return;
	for (int i = 0; i < 6; i++) {
		struct sched_req q = req_of(&reqs[i], lane);

		q.logprobs = 1, q.top_logprobs = 1 + i;
		h[i] = sched_submit(s, &q, &full, err);
		CHECK(h[i] != NULL);
	}
	for (int i = 0; i < 6; i++) {
		struct req *r = &reqs[i];

		if (h[i] == NULL)
			continue;
		n[i] = read_all_lp(s, h[i], got[i], lp[i], &fin);
		sched_release(s, h[i]);
		CHECK_EQ_INT(n[i], r->n_solo);
		CHECK(memcmp(got[i], r->solo, r->n_solo * sizeof *r->solo) == 0);
		check_logprob_shape(got[i], lp[i], n[i], 1 + i, !r->sampled);
	}
	stop(s, w);	/* (the backend is the worker's until then) */
	for (int i = 0; i < 6; i++)
		if (!reqs[i].sampled && reqs[i].n < 200)
			check_greedy_logprobs(&reqs[i], got[i], lp[i], n[i]);
}

/* Request r submitted with n choices (seed + i each) into got[n][MAXGEN]; the counts. */
static void
run_choices(struct sched *s, int lane, struct req *r, int n, int32_t got[][MAXGEN], int *cnt)
{
	struct sched_req q = req_of(r, lane);
	struct sched_seq *h[4];
	char err[UTIL_ERRLEN];
	int full, fin;

	if (sched_submit_n(s, &q, n, h, &full, err) != 0) {
		FAILF("sched_submit_n: %s", err);
		return;
	}
	for (int i = n - 1; i >= 0; i--) {	/* the last first: the others wait in their buffers */
		cnt[i] = read_all(s, h[i], got[i], &fin);
		sched_release(s, h[i]);
	}
}

/*
 * n choices share one prefill; choice i gives exactly the tokens of the
 * same request alone with seed + i, sampled or greedy (whose choices are
 * all the greedy reply), on a speculative lane too.
 */
TEST(n_choices_each_give_the_reply_of_their_seed_alone)
{
	int lane, full, cnt[4], alone[MAXGEN], n_alone = 0, fin;
	int32_t got[4][MAXGEN], one[MAXGEN];
	char err[UTIL_ERRLEN];
	struct sched_stats st;
	pthread_t w;
	struct sched *s = start(4, 3, &lane, &w);
	struct req *r = &reqs[4];	/* sampled, 4 + 20 tokens at most */

	if (s == NULL)
		return;
	CHECK(r->sampled);
	run_choices(s, lane, r, 3, got, cnt);
	for (int i = 0; i < 3; i++) {
		struct sched_req q = req_of(r, lane);
		struct sched_seq *h;

		q.sp.seed += i;
		CHECK((h = sched_submit(s, &q, &full, err)) != NULL);
		n_alone = h ? read_all(s, h, one, &fin) : 0;
		sched_release(s, h);
		CHECK_EQ_INT(cnt[i], n_alone);
		CHECK(memcmp(got[i], one, n_alone * sizeof *one) == 0);
		alone[i] = one[0];
	}
	CHECK(alone[0] != alone[1] || alone[1] != alone[2] || memcmp(got[0], got[1], 4) != 0 ||
	    memcmp(got[1], got[2], 4) != 0);	/* the seeds drew different replies */
	sched_stats(s, &st);
	r = &reqs[0];	/* greedy */
	run_choices(s, lane, r, 2, got, cnt);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ_INT(cnt[i], r->n_solo);
		CHECK(memcmp(got[i], r->solo, r->n_solo * sizeof *r->solo) == 0);
	}
	{
		struct sched_req q = req_of(r, lane);
		struct sched_seq *h[5];

		CHECK(sched_submit_n(s, &q, 5, h, &full, err) == -1 && full == 0);
		CHECK_EQ_STR(err, "n 5: out of range 1..4 (the sessions that run at once)");
	}
	stop(s, w);
}

/* A request's first choice released while the choices wait in the queue:
 * the others end (an error), nothing hangs, and the queue moves on. */
TEST(the_choices_of_a_cancelled_first_choice_end)
{
	int lane, full, fin, n;
	int32_t t[MAXGEN];
	char err[UTIL_ERRLEN];
	struct sched_seq *busy, *h[2], *after;
	pthread_t w;
	struct sched *s = start(2, 0, &lane, &w);
	struct sched_req q;

	if (s == NULL)
		return;
	q = req_of(&reqs[1], lane);
	q.max_tokens = 900, q.ignore_eos = 1;
	busy = sched_submit(s, &q, &full, err);	/* holds one of the two sessions for a while */
	q.max_tokens = MAXGEN;
	CHECK(busy != NULL && sched_read(s, busy, t, 1, &fin, -1) == 1);
	CHECK(sched_submit_n(s, &q, 2, h, &full, err) == 0);
	after = sched_submit(s, &q, &full, err);
	sched_release(s, h[0]);
	n = read_all(s, h[1], t, &fin);
	CHECK_EQ_INT(n, 0);
	CHECK_EQ_INT(fin, SCHED_ERROR);
	CHECK_EQ_STR(sched_seq_errmsg(h[1]), "the prompt shared with choice 0 was cancelled");
	sched_release(s, h[1]);
	CHECK(after != NULL && read_all(s, after, t, &fin) == MAXGEN && fin == SCHED_LENGTH);
	sched_release(s, after);
	sched_release(s, busy);
	stop(s, w);
}


#define GMAX 48		/* a grammar reply's tokens at most */

/* The greedy reply to prompt ids[n] under grammar g, by hand: each row's
 * logits masked by the grammar, their argmax (the lowest id on ties). */
static int
masked_greedy(struct grammar *g, const int32_t *ids, int n, int32_t stop, int32_t *out)
{
	char err[UTIL_ERRLEN];
	int nv = model_hparams(ma)->n_vocab, k = 0;
	float *lg = malloc((size_t)nv * sizeof *lg);
	struct state *st = model_state_new(ma, 1024, 1, err);
	struct grammar_state *gs = grammar_state_new(g);
	int32_t t = -1;

	if (lg == NULL || st == NULL || gs == NULL ||
	    model_forward(ma, st, ids, n, MODEL_PREFILL, lg, NULL) != 0)
		k = -1;
	while (k >= 0 && k < GMAX) {
		int best = -1;

		if (grammar_mask_logits(gs, lg, nv, GMAX - k > 1 ? GMAX - k - 1 : 1) <= 0)
			break;
		if (grammar_done(gs))	/* a whole document ends there */
			for (int i = 0; i < nv; i++)
				lg[i] = i == stop ? lg[i] : -INFINITY;
		for (int i = 0; i < nv; i++)
			if (isfinite(lg[i]) && (best < 0 || lg[i] > lg[best]))
				best = i;
		if (best < 0 || grammar_accept(gs, best) != 0)
			break;
		if ((t = best) == stop)
			break;
		out[k++] = t;
		if (model_forward(ma, st, &t, 1, 0, lg, NULL) != 0)
			k = -1;
	}
	free(lg), state_free(st), grammar_state_free(gs);
	return k;
}

/* 1 when ids[n] walk g's automaton to a whole document. */
static int
whole_document(struct grammar *g, const int32_t *ids, int n)
{
	struct grammar_state *gs = grammar_state_new(g);
	int ok = gs != NULL;

	for (int i = 0; ok && i < n; i++)
		ok = grammar_accept(gs, ids[i]) == 0;
	ok = ok && grammar_done(gs);
	grammar_state_free(gs);
	return ok;
}

/*
 * Under a grammar every reply is a whole document: greedy ones (on a lane
 * that drafts when it pays) are the argmax of the masked rows, sampled
 * ones walk the automaton, and each is the same alone as beside the
 * others.
 */
TEST(a_grammar_s_replies_are_whole_documents_and_greedy_is_the_masked_argmax)
{
	char err[UTIL_ERRLEN] = "";
	struct tokenizer *tok = model_tokenizer(ma, err);
	int32_t eos = tok != NULL ? tokenizer_eos(tok) : -1;
	struct grammar_vocab *v = tok != NULL ? grammar_vocab_new(tok, &eos, 1, err) : NULL;
	struct grammar *g = v != NULL ? grammar_compile(NULL, v, NULL, err) : NULL;
	int32_t got[2][6][GMAX], ref[GMAX];
	int n[2][6], fin[6], lane, full;

	CHECK(g != NULL);
	if (g == NULL) {
		printf("# %s\n", err);
		goto out;
	}
	for (int pass = 0; pass < 2; pass++) {	/* 0: one at a time; 1: together */
		pthread_t w;
		struct sched *s = start(pass ? 6 : 1, -3, &lane, &w);
		struct sched_seq *q[6];

		if (s == NULL)
			goto out;
		for (int i = 0; i < 6; i++) {
			struct sched_req r = req_of(&reqs[i + 1], lane);

			r.stop = &eos, r.ignore_eos = 0, r.max_tokens = GMAX, r.grammar = g;
			r.sp.temp = i % 2 ? 1.0f : 0, r.sp.top_k = 0, r.sp.seed = 77 + i;
			q[i] = sched_submit(s, &r, &full, err);
			CHECK(q[i] != NULL);
			if (q[i] != NULL && !pass) {
				n[pass][i] = 0;
				do
					n[pass][i] += sched_read(s, q[i], got[pass][i] + n[pass][i],
					    GMAX - n[pass][i], &fin[i], -1);
				while (fin[i] == SCHED_RUNNING);
				sched_release(s, q[i]);
			}
		}
		for (int i = 0; pass && i < 6; i++) {
			n[pass][i] = 0;
			do
				n[pass][i] += sched_read(s, q[i], got[pass][i] + n[pass][i],
				    GMAX - n[pass][i], &fin[i], -1);
			while (fin[i] == SCHED_RUNNING);
			sched_release(s, q[i]);
		}
		stop(s, w);
	}
	for (int i = 0; i < 6; i++) {
		CHECK(whole_document(g, got[1][i], n[1][i]));
		CHECK_EQ_INT(n[1][i], n[0][i]);
		CHECK(memcmp(got[1][i], got[0][i], n[0][i] * sizeof got[0][i][0]) == 0);
		if (i % 2 == 0) {
			int k = masked_greedy(g, reqs[i + 1].ids, reqs[i + 1].n, eos, ref);

			CHECK_EQ_INT(n[1][i], k);
			CHECK(k > 0 && memcmp(got[1][i], ref, k * sizeof ref[0]) == 0);
		}
	}
out:
	grammar_free(g), grammar_vocab_free(v), tokenizer_free(tok);
}


/* Greedy replies under grammar g (NULL: none) to requests 1..6, with logprobs
 * (top 3) when lp, all at once on a lane of K drafts (pinned; 0: plain);
 * the lane's stats into st. */
static void
greedy_six(int K, struct grammar *g, int32_t eos, int lp, int32_t got[6][GMAX], int *n,
    struct sched_logprob lps[6][GMAX], struct sched_stats *st)
{
	int lane, full, fin;
	char err[UTIL_ERRLEN];
	struct sched_seq *q[6];
	pthread_t w;
	struct sched *s = start(6, K, &lane, &w);

	if (s == NULL)
		return;
	for (int i = 0; i < 6; i++) {
		struct sched_req r = req_of(&reqs[i + 1], lane);

		r.stop = &eos, r.ignore_eos = 0, r.max_tokens = GMAX, r.grammar = g;
		r.sp.temp = 0, r.logprobs = lp, r.top_logprobs = lp ? 3 : 0;
		CHECK((q[i] = sched_submit(s, &r, &full, err)) != NULL);
	}
	for (int i = 0; i < 6; i++) {
		n[i] = 0;
		do
			n[i] += sched_read_lp(s, q[i], got[i] + n[i], lp ? lps[i] + n[i] : NULL,
			    GMAX - n[i], &fin, -1);
		while (q[i] != NULL && fin == SCHED_RUNNING);
		CHECK(fin != SCHED_ERROR);
		sched_release(s, q[i]);
	}
	sched_stats(s, st);
	stop(s, w);
}

/*
 * A greedy session under a grammar decodes speculatively on a lane that
 * drafts: a draft the grammar refuses is cut at the verify row's masked
 * pick like any wrong draft, so each reply is the plain masked argmax (by
 * hand), which differs from the unmasked reply; drafts were made, some
 * kept, some cut.
 */
TEST(speculative_sessions_under_a_grammar_give_the_plain_masked_tokens)
{
	char err[UTIL_ERRLEN] = "";
	struct tokenizer *tok = model_tokenizer(ma, err);
	int32_t eos = tok != NULL ? tokenizer_eos(tok) : -1;
	struct grammar_vocab *v = tok != NULL ? grammar_vocab_new(tok, &eos, 1, err) : NULL;
	struct grammar *g = v != NULL ? grammar_compile(NULL, v, NULL, err) : NULL;
	int32_t got[6][GMAX], ref[GMAX], free_[6][GMAX];
	int n[6] = { 0 }, nf[6] = { 0 }, differ = 0;
	struct sched_stats st = { 0 }, st0;

	CHECK(g != NULL);
	if (g == NULL)
		goto out;
	greedy_six(3, g, eos, 0, got, n, NULL, &st);
	greedy_six(3, NULL, eos, 0, free_, nf, NULL, &st0);
	for (int i = 0; i < 6; i++) {
		int k = masked_greedy(g, reqs[i + 1].ids, reqs[i + 1].n, eos, ref);

		CHECK_EQ_INT(n[i], k);
		CHECK(k > 0 && memcmp(got[i], ref, k * sizeof ref[0]) == 0);
		CHECK(whole_document(g, got[i], n[i]));
		differ += nf[i] != n[i] || memcmp(free_[i], got[i], n[i] * sizeof got[i][0]) != 0;
	}
	CHECK(differ > 0);	/* the mask mattered */
	printf("# under the grammar: %ld rounds, %ld of %ld drafts kept\n", st.spec_rounds,
	    st.accepted, st.drafted);
	CHECK(st.spec_rounds > 0 && st.accepted > 0 && st.accepted < st.drafted);
out:
	grammar_free(g), grammar_vocab_free(v), tokenizer_free(tok);
}

/*
 * Replies under grammar g to requests 1..8 all at once on a plain lane,
 * the masks on the host (host_mask) or where the logits are: greedy and
 * sampled (a draw from the whole row, a top-k), max_tokens that close the
 * document early among them, two with logprobs (their rows on the host
 * either way).  Tokens, counts and finishes into got, n, fin; the
 * scheduler's masked picks into *masked.
 */
static void
grammar_eight(struct grammar *g, int32_t eos, int host_mask, int32_t got[8][GMAX], int *n,
    int *fin, long *masked)
{
	static const int maxt[8] = { GMAX, GMAX, GMAX, 5, 3, 8, GMAX, GMAX };
	struct sched_config c;
	struct sched_stats st;
	struct sched_seq *q[8];
	char err[UTIL_ERRLEN];
	struct sched *s;
	int lane, full;
	pthread_t w;

	sched_config_defaults(&c, be, 1024, 8);
	c.chunk = 64, c.step_prefill = 128, c.reserve = 0, c.host_mask = host_mask;
	if ((s = sched_new(be, &c, err)) == NULL || (lane = sched_add_model(s, ma, 0, 0, NULL,
	    err)) < 0) {
		printf("# %s\n", err);
		CHECK(0);
		sched_free(s);
		return;
	}
	pthread_create(&w, NULL, worker, s);
	for (int i = 0; i < 8; i++) {
		struct sched_req r = req_of(&reqs[i + 1], lane);

		r.stop = &eos, r.ignore_eos = 0, r.max_tokens = maxt[i], r.grammar = g;
		r.sp.temp = i % 3 == 1 ? 1.0f : i % 3 == 2 ? 0.7f : 0, r.sp.seed = 50 + i;
		r.sp.top_k = i % 3 == 2 ? 20 : 0;
		r.logprobs = i >= 6, r.top_logprobs = i >= 6 ? 2 : 0;
		CHECK((q[i] = sched_submit(s, &r, &full, err)) != NULL);
	}
	for (int i = 0; i < 8; i++) {
		n[i] = 0;
		do
			n[i] += sched_read(s, q[i], got[i] + n[i], GMAX - n[i], &fin[i], -1);
		while (q[i] != NULL && fin[i] == SCHED_RUNNING);
		sched_release(s, q[i]);
	}
	sched_stats(s, &st);
	*masked = st.masked;
	stop(s, w);
}

/*
 * On a backend with backend_mask (the CPU's here) a grammar session that
 * wants no logprobs and decodes plain has each row masked where the
 * logits are and its token picked there: the replies are those of the
 * host's mask (sched_config.host_mask), token for token, greedy and
 * sampled, closing early too; the greedy ones are the masked argmax by
 * hand; only the device path counts masked picks.
 */
TEST(grammar_masks_where_the_logits_are_give_the_host_mask_s_tokens)
{
	char err[UTIL_ERRLEN] = "";
	struct tokenizer *tok = model_tokenizer(ma, err);
	int32_t eos = tok != NULL ? tokenizer_eos(tok) : -1;
	struct grammar_vocab *v = tok != NULL ? grammar_vocab_new(tok, &eos, 1, err) : NULL;
	struct grammar *g = v != NULL ? grammar_compile(NULL, v, NULL, err) : NULL;
	static int32_t got[2][8][GMAX];
	int32_t ref[GMAX];
	int n[2][8], fin[2][8];
	long masked[2] = { -1, -1 };

	CHECK(g != NULL && backend_has_mask(be));
	if (g == NULL)
		goto out;
	grammar_eight(g, eos, 0, got[0], n[0], fin[0], &masked[0]);
	grammar_eight(g, eos, 1, got[1], n[1], fin[1], &masked[1]);
	for (int i = 0; i < 8; i++) {
		CHECK_EQ_INT(n[0][i], n[1][i]);
		CHECK_EQ_INT(fin[0][i], fin[1][i]);
		CHECK(fin[0][i] == SCHED_STOP || fin[0][i] == SCHED_LENGTH);
		CHECK(memcmp(got[0][i], got[1][i], n[1][i] * sizeof got[0][i][0]) == 0);
		CHECK(n[0][i] > 0 && whole_document(g, got[0][i], n[0][i]));
		if (i == 0 || i == 6) {	/* greedy, max_tokens GMAX (6: with logprobs) */
			int k = masked_greedy(g, reqs[i + 1].ids, reqs[i + 1].n, eos, ref);

			CHECK_EQ_INT(n[0][i], k);
			CHECK(k > 0 && memcmp(got[0][i], ref, k * sizeof ref[0]) == 0);
		}
	}
	printf("# masked where the logits are: %ld picks (host path: %ld)\n", masked[0],
	    masked[1]);
	CHECK(masked[0] > 0 && masked[1] == 0);
out:
	grammar_free(g), grammar_vocab_free(v), tokenizer_free(tok);
}

/* A greedy session with logprobs decodes speculatively: its verify rows'
 * logits go to the host, and its tokens and logprobs (the token's and the
 * top 3) are bit for bit those of plain decode, with a grammar too. */
TEST(speculative_logprobs_are_plain_decode_s)
{
	char err[UTIL_ERRLEN] = "";
	struct tokenizer *tok = model_tokenizer(ma, err);
	int32_t eos = tok != NULL ? tokenizer_eos(tok) : -1;
	struct grammar_vocab *v = tok != NULL ? grammar_vocab_new(tok, &eos, 1, err) : NULL;
	struct grammar *g = v != NULL ? grammar_compile(NULL, v, NULL, err) : NULL;
	static int32_t got[2][6][GMAX];
	static struct sched_logprob lp[2][6][GMAX];
	int n[2][6];
	struct sched_stats st[2];

	for (int pass = 0; pass < 2; pass++) {	/* 0: no grammar; 1: any object */
		greedy_six(0, pass ? g : NULL, eos, 1, got[0], n[0], lp[0], &st[0]);
		greedy_six(3, pass ? g : NULL, eos, 1, got[1], n[1], lp[1], &st[1]);
		CHECK(st[0].spec_rounds == 0 && st[1].spec_rounds > 0 && st[1].accepted > 0);
		for (int i = 0; i < 6; i++) {
			CHECK_EQ_INT(n[1][i], n[0][i]);
			CHECK(memcmp(got[1][i], got[0][i], n[0][i] * sizeof got[0][i][0]) == 0);
			for (int j = 0; j < n[0][i] && j < n[1][i]; j++) {
				const struct sched_logprob *a = &lp[0][i][j], *b = &lp[1][i][j];

				if (memcmp(&a->logprob, &b->logprob, sizeof a->logprob) != 0 ||
				    a->n_top != b->n_top || memcmp(a->top_id, b->top_id,
				    a->n_top * sizeof a->top_id[0]) != 0 || memcmp(a->top_lp, b->top_lp,
				    a->n_top * sizeof a->top_lp[0]) != 0) {
					FAILF("pass %d request %d token %d: logprob %.9g vs %.9g", pass, i, j,
					    a->logprob, b->logprob);
					break;
				}
			}
		}
	}
	grammar_free(g), grammar_vocab_free(v), tokenizer_free(tok);
}

/*
 * On a backend whose prompt rows take other bits where a forward is cut
 * inside a chunk (backend_cut_exact 0: the CUDA backend, measured), a
 * resume inside a chunk would not be exact: the prefix block defaults to
 * the chunk there, a smaller block is refused naming why, and so is a
 * model one of whose stages runs on such a backend.  (Here the CPU backend
 * is told it is such a backend.)
 */
TEST(where_a_cut_changes_prompt_bits_the_prefix_block_is_the_chunk)
{
	char err[UTIL_ERRLEN] = "";
	struct sched_config c;
	struct prefix_stats ps = { 0 };
	struct sched *s;
	int lane;

	sched_config_defaults(&c, be, 1024, 2);
	c.prefix_bytes = (size_t)64 << 20;
	be->cut_exact = 0;
	s = sched_new(be, &c, err);
	CHECK(s != NULL);
	lane = s != NULL ? sched_add_model(s, ma, 0, 1, NULL, err) : -1;
	CHECK(lane >= 0);
	CHECK(lane >= 0 && sched_prefix_stats(s, lane, &ps) == 0);
	CHECK_EQ_INT(ps.block, 512);
	sched_free(s);
	c.block = 64;
	CHECK((s = sched_new(be, &c, err)) == NULL);
	CHECK(strstr(err, "a prefix block of 64 tokens on backend 'cpu") != NULL);
	CHECK(strstr(err, "the block must be the chunk of 512 there") != NULL);
	sched_free(s);
	be->cut_exact = 1;	/* a block of 64 on the CPU, then a stage that cannot take it */
	CHECK((s = sched_new(be, &c, err)) != NULL);
	be->cut_exact = 0;
	CHECK(s != NULL && sched_add_model(s, ma, 0, 1, NULL, err) < 0);
	CHECK(strstr(err, "not be exact; the block must be the chunk of 512 there") != NULL);
	be->cut_exact = 1;
	sched_free(s);
	CHECK((s = sched_new(be, &c, err)) != NULL);
	CHECK(s != NULL && (lane = sched_add_model(s, ma, 0, 1, NULL, err)) >= 0);
	CHECK(lane >= 0 && sched_prefix_stats(s, lane, &ps) == 0 && ps.block == 64);
	sched_free(s);
}

#define NWIDE 32

/* NWIDE short greedy requests: prompts of 4..19 ids, 6..13 new tokens. */
static struct req wide[NWIDE];

static void
make_wide(void)
{
	int nv = model_hparams(ma)->n_vocab;

	for (int i = 0; i < NWIDE; i++) {
		struct req *r = &wide[i];

		r->n = 4 + (i * 7) % 16;
		for (int k = 0; k < r->n; k++)
			r->ids[k] = (int32_t)((i * 131 + k * 977 + 5) % nv);
		r->max_tokens = 6 + i % 8;
		r->ignore_eos = 1;
	}
}

/*
 * The NWIDE requests on a scheduler of NWIDE sessions (solo: one at a time
 * on a scheduler of one), all submitted before its worker starts, a step
 * prefilling every prompt: from the second step on they decode together.
 * The stats at the end.
 */
static struct sched_stats
run_wide(int solo)
{
	struct sched_stats st = { 0 };
	struct sched_config c;
	struct sched_seq *h[NWIDE];
	char err[UTIL_ERRLEN];
	struct sched *s;
	pthread_t w;
	int lane = -1, full, n = solo ? 1 : NWIDE;

	sched_config_defaults(&c, be, 1024, n);
	c.chunk = 64, c.step_prefill = NWIDE * 64, c.max_queue = NWIDE, c.reserve = 0;
	if ((s = sched_new(be, &c, err)) == NULL || (lane = sched_add_model(s, ma, 0, 0, NULL,
	    err)) < 0) {
		FAILF("wide: %s", err);
		sched_free(s);
		return st;
	}
	for (int i = 0; i < NWIDE; i += n) {
		for (int j = i; j < i + n; j++) {
			struct sched_req q = req_of(&wide[j], lane);

			CHECK((h[j] = sched_submit(s, &q, &full, err)) != NULL);
		}
		pthread_create(&w, NULL, worker, s);
		for (int j = i; j < i + n; j++) {
			struct req *r = &wide[j];

			if (h[j] == NULL)
				continue;
			if (solo)
				r->n_solo = read_all(s, h[j], r->solo, &r->fin_solo);
			else
				r->n_got = read_all(s, h[j], r->got, &r->fin_got);
			sched_release(s, h[j]);
		}
		sched_stats(s, &st);
		sched_shutdown(s);
		pthread_join(w, NULL);
		if (i + n < NWIDE) {	/* the next solo request on a fresh scheduler */
			sched_free(s);
			s = sched_new(be, &c, err);
			lane = s != NULL ? sched_add_model(s, ma, 0, 0, NULL, err) : -1;
			if (lane < 0) {
				FAILF("wide: %s", err);
				break;
			}
		}
	}
	sched_free(s);
	return st;
}

static void
check_wide(const char *what)
{
	for (int i = 0; i < NWIDE; i++) {
		struct req *r = &wide[i];

		if (r->n_got != r->n_solo || memcmp(r->got, r->solo, r->n_solo * sizeof *r->got) ||
		    r->fin_got != r->fin_solo || r->n_solo != r->max_tokens)
			FAILF("%s: request %d: %d tokens (end %d), alone %d (end %d)", what, i,
			    r->n_got, r->fin_got, r->n_solo, r->fin_solo);
		r->n_got = 0;
	}
}

/*
 * A step holds as many rows as the backend allows (backend_step_rows): on
 * the CPU 32 sessions decode in one group of 32 rows, each reply its run
 * alone; told its limit is 16 (as the CUDA backend's is), the same
 * sessions run in groups of 16, the same replies, and the lane's costs
 * cover steps of 1..16 rows.
 */
TEST(thirty_two_sessions_decode_in_one_group_where_the_backend_allows_it)
{
	struct sched_stats st32, st16;
	struct sched_spec_cost cost;
	int keep = be->step_rows;

	make_wide();
	run_wide(1);
	CHECK_EQ_INT(backend_step_rows(be), 32);
	st32 = run_wide(0);
	check_wide("a step of 32 rows");
	CHECK_EQ_INT(st32.step_rows_most, 32);
	printf("# 32 sessions, a step of at most 32 rows: %ld steps, %ld groups, %d rows at most\n",
	    st32.steps, st32.step_groups, st32.step_rows_most);
	be->step_rows = 16;
	CHECK_EQ_INT(model_step_rows(ma), 16);
	st16 = run_wide(0);
	check_wide("a step of 16 rows");
	CHECK_EQ_INT(st16.step_rows_most, 16);
	CHECK(st16.step_groups > st32.step_groups);
	printf("# 32 sessions, a step of at most 16 rows: %ld steps, %ld groups, %d rows at most\n",
	    st16.steps, st16.step_groups, st16.step_rows_most);
	{
		struct run r = { 0 };
		struct sched_config c;
		char err[UTIL_ERRLEN];

		sched_config_defaults(&c, be, 256, 1);
		CHECK((r.s = sched_new(be, &c, err)) != NULL);
		if (r.s != NULL && (r.lane = sched_add_model(r.s, ma, 3, 0, NULL, err)) >= 0) {
			sched_spec_costs(r.s, r.lane, &cost);
			CHECK_EQ_INT(cost.step_rows, 16);
			CHECK(cost.rows[16] > 0);
		}
		sched_free(r.s);
	}
	be->step_rows = keep;
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
	RUN(logprobs_come_with_the_tokens_a_session_gets_without_them);
	RUN(n_choices_each_give_the_reply_of_their_seed_alone);
	RUN(the_choices_of_a_cancelled_first_choice_end);
	RUN(a_grammar_s_replies_are_whole_documents_and_greedy_is_the_masked_argmax);
	RUN(speculative_sessions_under_a_grammar_give_the_plain_masked_tokens);
	RUN(speculative_logprobs_are_plain_decode_s);
	RUN(grammar_masks_where_the_logits_are_give_the_host_mask_s_tokens);
	RUN(past_the_sessions_and_the_queue_a_request_is_refused_as_busy);
	RUN(a_session_budget_that_cannot_fit_is_refused_naming_what_fits);
	RUN(a_lane_measures_its_steps_at_boot_and_counts_its_acceptance);
	RUN(where_a_cut_changes_prompt_bits_the_prefix_block_is_the_chunk);
	RUN(thirty_two_sessions_decode_in_one_group_where_the_backend_allows_it);
	model_close(ma);
	backend_close(be);
	return test_summary();
}
