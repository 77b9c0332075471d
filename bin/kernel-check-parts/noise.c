/*
 * kernel-check: the CPU's float-order noise on a model (any build: -n uses
 * it).  Shared declarations: kc.h.
 */
#include "kc.h"

/* --- the CPU's float-order noise on a model (also without CUDA) --------- */

void *
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
void
model_prompt(int32_t *pr, int n, int nv)
{
	static const int32_t p8[] = { 1, 22, 333, 44, 5, 66, 7, 88 };

	for (int i = 0; i < n; i++)
		pr[i] = (p8[i % 8] + (i / 8) * 3) % nv;
}


/* Fold the difference of logits a and b ([n]) into *rel and *abs. */
void
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
void
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
double
noise_tol(const struct noise *nz)
{
	return fmax(nz->int8 > 0 ? INT8_LOGITS_TOL : 1e-2, fmin(1.0, 3 * nz->rel));
}


/* be_model's near-tie: a top-2 margin under it lets greedy ids part; gap: the
 * largest difference of the two backends' prefill logits just measured (held
 * to its own bound): a margin under twice it may flip. */
double
noise_near(const struct noise *nz, double gap)
{
	return fmax(fmax(1e-3, 3 * nz->abs), 2 * gap);
}
