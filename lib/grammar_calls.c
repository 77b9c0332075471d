/*
 * grammar_calls: a tool-call document (grammar.h, grammar_compile_calls)
 * as the automaton's nodes: the template's fixed texts (GK_LIT), the
 * tools' names as a switch (GK_SWITCH) whose leaf runs that tool's call,
 * a strict tool's arguments from its parameters' schema (the xml form: an
 * object of <parameter=KEY> members, GK_OBJ with xml set, each value its
 * JSON or a string's raw text), raw text where the document is free
 * (GK_RAW), more calls (GK_LOOP), all in sequences (GK_SEQ).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"
#include "json.h"
#include "util.h"

#define RAW_PATTERN	64	/* bytes of a raw text's end or forbidden pattern */
#define RAW_STATES	(2 * RAW_PATTERN)
#define MAX_NAME	64	/* bytes of a tool's name */

static const char XML_END[] = "\n</parameter>\n", XML_CLOSE[] = "</function>\n";

/* The builder: the schema compiler's context, the raw-text nodes made so far. */
struct raw {
	const char *end, *forbid;
	int	open;
	int32_t	node;
};
struct cb {
	struct gcc *c;
	struct raw raw[8];
	int	n_raw;
};

static int
oom(struct gcc *c)
{
	return util_err(c->err, "grammar: out of memory");
}

/* A node of the texts s[i][n[i]] (one literal each), or -1. */
static int32_t
lit_node(struct gcc *c, const char *const *s, const size_t *n, int k)
{
	struct grammar *g = c->g;
	int32_t id = grammar_node(c, GK_LIT);
	int64_t root = id < 0 ? -1 : grammar_tnode(g, 0, 0);

	if (root < 0)
		return id < 0 ? -1 : oom(c);
	g->nodes[id].trie = root;
	for (int i = 0; i < k; i++)
		if (grammar_trie_add(g, root, s[i], n[i], 1) < 0)
			return oom(c);
	grammar_trie_mind(g, root);
	return id;
}

static int32_t
text_node(struct gcc *c, const char *s)
{
	size_t n = strlen(s);

	return lit_node(c, &s, &n, 1);
}

/* A node of kind (GK_SEQ or GK_UNION) over the members m[k], or -1. */
static int32_t
list_node(struct gcc *c, int kind, const int32_t *m, int k)
{
	int32_t id = grammar_node(c, kind);

	if (id < 0)
		return -1;
	c->g->nodes[id].off = c->g->n_members;
	c->g->nodes[id].n = k;
	for (int i = 0; i < k; i++)
		if (grammar_member(c, m[i]) != 0)
			return -1;
	return id;
}

/* A loop of body, or -1. */
static int32_t
loop_node(struct gcc *c, int32_t body)
{
	int32_t id = grammar_node(c, GK_LOOP);

	if (id >= 0)
		c->g->nodes[id].child = body;
	return id;
}

/* A switch: text s[i] (prefix-free) then member m[i]; -1. */
static int32_t
switch_node(struct gcc *c, char *const *s, const int32_t *m, int k)
{
	struct grammar *g = c->g;
	int32_t id = grammar_node(c, GK_SWITCH);
	int64_t root = id < 0 ? -1 : grammar_tnode(g, 0, 0);

	if (root < 0)
		return id < 0 ? -1 : oom(c);
	g->nodes[id].trie = root;
	g->nodes[id].off = g->n_members;
	g->nodes[id].n = k;
	for (int i = 0; i < k; i++)
		if (grammar_member(c, m[i]) != 0 ||
		    grammar_trie_add(g, root, s[i], strlen(s[i]), i) < 0)
			return c->err[0] ? -1 : oom(c);
	return id;
}

/* The state after s[n] + b among the states st[ns] (the longest suffix that
 * is one), DFA_END when it ends with end, DFA_REJ with forbid. */
