#include "hub_net.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* "scheme://host:port" of url into buf, lowercased, the default port filled in. */
static void
origin(const char *url, char *buf, size_t n)
{
	const char *s = strstr(url, "://"), *h, *e, *at, *br, *colon;
	size_t sl, hl, i;
	int port;

	buf[0] = '\0';
	if (s == NULL)
		return;
	sl = (size_t)(s - url);
	h = s + 3;
	e = h + strcspn(h, "/?#");
	if ((at = memchr(h, '@', (size_t)(e - h))) != NULL)
		h = at + 1;
	br = memchr(h, ']', (size_t)(e - h));
	colon = memchr(br ? br : h, ':', (size_t)(e - (br ? br : h)));
	hl = (size_t)((colon ? colon : e) - h);
	port = colon ? atoi(colon + 1) : (sl == 5 && strncasecmp(url, "https", 5) == 0) ? 443 : 80;
	snprintf(buf, n, "%.*s://%.*s:%d", (int)sl, url, (int)hl, h, port);
	for (i = 0; buf[i] != '\0'; i++)
		buf[i] = (char)tolower((unsigned char)buf[i]);
}

int
hub_net_same_origin(const char *a, const char *b)
{
	char oa[512], ob[512];

	if (a == NULL || b == NULL)
		return 0;
	origin(a, oa, sizeof oa);
	origin(b, ob, sizeof ob);
	return oa[0] != '\0' && strcmp(oa, ob) == 0;
}

#ifndef MEMRA_HAVE_CURL

int hub_net_available(void) { return 0; }
void hub_net_global_init(void) { }
void hub_net_global_cleanup(void) { }

int
hub_net_get(const struct hub_net *n, const char *url, char **body, size_t *len,
    struct hub_meta *m, char *err)
{
	return util_err(err, "hf: specs need a libcurl build (this one has none)");
}

int
hub_net_head(const struct hub_net *n, const char *url, struct hub_meta *m, char **location, char *err)
{
	return util_err(err, "hf: specs need a libcurl build (this one has none)");
}

int
hub_net_fetch(const struct hub_net *n, const char *url, const char *path, uint64_t size,
    char sha[65], char *err)
{
	return util_err(err, "hf: specs need a libcurl build (this one has none)");
}

#else

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sha256.h"

int hub_net_available(void) { return 1; }
void hub_net_global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }
void hub_net_global_cleanup(void) { curl_global_cleanup(); }

static void
say(const struct hub_net *n, const char *fmt, ...)
{
	char msg[UTIL_ERRLEN];
	va_list ap;

	if (n->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	n->log(n->arg, msg);
}

/* Sleep s seconds in short steps; -1 when cancelled meanwhile. */
static int
nap(const struct hub_net *n, double s)
{
	double end = util_now() + s;
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	while (util_now() < end) {
		if (n->cancel != NULL && *n->cancel)
			return -1;
		nanosleep(&ts, NULL);
	}
	return n->cancel != NULL && *n->cancel ? -1 : 0;
}

static double
backoff(int tries, int retry_after)
{
	double d = 0.25 * (double)(1 << (tries < 5 ? tries : 5));

	if (retry_after >= 0)
		return retry_after < 600 ? retry_after : 600;
	return d < 8 ? d : 8;
}

static int
retryable_code(long code)
{
	return code == 408 || code == 429 || code >= 500;
}

static int
retryable_curl(CURLcode e)
{
	switch (e) {
	case CURLE_COULDNT_CONNECT: case CURLE_COULDNT_RESOLVE_HOST: case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR: case CURLE_PARTIAL_FILE: case CURLE_GOT_NOTHING:
	case CURLE_OPERATION_TIMEDOUT: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return 1;
	default:
		return 0;
	}
}

static size_t
on_header(char *p, size_t sz, size_t nm, void *arg)
{
	hub_meta_header(arg, p, sz * nm);
	return sz * nm;
}

/* A handle for url with our headers; the token only for the endpoint's origin. */
static CURL *
easy(const struct hub_net *n, const char *url, struct curl_slist **hdrs)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;

	if (c == NULL)
		return NULL;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "memra-hub/1");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	h = curl_slist_append(h, "Accept-Encoding: identity");
	if (n->token != NULL && n->token[0] != '\0' && hub_net_same_origin(url, n->endpoint)) {
		size_t len = strlen(n->token) + 32;
		char *a = malloc(len);

		if (a != NULL) {
			snprintf(a, len, "Authorization: Bearer %s", n->token);
			h = curl_slist_append(h, a);
			memset(a, 0, len);
			free(a);
		}
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	*hdrs = h;
	return c;
}

