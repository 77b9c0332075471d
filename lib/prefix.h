/*
 * prefix: a token-level prefix cache for one model's sequences, within a
 * byte budget of backend memory.
 *
 * A block holds `block` tokens at positions [d block, (d+1) block) and
 * every KV cache's rows of them (the MTP head's too, valid when a
 * speculative sequence stored it; of a ring cache, state_config.n_ring,
 * the block's positions among the last ring before its end); a block may
 * also hold a snapshot: the recurrent state (conv and delta-rule,
 * lib/state) after its last row, kept in a pool of snapshot slots beside
 * the blocks.  Only at a block with a snapshot can a sequence resume
 * (prefix_lookup).  A restore fills a ring with the last ring positions
 * before the chain's end, from as many of its blocks as hold them: what
 * the ring of a cold run there holds.  Blocks form chains from position
 * 0: a block is keyed by the hash of its parent's key, its tokens and its
 * tag, and found only when its parent, its depth, its tag and every one
 * of its tokens match, so a hash collision costs a comparison, never a
 * wrong state.
 *
 * A block's tag says what its rows hold besides their tokens' ids (the
 * scheduler's: the images whose soft tokens it holds, as a SHA-256 of
 * their files' digests and places; all zero, as NULL gives: none).
 *
 * Exactness is the caller's: a snapshot must be stored from a state
 * reached the way a cold run reaches it, where a cold run's prefill
 * forward ended, so that a sequence restored from it computes what a cold
 * run computes from there.  A block whose end no forward stopped at (the
 * scheduler: most blocks, a forward of a chunk running past several; an
 * image's rows running across its end) is stored open: its rows only,
 * kept for the chains through it.  The scheduler's rule (lib/schedule.h):
 * a cold prefill's forwards end at the multiples of the prefill chunk and
 * at L, the prompt's last multiple of block before its last token; a run
 * resumed at a snapshot S cuts at the same points and at S, one cut more
 * than its own cold run when S is inside a chunk.  That cut changes no
 * bit when block is a multiple of 64: every piece but the tail [L, n),
 * cut alike in both runs, has at least 64 rows, so its products are
 * row-invariant (past the backend's step rows, backend_step_rows <= 32 <
 * 64, a row's result is its own), and the delta rule's chunks of 64
 * positions stay where they were (t/tools/prefix-exact: EXACT on the CPU).  With block the chunk itself,
 * S is a chunk's end: no cut more.
 *
 * A split state (a pipeline's, lib/state's state_part) is kept part by
 * part: a block holds each stage's rows and recurrent state in that
 * stage's backend memory, one arena a part (prefix_new_like).
 *
 * Memory: prefix_new allocates, in each part's memory, an arena of
 * max_blocks blocks' rows and one of max_snaps snapshots, together within
 * the budget: the budget is cut into units of `stride` blocks and two
 * snapshots (a chunk's end and a prompt's last block, the points where a
 * cold prefill of chunks of stride blocks stops; stride 1: a block and a
 * snapshot), so a block without a snapshot costs its rows only; a state
 * without recurrent layers has snapshots of no bytes, one a block.  The
 * cache never holds more.  When the blocks are full, storing a block
 * evicts the least recently used block that no other block extends and
 * that no one pinned (a chain is evicted from its end; its snapshot goes
 * with it); when the snapshots are full, storing one takes the least
 * recently used one (stored, or where a lookup ended: a lookup passing
 * over a snapshot to a later one does not use it) of a block that no one
 * pinned (that block stays, its rows
 * only, for the chains through it), and when none can be taken the block
 * is stored without one.
 *
 * Not thread-safe: one thread (the scheduler's worker) uses a cache.
 */
#ifndef MEMRA_PREFIX_H
#define MEMRA_PREFIX_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "state.h"

struct prefix_config {
	int	block;		/* tokens a block (>= 1) */
	size_t	budget;		/* bytes of backend memory at most */
	uint64_t hash_mask;	/* 0: 64-bit keys; else keys & mask (tests force collisions) */
	const int *kv_w;	/* NULL, or each KV cache's row width (copied), the caches of
				 * every part in part order: cache i is [n_ctx][kv_w[i]] at
				 * the start of its buffer (a gemma4 state's,
				 * model_kv_width); NULL: every cache kv_dim wide */
	int	stride;		/* blocks of a unit of the budget (two snapshots each); 0 or
				 * 1: a block and a snapshot */
};

struct prefix;

/* A block's tag: 32 bytes (the scheduler's a SHA-256). */
struct prefix_tag {
	uint8_t	b[32];
};

/* prefix_insert's flags. */
enum {
	PREFIX_MTP = 1,		/* the state's MTP cache rows below the block's end are valid */
	PREFIX_OPEN = 2,	/* no resuming at its end: its rows only (the state may be past
				 * the end; no snapshot is kept) */
};

