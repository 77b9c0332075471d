#include "backend_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "util.h"

/*
 * The CPU backend's sequence ops: RoPE, attention over a KV cache, the
 * causal conv1d and the gated delta rule.  Each output row is computed by
 * the same code whether it runs alone or in a batch.
 */

/* --- rope --- */

struct rope_job {
	struct backend_cpu *c;
	float	*x;
	const int32_t *pos;
	const float *inv;		/* [n_rot/2] frequencies */
	int	ldx, n_head, hs, n_rot, neox;
	int	span;			/* the pair offset: n_rot/2, or hs/2 (BACKEND_ROPE_PROP) */
	int	ggml;			/* BACKEND_ROPE_GGML: angles by products of ts */
	float	ts;			/* theta^(-2/n_rot) */
};

/* Rows r0..r1, every head: the angles (and their cosines and sines) once a row. */
static void
rope_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
	struct rope_job *j = ctx;
	int half = j->n_rot / 2, step = j->neox ? 1 : 2, off = j->neox ? j->span : 1;
	float *cs = backend_cpu_scratch(j->c, tid, 2 * (size_t)half), *sn = cs + half;

	if (cs == NULL)
		return;
	for (int64_t r = r0; r < r1; r++) {
		float th = (float)j->pos[r];

		for (int d = 0; d < half; d++, th *= j->ts) {
			float a = j->ggml ? th : (float)j->pos[r] * j->inv[d];

			cs[d] = cosf(a), sn[d] = sinf(a);
		}
		for (int h = 0; h < j->n_head; h++) {
			float *x = j->x + r * j->ldx + h * j->hs;

			for (int d = 0; d < half; d++) {
				float *p = x + d * step, x0 = p[0], x1 = p[off];

				if (j->ggml) {
					p[0] = fmaf(x0, cs[d], -(x1 * sn[d]));
					p[off] = fmaf(x0, sn[d], x1 * cs[d]);
				} else {
					p[0] = x0 * cs[d] - x1 * sn[d];
					p[off] = x0 * sn[d] + x1 * cs[d];
				}
			}
		}
	}
}

int
backend_cpu_rope(struct backend *be, float *x, int ldx, int n_head, int hs,
    int m, const int32_t *pos, int n_rot, float theta, int mode)
{
	int prop = (mode & BACKEND_ROPE_PROP) != 0, dim = prop ? hs : n_rot;
	struct rope_job j = { (struct backend_cpu *)be, x, pos, NULL, ldx, n_head, hs, n_rot,
	    prop || (mode & ~BACKEND_ROPE_GGML) == BACKEND_ROPE_NEOX, dim / 2,
	    (mode & BACKEND_ROPE_GGML) != 0,
	    mode & BACKEND_ROPE_GGML ? powf(theta, -2.0f / (float)n_rot) : 0.0f };
	float *inv = malloc(n_rot / 2 * sizeof *inv);
	int rc;

	if (inv == NULL)
		return util_err(be->err, "rope: out of memory");
	for (int d = 0; d < n_rot / 2; d++)
		inv[d] = 1.0f / powf(theta, (float)(2 * d) / (float)dim);
	j.inv = inv;
	rc = backend_cpu_run((struct backend_cpu *)be, m, 4, rope_rows, &j);
	free(inv);
	return rc ? util_err(be->err, "rope: out of memory") : 0;
}

/*
 * expf, with its underflow taken here: below -104 expf is +0 (e^-104 <
 * 2^-150, half the least subnormal), which libm reaches through its slow
 * errno path; softmax scores less their max and the delta rule's
 * cumulative log-decays go there often.  The same value.
 */
static inline float
expf_uf(float x)
{
	return x < -104.0f ? 0.0f : expf(x);
}

/* --- attention: one (row, head) per item; softmax over 0..p0+row --- */

static float
half(float x)
{
	return quant_f16_to_f32(quant_f32_to_f16(x));
}

int
backend_cpu_round_f16(struct backend *be, float *x, int ldx, int rows, int n)
{
	(void)be;
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < n; j++)
			x[(size_t)r * ldx + j] = half(x[(size_t)r * ldx + j]);
	return 0;
}

