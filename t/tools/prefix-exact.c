/*
 * prefix-exact: where may a prefix cache resume a sequence bit for bit?
 *   prefix-exact [-d device] [-t threads] [-c chunk] [-g int8|bf16] MODEL N
 * Runs N pseudo-random prompt ids through MODEL several ways and compares
 * each way's state (every KV row, every GDN conv and delta-rule state) and
 * the logits that follow with the scheduler's way: MODEL_PREFILL chunks
 * cut at the absolute multiples of chunk (default 512).  One line a way:
 * the floats that differ and the largest difference; then the seconds of
 * a prefill of N rows with the chunked delta rule and with the recurrent
 * one.  Exit 0, 1 on a failure, 2 on misuse.
 *
 * On model A (CPU, 1300 ids, 2026-12-05): one forward and cuts at the
 * multiples of 64 (the chunked delta rule's own chunk) are EXACT; cuts at
 * other rows, and decode rows after the chunks, DIFFER (38-57% of the KV
 * floats, 81% of the recurrent state, 86-88% of the logits; at most 7e-6):
 * only backend_gdn_chunk depends on the cut (with the recurrent rule every
 * way is exact, and no slower here: 0.455 s against 0.522 s).  On a GPU a
 * product of more than 16 rows takes a prompt's kernel too.  The
 * scheduler's blocks of 64 (lib/schedule.h): a cold run cut at the chunks
 * and at L, the prompt's last multiple of 64, against a run resumed at a
 * multiple of 64 inside a chunk (one cut more, as another prompt's L left
 * a snapshot there): EXACT on model A (CPU, 1300 ids, 2026-12-05).
 * On the H200 (-d cuda, the default bf16 prompt GEMM, 2026-12-05) every way
 * DIFFERS from the reference, the resumes inside a chunk too (13-34% of the
 * KV floats, at most 3.9e-6): hence lib/schedule's block is the chunk there
 * (backend_cut_exact).  "chunks again" is the resume at a chunk's end, whose
 * forwards are the cold run's: it must be EXACT everywhere (the kernels are
 * deterministic).  -g picks the CUDA prompt GEMM (MEMRA_CUDA_GEMM's kinds),
 * to see whether the int8 one keeps a row's bits across cuts.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "state.h"
#include "util.h"

struct snap {
	float	*kv, *rec, *lg;
	size_t	n_kv, n_rec;
};

static struct backend *be;
static struct model *md;
static int nv;

/* The host copy of st's used KV rows, its recurrent state, and lg. */
static void
take(struct state *st, const float *lg, struct snap *s)
{
	const struct state_config *c = state_config(st);
	size_t kv = (size_t)state_pos(st) * c->kv_dim, conv = (size_t)(c->d_conv - 1) * c->conv_dim;
	size_t ssm = (size_t)c->n_v_heads * c->dk * c->dv;
	float *p;

	s->n_kv = 2 * kv * c->n_kv, s->n_rec = (conv + ssm) * c->n_rec;
	s->kv = malloc((s->n_kv + 1) * sizeof(float));
	s->rec = malloc((s->n_rec + 1) * sizeof(float));
	s->lg = malloc(nv * sizeof(float));
	if (s->kv == NULL || s->rec == NULL || s->lg == NULL)
		die(1, "out of memory");
	p = s->kv;
	for (int i = 0; i < c->n_kv; i++, p += 2 * kv)
		if (backend_read(be, p, state_k(st, i), kv) || backend_read(be, p + kv, state_v(st, i), kv))
			die(1, "%s", backend_errmsg(be));
	p = s->rec;
	for (int l = 0; l < c->n_rec; l++, p += conv + ssm)
		if (backend_read(be, p, state_conv(st, l), conv) ||
		    backend_read(be, p + conv, state_ssm(st, l), ssm))
			die(1, "%s", backend_errmsg(be));
	memcpy(s->lg, lg, nv * sizeof(float));
}

static void
drop(struct snap *s)
{
	free(s->kv), free(s->rec), free(s->lg);
}

static void
diff(const char *what, const float *a, const float *b, size_t n, long *nd, double *mx)
{
	*nd = 0, *mx = 0;
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof *a) != 0) {
			double d = fabs((double)a[i] - b[i]);

			(*nd)++;
			if (d > *mx)
				*mx = d;
		}
	(void)what;
}