/* The most parts (pipeline stages) a cache keeps a block in. */
#define PREFIX_MAX_PARTS 16

/* The bytes a unit of the budget (stride blocks' rows and their snapshots, as
 * prefix_config's) of a state shaped c (caches kv_w wide, as prefix_config's) takes;
 * prefix_block_bytes: stride 1's, a block's rows and a snapshot. */
size_t	prefix_unit_bytes(const struct state_config *c, const int *kv_w, int block, int stride);
size_t	prefix_block_bytes(const struct state_config *c, const int *kv_w, int block);

/* The same for states shaped like st: every part's (state_part), the caches kv_w wide
 * (as prefix_config's). */
size_t	prefix_unit_bytes_like(struct state *st, const int *kv_w, int block, int stride);
size_t	prefix_block_bytes_like(struct state *st, const int *kv_w, int block);

/*
 * A cache for states shaped c (its n_ctx and n_snap do not matter) in
 * be's memory.  NULL with the reason in err (UTIL_ERRLEN) when the budget
 * holds no unit (prefix_unit_bytes) or there is no memory.  prefix_free frees (NULL is a
 * no-op); be must outlive it.
 */
struct prefix *prefix_new(struct backend *be, const struct state_config *c,
	    const struct prefix_config *pc, char *err);
/*
 * A cache for states shaped like st (split or not): each part's blocks in
 * the memory of the backend that holds that part of st (state_backend),
 * budget bytes over all the parts.  prefix_new's failures; a state of
 * more than PREFIX_MAX_PARTS parts too.  The caches it restores and stores
 * must be shaped like st part for part (-1 otherwise).
 */
struct prefix *prefix_new_like(struct state *st, const struct prefix_config *pc, char *err);
void	prefix_free(struct prefix *);
const char *prefix_errmsg(const struct prefix *);

/*
 * The longest cached chain that is a prefix of ids[n] (block d tagged
 * tags[d]; tags NULL: every tag zero), ends in a block that has a
 * snapshot and leaves at least one token after it (at most (n - 1) / block
 * blocks); need_mtp: only blocks that hold the MTP cache's rows.  Returns
 * its tokens (a multiple of block, 0 when none) and its last block's id
 * in *last (-1 when none); the chain becomes the most recently used.
 */
int	prefix_lookup(struct prefix *, const int32_t *ids, const struct prefix_tag *tags, int n,
	    int need_mtp, int *last);

/*
 * The longest cached chain of blocks that is a prefix of ids[n] (at most
 * n / block blocks), snapshots or not: the chain a sequence at position
 * n extends.  Returns its tokens and its last block in *last (-1: none),
 * as prefix_lookup, without counting a lookup.
 */
int	prefix_chain(struct prefix *, const int32_t *ids, const struct prefix_tag *tags, int n,
	    int *last);

/*
 * Restore chain `last` (a prefix_lookup result) into st: the KV rows of
 * its blocks (a ring's last ring positions), the recurrent state after
 * its last row, and the position (state_seek).  0, or -1 with
 * prefix_errmsg set (st must then be reset).
 */
int	prefix_restore(struct prefix *, int last, struct state *st);

/*
 * Store the block that ends at position end (a multiple of block) of st,
 * which holds the tokens ids[0..end) and is at position end (PREFIX_OPEN:
 * at end or past it): its tokens ids[end - block..end), its tag (NULL:
 * zero), st's KV rows of them and (not open) a snapshot of its recurrent
 * state, if a slot can be had (the memory comment).  parent: the id of
 * the block before it (-1 when end == block); flags: PREFIX_MTP,
 * PREFIX_OPEN.  A block that is there already is kept (with PREFIX_MTP,
 * its MTP rows are filled in; stored not open, one without a snapshot
 * gets one and is resumable).  Returns the block's id, or -1 with
 * prefix_errmsg set: every block is in use by a chain or pinned (nothing
 * was stored), or a copy failed.
 */
int	prefix_insert(struct prefix *, int parent, const int32_t *ids,
	    const struct prefix_tag *tag, int end, struct state *st, int flags);

/* Keep block id (and so its chain) from eviction until unpinned; -1 is a no-op. */
void	prefix_pin(struct prefix *, int id);
void	prefix_unpin(struct prefix *, int id);

struct prefix_stats {
	size_t	budget;		/* bytes allowed */
	size_t	arena;		/* bytes allocated: max_blocks blocks, <= budget */
	size_t	bytes;		/* bytes of the blocks and snapshots in use */
	size_t	block_bytes;	/* a block's rows */
	size_t	snap_bytes;	/* a snapshot */
	int	blocks, max_blocks, block;
	int	snaps, max_snaps;	/* snapshots held, slots */
	long	lookups, hits, hit_tokens, inserts, evictions;
	long	snap_evictions;	/* snapshots taken from blocks that stayed */
};
void	prefix_stats(const struct prefix *, struct prefix_stats *);

#endif
