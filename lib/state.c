#include "state.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct state {
	struct backend *be;
	struct state_config c;
	int	pos;
	int	batch_p0, batch_m;	/* the last snapped push; batch_m 0: none */
	float	**k, **v;		/* [n_kv] -> [n_ctx][kv_width(i)] */
	float	**conv, **ssm;		/* [n_rec] -> the live recurrent state */
	float	**conv_snap, **ssm_snap;	/* [n_rec] -> [n_snap][...], NULL if n_snap 0 */
	struct state **part;		/* [n_part] a split state's stages; NULL: none */
	int	n_part;
	char	err[UTIL_ERRLEN];
};

/* f on every part of a split state s, each on its device; a failure's reason to s. */
#define EACH_PART(s, call) do {						\
	for (int p_ = 0; p_ < (s)->n_part; p_++) {			\
		struct state *q_ = (s)->part[p_];			\
		if (backend_use(q_->be) != 0 || (call) < 0)		\
			return util_err((s)->err, "stage %d: %s", p_,	\
			    q_->err[0] ? q_->err : backend_errmsg(q_->be)); \
	}								\
} while (0)

static size_t
conv_size(const struct state_config *c)
{
	return (size_t)(c->d_conv - 1) * c->conv_dim;
}

static size_t
ssm_size(const struct state_config *c)
{
	return (size_t)c->n_v_heads * c->dk * c->dv;
}

int
state_is_ring(const struct state_config *c, int i)
{
	return i >= c->n_kv - c->n_ring && i < c->n_kv;
}

/* Rows of cache i: a ring's, or n_ctx. */
static size_t
kv_rows(const struct state_config *c, int i)
{
	return state_is_ring(c, i) ? (size_t)c->ring : (size_t)c->n_ctx;
}

/* Cache i's row width in floats. */
static size_t
kv_width(const struct state_config *c, int i)
{
	return (size_t)(c->kv_w != NULL ? c->kv_w[i] : c->kv_dim);
}

int
state_kv_row(const struct state_config *c, int i, int pos)
{
	return state_is_ring(c, i) ? pos % c->ring : pos;
}

int
state_kv_rows(const struct state_config *c, int i, int pos, int n)
{
	int r = state_kv_row(c, i, pos);

	return state_is_ring(c, i) && n > c->ring - r ? c->ring - r : n;
}

static int
check_config(const struct state_config *c, char *err)
{
	if (c->n_ctx <= 0 || c->n_kv < 0 || c->n_rec < 0 || c->n_snap < 0)
		return util_err(err, "state: bad config (n_ctx %d, %d caches, %d "
		    "recurrent layers, %d snapshots)", c->n_ctx, c->n_kv, c->n_rec, c->n_snap);
	if (c->n_ring < 0 || c->n_ring > c->n_kv || (c->n_ring > 0 && c->ring < 1))
		return util_err(err, "state: %d of %d caches rings of %d rows", c->n_ring, c->n_kv,
		    c->ring);
	if (c->n_ring > 0 && (c->window < 0 || c->window > c->ring))
		return util_err(err, "state: rings of %d rows, a window of %d keys", c->ring,
		    c->window);
	if (c->n_kv > 0 && c->kv_dim <= 0)
		return util_err(err, "state: kv_dim %d", c->kv_dim);
	for (int i = 0; c->kv_w != NULL && i < c->n_kv; i++)
		if (c->kv_w[i] < 1 || c->kv_w[i] > c->kv_dim)
			return util_err(err, "state: cache %d: rows of %d floats (1..%d)", i,
			    c->kv_w[i], c->kv_dim);
	if (c->n_rec > 0 && (c->conv_dim <= 0 || c->d_conv < 2 || c->n_v_heads <= 0 ||
	    c->dk <= 0 || c->dv <= 0))
		return util_err(err, "state: bad recurrent shape (conv %d x %d, %d heads "
		    "of %d x %d)", c->d_conv, c->conv_dim, c->n_v_heads, c->dk, c->dv);
	return 0;
}

/*
 * Each set of a state's buffers (K, V, the recurrent states, their
 * snapshots) is one backend allocation with the set's arrays inside it,
 * set[0] at its start: a device allocates in pages (2 MiB on a GPU), so
 * an allocation per cache would waste up to a page each (a 60-layer model's
 * 120 caches a session), memory the scheduler's fit does not count.
 */
#define SET_ALIGN 16		/* floats: each array starts 64 bytes in */

static size_t
set_round(size_t n)
{
	return (n + SET_ALIGN - 1) / SET_ALIGN * SET_ALIGN;
}

