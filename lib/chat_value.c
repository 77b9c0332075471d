/*
 * chat_value: template values and the Python behaviour they must copy:
 * str() and repr() of every type, float repr (shortest round trip),
 * json.dumps, equality and ordering, str.isspace and str.strip.
 */
#include "chat.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"

/* --- arena --- */
struct arena_blk {
	struct arena_blk *next;
	size_t	size, used;
	max_align_t data[];
};

void *
arena_alloc(struct arena *a, size_t n)
{
	struct arena_blk *b = a->head;
	const size_t al = sizeof(max_align_t);

	n = (n + al - 1) / al * al;
	if (n == 0)
		n = al;
	if (a->failed)
		return NULL;
	if (a->limit && a->used + n > a->limit) {
		a->failed = 1;
		return NULL;
	}
	if (b == NULL || b->size - b->used < n) {
		size_t size = n > 65536 ? n : 65536;
		if ((b = malloc(sizeof *b + size)) == NULL) {
			a->failed = 1;
			return NULL;
		}
		b->size = size;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	void *p = (char *)b->data + b->used;
	b->used += n;
	a->used += n;
	memset(p, 0, n);
	return p;
}

char *
arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	if (p != NULL && n)
		memcpy(p, s, n);
	return p;
}

void
arena_free(struct arena *a)
{
	struct arena_blk *b = a->head, *next;

	for (; b != NULL; b = next) {
		next = b->next;
		free(b);
	}
	a->head = NULL;
	a->used = 0;
}

