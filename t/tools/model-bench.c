/*
 * model-bench: decode and prefill speed of a model on a device (a
 * benchmark, not a test).  One TSV-ish line per measurement.
 *   model-bench [-CPL] [-d device] [-t threads] [-c ctx] [-n steps] [-r reps] [-k kmax] [-B GB/s]
 *       [-D DRAFTER] MODEL
 *   model-bench -V WxH [-P] [-d device] [-t threads] [-r reps] TOWER
 * -t: the CPU backend's threads (0, the default: one per core).  -C: every
 * time is the process's CPU time, not wall time (with -t 1, the work on a
 * shared machine, without the waits for a core).
 * Prefills ctx tokens twice (one forward each; the first brings the
 * buffers to size and is reported as prefill-cold, as llama-bench warms up
 * before it times; the second's time is the prefill rate and the time to
 * first token of a running server), then times reps runs of n decode steps (one row,
 * last logits read back to the host each step: what a sampler needs) and
 * reports the median tok/s, the weight bytes one step reads (every trunk
 * matrix and the output head, an expert stack's n_used of n_exp experts;
 * not token_embd or the MTP layer) and the
 * rate against -B, the measured device copy bandwidth.  Then the cost of
 * a verify forward of m = 2..kmax+1 rows (logits of every row) relative to
 * one decode step, rolled back after each.  Token ids are fixed, not
 * sampled: a random-weight model's argmax means nothing (each verify line
 * the median of 5, then the least and the most ms).  -P: then, with
 * recorded steps off, where the device's time goes in a decode step, a
 * K=3 verify and the prefill (backend_prof: kernel by kernel, per name,
 * device microseconds a step), and the sum against the step's wall time
 * with the launches a step (the fused ops' count).
 * -L: plain launches, programmatic dependent launch off (backend_pdl_set;
 * as MEMRA_CUDA_PDL=0), to time against it; the model line says "pdl 0/1".
 * -G host|device: the decode steps and verifies pick greedily, as a
 * greedy run does, and feed each step's pick to the next: "host" reads
 * the logits back and picks with lib/sample (sample_next), "device" picks
 * where the logits are (model_forward_next, model_forward_argmax), so they
 * are timed against each other; the model line says "pick host/device".
 * -T K (with -G): the decode steps draw from the top K at temperature 0.8 instead
 * (the verifies stay greedy): "device" selects the top K on the device
 * (backend_topk) and draws from them on the host.  -W (with -G): they draw
 * from the whole row at temperature 0.8, top-p 0.9 instead: "device" draws
 * on the device (backend_draw); the model line says "row_draw 1".
 * MEMRA_CUDA_GEMM=int8|bf16|bf16-mirror picks the prefill products' kernel
 * (backend_gemm_env); the model line names it ("gemm").
 * -b B: then B sequences decode together, as serve's steps do: each
 * prefilled with ctx tokens of its own, then reps runs of n batched steps
 * (model_forward_batch_argmax: one row a sequence, each row's greedy pick
 * made on the device and fed to its next step); "decode-batch" reports the
 * median step time, the aggregate tok/s and the step against one row's
 * ("x_step").  With -P, where the device's time goes in such a step too.
 * -s: the batched steps' per-sequence ops (Gated DeltaNet conv and
 * recurrence, KV stores) one call a sequence, as before the backend's
 * _seqs forms (backend_per_seq_set: the same bits), for an A/B of -b;
 * the model line says "per_seq 1".
 * MEMRA_CUDA_MOE_GROUP=0|1|all|cc how the experts' products run
 * (backend_moe_group_env: per slot, grouped where slots share experts,
 * always grouped, grouped without the int8 tensor cores; the same bits),
 * for an A/B of a MoE model's prefill (1 against cc: the tensor-core
 * kernel of Q8_0 and NVFP4 experts against the kernels before it).
 * MEMRA_CUDA_QKT=0|1|auto the K-quant products of up to the step rows and
 * the grouped experts by CUDA cores or int8 tensor cores (backend_qkt_env;
 * the same bits), for an A/B of a K-quant model; the model line says "qkt".
 * MEMRA_CUDA_QK_STAGE=0|1 the Q6_K decode products' rows read in place or
 * staged in shared memory (backend_qk_stage_env; the same bits), for an A/B
 * of a Q6_K model; the model line says "qk_stage".  MEMRA_CUDA_Q6K_PACK=0|1
 * the Q6_K weights as in the file or packed four blocks a group
 * (backend_q6k_pack_env; the same bits); the model line says "q6k_pack",
 * the backend's (backend_q6k_pack: 1 by default on CUDA, 0 on the CPU).
 * MEMRA_HOST_POS=1 opens the model with model_options.host_pos: its decode
 * and verify steps run at the host's positions and are never recorded (as
 * before gemma4 and step35 read theirs from the device: the same bits), for
 * an A/B of the recorded steps; the model line says "host_pos 1".
 * -V WxH: TOWER is a Gemma-4 vision tower (an mmproj GGUF or a checkpoint
 * with a vision_config, as run-gen --mmproj takes it), and what is timed is
 * its encoding of one image of W x H pixels (multiples of the patch times
 * the pooling; random pixel values, made once on the host): "vision" the
 * median of reps runs after one untimed (the soft tokens read back), ms and
 * the image's patches and soft tokens; with -P where the device's time goes
 * in one encoding (kernel by kernel, as above).  Nothing else runs.
 * A model with an MTP head (and no -D drafter): after the verifies its
 * draft chain (model_mtp_chain, as lib/spec.c's greedy drafts run it) of
 * 1..kmax steps at the position after the prompt, timed both ways (the
 * median of 5 each after one untimed): "mtp-chain" chained_ms (the picks left on the device, one
 * recorded graph) and steps_ms (backend_chain_set 0: each step's pick read
 * back, as MEMRA_CUDA_MTP_CHAIN=0), each against the decode step
 * (x_step), and steps_ms / chained_ms.  MEMRA_FRSPEC_TRIM (a rank list)
 * self-trims the MTP head to its rows first, so the chain is a masked
 * head's (its attach line on stderr).
 * -D DRAFTER: arm a DFlash / DFlash2 block drafter (a directory, file or
 * hf: spec, as run-spec --dspark-draft; its weights as MEMRA_DFLASH_PREC
 * says, default q4) and, after the verifies, time what a speculative
 * round with it costs (the median of 5 each after one untimed, x_step
 * against the decode step): on a fresh sequence of ctx prompt rows whose
 * taps are the drafter's context, "dflash-draft" one drafter forward over
 * the block after them (the anchor and block - 1 masks; DFlash2's lattice or
 * DFlash's logits read back, as lib/spec.c's draft), "dflash-verify" the
 * trunk's verify of block rows as spec's greedy round runs it (picks on
 * the device, the rows' taps read back; K = block - 1), and
 * "dflash-context" a block of taps into the drafter's context (a round
 * adds accepted + 1 rows).  With a drafter armed every trunk forward
 * keeps the drafter's layers (the decode steps too, so x_step is against
 * a step that keeps them).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "gguf.h"
#include "model.h"
#include "sample.h"
#include "state.h"
#include "util.h"
#include "vision.h"

static clockid_t clk = CLOCK_MONOTONIC;	/* -C: the process's CPU time; set once in main */