static size_t
kv_floats(const struct state_config *c, int i)
{
	return kv_rows(c, i) * kv_width(c, i);
}

/* Array i of a set: cache i's rows (kv, the state's config), or each floats (kv NULL). */
static size_t
array_floats(const struct state_config *kv, int i, size_t each)
{
	return kv != NULL ? kv_floats(kv, i) : each;
}

/* n arrays (array_floats) into *set; 0, or -1 when out of memory */
static int
alloc_arrays(struct backend *be, float ***set, int n, const struct state_config *kv,
    size_t each)
{
	size_t total = 0, at = 0;
	float *base;

	for (int i = 0; i < n; i++)
		total += set_round(array_floats(kv, i, each));
	if (total == 0)
		return 0;
	if ((*set = calloc(n, sizeof **set)) == NULL ||
	    (base = backend_alloc(be, total)) == NULL)
		return -1;
	for (int i = 0; i < n; i++) {
		(*set)[i] = base + at;
		at += set_round(array_floats(kv, i, each));
	}
	return 0;
}

static void
free_set(struct backend *be, float **set)
{
	if (set != NULL)
		backend_mfree(be, set[0]);	/* the set's one allocation */
	free(set);
}

size_t
state_bytes(const struct state_config *c)
{
	size_t kv = 0;

	for (int i = 0; i < c->n_kv; i++)
		kv += kv_floats(c, i);
	return sizeof(float) * (2 * kv +
	    (conv_size(c) + ssm_size(c)) * (size_t)c->n_rec * (1 + (size_t)c->n_snap));
}

struct state *
state_new(struct backend *be, const struct state_config *c, char *err)
{
	struct state *s;

	if (check_config(c, err) != 0)
		return NULL;
	if ((s = calloc(1, sizeof *s)) == NULL) {
		util_err(err, "state: out of memory");
		return NULL;
	}
	s->be = be;
	s->c = *c;
	if (alloc_arrays(be, &s->k, c->n_kv, c, 0) || alloc_arrays(be, &s->v, c->n_kv, c, 0) ||
	    alloc_arrays(be, &s->conv, c->n_rec, NULL, conv_size(c)) ||
	    alloc_arrays(be, &s->ssm, c->n_rec, NULL, ssm_size(c)) ||
	    alloc_arrays(be, &s->conv_snap, c->n_rec, NULL, conv_size(c) * c->n_snap) ||
	    alloc_arrays(be, &s->ssm_snap, c->n_rec, NULL, ssm_size(c) * c->n_snap)) {
		util_err(err, "state: out of memory");
		state_free(s);
		return NULL;
	}
	return s;
}

struct state *
state_new_split(struct state **parts, int n, const struct state_config *c, char *err)
{
	struct state *s = NULL;

	if (n < 2 || n > 16)
		util_err(err, "state: %d parts", n);
	else if (check_config(c, err) == 0 && ((s = calloc(1, sizeof *s)) == NULL ||
	    (s->part = calloc(n, sizeof *s->part)) == NULL))
		util_err(err, "state: out of memory");
	else if (s != NULL) {
		s->c = *c;
		s->n_part = n;
		memcpy(s->part, parts, n * sizeof *parts);
		return s;
	}
	if (s != NULL)
		free(s);
	for (int i = 0; i < n; i++)
		state_free(parts[i]);
	return NULL;
}

struct state *
state_part(struct state *s, int i)
{
	if (s->part != NULL)
		return i >= 0 && i < s->n_part ? s->part[i] : NULL;
	return i == 0 ? s : NULL;
}

int
state_parts(const struct state *s)
{
	return s->part != NULL ? s->n_part : 1;
}

struct backend *
state_backend(const struct state *s)
{
	return s->part != NULL ? NULL : s->be;
}

void
state_free(struct state *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < s->n_part; i++)
		if (backend_use(s->part[i]->be) == 0)
			state_free(s->part[i]);
	free(s->part);
	free_set(s->be, s->k);
	free_set(s->be, s->v);
	free_set(s->be, s->conv);
	free_set(s->be, s->ssm);
	free_set(s->be, s->conv_snap);
	free_set(s->be, s->ssm_snap);
	free(s);
}

const char *
state_errmsg(const struct state *s)
{
	return s->err;
}

const struct state_config *
state_config(const struct state *s)
{
	return &s->c;
}

int
state_pos(const struct state *s)
{
	return s->pos;
}

int
state_reset(struct state *s)
{
	s->pos = 0;
	s->batch_m = 0;
	EACH_PART(s, state_reset(q_));
	for (int l = 0; s->part == NULL && l < s->c.n_rec; l++)
		if (backend_fill(s->be, s->conv[l], 0, conv_size(&s->c)) != 0 ||
		    backend_fill(s->be, s->ssm[l], 0, ssm_size(&s->c)) != 0)
			return util_err(s->err, "state: %s", backend_errmsg(s->be));
	return 0;
}

