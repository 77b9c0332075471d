#include "learned.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ranks.h"
#include "util.h"

enum { IN_RANKS = -2, NO_SLOT = -1 };

struct learned {
	pthread_mutex_t mu;	/* everything below */
	pthread_mutex_t save_mu;	/* one write at a time: they share a temporary name */
	int	n;		/* slots */
	int	filled;		/* slots 0..filled-1 hold a token */
	int64_t	n_vocab;
	int32_t	*slot;		/* [n] each slot's token */
	int32_t	*where;		/* [n_vocab] each token's slot, NO_SLOT, or IN_RANKS */
	uint32_t *count;	/* [n_vocab] each token's misses */
	int	weak;		/* the weakest slot, when weak_ok */
	int	weak_ok;
	uint64_t version;	/* slot changes */
	uint64_t changes;	/* count or slot changes */
	uint64_t saved;		/* changes at the last write or load */
	double	t_due;		/* learned_due's clock, once started */
	int	clock;
};

struct learned *
learned_new(int n_slots, const struct ranks *r, int64_t n_vocab, char *err)
{
	struct learned *l;

	if (n_slots < 1 || n_slots > LEARNED_MAX || n_vocab < 1 || n_vocab > INT32_MAX) {
		util_err(err, "%d learned slots over %" PRId64 " tokens: out of range 1..%d", n_slots,
		    n_vocab, LEARNED_MAX);
		return NULL;
	}
	if (ranks_check(r->ids, r->n, n_vocab, err) != 0)
		return NULL;
	if (r->n >= n_vocab) {
		util_err(err, "the rank list holds every token: no learned slot can fill");
		return NULL;
	}
	if ((l = calloc(1, sizeof *l)) == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	l->n = n_vocab - r->n < n_slots ? (int)(n_vocab - r->n) : n_slots;
	l->n_vocab = n_vocab;
	l->slot = malloc((size_t)l->n * sizeof *l->slot);
	l->where = malloc((size_t)n_vocab * sizeof *l->where);
	l->count = calloc((size_t)n_vocab, sizeof *l->count);
	if (l->slot == NULL || l->where == NULL || l->count == NULL) {
		learned_free(l);
		util_err(err, "out of memory");
		return NULL;
	}
	for (int64_t i = 0; i < n_vocab; i++)
		l->where[i] = NO_SLOT;
	for (int64_t i = 0; i < r->n; i++)
		l->where[r->ids[i]] = IN_RANKS;
	pthread_mutex_init(&l->mu, NULL);
	pthread_mutex_init(&l->save_mu, NULL);
	return l;
}

void
learned_free(struct learned *l)
{
	if (l == NULL)
		return;
	if (l->slot != NULL && l->where != NULL && l->count != NULL) {
		pthread_mutex_destroy(&l->mu);
		pthread_mutex_destroy(&l->save_mu);
	}
	free(l->slot), free(l->where), free(l->count);
	free(l);
}

int
learned_slots(struct learned *l)
{
	return l->n;	/* fixed at learned_new */
}

int
learned_filled(struct learned *l)
{
	int n;

	pthread_mutex_lock(&l->mu);
	n = l->filled;
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* Slot s takes token t (the slot's old token, if any, already let go). */
static void
put(struct learned *l, int s, int32_t t)
{
	l->slot[s] = t;
	l->where[t] = s;
	l->version++, l->changes++;
}

/* The slot of the lowest count, the lowest slot on ties (every slot filled). */
static int
weakest(const struct learned *l)
{
	int w = 0;

	for (int s = 1; s < l->n; s++)
		if (l->count[l->slot[s]] < l->count[l->slot[w]])
			w = s;
	return w;
}

/* The rule for one committed token t: 1 when a slot took it. */
static int
observe(struct learned *l, int32_t t)
{
	int s;

	if (t < 0 || t >= l->n_vocab || l->where[t] == IN_RANKS)
		return 0;
	if (l->count[t] < UINT32_MAX)
		l->count[t]++, l->changes++;
	if ((s = l->where[t]) >= 0) {
		if (l->weak_ok && s == l->weak)	/* the weakest grew: look again */
			l->weak_ok = 0;
		return 0;
	}
	if (l->filled < l->n) {
		put(l, l->filled++, t);
		return 1;
	}
	if (!l->weak_ok)
		l->weak = weakest(l), l->weak_ok = 1;
	if (l->count[t] <= l->count[l->slot[l->weak]])
		return 0;
	l->where[l->slot[l->weak]] = NO_SLOT;
	put(l, l->weak, t);
	l->weak_ok = 0;
	return 1;
}

int
learned_observe(struct learned *l, const int32_t *tok, int n)
{
	int took = 0;

	pthread_mutex_lock(&l->mu);
	for (int i = 0; i < n; i++)
		took += observe(l, tok[i]);
	pthread_mutex_unlock(&l->mu);
	return took;
}

int
learned_copy(struct learned *l, int32_t *ids, uint64_t *version)
{
	int n = -1;

	pthread_mutex_lock(&l->mu);
	if (l->version != *version) {
		memcpy(ids, l->slot, (size_t)l->filled * sizeof *ids);
		n = l->filled;
		*version = l->version;
	}
	pthread_mutex_unlock(&l->mu);
	return n;
}

uint32_t
learned_count(struct learned *l, int32_t tok)
{
	uint32_t c = 0;

	pthread_mutex_lock(&l->mu);
	if (tok >= 0 && tok < l->n_vocab)
		c = l->count[tok];
	pthread_mutex_unlock(&l->mu);
	return c;
}

/* Digits [p, e) as a number at most max into *v: 0, -1 (not digits) or -2 (too large). */
static int
digits(const char *p, const char *e, uint64_t max, uint64_t *v)
{
	*v = 0;
	if (p == e)
		return -1;
	for (; p < e; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		if ((*v = *v * 10 + (uint64_t)(*p - '0')) > max)
			return -2;
	}
	return 0;
}

/* Line number line, [p, e) without its newline, as "ID COUNT" into *id, *count. */
static int
parse_line(const struct learned *l, const char *p, const char *e, int line, int32_t *id,
    uint32_t *count, char *err)
{
	const char *sp;
	uint64_t a = 0, b = 0;
	int ra = -1, rb = -1, w;

	if (e > p && e[-1] == '\r')
		e--;
	w = (int)(e - p > 40 ? 40 : e - p);
	if (p == e)
		return util_err(err, "line %d: blank line", line);
	if ((sp = memchr(p, ' ', (size_t)(e - p))) != NULL)
		ra = digits(p, sp, INT32_MAX, &a), rb = digits(sp + 1, e, UINT32_MAX, &b);
	if (ra == -1 || rb == -1)
		return util_err(err, "line %d: not 'ID COUNT': '%.*s'", line, w, p);
	if (ra == -2 || rb == -2)
		return util_err(err, "line %d: '%.*s': a number too large", line, w, p);
	if ((int64_t)a >= l->n_vocab)
		return util_err(err, "line %d: id %" PRIu64 " is outside the vocabulary (%" PRId64
		    " tokens)", line, a, l->n_vocab);
	if (l->where[a] == IN_RANKS)
		return util_err(err, "line %d: id %" PRIu64 " is in the rank list", line, a);
	if (b == 0)
		return util_err(err, "line %d: id %" PRIu64 " has a count of 0", line, a);
	*id = (int32_t)a, *count = (uint32_t)b;
	return 0;
}

/* The lines of buf[len] into ids[cap], counts[cap], checked (a line takes 4 bytes but
 * the last 3, and an id twice is an error: min(len / 4 + 1, n_vocab) lines at most);
 * how many, or -1. */
static int
parse_lines(const struct learned *l, const char *buf, size_t len, size_t cap, int32_t *ids,
    uint32_t *counts, int *line_of, char *err)
{
	const char *p = buf, *end = buf + len;
	int n = 0;

	for (; p < end && (size_t)n < cap; n++) {
		const char *e = memchr(p, '\n', (size_t)(end - p));

		if (e == NULL)
			e = end;
		if (parse_line(l, p, e, n + 1, &ids[n], &counts[n], err) != 0)
			return -1;
		if (line_of[ids[n]] != 0)
			return util_err(err, "line %d: id %" PRId32 " repeats line %d", n + 1, ids[n],
			    line_of[ids[n]]);
		line_of[ids[n]] = n + 1;
		p = e + 1;
	}
	return p < end ? util_err(err, "line %d: more lines than tokens", n + 1) : n;
}

int
learned_parse(struct learned *l, const char *buf, size_t len, int *n_lines, char *err)
{
	size_t cap = len / 4 + 1 < (size_t)l->n_vocab ? len / 4 + 1 : (size_t)l->n_vocab;
	int32_t *ids = malloc(cap * sizeof *ids);
	uint32_t *counts = malloc(cap * sizeof *counts);
	int *line_of = calloc((size_t)l->n_vocab, sizeof *line_of);
	int n = -1;

	*n_lines = 0;
	pthread_mutex_lock(&l->mu);
	if (ids == NULL || counts == NULL || line_of == NULL)
		util_err(err, "out of memory");
	else if (l->changes != 0)
		util_err(err, "the slots are in use already");
	else if ((n = parse_lines(l, buf, len, cap, ids, counts, line_of, err)) >= 0) {
		for (int i = 0; i < n; i++)
			l->count[ids[i]] = counts[i];
		for (int i = 0; i < n && i < l->n; i++)
			put(l, l->filled++, ids[i]);
		l->saved = l->changes;
		*n_lines = n;
	}
	pthread_mutex_unlock(&l->mu);
	free(ids), free(counts), free(line_of);
	return n < 0 ? -1 : 0;
}

int
learned_load(struct learned *l, const char *path, int *n_lines, char *err)
{
	char why[UTIL_ERRLEN], *buf;
	struct stat st;
	size_t len;
	int rc;

	*n_lines = 0;
	if (stat(path, &st) != 0 && errno == ENOENT)
		return 1;
	if ((buf = util_read_file(path, &len, err)) == NULL)
		return -1;
	if ((rc = learned_parse(l, buf, len, n_lines, why)) != 0)
		util_err(err, "%s: %s", path, why);
	free(buf);
	return rc;
}

struct entry {
	int32_t	id;
	uint32_t count;
};

/* Strongest first: count descending, the lower id on ties. */
static int
cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* Write e[n] to path atomically: 0, or -1 with err. */
static int
write_entries(const char *path, const struct entry *e, int n, char *err)
{
	struct util_ofile *f = util_ofile_open(path, err);

	if (f == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		fprintf(f->fp, "%" PRId32 " %" PRIu32 "\n", e[i].id, e[i].count);
	if (ferror(f->fp)) {
		util_err(err, "%s: write error", path);
		util_ofile_abort(f);
		return -1;
	}
	return util_ofile_commit(f, err);
}

int
learned_save(struct learned *l, const char *path, int *n_written, char *err)
{
	struct entry *e = malloc((size_t)l->n * sizeof *e);
	uint64_t c;
	int n = 0, need, rc = 0;

	*n_written = 0;
	if (e == NULL)
		return util_err(err, "%s: out of memory", path);
	pthread_mutex_lock(&l->save_mu);
	pthread_mutex_lock(&l->mu);
	c = l->changes;
	if ((need = c != l->saved))
		for (n = 0; n < l->filled; n++)
			e[n] = (struct entry){ l->slot[n], l->count[l->slot[n]] };
	pthread_mutex_unlock(&l->mu);
	if (need) {
		qsort(e, (size_t)n, sizeof *e, cmp_entry);
		rc = write_entries(path, e, n, err) == 0 ? 1 : -1;
	}
	if (rc == 1) {
		pthread_mutex_lock(&l->mu);
		l->saved = c > l->saved ? c : l->saved;
		pthread_mutex_unlock(&l->mu);
		*n_written = n;
	}
	pthread_mutex_unlock(&l->save_mu);
	free(e);
	return rc;
}

int
learned_due(struct learned *l, double now)
{
	int due = 0;

	pthread_mutex_lock(&l->mu);
	if (!l->clock)
		l->clock = 1, l->t_due = now;
	else if (l->changes != l->saved && now - l->t_due >= LEARNED_SAVE_S)
		due = 1, l->t_due = now;
	pthread_mutex_unlock(&l->mu);
	return due;
}