static void
report(const char *way, const struct snap *ref, const struct snap *s)
{
	long nk, nr, nl;
	double mk, mr, ml;

	diff("kv", ref->kv, s->kv, ref->n_kv, &nk, &mk);
	diff("rec", ref->rec, s->rec, ref->n_rec, &nr, &mr);
	diff("logits", ref->lg, s->lg, nv, &nl, &ml);
	printf("%-44s kv %7ld/%zu (max %.3g)  rec %7ld/%zu (max %.3g)  logits %5ld/%d (max %.3g)  %s\n",
	    way, nk, ref->n_kv, mk, nr, ref->n_rec, mr, nl, nv, ml,
	    nk + nr + nl == 0 ? "EXACT" : "DIFFERS");
}

/*
 * ids[0..n) through st from position 0: forwards cut at cuts[] (the ends,
 * ascending, the last n), each with flags; rows past `decode_from` one at
 * a time (flags 0, the scheduler's decode).  Logits of the last row in lg.
 */
static void
run(struct state *st, const int32_t *ids, int n, const int *cuts, int ncut, int flags,
    int decode_from, float *lg)
{
	int from = 0;

	if (state_reset(st) != 0)
		die(1, "%s", state_errmsg(st));
	for (int i = 0; i < ncut && from < decode_from; i++) {
		int to = cuts[i] < decode_from ? cuts[i] : decode_from;

		if (model_forward(md, st, ids + from, to - from, flags, lg, NULL) != 0)
			die(1, "%s", model_errmsg(md));
		from = to;
	}
	for (; from < n; from++)
		if (model_forward(md, st, ids + from, 1, 0, lg, NULL) != 0)
			die(1, "%s", model_errmsg(md));
}

/* The chunk ends of the scheduler: multiples of c, then n. */
static int
chunk_cuts(int n, int c, int *cuts)
{
	int k = 0;

	for (int e = c; e < n; e += c)
		cuts[k++] = e;
	cuts[k++] = n;
	return k;
}

/* The scheduler's cuts with prefix blocks of 64: chunk ends and L, the prompt's last
 * multiple of 64 before n (not a chunk end), then n; with s > 0 a resume there too. */
static int
block_cuts(int n, int c, int s, int *cuts)
{
	int k = 0, L = (n - 1) / 64 * 64;

	for (int e = 64; e < n; e += 64)
		if (e % c == 0 || e == L || e == s)
			cuts[k++] = e;
	cuts[k++] = n;
	return k;
}

static double
time_prefill(struct state *st, const int32_t *ids, int n, int flags, float *lg)
{
	double best = -1;

	for (int r = 0; r < 3; r++) {
		double t0 = util_now();

		if (state_reset(st) != 0 || model_forward(md, st, ids, n, flags, lg, NULL) != 0)
			die(1, "%s", model_errmsg(md));
		if (best < 0 || util_now() - t0 < best)
			best = util_now() - t0;
	}
	return best;
}

