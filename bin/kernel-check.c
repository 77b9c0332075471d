/*
 * kernel-check: run every GPU kernel against a CPU reference on random
 * inputs and print one line per check, then ALL GREEN or N FAILED.
 * The quantized products are checked against quant_dequantize_row; the
 * gpu.h fp32 kernels against the small double-precision references below;
 * then the CUDA backend against the CPU backend op by op through
 * lib/backend's table ("be ..." lines), and with MODEL a model's prefill
 * logits and greedy ids on both backends.
 */
#include <dirent.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gguf.h"
#include "json.h"
#include "model.h"
#include "quant.h"
#include "ranks.h"
#include "sample.h"
#include "state.h"
#include "util.h"
#include "vision.h"
#ifdef MEMRA_HAVE_CUDA
#include "backend_impl.h"	/* backend_cuda_gpu */
#include "gpu.h"
#endif

static int
usage(FILE *f, int status)
{
	fprintf(f, "usage: %s [-bt] [-C bytes] [-d device] [-s seed] [-T type] [-U n] [model ...]\n"
	    "       %s -n model\n", prog, prog);
	return status;
}

/* --- the CPU's float-order noise on a model (also without CUDA) --------- */

static void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		die(1, "out of memory (%zu bytes)", n);
	return p;
}

/* be_model's prompt: the fixed 8 ids, repeated with the position added,
 * modulo nv, the model's vocabulary (model A's ids are all below it; the
 * tiny fixtures of t/data have 320). */
static void
model_prompt(int32_t *pr, int n, int nv)
{
	static const int32_t p8[] = { 1, 22, 333, 44, 5, 66, 7, 88 };

	for (int i = 0; i < n; i++)
		pr[i] = (p8[i % 8] + (i / 8) * 3) % nv;
}


/* The CPU's float-order noise on a model (be_model), once per model. */
struct noise {
	int	done;
	double	rel, abs;	/* the larger of order and steps: relative to 1 + |logit|, absolute */
	double	order_rel, order_abs;	/* llama.cpp's attention order against the plain one */
	double	steps_rel, steps_abs;	/* the prefill against the prompt token by token */
	int	int8;		/* model_int8_weights: products on int8 activations */
};

/* Fold the difference of logits a and b ([n]) into *rel and *abs. */
static void
noise_add(const float *a, const float *b, int n, double *rel, double *abs)
{
	for (int j = 0; j < n; j++) {
		double d = fabs((double)a[j] - b[j]);
		*abs = fmax(*abs, d);
		*rel = fmax(*rel, d / (1.0 + fabs((double)a[j])));
	}
}

/*
 * The CPU's own float-order noise on the model at path (be_model), on
 * the CPU backend cpu, for be_model's 40-token prompt and one other: the
 * last logits of the prefill against the same prompt run token by token
 * (steps), and against the prefill of the same file opened with the plain
 * attention order (model_options.plain_attn: order; a llama model sums
 * attention in llama.cpp's order, qwen35 always in the plain one, so 0
 * there).  Each is right; they differ by float order alone.  40 tokens:
 * past 16 rows, so the prefill takes its own paths (chunked delta rule,
 * batched attention); the same noise bounds shorter prompts, whose GPU
 * products differ from the CPU's in float order too.
 */
static void
cpu_noise(struct backend *cpu, const char *path, struct noise *nz)
{
	enum { NN = 40 };
	struct model_options plain = { .plain_attn = 1 };
	struct model *md[2];
	int32_t pr[NN];
	char err[UTIL_ERRLEN];
	int nv;

	for (int o = 0; o < 2; o++)
		if ((md[o] = model_open_opts(path, cpu, o ? &plain : NULL, err)) == NULL)
			die(1, "%s", err);
	nv = model_hparams(md[0])->n_vocab;
	float *a = xmalloc((size_t)nv * 4), *b = xmalloc((size_t)nv * 4);
	memset(nz, 0, sizeof *nz);
	for (int w = 0; w < 2; w++) {	/* be_model's prompt, then another */
		struct state *st[3];
		for (int i = 0; i < 3; i++)
			if ((st[i] = model_state_new(md[i == 2], NN + 1, 0, err)) == NULL)
				die(1, "%s", err);
		model_prompt(pr, NN, nv);
		for (int i = 0; w == 1 && i < NN; i++)
			pr[i] = 1 + (i * 37 + 11) % (nv - 1);
		if (model_forward(md[0], st[0], pr, NN, MODEL_PREFILL, a, NULL) != 0)
			die(1, "cpu: %s", model_errmsg(md[0]));
		for (int i = 0; i < NN; i++)
			if (model_forward(md[0], st[1], &pr[i], 1, 0, b, NULL) != 0)
				die(1, "cpu: %s", model_errmsg(md[0]));
		noise_add(a, b, nv, &nz->steps_rel, &nz->steps_abs);
		if (model_forward(md[1], st[2], pr, NN, MODEL_PREFILL, b, NULL) != 0)
			die(1, "cpu: %s", model_errmsg(md[1]));
		noise_add(a, b, nv, &nz->order_rel, &nz->order_abs);
		for (int i = 0; i < 3; i++)
			state_free(st[i]);
	}
	nz->int8 = model_int8_weights(md[0]);
	nz->rel = fmax(nz->order_rel, nz->steps_rel);
	nz->abs = fmax(nz->order_abs, nz->steps_abs);
	nz->done = 1;
	model_close(md[0]), model_close(md[1]);
	free(a), free(b);
}

/* be_model's bound on the logits (relative, as noise_tol's) of a model with
 * int8-activation products (model_int8_weights): upstream float-order
 * differences flip activations' roundings, which the CPU's own two orders
 * may not show (the compressed-tensors NVFP4 checkpoint of A, mostly bf16:
 * CPU noise 3.3e-7, the GPU's prefill of 40 0.049 from the CPU's on an H100,
 * 2026-12-05; A's GGUFs 0.07-0.16 at CPU noise 0.03-0.09). */
#define INT8_LOGITS_TOL 0.1

/* be_model's tolerance of the logits, relative to 1 + |logit| (capped: the broken arm adds 4). */
static double
noise_tol(const struct noise *nz)
{
	return fmax(nz->int8 > 0 ? INT8_LOGITS_TOL : 1e-2, fmin(1.0, 3 * nz->rel));
}


/* be_model's near-tie: a top-2 margin under it lets greedy ids part; gap: the
 * largest difference of the two backends' prefill logits just measured (held
 * to its own bound): a margin under twice it may flip. */
static double
noise_near(const struct noise *nz, double gap)
{
	return fmax(fmax(1e-3, 3 * nz->abs), 2 * gap);
}

#ifdef MEMRA_HAVE_CUDA

struct kc {
	struct gpu *g;
	uint64_t rng;
	int	brk;		/* break every GPU result before comparing */
	int	nchk, nfail;
	int	only;		/* bench: just this quant type (-1: all) */
	int	chunk, unroll;	/* gpu_tune values */
};

/* --- small helpers ----------------------------------------------------- */

static uint64_t
rnd(struct kc *k)	/* xorshift64* */
{
	k->rng ^= k->rng >> 12;
	k->rng ^= k->rng << 25;
	k->rng ^= k->rng >> 27;
	return k->rng * 0x2545F4914F6CDD1DULL;
}

static float
unif(struct kc *k, float lo, float hi)	/* [lo, hi) */
{
	return lo + (hi - lo) * (float)((rnd(k) >> 40) * 0x1p-24);
}

static void
gchk(struct kc *k, int rc)
{
	if (rc != 0)
		die(1, "gpu: %s", gpu_errmsg(k->g));
}

static void *
dput(struct kc *k, const void *h, size_t n)	/* device copy of n host bytes */
{
	void *d = gpu_alloc(k->g, n);

	if (d == NULL)
		die(1, "gpu: %s", gpu_errmsg(k->g));
	if (h != NULL)
		gchk(k, gpu_upload(k->g, d, h, n));
	return d;
}

static void
dget(struct kc *k, void *h, const void *d, size_t n)
{
	gchk(k, gpu_download(k->g, h, d, n));
	gchk(k, gpu_sync(k->g));
}

static float *
frand(struct kc *k, int64_t n, float lo, float hi)
{
	float *v = xmalloc((size_t)n * sizeof *v);

	for (int64_t i = 0; i < n; i++)
		v[i] = unif(k, lo, hi);
	return v;
}

/* The deliberately broken arm: one element moved far off (a NaN or an
 * infinity, which no addition moves, made 0: a check of bits whose middle
 * element is NaN, as an ill-routed expert row's, must fail it too). */
static void
brk(struct kc *k, float *v, int64_t n)
{
	if (k->brk && n > 0)
		v[n / 2] = isfinite(v[n / 2]) ? v[n / 2] + 1.0f + 0.5f * fabsf(v[n / 2]) : 0.0f;
}

static int
report(struct kc *k, const char *name, const char *shape, double maxdiff, int ok)
{
	printf("%-22s %-32s maxdiff=%-10.3g %s\n", name, shape, maxdiff, ok ? "OK" : "FAIL");
	fflush(stdout);
	k->nchk++;
	if (!ok)
		k->nfail++;
	return ok;
}

/*
 * Compare got with ref: OK when every |got - ref| <= tol * mag, mag[i]
 * (or 1 + |ref| when mag is NULL).  NaN fails.
 */
static int
close_to(struct kc *k, const char *name, const char *shape, const float *got,
    const double *ref, const double *mag, int64_t n, double tol)
{
	double maxd = 0;
	int ok = 1;

	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		double m = mag ? mag[i] : 1.0 + fabs(ref[i]);
		if (!(d <= tol * m))
			ok = 0;
		if (d > maxd || d != d)
			maxd = d;
	}
	return report(k, name, shape, maxd, ok);
}

/* same_bits, OK only when also cond (e.g. the kernels meant to run ran). */
static int
same_bits_if(struct kc *k, const char *name, const char *shape, const float *a,
    const float *b, int64_t n, int cond)
{
	double maxd = 0;
	int ok = memcmp(a, b, (size_t)n * sizeof *a) == 0 && cond;

	for (int64_t i = 0; i < n; i++)
		if (fabs((double)a[i] - b[i]) > maxd)
			maxd = fabs((double)a[i] - b[i]);
	return report(k, name, shape, maxd, ok);
}

static int
same_bits(struct kc *k, const char *name, const char *shape, const float *a,
    const float *b, int64_t n)
{
	return same_bits_if(k, name, shape, a, b, n, 1);
}

/* The launches named what in g's profile (after gpu_prof_end). */
static unsigned long
prof_launches(struct kc *k, const char *what)
{
	const struct gpu_prof_row *r;
	int n = gpu_prof_rows(k->g, &r);
	unsigned long c = 0;

	for (int i = 0; i < n; i++)
		if (strcmp(r[i].name, what) == 0)
			c += r[i].n;
	return c;
}

/* --- random quantized weights ------------------------------------------- */

/* Byte offsets of the fp16 scale fields in one block of t (-1 ends). */
static const int *
half_fields(int t)
{
	static const int q8[] = { 0, -1 }, q41[] = { 0, 2, -1 }, q6k[] = { 208, -1 }, none[] = { -1 };

	switch (t) {
	case QUANT_Q8_0: case QUANT_Q4_0: case QUANT_Q5_0: case QUANT_IQ4_NL: case QUANT_IQ4_XS:
		return q8;
	case QUANT_Q4_1: case QUANT_Q5_1: case QUANT_Q4_K: case QUANT_Q5_K: return q41;
	case QUANT_Q6_K: return q6k;
	default: return none;
	}
}

/* rows x ne0 random weights of type t: random bits, finite scales of a sane size. */
static uint8_t *
qrand(struct kc *k, int t, int64_t rows, int64_t ne0, size_t *nbytes)
{
	const struct quant_traits *tr = quant_traits(t);
	size_t rb = quant_row_size(t, ne0), n = rb * (size_t)rows;
	uint8_t *w = xmalloc(n);
	int64_t nel = rows * ne0;

	*nbytes = n;
	for (size_t i = 0; i < n; i++)
		w[i] = (uint8_t)(rnd(k) >> 56);
	if (t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16) {
		for (int64_t i = 0; i < nel; i++) {
			float f = unif(k, -1, 1);
			uint16_t h = t == QUANT_F16 ? quant_f32_to_f16(f) : quant_f32_to_bf16(f);
			if (t == QUANT_F32)
				memcpy(w + 4 * i, &f, 4);
			else
				memcpy(w + 2 * i, &h, 2);
		}
		return w;
	}
	for (size_t b = 0; b < n / (size_t)tr->size; b++) {
		uint8_t *blk = w + b * (size_t)tr->size;
		for (const int *o = half_fields(t); *o >= 0; o++) {
			uint16_t h = quant_f32_to_f16(unif(k, -0.05f, 0.05f));
			memcpy(blk + *o, &h, 2);
		}
		if (t == QUANT_NVFP4)
			for (int s = 0; s < 4; s++)
				blk[s] = (uint8_t)(0x20 + (rnd(k) >> 59));
	}
	return w;
}

/* wf[rows][ne0] = the CPU reference's dequantization. */
static float *
qdeq(int t, const uint8_t *w, int64_t rows, int64_t ne0)
{
	float *wf = xmalloc((size_t)(rows * ne0) * sizeof *wf);
	size_t rb = quant_row_size(t, ne0);

	for (int64_t r = 0; r < rows; r++)
		if (quant_dequantize_row(t, w + r * rb, wf + r * ne0, ne0) != 0)
			die(1, "quant_dequantize_row: type %s failed", quant_name(t));
	return wf;
}

/* ref[j][r] = wf[r] . x[j] in double, mag = sum |w x|. */
static void
dot_ref(const float *wf, const float *x, int64_t rows, int64_t ne0, int m,
    double scale, double *ref, double *mag)
{
	for (int j = 0; j < m; j++)
		for (int64_t r = 0; r < rows; r++) {
			double s = 0, a = 0;
			for (int64_t e = 0; e < ne0; e++) {
				double p = (double)wf[r * ne0 + e] * x[j * ne0 + e];
				s += p;
				a += fabs(p);
			}
			ref[j * rows + r] = s * scale;
			mag[j * rows + r] = a * fabs(scale) + 1e-30;
		}
}

/* --- quantized products ------------------------------------------------- */

static const int mv_types[] = {
	QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_0, QUANT_Q4_1,
	QUANT_NVFP4, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_IQ4_NL, QUANT_IQ4_XS,
	QUANT_Q5_0,
};
#define NTYPES (int)(sizeof mv_types / sizeof mv_types[0])

struct wset {		/* one random weight matrix, here and on the device */
	int	t;
	int64_t	rows, ne0;
	uint8_t	*w;
	float	*wf;	/* dequantized by the CPU reference */
	void	*dw;
};

/* A device copy of weight rows w as the kernels take them (NVFP4 in the
 * GPU layout). */
static void *
wput(struct kc *k, int t, const uint8_t *w, int64_t rows, int64_t ne0)
{
	void *d = dput(k, w, quant_row_size(t, ne0) * (size_t)rows);

	if (t == QUANT_NVFP4)
		gchk(k, gpu_nvfp4_pack(k->g, d, rows, ne0));
	return d;
}

static void
wset_new(struct kc *k, struct wset *s, int t, int64_t rows, int64_t ne0)
{
	size_t n;

	s->t = t, s->rows = rows, s->ne0 = ne0;
	s->w = qrand(k, t, rows, ne0, &n);
	s->wf = qdeq(t, s->w, rows, ne0);
	s->dw = wput(k, t, s->w, rows, ne0);
}

static void
wset_free(struct kc *k, struct wset *s)
{
	free(s->w);
	free(s->wf);
	gpu_free(k->g, s->dw);
}

/* 1 for the weight types the bf16 GEMM leaves on fp32 (not quantized). */
static int
float_type(int t)
{
	return t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16;
}

/* f rounded to bf16 (nearest, ties to even; finite f), as a float. */
static float
bf16_round(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u = (u + 0x7FFFu + (u >> 16 & 1)) & 0xFFFF0000u;
	memcpy(&f, &u, 4);
	return f;
}

/*
 * The bf16 GEMM's operands exactly (GPU_MMQ_BF16): ref[j][r] = the sum
 * of bf16(w) * bf16(x) in double, times scale; x row j as given or, when
 * t is not 0, as the CPU quantizes it for weights of type t
 * (quant_quantize_act, then its values q * d).
 */
static void
bf16_ref(const float *wf, int64_t rows, int64_t ne0, int t, const float *x, int m,
    double scale, double *ref)
{
	int tx = t ? quant_vec_dot_type(t) : 0;
	uint8_t *xq = t ? xmalloc(quant_row_size(tx, ne0)) : NULL;
	float *xh = xmalloc((size_t)ne0 * 4), *wb = xmalloc((size_t)(rows * ne0) * 4);

	for (int64_t i = 0; i < rows * ne0; i++)
		wb[i] = bf16_round(wf[i]);
	for (int j = 0; j < m; j++) {
		if (t == 0)
			memcpy(xh, x + (size_t)j * ne0, (size_t)ne0 * 4);
		else if (quant_quantize_act(t, x + (size_t)j * ne0, xq, ne0) != 0 ||
		    quant_dequantize_row(tx, xq, xh, ne0) != 0)
			die(1, "quant_quantize_act: type %s failed", quant_name(t));
		for (int64_t e = 0; e < ne0; e++)
			xh[e] = bf16_round(xh[e]);
		for (int64_t r = 0; r < rows; r++) {
			double a = 0;
			for (int64_t e = 0; e < ne0; e++)
				a += (double)wb[r * ne0 + e] * xh[e];
			ref[j * rows + r] = a * scale;
		}
	}
	free(xq), free(xh), free(wb);
}

/* gpu_matvec (m rows) or gpu_matmul (m > 16) against dot_ref; for m > 16
 * and quantized weights also gpu_matmul on bf16 operands (GPU_MMQ_BF16)
 * against bf16_ref. */
static void
check_product(struct kc *k, struct wset *s, int m, int with_scale)
{
	int64_t ny = (int64_t)m * s->rows;
	float *x = frand(k, m * s->ne0, -1, 1), *y = xmalloc((size_t)ny * 4);
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	float sc = 0.75f;
	float *dx = dput(k, x, (size_t)m * s->ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	float *ds = with_scale ? dput(k, &sc, 4) : NULL;
	char name[64], shape[64];

	if (m <= GPU_MATVEC_MAX_ROWS)
		gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx, m, dy, ds));
	else
		gchk(k, gpu_matmul(k->g, s->t, s->dw, s->rows, s->ne0, dx, m, dy, ds));
	dget(k, y, dy, (size_t)ny * 4);
	brk(k, y, ny);
	dot_ref(s->wf, x, s->rows, s->ne0, m, with_scale ? sc : 1.0, ref, mag);
	snprintf(name, sizeof name, "%s %s%s", m <= GPU_MATVEC_MAX_ROWS ? "matvec" : "matmul",
	    quant_name(s->t), with_scale ? "*s" : "");
	snprintf(shape, sizeof shape, "%lldx%lld m=%d", (long long)s->rows, (long long)s->ne0, m);
	close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	if (m > GPU_MATVEC_MAX_ROWS && !float_type(s->t)) {	/* quantized: bf16 operands */
		gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_BF16));
		gchk(k, gpu_matmul(k->g, s->t, s->dw, s->rows, s->ne0, dx, m, dy, ds));
		gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
		dget(k, y, dy, (size_t)ny * 4);
		brk(k, y, ny);
		bf16_ref(s->wf, s->rows, s->ne0, 0, x, m, with_scale ? sc : 1.0, ref);
		snprintf(name, sizeof name, "matmul %s%s bf16", quant_name(s->t),
		    with_scale ? "*s" : "");
		close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	}
	free(x), free(y), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, ds);
}

/* The 16-row product equals 16 one-row products and a 7-row product, bit for bit. */
static void
check_invariance(struct kc *k, struct wset *s)
{
	int M = GPU_MATVEC_MAX_ROWS;
	int64_t ny = (int64_t)M * s->rows;
	float *x = frand(k, M * s->ne0, -1, 1), *ya = xmalloc((size_t)ny * 4), *yb = xmalloc((size_t)ny * 4);
	float *dx = dput(k, x, (size_t)M * s->ne0 * 4);
	float *da = dput(k, NULL, (size_t)ny * 4), *db = dput(k, NULL, (size_t)ny * 4);
	char name[64], shape[64];

	gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx, M, da, NULL));
	for (int j = 0; j < M; j++)
		if (j < 3 || j >= 10)
			gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx + j * s->ne0,
			    1, db + j * s->rows, NULL));
	gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx + 3 * s->ne0, 7,
	    db + 3 * s->rows, NULL));
	dget(k, ya, da, (size_t)ny * 4);
	dget(k, yb, db, (size_t)ny * 4);
	brk(k, yb, ny);
	snprintf(name, sizeof name, "batch-invariant %s", quant_name(s->t));
	snprintf(shape, sizeof shape, "%lldx%lld m=16|1|7", (long long)s->rows, (long long)s->ne0);
	same_bits(k, name, shape, ya, yb, ny);
	/* the other unroll factor gives the same bits */
	gchk(k, gpu_tune(k->g, k->chunk, 3 - k->unroll));
	gchk(k, gpu_matvec(k->g, s->t, s->dw, s->rows, s->ne0, dx, M, db, NULL));
	gchk(k, gpu_tune(k->g, k->chunk, k->unroll));
	dget(k, yb, db, (size_t)ny * 4);
	brk(k, yb, ny);
	snprintf(name, sizeof name, "unroll-invariant %s", quant_name(s->t));
	snprintf(shape, sizeof shape, "%lldx%lld m=16 U=%d|%d", (long long)s->rows,
	    (long long)s->ne0, k->unroll, 3 - k->unroll);
	same_bits(k, name, shape, ya, yb, ny);
	free(x), free(ya), free(yb);
	gpu_free(k->g, dx), gpu_free(k->g, da), gpu_free(k->g, db);
}

/* gpu_dequantize of the whole matrix and gpu_get_rows of a few rows. */
static void
check_dequant(struct kc *k, struct wset *s)
{
	int64_t nel = s->rows * s->ne0;
	int n = 5;
	int32_t ids[5] = { 0, (int32_t)(s->rows - 1), (int32_t)(s->rows / 2), 0, 1 % (int32_t)s->rows };
	float *y = xmalloc((size_t)nel * 4), *dy = dput(k, NULL, (size_t)nel * 4);
	double *ref = xmalloc((size_t)nel * 8);
	int32_t *dids = dput(k, ids, sizeof ids);
	char name[64], shape[64];

	gchk(k, gpu_dequantize(k->g, s->t, s->dw, s->rows, s->ne0, dy));
	dget(k, y, dy, (size_t)nel * 4);
	brk(k, y, nel);
	for (int64_t i = 0; i < nel; i++)
		ref[i] = s->wf[i];
	snprintf(name, sizeof name, "dequantize %s", quant_name(s->t));
	snprintf(shape, sizeof shape, "%lldx%lld", (long long)s->rows, (long long)s->ne0);
	close_to(k, name, shape, y, ref, NULL, nel, 0);
	gchk(k, gpu_get_rows(k->g, s->t, s->dw, s->ne0, dids, n, dy));
	dget(k, y, dy, (size_t)n * s->ne0 * 4);
	brk(k, y, n * s->ne0);
	for (int i = 0; i < n; i++)
		for (int64_t e = 0; e < s->ne0; e++)
			ref[i * s->ne0 + e] = s->wf[ids[i] * s->ne0 + e];
	snprintf(name, sizeof name, "get_rows %s", quant_name(s->t));
	snprintf(shape, sizeof shape, "%dx%lld of %lld", n, (long long)s->ne0, (long long)s->rows);
	close_to(k, name, shape, y, ref, NULL, n * s->ne0, 0);
	free(y), free(ref);
	gpu_free(k->g, dy), gpu_free(k->g, dids);
}

/* A ue4m3 scale byte as the GPU layout holds it (cuda/gpu.h: canonical),
 * and the byte gpu_nvfp4_unpack gives for it: the checker's own reading
 * of gpu.h (the kernels' is cuda/gpu_impl.cuh's gpu_ue4m3c / gpu_ue4m3u),
 * so that a wrong definition there fails here. */
static int
ue4m3_canonical(int x)
{
	return x == 0x7F ? 0 : x & 0x7F;
}

static int
ue4m3_uncanonical(int c)
{
	return c == 0x7F ? 0xFF : c;
}

/*
 * gpu_nvfp4_pack against the GPU layout as gpu.h defines it, made here
 * from ggml's bytes (value v of a block: nibble v % 2 of code byte v / 2;
 * scales canonical), gpu_dequantize of the packed rows against the CPU's
 * dequantization of ggml's (every scale byte 0..255 among the blocks'
 * scales: ggml's zero 0x7F, bit 7 set, 0xFF, subnormals), and
 * gpu_nvfp4_unpack back to ggml's bytes, its scales as canonical bytes
 * of the same values (maxdiff: the bytes that differ).
 */
static void
check_nvfp4_layout(struct kc *k, int64_t rows, int64_t ne0)
{
	int64_t nb = ne0 / 64, nel = rows * ne0;
	size_t n, rb = (size_t)nb * 36;
	uint8_t *w = qrand(k, QUANT_NVFP4, rows, ne0, &n), *ref = xmalloc(n), *got = xmalloc(n);
	float *y = xmalloc((size_t)nel * 4), *wf;
	double *dref = xmalloc((size_t)nel * 8);
	char shape[64];

	for (int64_t i = 0; i < rows * nb * 4; i++) {	/* every scale byte, as far as there are scales */
		int64_t b = i / 4;
		w[(b / nb) * rb + (b % nb) * 36 + i % 4] = (uint8_t)(i % 256);
	}
	wf = qdeq(QUANT_NVFP4, w, rows, ne0);
	void *d = dput(k, w, n);
	float *dy = dput(k, NULL, (size_t)nel * 4);
	memset(ref, 0, n);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t b = 0; b < nb; b++) {
			const uint8_t *blk = w + r * rb + b * 36;
			uint8_t *code = ref + r * rb + b * 32;
			for (int s = 0; s < 4; s++)
				ref[r * rb + nb * 32 + b * 4 + s] = (uint8_t)ue4m3_canonical(blk[s]);
			for (int v = 0; v < 64; v++) {
				int q = blk[4 + 8 * (v / 16) + v % 8];
				code[v / 2] |= (uint8_t)(((v % 16 < 8 ? q : q >> 4) & 0xF) << (4 * (v % 2)));
			}
		}
	snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)ne0);
	for (int dir = 0; dir < 2; dir++) {
		size_t bad = 0;
		gchk(k, dir == 0 ? gpu_nvfp4_pack(k->g, d, rows, ne0) :
		    gpu_nvfp4_unpack(k->g, d, rows, ne0));
		dget(k, got, d, n);
		if (k->brk)
			got[n / 2] ^= 0x10;
		for (int64_t r = 0; dir == 1 && r < rows; r++)	/* ggml's bytes, canonical scales */
			for (int64_t b = 0; b < nb; b++)
				for (int s = 0; s < 4; s++) {
					uint8_t *x = w + r * rb + b * 36 + s;
					*x = (uint8_t)ue4m3_uncanonical(ue4m3_canonical(*x));
				}
		for (size_t i = 0; i < n; i++)
			bad += got[i] != (dir == 0 ? ref : w)[i];
		report(k, dir == 0 ? "nvfp4 pack" : "nvfp4 unpack", shape, (double)bad, bad == 0);
		if (dir == 0) {	/* the packed rows' values: the CPU's of ggml's */
			gchk(k, gpu_dequantize(k->g, QUANT_NVFP4, d, rows, ne0, dy));
			dget(k, y, dy, (size_t)nel * 4);
			brk(k, y, nel);
			for (int64_t i = 0; i < nel; i++)
				dref[i] = wf[i];
			close_to(k, "nvfp4 scales 0..255", shape, y, dref, NULL, nel, 0);
		}
	}
	free(w), free(ref), free(got), free(y), free(wf), free(dref);
	gpu_free(k->g, d), gpu_free(k->g, dy);
}

static void
check_quant(struct kc *k)
{
	static const int64_t shapes[][2] = {
		{ 64, 256 }, { 257, 1024 }, { 1000, 4096 }, { 37, 5120 }, { 45, 320 },
	};
	static const int ms[] = { 1, 3, 16, 40 };

	for (int ti = 0; ti < NTYPES; ti++) {
		int t = mv_types[ti], qk = quant_traits(t)->blck < 32 ? 32 : quant_traits(t)->blck;
		for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
			struct wset s;
			if (shapes[si][1] % qk)
				continue;
			wset_new(k, &s, t, shapes[si][0], shapes[si][1]);
			for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
				if (ms[mi] <= 16 || si == 2)
					check_product(k, &s, ms[mi], 0);
			if (t == QUANT_NVFP4 && si == 1)
				check_product(k, &s, 3, 1);
			if (si == 2)
				check_invariance(k, &s);
			if (si == 1 || (t == QUANT_NVFP4 && si == 4))	/* (NVFP4: rows by words) */
				check_dequant(k, &s);
			wset_free(k, &s);
		}
	}
	check_nvfp4_layout(k, 3, 4096);	/* 192 blocks: every scale byte thrice */
	check_nvfp4_layout(k, 45, 320);
}

/*
 * The CPU's int8 numerics for s's weight on m rows of x: ref[j][r] =
 * quant_vec_dot(w[r], quant_quantize_act(x[j])) * scale, and mag (the
 * tolerance's scale) as dot_ref makes it.
 */
static void
i8_ref(const struct wset *s, const float *x, int m, double scale, double *ref, double *mag)
{
	int t = s->t;
	size_t rb = quant_row_size(t, s->ne0);
	uint8_t *xq = xmalloc(quant_row_size(quant_vec_dot_type(t), s->ne0));

	dot_ref(s->wf, x, s->rows, s->ne0, m, scale, ref, mag);
	for (int j = 0; j < m; j++) {
		if (quant_quantize_act(t, x + (size_t)j * s->ne0, xq, s->ne0) != 0)
			die(1, "quant_quantize_act: type %s failed", quant_name(t));
		for (int64_t r = 0; r < s->rows; r++)
			ref[j * s->rows + r] = (double)quant_vec_dot(t, s->ne0, s->w + r * rb, xq) *
			    scale;
	}
	free(xq);
}

/*
 * gpu_matvec_q8 for n > 16 (the GEMM of cuda/mmq.cu; IQ4_XS's of
 * cuda/mmq_iq4.cu, whose one tensor-core kernel serves mmaf and mma1 too)
 * against the CPU's int8 numerics (quant_quantize_act, quant_vec_dot), by
 * its kernels (mma, its dp4a twin, mma with the scale products by
 * multiplications, the first mma kernel); they give the same bits, and a
 * repeated call too.
 * The bf16 GEMM (GPU_MMQ_BF16) against the exact product of its rounded
 * operands (so within about 2^-8 of the magnitude of the CPU's numerics),
 * and through the weight's bf16 copy (gpu_tune_mirror) its bits again.
 */
static void
check_mmq(struct kc *k, int t, int64_t rows, int64_t ne0, int n, int with_scale)
{
	struct wset s;
	int64_t ny = (int64_t)n * rows;
	float *x = frand(k, n * ne0, -1, 1), sc = 0.75f, *y[6];
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	double *rbf = xmalloc((size_t)ny * 8);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	float *dx = dput(k, x, (size_t)n * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	float *ds = with_scale ? dput(k, &sc, 4) : NULL;
	i8_ref(&s, x, n, with_scale ? sc : 1.0, ref, mag);
	bf16_ref(s.wf, rows, ne0, t, x, n, with_scale ? sc : 1.0, rbf);
	snprintf(shape, sizeof shape, "%lldx%lld m=%d", (long long)rows, (long long)ne0, n);
	for (int i = 0; i < 6; i++) {
		static const int kerns[] = { GPU_MMQ_MMA, GPU_MMQ_MMA, GPU_MMQ_DP4A, GPU_MMQ_MMA1,
		    GPU_MMQ_MMAF, GPU_MMQ_BF16 };
		int kern = kerns[i];
		y[i] = xmalloc((size_t)ny * 4);
		gchk(k, gpu_tune_mmq(k->g, kern));
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, n, dy, ds));
		dget(k, y[i], dy, (size_t)ny * 4);
	}
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	/* y[a] = y[b] bit for bit; each comparison breaks its b side only, and a
	 * side is broken only after its last use as a */
	static const struct { int a, b; const char *what; } same[] = {
		{ 0, 4, "mma=mmaf" }, { 0, 3, "mma=mma1" }, { 1, 2, "mma=dp4a" }, { 0, 1, "repeat" },
	};
	for (size_t c = 0; c < sizeof same / sizeof same[0]; c++) {
		brk(k, y[same[c].b], ny);
		snprintf(name, sizeof name, "mmq %s %s", quant_name(t), same[c].what);
		same_bits(k, name, shape, y[same[c].a], y[same[c].b], ny);
	}
	brk(k, y[0], ny);
	snprintf(name, sizeof name, "mmq %s%s", quant_name(t), with_scale ? "*s" : "");
	close_to(k, name, shape, y[0], ref, mag, ny, 1e-5);
	/* the weight's bf16 copy (gpu_tune_mirror): made by the first call, read by
	 * the second, bf16's bits both times, and there (gpu_mirrors) after each */
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_BF16));
	gchk(k, gpu_tune_mirror(k->g, 1));
	for (int pass = 0; pass < 2; pass++) {
		float *ym = xmalloc((size_t)ny * 4);
		size_t bytes = 0;
		gchk(k, gpu_memset(k->g, dy, 0xFF, (size_t)ny * 4));	/* NaN where nothing writes */
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, n, dy, ds));
		dget(k, ym, dy, (size_t)ny * 4);
		int made = gpu_mirrors(k->g, &bytes) == 1 && bytes == (size_t)(rows * ne0) * 2;
		brk(k, ym, ny);
		snprintf(name, sizeof name, "mmq %s%s bf16 copy%s", quant_name(t),
		    with_scale ? "*s" : "", pass ? " again" : "");
		if (made)
			same_bits(k, name, shape, ym, y[5], ny);
		else
			report(k, name, "(no copy made)", 0, 0);
		free(ym);
	}
	gchk(k, gpu_tune_mirror(k->g, 0));
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	brk(k, y[5], ny);
	snprintf(name, sizeof name, "mmq %s%s bf16", quant_name(t), with_scale ? "*s" : "");
	close_to(k, name, shape, y[5], rbf, mag, ny, 1e-5);
	for (int i = 0; i < 6; i++)
		free(y[i]);
	free(x), free(ref), free(mag), free(rbf);
	gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, ds);
	wset_free(k, &s);
}

/*
 * The K-quant decode products on Q8_K activations (cuda/matvec_qk.cu, by
 * the kernel of `lanes` lanes per super-block) against the CPU's int8
 * numerics (quant_quantize_act, quant_vec_dot) for m input rows, and the
 * m-row product against one-row products (rows 0..2 and 10..15 alone,
 * 3..9 as a 7-row call) bit for bit when m is 16.
 */
