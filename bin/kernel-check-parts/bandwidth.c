/*
 * kernel-check: the bandwidth of the products (--bench).  Shared
 * declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- bandwidth of the products ------------------------------------------ */

static double
median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1], v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Seconds per replay of gr, median of reps. */
static double
time_graph(struct kc *k, struct gpu_graph *gr, int reps)
{
	double t[16];
	float ms;

	gchk(k, gpu_graph_replay(k->g, gr));	/* warm */
	for (int r = 0; r < reps && r < 16; r++) {
		gchk(k, gpu_mark(k->g, 0));
		gchk(k, gpu_graph_replay(k->g, gr));
		gchk(k, gpu_mark(k->g, 1));
		gchk(k, gpu_sync(k->g));
		gchk(k, gpu_elapsed(k->g, 0, 1, &ms));
		t[r] = ms * 1e-3;
	}
	return median(t, reps);
}

static double
bench_copy(struct kc *k, size_t n)
{
	void *a = dput(k, NULL, n), *b = dput(k, NULL, n);
	struct gpu_graph *gr;
	double s;

	gchk(k, gpu_memset(k->g, a, 0x5A, n));
	gchk(k, gpu_graph_begin(k->g));
	for (int i = 0; i < 10; i++)
		gchk(k, gpu_copy(k->g, i % 2 ? a : b, i % 2 ? b : a, n));
	if ((gr = gpu_graph_end(k->g)) == NULL)
		die(1, "gpu: %s", gpu_errmsg(k->g));
	for (int i = 0; i < 30; i++)	/* let the clocks come up */
		gchk(k, gpu_graph_replay(k->g, gr));
	s = time_graph(k, gr, 7) / 10;
	gpu_graph_free(gr);
	gpu_free(k->g, a), gpu_free(k->g, b);
	printf("bench copy %zu MiB: %.1f GB/s (read+write)\n", n >> 20, 2.0 * n / s * 1e-9);
	return 2.0 * n / s;
}

/* One matrix shape and type: launches cycle over copies that together pass 1 GiB. */
static void
bench_matvec(struct kc *k, int t, int64_t rows, int64_t ne0, const uint8_t *dpool, double copy_bw)
{
	static const int ms[] = { 1, 2, 4, 8, 16 };
	size_t nb = quant_row_size(t, ne0) * (size_t)rows;
	int nc = (int)((((size_t)1 << 30) + nb - 1) / nb), nl = nc < 64 ? 64 : nc;
	void **w = xmalloc((size_t)nc * sizeof *w);
	float *x = frand(k, GPU_MATVEC_MAX_ROWS * ne0, -1, 1);
	float *dx = dput(k, x, (size_t)GPU_MATVEC_MAX_ROWS * ne0 * 4);
	float *dy = dput(k, NULL, (size_t)GPU_MATVEC_MAX_ROWS * rows * 4);
	double t1 = 0;

	for (int c = 0; c < nc; c++) {
		w[c] = dput(k, NULL, nb);
		gchk(k, gpu_copy(k->g, w[c], dpool + (size_t)c * 4096 % ((size_t)64 << 20), nb));
	}
	for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
		struct gpu_graph *gr;
		gchk(k, gpu_graph_begin(k->g));
		for (int l = 0; l < nl; l++)
			gchk(k, gpu_matvec(k->g, t, w[l % nc], rows, ne0, dx, ms[mi], dy, NULL));
		if ((gr = gpu_graph_end(k->g)) == NULL)
			die(1, "gpu: %s", gpu_errmsg(k->g));
		double s = time_graph(k, gr, 5) / nl;
		gpu_graph_free(gr);
		if (ms[mi] == 1)
			t1 = s;
		printf("bench %-6s %lldx%-6lld m=%-2d %8.2f us %7.1f GB/s %5.1f%% of copy  x%.2f of m=1\n",
		    quant_name(t), (long long)rows, (long long)ne0, ms[mi], s * 1e6, nb / s * 1e-9,
		    100.0 * nb / s / copy_bw, s / t1);
		fflush(stdout);
	}
	for (int c = 0; c < nc; c++)
		gpu_free(k->g, w[c]);
	free(w), free(x);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
}

/*
 * The decode products on int8 activations (gpu_matvec_q8: x quantized, then
 * matvec_q8.cu's kernels, each also with its weights read in place and
 * staged (L=place, L=staged; L=0 the default choice; Q8_0 also by two
 * lanes a block, L=lane2; NVFP4 has one form, L=0), or for K-quants the
 * Q8_K form and matvec_qk.cu's kernel at 4 and 8 lanes (up to 4 rows also
 * with four blocks in flight a group: L=4 D=4, L=8 D=4; Q6_K also its rows
 * staged in shared memory, L=8 S, and its weights packed four blocks a
 * group, L=8 X4), IQ4_XS and IQ4_NL
 * matvec_iq4.cu's one form, L=0) against the fp32-x kernel
 * (gpu_matvec: k_matvec) on the same weights, graphs of launches cycling
 * over copies that pass 1 GiB, as bench_matvec.  A type with no fp32-x
 * kernel (Q5_1) is timed without it.
 */
