/*
 * kernel-check: steps of 17..32 rows at the step-row limit 32, and
 * check_backend (the backend checks in order).  Shared declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- rows32: steps of 17..32 rows at the step-row limit 32 -------------- */

/*
 * gpu_tune_step_rows(32) on the GPU backend's gpu: a step of up to 32
 * rows runs the decode kernels (16 rows a launch, Q8_0 and NVFP4 up to 32
 * by k_mv8t), never the prompt kernels.  Each check runs an op over m
 * rows in one call at the limit 32, then row by row (m = 1) at the
 * default 16, from the same buffers, and holds the two to the same bits
 * (memcmp): what lib's backend_step_rows may become 32 on.  Lines "rows32 ...".
 */
enum { R32_MATMUL, R32_NORM_MM, R32_ADDNORM_MM, R32_FFN, R32_GNORM_MM, R32_SIGMOID_MM,
	R32_ATTN, R32_ATTN_DPOS, R32_MOE_SWIGLU, R32_MOE_GEGLU, R32_MOE_DOWN };

#define R32_BUFS 6

struct r32 {
	int	op, nb;
	int	n, nout, nh, hd, ld[2];		/* ld: matmul's ldx, ldy */
	int	p0, n_ctx, n_exp, kk;
	const struct backend_weight *w[3];
	struct backend_attn a;
	float	*h[R32_BUFS], *d[R32_BUFS];	/* host contents, GPU buffers */
	size_t	sz[R32_BUFS], rs[R32_BUFS];	/* floats; floats a row (0: not per row) */
	int	out[3], nout_b;			/* the buffers compared */
};

static void
r32_buf(struct kc *k, struct backend *g, struct r32 *R, size_t n, size_t rs, float lo, float hi)
{
	int i = R->nb++;

	R->sz[i] = n, R->rs[i] = rs;
	R->h[i] = frand(k, (int64_t)n, lo, hi);
	R->d[i] = bput(g, NULL, n);
}

/* Buffer i as int32 values: v[j] = base + j * step, or (base < 0) moe_ids' experts. */
static void
r32_ints(struct kc *k, struct r32 *R, int i, int base, int step)
{
	int32_t *v = xmalloc(R->sz[i] * 4);

	if (base < 0)
		moe_ids(k, v, (int)(R->sz[i] / R->kk), R->kk, R->n_exp);
	else
		for (size_t j = 0; j < R->sz[i]; j++)
			v[j] = base + (int32_t)j * step;
	memcpy(R->h[i], v, R->sz[i] * 4);
	free(v);
}

/* The op over rows [r0, r0 + m). */
static int
r32_run(struct backend *g, const struct r32 *R, int r0, int m)
{
	float *P[R32_BUFS];

	for (int i = 0; i < R->nb; i++)
		P[i] = R->d[i] + (size_t)r0 * R->rs[i];
	switch (R->op) {
	case R32_MATMUL:
		return backend_matmul(g, R->w[0], P[0], R->ld[0], P[1], R->ld[1], m);
	case R32_NORM_MM: {
		float *Y[2] = { P[2], P[3] };
		return backend_rmsnorm_matmul(g, P[0], m, R->n, P[1], 1e-6f, 2, R->w, Y);
	}
	case R32_ADDNORM_MM: {
		float *Y[2] = { P[3], P[4] };
		return backend_add_rmsnorm_matmul(g, P[0], P[1], m, R->n, P[2], 1e-6f, 2, R->w, Y);
	}
	case R32_FFN:
		return backend_ffn(g, P[0], P[1], m, R->n, P[2], 1e-6f, R->w[0], R->w[1], R->w[2],
		    P[3], P[4], P[5]);
	case R32_GNORM_MM:
		return backend_rmsnorm_gated_matmul(g, P[0], P[1], P[2], m, R->nh, R->hd, 1e-6f,
		    R->w[0], P[3]);
	case R32_SIGMOID_MM:
		return backend_mul_sigmoid_matmul(g, P[0], P[1] + R->hd, 2 * R->hd, m, R->nh, R->hd,
		    R->w[0], P[2]);
	case R32_ATTN:
		return backend_attention(g, &R->a, P[0], R->n, R->hd, P[1], P[2], m, R->p0 + r0, P[3]);
	case R32_ATTN_DPOS:
		return backend_attention_dpos(g, &R->a, P[0], R->n, R->hd, P[1], P[2], m,
		    (const int32_t *)P[4], R->n_ctx, P[3]);
	case R32_MOE_SWIGLU:
		return backend_moe_swiglu(g, R->w[0], R->w[1], R->n_exp, P[0], R->n, m,
		    (const int32_t *)P[1], R->kk, P[2]);
	case R32_MOE_GEGLU:
		return backend_moe_geglu(g, R->w[0], R->n_exp, P[0], R->n, m, (const int32_t *)P[1],
		    R->kk, P[2]);
	default:
		return backend_moe_down(g, R->w[0], R->n_exp, P[0], m, (const int32_t *)P[1], P[2],
		    R->kk, P[3], R->n);
	}
}

/* One call of m rows at the limit 32 against m calls of one row at 16, bit for bit. */
static void
r32_check(struct kc *k, struct bpair *p, struct r32 *R, int m, const char *name,
    const char *shape)
{
	struct gpu *gp = backend_cuda_gpu(p->g);
	size_t tot = 0, o;
	float *res[2];
	char sh[128];

	int rc = 0;

	snprintf(sh, sizeof sh, "%s m=%d", shape, m);
	for (int j = 0; j < R->nout_b; j++)
		tot += R->sz[R->out[j]];
	res[0] = res[1] = NULL;
	for (int pass = 0; pass < 2 && rc == 0; pass++) {
		if (gpu_tune_step_rows(gp, pass ? GPU_MATVEC_MAX_ROWS : GPU_STEP_ROWS_MAX) != 0)
			die(1, "gpu: %s", gpu_errmsg(gp));
		for (int i = 0; i < R->nb; i++)
			bchk(p->g, backend_write(p->g, R->d[i], R->h[i], R->sz[i]));
		if (pass == 0)
			rc = r32_run(p->g, R, 0, m);
		else
			for (int r = 0; r < m && rc == 0; r++)
				rc = r32_run(p->g, R, r, 1);
		res[pass] = xmalloc(tot * 4 + 4), o = 0;
		for (int j = 0; j < R->nout_b && rc == 0; j++) {
			bchk(p->g, backend_read(p->g, res[pass] + o, R->d[R->out[j]],
			    R->sz[R->out[j]]));
			o += R->sz[R->out[j]];
		}
	}
	if (gpu_tune_step_rows(gp, GPU_MATVEC_MAX_ROWS) != 0)
		die(1, "gpu: %s", gpu_errmsg(gp));
	if (rc != 0) {	/* refused: a failed line, and on to the next */
		printf("rows32: %s\n", backend_errmsg(p->g));
		report(k, name, sh, INFINITY, 0);
	} else
		bsame(k, name, sh, res[0], res[1], (int64_t)tot);
	free(res[0]), free(res[1]);
}

static void
r32_free(struct bpair *p, struct r32 *R)
{
	for (int i = 0; i < R->nb; i++) {
		free(R->h[i]);
		backend_mfree(p->g, R->d[i]);
	}
	R->nb = 0;
}

/* A GPU weight of random blocks of type t. */
static void
r32_weight(struct kc *k, struct bpair *p, struct backend_weight *w, int t, int64_t rows,
    int64_t ne0, float scale)
{
	size_t nb;
	uint8_t *b = qrand(k, t, rows, ne0, &nb);

	bchk(p->g, backend_weight_init(p->g, w, t, ne0, rows, b, scale));
	free(b);
}

