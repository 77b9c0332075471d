/*
 * serve: an OpenAI-compatible HTTP server over the library.  One process:
 * connection threads parse requests, tokenize prompts and shape the
 * replies; one worker thread owns the models and runs lib/schedule's step
 * loop (continuous batching: MEMRA_MAX_SESSIONS sessions at once, a
 * bounded FIFO queue behind them, then 503 with Retry-After).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "account.h"
#include "auth.h"
#include "backend.h"
#include "genopt.h"
#include "grammar.h"
#include "http.h"
#include "json.h"
#include "learned.h"
#include "media.h"
#include "model.h"
#include "openai.h"
#include "prefix.h"
#include "prompt.h"
#include "reply.h"
#include "request.h"
#include "schedboot.h"
#include "schedule.h"
#include "spec.h"
#include "util.h"
#include "tower.h"
#include "vision.h"

#define MAX_MODELS 8

extern char **environ;

struct cfg {
	const char *models, *host, *port, *api_key, *device, *compat;
	const char *draft, *trim, *full_prec;
	const char *asst_ranks;	/* MEMRA_GEMMA_DRAFT_RANKS: the assistant's head trimmed */
	int	asst_adapt;	/* MEMRA_GEMMA_TRIM_ADAPT: learned slots in it, 0 none */
	const char *dspark;	/* MEMRA_DSPARK_DRAFT when MEMRA_DSPARK_SPEC arms it, else NULL */
	const char *dflash_prec;	/* MEMRA_DFLASH_PREC, resolved ("q4" by default) */
	const char *keys_file;	/* MEMRA_API_KEYS_FILE */
	int	ctx, max_sessions, spec_k, threads, serve_spec;
	int	queue, chunk, step_prefill, reuse, block;
	long	prefix_mb;	/* -1: sized from free memory */
	struct auth_limits lim;	/* MEMRA_RATE_RPM, MEMRA_RATE_TPM: each key's defaults */
	int	drain_s;	/* MEMRA_DRAIN_S */
	int	header_s, body_s, idle_s, write_s;	/* MEMRA_{HEADER,BODY,IDLE,WRITE}_TIMEOUT_S */
	int	max_conns;	/* MEMRA_MAX_CONNECTIONS */
	int	vision;		/* MEMRA_GEMMA_VISION: images in chat messages */
	const char *mmproj;	/* MEMRA_GEMMA_MMPROJ: the tower (NULL: the model's checkpoint) */
	const char *vdevice;	/* MEMRA_GEMMA_VISION_DEVICE: the tower's device (NULL:
				 * the models' first) */
	int	image_tokens;	/* MEMRA_IMAGE_TOKENS: an image's soft tokens (0: the tower's) */
	struct media_limits ml;	/* MEMRA_MAX_IMAGES, MEMRA_IMAGE_MB, MEMRA_REQUEST_IMAGE_MB */
	struct genopt go;	/* the pipeline split (MEMRA_PP_STAGES, MEMRA_PP_DEVICES,
				 * MEMRA_PP_SPLITS), the stages' devices and threads */
};

struct served {
	char	*name, *spec;
	struct model *m;
	struct prompt *pr;
	int	nv, k;		/* k: speculative draft length, 0 plain */
	int	lane;		/* in the scheduler */
	struct grammar_vocab *gv;	/* response_format's: made at its first use */
	struct grammar_cache *gc;
	int	vis;		/* 1: takes images (the server's tower) */
	struct vision_tokens vt;	/* its vocabulary's image markers */
	int	learned_warned;	/* its learned slots failed to save once (under server.mu) */
};

struct job {
	struct served *sv;
	int	fd, max_tokens;	/* max_tokens: the request's, within the context */
	int	stalled;	/* a write passed its deadline: the client stopped reading */
	struct request rq;
	long	id;
	struct sched_seq **seq;	/* [rq.q.n] */
	struct account_req *acct;	/* what the access log and metrics get */
	struct media md;	/* the images of its messages */
	struct vision_prompt vp;	/* their soft tokens in its prompt */
};

struct server {
	struct cfg c;
	struct backend *be;	/* the first stage's (the only one's without a split) */
	struct backend *bes[PIPELINE_MAX_STAGES];	/* [c.go.n_stage] each stage's */
	struct served mod[MAX_MODELS];
	int	n_mod;
	struct sched *sc;
	pthread_mutex_t mu;
	int	graph_stats;	/* MEMRA_CUDA_GRAPH=stats */
	int	graph_said;	/* a recording failure was reported */
	struct auth *auth;
	struct account *acct;
	struct tower *tw;	/* MEMRA_GEMMA_VISION's tower, or NULL */
	size_t	max_body;	/* a request's body, bytes */
};