static void
bench_i8(struct kc *k, int t, int64_t rows, int64_t ne0, const uint8_t *dpool, double copy_bw)
{
	static const int ms[] = { 1, 4, 8, 16 };
	size_t nb = quant_row_size(t, ne0) * (size_t)rows;
	int nc = (int)((((size_t)1 << 30) + nb - 1) / nb), nl = nc < 64 ? 64 : nc;
	void **w = xmalloc((size_t)nc * sizeof *w);
	float *x = frand(k, GPU_MATVEC_MAX_ROWS * ne0, -1, 1);
	float *dx = dput(k, x, (size_t)GPU_MATVEC_MAX_ROWS * ne0 * 4);
	float *dy = dput(k, NULL, (size_t)GPU_MATVEC_MAX_ROWS * rows * 4);
	int qk = t >= QUANT_Q4_K && t <= QUANT_Q6_K, iq = t == QUANT_IQ4_XS || t == QUANT_IQ4_NL;
	int one = iq || t == QUANT_Q4_0 || t == QUANT_Q5_0;	/* one form: L=0 alone */
	static const char *const how[] = { "0", "place", "staged", "lane2", "loads" };	/* GPU_MV8_* */
	static const int mq[] = { GPU_MV8_AUTO, GPU_MV8_PLACE, GPU_MV8_STAGED, GPU_MV8_LANE2 };
	static const int mn[] = { GPU_MV8_AUTO, GPU_MV8_LOADS };
	/* (LANE2: Q8_0 only; NVFP4's kernel with its loads alone, an xor fold for
	 * the arithmetic: m = 1 and 4, the bound of the kernel's memory side) */
	const int *md = t == QUANT_NVFP4 ? mn : mq;
	int f32 = gpu_can_matvec(t);

	for (int c = 0; c < nc; c++) {
		w[c] = dput(k, NULL, nb);
		gchk(k, gpu_copy(k->g, w[c], dpool + (size_t)c * 4096 % ((size_t)64 << 20), nb));
	}
	/* the K-quant forms after f32 x: lanes, blocks in flight, rows staged,
	 * the weight read as packed Q6_K */
	static const struct { int lanes, depth, stage, packed; const char *name; } qf[] = {
		{ 4, 0, 0, 0, "4" }, { 8, 0, 0, 0, "8" }, { 4, 4, 0, 0, "4 D=4" },
		{ 8, 4, 0, 0, "8 D=4" }, { 8, 0, 1, 0, "8 S" }, { 8, 0, 0, 1, "8 X4" },
	};
	enum { NQF = sizeof qf / sizeof qf[0] };
	/* (X4: the copies' random bytes read as packed four blocks a group,
	 * GPU_T_Q6K_PACKED, a whole number of groups: the layout's speed; its
	 * bits are check_q6k_packed's) */
	int x4 = t == QUANT_Q6_K && rows * (ne0 / 256) % 4 == 0;
	for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
		double s[NQF + 1] = { 0 };
		int fq[NQF + 1] = { 0 }, nq = 1;	/* K-quants: s[l] is form qf[fq[l]]'s */
		if (qk) {
			for (int f = 0; f < NQF; f++)
				if ((qf[f].depth == 0 || ms[mi] <= 4) && (!qf[f].stage || t == QUANT_Q6_K) &&
				    (!qf[f].packed || x4))
					fq[nq++] = f;
		}
		int nv = one ? 2 : qk ? nq : t == QUANT_Q8_0 ? 5 :
		    t != QUANT_NVFP4 ? 4 : ms[mi] == 1 || ms[mi] == 4 ? 3 : 2;
		/* (f32 x and how[] in use; IQ4: one form; K-quants up to 4 rows also
		 * four blocks in flight, Q6_K also its rows staged) */
		for (int i8 = !f32; i8 < nv; i8++) {	/* f32 x, then qf[fq[i8]]; or how[] */
			struct gpu_graph *gr;
			int tt = qk && i8 && qf[fq[i8]].packed ? GPU_T_Q6K_PACKED : t;
			gchk(k, gpu_tune_qk(k->g, qk && i8 ? qf[fq[i8]].lanes : 4));
			gchk(k, gpu_tune_qk_depth(k->g, qk && i8 ? qf[fq[i8]].depth : 0));
			gchk(k, gpu_tune_qk_stage(k->g, qk && i8 ? qf[fq[i8]].stage : 0));
			gchk(k, gpu_tune_mv8(k->g, qk || one || i8 == 0 ? GPU_MV8_AUTO :
			    md[i8 - 1]));
			gchk(k, gpu_matvec_q8(k->g, tt, w[0], rows, ne0, dx, ms[mi], dy, NULL));
			gchk(k, gpu_sync(k->g));	/* the scratch sized outside the graph */
			gchk(k, gpu_graph_begin(k->g));
			for (int l = 0; l < nl; l++)
				gchk(k, i8 ? gpu_matvec_q8(k->g, tt, w[l % nc], rows, ne0, dx, ms[mi], dy, NULL) :
				    gpu_matvec(k->g, t, w[l % nc], rows, ne0, dx, ms[mi], dy, NULL));
			if ((gr = gpu_graph_end(k->g)) == NULL)
				die(1, "gpu: %s", gpu_errmsg(k->g));
			s[i8] = time_graph(k, gr, 5) / nl;
			gpu_graph_free(gr);
		}
		for (int l = 1; l < nv; l++) {
			printf("bench i8 %-6s %lldx%-6lld m=%-2d L=%s %8.2f us %7.1f GB/s %5.1f%% of copy  ",
			    quant_name(t), (long long)rows, (long long)ne0, ms[mi],
			    qk ? qf[fq[l]].name : how[md[l - 1]], s[l] * 1e6, nb / s[l] * 1e-9,
			    100.0 * nb / s[l] / copy_bw);
			if (f32)
				printf("(f32 x: %8.2f us %5.1f%%)  x%.2f faster\n", s[0] * 1e6,
				    100.0 * nb / s[0] / copy_bw, s[0] / s[l]);
			else
				printf("(no f32 x kernel)\n");
		}
		fflush(stdout);
	}
	gchk(k, gpu_tune_qk(k->g, 0));
	gchk(k, gpu_tune_qk_depth(k->g, 0));
	gchk(k, gpu_tune_qk_stage(k->g, 0));
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
	for (int c = 0; c < nc; c++)
		gpu_free(k->g, w[c]);
	free(w), free(x);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
}