/*
 * Attention as llama.cpp's CPU computes it without flash attention, for
 * one (row, head): the F16 cache (a->kv_f16: q and the softmax weights
 * rounded to half, so every product is exact) or the F32 one (a->ggml).
 * K q in lanes: with F16, 16 for a batch (a->batched) else 64; with F32,
 * 64 always (q is not contiguous there, so no sgemm).  The scaled softmax
 * with ggml's exp, its sum in double over blocks of 16 positions summed as
 * 16 lanes, the weights normalized in float.  V p per output dim in lanes
 * over positions, 16 for a batch, else 64 (positions past n add zeros, as
 * llama.cpp's padded cache does; a head_dim not a multiple of the K q
 * width is summed as if padded too, where ggml would add the rest in
 * double).  s: [n + hd + 64 hd] scratch.
 */
static void
attn_head_ggml(const struct backend_cpu *c, const struct backend_attn *a,
    const float *q, const float *k, const float *v, int kvd, int n, float *s,
    float *o)
{
	int hd = a->head_dim, w = a->batched ? 16 : 64, wk = a->kv_f16 ? w : 64;
	float *qh = s + n, *acc = s + n + hd, mx = -INFINITY, blk[64];
	double sum = 0;

	for (int d = 0; d < hd; d++)
		qh[d] = a->kv_f16 ? half(q[d]) : q[d];
	backend_cpu_dot_lanes_rows(c, qh, k, kvd, n, hd, wk, a->scale, s);
	mx = backend_cpu_max(c, s, n);
	backend_cpu_affine(c, s, n, 1.0f, -mx);	/* s - mx: s + (-mx), the same rounding */
	backend_cpu_expf_ggml_n(s, n);
	for (int t0 = 0; t0 < n; t0 += 16) {
		for (int l = 0; l < 16; l++)
			blk[l] = t0 + l < n ? s[t0 + l] : 0.0f;
		sum += backend_cpu_lanes_total(blk, 16);
	}
	float inv = (float)(1.0 / sum);
	memset(acc, 0, (size_t)w * hd * sizeof *acc);
	backend_cpu_affine(c, s, n, inv, -0.0f);	/* s * inv: s + -0 is s, even -0 */
	for (int t = 0; a->kv_f16 && t < n; t++)
		s[t] = half(s[t]);
	backend_cpu_axpy_fma_lanes(c, acc, w, hd, s, v, kvd, n);
	backend_cpu_lanes_cols(c, acc, w, hd, o);
}

/* Row t of keys that start in row r0: r0 + t, wrapped in a ring of `ring` rows (0: none;
 * t < ring). */
static inline size_t
key_row(int r0, int t, int ring)
{
	int row = r0 + t;

	return (size_t)(ring > 0 && row >= ring ? row - ring : row);
}

struct attn_job {
	struct backend_cpu *c;
	const struct backend_attn *a;
	const float *q, *kc, *vc;
	float	*o;
	int	ldq, qhs, p0;
};

