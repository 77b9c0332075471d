/*
 * account: the server's accounting of its requests; see account.h.
 */
#include "account.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "metrics.h"
#include "prefix.h"
#include "schedule.h"
#include "spec.h"
#include "util.h"

/* The handles of serve's metric families (fams lists them). */
struct handles {
	int	req, prompt, completion, cached, ttft, itl, dur, queue, running, inflight;
	int	draining, rounds, drafted, accepted, steps, gen, prefill, busy, limited;
	int	mem_used, mem_total, cpu, rss, vsize, fds, max_fds, start;
	int	pc_bytes, pc_budget, pc_lookups, pc_hits, pc_hit_tokens, pc_evict, reused, parked;
	int	pc_blocks, pc_snaps;
	int	conns, conns_refused, timed_out, stalled;
	int	pp_mb, pp_waves, pp_busy;
};

/* A model served. */
struct model_entry {
	const char *name;
	int	lane;
};

struct account {
	struct account_config c;
	struct model_entry *models;	/* [n_models] */
	int	n_models;
	struct metrics *m;
	struct handles h;
	pthread_mutex_t mu;	/* next_id */
	long	next_id;
	pthread_mutex_t scrape;	/* one scrape at a time syncs the counters */
	_Atomic size_t mem_free, mem_all;	/* the device's, sampled by the worker */
	atomic_int inflight, draining;	/* requests being answered; 1 after SIGTERM/SIGINT */
	atomic_int conns;	/* connections open */
};

static const double ttft_b[] = { 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
static const double itl_b[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
    2.5 };
static const double dur_b[] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600 };

