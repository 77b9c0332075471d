/*
 * state: one sequence's memory in backend memory: a KV cache per
 * full-attention layer (the MTP layer's own cache included) and, per
 * Gated DeltaNet layer, the recurrent state (conv state and delta-rule
 * state), plus the per-row snapshots a speculative verify batch needs to
 * roll back.
 *
 * Positions: state_push(m) hands out rows p0..p0+m-1 to a forward (which
 * writes their K/V at those positions, state_kv_row, and steps the
 * recurrent state);
 * state_rollback(keep) after a verify batch returns to p0+keep: the KV
 * caches are truncated (rows past the new length are simply overwritten
 * later) and each recurrent state is restored from the snapshot of row
 * keep-1 that the recurrent ops wrote (backend_conv1d_silu /
 * backend_gdn_step with snap = state_conv_snap / state_ssm_snap).
 */
#ifndef MEMRA_STATE_H
#define MEMRA_STATE_H

#include "backend.h"

struct state_config {
	int	n_ctx;		/* positions each KV cache holds */
	int	n_kv;		/* KV caches: full-attention layers, MTP included */
	int	kv_dim;		/* n_kv_heads * head_dim, for K and for V */
	int	n_rec;		/* recurrent (GDN) layers */
	int	conv_dim;	/* conv state: [d_conv-1][conv_dim] */
	int	d_conv;
	int	n_v_heads;	/* delta state: [n_v_heads][dk][dv] */
	int	dk, dv;
	int	n_snap;		/* most rows a verify batch may roll back over (K+1); 0: none */
	int	n_ring;		/* the last n_ring of the n_kv caches are rings (a
				 * sliding-window layer's): ring rows, position p in
				 * row p % ring, so a ring keeps the last ring
				 * positions written (0: none; every cache n_ctx rows) */
	int	ring;
	int	window;		/* rings: the keys a row sees (1..ring; 0: ring), so
				 * that going back (state_back) keeps them */
	const int *kv_w;	/* NULL: every cache's rows kv_dim floats wide; else
				 * [n_kv]: cache i's rows kv_w[i] (1..kv_dim) wide
				 * (gemma4's layers differ); borrowed: the array
				 * outlives the states (the model's) */
};

struct state;

/*
 * A new empty sequence (position 0, recurrent state zero) in be's memory.
 * NULL with the reason in err (UTIL_ERRLEN) for a bad config or no
 * memory.  state_free frees (NULL is a no-op); be must outlive it.
 */
struct state *state_new(struct backend *be, const struct state_config *c,
	    char *err);
void	state_free(struct state *);

/*
 * One sequence whose caches are split over pipeline stages (lib/pipeline):
 * parts[n] (2..16), each a stage's own state on its device, under one
 * state of config c (the whole model's shape: n_ctx, every cache).  The
 * state takes the parts, also on failure (NULL with err).  Positions are
 * kept alike in every part: state_push, state_rollback, state_reset,
 * state_truncate, state_seek and state_copy move them all; the memory
 * accessors (state_k, ..., state_rec_save) are the parts' own (state_part):
 * on the split state they give NULL or -1.
 */
struct state *state_new_split(struct state **parts, int n, const struct state_config *c,
	    char *err);

/* Stage s's part of a split state; s 0 of any other state is the state itself, else NULL. */
struct state *state_part(struct state *, int s);

/* The parts of a state: n for a split one, 1 for any other (state_part(s, 0) is s). */
int	state_parts(const struct state *);

/* The backend whose memory holds a state that is not split (a part); NULL for a split one. */
struct backend *state_backend(const struct state *);
const char *state_errmsg(const struct state *);
const struct state_config *state_config(const struct state *);

/* The bytes of backend memory state_new(c) takes. */
size_t	state_bytes(const struct state_config *c);

/* Tokens consumed so far: the position of the next row. */
int	state_pos(const struct state *);

