#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define JSON_MAX_DEPTH 512

struct arena_blk {
	struct arena_blk *next;
	size_t	used, cap;
	max_align_t data[];
};

struct json_doc {
	struct json root;	/* first, so a root pointer is a doc pointer */
	struct arena_blk *blk;
};

struct parser {
	const char *s, *p, *end;
	struct json_doc *doc;
	char	*err;
	int	depth;
};

static void *
arena_alloc(struct json_doc *d, size_t n)
{
	struct arena_blk *b = d->blk;
	size_t a = sizeof(max_align_t), cap;
	void *r;

	n = (n + a - 1) / a * a;
	if (b == NULL || b->cap - b->used < n) {
		cap = n > (1 << 16) ? n : (1 << 16);
		if ((b = malloc(sizeof *b + cap)) == NULL)
			return NULL;
		b->cap = cap;
		b->used = 0;
		b->next = d->blk;
		d->blk = b;
	}
	r = (char *)b->data + b->used;
	b->used += n;
	return r;
}

static int
fail(struct parser *ps, const char *why)
{
	size_t line = 1, col = 1;
	const char *q;

	for (q = ps->s; q < ps->p && q < ps->end; q++) {
		if (*q == '\n') {
			line++;
			col = 1;
		} else
			col++;
	}
	if (ps->err != NULL && ps->err[0] == '\0')
		util_err(ps->err, "line %zu column %zu: %s", line, col, why);
	return -1;
}

static void
skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int parse_value(struct parser *, struct json *);

static int
hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t
put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = 0xC0 | cp >> 6;
		o[1] = 0x80 | (cp & 0x3F);
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = 0xE0 | cp >> 12;
		o[1] = 0x80 | (cp >> 6 & 0x3F);
		o[2] = 0x80 | (cp & 0x3F);
		return 3;
	}
	o[0] = 0xF0 | cp >> 18;
	o[1] = 0x80 | (cp >> 12 & 0x3F);
	o[2] = 0x80 | (cp >> 6 & 0x3F);
	o[3] = 0x80 | (cp & 0x3F);
	return 4;
}

/* Length of a valid UTF-8 sequence at p (1..4), or 0. */
static size_t
utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0], cp;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3F);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	return n;
}

/* Parse a string at ps->p (on the opening quote) into arena memory. */
static int
parse_string(struct parser *ps, char **out, size_t *outlen)
{
	const char *q = ps->p + 1;
	char *buf, *o;
	size_t raw = 0;

	/* upper bound on the decoded length: the raw length */
	while (q < ps->end && *q != '"') {
		if (*q == '\\' && q + 1 < ps->end)
			q++;
		q++;
	}
	if (q >= ps->end)
		return fail(ps, "unterminated string");
	raw = q - ps->p;
	if ((buf = o = arena_alloc(ps->doc, raw + 1)) == NULL)
		return fail(ps, "out of memory");
	ps->p++;
	while (*ps->p != '"') {
		unsigned char c = *ps->p;
		if (c < 0x20)
			return fail(ps, "control character in string");
		if (c != '\\') {
			size_t n = utf8_len((const unsigned char *)ps->p, (const unsigned char *)ps->end);
			if (n == 0)
				return fail(ps, "invalid UTF-8 in string");
			memcpy(o, ps->p, n);
			o += n;
			ps->p += n;
			continue;
		}
		ps->p++;
		switch (*ps->p) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned cp, lo;
			if (ps->end - ps->p < 5 || hex4(ps->p + 1, &cp) != 0)
				return fail(ps, "bad \\u escape");
			ps->p += 4;
			if (cp >= 0xD800 && cp < 0xDC00 && ps->end - ps->p >= 7 &&
			    ps->p[1] == '\\' && ps->p[2] == 'u' && hex4(ps->p + 3, &lo) == 0 &&
			    lo >= 0xDC00 && lo < 0xE000) {
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				ps->p += 6;
			}
			o += put_utf8(o, cp);
			break;
		}
		default:
			return fail(ps, "bad escape in string");
		}
		ps->p++;
	}
	ps->p++;
	*o = '\0';
	*out = buf;
	*outlen = o - buf;
	return 0;
}

