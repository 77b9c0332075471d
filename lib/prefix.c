#include "prefix.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

#define SEED 0x243f6a8885a308d3ULL	/* the key a chain starts from */

struct blk {
	uint64_t key;		/* chain hash (masked) */
	uint64_t stamp;		/* last use */
	int	parent;		/* the block before; -1: the first */
	int	depth;		/* tokens [depth block, (depth+1) block) */
	int	children, pins;
	int	used, mtp;	/* mtp: the MTP cache's rows are valid */
	int	next;		/* in its bucket, or the free list */
};

/* A block's part in one backend's memory: a pipeline stage's caches (lib/state's
 * state_part), or the whole state's. */
struct part {
	struct backend *be;
	struct state_config c;
	size_t	per;		/* floats a block */
	float	*arena;		/* [max][per] backend memory */
};

struct prefix {
	struct part *part;	/* [n_part] */
	int	n_part;
	struct prefix_config pc;
	int32_t	*tok;		/* [max][block] host */
	struct blk *b;		/* [max] */
	int	*bucket;	/* [nbucket] heads, -1: empty */
	int	max, nbucket, n, free_head;
	uint64_t clock;
	struct prefix_stats st;
	char	err[UTIL_ERRLEN];
};

static size_t
kv_floats(const struct state_config *c, int block)
{
	return (size_t)block * c->kv_dim;
}

/* Floats of a block: K and V rows of every cache, then the recurrent state. */
static size_t
block_floats(const struct state_config *c, int block)
{
	return 2 * kv_floats(c, block) * c->n_kv + state_rec_floats(c);
}

size_t
prefix_block_bytes(const struct state_config *c, int block)
{
	return block_floats(c, block) * sizeof(float);
}

static int
alloc_meta(struct prefix *p)
{
	if (p->max < 1)
		return -1;
	p->nbucket = 1;
	while (p->nbucket < 2 * p->max)
		p->nbucket *= 2;
	p->b = calloc((size_t)p->max, sizeof *p->b);
	p->tok = malloc((size_t)p->max * p->pc.block * sizeof *p->tok);
	p->bucket = malloc((size_t)p->nbucket * sizeof *p->bucket);
	if (p->b == NULL || p->tok == NULL || p->bucket == NULL)
		return -1;
	for (int i = 0; i < p->nbucket; i++)
		p->bucket[i] = -1;
	for (int i = 0; i < p->max; i++)
		p->b[i].next = i + 1 < p->max ? i + 1 : -1;
	p->free_head = 0;
	return 0;
}

/* Each part's arena of max blocks, on its device. */
static int
arenas(struct prefix *p)
{
	for (int i = 0; i < p->n_part; i++) {
		struct part *q = &p->part[i];

		if (backend_use(q->be) != 0 ||
		    (q->arena = backend_alloc(q->be, q->per * p->max)) == NULL)
			return -1;
	}
	return 0;
}

/* A cache of n parts, part i shaped c[i] in be[i]'s memory (prefix_new's doc). */
static struct prefix *
prefix_open(int n, struct backend **be, const struct state_config *c,
    const struct prefix_config *pc, char *err)
{
	struct prefix *p;
	size_t bb = 0;

	for (int i = 0; i < n; i++)
		if (c[i].n_kv < 0 || c[i].n_rec < 0)
			n = 0;
	if (pc->block < 1 || n < 1) {
		util_err(err, "prefix cache: bad config (block %d)", pc->block);
		return NULL;
	}
	for (int i = 0; i < n; i++)
		bb += prefix_block_bytes(&c[i], pc->block);
	if (bb == 0 || pc->budget / bb < 1 || pc->budget / bb > 1 << 30) {
		util_err(err, "prefix cache: %zu bytes: %s (a block of %d tokens takes %zu)",
		    pc->budget, bb == 0 || pc->budget / bb < 1 ? "holds no block" : "too large",
		    pc->block, bb);
		return NULL;
	}
	if ((p = calloc(1, sizeof *p)) == NULL || (p->part = calloc(n, sizeof *p->part)) == NULL) {
		free(p);
		util_err(err, "prefix cache: out of memory");
		return NULL;
	}
	p->n_part = n, p->pc = *pc;
	p->max = (int)(pc->budget / bb);
	for (int i = 0; i < n; i++)
		p->part[i] = (struct part){ be[i], c[i], block_floats(&c[i], pc->block), NULL };
	if (alloc_meta(p) != 0 || arenas(p) != 0) {
		util_err(err, "prefix cache: no memory for %d blocks of %zu bytes", p->max, bb);
		prefix_free(p);
		return NULL;
	}
	p->st.budget = pc->budget, p->st.block_bytes = bb, p->st.block = pc->block;
	p->st.max_blocks = p->max, p->st.arena = bb * p->max;
	return p;
}