static void
check_qk(struct kc *k, int t, int64_t rows, int64_t ne0, int m, int lanes)
{
	struct wset s;
	int64_t ny = (int64_t)m * rows;
	float *x = frand(k, m * ne0, -1, 1), *y = xmalloc((size_t)ny * 4);
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	gchk(k, gpu_tune_qk(k->g, lanes));
	gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, m, dy, NULL));
	dget(k, y, dy, (size_t)ny * 4);
	i8_ref(&s, x, m, 1.0, ref, mag);
	snprintf(shape, sizeof shape, "%lldx%lld m=%d L=%d", (long long)rows, (long long)ne0, m, lanes);
	snprintf(name, sizeof name, "matvec i8 %s", quant_name(t));
	if (m == GPU_MATVEC_MAX_ROWS) {
		float *y1 = xmalloc((size_t)ny * 4), *d1 = dput(k, NULL, (size_t)ny * 4);
		for (int j = 0; j < m; j++)
			if (j < 3 || j >= 10)
				gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + j * ne0, 1,
				    d1 + j * rows, NULL));
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + 3 * ne0, 7, d1 + 3 * rows, NULL));
		dget(k, y1, d1, (size_t)ny * 4);
		brk(k, y1, ny);
		char bn[64], bsh[64];
		snprintf(bn, sizeof bn, "batch-invariant i8 %s", quant_name(t));
		snprintf(bsh, sizeof bsh, "%lldx%lld m=16|1|7 L=%d", (long long)rows, (long long)ne0,
		    lanes);
		same_bits(k, bn, bsh, y, y1, ny);
		free(y1);
		gpu_free(k->g, d1);
	}
	gchk(k, gpu_tune_qk(k->g, 0));
	if (lanes == gpu_qk_lanes(t)) {	/* the default is this type's form */
		float *y0 = xmalloc((size_t)ny * 4);
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, m, dy, NULL));
		dget(k, y0, dy, (size_t)ny * 4);
		brk(k, y0, ny);
		snprintf(name, sizeof name, "matvec i8 %s L=%d=default", quant_name(t), lanes);
		same_bits(k, name, shape, y, y0, ny);
		free(y0);
	}
	brk(k, y, ny);
	close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	free(x), free(y), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

/*
 * x quantized to Q8_K on the device (gpu_quantize_q8k) against
 * quant_quantize_act's bytes: random blocks, an all-zero block, a block
 * whose largest magnitude comes twice with both signs (the first wins),
 * one of large values (x 1000), one of tiny ones (x 1e-30).
 */
static void
check_q8k(struct kc *k, int n, int64_t ne0)
{
	int64_t nel = (int64_t)n * ne0, nblk = nel / 256;
	size_t nb = (size_t)nblk * 292;
	float *x = frand(k, nel, -1, 1);
	uint8_t *cpu = xmalloc(nb), *got = xmalloc(nb);
	char shape[64];
	int64_t ndiff = 0;

	for (int i = 0; i < 256 && nblk > 4; i++) {
		x[256 + i] = 0.0f;		/* block 1: zeros */
		x[512 + i] *= 0.5f;		/* block 2: -0.75 at 5, then 0.75 at 100 */
		x[768 + i] *= 1000.0f;		/* block 3: large */
		x[1024 + i] *= 1e-30f;		/* block 4: tiny */
	}
	if (nblk > 4)
		x[512 + 5] = -0.75f, x[512 + 100] = 0.75f;
	float *dx = dput(k, x, (size_t)nel * 4);
	uint8_t *dq = dput(k, NULL, nb);
	gchk(k, gpu_quantize_q8k(k->g, dx, n, ne0, dq));
	dget(k, got, dq, nb);
	for (int j = 0; j < n; j++)
		if (quant_quantize_act(QUANT_Q4_K, x + (size_t)j * ne0, cpu + (size_t)j * (ne0 / 256) * 292,
		    ne0) != 0)
			die(1, "quant_quantize_act: Q8_K failed");
	if (k->brk)
		got[nb / 2] ^= 1;
	for (size_t i = 0; i < nb; i++)
		ndiff += cpu[i] != got[i];
	snprintf(shape, sizeof shape, "%dx%lld bytes", n, (long long)ne0);
	report(k, "quantize Q8_K", shape, (double)ndiff, ndiff == 0);
	free(x), free(cpu), free(got);
	gpu_free(k->g, dx), gpu_free(k->g, dq);
}

/*
 * One x for weights of mixed types (the first ntyp of ts: x quantized as
 * Q8_0 and as Q8_K when both kinds are there): gpu_matvec_q8_multi and
 * the fused gpu_rmsnorm_matvec_q8_multi against gpu_matvec_q8 of each
 * weight alone (of gpu_rmsnorm's output), bit for bit.  check_qk_multi:
 * Q4_K, Q8_0, Q6_K, Q5_K; ntyp = 1: Q4_K alone (the fused kernel writes no
 * normed row out).  check_iq4_multi: IQ4_XS, Q8_0, IQ4_NL, Q6_K.
 */
static void
check_multi(struct kc *k, int m, int64_t ne0, int ntyp, const int *ts)
{
	static const int64_t rs[4] = { 300, 129, 77, 256 };
	struct wset s[4];
	int t[4];
	const void *dw[4];
	int64_t rows[4], ny = 0, off[4];
	float *x = frand(k, m * ne0, -1, 1), *nw = frand(k, ne0, 0.5f, 1.5f);
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dnw = dput(k, nw, (size_t)ne0 * 4);
	float *dn = dput(k, NULL, (size_t)m * ne0 * 4);
	char shape[64];

	for (int i = 0; i < ntyp; i++) {
		wset_new(k, &s[i], ts[i], rs[i], ne0);
		t[i] = ts[i], dw[i] = s[i].dw, rows[i] = rs[i], off[i] = ny;
		ny += (int64_t)m * rs[i];
	}
	float *da = dput(k, NULL, (size_t)ny * 4), *db = dput(k, NULL, (size_t)ny * 4);
	float *ya = xmalloc((size_t)ny * 4), *yb = xmalloc((size_t)ny * 4);
	float *Y[4];
	snprintf(shape, sizeof shape, "%d types%s m=%d ne0=%lld", ntyp,
	    ts[0] == QUANT_IQ4_XS ? " from IQ4_XS" : "", m, (long long)ne0);
	for (int f = 0; f < 2; f++) {
		const float *xin = f ? dn : dx;
		for (int i = 0; i < ntyp; i++)
			Y[i] = da + off[i];
		if (f) {
			gchk(k, gpu_rmsnorm(k->g, dx, ne0, dnw, dn, ne0, m, (int)ne0, 1e-6f));
			gchk(k, gpu_rmsnorm_matvec_q8_multi(k->g, dx, dnw, 1e-6f, ntyp, t, dw, rows,
			    ne0, m, Y, NULL));
		} else
			gchk(k, gpu_matvec_q8_multi(k->g, ntyp, t, dw, rows, ne0, dx, m, Y, NULL));
		for (int i = 0; i < ntyp; i++)
			gchk(k, gpu_matvec_q8(k->g, t[i], dw[i], rows[i], ne0, xin, m, db + off[i], NULL));
		dget(k, ya, da, (size_t)ny * 4);
		dget(k, yb, db, (size_t)ny * 4);
		brk(k, ya, ny);
		same_bits(k, f ? "rmsnorm_matvec_q8 mixed=each" : "matvec_q8_multi mixed=each",
		    shape, ya, yb, ny);
	}
	for (int i = 0; i < ntyp; i++)
		wset_free(k, &s[i]);
	free(x), free(nw), free(ya), free(yb);
	gpu_free(k->g, dx), gpu_free(k->g, dnw), gpu_free(k->g, dn);
	gpu_free(k->g, da), gpu_free(k->g, db);
}

static void
check_qk_multi(struct kc *k, int m, int64_t ne0, int ntyp)
{
	static const int ts[4] = { QUANT_Q4_K, QUANT_Q8_0, QUANT_Q6_K, QUANT_Q5_K };

	check_multi(k, m, ne0, ntyp, ts);
}

/*
 * Weights of one K-quant type that follow each other share a launch of
 * k_mvk (mv8_set): three Q4_K then a Q6_K, two Q5_K then two Q6_K, each
 * against its own call bit for bit (check_multi, plain and fused with the
 * norm), and at m rows the launches counted ("matvec_q8k sets", the count
 * as its maxdiff): 2, one a run of a type.  L: the lanes (gpu_tune_qk; 0
 * the default).
 */
static void
check_qk_set(struct kc *k, int m, int64_t ne0, int L)
{
	static const int ta[4] = { QUANT_Q4_K, QUANT_Q4_K, QUANT_Q4_K, QUANT_Q6_K };
	static const int tb[4] = { QUANT_Q5_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q6_K };
	static const int64_t rs[4] = { 300, 129, 77, 256 };

	gchk(k, gpu_tune_qk(k->g, L));
	for (int s = 0; s < 2; s++) {
		const int *ts = s ? tb : ta;
		struct wset w[4];
		const void *dw[4];
		int t[4];
		int64_t ny = 0;
		float *x = frand(k, m * ne0, -1, 1), *dx = dput(k, x, (size_t)m * ne0 * 4), *Y[4];
		char shape[96];

		check_multi(k, m, ne0, 4, ts);
		for (int i = 0; i < 4; i++) {
			wset_new(k, &w[i], ts[i], rs[i], ne0);
			t[i] = ts[i], dw[i] = w[i].dw, ny += (int64_t)m * rs[i];
		}
		float *dy = dput(k, NULL, (size_t)ny * 4);
		for (int i = 0, o = 0; i < 4; o += m * (int)rs[i], i++)
			Y[i] = dy + o;
		gpu_prof_reset(k->g);
		gchk(k, gpu_prof_begin(k->g, 0));
		gchk(k, gpu_matvec_q8_multi(k->g, 4, t, dw, rs, ne0, dx, m, Y, NULL));
		gchk(k, gpu_prof_end(k->g));
		unsigned long n = prof_launches(k, "matvec_q8k");
		gpu_prof_reset(k->g);
		snprintf(shape, sizeof shape, "%s x%d, %s x%d m=%d ne0=%lld L=%d",
		    quant_name(ts[0]), s ? 2 : 3, quant_name(ts[3]), s ? 2 : 1, m, (long long)ne0, L);
		report(k, "matvec_q8k sets", shape, (double)n, n == 2 && !k->brk);
		for (int i = 0; i < 4; i++)
			wset_free(k, &w[i]);
		free(x);
		gpu_free(k->g, dx), gpu_free(k->g, dy);
	}
	gchk(k, gpu_tune_qk(k->g, 0));
}

static void
check_q45_multi(struct kc *k, int m, int64_t ne0, int ntyp)
{
	static const int ts[4] = { QUANT_Q4_0, QUANT_Q8_0, QUANT_Q5_0, QUANT_Q6_K };

	check_multi(k, m, ne0, ntyp, ts);
}

static void
check_iq4_multi(struct kc *k, int m, int64_t ne0, int ntyp)
{
	static const int ts[4] = { QUANT_IQ4_XS, QUANT_Q8_0, QUANT_IQ4_NL, QUANT_Q6_K };

	check_multi(k, m, ne0, ntyp, ts);
}

/*
 * The int8 products of Q8_0, NVFP4, Q4_1 and Q5_1 (n <= 16) with the
 * weights read in place and staged through shared memory
 * (gpu_tune_mv8) against the default choice, bit for bit.
 */
static void
check_mv8_staged(struct kc *k, int t, int64_t rows, int64_t ne0, int m)
{
	struct wset s;
	int64_t ny = (int64_t)m * rows;
	float *x = frand(k, m * ne0, -1, 1), *y[3];
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	for (int i = 0; i < 3; i++) {	/* GPU_MV8_AUTO, _PLACE, _STAGED */
		y[i] = xmalloc((size_t)ny * 4);
		gchk(k, gpu_tune_mv8(k->g, i));
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, m, dy, NULL));
		dget(k, y[i], dy, (size_t)ny * 4);
	}
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
	snprintf(shape, sizeof shape, "%lldx%lld m=%d", (long long)rows, (long long)ne0, m);
	brk(k, y[1], ny);
	snprintf(name, sizeof name, "matvec i8 %s place=default", quant_name(t));
	same_bits(k, name, shape, y[0], y[1], ny);
	brk(k, y[2], ny);
	snprintf(name, sizeof name, "matvec i8 %s staged=default", quant_name(t));
	same_bits(k, name, shape, y[0], y[2], ny);
	free(x), free(y[0]), free(y[1]), free(y[2]);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

/*
 * Two lanes a block: Q8_0 by GPU_MV8_LANE2, NVFP4, Q4_0 and Q5_0 always
 * (how: GPU_MV8_AUTO; NVFP4's 16 rows decode by gpu_fp4x8, one by
 * mv8_fp4pn): against the CPU's int8 numerics within 1e-5, and 16 rows
 * against one-row calls bit for bit.
 */
static void
check_mv8_lanes(struct kc *k, int t, int how, int64_t rows, int64_t ne0)
{
	struct wset s;
	int m = GPU_MATVEC_MAX_ROWS;
	int64_t ny = (int64_t)m * rows;
	float *x = frand(k, m * ne0, -1, 1), *y = xmalloc((size_t)ny * 4);
	float *y1 = xmalloc((size_t)ny * 4);
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	const char *ln = "lane2";
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	gchk(k, gpu_tune_mv8(k->g, how));
	gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, m, dy, NULL));
	dget(k, y, dy, (size_t)ny * 4);
	for (int j = 0; j < m; j++)
		gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + j * ne0, 1, dy + j * rows, NULL));
	dget(k, y1, dy, (size_t)ny * 4);
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
	i8_ref(&s, x, m, 1.0, ref, mag);
	snprintf(shape, sizeof shape, "%lldx%lld m=16|1", (long long)rows, (long long)ne0);
	brk(k, y1, ny);
	snprintf(name, sizeof name, "batch-invariant i8 %s %s", quant_name(t), ln);
	same_bits(k, name, shape, y, y1, ny);
	brk(k, y, ny);
	snprintf(name, sizeof name, "matvec i8 %s %s", quant_name(t), ln);
	close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	free(x), free(y), free(y1), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

/*
 * y of the m input rows at dx by gpu_matvec_q8 under the int8 product form
 * how: one call under GPU_MV8_TC (with the GEMM off: past 16 rows one
 * launch of k_mv8t), another form (GPU_MV8_PLACE: k_mv8 alone) as calls of
 * at most 16 rows (past 16: two launches, as the decode step's groups).
 */
static void
mv8_form(struct kc *k, int how, int t, const void *dw, int64_t rows, int64_t ne0,
    const float *dx, int m, float *dy, float *y)
{
	gchk(k, gpu_tune_mv8(k->g, how));
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_OFF));
	if (how == GPU_MV8_TC)
		gchk(k, gpu_matvec_q8(k->g, t, dw, rows, ne0, dx, m, dy, NULL));
	else
		for (int j = 0; j < m; j += GPU_MATVEC_MAX_ROWS)
			gchk(k, gpu_matvec_q8(k->g, t, dw, rows, ne0, dx + (size_t)j * ne0,
			    m - j < GPU_MATVEC_MAX_ROWS ? m - j : GPU_MATVEC_MAX_ROWS,
			    dy + (size_t)j * rows, NULL));
	dget(k, y, dy, (size_t)m * rows * 4);
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
}

/*
 * The tensor-core form (GPU_MV8_TC, cuda/matvec_q8tc.cuh) of Q8_0, NVFP4,
 * Q4_0 and Q5_0 against k_mv8 (GPU_MV8_PLACE: the default's kernel below
 * 12 rows) bit for bit, m = 1, 2, 3, 7, 8, 9, 15,
 * 16 and 17..32 (the default in launches of 16 and the rest), the weight
 * at off bytes past an aligned address (0: 16-byte aligned rows where the
 * row bytes allow it; Q8_0, Q4_0, Q5_0 2, NVFP4 4: copied by words; a few m).
 */
static void
check_mv8_tc(struct kc *k, int t, int64_t rows, int64_t ne0, int off)
{
	static const int ms[] = { 1, 2, 3, 7, 8, 9, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
	    26, 27, 28, 29, 30, 31, 32 };
	static const int mo[] = { 1, 9, 16, 17, 32 };
	enum { M = 32 };
	struct wset s;
	size_t nw = quant_row_size(t, ne0) * (size_t)rows;
	float *x = frand(k, (int64_t)M * ne0, -1, 1), *ya = xmalloc((size_t)M * rows * 4);
	float *yb = xmalloc((size_t)M * rows * 4);
	float *dx = dput(k, x, (size_t)M * ne0 * 4), *dy = dput(k, NULL, (size_t)M * rows * 4);
	uint8_t *dbuf = NULL;
	const void *dw;
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	dw = s.dw;
	if (off) {	/* the same bytes (NVFP4: packed) at an offset */
		dbuf = dput(k, NULL, nw + 16);
		gchk(k, gpu_copy(k->g, dbuf + off, s.dw, nw));
		dw = dbuf + off;
	}
	snprintf(name, sizeof name, "matvec i8 %s tc=default", quant_name(t));
	for (size_t i = 0; i < (off ? sizeof mo / sizeof mo[0] : sizeof ms / sizeof ms[0]); i++) {
		int m = off ? mo[i] : ms[i];
		mv8_form(k, GPU_MV8_PLACE, t, dw, rows, ne0, dx, m, dy, ya);
		mv8_form(k, GPU_MV8_TC, t, dw, rows, ne0, dx, m, dy, yb);
		snprintf(shape, sizeof shape, "%lldx%lld%s%.0d m=%d", (long long)rows,
		    (long long)ne0, off ? " +" : "", off, m);
		brk(k, yb, (int64_t)m * rows);
		same_bits(k, name, shape, ya, yb, (int64_t)m * rows);
	}
	free(x), free(ya), free(yb);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	if (dbuf != NULL)
		gpu_free(k->g, dbuf);
	wset_free(k, &s);
}

/*
 * GPU_MV8_TC on a set of three weights of type t in one call
 * (gpu_matvec_q8_multi: one launch of k_mv8t for m <= 32 with the GEMM
 * off), each with its per-tensor scale, against k_mv8 (GPU_MV8_PLACE, 16
 * rows a launch) bit for bit.
 */
static void
check_mv8_tc_set(struct kc *k, int t, int64_t ne0, int m)
{
	static const int64_t rs[3] = { 300, 129, 77 };
	struct wset s[3];
	int ts[3] = { t, t, t };
	const void *dw[3];
	const float *dsc[3];
	float *Y[3], sc[3] = { 0.37f, 1.0f, 2.5f };
	int64_t ny = 0, off[3];
	float *x = frand(k, (int64_t)m * ne0, -1, 1), *dx = dput(k, x, (size_t)m * ne0 * 4);
	float *dscale = dput(k, sc, sizeof sc);
	char name[64], shape[64];

	for (int i = 0; i < 3; i++) {
		wset_new(k, &s[i], t, rs[i], ne0);
		dw[i] = s[i].dw, dsc[i] = dscale + i, off[i] = ny;
		ny += (int64_t)m * rs[i];
	}
	float *dy = dput(k, NULL, (size_t)ny * 4), *y[2];
	for (int f = 0; f < 2; f++) {
		y[f] = xmalloc((size_t)ny * 4);
		for (int i = 0; i < 3; i++)
			Y[i] = dy + off[i];
		gchk(k, gpu_tune_mv8(k->g, f ? GPU_MV8_TC : GPU_MV8_PLACE));
		gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_OFF));
		gchk(k, gpu_matvec_q8_multi(k->g, 3, ts, dw, rs, ne0, dx, m, Y, dsc));
		dget(k, y[f], dy, (size_t)ny * 4);
	}
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
	snprintf(shape, sizeof shape, "3 weights scaled m=%d ne0=%lld", m, (long long)ne0);
	snprintf(name, sizeof name, "matvec_q8_multi %s tc", quant_name(t));
	brk(k, y[1], ny);
	same_bits(k, name, shape, y[0], y[1], ny);
	for (int i = 0; i < 3; i++)
		wset_free(k, &s[i]);
	free(x), free(y[0]), free(y[1]);
	gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, dscale);
}

/*
 * y of the m input rows at dx by gpu_matvec_q8 for K-quant weights at the
 * step rows of the CUDA backend (32) under the tensor-core form how
 * (gpu_tune_qkt) and lanes L: GPU_QKT_OFF k_mvk in launches of 16,
 * GPU_QKT_ON k_mvkt in one launch, GPU_QKT_AUTO k_mvk below 12 rows and
 * k_mvkt from there, in one launch.
 */
static void
qk_form(struct kc *k, int how, int lanes, int t, const void *dw, int64_t rows, int64_t ne0,
    const float *dx, int m, float *dy, float *y)
{
	gchk(k, gpu_tune_step_rows(k->g, GPU_STEP_ROWS_MAX));
	gchk(k, gpu_tune_qk(k->g, lanes));
	gchk(k, gpu_tune_qkt(k->g, how));
	gchk(k, gpu_matvec_q8(k->g, t, dw, rows, ne0, dx, m, dy, NULL));
	dget(k, y, dy, (size_t)m * rows * 4);
	gchk(k, gpu_tune_qkt(k->g, GPU_QKT_OFF));
	gchk(k, gpu_tune_qk(k->g, 0));
	gchk(k, gpu_tune_step_rows(k->g, GPU_MATVEC_MAX_ROWS));
}

/*
 * The tensor-core form of the K-quant and IQ4_XS decode products
 * (GPU_QKT_ON, cuda/matvec_qkt.cuh) against k_mvk (IQ4_XS: matvec_iq4.cu's
 * k_iq4; GPU_QKT_OFF, launches of 16) bit for bit at lanes L (4 and 8:
 * k_mvkt reproduces each; IQ4_XS 8, its one form), m = 1, 2, 3, 7, 8, 9,
 * 15, 16, 17, 24, 31, 32; GPU_QKT_AUTO at 11, 12 and 20 rows the same
 * bits; at 1, 9 and 32 rows within 1e-5 of the CPU's int8 products.
 */
static void
check_qk_tc(struct kc *k, int t, int64_t rows, int64_t ne0, int lanes)
{
	static const int ms[] = { 1, 2, 3, 7, 8, 9, 11, 12, 15, 16, 17, 20, 24, 31, 32 };
	enum { M = 32 };
	struct wset s;
	float *x = frand(k, (int64_t)M * ne0, -1, 1), *ya = xmalloc((size_t)M * rows * 4);
	float *yb = xmalloc((size_t)M * rows * 4);
	float *dx = dput(k, x, (size_t)M * ne0 * 4), *dy = dput(k, NULL, (size_t)M * rows * 4);
	double *ref = xmalloc((size_t)M * rows * 8), *mag = xmalloc((size_t)M * rows * 8);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
		int m = ms[i], au = m == 11 || m == 12 || m == 20;
		int64_t ny = (int64_t)m * rows;
		qk_form(k, GPU_QKT_OFF, lanes, t, s.dw, rows, ne0, dx, m, dy, ya);
		qk_form(k, au ? GPU_QKT_AUTO : GPU_QKT_ON, lanes, t, s.dw, rows, ne0, dx, m, dy, yb);
		snprintf(name, sizeof name, "matvec i8 %s tc%s=mvk", quant_name(t), au ? " auto" : "");
		snprintf(shape, sizeof shape, "%lldx%lld m=%d L=%d", (long long)rows, (long long)ne0,
		    m, lanes);
		brk(k, yb, ny);
		same_bits(k, name, shape, ya, yb, ny);
		if (m == 1 || m == 9 || m == 32) {
			qk_form(k, GPU_QKT_ON, lanes, t, s.dw, rows, ne0, dx, m, dy, yb);
			i8_ref(&s, x, m, 1.0, ref, mag);
			snprintf(name, sizeof name, "matvec i8 %s tc", quant_name(t));
			brk(k, yb, ny);
			close_to(k, name, shape, yb, ref, mag, ny, 1e-5);
		}
	}
	free(x), free(ya), free(yb), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

static void
check_qk_tc_all(struct kc *k)
{
	/* rows of 1, 2, 8 and 20 super-blocks (Q6_K also 3: rows 2-byte aligned,
	 * an odd count; IQ4_XS also 3: rows 8-byte aligned); 300 rows: a part
	 * tile of 12; IQ4_XS at 8 lanes alone (its one form) */
	static const int64_t sh[][2] = { { 300, 256 }, { 45, 512 }, { 300, 2048 }, { 70, 5120 },
	    { 57, 768 } };
	static const int ts[] = { QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_IQ4_XS };

	for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
		int odd = ts[ti] == QUANT_Q6_K || ts[ti] == QUANT_IQ4_XS;	/* (768: odd rows) */
		for (size_t si = 0; si < sizeof sh / sizeof sh[0] - !odd; si++)
			for (int lanes = ts[ti] == QUANT_IQ4_XS ? 8 : 4; lanes <= 8; lanes += 4)
				check_qk_tc(k, ts[ti], sh[si][0], sh[si][1], lanes);
	}
}

static void
check_mv8_tc_all(struct kc *k)
{
	/* Q8_0: 128 blocks, 25 (odd rows 2-byte aligned), 10; NVFP4:
	 * check_mv8_lanes' shapes; then weights off an aligned address */
	static const int64_t q8[][2] = { { 300, 4096 }, { 257, 800 }, { 45, 320 } };
	static const int64_t nv[][2] = { { 300, 4096 }, { 257, 768 }, { 45, 320 }, { 70, 448 } };

	for (size_t i = 0; i < sizeof q8 / sizeof q8[0]; i++)
		check_mv8_tc(k, QUANT_Q8_0, q8[i][0], q8[i][1], 0);
	for (size_t i = 0; i < sizeof nv / sizeof nv[0]; i++)
		check_mv8_tc(k, QUANT_NVFP4, nv[i][0], nv[i][1], 0);
	check_mv8_tc(k, QUANT_Q8_0, 300, 4096, 2);
	check_mv8_tc(k, QUANT_NVFP4, 300, 4096, 4);
	for (int m = 1; m <= 32; m += 10) {	/* 1, 11, 21, 31 */
		check_mv8_tc_set(k, QUANT_Q8_0, 4096, m);
		check_mv8_tc_set(k, QUANT_NVFP4, 4096, m);
	}
	/* Q4_0 and Q5_0: Q8_0's shapes (rows 2 mod 4 bytes at 25 blocks), the
	 * 26B-A4B's rows of 704 (22 blocks: a chunk and a tail), off by 2; past
	 * 16 rows gpu_matvec_q8 takes them up to the step rows only (as the
	 * K-quants: the backend opens at 32) */
	gchk(k, gpu_tune_step_rows(k->g, GPU_STEP_ROWS_MAX));
	for (int t = QUANT_Q4_0; t <= QUANT_Q5_0; t += QUANT_Q5_0 - QUANT_Q4_0) {
		for (size_t i = 0; i < sizeof q8 / sizeof q8[0]; i++)
			check_mv8_tc(k, t, q8[i][0], q8[i][1], 0);
		check_mv8_tc(k, t, 300, 704, 0);
		check_mv8_tc(k, t, 300, 4096, 2);
		for (int m = 1; m <= 32; m += 10)
			check_mv8_tc_set(k, t, 4096, m);
	}
	gchk(k, gpu_tune_step_rows(k->g, GPU_MATVEC_MAX_ROWS));
}

/*
 * The IQ4 products on int8 activations (cuda/matvec_iq4.cu: IQ4_XS on Q8_K
 * rows, IQ4_NL on Q8_0 rows) against the CPU's int8 numerics
 * (quant_quantize_act, quant_vec_dot) within 1e-5 for m input rows (past
 * 16: IQ4_NL's launches of 16, IQ4_XS's under GPU_MMQ_OFF), and the m-row
 * product against one-row products bit for bit: at m = 16 rows 0..2 and
 * 10..15 alone and 3..9 as one 7-row call (as check_qk), past 16 every row
 * alone.
 */
static void
check_iq4(struct kc *k, int t, int64_t rows, int64_t ne0, int m)
{
	struct wset s;
	int64_t ny = (int64_t)m * rows;
	float *x = frand(k, m * ne0, -1, 1), *y = xmalloc((size_t)ny * 4);
	double *ref = xmalloc((size_t)ny * 8), *mag = xmalloc((size_t)ny * 8);
	char name[64], shape[64];

	wset_new(k, &s, t, rows, ne0);
	float *dx = dput(k, x, (size_t)m * ne0 * 4), *dy = dput(k, NULL, (size_t)ny * 4);
	gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx, m, dy, NULL));
	dget(k, y, dy, (size_t)ny * 4);
	i8_ref(&s, x, m, 1.0, ref, mag);
	snprintf(shape, sizeof shape, "%lldx%lld m=%d", (long long)rows, (long long)ne0, m);
	if (m >= GPU_MATVEC_MAX_ROWS) {
		float *y1 = xmalloc((size_t)ny * 4), *d1 = dput(k, NULL, (size_t)ny * 4);
		for (int j = 0; j < m; j++)
			if (m > GPU_MATVEC_MAX_ROWS || j < 3 || j >= 10)
				gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + j * ne0, 1,
				    d1 + j * rows, NULL));
		if (m == GPU_MATVEC_MAX_ROWS)
			gchk(k, gpu_matvec_q8(k->g, t, s.dw, rows, ne0, dx + 3 * ne0, 7, d1 + 3 * rows,
			    NULL));
		dget(k, y1, d1, (size_t)ny * 4);
		brk(k, y1, ny);
		char bn[64], bsh[64];
		snprintf(bn, sizeof bn, "batch-invariant i8 %s", quant_name(t));
		if (m == GPU_MATVEC_MAX_ROWS)
			snprintf(bsh, sizeof bsh, "%lldx%lld m=16|1|7", (long long)rows, (long long)ne0);
		else
			snprintf(bsh, sizeof bsh, "%lldx%lld m=%d|1", (long long)rows, (long long)ne0, m);
		same_bits(k, bn, bsh, y, y1, ny);
		free(y1);
		gpu_free(k->g, d1);
	}
	brk(k, y, ny);
	snprintf(name, sizeof name, "matvec i8 %s", quant_name(t));
	close_to(k, name, shape, y, ref, mag, ny, 1e-5);
	free(x), free(y), free(ref), free(mag);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
	wset_free(k, &s);
}

static void
check_iq4_all(struct kc *k)
{
	/* IQ4_XS: nb = 1 (one group of a warp busy), 3 (odd: the second block of
	 * a pair missing), 4, 5 (Step-3.5's expert rows of 1280), 16, 20, 44
	 * (its dense FFN's 11264), rows past whole 8-warp CTAs, a wide head
	 * scaled down (as check_qk_all); IQ4_NL: rows of one block, of 12 (384:
	 * what model A's rows fall back to), of 129 (rows 2 mod 4 bytes: the
	 * loads from 2 bytes before a block), and prompts (launches of 16) */
	static const int64_t xs[][3] = {
		{ 64, 256, 1 }, { 257, 768, 3 }, { 37, 1024, 2 }, { 1000, 4096, 1 },
		{ 1000, 4096, 16 }, { 45, 5120, 5 }, { 129, 11264, 4 }, { 4096, 1280, 1 },
		{ 257, 768, 16 }, { 24832, 2048, 1 }, { 24832, 2048, 4 },
	};
	static const int64_t nl[][3] = {
		{ 64, 32, 1 }, { 257, 384, 3 }, { 1000, 4096, 1 }, { 1000, 4096, 16 },
		{ 45, 4128, 16 }, { 300, 384, 7 }, { 37, 1024, 40 }, { 70, 352, 17 },
	};

	for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
		check_iq4(k, QUANT_IQ4_XS, xs[i][0], xs[i][1], (int)xs[i][2]);
	for (int m = 1; m <= GPU_MATVEC_MAX_ROWS; m++)	/* every row count of a decode step */
		check_iq4(k, QUANT_IQ4_XS, 300, 1280, m);
	for (size_t i = 0; i < sizeof nl / sizeof nl[0]; i++)
		check_iq4(k, QUANT_IQ4_NL, nl[i][0], nl[i][1], (int)nl[i][2]);
	/* IQ4_XS prompts with the GEMM off: the decode kernel 16 rows a launch */
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_OFF));
	check_iq4(k, QUANT_IQ4_XS, 257, 768, 40);
	gchk(k, gpu_tune_mmq(k->g, GPU_MMQ_MMA));
	/* one x for IQ4_XS (Q8_K), Q8_0 and IQ4_NL (Q8_0), Q6_K: plain and fused with the norm */
	check_iq4_multi(k, 1, 1024, 4);
	check_iq4_multi(k, 5, 4096, 4);
	check_iq4_multi(k, 3, 4096, 1);
	check_iq4_multi(k, 2, 5120, 3);
	check_iq4_multi(k, 1, 12288, 4);
}

static void
check_qk_all(struct kc *k)
{
	/* nb = 1 (one group of a warp busy), 3 (odd: Q6_K blocks 2-byte
	 * aligned), 4, 16, 20 (past the 8-block step), rows past whole
	 * 8-warp CTAs, a wide head scaled down (248320x4096 / 10 x 2) */
	static const int64_t sh[][3] = {
		{ 64, 256, 1 }, { 257, 768, 3 }, { 37, 1024, 2 }, { 1000, 4096, 1 },
		{ 1000, 4096, 16 }, { 45, 5120, 5 }, { 300, 2048, 8 }, { 24832, 2048, 1 },
		{ 24832, 2048, 4 },
	};
	static const int ts[] = { QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K };

	check_q8k(k, 3, 2048);
	check_q8k(k, 1, 256);
	for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
		for (size_t si = 0; si < sizeof sh / sizeof sh[0]; si++)
			check_qk(k, ts[ti], sh[si][0], sh[si][1], (int)sh[si][2], gpu_qk_lanes(ts[ti]));
		/* the other kernel (the bench's alternative) on a few shapes */
		for (size_t si = 1; si < 5; si++)
			check_qk(k, ts[ti], sh[si][0], sh[si][1], (int)sh[si][2],
			    12 - gpu_qk_lanes(ts[ti]));
	}
	check_qk_multi(k, 1, 1024, 4);
	check_qk_multi(k, 5, 4096, 4);
	/* the norm's geometries: 1024 threads, 2 and 4 float4s a thread, rows past shared memory */
	check_qk_multi(k, 3, 4096, 1);
	check_qk_multi(k, 2, 5120, 4);
	check_qk_multi(k, 2, 5120, 1);
	check_qk_multi(k, 1, 12288, 4);
	check_qk_multi(k, 1, 12288, 1);
	check_qk_set(k, 1, 4096, 0);	/* decode */
	check_qk_set(k, 4, 2816, 0);	/* a K=3 verify, 26B-A4B's rows */
	check_qk_set(k, 16, 2048, 8);	/* the most k_mvk takes, the other lanes */
	check_qk_set(k, 3, 4096, 4);
	/* rows of 64 and 128 weight blocks (staged: 32 a lane step); m 1, 3, 16
	 * (NVFP4 has one form) */
	static const int t8[] = { QUANT_Q8_0, QUANT_Q4_1, QUANT_Q5_1 };
	for (size_t ti = 0; ti < sizeof t8 / sizeof t8[0]; ti++) {
		check_mv8_staged(k, t8[ti], 300, 4096, 1);
		check_mv8_staged(k, t8[ti], 257, 8192, 3);
		check_mv8_staged(k, t8[ti], 45, 4096, 16);
	}
	/* NVFP4: codes by 8-byte loads (rows of 64 blocks, four whole chunks of
	 * 64 sub-blocks; 12: a part chunk, lanes past the row idle) and by
	 * words (5 and 7 blocks: rows 4-byte aligned, part chunks) */
	check_mv8_lanes(k, QUANT_NVFP4, GPU_MV8_AUTO, 300, 4096);
	check_mv8_lanes(k, QUANT_NVFP4, GPU_MV8_AUTO, 257, 768);
	check_mv8_lanes(k, QUANT_NVFP4, GPU_MV8_AUTO, 45, 320);
	check_mv8_lanes(k, QUANT_NVFP4, GPU_MV8_AUTO, 70, 448);
	check_mv8_lanes(k, QUANT_Q8_0, GPU_MV8_LANE2, 300, 4096);
	check_mv8_lanes(k, QUANT_Q8_0, GPU_MV8_LANE2, 257, 800);	/* 25 blocks: odd rows 2-byte aligned */
	/* Q4_0 and Q5_0 (two lanes a block, their one form): rows of 128 blocks,
	 * 25 (2 mod 4 bytes), 22 (the 26B-A4B's down experts' 704), 1; one x for
	 * them with Q8_0 and Q6_K (Q8_0 and Q8_K blocks), plain and fused */
	for (int t = QUANT_Q4_0; t <= QUANT_Q5_0; t += QUANT_Q5_0 - QUANT_Q4_0) {
		check_mv8_lanes(k, t, GPU_MV8_AUTO, 300, 4096);
		check_mv8_lanes(k, t, GPU_MV8_AUTO, 257, 800);
		check_mv8_lanes(k, t, GPU_MV8_AUTO, 2816, 704);
		check_mv8_lanes(k, t, GPU_MV8_AUTO, 64, 32);
	}
	check_q45_multi(k, 3, 704, 3);
	check_q45_multi(k, 4, 2048, 4);
	check_q45_multi(k, 16, 4096, 2);
	check_mv8_tc_all(k);
	check_qk_tc_all(k);
}

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

