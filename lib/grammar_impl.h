/*
 * grammar_impl: the compiled automaton, shared by grammar.c (states,
 * steps, masks) and grammar_schema.c (the schema compiler).  Private.
 */
#ifndef MEMRA_GRAMMAR_IMPL_H
#define MEMRA_GRAMMAR_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "grammar.h"

#define G_INF	0x3fffffffu	/* no finite value */

enum gkind {
	GK_OBJ,		/* properties in order: a key trie */
	GK_MAP,		/* any keys, values of child (-1: only {}) */
	GK_ARR,		/* items child (-1: only []), min..max of them */
	GK_STR, GK_NUM, GK_INT,
	GK_LIT,		/* one of a set of JSON texts: a literal trie */
	GK_UNION,	/* any of members[off..off+n) */
	GK_REF,		/* child itself */
	/* tool-call documents (grammar_calls.c) */
	GK_SEQ,		/* members[off..off+n), one after the other */
	GK_SWITCH,	/* a text of a trie (prefix-free; its leaf i), then members[off + i] */
	GK_RAW,		/* text (UTF-8) up to a pattern, never holding the forbidden ones:
			   DFA rows g->dfa[trie..trie+n); min 1: the document may end in it */
	GK_LOOP,	/* child again and again, whitespace between, until the end */
};

struct gnode {
	uint8_t	kind;
	uint8_t	xml;		/* OBJ: <parameter=KEY>\nVALUE members, the close among its keys */
	uint32_t ml;		/* fewest bytes of a value; G_INF when none is finite */
	int32_t	child;		/* ARR items, MAP values, REF target */
	int32_t	min, max;	/* ARR minItems, maxItems (-1: none) */
	uint32_t cap;		/* ARR: item counts saturate here */
	uint32_t trie;		/* LIT: its trie's root; OBJ: its key trie's root */
	uint32_t off, n;	/* OBJ: props[off..off+n] (one more: a sentinel);
				   UNION: members[off..off+n) */
	uint32_t alt, n_alt;	/* the concrete nodes it may be: alts[alt..alt+n_alt) */
};

struct gprop {
	int32_t	node;
	uint32_t qk;		/* bytes of the quoted key */
	uint8_t	required;
	uint32_t leaf;		/* its key's last trie node */
	uint32_t first_req;	/* first required index >= this one (n: none) */
	uint32_t rest;		/* bytes of the required members from here on, a comma
				   before each, then '}' (xml: no comma, then the close) */
	int32_t	nonstr;		/* xml: the value's JSON (not string) part, or -1 */
	uint8_t	str;		/* xml: the value may be a raw string */
};

/* A trie of literal texts (GK_LIT) or quoted keys (GK_OBJ). */
struct tnode {
	uint32_t child, next;	/* first child, next sibling; 0: none */
	uint32_t parent;
	uint8_t	byte;
	uint16_t depth;
	int32_t	leaf;		/* LIT: 1 at a whole literal; OBJ: its property; -1 */
	uint32_t mind;		/* LIT: fewest bytes to a whole literal below */
	uint32_t below, n_below;	/* OBJ: the properties below, ascending, in g->below */
};

/* The token trie, nodes in preorder: a node's children follow it, up to end. */
struct vnode {
	uint32_t end;		/* past the subtree */
	uint32_t tok;		/* its tokens: v->ids[tok..tok+n_tok) */
	uint16_t n_tok;
	uint8_t	byte;
};

struct grammar_vocab {
	size_t	n_vocab;
	struct vnode *vn;
	size_t	n_vn;
	int32_t	*ids;		/* tokens in byte order */
	int32_t	*stop;
	int	n_stop;
	uint32_t *off;		/* [n_vocab + 1] each token's bytes in bytes[] */
	uint8_t	*bytes;
	uint8_t	*in_trie;	/* [n_vocab] */
	size_t	max_len;
};

struct gcache_entry {
	uint64_t hash;		/* 0: an empty slot */
	uint8_t	*key;		/* a tag byte (mask or deltas), then the state */
	uint32_t keylen;
	int	count;
	void	*val;		/* a mask's bits, or a closing walk's deltas */
	size_t	vlen;
};

/* A DFA row of a GK_RAW node: the next state for each byte, or these. */
#define DFA_END	254		/* the pattern is complete: the text ends */
#define DFA_REJ	255		/* a forbidden pattern */