/* Back to position 0 with zero recurrent state. */
int	state_reset(struct state *);

/*
 * Reserve the next m rows for a forward: returns their first position p0
 * and advances the position to p0 + m, or -1 when they do not fit in
 * n_ctx or, with snap set, m > n_snap.  With snap set, the forward must
 * pass the snapshot arrays to the recurrent ops so that state_rollback
 * can return to any of these rows.
 */
int	state_push(struct state *, int m, int snap);

/*
 * After a state_push(m, snap = 1) batch: keep its first `keep` rows
 * (1 <= keep <= m) and forget the rest; the position becomes p0 + keep.
 * -1 when the last push kept no snapshots, or keep is out of range.
 * Only the latest batch can be rolled back, once.
 */
int	state_rollback(struct state *, int keep);

/*
 * Truncate to position pos <= state_pos: only for states without
 * recurrent layers (a recurrent state cannot go back without a
 * snapshot) and, with rings, within state_back's reach; -1 otherwise.
 */
int	state_truncate(struct state *, int pos);

/*
 * Resume at position pos <= n_ctx: the caller has written the KV rows
 * below pos and the recurrent state that follows row pos-1 (state_k,
 * state_conv, ... or state_rec_load), as a prefix cache restores a
 * sequence.  -1 when pos is out of range.
 */
int	state_seek(struct state *, int pos);

/*
 * The recurrent state (every GDN layer's conv and delta-rule state) as
 * one array of backend memory of state_rec_floats(c) floats: save copies
 * the live state into dst, load copies src into the live state.  0, or -1
 * with state_errmsg set.  A state without recurrent layers has 0 floats.
 */
size_t	state_rec_floats(const struct state_config *c);
int	state_rec_save(struct state *, float *dst);
int	state_rec_load(struct state *, const float *src);

/*
 * The rings (state_config.n_ring) as one array of backend memory of
 * state_ring_floats(c) floats, every row of each: save copies them into
 * dst, load copies src into them (a ring's state at a position, as the
 * reuse pool keeps a parked sequence's).  0, or -1 with state_errmsg set.
 * A state without rings has 0 floats.
 */
size_t	state_ring_floats(const struct state_config *c);
int	state_ring_save(struct state *, float *dst);
int	state_ring_load(struct state *, const float *src);

/* Make dst a copy of src (same config): fork a sequence. */
int	state_copy(struct state *dst, const struct state *src);

/*
 * The row of cache i that holds position pos: pos, or in a ring pos % ring.
 * The rows of n positions from pos lie in state_kv_rows(c, i, pos, n) <= n
 * rows from that one, the rest from row 0 (a ring's wrap).
 */
int	state_kv_row(const struct state_config *c, int i, int pos);
int	state_kv_rows(const struct state_config *c, int i, int pos, int n);

/*
 * 1 when the state can go back to position pos <= state_pos and go on
 * from there (state_truncate, or state_seek over rows it holds): always
 * without rings; with rings, when the positions written since pos leave
 * the window of keys before pos in each ring: state_pos - pos <=
 * ring - window + 1.  Recurrent layers are state_truncate's matter.
 */
int	state_back(const struct state *, int pos);

/* 1 when cache i is a ring. */
int	state_is_ring(const struct state_config *c, int i);

/* Backend memory of cache i / recurrent layer l; NULL when out of range. */
float	*state_k(struct state *, int i);	/* [n_ctx][width], a ring [ring][width] */
float	*state_v(struct state *, int i);	/* [n_ctx][width], a ring [ring][width] */
float	*state_conv(struct state *, int l);	/* [d_conv-1][conv_dim] */
float	*state_ssm(struct state *, int l);	/* [n_v_heads][dk][dv] */
float	*state_conv_snap(struct state *, int l);	/* [n_snap][d_conv-1][conv_dim] */
float	*state_ssm_snap(struct state *, int l);	/* [n_snap][n_v_heads][dk][dv] */

#endif
