/*
 * grammar: the automaton's states and steps, token masks over the vocab
 * trie, and the mask cache.  The schema compiler is grammar_schema.c.
 *
 * A parse is a stack of frames (a pushdown automaton: one frame per open
 * value, the root's at the bottom).  A state is a set of such stacks, as
 * anyOf may leave several parses alive until a byte tells them apart;
 * each byte steps every stack, a stack that cannot take it dies, and
 * stacks that became equal merge.  A mask walks the token trie depth
 * first from the state, stepping a copy per trie edge, and prunes a
 * subtree at its first rejected byte.  Masks are cached per state (the
 * whole set of stacks is the key: it alone decides the mask).
 */
#include "grammar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"
#include "json.h"
#include "tokenizer.h"
#include "util.h"

#define MAXS	16		/* stacks of a state */
#define MAXF	256		/* frames of a state, all stacks */
#define END	256		/* the end of the text, after the last byte */
#define ROOT	0xffffffffu	/* the bottom frame's node */

struct frame {
	uint32_t node;		/* index into g->nodes, or ROOT */
	uint32_t x;		/* LIT, OBJ key: trie node; OBJ: the property; ARR: items done */
	uint16_t a;		/* OBJ: next property; NUM: digits; STR: UTF-8 / \u state */
	uint8_t	ph;		/* phase */
	uint8_t	ws;		/* whitespace bytes in this gap */
};

struct sset {
	uint16_t n, nf;		/* stacks, frames */
	uint16_t len[MAXS];
	struct frame f[MAXF];	/* stack after stack, bottom first */
};

struct grammar_state {
	const struct grammar *g;
	int	finished;
	struct sset cur;
	struct sset **lv;	/* DFS scratch, one a trie depth */
	size_t	n_lv;
	uint32_t *bits;		/* [g->words] */
	uint32_t *out;		/* grammar_mask_logits: [n_out] */
	int8_t	*delta;		/* closing masks: [n_vocab] */
	size_t	n_out;
};

enum { R_EAT, R_REJ, R_POP, R_PASS, R_PUSH, R_ACC };
enum { RT_LEAD, RT_IN, RT_TRAIL };
enum { O_START, O_OPEN, O_KEY, O_COLON, O_VAL, O_IN, O_AFTER, O_COMMA };
enum { A_START, A_OPEN, A_IN, A_AFTER, A_COMMA };
enum { S_START, S_IN, S_ESC, S_U };
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ES, N_EXP };

#define NUM_INT_DIGITS	15
#define NUM_FRAC_DIGITS	15
#define NUM_EXP_DIGITS	2

/* UTF-8 inside strings: the bytes a character still needs.  State s
 * (1..7) takes a byte in [lo, hi] and goes to next (0: a whole character). */
static const struct { uint8_t lo, hi, next, left; } utf8[8] = {
	{ 0, 0, 0, 0 }, { 0x80, 0xBF, 0, 1 }, { 0x80, 0xBF, 1, 2 }, { 0x80, 0xBF, 2, 3 },
	{ 0xA0, 0xBF, 1, 2 }, { 0x80, 0x9F, 1, 2 }, { 0x90, 0xBF, 2, 3 }, { 0x80, 0x8F, 2, 3 },
};

static int
utf8_lead(int b)
{
	if (b >= 0xC2 && b <= 0xDF)
		return 1;
	if (b == 0xE0)
		return 4;
	if (b == 0xED)
		return 5;
	if (b >= 0xE1 && b <= 0xEF)
		return 2;
	if (b == 0xF0)
		return 6;
	if (b >= 0xF1 && b <= 0xF3)
		return 3;
	return b == 0xF4 ? 7 : -1;
}

static int
is_ws(int b)
{
	return b == ' ' || b == '\n' || b == '\t' || b == '\r';
}

static int
is_digit(int b)
{
	return b >= '0' && b <= '9';
}

static int
is_hex(int b)
{
	return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
}

/* Enter phase p (a new gap for whitespace): R_EAT. */
static int
ph(struct frame *f, int p)
{
	f->ph = p;
	f->ws = 0;
	return R_EAT;
}

static int
ws_eat(const struct grammar *g, struct frame *f)
{
	if (f->ws >= g->ws_max)
		return R_REJ;
	f->ws++;
	return R_EAT;
}

uint32_t
grammar_tchild(const struct grammar *g, uint32_t t, int b)
{
	for (uint32_t c = g->tn[t].child; c != 0; c = g->tn[c].next)
		if (g->tn[c].byte == b)
			return c;
	return 0;
}

/* --- the frames' steps -------------------------------------------------- */

static int
str_step(struct frame *f, int b)
{
	if (b == END)
		return R_REJ;
	switch (f->ph) {
	case S_START:
		return b == '"' ? ph(f, S_IN) : R_REJ;
	case S_IN:
		if (f->a != 0) {
			if (b < utf8[f->a].lo || b > utf8[f->a].hi)
				return R_REJ;
			f->a = utf8[f->a].next;
			return R_EAT;
		}
		if (b == '"')
			return R_POP;
		if (b == '\\')
			return ph(f, S_ESC);
		if (b < 0x20)
			return R_REJ;
		if (b < 0x80)
			return R_EAT;
		if (utf8_lead(b) < 0)
			return R_REJ;
		f->a = utf8_lead(b);
		return R_EAT;
	case S_ESC:
		if (b == 'u') {
			f->a = 0;
			return ph(f, S_U);
		}
		return b != 0 && strchr("\"\\/bfnrt", b) != NULL ? ph(f, S_IN) : R_REJ;
	default:	/* S_U: a = hex digits taken | 4 after a leading 'd' */
		if (!is_hex(b))
			return R_REJ;
		if ((f->a & 3) == 0 && (b == 'd' || b == 'D'))
			f->a |= 4;
		else if ((f->a & 3) == 1 && (f->a & 4) && !(b >= '0' && b <= '7'))
			return R_REJ;	/* a surrogate */
		if ((f->a & 3) == 3) {
			f->a = 0;
			return ph(f, S_IN);
		}
		f->a++;
		return R_EAT;
	}
}

/* A digit in a run of at most max, else the number ends before b. */
static int
digits(struct frame *f, int b, int max)
{
	if (!is_digit(b) || f->a >= max)
		return R_PASS;
	f->a++;
	return R_EAT;
}