static void
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
}

/* --- fp32 ops against double references ---------------------------------- */

static double
silu_d(double x)
{
	return x / (1.0 + exp(-x));
}

/* mode 0 plain (rows ld apart: the q half of q+gate rows), 1 no weight, 2 gated */
static void
check_rmsnorm(struct kc *k, int rows, int d, int ld, int mode)
{
	float eps = 1e-6f;
	float *x = frand(k, (int64_t)rows * ld, -2, 2), *w = frand(k, d, 0.5f, 1.5f);
	float *z = frand(k, (int64_t)rows * d, -4, 4), *y = xmalloc((size_t)rows * d * 4);
	double *ref = xmalloc((size_t)rows * d * 8);
	float *dx = dput(k, x, (size_t)rows * ld * 4), *dw = dput(k, w, (size_t)d * 4);
	float *dz = dput(k, z, (size_t)rows * d * 4), *dy = dput(k, NULL, (size_t)rows * d * 4);
	char shape[64];

	if (mode == 2)
		gchk(k, gpu_rmsnorm_gated(k->g, dx, dz, dw, dy, rows, d, eps));
	else
		gchk(k, gpu_rmsnorm(k->g, dx, ld, mode ? NULL : dw, dy, d, rows, d, eps));
	dget(k, y, dy, (size_t)rows * d * 4);
	brk(k, y, (int64_t)rows * d);
	for (int r = 0; r < rows; r++) {
		double s = 0;
		for (int i = 0; i < d; i++)
			s += (double)x[r * ld + i] * x[r * ld + i];
		double sc = 1.0 / sqrt(s / d + eps);
		for (int i = 0; i < d; i++) {
			double v = x[r * ld + i] * sc * (mode == 1 ? 1.0 : w[i]);
			ref[r * d + i] = mode == 2 ? v * silu_d(z[r * d + i]) : v;
		}
	}
	snprintf(shape, sizeof shape, "%dx%d ld=%d", rows, d, ld);
	close_to(k, mode == 2 ? "rmsnorm gated" : mode ? "rmsnorm noweight" : "rmsnorm", shape,
	    y, ref, NULL, (int64_t)rows * d, 2e-6);
	free(x), free(w), free(z), free(y), free(ref);
	gpu_free(k->g, dx), gpu_free(k->g, dw), gpu_free(k->g, dz), gpu_free(k->g, dy);
}

static void
check_l2norm(struct kc *k, int rows, int d)
{
	float eps = 1e-6f, *x = frand(k, (int64_t)rows * d, -1, 1), *y = xmalloc((size_t)rows * d * 4);
	double *ref = xmalloc((size_t)rows * d * 8);
	float *dx = dput(k, x, (size_t)rows * d * 4), *dy = dput(k, NULL, (size_t)rows * d * 4);
	char shape[64];

	for (int i = 0; i < d; i++)
		x[i] = 0.0f;	/* a zero row meets the eps floor */
	gchk(k, gpu_upload(k->g, dx, x, (size_t)rows * d * 4));
	gchk(k, gpu_l2norm(k->g, dx, d, dy, d, rows, d, eps));
	dget(k, y, dy, (size_t)rows * d * 4);
	brk(k, y, (int64_t)rows * d);
	for (int r = 0; r < rows; r++) {
		double s = 0;
		for (int i = 0; i < d; i++)
			s += (double)x[r * d + i] * x[r * d + i];
		double n = sqrt(s) > eps ? sqrt(s) : eps;
		for (int i = 0; i < d; i++)
			ref[r * d + i] = x[r * d + i] / n;
	}
	snprintf(shape, sizeof shape, "%dx%d", rows, d);
	close_to(k, "l2norm", shape, y, ref, NULL, (int64_t)rows * d, 2e-6);
	free(x), free(y), free(ref);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
}

/* Angles as ggml's rope cache makes them: pos * ts^i by repeated float products. */
static void
check_rope(struct kc *k, int n, int heads, int hd, int ld, int n_rot, int maxpos)
{
	float base = 1e7f, ts = powf(base, -2.0f / (float)n_rot);
	int64_t nel = (int64_t)n * heads * ld;
	float *x = frand(k, nel, -1, 1), *y = xmalloc((size_t)nel * 4);
	double *ref = xmalloc((size_t)nel * 8);
	int32_t *pos = xmalloc((size_t)n * 4);
	char shape[64];

	for (int t = 0; t < n; t++)
		pos[t] = t == 0 ? maxpos : (int32_t)(rnd(k) % (uint64_t)(maxpos + 1));
	float *dx = dput(k, x, (size_t)nel * 4);
	int32_t *dp = dput(k, pos, (size_t)n * 4);
	gchk(k, gpu_rope_neox(k->g, dx, n, heads, ld, n_rot, dp, base));
	dget(k, y, dx, (size_t)nel * 4);
	brk(k, y, nel);
	for (int64_t i = 0; i < nel; i++)
		ref[i] = x[i];
	for (int t = 0; t < n; t++)
		for (int h = 0; h < heads; h++) {
			float *p = x + ((int64_t)t * heads + h) * ld, th = (float)pos[t];
			double *r = ref + ((int64_t)t * heads + h) * ld;
			for (int i = 0; i < n_rot / 2; i++, th *= ts) {
				r[i] = p[i] * cos(th) - p[i + n_rot / 2] * sin(th);
				r[i + n_rot / 2] = p[i] * sin(th) + p[i + n_rot / 2] * cos(th);
			}
		}
	(void)hd;
	snprintf(shape, sizeof shape, "%dx%dx%d rot=%d pos<=%d", n, heads, ld, n_rot, maxpos);
	close_to(k, "rope neox", shape, y, ref, NULL, nel, 2e-6);
	free(x), free(y), free(ref), free(pos);
	gpu_free(k->g, dx), gpu_free(k->g, dp);
}

/* op 0 swiglu, 1 add, 2 sigmoid_mul (rows of d in rows of 2d: the gate half) */
static void
check_elementwise(struct kc *k, int op, int rows, int d)
{
	static const char *names[] = { "swiglu", "add", "sigmoid_mul" };
	int64_t n = (int64_t)rows * d, na = op == 2 ? 2 * n : n;
	float *a = frand(k, na, -6, 6), *b = frand(k, n, -3, 3), *y = xmalloc((size_t)n * 4);
	double *ref = xmalloc((size_t)n * 8);
	float *da = dput(k, a, (size_t)na * 4), *db = dput(k, b, (size_t)n * 4);
	float *dy = dput(k, NULL, (size_t)n * 4);
	char shape[64];

	if (op == 0)
		gchk(k, gpu_swiglu(k->g, da, db, dy, n));
	else if (op == 1)
		gchk(k, gpu_add(k->g, da, db, dy, n));
	else	/* x = b, gate = second half of each 2d row of a */
		gchk(k, gpu_sigmoid_mul(k->g, db, d, da + d, 2 * d, dy, d, rows, d));
	dget(k, y, dy, (size_t)n * 4);
	brk(k, y, n);
	for (int r = 0; r < rows; r++)
		for (int i = 0; i < d; i++) {
			int64_t j = (int64_t)r * d + i;
			if (op == 0)
				ref[j] = silu_d(a[j]) * b[j];
			else if (op == 1)
				ref[j] = (double)a[j] + b[j];
			else
				ref[j] = b[j] / (1.0 + exp(-(double)a[(int64_t)r * 2 * d + d + i]));
		}
	snprintf(shape, sizeof shape, "%dx%d", rows, d);
	close_to(k, names[op], shape, y, ref, NULL, n, 2e-6);
	free(a), free(b), free(y), free(ref);
	gpu_free(k->g, da), gpu_free(k->g, db), gpu_free(k->g, dy);
}

static void
check_conv1d(struct kc *k, int T, int C, int K)
{
	float *x = frand(k, (int64_t)T * C, -2, 2), *w = frand(k, (int64_t)C * K, -1, 1);
	float *st = frand(k, (int64_t)(K - 1) * C, -2, 2), *y = xmalloc((size_t)T * C * 4);
	float *st2 = xmalloc((size_t)(K - 1) * C * 4), *both = xmalloc((size_t)(T + K - 1) * C * 4);
	double *ref = xmalloc((size_t)(T + K - 1) * C * 8);
	float *dx = dput(k, x, (size_t)T * C * 4), *dw = dput(k, w, (size_t)C * K * 4);
	float *ds = dput(k, st, (size_t)(K - 1) * C * 4), *dy = dput(k, NULL, (size_t)T * C * 4);
	char shape[64];

	gchk(k, gpu_conv1d_silu(k->g, dx, T, C, K, dw, ds, dy));
	dget(k, y, dy, (size_t)T * C * 4);
	dget(k, st2, ds, (size_t)(K - 1) * C * 4);
	/* inputs in order: the state's K-1, then the T new ones */
	memcpy(both, st, (size_t)(K - 1) * C * 4);
	memcpy(both + (K - 1) * C, x, (size_t)T * C * 4);
	for (int t = 0; t < T; t++)
		for (int c = 0; c < C; c++) {
			double s = 0;
			for (int j = 0; j < K; j++)
				s += (double)both[(int64_t)(t + j) * C + c] * w[(int64_t)c * K + j];
			ref[(int64_t)t * C + c] = silu_d(s);
		}
	brk(k, y, (int64_t)T * C);
	snprintf(shape, sizeof shape, "T=%d C=%d K=%d", T, C, K);
	close_to(k, "conv1d silu", shape, y, ref, NULL, (int64_t)T * C, 2e-6);
	for (int64_t i = 0; i < (int64_t)(K - 1) * C; i++)
		ref[i] = both[(int64_t)T * C + i];
	brk(k, st2, (int64_t)(K - 1) * C);
	close_to(k, "conv1d state", shape, st2, ref, NULL, (int64_t)(K - 1) * C, 0);
	free(x), free(w), free(st), free(y), free(st2), free(both), free(ref);
	gpu_free(k->g, dx), gpu_free(k->g, dw), gpu_free(k->g, ds), gpu_free(k->g, dy);
}

static void
l2rows(float *v, int64_t rows, int d)
{
	for (int64_t r = 0; r < rows; r++) {
		double s = 0;
		for (int i = 0; i < d; i++)
			s += (double)v[r * d + i] * v[r * d + i];
		for (int i = 0; i < d; i++)
			v[r * d + i] = (float)(v[r * d + i] / sqrt(s));
	}
}

/* T steps of the gated delta rule; checks the outputs and the new state. */
static void
check_gdn(struct kc *k, int T, int hk, int hv, int sk, int sv)
{
	int64_t ns = (int64_t)hv * sk * sv, nq = (int64_t)T * hk * sk, no = (int64_t)T * hv * sv;
	float *S = frand(k, ns, -0.5f, 0.5f), *q = frand(k, nq, -1, 1), *kk = frand(k, nq, -1, 1);
	float *v = frand(k, no, -1, 1), *gl = frand(k, (int64_t)T * hv, -1.5f, 0);
	float *beta = frand(k, (int64_t)T * hv, 0, 1), *o = xmalloc((size_t)no * 4), *S2 = xmalloc((size_t)ns * 4);
	double *Sd = xmalloc((size_t)ns * 8), *ref = xmalloc((size_t)no * 8), scale = 1.0 / sqrt(sk);
	char shape[64];

	l2rows(q, (int64_t)T * hk, sk);
	l2rows(kk, (int64_t)T * hk, sk);
	float *dS = dput(k, S, (size_t)ns * 4), *dq = dput(k, q, (size_t)nq * 4), *dk = dput(k, kk, (size_t)nq * 4);
	float *dv = dput(k, v, (size_t)no * 4), *dg = dput(k, gl, (size_t)T * hv * 4);
	float *db = dput(k, beta, (size_t)T * hv * 4), *dout = dput(k, NULL, (size_t)no * 4);
	gchk(k, gpu_gdn_step(k->g, dS, dq, dk, dv, dg, db, dout, T, hk, hv, sk, sv, (float)scale));
	dget(k, o, dout, (size_t)no * 4);
	dget(k, S2, dS, (size_t)ns * 4);
	for (int64_t i = 0; i < ns; i++)
		Sd[i] = S[i];
	for (int t = 0; t < T; t++)
		for (int h = 0; h < hv; h++) {
			double *s = Sd + (int64_t)h * sk * sv, eg = exp((double)gl[t * hv + h]);
			const float *kt = kk + ((int64_t)t * hk + h % hk) * sk, *qt = q + ((int64_t)t * hk + h % hk) * sk;
			for (int j = 0; j < sv; j++) {
				double kv = 0, out = 0;
				for (int i = 0; i < sk; i++)
					kv += s[(int64_t)i * sv + j] * kt[i];
				double dl = (v[((int64_t)t * hv + h) * sv + j] - eg * kv) * beta[t * hv + h];
				for (int i = 0; i < sk; i++) {
					s[(int64_t)i * sv + j] = eg * s[(int64_t)i * sv + j] + kt[i] * dl;
					out += s[(int64_t)i * sv + j] * qt[i];
				}
				ref[((int64_t)t * hv + h) * sv + j] = out * scale;
			}
		}
	brk(k, o, no);
	snprintf(shape, sizeof shape, "T=%d hk=%d hv=%d %dx%d", T, hk, hv, sk, sv);
	close_to(k, "gdn out", shape, o, ref, NULL, no, 1e-5);
	brk(k, S2, ns);
	close_to(k, "gdn state", shape, S2, Sd, NULL, ns, 1e-5);
	free(S), free(q), free(kk), free(v), free(gl), free(beta), free(o), free(S2), free(Sd), free(ref);
	gpu_free(k->g, dS), gpu_free(k->g, dq), gpu_free(k->g, dk), gpu_free(k->g, dv);
	gpu_free(k->g, dg), gpu_free(k->g, db), gpu_free(k->g, dout);
}

/*
 * gpu_attention (pf 0) or gpu_attention_prefill (pf 1; pf 2 its full mode,
 * every row seeing every key of the call) against attention in double;
 * win > 0 (pf 1): gpu_attention_prefill's sliding window, the row at
 * position i seeing the keys j with i - win < j <= i.
 */
static void
check_attention_win(struct kc *k, int nq, int nh, int nkv, int hd, int pos0, int pf, int win)
{
	int np = pos0 + nq, grp = nh / nkv;
	int64_t nkvel = (int64_t)np * nkv * hd, nqel = (int64_t)nq * nh * hd;
	float *q = frand(k, nqel, -1, 1), *K = frand(k, nkvel, -1, 1), *V = frand(k, nkvel, -1, 1);
	float *o = xmalloc((size_t)nqel * 4), scale = 1.0f / sqrtf((float)hd) * 2.0f;
	double *ref = xmalloc((size_t)nqel * 8), *p = xmalloc((size_t)np * 8);
	float *dq = dput(k, q, (size_t)nqel * 4), *dK = dput(k, K, (size_t)nkvel * 4);
	float *dV = dput(k, V, (size_t)nkvel * 4), *dO = dput(k, NULL, (size_t)nqel * 4);
	char shape[64];

	gchk(k, pf ? gpu_attention_prefill(k->g, dq, dK, dV, dO, nq, nh, nkv, hd, pos0, scale,
	    pf == 2, win) : gpu_attention(k->g, dq, dK, dV, dO, nq, nh, nkv, hd, pos0, scale));
	dget(k, o, dO, (size_t)nqel * 4);
	for (int t = 0; t < nq; t++)
		for (int h = 0; h < nh; h++) {
			const float *qh = q + ((int64_t)t * nh + h) * hd;
			int kvh = h / grp, n = pf == 2 ? np : pos0 + t + 1;
			int j0 = win > 0 && pos0 + t - win + 1 > 0 ? pos0 + t - win + 1 : 0;
			double mx = -INFINITY, l = 0;
			for (int j = j0; j < n; j++) {
				double s = 0;
				for (int i = 0; i < hd; i++)
					s += (double)qh[i] * K[((int64_t)j * nkv + kvh) * hd + i];
				p[j] = s * scale;
				mx = p[j] > mx ? p[j] : mx;
			}
			for (int j = j0; j < n; j++)
				l += p[j] = exp(p[j] - mx);
			for (int i = 0; i < hd; i++) {
				double s = 0;
				for (int j = j0; j < n; j++)
					s += p[j] * V[((int64_t)j * nkv + kvh) * hd + i];
				ref[((int64_t)t * nh + h) * hd + i] = s / l;
			}
		}
	brk(k, o, nqel);
	snprintf(shape, sizeof shape, "nq=%d h=%d/%d hd=%d pos0=%d", nq, nh, nkv, hd, pos0);
	if (win > 0)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " window=%d", win);
	close_to(k, pf == 2 ? "attention prefill full" : pf && win ? "attention prefill window" :
	    pf ? "attention prefill" : "attention", shape, o, ref, NULL, nqel, 1e-5);
	free(q), free(K), free(V), free(o), free(ref), free(p);
	gpu_free(k->g, dq), gpu_free(k->g, dK), gpu_free(k->g, dV), gpu_free(k->g, dO);
}

static void
check_attention(struct kc *k, int nq, int nh, int nkv, int hd, int pos0, int pf)
{
	check_attention_win(k, nq, nh, nkv, hd, pos0, pf, 0);
}

/*
 * gpu_upload_weight (a weight's file bytes to the device: from 16 MiB on
 * through two pinned buffers in turn) of n floats: the device's copy
 * downloaded equals the host's bit for bit.
 */
static void
check_upload_weight(struct kc *k, int64_t n)
{
	float *h = frand(k, n, -1, 1), *o = xmalloc((size_t)n * sizeof *o);
	void *d = gpu_alloc(k->g, (size_t)n * 4);
	char shape[64];

	if (d == NULL)
		die(1, "gpu: %s", gpu_errmsg(k->g));
	gchk(k, gpu_upload_weight(k->g, d, h, (size_t)n * 4));
	dget(k, o, d, (size_t)n * 4);
	brk(k, o, n);
	snprintf(shape, sizeof shape, "%lld bytes", (long long)n * 4);
	same_bits(k, "upload weight", shape, o, h, n);
	free(h), free(o);
	gpu_free(k->g, d);
}

static void
check_argmax(struct kc *k, int rows, int64_t n)
{
	float *x = frand(k, rows * n, -10, 10);
	int32_t *idx = xmalloc((size_t)rows * 4), *dI;
	double maxd = 0;
	int ok = 1;
	char shape[64];

	for (int r = 0; r < rows; r++) {	/* ties: the first index wins */
		int64_t a = (int64_t)(rnd(k) % (uint64_t)n), b = (int64_t)(rnd(k) % (uint64_t)n);
		x[r * n + a] = x[r * n + b] = 11.0f + (float)(r % 3);
		/* NaN and +inf above them never win (sample_next's greedy pick) */
		x[r * n + rnd(k) % (uint64_t)n] = NAN;
		x[r * n + rnd(k) % (uint64_t)n] = INFINITY;
	}
	for (int64_t i = 0; i < n; i++)	/* the last row: none finite, -1 */
		x[(rows - 1) * n + i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
	float *dx = dput(k, x, (size_t)rows * n * 4);
	dI = dput(k, NULL, (size_t)rows * 4);
	gchk(k, gpu_argmax(k->g, dx, rows, n, dI));
	dget(k, idx, dI, (size_t)rows * 4);
	if (k->brk)
		idx[rows / 2] ^= 1;
	for (int r = 0; r < rows; r++) {
		int64_t best = -1;
		for (int64_t i = 0; i < n; i++)
			if (isfinite(x[r * n + i]) && (best < 0 || x[r * n + i] > x[r * n + best]))
				best = i;
		if (idx[r] != best) {
			ok = 0;
			maxd = 1;
		}
	}
	snprintf(shape, sizeof shape, "%dx%lld", rows, (long long)n);
	report(k, "argmax", shape, maxd, ok);
	free(x), free(idx);
	gpu_free(k->g, dx), gpu_free(k->g, dI);
}

/*
 * A row of n (values in -10..10) where the sampler's kernels meet their
 * edges: pairs of equal values among the top (nties), 9.5 and its
 * successor (one value once divided by 3), NaN and both infinities, top
 * first, and a -0 beside a +0.
 */
static void
edge_row(struct kc *k, float *xr, int64_t n, int nties, float top)
{
	for (int i = 0; i < nties && i < n; i++) {
		int64_t a = (int64_t)(rnd(k) % (uint64_t)n), b = (int64_t)(rnd(k) % (uint64_t)n);
		xr[a] = xr[b] = 9.0f + (float)(i % 7) * 0.125f;
	}
	xr[rnd(k) % (uint64_t)n] = 9.5f;
	xr[rnd(k) % (uint64_t)n] = nextafterf(9.5f, 20.0f);
	xr[rnd(k) % (uint64_t)n] = NAN;
	xr[rnd(k) % (uint64_t)n] = INFINITY;
	xr[rnd(k) % (uint64_t)n] = -INFINITY;
	xr[0] = top, xr[1] = -0.0f, xr[2] = 0.0f;
}

/*
 * gpu_topk against lib/sample.c's sample_top, ids and values bit for bit:
 * rows of n with ties (two values equal, and values that tie only after
 * the division by temp), a -0 beside a +0, NaN and infinities above the
 * rest, and a last row with fewer finite values than k (ids -1, NaN).
 */
static void
check_topk(struct kc *k, int rows, int64_t n, int kk, float temp)
{
	float *x = frand(k, rows * n, -10, 10), *val = xmalloc((size_t)rows * kk * 4);
	float *rv = xmalloc((size_t)kk * 4), *dv;
	int32_t *id = xmalloc((size_t)rows * kk * 4), *rid = xmalloc((size_t)kk * 4), *dI;
	uint64_t *key = xmalloc((size_t)n * 8);
	double bad = 0;
	char shape[64];

	for (int r = 0; r < rows; r++)
		edge_row(k, x + r * n, n, 3 * kk, 12.0f);
	for (int64_t i = kk / 2; i < n; i++)	/* the last row: kk / 2 finite */
		x[(rows - 1) * n + i] = i % 2 ? NAN : -INFINITY;
	float *dx = dput(k, x, (size_t)rows * n * 4);
	void *sc = dput(k, NULL, gpu_topk_scratch(rows, kk));
	dv = dput(k, NULL, (size_t)rows * kk * 4);
	dI = dput(k, NULL, (size_t)rows * kk * 4);
	gchk(k, gpu_topk(k->g, dx, rows, n, n, kk, temp, dv, dI, sc));
	dget(k, val, dv, (size_t)rows * kk * 4);
	dget(k, id, dI, (size_t)rows * kk * 4);
	if (k->brk)
		id[kk / 2] ^= 1;
	for (int r = 0; r < rows; r++) {
		sample_top(x + r * n, (int)n, kk, temp, rv, rid, key);
		if (memcmp(rid, id + r * kk, (size_t)kk * 4) != 0 ||
		    memcmp(rv, val + r * kk, (size_t)kk * 4) != 0)
			bad = 1;
	}
	snprintf(shape, sizeof shape, "%dx%lld k=%d temp=%g", rows, (long long)n, kk, temp);
	report(k, "topk", shape, bad, bad == 0);
	free(x), free(val), free(rv), free(id), free(rid), free(key);
	gpu_free(k->g, dx), gpu_free(k->g, dv), gpu_free(k->g, dI), gpu_free(k->g, sc);
}

/*
 * gpu_draw against lib/sample.c's sample_next from the same row: the same
 * id at every position tried (its uniform: sample_uniform of the token
 * stream), on rows with ties among the top, values that tie only after
 * the division by temp, a -0 beside a +0, NaN and infinities, under
 * top-p and min-p and neither; a last row without a finite value.
 */
static void
check_draw(struct kc *k, int64_t n, float temp, float top_p, float min_p, int npos)
{
	float *x = frand(k, n, -10, 10), *dx;
	void *sc = dput(k, NULL, gpu_draw_scratch());
	int32_t *dI = (int32_t *)dput(k, NULL, 4), got, want;
	struct sample_params p;
	struct sampler *s;
	char shape[96], err[UTIL_ERRLEN];
	int bad = 0;

	edge_row(k, x, n, 40, 10.5f);
	sample_defaults(&p);
	p.temp = temp, p.top_p = top_p, p.min_p = min_p, p.seed = rnd(k);
	if ((s = sample_new(&p, (int)n, err)) == NULL)
		die(1, "draw: %s", err);
	dx = dput(k, x, (size_t)n * 4);
	for (int pos = 0; pos <= npos; pos++) {
		if (pos == npos) {	/* nothing finite */
			for (int64_t i = 0; i < n; i++)
				x[i] = i % 2 ? NAN : -INFINITY;
			gpu_free(k->g, dx);
			dx = dput(k, x, (size_t)n * 4);
		}
		gchk(k, gpu_draw(k->g, dx, n, temp, top_p, min_p,
		    sample_uniform(p.seed, 5, pos, SAMPLE_STREAM_TOKEN), dI, sc));
		dget(k, &got, dI, 4);
		want = sample_next(s, x, NULL, 0, 5, pos);
		if (k->brk && pos == 0)
			got ^= 1;
		bad += got != want;
	}
	snprintf(shape, sizeof shape, "%lld temp=%g top-p=%g min-p=%g x%d", (long long)n,
	    (double)temp, (double)top_p, (double)min_p, npos + 1);
	report(k, "draw", shape, bad, bad == 0);
	sample_free(s);
	free(x);
	gpu_free(k->g, dx), gpu_free(k->g, sc), gpu_free(k->g, dI);
}

/*
 * gpu_penalize against the definition (lib/sample.h: a token of the window
 * seen c times, l -> (l > 0 ? l / r : l * r) - (presence + frequency * c))
 * on a row with positive, negative, zero and non-finite logits among the
 * penalized ones, bit for bit; then the picks after it: the argmax at
 * temperature 0 and gpu_draw at 0.8 (top-p 0.9) on the penalized row
 * against sample_next with the history, at every position tried.
 */
static void
check_penalize(struct kc *k, int64_t n, int nhist, int window, float rep, float pres, float freq)
{
	float *x = frand(k, n, -8, 8), *want = xmalloc((size_t)n * 4), *got = xmalloc((size_t)n * 4);
	int32_t *hist = xmalloc((size_t)nhist * 4), *pen = xmalloc((size_t)nhist * 8), id, wid;
	void *sc = dput(k, NULL, gpu_draw_scratch());
	int32_t *dI = (int32_t *)dput(k, NULL, 4), *dp;
	struct sample_params p;
	struct sampler *s;
	char shape[96], err[UTIL_ERRLEN];
	double bad = 0;
	int np, badpick = 0;

	for (int i = 0; i < nhist; i++)		/* repeats: ids from a small range */
		hist[i] = (int32_t)(rnd(k) % (uint64_t)(i % 3 ? 40 : n));
	x[hist[nhist - 1]] = 0.0f, x[hist[nhist - 2]] = -0.0f;
	x[hist[nhist - 3]] = NAN, x[hist[nhist - 4]] = -INFINITY, x[hist[nhist - 5]] = 9.75f;
	sample_defaults(&p);
	p.repeat_penalty = rep, p.presence_penalty = pres, p.frequency_penalty = freq;
	p.penalty_last_n = window, p.seed = rnd(k);
	if ((s = sample_new(&p, (int)n, err)) == NULL)
		die(1, "penalize: %s", err);
	np = sample_window(s, hist, nhist, pen, pen + nhist);	/* tokens, then counts */
	memcpy(want, x, (size_t)n * 4);
	for (int i = 0; i < np; i++) {		/* the definition */
		float l = want[pen[i]], c = (float)pen[nhist + i];
		volatile float pr = freq * c;	/* (no contraction into the add) */
		want[pen[i]] = (l > 0 ? l / rep : l * rep) - (pres + pr);
	}
	float *dx = dput(k, x, (size_t)n * 4);
	dp = (int32_t *)dput(k, pen, (size_t)nhist * 8);
	gchk(k, gpu_penalize(k->g, dx, dp, dp + nhist, np, rep, pres, freq));
	dget(k, got, dx, (size_t)n * 4);
	if (k->brk)
		got[pen[0]] += 1.0f;
	for (int64_t i = 0; i < n; i++)	/* the same bits (any NaN for a NaN) */
		bad += !(isnan(got[i]) && isnan(want[i])) && memcmp(&got[i], &want[i], 4) != 0;
	snprintf(shape, sizeof shape, "%lld window %d of %d (%d tokens) r=%g p=%g f=%g",
	    (long long)n, window, nhist, np, (double)rep, (double)pres, (double)freq);
	report(k, "penalize", shape, bad, bad == 0);
	gchk(k, gpu_argmax(k->g, dx, 1, n, dI));	/* temperature 0 with the penalties */
	dget(k, &id, dI, 4);
	badpick += id != sample_next(s, x, hist, nhist, 3, 0);
	sample_free(s);
	p.temp = 0.8f, p.top_p = 0.9f;
	if ((s = sample_new(&p, (int)n, err)) == NULL)
		die(1, "penalize: %s", err);
	for (int pos = 0; pos < 16; pos++) {
		gchk(k, gpu_draw(k->g, dx, n, p.temp, p.top_p, p.min_p,
		    sample_uniform(p.seed, 3, pos, SAMPLE_STREAM_TOKEN), dI, sc));
		dget(k, &id, dI, 4);
		wid = sample_next(s, x, hist, nhist, 3, pos);
		if (k->brk && pos == 0)
			id ^= 1;
		badpick += id != wid;
	}
	report(k, "penalized picks", shape, badpick, badpick == 0);
	sample_free(s);
	free(x), free(want), free(got), free(hist), free(pen);
	gpu_free(k->g, dx), gpu_free(k->g, dp), gpu_free(k->g, sc), gpu_free(k->g, dI);
}

/* --- graph replay vs eager -------------------------------------------- */

struct step {		/* a miniature decode step: norm, FFN, residual, head, argmax */
	int	e, f, v;
	struct wset up, gate, down, out;
	float	*nw, *scale, *x, *n1, *a, *b, *s, *d, *h, *logits;
	int32_t	*idx;
};

static void
step_run(struct kc *k, struct step *st)
{
	struct gpu *g = k->g;

	gchk(k, gpu_rmsnorm(g, st->x, st->e, st->nw, st->n1, st->e, 1, st->e, 1e-6f));
	gchk(k, gpu_matvec(g, st->up.t, st->up.dw, st->f, st->e, st->n1, 1, st->a, NULL));
	gchk(k, gpu_matvec(g, st->gate.t, st->gate.dw, st->f, st->e, st->n1, 1, st->b, NULL));
	gchk(k, gpu_swiglu(g, st->b, st->a, st->s, st->f));
	gchk(k, gpu_matvec(g, st->down.t, st->down.dw, st->e, st->f, st->s, 1, st->d, NULL));
	gchk(k, gpu_add(g, st->x, st->d, st->h, st->e));
	gchk(k, gpu_matvec(g, st->out.t, st->out.dw, st->v, st->e, st->h, 1, st->logits, st->scale));
	gchk(k, gpu_argmax(g, st->logits, 1, st->v, st->idx));
}

static void
check_graph(struct kc *k)
{
	struct step st = { .e = 1024, .f = 2816, .v = 5000 };
	float *xe = frand(k, st.e, -1, 1), *nw = frand(k, st.e, 0.5f, 1.5f), sc = 0.5f;
	float *la = xmalloc((size_t)st.v * 4 + 4), *lb = xmalloc((size_t)st.v * 4 + 4);
	struct gpu_graph *gr;
	char shape[64];

	wset_new(k, &st.up, QUANT_Q4_K, st.f, st.e);
	wset_new(k, &st.gate, QUANT_Q8_0, st.f, st.e);
	wset_new(k, &st.down, QUANT_Q6_K, st.e, st.f);
	wset_new(k, &st.out, QUANT_NVFP4, st.v, st.e);
	st.nw = dput(k, nw, (size_t)st.e * 4), st.scale = dput(k, &sc, 4);
	st.x = dput(k, xe, (size_t)st.e * 4), st.n1 = dput(k, NULL, (size_t)st.e * 4);
	st.a = dput(k, NULL, (size_t)st.f * 4), st.b = dput(k, NULL, (size_t)st.f * 4);
	st.s = dput(k, NULL, (size_t)st.f * 4), st.d = dput(k, NULL, (size_t)st.e * 4);
	st.h = dput(k, NULL, (size_t)st.e * 4), st.logits = dput(k, NULL, (size_t)st.v * 4);
	st.idx = dput(k, NULL, 4);
	step_run(k, &st);
	dget(k, la, st.logits, (size_t)st.v * 4);
	dget(k, la + st.v, st.idx, 4);
	gchk(k, gpu_memset(k->g, st.logits, 0xFF, (size_t)st.v * 4));	/* poison */
	gchk(k, gpu_graph_begin(k->g));
	step_run(k, &st);
	if ((gr = gpu_graph_end(k->g)) == NULL)
		die(1, "gpu: %s", gpu_errmsg(k->g));
	for (int i = 0; i < 3; i++)
		gchk(k, gpu_graph_replay(k->g, gr));
	dget(k, lb, st.logits, (size_t)st.v * 4);
	dget(k, lb + st.v, st.idx, 4);
	brk(k, lb, st.v);
	snprintf(shape, sizeof shape, "ffn %dx%d head %d x3", st.e, st.f, st.v);
	same_bits(k, "graph replay=eager", shape, la, lb, st.v + 1);
	gpu_graph_free(gr);
	wset_free(k, &st.up), wset_free(k, &st.gate), wset_free(k, &st.down), wset_free(k, &st.out);
	float *ds[] = { st.nw, st.scale, st.x, st.n1, st.a, st.b, st.s, st.d, st.h, st.logits };
	for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
		gpu_free(k->g, ds[i]);
	gpu_free(k->g, st.idx);
	free(xe), free(nw), free(la), free(lb);
}

static void
check_all(struct kc *k)
{
	check_quant(k);
	/* the prefill GEMM: rows and inputs past whole tiles (64 x 128, the
	 * first kernel's 64 x 64), ne0 past whole steps (64, 256 values) */
	check_mmq(k, QUANT_Q8_0, 300, 512, 17, 0);
	check_mmq(k, QUANT_Q8_0, 1000, 1024, 64, 0);
	check_mmq(k, QUANT_Q8_0, 257, 4096, 100, 1);
	check_mmq(k, QUANT_Q8_0, 45, 320, 33, 0);
	check_mmq(k, QUANT_NVFP4, 300, 512, 17, 1);
	check_mmq(k, QUANT_NVFP4, 257, 768, 64, 0);
	check_mmq(k, QUANT_NVFP4, 1000, 1024, 100, 0);
	check_mmq(k, QUANT_NVFP4, 45, 320, 33, 0);
	check_mmq(k, QUANT_Q8_0, 130, 4128, 257, 1);	/* odd blocks a row: rows 2 mod 4 bytes */
	check_mmq(k, QUANT_Q8_0, 70, 352, 130, 0);
	check_mmq(k, QUANT_NVFP4, 70, 448, 130, 1);
	/* IQ4_XS's prefill (cuda/mmq_iq4.cu, on Q8_K x): 64 x 64 tiles cut by the
	 * shape, rows of 1 to 44 super-blocks */
	check_mmq(k, QUANT_IQ4_XS, 300, 512, 17, 0);
	check_mmq(k, QUANT_IQ4_XS, 1000, 1024, 64, 1);
	check_mmq(k, QUANT_IQ4_XS, 257, 4096, 100, 0);
	check_mmq(k, QUANT_IQ4_XS, 45, 256, 33, 0);
	check_mmq(k, QUANT_IQ4_XS, 130, 1280, 130, 1);
	check_mmq(k, QUANT_IQ4_XS, 70, 11264, 20, 0);
	check_qk_all(k);
	check_iq4_all(k);
	check_moe_group_all(k);
	check_rmsnorm(k, 7, 4096, 4096, 0);
	check_rmsnorm(k, 5, 1000, 1000, 1);
	check_rmsnorm(k, 3 * 16, 256, 512, 0);	/* per head, q half of q+gate */
	check_rmsnorm(k, 2 * 32, 128, 128, 2);
	check_rmsnorm(k, 3, 5120, 5120, 0);	/* 2 and 4 float4s a thread */
	check_rmsnorm(k, 2, 12288, 12288, 1);
	check_l2norm(k, 2 * 16, 128);
	check_rope(k, 3, 16, 256, 512, 64, 4000);
	check_rope(k, 2, 8, 64, 64, 64, 100000);
	check_elementwise(k, 0, 3, 12288);
	check_elementwise(k, 1, 3, 4096);
	check_elementwise(k, 2, 16 * 2, 256);
	check_conv1d(k, 1, 8192, 4);
	check_conv1d(k, 5, 1000, 4);
	check_conv1d(k, 2, 300, 3);
	check_gdn(k, 1, 16, 32, 128, 128);
	check_gdn(k, 4, 16, 16, 128, 128);
	check_gdn(k, 3, 2, 6, 64, 100);
	/* other key heads, value heads past 256: k_gdn_any (unrun as yet) */
	check_gdn(k, 3, 2, 6, 80, 128);
	check_gdn(k, 2, 4, 8, 48, 64);
	check_gdn(k, 2, 2, 4, 96, 300);
	check_gdn(k, 1, 1, 2, 200, 64);
	check_attention(k, 1, 16, 4, 256, 0, 0);
	check_attention(k, 1, 16, 4, 256, 1000, 0);
	check_attention(k, 1, 32, 8, 128, 5000, 0);
	check_attention(k, 4, 16, 4, 256, 700, 0);
	check_attention(k, 16, 8, 8, 64, 255, 0);
	check_attention(k, 2, 6, 2, 80, 130, 0);	/* head rows of 80, 96, 192: scalar and float2 loads */
	check_attention(k, 3, 12, 4, 96, 63, 0);
	check_attention(k, 1, 4, 1, 192, 2100, 0);
	/* Gemma-4's global heads of 512 (E 16: 2 heads a block of a KV head's 8, 3's 1;
	 * 480: the scalar loads) */
	check_attention(k, 1, 16, 2, 512, 0, 0);
	check_attention(k, 1, 32, 4, 512, 3000, 0);
	check_attention(k, 4, 16, 2, 512, 700, 0);
	check_attention(k, 16, 6, 2, 512, 130, 0);
	check_attention(k, 2, 4, 4, 480, 63, 0);
	/* prompts: gpu_attention_prefill's blocks of 32 and 64 vectors, hd 32..256, GQA 1..8 */
	check_attention(k, 17, 16, 4, 256, 0, 1);
	check_attention(k, 40, 8, 8, 128, 300, 1);
	check_attention(k, 100, 8, 1, 64, 2047, 1);
	check_attention(k, 512, 16, 4, 256, 0, 1);
	check_attention(k, 512, 8, 1, 128, 300, 1);
	check_attention(k, 100, 12, 2, 256, 2047, 1);
	check_attention(k, 1100, 4, 1, 64, 0, 1);
	check_attention(k, 300, 64, 8, 128, 0, 1);	/* 64 vectors a block (hd <= 128) */
	check_attention(k, 300, 64, 32, 64, 100, 1);
	check_attention(k, 150, 16, 2, 256, 600, 1);
	check_attention(k, 70, 6, 2, 96, 130, 1);	/* hd < the tile's: columns past hd */
	check_attention(k, 33, 3, 3, 160, 63, 1);
	check_attention(k, 20, 2, 2, 32, 5, 1);
	/* heads of 512 (Gemma-4's global layers): blocks of 32, 199 KB; 320 in a tile of 512 */
	check_attention(k, 17, 16, 2, 512, 0, 1);
	check_attention(k, 100, 8, 1, 512, 300, 1);
	/* heads of a multiple of 4 but not of 32 (the kernel takes them; the backend
	 * sends only full-mode ones: the 31B vision tower's 72) */
	check_attention(k, 50, 4, 2, 72, 10, 1);
	/* full mode: every row sees every key of the call (a vision tower's image) */
	check_attention(k, 300, 16, 16, 72, 0, 2);
	check_attention(k, 100, 8, 2, 72, 50, 2);
	check_attention(k, 70, 4, 4, 64, 0, 2);
	check_attention(k, 40, 6, 2, 256, 10, 2);
	check_attention(k, 33, 2, 2, 20, 0, 2);
	check_attention(k, 65, 4, 1, 128, 0, 2);
	check_attention(k, 300, 32, 4, 512, 0, 1);
	check_attention(k, 40, 6, 2, 320, 70, 1);
	/* sliding windows (gemma4's and step35's sliding layers): blocks start at
	 * their first row's window, vectors whose window starts a tile later
	 * (G 8: 4 rows a block), a window of 1, one past every key (= causal) */
	check_attention_win(k, 600, 16, 8, 256, 0, 1, 512);
	check_attention_win(k, 300, 16, 8, 256, 1000, 1, 1024);
	check_attention_win(k, 100, 16, 2, 128, 1000, 1, 33);
	check_attention_win(k, 200, 8, 8, 64, 40, 1, 100);
	check_attention_win(k, 300, 64, 8, 128, 0, 1, 64);
	check_attention_win(k, 70, 4, 4, 128, 5, 1, 1);
	check_attention_win(k, 100, 8, 1, 512, 300, 1, 40);
	check_attention_win(k, 150, 4, 2, 256, 0, 1, 4096);
	/* weights' uploads: plain, one staging buffer's worth, three (the first again) */
	check_upload_weight(k, 1000);
	check_upload_weight(k, (16 << 20) / 4);
	check_upload_weight(k, (40 << 20) / 4 + 3086);
	check_argmax(k, 3, 248320);
	check_argmax(k, 5, 1000);
	check_topk(k, 3, 248320, 40, 0.7f);
	check_topk(k, 2, 248320, 1, 1.0f);
	check_topk(k, 2, 151936, 1024, 3.0f);
	check_topk(k, 4, 1000, 50, 0.3f);
	check_topk(k, 2, 70, 64, 1.5f);	/* k near n: the last row 32 finite of 64 */
	check_draw(k, 248320, 0.8f, 1.0f, 0.0f, 24);
	check_draw(k, 248320, 1.0f, 0.9f, 0.0f, 24);
	check_draw(k, 248320, 0.7f, 0.95f, 0.05f, 24);
	check_draw(k, 151936, 1.5f, 1.0f, 0.1f, 16);
	check_draw(k, 248320, 0.05f, 1.0f, 0.0f, 8);	/* cold: a few candidates weigh */
	check_draw(k, 1000, 3.0f, 0.5f, 0.0f, 64);
	check_draw(k, 70, 1.0f, 0.8f, 0.02f, 64);
	check_penalize(k, 248320, 200, 64, 1.3f, 0.4f, 0.25f);
	check_penalize(k, 151936, 500, -1, 0.8f, -0.5f, 0.1f);
	check_penalize(k, 1000, 30, 30, 1.1f, 0.0f, 0.0f);
	check_graph(k);
}

/* --- the CUDA backend against the CPU backend, op by op ---------------- */

/*
 * Both backends run the same op through lib/backend's table on the same
 * inputs; the CPU backend is the reference.  Tolerances are relative to
 * a magnitude: 1 + |ref| for the fp32 ops, sum |w x| for the products
 * (the CPU multiplies quantized weights with int8 activations, the GPU
 * with fp32 ones).
 */
struct bpair {
	struct backend *c, *g;
	char	gname[32];	/* the GPU's backend_open name (cuda:N) */
};

static float *
bput(struct backend *be, const float *h, size_t n)
{
	float *d = backend_alloc(be, n);

	if (d == NULL || (h != NULL && backend_write(be, d, h, n) != 0))
		die(1, "%s: %s", backend_name(be), backend_errmsg(be));
	return d;
}

static float *
bget(struct backend *be, const float *d, size_t n)
{
	float *h = xmalloc(n * sizeof *h + 4);

	if (backend_read(be, h, d, n) != 0)
		die(1, "%s: %s", backend_name(be), backend_errmsg(be));
	return h;
}

static void
bchk(struct backend *be, int rc)
{
	if (rc != 0)
		die(1, "%s: %s", backend_name(be), backend_errmsg(be));
}

/* The broken arm for these checks: one value far outside any tolerance. */
static void
bbrk(struct kc *k, float *v, int64_t n, double mag)
{
	if (k->brk && n > 0)
		v[n / 2] += (float)(1.0 + 4.0 * (mag + fabs(v[n / 2])));
}

/* got (the GPU's) against ref (the CPU's): |d| <= tol * (mag_i or 1 + |ref|). */
static void
becmp(struct kc *k, const char *name, const char *shape, float *got, const float *ref,
    const double *mag, int64_t n, double tol)
{
	double maxd = 0, big = 0;
	int ok = 1;

	for (int64_t i = 0; i < n; i++)
		big = fmax(big, mag ? mag[i] : 1.0 + fabs(ref[i]));
	bbrk(k, got, n, big);
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		if (!(d <= tol * (mag ? mag[i] : 1.0 + fabs(ref[i]))))
			ok = 0;
		if (d > maxd || d != d)
			maxd = d;
	}
	report(k, name, shape, maxd, ok);
}