/* Seconds per call in a graph of nl calls (one call outside it first: the
 * scratch sized); the call may name the launch's index l_ (0 outside). */
#define BENCH_LAUNCHES(k, nl, call, out) do {					\
	struct gpu_graph *gr_;							\
	int l_ = 0;								\
	gchk((k), (call));							\
	gchk((k), gpu_sync((k)->g));						\
	gchk((k), gpu_graph_begin((k)->g));					\
	for (l_ = 0; l_ < (nl); l_++)						\
		gchk((k), (call));						\
	if ((gr_ = gpu_graph_end((k)->g)) == NULL)				\
		die(1, "gpu: %s", gpu_errmsg((k)->g));				\
	(out) = time_graph((k), gr_, 5) / (nl);					\
	gpu_graph_free(gr_);							\
} while (0)

/*
 * The tensor-core form of the int8 products (GPU_MV8_TC) against k_mv8
 * (GPU_MV8_PLACE: the default below 12 rows; "default" in the lines) on
 * one shape, m = 1, 2, 3, 4, 5, 8, 12, 16, 32 (the GEMM off: past 16 rows
 * the default's two launches of 16, k_mv8t's one), device time per call in
 * a graph over copies that pass 1 GiB, as bench_i8; GB/s of weight bytes.
 * The K-quants and IQ4_XS: k_mvkt (GPU_QKT_ON) against k_mvk (IQ4_XS:
 * k_iq4; GPU_QKT_OFF) at the type's default lanes, the step rows at 32
 * (what sets matvec_qk.cu's qkt_auto_m); Q6_K also packed four blocks a
 * group (X4 lines).
 */
static void
bench_i8tc(struct kc *k, int t, int64_t rows, int64_t ne0, const uint8_t *dpool)
{
	static const int ms[] = { 1, 2, 3, 4, 5, 8, 12, 16, 32 };
	enum { M = 32 };
	size_t nb = quant_row_size(t, ne0) * (size_t)rows;
	int nc = (int)((((size_t)1 << 30) + nb - 1) / nb), nl = nc < 64 ? 64 : nc;
	void **w = xmalloc((size_t)nc * sizeof *w);
	float *x = frand(k, (int64_t)M * ne0, -1, 1);
	float *dx = dput(k, x, (size_t)M * ne0 * 4), *dy = dput(k, NULL, (size_t)M * rows * 4);
	int qk = t == QUANT_Q4_K || t == QUANT_Q5_K || t == QUANT_Q6_K ||
	    t == QUANT_IQ4_XS;	/* gpu_tune_qkt's */

	for (int c = 0; c < nc; c++) {
		w[c] = dput(k, NULL, nb);
		gchk(k, gpu_copy(k->g, w[c], dpool + (size_t)c * 4096 % ((size_t)64 << 20), nb));
		if (t == QUANT_NVFP4)	/* canonical scale bytes, as packed rows have */
			gchk(k, gpu_nvfp4_pack(k->g, w[c], rows, ne0));
	}
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_OFF));
	if (qk)	/* 32 rows: the step rows of the CUDA backend */
		gchk(k, gpu_tune_step_rows(k->g, GPU_STEP_ROWS_MAX));
	/* Q6_K also packed four blocks a group (X4: the copies' random bytes read so) */
	for (int pk = 0; pk < (t == QUANT_Q6_K ? 2 : 1); pk++)
		for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
			int tt = pk ? GPU_T_Q6K_PACKED : t;
			double s[2];
			for (int f = 0; f < 2; f++) {
				if (qk)
					gchk(k, gpu_tune_qkt(k->g, f ? GPU_QKT_ON : GPU_QKT_OFF));
				else
					gchk(k, gpu_tune_mv8(k->g, f ? GPU_MV8_TC : GPU_MV8_PLACE));
				BENCH_LAUNCHES(k, nl, gpu_matvec_q8(k->g, tt, w[l_ % nc], rows, ne0, dx,
				    ms[mi], dy, NULL), s[f]);
			}
			printf("bench i8tc %-6s %lldx%-6lld m=%-2d%s default %8.2f us %7.1f GB/s  tc %8.2f "
			    "us %7.1f GB/s  x%.2f faster\n", quant_name(t), (long long)rows,
			    (long long)ne0, ms[mi], pk ? " X4" : "", s[0] * 1e6, nb / s[0] * 1e-9,
			    s[1] * 1e6, nb / s[1] * 1e-9, s[0] / s[1]);
			fflush(stdout);
		}
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
	gchk(k, gpu_tune_qkt(k->g, GPU_QKT_OFF));
	gchk(k, gpu_tune_step_rows(k->g, GPU_MATVEC_MAX_ROWS));
	for (int c = 0; c < nc; c++)
		gpu_free(k->g, w[c]);
	free(w), free(x);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
}

