#include "prefix.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

#define SEED 0x243f6a8885a308d3ULL	/* the key a chain starts from */

struct blk {
	uint64_t key;		/* chain hash (masked) */
	uint64_t stamp;		/* last use (of a chain through it) */
	uint64_t sstamp;	/* its snapshot's last use (stored, or a lookup's end) */
	int	parent;		/* the block before; -1: the first */
	int	depth;		/* tokens [depth block, (depth+1) block) */
	int	children, pins;
	int	used, mtp;	/* mtp: the MTP cache's rows are valid */
	int	snap;		/* its snapshot (the recurrent state after it); -1: none, no
				 * resuming at its end (stored PREFIX_OPEN, or its snapshot
				 * evicted) */
	int	next;		/* in its bucket, or the free list */
	struct prefix_tag tag;
};

/* A block's part in one backend's memory: a pipeline stage's caches (lib/state's
 * state_part), or the whole state's. */
struct part {
	struct backend *be;
	struct state_config c;
	int	*w;		/* [n_kv] each cache's row width */
	size_t	*koff;		/* [n_kv + 1] floats before cache i's K rows in a block
				 * (then its V rows; koff[n_kv]: a block's floats) */
	size_t	per;		/* floats a block */
	size_t	rec;		/* floats a snapshot */
	float	*arena;		/* [max][per] backend memory */
	float	*sarena;	/* [max_snap][rec] backend memory (NULL when rec is 0) */
};

struct prefix {
	struct part *part;	/* [n_part] */
	int	n_part;
	struct prefix_config pc;
	int32_t	*tok;		/* [max][block] host */
	struct blk *b;		/* [max] */
	int	*bucket;	/* [nbucket] heads, -1: empty */
	int	max, nbucket, n, free_head;
	int	*sown;		/* [max_snap] the block a snapshot slot is, -1: free */
	int	max_snap, n_snap;
	uint64_t clock;
	struct prefix_stats st;
	char	err[UTIL_ERRLEN];
};

/* Cache i's row width: kv_w[i], or (NULL) the state's kv_dim. */
static int
width(const struct state_config *c, const int *kv_w, int i)
{
	return kv_w != NULL ? kv_w[i] : c->kv_dim;
}

/* Positions of a block that cache i keeps: all, or a ring's last ring of them. */
static int
kept(const struct state_config *c, int block, int i)
{
	return state_is_ring(c, i) && c->ring < block ? c->ring : block;
}

/* Floats of a block's rows: K then V rows of every cache (the positions it keeps). */
static size_t
row_floats(const struct state_config *c, const int *kv_w, int block)
{
	size_t n = 0;

	for (int i = 0; i < c->n_kv; i++)
		n += 2 * (size_t)kept(c, block, i) * width(c, kv_w, i);
	return n;
}

/* The blocks and snapshots of a unit of the budget (prefix.h): stride
 * blocks and two snapshots, one and one for a stride of 1 or less. */
static void
unit(int stride, int *nb, int *ns)
{
	*nb = stride > 1 ? stride : 1, *ns = stride > 1 ? 2 : 1;
}

size_t
prefix_unit_bytes(const struct state_config *c, const int *kv_w, int block, int stride)
{
	int nb, ns;

	unit(stride, &nb, &ns);
	return (nb * row_floats(c, kv_w, block) + ns * state_rec_floats(c)) * sizeof(float);
}

size_t
prefix_block_bytes(const struct state_config *c, const int *kv_w, int block)
{
	return prefix_unit_bytes(c, kv_w, block, 1);
}

