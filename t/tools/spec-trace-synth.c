/*
 * spec-trace-synth: a synthetic acceptance trace (lib/spectrace.h, what
 * run-spec --trace-in replays) of a chosen mean acceptance, for timing a
 * drafter at acceptances no recorded trace has (a block drafter of a
 * published shape on a random-weight trunk: tools/gpu-dflash-bench.sh).
 *   spec-trace-synth -K K -L L [-d DRAFTER] [-p PROMPTS] [-l LEN[,LEN...]]
 *       [-n N] [-s SEED] [-V N_VOCAB] [OUT]
 * One section of depth K (1..15; a block drafter's K is its block - 1),
 * drafter DRAFTER (default dflash2; mtp, dflash, ... as run-spec names
 * them), PROMPTS prompts (default 8) whose token lengths are the -l list
 * (default 32) in turn, each given N new tokens (default 64; raw, no stop
 * token: a prompt's rounds keep N tokens).  The prompts' ids are drawn
 * below N_VOCAB (default 8192); run-spec replays them as they are on a
 * model of that vocabulary and replaces them with fixed ids of its own on
 * any other (run-spec(1), --trace-in).  The trace is written to OUT (a
 * temporary name renamed; none or '-': standard output), with "model"
 * naming how it was made; it has no "out" (no tokens were decoded), so
 * the replay's "same" column is '-'.
 *
 * The rounds.  A prompt starts with the prefill's token kept; while fewer
 * than N are kept, a round drafts k = min(K, N - kept - 1) tokens (0: the
 * last plain step) and keeps a + 1 of them, a (0..k) drawn so: every
 * draft is accepted with the same probability alpha given that the ones
 * before it were (a constant acceptance by depth, as run-spec's "by depth"
 * figures of a geometric drafter), so P(a >= j) = alpha^j for j <= k and a
 * round of K drafts keeps on average
 *     L = 1 + alpha + alpha^2 + ... + alpha^K = (1 - alpha^(K+1)) / (1 - alpha)
 * tokens; alpha is solved from -L (1 <= L <= K + 1; L = K + 1 is alpha 1,
 * L = 1 alpha 0) by bisection.  a is the inverse of that distribution at
 * u: a = min(k, floor(ln u / ln alpha)), where u runs over one
 * low-discrepancy sequence through every round of the trace, u_r =
 * frac(u_0 + r (sqrt 5 - 1) / 2) (r = 0, 1, ...; u_0 from SEED by
 * splitmix64), so the rounds' mean is L within about K / rounds rather
 * than K / sqrt(rounds) of independent draws; the same SEED, the same
 * trace.  Only the rounds cut short by N (a prompt's last one or two)
 * draft fewer than K, and keep fewer.  Standard error gets one line:
 * alpha, the rounds with drafts, the mean tokens a round of K drafts kept
 * and of all of them (the replay's mean_len).
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"
#include "spectrace.h"
#include "util.h"

#define LENS_MAX 64

struct synth {
	int	K, prompts, n, n_vocab, n_lens;
	int	lens[LENS_MAX];
	double	L, alpha;
	uint64_t seed;
	const char *drafter;
	double	u;		/* the sequence's last point */
	long	rounds, kept;	/* the rounds with drafts, the tokens they kept */
	long	full, full_kept;	/* the same of the rounds of K drafts */
};

static uint64_t
splitmix64(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ULL;
	z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ z >> 27) * 0x94D049BB133111EBULL;
	return z ^ z >> 31;
}

/* The mean tokens a round of K drafts keeps at acceptance a by depth. */
static double
mean_len(double a, int K)
{
	double s = 0, p = 1;

	for (int j = 0; j <= K; j++, p *= a)
		s += p;
	return s;
}

/* alpha in [0, 1] whose mean_len is L (mean_len rises with alpha). */
static double
solve_alpha(double L, int K)
{
	double lo = 0, hi = 1;

	if (L >= K + 1)
		return 1;
	for (int i = 0; i < 100; i++) {
		double mid = (lo + hi) / 2;

		if (mean_len(mid, K) < L)
			lo = mid;
		else
			hi = mid;
	}
	return (lo + hi) / 2;
}

/* The next round's drafts accepted, of k. */
static int
draw(struct synth *y, int k)
{
	double u = y->u;

	y->u += 0.6180339887498949;	/* (sqrt 5 - 1) / 2 */
	y->u -= floor(y->u);
	if (y->alpha >= 1 || u <= 0)
		return k;
	if (y->alpha <= 0)
		return 0;
	return (int)fmin(k, floor(log(u) / log(y->alpha)));
}

/* Prompt i's ids, rounds and end into t. */
static void
one_prompt(struct synth *y, struct spectrace *t, int i)
{
	char err[UTIL_ERRLEN];
	int n_ids = y->lens[i % y->n_lens], kept = 1;
	int32_t *ids = malloc(n_ids * sizeof *ids);

	if (ids == NULL)
		die(1, "out of memory");
	for (int j = 0; j < n_ids; j++)
		ids[j] = (int32_t)(splitmix64(y->seed ^ ((uint64_t)i << 32 | (uint32_t)j)) %
		    (uint64_t)y->n_vocab);
	if (spectrace_prompt(t, ids, n_ids, err) != 0)
		die(1, "prompt %d: %s", i, err);
	free(ids);
	while (kept < y->n) {
		int k = y->n - kept - 1 < y->K ? y->n - kept - 1 : y->K, a = draw(y, k);

		if (spectrace_round(t, k, a, err) != 0)
			die(1, "prompt %d: %s", i, err);
		kept += a + 1;
		if (k > 0)	/* run-spec's rounds: verifies with drafts */
			y->rounds++, y->kept += a + 1;
		if (k == y->K)
			y->full++, y->full_kept += a + 1;
	}
	if (spectrace_end(t, NULL, kept, err) != 0)
		die(1, "prompt %d: %s", i, err);
}