static int
dfa_next(char st[][RAW_PATTERN], const int *len, int ns, const char *s, int n, int b,
    const char *end, const char *forbid)
{
	char u[RAW_PATTERN + 1];
	size_t le = strlen(end), lf = forbid ? strlen(forbid) : 0;

	memcpy(u, s, n);
	u[n++] = (char)b;
	if (forbid != NULL && (size_t)n >= lf && memcmp(u + n - lf, forbid, lf) == 0)
		return DFA_REJ;
	if ((size_t)n >= le && memcmp(u + n - le, end, le) == 0)
		return DFA_END;
	for (int k = n > RAW_PATTERN - 1 ? n - (RAW_PATTERN - 1) : 0; k <= n; k++)
		for (int i = 0; i < ns; i++)
			if (len[i] == n - k && memcmp(st[i], u + k, n - k) == 0)
				return i;
	return 0;
}

/* The states of a raw text: "" and each proper prefix of end and forbid. */
static int
dfa_states(char st[][RAW_PATTERN], int *len, const char *end, const char *forbid)
{
	const char *p[2] = { end, forbid };
	int ns = 1;

	len[0] = 0;
	for (int k = 0; k < 2 && p[k] != NULL; k++)
		for (int l = 1; l < (int)strlen(p[k]); l++) {
			int seen = 0;
			for (int i = 0; i < ns && !seen; i++)
				seen = len[i] == l && memcmp(st[i], p[k], l) == 0;
			if (!seen) {
				memcpy(st[ns], p[k], l);
				len[ns++] = l;
			}
		}
	return ns;
}

/* Each state's fewest bytes to the end, into g->dfa_dist[base..base+ns). */
static void
dfa_dists(struct grammar *g, uint32_t base, int ns)
{
	uint32_t *d = g->dfa_dist + base;
	int changed = 1;

	for (int i = 0; i < ns; i++)
		d[i] = G_INF;
	while (changed) {
		changed = 0;
		for (int i = 0; i < ns; i++)
			for (int b = 0; b < 256; b++) {
				int nx = g->dfa[base + i][b];
				uint32_t v = nx == DFA_END ? 1 : nx == DFA_REJ || d[nx] >= G_INF ?
				    G_INF : d[nx] + 1;
				if (v < d[i])
					d[i] = v, changed = 1;
			}
	}
}

/* A raw text node up to end (never holding forbid, NULL: none; open: the
 * document may end in it), one a kind; -1. */
static int32_t
raw_node(struct cb *b, const char *end, const char *forbid, int open)
{
	struct gcc *c = b->c;
	struct grammar *g = c->g;
	char st[RAW_STATES][RAW_PATTERN];
	int len[RAW_STATES], ns;
	uint32_t base = g->n_dfa, *dist;
	int32_t id;

	for (int i = 0; i < b->n_raw; i++)
		if (b->raw[i].end == end && b->raw[i].forbid == forbid && b->raw[i].open == open)
			return b->raw[i].node;
	ns = dfa_states(st, len, end, forbid);
	if (grammar_grow(&g->dfa, &g->cap_dfa, base + ns, sizeof *g->dfa) != 0 ||
	    (dist = realloc(g->dfa_dist, g->cap_dfa * sizeof *dist)) == NULL)
		return oom(c);
	g->dfa_dist = dist;
	for (int i = 0; i < ns; i++)
		for (int k = 0; k < 256; k++)
			g->dfa[base + i][k] = dfa_next(st, len, ns, st[i], len[i], k, end, forbid);
	g->n_dfa += ns;
	dfa_dists(g, base, ns);
	if ((id = grammar_node(c, GK_RAW)) < 0)
		return -1;
	g->nodes[id].trie = base;
	g->nodes[id].n = ns;
	g->nodes[id].min = open;
	if (b->n_raw < (int)(sizeof b->raw / sizeof b->raw[0]))
		b->raw[b->n_raw++] = (struct raw){ end, forbid, open, id };
	return id;
}

/* --- an xml parameter's value ---------------------------------------------- */

/* What a property's schema allows, by its concrete nodes. */
struct kinds {
	int32_t	*json;		/* the nodes of its JSON (not string) values */
	int	n_json, cap;
	int	any_str;	/* any string */
	char	**lit;		/* literal texts: JSON texts of non-strings, raw strings */
	size_t	*lit_len;
	int	*lit_str, n_lit, cap_lit;
};