/* Part q's widths (kv_w's or uniform) and the block's offsets. */
static int
layout(struct part *q, const int *kv_w, int block)
{
	int n = q->c.n_kv;

	q->w = malloc((n + 1) * sizeof *q->w);
	q->koff = malloc((n + 1) * sizeof *q->koff);
	if (q->w == NULL || q->koff == NULL)
		return -1;
	q->koff[0] = 0;
	for (int i = 0; i < n; i++) {
		q->w[i] = width(&q->c, kv_w, i);
		q->koff[i + 1] = q->koff[i] + 2 * (size_t)kept(&q->c, block, i) * q->w[i];
	}
	q->per = q->koff[n], q->rec = state_rec_floats(&q->c);
	return 0;
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
	p->sown = malloc((size_t)p->max_snap * sizeof *p->sown);
	if (p->b == NULL || p->tok == NULL || p->bucket == NULL || p->sown == NULL)
		return -1;
	for (int i = 0; i < p->max_snap; i++)
		p->sown[i] = -1;
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
		    (q->per > 0 && (q->arena = backend_alloc(q->be, q->per * p->max)) == NULL) ||
		    (q->rec > 0 && (q->sarena = backend_alloc(q->be, q->rec * p->max_snap)) == NULL))
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
	size_t bb = 0, rb = 0, sb = 0, units;
	int nw = 0, ub, us;

	for (int i = 0; i < n; i++)
		if (c[i].n_kv < 0 || c[i].n_rec < 0 || c[i].n_ring < 0 || c[i].n_ring > c[i].n_kv ||
		    (c[i].n_ring > 0 && c[i].ring < 1))
			n = 0;
	if (pc->block < 1 || n < 1) {
		util_err(err, "prefix cache: bad config (block %d)", pc->block);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		const int *w = pc->kv_w != NULL ? pc->kv_w + nw : NULL;

		for (int j = 0; w != NULL && j < c[i].n_kv; j++)
			if (w[j] < 1 || w[j] > c[i].kv_dim) {
				util_err(err, "prefix cache: cache %d: rows of %d, not 1..%d", nw + j,
				    w[j], c[i].kv_dim);
				return NULL;
			}
		bb += prefix_unit_bytes(&c[i], w, pc->block, pc->stride);
		rb += row_floats(&c[i], w, pc->block) * sizeof(float);
		sb += state_rec_floats(&c[i]) * sizeof(float);
		nw += c[i].n_kv;
	}
	unit(pc->stride, &ub, &us);
	units = bb > 0 ? pc->budget / bb : 0;
	if (bb == 0 || units < 1 || units > (1 << 30) / ub) {
		util_err(err, "prefix cache: %zu bytes: %s (%d blocks of %d tokens and %d snapshots "
		    "take %zu)", pc->budget, units < 1 ? "holds no block" : "too large", ub,
		    pc->block, us, bb);
		return NULL;
	}
	if ((p = calloc(1, sizeof *p)) == NULL || (p->part = calloc(n, sizeof *p->part)) == NULL) {
		free(p);
		util_err(err, "prefix cache: out of memory");
		return NULL;
	}
	p->n_part = n, p->pc = *pc, p->pc.kv_w = NULL;	/* (copied into the parts) */
	p->max = (int)units * ub;
	p->max_snap = sb == 0 ? p->max : (int)units * us;	/* (free ones: one a block) */
	nw = 0;
	for (int i = 0; i < n; i++) {
		p->part[i] = (struct part){ .be = be[i], .c = c[i] };
		if (layout(&p->part[i], pc->kv_w != NULL ? pc->kv_w + nw : NULL, pc->block) != 0)
			n = -1;
		nw += c[i].n_kv;
	}
	if (n < 0 || alloc_meta(p) != 0 || arenas(p) != 0) {
		util_err(err, "prefix cache: no memory for %d blocks of %zu bytes and %d snapshots "
		    "of %zu", p->max, rb, p->max_snap, sb);
		prefix_free(p);
		return NULL;
	}
	p->st.budget = pc->budget, p->st.block_bytes = rb, p->st.snap_bytes = sb;
	p->st.block = pc->block, p->st.max_blocks = p->max, p->st.max_snaps = p->max_snap;
	p->st.arena = rb * p->max + sb * p->max_snap;
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
prefix_unit_bytes_like(struct state *st, const int *kv_w, int block, int stride)
{
	struct backend *be[PREFIX_MAX_PARTS];
	struct state_config c[PREFIX_MAX_PARTS];
	size_t bb = 0;

	for (int i = 0, n = parts_of(st, be, c), nw = 0; i < n; nw += c[i].n_kv, i++)
		bb += prefix_unit_bytes(&c[i], kv_w != NULL ? kv_w + nw : NULL, block, stride);
	return bb;
}

size_t
prefix_block_bytes_like(struct state *st, const int *kv_w, int block)
{
	return prefix_unit_bytes_like(st, kv_w, block, 1);
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
	for (int i = 0; p->part != NULL && i < p->n_part; i++) {
		if ((p->part[i].arena != NULL || p->part[i].sarena != NULL) &&
		    backend_use(p->part[i].be) == 0) {
			if (p->part[i].arena != NULL)
				backend_mfree(p->part[i].be, p->part[i].arena);
			if (p->part[i].sarena != NULL)
				backend_mfree(p->part[i].be, p->part[i].sarena);
		}
		free(p->part[i].w), free(p->part[i].koff);
	}
	free(p->part);
	free(p->b), free(p->tok), free(p->bucket), free(p->sown);
	free(p);
}