static double
now(void)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

enum { PICK_NONE, PICK_HOST, PICK_DEVICE };

/*
 * A forward of m rows (logits of the last, or with MODEL_LOGITS_ALL of
 * every row) and, with a pick, each row's pick by smp at position pos
 * into pk[m]: the logits read back and picked on the host, or picked on
 * the device (several rows: greedy).
 */
static int
fwd_pick(struct model *md, struct state *st, const int32_t *ids, int m, int flags, float *lg,
    int pick, struct sampler *smp, int nv, int64_t pos, int32_t *pk)
{
	int rows = flags & MODEL_LOGITS_ALL ? m : 1;

	if (pick == PICK_DEVICE)
		return rows > 1 ? model_forward_argmax(md, st, ids, m, flags, pk, NULL) :
		    model_forward_next(md, st, ids, m, flags, smp, NULL, 0, 0, pos, lg, pk);
	if (model_forward(md, st, ids, m, flags, lg, NULL) != 0)
		return -1;
	for (int i = 0; pick == PICK_HOST && i < rows; i++)
		pk[i] = sample_next(smp, lg + (size_t)i * nv, NULL, 0, 0, pos);
	return 0;
}

/* backend_prof on for the forward that follows: its start (host seconds). */
static double
prof_on(struct backend *be, const char *what)
{
	if (backend_prof_begin(be) != 0)
		die(1, "prof %s: %s", what, backend_errmsg(be));
	return now();
}

/* ... and off after it: its host seconds since t0 less the spin ahead. */
static double
prof_off(struct backend *be, const char *what, double t0)
{
	if (backend_prof_end(be) != 0)
		die(1, "prof %s: %s", what, backend_errmsg(be));
	return now() - t0 - BACKEND_PROF_SPIN_S;
}

/* One forward under backend_prof; its host seconds less the spin ahead. */
static double
prof_forward(struct backend *be, struct model *md, struct state *st, const int32_t *ids,
    int m, int flags, float *lg, const char *what)
{
	double t0 = prof_on(be, what);

	if (model_forward(md, st, ids, m, flags, lg, NULL) != 0)
		die(1, "prof %s: %s", what, model_errmsg(md));
	return prof_off(be, what, t0);
}