static int
num_step(struct frame *f, int b, int integer)
{
	switch (f->ph) {
	case N_START:
		if (b == '-')
			return ph(f, N_MINUS);
		/* FALLTHROUGH */
	case N_MINUS:
		if (b == '0')
			return ph(f, N_ZERO);
		if (!is_digit(b))
			return R_REJ;
		f->a = 1;
		return ph(f, N_INT);
	case N_ZERO: case N_INT:
		if (f->ph == N_INT && is_digit(b))
			return digits(f, b, NUM_INT_DIGITS);
		if (!integer && b == '.')
			return ph(f, N_DOT);
		/* FALLTHROUGH */
	case N_FRAC:
		if (f->ph == N_FRAC && is_digit(b))
			return digits(f, b, NUM_FRAC_DIGITS);
		return !integer && (b == 'e' || b == 'E') ? ph(f, N_E) : R_PASS;
	case N_DOT:
		f->a = 1;
		return is_digit(b) ? ph(f, N_FRAC) : R_REJ;
	case N_E:
		if (b == '+' || b == '-')
			return ph(f, N_ES);
		/* FALLTHROUGH */
	case N_ES:
		f->a = 1;
		return is_digit(b) ? ph(f, N_EXP) : R_REJ;
	default:	/* N_EXP */
		return digits(f, b, NUM_EXP_DIGITS);
	}
}

static int
lit_step(const struct grammar *g, struct frame *f, int b)
{
	uint32_t t = b == END ? 0 : grammar_tchild(g, f->x, b);

	if (t != 0) {
		f->x = t;
		return R_EAT;
	}
	return g->tn[f->x].leaf == 1 ? R_PASS : R_REJ;
}

/* An object whose next property is pi: 1 when a key below trie node t
 * may come (properties pi up to the first required one). */
static int
key_viable(const struct grammar *g, const struct gnode *nd, uint32_t t, uint32_t pi)
{
	uint32_t hi = g->props[nd->off + pi].first_req;
	const struct tnode *tn = &g->tn[t];

	for (uint32_t i = 0; i < tn->n_below; i++) {
		uint32_t j = g->below[tn->below + i];
		if (j >= pi && j <= hi && (j < nd->n || nd->xml))	/* xml: key n is the close */
			return 1;
	}
	return 0;
}

/* A byte of a property's key: the trie node after it, the property at its end. */
static int
key_step(const struct grammar *g, const struct gnode *nd, struct frame *f, int b)
{
	uint32_t t = grammar_tchild(g, f->ph == O_KEY ? f->x : nd->trie, b);

	if (t == 0 || !key_viable(g, nd, t, f->a))
		return R_REJ;
	if (f->ph != O_KEY)
		ph(f, O_KEY);
	if (g->tn[t].leaf < 0) {
		f->x = t;
		return R_EAT;
	}
	if ((uint32_t)g->tn[t].leaf == nd->n)	/* xml: the close */
		return R_POP;
	f->x = g->tn[t].leaf;
	f->a = f->x + 1;
	return ph(f, nd->xml ? O_VAL : O_COLON);
}

/* An xml object (<parameter=KEY>\nVALUE... then the close): keys, the close
 * among them, whitespace between; a value right after its key. */
static int
xobj_step(const struct grammar *g, const struct gnode *nd, struct frame *f, int b,
    int32_t *child)
{
	if (f->ph == O_KEY)
		return key_step(g, nd, f, b);
	if (f->ph == O_VAL) {
		*child = g->props[nd->off + f->x].node;
		ph(f, O_IN);
		return R_PUSH;
	}
	if (is_ws(b))
		return ws_eat(g, f);
	return b == END ? R_REJ : key_step(g, nd, f, b);
}

/* The phases an object and a map share: after a key, after a value. */
static int
obj_common(const struct grammar *g, const struct gnode *nd, struct frame *f, int b,
    int32_t *child)
{
	int is_obj = nd->kind == GK_OBJ;

	if (is_ws(b))
		return f->ph == O_START || f->ph == O_KEY ? R_REJ : ws_eat(g, f);
	switch (f->ph) {
	case O_START:
		return b == '{' ? ph(f, O_OPEN) : R_REJ;
	case O_COLON:
		return b == ':' ? ph(f, O_VAL) : R_REJ;
	case O_VAL:
		*child = is_obj ? g->props[nd->off + f->x].node : nd->child;
		ph(f, O_IN);
		return R_PUSH;
	case O_AFTER:
		if (b == '}' && (!is_obj || g->props[nd->off + f->a].first_req == nd->n))
			return R_POP;
		if (b != ',')
			return R_REJ;
		if (is_obj && !key_viable(g, nd, nd->trie, f->a))
			return R_REJ;
		return ph(f, O_COMMA);
	}
	return R_REJ;
}

static int
obj_step(const struct grammar *g, const struct gnode *nd, struct frame *f, int b,
    int32_t *child)
{
	if (nd->xml)
		return xobj_step(g, nd, f, b, child);
	if (f->ph == O_KEY)
		return key_step(g, nd, f, b);
	if ((f->ph != O_OPEN && f->ph != O_COMMA) || is_ws(b))
		return obj_common(g, nd, f, b, child);
	if (b == '}' && f->ph == O_OPEN && g->props[nd->off].first_req == nd->n)
		return R_POP;
	return b == '"' ? key_step(g, nd, f, b) : R_REJ;
}

static int
map_step(const struct grammar *g, const struct gnode *nd, struct frame *f, int b,
    int32_t *child)
{
	if ((f->ph != O_OPEN && f->ph != O_COMMA) || is_ws(b))
		return obj_common(g, nd, f, b, child);
	if (b == '}' && f->ph == O_OPEN)
		return R_POP;
	if (b != '"' || nd->child < 0)
		return R_REJ;
	*child = g->str_node;
	ph(f, O_KEY);
	return R_PUSH;
}

static int
arr_step(const struct grammar *g, const struct gnode *nd, struct frame *f, int b,
    int32_t *child)
{
	if (f->ph == A_START)
		return b == '[' ? ph(f, A_OPEN) : R_REJ;
	if (is_ws(b))
		return ws_eat(g, f);
	if (f->ph == A_AFTER) {
		if (b == ']')
			return f->x >= (uint32_t)nd->min ? R_POP : R_REJ;
		if (b != ',' || (nd->max >= 0 && f->x >= (uint32_t)nd->max))
			return R_REJ;
		return ph(f, A_COMMA);
	}
	if (f->ph == A_OPEN && b == ']')
		return nd->min == 0 ? R_POP : R_REJ;
	if (nd->child < 0 || nd->max == 0 || b == END)
		return R_REJ;
	*child = nd->child;
	ph(f, A_IN);
	return R_PUSH;
}

/* The bottom frame: whitespace, the document's value (x: its node + 1; 0:
 * g->root), whitespace, the end. */