static int
kinds_json(struct kinds *k, int32_t node)
{
	if (k->n_json == k->cap) {
		int nc = k->cap ? 2 * k->cap : 8;
		int32_t *p = realloc(k->json, nc * sizeof *p);
		if (p == NULL)
			return -1;
		k->json = p, k->cap = nc;
	}
	k->json[k->n_json++] = node;
	return 0;
}

/* Literal text s[n] (a JSON text; a string's kept as its raw text). */
static int
kinds_lit(struct kinds *k, const char *s, size_t n)
{
	char err[UTIL_ERRLEN];
	struct json *j = NULL;
	int str = n > 0 && s[0] == '"';

	if (k->n_lit == k->cap_lit) {
		int nc = k->cap_lit ? 2 * k->cap_lit : 8;
		char **p = realloc(k->lit, nc * sizeof *p);
		size_t *pl = p ? realloc(k->lit_len, nc * sizeof *pl) : NULL;
		int *ps = pl ? realloc(k->lit_str, nc * sizeof *ps) : NULL;
		if (p != NULL)
			k->lit = p;
		if (pl != NULL)
			k->lit_len = pl;
		if (ps == NULL)
			return -1;
		k->lit_str = ps, k->cap_lit = nc;
	}
	if (str && (j = json_parse(s, n, err)) == NULL)
		return -1;
	k->lit[k->n_lit] = str ? strndup(j->str, j->n) : strndup(s, n);
	k->lit_len[k->n_lit] = str ? j->n : n;
	k->lit_str[k->n_lit] = str;
	json_free(j);
	return k->lit[k->n_lit++] == NULL ? -1 : 0;
}

/* The literals of the trie below t (the bytes to it in buf[d]). */
static int
lit_walk(const struct grammar *g, uint32_t t, char *buf, size_t d, struct kinds *k)
{
	if (g->tn[t].leaf == 1 && kinds_lit(k, buf, d) != 0)
		return -1;
	for (uint32_t ch = g->tn[t].child; ch != 0; ch = g->tn[ch].next) {
		buf[d] = (char)g->tn[ch].byte;
		if (d + 1 >= 4096 + 8 || lit_walk(g, ch, buf, d + 1, k) != 0)
			return -1;
	}
	return 0;
}

/* Node i's concrete nodes (through unions and refs) into k. */
static int
kinds_of(const struct grammar *g, int32_t i, uint8_t *seen, struct kinds *k, char *buf)
{
	const struct gnode *nd = &g->nodes[i];

	if (seen[i])
		return 0;
	seen[i] = 1;
	switch (nd->kind) {
	case GK_UNION:
		for (uint32_t m = 0; m < nd->n; m++)
			if (kinds_of(g, g->members[nd->off + m], seen, k, buf) != 0)
				return -1;
		return 0;
	case GK_REF: return kinds_of(g, nd->child, seen, k, buf);
	case GK_STR: k->any_str = 1; return 0;
	case GK_LIT: return lit_walk(g, nd->trie, buf, 0, k);
	default: return kinds_json(k, i);
	}
}

static void
kinds_free(struct kinds *k)
{
	for (int i = 0; i < k->n_lit; i++)
		free(k->lit[i]);
	free(k->lit), free(k->lit_len), free(k->lit_str), free(k->json);
}

/* The literals of k whose stringness is str, each with suffix: a node, or 0 when none. */
static int32_t
kinds_lits(struct gcc *c, struct kinds *k, int str, const char *suffix)
{
	char **s = calloc(k->n_lit + 1, sizeof *s);
	size_t *n = calloc(k->n_lit + 1, sizeof *n), sl = strlen(suffix);
	int m = 0;
	int32_t id = -1;

	for (int i = 0; s != NULL && n != NULL && i < k->n_lit; i++) {
		if (k->lit_str[i] != str)
			continue;
		if ((s[m] = malloc(k->lit_len[i] + sl + 1)) == NULL)
			break;
		memcpy(s[m], k->lit[i], k->lit_len[i]);
		memcpy(s[m] + k->lit_len[i], suffix, sl + 1);
		n[m] = k->lit_len[i] + sl;
		m++;
	}
	if (s == NULL || n == NULL)
		oom(c);
	else
		id = m == 0 ? 0 : lit_node(c, (const char *const *)s, n, m);
	for (int i = 0; s != NULL && i < m; i++)
		free(s[i]);
	free(s), free(n);
	return id;
}

