#include "schedule.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "model.h"
#include "spec.h"
#include "state.h"
#include "util.h"

#define MAX_LANES 8
#define SCHED_EXPLORE 256	/* tries of a draft depth before exploring stops */

/* A session slot of a lane: a speculative decoder (whose state plain
 * sessions use too) or, on a plain lane, a state. */
struct slot {
	struct spec *spec;
	struct state *st;
	int	used;
};

struct lane {
	struct model *m;
	int	K, pin, nv, ne;
	struct sched_spec_cost cost;	/* rows, draft: measured at boot */
	long	tried[SPEC_KMAX], hit[SPEC_KMAX];	/* drafts reached, accepted, by depth */
	long	admitted;	/* greedy sessions admitted unpinned: every 16th explores */
	struct slot *slots;	/* [max_sessions] */
	float	*lg;		/* [BACKEND_ROWS_INVARIANT * (SPEC_KMAX + 1)][nv] host logits */
	float	*hid;		/* [same][ne] host hidden rows */
	int32_t	*ids;		/* [same] */
};

struct sched_seq {
	struct sched_seq *next;	/* in the queue */
	uint64_t id;
	int	lane, slot;	/* slot -1 while queued */
	int32_t	*hist;		/* [n_ctx + SPEC_KMAX + 1]: prompt, then new tokens */
	int	n_prompt, n_hist, done_prompt;
	int	max_tokens, n_gen, ignore_eos, spec;	/* spec: decoded speculatively */
	int32_t	*stop;
	int	n_stop;
	struct sample_params sp;
	struct sampler *smp;
	struct state *st;
	int32_t	*out;		/* tokens not yet read */
	struct sched_logprob *lp;	/* [cap_out] their logprobs, with logprobs */
	int	n_out, cap_out;
	int	logprobs, top;	/* each token's logprob, and `top` alternatives */
	uint64_t group;		/* choice i > 0 of sched_submit_n: choice 0's id */
	int	n_kids;		/* choice 0: the choices after it */
	int	wait_prompt;	/* choice i > 0: until choice 0's prompt is copied in */
	int	finish, released, active;	/* active: admitted, slot held */
	double	t_submit, t_admit, t_first;
	char	err[UTIL_ERRLEN];
};

struct sched {
	struct backend *be;
	struct sched_config c;
	struct lane lanes[MAX_LANES];
	int	n_lanes;
	pthread_mutex_t mu;
	pthread_cond_t work, out;	/* work: for the worker; out: for readers */
	struct sched_seq *qhead, *qtail;	/* waiting, FIFO */
	struct sched_seq **run;	/* [max_sessions] running, in admission order */
	struct sched_seq **act, **grp;	/* [max_sessions] the worker's: a step's sessions */
	struct state **st;	/* [max_sessions] a forward's states */
	int	*rows;		/* [max_sessions] and rows */
	int	n_run, n_queued, shut;
	uint64_t next_id;
	struct sched_stats stats;
	char	err[UTIL_ERRLEN];
};

void
sched_config_defaults(struct sched_config *c, const struct backend *be, int n_ctx,
    int max_sessions)
{
	memset(c, 0, sizeof *c);
	c->n_ctx = n_ctx, c->max_sessions = max_sessions;
	c->max_queue = 4 * max_sessions;
	c->chunk = 512, c->step_prefill = 2048;
	c->reserve = (size_t)(backend_host(be) ? 512 : 1024) << 20;
}

struct sched *
sched_new(struct backend *be, const struct sched_config *c, char *err)
{
	struct sched *s;

	if (c->n_ctx < 2 || c->max_sessions < 1 || c->max_queue < 0 ||
	    c->chunk <= BACKEND_ROWS_INVARIANT || c->step_prefill < c->chunk) {
		util_err(err, "sched: bad config (ctx %d, %d sessions, queue %d, chunk %d, "
		    "step prefill %d)", c->n_ctx, c->max_sessions, c->max_queue, c->chunk,
		    c->step_prefill);
		return NULL;
	}
	if ((s = calloc(1, sizeof *s)) == NULL ||
	    (s->run = calloc(c->max_sessions, sizeof *s->run)) == NULL ||
	    (s->act = calloc(c->max_sessions, sizeof *s->act)) == NULL ||
	    (s->grp = calloc(c->max_sessions, sizeof *s->grp)) == NULL ||
	    (s->st = calloc(c->max_sessions, sizeof *s->st)) == NULL ||
	    (s->rows = calloc(c->max_sessions, sizeof *s->rows)) == NULL) {
		if (s != NULL)
			free(s->run), free(s->act), free(s->grp), free(s->st), free(s->rows);
		free(s);
		util_err(err, "out of memory");
		return NULL;
	}
	s->be = be, s->c = *c;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->work, NULL);
	pthread_cond_init(&s->out, NULL);
	return s;
}

static void
seq_free(struct sched_seq *q)
{
	if (q == NULL)
		return;
	sample_free(q->smp);
	free(q->hist), free(q->stop), free(q->out), free(q->lp);
	free(q);
}