static int
root_step(const struct grammar *g, struct frame *f, int b, int32_t *child)
{
	if (is_ws(b))
		return ws_eat(g, f);
	if (f->ph == RT_TRAIL)
		return b == END ? R_ACC : R_REJ;
	if (b == END && !g->calls)
		return R_REJ;
	*child = f->x ? (int32_t)f->x - 1 : g->root;
	ph(f, RT_IN);
	return R_PUSH;
}

/* --- tool-call documents: sequences, switches, raw text, loops ------------- */

enum { SQ_NEXT, SQ_IN };
enum { SW_KEY, SW_LEAF, SW_IN, SW_DONE };
enum { LP_GAP, LP_IN };

static int
seq_step(const struct grammar *g, const struct gnode *nd, struct frame *f, int32_t *child)
{
	if (f->x == nd->n)
		return R_PASS;
	*child = g->members[nd->off + f->x];
	f->ph = SQ_IN;
	return R_PUSH;
}

static int
switch_step(const struct grammar *g, const struct gnode *nd, struct frame *f, int b,
    int32_t *child)
{
	uint32_t t;

	switch (f->ph) {
	case SW_KEY:
		if (b == END || (t = grammar_tchild(g, f->x, b)) == 0)
			return R_REJ;
		f->x = t;
		if (g->tn[t].leaf >= 0)
			f->ph = SW_LEAF;
		return R_EAT;
	case SW_LEAF:
		*child = g->members[nd->off + g->tn[f->x].leaf];
		f->ph = SW_IN;
		return R_PUSH;
	default:	/* SW_DONE */
		return R_PASS;
	}
}

/* Raw text: UTF-8 (a: the bytes a character still needs), no NUL, the
 * DFA's state in x; the pattern ends it, a forbidden one is refused. */
static int
raw_step(const struct grammar *g, const struct gnode *nd, struct frame *f, int b)
{
	int nx;

	if (b == END)
		return nd->min && f->a == 0 ? R_ACC : R_REJ;
	if (f->a != 0) {
		if (b < utf8[f->a].lo || b > utf8[f->a].hi)
			return R_REJ;
		f->a = utf8[f->a].next;
	} else if (b == 0 || (b >= 0x80 && utf8_lead(b) < 0))
		return R_REJ;
	else if (b >= 0x80)
		f->a = utf8_lead(b);
	nx = g->dfa[nd->trie + f->x][b];
	if (nx == DFA_REJ)
		return R_REJ;
	if (nx == DFA_END)
		return R_POP;
	f->x = nx;
	return R_EAT;
}

static int
loop_step(const struct grammar *g, const struct gnode *nd, struct frame *f, int b,
    int32_t *child)
{
	if (is_ws(b))
		return ws_eat(g, f);
	if (b == END)
		return R_PASS;
	if (nd->child < 0)
		return R_REJ;
	*child = nd->child;
	ph(f, LP_IN);
	return R_PUSH;
}

static int
frame_step(const struct grammar *g, struct frame *f, int b, int32_t *child)
{
	const struct gnode *nd;

	if (f->node == ROOT)
		return root_step(g, f, b, child);
	nd = &g->nodes[f->node];
	switch (nd->kind) {
	case GK_OBJ: return obj_step(g, nd, f, b, child);
	case GK_MAP: return map_step(g, nd, f, b, child);
	case GK_ARR: return arr_step(g, nd, f, b, child);
	case GK_STR: return str_step(f, b);
	case GK_NUM: return num_step(f, b, 0);
	case GK_INT: return num_step(f, b, 1);
	case GK_SEQ: return seq_step(g, nd, f, child);
	case GK_SWITCH: return switch_step(g, nd, f, b, child);
	case GK_RAW: return raw_step(g, nd, f, b);
	case GK_LOOP: return loop_step(g, nd, f, b, child);
	default: return lit_step(g, f, b);
	}
}

/* A child value ended: its parent moves past it. */
static void
child_done(const struct grammar *g, struct frame *f)
{
	const struct gnode *nd = f->node == ROOT ? NULL : &g->nodes[f->node];

	if (nd == NULL)
		ph(f, RT_TRAIL);
	else if (nd->kind == GK_ARR) {
		if (f->x < nd->cap)
			f->x++;
		ph(f, A_AFTER);
	} else if (nd->kind == GK_SEQ) {
		f->x++;
		ph(f, SQ_NEXT);
	} else if (nd->kind == GK_SWITCH)
		ph(f, SW_DONE);
	else if (nd->kind == GK_LOOP)
		ph(f, LP_GAP);
	else
		ph(f, f->ph == O_KEY ? O_COLON : O_AFTER);
}

/* --- states: sets of stacks --------------------------------------------- */

struct run {
	const struct grammar *g;
	struct sset *out;	/* NULL: only acceptance matters */
	int	accepted;
};

static void
emit(struct run *c, const struct frame *w, int d)
{
	struct sset *o = c->out;
	size_t off = 0;

	if (o == NULL || o->n == MAXS || o->nf + d > MAXF)
		return;		/* a parse past the bounds: dropped */
	for (int i = 0; i < o->n; off += o->len[i++])
		if (o->len[i] == d && memcmp(o->f + off, w, d * sizeof *w) == 0)
			return;
	memcpy(o->f + o->nf, w, d * sizeof *w);
	o->len[o->n++] = d;
	o->nf += d;
}

static struct frame
frame_start(const struct grammar *g, uint32_t node)
{
	struct frame f = { node, 0, 0, 0, 0 };

	if (g->nodes[node].kind == GK_LIT || g->nodes[node].kind == GK_SWITCH)
		f.x = g->nodes[node].trie;
	if (g->nodes[node].kind == GK_OBJ && g->nodes[node].xml)
		f.ph = O_OPEN;		/* no '{' */
	return f;
}

/* Byte b through the stack w[d] (scratch); each parse it leaves to c. */
static void
run(struct run *c, struct frame *w, int d, int b)
{
	const struct grammar *g = c->g;
	struct frame t[GRAMMAR_MAX_DEPTH];
	const struct gnode *nd;
	int32_t child = -1;

	for (;;) {
		switch (frame_step(g, &w[d - 1], b, &child)) {
		case R_EAT: emit(c, w, d); return;
		case R_REJ: return;
		case R_ACC: c->accepted = 1; return;
		case R_POP:
			child_done(g, &w[--d - 1]);
			emit(c, w, d);
			return;
		case R_PASS:
			child_done(g, &w[--d - 1]);
			continue;
		}
		/* R_PUSH: the child's alternatives, each a parse of its own */
		nd = &g->nodes[child];
		if (d >= GRAMMAR_MAX_DEPTH || nd->n_alt == 0)
			return;
		for (uint32_t i = 0; i + 1 < nd->n_alt; i++) {
			memcpy(t, w, d * sizeof *w);
			t[d] = frame_start(g, g->alts[nd->alt + i]);
			run(c, t, d + 1, b);
		}
		w[d++] = frame_start(g, g->alts[nd->alt + nd->n_alt - 1]);
	}
}

