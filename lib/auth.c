#include "auth.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "util.h"

struct bucket {
	double	level, t;	/* what it held at time t (-1: never used: full) */
};

struct entry {
	uint8_t	digest[32];
	char	label[48];
	struct auth_limits lim;
	struct bucket req, tok;
};

struct auth {
	struct auth_limits d;
	struct entry *e;	/* [n]: e[AUTH_ANON] is the keyless entry */
	int	n, cap;
	pthread_mutex_t mu;
};

struct auth *
auth_new(const struct auth_limits *d)
{
	struct auth *a = calloc(1, sizeof *a);

	if (a == NULL || (a->e = calloc(1, sizeof *a->e)) == NULL) {
		free(a);
		return NULL;
	}
	a->d = *d, a->n = a->cap = 1;
	a->e[0].lim = *d, a->e[0].req.t = a->e[0].tok.t = -1;
	strcpy(a->e[0].label, "-");
	pthread_mutex_init(&a->mu, NULL);
	return a;
}

void
auth_free(struct auth *a)
{
	if (a == NULL)
		return;
	pthread_mutex_destroy(&a->mu);
	free(a->e);
	free(a);
}

static int
digest_eq(const uint8_t *x, const uint8_t *y)
{
	unsigned d = 0;

	for (int i = 0; i < 32; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

/* The entry holding digest d, or -1 (a plain scan: for loading). */
static int
lookup(const struct auth *a, const uint8_t *d)
{
	for (int i = 1; i < a->n; i++)
		if (memcmp(a->e[i].digest, d, 32) == 0)
			return i;
	return -1;
}

static struct entry *
grow(struct auth *a)
{
	if (a->n == a->cap) {
		struct entry *ne = realloc(a->e, (size_t)a->cap * 2 * sizeof *ne);

		if (ne == NULL)
			return NULL;
		a->e = ne, a->cap *= 2;
	}
	memset(&a->e[a->n], 0, sizeof a->e[a->n]);
	a->e[a->n].lim = a->d;
	a->e[a->n].req.t = a->e[a->n].tok.t = -1;
	return &a->e[a->n];
}

static void
default_label(struct entry *e)
{
	snprintf(e->label, sizeof e->label, "sha256:%02x%02x%02x%02x", e->digest[0], e->digest[1],
	    e->digest[2], e->digest[3]);
}

static int
hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	    c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One field of a keys line into e; -1 with why. */
static int
field(struct entry *e, const char *f, char *why)
{
	const char *eq = strchr(f, '=');
	int64_t v;

	if (eq != NULL && strncmp(f, "name=", 5) == 0) {
		if (eq[1] == '\0' || strlen(eq + 1) >= sizeof e->label)
			return util_err(why, "'%s': a name of 1 to %zu characters", f,
			    sizeof e->label - 1);
		strcpy(e->label, eq + 1);
		return 0;
	}
	if (eq == NULL || (strncmp(f, "rpm=", 4) != 0 && strncmp(f, "tpm=", 4) != 0))
		return util_err(why, "'%s': not name=, rpm= or tpm=", f);
	if (util_parse_i64(eq + 1, 0, 1L << 40, &v) != 0)
		return util_err(why, "'%s': not a number in 0..%ld", f, 1L << 40);
	if (f[0] == 'r')
		e->lim.rpm = v;
	else
		e->lim.tpm = v;
	return 0;
}

/* Keys line s (NUL-terminated, comment cut) into e; 1 when blank, -1 with why. */
static int
parse_line(char *s, struct entry *e, char *why)
{
	char *save = NULL, *tok = strtok_r(s, " \t\r", &save);
	int named = 0;

	if (tok == NULL)
		return 1;
	if (strlen(tok) != 64)
		return util_err(why, "not a SHA-256 digest (64 hex digits) of a key");
	for (int i = 0; i < 32; i++) {
		int hi = hexval((unsigned char)tok[2 * i]), lo = hexval((unsigned char)tok[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return util_err(why, "not a SHA-256 digest (64 hex digits) of a key");
		e->digest[i] = (uint8_t)(hi << 4 | lo);
	}
	while ((tok = strtok_r(NULL, " \t\r", &save)) != NULL) {
		if (field(e, tok, why) != 0)
			return -1;
		named |= strncmp(tok, "name=", 5) == 0;
	}
	if (!named)
		default_label(e);
	return 0;
}

int
auth_load(struct auth *a, const char *text, size_t len, const char *name, char *err)
{
	int n0 = a->n, lineno = 0;
	char why[UTIL_ERRLEN], *line;

	for (size_t at = 0; at < len; lineno++) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - text - at) : len - at;
		struct entry *e;
		int rc;

		if ((line = strndup(text + at, ll)) == NULL || (e = grow(a)) == NULL) {
			free(line);
			a->n = n0;
			return util_err(err, "%s: out of memory", name);
		}
		at += ll + 1;
		line[strcspn(line, "#")] = '\0';
		rc = parse_line(line, e, why);
		free(line);
		if (rc == 0 && lookup(a, e->digest) >= 0)
			rc = util_err(why, "a digest given twice");
		if (rc < 0) {
			a->n = n0;
			return util_err(err, "%s:%d: %s", name, lineno + 1, why);
		}
		a->n += rc == 0;
	}
	return 0;
}

int
auth_add_key(struct auth *a, const char *key, size_t n, const char *label, char *err)
{
	struct sha256 h;
	struct entry *e;

	if (n == 0)
		return util_err(err, "an empty key");
	if ((e = grow(a)) == NULL)
		return util_err(err, "out of memory");
	sha256_init(&h);
	sha256_update(&h, key, n);
	sha256_final(&h, e->digest);
	if (lookup(a, e->digest) >= 0)
		return util_err(err, "a key given twice");
	if (label != NULL)
		snprintf(e->label, sizeof e->label, "%s", label);
	else
		default_label(e);
	a->n++;
	return 0;
}

int
auth_count(const struct auth *a)
{
	return a->n - 1;
}

int
auth_find(const struct auth *a, const char *key, size_t n)
{
	struct sha256 h;
	uint8_t d[32];
	int found = -1;

	sha256_init(&h);
	sha256_update(&h, key, n);
	sha256_final(&h, d);
	for (int i = 1; i < a->n; i++) {	/* every entry, whatever matched before */
		int eq = digest_eq(a->e[i].digest, d);

		found = eq ? i : found;
	}
	return found;
}

const char *
auth_label(const struct auth *a, int k)
{
	return k >= 0 && k < a->n ? a->e[k].label : "-";
}

struct auth_limits
auth_limits(const struct auth *a, int k)
{
	return a->e[k].lim;
}

/* Bring bucket b of a limit of `per_min` a minute up to time now. */
static void
refill(struct bucket *b, long per_min, double now)
{
	if (b->t < 0)
		b->level = per_min, b->t = now;
	if (now > b->t) {
		b->level += (now - b->t) * per_min / 60.0;
		b->t = now;
	}
	if (b->level > per_min)
		b->level = per_min;
}

/* Seconds until bucket b holds one; 0 when it does. */
static double
wait_for_one(const struct bucket *b, long per_min)
{
	return b->level >= 1 ? 0 : (1 - b->level) * 60.0 / per_min;
}

enum auth_limit
auth_admit(struct auth *a, int k, double now, double *retry)
{
	struct entry *e = &a->e[k];
	double wr = 0, wt = 0;
	enum auth_limit r = AUTH_OK;

	pthread_mutex_lock(&a->mu);
	if (e->lim.rpm > 0)
		refill(&e->req, e->lim.rpm, now), wr = wait_for_one(&e->req, e->lim.rpm);
	if (e->lim.tpm > 0)
		refill(&e->tok, e->lim.tpm, now), wt = wait_for_one(&e->tok, e->lim.tpm);
	if (wr > 0 || wt > 0)
		r = wr >= wt ? AUTH_REQUESTS : AUTH_TOKENS, *retry = wr >= wt ? wr : wt;
	else if (e->lim.rpm > 0)
		e->req.level -= 1;
	pthread_mutex_unlock(&a->mu);
	return r;
}

void
auth_charge(struct auth *a, int k, long tokens, double now)
{
	struct entry *e = &a->e[k];

	if (e->lim.tpm <= 0)
		return;
	pthread_mutex_lock(&a->mu);
	refill(&e->tok, e->lim.tpm, now);
	e->tok.level -= tokens;
	pthread_mutex_unlock(&a->mu);
}