static int
parse_number(struct parser *ps, struct json *j)
{
	const char *st = ps->p, *q = ps->p;
	int frac = 0;
	char tmp[64], *lit;
	size_t n;

	if (q < ps->end && *q == '-')
		q++;
	if (q >= ps->end || *q < '0' || *q > '9')
		return fail(ps, "bad number");
	if (*q == '0')
		q++;
	else
		while (q < ps->end && *q >= '0' && *q <= '9')
			q++;
	if (q < ps->end && *q == '.') {
		frac = 1;
		if (++q >= ps->end || *q < '0' || *q > '9')
			return fail(ps, "bad number");
		while (q < ps->end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < ps->end && (*q == 'e' || *q == 'E')) {
		frac = 1;
		q++;
		if (q < ps->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= ps->end || *q < '0' || *q > '9')
			return fail(ps, "bad number");
		while (q < ps->end && *q >= '0' && *q <= '9')
			q++;
	}
	n = q - st;
	if ((lit = arena_alloc(ps->doc, n + 1)) == NULL)
		return fail(ps, "out of memory");
	memcpy(lit, st, n);
	lit[n] = '\0';
	j->type = JSON_NUMBER;
	j->str = lit;
	j->n = n;
	j->num = strtod(lit, NULL);
	if (!frac && n < sizeof tmp) {
		errno = 0;
		long long v = strtoll(lit, NULL, 10);
		if (errno == 0) {
			j->is_int = 1;
			j->i = v;
		}
	}
	ps->p = q;
	return 0;
}

static int
match_lit(struct parser *ps, const char *lit, enum json_type t, struct json *j)
{
	size_t n = strlen(lit);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0)
		return fail(ps, "unexpected character");
	ps->p += n;
	j->type = t;
	return 0;
}

/* Growable scratch list of nodes (heap), copied into the arena at the end. */
struct list {
	struct json *v;
	char	**k;
	size_t	*kl;
	size_t	n, cap;
};

static int
list_push(struct list *l, int keyed)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct json *v = realloc(l->v, cap * sizeof *v);
		if (v == NULL)
			return -1;
		l->v = v;
		if (keyed) {
			char **k = realloc(l->k, cap * sizeof *k);
			size_t *kl;
			if (k == NULL)
				return -1;
			l->k = k;
			if ((kl = realloc(l->kl, cap * sizeof *kl)) == NULL)
				return -1;
			l->kl = kl;
		}
		l->cap = cap;
	}
	memset(&l->v[l->n], 0, sizeof l->v[0]);
	return 0;
}

static int
list_finish(struct parser *ps, struct list *l, struct json *j, int keyed)
{
	j->n = l->n;
	if (l->n > 0) {
		if ((j->items = arena_alloc(ps->doc, l->n * sizeof *j->items)) == NULL)
			return -1;
		memcpy(j->items, l->v, l->n * sizeof *j->items);
		if (keyed) {
			j->keys = arena_alloc(ps->doc, l->n * sizeof *j->keys);
			j->keylens = arena_alloc(ps->doc, l->n * sizeof *j->keylens);
			if (j->keys == NULL || j->keylens == NULL)
				return -1;
			memcpy(j->keys, l->k, l->n * sizeof *j->keys);
			memcpy(j->keylens, l->kl, l->n * sizeof *j->keylens);
		}
	}
	return 0;
}

static int
parse_container(struct parser *ps, struct json *j, int keyed)
{
	struct list l = { 0 };
	char close = keyed ? '}' : ']';
	int rc = -1;

	if (++ps->depth > JSON_MAX_DEPTH)
		return fail(ps, "nesting too deep");
	j->type = keyed ? JSON_OBJECT : JSON_ARRAY;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		ps->depth--;
		return 0;
	}
	for (;;) {
		skip_ws(ps);
		if (list_push(&l, keyed) != 0) {
			fail(ps, "out of memory");
			goto out;
		}
		if (keyed) {
			if (ps->p >= ps->end || *ps->p != '"') {
				fail(ps, "expected a member name");
				goto out;
			}
			if (parse_string(ps, &l.k[l.n], &l.kl[l.n]) != 0)
				goto out;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				fail(ps, "expected ':'");
				goto out;
			}
			ps->p++;
		}
		if (parse_value(ps, &l.v[l.n]) != 0)
			goto out;
		l.n++;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			break;
		}
		fail(ps, keyed ? "expected ',' or '}'" : "expected ',' or ']'");
		goto out;
	}
	if (list_finish(ps, &l, j, keyed) != 0)
		fail(ps, "out of memory");
	else
		rc = 0;
	ps->depth--;
out:
	free(l.v);
	free(l.k);
	free(l.kl);
	return rc;
}

static int
parse_value(struct parser *ps, struct json *j)
{
	skip_ws(ps);
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end of input");
	switch (*ps->p) {
	case '{': return parse_container(ps, j, 1);
	case '[': return parse_container(ps, j, 0);
	case '"':
		j->type = JSON_STRING;
		return parse_string(ps, &j->str, &j->n);
	case 't': return match_lit(ps, "true", JSON_TRUE, j);
	case 'f': return match_lit(ps, "false", JSON_FALSE, j);
	case 'n': return match_lit(ps, "null", JSON_NULL, j);
	default:  return parse_number(ps, j);
	}
}