struct sink {
	char	*buf;
	size_t	len, cap;
};

static size_t
sink_write(char *p, size_t sz, size_t nm, void *arg)
{
	struct sink *s = arg;
	size_t n = sz * nm;

	if (s->len + n + 1 > s->cap) {
		size_t cap = (s->len + n + 1) * 2;
		char *b;

		if (cap > ((size_t)64 << 20) || (b = realloc(s->buf, cap)) == NULL)
			return 0;	/* API answers are small: refuse a flood */
		s->buf = b;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	s->buf[s->len] = '\0';
	return n;
}

/*
 * One GET or HEAD with retries.  On return 0 the response (any status that
 * is not worth retrying) is in m, the body in s, a redirect target in *redir.
 */
static int
request(const struct hub_net *n, const char *url, int head, struct sink *s,
    struct hub_meta *m, char **redir, char *err)
{
	int tries;

	for (tries = 0;; tries++) {
		struct curl_slist *h = NULL;
		CURL *c = easy(n, url, &h);
		CURLcode rc;
		long code = 0;
		char *r = NULL;
		double d;

		if (c == NULL)
			return util_err(err, "%s: cannot start a transfer", url);
		hub_meta_reset(m);
		if (s != NULL)
			s->len = 0;
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(c, CURLOPT_HEADERDATA, m);
		if (head)
			curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
		else {
			curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
			curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
		}
		rc = curl_easy_perform(c);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
		m->status = (int)code;
		if (rc == CURLE_OK && redir != NULL && curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &r) == CURLE_OK &&
		    r != NULL) {
			free(*redir);
			*redir = strdup(r);
		}
		curl_easy_cleanup(c);
		curl_slist_free_all(h);
		if (rc == CURLE_OK && !retryable_code(code))
			return 0;
		if (rc != CURLE_OK && !retryable_curl(rc))
			return util_err(err, "%s: %s", url, curl_easy_strerror(rc));
		if (tries >= n->retries) {
			if (rc != CURLE_OK)
				return util_err(err, "%s: %s (gave up after %d retries)", url,
				    curl_easy_strerror(rc), n->retries);
			return util_err(err, "%s: HTTP %ld (gave up after %d retries)", url, code, n->retries);
		}
		d = backoff(tries, rc == CURLE_OK ? m->retry_after : -1);
		if (rc != CURLE_OK)
			say(n, "%s: %s; retry %d of %d in %.2gs", url, curl_easy_strerror(rc), tries + 1, n->retries, d);
		else
			say(n, "%s: HTTP %ld; retry %d of %d in %.2gs", url, code, tries + 1, n->retries, d);
		if (nap(n, d) != 0)
			return util_err(err, "%s: interrupted", url);
	}
}

static int
status_err(const char *what, const char *url, const struct hub_meta *m, char *err)
{
	const char *hint = "";

	if (m->status == 401 || m->status == 403)
		hint = ": set HF_TOKEN or --token to a token with access";
	if (m->error_code[0] != '\0')
		return util_err(err, "%s %s: HTTP %d (%s)%s", what, url, m->status, m->error_code, hint);
	return util_err(err, "%s %s: HTTP %d%s", what, url, m->status, hint);
}

int
hub_net_get(const struct hub_net *n, const char *url, char **body, size_t *len,
    struct hub_meta *m, char *err)
{
	struct sink s = { 0 };

