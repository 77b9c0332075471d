/*
 * kernel-check: the experts grouped by expert (gpu_tune_moe_group).  Shared
 * declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- the experts grouped by expert (gpu_tune_moe_group) ------------------ */

/* The routings of check_moe_group. */
enum { MG_RANDOM, MG_ONE, MG_SPREAD, MG_SKEW, MG_RUNS };

/*
 * ids[ns] of n_exp experts: MG_RANDOM each at random; MG_ONE all on
 * expert n_exp - 1 (tiles of GPU_MOE_MT and a part tile); MG_SPREAD slot s
 * on expert s % n_exp (one slot an expert while ns <= n_exp); MG_SKEW
 * every other slot on expert 0, the rest at random, with ids outside [0,
 * n_exp) (-1, n_exp, INT32_MIN, INT32_MAX: NaN rows) at a few slots;
 * MG_RUNS expert e on 0, 1, 5, 17, 32, 40, 16, 9 slots as e % 8 says (the
 * tensor-core kernel's single tiles and pairs on either side of its
 * bound), the slots past those at random, shuffled, with the ill ids of
 * MG_SKEW.
 */
static void
mg_ids(struct kc *k, int32_t *ids, int ns, int n_exp, int how)
{
	static const int runs[] = { 0, 1, 5, 17, 32, 40, 16, 9 };
	int s = 0;

	for (int e = 0; how == MG_RUNS && e < n_exp; e++)
		for (int i = 0; i < runs[e % 8] && s < ns; i++)
			ids[s++] = e;
	for (; s < ns; s++) {
		int32_t r = (int32_t)(rnd(k) % (uint64_t)n_exp);
		ids[s] = how == MG_ONE ? n_exp - 1 : how == MG_SPREAD ? s % n_exp :
		    how == MG_SKEW && s % 2 == 0 ? 0 : r;
	}
	for (int i = ns - 1; how == MG_RUNS && i > 0; i--) {
		int j = (int)(rnd(k) % (uint64_t)(i + 1));
		int32_t v = ids[i];
		ids[i] = ids[j], ids[j] = v;
	}
	if (how == MG_SKEW || how == MG_RUNS) {
		const int32_t bad[] = { -1, n_exp, INT32_MIN, INT32_MAX };
		for (int i = 0; i < 4 && i < ns; i++)
			ids[rnd(k) % (uint64_t)ns] = bad[i];
	}
}

/*
 * gpu_moe_matvec with the slots grouped by expert (GPU_MOE_GROUP_ALL)
 * against a block per slot (GPU_MOE_GROUP_OFF), bit for bit (NaN rows
 * included): a stack of n_exp experts of rows x ne0, type t, nx input
 * rows, per slots a row (ns = nx * per), routed as how says; scaled (a
 * weight's scale) when sc.  For Q8_0, NVFP4, Q4_0 and Q5_0 the grouped call under
 * each of gpu_tune_moe_tc's forced modes too (GPU_MOE_TC_ALL: every tile
 * by the tensor-core kernel, "moe group ... tc"; GPU_MOE_TC_OFF: none,
 * "... cc"; the default's mix is the first line).  Then the default
 * (GPU_MOE_GROUP_AUTO) as well, and with graph the grouped call recorded
 * as a CUDA graph and replayed after the ids changed (at random) against
 * the per-slot products of the new ids.
 */
