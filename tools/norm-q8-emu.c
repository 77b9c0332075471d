/*
 * norm-q8-emu: a CPU model of the norm + quantize kernels (cuda/ops.cu's
 * k_rmsnorm4, cuda/matvec_q8.cu's k_rmsnorm_q8x and k_q8x; not built by
 * make: a review aid for a machine without a GPU).  It replays the double
 * sum thread by thread in the kernels' order (norm_threads/norm_vec
 * geometry, norm_sumsq_warp's per-thread sum and butterfly,
 * norm_sumsq_block's butterfly over the warps) for the new geometry and
 * for the one before it (256 threads of 4 float4s for 4096), rms_scale,
 * y = (x * sc) * w, and q8_block4 (8 lanes of 4 values: amax butterfly,
 * d = amax / 127, id = 127 / amax, q = rint(y * id), Q8_1's sum), on
 * random rows of 4096, 5120, 128 and 576 floats; it counts rows whose
 * mean (float) differs from the CPU backend's serial sum, and compares the
 * Q8_0 / Q8_1 bytes with quant_quantize_act of the CPU's normed row.
 * make check runs it as below, in a temporary directory (t/emu.bats):
 *   cc -O2 -ffp-contract=off -std=c11 -D_GNU_SOURCE -Ilib -o /tmp/nemu \
 *       tools/norm-q8-emu.c lib/quant*.c lib/util.c -lm && /tmp/nemu 20000
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant.h"

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static float unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }

/* cuda/gpu_impl.cuh's norm_vec / norm_threads; old: 4 float4s a thread always */
static int vec_of(int d4, int old) { return old ? 4 : d4 <= 1024 ? 1 : d4 <= 2048 ? 2 : 4; }
static int threads_of(int d4, int old) { int v = vec_of(d4, old); return ((d4 + v - 1) / v + 31) / 32 * 32; }

/* the kernels' double sum of x[d] squared */
static double gpu_sumsq(const float *x, int d, int old)
{
	int d4 = d / 4, v = vec_of(d4, old), nt = threads_of(d4, old), nw = nt / 32;
	double s[1024], red[32];

	for (int t = 0; t < nt; t++) {	/* norm_sumsq_warp: the thread's float4s in order */
		s[t] = 0.0;
		for (int u = 0; u < v; u++) {
			int i = t + u * nt;
			for (int k = 0; k < 4; k++) {
				float e = i < d4 ? x[4 * i + k] : 0.0f, sq = e * e;
				s[t] += (double)sq;
			}
		}
	}
	for (int w = 0; w < nw; w++)	/* the butterfly: lane l += lane l ^ o */
		for (int o = 16; o > 0; o >>= 1) {
			double n[32];
			for (int l = 0; l < 32; l++)
				n[l] = s[32 * w + l] + s[32 * w + (l ^ o)];
			memcpy(s + 32 * w, n, sizeof n);
		}
	if (nw == 1)
		return s[0];
	for (int l = 0; l < 32; l++)	/* norm_sumsq_block (the old block_sum: the same tree) */
		red[l] = l < nw ? s[32 * l] : 0.0;
	for (int o = 16; o > 0; o >>= 1) {
		double n[32];
		for (int l = 0; l < 32; l++)
			n[l] = red[l] + red[l ^ o];
		memcpy(red, n, sizeof n);
	}
	for (int l = 1; l < 32; l++)	/* every lane the same */
		if (red[l] != red[0])
			abort();
	return red[0];
}

static float rms_scale(double ss, int d, float eps) { return 1.0f / sqrtf((float)(ss / (double)d) + eps); }