int
state_push(struct state *s, int m, int snap)
{
	int p0 = s->pos;

	if (m < 1 || m > s->c.n_ctx - s->pos)
		return util_err(s->err, "state: %d rows at position %d do not fit in "
		    "a context of %d", m, s->pos, s->c.n_ctx);
	if (snap && m > s->c.n_snap)
		return util_err(s->err, "state: %d rows to snapshot, room for %d",
		    m, s->c.n_snap);
	EACH_PART(s, state_push(q_, m, snap));
	s->pos += m;
	s->batch_p0 = p0;
	s->batch_m = snap ? m : 0;
	return p0;
}

int
state_rollback(struct state *s, int keep)
{
	int m = s->batch_m;

	if (m == 0)
		return util_err(s->err, "state: rollback: the last batch kept no snapshots");
	if (keep < 1 || keep > m)
		return util_err(s->err, "state: rollback: keep %d of %d rows", keep, m);
	EACH_PART(s, state_rollback(q_, keep));
	s->batch_m = 0;
	s->pos = s->batch_p0 + keep;
	if (keep == m || s->part != NULL)
		return 0;
	for (int l = 0; l < s->c.n_rec; l++)
		if (backend_copy(s->be, s->conv[l], s->conv_snap[l] +
		    (keep - 1) * conv_size(&s->c), conv_size(&s->c)) != 0 ||
		    backend_copy(s->be, s->ssm[l], s->ssm_snap[l] +
		    (keep - 1) * ssm_size(&s->c), ssm_size(&s->c)) != 0)
			return util_err(s->err, "state: %s", backend_errmsg(s->be));
	return 0;
}

int
state_truncate(struct state *s, int pos)
{
	if (pos < 0 || pos > s->pos)
		return util_err(s->err, "state: truncate to %d past position %d", pos, s->pos);
	if (s->c.n_rec > 0 && pos != s->pos)
		return util_err(s->err, "state: truncate: recurrent state cannot go back "
		    "without a snapshot");
	if (!state_back(s, pos))
		return util_err(s->err, "state: truncate: back %d positions from %d, past what "
		    "its rings of %d rows keep (a window of %d keys)", s->pos - pos, s->pos,
		    s->c.ring, s->c.window);
	EACH_PART(s, state_truncate(q_, pos));
	s->pos = pos;
	s->batch_m = 0;
	return 0;
}

int
state_back(const struct state *s, int pos)
{
	int w = s->c.window > 0 ? s->c.window : s->c.ring;

	return pos >= 0 && pos <= s->pos && (s->c.n_ring == 0 || s->pos - pos <= s->c.ring - w + 1);
}

int
state_seek(struct state *s, int pos)
{
	if (pos < 0 || pos > s->c.n_ctx)
		return util_err(s->err, "state: seek to %d in a context of %d", pos, s->c.n_ctx);
	EACH_PART(s, state_seek(q_, pos));
	s->pos = pos;
	s->batch_m = 0;
	return 0;
}

size_t
state_rec_floats(const struct state_config *c)
{
	return c->n_rec > 0 ? (conv_size(c) + ssm_size(c)) * c->n_rec : 0;
}

/* Copy the live recurrent state to (save) or from (load) arr. */
static int
rec_move(struct state *s, float *arr, int save)
{
	size_t cs = conv_size(&s->c), ss = ssm_size(&s->c);

	if (s->part != NULL && s->c.n_rec > 0)
		return util_err(s->err, "state: the recurrent state of a split sequence is "
		    "its stages' (state_part)");
	for (int l = 0; l < s->c.n_rec; l++) {
		float *p = arr + (cs + ss) * l;

		if ((save ? backend_copy(s->be, p, s->conv[l], cs) || backend_copy(s->be, p + cs,
		    s->ssm[l], ss) : backend_copy(s->be, s->conv[l], p, cs) ||
		    backend_copy(s->be, s->ssm[l], p + cs, ss)) != 0)
			return util_err(s->err, "state: %s", backend_errmsg(s->be));
	}
	return 0;
}

int
state_rec_save(struct state *s, float *dst)
{
	return rec_move(s, dst, 1);
}

int
state_rec_load(struct state *s, const float *src)
{
	return rec_move(s, (float *)src, 0);
}

size_t
state_ring_floats(const struct state_config *c)
{
	size_t n = 0;

	for (int i = c->n_kv - c->n_ring; i < c->n_kv; i++)
		n += 2 * (size_t)c->ring * kv_width(c, i);
	return n;
}

