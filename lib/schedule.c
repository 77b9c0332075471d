#include "schedule.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backend.h"
#include "grammar.h"
#include "model.h"
#include "prefix.h"
#include "sha256.h"
#include "spec.h"
#include "state.h"
#include "util.h"
#include "vision.h"

#define MAX_LANES 8
#define SCHED_EXPLORE 256	/* tries of a draft depth before exploring stops */

/* What drafts on a speculative lane (spec.c: two spec programs never coexist). */
enum {
	DRAFT_MTP,	/* the MTP head: its cache rows live in the trunk's state */
	DRAFT_ASSIST,	/* Gemma-4's assistant: it reads the trunk's K/V, keeps no cache */
	DRAFT_DFLASH,	/* a DFlash / DFlash2 block drafter: its context cache is the
			 * slot's (spec's), the verify rows' taps its input */
};

/* A session slot of a lane: a speculative decoder (whose state plain
 * sessions use too) or, on a plain lane, a state. */
struct slot {
	struct spec *spec;
	struct state *st;
	int	used;
	/* the reuse pool: the recurrent state at sbound, the prompt's last point
	 * a cold prefill stops at (rsave) once the prefill passed it; parked: a
	 * finished conversation's tokens ptok[n_ptok] resumable at pbound (pmtp:
	 * with the MTP cache's rows), the images of their prompt's blocks before
	 * pbound in ptag (seq_tags) */
	float	**rsnap;	/* [n_part][state_rec_floats of the part] each in its
				 * part's backend memory (lib/state's state_part) */
	float	*dsnap;		/* DFlash: [state_ring_floats] its drafter's rings at sbound,
				 * or NULL (none) */
	int32_t	*ptok;		/* [n_ctx + SPEC_KMAX + 1] */
	struct prefix_tag *ptag;	/* [n_ctx / block + 1] */
	int	n_ptok, pbound, sbound, parked, pmtp;
	uint64_t pstamp;
};