static void
check_moe_group(struct kc *k, int t, int n_exp, int64_t rows, int64_t ne0, int nx, int per,
    int how, int sc, int graph)
{
	static const char *hn[] = { "random", "one", "spread", "skew", "runs" };
	struct wset s;
	int ns = nx * per;
	int64_t ny = (int64_t)ns * rows;
	float *x = frand(k, (int64_t)nx * ne0, -1, 1), *y0 = xmalloc((size_t)ny * 4);
	float *y1 = xmalloc((size_t)ny * 4), scale = 0.75f;
	int32_t *ids = xmalloc((size_t)ns * 4);
	char name[64], shape[80];

	mg_ids(k, ids, ns, n_exp, how);
	wset_new(k, &s, t, (int64_t)n_exp * rows, ne0);
	float *dx = dput(k, x, (size_t)nx * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	float *ds = sc ? dput(k, &scale, 4) : NULL;
	int32_t *di = dput(k, ids, (size_t)ns * 4);
	snprintf(shape, sizeof shape, "%d of %lldx%lld ns=%d/%d %s%s", n_exp, (long long)rows,
	    (long long)ne0, ns, per, hn[how], sc ? " *s" : "");
	snprintf(name, sizeof name, "moe group %s", quant_name(t));
	gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_OFF));
	gchk(k, gpu_moe_matvec(k->g, t, s.dw, rows, ne0, n_exp, di, ns, per, dx, nx, dy, ds));
	dget(k, y0, dy, (size_t)ny * 4);
	gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_ALL));
	gchk(k, gpu_memset(k->g, dy, 0xFF, (size_t)ny * 4));	/* no row left from before */
	gchk(k, gpu_moe_matvec(k->g, t, s.dw, rows, ne0, n_exp, di, ns, per, dx, nx, dy, ds));
	dget(k, y1, dy, (size_t)ny * 4);
	brk(k, y1, ny);
	same_bits(k, name, shape, y1, y0, ny);
	for (int f = 0; (t == QUANT_Q8_0 || t == QUANT_NVFP4 || t == QUANT_Q4_0 ||
	    t == QUANT_Q5_0) && f < 2; f++) {
		/* profiled: which grouped kernels ran (the tensor-core one alone, or
		 * the CUDA-core one alone; neither past GPU_MOE_GROUP_EXPERTS) */
		int grp = n_exp <= GPU_MOE_GROUP_EXPERTS;
		unsigned long ntc, ncc;
		char sh2[128];
		gchk(k, gpu_tune_moe_tc(k->g, f ? GPU_MOE_TC_OFF : GPU_MOE_TC_ALL));
		gchk(k, gpu_memset(k->g, dy, 0xFF, (size_t)ny * 4));
		gpu_prof_reset(k->g);
		gchk(k, gpu_prof_begin(k->g, 0));
		gchk(k, gpu_moe_matvec(k->g, t, s.dw, rows, ne0, n_exp, di, ns, per, dx, nx, dy,
		    ds));
		gchk(k, gpu_prof_end(k->g));
		ntc = prof_launches(k, "moe matvec_q8 tc");
		ncc = prof_launches(k, "moe matvec_q8 grouped");
		gpu_prof_reset(k->g);
		dget(k, y1, dy, (size_t)ny * 4);
		brk(k, y1, ny);
		snprintf(name, sizeof name, "moe group %s %s", quant_name(t), f ? "cc" : "tc");
		snprintf(sh2, sizeof sh2, "%s k%lu/%lu", shape, ntc, ncc);
		same_bits_if(k, name, sh2, y1, y0, ny, (ntc > 0) == (grp && !f) &&
		    (ncc > 0) == (grp && f));
	}
	gchk(k, gpu_tune_moe_tc(k->g, GPU_MOE_TC_AUTO));
	gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_AUTO));
	gchk(k, gpu_memset(k->g, dy, 0xFF, (size_t)ny * 4));
	gchk(k, gpu_moe_matvec(k->g, t, s.dw, rows, ne0, n_exp, di, ns, per, dx, nx, dy, ds));
	dget(k, y1, dy, (size_t)ny * 4);
	brk(k, y1, ny);
	snprintf(name, sizeof name, "moe group %s auto", quant_name(t));
	same_bits(k, name, shape, y1, y0, ny);
	if (graph) {	/* recorded grouped, replayed on another routing (ids read on the device) */
		struct gpu_graph *gr;
		mg_ids(k, ids, ns, n_exp, MG_RANDOM);
		gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_ALL));
		gchk(k, gpu_graph_begin(k->g));
		gchk(k, gpu_moe_matvec(k->g, t, s.dw, rows, ne0, n_exp, di, ns, per, dx, nx, dy, ds));
		if ((gr = gpu_graph_end(k->g)) == NULL)
			die(1, "gpu: %s", gpu_errmsg(k->g));
		gchk(k, gpu_upload(k->g, di, ids, (size_t)ns * 4));
		gchk(k, gpu_memset(k->g, dy, 0xFF, (size_t)ny * 4));
		gchk(k, gpu_graph_replay(k->g, gr));
		dget(k, y1, dy, (size_t)ny * 4);
		gpu_graph_free(gr);
		gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_OFF));
		gchk(k, gpu_moe_matvec(k->g, t, s.dw, rows, ne0, n_exp, di, ns, per, dx, nx, dy, ds));
		dget(k, y0, dy, (size_t)ny * 4);
		gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_AUTO));
		brk(k, y1, ny);
		snprintf(name, sizeof name, "moe group %s graph", quant_name(t));
		same_bits(k, name, shape, y1, y0, ny);
	}
	for (int lanes = t == QUANT_IQ4_XS ? 8 : 4; lanes <= 8 && (t == QUANT_Q4_K ||
	    t == QUANT_Q5_K || t == QUANT_Q6_K || t == QUANT_IQ4_XS); lanes += 4) {
		/* grouped by tensor cores (k_moe_mvkt) against k_moe_mvk at lanes L
		 * (IQ4_XS: k_moe_iq4, 8 lanes, its one form) */
		gchk(k, gpu_tune_qk(k->g, lanes));
		gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_OFF));
		gchk(k, gpu_moe_matvec(k->g, t, s.dw, rows, ne0, n_exp, di, ns, per, dx, nx, dy, ds));
		dget(k, y0, dy, (size_t)ny * 4);
		gchk(k, gpu_tune_qkt(k->g, GPU_QKT_ON));
		gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_ALL));
		gchk(k, gpu_memset(k->g, dy, 0xFF, (size_t)ny * 4));
		gchk(k, gpu_moe_matvec(k->g, t, s.dw, rows, ne0, n_exp, di, ns, per, dx, nx, dy, ds));
		dget(k, y1, dy, (size_t)ny * 4);
		gchk(k, gpu_tune_qkt(k->g, GPU_QKT_OFF));
		gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_AUTO));
		gchk(k, gpu_tune_qk(k->g, 0));
		brk(k, y1, ny);
		snprintf(name, sizeof name, "moe group %s tc L=%d", quant_name(t), lanes);
		same_bits(k, name, shape, y1, y0, ny);
	}
	free(x), free(y0), free(y1), free(ids);
	gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, ds), gpu_free(k->g, di);
	wset_free(k, &s);
}

