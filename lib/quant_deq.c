/* quant_deq: dequantize rows, one function per ggml block format. */
#include "quant.h"
#include "quant_impl.h"

typedef void deq_fn(const uint8_t *b, float *y);	/* one block */

static void
deq_q4_0(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b));
	const uint8_t *qs = b + 2;
	int j;

	for (j = 0; j < 16; j++) {
		y[j] = (float)((qs[j] & 0xF) - 8) * d;
		y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
	}
}

static void
deq_q4_1(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b)), m = qi_h2f(qi_rd16(b + 2));
	const uint8_t *qs = b + 4;
	int j;

	for (j = 0; j < 16; j++) {
		y[j] = (float)(qs[j] & 0xF) * d + m;
		y[j + 16] = (float)(qs[j] >> 4) * d + m;
	}
}

/* The 32 five-bit values of a Q5_0/Q5_1 block, in element order. */
static void
q5_values(const uint8_t *qh4, const uint8_t *qs, int v[32])
{
	uint32_t qh;
	int j;

	memcpy(&qh, qh4, 4);
	for (j = 0; j < 16; j++) {
		v[j] = (qs[j] & 0xF) | (((qh >> j) << 4) & 0x10);
		v[j + 16] = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
	}
}

static void
deq_q5_0(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b));
	int v[32], j;

	q5_values(b + 2, b + 6, v);
	for (j = 0; j < 32; j++)
		y[j] = (float)(v[j] - 16) * d;
}

static void
deq_q5_1(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b)), m = qi_h2f(qi_rd16(b + 2));
	int v[32], j;

	q5_values(b + 4, b + 8, v);
	for (j = 0; j < 32; j++)
		y[j] = (float)v[j] * d + m;
}

static void
deq_q8_0(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b));
	int j;

	for (j = 0; j < 32; j++)
		y[j] = (float)(int8_t)b[2 + j] * d;
}

static void
deq_q8_1(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b));
	int j;

	for (j = 0; j < 32; j++)
		y[j] = (float)(int8_t)b[4 + j] * d;
}

static void
deq_q2_k(const uint8_t *b, float *y)
{
	const uint8_t *sc = b, *q = b + 16;
	float d = qi_h2f(qi_rd16(b + 80)), mn = qi_h2f(qi_rd16(b + 82));
	int n, j, l, is = 0;

	for (n = 0; n < QK_K; n += 128, q += 32) {
		for (j = 0; j < 4; j++) {
			int shift = 2 * j;
			float dl = d * (float)(sc[is] & 0xF), ml = mn * (float)(sc[is] >> 4);

			for (l = 0; l < 16; l++)
				*y++ = dl * (float)((q[l] >> shift) & 3) - ml;
			is++;
			dl = d * (float)(sc[is] & 0xF), ml = mn * (float)(sc[is] >> 4);
			for (l = 0; l < 16; l++)
				*y++ = dl * (float)((q[l + 16] >> shift) & 3) - ml;
			is++;
		}
	}
}