static void
attn_heads(void *ctx, int64_t i0, int64_t i1, int tid)
{
	struct attn_job *j = ctx;
	const struct backend_attn *a = j->a;
	int hd = a->head_dim, kvd = a->n_kv_head * hd, grp = a->n_head / a->n_kv_head;

	for (int64_t i = i0; i < i1; i++) {
		int r = i / a->n_head, h = i % a->n_head, p = j->p0 + r, first = 0, r0 = 0;
		int n = (a->hi != NULL ? a->hi[r] : p) + 1;	/* keys 0 .. n - 1 */
		const float *q = j->q + (size_t)r * j->ldq + (size_t)h * j->qhs;
		const float *k = j->kc + (size_t)(h / grp) * hd;
		const float *v = j->vc + (size_t)(h / grp) * hd;
		float *o = j->o + ((size_t)r * a->n_head + h) * hd;
		float *s = backend_cpu_scratch(j->c, tid, n + 65 * (size_t)hd), mx = -INFINITY;
		double sum = 0;

		if (s == NULL)
			return;
		if (a->window > 0 && p + 1 > a->window)	/* from key p + 1 - window */
			first = p + 1 - a->window, n -= first;
		if (a->ring > 0)	/* key j in row j % ring */
			r0 = first % a->ring;
		else
			k += (size_t)first * kvd, v += (size_t)first * kvd;
		if (a->kv_f16 || a->ggml) {
			attn_head_ggml(j->c, a, q, k, v, kvd, n, s, o);
			continue;
		}
		for (int t = 0; t < n; t++) {
			s[t] = j->c->dot(q, k + key_row(r0, t, a->ring) * kvd, hd) * a->scale;
			mx = s[t] > mx ? s[t] : mx;
		}
		for (int t = 0; t < n; t++)
			sum += s[t] = expf_uf(s[t] - mx);
		memset(o, 0, hd * sizeof *o);
		for (int t = 0; t < n; t++)
			backend_cpu_axpy(j->c, o, s[t], v + key_row(r0, t, a->ring) * kvd, hd);
		float inv = (float)(1.0 / sum);
		for (int d = 0; d < hd; d++)
			o[d] *= inv;
	}
}

int
backend_cpu_attention(struct backend *be, const struct backend_attn *a,
    const float *q, int ldq, int qhs, const float *kc, const float *vc, int m,
    int p0, float *o)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	struct attn_job j = { c, a, q, kc, vc, o, ldq, qhs, p0 };

	if (backend_cpu_run(c, (int64_t)m * a->n_head, 1, attn_heads, &j) != 0)
		return util_err(be->err, "attention: out of memory");
	return 0;
}

/* --- causal depthwise conv1d + SiLU, with state --- */

struct conv_job {
	const float *x, *w;
	float	*state, *snap, *y;
	int	ldx, m, n_ch, d_conv;
};

static void
conv_channels(void *ctx, int64_t c0, int64_t c1, int tid)
{
	struct conv_job *j = ctx;
	int ns = j->d_conv - 1;

	for (int64_t c = c0; c < c1; c++) {
		const float *w = j->w + c * j->d_conv;
		float win[16], *st = j->state + c;	/* win: the last ns inputs */

		for (int k = 0; k < ns; k++)
			win[k] = st[(size_t)k * j->n_ch];
		for (int t = 0; t < j->m; t++) {
			float in = j->x[(size_t)t * j->ldx + c], acc = 0;

			for (int k = 0; k < ns; k++)
				acc += win[k] * w[k];
			acc += in * w[ns];
			j->y[(size_t)t * j->n_ch + c] = acc;	/* its SiLU below */
			for (int k = 0; k + 1 < ns; k++)	/* a few floats: no call */
				win[k] = win[k + 1];
			win[ns - 1] = in;
			for (int k = 0; j->snap != NULL && k < ns; k++)
				j->snap[((size_t)t * ns + k) * j->n_ch + c] = win[k];
		}
		for (int k = 0; k < ns; k++)
			st[(size_t)k * j->n_ch] = win[k];
	}
	for (int t = 0; t < j->m; t++)
		backend_cpu_silu_n(j->y + (size_t)t * j->n_ch + c0, c1 - c0);
}

int
backend_cpu_conv1d_silu(struct backend *be, const float *x, int ldx, int m,
    int n_ch, const float *w, int d_conv, float *state, float *snap, float *y)
{
	struct conv_job j = { x, w, state, snap, y, ldx, m, n_ch, d_conv };

	if (d_conv > 17)
		return util_err(be->err, "conv1d: kernel size %d > 17", d_conv);
	return backend_cpu_run((struct backend_cpu *)be, n_ch, 64, conv_channels, &j);
}

/* --- the gated delta rule --- */


struct gdn_job {
	struct backend_cpu *c;
	const struct backend_gdn *g;
	const float *qkv, *a, *b, *ssm_a, *dt_bias;
	float	*S, *snap, *o;
	int	ld, m;
};

/* Row r's inputs for value head h: normalised q (scaled) and k, v, beta, g. */
struct gdn_in {
	float	*q, *k;		/* [dk], the caller's buffers */
	const float *v;		/* [dv] */
	float	beta, gate;	/* gate: the log-decay g <= 0 */
};

