#include "backend_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/*
 * The CPU backend's mixture of experts.  The router runs row by row on
 * the caller's thread; the experts' products gather each expert's slots
 * into contiguous rows and run the dense products (backend_cpu_matmul,
 * _swiglu) on that expert's matrix, whose rows are bit-identical for
 * any number of rows, so a slot's result is its one-row product's.
 */

/* The caller's MoE scratch of at least n floats, or NULL. */
static float *
scratch(struct backend_cpu *c, size_t n)
{
	if (c->moe.n < n) {
		float *p = NULL;

		if (posix_memalign((void **)&p, 64, n * sizeof *p) != 0)
			return NULL;
		free(c->moe.p);
		c->moe.p = p;
		c->moe.n = n;
	}
	return c->moe.p;
}

/* p[0..n) = softmax(x) in float32: exp(x - max) / their sum, summed in order. */
static void
softmax(const float *x, int n, float *p)
{
	float mx = x[0], sum = 0;

	for (int i = 1; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	for (int i = 0; i < n; i++)
		sum += p[i] = expf(x[i] - mx);
	for (int i = 0; i < n; i++)
		p[i] /= sum;
}

int
backend_cpu_moe_route(struct backend *be, const float *x, int ldx, int m, int n, int k,
    int32_t *ids, float *w)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	float *p = scratch(c, (size_t)n);

	if (p == NULL)
		return util_err(be->err, "moe_route: out of memory");
	for (int r = 0; r < m; r++) {
		int32_t *id = ids + (size_t)r * k;
		float *wr = w + (size_t)r * k, sum = 0;

		softmax(x + (size_t)r * ldx, n, p);
		for (int j = 0; j < k; j++) {	/* the largest left; the lowest id on ties */
			int b = -1;

			for (int e = 0; e < n; e++)
				if (p[e] >= 0 && (b < 0 || p[e] > p[b]))
					b = e;
			id[j] = b;
			if (b < 0) {	/* none left (NaN keys): a NaN weight, as the GPU's */
				wr[j] = NAN;
				continue;
			}
			sum += wr[j] = p[b];
			p[b] = -1;	/* taken */
		}
		for (int j = 0; j < k; j++)
			wr[j] /= sum;
	}
	return 0;
}

/*
 * The m*k slots of ids grouped by expert: slots order[start[e] ..
 * start[e+1]) go to expert e, in slot order; pos[s] is slot s's place in
 * that order.  -1 when an id is outside [0, n_exp).
 */
static int
group(const int32_t *ids, int mk, int n_exp, int32_t *start, int32_t *order, int32_t *pos)
{
	memset(start, 0, (n_exp + 1) * sizeof *start);
	for (int s = 0; s < mk; s++) {
		if (ids[s] < 0 || ids[s] >= n_exp)
			return -1;
		start[ids[s] + 1]++;
	}
	for (int e = 0; e < n_exp; e++)
		start[e + 1] += start[e];
	for (int s = 0; s < mk; s++)	/* start[e] moves to expert e's end */
		pos[s] = start[ids[s]]++;
	for (int e = n_exp; e > 0; e--)
		start[e] = start[e - 1];
	start[0] = 0;
	for (int s = 0; s < mk; s++)
		order[pos[s]] = s;
	return 0;
}

/* Expert e's matrix of the stack w (n_exp experts) as a weight of its own, its scale its own. */
static struct backend_weight
expert(const struct backend_weight *w, int n_exp, int e)
{
	struct backend_weight v = *w;

	v.ne1 = w->ne1 / n_exp;
	v.data = (const char *)w->data + (size_t)e * v.ne1 * w->row_size;
	v.priv = NULL;
	if (w->escale != NULL)
		v.scale = w->escale[e];
	v.escale = NULL;
	v.n_escale = 0;
	return v;
}

/*
 * The products of slot rows through each slot's expert: slot s's input
 * row is x + (s / per) * ldx (per = 1: a row per slot; k: a row per
 * token); Y[pos[s]][nout] gets its product (swiglu with wu, else plain).
 * Scratch layout: ints start, order, pos; X; Y.
 */
struct moe_run {
	const struct backend_weight *w, *wu;
	float	limit;		/* > 0: the SwiGLU limit (gate and up apart, in U) */
	float	*U;
	int	n_exp, mk, per, ldx;
	const float *x;
	const int32_t *ids;
	int32_t	*start, *order, *pos;
	float	*X, *Y;
	int64_t	nout;
};