/*
 * The decode step's small kernels, graphs of 200 launches: the fused norm
 * + quantize (gpu_rmsnorm_matvec_q8_ex with no weight: k_rmsnorm_q8x
 * alone) for m rows of 4096 and 5120, x += t first, and the gated norm of
 * 32 heads of 128, each beside the plain norm (gpu_rmsnorm, k_rmsnorm4);
 * k_q8x of rows of 12288 with an 8-row Q8_0 product (gpu_matvec_q8: the
 * product takes about as long; x must stay as it is, which the fused
 * SwiGLU form would not leave it).
 */
static void
bench_norm(struct kc *k, const uint8_t *dpool)
{
	static const int ms[] = { 1, 4, 16 };
	static const struct { int d, nh, add, gated; const char *what; } sh[] = {
		{ 4096, 1, 0, 0, "rmsnorm q8" }, { 5120, 1, 0, 0, "rmsnorm q8" },
		{ 4096, 1, 1, 0, "add+rmsnorm q8" }, { 128, 32, 0, 1, "gated 32x128 q8" },
	};
	enum { NL = 200, NFF = 12288 };
	size_t nmax = (size_t)16 * NFF;
	float *h = frand(k, (int64_t)nmax, -1, 1), *hw = frand(k, NFF, 0.5f, 1.5f);
	float *x = dput(k, h, nmax * 4), *t = dput(k, h, nmax * 4), *z = dput(k, h, nmax * 4);
	float *w = dput(k, hw, NFF * 4), *y = dput(k, NULL, nmax * 4);
	const void *wq = dpool;
	int tq = QUANT_Q8_0;
	int64_t wr = 8;
	double sf, sp;

	for (size_t si = 0; si < sizeof sh / sizeof sh[0]; si++)
		for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
			int d = sh[si].d, nh = sh[si].nh, ne0 = d * nh, m = ms[mi];
			const float *tt = sh[si].add ? t : NULL, *zz = sh[si].gated ? z : NULL;
			BENCH_LAUNCHES(k, NL, gpu_rmsnorm_matvec_q8_ex(k->g, x, tt, zz, w, d,
			    1e-6f, 0, NULL, NULL, NULL, ne0, m, NULL, NULL), sf);
			if (sh[si].gated)
				BENCH_LAUNCHES(k, NL, gpu_rmsnorm_gated(k->g, x, z, w, y, m * nh, d,
				    1e-6f), sp);
			else
				BENCH_LAUNCHES(k, NL, gpu_rmsnorm(k->g, x, ne0, w, y, ne0, m, ne0,
				    1e-6f), sp);
			printf("bench norm %-16s %5dx%-4d m=%-2d fused %6.2f us  "
			    "(plain norm alone %6.2f us)\n", sh[si].what, nh, d, m, sf * 1e6,
			    sp * 1e6);
			fflush(stdout);
		}
	for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
		BENCH_LAUNCHES(k, NL, gpu_matvec_q8(k->g, tq, wq, wr, NFF, x, ms[mi], y, NULL), sf);
		printf("bench norm %-16s %10d m=%-2d q8x + an 8-row Q8_0 product %6.2f us\n",
		    "quantize", NFF, ms[mi], sf * 1e6);
		fflush(stdout);
	}
	free(h), free(hw);
	gpu_free(k->g, x), gpu_free(k->g, t), gpu_free(k->g, z), gpu_free(k->g, w);
	gpu_free(k->g, y);
}

/* gpu_topk of the sampler's top k over a 248k vocabulary (device time a
 * row, and a K=3 verify's 4 rows), beside gpu_draw and gpu_argmax. */
