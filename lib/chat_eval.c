/*
 * chat_eval: the renderer.  Statements write into an output buffer;
 * expressions evaluate to values with jinja2's semantics over Python's:
 * attribute lookup tries the Python attribute (a method) before the item,
 * a missing value is Undefined (prints as nothing, fails when used as an
 * object), and the sandbox refuses methods that change a list or dict.
 */
#include "chat.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_impl.h"

#define MAX_CALL_DEPTH 64
#define MAX_RANGE 100000	/* jinja2.sandbox.MAX_RANGE */
#define MAX_ARGS 8
#define MAX_EVAL_DEPTH 600	/* expression and statement nesting, macros included */

struct frame {
	struct frame *parent;
	struct cv_dict vars;
};

struct rs {
	struct arena *a;
	const struct cv_dict *ctx;
	struct frame *root;
	struct sbuf *out;
	uint64_t steps, max_steps;
	size_t	max_output;
	int	depth, edepth;
	int	brk;		/* 1 break, 2 continue */
	int	failed;
	char	*err;
};

struct args {
	struct cv pos[MAX_ARGS];
	size_t	npos;
	const char *kn[MAX_ARGS];
	size_t	knl[MAX_ARGS];
	struct cv kv[MAX_ARGS];
	size_t	nkw;
};

enum {
	F_RANGE = 1, F_NAMESPACE, F_DICT, F_RAISE, F_STRFTIME,
	/* methods: str */
	M_STARTSWITH, M_ENDSWITH, M_SPLIT, M_RSPLIT, M_STRIP, M_LSTRIP, M_RSTRIP,
	M_UPPER, M_LOWER, M_TITLE, M_CAPITALIZE, M_REPLACE, M_FIND, M_RFIND, M_COUNT,
	M_JOIN, M_SPLITLINES, M_ISDIGIT, M_ISALPHA, M_ISSPACE, M_ISALNUM, M_FORMAT,
	/* dict */
	M_ITEMS, M_KEYS, M_VALUES, M_GET,
	/* list */
	M_INDEX, M_LCOUNT,
	M_UNSAFE
};

static struct cv eval(struct rs *, const struct node *, struct frame *);
static int charge(struct rs *, const struct node *, size_t);
static int exec_body(struct rs *, const struct node *, struct frame *);

static struct cv
rfail(struct rs *R, const struct node *x, const char *fmt, ...)
{
	if (!R->failed) {
		char msg[UTIL_ERRLEN];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof msg, fmt, ap);
		va_end(ap);
		util_err(R->err, "template line %d: %s", x ? x->line : 0, msg);
		R->failed = 1;
	}
	return cv_undef(NULL);
}

static struct cv
oom(struct rs *R, const struct node *x)
{
	if (R->a->limit && R->a->used + 65536 >= R->a->limit)
		return rfail(R, x, "template uses too much memory");
	return rfail(R, x, "out of memory");
}

static struct cv
undef_n(const char *name, size_t n)
{
	struct cv v = cv_undef(name);

	v.n = n;
	return v;
}

static struct cv
undef_fail(struct rs *R, const struct node *x, struct cv u)
{
	if (u.name != NULL)
		return rfail(R, x, "'%.*s' is undefined", (int)(u.n > 80 ? 80 : u.n), u.name);
	return rfail(R, x, "a value is undefined");
}

/* str(v) as a string value (in the arena when it must be built) */
static struct cv
to_str(struct rs *R, const struct node *x, struct cv v)
{
	struct sbuf b = { .a = R->a };

	if (v.t == CV_STR)
		return v;
	if (v.t == CV_UNDEF)
		return cv_str("", 0);
	if (cv_str_to(&b, v) < 0)
		return rfail(R, x, "cannot convert %s to a string", cv_type_name(v));
	if (b.failed)
		return oom(R, x);
	return cv_str(b.p ? b.p : "", b.n);
}

/* --- variables --- */
static struct cv *
frame_lookup(struct frame *f, const char *name, size_t n)
{
	for (; f != NULL; f = f->parent) {
		struct cv *v = cv_dict_gets(&f->vars, name, n);
		if (v != NULL)
			return v;
	}
	return NULL;
}

static int
frame_set(struct rs *R, struct frame *f, const char *name, size_t n, struct cv v)
{
	return cv_dict_set(R->a, &f->vars, cv_str(name, n), v);
}

static struct cv
mkfunc(struct rs *R, const struct node *x, int id, struct cv self)
{
	struct cv v = { .t = CV_FUNC };

	if ((v.u.fn = arena_alloc(R->a, sizeof *v.u.fn)) == NULL)
		return oom(R, x);
	v.u.fn->id = id;
	v.u.fn->self = self;
	return v;
}

static int
name_is(const char *s, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static struct cv
lookup(struct rs *R, const struct node *x, struct frame *f)
{
	static const struct { const char *s; int id; } globals[] = {
		{ "range", F_RANGE }, { "namespace", F_NAMESPACE }, { "dict", F_DICT },
		{ "raise_exception", F_RAISE }, { "strftime_now", F_STRFTIME },
	};
	struct cv *v = frame_lookup(f, x->name, x->namelen);

	if (v != NULL)
		return *v;
	if ((v = cv_dict_gets(R->ctx, x->name, x->namelen)) != NULL)
		return *v;
	for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
		if (name_is(x->name, x->namelen, globals[i].s))
			return mkfunc(R, x, globals[i].id, cv_none());
	return undef_n(x->name, x->namelen);
}

/* --- attribute and item access --- */
static int
method_id(struct cv obj, const char *s, size_t n)
{
	/* kind: 's' str, 'd' dict, 'l' list, 't' list and tuple */
	static const struct { char kind; const char *s; int id; } m[] = {
		{ 's', "startswith", M_STARTSWITH }, { 's', "endswith", M_ENDSWITH },
		{ 's', "split", M_SPLIT }, { 's', "rsplit", M_RSPLIT }, { 's', "strip", M_STRIP },
		{ 's', "lstrip", M_LSTRIP }, { 's', "rstrip", M_RSTRIP }, { 's', "upper", M_UPPER },
		{ 's', "lower", M_LOWER }, { 's', "title", M_TITLE },
		{ 's', "capitalize", M_CAPITALIZE }, { 's', "replace", M_REPLACE },
		{ 's', "find", M_FIND }, { 's', "rfind", M_RFIND }, { 's', "count", M_COUNT },
		{ 's', "join", M_JOIN }, { 's', "splitlines", M_SPLITLINES },
		{ 's', "isdigit", M_ISDIGIT }, { 's', "isalpha", M_ISALPHA },
		{ 's', "isspace", M_ISSPACE }, { 's', "isalnum", M_ISALNUM }, { 's', "format", M_FORMAT },
		{ 'd', "items", M_ITEMS }, { 'd', "keys", M_KEYS }, { 'd', "values", M_VALUES },
		{ 'd', "get", M_GET }, { 'd', "pop", M_UNSAFE }, { 'd', "popitem", M_UNSAFE },
		{ 'd', "update", M_UNSAFE }, { 'd', "setdefault", M_UNSAFE },
		{ 'd', "clear", M_UNSAFE }, { 'd', "copy", M_UNSAFE },
		{ 't', "index", M_INDEX }, { 't', "count", M_LCOUNT }, { 'l', "append", M_UNSAFE },
		{ 'l', "extend", M_UNSAFE }, { 'l', "insert", M_UNSAFE }, { 'l', "pop", M_UNSAFE },
		{ 'l', "remove", M_UNSAFE }, { 'l', "reverse", M_UNSAFE }, { 'l', "sort", M_UNSAFE },
		{ 'l', "clear", M_UNSAFE }, { 'l', "copy", M_UNSAFE },
	};
	char kind = obj.t == CV_STR ? 's' : obj.t == CV_DICT ? 'd' :
	    obj.t == CV_LIST ? (obj.tuple ? 't' : 'l') : 0;

	if (!kind)
		return 0;
	for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
		if ((m[i].kind == kind || (m[i].kind == 't' && kind == 'l')) && name_is(s, n, m[i].s))
			return m[i].id;
	return 0;
}

static struct cv
loop_attr(struct rs *R, const struct node *x, struct loop_state *L, const char *s, size_t n)
{
	size_t len = L->items->n, i = L->i;

	if (name_is(s, n, "index")) return cv_int((int64_t)i + 1);
	if (name_is(s, n, "index0")) return cv_int((int64_t)i);
	if (name_is(s, n, "revindex")) return cv_int((int64_t)(len - i));
	if (name_is(s, n, "revindex0")) return cv_int((int64_t)(len - i - 1));
	if (name_is(s, n, "first")) return cv_bool(i == 0);
	if (name_is(s, n, "last")) return cv_bool(i + 1 == len);
	if (name_is(s, n, "length")) return cv_int((int64_t)len);
	if (name_is(s, n, "depth")) return cv_int(L->depth + 1);
	if (name_is(s, n, "depth0")) return cv_int(L->depth);
	if (name_is(s, n, "previtem"))
		return i > 0 ? L->items->v[i - 1] : undef_n("previtem", 8);
	if (name_is(s, n, "nextitem"))
		return i + 1 < len ? L->items->v[i + 1] : undef_n("nextitem", 8);
	(void)R;
	(void)x;
	return undef_n(s, n);
}

static struct cv
getattr_(struct rs *R, const struct node *x, struct cv obj, const char *s, size_t n)
{
	int id;
	struct cv *v;

	if (obj.t == CV_UNDEF)
		return undef_fail(R, x, obj);
	if (n > 0 && s[0] == '_')
		return undef_n(s, n);
	if ((id = method_id(obj, s, n)) != 0)
		return mkfunc(R, x, id, obj);
	if ((obj.t == CV_DICT || obj.t == CV_NS) && (v = cv_dict_gets(obj.u.d, s, n)) != NULL)
		return *v;
	if (obj.t == CV_LOOP)
		return loop_attr(R, x, obj.u.loop, s, n);
	return undef_n(s, n);
}

static int
seq_index(struct cv key, size_t len, size_t *out)
{
	int64_t i;

	if (key.t == CV_INT)
		i = key.u.i;
	else if (key.t == CV_BOOL)
		i = key.u.b;
	else
		return -1;
	if (i < 0)
		i += (int64_t)len;
	if (i < 0 || (uint64_t)i >= len)
		return -1;
	*out = (size_t)i;
	return 0;
}

static struct cv
getitem(struct rs *R, const struct node *x, struct cv obj, struct cv key)
{
	size_t i;

	if (obj.t == CV_UNDEF)
		return undef_fail(R, x, obj);
	if (obj.t == CV_DICT) {
		struct cv *v = cv_dict_get(obj.u.d, key);
		if (v != NULL)
			return *v;
	} else if (obj.t == CV_LIST) {
		if (obj.gen)	/* jinja2's getitem: the TypeError is an undefined */
			return cv_undef(NULL);
		if (seq_index(key, obj.u.l->n, &i) == 0)
			return obj.u.l->v[i];
	} else if (obj.t == CV_STR) {
		if (charge(R, x, obj.n) < 0)
			return cv_undef(NULL);
		if (seq_index(key, u8_len(obj.u.s, obj.n), &i) == 0) {
			size_t a = u8_offset(obj.u.s, obj.n, i);
			size_t b = u8_offset(obj.u.s, obj.n, i + 1);
			return cv_str(obj.u.s + a, b - a);
		}
	}
	if (key.t == CV_STR)
		return getattr_(R, x, obj, key.u.s, key.n);
	return cv_undef(NULL);
}

/* Python slice indices for length len */
static int
slice_bounds(struct rs *R, const struct node *x, struct cv s, struct cv e, struct cv st,
    int64_t len, int64_t *a, int64_t *b, int64_t *step)
{
	*step = 1;
	if (st.t == CV_INT)
		*step = st.u.i;
	else if (st.t != CV_NONE && st.t != CV_UNDEF)
		return rfail(R, x, "slice indices must be integers"), -1;
	if (*step == 0)
		return rfail(R, x, "slice step cannot be zero"), -1;
	int64_t lo = *step < 0 ? -1 : 0, hi = *step < 0 ? len - 1 : len;
	for (int k = 0; k < 2; k++) {
		struct cv v = k ? e : s;
		int64_t *o = k ? b : a;
		if (v.t == CV_NONE || v.t == CV_UNDEF) {
			*o = (*step < 0) == (k == 0) ? hi : lo;
			continue;
		}
		if (v.t != CV_INT && v.t != CV_BOOL)
			return rfail(R, x, "slice indices must be integers"), -1;
		int64_t i = v.t == CV_BOOL ? v.u.b : v.u.i;
		if (i < 0) {
			i += len;
			if (i < lo)
				i = lo;
		} else if (i > hi) {
			i = hi;
		}
		*o = i;
	}
	return 0;
}

static struct cv
slice(struct rs *R, const struct node *x, struct cv obj, struct cv s, struct cv e, struct cv st)
{
	int64_t a, b, step, len;
	int isstr = obj.t == CV_STR;
	struct cv out;

	if (obj.t == CV_UNDEF)
		return undef_fail(R, x, obj);
	if (!isstr && obj.t != CV_LIST)
		return rfail(R, x, "'%s' object is not subscriptable", cv_type_name(obj));
	len = isstr ? (int64_t)u8_len(obj.u.s, obj.n) : (int64_t)obj.u.l->n;
	if (slice_bounds(R, x, s, e, st, len, &a, &b, &step) < 0)
		return cv_undef(NULL);
	if (isstr && step == 1) {
		if (b <= a)
			return cv_str("", 0);
		size_t p = u8_offset(obj.u.s, obj.n, (size_t)a), q = u8_offset(obj.u.s, obj.n, (size_t)b);
		return cv_str(obj.u.s + p, q - p);
	}
	struct sbuf sb = { .a = R->a };
	size_t *off = NULL;
	if (isstr) {	/* where each code point starts, and the end */
		if (charge(R, x, obj.n) < 0)
			return cv_undef(NULL);
		if ((off = arena_alloc(R->a, ((size_t)len + 1) * sizeof *off)) == NULL)
			return oom(R, x);
		for (size_t i = 0, k = 0; i <= obj.n; i++)
			if (i == obj.n || ((unsigned char)obj.u.s[i] & 0xC0) != 0x80)
				off[k++] = i;
	}
	out = cv_list_new(R->a, 0);
	if (out.u.l == NULL)
		return oom(R, x);
	out.tuple = obj.tuple;
	for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
		if (isstr) {
			sbuf_put(&sb, obj.u.s + off[i], off[i + 1] - off[i]);
		} else if (cv_list_push(R->a, out.u.l, obj.u.l->v[i]) < 0) {
			return oom(R, x);
		}
	}
	if (isstr)
		return sb.failed ? oom(R, x) : cv_str(sb.p ? sb.p : "", sb.n);
	return out;
}

