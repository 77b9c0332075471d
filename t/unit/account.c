/*
 * account: requests begun and ended without a server: their access log
 * lines, the metrics page they make, API keys and rate limits.
 */
#include <stdlib.h>

#include "account.h"
#include "auth.h"
#include "test.h"
#include "util.h"

struct log {
	char	last[1024];
	int	n;
};

static void
log_line(void *arg, const char *line)
{
	struct log *l = arg;

	snprintf(l->last, sizeof l->last, "%s", line);
	l->n++;
}

static struct account *
acct_of(struct auth *au, struct log *l)
{
	char err[UTIL_ERRLEN];
	struct account *a = account_new(&(struct account_config){ .auth = au, .log = log_line,
	    .log_arg = l }, err);

	CHECK(a != NULL);
	return a;
}

/* 1 when the metrics page has line (a whole line). */
static int
page_has(struct account *a, const char *line)
{
	size_t n, ll = strlen(line);
	char *b = account_scrape(a, NULL, &n), *p = b;
	int found = 0;

	for (; p != NULL && (p = strstr(p, line)) != NULL; p++)
		if ((p == b || p[-1] == '\n') && p[ll] == '\n')
			found = 1;
	if (!found)
		FAILF("no line '%s' on the metrics page", line);
	free(b);
	return found;
}

TEST(a_generation_request_is_one_log_line_and_its_counts)
{
	struct auth *au = auth_new(&(struct auth_limits){ 0, 0 });
	struct log l = { 0 };
	struct account *a = acct_of(au, &l);
	struct account_req r;

	if (a == NULL)
		return;
	CHECK_EQ_INT(account_add_model(a, "m", 0), 0);
	CHECK(page_has(a, "memra_prompt_tokens_total{model=\"m\"} 0"));
	account_begin(a, &r, "POST");
	CHECK_EQ_INT(r.id, 1);
	CHECK_EQ_INT(account_inflight(a), 1);
	r.endpoint = "/v1/chat/completions", r.model = "m", r.n_prompt = 5, r.n_cached = 2;
	r.n_gen = 3, r.wait = 0.25, r.t_first = r.t0 + 0.5;
	account_end(a, &r);
	CHECK_EQ_INT(account_inflight(a), 0);
	CHECK_EQ_INT(l.n, 1);
	CHECK(strncmp(l.last, "request 1: m POST /v1/chat/completions 200 key=- prompt=5 "
	    "completion=3 queued 0.25 s, first token 0.50 s, ", 93) == 0);
	CHECK(strstr(l.last, "client gone") == NULL);
	CHECK(page_has(a, "memra_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 1"));
	CHECK(page_has(a, "memra_prompt_tokens_total{model=\"m\"} 5"));
	CHECK(page_has(a, "memra_cached_tokens_total{model=\"m\"} 2"));
	CHECK(page_has(a, "memra_completion_tokens_total{model=\"m\"} 3"));
	CHECK(page_has(a, "memra_time_to_first_token_seconds_count{model=\"m\"} 1"));
	CHECK(page_has(a, "memra_requests_in_flight 0"));
	CHECK(page_has(a, "memra_write_timeouts_total 0"));
	/* a client that stopped reading: its line says so, a counter counts it */
	account_begin(a, &r, "POST");
	r.endpoint = "/v1/completions", r.model = "m", r.n_prompt = 2, r.n_gen = 40;
	r.gone = 1, r.stalled = 1;
	account_end(a, &r);
	CHECK(strstr(l.last, " (write timeout: the client stopped reading)") != NULL);
	CHECK(strstr(l.last, "client gone") == NULL);
	CHECK(page_has(a, "memra_write_timeouts_total 1"));
	account_free(a);
	auth_free(au);
}

TEST(a_refused_request_is_logged_and_counted_without_a_model)
{
	struct auth *au = auth_new(&(struct auth_limits){ 0, 0 });
	struct log l = { 0 };
	struct account *a = acct_of(au, &l);
	struct account_req r;

	if (a == NULL)
		return;
	account_begin(a, &r, "GET");
	account_refused(a, 400);
	CHECK_EQ_INT(account_inflight(a), 1);	/* the first is still in flight */
	CHECK(strncmp(l.last, "request 2: - - - 400 key=- prompt=0 completion=0 queued -1.00 s, "
	    "first token -1.00 s, ", 86) == 0);
	CHECK(page_has(a, "memra_requests_total{endpoint=\"-\",status=\"400\"} 1"));
	CHECK(page_has(a, "memra_draining 0"));
	account_drain(a);
	CHECK_EQ_INT(account_draining(a), 1);
	CHECK(page_has(a, "memra_draining 1"));
	account_end(a, &r);
	account_free(a);
	auth_free(au);
}

