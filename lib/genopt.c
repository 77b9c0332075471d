/* lib/genopt: the options run-gen and run-spec share */
#include "genopt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "util.h"

/* vals of the long-only options: above any character a tool's own uses */
enum {
	GO_CHAT = 256, GO_RAW, GO_TEMP, GO_TOP_K, GO_TOP_P, GO_MIN_P, GO_REPEAT, GO_SEED, GO_CTX,
	GO_DEVICE, GO_KV_TYPE, GO_JSONL, GO_IGNORE_EOS, GO_PP_STAGES, GO_PP_DEVICES, GO_PP_SPLITS,
};

/* in the order --help lists them; set 0 is the core */
static const struct {
	struct option o;
	unsigned set;
} shared[] = {
	{ { "chat", no_argument, NULL, GO_CHAT }, 0 },
	{ { "raw", no_argument, NULL, GO_RAW }, 0 },
	{ { "temp", required_argument, NULL, GO_TEMP }, 0 },
	{ { "top-k", required_argument, NULL, GO_TOP_K }, GENOPT_FILTERS },
	{ { "top-p", required_argument, NULL, GO_TOP_P }, GENOPT_FILTERS },
	{ { "min-p", required_argument, NULL, GO_MIN_P }, GENOPT_FILTERS },
	{ { "repeat-penalty", required_argument, NULL, GO_REPEAT }, GENOPT_FILTERS },
	{ { "seed", required_argument, NULL, GO_SEED }, 0 },
	{ { "ctx", required_argument, NULL, GO_CTX }, GENOPT_CTX },
	{ { "device", required_argument, NULL, GO_DEVICE }, 0 },
	{ { "kv-type", required_argument, NULL, GO_KV_TYPE }, 0 },
	{ { "jsonl", no_argument, NULL, GO_JSONL }, 0 },
	{ { "ignore-eos", no_argument, NULL, GO_IGNORE_EOS }, 0 },
	{ { "pp-stages", required_argument, NULL, GO_PP_STAGES }, 0 },
	{ { "pp-devices", required_argument, NULL, GO_PP_DEVICES }, 0 },
	{ { "pp-splits", required_argument, NULL, GO_PP_SPLITS }, 0 },
};

void
genopt_init(struct genopt *g, int n)
{
	memset(g, 0, sizeof *g);
	g->mode = PROMPT_AUTO;
	g->n = n;
	sample_defaults(&g->sp);
	if ((g->device = getenv("MEMRA_DEVICE")) == NULL || g->device[0] == '\0')
		g->device = backend_default();
	g->kv_type = getenv("MEMRA_KV_TYPE");
	g->pp_stages = getenv("MEMRA_PP_STAGES");
	g->pp_devices = getenv("MEMRA_PP_DEVICES");
	g->pp_splits = getenv("MEMRA_PP_SPLITS");
	g->n_stage = 1;
}

int
genopt_longopts(unsigned sets, const struct option *own, struct option *out)
{
	size_t n = 0, i;

	for (i = 0; i < sizeof shared / sizeof shared[0]; i++)
		if (shared[i].set == 0 || (shared[i].set & sets) != 0)
			out[n++] = shared[i].o;
	for (i = 0; own != NULL && own[i].name != NULL; i++) {
		if (n + 1 >= GENOPT_MAXOPTS)
			return -1;
		out[n++] = own[i];
	}
	memset(&out[n], 0, sizeof out[n]);
	return 0;
}

