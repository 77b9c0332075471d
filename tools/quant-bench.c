/*
 * quant-bench: CPU dot-product throughput of lib/quant, in GB/s of weight
 * bytes on one core (one thread).  For each type: a matrix of rows x k
 * weights (sized to stay in L2, or to spill to DRAM), one activation row
 * quantized once, and every row dotted with it; repeated, timed, and the
 * median/min/max of the runs printed as TSV:
 *   quant scenario k n median min max unit
 * Time is the thread's CPU time (this machine is shared: wall time would
 * measure the neighbours); -w uses wall time instead.  -m M adds, per
 * type, the L2 matrix against M activation rows at once
 * (quant_vec_dot_rows, scenario rows-mM-l2), in GB/s of weight bytes
 * times M: the one-row figure it would take to go as fast; and where
 * the CPU has AVX-512 VNNI for the type, the same from packed rows
 * (quant_vec_dot_packed, scenario packed-mM-l2).
 * usage: quant-bench [-w] [-r runs] [-k k] [-m M] [TYPE...]
 */
#include "quant.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int use_wall;	/* set once in main */

static double
now(void)
{
	struct timespec ts;

	if (use_wall)
		return util_now();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* GB/s for one run of `reps` passes over `rows` rows (against m rows at
 * once when m > 0; packed, quant_vec_dot_packed, when pk is not NULL). */
static double
one_run(int t, int f32, int m, int64_t k, int64_t rows, int reps, const uint8_t *w, size_t rsz,
    const void *xq, size_t xsz, const void *pk, const float *x, volatile float *sink)
{
	double t0 = now(), dt;
	float out[64];
	int64_t r;
	int p;

	for (p = 0; p < reps; p++)
		for (r = 0; r < rows; r++)
			if (pk != NULL) {
				quant_vec_dot_packed(t, k, w + r * rsz, pk, m, out);
				*sink += out[m - 1];
			} else if (m > 0) {
				quant_vec_dot_rows(t, k, w + r * rsz, xq, xsz, m, out);
				*sink += out[m - 1];
			} else
				*sink += f32 ? quant_dot_f32(t, k, w + r * rsz, x) : quant_vec_dot(t, k, w + r * rsz, xq);
	dt = now() - t0;
	return (double)rsz * rows * reps * (m > 0 ? m : 1) / dt / 1e9;
}

static void
bench(int t, int64_t k, int runs, size_t bytes, const char *scen, int f32, int m, int packed)
{
	size_t rsz = quant_row_size(t, k), xsz = quant_row_size(quant_vec_dot_type(t), k);
	int64_t rows = (int64_t)(bytes / rsz), i;
	uint8_t *w = malloc(rsz * rows);
	float *x = malloc(k * sizeof(float)), *row = malloc(k * sizeof(float));
	uint8_t *xq = malloc(xsz * (m > 0 ? m : 1) + 1), *pk = NULL;
	double *gbs = malloc(runs * sizeof(double));
	volatile float sink = 0;
	uint64_t s = 88172645463325252ull;
	int reps, j;

	for (i = 0; i < k; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		x[i] = (float)((int64_t)(s >> 40) - (1 << 23)) / (1 << 23);
		row[i] = x[(i * 7) % k];
	}
	for (i = 0; i < rows; i++) {
		row[i % k] += 0.001f;
		if (quant_can_quantize(t))
			quant_quantize_row(t, row, w + i * rsz, k, NULL);
		else
			memset(w + i * rsz, 0x11, rsz);
	}
	for (j = 0; j < (m > 0 ? m : 1); j++) {
		quant_quantize_act(t, x, xq + j * xsz, k);
		x[j % k] += 0.25f;
	}
	if (packed) {
		pk = malloc(quant_pack_size(t, k, m));
		quant_pack(t, k, xq, xsz, m, pk);
	}
	/* passes per run: about 0.2 s */
	reps = 1;
	while (one_run(t, f32, m, k, rows, reps, w, rsz, xq, xsz, pk, x, &sink) * 0.2 * 1e9 >
	    (double)rsz * rows * reps * (m > 0 ? m : 1) * 2)
		reps *= 2;
	for (j = 0; j < runs; j++)
		gbs[j] = one_run(t, f32, m, k, rows, reps, w, rsz, xq, xsz, pk, x, &sink);
	qsort(gbs, runs, sizeof(double), cmpd);
	printf("%s\t%s\t%lld\t%d\t%.3f\t%.3f\t%.3f\t%s\n", quant_name(t), scen, (long long)k, runs,
	    gbs[runs / 2], gbs[0], gbs[runs - 1], use_wall ? "GB/s" : "GB/s-cpu");
	fflush(stdout);
	free(w), free(x), free(row), free(xq), free(pk), free(gbs);
}

int
main(int argc, char *argv[])
{
	static const char *deflt[] = { "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q4_K",
		"Q5_K", "Q6_K", "MXFP4", "NVFP4", "IQ4_NL", "Q2_K", "Q3_K", "IQ4_XS", NULL };
	const char **types = deflt;
	int64_t k = 4096;
	int runs = 7, m = 0, ch, i;
	char scen[32];

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "wr:k:m:")) != -1) {
		switch (ch) {
		case 'w': use_wall = 1; break;
		case 'r': runs = atoi(optarg); break;
		case 'k': k = atoll(optarg); break;
		case 'm': m = atoi(optarg); break;
		default: fprintf(stderr, "usage: quant-bench [-w] [-r runs] [-k k] [-m M] [TYPE...]\n"); return 2;
		}
	}
	if (optind < argc) {
		argv[argc] = NULL;
		types = (const char **)argv + optind;
	}
	if (runs < 1 || k < 256 || k % 256 || m < 0 || m > 64) {
		fprintf(stderr, "quant-bench: runs >= 1, k a multiple of 256, m 0..64\n");
		return 2;
	}
	printf("# dot products: %s\n", quant_dot_impl());
	for (i = 0; types[i]; i++) {
		int t = quant_from_name(types[i]);

		if (t < 0 || quant_vec_dot_type(t) < 0) {
			fprintf(stderr, "quant-bench: '%s' has no dot product\n", types[i]);
			return 2;
		}
		bench(t, k, runs, 512 << 10, "vec_dot-l2", 0, 0, 0);
		bench(t, k, runs, (size_t)256 << 20, "vec_dot-dram", 0, 0, 0);
		bench(t, k, runs, 512 << 10, "dot_f32-l2", 1, 0, 0);
		if (m > 0) {
			snprintf(scen, sizeof scen, "rows-m%d-l2", m);
			bench(t, k, runs, 512 << 10, scen, 0, m, 0);
		}
		if (m > 0 && quant_pack_size(t, k, m) > 0) {
			snprintf(scen, sizeof scen, "packed-m%d-l2", m);
			bench(t, k, runs, 512 << 10, scen, 0, m, 1);
		}
	}
	return 0;
}