static void
l2n(struct backend_cpu *c, const struct backend_gdn *g, const float *x, float *y,
    float mul)
{
	float ss = c->dot(x, x, g->dk), s;

	if (g->hf_l2)
		s = 1.0f / sqrtf(ss + g->eps);
	else
		s = 1.0f / (sqrtf(ss) > g->eps ? sqrtf(ss) : g->eps);
	for (int i = 0; i < g->dk; i++)
		y[i] = x[i] * s * mul;
}

static void
gdn_load(struct gdn_job *j, int r, int h, struct gdn_in *in)
{
	const struct backend_gdn *g = j->g;
	int kh = g->v_tiled ? h % g->n_k_heads : h / (g->n_v_heads / g->n_k_heads);
	const float *row = j->qkv + (size_t)r * j->ld;
	size_t kd = (size_t)g->n_k_heads * g->dk;

	l2n(j->c, g, row + (size_t)kh * g->dk, in->q, 1.0f / sqrtf((float)g->dk));
	l2n(j->c, g, row + kd + (size_t)kh * g->dk, in->k, 1.0f);
	in->v = row + 2 * kd + (size_t)h * g->dv;
	in->beta = backend_cpu_sigmoid(j->b[(size_t)r * g->n_v_heads + h]);
	in->gate = j->ssm_a[h] * backend_cpu_softplus(j->a[(size_t)r * g->n_v_heads + h]
	    + j->dt_bias[h]);
}

/* One recurrent step of one head: S [dk][dv] updated, o [dv] written. */
static void
gdn_step1(const struct backend_cpu *cpu, const struct backend_gdn *g,
    const struct gdn_in *in, float *S, float *kv, float *o)
{
	float decay = expf_uf(in->gate);
	int dk = g->dk, dv = g->dv;

	for (int c = 0; c < dv; c++)
		kv[c] = 0;
	backend_cpu_decay_rows(cpu, S, dk, dv, decay, kv, in->k);
	for (int c = 0; c < dv; c++) {
		kv[c] = in->beta * (in->v[c] - kv[c]);	/* now delta */
		o[c] = 0;
	}
	backend_cpu_update_rows(cpu, S, dk, dv, in->k, kv, o, in->q);
}

static void
gdn_step_heads(void *ctx, int64_t h0, int64_t h1, int tid)
{
	struct gdn_job *j = ctx;
	const struct backend_gdn *g = j->g;
	size_t hsz = (size_t)g->dk * g->dv, vd = (size_t)g->n_v_heads * g->dv;
	float *buf = backend_cpu_scratch(j->c, tid, 2 * g->dk + g->dv);
	struct gdn_in in;

	if (buf == NULL)
		return;
	in.q = buf;
	in.k = buf + g->dk;
	for (int64_t h = h0; h < h1; h++) {
		float *S = j->S + h * hsz;

		for (int r = 0; r < j->m; r++) {
			gdn_load(j, r, h, &in);
			gdn_step1(j->c, g, &in, S, buf + 2 * g->dk, j->o + r * vd + h * g->dv);
			if (j->snap != NULL)
				memcpy(j->snap + r * vd * g->dk + h * hsz, S, hsz * sizeof *S);
		}
	}
}

int
backend_cpu_gdn_step(struct backend *be, const struct backend_gdn *g, int m,
    const float *qkv, int ld, const float *a, const float *b,
    const float *ssm_a, const float *dt_bias, float *S, float *snap, float *o)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	struct gdn_job j = { c, g, qkv, a, b, ssm_a, dt_bias, S, snap, o, ld, m };

	if (backend_cpu_run(c, g->n_v_heads, 1, gdn_step_heads, &j) != 0)
		return util_err(be->err, "gdn: out of memory");
	return 0;
}

/*
 * backend_gdn_step_seqs: one job over (sequence, head) pairs, each head
 * stepped by gdn_step_heads on its sequence's job (the same code as a
 * call of its own: the same bits), so a group's heads share the threads.
 */
