/*
 * DFlash / DFlash2 block drafters (z-lab's dflash/model.py, PyPI dflash
 * 0.1.0: DFlashDraftModel, DFlash2DraftModel; llama.cpp's
 * src/models/dflash.cpp), attached to a trunk (model_options.dflash).
 *
 * Context: the trunk's outputs of the tapped layers for a committed
 * position, concatenated in the drafter's order, go through fc and the
 * hidden norm; each layer's K (k_norm, RoPE at the position) and V of
 * that row are cached (the layer's input norm is not applied to them).
 * A sliding layer's block rows at p0.. see no context position before
 * p0 - window + 1, so its cache is a ring of window - 1 + block rows
 * (position p in row p % ring: the window's context and the block,
 * whose rows overwrite only positions no later block sees), as the
 * reference's DynamicSlidingWindowLayer keeps its last window - 1 and
 * llama.cpp's iSWA cache its window's; a full-attention layer's keeps
 * every position.  Rows a ring would not keep are not computed.
 *
 * A block: [anchor, mask x (block - 1)] embedded by the trunk's table at
 * positions p0..; each layer is Qwen3's (plain RMSNorm, per-head q/k
 * norms, NeoX RoPE over the whole head, SwiGLU) whose block queries
 * attend over the cached context and every block key (non-causal; a
 * sliding layer sees keys within its window either side); DFlash2 wraps
 * attention and FFN in grouped dynamic causal convolutions within the
 * block.  Rows 1.. after the final norm go through the trunk's head (or
 * its trimmed rows); DFlash2's selector scores each row's top k
 * candidates against the previous row's.
 *
 * The block's attention runs as backend_attention of one query row at a
 * time: row i's keys are the positions within [lo, hi] (hi the last it
 * sees, lo the first: the window's), the op's causal sliding window
 * ending at hi.  The convolutions are backend_dconv; the selector runs on
 * the host, over the logits and gates read back (on a host backend, where
 * they are) and codebook rows embedded and read back (model.c refuses a
 * backend without the ops the forward needs).
 */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"
#include "quant.h"
#include "ranks.h"
#include "util.h"

enum { CTX_CHUNK = 32 };	/* context rows a pass */

struct model_dfl {		/* a drafter's scratch: backend memory, then host memory */
	int	cap;		/* block rows */
	float	*cin;		/* [CTX_CHUNK][n_tap n_embd] */
	float	*g;		/* [CTX_CHUNK][n_embd] */
	float	*x, *xn, *y, *cv;	/* [cap][n_embd]; cv a convolution's output */
	float	*dyn;		/* [cap][2 conv_k groups] */
	float	*q, *o;		/* [cap][n_head head_dim] */
	float	*f, *u;		/* [cap][n_ff] */
	float	*lg;		/* [cap][n_vocab] */
	float	*gate;		/* [cap][sel_rank] */
	float	*cbd;		/* [sel_topk][sel_rank] codebook rows embedded */
	float	*cb;		/* host: [2 sel_topk][sel_rank] codebook rows, [sel_topk] */
	float	*hlg, *hgate;	/* host copies of lg, gate (NULL on a host backend) */
	int32_t	pos[CTX_CHUNK > 64 ? CTX_CHUNK : 64];
	int32_t	*tok;		/* [cap] */
};

static int
bfail(struct model *md, struct backend *be)
{
	return util_err(md->err, "%s", backend_errmsg(be));
}

int
model_dflash_prec(const char *name)
{
	if (name == NULL || strcmp(name, "q4") == 0)
		return QUANT_Q4_0;
	if (strcmp(name, "q8") == 0)
		return QUANT_Q8_0;
	if (strcmp(name, "bf16") == 0)
		return QUANT_BF16;
	if (strcmp(name, "f32") == 0)
		return QUANT_F32;
	return strcmp(name, "keep") == 0 ? -1 : -2;
}

const struct model_hparams *
model_dflash(const struct model *md)
{
	return md->dfl != NULL ? &md->dfl->hp : NULL;
}