struct prefix *
prefix_new(struct backend *be, const struct state_config *c, const struct prefix_config *pc,
    char *err)
{
	return prefix_open(1, &be, c, pc, err);
}

/* The parts of states shaped like st into be[], c[] (PREFIX_MAX_PARTS); how many. */
static int
parts_of(struct state *st, struct backend **be, struct state_config *c)
{
	int n = state_parts(st) < PREFIX_MAX_PARTS ? state_parts(st) : PREFIX_MAX_PARTS;

	for (int i = 0; i < n; i++)
		be[i] = state_backend(state_part(st, i)), c[i] = *state_config(state_part(st, i));
	return n;
}

size_t
prefix_block_bytes_like(struct state *st, int block)
{
	struct backend *be[PREFIX_MAX_PARTS];
	struct state_config c[PREFIX_MAX_PARTS];
	size_t bb = 0;

	for (int i = 0, n = parts_of(st, be, c); i < n; i++)
		bb += prefix_block_bytes(&c[i], block);
	return bb;
}

struct prefix *
prefix_new_like(struct state *st, const struct prefix_config *pc, char *err)
{
	struct backend *be[PREFIX_MAX_PARTS];
	struct state_config c[PREFIX_MAX_PARTS];
	int n = parts_of(st, be, c);

	if (state_parts(st) > PREFIX_MAX_PARTS) {
		util_err(err, "prefix cache: %d parts (%d at most)", state_parts(st),
		    PREFIX_MAX_PARTS);
		return NULL;
	}
	return prefix_open(n, be, c, pc, err);
}

void
prefix_free(struct prefix *p)
{
	if (p == NULL)
		return;
	for (int i = 0; p->part != NULL && i < p->n_part; i++)
		if (p->part[i].arena != NULL && backend_use(p->part[i].be) == 0)
			backend_mfree(p->part[i].be, p->part[i].arena);
	free(p->part);
	free(p->b), free(p->tok), free(p->bucket);
	free(p);
}

const char *
prefix_errmsg(const struct prefix *p)
{
	return p->err;
}

