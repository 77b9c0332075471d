/*
 * quant_q: quantize rows, bit-identical to ggml's quantize_row_*_ref when
 * both are built without floating-point contraction (our -std=c11 build;
 * ggml's reference C compiled with -ffp-contract=off, and gguf-py's numpy).
 */
#include "quant.h"
#include "quant_impl.h"

#include <float.h>
#include "util.h"

#define QMAX(a, b) ((a) > (b) ? (a) : (b))
#define QMIN(a, b) ((a) < (b) ? (a) : (b))
#define GROUP_MAX_EPS 1e-15f

typedef void q_fn(const float *x, uint8_t *b);	/* one block */

static float
absmax(const float *x, int n, float *signed_max)
{
	float amax = 0.0f, max = 0.0f;
	int j;

	for (j = 0; j < n; j++)
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	if (signed_max)
		*signed_max = max;
	return amax;
}

static void
q_q4_0(const float *x, uint8_t *b)
{
	float max, d, id;
	int j;

	absmax(x, 32, &max);
	d = max / -8;
	id = d ? 1.0f / d : 0.0f;
	qi_wr16(b, qi_f2h(d));
	for (j = 0; j < 16; j++) {
		int8_t a = (int8_t)(x[j] * id + 8.5f), c = (int8_t)(x[16 + j] * id + 8.5f);

		b[2 + j] = (uint8_t)(QMIN(15, a) | QMIN(15, c) << 4);
	}
}

static void
minmax(const float *x, int n, float *mn, float *mx)
{
	int j;

	*mn = FLT_MAX;
	*mx = -FLT_MAX;
	for (j = 0; j < n; j++) {
		if (x[j] < *mn)
			*mn = x[j];
		if (x[j] > *mx)
			*mx = x[j];
	}
}

static void
q_q4_1(const float *x, uint8_t *b)
{
	float mn, mx, d, id;
	int j;

	minmax(x, 32, &mn, &mx);
	d = (mx - mn) / ((1 << 4) - 1);
	id = d ? 1.0f / d : 0.0f;
	qi_wr16(b, qi_f2h(d));
	qi_wr16(b + 2, qi_f2h(mn));
	for (j = 0; j < 16; j++) {
		int8_t a = (int8_t)((x[j] - mn) * id + 0.5f);
		int8_t c = (int8_t)((x[16 + j] - mn) * id + 0.5f);

		b[4 + j] = (uint8_t)(QMIN(15, a) | QMIN(15, c) << 4);
	}
}

/* Pack 32 five-bit values into qh[4] + qs[16]. */
static void
q5_pack(const uint8_t v[32], uint8_t *qh4, uint8_t *qs)
{
	uint32_t qh = 0;
	int j;

	for (j = 0; j < 16; j++) {
		qs[j] = (uint8_t)((v[j] & 0x0F) | (v[16 + j] & 0x0F) << 4);
		qh |= (uint32_t)((v[j] & 0x10u) >> 4) << j;
		qh |= (uint32_t)((v[16 + j] & 0x10u) >> 4) << (j + 16);
	}
	memcpy(qh4, &qh, 4);
}

static void
q_q5_0(const float *x, uint8_t *b)
{
	float max, d, id;
	uint8_t v[32];
	int j;

	absmax(x, 32, &max);
	d = max / -16;
	id = d ? 1.0f / d : 0.0f;
	qi_wr16(b, qi_f2h(d));
	for (j = 0; j < 32; j++) {
		int8_t a = (int8_t)(x[j] * id + 16.5f);

		v[j] = (uint8_t)QMIN(31, a);
	}
	q5_pack(v, b + 2, b + 6);
}

static void
q_q5_1(const float *x, uint8_t *b)
{
	float mn, mx, d, id;
	uint8_t v[32];
	int j;

	minmax(x, 32, &mn, &mx);
	d = (mx - mn) / ((1 << 5) - 1);
	id = d ? 1.0f / d : 0.0f;
	qi_wr16(b, qi_f2h(d));
	qi_wr16(b + 2, qi_f2h(mn));
	for (j = 0; j < 32; j++)
		v[j] = (uint8_t)((x[j] - mn) * id + 0.5f);
	q5_pack(v, b + 4, b + 8);
}