void
model_dflash_free(struct model *md)
{
	struct model_dfl *x = md->dx;
	float *bufs[14];

	if (x == NULL)
		return;
	bufs[0] = x->cin, bufs[1] = x->g, bufs[2] = x->x, bufs[3] = x->xn, bufs[4] = x->y;
	bufs[5] = x->dyn, bufs[6] = x->q, bufs[7] = x->o, bufs[8] = x->f, bufs[9] = x->u;
	bufs[10] = x->lg, bufs[11] = x->gate, bufs[12] = x->cv, bufs[13] = x->cbd;
	for (int i = 0; i < 14; i++)
		backend_mfree(md->be, bufs[i]);
	free(x->cb), free(x->hlg), free(x->hgate), free(x->tok), free(x);
	md->dx = NULL;
}

/* The drafter D's scratch for its block (nl: the head's rows), or NULL with D->err. */
static struct model_dfl *
scratch(struct model *D, int nl)
{
	const struct model_hparams *hp = &D->hp;
	struct backend *be = D->be;
	struct model_dfl *x;
	size_t c, ne = hp->n_embd, qd = (size_t)hp->n_head * hp->head_dim;
	size_t cp = hp->conv_g ? 2 * (size_t)hp->conv_k * (ne / hp->conv_g) : 1;
	size_t R = hp->sel_rank ? hp->sel_rank : 1, k = hp->sel_topk ? hp->sel_topk : 1;
	int host = backend_host(be);

	if (D->dx != NULL)
		return D->dx;
	if ((x = D->dx = calloc(1, sizeof *x)) == NULL) {
		util_err(D->err, "out of memory");
		return NULL;
	}
	c = x->cap = hp->block;
	if ((x->cin = backend_alloc(be, CTX_CHUNK * hp->n_tap * ne)) == NULL ||
	    (x->g = backend_alloc(be, CTX_CHUNK * ne)) == NULL ||
	    (x->x = backend_alloc(be, c * ne)) == NULL || (x->xn = backend_alloc(be, c * ne)) == NULL ||
	    (x->y = backend_alloc(be, c * ne)) == NULL || (x->dyn = backend_alloc(be, c * cp)) == NULL ||
	    (x->q = backend_alloc(be, c * qd)) == NULL || (x->o = backend_alloc(be, c * qd)) == NULL ||
	    (x->f = backend_alloc(be, c * hp->n_ff)) == NULL ||
	    (x->u = backend_alloc(be, c * hp->n_ff)) == NULL ||
	    (x->lg = backend_alloc(be, c * (size_t)nl)) == NULL ||
	    (x->gate = backend_alloc(be, c * R)) == NULL ||
	    (x->cv = backend_alloc(be, hp->conv_k ? c * ne : 1)) == NULL ||
	    (x->cbd = backend_alloc(be, k * R)) == NULL ||
	    (x->cb = malloc((2 * k * R + k) * sizeof *x->cb)) == NULL ||
	    (x->tok = malloc(c * sizeof *x->tok)) == NULL ||
	    (!host && hp->sel_topk && ((x->hlg = malloc(c * nl * sizeof *x->hlg)) == NULL ||
	    (x->hgate = malloc(c * R * sizeof *x->hgate)) == NULL))) {
		model_dflash_free(D);
		util_err(D->err, "DFlash scratch: out of memory");
		return NULL;
	}
	return x;
}

/* The drafter, with the trunk's error on failure. */
static struct model *
drafter(struct model *md)
{
	if (md->dfl == NULL)
		util_err(md->err, "no DFlash drafter attached");
	return md->dfl;
}

int
model_dflash_tap(struct model *md, int il, int m)
{
	const struct model_hparams *dh = &md->dfl->hp;
	size_t ne = md->hp.n_embd, cap = md->act.cap;

	for (int j = 0; j < dh->n_tap; j++) {
		float *d = md->taps + (size_t)j * cap * ne;

		if (dh->taps[j] != il)
			continue;
		if (backend_copy(md->be, d, md->act.x, m * ne) != 0 ||
		    backend_add(md->be, d, md->act.t, m * ne) != 0)
			return bfail(md, md->be);
	}
	return 0;
}