/* gpu_moe_matvec of the stack s into dy (NaN bytes first), profiled:
 * the prompt GEMM's launches. */
static unsigned long
gemm_call(struct kc *k, const struct wset *s, int64_t rows, int n_exp, const int32_t *di,
    int ns, int per, const float *dx, int nx, float *dy, const float *ds)
{
	unsigned long n;

	gchk(k, gpu_memset(k->g, dy, 0xFF, (size_t)ns * rows * 4));
	gpu_prof_reset(k->g);
	gchk(k, gpu_prof_begin(k->g, 0));
	gchk(k, gpu_moe_matvec(k->g, s->t, s->dw, rows, s->ne0, n_exp, di, ns, per, dx, nx, dy,
	    ds));
	gchk(k, gpu_prof_end(k->g));
	n = prof_launches(k, "moe gemm bf16");
	gpu_prof_reset(k->g);
	return n;
}

/*
 * The experts' prompt GEMM (gpu_moe_matvec under GPU_MMQ_BF16 with more
 * input rows than a step: "moe gemm"), a stack as check_moe_group's:
 * - each slot's row against the exact product of its operands rounded to
 *   bf16 (the expert's dequantized weights, its x row), within 1e-5 of the
 *   terms' magnitudes, NaN rows for the ill ids, the GEMM's launches
 *   counted by the profile (k: in the shape);
 * - "... alone": its bits again with two slots in three routed elsewhere
 *   at random, on the third's rows (a slot's row depends on its own
 *   operands, not on which or how many slots share its expert's tiles);
 * - "... step": on a step's rows (gpu_step_rows) no GEMM, and the bits of
 *   the decode kernels (GPU_MMQ_MMA).
 */