static void
bench_topk(struct kc *k)
{
	enum { NL = 50, NV = 248320 };
	static const int ks[] = { 1, 40, 1024 };
	float *h = frand(k, 4 * NV, -10, 10), *x = dput(k, h, (size_t)4 * NV * 4);
	float *v = dput(k, NULL, (size_t)4 * 1024 * 4);
	int32_t *id = (int32_t *)dput(k, NULL, (size_t)4 * 1024 * 4);
	void *sc = dput(k, NULL, gpu_topk_scratch(4, 1024)), *dsc = dput(k, NULL, gpu_draw_scratch());
	double s1, s4;

	for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
		BENCH_LAUNCHES(k, NL, gpu_topk(k->g, x, 1, NV, NV, ks[i], 0.8f, v, id, sc), s1);
		BENCH_LAUNCHES(k, NL, gpu_topk(k->g, x, 4, NV, NV, ks[i], 0.8f, v, id, sc), s4);
		printf("bench topk %d k=%-4d 1 row %7.2f us  4 rows %7.2f us\n", NV, ks[i],
		    s1 * 1e6, s4 * 1e6);
	}
	BENCH_LAUNCHES(k, NL, gpu_draw(k->g, x, NV, 0.8f, 1.0f, 0.0f, 0.37, id, dsc), s1);
	BENCH_LAUNCHES(k, NL, gpu_draw(k->g, x, NV, 0.8f, 0.9f, 0.05f, 0.37, id, dsc), s4);
	printf("bench draw %d temp 0.8 %7.2f us  top-p 0.9 min-p 0.05 %7.2f us\n", NV, s1 * 1e6,
	    s4 * 1e6);
	BENCH_LAUNCHES(k, NL, gpu_argmax(k->g, x, 1, NV, id), s1);
	BENCH_LAUNCHES(k, NL, gpu_argmax(k->g, x, 4, NV, id), s4);
	printf("bench argmax %d 1 row %7.2f us  4 rows %7.2f us\n", NV, s1 * 1e6, s4 * 1e6);
	fflush(stdout);
	free(h);
	gpu_free(k->g, x), gpu_free(k->g, v), gpu_free(k->g, id), gpu_free(k->g, sc);
	gpu_free(k->g, dsc);
}

/* The prefill GEMM against the 16-row matvec chunks (x quantized in each)
 * and against its first kernel (mma1), its products by multiplications
 * (mmaf) and cuBLAS on bf16 operands (bf16).  IQ4_XS: mmq_iq4.cu's one
 * tensor-core kernel under mma1, mmaf and mma alike. */
static void
bench_mmq(struct kc *k, int t, int64_t rows, int64_t ne0, const uint8_t *dpool)
{
	static const int ns[] = { 32, 128, 512, 2048 };
	static const int kern[] = { GPU_MMQ_OFF, GPU_MMQ_MMA1, GPU_MMQ_MMAF, GPU_MMQ_MMA,
	    GPU_MMQ_DP4A, GPU_MMQ_BF16 };
	static const char *kname[] = { "chunks", "mma1", "mmaf", "mma", "dp4a", "bf16" };
	enum { L = 10, NMAX = 2048 };
	size_t nb = quant_row_size(t, ne0) * (size_t)rows;
	void *w = dput(k, NULL, nb);
	float *x = frand(k, NMAX * ne0, -1, 1);
	float *dx = dput(k, x, (size_t)NMAX * ne0 * 4), *dy = dput(k, NULL, (size_t)NMAX * rows * 4);

	gchk(k, gpu_copy(k->g, w, dpool, nb));
	for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
		double t0 = 0;
		for (int ki = 0; ki < 6; ki++) {
			double s;
			gchk(k, gpu_tune_mmq(k->g, kern[ki]));
			BENCH_LAUNCHES(k, L, gpu_matvec_q8(k->g, t, w, rows, ne0, dx, ns[ni], dy, NULL), s);
			if (ki == 0)
				t0 = s;
			printf("bench mmq %-6s %lldx%-6lld m=%-4d %-6s %9.2f us %7.1f TOPS  x%.2f of chunks\n",
			    quant_name(t), (long long)rows, (long long)ne0, ns[ni], kname[ki], s * 1e6,
			    2.0 * rows * ne0 * ns[ni] / s * 1e-12, t0 / s);
			fflush(stdout);
		}
	}
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	free(x);
	gpu_free(k->g, w), gpu_free(k->g, dx), gpu_free(k->g, dy);
}