static const struct fam {
	size_t	off;		/* of the handle in struct handles */
	enum metrics_type t;
	const char *name, *labels, *help;
	const double *b;
	int	nb;
} fams[] = {
#define C METRICS_COUNTER
#define G METRICS_GAUGE
#define H METRICS_HISTOGRAM
#define F(f) offsetof(struct handles, f)
	{ F(req), C, "memra_requests_total", "endpoint,status", "HTTP requests answered, by "
	    "endpoint and status", NULL, 0 },
	{ F(limited), C, "memra_rate_limited_total", "limit", "Requests refused with 429, by the "
	    "limit that held them (requests, tokens)", NULL, 0 },
	{ F(prompt), C, "memra_prompt_tokens_total", "model",
	    "Prompt tokens of generation requests", NULL, 0 },
	{ F(completion), C, "memra_completion_tokens_total", "model", "Tokens generated", NULL, 0 },
	{ F(cached), C, "memra_cached_tokens_total", "model", "Prompt tokens served from the prefix "
	    "cache", NULL, 0 },
	{ F(ttft), H, "memra_time_to_first_token_seconds", "model", "Seconds from a request's "
	    "arrival to its first token", ttft_b, sizeof ttft_b / sizeof *ttft_b },
	{ F(itl), H, "memra_inter_token_latency_seconds", "model", "A request's mean seconds "
	    "between tokens after the first", itl_b, sizeof itl_b / sizeof *itl_b },
	{ F(dur), H, "memra_request_duration_seconds", "model", "Seconds from a generation "
	    "request's arrival to its last byte", dur_b, sizeof dur_b / sizeof *dur_b },
	{ F(queue), G, "memra_queue_depth", "", "Requests waiting for a session", NULL, 0 },
	{ F(running), G, "memra_running_sessions", "", "Sessions generating", NULL, 0 },
	{ F(inflight), G, "memra_requests_in_flight", "", "Requests being answered", NULL, 0 },
	{ F(conns), G, "memra_connections_open", "", "Client connections open (each its thread)",
	    NULL, 0 },
	{ F(conns_refused), C, "memra_connections_refused_total", "", "Connections refused with "
	    "503: past MEMRA_MAX_CONNECTIONS, or no thread for one", NULL, 0 },
	{ F(timed_out), C, "memra_requests_timed_out_total", "", "Requests answered 408: their "
	    "header or body not complete within its deadline", NULL, 0 },
	{ F(stalled), C, "memra_write_timeouts_total", "", "Replies given up: their client read "
	    "nothing for MEMRA_WRITE_TIMEOUT_S (its sessions cancelled)", NULL, 0 },
	{ F(draining), G, "memra_draining", "",
	    "1 while the server drains after SIGTERM or SIGINT", NULL, 0 },
	{ F(steps), C, "memra_sched_steps_total", "", "Scheduler steps", NULL, 0 },
	{ F(gen), C, "memra_sched_tokens_total", "", "Tokens the scheduler emitted", NULL, 0 },
	{ F(prefill), C, "memra_sched_prefill_tokens_total", "", "Prompt tokens prefilled", NULL, 0 },
	{ F(busy), C, "memra_sched_refused_total", "", "Requests refused as busy (503)", NULL, 0 },
	{ F(rounds), C, "memra_spec_rounds_total", "k", "Speculative verify rounds, by the drafts "
	    "k of the round", NULL, 0 },
	{ F(drafted), C, "memra_spec_drafted_tokens_total", "k", "Draft tokens verified, by k", NULL, 0 },
	{ F(accepted), C, "memra_spec_accepted_tokens_total", "k",
	    "Draft tokens accepted, by k", NULL, 0 },
	{ F(pc_bytes), G, "memra_prefix_cache_bytes", "model", "Bytes of the prefix cache's blocks "
	    "and snapshots in use", NULL, 0 },
	{ F(pc_blocks), G, "memra_prefix_cache_blocks", "model", "Prefix cache blocks held (KV "
	    "rows of MEMRA_PREFIX_BLOCK tokens)", NULL, 0 },
	{ F(pc_snaps), G, "memra_prefix_cache_snapshots", "model", "Prefix cache blocks that hold a "
	    "recurrent state snapshot (a request can resume at their end)", NULL, 0 },
	{ F(pc_budget), G, "memra_prefix_cache_budget_bytes", "model", "The prefix cache's "
	    "allocation (MEMRA_PREFIX_CACHE_MB)", NULL, 0 },
	{ F(pc_lookups), C, "memra_prefix_cache_lookups_total", "model", "Prefix cache lookups",
	    NULL, 0 },
	{ F(pc_hits), C, "memra_prefix_cache_hits_total", "model", "Prefix cache lookups that "
	    "found a cached prefix", NULL, 0 },
	{ F(pc_hit_tokens), C, "memra_prefix_cache_hit_tokens_total", "model", "Prompt tokens the "
	    "prefix cache's hits covered", NULL, 0 },
	{ F(pc_evict), C, "memra_prefix_cache_evictions_total", "model", "Prefix cache blocks "
	    "evicted", NULL, 0 },
	{ F(pp_mb), C, "memra_pp_microbatches_total", "", "Micro-batches a split model's "
	    "forwards of two or more ran through its pipeline stages (MEMRA_PP_STAGES)", NULL, 0 },
	{ F(pp_waves), C, "memra_pp_waves_total", "", "Waves of those forwards (in wave t stage s "
	    "works on micro-batch t - s)", NULL, 0 },
	{ F(pp_busy), C, "memra_pp_overlap_waves_total", "", "Waves in which two or more stages "
	    "had work (on GPUs of their own, at once)", NULL, 0 },
	{ F(reused), C, "memra_reuse_pool_resumed_total", "", "Requests resumed from a parked "
	    "conversation (MEMRA_REUSE_POOL)", NULL, 0 },
	{ F(parked), G, "memra_reuse_pool_parked", "", "Session slots holding a parked "
	    "conversation", NULL, 0 },
	{ F(mem_used), G, "memra_device_memory_used_bytes", "", "Device memory in use (total less "
	    "free; the host's on the CPU), sampled at boot and when the server goes idle", NULL, 0 },
	{ F(mem_total), G, "memra_device_memory_total_bytes", "", "Device memory in all", NULL, 0 },
	{ F(cpu), C, "process_cpu_seconds_total", "",
	    "User and system CPU time spent in seconds", NULL, 0 },
	{ F(rss), G, "process_resident_memory_bytes", "", "Resident memory size in bytes", NULL, 0 },
	{ F(vsize), G, "process_virtual_memory_bytes", "", "Virtual memory size in bytes", NULL, 0 },
	{ F(fds), G, "process_open_fds", "", "Number of open file descriptors", NULL, 0 },
	{ F(max_fds), G, "process_max_fds", "", "Maximum number of open file descriptors", NULL, 0 },
	{ F(start), G, "process_start_time_seconds", "", "Start time of the process since unix "
	    "epoch in seconds", NULL, 0 },
#undef C
#undef G
#undef H
#undef F
};

