/*
 * run-spec: speculative decoding with the model's MTP head (or an armed
 * DFlash / DFlash2 block drafter) against plain decoding, for a set of
 * draft depths K: speed, acceptance, and whether the output is the plain
 * decode's (greedy) or a seeded rerun's (sampled).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "genopt.h"
#include "json.h"
#include "learned.h"
#include "model.h"
#include "prompt.h"
#include "quant.h"
#include "ranks.h"
#include "sample.h"
#include "spec.h"
#include "state.h"
#include "util.h"

struct opts {
	struct genopt go;	/* what run-gen takes too */
	int	k_lo, k_hi;
	const char *draft;
	const char *dspark;	/* --dspark-spec, else MEMRA_DSPARK_SPEC: "1" arms */
	const char *dspark_draft;	/* --dspark-draft, else MEMRA_DSPARK_DRAFT */
	const char *dflash_prec;	/* --dflash-prec, else MEMRA_DFLASH_PREC */
};

struct run {		/* one prompt */
	int32_t	*ids;	/* [n] prompt */
	int	n;
	int	ignore_eos;	/* stop tokens do not end it */
	int32_t	*want;	/* [n_want] the oracle's tokens */
	int	n_want;
};

struct ctx {
	struct backend *be;
	struct model *m;
	struct prompt *pr;
	const struct opts *o;
	struct run *runs;
	int	n_runs, nv, n_stop;
	int	masked;		/* a masked draft head drafts: acceptance 0 is no failure */
	int	dflash;		/* a DFlash drafter drafts (random ones too): the same */
	const int32_t *stop;
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [--chat | --raw] [--jsonl] [-K K | -K LO-HI] [-n N] [--ignore-eos]\n"
	    "       [--temp T] [--seed S] [-t N] [--device cpu|cuda[:N]] [--kv-type f32|f16]\n"
	    "       [--pp-stages N [--pp-devices LIST] [--pp-splits LIST]]\n"
	    "       [--draft FILE] [--dspark-spec 0|1] [--dspark-draft DRAFTER] [--dflash-prec P]\n"
	    "       [-f FILE] model[+draft] [prompt]\n", prog);
	if (fp == stdout)
		fputs("  -K K, -K LO-HI       draft depths to try (1-8; a DFlash drafter's: block - 1)\n"
		    "  -n N                 new tokens per prompt (64)\n"
		    "  --ignore-eos         stop tokens do not end generation (N tokens)\n"
		    "  --temp T, --seed S   rejection sampling at temperature T (0: greedy)\n"
		    "  --chat, --raw        apply the chat template (default when there is one) or not\n"
		    "  --jsonl              prompts as JSON lines on stdin: {\"prompt\": \"text\"}\n"
		    "                       or {\"prompt\": [token ids]}\n"
		    "  -t N                 CPU threads (default: all cores)\n"
		    "  --device D           cpu, cuda or cuda:N (default: MEMRA_DEVICE, else cuda\n                       when a GPU is present, else cpu)\n"
		    "  --kv-type T          KV cache precision: f32 (default) or f16, llama.cpp's\n                       default cache (default: MEMRA_KV_TYPE, else f32)\n"
		    "  --pp-stages N        pipeline stages, a device each (default: MEMRA_PP_STAGES, 1)\n"
		    "  --pp-devices LIST    the stages' devices: 0,1 or cpu,cpu (MEMRA_PP_DEVICES)\n"
		    "  --pp-splits LIST     first layers of stages 1.. (default: by bytes; MEMRA_PP_SPLITS)\n"
		    "  --draft FILE         an external draft head, or a gemma4 trunk's assistant\n"
		    "                       (also model+FILE, MEMRA_MTP_DRAFT, MEMRA_DRAFT)\n"
		    "  --dspark-spec 0|1    1 arms the DFlash2 drafter, disabling MTP spec\n"
		    "                       (MEMRA_DSPARK_SPEC)\n"
		    "  --dspark-draft D     the DFlash / DFlash2 drafter: a directory, file or hf:\n"
		    "                       spec (MEMRA_DSPARK_DRAFT)\n"
		    "  --dflash-prec P      its weights at load: q4 (default), q8, bf16, f32, keep\n"
		    "                       (MEMRA_DFLASH_PREC)\n"
		    "  -f FILE              read the prompt from FILE ('-' is stdin)\n"
		    "  -h, --help           this text\n", fp);
	return status;
}