/* out = in after byte b (END: only c.accepted); returns out's stacks. */
static int
sset_step(const struct grammar *g, const struct sset *in, int b, struct sset *out, int *acc)
{
	struct run c = { g, out, 0 };
	struct frame w[GRAMMAR_MAX_DEPTH];
	size_t off = 0;

	if (out != NULL)
		out->n = out->nf = 0;
	for (int i = 0; i < in->n; off += in->len[i++]) {
		memcpy(w, in->f + off, in->len[i] * sizeof *w);
		run(&c, w, in->len[i], b);
	}
	if (acc != NULL)
		*acc = c.accepted;
	return out != NULL ? out->n : 0;
}

static void
sset_copy(struct sset *dst, const struct sset *src)
{
	dst->n = src->n;
	dst->nf = src->nf;
	memcpy(dst->len, src->len, src->n * sizeof *src->len);
	memcpy(dst->f, src->f, src->nf * sizeof *src->f);
}

static int
sset_done(const struct grammar *g, const struct sset *s)
{
	int acc;

	sset_step(g, s, END, NULL, &acc);
	return acc;
}

/* --- distance: the fewest bytes that end the document ------------------- */

static uint64_t
ml_of(const struct grammar *g, int32_t node)
{
	return node < 0 ? G_INF : g->nodes[node].ml;
}

/* An object at property pi (or in a key at trie node t, depth dt): the
 * fewest bytes to its end through a property j it may take next. */
static uint64_t
obj_rest_key(const struct grammar *g, const struct gnode *nd, uint32_t t, uint32_t pi)
{
	const struct tnode *tn = &g->tn[t];
	const struct gprop *p = g->props + nd->off;
	uint64_t best = G_INF;

	for (uint32_t i = 0; i < tn->n_below; i++) {
		uint32_t j = g->below[tn->below + i];
		uint64_t r;
		if (j < pi || j > p[pi].first_req || (j >= nd->n && !nd->xml))
			continue;
		if (j == nd->n)		/* xml: the close */
			r = p[j].qk - tn->depth;
		else
			r = (p[j].qk - tn->depth) + !nd->xml + ml_of(g, p[j].node) + p[j + 1].rest;
		if (r < best)
			best = r;
	}
	return best;
}

static uint64_t
obj_rest(const struct grammar *g, const struct gnode *nd, const struct frame *f)
{
	const struct gprop *p = g->props + nd->off;

	if (nd->xml)
		return f->ph == O_KEY ? obj_rest_key(g, nd, f->x, f->a) :
		    f->ph == O_VAL ? ml_of(g, p[f->x].node) + p[f->a].rest : p[f->a].rest;
	switch (f->ph) {
	case O_START: return nd->ml;
	case O_OPEN: return p[0].rest - (p[0].first_req < nd->n);
	case O_KEY: return obj_rest_key(g, nd, f->x, f->a);
	case O_COLON: return 1 + ml_of(g, p[f->x].node) + p[f->a].rest;
	case O_VAL: return ml_of(g, p[f->x].node) + p[f->a].rest;
	case O_COMMA: return obj_rest_key(g, nd, nd->trie, f->a);
	default: return p[f->a].rest;	/* O_IN, O_AFTER */
	}
}

static uint64_t
map_rest(const struct grammar *g, const struct gnode *nd, const struct frame *f)
{
	uint64_t v = ml_of(g, nd->child);

	switch (f->ph) {
	case O_START: return 2;
	case O_KEY: case O_COLON: return v + 2;
	case O_VAL: return v + 1;
	case O_COMMA: return v + 4;
	default: return 1;
	}
}

static uint64_t
arr_rest(const struct grammar *g, const struct gnode *nd, const struct frame *f)
{
	uint64_t v = ml_of(g, nd->child), need = nd->min > (int32_t)f->x ? nd->min - f->x : 0;

	switch (f->ph) {
	case A_START: return nd->ml;
	case A_OPEN: return need ? need * (v + 1) : 1;
	case A_AFTER: return need * (v + 1) + 1;
	case A_COMMA: return v + (need ? need - 1 : 0) * (v + 1) + 1;
	default: return (need ? need - 1 : 0) * (v + 1) + 1;	/* A_IN */
	}
}

/* A sequence's members after the one it runs (or from its next one). */
static uint64_t
seq_rest(const struct grammar *g, const struct gnode *nd, const struct frame *f)
{
	uint64_t sum = 0;

	for (uint32_t i = f->x + (f->ph == SQ_IN); i < nd->n; i++)
		sum += ml_of(g, g->members[nd->off + i]);
	return sum;
}

static uint64_t
frame_rest(const struct grammar *g, const struct frame *f)
{
	const struct gnode *nd;

	if (f->node == ROOT)
		return f->ph == RT_LEAD ? ml_of(g, f->x ? (int32_t)f->x - 1 : g->root) : 0;
	nd = &g->nodes[f->node];
	switch (nd->kind) {
	case GK_SEQ: return seq_rest(g, nd, f);
	case GK_SWITCH:
		return f->ph == SW_KEY ? g->tn[f->x].mind : f->ph == SW_LEAF ?
		    ml_of(g, g->members[nd->off + g->tn[f->x].leaf]) : 0;
	case GK_RAW: return nd->min ? 0 : utf8[f->a].left + (uint64_t)g->dfa_dist[nd->trie + f->x];
	case GK_LOOP: return 0;
	case GK_OBJ: return obj_rest(g, nd, f);
	case GK_MAP: return map_rest(g, nd, f);
	case GK_ARR: return arr_rest(g, nd, f);
	case GK_STR:
		return f->ph == S_START || f->ph == S_ESC ? 2 :
		    f->ph == S_IN ? 1 + utf8[f->a].left : 5 - (f->a & 3);
	case GK_NUM: case GK_INT:
		return f->ph == N_ZERO || f->ph == N_INT || f->ph == N_FRAC || f->ph == N_EXP ? 0 : 1;
	default: return g->tn[f->x].mind;
	}
}