/* --- sbuf: in the arena, or malloc'd when a is NULL --- */
static int
sbuf_grow(struct sbuf *b, size_t more)
{
	size_t need = b->n + more + 1, cap;
	char *p;

	if (b->failed)
		return -1;
	if (need < more || (b->max && b->n + more > b->max)) {
		b->failed = 1;
		return -1;
	}
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	if (b->a == NULL) {
		p = realloc(b->p, cap);
	} else {
		p = arena_alloc(b->a, cap);
		if (p != NULL && b->n)
			memcpy(p, b->p, b->n);
	}
	if (p == NULL) {
		b->failed = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void
sbuf_put(struct sbuf *b, const char *s, size_t n)
{
	if (n == 0 && b->p != NULL)
		return;
	if (sbuf_grow(b, n) < 0)
		return;
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void
sbuf_putc(struct sbuf *b, char c)
{
	sbuf_put(b, &c, 1);
}

void
sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (k > 0)
		sbuf_put(b, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
}

/* --- constructors --- */
struct cv
cv_undef(const char *name)
{
	struct cv v = { .t = CV_UNDEF, .name = name };

	return v;
}

struct cv
cv_none(void)
{
	struct cv v = { .t = CV_NONE };

	return v;
}

struct cv
cv_bool(int b)
{
	struct cv v = { .t = CV_BOOL, .u.b = !!b };

	return v;
}

struct cv
cv_int(int64_t i)
{
	struct cv v = { .t = CV_INT, .u.i = i };

	return v;
}

struct cv
cv_float(double f)
{
	struct cv v = { .t = CV_FLOAT, .u.f = f };

	return v;
}


struct cv
cv_str(const char *s, size_t n)
{
	struct cv v = { .t = CV_STR, .n = n, .u.s = s };

	return v;
}

struct cv
cv_list_new(struct arena *a, size_t cap)
{
	struct cv v = { .t = CV_LIST };

	if ((v.u.l = arena_alloc(a, sizeof *v.u.l)) != NULL && cap > 0) {
		if ((v.u.l->v = arena_alloc(a, cap * sizeof(struct cv))) == NULL)
			v.u.l = NULL;
		else
			v.u.l->cap = cap;
	}
	return v;
}

struct cv
cv_dict_new(struct arena *a, size_t cap)
{
	struct cv v = { .t = CV_DICT };

	if ((v.u.d = arena_alloc(a, sizeof *v.u.d)) != NULL && cap > 0) {
		v.u.d->k = arena_alloc(a, cap * sizeof(struct cv));
		v.u.d->v = arena_alloc(a, cap * sizeof(struct cv));
		if (v.u.d->k == NULL || v.u.d->v == NULL)
			v.u.d = NULL;
		else
			v.u.d->cap = cap;
	}
	return v;
}

int
cv_list_push(struct arena *a, struct cv_list *l, struct cv v)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 4;
		struct cv *p = arena_alloc(a, cap * sizeof *p);
		if (p == NULL)
			return -1;
		if (l->n)
			memcpy(p, l->v, l->n * sizeof *p);
		l->v = p;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	return 0;
}

struct cv *
cv_dict_get(const struct cv_dict *d, struct cv k)
{
	if (k.t == CV_STR)
		return cv_dict_gets(d, k.u.s, k.n);
	for (size_t i = d->n; i-- > 0;)
		if (cv_equal(d->k[i], k))
			return &d->v[i];
	return NULL;
}

struct cv *
cv_dict_gets(const struct cv_dict *d, const char *k, size_t n)
{
	for (size_t i = d->n; i-- > 0;)
		if (d->k[i].t == CV_STR && d->k[i].n == n && memcmp(d->k[i].u.s, k, n) == 0)
			return &d->v[i];
	return NULL;
}

int
cv_dict_set(struct arena *a, struct cv_dict *d, struct cv k, struct cv v)
{
	struct cv *p = cv_dict_get(d, k);

	if (p != NULL) {
		*p = v;
		return 0;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 4;
		struct cv *nk = arena_alloc(a, cap * sizeof *nk), *nv = arena_alloc(a, cap * sizeof *nv);
		if (nk == NULL || nv == NULL)
			return -1;
		if (d->n) {
			memcpy(nk, d->k, d->n * sizeof *nk);
			memcpy(nv, d->v, d->n * sizeof *nv);
		}
		d->k = nk;
		d->v = nv;
		d->cap = cap;
	}
	d->k[d->n] = k;
	d->v[d->n++] = v;
	return 0;
}

/* --- truth, equality, order --- */
int
cv_truthy(struct cv v)
{
	switch (v.t) {
	case CV_UNDEF: case CV_NONE: return 0;
	case CV_BOOL: return v.u.b;
	case CV_INT: return v.u.i != 0;
	case CV_FLOAT: return v.u.f != 0;
	case CV_STR: return v.n > 0;
	case CV_LIST: return v.gen || v.u.l->n > 0;	/* a generator is true */
	case CV_DICT: return v.u.d->n > 0;
	default: return 1;
	}
}

static int
is_num(struct cv v)
{
	return v.t == CV_BOOL || v.t == CV_INT || v.t == CV_FLOAT;
}

static int
num_cmp(struct cv a, struct cv b)	/* -1, 0, 1; 2 when unordered (nan) */
{
	if (a.t != CV_FLOAT && b.t != CV_FLOAT) {
		int64_t x = a.t == CV_BOOL ? a.u.b : a.u.i, y = b.t == CV_BOOL ? b.u.b : b.u.i;
		return x < y ? -1 : x > y;
	}
	double x = a.t == CV_FLOAT ? a.u.f : a.t == CV_BOOL ? a.u.b : (double)a.u.i;
	double y = b.t == CV_FLOAT ? b.u.f : b.t == CV_BOOL ? b.u.b : (double)b.u.i;
	return x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
}

/* nesting deeper than this compares unequal (Python would raise RecursionError) */
#define CMP_DEPTH 1000

static int
equal_rec(struct cv a, struct cv b, int depth)
{
	if (depth > CMP_DEPTH)
		return 0;
	if (is_num(a) && is_num(b))
		return num_cmp(a, b) == 0;
	if (a.t != b.t)
		return 0;
	switch (a.t) {
	case CV_UNDEF: case CV_NONE: return 1;
	case CV_STR: return a.n == b.n && memcmp(a.u.s, b.u.s, a.n) == 0;
	case CV_LIST:
		if (a.tuple != b.tuple || a.u.l->n != b.u.l->n)
			return 0;
		if (a.u.l == b.u.l)	/* Python compares items by identity first */
			return 1;
		for (size_t i = 0; i < a.u.l->n; i++)
			if (!equal_rec(a.u.l->v[i], b.u.l->v[i], depth + 1))
				return 0;
		return 1;
	case CV_DICT:
		if (a.u.d->n != b.u.d->n)
			return 0;
		if (a.u.d == b.u.d)
			return 1;
		for (size_t i = 0; i < a.u.d->n; i++) {
			struct cv *o = cv_dict_get(b.u.d, a.u.d->k[i]);
			if (o == NULL || !equal_rec(a.u.d->v[i], *o, depth + 1))
				return 0;
		}
		return 1;
	case CV_NS: return a.u.d == b.u.d;
	case CV_MACRO: return a.u.mac == b.u.mac;
	case CV_FUNC: return a.u.fn == b.u.fn;
	case CV_LOOP: return a.u.loop == b.u.loop;
	default: return 0;
	}
}

int
cv_equal(struct cv a, struct cv b)
{
	return equal_rec(a, b, 0);
}

static int
less_rec(struct cv a, struct cv b, int *lt, int depth)
{
	if (depth > CMP_DEPTH)
		return -1;
	if (is_num(a) && is_num(b)) {
		*lt = num_cmp(a, b) == -1;
		return 0;
	}
	if (a.t == CV_STR && b.t == CV_STR) {
		size_t n = a.n < b.n ? a.n : b.n;
		int c = n ? memcmp(a.u.s, b.u.s, n) : 0;
		*lt = c < 0 || (c == 0 && a.n < b.n);
		return 0;
	}
	if (a.t == CV_LIST && b.t == CV_LIST && a.tuple == b.tuple) {
		size_t i;
		for (i = 0; i < a.u.l->n && i < b.u.l->n; i++)
			if (!equal_rec(a.u.l->v[i], b.u.l->v[i], depth + 1))
				return less_rec(a.u.l->v[i], b.u.l->v[i], lt, depth + 1);
		*lt = a.u.l->n < b.u.l->n;
		return 0;
	}
	return -1;
}

int
cv_less(struct cv a, struct cv b, int *lt)
{
	return less_rec(a, b, lt, 0);
}

const char *
cv_type_name(struct cv v)
{
	switch (v.t) {
	case CV_UNDEF: return "Undefined";
	case CV_NONE: return "NoneType";
	case CV_BOOL: return "bool";
	case CV_INT: return "int";
	case CV_FLOAT: return "float";
	case CV_STR: return "str";
	case CV_LIST: return v.gen ? "generator" : v.tuple ? "tuple" : "list";
	case CV_DICT: return "dict";
	case CV_NS: return "Namespace";
	case CV_MACRO: return "Macro";
	case CV_FUNC: return "function";
	case CV_LOOP: return "LoopContext";
	}
	return "object";
}

/* --- UTF-8 --- */
static uint32_t
u8_decode(const char *s, size_t n, size_t i, size_t *w)
{
	const unsigned char *p = (const unsigned char *)s + i;
	size_t left = n - i;

	if (p[0] < 0x80 || left < 2) {
		*w = 1;
		return p[0];
	}
	if (p[0] < 0xE0) {
		*w = 2;
		return (uint32_t)(p[0] & 31) << 6 | (p[1] & 63);
	}
	if (p[0] < 0xF0 || left < 4) {
		if (left < 3) {
			*w = 1;
			return p[0];
		}
		*w = 3;
		return (uint32_t)(p[0] & 15) << 12 | (uint32_t)(p[1] & 63) << 6 | (p[2] & 63);
	}
	*w = 4;
	return (uint32_t)(p[0] & 7) << 18 | (uint32_t)(p[1] & 63) << 12 |
	    (uint32_t)(p[2] & 63) << 6 | (p[3] & 63);
}

size_t
u8_len(const char *s, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += ((unsigned char)s[i] & 0xC0) != 0x80;
	return k;
}

size_t
u8_offset(const char *s, size_t n, size_t cp)
{
	size_t i = 0;

	while (i < n && cp > 0) {
		i++;
		while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
			i++;
		cp--;
	}
	return i;
}

size_t
u8_prev(const char *s, size_t i)
{
	if (i == 0)
		return 0;
	i--;
	while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
		i--;
	return i;
}

static int
cp_isspace(uint32_t c)
{
	return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
	    c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
	    c == 0x202f || c == 0x205f || c == 0x3000;
}

int
u8_space_at(const char *s, size_t n, size_t i, size_t *w)
{
	return cp_isspace(u8_decode(s, n, i, w));
}

static int
in_chars(uint32_t c, const char *chars, size_t cn)
{
	for (size_t i = 0, w; i < cn; i += w)
		if (u8_decode(chars, cn, i, &w) == c)
			return 1;
	return 0;
}

void
py_strip(const char *s, size_t n, const char *chars, size_t cn, int left, int right,
    size_t *off, size_t *len)
{
	size_t a = 0, b = n, w;

	while (left && a < b) {
		uint32_t c = u8_decode(s, n, a, &w);
		if (chars ? !in_chars(c, chars, cn) : !cp_isspace(c))
			break;
		a += w;
	}
	while (right && b > a) {
		size_t p = u8_prev(s, b);
		if (p < a)
			p = a;
		uint32_t c = u8_decode(s, n, p, &w);
		if (chars ? !in_chars(c, chars, cn) : !cp_isspace(c))
			break;
		b = p;
	}
	*off = a;
	*len = b - a;
}

/* --- str() and repr() --- */
void
cv_float_repr(char *buf, size_t size, double f)
{
	char tmp[40], dig[20];
	int p, e, nd = 0, neg;

	if (isnan(f)) {
		snprintf(buf, size, "nan");
		return;
	}
	if (isinf(f)) {
		snprintf(buf, size, f < 0 ? "-inf" : "inf");
		return;
	}
	for (p = 1; p <= 17; p++) {
		snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
		if (strtod(tmp, NULL) == f)
			break;
	}
	neg = tmp[0] == '-';
	for (const char *q = tmp + neg; *q && *q != 'e'; q++)
		if (*q >= '0' && *q <= '9')
			dig[nd++] = *q;
	e = atoi(strchr(tmp, 'e') + 1);
	while (nd > 1 && dig[nd - 1] == '0')
		nd--;
	dig[nd] = 0;
	char *o = buf, *end = buf + size - 1;
#define PUT(c) do { if (o < end) *o++ = (c); } while (0)
	if (neg)
		PUT('-');
	if (e < -4 || e >= 16) {
		PUT(dig[0]);
		if (nd > 1) {
			PUT('.');
			for (int i = 1; i < nd; i++)
				PUT(dig[i]);
		}
		snprintf(tmp, sizeof tmp, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
		for (char *q = tmp; *q; q++)
			PUT(*q);
	} else if (e < 0) {
		PUT('0');
		PUT('.');
		for (int i = 0; i < -e - 1; i++)
			PUT('0');
		for (int i = 0; i < nd; i++)
			PUT(dig[i]);
	} else {
		for (int i = 0; i <= e; i++)
			PUT(i < nd ? dig[i] : '0');
		PUT('.');
		if (nd > e + 1)
			for (int i = e + 1; i < nd; i++)
				PUT(dig[i]);
		else
			PUT('0');
	}
#undef PUT
	*o = 0;
}

static int
cp_printable(uint32_t c)
{
	if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0xa0) || c == 0xad)
		return 0;
	if ((c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
	    (c >= 0x205f && c <= 0x206f) || c == 0x3000 || c == 0xfeff || c == 0x1680)
		return 0;
	if ((c >= 0xd800 && c <= 0xf8ff) || c >= 0xf0000 || (c >= 0xfff0 && c <= 0xfffb))
		return 0;
	return 1;
}

static void
str_repr(struct sbuf *b, const char *s, size_t n)
{
	char q = '\'';

	if (memchr(s, '\'', n) != NULL && memchr(s, '"', n) == NULL)
		q = '"';
	sbuf_putc(b, q);
	for (size_t i = 0, w; i < n; i += w) {
		uint32_t c = u8_decode(s, n, i, &w);
		if (c == (uint32_t)q || c == '\\') {
			sbuf_putc(b, '\\');
			sbuf_putc(b, (char)c);
		} else if (c == '\n') {
			sbuf_put(b, "\\n", 2);
		} else if (c == '\r') {
			sbuf_put(b, "\\r", 2);
		} else if (c == '\t') {
			sbuf_put(b, "\\t", 2);
		} else if (!cp_printable(c)) {
			if (c < 0x100)
				sbuf_printf(b, "\\x%02x", c);
			else if (c < 0x10000)
				sbuf_printf(b, "\\u%04x", c);
			else
				sbuf_printf(b, "\\U%08x", c);
		} else {
			sbuf_put(b, s + i, w);
		}
	}
	sbuf_putc(b, q);
}

/*
 * repr as Python prints it: a container already being printed shows as [...], (...)
 * or {...} (a namespace can hold itself); nesting deeper than REPR_DEPTH fails, as
 * Python's recursion limit makes jinja2 fail.
 */
#define REPR_DEPTH 1000

struct repr {
	struct sbuf *b;
	const void *open[REPR_DEPTH];
	int	depth;
};

static int repr_value(struct repr *r, struct cv v, int quote);

static int
repr_enter(struct repr *r, const void *p, const char *cycle)
{
	for (int i = 0; i < r->depth; i++)
		if (r->open[i] == p) {
			sbuf_put(r->b, cycle, strlen(cycle));
			return 1;
		}
	if (r->depth == REPR_DEPTH)
		return -1;
	r->open[r->depth++] = p;
	return 0;
}

static int
seq_repr(struct repr *r, struct cv v)
{
	const struct cv_list *l = v.u.l;
	int e = repr_enter(r, l, v.tuple ? "(...)" : "[...]");

	if (e)
		return e < 0 ? -1 : 0;
	sbuf_putc(r->b, v.tuple ? '(' : '[');
	for (size_t i = 0; i < l->n; i++) {
		if (i)
			sbuf_put(r->b, ", ", 2);
		if (repr_value(r, l->v[i], 1) < 0)
			return -1;
	}
	if (v.tuple && l->n == 1)
		sbuf_putc(r->b, ',');
	sbuf_putc(r->b, v.tuple ? ')' : ']');
	r->depth--;
	return 0;
}

static int
dict_repr(struct repr *r, const struct cv_dict *d)
{
	int e = repr_enter(r, d, "{...}");

	if (e)
		return e < 0 ? -1 : 0;
	sbuf_putc(r->b, '{');
	for (size_t i = 0; i < d->n; i++) {
		if (i)
			sbuf_put(r->b, ", ", 2);
		if (repr_value(r, d->k[i], 1) < 0)
			return -1;
		sbuf_put(r->b, ": ", 2);
		if (repr_value(r, d->v[i], 1) < 0)
			return -1;
	}
	sbuf_putc(r->b, '}');
	r->depth--;
	return 0;
}

/* str(v) when !quote, repr(v) when quote */
static int
repr_value(struct repr *r, struct cv v, int quote)
{
	struct sbuf *b = r->b;
	char tmp[64];

	switch (v.t) {
	case CV_UNDEF: return 0;
	case CV_NONE: sbuf_put(b, "None", 4); return 0;
	case CV_BOOL: v.u.b ? sbuf_put(b, "True", 4) : sbuf_put(b, "False", 5); return 0;
	case CV_INT: sbuf_printf(b, "%lld", (long long)v.u.i); return 0;
	case CV_FLOAT: cv_float_repr(tmp, sizeof tmp, v.u.f); sbuf_put(b, tmp, strlen(tmp)); return 0;
	case CV_STR:
		if (quote)
			str_repr(b, v.u.s, v.n);
		else
			sbuf_put(b, v.u.s, v.n);
		return 0;
	case CV_LIST: return seq_repr(r, v);
	case CV_DICT: return dict_repr(r, v.u.d);
	case CV_NS:
		sbuf_put(b, "<Namespace ", 11);
		if (dict_repr(r, v.u.d) < 0)
			return -1;
		sbuf_putc(b, '>');
		return 0;
	case CV_LOOP:
		sbuf_printf(b, "<LoopContext %zu/%zu>", v.u.loop->i + 1, v.u.loop->items->n);
		return 0;
	default:
		return -1;
	}
}

static int
repr_run(struct sbuf *b, struct cv v, int quote)
{
	struct repr *r = malloc(sizeof *r);
	int rc;

	if (r == NULL)
		return -1;
	r->b = b;
	r->depth = 0;
	rc = repr_value(r, v, quote);
	free(r);
	return rc;
}

int
cv_repr_to(struct sbuf *b, struct cv v)
{
	return repr_run(b, v, 1);
}

int
cv_str_to(struct sbuf *b, struct cv v)
{
	return repr_run(b, v, 0);
}

/* --- json.dumps --- */
static void
json_str(struct sbuf *b, const char *s, size_t n, int ascii)
{
	sbuf_putc(b, '"');
	for (size_t i = 0, w; i < n; i += w) {
		uint32_t c = u8_decode(s, n, i, &w);
		switch (c) {
		case '"': sbuf_put(b, "\\\"", 2); continue;
		case '\\': sbuf_put(b, "\\\\", 2); continue;
		case '\n': sbuf_put(b, "\\n", 2); continue;
		case '\r': sbuf_put(b, "\\r", 2); continue;
		case '\t': sbuf_put(b, "\\t", 2); continue;
		case '\b': sbuf_put(b, "\\b", 2); continue;
		case '\f': sbuf_put(b, "\\f", 2); continue;
		}
		if (c < 0x20 || (ascii && c > 0x7e && c != 0x7f)) {
			if (c >= 0x10000) {
				c -= 0x10000;
				sbuf_printf(b, "\\u%04x\\u%04x", 0xd800 + (c >> 10), 0xdc00 + (c & 0x3ff));
			} else {
				sbuf_printf(b, "\\u%04x", c);
			}
		} else {
			sbuf_put(b, s + i, w);
		}
	}
	sbuf_putc(b, '"');
}

static void
json_nl(struct sbuf *b, const struct json_opts *o, int depth)
{
	sbuf_putc(b, '\n');
	for (int i = 0; i < o->indent * depth; i++)
		sbuf_putc(b, ' ');
}

static int
json_key(struct sbuf *b, struct cv k, const struct json_opts *o, char *err)
{
	char tmp[64];

	switch (k.t) {
	case CV_STR: json_str(b, k.u.s, k.n, o->ascii); return 0;
	case CV_INT: sbuf_printf(b, "\"%lld\"", (long long)k.u.i); return 0;
	case CV_BOOL: sbuf_put(b, k.u.b ? "\"true\"" : "\"false\"", k.u.b ? 6 : 7); return 0;
	case CV_NONE: sbuf_put(b, "\"null\"", 6); return 0;
	case CV_FLOAT:
		cv_float_repr(tmp, sizeof tmp, k.u.f);
		sbuf_printf(b, "\"%s\"", isinf(k.u.f) ? (k.u.f < 0 ? "-Infinity" : "Infinity") :
		    isnan(k.u.f) ? "NaN" : tmp);
		return 0;
	default:
		return util_err(err, "keys must be str, int, float, bool or None, not %s",
		    cv_type_name(k));
	}
}

static int
json_dict(struct sbuf *b, const struct cv_dict *d, const struct json_opts *o, int depth,
    char *err)
{
	size_t *ord = NULL;

	if (d->n == 0) {
		sbuf_put(b, "{}", 2);
		return 0;
	}
	if (o->sort_keys) {
		struct sbuf tb = { .a = b->a };
		ord = (size_t *)(void *)arena_alloc(b->a, d->n * sizeof *ord);
		if (ord == NULL) {
			b->failed = 1;
			return 0;
		}
		for (size_t i = 0; i < d->n; i++) {
			if (d->k[i].t != CV_STR)
				return util_err(err, "'<' not supported between instances of '%s' and 'str'",
				    cv_type_name(d->k[i]));
			size_t j = i;
			for (; j > 0; j--) {
				int lt = 0;
				cv_less(d->k[i], d->k[ord[j - 1]], &lt);
				if (!lt)
					break;
				ord[j] = ord[j - 1];
			}
			ord[j] = i;
		}
		(void)tb;
	}
	sbuf_putc(b, '{');
	for (size_t i = 0; i < d->n; i++) {
		size_t k = ord ? ord[i] : i;
		if (i)
			sbuf_put(b, o->item_sep, o->item_sep_n);
		if (o->indent >= 0)
			json_nl(b, o, depth + 1);
		if (json_key(b, d->k[k], o, err) < 0)
			return -1;
		sbuf_put(b, o->key_sep, o->key_sep_n);
		if (cv_json_to(b, d->v[k], o, depth + 1, err) < 0)
			return -1;
	}
	if (o->indent >= 0)
		json_nl(b, o, depth);
	sbuf_putc(b, '}');
	return 0;
}

int
cv_json_to(struct sbuf *b, struct cv v, const struct json_opts *o, int depth, char *err)
{
	char tmp[64];

	if (depth > 500)
		return util_err(err, "maximum recursion depth exceeded in json.dumps");
	switch (v.t) {
	case CV_NONE: sbuf_put(b, "null", 4); return 0;
	case CV_BOOL: sbuf_put(b, v.u.b ? "true" : "false", v.u.b ? 4 : 5); return 0;
	case CV_INT: sbuf_printf(b, "%lld", (long long)v.u.i); return 0;
	case CV_FLOAT:
		if (isnan(v.u.f))
			sbuf_put(b, "NaN", 3);
		else if (isinf(v.u.f))
			v.u.f < 0 ? sbuf_put(b, "-Infinity", 9) : sbuf_put(b, "Infinity", 8);
		else {
			cv_float_repr(tmp, sizeof tmp, v.u.f);
			sbuf_put(b, tmp, strlen(tmp));
		}
		return 0;
	case CV_STR: json_str(b, v.u.s, v.n, o->ascii); return 0;
	case CV_LIST:
		if (v.gen) {
			util_err(err, "json: Object of type generator is not JSON serializable");
			return -1;
		}
		if (v.u.l->n == 0) {
			sbuf_put(b, "[]", 2);
			return 0;
		}
		sbuf_putc(b, '[');
		for (size_t i = 0; i < v.u.l->n; i++) {
			if (i)
				sbuf_put(b, o->item_sep, o->item_sep_n);
			if (o->indent >= 0)
				json_nl(b, o, depth + 1);
			if (cv_json_to(b, v.u.l->v[i], o, depth + 1, err) < 0)
				return -1;
		}
		if (o->indent >= 0)
			json_nl(b, o, depth);
		sbuf_putc(b, ']');
		return 0;
	case CV_DICT:
		return json_dict(b, v.u.d, o, depth, err);
	default:
		return util_err(err, "Object of type %s is not JSON serializable", cv_type_name(v));
	}
}