struct lane {
	struct model *m;
	int	K, pin, nv, ne;
	int	n_part;		/* its states' parts: a split model's stages, else 1 */
	int	draft;		/* DRAFT_*, when K > 0 */
	size_t	tw;		/* DFlash: floats of a row's taps */
	float	*taps;		/* DFlash: [rows][tw] a step's rows' taps, the drafter's input */
	struct sched_spec_cost cost;	/* rows, draft: measured at boot */
	long	groups;			/* its steps' row groups (model_seqs_stats) */
	long	seen;			/* the model's count of groups when last looked at */
	int	most;			/* the most rows one held */
	long	tried[SPEC_KMAX], hit[SPEC_KMAX];	/* drafts reached, accepted, by depth */
	long	admitted;	/* greedy sessions admitted unpinned: every 16th explores */
	struct slot *slots;	/* [max_sessions] */
	struct prefix *pc;	/* the prefix cache (worker only), or NULL */
	struct prefix *dpc;	/* DFlash: the drafter's context rows of pc's prompts, or NULL */
	struct prefix_stats pst;	/* pc's stats as of the last step (under the lock) */
	float	*lg;		/* [n_lg][nv] host logits: a sampled session's row each, or
				 * a host-picking speculative session's verify rows */
	int	n_lg;
	float	*hid;		/* [same][ne] host hidden rows */
	int32_t	*ids;		/* [same] */
	const uint32_t **mask;	/* [same]: each row's token mask (sessions' bits), or NULL */
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
	struct grammar *g;	/* a reference, or NULL */
	struct grammar_state *gs;	/* where the reply is in g */
	uint32_t *bits;		/* [(nv + 31) / 32]: its next token's mask (grammar_bits) */
	uint64_t group;		/* choice i > 0 of sched_submit_n: choice 0's id */
	int	n_kids;		/* choice 0: the choices after it */
	int	wait_prompt;	/* choice i > 0: until choice 0's prompt is copied in */
	int	finish, released, active;	/* active: admitted, slot held */
	double	t_submit, t_admit, t_first;
	/* resuming: at resume_at from the pool (resume 1) or the prefix cache
	 * chain ending at block rblk (resume 2); pblk: the cache block of the
	 * last block passed (pinned); cached: prompt tokens not computed */
	int	resume, resume_at, rblk, pblk, cached;
	int	drblk, dpblk;	/* DFlash: rblk, pblk of the drafter's context (lane's dpc) */
	struct vision_prompt vp;	/* the prompt's images (n_rows 0: none) */
	struct prefix_tag *tags;	/* [n_prompt / block + 1] each block's images
					 * (seq_tags), or NULL: none */
	int	lcut;		/* L, the prompt's last multiple of block before its last
				 * token where its prefill's forwards are cut besides the
				 * chunks' ends (prompt_cuts); 0: none */
	int	rsave;		/* the last point <= n_prompt a cold prefill of the prompt
				 * stops at (the reuse pool's snapshot), 0: none */
	struct sched_note note;	/* for the worker to tell; kind -1: none */
	char	why[128];	/* note.why's text */
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
	uint64_t next_id, parks;
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

/* A prefix block of `block` < chunk tokens on backend be: the error when be's
 * prompt rows take other bits where a forward is cut inside a chunk
 * (backend_cut_exact), else 0. */
static int
cut_error(const struct backend *be, int block, int chunk, char *err)
{
	if (backend_cut_exact(be))
		return 0;
	return util_err(err, "sched: a prefix block of %d tokens on backend '%s': its prompt "
	    "rows take other bits when a forward is cut inside a chunk, so a resume there would "
	    "not be exact; the block must be the chunk of %d there", block, backend_name(be),
	    chunk);
}

struct sched *
sched_new(struct backend *be, const struct sched_config *c, char *err)
{
	struct sched *s;

	if (c->n_ctx < 2 || c->max_sessions < 1 || c->max_queue < 0 ||
	    c->chunk < SCHED_CHUNK_MIN || c->step_prefill < c->chunk) {
		util_err(err, "sched: bad config (ctx %d, %d sessions, queue %d, chunk %d, "
		    "step prefill %d)", c->n_ctx, c->max_sessions, c->max_queue, c->chunk,
		    c->step_prefill);
		return NULL;
	}
	if (c->block < 0 || (c->block > 0 && (c->chunk % c->block != 0 ||
	    (c->block != c->chunk && c->block % 64 != 0)))) {
		util_err(err, "sched: a prefix block of %d tokens: not the chunk of %d or a "
		    "multiple of 64 dividing it", c->block, c->chunk);
		return NULL;
	}
	if (c->block > 0 && c->block != c->chunk && cut_error(be, c->block, c->chunk, err))
		return NULL;
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
	if (s->c.block == 0)
		s->c.block = s->c.chunk % 64 == 0 && backend_cut_exact(be) ? 64 : s->c.chunk;
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
	grammar_state_free(q->gs), grammar_free(q->g);
	free(q->bits);
	vision_prompt_free(&q->vp);
	free(q->tags);
	free(q->hist), free(q->stop), free(q->out), free(q->lp);
	free(q);
}

/* Slot sl's pool snapshot freed, each part's in its stage's memory. */
static void
rsnap_free(struct lane *l, struct slot *sl)
{
	for (int p = 0; sl->rsnap != NULL && p < l->n_part; p++) {
		struct backend *pb = model_stage_backend(l->m, p);

		if (sl->rsnap[p] != NULL && backend_use(pb) == 0)
			backend_mfree(pb, sl->rsnap[p]);
	}
	free(sl->rsnap);
	sl->rsnap = NULL;
}

static void
lane_free(struct lane *l, int n)
{
	for (int i = 0; l->slots != NULL && i < n; i++) {
		spec_free(l->slots[i].spec);
		if (l->slots[i].spec == NULL)
			state_free(l->slots[i].st);
		rsnap_free(l, &l->slots[i]);
		if (l->slots[i].dsnap != NULL)
			backend_mfree(model_stage_backend(l->m, 0), l->slots[i].dsnap);
		free(l->slots[i].ptok), free(l->slots[i].ptag);
	}
	prefix_free(l->pc), prefix_free(l->dpc);
	free(l->slots);
	model_host_free(l->m, l->lg), model_host_free(l->m, l->hid), model_host_free(l->m, l->taps);
	free(l->ids), free(l->mask);
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
	int per = c->step_rows / r, full = sessions / per, rest = sessions % per;

	return full * c->rows[per * r] + (rest ? c->rows[rest * r] : 0);
}

int
sched_spec_k(const struct sched_spec_cost *c, int K, int sessions)
{
	double best = 0, reach = 1, tokens = 1;
	int k_best = 0;

	if (sessions < 1)
		return 0;
	for (int k = 0; k <= K && k + 1 <= c->step_rows; k++) {
		double rate;

		if (k > 0)
			reach *= c->accept[k - 1], tokens += reach;
		/* k drafts and, k > 0, the round's own work (the MTP cache's append,
		 * which picks the first of them) */
		rate = sessions * tokens / (step_time(c, k + 1, sessions) +
		    sessions * (k > 0 ? (k - c->first) * c->draft + c->round : 0));
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
 * A DFlash drafter's round, timed into l->cost.round: its context's append
 * of a row and its forward over the block, with the selector's lattice
 * (or, DFlash, the logits) brought back, on a context cache of its own.
 */
static int
measure_dflash(struct lane *l, const int32_t *tok, char *err)
{
	const struct model_hparams *dh = model_dflash(l->m);
	size_t b = dh->block - 1, k = dh->sel_topk;
	struct state *ds = model_dflash_state(l->m, dh->block, 0, err);
	int32_t *cand = malloc((b * k + 1) * sizeof *cand);
	float *lat = malloc((b * k * k + 1) * sizeof *lat);
	float *lg = k == 0 ? model_host_alloc(l->m, b * model_draft_vocab(l->m)) : NULL;
	struct model_dflash_out o = { NULL, lg, lat, cand };
	int rc = -1;

	if (ds == NULL || cand == NULL || lat == NULL || (k == 0 && lg == NULL))
		util_err(err, "measuring a draft: %s", ds == NULL ? err : "out of memory");
	else {
		memset(l->taps, 0, l->tw * sizeof *l->taps);
		BEST_OF_3(l->cost.round, model_dflash_context(l->m, ds, 0, l->taps, 1) ||
		    model_dflash_draft(l->m, ds, 1, tok[0], &o));
		rc = 0;
	}
	state_free(ds);
	free(cand), free(lat);
	model_host_free(l->m, lg);
	return rc;
}

/*
 * A greedy round's drafts after the first (the append's pick) are one MTP
 * chain (model_mtp_chain) of K - 1 steps: l->cost.draft is a step's share
 * of such a chain (of 1 step at K = 1), timed on st.  Kept as it is when
 * the chain fails.
 */
static void
measure_chain(struct lane *l, struct state *st, const int32_t *tok)
{
	int n = l->K > 1 ? l->K - 1 : 1;
	double t;

	BEST_OF_3(t, (state_reset(st), model_mtp_chain(l->m, st, 0, l->hid, tok[0], n, l->ids,
	    NULL)));
	if (t >= 0)
		l->cost.draft = t / n;
}

/*
 * The lane's drafter's costs into l->cost (draft, round) on state st
 * (left empty): the MTP head, a row (its cache's append a round) and a
 * draft (measure_chain's, else a row's); the assistant, a step over the
 * K/V of a position (nothing else); a DFlash drafter, measure_dflash.  -1
 * with err.
 */
static int
measure_draft(struct lane *l, struct state *st, const int32_t *tok, char *err)
{
	int one = 1;

	memset(l->hid, 0, (size_t)l->ne * sizeof *l->hid);
	l->cost.first = 0;
	switch (l->draft) {
	case DRAFT_DFLASH:
		l->cost.draft = 0;
		if (measure_dflash(l, tok, err) != 0)
			return -1;
		break;
	case DRAFT_ASSIST:
		state_reset(st);
		l->cost.round = 0;
		l->cost.draft = -1;
		if (model_forward_seqs(l->m, &st, &one, 1, tok, 0, NULL, l->ids, NULL) == 0)
			BEST_OF_3(l->cost.draft, model_assist(l->m, st, 1, l->hid, tok[1], NULL,
			    l->ids, l->hid));
		break;
	default:
		BEST_OF_3(l->cost.round, (state_reset(st), model_mtp_argmax(l->m, st, 0, 0, l->hid,
		    tok, 1, l->ids, l->hid)));
		l->cost.draft = l->cost.round;
		l->cost.first = 1;	/* the append picks the first draft */
		if (l->cost.round >= 0)
			measure_chain(l, st, tok);
	}
	state_reset(st);
	if (l->cost.draft < 0 || l->cost.round < 0)
		return util_err(err, "measuring a draft: %s", model_errmsg(l->m));
	return 0;
}

/* The worker's count of lane l's step groups, after a step's forward of l's
 * sessions (sched_stats has them from pp_counts). */
static void
count_groups(struct lane *l)
{
	struct model_seqs_stats qs;

	model_seqs_stats(l->m, &qs);
	l->groups += qs.groups - l->seen;
	l->seen = qs.groups;
	l->most = qs.last > l->most ? qs.last : l->most;
}

/*
 * The row counts a lane's boot times (at most its step's rows and its
 * context): every m up to 6, then a grid as fine as the policy needs (the
 * counts between are interpolated).  A step's time grows smoothly in m
 * (one kernel a product for every m: batch invariance), so the grid loses
 * little and saves the boot most of its forwards (on a CPU, the large ones
 * are the costly ones).
 */
static const int measure_grid[] = { 1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32 };

/* One forward of m rows from an empty state: what lane_measure times. */
static int
measure_step(struct lane *l, struct state *st, int m, const int32_t *tok)
{
	state_reset(st);
	return model_forward_seqs_taps(l->m, &st, &m, 1, tok, 0, NULL, l->ids, NULL, NULL, l->taps);
}

/*
 * What a lane's steps cost, measured on its first slot's state: a forward
 * of m rows (a verify's shape) for each m of measure_grid up to n (the
 * lesser of model_step_rows and the context; n itself is timed too), after
 * one warm-up forward of each (buffers, recorded steps), best of 3;
 * between grid points the time is the straight line through its
 * neighbours, past n proportional to m; then its drafter's work
 * (measure_draft).  The state is left empty.
 */
static int
lane_measure(struct lane *l, char *err)
{
	struct state *st = l->slots[0].st;
	int32_t tok[BACKEND_ROWS_MAX];
	int most = l->cost.step_rows, at[sizeof measure_grid / sizeof measure_grid[0] + 1], na = 0;
	int n = state_config(st)->n_ctx < most ? state_config(st)->n_ctx : most;

	for (int i = 0; i < most; i++)
		tok[i] = (int32_t)((i * 7919 + 13) % l->nv);
	for (size_t g = 0; g < sizeof measure_grid / sizeof measure_grid[0] && measure_grid[g] < n; g++)
		at[na++] = measure_grid[g];
	at[na++] = n;
	for (int m = 0; m <= most; m++)
		l->cost.rows[m] = -1;
	for (int a = 0; a < na; a++) {
		int m = at[a];

		if (measure_step(l, st, m, tok) == 0)	/* the warm-up */
			BEST_OF_3(l->cost.rows[m], measure_step(l, st, m, tok));
		if (l->cost.rows[m] < 0)
			return util_err(err, "measuring a step of %d rows: %s", m, model_errmsg(l->m));
	}
	for (int a = 0; a + 1 < na; a++)
		for (int m = at[a] + 1; m < at[a + 1]; m++)
			l->cost.rows[m] = l->cost.rows[at[a]] + (l->cost.rows[at[a + 1]] -
			    l->cost.rows[at[a]]) * (m - at[a]) / (at[a + 1] - at[a]);
	for (int m = n + 1; m <= most; m++)
		l->cost.rows[m] = l->cost.rows[n] * m / n;
	/* a step of more rows costs no less: noise only adds, so a larger m's
	 * time bounds a smaller one's */
	for (int m = most - 1; m >= 1; m--)
		if (l->cost.rows[m + 1] < l->cost.rows[m])
			l->cost.rows[m] = l->cost.rows[m + 1];
	state_reset(st);
	return measure_draft(l, st, tok, err);
}

/* 1 when stages a and b of m keep their states in one memory: the host's, or one device. */
static int
same_memory(const struct model *m, int a, int b)
{
	const char *da = model_stage_device(m, a), *db = model_stage_device(m, b);

	if (backend_host(model_stage_backend(m, a)) && backend_host(model_stage_backend(m, b)))
		return 1;
	return da != NULL && db != NULL && strcmp(da, db) == 0;
}

/* The devices of m's stages into f->dev (names, stages) and of[stage]: the device's index. */
static void
fit_devices(const struct model *m, struct sched_fit *f, int *of)
{
	for (int st = 0; st < model_stages(m); st++) {
		int d = 0;

		while (d < f->n_dev && !same_memory(m, ffs(f->dev[d].stages) - 1, st))
			d++;
		if (d == f->n_dev) {
			const char *name = model_stage_device(m, st);

			snprintf(f->dev[d].name, sizeof f->dev[d].name, "%s", name != NULL ? name :
			    backend_name(model_stage_backend(m, st)));
			f->n_dev++;
		}
		f->dev[d].stages |= 1u << st, of[st] = d;
	}
}

/*
 * A session's bytes on a device as two lines in n_ctx, fixed + per_pos x
 * n_ctx: [0] every cache n_ctx rows, [1] gemma4's rings at their rows
 * (the bytes at n_ctx are the lesser of the two: a ring caps its caches
 * once n_ctx passes its rows).  Without rings the two are one.
 */
struct fit_lines {
	size_t	fixed[2], per_pos[2];
};

/* The lines' bytes at n positions. */
static size_t
fit_at(const struct fit_lines *fl, size_t n)
{
	size_t a = fl->fixed[0] + fl->per_pos[0] * n, b = fl->fixed[1] + fl->per_pos[1] * n;

	return a < b ? a : b;
}

/*
 * Device d of f: the bytes of a session there (fit_at n_ctx), its free
 * memory less the reserve, the sessions that fit, and the longest n_ctx
 * at which max_sessions fit there into *max_ctx (the longer of the two
 * lines').
 */
static int
fit_device(struct sched *s, struct model *m, struct sched_fit *f, int d,
    const struct fit_lines *fl, int *max_ctx, char *err)
{
	struct sched_fit_dev *v = &f->dev[d];
	struct backend *be = model_stage_backend(m, ffs(v->stages) - 1);
	size_t free_b = 0, total = 0, each, ctx = 0;

	if (backend_use(be) != 0 || backend_mem_info(be, &free_b, &total) != 0)
		return util_err(err, "%s", backend_errmsg(be));
	v->session = fit_at(fl, s->c.n_ctx);
	v->avail = free_b > s->c.reserve ? free_b - s->c.reserve : 0;
	v->fit = v->avail / v->session > 1 << 30 ? 1 << 30 : (int)(v->avail / v->session);
	each = v->avail / s->c.max_sessions;
	for (int i = 0; i < 2; i++) {
		size_t c = each < fl->fixed[i] ? 0 : fl->per_pos[i] == 0 ? (size_t)s->c.n_ctx :
		    (each - fl->fixed[i]) / fl->per_pos[i];

		ctx = c > ctx ? c : ctx;
	}
	ctx = ctx / 256 * 256;
	*max_ctx = ctx > (size_t)s->c.n_ctx ? s->c.n_ctx / 256 * 256 : (int)ctx;
	return 0;
}

int
sched_fit(struct sched *s, struct model *m, int K, struct sched_fit *f, char *err)
{
	/* a session's bytes as fit_lines (state_bytes), a device at a time; the second line's
	 * slope and offset measured where the rings hold (far past any of their rows) */
	struct fit_lines fl[SCHED_FIT_DEVS] = { 0 };
	size_t far = (size_t)1 << 24;
	int of[PIPELINE_MAX_STAGES];
	struct state_config dc;

	memset(f, 0, sizeof *f);
	/* a prompt chunk one piece of m's rings: the longest forward a session runs, its
	 * blocks still in the rings when the prefix cache takes them */
	if (model_ring_hold(m, s->c.chunk) != 0)
		return util_err(err, "%s", model_errmsg(m));
	/* a prompt chunk's activations first (a forward grows them to its rows; a
	 * large vocabulary's logits rows alone are n_vocab floats each): not free */
	if (model_reserve(m, s->c.chunk > model_step_rows(m) ? s->c.chunk : model_step_rows(m)))
		return util_err(err, "%s", model_errmsg(m));
	fit_devices(m, f, of);
	for (int st = 0; st < model_stages(m); st++) {
		size_t f0 = model_stage_state_bytes(m, st, 0, K + 1);
		size_t fb = model_stage_state_bytes(m, st, (int)far, K + 1);
		size_t pb = model_stage_state_bytes(m, st, (int)far + 1, K + 1) - fb;
		struct fit_lines *l = &fl[of[st]];

		l->fixed[0] += f0;
		l->per_pos[0] += model_stage_state_bytes(m, st, 1, K + 1) - f0;
		l->fixed[1] += fb - pb * far, l->per_pos[1] += pb;
		if (s->c.reuse) {	/* the pool's saved recurrent state: a state of no positions */
			size_t r = model_stage_state_bytes(m, st, 0, 0);

			l->fixed[0] += r, l->fixed[1] += r;
		}
	}
	if (K > 0 && model_dflash_state_shape(m, s->c.n_ctx, &dc) == 0) {
		/* a DFlash drafter's context cache at n_ctx (and the pool's copy of its rings):
		 * its full-attention layers' rows a position, its rings' bytes fixed */
		size_t d1 = model_dflash_state_bytes(m, s->c.n_ctx + 1) - state_bytes(&dc);

		f->drafter = state_bytes(&dc) + (s->c.reuse ? state_ring_floats(&dc) *
		    sizeof(float) : 0);
		for (int i = 0; i < 2; i++)
			fl[0].fixed[i] += f->drafter - d1 * s->c.n_ctx, fl[0].per_pos[i] += d1;
	}
	f->fit = 1 << 30, f->max_ctx = s->c.n_ctx;
	for (int d = 0, ctx = 0; d < f->n_dev; d++) {
		if (fit_device(s, m, f, d, &fl[d], &ctx, err) != 0)
			return -1;
		f->session += f->dev[d].session, f->avail += f->dev[d].avail;
		f->fit = f->dev[d].fit < f->fit ? f->dev[d].fit : f->fit;
		f->max_ctx = ctx < f->max_ctx ? ctx : f->max_ctx;
	}
	return 0;
}

/* The lane's host buffers for a step's rows: every session's verify rows
 * (ids, hidden), and a logits row for each sampled session. */
static int
lane_buffers(struct sched *s, struct lane *l, char *err)
{
	size_t rows = (size_t)s->c.max_sessions * (l->K + 1);

	if (rows < (size_t)l->cost.step_rows)	/* lane_measure's steps */
		rows = l->cost.step_rows;

	l->n_lg = s->c.max_sessions > l->K + 1 ? s->c.max_sessions : l->K + 1;
	l->lg = model_host_alloc(l->m, (size_t)l->n_lg * l->nv);
	l->hid = model_host_alloc(l->m, rows * l->ne);
	l->ids = malloc(rows * sizeof *l->ids);
	l->mask = malloc(rows * sizeof *l->mask);
	if (l->lg == NULL || l->hid == NULL || l->ids == NULL || l->mask == NULL)
		return util_err(err, "%s", l->ids && l->mask ? model_errmsg(l->m) :
		    "out of memory");
	if (l->K > 0 && l->draft == DRAFT_DFLASH &&
	    (l->taps = model_host_alloc(l->m, rows * l->tw)) == NULL)
		return util_err(err, "%s", model_errmsg(l->m));
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

/* l->pst: its prefix cache's stats, a DFlash drafter's context blocks' bytes with them. */
static void
lane_prefix_stats(struct lane *l)
{
	struct prefix_stats d;

	prefix_stats(l->pc, &l->pst);
	if (l->dpc == NULL)
		return;
	prefix_stats(l->dpc, &d);
	l->pst.budget += d.budget, l->pst.arena += d.arena;
	l->pst.bytes += d.bytes, l->pst.block_bytes += d.block_bytes;
	l->pst.snap_bytes += d.snap_bytes;
}

/*
 * The lane's prefix cache of budget pc: on a DFlash lane, in two of as
 * many blocks (none when that holds no block of each), the trunk's (pc)
 * and the drafter's context rows of the same prompts (dpc), the budget
 * shared in proportion to their blocks' bytes.
 */
static int
lane_caches(struct lane *l, struct prefix_config *pc, char *err)
{
	struct state *ds;
	struct prefix_config dp = *pc;
	size_t bt = prefix_unit_bytes_like(l->slots[0].st, pc->kv_w, pc->block, pc->stride), bd;

	if (l->draft != DRAFT_DFLASH || l->K == 0)
		return (l->pc = prefix_new_like(l->slots[0].st, pc, err)) == NULL ? -1 : 0;
	ds = spec_drafter_state(l->slots[0].spec);
	dp.kv_w = NULL;		/* the drafter's caches: one width */
	bd = prefix_unit_bytes_like(ds, NULL, pc->block, pc->stride);
	dp.budget = pc->budget / (bt + bd) * bd, pc->budget = pc->budget / (bt + bd) * bt;
	if (pc->budget == 0)
		return 0;
	if ((l->pc = prefix_new_like(l->slots[0].st, pc, err)) == NULL ||
	    (l->dpc = prefix_new_like(ds, &dp, err)) == NULL)
		return -1;
	return 0;
}

/* Slot sl's pool snapshot: room for each part's recurrent state in its stage's memory. */
static int
rsnap_alloc(struct lane *l, struct slot *sl)
{
	if ((sl->rsnap = calloc(l->n_part, sizeof *sl->rsnap)) == NULL)
		return -1;
	for (int p = 0; p < l->n_part; p++) {
		size_t n = state_rec_floats(state_config(state_part(sl->st, p)));
		struct backend *pb = model_stage_backend(l->m, p);

		if (n > 0 && (backend_use(pb) != 0 ||
		    (sl->rsnap[p] = backend_alloc(pb, n)) == NULL))
			return -1;
	}
	return 0;
}

/* The recurrent state of st (every part's) into slot sl's pool snapshot (save) or back. */
static int
rsnap_move(struct slot *sl, struct state *st, int save)
{
	for (int p = 0; p < state_parts(st); p++) {
		struct state *ps = state_part(st, p);

		if (backend_use(state_backend(ps)) != 0 || (save ? state_rec_save(ps, sl->rsnap[p]) :
		    state_rec_load(ps, sl->rsnap[p])) != 0)
			return -1;
	}
	return 0;
}

/*
 * The prefix cache's budget in the memory the sessions leave of f's
 * devices: MEMRA_PREFIX_CACHE_MB's (a device's share of it, its parts'
 * bytes of a block, past what is left there is an error naming what is
 * left), or SCHED_PREFIX_AUTO's, the blocks a quarter of what each device
 * leaves holds (at most 1 GiB of the host's memory, which is everyone's,
 * 8 GiB of a GPU's).  0: none.
 */
static int
prefix_budget(struct sched *s, struct lane *l, const struct sched_fit *f,
    struct prefix_config *pc, char *err)
{
	size_t *budget = &pc->budget, mib = 1 << 20;
	size_t bb = prefix_unit_bytes_like(l->slots[0].st, pc->kv_w, pc->block, pc->stride);
	size_t blocks = SIZE_MAX, one = 0;

	for (int d = 0; d < f->n_dev; d++) {
		const struct sched_fit_dev *v = &f->dev[d];
		size_t used = v->session * s->c.max_sessions, bd = 0, part, quarter, cap;
		size_t left = v->avail > used ? v->avail - used : 0;
		int host = 0;

		for (int p = 0, nw = 0; p < l->n_part; p++) {
			const struct state_config *c = state_config(state_part(l->slots[0].st, p));

			if (v->stages & 1u << p) {
				bd += prefix_unit_bytes(c, pc->kv_w != NULL ? pc->kv_w + nw : NULL,
				    pc->block, pc->stride);
				host |= backend_host(model_stage_backend(l->m, p));
			}
			nw += c->n_kv;
		}
		part = *budget == SCHED_PREFIX_AUTO || bb == 0 ? 0 :
		    *budget / bb * bd + *budget % bb * bd / bb;	/* (its share) */
		if (*budget != SCHED_PREFIX_AUTO && part > left)
			return f->n_dev > 1 ? util_err(err, "a prefix cache of %zu MiB does not fit: "
			    "its part on %s, %zu MiB, past the %zu MiB the sessions leave there",
			    *budget / mib, v->name, part / mib, left / mib) : util_err(err, "a prefix "
			    "cache of %zu MiB does not fit: the sessions leave %zu MiB", *budget / mib,
			    left / mib);
		cap = (size_t)(host ? 1 : 8) << 30, quarter = left / 4 < cap ? left / 4 : cap;
		if (bd > 0 && quarter / bd < blocks)
			blocks = quarter / bd;
		one = quarter;
	}
	if (*budget == SCHED_PREFIX_AUTO)	/* too little memory for a block: none */
		*budget = blocks == SIZE_MAX || blocks == 0 ? 0 : f->n_dev == 1 ? one : blocks * bb;
	return 0;
}

/*
 * The lane's reuse pool buffers (a saved recurrent state and the parked
 * tokens a slot) and its prefix cache, in what the sessions leave of f's
 * memory (prefix_budget).
 */
static int
lane_reuse(struct sched *s, struct lane *l, struct sched_fit *f, char *err)
{
	struct prefix_config pc = { s->c.block, s->c.prefix_bytes, 0, NULL,
	    s->c.chunk / s->c.block };
	int n = 0, *w, rc;

	for (int i = 0; s->c.reuse && i < s->c.max_sessions; i++) {
		struct slot *sl = &l->slots[i];
		size_t dn = sl->spec != NULL && spec_drafter_state(sl->spec) != NULL ?
		    state_ring_floats(state_config(spec_drafter_state(sl->spec))) : 0;

		sl->ptok = malloc((size_t)(s->c.n_ctx + SPEC_KMAX + 1) * sizeof *sl->ptok);
		sl->ptag = malloc(((size_t)s->c.n_ctx / s->c.block + 1) * sizeof *sl->ptag);
		if (sl->ptok == NULL || sl->ptag == NULL || rsnap_alloc(l, sl) != 0 ||
		    (dn > 0 && (sl->dsnap = backend_alloc(model_stage_backend(l->m, 0), dn)) == NULL))
			return util_err(err, "reuse pool: out of memory");
	}
	if (pc.budget == 0)
		return 0;
	for (int p = 0; p < l->n_part; p++)
		n += state_config(state_part(l->slots[0].st, p))->n_kv;
	if ((w = malloc((n + 1) * sizeof *w)) == NULL)
		return util_err(err, "out of memory");
	for (int i = 0; i < n; i++)	/* the blocks as wide as each KV cache's rows */
		w[i] = model_kv_width(l->m, i);
	pc.kv_w = w;
	rc = prefix_budget(s, l, f, &pc, err) != 0 ? -1 :
	    pc.budget == 0 ? 0 : lane_caches(l, &pc, err);
	free(w);
	if (rc != 0 || l->pc == NULL)	/* (a DFlash lane's: no block of each fits) */
		return rc;
	lane_prefix_stats(l);
	f->prefix = l->pst.arena;
	return 0;
}

/*
 * max_sessions sessions do not fit (f): what does, as an error (always
 * -1); a split model's on the device with the least room, by name.
 */
static int
fit_error(struct sched *s, const struct sched_fit *f, char *err)
{
	const struct sched_fit_dev *v = &f->dev[0];
	size_t mib = 1 << 20, n = s->c.max_sessions;
	char on[48] = "", or[64] = "";

	for (int d = 1; d < f->n_dev; d++)
		if (f->dev[d].fit < v->fit)
			v = &f->dev[d];
	if (f->n_dev > 1)
		snprintf(on, sizeof on, " on %s", v->name);
	if (f->max_ctx > 0)
		snprintf(or, sizeof or, ", or %d of ctx %d", s->c.max_sessions, f->max_ctx);
	return util_err(err, "%d sessions of ctx %d need %zu MiB each%s, %zu MiB in all; "
	    "%zu MiB are free%s: at most %d sessions of ctx %d%s", s->c.max_sessions, s->c.n_ctx,
	    v->session / mib, on, v->session * n / mib, v->avail / mib, f->n_dev > 1 ? " there" : "",
	    v->fit, s->c.n_ctx, or);
}

/* What drafts for model m (DRAFT_*; -1: nothing) and the most drafts a round in *kmax. */
static int
drafter(const struct model *m, int *kmax)
{
	const struct model_hparams *dh = model_dflash(m);

	*kmax = dh != NULL ? dh->block - 1 : SPEC_KMAX;
	if (dh != NULL)
		return DRAFT_DFLASH;
	if (model_has_assist(m))
		return DRAFT_ASSIST;
	return model_hparams(m)->n_mtp > 0 ? DRAFT_MTP : -1;
}

int
sched_add_model(struct sched *s, struct model *m, int K, int pin, struct sched_fit *fp,
    char *err)
{
	struct lane *l = &s->lanes[s->n_lanes];
	struct sched_fit own, *f = fp != NULL ? fp : &own;
	int kmax, draft = drafter(m, &kmax);

	if (s->n_lanes == MAX_LANES)
		return util_err(err, "sched: more than %d models", MAX_LANES);
	if (K > 0 && draft < 0)
		return util_err(err, "sched: K %d: the model has no MTP head or drafter", K);
	if (K < 0 || K > kmax)
		return util_err(err, "sched: K %d: out of range 0..%d%s", K, kmax,
		    draft == DRAFT_DFLASH ? " (the DFlash drafter's block less its anchor)" : "");
	if (sched_fit(s, m, K, f, err) != 0)
		return -1;
	if (f->fit < s->c.max_sessions)
		return fit_error(s, f, err);
	for (int st = 0; st < model_stages(m) && s->c.block != s->c.chunk; st++)
		if (cut_error(model_stage_backend(m, st), s->c.block, s->c.chunk, err))
			return -1;
	memset(l, 0, sizeof *l);
	l->m = m, l->K = K, l->pin = pin, l->draft = draft, l->n_part = model_stages(m);
	l->nv = model_hparams(m)->n_vocab, l->ne = model_hparams(m)->n_embd;
	l->cost.step_rows = model_step_rows(m);	/* sched_spec_k's groups */
	if (draft == DRAFT_DFLASH)
		l->tw = (size_t)model_dflash(m)->n_tap * l->ne;
	if (lane_buffers(s, l, err) != 0 || lane_slots(s, l, err) != 0 ||
	    (K > 0 && !pin && lane_measure(l, err) != 0) || lane_reuse(s, l, f, err) != 0) {
		lane_free(l, s->c.max_sessions);
		return -1;
	}
	count_groups(l);	/* from here on: the steps' groups (the boot's measures not) */
	l->groups = 0, l->most = 0;
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
	q->spec = l->K > 0 && sample_plain_greedy(&r->sp) && (r->vp == NULL ||
	    r->vp->n_rows == 0 || l->draft == DRAFT_ASSIST);	/* images: images_spec */
	if (r->grammar != NULL && ((q->g = grammar_retain(r->grammar)),
	    (q->gs = grammar_state_new(q->g)) == NULL ||
	    (q->bits = malloc(((size_t)l->nv + 31) / 32 * sizeof *q->bits)) == NULL))
		return util_err(err, "out of memory");
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
	q->rblk = q->pblk = q->drblk = q->dpblk = -1, q->note.kind = -1;
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

/*
 * Images and speculation (images_spec): a prompt's images go to gemma4
 * trunks only (model_inject), and the one drafter of a gemma4 trunk is its
 * assistant, which drafts over the trunk's K/V of every position, image
 * rows included, as transformers' Gemma4AssistantForCausalLM does (its
 * queries attend over the target's shared_kv_states with no image rule of
 * its own: the bidirectional rule shaped those K/V in the trunk's prefill,
 * the same here); its drafts are verified by the trunk's rows as any, so
 * an image session drafts and gives plain decode's tokens.  An MTP head's
 * prompt rows would take an image row's placeholder token beside the
 * trunk's hidden, and a DFlash drafter attaches to no trunk that takes
 * images: a session with images on such a lane decodes plain.
 */

/* 1 when position p is no cut of q's prompt's prefill: an image's rows run across it. */
static int
inside_image(const struct sched_seq *q, int p)
{
	for (int i = 0; i < q->vp.n_img; i++)
		if (q->vp.img[i].row < p && p < q->vp.img[i].row + q->vp.img[i].n)
			return 1;
	return 0;
}

/*
 * q's block tags (q->vp's images): block d's (rows [d chunk, (d + 1) chunk)
 * of the prompt) the SHA-256 of each image whose soft-token rows meet it,
 * in order, as its file's SHA-256, its first row and its rows (32-bit,
 * little-endian); zero when none does.  So a block holding image rows is
 * found again only where the same image's bytes come back at the same
 * place, and the tag of a block whose end an image runs across says so
 * (the prefix cache keeps it open).  0, or -1 with err.
 */
static int
seq_tags(struct sched *s, struct sched_seq *q, char *err)
{
	int B = s->c.block, nb = q->n_prompt / B + 1;

	if ((q->tags = calloc(nb, sizeof *q->tags)) == NULL)
		return util_err(err, "out of memory");
	for (int d = 0; d < nb; d++) {
		struct sha256 h;
		int any = 0;

		sha256_init(&h);
		for (int i = 0; i < q->vp.n_img; i++) {
			const struct vision_prompt_image *im = &q->vp.img[i];
			uint8_t w[8];

			if (im->row >= (d + 1) * B || im->row + im->n <= d * B)
				continue;
			for (int k = 0; k < 4; k++)
				w[k] = (uint8_t)((uint32_t)im->row >> 8 * k),
				w[4 + k] = (uint8_t)((uint32_t)im->n >> 8 * k);
			sha256_update(&h, im->sha256, sizeof im->sha256);
			sha256_update(&h, w, sizeof w);
			any = 1;
		}
		if (any)
			sha256_final(&h, q->tags[d].b);
	}
	return 0;
}

/*
 * q's cuts besides the chunks' ends (schedule.h): L, the prompt's last
 * multiple of block before its last token, where no multiple of chunk is
 * and no image runs across, into q->lcut (0: none); and the last point
 * <= n_prompt a cold prefill of it stops at, into q->rsave.
 */
static void
prompt_cuts(const struct sched *s, struct sched_seq *q)
{
	int C = s->c.chunk, L = (q->n_prompt - 1) / s->c.block * s->c.block;

	q->lcut = L > 0 && L % C != 0 && !inside_image(q, L) ? L : 0;
	q->rsave = q->n_prompt / C * C;
	while (q->rsave > 0 && inside_image(q, q->rsave))
		q->rsave -= C;
	if (q->lcut > q->rsave)
		q->rsave = q->lcut;
}

/* A copy of the images vp of a prompt of n tokens into q (the prefilling choice). */
static int
seq_images(struct sched *s, struct sched_seq *q, const struct vision_prompt *vp, int n,
    char *err)
{
	size_t rows = vp != NULL ? (size_t)vp->n_rows : 0;

	if (rows == 0)
		return 0;
	if (vp->row[0] < 0 || vp->row[rows - 1] >= n || vp->n_img < 1)
		return util_err(err, "sched: image rows outside the prompt of %d tokens", n);
	q->vp = *vp;
	q->vp.row = malloc(rows * sizeof *q->vp.row);
	q->vp.x = malloc(rows * vp->nt * sizeof *q->vp.x);
	q->vp.img = malloc(vp->n_img * sizeof *q->vp.img);
	if (q->vp.row == NULL || q->vp.x == NULL || q->vp.img == NULL) {
		vision_prompt_free(&q->vp);
		return util_err(err, "%zu image rows: out of memory", rows);
	}
	memcpy(q->vp.row, vp->row, rows * sizeof *q->vp.row);
	memcpy(q->vp.x, vp->x, rows * vp->nt * sizeof *q->vp.x);
	memcpy(q->vp.img, vp->img, vp->n_img * sizeof *q->vp.img);
	return seq_tags(s, q, err);
}

/* Request r's n choices into seqs[n] (choice i seeded seed + i): 0, or -1 with err. */
static int
seqs_new(struct sched *s, const struct sched_req *r, int n, struct sched_seq **seqs, char *err)
{
	struct sched_req ri = *r;

	for (int i = 0; i < n; i++) {
		ri.sp.seed = r->sp.seed + (uint64_t)i;
		if ((seqs[i] = calloc(1, sizeof *seqs[i])) == NULL || seq_init(s, seqs[i], &ri,
		    err) != 0 || (i == 0 && seq_images(s, seqs[0], r->vp, r->n_ids, err) != 0)) {
			if (seqs[i] == NULL)
				util_err(err, "out of memory");
			for (int k = 0; k <= i; k++)
				seq_free(seqs[k]), seqs[k] = NULL;
			return -1;
		}
		prompt_cuts(s, seqs[i]);
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
	if (r->grammar != NULL && r->ignore_eos)
		return util_err(err, "a grammar ends the reply with a stop id: not with ignore_eos");
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
	for (int i = 0; i < s->n_lanes; i++)
		for (int j = 0; j < s->c.max_sessions; j++)
			st->parked += s->lanes[i].slots[j].parked;
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

/* --- reuse: the prefix cache and the pool (schedule.h says what is exact) --- */

/*
 * 1 when q may resume at S, a point where some prompt's prefill forward
 * ended: where its own cold prefill cuts too (a chunk's end, its L), or
 * where the first forward from S has more than the model's step rows
 * (the cut at S is then one of row-invariant products and, S a multiple of
 * 64, of the delta rule's chunks).  Only an image can end that forward
 * sooner than 64 rows after S (a forward stops before an image that runs
 * across its end), and a forward of so few rows takes a step's kernels on
 * a GPU, where the cold run has one forward.
 */
static int
resumable(const struct sched *s, const struct lane *l, const struct sched_seq *q, int S)
{
	int e = (S / s->c.chunk + 1) * s->c.chunk;

	if (S % s->c.chunk == 0 || S == q->lcut || q->vp.n_rows == 0)
		return 1;
	if (e > q->n_prompt)
		e = q->n_prompt;
	if (q->lcut > S && q->lcut < e)
		e = q->lcut;
	return vision_prompt_cut(&q->vp, S, e - S) > model_step_rows(l->m);
}

/* 1 when parked slot sl's prompt and q's hold the same images before position b. */
static int
same_images(const struct sched *s, const struct slot *sl, const struct sched_seq *q, int b)
{
	static const struct prefix_tag zero;

	for (int d = 0; d < b / s->c.block; d++)
		if (memcmp(sl->ptag[d].b, (q->tags != NULL ? &q->tags[d] : &zero)->b,
		    sizeof zero.b) != 0)
			return 0;
	return 1;
}

/*
 * Under the lock: the parked slot of lane l that q resumes from, the one
 * of the longest boundary (in *at), or -1; q->why says why a parked
 * conversation that q's prompt extends cannot be resumed.
 */
static int
pool_match(struct sched *s, struct lane *l, struct sched_seq *q, int *at)
{
	int best = -1;

	*at = 0;
	for (int i = 0; i < s->c.max_sessions; i++) {
		const struct slot *sl = &l->slots[i];
		int b = sl->pbound, same, cut, back;

		if (sl->used || !sl->parked)
			continue;
		same = b < q->n_prompt && same_images(s, sl, q, b);
		cut = b < q->n_prompt && resumable(s, l, q, b);
		back = state_back(sl->st, b);	/* a ring's window before b still held */
		if (same && cut && back && b > *at &&
		    memcmp(sl->ptok, q->hist, b * sizeof *q->hist) == 0)
			best = i, *at = b;
		else if (sl->n_ptok <= q->n_prompt &&
		    memcmp(sl->ptok, q->hist, sl->n_ptok * sizeof *q->hist) == 0) {
			q->note.parked = sl->n_ptok;
			if (b < q->n_prompt && !same)
				snprintf(q->why, sizeof q->why, "an image before the parked state's "
				    "point at %d is another", b);
			else if (b >= q->n_prompt)
				snprintf(q->why, sizeof q->why, "the prompt of %d tokens does not go "
				    "past the parked state's point at %d", q->n_prompt, b);
			else if (!cut)
				snprintf(q->why, sizeof q->why, "an image starts within %d rows of the "
				    "parked state's point at %d", model_step_rows(l->m), b);
			else if (!back)
				snprintf(q->why, sizeof q->why, "the parked state ran %d positions "
				    "past its point at %d, more than its sliding layers' rings keep "
				    "(%d)", state_pos(sl->st) - b, b, model_ring_rows(l->m));
		}
	}
	return best;
}

/* Under the lock: a free slot of lane l, one not parked first, else the
 * least recently parked (its parked state is dropped). */
static int
free_slot(struct sched *s, struct lane *l)
{
	int lru = -1;

	for (int i = 0; i < s->c.max_sessions; i++) {
		const struct slot *sl = &l->slots[i];

		if (sl->used)
			continue;
		if (!sl->parked)
			return i;
		if (lru < 0 || sl->pstamp < l->slots[lru].pstamp)
			lru = i;
	}
	return lru;
}

/*
 * Under the lock: whether speculative q, resuming at bc from the prefix
 * cache, finds its drafter's rows there: a DFlash drafter's context rows
 * of the same chain in the lane's dpc (pinned into q->drblk); the other
 * drafters' are the trunk's blocks' (MTP) or none (the assistant).
 */
static int
drafter_chain(struct lane *l, struct sched_seq *q, int bc)
{
	int blk;

	if (l->draft != DRAFT_DFLASH)
		return 1;
	if (l->dpc == NULL || prefix_lookup(l->dpc, q->hist, q->tags, bc + 1, 0, &blk) != bc)
		return 0;
	prefix_pin(l->dpc, blk);
	q->drblk = blk;
	return 1;
}

/* Worker, q restored at `at`: the chain of the DFlash drafter's context
 * that q's boundaries extend (the one it resumed from, or from the pool
 * the cached one of its prompt up to at), pinned. */
static void
drafter_extend(struct lane *l, struct sched_seq *q, int at)
{
	int blk;

	if (l->dpc == NULL || !q->spec)
		return;
	if (q->drblk >= 0)
		q->dpblk = q->drblk, q->drblk = -1;
	else if (prefix_chain(l->dpc, q->hist, q->tags, at, &blk) == at)
		q->dpblk = blk, prefix_pin(l->dpc, blk);
}

/* q's pins of the DFlash drafter's chains, dropped. */
static void
drafter_unpin(struct lane *l, struct sched_seq *q)
{
	if (l->dpc != NULL)
		prefix_unpin(l->dpc, q->drblk), prefix_unpin(l->dpc, q->dpblk);
	q->drblk = q->dpblk = -1;
}

/*
 * Under the lock, as q is admitted on lane l (a slot is free): the slot
 * it takes and where it resumes, from the pool or the prefix cache,
 * whichever reaches further; a speculative q whose source has not its
 * drafter's rows (drafter_chain; the pool's: a speculative session's)
 * decodes plain.
 */
static int
slot_for(struct sched *s, struct lane *l, struct sched_seq *q)
{
	int at = 0, blk = -1, bc = 0, i = -1, mtp, n = q->n_prompt;

	q->why[0] = '\0', q->note.parked = 0;
	if (s->c.reuse)
		i = pool_match(s, l, q, &at);
	if (l->pc != NULL)
		bc = prefix_lookup(l->pc, q->hist, q->tags, n, 0, &blk);
	while (bc > 0 && !resumable(s, l, q, bc))	/* the chain's snapshot before */
		bc = prefix_lookup(l->pc, q->hist, q->tags, bc, 0, &blk);
	if (i >= 0 && at >= bc) {
		q->resume = 1, q->resume_at = at, q->note.parked = l->slots[i].n_ptok;
		q->spec = q->spec && (l->draft == DRAFT_ASSIST || l->slots[i].pmtp);
	} else {
		i = free_slot(s, l);
		if (bc > 0) {
			q->resume = 2, q->resume_at = bc, q->rblk = blk;
			prefix_pin(l->pc, blk);
			mtp = q->spec && l->draft == DRAFT_MTP ? prefix_lookup(l->pc, q->hist, q->tags,
			    bc + 1, 1, &blk) : bc;
			q->spec = q->spec && mtp == bc && drafter_chain(l, q, bc);
		} else if (q->why[0] != '\0')
			q->note = (struct sched_note){ SCHED_NOTE_COLD, q->lane, 0, q->note.parked, q->why,
			    0 };
	}
	l->slots[i].parked = 0, l->slots[i].sbound = 0;
	return i;
}

/* Tell a note of q's lane. */
static void
tell(struct sched *s, struct sched_seq *q)
{
	if (s->c.note != NULL && q->note.kind >= 0)
		s->c.note(s->c.note_arg, &q->note);
	q->note.kind = -1;
}

/* Worker: speculative q's DFlash drafter rings (a sliding layer's last
 * positions) of slot sl copied for the pool (as rsnap the recurrent state),
 * or (load) back; 0 when it has none. */
static int
drafter_rings(struct slot *sl, const struct sched_seq *q, int load)
{
	struct state *ds;

	if (sl->dsnap == NULL || !q->spec || (ds = spec_drafter_state(sl->spec)) == NULL)
		return 0;
	return load ? state_ring_load(ds, sl->dsnap) : state_ring_save(ds, sl->dsnap);
}

/* Worker: speculative q resumes at resume_at with its drafter's state there: a
 * DFlash drafter's context from the pool's slot (its rows, its rings' copy) or
 * the prefix cache's chain (whose rings the pool's copy then takes). */
static int
restore_drafter(struct sched *s, struct sched_seq *q, struct slot *sl)
{
	struct lane *l = &s->lanes[q->lane];

	if (q->resume == 1 ? drafter_rings(sl, q, 1) != 0 : q->drblk >= 0 &&
	    (prefix_restore(l->dpc, q->drblk, spec_drafter_state(sl->spec)) != 0 ||
	    drafter_rings(sl, q, 0) != 0))
		return -1;
	return spec_resume(sl->spec, q->hist, q->n_prompt, q->resume_at);
}

/* Restore q's state at resume_at from the pool's slot or the prefix cache
 * chain (nonzero on a failure: q then prefills cold). */
static int
restore(struct sched *s, struct sched_seq *q)
{
	struct lane *l = &s->lanes[q->lane];
	struct slot *sl = &l->slots[q->slot];
	int at = q->resume_at, blk;

	if (q->resume == 1 ? rsnap_move(sl, q->st, 0) || state_seek(q->st, at) :
	    prefix_restore(l->pc, q->rblk, q->st) || (s->c.reuse && rsnap_move(sl, q->st, 1)))
		return -1;
	if (q->spec && restore_drafter(s, q, sl) != 0)
		return -1;
	drafter_extend(l, q, at);
	if (q->resume == 2)
		q->pblk = q->rblk, q->rblk = -1;	/* its pin goes with it */
	else if (l->pc != NULL && prefix_chain(l->pc, q->hist, q->tags, at, &blk) == at)
		q->pblk = blk, prefix_pin(l->pc, blk);	/* the chain to extend */
	return 0;
}

/* Worker: q's first prefill, at the resume point planned at admission; notes told. */
static void
resume(struct sched *s, struct sched_seq *q)
{
	struct lane *l = &s->lanes[q->lane];
	int at = q->resume_at, pool = q->resume == 1;

	if (q->resume != 0 && restore(s, q) != 0) {
		if (l->pc != NULL)
			prefix_unpin(l->pc, q->rblk), prefix_unpin(l->pc, q->pblk);
		drafter_unpin(l, q);
		q->rblk = q->pblk = -1, q->resume = 0;	/* cold, from row 0 */
		q->spec = 0;	/* a speculative decoder's prompt was not started */
		snprintf(q->why, sizeof q->why, "resuming failed");
		q->note = (struct sched_note){ SCHED_NOTE_COLD, q->lane, 0, 0, q->why, 0 };
	}
	if (q->resume != 0) {
		q->done_prompt = at;
		l->slots[q->slot].sbound = at;
		pthread_mutex_lock(&s->mu);
		q->cached = at;
		s->stats.cached_tokens += at, s->stats.reused += pool;
		pthread_mutex_unlock(&s->mu);
		if (pool)
			q->note = (struct sched_note){ SCHED_NOTE_REUSE, q->lane, at, q->note.parked, NULL,
			    q->spec };
		q->resume = 0;
	}
	tell(s, q);
}

/* q's tag of block d, or NULL: no image in its rows. */
static const struct prefix_tag *
seq_tag(const struct sched_seq *q, int d)
{
	return q->tags != NULL ? &q->tags[d] : NULL;
}

/* Worker: a speculative DFlash session q's drafter context rows of its
 * block that ends at `end`, into the lane's dpc beside the trunk's (open:
 * not where its prefill stopped: rows only, no resuming there). */
static void
drafter_block(struct sched *s, struct sched_seq *q, int end, int open)
{
	struct lane *l = &s->lanes[q->lane];
	struct state *ds;
	int id = -1, pos;

	if (l->dpc == NULL || !q->spec)
		return;
	ds = spec_drafter_state(l->slots[q->slot].spec);
	pos = state_pos(ds);
	if ((end == s->c.block || q->dpblk >= 0) && state_seek(ds, end) == 0 &&
	    (id = prefix_insert(l->dpc, q->dpblk, q->hist, seq_tag(q, end / s->c.block - 1),
	    end, ds, open ? PREFIX_OPEN : 0)) >= 0)
		prefix_pin(l->dpc, id);
	if (open)
		state_seek(ds, pos);	/* (where the drafter's context was) */
	prefix_unpin(l->dpc, q->dpblk);
	q->dpblk = id;
}

/* Worker: q's block that ends at `end` into the prefix cache (open: the
 * prefill ran past it), extending its chain. */
static void
cache_block(struct sched *s, struct sched_seq *q, int end, int open)
{
	struct lane *l = &s->lanes[q->lane];
	int id, flags = (open ? PREFIX_OPEN : 0) | (q->spec && l->draft == DRAFT_MTP ?
	    PREFIX_MTP : 0);

	if (l->pc == NULL || (end > s->c.block && q->pblk < 0))
		return;
	if ((id = prefix_insert(l->pc, q->pblk, q->hist, seq_tag(q, end / s->c.block - 1), end,
	    q->st, flags)) >= 0)
		prefix_pin(l->pc, id);
	prefix_unpin(l->pc, q->pblk);
	q->pblk = id;
	drafter_block(s, q, end, open);
}

/*
 * Worker: q's prefill forward went from `from` to `to`: each block it
 * passed is a block for the prefix cache, open (its rows only) but where
 * the forward ended; at the prompt's last point a cold prefill stops at
 * (rsave), the recurrent state goes to the slot's pool snapshot.
 */
static void
boundary(struct sched *s, struct sched_seq *q, int from, int to)
{
	struct slot *sl = &s->lanes[q->lane].slots[q->slot];

	if (s->c.reuse && to == q->rsave)
		sl->sbound = rsnap_move(sl, q->st, 1) == 0 && drafter_rings(sl, q, 0) == 0 ? to : 0;
	for (int end = (from / s->c.block + 1) * s->c.block; end <= to; end += s->c.block)
		cache_block(s, q, end, end < to);
}

/* Under the lock (the worker's): q leaves its slot; with the pool, a
 * conversation that passed a chunk boundary stays there, parked. */
static void
park(struct sched *s, struct sched_seq *q)
{
	struct lane *l = &s->lanes[q->lane];
	struct slot *sl = &l->slots[q->slot];

	if (l->pc != NULL)
		prefix_unpin(l->pc, q->pblk), prefix_unpin(l->pc, q->rblk);
	drafter_unpin(l, q);
	q->pblk = q->rblk = -1;
	if (!s->c.reuse || q->finish == SCHED_ERROR || q->resume != 0 || sl->sbound == 0)
		return;
	memcpy(sl->ptok, q->hist, q->n_hist * sizeof *q->hist);
	for (int d = 0; d < sl->sbound / s->c.block; d++)
		if (q->tags != NULL)
			sl->ptag[d] = q->tags[d];
		else
			memset(sl->ptag[d].b, 0, sizeof sl->ptag[d].b);
	sl->n_ptok = q->n_hist, sl->pbound = sl->sbound, sl->pmtp = q->spec;
	sl->parked = 1, sl->pstamp = ++s->parks;
}

int
sched_seq_cached(struct sched *s, const struct sched_seq *q)
{
	int n;

	pthread_mutex_lock(&s->mu);
	n = q->cached;
	pthread_mutex_unlock(&s->mu);
	return n;
}

int
sched_prefix_stats(struct sched *s, int lane, struct prefix_stats *ps)
{
	int rc = -1;

	pthread_mutex_lock(&s->mu);
	if (lane >= 0 && lane < s->n_lanes && s->lanes[lane].pc != NULL)
		*ps = s->lanes[lane].pst, rc = 0;
	pthread_mutex_unlock(&s->mu);
	return rc;
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
		park(s, q);
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

/*
 * Under the lock: queued q into a free slot of lane l: a lone request
 * where the reuse pool or the prefix cache lets it resume (slot_for), the
 * choices of an n > 1 request into free slots (choice 0 prefills cold; the
 * others take a copy of its state).
 */
static void
admit_one(struct sched *s, struct sched_seq *q, struct lane *l)
{
	int i;

	unqueue(s, q);
	q->spec = q->spec && admit_spec(s, l);
	if (q->n_kids == 0 && !q->wait_prompt && (s->c.reuse || l->pc != NULL))
		i = slot_for(s, l, q);
	else {
		i = free_slot(s, l);
		l->slots[i].parked = 0, l->slots[i].sbound = 0;
	}
	l->slots[i].used = 1;
	q->slot = i, q->active = 1, q->t_admit = util_now();
	q->st = l->slots[i].st;
	s->run[s->n_run++] = q;
}

/* Under the lock: how many of lane l's slots are free. */
static int
free_count(const struct sched *s, const struct lane *l)
{
	int n = 0;

	for (int i = 0; i < s->c.max_sessions; i++)
		n += !l->slots[i].used;
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
		int want = 1 + q->n_kids;

		if (q->wait_prompt) {
			unqueue(s, q);
			snprintf(q->err, sizeof q->err, "the prompt shared with choice 0 was cancelled");
			end_locked(s, q, SCHED_ERROR);
			continue;
		}
		if (s->n_run + want > s->c.max_sessions || free_count(s, l) < want)
			break;
		admit_one(s, q, l);
		while (s->qhead != NULL && s->qhead->wait_prompt && s->qhead->group == q->id)
			admit_one(s, s->qhead, l);
	}
}

/* The logprobs of token t drawn by q's sampler from the row lg after q's
 * first n history tokens into lp. */
static void
logprobs_of(struct sched_seq *q, const float *lg, int n, int32_t t, struct sched_logprob *lp)
{
	int k = sample_logprobs(q->smp, lg, q->hist, n, t, q->top, &lp->logprob, lp->top_id,
	    lp->top_lp);

	lp->n_top = k < 0 ? 0 : k;
}

/*
 * 1 when q's grammar masks its rows where the logits are (grammar_bits,
 * backend_mask) and its picks are taken there: q wants no logprobs (they
 * need the row), decodes plain (a speculative session's verify rows stay
 * on the host, draw_host: each row's mask is the state after the drafts
 * before it, known only as the rows are drawn one by one), its backend
 * masks, and the config does not keep every mask on the host.
 */
static int
mask_here(const struct sched *s, const struct sched_seq *q)
{
	return q->gs != NULL && !q->logprobs && !q->spec && !s->c.host_mask &&
	    model_can_mask(s->lanes[q->lane].m);
}

/* 1 when q's picks are taken on the host: it wants logprobs, or a grammar
 * masks its rows there. */
static int
host_picks(const struct sched *s, const struct sched_seq *q)
{
	return q->logprobs || (q->gs != NULL && !mask_here(s, q));
}

/* Every logit of lg[nv] but q's stop ids' to -inf (those keep theirs). */
static void
only_stops(const struct sched_seq *q, float *lg, int nv)
{
	for (int t = 0; t < nv; t++) {
		int stop = 0;

		for (int j = 0; j < q->n_stop; j++)
			stop |= q->stop[j] == t;
		if (!stop)
			lg[t] = -INFINITY;
	}
}

/* The tokens q's grammar may still take with token j past its history
 * next, the document closing one token early (the stop id ends it within
 * max_tokens), and the context's room. */
static int
grammar_left(const struct sched *s, const struct sched_seq *q, int j)
{
	int left = q->max_tokens - q->n_gen - j, room = s->c.n_ctx - (q->n_hist + j);

	return left < room ? left : room;
}

/* 1 when only q's stop ids may come next after a mask with left tokens:
 * a whole document ends here, and so does one whole at the last token. */
static int
stops_only(const struct sched_seq *q, int left)
{
	return (grammar_ended(q->gs) || (left <= 1 && grammar_done(q->gs))) && q->n_stop > 0;
}

/*
 * q's next token's mask into q->bits[(nv + 31) / 32], the allowed set
 * draw_host leaves finite on the host (grammar_mask_logits, then
 * only_stops): grammar_mask's bits, and where only_stops would run,
 * those of its stop ids.  0, or -1 with q ended (failed) as draw_host
 * fails it: no token may come next, or none of the stop ids may.
 */
static int
grammar_bits(struct sched *s, struct sched_seq *q)
{
	int nv = s->lanes[q->lane].nv, words = (nv + 31) / 32, left = grammar_left(s, q, 0);
	uint32_t any = 0;

	if (grammar_mask(q->gs, q->bits, nv, left > 1 ? left - 1 : 1) <= 0) {
		fail_seq(s, q, "grammar: no token may come next");
		return -1;
	}
	if (!stops_only(q, left))
		return 0;
	for (int i = 0; i < words; i++) {
		uint32_t keep = 0;

		for (int j = 0; j < q->n_stop; j++)
			if (q->stop[j] >= 0 && q->stop[j] < nv && q->stop[j] / 32 == i)
				keep |= 1u << (q->stop[j] % 32);
		any |= q->bits[i] &= keep;
	}
	if (any == 0) {		/* (the host's row has no finite logit then) */
		fail_seq(s, q, "no finite logit");
		return -1;
	}
	return 0;
}

/*
 * q's token j places past its history (j > 0: a verify row's, the tokens
 * before it in q->hist[n_hist..]) from its logits row lg on the host:
 * masked by its grammar first (in place) and taken by it; its logprobs
 * into lp when q wants them.  The token, or -1 with q ended (failed).
 */
static int32_t
draw_host(struct sched *s, struct sched_seq *q, float *lg, int j, struct sched_logprob *lp)
{
	const struct lane *l = &s->lanes[q->lane];
	int n = q->n_hist + j;
	int32_t t;

	if (q->gs != NULL) {
		int left = grammar_left(s, q, j);

		if (grammar_mask_logits(q->gs, lg, l->nv, left > 1 ? left - 1 : 1) <= 0) {
			fail_seq(s, q, "grammar: no token may come next");
			return -1;
		}
		if (stops_only(q, left))
			only_stops(q, lg, l->nv);
	}
	if ((t = sample_next(q->smp, lg, q->hist, n, 0, n)) < 0) {
		fail_seq(s, q, "no finite logit");
		return -1;
	}
	if (q->gs != NULL && grammar_accept(q->gs, t) != 0) {
		fail_seq(s, q, "grammar: the token drawn is not allowed");
		return -1;
	}
	if (q->logprobs)
		logprobs_of(q, lg, n, t, lp);
	return t;
}

/* q's next token from its logits row lg on the host (draw_host), handed to
 * its reader; a failure ends q alone. */
static void
pick_host(struct sched *s, struct sched_seq *q, float *lg)
{
	struct sched_logprob lp;
	int32_t t = draw_host(s, q, lg, 0, &lp);

	if (t >= 0)
		emit(s, q, &t, q->logprobs ? &lp : NULL, 1);
}

/*
 * Choice 0 q's prompt is done and its last row's logits are in lg: each
 * choice of q in act[n] (q itself, and the later ones, which get a copy of
 * q's state) draws its first token from them, as model_forward_next would;
 * a speculative q's decoder takes it (spec_first).
 */
static void
prime(struct sched *s, struct sched_seq *q, float *lg, struct sched_seq **act, int n)
{
	struct spec *sp = s->lanes[q->lane].slots[q->slot].spec;
	struct sched_logprob lp;
	int32_t t;

	if (q->spec) {		/* (a speculative session has no later choices) */
		if ((t = draw_host(s, q, lg, 0, &lp)) < 0)
			return;
		if (spec_first(sp, t) != 0)
			fail_seq(s, q, spec_errmsg(sp));
		else
			emit(s, q, &t, q->logprobs ? &lp : NULL, 1);
		return;
	}
	for (int i = -1; i < n; i++) {
		struct sched_seq *c = i < 0 ? q : act[i];

		if (i >= 0 && (!c->wait_prompt || c->group != q->id))
			continue;
		if (c != q && state_copy(c->st, q->st) != 0) {
			fail_seq(s, c, state_errmsg(c->st));
			continue;
		}
		pthread_mutex_lock(&s->mu);
		c->wait_prompt = 0;
		pthread_mutex_unlock(&s->mu);
		pick_host(s, c, lg);	/* (the choices' grammars mask the row alike) */
	}
}

/*
 * One prompt chunk of q: rows [done, to); the last chunk picks the first
 * token, on the backend (the row masked there first by q's grammar,
 * mask_here), or from the row on the host for a session that wants
 * logprobs, whose grammar masks on the host or that shares its prompt
 * with later choices in act[n_act].
 */
static int
prefill_chunk(struct sched *s, struct sched_seq *q, int to, struct sched_seq **act, int n_act)
{
	struct lane *l = &s->lanes[q->lane];
	struct spec *sp = l->slots[q->slot].spec;
	int from = q->done_prompt, n = q->n_prompt, rc, host = host_picks(s, q) || q->n_kids > 0;
	int32_t first = -1;
	struct model_embd e = { 0 };
	const uint32_t *mask = NULL;

	/* (the mask before the forward: the same state the host would mask the row with) */
	if (to == n && !host && q->gs != NULL) {
		if (grammar_bits(s, q) != 0)
			return -1;
		mask = q->bits;
	}
	if (q->vp.n_rows > 0)
		vision_prompt_rows(&q->vp, from, to - from, &e);	/* its images' rows */
	if (!q->spec && from == 0)
		state_reset(q->st);
	/* the chunk's forward, plain or the speculative decoder's, takes its image rows */
	if (e.n > 0 && model_inject(l->m, &e) != 0) {
		fail_seq(s, q, model_errmsg(l->m));
		return -1;
	}
	if (q->spec)
		rc = host ? spec_prefill_logits(sp, q->hist, n, from, to, l->lg) :
		    spec_prefill_part(sp, q->hist, n, from, to, &first);
	else
		rc = to < n ? model_forward(l->m, q->st, q->hist + from, to - from,
		    MODEL_PREFILL, NULL, NULL) : host ? model_forward(l->m, q->st, q->hist +
		    from, to - from, MODEL_PREFILL, l->lg, NULL) : model_forward_next_mask(l->m,
		    q->st, q->hist + from, to - from, MODEL_PREFILL, q->smp, q->hist, n, 0, n,
		    mask, l->lg, &first);
	if (rc != 0) {
		model_inject(l->m, NULL);	/* (a part refused before its forward) */
		fail_seq(s, q, q->spec ? spec_errmsg(sp) : model_errmsg(l->m));
		return -1;
	}
	q->done_prompt = to;
	boundary(s, q, from, to);
	pthread_mutex_lock(&s->mu);
	s->stats.prefill_tokens += to - from;
	pthread_mutex_unlock(&s->mu);
	if (to == n && host)
		prime(s, q, l->lg, act, n_act);
	else if (to == n && mask != NULL && grammar_accept(q->gs, first) != 0)
		fail_seq(s, q, "grammar: the token drawn is not allowed");
	else if (to == n) {
		if (mask != NULL) {
			pthread_mutex_lock(&s->mu);
			s->stats.masked++;
			pthread_mutex_unlock(&s->mu);
		}
		emit(s, q, &first, NULL, 1);
	}
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

		if (q->resume != 0 || q->note.kind >= 0)
			resume(s, q);
		while (q->finish == SCHED_RUNNING && q->done_prompt < q->n_prompt) {
			int to = (q->done_prompt / s->c.chunk + 1) * s->c.chunk;

			if (to > q->n_prompt)
				to = q->n_prompt;
			if (q->lcut > q->done_prompt && q->lcut < to)
				to = q->lcut;	/* the prompt's last block a resuming point */
			/* an image whole in one forward */
			to = q->done_prompt + vision_prompt_cut(&q->vp, q->done_prompt,
			    to - q->done_prompt);
			if (ran && to - q->done_prompt > budget)
				return;
			budget -= to - q->done_prompt, ran = 1;
			if (prefill_chunk(s, q, to, act, n) != 0 || budget <= 0)
				break;
		}
	}
}

/* The drafter's input of a step's row off: its taps (DFlash), else its hidden row. */
static const float *
drafter_input(const struct lane *l, int off)
{
	return l->taps != NULL ? l->taps + (size_t)off * l->tw : l->hid + (size_t)off * l->ne;
}

/* 1 when token t ends q's reply (a stop id, unless ignore_eos). */
static int
stops(const struct sched_seq *q, int32_t t)
{
	for (int j = 0; j < q->n_stop && !q->ignore_eos; j++)
		if (q->stop[j] == t)
			return 1;
	return 0;
}

/*
 * Speculative q's verify rows tk[m] (its last token, then its drafts) went
 * through the forward, their logits in lg[m][nv]: each row's token drawn
 * on the host as plain decode draws it (draw_host: masked by q's grammar,
 * with its logprobs into lp[]), row after row while the token drawn is the
 * next draft, so a draft the grammar or the target refuses is cut there
 * like any wrong draft; spec_accept keeps those drafts and the token after
 * them.  The tokens into out (m room); how many, or -1 (q failed).
 */
static int
accept_host(struct sched *s, struct sched_seq *q, struct spec *sp, const int32_t *tk, int m,
    float *lg, const float *hid, int32_t *out, struct sched_logprob *lp)
{
	const struct lane *l = &s->lanes[q->lane];
	int32_t pick[SPEC_KMAX + 1];
	int j, got;

	for (j = 0; j < m; j++) {
		if ((pick[j] = draw_host(s, q, lg + (size_t)j * l->nv, j, &lp[j])) < 0)
			return -1;
		q->hist[q->n_hist + j] = pick[j];	/* the next row's history */
		if (j + 1 == m || pick[j] != tk[j + 1] || stops(q, pick[j]))
			break;
	}
	for (int i = j + 1; i < m; i++)	/* read past a stop only: emit ends there */
		pick[i] = pick[j];
	if ((got = spec_accept(sp, pick, hid, out)) < 0) {
		fail_seq(s, q, spec_errmsg(sp));
		return -1;
	}
	for (int i = 0; i < got && i <= j; i++)
		if (out[i] != pick[i]) {
			fail_seq(s, q, "speculative: the tokens kept are not the ones drawn");
			return -1;
		}
	return got;
}

/* The speculation counts of a step (and its grammar picks taken on the
 * backend), added to the lane's and the scheduler's. */
struct spec_counts {
	long	masked;
	long	rounds, drafted, accepted, tried[SPEC_KMAX], hit[SPEC_KMAX];
	long	rk[SPEC_KMAX + 1], ak[SPEC_KMAX + 1];
};

/* A verify of r rows that kept got tokens, into c. */
static void
count_round(struct spec_counts *c, int r, int got)
{
	if (r < 2)
		return;
	c->rounds++, c->drafted += r - 1, c->accepted += got - 1;
	c->rk[r - 1]++, c->ak[r - 1] += got - 1;
	for (int j = 0; j < r - 1 && j < got; j++)	/* reached j */
		c->tried[j]++, c->hit[j] += j < got - 1;
}

static void
add_counts(struct sched *s, struct lane *l, const struct spec_counts *c)
{
	pthread_mutex_lock(&s->mu);
	s->stats.masked += c->masked;
	s->stats.spec_rounds += c->rounds, s->stats.drafted += c->drafted;
	s->stats.accepted += c->accepted;
	for (int j = 0; j < SPEC_KMAX; j++)
		l->tried[j] += c->tried[j], l->hit[j] += c->hit[j];
	for (int j = 1; j <= SPEC_KMAX; j++)
		s->stats.rounds_k[j] += c->rk[j], s->stats.accepted_k[j] += c->ak[j];
	pthread_mutex_unlock(&s->mu);
}

/*
 * The greedy sessions g[n] of lane li in one forward, k drafts at most
 * each: a decode row each, or a speculative session's verify rows; the
 * picks taken on the backend (a plain session's row masked there first by
 * its grammar, mask_here, the token then taken by the grammar on the
 * host), or (host) drawn on the host from the rows' logits (accept_host:
 * speculative sessions with a grammar or logprobs).
 */
static void
verify_rows(struct sched *s, int li, struct sched_seq **g, int n, int k, int host,
    struct spec_counts *c)
{
	struct lane *l = &s->lanes[li];
	struct sched_logprob lp[SPEC_KMAX + 1];
	int32_t out[SPEC_KMAX + 1];
	int off = 0, m = 0, verify = 0, masked = 0;

	for (int i = 0; i < n; i++) {	/* the rows; a session whose draft or mask fails drops out */
		struct sched_seq *q = g[i];
		struct spec *sp = l->slots[q->slot].spec;
		int left = q->max_tokens - q->n_gen, r = 1;

		if (q->spec && (r = spec_draft(sp, left < k + 1 ? left : k + 1, l->ids + off)) < 0) {
			fail_seq(s, q, spec_errmsg(sp));
			continue;
		}
		if (!host && q->gs != NULL && grammar_bits(s, q) != 0)
			continue;
		if (!q->spec)
			l->ids[off] = q->hist[q->n_hist - 1];
		for (int j = 0; j < r; j++)
			l->mask[off + j] = !host && q->gs != NULL ? q->bits : NULL;
		verify |= q->spec, masked |= !host && q->gs != NULL;
		g[m] = q, s->st[m] = q->st, s->rows[m++] = r, off += r;
	}
	if (m == 0)
		return;
	if (model_forward_seqs_taps(l->m, s->st, s->rows, m, l->ids, verify ? MODEL_VERIFY : 0,
	    host ? l->lg : NULL, host ? NULL : l->ids, masked ? l->mask : NULL,
	    verify && l->taps == NULL ? l->hid : NULL, verify ? l->taps : NULL) != 0) {
		for (int i = 0; i < m; i++)
			fail_seq(s, g[i], model_errmsg(l->m));
		return;
	}
	count_groups(l);
	off = 0;
	for (int i = 0; i < m; off += s->rows[i++]) {
		struct sched_seq *q = g[i];
		struct spec *sp = l->slots[q->slot].spec;
		const float *hid = drafter_input(l, off);
		int got = 1;

		if (host) {
			if ((got = accept_host(s, q, sp, l->ids + off, s->rows[i], l->lg +
			    (size_t)off * l->nv, hid, out, lp)) < 0)
				continue;
		} else if (q->spec)
			got = spec_accept(sp, l->ids + off, hid, out);
		else
			out[0] = l->ids[off];
		if (got < 0 || out[0] < 0) {
			fail_seq(s, q, got < 0 ? spec_errmsg(sp) : "no finite logit");
			continue;
		}
		if (!host && q->gs != NULL && grammar_accept(q->gs, out[0]) != 0) {
			fail_seq(s, q, "grammar: the token drawn is not allowed");
			continue;
		}
		c->masked += !host && q->gs != NULL;
		if (q->spec)
			count_round(c, s->rows[i], got);
		emit(s, q, out, host && q->logprobs ? lp : NULL, got);
	}
}


/*
 * The greedy sessions g[n] of lane li: the lane's K drafts each, pinned,
 * or as many as sched_spec_k finds pay at this load; host: speculative
 * sessions whose picks are drawn on the host, their verify rows' logits
 * brought there, as many sessions a forward as the lane's logits rows
 * hold.
 */
static void
decode_greedy(struct sched *s, int li, struct sched_seq **g, int n, int host)
{
	struct lane *l = &s->lanes[li];
	struct sched_spec_cost cost;
	struct spec_counts c = { 0 };
	int k = l->K, per;

	if (k > 0 && !l->pin) {
		sched_spec_costs(s, li, &cost);
		/* a speculative session keeps the drafter's cache anyway: it drafts at least one */
		if ((k = sched_spec_k(&cost, l->K, n)) == 0)
			k = 1;
	}
	per = host ? l->n_lg / (k + 1) : n;
	for (int i = 0; i < n; i += per)
		verify_rows(s, li, g + i, n - i < per ? n - i : per, k, host, &c);
	add_counts(s, l, &c);
}

/* The sampled sessions g[n] of lane l in one forward (and the greedy ones
 * with a grammar or logprobs that decode plain): their logits rows to the
 * host, each drawn by its sampler at its position. */
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
	count_groups(l);
	for (int i = 0; i < n; i++)
		pick_host(s, g[i], l->lg + (size_t)i * l->nv);
}

/* How a generating session's step runs. */
enum {
	GEN_BACKEND,	/* greedy, its picks taken on the backend */
	GEN_HOST_SPEC,	/* speculative, its verify rows' picks drawn on the host */
	GEN_HOST,	/* one row to the host: sampled, or a grammar or logprobs, plain */
};

static int
gen_kind(const struct sched *s, const struct sched_seq *q)
{
	if (sample_plain_greedy(&q->sp) && !host_picks(s, q))
		return GEN_BACKEND;
	return q->spec ? GEN_HOST_SPEC : GEN_HOST;
}

/* The sessions of act[n] on lane li that are generating, of kind, into
 * s->grp; how many. */
static int
generating(struct sched *s, int li, struct sched_seq **act, int n, int kind)
{
	int k = 0;

	for (int i = 0; i < n; i++) {
		struct sched_seq *q = act[i];

		if (q->lane == li && q->n_gen > 0 && q->finish == SCHED_RUNNING &&
		    gen_kind(s, q) == kind)
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

	if ((k = generating(s, li, act, n, GEN_BACKEND)) > 0)
		decode_greedy(s, li, s->grp, k, 0);
	if ((k = generating(s, li, act, n, GEN_HOST_SPEC)) > 0)
		decode_greedy(s, li, s->grp, k, 1);
	if ((k = generating(s, li, act, n, GEN_HOST)) > 0)
		decode_sampled(s, l, s->grp, k);
}

/* Under the lock (the worker's): the models' step groups and the split
 * models' pipeline counts into the stats. */
static void
pp_counts(struct sched *s)
{
	s->stats.pp_microbatches = s->stats.pp_waves = s->stats.pp_busy_waves = 0;
	s->stats.step_groups = 0, s->stats.step_rows_most = 0;
	for (int i = 0; i < s->n_lanes; i++) {
		struct model_pp_stats ps;

		model_pp_stats(s->lanes[i].m, &ps);
		s->stats.pp_microbatches += ps.microbatches, s->stats.pp_waves += ps.waves;
		s->stats.pp_busy_waves += ps.busy_waves;
		s->stats.step_groups += s->lanes[i].groups;
		if (s->lanes[i].most > s->stats.step_rows_most)
			s->stats.step_rows_most = s->lanes[i].most;
	}
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
	for (int i = 0; i < s->n_lanes; i++)	/* learned draft slots change between steps */
		model_assist_sync(s->lanes[i].m);
	prefill(s, s->act, n);
	for (int i = 0; i < s->n_lanes; i++)
		decode(s, i, s->act, n);
	pthread_mutex_lock(&s->mu);
	reap(s);
	for (int i = 0; i < s->n_lanes; i++)
		if (s->lanes[i].pc != NULL)
			lane_prefix_stats(&s->lanes[i]);
	pp_counts(s);
	left = s->n_run + s->n_queued;
	pthread_mutex_unlock(&s->mu);
	return left;
}
