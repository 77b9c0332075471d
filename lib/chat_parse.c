/*
 * chat_parse: the Jinja lexer and parser for chat templates.
 *
 * The lexer follows jinja2's with trim_blocks and lstrip_blocks on:
 * newlines are normalized to "\n" and one trailing newline is dropped;
 * "{%-", "{{-", "{#-" strip all whitespace before a tag and "-%}", "-}}",
 * "-#}" all whitespace after it; a block or comment tag alone on its line
 * takes the line's leading blanks with it ("{%+" keeps them), and the
 * newline right after a block or comment tag goes ("+%}" keeps it).
 */
#include "chat.h"

#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"

enum tok_type {
	T_EOF, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END,
	T_NAME, T_STRING, T_INT, T_FLOAT, T_OP
};

struct tok {
	enum tok_type t;
	int	line;
	const char *s;	/* T_DATA, T_NAME, T_STRING (decoded), T_OP */
	size_t	n;
	int64_t	i;
	double	f;
};

struct lexer {
	struct arena *a;
	const char *src;
	size_t	n, pos;
	int	line;
	struct tok *toks;
	size_t	ntok, cap;
	char	*err;
};

struct parser {
	struct arena *a;
	struct tok *toks;
	size_t	i;
	int	depth, loops;
	char	*err;
	int	failed;
};

#define MAX_DEPTH 200

static int
lex_push(struct lexer *L, struct tok t)
{
	if (L->ntok == L->cap) {
		size_t cap = L->cap ? 2 * L->cap : 256;
		struct tok *p = realloc(L->toks, cap * sizeof *p);
		if (p == NULL)
			return util_err(L->err, "template: out of memory");
		L->toks = p;
		L->cap = cap;
	}
	L->toks[L->ntok++] = t;
	return 0;
}

static int
count_lines(const char *s, size_t n)
{
	int k = 0;

	for (size_t i = 0; i < n; i++)
		k += s[i] == '\n';
	return k;
}

/* Skip Python whitespace from i; returns the new position. */
static size_t
skip_space(const char *s, size_t n, size_t i)
{
	size_t w;

	while (i < n && u8_space_at(s, n, i, &w))
		i += w;
	return i;
}

/* lstrip_blocks: drop the blanks between the last newline and the tag. */
static size_t
lstrip_len(const char *s, size_t n, int line_starting)
{
	size_t lp = n, i, w;

	while (lp > 0 && s[lp - 1] != '\n')
		lp--;
	if (lp == 0 && !line_starting)
		return n;
	if (lp == n)
		return n;
	for (i = lp; i < n; i += w)
		if (!u8_space_at(s, n, i, &w))
			return n;
	return lp;
}

static int
lex_data(struct lexer *L, const char *s, size_t n)
{
	struct tok t = { .t = T_DATA, .line = L->line, .s = s, .n = n };

	if (n == 0)
		return 0;
	return lex_push(L, t);
}

static const char *const ops2[] = { "//", "**", "==", "!=", "<=", ">=", NULL };
static const char ops1[] = "+-/*%~[](){}<>=.:|,;";

static int
lex_string(struct lexer *L, struct tok *t)
{
	const char *s = L->src;
	char q = s[L->pos];
	size_t i = L->pos + 1, start = i;
	struct sbuf b = { .a = L->a };

	while (i < L->n && s[i] != q) {
		if (s[i] == '\\' && i + 1 < L->n)
			i++;
		i++;
	}
	if (i >= L->n)
		return util_err(L->err, "template line %d: unterminated string", L->line);
	for (size_t k = start; k < i; k++) {
		unsigned c = (unsigned char)s[k];
		if (c != '\\') {
			sbuf_putc(&b, (char)c);
			continue;
		}
		c = (unsigned char)s[++k];
		switch (c) {
		case 'n': sbuf_putc(&b, '\n'); break;
		case 't': sbuf_putc(&b, '\t'); break;
		case 'r': sbuf_putc(&b, '\r'); break;
		case 'a': sbuf_putc(&b, '\a'); break;
		case 'b': sbuf_putc(&b, '\b'); break;
		case 'f': sbuf_putc(&b, '\f'); break;
		case 'v': sbuf_putc(&b, '\v'); break;
		case '\\': case '\'': case '"': sbuf_putc(&b, (char)c); break;
		case '\n': break;
		case 'x': case 'u': case 'U': {
			int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
			uint32_t cp = 0;
			for (int d = 0; d < nd; d++) {
				int h = k + 1 + d < i ? s[k + 1 + d] : 0;
				int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ?
				    h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
				if (v < 0)
					return util_err(L->err, "template line %d: bad \\%c escape",
					    L->line, c);
				cp = cp * 16 + (uint32_t)v;
			}
			k += (size_t)nd;
			if (cp > 0x10FFFF)
				return util_err(L->err, "template line %d: bad \\%c escape", L->line, c);
			char u[4];
			size_t un;
			if (cp < 0x80) { u[0] = (char)cp; un = 1; }
			else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 63)); un = 2; }
			else if (cp < 0x10000) { u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | (cp >> 6 & 63)); u[2] = (char)(0x80 | (cp & 63)); un = 3; }
			else { u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | (cp >> 12 & 63)); u[2] = (char)(0x80 | (cp >> 6 & 63)); u[3] = (char)(0x80 | (cp & 63)); un = 4; }
			sbuf_put(&b, u, un);
			break;
		}
		default:
			if (c >= '0' && c <= '7') {
				unsigned v = c - '0';
				for (int d = 0; d < 2 && k + 1 < i && s[k + 1] >= '0' && s[k + 1] <= '7'; d++)
					v = v * 8 + (unsigned)(s[++k] - '0');
				char u[2];
				size_t un = 1;
				if (v < 0x80) u[0] = (char)v;
				else { u[0] = (char)(0xC0 | v >> 6); u[1] = (char)(0x80 | (v & 63)); un = 2; }
				sbuf_put(&b, u, un);
			} else {
				sbuf_putc(&b, '\\');
				k--;	/* keep the unknown escape as it is */
			}
		}
	}
	if (b.failed)
		return util_err(L->err, "template: out of memory");
	t->t = T_STRING;
	t->s = b.p ? b.p : "";
	t->n = b.n;
	L->line += count_lines(s + L->pos, i + 1 - L->pos);
	L->pos = i + 1;
	return 0;
}

