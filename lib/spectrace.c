#include "spectrace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "spec.h"
#include "util.h"

/* v, n elements of size, with room for one more (8, 16, 32, ...); NULL
 * when out of memory (v stays). */
static void *
grow(void *v, int n, size_t size)
{
	if (n > 0 && (n < 8 || (n & (n - 1)) != 0))
		return v;
	return realloc(v, (n ? 2 * (size_t)n : 8) * size);
}

struct spectrace *
spectrace_new(void)
{
	return calloc(1, sizeof(struct spectrace));
}

static void
prompt_free(struct spectrace_prompt *p)
{
	free(p->ids), free(p->rounds), free(p->out);
}

void
spectrace_free(struct spectrace *t)
{
	if (t == NULL)
		return;
	for (int i = 0; i < t->n_sec; i++) {
		struct spectrace_section *s = &t->sec[i];

		for (int j = 0; j < s->n_prompts; j++)
			prompt_free(&s->p[j]);
		free(s->p), free(s->model);
	}
	free(t->sec), free(t);
}

const struct spectrace_section *
spectrace_find(const struct spectrace *t, int K)
{
	for (int i = 0; i < t->n_sec; i++)
		if (t->sec[i].K == K)
			return &t->sec[i];
	return NULL;
}

/* A header's values in range (its prompts aside), else -1 with why. */
static int
check_head(const struct spectrace *t, const struct spectrace_section *h, char *err)
{
	size_t n = strlen(h->drafter);
	const struct spectrace_section *dup;

	if (h->K < 1 || h->K > SPEC_KMAX)
		return util_err(err, "\"K\" %d: out of range 1..%d", h->K, SPEC_KMAX);
	if (n < 1 || n != strspn(h->drafter, "abcdefghijklmnopqrstuvwxyz0123456789-"))
		return util_err(err, "\"drafter\": not 1 to 31 of a-z, 0-9 and -");
	if (h->model == NULL || strlen(h->model) > SPECTRACE_MODELMAX)
		return util_err(err, "\"model\": not a name of at most %d bytes",
		    SPECTRACE_MODELMAX);
	for (const char *c = h->model; *c; c++)
		if ((unsigned char)*c < 0x20)
			return util_err(err, "\"model\": a control character");
	if (h->n_vocab < 1)
		return util_err(err, "\"n_vocab\" %d: not a vocabulary's size", h->n_vocab);
	if (h->n < 1 || h->n > SPECTRACE_NMAX)
		return util_err(err, "\"n\" %d: out of range 1..%d", h->n, SPECTRACE_NMAX);
	if (!(h->temp >= 0) || !isfinite(h->temp))
		return util_err(err, "\"temp\" %g: not a temperature", h->temp);
	if ((dup = spectrace_find(t, h->K)) != NULL)
		return dup->line > 0 ? util_err(err, "a second section of K=%d (the first at line "
		    "%d)", h->K, dup->line) : util_err(err, "a second section of K=%d", h->K);
	return 0;
}

int
spectrace_section(struct spectrace *t, const struct spectrace_section *h, char *err)
{
	struct spectrace_section *s;

	if (t->open)
		return util_err(err, "a section begun before prompt %d ended",
		    t->sec[t->n_sec - 1].n_prompts - 1);
	if (check_head(t, h, err) != 0)
		return -1;
	if ((s = grow(t->sec, t->n_sec, sizeof *s)) == NULL)
		return util_err(err, "out of memory");
	t->sec = s;
	s += t->n_sec;
	memset(s, 0, sizeof *s);
	s->K = h->K, s->n_vocab = h->n_vocab, s->n = h->n, s->temp = h->temp, s->line = h->line;
	snprintf(s->drafter, sizeof s->drafter, "%s", h->drafter);
	if ((s->model = strdup(h->model)) == NULL)
		return util_err(err, "out of memory");
	t->n_sec++;
	return 0;
}

/* Ids each in 0..n_vocab-1, what naming them in a message. */
static int
check_ids(const int32_t *ids, int n, int n_vocab, const char *what, char *err)
{
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= n_vocab)
			return util_err(err, "\"%s\"[%d]: id %d is outside the vocabulary (%d tokens)",
			    what, i, (int)ids[i], n_vocab);
	return 0;
}

