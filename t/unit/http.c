#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "test.h"
#include "util.h"

static struct http_req req;
static const struct http_limits lim = { .max_header = 1024, .max_body = 64 };

static long
parse(const char *s, int *status, char *err)
{
	return http_parse(s, strlen(s), &lim, &req, status, err);
}

/* the status a complete but bad request gets */
static int
refused(const char *s)
{
	char err[UTIL_ERRLEN];
	int status;

	return parse(s, &status, err) == -1 ? status : 0;
}

TEST(a_get_parses_with_headers_case_insensitive)
{
	const char *s = "GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nX-Thing:  v  \r\n\r\nGET /next";
	char err[UTIL_ERRLEN];
	int status;

	CHECK_EQ_INT(parse(s, &status, err), strstr(s, "GET /next") - s);
	CHECK_EQ_STR(req.method, "GET");
	CHECK_EQ_STR(req.target, "/v1/models?x=1");
	CHECK_EQ_INT(req.minor, 1);
	CHECK_EQ_INT(req.keep_alive, 1);
	CHECK_EQ_STR(http_header(&req, "x-thing"), "v");
	CHECK(http_header(&req, "Content-Length") == NULL);
	CHECK_EQ_INT(req.body_len, 0);
}

TEST(a_body_needs_all_its_bytes)
{
	const char *s = "POST /v1/completions HTTP/1.1\nContent-Length: 5\nConnection: close\n\nhello";
	char err[UTIL_ERRLEN];
	int status;

	CHECK_EQ_INT(http_parse(s, strlen(s) - 1, &lim, &req, &status, err), 0);
	CHECK_EQ_INT(http_parse(s, strlen(s), &lim, &req, &status, err), strlen(s));
	CHECK_EQ_INT(req.body_len, 5);
	CHECK(memcmp(req.body, "hello", 5) == 0);
	CHECK_EQ_INT(req.keep_alive, 0);
	CHECK_EQ_INT(http_parse("GET / HTTP/1.1\r\nHost: a\r\n", 25, &lim, &req, &status, err), 0);
}

TEST(http_1_0_closes_unless_asked)
{
	char err[UTIL_ERRLEN];
	int status;

	CHECK(parse("GET / HTTP/1.0\r\n\r\n", &status, err) > 0);
	CHECK_EQ_INT(req.keep_alive, 0);
	CHECK(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &status, err) > 0);
	CHECK_EQ_INT(req.keep_alive, 1);
}

TEST(bad_requests_get_their_4xx)
{
	char big[2048];

	CHECK_EQ_INT(refused("GET /\r\n\r\n"), 400);
	CHECK_EQ_INT(refused("GET / HTTP/2.0\r\n\r\n"), 505);
	CHECK_EQ_INT(refused("GET / FTP/1.1\r\n\r\n"), 400);
	CHECK_EQ_INT(refused("G(T / HTTP/1.1\r\n\r\n"), 400);
	CHECK_EQ_INT(refused("GET / HTTP/1.1\r\nNo colon\r\n\r\n"), 400);
	CHECK_EQ_INT(refused("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"), 400);
	CHECK_EQ_INT(refused("GET / HTTP/1.1\r\nBad Name: b\r\n\r\n"), 400);
	CHECK_EQ_INT(refused("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
	CHECK_EQ_INT(refused("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"), 400);
	CHECK_EQ_INT(refused("POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n"), 413);
	CHECK_EQ_INT(refused("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"), 413);
	CHECK_EQ_INT(refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 411);
	CHECK_EQ_INT(refused("VERYLONGMETHODNAME / HTTP/1.1\r\n\r\n"), 501);
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	CHECK_EQ_INT(refused(big), 431);
	memcpy(big, "GET /", 5);
	strcpy(big + 1100, " HTTP/1.1\r\n\r\n");
	CHECK_EQ_INT(refused(big), 431);
}

TEST(reasons)
{
	CHECK_EQ_STR(http_reason(404), "Not Found");
	CHECK_EQ_STR(http_reason(503), "Service Unavailable");
}

/* http_read of what was written to a socket, within lim: its return, status and seconds */
static long
read_within(const char *sent, const struct http_limits *l, int *status, double *secs)
{
	struct http_req *r = malloc(sizeof *r);
	char *buf = NULL, err[UTIL_ERRLEN];
	size_t cap = 0, have = 0;
	int sv[2];
	long n;
	double t0 = util_now();

	if (r == NULL || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 ||
	    write(sv[1], sent, strlen(sent)) != (ssize_t)strlen(sent))
		return -2;
	n = http_read(sv[0], &buf, &cap, &have, l, r, status, err);
	*secs = util_now() - t0;
	close(sv[0]), close(sv[1]), free(buf), free(r);
	return n;
}

TEST(deadlines_are_whole_phases)
{
	struct http_limits l = { 1024, 64, 0.2, 0.2, 0.2 };
	double secs;
	int status;

	/* idle: nothing came, a quiet end */
	CHECK_EQ_INT(read_within("", &l, &status, &secs), 0);
	CHECK_EQ_INT(status, 0);
	CHECK(secs >= 0.19 && secs < 1);
	/* half a header */
	CHECK_EQ_INT(read_within("GET / HTTP/1.1\r\nHo", &l, &status, &secs), -1);
	CHECK_EQ_INT(status, 408);
	CHECK(secs >= 0.19 && secs < 1);
	/* half a body */
	CHECK_EQ_INT(read_within("POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc", &l, &status,
	    &secs), -1);
	CHECK_EQ_INT(status, 408);
	/* a new connection (idle_s < 0): nothing in header_s is a 408 */
	l.idle_s = -1;
	CHECK_EQ_INT(read_within("", &l, &status, &secs), -1);
	CHECK_EQ_INT(status, 408);
	/* complete: no wait */
	CHECK_EQ_INT(read_within("GET / HTTP/1.1\r\n\r\n", &l, &status, &secs), 18);
	CHECK(secs < 0.1);
}

/* The peer of a socket pair that reads everything until the end. */
static void *
drain(void *arg)
{
	char b[65536];

	while (read(*(int *)arg, b, sizeof b) > 0)
		;
	return NULL;
}

/* A reader that stops reading holds a write only for the deadline; one that
 * reads gets every byte; a peer gone is a failure, not a timeout. */
TEST(writes_give_up_when_nothing_goes_out_for_the_deadline)
{
	size_t n = 16 << 20;
	char *big = calloc(n, 1);
	int sv[2];
	double t0;
	pthread_t th;

	CHECK(big != NULL && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(http_write_deadline(sv[0], 0.3) == 0);
	t0 = util_now();
	CHECK(http_write(sv[0], big, n) == -1 && errno == ETIMEDOUT);	/* nobody reads */
	CHECK(util_now() - t0 >= 0.25 && util_now() - t0 < 5);
	pthread_create(&th, NULL, drain, &sv[1]);
	CHECK(http_write(sv[0], big, n) == 0);		/* it reads now */
	close(sv[0]);
	pthread_join(th, NULL);
	close(sv[1]);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	close(sv[1]);
	CHECK(http_write(sv[0], "x", 1) == -1 && errno == EPIPE);
	close(sv[0]);
	free(big);
}

int
main(void)
{
	RUN(a_get_parses_with_headers_case_insensitive);
	RUN(a_body_needs_all_its_bytes);
	RUN(http_1_0_closes_unless_asked);
	RUN(bad_requests_get_their_4xx);
	RUN(reasons);
	RUN(deadlines_are_whole_phases);
	RUN(writes_give_up_when_nothing_goes_out_for_the_deadline);
	return test_summary();
}