struct conn {
	struct server *s;
	int	fd;
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [--models spec] [--host H] [--port P] [--ctx N] [--max-sessions N]\n"
	    "       [--spec-k K] [--draft file] [--frspec-trim file] [--full-prec 0 | 1]\n"
	    "       [--gemma-draft-ranks file] [--gemma-trim-adapt N] [--dspark-spec 0 | 1]\n"
	    "       [--dspark-draft drafter] [--dflash-prec q4 | q8 | bf16 | f32 | keep]\n"
	    "       [--prefix-cache-mb N] [--prefix-block N] [--compat openai] [--api-key key]\n"
	    "       [-t N]"
	    "       [--device cpu | cuda[:N]] [--queue N] [--prefill-chunk N]\n"
	    "       [--step-prefill N] [--serve-spec 0 | 1] [--reuse-pool 0 | 1]\n"
	    "       [--api-keys-file file] [--rate-rpm N] [--rate-tpm N] [--drain-s N]\n"
	    "       [--header-timeout-s N] [--body-timeout-s N] [--idle-timeout-s N]\n"
	    "       [--write-timeout-s N] [--max-connections N]\n"
	    "       [--gemma-vision 0 | 1] [--mmproj file] [--gemma-vision-device cpu | cuda[:N]]\n"
	    "       [--image-tokens N] [--max-images N] [--image-mb N] [--request-image-mb N]\n"
	    "       [--pp-stages N] [--pp-devices list] [--pp-splits list]\n", prog);
	if (fp == stdout)
		fputs("  --models SPEC        name=model[+draft][,name2=model2...] (MEMRA_MODELS)\n"
		    "  --host H, --port P   listening address (MEMRA_HOST 127.0.0.1, MEMRA_PORT 8080)\n"
		    "  --ctx N              context positions per request (MEMRA_CTX, 4096)\n"
		    "  --max-sessions N     sessions running at once (MEMRA_MAX_SESSIONS, 4)\n"
		    "  --queue N            requests waiting beyond them, then 503 (MEMRA_QUEUE, 4 x sessions)\n"
		    "  --prefill-chunk N    prompt tokens a prefill chunk (MEMRA_PREFILL_CHUNK, 512)\n"
		    "  --step-prefill N     prompt tokens a step prefills (MEMRA_STEP_PREFILL, 4 x chunk)\n"
		    "  --serve-spec 0|1     0: no speculative decoding (MEMRA_SERVE_SPEC, 1)\n"
		    "  --spec-k K           draft tokens per round, 0 plain (MEMRA_SPEC_K, 3;\n"
		    "                       a DFlash drafter's block - 1)\n"
		    "  --draft FILE         external MTP draft GGUF, or a gemma4 trunk's assistant\n"
		    "                       drafter (MEMRA_MTP_DRAFT, MEMRA_DRAFT)\n"
		    "  --frspec-trim FILE   self-trim the draft head (MEMRA_FRSPEC_TRIM)\n"
		    "  --full-prec 0|1      1: the full head drafts (MEMRA_FULL_PREC)\n"
		    "  --gemma-draft-ranks FILE  trim the assistant's head to a ranks file\n"
		    "                       (MEMRA_GEMMA_DRAFT_RANKS)\n"
		    "  --gemma-trim-adapt N N learned slots in that trimmed head, kept in\n"
		    "                       FILE.learned; 0 none (MEMRA_GEMMA_TRIM_ADAPT, 0)\n"
		    "  --dspark-spec 0|1    1 arms the DFlash2 drafter, disabling MTP spec\n"
		    "                       (MEMRA_DSPARK_SPEC)\n"
		    "  --dspark-draft D     the DFlash / DFlash2 drafter: a directory, file or hf:\n"
		    "                       spec (MEMRA_DSPARK_DRAFT)\n"
		    "  --dflash-prec P      its weights at load: q4, q8, bf16, f32, keep\n"
		    "                       (MEMRA_DFLASH_PREC, q4)\n"
		    "  --prefix-cache-mb N  each model's prefix cache, 0 off (MEMRA_PREFIX_CACHE_MB,\n"
		    "                       from free memory)\n"
		    "  --prefix-block N     its blocks' tokens, the reuse grain: a multiple of 64 that\n"
		    "                       divides the chunk, or the chunk (MEMRA_PREFIX_BLOCK, 64;\n"
		    "                       the chunk where 64 does not divide it, and on cuda)\n"
		    "  --reuse-pool 0|1     0: no parked conversations (MEMRA_REUSE_POOL, 1)\n"
		    "  --compat openai      the API dialect (MEMRA_COMPAT)\n"
		    "  --api-key KEY        require Authorization: Bearer KEY (MEMRA_API_KEY)\n"
		    "  --api-keys-file FILE accepted keys' sha256 digests, one a line (MEMRA_API_KEYS_FILE)\n"
		    "  --rate-rpm N         requests a minute a key, 0 no limit (MEMRA_RATE_RPM, 0)\n"
		    "  --rate-tpm N         prompt + completion tokens a minute a key (MEMRA_RATE_TPM, 0)\n"
		    "  --drain-s N          SIGTERM/SIGINT: seconds to finish what runs (MEMRA_DRAIN_S, 30)\n"
		    "  --header-timeout-s N a request's header, whole, then 408 (MEMRA_HEADER_TIMEOUT_S,\n"
		    "                       10)\n"
		    "  --body-timeout-s N   its body after the header, then 408 (MEMRA_BODY_TIMEOUT_S, 60)\n"
		    "  --idle-timeout-s N   a kept-alive connection waits for its next request\n"
		    "                       (MEMRA_IDLE_TIMEOUT_S, 30)\n"
		    "  --write-timeout-s N  a response that can send nothing so long is given up, its\n"
		    "                       sessions cancelled (MEMRA_WRITE_TIMEOUT_S, 30)\n"
		    "  --max-connections N  connections at once, then 503 (MEMRA_MAX_CONNECTIONS,\n"
		    "                       4 x (sessions + queue) + 16)\n"
		    "  --gemma-vision 0|1   1: images in chat messages, through Gemma-4's vision tower\n"
		    "                       (MEMRA_GEMMA_VISION, 0)\n"
		    "  --mmproj FILE        the tower: an mmproj GGUF or HF checkpoint\n"
		    "                       (MEMRA_GEMMA_MMPROJ, the model's own checkpoint)\n"
		    "  --gemma-vision-device DEV\n"
		    "                       the tower's device: cpu or cuda[:N], a backend of its\n"
		    "                       own (MEMRA_GEMMA_VISION_DEVICE, the models' device)\n"
		    "  --image-tokens N     soft tokens an image may take: 70, 140, 280, 560 or 1120\n"
		    "                       (MEMRA_IMAGE_TOKENS, the checkpoint's image processor's)\n"
		    "  --max-images N       images a request may send (MEMRA_MAX_IMAGES, 8)\n"
		    "  --image-mb N         MiB an image may have (MEMRA_IMAGE_MB, 16)\n"
		    "  --request-image-mb N MiB a request's images may have in all\n"
		    "                       (MEMRA_REQUEST_IMAGE_MB, 32)\n"
		    "  --pp-stages N        split each model into N pipeline stages, a device\n"
		    "                       each (MEMRA_PP_STAGES, 1: no split)\n"
		    "  --pp-devices LIST    the stages' devices, comma-separated: N (cuda:N), cpu\n"
		    "                       or cuda:N (MEMRA_PP_DEVICES, cuda:0.. on a GPU, else\n"
		    "                       --device)\n"
		    "  --pp-splits LIST     the first layers of stages 1..N-1 (MEMRA_PP_SPLITS,\n"
		    "                       else by bytes)\n"
		    "  -t N                 CPU threads (default: all cores)\n"
		    "  --device D           cpu, cuda or cuda:N (MEMRA_DEVICE)\n"
		    "  -h, --help           this text\n", fp);
	return status;
}

/* --- responses --- */

/* A response with extra header lines xh ("" or lines ending in CRLF). */
static int
respond_x(int fd, int status, const char *ctype, const char *xh, const char *body, size_t n,
    int keep)
{
	char h[512];
	int hl = snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%s"
	    "Content-Length: %zu\r\nConnection: %s\r\n\r\n", status, http_reason(status), ctype,
	    xh, n, keep ? "keep-alive" : "close");

	return http_write(fd, h, hl) != 0 || http_write(fd, body, n) != 0 ? -1 : 0;
}

static int
respond(int fd, int status, const char *ctype, const char *body, size_t n, int keep)
{
	return respond_x(fd, status, ctype, "", body, n, keep);
}

static int
respond_error(int fd, int status, const char *msg, int keep)
{
	size_t n;
	char *b = openai_error(status, msg, &n);
	/* busy: a client may retry after a second (the openai SDK reads it) */
	int rc = b == NULL ? -1 : respond_x(fd, status, "application/json", status == 503 ?
	    "Retry-After: 1\r\n" : "", b, n, keep);

	free(b);
	return rc;
}

/* What a generation request's job was: its model and prompt tokens. */
static void
acct_job(struct account_req *a, const char *model, size_t n_prompt)
{
	a->model = model, a->n_prompt = n_prompt;
}

/* What its reply was: tokens, seconds queued, when the first came, the client left. */
static void
acct_generated(struct account_req *a, int n_gen, double wait, double t_first, int gone)
{
	a->n_gen = n_gen, a->wait = wait, a->t_first = t_first, a->gone = gone;
}

/* --- generation (the worker) --- */

/* lib/reply's writes: the stream's bytes to job arg's connection (a
 * client that stops reading stalls it past the write deadline). */
static int
reply_write(void *arg, const char *p, size_t n)
{
	struct job *j = arg;

	if (http_write(j->fd, p, n) == 0)
		return 0;
	j->stalled |= errno == ETIMEDOUT;
	return -1;
}

/* lib/reply's question: 1 when the client closed its end of the
 * connection (what it sent before stays readable). */