static const int r32_ms[] = { 17, 24, 32 };

/* backend_matmul of rows x ne0 (rows pad floats apart) at 17, 24, 32 rows. */
static void
r32_matmul(struct kc *k, struct bpair *p, int t, int64_t rows, int64_t ne0, int pad, float s)
{
	struct r32 R = { .op = R32_MATMUL, .ld = { (int)ne0 + pad, (int)rows + pad } };
	struct backend_weight w;
	char name[64], shape[64];

	r32_weight(k, p, &w, t, rows, ne0, s);
	R.w[0] = &w;
	r32_buf(k, p->g, &R, (size_t)32 * R.ld[0], (size_t)R.ld[0], -1, 1);
	r32_buf(k, p->g, &R, (size_t)32 * R.ld[1], (size_t)R.ld[1], -1, 1);
	R.out[R.nout_b++] = 1;
	snprintf(name, sizeof name, "rows32 matmul %s%s", quant_name(t), s != 1 ? "*s" : "");
	snprintf(shape, sizeof shape, "%lldx%lld ld+%d", (long long)rows, (long long)ne0, pad);
	for (size_t i = 0; i < sizeof r32_ms / sizeof r32_ms[0]; i++)
		r32_check(k, p, &R, r32_ms[i], name, shape);
	r32_free(p, &R);
	backend_weight_release(p->g, &w);
}

/* The fused forms with weights of type t: rows of nh heads of hd, products of nout. */
static void
r32_fused(struct kc *k, struct bpair *p, int t, int nh, int hd, int nout)
{
	int n = nh * hd;
	struct backend_weight w[3];
	static const char *names[] = { "rows32 rmsnorm_matmul", "rows32 add_rmsnorm_matmul",
	    "rows32 ffn", "rows32 rmsnorm_gated_matmul", "rows32 mul_sigmoid_matmul" };
	char name[64], shape[64];

	r32_weight(k, p, &w[0], t, nout, n, t == QUANT_NVFP4 ? 0.5f : 1.0f);
	r32_weight(k, p, &w[1], t, nout, n, 1.0f);
	r32_weight(k, p, &w[2], t, n, nout, 1.0f);
	snprintf(shape, sizeof shape, "%s %dx%d out=%d", quant_name(t), nh, hd, nout);
	for (int op = R32_NORM_MM; op <= R32_SIGMOID_MM; op++) {
		struct r32 R = { .op = op, .n = n, .nout = nout, .nh = nh, .hd = hd,
			.w = { &w[0], &w[1], &w[2] } };
		r32_buf(k, p->g, &R, (size_t)32 * n, n, -2, 2);	/* x */
		switch (op) {
		case R32_NORM_MM:
			r32_buf(k, p->g, &R, n, 0, 0.5f, 1.5f);
			r32_buf(k, p->g, &R, (size_t)32 * nout, nout, -1, 1);
			r32_buf(k, p->g, &R, (size_t)32 * nout, nout, -1, 1);
			R.out[0] = 2, R.out[1] = 3, R.nout_b = 2;
			break;
		case R32_ADDNORM_MM:
			r32_buf(k, p->g, &R, (size_t)32 * n, n, -1, 1);
			r32_buf(k, p->g, &R, n, 0, 0.5f, 1.5f);
			r32_buf(k, p->g, &R, (size_t)32 * nout, nout, -1, 1);
			r32_buf(k, p->g, &R, (size_t)32 * nout, nout, -1, 1);
			R.out[0] = 0, R.out[1] = 3, R.out[2] = 4, R.nout_b = 3;
			break;
		case R32_FFN:
			r32_buf(k, p->g, &R, (size_t)32 * n, n, -1, 1);
			r32_buf(k, p->g, &R, n, 0, 0.5f, 1.5f);
			r32_buf(k, p->g, &R, (size_t)32 * nout, nout, -1, 1);	/* f */
			r32_buf(k, p->g, &R, (size_t)32 * nout, nout, -1, 1);	/* u */
			r32_buf(k, p->g, &R, (size_t)32 * n, n, -1, 1);		/* y */
			R.out[0] = 0, R.out[1] = 3, R.out[2] = 5, R.nout_b = 3;
			break;
		case R32_GNORM_MM:
			r32_buf(k, p->g, &R, (size_t)32 * n, n, -3, 3);		/* z */
			r32_buf(k, p->g, &R, hd, 0, 0.5f, 1.5f);
			r32_buf(k, p->g, &R, (size_t)32 * nout, nout, -1, 1);
			R.out[0] = 0, R.out[1] = 3, R.nout_b = 2;
			break;
		default:	/* the gate: the second half of each head's 2 hd */
			r32_buf(k, p->g, &R, (size_t)32 * 2 * n, 2 * n, -4, 4);
			r32_buf(k, p->g, &R, (size_t)32 * nout, nout, -1, 1);
			R.out[0] = 0, R.out[1] = 2, R.nout_b = 2;
			break;
		}
		snprintf(name, sizeof name, "%s", names[op - R32_NORM_MM]);
		r32_check(k, p, &R, 17, name, shape);
		r32_check(k, p, &R, 32, name, shape);
		r32_free(p, &R);
	}
	for (int i = 0; i < 3; i++)
		backend_weight_release(p->g, &w[i]);
}

/* Attention of 17, 24, 32 rows at p0: plain, a sliding window, positions in memory. */
static void
r32_attention(struct kc *k, struct bpair *p, int nh, int nkv, int hd, int p0, int win, int dpos)
{
	int n_ctx = p0 + 32 + 3, kvd = nkv * hd;
	struct r32 R = { .op = dpos ? R32_ATTN_DPOS : R32_ATTN, .n = nh * hd, .nh = nh, .hd = hd,
		.p0 = p0, .n_ctx = n_ctx,
		.a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 0, win, NULL, 0 } };
	char shape[64];

	r32_buf(k, p->g, &R, (size_t)32 * nh * hd, (size_t)nh * hd, -1, 1);	/* q */
	r32_buf(k, p->g, &R, (size_t)n_ctx * kvd, 0, -1, 1);
	r32_buf(k, p->g, &R, (size_t)n_ctx * kvd, 0, -1, 1);
	r32_buf(k, p->g, &R, (size_t)32 * nh * hd, (size_t)nh * hd, 0, 0);	/* o */
	if (dpos) {
		r32_buf(k, p->g, &R, 32, 1, 0, 0);
		r32_ints(k, &R, 4, p0, 1);
	}
	R.out[0] = 3, R.nout_b = 1;
	snprintf(shape, sizeof shape, "h=%d/%d hd=%d p0=%d%s", nh, nkv, hd, p0,
	    win ? " win" : "");
	if (win)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "=%d", win);
	for (size_t i = 0; i < sizeof r32_ms / sizeof r32_ms[0]; i++)
		r32_check(k, p, &R, r32_ms[i], dpos ? "rows32 attention dpos" : win ?
		    "rows32 attention window" : "rows32 attention", shape);
	r32_free(p, &R);
}

