#include "backend_cpu.h"

#include <math.h>

#include "backend_impl.h"

/*
 * Gemma-4's elementwise ops on the CPU (lib/backend.h): GELU (tanh) gated
 * products, the logit soft-cap, a scale, and the per-expert scale of the
 * router's weights, each in float32 in PyTorch's order of operations.
 * Single-threaded: they run over a few rows of the hidden size.
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

int
backend_cpu_moe_scale(struct backend *be, float *w, const int32_t *ids, int m, int k,
    const float *s)
{
	for (size_t i = 0; i < (size_t)m * k; i++)
		w[i] *= s[ids[i]];
	return 0;
}