/*
 * The xml value of property node p (a compiled schema) into its prop: its
 * JSON part then "\n</parameter>\n", or a string's raw text up to
 * "</parameter>" then "\n" (any string), or a literal string's raw text
 * then "\n</parameter>\n".  The node, or -1.
 */
static int32_t
xml_value(struct cb *b, int32_t p, struct gprop *pr)
{
	struct gcc *c = b->c;
	struct kinds k = { 0 };
	uint8_t *seen = calloc(c->g->n_nodes, 1);
	char *buf = malloc(4096 + 8);
	int32_t alt[2], m[2], nonlit, strs;
	int n_alt = 0;

	pr->nonstr = -1, pr->str = 0;
	if (seen == NULL || buf == NULL || kinds_of(c->g, p, seen, &k, buf) != 0)
		goto fail;
	if ((nonlit = kinds_lits(c, &k, 0, "")) < 0 || (nonlit > 0 && kinds_json(&k, nonlit) != 0))
		goto fail;
	if (k.n_json > 0) {
		if ((pr->nonstr = list_node(c, GK_UNION, k.json, k.n_json)) < 0 ||
		    (m[1] = text_node(c, XML_END)) < 0)
			goto fail;
		m[0] = pr->nonstr;
		if ((alt[n_alt++] = list_node(c, GK_SEQ, m, 2)) < 0)
			goto fail;
	}
	if (k.any_str) {
		if ((m[0] = raw_node(b, "</parameter>", "</tool_call>", 0)) < 0 ||
		    (m[1] = text_node(c, "\n")) < 0 || (alt[n_alt++] = list_node(c, GK_SEQ, m, 2)) < 0)
			goto fail;
		pr->str = 1;
	} else if ((strs = kinds_lits(c, &k, 1, XML_END)) < 0)
		goto fail;
	else if (strs > 0)
		alt[n_alt++] = strs, pr->str = 1;
	free(seen), free(buf), kinds_free(&k);
	return list_node(c, GK_UNION, alt, n_alt);
fail:
	free(seen), free(buf), kinds_free(&k);
	return c->err[0] ? -1 : oom(c);
}

/* --- a strict tool's parameters in the xml form ------------------------------ */

/* Member j of an xml object (key k[kl], NULL: the close) in its key trie
 * root into *p, its value from the compiled property src (its node, its
 * requiredness): 0, or -1. */
static int
xml_member(struct cb *b, uint32_t root, uint32_t j, const char *k, size_t kl,
    const struct gprop *src, struct gprop *p)
{
	struct gcc *c = b->c;
	char key[MAX_NAME * 4 + 32];
	int64_t leaf;

	if (k != NULL && (kl > MAX_NAME * 4 || memchr(k, '>', kl) || memchr(k, '\n', kl) ||
	    memchr(k, '\0', kl)))
		return grammar_fail(c, "'properties' name '%s': a <parameter=...> name of at most 256 "
		    "bytes without '>' or a newline is needed", k, NULL);
	snprintf(key, sizeof key, k != NULL ? "<parameter=%s>\n" : "%s", k ? k : XML_CLOSE);
	p->qk = strlen(key);
	if ((leaf = grammar_trie_add(c->g, root, key, p->qk, j)) < 0)
		return oom(c);
	p->leaf = leaf;
	if (k == NULL)
		return 0;
	p->required = src->required;
	return (p->node = xml_value(b, src->node, p)) < 0 ? -1 : 0;
}

/* Its object: the properties of obj (compiled: an object node) as <parameter=KEY>
 * members, values in the xml form, the close among the keys; -1. */