int
model_taps(struct model *md, float *taps, int m)
{
	const struct model_hparams *dh;
	size_t ne = md->hp.n_embd, cap = md->act.cap;

	if (drafter(md) == NULL)
		return -1;
	dh = &md->dfl->hp;
	if (m < 1 || m > md->tap_rows)
		return util_err(md->err, "taps: %d rows, the last forward kept %d", m, md->tap_rows);
	for (int j = 0; j < dh->n_tap; j++)
		for (int r = 0; r < m; r++)
			if (backend_read(md->be, taps + ((size_t)r * dh->n_tap + j) * ne,
			    md->taps + ((size_t)j * cap + r) * ne, ne) != 0)
				return bfail(md, md->be);
	return 0;
}

/*
 * Drafter D's context cache for n_ctx positions and a block past them:
 * its sliding layers' caches (the state's last: model.c orders them) rings
 * of window - 1 + block rows, unless whole or the ring holds as many.
 */
static struct state_config
dfl_shape(const struct model *D, int n_ctx, int whole)
{
	const struct model_hparams *hp = &D->hp;
	struct state_config c = { .n_ctx = n_ctx + hp->block, .n_kv = D->n_kv_own,
	    .kv_dim = hp->n_head_kv * hp->head_dim };
	int ring = hp->n_swa - 1 + hp->block;

	for (int il = 0; il < hp->n_layer && !whole && hp->n_swa > 0 && ring < c.n_ctx; il++)
		c.n_ring += D->layers[il].swa;
	c.ring = c.n_ring > 0 ? ring : 0;
	return c;
}

struct state *
model_dflash_state(struct model *md, int n_ctx, int whole, char *err)
{
	struct model *D = md->dfl;
	struct state_config c;

	if (D == NULL) {
		util_err(err, "no DFlash drafter attached");
		return NULL;
	}
	if (n_ctx < 0) {
		util_err(err, "DFlash context cache of %d positions", n_ctx);
		return NULL;
	}
	c = dfl_shape(D, n_ctx, whole);
	return state_new(D->be, &c, err);
}

int
model_dflash_state_shape(const struct model *md, int n_ctx, struct state_config *c)
{
	if (md->dfl == NULL || n_ctx < 0)
		return -1;
	*c = dfl_shape(md->dfl, n_ctx, 0);
	return 0;
}

size_t
model_dflash_state_bytes(const struct model *md, int n_ctx)
{
	struct state_config c;

	return model_dflash_state_shape(md, n_ctx, &c) == 0 ? state_bytes(&c) : 0;
}

/* Layer L's K (per-head norm, RoPE at pos) and V of rows in[m] into ds's rows r0... */
static int
kv_seg(struct model *D, struct model_layer *L, struct state *ds, const float *in, int r0,
    int m, const int32_t *pos)
{
	const struct model_hparams *hp = &D->hp;
	struct backend *be = D->be;
	int kvd = hp->n_head_kv * hp->head_dim;
	float *k = state_k(ds, L->cache) + (size_t)r0 * kvd;
	float *v = state_v(ds, L->cache) + (size_t)r0 * kvd;

	if (backend_matmul(be, &L->k, in, hp->n_embd, k, kvd, m) ||
	    backend_matmul(be, &L->v, in, hp->n_embd, v, kvd, m) ||
	    backend_rmsnorm(be, k, hp->head_dim, L->k_norm, k, hp->head_dim, m * hp->n_head_kv,
	    hp->head_dim, hp->eps) ||
	    backend_rope(be, k, kvd, hp->n_head_kv, hp->head_dim, m, pos, hp->n_rot,
	    hp->rope_theta, hp->rope_mode))
		return bfail(D, be);
	return 0;
}