TEST(connections_past_the_cap_are_refused_and_timeouts_counted)
{
	struct auth *au = auth_new(&(struct auth_limits){ 0, 0 });
	struct log l = { 0 };
	struct account *a = acct_of(au, &l);

	if (a == NULL)
		return;
	CHECK_EQ_INT(account_conn_open(a, 2), 0);
	CHECK_EQ_INT(account_conn_open(a, 2), 0);
	CHECK_EQ_INT(account_conn_open(a, 2), -1);
	CHECK(page_has(a, "memra_connections_open 2"));
	CHECK(page_has(a, "memra_connections_refused_total 1"));
	CHECK(strncmp(l.last, "request 1: - - - 503 ", 21) == 0);
	account_conn_close(a);
	CHECK_EQ_INT(account_conn_open(a, 2), 0);
	account_refused(a, 408);
	CHECK(page_has(a, "memra_requests_timed_out_total 1"));
	CHECK(page_has(a, "memra_requests_total{endpoint=\"-\",status=\"408\"} 1"));
	CHECK_EQ_INT(account_inflight(a), 0);
	account_free(a);
	auth_free(au);
}

TEST(keys_a_wrong_or_missing_key_is_a_401_refusal)
{
	struct auth *au = auth_new(&(struct auth_limits){ 0, 0 });
	struct log l = { 0 };
	struct account *a = acct_of(au, &l);
	struct account_req r;
	struct account_refusal f;
	char err[UTIL_ERRLEN];

	if (a == NULL)
		return;
	account_begin(a, &r, "POST");
	CHECK_EQ_INT(account_key(a, &r, NULL, &f), 0);	/* no keys: anyone */
	CHECK_EQ_INT(r.key, AUTH_ANON);
	CHECK(auth_add_key(au, "sk-one", 6, "one", err) == 0);
	CHECK_EQ_INT(account_key(a, &r, "Bearer sk-two", &f), -1);
	CHECK_EQ_INT(r.status, 401);
	CHECK_EQ_INT(f.status, 401);
	CHECK_EQ_STR(f.msg, "invalid or missing API key");
	CHECK_EQ_STR(f.code, "invalid_api_key");
	CHECK_EQ_STR(f.xh, "");
	CHECK_EQ_INT(account_key(a, &r, NULL, &f), -1);
	r.status = 200;
	CHECK_EQ_INT(account_key(a, &r, "bearer sk-one", &f), 0);
	CHECK(r.key >= 1);
	account_end(a, &r);
	CHECK(strstr(l.last, " key=one ") != NULL);
	account_free(a);
	auth_free(au);
}

TEST(limits_past_a_keys_requests_a_minute_is_a_429_with_retry_after)
{
	struct auth *au = auth_new(&(struct auth_limits){ 1, 0 });
	struct log l = { 0 };
	struct account *a = acct_of(au, &l);
	struct account_req r;
	struct account_refusal f;

	if (a == NULL)
		return;
	account_begin(a, &r, "POST");
	CHECK_EQ_INT(account_limit(a, &r, &f), 0);
	CHECK_EQ_INT(account_limit(a, &r, &f), -1);
	CHECK_EQ_INT(r.status, 429);
	CHECK_EQ_INT(f.status, 429);
	CHECK_EQ_STR(f.type, "requests");
	CHECK_EQ_STR(f.code, "rate_limit_exceeded");
	CHECK(strncmp(f.msg, "rate limit reached for requests per minute (limit 1): try again in ",
	    67) == 0);
	CHECK(strncmp(f.xh, "Retry-After: ", 13) == 0 && strstr(f.xh, "\r\n") != NULL);
	CHECK(page_has(a, "memra_rate_limited_total{limit=\"requests\"} 1"));
	account_end(a, &r);
	account_free(a);
	auth_free(au);
}

int
main(void)
{
	RUN(a_generation_request_is_one_log_line_and_its_counts);
	RUN(a_refused_request_is_logged_and_counted_without_a_model);
	RUN(connections_past_the_cap_are_refused_and_timeouts_counted);
	RUN(keys_a_wrong_or_missing_key_is_a_401_refusal);
	RUN(limits_past_a_keys_requests_a_minute_is_a_429_with_retry_after);
	return test_summary();
}