/*
 * The experts' products of the qwen35moe 35B-A3B shape (256 experts of
 * rows x ne0: the gate's 512 x 2048 and the down's 2048 x 512), each of m
 * rows routed to 8 distinct experts at random: a slot a block
 * (GPU_MOE_GROUP_OFF) against the slots grouped by expert
 * (GPU_MOE_GROUP_ALL, the grouping and the gather included), L calls in a
 * graph, median of 5 (Q5_0 also at the 26B-A4B's down rows of 704, 2048
 * of them).  Q8_0, NVFP4, Q4_0 and Q5_0 grouped under each gpu_tune_moe_tc
 * mode too: "cc" (GPU_MOE_TC_OFF: k_moe_mv8g alone, as before the
 * tensor-core kernel) and "tc" (GPU_MOE_TC_ALL) beside the default's
 * mix, and "x" the default against cc; Q4_K and IQ4_XS (and the other
 * K-quants) also grouped by tensor cores (GPU_QKT_ON: k_moe_mvkt).  Past a
 * step's rows also the prompt GEMM (GPU_MMQ_BF16: k_moe_gemm, other
 * numerics) against the fastest grouped form.
 */
static void
bench_moe(struct kc *k, int t, int64_t rows, int64_t ne0, const uint8_t *dpool)
{
	enum { NE = 256, KK = 8, L = 10, MMAX = 512 };
	static const int ms[] = { 1, 4, 32, 128, 512 };
	size_t nb = quant_row_size(t, ne0) * (size_t)rows * NE;
	void *w = dput(k, NULL, nb);
	float *x = frand(k, (int64_t)MMAX * ne0, -1, 1);
	int32_t *ids = xmalloc((size_t)MMAX * KK * 4);
	float *dx = dput(k, x, (size_t)MMAX * ne0 * 4);
	float *dy = dput(k, NULL, (size_t)MMAX * KK * rows * 4);
	int32_t *di = dput(k, NULL, (size_t)MMAX * KK * 4);
	int qk = t == QUANT_Q4_K || t == QUANT_Q5_K || t == QUANT_Q6_K ||
	    t == QUANT_IQ4_XS;	/* and k_moe_mvkt */

	gchk(k, gpu_copy(k->g, w, dpool, nb));
	if (t == QUANT_NVFP4)
		gchk(k, gpu_nvfp4_pack(k->g, w, rows * NE, ne0));
	moe_ids(k, ids, MMAX, KK, NE);
	gchk(k, gpu_upload(k->g, di, ids, (size_t)MMAX * KK * 4));
	for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
		int m = ms[mi], ns = m * KK, ng = t == QUANT_Q8_0 || t == QUANT_NVFP4 ||
		    t == QUANT_Q4_0 || t == QUANT_Q5_0 ? 4 : 2 + qk;
		double s[4];
		for (int gi = 0; gi < ng; gi++) {
			gchk(k, gpu_tune_moe_group(k->g, gi ? GPU_MOE_GROUP_ALL : GPU_MOE_GROUP_OFF));
			gchk(k, gpu_tune_moe_tc(k->g, gi == 2 && !qk ? GPU_MOE_TC_OFF : gi == 3 ?
			    GPU_MOE_TC_ALL : GPU_MOE_TC_AUTO));
			gchk(k, gpu_tune_qkt(k->g, gi == 2 && qk ? GPU_QKT_ON : GPU_QKT_OFF));
			BENCH_LAUNCHES(k, L, gpu_moe_matvec(k->g, t, w, rows, ne0, NE, di, ns, KK, dx, m,
			    dy, NULL), s[gi]);
		}
		printf("bench moe %-6s %dx%lldx%-5lld m=%-4d top%d  per-slot %9.2f us  grouped "
		    "%9.2f us  x%.2f", quant_name(t), NE, (long long)rows, (long long)ne0, m, KK,
		    s[0] * 1e6, s[1] * 1e6, s[0] / s[1]);
		if (ng == 4)
			printf("  cc %9.2f us  tc %9.2f us  x%.2f of cc", s[2] * 1e6, s[3] * 1e6,
			    s[2] / s[1]);
		if (qk)
			printf("  grouped tc %9.2f us  x%.2f of grouped", s[2] * 1e6, s[1] / s[2]);
		if (m > gpu_step_rows(k->g)) {	/* a prompt's: the bf16 GEMM */
			double sg, best = s[1];
			for (int gi = 2; gi < ng; gi++)
				best = s[gi] < best ? s[gi] : best;
			gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_BF16));
			BENCH_LAUNCHES(k, L, gpu_moe_matvec(k->g, t, w, rows, ne0, NE, di, ns, KK, dx, m,
			    dy, NULL), sg);
			gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
			printf("  gemm bf16 %9.2f us  x%.2f of the best grouped", sg * 1e6, best / sg);
		}
		printf("\n");
		fflush(stdout);
	}
	gchk(k, gpu_tune_moe_tc(k->g, GPU_MOE_TC_AUTO));
	gchk(k, gpu_tune_qkt(k->g, GPU_QKT_OFF));
	gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_AUTO));
	free(x), free(ids);
	gpu_free(k->g, w), gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, di);
}

