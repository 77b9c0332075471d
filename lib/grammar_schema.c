/*
 * grammar_schema: a JSON Schema to the automaton's nodes (grammar_impl.h).
 *
 * Each schema object becomes one node (memoized by its address, so that
 * $ref recursion closes on itself); unions and refs are resolved to the
 * concrete nodes they may be once all are built.  A fixpoint then finds
 * each node's shortest value: a node with none (a required recursion
 * with no way out, an empty enum) can never end, and parses never enter
 * it; a schema whose root is such is refused.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"
#include "json.h"
#include "util.h"

enum {	/* JSON types, as bits */
	T_OBJ = 1, T_ARR = 2, T_STR = 4, T_NUM = 8, T_INT = 16, T_BOOL = 32, T_NULL = 64,
	T_ALL = 127
};

struct gmemo {
	const struct json *s;
	int32_t	node;
};

#define MAX_DEPTH	200	/* schema objects being compiled at once */

static const char *const annotations[] = {
	"title", "description", "default", "examples", "$comment", "$schema", "$id",
	"deprecated", "readOnly", "writeOnly", "$defs", "definitions", NULL
};
static const char *const supported[] = {
	"type", "properties", "required", "additionalProperties", "items", "minItems",
	"maxItems", "enum", "const", "anyOf", "allOf", "$ref", NULL
};

static int
in_list(const char *const *l, const char *s)
{
	for (; *l != NULL; l++)
		if (strcmp(*l, s) == 0)
			return 1;
	return 0;
}

int
grammar_fail(struct gcc *c, const char *fmt, const char *a, const char *b)
{
	char msg[UTIL_ERRLEN];

	snprintf(msg, sizeof msg, fmt, a, b);
	return util_err(c->err, "#%s: %s", c->path, msg);
}

static int
oom(struct gcc *c)
{
	return util_err(c->err, "grammar: out of memory");
}

static void
path_push(struct gcc *c, const char *a, const char *b, size_t *save)
{
	*save = c->plen;
	snprintf(c->path + c->plen, sizeof c->path - c->plen, "/%s%s%s", a, b ? "/" : "",
	    b ? b : "");
	c->plen += strlen(c->path + c->plen);
}

static void
path_pop(struct gcc *c, size_t save)
{
	c->plen = save;
	c->path[save] = '\0';
}

/* Grow *p (of *cap elements of size sz) to hold n; 0 or -1. */
int
grammar_grow(void *p, size_t *cap, size_t n, size_t sz)
{
	void *q;
	size_t nc;

	if (n <= *cap)
		return 0;
	nc = *cap ? *cap : 16;
	while (nc < n)
		nc *= 2;
	if ((q = realloc(*(void **)p, nc * sz)) == NULL)
		return -1;
	*(void **)p = q;
	*cap = nc;
	return 0;
}

int32_t
grammar_node(struct gcc *c, int kind)
{
	struct grammar *g = c->g;

	if (grammar_grow(&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes) != 0)
		return oom(c);
	g->nodes[g->n_nodes] = (struct gnode){ .kind = kind, .ml = G_INF, .child = -1,
	    .max = -1 };
	return g->n_nodes++;
}

int64_t
grammar_tnode(struct grammar *g, int byte, int depth)
{
	if (grammar_grow(&g->tn, &g->cap_tn, g->n_tn + 1, sizeof *g->tn) != 0)
		return -1;
	g->tn[g->n_tn] = (struct tnode){ .byte = byte, .depth = depth, .leaf = -1,
	    .mind = G_INF };
	return g->n_tn++;
}

/* Insert s[n] below trie root t, its end marked leaf; the end's node or -1. */
int64_t
grammar_trie_add(struct grammar *g, uint32_t t, const char *s, size_t n, int32_t leaf)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t ch = grammar_tchild(g, t, (uint8_t)s[i]);
		if (ch == 0) {
			int64_t k = grammar_tnode(g, (uint8_t)s[i], g->tn[t].depth + 1);
			if (k < 0)
				return -1;
			g->tn[k].next = g->tn[t].child;
			g->tn[k].parent = t;
			g->tn[t].child = k;
			ch = k;
		}
		t = ch;
	}
	g->tn[t].leaf = leaf;
	return t;
}

/* A literal trie's shortest texts: mind of t and below. */
uint32_t
grammar_trie_mind(struct grammar *g, uint32_t t)
{
	uint32_t best = g->tn[t].leaf >= 0 ? 0 : G_INF;

	for (uint32_t ch = g->tn[t].child; ch != 0; ch = g->tn[ch].next) {
		uint32_t d = grammar_trie_mind(g, ch);
		if (d < G_INF && d + 1 < best)
			best = d + 1;
	}
	return g->tn[t].mind = best;
}

