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

struct prefix {
	struct backend *be;
	struct state_config c;
	struct prefix_config pc;
	size_t	per;		/* floats a block */
	float	*arena;		/* [max][per] backend memory */
	int32_t	*tok;		/* [max][block] host */
	struct blk *b;		/* [max] */
	int	*bucket;	/* [nbucket] heads, -1: empty */
	int	max, nbucket, n, free_head;
	uint64_t clock;
	struct prefix_stats st;
	char	err[UTIL_ERRLEN];
};

/* Positions of a block that cache i keeps: all, or a ring's last ring of them. */
static int
kept(const struct state_config *c, int block, int i)
{
	return state_is_ring(c, i) && c->ring < block ? c->ring : block;
}

/* Floats of a block: K then V rows of every cache (the positions it keeps), then the
 * recurrent state. */
static size_t
block_floats(const struct state_config *c, int block)
{
	size_t n = 0;

	for (int i = 0; i < c->n_kv; i++)
		n += 2 * (size_t)kept(c, block, i) * c->kv_dim;
	return n + state_rec_floats(c);
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

struct prefix *
prefix_new(struct backend *be, const struct state_config *c, const struct prefix_config *pc,
    char *err)
{
	struct prefix *p;
	size_t bb;

	if (pc->block < 1 || c->n_kv < 0 || c->n_rec < 0 || c->n_ring < 0 || c->n_ring > c->n_kv ||
	    (c->n_ring > 0 && c->ring < 1)) {
		util_err(err, "prefix cache: bad config (block %d)", pc->block);
		return NULL;
	}
	bb = prefix_block_bytes(c, pc->block);
	if (pc->budget / bb < 1 || pc->budget / bb > 1 << 30) {
		util_err(err, "prefix cache: %zu bytes: %s (a block of %d tokens takes %zu)",
		    pc->budget, pc->budget / bb < 1 ? "holds no block" : "too large", pc->block, bb);
		return NULL;
	}
	if ((p = calloc(1, sizeof *p)) == NULL) {
		util_err(err, "prefix cache: out of memory");
		return NULL;
	}
	p->be = be, p->c = *c, p->pc = *pc;
	p->per = block_floats(c, pc->block);
	p->max = (int)(pc->budget / bb);
	if (alloc_meta(p) != 0 || (p->arena = backend_alloc(be, p->per * p->max)) == NULL) {
		util_err(err, "prefix cache: no memory for %d blocks of %zu bytes", p->max, bb);
		prefix_free(p);
		return NULL;
	}
	p->st.budget = pc->budget, p->st.block_bytes = bb, p->st.block = pc->block;
	p->st.max_blocks = p->max, p->st.arena = bb * p->max;
	return p;
}

void
prefix_free(struct prefix *p)
{
	if (p == NULL)
		return;
	backend_mfree(p->be, p->arena);
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

/* Block id's K rows of cache i; its V rows follow them. */
static float *
blk_k(struct prefix *p, int id, int i)
{
	float *k = p->arena + p->per * id;

	for (int j = 0; j < i; j++)
		k += 2 * (size_t)kept(&p->c, p->pc.block, j) * p->c.kv_dim;
	return k;
}

static float *
blk_rec(struct prefix *p, int id)
{
	return blk_k(p, id, p->c.n_kv);
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

/*
 * Copy positions [from, to) of cache i between block id (whose kept rows
 * end at its end) and st's rows of them (a ring's wrap split in two).
 */
static int
move_range(struct prefix *p, int id, int i, struct state *st, int from, int to, int store)
{
	const struct state_config *c = &p->c;
	int end = (p->b[id].depth + 1) * p->pc.block, n0 = kept(c, p->pc.block, i);
	size_t w = c->kv_dim;
	float *k = blk_k(p, id, i) + (size_t)(from - (end - n0)) * w, *v = k + n0 * w;

	for (int pos = from, n; pos < to; pos += n, k += n * w, v += n * w) {
		size_t r = (size_t)state_kv_row(c, i, pos) * w;
		float *sk = state_k(st, i) + r, *sv = state_v(st, i) + r;

		n = state_kv_rows(c, i, pos, to - pos);
		if ((store ? backend_copy(p->be, k, sk, n * w) || backend_copy(p->be, v, sv, n * w) :
		    backend_copy(p->be, sk, k, n * w) || backend_copy(p->be, sv, v, n * w)) != 0)
			return util_err(p->err, "prefix cache: %s", backend_errmsg(p->be));
	}
	return 0;
}

/* Copy block id's kept rows of every cache to (store) or from (restore) st's rows. */
static int
move_rows(struct prefix *p, int id, struct state *st, int store)
{
	int end = (p->b[id].depth + 1) * p->pc.block;

	for (int i = 0; i < p->c.n_kv; i++)
		if (move_range(p, id, i, st, end - kept(&p->c, p->pc.block, i), end, store) != 0)
			return -1;
	return 0;
}

/*
 * Restore the rows of chain `last` into st: every block's rows of the
 * caches that keep every position; of a ring, the positions of its last
 * ring before the chain's end, from the blocks that hold them.
 */
static int
restore_rows(struct prefix *p, int last, struct state *st)
{
	const struct state_config *c = &p->c;
	int end = (p->b[last].depth + 1) * p->pc.block;

	for (int id = last; id >= 0; id = p->b[id].parent)
		for (int i = 0; i < c->n_kv; i++) {
			int e = (p->b[id].depth + 1) * p->pc.block, from = e - kept(c, p->pc.block, i);

			if (state_is_ring(c, i) && from < end - c->ring)
				from = end - c->ring;
			if (from < e && move_range(p, id, i, st, from, e, 0) != 0)
				return -1;
		}
	return 0;
}

int
prefix_restore(struct prefix *p, int last, struct state *st)
{
	if (last < 0 || last >= p->max || !p->b[last].used ||
	    (p->b[last].depth + 1) * p->pc.block > state_config(st)->n_ctx)
		return util_err(p->err, "prefix cache: no block %d to restore", last);
	if (restore_rows(p, last, st) != 0)
		return -1;
	if (state_rec_load(st, blk_rec(p, last)) != 0 ||
	    state_seek(st, (p->b[last].depth + 1) * p->pc.block) != 0)
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

/* Fill in block id from st (its rows and, new, its recurrent state). */
static int
fill(struct prefix *p, int id, struct state *st, int rec)
{
	if (move_rows(p, id, st, 1) != 0)
		return -1;
	if (rec && state_rec_save(st, blk_rec(p, id)) != 0)
		return util_err(p->err, "prefix cache: %s", state_errmsg(st));
	return 0;
}

int
prefix_insert(struct prefix *p, int parent, const int32_t *ids, int end, struct state *st,
    int mtp)
{
	int B = p->pc.block, d = end / B - 1, id;
	const int32_t *t = ids + (size_t)end - B;
	uint64_t key;

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