static int
lex_number(struct lexer *L, struct tok *t)
{
	const char *s = L->src;
	size_t i = L->pos, n = L->n, k = 0;
	char buf[128];
	int isf = 0, over = 0;

#define DIGITS(allow_us) \
	while (i < n && ((s[i] >= '0' && s[i] <= '9') || ((allow_us) && s[i] == '_'))) { \
		if (s[i] != '_') { if (k < sizeof buf - 1) buf[k++] = s[i]; else over = 1; } \
		i++; \
	}
	DIGITS(1)
	if (i + 1 < n && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
		isf = 1;
		if (k < sizeof buf - 1) buf[k++] = '.'; else over = 1;
		i++;
		DIGITS(1)
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		size_t j = i + 1;
		if (j < n && (s[j] == '+' || s[j] == '-'))
			j++;
		if (j < n && s[j] >= '0' && s[j] <= '9') {
			isf = 1;
			for (; i < j; i++)
				if (k < sizeof buf - 1) buf[k++] = s[i]; else over = 1;
			DIGITS(0)
		}
	}
#undef DIGITS
	buf[k] = 0;
	L->pos = i;
	if (over)
		return util_err(L->err, "template line %d: number literal too long", L->line);
	if (isf) {
		t->t = T_FLOAT;
		t->f = strtod(buf, NULL);
		return 0;
	}
	t->t = T_INT;
	if (util_parse_i64(buf, INT64_MIN, INT64_MAX, &t->i) < 0)
		return util_err(L->err, "template line %d: integer %s is out of range", L->line, buf);
	return 0;
}

/* Lex the inside of a tag up to its end; returns 0 or -1. */
static int
lex_tag(struct lexer *L, int block)
{
	const char *s = L->src;
	int bal = 0;

	for (;;) {
		struct tok t = { .line = L->line };
		size_t i = L->pos, w;

		while (i < L->n && u8_space_at(s, L->n, i, &w)) {
			L->line += s[i] == '\n';
			i += w;
		}
		L->pos = i;
		t.line = L->line;
		if (i >= L->n)
			return util_err(L->err, "template line %d: unexpected end of template, "
			    "expected end of %s tag", L->line, block ? "block" : "print");
		if (bal == 0) {
			const char *end = block ? "%}" : "}}";
			if (s[i] == '-' && i + 2 < L->n + 0 && strncmp(s + i + 1, end, 2) == 0) {
				L->pos = skip_space(s, L->n, i + 3);
				L->line += count_lines(s + i, L->pos - i);
				t.t = block ? T_BLOCK_END : T_VAR_END;
				return lex_push(L, t);
			}
			if (block && s[i] == '+' && i + 2 < L->n && strncmp(s + i + 1, end, 2) == 0) {
				L->pos = i + 3;
				t.t = T_BLOCK_END;
				return lex_push(L, t);
			}
			if (i + 1 < L->n && strncmp(s + i, end, 2) == 0) {
				L->pos = i + 2;
				if (block && L->pos < L->n && s[L->pos] == '\n') {
					L->pos++;
					L->line++;
				}
				t.t = block ? T_BLOCK_END : T_VAR_END;
				return lex_push(L, t);
			}
		}
		unsigned char c = (unsigned char)s[i];
		if (c == '\'' || c == '"') {
			if (lex_string(L, &t) < 0)
				return -1;
		} else if (c >= '0' && c <= '9') {
			if (lex_number(L, &t) < 0)
				return -1;
		} else if (c == '_' || ((c | 32) >= 'a' && (c | 32) <= 'z')) {
			size_t j = i;
			while (j < L->n && (s[j] == '_' || ((s[j] | 32) >= 'a' && (s[j] | 32) <= 'z') ||
			    (s[j] >= '0' && s[j] <= '9')))
				j++;
			t.t = T_NAME;
			t.s = s + i;
			t.n = j - i;
			L->pos = j;
		} else {
			size_t k;
			t.t = T_OP;
			t.s = s + i;
			for (k = 0; ops2[k] != NULL; k++)
				if (i + 1 < L->n && strncmp(s + i, ops2[k], 2) == 0)
					break;
			if (ops2[k] != NULL) {
				t.n = 2;
			} else if (c != 0 && strchr(ops1, c) != NULL) {
				t.n = 1;
				if (c == '(' || c == '[' || c == '{')
					bal++;
				else if ((c == ')' || c == ']' || c == '}') && bal > 0)
					bal--;
			} else {
				return util_err(L->err, "template line %d: unexpected char '%c'",
				    L->line, c >= 32 && c < 127 ? c : '?');
			}
			L->pos = i + t.n;
		}
		if (lex_push(L, t) < 0)
			return -1;
	}
}