/* --- iteration --- */
static struct cv
to_list(struct rs *R, const struct node *x, struct cv v)
{
	struct cv l;

	switch (v.t) {
	case CV_LIST:
		l = v;
		l.tuple = 0;
		l.gen = 0;
		return l;
	case CV_UNDEF:
		return cv_list_new(R->a, 0);
	case CV_DICT:
		l = cv_list_new(R->a, v.u.d->n);
		if (l.u.l == NULL)
			return oom(R, x);
		for (size_t i = 0; i < v.u.d->n; i++)
			l.u.l->v[l.u.l->n++] = v.u.d->k[i];
		return l;
	case CV_STR:
		l = cv_list_new(R->a, v.n);
		if (l.u.l == NULL)
			return oom(R, x);
		for (size_t i = 0; i < v.n;) {
			size_t j = i + 1;
			while (j < v.n && ((unsigned char)v.u.s[j] & 0xC0) == 0x80)
				j++;
			l.u.l->v[l.u.l->n++] = cv_str(v.u.s + i, j - i);
			i = j;
		}
		return l;
	default:
		return rfail(R, x, "'%s' object is not iterable", cv_type_name(v));
	}
}

static int step(struct rs *, const struct node *);

/* string work costs steps too: one per 256 bytes touched */
static int
charge(struct rs *R, const struct node *x, size_t bytes)
{
	R->steps += bytes >> 8;
	return step(R, x);
}

static int
step(struct rs *R, const struct node *x)
{
	if (++R->steps > R->max_steps) {
		rfail(R, x, "template runs too long (over %llu steps)",
		    (unsigned long long)R->max_steps);
		return -1;
	}
	if (R->a->failed) {
		oom(R, x);
		return -1;
	}
	return 0;
}

/* --- operators --- */
static int
is_num(struct cv v)
{
	return v.t == CV_BOOL || v.t == CV_INT || v.t == CV_FLOAT;
}

static double
num_f(struct cv v)
{
	return v.t == CV_FLOAT ? v.u.f : v.t == CV_BOOL ? v.u.b : (double)v.u.i;
}

static int64_t
num_i(struct cv v)
{
	return v.t == CV_BOOL ? v.u.b : v.u.i;
}

static struct cv
type_error(struct rs *R, const struct node *x, const char *op, struct cv a, struct cv b)
{
	if (a.t == CV_UNDEF)
		return undef_fail(R, x, a);
	if (b.t == CV_UNDEF)
		return undef_fail(R, x, b);
	return rfail(R, x, "unsupported operand type(s) for %s: '%s' and '%s'", op,
	    cv_type_name(a), cv_type_name(b));
}

static struct cv
seq_concat(struct rs *R, const struct node *x, struct cv a, struct cv b)
{
	if (a.t == CV_STR) {
		char *p;
		if (charge(R, x, a.n + b.n) < 0)
			return cv_undef(NULL);
		p = arena_alloc(R->a, a.n + b.n + 1);
		if (p == NULL)
			return oom(R, x);
		if (a.n)
			memcpy(p, a.u.s, a.n);
		if (b.n)
			memcpy(p + a.n, b.u.s, b.n);
		return cv_str(p, a.n + b.n);
	}
	struct cv l = cv_list_new(R->a, a.u.l->n + b.u.l->n);
	if (l.u.l == NULL)
		return oom(R, x);
	if (a.u.l->n)
		memcpy(l.u.l->v, a.u.l->v, a.u.l->n * sizeof(struct cv));
	if (b.u.l->n)
		memcpy(l.u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(struct cv));
	l.u.l->n = a.u.l->n + b.u.l->n;
	l.tuple = a.tuple;
	return l;
}

static struct cv f_escape(struct rs *, const struct node *, struct cv);

/* str + str, where Markup (|safe) on either side escapes the other side and
 * the sum is Markup, as markupsafe's __add__/__radd__ do */
static struct cv
markup_concat(struct rs *R, const struct node *x, struct cv a, struct cv b)
{
	struct cv r;

	if (a.safe != b.safe) {
		if (a.safe)
			b = f_escape(R, x, b);
		else
			a = f_escape(R, x, a);
		if (R->failed)
			return a;
	}
	r = seq_concat(R, x, a, b);
	r.safe = a.safe || b.safe;
	return r;
}

static struct cv
seq_repeat(struct rs *R, const struct node *x, struct cv s, int64_t k)
{
	size_t unit = s.t == CV_STR ? s.n : s.u.l->n, total;
	struct cv out;

	if (k <= 0 || unit == 0)
		return s.t == CV_STR ? cv_str("", 0) : cv_list_new(R->a, 0);
	if ((uint64_t)k > (R->max_output ? R->max_output : ((size_t)1 << 26)) / unit)
		return rfail(R, x, "repetition too large");
	total = unit * (size_t)k;
	if (s.t == CV_STR) {
		char *p = arena_alloc(R->a, total + 1);
		if (p == NULL)
			return oom(R, x);
		for (size_t i = 0; i < (size_t)k; i++)
			memcpy(p + i * unit, s.u.s, unit);
		return cv_str(p, total);
	}
	out = cv_list_new(R->a, total);
	if (out.u.l == NULL)
		return oom(R, x);
	for (size_t i = 0; i < (size_t)k; i++)
		memcpy(out.u.l->v + i * unit, s.u.l->v, unit * sizeof(struct cv));
	out.u.l->n = total;
	out.tuple = s.tuple;
	return out;
}

static struct cv
int_op(struct rs *R, const struct node *x, int op, int64_t a, int64_t b)
{
	int64_t r;

	switch (op) {
	case OP_ADD: if (__builtin_add_overflow(a, b, &r)) goto ovf; return cv_int(r);
	case OP_SUB: if (__builtin_sub_overflow(a, b, &r)) goto ovf; return cv_int(r);
	case OP_MUL: if (__builtin_mul_overflow(a, b, &r)) goto ovf; return cv_int(r);
	case OP_FLOORDIV: case OP_MOD:
		if (b == 0)
			return rfail(R, x, "integer division or modulo by zero");
		if (a == INT64_MIN && b == -1)
			goto ovf;
		r = a / b;
		if ((a % b != 0) && ((a < 0) != (b < 0)))
			r--;
		return op == OP_FLOORDIV ? cv_int(r) : cv_int(a - r * b);
	case OP_POW:
		if (b < 0)
			return cv_float(pow((double)a, (double)b));
		r = 1;
		for (int64_t i = 0; i < b; i++) {
			if (__builtin_mul_overflow(r, a, &r))
				goto ovf;
			if (r == 0 || r == 1)
				break;
		}
		if (r == -1 && a == -1)
			r = b % 2 ? -1 : 1;
		return cv_int(r);
	}
ovf:
	return rfail(R, x, "integer overflow (beyond 64 bits)");
}

static struct cv
arith(struct rs *R, const struct node *x, int op, struct cv a, struct cv b)
{
	static const char *const names[] = { "", "+", "-", "*", "/", "//", "%", "**" };

	if (is_num(a) && is_num(b)) {
		if (op == OP_DIV) {
			if (num_f(b) == 0)
				return rfail(R, x, "division by zero");
			return cv_float(num_f(a) / num_f(b));
		}
		if (a.t != CV_FLOAT && b.t != CV_FLOAT)
			return int_op(R, x, op, num_i(a), num_i(b));
		double p = num_f(a), q = num_f(b);
		switch (op) {
		case OP_ADD: return cv_float(p + q);
		case OP_SUB: return cv_float(p - q);
		case OP_MUL: return cv_float(p * q);
		case OP_POW: return cv_float(pow(p, q));
		case OP_FLOORDIV: case OP_MOD: {
			if (q == 0)
				return rfail(R, x, "float division by zero");
			double m = fmod(p, q);
			if (m != 0 && ((q < 0) != (m < 0)))
				m += q;
			if (op == OP_MOD)
				return cv_float(m);
			double d = (p - m) / q, fd = floor(d);
			return cv_float(d - fd > 0.5 ? fd + 1 : fd);
		}
		}
	}
	if (op == OP_ADD && a.t == CV_STR && b.t == CV_STR)
		return markup_concat(R, x, a, b);
	if (op == OP_ADD && a.t == CV_LIST && b.t == CV_LIST && a.tuple == b.tuple)
		return seq_concat(R, x, a, b);
	if (op == OP_MUL && (a.t == CV_STR || a.t == CV_LIST) && (b.t == CV_INT || b.t == CV_BOOL))
		return seq_repeat(R, x, a, num_i(b));
	if (op == OP_MUL && (b.t == CV_STR || b.t == CV_LIST) && (a.t == CV_INT || a.t == CV_BOOL))
		return seq_repeat(R, x, b, num_i(a));
	if (op == OP_MOD && a.t == CV_STR)
		return rfail(R, x, "unsupported printf-style formatting with '%%'");
	return type_error(R, x, names[op], a, b);
}

/* Python's "item in container" */
static int
contains(struct rs *R, const struct node *x, struct cv c, struct cv item)
{
	switch (c.t) {
	case CV_UNDEF:
		return 0;
	case CV_STR:
		if (item.t != CV_STR) {
			if (item.t == CV_UNDEF)
				undef_fail(R, x, item);
			else
				rfail(R, x, "'in <string>' requires string as left operand, not %s",
				    cv_type_name(item));
			return -1;
		}
		if (item.n == 0)
			return 1;
		if (item.n > c.n)
			return 0;
		if (charge(R, x, c.n) < 0)
			return -1;
		for (size_t i = 0; i + item.n <= c.n; i++)
			if (memcmp(c.u.s + i, item.u.s, item.n) == 0)
				return 1;
		return 0;
	case CV_LIST:
		for (size_t i = 0; i < c.u.l->n; i++)
			if (cv_equal(c.u.l->v[i], item))
				return 1;
		return 0;
	case CV_DICT:
		return cv_dict_get(c.u.d, item) != NULL;
	default:
		rfail(R, x, "argument of type '%s' is not iterable", cv_type_name(c));
		return -1;
	}
}

static int
compare(struct rs *R, const struct node *x, int op, struct cv a, struct cv b)
{
	int lt, r;
	static const char *const names[] = { [OP_LT] = "<", [OP_LE] = "<=", [OP_GT] = ">",
	    [OP_GE] = ">=" };

	switch (op) {
	case OP_EQ: return cv_equal(a, b);
	case OP_NE: return !cv_equal(a, b);
	case OP_IN: return contains(R, x, b, a);
	case OP_NOTIN: r = contains(R, x, b, a); return r < 0 ? r : !r;
	}
	if (a.t == CV_UNDEF || b.t == CV_UNDEF) {
		undef_fail(R, x, a.t == CV_UNDEF ? a : b);
		return -1;
	}
	if (op == OP_GT || op == OP_LE) {
		struct cv t = a;
		a = b;
		b = t;
	}
	if (cv_less(a, b, &lt) < 0) {
		rfail(R, x, "'%s' not supported between instances of '%s' and '%s'", names[op],
		    cv_type_name(op == OP_GT || op == OP_LE ? b : a),
		    cv_type_name(op == OP_GT || op == OP_LE ? a : b));
		return -1;
	}
	/* with the swap above, a <= b is not (b < a) and a >= b is not (a < b):
	 * both are !lt (nan aside) */
	return op == OP_LT || op == OP_GT ? lt : !lt;
}