struct account *
account_new(const struct account_config *c, char *err)
{
	struct account *a = calloc(1, sizeof *a);

	if (a == NULL || (a->m = metrics_new()) == NULL) {
		account_free(a);
		util_err(err, "out of memory");
		return NULL;
	}
	a->c = *c;
	pthread_mutex_init(&a->mu, NULL);
	pthread_mutex_init(&a->scrape, NULL);
	for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) {
		const struct fam *f = &fams[i];
		int h = metrics_family(a->m, f->t, f->name, f->help, f->labels, f->b, f->nb);

		if (h < 0) {
			util_err(err, "metrics: '%s': cannot register", f->name);
			account_free(a);
			return NULL;
		}
		*(int *)((char *)&a->h + f->off) = h;
	}
	return a;
}

int
account_add_model(struct account *a, const char *name, int lane)
{
	struct model_entry *m = realloc(a->models, (a->n_models + 1) * sizeof *m);
	const char *v[] = { name };

	if (m == NULL)
		return -1;
	a->models = m;
	a->models[a->n_models++] = (struct model_entry){ name, lane };
	if (metrics_add(a->m, a->h.prompt, v, 0) != 0 || metrics_add(a->m, a->h.completion, v, 0) ||
	    metrics_add(a->m, a->h.cached, v, 0) != 0)
		return -1;
	return 0;
}

void
account_free(struct account *a)
{
	if (a == NULL)
		return;
	metrics_free(a->m);
	free(a->models), free(a);
}

void
account_mem(struct account *a, size_t fr, size_t all)
{
	a->mem_free = fr;
	a->mem_all = all;
}

void
account_drain(struct account *a)
{
	a->draining = 1;
}

int
account_draining(const struct account *a)
{
	return a->draining;
}

int
account_inflight(const struct account *a)
{
	return a->inflight;
}

/* Counter f (labels v) up to x, a total kept elsewhere. */
static void
sync_ctr(struct metrics *m, int f, const char *const *v, double x)
{
	double d = x - metrics_get(m, f, v);

	if (d > 0)
		metrics_add(m, f, v, d);
}

/* The scheduler's numbers into the metrics. */
static void
sync_sched(struct account *a, struct sched *sc)
{
	struct metrics *m = a->m;
	const struct handles *h = &a->h;
	struct sched_stats st;

	sched_stats(sc, &st);
	metrics_set(m, h->queue, NULL, st.queued);
	metrics_set(m, h->running, NULL, st.running);
	sync_ctr(m, h->steps, NULL, st.steps), sync_ctr(m, h->gen, NULL, st.tokens);
	sync_ctr(m, h->prefill, NULL, st.prefill_tokens);
	sync_ctr(m, h->busy, NULL, st.refused);
	for (int k = 1; k <= SPEC_KMAX; k++) {
		char kb[8];
		const char *v[] = { kb };

		if (st.rounds_k[k] == 0)
			continue;
		snprintf(kb, sizeof kb, "%d", k);
		sync_ctr(m, h->rounds, v, st.rounds_k[k]);
		sync_ctr(m, h->drafted, v, (double)k * st.rounds_k[k]);
		sync_ctr(m, h->accepted, v, st.accepted_k[k]);
	}
	sync_ctr(m, h->reused, NULL, st.reused);
	metrics_set(m, h->parked, NULL, st.parked);
	sync_ctr(m, h->pp_mb, NULL, st.pp_microbatches);
	sync_ctr(m, h->pp_waves, NULL, st.pp_waves);
	sync_ctr(m, h->pp_busy, NULL, st.pp_busy_waves);
}

