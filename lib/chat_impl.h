/*
 * chat_impl: what the parts of lib/chat share (not installed, not API).
 *   chat_parse.c  lexer and parser: template text -> tree of nodes
 *   chat_value.c  values, Python's str()/repr(), json.dumps, string methods
 *   chat_eval.c   the renderer: statements, expressions, filters, tests
 *   chat.c        chat_new/chat_render/chat_free and the reply parser
 */
#ifndef MEMRA_CHAT_IMPL_H
#define MEMRA_CHAT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* --- arena: everything of one compile or one render lives in one --- */
struct arena {
	struct arena_blk *head;
	size_t	used, limit;	/* bytes handed out; 0 = no limit */
	int	failed;		/* an allocation failed or hit the limit */
};
void	*arena_alloc(struct arena *, size_t n);	/* zeroed; NULL on failure */
char	*arena_strndup(struct arena *, const char *s, size_t n);
void	arena_free(struct arena *);

/* --- values --- */
enum cv_type {
	CV_UNDEF, CV_NONE, CV_BOOL, CV_INT, CV_FLOAT, CV_STR, CV_LIST, CV_DICT,
	CV_NS, CV_MACRO, CV_FUNC, CV_LOOP
};

struct cv_list;
struct cv_dict;
struct node;
struct frame;

/* a macro and the scope it was defined in (its closure) */
struct cv_macro {
	const struct node *m;
	struct frame *env;
};

struct cv {
	enum cv_type t;
	int	tuple;		/* CV_LIST: a tuple (prints with parentheses) */
	unsigned char gen;	/* CV_LIST: a generator (map/select/...: no len, no json) */
	unsigned char safe;	/* CV_STR: markup (|safe): '+' escapes the other side */
	size_t	n;		/* CV_STR: bytes */
	union {
		int	b;
		int64_t	i;
		double	f;
		const char *s;		/* CV_STR: UTF-8, not NUL-terminated */
		struct cv_list *l;
		struct cv_dict *d;	/* CV_DICT, CV_NS */
		const struct cv_macro *mac;	/* CV_MACRO */
		struct cv_func *fn;	/* CV_FUNC */
		struct loop_state *loop;
	} u;
	const char *name;	/* CV_UNDEF: what was missing, for messages */
};

struct cv_list {
	size_t	n, cap;
	struct cv *v;
};

struct cv_dict {
	size_t	n, cap;
	struct cv *k, *v;
};

/* a builtin global or a bound method (self holds the object) */
struct cv_func {
	int	id;
	struct cv self;
};

struct loop_state {
	const struct cv_list *items;
	size_t	i;
	int	depth;
};

/* Constructors (no allocation unless noted). */
struct cv cv_undef(const char *name);
struct cv cv_none(void);
struct cv cv_bool(int b);
struct cv cv_int(int64_t i);
struct cv cv_float(double f);
struct cv cv_str(const char *s, size_t n);
struct cv cv_list_new(struct arena *, size_t cap);	/* u.l NULL on failure */
struct cv cv_dict_new(struct arena *, size_t cap);
int	cv_list_push(struct arena *, struct cv_list *, struct cv v);
int	cv_dict_set(struct arena *, struct cv_dict *, struct cv k, struct cv v);
/* the value at k, or NULL */
struct cv *cv_dict_get(const struct cv_dict *, struct cv k);
struct cv *cv_dict_gets(const struct cv_dict *, const char *k, size_t n);

int	cv_truthy(struct cv v);
int	cv_equal(struct cv a, struct cv b);
/* Python's <: -1 on a type error, else 0/1 in *lt */
int	cv_less(struct cv a, struct cv b, int *lt);
const char *cv_type_name(struct cv v);	/* Python's: 'str', 'dict', 'NoneType' */