static struct cv
eval_cmp(struct rs *R, const struct node *x, struct frame *f)
{
	struct cv a = eval(R, x->a, f);

	for (size_t i = 0; i < x->nv && !R->failed; i++) {
		struct cv b = eval(R, x->v[i], f);
		if (R->failed)
			break;
		int r = compare(R, x, x->ops[i], a, b);
		if (r < 0)
			break;
		if (!r)
			return cv_bool(0);
		a = b;
	}
	return R->failed ? cv_undef(NULL) : cv_bool(1);
}

static struct cv
eval_concat(struct rs *R, const struct node *x, struct frame *f)
{
	struct sbuf b = { .a = R->a };

	for (size_t i = 0; i < x->nv; i++) {
		struct cv v = eval(R, x->v[i], f);
		if (R->failed)
			return v;
		if (cv_str_to(&b, v) < 0)
			return rfail(R, x, "cannot convert %s to a string", cv_type_name(v));
	}
	if (b.failed)
		return oom(R, x);
	return cv_str(b.p ? b.p : "", b.n);
}

static struct cv
eval_unary(struct rs *R, const struct node *x, struct frame *f)
{
	struct cv v = eval(R, x->a, f);

	if (R->failed)
		return v;
	if (x->kind == E_NOT)
		return cv_bool(!cv_truthy(v));
	if (!is_num(v))
		return v.t == CV_UNDEF ? undef_fail(R, x, v) :
		    rfail(R, x, "bad operand type for unary %s: '%s'", x->kind == E_NEG ? "-" : "+",
		    cv_type_name(v));
	if (x->kind == E_POS)
		return v.t == CV_BOOL ? cv_int(v.u.b) : v;
	if (v.t == CV_FLOAT)
		return cv_float(-v.u.f);
	if (num_i(v) == INT64_MIN)
		return rfail(R, x, "integer overflow (beyond 64 bits)");
	return cv_int(-num_i(v));
}

static struct cv
eval_seq(struct rs *R, const struct node *x, struct frame *f)
{
	if (x->kind == E_DICT) {
		struct cv d = cv_dict_new(R->a, x->nv / 2);
		if (d.u.d == NULL)
			return oom(R, x);
		for (size_t i = 0; i + 1 < x->nv; i += 2) {
			struct cv k = eval(R, x->v[i], f), v = eval(R, x->v[i + 1], f);
			if (R->failed)
				return k;
			if (k.t == CV_LIST && !k.tuple)
				return rfail(R, x, "unhashable type: 'list'");
			if (k.t == CV_DICT || k.t == CV_UNDEF)
				return rfail(R, x, "unhashable type: '%s'", cv_type_name(k));
			if (cv_dict_set(R->a, d.u.d, k, v) < 0)
				return oom(R, x);
		}
		return d;
	}
	struct cv l = cv_list_new(R->a, x->nv);
	if (l.u.l == NULL)
		return oom(R, x);
	l.tuple = x->kind == E_TUPLE;
	for (size_t i = 0; i < x->nv; i++) {
		l.u.l->v[i] = eval(R, x->v[i], f);
		if (R->failed)
			return l.u.l->v[i];
	}
	l.u.l->n = x->nv;
	return l;
}

/* --- calls --- */
static int
eval_args(struct rs *R, const struct node *x, struct frame *f, struct args *A)
{
	A->npos = A->nkw = 0;
	for (size_t i = 0; i < x->nv; i++) {
		const struct node *a = x->v[i];
		if (a->kind == E_KWARG) {
			if (A->nkw == MAX_ARGS)
				return rfail(R, x, "too many keyword arguments"), -1;
			A->kn[A->nkw] = a->name;
			A->knl[A->nkw] = a->namelen;
			A->kv[A->nkw++] = eval(R, a->a, f);
		} else {
			if (A->npos == MAX_ARGS)
				return rfail(R, x, "too many arguments"), -1;
			A->pos[A->npos++] = eval(R, a, f);
		}
		if (R->failed)
			return -1;
	}
	return 0;
}

/* argument i or keyword name; 1 when given */
static int
arg(const struct args *A, size_t i, const char *name, struct cv *out)
{
	if (i < A->npos) {
		*out = A->pos[i];
		return 1;
	}
	for (size_t k = 0; name != NULL && k < A->nkw; k++)
		if (name_is(A->kn[k], A->knl[k], name)) {
			*out = A->kv[k];
			return 1;
		}
	return 0;
}

static struct cv
call_macro(struct rs *R, const struct node *x, const struct cv_macro *mac, const struct args *A)
{
	const struct node *m = mac->m;
	struct frame fr = { .parent = mac->env };
	struct sbuf out = { .a = R->a, .max = R->max_output };
	struct sbuf *saved = R->out;

	if (A->npos > m->nv)
		return rfail(R, x, "macro '%.*s' takes not more than %zu argument(s)",
		    (int)m->namelen, m->name, m->nv);
	for (size_t k = 0; k < A->nkw; k++) {
		size_t i;
		for (i = 0; i < m->nv; i++)
			if (m->v[i]->namelen == A->knl[k] &&
			    memcmp(m->v[i]->name, A->kn[k], A->knl[k]) == 0)
				break;
		if (i == m->nv)
			return rfail(R, x, "macro '%.*s' takes no keyword argument '%.*s'",
			    (int)m->namelen, m->name, (int)A->knl[k], A->kn[k]);
	}
	if (++R->depth > MAX_CALL_DEPTH)
		return rfail(R, x, "macro calls nest too deep");
	if (step(R, x) < 0)
		return cv_undef(NULL);
	for (size_t i = 0; i < m->nv && !R->failed; i++) {
		const struct node *p = m->v[i];
		struct cv v;
		if (!arg(A, i, NULL, &v)) {
			size_t k;
			for (k = 0; k < A->nkw; k++)
				if (A->knl[k] == p->namelen && memcmp(A->kn[k], p->name, p->namelen) == 0)
					break;
			if (k < A->nkw)
				v = A->kv[k];
			else if (p->b != NULL)
				v = eval(R, p->b, &fr);
			else
				v = undef_n(p->name, p->namelen);
		}
		if (frame_set(R, &fr, p->name, p->namelen, v) < 0)
			return oom(R, x);
	}
	R->out = &out;
	if (!R->failed)
		exec_body(R, m->a, &fr);
	R->out = saved;
	R->depth--;
	if (R->failed)
		return cv_undef(NULL);
	if (out.failed)
		return rfail(R, x, "output too large");
	return cv_str(out.p ? out.p : "", out.n);
}

static struct cv
call_range(struct rs *R, const struct node *x, const struct args *A)
{
	int64_t v[3] = { 0, 0, 1 };
	struct cv l;

	if (A->npos < 1 || A->npos > 3)
		return rfail(R, x, "range expected 1 to 3 arguments");
	for (size_t i = 0; i < A->npos; i++) {
		if (A->pos[i].t != CV_INT && A->pos[i].t != CV_BOOL)
			return rfail(R, x, "'%s' object cannot be interpreted as an integer",
			    cv_type_name(A->pos[i]));
		v[A->npos == 1 ? 1 : i] = num_i(A->pos[i]);
	}
	if (v[2] == 0)
		return rfail(R, x, "range() arg 3 must not be zero");
	double count = ceil(((double)v[1] - (double)v[0]) / (double)v[2]);
	if (count > MAX_RANGE)
		return rfail(R, x, "range too big (over %d items)", MAX_RANGE);
	l = cv_list_new(R->a, count > 0 ? (size_t)count : 0);
	if (l.u.l == NULL)
		return oom(R, x);
	for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2])
		l.u.l->v[l.u.l->n++] = cv_int(i);
	return l;
}

static struct cv
call_dictlike(struct rs *R, const struct node *x, const struct args *A, int ns)
{
	struct cv d = cv_dict_new(R->a, A->nkw);

	if (d.u.d == NULL)
		return oom(R, x);
	if (A->npos > 1)
		return rfail(R, x, "%s expected at most 1 argument", ns ? "namespace" : "dict");
	if (A->npos == 1) {
		struct cv src = A->pos[0];
		if (src.t == CV_DICT || src.t == CV_NS) {
			for (size_t i = 0; i < src.u.d->n; i++)
				if (cv_dict_set(R->a, d.u.d, src.u.d->k[i], src.u.d->v[i]) < 0)
					return oom(R, x);
		} else {
			return rfail(R, x, "cannot make a %s from a %s", ns ? "namespace" : "dict",
			    cv_type_name(src));
		}
	}
	for (size_t i = 0; i < A->nkw; i++)
		if (cv_dict_set(R->a, d.u.d, cv_str(A->kn[i], A->knl[i]), A->kv[i]) < 0)
			return oom(R, x);
	if (ns)
		d.t = CV_NS;
	return d;
}

static struct cv
call_strftime(struct rs *R, const struct node *x, const struct args *A)
{
	char fmt[256], buf[512];
	time_t now = time(NULL);
	struct tm tm;
	struct cv f;

	if (!arg(A, 0, "format", &f) || f.t != CV_STR || f.n >= sizeof fmt)
		return rfail(R, x, "strftime_now takes one format string");
	memcpy(fmt, f.u.s, f.n);
	fmt[f.n] = 0;
	localtime_r(&now, &tm);
	size_t n = strftime(buf, sizeof buf, fmt, &tm);
	char *p = arena_strndup(R->a, buf, n);
	return p ? cv_str(p, n) : oom(R, x);
}

static struct cv call_method(struct rs *, const struct node *, int, struct cv, const struct args *);

static struct cv
call(struct rs *R, const struct node *x, struct cv fn, const struct args *A)
{
	struct cv msg;

	if (fn.t == CV_MACRO)
		return call_macro(R, x, fn.u.mac, A);
	if (fn.t == CV_UNDEF)
		return undef_fail(R, x, fn);
	if (fn.t != CV_FUNC)
		return rfail(R, x, "'%s' object is not callable", cv_type_name(fn));
	switch (fn.u.fn->id) {
	case F_RANGE: return call_range(R, x, A);
	case F_NAMESPACE: return call_dictlike(R, x, A, 1);
	case F_DICT: return call_dictlike(R, x, A, 0);
	case F_STRFTIME: return call_strftime(R, x, A);
	case F_RAISE:
		if (!arg(A, 0, "message", &msg))
			return rfail(R, x, "raise_exception() missing its message");
		msg = to_str(R, x, msg);
		if (R->failed)
			return msg;
		return rfail(R, x, "raise_exception: %.*s", (int)(msg.n > 400 ? 400 : msg.n), msg.u.s);
	case M_UNSAFE:
		return rfail(R, x, "access to a method that modifies a %s is unsafe",
		    cv_type_name(fn.u.fn->self));
	default:
		return call_method(R, x, fn.u.fn->id, fn.u.fn->self, A);
	}
}

/* --- str methods --- */
static struct cv
str_piece(struct rs *R, const struct node *x, struct cv_list *l, const char *s, size_t n)
{
	if (cv_list_push(R->a, l, cv_str(s, n)) < 0)
		return oom(R, x);
	return cv_none();
}

static void
list_reverse(struct cv_list *l)
{
	for (size_t i = 0, j = l->n; i + 1 < j; i++, j--) {
		struct cv t = l->v[i];
		l->v[i] = l->v[j - 1];
		l->v[j - 1] = t;
	}
}

/* str.split / str.rsplit; sep NULL splits on runs of whitespace */
static struct cv
str_split(struct rs *R, const struct node *x, struct cv s, struct cv sep, int64_t max, int right)
{
	struct cv l = cv_list_new(R->a, 0);
	const char *p = s.u.s;
	size_t n = s.n, w;

	if (l.u.l == NULL)
		return oom(R, x);
	if (sep.t == CV_STR && sep.n == 0)
		return rfail(R, x, "empty separator");
	if (sep.t == CV_STR) {
		size_t a = 0, b = n;
		while (max != 0 && b - a >= sep.n) {
			size_t i, found = (size_t)-1;
			if (!right) {
				for (i = a; i + sep.n <= b; i++)
					if (memcmp(p + i, sep.u.s, sep.n) == 0) { found = i; break; }
			} else {
				for (i = b - sep.n + 1; i-- > a;)
					if (memcmp(p + i, sep.u.s, sep.n) == 0) { found = i; break; }
			}
			if (found == (size_t)-1)
				break;
			if (!right) {
				str_piece(R, x, l.u.l, p + a, found - a);
				a = found + sep.n;
			} else {
				str_piece(R, x, l.u.l, p + found + sep.n, b - found - sep.n);
				b = found;
			}
			max--;
		}
		str_piece(R, x, l.u.l, p + a, b - a);
	} else {
		size_t a = 0, b = n;
		for (;;) {
			if (!right)
				while (a < b && u8_space_at(p, n, a, &w))
					a += w;
			else
				while (b > a && u8_space_at(p, n, u8_prev(p, b), &w))
					b = u8_prev(p, b);
			if (a >= b)
				break;
			if (max == 0) {
				str_piece(R, x, l.u.l, p + a, b - a);
				break;
			}
			size_t i = right ? b : a;
			if (!right) {
				while (i < b && !u8_space_at(p, n, i, &w))
					i += w;
				str_piece(R, x, l.u.l, p + a, i - a);
				a = i;
			} else {
				while (i > a && !u8_space_at(p, n, u8_prev(p, i), &w))
					i = u8_prev(p, i);
				str_piece(R, x, l.u.l, p + i, b - i);
				b = i;
			}
			max--;
		}
	}
	if (right)
		list_reverse(l.u.l);
	return R->failed ? cv_undef(NULL) : l;
}