const char *
prefix_errmsg(const struct prefix *p)
{
	return p->err;
}

static const struct prefix_tag zero_tag;

/* The key of a block of tokens t[block] tagged tag after a block keyed parent. */
static uint64_t
chain(const struct prefix *p, uint64_t parent, const int32_t *t, const struct prefix_tag *tag)
{
	uint64_t h = parent ^ 0x9e3779b97f4a7c15ULL;

	for (int i = 0; i < p->pc.block; i++) {
		h = (h ^ (uint32_t)t[i]) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	for (int i = 0; tag != &zero_tag && i < (int)sizeof tag->b; i++)
		h = (h ^ tag->b[i]) * 0x100000001b3ULL;
	h ^= h >> 33, h *= 0xff51afd7ed558ccdULL, h ^= h >> 33;
	return p->pc.hash_mask ? h & p->pc.hash_mask : h;
}

/* Block id's K rows of cache i in part q (its V rows follow them). */
static float *
blk_k(const struct prefix *p, const struct part *q, int id, int i)
{
	return q->arena + q->per * id + q->koff[i];
}

/* Block id's snapshot (its recurrent state) in part q. */
static float *
blk_rec(const struct prefix *p, const struct part *q, int id)
{
	return q->rec > 0 ? q->sarena + q->rec * p->b[id].snap : NULL;
}

/* 1 when st's parts are this cache's: as many, each of the shape the cache keeps. */
static int
fits(const struct prefix *p, struct state *st)
{
	if (state_parts(st) != p->n_part)
		return 0;
	for (int i = 0; i < p->n_part; i++) {
		const struct state_config *c = state_config(state_part(st, i)), *k = &p->part[i].c;

		if (c->n_kv != k->n_kv || c->n_rec != k->n_rec || c->n_ring != k->n_ring ||
		    (c->n_ring > 0 && c->ring != k->ring) ||
		    (c->n_kv && c->kv_dim != k->kv_dim) ||
		    state_rec_floats(c) != state_rec_floats(k) ||
		    state_backend(state_part(st, i)) != p->part[i].be)
			return 0;
	}
	return 1;
}

/* The block keyed key after parent at depth d holding tokens t, tagged tag; -1: none. */
static int
find(const struct prefix *p, uint64_t key, int parent, int d, const int32_t *t,
    const struct prefix_tag *tag)
{
	for (int id = p->bucket[key & (p->nbucket - 1)]; id >= 0; id = p->b[id].next) {
		const struct blk *b = &p->b[id];

		if (b->key == key && b->parent == parent && b->depth == d &&
		    memcmp(b->tag.b, tag->b, sizeof tag->b) == 0 &&
		    memcmp(p->tok + (size_t)id * p->pc.block, t, p->pc.block * sizeof *t) == 0)
			return id;
	}
	return -1;
}

/* Block d's tag of tags (NULL: none); a zero tag is zero_tag itself. */
static const struct prefix_tag *
tag_at(const struct prefix_tag *tags, int d)
{
	if (tags == NULL || memcmp(tags[d].b, zero_tag.b, sizeof zero_tag.b) == 0)
		return &zero_tag;
	return &tags[d];
}

/* Chain `last` and every block before it: used now. */
static void
touch(struct prefix *p, int last)
{
	p->clock++;
	for (int id = last; id >= 0; id = p->b[id].parent)
		p->b[id].stamp = p->clock;
}

/* The longest chain of blocks that is a prefix of ids (block d tagged tags[d]), of
 * `most` blocks at most, every block holding the MTP rows with need_mtp; its last
 * block in *last (-1: none) and, with snap, the last block of it that has a snapshot
 * (-1: none) instead. */
static void
walk(struct prefix *p, const int32_t *ids, const struct prefix_tag *tags, int most,
    int need_mtp, int snap, int *last)
{
	int prev = -1, at = -1;
	uint64_t key = SEED;

	for (int d = 0; d < most; d++) {
		const int32_t *t = ids + (size_t)d * p->pc.block;
		const struct prefix_tag *tag = tag_at(tags, d);
		int id;

		key = chain(p, key, t, tag);
		if ((id = find(p, key, prev, d, t, tag)) < 0 || (need_mtp && !p->b[id].mtp))
			break;
		prev = id;
		if (!snap || p->b[id].snap >= 0)
			at = id;	/* a chain may end here */
	}
	*last = at;
}

int
prefix_lookup(struct prefix *p, const int32_t *ids, const struct prefix_tag *tags, int n,
    int need_mtp, int *last)
{
	p->st.lookups++;
	walk(p, ids, tags, n > 0 ? (n - 1) / p->pc.block : 0, need_mtp, 1, last);
	if (*last < 0)
		return 0;
	touch(p, *last);
	p->b[*last].sstamp = p->clock;
	p->st.hits++;
	p->st.hit_tokens += (long)(p->b[*last].depth + 1) * p->pc.block;
	return (p->b[*last].depth + 1) * p->pc.block;
}

int
prefix_chain(struct prefix *p, const int32_t *ids, const struct prefix_tag *tags, int n,
    int *last)
{
	walk(p, ids, tags, n > 0 ? n / p->pc.block : 0, 0, 0, last);
	if (*last < 0)
		return 0;
	touch(p, *last);
	return (p->b[*last].depth + 1) * p->pc.block;
}

/*
 * Copy positions [from, to) of cache i between block id's part q (whose
 * kept rows end at the block's end) and st's rows of them (st: the
 * part's state; a ring's wrap split in two).
 */
static int
move_range(struct prefix *p, const struct part *q, int id, int i, struct state *st, int from,
    int to, int store)
{
	const struct state_config *c = &q->c;
	int end = (p->b[id].depth + 1) * p->pc.block, n0 = kept(c, p->pc.block, i);
	size_t w = q->w[i];
	float *k = blk_k(p, q, id, i) + (size_t)(from - (end - n0)) * w, *v = k + n0 * w;

	for (int pos = from, n; pos < to; pos += n, k += n * w, v += n * w) {
		size_t r = (size_t)state_kv_row(c, i, pos) * w;
		float *sk = state_k(st, i) + r, *sv = state_v(st, i) + r;

		n = state_kv_rows(c, i, pos, to - pos);
		if ((store ? backend_copy(q->be, k, sk, n * w) || backend_copy(q->be, v, sv, n * w) :
		    backend_copy(q->be, sk, k, n * w) || backend_copy(q->be, sv, v, n * w)) != 0)
			return util_err(p->err, "prefix cache: %s", backend_errmsg(q->be));
	}
	return 0;
}

/* Copy block id's kept rows of every cache of part q to (store) or from (restore) st's
 * rows (st: the part's state). */
static int
move_rows(struct prefix *p, const struct part *q, int id, struct state *st, int store)
{
	int end = (p->b[id].depth + 1) * p->pc.block;

	for (int i = 0; i < q->c.n_kv; i++)
		if (move_range(p, q, id, i, st, end - kept(&q->c, p->pc.block, i), end, store) != 0)
			return -1;
	return 0;
}

/*
 * Restore the rows of chain `last` into part q's state st: every block's
 * rows of the caches that keep every position; of a ring, the positions
 * of its last ring before the chain's end, from the blocks that hold them.
 */
static int
restore_rows(struct prefix *p, const struct part *q, int last, struct state *st)
{
	const struct state_config *c = &q->c;
	int end = (p->b[last].depth + 1) * p->pc.block;

	for (int id = last; id >= 0; id = p->b[id].parent)
		for (int i = 0; i < c->n_kv; i++) {
			int e = (p->b[id].depth + 1) * p->pc.block, from = e - kept(c, p->pc.block, i);

			if (state_is_ring(c, i) && from < end - c->ring)
				from = end - c->ring;
			if (from < e && move_range(p, q, id, i, st, from, e, 0) != 0)
				return -1;
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
	if (restore_rows(p, q, last, ps) != 0)
		return -1;
	if (state_rec_load(ps, blk_rec(p, q, last)) != 0)
		return util_err(p->err, "prefix cache: %s", state_errmsg(ps));
	return 0;
}

int
prefix_restore(struct prefix *p, int last, struct state *st)
{
	if (last < 0 || last >= p->max || !p->b[last].used || p->b[last].snap < 0 ||
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

/* Block id's snapshot, if any, freed: no resuming at its end. */
static void
drop_snap(struct prefix *p, int id)
{
	if (p->b[id].snap < 0)
		return;
	p->sown[p->b[id].snap] = -1;
	p->b[id].snap = -1;
	p->n_snap--;
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
	drop_snap(p, id);
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

/* A snapshot slot for block id: a free one, else the least recently used
 * snapshot (stored, or where a lookup ended: a chain passing over it does
 * not use it) of a block that no one pinned but id's (that block stays,
 * its rows only); -1 when none. */
static int
take_snap(struct prefix *p, int id)
{
	int lru = -1, k;

	for (k = 0; k < p->max_snap && p->sown[k] >= 0; k++)
		;
	if (k == p->max_snap) {
		for (int i = 0; i < p->max_snap; i++) {
			const struct blk *b = &p->b[p->sown[i]];

			if (b->pins == 0 && p->sown[i] != id &&
			    (lru < 0 || b->sstamp < p->b[p->sown[lru]].sstamp))
				lru = i;
		}
		if (lru < 0)
			return -1;
		drop_snap(p, p->sown[lru]);
		p->st.snap_evictions++;
		k = lru;
	}
	p->sown[k] = id, p->b[id].snap = k;
	p->b[id].sstamp = ++p->clock;
	p->n_snap++;
	return k;
}

/* Copy st's rows into block id (every part's). */
static int
fill(struct prefix *p, int id, struct state *st)
{
	for (int i = 0; i < p->n_part; i++) {
		const struct part *q = &p->part[i];
		struct state *ps = state_part(st, i);

		if (backend_use(q->be) != 0)
			return util_err(p->err, "prefix cache: %s", backend_errmsg(q->be));
		if (move_rows(p, q, id, ps, 1) != 0)
			return -1;
	}
	return 0;
}

/* Save st's recurrent state (every part's) as block id's snapshot, in a slot
 * taken for it (take_snap); none to take: the block stays without one (0). */
static int
save_rec(struct prefix *p, int id, struct state *st)
{
	if (take_snap(p, id) < 0)
		return 0;
	for (int i = 0; i < p->n_part; i++) {
		const struct part *q = &p->part[i];
		struct state *ps = state_part(st, i);

		if (backend_use(q->be) != 0 || state_rec_save(ps, blk_rec(p, q, id)) != 0) {
			drop_snap(p, id);
			return util_err(p->err, "prefix cache: %s", backend_use(q->be) != 0 ?
			    backend_errmsg(q->be) : state_errmsg(ps));
		}
	}
	return 0;
}

/* Block id, there already, stored again with flags: its MTP rows filled in, and
 * stored not open, a snapshot (its end is where st is: resumable). */
static int
refill(struct prefix *p, int id, struct state *st, int flags)
{
	struct blk *b = &p->b[id];
	int mtp = (flags & PREFIX_MTP) != 0;

	if (mtp && !b->mtp && fill(p, id, st) != 0)
		return -1;
	b->mtp |= mtp;
	touch(p, id);
	if (b->snap < 0 && !(flags & PREFIX_OPEN) && save_rec(p, id, st) != 0)
		return -1;
	return id;
}

int
prefix_insert(struct prefix *p, int parent, const int32_t *ids, const struct prefix_tag *tag,
    int end, struct state *st, int flags)
{
	int B = p->pc.block, d = end / B - 1, id, open = (flags & PREFIX_OPEN) != 0;
	const struct state_config *sc = state_config(st);
	const int32_t *t = ids + (size_t)end - B;
	const struct prefix_tag *tg = tag_at(tag, 0);
	uint64_t key;

	if (!fits(p, st))
		return util_err(p->err, "prefix cache: a state of another shape");
	if (end < B || end % B != 0 || end > sc->n_ctx ||
	    (open ? state_pos(st) < end : state_pos(st) != end) ||
	    (d == 0) != (parent < 0) || (parent >= 0 && (parent >= p->max ||
	    !p->b[parent].used || p->b[parent].depth != d - 1)))
		return util_err(p->err, "prefix cache: no block ends at %d after block %d", end,
		    parent);
	key = chain(p, parent >= 0 ? p->b[parent].key : SEED, t, tg);
	if ((id = find(p, key, parent, d, t, tg)) >= 0)
		return refill(p, id, st, flags);
	if (sc->n_ring > 0 && state_pos(st) - sc->ring > end - kept(sc, B, sc->n_kv - 1))
		return util_err(p->err, "prefix cache: the block that ends at %d: its rows left "
		    "the rings (at %d, rings of %d rows)", end, state_pos(st), sc->ring);
	if ((id = take(p, parent)) < 0)
		return util_err(p->err, "prefix cache: full (%d blocks, each in use)", p->max);
	p->b[id] = (struct blk){ .key = key, .parent = parent, .depth = d, .used = 1,
	    .mtp = (flags & PREFIX_MTP) != 0, .snap = -1, .tag = *tg };
	memcpy(p->tok + (size_t)id * B, t, B * sizeof *t);
	if (fill(p, id, st) != 0) {
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
	if (!open && save_rec(p, id, st) != 0)
		return -1;	/* (the block stays, its rows only) */
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
	s->blocks = p->n, s->snaps = p->n_snap;
	s->bytes = p->st.block_bytes * p->n + p->st.snap_bytes * p->n_snap;
}