/* The index of the first stop token of t[0..n) for run r; n when none. */
static int
stop_at(const struct ctx *c, const struct run *r, const int32_t *t, int n)
{
	for (int i = 0; !r->ignore_eos && i < n; i++)
		for (int j = 0; j < c->n_stop; j++)
			if (t[i] == c->stop[j])
				return i;
	return n;
}

/* Plain decoding of run r (sampled with seq 0 when temp > 0); seconds after the prefill. */
static int
plain(struct ctx *c, struct run *r, double *secs, char *err)
{
	int n = r->n, ctx = n + c->o->go.n + 1, g = 0, rc = -1;
	struct state *st = model_state_new(c->m, ctx, 0, err);
	struct sampler *smp = sample_new(&c->o->go.sp, c->nv, err);
	float *lg = model_host_alloc(c->m, c->nv);
	int32_t *hist = malloc((size_t)(ctx + 1) * sizeof *hist), t;
	double t0;

	if (st == NULL || smp == NULL || lg == NULL || hist == NULL)
		goto out;
	memcpy(hist, r->ids, n * sizeof *hist);
	if (model_forward_next(c->m, st, r->ids, n, MODEL_PREFILL, smp, hist, n, 0, n, lg, &t) != 0)
		goto fail;
	for (t0 = util_now(); g < c->o->go.n;) {
		if (stop_at(c, r, &t, 1) == 0)
			break;
		hist[n + g++] = t;
		if (g < c->o->go.n && model_forward_next(c->m, st, &hist[n + g - 1], 1, 0, smp, hist,
		    n + g, 0, n + g, lg, &t) != 0)
			goto fail;
	}
	*secs = util_now() - t0;
	r->n_want = g;
	if ((r->want = malloc((g + 1) * sizeof *r->want)) != NULL)
		memcpy(r->want, hist + n, g * sizeof *r->want), rc = 0;
	goto out;
fail:
	util_err(err, "%s", model_errmsg(c->m));
out:
	state_free(st), sample_free(smp);
	model_host_free(c->m, lg), free(hist);
	return rc;
}

/*
 * Speculative decoding of run r with s into out [n + SPEC_KMAX + 1];
 * returns the tokens kept (up to a stop token), or -1.
 */
static int
speculate(struct ctx *c, struct spec *s, const struct run *r, int32_t *out, double *secs,
    char *err)
{
	int g = 1, k;
	double t0;

	if (spec_prefill(s, r->ids, r->n, &out[0]) != 0)
		return util_err(err, "%s", spec_errmsg(s));
	for (t0 = util_now(); g < c->o->go.n && stop_at(c, r, out, g) == g; g += k)
		if ((k = spec_round(s, out + g, c->o->go.n - g)) < 0)
			return util_err(err, "%s", spec_errmsg(s));
	*secs = util_now() - t0;
	g = stop_at(c, r, out, g);
	return g;
}

struct sweep {		/* one K over every run */
	struct spec_stats st;
	double	secs;
	long	tokens;
	int	fail_run, fail_at;	/* the first divergence; fail_run -1: none */
};

static void
add_stats(struct spec_stats *a, const struct spec_stats *b)
{
	a->rounds += b->rounds, a->drafted += b->drafted, a->accepted += b->accepted;
	for (int j = 0; j < SPEC_KMAX; j++)
		a->depth[j] += b->depth[j], a->tried[j] += b->tried[j];
}

static int
first_diff(const int32_t *a, int na, const int32_t *b, int nb)
{
	int i = 0;

	while (i < na && i < nb && a[i] == b[i])
		i++;
	return i == na && i == nb ? -1 : i;
}