	*body = NULL;
	if (request(n, url, 0, &s, m, NULL, err) != 0) {
		free(s.buf);
		return -1;
	}
	if (m->status / 100 != 2) {
		free(s.buf);
		return status_err("GET", url, m, err);
	}
	if (s.buf == NULL && (s.buf = calloc(1, 1)) == NULL)
		return util_err(err, "%s: out of memory", url);
	*body = s.buf;
	*len = s.len;
	return 0;
}

int
hub_net_head(const struct hub_net *n, const char *url, struct hub_meta *m, char **location, char *err)
{
	char *cur = strdup(url), *redir = NULL;
	int hops;

	*location = NULL;
	for (hops = 0; cur != NULL && hops < 10; hops++) {
		if (request(n, cur, 1, NULL, m, &redir, err) != 0)
			break;
		if (m->status / 100 == 2) {
			*location = cur;
			return 0;
		}
		if (m->status / 100 != 3 || redir == NULL) {
			status_err("HEAD", cur, m, err);
			break;
		}
		if (!hub_net_same_origin(cur, redir)) {
			/* a CDN: the metadata is on this answer, the bytes there */
			free(cur);
			*location = redir;
			return 0;
		}
		free(cur);
		cur = redir;
		redir = NULL;
	}
	if (cur != NULL && hops == 10)
		util_err(err, "HEAD %s: more than 10 redirects", url);
	else if (cur == NULL)
		util_err(err, "HEAD %s: out of memory", url);
	free(cur);
	free(redir);
	return -1;
}

/* --- ranged, resumable, parallel download --- */

enum { PART_TODO, PART_RUN, PART_DONE };

struct fetch;

struct part {
	struct fetch *f;
	uint64_t lo, hi;	/* [lo, hi) still to get; lo moves as bytes land */
	uint64_t lo0;		/* lo when the current attempt began */
	int	state, tries, ranged;
	double	not_before;
	struct hub_meta m;
	CURL	*c;
	struct curl_slist *hdrs;
};

/* A thread hashing the good prefix of the file while the rest arrives. */
struct hasher {
	pthread_t tid;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int	fd, on, stop, err;
	atomic_int abort;	/* read unlocked by the hashing loop */
	uint64_t ready;		/* bytes known good */
	struct sha256 s;
};