static void
check_moe_gemm(struct kc *k, int t, int n_exp, int64_t rows, int64_t ne0, int nx, int per,
    int how, int sc)
{
	static const char *hn[] = { "random", "one", "spread", "skew", "runs" };
	struct wset s;
	int ns = nx * per, sr = gpu_step_rows(k->g), nk = 0;
	int64_t ny = (int64_t)ns * rows, nw = (int64_t)n_exp * rows * ne0;
	float *x = frand(k, (int64_t)nx * ne0, -1, 1), *y0 = xmalloc((size_t)ny * 4);
	float *y1 = xmalloc((size_t)ny * 4), *a = xmalloc((size_t)ny * 4);
	float *b = xmalloc((size_t)ny * 4), scale = 0.75f;
	float *wb = xmalloc((size_t)nw * 4), *xb = xmalloc((size_t)nx * ne0 * 4);
	double f = sc ? 0.75 : 1.0, maxd = 0;
	int32_t *ids = xmalloc((size_t)ns * 4), *id2 = xmalloc((size_t)ns * 4);
	char name[64], shape[96], sh2[128];
	unsigned long ng;
	int ok = 1;

	mg_ids(k, ids, ns, n_exp, how);
	wset_new(k, &s, t, (int64_t)n_exp * rows, ne0);
	for (int64_t i = 0; i < nw; i++)
		wb[i] = bf16_round(s.wf[i]);
	for (int64_t i = 0; i < (int64_t)nx * ne0; i++)
		xb[i] = bf16_round(x[i]);
	float *dx = dput(k, x, (size_t)nx * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	float *ds = sc ? dput(k, &scale, 4) : NULL;
	int32_t *di = dput(k, ids, (size_t)ns * 4);
	snprintf(shape, sizeof shape, "%d of %lldx%lld ns=%d/%d %s%s", n_exp, (long long)rows,
	    (long long)ne0, ns, per, hn[how], sc ? " *s" : "");
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_BF16));
	ng = gemm_call(k, &s, rows, n_exp, di, ns, per, dx, nx, dy, ds);
	dget(k, y0, dy, (size_t)ny * 4);
	memcpy(y1, y0, (size_t)ny * 4);
	brk(k, y1, ny);
	for (int sl = 0; sl < ns; sl++) {
		const float *xr = xb + (size_t)(sl / per) * ne0;
		int e = ids[sl];
		for (int64_t r = 0; r < rows; r++) {
			float g = y1[(size_t)sl * rows + r];
			if (e < 0 || e >= n_exp) {	/* an ill id: a NaN row */
				ok &= isnan(g) != 0;
				continue;
			}
			const float *wr = wb + ((size_t)e * rows + r) * ne0;
			double v = 0, m = 0;
			for (int64_t i = 0; i < ne0; i++)
				v += (double)wr[i] * xr[i], m += fabs((double)wr[i] * xr[i]);
			double d = fabs(g - v * f);
			if (!(d <= 1e-5 * (m * f + 1e-30)))
				ok = 0;
			if (d > maxd || d != d)
				maxd = d;
		}
	}
	snprintf(name, sizeof name, "moe gemm %s", quant_name(t));
	snprintf(sh2, sizeof sh2, "%s k%lu", shape, ng);
	report(k, name, sh2, maxd, ok && ng > 0);
	/* two slots in three elsewhere: the third's rows the same bits */
	for (int sl = 0; sl < ns; sl++)
		id2[sl] = sl % 3 == 0 ? ids[sl] : (int32_t)(rnd(k) % (uint64_t)n_exp);
	gchk(k, gpu_upload(k->g, di, id2, (size_t)ns * 4));
	gemm_call(k, &s, rows, n_exp, di, ns, per, dx, nx, dy, ds);
	dget(k, y1, dy, (size_t)ny * 4);
	for (int sl = 0; sl < ns; sl += 3, nk++) {
		memcpy(a + (size_t)nk * rows, y0 + (size_t)sl * rows, (size_t)rows * 4);
		memcpy(b + (size_t)nk * rows, y1 + (size_t)sl * rows, (size_t)rows * 4);
	}
	brk(k, b, (int64_t)nk * rows);
	snprintf(name, sizeof name, "moe gemm %s alone", quant_name(t));
	same_bits(k, name, shape, b, a, (int64_t)nk * rows);
	/* a step's rows: the decode kernels, as under GPU_MMQ_MMA */
	int nss = sr * per;
	gchk(k, gpu_upload(k->g, di, ids, (size_t)nss * 4));
	ng = gemm_call(k, &s, rows, n_exp, di, nss, per, dx, sr, dy, ds);
	dget(k, y1, dy, (size_t)nss * rows * 4);
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	gemm_call(k, &s, rows, n_exp, di, nss, per, dx, sr, dy, ds);
	dget(k, y0, dy, (size_t)nss * rows * 4);
	brk(k, y1, (int64_t)nss * rows);
	snprintf(name, sizeof name, "moe gemm %s step", quant_name(t));
	snprintf(sh2, sizeof sh2, "%s m=%d k%lu", shape, sr, ng);
	same_bits_if(k, name, sh2, y1, y0, (int64_t)nss * rows, ng == 0);
	free(x), free(y0), free(y1), free(a), free(b), free(wb), free(xb), free(ids), free(id2);
	gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, ds), gpu_free(k->g, di);
	wset_free(k, &s);
}