/*
 * Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and
 * Cyrillic (Python maps all of Unicode; outside these blocks letters are
 * left as they are).  0 when c has no mapping.
 */
static uint32_t
cp_upper(uint32_t c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 0xE0 && c <= 0xFE && c != 0xF7))
		return c - 32;
	if (c == 0xB5) return 0x39C;
	if (c == 0xFF) return 0x178;
	if (c == 0x131) return 'I';
	if (c == 0x17F) return 'S';
	if (((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177) ||
	    (c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) && (c & 1))
		return c - 1;
	if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) && !(c & 1))
		return c - 1;
	if ((c >= 0x3B1 && c <= 0x3C1) || (c >= 0x3C3 && c <= 0x3CB) || (c >= 0x430 && c <= 0x44F))
		return c - 32;
	if (c == 0x3C2) return 0x3A3;
	if (c == 0x3AC) return 0x386;
	if (c >= 0x3AD && c <= 0x3AF) return c - 37;
	if (c == 0x3CC) return 0x38C;
	if (c >= 0x3CD && c <= 0x3CE) return c - 63;
	if (c >= 0x450 && c <= 0x45F) return c - 80;
	return 0;
}

static uint32_t
cp_lower(uint32_t c)
{
	if ((c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7))
		return c + 32;
	if (c == 0x178) return 0xFF;
	if (((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177) ||
	    (c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) && !(c & 1))
		return c + 1;
	if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) && (c & 1))
		return c + 1;
	if ((c >= 0x391 && c <= 0x3A1) || (c >= 0x3A3 && c <= 0x3AB) || (c >= 0x410 && c <= 0x42F))
		return c + 32;
	if (c == 0x386) return 0x3AC;
	if (c >= 0x388 && c <= 0x38A) return c + 37;
	if (c == 0x38C) return 0x3CC;
	if (c >= 0x38E && c <= 0x38F) return c + 63;
	if (c >= 0x400 && c <= 0x40F) return c + 80;
	return 0;
}

static void
put_cp(struct sbuf *b, uint32_t c)
{
	char u[4];

	if (c < 0x80) { u[0] = (char)c; sbuf_put(b, u, 1); }
	else if (c < 0x800) { u[0] = (char)(0xC0 | c >> 6); u[1] = (char)(0x80 | (c & 63)); sbuf_put(b, u, 2); }
	else { u[0] = (char)(0xE0 | c >> 12); u[1] = (char)(0x80 | (c >> 6 & 63)); u[2] = (char)(0x80 | (c & 63)); sbuf_put(b, u, 3); }
}

static uint32_t
cp_at(const char *s, size_t n, size_t i, size_t *w)
{
	const unsigned char *p = (const unsigned char *)s + i;

	if (p[0] < 0x80 || i + 1 >= n) { *w = 1; return p[0]; }
	if (p[0] < 0xE0) { *w = 2; return (uint32_t)(p[0] & 31) << 6 | (p[1] & 63); }
	*w = p[0] < 0xF0 ? 3 : 4;
	if (i + *w > n) { *w = 1; return p[0]; }
	return 0x110000;	/* beyond the mapped blocks: copied as it is */
}

static int
next_cased(struct cv s, size_t i)
{
	size_t w;
	uint32_t c;

	if (i >= s.n)
		return 0;
	c = cp_at(s.u.s, s.n, i, &w);
	return cp_upper(c) || cp_lower(c) || c == 0xDF;
}

/*
 * Case mapping; mode 'u' upper, 'l' lower, 'c' capitalize, 't' str.title
 * (upper after an uncased char), 'j' jinja's title filter (upper at the
 * start of a chunk split at runs of "-", whitespace, "(", "{", "[", "<").
 */
static struct cv
str_case(struct rs *R, const struct node *x, struct cv s, int mode)
{
	struct sbuf b = { .a = R->a, .max = R->max_output };
	int prev_cased = 0, prev_sep = 1;
	size_t w, sw;

	for (size_t i = 0; i < s.n; i += w) {
		uint32_t c = cp_at(s.u.s, s.n, i, &w), up = cp_upper(c), lo = cp_lower(c);
		int cased = up || lo || c == 0xDF;
		int sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' ||
		    u8_space_at(s.u.s, s.n, i, &sw);
		int want_up = mode == 'u' || (mode == 'c' && i == 0) || (mode == 't' && !prev_cased) ||
		    (mode == 'j' && prev_sep);
		if (c == 0xDF && want_up)
			sbuf_put(&b, mode == 'u' ? "SS" : "Ss", 2);
		else if (c == 0x3A3 && !want_up && prev_cased && !next_cased(s, i + w))
			put_cp(&b, 0x3C2);	/* final sigma */
		else if (want_up && up)
			put_cp(&b, up);
		else if (!want_up && lo)
			put_cp(&b, lo);
		else
			sbuf_put(&b, s.u.s + i, w);
		prev_cased = cased;
		prev_sep = sep;
	}
	return b.failed ? rfail(R, x, "string too large") : cv_str(b.p ? b.p : "", b.n);
}

static struct cv
str_replace(struct rs *R, const struct node *x, struct cv s, struct cv old, struct cv new,
    int64_t count)
{
	struct sbuf b = { .a = R->a, .max = R->max_output };
	size_t i = 0;

	if (old.n == 0) {
		for (size_t w; i <= s.n && count != 0; i += w, count--) {
			sbuf_put(&b, new.u.s, new.n);
			if (i == s.n)
				break;
			w = u8_offset(s.u.s + i, s.n - i, 1);
			sbuf_put(&b, s.u.s + i, w);
		}
		if (i < s.n)
			sbuf_put(&b, s.u.s + i, s.n - i);
	} else {
		while (i < s.n) {
			if (count != 0 && i + old.n <= s.n && memcmp(s.u.s + i, old.u.s, old.n) == 0) {
				sbuf_put(&b, new.u.s, new.n);
				i += old.n;
				count--;
			} else {
				sbuf_putc(&b, s.u.s[i++]);
			}
		}
	}
	if (b.failed)
		return rfail(R, x, "string too large");
	return cv_str(b.p ? b.p : "", b.n);
}

static int64_t
str_find(struct cv s, struct cv sub, int right)
{
	if (sub.n > s.n)
		return -1;
	for (size_t k = 0; k + sub.n <= s.n; k++) {
		size_t i = right ? s.n - sub.n - k : k;
		if (memcmp(s.u.s + i, sub.u.s, sub.n) == 0)
			return (int64_t)u8_len(s.u.s, i);
	}
	return -1;
}

static struct cv
str_affix(struct rs *R, const struct node *x, struct cv s, struct cv a, int end)
{
	if (a.t == CV_LIST && a.tuple) {
		for (size_t i = 0; i < a.u.l->n; i++) {
			struct cv r = str_affix(R, x, s, a.u.l->v[i], end);
			if (R->failed || r.u.b)
				return r;
		}
		return cv_bool(0);
	}
	if (a.t != CV_STR)
		return rfail(R, x, "%s first arg must be str or a tuple of str, not %s",
		    end ? "endswith" : "startswith", cv_type_name(a));
	if (a.n > s.n)
		return cv_bool(0);
	return cv_bool(memcmp(s.u.s + (end ? s.n - a.n : 0), a.u.s, a.n) == 0);
}

static struct cv
str_join(struct rs *R, const struct node *x, struct cv sep, struct cv items)
{
	struct sbuf b = { .a = R->a, .max = R->max_output };
	struct cv l = to_list(R, x, items);

	if (R->failed)
		return l;
	for (size_t i = 0; i < l.u.l->n; i++) {
		if (l.u.l->v[i].t != CV_STR)
			return rfail(R, x, "sequence item %zu: expected str instance, %s found", i,
			    cv_type_name(l.u.l->v[i]));
		if (i)
			sbuf_put(&b, sep.u.s, sep.n);
		sbuf_put(&b, l.u.l->v[i].u.s, l.u.l->v[i].n);
	}
	return b.failed ? rfail(R, x, "string too large") : cv_str(b.p ? b.p : "", b.n);
}

static struct cv
str_splitlines(struct rs *R, const struct node *x, struct cv s, int keep)
{
	struct cv l = cv_list_new(R->a, 0);
	size_t a = 0, i = 0;

	if (l.u.l == NULL)
		return oom(R, x);
	while (i < s.n) {
		unsigned char c = (unsigned char)s.u.s[i];
		size_t w = 0;
		if (c == '\r')
			w = i + 1 < s.n && s.u.s[i + 1] == '\n' ? 2 : 1;
		else if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e))
			w = 1;
		else if (c == 0xc2 && i + 1 < s.n && (unsigned char)s.u.s[i + 1] == 0x85)
			w = 2;
		else if (c == 0xe2 && i + 2 < s.n && (unsigned char)s.u.s[i + 1] == 0x80 &&
		    ((unsigned char)s.u.s[i + 2] == 0xa8 || (unsigned char)s.u.s[i + 2] == 0xa9))
			w = 3;
		if (w == 0) {
			i++;
			continue;
		}
		str_piece(R, x, l.u.l, s.u.s + a, i - a + (keep ? w : 0));
		i += w;
		a = i;
	}
	if (a < s.n)
		str_piece(R, x, l.u.l, s.u.s + a, s.n - a);
	return l;
}

static struct cv
str_is(struct cv s, int id)
{
	size_t w;

	if (s.n == 0)
		return cv_bool(0);
	for (size_t i = 0; i < s.n; i++) {
		unsigned char c = (unsigned char)s.u.s[i];
		int d = c >= '0' && c <= '9', a = (c | 32) >= 'a' && (c | 32) <= 'z';
		if (id == M_ISSPACE) {
			if (!u8_space_at(s.u.s, s.n, i, &w))
				return cv_bool(0);
			i += w - 1;
		} else if ((id == M_ISDIGIT && !d) || (id == M_ISALPHA && !a) ||
		    (id == M_ISALNUM && !a && !d)) {
			return cv_bool(0);
		}
	}
	return cv_bool(1);
}

/* str.format: "{}", "{0}", "{name}", "{{", "}}"; no conversions or specs */
static struct cv
str_format(struct rs *R, const struct node *x, struct cv s, const struct args *A)
{
	struct sbuf b = { .a = R->a, .max = R->max_output };
	size_t auto_i = 0;

	for (size_t i = 0; i < s.n; i++) {
		char c = s.u.s[i];
		if ((c == '{' || c == '}') && i + 1 < s.n && s.u.s[i + 1] == c) {
			sbuf_putc(&b, c);
			i++;
			continue;
		}
		if (c == '}')
			return rfail(R, x, "Single '}' encountered in format string");
		if (c != '{') {
			sbuf_putc(&b, c);
			continue;
		}
		const char *e = memchr(s.u.s + i, '}', s.n - i);
		if (e == NULL)
			return rfail(R, x, "Single '{' encountered in format string");
		const char *f = s.u.s + i + 1;
		size_t fn = (size_t)(e - f);
		struct cv v;
		if (memchr(f, ':', fn) || memchr(f, '!', fn) || memchr(f, '.', fn) || memchr(f, '[', fn))
			return rfail(R, x, "unsupported format field '{%.*s}'", (int)(fn > 40 ? 40 : fn), f);
		if (fn == 0) {
			if (!arg(A, auto_i++, NULL, &v))
				return rfail(R, x, "Replacement index %zu out of range", auto_i - 1);
		} else if (f[0] >= '0' && f[0] <= '9') {
			if (!arg(A, (size_t)strtoul(f, NULL, 10), NULL, &v))
				return rfail(R, x, "Replacement index out of range");
		} else {
			char nm[64];
			snprintf(nm, sizeof nm, "%.*s", (int)(fn > 63 ? 63 : fn), f);
			if (!arg(A, MAX_ARGS, nm, &v))
				return rfail(R, x, "KeyError: '%s'", nm);
		}
		if (cv_str_to(&b, v) < 0)
			return rfail(R, x, "cannot format a %s", cv_type_name(v));
		i = (size_t)(e - s.u.s);
	}
	return b.failed ? rfail(R, x, "string too large") : cv_str(b.p ? b.p : "", b.n);
}