/* Run K over every prompt; sampled runs are checked against a seeded rerun. */
static int
sweep_k(struct ctx *c, int K, struct sweep *w, char *err)
{
	int32_t *out = malloc((size_t)(c->o->go.n + SPEC_KMAX + 2) * sizeof *out);
	int32_t *again = malloc((size_t)(c->o->go.n + SPEC_KMAX + 2) * sizeof *again);
	int rc = -1;

	w->fail_run = -1;
	for (int i = 0; out != NULL && again != NULL && i < c->n_runs; i++) {
		struct run *r = &c->runs[i];
		struct spec *s = spec_new(c->m, K, r->n + c->o->go.n + K + 2, &c->o->go.sp, 0, err);
		double secs, rsecs;
		int g, d;

		if (s == NULL || (g = speculate(c, s, r, out, &secs, err)) < 0) {
			spec_free(s);
			goto out;
		}
		add_stats(&w->st, spec_stats(s));
		w->secs += secs, w->tokens += g;
		if (c->o->go.sp.temp == 0)
			d = first_diff(out, g, r->want, r->n_want);
		else {
			int g2 = speculate(c, s, r, again, &rsecs, err);

			if (g2 < 0) {
				spec_free(s);
				goto out;
			}
			d = first_diff(out, g, again, g2);
		}
		spec_free(s);
		if (d >= 0 && w->fail_run < 0)
			w->fail_run = i, w->fail_at = d;
	}
	rc = 0;
out:
	if (rc != 0 && err[0] == '\0')
		util_err(err, "out of memory");
	free(out), free(again);
	return rc;
}

static void
report(const struct ctx *c, int K, const struct sweep *w, double plain_tps)
{
	double tps = w->secs > 0 ? w->tokens / w->secs : 0;
	const struct spec_stats *s = &w->st;

	printf("K=%d %.1f tok/s %.2fx acceptance %ld/%ld = %.1f%% mean accepted length %.2f",
	    K, tps, plain_tps > 0 ? tps / plain_tps : 0.0, s->accepted, s->drafted,
	    s->drafted ? 100.0 * s->accepted / s->drafted : 0.0,
	    s->rounds ? (double)(s->accepted + s->rounds) / s->rounds : 0.0);
	printf(" by depth");
	for (int j = 0; j < K; j++)
		printf(" %.2f", s->tried[j] ? (double)s->depth[j] / s->tried[j] : 0.0);
	if (w->fail_run < 0)
		printf(c->o->go.sp.temp == 0 ? " PASS (identical to plain)\n" :
		    " PASS (identical to a seeded rerun)\n");
	else if (c->n_runs > 1)
		printf(" FAIL (prompt %d: first divergence at index %d)\n", w->fail_run, w->fail_at);
	else
		printf(" FAIL (first divergence at index %d)\n", w->fail_at);
	fflush(stdout);
}

/* A run of the prompt's n ids (c takes them), or -1 with err. */
static int
add_run(struct ctx *c, int32_t *ids, size_t n, int ignore_eos, char *err)
{
	struct run *r;

	if ((r = realloc(c->runs, (c->n_runs + 1) * sizeof *r)) == NULL) {
		free(ids);
		return util_err(err, "out of memory");
	}
	c->runs = r;
	r += c->n_runs++;
	memset(r, 0, sizeof *r);
	r->ids = ids;
	r->n = n;
	r->ignore_eos = ignore_eos;
	if (n == 0)
		return util_err(err, "prompt %d has no tokens", c->n_runs - 1);
	return 0;
}

/* The run of one request line: its "prompt" (text or token ids) and "ignore_eos". */
static int
add_request(struct ctx *c, const char *line, size_t len, char *err)
{
	struct json *q = json_parse(line, len, err);
	const struct json *p = json_get(q, "prompt");
	int ignore_eos = c->o->go.ignore_eos;
	int32_t *ids = NULL;
	size_t n = 0;

	if (q == NULL)
		return -1;
	if (json_get(q, "ignore_eos") != NULL && json_get_bool(q, "ignore_eos", &ignore_eos) != 0)
		util_err(err, "\"ignore_eos\": not true or false");
	else if (p != NULL && p->type == JSON_ARRAY)
		ids = prompt_ids_json(p, c->nv, &n, err);
	else if (p == NULL || p->type != JSON_STRING)
		util_err(err, "request has no \"prompt\" string or array of token ids");
	else
		ids = prompt_encode(c->pr, p->str, p->n, &n, err);
	json_free(q);
	return ids != NULL ? add_run(c, ids, n, ignore_eos, err) : -1;
}

static int
read_jsonl(struct ctx *c, char *err)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, rc = 0;

	while (rc == 0 && (len = getline(&line, &cap, stdin)) > 0) {
		lineno++;
		if (strspn(line, " \t\r\n") == (size_t)len)
			continue;
		if ((rc = add_request(c, line, len, err)) != 0) {
			char why[UTIL_ERRLEN];

			snprintf(why, sizeof why, "%s", err);
			util_err(err, "stdin: line %d: %s", lineno, why);
		}
	}
	free(line);
	if (rc == 0 && c->n_runs == 0)
		return util_err(err, "stdin: no requests");
	return rc;
}