static void
lane_free(struct lane *l, int n)
{
	for (int i = 0; l->slots != NULL && i < n; i++) {
		spec_free(l->slots[i].spec);
		if (l->slots[i].spec == NULL)
			state_free(l->slots[i].st);
	}
	free(l->slots);
	model_host_free(l->m, l->lg), model_host_free(l->m, l->hid);
	free(l->ids);
}

void
sched_free(struct sched *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < s->n_run; i++)
		seq_free(s->run[i]);
	for (struct sched_seq *q = s->qhead, *n; q != NULL; q = n)
		n = q->next, seq_free(q);
	for (int i = 0; i < s->n_lanes; i++)
		lane_free(&s->lanes[i], s->c.max_sessions);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->out);
	free(s->run), free(s->act), free(s->grp), free(s->st), free(s->rows);
	free(s);
}

/* Seconds of a step of `sessions` sessions of r rows each, in groups. */
static double
step_time(const struct sched_spec_cost *c, int r, int sessions)
{
	int per = BACKEND_ROWS_INVARIANT / r, full = sessions / per, rest = sessions % per;

	return full * c->rows[per * r] + (rest ? c->rows[rest * r] : 0);
}

int
sched_spec_k(const struct sched_spec_cost *c, int K, int sessions)
{
	double best = 0, reach = 1, tokens = 1;
	int k_best = 0;

	if (sessions < 1)
		return 0;
	for (int k = 0; k <= K && k + 1 <= BACKEND_ROWS_INVARIANT; k++) {
		double rate;

		if (k > 0)
			reach *= c->accept[k - 1], tokens += reach;
		/* k drafts and, k > 0, the MTP cache's append of the kept rows */
		rate = sessions * tokens / (step_time(c, k + 1, sessions) +
		    sessions * (k > 0 ? k + 1 : 0) * c->draft);
		if (rate > best)
			best = rate, k_best = k;
	}
	return k_best;
}

/* Lane l's costs (under the lock). */
static void
costs_locked(const struct lane *l, struct sched_spec_cost *c)
{
	*c = l->cost;
	for (int j = 0; j < SPEC_KMAX; j++)
		c->accept[j] = (l->hit[j] + 1.0) / (l->tried[j] + 2.0);
}

void
sched_spec_costs(struct sched *s, int lane, struct sched_spec_cost *c)
{
	pthread_mutex_lock(&s->mu);
	costs_locked(&s->lanes[lane], c);
	pthread_mutex_unlock(&s->mu);
}

/*
 * Under the lock: whether greedy session q, admitted now beside the
 * running ones, decodes speculatively: always on a pinned lane; else when
 * drafting pays at that load, and one admission in 16 while the first
 * draft's acceptance has few counts (a speculative session keeps the MTP
 * head's cache, which costs a draft's time a step even when it drafts
 * nothing, so a session that would not draft is admitted plain).
 */
static int
admit_spec(struct sched *s, struct lane *l)
{
	struct sched_spec_cost c;

	if (l->pin)
		return 1;
	costs_locked(l, &c);
	return sched_spec_k(&c, l->K, s->n_run + 1) > 0 ||
	    (l->admitted++ % 16 == 0 && l->tried[0] < SCHED_EXPLORE);
}

/* Seconds of the fastest of three runs of fn; -1 when it fails. */
#define BEST_OF_3(t, call) do { \
	(t) = -1; \
	for (int rep_ = 0; rep_ < 3; rep_++) { \
		double t0_ = util_now(); \
		if ((call) != 0) { (t) = -1; break; } \
		if ((t) < 0 || util_now() - t0_ < (t)) (t) = util_now() - t0_; \
	} \
} while (0)

/*
 * What a lane's steps cost, measured on its first slot's state: a forward
 * of m rows (a verify's shape) for m = 1..16 and a draft (one MTP row),
 * after a warm-up (buffers, recorded steps).  The state is left empty.
 */
static int
lane_measure(struct lane *l, char *err)
{
	struct state *st = l->slots[0].st;
	int32_t tok[BACKEND_ROWS_INVARIANT];
	int n = state_config(st)->n_ctx < BACKEND_ROWS_INVARIANT ? state_config(st)->n_ctx :
	    BACKEND_ROWS_INVARIANT;

	for (int i = 0; i < BACKEND_ROWS_INVARIANT; i++)
		tok[i] = (int32_t)((i * 7919 + 13) % l->nv);
	for (int pass = 0; pass < 2; pass++)	/* the first warms up */
		for (int m = 1; m <= n; m++)
			BEST_OF_3(l->cost.rows[m], (state_reset(st), model_forward_seqs(l->m, &st, &m, 1,
			    tok, 0, NULL, l->ids, NULL)));
	for (int m = n + 1; m <= BACKEND_ROWS_INVARIANT; m++)
		l->cost.rows[m] = l->cost.rows[n] * m / n;
	/* a step of more rows costs no less: noise only adds, so a larger m's
	 * time bounds a smaller one's */
	for (int m = BACKEND_ROWS_INVARIANT - 1; m >= 1; m--)
		if (l->cost.rows[m + 1] >= 0 && l->cost.rows[m + 1] < l->cost.rows[m])
			l->cost.rows[m] = l->cost.rows[m + 1];
	memset(l->hid, 0, (size_t)l->ne * sizeof *l->hid);
	BEST_OF_3(l->cost.draft, (state_reset(st), model_mtp_argmax(l->m, st, 0, 0, l->hid, tok, 1,
	    l->ids, l->hid)));
	state_reset(st);
	for (int m = 1; m <= BACKEND_ROWS_INVARIANT; m++)
		if (l->cost.rows[m] < 0)
			return util_err(err, "measuring a step of %d rows: %s", m, model_errmsg(l->m));
	if (l->cost.draft < 0)
		return util_err(err, "measuring a draft: %s", model_errmsg(l->m));
	return 0;
}