/* "LEN[,LEN...]", each 1..SPECTRACE_NMAX, into y->lens. */
static int
parse_lens(const char *s, struct synth *y)
{
	char buf[1024], *tok, *save = NULL;
	int64_t v;

	if (strlen(s) >= sizeof buf)
		return -1;
	snprintf(buf, sizeof buf, "%s", s);
	y->n_lens = 0;
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		if (y->n_lens == LENS_MAX || util_parse_i64(tok, 1, SPECTRACE_NMAX, &v) != 0)
			return -1;
		y->lens[y->n_lens++] = (int)v;
	}
	return y->n_lens > 0 ? 0 : -1;
}

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s -K K -L L [-d DRAFTER] [-p PROMPTS] [-l LEN[,LEN...]] [-n N]\n"
	    "       [-s SEED] [-V N_VOCAB] [OUT]\n", prog);
	return status;
}

/* The options into y; exits 2 on a bad one. */
static int
parse(int argc, char *argv[], struct synth *y)
{
	int ch, have_k = 0, have_l = 0;
	int64_t v;

	while ((ch = getopt(argc, argv, "K:L:d:p:l:n:s:V:h")) != -1) {
		switch (ch) {
		case 'K':
			if (util_parse_i64(optarg, 1, SPEC_KMAX, &v) != 0)
				die(2, "-K '%s': not a depth in 1..%d", optarg, SPEC_KMAX);
			y->K = (int)v, have_k = 1;
			break;
		case 'L':
			if (util_parse_f64(optarg, 1, SPEC_KMAX + 1, &y->L) != 0)
				die(2, "-L '%s': not a mean of 1..%d tokens a round", optarg,
				    SPEC_KMAX + 1);
			have_l = 1;
			break;
		case 'd': y->drafter = optarg; break;
		case 'p':
			if (util_parse_i64(optarg, 1, 1000000, &v) != 0)
				die(2, "-p '%s': not a prompt count in 1..1000000", optarg);
			y->prompts = (int)v;
			break;
		case 'l':
			if (parse_lens(optarg, y) != 0)
				die(2, "-l '%s': not a list of 1 to %d lengths in 1..%d", optarg,
				    LENS_MAX, SPECTRACE_NMAX);
			break;
		case 'n':
			if (util_parse_i64(optarg, 1, SPECTRACE_NMAX, &v) != 0)
				die(2, "-n '%s': not a token count in 1..%d", optarg, SPECTRACE_NMAX);
			y->n = (int)v;
			break;
		case 's':
			if (util_parse_i64(optarg, 0, INT64_MAX, &v) != 0)
				die(2, "-s '%s': not a seed (0 or more)", optarg);
			y->seed = (uint64_t)v;
			break;
		case 'V':
			if (util_parse_i64(optarg, 1, INT32_MAX, &v) != 0)
				die(2, "-V '%s': not a vocabulary's size", optarg);
			y->n_vocab = (int)v;
			break;
		case 'h': exit(usage(stdout, 0));
		default: exit(usage(stderr, 2));
		}
	}
	if (!have_k || !have_l || argc - optind > 1)
		exit(usage(stderr, 2));
	if (y->L > y->K + 1)
		die(2, "-L %g: a round of %d drafts keeps at most %d tokens", y->L, y->K, y->K + 1);
	return optind;
}

int
main(int argc, char *argv[])
{
	struct synth y = { .prompts = 8, .n = 64, .n_vocab = 8192, .n_lens = 1, .lens = { 32 },
	    .seed = 1, .drafter = "dflash2" };
	struct spectrace_section h = { .temp = 0 };
	struct spectrace *t;
	struct util_ofile *f;
	char err[UTIL_ERRLEN], model[256];
	const char *out;

	prog = base_name(argv[0]);
	out = parse(argc, argv, &y) < argc ? argv[argc - 1] : "-";
	y.alpha = solve_alpha(y.L, y.K);
	y.u = (double)(splitmix64(y.seed) >> 11) * 0x1p-53;
	snprintf(model, sizeof model, "synthetic: spec-trace-synth -K %d -L %g -s %" PRIu64
	    " (acceptance by depth %.6f)", y.K, y.L, y.seed, y.alpha);
	h.K = y.K, h.n_vocab = y.n_vocab, h.n = y.n, h.model = model;
	snprintf(h.drafter, sizeof h.drafter, "%s", y.drafter);
	if (strlen(y.drafter) >= sizeof h.drafter)
		die(2, "-d '%s': not 1 to 31 of a-z, 0-9 and -", y.drafter);
	if ((t = spectrace_new()) == NULL)
		die(1, "out of memory");
	if (spectrace_section(t, &h, err) != 0)
		die(2, "-d '%s': %s", y.drafter, err);
	for (int i = 0; i < y.prompts; i++)
		one_prompt(&y, t, i);
	if ((f = util_ofile_open(out, err)) == NULL)
		die(1, "%s", err);
	spectrace_write(t, f->fp);
	if (ferror(f->fp)) {
		util_ofile_abort(f);
		die(1, "%s: write error", out);
	}
	if (util_ofile_commit(f, err) != 0)
		die(1, "%s", err);
	fprintf(stderr, "%s: K=%d L=%g: acceptance by depth %.6f, %ld rounds with drafts (%ld of "
	    "%d: %.3f tokens a round; all: %.3f)\n", prog, y.K, y.L, y.alpha, y.rounds, y.full, y.K,
	    y.full ? (double)y.full_kept / y.full : 0.0, y.rounds ? (double)y.kept / y.rounds : 0.0);
	spectrace_free(t);
	return finish(0);
}
