/*
 * account: the server's accounting of its requests: each request's
 * record (its id, key, tokens, times), checked against its API key and
 * that key's rate limits (lib/auth), counted into serve's metric families
 * (lib/metrics) with the scheduler's, the device's and the process's
 * numbers, and told as one access log line.  The requests in flight and
 * whether the server drains are kept here too.
 *
 * No I/O of its own: the access log line goes to the caller's callback,
 * a refusal comes back as the parts of the response to send, and the
 * metrics page as text.  Thread-safe.
 */
#ifndef MEMRA_ACCOUNT_H
#define MEMRA_ACCOUNT_H

#include <stddef.h>

struct auth;
struct sched;

/* One request as the access log and the metrics see it. */
struct account_req {
	long	id;
	const char *method, *endpoint;	/* endpoint: a served path, "other" or "-" */
	const char *model;	/* NULL: none */
	int	status, key, gone;	/* key: auth's entry, -1 none matched */
	int	stalled;	/* its client stopped reading: a write passed its deadline
				 * (MEMRA_WRITE_TIMEOUT_S) and the reply was given up */
	size_t	n_prompt, n_cached;	/* n_cached: of them, not computed again */
	int	n_gen;
	double	t0, t_first, wait;	/* util_now() at arrival and first token (-1:
					 * none); seconds queued (-1: never admitted) */
};

struct account_config {
	struct auth *auth;	/* the keys and their limits; must outlive the account */
	/* Each request's access log line (no newline), as it ends. */
	void	(*log)(void *arg, const char *line);
	void	*log_arg;
};

struct account;

/*
 * The accounting of a server: serve's metric families registered.  NULL
 * with err (UTIL_ERRLEN) when out of memory.  account_free frees it (NULL
 * is a no-op).
 */
struct account *account_new(const struct account_config *c, char *err);
void	account_free(struct account *);

/* A model served: name (the metrics' model label; must outlive the
 * account) at lane in the scheduler, its token counters at zero.  0, or
 * -1 when out of memory. */
int	account_add_model(struct account *, const char *name, int lane);

/* A request begins: r set up (its id the next, status 200), counted in flight. */
void	account_begin(struct account *, struct account_req *r, const char *method);

/*
 * Request r ends: its tokens charged to its key, its metrics (requests by
 * endpoint and status; a generation's tokens, time to first token,
 * inter-token latency, duration; a stalled client's reply given up), its
 * access log line, then it is no longer in flight.
 */
void	account_end(struct account *, struct account_req *r);

/* A request the HTTP parser refused with status: begun, logged, counted
 * (a 408 in the timed-out requests too). */
void	account_refused(struct account *, int status);

/*
 * A connection opens: 0 when fewer than max (0: no cap) are open, counted
 * open; -1 at the cap, counted as refused and logged as a 503 request.
 * account_conn_close closes one that opened.
 */
int	account_conn_open(struct account *, int max);
void	account_conn_close(struct account *);

/* A connection that opened but gets no thread: closed (account_conn_close),
 * counted as refused and logged as a 503 request. */
void	account_conn_refused(struct account *);

/* A refusal in OpenAI's error shape: status, message, type and code, and
 * the extra header lines (CRLF-terminated, "" for none). */
struct account_refusal {
	int	status;
	char	msg[160];
	const char *type, *code;
	char	xh[64];
};

/*
 * The API key of request r from its Authorization header value (NULL:
 * none): 0 with r->key set (AUTH_ANON when the server has no keys), or -1
 * with r->status 401 and the refusal in *f.
 */
int	account_key(struct account *, struct account_req *r, const char *authorization,
	    struct account_refusal *f);

/* The key's rate limits for generation request r now: 0, or -1 with
 * r->status 429, counted, and the refusal (Retry-After) in *f. */
int	account_limit(struct account *, struct account_req *r, struct account_refusal *f);

/* The device's memory, free and in all (bytes), as last sampled. */
void	account_mem(struct account *, size_t free, size_t all);

/* The server drains (after SIGTERM or SIGINT); 1 once it does. */
void	account_drain(struct account *);
int	account_draining(const struct account *);

/* The requests in flight (begun and not ended). */
int	account_inflight(const struct account *);

/*
 * The metrics page (Prometheus's text format), the numbers kept elsewhere
 * synced first: sc's (NULL: none) queue, sessions, steps, speculation and
 * each model's prefix cache, the device's memory and /proc/self's.
 * malloc'd, its length in *len; NULL when out of memory.
 */
char	*account_scrape(struct account *, struct sched *sc, size_t *len);

#endif