static void *
hasher_main(void *arg)
{
	static const size_t bufsz = (size_t)4 << 20;
	struct hasher *h = arg;
	char *buf = malloc(bufsz);
	uint64_t done = 0, ready;
	ssize_t r;
	int stop;

	for (h->err = buf ? 0 : ENOMEM; h->err == 0;) {
		pthread_mutex_lock(&h->mu);
		while (done == h->ready && !h->stop && !h->abort)
			pthread_cond_wait(&h->cv, &h->mu);
		ready = h->ready, stop = h->stop || h->abort;
		pthread_mutex_unlock(&h->mu);
		if (done >= ready && stop)
			break;
		while (done < ready && !atomic_load(&h->abort) && h->err == 0) {
			size_t want = ready - done < bufsz ? (size_t)(ready - done) : bufsz;

			if ((r = pread(h->fd, buf, want, (off_t)done)) < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				h->err = r < 0 ? errno : EIO;
			else {
				sha256_update(&h->s, buf, (size_t)r);
				done += (uint64_t)r;
			}
		}
		if (atomic_load(&h->abort))
			break;
	}
	free(buf);
	return NULL;
}

static void
hasher_start(struct hasher *h, int fd, uint64_t have)
{
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	sha256_init(&h->s);
	atomic_init(&h->abort, 0);
	h->fd = fd;
	h->ready = have;
	h->on = pthread_create(&h->tid, NULL, hasher_main, h) == 0;
}

/* Bytes [0, good) are final. */
static void
hasher_feed(struct hasher *h, uint64_t good)
{
	if (!h->on)
		return;
	pthread_mutex_lock(&h->mu);
	if (good > h->ready) {
		h->ready = good;
		pthread_cond_signal(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
}

/* Stop the thread; with sha, after hashing [0, size) into it.  -1 when the
 * overlapped hash is unavailable (the caller hashes the file instead). */
static int
hasher_stop(struct hasher *h, uint64_t size, char sha[65])
{
	if (!h->on)
		return -1;
	pthread_mutex_lock(&h->mu);
	if (sha != NULL && size > h->ready)
		h->ready = size;
	h->stop = 1;
	atomic_store(&h->abort, sha == NULL);
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->tid, NULL);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	h->on = 0;
	if (sha == NULL || h->err != 0)
		return -1;
	sha256_hex(&h->s, sha);
	return 0;
}

struct fetch {
	const struct hub_net *n;
	const char *url, *path;
	int	fd;
	uint64_t size;
	int	norange;	/* the server answered a Range with the whole file */
	int	toomuch;	/* the server sent more than asked */
	int	werr;		/* errno of a failed write */
	struct part *p;		/* [np] consecutive pieces of the file */
	size_t	np;
	CURLM	*multi;
	int	running;
	struct hasher hash;	/* when a sha256 is wanted */
};

static size_t
part_write(char *data, size_t sz, size_t nm, void *arg)
{
	struct part *p = arg;
	struct fetch *f = p->f;
	size_t n = sz * nm, off = 0;
	long code = 0;

	curl_easy_getinfo(p->c, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200 && code != 206)
		return n;	/* an error page: not file bytes */
	if (code == 200 && p->ranged) {
		f->norange = 1;
		return 0;
	}
	if (p->hi != HUB_UNKNOWN_SIZE && n > p->hi - p->lo) {
		f->toomuch = 1;
		return 0;
	}
	while (off < n) {
		ssize_t w = pwrite(f->fd, data + off, n - off, (off_t)(p->lo + off));

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			f->werr = errno;
			return 0;
		}
		off += (size_t)w;
	}
	p->lo += n;
	if (f->n->bytes != NULL)
		f->n->bytes(f->n->arg, (int64_t)n);
	return n;
}

static int
part_start(struct fetch *f, struct part *p)
{
	char range[64];

	p->c = easy(f->n, f->url, &p->hdrs);
	if (p->c == NULL)
		return -1;
	p->ranged = p->lo > 0 || (p->hi != HUB_UNKNOWN_SIZE && p->hi < f->size);
	if (p->ranged) {
		if (p->hi == HUB_UNKNOWN_SIZE)
			snprintf(range, sizeof range, "%llu-", (unsigned long long)p->lo);
		else
			snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)p->lo,
			    (unsigned long long)p->hi - 1);
		curl_easy_setopt(p->c, CURLOPT_RANGE, range);
	}
	hub_meta_reset(&p->m);
	curl_easy_setopt(p->c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(p->c, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(p->c, CURLOPT_WRITEFUNCTION, part_write);
	curl_easy_setopt(p->c, CURLOPT_WRITEDATA, p);
	curl_easy_setopt(p->c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(p->c, CURLOPT_HEADERDATA, &p->m);
	p->lo0 = p->lo;
	p->state = PART_RUN;
	f->running++;
	curl_multi_add_handle(f->multi, p->c);
	return 0;
}

static void
part_stop(struct fetch *f, struct part *p)
{
	if (p->c == NULL)
		return;
	curl_multi_remove_handle(f->multi, p->c);
	curl_easy_cleanup(p->c);
	curl_slist_free_all(p->hdrs);
	p->c = NULL;
	p->hdrs = NULL;
	f->running--;
}

/* A transfer ended: done, to retry later, or fatal (-1 with err). */
static int
part_done(struct fetch *f, struct part *p, CURLcode rc, char *err)
{
	long code = 0;
	int retry;
	double d;

	curl_easy_getinfo(p->c, CURLINFO_RESPONSE_CODE, &code);
	part_stop(f, p);
	p->state = PART_TODO;
	if (f->werr)
		return util_err(err, "%s: %s", f->path, strerror(f->werr));
	if (f->toomuch)
		return util_err(err, "%s: the server sent more bytes than asked", f->url);
	if (f->norange)
		return 0;
	if (rc == CURLE_OK && (code == 200 || code == 206) &&
	    (p->hi == HUB_UNKNOWN_SIZE || p->lo == p->hi)) {
		p->state = PART_DONE;
		return 0;
	}
	if (rc == CURLE_OK && (code == 200 || code == 206))
		retry = 1;	/* a short body: the connection was cut */
	else
		retry = rc != CURLE_OK ? retryable_curl(rc) : retryable_code(code);
	if (p->lo > p->lo0)
		p->tries = 0;	/* it moved: a fresh budget */
	if (!retry || p->tries >= f->n->retries) {
		if (rc != CURLE_OK)
			return util_err(err, "GET %s: %s%s", f->url, curl_easy_strerror(rc),
			    retry ? " (gave up)" : "");
		if (code == 401 || code == 403)
			return util_err(err, "GET %s: HTTP %ld: set HF_TOKEN or --token to a token with access",
			    f->url, code);
		return util_err(err, "GET %s: HTTP %ld%s", f->url, code, retry ? " (gave up)" : "");
	}
	d = backoff(p->tries, rc == CURLE_OK ? p->m.retry_after : -1);
	if (p->lo > p->lo0)
		d = 0;
	p->tries++;
	p->not_before = util_now() + d;
	if (rc != CURLE_OK)
		say(f->n, "%s: %s at byte %llu; retry in %.2gs", f->path, curl_easy_strerror(rc),
		    (unsigned long long)p->lo, d);
	else
		say(f->n, "%s: HTTP %ld at byte %llu; retry in %.2gs", f->path, code,
		    (unsigned long long)p->lo, d);
	return 0;
}

/* Pieces from `have` on: one, or chunk-sized when worth several connections. */
static int
plan(struct fetch *f, uint64_t have)
{
	uint64_t chunk = f->n->chunk ? f->n->chunk : ((uint64_t)32 << 20), left, at;
	size_t i, np = 1;

	free(f->p);
	left = f->size == HUB_UNKNOWN_SIZE ? 0 : f->size - have;
	if (f->size != HUB_UNKNOWN_SIZE && f->n->connections > 1 && left >= 2 * chunk && !f->norange)
		np = (size_t)((left + chunk - 1) / chunk);
	else
		chunk = left;
	if ((f->p = calloc(np, sizeof *f->p)) == NULL)
		return -1;
	for (i = 0, at = have; i < np; i++, at += chunk) {
		f->p[i].f = f;
		f->p[i].lo = at;
		f->p[i].hi = f->size == HUB_UNKNOWN_SIZE ? HUB_UNKNOWN_SIZE :
		    (i + 1 == np ? f->size : at + chunk);
	}
	f->np = np;
	return 0;
}

/* One pass of the transfer loop; 1 when every piece is done. */
static int
pump(struct fetch *f, char *err)
{
	double now = util_now();
	int conns = f->n->connections > 0 ? f->n->connections : 1, still, q, all = 1;
	size_t i;
	CURLMsg *msg;

	for (i = 0; i < f->np && f->running < conns; i++)
		if (f->p[i].state == PART_TODO && f->p[i].not_before <= now && part_start(f, &f->p[i]) != 0)
			return util_err(err, "%s: cannot start a transfer", f->url);
	curl_multi_perform(f->multi, &still);
	while ((msg = curl_multi_info_read(f->multi, &q)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		for (i = 0; i < f->np; i++)
			if (f->p[i].c == msg->easy_handle)
				break;
		if (i < f->np && part_done(f, &f->p[i], msg->data.result, err) != 0)
			return -1;
	}
	for (i = 0; i < f->np; i++)
		all &= f->p[i].state == PART_DONE;
	if (!all && !f->norange)
		curl_multi_poll(f->multi, NULL, 0, 50, NULL);
	return all;
}

/* The bytes before the first unfinished piece are good. */
static uint64_t
prefix(const struct fetch *f)
{
	size_t i;

	for (i = 0; i < f->np; i++)
		if (f->p[i].state != PART_DONE)
			return f->p[i].lo;
	return f->np ? f->p[f->np - 1].lo : 0;
}

static int
transfer(struct fetch *f, uint64_t have, char *err)
{
	int r = 0, restarted = 0;
	size_t i;

	if (plan(f, have) != 0)
		return util_err(err, "out of memory");
	while (r == 0) {
		if (f->n->cancel != NULL && *f->n->cancel) {
			r = util_err(err, "%s: interrupted", f->path);
			break;
		}
		r = pump(f, err);
		hasher_feed(&f->hash, prefix(f));
		if (r == 0 && f->norange) {
			/* ranges unsupported: start over on one connection */
			for (i = 0; i < f->np; i++)
				part_stop(f, &f->p[i]);
			hasher_stop(&f->hash, 0, NULL);	/* hash the whole file at the end */
			if (restarted++ || ftruncate(f->fd, 0) != 0) {
				r = util_err(err, "%s: the server ignores Range requests", f->url);
				break;
			}
			if (f->n->bytes != NULL)
				f->n->bytes(f->n->arg, -(int64_t)prefix(f));
			if (plan(f, 0) != 0)
				r = util_err(err, "out of memory");
			f->norange = 0;
			f->p[0].ranged = 0;
		}
	}
	for (i = 0; i < f->np; i++)
		part_stop(f, &f->p[i]);
	return r < 0 ? -1 : 0;
}

/* The download proper, after the resume point is known. */
static int
fetch_from(struct fetch *f, uint64_t have, char sha[65], char *err)
{
	struct stat st;
	int r;

	if ((f->multi = curl_multi_init()) == NULL)
		return util_err(err, "%s: cannot start a transfer", f->url);
	if (sha != NULL)
		hasher_start(&f->hash, f->fd, have);
	r = transfer(f, have, err);
	if (r != 0 && ftruncate(f->fd, (off_t)prefix(f)) != 0)
		r = util_err(err, "%s: %s", f->path, strerror(errno));
	if (r == 0 && fsync(f->fd) != 0)
		r = util_err(err, "%s: %s", f->path, strerror(errno));
	if (r == 0 && sha != NULL && fstat(f->fd, &st) == 0 &&
	    hasher_stop(&f->hash, (uint64_t)st.st_size, sha) != 0 && sha256_file(f->path, sha) != 0)
		r = util_err(err, "%s: %s", f->path, strerror(errno));
	hasher_stop(&f->hash, 0, NULL);
	curl_multi_cleanup(f->multi);
	free(f->p);
	return r;
}

int
hub_net_fetch(const struct hub_net *n, const char *url, const char *path, uint64_t size,
    char sha[65], char *err)
{
	struct fetch f = { .n = n, .url = url, .path = path, .size = size };
	struct stat st;
	uint64_t have;
	int r = 0;

	if ((f.fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666)) < 0)
		return util_err(err, "%s: %s", path, strerror(errno));
	if (fstat(f.fd, &st) != 0)
		r = util_err(err, "%s: %s", path, strerror(errno));
	have = (uint64_t)st.st_size;
	if (r == 0 && (size == HUB_UNKNOWN_SIZE || have > size)) {
		have = 0;
		if (ftruncate(f.fd, 0) != 0)
			r = util_err(err, "%s: %s", path, strerror(errno));
	}
	if (r == 0 && have > 0) {
		say(n, "%s: resuming at byte %llu", path, (unsigned long long)have);
		if (n->bytes != NULL)
			n->bytes(n->arg, (int64_t)have);
	}
	if (r == 0 && size != HUB_UNKNOWN_SIZE && have == size) {
		if (sha != NULL && sha256_file(path, sha) != 0)
			r = util_err(err, "%s: %s", path, strerror(errno));
	} else if (r == 0)
		r = fetch_from(&f, have, sha, err);
	close(f.fd);
	return r;
}

#endif