/* A comment "{# ... #}": its end, with trim_blocks applied. */
static int
lex_comment(struct lexer *L)
{
	const char *s = L->src, *e = NULL;
	size_t i;

	for (i = L->pos; i + 1 < L->n; i++)
		if (s[i] == '#' && s[i + 1] == '}') {
			e = s + i;
			break;
		}
	if (e == NULL)
		return util_err(L->err, "template line %d: missing end of comment tag", L->line);
	L->line += count_lines(s + L->pos, i - L->pos);
	if (i > L->pos && s[i - 1] == '-') {
		size_t j = skip_space(s, L->n, i + 2);
		L->line += count_lines(s + i, j - i);
		L->pos = j;
	} else {
		L->pos = i + 2;
		if (L->pos < L->n && s[L->pos] == '\n') {
			L->pos++;
			L->line++;
		}
	}
	return 0;
}

static int
lex_all(struct lexer *L)
{
	const char *s = L->src;
	int line_starting = 1;

	while (L->pos < L->n) {
		size_t i = L->pos, tag = L->n;
		char kind = 0, sign = 0;
		for (; i + 1 < L->n; i++)
			if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) {
				tag = i;
				kind = s[i + 1];
				break;
			}
		size_t dn = tag - L->pos;
		if (kind && tag + 2 < L->n && (s[tag + 2] == '-' || s[tag + 2] == '+'))
			sign = s[tag + 2];
		if (sign == '-') {
			size_t k = dn;
			while (k > 0) {
				size_t p = u8_prev(s + L->pos, k), w;
				if (!u8_space_at(s + L->pos, dn, p, &w))
					break;
				k = p;
			}
			dn = k;
		} else if (kind && kind != '{' && sign != '+') {
			dn = lstrip_len(s + L->pos, dn, line_starting);
		}
		if (lex_data(L, s + L->pos, dn) < 0)
			return -1;
		L->line += count_lines(s + L->pos, tag - L->pos);
		if (!kind) {
			L->pos = L->n;
			break;
		}
		L->pos = tag + 2 + (sign != 0);
		if (kind == '#') {
			if (lex_comment(L) < 0)
				return -1;
		} else {
			struct tok t = { .t = kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, .line = L->line };
			if (lex_push(L, t) < 0 || lex_tag(L, kind == '%') < 0)
				return -1;
		}
		line_starting = L->pos > 0 && s[L->pos - 1] == '\n';
	}
	struct tok t = { .t = T_EOF, .line = L->line };
	return lex_push(L, t);
}

/* jinja2: "\r\n" and "\r" become "\n", and one trailing newline goes. */
static char *
normalize(struct arena *a, const char *src, size_t n, size_t *outn)
{
	char *d = arena_alloc(a, n + 1);
	size_t k = 0;

	if (d == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (src[i] == '\r') {
			d[k++] = '\n';
			if (i + 1 < n && src[i + 1] == '\n')
				i++;
		} else {
			d[k++] = src[i];
		}
	}
	if (k > 0 && d[k - 1] == '\n')
		k--;
	d[k] = 0;
	*outn = k;
	return d;
}

/* --- parser --- */

static struct tok *
cur(struct parser *P)
{
	return &P->toks[P->i];
}

static int
is_op(const struct tok *t, const char *op)
{
	return t->t == T_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}

static int
is_name(const struct tok *t, const char *name)
{
	return t->t == T_NAME && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}