void
bench(struct kc *k)
{
	static const int64_t shapes[][2] = { { 4096, 4096 }, { 12288, 4096 }, { 4096, 12288 } };
	static const int64_t mmq_shapes[][2] = { { 12288, 4096 }, { 4096, 12288 }, { 17408, 5120 } };
	static const int i8_types[] = { QUANT_Q8_0, QUANT_NVFP4, QUANT_Q4_1, QUANT_Q5_1, QUANT_Q4_K,
	    QUANT_Q5_K, QUANT_Q6_K, QUANT_IQ4_XS, QUANT_IQ4_NL, QUANT_Q4_0, QUANT_Q5_0 };
	/* offsets of the copies + the largest matrix (bench_moe's Q8_0 stack: 285 MB) */
	size_t pn = ((size_t)64 << 20) + ((size_t)256 << 20);
	uint8_t *pool = xmalloc(pn);
	double bw;

	for (size_t i = 0; i < pn / 8; i++) {	/* random bits: never time zeros */
		uint64_t r = rnd(k);
		memcpy(pool + 8 * i, &r, 8);
	}
	uint8_t *dpool = dput(k, pool, pn);

	printf("bench device %s\n", gpu_name(k->g));
	printf("bench chunk %d unroll %d\n", k->chunk, k->unroll);
	bw = bench_copy(k, (size_t)1 << 30);
	bench_norm(k, dpool);
	bench_topk(k);
	for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
		for (int ti = 0; ti < NTYPES; ti++)	/* (every one of them gpu_can_matvec) */
			if (k->only < 0 || k->only == mv_types[ti])
				bench_matvec(k, mv_types[ti], shapes[si][0], shapes[si][1], dpool, bw);
	for (size_t ti = 0; ti < sizeof i8_types / sizeof i8_types[0]; ti++) {	/* int8 x */
		int t = i8_types[ti];
		if (k->only >= 0 && k->only != t)
			continue;
		if (!gpu_can_matvec_q8(t)) {
			printf("bench i8 %s: skipped (no product on int8 activations on the GPU)\n",
			    quant_name(t));
			continue;
		}
		for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
			bench_i8(k, t, shapes[si][0], shapes[si][1], dpool, bw);
		if (t == QUANT_Q6_K) {	/* Gemma-4 31B's FFN up (rows of 4410 bytes, 2-byte
					 * aligned) and down (rows of 84 super-blocks) */
			bench_i8(k, t, 21504, 5376, dpool, bw);
			bench_i8(k, t, 5376, 21504, dpool, bw);
		}
	}
	for (int ti = 0; ti < 8; ti++)	/* the tensor-core forms (GPU_MV8_TC, GPU_QKT_ON) */
		for (size_t si = 1; si < 3; si++) {	/* 12288x4096, 4096x12288 */
			static const int tt[] = { QUANT_Q8_0, QUANT_NVFP4, QUANT_Q4_K, QUANT_Q5_K,
			    QUANT_Q6_K, QUANT_IQ4_XS, QUANT_Q4_0, QUANT_Q5_0 };
			int t = tt[ti];
			if (k->only < 0 || k->only == t)
				bench_i8tc(k, t, shapes[si][0], shapes[si][1], dpool);
			if (si == 2 && t == QUANT_Q6_K && (k->only < 0 || k->only == t)) {
				bench_i8tc(k, t, 21504, 5376, dpool);	/* Gemma-4 31B's FFN up */
				bench_i8tc(k, t, 5376, 21504, dpool);	/* and down */
			}
		}
	for (int ti = 0; ti < 3; ti++)	/* (gpu_can_matmul_q8's two; IQ4_XS: mmq_iq4.cu) */
		for (size_t si = 0; si < sizeof mmq_shapes / sizeof mmq_shapes[0]; si++) {
			int t = ti == 2 ? QUANT_IQ4_XS : ti ? QUANT_NVFP4 : QUANT_Q8_0;
			if (k->only < 0 || k->only == t)
				bench_mmq(k, t, mmq_shapes[si][0], mmq_shapes[si][1], dpool);
		}
	static const int moe_types[] = { QUANT_Q4_K, QUANT_Q8_0, QUANT_IQ4_XS, QUANT_NVFP4,
	    QUANT_Q4_0, QUANT_Q5_0 };
	for (size_t ti = 0; ti < sizeof moe_types / sizeof moe_types[0]; ti++)
		if (k->only < 0 || k->only == moe_types[ti]) {
			bench_moe(k, moe_types[ti], 512, 2048, dpool);	/* gate, up */
			bench_moe(k, moe_types[ti], 2048, 512, dpool);	/* down */
		}
	if (k->only < 0 || k->only == QUANT_Q5_0)	/* the 26B-A4B's down: rows of 704 */
		bench_moe(k, QUANT_Q5_0, 2048, 704, dpool);
	gpu_free(k->g, dpool);
	free(pool);
}

/*
 * Attention of one layer for an M-token prompt at position 0, of NH
 * query heads on NKV KV heads of HD (the 9B: 16, 4, 256; Gemma-4 31B's
 * global layers: 32, 4, 512; with a sliding window W > 0, Gemma-4
 * 26B-A4B's sliding layers: 16, 8, 256, 1024 keys): gpu_attention_prefill
 * beside the 16-row pieces of gpu_attention (gpu_attention_window) decode
 * and verify use (what attend() ran for prompts before), device time
 * between events, median of 5.
 */