/* "K" or "LO-HI" within 1..8 */
static int
parse_k(const char *s, struct opts *o)
{
	const char *dash = strchr(s, '-');
	char lo[16];
	int64_t a, b;

	if (dash == NULL) {
		if (util_parse_i64(s, 1, SPEC_KMAX, &a) != 0)
			return -1;
		o->k_lo = o->k_hi = a;
		return 0;
	}
	if (dash - s >= (int)sizeof lo)
		return -1;
	snprintf(lo, sizeof lo, "%.*s", (int)(dash - s), s);
	if (util_parse_i64(lo, 1, SPEC_KMAX, &a) != 0 || util_parse_i64(dash + 1, a, SPEC_KMAX, &b) != 0)
		return -1;
	o->k_lo = a, o->k_hi = b;
	return 0;
}

static int
parse(int argc, char *argv[], struct opts *o)
{
	static const struct option own[] = {
		{ "draft", required_argument, NULL, 'D' }, { "help", no_argument, NULL, 'h' },
		{ "dspark-spec", required_argument, NULL, 1001 },
		{ "dspark-draft", required_argument, NULL, 1002 },
		{ "dflash-prec", required_argument, NULL, 1003 },
		{ NULL, 0, NULL, 0 },
	};
	struct option lopts[GENOPT_MAXOPTS];
	char err[UTIL_ERRLEN];
	int ch, r;

	if (genopt_longopts(0, own, lopts) != 0)
		return -1;
	while ((ch = getopt_long(argc, argv, "K:" GENOPT_SHORT "h", lopts, NULL)) != -1) {
		switch (ch) {
		case 'D': o->draft = optarg; break;
		case 1001: o->dspark = optarg; break;
		case 1002: o->dspark_draft = optarg; break;
		case 1003: o->dflash_prec = optarg; break;
		case 'K':
			if (parse_k(optarg, o) != 0) {
				warnmsg("%s: '%s': out of range or not a number", argv[optind - 1], optarg);
				return -1;
			}
			break;
		case 'h': exit(usage(stdout, 0));
		default:
			if ((r = genopt_set(&o->go, ch, optarg, err)) < 0)
				warnmsg("%s: %s", argv[optind - 1], err);
			if (r <= 0)
				return -1;
		}
	}
	return 0;
}

static int
run_all(struct ctx *c)
{
	char err[UTIL_ERRLEN] = "";
	double secs = 0, s, tps;
	long tokens = 0;
	int fail = 0;

	for (int i = 0; i < c->n_runs; i++) {
		if (plain(c, &c->runs[i], &s, err) != 0)
			die(1, "plain decode: %s", err);
		secs += s, tokens += c->runs[i].n_want;
	}
	tps = secs > 0 ? tokens / secs : 0;
	printf("plain %.1f tok/s (%ld tokens, %d prompt%s)\n", tps, tokens, c->n_runs,
	    c->n_runs == 1 ? "" : "s");
	for (int K = c->o->k_lo; K <= c->o->k_hi; K++) {
		struct sweep w = { 0 };

		if (sweep_k(c, K, &w, err) != 0)
			die(1, "K=%d: %s", K, err);
		report(c, K, &w, tps);
		if (w.fail_run >= 0)
			fail = 1;
		if (w.st.drafted > 0 && w.st.accepted == 0 && c->masked) {
			warnmsg("K=%d: acceptance 0 with a masked draft head (its ranks miss "
			    "the target's tokens)", K);
		} else if (w.st.drafted > 0 && w.st.accepted == 0 && c->dflash) {
			warnmsg("K=%d: acceptance 0 with the DFlash drafter (an untrained or "
			    "mismatched drafter?)", K);
		} else if (w.st.drafted > 0 && w.st.accepted == 0) {
			warnmsg("K=%d: acceptance 0 with a trained head", K);
			fail = 1;
		}
	}
	printf("SELF-CONSISTENCY %s\n", fail ? "FAIL" : "PASS");
	return fail;
}

/*
 * The DFlash drafter's settings, each flag over its variable: armed by
 * "1" (MEMRA_DSPARK_SPEC), the drafter (MEMRA_DSPARK_DRAFT) and its
 * precision (MEMRA_DFLASH_PREC) into mo.  A drafter that is not armed is
 * said and left; -1 (a usage error, said) for a bad value.
 */