static int32_t
xml_object(struct cb *b, int32_t obj, const struct json *props)
{
	struct gcc *c = b->c;
	struct grammar *g = c->g;
	uint32_t n = g->nodes[obj].n, off = g->nodes[obj].off;
	struct gprop *lp = calloc(n + 1, sizeof *lp);
	int32_t id = grammar_node(c, GK_OBJ);
	int64_t root = id < 0 ? -1 : grammar_tnode(g, 0, 0);

	if (lp == NULL || root < 0) {
		id = id < 0 ? -1 : oom(c);
		goto out;
	}
	g->nodes[id].trie = root, g->nodes[id].xml = 1, g->nodes[id].n = n;
	for (uint32_t j = 0; j <= n; j++)	/* (values make nodes, never props) */
		if (xml_member(b, root, j, j < n ? props->keys[j] : NULL, j < n ? props->keylens[j] :
		    0, &g->props[off + (j < n ? j : 0)], &lp[j]) != 0) {
			id = -1;
			goto out;
		}
	if (grammar_grow(&g->props, &g->cap_props, g->n_props + n + 1, sizeof *g->props) != 0) {
		id = oom(c);
		goto out;
	}
	g->nodes[id].off = g->n_props;
	memcpy(g->props + g->n_props, lp, (n + 1) * sizeof *lp);
	g->n_props += n + 1;
out:
	free(lp);
	return id;
}

/* The arguments' node of strict tool t: its parameters' schema (NULL: an
 * object of no properties), in the xml form its <parameter=...> object. */
static int32_t
strict_args(struct cb *b, const struct grammar_tool *t, const struct json *none, int xml)
{
	struct gcc *c = b->c;
	const struct json *s = t->params != NULL ? t->params : none, *props;
	int32_t id;

	c->doc = s, c->path[0] = '\0', c->plen = 0;
	if ((id = grammar_schema_node(c, s)) < 0 || !xml)
		return id;
	props = s->type == JSON_OBJECT ? json_get(s, "properties") : NULL;
	if (c->g->nodes[id].kind != GK_OBJ || props == NULL)
		return grammar_fail(c, "a strict tool's parameters are an object with 'properties' "
		    "in the template's <parameter=...> call form", NULL, NULL);
	return xml_object(b, id, props);
}

/* --- the document ------------------------------------------------------------ */

/* Tool t's call after its name: its arguments and the call's close; -1. */
static int32_t
call_body(struct cb *b, const struct grammar_tool *t, const struct json *none, int xml,
    int32_t *args)
{
	struct gcc *c = b->c;
	int32_t m[2];

	*args = -1;
	if (t->strict && (m[0] = strict_args(b, t, none, xml)) < 0)
		return -1;
	if (t->strict && xml)
		*args = m[0];
	if (!t->strict && xml)
		m[0] = raw_node(b, "</function>", "</tool_call>", 0);
	else if (!t->strict) {	/* any object (the compile may move g->nodes) */
		int32_t any = grammar_any_node(c);
		if (any < 0 || (m[0] = grammar_node(c, GK_MAP)) < 0)
			return -1;
		c->g->nodes[m[0]].child = any;
	}
	if (m[0] < 0)
		return -1;
	m[1] = text_node(c, !xml ? "}\n</tool_call>" : t->strict ? "</tool_call>" :
	    "\n</tool_call>");
	return m[1] < 0 ? -1 : list_node(c, GK_SEQ, m, 2);
}

/* 1 when s is a tool name: 1 to 64 of a-z, A-Z, 0-9, '_', '-'. */
static int
name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > MAX_NAME)
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* The switch of tools t[n] by "prefix" and their names, to body[i]; -1. */
static int32_t
names_switch(struct gcc *c, const struct grammar_tool *t, int n, const int32_t *body,
    const char *prefix, int xml)
{
	char **s = calloc(n, sizeof *s);
	int32_t id = -1;
	int i;

	for (i = 0; s != NULL && i < n; i++)
		if ((xml ? asprintf(&s[i], "%s<function=%s>\n", prefix, t[i].name) :
		    asprintf(&s[i], "%s{\"name\": \"%s\", \"arguments\": ", prefix, t[i].name)) < 0) {
			s[i] = NULL;
			break;
		}
	if (s == NULL || i < n)
		oom(c);
	else
		id = switch_node(c, s, body, n);
	for (i = 0; s != NULL && i < n; i++)
		free(s[i]);
	free(s);
	return id;
}