static uint32_t
sset_dist(const struct grammar *g, const struct sset *s)
{
	uint64_t best = G_INF;
	size_t off = 0;

	for (int i = 0; i < s->n; off += s->len[i++]) {
		const struct frame *top = &s->f[off + s->len[i] - 1];
		uint64_t sum = 0;
		for (int k = 0; k < s->len[i]; k++)
			sum += frame_rest(g, &s->f[off + k]);
		if (top->node != ROOT && g->nodes[top->node].kind == GK_RAW &&
		    g->nodes[top->node].min && top->a == 0)
			sum = 0;	/* the document may end in it */
		if (sum < best)
			best = sum;
	}
	return best < G_INF ? best : G_INF;
}

/* --- states --------------------------------------------------------------- */

/* DFS scratch level i (grown on demand); NULL when out of memory. */
static struct sset *
level(struct grammar_state *s, size_t i)
{
	if (i >= s->n_lv) {
		size_t n = i + 8;
		struct sset **p = realloc(s->lv, n * sizeof *p);
		if (p == NULL)
			return NULL;
		s->lv = p;
		for (size_t k = s->n_lv; k < n; k++)
			s->lv[k] = NULL;
		s->n_lv = n;
	}
	if (s->lv[i] == NULL)
		s->lv[i] = malloc(sizeof *s->lv[i]);
	return s->lv[i];
}

struct grammar_state *
grammar_state_new(const struct grammar *g)
{
	struct grammar_state *s = calloc(1, sizeof *s);

	if (s == NULL)
		return NULL;
	s->g = g;
	s->cur.n = s->cur.nf = 1;
	s->cur.len[0] = 1;
	s->cur.f[0] = (struct frame){ ROOT, 0, 0, RT_LEAD, 0 };
	if ((s->bits = malloc(g->words * sizeof *s->bits)) == NULL ||
	    level(s, 0) == NULL || level(s, 1) == NULL) {
		grammar_state_free(s);
		return NULL;
	}
	return s;
}

void
grammar_state_free(struct grammar_state *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n_lv; i++)
		free(s->lv[i]);
	free(s->lv);
	free(s->bits);
	free(s->out);
	free(s->delta);
	free(s);
}

void
grammar_state_copy(struct grammar_state *dst, const struct grammar_state *src)
{
	dst->finished = src->finished;
	sset_copy(&dst->cur, &src->cur);
}

int
grammar_done(const struct grammar_state *s)
{
	return !s->finished && sset_done(s->g, &s->cur);
}

int
grammar_ended(struct grammar_state *s)
{
	if (s->finished || !s->g->calls || !grammar_done(s))
		return grammar_done(s);
	for (int b = 0; b < 256; b++)	/* a call document: nothing but whitespace may follow */
		if (!is_ws(b) && sset_step(s->g, &s->cur, b, s->lv[0], NULL) > 0)
			return 0;
	return 1;
}

int
grammar_node_accepts(const struct grammar *g, int32_t node, const char *v, size_t n)
{
	struct sset *a = malloc(sizeof *a), *b = malloc(sizeof *b), *t;
	int acc = 0;

	if (a == NULL || b == NULL) {
		free(a), free(b);
		return -1;
	}
	a->n = a->nf = 1;
	a->len[0] = 1;
	a->f[0] = (struct frame){ ROOT, (uint32_t)node + 1, 0, RT_LEAD, 0 };
	for (size_t i = 0; i < n && a->n > 0; i++) {
		sset_step(g, a, (uint8_t)v[i], b, NULL);
		t = a, a = b, b = t;
	}
	if (a->n > 0)
		sset_step(g, a, END, NULL, &acc);
	free(a), free(b);
	return acc;
}

/* Strict tool fn's xml parameter key[kn]: its property, or NULL. */
static const struct gprop *
xml_prop(const struct grammar *g, const char *fn, const char *key, size_t kn)
{
	static const char open[] = "<parameter=";
	const struct gnode *nd = NULL;
	uint32_t t;

	for (int i = 0; i < g->n_tools && nd == NULL; i++)
		if (strcmp(g->tools[i].name, fn) == 0 && g->tools[i].args >= 0)
			nd = &g->nodes[g->tools[i].args];
	if (nd == NULL)
		return NULL;
	t = nd->trie;
	for (size_t i = 0; i < sizeof open - 1 + kn + 2 && t != 0; i++) {
		int b = i < sizeof open - 1 ? open[i] : i < sizeof open - 1 + kn ?
		    (uint8_t)key[i - (sizeof open - 1)] : i == sizeof open - 1 + kn ? '>' : '\n';
		t = grammar_tchild(g, t, b);
	}
	if (t == 0 || g->tn[t].leaf < 0 || (uint32_t)g->tn[t].leaf >= nd->n)
		return NULL;
	return &g->props[nd->off + g->tn[t].leaf];
}

char *
grammar_call_value(const struct grammar *g, const char *fn, const char *key, size_t kn,
    const char *v, size_t vn)
{
	const struct gprop *p = xml_prop(g, fn, key, kn);
	char *b = NULL;
	size_t bl;
	FILE *fp;
	int json = p != NULL && p->nonstr >= 0 ? grammar_node_accepts(g, p->nonstr, v, vn) : 0;

	if (p == NULL || json < 0 || (!json && !p->str))
		return NULL;
	if (json)
		return strndup(v, vn);
	if ((fp = open_memstream(&b, &bl)) == NULL)
		return NULL;
	json_put_str(fp, v, vn, 0);
	if (fclose(fp) != 0) {
		free(b);
		return NULL;
	}
	return b;
}

int
grammar_finished(const struct grammar_state *s)
{
	return s->finished;
}

int
grammar_distance(const struct grammar_state *s)
{
	return s->finished ? 0 : (int)sset_dist(s->g, &s->cur);
}

/* The state after bytes p[len] into *res (scratch, or cur itself when
 * len is 0): 0, or -1 at a byte not allowed. */
static int
walk(struct grammar_state *s, const uint8_t *p, size_t len, const struct sset **res)
{
	const struct sset *in = &s->cur;

	if (s->finished)
		return -1;
	for (size_t i = 0; i < len; i++) {
		struct sset *out = s->lv[i & 1];
		if (sset_step(s->g, in, p[i], out, NULL) == 0)
			return -1;
		in = out;
	}
	*res = in;
	return 0;
}

int
grammar_feed(struct grammar_state *s, const char *bytes, size_t len)
{
	const struct sset *r;

	if (walk(s, (const uint8_t *)bytes, len, &r) != 0)
		return -1;
	if (r != &s->cur)
		sset_copy(&s->cur, r);
	return 0;
}