/* Bit-identical, with the broken arm. */
static void
bsame(struct kc *k, const char *name, const char *shape, float *a, const float *b,
    int64_t n)
{
	bbrk(k, a, n, 1.0);
	same_bits(k, name, shape, a, b, n);
}

struct bw {		/* one weight on both backends */
	struct backend_weight c, g;
	uint8_t	*w;
	float	*wf;
};

static void
bw_new(struct kc *k, struct bpair *p, struct bw *b, int t, int64_t rows, int64_t ne0,
    float scale)
{
	size_t n;

	b->w = qrand(k, t, rows, ne0, &n);
	b->wf = qdeq(t, b->w, rows, ne0);
	bchk(p->c, backend_weight_init(p->c, &b->c, t, ne0, rows, b->w, scale));
	bchk(p->g, backend_weight_init(p->g, &b->g, t, ne0, rows, b->w, scale));
}

static void
bw_free(struct bpair *p, struct bw *b)
{
	backend_weight_release(p->c, &b->c);
	backend_weight_release(p->g, &b->g);
	free(b->w), free(b->wf);
}

/* mag[j][r] = sum |w x| * |scale| of a product with strides. */
static double *
bmag(const struct bw *b, const float *x, int ldx, int m, float scale)
{
	int64_t rows = b->c.ne1, ne0 = b->c.ne0;
	double *mag = xmalloc((size_t)m * rows * 8);

	for (int j = 0; j < m; j++)
		for (int64_t r = 0; r < rows; r++) {
			double a = 0;
			for (int64_t e = 0; e < ne0; e++)
				a += fabs((double)b->wf[r * ne0 + e] * x[(size_t)j * ldx + e]);
			mag[j * rows + r] = a * fabs(scale) + 1e-20;
		}
	return mag;
}

/*
 * backend_matmul, rows ldx / ldy apart (> row lengths: the strided paths);
 * past 16 rows with each prefill kernel (backend_gemm_set): int8, the
 * CPU's numerics for Q8_0 and NVFP4, and bf16 operands, within 2^-8 of
 * the magnitude (the rounding of both operands; 5e-3 with the CPU's int8
 * rounding of x) and 2e-2 (the others: Q8_K input on the CPU).
 */
static void
be_matmul(struct kc *k, struct bpair *p, int t, int64_t rows, int64_t ne0, int m,
    int pad, float scale)
{
	struct bw b;
	int ldx = (int)ne0 + pad, ldy = (int)rows + pad;
	float *x = frand(k, (int64_t)m * ldx, -1, 1), *gy = NULL, *cy;
	float *cx = bput(p->c, x, (size_t)m * ldx), *gx = bput(p->g, x, (size_t)m * ldx);
	float *cyd = bput(p->c, NULL, (size_t)m * ldy), *gyd = bput(p->g, NULL, (size_t)m * ldy);
	double *mag, *m2;
	char name[64], shape[64];
	int nk = m > GPU_MATVEC_MAX_ROWS && !float_type(t) ? 2 : 1;

	bw_new(k, p, &b, t, rows, ne0, scale);
	bchk(p->c, backend_matmul(p->c, &b.c, cx, ldx, cyd, ldy, m));
	cy = bget(p->c, cyd, (size_t)m * ldy);
	mag = bmag(&b, x, ldx, m, scale);
	m2 = xmalloc((size_t)m * ldy * 8);
	for (int j = 0; j < m; j++)
		for (int i = 0; i < ldy; i++)
			m2[(size_t)j * ldy + i] = i < rows ? mag[j * rows + i] : 1.0;
	snprintf(shape, sizeof shape, "%lldx%lld m=%d ld+%d", (long long)rows, (long long)ne0, m, pad);
	for (int kind = 0; kind < nk; kind++) {
		/* int8-activation types: the same numerics as the CPU's quant_vec_dot */
		int q8 = gpu_can_matvec_q8_rows(t, m), bf = kind == 1;
		if (nk > 1)
			bchk(p->g, backend_gemm_set(p->g, kind ? BACKEND_GEMM_BF16 : BACKEND_GEMM_INT8));
		free(gy);
		bchk(p->g, backend_matmul(p->g, &b.g, gx, ldx, gyd, ldy, m));
		gy = bget(p->g, gyd, (size_t)m * ldy);
		snprintf(name, sizeof name, "be matmul %s%s%s", quant_name(t), scale != 1 ? "*s" : "",
		    bf ? " bf16" : q8 ? " i8" : "");
		becmp(k, name, shape, gy, cy, m2, (int64_t)m * ldy, bf ? (q8 ? 5e-3 : 2e-2) :
		    q8 ? 1e-5 : 2e-2);
	}
	if (nk > 1) {	/* bf16 through the weight's bf16 copy: made, then read; bf16's bits */
		float *y1, *y2;
		bchk(p->g, backend_gemm_set(p->g, BACKEND_GEMM_BF16_MIRROR));
		bchk(p->g, backend_matmul(p->g, &b.g, gx, ldx, gyd, ldy, m));
		y1 = bget(p->g, gyd, (size_t)m * ldy);
		bchk(p->g, backend_fill(p->g, gyd, -1.0f, (size_t)m * ldy));
		bchk(p->g, backend_matmul(p->g, &b.g, gx, ldx, gyd, ldy, m));
		y2 = bget(p->g, gyd, (size_t)m * ldy);
		snprintf(name, sizeof name, "be matmul %s%s bf16 copy", quant_name(t),
		    scale != 1 ? "*s" : "");
		bsame(k, name, shape, y1, gy, (int64_t)m * ldy);
		for (int j = 0; j < m; j++)	/* the fill stays between rows: nothing writes there */
			for (int i = (int)rows; i < ldy; i++)
				gy[(size_t)j * ldy + i] = -1.0f;
		snprintf(name, sizeof name, "be matmul %s%s bf16 copy again", quant_name(t),
		    scale != 1 ? "*s" : "");
		bsame(k, name, shape, y2, gy, (int64_t)m * ldy);
		free(y1), free(y2);
		bchk(p->g, backend_gemm_set(p->g, BACKEND_GEMM_DEFAULT));	/* (frees the copies) */
	}
	/* rows 0..m-1 of the m-row product == each row alone (m <= 16) */
	if (m > 1 && m <= GPU_MATVEC_MAX_ROWS) {
		float *one = xmalloc((size_t)m * ldy * 4 + 4);
		for (int j = 0; j < m; j++) {
			bchk(p->g, backend_matmul(p->g, &b.g, gx + (size_t)j * ldx, ldx,
			    gyd + (size_t)j * ldy, ldy, 1));
		}
		bchk(p->g, backend_read(p->g, one, gyd, (size_t)m * ldy));
		snprintf(name, sizeof name, "be matmul %s m=1xm", quant_name(t));
		bsame(k, name, shape, one, gy, (int64_t)m * ldy);
		free(one);
	}
	bw_free(p, &b);
	free(x), free(gy), free(cy), free(mag), free(m2);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx);
	backend_mfree(p->c, cyd), backend_mfree(p->g, gyd);
}

/* An fp32 op on both backends: in[] uploaded, op run, out[] compared. */
struct bop {
	int	nin;
	size_t	n[8];		/* floats per buffer */
	float	*h[8];		/* host copies (inputs; outputs start as these too) */
	float	*c[8], *g[8];	/* device buffers on each backend */
};

static void
bop_new(struct kc *k, struct bpair *p, struct bop *o, int nbuf, const size_t *n,
    const float *lo, const float *hi)
{
	o->nin = nbuf;
	for (int i = 0; i < nbuf; i++) {
		o->n[i] = n[i];
		o->h[i] = frand(k, (int64_t)n[i], lo[i], hi[i]);
		o->c[i] = bput(p->c, o->h[i], n[i]);
		o->g[i] = bput(p->g, o->h[i], n[i]);
	}
}

/* Compare buffer i of both backends. */
static void
bop_cmp(struct kc *k, struct bpair *p, struct bop *o, int i, const char *name,
    const char *shape, double tol)
{
	float *c = bget(p->c, o->c[i], o->n[i]), *g = bget(p->g, o->g[i], o->n[i]);

	becmp(k, name, shape, g, c, NULL, (int64_t)o->n[i], tol);
	free(c), free(g);
}

static void
bop_free(struct bpair *p, struct bop *o)
{
	for (int i = 0; i < o->nin; i++) {
		free(o->h[i]);
		backend_mfree(p->c, o->c[i]);
		backend_mfree(p->g, o->g[i]);
	}
}

#define BOTH(p, call_c, call_g) do { bchk((p)->c, call_c); bchk((p)->g, call_g); } while (0)

static void
be_norms(struct kc *k, struct bpair *p, int rows, int n, int ld)
{
	size_t sz[] = { (size_t)rows * ld, (size_t)n, (size_t)rows * ld, (size_t)rows * n,
	    (size_t)rows * n };
	float lo[] = { -2, 0.5f, 0, -3, 0 }, hi[] = { 2, 1.5f, 0, 3, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 5, sz, lo, hi);
	snprintf(shape, sizeof shape, "%dx%d ld=%d", rows, n, ld);
	BOTH(p, backend_rmsnorm(p->c, o.c[0], ld, o.c[1], o.c[2], ld, rows, n, 1e-6f),
	    backend_rmsnorm(p->g, o.g[0], ld, o.g[1], o.g[2], ld, rows, n, 1e-6f));
	bop_cmp(k, p, &o, 2, "be rmsnorm", shape, 1e-5);
	BOTH(p, backend_rmsnorm_gated(p->c, o.c[0], o.c[3], o.c[1], o.c[4], rows, n, 1e-6f),
	    backend_rmsnorm_gated(p->g, o.g[0], o.g[3], o.g[1], o.g[4], rows, n, 1e-6f));
	bop_cmp(k, p, &o, 4, "be rmsnorm_gated", shape, 1e-5);
	BOTH(p, backend_l2norm(p->c, o.c[0], ld, rows, n, 1e-6f),
	    backend_l2norm(p->g, o.g[0], ld, rows, n, 1e-6f));
	bop_cmp(k, p, &o, 0, "be l2norm", shape, 1e-5);
	bop_free(p, &o);
}

/*
 * backend_norm_residual (Gemma-4's post-FFN norms and residual add): the
 * GPU against the CPU within 1e-5 of x's scale, and against the GPU's own
 * plain ops in the order the contract names, bit for bit; with the second
 * input (b) or not, the closing norm (w2) or not, a scale or not, a NULL
 * weight.  Widths: 2816 (26B-A4B: one float4 a thread), 5376 (31B: two),
 * 16384 (four, 1024 threads), 1001 (not a multiple of 4: the plain
 * kernels).
 */
static void
be_norm_residual(struct kc *k, struct bpair *p, int m, int n, int form)
{
	int two = form & 1, fin = form & 2, nullw = form & 4;
	float s = form & 8 ? 0.7071f : 1.0f;
	size_t mn = (size_t)m * n, sz[] = { mn, mn, mn, (size_t)n, (size_t)n, (size_t)n };
	float lo[] = { -3, -2, -2, 0.5f, 0.5f, 0.5f }, hi[] = { 3, 2, 2, 1.5f, 1.5f, 1.5f };
	struct bop o;
	char shape[96];
	float *ga2, *gb2, *gx2, *fused, *plain;

	bop_new(k, p, &o, 6, sz, lo, hi);
	snprintf(shape, sizeof shape, "m=%d n=%d%s%s%s%s", m, n, two ? " +b" : "",
	    fin ? " w2" : "", nullw ? " wa=NULL" : "", s != 1.0f ? " *s" : "");
	ga2 = bput(p->g, o.h[1], mn), gb2 = bput(p->g, o.h[2], mn), gx2 = bput(p->g, o.h[0], mn);
	BOTH(p, backend_norm_residual(p->c, o.c[0], o.c[1], nullw ? NULL : o.c[3],
	    two ? o.c[2] : NULL, o.c[4], fin ? o.c[5] : NULL, 1e-6f, s, m, n),
	    backend_norm_residual(p->g, o.g[0], o.g[1], nullw ? NULL : o.g[3],
	    two ? o.g[2] : NULL, o.g[4], fin ? o.g[5] : NULL, 1e-6f, s, m, n));
	fused = bget(p->g, o.g[0], mn);
	bchk(p->g, backend_rmsnorm(p->g, ga2, n, nullw ? NULL : o.g[3], ga2, n, m, n, 1e-6f));
	if (two) {
		bchk(p->g, backend_rmsnorm(p->g, gb2, n, o.g[4], gb2, n, m, n, 1e-6f));
		bchk(p->g, backend_add(p->g, ga2, gb2, mn));
	}
	if (fin)
		bchk(p->g, backend_rmsnorm(p->g, ga2, n, o.g[5], ga2, n, m, n, 1e-6f));
	bchk(p->g, backend_add(p->g, gx2, ga2, mn));
	if (s != 1.0f)
		bchk(p->g, backend_scale(p->g, gx2, mn, s));
	plain = bget(p->g, gx2, mn);
	bsame(k, "be norm_residual plain ops", shape, fused, plain, (int64_t)mn);
	bop_cmp(k, p, &o, 0, "be norm_residual", shape, 1e-5);
	free(fused), free(plain);
	backend_mfree(p->g, ga2), backend_mfree(p->g, gb2), backend_mfree(p->g, gx2);
	bop_free(p, &o);
}

/*
 * backend_add_rmsnorm (the MoE FFN's opening): x += t, y = rmsnorm(x) * w,
 * the GPU against the CPU (x exact: one add; y 1e-5) and against the GPU's
 * own add and rmsnorm bit for bit, rows of 2048 (35B-A3B), 4096 and 1001
 * (the plain kernels).
 */
/*
 * backend_rmsnorm_pair (Gemma-4's router and experts' inputs): the GPU
 * against the CPU (1e-5) and against the GPU's two rmsnorms and the scale,
 * bit for bit; rows of 2816 (26B-A4B), 5376 and 1001 (the plain kernels).
 */
static void
be_rmsnorm_pair(struct kc *k, struct bpair *p, int m, int n, float s1)
{
	size_t mn = (size_t)m * n, sz[] = { mn, (size_t)n, (size_t)n, mn, mn };
	float lo[] = { -3, 0.5f, 0.5f, 0, 0 }, hi[] = { 3, 1.5f, 1.5f, 0, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 5, sz, lo, hi);
	snprintf(shape, sizeof shape, "m=%d n=%d *%g", m, n, s1);
	float *gy1 = bput(p->g, NULL, mn), *gy2 = bput(p->g, NULL, mn), *a, *b;
	BOTH(p, backend_rmsnorm_pair(p->c, o.c[0], o.c[1], s1, o.c[3], o.c[2], o.c[4], 1e-6f, m,
	    n), backend_rmsnorm_pair(p->g, o.g[0], o.g[1], s1, o.g[3], o.g[2], o.g[4], 1e-6f, m, n));
	bchk(p->g, backend_rmsnorm(p->g, o.g[0], n, o.g[1], gy1, n, m, n, 1e-6f));
	if (s1 != 1.0f)
		bchk(p->g, backend_scale(p->g, gy1, mn, s1));
	bchk(p->g, backend_rmsnorm(p->g, o.g[0], n, o.g[2], gy2, n, m, n, 1e-6f));
	for (int i = 0; i < 2; i++) {
		a = bget(p->g, o.g[3 + i], mn), b = bget(p->g, i ? gy2 : gy1, mn);
		bsame(k, i ? "be rmsnorm_pair y2=plain" : "be rmsnorm_pair y1=plain", shape, a, b,
		    (int64_t)mn);
		free(a), free(b);
		bop_cmp(k, p, &o, 3 + i, i ? "be rmsnorm_pair y2" : "be rmsnorm_pair y1", shape, 1e-5);
	}
	backend_mfree(p->g, gy1), backend_mfree(p->g, gy2);
	bop_free(p, &o);
}

static void
be_add_rmsnorm(struct kc *k, struct bpair *p, int m, int n)
{
	size_t mn = (size_t)m * n, sz[] = { mn, mn, (size_t)n, mn };
	float lo[] = { -3, -2, 0.5f, 0 }, hi[] = { 3, 2, 1.5f, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 4, sz, lo, hi);
	snprintf(shape, sizeof shape, "m=%d n=%d", m, n);
	float *gx2 = bput(p->g, o.h[0], mn), *gy2 = bput(p->g, NULL, mn), *a, *b;
	BOTH(p, backend_add_rmsnorm(p->c, o.c[0], o.c[1], o.c[2], o.c[3], 1e-6f, m, n),
	    backend_add_rmsnorm(p->g, o.g[0], o.g[1], o.g[2], o.g[3], 1e-6f, m, n));
	bchk(p->g, backend_add(p->g, gx2, o.g[1], mn));
	bchk(p->g, backend_rmsnorm(p->g, gx2, n, o.g[2], gy2, n, m, n, 1e-6f));
	a = bget(p->g, o.g[3], mn), b = bget(p->g, gy2, mn);
	bsame(k, "be add_rmsnorm plain ops", shape, a, b, (int64_t)mn);
	free(a), free(b);
	a = bget(p->g, o.g[0], mn), b = bget(p->g, gx2, mn);
	bsame(k, "be add_rmsnorm x=plain", shape, a, b, (int64_t)mn);
	free(a), free(b);
	bop_cmp(k, p, &o, 0, "be add_rmsnorm x", shape, 0);
	bop_cmp(k, p, &o, 3, "be add_rmsnorm", shape, 1e-5);
	backend_mfree(p->g, gx2), backend_mfree(p->g, gy2);
	bop_free(p, &o);
}

static void
be_elementwise(struct kc *k, struct bpair *p, int n)
{
	size_t sz[] = { (size_t)n, (size_t)n, (size_t)n };
	float lo[] = { -30, -4, 0 }, hi[] = { 30, 4, 0 };
	static const char *an[] = { "silu", "sigmoid", "softplus" };
	struct bop o;
	char shape[64], name[64];

	snprintf(shape, sizeof shape, "%d", n);
	for (int a = 0; a < 3; a++) {
		bop_new(k, p, &o, 3, sz, lo, hi);
		BOTH(p, backend_act(p->c, (enum backend_act)a, o.c[0], n),
		    backend_act(p->g, (enum backend_act)a, o.g[0], n));
		snprintf(name, sizeof name, "be act %s", an[a]);
		bop_cmp(k, p, &o, 0, name, shape, 1e-6);
		bop_free(p, &o);
	}
	bop_new(k, p, &o, 3, sz, lo, hi);
	BOTH(p, backend_swiglu(p->c, o.c[0], o.c[1], o.c[2], n),
	    backend_swiglu(p->g, o.g[0], o.g[1], o.g[2], n));
	bop_cmp(k, p, &o, 2, "be swiglu", shape, 1e-6);
	BOTH(p, backend_add(p->c, o.c[1], o.c[0], n), backend_add(p->g, o.g[1], o.g[0], n));
	bop_cmp(k, p, &o, 1, "be add", shape, 1e-6);
	BOTH(p, backend_mul_sigmoid(p->c, o.c[0], 64, o.c[1], 64, n / 64, 48),
	    backend_mul_sigmoid(p->g, o.g[0], 64, o.g[1], 64, n / 64, 48));
	bop_cmp(k, p, &o, 0, "be mul_sigmoid", shape, 1e-6);
	BOTH(p, backend_fill(p->c, o.c[2], 0.25f, n), backend_fill(p->g, o.g[2], 0.25f, n));
	bop_cmp(k, p, &o, 2, "be fill", shape, 0);
	BOTH(p, backend_copy(p->c, o.c[2], o.c[1], n), backend_copy(p->g, o.g[2], o.g[1], n));
	bop_cmp(k, p, &o, 2, "be copy", shape, 0);
	bop_free(p, &o);
}

static void
be_rope(struct kc *k, struct bpair *p, int m, int nh, int hs, int n_rot, int mode, int p0)
{
	int ld = nh * hs + 8;
	size_t sz[] = { (size_t)m * ld };
	float lo[] = { -1 }, hi[] = { 1 };
	int32_t *pos = xmalloc((size_t)m * 4);
	struct bop o;
	char shape[64];

	for (int i = 0; i < m; i++)
		pos[i] = p0 + 37 * i;
	bop_new(k, p, &o, 1, sz, lo, hi);
	BOTH(p, backend_rope(p->c, o.c[0], ld, nh, hs, m, pos, n_rot, 1e7f, mode),
	    backend_rope(p->g, o.g[0], ld, nh, hs, m, pos, n_rot, 1e7f, mode));
	snprintf(shape, sizeof shape, "m=%d %dx%d rot=%d pos=%d", m, nh, hs, n_rot, p0);
	bop_cmp(k, p, &o, 0, mode & BACKEND_ROPE_PROP ? "be rope prop" :
	    mode == BACKEND_ROPE_NEOX ? "be rope neox" :
	    mode & BACKEND_ROPE_GGML ? "be rope norm ggml" : "be rope norm", shape, 2e-4);
	bop_free(p, &o);
	free(pos);
}

/*
 * backend_qk_norm_rope on m rows of nh q heads (stride qhs) and nkv k heads
 * of hd at p0: at backend positions with the store into caches of m + p0 +
 * 2 rows (dev), else at host positions (37 apart); with vnorm v's heads
 * normed too (Gemma-4's).  The GPU against the CPU (the norm's and the
 * rope's tolerances) and against the GPU's own norms, ropes and store, bit
 * for bit; q, k (v with vnorm) and both caches.
 */
static void
be_qkrope(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int qhs, int n_rot,
    int mode, int p0, int dev, int vnorm)
{
	int kvd = nkv * hd, n_ctx = p0 + m + 2;
	size_t sz[] = { (size_t)m * nh * qhs, (size_t)m * kvd, (size_t)m * kvd, (size_t)hd,
	    (size_t)hd, (size_t)n_ctx * kvd, (size_t)n_ctx * kvd };
	float lo[] = { -2, -2, -2, 0.5f, 0.5f, -1, -1 }, hi[] = { 2, 2, 2, 1.5f, 1.5f, 1, 1 };
	int32_t *pos = xmalloc((size_t)m * 4);
	struct bop o;
	char shape[96], name[64];
	const char *const what[] = { "q", "k", vnorm ? "v" : "", "", "", "kc", "vc" };

	for (int i = 0; i < m; i++)
		pos[i] = dev ? p0 + i : p0 + 37 * i;
	bop_new(k, p, &o, 7, sz, lo, hi);
	float *dc = bput(p->c, (const float *)pos, (size_t)m), *dg = bput(p->g, (const float *)pos,
	    (size_t)m);
	float *u[7];	/* the GPU's plain ops on copies of the inputs */
	for (int i = 0; i < 7; i++)
		u[i] = bput(p->g, o.h[i], o.n[i]);
	struct backend_qkn ac = { nh, nkv, hd, qhs, o.c[3], o.c[4], 1e-6f, n_rot, mode, 1e6f,
	    vnorm };
	struct backend_qkn ag = ac;
	ag.qn = o.g[3], ag.kn = o.g[4];
	BOTH(p, backend_qk_norm_rope(p->c, &ac, o.c[0], o.c[1], o.c[2], m, dev ? NULL : pos,
	    dev ? (const int32_t *)dc : NULL, dev ? o.c[5] : NULL, o.c[6], n_ctx),
	    backend_qk_norm_rope(p->g, &ag, o.g[0], o.g[1], o.g[2], m, dev ? NULL : pos,
	    dev ? (const int32_t *)dg : NULL, dev ? o.g[5] : NULL, o.g[6], n_ctx));
	bchk(p->g, backend_rmsnorm(p->g, u[0], qhs, u[3], u[0], qhs, m * nh, hd, 1e-6f));
	bchk(p->g, backend_rmsnorm(p->g, u[1], hd, u[4], u[1], hd, m * nkv, hd, 1e-6f));
	if (vnorm)
		bchk(p->g, backend_rmsnorm(p->g, u[2], hd, NULL, u[2], hd, m * nkv, hd, 1e-6f));
	if (dev) {
		bchk(p->g, backend_rope_dpos(p->g, u[0], nh * qhs, nh, qhs, m, (const int32_t *)dg,
		    n_rot, 1e6f, mode));
		bchk(p->g, backend_rope_dpos(p->g, u[1], kvd, nkv, hd, m, (const int32_t *)dg,
		    n_rot, 1e6f, mode));
		bchk(p->g, backend_kv_store(p->g, u[5], u[6], u[1], u[2], kvd, m,
		    (const int32_t *)dg, n_ctx));
	} else {
		bchk(p->g, backend_rope(p->g, u[0], nh * qhs, nh, qhs, m, pos, n_rot, 1e6f, mode));
		bchk(p->g, backend_rope(p->g, u[1], kvd, nkv, hd, m, pos, n_rot, 1e6f, mode));
	}
	snprintf(shape, sizeof shape, "m=%d %d+%dx%d/%d rot=%d%s pos=%d%s%s", m, nh, nkv, hd,
	    qhs, n_rot, (mode & ~BACKEND_ROPE_GGML) == BACKEND_ROPE_NEOX ? " neox" :
	    mode & BACKEND_ROPE_GGML ? " ggml" : "", p0, dev ? " dev" : "", vnorm ? " vnorm" : "");
	for (int i = 0; i < 7; i++) {
		if (what[i][0] == '\0' || (!dev && i >= 5))
			continue;
		snprintf(name, sizeof name, "be qk_norm_rope %s", what[i]);
		bop_cmp(k, p, &o, i, name, shape, 2e-4);
		float *a = bget(p->g, o.g[i], o.n[i]), *b = bget(p->g, u[i], o.n[i]);
		snprintf(name, sizeof name, "be qk_norm_rope %s=ops", what[i]);
		bsame(k, name, shape, a, b, (int64_t)o.n[i]);
		free(a), free(b);
	}
	for (int i = 0; i < 7; i++)
		backend_mfree(p->g, u[i]);
	backend_mfree(p->c, dc), backend_mfree(p->g, dg);
	bop_free(p, &o);
	free(pos);
}