struct gdn_seqs_job {
	struct gdn_job *j;	/* [n] */
	int	nv;
};

static void
gdn_seqs_heads(void *ctx, int64_t p0, int64_t p1, int tid)
{
	struct gdn_seqs_job *q = ctx;

	for (int64_t p = p0; p < p1; p++)
		gdn_step_heads(&q->j[p / q->nv], p % q->nv, p % q->nv + 1, tid);
}

int
backend_cpu_gdn_step_seqs(struct backend *be, const struct backend_gdn *g, int n,
    const struct backend_seq *sq, const float *qkv, int ld, const float *a, const float *b,
    const float *ssm_a, const float *dt_bias, float *o)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	size_t nv = (size_t)g->n_v_heads, vd = nv * (size_t)g->dv;
	struct gdn_seqs_job q = { calloc((size_t)n, sizeof *q.j), g->n_v_heads };
	int rc;

	if (q.j == NULL)
		return util_err(be->err, "gdn: out of memory");
	for (int i = 0, r = 0; i < n; r += sq[i++].rows)
		q.j[i] = (struct gdn_job){ c, g, qkv + (size_t)r * ld, a + r * nv, b + r * nv,
		    ssm_a, dt_bias, sq[i].state, sq[i].snap, o + r * vd, ld, sq[i].rows };
	rc = backend_cpu_run(c, (int64_t)n * g->n_v_heads, 1, gdn_seqs_heads, &q);
	free(q.j);
	return rc != 0 ? util_err(be->err, "gdn: out of memory") : 0;
}

/*
 * The chunked form (prefill): per chunk of L <= GDN_CHUNK rows with
 * cumulative log-decay G, T = (I + tril(diag(beta) K K^T . e^(G_i-G_j), -1))^-1,
 * U = T diag(beta) V, W = T diag(beta e^G) K; then with the state S at the
 * chunk start: Vn = U - W S, O = diag(e^G) Q S + tril(Q K^T . e^(G_i-G_j)) Vn,
 * S = e^(G_L) S + K^T diag(e^(G_L - G)) Vn.  Equal to L recurrent steps in
 * exact arithmetic.
 */
enum { GDN_CHUNK = 64 };

struct gdn_chunk_buf {
	float	*q, *k;			/* [C][dk] */
	float	*beta, *G, *trow;	/* [C] */
	float	*T;			/* [C][C] */
	float	*U, *W;			/* [C][dv], [C][dk] */
	float	*ca, *cb;		/* [max(C, dk)] coefficients */
	const float *v[GDN_CHUNK];
};

static void
gdn_chunk_prep(struct gdn_job *j, int h, int t0, int L, struct gdn_chunk_buf *b)
{
	const struct backend_gdn *g = j->g;
	int dk = g->dk, C = GDN_CHUNK;
	struct gdn_in in;

	for (int t = 0; t < L; t++) {
		in.q = b->q + t * dk;
		in.k = b->k + t * dk;
		gdn_load(j, t0 + t, h, &in);
		b->v[t] = in.v;
		b->beta[t] = in.beta;
		b->G[t] = (t ? b->G[t - 1] : 0) + in.gate;
	}
	for (int i = 0; i < L; i++) {
		for (int c = 0; c < i; c++)
			b->trow[c] = -(b->beta[i] * j->c->dot(b->k + i * dk, b->k + c * dk, dk))
			    * expf_uf(b->G[i] - b->G[c]);
		for (int c = 0; c < i; c++) {
			float acc = b->trow[c];

			for (int l = c + 1; l < i; l++)
				acc += b->trow[l] * b->T[l * C + c];
			b->T[i * C + c] = acc;
		}
		b->T[i * C + i] = 1.0f;
	}
}