static const char *
tok_desc(const struct tok *t, char *buf, size_t size)
{
	switch (t->t) {
	case T_EOF: return "end of template";
	case T_DATA: return "template data";
	case T_VAR_BEGIN: return "'{{'";
	case T_VAR_END: return "end of print statement";
	case T_BLOCK_BEGIN: return "'{%'";
	case T_BLOCK_END: return "end of statement block";
	case T_STRING: return "string";
	case T_INT: case T_FLOAT: return "number";
	default:
		snprintf(buf, size, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
		return buf;
	}
}

static void *
fail(struct parser *P, const struct tok *t, const char *fmt, const char *arg)
{
	if (!P->failed) {
		char what[256];
		snprintf(what, sizeof what, fmt, arg);
		util_err(P->err, "template line %d: %s", t->line, what);
		P->failed = 1;
	}
	return NULL;
}

static void *
unexpected(struct parser *P)
{
	char buf[64];

	return fail(P, cur(P), "unexpected %s", tok_desc(cur(P), buf, sizeof buf));
}

static struct node *
mk(struct parser *P, enum node_kind k, int line)
{
	struct node *n = arena_alloc(P->a, sizeof *n);

	if (n == NULL)
		return fail(P, cur(P), "%s", "out of memory");
	n->kind = k;
	n->line = line;
	return n;
}

/* a growable node list, kept in the arena */
struct nlist {
	struct node **v;
	size_t	n, cap;
};

static int
nl_push(struct parser *P, struct nlist *l, struct node *x)
{
	if (x == NULL)
		return -1;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 4;
		struct node **v = arena_alloc(P->a, cap * sizeof *v);
		if (v == NULL) {
			fail(P, cur(P), "%s", "out of memory");
			return -1;
		}
		if (l->n)
			memcpy(v, l->v, l->n * sizeof *v);
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = x;
	return 0;
}

static int
expect_op(struct parser *P, const char *op)
{
	if (!is_op(cur(P), op)) {
		char buf[64], msg[128];
		snprintf(msg, sizeof msg, "expected '%s', got %s", op, tok_desc(cur(P), buf, sizeof buf));
		fail(P, cur(P), "%s", msg);
		return -1;
	}
	P->i++;
	return 0;
}

static int
expect_end(struct parser *P)
{
	if (cur(P)->t != T_BLOCK_END) {
		char buf[64], msg[128];
		snprintf(msg, sizeof msg, "expected end of statement block, got %s",
		    tok_desc(cur(P), buf, sizeof buf));
		fail(P, cur(P), "%s", msg);
		return -1;
	}
	P->i++;
	return 0;
}

static struct node *parse_expr(struct parser *P, int condexpr);
static struct node *parse_tuple(struct parser *P, int condexpr, int parens);
static struct node *parse_unary(struct parser *P, int with_filter);
static struct node *parse_primary(struct parser *P);
static struct node *parse_postfix(struct parser *P, struct node *x);

static int
enter(struct parser *P)
{
	if (++P->depth > MAX_DEPTH) {
		fail(P, cur(P), "%s", "nesting too deep");
		return -1;
	}
	return 0;
}

/* "(a, b=c)": arguments into x->v; keywords as E_KWARG */
static int
parse_args(struct parser *P, struct node *x)
{
	struct nlist l = { 0 };

	if (expect_op(P, "(") < 0)
		return -1;
	while (!is_op(cur(P), ")")) {
		if (l.n && expect_op(P, ",") < 0)
			return -1;
		if (is_op(cur(P), ")"))
			break;
		if (is_op(cur(P), "*") || is_op(cur(P), "**")) {
			fail(P, cur(P), "%s", "unsupported *args/**kwargs in a call");
			return -1;
		}
		struct tok *t = cur(P);
		if (t->t == T_NAME && is_op(&P->toks[P->i + 1], "=")) {
			struct node *k = mk(P, E_KWARG, t->line);
			if (k == NULL)
				return -1;
			k->name = t->s;
			k->namelen = t->n;
			P->i += 2;
			k->a = parse_expr(P, 1);
			if (k->a == NULL || nl_push(P, &l, k) < 0)
				return -1;
		} else if (nl_push(P, &l, parse_expr(P, 1)) < 0) {
			return -1;
		}
	}
	P->i++;
	x->v = l.v;
	x->nv = l.n;
	return 0;
}

static struct node *
parse_filter(struct parser *P, struct node *x, int test)
{
	struct tok *t;
	struct node *f;

	if (test && is_name(cur(P), "not")) {
		P->i++;
		f = mk(P, E_TEST, cur(P)->line);
		if (f)
			f->op = 1;
	} else {
		f = mk(P, test ? E_TEST : E_FILTER, cur(P)->line);
	}
	if (f == NULL)
		return NULL;
	t = cur(P);
	if (t->t != T_NAME)
		return unexpected(P);
	P->i++;
	f->a = x;
	f->name = t->s;
	f->namelen = t->n;
	f->fid = test ? chat_test_id(t->s, t->n) : chat_filter_id(t->s, t->n);
	/* an unknown filter or test: see hard_names */
	if (is_op(cur(P), "(")) {
		if (parse_args(P, f) < 0)
			return NULL;
	} else if (test) {
		struct tok *a = cur(P);
		if ((a->t == T_NAME && !is_name(a, "else") && !is_name(a, "or") &&
		    !is_name(a, "and")) || a->t == T_STRING || a->t == T_INT ||
		    a->t == T_FLOAT || is_op(a, "(") || is_op(a, "[") || is_op(a, "{")) {
			struct node *arg = parse_postfix(P, parse_primary(P));
			f->v = arena_alloc(P->a, sizeof *f->v);
			if (arg == NULL || f->v == NULL)
				return fail(P, a, "%s", "bad test argument");
			f->v[0] = arg;
			f->nv = 1;
		}
	}
	return f;
}

static struct node *
parse_filter_expr(struct parser *P, struct node *x)
{
	while (x != NULL) {
		if (is_op(cur(P), "|")) {
			P->i++;
			x = parse_filter(P, x, 0);
		} else if (is_name(cur(P), "is")) {
			P->i++;
			x = parse_filter(P, x, 1);
		} else if (is_op(cur(P), "(")) {
			struct node *c = mk(P, E_CALL, cur(P)->line);
			if (c == NULL)
				return NULL;
			c->a = x;
			if (parse_args(P, c) < 0)
				return NULL;
			x = c;
		} else {
			break;
		}
	}
	return x;
}

/* after '[': an index or a slice */
static struct node *
parse_subscript(struct parser *P, struct node *x, int line)
{
	struct node *parts[3] = { NULL, NULL, NULL };
	int k = 0, slice = 0;

	for (;;) {
		if (is_op(cur(P), ":")) {
			slice = 1;
			if (++k > 2)
				return unexpected(P);
			P->i++;
			continue;
		}
		if (is_op(cur(P), "]"))
			break;
		if (parts[k] != NULL)
			return unexpected(P);
		if ((parts[k] = parse_expr(P, 1)) == NULL)
			return NULL;
	}
	P->i++;
	struct node *n = mk(P, slice ? E_SLICE : E_ITEM, line);
	if (n == NULL)
		return NULL;
	n->a = x;
	if (!slice && parts[0] == NULL)
		return fail(P, cur(P), "%s", "expected an index");
	n->b = parts[0];
	n->c = parts[1];
	n->d = parts[2];
	return n;
}

static struct node *
parse_postfix(struct parser *P, struct node *x)
{
	while (x != NULL) {
		struct tok *t = cur(P);
		if (is_op(t, ".")) {
			struct tok *nm = &P->toks[P->i + 1];
			struct node *n;
			if (nm->t == T_NAME) {
				n = mk(P, E_ATTR, t->line);
				if (n == NULL)
					return NULL;
				n->name = nm->s;
				n->namelen = nm->n;
			} else if (nm->t == T_INT) {
				n = mk(P, E_ITEM, t->line);
				if (n == NULL || (n->b = mk(P, E_CONST, t->line)) == NULL)
					return NULL;
				n->b->cval = cv_int(nm->i);
			} else {
				P->i++;
				return unexpected(P);
			}
			n->a = x;
			P->i += 2;
			x = n;
		} else if (is_op(t, "[")) {
			P->i++;
			x = parse_subscript(P, x, t->line);
		} else if (is_op(t, "(")) {
			struct node *c = mk(P, E_CALL, t->line);
			if (c == NULL)
				return NULL;
			c->a = x;
			if (parse_args(P, c) < 0)
				return NULL;
			x = c;
		} else {
			break;
		}
	}
	return x;
}

static struct node *
parse_list_or_dict(struct parser *P, int dict)
{
	struct tok *t = cur(P);
	struct node *x = mk(P, dict ? E_DICT : E_LIST, t->line);
	struct nlist l = { 0 };
	const char *close = dict ? "}" : "]";

	if (x == NULL)
		return NULL;
	P->i++;
	while (!is_op(cur(P), close)) {
		if (l.n && expect_op(P, ",") < 0)
			return NULL;
		if (is_op(cur(P), close))
			break;
		if (nl_push(P, &l, parse_expr(P, 1)) < 0)
			return NULL;
		if (dict && (expect_op(P, ":") < 0 || nl_push(P, &l, parse_expr(P, 1)) < 0))
			return NULL;
	}
	P->i++;
	x->v = l.v;
	x->nv = l.n;
	return x;
}

static struct node *
parse_primary(struct parser *P)
{
	struct tok *t = cur(P);
	struct node *x;

	if (enter(P) < 0)
		return NULL;
	P->depth--;
	if (t->t == T_NAME) {
		static const struct { const char *s; int v; } kw[] = {
			{ "true", 1 }, { "True", 1 }, { "false", 0 }, { "False", 0 },
			{ "none", 2 }, { "None", 2 },
		};
		if ((x = mk(P, E_NAME, t->line)) == NULL)
			return NULL;
		x->name = t->s;
		x->namelen = t->n;
		for (size_t k = 0; k < sizeof kw / sizeof kw[0]; k++)
			if (is_name(t, kw[k].s)) {
				x->kind = E_CONST;
				x->cval = kw[k].v == 2 ? cv_none() : cv_bool(kw[k].v);
			}
		P->i++;
		return x;
	}
	if (t->t == T_STRING) {
		struct sbuf b = { .a = P->a };
		if ((x = mk(P, E_CONST, t->line)) == NULL)
			return NULL;
		while (cur(P)->t == T_STRING) {
			sbuf_put(&b, cur(P)->s, cur(P)->n);
			P->i++;
		}
		if (b.failed)
			return fail(P, t, "%s", "out of memory");
		x->cval = cv_str(b.p ? b.p : "", b.n);
		return x;
	}
	if (t->t == T_INT || t->t == T_FLOAT) {
		if ((x = mk(P, E_CONST, t->line)) == NULL)
			return NULL;
		x->cval = t->t == T_INT ? cv_int(t->i) : cv_float(t->f);
		P->i++;
		return x;
	}
	if (is_op(t, "(")) {
		P->i++;
		x = parse_tuple(P, 1, 1);
		if (x != NULL && expect_op(P, ")") < 0)
			return NULL;
		return x;
	}
	if (is_op(t, "["))
		return parse_list_or_dict(P, 0);
	if (is_op(t, "{"))
		return parse_list_or_dict(P, 1);
	return unexpected(P);
}

static struct node *
parse_unary(struct parser *P, int with_filter)
{
	struct tok *t = cur(P);
	struct node *x;

	if (enter(P) < 0)
		return NULL;
	if (is_op(t, "-") || is_op(t, "+")) {
		P->i++;
		if ((x = mk(P, is_op(t, "-") ? E_NEG : E_POS, t->line)) != NULL)
			x->a = parse_unary(P, 0);
		if (x != NULL && x->a == NULL)
			x = NULL;
	} else {
		x = parse_primary(P);
	}
	x = parse_postfix(P, x);
	if (with_filter)
		x = parse_filter_expr(P, x);
	P->depth--;
	return x;
}

static struct node *
binop(struct parser *P, int op, struct node *l, struct node *r, int line)
{
	struct node *x;

	if (l == NULL || r == NULL || (x = mk(P, E_BINOP, line)) == NULL)
		return NULL;
	x->op = op;
	x->a = l;
	x->b = r;
	return x;
}

static struct node *
parse_pow(struct parser *P)
{
	struct node *x = parse_unary(P, 1);

	while (x != NULL && is_op(cur(P), "**")) {
		int line = cur(P)->line;
		P->i++;
		x = binop(P, OP_POW, x, parse_unary(P, 1), line);
	}
	return x;
}

static struct node *
parse_math2(struct parser *P)
{
	struct node *x = parse_pow(P);

	for (;;) {
		struct tok *t = cur(P);
		int op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV :
		    is_op(t, "//") ? OP_FLOORDIV : is_op(t, "%") ? OP_MOD : 0;
		if (x == NULL || !op)
			return x;
		P->i++;
		x = binop(P, op, x, parse_pow(P), t->line);
	}
}

static struct node *
parse_concat(struct parser *P)
{
	struct node *x = parse_math2(P), *c;
	struct nlist l = { 0 };

	if (x == NULL || !is_op(cur(P), "~"))
		return x;
	if ((c = mk(P, E_CONCAT, cur(P)->line)) == NULL || nl_push(P, &l, x) < 0)
		return NULL;
	while (is_op(cur(P), "~")) {
		P->i++;
		if (nl_push(P, &l, parse_math2(P)) < 0)
			return NULL;
	}
	c->v = l.v;
	c->nv = l.n;
	return c;
}

static struct node *
parse_math1(struct parser *P)
{
	struct node *x = parse_concat(P);

	for (;;) {
		struct tok *t = cur(P);
		int op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : 0;
		if (x == NULL || !op)
			return x;
		P->i++;
		x = binop(P, op, x, parse_concat(P), t->line);
	}
}

static struct node *
parse_compare(struct parser *P)
{
	struct node *x = parse_math1(P), *c = NULL;
	struct nlist l = { 0 };
	int ops[64], nops = 0;

	while (x != NULL) {
		struct tok *t = cur(P);
		int op = is_op(t, "==") ? OP_EQ : is_op(t, "!=") ? OP_NE : is_op(t, "<") ? OP_LT :
		    is_op(t, "<=") ? OP_LE : is_op(t, ">") ? OP_GT : is_op(t, ">=") ? OP_GE :
		    is_name(t, "in") ? OP_IN : 0;
		if (!op && is_name(t, "not") && is_name(&P->toks[P->i + 1], "in")) {
			op = OP_NOTIN;
			P->i++;
		}
		if (!op)
			break;
		if (nops == 64)
			return fail(P, t, "%s", "too many comparisons in a row");
		P->i++;
		ops[nops++] = op;
		if (nl_push(P, &l, parse_math1(P)) < 0)
			return NULL;
	}
	if (x == NULL || nops == 0)
		return x;
	if ((c = mk(P, E_CMP, x->line)) == NULL ||
	    (c->ops = arena_alloc(P->a, (size_t)nops * sizeof *c->ops)) == NULL)
		return NULL;
	memcpy(c->ops, ops, (size_t)nops * sizeof *ops);
	c->a = x;
	c->v = l.v;
	c->nv = l.n;
	return c;
}

static struct node *
parse_not(struct parser *P)
{
	struct node *x;

	if (!is_name(cur(P), "not"))
		return parse_compare(P);
	if (enter(P) < 0 || (x = mk(P, E_NOT, cur(P)->line)) == NULL)
		return NULL;
	P->i++;
	x->a = parse_not(P);
	P->depth--;
	return x->a ? x : NULL;
}

static struct node *
parse_andor(struct parser *P, int isor)
{
	struct node *x = isor ? parse_andor(P, 0) : parse_not(P);

	while (x != NULL && is_name(cur(P), isor ? "or" : "and")) {
		struct node *y = mk(P, isor ? E_OR : E_AND, cur(P)->line);
		if (y == NULL)
			return NULL;
		P->i++;
		y->a = x;
		y->b = isor ? parse_andor(P, 0) : parse_not(P);
		x = y->b ? y : NULL;
	}
	return x;
}

static struct node *
parse_expr(struct parser *P, int condexpr)
{
	struct node *x;

	if (enter(P) < 0)
		return NULL;
	x = parse_andor(P, 1);
	while (condexpr && x != NULL && is_name(cur(P), "if")) {
		struct node *c = mk(P, E_COND, cur(P)->line);
		if (c == NULL)
			return NULL;
		P->i++;
		c->a = x;
		if ((c->b = parse_andor(P, 1)) == NULL)
			return NULL;
		if (is_name(cur(P), "else")) {
			P->i++;
			if ((c->c = parse_expr(P, 1)) == NULL)
				return NULL;
		}
		x = c;
	}
	P->depth--;
	return x;
}

/* "a, b" is a tuple; with parens "(a)" is a and "()" the empty tuple */
static struct node *
parse_tuple(struct parser *P, int condexpr, int parens)
{
	struct nlist l = { 0 };
	int line = cur(P)->line, comma = 0;
	struct node *x;

	for (;;) {
		struct tok *t = cur(P);
		if (l.n && !is_op(t, ","))
			break;
		if (l.n) {
			P->i++;
			comma = 1;
			t = cur(P);
		}
		if (t->t == T_VAR_END || t->t == T_BLOCK_END || is_op(t, ")") ||
		    (l.n && (is_name(t, "in") || is_name(t, "recursive") || is_name(t, "if"))))
			break;
		if (nl_push(P, &l, parse_expr(P, condexpr)) < 0)
			return NULL;
	}
	if (l.n == 1 && !comma)
		return l.v[0];
	if (l.n == 0 && !parens)
		return unexpected(P);
	if ((x = mk(P, E_TUPLE, line)) == NULL)
		return NULL;
	x->v = l.v;
	x->nv = l.n;
	return x;
}

static struct node *parse_body(struct parser *P, const char *const *ends);

/* for/set targets: a name, "a, b", or with ns "ns.attr" */
static struct node *
parse_target(struct parser *P, int with_ns)
{
	struct tok *t = cur(P);
	struct nlist l = { 0 };
	struct node *x;

	if (with_ns && t->t == T_NAME && is_op(&P->toks[P->i + 1], ".") &&
	    P->toks[P->i + 2].t == T_NAME) {
		if ((x = mk(P, E_ATTR, t->line)) == NULL || (x->a = mk(P, E_NAME, t->line)) == NULL)
			return NULL;
		x->a->name = t->s;
		x->a->namelen = t->n;
		x->name = P->toks[P->i + 2].s;
		x->namelen = P->toks[P->i + 2].n;
		P->i += 3;
		return x;
	}
	for (;;) {
		t = cur(P);
		if (t->t != T_NAME)
			return unexpected(P);
		if ((x = mk(P, E_NAME, t->line)) == NULL || nl_push(P, &l, x) < 0)
			return NULL;
		x->name = t->s;
		x->namelen = t->n;
		P->i++;
		if (!is_op(cur(P), ","))
			break;
		P->i++;
	}
	if (l.n == 1)
		return l.v[0];
	if ((x = mk(P, E_TUPLE, l.v[0]->line)) == NULL)
		return NULL;
	x->v = l.v;
	x->nv = l.n;
	return x;
}

static const char *const end_if[] = { "elif", "else", "endif", NULL };
static const char *const end_for[] = { "else", "endfor", NULL };
static const char *const end_endfor[] = { "endfor", NULL };
static const char *const end_set[] = { "endset", NULL };
static const char *const end_macro[] = { "endmacro", NULL };
static const char *const end_gen[] = { "endgeneration", NULL };
static const char *const end_filter[] = { "endfilter", NULL };

static struct node *
parse_if(struct parser *P, int line)
{
	struct node *x = mk(P, N_IF, line);

	if (x == NULL || (x->a = parse_tuple(P, 0, 0)) == NULL || expect_end(P) < 0 ||
	    (x->b = parse_body(P, end_if)) == NULL)
		return NULL;
	struct tok *t = cur(P);
	P->i++;
	if (is_name(t, "elif")) {
		x->c = parse_if(P, t->line);
		return x->c ? x : NULL;
	}
	if (is_name(t, "else")) {
		static const char *const e[] = { "endif", NULL };
		if (expect_end(P) < 0 || (x->c = parse_body(P, e)) == NULL)
			return NULL;
		P->i++;
	}
	return expect_end(P) < 0 ? NULL : x;
}

static struct node *
parse_for(struct parser *P, int line)
{
	struct node *x = mk(P, N_FOR, line);

	if (x == NULL || (x->a = parse_target(P, 0)) == NULL)
		return NULL;
	if (!is_name(cur(P), "in"))
		return fail(P, cur(P), "%s", "expected 'in'");
	P->i++;
	if ((x->b = parse_tuple(P, 0, 0)) == NULL)
		return NULL;
	if (is_name(cur(P), "if")) {
		P->i++;
		if ((x->v = arena_alloc(P->a, sizeof *x->v)) == NULL ||
		    (x->v[0] = parse_expr(P, 1)) == NULL)
			return NULL;
		x->nv = 1;
	}
	if (is_name(cur(P), "recursive"))
		return fail(P, cur(P), "%s", "unsupported recursive loop");
	if (expect_end(P) < 0)
		return NULL;
	P->loops++;
	x->c = parse_body(P, end_for);
	P->loops--;
	if (x->c == NULL)
		return NULL;
	if (is_name(cur(P), "else")) {
		P->i++;
		if (expect_end(P) < 0 || (x->d = parse_body(P, end_endfor)) == NULL)
			return NULL;
	}
	P->i++;
	return expect_end(P) < 0 ? NULL : x;
}

/* "|f(x)|g" applied to a placeholder, for {% set x | f %} and {% filter %} */
static struct node *
parse_filter_chain(struct parser *P, int first_pipe_done)
{
	struct node *x = mk(P, E_CONST, cur(P)->line);

	if (x == NULL)
		return NULL;
	x->cval = cv_none();
	if (first_pipe_done)
		x = parse_filter(P, x, 0);
	while (x != NULL && is_op(cur(P), "|")) {
		P->i++;
		x = parse_filter(P, x, 0);
	}
	return x;
}

static struct node *
parse_set(struct parser *P, int line)
{
	struct node *x = mk(P, N_SET, line);

	if (x == NULL || (x->a = parse_target(P, 1)) == NULL)
		return NULL;
	if (is_op(cur(P), "=")) {
		P->i++;
		if ((x->b = parse_tuple(P, 1, 0)) == NULL)
			return NULL;
		return expect_end(P) < 0 ? NULL : x;
	}
	if (x->a->kind != E_NAME)
		return fail(P, cur(P), "%s", "a block set takes one name");
	x->kind = N_SETBLOCK;
	if (is_op(cur(P), "|")) {
		if ((x->c = parse_filter_chain(P, 0)) == NULL)
			return NULL;
	}
	if (expect_end(P) < 0 || (x->b = parse_body(P, end_set)) == NULL)
		return NULL;
	P->i++;
	return expect_end(P) < 0 ? NULL : x;
}

static struct node *
parse_macro(struct parser *P, int line)
{
	struct node *x = mk(P, N_MACRO, line);
	struct nlist l = { 0 };
	struct tok *t = cur(P);

	if (x == NULL)
		return NULL;
	if (t->t != T_NAME)
		return unexpected(P);
	x->name = t->s;
	x->namelen = t->n;
	P->i++;
	if (expect_op(P, "(") < 0)
		return NULL;
	while (!is_op(cur(P), ")")) {
		if (l.n && expect_op(P, ",") < 0)
			return NULL;
		t = cur(P);
		if (t->t != T_NAME)
			return unexpected(P);
		struct node *p = mk(P, E_NAME, t->line);
		if (p == NULL)
			return NULL;
		p->name = t->s;
		p->namelen = t->n;
		P->i++;
		if (is_op(cur(P), "=")) {
			P->i++;
			if ((p->b = parse_expr(P, 1)) == NULL)
				return NULL;
		}
		if (nl_push(P, &l, p) < 0)
			return NULL;
	}
	P->i++;
	x->v = l.v;
	x->nv = l.n;
	int loops = P->loops;
	P->loops = 0;
	if (expect_end(P) < 0 || (x->a = parse_body(P, end_macro)) == NULL)
		return NULL;
	P->loops = loops;
	P->i++;
	if (cur(P)->t == T_NAME)	/* {% endmacro name %} */
		P->i++;
	return expect_end(P) < 0 ? NULL : x;
}

static struct node *
parse_wrapped(struct parser *P, int line, enum node_kind k, const char *const *ends)
{
	struct node *x = mk(P, k, line);

	if (x == NULL)
		return NULL;
	if (k == N_FILTERBLOCK && (x->a = parse_filter_chain(P, 1)) == NULL)
		return NULL;
	if (expect_end(P) < 0 || (x->b = parse_body(P, ends)) == NULL)
		return NULL;
	P->i++;
	return expect_end(P) < 0 ? NULL : x;
}

static struct node *
parse_stmt(struct parser *P)
{
	struct tok *t = cur(P);
	char nm[80];

	if (t->t != T_NAME)
		return unexpected(P);
	P->i++;
	if (is_name(t, "if"))
		return parse_if(P, t->line);
	if (is_name(t, "for"))
		return parse_for(P, t->line);
	if (is_name(t, "set"))
		return parse_set(P, t->line);
	if (is_name(t, "macro"))
		return parse_macro(P, t->line);
	if (is_name(t, "generation")) {	/* transformers' AssistantTracker */
		struct node *x = parse_wrapped(P, t->line, N_BODY, end_gen);
		return x ? x->b : NULL;
	}
	if (is_name(t, "filter"))
		return parse_wrapped(P, t->line, N_FILTERBLOCK, end_filter);
	if (is_name(t, "break") || is_name(t, "continue")) {
		struct node *x;
		if (P->loops == 0)
			return fail(P, t, "'%s' outside of a loop", is_name(t, "break") ? "break" : "continue");
		if ((x = mk(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, t->line)) == NULL)
			return NULL;
		return expect_end(P) < 0 ? NULL : x;
	}
	snprintf(nm, sizeof nm, "%.*s", (int)(t->n > 60 ? 60 : t->n), t->s);
	return fail(P, t, "unsupported tag '%s'", nm);
}

/*
 * Statements and text up to one of ends (a block tag whose name is in it,
 * left as the current token) or, with ends NULL, to the end of template.
 */
static struct node *
parse_body(struct parser *P, const char *const *ends)
{
	struct node *body = mk(P, N_BODY, cur(P)->line), *x;
	struct nlist l = { 0 };

	if (body == NULL || enter(P) < 0)
		return NULL;
	for (;;) {
		struct tok *t = cur(P);
		if (t->t == T_EOF) {
			if (ends != NULL) {
				size_t k = 0;
				while (ends[k + 1] != NULL)
					k++;
				return fail(P, t, "unexpected end of template, expected '%s'", ends[k]);
			}
			break;
		}
		if (t->t == T_DATA) {
			if ((x = mk(P, N_TEXT, t->line)) == NULL)
				return NULL;
			x->cval = cv_str(t->s, t->n);
			P->i++;
		} else if (t->t == T_VAR_BEGIN) {
			P->i++;
			if ((x = mk(P, N_OUTPUT, t->line)) == NULL ||
			    (x->a = parse_tuple(P, 1, 0)) == NULL)
				return NULL;
			if (cur(P)->t != T_VAR_END)
				return unexpected(P);
			P->i++;
		} else if (t->t == T_BLOCK_BEGIN) {
			struct tok *nm = &P->toks[P->i + 1];
			int k;
			for (k = 0; ends != NULL && ends[k] != NULL; k++)
				if (is_name(nm, ends[k])) {
					P->i++;
					goto done;
				}
			P->i++;
			if ((x = parse_stmt(P)) == NULL)
				return NULL;
		} else {
			return unexpected(P);
		}
		if (nl_push(P, &l, x) < 0)
			return NULL;
	}
done:
	body->v = l.v;
	body->nv = l.n;
	P->depth--;
	return body;
}

/*
 * jinja2 rejects an unknown filter or test when it compiles the template,
 * except inside an if (its test and bodies) or a conditional expression,
 * where it fails only when reached (a template may guard a non-standard
 * filter); a for, macro or block body starts a new, strict frame again.
 * 0, or -1 with the first strict one in err.
 */
static int
hard_names(struct parser *P, const struct node *x, int soft)
{
	int inner = 0;		/* children in a new (strict) frame */

	if (x == NULL)
		return 0;
	switch (x->kind) {
	case N_IF: case E_COND:
		soft = 1;
		break;
	case N_FOR:
		if (hard_names(P, x->a, soft) < 0 || hard_names(P, x->b, soft) < 0)
			return -1;
		return hard_names(P, x->c, 0) < 0 || hard_names(P, x->d, 0) < 0 ||
		    (x->nv > 0 && hard_names(P, x->v[0], 0) < 0) ? -1 : 0;
	case N_MACRO: case N_SETBLOCK: case N_FILTERBLOCK:
		inner = 1;
		break;
	case E_FILTER: case E_TEST:
		if (x->fid < 0 && !soft) {
			char nm[80];
			struct tok t = { .line = x->line };
			snprintf(nm, sizeof nm, "%.*s", (int)(x->namelen > 60 ? 60 : x->namelen), x->name);
			fail(P, &t, x->kind == E_TEST ? "unsupported test '%s'" : "unsupported filter '%s'", nm);
			return -1;
		}
		break;
	default:
		break;
	}
	if (inner)
		soft = 0;
	if (hard_names(P, x->a, soft) < 0 || hard_names(P, x->b, soft) < 0 ||
	    hard_names(P, x->c, soft) < 0 || hard_names(P, x->d, soft) < 0)
		return -1;
	for (size_t i = 0; i < x->nv; i++)
		if (hard_names(P, x->v[i], soft) < 0)
			return -1;
	return 0;
}

int
chat_parse(struct chat *c, const char *src, size_t len, char *err)
{
	struct lexer L = { .a = &c->arena, .line = 1, .err = err };
	struct parser P = { .a = &c->arena, .err = err };
	int rc = -1;

	if ((L.src = normalize(&c->arena, src, len, &L.n)) == NULL)
		return util_err(err, "template: out of memory");
	if (lex_all(&L) == 0) {
		P.toks = L.toks;
		c->root = parse_body(&P, NULL);
		if (c->root != NULL && !P.failed && hard_names(&P, c->root, 0) == 0)
			rc = 0;
		else if (!P.failed)
			util_err(err, "template: out of memory");
	}
	free(L.toks);
	return rc;
}