/* Layer L's K and V of rows in[m] at positions p0.. (pos) into ds: their rows, a ring's
 * wrap split in two. */
static int
kv_rows(struct model *D, struct model_layer *L, struct state *ds, const float *in, int p0,
    int m, const int32_t *pos)
{
	const struct state_config *c = state_config(ds);

	for (int i = 0, n; i < m; i += n) {
		n = state_kv_rows(c, L->cache, p0 + i, m - i);
		if (kv_seg(D, L, ds, in + (size_t)i * D->hp.n_embd, state_kv_row(c, L->cache, p0 + i),
		    n, pos + i) != 0)
			return -1;
	}
	return 0;
}

int
model_dflash_context(struct model *md, struct state *ds, int p0, const float *taps, int m)
{
	struct model *D = drafter(md);
	const struct model_hparams *hp;
	const struct state_config *sc;
	struct model_dfl *x;
	size_t ne, w;
	int keep;

	if (D == NULL || (x = scratch(D, model_draft_vocab(md))) == NULL)
		return D == NULL ? -1 : util_err(md->err, "%s", D->err);
	hp = &D->hp, ne = hp->n_embd, w = hp->n_tap * ne, sc = state_config(ds);
	if (p0 < 0 || m < 0 || p0 + m + hp->block > sc->n_ctx)
		return util_err(md->err, "DFlash context rows %d..%d: the drafter's cache holds %d",
		    p0, p0 + m, sc->n_ctx - hp->block);
	/* rows from keep on: a ring keeps the last ring positions; with rings alone, no row
	 * before them is run at all */
	keep = sc->n_ring > 0 && m > sc->ring ? m - sc->ring : 0;
	for (int i = sc->n_ring == sc->n_kv ? keep : 0; i < m; i += CTX_CHUNK) {
		int c = m - i < CTX_CHUNK ? m - i : CTX_CHUNK;

		for (int r = 0; r < c; r++)
			x->pos[r] = p0 + i + r;
		if (backend_write(D->be, x->cin, taps + (size_t)i * w, c * w) ||
		    backend_matmul(D->be, &D->fc, x->cin, (int)w, x->g, (int)ne, c) ||
		    backend_rmsnorm(D->be, x->g, ne, D->enc_norm, x->g, ne, c, ne, hp->eps))
			return util_err(md->err, "DFlash context: %s", backend_errmsg(D->be));
		for (int il = 0; il < hp->n_layer; il++) {
			struct model_layer *L = &D->layers[il];
			int s = state_is_ring(sc, L->cache) && keep > i ? keep - i : 0;

			if (s < c && kv_rows(D, L, ds, x->g + s * ne, p0 + i + s, c - s, x->pos + s) != 0)
				return util_err(md->err, "DFlash context: %s", D->err);
		}
	}
	return 0;
}

/*
 * DFlash2's grouped dynamic causal convolution of the block rows h[B] into
 * x->cv (backend_dconv): out[t][c] = sum over taps o of (base[o][c] +
 * dyn[t][o][c / group]) * h[t - o][c], rows before the block's first
 * reading zero; dyn: row t's [2][conv_k][groups], side picks the half;
 * base: this side's [conv_k][n].
 */
static int
conv(struct model *D, const float *h, int B, int side, const float *base)
{
	const struct model_hparams *hp = &D->hp;
	int K = hp->conv_k, G = hp->n_embd / hp->conv_g;

	return backend_dconv(D->be, h, B, hp->n_embd, D->dx->dyn + (size_t)side * K * G,
	    2 * K * G, K, hp->conv_g, base, D->dx->cv) ? bfail(D, D->be) : 0;
}

/*
 * The block's attention of layer L at p0 (its K/V in ds up to p0 + B - 1):
 * row i sees keys lo..hi, hi the block's last (causal: its own) within the
 * window ahead, lo the window's first behind; at most window - 1 + B keys,
 * all in a ring.
 */
