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
#include "spectrace.h"
#include "state.h"
#include "util.h"

struct opts {
	struct genopt go;	/* what run-gen takes too */
	int	k_lo, k_hi;
	const char *draft;
	const char *dspark;	/* --dspark-spec, else MEMRA_DSPARK_SPEC: "1" arms */
	const char *dspark_draft;	/* --dspark-draft, else MEMRA_DSPARK_DRAFT */
	const char *dflash_prec;	/* --dflash-prec, else MEMRA_DFLASH_PREC */
	const char *trace_out;	/* --trace-out: the acceptance trace written */
	const char *trace_in;	/* --trace-in: the acceptance trace replayed */
	int	arm;		/* --trace-arm: ARM_BOTH, ARM_PLAIN or ARM_REPLAY */
	int	k_given;	/* -K was given */
	int	arm_given;	/* --trace-arm was given */
};

enum { ARM_BOTH, ARM_PLAIN, ARM_REPLAY };

struct run {		/* one prompt */
	int32_t	*ids;	/* [n] prompt */
	int	n;
	int	ignore_eos;	/* stop tokens do not end it */
	int	n_gen;		/* new tokens at most */
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
	const char *name;	/* the model as the operand names it */
	struct spectrace *rec;	/* --trace-out: the rounds recorded, or NULL */
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [--chat | --raw] [--jsonl] [-K K | -K LO-HI] [-n N] [--ignore-eos]\n"
	    "       [--temp T] [--seed S] [-t N] [--device cpu|cuda[:N]] [--kv-type f32|f16]\n"
	    "       [--pp-stages N [--pp-devices LIST] [--pp-splits LIST]]\n"
	    "       [--draft FILE] [--dspark-spec 0|1] [--dspark-draft DRAFTER] [--dflash-prec PREC]\n"
	    "       [--trace-out FILE] [-f FILE] model[+draft] [prompt]\n"
	    "       %s --trace-in FILE [--trace-arm both|plain|replay] [--trace-out FILE]\n"
	    "       [-K K | -K LO-HI] [-t N] [--device cpu|cuda[:N]] [--kv-type f32|f16]\n"
	    "       [--pp-stages N [--pp-devices LIST] [--pp-splits LIST]]\n"
	    "       [--draft FILE] [--dspark-spec 0|1] [--dspark-draft DRAFTER] [--dflash-prec PREC]\n"
	    "       model[+draft]\n", prog, prog);
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
		    "  --draft FILE         an external draft head, a step35 model's NextN blocks,\n"
		    "                       or a gemma4 trunk's assistant (also model+FILE,\n"
		    "                       MEMRA_MTP_DRAFT, MEMRA_DRAFT)\n"
		    "  --dspark-spec 0|1    1 arms the DFlash2 drafter, disabling MTP spec\n"
		    "                       (MEMRA_DSPARK_SPEC)\n"
		    "  --dspark-draft D     the DFlash / DFlash2 drafter: a directory, file or hf:\n"
		    "                       spec (MEMRA_DSPARK_DRAFT)\n"
		    "  --dflash-prec P      its weights at load: q4 (default), q8, bf16, f32, keep\n"
		    "                       (MEMRA_DFLASH_PREC)\n"
		    "  --trace-out FILE     write each K's rounds and acceptance (an acceptance trace)\n"
		    "  --trace-in FILE      replay a trace: the real drafts and verifies, each round\n"
		    "                       keeping the drafts the trace accepted; one TSV row an arm\n"
		    "  --trace-arm ARM      with --trace-in: plain decode, the replay, or both (default)\n"
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
	int n = r->n, ctx = n + r->n_gen + 1, g = 0, rc = -1;
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
	for (t0 = util_now(); g < r->n_gen;) {
		if (stop_at(c, r, &t, 1) == 0)
			break;
		hist[n + g++] = t;
		if (g < r->n_gen && model_forward_next(c->m, st, &hist[n + g - 1], 1, 0, smp, hist,
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

/* Round i's drafts and acceptance into rec (NULL: none), from s's stats
 * before it (b) and after. */
static int
record_round(struct spectrace *rec, const struct spec *s, const struct spec_stats *b,
    char *err)
{
	const struct spec_stats *a = spec_stats(s);

	return rec == NULL ? 0 : spectrace_round(rec, (int)(a->drafted - b->drafted),
	    (int)(a->accepted - b->accepted), err);
}

/*
 * Speculative decoding of run r with s into out [n + SPEC_KMAX + 1];
 * returns the tokens kept (up to a stop token), or -1.  rec (not NULL)
 * gets the prompt, its rounds and the tokens kept.
 */
static int
speculate(struct ctx *c, struct spec *s, const struct run *r, int32_t *out, double *secs,
    struct spectrace *rec, char *err)
{
	struct spec_stats b;
	int g = 1, k;
	double t0;

	if (spec_prefill(s, r->ids, r->n, &out[0]) != 0)
		return util_err(err, "%s", spec_errmsg(s));
	if (rec != NULL && spectrace_prompt(rec, r->ids, r->n, err) != 0)
		return -1;
	for (t0 = util_now(); g < c->o->go.n && stop_at(c, r, out, g) == g; g += k) {
		b = *spec_stats(s);
		if ((k = spec_round(s, out + g, c->o->go.n - g)) < 0)
			return util_err(err, "%s", spec_errmsg(s));
		if (record_round(rec, s, &b, err) != 0)
			return -1;
	}
	*secs = util_now() - t0;
	g = stop_at(c, r, out, g);
	if (rec != NULL && spectrace_end(rec, out, g, err) != 0)
		return -1;
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

		if (s == NULL || (g = speculate(c, s, r, out, &secs, c->rec, err)) < 0) {
			spec_free(s);
			goto out;
		}
		add_stats(&w->st, spec_stats(s));
		w->secs += secs, w->tokens += g;
		if (c->o->go.sp.temp == 0)
			d = first_diff(out, g, r->want, r->n_want);
		else {
			int g2 = speculate(c, s, r, again, &rsecs, NULL, err);

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
	r->n_gen = c->o->go.n;
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
		{ "trace-out", required_argument, NULL, 1004 },
		{ "trace-in", required_argument, NULL, 1005 },
		{ "trace-arm", required_argument, NULL, 1006 },
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
		case 1004: o->trace_out = optarg; break;
		case 1005: o->trace_in = optarg; break;
		case 1006:
			if ((o->arm = strcmp(optarg, "both") == 0 ? ARM_BOTH : strcmp(optarg, "plain") ==
			    0 ? ARM_PLAIN : strcmp(optarg, "replay") == 0 ? ARM_REPLAY : -1) < 0) {
				warnmsg("--trace-arm: '%s': not both, plain or replay", optarg);
				return -1;
			}
			o->arm_given = 1;
			break;
		case 'K':
			if (parse_k(optarg, o) != 0) {
				warnmsg("%s: '%s': out of range or not a number", argv[optind - 1], optarg);
				return -1;
			}
			o->k_given = 1;
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

/* 1 when the model has a drafter: an MTP head, an assistant or a DFlash drafter. */
static int
has_drafter(const struct ctx *c)
{
	return c->dflash || model_has_assist(c->m) || model_hparams(c->m)->n_mtp > 0;
}

/* The drafter that drafts, as a trace names it. */
static const char *
drafter_kind(const struct ctx *c)
{
	if (c->dflash)
		return model_dflash(c->m)->sel_topk > 0 ? "dflash2" : "dflash";
	if (model_has_assist(c->m))
		return "assistant";
	if (model_hparams(c->m)->n_mtp > 1)
		return "nextn";
	return c->masked ? "mtp-masked" : "mtp";
}

/* A section of K in c->rec: this model, n new tokens at temperature temp. */
static int
begin_section(struct ctx *c, int K, int n, double temp, char *err)
{
	struct spectrace_section h = { .K = K, .n_vocab = c->nv, .n = n, .temp = temp };

	snprintf(h.drafter, sizeof h.drafter, "%s", drafter_kind(c));
	h.model = (char *)c->name;
	return spectrace_section(c->rec, &h, err);
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

		if (c->rec != NULL && begin_section(c, K, c->o->go.n, c->o->go.sp.temp, err) != 0)
			die(1, "--trace-out: %s", err);
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

/* --- an acceptance trace replayed (--trace-in) --- */

struct tally {		/* an arm over a section's prompts */
	long	tokens, rounds, drafted, accepted;	/* rounds: verifies with drafts */
	long	steps, agree;	/* the trace's rounds, those the judge would have kept alike */
	int	same;		/* prompts whose tokens are the trace's; -1: another vocabulary,
				 * or a trace without its tokens */
	double	secs;
};

/*
 * The ids prompt i of section t replays with: the trace's when the
 * model's vocabulary has the trace's size, else ids spread over the
 * model's vocabulary by a fixed function of i and the position
 * (splitmix64).  malloc'd, or NULL.
 */
static int32_t *
replay_ids(const struct ctx *c, const struct spectrace_section *t, int i)
{
	const struct spectrace_prompt *p = &t->p[i];
	int32_t *ids = malloc(p->n_ids * sizeof *ids);

	for (int j = 0; ids != NULL && j < p->n_ids; j++) {
		uint64_t z = ((uint64_t)i << 32 | (uint32_t)j) + 0x9E3779B97F4A7C15ULL;

		z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9ULL;
		z = (z ^ z >> 27) * 0x94D049BB133111EBULL;
		ids[j] = c->nv == t->n_vocab ? p->ids[j] : (int32_t)((z ^ z >> 31) % (uint64_t)c->nv);
	}
	return ids;
}

/* Plain decoding of prompt i of t from ids: the tokens the trace kept, stop tokens or not. */
static int
replay_plain(struct ctx *c, const struct spectrace_section *t, int i, int32_t *ids,
    struct tally *y, char *err)
{
	struct run r = { .ids = ids, .n = t->p[i].n_ids, .ignore_eos = 1, .n_gen = t->p[i].tokens };
	double secs;

	if (r.n_gen < 1)
		return 0;
	if (plain(c, &r, &secs, err) != 0)
		return -1;
	y->secs += secs, y->tokens += r.n_want;
	free(r.want);
	return 0;
}

/* The rounds of prompt p on s (prefilled), each keeping the drafts the trace did; timed. */
static int
replay_rounds(struct ctx *c, struct spec *s, const struct spectrace_prompt *p, int32_t *out,
    struct tally *y, char *err)
{
	struct spec_stats b;
	double t0 = util_now();
	int g = 1, got, nat;

	for (int r = 0; r < p->n_rounds; r++, g += got) {
		b = *spec_stats(s);
		if ((got = spec_round_forced(s, out + g, p->rounds[r].k + 1, p->rounds[r].accepted,
		    &nat)) < 0)
			return util_err(err, "round %d: %s", r, spec_errmsg(s));
		if (spec_stats(s)->drafted - b.drafted != p->rounds[r].k)
			return util_err(err, "round %d: %ld drafts where the trace has %d", r,
			    spec_stats(s)->drafted - b.drafted, p->rounds[r].k);
		y->agree += nat == p->rounds[r].accepted;
		if (record_round(c->rec, s, &b, err) != 0)
			return -1;
	}
	y->secs += util_now() - t0;
	return 0;
}

/*
 * Prompt i of t replayed from ids: prefilled, then each recorded round's
 * drafts and verify run for real, keeping the drafts the trace accepted
 * (spec_round_forced); the rounds timed into y (and recorded in c->rec).
 */
static int
replay_prompt(struct ctx *c, const struct spectrace_section *t, int i, const int32_t *ids,
    struct tally *y, char *err)
{
	const struct spectrace_prompt *p = &t->p[i];
	struct spec *s = spec_new(c->m, t->K, p->n_ids + t->n + t->K + 2, NULL, 0, err);
	int32_t *out = malloc((size_t)(t->n + SPEC_KMAX + 2) * sizeof *out);
	int rc = -1;

	if (s == NULL || out == NULL)
		goto out;
	if (spec_prefill(s, ids, p->n_ids, &out[0]) != 0) {
		util_err(err, "%s", spec_errmsg(s));
		goto out;
	}
	if ((c->rec != NULL && spectrace_prompt(c->rec, ids, p->n_ids, err) != 0) ||
	    replay_rounds(c, s, p, out, y, err) != 0 ||
	    (c->rec != NULL && spectrace_end(c->rec, out, p->tokens, err) != 0))
		goto out;
	y->steps += p->n_rounds;
	y->tokens += p->tokens;
	y->rounds += spec_stats(s)->rounds;
	y->drafted += spec_stats(s)->drafted;
	y->accepted += spec_stats(s)->accepted;
	if (p->out == NULL)	/* a synthetic trace's: no tokens to compare */
		y->same = -1;
	else if (y->same >= 0 && memcmp(out, p->out, p->tokens * sizeof *out) == 0)
		y->same++;
	rc = 0;
out:
	if (rc != 0 && err[0] == '\0')
		util_err(err, "out of memory");
	spec_free(s), free(out);
	return rc;
}

/* One arm (ARM_PLAIN or ARM_REPLAY) over the prompts of t into y. */
static int
replay_arm(struct ctx *c, const struct spectrace_section *t, int arm, struct tally *y, char *err)
{
	y->same = c->nv == t->n_vocab ? 0 : -1;
	for (int i = 0; i < t->n_prompts; i++) {
		int32_t *ids = replay_ids(c, t, i);
		char why[UTIL_ERRLEN] = "";
		int rc = ids == NULL ? util_err(why, "out of memory") : arm == ARM_PLAIN ?
		    replay_plain(c, t, i, ids, y, why) : replay_prompt(c, t, i, ids, y, why);

		free(ids);
		if (rc != 0)
			return util_err(err, "prompt %d: %s", i, why);
	}
	return 0;
}

#define ROW_HEAD "arm\tK\ttok_s\ttokens\tsecs\tprompts\trounds\tdrafted\taccepted\tmean_len" \
	"\tagree\tsame\tspeedup\n"

/* An arm's TSV row (ROW_HEAD's columns; plain_tps 0: no plain arm ran). */
static void
replay_row(int arm, int K, int prompts, const struct tally *y, double plain_tps)
{
	double tps = y->secs > 0 ? y->tokens / y->secs : 0;

	printf("%s\t%d\t%.2f\t%ld\t%.4f\t%d", arm == ARM_PLAIN ? "plain" : "replay", K, tps,
	    y->tokens, y->secs, prompts);
	if (arm == ARM_PLAIN) {
		printf("\t-\t-\t-\t-\t-\t-\t-\n");
		return;
	}
	printf("\t%ld\t%ld\t%ld\t%.3f\t%ld/%ld", y->rounds, y->drafted, y->accepted,
	    y->rounds ? (double)(y->accepted + y->rounds) / y->rounds : 0.0, y->agree, y->steps);
	if (y->same < 0)
		printf("\t-");
	else
		printf("\t%d/%d", y->same, prompts);
	if (plain_tps > 0)
		printf("\t%.3f\n", tps / plain_tps);
	else
		printf("\t-\n");
}

/* Each section of K in -K's range (default: all of them), plain then replayed. */
static int
run_replay(struct ctx *c, const struct spectrace *tr)
{
	char err[UTIL_ERRLEN] = "";

	printf(ROW_HEAD);
	for (int K = c->o->k_lo; K <= c->o->k_hi; K++) {
		const struct spectrace_section *t = spectrace_find(tr, K);
		struct tally pl = { 0 }, rp = { 0 };
		double ptps = 0;

		if (t == NULL)
			continue;
		fprintf(stderr, "[trace] K=%d: %d prompt%s recorded with the %s drafter on %s, "
		    "replayed %s%s%s on ", K, t->n_prompts, t->n_prompts == 1 ? "" : "s",
		    t->drafter, t->model, has_drafter(c) ? "with the " : "without a drafter (plain "
		    "decoding alone)", has_drafter(c) ? drafter_kind(c) : "", has_drafter(c) ?
		    " drafter" : "");
		if (c->nv == t->n_vocab)
			fprintf(stderr, "their own ids\n");
		else
			fprintf(stderr, "fixed ids (the model's vocabulary of %d tokens is not the "
			    "trace's %d)\n", c->nv, t->n_vocab);
		if (c->o->arm != ARM_REPLAY) {
			if (replay_arm(c, t, ARM_PLAIN, &pl, err) != 0)
				die(1, "K=%d: plain decode: %s", K, err);
			replay_row(ARM_PLAIN, K, t->n_prompts, &pl, 0);
			ptps = pl.secs > 0 ? pl.tokens / pl.secs : 0;
		}
		if (c->o->arm != ARM_PLAIN) {
			if (c->rec != NULL && begin_section(c, K, t->n, 0, err) != 0)
				die(1, "--trace-out: %s", err);
			if (replay_arm(c, t, ARM_REPLAY, &rp, err) != 0)
				die(1, "K=%d: replay: %s", K, err);
			replay_row(ARM_REPLAY, K, t->n_prompts, &rp, ptps);
		}
		fflush(stdout);
	}
	return 0;
}

/*
 * The trace --trace-in names, read and checked (1 for a bad file), and
 * -K's depths in it (2 for one it lacks); without -K, all of its.
 */
static struct spectrace *
load_trace(struct opts *o)
{
	char err[UTIL_ERRLEN], has[128] = "";
	size_t len, n = 0;
	char *buf = util_read_file(o->trace_in, &len, err);
	struct spectrace *t;

	if (buf == NULL)
		die(1, "%s", err);
	if ((t = spectrace_parse(buf, len, err)) == NULL)
		die(1, "%s: %s", o->trace_in, err);
	free(buf);
	for (int K = 1; K <= SPEC_KMAX; K++)
		if (spectrace_find(t, K) != NULL && n < sizeof has)
			n += snprintf(has + n, sizeof has - n, "%s%d", n ? ", " : "", K);
	if (!o->k_given)
		o->k_lo = SPEC_KMAX, o->k_hi = 1;
	for (int i = 0; !o->k_given && i < t->n_sec; i++) {
		o->k_lo = t->sec[i].K < o->k_lo ? t->sec[i].K : o->k_lo;
		o->k_hi = t->sec[i].K > o->k_hi ? t->sec[i].K : o->k_hi;
	}
	for (int K = o->k_lo; o->k_given && K <= o->k_hi; K++)
		if (spectrace_find(t, K) == NULL)
			die(2, "-K %d: %s has no section of K=%d (its K: %s)", K, o->trace_in, K, has);
	return t;
}

/* A DFlash drafter drafts block - 1 tokens at most: a deeper section is refused (2). */
static void
trace_fits(const struct ctx *c, const struct spectrace *tr)
{
	const struct model_hparams *dh = model_dflash(c->m);

	for (int K = c->o->k_lo; dh != NULL && K <= c->o->k_hi; K++)
		if (spectrace_find(tr, K) != NULL && K > dh->block - 1)
			die(2, "%s: K=%d: the DFlash drafter drafts at most %d tokens a round (its "
			    "block of %d)", c->o->trace_in, K, dh->block - 1, dh->block);
}

/* c->rec into path, unless the run failed (status 1: said, nothing written). */
static int
write_trace(const struct ctx *c, const char *path, int status)
{
	char err[UTIL_ERRLEN];
	struct util_ofile *f;

	if (status != 0) {
		warnmsg("--trace-out %s: not written (a K failed)", path);
		return status;
	}
	if ((f = util_ofile_open(path, err)) == NULL)
		die(1, "%s", err);
	spectrace_write(c->rec, f->fp);
	if (ferror(f->fp)) {
		util_ofile_abort(f);
		die(1, "%s: write error", path);
	}
	if (util_ofile_commit(f, err) != 0)
		die(1, "%s", err);
	return 0;
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

/* The trace options that do not hold together with the rest: said, exit 2. */
static void
trace_misuse(const struct opts *o, int nargs)
{
	if (o->trace_out != NULL && strcmp(o->trace_out, "-") == 0)
		die(2, "--trace-out: '-': the report is standard output: name a file");
	if (o->trace_in == NULL) {
		if (o->arm_given)
			die(2, "--trace-arm: only with --trace-in");
		return;
	}
	if (nargs != 1 || o->go.jsonl || o->go.file != NULL)
		die(2, "--trace-in: the trace's prompts are replayed: no prompt, -f or --jsonl");
	if (o->go.sp.temp != 0)
		die(2, "--trace-in: the replay verifies greedily: no --temp");
	if (o->trace_out != NULL && o->arm == ARM_PLAIN)
		die(2, "--trace-out: --trace-arm plain replays no rounds to record");
}

/* The prompts into c: --jsonl's requests, or the text. */
static void
read_prompts(struct ctx *c, const char *text, size_t len)
{
	char err[UTIL_ERRLEN];
	int32_t *ids;
	size_t n = 0;
	int status;

	if (prompt_tokenizer(c->pr) == NULL && !c->o->go.jsonl)
		die(1, "%s: no tokenizer: give prompts as token ids (--jsonl {\"prompt\": [ids]})",
		    c->name);
	if (c->o->go.jsonl)
		status = read_jsonl(c, err);
	else if ((ids = prompt_encode(c->pr, text, len, &n, err)) != NULL)
		status = add_run(c, ids, n, c->o->go.ignore_eos, err);
	else
		status = -1;
	if (status != 0)
		die(1, "%s", err);
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
	struct spectrace *tr = NULL;
	size_t len = 0;
	int status, graph_stats = 0, rc;

	prog = base_name(argv[0]);
	genopt_init(&o.go, 64);
	if (parse(argc, argv, &o) != 0)
		return usage(stderr, 2);
	argc -= optind;
	argv += optind;
	if (!genopt_operands(&o.go, argc))
		return usage(stderr, 2);
	trace_misuse(&o, argc);
	if (genopt_check(&o.go, &mo.kv_f16, err) != 0)
		die(2, "%s", err);
	if (o.trace_in != NULL)
		tr = load_trace(&o);
	else if (genopt_text(&o.go, argc == 2 ? argv[1] : NULL, &text, &len, err) != 0)
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
	c.name = argv[0];
	if (tr != NULL)
		trace_fits(&c, tr);
	if ((c.dflash = model_dflash(c.m) != NULL))
		dspark_lines(c.m, argv[0], &o);
	else if (model_attach_line(c.m, line, sizeof line) == 0)
		fprintf(stderr, "%s\n", line);
	if (model_assist_adapt_line(c.m, line, sizeof line) == 0)
		fprintf(stderr, "%s\n", line);
	c.masked = model_draft_ranks(c.m, NULL, NULL) != NULL;
	/* a DFlash drafter needs no MTP head; plain decoding alone, no drafter */
	if (!has_drafter(&c) && (tr == NULL || o.arm != ARM_PLAIN))
		die(1, "%s: model has no MTP head or assistant drafter to draft with", argv[0]);
	if ((c.pr = prompt_new(c.m, o.go.mode, err)) == NULL)
		die(1, "%s: %s", argv[0], err);
	c.nv = model_hparams(c.m)->n_vocab;
	c.stop = prompt_stop_ids(c.pr, &c.n_stop);
	if (tr == NULL)
		read_prompts(&c, text, len);
	if (o.k_lo == 0)	/* no -K: 1-8 for an MTP head */
		o.k_lo = 1, o.k_hi = 8;
	if (o.trace_out != NULL && (c.rec = spectrace_new()) == NULL)
		die(1, "out of memory");
	status = tr != NULL ? run_replay(&c, tr) : run_all(&c);
	save_learned(c.m);
	if (c.rec != NULL)
		status = write_trace(&c, o.trace_out, status);
	spectrace_free(c.rec), spectrace_free(tr);
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
