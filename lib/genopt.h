/*
 * genopt: the generation options run-gen and run-spec share, parsed and
 * checked in one place so that the tools take them alike: the same names,
 * ranges, defaults (the environment's included) and messages.
 *
 * A tool builds its getopt_long table with genopt_longopts (the shared
 * options, then its own), passes every option it does not handle itself
 * to genopt_set, then asks genopt_operands and genopt_check whether the
 * invocation holds together, and genopt_text for the prompt.
 */
#ifndef MEMRA_GENOPT_H
#define MEMRA_GENOPT_H

#include <getopt.h>
#include <stddef.h>

#include "backend.h"
#include "pipeline.h"
#include "prompt.h"
#include "sample.h"

/* Option sets beyond the core (--chat --raw -n --temp --seed -t --device
 * --kv-type --jsonl --ignore-eos -f), or'ed into genopt_longopts's sets. */
#define GENOPT_FILTERS	0x1	/* --top-k --top-p --min-p --repeat-penalty */
#define GENOPT_CTX	0x2	/* --ctx */

/* The core's short options, for a tool's optstring ("K:" GENOPT_SHORT "h"). */
#define GENOPT_SHORT	"n:t:f:"

/* Entries of a table genopt_longopts fills (every set, a tool's own, the end). */
#define GENOPT_MAXOPTS	48

struct genopt {
	enum prompt_mode mode;	/* --chat, --raw; PROMPT_AUTO when neither */
	int	n;		/* -n: new tokens, 1..1000000 */
	int	ctx;		/* --ctx: positions, 2..2^24; 0 when not given */
	int	threads;	/* -t: 0..4096; 0 is every core */
	int	jsonl;		/* --jsonl: JSON requests on stdin */
	int	ignore_eos;	/* --ignore-eos: stop tokens do not end generation: n tokens */
	const char *device;	/* --device, else MEMRA_DEVICE, else backend_default() */
	const char *kv_type;	/* --kv-type, else MEMRA_KV_TYPE; NULL is f32 */
	const char *file;	/* -f: the prompt's file, '-' stdin */
	struct sample_params sp;	/* --temp --seed and the filters over sample_defaults */
	/* pipeline stages (lib/pipeline): --pp-stages, else MEMRA_PP_STAGES (1: none) */
	const char *pp_stages;
	const char *pp_devices;	/* --pp-devices, else MEMRA_PP_DEVICES */
	const char *pp_splits;	/* --pp-splits, else MEMRA_PP_SPLITS */
	/* set by genopt_check: */
	int	n_stage;	/* 1..PIPELINE_MAX_STAGES */
	char	dev[PIPELINE_MAX_STAGES][PIPELINE_DEVLEN];	/* each stage's device */
	int	first[PIPELINE_MAX_STAGES];	/* the splits; first[0] 0: by bytes */
};

/* Defaults: n new tokens, PROMPT_AUTO, sample_defaults, and the device and
 * KV type the environment names (checked by genopt_check). */
void	genopt_init(struct genopt *g, int n);

/*
 * The getopt_long table into out[GENOPT_MAXOPTS]: the core, the sets in
 * sets, then own (ended by an all-zero entry; its vals below 256 and none
 * of 'n', 't', 'f'), ended by an all-zero entry.  Returns 0, or -1 when it
 * would not fit.
 */
int	genopt_longopts(unsigned sets, const struct option *own, struct option *out);

/*
 * Take option ch (as getopt_long returned it) with its argument arg.
 * Returns 1 for a shared option, now set; 0 for any other ch (the tool's
 * own, or getopt's '?'); -1 when arg is out of range or not a number, with
 * "'ARG': out of range or not a number" in err (UTIL_ERRLEN), which the
 * caller prefixes with the option as written (misuse; the setting is then
 * unspecified).
 */
int	genopt_set(struct genopt *g, int ch, const char *arg, char *err);

/* 1 when nargs operands fit: the model, then a prompt unless -f or --jsonl
 * gives it (and not both of those); 0 is misuse. */
int	genopt_operands(const struct genopt *g, int nargs);

/*
 * The settings only the environment may have given wrong: 0 with *kv_f16
 * (1 for an f16 KV cache, 0 for f32), or -1 with "MEMRA_DEVICE: 'X': ..."
 * or "MEMRA_KV_TYPE: 'X': ..." in err (UTIL_ERRLEN).  Misuse either way.
 * The pipeline's settings too: the stages (2..PIPELINE_MAX_STAGES, or 1),
 * their devices (pipeline_devices: a list of another length is an error)
 * and splits (first layers of stages 1..n-1, increasing) into n_stage,
 * dev and first; "MEMRA_PP_DEVICES: ..." and the like when one is wrong.
 */
int	genopt_check(struct genopt *g, int *kv_f16, char *err);

/* genopt_check's pipeline part alone (serve's: it takes no KV type):
 * pp_stages, pp_devices (over device) and pp_splits into n_stage, dev and
 * first; 0, or -1 with "MEMRA_PP_STAGES: ..." and the like in err. */
int	genopt_pp_check(struct genopt *g, char *err);

/* Stage s's device (s < n_stage, as genopt_check settled it): dev[s] of a
 * split, else --device. */
const char *genopt_device(const struct genopt *g, int s);

/*
 * A backend for each of the n_stage stages genopt_check settled (the
 * device of each, or --device for one) into be[n_stage], each with -t
 * threads.  0, or -1 with the reason in err (none left open).
 */
int	genopt_backends(const struct genopt *g, struct backend **be, char *err);

/*
 * genopt_backends, then each backend's MEMRA_CUDA_GRAPH, MEMRA_CUDA_PDL,
 * MEMRA_CUDA_GEMM, MEMRA_CUDA_STEP_ROWS, MEMRA_CUDA_MOE_GROUP and
 * MEMRA_CUDA_MTP_CHAIN settings from the environment, the first backend's
 * recorded-step stats setting into *graph_stats.  0; -1 with err when a
 * backend does not open; -2 with err ("MEMRA_CUDA_PDL: ...") for a bad
 * setting, a misuse (then none is left open).
 */
int	genopt_open(const struct genopt *g, struct backend **be, int *graph_stats, char *err);

struct model_split;

/* The model's split over be[n_stage] (model_options.split when n_stage > 1). */
void	genopt_split(const struct genopt *g, struct backend **be, struct model_split *sp);

/*
 * The prompt text: prompt (the operand) when not NULL, else the contents of
 * -f FILE or of stdin; none (*text NULL) with --jsonl.  *text is malloc'd
 * and NUL-ended (caller frees), *len its bytes.  Returns 0, or -1 with the
 * reason in err (UTIL_ERRLEN).
 */
int	genopt_text(const struct genopt *g, const char *prompt, char **text, size_t *len, char *err);

#endif