/* The experts of type t: gate and up (swiglu), gate-up (geglu), down, kk of n_exp a row. */
static void
r32_moe(struct kc *k, struct bpair *p, int t, int n_exp, int nf, int n, int kk)
{
	struct backend_weight w[3];
	char shape[64];

	r32_weight(k, p, &w[0], t, (int64_t)n_exp * nf, n, 1.0f);
	r32_weight(k, p, &w[1], t, (int64_t)n_exp * nf, n, 1.0f);
	snprintf(shape, sizeof shape, "%s %d of %d x %dx%d", quant_name(t), kk, n_exp, nf, n);
	for (int op = R32_MOE_SWIGLU; op <= R32_MOE_DOWN; op++) {
		struct r32 R = { .op = op, .n = n, .n_exp = n_exp, .kk = kk,
			.w = { &w[0], &w[1] } };
		if (op == R32_MOE_GEGLU) {
			r32_weight(k, p, &w[2], t, (int64_t)n_exp * 2 * nf, n, 1.0f);
			R.w[0] = &w[2];
		} else if (op == R32_MOE_DOWN) {
			r32_weight(k, p, &w[2], t, (int64_t)n_exp * n, nf, 1.0f);
			R.w[0] = &w[2];
		}
		if (op == R32_MOE_DOWN) {
			r32_buf(k, p->g, &R, (size_t)32 * kk * nf, (size_t)kk * nf, -1, 1);	/* f */
			r32_buf(k, p->g, &R, (size_t)32 * kk, kk, 0, 0);
			r32_buf(k, p->g, &R, (size_t)32 * kk, kk, 0, 1);	/* the weights */
			r32_buf(k, p->g, &R, (size_t)32 * n, n, -1, 1);
			R.out[0] = 3;
		} else {
			r32_buf(k, p->g, &R, (size_t)32 * n, n, -1, 1);
			r32_buf(k, p->g, &R, (size_t)32 * kk, kk, 0, 0);
			r32_buf(k, p->g, &R, (size_t)32 * kk * nf, (size_t)kk * nf, -1, 1);
			R.out[0] = 2;
		}
		R.nout_b = 1;
		r32_ints(k, &R, 1, -1, 0);
		for (size_t i = 0; i < sizeof r32_ms / sizeof r32_ms[0]; i++)
			r32_check(k, p, &R, r32_ms[i], op == R32_MOE_SWIGLU ? "rows32 moe_swiglu" :
			    op == R32_MOE_GEGLU ? "rows32 moe_geglu" : "rows32 moe_down", shape);
		r32_free(p, &R);
		if (op != R32_MOE_SWIGLU)
			backend_weight_release(p->g, &w[2]);
	}
	backend_weight_release(p->g, &w[0]);
	backend_weight_release(p->g, &w[1]);
}

/*
 * The model on the GPU backend at the limit 32: (1) one sequence's 24 rows
 * in one forward (every row's logits; MODEL_VERIFY: attention in the
 * plain order, not a llama batch's) against 24 forwards of one row at
 * 16; (2) a step of 24 sequences of one row (model_forward_seqs) against
 * each alone at 16.  Bit for bit; each sequence after its own prompt of 8.
 * The backend's step rows (backend_rows_set: lib/ reads them) are set for
 * each pass, so at 32 lib runs the 24 rows as one step (layers_step) and
 * the 24 sequences as one group: what the CUDA backend runs by default.
 */
static void
r32_model(struct kc *k, struct bpair *p, const char *path)
{
	enum { NP = 8, NR = 24 };
	int keep = backend_step_rows(p->g);
	char err[UTIL_ERRLEN], shape[96];
	struct model *md = model_open(path, p->g, err);
	struct state *st[NR];
	int32_t prompt[NP + NR], tok[NR];
	int rows[NR], nv;
	float *lg[2], *first;

	if (md == NULL)
		die(1, "%s", err);
	nv = model_hparams(md)->n_vocab;
	model_prompt(prompt, NP + NR, nv);
	for (int i = 0; i < NR; i++)
		tok[i] = prompt[NP + i], rows[i] = 1;
	first = xmalloc((size_t)nv * 4);
	for (int part = 0; part < 2; part++) {
		int failed = 0;
		for (int pass = 0; pass < 2; pass++) {
			int ns = part ? NR : 1;
			bchk(p->g, backend_rows_set(p->g, pass ? BACKEND_ROWS_MIN : BACKEND_ROWS_MAX));
			lg[pass] = xmalloc((size_t)NR * nv * 4);
			for (int i = 0; i < ns; i++) {
				int32_t pr[NP];
				for (int j = 0; j < NP; j++)	/* each sequence its own prompt */
					pr[j] = prompt[(j + i) % (NP + NR)];
				if ((st[i] = model_state_new(md, NP + NR + 1, part ? 0 : NR, err)) == NULL)
					die(1, "%s", err);
				if (model_forward(md, st[i], pr, NP, MODEL_PREFILL, first, NULL) != 0)
					die(1, "cuda: %s", model_errmsg(md));
			}
			int rc = 0;
			if (!failed && pass == 0)
				rc = part ? model_forward_seqs(md, st, rows, NR, tok, 0, lg[0], NULL,
				    NULL) : model_forward(md, st[0], tok, NR, MODEL_LOGITS_ALL |
				    MODEL_VERIFY, lg[0], NULL);
			for (int i = 0; !failed && pass == 1 && i < NR && rc == 0; i++)
				rc = model_forward(md, st[part ? i : 0], &tok[i], 1, 0,
				    lg[1] + (size_t)i * nv, NULL);
			if (rc != 0) {
				printf("rows32: %s\n", model_errmsg(md));
				failed = 1;
			}
			for (int i = 0; i < ns; i++)
				state_free(st[i]);
		}
		snprintf(shape, sizeof shape, "%s %d, logits of %d", part ? "sequences" : "rows", NR,
		    nv);
		if (failed)	/* refused: a failed line */
			report(k, part ? "rows32 model seqs" : "rows32 model rows", shape, INFINITY, 0);
		else
			bsame(k, part ? "rows32 model seqs" : "rows32 model rows", shape, lg[0], lg[1],
			    (int64_t)NR * nv);
		free(lg[0]), free(lg[1]);
	}
	bchk(p->g, backend_rows_set(p->g, keep));
	free(first);
	model_close(md);
}

/* Every weight type the products take, the fused forms, attention, the experts. */
static void
be_rows32(struct kc *k, struct bpair *p)
{
	static const int ts[] = { QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_NVFP4,
	    QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_1, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_IQ4_XS,
	    QUANT_IQ4_NL, QUANT_Q5_0 };
	static const int fts[] = { QUANT_Q8_0, QUANT_NVFP4, QUANT_Q5_1, QUANT_Q4_K,
	    QUANT_IQ4_XS, QUANT_IQ4_NL, QUANT_BF16, QUANT_Q4_0 };
	static const int mts[] = { QUANT_F32, QUANT_Q8_0, QUANT_NVFP4, QUANT_Q4_K, QUANT_IQ4_XS,
	    QUANT_Q5_0 };

	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
		r32_matmul(k, p, ts[i], 300, 512, 0, ts[i] == QUANT_NVFP4 ? 0.5f : 1.0f);
	r32_matmul(k, p, QUANT_Q8_0, 1000, 1024, 4, 1.0f);	/* the strided paths */
	r32_matmul(k, p, QUANT_Q6_K, 257, 768, 8, 1.0f);
	r32_matmul(k, p, QUANT_F32, 64, 48, 0, 1.0f);		/* zero-padded F32 rows */
	for (size_t i = 0; i < sizeof fts / sizeof fts[0]; i++)
		r32_fused(k, p, fts[i], 4, 128, 768);
	r32_attention(k, p, 8, 2, 128, 300, 0, 0);
	r32_attention(k, p, 16, 4, 256, 1000, 0, 0);
	r32_attention(k, p, 8, 2, 64, 200, 64, 0);
	r32_attention(k, p, 8, 2, 128, 300, 0, 1);
	r32_attention(k, p, 8, 2, 64, 200, 64, 1);
	r32_attention(k, p, 16, 2, 512, 300, 0, 0);	/* Gemma-4's global heads of 512 */
	r32_attention(k, p, 16, 2, 512, 300, 0, 1);
	for (size_t i = 0; i < sizeof mts / sizeof mts[0]; i++)
		r32_moe(k, p, mts[i], 8, 256, 256, 2);
}