static int
reply_gone(void *arg)
{
	char c;

	return recv(((struct job *)arg)->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Job j's reply rp, on its connection's thread, from the scheduler's tokens. */
static void
run_job(struct server *s, struct job *j, struct reply *rp)
{
	static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
	    "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
	char err[UTIL_ERRLEN] = "";
	double t0 = util_now();
	struct reply_stats st;
	int rc;

	if (j->rq.q.stream && reply_write(j, h, sizeof h - 1) != 0)
		reply_drop(rp);
	rc = reply_run(rp, s->sc, j->seq, err);
	reply_stats(rp, &st);
	if (rc != 0) {
		warnmsg("request %ld: %s", j->id, err);
		if (!j->rq.q.stream)
			respond_error(j->fd, 500, err, 1), j->acct->status = 500;
	} else if (j->rq.q.stream)
		reply_close(rp);
	else if (!st.gone) {
		size_t bl;
		char *b = reply_whole(rp, &bl);

		if (b == NULL)
			respond_error(j->fd, 500, "out of memory", 1);
		else if (respond(j->fd, 200, "application/json", b, bl, 1) != 0)
			j->stalled |= errno == ETIMEDOUT;
		free(b);
	}
	acct_generated(j->acct, st.n_gen, st.wait, st.first >= 0 ? t0 + st.first : -1, st.gone);
	j->acct->n_cached = st.cached, j->acct->stalled = j->stalled;
}

/* The CUDA graph line when the server goes idle: a recording failure once,
 * and with stats the counts. */
static void
graph_note(struct server *s)
{
	const struct backend_graph_stats *g = backend_graph_stats(s->be);
	char buf[UTIL_ERRLEN + 100];

	if (!s->graph_stats && (g->why[0] == '\0' || s->graph_said))
		return;
	s->graph_said = g->why[0] != '\0';
	if (backend_graph_note(s->be, s->graph_stats, buf, sizeof buf) != NULL)
		fprintf(stderr, "[serve] cuda graph: %s\n", buf);
}

/*
 * The devices' memory now, summed over a split's devices (the host's
 * once for every CPU stage), each made the worker's current device first.
 */
static void
mem_sample(struct server *s)
{
	size_t fr = 0, all = 0, f1, a1;

	for (int i = 0; i < s->c.go.n_stage; i++) {
		int seen = 0;

		for (int j = 0; j < i; j++)
			seen |= (backend_host(s->bes[i]) && backend_host(s->bes[j])) ||
			    strcmp(s->c.go.dev[i], s->c.go.dev[j]) == 0;
		if (seen || backend_use(s->bes[i]) != 0 ||
		    backend_mem_info(s->bes[i], &f1, &a1) != 0)
			continue;
		fr += f1, all += a1;
	}
	if (all > 0)
		account_mem(s->acct, fr, all);
}

/*
 * The models' learned draft slots to their files: at_exit 1 when they
 * changed (said), else when a periodic save is due.  A failure is said
 * once a model and the server goes on (the slots move speed only).
 */
static void
save_learned(struct server *s, int at_exit)
{
	char err[UTIL_ERRLEN];
	int n, rc, said;

	for (int i = 0; i < s->n_mod; i++) {
		struct served *sv = &s->mod[i];

		if ((rc = model_assist_save(sv->m, at_exit, &n, err)) > 0 && at_exit)
			fprintf(stderr, "[gemma-draft] %s: trim adapt: %d learned slots written to %s\n",
			    sv->name, n, model_assist_learned_path(sv->m));
		if (rc >= 0)
			continue;
		pthread_mutex_lock(&s->mu);
		said = sv->learned_warned, sv->learned_warned = 1;
		pthread_mutex_unlock(&s->mu);
		if (!said)
			warnmsg("%s: MEMRA_GEMMA_TRIM_ADAPT: learned slots not saved: %s (said once; "
			    "the drafts go on with them)", sv->name, err);
	}
}

/* The worker: the scheduler's steps while there is work. */
static void *
worker(void *arg)
{
	struct server *s = arg;

	while (sched_wait(s->sc) == 0) {
		if (sched_step(s->sc) == 0)
			graph_note(s), mem_sample(s);
		save_learned(s, 0);
	}
	return NULL;
}

/* Queue j with the scheduler: 0, or -1 with err (*full when busy). */
static int
submit(struct server *s, struct job *j, int *full, char *err)
{
	int n_stop;
	const int32_t *stop = prompt_stop_ids(j->sv->pr, &n_stop);
	struct sched_req q = { .lane = j->sv->lane, .ids = j->rq.ids, .n_ids = (int)j->rq.n_ids,
	    .sp = j->rq.q.sp, .max_tokens = j->max_tokens, .ignore_eos = j->rq.q.ignore_eos,
	    .stop = stop, .n_stop = n_stop, .logprobs = j->rq.q.logprobs,
	    .top_logprobs = j->rq.q.top_logprobs, .grammar = j->rq.grammar, .vp = &j->vp };
	int rc;

	j->id = j->acct->id;
	rc = sched_submit_n(s->sc, &q, j->rq.q.n, j->seq, full, err);
	vision_prompt_free(&j->vp);	/* the scheduler holds a copy */
	return rc;
}

/* --- requests (connection threads) --- */

static struct served *
find_model(struct server *s, const char *name)
{
	if (name == NULL)
		return s->n_mod == 1 ? &s->mod[0] : NULL;
	for (int i = 0; i < s->n_mod; i++)
		if (strcmp(s->mod[i].name, name) == 0)
			return &s->mod[i];
	return NULL;
}

/*
 * The grammar of j's response_format (json_object: any object;
 * json_schema: its schema) or of its tool calls into j->rq.grammar,
 * compiled over the model's vocabulary (made at its first use) or from its
 * cache; 0, or -1 with err naming the field.
 */
static int
format_grammar(struct server *s, struct job *j, char *err)
{
	struct served *sv = j->sv;
	const struct tokenizer *tok = prompt_tokenizer(sv->pr);
	const int32_t *stop;
	char why[UTIL_ERRLEN];
	int n_stop, rc = request_format(&j->rq, tok, sv->name, err);

	if (rc <= 0)
		return rc;
	stop = prompt_stop_ids(sv->pr, &n_stop);
	pthread_mutex_lock(&s->mu);
	if (sv->gc == NULL && (sv->gv = grammar_vocab_new(tok, stop, n_stop, why)) != NULL &&
	    (sv->gc = grammar_cache_new(sv->gv, 64)) == NULL) {
		grammar_vocab_free(sv->gv), sv->gv = NULL;
		util_err(why, "out of memory");
	}
	pthread_mutex_unlock(&s->mu);
	if (sv->gc == NULL)
		return util_err(err, "%s", why);
	return request_grammar(&j->rq, sv->gc, err);
}

/* Queue j with the scheduler and answer it: 0, or -1 with err (*full when busy). */
static int
serve_job(struct server *s, struct job *j, int *full, char *err)
{
	struct reply_req rr = { .q = &j->rq.q, .think = j->rq.think, .forced = j->rq.forced,
	    .max_tokens = j->max_tokens, .write = reply_write, .gone = reply_gone, .arg = j };
	struct reply *rp;

	if ((j->seq = calloc(j->rq.q.n, sizeof *j->seq)) == NULL)
		return util_err(err, "out of memory");
	if (submit(s, j, full, err) != 0)
		return -1;
	rr.r = (struct openai_resp){ .id = j->id, .chat = j->rq.chat, .model = j->sv->name,
	    .created = (long)time(NULL), .prompt_tokens = j->rq.n_ids,
	    .tok = prompt_tokenizer(j->sv->pr), .types = request_types(&j->rq) };
	if ((rp = reply_new(&rr)) == NULL) {
		for (int k = 0; k < j->rq.q.n; k++)
			sched_release(s->sc, j->seq[k]);
		*full = 2;	/* (500) */
		return util_err(err, "out of memory");
	}
	run_job(s, j, rp);
	reply_free(rp);
	return 0;
}

/*
 * The images of j's messages into its prompt, through the tower (one
 * request at a time): each marker the template put there expanded into
 * the image's soft-token rows (counted in the prompt's tokens).  0, or -1
 * with err.
 */
static int
with_images(struct server *s, struct job *j, char *err)
{
	int32_t *ids;
	size_t n;
	int rc;

	if (j->md.n == 0)
		return 0;
	rc = tower_prompt(s->tw, &j->md, &j->sv->vt, j->rq.ids, j->rq.n_ids, &ids, &n, &j->vp, err);
	media_free(&j->md);	/* the files' bytes: done with */
	if (rc != 0)
		return -1;
	free(j->rq.ids);
	j->rq.ids = ids, j->rq.n_ids = n;
	return 0;
}

/* A generation request; returns 1 when the connection stays open. */
static int
completion(struct server *s, int fd, const struct http_req *req, int chat, struct account_req *a)
{
	struct job j = { .fd = fd, .acct = a };
	char err[UTIL_ERRLEN] = "";
	struct json *q = json_parse(req->body, req->body_len, err);
	int status = 400, keep = 1, full = 0;

	if (q == NULL) {
		respond_error(fd, 400, err, 1), a->status = 400;
		return 1;
	}
	if (q->type != JSON_OBJECT)
		util_err(err, "the request body is not a JSON object");
	else if ((j.sv = find_model(s, json_get_str(q, "model"))) == NULL)
		status = 404, util_err(err, "model '%s': not served here",
		    json_get_str(q, "model") ? json_get_str(q, "model") : "(none)");
	else if (request_parse(&j.rq, q, chat, j.sv->nv, s->c.max_sessions, err) == 0 &&
	    (!chat || media_parse(json_get(q, "messages"), j.sv->vis ? &s->c.ml : NULL, &j.md,
	    err) == 0) &&
	    request_prompt(&j.rq, q, j.sv->pr, j.sv->nv, j.sv->name, err) == 0 &&
	    format_grammar(s, &j, err) == 0 && with_images(s, &j, err) == 0) {
		if ((int)j.rq.n_ids >= s->c.ctx)
			util_err(err, "prompt of %zu tokens: does not fit in the context of %d",
			    j.rq.n_ids, s->c.ctx);
		else {
			j.max_tokens = s->c.ctx - (int)j.rq.n_ids;	/* past the context: clamped, "length" */
			if (j.rq.q.max_tokens > 0 && j.rq.q.max_tokens < j.max_tokens)
				j.max_tokens = j.rq.q.max_tokens;
			if (serve_job(s, &j, &full, err) != 0)
				status = full == 1 ? 503 : full == 2 ? 500 : 400;
			else
				status = 0, keep = !j.rq.q.stream;
		}
	}
	if (status != 0)
		respond_error(fd, status, err, 1), a->status = status;
	acct_job(a, j.sv ? j.sv->name : NULL, status == 0 ? j.rq.n_ids : 0);	/* ran: counted */
	json_free(q);
	request_free(&j.rq);
	media_free(&j.md), vision_prompt_free(&j.vp);
	free(j.seq);
	return keep;
}

/* --- operations: keys, limits, metrics, drain, the access log --- */

/* lib/account's access log line. */
static void
access_line(void *arg, const char *line)
{
	fprintf(stderr, "[serve] %s\n", line);
}

/* The metrics page. */
static void
metrics_page(struct server *s, int fd)
{
	size_t n;
	char *b = account_scrape(s->acct, s->sc, &n);

	if (b == NULL)
		respond_error(fd, 500, "out of memory", 1);
	else
		respond(fd, 200, "text/plain; version=0.0.4; charset=utf-8", b, n, 1);
	free(b);
}

/* A refusal in OpenAI's error shape, with its type, code and extra headers. */
static void
respond_refusal(int fd, const struct account_refusal *f)
{
	size_t n;
	char *b = openai_error_code(f->msg, f->type, f->code, &n);

	if (b != NULL)
		respond_x(fd, f->status, "application/json", f->xh, b, n, 1);
	free(b);
}

/* The key of req and, for a generation, its limits: 0, or -1 after a 401 or 429. */
static int
admit(struct server *s, int fd, const struct http_req *req, int gen, struct account_req *a)
{
	struct account_refusal f;

	if (account_key(s->acct, a, http_header(req, "Authorization"), &f) != 0 ||
	    (gen && account_limit(s->acct, a, &f) != 0)) {
		respond_refusal(fd, &f);
		return -1;
	}
	return 0;
}

static void
models_list(struct server *s, int fd)
{
	const char *names[MAX_MODELS];
	size_t n;
	char *b;

	for (int i = 0; i < s->n_mod; i++)
		names[i] = s->mod[i].name;
	if ((b = openai_models(names, s->n_mod, &n)) != NULL)
		respond(fd, 200, "application/json", b, n, 1);
	free(b);
}

static const char *const endpoints[] = {
	"/health", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/completions",
};

/* Answer req on its way in: 1 when the connection stays open. */
static int
dispatch(struct server *s, int fd, const struct http_req *req, struct account_req *a)
{
	const char *path = a->endpoint;
	int get = strcmp(req->method, "GET") == 0, post = strcmp(req->method, "POST") == 0;
	int gen = strcmp(path, "/v1/chat/completions") == 0 || strcmp(path, "/v1/completions") == 0;

	if (account_draining(s->acct)) {	/* the connection closes: a client retries elsewhere */
		a->status = 503;
		respond_error(fd, 503, "server shutting down", 0);
		return 0;
	}
	if (strcmp(path, "other") == 0 || (gen ? !post : !get)) {
		a->status = strcmp(path, "other") == 0 ? 404 : 405;
		respond_error(fd, a->status, a->status == 404 ? "no such endpoint" : gen ?
		    "method not allowed: use POST" : "method not allowed: use GET", 1);
		return 1;
	}
	if (strcmp(path, "/health") == 0)
		return respond(fd, 200, "application/json", "{\"status\": \"ok\"}\n", 17, 1), 1;
	if (strcmp(path, "/metrics") == 0)
		return metrics_page(s, fd), 1;
	if (admit(s, fd, req, gen, a) != 0)
		return 1;
	if (!gen)
		return models_list(s, fd), 1;
	return completion(s, fd, req, strcmp(path, "/v1/chat/completions") == 0, a);
}

/* One request; 1 when the connection stays open. */
static int
route(struct server *s, int fd, const struct http_req *req)
{
	struct account_req a;
	size_t pl = strcspn(req->target, "?");
	int keep;

	account_begin(s->acct, &a, req->method);
	a.endpoint = "other";
	for (size_t i = 0; i < sizeof endpoints / sizeof *endpoints; i++)
		if (strlen(endpoints[i]) == pl && strncmp(req->target, endpoints[i], pl) == 0)
			a.endpoint = endpoints[i];
	keep = dispatch(s, fd, req, &a);
	account_end(s->acct, &a);
	return keep;
}

/* Close fd after a reply, what the client sent unread read first (at
 * most 64 KiB, without waiting), so that no RST overtakes the reply. */
static void
close_gently(int fd)
{
	char junk[4096];

	shutdown(fd, SHUT_WR);
	for (int i = 0; i < 16 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0; i++)
		;
	close(fd);
}

static void *
connection(void *arg)
{
	struct conn *c = arg;
	const struct cfg *cf = &c->s->c;
	/* the first request's header is due header_s after the accept */
	struct http_limits lim = { HTTP_HEAD_MAX, c->s->max_body, -1, cf->header_s, cf->body_s };
	struct http_req *req = malloc(sizeof *req);
	char *buf = NULL, err[UTIL_ERRLEN];
	size_t cap = 0, have = 0;
	int status;

	if (http_write_deadline(c->fd, cf->write_s) != 0)
		warnmsg("connection: the write deadline: %s", strerror(errno));
	for (long n; req != NULL;) {
		if ((n = http_read(c->fd, &buf, &cap, &have, &lim, req, &status, err)) <= 0) {
			if (n < 0 && status != 0)
				respond_error(c->fd, status, err, 0), account_refused(c->s->acct, status);
			break;
		}
		if (!route(c->s, c->fd, req) || !req->keep_alive)
			break;
		memmove(buf, buf + n, have - n);
		have -= n;
		lim.idle_s = cf->idle_s;
	}
	close_gently(c->fd);
	account_conn_close(c->s->acct);
	free(buf), free(req), free(c);
	return NULL;
}

/* --- boot --- */

static const char *const refused[] = {
	"MEMRA_DSPARK_", "MEMRA_GEMMA_", "MEMRA_PP_", "MEMRA_VISION_DIR", "MEMRA_QUANTIZE",
};

/* ... but for these, which serve has */
static const char *const implemented[] = {
	"MEMRA_GEMMA_VISION", "MEMRA_GEMMA_MMPROJ", "MEMRA_GEMMA_VISION_DEVICE",
	"MEMRA_DSPARK_SPEC", "MEMRA_DSPARK_DRAFT", "MEMRA_GEMMA_DRAFT_RANKS",
	"MEMRA_GEMMA_TRIM_ADAPT", "MEMRA_PP_STAGES", "MEMRA_PP_DEVICES", "MEMRA_PP_SPLITS",
};

/* 1 when environment entry e sets one of the variables serve implements of a refused family. */
static int
is_implemented(const char *e)
{
	for (size_t i = 0; i < sizeof implemented / sizeof implemented[0]; i++) {
		size_t n = strlen(implemented[i]);

		if (strncmp(e, implemented[i], n) == 0 && e[n] == '=')
			return 1;
	}
	return 0;
}

/* A MEMRA_* variable the cookbook uses for a feature serve lacks: refuse. */
static void
refuse_unknown(void)
{
	for (char **e = environ; *e != NULL; e++)
		for (size_t i = 0; i < sizeof refused / sizeof refused[0] && !is_implemented(*e); i++) {
			size_t n = strlen(refused[i]);

			if (strncmp(*e, refused[i], n) == 0 &&
			    (refused[i][n - 1] == '_' || (*e)[n] == '='))
				die(2, "%.*s: not supported by this server (refusing to run a different "
				    "configuration)", (int)strcspn(*e, "="), *e);
		}
}

static const char *
env(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

static void
int_setting(const char *name, const char *v, long lo, long hi, long *out)
{
	int64_t i;

	if (v != NULL && util_parse_i64(v, lo, hi, &i) != 0)
		die(2, "%s: '%s': out of range %ld..%ld or not a number", name, v, lo, hi);
	if (v != NULL)
		*out = i;
}

/*
 * The DFlash drafter's settings: armed by "1" (MEMRA_DSPARK_SPEC), the
 * drafter (MEMRA_DSPARK_DRAFT) and its precision (MEMRA_DFLASH_PREC).  A
 * drafter that is not armed is said and left.
 */
static void
parse_dspark(const char *const *v, struct cfg *c)
{
	const char *arm = v['Y'], *d = v['W'], *p = v['Z'];

	if (arm != NULL && strcmp(arm, "0") != 0 && strcmp(arm, "1") != 0)
		die(2, "MEMRA_DSPARK_SPEC (--dspark-spec): '%s': not 0 or 1", arm);
	if (p != NULL && model_dflash_prec(p) < -1)
		die(2, "MEMRA_DFLASH_PREC (--dflash-prec): '%s': not q4, q8, bf16, f32 or keep", p);
	c->dflash_prec = p != NULL ? p : "q4";
	if (arm == NULL || strcmp(arm, "1") != 0) {
		if (d != NULL)
			fprintf(stderr, "[dspark] drafter %s not armed (MEMRA_DSPARK_SPEC is not 1): "
			    "MTP spec as before\n", d);
		return;
	}
	if (d == NULL)
		die(2, "MEMRA_DSPARK_SPEC=1: no drafter (MEMRA_DSPARK_DRAFT, --dspark-draft)");
	c->dspark = d;
}

/* The operator's settings: keys, limits, drain. */
static void
parse_ops(const char *const *v, struct cfg *c)
{
	long l;

	c->keys_file = v['K'];
	l = 0, int_setting("MEMRA_RATE_RPM (--rate-rpm)", v['r'], 0, 1L << 30, &l), c->lim.rpm = l;
	l = 0, int_setting("MEMRA_RATE_TPM (--rate-tpm)", v['T'], 0, 1L << 40, &l), c->lim.tpm = l;
	l = 30, int_setting("MEMRA_DRAIN_S (--drain-s)", v['G'], 0, 86400, &l), c->drain_s = l;
	l = 10, int_setting("MEMRA_HEADER_TIMEOUT_S (--header-timeout-s)", v['x'], 1, 3600, &l);
	c->header_s = l;
	l = 60, int_setting("MEMRA_BODY_TIMEOUT_S (--body-timeout-s)", v['y'], 1, 3600, &l);
	c->body_s = l;
	l = 30, int_setting("MEMRA_IDLE_TIMEOUT_S (--idle-timeout-s)", v['z'], 1, 86400, &l);
	c->idle_s = l;
	l = 30, int_setting("MEMRA_WRITE_TIMEOUT_S (--write-timeout-s)", v['w'], 1, 3600, &l);
	c->write_s = l;
	l = 4L * (c->max_sessions + c->queue) + 16;
	int_setting("MEMRA_MAX_CONNECTIONS (--max-connections)", v['N'], 1, 1 << 20, &l);
	c->max_conns = l;
}

/* The vision settings: the tower, an image's budget, what a request may send. */
static void
parse_vision(const char *const *v, struct cfg *c)
{
	static const char *const name[] = { "MEMRA_GEMMA_MMPROJ (--mmproj)",
	    "MEMRA_IMAGE_TOKENS (--image-tokens)", "MEMRA_MAX_IMAGES (--max-images)",
	    "MEMRA_IMAGE_MB (--image-mb)", "MEMRA_REQUEST_IMAGE_MB (--request-image-mb)",
	    "MEMRA_GEMMA_VISION_DEVICE (--gemma-vision-device)" };
	static const char opt[] = "MIiEqO";
	long l;

	l = 0, int_setting("MEMRA_GEMMA_VISION (--gemma-vision)", v['V'], 0, 1, &l);
	c->vision = l;
	for (int i = 0; !c->vision && opt[i] != '\0'; i++)
		if (v[(unsigned char)opt[i]] != NULL)
			die(2, "%s: goes with MEMRA_GEMMA_VISION=1", name[i]);
	c->mmproj = v['M'];
	c->vdevice = v['O'];
	if (c->vdevice != NULL && !backend_valid_device(c->vdevice))
		die(2, "%s: '%s': not cpu or cuda[:N]", name[5], c->vdevice);
	l = 0, int_setting(name[1], v['I'], 0, 1120, &l), c->image_tokens = l;
	if (l != 0 && l != 70 && l != 140 && l != 280 && l != 560 && l != 1120)
		die(2, "%s: '%s': not 70, 140, 280, 560 or 1120", name[1], v['I']);
	l = 8, int_setting(name[2], v['i'], 1, 256, &l), c->ml.max_images = l;
	l = 16, int_setting(name[3], v['E'], 1, 1024, &l), c->ml.image_bytes = (size_t)l << 20;
	l = 32, int_setting(name[4], v['q'], 1, 4096, &l), c->ml.request_bytes = (size_t)l << 20;
	if (!c->vision)
		c->ml.max_images = 0;	/* an image part is refused */
}

/*
 * The pipeline split, as run-gen and run-spec take it (lib/genopt): the
 * stages, their devices (a list of another length is misuse) and the
 * splits, over --device and -t.
 */
static void
parse_pp(const char *const *v, struct cfg *c)
{
	char err[UTIL_ERRLEN];

	genopt_init(&c->go, 1);
	c->go.device = c->device, c->go.threads = c->threads;
	c->go.pp_stages = v['e'], c->go.pp_devices = v['f'], c->go.pp_splits = v['l'];
	if (genopt_pp_check(&c->go, err) != 0)
		die(2, "%s", err);
}

static int
parse(int argc, char *argv[], struct cfg *c)
{
	static const struct option lopts[] = {
		{ "models", required_argument, NULL, 'm' }, { "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' }, { "ctx", required_argument, NULL, 'c' },
		{ "max-sessions", required_argument, NULL, 'S' },
		{ "spec-k", required_argument, NULL, 'k' }, { "draft", required_argument, NULL, 'D' },
		{ "frspec-trim", required_argument, NULL, 'R' },
		{ "full-prec", required_argument, NULL, 'F' },
		{ "gemma-draft-ranks", required_argument, NULL, 'J' },
		{ "gemma-trim-adapt", required_argument, NULL, 'L' },
		{ "dspark-spec", required_argument, NULL, 'Y' },
		{ "dspark-draft", required_argument, NULL, 'W' },
		{ "dflash-prec", required_argument, NULL, 'Z' },
		{ "prefix-cache-mb", required_argument, NULL, 'P' },
		{ "prefix-block", required_argument, NULL, 'b' },
		{ "compat", required_argument, NULL, 'C' }, { "api-key", required_argument, NULL, 'A' },
		{ "device", required_argument, NULL, 'd' }, { "help", no_argument, NULL, 'h' },
		{ "serve-spec", required_argument, NULL, 'X' }, { "queue", required_argument, NULL, 'Q' },
		{ "prefill-chunk", required_argument, NULL, 'U' },
		{ "step-prefill", required_argument, NULL, 'B' },
		{ "reuse-pool", required_argument, NULL, 'o' },
		{ "api-keys-file", required_argument, NULL, 'K' },
		{ "rate-rpm", required_argument, NULL, 'r' },
		{ "rate-tpm", required_argument, NULL, 'T' },
		{ "drain-s", required_argument, NULL, 'G' },
		{ "header-timeout-s", required_argument, NULL, 'x' },
		{ "body-timeout-s", required_argument, NULL, 'y' },
		{ "idle-timeout-s", required_argument, NULL, 'z' },
		{ "write-timeout-s", required_argument, NULL, 'w' },
		{ "max-connections", required_argument, NULL, 'N' },
		{ "gemma-vision", required_argument, NULL, 'V' },
		{ "mmproj", required_argument, NULL, 'M' },
		{ "gemma-vision-device", required_argument, NULL, 'O' },
		{ "image-tokens", required_argument, NULL, 'I' },
		{ "max-images", required_argument, NULL, 'i' },
		{ "image-mb", required_argument, NULL, 'E' },
		{ "request-image-mb", required_argument, NULL, 'q' },
		{ "pp-stages", required_argument, NULL, 'e' },
		{ "pp-devices", required_argument, NULL, 'f' },
		{ "pp-splits", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	const char *v[128] = { 0 };
	long l;
	int ch;

	/* environment first, then the flags over it */
	v['m'] = env("MEMRA_MODELS"), v['H'] = env("MEMRA_HOST"), v['p'] = env("MEMRA_PORT");
	v['c'] = env("MEMRA_CTX"), v['S'] = env("MEMRA_MAX_SESSIONS"), v['k'] = env("MEMRA_SPEC_K");
	v['D'] = getenv("MEMRA_MTP_DRAFT") ? getenv("MEMRA_MTP_DRAFT") : getenv("MEMRA_DRAFT");
	v['R'] = getenv("MEMRA_FRSPEC_TRIM"), v['J'] = env("MEMRA_GEMMA_DRAFT_RANKS");
	v['L'] = env("MEMRA_GEMMA_TRIM_ADAPT");
	v['Y'] = env("MEMRA_DSPARK_SPEC"), v['W'] = env("MEMRA_DSPARK_DRAFT");
	v['Z'] = env("MEMRA_DFLASH_PREC");
	v['F'] = env("MEMRA_FULL_PREC"), v['P'] = env("MEMRA_PREFIX_CACHE_MB");
	v['b'] = env("MEMRA_PREFIX_BLOCK");
	v['C'] = env("MEMRA_COMPAT"), v['A'] = env("MEMRA_API_KEY"), v['d'] = env("MEMRA_DEVICE");
	v['X'] = env("MEMRA_SERVE_SPEC"), v['Q'] = env("MEMRA_QUEUE");
	v['U'] = env("MEMRA_PREFILL_CHUNK"), v['B'] = env("MEMRA_STEP_PREFILL");
	v['o'] = env("MEMRA_REUSE_POOL");
	v['K'] = env("MEMRA_API_KEYS_FILE"), v['r'] = env("MEMRA_RATE_RPM");
	v['T'] = env("MEMRA_RATE_TPM"), v['G'] = env("MEMRA_DRAIN_S");
	v['x'] = env("MEMRA_HEADER_TIMEOUT_S"), v['y'] = env("MEMRA_BODY_TIMEOUT_S");
	v['z'] = env("MEMRA_IDLE_TIMEOUT_S"), v['N'] = env("MEMRA_MAX_CONNECTIONS");
	v['w'] = env("MEMRA_WRITE_TIMEOUT_S");
	v['V'] = env("MEMRA_GEMMA_VISION"), v['M'] = env("MEMRA_GEMMA_MMPROJ");
	v['O'] = env("MEMRA_GEMMA_VISION_DEVICE");
	v['I'] = env("MEMRA_IMAGE_TOKENS"), v['i'] = env("MEMRA_MAX_IMAGES");
	v['E'] = env("MEMRA_IMAGE_MB"), v['q'] = env("MEMRA_REQUEST_IMAGE_MB");
	v['e'] = env("MEMRA_PP_STAGES"), v['f'] = env("MEMRA_PP_DEVICES");
	v['l'] = env("MEMRA_PP_SPLITS");
	while ((ch = getopt_long(argc, argv, "t:h", lopts, NULL)) != -1) {
		if (ch == 'h')
			exit(usage(stdout, 0));
		if (ch == '?' || ch == ':')
			return -1;
		v[ch] = optarg;
	}
	if (optind != argc)
		return -1;
	c->models = v['m'], c->host = v['H'] ? v['H'] : "127.0.0.1";
	c->port = v['p'] ? v['p'] : "8080", c->api_key = v['A'];
	c->draft = v['D'], c->trim = v['R'], c->full_prec = v['F'], c->asst_ranks = v['J'];
	l = 0, int_setting("MEMRA_GEMMA_TRIM_ADAPT (--gemma-trim-adapt)", v['L'], 0, LEARNED_MAX,
	    &l), c->asst_adapt = l;
	if (l > 0 && (c->asst_ranks == NULL || !c->asst_ranks[0]))
		die(2, "MEMRA_GEMMA_TRIM_ADAPT (--gemma-trim-adapt): learned slots extend a trimmed "
		    "head: set MEMRA_GEMMA_DRAFT_RANKS (--gemma-draft-ranks) too");
	parse_dspark(v, c);
	c->device = v['d'] ? v['d'] : backend_default();
	c->compat = v['C'];
	l = 4096, int_setting("MEMRA_CTX (--ctx)", v['c'], 16, 1 << 24, &l), c->ctx = l;
	l = 4, int_setting("MEMRA_MAX_SESSIONS (--max-sessions)", v['S'], 1, 4096, &l);
	c->max_sessions = l;
	l = 4L * c->max_sessions, int_setting("MEMRA_QUEUE (--queue)", v['Q'], 0, 1 << 20, &l);
	c->queue = l;
	l = 512, int_setting("MEMRA_PREFILL_CHUNK (--prefill-chunk)", v['U'],
	    SCHED_CHUNK_MIN, 1 << 20, &l), c->chunk = l;
	l = 4L * c->chunk, int_setting("MEMRA_STEP_PREFILL (--step-prefill)", v['B'], c->chunk,
	    1 << 24, &l), c->step_prefill = l;
	l = 1, int_setting("MEMRA_SERVE_SPEC (--serve-spec)", v['X'], 0, 1, &l), c->serve_spec = l;
	l = -1, int_setting("MEMRA_SPEC_K (--spec-k)", v['k'], 0, SPEC_KMAX, &l), c->spec_k = l;
	l = -1, int_setting("MEMRA_PREFIX_CACHE_MB (--prefix-cache-mb)", v['P'], 0, 1L << 30, &l);
	c->prefix_mb = l;
	l = 0;	/* lib/schedule's: 64 where it divides the chunk and the device allows it */
	int_setting("MEMRA_PREFIX_BLOCK (--prefix-block)", v['b'], 1, 1 << 20, &l), c->block = l;
	if (c->block > 0 && (c->chunk % c->block != 0 ||
	    (c->block != c->chunk && c->block % 64 != 0)))
		die(2, "MEMRA_PREFIX_BLOCK (--prefix-block): %d: not a multiple of 64 that divides "
		    "the prefill chunk of %d (MEMRA_PREFILL_CHUNK), nor the chunk", c->block, c->chunk);
	l = 1, int_setting("MEMRA_REUSE_POOL (--reuse-pool)", v['o'], 0, 1, &l), c->reuse = l;
	l = 8080, int_setting("MEMRA_PORT (--port)", c->port, 0, 65535, &l);
	l = 0, int_setting("-t", v['t'], 0, 4096, &l), c->threads = l;
	parse_ops(v, c);
	parse_vision(v, c);
	if (c->models == NULL)
		die(2, "no model: set MEMRA_MODELS or --models (name=spec[+draft],...)");
	if (c->compat != NULL && strcmp(c->compat, "openai") != 0)
		die(2, "MEMRA_COMPAT: '%s': only 'openai' is supported", c->compat);
	if (c->full_prec != NULL && strcmp(c->full_prec, "0") != 0 &&
	    strcmp(c->full_prec, "1") != 0)
		die(2, "MEMRA_FULL_PREC: '%s': not 0 or 1", c->full_prec);
	if (!backend_valid_device(c->device))
		die(2, "MEMRA_DEVICE (--device): '%s': not cpu or cuda[:N]", c->device);
	parse_pp(v, c);
	return 0;
}

/* The scheduler's events (lib/schedboot's lines): a conversation resumed from the pool,
 * or one that extends a parked conversation served cold and why. */
static void
note(void *arg, const struct sched_note *n)
{
	struct server *s = arg;
	const char *name = "?";
	int dspark = 0;

	for (int i = 0; i < s->n_mod; i++)
		if (s->mod[i].lane == n->lane)
			name = s->mod[i].name, dspark = model_dflash(s->mod[i].m) != NULL;
	schedboot_note(stderr, name, dspark, n);
}

/* Model sv's sessions in the scheduler, and the boot lines that say what they cost. */
static void
sessions(struct server *s, struct served *sv)
{
	struct schedboot_cfg c = { s->c.ctx, s->c.max_sessions, s->c.reuse, s->c.spec_k >= 0,
	    s->c.prefix_mb };
	struct schedboot_model m;
	struct sched_fit f;
	char err[UTIL_ERRLEN];

	if ((sv->lane = sched_add_model(s->sc, sv->m, sv->k, s->c.spec_k >= 0, &f, err)) < 0)
		die(1, "%s: MEMRA_MAX_SESSIONS x MEMRA_CTX: %s", sv->name, err);
	m = (struct schedboot_model){ sv->name, sv->m, sv->lane, sv->k };
	schedboot_lines(stderr, s->sc, &m, &c, &f);
}

/* The DFlash drafter's boot proof: arming it disables MTP spec; its path and shape, its
 * trim, its precision. */
static void
dspark_lines(struct server *s, struct served *sv)
{
	char line[512];

	fprintf(stderr, "[dspark] arming DFlash2 disables MTP spec%s\n",
	    model_hparams(sv->m)->n_mtp > 0 ? " (the trunk's MTP head stays unused)" : "");
	for (int i = 0; model_dflash_line(sv->m, sv->name, i, line, sizeof line) == 0; i++)
		fprintf(stderr, "%s\n", line);
	fprintf(stderr, "[dspark] %s: precision %s (MEMRA_DFLASH_PREC)\n", sv->name,
	    s->c.dflash_prec);
}

/*
 * MEMRA_GEMMA_VISION=1: the tower (MEMRA_GEMMA_MMPROJ, else model sv's own
 * checkpoint) on a backend of its own (MEMRA_GEMMA_VISION_DEVICE, by default
 * the models' first device: the requests' threads run it while the
 * scheduler's thread runs the models' backend), opened before the first
 * model's sessions are sized, its largest image's working memory held from
 * the start (lib/tower): what the sessions leave never has to hold an image.
 */
static void
vision_tower(struct server *s, const struct served *sv)
{
	const struct cfg *c = &s->c;
	struct tower_config tc = { c->mmproj != NULL ? c->mmproj : model_path(sv->m),
	    c->vdevice != NULL ? c->vdevice : genopt_device(&c->go, 0),
	    c->threads, c->image_tokens, getenv("MEMRA_CUDA_GEMM"), getenv("MEMRA_CUDA_STEP_ROWS") };
	char err[UTIL_ERRLEN];

	if ((s->tw = tower_open(&tc, err)) == NULL)
		die(1, "MEMRA_GEMMA_VISION: %s", err);
	if (!tower_host(s->tw) && tower_took(s->tw) > 0)
		fprintf(stderr, "[vision] the tower takes %zu MiB of %s: its weights and the working "
		    "memory of a %d-token image, before the sessions are sized\n",
		    tower_took(s->tw) >> 20, tower_device(s->tw), tower_image_tokens(s->tw));
}

/*
 * The tower's models, each checked (tower_fits), the proof lines, and a body
 * limit that holds a request's images in base64.
 */
static void
vision_boot(struct server *s)
{
	const struct cfg *c = &s->c;
	const struct vision_hparams *hp;
	char err[UTIL_ERRLEN];

	s->max_body = (size_t)16 << 20;
	if (!c->vision)
		return;
	for (int i = 0; i < s->n_mod; i++) {
		struct served *sv = &s->mod[i];

		if (tower_fits(s->tw, sv->name, sv->m, sv->pr, &sv->vt, err) != 0)
			die(1, "MEMRA_GEMMA_VISION: %s", err);
		sv->vis = 1;
	}
	hp = vision_hparams(tower_vision(s->tw));
	fprintf(stderr, "[vision] gemma4 tower: %d layers, hidden %d, patch %d, pool %d, %d soft "
	    "tokens an image at most, image rows %s (%s)\n", hp->n_layer, hp->n_embd, hp->patch,
	    hp->pool, tower_image_tokens(s->tw), hp->bidir ? "bidirectional" : "causal",
	    tower_src(s->tw));
	fprintf(stderr, "[vision] images in chat messages as data: URIs: %d a request at most, "
	    "%zu MiB each, %zu MiB in all; the tower on %s%s%s, one request at a time\n",
	    c->ml.max_images, c->ml.image_bytes >> 20, c->ml.request_bytes >> 20,
	    tower_host(s->tw) ? "the CPU (" : "", tower_device(s->tw), tower_host(s->tw) ? ")" : "");
	if (c->ml.request_bytes / 3 * 4 + ((size_t)1 << 20) > s->max_body)
		s->max_body = c->ml.request_bytes / 3 * 4 + ((size_t)1 << 20);
}

/* The models a MEMRA_MODELS list names: its fields between commas that are not empty. */
static int
count_models(const char *list)
{
	int n = 0;

	for (const char *p = list; *p != '\0'; p++)
		n += *p != ',' && (p == list || p[-1] == ',');
	return n;
}

static void
load(struct server *s, char *spec)
{
	struct served *sv = &s->mod[s->n_mod];
	struct model_options mo = { 0 };
	struct model_split sp;
	char *eq = strchr(spec, '='), err[UTIL_ERRLEN] = "", line[4352];

	if (s->n_mod == MAX_MODELS)
		die(2, "MEMRA_MODELS: more than %d models", MAX_MODELS);
	if (eq == NULL || eq == spec || eq[1] == '\0')
		die(2, "MEMRA_MODELS: '%s': not name=spec", spec);
	*eq = '\0';
	sv->name = spec, sv->spec = eq + 1;
	for (int i = 0; i < s->n_mod; i++)
		if (strcmp(s->mod[i].name, sv->name) == 0)
			die(2, "MEMRA_MODELS: model name '%s' given twice", sv->name);
	model_options_set(&mo, sv->spec, NULL, s->c.draft, s->c.trim, s->c.full_prec);
	mo.asst_ranks = s->c.asst_ranks, mo.asst_adapt = s->c.asst_adapt;
	mo.dflash = s->c.dspark, mo.dflash_prec = s->c.dflash_prec;
	genopt_split(&s->c.go, s->bes, &sp);	/* every model split alike */
	mo.split = s->c.go.n_stage > 1 ? &sp : NULL;
	if (mo.draft != NULL)
		fprintf(stderr, "[mtp-draft] loading external MTP draft: %s\n", mo.draft);
	if ((sv->m = model_open_opts(sv->spec, s->be, &mo, err)) == NULL)
		die(1, "%s", err);
	fprintf(stderr, "[model] %s: %s\n", sv->name, model_path(sv->m));
	for (int i = 0; model_pp_line(sv->m, i, line, sizeof line) == 0; i++)
		fprintf(stderr, "%s\n", line);	/* the split's proof, as run-gen's */
	if (model_dflash(sv->m) != NULL)
		dspark_lines(s, sv);
	else if (model_attach_line(sv->m, line, sizeof line) == 0)
		fprintf(stderr, "%s\n", line);
	if (model_draft_path(sv->m) != NULL)	/* the cookbook's proof of a +draft file */
		fprintf(stderr, "[worker] %s: regime draft attached (%s)\n", sv->name,
		    model_draft_path(sv->m));
	if (model_assist_adapt_line(sv->m, line, sizeof line) == 0)
		fprintf(stderr, "%s\n", line);
	if ((sv->pr = prompt_new(sv->m, PROMPT_AUTO, err)) == NULL)
		die(1, "%s: %s", sv->spec, err);
	sv->nv = model_hparams(sv->m)->n_vocab;
	if (schedboot_k(sv->m, sv->name, s->c.spec_k, s->c.serve_spec, &sv->k, err) != 0)
		die(2, "%s", err);
	fprintf(stderr, "[model] %s: ctx=%d K=%d (%s)%s\n", sv->name, s->c.ctx, sv->k,
	    sv->k ? schedboot_drafter(sv->m) : s->c.serve_spec ?
	    "plain decode" : "plain decode: MEMRA_SERVE_SPEC=0",
	    prompt_tokenizer(sv->pr) == NULL ? ", no tokenizer: token-id prompts only" :
	    prompt_is_chat(sv->pr) ? "" : ", no chat template");
	if (s->c.vision && s->tw == NULL)
		vision_tower(s, sv);	/* its memory before any model's sessions */
	/* an image's rows lie in one piece of a sliding layer's attention (gemma4's rings) */
	if (s->tw != NULL && model_ring_hold(sv->m, tower_image_tokens(s->tw)) != 0)
		die(1, "%s: %s", sv->name, model_errmsg(sv->m));
	sessions(s, sv);
	if (account_add_model(s->acct, sv->name, sv->lane) != 0)
		die(1, "out of memory");
	s->n_mod++;
}

/* The API keys: the keys file's digests and MEMRA_API_KEY's (the
 * plaintext is wiped from the environment or the command line). */
static void
ops_keys(struct server *s)
{
	struct cfg *c = &s->c;
	char err[UTIL_ERRLEN], *text;
	size_t n;
	int from_file = 0;

	if ((s->auth = auth_new(&c->lim)) == NULL)
		die(1, "out of memory");
	if (c->keys_file != NULL) {
		if ((text = util_read_file(c->keys_file, &n, err)) == NULL)
			die(1, "MEMRA_API_KEYS_FILE: %s", err);
		if (auth_load(s->auth, text, n, c->keys_file, err) != 0)
			die(2, "MEMRA_API_KEYS_FILE: %s", err);
		free(text);
		if ((from_file = auth_count(s->auth)) == 0)
			die(2, "MEMRA_API_KEYS_FILE: %s: no key in it", c->keys_file);
	}
	if (c->api_key != NULL) {
		if (auth_add_key(s->auth, c->api_key, strlen(c->api_key), "MEMRA_API_KEY", err) != 0)
			die(2, "MEMRA_API_KEY (--api-key): %s", err);
		explicit_bzero((char *)c->api_key, strlen(c->api_key));
		unsetenv("MEMRA_API_KEY");
	}
	if (auth_count(s->auth) > 0 || c->lim.rpm > 0 || c->lim.tpm > 0)
		fprintf(stderr, "[serve] API keys: %d (%d from %s, %d from MEMRA_API_KEY); a key's "
		    "limits by default: %ld requests, %ld tokens a minute (0: none)\n",
		    auth_count(s->auth), from_file, c->keys_file ? c->keys_file : "no file",
		    auth_count(s->auth) - from_file, c->lim.rpm, c->lim.tpm);
}

/*
 * SIGTERM and SIGINT (blocked in every other thread): the first drains
 * (new requests get 503; the process exits 0 once no request is in
 * flight, 1 when MEMRA_DRAIN_S runs out first), a second exits at once.
 */
static void *
drainer(void *arg)
{
	struct server *s = arg;
	struct timespec tick = { 0, 50 * 1000 * 1000 };
	sigset_t set;
	int sig = 0;
	double end;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM), sigaddset(&set, SIGINT);
	while (sigwait(&set, &sig) != 0)
		;
	account_drain(s->acct);
	end = util_now() + s->c.drain_s;
	fprintf(stderr, "[serve] %s: draining: %d requests in flight, up to %d s (MEMRA_DRAIN_S)\n",
	    sig == SIGTERM ? "SIGTERM" : "SIGINT", account_inflight(s->acct), s->c.drain_s);
	for (;;) {
		if (account_inflight(s->acct) == 0) {
			save_learned(s, 1);
			fprintf(stderr, "[serve] drained: exiting\n");
			exit(0);
		}
		if (util_now() >= end) {
			warnmsg("drain: %d requests still in flight after %d s: exiting",
			    account_inflight(s->acct), s->c.drain_s);
			save_learned(s, 1);
			exit(1);
		}
		if ((sig = sigtimedwait(&set, NULL, &tick)) > 0) {
			warnmsg("%s again: exiting at once", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			_exit(1);
		}
	}
}

static int
listen_on(const struct cfg *c)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_PASSIVE }, *ai;
	int fd, one = 1, rc = getaddrinfo(c->host, c->port, &hints, &ai);

	if (rc != 0)
		die(1, "%s:%s: %s", c->host, c->port, gai_strerror(rc));
	if ((fd = socket(ai->ai_family, ai->ai_socktype, 0)) < 0)
		die(1, "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0)
		die(1, "%s:%s: %s", c->host, c->port, strerror(errno));
	freeaddrinfo(ai);
	return fd;
}

static void
announce(int fd, const struct cfg *c, int n_keys)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char host[128] = "?", port[16] = "?";

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port, sizeof port,
		    NI_NUMERICHOST | NI_NUMERICSERV);
	fprintf(stderr, "[serve] listening on http://%s:%s (max sessions %d, compat openai%s)\n",
	    host, port, c->max_sessions, n_keys > 0 ? ", API key required" : "");
}

/* Past MEMRA_MAX_CONNECTIONS, or no thread for it: 503 (why) and close at
 * once, from the accepting thread. */
static void
refuse_conn(int fd, const char *why)
{
	respond_error(fd, 503, why, 0);
	close_gently(fd);
}

/* Each connection its thread, up to the cap; the header, body and idle
 * deadlines (lib/http) bound how long one holds its thread. */
static void
accept_loop(struct server *s, int lfd)
{
	for (;;) {
		struct conn *c = malloc(sizeof *c);
		pthread_t t;

		if (c == NULL || (c->fd = accept(lfd, NULL, NULL)) < 0) {
			if (c != NULL && errno != EINTR && errno != ECONNABORTED)
				warnmsg("accept: %s", strerror(errno));
			free(c);
			continue;
		}
		c->s = s;
		if (account_conn_open(s->acct, s->c.max_conns) != 0) {
			refuse_conn(c->fd, "too many connections: retry later"), free(c);
			continue;
		}
		if ((errno = pthread_create(&t, NULL, connection, c)) != 0) {
			/* no thread for it (the process's or the system's limit):
			 * told so, never dropped without a word */
			warnmsg("connection: no thread for it: %s", strerror(errno));
			refuse_conn(c->fd, "no thread for this connection: retry later");
			account_conn_refused(s->acct), free(c);
			continue;
		}
		pthread_detach(t);
	}
}

int
main(int argc, char *argv[])
{
	struct server s = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct sched_config sc;
	char err[UTIL_ERRLEN], *models, *save = NULL;
	pthread_t w, d;
	sigset_t sigs;
	int lfd, rc;

	prog = base_name(argv[0]);
	refuse_unknown();
	if (parse(argc, argv, &s.c) != 0)
		return usage(stderr, 2);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM), sigaddset(&sigs, SIGINT);
	if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0)
		die(1, "signal thread: %s", strerror(errno));
	ops_keys(&s);
	if ((s.acct = account_new(&(struct account_config){ .auth = s.auth, .log = access_line },
	    err)) == NULL)
		die(1, "%s", err);
	if (pthread_create(&d, NULL, drainer, &s) != 0)
		die(1, "signal thread: %s", strerror(errno));
	/* a backend a stage (one without a split), each with its MEMRA_CUDA_* settings */
	if ((rc = genopt_open(&s.c.go, s.bes, &s.graph_stats, err)) != 0)
		die(rc == -2 ? 2 : 1, "%s", err);
	s.be = s.bes[0];
	fprintf(stderr, "[serve] device %s\n", backend_name(s.be));
	sched_config_defaults(&sc, s.be, s.c.ctx, s.c.max_sessions);
	sc.max_queue = s.c.queue, sc.chunk = s.c.chunk, sc.step_prefill = s.c.step_prefill;
	sc.block = s.c.block;
	sc.prefix_bytes = s.c.prefix_mb < 0 ? SCHED_PREFIX_AUTO : (size_t)s.c.prefix_mb << 20;
	sc.reuse = s.c.reuse, sc.note = note, sc.note_arg = &s;
	if ((s.sc = sched_new(s.be, &sc, err)) == NULL)
		die(2, "%s", err);
	fprintf(stderr, "[sched] continuous batching: %d sessions, queue %d (then 503), prompt "
	    "chunks of %d, %d prompt tokens a step\n", sc.max_sessions, sc.max_queue, sc.chunk,
	    sc.step_prefill);
	fprintf(stderr, "[sched] reuse pool: %s\n", sc.reuse ? "on: a finished conversation stays "
	    "parked in its slot until the slot is needed (MEMRA_REUSE_POOL=0 turns it off)" :
	    "off (MEMRA_REUSE_POOL=0)");
	if ((models = strdup(s.c.models)) == NULL)
		die(1, "out of memory");
	if (s.c.vision && s.c.mmproj == NULL && count_models(models) > 1)
		die(2, "MEMRA_GEMMA_VISION with %d models: MEMRA_GEMMA_MMPROJ names the tower",
		    count_models(models));
	for (char *m = strtok_r(models, ",", &save); m != NULL; m = strtok_r(NULL, ",", &save))
		load(&s, m);
	if (s.n_mod == 0)
		die(2, "MEMRA_MODELS: no model named");
	vision_boot(&s);
	mem_sample(&s);
	lfd = listen_on(&s.c);
	if (pthread_create(&w, NULL, worker, &s) != 0)
		die(1, "worker thread: %s", strerror(errno));
	announce(lfd, &s.c, auth_count(s.auth));
	accept_loop(&s, lfd);
}