/* q8_block4 over one 32-block of y: 8 lanes of 4 values; out as lib/quant's Q8_0 / Q8_1 block */
static void q8_block4(const float *y, int q81, uint8_t *out)
{
	float a[8];
	int q[32], sum[8];

	for (int l = 0; l < 8; l++)
		a[l] = fmaxf(fmaxf(fabsf(y[4 * l]), fabsf(y[4 * l + 1])), fmaxf(fabsf(y[4 * l + 2]),
		    fabsf(y[4 * l + 3])));
	for (int m = 1; m < 8; m <<= 1) {
		float n[8];
		for (int l = 0; l < 8; l++)
			n[l] = fmaxf(a[l], a[l ^ m]);
		memcpy(a, n, sizeof n);
	}
	float id = a[0] != 0.0f ? 127.0f / a[0] : 0.0f, dd = a[0] / 127.0f;
	for (int l = 0; l < 8; l++) {
		sum[l] = 0;
		for (int k = 0; k < 4; k++)
			sum[l] += q[4 * l + k] = (int)(int8_t)rintf(y[4 * l + k] * id);
	}
	for (int m = 1; m < 8; m <<= 1) {
		int n[8];
		for (int l = 0; l < 8; l++)
			n[l] = sum[l] + sum[l ^ m];
		memcpy(sum, n, sizeof n);
	}
	uint16_t h = quant_f32_to_f16(dd), hs = quant_f32_to_f16((float)sum[0] * dd);
	memcpy(out, &h, 2);
	if (q81)
		memcpy(out + 2, &hs, 2);
	for (int j = 0; j < 32; j++)
		out[(q81 ? 4 : 2) + j] = (uint8_t)(int8_t)q[j];
}

int
main(int argc, char **argv)
{
	static const int ds[] = { 4096, 5120, 128, 576 };
	long rows = argc > 1 ? atol(argv[1]) : 2000, bad = 0;
	float eps = 1e-6f;

	for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) {
		int d = ds[di];
		float *x = malloc((size_t)d * 4), *w = malloc((size_t)d * 4), *y = malloc((size_t)d * 4);
		float *yc = malloc((size_t)d * 4);
		uint8_t *qc = malloc((size_t)d * 2), *qg = malloc((size_t)d * 2);
		long mean_new = 0, mean_old = 0, ybad = 0, qbad = 0, dsum = 0;

		for (long r = 0; r < rows; r++) {
			/* magnitudes over a wide range: most rows O(1), some tiny or large, some spiky */
			float sc = ldexpf(1.0f, (int)(rnd() % 41) - 20);
			for (int i = 0; i < d; i++) {
				x[i] = unif(-2, 2) * sc * (rnd() % 97 == 0 ? 50.0f : 1.0f);
				w[i] = unif(0.5f, 1.5f);
			}
			double ss = 0.0;	/* lib/backend_cpu.c's rmsnorm_rows */
			for (int i = 0; i < d; i++)
				ss += (double)(x[i] * x[i]);
			float fc = (float)(ss / d), sn = rms_scale(gpu_sumsq(x, d, 0), d, eps);
			dsum += gpu_sumsq(x, d, 0) != gpu_sumsq(x, d, 1);
			mean_new += (float)(gpu_sumsq(x, d, 0) / d) != fc;
			mean_old += (float)(gpu_sumsq(x, d, 1) / d) != fc;
			float s = 1.0f / sqrtf(fc + eps);
			for (int i = 0; i < d; i++) {
				yc[i] = x[i] * s * w[i];
				y[i] = (x[i] * sn) * w[i];
				ybad += memcmp(&yc[i], &y[i], 4) != 0;
			}
			for (int q81 = 0; q81 < 2; q81++) {
				int bs = q81 ? 36 : 34;
				quant_quantize_act(q81 ? QUANT_Q4_1 : QUANT_Q8_0, yc, qc, d);
				for (int b = 0; b < d / 32; b++)
					q8_block4(y + 32 * b, q81, qg + (size_t)b * bs);
				qbad += memcmp(qc, qg, (size_t)(d / 32) * bs) != 0;
			}
		}
		printf("d=%-5d rows %ld: double sums new != old order %ld; float mean != cpu: new %ld, "
		    "old %ld; y != cpu %ld; q8_0/q8_1 rows != quant_quantize_act %ld\n", d, rows, dsum,
		    mean_new, mean_old, ybad, qbad);
		bad += ybad + qbad;
		free(x), free(w), free(y), free(yc), free(qc), free(qg);
	}
	return bad != 0;
}
