/*
 * auth: serve's API keys and per-key rate limits.  Keys are held only as
 * SHA-256 digests (a keys file lists digests; a plaintext key is hashed as
 * it is added), and a presented key is found by hashing it and comparing
 * against every digest in constant time.  Each key has a requests-a-minute
 * and a tokens-a-minute limit, as token buckets that refill continuously
 * (a bucket holds a minute's worth: a key idle for a minute may burst its
 * whole minute at once).  Time is the caller's (any monotonic seconds), so
 * tests drive the clock.
 */
#ifndef MEMRA_AUTH_H
#define MEMRA_AUTH_H

#include <stddef.h>

#define AUTH_ANON 0	/* the entry of requests without keys (a server with no key) */

struct auth_limits {
	long	rpm;		/* requests a minute; 0: no limit */
	long	tpm;		/* prompt + completion tokens a minute; 0: no limit */
};

struct auth;

/* A table with no keys whose entries default to limits d.  NULL: out of memory.
 * auth_free(NULL) is a no-op. */
struct auth *auth_new(const struct auth_limits *d);
void	auth_free(struct auth *);

/*
 * Add the keys of a keys file's text[len] (name: the file, for messages).
 * A line is `DIGEST [name=LABEL] [rpm=N] [tpm=N]`: DIGEST the 64 hex digits
 * of the key's SHA-256 (`printf %s KEY | sha256sum`), the fields
 * whitespace-separated, in any order; `#` starts a comment, blank lines are
 * skipped.  -1 with err (UTIL_ERRLEN) "NAME:LINE: why" on a malformed line
 * or a digest given twice; nothing is added then.
 */
int	auth_load(struct auth *, const char *text, size_t len, const char *name, char *err);

/* Add the plaintext key[n] (only its digest is kept), labelled label.  -1
 * with err when it is empty or already there. */
int	auth_add_key(struct auth *, const char *key, size_t n, const char *label, char *err);

/* How many keys; 0: requests need none. */
int	auth_count(const struct auth *);

/*
 * The entry (>= 1) of the presented plaintext key[n], or -1 when no
 * key matches.  Its time depends on the table's size only.
 */
int	auth_find(const struct auth *, const char *key, size_t n);

/* The label of entry k for logs: its name=, else "sha256:" and the first
 * 8 hex digits of its digest, "-" for AUTH_ANON.  Never the key. */
const char *auth_label(const struct auth *, int k);

enum auth_limit {
	AUTH_OK,
	AUTH_REQUESTS,		/* over the requests a minute */
	AUTH_TOKENS,		/* over the tokens a minute */
};

/*
 * A request of entry k at time now (thread-safe): AUTH_OK takes one
 * request from its bucket; otherwise nothing is taken, *retry gets the
 * seconds until a request would pass and the result says which limit
 * holds it (the one that holds it longer).  The tokens limit passes while
 * the key's token bucket holds at least one token.
 */
enum auth_limit auth_admit(struct auth *, int k, double now, double *retry);

/* Charge entry k's token bucket `tokens` at time now (thread-safe); the
 * bucket may go below zero, and its debt holds the key's next requests. */
void	auth_charge(struct auth *, int k, long tokens, double now);

/* Entry k's limits. */
struct auth_limits auth_limits(const struct auth *, int k);

#endif
