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

/* --- the reply parser --- */
static const char *
find(const char *s, size_t n, const char *pat)
{
	size_t m = strlen(pat);

	for (size_t i = 0; i + m <= n; i++)
		if (memcmp(s + i, pat, m) == 0)
			return s + i;
	return NULL;
}

static char *
dup_trim_nl(const char *s, size_t n)
{
	char *p;

	while (n > 0 && *s == '\n') {
		s++;
		n--;
	}
	while (n > 0 && s[n - 1] == '\n')
		n--;
	if ((p = malloc(n + 1)) != NULL) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

/* Write a parameter value: its JSON when it is JSON, else a JSON string. */
static void
put_value(FILE *fp, const char *v, size_t n)
{
	char err[UTIL_ERRLEN];
	struct json *j = json_parse(v, n, err);

	if (j != NULL && j->type != JSON_STRING)
		json_dump(fp, j, 0);
	else
		json_put_str(fp, v, n, 0);
	json_free(j);
}

/* "KEY":VALUE of function fn's parameter, the value typed by ty (NULL, or
 * its answer NULL: as put_value writes it). */
static void
put_param(FILE *fp, const struct chat_types *ty, const char *fn, const char *key, size_t kn,
    const char *v, size_t vn)
{
	char *tv = ty != NULL ? ty->value(ty->arg, fn, key, kn, v, vn) : NULL;

	json_put_str(fp, key, kn, 0);
	fputc(':', fp);
	if (tv != NULL)
		fputs(tv, fp);
	else
		put_value(fp, v, vn);
	free(tv);
}

/* <function=NAME><parameter=P>value</parameter>...</function> */
static int
parse_xml_call(const char *s, size_t n, const struct chat_types *ty, struct chat_call *c,
    char *err)
{
	const char *e = s + n, *gt, *p;
	char *buf = NULL;
	size_t bn = 0;
	FILE *fp;
	int first = 1;

	if ((gt = memchr(s, '>', n)) == NULL || gt - s < 10)
		return util_err(err, "tool call: no function name");
	if ((c->name = dup_trim_nl(s + 10, (size_t)(gt - s - 10))) == NULL ||
	    (fp = open_memstream(&buf, &bn)) == NULL)
		return util_err(err, "out of memory");
	fputc('{', fp);
	for (p = gt + 1; (p = find(p, (size_t)(e - p), "<parameter=")) != NULL;) {
		const char *ne = memchr(p, '>', (size_t)(e - p)), *ve;
		if (ne == NULL)
			break;
		if ((ve = find(ne + 1, (size_t)(e - ne - 1), "</parameter>")) == NULL)
			ve = find(ne + 1, (size_t)(e - ne - 1), "</function>");
		if (ve == NULL)
			ve = e;
		const char *v = ne + 1;
		size_t vn = (size_t)(ve - v);
		if (vn > 0 && v[0] == '\n') { v++; vn--; }
		if (vn > 0 && v[vn - 1] == '\n') vn--;
		if (!first)
			fputc(',', fp);
		first = 0;
		put_param(fp, ty, c->name, p + 11, (size_t)(ne - p - 11), v, vn);
		p = ve;
	}
	fputc('}', fp);
	if (fclose(fp) != 0)
		return util_err(err, "out of memory");
	c->arguments = buf;
	return 0;
}

/* {"name": ..., "arguments": {...}} */
static int
parse_json_call(const char *s, size_t n, struct chat_call *c, char *err)
{
	char jerr[UTIL_ERRLEN];
	struct json *j = json_parse(s, n, jerr);
	const struct json *a;
	char *buf = NULL;
	size_t bn = 0;
	FILE *fp;

	if (j == NULL)
		return util_err(err, "tool call: %s", jerr);
	if (json_get_str(j, "name") == NULL) {
		json_free(j);
		return util_err(err, "tool call: no \"name\"");
	}
	c->name = strdup(json_get_str(j, "name"));
	a = json_get(j, "arguments");
	if (a == NULL)
		a = json_get(j, "parameters");
	if (a != NULL && a->type == JSON_STRING)
		c->arguments = strdup(a->str);
	else if ((fp = open_memstream(&buf, &bn)) != NULL) {
		if (a != NULL)
			json_dump(fp, a, 0);
		else
			fputs("{}", fp);
		fclose(fp);
		c->arguments = buf;
	}
	json_free(j);
	if (c->name == NULL || c->arguments == NULL)
		return util_err(err, "out of memory");
	return 0;
}

static int
add_call(struct chat_reply *r, const char *s, size_t n, const struct chat_types *ty,
    char *err)
{
	struct chat_call *calls = realloc(r->calls, (r->ncalls + 1) * sizeof *calls), *c;
	size_t off, len;

	if (calls == NULL)
		return util_err(err, "out of memory");
	r->calls = calls;
	c = &calls[r->ncalls++];
	memset(c, 0, sizeof *c);
	py_strip(s, n, NULL, 0, 1, 1, &off, &len);
	s += off;
	if (len >= 10 && memcmp(s, "<function=", 10) == 0)
		return parse_xml_call(s, len, ty, c, err);
	return parse_json_call(s, len, c, err);
}

/* content: text outside think and tool-call blocks, trimmed */
static int
split_calls(struct chat_reply *r, const char *s, size_t n, const struct chat_types *ty,
    char *err)
{
	const char *e = s + n, *p = s, *b;
	char *buf = NULL;
	size_t bn = 0, off, len;
	FILE *fp = open_memstream(&buf, &bn);

	if (fp == NULL)
		return util_err(err, "out of memory");
	while ((b = find(p, (size_t)(e - p), "<tool_call>")) != NULL) {
		const char *q = find(b + 11, (size_t)(e - b - 11), "</tool_call>");
		fwrite(p, 1, (size_t)(b - p), fp);
		if (q == NULL) {
			fclose(fp);
			free(buf);
			return util_err(err, "tool call: no </tool_call>");
		}
		if (add_call(r, b + 11, (size_t)(q - b - 11), ty, err) < 0) {
			fclose(fp);
			free(buf);
			return -1;
		}
		p = q + 12;
	}
	fwrite(p, 1, (size_t)(e - p), fp);
	if (fclose(fp) != 0)
		return util_err(err, "out of memory");
	py_strip(buf, bn, NULL, 0, 1, 1, &off, &len);
	memmove(buf, buf + off, len);
	buf[len] = 0;
	r->content = buf;
	return 0;
}

int
chat_parse_reply(const char *text, size_t len, int started_in_think, struct chat_reply *out,
    char *err)
{
	return chat_parse_reply_typed(text, len, started_in_think, NULL, out, err);
}

int
chat_parse_reply_typed(const char *text, size_t len, int started_in_think,
    const struct chat_types *ty, struct chat_reply *out, char *err)
{
	const char *s = text, *e = text + len, *open, *close;
	size_t off, n;

	memset(out, 0, sizeof *out);
	py_strip(s, len, NULL, 0, 1, 0, &off, &n);
	open = len - off >= 7 && memcmp(s + off, "<think>", 7) == 0 ? s + off : NULL;
	if (started_in_think || open != NULL) {
		const char *r = open ? open + 7 : s;
		close = find(r, (size_t)(e - r), "</think>");
		if ((out->reasoning = dup_trim_nl(r, (size_t)((close ? close : e) - r))) == NULL)
			return util_err(err, "out of memory");
		s = close ? close + 8 : e;
	}
	if (split_calls(out, s, (size_t)(e - s), ty, err) < 0) {
		chat_reply_free(out);
		return -1;
	}
	return 0;
}

void
chat_reply_free(struct chat_reply *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->ncalls; i++) {
		free(r->calls[i].name);
		free(r->calls[i].arguments);
	}
	free(r->calls);
	free(r->reasoning);
	free(r->content);
	memset(r, 0, sizeof *r);
}