struct json *
json_parse(const char *s, size_t len, char *err)
{
	struct json_doc *d = calloc(1, sizeof *d);
	struct parser ps = { s, s, s + len, d, err, 0 };

	if (err != NULL)
		err[0] = '\0';
	if (d == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	if (parse_value(&ps, &d->root) != 0)
		goto bad;
	skip_ws(&ps);
	if (ps.p != ps.end) {
		fail(&ps, "trailing characters after the document");
		goto bad;
	}
	return &d->root;
bad:
	json_free(&d->root);
	return NULL;
}

void
json_free(struct json *root)
{
	struct json_doc *d = (struct json_doc *)root;
	struct arena_blk *b, *nb;

	if (d == NULL)
		return;
	for (b = d->blk; b != NULL; b = nb) {
		nb = b->next;
		free(b);
	}
	free(d);
}

const struct json *
json_get(const struct json *obj, const char *key)
{
	size_t i, kl;

	if (obj == NULL || obj->type != JSON_OBJECT)
		return NULL;
	kl = strlen(key);
	for (i = obj->n; i-- > 0;)
		if (obj->keylens[i] == kl && memcmp(obj->keys[i], key, kl) == 0)
			return &obj->items[i];
	return NULL;
}

const struct json *
json_at(const struct json *arr, size_t i)
{
	if (arr == NULL || arr->type != JSON_ARRAY || i >= arr->n)
		return NULL;
	return &arr->items[i];
}

const char *
json_get_str(const struct json *obj, const char *key)
{
	const struct json *v = json_get(obj, key);

	return v != NULL && v->type == JSON_STRING ? v->str : NULL;
}

int
json_get_i64(const struct json *obj, const char *key, int64_t *out)
{
	const struct json *v = json_get(obj, key);

	if (v == NULL || v->type != JSON_NUMBER || !v->is_int)
		return -1;
	*out = v->i;
	return 0;
}

int
json_get_num(const struct json *obj, const char *key, double *out)
{
	const struct json *v = json_get(obj, key);

	if (v == NULL || v->type != JSON_NUMBER)
		return -1;
	*out = v->num;
	return 0;
}

int
json_get_bool(const struct json *obj, const char *key, int *out)
{
	const struct json *v = json_get(obj, key);

	if (v == NULL || (v->type != JSON_TRUE && v->type != JSON_FALSE))
		return -1;
	*out = v->type == JSON_TRUE;
	return 0;
}

void
json_put_str(FILE *fp, const char *s, size_t n, int ascii)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;

	fputc('"', fp);
	while (p < end) {
		unsigned c = *p;
		switch (c) {
		case '"': fputs("\\\"", fp); p++; continue;
		case '\\': fputs("\\\\", fp); p++; continue;
		case '\n': fputs("\\n", fp); p++; continue;
		case '\r': fputs("\\r", fp); p++; continue;
		case '\t': fputs("\\t", fp); p++; continue;
		case '\b': fputs("\\b", fp); p++; continue;
		case '\f': fputs("\\f", fp); p++; continue;
		}
		if (c < 0x20) {
			fprintf(fp, "\\u%04x", c);
			p++;
		} else if (c < 0x80 || !ascii) {
			fputc(c, fp);
			p++;
		} else {
			size_t l = utf8_len(p, end);
			unsigned cp;
			if (l == 0) {	/* not UTF-8: escape the byte as a Latin-1 code point */
				fprintf(fp, "\\u%04x", c);
				p++;
				continue;
			}
			cp = l == 2 ? (c & 0x1F) : l == 3 ? (c & 0x0F) : (c & 0x07);
			for (size_t i = 1; i < l; i++)
				cp = cp << 6 | (p[i] & 0x3F);
			if (cp >= 0x10000) {
				cp -= 0x10000;
				fprintf(fp, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
			} else
				fprintf(fp, "\\u%04x", cp);
			p += l;
		}
	}
	fputc('"', fp);
}

void
json_dump(FILE *fp, const struct json *j, int spaced)
{
	size_t i;

	switch (j->type) {
	case JSON_NULL: fputs("null", fp); break;
	case JSON_FALSE: fputs("false", fp); break;
	case JSON_TRUE: fputs("true", fp); break;
	case JSON_NUMBER: fputs(j->str, fp); break;
	case JSON_STRING: json_put_str(fp, j->str, j->n, 0); break;
	case JSON_ARRAY:
		fputc('[', fp);
		for (i = 0; i < j->n; i++) {
			if (i)
				fputs(spaced ? ", " : ",", fp);
			json_dump(fp, &j->items[i], spaced);
		}
		fputc(']', fp);
		break;
	case JSON_OBJECT:
		fputc('{', fp);
		for (i = 0; i < j->n; i++) {
			if (i)
				fputs(spaced ? ", " : ",", fp);
			json_put_str(fp, j->keys[i], j->keylens[i], 0);
			fputs(spaced ? ": " : ":", fp);
			json_dump(fp, &j->items[i], spaced);
		}
		fputc('}', fp);
		break;
	}
}