/* All the launches of a profiled gpu_moe_matvecs of the nw stacks w (nw
 * 1: gpu_moe_matvec's), scales ds[], into dy[] (NaN bytes first). */
static unsigned long
pair_call(struct kc *k, int nw, const struct wset *w, int64_t rows, int n_exp,
    const int32_t *di, int ns, int per, const float *dx, int nx, float *const *dy,
    const float *const *ds)
{
	const void *W[2] = { w[0].dw, nw > 1 ? w[1].dw : NULL };
	const struct gpu_prof_row *r;
	unsigned long c = 0;

	for (int i = 0; i < nw; i++)
		gchk(k, gpu_memset(k->g, dy[i], 0xFF, (size_t)ns * rows * 4));
	gpu_prof_reset(k->g);
	gchk(k, gpu_prof_begin(k->g, 0));
	gchk(k, gpu_moe_matvecs(k->g, w[0].t, nw, W, rows, w[0].ne0, n_exp, di, ns, per, dx, nx,
	    dy, ds));
	gchk(k, gpu_prof_end(k->g));
	for (int i = 0, n = gpu_prof_rows(k->g, &r); i < n; i++)
		if (strncmp(r[i].name, "memcpy", 6) != 0 && strncmp(r[i].name, "memset", 6) != 0)
			c += r[i].n;
	gpu_prof_reset(k->g);
	return c;
}

/*
 * gpu_moe_matvecs of two stacks of type t (an FFN's gate and up) on one x
 * and routing, "moe pair": each stack's rows the bits of its own
 * gpu_moe_matvec, in fewer launches than the two calls where the x they
 * share is quantized (or a prompt's gathered) once; the same count for the
 * float types, which share nothing (k: the two calls' launches, then the
 * pair's); the second stack scaled (a weight's scale), the first not.
 * mode: gpu_tune_moe_group's (the per-slot or the grouped path); gemm: under
 * GPU_MMQ_BF16, where a prompt's rows (nx past the step rows) take the bf16
 * GEMM (else GPU_MMQ_MMA, kernel-check's default).
 */
static void
check_moe_pair(struct kc *k, int t, int n_exp, int64_t rows, int64_t ne0, int nx, int per,
    int how, int mode, int gemm)
{
	static const char *hn[] = { "random", "one", "spread", "skew", "runs" };
	static const char *mn[] = { "off", "auto", "all" };
	struct wset w[2];
	int ns = nx * per, flt = t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16;
	int64_t ny = (int64_t)ns * rows;
	float *x = frand(k, (int64_t)nx * ne0, -1, 1), *y = xmalloc((size_t)ny * 16);
	int32_t *ids = xmalloc((size_t)ns * 4);
	char name[64], shape[128];
	unsigned long n1 = 0, n2;

	mg_ids(k, ids, ns, n_exp, how);
	for (int i = 0; i < 2; i++)
		wset_new(k, &w[i], t, (int64_t)n_exp * rows, ne0);
	float *dx = dput(k, x, (size_t)nx * ne0 * 4);
	float *dy[2] = { dput(k, NULL, (size_t)ny * 4), dput(k, NULL, (size_t)ny * 4) };
	int32_t *di = dput(k, ids, (size_t)ns * 4);
	float scale = 0.75f, *dsc = dput(k, &scale, 4);
	const float *ds[2] = { NULL, dsc };
	gchk(k, gpu_tune_moe_group(k->g, mode));
	if (gemm)
		gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_BF16));
	for (int i = 0; i < 2; i++) {
		n1 += pair_call(k, 1, &w[i], rows, n_exp, di, ns, per, dx, nx, &dy[i], &ds[i]);
		dget(k, y + (size_t)i * ny, dy[i], (size_t)ny * 4);
	}
	n2 = pair_call(k, 2, w, rows, n_exp, di, ns, per, dx, nx, dy, ds);
	for (int i = 0; i < 2; i++)
		dget(k, y + (size_t)(2 + i) * ny, dy[i], (size_t)ny * 4);
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_AUTO));
	brk(k, y + 2 * ny, 2 * ny);
	snprintf(name, sizeof name, "moe pair %s", quant_name(t));
	snprintf(shape, sizeof shape, "%d of %lldx%lld ns=%d/%d %s group=%s%s k%lu/%lu", n_exp,
	    (long long)rows, (long long)ne0, ns, per, hn[how], mn[mode], gemm ? " gemm" : "", n1,
	    n2);
	same_bits_if(k, name, shape, y + 2 * ny, y, 2 * ny, flt ? n2 == n1 : n2 < n1);
	free(x), free(y), free(ids);
	gpu_free(k->g, dx), gpu_free(k->g, dy[0]), gpu_free(k->g, dy[1]), gpu_free(k->g, di);
	gpu_free(k->g, dsc);
	wset_free(k, &w[0]), wset_free(k, &w[1]);
}