static int
block_attn(struct model *D, struct model_layer *L, struct state *ds, int p0, int B)
{
	const struct model_hparams *hp = &D->hp;
	const struct state_config *c = state_config(ds);
	struct model_dfl *x = D->dx;
	int qd = hp->n_head * hp->head_dim, W = L->swa ? hp->n_swa : 0;
	struct backend_attn at = { hp->n_head, hp->n_head_kv, hp->head_dim,
	    1.0f / sqrtf((float)hp->head_dim), 0, 0, 0, 0, NULL,
	    state_is_ring(c, L->cache) ? c->ring : 0 };

	for (int i = 0; i < B; i++) {
		int q = p0 + i, hi = hp->causal ? q : p0 + B - 1, lo = 0;

		if (W > 0) {
			hi = hi < q + W - 1 ? hi : q + W - 1;
			lo = q - W + 1 > 0 ? q - W + 1 : 0;
		}
		at.window = W > 0 ? hi - lo + 1 : 0;
		if (backend_attention(D->be, &at, x->q + (size_t)i * qd, qd, hp->head_dim,
		    state_k(ds, L->cache), state_v(ds, L->cache), 1, hi, x->o + (size_t)i * qd))
			return bfail(D, D->be);
	}
	return 0;
}

/* Layer L over the block rows x->x[B] at p0: attention, then the FFN, each around its convs. */
static int
block_layer(struct model *D, struct model_layer *L, struct state *ds, int p0, int B)
{
	const struct model_hparams *hp = &D->hp;
	struct model_dfl *x = D->dx;
	struct backend *be = D->be;
	int ne = hp->n_embd, qd = hp->n_head * hp->head_dim, v2 = hp->conv_k > 0;
	const float *in = v2 ? x->cv : x->xn, *out = v2 ? x->cv : x->y;
	const float *ab = L->conv_base[0], *fb = L->conv_base[1];
	size_t kn = (size_t)hp->conv_k * ne;

	if (backend_rmsnorm(be, x->x, ne, L->attn_norm, x->xn, ne, B, ne, hp->eps) ||
	    (v2 && backend_matmul(be, &L->conv_proj[0], x->xn, ne, x->dyn,
	    (int)L->conv_proj[0].ne1, B)))
		return bfail(D, be);
	if (v2 && conv(D, x->xn, B, 0, ab) != 0)
		return -1;
	if (backend_matmul(be, &L->q, in, ne, x->q, qd, B) ||
	    backend_rmsnorm(be, x->q, hp->head_dim, L->q_norm, x->q, hp->head_dim,
	    B * hp->n_head, hp->head_dim, hp->eps) ||
	    backend_rope(be, x->q, qd, hp->n_head, hp->head_dim, B, x->pos, hp->n_rot,
	    hp->rope_theta, hp->rope_mode))
		return bfail(D, be);
	if (kv_rows(D, L, ds, in, p0, B, x->pos) != 0 || block_attn(D, L, ds, p0, B) != 0)
		return -1;
	if (backend_matmul(be, &L->o, x->o, qd, x->y, ne, B))
		return bfail(D, be);
	if (v2 && conv(D, x->y, B, 1, ab + kn) != 0)
		return -1;
	if (backend_add(be, x->x, out, (size_t)B * ne) ||
	    backend_rmsnorm(be, x->x, ne, L->post_norm, x->xn, ne, B, ne, hp->eps) ||
	    (v2 && backend_matmul(be, &L->conv_proj[1], x->xn, ne, x->dyn,
	    (int)L->conv_proj[1].ne1, B)))
		return bfail(D, be);
	if (v2 && conv(D, x->xn, B, 0, fb) != 0)
		return -1;
	if (backend_mlp(be, &L->ffn_gate, &L->ffn_up, &L->ffn_down, in, B, 0.0f, x->f, x->u,
	    x->y))
		return bfail(D, be);
	if (v2 && conv(D, x->y, B, 1, fb + kn) != 0)
		return -1;
	return backend_add(be, x->x, out, (size_t)B * ne) ? bfail(D, be) : 0;
}