/* the format filter: printf-style "%s %r %d %i %f %%", with "%(name)s" for keywords */
static struct cv
f_format(struct rs *R, const struct node *x, struct cv s, const struct args *A)
{
	struct sbuf b = { .a = R->a, .max = R->max_output };
	size_t k = 0;

	if (A->npos && A->nkw)
		return rfail(R, x, "can't handle positional and keyword arguments at the same time");
	for (size_t i = 0; i < s.n; i++) {
		struct cv v;
		int prec = -1;
		if (s.u.s[i] != '%') {
			sbuf_putc(&b, s.u.s[i]);
			continue;
		}
		if (++i >= s.n)
			return rfail(R, x, "incomplete format");
		if (s.u.s[i] == '%') {
			sbuf_putc(&b, '%');
			continue;
		}
		if (s.u.s[i] == '(') {
			const char *e = memchr(s.u.s + i, ')', s.n - i);
			char nm[64];
			if (e == NULL)
				return rfail(R, x, "incomplete format key");
			snprintf(nm, sizeof nm, "%.*s", (int)((size_t)(e - s.u.s) - i - 1 > 63 ? 63 :
			    (size_t)(e - s.u.s) - i - 1), s.u.s + i + 1);
			if (!arg(A, MAX_ARGS, nm, &v))
				return rfail(R, x, "KeyError: '%s'", nm);
			i = (size_t)(e - s.u.s) + 1;
		} else if (!arg(A, k++, NULL, &v)) {
			return rfail(R, x, "not enough arguments for format string");
		}
		if (i + 1 < s.n && s.u.s[i] == '.' && s.u.s[i + 1] >= '0' && s.u.s[i + 1] <= '9') {
			prec = s.u.s[++i] - '0';
			i++;
		}
		if (i >= s.n)
			return rfail(R, x, "incomplete format");
		switch (s.u.s[i]) {
		case 's': if (cv_str_to(&b, v) < 0) return rfail(R, x, "cannot format"); break;
		case 'r': if (cv_repr_to(&b, v) < 0) return rfail(R, x, "cannot format"); break;
		case 'd': case 'i':
			if (!is_num(v))
				return rfail(R, x, "%%d format: a real number is required, not %s", cv_type_name(v));
			if (v.t == CV_FLOAT && (isnan(v.u.f) || isinf(v.u.f) || fabs(v.u.f) >= 9.2e18))
				return rfail(R, x, "cannot convert float to integer");
			sbuf_printf(&b, "%lld", v.t == CV_FLOAT ? (long long)v.u.f : (long long)num_i(v));
			break;
		case 'f':
			if (!is_num(v))
				return rfail(R, x, "must be real number, not %s", cv_type_name(v));
			sbuf_printf(&b, "%.*f", prec < 0 ? 6 : prec, num_f(v));
			break;
		default:
			return rfail(R, x, "unsupported format character '%c'", s.u.s[i]);
		}
	}
	if (k < A->npos)
		return rfail(R, x, "not all arguments converted during string formatting");
	return b.failed ? rfail(R, x, "string too large") : cv_str(b.p ? b.p : "", b.n);
}

static struct cv
str_method(struct rs *R, const struct node *x, int id, struct cv s, const struct args *A)
{
	struct cv a = cv_none(), b = cv_none(), c = cv_none();
	int64_t max = -1;

	if (charge(R, x, s.n) < 0)
		return cv_undef(NULL);
	arg(A, 0, NULL, &a);
	arg(A, 1, NULL, &b);
	switch (id) {
	case M_STARTSWITH: case M_ENDSWITH:
		if (A->npos != 1)
			return rfail(R, x, "startswith/endswith take one argument here");
		return str_affix(R, x, s, a, id == M_ENDSWITH);
	case M_SPLIT: case M_RSPLIT:
		arg(A, 0, "sep", &a);
		if (arg(A, 1, "maxsplit", &c)) {
			if (c.t != CV_INT)
				return rfail(R, x, "maxsplit must be an integer");
			max = c.u.i;
		}
		if (a.t != CV_STR && a.t != CV_NONE)
			return rfail(R, x, "must be str or None, not %s", cv_type_name(a));
		return str_split(R, x, s, a, max, id == M_RSPLIT);
	case M_STRIP: case M_LSTRIP: case M_RSTRIP: {
		size_t off, len;
		if (a.t != CV_STR && a.t != CV_NONE)
			return rfail(R, x, "strip arg must be None or str");
		py_strip(s.u.s, s.n, a.t == CV_STR ? a.u.s : NULL, a.n, id != M_RSTRIP,
		    id != M_LSTRIP, &off, &len);
		return cv_str(s.u.s + off, len);
	}
	case M_UPPER: return str_case(R, x, s, 'u');
	case M_LOWER: return str_case(R, x, s, 'l');
	case M_TITLE: return str_case(R, x, s, 't');
	case M_CAPITALIZE: return str_case(R, x, s, 'c');
	case M_REPLACE:
		if (arg(A, 2, "count", &c) && c.t == CV_INT)
			max = c.u.i;
		if (a.t != CV_STR || b.t != CV_STR)
			return rfail(R, x, "replace() arguments must be str");
		return str_replace(R, x, s, a, b, max);
	case M_FIND: case M_RFIND: case M_COUNT:
		if (a.t != CV_STR)
			return rfail(R, x, "must be str, not %s", cv_type_name(a));
		if (id != M_COUNT)
			return cv_int(str_find(s, a, id == M_RFIND));
		if (a.n == 0)
			return cv_int((int64_t)u8_len(s.u.s, s.n) + 1);
		max = 0;
		for (size_t i = 0; i + a.n <= s.n;)
			if (memcmp(s.u.s + i, a.u.s, a.n) == 0) {
				max++;
				i += a.n;
			} else {
				i++;
			}
		return cv_int(max);
	case M_JOIN: return str_join(R, x, s, a);
	case M_FORMAT: return str_format(R, x, s, A);
	case M_SPLITLINES: return str_splitlines(R, x, s, arg(A, 0, "keepends", &a) && cv_truthy(a));
	default: return str_is(s, id);
	}
}

static struct cv
call_method(struct rs *R, const struct node *x, int id, struct cv self, const struct args *A)
{
	struct cv a = cv_none(), d = cv_none(), l;

	if (self.t == CV_STR)
		return str_method(R, x, id, self, A);
	if (id == M_GET) {
		if (!arg(A, 0, NULL, &a))
			return rfail(R, x, "get expected at least 1 argument");
		arg(A, 1, NULL, &d);
		struct cv *v = cv_dict_get(self.u.d, a);
		return v ? *v : d;
	}
	if (id == M_ITEMS || id == M_KEYS || id == M_VALUES) {
		l = cv_list_new(R->a, self.u.d->n);
		if (l.u.l == NULL)
			return oom(R, x);
		for (size_t i = 0; i < self.u.d->n; i++) {
			struct cv e = id == M_KEYS ? self.u.d->k[i] : self.u.d->v[i];
			if (id == M_ITEMS) {
				e = cv_list_new(R->a, 2);
				if (e.u.l == NULL)
					return oom(R, x);
				e.tuple = 1;
				e.u.l->v[0] = self.u.d->k[i];
				e.u.l->v[1] = self.u.d->v[i];
				e.u.l->n = 2;
			}
			l.u.l->v[l.u.l->n++] = e;
		}
		return l;
	}
	if (!arg(A, 0, NULL, &a))
		return rfail(R, x, "method expected 1 argument");
	int64_t k = 0;
	for (size_t i = 0; i < self.u.l->n; i++)
		if (cv_equal(self.u.l->v[i], a)) {
			if (id == M_INDEX)
				return cv_int((int64_t)i);
			k++;
		}
	if (id == M_INDEX)
		return rfail(R, x, "value is not in list");
	return cv_int(k);
}

/* --- filters --- */
enum {
	FL_ABS, FL_ATTR, FL_CAPITALIZE, FL_COUNT, FL_DEFAULT, FL_DICTSORT, FL_ESCAPE,
	FL_FIRST, FL_FLOAT, FL_INDENT, FL_INT, FL_ITEMS, FL_JOIN, FL_LAST, FL_LENGTH,
	FL_LIST, FL_LOWER, FL_MAP, FL_MAX, FL_MIN, FL_REJECT, FL_REJECTATTR, FL_REPLACE,
	FL_REVERSE, FL_ROUND, FL_SAFE, FL_SELECT, FL_SELECTATTR, FL_SORT, FL_STRING,
	FL_SUM, FL_TITLE, FL_TOJSON, FL_TRIM, FL_UNIQUE, FL_UPPER, FL_WORDCOUNT, FL_FORMAT
};

static const struct { const char *s; int id; } filters[] = {
	{ "abs", FL_ABS }, { "attr", FL_ATTR }, { "capitalize", FL_CAPITALIZE },
	{ "count", FL_COUNT }, { "d", FL_DEFAULT }, { "default", FL_DEFAULT },
	{ "dictsort", FL_DICTSORT }, { "e", FL_ESCAPE }, { "escape", FL_ESCAPE },
	{ "forceescape", FL_ESCAPE }, { "first", FL_FIRST }, { "float", FL_FLOAT },
	{ "format", FL_FORMAT },
	{ "indent", FL_INDENT }, { "int", FL_INT }, { "items", FL_ITEMS }, { "join", FL_JOIN },
	{ "last", FL_LAST }, { "length", FL_LENGTH }, { "list", FL_LIST }, { "lower", FL_LOWER },
	{ "map", FL_MAP }, { "max", FL_MAX }, { "min", FL_MIN }, { "reject", FL_REJECT },
	{ "rejectattr", FL_REJECTATTR }, { "replace", FL_REPLACE }, { "reverse", FL_REVERSE },
	{ "round", FL_ROUND }, { "safe", FL_SAFE }, { "select", FL_SELECT },
	{ "selectattr", FL_SELECTATTR }, { "sort", FL_SORT }, { "string", FL_STRING },
	{ "sum", FL_SUM }, { "title", FL_TITLE }, { "tojson", FL_TOJSON }, { "trim", FL_TRIM },
	{ "unique", FL_UNIQUE }, { "upper", FL_UPPER }, { "wordcount", FL_WORDCOUNT },
};

enum {
	TS_BOOLEAN, TS_CALLABLE, TS_DEFINED, TS_DIVISIBLEBY, TS_EQ, TS_EVEN, TS_FALSE,
	TS_FLOAT, TS_GE, TS_GT, TS_IN, TS_INTEGER, TS_ITERABLE, TS_LE, TS_LOWER, TS_LT,
	TS_MAPPING, TS_NE, TS_NONE, TS_NUMBER, TS_ODD, TS_SAMEAS, TS_SEQUENCE, TS_STRING,
	TS_TRUE, TS_UNDEFINED, TS_UPPER, TS_ESCAPED
};

static const struct { const char *s; int id; } tests[] = {
	{ "boolean", TS_BOOLEAN }, { "callable", TS_CALLABLE }, { "defined", TS_DEFINED },
	{ "divisibleby", TS_DIVISIBLEBY }, { "eq", TS_EQ }, { "equalto", TS_EQ },
	{ "even", TS_EVEN }, { "false", TS_FALSE }, { "float", TS_FLOAT }, { "ge", TS_GE },
	{ "gt", TS_GT }, { "greaterthan", TS_GT }, { "in", TS_IN }, { "integer", TS_INTEGER },
	{ "iterable", TS_ITERABLE }, { "le", TS_LE }, { "lower", TS_LOWER }, { "lt", TS_LT },
	{ "lessthan", TS_LT }, { "mapping", TS_MAPPING }, { "ne", TS_NE }, { "none", TS_NONE },
	{ "number", TS_NUMBER }, { "odd", TS_ODD }, { "sameas", TS_SAMEAS },
	{ "sequence", TS_SEQUENCE }, { "string", TS_STRING }, { "true", TS_TRUE },
	{ "undefined", TS_UNDEFINED }, { "upper", TS_UPPER }, { "escaped", TS_ESCAPED },
};

int
chat_filter_id(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
		if (name_is(name, n, filters[i].s))
			return filters[i].id;
	return -1;
}

int
chat_test_id(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
		if (name_is(name, n, tests[i].s))
			return tests[i].id;
	return -1;
}

