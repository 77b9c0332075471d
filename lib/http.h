/*
 * http: an HTTP/1.1 request parser for serve (request line, headers,
 * Content-Length bodies; chunked request bodies are refused with 411),
 * and the reader that fills it from a socket.  Bytes come from untrusted
 * clients: every length is bounded and every failure is a 4xx status
 * with a reason, never a crash.
 */
#ifndef MEMRA_HTTP_H
#define MEMRA_HTTP_H

#include <stddef.h>

#define HTTP_MAX_HEADERS 64
#define HTTP_HEAD_MAX 16384	/* bytes of request line + headers, at most */

struct http_req {
	char	method[16];
	char	target[1024];	/* the request target as sent */
	int	minor;		/* HTTP/1.<minor> */
	int	keep_alive;	/* 1 unless Connection: close (or HTTP/1.0 without keep-alive) */
	size_t	nhdr;
	char	*hname[HTTP_MAX_HEADERS];	/* point into head */
	char	*hval[HTTP_MAX_HEADERS];
	char	head[HTTP_HEAD_MAX + 1];	/* a copy of the header, split in place */
	const char *body;	/* [body_len] bytes, inside the caller's buffer */
	size_t	body_len;
};

struct http_limits {
	size_t	max_header;	/* bytes of request line + headers (<= HTTP_HEAD_MAX) */
	size_t	max_body;	/* bytes of body */
	/* http_read's deadlines in seconds, 0 none: each whole, never reset by a byte */
	double	idle_s;		/* for a request's first byte; < 0: none apart, the
				 * header's deadline runs from the call (a new connection) */
	double	header_s;	/* from its first byte to the end of its header */
	double	body_s;		/* from the end of its header to the end of its body */
};

/*
 * Parse one request at the start of buf[len] (left unchanged: the header
 * is copied into req->head).
 * Returns the bytes the request takes (> 0) when complete, 0 when more
 * bytes are needed, or -1 with the HTTP status (400, 405, 411, 413, 414,
 * 431, 501, 505) in *status and the reason in err (UTIL_ERRLEN).
 */
long	http_parse(const char *buf, size_t len, const struct http_limits *lim, struct http_req *req,
	    int *status, char *err);

/* The value of header name (case-insensitive), or NULL. */
const char *http_header(const struct http_req *req, const char *name);

/*
 * Read one request from socket fd into *buf (grown as needed, *cap its
 * size; *have bytes already held, left over from the previous request on
 * the connection), within lim's deadlines (bytes already held count as a
 * first byte arriving now).  Returns the request's length as http_parse
 * does, 0 on a clean end of stream or idle_s passing before any byte, or
 * -1 with *status (408 past header_s or body_s; 0 when the connection
 * failed or closed mid-request) and err.
 */
long	http_read(int fd, char **buf, size_t *cap, size_t *have, const struct http_limits *lim,
	    struct http_req *req, int *status, char *err);

/*
 * The write deadline of socket fd: a send that can write nothing for s
 * seconds (the client stopped reading and the buffers are full) gives up
 * (SO_SNDTIMEO); 0 none.  0, or -1 with errno.
 */
int	http_write_deadline(int fd, double s);

/*
 * Write p[n] to socket fd (no SIGPIPE): 0, or -1 with errno: ETIMEDOUT
 * when the write deadline passed with bytes left to write (each send
 * waits for it anew once bytes went out), else the connection's failure.
 */
int	http_write(int fd, const char *p, size_t n);

/* The reason phrase of a status code ("OK", "Bad Request", ...). */
const char *http_reason(int status);

#endif