static int
moe_prepare(struct backend *be, const char *op, struct moe_run *r)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	size_t ni = (size_t)r->n_exp + 1 + 2 * (size_t)r->mk, ne0 = r->w->ne0;
	size_t nu = r->limit > 0 ? (size_t)r->mk * r->nout : 0;
	float *p = scratch(c, ni + (size_t)r->mk * (ne0 + r->nout) + nu + 16);

	if (p == NULL)
		return util_err(be->err, "%s: out of memory", op);
	r->start = (int32_t *)p;
	r->order = r->start + r->n_exp + 1;
	r->pos = r->order + r->mk;
	r->X = p + ((ni + 15) & ~(size_t)15);
	r->Y = r->X + (size_t)r->mk * ne0;
	r->U = r->Y + (size_t)r->mk * r->nout;
	if (group(r->ids, r->mk, r->n_exp, r->start, r->order, r->pos) != 0)
		return util_err(be->err, "%s: an expert id outside [0, %d)", op, r->n_exp);
	return 0;
}

/* moe_products' gathering and each expert's dense product of its rows. */
static int
moe_run_experts(struct backend *be, const char *op, struct moe_run *r)
{
	int64_t ne0 = r->w->ne0;

	for (int i = 0; i < r->mk; i++)
		memcpy(r->X + (size_t)i * ne0, r->x + (size_t)(r->order[i] / r->per) * r->ldx,
		    ne0 * sizeof *r->X);
	for (int e = 0; e < r->n_exp; e++) {
		int n = r->start[e + 1] - r->start[e];
		struct backend_weight w = expert(r->w, r->n_exp, e), u;
		float *X = r->X + (size_t)r->start[e] * ne0, *Y = r->Y + (size_t)r->start[e] * r->nout;

		if (n == 0)
			continue;
		if (r->wu != NULL)
			u = expert(r->wu, r->n_exp, e);
		if (r->wu != NULL && r->limit > 0) {
			float *U = r->U + (size_t)r->start[e] * r->nout;

			if (backend_cpu_matmul(be, &w, X, (int)ne0, Y, (int)r->nout, n) ||
			    backend_cpu_matmul(be, &u, X, (int)ne0, U, (int)r->nout, n))
				return util_err(be->err, "%s: out of memory", op);
			backend_cpu_swiglu_limit_rows(Y, U, Y, (size_t)n * r->nout, r->limit);
			continue;
		}
		if (r->wu != NULL ? backend_cpu_matmul_swiglu(be, &w, &u, X, n, Y) :
		    backend_cpu_matmul(be, &w, X, (int)ne0, Y, (int)r->nout, n))
			return util_err(be->err, "%s: out of memory", op);
	}
	return 0;
}

static int
moe_products(struct backend *be, const char *op, struct moe_run *r)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	int emu = c->emu_kind, rc;

	/* the GPU's experts take the decode kernels at any row count (gpu_moe_matvec,
	 * slot by slot or grouped by expert: the same bits): the CPU's numerics,
	 * never backend_cpu_gemm_emulate's prompt GEMMs */
	c->emu_kind = -1;
	rc = moe_run_experts(be, op, r);
	c->emu_kind = emu;
	return rc;
}

int
backend_cpu_moe_swiglu(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, int n_exp, const float *x, int ldx, int m,
    const int32_t *ids, int k, float limit, float *f)
{
	struct moe_run r = { .w = wg, .wu = wu, .limit = limit, .n_exp = n_exp, .mk = m * k,
	    .per = k, .ldx = ldx, .x = x, .ids = ids };

	r.nout = wg->ne1 / n_exp;
	if (moe_prepare(be, "moe_swiglu", &r) != 0 || moe_products(be, "moe_swiglu", &r) != 0)
		return -1;
	for (int s = 0; s < r.mk; s++)
		memcpy(f + (size_t)s * r.nout, r.Y + (size_t)r.pos[s] * r.nout,
		    r.nout * sizeof *f);
	return 0;
}

int
backend_cpu_moe_geglu(struct backend *be, const struct backend_weight *wgu, int n_exp,
    const float *x, int ldx, int m, const int32_t *ids, int k, float *f)
{
	struct moe_run r = { .w = wgu, .n_exp = n_exp, .mk = m * k, .per = k, .ldx = ldx,
	    .x = x, .ids = ids };
	int64_t nf = wgu->ne1 / n_exp / 2;

	r.nout = 2 * nf;
	if (moe_prepare(be, "moe_geglu", &r) != 0 || moe_products(be, "moe_geglu", &r) != 0)
		return -1;
	for (int s = 0; s < r.mk; s++) {
		const float *y = r.Y + (size_t)r.pos[s] * r.nout;

		for (int64_t i = 0; i < nf; i++)
			f[(size_t)s * nf + i] = backend_cpu_gelu_tanh(y[i]) * y[nf + i];
	}
	return 0;
}

