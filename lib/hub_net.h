/*
 * hub_net: the libcurl half of hub, private to lib/hub*.c.  Requests retry
 * on connection loss, 408, 429 and 5xx with exponential backoff (Retry-After
 * wins); the token goes only to URLs of the endpoint's origin.
 */
#ifndef MEMRA_HUB_NET_H
#define MEMRA_HUB_NET_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "hub.h"

struct hub_net {
	const char *endpoint;	/* origin that may see the token */
	const char *token;	/* NULL or "" sends none */
	int	retries;
	int	connections;
	uint64_t chunk;
	volatile sig_atomic_t *cancel;
	void	(*log)(void *arg, const char *msg);	/* thread-safe, may be NULL */
	void	(*bytes)(void *arg, int64_t delta);	/* bytes landed (negative: dropped) */
	void	*arg;
};

/* 1 when built with libcurl. */
int	hub_net_available(void);
/* Once per process use, paired; no-ops without libcurl. */
void	hub_net_global_init(void);
void	hub_net_global_cleanup(void);

/* 1 when a and b share scheme, host and port. */
int	hub_net_same_origin(const char *a, const char *b);

/* GET url into a malloc'd NUL-terminated *body.  A non-2xx status is an
 * error naming it (and X-Error-Message).  Returns 0 or -1 with err set. */
int	hub_net_get(const struct hub_net *, const char *url, char **body, size_t *len,
	    struct hub_meta *m, char *err);

/* HEAD url following redirects within its origin; *location (malloc'd) is
 * where to GET the bytes: the last URL, or a redirect to another origin. */
int	hub_net_head(const struct hub_net *, const char *url, struct hub_meta *m,
	    char **location, char *err);

/*
 * Download url into path (created, or resumed from its current size with
 * a Range request), size bytes when known.  Files of two chunks or more go
 * over several connections.  With sha non-NULL, the sha256 of the whole
 * file lands there (hashed while the bytes arrive).  On failure path keeps
 * its valid prefix.
 */
int	hub_net_fetch(const struct hub_net *, const char *url, const char *path,
	    uint64_t size, char sha[65], char *err);

#endif