/* A tool of a tool-call document: its name and its arguments' node. */
struct gtool {
	char	*name;
	int32_t	args;		/* strict xml: the OBJ node of its parameters; else -1 */
};

struct grammar {
	const struct grammar_vocab *v;
	int	refs;		/* grammar_retain's, atomic; the last grammar_free frees */
	struct gnode *nodes;
	size_t	n_nodes, cap_nodes;
	struct gprop *props;
	size_t	n_props, cap_props;
	uint32_t *members, *alts, *below;
	size_t	n_members, cap_members, n_alts, cap_alts, n_below, cap_below;
	struct tnode *tn;
	size_t	n_tn, cap_tn;
	uint8_t	(*dfa)[256];	/* GK_RAW rows */
	uint32_t *dfa_dist;	/* [n_dfa] fewest bytes from a row's state to its end */
	size_t	n_dfa, cap_dfa;
	struct gtool *tools;	/* a tool-call document's tools */
	int	n_tools;
	int	calls;		/* 1: a tool-call document (grammar_ended: no more calls) */
	int32_t	root;
	int32_t	str_node;	/* a plain string: map keys */
	int	ws_max;
	uint32_t margin;	/* grammar_mask closes within distance + margin */
	size_t	words;		/* mask words of the vocabulary */
	/* the mask cache: open addressing, cleared when full */
	pthread_mutex_t mu;
	struct gcache_entry *cache;
	size_t	cache_slots, cache_used, cache_max;	/* entries: slots/2 at most */
	size_t	cache_bytes, cache_size;	/* the bound, and what entries hold */
};

/* grammar_schema.c: nodes of schema (NULL: any object) into g; g->root.
 * 0, or -1 with err. */
int	grammar_build(struct grammar *g, const struct json *schema, char *err);

/* The schema compiler's context (grammar_schema.c), shared with grammar_calls.c. */
struct gmemo;
struct gcc {
	struct grammar *g;
	const struct json *doc;	/* the schema "#" names */
	char	*err;
	char	path[512];
	size_t	plen;
	int	depth;
	int32_t	any;		/* the node of any value, -1 until needed */
	struct gmemo *memo;
	size_t	n_memo, cap_memo;
};

/* A new node of kind (ml G_INF, no child), or -1 (out of memory, err set). */
int32_t	grammar_node(struct gcc *c, int kind);
/* Schema s's node (memoized by address), or -1 with err naming its place. */
int32_t	grammar_schema_node(struct gcc *c, const struct json *s);
/* The node of any JSON value, or -1. */
int32_t	grammar_any_node(struct gcc *c);
/* Insert s[n] below trie root t, its end marked leaf; the end's node or -1. */
int64_t	grammar_trie_add(struct grammar *g, uint32_t t, const char *s, size_t n, int32_t leaf);
/* A literal trie's shortest texts: the mind of t and of the nodes below it. */
uint32_t grammar_trie_mind(struct grammar *g, uint32_t t);
/* Append m to g->members: 0, or -1. */
int	grammar_member(struct gcc *c, int32_t m);
/* err = "#PATH: " fmt (with a, b); -1. */
int	grammar_fail(struct gcc *c, const char *fmt, const char *a, const char *b);
/* The JSON text of j, compact, malloc'd ([*n]); NULL when out of memory. */
char	*grammar_literal(const struct json *j, size_t *n);
/* After the nodes: shortest values, alternatives, key lists, the margin: 0, or -1. */
int	grammar_finish(struct grammar *g, struct gcc *c);
/* Grow *p (of *cap elements of size sz) to hold n; 0 or -1. */
int	grammar_grow(void *p, size_t *cap, size_t n, size_t sz);

/* grammar_calls.c: the nodes of a tool-call document into g; 0, or -1
 * with err (*bad: the tool whose parameters were refused, else -1). */
int	grammar_build_calls(struct grammar *g, const struct grammar_tool *t, int n,
	    const struct grammar_calls *cl, int *bad, char *err);
/* 1 when the bytes v[n] are a whole value of node (whitespace around it
 * allowed), 0 when not, -1 when out of memory. */
int	grammar_node_accepts(const struct grammar *g, int32_t node, const char *v, size_t n);
/* A new trie node (0 is a valid root index), or -1 when out of memory. */
int64_t	grammar_tnode(struct grammar *g, int byte, int depth);
/* Each node's child on byte b, or 0. */
uint32_t grammar_tchild(const struct grammar *g, uint32_t t, int b);

#endif