int
spectrace_prompt(struct spectrace *t, const int32_t *ids, int n, char *err)
{
	struct spectrace_section *s = t->n_sec ? &t->sec[t->n_sec - 1] : NULL;
	struct spectrace_prompt *p;

	if (s == NULL || t->open)
		return util_err(err, s == NULL ? "a prompt before any section" :
		    "a prompt begun before the last ended");
	if (n < 1)
		return util_err(err, "\"ids\": no prompt tokens");
	if (check_ids(ids, n, s->n_vocab, "ids", err) != 0)
		return -1;
	if ((p = grow(s->p, s->n_prompts, sizeof *p)) == NULL)
		return util_err(err, "out of memory");
	s->p = p;
	p += s->n_prompts;
	memset(p, 0, sizeof *p);
	if ((p->ids = malloc(n * sizeof *ids)) == NULL)
		return util_err(err, "out of memory");
	memcpy(p->ids, ids, n * sizeof *ids);
	p->n_ids = n;
	s->n_prompts++;
	t->open = 1;
	t->kept = 1;
	return 0;
}

/* The open prompt, or NULL with why. */
static struct spectrace_prompt *
open_prompt(struct spectrace *t, char *err)
{
	if (!t->open) {
		util_err(err, "no prompt begun");
		return NULL;
	}
	return &t->sec[t->n_sec - 1].p[t->sec[t->n_sec - 1].n_prompts - 1];
}

int
spectrace_round(struct spectrace *t, int k, int accepted, char *err)
{
	struct spectrace_prompt *p = open_prompt(t, err);
	const struct spectrace_section *s;
	struct spectrace_round *r;
	int i;

	if (p == NULL)
		return -1;
	s = &t->sec[t->n_sec - 1], i = p->n_rounds;
	if (k < 0 || k > s->K)
		return util_err(err, "\"rounds\"[%d]: %d drafts, out of range 0..K=%d", i, k, s->K);
	if (accepted < 0 || accepted > k)
		return util_err(err, "\"rounds\"[%d]: %d accepted of %d drafts", i, accepted, k);
	if (t->kept + accepted + 1 > s->n)
		return util_err(err, "\"rounds\"[%d]: the rounds keep %ld tokens, more than \"n\" "
		    "(%d)", i, t->kept + accepted + 1, s->n);
	if ((r = grow(p->rounds, i, sizeof *r)) == NULL)
		return util_err(err, "out of memory");
	p->rounds = r;
	p->rounds[i] = (struct spectrace_round){ k, accepted };
	p->n_rounds++;
	t->kept += accepted + 1;
	return 0;
}

int
spectrace_end(struct spectrace *t, const int32_t *out, int tokens, char *err)
{
	struct spectrace_prompt *p = open_prompt(t, err);
	long all, least;

	if (p == NULL)
		return -1;
	all = t->kept;
	least = p->n_rounds ? all - p->rounds[p->n_rounds - 1].accepted - 1 : 0;
	if (tokens < least || tokens > all)
		return util_err(err, "\"tokens\" %d: not what the rounds kept (%ld..%ld)", tokens,
		    least, all);
	if (out != NULL && check_ids(out, tokens, t->sec[t->n_sec - 1].n_vocab, "out", err) != 0)
		return -1;
	if (out != NULL && (p->out = malloc((tokens + 1) * sizeof *out)) == NULL)
		return util_err(err, "out of memory");
	if (out != NULL)
		memcpy(p->out, out, tokens * sizeof *out);
	p->tokens = tokens;
	t->open = 0;
	return 0;
}

/* --- reading --- */

/* obj[key] as an int in lo..hi into *v, else -1 with why. */
static int
get_int(const struct json *obj, const char *key, long lo, long hi, int *v, char *err)
{
	const struct json *j = json_get(obj, key);

	if (j == NULL)
		return util_err(err, "no \"%s\"", key);
	if (j->type != JSON_NUMBER || !j->is_int || j->i < lo || j->i > hi)
		return util_err(err, "\"%s\": not an integer in %ld..%ld", key, lo, hi);
	*v = (int)j->i;
	return 0;
}

