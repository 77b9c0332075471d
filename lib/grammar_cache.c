/*
 * grammar: a cache of compiled grammars keyed by their schema's compact
 * JSON text, for a server whose requests repeat a few schemas (and so
 * share each grammar's mask cache).
 */
#include "grammar.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

struct gc_entry {
	char	*key;		/* the schema, compact; "" for any object */
	size_t	len;
	struct grammar *g;	/* the cache's reference */
	unsigned long used;	/* the cache's clock at the last hit */
};

struct grammar_cache {
	const struct grammar_vocab *v;
	pthread_mutex_t mu;
	struct gc_entry *e;	/* [max] */
	int	n, max;
	unsigned long clock;
};

struct grammar_cache *
grammar_cache_new(const struct grammar_vocab *v, int max)
{
	struct grammar_cache *c = calloc(1, sizeof *c);

	if (c == NULL || max < 1 || (c->e = calloc(max, sizeof *c->e)) == NULL) {
		free(c);
		return NULL;
	}
	c->v = v, c->max = max;
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

void
grammar_cache_free(struct grammar_cache *c)
{
	if (c == NULL)
		return;
	for (int i = 0; i < c->n; i++)
		free(c->e[i].key), grammar_free(c->e[i].g);
	pthread_mutex_destroy(&c->mu);
	free(c->e);
	free(c);
}

/* The schema's compact text (malloc'd, *len), "" for NULL; NULL when out of memory. */
static char *
schema_key(const struct json *schema, size_t *len)
{
	char *b = NULL;
	FILE *fp;

	*len = 0;
	if (schema == NULL)
		return strdup("");
	if ((fp = open_memstream(&b, len)) == NULL)
		return NULL;
	json_dump(fp, schema, 0);
	if (fclose(fp) != 0) {
		free(b);
		return NULL;
	}
	return b;
}

/* Under the lock: the entry of key, or -1. */
static int
find(const struct grammar_cache *c, const char *key, size_t len)
{
	for (int i = 0; i < c->n; i++)
		if (c->e[i].len == len && memcmp(c->e[i].key, key, len) == 0)
			return i;
	return -1;
}

/* Under the lock: key (taken) and g (a reference taken) into the cache, the
 * least recently used entry dropped when full. */
static void
insert(struct grammar_cache *c, char *key, size_t len, struct grammar *g)
{
	int i = c->n;

	if (c->n == c->max) {
		i = 0;
		for (int k = 1; k < c->n; k++)
			if (c->e[k].used < c->e[i].used)
				i = k;
		free(c->e[i].key), grammar_free(c->e[i].g);
	} else
		c->n++;
	c->e[i] = (struct gc_entry){ key, len, g, ++c->clock };
}

/* The grammar of key[len] (taken) from the cache, or compiled (schema, or
 * with cl the calls of t[n]) and kept: a reference for the caller, or
 * NULL with err. */
static struct grammar *
get(struct grammar_cache *c, char *key, size_t len, const struct json *schema,
    const struct grammar_tool *t, int n, const struct grammar_calls *cl, int *bad, char *err)
{
	struct grammar *g = NULL;
	int i;

	if (key == NULL) {
		util_err(err, "grammar: out of memory");
		return NULL;
	}
	pthread_mutex_lock(&c->mu);
	if ((i = find(c, key, len)) >= 0)
		c->e[i].used = ++c->clock, g = grammar_retain(c->e[i].g);
	pthread_mutex_unlock(&c->mu);
	if (g != NULL) {
		free(key);
		return g;
	}
	/* compiled unlocked: two requests may both compile it; one is kept */
	g = cl != NULL ? grammar_compile_calls(t, n, cl, c->v, NULL, bad, err) :
	    grammar_compile(schema, c->v, NULL, err);
	if (g == NULL) {
		free(key);
		return NULL;
	}
	pthread_mutex_lock(&c->mu);
	if (find(c, key, len) < 0)
		insert(c, key, len, grammar_retain(g)), key = NULL;
	pthread_mutex_unlock(&c->mu);
	free(key);
	return g;
}

struct grammar *
grammar_cache_get(struct grammar_cache *c, const struct json *schema, char *err)
{
	size_t len;
	char *key = schema_key(schema, &len);

	return get(c, key, len, schema, NULL, 0, NULL, NULL, err);
}

/* A tool-call document's key: a byte no schema text begins with, the
 * options, then each tool's strictness, name and parameters. */
static char *
calls_key(const struct grammar_tool *t, int n, const struct grammar_calls *cl, size_t *len)
{
	char *b = NULL;
	FILE *fp;

	if ((fp = open_memstream(&b, len)) == NULL)
		return NULL;
	fprintf(fp, "\001%d %d %d %d %d", cl->form, cl->start, cl->named, cl->parallel, cl->think);
	for (int i = 0; i < n; i++) {
		fprintf(fp, "\n%d ", t[i].strict);
		json_put_str(fp, t[i].name, strlen(t[i].name), 0);
		if (t[i].params != NULL)
			json_dump(fp, t[i].params, 0);
	}
	if (fclose(fp) != 0) {
		free(b);
		return NULL;
	}
	return b;
}

struct grammar *
grammar_cache_calls(struct grammar_cache *c, const struct grammar_tool *t, int n,
    const struct grammar_calls *cl, int *bad, char *err)
{
	size_t len;
	char *key = calls_key(t, n, cl, &len);

	*bad = -1;
	return get(c, key, len, NULL, t, n, cl, bad, err);
}