static void
q_q8_0(const float *x, uint8_t *b)
{
	float d = absmax(x, 32, NULL) / ((1 << 7) - 1);
	float id = d ? 1.0f / d : 0.0f;
	int j;

	qi_wr16(b, qi_f2h(d));
	for (j = 0; j < 32; j++)
		b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

static void
q_q8_1(const float *x, uint8_t *b)
{
	float d = absmax(x, 32, NULL) / ((1 << 7) - 1);
	float id = d ? 1.0f / d : 0.0f;
	int j, sum = 0;

	qi_wr16(b, qi_f2h(d));
	for (j = 0; j < 16; j++) {
		int8_t a = (int8_t)roundf(x[j] * id), c = (int8_t)roundf(x[16 + j] * id);

		b[4 + j] = (uint8_t)a;
		b[4 + 16 + j] = (uint8_t)c;
		sum += a + c;
	}
	qi_wr16(b + 2, qi_f2h((float)sum * d));
}

static void
q_q8_k(const float *x, uint8_t *b)
{
	float max, amax = absmax(x, QK_K, &max), iscale, d;
	int j, k;

	if (!amax) {
		memset(b, 0, 292);
		return;
	}
	iscale = -127.f / max;
	for (j = 0; j < QK_K; j++) {
		int v = qi_nearest_int(iscale * x[j]);

		b[4 + j] = (uint8_t)(int8_t)QMIN(127, v);
	}
	for (j = 0; j < QK_K / 16; j++) {
		int sum = 0;

		for (k = 0; k < 16; k++)
			sum += (int8_t)b[4 + 16 * j + k];
		qi_wr16(b + 260 + 2 * j, (uint16_t)(int16_t)sum);
	}
	d = 1 / iscale;
	memcpy(b, &d, 4);
}

/* best_index_mxfp4: the first kvalue * e nearest to x. */
static int
best_index_fp4(float x, float e)
{
	float best = fabsf((float)qi_kvalues_mxfp4[0] * e - x);
	int i, bi = 0;

	for (i = 1; i < 16; i++) {
		float err = fabsf((float)qi_kvalues_mxfp4[i] * e - x);

		if (err < best) {
			bi = i;
			best = err;
		}
	}
	return bi;
}

static void
q_mxfp4(const float *x, uint8_t *b)
{
	float amax = absmax(x, 32, NULL), d;
	uint8_t e = amax > 0.0f ? (uint8_t)(int)(floorf(log2f(amax)) - 2 + 127) : 0;
	int j;

	d = qi_e8m0_half(e);
	b[0] = e;
	for (j = 0; j < 16; j++)
		b[1 + j] = (uint8_t)(best_index_fp4(x[j], d) | best_index_fp4(x[16 + j], d) << 4);
}

static void
q_nvfp4(const float *x, uint8_t *b)
{
	uint8_t *qs = b + 4;
	int s, j;

	for (s = 0; s < 4; s++, x += 16, qs += 8) {
		float amax = absmax(x, 16, NULL);
		uint8_t ue = qi_f2ue4m3(amax / 6.0f);
		float d = qi_ue4m3_half(ue);

		b[s] = ue;
		for (j = 0; j < 8; j++)
			qs[j] = (uint8_t)(best_index_fp4(x[j], d) | best_index_fp4(x[8 + j], d) << 4);
	}
}

/*
 * make_qkx2_quants: n values to levels 0..nmax with a scale and a min,
 * searching nstep scale perturbations for the weighted least-squares best.
 * Returns the scale; *the_min is minus the offset.
 */
static float
make_qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L,
    float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
	float mn = x[0], mx = x[0], sum_w = w[0], sum_x = sum_w * x[0];
	float iscale, scale, best_error = 0;
	int i, is;

	for (i = 1; i < n; i++) {
		if (x[i] < mn)
			mn = x[i];
		if (x[i] > mx)
			mx = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (mn > 0)
		mn = 0;
	if (mx == mn) {
		memset(L, 0, n);
		*the_min = -mn;
		return 0.f;
	}
	iscale = nmax / (mx - mn);
	scale = 1 / iscale;
	for (i = 0; i < n; i++) {
		int l = qi_nearest_int(iscale * (x[i] - mn));
		float diff;

		L[i] = (uint8_t)QMAX(0, QMIN(nmax, l));
		diff = scale * L[i] + mn - x[i];
		best_error += w[i] * (diff * diff);
	}
	for (is = 0; is <= nstep; is++) {
		float sum_l = 0, sum_l2 = 0, sum_xl = 0, D;

		iscale = (rmin + rdelta * is + nmax) / (mx - mn);
		for (i = 0; i < n; i++) {
			int l = qi_nearest_int(iscale * (x[i] - mn));

			l = QMAX(0, QMIN(nmax, l));
			Laux[i] = (uint8_t)l;
			sum_l += w[i] * l;
			sum_l2 += w[i] * l * l;
			sum_xl += w[i] * l * x[i];
		}
		D = sum_w * sum_l2 - sum_l * sum_l;
		if (D > 0) {
			float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
			float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
			float cur_error = 0;

			if (this_min > 0) {
				this_min = 0;
				this_scale = sum_xl / sum_l2;
			}
			for (i = 0; i < n; i++) {
				float diff = this_scale * Laux[i] + this_min - x[i];

				cur_error += w[i] * (diff * diff);
			}
			if (cur_error < best_error) {
				memcpy(L, Laux, n);
				best_error = cur_error;
				scale = this_scale;
				mn = this_min;
			}
		}
	}
	*the_min = -mn;
	return scale;
}

/*
 * The Q4_K/Q5_K scale search and re-quantization: 8 sub-blocks of 32 with
 * 6-bit scales and mins packed into sc12; levels 0..nmax into L[256].
 */
static void
qk_scales_mins(const float *x, int nmax, float rmin, int nstep, uint8_t *b, uint8_t L[QK_K])
{
	float mins[8], scales[8], w[32], sum_x2, av_x;
	float max_scale = 0, max_min = 0, inv_scale, inv_min, d, dm;
	uint8_t Laux[32], *sc12 = b + 4, sc, m;
	int j, l;

	for (j = 0; j < 8; j++) {
		sum_x2 = 0;
		for (l = 0; l < 32; l++)
			sum_x2 += x[32 * j + l] * x[32 * j + l];
		av_x = sqrtf(sum_x2 / 32);
		for (l = 0; l < 32; l++)
			w[l] = av_x + fabsf(x[32 * j + l]);
		scales[j] = make_qkx2(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux,
		    rmin, 0.1f, nstep);
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
	inv_min = max_min > 0 ? 63.f / max_min : 0.f;
	memset(sc12, 0, 12);
	for (j = 0; j < 8; j++) {
		uint8_t ls = (uint8_t)qi_nearest_int(inv_scale * scales[j]);
		uint8_t lm = (uint8_t)qi_nearest_int(inv_min * mins[j]);

		ls = QMIN(63, ls);
		lm = QMIN(63, lm);

		if (j < 4) {
			sc12[j] = ls;
			sc12[j + 4] = lm;
		} else {
			sc12[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
			sc12[j - 4] |= (uint8_t)((ls >> 4) << 6);
			sc12[j] |= (uint8_t)((lm >> 4) << 6);
		}
	}
	qi_wr16(b, qi_f2h(max_scale / 63.f));
	qi_wr16(b + 2, qi_f2h(max_min / 63.f));
	for (j = 0; j < 8; j++) {
		qi_scale_min_k4(j, sc12, &sc, &m);
		d = qi_h2f(qi_rd16(b)) * sc;
		if (!d)
			continue;
		dm = qi_h2f(qi_rd16(b + 2)) * m;
		for (l = 0; l < 32; l++) {
			int q = qi_nearest_int((x[32 * j + l] + dm) / d);

			L[32 * j + l] = (uint8_t)QMAX(0, QMIN(nmax, q));
		}
	}
}

static void
q_q4_k(const float *x, uint8_t *b)
{
	uint8_t L[QK_K], *q = b + 16;
	int j, l;

	qk_scales_mins(x, 15, -1.f, 20, b, L);
	for (j = 0; j < QK_K; j += 64, q += 32)
		for (l = 0; l < 32; l++)
			q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
}

static void
q_q5_k(const float *x, uint8_t *b)
{
	uint8_t L[QK_K], *qh = b + 16, *ql = b + 48, m1 = 1, m2 = 2;
	int n, j;

	qk_scales_mins(x, 31, -0.5f, 15, b, L);
	memset(qh, 0, QK_K / 8);
	for (n = 0; n < QK_K; n += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
		for (j = 0; j < 32; j++) {
			int l1 = L[n + j], l2 = L[n + j + 32];

			if (l1 > 15) {
				l1 -= 16;
				qh[j] |= m1;
			}
			if (l2 > 15) {
				l2 -= 16;
				qh[j] |= m2;
			}
			ql[j] = (uint8_t)(l1 | l2 << 4);
		}
	}
}

/* make_qx_quants with rmse_type 1 and no importance weights (as Q6_K uses it). */
static float
make_qx(int n, int nmax, const float *x, int8_t *L)
{
	float max = 0, amax = 0, iscale, sumlx = 0, suml2 = 0, scale, best;
	int i, is;

	for (i = 0; i < n; i++)
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			max = x[i];
		}
	if (amax < GROUP_MAX_EPS) {
		memset(L, 0, n);
		return 0.f;
	}
	iscale = -nmax / max;
	for (i = 0; i < n; i++) {
		int l = QMAX(-nmax, QMIN(nmax - 1, qi_nearest_int(iscale * x[i])));
		float w = x[i] * x[i];

		L[i] = (int8_t)(l + nmax);
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	scale = suml2 ? sumlx / suml2 : 0.0f;
	best = scale * sumlx;
	for (is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		iscale = -(nmax + 0.1f * is) / max;
		sumlx = suml2 = 0;
		for (i = 0; i < n; i++) {
			int l = QMAX(-nmax, QMIN(nmax - 1, qi_nearest_int(iscale * x[i])));
			float w = x[i] * x[i];

			sumlx += w * x[i] * l;
			suml2 += w * l * l;
		}
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			for (i = 0; i < n; i++) {
				int l = qi_nearest_int(iscale * x[i]);

				L[i] = (int8_t)(nmax + QMAX(-nmax, QMIN(nmax - 1, l)));
			}
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

static void
q6k_pack(const int8_t L[QK_K], uint8_t *b)
{
	uint8_t *ql = b, *qh = b + 128;
	int j, l;

	for (j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
		for (l = 0; l < 32; l++) {
			uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
			uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;

			ql[l] = (uint8_t)(q1 | q3 << 4);
			ql[l + 32] = (uint8_t)(q2 | q4 << 4);
			qh[l] = (uint8_t)((L[j + l] >> 4) | (L[j + l + 32] >> 4) << 2 |
			    (L[j + l + 64] >> 4) << 4 | (L[j + l + 96] >> 4) << 6);
		}
	}
}

static void
q_q6_k(const float *x, uint8_t *b)
{
	float scales[16], max_scale = 0, max_abs = 0, iscale, d;
	int8_t L[QK_K], *sc = (int8_t *)(b + 192);
	int ib, j, l;

	for (ib = 0; ib < 16; ib++) {
		scales[ib] = make_qx(16, 32, x + 16 * ib, L + 16 * ib);
		if (fabsf(scales[ib]) > max_abs) {
			max_abs = fabsf(scales[ib]);
			max_scale = scales[ib];
		}
	}
	if (max_abs < GROUP_MAX_EPS) {
		memset(b, 0, 210);
		return;
	}
	iscale = -128.f / max_scale;
	qi_wr16(b + 208, qi_f2h(1 / iscale));
	for (ib = 0; ib < 16; ib++)
		sc[ib] = (int8_t)QMIN(127, qi_nearest_int(iscale * scales[ib]));
	for (j = 0; j < 16; j++) {
		d = qi_h2f(qi_rd16(b + 208)) * sc[j];
		if (!d)
			continue;
		for (l = 0; l < 16; l++) {
			int q = qi_nearest_int(x[16 * j + l] / d);

			L[16 * j + l] = (int8_t)(QMAX(-32, QMIN(31, q)) + 32);
		}
	}
	q6k_pack(L, b);
}


static void
q_q1_0(const float *x, uint8_t *b)
{
	float sum_abs = 0.0f;
	int j;

	for (j = 0; j < 128; j++)
		sum_abs += fabsf(x[j]);
	qi_wr16(b, qi_f2h(sum_abs / 128));
	memset(b + 2, 0, 16);
	for (j = 0; j < 128; j++)
		if (x[j] >= 0.0f)
			b[2 + j / 8] |= (uint8_t)(1 << (j % 8));
}

static void
q_q2_0(const float *x, uint8_t *b)
{
	float d = absmax(x, 64, NULL), id = d > 0.0f ? 1.0f / d : 0.0f;
	int j;

	qi_wr16(b, qi_f2h(d));
	memset(b + 2, 0, 16);
	for (j = 0; j < 64; j++) {
		int q = (int)roundf(x[j] * id) + 1;

		q = QMAX(0, QMIN(3, q));
		b[2 + j / 4] |= (uint8_t)(q << (2 * (j % 4)));
	}
}

/* n trits (-1, 0, 1 times amax) as one base-3 number, scaled to a byte by
 * ceiling division (TQ1_0 packing); the 4-trit qh bytes get a fifth 0 trit. */
static uint8_t
tq1_byte(const float *x, int stride, int n, float id)
{
	uint8_t q = 0;
	int k;

	for (k = 0; k < n; k++) {
		int xi = (int)lroundf(x[k * stride] * id) + 1;

		q = (uint8_t)(q * 3 + xi);
	}
	if (n == 4)
		q = (uint8_t)(q * 3);
	return (uint8_t)(((uint16_t)q * 256 + (243 - 1)) / 243);
}

static void
q_tq1_0(const float *x, uint8_t *b)
{
	float d = absmax(x, QK_K, NULL), id = d ? 1.0f / d : 0.0f;
	int m;

	qi_wr16(b + 52, qi_f2h(d));
	for (m = 0; m < 32; m++)
		b[m] = tq1_byte(x + m, 32, 5, id);
	x += 160;
	for (m = 0; m < 16; m++)
		b[32 + m] = tq1_byte(x + m, 16, 5, id);
	x += 80;
	for (m = 0; m < 4; m++)
		b[48 + m] = tq1_byte(x + m, 4, 4, id);
}

static void
q_tq2_0(const float *x, uint8_t *b)
{
	float d = absmax(x, QK_K, NULL), id = d ? 1.0f / d : 0.0f;
	int j, m, n;

	qi_wr16(b + 64, qi_f2h(d));
	for (j = 0; j < 64; j += 32, x += 128)
		for (m = 0; m < 32; m++) {
			uint8_t q = 0;

			for (n = 0; n < 4; n++) {
				int xi = (int)lroundf(x[m + n * 32] * id) + 1;

				q = (uint8_t)(q + ((xi & 3) << (2 * n)));
			}
			b[j + m] = q;
		}
}

static q_fn *
q_block_fn(int type)
{
	switch (type) {
	case QUANT_Q4_0:	return q_q4_0;
	case QUANT_Q4_1:	return q_q4_1;
	case QUANT_Q5_0:	return q_q5_0;
	case QUANT_Q5_1:	return q_q5_1;
	case QUANT_Q8_0:	return q_q8_0;
	case QUANT_Q8_1:	return q_q8_1;
	case QUANT_Q4_K:	return q_q4_k;
	case QUANT_Q5_K:	return q_q5_k;
	case QUANT_Q6_K:	return q_q6_k;
	case QUANT_Q8_K:	return q_q8_k;
	case QUANT_MXFP4:	return q_mxfp4;
	case QUANT_NVFP4:	return q_nvfp4;
	case QUANT_Q1_0:	return q_q1_0;
	case QUANT_TQ1_0:	return q_tq1_0;
	case QUANT_TQ2_0:	return q_tq2_0;
	case QUANT_Q2_0:	return q_q2_0;
	default:		return NULL;
	}
}

void
qi_quantize_block(int t, const float *x, uint8_t *b)
{
	q_block_fn(t)(x, b);
}

int
quant_can_quantize(int type)
{
	return type == QUANT_F32 || type == QUANT_F16 || type == QUANT_BF16 ||
	    q_block_fn(type) != NULL;
}

int
quant_quantize_row(int type, const float *src, void *dst, int64_t n, char *err)
{
	const struct quant_traits *tr = quant_traits(type);
	uint8_t *y = dst;
	q_fn *fn;
	int64_t i;

	if (!quant_can_quantize(type))
		return util_err(err, "quantize: type '%s' is not supported", quant_name(type));
	if (n < 0 || n % tr->blck != 0)
		return util_err(err, "quantize: %lld elements are not whole blocks of %d for '%s'",
		    (long long)n, tr->blck, tr->name);
	for (i = 0; i < n; i++)
		if (!isfinite(src[i]))
			return util_err(err, "quantize: element %lld is %s", (long long)i,
			    isnan(src[i]) ? "NaN" : "infinite");
	if (type == QUANT_F32) {
		memcpy(dst, src, (size_t)n * 4);
		return 0;
	}
	if (type == QUANT_F16 || type == QUANT_BF16) {
		for (i = 0; i < n; i++)
			qi_wr16(y + 2 * i, type == QUANT_F16 ? qi_f2h(src[i]) : qi_f2bf(src[i]));
		return 0;
	}
	fn = q_block_fn(type);
	for (i = 0; i < n / tr->blck; i++)
		fn(src + i * tr->blck, y + i * tr->size);
	return 0;
}