/* obj[key], an array of n_vocab's ids, into malloc'd *ids[*n]. */
static int
get_ids(const struct json *obj, const char *key, int32_t **ids, int *n, char *err)
{
	const struct json *a = json_get(obj, key);

	*ids = NULL, *n = 0;
	if (a == NULL || a->type != JSON_ARRAY || a->n > INT32_MAX)
		return util_err(err, "\"%s\": not an array of token ids", key);
	if ((*ids = malloc((a->n + 1) * sizeof **ids)) == NULL)
		return util_err(err, "out of memory");
	for (size_t i = 0; i < a->n; i++) {
		const struct json *v = &a->items[i];

		if (v->type != JSON_NUMBER || !v->is_int || v->i < 0 || v->i > INT32_MAX)
			return util_err(err, "\"%s\"[%zu]: not a token id", key, i);
		(*ids)[i] = (int32_t)v->i;
	}
	*n = (int)a->n;
	return 0;
}

static int
parse_head(struct spectrace *t, const struct json *j, int line, char *err)
{
	struct spectrace_section h = { .line = line };
	const char *d = json_get_str(j, "drafter"), *m = json_get_str(j, "model");
	const struct json *ver = json_get(j, "memra_spec_trace");
	int np;

	if (ver == NULL || ver->type != JSON_NUMBER || !ver->is_int || ver->i != SPECTRACE_VERSION)
		return util_err(err, "\"memra_spec_trace\": not version %d", SPECTRACE_VERSION);
	if (get_int(j, "K", 1, SPEC_KMAX, &h.K, err) != 0 ||
	    get_int(j, "n_vocab", 1, INT32_MAX, &h.n_vocab, err) != 0 ||
	    get_int(j, "n", 1, SPECTRACE_NMAX, &h.n, err) != 0 ||
	    get_int(j, "prompts", 1, INT32_MAX, &np, err) != 0)
		return -1;
	if (json_get_num(j, "temp", &h.temp) != 0)
		return util_err(err, "\"temp\": not a number");
	if (d == NULL || strlen(d) >= sizeof h.drafter || strlen(d) != json_get(j, "drafter")->n)
		return util_err(err, "\"drafter\": not 1 to 31 of a-z, 0-9 and -");
	snprintf(h.drafter, sizeof h.drafter, "%s", d);
	if (m == NULL || strlen(m) != json_get(j, "model")->n)
		return util_err(err, "\"model\": not a name of at most %d bytes",
		    SPECTRACE_MODELMAX);
	h.model = (char *)m;
	if (spectrace_section(t, &h, err) != 0)
		return -1;
	return np;
}

static int
parse_prompt(struct spectrace *t, const struct json *j, char *err)
{
	const struct spectrace_section *s = &t->sec[t->n_sec - 1];
	const struct json *r = json_get(j, "rounds");
	int32_t *ids, *out = NULL;
	int n, idx, tokens, rc = -1;

	if (get_int(j, "prompt", 0, INT32_MAX, &idx, err) != 0)
		return -1;
	if (idx != s->n_prompts)
		return util_err(err, "\"prompt\" %d where prompt %d comes next", idx, s->n_prompts);
	if (get_ids(j, "ids", &ids, &n, err) != 0 || spectrace_prompt(t, ids, n, err) != 0)
		goto out;
	if (r == NULL || r->type != JSON_ARRAY) {
		util_err(err, "\"rounds\": not an array of [k, accepted] pairs");
		goto out;
	}
	for (size_t i = 0; i < r->n; i++) {
		const struct json *p = &r->items[i], *a = json_at(p, 0), *b = json_at(p, 1);

		if (p->type != JSON_ARRAY || p->n != 2 || a->type != JSON_NUMBER || !a->is_int ||
		    b->type != JSON_NUMBER || !b->is_int || a->i < 0 || a->i > SPEC_KMAX ||
		    b->i < 0 || b->i > SPEC_KMAX) {
			util_err(err, "\"rounds\"[%zu]: not a pair [k, accepted] of small integers", i);
			goto out;
		}
		if (spectrace_round(t, (int)a->i, (int)b->i, err) != 0)
			goto out;
	}
	if (get_int(j, "tokens", 0, SPECTRACE_NMAX, &tokens, err) != 0 ||
	    (json_get(j, "out") != NULL && get_ids(j, "out", &out, &n, err) != 0))
		goto out;
	if (out != NULL && n != tokens)
		util_err(err, "\"out\": %d ids where \"tokens\" is %d", n, tokens);
	else
		rc = spectrace_end(t, out, tokens, err);
out:
	free(ids), free(out);
	return rc;
}