int
sched_fit(struct sched *s, struct model *m, int K, struct sched_fit *f, char *err)
{
	/* a session's bytes are fixed + per_pos x n_ctx (state_bytes) */
	size_t free_b = 0, total = 0, fixed = model_state_bytes(m, 0, K + 1);
	size_t per_pos = model_state_bytes(m, 1, K + 1) - fixed, each, ctx;

	memset(f, 0, sizeof *f);
	if (backend_mem_info(s->be, &free_b, &total) != 0)
		return util_err(err, "%s", backend_errmsg(s->be));
	f->session = fixed + per_pos * s->c.n_ctx;
	f->avail = free_b > s->c.reserve ? free_b - s->c.reserve : 0;
	f->fit = f->avail / f->session > 1 << 30 ? 1 << 30 : (int)(f->avail / f->session);
	each = f->avail / s->c.max_sessions;
	ctx = each > fixed && per_pos > 0 ? (each - fixed) / per_pos / 256 * 256 : 0;
	f->max_ctx = ctx > (size_t)s->c.n_ctx ? s->c.n_ctx / 256 * 256 : (int)ctx;
	return 0;
}

/* The lane's host buffers for a step's rows: every session's verify rows
 * (ids, hidden), and a logits row for each sampled session. */
static int
lane_buffers(struct sched *s, struct lane *l, char *err)
{
	size_t rows = (size_t)s->c.max_sessions * (l->K + 1);

	if (rows < BACKEND_ROWS_INVARIANT)	/* lane_measure's steps */
		rows = BACKEND_ROWS_INVARIANT;

	l->lg = model_host_alloc(l->m, (size_t)s->c.max_sessions * l->nv);
	l->hid = model_host_alloc(l->m, rows * l->ne);
	l->ids = malloc(rows * sizeof *l->ids);
	if (l->lg == NULL || l->hid == NULL || l->ids == NULL)
		return util_err(err, "%s", l->ids ? model_errmsg(l->m) : "out of memory");
	return 0;
}

static int
lane_slots(struct sched *s, struct lane *l, char *err)
{
	int n = s->c.max_sessions;

	free(l->slots);
	if ((l->slots = calloc(n, sizeof *l->slots)) == NULL)
		return util_err(err, "out of memory");
	for (int i = 0; i < n; i++) {
		struct slot *sl = &l->slots[i];

		if (l->K > 0) {
			if ((sl->spec = spec_new(l->m, l->K, s->c.n_ctx, NULL, 0, err)) == NULL)
				return -1;
			sl->st = spec_state(sl->spec);
		} else if ((sl->st = model_state_new(l->m, s->c.n_ctx, 1, err)) == NULL)
			return -1;
	}
	return 0;
}

int
sched_add_model(struct sched *s, struct model *m, int K, int pin, struct sched_fit *fp,
    char *err)
{
	struct lane *l = &s->lanes[s->n_lanes];
	struct sched_fit own, *f = fp != NULL ? fp : &own;
	size_t mib = 1 << 20;

	if (s->n_lanes == MAX_LANES)
		return util_err(err, "sched: more than %d models", MAX_LANES);
	if (K < 0 || K > SPEC_KMAX || (K > 0 && model_hparams(m)->n_mtp < 1))
		return util_err(err, "sched: K %d: %s", K, K > 0 ? "the model has no MTP head" :
		    "out of range");
	if (sched_fit(s, m, K, f, err) != 0)
		return -1;
	if (f->fit < s->c.max_sessions) {
		if (f->max_ctx > 0)
			return util_err(err, "%d sessions of ctx %d need %zu MiB each, %zu MiB in all; "
			    "%zu MiB are free: at most %d sessions of ctx %d, or %d of ctx %d",
			    s->c.max_sessions, s->c.n_ctx, f->session / mib,
			    f->session * s->c.max_sessions / mib, f->avail / mib, f->fit, s->c.n_ctx,
			    s->c.max_sessions, f->max_ctx);
		return util_err(err, "%d sessions of ctx %d need %zu MiB each, %zu MiB in all; "
		    "%zu MiB are free: at most %d sessions of ctx %d", s->c.max_sessions, s->c.n_ctx,
		    f->session / mib, f->session * s->c.max_sessions / mib, f->avail / mib, f->fit,
		    s->c.n_ctx);
	}
	memset(l, 0, sizeof *l);
	l->m = m, l->K = K, l->pin = pin;
	l->nv = model_hparams(m)->n_vocab, l->ne = model_hparams(m)->n_embd;
	if (lane_buffers(s, l, err) != 0 || lane_slots(s, l, err) != 0 ||
	    (K > 0 && !pin && lane_measure(l, err) != 0)) {
		lane_free(l, s->c.max_sessions);
		return -1;
	}
	return s->n_lanes++;
}