/* Each model's prefix cache's numbers into the metrics. */
static void
sync_prefix(struct account *a, struct sched *sc)
{
	struct metrics *m = a->m;
	const struct handles *h = &a->h;

	for (int i = 0; i < a->n_models; i++) {
		struct prefix_stats ps;
		const char *v[] = { a->models[i].name };

		if (sched_prefix_stats(sc, a->models[i].lane, &ps) != 0)
			continue;
		metrics_set(m, h->pc_bytes, v, (double)ps.bytes);
		metrics_set(m, h->pc_blocks, v, (double)ps.blocks);
		metrics_set(m, h->pc_snaps, v, (double)ps.snaps);
		metrics_set(m, h->pc_budget, v, (double)ps.arena);
		sync_ctr(m, h->pc_lookups, v, ps.lookups), sync_ctr(m, h->pc_hits, v, ps.hits);
		sync_ctr(m, h->pc_hit_tokens, v, ps.hit_tokens);
		sync_ctr(m, h->pc_evict, v, ps.evictions);
	}
}

/* The numbers kept elsewhere (scheduler, device, /proc) into the metrics. */
static void
sync_all(struct account *a, struct sched *sc)
{
	struct metrics *m = a->m;
	const struct handles *h = &a->h;
	struct metrics_proc p;
	size_t fr = a->mem_free, all = a->mem_all;

	if (sc != NULL)
		sync_sched(a, sc);
	metrics_set(m, h->inflight, NULL, a->inflight);
	metrics_set(m, h->conns, NULL, a->conns);
	metrics_set(m, h->draining, NULL, a->draining);
	if (sc != NULL)
		sync_prefix(a, sc);
	metrics_set(m, h->mem_used, NULL, (double)(all - fr));
	metrics_set(m, h->mem_total, NULL, (double)all);
	if (metrics_proc_read(&p) == 0) {
		sync_ctr(m, h->cpu, NULL, p.cpu_seconds);
		metrics_set(m, h->rss, NULL, p.rss_bytes);
		metrics_set(m, h->vsize, NULL, p.vsize_bytes);
		metrics_set(m, h->fds, NULL, p.open_fds);
		metrics_set(m, h->max_fds, NULL, p.max_fds);
		metrics_set(m, h->start, NULL, p.start_time);
	}
}

char *
account_scrape(struct account *a, struct sched *sc, size_t *len)
{
	char *b;

	pthread_mutex_lock(&a->scrape);
	sync_all(a, sc);
	b = metrics_render(a->m, len);
	pthread_mutex_unlock(&a->scrape);
	return b;
}

int
account_key(struct account *a, struct account_req *r, const char *h, struct account_refusal *f)
{
	r->key = AUTH_ANON;
	if (auth_count(a->c.auth) == 0)
		return 0;
	if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0)
		r->key = auth_find(a->c.auth, h + 7, strlen(h + 7));
	else
		r->key = -1;
	if (r->key >= 0)
		return 0;
	r->status = 401;
	*f = (struct account_refusal){ .status = 401, .msg = "invalid or missing API key",
	    .type = "invalid_request_error", .code = "invalid_api_key", .xh = "" };
	return -1;
}