/*
 * Attention with the qwen35 q layout (query ; gate per head): m rows at
 * p0, with a sliding window of win keys (0: none).  Each row alone at its
 * own position: the same bits up to 16 rows (verify); past them a prompt's
 * flash attention (its windowed form too) within float tolerance.  Up to 16 rows (decode,
 * verify: a recorded step's attention), the positions in backend memory
 * (backend_attention_dpos, caches of 70 rows more: splits past the rows)
 * give the host form's bits, with a window or without.
 */
static void
be_attention(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0, int win)
{
	int qhs = 2 * hd, ldq = nh * qhs, kvd = nkv * hd, n = p0 + m;
	size_t sz[] = { (size_t)m * ldq, (size_t)n * kvd, (size_t)n * kvd, (size_t)m * nh * hd };
	float lo[] = { -1, -1, -1, 0 }, hi[] = { 1, 1, 1, 0 };
	struct backend_attn a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 0, win, NULL, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 4, sz, lo, hi);
	BOTH(p, backend_attention(p->c, &a, o.c[0], ldq, qhs, o.c[1], o.c[2], m, p0, o.c[3]),
	    backend_attention(p->g, &a, o.g[0], ldq, qhs, o.g[1], o.g[2], m, p0, o.g[3]));
	snprintf(shape, sizeof shape, "m=%d h=%d/%d hd=%d p0=%d", m, nh, nkv, hd, p0);
	if (win)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " win=%d", win);
	bop_cmp(k, p, &o, 3, "be attention", shape, 1e-4);
	if (m > 1) {	/* each row alone, at its own position (decode) */
		float *all = bget(p->g, o.g[3], o.n[3]), *one;
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_attention(p->g, &a, o.g[0] + (size_t)r * ldq, ldq, qhs,
			    o.g[1], o.g[2], 1, p0 + r, o.g[3] + (size_t)r * nh * hd));
		one = bget(p->g, o.g[3], o.n[3]);
		if (m <= GPU_MATVEC_MAX_ROWS)	/* verify: bit for bit */
			bsame(k, "be attention m=1xm", shape, one, all, (int64_t)o.n[3]);
		else		/* a prompt (flash attention): its own order */
			becmp(k, "be attention 1xm", shape, all, one, NULL, (int64_t)o.n[3], 1e-4);
		free(all), free(one);
	}
	if (m <= GPU_MATVEC_MAX_ROWS) {	/* positions in backend memory, caches of n + 70 */
		int32_t *pos = xmalloc((size_t)m * 4);
		float *kc = bput(p->g, NULL, (size_t)(n + 70) * kvd), *vc = bput(p->g, NULL,
		    (size_t)(n + 70) * kvd), *dp, *h, *d;
		for (int r = 0; r < m; r++)
			pos[r] = p0 + r;
		dp = bput(p->g, (const float *)pos, (size_t)m);
		bchk(p->g, backend_copy(p->g, kc, o.g[1], (size_t)n * kvd));
		bchk(p->g, backend_copy(p->g, vc, o.g[2], (size_t)n * kvd));
		bchk(p->g, backend_attention(p->g, &a, o.g[0], ldq, qhs, o.g[1], o.g[2], m, p0, o.g[3]));
		h = bget(p->g, o.g[3], o.n[3]);
		bchk(p->g, backend_attention_dpos(p->g, &a, o.g[0], ldq, qhs, kc, vc, m,
		    (const int32_t *)dp, n + 70, o.g[3]));
		d = bget(p->g, o.g[3], o.n[3]);
		bsame(k, "be attention dpos=host", shape, d, h, (int64_t)o.n[3]);
		free(h), free(d), free(pos);
		backend_mfree(p->g, kc), backend_mfree(p->g, vc), backend_mfree(p->g, dp);
	}
	bop_free(p, &o);
}

/*
 * Attention with rows that see later keys (backend_attn.hi): m rows at p0,
 * rows b0 .. b0 + nb - 1 an image block whose rows see the whole block,
 * the others causal; a sliding window of win keys (0: none).  The GPU
 * against the CPU, and its rows the same bits when the block's rows and
 * those before it run alone (a call of b0 + nb rows) and the rows after it
 * in a call of their own: a row's bits never depend on the rows beside it.
 */
static void
be_attention_hi(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0,
    int b0, int nb, int win)
{
	int ld = nh * hd, kvd = nkv * hd, n = p0 + m, m1 = b0 + nb;
	size_t sz[] = { (size_t)m * ld, (size_t)n * kvd, (size_t)n * kvd, (size_t)m * ld };
	float lo[] = { -1, -1, -1, 0 }, hi[] = { 1, 1, 1, 0 };
	int32_t *top = xmalloc((size_t)m * 4);
	struct backend_attn a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 0, win, top, 0 };
	struct bop o;
	char shape[96];

	for (int r = 0; r < m; r++)
		top[r] = r >= b0 && r < m1 ? p0 + m1 - 1 : p0 + r;
	bop_new(k, p, &o, 4, sz, lo, hi);
	BOTH(p, backend_attention(p->c, &a, o.c[0], ld, hd, o.c[1], o.c[2], m, p0, o.c[3]),
	    backend_attention(p->g, &a, o.g[0], ld, hd, o.g[1], o.g[2], m, p0, o.g[3]));
	snprintf(shape, sizeof shape, "m=%d h=%d/%d hd=%d p0=%d block=%d+%d", m, nh, nkv, hd, p0,
	    b0, nb);
	if (win)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " win=%d", win);
	bop_cmp(k, p, &o, 3, "be attention hi", shape, 1e-4);
	float *all = bget(p->g, o.g[3], o.n[3]), *part;
	bchk(p->g, backend_fill(p->g, o.g[3], 0.0f, o.n[3]));
	bchk(p->g, backend_attention(p->g, &a, o.g[0], ld, hd, o.g[1], o.g[2], m1, p0, o.g[3]));
	if (m1 < m) {		/* the rows after the block: causal, at p0 + m1 */
		a.hi = top + m1;
		bchk(p->g, backend_attention(p->g, &a, o.g[0] + (size_t)m1 * ld, ld, hd, o.g[1],
		    o.g[2], m - m1, p0 + m1, o.g[3] + (size_t)m1 * ld));
	}
	part = bget(p->g, o.g[3], o.n[3]);
	bsame(k, "be attention hi parts", shape, part, all, (int64_t)o.n[3]);
	free(all), free(part), free(top);
	bop_free(p, &o);
}

/*
 * Attention over a ring cache (backend_attn.ring): m rows at p0 with a
 * window of win keys, keys in ring rows (position j in row j % ring; p0 +
 * m past ring, so they wrap; ring >= m + win - 1 holds every key the rows
 * see).  The GPU against the CPU; each row alone at its own position, bit
 * for bit (a ring's prompt stays on the split-K kernel); against its own
 * attention over the same keys in rows of their own within 1e-4 (a
 * windowed prompt over rows takes the flash prefill kernel, as a full one
 * does: other sums, session 25's H100 1.5e-7).
 */
static void
be_attention_ring(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0,
    int win, int ring)
{
	int ld = nh * hd, kvd = nkv * hd, n = p0 + m;
	float *q = frand(k, (int64_t)m * ld, -1, 1), *kl = frand(k, (int64_t)n * kvd, -1, 1);
	float *vl = frand(k, (int64_t)n * kvd, -1, 1), *kr = frand(k, (int64_t)ring * kvd, -1, 1);
	float *vr = frand(k, (int64_t)ring * kvd, -1, 1), *c, *g, *lin, *one;
	struct backend_attn a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 0, win, NULL, ring };
	struct backend_attn al = a;
	size_t no = (size_t)m * ld;
	char shape[96];

	if (ring < m + win - 1 || n <= ring)
		die(1, "be_attention_ring: a ring of %d for %d rows at %d, window %d", ring, m, p0,
		    win);
	for (int j = n - ring; j < n; j++) {	/* the last ring keys, j in row j % ring */
		memcpy(kr + (size_t)(j % ring) * kvd, kl + (size_t)j * kvd, kvd * sizeof *kr);
		memcpy(vr + (size_t)(j % ring) * kvd, vl + (size_t)j * kvd, kvd * sizeof *vr);
	}
	float *cq = bput(p->c, q, no), *ck = bput(p->c, kr, (size_t)ring * kvd);
	float *cv = bput(p->c, vr, (size_t)ring * kvd), *co = bput(p->c, NULL, no);
	float *gq = bput(p->g, q, no), *gk = bput(p->g, kr, (size_t)ring * kvd);
	float *gv = bput(p->g, vr, (size_t)ring * kvd), *go = bput(p->g, NULL, no);
	float *gkl = bput(p->g, kl, (size_t)n * kvd), *gvl = bput(p->g, vl, (size_t)n * kvd);

	snprintf(shape, sizeof shape, "m=%d h=%d/%d hd=%d p0=%d win=%d ring=%d", m, nh, nkv, hd,
	    p0, win, ring);
	BOTH(p, backend_attention(p->c, &a, cq, ld, hd, ck, cv, m, p0, co),
	    backend_attention(p->g, &a, gq, ld, hd, gk, gv, m, p0, go));
	c = bget(p->c, co, no), g = bget(p->g, go, no);
	becmp(k, "be attention ring", shape, g, c, NULL, (int64_t)no, 1e-4);
	free(g);
	g = bget(p->g, go, no);		/* unbroken: becmp's broken arm spoiled the copy */
	al.ring = 0;
	bchk(p->g, backend_attention(p->g, &al, gq, ld, hd, gkl, gvl, m, p0, go));
	lin = bget(p->g, go, no);
	bchk(p->g, backend_fill(p->g, go, 0.0f, no));
	for (int r = 0; r < m; r++)	/* each row alone (decode) */
		bchk(p->g, backend_attention(p->g, &a, gq + (size_t)r * ld, ld, hd, gk, gv, 1,
		    p0 + r, go + (size_t)r * ld));
	one = bget(p->g, go, no);
	bsame(k, "be attention ring m=1xm", shape, one, g, (int64_t)no);
	becmp(k, "be attention ring=rows", shape, lin, g, NULL, (int64_t)no, 1e-4);
	free(c), free(g), free(lin), free(one);
	free(q), free(kl), free(vl), free(kr), free(vr);
	backend_mfree(p->c, cq), backend_mfree(p->c, ck), backend_mfree(p->c, cv);
	backend_mfree(p->c, co), backend_mfree(p->g, gq), backend_mfree(p->g, gk);
	backend_mfree(p->g, gv), backend_mfree(p->g, go), backend_mfree(p->g, gkl);
	backend_mfree(p->g, gvl);
}

/*
 * backend_clamp on n values with NaN, +-inf, -0 and the bounds themselves
 * among them, within [lo, hi] and one-sided (-FLT_MAX, FLT_MAX: Gemma-4's
 * towers' unbounded sides): the same bits as the CPU's.
 */
static void
be_clamp(struct kc *k, struct bpair *p, int n)
{
	static const float b[][2] = { { -1.0f, 1.5f }, { -FLT_MAX, 2.0f }, { -0.5f, FLT_MAX },
	    { 0.0f, 0.0f } };
	float *x = frand(k, n, -4, 4), *c, *g;
	char shape[64];

	if (n < 16)
		die(1, "be_clamp: %d values (16 at least)", n);
	x[1] = NAN, x[3] = INFINITY, x[5] = -INFINITY, x[7] = -0.0f, x[9] = 1.5f, x[11] = -1.0f;
	x[n - 1] = -NAN;
	for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
		float *cx = bput(p->c, x, n), *gx = bput(p->g, x, n);
		BOTH(p, backend_clamp(p->c, cx, n, b[i][0], b[i][1]),
		    backend_clamp(p->g, gx, n, b[i][0], b[i][1]));
		c = bget(p->c, cx, n), g = bget(p->g, gx, n);
		snprintf(shape, sizeof shape, "%d [%g, %g]", n, b[i][0], b[i][1]);
		bsame(k, "be clamp", shape, g, c, n);
		free(c), free(g);
		backend_mfree(p->c, cx), backend_mfree(p->g, gx);
	}
	free(x);
}

/*
 * backend_matmul_half, the vision towers' products: a BF16 (F16) weight
 * takes x rounded to its type on both backends (the CPU's float dot, the
 * GPU's cublasGemmEx on 16-bit operands), so the two see the same
 * operands and differ by the order of fp32 sums alone: within 1e-5 of
 * sum |w x|.  Skipping the rounding moves a product by about 3e-3
 * (BF16) or 4e-4 (F16) over sqrt(ne0) of that, past the bound at these
 * rows.  Rows ldx / ldy apart; m from one row to a prompt's GEMM; rows of
 * 4304 (the towers' FFN: not a multiple of 32, so the CUDA backend holds
 * the weight as F32 rows, rounded back to 16 bits a tile at a time).  An
 * F32 weight: the GPU's backend_matmul bit for bit.
 */
static void
be_matmul_half(struct kc *k, struct bpair *p, int t, int64_t rows, int64_t ne0, int m, int pad)
{
	struct bw b;
	int ldx = (int)ne0 + pad, ldy = (int)rows + pad;
	size_t ny = (size_t)m * ldy;
	float *x = frand(k, (int64_t)m * ldx, -1, 1), *cy, *gy;
	float *cx = bput(p->c, x, (size_t)m * ldx), *gx = bput(p->g, x, (size_t)m * ldx);
	float *cyd = bput(p->c, NULL, ny), *gyd = bput(p->g, NULL, ny);
	double *mag, *m2 = xmalloc(ny * 8);
	char name[64], shape[64];

	bw_new(k, p, &b, t, rows, ne0, 1.0f);
	bchk(p->g, backend_matmul_half(p->g, &b.g, gx, ldx, gyd, ldy, m));
	gy = bget(p->g, gyd, ny);
	snprintf(shape, sizeof shape, "%lldx%lld m=%d ld+%d", (long long)rows, (long long)ne0, m,
	    pad);
	snprintf(name, sizeof name, "be matmul_half %s%s", quant_name(t),
	    t == QUANT_F32 ? " =matmul" : "");
	if (t == QUANT_F32) {	/* the reference: the GPU's own plain product */
		bchk(p->g, backend_fill(p->g, gyd, -1.0f, ny));
		bchk(p->g, backend_matmul(p->g, &b.g, gx, ldx, gyd, ldy, m));
		cy = bget(p->g, gyd, ny);
		for (int j = 0; j < m; j++)	/* (the fill stays between rows) */
			for (int i = (int)rows; i < ldy; i++)
				cy[(size_t)j * ldy + i] = 0.0f;
	} else {
		bchk(p->c, backend_matmul_half(p->c, &b.c, cx, ldx, cyd, ldy, m));
		cy = bget(p->c, cyd, ny);
	}
	mag = bmag(&b, x, ldx, m, 1.0f);
	for (int j = 0; j < m; j++)
		for (int i = 0; i < ldy; i++)
			m2[(size_t)j * ldy + i] = i < rows ? mag[j * rows + i] : 1.0;
	if (t == QUANT_F32)
		bsame(k, name, shape, gy, cy, (int64_t)ny);
	else
		becmp(k, name, shape, gy, cy, m2, (int64_t)ny, 1e-5);
	bw_free(p, &b);
	free(x), free(cy), free(gy), free(mag), free(m2);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx);
	backend_mfree(p->c, cyd), backend_mfree(p->g, gyd);
}

/*
 * backend_dconv, DFlash2's grouped dynamic causal convolution: m rows of n
 * channels, K taps, groups of g channels, the coefficients of side `side`
 * of rows 2 K n/g wide (the drafter's layout); the same order on both,
 * so bit for bit.
 */
static void
be_dconv(struct kc *k, struct bpair *p, int m, int n, int K, int g, int side)
{
	int ldd = 2 * K * (n / g);
	float *x = frand(k, (size_t)m * n, -3, 3), *dyn = frand(k, (size_t)m * ldd, -1, 1);
	float *base = frand(k, (size_t)K * n, -1, 1), *c, *gy;
	float *cx = bput(p->c, x, (size_t)m * n), *gx = bput(p->g, x, (size_t)m * n);
	float *cd = bput(p->c, dyn, (size_t)m * ldd), *gd = bput(p->g, dyn, (size_t)m * ldd);
	float *cb = bput(p->c, base, (size_t)K * n), *gb = bput(p->g, base, (size_t)K * n);
	float *cyd = bput(p->c, NULL, (size_t)m * n), *gyd = bput(p->g, NULL, (size_t)m * n);
	size_t off = (size_t)side * K * (n / g);
	char shape[64];

	x[n / 2] = -0.0f;
	BOTH(p, backend_dconv(p->c, cx, m, n, cd + off, ldd, K, g, cb, cyd),
	    backend_dconv(p->g, gx, m, n, gd + off, ldd, K, g, gb, gyd));
	c = bget(p->c, cyd, (size_t)m * n), gy = bget(p->g, gyd, (size_t)m * n);
	snprintf(shape, sizeof shape, "%dx%d K=%d group=%d side %d", m, n, K, g, side);
	bsame(k, "be dconv", shape, gy, c, (int64_t)m * n);
	free(c), free(gy), free(x), free(dyn), free(base);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cd);
	backend_mfree(p->g, gd), backend_mfree(p->c, cb), backend_mfree(p->g, gb);
	backend_mfree(p->c, cyd), backend_mfree(p->g, gyd);
}

static void
be_conv(struct kc *k, struct bpair *p, int m, int n_ch, int dc)
{
	int ld = n_ch + 16, ns = dc - 1;
	size_t sz[] = { (size_t)m * ld, (size_t)n_ch * dc, (size_t)ns * n_ch,
	    (size_t)m * ns * n_ch, (size_t)m * n_ch };
	float lo[] = { -2, -1, -1, 0, 0 }, hi[] = { 2, 1, 1, 0, 0 };
	struct bop o;
	char shape[64];

	bop_new(k, p, &o, 5, sz, lo, hi);
	BOTH(p, backend_conv1d_silu(p->c, o.c[0], ld, m, n_ch, o.c[1], dc, o.c[2], o.c[3], o.c[4]),
	    backend_conv1d_silu(p->g, o.g[0], ld, m, n_ch, o.g[1], dc, o.g[2], o.g[3], o.g[4]));
	snprintf(shape, sizeof shape, "m=%d ch=%d k=%d", m, n_ch, dc);
	bop_cmp(k, p, &o, 4, "be conv1d_silu", shape, 1e-5);
	bop_cmp(k, p, &o, 2, "be conv1d state", shape, 0);
	bop_cmp(k, p, &o, 3, "be conv1d snap", shape, 0);
	bop_free(p, &o);
}

static void
be_gdn(struct kc *k, struct bpair *p, int m, int nk, int nv, int dk, int dv, int tiled,
    int hf, int chunk)
{
	int ld = 2 * nk * dk + nv * dv + 8;
	size_t hs = (size_t)nv * dk * dv;
	size_t sz[] = { (size_t)m * ld, (size_t)m * nv, (size_t)m * nv, (size_t)nv, (size_t)nv,
	    hs, (size_t)m * hs, (size_t)m * nv * dv };
	float lo[] = { -1, -3, -3, -2, -1, -0.5f, 0, 0 }, hi[] = { 1, 3, 3, -0.1f, 1, 0.5f, 0, 0 };
	struct backend_gdn g = { nk, nv, dk, dv, tiled, hf, 1e-6f };
	struct bop o;
	char shape[64], name[64];

	bop_new(k, p, &o, 8, sz, lo, hi);
	float *S0 = bget(p->g, o.g[5], hs);
	if (chunk)
		BOTH(p, backend_gdn_chunk(p->c, &g, m, o.c[0], ld, o.c[1], o.c[2], o.c[3], o.c[4],
		    o.c[5], o.c[7]), backend_gdn_chunk(p->g, &g, m, o.g[0], ld, o.g[1], o.g[2],
		    o.g[3], o.g[4], o.g[5], o.g[7]));
	else
		BOTH(p, backend_gdn_step(p->c, &g, m, o.c[0], ld, o.c[1], o.c[2], o.c[3], o.c[4],
		    o.c[5], o.c[6], o.c[7]), backend_gdn_step(p->g, &g, m, o.g[0], ld, o.g[1],
		    o.g[2], o.g[3], o.g[4], o.g[5], o.g[6], o.g[7]));
	snprintf(shape, sizeof shape, "m=%d k%dx%d v%dx%d %s%s", m, nk, dk, nv, dv,
	    tiled ? "tiled" : "grouped", hf ? " hf" : "");
	snprintf(name, sizeof name, "be gdn_%s out", chunk ? "chunk" : "step");
	bop_cmp(k, p, &o, 7, name, shape, chunk ? 1e-3 : 1e-4);
	snprintf(name, sizeof name, "be gdn_%s state", chunk ? "chunk" : "step");
	bop_cmp(k, p, &o, 5, name, shape, chunk ? 1e-3 : 1e-4);
	if (!chunk) {
		bop_cmp(k, p, &o, 6, "be gdn_step snap", shape, 1e-4);
		/* the m-row step == m one-row steps from the same state */
		float *all = bget(p->g, o.g[7], o.n[7]), *sall = bget(p->g, o.g[5], hs), *one, *s1;
		bchk(p->g, backend_write(p->g, o.g[5], S0, hs));
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_gdn_step(p->g, &g, 1, o.g[0] + (size_t)r * ld, ld,
			    o.g[1] + (size_t)r * nv, o.g[2] + (size_t)r * nv, o.g[3], o.g[4], o.g[5],
			    NULL, o.g[7] + (size_t)r * nv * dv));
		one = bget(p->g, o.g[7], o.n[7]);
		s1 = bget(p->g, o.g[5], hs);
		bsame(k, "be gdn_step m=1xm", shape, one, all, (int64_t)o.n[7]);
		bsame(k, "be gdn_step state 1xm", shape, s1, sall, (int64_t)hs);
		free(all), free(sall), free(one), free(s1);
	}
	free(S0);
	bop_free(p, &o);
}

/*
 * A group of n sequences through backend_conv1d_silu_seqs then
 * backend_gdn_step_seqs (a Gated DeltaNet layer of model_forward_seqs):
 * sequence i has rows[i] rows (pat 0: 1..4 mixed; 1: one each; 2: as 0
 * but sequence 1 (0 when alone) has 20, past k_conv_r's chunk), its own conv
 * state and S, and with snaps its own snapshots.  The GPU's group against
 * its own calls one sequence at a time from the same states, bit for bit
 * (outputs, states, snapshots), and against the CPU's group within
 * be_conv's and be_gdn's tolerances.
 */
struct seqs_case {
	int	n, m, cd, ld, nv, vd, dc, *rows;
	size_t	hs, cs;		/* a sequence's S, conv state */
	float	*h[9];		/* x, w, a, b, ssm_a, dt_bias, conv states, S: host inputs */
};

enum { SQ_X, SQ_W, SQ_A, SQ_B, SQ_SA, SQ_DT, SQ_C, SQ_S, SQ_IN,
	SQ_Y = SQ_IN, SQ_O, SQ_CSN, SQ_SSN, SQ_ALL };

static size_t
seqs_size(const struct seqs_case *q, int i)
{
	switch (i) {
	case SQ_X: return (size_t)q->m * q->ld;
	case SQ_W: return (size_t)q->cd * q->dc;
	case SQ_A: case SQ_B: return (size_t)q->m * q->nv;
	case SQ_SA: case SQ_DT: return (size_t)q->nv;
	case SQ_C: return (size_t)q->n * q->cs;
	case SQ_S: return (size_t)q->n * q->hs;
	case SQ_Y: return (size_t)q->m * q->cd;
	case SQ_O: return (size_t)q->m * q->vd;
	case SQ_CSN: return (size_t)q->m * q->cs;
	default: return (size_t)q->m * q->hs;
	}
}

/* The group on be: its buffers b[SQ_ALL] (inputs written afresh), one call each
 * (seqs) or a call a sequence. */
static void
seqs_run(struct backend *be, const struct seqs_case *q, const struct backend_gdn *g,
    float **b, int snaps, int seqs)
{
	struct backend_seq cq[64], gq[64];

	for (int i = 0; i < SQ_IN; i++)
		bchk(be, backend_write(be, b[i], q->h[i], seqs_size(q, i)));
	for (int i = SQ_IN; i < SQ_ALL; i++)
		bchk(be, backend_fill(be, b[i], 0.0f, seqs_size(q, i)));
	for (int i = 0, r = 0; i < q->n; r += q->rows[i++]) {
		cq[i] = (struct backend_seq){ q->rows[i], b[SQ_C] + i * q->cs,
		    snaps ? b[SQ_CSN] + r * q->cs : NULL };
		gq[i] = (struct backend_seq){ q->rows[i], b[SQ_S] + i * q->hs,
		    snaps ? b[SQ_SSN] + r * q->hs : NULL };
	}
	if (seqs) {
		bchk(be, backend_conv1d_silu_seqs(be, b[SQ_X], q->ld, q->n, cq, q->cd, b[SQ_W],
		    q->dc, b[SQ_Y]));
		bchk(be, backend_gdn_step_seqs(be, g, q->n, gq, b[SQ_Y], q->cd, b[SQ_A], b[SQ_B],
		    b[SQ_SA], b[SQ_DT], b[SQ_O]));
		return;
	}
	for (int i = 0, r = 0; i < q->n; r += q->rows[i++]) {
		bchk(be, backend_conv1d_silu(be, b[SQ_X] + r * q->ld, q->ld, q->rows[i], q->cd,
		    b[SQ_W], q->dc, cq[i].state, cq[i].snap, b[SQ_Y] + r * q->cd));
		bchk(be, backend_gdn_step(be, g, q->rows[i], b[SQ_Y] + r * q->cd, q->cd,
		    b[SQ_A] + r * q->nv, b[SQ_B] + r * q->nv, b[SQ_SA], b[SQ_DT], gq[i].state,
		    gq[i].snap, b[SQ_O] + r * q->vd));
	}
}

static void
be_seqs(struct kc *k, struct bpair *p, int n, int pat, int nk, int nv, int dk, int dv,
    int dc, int snaps)
{
	static const char *const nm[SQ_ALL] = { [SQ_C] = "be conv1d seqs state",
	    [SQ_S] = "be gdn_step seqs state", [SQ_Y] = "be conv1d seqs",
	    [SQ_O] = "be gdn_step seqs", [SQ_CSN] = "be conv1d seqs snap",
	    [SQ_SSN] = "be gdn_step seqs snap" };
	static const float lo[SQ_IN] = { -2, -1, -3, -3, -2, -1, -1, -0.5f };
	static const float hi[SQ_IN] = { 2, 1, 3, 3, -0.1f, 1, 1, 0.5f };
	struct seqs_case q = { .n = n, .cd = 2 * nk * dk + nv * dv, .nv = nv, .vd = nv * dv,
	    .dc = dc };
	struct backend_gdn g = { nk, nv, dk, dv, 1, 0, 1e-6f };
	float *c[SQ_ALL], *gs[SQ_ALL], *g1[SQ_ALL];
	char shape[64], name[64];

	if (n < 1 || n > 64)
		die(1, "be_seqs: %d sequences (1..64)", n);
	q.rows = xmalloc((size_t)n * sizeof *q.rows);
	for (int i = 0; i < n; i++) {
		q.rows[i] = pat == 1 ? 1 : 1 + (i * 5 + n) % 4;
		if (pat == 2 && i == (n > 1))
			q.rows[i] = 20;
		q.m += q.rows[i];
	}
	q.ld = q.cd + 16, q.hs = (size_t)nv * dk * dv, q.cs = (size_t)(dc - 1) * q.cd;
	for (int i = 0; i < SQ_IN; i++)
		q.h[i] = frand(k, (int64_t)seqs_size(&q, i), lo[i], hi[i]);
	for (int i = 0; i < SQ_ALL; i++) {
		c[i] = bput(p->c, NULL, seqs_size(&q, i));
		gs[i] = bput(p->g, NULL, seqs_size(&q, i));
		g1[i] = bput(p->g, NULL, seqs_size(&q, i));
	}
	seqs_run(p->c, &q, &g, c, snaps, 1);
	seqs_run(p->g, &q, &g, gs, snaps, 1);
	seqs_run(p->g, &q, &g, g1, snaps, 0);
	snprintf(shape, sizeof shape, "n=%d m=%d k%dx%d v%dx%d conv %d%s", n, q.m, nk, dk, nv,
	    dv, dc, snaps ? " snap" : "");
	for (int i = SQ_C; i < SQ_ALL; i++) {
		size_t sz = seqs_size(&q, i);
		float *a, *b;

		if (!snaps && (i == SQ_CSN || i == SQ_SSN))
			continue;
		a = bget(p->g, gs[i], sz), b = bget(p->g, g1[i], sz);
		bsame(k, nm[i], shape, a, b, (int64_t)sz);
		free(a), free(b);
		a = bget(p->g, gs[i], sz), b = bget(p->c, c[i], sz);
		snprintf(name, sizeof name, "%s cpu", nm[i]);
		becmp(k, name, shape, a, b, NULL, (int64_t)sz, i == SQ_C || i == SQ_CSN ? 0 :
		    i == SQ_Y ? 1e-5 : 1e-4);
		free(a), free(b);
	}
	for (int i = 0; i < SQ_ALL; i++) {
		if (i < SQ_IN)
			free(q.h[i]);
		backend_mfree(p->c, c[i]), backend_mfree(p->g, gs[i]), backend_mfree(p->g, g1[i]);
	}
	free(q.rows);
}

/*
 * backend_kv_store_seqs: n sequences of rows 1..4 (mixed) or one each, rows
 * kvd wide, each into caches of its own (64 rows, random: the rows not
 * stored must stay) at its own row.  The GPU's call against its own
 * backend_copy pairs a sequence at a time and against the CPU's call, bit
 * for bit, the whole caches.
 */
/* The n sequences' key and value caches of cs floats each on be, one after another. */
static float *
kv_caches(struct backend *be, float *(*cache)[2], int n, size_t cs)
{
	float *all = xmalloc((size_t)n * 2 * cs * 4);

	for (int i = 0; i < n; i++)
		for (int s = 0; s < 2; s++)
			bchk(be, backend_read(be, all + (size_t)(2 * i + s) * cs, cache[i][s], cs));
	return all;
}

static void
be_kv_seqs(struct kc *k, struct bpair *p, int n, int ones, int kvd)
{
	enum { CTX = 64 };
	struct backend_kv_seq sq[3][64];
	struct backend *be[3] = { p->c, p->g, p->g };
	float *kv[3][2], *cache[3][64][2], *h[2], *hc;
	size_t cs = (size_t)CTX * kvd;
	int m = 0;
	char shape[64];

	if (n < 1 || n > 64)
		die(1, "be_kv_seqs: %d sequences (1..64)", n);
	for (int i = 0; i < n; i++) {
		sq[0][i].rows = ones ? 1 : 1 + (i * 5 + n) % 4;
		sq[0][i].pos = (i * 7) % (CTX - 4);
		m += sq[0][i].rows;
	}
	h[0] = frand(k, (int64_t)m * kvd, -1, 1), h[1] = frand(k, (int64_t)m * kvd, -1, 1);
	hc = frand(k, (int64_t)cs, -2, 2);
	for (int b = 0; b < 3; b++) {
		for (int s = 0; s < 2; s++)
			kv[b][s] = bput(be[b], h[s], (size_t)m * kvd);
		for (int i = 0; i < n; i++) {
			cache[b][i][0] = bput(be[b], hc, cs), cache[b][i][1] = bput(be[b], hc, cs);
			sq[b][i] = (struct backend_kv_seq){ sq[0][i].rows, sq[0][i].pos,
			    cache[b][i][0], cache[b][i][1] };
		}
	}
	bchk(p->c, backend_kv_store_seqs(p->c, kv[0][0], kv[0][1], kvd, n, sq[0]));
	bchk(p->g, backend_kv_store_seqs(p->g, kv[1][0], kv[1][1], kvd, n, sq[1]));
	for (int i = 0, r = 0; i < n; r += sq[2][i++].rows)
		for (int s = 0; s < 2; s++)
			bchk(p->g, backend_copy(p->g, cache[2][i][s] + (size_t)sq[2][i].pos * kvd,
			    kv[2][s] + (size_t)r * kvd, (size_t)sq[2][i].rows * kvd));
	snprintf(shape, sizeof shape, "n=%d m=%d kvd=%d", n, m, kvd);
	float *got = kv_caches(be[1], cache[1], n, cs), *own = kv_caches(be[2], cache[2], n, cs);
	float *cpu = kv_caches(be[0], cache[0], n, cs);
	bsame(k, "be kv_store seqs", shape, got, own, (int64_t)n * 2 * cs);
	free(got);
	got = kv_caches(be[1], cache[1], n, cs);	/* unbroken */
	bsame(k, "be kv_store seqs cpu", shape, got, cpu, (int64_t)n * 2 * cs);
	free(got), free(own), free(cpu);
	for (int b = 0; b < 3; b++) {
		backend_mfree(be[b], kv[b][0]), backend_mfree(be[b], kv[b][1]);
		for (int i = 0; i < n; i++)
			backend_mfree(be[b], cache[b][i][0]), backend_mfree(be[b], cache[b][i][1]);
	}
	free(h[0]), free(h[1]), free(hc);
}