static int
is_stop(const struct grammar_vocab *v, int32_t tok)
{
	for (int i = 0; i < v->n_stop; i++)
		if (v->stop[i] == tok)
			return 1;
	return 0;
}

int
grammar_allows(struct grammar_state *s, int32_t tok)
{
	const struct grammar_vocab *v = s->g->v;
	const struct sset *r;

	if (tok < 0 || (size_t)tok >= v->n_vocab || s->finished)
		return 0;
	if (is_stop(v, tok))
		return grammar_done(s);
	return v->in_trie[tok] &&
	    walk(s, v->bytes + v->off[tok], v->off[tok + 1] - v->off[tok], &r) == 0;
}

int
grammar_accept(struct grammar_state *s, int32_t tok)
{
	const struct grammar_vocab *v = s->g->v;

	if (!grammar_allows(s, tok))
		return -1;
	if (is_stop(v, tok))
		s->finished = 1;
	else
		grammar_feed(s, (const char *)v->bytes + v->off[tok], v->off[tok + 1] - v->off[tok]);
	return 0;
}

/* --- masks ---------------------------------------------------------------- */

struct dfs {
	struct grammar_state *s;
	uint32_t *bits;		/* [g->words] */
	int	count;
	int	closing;	/* 1: a token only when its distance <= thr;
				   2: each token's change of distance to delta[] */
	uint32_t thr, best;	/* best: the least distance seen */
	int8_t	*delta;		/* [n_vocab] */
	uint32_t d0;		/* the distance before */
};

#define DELTA_NO	127	/* deltas: not allowed */

static void
set_tokens(struct dfs *c, uint32_t first, uint32_t n)
{
	const int32_t *ids = c->s->g->v->ids + first;

	for (uint32_t i = 0; i < n; i++)
		c->bits[ids[i] >> 5] |= 1u << (ids[i] & 31);
	c->count += n;
}

static void
set_deltas(struct dfs *c, uint32_t first, uint32_t n, uint32_t d)
{
	const int32_t *ids = c->s->g->v->ids + first;
	int64_t v = (int64_t)d - c->d0;

	v = v < -128 ? -128 : v > DELTA_NO - 1 ? DELTA_NO - 1 : v;
	for (uint32_t i = 0; i < n; i++)
		c->delta[ids[i]] = v;
}

/* The tokens below trie node k, the state at node k being level lv's. */
static int
dfs(struct dfs *c, uint32_t k, size_t lv)
{
	const struct grammar_vocab *v = c->s->g->v;
	struct sset *in = level(c->s, lv), *out = level(c->s, lv + 1);

	if (in == NULL || out == NULL)
		return -1;
	for (uint32_t ch = k + 1; ch < v->vn[k].end; ch = v->vn[ch].end) {
		const struct vnode *n = &v->vn[ch];
		if (sset_step(c->s->g, in, n->byte, out, NULL) == 0)
			continue;
		if (n->n_tok > 0 && !c->closing)
			set_tokens(c, n->tok, n->n_tok);
		else if (n->n_tok > 0 && c->closing == 2)
			set_deltas(c, n->tok, n->n_tok, sset_dist(c->s->g, out));
		else if (n->n_tok > 0) {
			uint32_t d = sset_dist(c->s->g, out);
			if (d <= c->thr)
				set_tokens(c, n->tok, n->n_tok);
			if (d < c->best)
				c->best = d;
		}
		if (n->end > ch + 1 && dfs(c, ch, lv + 1) != 0)
			return -1;
	}
	return 0;
}

/* The mask of the current state into c->bits (zeroed). */
static int
mask_walk(struct dfs *c)
{
	struct grammar_state *s = c->s;
	const struct grammar_vocab *v = s->g->v;

	memset(c->bits, 0, s->g->words * sizeof *c->bits);
	c->count = 0;
	c->best = G_INF;
	sset_copy(s->lv[0], &s->cur);
	if (sset_done(s->g, &s->cur)) {
		for (int i = 0; i < v->n_stop; i++)
			if (v->stop[i] >= 0 && (size_t)v->stop[i] < v->n_vocab &&
			    !(c->bits[v->stop[i] >> 5] >> (v->stop[i] & 31) & 1)) {
				c->bits[v->stop[i] >> 5] |= 1u << (v->stop[i] & 31);
				c->count++;
				if (c->delta != NULL)
					c->delta[v->stop[i]] = 0;	/* the end: distance 0 */
			}
		c->best = 0;
	}
	return v->n_vn > 0 ? dfs(c, 0, 0) : 0;
}

static uint64_t
hash_key(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h ? h : 1;
}

/* The state's key: tag, then its stacks' lengths and frames. */
static size_t
state_key(const struct sset *s, int tag, uint8_t *buf)
{
	size_t n = 1;

	buf[0] = tag;
	memcpy(buf + n, &s->n, sizeof s->n);
	n += sizeof s->n;
	memcpy(buf + n, s->len, s->n * sizeof *s->len);
	n += s->n * sizeof *s->len;
	memcpy(buf + n, s->f, s->nf * sizeof *s->f);
	return n + s->nf * sizeof *s->f;
}

#define KEY_MAX	(1 + sizeof(uint16_t) * (1 + MAXS) + sizeof(struct frame) * MAXF)

static void
cache_clear(struct grammar *g)
{
	for (size_t i = 0; i < g->cache_slots; i++) {
		free(g->cache[i].key);
		free(g->cache[i].val);
		g->cache[i] = (struct gcache_entry){ 0 };
	}
	g->cache_used = g->cache_size = 0;
}

/* The slot of key (hash h): its entry, or the empty slot it would take. */
static struct gcache_entry *
cache_slot(struct grammar *g, uint64_t h, const uint8_t *key, size_t n)
{
	size_t i = h & (g->cache_slots - 1);

	for (;; i = (i + 1) & (g->cache_slots - 1)) {
		struct gcache_entry *e = &g->cache[i];
		if (e->hash == 0 || (e->hash == h && e->keylen == n && memcmp(e->key, key, n) == 0))
			return e;
	}
}

/* The cached value of key into val[vlen]: its count, or -1 when absent. */
static int
cache_get(const struct grammar *cg, const uint8_t *key, size_t n, void *val, size_t vlen)
{
	struct grammar *g = (struct grammar *)cg;	/* the cache is its mutable part */
	struct gcache_entry *e;
	int count = -1;

	pthread_mutex_lock(&g->mu);
	e = g->cache_max ? cache_slot(g, hash_key(key, n), key, n) : NULL;
	if (e != NULL && e->hash != 0 && e->vlen == vlen) {
		memcpy(val, e->val, vlen);
		count = e->count;
	}
	pthread_mutex_unlock(&g->mu);
	return count;
}