void
check_moe_group_all(struct kc *k)
{
	/* every type the per-slot path takes, each routing, decode to prompt slots
	 * (the 64 x 8 random ones also recorded as a graph and replayed on other ids) */
	static const int ts[] = {
		QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_IQ4_XS, QUANT_NVFP4,
		QUANT_IQ4_NL, QUANT_Q4_1, QUANT_Q5_1, QUANT_Q4_0, QUANT_F32, QUANT_F16, QUANT_BF16,
		QUANT_Q5_0,
	};
	static const int sh[][4] = {	/* nx, per, how, scaled */
		{ 1, 8, MG_RANDOM, 0 }, { 1, 1, MG_SKEW, 0 }, { 3, 1, MG_SKEW, 1 },
		{ 5, 8, MG_ONE, 0 }, { 40, 8, MG_SPREAD, 0 }, { 64, 8, MG_RANDOM, 1 },
		{ 33, 4, MG_SKEW, 0 }, { 600, 1, MG_ONE, 0 }, { 60, 8, MG_RUNS, 1 },
	};

	for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++)
		for (size_t si = 0; si < sizeof sh / sizeof sh[0]; si++)
			check_moe_group(k, ts[ti], 64, 37, 256, sh[si][0], sh[si][1], sh[si][2],
			    sh[si][3], si == 5);
	/* the qwen35moe 35B-A3B routing (256 experts, top 8) on a prompt of 512
	 * and of 300 rows (4096 and 2400 slots), rows of 2 and 5 super-blocks,
	 * the other K-quant kernel (the first recorded and replayed on other
	 * ids too); 70000 slots (the per-slot launches past
	 * 65535, the placement's long loop); the most experts the grouping takes
	 * and one more (per slot then, either way) */
	check_moe_group(k, QUANT_Q4_K, 256, 64, 512, 512, 8, MG_RANDOM, 0, 1);
	check_moe_group(k, QUANT_Q8_0, 256, 40, 512, 300, 8, MG_SKEW, 1, 0);
	check_moe_group(k, QUANT_IQ4_XS, 256, 24, 1280, 300, 8, MG_RANDOM, 0, 0);
	check_moe_group(k, QUANT_Q6_K, 128, 16, 256, 70, 8, MG_SPREAD, 0, 0);
	check_moe_group(k, QUANT_Q5_K, 256, 24, 2048, 100, 8, MG_RANDOM, 1, 0);	/* 8 super-blocks */
	gchk(k, gpu_tune_qk(k->g, 8));
	check_moe_group(k, QUANT_Q4_K, 256, 64, 512, 300, 8, MG_SKEW, 0, 0);
	gchk(k, gpu_tune_qk(k->g, 0));
	/* the tensor-core kernel's rows less than 16-byte aligned (Q8_0 of 25
	 * blocks: rows 2 mod 4 bytes at odd rows; NVFP4 rows of 180 bytes), of
	 * chunks past its ring (128 and 66 blocks) and less than a chunk, the
	 * 35B's routing at its own shapes (the gate's rows of 2048, the down's
	 * of 512: one chunk), and one graph of the runs */
	for (int ti = 0; ti < 2; ti++) {
		int t = ti ? QUANT_NVFP4 : QUANT_Q8_0;
		check_moe_group(k, t, 64, 37, ti ? 320 : 800, 60, 8, MG_RUNS, 0, ti == 0);
		check_moe_group(k, t, 24, 20, ti ? 4224 : 4096, 40, 4, MG_RUNS, 1, 0);
		check_moe_group(k, t, 16, 9, ti ? 64 : 32, 30, 8, MG_RUNS, 0, 0);
		check_moe_group(k, t, 256, 48, 2048, 512, 8, MG_RANDOM, 0, 0);
		check_moe_group(k, t, 256, 64, 512, 300, 8, MG_SKEW, 1, 0);
	}
	/* Q4_0 and Q5_0 by tensor cores likewise (rows of 25 blocks: 2 mod 4
	 * bytes), and the 26B-A4B's routing (128 experts, top 8) on its down
	 * experts' rows of 704 (Q5_0 in its Q4_K files), a prompt of 512 */
	for (int t = QUANT_Q4_0; t <= QUANT_Q5_0; t += QUANT_Q5_0 - QUANT_Q4_0) {
		check_moe_group(k, t, 64, 37, 800, 60, 8, MG_RUNS, 0, t == QUANT_Q5_0);
		check_moe_group(k, t, 24, 20, 4096, 40, 4, MG_RUNS, 1, 0);
		check_moe_group(k, t, 16, 9, 32, 30, 8, MG_RUNS, 0, 0);
		check_moe_group(k, t, 128, 48, 704, 512, 8, MG_RANDOM, 0, 0);
		check_moe_group(k, t, 128, 64, 704, 300, 8, MG_SKEW, 1, 0);
	}
	check_moe_group(k, QUANT_Q8_0, 8, 8, 32, 70000, 1, MG_SPREAD, 0, 0);
	check_moe_group(k, QUANT_Q8_0, GPU_MOE_GROUP_EXPERTS, 8, 32, 1000, 8, MG_SKEW, 0, 0);
	check_moe_group(k, QUANT_Q8_0, GPU_MOE_GROUP_EXPERTS + 1, 8, 32, 100, 8, MG_SPREAD, 0, 0);
	/* the prompt GEMM: every quantized type it takes, tiles merged up to
	 * four (runs of 17, 32, 40 slots; 600 on one expert), ill ids, a part
	 * row tile (37 rows), the 26B-A4B's routing on rows of 704 and the
	 * 35B-A3B's on rows of 2048 */
	static const int gt[] = {
		QUANT_Q8_0, QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_0, QUANT_NVFP4, QUANT_Q4_K, QUANT_Q5_K,
		QUANT_Q6_K, QUANT_IQ4_NL, QUANT_IQ4_XS,
	};
	for (size_t ti = 0; ti < sizeof gt / sizeof gt[0]; ti++) {
		check_moe_gemm(k, gt[ti], 64, 37, 256, 60, 8, MG_RUNS, ti % 2);
		check_moe_gemm(k, gt[ti], 8, 70, 512, 600, 1, MG_ONE, 0);
	}
	check_moe_gemm(k, QUANT_Q8_0, 128, 48, 704, 512, 8, MG_RANDOM, 0);
	check_moe_gemm(k, QUANT_Q5_0, 128, 40, 704, 300, 8, MG_SKEW, 1);
	check_moe_gemm(k, QUANT_Q4_K, 256, 40, 2048, 512, 8, MG_RANDOM, 0);
	/* gate and up as one call: decode (one row's 8 slots), a verify's rows per
	 * slot and grouped, a prompt (the GEMM; the 35B-A3B's routing and rows),
	 * the float types too */
	static const int pt[] = {
		QUANT_Q4_K, QUANT_Q6_K, QUANT_Q8_0, QUANT_Q4_0, QUANT_Q5_0, QUANT_NVFP4,
		QUANT_IQ4_XS, QUANT_IQ4_NL, QUANT_Q4_1, QUANT_BF16, QUANT_F32,
	};
	for (size_t ti = 0; ti < sizeof pt / sizeof pt[0]; ti++) {
		check_moe_pair(k, pt[ti], 64, 37, 256, 1, 8, MG_RANDOM, GPU_MOE_GROUP_AUTO, 1);
		check_moe_pair(k, pt[ti], 64, 37, 256, 4, 8, MG_SKEW, GPU_MOE_GROUP_OFF, 1);
		check_moe_pair(k, pt[ti], 64, 37, 256, 40, 8, MG_RUNS, GPU_MOE_GROUP_ALL, 0);
		check_moe_pair(k, pt[ti], 64, 64, 512, 60, 8, MG_RUNS, GPU_MOE_GROUP_AUTO, 1);
	}
	check_moe_pair(k, QUANT_Q4_K, 256, 64, 2048, 512, 8, MG_RANDOM, GPU_MOE_GROUP_AUTO, 1);
}

#endif	/* MEMRA_HAVE_CUDA */