void
check_backend(struct kc *k, int dev, char *const *models, int nmodel)
{
	struct bpair p;
	char err[UTIL_ERRLEN], dn[32];
	static const int ts[] = { QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_NVFP4,
	    QUANT_BF16, QUANT_F16, QUANT_F32, QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_1, QUANT_Q5_0 };

	snprintf(dn, sizeof dn, "cuda:%d", dev);
	snprintf(p.gname, sizeof p.gname, "%s", dn);
	if ((p.c = backend_open("cpu", 0, err)) == NULL || (p.g = backend_open(dn, 0, err)) == NULL)
		die(1, "%s", err);
	/* the op checks' products and attention of 17..32 rows are a prompt's kernels (the
	 * GEMMs, flash attention): they run at the step rows 16; be_rows32 holds each op at
	 * 32 to its rows one by one at 16; the model checks run at the backend's own (32) */
	bchk(p.g, backend_rows_set(p.g, BACKEND_ROWS_MIN));
	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
		be_matmul(k, &p, ts[i], 300, 512, 1, 0, 1.0f);
		be_matmul(k, &p, ts[i], 257, 768, 5, 8, ts[i] == QUANT_NVFP4 ? 0.5f : 1.0f);
	}
	be_matmul(k, &p, QUANT_Q8_0, 1000, 1024, 16, 4, 1.0f);
	be_matmul(k, &p, QUANT_Q4_K, 500, 512, 40, 4, 1.0f);	/* prefill: cuBLAS */
	be_matmul(k, &p, QUANT_NVFP4, 500, 512, 20, 0, 2.0f);
	be_fused(k, &p, QUANT_Q8_0, 3, 512, 700);
	be_fused(k, &p, QUANT_BF16, 20, 384, 1024);
	be_norms(k, &p, 7, 4096, 4096);
	be_norms(k, &p, 48, 64, 128);
	be_norm_residual(k, &p, 3, 2816, 1 | 2);	/* 26B-A4B's MoE layers */
	be_norm_residual(k, &p, 1, 2816, 8);		/* a dense layer, its scalar */
	be_norm_residual(k, &p, 2, 5376, 8);		/* 31B's */
	be_norm_residual(k, &p, 5, 5376, 1 | 2 | 8);
	be_norm_residual(k, &p, 2, 16384, 1 | 2 | 4);
	be_norm_residual(k, &p, 4, 1001, 1 | 2 | 8);	/* the plain kernels */
	be_add_rmsnorm(k, &p, 3, 2048);
	be_add_rmsnorm(k, &p, 40, 4096);
	be_add_rmsnorm(k, &p, 2, 1001);
	be_rmsnorm_pair(k, &p, 1, 2816, 1.0f / sqrtf(2816.0f));
	be_rmsnorm_pair(k, &p, 7, 5376, 1.0f);
	be_rmsnorm_pair(k, &p, 3, 1001, 0.5f);
	be_elementwise(k, &p, 64 * 70);
	be_rope(k, &p, 3, 4, 128, 32, BACKEND_ROPE_NEOX, 5);
	be_rope(k, &p, 2, 8, 64, 64, BACKEND_ROPE_NORM, 3000);
	be_rope(k, &p, 2, 8, 64, 64, BACKEND_ROPE_NORM | BACKEND_ROPE_GGML, 3000);	/* llama GGUFs */
	be_rope(k, &p, 4, 2, 64, 16, BACKEND_ROPE_NEOX, 100000);
	/* the 9B/27B heads one row and a verify's four, prompt rows, llama's, hd 80, and
	 * heads k_qk_rope does not take (hd 66: the ops one by one) */
	be_qkrope(k, &p, 1, 16, 4, 256, 512, 64, BACKEND_ROPE_NEOX, 300, 1, 0, 0);
	be_qkrope(k, &p, 4, 24, 4, 256, 512, 64, BACKEND_ROPE_NEOX, 4000, 1, 0, 0);
	be_qkrope(k, &p, 7, 16, 4, 256, 512, 64, BACKEND_ROPE_NEOX, 3, 0, 0, 0);
	be_qkrope(k, &p, 3, 8, 2, 128, 128, 128, BACKEND_ROPE_NORM | BACKEND_ROPE_GGML, 50, 1, 0, 0);
	be_qkrope(k, &p, 2, 6, 2, 80, 160, 32, BACKEND_ROPE_NEOX, 9, 1, 0, 0);
	be_qkrope(k, &p, 2, 4, 2, 66, 132, 32, BACKEND_ROPE_NEOX, 9, 1, 0, 0);
	/* Gemma-4's sliding layers (v normed too): 26B-A4B's heads decoding, 31B's prompt */
	be_qkrope(k, &p, 1, 16, 8, 256, 256, 256, BACKEND_ROPE_NEOX, 700, 1, 1, 0);
	be_qkrope(k, &p, 3, 32, 16, 256, 256, 256, BACKEND_ROPE_NEOX, 90, 1, 1, 0);
	be_qkrope(k, &p, 5, 32, 16, 256, 256, 256, BACKEND_ROPE_NEOX, 4, 0, 1, 0);
	/* the store into a ring (a sliding layer's cache of ring rows): rows across its end */
	be_qkrope(k, &p, 3, 8, 2, 128, 128, 128, BACKEND_ROPE_NEOX, 40, 1, 0, 7);
	be_qkrope(k, &p, 2, 32, 16, 256, 256, 256, BACKEND_ROPE_NEOX, 1535, 1, 1, 1536);
	be_qkrope(k, &p, 2, 6, 2, 80, 160, 32, BACKEND_ROPE_NEOX, 13, 1, 0, 7);	/* ops path */
	be_attention(k, &p, 1, 4, 2, 64, 0, 0);
	be_attention(k, &p, 4, 4, 2, 64, 300, 0);
	be_attention(k, &p, 9, 16, 4, 256, 1000, 0);
	be_attention(k, &p, 40, 8, 2, 128, 20, 0);
	/* prompts: gpu_attention_prefill; hd 80 keeps the 16-row pieces */
	be_attention(k, &p, 17, 16, 4, 256, 0, 0);
	be_attention(k, &p, 100, 16, 4, 256, 300, 0);
	be_attention(k, &p, 512, 16, 4, 256, 0, 0);
	be_attention(k, &p, 40, 8, 1, 64, 2047, 0);
	be_attention(k, &p, 300, 64, 8, 128, 5, 0);
	be_attention(k, &p, 40, 6, 2, 80, 100, 0);
	/* Gemma-4's global heads of 512: decode, verify, prompts (flash attention) */
	be_attention(k, &p, 1, 16, 2, 512, 0, 0);
	be_attention(k, &p, 9, 16, 2, 512, 1000, 0);
	be_attention(k, &p, 16, 32, 4, 512, 300, 0);
	be_attention(k, &p, 17, 16, 2, 512, 0, 0);
	be_attention(k, &p, 100, 8, 1, 512, 300, 0);
	/* recorded steps' shapes (dpos = host): Gemma-4 26B-A4B's global layers (16 on 2 of
	 * 512) and Step-3.7's (64 on 8 of 128), decode and a verify's four */
	be_attention(k, &p, 1, 16, 2, 512, 3000, 0);
	be_attention(k, &p, 4, 16, 2, 512, 3000, 0);
	be_attention(k, &p, 1, 64, 8, 128, 700, 0);
	be_attention(k, &p, 4, 64, 8, 128, 2000, 0);
	be_conv(k, &p, 1, 1024, 4);
	be_conv(k, &p, 9, 1000, 4);
	be_conv(k, &p, 3, 300, 3);
	be_conv(k, &p, 40, 700, 4);	/* rows in chunks, the state after */
	be_conv(k, &p, 33, 300, 3);
	be_conv(k, &p, 5, 200, 7);	/* a window k_conv keeps in memory */
	be_gdn(k, &p, 1, 4, 8, 64, 64, 1, 0, 0);
	be_gdn(k, &p, 9, 4, 8, 64, 64, 1, 1, 0);
	be_gdn(k, &p, 4, 2, 6, 128, 128, 0, 0, 0);
	be_gdn(k, &p, 3, 16, 32, 128, 128, 1, 0, 0);
	be_gdn(k, &p, 30, 4, 8, 64, 64, 1, 0, 1);	/* < 64 rows: the recurrent form */
	/* k_gdn_prep + k_gdn_chunk: one chunk, a partial one, 9B and 27B prompts, the state after */
	be_gdn(k, &p, 64, 16, 32, 128, 128, 1, 0, 1);
	be_gdn(k, &p, 64, 4, 8, 64, 64, 0, 1, 1);
	be_gdn(k, &p, 100, 4, 8, 64, 64, 1, 0, 1);
	be_gdn(k, &p, 100, 2, 6, 128, 128, 0, 1, 1);
	be_gdn(k, &p, 130, 2, 6, 64, 96, 0, 0, 1);
	be_gdn(k, &p, 512, 16, 32, 128, 128, 1, 0, 1);
	be_gdn(k, &p, 512, 16, 32, 128, 128, 0, 1, 1);
	be_gdn(k, &p, 512, 4, 8, 64, 64, 1, 1, 1);
	be_gdn(k, &p, 200, 16, 48, 128, 128, 1, 0, 1);
	be_gdn(k, &p, 1100, 2, 4, 64, 64, 1, 0, 1);	/* two pieces of launches */
	be_gdn(k, &p, 70, 2, 6, 64, 100, 0, 0, 1);	/* dv not a multiple of 32: recurrent */
	/*
	 * key heads other than 16, 32, 64 and 128 (a trained model of 80): k_gdn_pad,
	 * dk in registers of the next multiple of 16 (20 of 32, 100 of 112), and
	 * k_gdn_wide past 128; value heads past 256; prompts of 80 in the chunked
	 * kernels of 96 (the rows past 80 zero), other sizes row by row.  UNRUN as
	 * yet: compiled, no GPU when they were added.
	 */
	be_gdn(k, &p, 9, 2, 4, 80, 80, 1, 0, 0);
	be_gdn(k, &p, 1, 2, 4, 80, 160, 0, 1, 0);
	be_gdn(k, &p, 5, 4, 8, 48, 96, 0, 1, 0);
	be_gdn(k, &p, 4, 2, 6, 96, 128, 1, 0, 0);
	be_gdn(k, &p, 3, 2, 4, 20, 40, 1, 0, 0);
	be_gdn(k, &p, 3, 2, 4, 100, 300, 0, 0, 0);
	be_gdn(k, &p, 4, 1, 2, 160, 64, 1, 1, 0);
	be_gdn(k, &p, 2, 1, 2, 300, 40, 0, 0, 0);
	be_gdn(k, &p, 100, 2, 4, 80, 80, 1, 0, 1);	/* dv 80: row by row */
	be_gdn(k, &p, 64, 2, 4, 80, 64, 1, 0, 1);	/* k_gdn_prep/k_gdn_chunk<96, 80> */
	be_gdn(k, &p, 300, 2, 4, 80, 96, 0, 1, 1);
	be_gdn(k, &p, 1100, 1, 2, 80, 64, 1, 0, 1);
	be_gdn(k, &p, 70, 2, 6, 96, 96, 0, 1, 1);
	be_gdn(k, &p, 64, 1, 2, 160, 64, 1, 0, 1);
	/* a group's conv and delta rule in one call each (model_forward_seqs): the 9B's heads */
	for (int snaps = 0; snaps < 2; snaps++) {
		be_seqs(k, &p, 1, 0, 16, 32, 128, 128, 4, snaps);
		be_seqs(k, &p, 3, 0, 16, 32, 128, 128, 4, snaps);
		be_seqs(k, &p, 32, 0, 16, 32, 128, 128, 4, snaps);
		be_seqs(k, &p, 3, 2, 4, 8, 64, 64, 4, snaps);	/* conv rows in chunks */
	}
	be_seqs(k, &p, 32, 1, 16, 32, 128, 128, 4, 0);		/* decode */
	be_seqs(k, &p, 40, 1, 4, 8, 64, 64, 4, 1);		/* two launches */
	be_seqs(k, &p, 5, 0, 2, 6, 64, 100, 7, 1);		/* k_conv; dv not a multiple of 32 */
	be_seqs(k, &p, 4, 0, 2, 6, 32, 64, 3, 0);
	/* the key heads of the be gdn arms above: k_gdn_pad_seqs, k_gdn_wide_seqs (unrun as yet) */
	be_seqs(k, &p, 5, 0, 2, 4, 80, 80, 4, 1);
	be_seqs(k, &p, 32, 1, 2, 4, 80, 80, 4, 0);
	be_seqs(k, &p, 40, 1, 2, 4, 80, 160, 4, 1);
	be_seqs(k, &p, 3, 2, 4, 8, 48, 96, 4, 1);
	be_seqs(k, &p, 4, 0, 2, 6, 20, 40, 3, 1);
	be_seqs(k, &p, 3, 0, 2, 4, 100, 300, 4, 0);
	be_seqs(k, &p, 3, 0, 1, 2, 160, 64, 4, 1);
	be_kv_seqs(k, &p, 1, 0, 1024);	/* the 9B's keys: 4 heads of 256 */
	be_kv_seqs(k, &p, 3, 0, 1024);
	be_kv_seqs(k, &p, 32, 0, 1024);
	be_kv_seqs(k, &p, 32, 1, 1024);
	be_kv_seqs(k, &p, 40, 0, 300);		/* two launches; kvd not a multiple of 256 */
	/* a group's attention in one call (model_forward_seqs): the 9B's 16/4 heads of 256 */
	be_attention_seqs(k, &p, 1, 0, 16, 4, 256);
	be_attention_seqs(k, &p, 3, 0, 16, 4, 256);
	be_attention_seqs(k, &p, 32, 0, 16, 4, 256);
	be_attention_seqs(k, &p, 32, 1, 16, 4, 256);		/* decode */
	be_attention_seqs(k, &p, 40, 0, 16, 4, 256);		/* two calls of 32 */
	be_attention_seqs(k, &p, 3, 0, 16, 4, 128);
	be_attention_seqs(k, &p, 32, 0, 8, 2, 128);
	be_attention_seqs(k, &p, 3, 0, 8, 2, 512);		/* E 16 */
	be_attention_seqs(k, &p, 5, 0, 6, 2, 80);		/* scalar loads */
	be_embed_argmax(k, &p, QUANT_Q8_0);
	be_embed_argmax(k, &p, QUANT_Q6_K);
	be_embed_argmax(k, &p, QUANT_BF16);
	/* Q5_1 (quant-nvfp4's pick for rows of 384): int8 products, F32 lookups */
	be_matmul(k, &p, QUANT_Q5_1, 300, 384, 3, 8, 1.0f);
	be_matmul(k, &p, QUANT_Q5_1, 300, 384, 24, 0, 1.0f);
	be_matmul(k, &p, QUANT_Q8_0, 700, 4096, 33, 0, 1.0f);
	/* prefill on int8 activations: the GEMM, rows and inputs past whole tiles */
	be_matmul(k, &p, QUANT_Q8_0, 300, 512, 17, 0, 1.0f);
	be_matmul(k, &p, QUANT_Q8_0, 1000, 1024, 64, 4, 1.0f);
	be_matmul(k, &p, QUANT_NVFP4, 257, 768, 100, 8, 0.5f);
	be_matmul(k, &p, QUANT_NVFP4, 300, 320, 64, 0, 1.0f);
	be_fused(k, &p, QUANT_Q8_0, 40, 512, 700);
	be_fused(k, &p, QUANT_NVFP4, 70, 512, 300);
	/* the fused forms: decode (fused kernels), verify, prefill (the GEMM), a float type (plain ops) */
	be_fuse(k, &p, QUANT_Q8_0, 1, 4, 128, 320, 1.0f);
	be_fuse(k, &p, QUANT_NVFP4, 1, 2, 256, 256, 0.5f);
	be_fuse(k, &p, QUANT_Q8_0, 4, 8, 64, 192, 1.0f);
	be_fuse(k, &p, QUANT_Q5_1, 3, 3, 128, 96, 1.0f);
	be_fuse(k, &p, QUANT_Q8_0, 40, 2, 128, 160, 1.0f);
	be_fuse(k, &p, QUANT_BF16, 2, 2, 64, 96, 1.0f);
	/* K-quants: the norm plain, SwiGLU / GeGLU in the Q8_K quantization (k_q8kx_pre) */
	be_fuse(k, &p, QUANT_Q4_K, 2, 2, 256, 256, 1.0f);
	be_fuse(k, &p, QUANT_Q6_K, 1, 4, 256, 512, 1.0f);
	be_fuse(k, &p, QUANT_IQ4_XS, 3, 2, 256, 768, 1.0f);
	/* the decode shapes: rows of 4096 (1024 threads) and 5120 (2 float4s a thread) */
	be_fuse(k, &p, QUANT_Q8_0, 1, 32, 128, 256, 1.0f);
	be_fuse(k, &p, QUANT_Q5_1, 2, 32, 128, 128, 1.0f);
	be_fuse(k, &p, QUANT_Q8_0, 3, 40, 128, 256, 1.0f);
	be_set(k, &p, QUANT_Q8_0, 1, 512);
	be_set(k, &p, QUANT_Q8_0, 5, 512);	/* the staged kernel */
	be_set(k, &p, QUANT_NVFP4, 1, 512);
	be_set(k, &p, QUANT_Q5_1, 3, 256);
	be_fused(k, &p, QUANT_Q4_K, 3, 512, 700);	/* K-quants: norm, then Q8_K */
	be_fused(k, &p, QUANT_Q6_K, 16, 768, 300);
	be_fused(k, &p, QUANT_Q5_K, 20, 512, 300);	/* prefill: cuBLAS */
	be_matmul(k, &p, QUANT_Q6_K, 300, 768, 16, 8, 1.0f);
	be_matmul(k, &p, QUANT_Q5_K, 300, 768, 17, 0, 1.0f);
	be_embed_argmax(k, &p, QUANT_Q5_1);
	be_embed_argmax(k, &p, QUANT_Q5_0);	/* lookups by matvec.cu's Q5_0 */
	/* Q4_0 and Q5_0 on int8 activations up to the step rows: decode, verify
	 * (the weight's scale), prompts (gpu_matmul's tiles, by the kind), the
	 * norm fused into the quantization (decode), the fused forms */
	be_matmul(k, &p, QUANT_Q4_0, 300, 704, 3, 8, 1.0f);
	be_matmul(k, &p, QUANT_Q5_0, 300, 704, 16, 0, 0.5f);
	be_matmul(k, &p, QUANT_Q4_0, 257, 800, 40, 4, 1.0f);
	be_matmul(k, &p, QUANT_Q5_0, 257, 800, 40, 0, 1.0f);
	be_fused(k, &p, QUANT_Q4_0, 3, 512, 700);
	be_fused(k, &p, QUANT_Q5_0, 16, 704, 300);
	be_fused(k, &p, QUANT_Q5_0, 20, 512, 300);	/* prefill: cuBLAS */
	be_fuse(k, &p, QUANT_Q4_0, 1, 4, 128, 320, 1.0f);
	be_fuse(k, &p, QUANT_Q5_0, 3, 3, 128, 96, 1.0f);
	be_fuse(k, &p, QUANT_Q5_0, 40, 2, 128, 160, 1.0f);
	be_set(k, &p, QUANT_Q4_0, 3, 256);
	be_set(k, &p, QUANT_Q5_0, 1, 512);
	/* IQ4_XS (Q8_K) and IQ4_NL (Q8_0) on int8 activations: decode, verify (the
	 * weight's scale), prompts (IQ4_XS: cuda/mmq_iq4.cu's int8 GEMM or bf16
	 * operands by the kind; IQ4_NL: launches of 16), the norm fused into the
	 * quantization (decode, verify, prompts), the fused forms (their plain
	 * ops), lookups (llama.cpp's IQ4_XS files keep token_embd IQ4_XS) */
	be_matmul(k, &p, QUANT_IQ4_XS, 300, 512, 1, 0, 1.0f);
	be_matmul(k, &p, QUANT_IQ4_XS, 257, 768, 5, 8, 1.0f);
	be_matmul(k, &p, QUANT_IQ4_XS, 300, 1280, 16, 4, 0.5f);
	be_matmul(k, &p, QUANT_IQ4_XS, 500, 512, 40, 4, 1.0f);
	be_matmul(k, &p, QUANT_IQ4_NL, 300, 384, 3, 8, 1.0f);
	be_matmul(k, &p, QUANT_IQ4_NL, 300, 384, 24, 0, 1.0f);
	be_fused(k, &p, QUANT_IQ4_XS, 3, 512, 700);
	be_fused(k, &p, QUANT_IQ4_XS, 16, 768, 300);
	be_fused(k, &p, QUANT_IQ4_XS, 20, 512, 300);
	be_fused(k, &p, QUANT_IQ4_NL, 5, 384, 300);
	be_fuse(k, &p, QUANT_IQ4_XS, 2, 2, 256, 256, 1.0f);
	be_fuse(k, &p, QUANT_IQ4_NL, 3, 3, 128, 96, 1.0f);
	be_embed_argmax(k, &p, QUANT_IQ4_XS);
	be_embed_argmax(k, &p, QUANT_IQ4_NL);
	/* rows not a multiple of 32 (zero-padded F32 on the GPU): products, prompts, lookups */
	be_matmul(k, &p, QUANT_F32, 40, 48, 3, 8, 1.0f);
	be_matmul(k, &p, QUANT_F32, 64, 16, 20, 0, 1.0f);
	be_matmul(k, &p, QUANT_BF16, 33, 24, 1, 0, 1.0f);
	be_fused(k, &p, QUANT_F32, 5, 48, 40);
	be_odd_rows(k, &p, QUANT_F32, 48);
	be_odd_rows(k, &p, QUANT_BF16, 24);
	/* the mixture of experts: the routers (qwen35moe and gemma4's softmax, step35's
	 * sigmoid with its bias, norm and scale), decode, verify and prompt rows */
	be_moe_route(k, &p, 8, 2, 1, 0, 0, 0, 1.0f);
	be_moe_route(k, &p, 256, 8, 5, 0, 0, 0, 1.0f);
	be_moe_route(k, &p, 128, 4, 40, 0, 0, 0, 1.0f);	/* (and the scale fused: =plain) */
	be_moe_route(k, &p, 8, 3, 4, 1, 1, 1, 2.5f);
	be_moe_route(k, &p, 288, 8, 3, 1, 1, 1, 2.5f);
	be_moe_route(k, &p, 4, 1, 2, 1, 0, 1, 1.0f);
	be_moe_route(k, &p, 64, 4, 17, 1, 1, 0, 1.0f);
	/* picks past a lane each (k > 32: the later ones finished by lane 0) and
	 * exactly 32 */
	be_moe_route(k, &p, 64, 40, 3, 0, 0, 0, 1.0f);
	be_moe_route(k, &p, 40, 32, 2, 0, 0, 0, 1.0f);
	be_moe_route(k, &p, 96, 33, 2, 1, 1, 1, 2.5f);
	/* the experts' gate and up: the fixtures' F32 shapes, the serving types */
	be_moe_swiglu(k, &p, QUANT_F32, 8, 16, 64, 1, 2, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_F32, 8, 16, 64, 40, 2, 8, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_F32, 8, 16, 32, 6, 3, 0, 0.35f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_BF16, 6, 24, 48, 5, 2, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_Q8_0, 8, 64, 256, 1, 2, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_Q8_0, 16, 64, 256, 4, 8, 4, 0.3f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_Q8_0, 8, 32, 512, 20, 2, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_NVFP4, 8, 128, 256, 3, 2, 0, 0.0f, 0.5f);
	be_moe_swiglu(k, &p, QUANT_Q4_K, 8, 64, 512, 2, 4, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_Q6_K, 8, 32, 256, 16, 2, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_Q5_1, 6, 40, 64, 3, 2, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_Q4_0, 6, 32, 64, 3, 2, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_Q5_0, 8, 64, 704, 20, 8, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_Q4_0, 16, 32, 256, 40, 8, 4, 0.3f, 0.5f);
	/* IQ4_XS experts (a Step or Qwen MoE IQ4_XS file's stacks): decode, prompt
	 * rows with the clamp, a scaled gate; IQ4_NL (rows not whole super-blocks) */
	be_moe_swiglu(k, &p, QUANT_IQ4_XS, 8, 64, 512, 2, 4, 0, 0.0f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_IQ4_XS, 16, 32, 256, 40, 8, 4, 0.3f, 1.0f);
	be_moe_swiglu(k, &p, QUANT_IQ4_XS, 8, 40, 1024, 3, 2, 0, 0.0f, 0.5f);
	be_moe_swiglu(k, &p, QUANT_IQ4_NL, 6, 40, 96, 3, 2, 0, 0.0f, 1.0f);
	/* the experts' down and the weighted sum */
	be_moe_down(k, &p, QUANT_F32, 8, 64, 16, 1, 2, 0, 1.0f);
	be_moe_down(k, &p, QUANT_F32, 8, 32, 16, 40, 3, 5, 1.0f);
	be_moe_down(k, &p, QUANT_BF16, 6, 32, 24, 5, 2, 0, 1.0f);
	be_moe_down(k, &p, QUANT_Q8_0, 16, 256, 64, 4, 8, 0, 1.0f);
	be_moe_down(k, &p, QUANT_NVFP4, 8, 256, 128, 2, 2, 3, 0.5f);
	be_moe_down(k, &p, QUANT_Q4_K, 8, 64, 256, 3, 2, 0, 1.0f);
	be_moe_down(k, &p, QUANT_Q6_K, 8, 32, 256, 16, 2, 0, 1.0f);
	be_moe_down(k, &p, QUANT_Q8_0, 8, 128, 64, 20, 2, 0, 1.0f);
	be_moe_down(k, &p, QUANT_IQ4_XS, 8, 64, 256, 3, 2, 0, 1.0f);
	be_moe_down(k, &p, QUANT_IQ4_XS, 16, 96, 1280, 20, 8, 5, 1.0f);	/* Step's rows of 1280 */
	be_moe_down(k, &p, QUANT_IQ4_NL, 8, 32, 64, 4, 2, 0, 1.0f);
	/* the 26B-A4B's down experts (Q5_0 rows of 704 in its Q4_K files), decode and
	 * a prompt; Q4_0 */
	be_moe_down(k, &p, QUANT_Q5_0, 16, 256, 704, 1, 8, 0, 1.0f);
	be_moe_down(k, &p, QUANT_Q5_0, 16, 128, 704, 40, 8, 3, 1.0f);
	be_moe_down(k, &p, QUANT_Q4_0, 8, 64, 256, 20, 2, 0, 0.5f);
	/* the experts' whole FFN (SwiGLU in the down products' quantization where there
	 * is no limit): decode and a prompt, the shared sum plain and gated, a limit,
	 * the qwen35moe types, a float type (the plain order), Step's IQ4_XS */
	be_moe_ffn(k, &p, QUANT_Q8_0, 8, 64, 256, 1, 2, 0.0f, 0);
	be_moe_ffn(k, &p, QUANT_Q8_0, 16, 64, 256, 4, 8, 0.0f, 2);
	be_moe_ffn(k, &p, QUANT_Q4_K, 8, 256, 512, 1, 4, 0.0f, 2);
	be_moe_ffn(k, &p, QUANT_Q4_K, 8, 256, 256, 40, 4, 0.0f, 2);
	be_moe_ffn(k, &p, QUANT_Q6_K, 8, 256, 256, 3, 2, 0.0f, 1);
	be_moe_ffn(k, &p, QUANT_NVFP4, 8, 128, 256, 2, 2, 0.0f, 2);
	be_moe_ffn(k, &p, QUANT_Q5_0, 8, 64, 256, 2, 2, 0.0f, 0);
	be_moe_ffn(k, &p, QUANT_IQ4_XS, 8, 256, 512, 2, 4, 0.0f, 1);
	be_moe_ffn(k, &p, QUANT_IQ4_XS, 8, 256, 512, 2, 4, 0.35f, 1);
	be_moe_ffn(k, &p, QUANT_F32, 8, 16, 64, 3, 2, 0.0f, 2);
	/* gemma4's fused gate and up experts */
	be_moe_geglu(k, &p, QUANT_F32, 6, 16, 32, 1, 2);
	be_moe_geglu(k, &p, QUANT_F32, 6, 16, 32, 20, 2);
	be_moe_geglu(k, &p, QUANT_Q8_0, 8, 64, 256, 3, 2);
	be_moe_geglu(k, &p, QUANT_Q4_K, 8, 32, 256, 2, 4);
	be_moe_geglu(k, &p, QUANT_IQ4_XS, 8, 32, 256, 2, 4);
	be_arch_small(k, &p, 7, 64);
	be_arch_small(k, &p, 33, 128);
	/* sliding windows (gemma4, step35): decode, verify, prompts (flash past 32 rows) */
	be_attention(k, &p, 1, 4, 2, 16, 10, 5);
	be_attention(k, &p, 4, 6, 2, 16, 3, 5);
	be_attention(k, &p, 9, 8, 2, 64, 200, 64);
	be_attention(k, &p, 40, 4, 2, 32, 0, 5);
	be_attention(k, &p, 100, 8, 2, 128, 300, 512);
	be_attention(k, &p, 16, 4, 1, 128, 1000, 100);
	be_attention(k, &p, 9, 8, 2, 512, 200, 64);	/* heads of 512 (none in a model yet) */
	be_attention(k, &p, 40, 4, 2, 512, 100, 30);
	/* recorded steps' sliding layers: Gemma-4 26B-A4B's (16 on 8 of 256, 1024 keys) and
	 * Step-3.7's (64 on 8 of 128, 512 keys), decode and a verify's four */
	be_attention(k, &p, 1, 16, 8, 256, 2000, 1024);
	be_attention(k, &p, 4, 16, 8, 256, 2000, 1024);
	be_attention(k, &p, 1, 64, 8, 128, 700, 512);
	be_attention(k, &p, 4, 64, 8, 128, 2000, 512);
	/* their prompts: flash attention walking each block's windows */
	be_attention(k, &p, 300, 16, 8, 256, 900, 1024);
	be_attention(k, &p, 200, 64, 8, 128, 600, 512);
	/* an image block's rows seeing the block (gemma4's bidirectional vision rows, a
	 * tower's full attention): causal text around it, with and without a window */
	be_attention_hi(k, &p, 1, 4, 2, 64, 10, 0, 1, 0);
	be_attention_hi(k, &p, 9, 8, 2, 128, 100, 3, 4, 0);
	be_attention_hi(k, &p, 40, 8, 2, 256, 30, 5, 20, 0);
	be_attention_hi(k, &p, 40, 4, 1, 64, 600, 10, 25, 16);
	be_attention_hi(k, &p, 33, 8, 2, 128, 1000, 8, 16, 512);
	be_attention_hi(k, &p, 17, 16, 4, 256, 0, 0, 17, 0);
	be_attention_hi(k, &p, 24, 6, 2, 80, 70, 4, 12, 8);
	be_attention_hi(k, &p, 9, 8, 2, 512, 100, 3, 4, 0);	/* heads of 512 */
	be_attention_hi(k, &p, 40, 16, 2, 512, 30, 5, 20, 16);
	/* an image block over a sliding layer's ring (Gemma-4's rings with images) */
	be_attention_hi_ring(k, &p, 40, 4, 1, 64, 600, 10, 25, 16);
	be_attention_hi_ring(k, &p, 24, 6, 2, 80, 70, 4, 12, 8);
	be_attention_hi_ring(k, &p, 40, 16, 8, 256, 3000, 5, 30, 1024);
	/* every row the block (a vision tower's attention): the flash kernel's full mode,
	 * heads of 72 (the 31B tower's) too */
	be_attention_hi(k, &p, 100, 16, 16, 72, 0, 0, 100, 0);
	be_attention_hi(k, &p, 60, 4, 4, 64, 40, 0, 60, 0);
	/* a DFlash drafter's ring caches: window - 1 + block rows, and slack */
	be_attention_ring(k, &p, 1, 4, 2, 64, 700, 64, 64);
	be_attention_ring(k, &p, 8, 8, 2, 128, 300, 32, 39);
	be_attention_ring(k, &p, 16, 4, 1, 256, 5000, 2048, 2063);
	be_attention_ring(k, &p, 40, 8, 2, 64, 90, 20, 59);
	be_attention_ring(k, &p, 4, 6, 2, 128, 200, 10, 100);
	be_attention_ring(k, &p, 8, 16, 2, 512, 300, 32, 39);	/* heads of 512 */
	be_clamp(k, &p, 1000);
	/* the vision towers' products on half operands: a row, a few, a prompt's GEMM */
	be_matmul_half(k, &p, QUANT_BF16, 300, 512, 1, 0);
	be_matmul_half(k, &p, QUANT_BF16, 257, 768, 40, 8);
	be_matmul_half(k, &p, QUANT_F16, 300, 512, 5, 4);
	be_matmul_half(k, &p, QUANT_F16, 257, 768, 40, 0);
	be_matmul_half(k, &p, QUANT_BF16, 72, 4304, 30, 0);	/* F32 rows on the GPU */
	be_matmul_half(k, &p, QUANT_F16, 72, 4304, 30, 3);
	be_matmul_half(k, &p, QUANT_F32, 257, 768, 40, 8);
	/* DFlash2's convolutions: Qwen3.8's block of 8 over 5120 channels, and odd shapes */
	be_dconv(k, &p, 8, 5120, 2, 16, 0);
	be_dconv(k, &p, 8, 5120, 2, 16, 1);
	be_dconv(k, &p, 16, 64, 3, 8, 1);
	be_dconv(k, &p, 1, 32, 2, 32, 0);
	be_head_max(k, &p);
	be_mask(k, &p);
	/* gemma4's proportional RoPE: a quarter of the pairs turn, over the whole head */
	be_rope(k, &p, 3, 4, 32, 8, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 5);
	be_rope(k, &p, 2, 8, 256, 64, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 3000);
	be_qkrope(k, &p, 2, 4, 2, 32, 32, 8, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 9, 1, 0, 0);
	/* the 26B-A4B / 31B global layers: heads of 512, 128 of them turning */
	be_rope(k, &p, 3, 16, 512, 128, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 3000);
	be_qkrope(k, &p, 2, 16, 2, 512, 512, 128, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 9, 1, 1, 0);
	be_qkrope(k, &p, 17, 8, 1, 512, 512, 128, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 0, 0, 1, 0);
	be_norms(k, &p, 48, 512, 512);		/* their q, k and v norms: rows of 512 */
	be_rows32(k, &p);
	bchk(p.g, backend_rows_set(p.g, BACKEND_ROWS_MAX));
	for (int i = 0; i < nmodel; i++) {	/* the model checks, model by model */
		struct noise nz = { 0 };
		if (nmodel > 1) {
			printf("== %s\n", models[i]);
			fflush(stdout);
		}
		be_model_types(k, models[i]);
		be_model(k, &p, models[i], 8, 16, &nz, "", 0);
		for (int kind = 0; kind < 2; kind++) {	/* prefill past the step rows: the GEMM */
			int gk = kind ? BACKEND_GEMM_BF16 : BACKEND_GEMM_INT8;
			/* against the CPU computing those products with the GPU's numerics */
			bchk(p.g, backend_gemm_set(p.g, gk));
			bchk(p.c, backend_cpu_gemm_emulate(p.c, gk, backend_step_rows(p.g)));
			be_model(k, &p, models[i], 40, 16, &nz, kind ? ", gemm bf16" : ", gemm int8", 0);
			/* gemma4's sliding caches as rings, pieces of 32 rows (model_ring_rows):
			 * a prompt of 64 wraps them */
			if (kind == 0)
				be_model(k, &p, models[i], 64, 16, &nz, ", gemm int8, rings", 32);
		}
		bchk(p.c, backend_cpu_gemm_emulate(p.c, -1, 1));
		bchk(p.g, backend_gemm_set(p.g, BACKEND_GEMM_DEFAULT));
		be_pdl(k, &p, models[i]);
		r32_model(k, &p, models[i]);
		be_vision(k, &p, models[i]);	/* a checkpoint with a vision tower */
	}
	backend_close(p.g);
	backend_close(p.c);
}

#endif	/* MEMRA_HAVE_CUDA */