/* Keep val[vlen] for key (when memory allows: a cache only). */
static void
cache_put(const struct grammar *cg, const uint8_t *key, size_t n, const void *val,
    size_t vlen, int count)
{
	struct grammar *g = (struct grammar *)cg;
	uint64_t h = hash_key(key, n);
	struct gcache_entry *e;

	pthread_mutex_lock(&g->mu);
	if (g->cache_used >= g->cache_max || g->cache_size + vlen + n > g->cache_bytes)
		cache_clear(g);
	e = g->cache_max ? cache_slot(g, h, key, n) : NULL;
	if (e != NULL && e->hash == 0 && vlen + n <= g->cache_bytes &&
	    (e->key = malloc(n)) != NULL && (e->val = malloc(vlen)) != NULL) {
		memcpy(e->key, key, n);
		memcpy(e->val, val, vlen);
		*e = (struct gcache_entry){ h, e->key, n, count, e->val, vlen };
		g->cache_used++;
		g->cache_size += vlen + n;
	} else if (e != NULL && e->hash == 0) {
		free(e->key);
		e->key = NULL;
	}
	pthread_mutex_unlock(&g->mu);
}

/* The mask of the current state into s->bits: count, or -1 (out of memory). */
static int
mask_cached(struct grammar_state *s)
{
	uint8_t key[KEY_MAX];
	size_t n = state_key(&s->cur, 0, key), vlen = s->g->words * sizeof *s->bits;
	struct dfs c = { s, s->bits, 0, 0, 0, 0, NULL, 0 };

	if ((c.count = cache_get(s->g, key, n, s->bits, vlen)) >= 0)
		return c.count;
	if (mask_walk(&c) != 0)
		return -1;
	cache_put(s->g, key, n, s->bits, vlen, c.count);
	return c.count;
}

/* Each token's change of distance from the current state, into
 * s->delta[n_vocab] (DELTA_NO: not allowed). */
static int
deltas(struct grammar_state *s)
{
	uint8_t key[KEY_MAX];
	size_t n = state_key(&s->cur, 1, key), nv = s->g->v->n_vocab;
	struct dfs c = { s, s->bits, 0, 2, 0, 0, s->delta, sset_dist(s->g, &s->cur) };

	if (s->delta == NULL && (s->delta = c.delta = malloc(nv)) == NULL)
		return -1;
	if (cache_get(s->g, key, n, s->delta, nv) >= 0)
		return 0;
	memset(s->delta, DELTA_NO, nv);
	if (mask_walk(&c) != 0)
		return -1;
	cache_put(s->g, key, n, s->delta, nv, 0);
	return 0;
}

/* The closing mask: tokens after which the document can end within
 * left - 1 tokens (a byte each), else those that bring its end nearest. */
static int
mask_closing(struct grammar_state *s, int left)
{
	int64_t slack = (int64_t)left - 1 - sset_dist(s->g, &s->cur);
	size_t nv = s->g->v->n_vocab;
	int best = DELTA_NO, count = 0;

	if (slack >= DELTA_NO - 1) {	/* far: the walk itself, by distance */
		struct dfs c = { s, s->bits, 0, 1, left > 0 ? left - 1 : 0, 0, NULL, 0 };
		if (mask_walk(&c) != 0)
			return -1;
		return c.count;
	}
	if (deltas(s) != 0)
		return -1;
	memset(s->bits, 0, s->g->words * sizeof *s->bits);
	for (size_t t = 0; t < nv; t++)
		if (s->delta[t] < best)
			best = s->delta[t];
	if (best > slack)
		slack = best;
	for (size_t t = 0; t < nv && best < DELTA_NO; t++)
		if (s->delta[t] <= slack) {
			s->bits[t >> 5] |= 1u << (t & 31);
			count++;
		}
	return count;
}

int
grammar_mask(struct grammar_state *s, uint32_t *bits, int n, int left)
{
	const struct grammar *g = s->g;
	size_t words = ((size_t)n + 31) / 32, w = words < g->words ? words : g->words;
	int count;

	memset(bits, 0, words * sizeof *bits);
	if (s->finished || n <= 0)
		return 0;
	if (left >= 0 && (uint64_t)left <= (uint64_t)sset_dist(g, &s->cur) + g->margin)
		count = mask_closing(s, left);
	else
		count = mask_cached(s);
	if (count < 0)
		return -1;
	memcpy(bits, s->bits, w * sizeof *bits);
	if ((size_t)n < g->v->n_vocab) {
		if (n % 32)
			bits[w - 1] &= (1u << (n % 32)) - 1;
		count = 0;
		for (size_t i = 0; i < w; i++)
			count += __builtin_popcount(bits[i]);
	}
	return count;
}

int
grammar_mask_logits(struct grammar_state *s, float *logits, int n, int left)
{
	size_t words = ((size_t)n + 31) / 32;
	int count;

	if (words > s->n_out) {
		uint32_t *p = realloc(s->out, words * sizeof *p);
		if (p == NULL)
			return -1;
		s->out = p;
		s->n_out = words;
	}
	if ((count = grammar_mask(s, s->out, n, left)) < 0)
		return -1;
	for (size_t i = 0; i < words; i++) {
		uint32_t m = s->out[i];
		float *l = logits + i * 32;
		if (m == 0xffffffffu)
			continue;
		if (m == 0 && (i + 1) * 32 <= (size_t)n) {
			for (int k = 0; k < 32; k++)
				l[k] = -INFINITY;
			continue;
		}
		for (size_t k = 0; k < 32 && i * 32 + k < (size_t)n; k++)
			if (!(m >> k & 1))
				l[k] = -INFINITY;
	}
	return count;
}

/* --- the vocabulary trie ---------------------------------------------------- */