void
bench_attn(struct kc *k, int NH, int NKV, int HD, int M, int W)
{
	enum { R = GPU_MATVEC_MAX_ROWS };
	size_t nq = (size_t)M * NH * HD, nkv = (size_t)M * NKV * HD;
	float *h = frand(k, (int64_t)nq, -1, 1), *q = dput(k, h, nq * 4), *K = dput(k, h, nkv * 4);
	float *V = dput(k, h + nkv, nkv * 4), *o = dput(k, NULL, nq * 4);
	float scale = 1.0f / sqrtf((float)HD);
	double t[2][5];
	float ms;

	for (int c = 0; c < 2; c++)
		for (int r = -1; r < 5; r++) {	/* r = -1: the warm-up */
			gchk(k, gpu_mark(k->g, 0));
			if (c == 0)
				gchk(k, gpu_attention_prefill(k->g, q, K, V, o, M, NH, NKV, HD, 0, scale,
				    0, W, 0));
			else
				for (int r0 = 0; r0 < M; r0 += R)
					gchk(k, W > 0 ? gpu_attention_window(k->g,
					    q + (size_t)r0 * NH * HD, K, V, o + (size_t)r0 * NH * HD, R,
					    NH, NKV, HD, r0, NULL, 0, scale, W, 0) :
					    gpu_attention(k->g, q + (size_t)r0 * NH * HD, K, V,
					    o + (size_t)r0 * NH * HD, R, NH, NKV, HD, r0, scale));
			gchk(k, gpu_mark(k->g, 1));
			gchk(k, gpu_sync(k->g));
			gchk(k, gpu_elapsed(k->g, 0, 1, &ms));
			if (r >= 0)
				t[c][r] = ms * 1e-3;
		}
	double tf = median(t[0], 5), tp = median(t[1], 5);
	printf("bench attention prefill h=%d/%d hd=%d m=%d p0=0 window=%d flash %8.1f us  "
	    "16-row pieces %8.1f us  x%.1f\n", NH, NKV, HD, M, W, tf * 1e6, tp * 1e6, tp / tf);
	fflush(stdout);
	free(h);
	gpu_free(k->g, q), gpu_free(k->g, K), gpu_free(k->g, V), gpu_free(k->g, o);
}

/*
 * The gated delta rule of one layer for a 512-token prompt, the 9B and 27B
 * shapes (16 key heads, 32 or 48 value heads of 128, GGUF order): the
 * chunked form (backend_gdn_chunk: k_gdn_chunk) beside the recurrent one
 * (backend_gdn_step: k_gdn), wall time of a synchronised call, median of 5.
 */
void
bench_gdn(struct kc *k, int dev)
{
	static const int nvs[] = { 32, 48 };
	enum { M = 512, NK = 16, D = 128 };
	char err[UTIL_ERRLEN], dn[32];
	struct backend *be;

	snprintf(dn, sizeof dn, "cuda:%d", dev);
	if ((be = backend_open(dn, 0, err)) == NULL)
		die(1, "%s", err);
	for (size_t i = 0; i < sizeof nvs / sizeof nvs[0]; i++) {
		int nv = nvs[i], ld = 2 * NK * D + nv * D;
		struct backend_gdn g = { NK, nv, D, D, 1, 0, 1e-6f };
		size_t n[] = { (size_t)M * ld, (size_t)M * nv, (size_t)M * nv, (size_t)nv,
		    (size_t)nv, (size_t)nv * D * D, (size_t)M * nv * D };
		float lo[] = { -1, -3, -3, -2, -1, -0.5f, 0 }, hi[] = { 1, 3, 3, -0.1f, 1, 0.5f, 0 };
		float *b[7];
		double t[2][5];

		for (int j = 0; j < 7; j++) {
			float *h = frand(k, (int64_t)n[j], lo[j], hi[j]);
			b[j] = bput(be, h, n[j]);
			free(h);
		}
		for (int c = 0; c < 2; c++)
			for (int r = -1; r < 5; r++) {	/* r = -1: the warm-up */
				double t0;

				bchk(be, backend_sync(be));
				t0 = util_now();
				bchk(be, c ? backend_gdn_step(be, &g, M, b[0], ld, b[1], b[2], b[3],
				    b[4], b[5], NULL, b[6]) : backend_gdn_chunk(be, &g, M, b[0], ld,
				    b[1], b[2], b[3], b[4], b[5], b[6]));
				bchk(be, backend_sync(be));
				if (r >= 0)
					t[c][r] = util_now() - t0;
			}
		double tc = median(t[0], 5), ts = median(t[1], 5);
		printf("bench gdn k%dx%d v%dx%d m=%d chunked %8.1f us  row by row %8.1f us  x%.1f\n",
		    NK, D, nv, D, M, tc * 1e6, ts * 1e6, ts / tc);
		fflush(stdout);
		for (int j = 0; j < 7; j++)
			backend_mfree(be, b[j]);
	}
	backend_close(be);
}

#endif	/* MEMRA_HAVE_CUDA */
