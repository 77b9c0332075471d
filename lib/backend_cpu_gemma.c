#include "backend_cpu.h"

#include <math.h>
#include <stdlib.h>

#include "backend_impl.h"
#include "quant.h"

/*
 * Gemma-4's elementwise ops on the CPU (lib/backend.h): GELU (tanh) gated
 * products, the logit soft-cap, a scale, and the per-expert scale of the
 * router's weights, each in float32 in PyTorch's order of operations.
 * Single-threaded: they run over a few rows of the hidden size.  And its
 * vision towers' ops: the clipped linears' clamp, the products of
 * half-precision weights (backend_matmul_half, threaded as the products).
 */

float
backend_cpu_gelu_tanh(float x)
{
	const float beta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = 0.044715f;
	float inner = beta * (x + kappa * (x * x * x));

	return 0.5f * x * (1.0f + tanhf(inner));
}

int
backend_cpu_geglu(struct backend *be, const float *g, int ldg, const float *u, int ldu,
    float *y, int ldy, int rows, int n)
{
	for (int r = 0; r < rows; r++)
		for (int i = 0; i < n; i++)
			y[(size_t)r * ldy + i] = backend_cpu_gelu_tanh(g[(size_t)r * ldg + i]) *
			    u[(size_t)r * ldu + i];
	return 0;
}

int
backend_cpu_softcap(struct backend *be, float *x, size_t n, float cap)
{
	for (size_t i = 0; i < n; i++) {
		float t = x[i] / cap;

		t = tanhf(t);
		x[i] = t * cap;
	}
	return 0;
}

int
backend_cpu_scale(struct backend *be, float *x, size_t n, float s)
{
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
	return 0;
}

int
backend_cpu_clamp(struct backend *be, float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
	return 0;
}

/* Rows of x (ldx apart) rounded to the weight's half type, into y (rows of n). */
struct half_job {
	const float *x;
	float	*y;
	int	ldx, type;
	int64_t	n;
};

static void
half_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
	struct half_job *j = ctx;

	for (int64_t r = r0; r < r1; r++) {
		const float *x = j->x + r * j->ldx;
		float *y = j->y + r * j->n;

		if (j->type == QUANT_BF16)
			for (int64_t i = 0; i < j->n; i++)
				y[i] = quant_bf16_to_f32(quant_f32_to_bf16(x[i]));
		else
			for (int64_t i = 0; i < j->n; i++)
				y[i] = quant_f16_to_f32(quant_f32_to_f16(x[i]));
	}
}

/*
 * backend_matmul_half: a BF16 (F16) weight's product on a copy of x
 * rounded to its type, then the weight's own float path (its rows decoded
 * exactly, the backend's dot): a product of two BF16 (F16) values is
 * exact in float (8 + 8, 11 + 11 significant bits, short of products past
 * float's range), so each output is a float sum of the exact products,
 * as ggml's vec_dot on the weight's vec_dot_type sums them.  Other types:
 * backend_matmul.
 */
int
backend_cpu_matmul_half(struct backend *be, const struct backend_weight *w, const float *x,
    int ldx, float *y, int ldy, int m)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	struct half_job j = { x, NULL, ldx, w->type, w->ne0 };
	int rc;

	if (w->type != QUANT_BF16 && w->type != QUANT_F16)
		return backend_cpu_matmul(be, w, x, ldx, y, ldy, m);
	if ((size_t)m > SIZE_MAX / sizeof(float) / (size_t)w->ne0 ||
	    (j.y = malloc((size_t)m * w->ne0 * sizeof(float))) == NULL)
		return util_err(be->err, "matmul_half: %d rows: out of memory", m);
	rc = backend_cpu_run(c, m, 4, half_rows, &j);
	if (rc == 0)
		rc = backend_cpu_matmul(be, w, j.y, (int)w->ne0, y, ldy, m);
	else
		util_err(be->err, "matmul_half: out of memory");
	free(j.y);
	return rc;
}

int
backend_cpu_moe_scale(struct backend *be, float *w, const int32_t *ids, int m, int k,
    const float *s)
{
	for (size_t i = 0; i < (size_t)m * k; i++)
		if (ids[i] >= 0)	/* (-1: the router found no key; its NaN weight stays) */
			w[i] *= s[ids[i]];
	return 0;
}