static int
dspark_options(struct opts *o, struct model_options *mo)
{
	const char *arm = o->dspark ? o->dspark : getenv("MEMRA_DSPARK_SPEC");
	const char *d = o->dspark_draft ? o->dspark_draft : getenv("MEMRA_DSPARK_DRAFT");
	const char *p = o->dflash_prec ? o->dflash_prec : getenv("MEMRA_DFLASH_PREC");

	if (arm != NULL && arm[0] && strcmp(arm, "0") != 0 && strcmp(arm, "1") != 0) {
		warnmsg("MEMRA_DSPARK_SPEC (--dspark-spec) '%s': not 0 or 1", arm);
		return -1;
	}
	if (p != NULL && p[0] && model_dflash_prec(p) < -1) {
		warnmsg("MEMRA_DFLASH_PREC (--dflash-prec) '%s': not q4, q8, bf16, f32 or keep", p);
		return -1;
	}
	if (arm == NULL || strcmp(arm, "1") != 0) {
		if (d != NULL && d[0])
			fprintf(stderr, "[dspark] drafter %s not armed (MEMRA_DSPARK_SPEC is not 1): "
			    "MTP spec as before\n", d);
		return 0;
	}
	if (d == NULL || !d[0]) {
		warnmsg("MEMRA_DSPARK_SPEC=1: no drafter (MEMRA_DSPARK_DRAFT, --dspark-draft)");
		return -1;
	}
	mo->dflash = d;
	mo->dflash_prec = p != NULL && p[0] ? p : NULL;
	o->dflash_prec = p != NULL && p[0] ? p : "q4";
	return 0;
}

/*
 * MEMRA_GEMMA_TRIM_ADAPT into mo: learned slots in the assistant's head
 * that MEMRA_GEMMA_DRAFT_RANKS trims (unset, empty or 0: none).  A bad
 * value, or slots without the trim, is a usage error.
 */
static void
adapt_option(struct model_options *mo)
{
	const char *v = getenv("MEMRA_GEMMA_TRIM_ADAPT");
	int64_t n;

	if (v == NULL || !v[0])
		return;
	if (util_parse_i64(v, 0, LEARNED_MAX, &n) != 0)
		die(2, "MEMRA_GEMMA_TRIM_ADAPT: '%s': out of range 0..%d or not a number", v,
		    LEARNED_MAX);
	if (n > 0 && (mo->asst_ranks == NULL || !mo->asst_ranks[0]))
		die(2, "MEMRA_GEMMA_TRIM_ADAPT: learned slots extend a trimmed head: set "
		    "MEMRA_GEMMA_DRAFT_RANKS too");
	mo->asst_adapt = (int)n;
}

/* The learned slots at the end, written when they changed (a failure is said;
 * the status stays: they move speed only). */
static void
save_learned(struct model *m)
{
	char err[UTIL_ERRLEN];
	int n, rc = model_assist_save(m, 1, &n, err);

	if (rc < 0)
		warnmsg("MEMRA_GEMMA_TRIM_ADAPT: learned slots not saved: %s", err);
	else if (rc > 0)
		fprintf(stderr, "[gemma-draft] trim adapt: %d learned slots written to %s\n", n,
		    model_assist_learned_path(m));
}

/* The drafter's boot proof on stderr; its block sets the default K. */
static void
dspark_lines(struct model *m, const char *spec, struct opts *o)
{
	const struct model_hparams *dh = model_dflash(m);
	const char *name = strrchr(spec, '/') != NULL && strrchr(spec, '/')[1] ? strrchr(spec, '/') + 1 :
	    spec;
	char line[512];

	fprintf(stderr, "[dspark] arming DFlash2 disables MTP spec%s\n", model_hparams(m)->n_mtp >
	    0 ? " (the trunk's MTP head stays unused)" : "");
	for (int i = 0; model_dflash_line(m, name, i, line, sizeof line) == 0; i++)
		fprintf(stderr, "%s\n", line);
	fprintf(stderr, "[dspark] %s: precision %s (MEMRA_DFLASH_PREC)\n", name, o->dflash_prec);
	if (o->k_lo == 0)
		o->k_lo = o->k_hi = dh->block - 1;
	if (o->k_hi > dh->block - 1)
		die(2, "-K %d: the DFlash drafter drafts at most %d tokens a round (its block of %d)",
		    o->k_hi, dh->block - 1, dh->block);
}

