/*
 * kernel-check: run every GPU kernel against a CPU reference on random
 * inputs and print one line per check, then ALL GREEN or N FAILED.
 * The quantized products are checked against quant_dequantize_row; the
 * gpu.h fp32 kernels against small double-precision references (fp32.c);
 * then the CUDA backend against the CPU backend op by op through
 * lib/backend's table ("be ..." lines), and with MODEL a model's prefill
 * logits and greedy ids on both backends.
 *
 * This file holds the options and main; the checks live in
 * bin/kernel-check-parts/, one file per section (kc.h declares what they
 * share): noise.c the CPU's float-order noise on a model (also without
 * CUDA); helpers.c; products.c the quantized products; moe_group.c;
 * fp32.c; graph.c graph replay and check_all (the kernel checks);
 * backend.c the CUDA backend against the CPU one, op by op; vision.c;
 * moe.c; rows32.c the 17..32-row steps and check_backend (the backend and
 * model checks); bandwidth.c --bench.
 */
#include "kernel-check-parts/kc.h"

static int
usage(FILE *f, int status)
{
	fprintf(f, "usage: %s [-bt] [-C bytes] [-d device] [-s seed] [-T type] [-U n] [model ...]\n"
	    "       %s -n model\n", prog, prog);
	return status;
}

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