int
account_limit(struct account *a, struct account_req *r, struct account_refusal *f)
{
	struct auth_limits l = auth_limits(a->c.auth, r->key);
	double retry;
	enum auth_limit lim = auth_admit(a->c.auth, r->key, util_now(), &retry);
	const char *what = lim == AUTH_REQUESTS ? "requests" : "tokens";
	long secs = (long)ceil(retry);

	if (lim == AUTH_OK)
		return 0;
	secs = secs < 1 ? 1 : secs;
	*f = (struct account_refusal){ .status = 429, .type = what, .code = "rate_limit_exceeded" };
	snprintf(f->msg, sizeof f->msg, "rate limit reached for %s per minute (limit %ld): try "
	    "again in %ld s", what, lim == AUTH_REQUESTS ? l.rpm : l.tpm, secs);
	snprintf(f->xh, sizeof f->xh, "Retry-After: %ld\r\n", secs);
	metrics_add(a->m, a->h.limited, (const char *[]){ what }, 1);
	r->status = 429;
	return -1;
}

void
account_begin(struct account *a, struct account_req *r, const char *method)
{
	*r = (struct account_req){ .t0 = util_now(), .t_first = -1, .wait = -1, .key = AUTH_ANON,
	    .status = 200, .method = method, .endpoint = "-" };
	pthread_mutex_lock(&a->mu);
	r->id = ++a->next_id;
	pthread_mutex_unlock(&a->mu);
	a->inflight++;
}

/* A generation request's tokens and times into the metrics and its key's bucket. */
static void
count_generation(struct account *a, const struct account_req *r, double now, double ttft)
{
	struct metrics *m = a->m;
	const struct handles *h = &a->h;
	const char *v[] = { r->model };

	if (r->key >= 0)
		auth_charge(a->c.auth, r->key, (long)r->n_prompt + r->n_gen, now);
	metrics_add(m, h->prompt, v, r->n_prompt);
	metrics_add(m, h->cached, v, r->n_cached);
	metrics_add(m, h->completion, v, r->n_gen);
	if (ttft >= 0)
		metrics_observe(m, h->ttft, v, ttft);
	if (r->n_gen > 1 && ttft >= 0)
		metrics_observe(m, h->itl, v, (now - r->t_first) / (r->n_gen - 1));
	if (r->status == 200)
		metrics_observe(m, h->dur, v, now - r->t0);
}

void
account_end(struct account *a, struct account_req *r)
{
	double now = util_now(), ttft = r->t_first >= 0 ? r->t_first - r->t0 : -1;
	char st[8], *line = NULL;
	const char *ev[] = { r->endpoint, st };

	snprintf(st, sizeof st, "%d", r->status);
	metrics_add(a->m, a->h.req, ev, 1);
	if (r->model != NULL && r->n_prompt > 0)
		count_generation(a, r, now, ttft);
	if (r->stalled)
		metrics_add(a->m, a->h.stalled, NULL, 1);
	if (a->c.log != NULL && asprintf(&line, "request %ld: %s %s %s %d key=%s prompt=%zu "
	    "completion=%d queued %.2f s, first token %.2f s, %.2f s%s", r->id,
	    r->model ? r->model : "-", r->method, r->endpoint, r->status,
	    r->key >= 0 ? auth_label(a->c.auth, r->key) : "-", r->n_prompt, r->n_gen, r->wait,
	    ttft, now - r->t0, r->stalled ? " (write timeout: the client stopped reading)" :
	    r->gone ? " (client gone)" : "") >= 0) {
		a->c.log(a->c.log_arg, line);
		free(line);
	}
	a->inflight--;
}

void
account_refused(struct account *a, int status)
{
	struct account_req r;

	if (status == 408)
		metrics_add(a->m, a->h.timed_out, NULL, 1);
	account_begin(a, &r, "-");
	r.status = status;
	account_end(a, &r);
}

int
account_conn_open(struct account *a, int max)
{
	int n = atomic_fetch_add(&a->conns, 1);

	if (max <= 0 || n < max)
		return 0;
	account_conn_refused(a);
	return -1;
}

void
account_conn_refused(struct account *a)
{
	atomic_fetch_sub(&a->conns, 1);
	metrics_add(a->m, a->h.conns_refused, NULL, 1);
	account_refused(a, 503);
}

void
account_conn_close(struct account *a)
{
	atomic_fetch_sub(&a->conns, 1);
}
