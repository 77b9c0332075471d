/*
 * chat: compile and render chat templates (the work is in chat_parse.c,
 * chat_eval.c and chat_value.c), and split a model's reply into its
 * reasoning, content and tool calls.
 */
#include "chat.h"

#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"
#include "json.h"

#define ARENA_LIMIT ((size_t)1 << 30)	/* memory one render may use */

/* 0 when s[0..n) is well-formed UTF-8 (no surrogates, no overlongs) */
static int
utf8_check(const char *s, size_t n, size_t *bad)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		size_t w = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		uint32_t cp;
		if (w == 0 || i + w > n)
			goto fail;
		cp = w == 1 ? c : c & (0x7f >> w);
		for (size_t k = 1; k < w; k++) {
			if ((p[i + k] & 0xC0) != 0x80)
				goto fail;
			cp = cp << 6 | (p[i + k] & 63);
		}
		if ((w == 2 && cp < 0x80) || (w == 3 && cp < 0x800) || (w == 4 && cp < 0x10000) ||
		    cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			goto fail;
		i += w;
		continue;
fail:
		*bad = i;
		return -1;
	}
	return 0;
}

struct chat *
chat_new(const char *tmpl, size_t len, char *err)
{
	struct chat *c = calloc(1, sizeof *c);
	size_t bad;

	if (c == NULL) {
		util_err(err, "template: out of memory");
		return NULL;
	}
	if (utf8_check(tmpl, len, &bad) < 0) {
		int line = 1;
		for (size_t i = 0; i < bad; i++)
			line += tmpl[i] == '\n';
		util_err(err, "template line %d: not valid UTF-8", line);
		free(c);
		return NULL;
	}
	if (chat_parse(c, tmpl, len, err) < 0) {
		chat_free(c);
		return NULL;
	}
	return c;
}

void
chat_free(struct chat *c)
{
	if (c == NULL)
		return;
	arena_free(&c->arena);
	free(c);
}

/* A JSON tree as template values; strings stay in the tree. */
static int
from_json(struct arena *a, const struct json *j, struct cv *out)
{
	switch (j->type) {
	case JSON_NULL: *out = cv_none(); return 0;
	case JSON_FALSE: *out = cv_bool(0); return 0;
	case JSON_TRUE: *out = cv_bool(1); return 0;
	case JSON_NUMBER: *out = j->is_int ? cv_int(j->i) : cv_float(j->num); return 0;
	case JSON_STRING: *out = cv_str(j->str, j->n); return 0;
	case JSON_ARRAY:
		*out = cv_list_new(a, j->n);
		if (out->u.l == NULL)
			return -1;
		for (size_t i = 0; i < j->n; i++)
			if (from_json(a, &j->items[i], &out->u.l->v[i]) < 0)
				return -1;
		out->u.l->n = j->n;
		return 0;
	case JSON_OBJECT:
		*out = cv_dict_new(a, j->n);
		if (out->u.d == NULL)
			return -1;
		for (size_t i = 0; i < j->n; i++) {
			struct cv v;
			if (from_json(a, &j->items[i], &v) < 0 ||
			    cv_dict_set(a, out->u.d, cv_str(j->keys[i], j->keylens[i]), v) < 0)
				return -1;
		}
		return 0;
	}
	return -1;
}

static int
set_default(struct arena *a, struct cv_dict *d, const char *k, struct cv v, int force)
{
	if (!force && cv_dict_gets(d, k, strlen(k)) != NULL)
		return 0;
	return cv_dict_set(a, d, cv_str(k, strlen(k)), v);
}

char *
chat_render(const struct chat *c, const struct json *ctx, const struct chat_opts *opts,
    size_t *len, char *err)
{
	struct arena a = { .limit = ARENA_LIMIT };
	struct chat_opts_int o = { .max_output = (size_t)64 << 20, .max_steps = 10000000 };
	struct sbuf out = { 0 };
	struct cv vars;
	int agp = opts ? opts->add_generation_prompt : -1;

	if (opts && opts->max_output)
		o.max_output = opts->max_output;
	if (opts && opts->max_steps)
		o.max_steps = opts->max_steps;
	if (ctx != NULL && ctx->type != JSON_OBJECT) {
		util_err(err, "template context: not a JSON object");
		return NULL;
	}
	if (ctx != NULL ? from_json(&a, ctx, &vars) < 0 : (vars = cv_dict_new(&a, 4)).u.d == NULL)
		goto oom;
	if (set_default(&a, vars.u.d, "tools", cv_none(), 0) < 0 ||
	    set_default(&a, vars.u.d, "documents", cv_none(), 0) < 0 ||
	    set_default(&a, vars.u.d, "add_generation_prompt", cv_bool(agp > 0), agp >= 0) < 0)
		goto oom;
	sbuf_put(&out, "", 0);
	if (out.failed)
		goto oom;
	if (chat_eval_render(c, vars.u.d, &o, &out, &a, err) < 0) {
		arena_free(&a);
		free(out.p);
		return NULL;
	}
	arena_free(&a);
	if (len != NULL)
		*len = out.n;
	return out.p;
oom:
	arena_free(&a);
	free(out.p);
	util_err(err, "template: out of memory");
	return NULL;
}