/* The document from where cl starts: the root's node; -1. */
static int32_t
document(struct cb *b, const struct grammar_tool *t, int n, const struct grammar_calls *cl,
    const int32_t *body)
{
	struct gcc *c = b->c;
	int xml = cl->form == GRAMMAR_CALLS_XML;
	int32_t m[4], full = -1;
	int k = 0;

	if (cl->start == GRAMMAR_CALLS_NAMED)
		return body[cl->named];
	if (cl->parallel && ((full = names_switch(c, t, n, body, "<tool_call>\n", xml)) < 0 ||
	    (full = loop_node(c, full)) < 0))
		return -1;
	if (cl->start == GRAMMAR_CALLS_AUTO && cl->think &&
	    (m[k++] = raw_node(b, "</think>", NULL, 1)) < 0)
		return -1;
	if (cl->start == GRAMMAR_CALLS_AUTO && (m[k++] = raw_node(b, "<tool_call>", NULL, 1)) < 0)
		return -1;
	if ((m[k++] = names_switch(c, t, n, body, cl->start == GRAMMAR_CALLS_AUTO ? "\n" : "",
	    xml)) < 0)
		return -1;
	if (full >= 0)
		m[k++] = full;
	return k == 1 ? m[0] : list_node(c, GK_SEQ, m, k);
}

/* Each tool's name checked and kept, its call body into body[i]; -1 (*bad: a refused schema's tool). */
static int
tools(struct cb *b, const struct grammar_tool *t, int n, int xml, int32_t *body, int *bad)
{
	struct gcc *c = b->c;
	struct grammar *g = c->g;
	char err[UTIL_ERRLEN];
	struct json *none = json_parse("{\"type\": \"object\", \"properties\": {}}", 36, err);
	int rc = 0;

	if (none == NULL || (g->tools = calloc(n, sizeof *g->tools)) == NULL)
		return json_free(none), oom(c);
	for (int i = 0; i < n && rc == 0; i++) {
		if (!name_ok(t[i].name))
			rc = util_err(c->err, "tool %d: '%s': not a name of 1 to 64 letters, digits, '_' "
			    "or '-'", i, t[i].name);
		for (int k = 0; k < i && rc == 0; k++)
			if (strcmp(t[k].name, t[i].name) == 0)
				rc = util_err(c->err, "tool %d: '%s': a name given twice", i, t[i].name);
		if (rc == 0 && (g->tools[i].name = strdup(t[i].name)) == NULL)
			rc = oom(c);
		g->n_tools = i + 1;
		if (rc == 0 && (body[i] = call_body(b, &t[i], none, xml, &g->tools[i].args)) < 0)
			*bad = c->err[0] == '#' ? i : -1, rc = -1;
	}
	json_free(none);
	return rc;
}

int
grammar_build_calls(struct grammar *g, const struct grammar_tool *t, int n,
    const struct grammar_calls *cl, int *bad, char *err)
{
	struct gcc c = { .g = g, .err = err, .any = -1 };
	struct cb b = { .c = &c };
	int32_t *body = calloc(n > 0 ? n : 1, sizeof *body);
	int rc = -1;

	err[0] = '\0', *bad = -1;
	g->calls = 1;
	if (body == NULL || grammar_tnode(g, 0, 0) < 0)
		rc = oom(&c);
	else if (n < 1 || (cl->start == GRAMMAR_CALLS_NAMED && (cl->named < 0 || cl->named >= n)))
		rc = util_err(err, "grammar: no tools, or no tool %d", cl->named);
	else if ((g->str_node = grammar_node(&c, GK_STR)) >= 0 &&
	    tools(&b, t, n, cl->form == GRAMMAR_CALLS_XML, body, bad) == 0 &&
	    (g->root = document(&b, t, n, cl, body)) >= 0)
		rc = grammar_finish(g, &c);
	if (rc != 0 && err[0] == '\0')
		oom(&c);
	free(body);
	free(c.memo);
	return rc;
}