/* The key of a block of tokens t[block] after a block keyed parent. */
static uint64_t
chain(const struct prefix *p, uint64_t parent, const int32_t *t)
{
	uint64_t h = parent ^ 0x9e3779b97f4a7c15ULL;

	for (int i = 0; i < p->pc.block; i++) {
		h = (h ^ (uint32_t)t[i]) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	h ^= h >> 33, h *= 0xff51afd7ed558ccdULL, h ^= h >> 33;
	return p->pc.hash_mask ? h & p->pc.hash_mask : h;
}

/* Block id's K rows of cache i in part q (its V rows follow them). */
static float *
blk_k(const struct prefix *p, const struct part *q, int id, int i)
{
	return q->arena + q->per * id + 2 * kv_floats(&q->c, p->pc.block) * i;
}

/* Block id's recurrent state in part q. */
static float *
blk_rec(const struct prefix *p, const struct part *q, int id)
{
	return q->arena + q->per * id + 2 * kv_floats(&q->c, p->pc.block) * q->c.n_kv;
}

/* 1 when st's parts are this cache's: as many, each of the shape the cache keeps. */
static int
fits(const struct prefix *p, struct state *st)
{
	if (state_parts(st) != p->n_part)
		return 0;
	for (int i = 0; i < p->n_part; i++) {
		const struct state_config *c = state_config(state_part(st, i)), *k = &p->part[i].c;

		if (c->n_kv != k->n_kv || c->n_rec != k->n_rec ||
		    (c->n_kv && c->kv_dim != k->kv_dim) ||
		    state_rec_floats(c) != state_rec_floats(k) ||
		    state_backend(state_part(st, i)) != p->part[i].be)
			return 0;
	}
	return 1;
}

/* The block keyed key after parent at depth d holding tokens t; -1: none. */
static int
find(const struct prefix *p, uint64_t key, int parent, int d, const int32_t *t)
{
	for (int id = p->bucket[key & (p->nbucket - 1)]; id >= 0; id = p->b[id].next) {
		const struct blk *b = &p->b[id];

		if (b->key == key && b->parent == parent && b->depth == d &&
		    memcmp(p->tok + (size_t)id * p->pc.block, t, p->pc.block * sizeof *t) == 0)
			return id;
	}
	return -1;
}

/* Chain `last` and every block before it: used now. */
static void
touch(struct prefix *p, int last)
{
	p->clock++;
	for (int id = last; id >= 0; id = p->b[id].parent)
		p->b[id].stamp = p->clock;
}

int
prefix_lookup(struct prefix *p, const int32_t *ids, int n, int need_mtp, int *last)
{
	int prev = -1, most = n > 0 ? (n - 1) / p->pc.block : 0;
	uint64_t key = SEED;

	p->st.lookups++;
	for (int d = 0; d < most; d++) {
		int id;

		key = chain(p, key, ids + (size_t)d * p->pc.block);
		if ((id = find(p, key, prev, d, ids + (size_t)d * p->pc.block)) < 0 ||
		    (need_mtp && !p->b[id].mtp))
			break;
		prev = id;
	}
	*last = prev;
	if (prev < 0)
		return 0;
	touch(p, prev);
	p->st.hits++;
	p->st.hit_tokens += (long)(p->b[prev].depth + 1) * p->pc.block;
	return (p->b[prev].depth + 1) * p->pc.block;
}

/* Copy block id's rows of part q to (store) or from (restore) st's rows at depth (st:
 * the part's state). */
static int
move_rows(struct prefix *p, const struct part *q, int id, struct state *st, int store)
{
	size_t n = kv_floats(&q->c, p->pc.block), off = n * p->b[id].depth;

	for (int i = 0; i < q->c.n_kv; i++) {
		float *k = blk_k(p, q, id, i), *v = k + n;

		if ((store ? backend_copy(q->be, k, state_k(st, i) + off, n) ||
		    backend_copy(q->be, v, state_v(st, i) + off, n) :
		    backend_copy(q->be, state_k(st, i) + off, k, n) ||
		    backend_copy(q->be, state_v(st, i) + off, v, n)) != 0)
			return util_err(p->err, "prefix cache: %s", backend_errmsg(q->be));
	}
	return 0;
}

/* Chain `last` into part i of st: its blocks' rows and the recurrent state after it. */
static int
restore_part(struct prefix *p, int i, int last, struct state *st)
{
	const struct part *q = &p->part[i];
	struct state *ps = state_part(st, i);

	if (backend_use(q->be) != 0)
		return util_err(p->err, "prefix cache: %s", backend_errmsg(q->be));
	for (int id = last; id >= 0; id = p->b[id].parent)
		if (move_rows(p, q, id, ps, 0) != 0)
			return -1;
	if (state_rec_load(ps, blk_rec(p, q, last)) != 0)
		return util_err(p->err, "prefix cache: %s", state_errmsg(ps));
	return 0;
}

int
prefix_restore(struct prefix *p, int last, struct state *st)
{
	if (last < 0 || last >= p->max || !p->b[last].used ||
	    (p->b[last].depth + 1) * p->pc.block > state_config(st)->n_ctx)
		return util_err(p->err, "prefix cache: no block %d to restore", last);
	if (!fits(p, st))
		return util_err(p->err, "prefix cache: a state of another shape");
	for (int i = 0; i < p->n_part; i++)
		if (restore_part(p, i, last, st) != 0)
			return -1;
	if (state_seek(st, (p->b[last].depth + 1) * p->pc.block) != 0)
		return util_err(p->err, "prefix cache: %s", state_errmsg(st));
	return 0;
}

/* Unlink block id from its bucket and free it. */
static void
evict(struct prefix *p, int id)
{
	struct blk *b = &p->b[id];

	for (int *l = &p->bucket[b->key & (p->nbucket - 1)]; *l >= 0; l = &p->b[*l].next)
		if (*l == id) {
			*l = b->next;
			break;
		}
	if (b->parent >= 0)
		p->b[b->parent].children--;
	b->used = 0;
	b->next = p->free_head, p->free_head = id;
	p->n--;
	p->st.evictions++;
}

/* A free block, evicting the least recently used unpinned leaf but
 * `keep`; -1 when none. */
static int
take(struct prefix *p, int keep)
{
	int id, lru = -1;

	if (p->free_head < 0) {
		for (int i = 0; i < p->max; i++) {
			const struct blk *b = &p->b[i];

			if (b->used && b->children == 0 && b->pins == 0 && i != keep &&
			    (lru < 0 || b->stamp < p->b[lru].stamp))
				lru = i;
		}
		if (lru < 0)
			return -1;
		evict(p, lru);
	}
	id = p->free_head;
	p->free_head = p->b[id].next;
	return id;
}

/* Fill in block id from st: every part's rows and, new (rec), its recurrent state. */
static int
fill(struct prefix *p, int id, struct state *st, int rec)
{
	for (int i = 0; i < p->n_part; i++) {
		const struct part *q = &p->part[i];
		struct state *ps = state_part(st, i);

		if (backend_use(q->be) != 0)
			return util_err(p->err, "prefix cache: %s", backend_errmsg(q->be));
		if (move_rows(p, q, id, ps, 1) != 0)
			return -1;
		if (rec && state_rec_save(ps, blk_rec(p, q, id)) != 0)
			return util_err(p->err, "prefix cache: %s", state_errmsg(ps));
	}
	return 0;
}

int
prefix_insert(struct prefix *p, int parent, const int32_t *ids, int end, struct state *st,
    int mtp)
{
	int B = p->pc.block, d = end / B - 1, id;
	const int32_t *t = ids + (size_t)end - B;
	uint64_t key;

	if (!fits(p, st))
		return util_err(p->err, "prefix cache: a state of another shape");
	if (end < B || end % B != 0 || end > state_config(st)->n_ctx || state_pos(st) != end ||
	    (d == 0) != (parent < 0) || (parent >= 0 && (parent >= p->max ||
	    !p->b[parent].used || p->b[parent].depth != d - 1)))
		return util_err(p->err, "prefix cache: no block ends at %d after block %d", end,
		    parent);
	key = chain(p, parent >= 0 ? p->b[parent].key : SEED, t);
	if ((id = find(p, key, parent, d, t)) >= 0) {
		if (mtp && !p->b[id].mtp && fill(p, id, st, 0) != 0)
			return -1;
		p->b[id].mtp |= mtp;
		touch(p, id);
		return id;
	}
	if ((id = take(p, parent)) < 0)
		return util_err(p->err, "prefix cache: full (%d blocks, each in use)", p->max);
	p->b[id] = (struct blk){ .key = key, .parent = parent, .depth = d, .used = 1, .mtp = mtp };
	memcpy(p->tok + (size_t)id * B, t, B * sizeof *t);
	if (fill(p, id, st, 1) != 0) {
		p->b[id].used = 0, p->b[id].next = p->free_head, p->free_head = id;
		return -1;
	}
	p->b[id].next = p->bucket[key & (p->nbucket - 1)];
	p->bucket[key & (p->nbucket - 1)] = id;
	if (parent >= 0)
		p->b[parent].children++;
	p->n++;
	p->st.inserts++;
	touch(p, id);
	return id;
}

void
prefix_pin(struct prefix *p, int id)
{
	if (id >= 0 && id < p->max)
		p->b[id].pins++;
}

void
prefix_unpin(struct prefix *p, int id)
{
	if (id >= 0 && id < p->max && p->b[id].pins > 0)
		p->b[id].pins--;
}

void
prefix_stats(const struct prefix *p, struct prefix_stats *s)
{
	*s = p->st;
	s->blocks = p->n;
	s->bytes = p->st.block_bytes * p->n;
}