/* The k largest of lg[n] (ties: the lower index first) into idx[k]. */
static void
top_k(const float *lg, int n, int k, int32_t *idx)
{
	int c = 0;

	for (int i = 0; i < n; i++) {
		int j;

		if (c == k && !(lg[i] > lg[idx[k - 1]]))
			continue;
		j = c < k ? c++ : k - 1;
		while (j > 0 && lg[i] > lg[idx[j - 1]]) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = i;
	}
}

/* Rows r[n] of codebook w (dequantized) into out[n][rank] (host memory): embedded where
 * the backend's memory is, read back unless that is the host's. */
static int
cb_rows(struct model *D, const struct backend_weight *w, const int32_t *r, int n, float *out)
{
	int R = D->hp.sel_rank;
	float *d = backend_host(D->be) ? out : D->dx->cbd;

	if (backend_embed(D->be, w, r, n, d, R) ||
	    (d != out && backend_read(D->be, out, d, (size_t)n * R)))
		return bfail(D, D->be);
	return 0;
}

/*
 * DFlash2's lattice of one block row (lg its logits over the head's nl
 * rows, gate its hidden_projection, both host memory; r the trimmed head's
 * ranks or NULL): cand[k] its top k as target ids, lat[k][k] each one's edge
 * score (unary logit + pred[a] . gate . succ[b]) after each of the previous
 * row's candidates pc[k] (pc NULL: after the anchor, every a alike).
 */
static int
lattice(struct model *D, const float *lg, int nl, const struct ranks *r, const float *gate,
    int32_t anchor, const int32_t *pc, int32_t *cand, float *lat)
{
	const struct model_hparams *hp = &D->hp;
	int k = hp->sel_topk, R = hp->sel_rank;
	float *succ = D->dx->cb, *pred = succ + (size_t)k * R, *un = pred + (size_t)k * R;

	top_k(lg, nl, k, cand);
	for (int b = 0; b < k; b++) {
		un[b] = lg[cand[b]];
		cand[b] = r != NULL ? ranks_target(r, cand[b]) : cand[b];
	}
	if (cb_rows(D, &D->sel_next, cand, k, succ) != 0 ||
	    cb_rows(D, &D->sel_prev, pc ? pc : &anchor, pc ? k : 1, pred) != 0)
		return -1;
	for (int a = 0; a < k; a++) {
		float *pa = pred + (pc != NULL ? (size_t)a * R : 0);

		for (int j = 0; j < R; j++)
			pa[j] *= a == 0 || pc != NULL ? gate[j] : 1;
		for (int b = 0; b < k; b++) {
			float s = 0;

			for (int j = 0; j < R; j++)
				s += pa[j] * succ[(size_t)b * R + j];
			lat[(size_t)a * k + b] = un[b] + s;
		}
	}
	return 0;
}

/* The head's logits of rows 1..B-1 of the final-normed block into x->lg [B-1][nl]. */
static int
block_logits(struct model *md, struct model *D, int B, int nl)
{
	const struct model_hparams *hp = &D->hp;
	struct model_dfl *x = D->dx;
	const struct backend_weight *hw = md->draft_head.data != NULL ? &md->draft_head :
	    &md->output;
	size_t n = (size_t)(B - 1) * nl;

	if (backend_matmul(md->be, hw, x->xn + hp->n_embd, hp->n_embd, x->lg, nl, B - 1) ||
	    (hp->logit_scale != 1 && backend_scale(md->be, x->lg, n, hp->logit_scale)) ||
	    (hp->softcap > 0 && backend_softcap(md->be, x->lg, n, hp->softcap)))
		return bfail(md, md->be);
	return 0;
}