/*
 * backend_attention_seqs (model_forward_seqs's attention): n sequences of
 * rows 1..4 (mixed) or one each, at positions 0..1000 differing by
 * sequence, each against caches of its own, q in the gated layout (query ;
 * gate per head: the group's repack).  The GPU's call against its own
 * backend_attention a sequence, bit for bit, and against the CPU's call
 * within the attention tolerance.
 */
static void
be_attention_seqs(struct kc *k, struct bpair *p, int n, int ones, int nh, int nkv, int hd)
{
	int qhs = 2 * hd, ldq = nh * qhs, kvd = nkv * hd, od = nh * hd, m = 0;
	struct backend_attn a = { nh, nkv, hd, 1.0f / sqrtf((float)hd), 0, 0, 1, 0, NULL, 0 };
	struct backend_kv_seq sq[2][64];
	struct backend *be[2] = { p->c, p->g };
	float *hq, *q[2], *o[3], *got, *own, *cpu;
	char shape[80];

	if (n < 1 || n > 64)
		die(1, "be_attention_seqs: %d sequences (1..64)", n);
	for (int i = 0; i < n; i++) {
		sq[0][i].rows = ones ? 1 : 1 + (i * 5 + n) % 4;
		sq[0][i].pos = i == 1 ? 0 : (i * 389 + 7 * n) % 1001;
		m += sq[0][i].rows;
	}
	hq = frand(k, (int64_t)m * ldq, -1, 1);
	for (int i = 0; i < n; i++) {
		size_t cs = (size_t)(sq[0][i].pos + sq[0][i].rows) * kvd;
		float *hk = frand(k, (int64_t)cs, -1, 1), *hv = frand(k, (int64_t)cs, -1, 1);

		for (int b = 0; b < 2; b++)
			sq[b][i] = (struct backend_kv_seq){ sq[0][i].rows, sq[0][i].pos,
			    bput(be[b], hk, cs), bput(be[b], hv, cs) };
		free(hk), free(hv);
	}
	for (int b = 0; b < 2; b++)
		q[b] = bput(be[b], hq, (size_t)m * ldq);
	o[0] = bput(p->c, NULL, (size_t)m * od);
	o[1] = bput(p->g, NULL, (size_t)m * od), o[2] = bput(p->g, NULL, (size_t)m * od);
	bchk(p->c, backend_attention_seqs(p->c, &a, n, sq[0], q[0], ldq, qhs, o[0]));
	bchk(p->g, backend_attention_seqs(p->g, &a, n, sq[1], q[1], ldq, qhs, o[1]));
	for (int i = 0, r = 0; i < n; r += sq[1][i++].rows) {
		struct backend_attn ai = a;

		ai.batched = sq[1][i].rows >= 2;
		bchk(p->g, backend_attention(p->g, &ai, q[1] + (size_t)r * ldq, ldq, qhs,
		    sq[1][i].kc, sq[1][i].vc, sq[1][i].rows, sq[1][i].pos, o[2] + (size_t)r * od));
	}
	snprintf(shape, sizeof shape, "n=%d m=%d h=%d/%d hd=%d", n, m, nh, nkv, hd);
	got = bget(p->g, o[1], (size_t)m * od), own = bget(p->g, o[2], (size_t)m * od);
	cpu = bget(p->c, o[0], (size_t)m * od);
	bsame(k, "be attention seqs", shape, got, own, (int64_t)m * od);
	free(got);
	got = bget(p->g, o[1], (size_t)m * od);		/* unbroken */
	becmp(k, "be attention seqs cpu", shape, got, cpu, NULL, (int64_t)m * od, 1e-4);
	free(got), free(own), free(cpu), free(hq);
	for (int b = 0; b < 2; b++) {
		backend_mfree(be[b], q[b]);
		for (int i = 0; i < n; i++)
			backend_mfree(be[b], sq[b][i].kc), backend_mfree(be[b], sq[b][i].vc);
	}
	backend_mfree(p->c, o[0]), backend_mfree(p->g, o[1]), backend_mfree(p->g, o[2]);
}

/* Magnitudes for the fused products: sum |w t| of the normed input (mn)
 * and, for y = silu(x.Wg) * (x.Wu), the first-order error bound. */
static void
fused_mags(const struct bw *wg, const struct bw *wu, const float *x, const float *nw,
    int m, int n, int nff, double *mn, double *my)
{
	double *t = xmalloc((size_t)n * 8);

	for (int j = 0; j < m; j++) {
		const float *xr = x + (size_t)j * n;
		double ss = 0;
		for (int e = 0; e < n; e++)
			ss += (double)xr[e] * xr[e];
		double sc = 1.0 / sqrt(ss / n + 1e-6);
		for (int e = 0; e < n; e++)
			t[e] = xr[e] * sc * nw[e];
		for (int i = 0; i < nff; i++) {
			const float *gr = wg->wf + (size_t)i * n, *ur = wu->wf + (size_t)i * n;
			double an = 0, ag = 0, au = 0, g = 0, u = 0;
			for (int e = 0; e < n; e++) {
				an += fabs(ur[e] * t[e]);
				ag += fabs(gr[e] * xr[e]);
				au += fabs(ur[e] * xr[e]);
				g += (double)gr[e] * xr[e];
				u += (double)ur[e] * xr[e];
			}
			mn[(size_t)j * nff + i] = an + 1e-20;
			my[(size_t)j * nff + i] = 1.1 * ag * fabs(u) + (fabs(g) + 1) * au +
			    0.05 * ag * au + 1e-20;
		}
	}
	free(t);
}

static void
be_fused(struct kc *k, struct bpair *p, int t, int m, int n, int nff)
{
	struct bw wg, wu;
	size_t sz[] = { (size_t)m * n, (size_t)n, (size_t)m * nff, (size_t)m * nff,
	    (size_t)m * nff };
	float lo[] = { -1, 0.5f, 0, 0, 0 }, hi[] = { 1, 1.5f, 0, 0, 0 };
	double *mn = xmalloc((size_t)m * nff * 8), *my = xmalloc((size_t)m * nff * 8);
	struct bop o;
	char shape[64], name[64];

	bw_new(k, p, &wg, t, nff, n, 1.0f);
	bw_new(k, p, &wu, t, nff, n, 1.0f);
	bop_new(k, p, &o, 5, sz, lo, hi);
	fused_mags(&wg, &wu, o.h[0], o.h[1], m, n, nff, mn, my);
	const struct backend_weight *Wc[2] = { &wg.c, &wu.c }, *Wg[2] = { &wg.g, &wu.g };
	float *Yc[2] = { o.c[2], o.c[3] }, *Yg[2] = { o.g[2], o.g[3] };
	BOTH(p, backend_rmsnorm_matmul(p->c, o.c[0], m, n, o.c[1], 1e-6f, 2, Wc, Yc),
	    backend_rmsnorm_matmul(p->g, o.g[0], m, n, o.g[1], 1e-6f, 2, Wg, Yg));
	snprintf(shape, sizeof shape, "m=%d %dx%d", m, nff, n);
	snprintf(name, sizeof name, "be rmsnorm_matmul %s", quant_name(t));
	float *c = bget(p->c, o.c[3], o.n[3]), *g = bget(p->g, o.g[3], o.n[3]);
	becmp(k, name, shape, g, c, mn, (int64_t)o.n[3], 2e-2);
	free(c), free(g);
	BOTH(p, backend_matmul_swiglu(p->c, &wg.c, &wu.c, o.c[0], m, o.c[4]),
	    backend_matmul_swiglu(p->g, &wg.g, &wu.g, o.g[0], m, o.g[4]));
	snprintf(name, sizeof name, "be matmul_swiglu %s", quant_name(t));
	c = bget(p->c, o.c[4], o.n[4]), g = bget(p->g, o.g[4], o.n[4]);
	becmp(k, name, shape, g, c, my, (int64_t)o.n[4], 2e-2);
	free(c), free(g), free(mn), free(my);
	bop_free(p, &o);
	bw_free(p, &wg), bw_free(p, &wu);
}

/*
 * backend_argmax_map (a masked head's pick in a chain) on 3 rows of 300:
 * the rows' maxima tie (twice, -0 with +0 in the second), the third holds
 * NaN and +inf, against ranks_argmax on the host with a map that runs
 * down (so the lower id is the later column).
 */
static void
be_argmax_map(struct kc *k, struct bpair *p)
{
	enum { R = 3, N = 300 };
	float x[R * N];
	int32_t map[N], want[R], oc[R], og[R];
	struct ranks rk = { map, N, 0 };
	double d = 0;

	for (int i = 0; i < N; i++) {
		map[i] = 5000 - 7 * i;
		x[i] = (float)((i * 37) % 101) - 60;	/* 40 at 3 columns */
		x[N + i] = i == 20 ? -0.0f : i == 250 ? 0.0f : -1.0f - i;
		x[2 * N + i] = i == 7 ? NAN : i == 99 ? INFINITY : (float)i;
	}
	for (int r = 0; r < R; r++)
		want[r] = ranks_argmax(&rk, x + r * N);
	float *xc = bput(p->c, x, R * N), *xg = bput(p->g, x, R * N);
	float *mc = bput(p->c, (const float *)map, N), *mg = bput(p->g, (const float *)map, N);
	float *dc = bput(p->c, NULL, R), *dg = bput(p->g, NULL, R), *hc, *hg;

	BOTH(p, backend_argmax_map(p->c, xc, N, R, N, (const int32_t *)mc, (int32_t *)dc),
	    backend_argmax_map(p->g, xg, N, R, N, (const int32_t *)mg, (int32_t *)dg));
	hc = bget(p->c, dc, R), hg = bget(p->g, dg, R);
	memcpy(oc, hc, sizeof oc), memcpy(og, hg, sizeof og);
	d = memcmp(oc, want, sizeof oc) != 0 || memcmp(og, want, sizeof og) != 0;
	if (k->brk)
		d = 1;
	report(k, "be argmax_map", "3x300, ties, NaN, +inf", d, d == 0);
	free(hc), free(hg);
	backend_mfree(p->c, xc), backend_mfree(p->g, xg), backend_mfree(p->c, mc);
	backend_mfree(p->g, mg), backend_mfree(p->c, dc), backend_mfree(p->g, dg);
}

/*
 * The chain's ops (backend_embed_dev, backend_argmax_dev) on b's rows: ids
 * from backend memory, one of them a failed pick (-1: row 0), must give
 * the rows backend_embed gave for ids (hc, CPU; ids[1] is 0), and their
 * picks into backend memory the picks ic of backend_argmax.
 */
static void
be_dev_ids(struct kc *k, struct bpair *p, struct bw *b, const float *hc, int ld,
    const int32_t *ic)
{
	int32_t di[5] = { 3, -1, 999, 3, 512 }, oc[5], og[5];
	float *dc = bput(p->c, (const float *)di, 5), *dg = bput(p->g, (const float *)di, 5);
	float *yc = bput(p->c, NULL, 5 * ld), *yg = bput(p->g, NULL, 5 * ld), *ec, *eg, *pc, *pg;
	double d = 0;

	BOTH(p, backend_embed_dev(p->c, &b->c, (const int32_t *)dc, 5, yc, ld),
	    backend_embed_dev(p->g, &b->g, (const int32_t *)dg, 5, yg, ld));
	ec = bget(p->c, yc, 5 * ld), eg = bget(p->g, yg, 5 * ld);
	for (int i = 0; i < 5; i++)	/* the pad past 256 is never written: not compared */
		d += memcmp(ec + (size_t)i * ld, hc + (size_t)i * ld, 256 * 4) != 0 ||
		    memcmp(eg + (size_t)i * ld, hc + (size_t)i * ld, 256 * 4) != 0;
	if (k->brk)
		d = 1;
	report(k, "be embed_dev", "5 of 1000x256, id -1", d, d == 0);
	BOTH(p, backend_argmax_dev(p->c, yc, ld, 5, 256, (int32_t *)dc),
	    backend_argmax_dev(p->g, yg, ld, 5, 256, (int32_t *)dg));
	pc = bget(p->c, dc, 5), pg = bget(p->g, dg, 5);
	memcpy(oc, pc, sizeof oc), memcpy(og, pg, sizeof og);
	d = memcmp(oc, ic, sizeof oc) != 0 || memcmp(og, ic, sizeof og) != 0;
	if (k->brk)
		d = 1;
	report(k, "be argmax_dev", "5x256 ld=288", d, d == 0);
	free(pc), free(pg);
	be_argmax_map(k, p);
	free(ec), free(eg);
	backend_mfree(p->c, dc), backend_mfree(p->g, dg);
	backend_mfree(p->c, yc), backend_mfree(p->g, yg);
}

static void
be_embed_argmax(struct kc *k, struct bpair *p, int t)
{
	struct bw b;
	int32_t ids[5] = { 3, 0, 999, 3, 512 }, ic[5], ig[5];
	int ld = 256 + 32;
	float *cy = bput(p->c, NULL, 5 * ld), *gy = bput(p->g, NULL, 5 * ld), *hc, *hg;
	char name[64];
	double d = 0;

	bw_new(k, p, &b, t, 1000, 256, 1.0f);
	BOTH(p, backend_embed(p->c, &b.c, ids, 5, cy, ld), backend_embed(p->g, &b.g, ids, 5, gy, ld));
	hc = bget(p->c, cy, 5 * ld);
	hg = bget(p->g, gy, 5 * ld);
	snprintf(name, sizeof name, "be embed %s", quant_name(t));
	becmp(k, name, "5 of 1000x256 ld=288", hg, hc, NULL, 5 * ld, 0);
	BOTH(p, backend_argmax(p->c, cy, ld, 5, 256, ic), backend_argmax(p->g, gy, ld, 5, 256, ig));
	for (int i = 0; i < 5; i++)
		d = fmax(d, ic[i] != ig[i]);
	if (k->brk)
		d = 1;
	report(k, "be argmax", "5x256 ld=288", d, d == 0);
	be_dev_ids(k, p, &b, hc, ld, ic);
	{	/* the top 20 of each row at temperature 0.9 */
		float vc[5 * 20], vg[5 * 20];
		int32_t tc[5 * 20], tg[5 * 20];

		BOTH(p, backend_topk(p->c, cy, ld, 5, 256, 20, 0.9f, vc, tc),
		    backend_topk(p->g, gy, ld, 5, 256, 20, 0.9f, vg, tg));
		d = memcmp(tc, tg, sizeof tc) != 0 || memcmp(vc, vg, sizeof vc) != 0;
		if (k->brk)
			d = 1;
		report(k, "be topk", "5x256 ld=288 k=20", d, d == 0);
	}
	{	/* a draw from the first row at temperature 0.9, top-p 0.95 */
		struct sample_params sp;
		struct sampler *sm;
		char err[UTIL_ERRLEN];
		int32_t dc, dg;

		sample_defaults(&sp);
		sp.temp = 0.9f, sp.top_p = 0.95f, sp.seed = 11;
		if ((sm = sample_new(&sp, 256, err)) == NULL)
			die(1, "be draw: %s", err);
		d = 0;
		for (int pos = 0; pos < 16; pos++) {
			BOTH(p, backend_draw(p->c, cy, sm, 2, pos, &dc),
			    backend_draw(p->g, gy, sm, 2, pos, &dg));
			d += dc != dg;
		}
		if (k->brk)
			d = 1;
		report(k, "be draw", "256 temp=0.9 top-p=0.95 x16", d, d == 0);
		sample_free(sm);
	}
	{	/* penalties on the second row, then its bits */
		const int32_t tok[4] = { 3, 200, 17, 0 }, cnt[4] = { 1, 4, 2, 7 };
		float *rc, *rg;

		BOTH(p, backend_penalize(p->c, cy + ld, 256, tok, cnt, 4, 1.25f, 0.5f, 0.125f),
		    backend_penalize(p->g, gy + ld, 256, tok, cnt, 4, 1.25f, 0.5f, 0.125f));
		rc = bget(p->c, cy + ld, 256);
		rg = bget(p->g, gy + ld, 256);
		d = 0;
		for (int i = 0; i < 256; i++)
			d += !(isnan(rc[i]) && isnan(rg[i])) && memcmp(&rc[i], &rg[i], 4) != 0;
		if (k->brk)
			d = 1;
		report(k, "be penalize", "256, 4 tokens", d, d == 0);
		free(rc), free(rg);
	}
	free(hc), free(hg);
	backend_mfree(p->c, cy), backend_mfree(p->g, gy);
	bw_free(p, &b);
}

/*
 * The last logits of a prefill of np tokens and (ng > 0) ng greedy ids
 * after them, on both backends (MODEL given).  np = 8: the fixed prompt;
 * longer prompts (the prompt GEMMs past the step rows, with the kind
 * backend_gemm_set picked, and the CPU computing those products with the
 * GPU's numerics of that kind, backend_cpu_gemm_emulate, set by the
 * caller; gemm: its name for the line) repeat it with the position added.
 *
 * The tolerances come from the CPU's own noise (cpu_noise: a 40-token
 * prompt's prefill against the same prompt one token at a time, the
 * decode path, and against the prefill with the plain attention order;
 * the larger of the two).  All are right; they differ by float order
 * alone, and on weights that take int8 activations an order difference
 * that flips one activation's rounding moves the logits far more than it
 * does in float (on SmolLM2's Q4_1 the CPU's two attention orders alone
 * move them by 0.48 here, up to 1.2 on other prompts), and the K-quants'
 * prefill product runs in float (cuBLAS) on the GPU, not on int8
 * activations.  On SmolLM2's Q4_1 the CPU's prefill and steps give the
 * same bits (batch-invariant attention, no delta rule), so the attention
 * order is its noise (-n: 0.21 relative, 0.48 absolute).  The
 * GPU's logits must be within noise_tol, max(1e-2, 3 x that noise), of
 * the CPU's prefill, relative to 1 + |logit| (at most 1: the broken arm
 * adds 4; at least INT8_LOGITS_TOL on a model with int8-activation
 * products); and its greedy ids may
 * leave the CPU's only at a step where the CPU's top-2 margin is below
 * noise_near, max(1e-3, 3 x the noise's largest logit difference, 2 x the
 * prefill logits' largest difference just measured): a near-tie at the
 * precision the two backends have just shown.
 * The exact checks of such a model are the GPU's argmax gate and its
 * greedy ids against llama.cpp's goldens (gpu-run.sh).
 */
static void
be_model(struct kc *k, struct bpair *p, const char *path, int np, int ng, struct noise *nz,
    const char *gemm)
{
	enum { NPMAX = 64, NGMAX = 16 };
	struct backend *be[2] = { p->c, p->g };
	int32_t out[2][NGMAX], prompt[NPMAX];
	float *lg[2] = { NULL, NULL };
	double mag = 0, gap = 0, margin[NGMAX];
	char err[UTIL_ERRLEN], shape[128];
	int nv = 0, div = -1;

	np = np < NPMAX ? np : NPMAX, ng = ng < NGMAX ? ng : NGMAX;
	if (!nz->done)	/* the CPU's noise, once per model */
		cpu_noise(p->c, path, nz);
	for (int b = 0; b < 2; b++) {
		struct model *md = model_open(path, be[b], err);
		struct state *st;
		if (md == NULL)
			die(1, "%s", err);
		if ((st = model_state_new(md, np + NGMAX + 1, 0, err)) == NULL)
			die(1, "%s", err);
		nv = model_hparams(md)->n_vocab;
		if (b == 0)	/* the prompt in the model's vocabulary, once it is open */
			model_prompt(prompt, np, nv);
		lg[b] = xmalloc((size_t)nv * 4);
		float *first = xmalloc((size_t)nv * 4);
		if (model_forward(md, st, prompt, np, MODEL_PREFILL, first, NULL) != 0)
			die(1, "%s: %s", backend_name(be[b]), model_errmsg(md));
		memcpy(lg[b], first, (size_t)nv * 4);
		for (int i = 0; i < ng; i++) {
			int32_t t = 0;
			for (int j = 1; j < nv; j++)
				if (first[j] > first[t])
					t = j;
			out[b][i] = t;
			if (b == 0) {	/* the CPU's top-2 margin at this step */
				float s = -INFINITY;
				for (int j = 0; j < nv; j++)
					if (j != t && first[j] > s)
						s = first[j];
				margin[i] = first[t] - s;
			}
			if (i + 1 < ng && model_forward(md, st, &t, 1, 0, first, NULL) != 0)
				die(1, "%s: %s", backend_name(be[b]), model_errmsg(md));
		}
		free(first);
		state_free(st);
		model_close(md);
	}
	for (int j = 0; j < nv; j++) {
		mag = fmax(mag, fabs((double)lg[0][j]));
		gap = fmax(gap, fabs((double)lg[1][j] - lg[0][j]));
	}
	for (int i = ng - 1; i >= 0; i--)
		if (out[0][i] != out[1][i])
			div = i;
	snprintf(shape, sizeof shape, "prefill %d%s, logits of %d (cpu noise %.2g: order %.2g, "
	    "steps %.2g)", np, gemm, nv, nz->rel, nz->order_rel, nz->steps_rel);
	bbrk(k, lg[1], nv, mag);
	/* a prompt GEMM's line: the CPU ran its products with the GPU's numerics
	 * (backend_cpu_gemm_emulate; the bf16 GEMM's rounding moves a random fixture's
	 * logits by up to 0.59, g4-nvfp4 on an H100 and in the CPU's emulation alike) */
	becmp(k, "model prefill logits", shape, lg[1], lg[0], NULL, nv, noise_tol(nz));
	if (ng > 0) {
		double near = noise_near(nz, gap), mm = 1e30;
		for (int i = 0; i < ng; i++)
			mm = fmin(mm, margin[i]);
		if (div < 0)
			snprintf(shape, sizeof shape, "prefill %d%s, greedy %d (cpu min margin %.3g)",
			    np, gemm, ng, mm);
		else
			snprintf(shape, sizeof shape, "prefill %d%s, greedy %d, left at %d (cpu margin "
			    "%.3g, near %.3g)", np, gemm, ng, div, margin[div], near);
		report(k, "model greedy cpu=cuda", shape, div < 0 ? 0 : 1,
		    (div < 0 || margin[div] < near) && !k->brk);
	}
	free(lg[0]), free(lg[1]);
}

/*
 * The logits of a prefill of 8 tokens, 3 decode steps (the first run as
 * is, the second recorded, the third replayed: backend_graph_*) and a K=3
 * verify (4 rows, every row's logits) on the GPU backend, into lg
 * (8 * n_vocab floats, allocated here; *nv: n_vocab).  Returns
 * backend_pdl_set(be, pdl): whether it ran with PDL on.
 */
static int
pdl_run(struct backend *be, const char *path, int pdl, float **lg, int *pnv)
{
	int32_t prompt[8], ver[4] = { 11, 12, 13, 14 };
	char err[UTIL_ERRLEN];
	struct model *md;
	struct state *st;
	int nv, on;

	if ((on = backend_pdl_set(be, pdl)) < 0)
		die(1, "%s: %s", backend_name(be), backend_errmsg(be));
	if ((md = model_open(path, be, err)) == NULL ||
	    (st = model_state_new(md, 8 + 3 + 4 + 1, 4, err)) == NULL)
		die(1, "%s", err);
	*pnv = nv = model_hparams(md)->n_vocab;
	*lg = xmalloc((size_t)8 * nv * 4);
	model_prompt(prompt, 8, nv);
	if (model_forward(md, st, prompt, 8, MODEL_PREFILL, *lg, NULL) != 0)
		die(1, "%s: %s", backend_name(be), model_errmsg(md));
	for (int i = 0; i < 3; i++) {
		int32_t t = 1 + 5 * i;
		if (model_forward(md, st, &t, 1, 0, *lg + (size_t)(1 + i) * nv, NULL) != 0)
			die(1, "%s: %s", backend_name(be), model_errmsg(md));
	}
	if (model_forward(md, st, ver, 4, MODEL_LOGITS_ALL | MODEL_VERIFY, *lg + (size_t)4 * nv,
	    NULL) != 0)
		die(1, "%s: %s", backend_name(be), model_errmsg(md));
	state_free(st);
	model_close(md);
	return on;
}

/*
 * Programmatic dependent launch changes when kernels start, never what
 * they compute: the logits of pdl_run with it on and off, bit for bit
 * (with it unavailable, below sm_90, both runs are plain launches).
 */
static void
be_pdl(struct kc *k, struct bpair *p, const char *path)
{
	float *on = NULL, *off = NULL;
	char shape[128];
	int nv = 0, pdl = pdl_run(p->g, path, 1, &on, &nv);

	pdl_run(p->g, path, 0, &off, &nv);
	if (backend_pdl_set(p->g, 1) < 0)	/* back to the default for what follows */
		die(1, "%s: %s", backend_name(p->g), backend_errmsg(p->g));
	snprintf(shape, sizeof shape, "prefill 8, 3 decode, K=3 verify; logits of %d%s", nv,
	    pdl ? "" : " (pdl unavailable)");
	bsame(k, "model pdl on=off", shape, on, off, (int64_t)8 * nv);
	free(on), free(off);
}

/* --- the Gemma-4 vision tower on both backends -------------------------- */

/* 1 when path is a checkpoint directory whose config.json holds a tower
 * vision_open takes (vision_config_why: Step3p7's checkpoints have a
 * vision_config too, and vis_open would end the run on them). */
static int
vis_has_tower(const char *path)
{
	char f[4096], err[UTIL_ERRLEN];
	struct json *j;
	size_t n;
	char *text;
	int yes;

	snprintf(f, sizeof f, "%s/config.json", path);
	if ((text = util_read_file(f, &n, err)) == NULL)
		return 0;
	j = json_parse(text, n, err);
	free(text);
	yes = j != NULL && vision_config_why(j) == NULL;
	json_free(j);
	return yes;
}