/* The rows backend_prof summed over steps, per step, then reset. */
static void
prof_print(struct backend *be, const char *what, int steps, double wall)
{
	const struct backend_prof_row *r;
	int n = backend_prof_rows(be, &r);
	double tot = 0, launches = 0;

	for (int i = 0; i < n; i++)
		tot += r[i].s, launches += (double)r[i].n;
	for (int i = 0; i < n; i++)
		printf("prof\t%s\t%-28s\tus\t%9.1f\tlaunches\t%6.1f\tshare\t%5.1f%%\n", what,
		    r[i].name, r[i].s / steps * 1e6, (double)r[i].n / steps, 100 * r[i].s / tot);
	printf("prof\t%s\t%-28s\tus\t%9.1f\twall_us\t%9.1f\tlaunches\t%6.1f\n", what,
	    "(sum of kernels)", tot / steps * 1e6, wall / steps * 1e6, launches / steps);
	backend_prof_reset(be);
}

static double
median(double *v, int n)
{
	qsort(v, n, sizeof *v, cmpd);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* -V: the tower at path on be encoding a random image of w x h pixels, reps times. */
static int
vision_bench(struct backend *be, const char *path, int w, int h, int reps, int prof)
{
	char err[UTIL_ERRLEN];
	struct vision *v = vision_open(path, be, err);
	struct vision_image img = { 0 };
	double dt[99], t0;
	float *out;

	if (v == NULL)
		die(1, "%s", err);
	const struct vision_hparams *hp = vision_hparams(v);
	int cell = hp->patch * hp->pool;
	if (w % cell || h % cell)
		die(2, "-V %dx%d: not multiples of %d (patch %d x pooling %d)", w, h, cell, hp->patch,
		    hp->pool);
	img.w = img.rw = w, img.h = img.rh = h;
	img.gw = w / hp->patch, img.gh = h / hp->patch;
	img.n_tok = img.gw * img.gh / (hp->pool * hp->pool);
	size_t np = (size_t)img.gw * img.gh * hp->patch * hp->patch * 3;
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	if ((img.px = malloc(np * sizeof *img.px)) == NULL ||
	    (out = malloc((size_t)img.n_tok * hp->n_embd_text * sizeof *out)) == NULL)
		die(1, "out of memory");
	for (size_t i = 0; i < np; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		img.px[i] = (float)(x >> 40) * 0x1p-24f;
	}
	printf("vision\t%s\tdevice\t%s\tlayers\t%d\tembd\t%d\tpatch\t%d\tpool\t%d\n", path,
	    backend_name(be), hp->n_layer, hp->n_embd, hp->patch, hp->pool);
	for (int r = -1; r < reps; r++) {	/* the first brings the buffers to size */
		t0 = now();
		if (vision_encode(v, &img, out) != 0)
			die(1, "%s", vision_errmsg(v));
		if (r >= 0)
			dt[r] = now() - t0;
	}
	printf("vision-encode\t%dx%d\tpatches\t%d\tsoft_tokens\t%d\treps\t%d\tms\t%.3f\n", w, h,
	    img.gw * img.gh, img.n_tok, reps, median(dt, reps) * 1e3);
	if (prof) {
		backend_graph_set(be, 0);	/* backend_prof times launches, not graph replays */
		t0 = prof_on(be, "vision");
		if (vision_encode(v, &img, out) != 0)
			die(1, "%s", vision_errmsg(v));
		prof_print(be, "vision", 1, prof_off(be, "vision", t0));
	}
	free(out);
	vision_image_free(&img);
	vision_close(v);
	return 0;
}

/* One batched step of the nb sequences st; each one's pick (pk: nb ids of
 * scratch) becomes its next token in tok. */
static void
batch_step(struct model *md, struct state **st, int32_t *tok, int32_t *pk, int nb,
    const char *what)
{
	int nv = model_hparams(md)->n_vocab;

	if (model_forward_batch_argmax(md, st, tok, nb, pk, NULL) != 0)
		die(1, "%s: %s", what, model_errmsg(md));
	for (int i = 0; i < nb; i++) {
		if (pk[i] < 0 || pk[i] >= nv)
			die(1, "%s: sequence %d picked %d (no finite logit?)", what, i, pk[i]);
		tok[i] = pk[i];
	}
}

/*
 * -b: nb sequences of ctx prompt tokens each (their own ids), then reps
 * runs of n steps of model_forward_batch_argmax, each sequence fed its own
 * pick; with prof, n more steps under backend_prof.  step: one row's
 * decode step (s), for x_step.
 */
static void
batch_bench(struct backend *be, struct model *md, int nb, int ctx, int n, int reps,
    int prof, double step)
{
	int nv = model_hparams(md)->n_vocab, len = ctx + (reps + prof) * n + 8;
	struct state **st = calloc((size_t)nb, sizeof *st);
	int32_t *tok = malloc((size_t)nb * 2 * sizeof *tok), *pk, *ids = malloc((size_t)ctx * sizeof *ids);
	double *dt = malloc((size_t)reps * sizeof *dt), t0, wall = 0;
	char err[UTIL_ERRLEN];

	if (st == NULL || tok == NULL || ids == NULL || dt == NULL)
		die(1, "batch: out of memory");
	pk = tok + nb;
	for (int b = 0; b < nb; b++) {
		if ((st[b] = model_state_new(md, len, 1, err)) == NULL)
			die(1, "batch: sequence %d: %s", b, err);
		for (int i = 0; i < ctx; i++)
			ids[i] = 1 + (int32_t)(((int64_t)i * 7919 + (int64_t)b * 104729) % (nv - 1));
		if (model_forward_argmax(md, st[b], ids, ctx, MODEL_PREFILL, &tok[b], NULL) != 0)
			die(1, "batch: prefill %d: %s", b, model_errmsg(md));
	}
	for (int r = 0; r < reps; r++) {
		t0 = now();
		for (int i = 0; i < n; i++)
			batch_step(md, st, tok, pk, nb, "batch: step");
		dt[r] = (now() - t0) / n;
		printf("decode-batch\tB\t%d\tctx\t%d\trep\t%d\tms_per_step\t%.4f\ttok_s\t%.1f\n", nb,
		    ctx, r, dt[r] * 1e3, nb / dt[r]);
	}
	double m = median(dt, reps);
	printf("decode-batch-median\tB\t%d\tctx\t%d\tn\t%d\treps\t%d\tms_per_step\t%.4f\ttok_s\t%.1f"
	    "\tx_step\t%.3f\n", nb, ctx, n, reps, m * 1e3, nb / m, m / step);
	if (prof) {
		char what[32];
		snprintf(what, sizeof what, "decode-b%d", nb);
		backend_graph_set(be, 0);
		for (int i = 0; i < n; i++) {
			t0 = prof_on(be, what);
			batch_step(md, st, tok, pk, nb, what);
			wall += prof_off(be, what, t0);
		}
		prof_print(be, what, n, wall);
	}
	for (int b = 0; b < nb; b++)
		state_free(st[b]);
	free(st), free(tok), free(ids), free(dt);
}

/* f(md, a) once untimed (the buffers grow), then 5 timings into dt (sorted);
 * their median.  f's failure dies naming what. */
static double
time5(int (*f)(struct model *, void *), struct model *md, void *a, double *dt, const char *what)
{
	for (int r = -1; r < 5; r++) {
		double t0 = now();

		if (f(md, a) != 0)
			die(1, "%s: %s", what, model_errmsg(md));
		if (r >= 0)
			dt[r] = now() - t0;
	}
	return median(dt, 5);
}

struct mtpb {		/* the MTP chain: what each timed call takes */
	struct state *st;
	int	p0, k;
	float	*h;
	int32_t	ids[16];
};

static int
mtp_chain(struct model *md, void *a)
{
	struct mtpb *b = a;

	return model_mtp_chain(md, b->st, b->p0, b->h, 1, b->k, b->ids, NULL);
}

/* The MTP head's chain of k = 1..kmax steps at p0 of st, chained and step by step. */
static void
mtp_bench(struct backend *be, struct model *md, struct state *st, int p0, int kmax,
    double step)
{
	int ne = model_hparams(md)->n_embd;
	struct mtpb b = { st, p0, 0, model_host_alloc(md, ne), { 0 } };
	double dt[5], t[2];

	if (b.h == NULL)
		die(1, "mtp chain: out of memory");
	for (int i = 0; i < ne; i++)
		b.h[i] = (float)((i * 37 % 101) - 50) * 0.01f;
	for (b.k = 1; b.k <= kmax; b.k++) {
		for (int off = 0; off < 2; off++) {
			backend_chain_set(be, !off);
			t[off] = time5(mtp_chain, md, &b, dt, "mtp chain");
		}
		backend_chain_set(be, 1);
		printf("mtp-chain\tsteps\t%d\tchained_ms\t%.4f\tx_step\t%.3f\tsteps_ms\t%.4f\t"
		    "x_step\t%.3f\tsteps_over_chained\t%.3f\n", b.k, t[0] * 1e3, t[0] / step,
		    t[1] * 1e3, t[1] / step, t[1] / t[0]);
	}
	model_host_free(md, b.h);
}

struct dfl {		/* -D: what each timed call takes */
	struct state *st, *ds;	/* the trunk's state; the drafter's context */
	int	ctx, block;
	int32_t	ids[64], pk[64];	/* a block's rows */
	float	*vt;	/* [block][n_tap * n_embd] a verify's taps */
	struct model_dflash_out o;
};

/* One drafter forward over the block after the context, as spec's draft. */
static int
dfl_draft(struct model *md, void *a)
{
	struct dfl *d = a;

	return model_dflash_draft(md, d->ds, d->ctx, d->ids[0], &d->o);
}

/* A block-row verify as spec's greedy round: picks on the device, the rows'
 * taps read back (the drafter's next context); rolled back to its first row. */
static int
dfl_verify(struct model *md, void *a)
{
	struct dfl *d = a;

	if (model_forward_argmax(md, d->st, d->ids, d->block, MODEL_LOGITS_ALL | MODEL_VERIFY,
	    d->pk, NULL) != 0 || model_taps(md, d->vt, d->block) != 0)
		return -1;
	return state_rollback(d->st, 1);
}

/* A block's rows of taps into the drafter's context (at most what a round adds). */
static int
dfl_context(struct model *md, void *a)
{
	struct dfl *d = a;

	return model_dflash_context(md, d->ds, d->ctx, d->vt, d->block);
}

/*
 * -D: the DFlash drafter's costs as spec's rounds pay them, each the
 * median of 5 after one untimed, against one decode step (step, s): a
 * fresh sequence of ctx prompt rows (prefilled 256 at a time, their taps
 * into the drafter's context), then one drafter forward over the block
 * after it, the trunk's verify of block rows, and a block of taps into
 * the context.
 */
static void
dflash_bench(struct model *md, int ctx, double step)
{
	const struct model_hparams *dh = model_dflash(md);
	size_t tw = (size_t)dh->n_tap * model_hparams(md)->n_embd, k = dh->sel_topk;
	int nv = model_hparams(md)->n_vocab, B = dh->block, part = 256;
	struct dfl d = { .ctx = ctx, .block = B };
	float *tp = malloc((size_t)(ctx < part ? ctx : part) * tw * sizeof *tp);
	int32_t *pid = malloc((size_t)part * sizeof *pid);
	double dt[5], m;
	char err[UTIL_ERRLEN];

	d.vt = malloc((size_t)B * tw * sizeof *d.vt);
	d.o.cand = malloc(((B - 1) * k + 1) * sizeof *d.o.cand);	/* as spec.c's */
	d.o.lat = malloc(((B - 1) * k * k + 1) * sizeof *d.o.lat);
	d.o.logits = k ? NULL : model_host_alloc(md, (size_t)(B - 1) * model_draft_vocab(md));
	if (B > (int)(sizeof d.ids / sizeof *d.ids))
		die(1, "dflash: block %d: more rows than %d", B, (int)(sizeof d.ids / sizeof *d.ids));
	if (tp == NULL || pid == NULL || d.vt == NULL || d.o.cand == NULL || d.o.lat == NULL ||
	    (k == 0 && d.o.logits == NULL))
		die(1, "dflash: out of memory");
	if ((d.st = model_state_new(md, ctx + B + 8, B, err)) == NULL ||	/* 6 verifies: 1 row each */
	    (d.ds = model_dflash_state(md, ctx + B + 1, 0, err)) == NULL)
		die(1, "dflash: %s", err);
	for (int p = 0; p < ctx; p += part) {
		int n = ctx - p < part ? ctx - p : part;

		for (int i = 0; i < n; i++)
			pid[i] = 1 + (int32_t)(((int64_t)(p + i) * 7919) % (nv - 1));
		if (model_forward(md, d.st, pid, n, MODEL_PREFILL, NULL, NULL) != 0 ||
		    model_taps(md, tp, n) != 0 || model_dflash_context(md, d.ds, p, tp, n) != 0)
			die(1, "dflash: context: %s", model_errmsg(md));
	}
	for (int i = 0; i < B; i++)
		d.ids[i] = 1 + (int32_t)((i * 31 + 7) % (nv - 1));
	m = time5(dfl_draft, md, &d, dt, "dflash: draft");
	printf("dflash-draft\tblock\t%d\tctx\t%d\tms\t%.4f\tmin\t%.4f\tmax\t%.4f\tx_step\t%.3f\n", B,
	    ctx, m * 1e3, dt[0] * 1e3, dt[4] * 1e3, m / step);
	m = time5(dfl_verify, md, &d, dt, "dflash: verify");
	printf("dflash-verify\tK\t%d\trows\t%d\tms\t%.4f\tmin\t%.4f\tmax\t%.4f\tx_step\t%.3f\n",
	    B - 1, B, m * 1e3, dt[0] * 1e3, dt[4] * 1e3, m / step);
	m = time5(dfl_context, md, &d, dt, "dflash: context");
	printf("dflash-context\trows\t%d\tms\t%.4f\tmin\t%.4f\tmax\t%.4f\tx_step\t%.3f\n", B,
	    m * 1e3, dt[0] * 1e3, dt[4] * 1e3, m / step);
	state_free(d.st), state_free(d.ds);
	model_host_free(md, d.o.logits);
	free(tp), free(pid), free(d.vt), free(d.o.cand), free(d.o.lat);
}

/*
 * Bytes of the matrices one decode step reads (GGUF only; 0 otherwise): an
 * expert stack (a tensor named *_exps.*) only its n_used of n_exp experts,
 * the token embeddings (a row each) and the MTP block (not run) none.
 */
static double
step_bytes(const char *path, const struct model_hparams *hp)
{
	char err[UTIL_ERRLEN], mtp[32];
	struct gguf *g = gguf_open(path, err);
	double b = 0;

	if (g == NULL)
		return 0;
	snprintf(mtp, sizeof mtp, "blk.%d.", hp->n_layer);
	for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		if (strcmp(t->name, "token_embd.weight") == 0 || strncmp(t->name, mtp, strlen(mtp)) == 0)
			continue;
		if (strstr(t->name, "_exps.") != NULL && hp->n_expert > 0)
			b += (double)t->nbytes * hp->n_expert_used / hp->n_expert;
		else
			b += (double)t->nbytes;
	}
	gguf_close(g);
	return b;
}