static void
deq_q3_k(const uint8_t *b, float *y)
{
	const uint8_t *hm = b, *q = b + 32;
	float d = qi_h2f(qi_rd16(b + 108));
	int8_t sc[16];
	int n, j, l, is = 0;
	uint8_t m = 1;

	qi_q3k_scales(b + 96, sc);
	for (n = 0; n < QK_K; n += 128, q += 32) {
		for (j = 0; j < 4; j++, m <<= 1) {
			int shift = 2 * j;
			float dl = d * (float)sc[is++];

			for (l = 0; l < 16; l++)
				*y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
			dl = d * (float)sc[is++];
			for (l = 0; l < 16; l++)
				*y++ = dl * (float)(((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
		}
	}
}

static void
deq_q4_k(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b)), mn = qi_h2f(qi_rd16(b + 2));
	const uint8_t *scales = b + 4, *q = b + 16;
	uint8_t sc, m;
	int c, l;

	for (c = 0; c < 4; c++, q += 32) {
		float d1, m1, d2, m2;

		qi_scale_min_k4(2 * c, scales, &sc, &m);
		d1 = d * sc, m1 = mn * m;
		qi_scale_min_k4(2 * c + 1, scales, &sc, &m);
		d2 = d * sc, m2 = mn * m;
		for (l = 0; l < 32; l++)
			*y++ = d1 * (float)(q[l] & 0xF) - m1;
		for (l = 0; l < 32; l++)
			*y++ = d2 * (float)(q[l] >> 4) - m2;
	}
}

static void
deq_q5_k(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b)), mn = qi_h2f(qi_rd16(b + 2));
	const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
	uint8_t sc, m, u1 = 1, u2 = 2;
	int c, l;

	for (c = 0; c < 4; c++, ql += 32, u1 <<= 2, u2 <<= 2) {
		float d1, m1, d2, m2;

		qi_scale_min_k4(2 * c, scales, &sc, &m);
		d1 = d * sc, m1 = mn * m;
		qi_scale_min_k4(2 * c + 1, scales, &sc, &m);
		d2 = d * sc, m2 = mn * m;
		for (l = 0; l < 32; l++)
			*y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
		for (l = 0; l < 32; l++)
			*y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
	}
}

static void
deq_q6_k(const uint8_t *b, float *y)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	float d = qi_h2f(qi_rd16(b + 208));
	int n, l;

	for (n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
		for (l = 0; l < 32; l++) {
			int is = l / 16;
			int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
			int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
			int q3 = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
			int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;

			y[l] = d * (float)sc[is + 0] * (float)q1;
			y[l + 32] = d * (float)sc[is + 2] * (float)q2;
			y[l + 64] = d * (float)sc[is + 4] * (float)q3;
			y[l + 96] = d * (float)sc[is + 6] * (float)q4;
		}
	}
}

static void
deq_q8_k(const uint8_t *b, float *y)
{
	float d;
	int j;

	memcpy(&d, b, 4);
	for (j = 0; j < QK_K; j++)
		y[j] = d * (float)(int8_t)b[4 + j];
}

static void
deq_iq4_nl(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b));
	const uint8_t *qs = b + 2;
	int j;

	for (j = 0; j < 16; j++) {
		y[j] = d * (float)qi_kvalues_iq4nl[qs[j] & 0xF];
		y[j + 16] = d * (float)qi_kvalues_iq4nl[qs[j] >> 4];
	}
}

static void
deq_iq4_xs(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b));
	uint16_t sh = qi_rd16(b + 2);
	const uint8_t *sl = b + 4, *qs = b + 8;
	int ib, j;

	for (ib = 0; ib < 8; ib++, y += 32, qs += 16) {
		int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
		float dl = d * (float)(ls - 32);

		for (j = 0; j < 16; j++) {
			y[j] = dl * (float)qi_kvalues_iq4nl[qs[j] & 0xF];
			y[j + 16] = dl * (float)qi_kvalues_iq4nl[qs[j] >> 4];
		}
	}
}

static void
deq_tq1_0(const uint8_t *b, float *y)
{
	static const uint8_t pow3[6] = { 1, 3, 9, 27, 81, 243 };
	const uint8_t *qs = b, *qh = b + 48;
	float d = qi_h2f(qi_rd16(b + 52));
	int j, n, m;

	for (j = 0; j < 48; j += (j < 32 ? 32 : 16)) {
		int w = j < 32 ? 32 : 16;

		for (n = 0; n < 5; n++)
			for (m = 0; m < w; m++) {
				uint8_t q = (uint8_t)(qs[j + m] * pow3[n]);
				*y++ = (float)((((uint16_t)q * 3) >> 8) - 1) * d;
			}
	}
	for (n = 0; n < 4; n++)
		for (j = 0; j < 4; j++) {
			uint8_t q = (uint8_t)(qh[j] * pow3[n]);
			*y++ = (float)((((uint16_t)q * 3) >> 8) - 1) * d;
		}
}