static struct cv
run_test(struct rs *R, const struct node *x, int id, struct cv v, const struct args *A)
{
	struct cv a = cv_none();
	int r;

	arg(A, 0, NULL, &a);
	switch (id) {
	case TS_BOOLEAN: return cv_bool(v.t == CV_BOOL);
	case TS_CALLABLE: return cv_bool(v.t == CV_MACRO || v.t == CV_FUNC);
	case TS_DEFINED: return cv_bool(v.t != CV_UNDEF);
	case TS_UNDEFINED: return cv_bool(v.t == CV_UNDEF);
	case TS_FALSE: return cv_bool(v.t == CV_BOOL && !v.u.b);
	case TS_TRUE: return cv_bool(v.t == CV_BOOL && v.u.b);
	case TS_NONE: return cv_bool(v.t == CV_NONE);
	case TS_FLOAT: return cv_bool(v.t == CV_FLOAT);
	case TS_INTEGER: return cv_bool(v.t == CV_INT);
	case TS_NUMBER: return cv_bool(is_num(v));
	case TS_STRING: return cv_bool(v.t == CV_STR);
	case TS_MAPPING: return cv_bool(v.t == CV_DICT);
	case TS_ITERABLE:
		return cv_bool(v.t == CV_STR || v.t == CV_LIST || v.t == CV_DICT || v.t == CV_UNDEF ||
		    v.t == CV_LOOP);
	case TS_SEQUENCE:
		return cv_bool(v.t == CV_STR || v.t == CV_LIST || v.t == CV_DICT || v.t == CV_UNDEF);
	case TS_ESCAPED: return cv_bool(v.t == CV_STR && v.safe);	/* Markup: |safe, |e */
	case TS_EQ: return cv_bool(cv_equal(v, a));
	case TS_NE: return cv_bool(!cv_equal(v, a));
	case TS_SAMEAS:
		if (v.t != a.t)
			return cv_bool(0);
		return cv_bool(v.t == CV_STR || v.t == CV_FLOAT ? v.u.s == a.u.s && v.n == a.n :
		    cv_equal(v, a));
	case TS_LT: case TS_LE: case TS_GT: case TS_GE: case TS_IN:
		r = compare(R, x, id == TS_LT ? OP_LT : id == TS_LE ? OP_LE : id == TS_GT ? OP_GT :
		    id == TS_GE ? OP_GE : OP_IN, v, a);
		return r < 0 ? cv_undef(NULL) : cv_bool(r);
	case TS_ODD: case TS_EVEN: case TS_DIVISIBLEBY: {
		struct cv m = arith(R, x, OP_MOD, v, id == TS_DIVISIBLEBY ? a : cv_int(2));
		if (R->failed)
			return m;
		return cv_bool(cv_equal(m, cv_int(id == TS_ODD)));
	}
	case TS_LOWER: case TS_UPPER: {
		struct cv s = to_str(R, x, v);
		int cased = 0;
		for (size_t i = 0; i < s.n; i++) {
			char c = s.u.s[i];
			if ((id == TS_LOWER && c >= 'A' && c <= 'Z') || (id == TS_UPPER && c >= 'a' && c <= 'z'))
				return cv_bool(0);
			cased |= (c | 32) >= 'a' && (c | 32) <= 'z';
		}
		return cv_bool(cased);
	}
	}
	/* unknown names reach here: the parser leaves them to render time */
	if (x->kind == E_TEST && x->name != NULL)
		return rfail(R, x, "unsupported test '%.*s'", (int)(x->namelen > 60 ? 60 : x->namelen),
		    x->name);
	return rfail(R, x, "unsupported test");
}

static struct cv
f_length(struct rs *R, const struct node *x, struct cv v)
{
	switch (v.t) {
	case CV_UNDEF: return cv_int(0);
	case CV_STR: return cv_int((int64_t)u8_len(v.u.s, v.n));
	case CV_LIST:
		if (v.gen)
			return rfail(R, x, "object of type 'generator' has no len()");
		return cv_int((int64_t)v.u.l->n);
	case CV_DICT: return cv_int((int64_t)v.u.d->n);
	case CV_LOOP: return cv_int((int64_t)v.u.loop->items->n);
	default: return rfail(R, x, "object of type '%s' has no len()", cv_type_name(v));
	}
}

static struct cv
f_tojson(struct rs *R, const struct node *x, struct cv v, const struct args *A)
{
	struct json_opts o = { .indent = -1 };
	struct sbuf b = { .a = R->a, .max = R->max_output };
	struct cv a;
	char err[UTIL_ERRLEN];

	if (arg(A, 0, "ensure_ascii", &a))
		o.ascii = cv_truthy(a);
	if (arg(A, 1, "indent", &a) && a.t != CV_NONE) {
		if (a.t != CV_INT || a.u.i < 0 || a.u.i > 64)
			return rfail(R, x, "tojson: unsupported indent");
		o.indent = (int)a.u.i;
	}
	o.item_sep = o.indent >= 0 ? "," : ", ";
	o.key_sep = ": ";
	if (arg(A, 2, "separators", &a) && a.t != CV_NONE) {
		if (a.t != CV_LIST || a.u.l->n != 2 || a.u.l->v[0].t != CV_STR || a.u.l->v[1].t != CV_STR)
			return rfail(R, x, "tojson: separators must be a pair of strings");
		o.item_sep = a.u.l->v[0].u.s;
		o.item_sep_n = a.u.l->v[0].n;
		o.key_sep = a.u.l->v[1].u.s;
		o.key_sep_n = a.u.l->v[1].n;
	} else {
		o.item_sep_n = strlen(o.item_sep);
		o.key_sep_n = 2;
	}
	if (arg(A, 3, "sort_keys", &a))
		o.sort_keys = cv_truthy(a);
	if (v.t == CV_UNDEF)
		return rfail(R, x, "Object of type Undefined is not JSON serializable");
	if (cv_json_to(&b, v, &o, 0, err) < 0)
		return rfail(R, x, "tojson: %s", err);
	if (b.failed)
		return rfail(R, x, "output too large");
	return cv_str(b.p ? b.p : "", b.n);
}

/* lower-case a string key for jinja's case-insensitive sorts */
static struct cv
sort_key(struct rs *R, const struct node *x, struct cv v, int cs)
{
	return v.t == CV_STR && !cs ? str_case(R, x, v, 'l') : v;
}

/* stable insertion sort of l by keys k (both [n]) */
static int
sort_pairs(struct rs *R, const struct node *x, struct cv *k, struct cv *l, size_t n, int rev)
{
	for (size_t i = 1; i < n; i++) {
		struct cv kk = k[i], vv = l[i];
		size_t j = i;
		while (j > 0) {
			int lt;
			if (cv_less(rev ? k[j - 1] : kk, rev ? kk : k[j - 1], &lt) < 0) {
				rfail(R, x, "'<' not supported between instances of '%s' and '%s'",
				    cv_type_name(kk), cv_type_name(k[j - 1]));
				return -1;
			}
			if (!lt)
				break;
			k[j] = k[j - 1];
			l[j] = l[j - 1];
			j--;
		}
		k[j] = kk;
		l[j] = vv;
		if (step(R, x) < 0)
			return -1;
	}
	return 0;
}

static struct cv
attr_path(struct rs *R, const struct node *x, struct cv v, struct cv attr)
{
	if (attr.t == CV_INT)
		return getitem(R, x, v, attr);
	if (attr.t != CV_STR)
		return rfail(R, x, "attribute must be a string");
	const char *s = attr.u.s, *e = s + attr.n;
	while (s <= e && !R->failed) {
		const char *dot = memchr(s, '.', (size_t)(e - s));
		if (dot == NULL)
			dot = e;
		v = getitem(R, x, v, cv_str(s, (size_t)(dot - s)));
		s = dot + 1;
	}
	return v;
}

static struct cv
f_sort(struct rs *R, const struct node *x, struct cv v, const struct args *A, int fid)
{
	struct cv a, l = to_list(R, x, v), out;
	int rev = 0, cs = 0;
	struct cv attr = cv_none();

	if (R->failed)
		return l;
	if (fid == FL_DICTSORT) {
		if (v.t != CV_DICT)
			return rfail(R, x, "dictsort expects a mapping");
		if (arg(A, 0, "case_sensitive", &a)) cs = cv_truthy(a);
		int byval = arg(A, 1, "by", &a) && a.t == CV_STR && name_is(a.u.s, a.n, "value");
		if (arg(A, 2, "reverse", &a)) rev = cv_truthy(a);
		struct cv *keys = arena_alloc(R->a, (v.u.d->n + 1) * sizeof *keys);
		out = cv_list_new(R->a, v.u.d->n);
		if (keys == NULL || out.u.l == NULL)
			return oom(R, x);
		for (size_t i = 0; i < v.u.d->n; i++) {
			struct cv t = cv_list_new(R->a, 2);
			if (t.u.l == NULL)
				return oom(R, x);
			t.tuple = 1;
			t.u.l->v[0] = v.u.d->k[i];
			t.u.l->v[1] = v.u.d->v[i];
			t.u.l->n = 2;
			out.u.l->v[i] = t;
			keys[i] = sort_key(R, x, byval ? v.u.d->v[i] : v.u.d->k[i], cs);
		}
		out.u.l->n = v.u.d->n;
		sort_pairs(R, x, keys, out.u.l->v, out.u.l->n, rev);
		return out;
	}
	if (arg(A, 0, "reverse", &a)) rev = cv_truthy(a);
	if (arg(A, 1, "case_sensitive", &a)) cs = cv_truthy(a);
	arg(A, 2, "attribute", &attr);
	out = cv_list_new(R->a, l.u.l->n);
	struct cv *keys = arena_alloc(R->a, (l.u.l->n + 1) * sizeof *keys);
	if (out.u.l == NULL || keys == NULL)
		return oom(R, x);
	for (size_t i = 0; i < l.u.l->n && !R->failed; i++) {
		out.u.l->v[i] = l.u.l->v[i];
		keys[i] = sort_key(R, x, attr.t == CV_NONE ? l.u.l->v[i] :
		    attr_path(R, x, l.u.l->v[i], attr), cs);
	}
	out.u.l->n = l.u.l->n;
	if (!R->failed)
		sort_pairs(R, x, keys, out.u.l->v, out.u.l->n, rev);
	return out;
}

static struct cv apply_filter(struct rs *, const struct node *, int, struct cv, const struct args *);

/* args without the first n positionals */
static void
shift_args(const struct args *A, size_t n, struct args *out)
{
	*out = *A;
	out->npos = A->npos > n ? A->npos - n : 0;
	for (size_t i = 0; i < out->npos; i++)
		out->pos[i] = A->pos[i + n];
}

/* map / select / reject / selectattr / rejectattr */
static struct cv
f_map(struct rs *R, const struct node *x, int fid, struct cv v, const struct args *A)
{
	struct cv l, out, name = cv_none(), attr = cv_none();
	struct args rest;
	int id = -1, isattr = fid == FL_SELECTATTR || fid == FL_REJECTATTR;

	/* jinja2's are generators over "if value": none gives nothing */
	l = cv_truthy(v) ? to_list(R, x, v) : cv_list_new(R->a, 0);
	if (R->failed)
		return l;
	if ((out = cv_list_new(R->a, l.u.l->n)).u.l == NULL)
		return oom(R, x);
	out.gen = 1;
	if (fid == FL_MAP && arg(A, 99, "attribute", &attr)) {
		struct cv dflt = cv_undef(NULL);
		int has_d = arg(A, 99, "default", &dflt);
		for (size_t i = 0; i < l.u.l->n && !R->failed; i++) {
			struct cv e = attr_path(R, x, l.u.l->v[i], attr);
			out.u.l->v[out.u.l->n++] = e.t == CV_UNDEF && has_d ? dflt : e;
		}
		return out;
	}
	if (isattr) {
		if (!arg(A, 0, NULL, &attr))
			return rfail(R, x, "missing attribute");
		shift_args(A, 1, &rest);
	} else {
		rest = *A;
	}
	if (arg(&rest, 0, NULL, &name)) {
		if (name.t != CV_STR)
			return rfail(R, x, "filter or test name must be a string");
		id = fid == FL_MAP ? chat_filter_id(name.u.s, name.n) : chat_test_id(name.u.s, name.n);
		if (id < 0)
			return rfail(R, x, "unsupported %s '%.*s'", fid == FL_MAP ? "filter" : "test",
			    (int)(name.n > 60 ? 60 : name.n), name.u.s);
		shift_args(&rest, 1, &rest);
	} else if (fid == FL_MAP) {
		return rfail(R, x, "map requires a filter name or attribute=");
	}
	for (size_t i = 0; i < l.u.l->n && !R->failed; i++) {
		struct cv e = l.u.l->v[i], t = isattr ? attr_path(R, x, e, attr) : e, r;
		if (fid == FL_MAP) {
			out.u.l->v[out.u.l->n++] = apply_filter(R, x, id, e, &rest);
			continue;
		}
		r = id < 0 ? cv_bool(cv_truthy(t)) : run_test(R, x, id, t, &rest);
		if (R->failed)
			break;
		if (r.u.b == (fid == FL_SELECT || fid == FL_SELECTATTR))
			out.u.l->v[out.u.l->n++] = e;
	}
	return out;
}