int
main(int argc, char *argv[])
{
	const char *dev = "cuda";
	int ch, ctx = 128, n = 64, reps = 3, kmax = 8, prof = 0, plain = 0, pick = PICK_NONE;
	int topk = 0, rowdraw = 0, nt = 0, nb = 0, perseq = 0, vw = 0, vh = 0;
	char vc;
	struct model_options mo = { 0 };	/* -D: the DFlash drafter */
	double bw = 0;
	int64_t v;
	char err[UTIL_ERRLEN];

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "d:t:c:n:r:k:b:B:CPLG:T:WsD:V:")) != -1) {
		switch (ch) {
		case 'D': mo.dflash = optarg; break;
		case 'V':
			if (sscanf(optarg, "%dx%d%c", &vw, &vh, &vc) != 2 || vw < 1 || vh < 1 ||
			    vw > 8192 || vh > 8192)
				die(2, "bad -V: WxH pixels, 1..8192 each");
			break;
		case 'b': if (util_parse_i64(optarg, 1, 256, &v)) die(2, "bad -b: 1..256"); nb = (int)v; break;
		case 'C': clk = CLOCK_PROCESS_CPUTIME_ID; break;
		case 'd': dev = optarg; break;
		case 't': if (util_parse_i64(optarg, 0, 1024, &v)) die(2, "bad -t"); nt = (int)v; break;
		case 'c': if (util_parse_i64(optarg, 1, 1 << 20, &v)) die(2, "bad -c"); ctx = (int)v; break;
		case 'n': if (util_parse_i64(optarg, 1, 1 << 16, &v)) die(2, "bad -n"); n = (int)v; break;
		case 'r': if (util_parse_i64(optarg, 1, 99, &v)) die(2, "bad -r"); reps = (int)v; break;
		case 'k': if (util_parse_i64(optarg, 0, 15, &v)) die(2, "bad -k"); kmax = (int)v; break;
		case 'B': bw = atof(optarg); break;
		case 'P': prof = 1; break;
		case 'L': plain = 1; break;
		case 'G':
			if (strcmp(optarg, "host") == 0)
				pick = PICK_HOST;
			else if (strcmp(optarg, "device") == 0)
				pick = PICK_DEVICE;
			else
				die(2, "bad -G: host or device");
			break;
		case 'T':
			if (util_parse_i64(optarg, 1, 1024, &v))
				die(2, "bad -T: 1..1024");
			topk = (int)v;
			break;
		case 'W': rowdraw = 1; break;
		case 's': perseq = 1; break;
		default: return 2;
		}
	}
	if (argc - optind != 1)
		die(2, "usage: model-bench [-CPLWs] [-G host|device] [-T K] [-d device] [-t threads] [-c ctx] [-n steps] "
		    "[-r reps] [-k kmax] [-b B] [-B GB/s] [-D DRAFTER] MODEL | -V WxH [-P] [-d device] "
		    "[-t threads] [-r reps] TOWER");
	const char *path = argv[optind];
	double t0 = now();
	struct backend *be = backend_open(dev, nt, err);
	int gs = be ? backend_graph_env(be, getenv("MEMRA_CUDA_GRAPH"), err) : 0;
	if (gs < 0)
		die(2, "MEMRA_CUDA_GRAPH: %s", err);
	const char *pe = getenv("MEMRA_CUDA_PDL");
	if (backend_pdl_env(NULL, pe, err) < 0)
		die(2, "MEMRA_CUDA_PDL: %s", err);
	plain |= pe != NULL && strcmp(pe, "0") == 0;
	int pdl = be ? backend_pdl_set(be, !plain) : 0;	/* -L: A B B A against it */
	if (pdl < 0)
		die(1, "%s", backend_errmsg(be));
	const char *ge = getenv("MEMRA_CUDA_GEMM");
	if (backend_gemm_env(be, ge, err) < 0)
		die(2, "MEMRA_CUDA_GEMM: %s", err);
	if (backend_moe_group_env(be, getenv("MEMRA_CUDA_MOE_GROUP"), err) < 0)
		die(2, "MEMRA_CUDA_MOE_GROUP: %s", err);
	const char *qe = getenv("MEMRA_CUDA_QKT");
	if (backend_qkt_env(be, qe, err) < 0)
		die(2, "MEMRA_CUDA_QKT: %s", err);
	const char *se = getenv("MEMRA_CUDA_QK_STAGE");
	if (backend_qk_stage_env(be, se, err) < 0)
		die(2, "MEMRA_CUDA_QK_STAGE: %s", err);
	if (backend_q6k_pack_env(be, getenv("MEMRA_CUDA_Q6K_PACK"), err) < 0)
		die(2, "MEMRA_CUDA_Q6K_PACK: %s", err);
	if (vw > 0) {	/* -V: the tower alone */
		if (be == NULL)
			die(1, "%s", err);
		vision_bench(be, path, vw, vh, reps, prof);
		backend_close(be);
		return finish(0);
	}
	mo.dflash_prec = getenv("MEMRA_DFLASH_PREC");
	if (mo.dflash != NULL && model_dflash_prec(mo.dflash_prec) < -1)
		die(2, "MEMRA_DFLASH_PREC: '%s': not q4, q8, bf16, f32 or keep", mo.dflash_prec);
	const char *hpos = getenv("MEMRA_HOST_POS");
	if (hpos != NULL && strcmp(hpos, "0") != 0 && strcmp(hpos, "1") != 0)
		die(2, "MEMRA_HOST_POS: '%s': not 0 or 1", hpos);
	mo.host_pos = hpos != NULL && strcmp(hpos, "1") == 0;
	mo.ranks = getenv("MEMRA_FRSPEC_TRIM");	/* the MTP head self-trimmed: a masked chain */
	struct model *md = be ? model_open_opts(path, be, mo.dflash || mo.host_pos || mo.ranks ?
	    &mo : NULL, err) : NULL;
	if (md == NULL)
		die(1, "%s", err);
	if (model_attach_line(md, err, sizeof err) == 0)
		fprintf(stderr, "%s\n", err);
	const struct model_hparams *hp = model_hparams(md);
	int nv = hp->n_vocab, tot = ctx + (reps + prof) * n + 4 * (kmax + 1) * kmax + 5 * 4 + 16;
	int rows = prof && kmax < 3 ? 4 : kmax + 1;	/* the widest verify (-P: K=3) */
	struct state *st = model_state_new(md, tot, rows, err);
	float *lg = model_host_alloc(md, (size_t)rows * nv);	/* as spec.c and run-gen take theirs */
	int32_t *ids = malloc((size_t)(ctx > 16 ? ctx : 16) * sizeof *ids);
	double *dt = malloc((reps > 5 ? reps : 5) * sizeof *dt), step, bytes;
	struct sample_params sp;
	struct sampler *smp, *sdec;	/* greedy (verify), the decode steps' */
	int32_t pk[16];

	sample_defaults(&sp);	/* greedy */
	if ((smp = sample_new(&sp, nv, err)) == NULL)
		die(1, "%s", err);
	sp.temp = topk || rowdraw ? 0.8f : 0, sp.top_k = rowdraw ? 0 : topk;
	sp.top_p = rowdraw ? 0.9f : 1;
	if ((sdec = sample_new(&sp, nv, err)) == NULL)
		die(1, "%s", err);
	if (st == NULL || lg == NULL || ids == NULL || dt == NULL)
		die(1, "%s", st ? "out of memory" : err);
	backend_per_seq_set(be, perseq);
	printf("model\t%s\tdevice\t%s\tload_s\t%.2f\tpdl\t%d%s\ttop_k\t%d\trow_draw\t%d\t"
	    "gemm\t%s\tper_seq\t%d\tqkt\t%s\tqk_stage\t%s\tq6k_pack\t%d%s\n", path, backend_name(be), now() - t0, pdl,
	    pick == PICK_HOST ? "\tpick\thost" : pick == PICK_DEVICE ? "\tpick\tdevice" : "",
	    sp.top_k, rowdraw, ge != NULL && *ge != '\0' ? ge :
	    BACKEND_GEMM_DEFAULT == BACKEND_GEMM_BF16 ? "bf16" : "int8", perseq,
	    qe != NULL && *qe != '\0' ? qe : "auto", se != NULL && *se != '\0' ? se : "0",
	    backend_q6k_pack(be), mo.host_pos ? "\thost_pos\t1" : "");
	for (int i = 0; i < ctx; i++)
		ids[i] = 1 + (int32_t)((i * 7919) % (nv - 1));
	double pf = 0;
	for (int w = 0; w < 2; w++) {	/* cold (buffers grow), then the timed one */
		if (w == 1 && state_reset(st) != 0)
			die(1, "prefill: state reset failed");
		t0 = now();
		if (model_forward(md, st, ids, ctx, MODEL_PREFILL, lg, NULL) != 0)
			die(1, "prefill: %s", model_errmsg(md));
		pf = now() - t0;
		printf("%s\tctx\t%d\ts\t%.4f\ttok_s\t%.1f\n", w ? "prefill" : "prefill-cold", ctx,
		    pf, ctx / pf);
	}
	for (int r = 0; r < reps; r++) {
		pk[0] = 1 + (int32_t)(r * 31 % (nv - 1));
		t0 = now();
		for (int i = 0; i < n; i++) {
			int32_t t = pick ? pk[0] : 1 + (int32_t)((r * n + i) * 31 % (nv - 1));
			if (fwd_pick(md, st, &t, 1, 0, lg, pick, sdec, nv, r * n + i, pk) != 0)
				die(1, "decode: %s", model_errmsg(md));
			if (pick && pk[0] < 0)
				die(1, "decode: no finite logit");
		}
		dt[r] = (now() - t0) / n;
		printf("decode\tctx\t%d\trep\t%d\tms_per_tok\t%.4f\ttok_s\t%.2f\n", ctx, r,
		    dt[r] * 1e3, 1 / dt[r]);
	}
	step = median(dt, reps);
	bytes = step_bytes(path, hp);
	printf("decode-median\tctx\t%d\tn\t%d\treps\t%d\ttok_s\t%.2f\tbytes_per_tok\t%.0f\t"
	    "GB_s\t%.1f\tof_copy\t%.3f\n", ctx, n, reps, 1 / step, bytes, bytes / step / 1e9,
	    bw > 0 ? bytes / step / 1e9 / bw : 0);
	for (int m = 2; m <= kmax + 1; m++) {
		for (int r = 0; r < 5; r++) {
			for (int i = 0; i < m; i++)
				ids[i] = 1 + (int32_t)((m * 13 + i * 7 + r) % (nv - 1));
			t0 = now();
			if (fwd_pick(md, st, ids, m, MODEL_LOGITS_ALL | MODEL_VERIFY, lg, pick, smp, nv, 0,
			    pk) != 0)
				die(1, "verify: %s", model_errmsg(md));
			dt[r] = now() - t0;
			if (state_rollback(st, 1) != 0)
				die(1, "rollback failed");
		}
		double vm = median(dt, 5);
		printf("verify\tK\t%d\trows\t%d\tms\t%.4f\tx_step\t%.3f\tmin\t%.4f\tmax\t%.4f\n", m - 1,
		    m, vm * 1e3, vm / step, dt[0] * 1e3, dt[4] * 1e3);
	}
	if (hp->n_mtp > 0 && kmax > 0 && mo.dflash == NULL)	/* the MTP head drafts */
		mtp_bench(be, md, st, ctx, kmax, step);
	if (mo.dflash != NULL)
		dflash_bench(md, ctx, step);
	if (nb > 0)
		batch_bench(be, md, nb, ctx, n, reps, prof, step);
	if (prof) {
		double wall = 0;
		backend_graph_set(be, 0);
		for (int i = 0; i < n; i++) {
			int32_t t = 1 + (int32_t)(i * 37 % (nv - 1));
			wall += prof_forward(be, md, st, &t, 1, 0, lg, "decode");
		}
		prof_print(be, "decode", n, wall);
		wall = 0;
		for (int r = 0; r < 5; r++) {
			for (int i = 0; i < 4; i++)
				ids[i] = 1 + (int32_t)((r * 11 + i * 5) % (nv - 1));
			wall += prof_forward(be, md, st, ids, 4, MODEL_LOGITS_ALL | MODEL_VERIFY, lg,
			    "verify");
			if (state_rollback(st, 1) != 0)
				die(1, "rollback failed");
		}
		prof_print(be, "verify-K3", 5, wall);
		for (int i = 0; i < ctx; i++)
			ids[i] = 1 + (int32_t)((i * 7919) % (nv - 1));
		if (state_reset(st) != 0)
			die(1, "prof prefill: state reset failed");
		prof_print(be, "prefill", 1, prof_forward(be, md, st, ids, ctx, MODEL_PREFILL, lg,
		    "prefill"));
	}
	model_host_free(md, lg), free(ids), free(dt);
	sample_free(smp), sample_free(sdec);
	state_free(st);
	model_close(md);
	if (backend_graph_note(be, gs, err, sizeof err) != NULL)
		warnmsg("cuda graph: %s", err);
	backend_close(be);
	return finish(0);
}
