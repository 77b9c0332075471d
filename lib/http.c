#include "http.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "util.h"

static int
fail(int *status, int code, char *err, const char *why)
{
	*status = code;
	util_err(err, "%s", why);
	return -1;
}

/* The end of the header block (after its blank line) in buf[len], or 0. */
static size_t
head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static int
is_tchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Cut the line at *p (ending in LF, maybe CRLF); returns it, *p past it. */
static char *
next_line(char **p)
{
	char *s = *p, *nl = strchr(s, '\n');

	*nl = '\0';
	if (nl > s && nl[-1] == '\r')
		nl[-1] = '\0';
	*p = nl + 1;
	return s;
}

static int
request_line(char *line, struct http_req *req, int *status, char *err)
{
	char *sp1 = strchr(line, ' '), *sp2, *v;
	size_t ml, tl;

	if (sp1 == NULL || (sp2 = strchr(sp1 + 1, ' ')) == NULL)
		return fail(status, 400, err, "malformed request line");
	ml = sp1 - line, tl = sp2 - sp1 - 1, v = sp2 + 1;
	if (ml == 0 || tl == 0)
		return fail(status, 400, err, "malformed request line");
	if (ml >= sizeof req->method)
		return fail(status, 501, err, "method not implemented");
	for (size_t i = 0; i < ml; i++)
		if (!is_tchar((unsigned char)line[i]))
			return fail(status, 400, err, "malformed method");
	if (tl >= sizeof req->target)
		return fail(status, 414, err, "request target too long");
	for (size_t i = 0; i < tl; i++)
		if ((unsigned char)sp1[1 + i] <= ' ' || sp1[1 + i] == 0x7f)
			return fail(status, 400, err, "malformed request target");
	if (strncmp(v, "HTTP/1.", 7) != 0 || v[7] < '0' || v[7] > '9' || v[8] != '\0') {
		if (strncmp(v, "HTTP/", 5) == 0 && v[5] >= '2' && v[5] <= '9')
			return fail(status, 505, err, "HTTP version not supported");
		return fail(status, 400, err, "malformed HTTP version");
	}
	memcpy(req->method, line, ml);
	req->method[ml] = '\0';
	memcpy(req->target, sp1 + 1, tl);
	req->target[tl] = '\0';
	req->minor = v[7] - '0';
	return 0;
}

static char *
trim(char *s)
{
	size_t n;

	while (*s == ' ' || *s == '\t')
		s++;
	n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
	return s;
}

static int
header_line(char *line, struct http_req *req, int *status, char *err)
{
	char *colon = strchr(line, ':');

	if (line[0] == ' ' || line[0] == '\t')
		return fail(status, 400, err, "obsolete header line folding");
	if (colon == NULL || colon == line)
		return fail(status, 400, err, "malformed header line");
	for (char *c = line; c < colon; c++)
		if (!is_tchar((unsigned char)*c))
			return fail(status, 400, err, "malformed header name");
	if (req->nhdr == HTTP_MAX_HEADERS)
		return fail(status, 431, err, "too many header fields");
	*colon = '\0';
	req->hname[req->nhdr] = line;
	req->hval[req->nhdr] = trim(colon + 1);
	for (char *c = req->hval[req->nhdr]; *c; c++)
		if (((unsigned char)*c < ' ' && *c != '\t') || *c == 0x7f)
			return fail(status, 400, err, "control character in a header value");
	req->nhdr++;
	return 0;
}

const char *
http_header(const struct http_req *req, const char *name)
{
	for (size_t i = req->nhdr; i-- > 0;)
		if (strcasecmp(req->hname[i], name) == 0)
			return req->hval[i];
	return NULL;
}

/* Content-Length (every occurrence must agree) into *n; -1 on a bad one. */
static int
content_length(const struct http_req *req, size_t *n, int *status, char *err)
{
	int seen = 0;

	*n = 0;
	for (size_t i = 0; i < req->nhdr; i++) {
		uint64_t v = 0;
		const char *s = req->hval[i];

		if (strcasecmp(req->hname[i], "Content-Length") != 0)
			continue;
		if (*s == '\0')
			return fail(status, 400, err, "malformed Content-Length");
		for (; *s; s++) {
			if (*s < '0' || *s > '9')
				return fail(status, 400, err, "malformed Content-Length");
			if (v > (UINT64_MAX - 9) / 10)
				return fail(status, 413, err, "request body too large");
			v = v * 10 + (*s - '0');
		}
		if (seen && v != *n)
			return fail(status, 400, err, "conflicting Content-Length fields");
		*n = v, seen = 1;
	}
	return 0;
}

static void
connection(struct http_req *req)
{
	const char *c = http_header(req, "Connection");

	req->keep_alive = req->minor >= 1;
	if (c != NULL && strcasestr(c, "close") != NULL)
		req->keep_alive = 0;
	else if (c != NULL && strcasestr(c, "keep-alive") != NULL)
		req->keep_alive = 1;
}