/* --- requests --- */

static int
seq_init(struct sched *s, struct sched_seq *q, const struct sched_req *r, char *err)
{
	const struct lane *l = &s->lanes[r->lane];

	q->lane = r->lane, q->slot = -1;
	q->n_prompt = q->n_hist = r->n_ids;
	q->max_tokens = r->max_tokens, q->ignore_eos = r->ignore_eos;
	q->sp = r->sp;
	q->spec = l->K > 0 && sample_plain_greedy(&r->sp) && !r->logprobs;
	q->logprobs = r->logprobs != 0;
	q->top = r->top_logprobs < 0 ? 0 : r->top_logprobs > SCHED_TOP_MAX ? SCHED_TOP_MAX :
	    r->top_logprobs;
	q->hist = malloc((size_t)(s->c.n_ctx + SPEC_KMAX + 1) * sizeof *q->hist);
	q->stop = malloc((r->n_stop + 1) * sizeof *q->stop);
	q->cap_out = 64;
	q->out = malloc(q->cap_out * sizeof *q->out);
	if (q->logprobs)
		q->lp = malloc(q->cap_out * sizeof *q->lp);
	if (q->hist == NULL || q->stop == NULL || q->out == NULL || (q->logprobs && q->lp == NULL))
		return util_err(err, "out of memory");
	memcpy(q->hist, r->ids, r->n_ids * sizeof *q->hist);
	memcpy(q->stop, r->stop, r->n_stop * sizeof *q->stop);
	q->n_stop = r->n_stop;
	if ((q->smp = sample_new(&r->sp, l->nv, err)) == NULL)
		return -1;
	q->t_submit = util_now(), q->t_admit = q->t_first = -1;
	return 0;
}

/* Append q to the queue (under the lock). */
static void
enqueue(struct sched *s, struct sched_seq *q)
{
	q->id = ++s->next_id;
	if (s->qtail != NULL)
		s->qtail->next = q;
	else
		s->qhead = q;
	s->qtail = q;
	s->n_queued++;
}

/* Request r's n choices into seqs[n] (choice i seeded seed + i): 0, or -1 with err. */
static int
seqs_new(struct sched *s, const struct sched_req *r, int n, struct sched_seq **seqs, char *err)
{
	struct sched_req ri = *r;

	for (int i = 0; i < n; i++) {
		ri.sp.seed = r->sp.seed + (uint64_t)i;
		if ((seqs[i] = calloc(1, sizeof *seqs[i])) == NULL || seq_init(s, seqs[i], &ri,
		    err) != 0) {
			if (seqs[i] == NULL)
				util_err(err, "out of memory");
			for (int k = 0; k <= i; k++)
				seq_free(seqs[k]), seqs[k] = NULL;
			return -1;
		}
		if (n > 1)	/* choice 0 hands its prompt's state to the others */
			seqs[i]->spec = 0;
		if (i > 0)
			seqs[i]->wait_prompt = 1, seqs[i]->done_prompt = r->n_ids;
	}
	seqs[0]->n_kids = n - 1;
	return 0;
}