/* Copy the rings to (save) or from (load) arr: each ring's K rows, then its V rows. */
static int
ring_move(struct state *s, float *arr, int save)
{
	float *p = arr;

	if (s->part != NULL && s->c.n_ring > 0)
		return util_err(s->err, "state: the rings of a split sequence are its stages' "
		    "(state_part)");
	for (int r = 0; r < s->c.n_ring; r++) {
		int i = s->c.n_kv - s->c.n_ring + r;
		size_t n = (size_t)s->c.ring * kv_width(&s->c, i);

		if ((save ? backend_copy(s->be, p, s->k[i], n) || backend_copy(s->be, p + n,
		    s->v[i], n) : backend_copy(s->be, s->k[i], p, n) ||
		    backend_copy(s->be, s->v[i], p + n, n)) != 0)
			return util_err(s->err, "state: %s", backend_errmsg(s->be));
		p += 2 * n;
	}
	return 0;
}

int
state_ring_save(struct state *s, float *dst)
{
	return ring_move(s, dst, 1);
}

int
state_ring_load(struct state *s, const float *src)
{
	return ring_move(s, (float *)src, 0);
}

/* 1 when a and b shape states alike (field by field: a struct's padding is no part of it). */
static int
same_config(const struct state_config *a, const struct state_config *b)
{
	if (a->n_ctx != b->n_ctx || a->n_kv != b->n_kv || a->kv_dim != b->kv_dim ||
	    a->n_rec != b->n_rec || a->conv_dim != b->conv_dim || a->d_conv != b->d_conv ||
	    a->n_v_heads != b->n_v_heads || a->dk != b->dk || a->dv != b->dv ||
	    a->n_snap != b->n_snap || a->n_ring != b->n_ring || a->ring != b->ring ||
	    a->window != b->window || (a->kv_w == NULL) != (b->kv_w == NULL))
		return 0;
	for (int i = 0; a->kv_w != NULL && i < a->n_kv; i++)
		if (a->kv_w[i] != b->kv_w[i])
			return 0;
	return 1;
}

int
state_copy(struct state *dst, const struct state *src)
{
	const struct state_config *c = &src->c;
	int rc = 0, n_kv = dst->part ? 0 : c->n_kv, n_rec = dst->part ? 0 : c->n_rec;

	if (!same_config(&dst->c, c) || dst->be != src->be ||
	    dst->n_part != src->n_part)
		return util_err(dst->err, "state: copy between different configs");
	for (int p = 0; p < dst->n_part; p++)
		if (backend_use(dst->part[p]->be) != 0 || state_copy(dst->part[p], src->part[p]))
			return util_err(dst->err, "stage %d: %s", p, dst->part[p]->err);
	for (int i = 0; rc == 0 && i < n_kv; i++) {	/* the rows written: a ring's, all once full */
		size_t used = ((size_t)src->pos < kv_rows(c, i) ? (size_t)src->pos : kv_rows(c, i)) *
		    kv_width(c, i);

		rc = backend_copy(dst->be, dst->k[i], src->k[i], used) ||
		    backend_copy(dst->be, dst->v[i], src->v[i], used);
	}
	for (int l = 0; rc == 0 && l < n_rec; l++)
		rc = backend_copy(dst->be, dst->conv[l], src->conv[l], conv_size(c)) ||
		    backend_copy(dst->be, dst->ssm[l], src->ssm[l], ssm_size(c));
	if (rc != 0)
		return util_err(dst->err, "state: %s", backend_errmsg(dst->be));
	dst->pos = src->pos;
	dst->batch_m = 0;
	return 0;
}

float *
state_k(struct state *s, int i)
{
	return i >= 0 && i < s->c.n_kv && s->k ? s->k[i] : NULL;
}

float *
state_v(struct state *s, int i)
{
	return i >= 0 && i < s->c.n_kv && s->v ? s->v[i] : NULL;
}

float *
state_conv(struct state *s, int l)
{
	return l >= 0 && l < s->c.n_rec && s->conv ? s->conv[l] : NULL;
}

float *
state_ssm(struct state *s, int l)
{
	return l >= 0 && l < s->c.n_rec && s->ssm ? s->ssm[l] : NULL;
}

float *
state_conv_snap(struct state *s, int l)
{
	return l >= 0 && l < s->c.n_rec && s->conv_snap ? s->conv_snap[l] : NULL;
}

float *
state_ssm_snap(struct state *s, int l)
{
	return l >= 0 && l < s->c.n_rec && s->ssm_snap ? s->ssm_snap[l] : NULL;
}