/* One line's object: a header (returns its prompt count) or a prompt (0). */
static int
parse_line(struct spectrace *t, const struct json *j, int line, int left, char *err)
{
	const struct spectrace_section *s = t->n_sec ? &t->sec[t->n_sec - 1] : NULL;

	if (j->type != JSON_OBJECT)
		return util_err(err, "not a JSON object");
	if (json_get(j, "memra_spec_trace") != NULL) {
		if (left > 0)
			return util_err(err, "a header where K=%d's section (line %d) has %d of its "
			    "%d prompts", s->K, s->line, s->n_prompts, s->n_prompts + left);
		return parse_head(t, j, line, err);
	}
	if (left == 0)
		return util_err(err, s == NULL ? "not a trace header ({\"memra_spec_trace\": %d, "
		    "...})" : "a prompt past K=%d's %d (its header's \"prompts\")",
		    s == NULL ? SPECTRACE_VERSION : s->K, s == NULL ? 0 : s->n_prompts);
	return parse_prompt(t, j, err);
}

/* 1 when s[0..n) is white space only. */
static int
blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return 0;
	return 1;
}

struct spectrace *
spectrace_parse(const char *buf, size_t len, char *err)
{
	struct spectrace *t = spectrace_new();
	char why[UTIL_ERRLEN];
	size_t at = 0;
	int line = 0, left = 0, r;

	if (t == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	while (at < len) {
		const char *s = buf + at, *nl = memchr(s, '\n', len - at);
		size_t n = nl != NULL ? (size_t)(nl - s) : len - at;
		struct json *j;

		at += n + (nl != NULL);
		line++;
		if (blank(s, n))
			continue;
		if ((j = json_parse(s, n, why)) == NULL) {	/* "line 1 column C: ..." */
			const char *c = strstr(why, "column ");

			if (strncmp(why, "line 1 ", 7) == 0 && c != NULL)
				memmove(why, c, strlen(c) + 1);
			goto fail;
		}
		r = parse_line(t, j, line, left, why);
		json_free(j);
		if (r < 0)
			goto fail;
		left = r > 0 ? r : left - 1;
	}
	if (t->n_sec == 0) {
		util_err(err, "no trace: no header line");
		spectrace_free(t);
		return NULL;
	}
	if (left > 0) {
		const struct spectrace_section *s = &t->sec[t->n_sec - 1];

		util_err(err, "line %d (end of file): K=%d's section (line %d) has %d of its %d "
		    "prompts", line + 1, s->K, s->line, s->n_prompts, s->n_prompts + left);
		spectrace_free(t);
		return NULL;
	}
	return t;
fail:
	util_err(err, "line %d: %s", line, why);
	spectrace_free(t);
	return NULL;
}

/* --- writing --- */

static void
put_ids(FILE *fp, const int32_t *ids, int n)
{
	fputc('[', fp);
	for (int i = 0; i < n; i++)
		fprintf(fp, i ? ", %d" : "%d", (int)ids[i]);
	fputc(']', fp);
}

void
spectrace_write(const struct spectrace *t, FILE *fp)
{
	for (int i = 0; i < t->n_sec; i++) {
		const struct spectrace_section *s = &t->sec[i];
		int np = s->n_prompts - (t->open && i == t->n_sec - 1);

		if (np < 1)
			continue;
		fprintf(fp, "{\"memra_spec_trace\": %d, \"K\": %d, \"drafter\": \"%s\", \"model\": ",
		    SPECTRACE_VERSION, s->K, s->drafter);
		json_put_str(fp, s->model, strlen(s->model), 1);
		fprintf(fp, ", \"n_vocab\": %d, \"n\": %d, \"temp\": %.9g, \"prompts\": %d}\n",
		    s->n_vocab, s->n, s->temp, np);
		for (int j = 0; j < np; j++) {
			const struct spectrace_prompt *p = &s->p[j];

			fprintf(fp, "{\"prompt\": %d, \"ids\": ", j);
			put_ids(fp, p->ids, p->n_ids);
			fputs(", \"rounds\": [", fp);
			for (int r = 0; r < p->n_rounds; r++)
				fprintf(fp, r ? ", [%d, %d]" : "[%d, %d]", p->rounds[r].k,
				    p->rounds[r].accepted);
			fprintf(fp, "], \"tokens\": %d", p->tokens);
			if (p->out != NULL) {
				fputs(", \"out\": ", fp);
				put_ids(fp, p->out, p->tokens);
			}
			fputs("}\n", fp);
		}
	}
}