/* a growable byte buffer in the arena */
struct sbuf {
	struct arena *a;
	char	*p;
	size_t	n, cap, max;	/* max: 0 = no limit */
	int	failed;		/* out of memory or over max */
};
void	sbuf_put(struct sbuf *, const char *s, size_t n);
void	sbuf_putc(struct sbuf *, char c);
void	sbuf_printf(struct sbuf *, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/* Python str(v) and repr(v) appended to b; -1 for values with no text */
int	cv_str_to(struct sbuf *b, struct cv v);
int	cv_repr_to(struct sbuf *b, struct cv v);
void	cv_float_repr(char *buf, size_t size, double f);
/* json.dumps(v, ensure_ascii, indent (-1: None), separators, sort_keys) */
struct json_opts {
	int	ascii, indent, sort_keys;
	const char *item_sep, *key_sep;
	size_t	item_sep_n, key_sep_n;
};
int	cv_json_to(struct sbuf *b, struct cv v, const struct json_opts *o,
	    int depth, char *err);

/* --- UTF-8 and Python's str methods --- */
size_t	u8_len(const char *s, size_t n);		/* code points */
size_t	u8_offset(const char *s, size_t n, size_t cp);	/* byte of code point cp */
int	u8_space_at(const char *s, size_t n, size_t i, size_t *w);	/* str.isspace */
size_t	u8_prev(const char *s, size_t i);		/* start of the char before i */
void	py_strip(const char *s, size_t n, const char *chars, size_t cn, int left,
	    int right, size_t *off, size_t *len);

/* --- lexer / parser --- */
enum node_kind {
	/* statements */
	N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_BREAK,
	N_CONTINUE, N_BODY, N_FILTERBLOCK,
	/* expressions */
	E_CONST, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST,
	E_BINOP, E_NEG, E_POS, E_NOT, E_AND, E_OR, E_CMP, E_COND, E_LIST,
	E_TUPLE, E_DICT, E_CONCAT, E_KWARG
};

enum op {
	OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
	OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN
};

struct node {
	enum node_kind kind;
	int	line;
	int	op;		/* enum op; E_TEST: negated */
	const char *name;	/* names, attributes, filter/test/macro names */
	size_t	namelen;
	struct node *a, *b, *c, *d;
	struct node **v;	/* bodies, arguments, list items, E_CMP operands */
	size_t	nv;
	int	*ops;		/* E_CMP: [nv] operators */
	struct cv cval;		/* E_CONST, N_TEXT (a string) */
	int	fid;		/* E_FILTER / E_TEST: builtin id */
};
/*
 * Shapes:
 *   N_TEXT cval; N_OUTPUT a; N_BODY v[nv]
 *   N_IF a=cond b=then(N_BODY) c=else(N_BODY or N_IF or NULL)
 *   N_FOR a=target(E_NAME/E_TUPLE) b=iter c=body d=else; v[0]=filter cond (nv 0/1)
 *   N_SET a=target(E_NAME/E_TUPLE/E_ATTR) b=value
 *   N_SETBLOCK a=target b=body c=filter chain (E_FILTER on E_CONST none) or NULL
 *   N_FILTERBLOCK a=filter chain b=body
 *   N_MACRO name, v[nv] params (E_NAME, b=default or NULL), a=body
 *   E_ATTR a . name; E_ITEM a[b]; E_SLICE a[b:c:d]
 *   E_CALL a(v...) (E_KWARG name=a for keywords)
 *   E_FILTER a|name(v...); E_TEST a is [not] name(v...)
 *   E_BINOP a op b; E_AND/E_OR a b; E_NOT/E_NEG/E_POS a
 *   E_CMP a then ops[i] v[i]; E_COND a if b else c (c NULL: undefined)
 *   E_LIST/E_TUPLE v; E_DICT v = key, value, key, value ...; E_CONCAT v (~)
 */

struct chat {
	struct arena arena;
	struct node *root;	/* N_BODY */
};

int	chat_parse(struct chat *c, const char *src, size_t len, char *err);

/* builtin filter and test ids, resolved at parse time (-1: unknown) */
int	chat_filter_id(const char *name, size_t n);
int	chat_test_id(const char *name, size_t n);

struct chat_opts_int {
	size_t	max_output;
	uint64_t max_steps;
};

int	chat_eval_render(const struct chat *c, const struct cv_dict *vars,
	    const struct chat_opts_int *o, struct sbuf *out, struct arena *a, char *err);

#endif
