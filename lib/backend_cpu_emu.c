/*
 * backend_cpu_emu: the CUDA backend's prompt products, computed on the
 * CPU with the GPU's numerics (backend_cpu_gemm_emulate), the reference
 * kernel-check holds a GPU's prefill to.  Never on in serving.
 *
 * A product of more than the GPU's step rows takes, by weight type and
 * the CUDA backend's GEMM kind (cuda/backend_cuda_products.cu product(),
 * cuda/matvec_q8.cu, cuda/mmq.cu, cuda/mmq_iq4.cu, cuda/matvec.cu
 * gpu_matmul):
 *   Q8_0, NVFP4, IQ4_XS   int8: the CPU's own numerics (the int8 GEMMs);
 *                         bf16: x's int8 values times their scales (as
 *                         lib/quant dequantizes them) and the weights
 *                         dequantized, each rounded to bf16, fp32 sums
 *   Q4_1, Q5_1, IQ4_NL    the CPU's own (the decode kernel, 16 rows a launch)
 *   Q4_0, Q5_0, Q4_K,     int8: x as it is and the weights dequantized, fp32
 *   Q5_K, Q6_K            (cuBLAS); bf16: both rounded to bf16 (their steps,
 *                         up to the step rows, the CPU's own: int8 x)
 *   other quantized types  held as F32 on the GPU: x as it is, fp32
 *   F32, F16, BF16        fp32 (cuBLAS): the CPU's own float path
 * Each output here is a double sum of the (rounded) terms, in index
 * order, rounded once to float, then times the weight's scale: the GPU's
 * fp32 sums differ from it by float order alone.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "quant.h"

enum { EMU_OWN, EMU_F32, EMU_BF16X, EMU_BF16Q };	/* how x and w enter */

/* f rounded to bf16 (nearest, ties to even; NaN and inf as they are). */
static float
bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7f800000u) != 0x7f800000u)
		u += 0x7fffu + ((u >> 16) & 1);
	u &= 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}

/* How a product of type t is computed under the GPU's kind. */
static int
emu_way(int kind, int t)
{
	switch (t) {
	case QUANT_F32: case QUANT_F16: case QUANT_BF16:
	case QUANT_Q4_1: case QUANT_Q5_1: case QUANT_IQ4_NL:
		return EMU_OWN;
	case QUANT_Q8_0: case QUANT_NVFP4: case QUANT_IQ4_XS:
		return kind == BACKEND_GEMM_INT8 ? EMU_OWN : EMU_BF16Q;
	case QUANT_Q4_0: case QUANT_Q5_0: case QUANT_Q4_K: case QUANT_Q5_K: case QUANT_Q6_K:
		return kind == BACKEND_GEMM_INT8 ? EMU_F32 : EMU_BF16X;
	default:
		return quant_vec_dot_type(t) < 0 ? EMU_OWN : EMU_F32;
	}
}

struct emu_job {
	struct backend_cpu *c;
	const struct backend_weight *w, *wu;
	const float *xe;		/* [m][ne0] the inputs as the GPU takes them */
	float	*y;
	int	ldy, m, round;		/* round: the weights to bf16 */
};

/* Output rows j0..j1: each weight row dequantized (rounded), then every input row. */
static void
emu_rows(void *ctx, int64_t j0, int64_t j1, int tid)
{
	struct emu_job *e = ctx;
	int64_t n = e->w->ne0;
	float *wr = backend_cpu_scratch(e->c, tid, 2 * (size_t)n), *ur = wr + n;

	if (wr == NULL)
		return;
	for (int64_t j = j0; j < j1; j++) {
		const struct backend_weight *ws[2] = { e->w, e->wu };
		float *rows[2] = { wr, ur };

		for (int k = 0; k < 2 && ws[k] != NULL; k++) {
			quant_dequantize_row(ws[k]->type, (const char *)ws[k]->data +
			    (size_t)j * ws[k]->row_size, rows[k], n);
			for (int64_t i = 0; e->round && i < n; i++)
				rows[k][i] = bf16(rows[k][i]);
		}
		for (int r = 0; r < e->m; r++) {
			const float *x = e->xe + (size_t)r * n;
			double g = 0, u = 0;
			float v;

			for (int64_t i = 0; i < n; i++)
				g += (double)wr[i] * x[i];
			v = (float)g * e->w->scale;
			if (e->wu != NULL) {
				for (int64_t i = 0; i < n; i++)
					u += (double)ur[i] * x[i];
				backend_cpu_silu_n(&v, 1);
				v *= (float)u * e->wu->scale;
			}
			e->y[(size_t)r * e->ldy + j] = v;
		}
	}
}

int
backend_cpu_emu_mm(struct backend_cpu *c, const struct backend_weight *w,
    const struct backend_weight *wu, const float *x, int ldx, const char *xq,
    size_t xq_size, float *y, int ldy, int m)
{
	int way = c->emu_kind < 0 || m <= c->emu_rows ? EMU_OWN : emu_way(c->emu_kind, w->type);
	int64_t n = w->ne0;
	struct emu_job e = { c, w, wu, NULL, y, ldy, m, way != EMU_F32 };
	float *xe;

	if (way == EMU_OWN)
		return 0;
	if (wu != NULL && emu_way(c->emu_kind, wu->type) != way)
		return -1;	/* (the fused swiglu of two ways: never made) */
	if (c->emu.n < (size_t)m * n) {
		free(c->emu.p);
		if ((c->emu.p = malloc((size_t)m * n * sizeof(float))) == NULL) {
			c->emu.n = 0;
			return -1;
		}
		c->emu.n = (size_t)m * n;
	}
	xe = c->emu.p;
	for (int r = 0; r < m; r++) {
		float *o = xe + (size_t)r * n;

		if (way == EMU_BF16Q)	/* x's int8 values times their scales */
			quant_dequantize_row(quant_vec_dot_type(w->type), xq + (size_t)r * xq_size,
			    o, n);
		else
			memcpy(o, x + (size_t)r * ldx, (size_t)n * sizeof *o);
		for (int64_t i = 0; way != EMU_F32 && i < n; i++)
			o[i] = bf16(o[i]);
	}
	e.xe = xe;
	if (backend_cpu_run(c, w->ne1, 16, emu_rows, &e) != 0)
		return -1;
	return 1;
}

int
backend_cpu_gemm_emulate(struct backend *be, int kind, int rows)
{
	struct backend_cpu *c = (struct backend_cpu *)be;

	if (!backend_cpu_is(be))
		return util_err(be->err, "gemm emulation: not the CPU backend"), -1;
	if (kind != -1 && kind != BACKEND_GEMM_INT8 && kind != BACKEND_GEMM_BF16 &&
	    kind != BACKEND_GEMM_BF16_MIRROR)
		return util_err(be->err, "gemm emulation: kind %d", kind), -1;
	if (rows < 1)
		return util_err(be->err, "gemm emulation: %d rows", rows), -1;
	c->emu_kind = kind == BACKEND_GEMM_BF16_MIRROR ? BACKEND_GEMM_BF16 : kind;
	c->emu_rows = rows;
	return 0;
}