/* The options that take a number: 1 set, -1 a bad number, 0 not one of them. */
static int
number(struct genopt *g, int ch, const char *arg)
{
	int64_t i = 0;
	double v = 0;
	int bad;

	switch (ch) {
	case 'n': bad = util_parse_i64(arg, 1, 1000000, &i); g->n = i; break;
	case 't': bad = util_parse_i64(arg, 0, 4096, &i); g->threads = i; break;
	case GO_CTX: bad = util_parse_i64(arg, 2, 1 << 24, &i); g->ctx = i; break;
	case GO_TOP_K: bad = util_parse_i64(arg, 0, 1 << 30, &i); g->sp.top_k = i; break;
	case GO_SEED: bad = util_parse_i64(arg, 0, INT64_MAX, &i); g->sp.seed = i; break;
	case GO_TEMP: bad = util_parse_f64(arg, 0, 1000, &v); g->sp.temp = v; break;
	case GO_TOP_P: bad = util_parse_f64(arg, 1e-9, 1, &v); g->sp.top_p = v; break;
	case GO_MIN_P: bad = util_parse_f64(arg, 0, 1, &v); g->sp.min_p = v; break;
	case GO_REPEAT: bad = util_parse_f64(arg, 1e-6, 1000, &v); g->sp.repeat_penalty = v; break;
	default: return 0;
	}
	return bad ? -1 : 1;
}

int
genopt_set(struct genopt *g, int ch, const char *arg, char *err)
{
	int r;

	switch (ch) {
	case GO_CHAT: g->mode = PROMPT_CHAT; return 1;
	case GO_RAW: g->mode = PROMPT_RAW; return 1;
	case GO_JSONL: g->jsonl = 1; return 1;
	case GO_IGNORE_EOS: g->ignore_eos = 1; return 1;
	case 'f': g->file = arg; return 1;
	case GO_PP_STAGES: g->pp_stages = arg; return 1;	/* checked by genopt_check */
	case GO_PP_DEVICES: g->pp_devices = arg; return 1;
	case GO_PP_SPLITS: g->pp_splits = arg; return 1;
	case GO_DEVICE:
		g->device = arg;
		r = backend_valid_device(arg) ? 1 : -1;
		break;
	case GO_KV_TYPE:
		g->kv_type = arg;
		r = model_kv_type(arg) < 0 ? -1 : 1;
		break;
	default:
		r = number(g, ch, arg);
	}
	if (r < 0)
		util_err(err, "'%s': out of range or not a number", arg);
	return r;
}

int
genopt_operands(const struct genopt *g, int nargs)
{
	return nargs >= 1 && nargs <= 2 && !(nargs == 2 && (g->file != NULL || g->jsonl)) &&
	    !(g->jsonl && g->file != NULL);
}

int
genopt_pp_check(struct genopt *g, char *err)
{
	int64_t n = 1;
	char why[UTIL_ERRLEN];

	g->n_stage = 1;
	memset(g->first, 0, sizeof g->first);
	if (g->pp_stages != NULL && g->pp_stages[0] != '\0' &&
	    util_parse_i64(g->pp_stages, 1, PIPELINE_MAX_STAGES, &n) != 0)
		return util_err(err, "MEMRA_PP_STAGES: '%s': not 1..%d", g->pp_stages,
		    PIPELINE_MAX_STAGES);
	if (n == 1) {
		if ((g->pp_devices && g->pp_devices[0]) || (g->pp_splits && g->pp_splits[0]))
			return util_err(err, "MEMRA_PP_DEVICES, MEMRA_PP_SPLITS: without "
			    "MEMRA_PP_STAGES of 2 or more");
		return 0;
	}
	g->n_stage = (int)n;
	if (pipeline_devices(g->pp_devices && g->pp_devices[0] ? g->pp_devices : NULL, g->n_stage,
	    g->device, g->dev, why) != 0)
		return util_err(err, "MEMRA_PP_DEVICES: %s", why);
	if (g->pp_splits && g->pp_splits[0] && pipeline_parse_splits(g->pp_splits, g->n_stage,
	    1 << 24, g->first, why) != 0)
		return util_err(err, "MEMRA_PP_SPLITS: %s", why);
	return 0;
}

int
genopt_check(struct genopt *g, int *kv_f16, char *err)
{
	if (!backend_valid_device(g->device))
		return util_err(err, "MEMRA_DEVICE: '%s': not cpu or cuda[:N]", g->device);
	if ((*kv_f16 = model_kv_type(g->kv_type)) < 0)
		return util_err(err, "MEMRA_KV_TYPE: '%s': not f32 or f16", g->kv_type);
	return genopt_pp_check(g, err);
}