int
model_dflash_draft(struct model *md, struct state *ds, int p0, int32_t anchor,
    const struct model_dflash_out *o)
{
	struct model *D = drafter(md);
	const struct model_hparams *hp;
	struct model_dfl *x;
	const float *lg, *gate;
	int B, ne, nl = model_draft_vocab(md), k;

	if (D == NULL || (x = scratch(D, nl)) == NULL)
		return D == NULL ? -1 : util_err(md->err, "%s", D->err);
	hp = &D->hp, B = hp->block, ne = hp->n_embd, k = hp->sel_topk;
	if (p0 < 0 || p0 + B > state_config(ds)->n_ctx)
		return util_err(md->err, "DFlash block at %d: the drafter's cache holds %d", p0,
		    state_config(ds)->n_ctx);
	for (int i = 0; i < B; i++)
		x->tok[i] = i == 0 ? anchor : hp->mask_id, x->pos[i] = p0 + i;
	if (backend_embed(md->be, &md->tok_embd, x->tok, B, x->x, ne) ||
	    (hp->emb_scale != 1 && backend_scale(md->be, x->x, (size_t)B * ne, hp->emb_scale)))
		return bfail(md, md->be);
	for (int il = 0; il < hp->n_layer; il++)
		if (block_layer(D, &D->layers[il], ds, p0, B) != 0)
			return util_err(md->err, "DFlash block: %s", D->err);
	if (backend_rmsnorm(D->be, x->x, ne, D->output_norm, x->xn, ne, B, ne, hp->eps))
		return bfail(md, D->be);
	if (block_logits(md, D, B, nl) != 0 ||
	    (o->hidden && backend_read(D->be, o->hidden, x->xn, (size_t)B * ne)) ||
	    (o->logits && backend_read(md->be, o->logits, x->lg, (size_t)(B - 1) * nl)))
		return md->err[0] ? -1 : bfail(md, md->be);
	if (k == 0 || o->cand == NULL || o->lat == NULL)
		return 0;
	if (backend_matmul(D->be, &D->sel_hidden, x->xn + ne, ne, x->gate, hp->sel_rank, B - 1))
		return bfail(md, D->be);
	/* the selector reads them on the host */
	lg = x->hlg ? x->hlg : x->lg, gate = x->hgate ? x->hgate : x->gate;
	if (x->hlg != NULL && (backend_read(D->be, x->hlg, x->lg, (size_t)(B - 1) * nl) ||
	    backend_read(D->be, x->hgate, x->gate, (size_t)(B - 1) * hp->sel_rank)))
		return bfail(md, D->be);
	for (int t = 0; t < B - 1; t++)
		if (lattice(D, lg + (size_t)t * nl, nl, model_draft_ranks(md, NULL, NULL),
		    gate + (size_t)t * hp->sel_rank, anchor, t ? o->cand + (size_t)(t - 1) * k :
		    NULL, o->cand + (size_t)t * k, o->lat + (size_t)t * k * k) != 0)
			return util_err(md->err, "DFlash selector: %s", D->err);
	return 0;
}

int
model_dflash_line(const struct model *md, const char *name, int i, char *buf, size_t n)
{
	const struct model *D = md->dfl;
	const struct model_hparams *hp;
	const struct ranks *r = model_draft_ranks(md, NULL, NULL);
	char taps[MODEL_DFLASH_TAPS * 12] = "";
	size_t k = 0;

	if (n > 0)
		buf[0] = '\0';
	if (D == NULL || i < 0 || i > 1 || (i == 1 && r == NULL))
		return -1;
	hp = &D->hp;
	if (i == 1) {
		snprintf(buf, n, "[dspark] %s: %s draft head TRIMMED to %lld rows", name,
		    hp->sel_topk ? "DFlash2" : "DFlash", (long long)r->n);
		return 0;
	}
	for (int j = 0; j < hp->n_tap && k < sizeof taps; j++)
		k += snprintf(taps + k, sizeof taps - k, "%s%d", j ? "," : "", hp->taps[j]);
	snprintf(buf, n, "[dspark] %s: %s drafter %s: %d layers, block %d, taps [%s], window %d, "
	    "weights %s", name, hp->sel_topk ? "DFlash2" : "DFlash", md->dfl_path, hp->n_layer,
	    hp->block, taps, hp->n_swa, quant_name(D->fc.type));
	return 0;
}