static struct cv
f_minmax(struct rs *R, const struct node *x, struct cv v, const struct args *A, int max)
{
	struct cv l = to_list(R, x, v), a, attr = cv_none(), best = cv_undef(NULL), bk = cv_none();
	int cs = 0;

	if (R->failed)
		return l;
	if (arg(A, 0, "case_sensitive", &a))
		cs = cv_truthy(a);
	arg(A, 1, "attribute", &attr);
	for (size_t i = 0; i < l.u.l->n && !R->failed; i++) {
		struct cv e = l.u.l->v[i];
		struct cv k = sort_key(R, x, attr.t == CV_NONE ? e : attr_path(R, x, e, attr), cs);
		int lt;
		if (i > 0) {
			if (cv_less(max ? bk : k, max ? k : bk, &lt) < 0)
				return rfail(R, x, "values cannot be compared");
			if (!lt)
				continue;
		}
		best = e;
		bk = k;
	}
	return best;
}

static struct cv
f_sum(struct rs *R, const struct node *x, struct cv v, const struct args *A)
{
	struct cv l = to_list(R, x, v), attr = cv_none(), acc = cv_int(0);

	if (R->failed)
		return l;
	arg(A, 0, "attribute", &attr);
	arg(A, 1, "start", &acc);
	for (size_t i = 0; i < l.u.l->n && !R->failed; i++)
		acc = arith(R, x, OP_ADD, acc, attr.t == CV_NONE ? l.u.l->v[i] :
		    attr_path(R, x, l.u.l->v[i], attr));
	return acc;
}

static struct cv
f_unique(struct rs *R, const struct node *x, struct cv v, const struct args *A)
{
	struct cv l = to_list(R, x, v), a, attr = cv_none(), out, seen;
	int cs = 0;

	if (R->failed)
		return l;
	if (arg(A, 0, "case_sensitive", &a))
		cs = cv_truthy(a);
	arg(A, 1, "attribute", &attr);
	out = cv_list_new(R->a, l.u.l->n);
	seen = cv_list_new(R->a, l.u.l->n);
	if (out.u.l == NULL || seen.u.l == NULL)
		return oom(R, x);
	for (size_t i = 0; i < l.u.l->n && !R->failed; i++) {
		struct cv e = l.u.l->v[i];
		struct cv k = sort_key(R, x, attr.t == CV_NONE ? e : attr_path(R, x, e, attr), cs);
		if (contains(R, x, seen, k))
			continue;
		seen.u.l->v[seen.u.l->n++] = k;
		out.u.l->v[out.u.l->n++] = e;
		if (step(R, x) < 0)
			break;
	}
	return out;
}

static struct cv
f_escape(struct rs *R, const struct node *x, struct cv s)
{
	struct sbuf b = { .a = R->a, .max = R->max_output };
	struct cv r;

	if (s.safe)
		return s;

	for (size_t i = 0; i < s.n; i++) {
		switch (s.u.s[i]) {
		case '&': sbuf_put(&b, "&amp;", 5); break;
		case '<': sbuf_put(&b, "&lt;", 4); break;
		case '>': sbuf_put(&b, "&gt;", 4); break;
		case '"': sbuf_put(&b, "&#34;", 5); break;
		case '\'': sbuf_put(&b, "&#39;", 5); break;
		default: sbuf_putc(&b, s.u.s[i]);
		}
	}
	if (b.failed)
		return rfail(R, x, "string too large");
	r = cv_str(b.p ? b.p : "", b.n);
	r.safe = 1;
	return r;
}

static struct cv
f_indent(struct rs *R, const struct node *x, struct cv s, const struct args *A)
{
	struct cv a, w = cv_int(4), lines;
	struct sbuf ind = { .a = R->a }, b = { .a = R->a, .max = R->max_output };
	int first = 0, blank = 0;

	arg(A, 0, "width", &w);
	if (arg(A, 1, "first", &a)) first = cv_truthy(a);
	if (arg(A, 2, "blank", &a)) blank = cv_truthy(a);
	if (w.t == CV_STR)
		sbuf_put(&ind, w.u.s, w.n);
	else if (w.t == CV_INT && w.u.i >= 0 && w.u.i <= 1024)
		for (int64_t i = 0; i < w.u.i; i++)
			sbuf_putc(&ind, ' ');
	else
		return rfail(R, x, "indent width must be a string or a small integer");
	struct cv s2 = arith(R, x, OP_ADD, s, cv_str("\n", 1));
	lines = str_splitlines(R, x, s2, 0);
	if (R->failed)
		return lines;
	if (first)
		sbuf_put(&b, ind.p, ind.n);
	for (size_t i = 0; i < lines.u.l->n; i++) {
		struct cv ln = lines.u.l->v[i];
		if (i) {
			sbuf_putc(&b, '\n');
			if (blank || ln.n)
				sbuf_put(&b, ind.p, ind.n);
		}
		sbuf_put(&b, ln.u.s, ln.n);
	}
	return b.failed ? rfail(R, x, "string too large") : cv_str(b.p ? b.p : "", b.n);
}

static struct cv
f_number(struct rs *R, const struct node *x, struct cv v, const struct args *A, int isint)
{
	struct cv d = isint ? cv_int(0) : cv_float(0);
	char buf[128];
	size_t off, len;

	arg(A, 0, "default", &d);
	if (v.t == CV_INT || v.t == CV_BOOL)
		return isint ? cv_int(num_i(v)) : cv_float((double)num_i(v));
	if (v.t == CV_FLOAT) {
		if (!isint)
			return v;
		if (isnan(v.u.f) || isinf(v.u.f) || fabs(v.u.f) >= 9.2e18)
			return d;
		return cv_int((int64_t)v.u.f);
	}
	if (v.t != CV_STR)
		return d;
	py_strip(v.u.s, v.n, NULL, 0, 1, 1, &off, &len);
	size_t k = 0;
	for (size_t i = 0; i < len && k < sizeof buf - 1; i++)
		if (v.u.s[off + i] != '_')
			buf[k++] = v.u.s[off + i];
	buf[k] = 0;
	if (k == 0 || len >= sizeof buf)
		return d;
	int64_t iv;
	double fv;
	if (isint && util_parse_i64(buf, INT64_MIN, INT64_MAX, &iv) == 0)
		return cv_int(iv);
	char *end;
	fv = strtod(buf, &end);
	if (*end != 0 || (buf[0] == '0' && (buf[1] | 32) == 'x'))
		return d;
	(void)R;
	(void)x;
	if (!isint)
		return cv_float(fv);
	if (isnan(fv) || isinf(fv) || fabs(fv) >= 9.2e18)
		return d;
	return cv_int((int64_t)fv);
}

static struct cv
f_round(struct rs *R, const struct node *x, struct cv v, const struct args *A)
{
	struct cv p = cv_int(0), m = cv_str("common", 6);
	double f, s;

	arg(A, 0, "precision", &p);
	arg(A, 1, "method", &m);
	if (!is_num(v) || p.t != CV_INT || p.u.i < 0 || p.u.i > 300 || m.t != CV_STR)
		return rfail(R, x, "round: bad arguments");
	f = num_f(v);
	s = pow(10, (double)p.u.i);
	if (name_is(m.u.s, m.n, "common"))
	{
		char buf[400];
		if (p.u.i == 0 || isnan(f) || isinf(f))
			return cv_float(nearbyint(f));
		snprintf(buf, sizeof buf, "%.*f", (int)p.u.i, f);	/* exact, half-even */
		return cv_float(strtod(buf, NULL));
	}
	if (name_is(m.u.s, m.n, "floor"))
		return cv_float(floor(f * s) / s);
	if (name_is(m.u.s, m.n, "ceil"))
		return cv_float(ceil(f * s) / s);
	return rfail(R, x, "method must be common, ceil or floor");
}

static struct cv
apply_filter(struct rs *R, const struct node *x, int fid, struct cv v, const struct args *A)
{
	struct cv a = cv_none(), b = cv_none(), s, l;

	if (v.t == CV_STR && charge(R, x, v.n) < 0)
		return cv_undef(NULL);
	arg(A, 0, NULL, &a);
	arg(A, 1, NULL, &b);
	switch (fid) {
	case FL_ABS:
		if (!is_num(v))
			return rfail(R, x, "bad operand type for abs(): '%s'", cv_type_name(v));
		return v.t == CV_FLOAT ? cv_float(fabs(v.u.f)) : num_i(v) < 0 ?
		    arith(R, x, OP_SUB, cv_int(0), v) : cv_int(num_i(v));
	case FL_ATTR:
		if (a.t != CV_STR)
			return rfail(R, x, "attr name must be a string");
		if (v.t == CV_DICT)
			return method_id(v, a.u.s, a.n) ? getattr_(R, x, v, a.u.s, a.n) :
			    undef_n(a.u.s, a.n);
		return getattr_(R, x, v, a.u.s, a.n);
	case FL_CAPITALIZE: s = to_str(R, x, v); return R->failed ? s : str_case(R, x, s, 'c');
	case FL_LOWER: s = to_str(R, x, v); return R->failed ? s : str_case(R, x, s, 'l');
	case FL_UPPER: s = to_str(R, x, v); return R->failed ? s : str_case(R, x, s, 'u');
	case FL_TITLE: s = to_str(R, x, v); return R->failed ? s : str_case(R, x, s, 'j');
	case FL_ESCAPE: s = to_str(R, x, v); return R->failed ? s : f_escape(R, x, s);
	case FL_FORMAT: s = to_str(R, x, v); return R->failed ? s : f_format(R, x, s, A);
	case FL_COUNT: case FL_LENGTH: return f_length(R, x, v);
	case FL_DEFAULT: {
		struct cv d = cv_str("", 0);
		arg(A, 0, "default_value", &d);
		int boolean = arg(A, 1, "boolean", &b) && cv_truthy(b);
		return v.t == CV_UNDEF || (boolean && !cv_truthy(v)) ? d : v;
	}
	case FL_DICTSORT: case FL_SORT: return f_sort(R, x, v, A, fid);
	case FL_FIRST: case FL_LAST:
		l = to_list(R, x, v);
		if (R->failed)
			return l;
		if (l.u.l->n == 0)
			return undef_n(fid == FL_FIRST ? "first item" : "last item", 10);
		return l.u.l->v[fid == FL_FIRST ? 0 : l.u.l->n - 1];
	case FL_FLOAT: return f_number(R, x, v, A, 0);
	case FL_INT: return f_number(R, x, v, A, 1);
	case FL_INDENT: s = to_str(R, x, v); return R->failed ? s : f_indent(R, x, s, A);
	case FL_ITEMS:
		if (v.t == CV_UNDEF)
			return cv_list_new(R->a, 0);
		if (v.t != CV_DICT)
			return rfail(R, x, "can only get item pairs from a mapping");
		return call_method(R, x, M_ITEMS, v, A);
	case FL_JOIN: {
		struct cv sep = cv_str("", 0), attr = cv_none();
		arg(A, 0, "d", &sep);
		arg(A, 1, "attribute", &attr);
		l = to_list(R, x, v);
		if (R->failed)
			return l;
		struct cv m = cv_list_new(R->a, l.u.l->n);
		if (m.u.l == NULL)
			return oom(R, x);
		for (size_t i = 0; i < l.u.l->n && !R->failed; i++) {
			struct cv e = attr.t == CV_NONE ? l.u.l->v[i] : attr_path(R, x, l.u.l->v[i], attr);
			m.u.l->v[m.u.l->n++] = to_str(R, x, e);
		}
		sep = to_str(R, x, sep);
		return R->failed ? sep : str_join(R, x, sep, m);
	}
	case FL_LIST: l = to_list(R, x, v); l.tuple = 0; l.gen = 0; return l;
	case FL_MAP: case FL_SELECT: case FL_REJECT: case FL_SELECTATTR: case FL_REJECTATTR:
		return f_map(R, x, fid, v, A);
	case FL_MAX: case FL_MIN: return f_minmax(R, x, v, A, fid == FL_MAX);
	case FL_REPLACE: {
		struct cv c = cv_none();
		s = to_str(R, x, v);
		a = to_str(R, x, a);
		b = to_str(R, x, b);
		arg(A, 2, "count", &c);
		if (R->failed)
			return s;
		return str_replace(R, x, s, a, b, c.t == CV_INT ? c.u.i : -1);
	}
	case FL_REVERSE:
		if (v.t == CV_STR) {
			struct sbuf sb = { .a = R->a };
			for (size_t i = v.n; i > 0;) {
				size_t p = u8_prev(v.u.s, i);
				sbuf_put(&sb, v.u.s + p, i - p);
				i = p;
			}
			return sb.failed ? oom(R, x) : cv_str(sb.p ? sb.p : "", sb.n);
		}
		l = to_list(R, x, v);
		if (R->failed)
			return l;
		s = cv_list_new(R->a, l.u.l->n);
		if (s.u.l == NULL)
			return oom(R, x);
		for (size_t i = l.u.l->n; i > 0; i--)
			s.u.l->v[s.u.l->n++] = l.u.l->v[i - 1];
		return s;
	case FL_ROUND: return f_round(R, x, v, A);
	case FL_SAFE:
		s = to_str(R, x, v);
		s.safe = 1;
		return s;
	case FL_STRING:
		return v.t == CV_STR ? v : to_str(R, x, v);
	case FL_SUM: return f_sum(R, x, v, A);
	case FL_TOJSON: return f_tojson(R, x, v, A);
	case FL_TRIM: {
		size_t off, len;
		s = to_str(R, x, v);
		arg(A, 0, "chars", &a);
		if (R->failed)
			return s;
		if (a.t != CV_STR && a.t != CV_NONE)
			return rfail(R, x, "trim chars must be a string");
		py_strip(s.u.s, s.n, a.t == CV_STR ? a.u.s : NULL, a.n, 1, 1, &off, &len);
		return cv_str(s.u.s + off, len);
	}
	case FL_UNIQUE: return f_unique(R, x, v, A);
	case FL_WORDCOUNT: {
		int64_t k = 0, in = 0;
		s = to_str(R, x, v);
		for (size_t i = 0; i < s.n; i++) {
			unsigned char c = (unsigned char)s.u.s[i];
			int w = c == '_' || c >= 0x80 || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
			k += w && !in;
			in = w;
		}
		return cv_int(k);
	}
	}
	/* unknown names reach here: the parser leaves them to render time */
	if (x->kind == E_FILTER && x->name != NULL)
		return rfail(R, x, "unsupported filter '%.*s'", (int)(x->namelen > 60 ? 60 : x->namelen),
		    x->name);
	return rfail(R, x, "unsupported filter");
}