#define MAX_LITERAL	4096	/* bytes of an enum value's text */

/* 1 when s[n] holds a UTF-16 surrogate as json.c keeps it (ED A0..BF). */
static int
has_surrogate(const char *s, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if ((uint8_t)s[i] == 0xED && (uint8_t)s[i + 1] >= 0xA0)
			return 1;
	return 0;
}

/* The JSON text of j, compact, malloc'd ([*n]); NULL when out of memory. */
char *
grammar_literal(const struct json *j, size_t *n)
{
	char *buf = NULL;
	FILE *fp = open_memstream(&buf, n);

	if (fp == NULL)
		return NULL;
	if (j->type == JSON_STRING)
		json_put_str(fp, j->str, j->n, has_surrogate(j->str, j->n));
	else
		json_dump(fp, j, 0);
	if (fclose(fp) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static unsigned
type_bits(const struct json *v)
{
	switch (v->type) {
	case JSON_OBJECT: return T_OBJ;
	case JSON_ARRAY: return T_ARR;
	case JSON_STRING: return T_STR;
	case JSON_NUMBER: return T_NUM | (v->num == (double)(int64_t)v->num ? T_INT : 0);
	case JSON_NULL: return T_NULL;
	default: return T_BOOL;
	}
}

/* Node id (GK_LIT, being filled) of the values vals[n] whose type is in types. */
static int
lit_fill(struct gcc *c, int32_t id, const struct json *vals, size_t n, unsigned types)
{
	struct grammar *g = c->g;
	int64_t root = grammar_tnode(g, 0, 0);

	if (root < 0)
		return oom(c);
	g->nodes[id].kind = GK_LIT;
	g->nodes[id].trie = root;
	for (size_t i = 0; i < n; i++) {
		size_t len;
		char *s;
		if (!(type_bits(&vals[i]) & types))
			continue;
		if ((s = grammar_literal(&vals[i], &len)) == NULL)
			return oom(c);
		if (len > MAX_LITERAL) {
			free(s);
			return grammar_fail(c, "an 'enum' value over %s bytes is not supported", "4096", NULL);
		}
		if (grammar_trie_add(g, root, s, len, 1) < 0) {
			free(s);
			return oom(c);
		}
		free(s);
	}
	grammar_trie_mind(g, root);
	return 0;
}

/* Node id as the literals true, false, null in types. */
static int
lit_fill_tfn(struct gcc *c, int32_t id, unsigned types)
{
	struct json vals[3] = { { .type = JSON_TRUE }, { .type = JSON_FALSE },
	    { .type = JSON_NULL } };

	return lit_fill(c, id, vals, 3, types);
}

int
grammar_member(struct gcc *c, int32_t m)
{
	struct grammar *g = c->g;

	if (grammar_grow(&g->members, &g->cap_members, g->n_members + 1, sizeof *g->members) != 0)
		return oom(c);
	g->members[g->n_members++] = m;
	return 0;
}

/* The node of any JSON value (a union of the five kinds). */
int32_t
grammar_any_node(struct gcc *c)
{
	int32_t u, k[5];

	if (c->any >= 0)
		return c->any;
	if ((u = c->any = grammar_node(c, GK_UNION)) < 0 ||
	    (k[0] = grammar_node(c, GK_MAP)) < 0 || (k[1] = grammar_node(c, GK_ARR)) < 0 ||
	    (k[2] = grammar_node(c, GK_STR)) < 0 || (k[3] = grammar_node(c, GK_NUM)) < 0 ||
	    (k[4] = grammar_node(c, GK_LIT)) < 0 || lit_fill_tfn(c, k[4], T_ALL) != 0)
		return -1;
	c->g->nodes[k[0]].child = c->g->nodes[k[1]].child = u;
	c->g->nodes[u].off = c->g->n_members;
	c->g->nodes[u].n = 5;
	for (int i = 0; i < 5; i++)
		if (grammar_member(c, k[i]) != 0)
			return -1;
	return u;
}

/* --- memo: schema object -> node --------------------------------------- */

static size_t
memo_at(const struct gcc *c, const struct json *s)
{
	size_t i = ((uintptr_t)s >> 4) * 0x9E3779B97F4A7C15ull >> 7;

	for (i &= c->cap_memo - 1; c->memo[i].s != NULL && c->memo[i].s != s;
	    i = (i + 1) & (c->cap_memo - 1))
		;
	return i;
}

static int32_t
memo_get(const struct gcc *c, const struct json *s)
{
	size_t i;

	if (c->cap_memo == 0)
		return -1;
	i = memo_at(c, s);
	return c->memo[i].s != NULL ? c->memo[i].node : -1;
}

static int
memo_put(struct gcc *c, const struct json *s, int32_t node)
{
	if (2 * (c->n_memo + 1) > c->cap_memo) {
		struct gmemo *old = c->memo;
		size_t n = c->cap_memo;
		c->cap_memo = n ? 2 * n : 64;
		if ((c->memo = calloc(c->cap_memo, sizeof *c->memo)) == NULL) {
			c->memo = old;
			c->cap_memo = n;
			return oom(c);
		}
		for (size_t i = 0; i < n; i++)
			if (old[i].s != NULL)
				c->memo[memo_at(c, old[i].s)] = old[i];
		free(old);
	}
	c->memo[memo_at(c, s)] = (struct gmemo){ s, node };
	c->n_memo++;
	return 0;
}

/* --- keywords ------------------------------------------------------------ */

static int
check_keywords(struct gcc *c, const struct json *s)
{
	static const char *const alone[] = { "$ref", "anyOf", "allOf", NULL };
	static const char *const shaped[] = { "properties", "required", "additionalProperties",
		"items", "minItems", "maxItems", NULL };
	const char *a = NULL, *e = NULL;

	for (size_t i = 0; i < s->n; i++) {
		const char *k = s->keys[i];
		if (!in_list(annotations, k) && !in_list(supported, k))
			return grammar_fail(c, "'%s' is not supported", k, NULL);
		if (in_list(alone, k) && a != NULL)
			return grammar_fail(c, "'%s' beside '%s' is not supported", k, a);
		if (in_list(alone, k))
			a = k;
		if ((strcmp(k, "enum") == 0 || strcmp(k, "const") == 0) && e != NULL)
			return grammar_fail(c, "'%s' beside '%s' is not supported", k, e);
		if (strcmp(k, "enum") == 0 || strcmp(k, "const") == 0)
			e = k;
	}
	for (size_t i = 0; i < s->n; i++) {
		const char *k = s->keys[i];
		if (a != NULL && in_list(supported, k) && strcmp(k, a) != 0)
			return grammar_fail(c, "'%s' beside '%s' is not supported", a, k);
		if (e != NULL && in_list(shaped, k))
			return grammar_fail(c, "'%s' beside '%s' is not supported", e, k);
	}
	return 0;
}

static const char *const type_names[] = {
	"object", "array", "string", "number", "integer", "boolean", "null", NULL
};

/* The types "type" allows (T_ALL when absent, *given 0); 0 on error. */
static unsigned
types_of(struct gcc *c, const struct json *s, int *given)
{
	const struct json *t = json_get(s, "type");
	unsigned bits = 0;
	size_t n;

	*given = t != NULL;
	if (t == NULL)
		return T_ALL;
	n = t->type == JSON_ARRAY ? t->n : 1;
	if ((t->type != JSON_ARRAY && t->type != JSON_STRING) || n == 0) {
		grammar_fail(c, "'type' is not a type name or a list of them", NULL, NULL);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		const struct json *v = t->type == JSON_ARRAY ? &t->items[i] : t;
		int k = 0;
		if (v->type != JSON_STRING) {
			grammar_fail(c, "'type' is not a type name or a list of them", NULL, NULL);
			return 0;
		}
		while (type_names[k] != NULL && strcmp(type_names[k], v->str) != 0)
			k++;
		if (type_names[k] == NULL) {
			grammar_fail(c, "'type' '%s' is not a JSON Schema type", v->str, NULL);
			return 0;
		}
		bits |= 1u << k;
	}
	return bits;
}

/* --- schema objects ---------------------------------------------------------- */

static int32_t compile(struct gcc *c, const struct json *s);

/* compile(s) with " /a/b" on the path of messages. */
static int32_t
compile_at(struct gcc *c, const struct json *s, const char *a, const char *b)
{
	size_t save;
	int32_t id;

	path_push(c, a, b, &save);
	id = compile(c, s);
	path_pop(c, save);
	return id;
}

/* Schema s (absent: true) at /name[/b] into *child. */
static int
sub_schema(struct gcc *c, const struct json *s, const char *name, const char *b,
    int32_t *child)
{
	if (s == NULL)
		return (*child = grammar_any_node(c)) < 0 ? -1 : 0;
	if (s->type != JSON_OBJECT && s->type != JSON_TRUE && s->type != JSON_FALSE)
		return grammar_fail(c, "'%s' is not a schema", name, NULL);
	return (*child = compile_at(c, s, name, b)) < 0 ? -1 : 0;
}

static int
count_of(struct gcc *c, const struct json *s, const char *name, int32_t *out)
{
	const struct json *v = json_get(s, name);

	if (v == NULL)
		return 0;
	if (v->type != JSON_NUMBER || !v->is_int || v->i < 0 || v->i > (1 << 30))
		return grammar_fail(c, "'%s' is not a count", name, NULL);
	*out = v->i;
	return 0;
}

static int
arr_fill(struct gcc *c, int32_t id, const struct json *s)
{
	const struct json *it = json_get(s, "items");
	int32_t child, min = 0, max = -1;

	if (it != NULL && it->type == JSON_ARRAY)
		return grammar_fail(c, "'items' as an array is not supported", NULL, NULL);
	if (sub_schema(c, it, "items", NULL, &child) != 0 || count_of(c, s, "minItems", &min) != 0 ||
	    count_of(c, s, "maxItems", &max) != 0)
		return -1;
	if (max >= 0 && max < min)
		return grammar_fail(c, "'maxItems' is below 'minItems'", NULL, NULL);
	c->g->nodes[id] = (struct gnode){ .kind = GK_ARR, .ml = G_INF, .child = child,
	    .min = min, .max = max, .cap = max > min ? max : min };
	return 0;
}

/* Index of key k[n] among obj's members, or -1. */
static int64_t
member_index(const struct json *obj, const char *k, size_t n)
{
	for (size_t i = 0; i < obj->n; i++)
		if (obj->keylens[i] == n && memcmp(obj->keys[i], k, n) == 0)
			return i;
	return -1;
}

/* "required" into the properties' flags lp[]. */
static int
obj_required(struct gcc *c, const struct json *props, const struct json *req, struct gprop *lp)
{
	if (req == NULL)
		return 0;
	if (req->type != JSON_ARRAY)
		return grammar_fail(c, "'required' is not an array of names", NULL, NULL);
	for (size_t i = 0; i < req->n; i++) {
		const struct json *r = &req->items[i];
		int64_t j;
		if (r->type != JSON_STRING)
			return grammar_fail(c, "'required' is not an array of names", NULL, NULL);
		if ((j = member_index(props, r->str, r->n)) < 0)
			return grammar_fail(c, "'required' names '%s', which is not in 'properties'",
			    r->str, NULL);
		lp[j].required = 1;
	}
	return 0;
}

/* Each property's key in the object's key trie (leaf: its index) and its node. */
static int
obj_props(struct gcc *c, int32_t id, const struct json *props, struct gprop *lp)
{
	struct grammar *g = c->g;

	for (size_t j = 0; j < props->n; j++) {
		struct json key = { .type = JSON_STRING, .str = props->keys[j],
		    .n = props->keylens[j] };
		size_t len;
		char *q;
		int64_t leaf;
		if (member_index(props, key.str, key.n) != (int64_t)j)
			return grammar_fail(c, "property '%s' appears twice", key.str, NULL);
		if ((q = grammar_literal(&key, &len)) == NULL)
			return oom(c);
		leaf = grammar_trie_add(g, g->nodes[id].trie, q, len, j);
		free(q);
		if (leaf < 0)
			return oom(c);
		lp[j].leaf = leaf;
		lp[j].qk = len;
		if (sub_schema(c, &props->items[j], "properties", key.str, &lp[j].node) != 0)
			return -1;
	}
	return 0;
}

static int
obj_fill(struct gcc *c, int32_t id, const struct json *s)
{
	const struct json *props = json_get(s, "properties"), *req = json_get(s, "required");
	const struct json *ap = json_get(s, "additionalProperties");
	struct grammar *g = c->g;
	struct gprop *lp;
	int64_t root;
	int rc = -1;

	if (ap != NULL && ap->type != JSON_OBJECT && ap->type != JSON_TRUE &&
	    ap->type != JSON_FALSE)
		return grammar_fail(c, "'additionalProperties' is not a schema", NULL, NULL);
	if (props == NULL) {	/* a map: any keys, values of additionalProperties */
		if (req != NULL && (req->type != JSON_ARRAY || req->n > 0))
			return grammar_fail(c, "'required' without 'properties' is not supported", NULL, NULL);
		int32_t child;	/* not into g->nodes: the compile may move it */
		if (sub_schema(c, ap, "additionalProperties", NULL, &child) != 0)
			return -1;
		g->nodes[id].kind = GK_MAP;
		g->nodes[id].child = child;
		return 0;
	}
	if (props->type != JSON_OBJECT)
		return grammar_fail(c, "'properties' is not an object", NULL, NULL);
	if ((root = grammar_tnode(g, 0, 0)) < 0 || (lp = calloc(props->n + 1, sizeof *lp)) == NULL)
		return oom(c);
	g->nodes[id].kind = GK_OBJ;
	g->nodes[id].trie = root;
	if (obj_required(c, props, req, lp) == 0 && obj_props(c, id, props, lp) == 0 &&
	    grammar_grow(&g->props, &g->cap_props, g->n_props + props->n + 1, sizeof *g->props) == 0) {
		g->nodes[id].off = g->n_props;
		g->nodes[id].n = props->n;
		memcpy(g->props + g->n_props, lp, (props->n + 1) * sizeof *lp);
		g->n_props += props->n + 1;
		rc = 0;
	} else if (c->err[0] == '\0')
		oom(c);
	free(lp);
	return rc;
}

/* The schema a "#..." pointer names, or NULL with err. */
static const struct json *
resolve(struct gcc *c, const char *ref)
{
	const struct json *j = c->doc;
	const char *p = ref + 1;
	char seg[256];

	if (ref[0] != '#')
		return grammar_fail(c, "'$ref' '%s': only references into the schema ('#...') are supported",
		    ref, NULL), NULL;
	while (*p == '/') {
		size_t n = 0;
		for (p++; *p != '\0' && *p != '/' && n + 1 < sizeof seg; p++, n++)
			seg[n] = p[0] == '~' && p[1] == '1' ? (p++, '/') :
			    p[0] == '~' && p[1] == '0' ? (p++, '~') : p[0];
		seg[n] = '\0';
		if (j->type == JSON_OBJECT) {
			int64_t k = member_index(j, seg, n);
			j = k >= 0 ? &j->items[k] : NULL;
		} else if (j->type == JSON_ARRAY) {
			char *end;
			unsigned long k = strtoul(seg, &end, 10);
			j = *end == '\0' && n > 0 && k < j->n ? &j->items[k] : NULL;
		} else
			j = NULL;
		if (j == NULL)
			return grammar_fail(c, "'$ref' '%s' is not found", ref, NULL), NULL;
	}
	if (*p != '\0')
		return grammar_fail(c, "'$ref' '%s' is not found", ref, NULL), NULL;
	return j;
}

static int
ref_fill(struct gcc *c, int32_t id, const struct json *r)
{
	const struct json *t;
	char save[sizeof c->path];
	size_t plen = c->plen;
	int32_t child;

	if (r->type != JSON_STRING)
		return grammar_fail(c, "'$ref' is not a string", NULL, NULL);
	if ((t = resolve(c, r->str)) == NULL)
		return -1;
	memcpy(save, c->path, sizeof save);	/* messages name the target's place */
	snprintf(c->path, sizeof c->path, "%s", r->str + 1);
	c->plen = strlen(c->path);
	child = compile(c, t);
	memcpy(c->path, save, sizeof save);
	c->plen = plen;
	if (child < 0)
		return -1;
	c->g->nodes[id].kind = GK_REF;
	c->g->nodes[id].child = child;
	return 0;
}

/* anyOf (n alternatives) or allOf (one). */
static int
union_fill(struct gcc *c, int32_t id, const struct json *l, const char *name)
{
	int32_t *m;
	char idx[24];
	int rc = 0;

	if (l->type != JSON_ARRAY || l->n == 0)
		return grammar_fail(c, "'%s' is not a non-empty array of schemas", name, NULL);
	if (name[1] == 'l' && l->n > 1)
		return grammar_fail(c, "'allOf' of more than one schema is not supported", NULL, NULL);
	if ((m = malloc(l->n * sizeof *m)) == NULL)
		return oom(c);
	for (size_t i = 0; i < l->n && rc == 0; i++) {
		snprintf(idx, sizeof idx, "%zu", i);
		rc = sub_schema(c, &l->items[i], name, idx, &m[i]);
	}
	c->g->nodes[id].off = c->g->n_members;
	c->g->nodes[id].n = l->n;
	for (size_t i = 0; i < l->n && rc == 0; i++)
		rc = grammar_member(c, m[i]);
	free(m);
	return rc;
}

static int
enum_fill(struct gcc *c, int32_t id, const struct json *s, unsigned types)
{
	const struct json *e = json_get(s, "enum");

	if (e == NULL)
		return lit_fill(c, id, json_get(s, "const"), 1, types);
	if (e->type != JSON_ARRAY || e->n == 0)
		return grammar_fail(c, "'enum' is not a non-empty array", NULL, NULL);
	return lit_fill(c, id, e->items, e->n, types);
}

/* Node id as one type t (a T_ bit) under s's keywords. */
static int
type_fill(struct gcc *c, int32_t id, const struct json *s, unsigned t)
{
	struct gnode *nd = &c->g->nodes[id];

	switch (t) {
	case T_OBJ: return obj_fill(c, id, s);
	case T_ARR: return arr_fill(c, id, s);
	case T_STR: nd->kind = GK_STR; return 0;
	case T_NUM: nd->kind = GK_NUM; return 0;
	case T_INT: nd->kind = GK_INT; return 0;
	default: return lit_fill_tfn(c, id, t);
	}
}

/* Node id (a fresh union) as schema object s. */
static int
fill(struct gcc *c, int32_t id, const struct json *s)
{
	const struct json *r;
	unsigned types, k;
	int given, n = 0;
	int32_t m[7];

	if ((r = json_get(s, "$ref")) != NULL)
		return ref_fill(c, id, r);
	if ((r = json_get(s, "anyOf")) != NULL)
		return union_fill(c, id, r, "anyOf");
	if ((r = json_get(s, "allOf")) != NULL)
		return union_fill(c, id, r, "allOf");
	if ((types = types_of(c, s, &given)) == 0)
		return -1;
	if (json_get(s, "enum") != NULL || json_get(s, "const") != NULL)
		return enum_fill(c, id, s, types);
	if (!given && (json_get(s, "properties") || json_get(s, "required") ||
	    json_get(s, "additionalProperties")))
		types = T_OBJ;
	else if (!given && (json_get(s, "items") || json_get(s, "minItems") ||
	    json_get(s, "maxItems")))
		types = T_ARR;
	else if (!given) {
		int32_t any = grammar_any_node(c);
		c->g->nodes[id].kind = GK_REF;
		c->g->nodes[id].child = any;
		return any < 0 ? -1 : 0;
	}
	if (types & T_NUM)
		types &= ~T_INT;	/* numbers hold the integers */
	for (k = 1; k < T_ALL; k <<= 1)
		n += (types & k) != 0;
	if (n == 1)
		return type_fill(c, id, s, types);
	n = 0;
	for (k = 1; k < T_ALL; k <<= 1)
		if ((types & k) && ((m[n++] = grammar_node(c, GK_UNION)) < 0 ||
		    type_fill(c, m[n - 1], s, k) != 0))
			return -1;
	c->g->nodes[id].off = c->g->n_members;	/* members side by side: after the fills */
	c->g->nodes[id].n = n;
	for (int i = 0; i < n; i++)
		if (grammar_member(c, m[i]) != 0)
			return -1;
	return 0;
}

static int32_t
compile(struct gcc *c, const struct json *s)
{
	int32_t id;
	int rc;

	if (s->type == JSON_TRUE)
		return grammar_any_node(c);
	if (s->type == JSON_FALSE)
		return grammar_node(c, GK_UNION);	/* no alternative: no value */
	if (s->type != JSON_OBJECT)
		return grammar_fail(c, "a schema is an object or a boolean", NULL, NULL);
	if ((id = memo_get(c, s)) >= 0)
		return id;
	if (c->depth >= MAX_DEPTH)
		return grammar_fail(c, "schema nested deeper than %s", "200", NULL);
	if (check_keywords(c, s) != 0 || (id = grammar_node(c, GK_UNION)) < 0 ||
	    memo_put(c, s, id) != 0)
		return -1;
	c->depth++;
	rc = fill(c, id, s);
	c->depth--;
	return rc == 0 ? id : -1;
}

int32_t
grammar_schema_node(struct gcc *c, const struct json *s)
{
	return compile(c, s);
}

/* --- after the build: shortest values, alternatives, key lists --------- */

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a + b >= G_INF ? G_INF : a + b;
}

/* A switch's fewest bytes from trie node t: its text's rest, then its member's value. */
static uint32_t
switch_mind(struct grammar *g, const struct gnode *nd, uint32_t t)
{
	uint64_t best = g->tn[t].leaf >= 0 ? g->nodes[g->members[nd->off + g->tn[t].leaf]].ml :
	    G_INF;

	for (uint32_t ch = g->tn[t].child; ch != 0; ch = g->tn[ch].next) {
		uint64_t d = switch_mind(g, nd, ch);
		if (d < G_INF && d + 1 < best)
			best = d + 1;
	}
	return g->tn[t].mind = best;
}

/* An object's fewest bytes: '{', its required members, '}' (xml: the
 * required <parameter=...> members, then the close). */
static uint32_t
obj_ml(const struct grammar *g, const struct gnode *nd)
{
	uint64_t sum = nd->xml ? g->props[nd->off + nd->n].qk : 2, nreq = 0;

	for (uint32_t j = 0; j < nd->n; j++) {
		const struct gprop *p = &g->props[nd->off + j];
		if (p->required)
			sum = sat_add(sum, sat_add(p->qk + (nd->xml ? 0 : 1 + (nreq++ > 0)),
			    g->nodes[p->node].ml));
	}
	return sum;
}

static uint32_t
node_ml(struct grammar *g, const struct gnode *nd)
{
	uint64_t v = nd->child >= 0 ? g->nodes[nd->child].ml : G_INF, sum;

	switch (nd->kind) {
	case GK_MAP: case GK_STR: return 2;
	case GK_NUM: case GK_INT: return 1;
	case GK_LIT: return g->tn[nd->trie].mind;
	case GK_REF: return v;
	case GK_ARR:
		return nd->min == 0 ? 2 : v >= G_INF ? G_INF :
		    sat_add(2, (uint64_t)nd->min * (v + 1) - 1);
	case GK_UNION:
		sum = G_INF;
		for (uint32_t i = 0; i < nd->n; i++)
			if (g->nodes[g->members[nd->off + i]].ml < sum)
				sum = g->nodes[g->members[nd->off + i]].ml;
		return sum;
	case GK_SEQ:
		sum = 0;
		for (uint32_t i = 0; i < nd->n; i++)
			sum = sat_add(sum, g->nodes[g->members[nd->off + i]].ml);
		return sum;
	case GK_SWITCH: return switch_mind(g, nd, nd->trie);
	case GK_RAW: return nd->min ? 0 : g->dfa_dist[nd->trie];
	case GK_LOOP: return 0;
	}
	return obj_ml(g, nd);
}

/* Each node's shortest value, to the fixpoint (G_INF: none). */
static void
fixpoint(struct grammar *g)
{
	int changed = 1;

	for (size_t round = 0; changed && round <= g->n_nodes + 1; round++) {
		changed = 0;
		for (size_t i = 0; i < g->n_nodes; i++) {
			uint32_t v = node_ml(g, &g->nodes[i]);
			if (v < g->nodes[i].ml) {
				g->nodes[i].ml = v;
				changed = 1;
			}
		}
	}
}

/* An object's required chain, and the lists of keys below each trie node
 * (those whose value can end: the others are never offered). */
static int
obj_finish(struct grammar *g, struct gnode *nd)
{
	struct gprop *p = g->props + nd->off;
	size_t need = 0;
	uint32_t n = nd->n + nd->xml;	/* xml: the close is key n */

	p[nd->n].first_req = nd->n;
	p[nd->n].rest = nd->xml ? p[nd->n].qk : 1;
	for (uint32_t j = nd->n; j-- > 0;) {
		p[j].first_req = p[j].required ? j : p[j + 1].first_req;
		p[j].rest = p[j + 1].rest;
		if (p[j].required)
			p[j].rest = sat_add(p[j].rest, sat_add(p[j].qk + (nd->xml ? 0 : 2),
			    g->nodes[p[j].node].ml));
	}
	for (uint32_t j = 0; j < n; j++)
		if (j == nd->n || g->nodes[p[j].node].ml < G_INF)
			for (uint32_t t = p[j].leaf; ; t = g->tn[t].parent) {
				g->tn[t].n_below++, need++;
				if (t == nd->trie)
					break;
			}
	if (grammar_grow(&g->below, &g->cap_below, g->n_below + need, sizeof *g->below) != 0)
		return -1;
	for (uint32_t j = 0; j < n; j++)
		if (j == nd->n || g->nodes[p[j].node].ml < G_INF)
			for (uint32_t t = p[j].leaf; ; t = g->tn[t].parent) {
				if (g->tn[t].mind == G_INF) {	/* unused in key tries: a mark */
					g->tn[t].below = g->n_below;	/* first visit: its list's place */
					g->tn[t].mind = 0;
					g->n_below += g->tn[t].n_below;
					g->tn[t].n_below = 0;
				}
				g->below[g->tn[t].below + g->tn[t].n_below++] = j;
				if (t == nd->trie)
					break;
			}
	return 0;
}

/* The concrete nodes node i may be (through unions and refs), with a value. */
static int
flatten(struct grammar *g, uint32_t i, uint32_t *mark, uint32_t *stack)
{
	size_t sp = 0;

	g->nodes[i].alt = g->n_alts;
	stack[sp++] = i;
	mark[i] = i + 1;
	while (sp > 0) {
		const struct gnode *nd = &g->nodes[stack[--sp]];
		uint32_t k = stack[sp];
		if (nd->kind == GK_UNION || nd->kind == GK_REF) {
			for (uint32_t m = 0; m < (nd->kind == GK_REF ? 1 : nd->n); m++) {
				uint32_t t = nd->kind == GK_REF ? (uint32_t)nd->child :
				    g->members[nd->off + m];
				if (mark[t] != i + 1) {
					mark[t] = i + 1;
					stack[sp++] = t;
				}
			}
		} else if (nd->ml < G_INF) {
			if (grammar_grow(&g->alts, &g->cap_alts, g->n_alts + 1, sizeof *g->alts) != 0)
				return -1;
			g->alts[g->n_alts++] = k;
		}
	}
	g->nodes[i].n_alt = g->n_alts - g->nodes[i].alt;
	return 0;
}

/* How far one byte may push the end away (a choice among values of
 * different lengths), for grammar_mask's closing margin. */
/* A switch's most bytes to a leaf below t and its member's shortest value. */
static uint64_t
switch_hi(const struct grammar *g, const struct gnode *nd, uint32_t t)
{
	uint64_t hi = 0;

	if (g->tn[t].leaf >= 0)
		return g->tn[t].depth + (uint64_t)g->nodes[g->members[nd->off + g->tn[t].leaf]].ml;
	for (uint32_t ch = g->tn[t].child; ch != 0; ch = g->tn[ch].next) {
		uint64_t d = switch_hi(g, nd, ch);
		if (d < G_INF && d > hi)
			hi = d;
	}
	return hi;
}

static uint32_t
margin(const struct grammar *g)
{
	uint64_t j = 8;

	for (size_t i = 0; i < g->n_nodes; i++) {
		const struct gnode *nd = &g->nodes[i];
		uint64_t v = nd->child >= 0 ? g->nodes[nd->child].ml : 0, lo = G_INF, hi = 0;
		if (nd->kind == GK_ARR || nd->kind == GK_MAP || nd->kind == GK_LOOP)
			j = v + 4 > j ? v + 4 : j;
		if (nd->kind == GK_RAW && g->dfa_dist[nd->trie] > j)
			j = g->dfa_dist[nd->trie];
		if (nd->kind == GK_SWITCH && g->tn[nd->trie].mind < G_INF &&
		    switch_hi(g, nd, nd->trie) - g->tn[nd->trie].mind > j)
			j = switch_hi(g, nd, nd->trie) - g->tn[nd->trie].mind;
		for (uint32_t k = 0; k < nd->n_alt; k++) {
			uint64_t m = g->nodes[g->alts[nd->alt + k]].ml;
			lo = m < lo ? m : lo;
			hi = m > hi ? m : hi;
		}
		if (nd->n_alt > 1 && hi - lo > j)
			j = hi - lo;
		for (uint32_t k = 0; nd->kind == GK_OBJ && k < nd->n; k++) {
			uint64_t m = g->props[nd->off + k].qk + 2 + g->nodes[g->props[nd->off + k].node].ml;
			if (m < G_INF && m > j)
				j = m;
		}
	}
	return j > 256 ? 256 + 8 : 2 * j + 8;
}

int
grammar_finish(struct grammar *g, struct gcc *c)
{
	uint32_t *mark = calloc(g->n_nodes + 1, sizeof *mark);
	uint32_t *stack = malloc((g->n_nodes + 1) * sizeof *stack);
	int rc = 0;

	fixpoint(g);
	for (size_t i = 0; i < g->n_nodes && rc == 0 && mark && stack; i++) {
		struct gnode *nd = &g->nodes[i];
		if ((nd->kind == GK_MAP || nd->kind == GK_ARR || nd->kind == GK_LOOP) &&
		    nd->child >= 0 && g->nodes[nd->child].ml >= G_INF)
			nd->child = -1;		/* {} or [] only; a loop: none */
		if (nd->kind == GK_OBJ)
			rc = obj_finish(g, nd);
		if (rc == 0)
			rc = flatten(g, i, mark, stack);
	}
	if (mark == NULL || stack == NULL || rc != 0)
		rc = oom(c);
	else if (g->nodes[g->root].ml >= G_INF)
		rc = util_err(c->err, "#: no finite document satisfies the schema");
	g->margin = rc == 0 ? margin(g) : 0;
	free(mark);
	free(stack);
	return rc;
}

int
grammar_build(struct grammar *g, const struct json *schema, char *err)
{
	struct gcc c = { .g = g, .doc = schema, .err = err, .any = -1 };
	int rc = -1;

	err[0] = '\0';
	if (grammar_tnode(g, 0, 0) < 0)		/* trie node 0: no child is 0 */
		return oom(&c);
	if ((g->str_node = grammar_node(&c, GK_STR)) < 0)
		return -1;
	if (schema == NULL) {
		int32_t any = grammar_any_node(&c);
		if (any >= 0 && (g->root = grammar_node(&c, GK_MAP)) >= 0) {
			g->nodes[g->root].child = any;
			rc = 0;
		}
	} else if ((g->root = compile(&c, schema)) >= 0)
		rc = 0;
	if (rc == 0)
		rc = grammar_finish(g, &c);
	free(c.memo);
	return rc;
}