/* The split's boot proof lines on stderr (none for a whole model). */
static void
pp_lines(const struct model *m)
{
	char line[512];

	for (int i = 0; model_pp_line(m, i, line, sizeof line) == 0; i++)
		fprintf(stderr, "%s\n", line);
}

int
main(int argc, char *argv[])
{
	struct opts o = { 0 };
	struct ctx c = { .o = &o };
	char err[UTIL_ERRLEN], line[4352], *text = NULL;
	struct model_options mo = { 0 };
	struct backend *be[PIPELINE_MAX_STAGES];
	struct model_split sp;
	size_t len = 0, n = 0;
	int32_t *ids;
	int status, graph_stats = 0, rc;

	prog = base_name(argv[0]);
	genopt_init(&o.go, 64);
	if (parse(argc, argv, &o) != 0)
		return usage(stderr, 2);
	argc -= optind;
	argv += optind;
	if (!genopt_operands(&o.go, argc))
		return usage(stderr, 2);
	if (genopt_check(&o.go, &mo.kv_f16, err) != 0)
		die(2, "%s", err);
	if (genopt_text(&o.go, argc == 2 ? argv[1] : NULL, &text, &len, err) != 0)
		die(1, "%s", err);
	if ((rc = genopt_open(&o.go, be, &graph_stats, err)) != 0)
		die(rc == -2 ? 2 : 1, "%s", err);
	c.be = be[0];
	genopt_split(&o.go, be, &sp);
	mo.split = o.go.n_stage > 1 ? &sp : NULL;
	model_options_set(&mo, argv[0], o.draft, getenv("MEMRA_MTP_DRAFT") != NULL ?
	    getenv("MEMRA_MTP_DRAFT") : getenv("MEMRA_DRAFT"),
	    getenv("MEMRA_FRSPEC_TRIM"), getenv("MEMRA_FULL_PREC"));
	mo.asst_ranks = getenv("MEMRA_GEMMA_DRAFT_RANKS");
	adapt_option(&mo);
	if (dspark_options(&o, &mo) != 0)
		return usage(stderr, 2);
	if (mo.draft != NULL)
		fprintf(stderr, "[mtp-draft] loading external MTP draft: %s\n", mo.draft);
	if ((c.m = model_open_opts(argv[0], c.be, &mo, err)) == NULL)
		die(1, "%s", err);
	pp_lines(c.m);
	if ((c.dflash = model_dflash(c.m) != NULL))
		dspark_lines(c.m, argv[0], &o);
	else if (model_attach_line(c.m, line, sizeof line) == 0)
		fprintf(stderr, "%s\n", line);
	if (model_assist_adapt_line(c.m, line, sizeof line) == 0)
		fprintf(stderr, "%s\n", line);
	c.masked = model_draft_ranks(c.m, NULL, NULL) != NULL;
	if (model_hparams(c.m)->n_mtp < 1 && !model_has_assist(c.m))
		die(1, "%s: model has no MTP head or assistant drafter to draft with", argv[0]);
	if ((c.pr = prompt_new(c.m, o.go.mode, err)) == NULL)
		die(1, "%s: %s", argv[0], err);
	if (prompt_tokenizer(c.pr) == NULL && !o.go.jsonl)
		die(1, "%s: no tokenizer: give prompts as token ids (--jsonl {\"prompt\": [ids]})",
		    argv[0]);
	c.nv = model_hparams(c.m)->n_vocab;
	c.stop = prompt_stop_ids(c.pr, &c.n_stop);
	if (o.go.jsonl)
		status = read_jsonl(&c, err);
	else if ((ids = prompt_encode(c.pr, text, len, &n, err)) != NULL)
		status = add_run(&c, ids, n, o.go.ignore_eos, err);
	else
		status = -1;
	if (status != 0)
		die(1, "%s", err);
	if (o.k_lo == 0)	/* no -K: 1-8 for an MTP head */
		o.k_lo = 1, o.k_hi = 8;
	status = run_all(&c);
	save_learned(c.m);
	for (int i = 0; i < c.n_runs; i++)
		free(c.runs[i].ids), free(c.runs[i].want);
	free(c.runs), free(text);
	prompt_free(c.pr);
	model_close(c.m);
	if (backend_graph_note(c.be, graph_stats, err, sizeof err) != NULL)
		warnmsg("cuda graph: %s", err);
	for (int s = 0; s < o.go.n_stage; s++)
		backend_close(be[s]);
	return finish(status);
}