/* {% set x | f %} and {% filter f %}: a chain on a placeholder */
static struct cv
apply_chain(struct rs *R, const struct node *chain, struct cv v, struct frame *f)
{
	struct args A;

	if (chain->kind == E_CONST)
		return v;
	v = apply_chain(R, chain->a, v, f);
	if (R->failed || eval_args(R, chain, f, &A) < 0)
		return cv_undef(NULL);
	return apply_filter(R, chain, chain->fid, v, &A);
}

/* --- expressions --- */
static struct cv
eval_call(struct rs *R, const struct node *x, struct frame *f)
{
	struct cv fn = eval(R, x->a, f);
	struct args A;

	if (R->failed || eval_args(R, x, f, &A) < 0)
		return cv_undef(NULL);
	return call(R, x, fn, &A);
}

static struct cv
eval_filter(struct rs *R, const struct node *x, struct frame *f)
{
	struct cv a = eval(R, x->a, f), b;
	struct args A;

	if (R->failed || eval_args(R, x, f, &A) < 0)
		return cv_undef(NULL);
	if (x->kind == E_FILTER)
		return apply_filter(R, x, x->fid, a, &A);
	b = run_test(R, x, x->fid, a, &A);
	return R->failed ? b : cv_bool(x->op ? !b.u.b : b.u.b);
}

static struct cv eval_node(struct rs *, const struct node *, struct frame *);

static struct cv
eval(struct rs *R, const struct node *x, struct frame *f)
{
	struct cv v;

	if (R->failed)
		return cv_undef(NULL);
	if (++R->edepth > MAX_EVAL_DEPTH) {
		R->edepth--;
		return rfail(R, x, "template nests too deep");
	}
	v = eval_node(R, x, f);
	R->edepth--;
	return v;
}

static struct cv
eval_node(struct rs *R, const struct node *x, struct frame *f)
{
	struct cv a, b, c;

	switch (x->kind) {
	case E_CONST: return x->cval;
	case E_NAME: return lookup(R, x, f);
	case E_ATTR:
		a = eval(R, x->a, f);
		return R->failed ? a : getattr_(R, x, a, x->name, x->namelen);
	case E_ITEM:
		a = eval(R, x->a, f);
		b = eval(R, x->b, f);
		return R->failed ? a : getitem(R, x, a, b);
	case E_SLICE:
		a = eval(R, x->a, f);
		b = x->b ? eval(R, x->b, f) : cv_none();
		c = x->c ? eval(R, x->c, f) : cv_none();
		struct cv d = x->d ? eval(R, x->d, f) : cv_none();
		return R->failed ? a : slice(R, x, a, b, c, d);
	case E_CALL: return eval_call(R, x, f);
	case E_FILTER: case E_TEST: return eval_filter(R, x, f);
	case E_BINOP:
		a = eval(R, x->a, f);
		b = eval(R, x->b, f);
		return R->failed ? a : arith(R, x, x->op, a, b);
	case E_NEG: case E_POS: case E_NOT: return eval_unary(R, x, f);
	case E_AND:
		a = eval(R, x->a, f);
		return R->failed || !cv_truthy(a) ? a : eval(R, x->b, f);
	case E_OR:
		a = eval(R, x->a, f);
		return R->failed || cv_truthy(a) ? a : eval(R, x->b, f);
	case E_CMP: return eval_cmp(R, x, f);
	case E_COND:
		b = eval(R, x->b, f);
		if (R->failed)
			return b;
		if (cv_truthy(b))
			return eval(R, x->a, f);
		return x->c ? eval(R, x->c, f) : cv_undef(NULL);
	case E_LIST: case E_TUPLE: case E_DICT: return eval_seq(R, x, f);
	case E_CONCAT: return eval_concat(R, x, f);
	default: return rfail(R, x, "unexpected node");
	}
}

/* --- statements --- */
static int
assign(struct rs *R, const struct node *t, struct cv v, struct frame *f)
{
	if (t->kind == E_NAME)
		return frame_set(R, f, t->name, t->namelen, v) < 0 ? (oom(R, t), -1) : 0;
	if (t->kind == E_ATTR) {
		struct cv ns = lookup(R, t->a, f);
		if (R->failed)
			return -1;
		if (ns.t != CV_NS)
			return rfail(R, t, "cannot assign attribute on non-namespace object"), -1;
		if (cv_dict_set(R->a, ns.u.d, cv_str(t->name, t->namelen), v) < 0)
			return oom(R, t), -1;
		return 0;
	}
	struct cv l = to_list(R, t, v);
	if (R->failed)
		return -1;
	if (l.u.l->n != t->nv)
		return rfail(R, t, "%s values to unpack (expected %zu, got %zu)",
		    l.u.l->n > t->nv ? "too many" : "not enough", t->nv, l.u.l->n), -1;
	for (size_t i = 0; i < t->nv; i++)
		if (assign(R, t->v[i], l.u.l->v[i], f) < 0)
			return -1;
	return 0;
}

static int
exec_for(struct rs *R, const struct node *x, struct frame *f)
{
	struct cv it = eval(R, x->b, f), l;
	struct frame fr = { .parent = f };
	struct loop_state st = { 0 };
	struct cv loopv = { .t = CV_LOOP, .u.loop = &st };

	if (R->failed)
		return -1;
	l = to_list(R, x, it);
	if (R->failed)
		return -1;
	if (x->nv == 1) {	/* {% for x in y if cond %} */
		struct cv keep = cv_list_new(R->a, l.u.l->n);
		if (keep.u.l == NULL)
			return oom(R, x), -1;
		for (size_t i = 0; i < l.u.l->n; i++) {
			fr.vars.n = 0;
			if (step(R, x) < 0 || assign(R, x->a, l.u.l->v[i], &fr) < 0)
				return -1;
			struct cv c = eval(R, x->v[0], &fr);
			if (R->failed)
				return -1;
			if (cv_truthy(c))
				keep.u.l->v[keep.u.l->n++] = l.u.l->v[i];
		}
		l = keep;
	}
	if (l.u.l->n == 0)
		return x->d ? exec_body(R, x->d, f) : 0;
	st.items = l.u.l;
	for (st.i = 0; st.i < l.u.l->n; st.i++) {
		fr.vars.n = 0;
		if (step(R, x) < 0 || assign(R, x->a, l.u.l->v[st.i], &fr) < 0 ||
		    frame_set(R, &fr, "loop", 4, loopv) < 0)
			return R->failed ? -1 : (oom(R, x), -1);
		if (exec_body(R, x->c, &fr) < 0)
			return -1;
		if (R->brk == 1) {
			R->brk = 0;
			break;
		}
		R->brk = 0;
	}
	return 0;
}

/* render body into a fresh string */
static struct cv
capture(struct rs *R, const struct node *x, const struct node *body, struct frame *f)
{
	struct sbuf out = { .a = R->a, .max = R->max_output }, *saved = R->out;

	R->out = &out;
	exec_body(R, body, f);
	R->out = saved;
	if (R->failed)
		return cv_undef(NULL);
	if (out.failed)
		return rfail(R, x, "output too large");
	return cv_str(out.p ? out.p : "", out.n);
}

/*
 * A macro sees the scope it is defined in.  Frames below the template's
 * are reused per loop iteration and live on the C stack, so the macro
 * keeps a copy of them (the values as they are at its definition).
 */
static int
define_macro(struct rs *R, const struct node *x, struct frame *f)
{
	struct cv_macro *mac = arena_alloc(R->a, sizeof *mac);
	struct frame **link, *g;
	struct cv v = { .t = CV_MACRO };

	if (mac == NULL)
		return oom(R, x), -1;
	mac->m = x;
	v.u.mac = mac;
	link = &mac->env;
	for (g = f; g != NULL && g != R->root; g = g->parent) {
		struct frame *c = arena_alloc(R->a, sizeof *c);
		if (c == NULL)
			return oom(R, x), -1;
		for (size_t i = 0; i < g->vars.n; i++)
			if (cv_dict_set(R->a, &c->vars, g->vars.k[i], g->vars.v[i]) < 0)
				return oom(R, x), -1;
		if (g == f && frame_set(R, c, x->name, x->namelen, v) < 0)	/* recursion */
			return oom(R, x), -1;
		*link = c;
		link = &c->parent;
	}
	*link = R->root;
	if (frame_set(R, f, x->name, x->namelen, v) < 0)
		return oom(R, x), -1;
	return 0;
}

static int
exec_stmt(struct rs *R, const struct node *x, struct frame *f)
{
	struct cv v;

	switch (x->kind) {
	case N_TEXT:
		sbuf_put(R->out, x->cval.u.s, x->cval.n);
		break;
	case N_OUTPUT:
		v = eval(R, x->a, f);
		if (!R->failed && v.t == CV_LIST && v.gen)
			rfail(R, x, "cannot print a generator");
		else if (!R->failed && cv_str_to(R->out, v) < 0)
			rfail(R, x, "cannot print a %s", cv_type_name(v));
		break;
	case N_IF:
		v = eval(R, x->a, f);
		if (R->failed)
			return -1;
		if (cv_truthy(v))
			return exec_body(R, x->b, f);
		if (x->c != NULL)
			return x->c->kind == N_IF ? exec_stmt(R, x->c, f) : exec_body(R, x->c, f);
		break;
	case N_FOR:
		return exec_for(R, x, f);
	case N_SET:
		v = eval(R, x->b, f);
		if (R->failed)
			return -1;
		return assign(R, x->a, v, f);
	case N_SETBLOCK:
		v = capture(R, x, x->b, f);
		if (!R->failed && x->c != NULL)
			v = apply_chain(R, x->c, v, f);
		return R->failed ? -1 : assign(R, x->a, v, f);
	case N_FILTERBLOCK:
		v = capture(R, x, x->b, f);
		if (!R->failed)
			v = apply_chain(R, x->a, v, f);
		if (!R->failed && cv_str_to(R->out, v) < 0)
			rfail(R, x, "cannot print a %s", cv_type_name(v));
		break;
	case N_MACRO:
		return define_macro(R, x, f);
	case N_BREAK: R->brk = 1; break;
	case N_CONTINUE: R->brk = 2; break;
	case N_BODY: return exec_body(R, x, f);
	default: rfail(R, x, "unexpected statement"); break;
	}
	if (R->out->failed && !R->failed)
		rfail(R, x, "output too large (over %zu bytes)", R->max_output);
	return R->failed ? -1 : 0;
}

static int
exec_body(struct rs *R, const struct node *body, struct frame *f)
{
	if (++R->edepth > MAX_EVAL_DEPTH) {
		R->edepth--;
		return rfail(R, body, "template nests too deep"), -1;
	}
	for (size_t i = 0; i < body->nv && !R->failed && !R->brk; i++)
		if (exec_stmt(R, body->v[i], f) < 0)
			break;
	R->edepth--;
	return R->failed ? -1 : 0;
}

int
chat_eval_render(const struct chat *c, const struct cv_dict *vars,
    const struct chat_opts_int *o, struct sbuf *out, struct arena *a, char *err)
{
	struct frame root = { 0 };
	struct rs R = {
		.a = a, .ctx = vars, .root = &root, .out = out, .max_steps = o->max_steps,
		.max_output = o->max_output, .err = err,
	};

	out->max = o->max_output;
	exec_body(&R, c->root, &root);
	if (!R.failed && out->failed)
		rfail(&R, NULL, "output too large (over %zu bytes)", o->max_output);
	return R.failed ? -1 : 0;
}