static void
deq_tq2_0(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b + 64));
	int j, l, m;

	for (j = 0; j < 64; j += 32)
		for (l = 0; l < 4; l++)
			for (m = 0; m < 32; m++)
				*y++ = (float)(((b[j + m] >> (2 * l)) & 3) - 1) * d;
}

static void
deq_mxfp4(const uint8_t *b, float *y)
{
	float d = qi_e8m0_half(b[0]);
	const uint8_t *qs = b + 1;
	int j;

	for (j = 0; j < 16; j++) {
		y[j] = (float)qi_kvalues_mxfp4[qs[j] & 0xF] * d;
		y[j + 16] = (float)qi_kvalues_mxfp4[qs[j] >> 4] * d;
	}
}

static void
deq_nvfp4(const uint8_t *b, float *y)
{
	const uint8_t *qs = b + 4;
	int s, j;

	for (s = 0; s < 4; s++, y += 16, qs += 8) {
		float d = qi_ue4m3_half(b[s]);

		for (j = 0; j < 8; j++) {
			y[j] = (float)qi_kvalues_mxfp4[qs[j] & 0xF] * d;
			y[j + 8] = (float)qi_kvalues_mxfp4[qs[j] >> 4] * d;
		}
	}
}

static void
deq_q1_0(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b));
	int j;

	for (j = 0; j < 128; j++)
		y[j] = (b[2 + j / 8] >> (j % 8)) & 1 ? d : -d;
}