long
http_parse(const char *buf, size_t len, const struct http_limits *lim, struct http_req *req,
    int *status, char *err)
{
	size_t max_head = lim->max_header < HTTP_HEAD_MAX ? lim->max_header : HTTP_HEAD_MAX;
	size_t he = head_end(buf, len < max_head ? len : max_head), blen;
	char *p;

	*status = 0;
	if (he == 0)
		return len >= max_head ? fail(status, 431, err, "request header too large") : 0;
	if (memchr(buf, '\0', he) != NULL)
		return fail(status, 400, err, "NUL byte in the request header");
	memset(req, 0, offsetof(struct http_req, head));
	memcpy(req->head, buf, he);
	req->head[he] = '\0';
	p = req->head;
	while (*p == '\r' || *p == '\n')	/* empty lines before a request are allowed */
		p++;
	if (*p == '\0')
		return fail(status, 400, err, "empty request");
	if (request_line(next_line(&p), req, status, err) != 0)
		return -1;
	while (*p != '\0' && *p != '\r' && *p != '\n')
		if (header_line(next_line(&p), req, status, err) != 0)
			return -1;
	if (http_header(req, "Transfer-Encoding") != NULL)
		return fail(status, 411, err, "chunked request bodies are not supported: send "
		    "Content-Length");
	if (content_length(req, &blen, status, err) != 0)
		return -1;
	if (blen > lim->max_body)
		return fail(status, 413, err, "request body too large");
	connection(req);
	if (len - he < blen)
		return 0;
	req->body = buf + he;
	req->body_len = blen;
	return (long)(he + blen);
}

int
http_write_deadline(int fd, double s)
{
	struct timeval tv = { (time_t)s, (suseconds_t)((s - (time_t)s) * 1e6) };

	return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int
http_write(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			errno = ETIMEDOUT;	/* SO_SNDTIMEO: nothing went out in time */
		else if (w == 0)
			errno = EPIPE;
		if (w <= 0)
			return -1;
		p += w, n -= w;
	}
	return 0;
}

/*
 * Wait until fd is readable or the deadline (util_now() time, 0 none)
 * passes: 1 readable, 0 past it, -1 a poll error.
 */
static int
wait_readable(int fd, double deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		double left = deadline > 0 ? deadline - util_now() : 0;
		int rc;

		if (deadline > 0 && left <= 0)
			return 0;
		rc = poll(&p, 1, deadline > 0 ? (int)(left * 1000) + 1 : -1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc != 0)
			return rc > 0 ? 1 : -1;
	}
}

/* The deadline of the phase buf[have] is in, from *t_head (the first
 * byte's time, set here) and *t_body (the header's end, set here). */
static double
deadline(const char *buf, size_t have, const struct http_limits *lim, double *t_head,
    double *t_body)
{
	size_t max_head = lim->max_header < HTTP_HEAD_MAX ? lim->max_header : HTTP_HEAD_MAX;

	if (have == 0 && *t_head == 0)
		return lim->idle_s > 0 ? util_now() + lim->idle_s : 0;
	if (*t_head == 0)
		*t_head = util_now();
	if (*t_body == 0 && head_end(buf, have < max_head ? have : max_head) != 0)
		*t_body = util_now();
	if (*t_body == 0)
		return lim->header_s > 0 ? *t_head + lim->header_s : 0;
	return lim->body_s > 0 ? *t_body + lim->body_s : 0;
}

/* Room for more bytes in *buf: 0, or -1 with 413. */
static int
grow(char **buf, size_t *cap, size_t have, const struct http_limits *lim, int *status,
    char *err)
{
	size_t most = lim->max_header + lim->max_body + 1, nc = *cap ? *cap * 2 : 65536;
	char *nb;

	if (have < *cap)
		return 0;
	if (nc > most)
		nc = most;
	if (nc <= *cap || (nb = realloc(*buf, nc)) == NULL)
		return fail(status, 413, err, "request too large");
	*buf = nb, *cap = nc;
	return 0;
}

long
http_read(int fd, char **buf, size_t *cap, size_t *have, const struct http_limits *lim,
    struct http_req *req, int *status, char *err)
{
	double t_head = lim->idle_s < 0 ? util_now() : 0, t_body = 0;

	for (;;) {
		long n = *have ? http_parse(*buf, *have, lim, req, status, err) : 0;
		double end = deadline(*buf, *have, lim, &t_head, &t_body);
		ssize_t got;
		int w;

		if (n != 0)
			return n;
		if (grow(buf, cap, *have, lim, status, err) != 0)
			return -1;
		if ((w = wait_readable(fd, end)) == 0 && *have == 0 && lim->idle_s >= 0)
			return *status = 0, 0;
		if (w == 0)
			return fail(status, 408, err, t_body == 0 ? "request header timed out" :
			    "request body timed out");
		got = w < 0 ? -1 : read(fd, *buf + *have, *cap - *have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			*status = 0;
			if (got == 0 && *have == 0)
				return 0;
			util_err(err, "connection closed mid-request");
			return -1;
		}
		*have += got;
	}
}

const char *
http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}