int
sched_submit_n(struct sched *s, const struct sched_req *r, int n, struct sched_seq **seqs,
    int *full, char *err)
{
	*full = 0;
	if (r->lane < 0 || r->lane >= s->n_lanes)
		return util_err(err, "sched: no model %d", r->lane);
	if (r->n_ids < 1 || r->n_ids >= s->c.n_ctx || r->max_tokens < 1)
		return util_err(err, "prompt of %d tokens: does not fit in the context of %d",
		    r->n_ids, s->c.n_ctx);
	if (n < 1 || n > s->c.max_sessions)
		return util_err(err, "n %d: out of range 1..%d (the sessions that run at once)", n,
		    s->c.max_sessions);
	if (seqs_new(s, r, n, seqs, err) != 0)
		return -1;
	pthread_mutex_lock(&s->mu);
	if (s->n_run + s->n_queued + n > s->c.max_sessions + s->c.max_queue || s->shut) {
		s->stats.refused++;
		pthread_mutex_unlock(&s->mu);
		*full = 1;
		util_err(err, "server busy: %d sessions running and %d waiting", s->n_run,
		    s->n_queued);
		for (int i = 0; i < n; i++)
			seq_free(seqs[i]), seqs[i] = NULL;
		return -1;
	}
	for (int i = 0; i < n; i++)
		enqueue(s, seqs[i]);
	for (int i = 1; i < n; i++)
		seqs[i]->group = seqs[0]->id;
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

struct sched_seq *
sched_submit(struct sched *s, const struct sched_req *r, int *full, char *err)
{
	struct sched_seq *q;

	return sched_submit_n(s, r, 1, &q, full, err) == 0 ? q : NULL;
}

int
sched_read_lp(struct sched *s, struct sched_seq *q, int32_t *out, struct sched_logprob *lp,
    int max, int *finish, double wait_s)
{
	struct timespec until;
	int n;

	clock_gettime(CLOCK_REALTIME, &until);	/* pthread_cond_timedwait's clock */
	if (wait_s >= 0) {
		until.tv_sec += (time_t)wait_s;
		until.tv_nsec += (long)((wait_s - (time_t)wait_s) * 1e9);
		if (until.tv_nsec >= 1000000000L)
			until.tv_sec++, until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->mu);
	while (q->n_out == 0 && q->finish == SCHED_RUNNING)
		if (wait_s < 0)
			pthread_cond_wait(&s->out, &s->mu);
		else if (pthread_cond_timedwait(&s->out, &s->mu, &until) != 0)
			break;	/* ETIMEDOUT */
	n = q->n_out < max ? q->n_out : max;
	memcpy(out, q->out, n * sizeof *out);
	memmove(q->out, q->out + n, (q->n_out - n) * sizeof *q->out);
	if (q->lp != NULL) {
		if (lp != NULL)
			memcpy(lp, q->lp, n * sizeof *lp);
		memmove(q->lp, q->lp + n, (q->n_out - n) * sizeof *q->lp);
	}
	q->n_out -= n;
	*finish = q->n_out > 0 ? SCHED_RUNNING : q->finish;
	pthread_mutex_unlock(&s->mu);
	return n;
}

int
sched_read(struct sched *s, struct sched_seq *q, int32_t *out, int max, int *finish,
    double wait_s)
{
	return sched_read_lp(s, q, out, NULL, max, finish, wait_s);
}

const char *
sched_seq_errmsg(const struct sched_seq *q)
{
	return q->err;
}

void
sched_seq_times(struct sched *s, const struct sched_seq *q, double *wait, double *first)
{
	pthread_mutex_lock(&s->mu);
	*wait = q->t_admit < 0 ? -1 : q->t_admit - q->t_submit;
	*first = q->t_first < 0 ? -1 : q->t_first - q->t_submit;
	pthread_mutex_unlock(&s->mu);
}

/* Unlink queued q; 1 when it was queued. */
static int
unqueue(struct sched *s, struct sched_seq *q)
{
	for (struct sched_seq **p = &s->qhead, *prev = NULL; *p != NULL; prev = *p, p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			if (s->qtail == q)
				s->qtail = prev;
			s->n_queued--;
			return 1;
		}
	return 0;
}

void
sched_release(struct sched *s, struct sched_seq *q)
{
	int mine;

	if (q == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	q->released = 1;
	mine = unqueue(s, q) || !q->active;	/* the worker no longer holds it */
	if (!mine)
		pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->mu);
	if (mine)
		seq_free(q);
}

void
sched_stats(struct sched *s, struct sched_stats *st)
{
	pthread_mutex_lock(&s->mu);
	*st = s->stats;
	st->running = s->n_run, st->queued = s->n_queued;
	pthread_mutex_unlock(&s->mu);
}

void
sched_shutdown(struct sched *s)
{
	pthread_mutex_lock(&s->mu);
	s->shut = 1;
	pthread_cond_broadcast(&s->work);
	pthread_mutex_unlock(&s->mu);
}

int
sched_wait(struct sched *s)
{
	pthread_mutex_lock(&s->mu);
	while (!s->shut && s->n_run == 0 && s->n_queued == 0)
		pthread_cond_wait(&s->work, &s->mu);
	pthread_mutex_unlock(&s->mu);
	return s->shut ? -1 : 0;
}

/* --- the step (worker) --- */

/* End q with finish f (under the lock). */
static void
end_locked(struct sched *s, struct sched_seq *q, int f)
{
	if (q->finish == SCHED_RUNNING)
		q->finish = f;
	pthread_cond_broadcast(&s->out);
}

static void
fail_seq(struct sched *s, struct sched_seq *q, const char *why)
{
	pthread_mutex_lock(&s->mu);
	snprintf(q->err, sizeof q->err, "%s", why);
	end_locked(s, q, SCHED_ERROR);
	pthread_mutex_unlock(&s->mu);
}

/* Room for one more token in q's output (under the lock): 0, or -1. */
static int
out_room(struct sched_seq *q)
{
	int32_t *o;
	struct sched_logprob *lp;

	if (q->n_out < q->cap_out)
		return 0;
	if ((o = realloc(q->out, 2 * q->cap_out * sizeof *o)) == NULL)
		return -1;
	q->out = o;
	if (q->lp != NULL) {
		if ((lp = realloc(q->lp, 2 * q->cap_out * sizeof *lp)) == NULL)
			return -1;
		q->lp = lp;
	}
	q->cap_out *= 2;
	return 0;
}

/* Hand q's new tokens t[n] (and their logprobs lp[n], NULL when none) to its
 * reader: a stop id ends it unemitted, max_tokens or a full context after
 * the token that reaches them. */
static void
emit(struct sched *s, struct sched_seq *q, const int32_t *t, const struct sched_logprob *lp,
    int n)
{
	pthread_mutex_lock(&s->mu);
	if (q->t_first < 0)
		q->t_first = util_now();
	for (int i = 0; i < n && q->finish == SCHED_RUNNING; i++) {
		int stop = 0;

		for (int j = 0; j < q->n_stop && !q->ignore_eos; j++)
			stop |= q->stop[j] == t[i];
		if (stop) {
			end_locked(s, q, SCHED_STOP);
			break;
		}
		if (out_room(q) != 0) {
			snprintf(q->err, sizeof q->err, "out of memory");
			end_locked(s, q, SCHED_ERROR);
			break;
		}
		if (q->lp != NULL && lp != NULL)
			q->lp[q->n_out] = lp[i];
		q->out[q->n_out++] = t[i];
		q->hist[q->n_hist++] = t[i];
		s->stats.tokens++;
		if (++q->n_gen >= q->max_tokens || q->n_hist >= s->c.n_ctx)
			end_locked(s, q, SCHED_LENGTH);
	}
	pthread_cond_broadcast(&s->out);
	pthread_mutex_unlock(&s->mu);
}

/* Under the lock: 1 when the session of that id runs. */
static int
running_id(const struct sched *s, uint64_t id)
{
	for (int i = 0; i < s->n_run; i++)
		if (s->run[i]->id == id)
			return 1;
	return 0;
}

/* Under the lock: drop ended or released sessions, free their slots. */
static void
reap(struct sched *s)
{
	int k = 0;

	for (int i = 0; i < s->n_run; i++) {
		struct sched_seq *q = s->run[i];

		if (q->finish == SCHED_RUNNING && !q->released) {
			s->run[k++] = q;
			continue;
		}
		s->lanes[q->lane].slots[q->slot].used = 0;
		q->active = 0;
		if (q->released)
			seq_free(q);
	}
	s->n_run = k;
	for (int i = 0; i < s->n_run; i++)	/* choices whose choice 0 is gone unprimed */
		if (s->run[i]->wait_prompt && !running_id(s, s->run[i]->group)) {
			snprintf(s->run[i]->err, sizeof s->run[i]->err,
			    "the prompt shared with choice 0 did not finish");
			end_locked(s, s->run[i], SCHED_ERROR);
		}
}

/* Under the lock: queued q into lane l's free slot i. */
static void
admit_one(struct sched *s, struct sched_seq *q, struct lane *l, int i)
{
	unqueue(s, q);
	q->spec = q->spec && admit_spec(s, l);
	l->slots[i].used = 1;
	q->slot = i, q->active = 1, q->t_admit = util_now();
	q->st = l->slots[i].st;
	s->run[s->n_run++] = q;
}

/* Under the lock: lane l's free slots, at most want, into slot[]; how many. */
static int
free_slots(struct sched *s, struct lane *l, int want, int *slot)
{
	int n = 0;

	for (int i = 0; i < s->c.max_sessions && n < want; i++)
		if (!l->slots[i].used)
			slot[n++] = i;
	return n;
}

/*
 * Under the lock: queued requests into free slots, first come first
 * served; the choices of one request together (a later choice at the head
 * lost its first one: it ends).
 */
static void
admit(struct sched *s)
{
	while (s->qhead != NULL) {
		struct sched_seq *q = s->qhead;
		struct lane *l = &s->lanes[q->lane];
		int want = 1 + q->n_kids, *slot = s->rows, k = 0;	/* (rows: the worker's scratch) */

		if (q->wait_prompt) {
			unqueue(s, q);
			snprintf(q->err, sizeof q->err, "the prompt shared with choice 0 was cancelled");
			end_locked(s, q, SCHED_ERROR);
			continue;
		}
		if (s->n_run + want > s->c.max_sessions || free_slots(s, l, want, slot) < want)
			break;
		admit_one(s, q, l, slot[k++]);
		while (s->qhead != NULL && s->qhead->wait_prompt && s->qhead->group == q->id)
			admit_one(s, s->qhead, l, slot[k++]);
	}
}

/* The logprobs of token t drawn by q's sampler from the row lg at q's end into lp. */
static void
logprobs_of(struct sched_seq *q, const float *lg, int32_t t, struct sched_logprob *lp)
{
	int k = sample_logprobs(q->smp, lg, q->hist, q->n_hist, t, q->top, &lp->logprob,
	    lp->top_id, lp->top_lp);

	lp->n_top = k < 0 ? 0 : k;
}

/*
 * Choice 0 q's prompt is done and its last row's logits are in lg: each
 * choice of q in act[n] (q itself, and the later ones, which get a copy of
 * q's state) draws its first token from them, as model_forward_next would.
 */
static void
prime(struct sched *s, struct sched_seq *q, const float *lg, struct sched_seq **act, int n)
{
	for (int i = -1; i < n; i++) {
		struct sched_seq *c = i < 0 ? q : act[i];
		struct sched_logprob lp;
		int32_t t;

		if (i >= 0 && (!c->wait_prompt || c->group != q->id))
			continue;
		if (c != q && state_copy(c->st, q->st) != 0) {
			fail_seq(s, c, state_errmsg(c->st));
			continue;
		}
		pthread_mutex_lock(&s->mu);
		c->wait_prompt = 0;
		pthread_mutex_unlock(&s->mu);
		if ((t = sample_next(c->smp, lg, c->hist, c->n_hist, 0, c->n_hist)) < 0) {
			fail_seq(s, c, "no finite logit");
			continue;
		}
		if (c->logprobs)
			logprobs_of(c, lg, t, &lp);
		emit(s, c, &t, c->logprobs ? &lp : NULL, 1);
	}
}

/*
 * One prompt chunk of q: rows [done, to); the last chunk picks the first
 * token, on the backend, or from the row on the host for a session that
 * wants logprobs or shares its prompt with later choices in act[n_act].
 */
static int
prefill_chunk(struct sched *s, struct sched_seq *q, int to, struct sched_seq **act, int n_act)
{
	struct lane *l = &s->lanes[q->lane];
	struct spec *sp = l->slots[q->slot].spec;
	int from = q->done_prompt, n = q->n_prompt, rc, host = q->logprobs || q->n_kids > 0;
	int32_t first = -1;

	if (q->spec)
		rc = spec_prefill_part(sp, q->hist, n, from, to, &first);
	else {
		if (from == 0)
			state_reset(q->st);
		rc = to < n ? model_forward(l->m, q->st, q->hist + from, to - from, MODEL_PREFILL,
		    NULL, NULL) : host ? model_forward(l->m, q->st, q->hist + from, to - from,
		    MODEL_PREFILL, l->lg, NULL) : model_forward_next(l->m, q->st, q->hist + from,
		    to - from, MODEL_PREFILL, q->smp, q->hist, n, 0, n, l->lg, &first);
	}
	if (rc != 0) {
		fail_seq(s, q, q->spec ? spec_errmsg(sp) : model_errmsg(l->m));
		return -1;
	}
	q->done_prompt = to;
	pthread_mutex_lock(&s->mu);
	s->stats.prefill_tokens += to - from;
	pthread_mutex_unlock(&s->mu);
	if (to == n && host)
		prime(s, q, l->lg, act, n_act);
	else if (to == n)
		emit(s, q, &first, NULL, 1);
	return 0;
}

/* Prompt chunks of the running sessions, in admission order, up to the
 * step's budget (at least one chunk a step). */
static void
prefill(struct sched *s, struct sched_seq **act, int n)
{
	int budget = s->c.step_prefill, ran = 0;

	for (int i = 0; i < n && budget > 0; i++) {
		struct sched_seq *q = act[i];

		while (q->finish == SCHED_RUNNING && q->done_prompt < q->n_prompt) {
			int to = (q->done_prompt / s->c.chunk + 1) * s->c.chunk;

			if (to > q->n_prompt)
				to = q->n_prompt;
			if (ran && to - q->done_prompt > budget)
				return;
			budget -= to - q->done_prompt, ran = 1;
			if (prefill_chunk(s, q, to, act, n) != 0 || budget <= 0)
				break;
		}
	}
}

/*
 * The greedy sessions g[n] of lane li in one forward: a decode row each,
 * or a speculative session's verify rows (the lane's K drafts, pinned, or
 * as many as sched_spec_k finds pay at this load); the picks taken on the
 * backend.
 */
static void
decode_greedy(struct sched *s, int li, struct sched_seq **g, int n)
{
	struct lane *l = &s->lanes[li];
	struct sched_spec_cost c;
	int32_t out[SPEC_KMAX + 1];
	int off = 0, m = 0, verify = 0, k = l->K;
	long rounds = 0, drafted = 0, accepted = 0, tried[SPEC_KMAX] = { 0 }, hit[SPEC_KMAX] = { 0 };
	long rk[SPEC_KMAX + 1] = { 0 }, ak[SPEC_KMAX + 1] = { 0 };

	if (k > 0 && !l->pin) {
		sched_spec_costs(s, li, &c);
		/* a speculative session keeps the MTP cache anyway: it drafts at least one */
		if ((k = sched_spec_k(&c, l->K, n)) == 0)
			k = 1;
	}

	for (int i = 0; i < n; i++) {	/* the rows; a session whose draft fails drops out */
		struct sched_seq *q = g[i];
		struct spec *sp = l->slots[q->slot].spec;
		int left = q->max_tokens - q->n_gen, r = 1;

		if (q->spec && (r = spec_draft(sp, left < k + 1 ? left : k + 1, l->ids + off)) < 0) {
			fail_seq(s, q, spec_errmsg(sp));
			continue;
		}
		if (!q->spec)
			l->ids[off] = q->hist[q->n_hist - 1];
		verify |= q->spec;
		g[m] = q, s->st[m] = q->st, s->rows[m++] = r, off += r;
	}
	if (m == 0)
		return;
	if (model_forward_seqs(l->m, s->st, s->rows, m, l->ids, verify ? MODEL_VERIFY : 0, NULL,
	    l->ids, verify ? l->hid : NULL) != 0) {
		for (int i = 0; i < m; i++)
			fail_seq(s, g[i], model_errmsg(l->m));
		return;
	}
	off = 0;
	for (int i = 0; i < m; off += s->rows[i++]) {
		struct sched_seq *q = g[i];
		struct spec *sp = l->slots[q->slot].spec;
		int got = 1;

		if (q->spec)
			got = spec_accept(sp, l->ids + off, l->hid + (size_t)off * l->ne, out);
		else
			out[0] = l->ids[off];
		if (got < 0 || out[0] < 0) {
			fail_seq(s, q, got < 0 ? spec_errmsg(sp) : "no finite logit");
			continue;
		}
		if (q->spec && s->rows[i] > 1) {
			rounds++, drafted += s->rows[i] - 1, accepted += got - 1;
			rk[s->rows[i] - 1]++, ak[s->rows[i] - 1] += got - 1;
			for (int j = 0; j < s->rows[i] - 1 && j < got; j++)	/* reached j */
				tried[j]++, hit[j] += j < got - 1;
		}
		emit(s, q, out, NULL, got);
	}
	pthread_mutex_lock(&s->mu);
	s->stats.spec_rounds += rounds, s->stats.drafted += drafted, s->stats.accepted += accepted;
	for (int j = 0; j < SPEC_KMAX; j++)
		l->tried[j] += tried[j], l->hit[j] += hit[j];
	for (int j = 1; j <= SPEC_KMAX; j++)
		s->stats.rounds_k[j] += rk[j], s->stats.accepted_k[j] += ak[j];
	pthread_mutex_unlock(&s->mu);
}

/* The sampled sessions g[n] of lane l in one forward (and the greedy ones
 * that want logprobs): their logits rows to the host, each drawn by its
 * sampler at its position. */
static void
decode_sampled(struct sched *s, struct lane *l, struct sched_seq **g, int n)
{
	for (int i = 0; i < n; i++)
		s->st[i] = g[i]->st, s->rows[i] = 1, l->ids[i] = g[i]->hist[g[i]->n_hist - 1];
	if (model_forward_seqs(l->m, s->st, s->rows, n, l->ids, 0, l->lg, NULL, NULL) != 0) {
		for (int i = 0; i < n; i++)
			fail_seq(s, g[i], model_errmsg(l->m));
		return;
	}
	for (int i = 0; i < n; i++) {
		struct sched_seq *q = g[i];
		const float *lg = l->lg + (size_t)i * l->nv;
		int32_t t = sample_next(q->smp, lg, q->hist, q->n_hist, 0, q->n_hist);
		struct sched_logprob lp;

		if (t < 0) {
			fail_seq(s, q, "no finite logit");
			continue;
		}
		if (q->logprobs)
			logprobs_of(q, lg, t, &lp);
		emit(s, q, &t, q->logprobs ? &lp : NULL, 1);
	}
}

/* The sessions of act[n] on lane li that are generating, greedy (their
 * picks taken on the backend) or not (their rows to the host: sampled, or
 * wanting logprobs), into s->grp; how many. */
static int
generating(struct sched *s, int li, struct sched_seq **act, int n, int greedy)
{
	int k = 0;

	for (int i = 0; i < n; i++) {
		struct sched_seq *q = act[i];

		if (q->lane == li && q->n_gen > 0 && q->finish == SCHED_RUNNING &&
		    (sample_plain_greedy(&q->sp) && !q->logprobs) == greedy)
			s->grp[k++] = q;
	}
	return k;
}

/* Lane li's decode step over the sessions of act[n] that are generating. */
static void
decode(struct sched *s, int li, struct sched_seq **act, int n)
{
	struct lane *l = &s->lanes[li];
	int k;

	if ((k = generating(s, li, act, n, 1)) > 0)
		decode_greedy(s, li, s->grp, k);
	if ((k = generating(s, li, act, n, 0)) > 0)
		decode_sampled(s, l, s->grp, k);
}

int
sched_step(struct sched *s)
{
	int n, left;

	pthread_mutex_lock(&s->mu);
	reap(s);
	admit(s);
	n = s->n_run;
	memcpy(s->act, s->run, n * sizeof *s->act);
	s->stats.steps++;
	pthread_mutex_unlock(&s->mu);
	prefill(s, s->act, n);
	for (int i = 0; i < s->n_lanes; i++)
		decode(s, i, s->act, n);
	pthread_mutex_lock(&s->mu);
	reap(s);
	left = s->n_run + s->n_queued;
	pthread_mutex_unlock(&s->mu);
	return left;
}