int
backend_cpu_moe_down(struct backend *be, const struct backend_weight *wd, int n_exp,
    const float *f, int m, const int32_t *ids, const float *w, int k, float *y, int ldy)
{
	struct moe_run r = { .w = wd, .n_exp = n_exp, .mk = m * k, .per = 1,
	    .ldx = (int)wd->ne0, .x = f, .ids = ids };

	r.nout = wd->ne1 / n_exp;
	if (moe_prepare(be, "moe_down", &r) != 0 || moe_products(be, "moe_down", &r) != 0)
		return -1;
	for (int t = 0; t < m; t++) {
		float *yr = y + (size_t)t * ldy;

		for (int64_t i = 0; i < r.nout; i++) {
			float acc = 0;

			for (int j = 0; j < k; j++) {
				int s = t * k + j;
				float v = w[s] * r.Y[(size_t)r.pos[s] * r.nout + i];

				acc = j == 0 ? v : acc + v;
			}
			yr[i] = acc;
		}
	}
	return 0;
}

int
backend_cpu_add_gated(struct backend *be, float *y, int ldy, const float *x, int ldx,
    const float *g, int ldg, int m, int n)
{
	for (int r = 0; r < m; r++) {
		float s = backend_cpu_sigmoid(g[(size_t)r * ldg]);

		for (int i = 0; i < n; i++) {
			float t = s * x[(size_t)r * ldx + i];

			y[(size_t)r * ldy + i] += t;
		}
	}
	return 0;
}

/* y[i] = min(silu(g[i]), L) * clamp(u[i], -L, L): transformers' Step3p7MLP and experts. */
void
backend_cpu_swiglu_limit_rows(const float *g, const float *u, float *y, size_t n, float limit)
{
	for (size_t i = 0; i < n; i++) {
		float a = backend_cpu_silu(g[i]), b = u[i];

		a = a > limit ? limit : a;
		b = b > limit ? limit : b < -limit ? -limit : b;
		y[i] = a * b;
	}
}

/*
 * The sigmoid router: p = sigmoid(x) in float32, the top k of p + bias
 * picked (the largest left each time, the lowest id on ties), their p
 * renormalised (norm) and scaled.
 */
int
backend_cpu_moe_route_sigmoid(struct backend *be, const float *x, int ldx, int m, int n, int k,
    const float *bias, int norm, float scale, int32_t *ids, float *w)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	float *p = scratch(c, 2 * (size_t)n), *s = p + n;

	if (p == NULL)
		return util_err(be->err, "moe_route_sigmoid: out of memory");
	for (int r = 0; r < m; r++) {
		int32_t *id = ids + (size_t)r * k;
		float *wr = w + (size_t)r * k, sum = 0;
		unsigned char taken[4096];

		if (n > (int)sizeof taken)
			return util_err(be->err, "moe_route_sigmoid: %d experts", n);
		for (int e = 0; e < n; e++) {
			p[e] = backend_cpu_sigmoid(x[(size_t)r * ldx + e]);
			s[e] = bias != NULL ? p[e] + bias[e] : p[e];
			taken[e] = 0;
		}
		for (int j = 0; j < k; j++) {
			int b = -1;

			for (int e = 0; e < n; e++)
				if (!taken[e] && (b < 0 || s[e] > s[b]))
					b = e;
			taken[b] = 1;
			id[j] = b;
			sum += wr[j] = p[b];
		}
		for (int j = 0; j < k; j++)
			wr[j] = (norm ? wr[j] / sum : wr[j]) * scale;
	}
	return 0;
}

/* x[r][h*hd + j] *= sigmoid(g[r*ldg + h]): the head-wise attention gate. */
int
backend_cpu_head_gate(struct backend *be, float *x, int ldx, const float *g, int ldg, int m,
    int nh, int hd)
{
	(void)be;
	for (int r = 0; r < m; r++)
		for (int h = 0; h < nh; h++) {
			float s = backend_cpu_sigmoid(g[(size_t)r * ldg + h]);
			float *xh = x + (size_t)r * ldx + (size_t)h * hd;

			for (int j = 0; j < hd; j++)
				xh[j] *= s;
		}
	return 0;
}

int
backend_cpu_swiglu_limit(struct backend *be, const float *g, const float *u, float *y, size_t n,
    float limit)
{
	(void)be;
	if (limit > 0)
		backend_cpu_swiglu_limit_rows(g, u, y, n, limit);
	else
		for (size_t i = 0; i < n; i++)
			y[i] = backend_cpu_silu(g[i]) * u[i];
	return 0;
}