static int
vis_namecmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The PNG and JPEG files of dir/images in name order (*n of them, malloc'd). */
static char **
vis_images(const char *dir, int *n)
{
	enum { MAXIMG = 64 };
	char d[4096], **v = xmalloc(MAXIMG * sizeof *v);
	struct dirent *e;
	DIR *dp;

	*n = 0;
	snprintf(d, sizeof d, "%s/images", dir);
	if ((dp = opendir(d)) == NULL)
		return v;
	while ((e = readdir(dp)) != NULL && *n < MAXIMG) {
		const char *x = strrchr(e->d_name, '.');
		if (x == NULL || (strcmp(x, ".png") && strcmp(x, ".jpg") && strcmp(x, ".jpeg")))
			continue;
		v[*n] = xmalloc(strlen(d) + strlen(e->d_name) + 2);
		sprintf(v[(*n)++], "%s/%s", d, e->d_name);
	}
	closedir(dp);
	qsort(v, *n, sizeof *v, vis_namecmp);
	return v;
}

/* The tower at path opened on be. */
static struct vision *
vis_open(struct backend *be, const char *path)
{
	char err[UTIL_ERRLEN];
	struct vision *v = vision_open(path, be, err);

	if (v == NULL)
		die(1, "%s: %s", backend_name(be), err);
	return v;
}

/*
 * Tower v (on the backend named who) run on img: its soft tokens (stages <
 * 0: vision_encode, [n_tok][n_embd_text]) or its hidden rows after stages
 * (vision_hidden, [gw gh][n_embd]); host memory, malloc'd.
 */
static float *
vis_run(struct vision *v, const char *who, const struct vision_image *img, int stages)
{
	const struct vision_hparams *hp = vision_hparams(v);
	float *out = xmalloc((stages < 0 ? (size_t)img->n_tok * hp->n_embd_text :
	    (size_t)img->gw * img->gh * hp->n_embd) * sizeof *out);

	if ((stages < 0 ? vision_encode(v, img, out) : vision_hidden(v, img, stages, out)) != 0)
		die(1, "%s: %s", who, vision_errmsg(v));
	return out;
}

/*
 * The floor of the vision lines' tolerance for a tower with half products
 * (vision_hparams.half): a float-order difference upstream flips the
 * rounding of an activation to BF16 (F16) now and then, a move of up to
 * 2^-9 (2^-12) of it, which later layers carry on.  The CPU's own two
 * orders show it (g4-vision's tower in BF16: cpu noise up to 2.7e-3 on its
 * images, 5.8e-8 where no rounding flipped; F16 3.3e-4 to 5.9e-4; F32
 * 4.5e-7 to 9.5e-7; an AVX2 CPU against cpu:scalar), but the GPU's
 * orders are others, so three times that noise may fall short; a wrong op
 * still moves a soft token (of size 1 to 2) by its own size.
 */
#define VIS_HALF_TOL 1e-2

/* The vision lines' tolerance on a tower of hp with CPU noise noise. */
static double
vis_tol(const struct vision_hparams *hp, double noise)
{
	return fmax(hp->half ? VIS_HALF_TOL : 1e-3, 3 * noise);
}

/*
 * Each value's scale in rows of w: 1 + the largest |value| of its row.  A
 * flipped rounding upstream moves a hidden row by a share of the row's
 * size, its small values as much as its large ones.
 */
static void
vis_rowmag(const float *c, int64_t rows, int w, double *mag)
{
	for (int64_t r = 0; r < rows; r++) {
		double big = 0;

		for (int i = 0; i < w; i++)
			big = fmax(big, fabs(c[r * w + i]));
		for (int i = 0; i < w; i++)
			mag[r * w + i] = 1.0 + big;
	}
}

/*
 * Where the GPU's tower leaves the CPU's, stage by stage, on img: its
 * hidden rows after the patch embedding, then after each layer's
 * attention and feed-forward block, against the CPU's, each within 3 x
 * the CPU's own noise there (cpu:scalar sc), at least 1e-3 of 1 + its
 * size; a tower with half products, VIS_HALF_TOL of 1 + its row's
 * largest value (vis_rowmag: session 24's H100 saw 0.0153 on a value
 * under 0.53 of g4-vision's BF16 layer 1, with no CPU order flipping it).
 */
static void
vis_stages(struct kc *k, struct vision *vc, struct vision *vs, struct vision *vg,
    const struct vision_image *img)
{
	const struct vision_hparams *hp = vision_hparams(vc);
	int64_t n = (int64_t)img->gw * img->gh * hp->n_embd;
	double *mag = hp->half ? xmalloc((size_t)n * sizeof *mag) : NULL;

	for (int s = 0; s <= 2 * hp->n_layer; s++) {
		float *c = vis_run(vc, "cpu", img, s), *q = vis_run(vs, "cpu:scalar", img, s);
		float *g = vis_run(vg, "gpu", img, s);
		double noise = 0, ab = 0;
		char shape[96];

		noise_add(c, q, (int)n, &noise, &ab);
		if (hp->half)
			vis_rowmag(c, (int64_t)img->gw * img->gh, hp->n_embd, mag);
		if (s == 0)
			snprintf(shape, sizeof shape, "patch embedding, %lld values (cpu noise %.2g)",
			    (long long)n, noise);
		else
			snprintf(shape, sizeof shape, "layer %d %s, %lld values (cpu noise %.2g)",
			    (s - 1) / 2, s % 2 ? "attention" : "feed-forward", (long long)n, noise);
		becmp(k, "vision hidden", shape, g, c, hp->half ? mag : NULL, n, vis_tol(hp, noise));
		free(c), free(q), free(g);
	}
	free(mag);
}

/* An image of gw x gh patches of random pixels (no images folder). */
static void
vis_random(struct kc *k, const struct vision_hparams *hp, int gw, int gh,
    struct vision_image *img)
{
	size_t n = (size_t)gw * gh * hp->patch * hp->patch * 3;

	memset(img, 0, sizeof *img);
	img->gw = gw, img->gh = gh, img->rw = img->w = gw * hp->patch;
	img->rh = img->h = gh * hp->patch;
	img->n_tok = gw * gh / (hp->pool * hp->pool);
	img->px = frand(k, (int64_t)n, 0.0f, 1.0f);
}

/* The mmproj GGUFs of dir (mmproj-*.gguf) in name order (*n of them, malloc'd). */
static char **
vis_mmprojs(const char *dir, int *n)
{
	enum { MAXT = 16 };
	char **v = xmalloc(MAXT * sizeof *v);
	struct dirent *e;
	DIR *dp;

	*n = 0;
	if ((dp = opendir(dir)) == NULL)
		return v;
	while ((e = readdir(dp)) != NULL && *n < MAXT) {
		size_t l = strlen(e->d_name);
		if (strncmp(e->d_name, "mmproj-", 7) != 0 || l < 12 ||
		    strcmp(e->d_name + l - 5, ".gguf") != 0)
			continue;
		v[*n] = xmalloc(strlen(dir) + l + 2);
		sprintf(v[(*n)++], "%s/%s", dir, e->d_name);
	}
	closedir(dp);
	qsort(v, *n, sizeof *v, vis_namecmp);
	return v;
}

/*
 * One tower (tower: the checkpoint directory, or an mmproj GGUF of it,
 * named by who in the lines) on both backends over the images files[nimg]
 * (prepared for a budget of max_tokens soft tokens; 0: the tower's own),
 * or one random image; be_vision says what is compared and how.
 */
static void
vis_tower(struct kc *k, struct bpair *p, struct backend *sc, const char *tower,
    const char *who, char **files, int nimg, int max_tokens)
{
	struct vision *v = vis_open(p->c, tower), *vs = vis_open(sc, tower);
	struct vision *vg = vis_open(p->g, tower);
	const struct vision_hparams *hp = vision_hparams(v);
	char err[UTIL_ERRLEN], shape[192];

	for (int i = 0; i < (nimg > 0 ? nimg : 1); i++) {
		struct vision_image img;
		const char *name = nimg > 0 ? strrchr(files[i], '/') + 1 : "random";
		int64_t n;
		double noise = 0, ab = 0;

		if (nimg == 0)
			vis_random(k, hp, 6 * hp->pool, 9 * hp->pool, &img);
		else {
			size_t len;
			char *buf = util_read_file(files[i], &len, err);
			if (buf == NULL ||
			    vision_prepare(v, buf, len, NULL, max_tokens, &img, err) != 0)
				die(1, "%s: %s", files[i], err);
			free(buf);
		}
		n = (int64_t)img.n_tok * hp->n_embd_text;
		float *c = vis_run(v, "cpu", &img, -1), *s = vis_run(vs, "cpu:scalar", &img, -1);
		float *g = vis_run(vg, "gpu", &img, -1);
		noise_add(c, s, (int)n, &noise, &ab);
		snprintf(shape, sizeof shape, "%s%s%s: %dx%d patches, %d x %d (cpu noise %.2g)", who,
		    *who ? " " : "", name, img.gw, img.gh, img.n_tok, hp->n_embd_text, noise);
		becmp(k, "vision soft tokens", shape, g, c, NULL, n, vis_tol(hp, noise));
		if (i == 0) {	/* where the two part, if they do; a backend that ran nothing else */
			struct backend *fg = backend_open(p->gname, 0, err);
			struct vision *vf;

			vis_stages(k, v, vs, vg, &img);
			if (fg == NULL)
				die(1, "%s", err);
			bchk(fg, backend_gemm_set(fg, BACKEND_GEMM_INT8));
			vf = vis_open(fg, tower);
			free(g);
			g = vis_run(vf, "gpu (fresh)", &img, -1);
			vision_close(vf);
			becmp(k, "vision soft tokens fresh", shape, g, c, NULL, n, vis_tol(hp, noise));
			backend_close(fg);
		}
		free(c), free(s), free(g);
		vision_image_free(&img);
	}
	vision_close(v), vision_close(vs), vision_close(vg);
}

/*
 * A checkpoint directory with a Gemma-4 vision tower (config.json's
 * vision_config; others are skipped): the tower and its projector on the
 * GPU backend against the CPU's, the soft tokens of each image of its
 * images/ folder (t/data/gemma4/g4-vision's: every PNG and JPEG, in name
 * order, prepared once on the host as run-gen prepares them), or of one
 * random image of 6 x 9 pooled blocks without one; then the same for each
 * mmproj-*.gguf beside its weights (g4-vision's: llama.cpp's F32 mmproj and
 * its BF16 and F16 renditions), the images prepared for the directory's
 * budget, the lines named by the file.  The tower's products are
 * backend_matmul_half's: BF16 and F16 weights on activations rounded to
 * their type on both backends (the GPU's on tensor cores), F32 weights on
 * fp32 operands (cuBLAS without TF32), quantized ones the int8 prompt
 * kind's (BACKEND_GEMM_INT8: the CPU's numerics), so each product sees
 * the same operands on both, and the backends differ by float order, and
 * in a half tower by the roundings that order flips.  The tolerance is the
 * CPU's own noise as be_model takes it: the CPU backend against its
 * portable path (cpu:scalar: other sums, the same op contract), relative
 * to 1 + |soft token|, times 3; at least 1e-3, for a CPU whose two paths
 * coincide (no AVX2) and for the GPU's own orders in attention (split-K)
 * and the norms, whose drift a tower of 27 layers compounds; at least
 * VIS_HALF_TOL for a tower with half products.  A wrong op moves a soft
 * token by its own size, far past it.  Each tower's first image runs a
 * second time on a GPU backend opened for it alone ("fresh"): the tower's
 * result must not depend on what ran before it on the backend (the model
 * checks, here); and its hidden rows are compared stage by stage ("vision
 * hidden": after the patch embedding, each layer's attention and
 * feed-forward block), so that a failure names where the backends part.
 */
static void
be_vision(struct kc *k, struct bpair *p, const char *path)
{
	struct backend *sc;
	char err[UTIL_ERRLEN], **files, **mm;
	int nimg, nmm, budget;
	struct vision *v;

	if (!vis_has_tower(path))
		return;
	if ((sc = backend_open("cpu:scalar", 0, err)) == NULL)
		die(1, "%s", err);
	bchk(p->g, backend_gemm_set(p->g, BACKEND_GEMM_INT8));
	files = vis_images(path, &nimg);
	mm = vis_mmprojs(path, &nmm);
	v = vis_open(p->c, path);
	budget = vision_hparams(v)->max_tokens;
	vision_close(v);
	vis_tower(k, p, sc, path, "", files, nimg, 0);
	for (int i = 0; i < nmm; i++)
		vis_tower(k, p, sc, mm[i], strrchr(mm[i], '/') + 1, files, nimg, budget);
	bchk(p->g, backend_gemm_set(p->g, BACKEND_GEMM_DEFAULT));
	for (int i = 0; i < nimg; i++)
		free(files[i]);
	for (int i = 0; i < nmm; i++)
		free(mm[i]);
	free(files), free(mm);
	backend_close(sc);
}

/*
 * A fused form's output on three runs: the CPU's (cd), the GPU's fused
 * (gd) and the GPU's plain ops (ud): GPU against CPU within tol (of mag,
 * or 1 + |ref|), and fused against plain bit for bit (the name + " =plain"),
 * each with its own broken arm.
 */
static void
fz_cmp(struct kc *k, struct bpair *p, const char *name, const char *shape, const float *cd,
    const float *gd, const float *ud, size_t n, const double *mag, double tol)
{
	float *c = bget(p->c, cd, n), *g = bget(p->g, gd, n), *u = bget(p->g, ud, n);
	char nm[64];

	becmp(k, name, shape, g, c, mag, (int64_t)n, tol);
	free(g);
	g = bget(p->g, gd, n);
	snprintf(nm, sizeof nm, "%s =plain", name);
	bsame(k, nm, shape, g, u, (int64_t)n);
	free(c), free(g), free(u);
}

/* Inputs i of o back to their host values on both backends (and into u on the GPU). */
static void
fz_reset(struct bpair *p, struct bop *o, int i, float *u)
{
	bchk(p->c, backend_write(p->c, o->c[i], o->h[i], o->n[i]));
	bchk(p->g, backend_write(p->g, o->g[i], o->h[i], o->n[i]));
	bchk(p->g, backend_write(p->g, u, o->h[i], o->n[i]));
}

/* sum |w x| of a product whose input (m rows of ld) is on the CPU backend at cx. */
static double *
fz_mag(struct bpair *p, const struct bw *b, const float *cx, int ld, int m, float scale)
{
	float *x = bget(p->c, cx, (size_t)m * ld);
	double *mag = bmag(b, x, ld, m, scale);

	free(x);
	return mag;
}

/*
 * The fused forms (backend_add_rmsnorm_matmul, ffn, rmsnorm_gated_matmul,
 * mul_sigmoid_matmul, geglu_matmul) on m rows of nh heads of hd,
 * products of nout rows of type t (scale s on the first weight): the GPU
 * against the CPU with the tolerances of the ops they fuse (what they
 * write back to their input too), and against the GPU's own plain ops
 * bit for bit.
 */
static void
be_fuse(struct kc *k, struct bpair *p, int t, int m, int nh, int hd, int nout, float s)
{
	int n = nh * hd;
	size_t sz[] = { (size_t)m * n, (size_t)m * n, (size_t)n, (size_t)hd, (size_t)m * n,
	    (size_t)m * nh * 2 * hd, (size_t)m * nout, (size_t)m * nout };
	float lo[] = { -2, -1, 0.5f, 0.5f, -3, -4, -3, -2 }, hi[] = { 2, 1, 1.5f, 1.5f, 3, 4, 3, 2 };
	struct bw wa, wb, wd;
	struct bop o;
	char shape[64];
	size_t ny = (size_t)m * (nout > n ? nout : n);
	float *cy[2], *gy[2], *uy[2], *ux = bput(p->g, NULL, ny), *ct = bput(p->c, NULL, (size_t)m * n);
	double *mag;

	for (int i = 0; i < 2; i++) {
		cy[i] = bput(p->c, NULL, ny), gy[i] = bput(p->g, NULL, ny);
		uy[i] = bput(p->g, NULL, ny);
	}
	bw_new(k, p, &wa, t, nout, n, s);
	bw_new(k, p, &wb, t, nout, n, 1.0f);
	bw_new(k, p, &wd, t, n, nout, s);
	bop_new(k, p, &o, 8, sz, lo, hi);
	snprintf(shape, sizeof shape, "%s m=%d %dx%d out=%d", quant_name(t), m, nh, hd, nout);

	/* x += t; norm; two products */
	const struct backend_weight *Wc[2] = { &wa.c, &wb.c }, *Wg[2] = { &wa.g, &wb.g };
	bchk(p->g, backend_write(p->g, ux, o.h[0], o.n[0]));
	BOTH(p, backend_add_rmsnorm_matmul(p->c, o.c[0], o.c[1], m, n, o.c[2], 1e-6f, 2, Wc, cy),
	    backend_add_rmsnorm_matmul(p->g, o.g[0], o.g[1], m, n, o.g[2], 1e-6f, 2, Wg, gy));
	bchk(p->g, backend_add(p->g, ux, o.g[1], o.n[0]));
	bchk(p->g, backend_rmsnorm_matmul(p->g, ux, m, n, o.g[2], 1e-6f, 2, Wg, uy));
	bchk(p->c, backend_rmsnorm(p->c, o.c[0], n, o.c[2], ct, n, m, n, 1e-6f));
	fz_cmp(k, p, "be addnorm x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-6);
	mag = fz_mag(p, &wa, ct, n, m, s);
	fz_cmp(k, p, "be addnorm_mm", shape, cy[0], gy[0], uy[0], (size_t)m * nout, mag,
	    2e-2);
	free(mag);
	mag = fz_mag(p, &wb, ct, n, m, 1.0f);
	fz_cmp(k, p, "be addnorm_mm 2", shape, cy[1], gy[1], uy[1], (size_t)m * nout, mag,
	    2e-2);
	free(mag);

	/* the FFN: x += t, norm, f = silu(gate) * up (f: o[6], scratch o[7]), down into y */
	fz_reset(p, &o, 0, ux);
	BOTH(p, backend_ffn(p->c, o.c[0], o.c[1], m, n, o.c[2], 1e-6f, &wa.c, &wb.c, &wd.c, o.c[6],
	    o.c[7], cy[0]), backend_ffn(p->g, o.g[0], o.g[1], m, n, o.g[2], 1e-6f, &wa.g, &wb.g,
	    &wd.g, o.g[6], o.g[7], gy[0]));
	bchk(p->g, backend_add(p->g, ux, o.g[1], o.n[0]));
	bchk(p->g, backend_rmsnorm(p->g, ux, n, o.g[2], uy[0], n, m, n, 1e-6f));
	bchk(p->g, backend_matmul_swiglu(p->g, &wa.g, &wb.g, uy[0], m, uy[1]));
	bchk(p->g, backend_matmul(p->g, &wd.g, uy[1], nout, uy[0], n, m));
	bchk(p->c, backend_rmsnorm(p->c, o.c[0], n, o.c[2], ct, n, m, n, 1e-6f));
	fz_cmp(k, p, "be ffn x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-6);
	{
		float *xn = bget(p->c, ct, (size_t)m * n);
		double *mn = xmalloc((size_t)m * nout * 8), *my = xmalloc((size_t)m * nout * 8);
		fused_mags(&wa, &wb, xn, o.h[2], m, n, nout, mn, my);
		fz_cmp(k, p, "be ffn f", shape, o.c[6], o.g[6], uy[1], (size_t)m * nout, my, 2e-2);
		free(xn), free(mn), free(my);
	}
	mag = fz_mag(p, &wd, o.c[6], nout, m, s);
	fz_cmp(k, p, "be ffn", shape, cy[0], gy[0], uy[0], (size_t)m * n, mag, 2e-2);
	free(mag);

	/* the gated norm per head; the out product */
	fz_reset(p, &o, 0, ux);
	BOTH(p, backend_rmsnorm_gated_matmul(p->c, o.c[0], o.c[4], o.c[3], m, nh, hd, 1e-6f, &wa.c,
	    cy[0]), backend_rmsnorm_gated_matmul(p->g, o.g[0], o.g[4], o.g[3], m, nh, hd, 1e-6f,
	    &wa.g, gy[0]));
	bchk(p->g, backend_rmsnorm_gated(p->g, ux, o.g[4], o.g[3], ux, m * nh, hd, 1e-6f));
	bchk(p->g, backend_matmul(p->g, &wa.g, ux, n, uy[0], nout, m));
	fz_cmp(k, p, "be gnorm_mm x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-5);
	mag = fz_mag(p, &wa, o.c[0], n, m, s);
	fz_cmp(k, p, "be gnorm_mm", shape, cy[0], gy[0], uy[0], (size_t)m * nout, mag,
	    2e-2);
	free(mag);

	/* x *= sigmoid(gate), the gate the second half of each head's 2 hd; the o product */
	fz_reset(p, &o, 0, ux);
	BOTH(p, backend_mul_sigmoid_matmul(p->c, o.c[0], o.c[5] + hd, 2 * hd, m, nh, hd, &wa.c,
	    cy[0]), backend_mul_sigmoid_matmul(p->g, o.g[0], o.g[5] + hd, 2 * hd, m, nh, hd, &wa.g,
	    gy[0]));
	bchk(p->g, backend_mul_sigmoid(p->g, ux, hd, o.g[5] + hd, 2 * hd, m * nh, hd));
	bchk(p->g, backend_matmul(p->g, &wa.g, ux, n, uy[0], nout, m));
	fz_cmp(k, p, "be sigmoid_mm x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-6);
	mag = fz_mag(p, &wa, o.c[0], n, m, s);
	fz_cmp(k, p, "be sigmoid_mm", shape, cy[0], gy[0], uy[0], (size_t)m * nout, mag, 2e-2);
	free(mag);

	/* x = gelu_tanh(x) * u (Gemma-4's MLP, u: o[1]); the down product */
	fz_reset(p, &o, 0, ux);
	BOTH(p, backend_geglu_matmul(p->c, o.c[0], o.c[1], m, &wa.c, cy[0]),
	    backend_geglu_matmul(p->g, o.g[0], o.g[1], m, &wa.g, gy[0]));
	bchk(p->g, backend_geglu(p->g, ux, n, o.g[1], n, ux, n, m, n));
	bchk(p->g, backend_matmul(p->g, &wa.g, ux, n, uy[0], nout, m));
	fz_cmp(k, p, "be geglu_mm x", shape, o.c[0], o.g[0], ux, o.n[0], NULL, 1e-5);
	mag = fz_mag(p, &wa, o.c[0], n, m, s);
	fz_cmp(k, p, "be geglu_mm", shape, cy[0], gy[0], uy[0], (size_t)m * nout, mag, 2e-2);
	free(mag);

	bop_free(p, &o);
	bw_free(p, &wa), bw_free(p, &wb), bw_free(p, &wd);
	for (int i = 0; i < 2; i++) {
		backend_mfree(p->c, cy[i]), backend_mfree(p->g, gy[i]);
		backend_mfree(p->g, uy[i]);
	}
	backend_mfree(p->g, ux), backend_mfree(p->c, ct);
}

/*
 * Products of one normed x in one launch (GDN's four, q/k/v, gate/up):
 * backend_rmsnorm_matmul of four weights of unlike row counts equals four
 * calls of one weight bit for bit, on the GPU.
 */
static void
be_set(struct kc *k, struct bpair *p, int t, int m, int n)
{
	static const int64_t rows[4] = { 320, 40, 8, 257 };
	struct bw b[4];
	const struct backend_weight *W[4];
	float *x = frand(k, (int64_t)m * n, -2, 2), *nw = frand(k, n, 0.5f, 1.5f);
	float *gx = bput(p->g, x, (size_t)m * n), *gw = bput(p->g, nw, (size_t)n);
	float *ys[4], *y1[4];
	char shape[64], name[64];

	for (int i = 0; i < 4; i++) {
		bw_new(k, p, &b[i], t, rows[i], n, i == 1 ? 0.5f : 1.0f);
		W[i] = &b[i].g;
		ys[i] = bput(p->g, NULL, (size_t)m * rows[i]);
		y1[i] = bput(p->g, NULL, (size_t)m * rows[i]);
	}
	bchk(p->g, backend_rmsnorm_matmul(p->g, gx, m, n, gw, 1e-6f, 4, W, ys));
	for (int i = 0; i < 4; i++)
		bchk(p->g, backend_rmsnorm_matmul(p->g, gx, m, n, gw, 1e-6f, 1, &W[i], &y1[i]));
	for (int i = 0; i < 4; i++) {
		float *a = bget(p->g, ys[i], (size_t)m * rows[i]), *c = bget(p->g, y1[i],
		    (size_t)m * rows[i]);
		snprintf(name, sizeof name, "be matmul set %s", quant_name(t));
		snprintf(shape, sizeof shape, "m=%d w%d of 4: %lldx%d", m, i, (long long)rows[i], n);
		bsame(k, name, shape, a, c, (int64_t)m * rows[i]);
		free(a), free(c);
		bw_free(p, &b[i]);
		backend_mfree(p->g, ys[i]), backend_mfree(p->g, y1[i]);
	}
	free(x), free(nw);
	backend_mfree(p->g, gx), backend_mfree(p->g, gw);
}

/* --- the mixture of experts, Gemma-4's and step35's ops ------------------ */

/* ids[m][kk]: kk distinct experts of n_exp a row, at random. */
static void
moe_ids(struct kc *k, int32_t *ids, int m, int kk, int n_exp)
{
	for (int r = 0; r < m; r++)
		for (int j = 0; j < kk; j++) {
			int e, dup;
			do {
				e = (int)(rnd(k) % (uint64_t)n_exp);
				dup = 0;
				for (int i = 0; i < j; i++)
					dup |= ids[r * kk + i] == e;
			} while (dup);
			ids[r * kk + j] = e;
		}
}

/* The stack b's expert e (of n_exp, type t) as a GPU weight of its own, from its host rows. */
static void
moe_slice(struct bpair *p, const struct bw *b, int t, int n_exp, int e, float scale,
    struct backend_weight *w)
{
	int64_t rows = b->c.ne1 / n_exp, ne0 = b->c.ne0;
	size_t rb = quant_row_size(t, ne0);

	bchk(p->g, backend_weight_init(p->g, w, t, ne0, rows, b->w + (size_t)e * rows * rb, scale));
}

/* Every expert of the stack b as a GPU weight of its own (moe_slice), freed by moe_slices_free. */
static struct backend_weight *
moe_slices(struct bpair *p, const struct bw *b, int t, int n_exp, float scale)
{
	struct backend_weight *w = xmalloc((size_t)n_exp * sizeof *w);

	for (int e = 0; e < n_exp; e++)
		moe_slice(p, b, t, n_exp, e, scale, &w[e]);
	return w;
}

static void
moe_slices_free(struct bpair *p, struct backend_weight *w, int n_exp)
{
	for (int e = 0; e < n_exp; e++)
		backend_weight_release(p->g, &w[e]);
	free(w);
}

/* The products' tolerance against the CPU (be_matmul's): the int8 path's numerics, else 2e-2. */
static double
moe_tol(int t)
{
	return gpu_can_matvec_q8_rows(t, 1) ? 1e-5 : 2e-2;
}

/*
 * The magnitude of a gated product's output act(g) * u, g = sg * (wg . x),
 * u = wu . x (fused_mags' bound: a slope of act up to 1.2, |act(g)| <= |g|
 * + 1) from the rows' sums of |w x|.
 */
static double
gated_mag(const float *gr, const float *ur, const float *x, int n, float sg)
{
	double ag = 0, au = 0, g = 0, u = 0;

	for (int e = 0; e < n; e++) {
		ag += fabs((double)gr[e] * x[e]) * fabs(sg);
		au += fabs((double)ur[e] * x[e]);
		g += (double)gr[e] * x[e] * sg;
		u += (double)ur[e] * x[e];
	}
	return 1.2 * ag * fabs(u) + (fabs(g) + 1) * au + 0.05 * ag * au + 1e-20;
}

/*
 * backend_moe_swiglu_limit (limit 0: backend_moe_swiglu) over m rows of n
 * (ldx = n + pad), kk of n_exp experts of nf rows each, type t (the gate
 * stack scaled by sg): the GPU against the CPU (the fused products'
 * magnitudes, be_matmul's tolerances), each slot against the GPU's own
 * one-row backend_matmul_swiglu (with a limit: two backend_matmul and
 * backend_swiglu_limit) with that expert's rows alone, bit for bit, and
 * each row alone against the m-row call, bit for bit.
 */
static void
be_moe_swiglu(struct kc *k, struct bpair *p, int t, int n_exp, int nf, int n, int m, int kk,
    int pad, float limit, float sg)
{
	struct bw wg, wu;
	int ldx = n + pad, ns = m * kk;
	float *x = frand(k, (int64_t)m * ldx, -1, 1);
	int32_t *ids = xmalloc((size_t)ns * 4);
	double *mag = xmalloc((size_t)ns * nf * 8);
	char shape[96], name[64];

	moe_ids(k, ids, m, kk, n_exp);
	bw_new(k, p, &wg, t, (int64_t)n_exp * nf, n, sg);
	bw_new(k, p, &wu, t, (int64_t)n_exp * nf, n, 1.0f);
	float *cx = bput(p->c, x, (size_t)m * ldx), *gx = bput(p->g, x, (size_t)m * ldx);
	float *cid = bput(p->c, (const float *)ids, ns), *gid = bput(p->g, (const float *)ids, ns);
	float *cf = bput(p->c, NULL, (size_t)ns * nf), *gf = bput(p->g, NULL, (size_t)ns * nf);
	BOTH(p, backend_moe_swiglu_limit(p->c, &wg.c, &wu.c, n_exp, cx, ldx, m, (const int32_t *)cid,
	    kk, limit, cf), backend_moe_swiglu_limit(p->g, &wg.g, &wu.g, n_exp, gx, ldx, m,
	    (const int32_t *)gid, kk, limit, gf));
	for (int s = 0; s < ns; s++)
		for (int i = 0; i < nf; i++) {
			size_t row = (size_t)ids[s] * nf + i;
			mag[(size_t)s * nf + i] = gated_mag(wg.wf + row * n, wu.wf + row * n,
			    x + (size_t)(s / kk) * ldx, n, sg);
		}
	snprintf(shape, sizeof shape, "%s %d of %d x %dx%d m=%d ld+%d%s", quant_name(t), kk, n_exp,
	    nf, n, m, pad, sg != 1.0f ? " *s" : "");
	if (limit > 0)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " L=%g", limit);
	float *hc = bget(p->c, cf, (size_t)ns * nf), *hg = bget(p->g, gf, (size_t)ns * nf);
	becmp(k, "be moe_swiglu", shape, hg, hc, mag, (int64_t)ns * nf, moe_tol(t));
	free(hg);

	/* each slot: its row's one-row product with its expert alone, on the GPU */
	struct backend_weight *eg = moe_slices(p, &wg, t, n_exp, sg), *eu = moe_slices(p, &wu, t,
	    n_exp, 1.0f);
	float *ref = bput(p->g, NULL, (size_t)ns * nf), *tg = bput(p->g, NULL, (size_t)nf);
	float *tu = bput(p->g, NULL, (size_t)nf);
	for (int s = 0; s < ns; s++) {
		const float *xr = gx + (size_t)(s / kk) * ldx;
		int e = ids[s];
		if (limit == 0) {
			bchk(p->g, backend_matmul_swiglu(p->g, &eg[e], &eu[e], xr, 1, ref + (size_t)s * nf));
			continue;
		}
		bchk(p->g, backend_matmul(p->g, &eg[e], xr, ldx, tg, nf, 1));
		bchk(p->g, backend_matmul(p->g, &eu[e], xr, ldx, tu, nf, 1));
		bchk(p->g, backend_swiglu_limit(p->g, tg, tu, ref + (size_t)s * nf, (size_t)nf, limit));
	}
	float *hr = bget(p->g, ref, (size_t)ns * nf);
	hg = bget(p->g, gf, (size_t)ns * nf);
	snprintf(name, sizeof name, "be moe_swiglu =1row");
	bsame(k, name, shape, hg, hr, (int64_t)ns * nf);
	free(hg);
	if (m > 1) {	/* each row alone */
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_moe_swiglu_limit(p->g, &wg.g, &wu.g, n_exp, gx + (size_t)r * ldx,
			    ldx, 1, (const int32_t *)gid + (size_t)r * kk, kk, limit,
			    ref + (size_t)r * kk * nf));
		float *h1 = bget(p->g, ref, (size_t)ns * nf);
		hg = bget(p->g, gf, (size_t)ns * nf);
		bsame(k, "be moe_swiglu m=1xm", shape, h1, hg, (int64_t)ns * nf);
		free(h1), free(hg);
	}
	moe_slices_free(p, eg, n_exp), moe_slices_free(p, eu, n_exp);
	free(hr), free(hc), free(x), free(ids), free(mag);
	backend_mfree(p->g, ref), backend_mfree(p->g, tg), backend_mfree(p->g, tu);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cid);
	backend_mfree(p->g, gid), backend_mfree(p->c, cf), backend_mfree(p->g, gf);
	bw_free(p, &wg), bw_free(p, &wu);
}

/*
 * backend_moe_geglu over m rows of n, kk of n_exp experts whose fused
 * stack has 2 nf rows each (gate then up), type t: the GPU against the
 * CPU, each slot against the GPU's one-row backend_matmul of its expert's
 * 2 nf rows then backend_geglu (bit for bit), each row alone (bit for bit).
 */
static void
be_moe_geglu(struct kc *k, struct bpair *p, int t, int n_exp, int nf, int n, int m, int kk)
{
	struct bw wgu;
	int ns = m * kk;
	float *x = frand(k, (int64_t)m * n, -1, 1);
	int32_t *ids = xmalloc((size_t)ns * 4);
	double *mag = xmalloc((size_t)ns * nf * 8);
	char shape[96];

	moe_ids(k, ids, m, kk, n_exp);
	bw_new(k, p, &wgu, t, (int64_t)n_exp * 2 * nf, n, 1.0f);
	float *cx = bput(p->c, x, (size_t)m * n), *gx = bput(p->g, x, (size_t)m * n);
	float *cid = bput(p->c, (const float *)ids, ns), *gid = bput(p->g, (const float *)ids, ns);
	float *cf = bput(p->c, NULL, (size_t)ns * nf), *gf = bput(p->g, NULL, (size_t)ns * nf);
	BOTH(p, backend_moe_geglu(p->c, &wgu.c, n_exp, cx, n, m, (const int32_t *)cid, kk, cf),
	    backend_moe_geglu(p->g, &wgu.g, n_exp, gx, n, m, (const int32_t *)gid, kk, gf));
	for (int s = 0; s < ns; s++)
		for (int i = 0; i < nf; i++) {
			size_t g0 = (size_t)ids[s] * 2 * nf + i;
			mag[(size_t)s * nf + i] = gated_mag(wgu.wf + g0 * n, wgu.wf + (g0 + nf) * n,
			    x + (size_t)(s / kk) * n, n, 1.0f);
		}
	snprintf(shape, sizeof shape, "%s %d of %d x 2x%dx%d m=%d", quant_name(t), kk, n_exp, nf, n,
	    m);
	float *hc = bget(p->c, cf, (size_t)ns * nf), *hg = bget(p->g, gf, (size_t)ns * nf);
	becmp(k, "be moe_geglu", shape, hg, hc, mag, (int64_t)ns * nf, moe_tol(t));
	free(hg);

	struct backend_weight *ew = moe_slices(p, &wgu, t, n_exp, 1.0f);
	float *ref = bput(p->g, NULL, (size_t)ns * nf), *ty = bput(p->g, NULL, (size_t)2 * nf);
	for (int s = 0; s < ns; s++) {
		bchk(p->g, backend_matmul(p->g, &ew[ids[s]], gx + (size_t)(s / kk) * n, n, ty, 2 * nf, 1));
		bchk(p->g, backend_geglu(p->g, ty, 2 * nf, ty + nf, 2 * nf, ref + (size_t)s * nf, nf, 1,
		    nf));
	}
	float *hr = bget(p->g, ref, (size_t)ns * nf);
	hg = bget(p->g, gf, (size_t)ns * nf);
	bsame(k, "be moe_geglu =1row", shape, hg, hr, (int64_t)ns * nf);
	free(hg);
	if (m > 1) {
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_moe_geglu(p->g, &wgu.g, n_exp, gx + (size_t)r * n, n, 1,
			    (const int32_t *)gid + (size_t)r * kk, kk, ref + (size_t)r * kk * nf));
		float *h1 = bget(p->g, ref, (size_t)ns * nf);
		hg = bget(p->g, gf, (size_t)ns * nf);
		bsame(k, "be moe_geglu m=1xm", shape, h1, hg, (int64_t)ns * nf);
		free(h1), free(hg);
	}
	moe_slices_free(p, ew, n_exp);
	free(hr), free(hc), free(x), free(ids), free(mag);
	backend_mfree(p->g, ref), backend_mfree(p->g, ty);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cid);
	backend_mfree(p->g, gid), backend_mfree(p->c, cf), backend_mfree(p->g, gf);
	bw_free(p, &wgu);
}

/*
 * backend_moe_down over m rows, kk of n_exp experts of ne rows of nf each
 * (type t, scale sd), into rows ldy = ne + pad: the GPU against the CPU
 * (magnitude sum_j |w_j| sum |wd f|), against the GPU's one-row
 * backend_matmul of each slot with its expert alone summed here in the
 * op's order (w_0 d_0 + w_1 d_1 + ..., each product and sum rounded to
 * float: C11 contracts nothing), bit for bit, and each row alone, bit for
 * bit.
 */
static void
be_moe_down(struct kc *k, struct bpair *p, int t, int n_exp, int ne, int nf, int m, int kk,
    int pad, float sd)
{
	struct bw wd;
	int ns = m * kk, ldy = ne + pad;
	float *f = frand(k, (int64_t)ns * nf, -1, 1), *w = frand(k, ns, 0.05f, 1);
	int32_t *ids = xmalloc((size_t)ns * 4);
	double *mag = xmalloc((size_t)m * ldy * 8);
	char shape[96];

	moe_ids(k, ids, m, kk, n_exp);
	bw_new(k, p, &wd, t, (int64_t)n_exp * ne, nf, sd);
	float *cf = bput(p->c, f, (size_t)ns * nf), *gf = bput(p->g, f, (size_t)ns * nf);
	float *cw = bput(p->c, w, ns), *gw = bput(p->g, w, ns);
	float *cid = bput(p->c, (const float *)ids, ns), *gid = bput(p->g, (const float *)ids, ns);
	float *cy = bput(p->c, NULL, (size_t)m * ldy), *gy = bput(p->g, NULL, (size_t)m * ldy);
	BOTH(p, backend_moe_down(p->c, &wd.c, n_exp, cf, m, (const int32_t *)cid, cw, kk, cy, ldy),
	    backend_moe_down(p->g, &wd.g, n_exp, gf, m, (const int32_t *)gid, gw, kk, gy, ldy));
	for (int r = 0; r < m; r++)
		for (int i = 0; i < ldy; i++) {
			double a = 0;
			for (int j = 0; j < kk && i < ne; j++) {
				int s = r * kk + j;
				const float *wr = wd.wf + ((size_t)ids[s] * ne + i) * nf;
				double d = 0;
				for (int c = 0; c < nf; c++)
					d += fabs((double)wr[c] * f[(size_t)s * nf + c]);
				a += fabs((double)w[s]) * d * fabs(sd);
			}
			mag[(size_t)r * ldy + i] = i < ne ? a + 1e-20 : 1.0;
		}
	snprintf(shape, sizeof shape, "%s %d of %d x %dx%d m=%d ld+%d%s", quant_name(t), kk, n_exp,
	    ne, nf, m, pad, sd != 1.0f ? " *s" : "");
	float *hc = bget(p->c, cy, (size_t)m * ldy), *hg = bget(p->g, gy, (size_t)m * ldy);
	becmp(k, "be moe_down", shape, hg, hc, mag, (int64_t)m * ldy, moe_tol(t));
	free(hg);

	struct backend_weight *ew = moe_slices(p, &wd, t, n_exp, sd);
	float *dd = bput(p->g, NULL, (size_t)ns * ne), *yref = xmalloc((size_t)m * ldy * 4 + 4);
	for (int s = 0; s < ns; s++)
		bchk(p->g, backend_matmul(p->g, &ew[ids[s]], gf + (size_t)s * nf, nf,
		    dd + (size_t)s * ne, ne, 1));
	float *hd = bget(p->g, dd, (size_t)ns * ne);
	for (int r = 0; r < m; r++)
		for (int i = 0; i < ldy; i++) {
			float acc = 0.0f;
			for (int j = 0; j < kk && i < ne; j++) {
				int s = r * kk + j;
				float v = w[s] * hd[(size_t)s * ne + i];
				acc = j == 0 ? v : acc + v;
			}
			yref[(size_t)r * ldy + i] = acc;
		}
	hg = bget(p->g, gy, (size_t)m * ldy);
	bsame(k, "be moe_down =1row", shape, hg, yref, (int64_t)m * ldy);
	free(hg);
	if (m > 1) {
		float *g1 = bput(p->g, NULL, (size_t)m * ldy);
		for (int r = 0; r < m; r++)
			bchk(p->g, backend_moe_down(p->g, &wd.g, n_exp, gf + (size_t)r * kk * nf, 1,
			    (const int32_t *)gid + (size_t)r * kk, gw + (size_t)r * kk, kk,
			    g1 + (size_t)r * ldy, ldy));
		float *h1 = bget(p->g, g1, (size_t)m * ldy);
		hg = bget(p->g, gy, (size_t)m * ldy);
		bsame(k, "be moe_down m=1xm", shape, h1, hg, (int64_t)m * ldy);
		free(h1), free(hg);
		backend_mfree(p->g, g1);
	}
	moe_slices_free(p, ew, n_exp);
	free(hd), free(yref), free(hc), free(f), free(w), free(ids), free(mag);
	backend_mfree(p->g, dd);
	backend_mfree(p->c, cf), backend_mfree(p->g, gf), backend_mfree(p->c, cw);
	backend_mfree(p->g, gw), backend_mfree(p->c, cid), backend_mfree(p->g, gid);
	backend_mfree(p->c, cy), backend_mfree(p->g, gy);
	bw_free(p, &wd);
}

/* The router's key of expert i of the row x (n), in double: softmax p, or sigmoid p + bias. */
static double
route_key(const float *x, int n, int i, int sig, const float *bias)
{
	double mx = x[0], sum = 0;

	if (sig)
		return 1.0 / (1.0 + exp(-(double)x[i])) + (bias ? bias[i] : 0.0);
	for (int j = 1; j < n; j++)
		mx = x[j] > mx ? x[j] : mx;
	for (int j = 0; j < n; j++)
		sum += exp((double)x[j] - mx);
	return exp((double)x[i] - mx) / sum;
}

/*
 * The routers, backend_moe_route (sig 0) and backend_moe_route_sigmoid
 * (sig 1: bias or not, norm, scale), over m rows of n experts (ldx = n +
 * 3), top kk: the GPU's picks the CPU's, except where the two picks' keys
 * (in double) are within 1e-6 of each other (a tie at float precision:
 * CUDA's expf is not the C library's; that row's weights are then not
 * compared); the weights within 1e-5 of 1 + |w|; each row alone the
 * m-row call's picks and weights bit for bit.
 */