static void
study(const int32_t *ids, int n, int chunk)
{
	char err[UTIL_ERRLEN], way[128];
	struct state *st = model_state_new(md, n + 1, 0, err);
	float *lg = malloc(nv * sizeof *lg);
	int cuts[4096], k, odd[3] = { n / 3 | 1, (2 * n) / 3 | 1, n };
	struct snap ref, s;

	if (st == NULL || lg == NULL)
		die(1, "%s", st ? "out of memory" : err);
	k = chunk_cuts(n, chunk, cuts);
	run(st, ids, n, cuts, k, MODEL_PREFILL, n, lg), take(st, lg, &ref);
	printf("reference: %d ids in MODEL_PREFILL chunks at multiples of %d\n", n, chunk);
#define WAY(name, call) do { call; take(st, lg, &s); report(name, &ref, &s); drop(&s); } while (0)
	WAY("chunks again (a resume at a chunk's end)", run(st, ids, n, cuts, k, MODEL_PREFILL, n,
	    lg));
	WAY("prefill in one forward", run(st, ids, n, &n, 1, MODEL_PREFILL, n, lg));
	k = chunk_cuts(n, 64, cuts);
	WAY("prefill cut at multiples of 64", run(st, ids, n, cuts, k, MODEL_PREFILL, n, lg));
	WAY("prefill cut at n/3|1, 2n/3|1 (odd)", run(st, ids, n, odd, 3, MODEL_PREFILL, n, lg));
	k = chunk_cuts(n, chunk, cuts);
	snprintf(way, sizeof way, "chunks to %d, then %d decode rows", n - n % chunk > 0 ?
	    n - n % chunk : n / 2, n % chunk ? n % chunk : n - n / 2);
	WAY(way, run(st, ids, n, cuts, k, MODEL_PREFILL, n % chunk ? n - n % chunk : n / 2, lg));
	WAY("every row a decode row", run(st, ids, n, cuts, k, MODEL_PREFILL, 0, lg));
	WAY("one forward, recurrent delta rule (flags 0)", run(st, ids, n, &n, 1, 0, n, lg));
	k = chunk_cuts(n, chunk, cuts);
	WAY("chunks, recurrent delta rule (flags 0)", run(st, ids, n, cuts, k, 0, n, lg));
	drop(&ref);
	/* the same comparisons against decode rows, the recurrent rule's reference */
	run(st, ids, n, cuts, k, MODEL_PREFILL, 0, lg), take(st, lg, &ref);
	printf("reference: %d ids, every row a decode row\n", n);
	WAY("one forward, recurrent delta rule (flags 0)", run(st, ids, n, &n, 1, 0, n, lg));
	WAY("odd cuts, recurrent delta rule (flags 0)", run(st, ids, n, odd, 3, 0, n, lg));
	drop(&ref);
	/* blocks of 64 (lib/schedule.h): the cold run also cut at L; a resume at a
	 * snapshot S inside a chunk, another prompt's L, adds a cut at S */
	k = block_cuts(n, chunk, 0, cuts);
	run(st, ids, n, cuts, k, MODEL_PREFILL, n, lg), take(st, lg, &ref);
	printf("reference: chunks of %d and L = %d, the prompt's last block of 64\n", chunk,
	    (n - 1) / 64 * 64);
	for (int i = 0, at[2] = { (n - 1) / 64 * 64 - 64, chunk + 64 }; i < 2; i++)
		if (at[i] > 0 && at[i] % chunk != 0 && at[i] < (n - 1) / 64 * 64) {
			snprintf(way, sizeof way, "resumed at %d inside a chunk", at[i]);
			k = block_cuts(n, chunk, at[i], cuts);
			WAY(way, run(st, ids, n, cuts, k, MODEL_PREFILL, n, lg));
		}
	drop(&ref);
	printf("prefill of %d rows: chunked delta rule %.4f s, recurrent %.4f s (best of 3)\n", n,
	    time_prefill(st, ids, n, MODEL_PREFILL, lg), time_prefill(st, ids, n, 0, lg));
	free(lg);
	state_free(st);
}

int
main(int argc, char *argv[])
{
	char err[UTIL_ERRLEN];
	const char *dev = "cpu", *gemm = NULL;
	int ch, nt = 0, chunk = 512, n;
	int32_t *ids;
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	prog = "prefix-exact";
	while ((ch = getopt(argc, argv, "d:t:c:g:")) != -1)
		switch (ch) {
		case 'd': dev = optarg; break;
		case 'g': gemm = optarg; break;
		case 't': nt = atoi(optarg); break;
		case 'c': chunk = atoi(optarg); break;
		default: return 2;
		}
	if (argc - optind != 2 || (n = atoi(argv[optind + 1])) < 2 || n > 4000 || chunk < 1) {
		fprintf(stderr, "usage: prefix-exact [-d device] [-t threads] [-c chunk] [-g int8|bf16] "
		    "MODEL N\n");
		return 2;
	}
	if ((be = backend_open(dev, nt, err)) == NULL)
		die(1, "%s", err);
	if (backend_gemm_env(be, gemm, err) != 0)
		die(2, "-g %s: %s", gemm, err);
	if ((md = model_open(argv[optind], be, err)) == NULL)
		die(1, "%s", err);
	nv = model_hparams(md)->n_vocab;
	if ((ids = malloc(n * sizeof *ids)) == NULL)
		die(1, "out of memory");
	for (int i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		ids[i] = (int32_t)(x % (uint64_t)nv);
	}
	study(ids, n, chunk);
	free(ids);
	model_close(md);
	backend_close(be);
	return 0;
}