int
genopt_text(const struct genopt *g, const char *prompt, char **text, size_t *len, char *err)
{
	*text = NULL;
	*len = 0;
	if (g->jsonl)
		return 0;
	if (prompt != NULL) {
		if ((*text = strdup(prompt)) == NULL)
			return util_err(err, "out of memory");
		*len = strlen(prompt);
		return 0;
	}
	*text = util_read_file(g->file ? g->file : "-", len, err);
	return *text != NULL ? 0 : -1;
}

const char *
genopt_device(const struct genopt *g, int s)
{
	return g->n_stage > 1 ? g->dev[s] : g->device;
}

int
genopt_backends(const struct genopt *g, struct backend **be, char *err)
{
	for (int s = 0; s < g->n_stage; s++)
		if ((be[s] = backend_open(genopt_device(g, s), g->threads, err)) == NULL) {
			while (s-- > 0)
				backend_close(be[s]);
			return -1;
		}
	return 0;
}

/* Backend b's MEMRA_CUDA_* settings from the environment: 0, or -2 with err. */
static int
cuda_env(struct backend *b, int *graph_stats, char *err)
{
	char why[UTIL_ERRLEN];
	int gs = backend_graph_env(b, getenv("MEMRA_CUDA_GRAPH"), why);

	if (gs < 0)
		return util_err(err, "MEMRA_CUDA_GRAPH: %s", why), -2;
	if (graph_stats != NULL)
		*graph_stats = gs;
	if (backend_pdl_env(b, getenv("MEMRA_CUDA_PDL"), why) < 0)
		return util_err(err, "MEMRA_CUDA_PDL: %s", why), -2;
	if (backend_gemm_env(b, getenv("MEMRA_CUDA_GEMM"), why) < 0)
		return util_err(err, "MEMRA_CUDA_GEMM: %s", why), -2;
	if (backend_rows_env(b, getenv("MEMRA_CUDA_STEP_ROWS"), why) < 0)
		return util_err(err, "MEMRA_CUDA_STEP_ROWS: %s", why), -2;
	if (backend_moe_group_env(b, getenv("MEMRA_CUDA_MOE_GROUP"), why) < 0)
		return util_err(err, "MEMRA_CUDA_MOE_GROUP: %s", why), -2;
	if (backend_qkt_env(b, getenv("MEMRA_CUDA_QKT"), why) < 0)
		return util_err(err, "MEMRA_CUDA_QKT: %s", why), -2;
	if (backend_qk_stage_env(b, getenv("MEMRA_CUDA_QK_STAGE"), why) < 0)
		return util_err(err, "MEMRA_CUDA_QK_STAGE: %s", why), -2;
	if (backend_q6k_pack_env(b, getenv("MEMRA_CUDA_Q6K_PACK"), why) < 0)
		return util_err(err, "MEMRA_CUDA_Q6K_PACK: %s", why), -2;
	if (backend_chain_env(b, getenv("MEMRA_CUDA_MTP_CHAIN"), why) < 0)
		return util_err(err, "MEMRA_CUDA_MTP_CHAIN: %s", why), -2;
	return 0;
}

int
genopt_open(const struct genopt *g, struct backend **be, int *graph_stats, char *err)
{
	int rc = 0;

	if (genopt_backends(g, be, err) != 0)
		return -1;
	for (int s = 0; s < g->n_stage && rc == 0; s++)
		rc = cuda_env(be[s], s == 0 ? graph_stats : NULL, err);
	for (int s = 0; rc != 0 && s < g->n_stage; s++)
		backend_close(be[s]);
	return rc;
}

void
genopt_split(const struct genopt *g, struct backend **be, struct model_split *sp)
{
	sp->n = g->n_stage;
	sp->be = be;
	sp->dev = (char (*)[PIPELINE_DEVLEN])g->dev;
	sp->first = g->first[0] > 0 ? g->first : NULL;
}