static void
deq_q2_0(const uint8_t *b, float *y)
{
	float d = qi_h2f(qi_rd16(b));
	int j;

	for (j = 0; j < 64; j++)
		y[j] = (float)(((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
}

static deq_fn *
deq_block_fn(int type)
{
	switch (type) {
	case QUANT_Q4_0:	return deq_q4_0;
	case QUANT_Q4_1:	return deq_q4_1;
	case QUANT_Q5_0:	return deq_q5_0;
	case QUANT_Q5_1:	return deq_q5_1;
	case QUANT_Q8_0:	return deq_q8_0;
	case QUANT_Q8_1:	return deq_q8_1;
	case QUANT_Q2_K:	return deq_q2_k;
	case QUANT_Q3_K:	return deq_q3_k;
	case QUANT_Q4_K:	return deq_q4_k;
	case QUANT_Q5_K:	return deq_q5_k;
	case QUANT_Q6_K:	return deq_q6_k;
	case QUANT_Q8_K:	return deq_q8_k;
	case QUANT_IQ4_NL:	return deq_iq4_nl;
	case QUANT_IQ4_XS:	return deq_iq4_xs;
	case QUANT_TQ1_0:	return deq_tq1_0;
	case QUANT_TQ2_0:	return deq_tq2_0;
	case QUANT_MXFP4:	return deq_mxfp4;
	case QUANT_NVFP4:	return deq_nvfp4;
	case QUANT_Q1_0:	return deq_q1_0;
	case QUANT_Q2_0:	return deq_q2_0;
	default:		return NULL;
	}
}

/* The plain (one element per block) types. */
static int
deq_plain(int type, const uint8_t *s, float *y, int64_t n)
{
	int64_t i;

	for (i = 0; i < n; i++) {
		switch (type) {
		case QUANT_F32:		memcpy(&y[i], s + 4 * i, 4); break;
		case QUANT_F16:		y[i] = qi_h2f(qi_rd16(s + 2 * i)); break;
		case QUANT_BF16:	y[i] = qi_bf2f(qi_rd16(s + 2 * i)); break;
		case QUANT_I8:		y[i] = (float)(int8_t)s[i]; break;
		case QUANT_I16:		y[i] = (float)(int16_t)qi_rd16(s + 2 * i); break;
		case QUANT_I32: { int32_t v; memcpy(&v, s + 4 * i, 4); y[i] = (float)v; break; }
		case QUANT_I64: { int64_t v; memcpy(&v, s + 8 * i, 8); y[i] = (float)v; break; }
		case QUANT_F64: { double v; memcpy(&v, s + 8 * i, 8); y[i] = (float)v; break; }
		default:		return -1;
		}
	}
	return 0;
}

int
quant_can_dequantize(int type)
{
	switch (type) {
	case QUANT_F32: case QUANT_F16: case QUANT_BF16: case QUANT_I8:
	case QUANT_I16: case QUANT_I32: case QUANT_I64: case QUANT_F64:
		return 1;
	default:
		return deq_block_fn(type) != NULL;
	}
}

int
quant_dequantize_row(int type, const void *src, float *dst, int64_t n)
{
	const struct quant_traits *tr = quant_traits(type);
	const uint8_t *s = src;
	deq_fn *fn;
	int64_t i;

	if (!quant_can_dequantize(type) || n < 0 || n % tr->blck != 0)
		return -1;
	if (tr->blck == 1)
		return deq_plain(type, s, dst, n);
	fn = deq_block_fn(type);
	for (i = 0; i < n / tr->blck; i++)
		fn(s + i * tr->size, dst + i * tr->blck);
	return 0;
}

/* --- integer views of blocks, for the dot products --- */

void
qi_block_ints(int t, const uint8_t *b, int *v, float *ws)
{
	int j, s;

	switch (t) {
	case QUANT_Q4_0: case QUANT_Q4_1: case QUANT_IQ4_NL: {
		const uint8_t *qs = b + (t == QUANT_Q4_1 ? 4 : 2);

		for (j = 0; j < 16; j++) {
			v[j] = qs[j] & 0xF;
			v[j + 16] = qs[j] >> 4;
			if (t == QUANT_Q4_0)
				v[j] -= 8, v[j + 16] -= 8;
			else if (t == QUANT_IQ4_NL)
				v[j] = qi_kvalues_iq4nl[v[j]], v[j + 16] = qi_kvalues_iq4nl[v[j + 16]];
		}
		ws[0] = qi_h2f(qi_rd16(b));
		if (t == QUANT_Q4_1)
			ws[1] = qi_h2f(qi_rd16(b + 2));
		break;
	}
	case QUANT_Q5_0:
		q5_values(b + 2, b + 6, v);
		for (j = 0; j < 32; j++)
			v[j] -= 16;
		ws[0] = qi_h2f(qi_rd16(b));
		break;
	case QUANT_Q5_1:
		q5_values(b + 4, b + 8, v);
		ws[0] = qi_h2f(qi_rd16(b));
		ws[1] = qi_h2f(qi_rd16(b + 2));
		break;
	case QUANT_Q8_0:
		for (j = 0; j < 32; j++)
			v[j] = (int8_t)b[2 + j];
		ws[0] = qi_h2f(qi_rd16(b));
		break;
	case QUANT_MXFP4:
		for (j = 0; j < 16; j++) {
			v[j] = qi_kvalues_mxfp4[b[1 + j] & 0xF];
			v[j + 16] = qi_kvalues_mxfp4[b[1 + j] >> 4];
		}
		ws[0] = qi_e8m0_half(b[0]);
		break;
	case QUANT_NVFP4:
		for (s = 0; s < 4; s++) {
			for (j = 0; j < 8; j++) {
				v[16 * s + j] = qi_kvalues_mxfp4[b[4 + 8 * s + j] & 0xF];
				v[16 * s + j + 8] = qi_kvalues_mxfp4[b[4 + 8 * s + j] >> 4];
			}
			ws[s] = qi_ue4m3_half(b[s]);
		}
		break;
	}
}

static void
kints_q2_k(const uint8_t *b, int *v, struct qi_kscales *ks)
{
	const uint8_t *q = b + 16;
	int n, j, l;

	for (j = 0; j < 16; j++)
		ks->sc[j] = b[j] & 0xF, ks->m[j] = b[j] >> 4;
	for (n = 0; n < QK_K; n += 128, q += 32)
		for (j = 0; j < 8; j++)
			for (l = 0; l < 16; l++)
				*v++ = (q[l + 16 * (j & 1)] >> (2 * (j / 2))) & 3;
	ks->nsub = 16, ks->has_min = 1;
	ks->d = qi_h2f(qi_rd16(b + 80)), ks->dmin = qi_h2f(qi_rd16(b + 82));
}

static void
kints_q3_k(const uint8_t *b, int *v, struct qi_kscales *ks)
{
	const uint8_t *hm = b, *q = b + 32;
	int8_t sc[16];
	int n, j, l, m = 0;

	qi_q3k_scales(b + 96, sc);
	for (j = 0; j < 16; j++)
		ks->sc[j] = sc[j];
	for (n = 0; n < QK_K; n += 128, q += 32)
		for (j = 0; j < 4; j++, m++)
			for (l = 0; l < 32; l++)
				*v++ = ((q[l] >> (2 * j)) & 3) - ((hm[l] >> m) & 1 ? 0 : 4);
	ks->nsub = 16, ks->has_min = 0;
	ks->d = qi_h2f(qi_rd16(b + 108)), ks->dmin = 0;
}

static void
kints_q45_k(int t, const uint8_t *b, int *v, struct qi_kscales *ks)
{
	const uint8_t *qh = b + 16, *q = b + (t == QUANT_Q5_K ? 48 : 16);
	uint8_t sc, m;
	int c, l;

	for (c = 0; c < 8; c++) {
		qi_scale_min_k4(c, b + 4, &sc, &m);
		ks->sc[c] = sc, ks->m[c] = m;
	}
	for (c = 0; c < 4; c++, q += 32) {
		for (l = 0; l < 32; l++)
			*v++ = (q[l] & 0xF) + (t == QUANT_Q5_K ? ((qh[l] >> (2 * c)) & 1) << 4 : 0);
		for (l = 0; l < 32; l++)
			*v++ = (q[l] >> 4) + (t == QUANT_Q5_K ? ((qh[l] >> (2 * c + 1)) & 1) << 4 : 0);
	}
	ks->nsub = 8, ks->has_min = 1;
	ks->d = qi_h2f(qi_rd16(b)), ks->dmin = qi_h2f(qi_rd16(b + 2));
}

static void
kints_q6_k(const uint8_t *b, int *v, struct qi_kscales *ks)
{
	const uint8_t *ql = b, *qh = b + 128;
	int n, l;

	for (l = 0; l < 16; l++)
		ks->sc[l] = (int8_t)b[192 + l];
	for (n = 0; n < QK_K; n += 128, v += 128, ql += 64, qh += 32)
		for (l = 0; l < 32; l++) {
			v[l] = ((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
			v[l + 32] = ((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
			v[l + 64] = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
			v[l + 96] = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
		}
	ks->nsub = 16, ks->has_min = 0;
	ks->d = qi_h2f(qi_rd16(b + 208)), ks->dmin = 0;
}

static void
kints_iq4_xs(const uint8_t *b, int *v, struct qi_kscales *ks)
{
	uint16_t sh = qi_rd16(b + 2);
	const uint8_t *qs = b + 8;
	int ib, j;

	for (ib = 0; ib < 8; ib++, v += 32, qs += 16) {
		ks->sc[ib] = (((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4)) - 32;
		for (j = 0; j < 16; j++) {
			v[j] = qi_kvalues_iq4nl[qs[j] & 0xF];
			v[j + 16] = qi_kvalues_iq4nl[qs[j] >> 4];
		}
	}
	ks->nsub = 8, ks->has_min = 0;
	ks->d = qi_h2f(qi_rd16(b)), ks->dmin = 0;
}

void
qi_kblock_ints(int t, const uint8_t *b, int *v, struct qi_kscales *ks)
{
	switch (t) {
	case QUANT_Q2_K:	kints_q2_k(b, v, ks); break;
	case QUANT_Q3_K:	kints_q3_k(b, v, ks); break;
	case QUANT_Q4_K:
	case QUANT_Q5_K:	kints_q45_k(t, b, v, ks); break;
	case QUANT_Q6_K:	kints_q6_k(b, v, ks); break;
	case QUANT_IQ4_XS:	kints_iq4_xs(b, v, ks); break;
	}
}