static void
gdn_chunk1(struct gdn_job *j, int h, int t0, int L, float *S, struct gdn_chunk_buf *b)
{
	const struct backend_gdn *g = j->g;
	int dk = g->dk, dv = g->dv, C = GDN_CHUNK;
	size_t vd = (size_t)g->n_v_heads * dv;
	float *U = b->U, *W = b->W, *ca = b->ca, *cb = b->cb, eL;

	/* each axpy sequence below is the per-row loop's, rows in the same order
	 * (backend_cpu_axpy_rows); v rows are the qkv rows' v of head h, ld apart */
	gdn_chunk_prep(j, h, t0, L, b);
	for (int t = 0; t < L; t++) {
		float *u = U + t * dv, *w = W + t * dk;

		memset(u, 0, dv * sizeof *u);
		memset(w, 0, dk * sizeof *w);
		for (int c = 0; c <= t; c++) {
			ca[c] = b->T[t * C + c] * b->beta[c];
			cb[c] = ca[c] * expf_uf(b->G[c]);
		}
		backend_cpu_axpy_rows(j->c, u, dv, ca, b->v[0], j->ld, t + 1);
		backend_cpu_axpy_rows(j->c, w, dk, cb, b->k, dk, t + 1);
		for (int i = 0; i < dk; i++)	/* u becomes Vn[t] = U[t] - W[t] S */
			ca[i] = -w[i];
		backend_cpu_axpy_rows(j->c, u, dv, ca, S, dv, dk);
	}
	for (int t = 0; t < L; t++) {
		float *o = j->o + (size_t)(t0 + t) * vd + (size_t)h * dv, eg = expf_uf(b->G[t]);

		memset(o, 0, dv * sizeof *o);
		backend_cpu_axpy_rows(j->c, o, dv, b->q + t * dk, S, dv, dk);
		for (int d = 0; d < dv; d++)
			o[d] *= eg;
		for (int c = 0; c <= t; c++)
			ca[c] = j->c->dot(b->q + t * dk, b->k + c * dk, dk) *
			    expf_uf(b->G[t] - b->G[c]);
		backend_cpu_axpy_rows(j->c, o, dv, ca, U, dv, t + 1);
	}
	eL = expf_uf(b->G[L - 1]);
	for (int i = 0; i < dk * dv; i++)
		S[i] *= eL;
	for (int t = 0; t < L; t++)
		cb[t] = expf_uf(b->G[L - 1] - b->G[t]);
	for (int i = 0; i < dk; i++) {	/* S[i] += sum over t of k[t][i] e[t] U[t], t in order */
		for (int t = 0; t < L; t++)
			ca[t] = b->k[t * dk + i] * cb[t];
		backend_cpu_axpy_rows(j->c, S + (size_t)i * dv, dv, ca, U, dv, L);
	}
}

static void
gdn_chunk_heads(void *ctx, int64_t h0, int64_t h1, int tid)
{
	struct gdn_job *j = ctx;
	const struct backend_gdn *g = j->g;
	int C = GDN_CHUNK, dk = g->dk, dv = g->dv;
	int nc = C > dk ? C : dk;
	float *p = backend_cpu_scratch(j->c, tid,
	    (size_t)C * (3 * dk + dv + C + 3) + 2 * (size_t)nc);
	struct gdn_chunk_buf b;

	if (p == NULL)
		return;
	b.q = p;
	b.k = b.q + C * dk;
	b.W = b.k + C * dk;
	b.U = b.W + C * dk;
	b.T = b.U + C * dv;
	b.beta = b.T + C * C;
	b.G = b.beta + C;
	b.trow = b.G + C;
	b.ca = b.trow + C;
	b.cb = b.ca + nc;
	for (int64_t h = h0; h < h1; h++)
		for (int t0 = 0; t0 < j->m; t0 += C)
			gdn_chunk1(j, h, t0, j->m - t0 < C ? j->m - t0 : C,
			    j->S + h * (size_t)dk * dv, &b);
}

int
backend_cpu_gdn_chunk(struct backend *be, const struct backend_gdn *g, int m,
    const float *qkv, int ld, const float *a, const float *b,
    const float *ssm_a, const float *dt_bias, float *S, float *o)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	struct gdn_job j = { c, g, qkv, a, b, ssm_a, dt_bias, S, NULL, o, ld, m };

	if (backend_cpu_run(c, g->n_v_heads, 1, gdn_chunk_heads, &j) != 0)
		return util_err(be->err, "gdn: out of memory");
	return 0;
}