static int
cmp_piece(const void *pa, const void *pb, void *ctx)
{
	const struct grammar_vocab *v = ctx;
	int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
	size_t la = v->off[a + 1] - v->off[a], lb = v->off[b + 1] - v->off[b];
	int r = memcmp(v->bytes + v->off[a], v->bytes + v->off[b], la < lb ? la : lb);

	if (r != 0)
		return r;
	if (la != lb)
		return la < lb ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* Every token's bytes, and which go in the trie (ids[*n], unsorted). */
static int
vocab_tokens(struct grammar_vocab *v, const struct tokenizer *tok, size_t *n)
{
	size_t total = 0, len;

	for (size_t i = 0; i < v->n_vocab; i++)
		if (tokenizer_piece(tok, i, &len) != NULL)
			total += len;
	if ((v->bytes = malloc(total + 1)) == NULL)
		return -1;
	*n = total = 0;
	for (size_t i = 0; i < v->n_vocab; i++) {
		const char *p = tokenizer_piece(tok, i, &len);
		int t = tokenizer_type(tok, i);
		v->off[i] = total;
		if (p == NULL)
			continue;
		memcpy(v->bytes + total, p, len);
		total += len;
		if (len == 0 || t == TOKENIZER_CONTROL || t == TOKENIZER_UNKNOWN ||
		    t == TOKENIZER_UNUSED || is_stop(v, i))
			continue;
		v->in_trie[i] = 1;
		v->ids[(*n)++] = i;
		if (len > v->max_len)
			v->max_len = len;
	}
	v->off[v->n_vocab] = total;
	return 0;
}

/* The preorder trie of the sorted ids[n]. */
static int
vocab_trie(struct grammar_vocab *v, size_t n)
{
	uint32_t *path = malloc((v->max_len + 1) * sizeof *path);
	size_t depth = 0, prev = 0;

	if (path == NULL || (v->vn = calloc(v->off[v->n_vocab] + 1, sizeof *v->vn)) == NULL) {
		free(path);
		return -1;
	}
	path[0] = 0;
	v->n_vn = 1;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = v->bytes + v->off[v->ids[i]];
		size_t len = v->off[v->ids[i] + 1] - v->off[v->ids[i]], l = 0;
		if (i > 0) {
			const uint8_t *q = v->bytes + v->off[v->ids[i - 1]];
			while (l < len && l < prev && p[l] == q[l])
				l++;
		}
		for (; depth > l; depth--)
			v->vn[path[depth]].end = v->n_vn;
		for (; depth < len; depth++) {
			path[depth + 1] = v->n_vn;
			v->vn[v->n_vn++] = (struct vnode){ 0, 0, 0, p[depth] };
		}
		if (v->vn[path[len]].n_tok++ == 0)
			v->vn[path[len]].tok = i;
		prev = len;
	}
	for (; depth > 0; depth--)
		v->vn[path[depth]].end = v->n_vn;
	v->vn[0].end = v->n_vn;
	free(path);
	return 0;
}

struct grammar_vocab *
grammar_vocab_new(const struct tokenizer *tok, const int32_t *stop, int n_stop, char *err)
{
	struct grammar_vocab *v = calloc(1, sizeof *v);
	size_t n;

	if (v == NULL)
		goto oom;
	v->n_vocab = tokenizer_n_vocab(tok);
	v->n_stop = n_stop > 0 ? n_stop : 0;
	if ((v->stop = malloc((v->n_stop + 1) * sizeof *v->stop)) == NULL ||
	    (v->off = malloc((v->n_vocab + 1) * sizeof *v->off)) == NULL ||
	    (v->in_trie = calloc(v->n_vocab + 1, 1)) == NULL ||
	    (v->ids = malloc((v->n_vocab + 1) * sizeof *v->ids)) == NULL)
		goto oom;
	if (v->n_stop > 0)
		memcpy(v->stop, stop, v->n_stop * sizeof *stop);
	if (vocab_tokens(v, tok, &n) != 0)
		goto oom;
	qsort_r(v->ids, n, sizeof *v->ids, cmp_piece, v);
	if (vocab_trie(v, n) != 0)
		goto oom;
	return v;
oom:
	grammar_vocab_free(v);
	util_err(err, "grammar: out of memory");
	return NULL;
}

void
grammar_vocab_free(struct grammar_vocab *v)
{
	if (v == NULL)
		return;
	free(v->vn), free(v->ids), free(v->stop), free(v->off), free(v->bytes), free(v->in_trie);
	free(v);
}

size_t
grammar_vocab_size(const struct grammar_vocab *v)
{
	return v->n_vocab;
}

/* --- grammars ----------------------------------------------------------------- */

void
grammar_defaults(struct grammar_options *o)
{
	o->ws_max = GRAMMAR_WS_DEFAULT;
	o->cache_bytes = (size_t)32 << 20;
}

/* An empty grammar over v with o's options; NULL with err. */
static struct grammar *
grammar_new(const struct grammar_vocab *v, const struct grammar_options *o, char *err)
{
	struct grammar_options def;
	struct grammar *g = calloc(1, sizeof *g);

	if (o == NULL) {
		grammar_defaults(&def);
		o = &def;
	}
	if (g == NULL) {
		util_err(err, "grammar: out of memory");
		return NULL;
	}
	pthread_mutex_init(&g->mu, NULL);
	g->v = v, g->refs = 1;
	g->ws_max = o->ws_max < 0 ? 0 : o->ws_max > 255 ? 255 : o->ws_max;
	g->words = (v->n_vocab + 31) / 32;
	g->cache_bytes = o->cache_bytes;
	g->cache_max = o->cache_bytes / (g->words * 4 + 256);
	for (g->cache_slots = 1; g->cache_slots <= 2 * g->cache_max; g->cache_slots *= 2)
		;
	if ((g->cache = calloc(g->cache_slots, sizeof *g->cache)) == NULL) {
		util_err(err, "grammar: out of memory");
		grammar_free(g);
		return NULL;
	}
	return g;
}

struct grammar *
grammar_compile(const struct json *schema, const struct grammar_vocab *v,
    const struct grammar_options *o, char *err)
{
	struct grammar *g = grammar_new(v, o, err);

	if (g != NULL && grammar_build(g, schema, err) != 0) {
		grammar_free(g);
		return NULL;
	}
	return g;
}

struct grammar *
grammar_compile_calls(const struct grammar_tool *t, int n, const struct grammar_calls *cl,
    const struct grammar_vocab *v, const struct grammar_options *o, int *bad, char *err)
{
	struct grammar *g = grammar_new(v, o, err);

	*bad = -1;
	if (g != NULL && grammar_build_calls(g, t, n, cl, bad, err) != 0) {
		grammar_free(g);
		return NULL;
	}
	return g;
}

struct grammar *
grammar_retain(struct grammar *g)
{
	__atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
	return g;
}

void
grammar_free(struct grammar *g)
{
	if (g == NULL || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	if (g->cache != NULL)
		cache_clear(g);
	free(g->cache);
	pthread_mutex_destroy(&g->mu);
	free(g->nodes), free(g->props), free(g->members), free(g->alts), free(g->below);
	free(g->tn), free(g->dfa), free(g->dfa_dist);
	for (int i = 0; i < g->n_tools; i++)
		free(g->tools[i].name);
	free(g->tools);
	free(g);
}