static void
be_moe_route(struct kc *k, struct bpair *p, int n, int kk, int m, int sig, int with_bias,
    int norm, float scale)
{
	int ldx = n + 3, ns = m * kk, ndiff = 0, bad = 0;
	float *x = frand(k, (int64_t)m * ldx, -4, 4);
	float *bias = sig && with_bias ? frand(k, n, -0.1f, 0.1f) : NULL;
	float *cx = bput(p->c, x, (size_t)m * ldx), *gx = bput(p->g, x, (size_t)m * ldx);
	float *cb = bias ? bput(p->c, bias, n) : NULL, *gb = bias ? bput(p->g, bias, n) : NULL;
	float *cid = bput(p->c, NULL, ns), *gid = bput(p->g, NULL, ns);
	float *cw = bput(p->c, NULL, ns), *gw = bput(p->g, NULL, ns);
	char shape[96], name[64];

	if (sig)
		BOTH(p, backend_moe_route_sigmoid(p->c, cx, ldx, m, n, kk, cb, norm, scale,
		    (int32_t *)cid, cw), backend_moe_route_sigmoid(p->g, gx, ldx, m, n, kk, gb, norm,
		    scale, (int32_t *)gid, gw));
	else
		BOTH(p, backend_moe_route(p->c, cx, ldx, m, n, kk, (int32_t *)cid, cw),
		    backend_moe_route(p->g, gx, ldx, m, n, kk, (int32_t *)gid, gw));
	int32_t *ic = (int32_t *)bget(p->c, cid, ns), *ig = (int32_t *)bget(p->g, gid, ns);
	float *wc = bget(p->c, cw, ns), *wg = bget(p->g, gw, ns);
	for (int r = 0; r < m; r++) {
		int tie = 0;
		for (int j = 0; j < kk; j++) {
			int s = r * kk + j;
			if (ic[s] == ig[s])
				continue;
			ndiff++;
			if (ig[s] < 0 || ig[s] >= n) {
				bad = 1;
				continue;
			}
			double a = route_key(x + (size_t)r * ldx, n, ic[s], sig, bias);
			double b = route_key(x + (size_t)r * ldx, n, ig[s], sig, bias);
			if (fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b)))
				tie = 1;
			else
				bad = 1;
		}
		for (int j = 0; tie && j < kk; j++)	/* a tie's row: its weights are another's */
			wg[r * kk + j] = wc[r * kk + j];
	}
	snprintf(shape, sizeof shape, "top %d of %d m=%d%s%s", kk, n, m, sig && bias ? " bias" : "",
	    sig ? (norm ? " norm" : " no-norm") : "");
	if (sig)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " *%g", scale);
	snprintf(name, sizeof name, "be moe_route%s ids", sig ? "_sigmoid" : "");
	report(k, name, shape, ndiff, !bad && !k->brk);
	snprintf(name, sizeof name, "be moe_route%s w", sig ? "_sigmoid" : "");
	becmp(k, name, shape, wg, wc, NULL, ns, 1e-5);
	if (m > 1) {	/* each row alone */
		float *gid1 = bput(p->g, NULL, ns), *gw1 = bput(p->g, NULL, ns);
		for (int r = 0; r < m; r++) {
			float *xr = gx + (size_t)r * ldx, *wr = gw1 + (size_t)r * kk;
			int32_t *ir = (int32_t *)gid1 + (size_t)r * kk;
			bchk(p->g, sig ? backend_moe_route_sigmoid(p->g, xr, ldx, 1, n, kk, gb, norm, scale,
			    ir, wr) : backend_moe_route(p->g, xr, ldx, 1, n, kk, ir, wr));
		}
		int32_t *i1 = (int32_t *)bget(p->g, gid1, ns), *im = (int32_t *)bget(p->g, gid, ns);
		float *w1 = bget(p->g, gw1, ns), *wm = bget(p->g, gw, ns);
		int d = memcmp(i1, im, (size_t)ns * 4) != 0;
		snprintf(name, sizeof name, "be moe_route%s ids m=1xm", sig ? "_sigmoid" : "");
		report(k, name, shape, d, !d && !k->brk);
		snprintf(name, sizeof name, "be moe_route%s w m=1xm", sig ? "_sigmoid" : "");
		bsame(k, name, shape, w1, wm, ns);
		free(i1), free(im), free(w1), free(wm);
		backend_mfree(p->g, gid1), backend_mfree(p->g, gw1);
	}
	if (!sig) {	/* Gemma-4's per-expert scale fused: the route, then moe_scale */
		float *es = frand(k, n, 0.5f, 1.5f), *ges = bput(p->g, es, n);
		float *gid2 = bput(p->g, NULL, ns), *gw2 = bput(p->g, NULL, ns);
		bchk(p->g, backend_moe_route_scale(p->g, gx, ldx, m, n, kk, ges, (int32_t *)gid2,
		    gw2));
		bchk(p->g, backend_moe_scale(p->g, gw, (int32_t *)gid, m, kk, ges, n));
		int32_t *i2 = (int32_t *)bget(p->g, gid2, ns), *im = (int32_t *)bget(p->g, gid, ns);
		float *w2 = bget(p->g, gw2, ns), *wm = bget(p->g, gw, ns);
		int d = memcmp(i2, im, (size_t)ns * 4) != 0;
		report(k, "be moe_route_scale ids=plain", shape, d, !d && !k->brk);
		bsame(k, "be moe_route_scale w=plain", shape, w2, wm, ns);
		free(es), free(i2), free(im), free(w2), free(wm);
		backend_mfree(p->g, ges), backend_mfree(p->g, gid2), backend_mfree(p->g, gw2);
	}
	free(ic), free(ig), free(wc), free(wg), free(x), free(bias);
	backend_mfree(p->c, cx), backend_mfree(p->g, gx), backend_mfree(p->c, cb);
	backend_mfree(p->g, gb), backend_mfree(p->c, cid), backend_mfree(p->g, gid);
	backend_mfree(p->c, cw), backend_mfree(p->g, gw);
}

/*
 * The small ops of the three architectures on rows rows of n (strided: ld
 * = n + 5): backend_add_gated (the shared expert's gate), backend_geglu,
 * backend_softcap, backend_scale and backend_moe_scale (exact: one
 * product), backend_swiglu_limit (with a limit and without),
 * backend_head_gate; the GPU against the CPU, 1e-6 of 1 + |ref| (CUDA's
 * expf and tanhf against the C library's) or bit for bit.
 */
static void
be_arch_small(struct kc *k, struct bpair *p, int rows, int n)
{
	int ld = n + 5, nh = 4, hd = n / 4, kk = 3, ne = 7;
	size_t sz[] = { (size_t)rows * ld, (size_t)rows * ld, (size_t)rows * ld, (size_t)rows * ld,
	    (size_t)rows * kk, (size_t)ne };
	float lo[] = { -3, -3, -6, -40, 0, 0.5f }, hi[] = { 3, 3, 6, 40, 1, 2 };
	int32_t *ids = xmalloc((size_t)rows * kk * 4);
	struct bop o;
	char shape[64];

	moe_ids(k, ids, rows, kk, ne);
	float *cid = bput(p->c, (const float *)ids, (size_t)rows * kk);
	float *gid = bput(p->g, (const float *)ids, (size_t)rows * kk);
	snprintf(shape, sizeof shape, "%dx%d ld=%d", rows, n, ld);
	bop_new(k, p, &o, 6, sz, lo, hi);
	BOTH(p, backend_add_gated(p->c, o.c[0], ld, o.c[1], ld, o.c[2], ld, rows, n),
	    backend_add_gated(p->g, o.g[0], ld, o.g[1], ld, o.g[2], ld, rows, n));
	bop_cmp(k, p, &o, 0, "be add_gated", shape, 1e-6);
	BOTH(p, backend_geglu(p->c, o.c[2], ld, o.c[1], ld, o.c[1], ld, rows, n),
	    backend_geglu(p->g, o.g[2], ld, o.g[1], ld, o.g[1], ld, rows, n));
	bop_cmp(k, p, &o, 1, "be geglu", shape, 1e-6);
	BOTH(p, backend_softcap(p->c, o.c[3], o.n[3], 30.0f), backend_softcap(p->g, o.g[3], o.n[3],
	    30.0f));
	bop_cmp(k, p, &o, 3, "be softcap", shape, 1e-6);
	BOTH(p, backend_scale(p->c, o.c[2], o.n[2], 0.1767767f), backend_scale(p->g, o.g[2], o.n[2],
	    0.1767767f));
	bop_cmp(k, p, &o, 2, "be scale", shape, 0);
	BOTH(p, backend_moe_scale(p->c, o.c[4], (const int32_t *)cid, rows, kk, o.c[5], ne),
	    backend_moe_scale(p->g, o.g[4], (const int32_t *)gid, rows, kk, o.g[5], ne));
	bop_cmp(k, p, &o, 4, "be moe_scale", shape, 0);
	for (int l = 0; l < 2; l++) {
		size_t nn = (size_t)rows * ld;
		BOTH(p, backend_swiglu_limit(p->c, o.c[2], o.c[1], o.c[0], nn, l ? 0.35f : 0.0f),
		    backend_swiglu_limit(p->g, o.g[2], o.g[1], o.g[0], nn, l ? 0.35f : 0.0f));
		bop_cmp(k, p, &o, 0, l ? "be swiglu_limit L=0.35" : "be swiglu_limit L=0", shape,
		    1e-6);
	}
	BOTH(p, backend_head_gate(p->c, o.c[1], ld, o.c[2], ld, rows, nh, hd),
	    backend_head_gate(p->g, o.g[1], ld, o.g[2], ld, rows, nh, hd));
	bop_cmp(k, p, &o, 1, "be head_gate", shape, 1e-6);
	bop_free(p, &o);
	free(ids);
	backend_mfree(p->c, cid), backend_mfree(p->g, gid);
}

/*
 * Rows whose length is not a multiple of 32 (the tiny fixtures' widths:
 * the CUDA backend holds them as zero-padded F32): lookups of rows of
 * such a table, bit for bit.
 */
static void
be_odd_rows(struct kc *k, struct bpair *p, int t, int ne0)
{
	struct bw b;
	int32_t ids[4] = { 7, 0, 49, 7 };
	int ld = ne0 + 6;
	float *cy = bput(p->c, NULL, 4 * ld), *gy = bput(p->g, NULL, 4 * ld), *hc, *hg;
	char name[64], shape[64];

	bw_new(k, p, &b, t, 50, ne0, 1.0f);
	BOTH(p, backend_embed(p->c, &b.c, ids, 4, cy, ld), backend_embed(p->g, &b.g, ids, 4, gy, ld));
	hc = bget(p->c, cy, 4 * ld), hg = bget(p->g, gy, 4 * ld);
	snprintf(name, sizeof name, "be embed %s", quant_name(t));
	snprintf(shape, sizeof shape, "4 of 50x%d ld=%d", ne0, ld);
	becmp(k, name, shape, hg, hc, NULL, 4 * ld, 0);
	free(hc), free(hg);
	bw_free(p, &b);
	backend_mfree(p->c, cy), backend_mfree(p->g, gy);
}

/* Pattern pat of a token mask over n tokens into bits[(n + 31) / 32]. */
static void
mask_bits(struct kc *k, uint32_t *bits, int n, int pat)
{
	size_t words = ((size_t)n + 31) / 32;

	for (size_t i = 0; i < words; i++)
		bits[i] = pat == 0 ? (uint32_t)rnd(k) : pat == 3 ? 0xffffffffu : 0;
	for (int t = 0; pat == 5 && t < n; t++)
		if (rnd(k) % 64 == 0)
			bits[t / 32] |= 1u << (t % 32);
	if (pat == 1 || pat == 2)
		bits[(pat == 1 ? n - 1 : n / 2) / 32] |= 1u << ((pat == 1 ? n - 1 : n / 2) % 32);
}

/*
 * backend_mask (a grammar's token mask, lib/grammar.h): the GPU's masked
 * row against the CPU's and the definition (-inf where the bit is 0, the
 * value's bits elsewhere), bit for bit, then the argmax and a draw (temp
 * 0.8, top-p 0.95) from each: masks random, all 0 but the last token,
 * all 0 but the middle one, all 1, all 0, one in 64; rows of a real
 * vocabulary, of one not a multiple of 32 and of 77, holding -0, NaN and
 * -inf.
 */
static void
be_mask(struct kc *k, struct bpair *p)
{
	static const int ns[] = { 248320, 151669, 77 };
	static const char *const pname[] = { "random", "last only", "middle only", "all",
	    "none", "1 in 64" };

	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		int n = ns[i];
		uint32_t *bits = xmalloc(((size_t)n + 31) / 32 * 4);
		float *x = frand(k, n, -8, 8);
		struct sample_params sp;
		struct sampler *sm;
		char err[UTIL_ERRLEN], shape[64];

		x[n / 3] = -0.0f, x[n / 5] = NAN, x[n / 7] = -INFINITY;
		sample_defaults(&sp);
		sp.temp = 0.8f, sp.top_p = 0.95f, sp.seed = 5;
		if ((sm = sample_new(&sp, n, err)) == NULL)
			die(1, "be mask: %s", err);
		for (int pat = 0; pat < 6; pat++) {
			float *cy = bput(p->c, x, n), *gy = bput(p->g, x, n), *rc, *rg;
			int32_t ac, ag, dc, dg;
			double d = 0;

			mask_bits(k, bits, n, pat);
			BOTH(p, backend_mask(p->c, cy, n, bits), backend_mask(p->g, gy, n, bits));
			rc = bget(p->c, cy, n);
			rg = bget(p->g, gy, n);
			if (k->brk)
				rg[n / 2] = isinf(rg[n / 2]) ? 0.0f : -INFINITY;
			for (int t = 0; t < n; t++) {	/* tokens off the definition or the CPU's */
				float want = bits[t / 32] >> (t % 32) & 1 ? x[t] : -INFINITY;
				d += memcmp(&rc[t], &want, 4) != 0 || memcmp(&rg[t], &rc[t], 4) != 0;
			}
			snprintf(shape, sizeof shape, "%d %s", n, pname[pat]);
			report(k, "be mask", shape, d, d == 0);
			BOTH(p, backend_argmax(p->c, cy, n, 1, n, &ac),
			    backend_argmax(p->g, gy, n, 1, n, &ag));
			BOTH(p, backend_draw(p->c, cy, sm, 3, pat, &dc),
			    backend_draw(p->g, gy, sm, 3, pat, &dg));
			int any = 0;	/* a finite value let through ("1 in 64" of 77 may have none) */
			for (int t = 0; t < n && !any; t++)
				any = (bits[t / 32] >> (t % 32) & 1) && isfinite(x[t]);
			d = ac != ag || dc != dg || ac != sample_argmax(rc, n) ||
			    !any != (ac < 0 && dc < 0);
			if (k->brk)
				d = 1;
			report(k, "be mask picks", shape, d, d == 0);
			free(rc), free(rg);
			backend_mfree(p->c, cy), backend_mfree(p->g, gy);
		}
		sample_free(sm);
		free(bits), free(x);
	}
}

/* backend_head_max's bound: a head one longer is refused, with the reason (not run). */
static void
be_head_max(struct kc *k, struct bpair *p)
{
	int hd = backend_head_max(p->g) + 1, ok;
	struct backend_attn a = { 2, 1, hd, 1.0f, 0, 0, 0, 0, NULL, 0 };
	float *q = bput(p->g, NULL, (size_t)2 * hd), *kv = bput(p->g, NULL, (size_t)hd);
	float *o = bput(p->g, NULL, (size_t)2 * hd);
	char shape[64];

	ok = hd > 1 && backend_attention(p->g, &a, q, 2 * hd, hd, kv, kv, 1, 0, o) == -1 &&
	    strstr(backend_errmsg(p->g), "at most") != NULL;
	snprintf(shape, sizeof shape, "hd=%d", hd);
	report(k, "be attention refuses", shape, !ok, ok && !k->brk);
	backend_mfree(p->g, q), backend_mfree(p->g, kv), backend_mfree(p->g, o);
}

/*
 * What a model GGUF's matrices (tensors of 2 dimensions and more) are
 * multiplied by on the GPU: one line "== weights TYPE n how, ..." (i8: a
 * product on int8 activations, the CPU's numerics; f32: the fp32-x
 * product; f32 copy: no GPU kernel, held as F32).  Then, when the file has
 * IQ4 weights (IQ4_XS, IQ4_NL: cuda/matvec_iq4.cu), check_iq4 at each of
 * their distinct shapes (at most 8, rows capped at 4096) on random weights
 * of that shape, for 1, 5 and 16 input rows.  An HF directory: nothing.
 */
static void
be_model_types(struct kc *k, const char *path)
{
	enum { NSH = 8 };
	char err[UTIL_ERRLEN], line[512];
	int64_t cnt[QUANT_TYPE_COUNT] = { 0 }, sh[NSH][3];
	int nsh = 0, n = 0;
	struct gguf *gf = gguf_open(path, err);

	if (gf == NULL)
		return;	/* (a directory; a file that does not open fails in be_model) */
	for (int64_t i = 0; i < gguf_n_tensors(gf); i++) {
		const struct gguf_tensor *t = gguf_tensor(gf, i);
		int j;
		if (t->n_dims < 2 || t->type < 0 || t->type >= QUANT_TYPE_COUNT)
			continue;
		cnt[t->type]++;
		if (t->type != QUANT_IQ4_XS && t->type != QUANT_IQ4_NL)
			continue;
		for (j = 0; j < nsh && !(sh[j][0] == t->type && sh[j][2] == t->ne[0]); j++)
			;
		if (j == nsh && nsh < NSH) {
			sh[nsh][0] = t->type, sh[nsh][1] = t->ne[1] < 4096 ? t->ne[1] : 4096;
			sh[nsh++][2] = t->ne[0];
		}
	}
	gguf_close(gf);
	snprintf(line, sizeof line, "== weights");
	for (int t = 0; t < QUANT_TYPE_COUNT; t++)
		if (cnt[t] > 0 && strlen(line) + 64 < sizeof line)
			snprintf(line + strlen(line), sizeof line - strlen(line), "%s %s %lld %s",
			    n++ ? "," : "", quant_name(t), (long long)cnt[t],
			    gpu_can_matvec_q8(t) ? "i8" : gpu_can_matvec(t) ? "f32" : "f32 copy");
	printf("%s\n", line);
	fflush(stdout);
	for (int j = 0; j < nsh; j++)
		for (int m = 1; m <= GPU_MATVEC_MAX_ROWS; m += m == 1 ? 4 : 11)	/* 1, 5, 16 */
			check_iq4(k, (int)sh[j][0], sh[j][1], sh[j][2], m);
}

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

static void
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
	be_qkrope(k, &p, 1, 16, 4, 256, 512, 64, BACKEND_ROPE_NEOX, 300, 1, 0);
	be_qkrope(k, &p, 4, 24, 4, 256, 512, 64, BACKEND_ROPE_NEOX, 4000, 1, 0);
	be_qkrope(k, &p, 7, 16, 4, 256, 512, 64, BACKEND_ROPE_NEOX, 3, 0, 0);
	be_qkrope(k, &p, 3, 8, 2, 128, 128, 128, BACKEND_ROPE_NORM | BACKEND_ROPE_GGML, 50, 1, 0);
	be_qkrope(k, &p, 2, 6, 2, 80, 160, 32, BACKEND_ROPE_NEOX, 9, 1, 0);
	be_qkrope(k, &p, 2, 4, 2, 66, 132, 32, BACKEND_ROPE_NEOX, 9, 1, 0);
	/* Gemma-4's sliding layers (v normed too): 26B-A4B's heads decoding, 31B's prompt */
	be_qkrope(k, &p, 1, 16, 8, 256, 256, 256, BACKEND_ROPE_NEOX, 700, 1, 1);
	be_qkrope(k, &p, 3, 32, 16, 256, 256, 256, BACKEND_ROPE_NEOX, 90, 1, 1);
	be_qkrope(k, &p, 5, 32, 16, 256, 256, 256, BACKEND_ROPE_NEOX, 4, 0, 1);
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
	be_qkrope(k, &p, 2, 4, 2, 32, 32, 8, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 9, 1, 0);
	/* the 26B-A4B / 31B global layers: heads of 512, 128 of them turning */
	be_rope(k, &p, 3, 16, 512, 128, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 3000);
	be_qkrope(k, &p, 2, 16, 2, 512, 512, 128, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 9, 1, 1);
	be_qkrope(k, &p, 17, 8, 1, 512, 512, 128, BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP, 0, 0, 1);
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
		be_model(k, &p, models[i], 8, 16, &nz, "");
		for (int kind = 0; kind < 2; kind++) {	/* prefill past the step rows: the GEMM */
			int gk = kind ? BACKEND_GEMM_BF16 : BACKEND_GEMM_INT8;
			/* against the CPU computing those products with the GPU's numerics */
			bchk(p.g, backend_gemm_set(p.g, gk));
			bchk(p.c, backend_cpu_gemm_emulate(p.c, gk, backend_step_rows(p.g)));
			be_model(k, &p, models[i], 40, 16, &nz, kind ? ", gemm bf16" : ", gemm int8");
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
 * Q8_K form and matvec_qk.cu's kernel at 4 and 8 lanes, IQ4_XS and IQ4_NL
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
	for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
		double s[6] = { 0 };
		int nv = one ? 2 : qk ? 3 : t == QUANT_Q8_0 ? 5 : t != QUANT_NVFP4 ? 4 :
		    ms[mi] == 1 || ms[mi] == 4 ? 3 : 2;	/* (f32 x and how[] in use; IQ4: one form) */
		for (int i8 = !f32; i8 < nv; i8++) {	/* f32 x, i8 (4 lanes), i8 8 lanes; or how[] */
			struct gpu_graph *gr;
			gchk(k, gpu_tune_qk(k->g, i8 == 2 ? 8 : 4));
			gchk(k, gpu_tune_mv8(k->g, qk || one || i8 == 0 ? GPU_MV8_AUTO :
			    md[i8 - 1]));
			gchk(k, gpu_matvec_q8(k->g, t, w[0], rows, ne0, dx, ms[mi], dy, NULL));
			gchk(k, gpu_sync(k->g));	/* the scratch sized outside the graph */
			gchk(k, gpu_graph_begin(k->g));
			for (int l = 0; l < nl; l++)
				gchk(k, i8 ? gpu_matvec_q8(k->g, t, w[l % nc], rows, ne0, dx, ms[mi], dy, NULL) :
				    gpu_matvec(k->g, t, w[l % nc], rows, ne0, dx, ms[mi], dy, NULL));
			if ((gr = gpu_graph_end(k->g)) == NULL)
				die(1, "gpu: %s", gpu_errmsg(k->g));
			s[i8] = time_graph(k, gr, 5) / nl;
			gpu_graph_free(gr);
		}
		for (int l = 1; l < nv; l++) {
			printf("bench i8 %-6s %lldx%-6lld m=%-2d L=%s %8.2f us %7.1f GB/s %5.1f%% of copy  ",
			    quant_name(t), (long long)rows, (long long)ne0, ms[mi],
			    qk ? (l == 1 ? "4" : "8") : how[md[l - 1]], s[l] * 1e6, nb / s[l] * 1e-9,
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
	gchk(k, gpu_tune_mv8(k->g, GPU_MV8_AUTO));
	for (int c = 0; c < nc; c++)
		gpu_free(k->g, w[c]);
	free(w), free(x);
	gpu_free(k->g, dx), gpu_free(k->g, dy);
}

/*
 * The tensor-core form of the int8 products (GPU_MV8_TC) against k_mv8
 * (GPU_MV8_PLACE: the default below 12 rows; "default" in the lines) on one shape, m = 1, 4, 8, 16, 32 (the GEMM off: past 16
 * rows the default's two launches of 16, k_mv8t's one), device time per
 * call in a graph over copies that pass 1 GiB, as bench_i8; GB/s of
 * weight bytes.  The K-quants and IQ4_XS: k_mvkt (GPU_QKT_ON) against
 * k_mvk (IQ4_XS: k_iq4; GPU_QKT_OFF) at the type's default lanes, the
 * step rows at 32.
 */
static void
bench_i8tc(struct kc *k, int t, int64_t rows, int64_t ne0, const uint8_t *dpool)
{
	static const int ms[] = { 1, 4, 8, 16, 32 };
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
	for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
		double s[2];
		for (int f = 0; f < 2; f++) {
			struct gpu_graph *gr;
			if (qk)
				gchk(k, gpu_tune_qkt(k->g, f ? GPU_QKT_ON : GPU_QKT_OFF));
			else
				gchk(k, gpu_tune_mv8(k->g, f ? GPU_MV8_TC : GPU_MV8_PLACE));
			gchk(k, gpu_matvec_q8(k->g, t, w[0], rows, ne0, dx, ms[mi], dy, NULL));
			gchk(k, gpu_sync(k->g));	/* the scratch sized outside the graph */
			gchk(k, gpu_graph_begin(k->g));
			for (int l = 0; l < nl; l++)
				gchk(k, gpu_matvec_q8(k->g, t, w[l % nc], rows, ne0, dx, ms[mi], dy, NULL));
			if ((gr = gpu_graph_end(k->g)) == NULL)
				die(1, "gpu: %s", gpu_errmsg(k->g));
			s[f] = time_graph(k, gr, 5) / nl;
			gpu_graph_free(gr);
		}
		printf("bench i8tc %-6s %lldx%-6lld m=%-2d default %8.2f us %7.1f GB/s  tc %8.2f us "
		    "%7.1f GB/s  x%.2f faster\n", quant_name(t), (long long)rows, (long long)ne0, ms[mi],
		    s[0] * 1e6, nb / s[0] * 1e-9, s[1] * 1e6, nb / s[1] * 1e-9, s[0] / s[1]);
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

/* Seconds per call in a graph of nl calls (one call outside it first: the scratch sized). */
#define BENCH_LAUNCHES(k, nl, call, out) do {					\
	struct gpu_graph *gr_;							\
	gchk((k), (call));							\
	gchk((k), gpu_sync((k)->g));						\
	gchk((k), gpu_graph_begin((k)->g));					\
	for (int l_ = 0; l_ < (nl); l_++)					\
		gchk((k), (call));						\
	if ((gr_ = gpu_graph_end((k)->g)) == NULL)				\
		die(1, "gpu: %s", gpu_errmsg((k)->g));				\
	(out) = time_graph((k), gr_, 5) / (nl);					\
	gpu_graph_free(gr_);							\
} while (0)

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
			struct gpu_graph *gr;
			gchk(k, gpu_tune_mmq(k->g, kern[ki]));
			gchk(k, gpu_matvec_q8(k->g, t, w, rows, ne0, dx, ns[ni], dy, NULL));
			gchk(k, gpu_sync(k->g));	/* the scratch sized outside the graph */
			gchk(k, gpu_graph_begin(k->g));
			for (int l = 0; l < L; l++)
				gchk(k, gpu_matvec_q8(k->g, t, w, rows, ne0, dx, ns[ni], dy, NULL));
			if ((gr = gpu_graph_end(k->g)) == NULL)
				die(1, "gpu: %s", gpu_errmsg(k->g));
			double s = time_graph(k, gr, 5) / L;
			gpu_graph_free(gr);
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
 * K-quants) also grouped by tensor cores (GPU_QKT_ON: k_moe_mvkt).
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
			struct gpu_graph *gr;
			gchk(k, gpu_tune_moe_group(k->g, gi ? GPU_MOE_GROUP_ALL : GPU_MOE_GROUP_OFF));
			gchk(k, gpu_tune_moe_tc(k->g, gi == 2 && !qk ? GPU_MOE_TC_OFF : gi == 3 ?
			    GPU_MOE_TC_ALL : GPU_MOE_TC_AUTO));
			gchk(k, gpu_tune_qkt(k->g, gi == 2 && qk ? GPU_QKT_ON : GPU_QKT_OFF));
			gchk(k, gpu_moe_matvec(k->g, t, w, rows, ne0, NE, di, ns, KK, dx, m, dy, NULL));
			gchk(k, gpu_sync(k->g));	/* the scratch sized outside the graph */
			gchk(k, gpu_graph_begin(k->g));
			for (int l = 0; l < L; l++)
				gchk(k, gpu_moe_matvec(k->g, t, w, rows, ne0, NE, di, ns, KK, dx, m, dy,
				    NULL));
			if ((gr = gpu_graph_end(k->g)) == NULL)
				die(1, "gpu: %s", gpu_errmsg(k->g));
			s[gi] = time_graph(k, gr, 5) / L;
			gpu_graph_free(gr);
		}
		printf("bench moe %-6s %dx%lldx%-5lld m=%-4d top%d  per-slot %9.2f us  grouped "
		    "%9.2f us  x%.2f", quant_name(t), NE, (long long)rows, (long long)ne0, m, KK,
		    s[0] * 1e6, s[1] * 1e6, s[0] / s[1]);
		if (ng == 4)
			printf("  cc %9.2f us  tc %9.2f us  x%.2f of cc", s[2] * 1e6, s[3] * 1e6,
			    s[2] / s[1]);
		if (qk)
			printf("  grouped tc %9.2f us  x%.2f of grouped", s[2] * 1e6, s[1] / s[2]);
		printf("\n");
		fflush(stdout);
	}
	gchk(k, gpu_tune_moe_tc(k->g, GPU_MOE_TC_AUTO));
	gchk(k, gpu_tune_qkt(k->g, GPU_QKT_OFF));
	gchk(k, gpu_tune_moe_group(k->g, GPU_MOE_GROUP_AUTO));
	free(x), free(ids);
	gpu_free(k->g, w), gpu_free(k->g, dx), gpu_free(k->g, dy), gpu_free(k->g, di);
}

static void
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
	}
	for (int ti = 0; ti < 8; ti++)	/* the tensor-core forms (GPU_MV8_TC, GPU_QKT_ON) */
		for (size_t si = 1; si < 3; si++) {	/* 12288x4096, 4096x12288 */
			static const int tt[] = { QUANT_Q8_0, QUANT_NVFP4, QUANT_Q4_K, QUANT_Q5_K,
			    QUANT_Q6_K, QUANT_IQ4_XS, QUANT_Q4_0, QUANT_Q5_0 };
			int t = tt[ti];
			if (k->only < 0 || k->only == t)
				bench_i8tc(k, t, shapes[si][0], shapes[si][1], dpool);
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
static void
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
				    0, W));
			else
				for (int r0 = 0; r0 < M; r0 += R)
					gchk(k, W > 0 ? gpu_attention_window(k->g,
					    q + (size_t)r0 * NH * HD, K, V, o + (size_t)r0 * NH * HD, R,
					    NH, NKV, HD, r0, NULL, 0, scale, W) :
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
static void
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

/* --- main ------------------------------------------------------------- */

struct opts {
	int	bench, selftest, brk, only, chunk, unroll, noise;
	int64_t	dev, seed;
	char	*const *model;	/* MODEL...: GGUF files or HF directories */
	int	nmodel;
};

/*
 * -n: the CPU's noise on the model (cpu_noise) and the tolerances be_model
 * takes from it, on the CPU alone (any build).
 */
static int
noise_only(const char *path)
{
	struct backend *cpu;
	struct noise nz;
	char err[UTIL_ERRLEN];

	if ((cpu = backend_open("cpu", 0, err)) == NULL) {
		warnmsg("%s", err);
		return 1;
	}
	cpu_noise(cpu, path, &nz);
	printf("cpu noise %.3g (order %.3g, steps %.3g) relative to 1 + |logit|\n", nz.rel,
	    nz.order_rel, nz.steps_rel);
	printf("cpu noise %.3g (order %.3g, steps %.3g) absolute\n", nz.abs, nz.order_abs,
	    nz.steps_abs);
	printf("tolerance %.3g relative (model prefill logits), near-tie %.3g (model greedy)\n",
	    noise_tol(&nz), noise_near(&nz, 0));
	backend_close(cpu);
	return 0;
}

static int
run(const struct opts *o)
{
#ifdef MEMRA_HAVE_CUDA
	struct kc k = { .rng = 0x9E3779B97F4A7C15ULL, .only = o->only, .brk = o->brk,
		.chunk = o->chunk ? o->chunk : 2560, .unroll = o->unroll ? o->unroll : 1 };
	char err[UTIL_ERRLEN];

	k.rng ^= (uint64_t)o->seed * 0xD1B54A32D192ED03ULL;
	if ((k.g = gpu_open((int)o->dev, err, sizeof err)) == NULL) {
		warnmsg("gpu: %s", err);
		return 1;
	}
	if (gpu_tune(k.g, k.chunk, k.unroll) != 0) {
		warnmsg("gpu: %s", gpu_errmsg(k.g));
		gpu_close(k.g);
		return 1;
	}
	if (o->bench) {
		bench(&k);
		if (k.only < 0) {
			bench_gdn(&k, (int)o->dev);
			bench_attn(&k, 16, 4, 256, 512, 0);
			bench_attn(&k, 32, 4, 512, 512, 0);
			bench_attn(&k, 16, 8, 256, 2048, 1024);	/* 26B-A4B's sliding layers */
		}
	} else {
		check_all(&k);
		check_backend(&k, (int)o->dev, o->model, o->nmodel);
	}
	gpu_close(k.g);
	if (o->bench)
		return 0;
	if (o->selftest) {
		if (k.nfail == k.nchk) {
			printf("SELF-TEST OK: all %d broken checks failed\n", k.nchk);
			return 0;
		}
		printf("SELF-TEST FAILED: %d of %d broken checks passed\n", k.nchk - k.nfail, k.nchk);
		return 1;
	}
	if (k.nfail == 0)
		printf("ALL GREEN (%d checks)\n", k.nchk);
	else
		printf("%d FAILED (of %d checks)\n", k.nfail, k.nchk);
	return k.nfail ? 1 : 0;
#else
	(void)o;
	warnmsg("built without CUDA: no GPU kernels to check");
	return 1;
#endif
}

int
main(int argc, char *argv[])
{
	static const struct option lopts[] = {
		{ "bench", no_argument, NULL, 'b' }, { "device", required_argument, NULL, 'd' },
		{ "seed", required_argument, NULL, 's' }, { "self-test", no_argument, NULL, 't' },
		{ "type", required_argument, NULL, 'T' }, { "chunk", required_argument, NULL, 'C' },
		{ "unroll", required_argument, NULL, 'U' }, { "noise", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct opts o = { .only = -1, .seed = 1 };
	const char *e;
	int ch, nopt = 0;

	prog = base_name(argv[0]);
	while ((ch = getopt_long(argc, argv, "bC:d:ns:tT:U:h", lopts, NULL)) != -1) {
		nopt++;
		switch (ch) {
		case 'b': o.bench = 1; break;
		case 'n': o.noise = 1; break;
		case 'C': {
			int64_t v;
			if (util_parse_i64(optarg, 256, 2560, &v) != 0 || v % 16) {
				warnmsg("-C '%s': not a chunk size (256..2560, a multiple of 16)", optarg);
				return usage(stderr, 2);
			}
			o.chunk = (int)v;
			break;
		}
		case 'd':
			if (util_parse_i64(optarg, 0, 1023, &o.dev) != 0) {
				warnmsg("-d '%s': not a device number (0..1023)", optarg);
				return usage(stderr, 2);
			}
			break;
		case 's':
			if (util_parse_i64(optarg, 1, INT64_MAX, &o.seed) != 0) {
				warnmsg("-s '%s': not a seed (1..2^63-1)", optarg);
				return usage(stderr, 2);
			}
			break;
		case 't': o.selftest = 1; break;
		case 'T':
			if ((o.only = quant_from_name(optarg)) < 0) {
				warnmsg("-T '%s': not a type name", optarg);
				return usage(stderr, 2);
			}
			break;
		case 'U': {
			int64_t v;
			if (util_parse_i64(optarg, 1, 2, &v) != 0) {
				warnmsg("-U '%s': not an unroll factor (1 or 2)", optarg);
				return usage(stderr, 2);
			}
			o.unroll = (int)v;
			break;
		}
		case 'h': return usage(stdout, 0);
		default:  return usage(stderr, 2);
		}
	}
	o.model = argv + optind;
	o.nmodel = argc - optind;
	if (o.noise) {
		if (o.nmodel != 1 || nopt != 1) {
			warnmsg("-n: a model and no other option");
			return usage(stderr, 2);
		}
		return finish(noise_only(o.model[0]));
	}
#ifdef MEMRA_HAVE_CUDA
	if (o.only >= 0 && !gpu_can_matvec(o.only) && !gpu_can_matvec_q8(o.only)) {
		warnmsg("-T '%s': the GPU does not multiply %s", quant_name(o.only), quant_name(o.only));
		return usage(stderr, 2);
	}
#endif
	if ((e = getenv("MEMRA_KC_BREAK")) != NULL && strcmp(e, "1") == 0)
		o.brk = 1;
	o.brk |= o.selftest;
	return finish(run(&o));
}
